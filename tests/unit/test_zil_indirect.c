/*
 * Large writes in the intent log: records that point at a block written
 * directly (dmu_write_direct + ZIL_REC_WRITE_BLOCK), on a one-file pool whose
 * txgs never sync on their own, so a "crash" (spa_abandon) loses everything
 * not in the log:
 *   - the txg's sync adopts the directly written block (it is in the object's
 *     tree afterwards, written once), and the check finds nothing leaked;
 *   - a record changed again (or freed) before the sync frees the block
 *     instead, exactly once;
 *   - after a crash the block is claimed at import: the offline check counts
 *     it before and after the claim, other allocations do not take it before
 *     replay, replay verifies and applies it and frees it exactly once, also
 *     when replay itself fails halfway and the pool crashes again;
 *   - a power cut on a fault leaf (unflushed writes dropped or torn) loses no
 *     committed pointer record's data: the commit flushes the blocks before
 *     writing the log;
 *   - a log flush that fails (losing its block) while the next batch is
 *     already written behind it loses neither batch's commit;
 *   - the policy: logbias=throughput always, latency only for large writes on
 *     a pool without a log device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cairn/spa.h>
#include <cairn/vdev_fault.h>
#include <cairn/zil.h>

#include <errno.h>
#include <pthread.h>

#include "pool_fixture.h"

#define BLK 8192

typedef struct zfx {
    test_pool_t p;
    objset_t *os;
    uint64_t obj;
    zilog_t *zl;
} zfx_t;

/* On z's pool: slow txgs, object set "fs" and one object, synced. */
static void zfx_objects(zfx_t *z, cairn_compress_t compress)
{
    char err[128];
    assert_int_equal(spa_prop_set(z->p.spa, "txg_timeout", "300", err, sizeof err), 0);
    assert_int_equal(dmu_objset_create(z->p.spa, "fs", NULL), 0);
    assert_int_equal(dmu_objset_open(z->p.spa, "fs", &z->os), 0);
    dmu_object_props_t props = {.recordsize = BLK, .compress = compress,
                                .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_object_alloc(z->os, &props, &z->obj, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(spa_txg_wait_synced(z->p.spa, 0), 0);
}

static void zfx_make(zfx_t *z, const char *tag, cairn_compress_t compress)
{
    test_pool_make(&z->p, tag, 256 * CAIRN_MIB);
    zfx_objects(z, compress);
}

static void zfx_open_log(zfx_t *z, zil_replay_fn fn, void *arg)
{
    assert_int_equal(zil_open(z->os, fn, arg, &z->zl), 0);
    assert_int_equal(spa_txg_wait_synced(z->p.spa, 0), 0); /* the chain's header */
}

/* Half compressible, so lz4 stores it compressed. */
static void pattern(uint8_t *b, uint64_t tag)
{
    for (int i = 0; i < BLK; i++) b[i] = i < BLK / 2 ? (uint8_t)(tag * 31 + i * 7 + 1) | 1 : (uint8_t)tag;
}

/* Record i written directly and logged as a pointer, committed. */
static cairn_blkptr_t direct_write(zfx_t *z, uint64_t i, uint64_t tag)
{
    uint8_t *b = cairn_alloc_aligned(BLK);
    pattern(b, tag);
    cairn_blkptr_t bp;
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_write_direct(z->os, z->obj, i * BLK, BLK, b, tx, &bp), 0);
    assert_false(cairn_bp_is_hole(&bp));
    assert_int_equal(bp.birth_txg, dmu_tx_txg(tx));
    dmu_tx_commit(tx);
    zil_log(z->zl, &(zil_rec_t){.type = ZIL_REC_WRITE_BLOCK, .txg = bp.birth_txg, .obj = z->obj,
                                .off = i * BLK, .len = BLK, .data = &bp, .dlen = sizeof bp});
    assert_int_equal(zil_commit(z->zl, 0), 0);
    free(b);
    return bp;
}

/* Record i copied into the log, committed; returns its txg. */
static uint64_t copied_write(zfx_t *z, uint64_t i, uint64_t tag)
{
    uint8_t b[BLK];
    pattern(b, tag);
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_write(z->os, z->obj, i * BLK, BLK, b, tx), 0);
    uint64_t txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    zil_log(z->zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = z->obj, .off = i * BLK,
                                .len = BLK, .data = b, .dlen = BLK});
    assert_int_equal(zil_commit(z->zl, 0), 0);
    return txg;
}

static bool block_is(zfx_t *z, uint64_t i, uint64_t tag)
{
    uint8_t b[BLK], g[BLK];
    pattern(b, tag);
    assert_int_equal(dmu_read(z->os, z->obj, i * BLK, BLK, g), 0);
    return memcmp(b, g, BLK) == 0;
}

static void crash(zfx_t *z)
{
    zil_abandon(z->zl);
    z->zl = NULL;
    spa_abandon(z->p.spa);
    z->p.spa = NULL;
    z->os = NULL;
}

static void reimport(zfx_t *z)
{
    test_pool_import(&z->p, SPA_IMPORT_FORCE);
    assert_int_equal(dmu_objset_open(z->p.spa, "fs", &z->os), 0);
}

static void zfx_done(zfx_t *z)
{
    zil_close(z->zl);
    dmu_objset_close(z->os);
    test_pool_check(&z->p);
    test_pool_remove(&z->p);
}

/* Is bp (by its first DVA) in the object set's tree? */
typedef struct find_bp {
    const cairn_blkptr_t *want;
    bool found;
} find_bp_t;

static int find_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa;
    (void)bm;
    find_bp_t *f = arg;
    if (bp->dva[0].vdev == f->want->dva[0].vdev && bp->dva[0].offset == f->want->dva[0].offset &&
        bp->birth_txg == f->want->birth_txg)
        f->found = true;
    return 0;
}

static bool in_tree(zfx_t *z, const cairn_blkptr_t *bp)
{
    cairn_blkptr_t root;
    dmu_objset_root(z->os, &root);
    find_bp_t f = {.want = bp};
    assert_int_equal(dmu_traverse_objset(z->p.spa, &root, 0, find_visit, &f), 0);
    return f.found;
}

static void test_sync_adopts_block(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilindadopt", CAIRN_COMPRESS_LZ4);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    cairn_blkptr_t bps[8];
    for (uint64_t i = 0; i < 8; i++) bps[i] = direct_write(&z, i, i + 1);
    assert_true(bps[0].psize < bps[0].lsize); /* compressed like any block */
    zil_stats_t st;
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.block_records, 8);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    for (uint64_t i = 0; i < 8; i++) {
        assert_true(in_tree(&z, &bps[i])); /* adopted: not written a second time */
        assert_true(block_is(&z, i, i + 1));
    }
    zfx_done(&z); /* nothing leaked, nothing doubly allocated */
}

static void test_changed_before_sync_frees_block(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilindchg", CAIRN_COMPRESS_OFF);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    cairn_blkptr_t a = direct_write(&z, 2, 5);
    copied_write(&z, 2, 6); /* same record, same txg: the block is stale */
    cairn_blkptr_t b = direct_write(&z, 3, 7);
    dmu_tx_t *tx = dmu_tx_begin(z.os); /* record 3 freed before its sync */
    assert_int_equal(dmu_free_range(z.os, z.obj, 3 * BLK, BLK, tx), 0);
    dmu_tx_commit(tx);
    cairn_blkptr_t c = direct_write(&z, 4, 8);
    cairn_blkptr_t d = direct_write(&z, 4, 9); /* rewritten directly: the first one is stale */
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    assert_false(in_tree(&z, &a));
    assert_false(in_tree(&z, &b));
    assert_false(in_tree(&z, &c));
    assert_true(in_tree(&z, &d));
    assert_true(block_is(&z, 2, 6));
    assert_true(block_is(&z, 4, 9));
    uint8_t g[BLK], zero[BLK] = {0};
    assert_int_equal(dmu_read(z.os, z.obj, 3 * BLK, BLK, g), 0);
    assert_memory_equal(g, zero, BLK);
    zfx_done(&z); /* the stale blocks were freed exactly once */
}

static void offline_check(zfx_t *z)
{
    const char *paths[] = {z->p.path};
    spa_check_report_t rep;
    char err[256] = "";
    int e = spa_check(z->p.name, paths, 1, &rep, err, sizeof err);
    if (e) fprintf(stderr, "spa_check: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(rep.leaked_bytes, 0);
    assert_int_equal(rep.double_bytes, 0);
}

static void test_crash_claim_replay(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilindcrash", CAIRN_COMPRESS_LZ4);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    uint64_t txgs[13];
    for (uint64_t i = 0; i < 12; i++) {
        if (i == 5) txgs[i] = copied_write(&z, i, 100 + i);
        else txgs[i] = direct_write(&z, i, 100 + i).birth_txg;
    }
    txgs[12] = direct_write(&z, 7, 300).birth_txg; /* a later record of the same range wins */
    uint64_t before = spa_last_synced_txg(z.p.spa);
    /* Replay skips records whose txg synced anyway (a sync the log region's
     * growth kicked, on a slow machine): all 13 unless one did. */
    uint64_t to_replay = 0;
    for (int k = 0; k < 13; k++) to_replay += txgs[k] > before;
    crash(&z);
    offline_check(&z); /* never claimed: neither allocated nor referenced */

    /* Import claims the blocks; that txg syncs; more data is written and synced
     * before anyone replays - none of it may land on a claimed block. */
    reimport(&z);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    assert_true(spa_last_synced_txg(z.p.spa) > before);
    dmu_object_props_t props = {.recordsize = BLK, .compress = CAIRN_COMPRESS_OFF,
                                .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t other;
    dmu_tx_t *tx = dmu_tx_begin(z.os);
    assert_int_equal(dmu_object_alloc(z.os, &props, &other, tx), 0);
    uint8_t *junk = cairn_alloc_aligned(64 * BLK);
    memset(junk, 0x5a, 64 * BLK);
    assert_int_equal(dmu_write(z.os, other, 0, 64 * BLK, junk, tx), 0);
    dmu_tx_commit(tx);
    free(junk);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    dmu_objset_close(z.os);
    spa_abandon(z.p.spa); /* crash again, claimed and unreplayed */
    z.p.spa = NULL;
    offline_check(&z); /* claimed blocks count as referenced by the log */

    reimport(&z);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    zil_stats_t st;
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, to_replay);
    for (uint64_t i = 0; i < 12; i++) assert_true(block_is(&z, i, i == 7 ? 300 : 100 + i));
    zil_close(z.zl);
    z.zl = NULL;
    zfx_open_log(&z, zil_replay_dmu, z.os); /* a second open replays nothing */
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, 0);
    zfx_done(&z); /* every claimed block freed exactly once */
}

/* A pool of a main disk and a log device (a fault leaf, holding writes until
 * a flush; the main disk one too when main_fault) with zfx_objects' set and
 * object; the log device's path (for vdev_fault_*) in logpath. */
static void zfx_make_with_log(zfx_t *z, const char *tag, bool main_fault, char logpath[600])
{
    memset(z, 0, sizeof *z);
    test_pool_make(&z->p, tag, 256 * CAIRN_MIB);
    assert_int_equal(spa_export(z->p.spa), 0);
    char fmain[700], flog[700];
    snprintf(logpath, 600, "%s/log0", z->p.dir);
    int fd = open(logpath, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 64 * (off_t)CAIRN_MIB), 0);
    close(fd);
    snprintf(fmain, sizeof fmain, "%s%s", main_fault ? "fault:" : "", z->p.path);
    snprintf(flog, sizeof flog, "fault:%s", logpath);
    spa_vdev_spec_t leaves[2] = {{.type = VDEV_TYPE_LEAF, .path = fmain},
                                 {.type = VDEV_TYPE_LEAF, .path = flog,
                                  .vclass = VDEV_CLASS_LOG}};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 2, .children = leaves};
    spa_create_opts_t co = {.force = true};
    char err[256] = "";
    int e = spa_create(z->p.name, &root, &co, &z->p.spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    assert_true(spa_has_log_vdevs(z->p.spa));
    snprintf(z->p.path, sizeof z->p.path, "%s", z->p.dir); /* imports search both files */
    zfx_objects(z, CAIRN_COMPRESS_LZ4);
}

static void test_powercut_pointers(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        zfx_t z;
        dmu_tx_t *tx;
        /* Both disks fault leaves: the log's flush does not cover the main disk,
         * so only the flush of the directly written blocks before the log write
         * makes them durable. */
        char logpath[600];
        zfx_make_with_log(&z, "zilindcut", true, logpath);
        zfx_open_log(&z, zil_replay_dmu, z.os);
        uint64_t base = 1000 * (uint64_t)round;
        for (uint64_t i = 0; i < 20; i++) direct_write(&z, i, base + i);
        /* written directly and logged, never flushed nor committed: in flight at the cut */
        for (uint64_t i = 20; i < 26; i++) {
            uint8_t *b = cairn_alloc_aligned(BLK);
            pattern(b, base + i);
            cairn_blkptr_t bp;
            tx = dmu_tx_begin(z.os);
            assert_int_equal(dmu_write_direct(z.os, z.obj, i * BLK, BLK, b, tx, &bp), 0);
            dmu_tx_commit(tx);
            zil_log(z.zl, &(zil_rec_t){.type = ZIL_REC_WRITE_BLOCK, .txg = bp.birth_txg,
                                       .obj = z.obj, .off = i * BLK, .len = BLK, .data = &bp,
                                       .dlen = sizeof bp});
            free(b);
        }
        vdev_fault_powercut(0xc0ffee + (uint64_t)round, VDEV_FAULT_CUT_RANDOM);
        crash(&z);
        vdev_fault_reset();
        test_pool_import(&z.p, SPA_IMPORT_FORCE);
        assert_int_equal(dmu_objset_open(z.p.spa, "fs", &z.os), 0);
        zfx_open_log(&z, zil_replay_dmu, z.os);
        for (uint64_t i = 0; i < 20; i++) assert_true(block_is(&z, i, base + i));
        uint8_t g[BLK], zero[BLK] = {0};
        for (uint64_t i = 20; i < 26; i++) {
            assert_int_equal(dmu_read(z.os, z.obj, i * BLK, BLK, g), 0);
            assert_true(block_is(&z, i, base + i) || memcmp(g, zero, BLK) == 0);
        }
        zfx_done(&z);
    }
}

/* A block logged and committed from a thread of its own (cmocka's checks stay
 * in the main thread: err and txg are looked at there). */
typedef struct bg_commit {
    zfx_t *z;
    uint64_t i, tag, txg;
    int err;
    pthread_t thread;
} bg_commit_t;

static void *bg_commit_run(void *arg)
{
    bg_commit_t *c = arg;
    uint8_t b[BLK];
    pattern(b, c->tag);
    dmu_tx_t *tx = dmu_tx_begin(c->z->os);
    c->err = dmu_write(c->z->os, c->z->obj, c->i * BLK, BLK, b, tx);
    c->txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    if (c->err) return NULL;
    zil_log(c->z->zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = c->txg, .obj = c->z->obj,
                                   .off = c->i * BLK, .len = BLK, .data = b, .dlen = BLK});
    c->err = zil_commit(c->z->zl, 0);
    return NULL;
}

static uint64_t log_flushes(zfx_t *z)
{
    zil_stats_t st;
    zil_get_stats(z->zl, &st);
    return st.flushes;
}

/* A log flush fails while the next batch is already written behind it (a
 * batch's flush runs after the writer role is handed on): the failed batch
 * waits for its txg, and so must the one behind, whose own flush succeeding
 * proves nothing - a replay stops at the hole the failed flush left. Here:
 * a's flush is held back and then fails, losing a's log block; b, in the next
 * txg, is written on the chain meanwhile and flushed fine. A power cut right
 * after both commits returned keeps both writes. */
static void test_flush_failure_behind(void **state)
{
    (void)state;
    zfx_t z;
    char logpath[600];
    zfx_make_with_log(&z, "zilflushfail", true, logpath);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    copied_write(&z, 0, 7);
    assert_int_equal(vdev_fault_gate_flushes(logpath, true), 0);
    assert_int_equal(vdev_fault_fail_next_flush(logpath), 0);
    uint64_t flushes = log_flushes(&z);
    bg_commit_t a = {.z = &z, .i = 1, .tag = 11}, b = {.z = &z, .i = 2, .tag = 12};
    assert_int_equal(pthread_create(&a.thread, NULL, bg_commit_run, &a), 0);
    while (log_flushes(&z) == flushes) usleep(1000); /* a's flush waits at the gate */
    /* a's txg closes (its sync waits at the gate too: it flushes every leaf) */
    uint64_t txg_a = spa_open_txg(z.p.spa);
    spa_txg_kick(z.p.spa);
    while (spa_open_txg(z.p.spa) == txg_a) usleep(1000);
    assert_int_equal(pthread_create(&b.thread, NULL, bg_commit_run, &b), 0);
    usleep(300 * 1000); /* b writes its batch (its log write queues behind a's flush) */
    assert_int_equal(vdev_fault_gate_flushes(logpath, false), 0);
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    assert_int_equal(a.err, 0);
    assert_int_equal(b.err, 0);
    assert_true(b.txg > a.txg);
    /* The power goes at once: a txg that had not synced when b's commit
     * returned does not sync now. */
    vdev_fault_powercut(0xf1, VDEV_FAULT_CUT_DROP);
    crash(&z);
    vdev_fault_reset();
    reimport(&z);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    assert_true(block_is(&z, 0, 7));
    assert_true(block_is(&z, 1, 11));
    assert_true(block_is(&z, 2, 12)); /* lost when b trusted its own flush */
    zfx_done(&z);
}

static int replay_budget = -1;

static int replay_limited(void *arg, zilog_t *zl, const zil_rec_t *rec)
{
    if (replay_budget == 0) return -EIO;
    if (replay_budget > 0) replay_budget--;
    return zil_replay_dmu(arg, zl, rec);
}

static void test_replay_crash_exactly_once(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilindonce", CAIRN_COMPRESS_OFF);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    for (uint64_t i = 0; i < 10; i++) direct_write(&z, i, 40 + i);
    crash(&z);
    /* Replay applies 4 records, syncs them, then fails; then the pool crashes. */
    reimport(&z);
    replay_budget = 4;
    zilog_t *zl = NULL;
    assert_int_not_equal(zil_open(z.os, replay_limited, z.os, &zl), 0);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    dmu_objset_close(z.os);
    spa_abandon(z.p.spa);
    z.p.spa = NULL;
    offline_check(&z); /* 4 freed by replay, 6 still claimed */
    /* Replay applies 3 more, not synced, crash. */
    reimport(&z);
    replay_budget = 3;
    assert_int_not_equal(zil_open(z.os, replay_limited, z.os, &zl), 0);
    dmu_objset_close(z.os);
    spa_abandon(z.p.spa);
    z.p.spa = NULL;
    offline_check(&z);
    reimport(&z);
    replay_budget = -1;
    zfx_open_log(&z, replay_limited, z.os);
    zil_stats_t st;
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, 6);
    for (uint64_t i = 0; i < 10; i++) assert_true(block_is(&z, i, 40 + i));
    zfx_done(&z);
}

static void test_policy(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilindpolicy", CAIRN_COMPRESS_OFF);
    zfx_open_log(&z, zil_replay_dmu, z.os);
    assert_true(zil_write_indirect(z.zl, true, 4096));
    assert_true(zil_write_indirect(z.zl, false, ZIL_INDIRECT_MIN)); /* no log device */
    assert_false(zil_write_indirect(z.zl, false, ZIL_INDIRECT_MIN - 1));
    zil_set_txg_only(z.zl, true);
    assert_false(zil_write_indirect(z.zl, true, 1 << 20));
    zil_set_txg_only(z.zl, false);
    /* Not one whole record: refused, nothing written. */
    uint8_t b[BLK] = {1};
    cairn_blkptr_t bp;
    dmu_tx_t *tx = dmu_tx_begin(z.os);
    assert_int_equal(dmu_write_direct(z.os, z.obj, 512, BLK, b, tx, &bp), -EINVAL);
    assert_int_equal(dmu_write_direct(z.os, z.obj, 0, BLK / 2, b, tx, &bp), -EINVAL);
    dmu_tx_commit(tx);
    zfx_done(&z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_adopts_block),
        cmocka_unit_test(test_changed_before_sync_frees_block),
        cmocka_unit_test(test_crash_claim_replay),
        cmocka_unit_test(test_replay_crash_exactly_once),
        cmocka_unit_test(test_powercut_pointers),
        cmocka_unit_test(test_flush_failure_behind),
        cmocka_unit_test(test_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
