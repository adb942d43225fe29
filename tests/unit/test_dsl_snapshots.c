/*
 * Snapshot, clone and rollback tests on a real pool: a snapshot keeps reading
 * the old data while the head is overwritten and freed; snapshots destroyed
 * oldest-first, middle-first and newest-first leave no leak and no double
 * free (spa_check) and bring space back to the baseline exactly; a clone
 * shares its origin's blocks, diverges on write and blocks the origin's
 * destruction; rollback restores the snapshot's content and frees what only
 * the head had; `snapshot -r` snapshots a whole subtree in one txg.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dsl.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsl_fixture.h"

#define REC 4096
#define NOBJ 4
#define NREC 16

static const dmu_object_props_t obj_props = {.recordsize = REC, .compress = CAIRN_COMPRESS_OFF,
                                             .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};

/* Fills object obj with records stamped (gen, obj, rec) in one transaction. */
static void write_gen(objset_t *os, uint64_t obj, uint32_t gen)
{
    uint8_t *buf = malloc(REC * NREC);
    for (int r = 0; r < NREC; r++)
        for (int i = 0; i < REC / 4; i++) ((uint32_t *)(buf + r * REC))[i] = gen * 1000003u + (uint32_t)obj * 131u + (uint32_t)r * 7u + (uint32_t)i + 1;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, REC * NREC, buf, tx), 0);
    dmu_tx_commit(tx);
    free(buf);
}

static bool has_gen(objset_t *os, uint64_t obj, uint32_t gen)
{
    uint8_t *buf = malloc(REC * NREC);
    if (dmu_read(os, obj, 0, REC * NREC, buf) != 0) {
        free(buf);
        return false;
    }
    bool ok = true;
    for (int r = 0; r < NREC && ok; r++)
        for (int i = 0; i < REC / 4 && ok; i++)
            ok = ((uint32_t *)(buf + r * REC))[i] == gen * 1000003u + (uint32_t)obj * 131u + (uint32_t)r * 7u + (uint32_t)i + 1;
    free(buf);
    return ok;
}

static uint64_t alloc_obj(objset_t *os)
{
    uint64_t o;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &obj_props, &o, tx), 0);
    dmu_tx_commit(tx);
    return o;
}

static void free_obj(objset_t *os, uint64_t o)
{
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_free(os, o, tx), 0);
    dmu_tx_commit(tx);
}

static uint64_t pool_alloc(fx_t *f)
{
    assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
    assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
    spa_space_t s;
    spa_get_space(f->spa, &s);
    return s.alloc;
}

/* Allocated bytes but the space map log's (see spa_spacemap_log_bytes). */
static uint64_t pool_alloc_data(fx_t *f)
{
    uint64_t a = pool_alloc(f);
    return a - spa_spacemap_log_bytes(f->spa);
}

static void sync_pool(fx_t *f)
{
    /* Frees are deferred a few txgs: let them land. */
    for (int i = 0; i < SPA_DEFER_TXGS + 2; i++) assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
}

/* The space identity of a head. */
static void check_identity(fx_t *f, const char *ds)
{
    uint64_t used = fx_num(f, ds, "used");
    uint64_t sum = fx_num(f, ds, "usedbydataset") + fx_num(f, ds, "usedbysnapshots") +
                   fx_num(f, ds, "usedbychildren") + fx_num(f, ds, "usedbyrefreservation");
    assert_int_equal(used, sum);
}

/* Writes generation 1, snapshots s1, gen 2, s2, gen 3, s3, gen 4, in `fs`. */
static void build_chain(fx_t *f, const char *fs, uint64_t objs[NOBJ])
{
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f->dp, fs, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    for (int i = 0; i < NOBJ; i++) objs[i] = alloc_obj(os);
    for (uint32_t g = 1; g <= 4; g++) {
        for (int i = 0; i < NOBJ; i++)
            if (g == 1 || i % 2 == (int)(g % 2)) write_gen(os, objs[i], g);
        if (g < 4) {
            char sn[400];
            snprintf(sn, sizeof(sn), "%s@s%u", fs, g);
            OK(dsl_snapshot(f->dp, sn, false, fx_err, sizeof(fx_err)));
        }
    }
    dsl_dataset_rele(ds);
    sync_pool(f);
}

/* Expected generation of object i in snapshot s (1..3) or the head (4). */
static uint32_t expect_gen(int i, uint32_t s)
{
    uint32_t g = 1;
    for (uint32_t k = 2; k <= s; k++)
        if (i % 2 == (int)(k % 2)) g = k;
    return g;
}

static void verify_snap(fx_t *f, const char *fs, uint32_t s, const uint64_t objs[NOBJ])
{
    char sn[400];
    if (s == 4) snprintf(sn, sizeof(sn), "%s", fs);
    else snprintf(sn, sizeof(sn), "%s@s%u", fs, s);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f->dp, sn, &ds));
    for (int i = 0; i < NOBJ; i++) assert_true(has_gen(dsl_dataset_objset(ds), objs[i], expect_gen(i, s)));
    dsl_dataset_rele(ds);
}

static void destroy_cycle(fx_t *fp, const int order[3])
{
    fx_t f = *fp;
    char fs[300];
    fx_ds_name(&f, fs, sizeof(fs), "data");
    fx_create_fs(&f, fs);
    uint64_t objs[NOBJ];
    build_chain(&f, fs, objs);
    for (uint32_t s = 1; s <= 4; s++) verify_snap(&f, fs, s, objs);
    check_identity(&f, fs);
    assert_true(fx_num(&f, fs, "usedbysnapshots") > 0);
    /* A snapshot can't be written. */
    dsl_dataset_t *sds;
    char sn[400];
    snprintf(sn, sizeof(sn), "%s@s1", fs);
    OK(dsl_dataset_hold(f.dp, sn, &sds));
    assert_true(dsl_dataset_is_snapshot(sds));
    dmu_tx_t *tx = dmu_tx_begin(dsl_dataset_objset(sds));
    assert_int_not_equal(dmu_write(dsl_dataset_objset(sds), objs[0], 0, 1, "x", tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dsl_dataset_check_space(sds, 1), -EROFS);
    dsl_dataset_rele(sds);

    fx_reimport(&f);
    for (uint32_t s = 1; s <= 4; s++) verify_snap(&f, fs, s, objs);
    bool gone[5] = {false};
    for (int k = 0; k < 3; k++) {
        int s = order[k];
        snprintf(sn, sizeof(sn), "%s@s%d", fs, s);
        /* used of a snapshot = what destroying it frees; logicalused the same
         * blocks counted before compression. */
        uint64_t snap_used = fx_num(&f, sn, "used");
        uint64_t snap_logical = fx_num(&f, sn, "logicalused");
        uint64_t before = fx_num(&f, fs, "usedbysnapshots");
        uint64_t lbefore = fx_num(&f, fs, "logicalused");
        uint64_t pbefore = pool_alloc(&f);
        OK(dsl_dataset_destroy(f.dp, sn, false, false, fx_err, sizeof(fx_err)));
        sync_pool(&f);
        gone[s] = true;
        assert_int_equal(before - fx_num(&f, fs, "usedbysnapshots"), snap_used);
        assert_int_equal(lbefore - fx_num(&f, fs, "logicalused"), snap_logical);
        assert_int_equal(pbefore - pool_alloc(&f) >= snap_used, true);
        check_identity(&f, fs);
        for (uint32_t t = 1; t <= 4; t++)
            if (!gone[t]) verify_snap(&f, fs, t, objs);
        fx_export(&f);
        fx_check(&f);
        fx_import(&f);
    }
    assert_int_equal(fx_num(&f, fs, "usedbysnapshots"), 0);
    assert_int_equal(fx_num(&f, fs, "usedbydataset"), fx_num(&f, fs, "referenced"));
    OK(dsl_dataset_destroy(f.dp, fs, false, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    *fp = f;
}

/* Space comes back exactly, cycle after cycle: the root dataset's `used` to
 * its baseline, and the pool's allocation too but for the space map log,
 * which grows every txg until it is condensed (bounded, never a leak). */
static void run_destroy_order(const int order[3])
{
    fx_t f = {0};
    fx_make(&f, "dslsnap");
    uint64_t root_base = fx_num(&f, f.name, "used");
    uint64_t base = pool_alloc_data(&f);
    for (int cycle = 0; cycle < 2; cycle++) {
        destroy_cycle(&f, order);
        assert_int_equal(fx_num(&f, f.name, "used"), root_base);
        assert_int_equal(pool_alloc_data(&f), base);
    }
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

static void test_destroy_oldest_first(void **state)
{
    (void)state;
    run_destroy_order((const int[]){1, 2, 3});
}
static void test_destroy_middle_first(void **state)
{
    (void)state;
    run_destroy_order((const int[]){2, 1, 3});
}
static void test_destroy_newest_first(void **state)
{
    (void)state;
    run_destroy_order((const int[]){3, 2, 1});
}

static void test_clone(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslclone");
    uint64_t base = fx_num(&f, f.name, "used");
    char fs[300], cl[300], sn[400], err[256];
    fx_ds_name(&f, fs, sizeof(fs), "data");
    fx_ds_name(&f, cl, sizeof(cl), "copy");
    fx_create_fs(&f, fs);
    uint64_t objs[NOBJ];
    build_chain(&f, fs, objs);
    snprintf(sn, sizeof(sn), "%s@s2", fs);
    uint64_t before = pool_alloc(&f);
    OK(dsl_clone(f.dp, sn, cl, NULL, 0, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    /* A clone costs (almost) nothing: it shares everything. */
    assert_true(pool_alloc(&f) - before < 64 * 1024);
    assert_int_equal(fx_num(&f, cl, "referenced"), fx_num(&f, sn, "referenced"));
    assert_int_equal(fx_num(&f, cl, "logicalreferenced"), fx_num(&f, sn, "logicalreferenced"));
    assert_int_equal(fx_num(&f, cl, "written"), 0);
    dsl_prop_t p;
    OK(dsl_prop_get(f.dp, cl, "origin", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, sn);
    /* Write the clone: the origin is unchanged. */
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, cl, &ds));
    for (int i = 0; i < NOBJ; i++) assert_true(has_gen(dsl_dataset_objset(ds), objs[i], expect_gen(i, 2)));
    write_gen(dsl_dataset_objset(ds), objs[0], 77);
    free_obj(dsl_dataset_objset(ds), objs[1]);
    dsl_dataset_rele(ds);
    sync_pool(&f);
    fx_reimport(&f);
    OK(dsl_dataset_hold(f.dp, cl, &ds));
    assert_true(has_gen(dsl_dataset_objset(ds), objs[0], 77));
    dsl_dataset_rele(ds);
    verify_snap(&f, fs, 2, objs);
    verify_snap(&f, fs, 4, objs);
    check_identity(&f, cl);
    /* The origin cannot go while the clone lives. */
    assert_int_equal(dsl_dataset_destroy(f.dp, sn, false, false, err, sizeof(err)), -EBUSY);
    assert_non_null(strstr(err, "clone"));
    assert_int_equal(dsl_dataset_destroy(f.dp, fs, true, false, err, sizeof(err)), -EBUSY);
    /* Clone first, then the snapshot, then everything. */
    OK(dsl_dataset_destroy(f.dp, cl, false, false, fx_err, sizeof(fx_err)));
    OK(dsl_dataset_destroy(f.dp, sn, false, false, fx_err, sizeof(fx_err)));
    fx_export(&f);
    fx_check(&f);
    fx_import(&f);
    verify_snap(&f, fs, 1, objs);
    verify_snap(&f, fs, 3, objs);
    OK(dsl_dataset_destroy(f.dp, fs, true, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    assert_int_equal(fx_num(&f, f.name, "used"), base);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

/* A snapshot's used and logicalused grow as the head overwrites what it
 * shares, read after read (each read sums only what the head killed since the
 * last), and agree with a fresh sum after re-import and with what destroying
 * the snapshot gives back. */
static void test_snapshot_space_follows_the_head(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslsnapsp");
    char fs[300], sn[400];
    fx_ds_name(&f, fs, sizeof(fs), "data");
    fx_create_fs(&f, fs);
    snprintf(sn, sizeof(sn), "%s@s1", fs);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, fs, &ds));
    uint64_t objs[NOBJ];
    for (int i = 0; i < NOBJ; i++) objs[i] = alloc_obj(dsl_dataset_objset(ds));
    for (int i = 0; i < NOBJ; i++) write_gen(dsl_dataset_objset(ds), objs[i], 1);
    dsl_dataset_rele(ds);
    sync_pool(&f);
    OK(dsl_snapshot(f.dp, sn, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    assert_int_equal(fx_num(&f, sn, "used"), 0);
    assert_int_equal(fx_num(&f, sn, "logicalused"), 0);
    uint64_t used = 0, logical = 0;
    for (int i = 0; i < NOBJ; i++) {
        OK(dsl_dataset_hold(f.dp, fs, &ds));
        write_gen(dsl_dataset_objset(ds), objs[i], 2);
        dsl_dataset_rele(ds);
        sync_pool(&f);
        uint64_t u = fx_num(&f, sn, "used"), l = fx_num(&f, sn, "logicalused");
        /* each object's records are now the snapshot's alone (stored uncompressed) */
        assert_true(u >= used + NREC * REC);
        assert_true(l >= logical + NREC * REC);
        assert_int_equal(fx_num(&f, sn, "used"), u);
        used = u;
        logical = l;
    }
    fx_reimport(&f);
    assert_int_equal(fx_num(&f, sn, "used"), used);
    assert_int_equal(fx_num(&f, sn, "logicalused"), logical);
    /* written: what the head wrote since s1, which a snapshot taken now keeps
     * as its own written; the head starts again from nothing. */
    uint64_t written = fx_num(&f, fs, "written");
    assert_true(written >= NOBJ * NREC * REC);
    char sn2[400];
    snprintf(sn2, sizeof(sn2), "%s@s2", fs);
    OK(dsl_snapshot(f.dp, sn2, false, fx_err, sizeof(fx_err)));
    assert_int_equal(fx_num(&f, sn2, "written"), written);
    assert_int_equal(fx_num(&f, fs, "written"), 0);
    assert_int_equal(fx_num(&f, sn2, "logicalreferenced"), fx_num(&f, fs, "logicalreferenced"));
    OK(dsl_dataset_destroy(f.dp, sn2, false, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    uint64_t snaps_before = fx_num(&f, fs, "usedbysnapshots");
    uint64_t logical_before = fx_num(&f, fs, "logicalused");
    assert_int_equal(snaps_before, used);
    OK(dsl_dataset_destroy(f.dp, sn, false, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    assert_int_equal(fx_num(&f, fs, "usedbysnapshots"), 0);
    assert_int_equal(logical_before - fx_num(&f, fs, "logicalused"), logical);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

static void test_rollback(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslrb");
    uint64_t base = fx_num(&f, f.name, "used");
    char fs[300], sn[400], err[256];
    fx_ds_name(&f, fs, sizeof(fs), "data");
    fx_create_fs(&f, fs);
    uint64_t objs[NOBJ];
    build_chain(&f, fs, objs);
    /* Not the newest: refused without destroy_newer. */
    snprintf(sn, sizeof(sn), "%s@s2", fs);
    assert_int_equal(dsl_rollback(f.dp, sn, false, err, sizeof(err)), -EEXIST);
    snprintf(sn, sizeof(sn), "%s@s3", fs);
    uint64_t snapref = fx_num(&f, sn, "referenced");
    OK(dsl_rollback(f.dp, sn, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    verify_snap(&f, fs, 3, objs); /* s3 itself */
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, fs, &ds));
    for (int i = 0; i < NOBJ; i++) assert_true(has_gen(dsl_dataset_objset(ds), objs[i], expect_gen(i, 3)));
    dsl_dataset_rele(ds);
    assert_int_equal(fx_num(&f, fs, "referenced"), snapref);
    assert_int_equal(fx_num(&f, fs, "written"), 0);
    check_identity(&f, fs);
    fx_export(&f);
    fx_check(&f);
    fx_import(&f);
    /* Back to s1, destroying s2 and s3. */
    snprintf(sn, sizeof(sn), "%s@s1", fs);
    OK(dsl_rollback(f.dp, sn, true, fx_err, sizeof(fx_err)));
    OK(dsl_dataset_hold(f.dp, fs, &ds));
    for (int i = 0; i < NOBJ; i++) assert_true(has_gen(dsl_dataset_objset(ds), objs[i], 1));
    /* The head goes on living after a rollback. */
    write_gen(dsl_dataset_objset(ds), objs[2], 9);
    dsl_dataset_rele(ds);
    sync_pool(&f);
    /* s1 alone holds the overwritten records now. */
    snprintf(sn, sizeof(sn), "%s@s1", fs);
    assert_true(fx_num(&f, fs, "usedbysnapshots") >= (uint64_t)REC * NREC);
    assert_int_equal(fx_num(&f, fs, "usedbysnapshots"), fx_num(&f, sn, "used"));
    check_identity(&f, fs);
    fx_reimport(&f);
    OK(dsl_dataset_hold(f.dp, fs, &ds));
    assert_true(has_gen(dsl_dataset_objset(ds), objs[2], 9));
    dsl_dataset_rele(ds);
    OK(dsl_dataset_destroy(f.dp, fs, true, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    assert_int_equal(fx_num(&f, f.name, "used"), base);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

typedef struct snaplist {
    char v[16][DSL_NAME_MAX + 1];
    uint64_t txg[16];
    int n;
} snaplist_t;

static void snap_cb(const dsl_dataset_info_t *info, void *arg)
{
    snaplist_t *l = arg;
    if (l->n < 16) {
        cairn_strlcpy(l->v[l->n], info->name, DSL_NAME_MAX + 1);
        l->txg[l->n++] = info->creation_txg;
    }
}

static void short_cb(const char *snap, void *arg)
{
    int *n = arg;
    if (!strcmp(snap, "r1")) (*n)++;
}

static void test_recursive_snapshot(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslrec");
    char a[300], ab[300], ac[300], sn[400], err[256];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_ds_name(&f, ab, sizeof(ab), "a/b");
    fx_ds_name(&f, ac, sizeof(ac), "a/c");
    fx_create_fs(&f, a);
    fx_create_fs(&f, ab);
    fx_create_fs(&f, ac);
    /* One child already has the name: nothing is created (all or nothing). */
    snprintf(sn, sizeof(sn), "%s@r1", ac);
    OK(dsl_snapshot(f.dp, sn, false, fx_err, sizeof(fx_err)));
    snprintf(sn, sizeof(sn), "%s@r1", a);
    assert_int_equal(dsl_snapshot(f.dp, sn, true, err, sizeof(err)), -EEXIST);
    snaplist_t l = {0};
    OK(dsl_dataset_list(f.dp, a, true, 1u << DSL_TYPE_SNAPSHOT, snap_cb, &l, fx_err, sizeof(fx_err)));
    assert_int_equal(l.n, 1);
    snprintf(sn, sizeof(sn), "%s@r2", a);
    OK(dsl_snapshot(f.dp, sn, true, fx_err, sizeof(fx_err)));
    memset(&l, 0, sizeof(l));
    fx_reimport(&f);
    OK(dsl_dataset_list(f.dp, a, true, 1u << DSL_TYPE_SNAPSHOT, snap_cb, &l, fx_err, sizeof(fx_err)));
    assert_int_equal(l.n, 4);
    int r2 = 0;
    uint64_t t = 0;
    for (int i = 0; i < l.n; i++)
        if (strstr(l.v[i], "@r2")) {
            if (r2++ == 0) t = l.txg[i];
            assert_int_equal(l.txg[i], t); /* one txg for all */
        }
    assert_int_equal(r2, 3);
    /* Snapshot rename within the dataset only. */
    char from[400], to[400];
    snprintf(from, sizeof(from), "%s@r2", ab);
    snprintf(to, sizeof(to), "%s@r3", ab);
    OK(dsl_dataset_rename(f.dp, from, to, fx_err, sizeof(fx_err)));
    snprintf(to, sizeof(to), "%s@r3", ac);
    snprintf(from, sizeof(from), "%s@r3", ab);
    assert_int_equal(dsl_dataset_rename(f.dp, from, to, err, sizeof(err)), -EINVAL);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, ac, &ds));
    int n = 0;
    OK(dsl_dataset_list_snapshots(ds, short_cb, &n));
    assert_int_equal(n, 1);
    dsl_dataset_rele(ds);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

/* Renaming a snapshot changes its name and nothing else: the data, guid,
 * space and creation order stay; a clone's origin and a holder follow the new
 * name; the old name is free again; an existing name is refused without any
 * change; the rename survives an import, and rollback and destroy work by the
 * new name. */
static void test_snapshot_rename(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslsnapren");
    char fs[300], cl[300], s1[400], s2[400], s3[400], moved[400], err[256];
    fx_ds_name(&f, fs, sizeof(fs), "data");
    fx_ds_name(&f, cl, sizeof(cl), "copy");
    fx_create_fs(&f, fs);
    uint64_t objs[NOBJ];
    build_chain(&f, fs, objs);
    snprintf(s1, sizeof(s1), "%s@s1", fs);
    snprintf(s2, sizeof(s2), "%s@s2", fs);
    snprintf(s3, sizeof(s3), "%s@s3", fs);
    snprintf(moved, sizeof(moved), "%s@moved", fs);
    OK(dsl_clone(f.dp, s2, cl, NULL, 0, fx_err, sizeof(fx_err)));
    uint64_t guid = fx_num(&f, s2, "guid"), refd = fx_num(&f, s2, "referenced");
    uint64_t used = fx_num(&f, s2, "used"), created = fx_num(&f, s2, "creation");
    snaplist_t before = {0};
    OK(dsl_dataset_list(f.dp, s2, false, 1u << DSL_TYPE_SNAPSHOT, snap_cb, &before, fx_err,
                        sizeof(fx_err)));
    assert_int_equal(before.n, 1);
    const uint64_t created_txg = before.txg[0];
    dsl_dataset_t *held;
    OK(dsl_dataset_hold(f.dp, s2, &held));

    OK(dsl_dataset_rename(f.dp, s2, moved, fx_err, sizeof(fx_err)));
    dsl_dataset_t *ds;
    assert_int_equal(dsl_dataset_hold(f.dp, s2, &ds), -ENOENT);
    assert_string_equal(dsl_dataset_name(held), moved);
    for (int i = 0; i < NOBJ; i++)
        assert_true(has_gen(dsl_dataset_objset(held), objs[i], expect_gen(i, 2)));
    dsl_dataset_rele(held);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(fx_num(&f, moved, "guid"), guid);
        assert_int_equal(fx_num(&f, moved, "referenced"), refd);
        assert_int_equal(fx_num(&f, moved, "used"), used);
        assert_int_equal(fx_num(&f, moved, "creation"), created);
        dsl_prop_t p;
        OK(dsl_prop_get(f.dp, cl, "origin", &p, fx_err, sizeof(fx_err)));
        assert_string_equal(p.value, moved);
        OK(dsl_dataset_hold(f.dp, moved, &ds));
        for (int i = 0; i < NOBJ; i++)
            assert_true(has_gen(dsl_dataset_objset(ds), objs[i], expect_gen(i, 2)));
        dsl_dataset_rele(ds);
        assert_int_equal(dsl_dataset_hold(f.dp, s2, &ds), -ENOENT);
        /* Listed under the new name, with its creation txg. */
        snaplist_t l = {0};
        OK(dsl_dataset_list(f.dp, fs, true, 1u << DSL_TYPE_SNAPSHOT, snap_cb, &l, fx_err,
                            sizeof(fx_err)));
        assert_int_equal(l.n, 3);
        int found = 0;
        for (int i = 0; i < l.n; i++) {
            assert_true(strcmp(l.v[i], s2) != 0);
            if (!strcmp(l.v[i], moved)) {
                assert_int_equal(l.txg[i], created_txg);
                found++;
            }
        }
        assert_int_equal(found, 1);
        /* Onto an existing snapshot: refused, nothing changes. */
        assert_int_equal(dsl_dataset_rename(f.dp, moved, s1, err, sizeof(err)), -EEXIST);
        assert_int_equal(fx_num(&f, s1, "referenced") != 0, 1);
        verify_snap(&f, fs, 1, objs);
        if (round == 0) fx_reimport(&f);
    }
    /* The old name is free for a new snapshot. */
    OK(dsl_snapshot(f.dp, s2, false, fx_err, sizeof(fx_err)));
    assert_true(fx_num(&f, s2, "guid") != guid);
    OK(dsl_dataset_destroy(f.dp, cl, false, false, fx_err, sizeof(fx_err)));
    /* Roll back to it by its new name (dropping the two newer ones). */
    OK(dsl_rollback(f.dp, moved, true, fx_err, sizeof(fx_err)));
    OK(dsl_dataset_hold(f.dp, fs, &ds));
    for (int i = 0; i < NOBJ; i++)
        assert_true(has_gen(dsl_dataset_objset(ds), objs[i], expect_gen(i, 2)));
    dsl_dataset_rele(ds);
    assert_int_equal(dsl_dataset_hold(f.dp, s3, &ds), -ENOENT);
    OK(dsl_dataset_destroy(f.dp, moved, false, false, fx_err, sizeof(fx_err)));
    check_identity(&f, fs);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destroy_oldest_first),
        cmocka_unit_test(test_destroy_middle_first),
        cmocka_unit_test(test_destroy_newest_first),
        cmocka_unit_test(test_clone),
        cmocka_unit_test(test_snapshot_space_follows_the_head),
        cmocka_unit_test(test_rollback),
        cmocka_unit_test(test_recursive_snapshot),
        cmocka_unit_test(test_snapshot_rename),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
