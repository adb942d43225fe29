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
    const char *key;
    const void *val;
    uint32_t len;
    bool remove;
} config_task_t;

static int task_config(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    config_task_t *ct = arg;
    if (!dp->root) return -ENXIO;
    uint64_t obj = dp->root->phys.reserved[DSL_CONFIG_SLOT];
    if (!obj && ct->remove) return -ENOENT;
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
    if (!err) {
        if (ct->remove) err = zap_remove(dp->mos, obj, ct->key, tx);
        else err = zap_update(dp->mos, obj, ct->key, ct->val, ct->len, tx);
    }
    dmu_tx_commit(tx);
    return err;
}

int dsl_pool_config_set(dsl_pool_t *dp, const char *key, const void *val, uint32_t len)
{
    if (!*key || strlen(key) > ZAP_NAME_MAX) return -ENAMETOOLONG;
    if (len > ZAP_VALUE_MAX) return -E2BIG;
    config_task_t ct = {.key = key, .val = val, .len = len};
    return dsl_run_task(dp, task_config, &ct);
}

int dsl_pool_config_remove(dsl_pool_t *dp, const char *key)
{
    config_task_t ct = {.key = key, .remove = true};
    return dsl_run_task(dp, task_config, &ct);
}

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
