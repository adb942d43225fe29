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
 * missing and removes those no longer wanted, each a DSL task durable when
 * it returns; a set that did not change costs one listing.
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

int nfs_pool_records_store(dsl_pool_t *dp, const char *prefix, char *const *v, size_t n)
{
    nfs_pool_records_t have;
    nfs_pool_records_load(dp, prefix, &have);
    char key[ZAP_NAME_MAX + 1];
    int rc = 0;
    for (size_t i = 0; i < have.n; i++) {
        if (listed(v, n, have.v[i])) continue;
        record_key(prefix, have.v[i], key, sizeof key);
        int e = dsl_pool_config_remove(dp, key);
        if (e && e != -ENOENT) rc = e;
    }
    for (size_t i = 0; i < n; i++) {
        if (!v[i] || listed(have.v, have.n, v[i])) continue;
        record_key(prefix, v[i], key, sizeof key);
        int e = dsl_pool_config_set(dp, key, v[i], (uint32_t)strlen(v[i]));
        if (e) rc = e;
    }
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
