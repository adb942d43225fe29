/*
 * The DMU's defragmenter (src/dmu/dmu_defrag.c) on a dataset of a real pool:
 * an object written in sequence and then scattered by random rewrites (each
 * batch of rewrites synced in a txg of its own, so they land apart), then
 * defragmented. Checked: its content is unchanged, its records lie in record
 * order end to end again (the mean gap between neighbours shrinks), blocks a
 * snapshot holds are not rewritten (the dataset's `used` does not grow by the
 * data), a client write racing the defragmenter wins, and the pool has no
 * leaked or doubly referenced block afterwards. It lives with the DSL tests
 * because snapshots are the DSL's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/dsl.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/dmu/dmu_impl.h"
#include "dsl_fixture.h"

#define REC 8192u
#define NREC 512u /* 4 MiB: four 1 MiB windows */

static const dmu_object_props_t obj_props = {.recordsize = REC,
                                             .compress = CAIRN_COMPRESS_OFF,
                                             .checksum = CAIRN_CHECKSUM_FLETCHER4,
                                             .copies = 1};

typedef struct vol {
    fx_t f;
    char ds_name[300];
    dsl_dataset_t *ds;
    objset_t *os;
    uint64_t obj;
    uint8_t *model; /* what the object must read as */
    uint64_t seed;
} vol_t;

static void stamp(uint8_t *rec, uint32_t r, uint32_t gen)
{
    for (uint32_t i = 0; i < REC / 4; i++)
        ((uint32_t *)rec)[i] = gen * 2654435761u ^ (r * 40503u + i);
}

static void write_rec(vol_t *v, uint32_t r, uint32_t gen)
{
    stamp(v->model + (size_t)r * REC, r, gen);
    dmu_tx_t *tx = dmu_tx_begin(v->os);
    assert_int_equal(
        dmu_write(v->os, v->obj, (uint64_t)r * REC, REC, v->model + (size_t)r * REC, tx), 0);
    dmu_tx_commit(tx);
}

static void sync_pool(vol_t *v) { assert_int_equal(spa_txg_wait_synced(v->f.spa, 0), 0); }

static void vol_make(vol_t *v, const char *tag)
{
    memset(v, 0, sizeof(*v));
    fx_make(&v->f, tag);
    fx_ds_name(&v->f, v->ds_name, sizeof(v->ds_name), "d");
    fx_create_fs(&v->f, v->ds_name);
    OK(dsl_dataset_hold(v->f.dp, v->ds_name, &v->ds));
    v->os = dsl_dataset_objset(v->ds);
    dmu_tx_t *tx = dmu_tx_begin(v->os);
    assert_int_equal(dmu_object_alloc(v->os, &obj_props, &v->obj, tx), 0);
    dmu_tx_commit(tx);
    v->model = malloc((size_t)NREC * REC);
    for (uint32_t r = 0; r < NREC; r++) stamp(v->model + (size_t)r * REC, r, 1);
    tx = dmu_tx_begin(v->os);
    assert_int_equal(dmu_write(v->os, v->obj, 0, (uint64_t)NREC * REC, v->model, tx), 0);
    dmu_tx_commit(tx);
    sync_pool(v);
    v->seed = 12345;
}

/* Rewrites n random records, eight per txg, so that neighbours land apart. */
static void scatter(vol_t *v, uint32_t n, uint32_t gen)
{
    for (uint32_t i = 0; i < n; i++) {
        v->seed = v->seed * 6364136223846793005ull + 1442695040888963407ull;
        write_rec(v, (uint32_t)(v->seed >> 33) % NREC, gen);
        if (i % 8 == 7) sync_pool(v);
    }
    sync_pool(v);
}

static void bps_of(vol_t *v, cairn_blkptr_t *bps)
{
    dnode_t *dn = dnode_hold(v->os, v->obj, false);
    assert_non_null(dn);
    assert_int_equal(dnode_prefetch_bps(dn, 0, NREC, bps), REC);
    dnode_rele(dn);
    for (uint32_t r = 0; r < NREC; r++) assert_false(cairn_bp_is_hole(&bps[r]));
}

/* Mean distance between where a record's block ends and its successor's begins. */
static double mean_gap(vol_t *v)
{
    cairn_blkptr_t *bps = malloc(NREC * sizeof(*bps));
    bps_of(v, bps);
    double sum = 0;
    for (uint32_t r = 1; r < NREC; r++) {
        const cairn_dva_t *a = &bps[r - 1].dva[0], *b = &bps[r].dva[0];
        uint64_t end = a->offset + cairn_dva_asize(a);
        sum += (double)(b->offset > end ? b->offset - end : end - b->offset);
    }
    free(bps);
    return sum / (NREC - 1);
}

/* Neighbours that do not lie end to end, in record order. */
static uint32_t breaks(vol_t *v)
{
    cairn_blkptr_t *bps = malloc(NREC * sizeof(*bps));
    bps_of(v, bps);
    uint32_t n = 0;
    for (uint32_t r = 1; r < NREC; r++)
        if (bps[r].dva[0].offset != bps[r - 1].dva[0].offset + cairn_dva_asize(&bps[r - 1].dva[0]))
            n++;
    free(bps);
    return n;
}

static void check_content(vol_t *v)
{
    uint8_t *buf = malloc((size_t)NREC * REC);
    assert_int_equal(dmu_read(v->os, v->obj, 0, (uint64_t)NREC * REC, buf), 0);
    for (uint32_t r = 0; r < NREC; r++)
        if (memcmp(buf + (size_t)r * REC, v->model + (size_t)r * REC, REC))
            fail_msg("record %u differs", r);
    free(buf);
}

static void defrag(vol_t *v, dmu_defrag_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    dmu_defrag_opts_t o = {0};
    assert_int_equal(dmu_defrag_object(v->os, v->obj, &o, st), 0);
    assert_true(st->next_blkid >= NREC);
    sync_pool(v);
}

/* The leak check runs on the exported pool. */
static void vol_finish(vol_t *v)
{
    dsl_dataset_rele(v->ds);
    fx_export(&v->f);
    fx_check(&v->f);
    fx_destroy(&v->f);
    free(v->model);
}

static void test_defrag_gathers_records(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "defrag_gather");
    uint32_t seq_breaks = breaks(&v);
    scatter(&v, 2 * NREC, 2);
    check_content(&v);
    double gap_before = mean_gap(&v);
    uint32_t breaks_before = breaks(&v);
    printf("written in sequence: %u breaks; scattered: %u breaks, mean gap %.0f bytes\n",
           seq_breaks, breaks_before, gap_before);
    assert_true(breaks_before > NREC / 2); /* the rewrites did scatter it */

    dmu_defrag_stats_t st;
    defrag(&v, &st);
    double gap_after = mean_gap(&v);
    uint32_t breaks_after = breaks(&v);
    printf("defragmented: %llu of %llu windows, %llu records; %u breaks, mean gap %.0f bytes\n",
           (unsigned long long)st.windows_rewritten, (unsigned long long)st.windows,
           (unsigned long long)st.records, breaks_after, gap_after);
    assert_int_equal(st.windows, NREC * REC / DMU_DEFRAG_WINDOW_DEFAULT);
    assert_int_equal(st.windows_rewritten, st.windows);
    assert_int_equal(st.shared_records, 0);
    check_content(&v);
    /* Each window is one allocation: in order, end to end, apart from where one
     * window's batch ends and the next begins. */
    assert_true(breaks_after <= st.windows);
    assert_true(gap_after * 10 < gap_before);

    /* Gathered windows are left alone: a second pass rewrites nothing. */
    defrag(&v, &st);
    assert_int_equal(st.windows_rewritten, 0);
    assert_int_equal(st.records, 0);
    check_content(&v);
    /* What it wrote is the pool's content after a re-import too. */
    dsl_dataset_rele(v.ds);
    fx_reimport(&v.f);
    OK(dsl_dataset_hold(v.f.dp, v.ds_name, &v.ds));
    v.os = dsl_dataset_objset(v.ds);
    check_content(&v);
    vol_finish(&v);
}

static void test_defrag_leaves_snapshot_blocks(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "defrag_snap");
    scatter(&v, 2 * NREC, 2);
    cairn_blkptr_t *pre = malloc(NREC * sizeof(*pre)), *before = malloc(NREC * sizeof(*before)),
                   *after = malloc(NREC * sizeof(*after));
    bps_of(&v, pre);
    char snap[400];
    fx_ds_name(&v.f, snap, sizeof(snap), "d@s1");
    OK(dsl_snapshot(v.f.dp, snap, false, fx_err, sizeof(fx_err)));
    sync_pool(&v);
    /* A few records rewritten after the snapshot are the head's own. */
    scatter(&v, 64, 3);
    bps_of(&v, before);
    uint64_t used_before = fx_num(&v.f, v.ds_name, "used");

    dmu_defrag_stats_t st;
    defrag(&v, &st);
    bps_of(&v, after);
    check_content(&v);
    uint64_t used_after = fx_num(&v.f, v.ds_name, "used");
    /* Blocks the snapshot holds (unchanged since it was taken) stay where they are. */
    uint32_t held = 0;
    for (uint32_t r = 0; r < NREC; r++) {
        if (memcmp(&before[r], &pre[r], sizeof(pre[r]))) continue;
        held++;
        if (memcmp(&after[r], &before[r], sizeof(before[r])))
            fail_msg("snapshot's record %u moved", r);
    }
    printf("with a snapshot: %u records held by it; %llu rewritten, %llu shared left; used %llu -> "
           "%llu\n",
           held, (unsigned long long)st.records, (unsigned long long)st.shared_records,
           (unsigned long long)used_before, (unsigned long long)used_after);
    assert_true(held >= NREC - 64);
    assert_true(st.shared_records >= held / 2);
    assert_true(st.records <= NREC - held);
    /* Not doubled: rewriting the snapshot's blocks would have added ~4 MiB. */
    assert_true(used_after < used_before + 1024 * 1024);
    free(pre);
    free(before);
    free(after);
    vol_finish(&v);
}

/* A rewrite allocates before it frees: on a pool short of space the
 * defragmenter writes nothing. */
static void test_defrag_leaves_a_full_pool_alone(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "defrag_full");
    scatter(&v, 2 * NREC, 2);
    /* Fill the pool until less than an eighth of it (plus a little) is free. */
    uint64_t filler;
    dmu_tx_t *tx = dmu_tx_begin(v.os);
    assert_int_equal(dmu_object_alloc(v.os, &obj_props, &filler, tx), 0);
    dmu_tx_commit(tx);
    size_t chunk = 8u << 20;
    uint8_t *buf = malloc(chunk);
    for (size_t i = 0; i < chunk; i++) buf[i] = (uint8_t)(i * 131 + 7);
    spa_space_t sp;
    spa_get_space(v.f.spa, &sp);
    for (uint64_t off = 0; sp.free > sp.size / 8 + (16u << 20); off += chunk) {
        tx = dmu_tx_begin(v.os);
        assert_int_equal(dmu_write(v.os, filler, off, chunk, buf, tx), 0);
        dmu_tx_commit(tx);
        sync_pool(&v);
        spa_get_space(v.f.spa, &sp);
    }
    free(buf);
    cairn_blkptr_t *before = malloc(NREC * sizeof(*before)), *after = malloc(NREC * sizeof(*after));
    bps_of(&v, before);
    dmu_defrag_stats_t st = {0};
    dmu_defrag_opts_t o = {0};
    assert_int_equal(dmu_defrag_object(v.os, v.obj, &o, &st), -ENOSPC);
    sync_pool(&v);
    bps_of(&v, after);
    assert_int_equal(st.records, 0);
    assert_memory_equal(before, after, NREC * sizeof(*before));
    check_content(&v);
    free(before);
    free(after);
    vol_finish(&v);
}

typedef struct race {
    vol_t *v;
    int calls;
    uint32_t synced_rec, dirty_rec;
} race_t;

/* A client writes into the window the defragmenter has just looked up: one
 * record is written and synced (its block changes), one left dirty. */
static void race_hook(objset_t *os, uint64_t obj, uint64_t blkid, void *arg)
{
    race_t *r = arg;
    assert_ptr_equal(os, r->v->os);
    assert_int_equal(obj, r->v->obj);
    if (r->calls++) return;
    r->synced_rec = (uint32_t)blkid + 3;
    r->dirty_rec = (uint32_t)blkid + 5;
    write_rec(r->v, r->synced_rec, 7);
    sync_pool(r->v);
    write_rec(r->v, r->dirty_rec, 8);
}

static void test_defrag_racing_write_wins(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "defrag_race");
    scatter(&v, 2 * NREC, 2);
    race_t r = {.v = &v};
    dmu_defrag_set_test_hook(race_hook, &r);
    dmu_defrag_stats_t st;
    defrag(&v, &st);
    dmu_defrag_set_test_hook(NULL, NULL);
    assert_true(r.calls > 0);
    assert_true(st.records > 0);
    /* The window's other records were gathered; the two the client wrote are
     * the client's (the model has them), whichever way each raced. */
    check_content(&v);
    uint8_t rec[REC];
    stamp(rec, r.synced_rec, 7);
    assert_memory_equal(v.model + (size_t)r.synced_rec * REC, rec, REC);
    stamp(rec, r.dirty_rec, 8);
    assert_memory_equal(v.model + (size_t)r.dirty_rec * REC, rec, REC);
    vol_finish(&v);
}

/* The pool's own thread does the same once the pool is idle, and a dataset
 * task (here a destroy) right while it works is not refused as busy. */
static void test_background_defrag(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "defrag_bg");
    scatter(&v, 2 * NREC, 2);
    uint32_t breaks_before = breaks(&v);
    dsl_set_defrag_idle_ms(1);
    /* Two passes: the first may have begun before the rewrites ended. An event
     * awaited (bounded so that a broken thread fails instead of hanging). */
    uint64_t p0 = dsl_defrag_passes(v.f.dp);
    for (int i = 0; i < 1200 && dsl_defrag_passes(v.f.dp) < p0 + 2; i++) {
        dsl_defrag_kick(v.f.dp);
        usleep(50 * 1000);
    }
    assert_true(dsl_defrag_passes(v.f.dp) >= p0 + 2);
    sync_pool(&v);
    uint32_t breaks_after = breaks(&v);
    printf("background: %u breaks -> %u\n", breaks_before, breaks_after);
    assert_true(breaks_after <= NREC * REC / DMU_DEFRAG_WINDOW_DEFAULT);
    check_content(&v);

    /* Scattered again, and destroyed while the thread is (likely) at it. */
    scatter(&v, 2 * NREC, 3);
    dsl_dataset_rele(v.ds);
    v.ds = NULL;
    dsl_defrag_kick(v.f.dp);
    usleep(20 * 1000);
    OK(dsl_dataset_destroy(v.f.dp, v.ds_name, false, false, fx_err, sizeof(fx_err)));
    dsl_set_defrag_idle_ms(0);
    fx_export(&v.f);
    fx_check(&v.f);
    fx_destroy(&v.f);
    free(v.model);
}

int main(void)
{
    dsl_set_defrag_idle_ms(0); /* the pool's thread stays out of the other tests */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defrag_gathers_records),
        cmocka_unit_test(test_defrag_leaves_snapshot_blocks),
        cmocka_unit_test(test_defrag_racing_write_wins),
        cmocka_unit_test(test_defrag_leaves_a_full_pool_alone),
        cmocka_unit_test(test_background_defrag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
