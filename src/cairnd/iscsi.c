/*
 * cairnd's iSCSI glue: the `cairn iscsi` commands, the listener's life, and
 * the configuration kept in the pools (src/iscsi is the protocol; this file
 * decides what is served).
 *
 * Persistence "in the pool", in each pool's configuration store
 * (dsl_pool_config_*):
 *   iscsi.lun:<iqn>:<n>   in the pool of the LUN's volume: target, LUN
 *                         number, volume name and the LU id (serial and NAA
 *                         derive from it, so hosts see the same disk after a
 *                         restart);
 *   iscsi.target:<iqn>    in every imported pool: ACL and CHAP secrets;
 *   iscsi.pr:<iqn>:<n>    next to the LUN's record: the LU id and the SCSI
 *                         layer's state string (which says whether APTPL is
 *                         active), rewritten on every change before the
 *                         command completes, removed with the LUN.
 * On start and on every import the union is loaded: targets are created,
 * LUNs whose volume is in the pool are opened and served, with their stored
 * reservations. While a pool is being exported its LUs are in the ALUA
 * transitioning state (initiators retry) until they go. Reservations are kept after every change, APTPL or not,
 * because a pool that moves to the partner head (an import, docs/ha.md) takes
 * its LUs with it without a power loss: an import restores them all. A start
 * of this daemon is the power loss SPC-4 speaks of: it restores only what an
 * initiator asked to persist through it (APTPL=1) and drops the rest. Exporting a pool takes its LUNs offline; the targets stay.
 * A pool that comes back (import, or start) then gets the records of every
 * target served, so one created or changed while it was exported is in it
 * too (sync_targets). A target destroyed while a pool was exported comes back
 * with that pool: the pool's records are its configuration, and nothing
 * outside the pools remembers the destruction.
 *
 * ALUA standby (a head with a partner group, docs/ha.md): a pool that leaves
 * this head leaves its LUs behind in the standby state (identity only, no
 * volume; g_standby), so an initiator still logged in here is told the path is
 * standby, not that the LU is gone, and sees them become active again if the
 * pool comes back. A head knows the standby LUs of the pools it has served
 * since it started; they go with the target, or when the daemon stops.
 *
 * Every command runs under one mutex; a refusal is a one-line error and
 * changes nothing (a LUN is served only once its record is on disk, and is
 * taken back if the record cannot be written).
 */
#include "cairnd.h"

#include <cairn/iscsi.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/zap.h>
#include <cairn/zvol.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUB "iscsi"
#define REC_MAX 8192

typedef struct cfg_target {
    char name[ISCSI_NAME_MAX + 1];
    char **acl;
    size_t nacl;
    char user[256], secret[256], muser[256], msecret[256];
} cfg_target_t;

/* Where an online LUN's persistent reservations go (the SCSI layer's hook
 * argument): allocated on its own because g_luns moves, and only freed once
 * the LUN is removed, when no command can call the hook any more. */
typedef struct pr_store {
    dsl_pool_t *dp;
    uint64_t luid;
    char key[300];
} pr_store_t;

typedef struct cfg_lun {
    char target[ISCSI_NAME_MAX + 1];
    uint32_t lun;
    char volume[DSL_NAME_MAX + 1];
    uint64_t luid;
    zvol_t *zv;
    dsl_pool_t *dp;
    pr_store_t *prs;
} cfg_lun_t;

/* An LU this head left standby when its pool went (the pool, and the LU's
 * records, are with the partner now). */
typedef struct standby_lun {
    char target[ISCSI_NAME_MAX + 1];
    uint32_t lun;
    uint64_t luid;
} standby_lun_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static iscsi_server_t *g_srv;
static bool g_alua_partner;   /* a partner group is configured: keep standby LUs */
static standby_lun_t *g_standby;
static size_t g_nstandby;
static cfg_target_t *g_targets;
static size_t g_ntargets;
static cfg_lun_t *g_luns;
static size_t g_nluns;

static cfg_target_t *find_target(const char *name)
{
    for (size_t i = 0; i < g_ntargets; i++)
        if (!strcmp(g_targets[i].name, name)) return &g_targets[i];
    return NULL;
}

static cfg_lun_t *find_lun(const char *target, uint32_t lun)
{
    for (size_t i = 0; i < g_nluns; i++)
        if (!strcmp(g_luns[i].target, target) && g_luns[i].lun == lun) return &g_luns[i];
    return NULL;
}

static standby_lun_t *find_standby(const char *target, uint32_t lun)
{
    for (size_t i = 0; i < g_nstandby; i++)
        if (!strcmp(g_standby[i].target, target) && g_standby[i].lun == lun) return &g_standby[i];
    return NULL;
}

/* Whether a LUN number of the target is in use, by an LU here or by one the
 * partner serves (whose pool may come back here). */
static bool lun_taken(const char *target, uint32_t lun)
{
    return find_lun(target, lun) || find_standby(target, lun);
}

static void forget_standby(standby_lun_t *sl)
{
    *sl = g_standby[--g_nstandby];
}

static size_t target_nluns(const char *target)
{
    size_t n = 0;
    for (size_t i = 0; i < g_nluns; i++)
        if (!strcmp(g_luns[i].target, target)) n++;
    return n;
}

/* ------------------------------------------------------------ records */

static size_t target_record(const cfg_target_t *t, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "name=%s\n", t->name);
    for (size_t i = 0; i < t->nacl && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "acl=%s\n", t->acl[i]);
    if (t->user[0] && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "chap_user=%s\nchap_secret=%s\n", t->user,
                              t->secret);
    if (t->muser[0] && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "mchap_user=%s\nmchap_secret=%s\n", t->muser,
                              t->msecret);
    return n < cap ? n : cap;
}

/* Writes the target's record to every imported pool. */
static int save_target(const cfg_target_t *t)
{
    char key[300], *buf = malloc(REC_MAX);
    if (!buf) return -ENOMEM;
    snprintf(key, sizeof key, "iscsi.target:%s", t->name);
    size_t len = target_record(t, buf, REC_MAX);
    dsl_pool_t *dps[64];
    size_t n = cairnd_pool_dsls(dps, 64);
    int rc = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        int r = dsl_pool_config_set(dps[i], key, buf, (uint32_t)len);
        if (r && !rc) rc = r;
    }
    free(buf);
    return rc;
}

static void forget_target(const char *name)
{
    char key[300];
    snprintf(key, sizeof key, "iscsi.target:%s", name);
    dsl_pool_t *dps[64];
    size_t n = cairnd_pool_dsls(dps, 64);
    for (size_t i = 0; i < n && i < 64; i++) dsl_pool_config_remove(dps[i], key);
}

static void lun_key(const cfg_lun_t *l, char *key, size_t cap)
{
    snprintf(key, cap, "iscsi.lun:%s:%u", l->target, l->lun);
}

static void pr_key(const cfg_lun_t *l, char *key, size_t cap)
{
    snprintf(key, cap, "iscsi.pr:%s:%u", l->target, l->lun);
}

static int save_lun(const cfg_lun_t *l)
{
    char key[300], buf[600];
    lun_key(l, key, sizeof key);
    int len = snprintf(buf, sizeof buf, "target=%s\nlun=%u\nvolume=%s\nid=%016" PRIx64 "\n",
                       l->target, l->lun, l->volume, l->luid);
    return dsl_pool_config_set(l->dp, key, buf, (uint32_t)len);
}

/* Calls fn(key, value) for each "key=value" line of a record. */
static void parse_record(const void *val, uint32_t len, void (*fn)(const char *, const char *, void *),
                         void *arg)
{
    char *s = malloc(len + 1);
    if (!s) return;
    memcpy(s, val, len);
    s[len] = '\0';
    char *save = NULL;
    for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        fn(line, eq + 1, arg);
    }
    free(s);
}

/* ------------------------------------------------------------ serving */

static int serve_target(cfg_target_t *t)
{
    int rc = iscsi_target_create(g_srv, t->name);
    if (rc && rc != -EEXIST) return rc;
    for (size_t i = 0; i < t->nacl; i++) iscsi_acl_add(g_srv, t->name, t->acl[i]);
    if (t->user[0])
        iscsi_chap_set(g_srv, t->name, t->user, t->secret, t->muser[0] ? t->muser : NULL,
                       t->muser[0] ? t->msecret : NULL);
    return 0;
}

static uint64_t random_luid(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof v) != sizeof v) v = 0;
        close(fd);
    }
    if (!v) v = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
    return v;
}

/*
 * The SCSI layer's persistence hook: called under the LU's lock, so it takes
 * none of ours (g_mu is held while LUNs are removed, which waits for running
 * commands) and only writes the pool it was given. The record is the LU id
 * (8 bytes, big endian) and the SCSI layer's state string; the id keeps a
 * record left behind by an earlier LUN with the same number off a new one.
 */
static int pr_store_hook(void *arg, uint64_t lun, const void *state, size_t len)
{
    (void)lun;
    pr_store_t *ps = arg;
    if (!state) {
        int rc = dsl_pool_config_remove(ps->dp, ps->key);
        return rc == -ENOENT ? 0 : rc;
    }
    if (len > UINT32_MAX - 8) return -E2BIG;
    uint8_t *buf = malloc(8 + len);
    if (!buf) return -ENOMEM;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(ps->luid >> (56 - 8 * i));
    memcpy(buf + 8, state, len);
    int rc = dsl_pool_config_set(ps->dp, ps->key, buf, (uint32_t)(8 + len));
    free(buf);
    return rc;
}

/* The stored reservation state of l (what pr_store_hook wrote), in buf;
 * *len = 0 when there is none for this LU. A record of another LU id is
 * dropped. */
static void pr_stored_state(const cfg_lun_t *l, const char *key, uint8_t *buf, uint32_t cap,
                            uint32_t *len)
{
    *len = 0;
    uint32_t n = 0;
    if (dsl_pool_config_get(l->dp, key, buf, cap, &n)) return;
    uint64_t id = 0;
    for (uint32_t i = 0; i < 8 && i < n; i++) id = id << 8 | buf[i];
    if (n <= 8 || id != l->luid) {
        log_warn(SUB, "LUN %u of %s: dropping reservations stored for another LU", l->lun, l->target);
        dsl_pool_config_remove(l->dp, key);
        return;
    }
    *len = n;
}

/* How a LUN comes online, which decides the reservations it starts with. */
typedef enum lun_arrival {
    LUN_NEW,       /* created now: none */
    LUN_RESTART,   /* this daemon started (a power loss): those stored with APTPL */
    LUN_MOVED,     /* its pool was imported (a takeover or a move): all stored */
} lun_arrival_t;

/* Opens the volume and serves it, with the reservations its arrival keeps. */
static int lun_online(cfg_lun_t *l, lun_arrival_t arrival, char *err, size_t errlen)
{
    bool restore = arrival != LUN_NEW;
    zvol_t *zv = NULL;
    int rc = zvol_open(l->dp, l->volume, &zv);
    if (rc) {
        snprintf(err, errlen, "cannot open volume '%s': %s", l->volume, strerror(-rc));
        return rc;
    }
    dsl_prop_t *p = malloc(sizeof *p);
    char perr[256];
    bool thin = p && !dsl_prop_get(l->dp, l->volume, "refreservation", p, perr, sizeof perr) &&
                p->numeric == 0;
    free(p);
    pr_store_t *ps = calloc(1, sizeof *ps);
    uint8_t *prbuf = restore ? malloc(ZAP_VALUE_MAX) : NULL;
    if (!ps || (restore && !prbuf)) {
        free(ps);
        free(prbuf);
        zvol_close(zv);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    ps->dp = l->dp;
    ps->luid = l->luid;
    pr_key(l, ps->key, sizeof ps->key);
    uint32_t prlen = 0;
    if (restore) pr_stored_state(l, ps->key, prbuf, ZAP_VALUE_MAX, &prlen);
    if (prlen && arrival == LUN_RESTART && !scsi_pr_state_aptpl(prbuf + 8, prlen - 8)) {
        log_info(SUB, "LUN %u of %s: reservations without APTPL end with the restart", l->lun,
                 l->target);
        dsl_pool_config_remove(l->dp, ps->key);
        prlen = 0;
    }
    scsi_lu_opts_t opts = {.id = l->luid, .thin = thin, .readonly = zvol_is_readonly(zv),
                           .pr_hook = pr_store_hook, .pr_hook_arg = ps, .pr_persist_all = true,
                           .pr_state = prlen ? prbuf + 8 : NULL,
                           .pr_state_len = prlen ? prlen - 8 : 0};
    rc = iscsi_lun_add(g_srv, l->target, l->lun, zv, &opts);
    if (rc == -EINVAL && opts.pr_state) {
        log_warn(SUB, "LUN %u of %s: its stored persistent reservations are unreadable; "
                 "it comes back without them", l->lun, l->target);
        dsl_pool_config_remove(l->dp, ps->key);
        opts.pr_state = NULL;
        opts.pr_state_len = 0;
        rc = iscsi_lun_add(g_srv, l->target, l->lun, zv, &opts);
    } else if (!rc && opts.pr_state) {
        log_info(SUB, "LUN %u of %s: persistent reservations restored", l->lun, l->target);
    }
    free(prbuf);
    if (rc) {
        free(ps);
        zvol_close(zv);
        snprintf(err, errlen, "cannot add LUN %u to '%s': %s", l->lun, l->target, strerror(-rc));
        return rc;
    }
    l->zv = zv;
    l->prs = ps;
    return 0;
}

static void lun_offline(cfg_lun_t *l)
{
    if (!l->zv) return;
    iscsi_lun_remove(g_srv, l->target, l->lun);
    zvol_close(l->zv);
    l->zv = NULL;
    free(l->prs);
    l->prs = NULL;
}

/* Takes a LUN off and removes its records (configuration and reservations). */
static void lun_forget(cfg_lun_t *l)
{
    char key[300];
    lun_offline(l);
    lun_key(l, key, sizeof key);
    dsl_pool_config_remove(l->dp, key);
    pr_key(l, key, sizeof key);
    dsl_pool_config_remove(l->dp, key);
}

static void drop_lun(cfg_lun_t *l)
{
    *l = g_luns[--g_nluns];
}

/* ------------------------------------------------------------ loading */

typedef struct load_ctx {
    dsl_pool_t *dp;
    cfg_target_t t;
    cfg_lun_t l;
} load_ctx_t;

static void target_field(const char *k, const char *v, void *arg)
{
    cfg_target_t *t = arg;
    if (!strcmp(k, "name")) cairn_strlcpy(t->name, v, sizeof t->name);
    else if (!strcmp(k, "chap_user")) cairn_strlcpy(t->user, v, sizeof t->user);
    else if (!strcmp(k, "chap_secret")) cairn_strlcpy(t->secret, v, sizeof t->secret);
    else if (!strcmp(k, "mchap_user")) cairn_strlcpy(t->muser, v, sizeof t->muser);
    else if (!strcmp(k, "mchap_secret")) cairn_strlcpy(t->msecret, v, sizeof t->msecret);
    else if (!strcmp(k, "acl")) {
        char **a = realloc(t->acl, (t->nacl + 1) * sizeof *a);
        if (!a) return;
        t->acl = a;
        t->acl[t->nacl++] = strdup(v);
    }
}

static void load_target(const char *key, const void *val, uint32_t len, void *arg)
{
    (void)key;
    (void)arg;
    cfg_target_t t = {0};
    parse_record(val, len, target_field, &t);
    char err[512];
    if (!t.name[0] || iscsi_name_check(t.name, err, sizeof err) || find_target(t.name)) {
        for (size_t i = 0; i < t.nacl; i++) free(t.acl[i]);
        free(t.acl);
        return;
    }
    cfg_target_t *nt = realloc(g_targets, (g_ntargets + 1) * sizeof *nt);
    if (!nt) return;
    g_targets = nt;
    g_targets[g_ntargets++] = t;
    serve_target(&g_targets[g_ntargets - 1]);
}

static void lun_field(const char *k, const char *v, void *arg)
{
    cfg_lun_t *l = arg;
    if (!strcmp(k, "target")) cairn_strlcpy(l->target, v, sizeof l->target);
    else if (!strcmp(k, "lun")) l->lun = (uint32_t)strtoul(v, NULL, 10);
    else if (!strcmp(k, "volume")) cairn_strlcpy(l->volume, v, sizeof l->volume);
    else if (!strcmp(k, "id")) l->luid = strtoull(v, NULL, 16);
}

/* What load_lun's callback argument carries. */
typedef struct pool_arrival {
    dsl_pool_t *dp;
    lun_arrival_t how;
} pool_arrival_t;

static void load_lun(const char *key, const void *val, uint32_t len, void *arg)
{
    (void)key;
    const pool_arrival_t *pa = arg;
    cfg_lun_t l = {.dp = pa->dp};
    parse_record(val, len, lun_field, &l);
    if (!l.target[0] || !l.volume[0] || !l.luid || find_lun(l.target, l.lun)) return;
    standby_lun_t *sl = find_standby(l.target, l.lun);
    if (sl && sl->luid != l.luid) { /* another LU had that number: the pool's record wins */
        iscsi_lun_remove(g_srv, sl->target, sl->lun);
        forget_standby(sl);
    }
    if (!find_target(l.target)) { /* the target's record was lost: recreate it bare */
        cfg_target_t t = {0};
        cairn_strlcpy(t.name, l.target, sizeof t.name);
        cfg_target_t *nt = realloc(g_targets, (g_ntargets + 1) * sizeof *nt);
        if (!nt) return;
        g_targets = nt;
        g_targets[g_ntargets++] = t;
        serve_target(&g_targets[g_ntargets - 1]);
    }
    char err[512];
    if (lun_online(&l, pa->how, err, sizeof err)) {
        log_warn(SUB, "LUN %u of %s stays offline: %s", l.lun, l.target, err);
        return;
    }
    cfg_lun_t *nl = realloc(g_luns, (g_nluns + 1) * sizeof *nl);
    if (!nl) {
        lun_offline(&l);
        return;
    }
    g_luns = nl;
    g_luns[g_nluns++] = l;
    sl = find_standby(l.target, l.lun);
    if (sl) forget_standby(sl); /* it was this LU, now active again */
}

static void load_pool(dsl_pool_t *dp, lun_arrival_t how)
{
    pool_arrival_t pa = {.dp = dp, .how = how};
    dsl_pool_config_list(dp, "iscsi.target:", load_target, dp);
    dsl_pool_config_list(dp, "iscsi.lun:", load_lun, &pa);
}

/*
 * Brings dp's target records up to date with the targets served, after dp
 * was loaded: a target created or changed while dp was exported exists only
 * in the other pools, and dp alone must bring it back as it is now (an older
 * access list of its own would otherwise return after a restart without the
 * other pools). The served configuration wins over dp's older records; a
 * record that already matches is not rewritten.
 */
static void sync_targets(dsl_pool_t *dp)
{
    char key[300], *buf = malloc(REC_MAX), *cur = malloc(REC_MAX);
    for (size_t i = 0; buf && cur && i < g_ntargets; i++) {
        snprintf(key, sizeof key, "iscsi.target:%s", g_targets[i].name);
        size_t len = target_record(&g_targets[i], buf, REC_MAX);
        uint32_t curlen = 0;
        if (!dsl_pool_config_get(dp, key, cur, REC_MAX, &curlen) && curlen == len &&
            !memcmp(cur, buf, len))
            continue;
        int rc = dsl_pool_config_set(dp, key, buf, (uint32_t)len);
        if (rc)
            log_warn(SUB, "cannot write target %s to a pool that just came back: %s",
                     g_targets[i].name, strerror(-rc));
    }
    free(buf);
    free(cur);
}

/* ------------------------------------------------------------ hooks */

int cairnd_iscsi_start(const cairnd_config_t *cfg, char *err, size_t errlen)
{
    iscsi_server_opts_t o = {.host = cfg->iscsi.host,
                             .port = cfg->iscsi.port,
                             .max_conns = cfg->iscsi_max_conns,
                             .max_conns_per_client = cfg->iscsi_max_conns_per_client,
                             .login_timeout_s = cfg->iscsi_login_timeout,
                             .alua_group = (uint16_t)cfg->alua_tpg_id,
                             .alua_partner_group = (uint16_t)cfg->alua_partner_tpg_id};
    g_alua_partner = cfg->alua_partner_tpg_id != 0;
    int rc = iscsi_server_start(&o, &g_srv);
    if (rc) {
        char addr[300];
        mgmt_listen_format(&cfg->iscsi, addr, sizeof addr);
        snprintf(err, errlen, "cannot listen for iSCSI on %s: %s", addr, strerror(-rc));
        return rc;
    }
    pthread_mutex_lock(&g_mu);
    dsl_pool_t *dps[64];
    size_t n = cairnd_pool_dsls(dps, 64);
    for (size_t i = 0; i < n && i < 64; i++) load_pool(dps[i], LUN_RESTART);
    for (size_t i = 0; i < n && i < 64; i++) sync_targets(dps[i]);
    pthread_mutex_unlock(&g_mu);
    log_info(SUB, "listening on port %u: %zu targets, %zu LUNs", iscsi_server_port(g_srv),
             g_ntargets, g_nluns);
    return 0;
}

void cairnd_iscsi_stop(void)
{
    pthread_mutex_lock(&g_mu);
    if (g_srv) {
        for (size_t i = 0; i < g_nluns; i++) lun_offline(&g_luns[i]);
        iscsi_server_stop(g_srv); /* removes the standby LUs too */
        g_srv = NULL;
        free(g_standby);
        g_standby = NULL;
        g_nstandby = 0;
    }
    pthread_mutex_unlock(&g_mu);
}

void cairnd_iscsi_pool_opened(dsl_pool_t *dp)
{
    pthread_mutex_lock(&g_mu);
    if (g_srv) {
        load_pool(dp, LUN_MOVED);
        sync_targets(dp);
    }
    pthread_mutex_unlock(&g_mu);
}

void cairnd_iscsi_pool_exporting(dsl_pool_t *dp)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nluns; i++)
        if (g_luns[i].dp == dp && g_luns[i].zv)
            iscsi_lun_transitioning(g_srv, g_luns[i].target, g_luns[i].lun);
    pthread_mutex_unlock(&g_mu);
}

/* The LU of l stays, standby, while its volume is closed; false when it cannot
 * (it is then removed as on a lone head). */
static bool lun_standby(cfg_lun_t *l)
{
    standby_lun_t *ns = realloc(g_standby, (g_nstandby + 1) * sizeof *ns);
    if (!ns) return false;
    g_standby = ns;
    if (!g_srv || !l->zv || iscsi_lun_standby(g_srv, l->target, l->lun)) return false;
    standby_lun_t *sl = &g_standby[g_nstandby++];
    cairn_strlcpy(sl->target, l->target, sizeof sl->target);
    sl->lun = l->lun;
    sl->luid = l->luid;
    zvol_close(l->zv);
    l->zv = NULL;
    free(l->prs);
    l->prs = NULL;
    return true;
}

void cairnd_iscsi_pool_closing(dsl_pool_t *dp)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nluns;) {
        if (g_luns[i].dp == dp) {
            if (!g_alua_partner || !lun_standby(&g_luns[i])) lun_offline(&g_luns[i]);
            drop_lun(&g_luns[i]);
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

static bool volume_matches(const char *vol, const char *name, bool recursive)
{
    size_t n = strlen(name);
    if (!strcmp(vol, name)) return true;
    return recursive && !strncmp(vol, name, n) && vol[n] == '/';
}

bool cairnd_iscsi_volume_busy(const char *name, bool recursive, bool force,
                              Cairn__Mgmt__Response *resp, cairnd_arena_t *a, const char *verb)
{
    pthread_mutex_lock(&g_mu);
    bool busy = false;
    for (size_t i = 0; i < g_nluns; i++) {
        cfg_lun_t *l = &g_luns[i];
        if (!volume_matches(l->volume, name, recursive)) continue;
        if (!force) {
            cairnd_set_error(resp, a, -EBUSY,
                             "cannot %s '%s': volume '%s' is LUN %u of iSCSI target %s "
                             "(remove the LUN first%s)",
                             verb, name, l->volume, l->lun, l->target,
                             strcmp(verb, "destroy") ? "" : " or use -f");
            busy = true;
            break;
        }
    }
    if (!busy && force) {
        for (size_t i = 0; i < g_nluns;) {
            cfg_lun_t *l = &g_luns[i];
            if (!volume_matches(l->volume, name, recursive)) {
                i++;
                continue;
            }
            lun_forget(l);
            log_info(SUB, "LUN %u of %s removed: its volume %s is destroyed", l->lun, l->target,
                     l->volume);
            drop_lun(l);
        }
    }
    pthread_mutex_unlock(&g_mu);
    return busy;
}

void cairnd_iscsi_volsize_changed(const char *name)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nluns; i++)
        if (!strcmp(g_luns[i].volume, name) && g_srv)
            iscsi_lun_capacity_changed(g_srv, g_luns[i].target, g_luns[i].lun);
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------ commands */

static bool need_target(const char *name, Cairn__Mgmt__Response *resp, cairnd_arena_t *a,
                        cfg_target_t **out)
{
    *out = find_target(name);
    if (!*out) cairnd_set_error(resp, a, -ENOENT, "no iSCSI target '%s'", name);
    return *out != NULL;
}

static bool no_newline(const char *s) { return !strchr(s, '\n') && !strchr(s, '\r'); }

static void do_target_create(const Cairn__Mgmt__IscsiTargetCreate *m, Cairn__Mgmt__Response *resp,
                             cairnd_arena_t *a)
{
    char err[600];
    if (iscsi_name_check(m->name, err, sizeof err)) {
        cairnd_set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    if (find_target(m->name)) {
        cairnd_set_error(resp, a, -EEXIST, "iSCSI target '%s' already exists", m->name);
        return;
    }
    dsl_pool_t *dps[1];
    if (!cairnd_pool_dsls(dps, 1)) {
        cairnd_set_error(resp, a, -ENXIO,
                         "no imported pool to keep the iSCSI configuration in (create or import one)");
        return;
    }
    cfg_target_t t = {0};
    cairn_strlcpy(t.name, m->name, sizeof t.name);
    int rc = save_target(&t);
    if (!rc) rc = iscsi_target_create(g_srv, t.name);
    cfg_target_t *nt = rc ? NULL : realloc(g_targets, (g_ntargets + 1) * sizeof *nt);
    if (!rc && !nt) rc = -ENOMEM;
    if (rc) {
        forget_target(t.name);
        iscsi_target_destroy(g_srv, t.name);
        cairnd_set_error(resp, a, rc, "cannot create iSCSI target '%s': %s", m->name, strerror(-rc));
        return;
    }
    g_targets = nt;
    g_targets[g_ntargets++] = t;
    log_info(SUB, "created target %s", t.name);
}

static void do_lun_remove_one(cfg_lun_t *l)
{
    lun_forget(l);
    drop_lun(l);
}

static void do_target_destroy(const Cairn__Mgmt__IscsiTargetDestroy *m,
                              Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    cfg_target_t *t;
    if (!need_target(m->name, resp, a, &t)) return;
    size_t n = target_nluns(t->name);
    if (n && !m->force) {
        cairnd_set_error(resp, a, -EBUSY,
                         "cannot destroy iSCSI target '%s': it has %zu LUN%s (remove them or use -f)",
                         t->name, n, n == 1 ? "" : "s");
        return;
    }
    for (size_t i = 0; i < g_nluns;) {
        if (!strcmp(g_luns[i].target, t->name)) do_lun_remove_one(&g_luns[i]);
        else i++;
    }
    for (size_t i = 0; i < g_nstandby;) { /* this head forgets them; the partner keeps its own */
        if (!strcmp(g_standby[i].target, t->name)) {
            iscsi_lun_remove(g_srv, t->name, g_standby[i].lun);
            forget_standby(&g_standby[i]);
        } else {
            i++;
        }
    }
    iscsi_target_destroy(g_srv, t->name);
    forget_target(t->name);
    log_info(SUB, "destroyed target %s", t->name);
    for (size_t i = 0; i < t->nacl; i++) free(t->acl[i]);
    free(t->acl);
    *t = g_targets[--g_ntargets];
}

static void do_lun_add(const Cairn__Mgmt__IscsiLunAdd *m, Cairn__Mgmt__Response *resp,
                       cairnd_arena_t *a)
{
    cfg_target_t *t;
    if (!need_target(m->target, resp, a, &t)) return;
    char err[600];
    if (mgmt_dataset_name_check(m->volume, MGMT_DSNAME_DATASET, err, sizeof err)) {
        cairnd_set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    char pool[DSL_NAME_MAX + 1];
    mgmt_dataset_pool(m->volume, pool, sizeof pool);
    dsl_pool_t *dp = cairnd_pool_dsl(pool);
    if (!dp) {
        cairnd_set_error(resp, a, -ENOENT, "no pool '%s' is imported", pool);
        return;
    }
    dsl_prop_t *p = cairnd_arena_alloc(a, sizeof *p);
    if (dsl_prop_get(dp, m->volume, "type", p, err, sizeof err)) {
        cairnd_set_error(resp, a, -ENOENT, "cannot add '%s': %s", m->volume, err);
        return;
    }
    if (strcmp(p->value, "volume")) {
        cairnd_set_error(resp, a, -EINVAL, "cannot add '%s': it is a %s, not a volume", m->volume,
                         p->value);
        return;
    }
    for (size_t i = 0; i < g_nluns; i++)
        if (!strcmp(g_luns[i].volume, m->volume)) {
            cairnd_set_error(resp, a, -EBUSY, "volume '%s' is already LUN %u of %s", m->volume,
                             g_luns[i].lun, g_luns[i].target);
            return;
        }
    uint32_t lun = 0;
    if (m->lun_given) {
        if (m->lun > 16383) {
            cairnd_set_error(resp, a, -ERANGE, "LUN %u is out of range (0 to 16383)", m->lun);
            return;
        }
        if (lun_taken(t->name, m->lun)) {
            cairnd_set_error(resp, a, -EEXIST, "target '%s' already has LUN %u%s", t->name, m->lun,
                             find_standby(t->name, m->lun) ? " (standby: its pool is on the partner)"
                                                            : "");
            return;
        }
        lun = m->lun;
    } else {
        while (lun_taken(t->name, lun)) lun++;
    }
    cfg_lun_t l = {.lun = lun, .luid = random_luid(), .dp = dp};
    cairn_strlcpy(l.target, t->name, sizeof l.target);
    cairn_strlcpy(l.volume, m->volume, sizeof l.volume);
    cfg_lun_t *nl = realloc(g_luns, (g_nluns + 1) * sizeof *nl);
    if (!nl) {
        cairnd_set_error(resp, a, -ENOMEM, "out of memory");
        return;
    }
    g_luns = nl;
    int rc = lun_online(&l, LUN_NEW, err, sizeof err);
    if (rc) {
        cairnd_set_error(resp, a, rc, "%s", err);
        return;
    }
    rc = save_lun(&l);
    if (!rc) rc = save_target(t); /* the volume's pool must know the target too */
    if (rc) {
        lun_offline(&l);
        char key[300];
        lun_key(&l, key, sizeof key);
        dsl_pool_config_remove(dp, key);
        cairnd_set_error(resp, a, rc, "cannot store LUN %u of '%s': %s", lun, t->name, strerror(-rc));
        return;
    }
    g_luns[g_nluns++] = l;
    log_info(SUB, "target %s: LUN %u is volume %s (id %016" PRIx64 ")", l.target, lun, l.volume,
             l.luid);
}

static void do_lun_remove(const Cairn__Mgmt__IscsiLunRemove *m, Cairn__Mgmt__Response *resp,
                          cairnd_arena_t *a)
{
    cfg_target_t *t;
    if (!need_target(m->target, resp, a, &t)) return;
    cfg_lun_t *l = find_lun(t->name, m->lun);
    if (!l) {
        cairnd_set_error(resp, a, -ENOENT, "target '%s' has no LUN %u", t->name, m->lun);
        return;
    }
    do_lun_remove_one(l);
    log_info(SUB, "target %s: LUN %u removed", t->name, m->lun);
}

static void do_acl(const Cairn__Mgmt__IscsiAcl *m, Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    cfg_target_t *t;
    if (!need_target(m->target, resp, a, &t)) return;
    char err[600];
    if (iscsi_name_check(m->initiator, err, sizeof err)) {
        cairnd_set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    size_t idx = t->nacl;
    for (size_t i = 0; i < t->nacl; i++)
        if (!strcmp(t->acl[i], m->initiator)) idx = i;
    if (m->remove && idx == t->nacl) {
        cairnd_set_error(resp, a, -ENOENT, "'%s' is not on the access list of '%s'", m->initiator,
                         t->name);
        return;
    }
    if (!m->remove && idx != t->nacl) {
        cairnd_set_error(resp, a, -EEXIST, "'%s' is already on the access list of '%s'",
                         m->initiator, t->name);
        return;
    }
    cfg_target_t nt = *t; /* the new state, written before it is applied */
    char **acl = malloc((t->nacl + 1) * sizeof *acl);
    if (!acl) {
        cairnd_set_error(resp, a, -ENOMEM, "out of memory");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < t->nacl; i++)
        if (i != idx) acl[n++] = t->acl[i];
    char *added = NULL;
    if (!m->remove) acl[n++] = added = strdup(m->initiator);
    nt.acl = acl;
    nt.nacl = n;
    int rc = save_target(&nt);
    if (rc) {
        free(added);
        free(acl);
        save_target(t);
        cairnd_set_error(resp, a, rc, "cannot store the access list of '%s': %s", t->name,
                         strerror(-rc));
        return;
    }
    if (m->remove) {
        iscsi_acl_remove(g_srv, t->name, m->initiator);
        free(t->acl[idx]);
    } else {
        iscsi_acl_add(g_srv, t->name, m->initiator);
    }
    free(t->acl);
    t->acl = acl;
    t->nacl = n;
}

static void do_chap(const Cairn__Mgmt__IscsiChap *m, Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    cfg_target_t *t;
    if (!need_target(m->target, resp, a, &t)) return;
    cfg_target_t nt = *t;
    if (m->clear) {
        nt.user[0] = nt.secret[0] = nt.muser[0] = nt.msecret[0] = '\0';
    } else {
        const char *fields[4] = {m->user, m->secret, m->mutual_user, m->mutual_secret};
        for (int i = 0; i < 4; i++)
            if (strlen(fields[i]) > 255 || !no_newline(fields[i])) {
                cairnd_set_error(resp, a, -EINVAL, "CHAP names and secrets are 1 to 255 bytes on one line");
                return;
            }
        if (!m->user[0] || strlen(m->secret) < ISCSI_CHAP_SECRET_MIN) {
            cairnd_set_error(resp, a, -EINVAL, "a CHAP secret must be at least %d bytes",
                             ISCSI_CHAP_SECRET_MIN);
            return;
        }
        bool mutual = m->mutual_user[0] || m->mutual_secret[0];
        if (mutual && (!m->mutual_user[0] || strlen(m->mutual_secret) < ISCSI_CHAP_SECRET_MIN)) {
            cairnd_set_error(resp, a, -EINVAL, "a mutual CHAP secret must be at least %d bytes",
                             ISCSI_CHAP_SECRET_MIN);
            return;
        }
        if (mutual && !strcmp(m->secret, m->mutual_secret)) {
            cairnd_set_error(resp, a, -EINVAL, "the mutual CHAP secret must differ from the initiator's");
            return;
        }
        cairn_strlcpy(nt.user, m->user, sizeof nt.user);
        cairn_strlcpy(nt.secret, m->secret, sizeof nt.secret);
        cairn_strlcpy(nt.muser, mutual ? m->mutual_user : "", sizeof nt.muser);
        cairn_strlcpy(nt.msecret, mutual ? m->mutual_secret : "", sizeof nt.msecret);
    }
    int rc = save_target(&nt);
    if (rc) {
        save_target(t);
        cairnd_set_error(resp, a, rc, "cannot store CHAP for '%s': %s", t->name, strerror(-rc));
        return;
    }
    *t = nt;
    iscsi_chap_set(g_srv, t->name, t->user[0] ? t->user : NULL, t->secret,
                   t->muser[0] ? t->muser : NULL, t->muser[0] ? t->msecret : NULL);
}

static int cmp_targets(const void *x, const void *y)
{
    return strcmp(((const cfg_target_t *)x)->name, ((const cfg_target_t *)y)->name);
}

static void do_list(const Cairn__Mgmt__IscsiList *m, Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    if (m->name[0] && !find_target(m->name)) {
        cairnd_set_error(resp, a, -ENOENT, "no iSCSI target '%s'", m->name);
        return;
    }
    if (g_ntargets > 1) qsort(g_targets, g_ntargets, sizeof *g_targets, cmp_targets);
    Cairn__Mgmt__IscsiTargets *ts = cairnd_arena_alloc(a, sizeof *ts);
    cairn__mgmt__iscsi_targets__init(ts);
    ts->targets = cairnd_arena_alloc(a, (g_ntargets + 1) * sizeof *ts->targets);
    for (size_t i = 0; i < g_ntargets; i++) {
        cfg_target_t *t = &g_targets[i];
        if (m->name[0] && strcmp(m->name, t->name)) continue;
        Cairn__Mgmt__IscsiTargetRow *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__iscsi_target_row__init(r);
        r->name = cairnd_arena_strdup(a, t->name);
        r->chap = cairnd_arena_strdup(a, t->muser[0] ? "mutual" : t->user[0] ? "set" : "-");
        r->acl = cairnd_arena_alloc(a, (t->nacl + 1) * sizeof *r->acl);
        for (size_t k = 0; k < t->nacl; k++) r->acl[r->n_acl++] = cairnd_arena_strdup(a, t->acl[k]);
        r->luns = cairnd_arena_alloc(a, (g_nluns + 1) * sizeof *r->luns);
        for (uint32_t lun = 0; lun <= 16383 && r->n_luns < g_nluns; lun++) {
            cfg_lun_t *l = find_lun(t->name, lun);
            if (!l) continue;
            Cairn__Mgmt__IscsiLunRow *lr = cairnd_arena_alloc(a, sizeof *lr);
            cairn__mgmt__iscsi_lun_row__init(lr);
            lr->lun = l->lun;
            lr->volume = cairnd_arena_strdup(a, l->volume);
            lr->lu_id = l->luid;
            lr->online = l->zv != NULL;
            r->luns[r->n_luns++] = lr;
            if (r->n_luns == target_nluns(t->name)) break;
        }
        iscsi_session_info_t si[64];
        int ns = iscsi_target_sessions(g_srv, t->name, si, 64);
        if (ns > 64) ns = 64;
        r->sessions = cairnd_arena_alloc(a, (size_t)(ns > 0 ? ns : 1) * sizeof *r->sessions);
        for (int k = 0; k < ns; k++) {
            Cairn__Mgmt__IscsiSessionRow *sr = cairnd_arena_alloc(a, sizeof *sr);
            cairn__mgmt__iscsi_session_row__init(sr);
            sr->initiator = cairnd_arena_strdup(a, si[k].initiator);
            sr->peer = cairnd_arena_strdup(a, si[k].peer);
            sr->tsih = si[k].tsih;
            r->sessions[r->n_sessions++] = sr;
        }
        ts->targets[ts->n_targets++] = r;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_ISCSI_TARGETS;
    resp->iscsi_targets = ts;
}

bool cairnd_handle_iscsi(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                         cairnd_arena_t *a)
{
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_TARGET_CREATE:
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_TARGET_DESTROY:
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_LIST:
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_LUN_ADD:
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_LUN_REMOVE:
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_ACL:
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_CHAP: break;
    default: return false;
    }
    pthread_mutex_lock(&g_mu);
    if (!g_srv) {
        cairnd_set_error(resp, a, -ENOTCONN, "the iSCSI target is not running");
        pthread_mutex_unlock(&g_mu);
        return true;
    }
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_TARGET_CREATE: do_target_create(req->iscsi_target_create, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_TARGET_DESTROY: do_target_destroy(req->iscsi_target_destroy, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_LIST: do_list(req->iscsi_list, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_LUN_ADD: do_lun_add(req->iscsi_lun_add, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_LUN_REMOVE: do_lun_remove(req->iscsi_lun_remove, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_ACL: do_acl(req->iscsi_acl, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_ISCSI_CHAP: do_chap(req->iscsi_chap, resp, a); break;
    default: break;
    }
    pthread_mutex_unlock(&g_mu);
    return true;
}

const iscsi_stats_t *cairnd_iscsi_stats(void)
{
    return g_srv ? iscsi_server_stats(g_srv) : NULL;
}

size_t cairnd_iscsi_target_stats(iscsi_target_stats_t *out, size_t cap)
{
    return g_srv ? iscsi_server_target_stats(g_srv, out, cap) : 0;
}
