/*
 * Records of the NFS server's clients kept in pools, so that the head that
 * imports a pool after a takeover knows the clients it must let reclaim
 * (docs/ha.md): the NFSv4 client owners (nfs4_state.c) and the NFSv3 lock
 * hosts NSM must notify (nsm.c).
 *
 * A set of records is a set of strings under a key prefix in the pool's
 * configuration store (dsl_pool_config_*): one entry per string, keyed by
 * the prefix and a 64-bit FNV-1a of the string (a string may be longer than
 * a key), the string itself as the value. Writing a set only sets the entries
 * missing and removes those no longer wanted, all in one batch of the store
 * (one DSL task, one txg), durable when it returns; a set that did not change
 * costs one listing and no txg.
 */
#include "nfs_srv.h"

#include <cairn/log.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void record_key(const char *prefix, const char *value, char *key, size_t cap)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = value; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    snprintf(key, cap, "%s%016llx", prefix, (unsigned long long)h);
}

static void collect_value(const char *key, const void *val, uint32_t len, void *arg)
{
    (void)key;
    nfs_pool_records_t *out = arg;
    char **v = realloc(out->v, (out->n + 1) * sizeof *v);
    if (!v) return;
    out->v = v;
    if ((v[out->n] = strndup(val, len))) out->n++;
}

void nfs_pool_records_load(dsl_pool_t *dp, const char *prefix, nfs_pool_records_t *out)
{
    memset(out, 0, sizeof *out);
    dsl_pool_config_list(dp, prefix, collect_value, out);
}

void nfs_pool_records_free(nfs_pool_records_t *r)
{
    for (size_t i = 0; i < r->n; i++) free(r->v[i]);
    free(r->v);
    memset(r, 0, sizeof *r);
}

static bool listed(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] && !strcmp(v[i], s)) return true;
    return false;
}

/* One change of the batch: its key (a string of keys owned by the batch) and
 * the value to set, NULL to remove. */
static bool change_add(dsl_config_change_t **v, size_t *n, const char *prefix, const char *value,
                       bool set)
{
    dsl_config_change_t *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return false;
    *v = nv;
    char *key = malloc(ZAP_NAME_MAX + 1);
    if (!key) return false;
    record_key(prefix, value, key, ZAP_NAME_MAX + 1);
    nv[(*n)++] = (dsl_config_change_t){
        .key = key, .val = set ? value : NULL, .len = set ? (uint32_t)strlen(value) : 0};
    return true;
}

int nfs_pool_records_store(dsl_pool_t *dp, const char *prefix, char *const *v, size_t n)
{
    nfs_pool_records_t have;
    nfs_pool_records_load(dp, prefix, &have);
    dsl_config_change_t *changes = NULL;
    size_t nchanges = 0;
    bool ok = true;
    for (size_t i = 0; i < have.n && ok; i++)
        if (!listed(v, n, have.v[i])) ok = change_add(&changes, &nchanges, prefix, have.v[i], false);
    for (size_t i = 0; i < n && ok; i++)
        if (v[i] && !listed(have.v, have.n, v[i]))
            ok = change_add(&changes, &nchanges, prefix, v[i], true);
    int rc = ok ? dsl_pool_config_apply(dp, changes, nchanges) : -ENOMEM;
    for (size_t i = 0; i < nchanges; i++) free((char *)changes[i].key);
    free(changes);
    nfs_pool_records_free(&have);
    return rc;
}

bool nfs_pool_list_add(nfs_pool_list_t *l, dsl_pool_t *dp)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == dp) return false;
    dsl_pool_t **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v) return false;
    l->v = v;
    v[l->n++] = dp;
    return true;
}

void nfs_pool_list_remove(nfs_pool_list_t *l, dsl_pool_t *dp)
{
    for (size_t i = 0; i < l->n; i++) {
        if (dp && l->v[i] != dp) continue;
        l->v[i--] = l->v[--l->n];
    }
}

void nfs_pool_list_free(nfs_pool_list_t *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}
