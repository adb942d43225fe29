/*
 * The ARC on its own (no pool): blocks are made up here with real checksums and
 * fed through arc_lookup / arc_insert_stored the way the SPA's read path does.
 * Proves: ghost hits steer p both ways; a hot set survives a one-pass scan
 * bigger than arc_max; the size bound and the list invariants hold under a
 * random trace and under concurrent readers; freed blocks and blocks with the
 * same place and birth but other content are never served; primarycache
 * policies; hot compressed blocks get a decompressed copy; a block inserted
 * unread (read ahead, just written) is not hot after its first use, and
 * arc_cached() answers without counting or promoting; a memory-only lookup
 * serves hits and leaves misses uncounted; lent buffers keep their bytes
 * after the ARC drops their block.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/arc.h>
#include <cairn/codec.h>
#include <cairn/util.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BLK (64 * 1024)
static uint64_t g_guid = 0x51a7e;

/* Content of block id (version v): deterministic, compressible when asked. */
static void content(uint8_t *b, uint32_t len, uint64_t id, uint64_t v, bool compressible)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ULL + v * 0xC2B2AE3D27D4EB4FULL + 1;
    for (uint32_t i = 0; i < len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t w = compressible ? (id + v + (i / 512)) : x;
        memcpy(b + i, &w, CAIRN_MIN(8u, len - i));
    }
}

typedef struct blk {
    cairn_blkptr_t bp;
    uint8_t *stored;
} blk_t;

/* A block at (vdev 0, offset id * BLK, birth) holding content(id, v). */
static void make_blk(blk_t *b, uint64_t id, uint64_t birth, uint64_t v, bool compress, uint8_t type)
{
    uint8_t *logical = malloc(BLK);
    content(logical, BLK, id, v, compress);
    memset(&b->bp, 0, sizeof b->bp);
    b->bp.dva[0] = (cairn_dva_t){.vdev = 0, .offset = id * BLK, .asize = BLK >> 9};
    b->bp.ncopies = 1;
    b->bp.birth_txg = birth;
    b->bp.lsize = BLK;
    b->bp.type = type;
    b->bp.checksum = CAIRN_CHECKSUM_XXHASH;
    b->stored = malloc(BLK);
    size_t c = compress ? cairn_compress(CAIRN_COMPRESS_LZ4, logical, BLK, b->stored, BLK - BLK / 8) : 0;
    if (c) {
        b->bp.compress = CAIRN_COMPRESS_LZ4;
        b->bp.psize = (uint32_t)c;
    } else {
        memcpy(b->stored, logical, BLK);
        b->bp.psize = BLK;
    }
    cairn_checksum(CAIRN_CHECKSUM_XXHASH, b->stored, b->bp.psize, b->bp.cksum);
    free(logical);
}

static void free_blk(blk_t *b) { free(b->stored); }

/* What the SPA does: look up; on a miss "read the disk" (b->stored) and insert. */
static bool read_blk(blk_t *b, uint8_t policy, uint64_t id, uint64_t v)
{
    uint8_t *buf = malloc(BLK), *want = malloc(BLK);
    bool hit = arc_lookup(g_guid, &b->bp, buf, policy) == 0;
    if (!hit) arc_insert_stored(g_guid, &b->bp, b->stored, policy);
    else {
        content(want, BLK, id, v, b->bp.compress != CAIRN_COMPRESS_OFF);
        assert_memory_equal(buf, want, BLK);
    }
    free(buf);
    free(want);
    return hit;
}

static void fresh(uint64_t max)
{
    arc_purge_pool(g_guid);
    g_guid++;
    arc_set_max(max);
    arc_reset_stats();
}

static void check_invariants(void)
{
    arc_stats_t st;
    arc_get_stats(&st);
    assert_true(st.size <= st.c);
    assert_true(st.p <= st.c);
    assert_true(st.mru_size + st.mru_ghost_size <= st.c);
    assert_true(st.mru_size + st.mfu_size + st.mru_ghost_size + st.mfu_ghost_size <= 2 * st.c);
}

static void test_hit_miss_and_content(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t b;
    make_blk(&b, 1, 10, 0, false, CAIRN_BT_DATA);
    assert_false(read_blk(&b, ARC_POLICY_DEFAULT, 1, 0));
    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 1, 0));
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.entries, 1);
    free_blk(&b);
}

static void test_same_place_other_content_never_served(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t old, now;
    make_blk(&old, 7, 20, 0, false, CAIRN_BT_DATA);
    make_blk(&now, 7, 20, 1, false, CAIRN_BT_DATA); /* a txg written again after a crash */
    assert_false(read_blk(&old, ARC_POLICY_DEFAULT, 7, 0));
    uint8_t *buf = malloc(BLK);
    assert_int_equal(arc_lookup(g_guid, &now.bp, buf, ARC_POLICY_DEFAULT), -ENOENT);
    /* and a rewrite (new birth) is another block altogether */
    blk_t rewritten;
    make_blk(&rewritten, 7, 21, 2, false, CAIRN_BT_DATA);
    assert_int_equal(arc_lookup(g_guid, &rewritten.bp, buf, ARC_POLICY_DEFAULT), -ENOENT);
    free(buf);
    free_blk(&old);
    free_blk(&now);
    free_blk(&rewritten);
}

static void test_free_drops(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t b;
    make_blk(&b, 3, 5, 0, false, CAIRN_BT_DATA);
    read_blk(&b, ARC_POLICY_DEFAULT, 3, 0);
    arc_free(g_guid, &b.bp);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.size, 0);
    assert_int_equal(st.frees_dropped, 1);
    uint8_t *buf = malloc(BLK);
    assert_int_equal(arc_lookup(g_guid, &b.bp, buf, ARC_POLICY_DEFAULT), -ENOENT);
    free(buf);
    free_blk(&b);
}

/* 1 MiB holds 16 blocks of 64 KiB. */
static void test_ghost_hits_steer_p(void **state)
{
    (void)state;
    fresh(CAIRN_MIB);
    /* Half the cache frequently used, then a stream through the rest: the MRU
     * evicts to its ghost list (MRU + MRU ghost stays within c). */
    enum { F = 8, N = 24 };
    blk_t f[F], b[N];
    for (int i = 0; i < F; i++) {
        make_blk(&f[i], 500 + (uint64_t)i, 1, 0, false, CAIRN_BT_DATA);
        read_blk(&f[i], ARC_POLICY_DEFAULT, 500 + i, 0);
        read_blk(&f[i], ARC_POLICY_DEFAULT, 500 + i, 0);
    }
    for (int i = 0; i < N; i++) make_blk(&b[i], (uint64_t)i, 1, 0, false, CAIRN_BT_DATA);
    for (int i = 0; i < N; i++) assert_false(read_blk(&b[i], ARC_POLICY_DEFAULT, i, 0));
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.p, 0);
    assert_true(st.mru_ghost_size > 0); /* the stream's first blocks left ghosts */
    uint64_t p0 = st.p;
    /* A read of an MRU ghost: the MRU was too small, so p grows; the block goes to the MFU. */
    int gi = N - 1 - (int)(st.mru_size / BLK); /* the newest ghost: evicted last */
    assert_false(read_blk(&b[gi], ARC_POLICY_DEFAULT, gi, 0));
    arc_get_stats(&st);
    assert_int_equal(st.mru_ghost_hits, 1);
    assert_true(st.p > p0);
    check_invariants();

    /* Now fill the MFU past c with blocks read twice, pushing MFU blocks to the MFU ghost. */
    enum { M = 24 };
    blk_t h[M];
    for (int i = 0; i < M; i++) {
        make_blk(&h[i], 100 + (uint64_t)i, 1, 0, false, CAIRN_BT_DATA);
        read_blk(&h[i], ARC_POLICY_DEFAULT, 100 + i, 0);
        read_blk(&h[i], ARC_POLICY_DEFAULT, 100 + i, 0);
    }
    arc_get_stats(&st);
    assert_true(st.mfu_ghost_size > 0);
    uint64_t p1 = st.p;
    int ghost_idx = -1;
    uint8_t *buf = malloc(BLK);
    for (int i = 0; i < M && ghost_idx < 0; i++) {
        arc_stats_t before;
        arc_get_stats(&before);
        if (arc_lookup(g_guid, &h[i].bp, buf, ARC_POLICY_DEFAULT) != 0) {
            arc_get_stats(&st);
            if (st.mfu_ghost_hits > before.mfu_ghost_hits) ghost_idx = i;
            arc_insert_stored(g_guid, &h[i].bp, h[i].stored, ARC_POLICY_DEFAULT);
        }
    }
    free(buf);
    assert_true(ghost_idx >= 0);
    arc_get_stats(&st);
    assert_true(st.p < p1); /* an MFU ghost hit: the MFU was too small, p shrinks */
    check_invariants();
    for (int i = 0; i < N; i++) free_blk(&b[i]);
    for (int i = 0; i < F; i++) free_blk(&f[i]);
    for (int i = 0; i < M; i++) free_blk(&h[i]);
}

static void test_scan_resistance(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB); /* 64 blocks */
    enum { HOT = 16, SCAN = 256 };
    blk_t *hot = calloc(HOT, sizeof(blk_t));
    for (int i = 0; i < HOT; i++) {
        make_blk(&hot[i], (uint64_t)i, 1, 0, true, CAIRN_BT_DATA);
        read_blk(&hot[i], ARC_POLICY_DEFAULT, i, 0);
        read_blk(&hot[i], ARC_POLICY_DEFAULT, i, 0);
    }
    /* One pass over 16 MiB of other blocks: four times the ARC. */
    for (int i = 0; i < SCAN; i++) {
        blk_t s;
        make_blk(&s, 1000 + (uint64_t)i, 1, 0, false, CAIRN_BT_DATA);
        assert_false(read_blk(&s, ARC_POLICY_DEFAULT, 1000 + i, 0));
        free_blk(&s);
        check_invariants();
    }
    arc_stats_t before, st;
    arc_get_stats(&before);
    for (int i = 0; i < HOT; i++) assert_true(read_blk(&hot[i], ARC_POLICY_DEFAULT, i, 0));
    arc_get_stats(&st);
    assert_int_equal(st.hits - before.hits, HOT);
    assert_true(st.decompressed_size > 0); /* hot compressed blocks keep a decompressed copy */
    for (int i = 0; i < HOT; i++) free_blk(&hot[i]);
    free(hot);
}

/* A random trace: invariants after every step, content checked on every hit. */
static void test_random_trace_invariants(void **state)
{
    (void)state;
    fresh(2 * CAIRN_MIB);
    enum { NB = 96 };
    blk_t *b = calloc(NB, sizeof(blk_t));
    for (int i = 0; i < NB; i++) make_blk(&b[i], (uint64_t)i, 3, 0, i % 3 == 0, CAIRN_BT_DATA);
    cairn_rng_t r;
    cairn_rng_seed(&r, 42);
    for (int step = 0; step < 4000; step++) {
        /* skewed: a third of the accesses to 8 blocks */
        uint64_t id = cairn_rng_below(&r, 3) == 0 ? cairn_rng_below(&r, 8) : cairn_rng_below(&r, NB);
        read_blk(&b[id], ARC_POLICY_DEFAULT, id, 0);
        check_invariants();
    }
    arc_stats_t st;
    arc_get_stats(&st);
    assert_true(st.hits > 0 && st.misses > 0);
    assert_true(st.mru_ghost_hits + st.mfu_ghost_hits > 0);
    for (int i = 0; i < NB; i++) free_blk(&b[i]);
    free(b);
}

typedef struct worker {
    blk_t *blks;
    int nb;
    uint64_t seed;
    uint64_t max_seen;
} worker_t;

static void *worker_run(void *arg)
{
    worker_t *w = arg;
    cairn_rng_t r;
    cairn_rng_seed(&r, w->seed);
    uint8_t *buf = malloc(BLK), *want = malloc(BLK);
    for (int i = 0; i < 3000; i++) {
        int id = (int)cairn_rng_below(&r, (uint64_t)w->nb);
        blk_t *b = &w->blks[id];
        if (arc_lookup(g_guid, &b->bp, buf, ARC_POLICY_DEFAULT) == 0) {
            content(want, BLK, (uint64_t)id, 0, b->bp.compress != CAIRN_COMPRESS_OFF);
            if (memcmp(buf, want, BLK) != 0) w->max_seen = UINT64_MAX;
        } else {
            arc_insert_stored(g_guid, &b->bp, b->stored, ARC_POLICY_DEFAULT);
        }
        if (i % 50 == 0) arc_free(g_guid, &w->blks[(id + 1) % w->nb].bp);
        arc_stats_t st;
        arc_get_stats(&st);
        if (st.size > w->max_seen && w->max_seen != UINT64_MAX) w->max_seen = st.size;
    }
    free(buf);
    free(want);
    return NULL;
}

static void test_size_bound_concurrent(void **state)
{
    (void)state;
    fresh(2 * CAIRN_MIB);
    enum { NB = 128, NT = 4 };
    blk_t *b = calloc(NB, sizeof(blk_t));
    for (int i = 0; i < NB; i++) make_blk(&b[i], (uint64_t)i, 9, 0, i % 2 == 0, CAIRN_BT_DATA);
    pthread_t t[NT];
    worker_t w[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (worker_t){.blks = b, .nb = NB, .seed = 100 + (uint64_t)i};
        pthread_create(&t[i], NULL, worker_run, &w[i]);
    }
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < NT; i++) {
        assert_true(w[i].max_seen != UINT64_MAX); /* no wrong content */
        assert_true(w[i].max_seen <= 2 * CAIRN_MIB);
    }
    check_invariants();
    for (int i = 0; i < NB; i++) free_blk(&b[i]);
    free(b);
}

static void test_primarycache_policies(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t data, meta;
    make_blk(&data, 1, 1, 0, false, CAIRN_BT_DATA);
    make_blk(&meta, 2, 1, 0, false, CAIRN_BT_INDIRECT);
    uint8_t none = ARC_POLICY(ARC_CACHE_NONE, ARC_CACHE_NONE);
    uint8_t md = ARC_POLICY(ARC_CACHE_METADATA, ARC_CACHE_NONE);
    assert_false(read_blk(&data, none, 1, 0));
    assert_false(read_blk(&data, none, 1, 0));
    assert_false(read_blk(&data, md, 1, 0));
    assert_false(read_blk(&data, md, 1, 0));
    assert_false(read_blk(&meta, md, 2, 0));
    assert_true(read_blk(&meta, md, 2, 0));
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bypassed, 4);
    free_blk(&data);
    free_blk(&meta);
}

/* Read ahead or just written: the first hit is the first use (MRU, no decompressed
 * copy), the second makes it hot; arc_cached() neither counts nor promotes. */
static void test_unread_blocks_are_not_hot_at_first_use(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t b;
    make_blk(&b, 7, 3, 0, true, CAIRN_BT_DATA);
    assert_true(b.bp.compress == CAIRN_COMPRESS_LZ4);
    assert_false(arc_cached(g_guid, &b.bp));
    arc_insert_unread(g_guid, &b.bp, b.stored, ARC_POLICY_DEFAULT);
    assert_true(arc_cached(g_guid, &b.bp));
    assert_true(arc_cached(g_guid, &b.bp));
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.mfu_size, 0);
    assert_int_equal(st.mru_size, b.bp.psize);

    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 7, 0)); /* first use */
    arc_get_stats(&st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.mfu_size, 0);
    assert_int_equal(st.decompressed_size, 0);

    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 7, 0)); /* second use: hot */
    arc_get_stats(&st);
    assert_int_equal(st.mru_size, 0);
    assert_int_equal(st.decompressed_size, BLK);
    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 7, 0)); /* from the decompressed copy */

    /* A plain insert is a read by someone: its next hit is its second use. */
    blk_t c;
    make_blk(&c, 8, 3, 0, true, CAIRN_BT_DATA);
    assert_false(read_blk(&c, ARC_POLICY_DEFAULT, 8, 0));
    assert_true(read_blk(&c, ARC_POLICY_DEFAULT, 8, 0));
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, 2 * BLK);

    /* Stale content at the same place is not "held". */
    blk_t other;
    make_blk(&other, 7, 3, 1, true, CAIRN_BT_DATA);
    assert_false(arc_cached(g_guid, &other.bp));
    check_invariants();
    free_blk(&b);
    free_blk(&c);
    free_blk(&other);
}

/* Read-ahead's look at a compressed block, and the copy it makes: taken by an
 * unread block's first hit, kept by a used block's next (hot) one. */
static void test_decompress_ahead(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t b, raw;
    make_blk(&b, 9, 3, 0, true, CAIRN_BT_DATA);
    make_blk(&raw, 10, 3, 0, false, CAIRN_BT_DATA);
    assert_int_equal(arc_ahead_state(g_guid, &b.bp), ARC_AHEAD_READ);
    arc_insert_unread(g_guid, &b.bp, b.stored, ARC_POLICY_DEFAULT);
    arc_insert_unread(g_guid, &raw.bp, raw.stored, ARC_POLICY_DEFAULT);
    assert_int_equal(arc_ahead_state(g_guid, &b.bp), ARC_AHEAD_DECOMPRESS);
    assert_int_equal(arc_ahead_state(g_guid, &raw.bp), ARC_AHEAD_DONE); /* nothing to do */
    arc_decompress_ahead(g_guid, &raw.bp, false);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, 0);
    arc_decompress_ahead(g_guid, &b.bp, false);
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, BLK);
    assert_int_equal(st.size, b.bp.psize + raw.bp.psize + BLK);
    assert_int_equal(st.hits, 0); /* neither look counted */
    assert_int_equal(arc_ahead_state(g_guid, &b.bp), ARC_AHEAD_DONE);
    arc_decompress_ahead(g_guid, &b.bp, false); /* once only */
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, BLK);
    check_invariants();

    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 9, 0)); /* first use takes the copy */
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, 0);
    assert_int_equal(st.mfu_size, 0);
    /* Used once now: its next hit makes it hot with a copy the ARC keeps, made
     * ahead of that reader too; the hit keeps it rather than dropping it. */
    assert_int_equal(arc_ahead_state(g_guid, &b.bp), ARC_AHEAD_DECOMPRESS_HOT);
    arc_decompress_ahead(g_guid, &b.bp, false); /* made for a first use: too late */
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, 0);
    arc_decompress_ahead(g_guid, &b.bp, true);
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, BLK);
    assert_int_equal(st.mfu_size, 0);
    assert_int_equal(arc_ahead_state(g_guid, &b.bp), ARC_AHEAD_DONE);
    uint64_t hits = st.hits;
    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 9, 0)); /* second use: hot, copy kept */
    arc_get_stats(&st);
    assert_int_equal(st.hits, hits + 1);
    assert_int_equal(st.decompressed_size, BLK);
    assert_int_equal(st.mru_size, raw.bp.psize);
    assert_int_equal(st.mfu_size, b.bp.psize + BLK);
    assert_int_equal(arc_ahead_state(g_guid, &b.bp), ARC_AHEAD_DONE);
    assert_true(read_blk(&b, ARC_POLICY_DEFAULT, 9, 0));

    /* The same place with other content is not this block. */
    blk_t other;
    make_blk(&other, 9, 3, 1, true, CAIRN_BT_DATA);
    assert_int_equal(arc_ahead_state(g_guid, &other.bp), ARC_AHEAD_READ);
    arc_decompress_ahead(g_guid, &other.bp, true);
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, BLK); /* b's kept copy only */
    check_invariants();
    free_blk(&b);
    free_blk(&raw);
    free_blk(&other);
}

/* A write's blocks entered together: each as arc_insert_unread() would (MRU,
 * unread, its stored bytes copied), a data block under a metadata-only policy
 * bypassed, a block cached already left as it is. */
static void test_insert_unread_many(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    enum { N = 70 }; /* more than the function's on-stack array */
    blk_t b[N];
    cairn_blkptr_t bps[N];
    const void *stored[N];
    for (int i = 0; i < N; i++) {
        make_blk(&b[i], 100 + (uint64_t)i, 5, 0, i % 2 == 0, i == 3 ? CAIRN_BT_INDIRECT : CAIRN_BT_DATA);
        bps[i] = b[i].bp;
        stored[i] = b[i].stored;
    }
    arc_insert_stored(g_guid, &bps[7], stored[7], ARC_POLICY_DEFAULT); /* read by someone */
    arc_insert_unread_many(g_guid, bps, stored, NULL, NULL, N, ARC_POLICY_DEFAULT);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.entries, N);
    assert_int_equal(st.bypassed, 0);
    assert_int_equal(st.mfu_size, 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(arc_ahead_state(g_guid, &bps[i]),
                         i % 2 == 0 && i != 7 ? ARC_AHEAD_DECOMPRESS : ARC_AHEAD_DONE);
        stored[i] = NULL;
    }
    for (int i = 0; i < N; i++) { /* the ARC copied: the caller's buffers may go */
        memset(b[i].stored, 0xee, BLK);
    }
    for (int i = 0; i < N; i++) {
        blk_t fresh_b;
        make_blk(&fresh_b, 100 + (uint64_t)i, 5, 0, i % 2 == 0, b[i].bp.type);
        assert_true(read_blk(&fresh_b, ARC_POLICY_DEFAULT, 100 + (uint64_t)i, 0));
        free_blk(&fresh_b);
    }
    arc_get_stats(&st);
    assert_int_equal(st.mfu_size, b[7].bp.psize); /* the one read before: now its second use */
    check_invariants();

    /* Metadata only: the data blocks are counted as bypassed, the indirect one kept. */
    fresh(4 * CAIRN_MIB);
    for (int i = 0; i < N; i++) stored[i] = b[i].stored;
    arc_insert_unread_many(g_guid, bps, stored, NULL, NULL, N, ARC_POLICY(ARC_CACHE_METADATA, ARC_CACHE_NONE));
    arc_get_stats(&st);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bypassed, N - 1);
    assert_true(arc_cached(g_guid, &bps[3]));
    check_invariants();
    for (int i = 0; i < N; i++) free_blk(&b[i]);
}

/* A write's blocks handed over as the writer's reference-counted buffers: the
 * one that is the block as stored is cached as that very buffer (a hit's span
 * points into it, nothing copied); one whose buffer is not the stored bytes
 * (another size) is copied and its reference given back; one the policy does
 * not keep gives its reference back too. */
static void test_insert_unread_many_adopts(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t b[3];
    cairn_blkptr_t bps[3];
    const void *stored[3];
    cairn_rbuf_t *given[3], *mine[3];
    for (int i = 0; i < 3; i++) {
        make_blk(&b[i], 300 + (uint64_t)i, 5, 0, false, i == 2 ? CAIRN_BT_DATA : CAIRN_BT_INDIRECT);
        bps[i] = b[i].bp;
        /* block 1's buffer holds one byte less than the block: not the block as stored */
        mine[i] = cairn_rbuf_new(b[i].stored, i == 1 ? BLK - 1 : BLK);
        given[i] = cairn_rbuf_hold(mine[i]); /* the reference handed over */
        stored[i] = i == 1 ? b[i].stored : mine[i]->data;
    }
    arc_insert_unread_many(g_guid, bps, stored, given, NULL, 3, ARC_POLICY(ARC_CACHE_METADATA, ARC_CACHE_NONE));
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.adopted_writes, 1);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bypassed, 1);
    assert_int_equal(atomic_load(&mine[0]->refs), 2); /* the ARC's and ours */
    assert_int_equal(atomic_load(&mine[1]->refs), 1); /* copied, reference given back */
    assert_int_equal(atomic_load(&mine[2]->refs), 1); /* not kept, reference given back */
    uint8_t *out = malloc(BLK); /* filled only if a hit cannot lend */
    cairn_rbuf_t *ref = NULL;
    assert_int_equal(arc_lookup_memory_ref(g_guid, &bps[0], 0, BLK, out, ARC_POLICY_DEFAULT, &ref), 0);
    assert_ptr_equal(ref, mine[0]);
    cairn_rbuf_rele(ref);
    ref = NULL;
    assert_int_equal(arc_lookup_memory_ref(g_guid, &bps[1], 0, BLK, out, ARC_POLICY_DEFAULT, &ref), 0);
    assert_true(ref != NULL && ref != mine[1]);
    assert_memory_equal(ref->data, b[1].stored, BLK);
    cairn_rbuf_rele(ref);
    free(out);
    check_invariants();
    fresh(4 * CAIRN_MIB); /* the ARC lets go of block 0's buffer */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&mine[i]->refs), 1);
        cairn_rbuf_rele(mine[i]);
        free_blk(&b[i]);
    }
}

/* A compressed block written with its logical bytes handed over keeps them as
 * its decompressed copy (no decompression, nothing copied) until its first
 * read, which is lent that very buffer and drops it; copies of that kind go,
 * oldest first, before any entry is evicted; a buffer that is not the block's
 * logical bytes, or a block stored raw, gives its reference back. */
static void test_written_copies(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB); /* 64 blocks */
    enum { N = 8 };
    blk_t b[N + 2];
    cairn_blkptr_t bps[N + 2];
    const void *stored[N + 2];
    cairn_rbuf_t *mine[N + 2], *given[N + 2];
    for (int i = 0; i < N + 2; i++) {
        make_blk(&b[i], 400 + (uint64_t)i, 5, 0, i != N + 1, CAIRN_BT_DATA);
        bps[i] = b[i].bp;
        stored[i] = b[i].stored;
        uint8_t logical[BLK];
        content(logical, BLK, 400 + (uint64_t)i, 0, i != N + 1);
        /* block N's buffer is one byte short: not its logical bytes */
        mine[i] = cairn_rbuf_new(logical, i == N ? BLK - 1 : BLK);
        given[i] = cairn_rbuf_hold(mine[i]);
    }
    assert_int_equal(bps[0].compress, CAIRN_COMPRESS_LZ4);
    assert_int_equal(bps[N + 1].compress, CAIRN_COMPRESS_OFF);
    arc_insert_unread_many(g_guid, bps, stored, NULL, given, N + 2, ARC_POLICY_DEFAULT);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.entries, N + 2);
    assert_int_equal(st.written_copies, N);
    assert_int_equal(st.written_copies_size, (uint64_t)N * BLK);
    assert_int_equal(st.decompressed_size, (uint64_t)N * BLK);
    for (int i = 0; i < N + 2; i++) {
        assert_int_equal(atomic_load(&mine[i]->refs), i < N ? 2 : 1);
        assert_int_equal(arc_ahead_state(g_guid, &bps[i]),
                         i == N ? ARC_AHEAD_DECOMPRESS : ARC_AHEAD_DONE);
    }
    check_invariants();

    /* The first read is lent the writer's buffer; the ARC lets go of it. */
    cairn_rbuf_t *ref = NULL;
    assert_int_equal(arc_lookup_memory_ref(g_guid, &bps[0], 0, BLK, NULL, ARC_POLICY_DEFAULT, &ref), 0);
    assert_ptr_equal(ref, mine[0]);
    cairn_rbuf_rele(ref);
    assert_int_equal(atomic_load(&mine[0]->refs), 1);
    arc_get_stats(&st);
    assert_int_equal(st.written_copies_size, (uint64_t)(N - 1) * BLK);
    assert_int_equal(st.mfu_size, 0); /* its first use: not hot */
    assert_int_equal(arc_ahead_state(g_guid, &bps[0]), ARC_AHEAD_DECOMPRESS_HOT); /* used once */

    /* Filling the cache drops written copies, oldest first, and evicts nothing
     * while any is left: 60 more blocks need room the copies hold. */
    enum { M = 60 };
    blk_t more[M];
    uint64_t before = st.evictions;
    for (int i = 0; i < M; i++) {
        make_blk(&more[i], 500 + (uint64_t)i, 5, 0, false, CAIRN_BT_DATA);
        arc_insert_stored(g_guid, &more[i].bp, more[i].stored, ARC_POLICY_DEFAULT);
    }
    arc_get_stats(&st);
    assert_true(st.written_copies_dropped > 0);
    assert_true(st.written_copies_dropped < N - 1);
    assert_int_equal(st.evictions, before);
    assert_int_equal(st.entries, N + 2 + M);
    assert_int_equal(st.written_copies_size, (uint64_t)(N - 1 - st.written_copies_dropped) * BLK);
    /* the oldest went first: block 1's copy is gone, the newest (N - 1) kept */
    assert_int_equal(arc_ahead_state(g_guid, &bps[1]), ARC_AHEAD_DECOMPRESS);
    assert_int_equal(arc_ahead_state(g_guid, &bps[N - 1]), ARC_AHEAD_DONE);
    assert_int_equal(atomic_load(&mine[1]->refs), 1);
    assert_int_equal(atomic_load(&mine[N - 1]->refs), 2);
    check_invariants();
    /* A dropped copy's block still reads right (decompressed from its stored bytes). */
    assert_true(read_blk(&b[1], ARC_POLICY_DEFAULT, 401, 0));

    fresh(4 * CAIRN_MIB); /* the ARC lets go of every copy */
    for (int i = 0; i < N + 2; i++) {
        assert_int_equal(atomic_load(&mine[i]->refs), 1);
        cairn_rbuf_rele(mine[i]);
        free_blk(&b[i]);
    }
    for (int i = 0; i < M; i++) free_blk(&more[i]);
}

static void test_memory_only_lookup(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t b;
    make_blk(&b, 9, 4, 0, true, CAIRN_BT_DATA);
    uint8_t *buf = malloc(BLK), *want = malloc(BLK);
    content(want, BLK, 9, 0, true);
    assert_int_equal(arc_lookup_memory(g_guid, &b.bp, 0, b.bp.lsize, buf, ARC_POLICY_DEFAULT), -ENOENT);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.misses, 0);
    assert_int_equal(st.hits, 0);
    arc_insert_stored(g_guid, &b.bp, b.stored, ARC_POLICY_DEFAULT);
    memset(buf, 0, BLK);
    assert_int_equal(arc_lookup_memory(g_guid, &b.bp, 0, b.bp.lsize, buf, ARC_POLICY_DEFAULT), 0);
    assert_memory_equal(buf, want, BLK);
    arc_get_stats(&st);
    assert_int_equal(st.hits, 1);
    /* other content at the same place and birth is a miss, never served */
    blk_t other;
    make_blk(&other, 9, 4, 1, true, CAIRN_BT_DATA);
    assert_int_equal(arc_lookup_memory(g_guid, &other.bp, 0, other.bp.lsize, buf, ARC_POLICY_DEFAULT), -ENOENT);
    free(buf);
    free(want);
    free_blk(&b);
    free_blk(&other);
}


/* Lending (arc_lookup_memory_ref): an uncompressed block lends its stored
 * buffer, a hot compressed one the decompressed copy the ARC keeps (made by
 * the first lookup that finds it hot, then lent to every later one), a
 * compressed block not yet hot is copied. A lent buffer keeps its bytes
 * after the ARC frees, evicts or replaces its block, and is freed by the
 * last holder. */
static void test_lent_buffers_outlive_the_block(void **state)
{
    (void)state;
    fresh(4 * CAIRN_MIB);
    blk_t raw, cmp, other;
    make_blk(&raw, 20, 7, 0, false, CAIRN_BT_DATA);
    make_blk(&cmp, 21, 7, 0, true, CAIRN_BT_DATA);
    assert_int_not_equal(cmp.bp.compress, CAIRN_COMPRESS_OFF);
    uint8_t *want_raw = malloc(BLK), *want_cmp = malloc(BLK), *buf = malloc(BLK);
    content(want_raw, BLK, 20, 0, false);
    content(want_cmp, BLK, 21, 0, true);
    arc_insert_stored(g_guid, &raw.bp, raw.stored, ARC_POLICY_DEFAULT);
    arc_insert_unread(g_guid, &cmp.bp, cmp.stored, ARC_POLICY_DEFAULT);

    /* Uncompressed: the stored buffer itself, any part of it. */
    cairn_rbuf_t *r1 = NULL;
    memset(buf, 0xee, BLK);
    assert_int_equal(arc_lookup_memory_ref(g_guid, &raw.bp, 4096, BLK - 8192, buf,
                                           ARC_POLICY_DEFAULT, &r1), 0);
    assert_non_null(r1);
    assert_int_equal(r1->size, BLK);
    assert_memory_equal(r1->data + 4096, want_raw + 4096, BLK - 8192);
    assert_int_equal(buf[0], 0xee); /* lent, not copied */

    /* Compressed, first use of a block read ahead: not kept decompressed, so
     * copied; its next use finds it hot and lends the copy the ARC keeps. */
    cairn_rbuf_t *r2 = NULL;
    assert_int_equal(arc_lookup_memory_ref(g_guid, &cmp.bp, 0, BLK, buf, ARC_POLICY_DEFAULT, &r2), 0);
    assert_null(r2);
    assert_memory_equal(buf, want_cmp, BLK);
    arc_stats_t st0, st;
    arc_get_stats(&st0);
    assert_int_equal(st0.decompressed_size, 0);
    assert_int_equal(arc_lookup_memory_ref(g_guid, &cmp.bp, 0, BLK, buf, ARC_POLICY_DEFAULT, &r2), 0);
    assert_non_null(r2);
    assert_memory_equal(r2->data, want_cmp, BLK);
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, BLK); /* one copy, kept and lent */
    cairn_rbuf_t *r3 = NULL;
    assert_int_equal(arc_lookup_memory_ref(g_guid, &cmp.bp, 100, 5000, buf, ARC_POLICY_DEFAULT, &r3), 0);
    assert_ptr_equal(r3, r2);
    arc_get_stats(&st);
    assert_int_equal(st.decompressed_size, BLK);
    cairn_rbuf_rele(r3);

    /* The ARC lets go: a free, the same place and birth with other content
     * (a txg rewritten after a crash), a purge, an eviction. */
    arc_free(g_guid, &raw.bp);
    make_blk(&other, 21, 7, 1, true, CAIRN_BT_DATA);
    arc_insert_stored(g_guid, &other.bp, other.stored, ARC_POLICY_DEFAULT);
    assert_int_equal(arc_lookup_memory(g_guid, &other.bp, 0, BLK, buf, ARC_POLICY_DEFAULT), 0);
    assert_int_equal(arc_lookup_memory(g_guid, &cmp.bp, 0, BLK, buf, ARC_POLICY_DEFAULT), -ENOENT);
    arc_set_max(CAIRN_MIB);
    arc_purge_pool(g_guid);
    /* Churn the allocator so freed memory would be reused. */
    for (int i = 0; i < 64; i++) {
        blk_t t;
        make_blk(&t, 100 + (uint64_t)i, 9, 3, i % 2, CAIRN_BT_DATA);
        arc_insert_stored(g_guid, &t.bp, t.stored, ARC_POLICY_DEFAULT);
        assert_int_equal(arc_lookup_memory(g_guid, &t.bp, 0, BLK, buf, ARC_POLICY_DEFAULT), 0);
        assert_int_equal(arc_lookup_memory(g_guid, &t.bp, 0, BLK, buf, ARC_POLICY_DEFAULT), 0);
        free_blk(&t);
    }
    /* Only the borrowers hold them now, and the bytes are what was lent. */
    assert_int_equal(atomic_load(&r1->refs), 1);
    assert_int_equal(atomic_load(&r2->refs), 1);
    assert_memory_equal(r1->data, want_raw, BLK);
    assert_memory_equal(r2->data, want_cmp, BLK);
    cairn_rbuf_rele(r1);
    cairn_rbuf_rele(r2);

    /* Without a ref to fill, a lookup copies as arc_lookup_memory does. */
    arc_set_max(4 * CAIRN_MIB);
    arc_insert_stored(g_guid, &raw.bp, raw.stored, ARC_POLICY_DEFAULT);
    memset(buf, 0, BLK);
    assert_int_equal(arc_lookup_memory_ref(g_guid, &raw.bp, 0, BLK, buf, ARC_POLICY_DEFAULT, NULL), 0);
    assert_memory_equal(buf, want_raw, BLK);
    free(want_raw);
    free(want_cmp);
    free(buf);
    free_blk(&raw);
    free_blk(&cmp);
    free_blk(&other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_miss_and_content),
        cmocka_unit_test(test_same_place_other_content_never_served),
        cmocka_unit_test(test_free_drops),
        cmocka_unit_test(test_ghost_hits_steer_p),
        cmocka_unit_test(test_scan_resistance),
        cmocka_unit_test(test_random_trace_invariants),
        cmocka_unit_test(test_size_bound_concurrent),
        cmocka_unit_test(test_primarycache_policies),
        cmocka_unit_test(test_unread_blocks_are_not_hot_at_first_use),
        cmocka_unit_test(test_decompress_ahead),
        cmocka_unit_test(test_insert_unread_many),
        cmocka_unit_test(test_insert_unread_many_adopts),
        cmocka_unit_test(test_written_copies),
        cmocka_unit_test(test_memory_only_lookup),
        cmocka_unit_test(test_lent_buffers_outlive_the_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
