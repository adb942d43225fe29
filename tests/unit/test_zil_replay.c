/*
 * The intent log end to end on a one-file pool whose txgs never sync on their
 * own (txg_timeout 300 s), so a "crash" (spa_abandon) loses everything not in
 * the log:
 *   - committed writes and frees are gone after the crash until zil_open
 *     replays them; `cairn check` passes after replay;
 *   - replay happens exactly once, also when replay itself crashes, with and
 *     without its partial work having synced (a non-idempotent record type);
 *   - group commit: N threads committing each op cost fewer flushes than ops,
 *     and every committed op survives a crash;
 *   - a chain with a torn (corrupted) block ends there: the pool keeps exactly
 *     the blocks up to it, the rest of the log region is free again;
 *   - a power cut on a fault leaf (unflushed writes dropped or torn) loses no
 *     committed write, also with 16 threads committing back to back and a
 *     chain restart among them when the cut comes;
 *   - on a sparse file the log region's space is written when the region
 *     grows, so log writes never make the file system allocate.
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
#include "wait_until.h"

#define BLK 4096

typedef struct zfx {
    test_pool_t p;
    objset_t *os;
    uint64_t obj;
    zilog_t *zl;
} zfx_t;

static void slow_txgs(test_pool_t *p)
{
    char err[128];
    assert_int_equal(spa_prop_set(p->spa, "txg_timeout", "300", err, sizeof err), 0);
}

/* On z's pool: slow txgs, object set "fs" and one 4 KiB-record object, synced. */
static void zfx_objects(zfx_t *z)
{
    slow_txgs(&z->p);
    assert_int_equal(dmu_objset_create(z->p.spa, "fs", NULL), 0);
    assert_int_equal(dmu_objset_open(z->p.spa, "fs", &z->os), 0);
    dmu_object_props_t props = {.recordsize = BLK, .compress = CAIRN_COMPRESS_OFF,
                                .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_object_alloc(z->os, &props, &z->obj, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(spa_txg_wait_synced(z->p.spa, 0), 0);
}

static void zfx_make(zfx_t *z, const char *tag)
{
    test_pool_make(&z->p, tag, 256 * CAIRN_MIB);
    zfx_objects(z);
}

static void pattern(uint8_t *b, uint64_t tag)
{
    for (int i = 0; i < BLK; i++) b[i] = (uint8_t)(tag * 31 + i * 7 + 1) | 1;
}

/* Writes block i and logs it, not yet committed; returns its txg, *seq the
 * record's sequence number. */
static uint64_t write_and_log(zfx_t *z, uint64_t i, uint64_t tag, uint64_t *seq)
{
    uint8_t b[BLK];
    pattern(b, tag);
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_write(z->os, z->obj, i * BLK, BLK, b, tx), 0);
    uint64_t txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    *seq = zil_log(z->zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = z->obj,
                                       .off = i * BLK, .len = BLK});
    return txg;
}

/* One logged write of block i, committed with everything logged before it;
 * returns its txg. */
static uint64_t logged_write(zfx_t *z, uint64_t i, uint64_t tag)
{
    uint64_t seq;
    uint64_t txg = write_and_log(z, i, tag, &seq);
    assert_int_equal(zil_commit(z->zl, 0), 0);
    return txg;
}

static void crash(zfx_t *z)
{
    zil_abandon(z->zl);
    z->zl = NULL;
    spa_abandon(z->p.spa);
    z->p.spa = NULL;
    z->os = NULL;
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

static bool block_is(zfx_t *z, uint64_t i, uint64_t tag)
{
    uint8_t b[BLK], g[BLK];
    pattern(b, tag);
    assert_int_equal(dmu_read(z->os, z->obj, i * BLK, BLK, g), 0);
    return memcmp(b, g, BLK) == 0;
}

static bool block_zero(zfx_t *z, uint64_t i)
{
    uint8_t g[BLK], zero[BLK] = {0};
    assert_int_equal(dmu_read(z->os, z->obj, i * BLK, BLK, g), 0);
    return memcmp(g, zero, BLK) == 0;
}

static void test_replay_after_crash(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilreplay");
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    /* A new chain's header must be durable before its first record is: the
     * first commit would sync the txg holding it (and its writes). */
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    uint64_t txg = 0;
    for (uint64_t i = 0; i < 20; i++) txg = logged_write(&z, i, i);
    /* block 3 freed (an unmap), block 5 overwritten */
    dmu_tx_t *tx = dmu_tx_begin(z.os);
    assert_int_equal(dmu_free_range(z.os, z.obj, 3 * BLK, BLK, tx), 0);
    uint64_t ftxg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    zil_log(z.zl, &(zil_rec_t){.type = ZIL_REC_FREE, .txg = ftxg, .obj = z.obj, .off = 3 * BLK,
                               .len = BLK});
    logged_write(&z, 5, 99);
    /* never committed: may be lost, must not corrupt */
    uint8_t b[BLK];
    pattern(b, 1234);
    tx = dmu_tx_begin(z.os);
    assert_int_equal(dmu_write(z.os, z.obj, 30 * BLK, BLK, b, tx), 0);
    dmu_tx_commit(tx);

    zil_stats_t st;
    zil_get_stats(z.zl, &st);
    assert_true(st.flushes >= 1);
    assert_int_equal(st.txg_waits, 0);
    /* the point of the test: none of it is in a synced txg */
    assert_true(spa_last_synced_txg(z.p.spa) < txg);

    crash(&z);
    assert_true(block_zero(&z, 0)); /* lost without the log */
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, 22); /* 20 writes, the free, the overwrite */
    for (uint64_t i = 0; i < 20; i++) {
        if (i == 3) assert_true(block_zero(&z, i));
        else if (i == 5) assert_true(block_is(&z, i, 99));
        else assert_true(block_is(&z, i, i));
    }
    zil_close(z.zl);
    /* A second open replays nothing. */
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, 0);
    zfx_done(&z);
}

/* A record type whose replay is not idempotent: add arg[0] to the 8-byte
 * counter at offset 0 of the object. */
#define REC_ADD 40
static int replay_budget = -1; /* records replay may apply before failing; -1: no limit */

static int add_counter(objset_t *os, uint64_t obj, uint64_t delta, dmu_tx_t *tx)
{
    uint64_t v = 0;
    int e = dmu_read(os, obj, 0, 8, &v);
    if (e) return e;
    v += delta;
    return dmu_write(os, obj, 0, 8, &v, tx);
}

static int replay_add(void *arg, zilog_t *zl, const zil_rec_t *rec)
{
    zfx_t *z = arg;
    if (rec->type != REC_ADD) return zil_replay_dmu(z->os, zl, rec);
    if (replay_budget == 0) return -EIO;
    if (replay_budget > 0) replay_budget--;
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    int e = add_counter(z->os, rec->obj, rec->arg[0], tx);
    if (!e) zil_replay_mark(zl, tx);
    dmu_tx_commit(tx);
    return e;
}

static uint64_t counter(zfx_t *z)
{
    uint64_t v = 0;
    assert_int_equal(dmu_read(z->os, z->obj, 0, 8, &v), 0);
    return v;
}

static void test_replay_exactly_once(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilonce");
    assert_int_equal(zil_open(z.os, replay_add, &z, &z.zl), 0);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    for (int i = 0; i < 30; i++) {
        dmu_tx_t *tx = dmu_tx_begin(z.os);
        assert_int_equal(add_counter(z.os, z.obj, 1, tx), 0);
        uint64_t txg = dmu_tx_txg(tx);
        dmu_tx_commit(tx);
        zil_log(z.zl, &(zil_rec_t){.type = REC_ADD, .txg = txg, .obj = z.obj, .arg = {1}});
        assert_int_equal(zil_commit(z.zl, 0), 0);
    }
    assert_int_equal(counter(&z), 30);
    crash(&z);
    assert_int_equal(counter(&z), 0);

    /* Replay dies after 10 records and the pool crashes before anything syncs. */
    replay_budget = 10;
    assert_int_equal(zil_open(z.os, replay_add, &z, &z.zl), -EIO);
    assert_int_equal(counter(&z), 10);
    crash(&z);
    assert_int_equal(counter(&z), 0);

    /* Replay dies after 10 records, and what it did syncs before the crash. */
    replay_budget = 10;
    assert_int_equal(zil_open(z.os, replay_add, &z, &z.zl), -EIO);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    crash(&z);
    assert_int_equal(counter(&z), 10);

    /* The rest, exactly once. */
    replay_budget = -1;
    assert_int_equal(zil_open(z.os, replay_add, &z, &z.zl), 0);
    zil_stats_t st;
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, 20);
    assert_int_equal(counter(&z), 30);

    /* Replayed work survives a crash right after the open; nothing is applied again. */
    crash(&z);
    assert_int_equal(counter(&z), 30);
    assert_int_equal(zil_open(z.os, replay_add, &z, &z.zl), 0);
    zil_get_stats(z.zl, &st);
    assert_int_equal(st.replayed, 0);
    assert_int_equal(counter(&z), 30);
    zfx_done(&z);
}

#define NTHREADS 16
#define NOPS 40

typedef struct worker {
    zfx_t *z;
    int id;
} worker_t;

static void *writer(void *arg)
{
    worker_t *w = arg;
    for (int k = 0; k < NOPS; k++) logged_write(w->z, (uint64_t)w->id * NOPS + k, w->id * 1000 + k);
    return NULL;
}

static void test_group_commit(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilgroup");
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    logged_write(&z, 0, 0); /* the chain's header becomes durable here */
    zil_stats_t st0, st;
    zil_get_stats(z.zl, &st0);
    pthread_t th[NTHREADS];
    worker_t w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker_t){&z, i};
        assert_int_equal(pthread_create(&th[i], NULL, writer, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    zil_get_stats(z.zl, &st);
    uint64_t flushes = st.flushes - st0.flushes, ops = NTHREADS * NOPS;
    print_message("group commit: %llu sync ops, %llu log writes, %llu flushes\n",
                  (unsigned long long)ops, (unsigned long long)(st.log_writes - st0.log_writes),
                  (unsigned long long)flushes);
    assert_true(flushes < ops);
    assert_true(flushes >= 1);
    assert_int_equal(st.txg_waits, 0);

    crash(&z);
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    for (int i = 0; i < NTHREADS; i++)
        for (int k = 0; k < NOPS; k++)
            assert_true(block_is(&z, (uint64_t)i * NOPS + k, i * 1000 + k));
    zfx_done(&z);
}

/* Committers that each wait for their own record only (as volumes and NFS
 * commit), in rounds that start together: each round ends with a last
 * committer and nobody after it to rescue it. A committer waiting to become
 * the writer could leave because the publication it woke for covered its own
 * record, while the committer whose record came after slept on with nobody to
 * write it: a sync write hung until the next one arrived. */
#define ROUND_THREADS 8
#define ROUNDS 1500

typedef struct round {
    zfx_t *z;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int round, done;         /* the round released; commits returned, all rounds */
} round_t;

typedef struct round_arg {
    round_t *r;
    int id;
} round_arg_t;

static void *round_writer(void *arg)
{
    round_arg_t *a = arg;
    round_t *r = a->r;
    for (int n = 0; n < ROUNDS; n++) {
        pthread_mutex_lock(&r->lock);
        while (r->round < n) pthread_cond_wait(&r->cv, &r->lock);
        pthread_mutex_unlock(&r->lock);
        uint64_t seq;
        write_and_log(r->z, (uint64_t)a->id, (uint64_t)n, &seq);
        assert_int_equal(zil_commit(r->z->zl, seq), 0); /* its own record only */
        pthread_mutex_lock(&r->lock);
        r->done++;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

static void test_last_committer_not_stranded(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilrounds");
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    zil_test_hold_woken_writer(true);
    round_t r = {.z = &z, .round = -1};
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cv, NULL);
    pthread_t th[ROUND_THREADS];
    round_arg_t a[ROUND_THREADS];
    for (int i = 0; i < ROUND_THREADS; i++) {
        a[i] = (round_arg_t){&r, i};
        assert_int_equal(pthread_create(&th[i], NULL, round_writer, &a[i]), 0);
    }
    for (int n = 0; n < ROUNDS; n++) {
        pthread_mutex_lock(&r.lock);
        r.round = n;
        pthread_cond_broadcast(&r.cv);
        /* A liveness bound, not a timing: a round takes milliseconds; a stranded
         * committer never finishes. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 60;
        while (r.done < (n + 1) * ROUND_THREADS)
            if (pthread_cond_timedwait(&r.cv, &r.lock, &until) == ETIMEDOUT)
                fail_msg("round %d: a committer never returned from zil_commit", n);
        pthread_mutex_unlock(&r.lock);
    }
    for (int i = 0; i < ROUND_THREADS; i++) pthread_join(th[i], NULL);
    zil_test_hold_woken_writer(false);
    for (int i = 0; i < ROUND_THREADS; i++) assert_true(block_is(&z, (uint64_t)i, ROUNDS - 1));
    zfx_done(&z);
}

/* Concurrent log flushes share one: while a flush is held in flight, callers
 * arriving meanwhile wait, and a single next flush covers every one of them
 * (counted, not timed). Before, each caller issued its own. */
typedef struct flusher {
    spa_t *spa;
    const cairn_dva_t *dva;
    int err;
    bool issued;
} flusher_t;

static void *flush_caller(void *arg)
{
    flusher_t *f = arg;
    f->err = spa_log_flush(f->spa, f->dva, 1, &f->issued);
    return NULL;
}

static void test_flushes_shared(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "zilflushshare", 256 * CAIRN_MIB);
    slow_txgs(&p);
    enum { WAITERS = 7 };
    cairn_dva_t d[WAITERS + 1];
    uint8_t *block = spa_log_block_alloc();
    for (int i = 0; i <= WAITERS; i++) {
        assert_int_equal(spa_log_alloc(p.spa, 8192, &d[i]), 0);
        snprintf((char *)block + SPA_LOG_BLOCK_FRAME, 100, "block %d", i);
        assert_int_equal(spa_log_write_block(p.spa, &d[i], 0x5eed, 1, &d[i], block, 100, 0), 0);
    }
    free(block);
    spa_log_stats_t st0, st;
    spa_log_get_stats(p.spa, &st0);

    spa_log_test_hold_flush(true);
    pthread_t th[WAITERS + 1];
    flusher_t f[WAITERS + 1];
    f[0] = (flusher_t){.spa = p.spa, .dva = &d[0], .err = -1};
    assert_int_equal(pthread_create(&th[0], NULL, flush_caller, &f[0]), 0);
    WAIT_UNTIL(spa_log_test_flush_held(), "the first flush reached the device");
    for (int i = 1; i <= WAITERS; i++) {
        f[i] = (flusher_t){.spa = p.spa, .dva = &d[i], .err = -1};
        assert_int_equal(pthread_create(&th[i], NULL, flush_caller, &f[i]), 0);
    }
    WAIT_UNTIL((spa_log_get_stats(p.spa, &st), st.flush_waiters == WAITERS),
               "every later caller waits for the flush in flight");
    spa_log_test_hold_flush(false);
    int issued = 0;
    for (int i = 0; i <= WAITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(f[i].err, 0);
        issued += f[i].issued;
    }
    assert_true(f[0].issued);
    spa_log_get_stats(p.spa, &st);
    /* The held one, then one for all seven that arrived during it. */
    assert_int_equal(st.flushes - st0.flushes, 2);
    assert_int_equal(issued, 2);
    assert_int_equal(st.flushes_shared - st0.flushes_shared, WAITERS);
    assert_int_equal(st.flush_waiters, 0);
    test_pool_export(&p);
    test_pool_remove(&p);
}

/* Chains at the pool level: a corrupted block ends the chain there. */
static void test_chain_torn_tail(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "zilchain", 256 * CAIRN_MIB);
    slow_txgs(&p);
    enum { N = 6 };
    cairn_dva_t d[N];
    for (int i = 0; i < N; i++) assert_int_equal(spa_log_alloc(p.spa, 8192, &d[i]), 0);
    uint64_t guid = 0x1234567890abcdefULL;
    uint8_t *block = spa_log_block_alloc();
    for (int i = 0; i + 1 < N; i++) {
        snprintf((char *)block + SPA_LOG_BLOCK_FRAME, 100, "block %d", i);
        assert_int_equal(spa_log_write_block(p.spa, &d[i], guid, (uint64_t)i + 1, &d[i + 1], block,
                                             100, 0), 0);
    }
    free(block);
    assert_int_equal(spa_log_flush(p.spa, d, N, NULL), 0);
    spa_log_header_t h = {.chain_guid = guid, .head = d[0], .head_seq = 1};
    uint64_t txg = spa_tx_hold_nowait(p.spa);
    spa_log_header_set(p.spa, 77, &h, txg);
    spa_tx_rele(p.spa, txg);
    assert_int_equal(spa_txg_wait_synced(p.spa, txg), 0);

    /* The walk: every written block, then the unwritten successor ends it. */
    for (int i = 0; i < N; i++) {
        void *pl;
        uint32_t len;
        cairn_dva_t next;
        int e = spa_log_read(p.spa, &d[i], guid, (uint64_t)i + 1, &pl, &len, &next);
        if (i + 1 < N) {
            assert_int_equal(e, 0);
            char want[100];
            snprintf(want, sizeof want, "block %d", i);
            assert_string_equal((char *)pl, want);
            assert_int_equal(next.offset, d[i + 1].offset);
            free(pl);
        } else {
            assert_int_equal(e, -ENOENT);
        }
    }
    /* A block of another chain (or sequence) at the same place is not ours. */
    void *pl;
    uint32_t len;
    cairn_dva_t next;
    assert_int_equal(spa_log_read(p.spa, &d[1], guid + 1, 2, &pl, &len, &next), -ENOENT);
    assert_int_equal(spa_log_read(p.spa, &d[1], guid, 3, &pl, &len, &next), -ENOENT);

    spa_log_stats_t st;
    spa_log_get_stats(p.spa, &st);
    uint64_t region = st.region_bytes;
    assert_true(region > 0);

    /* Crash; tear block 2 (one flipped byte of its payload, as a torn write would). */
    spa_abandon(p.spa);
    p.spa = NULL;
    int fd = open(p.path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t byte;
    off_t at = (off_t)(VDEV_DATA_START + d[2].offset + SPA_LOG_BLOCK_FRAME + 3);
    assert_int_equal(pread(fd, &byte, 1, at), 1);
    byte ^= 0xff;
    assert_int_equal(pwrite(fd, &byte, 1, at), 1);
    close(fd);
    test_pool_import(&p, SPA_IMPORT_FORCE);
    assert_int_equal(spa_log_read(p.spa, &d[1], guid, 2, &pl, &len, &next), 0);
    free(pl);
    assert_int_equal(spa_log_read(p.spa, &d[2], guid, 3, &pl, &len, &next), -ENOENT);
    /* Kept: blocks 0 and 1 and the one the walk stopped at; the rest is free. */
    spa_log_get_stats(p.spa, &st);
    assert_int_equal(st.region_bytes, region);
    uint64_t bs = cairn_dva_asize(&d[0]);
    assert_int_equal(st.region_bytes - st.region_free, 3 * bs);
    spa_log_header_get(p.spa, 77, &h);
    assert_int_equal(h.chain_guid, guid);
    assert_true(h.claim_txg > 0); /* a chain with blocks was found at import */
    test_pool_check(&p);
    test_pool_remove(&p);
}

/* A pool whose one leaf is a fault leaf (power cuts), an object and an open log. */
static void zfx_make_fault(zfx_t *z, const char *tag)
{
    memset(z, 0, sizeof *z);
    test_pool_make(&z->p, tag, 256 * CAIRN_MIB);
    /* the same file again, now through a fault leaf */
    assert_int_equal(spa_export(z->p.spa), 0);
    char fpath[700];
    snprintf(fpath, sizeof fpath, "fault:%s", z->p.path);
    const char *paths[] = {fpath};
    char err[256] = "";
    assert_int_equal(spa_import(z->p.name, paths, 1, 0, &z->p.spa, err, sizeof err), 0);
    zfx_objects(z);
    assert_int_equal(zil_open(z->os, zil_replay_dmu, z->os, &z->zl), 0);
}

/* After a power cut: the pool is dropped and imported again, and the log replayed. */
static void zfx_after_cut(zfx_t *z)
{
    zil_abandon(z->zl);
    z->zl = NULL;
    spa_abandon(z->p.spa);
    z->p.spa = NULL;
    vdev_fault_reset();
    test_pool_import(&z->p, SPA_IMPORT_FORCE);
    assert_int_equal(dmu_objset_open(z->p.spa, "fs", &z->os), 0);
    assert_int_equal(zil_open(z->os, zil_replay_dmu, z->os, &z->zl), 0);
}

/* A power cut on a disk with a volatile write cache (fault leaf): writes not
 * flushed are dropped or torn at random. Every committed write comes back by
 * replay; writes logged but never committed may or may not, never torn. */
static void test_powercut(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        zfx_t z;
        zfx_make_fault(&z, "zilcut");
        dmu_tx_t *tx;
        for (uint64_t i = 0; i < 30; i++) logged_write(&z, i, i + 100 * (uint64_t)round);
        /* logged, never committed: in flight at the cut */
        for (uint64_t i = 30; i < 40; i++) {
            uint8_t b[BLK];
            pattern(b, i);
            tx = dmu_tx_begin(z.os);
            assert_int_equal(dmu_write(z.os, z.obj, i * BLK, BLK, b, tx), 0);
            uint64_t txg = dmu_tx_txg(tx);
            dmu_tx_commit(tx);
            zil_log(z.zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = z.obj,
                                       .off = i * BLK, .len = BLK});
        }
        vdev_fault_powercut(0x5eed + (uint64_t)round, VDEV_FAULT_CUT_RANDOM);
        zfx_after_cut(&z);
        for (uint64_t i = 0; i < 30; i++) assert_true(block_is(&z, i, i + 100 * (uint64_t)round));
        for (uint64_t i = 30; i < 40; i++) assert_true(block_zero(&z, i) || block_is(&z, i, i));
        zfx_done(&z);
    }
}

/* Power cuts while 16 threads commit their own writes back to back, with a
 * chain restart among them: a commit that returned is on disk, whatever the
 * cut drops or tears. What a thread had acknowledged is noted under a lock the
 * cut takes too, so the note is exactly what was acknowledged before it. A
 * committer woken before its batch's flush - a publication covering too much,
 * a waiter told "done" too early - leaves a block older than its note. */
#define CUT_ROUNDS 6

typedef struct cut_run {
    zfx_t *z;
    pthread_mutex_t lock;
    bool cut;
} cut_run_t;

typedef struct cut_writer {
    cut_run_t *run;
    int id;
    int acked[NOPS];     /* per slot: the last k acknowledged before the cut, -1 none */
    int written[NOPS];   /* per slot: the last k written */
} cut_writer_t;

static void *cut_writer(void *arg)
{
    cut_writer_t *w = arg;
    zfx_t *z = w->run->z;
    for (int k = 0;; k++) {
        int slot = k % NOPS;
        uint8_t b[BLK];
        pattern(b, (uint64_t)(w->id * 100000 + k));
        dmu_tx_t *tx = dmu_tx_begin(z->os);
        int err = dmu_write(z->os, z->obj, ((uint64_t)w->id * NOPS + (uint64_t)slot) * BLK, BLK, b, tx);
        uint64_t txg = dmu_tx_txg(tx);
        dmu_tx_commit(tx);
        if (err) break;
        w->written[slot] = k;
        uint64_t seq = zil_log(z->zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = z->obj,
                                                  .off = ((uint64_t)w->id * NOPS + (uint64_t)slot) * BLK,
                                                  .len = BLK});
        err = zil_commit(z->zl, seq);
        pthread_mutex_lock(&w->run->lock);
        bool cut = w->run->cut;
        if (!err && !cut) w->acked[slot] = k;
        pthread_mutex_unlock(&w->run->lock);
        if (err || cut) break;
    }
    return NULL;
}

static void test_powercut_under_committers(void **state)
{
    (void)state;
    for (int round = 0; round < CUT_ROUNDS; round++) {
        zfx_t z;
        zfx_make_fault(&z, "zilcutmt");
        logged_write(&z, 0, 0); /* the chain's header is durable */
        cut_run_t run = {.z = &z};
        pthread_mutex_init(&run.lock, NULL);
        pthread_t th[NTHREADS];
        cut_writer_t *w = cairn_zalloc(NTHREADS * sizeof *w);
        for (int i = 0; i < NTHREADS; i++) {
            w[i].run = &run;
            w[i].id = i;
            for (int s = 0; s < NOPS; s++) w[i].acked[s] = w[i].written[s] = -1;
            assert_int_equal(pthread_create(&th[i], NULL, cut_writer, &w[i]), 0);
        }
        usleep(20000 + 15000 * (useconds_t)round);
        /* On a busy machine the writers may not have had a commit answered yet:
         * the cut must come after some, or the round checks nothing. */
        for (int tries = 0; tries < 2000; tries++) {
            bool any = false;
            pthread_mutex_lock(&run.lock);
            for (int i = 0; i < NTHREADS && !any; i++)
                for (int s = 0; s < NOPS && !any; s++) any = w[i].acked[s] >= 0;
            pthread_mutex_unlock(&run.lock);
            if (any) break;
            usleep(5000);
        }
        if (round % 2) assert_int_equal(zil_restart_chains(z.p.spa), 0);
        pthread_mutex_lock(&run.lock);
        run.cut = true;
        vdev_fault_powercut(0xc07 + (uint64_t)round,
                            round % 3 == 0 ? VDEV_FAULT_CUT_DROP : VDEV_FAULT_CUT_RANDOM);
        pthread_mutex_unlock(&run.lock);
        for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
        zfx_after_cut(&z);
        int acked = 0;
        for (int i = 0; i < NTHREADS; i++) {
            for (int s = 0; s < NOPS; s++) {
                if (w[i].acked[s] < 0) continue;
                acked++;
                /* The acknowledged write or a later one of the slot, never older. */
                bool ok = false;
                for (int k = w[i].acked[s]; k <= w[i].written[s] && !ok; k += NOPS)
                    ok = block_is(&z, (uint64_t)i * NOPS + (uint64_t)s, (uint64_t)(i * 100000 + k));
                if (!ok) fail_msg("round %d: thread %d slot %d: acknowledged write %d lost", round, i, s,
                                  w[i].acked[s]);
            }
        }
        print_message("round %d: %d acknowledged slots checked\n", round, acked);
        assert_true(acked > 0);
        free(w);
        pthread_mutex_destroy(&run.lock);
        zfx_done(&z);
    }
}

/* A destroyed object set takes its unreplayed log with it: the id may be reused
 * (rollback recreates the same name), and the new object set must not replay it. */
static void test_log_region_preallocated(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "zilprealloc", 256 * CAIRN_MIB);
    cairn_dva_t d;
    assert_int_equal(spa_log_alloc(f.spa, 8192, &d), 0);
    spa_log_stats_t ls;
    spa_log_get_stats(f.spa, &ls);
    assert_true(ls.region_bytes >= 4 * CAIRN_MIB);
    int fd = open(f.path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t from = VDEV_DATA_START + d.offset, to = from + 4 * CAIRN_MIB;
    off_t hole = lseek(fd, (off_t)from, SEEK_HOLE);
    assert_true(hole >= 0 && (uint64_t)hole >= to);
    /* The rest of the pool is as sparse as it was made. */
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true((uint64_t)st.st_blocks * 512 < 128 * CAIRN_MIB);
    close(fd);
    spa_log_free(f.spa, &d, 0);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static void test_destroy_drops_log(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zildestroy");
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    for (uint64_t i = 0; i < 4; i++) logged_write(&z, i, i);
    crash(&z);
    uint64_t id = dmu_objset_id(z.os);
    spa_log_header_t h;
    spa_log_header_get(z.p.spa, id, &h);
    assert_true(h.chain_guid != 0); /* the crash left records to replay */
    dmu_objset_close(z.os);
    z.os = NULL;
    assert_int_equal(dmu_objset_destroy(z.p.spa, "fs"), 0);
    assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    spa_log_header_get(z.p.spa, id, &h);
    assert_int_equal(h.chain_guid, 0);
    /* and it stays gone across an export/import */
    test_pool_reimport(&z.p);
    spa_log_header_get(z.p.spa, id, &h);
    assert_int_equal(h.chain_guid, 0);
    test_pool_check(&z.p);
    test_pool_remove(&z.p);
}

/* Commits a batch of n logged writes (blocks first..first+n-1); returns the log
 * blocks it took. */
static uint64_t batch_blocks(zfx_t *z, uint64_t first, int n, uint64_t tag)
{
    zil_stats_t a, b;
    zil_get_stats(z->zl, &a);
    uint64_t seq;
    for (int i = 0; i < n; i++) write_and_log(z, first + (uint64_t)i, tag + (uint64_t)i, &seq);
    assert_int_equal(zil_commit(z->zl, 0), 0);
    zil_get_stats(z->zl, &b);
    assert_int_equal(b.log_writes - a.log_writes, 1);
    return b.blocks - a.blocks;
}

/* The block a batch goes into is allocated by the batch before it (the chain
 * names each successor before it is written); sized for that batch alone, a
 * larger batch after a small one spilled into a second block, written after
 * the first while every committer waited. Sized for the largest recent batch,
 * it takes one - and the blocks, packed in place, replay. */
static void test_successor_sized_from_recent_batches(void **state)
{
    (void)state;
    zfx_t z;
    zfx_make(&z, "zilsucc");
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    logged_write(&z, 0, 0);
    batch_blocks(&z, 1, 12, 100);
    assert_int_equal(batch_blocks(&z, 20, 1, 200), 1);
    assert_int_equal(batch_blocks(&z, 30, 12, 300), 1);

    crash(&z);
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    for (uint64_t i = 0; i < 12; i++) {
        assert_true(block_is(&z, 1 + i, 100 + i));
        assert_true(block_is(&z, 30 + i, 300 + i));
    }
    assert_true(block_is(&z, 20, 200));
    zfx_done(&z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_after_crash),
        cmocka_unit_test(test_replay_exactly_once),
        cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_last_committer_not_stranded),
        cmocka_unit_test(test_flushes_shared),
        cmocka_unit_test(test_chain_torn_tail),
        cmocka_unit_test(test_powercut),
        cmocka_unit_test(test_powercut_under_committers),
        cmocka_unit_test(test_destroy_drops_log),
        cmocka_unit_test(test_log_region_preallocated),
        cmocka_unit_test(test_successor_sized_from_recent_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
