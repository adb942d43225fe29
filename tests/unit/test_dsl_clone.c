/*
 * Block cloning under datasets (dmu_clone_range through the DSL's born and
 * kill hooks): a dataset's `used` counts every reference (a clone of 16 MiB
 * grows it by 16 MiB) while the pool allocates the block once; snapshots hold
 * cloned blocks as they hold any other, whether taken after the clone or
 * before it; destroying the dataset gives the space back; the offline check
 * is clean throughout. A clone's pointers are born in the clone's txg (their
 * bytes keep their own date as the physical birth): a destination with an
 * older snapshot, a rollback past the clone and a destroyed dataset clone all
 * give the reference back, which they never did while the pointers carried
 * the source's older birth (the space stayed allocated for good).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/dsl.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl_fixture.h"

#define REC (128u * 1024)
#define NREC 128u
#define DATA_BYTES ((uint64_t)NREC * REC)
#define SLACK (2u * CAIRN_MIB)

static const dmu_object_props_t props = {.recordsize = REC,
                                         .compress = CAIRN_COMPRESS_OFF,
                                         .checksum = CAIRN_CHECKSUM_FLETCHER4,
                                         .copies = 1};

typedef struct cl {
    fx_t f;
    char fs[300];
    dsl_dataset_t *ds;
    objset_t *os;
    uint64_t a, b;
    uint8_t *data;
    uint64_t alloc_empty;
} cl_t;

static void sync_pool(cl_t *c) { assert_int_equal(spa_txg_wait_synced(c->f.spa, 0), 0); }

static uint64_t pool_alloc(cl_t *c)
{
    for (int i = 0; i < 6; i++) sync_pool(c);
    spa_space_t sp;
    spa_get_space(c->f.spa, &sp);
    return sp.alloc;
}

static void assert_alloc_near(cl_t *c, uint64_t want, const char *what)
{
    uint64_t alloc = pool_alloc(c);
    if (alloc > want + SLACK || alloc + SLACK < want)
        fail_msg("%s: alloc %llu, expected about %llu", what, (unsigned long long)alloc,
                 (unsigned long long)want);
}

static uint64_t new_object(cl_t *c)
{
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(c->os);
    assert_int_equal(dmu_object_alloc(c->os, &props, &obj, tx), 0);
    dmu_tx_commit(tx);
    return obj;
}

static void free_object(cl_t *c, uint64_t obj)
{
    dmu_tx_t *tx = dmu_tx_begin(c->os);
    assert_int_equal(dmu_object_free(c->os, obj, tx), 0);
    dmu_tx_commit(tx);
}

static void cl_make(cl_t *c, const char *tag)
{
    memset(c, 0, sizeof *c);
    fx_make(&c->f, tag);
    fx_ds_name(&c->f, c->fs, sizeof c->fs, "d");
    fx_create_fs(&c->f, c->fs);
    OK(dsl_dataset_hold(c->f.dp, c->fs, &c->ds));
    c->os = dsl_dataset_objset(c->ds);
    c->a = new_object(c);
    c->b = new_object(c);
    c->alloc_empty = pool_alloc(c);
    c->data = malloc(DATA_BYTES);
    for (uint64_t i = 0; i < DATA_BYTES / 8; i++) ((uint64_t *)c->data)[i] = i * 0x9e3779b97f4a7c15ull;
    dmu_tx_t *tx = dmu_tx_begin(c->os);
    assert_int_equal(dmu_write(c->os, c->a, 0, DATA_BYTES, c->data, tx), 0);
    dmu_tx_commit(tx);
    sync_pool(c);
}

static void cl_clone(cl_t *c)
{
    uint64_t n = 0;
    dmu_tx_t *tx = dmu_tx_begin(c->os);
    assert_int_equal(dmu_clone_range(c->os, c->a, 0, c->os, c->b, 0, DATA_BYTES, tx, &n), 0);
    dmu_tx_commit(tx);
    assert_int_equal(n, NREC);
}

static void assert_reads(cl_t *c, uint64_t obj)
{
    uint8_t *got = malloc(DATA_BYTES);
    assert_int_equal(dmu_read(c->os, obj, 0, DATA_BYTES, got), 0);
    assert_memory_equal(got, c->data, DATA_BYTES);
    free(got);
}

static void cl_done(cl_t *c)
{
    dsl_dataset_rele(c->ds);
    fx_export(&c->f);
    fx_check(&c->f);
    fx_destroy(&c->f);
    free(c->data);
}

static void test_used_counts_references(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslclone");
    uint64_t alloc1 = pool_alloc(&c);
    uint64_t used1 = fx_num(&c.f, c.fs, "used");
    cl_clone(&c);
    uint64_t alloc2 = pool_alloc(&c);
    uint64_t used2 = fx_num(&c.f, c.fs, "used");
    assert_true(alloc2 < alloc1 + SLACK);
    if (used2 < used1 + DATA_BYTES || used2 > used1 + DATA_BYTES + SLACK)
        fail_msg("used %llu -> %llu after a clone of %llu", (unsigned long long)used1,
                 (unsigned long long)used2, (unsigned long long)DATA_BYTES);
    assert_reads(&c, c.b);
    free_object(&c, c.a);
    assert_alloc_near(&c, alloc1, "source freed");
    uint64_t used3 = fx_num(&c.f, c.fs, "used");
    assert_true(used3 + DATA_BYTES <= used2 + SLACK && used3 + SLACK >= used2 - DATA_BYTES);
    free_object(&c, c.b);
    assert_alloc_near(&c, c.alloc_empty, "both freed");
    cl_done(&c);
}

/* A snapshot of the dataset holding source and clone keeps the blocks after
 * both are removed; destroying it gives the space back. */
static void test_snapshot_after_clone(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslclsnap");
    uint64_t alloc1 = pool_alloc(&c);
    cl_clone(&c);
    sync_pool(&c);
    char sn[320];
    snprintf(sn, sizeof sn, "%s@s", c.fs);
    OK(dsl_snapshot(c.f.dp, sn, false, fx_err, sizeof fx_err));
    free_object(&c, c.a);
    free_object(&c, c.b);
    assert_alloc_near(&c, alloc1, "removed, the snapshot holds them");
    OK(dsl_dataset_destroy(c.f.dp, sn, false, false, fx_err, sizeof fx_err));
    assert_alloc_near(&c, c.alloc_empty, "snapshot destroyed");
    cl_done(&c);
}

/* A snapshot older than the clone: the source's blocks are held by it; the
 * clone's references are newer than it and go at once. */
static void test_snapshot_before_clone(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslclold");
    uint64_t alloc1 = pool_alloc(&c);
    char sn[320];
    snprintf(sn, sizeof sn, "%s@old", c.fs);
    OK(dsl_snapshot(c.f.dp, sn, false, fx_err, sizeof fx_err));
    cl_clone(&c);
    free_object(&c, c.b);
    assert_alloc_near(&c, alloc1, "clone removed");
    assert_reads(&c, c.a);
    free_object(&c, c.a);
    assert_alloc_near(&c, alloc1, "source removed, the snapshot holds it");
    dsl_dataset_rele(c.ds);
    fx_export(&c.f);
    fx_check(&c.f);
    fx_import(&c.f);
    OK(dsl_dataset_hold(c.f.dp, c.fs, &c.ds));
    c.os = dsl_dataset_objset(c.ds);
    OK(dsl_dataset_destroy(c.f.dp, sn, false, false, fx_err, sizeof fx_err));
    assert_alloc_near(&c, c.alloc_empty, "snapshot destroyed");
    spa_brt_stats_t st;
    spa_brt_stats(c.f.spa, &st);
    assert_int_equal(st.entries, 0);
    cl_done(&c);
}

/* A second dataset of the pool, empty, with one object. */
static objset_t *other_fs(cl_t *c, const char *tag, char *fs2, size_t len, dsl_dataset_t **ds2,
                          uint64_t *obj)
{
    fx_ds_name(&c->f, fs2, len, tag);
    fx_create_fs(&c->f, fs2);
    OK(dsl_dataset_hold(c->f.dp, fs2, ds2));
    objset_t *os2 = dsl_dataset_objset(*ds2);
    dmu_tx_t *tx = dmu_tx_begin(os2);
    assert_int_equal(dmu_object_alloc(os2, &props, obj, tx), 0);
    dmu_tx_commit(tx);
    sync_pool(c);
    return os2;
}

static void clone_into(cl_t *c, objset_t *os2, uint64_t obj)
{
    uint64_t n = 0;
    dmu_tx_t *tx = dmu_tx_begin(os2);
    assert_int_equal(dmu_clone_range(c->os, c->a, 0, os2, obj, 0, DATA_BYTES, tx, &n), 0);
    dmu_tx_commit(tx);
    assert_int_equal(n, NREC);
    sync_pool(c);
}

static void assert_no_shared(cl_t *c)
{
    spa_brt_stats_t st;
    spa_brt_stats(c->f.spa, &st);
    assert_int_equal(st.entries, 0);
}

/* The destination has a snapshot taken after the source was written, before
 * the clone: removing the clone and then the source gives everything back
 * while that snapshot stays (it never held the clone). */
static void test_destination_snapshot_older_than_clone(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslclsnapdst");
    char fs2[320], sn[340];
    dsl_dataset_t *ds2;
    uint64_t obj;
    objset_t *os2 = other_fs(&c, "e", fs2, sizeof fs2, &ds2, &obj);
    snprintf(sn, sizeof sn, "%s@old", fs2);
    OK(dsl_snapshot(c.f.dp, sn, false, fx_err, sizeof fx_err));
    clone_into(&c, os2, obj);
    dmu_tx_t *tx = dmu_tx_begin(os2);
    assert_int_equal(dmu_object_free(os2, obj, tx), 0);
    dmu_tx_commit(tx);
    free_object(&c, c.a);
    assert_alloc_near(&c, c.alloc_empty, "clone and source removed, the old snapshot kept");
    assert_no_shared(&c);
    dsl_dataset_rele(ds2);
    cl_done(&c);
}

/* A rollback of the destination to a snapshot older than the clone drops
 * the clone's references; removing the source then gives the space back. */
static void test_rollback_past_clone(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslclrollback");
    char fs2[320], sn[340];
    dsl_dataset_t *ds2;
    uint64_t obj;
    objset_t *os2 = other_fs(&c, "e", fs2, sizeof fs2, &ds2, &obj);
    snprintf(sn, sizeof sn, "%s@before", fs2);
    OK(dsl_snapshot(c.f.dp, sn, false, fx_err, sizeof fx_err));
    clone_into(&c, os2, obj);
    dsl_dataset_rele(ds2);
    OK(dsl_rollback(c.f.dp, sn, false, fx_err, sizeof fx_err));
    free_object(&c, c.a);
    assert_alloc_near(&c, c.alloc_empty, "rolled back past the clone, source removed");
    assert_no_shared(&c);
    cl_done(&c);
}

/* A dataset clone (of a snapshot taken before the block clone) that received
 * the block clone, destroyed: its references go with it. */
static void test_destroy_dataset_clone_with_block_clone(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslcloriginx");
    char fs2[320], sn[340], fs3[320];
    dsl_dataset_t *ds2, *ds3;
    uint64_t obj;
    (void)other_fs(&c, "e", fs2, sizeof fs2, &ds2, &obj);
    dsl_dataset_rele(ds2);
    snprintf(sn, sizeof sn, "%s@origin", fs2);
    OK(dsl_snapshot(c.f.dp, sn, false, fx_err, sizeof fx_err));
    fx_ds_name(&c.f, fs3, sizeof fs3, "f");
    OK(dsl_clone(c.f.dp, sn, fs3, NULL, 0, fx_err, sizeof fx_err));
    OK(dsl_dataset_hold(c.f.dp, fs3, &ds3));
    clone_into(&c, dsl_dataset_objset(ds3), obj);
    free_object(&c, c.a);
    dsl_dataset_rele(ds3);
    OK(dsl_dataset_destroy(c.f.dp, fs3, false, false, fx_err, sizeof fx_err));
    assert_alloc_near(&c, c.alloc_empty, "dataset clone destroyed, source removed");
    assert_no_shared(&c);
    cl_done(&c);
}

/* Destroying a dataset that holds a clone of another's file. */
static void test_destroy_dataset_with_clone(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslcldestroy");
    uint64_t alloc1 = pool_alloc(&c);
    char fs2[320];
    fx_ds_name(&c.f, fs2, sizeof fs2, "e");
    fx_create_fs(&c.f, fs2);
    dsl_dataset_t *ds2;
    OK(dsl_dataset_hold(c.f.dp, fs2, &ds2));
    objset_t *os2 = dsl_dataset_objset(ds2);
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os2);
    assert_int_equal(dmu_object_alloc(os2, &props, &obj, tx), 0);
    dmu_tx_commit(tx);
    sync_pool(&c);
    uint64_t used_e = fx_num(&c.f, fs2, "used");
    uint64_t n = 0;
    tx = dmu_tx_begin(os2);
    assert_int_equal(dmu_clone_range(c.os, c.a, 0, os2, obj, 0, DATA_BYTES, tx, &n), 0);
    dmu_tx_commit(tx);
    assert_int_equal(n, NREC);
    uint64_t alloc2 = pool_alloc(&c);
    assert_true(fx_num(&c.f, fs2, "used") >= used_e + DATA_BYTES);
    free_object(&c, c.a);
    dsl_dataset_rele(ds2);
    OK(dsl_dataset_destroy(c.f.dp, fs2, false, false, fx_err, sizeof fx_err));
    assert_true(pool_alloc(&c) + DATA_BYTES <= alloc2 + SLACK);
    (void)alloc1;
    spa_brt_stats_t st;
    spa_brt_stats(c.f.spa, &st);
    assert_int_equal(st.entries, 0);
    cl_done(&c);
}

/* The table and the counts across an export and import. */
static void test_reimport(void **state)
{
    (void)state;
    cl_t c;
    cl_make(&c, "dslclimp");
    cl_clone(&c);
    sync_pool(&c);
    uint64_t used = fx_num(&c.f, c.fs, "used");
    dsl_dataset_rele(c.ds);
    fx_reimport(&c.f);
    OK(dsl_dataset_hold(c.f.dp, c.fs, &c.ds));
    c.os = dsl_dataset_objset(c.ds);
    assert_int_equal(fx_num(&c.f, c.fs, "used"), used);
    assert_reads(&c, c.b);
    free_object(&c, c.a);
    free_object(&c, c.b);
    assert_alloc_near(&c, c.alloc_empty, "both freed");
    cl_done(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_used_counts_references),
        cmocka_unit_test(test_snapshot_after_clone),
        cmocka_unit_test(test_snapshot_before_clone),
        cmocka_unit_test(test_destroy_dataset_with_clone),
        cmocka_unit_test(test_destination_snapshot_older_than_clone),
        cmocka_unit_test(test_rollback_past_clone),
        cmocka_unit_test(test_destroy_dataset_clone_with_block_clone),
        cmocka_unit_test(test_reimport),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
