/*
 * Volumes that are datasets: the backend of zvol.c over the DSL. volsize,
 * volblocksize, compression, checksum, copies, sync and readonly are the
 * dataset's properties (read on every operation, as dsl.h asks, so a `cairn
 * set` applies to the next I/O); space checks are the dataset's quota and
 * reservation checks. A snapshot of a volume opens read-only.
 *
 * Kept apart from zvol.c so that volumes over a bare object set (tests, tools)
 * link without the DSL.
 */
#include "zvol_impl.h"

#include <cairn/util.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static dsl_dataset_t *zs_ds(zvol_state_t *zs) { return zs->be_ctx; }

static void ds_get_props(zvol_state_t *zs, zvol_props_t *out)
{
    dsl_dataset_props_t dp;
    dsl_dataset_get_props(zs_ds(zs), &dp);
    memset(out, 0, sizeof(*out));
    out->volsize = dp.volsize;
    out->readonly = dp.readonly;
    out->sync = dp.sync;
    out->compress = dp.compress;
    out->checksum = dp.checksum;
    out->copies = dp.copies;
    out->logbias = dp.logbias;
}

static int ds_check_space(zvol_state_t *zs, uint64_t bytes, bool nowait)
{
    return nowait ? dsl_dataset_check_space_nowait(zs_ds(zs), bytes)
                  : dsl_dataset_check_space(zs_ds(zs), bytes);
}

static bool ds_is_readonly(zvol_state_t *zs) { return dsl_dataset_readonly(zs_ds(zs)); }

static int ds_set_volsize(zvol_state_t *zs, uint64_t volsize, char *err, size_t errlen)
{
    dsl_dataset_t *ds = zs_ds(zs);
    char tmp[256];
    if (!err || !errlen) {
        err = tmp;
        errlen = sizeof(tmp);
    }
    /* zvol_resize checked force and frees what lies beyond a smaller size. */
    return dsl_volsize_set(dsl_dataset_pool(ds), dsl_dataset_name(ds), volsize, true, err, errlen);
}

static void ds_release(zvol_state_t *zs) { dsl_dataset_rele(zs_ds(zs)); }

static const zvol_backend_t zvol_dsl_backend = {
    .get_props = ds_get_props,
    .check_space = ds_check_space,
    .is_readonly = ds_is_readonly,
    .set_volsize = ds_set_volsize,
    .release = ds_release,
    .cache_props = true,
};

static int ds_init(zvol_state_t *zs, void *arg)
{
    (void)arg;
    dsl_dataset_t *ds = zs_ds(zs);
    dsl_dataset_props_t dp;
    dsl_dataset_get_props(ds, &dp);
    zvol_props_t p;
    ds_get_props(zs, &p);
    uint32_t vbs = dp.volblocksize ? dp.volblocksize : ZVOL_DEFAULT_VOLBLOCKSIZE;
    return zvol_object_setup(zs, vbs, &p, dp.readonly || dsl_dataset_is_snapshot(ds));
}

int zvol_open_ex(dsl_pool_t *dp, const char *name, const zvol_open_opts_t *opts, zvol_t **out)
{
    if (!dp || !name || !out) return -EINVAL;
    uint32_t lbs = opts && opts->block_size ? opts->block_size : ZVOL_DEFAULT_BLOCK_SIZE;
    if (lbs != 512 && lbs != 4096) return -EINVAL;
    dsl_dataset_t *ds;
    int err = dsl_dataset_hold(dp, name, &ds);
    if (err) return err;
    dsl_type_t t = dsl_dataset_type(ds);
    bool snap = dsl_dataset_is_snapshot(ds);
    if (!snap && t != DSL_TYPE_VOLUME) {
        dsl_dataset_rele(ds);
        return -ENOTBLK;
    }
    if (snap) {
        /* A snapshot of a volume: its volsize property is set; a filesystem's is 0. */
        dsl_dataset_props_t props;
        dsl_dataset_get_props(ds, &props);
        if (props.volsize == 0) {
            dsl_dataset_rele(ds);
            return -ENOTBLK;
        }
    }
    zvol_state_t *zs;
    bool created;
    err = zvol_state_get(dsl_dataset_objset(ds), &zvol_dsl_backend, ds, ds_init, NULL, &zs,
                         &created);
    if (err) {
        dsl_dataset_rele(ds);
        return err;
    }
    if (!created) dsl_dataset_rele(ds); /* the shared state keeps its own hold */
    if (zs->rs % lbs) {
        zvol_t *tmp = zvol_handle_new(zs, lbs, true);
        zvol_close(tmp);
        return -EINVAL;
    }
    *out = zvol_handle_new(zs, lbs, (opts && opts->readonly) || snap);
    return 0;
}

int zvol_open(dsl_pool_t *dp, const char *name, zvol_t **out)
{
    return zvol_open_ex(dp, name, NULL, out);
}
