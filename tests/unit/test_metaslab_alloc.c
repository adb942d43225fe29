/*
 * Metaslab allocator tests: exhaustion with disjoint in-range allocations,
 * deferred frees, sequential contiguity, fragmented and nearly full spaces,
 * claims, alignment for every ashift, double-free refusal, per-txg records,
 * unalloc, and concurrent allocation from several threads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/metaslab.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdlib.h>

#define DEFER 2

static metaslab_t *mk(uint64_t asize, uint32_t ashift)
{
    metaslab_t *ms = NULL;
    assert_int_equal(metaslab_create(3, asize, ashift, DEFER, &ms), 0);
    assert_non_null(ms);
    return ms;
}

/* Allocates size until ENOSPC, adding every extent to `seen` (which must not
 * already hold it). Returns the number of allocations. */
static uint64_t alloc_until_full(metaslab_t *ms, uint64_t txg, uint64_t size, range_tree_t *seen,
                                 uint64_t asize)
{
    uint64_t n = 0, off;
    int rc;
    while ((rc = metaslab_alloc(ms, txg, size, &off)) == 0) {
        assert_true(CAIRN_IS_P2ALIGNED(off, 1ULL << metaslab_ashift(ms)));
        assert_true(off + size <= asize);
        assert_int_equal(range_tree_add(seen, off, size), 0);
        n++;
    }
    assert_int_equal(rc, -ENOSPC);
    return n;
}

static void test_exhaust_disjoint(void **state)
{
    (void)state;
    const uint64_t asize = 64 * CAIRN_MIB;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1);
    metaslab_t *ms = mk(asize, 12);
    range_tree_t *seen = range_tree_create();
    uint64_t off;
    for (;;) {
        uint64_t size = (1 + cairn_rng_below(&rng, 64)) << 12;
        int rc = metaslab_alloc(ms, 5, size, &off);
        if (rc == -ENOSPC)
            break;
        assert_int_equal(rc, 0);
        assert_true(CAIRN_IS_P2ALIGNED(off, 4096) && off + size <= asize);
        assert_int_equal(range_tree_add(seen, off, size), 0);
    }
    alloc_until_full(ms, 5, 4096, seen, asize);
    assert_int_equal(range_tree_space(seen), asize);
    assert_int_equal(range_tree_count(seen), 1);

    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    assert_int_equal(st.size, asize);
    assert_int_equal(st.allocated, asize);
    assert_int_equal(st.free, 0);
    assert_int_equal(st.deferred, 0);
    assert_int_equal(st.largest_free, 0);
    range_tree_destroy(seen);
    metaslab_destroy(ms);
}

static void test_frees_deferred(void **state)
{
    (void)state;
    const uint64_t asize = 4 * CAIRN_MIB;
    metaslab_t *ms = mk(asize, 12);
    range_tree_t *seen = range_tree_create();
    alloc_until_full(ms, 10, 8192, seen, asize);

    /* Free three blocks in txg 10 and one in txg 11. */
    assert_int_equal(metaslab_free(ms, 10, 0, 8192), 0);
    assert_int_equal(metaslab_free(ms, 10, 65536, 8192), 0);
    assert_int_equal(metaslab_free(ms, 10, 73728, 8192), 0);
    assert_int_equal(metaslab_free(ms, 11, 1 * CAIRN_MIB, 8192), 0);
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    assert_int_equal(st.deferred, 4 * 8192);
    assert_int_equal(st.free, 0);
    assert_int_equal(st.allocated, asize - 4 * 8192);
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_DEFERRED, 65536, 16384));

    uint64_t off;
    for (uint64_t t = 10; t < 12; t++) {
        metaslab_txg_synced(ms, t);
        assert_int_equal(metaslab_alloc(ms, 13, 4096, &off), -ENOSPC);
    }
    metaslab_txg_synced(ms, 12);   /* txg 10 + DEFER durable: txg 10's frees return */
    metaslab_get_stats(ms, &st);
    assert_int_equal(st.free, 3 * 8192);
    assert_int_equal(st.deferred, 8192);
    assert_int_equal(st.largest_free, 16384);
    range_tree_t *got = range_tree_create();
    alloc_until_full(ms, 13, 4096, got, asize);
    range_tree_t *want = range_tree_create();
    range_tree_add(want, 0, 8192);
    range_tree_add(want, 65536, 16384);
    assert_true(range_tree_equal(got, want));

    metaslab_txg_synced(ms, 13);
    assert_int_equal(metaslab_alloc(ms, 14, 4096, &off), 0);
    assert_int_equal(off, 1 * CAIRN_MIB);
    range_tree_destroy(got);
    range_tree_destroy(want);
    range_tree_destroy(seen);
    metaslab_destroy(ms);
}

static void test_sequential_contiguous(void **state)
{
    (void)state;
    metaslab_t *ms = mk(256 * CAIRN_MIB, 12);
    uint64_t off, expect = 0;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(metaslab_alloc(ms, 1, 128 * CAIRN_KIB, &off), 0);
        assert_int_equal(off, expect);
        expect += 128 * CAIRN_KIB;
    }
    /* A block of another size continues right after the stream. */
    assert_int_equal(metaslab_alloc(ms, 1, 4096, &off), 0);
    assert_int_equal(off, expect);
    /* After a hole opens behind the cursor, the stream still goes on forward. */
    assert_int_equal(metaslab_free(ms, 1, 0, 128 * CAIRN_KIB), 0);
    metaslab_txg_synced(ms, 1 + DEFER);
    assert_int_equal(metaslab_alloc(ms, 4, 128 * CAIRN_KIB, &off), 0);
    assert_int_equal(off, expect + 4096);
    /* Records: the whole 128K stream before the interleaving is one record. */
    spacemap_record_t *recs;
    size_t n;
    assert_int_equal(metaslab_take_records(ms, 1, &recs, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(recs[1].type, SPACEMAP_FREE);
    assert_int_equal(recs[0].type, SPACEMAP_ALLOC);
    assert_int_equal(recs[0].offset, 0);
    assert_int_equal(recs[0].size, 1000 * 128 * CAIRN_KIB + 4096);
    assert_int_equal(recs[0].vdev, 3);
    free(recs);
    metaslab_destroy(ms);
}

/* Every other 4K block freed: 128k free extents of 4K each. */
static void test_fragmented(void **state)
{
    (void)state;
    const uint64_t asize = 1 * CAIRN_GIB;
    metaslab_t *ms = mk(asize, 12);
    range_tree_t *seen = range_tree_create();
    alloc_until_full(ms, 1, 4096, seen, asize);
    for (uint64_t o = 0; o < asize; o += 8192)
        assert_int_equal(metaslab_free(ms, 2, o, 4096), 0);
    metaslab_txg_synced(ms, 2 + DEFER);
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    assert_int_equal(st.free_extents, asize / 8192);
    assert_int_equal(st.largest_free, 4096);
    assert_int_equal(st.free, asize / 2);

    uint64_t off;
    assert_int_equal(metaslab_alloc(ms, 5, 8192, &off), -ENOSPC);
    assert_int_equal(metaslab_alloc(ms, 5, 1 * CAIRN_MIB, &off), -ENOSPC);
    range_tree_t *got = range_tree_create();
    uint64_t n = alloc_until_full(ms, 5, 4096, got, asize);
    assert_int_equal(n, asize / 8192);
    for (uint64_t o = 0; o < asize; o += 8192 * 997)
        assert_true(range_tree_contains(got, o, 4096));
    range_tree_destroy(got);
    range_tree_destroy(seen);
    metaslab_destroy(ms);
}

/* Over 90% full: best fit picks the smallest hole that holds the request,
 * even though a bigger hole comes first in address order. */
static void test_best_fit_when_full(void **state)
{
    (void)state;
    const uint64_t asize = 16 * CAIRN_MIB, u = 4096;
    metaslab_t *ms = mk(asize, 12);
    range_tree_t *seen = range_tree_create();
    alloc_until_full(ms, 1, u, seen, asize);
    const uint64_t big = 1 * CAIRN_MIB, mid = 8 * CAIRN_MIB, small = 12 * CAIRN_MIB;
    assert_int_equal(metaslab_free(ms, 1, big, 16 * u), 0);
    assert_int_equal(metaslab_free(ms, 1, mid, 4 * u), 0);
    assert_int_equal(metaslab_free(ms, 1, small, 3 * u), 0);
    metaslab_txg_synced(ms, 1 + DEFER);
    uint64_t off;
    assert_int_equal(metaslab_alloc(ms, 4, 3 * u, &off), 0);
    assert_int_equal(off, small);
    assert_int_equal(metaslab_alloc(ms, 4, 3 * u, &off), 0);
    assert_int_equal(off, mid);
    assert_int_equal(metaslab_alloc(ms, 4, 2 * u, &off), 0);
    assert_int_equal(off, big);   /* only the 16-unit hole has 2 contiguous units left */
    assert_int_equal(metaslab_alloc(ms, 4, u, &off), 0);
    assert_int_equal(off, mid + 3 * u);   /* a 1-unit hole beats the 14-unit rest */
    assert_int_equal(metaslab_alloc(ms, 4, 15 * u, &off), -ENOSPC);
    range_tree_destroy(seen);
    metaslab_destroy(ms);
}

static void test_claim(void **state)
{
    (void)state;
    const uint64_t asize = 32 * CAIRN_MIB;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 9);
    metaslab_t *ms = mk(asize, 12);
    range_tree_t *claimed = range_tree_create();
    for (int i = 0; i < 300; i++) {
        uint64_t off = cairn_rng_below(&rng, asize / 4096) * 4096;
        uint64_t size = (1 + cairn_rng_below(&rng, 16)) * 4096;
        if (off + size > asize)
            continue;
        bool clash = range_tree_overlaps(claimed, off, size);
        assert_int_equal(metaslab_claim(ms, off, size), clash ? -EEXIST : 0);
        if (!clash)
            range_tree_add(claimed, off, size);
    }
    assert_int_equal(metaslab_claim(ms, 100, 4096), -EINVAL);
    assert_int_equal(metaslab_claim(ms, asize, 4096), -EINVAL);
    assert_int_equal(metaslab_claim(ms, asize - 4096, 8192), -EINVAL);

    range_tree_t *seen = range_tree_create();
    alloc_until_full(ms, 1, 4096, seen, asize);
    assert_int_equal(range_tree_add_tree(seen, claimed), 0);   /* disjoint from every claim */
    assert_int_equal(range_tree_space(seen), asize);

    /* Claims are not logged; deferred space cannot be claimed. */
    spacemap_record_t *recs;
    size_t n;
    metaslab_take_records(ms, 1, &recs, &n);
    uint64_t logged = 0;
    for (size_t i = 0; i < n; i++)
        logged += recs[i].size;
    assert_int_equal(logged, asize - range_tree_space(claimed));
    free(recs);
    uint64_t c0, csz = range_tree_largest(claimed, &c0);
    assert_int_equal(metaslab_free(ms, 2, c0, csz), 0);
    assert_int_equal(metaslab_claim(ms, c0, csz), -EEXIST);
    range_tree_destroy(seen);
    range_tree_destroy(claimed);
    metaslab_destroy(ms);
}

static void test_alignment_all_ashifts(void **state)
{
    (void)state;
    const uint32_t shifts[] = {9, 12, 16};
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 12);
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(shifts); k++) {
        uint64_t unit = 1ULL << shifts[k];
        uint64_t asize = 8 * CAIRN_MIB + unit / 2 + 7;   /* rounded down to the unit */
        metaslab_t *ms = mk(asize, shifts[k]);
        uint64_t usable = CAIRN_P2ALIGN(asize, unit);
        metaslab_stats_t st;
        metaslab_get_stats(ms, &st);
        assert_int_equal(st.size, usable);
        uint64_t off;
        assert_int_equal(metaslab_alloc(ms, 1, unit / 2, &off), -EINVAL);
        assert_int_equal(metaslab_alloc(ms, 1, unit + unit / 2, &off), -EINVAL);
        assert_int_equal(metaslab_alloc(ms, 1, 0, &off), -EINVAL);
        range_tree_t *seen = range_tree_create();
        for (int i = 0; i < 2000; i++) {
            uint64_t size = (1 + cairn_rng_below(&rng, 8)) * unit;
            if (metaslab_alloc(ms, 1, size, &off) != 0)
                break;
            assert_true(CAIRN_IS_P2ALIGNED(off, unit));
            assert_int_equal(range_tree_add(seen, off, size), 0);
            if (cairn_rng_below(&rng, 3) == 0)
                assert_int_equal(metaslab_free(ms, 1, off, size), 0);
        }
        alloc_until_full(ms, 2, unit, seen, usable);
        assert_int_equal(metaslab_free(ms, 3, unit / 2, unit), -EINVAL);
        range_tree_destroy(seen);
        metaslab_destroy(ms);
    }
    metaslab_t *ms;
    assert_int_equal(metaslab_create(0, 1 << 20, 8, DEFER, &ms), -EINVAL);
    assert_int_equal(metaslab_create(0, 1 << 20, 17, DEFER, &ms), -EINVAL);
    assert_int_equal(metaslab_create(0, 4095, 12, DEFER, &ms), -EINVAL);
}

static void test_bad_frees(void **state)
{
    (void)state;
    metaslab_t *ms = mk(1 * CAIRN_MIB, 12);
    uint64_t a, b;
    assert_int_equal(metaslab_alloc(ms, 1, 8192, &a), 0);
    assert_int_equal(metaslab_alloc(ms, 1, 8192, &b), 0);
    assert_int_equal(metaslab_free(ms, 1, b + 8192, 4096), -EINVAL);   /* free space */
    assert_int_equal(metaslab_free(ms, 1, b, 12288), -EINVAL);         /* partly free */
    assert_int_equal(metaslab_free(ms, 1, CAIRN_MIB, 4096), -EINVAL);  /* beyond asize */
    assert_int_equal(metaslab_free(ms, 0, a, 4096), -EINVAL);          /* txg 0 */
    assert_int_equal(metaslab_free(ms, 2, a, 4096), 0);                /* part of a block */
    assert_int_equal(metaslab_free(ms, 2, a, 8192), -EINVAL);          /* double (deferred) */
    assert_int_equal(metaslab_free(ms, 3, a + 4096, 4096), 0);
    metaslab_txg_synced(ms, 10);
    assert_int_equal(metaslab_free(ms, 11, a, 4096), -EINVAL);         /* double (free) */
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    assert_int_equal(st.allocated, 8192);
    assert_int_equal(st.deferred, 0);
    metaslab_destroy(ms);
}

static void test_records_and_unalloc(void **state)
{
    (void)state;
    metaslab_t *ms = mk(16 * CAIRN_MIB, 12);
    uint64_t o[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(metaslab_alloc(ms, 7, 4096, &o[i]), 0);
    assert_int_equal(metaslab_free(ms, 7, o[1], 4096), 0);
    assert_int_equal(metaslab_free(ms, 7, o[2], 4096), 0);
    uint64_t x;
    assert_int_equal(metaslab_alloc(ms, 8, 65536, &x), 0);

    /* Withdraw the middle of the merged ALLOC record of txg 8... */
    assert_int_equal(metaslab_unalloc(ms, 8, x + 8192, 8192), 0);
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_FREE, x + 8192, 8192));

    spacemap_record_t *r;
    size_t n;
    assert_int_equal(metaslab_take_records(ms, 7, &r, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].type, SPACEMAP_ALLOC);
    assert_int_equal(r[0].offset, o[0]);
    assert_int_equal(r[0].size, 4 * 4096);
    assert_int_equal(r[1].type, SPACEMAP_FREE);
    assert_int_equal(r[1].offset, o[1]);
    assert_int_equal(r[1].size, 2 * 4096);
    assert_int_equal(r[1].txg, 7);
    free(r);
    assert_int_equal(metaslab_take_records(ms, 7, &r, &n), 0);
    assert_int_equal(n, 0);
    assert_null(r);

    /* ...which leaves two ALLOC records around the hole. */
    assert_int_equal(metaslab_take_records(ms, 8, &r, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].offset, x);
    assert_int_equal(r[0].size, 8192);
    assert_int_equal(r[1].offset, x + 16384);
    assert_int_equal(r[1].size, 65536 - 16384);
    free(r);

    /* Once the record is gone, unalloc falls back to a deferred free. */
    assert_int_equal(metaslab_unalloc(ms, 9, x, 8192), 0);
    assert_true(metaslab_range_is(ms, METASLAB_SPACE_DEFERRED, x, 8192));
    assert_int_equal(metaslab_take_records(ms, 9, &r, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(r[0].type, SPACEMAP_FREE);
    free(r);
    /* Exact withdrawal removes the record entirely. */
    assert_int_equal(metaslab_alloc(ms, 10, 4096, &x), 0);
    assert_int_equal(metaslab_unalloc(ms, 10, x, 4096), 0);
    assert_int_equal(metaslab_take_records(ms, 10, &r, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(metaslab_unalloc(ms, 10, x, 4096), -EINVAL);
    metaslab_destroy(ms);
}

typedef struct thr {
    metaslab_t *ms;
    uint64_t seed;
    uint64_t *offs, *sizes;
    size_t n;
} thr_t;

static void *thr_main(void *arg)
{
    thr_t *t = arg;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, t->seed);
    t->offs = malloc(100000 * sizeof(uint64_t));
    t->sizes = malloc(100000 * sizeof(uint64_t));
    for (;;) {
        uint64_t size = (1 + cairn_rng_below(&rng, 4)) * 4096, off;
        int rc = metaslab_alloc(t->ms, 1, size, &off);
        if (rc == -ENOSPC && size > 4096)
            continue;
        if (rc)
            break;
        if (cairn_rng_below(&rng, 4) == 0) {   /* some frees race with the allocations */
            if (metaslab_free(t->ms, 1, off, size) != 0)
                abort();
            continue;
        }
        t->offs[t->n] = off;
        t->sizes[t->n++] = size;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    const uint64_t asize = 64 * CAIRN_MIB;
    metaslab_t *ms = mk(asize, 12);
    thr_t t[4] = {0};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i].ms = ms;
        t[i].seed = 100 + i;
        assert_int_equal(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    range_tree_t *seen = range_tree_create();
    for (int i = 0; i < 4; i++) {
        for (size_t j = 0; j < t[i].n; j++)
            assert_int_equal(range_tree_add(seen, t[i].offs[j], t[i].sizes[j]), 0);
        free(t[i].offs);
        free(t[i].sizes);
    }
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    assert_int_equal(st.free, 0);
    assert_int_equal(st.allocated, range_tree_space(seen));
    assert_int_equal(st.allocated + st.deferred, asize);
    range_tree_destroy(seen);
    metaslab_destroy(ms);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exhaust_disjoint),
        cmocka_unit_test(test_frees_deferred),
        cmocka_unit_test(test_sequential_contiguous),
        cmocka_unit_test(test_fragmented),
        cmocka_unit_test(test_best_fit_when_full),
        cmocka_unit_test(test_claim),
        cmocka_unit_test(test_alignment_all_ashifts),
        cmocka_unit_test(test_bad_frees),
        cmocka_unit_test(test_records_and_unalloc),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
