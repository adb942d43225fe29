/*
 * A small pool-wide configuration store: key -> value records that travel
 * with the pool (front-end configuration such as iSCSI targets and LUNs),
 * hidden from dataset properties.
 *
 * On disk it is one ZAP object in the MOS. Its object number lives in the
 * root dataset's phys, reserved[DSL_CONFIG_SLOT] (0: no store yet), so no new
 * well-known MOS object is needed and pool_load() is untouched: older code
 * reading a newer pool ignores the slot, as reserved fields are meant for.
 * Changes run as DSL tasks in syncing context, like every other change of
 * the dataset tree, so a set returns only when its txg is on disk: an
 * administrator's configuration change is durable when the command returns.
 * A batch (dsl_pool_config_apply) is one task, so one txg however many records
 * it changes: the NFS server's client records come in bursts. The tasks are
 * pool tasks (dsl_run_pool_task): they change no dataset, so no dataset's
 * cached properties or space answer is thrown away for them.
 * Reads go straight to the ZAP (thread-safe on its own).
 */
#include "dsl_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DSL_CONFIG_SLOT 4 /* the 8th reserved word before data_comp and snap_volsize took three */

static uint64_t config_obj(dsl_pool_t *dp)
{
    pthread_mutex_lock(&dp->lock);
    uint64_t obj = dp->root ? dp->root->phys.reserved[DSL_CONFIG_SLOT] : 0;
    pthread_mutex_unlock(&dp->lock);
    return obj;
}

typedef struct config_task {
    const dsl_config_change_t *v;
    size_t n;
    bool missing_ok; /* a batch: removing a key that is not there is no error */
} config_task_t;

static int config_change(dsl_pool_t *dp, uint64_t obj, const dsl_config_change_t *c,
                         bool missing_ok, dmu_tx_t *tx)
{
    if (c->val) return zap_update(dp->mos, obj, c->key, c->val, c->len, tx);
    int err = zap_remove(dp->mos, obj, c->key, tx);
    return err == -ENOENT && missing_ok ? 0 : err;
}

static int task_config(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    config_task_t *ct = arg;
    if (!dp->root) return -ENXIO;
    uint64_t obj = dp->root->phys.reserved[DSL_CONFIG_SLOT];
    bool sets = false;
    for (size_t i = 0; i < ct->n; i++) sets |= ct->v[i].val != NULL;
    if (!obj && !sets) return ct->missing_ok ? 0 : -ENOENT;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err = 0;
    if (!obj) {
        err = zap_create(dp->mos, &obj, tx);
        if (!err) {
            pthread_mutex_lock(&dp->stat_lock);
            dp->root->phys.reserved[DSL_CONFIG_SLOT] = obj;
            dp->root->dirty = true; /* written after the tasks of this txg */
            pthread_mutex_unlock(&dp->stat_lock);
        }
    }
    for (size_t i = 0; i < ct->n && !err; i++)
        err = config_change(dp, obj, &ct->v[i], ct->missing_ok, tx);
    dmu_tx_commit(tx);
    atomic_fetch_add(&dp->config_writes, 1);
    return err;
}

/* A bad key or value refuses the whole batch before anything runs. */
static int config_check(const dsl_config_change_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!v[i].key || !*v[i].key || strlen(v[i].key) > ZAP_NAME_MAX) return -ENAMETOOLONG;
        if (v[i].val && v[i].len > ZAP_VALUE_MAX) return -E2BIG;
    }
    return 0;
}

static int config_run(dsl_pool_t *dp, const dsl_config_change_t *v, size_t n, bool missing_ok)
{
    int err = config_check(v, n);
    if (err || !n) return err;
    config_task_t ct = {.v = v, .n = n, .missing_ok = missing_ok};
    /* Front-end records, not dataset state: every dataset keeps its cached
     * properties and space answer (dsl_run_pool_task). */
    return dsl_run_pool_task(dp, task_config, &ct);
}

int dsl_pool_config_set(dsl_pool_t *dp, const char *key, const void *val, uint32_t len)
{
    dsl_config_change_t c = {.key = key, .val = val ? val : "", .len = len};
    return config_run(dp, &c, 1, false);
}

int dsl_pool_config_remove(dsl_pool_t *dp, const char *key)
{
    dsl_config_change_t c = {.key = key};
    return config_run(dp, &c, 1, false);
}

int dsl_pool_config_apply(dsl_pool_t *dp, const dsl_config_change_t *v, size_t n)
{
    return config_run(dp, v, n, true);
}

uint64_t dsl_pool_config_writes(dsl_pool_t *dp) { return atomic_load(&dp->config_writes); }

int dsl_pool_config_get(dsl_pool_t *dp, const char *key, void *val, uint32_t cap, uint32_t *len)
{
    uint64_t obj = config_obj(dp);
    if (!obj) return -ENOENT;
    return zap_lookup(dp->mos, obj, key, val, cap, len);
}

int dsl_pool_config_list(dsl_pool_t *dp, const char *prefix,
                         void (*fn)(const char *key, const void *val, uint32_t len, void *arg),
                         void *arg)
{
    uint64_t obj = config_obj(dp);
    if (!obj) return 0;
    zap_entry_t *e = malloc(sizeof *e);
    if (!e) return -ENOMEM;
    zap_cursor_t zc;
    zap_cursor_init(&zc, dp->mos, obj, 0);
    int r;
    size_t plen = prefix ? strlen(prefix) : 0;
    while ((r = zap_cursor_next(&zc, e)) == 1)
        if (!plen || !strncmp(e->name, prefix, plen)) fn(e->name, e->value, e->value_len, arg);
    free(e);
    return r < 0 ? r : 0;
}
