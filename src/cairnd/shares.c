/*
 * cairnd's shares: keeps the NFS server's exports in line with the datasets.
 *
 * The wanted state is simple to compute: every filesystem of every imported
 * pool whose `sharenfs` is not off, exported at its `mountpoint` (skipped when
 * that is none or legacy). Rather than track each change, cairnd recomputes it
 * after anything that can change it (pool create/import, dataset create,
 * clone, set, inherit, and after destroy/rename/rollback) and applies the
 * difference: exports that are no longer wanted (or moved) go, new ones come,
 * changed options are swapped in place so clients keep their handles.
 *
 * Operations that need a dataset unheld (destroy, rollback) suspend the
 * exports of the dataset and everything below it - once they know they will
 * go ahead (datasets.c) - and resume them afterwards (or unexport them when
 * the dataset is gone): clients meanwhile hear "try again later", never
 * "stale handle", and an operation that still fails leaves the shares as
 * they were. A rename keeps the exports mounted and renames them. Pool
 * export unexports the pool's shares.
 *
 * Every function here runs with the pool table locked (read or write) by the
 * caller, as the rest of the request handling does.
 */
#include "cairnd.h"

#include <cairn/log.h>
#include <cairn/nfs.h>
#include <cairn/util.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SUB "shares"

static nfs_server_t *g_srv;

static void to_nfs_addr(const mgmt_listen_t *l, nfs_listen_addr_t *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->host, sizeof o->host, "%s", l->host);
    o->port = l->port;
}

int cairnd_shares_start(const cairnd_config_t *cfg, char *err, size_t errlen)
{
    nfs_server_config_t nc = {0};
    to_nfs_addr(&cfg->nfs, &nc.nfs);
    to_nfs_addr(&cfg->mount, &nc.mount);
    to_nfs_addr(&cfg->portmap, &nc.portmap);
    nc.max_conns = cfg->nfs_max_conns;
    nc.max_conns_per_client = cfg->nfs_max_conns_per_client;
    nc.idle_timeout_s = cfg->nfs_idle_timeout;
    nc.lease_seconds = cfg->nfs_lease_time;
    nc.grace_seconds = cfg->nfs_grace_time;
    nc.no_delegations = !cfg->nfs_delegations;
    nc.nlm_client_portmap = (uint16_t)cfg->nlm_client_portmap;
    char state[MGMT_PATH_MAX + 8];
    snprintf(state, sizeof state, "%s/nfs", cfg->state_dir);
    if (mkdir(state, 0700) < 0 && errno != EEXIST)
        log_warn(SUB, "cannot create %s: %s", state, strerror(errno));
    nc.state_dir = state;
    nc.defer_accept = true; /* cairnd_shares_serve, once the shares are exported */
    char why[400] = "";
    int rc = nfs_server_start(&nc, &g_srv, why, sizeof why);
    if (rc) {
        snprintf(err, errlen, "cannot start the NFS server: %s", why[0] ? why : strerror(-rc));
        g_srv = NULL;
    }
    return rc;
}

void cairnd_shares_serve(void)
{
    nfs_server_serve(g_srv);
}

void cairnd_shares_stop(void)
{
    if (!g_srv) return;
    nfs_server_stop(g_srv);
    g_srv = NULL;
}

typedef struct wanted {
    dsl_pool_t *dp;
    char name[DSL_NAME_MAX + 1];
    char path[DSL_NAME_MAX + 2];
    char options[1024];
} wanted_t;

typedef struct wanted_list {
    wanted_t *v;
    size_t n, cap;
    dsl_pool_t *dp;
} wanted_list_t;

static void collect_fs(const dsl_dataset_info_t *info, void *arg)
{
    wanted_list_t *wl = arg;
    if (info->type != DSL_TYPE_FILESYSTEM) return;
    dsl_prop_t *p = calloc(1, sizeof *p);
    if (!p) return;
    char err[256];
    wanted_t w = {.dp = wl->dp};
    cairn_strlcpy(w.name, info->name, sizeof w.name);
    if (dsl_prop_get(wl->dp, info->name, "sharenfs", p, err, sizeof err) ||
        !strcmp(p->value, "off") || !p->value[0])
        goto out;
    cairn_strlcpy(w.options, p->value, sizeof w.options);
    if (dsl_prop_get(wl->dp, info->name, "mountpoint", p, err, sizeof err) || p->value[0] != '/')
        goto out;
    cairn_strlcpy(w.path, p->value, sizeof w.path);
    if (wl->n == wl->cap) {
        size_t nc = wl->cap ? wl->cap * 2 : 16;
        wanted_t *nv = realloc(wl->v, nc * sizeof *nv);
        if (!nv) goto out;
        wl->v = nv;
        wl->cap = nc;
    }
    wl->v[wl->n++] = w;
out:
    free(p);
}

void cairnd_shares_refresh(void)
{
    cairnd_shares_refresh_report(NULL, NULL, 0);
}

int cairnd_shares_refresh_report(const char *name, char *why, size_t whylen)
{
    int result = 0;
    if (!g_srv) return 0;
    wanted_list_t wl = {0};
    size_t np = cairnd_pool_dsls(NULL, 0);
    dsl_pool_t **dps = calloc(np + 1, sizeof *dps);
    if (!dps) return -ENOMEM;
    cairnd_pool_dsls(dps, np);
    for (size_t i = 0; i < np; i++) {
        char err[256];
        wl.dp = dps[i];
        dsl_dataset_list(dps[i], NULL, true, 1u << DSL_TYPE_FILESYSTEM, collect_fs, &wl, err,
                         sizeof err);
    }
    free(dps);

    size_t ne = nfs_server_list_exports(g_srv, NULL, 0);
    nfs_export_info_t *cur = calloc(ne + 1, sizeof *cur);
    if (!cur) {
        free(wl.v);
        return -ENOMEM;
    }
    ne = nfs_server_list_exports(g_srv, cur, ne);
    /* Gone first, and moved ones whose old path another dataset wants, so that path is
     * free for it. Any other dataset that moves keeps its export until
     * nfs_server_export swaps in the new one: its clients' handles never meet a
     * moment without it. */
    for (size_t i = 0; i < ne; i++) {
        bool wanted = false, stays = false, path_taken = false;
        for (size_t k = 0; k < wl.n; k++) {
            bool same = !strcmp(wl.v[k].name, cur[i].dataset);
            wanted |= same;
            stays |= same && !strcmp(wl.v[k].path, cur[i].path);
            path_taken |= !same && !strcmp(wl.v[k].path, cur[i].path);
        }
        if (!wanted || (!stays && path_taken)) nfs_server_unexport(g_srv, cur[i].dataset);
    }
    for (size_t k = 0; k < wl.n; k++) {
        bool same = false;
        for (size_t i = 0; i < ne && !same; i++)
            same = !strcmp(wl.v[k].name, cur[i].dataset) && !strcmp(wl.v[k].path, cur[i].path) &&
                   !strcmp(wl.v[k].options, cur[i].options);
        /* Host names in the client lists are resolved again (the options swapped
         * in place), so a client whose address changed is matched by its name. */
        bool names = false;
        if (same) nfs_sharenfs_check_names(wl.v[k].options, &names, NULL, 0);
        if (same && !names) continue;
        char err[512] = "";
        int rc = nfs_server_export(g_srv, wl.v[k].dp, wl.v[k].name, wl.v[k].path,
                                   wl.v[k].options, err, sizeof err);
        if (rc) log_error(SUB, "cannot export %s at %s: %s", wl.v[k].name, wl.v[k].path,
                          err[0] ? err : strerror(-rc));
        if (rc && name && !strcmp(wl.v[k].name, name)) {
            result = rc;
            if (why) snprintf(why, whylen, "%s", err[0] ? err : strerror(-rc));
        }
    }
    free(cur);
    free(wl.v);
    return result;
}

void cairnd_shares_unexport_tree(const char *name)
{
    if (!g_srv) return;
    char base[DSL_NAME_MAX + 1];
    cairn_strlcpy(base, name, sizeof base);
    char *at = strchr(base, '@');
    if (at) *at = '\0';
    size_t bl = strlen(base);
    size_t ne = nfs_server_list_exports(g_srv, NULL, 0);
    nfs_export_info_t *cur = calloc(ne + 1, sizeof *cur);
    if (!cur) return;
    ne = nfs_server_list_exports(g_srv, cur, ne);
    for (size_t i = 0; i < ne; i++)
        if (!strncmp(cur[i].dataset, base, bl) &&
            (cur[i].dataset[bl] == '\0' || cur[i].dataset[bl] == '/'))
            nfs_server_unexport(g_srv, cur[i].dataset);
    free(cur);
}

/* One suspension at a time (nfs_server_suspend wants overlapping ones serialized);
 * held from cairnd_shares_suspend to cairnd_shares_resume. */
static pthread_mutex_t g_suspend_lock = PTHREAD_MUTEX_INITIALIZER;

/* name's filesystem (a snapshot name means its filesystem) and its pool's DSL. */
static dsl_pool_t *tree_of(const char *name, char *base, size_t len)
{
    cairn_strlcpy(base, name, len);
    base[strcspn(base, "@")] = '\0';
    char pool[SPA_NAME_MAX + 1];
    mgmt_dataset_pool(base, pool, sizeof pool);
    return cairnd_pool_dsl(pool);
}

void cairnd_shares_suspend(const char *name)
{
    pthread_mutex_lock(&g_suspend_lock);
    char base[DSL_NAME_MAX + 1];
    dsl_pool_t *dp = tree_of(name, base, sizeof base);
    if (g_srv && dp) nfs_server_suspend(g_srv, dp, base);
}

void cairnd_shares_resume(const char *name, bool gone)
{
    char base[DSL_NAME_MAX + 1];
    dsl_pool_t *dp = tree_of(name, base, sizeof base);
    if (g_srv && dp) {
        if (gone) cairnd_shares_unexport_tree(base);
        else nfs_server_resume(g_srv, dp, base);
    }
    pthread_mutex_unlock(&g_suspend_lock);
}

void cairnd_shares_renamed(const char *name, const char *new_name)
{
    char base[DSL_NAME_MAX + 1];
    dsl_pool_t *dp = tree_of(name, base, sizeof base);
    if (g_srv && dp) nfs_server_rename(g_srv, dp, base, new_name);
}

void cairnd_shares_pool_closing(dsl_pool_t *dp)
{
    if (g_srv && dp) nfs_server_unexport_pool(g_srv, dp);
}

int cairnd_shares_check(const char *value, char *err, size_t errlen)
{
    bool shared;
    return nfs_sharenfs_check(value, &shared, err, errlen);
}

/* `cairn share list`. */
void cairnd_handle_share_list(Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    Cairn__Mgmt__ShareRows *rows = cairnd_arena_alloc(a, sizeof *rows);
    cairn__mgmt__share_rows__init(rows);
    size_t ne = g_srv ? nfs_server_list_exports(g_srv, NULL, 0) : 0;
    nfs_export_info_t *cur = calloc(ne + 1, sizeof *cur);
    if (!cur) {
        cairnd_set_error(resp, a, -ENOMEM, "out of memory");
        return;
    }
    if (g_srv) ne = nfs_server_list_exports(g_srv, cur, ne);
    rows->rows = cairnd_arena_alloc(a, sizeof *rows->rows * (ne + 1));
    for (size_t i = 0; i < ne; i++) {
        Cairn__Mgmt__ShareRow *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__share_row__init(r);
        r->dataset = cairnd_arena_strdup(a, cur[i].dataset);
        r->path = cairnd_arena_strdup(a, cur[i].path);
        r->options = cairnd_arena_strdup(a, cur[i].options);
        char v[16] = "";
        if (cur[i].versions & (1u << 3)) strcat(v, "3");
        if (cur[i].versions & (1u << 4)) strcat(v, v[0] ? ",4" : "4");
        r->versions = cairnd_arena_strdup(a, v);
        r->clients = cur[i].clients;
        rows->rows[rows->n_rows++] = r;
    }
    free(cur);
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_SHARES;
    resp->shares = rows;
}

const nfs_stats_t *cairnd_shares_stats(void)
{
    return g_srv ? nfs_server_stats(g_srv) : NULL;
}

size_t cairnd_shares_exports(nfs_export_info_t *out, size_t cap)
{
    return g_srv ? nfs_server_list_exports(g_srv, out, cap) : 0;
}
