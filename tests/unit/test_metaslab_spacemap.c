/*
 * Space map tests: record encode/decode round trips over many block sizes,
 * rejection of malformed and mutated buffers (run under ASan to prove no
 * out-of-bounds read), and the property that matters for the pool: replaying
 * the log (plain, or a condensed snapshot plus the log after it) rebuilds
 * exactly the live allocators' free, deferred and allocated space, including
 * which deferred frees become free at which txg.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/metaslab.h>
#include <cairn/spacemap.h>
#include <cairn/util.h>

#include <stdlib.h>
#include <string.h>

#define DEFER 2

static spacemap_record_t random_record(cairn_rng_t *rng, uint64_t txg)
{
    spacemap_record_t r = {0};
    r.txg = txg;
    r.type = cairn_rng_below(rng, 2) ? SPACEMAP_ALLOC : SPACEMAP_FREE;
    r.vdev = cairn_rng_below(rng, 8) ? (uint32_t)cairn_rng_below(rng, 4)
                                     : (uint32_t)cairn_rng_below(rng, SPACEMAP_MAX_VDEVS);
    switch (cairn_rng_below(rng, 4)) {
    case 0:
        r.size = SPACEMAP_MAX_EXTENT;
        break;
    case 1:
        r.size = (1 + cairn_rng_below(rng, SPACEMAP_MAX_EXTENT >> 9)) << 9;
        break;
    default:
        r.size = (1 + cairn_rng_below(rng, 256)) << 12;
        break;
    }
    r.offset = cairn_rng_below(rng, (UINT64_MAX - r.size) >> 9) << 9;
    assert_true(spacemap_record_valid(&r));
    return r;
}

static void test_round_trip(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 42);
    for (int round = 0; round < 200; round++) {
        size_t n = cairn_rng_below(&rng, 2000);
        spacemap_record_t *recs = calloc(n + 1, sizeof(*recs));
        uint64_t txg = 1 + cairn_rng_below(&rng, 1000);
        for (size_t i = 0; i < n; i++) {
            if (cairn_rng_below(&rng, 10) == 0)
                txg += 1 + cairn_rng_below(&rng, 3);
            recs[i] = random_record(&rng, txg);
        }
        /* A snapshot-like stream: txgs go down again after the first run. */
        if (n > 10 && round % 3 == 0)
            for (size_t i = n / 2; i < n; i++)
                recs[i].txg = 1 + cairn_rng_below(&rng, txg);
        size_t blen = SPACEMAP_MIN_BLOCK + cairn_rng_below(&rng, 4096);
        uint8_t *buf = malloc(blen);
        size_t done = 0, blocks = 0, got_n = 0;
        while (done < n || blocks == 0) {
            memset(buf, 0xa5, blen);
            uint32_t flags = round % 3 == 0 ? SPACEMAP_FLAG_SNAPSHOT : 0;
            long c = spacemap_encode(buf, blen, txg, flags, recs + done, n - done);
            assert_true(c >= 0);
            assert_true(c > 0 || n == 0);
            blocks++;
            spacemap_record_t *dec;
            size_t dn;
            uint64_t btxg;
            uint32_t bflags;
            assert_int_equal(spacemap_decode(buf, blen, &dec, &dn, &btxg, &bflags), 0);
            assert_int_equal(dn, (size_t)c);
            assert_int_equal(btxg, txg);
            assert_int_equal(bflags, flags);
            for (size_t i = 0; i < dn; i++) {
                const spacemap_record_t *a = &recs[done + i], *b = &dec[i];
                assert_int_equal(a->txg, b->txg);
                assert_int_equal(a->type, b->type);
                assert_int_equal(a->vdev, b->vdev);
                assert_int_equal(a->offset, b->offset);
                assert_int_equal(a->size, b->size);
            }
            free(dec);
            got_n += dn;
            done += (size_t)c;
            if (n == 0)
                break;
        }
        assert_int_equal(got_n, n);
        if (n)
            assert_int_equal(blocks, spacemap_blocks_needed(blen, recs, n));
        free(buf);
        free(recs);
    }
}

static void test_encoder_rejects(void **state)
{
    (void)state;
    uint8_t buf[256];
    spacemap_writer_t w;
    assert_int_equal(spacemap_writer_init(&w, buf, SPACEMAP_MIN_BLOCK - 1, 5, 0), -EINVAL);
    assert_int_equal(spacemap_writer_init(&w, buf, sizeof(buf), 0, 0), -EINVAL);
    assert_int_equal(spacemap_writer_init(&w, buf, sizeof(buf), 5, 0x8), -EINVAL);
    assert_int_equal(spacemap_writer_init(&w, buf, sizeof(buf), 5, 0), 0);
    spacemap_record_t ok = {.txg = 5, .offset = 4096, .size = 4096, .vdev = 1,
                            .type = SPACEMAP_ALLOC};
    spacemap_record_t r = ok;
    r.txg = 6;   /* after the block's txg */
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.txg = 0;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.size = 0;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.size = 4095;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.offset = 100;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.size = SPACEMAP_MAX_EXTENT + 512;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.vdev = SPACEMAP_MAX_VDEVS;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.type = 3;
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    r = ok, r.offset = UINT64_MAX - 511, r.size = 512;   /* would wrap */
    assert_int_equal(spacemap_writer_add(&w, &r), -EINVAL);
    assert_true(spacemap_writer_empty(&w));

    /* (256 - 32) / 16 = 14 entries: a txg entry plus 13 records of one txg. */
    assert_int_equal(spacemap_block_entries(sizeof(buf)), 14);
    for (int i = 0; i < 13; i++)
        assert_int_equal(spacemap_writer_add(&w, &ok), 0);
    assert_int_equal(spacemap_writer_add(&w, &ok), -ENOSPC);
    assert_int_equal(spacemap_writer_finish(&w), sizeof(buf));
    /* A new txg needs two entries: with 13 free slots used up by 12 + marker... */
    assert_int_equal(spacemap_writer_init(&w, buf, sizeof(buf), 9, 0), 0);
    for (int i = 0; i < 12; i++)
        assert_int_equal(spacemap_writer_add(&w, &ok), 0);
    r = ok, r.txg = 9;
    assert_int_equal(spacemap_writer_add(&w, &r), -ENOSPC);   /* 13 used, 2 needed */
    assert_int_equal(spacemap_writer_add(&w, &ok), 0);
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Mutated valid blocks decode either to valid records or to -EINVAL. */
static void check_decode_safe(const uint8_t *buf, size_t len)
{
    spacemap_record_t *dec;
    size_t n;
    int rc = spacemap_decode(buf, len, &dec, &n, NULL, NULL);
    assert_true(rc == 0 || rc == -EINVAL);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            assert_true(spacemap_record_valid(&dec[i]));
        free(dec);
    } else {
        assert_null(dec);
        assert_int_equal(n, 0);
    }
}

static void test_garbage_rejected(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 7);
    enum { LEN = 1024 };
    spacemap_record_t recs[40];
    for (int i = 0; i < 40; i++)
        recs[i] = random_record(&rng, 100 + i / 8);
    /* Heap buffers of exact length, so ASan sees any read past the end. */
    uint8_t *good = malloc(LEN);
    assert_int_equal(spacemap_encode(good, LEN, 200, 0, recs, 40), 40);
    check_decode_safe(good, LEN);

    /* Specific malformations. */
    uint8_t *b = malloc(LEN);
    spacemap_record_t *dec;
    size_t n;
#define EXPECT_BAD(mutate)                                                          \
    do {                                                                            \
        memcpy(b, good, LEN);                                                       \
        mutate;                                                                     \
        assert_int_equal(spacemap_decode(b, LEN, &dec, &n, NULL, NULL), -EINVAL);   \
    } while (0)
    EXPECT_BAD(b[0] ^= 1);                          /* magic */
    EXPECT_BAD(b[8] = 2);                           /* version */
    EXPECT_BAD(b[10] = 2);                          /* unknown flag */
    EXPECT_BAD(put64(b + 16, 0));                   /* block txg 0 */
    EXPECT_BAD(put64(b + 16, 100));                 /* records newer than the block */
    EXPECT_BAD(b[24] = 1);                          /* reserved */
    EXPECT_BAD(memset(b + 12, 0xff, 4));            /* nentries past the buffer */
    EXPECT_BAD(put64(b + 32 + 8, 0));               /* txg entry with txg 0 */
    EXPECT_BAD(b[32] = 0x10);                       /* txg entry with stray bits */
    EXPECT_BAD(memmove(b + 32, b + 48, LEN - 48));  /* extent before any txg */
    EXPECT_BAD(b[48] = (uint8_t)((b[48] & 0xf0) | 3)); /* unknown kind */
    EXPECT_BAD(b[48 + 8] |= 1);                     /* unaligned offset */
    EXPECT_BAD(put64(b + 48, 1 | (~0ULL << 28)); put64(b + 56, UINT64_MAX - 511)); /* wraps */
    assert_int_equal(spacemap_decode(good, 31, &dec, &n, NULL, NULL), -EINVAL);
    assert_int_equal(spacemap_decode(good, 32 + 16 * 20, &dec, &n, NULL, NULL), -EINVAL);
    assert_int_equal(spacemap_decode(NULL, LEN, &dec, &n, NULL, NULL), -EINVAL);
    /* An all-zero buffer (never-written block) is not a space map. */
    memset(b, 0, LEN);
    assert_int_equal(spacemap_decode(b, LEN, &dec, &n, NULL, NULL), -EINVAL);
    /* A failed reader stays failed. */
    memcpy(b, good, LEN);
    b[48] = (uint8_t)((b[48] & 0xf0) | 7);
    spacemap_reader_t r;
    spacemap_record_t rec;
    assert_int_equal(spacemap_reader_init(&r, b, LEN), 0);
    assert_int_equal(spacemap_reader_next(&r, &rec), -EINVAL);
    assert_int_equal(spacemap_reader_next(&r, &rec), -EINVAL);

    /* Random mutations of a valid block, and pure noise, at many lengths. */
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = 1 + cairn_rng_below(&rng, LEN);
        uint8_t *m = malloc(len);
        if (iter % 4 == 0) {
            for (size_t i = 0; i < len; i++)
                m[i] = (uint8_t)cairn_rng_next(&rng);
        } else {
            memcpy(m, good, len);
            int flips = 1 + (int)cairn_rng_below(&rng, 4);
            for (int f = 0; f < flips; f++) {
                size_t at = cairn_rng_below(&rng, len);
                if (cairn_rng_below(&rng, 2))
                    m[at] ^= (uint8_t)(1u << cairn_rng_below(&rng, 8));
                else
                    m[at] = (uint8_t)cairn_rng_next(&rng);
            }
        }
        check_decode_safe(m, len);
        free(m);
    }
    free(b);
    free(good);
#undef EXPECT_BAD
}

/* ---- replay equivalence ---- */

#define NVDEV 2
#define BLOCK 512   /* small, so a txg spans several blocks */

typedef struct sm_log {
    uint8_t **blocks;
    size_t n, cap;
} sm_log_t;

static void log_reset(sm_log_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->blocks[i]);
    l->n = 0;
}

static void log_append(sm_log_t *l, uint64_t txg, uint32_t flags, const spacemap_record_t *recs,
                       size_t n)
{
    size_t done = 0;
    while (done < n) {
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 64;
            l->blocks = realloc(l->blocks, l->cap * sizeof(*l->blocks));
        }
        uint8_t *b = malloc(BLOCK);
        long c = spacemap_encode(b, BLOCK, txg, flags, recs + done, n - done);
        assert_true(c > 0);
        done += (size_t)c;
        l->blocks[l->n++] = b;
    }
}

static void log_append_records(sm_log_t *l, metaslab_t **ms, uint64_t txg)
{
    for (int v = 0; v < NVDEV; v++) {
        spacemap_record_t *recs;
        size_t n;
        assert_int_equal(metaslab_take_records(ms[v], txg, &recs, &n), 0);
        log_append(l, txg, 0, recs, n);
        free(recs);
    }
}

static int add_cb(void *arg, uint64_t start, uint64_t size)
{
    return range_tree_add(arg, start, size);
}

static range_tree_t *space_of(metaslab_t *ms, metaslab_space_t which)
{
    range_tree_t *t = range_tree_create();
    assert_int_equal(metaslab_walk(ms, which, add_cb, t), 0);
    return t;
}

static void assert_same_state(metaslab_t *a, metaslab_t *b)
{
    for (int w = METASLAB_SPACE_FREE; w <= METASLAB_SPACE_ALLOCATED; w++) {
        range_tree_t *ta = space_of(a, w), *tb = space_of(b, w);
        assert_true(range_tree_equal(ta, tb));
        range_tree_destroy(ta);
        range_tree_destroy(tb);
    }
    metaslab_stats_t sa, sb;
    metaslab_get_stats(a, &sa);
    metaslab_get_stats(b, &sb);
    assert_int_equal(sa.allocated, sb.allocated);
    assert_int_equal(sa.deferred, sb.deferred);
    assert_int_equal(sa.free, sb.free);
}

static const uint64_t vdev_size[NVDEV] = {48 * CAIRN_MIB, 32 * CAIRN_MIB + 4096};

/* Replays the log into fresh allocators as an import at last_synced would and
 * checks they match the live ones, now and after each of the next txgs'
 * releases of deferred frees. */
static void check_replay(const sm_log_t *l, metaslab_t **live, uint64_t last_synced)
{
    metaslab_t *re[NVDEV];
    for (int v = 0; v < NVDEV; v++)
        assert_int_equal(metaslab_create((uint32_t)v, vdev_size[v], 12, DEFER, &re[v]), 0);
    for (size_t i = 0; i < l->n; i++)
        assert_int_equal(spacemap_replay(l->blocks[i], BLOCK, re, NVDEV, last_synced), 0);
    for (int v = 0; v < NVDEV; v++)
        assert_same_state(live[v], re[v]);

    /* The deferred frees must also be kept per txg. The live allocators have
     * no pending records here, so condensing them is side-effect free and
     * yields an exact copy (with each deferred free under its own txg) that
     * can be advanced without disturbing the live run: the log replay must
     * release the same space at the same txgs as the copy. */
    metaslab_t *copy[NVDEV];
    for (int v = 0; v < NVDEV; v++) {
        assert_int_equal(metaslab_create((uint32_t)v, vdev_size[v], 12, DEFER, &copy[v]), 0);
        spacemap_record_t *snap;
        size_t n;
        assert_int_equal(metaslab_condense(live[v], last_synced, &snap, &n), 0);
        assert_int_equal(spacemap_replay_records(snap, n, copy, NVDEV, last_synced), 0);
        free(snap);
        assert_same_state(copy[v], live[v]);
    }
    for (uint64_t t = last_synced + 1; t <= last_synced + DEFER; t++) {
        for (int v = 0; v < NVDEV; v++) {
            metaslab_txg_synced(re[v], t);
            metaslab_txg_synced(copy[v], t);
            assert_same_state(copy[v], re[v]);
        }
    }
    for (int v = 0; v < NVDEV; v++) {
        metaslab_stats_t st;
        metaslab_get_stats(re[v], &st);
        assert_int_equal(st.deferred, 0);
        metaslab_destroy(re[v]);
        metaslab_destroy(copy[v]);
    }
}

typedef struct live_block {
    uint32_t vdev;
    uint64_t off, size;
} live_block_t;

static void push_block(live_block_t **blocks, size_t *n, size_t *cap, live_block_t b)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *blocks = realloc(*blocks, *cap * sizeof(**blocks));
    }
    (*blocks)[(*n)++] = b;
}

static void run_workload(bool condense)
{
    cairn_rng_t rng;
    cairn_rng_seed(&rng, condense ? 1234 : 4321);
    metaslab_t *ms[NVDEV];
    for (int v = 0; v < NVDEV; v++)
        assert_int_equal(metaslab_create((uint32_t)v, vdev_size[v], 12, DEFER, &ms[v]), 0);
    live_block_t *blocks = NULL;
    size_t nblocks = 0, cap = 0;
    sm_log_t log = {0};
    int condensed = 0;

    for (uint64_t txg = 1; txg <= 120; txg++) {
        int ops = 50 + (int)cairn_rng_below(&rng, 400);
        for (int i = 0; i < ops; i++) {
            bool do_free = nblocks > 0 && cairn_rng_below(&rng, 100) < 45;
            if (do_free) {
                size_t k = cairn_rng_below(&rng, nblocks);
                live_block_t b = blocks[k];
                blocks[k] = blocks[--nblocks];
                /* Sometimes free only part of a block (as a split free would). */
                if (b.size > 4096 && cairn_rng_below(&rng, 4) == 0) {
                    assert_int_equal(metaslab_free(ms[b.vdev], txg, b.off, 4096), 0);
                    blocks[nblocks++] = (live_block_t){b.vdev, b.off + 4096, b.size - 4096};
                } else {
                    assert_int_equal(metaslab_free(ms[b.vdev], txg, b.off, b.size), 0);
                }
            } else {
                live_block_t b = {.vdev = (uint32_t)cairn_rng_below(&rng, NVDEV),
                                  .size = (1 + cairn_rng_below(&rng, 32)) * 4096};
                int rc = metaslab_alloc(ms[b.vdev], txg, b.size, &b.off);
                if (rc == -ENOSPC)
                    continue;
                assert_int_equal(rc, 0);
                push_block(&blocks, &nblocks, &cap, b);
                /* A failed write gives its block back in the same txg. */
                if (cairn_rng_below(&rng, 50) == 0) {
                    assert_int_equal(metaslab_unalloc(ms[b.vdev], txg, b.off, b.size), 0);
                    nblocks--;
                }
            }
        }
        if (condense && txg % 25 == 0) {
            /* Start a new chain with a snapshot taken in this txg; what is
             * allocated after it (the snapshot's own blocks, say) follows it. */
            log_reset(&log);
            for (int v = 0; v < NVDEV; v++) {
                spacemap_record_t *snap;
                size_t n;
                assert_int_equal(metaslab_condense(ms[v], txg, &snap, &n), 0);
                log_append(&log, txg, SPACEMAP_FLAG_SNAPSHOT, snap, n);
                free(snap);
                uint64_t off;
                if (metaslab_alloc(ms[v], txg, 8192, &off) == 0)
                    push_block(&blocks, &nblocks, &cap, (live_block_t){(uint32_t)v, off, 8192});
            }
            condensed++;
        }
        log_append_records(&log, ms, txg);
        for (int v = 0; v < NVDEV; v++)
            metaslab_txg_synced(ms[v], txg);
        if (txg % 10 == 0 || txg < 4)
            check_replay(&log, ms, txg);
    }
    if (condense)
        assert_true(condensed >= 4);

    /* Records contradicting the replayed state are refused. */
    metaslab_t *re;
    assert_int_equal(metaslab_create(0, vdev_size[0], 12, DEFER, &re), 0);
    spacemap_record_t r = {.txg = 5, .offset = 0, .size = 8192, .vdev = 0, .type = SPACEMAP_FREE};
    assert_int_equal(metaslab_replay_record(re, &r, 10), -EINVAL);   /* free of free space */
    r.type = SPACEMAP_ALLOC;
    assert_int_equal(metaslab_replay_record(re, &r, 4), -EINVAL);    /* txg after last synced */
    r.vdev = 1;
    assert_int_equal(metaslab_replay_record(re, &r, 10), -EINVAL);   /* another vdev's record */
    r.vdev = 0;
    assert_int_equal(metaslab_replay_record(re, &r, 10), 0);
    assert_int_equal(metaslab_replay_record(re, &r, 10), -EINVAL);   /* double alloc */
    r.offset = vdev_size[0];
    assert_int_equal(metaslab_replay_record(re, &r, 10), -EINVAL);   /* beyond asize */
    uint8_t buf[BLOCK];
    r.offset = 65536, r.vdev = 5;
    assert_int_equal(spacemap_encode(buf, sizeof(buf), 10, 0, &r, 1), 1);
    assert_int_equal(spacemap_replay(buf, sizeof(buf), &re, 1, 10), -EINVAL);
    assert_true(metaslab_range_is(re, METASLAB_SPACE_FREE, 65536, 8192));
    metaslab_destroy(re);

    /* An allocation of a newer (open) txg is left out of an older cut and stays
     * pending for its own txg; a newer free makes the cut impossible. */
    uint64_t off;
    assert_int_equal(metaslab_alloc(ms[0], 500, 4096, &off), 0);
    spacemap_record_t *snap;
    size_t n;
    assert_int_equal(metaslab_condense(ms[0], 499, &snap, &n), 0);
    for (size_t i = 0; i < n; i++)
        if (snap[i].type == SPACEMAP_ALLOC)
            assert_false(off >= snap[i].offset && off < snap[i].offset + snap[i].size);
    free(snap);
    assert_int_equal(metaslab_take_records(ms[0], 500, &snap, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(snap[0].offset, off);
    assert_int_equal(snap[0].txg, 500);
    free(snap);
    assert_int_equal(metaslab_free(ms[0], 501, off, 4096), 0);
    assert_int_equal(metaslab_condense(ms[0], 499, &snap, &n), -EINVAL);
    /* alloc_at takes exactly the extent asked for, once. */
    uint64_t at;
    assert_int_equal(metaslab_alloc(ms[0], 502, 4096, &at), 0);
    assert_int_equal(metaslab_unalloc(ms[0], 502, at, 4096), 0);
    assert_true(metaslab_range_is(ms[0], METASLAB_SPACE_FREE, at, 4096));
    assert_int_equal(metaslab_alloc_at(ms[0], 502, at, 4096), 0);
    assert_int_equal(metaslab_alloc_at(ms[0], 502, at, 4096), -EEXIST);
    assert_true(metaslab_range_is(ms[0], METASLAB_SPACE_ALLOCATED, at, 4096));

    log_reset(&log);
    free(log.blocks);
    free(blocks);
    for (int v = 0; v < NVDEV; v++)
        metaslab_destroy(ms[v]);
}

static void test_replay_log(void **state)
{
    (void)state;
    run_workload(false);
}

static void test_replay_condensed(void **state)
{
    (void)state;
    run_workload(true);
}

/* Frees near the import txg stay deferred; older ones are free at once. */
static void test_replay_defer_window(void **state)
{
    (void)state;
    metaslab_t *ms;
    assert_int_equal(metaslab_create(0, CAIRN_MIB, 12, DEFER, &ms), 0);
    spacemap_record_t recs[] = {
        {.txg = 1, .offset = 0, .size = 65536, .vdev = 0, .type = SPACEMAP_ALLOC},
        {.txg = 8, .offset = 0, .size = 4096, .vdev = 0, .type = SPACEMAP_FREE},
        {.txg = 9, .offset = 4096, .size = 4096, .vdev = 0, .type = SPACEMAP_FREE},
        {.txg = 10, .offset = 8192, .size = 4096, .vdev = 0, .type = SPACEMAP_FREE},
    };
    assert_int_equal(spacemap_replay_records(recs, 4, &ms, 1, 10), 0);
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_FREE, 0, 4096));      /* 8 + 2 <= 10 */
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_DEFERRED, 4096, 8192));
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_ALLOCATED, 12288, 65536 - 12288));
    metaslab_txg_synced(ms, 11);
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_FREE, 0, 8192));
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_DEFERRED, 8192, 4096));
    metaslab_txg_synced(ms, 12);
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_FREE, 0, 12288));
    metaslab_destroy(ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encoder_rejects),
        cmocka_unit_test(test_garbage_rejected),
        cmocka_unit_test(test_replay_defer_window),
        cmocka_unit_test(test_replay_log),
        cmocka_unit_test(test_replay_condensed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
