/*
 * Range tree tests: every operation is checked against a plain bitmap model
 * (one bit per 64 KiB unit), after every step, for space, extent count,
 * containment, overlap, largest extent, next fit and best fit; then merges and
 * splits at scale (hundreds of thousands of extents) and the edges of the
 * 64-bit space.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/range_tree.h>
#include <cairn/util.h>

#include <stdlib.h>
#include <string.h>

#define UNIT (64 * 1024ULL)
#define NUNITS 2048

typedef struct model {
    bool bit[NUNITS];
} model_t;

static bool model_any(const model_t *m, uint64_t a, uint64_t n)
{
    for (uint64_t i = a; i < a + n; i++)
        if (m->bit[i])
            return true;
    return false;
}

static bool model_all(const model_t *m, uint64_t a, uint64_t n)
{
    for (uint64_t i = a; i < a + n; i++)
        if (!m->bit[i])
            return false;
    return true;
}

static void model_set(model_t *m, uint64_t a, uint64_t n, bool v)
{
    for (uint64_t i = a; i < a + n; i++)
        m->bit[i] = v;
}

static uint64_t model_space(const model_t *m)
{
    uint64_t s = 0;
    for (int i = 0; i < NUNITS; i++)
        s += m->bit[i];
    return s * UNIT;
}

static uint64_t model_count(const model_t *m, uint64_t *largest)
{
    uint64_t c = 0, run = 0, big = 0;
    for (int i = 0; i < NUNITS; i++) {
        if (m->bit[i]) {
            if (run == 0)
                c++;
            run++;
            if (run > big)
                big = run;
        } else {
            run = 0;
        }
    }
    *largest = big * UNIT;
    return c;
}

/* Lowest aligned unit >= cursor with n set units from it; -1 if none. */
static int64_t model_first(const model_t *m, uint64_t cursor, uint64_t n, uint64_t align)
{
    for (uint64_t o = CAIRN_P2ROUNDUP(cursor, align); o + n <= NUNITS; o += align)
        if (model_all(m, o, n))
            return (int64_t)o;
    return -1;
}

/* Start of the smallest run that holds n aligned units (lowest on ties), rounded up. */
static int64_t model_best(const model_t *m, uint64_t n, uint64_t align)
{
    int64_t best = -1;
    uint64_t best_len = UINT64_MAX;
    for (uint64_t i = 0; i < NUNITS;) {
        if (!m->bit[i]) {
            i++;
            continue;
        }
        uint64_t s = i;
        while (i < NUNITS && m->bit[i])
            i++;
        uint64_t o = CAIRN_P2ROUNDUP(s, align);
        if (o + n <= i && i - s < best_len) {
            best_len = i - s;
            best = (int64_t)o;
        }
    }
    return best;
}

typedef struct walk_check {
    const model_t *m;
    uint64_t pos;     /* next unit expected to be examined */
    uint64_t n;
    bool ok;
} walk_check_t;

/* Each walked extent must be a maximal run of the model, in order. */
static int walk_check_cb(void *arg, uint64_t start, uint64_t size)
{
    walk_check_t *w = arg;
    uint64_t a = start / UNIT, n = size / UNIT;
    if (start % UNIT || size % UNIT || a < w->pos || a + n > NUNITS || !model_all(w->m, a, n) ||
        (a > 0 && w->m->bit[a - 1]) || (a + n < NUNITS && w->m->bit[a + n]) ||
        model_any(w->m, w->pos, a - w->pos))
        w->ok = false;
    w->pos = a + n;
    w->n++;
    return 0;
}

static void check_against_model(range_tree_t *rt, const model_t *m, cairn_rng_t *rng)
{
    uint64_t largest;
    uint64_t count = model_count(m, &largest);
    assert_int_equal(range_tree_verify(rt), 0);
    assert_int_equal(range_tree_space(rt), model_space(m));
    assert_int_equal(range_tree_count(rt), count);
    assert_int_equal(range_tree_is_empty(rt), count == 0);
    uint64_t where = 0;
    assert_int_equal(range_tree_largest(rt, &where), largest);
    if (largest) {
        assert_true(range_tree_contains(rt, where, largest));
        assert_false(range_tree_contains(rt, where, largest + 1));
        assert_true(where == 0 || !range_tree_overlaps(rt, where - 1, 1));
    }

    for (int q = 0; q < 8; q++) {
        uint64_t a = cairn_rng_below(rng, NUNITS);
        uint64_t n = 1 + cairn_rng_below(rng, CAIRN_MIN(64, NUNITS - a));
        assert_int_equal(range_tree_contains(rt, a * UNIT, n * UNIT), model_all(m, a, n));
        assert_int_equal(range_tree_overlaps(rt, a * UNIT, n * UNIT), model_any(m, a, n));
        /* Sub-unit probes straddling a unit boundary. */
        assert_int_equal(range_tree_overlaps(rt, a * UNIT + UNIT - 1, 2),
                         m->bit[a] || (a + 1 < NUNITS && m->bit[a + 1]));

        uint64_t align = 1ULL << cairn_rng_below(rng, 3);
        uint64_t size = 1 + cairn_rng_below(rng, 8);
        uint64_t cursor = cairn_rng_below(rng, NUNITS);
        uint64_t off = 0;
        int64_t want = model_first(m, cursor, size, align);
        bool got = range_tree_find_first(rt, cursor * UNIT, size * UNIT, align * UNIT, &off);
        assert_int_equal(got, want >= 0);
        if (got)
            assert_int_equal(off, (uint64_t)want * UNIT);

        want = model_best(m, size, align);
        got = range_tree_find_best(rt, size * UNIT, align * UNIT, &off);
        assert_int_equal(got, want >= 0);
        if (got)
            assert_int_equal(off, (uint64_t)want * UNIT);
    }

    walk_check_t w = {.m = m, .ok = true};
    assert_int_equal(range_tree_walk(rt, walk_check_cb, &w), 0);
    assert_true(w.ok);
    assert_int_equal(w.n, count);
    assert_false(model_any(m, w.pos, NUNITS - w.pos));
}

static void test_random_vs_bitmap(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 0x5eed1);
    range_tree_t *rt = range_tree_create();
    model_t *m = cairn_zalloc(sizeof(*m));

    for (int step = 0; step < 12000; step++) {
        uint64_t a = cairn_rng_below(&rng, NUNITS);
        uint64_t cap = cairn_rng_below(&rng, 4) ? 16 : 256;
        uint64_t maxn = CAIRN_MIN(cap, NUNITS - a);
        uint64_t n = 1 + cairn_rng_below(&rng, maxn);
        uint64_t before = range_tree_space(rt);
        switch (cairn_rng_below(&rng, 5)) {
        case 0:
        case 1: {
            bool clash = model_any(m, a, n);
            int rc = range_tree_add(rt, a * UNIT, n * UNIT);
            assert_int_equal(rc, clash ? -EEXIST : 0);
            if (!clash)
                model_set(m, a, n, true);
            else
                assert_int_equal(range_tree_space(rt), before);
            break;
        }
        case 2:
        case 3: {
            bool inside = model_all(m, a, n);
            int rc = range_tree_remove(rt, a * UNIT, n * UNIT);
            assert_int_equal(rc, inside ? 0 : -ENOENT);
            if (inside)
                model_set(m, a, n, false);
            else
                assert_int_equal(range_tree_space(rt), before);
            break;
        }
        default: {
            uint64_t had = 0;
            for (uint64_t i = a; i < a + n; i++)
                had += m->bit[i];
            assert_int_equal(range_tree_overlap_space(rt, a * UNIT, n * UNIT), had * UNIT);
            assert_int_equal(range_tree_clear(rt, a * UNIT, n * UNIT), had * UNIT);
            model_set(m, a, n, false);
            break;
        }
        }
        check_against_model(rt, m, &rng);
    }
    range_tree_destroy(rt);
    free(m);
}

static void test_merge_and_split(void **state)
{
    (void)state;
    range_tree_t *rt = range_tree_create();
    assert_int_equal(range_tree_add(rt, 100, 10), 0);
    assert_int_equal(range_tree_add(rt, 120, 10), 0);
    assert_int_equal(range_tree_count(rt), 2);
    assert_int_equal(range_tree_add(rt, 110, 10), 0);   /* bridges both */
    assert_int_equal(range_tree_count(rt), 1);
    assert_true(range_tree_contains(rt, 100, 30));
    assert_false(range_tree_contains(rt, 99, 2));
    assert_int_equal(range_tree_add(rt, 90, 10), 0);    /* left neighbour */
    assert_int_equal(range_tree_add(rt, 130, 5), 0);    /* right neighbour */
    assert_int_equal(range_tree_count(rt), 1);
    assert_int_equal(range_tree_largest(rt, NULL), 45);
    assert_int_equal(range_tree_add(rt, 134, 2), -EEXIST);
    assert_int_equal(range_tree_add(rt, 80, 11), -EEXIST);
    assert_int_equal(range_tree_space(rt), 45);

    assert_int_equal(range_tree_remove(rt, 100, 5), 0);  /* split */
    assert_int_equal(range_tree_count(rt), 2);
    assert_int_equal(range_tree_remove(rt, 100, 1), -ENOENT);
    assert_int_equal(range_tree_remove(rt, 95, 10), -ENOENT); /* half inside */
    assert_int_equal(range_tree_remove(rt, 90, 10), 0);  /* whole extent */
    assert_int_equal(range_tree_remove(rt, 105, 1), 0);  /* trim left */
    assert_int_equal(range_tree_remove(rt, 134, 1), 0);  /* trim right */
    assert_int_equal(range_tree_count(rt), 1);
    assert_true(range_tree_contains(rt, 106, 28));
    assert_int_equal(range_tree_space(rt), 28);
    assert_int_equal(range_tree_add(rt, 0, 0), -EINVAL);
    assert_int_equal(range_tree_remove(rt, 106, 0), -EINVAL);

    /* The 64-bit edge: an extent may end exactly at UINT64_MAX, never past it. */
    assert_int_equal(range_tree_add(rt, UINT64_MAX - 10, 10), 0);
    assert_int_equal(range_tree_add(rt, UINT64_MAX - 10, 11), -EINVAL);
    assert_true(range_tree_contains(rt, UINT64_MAX - 1, 1));
    assert_true(range_tree_overlaps(rt, UINT64_MAX - 20, 100));
    assert_int_equal(range_tree_clear(rt, UINT64_MAX - 5, UINT64_MAX), 5);
    assert_int_equal(range_tree_space(rt), 33);

    range_tree_vacate(rt, NULL, NULL);
    assert_true(range_tree_is_empty(rt));
    assert_int_equal(range_tree_largest(rt, NULL), 0);
    uint64_t off;
    assert_false(range_tree_find_first(rt, 0, 1, 1, &off));
    assert_false(range_tree_find_best(rt, 1, 1, &off));
    range_tree_destroy(rt);
}

static int add_cb(void *arg, uint64_t start, uint64_t size)
{
    return range_tree_add(arg, start, size);
}

static void shuffle(uint64_t *v, size_t n, cairn_rng_t *rng)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = cairn_rng_below(rng, i + 1);
        uint64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* 200k extents: every even unit in random order, then the odd ones, which merge
 * everything back into one extent; then random single-unit holes split it. */
static void test_scale_merges(void **state)
{
    (void)state;
    enum { N = 200000 };
    const uint64_t u = 4096;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 77);
    uint64_t *order = malloc(N * sizeof(*order));
    range_tree_t *rt = range_tree_create();

    for (size_t i = 0; i < N; i++)
        order[i] = 2 * i;
    shuffle(order, N, &rng);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(range_tree_add(rt, order[i] * u, u), 0);
    assert_int_equal(range_tree_count(rt), N);
    assert_int_equal(range_tree_verify(rt), 0);
    assert_int_equal(range_tree_largest(rt, NULL), u);
    uint64_t off;
    assert_false(range_tree_find_first(rt, 0, 2 * u, u, &off));
    assert_false(range_tree_find_best(rt, 2 * u, u, &off));
    assert_true(range_tree_find_first(rt, 1001 * u, u, u, &off));
    assert_int_equal(off, 1002 * u);

    /* One bigger extent far away is found by size, not by scanning. */
    assert_int_equal(range_tree_add(rt, 10 * N * u, 3 * u), 0);
    assert_true(range_tree_find_first(rt, 0, 2 * u, u, &off));
    assert_int_equal(off, 10 * N * u);
    assert_true(range_tree_find_best(rt, 3 * u, u, &off));
    assert_int_equal(off, 10 * N * u);
    assert_int_equal(range_tree_largest(rt, &off), 3 * u);
    assert_int_equal(off, 10 * N * u);
    assert_int_equal(range_tree_remove(rt, 10 * N * u, 3 * u), 0);

    for (size_t i = 0; i < N - 1; i++)
        order[i] = 2 * i + 1;
    shuffle(order, N - 1, &rng);
    for (size_t i = 0; i < N - 1; i++) {
        assert_int_equal(range_tree_add(rt, order[i] * u, u), 0);
        assert_int_equal(range_tree_count(rt), N - 1 - i);
    }
    assert_int_equal(range_tree_count(rt), 1);
    assert_int_equal(range_tree_verify(rt), 0);
    assert_int_equal(range_tree_largest(rt, NULL), (2 * N - 1) * u);

    /* Holes at distinct random units: each interior hole adds one extent. */
    range_tree_t *holes = range_tree_create();
    uint64_t expect_count = 1;
    for (int i = 0; i < 50000; i++) {
        uint64_t x = 1 + cairn_rng_below(&rng, 2 * N - 3);
        if (range_tree_overlaps(holes, x * u, u))
            continue;
        bool left_hole = range_tree_overlaps(holes, (x - 1) * u, u);
        bool right_hole = range_tree_overlaps(holes, (x + 1) * u, u);
        assert_int_equal(range_tree_remove(rt, x * u, u), 0);
        assert_int_equal(range_tree_add(holes, x * u, u), 0);
        expect_count += 1 - (uint64_t)left_hole - (uint64_t)right_hole;
        assert_int_equal(range_tree_count(rt), expect_count);
    }
    assert_int_equal(range_tree_space(rt) + range_tree_space(holes), (2 * N - 1) * u);
    assert_int_equal(range_tree_verify(rt), 0);
    assert_int_equal(range_tree_verify(holes), 0);

    /* The two trees partition [0, (2N-1)u): gaps of one are the other. */
    range_tree_t *gaps = range_tree_create();
    assert_int_equal(range_tree_walk_gaps(rt, 0, (2 * N - 1) * u, add_cb, gaps), 0);
    assert_true(range_tree_equal(gaps, holes));
    range_tree_t *copy = range_tree_create();
    assert_int_equal(range_tree_add_tree(copy, rt), 0);
    assert_true(range_tree_equal(copy, rt));
    assert_int_equal(range_tree_add_tree(copy, holes), 0);
    assert_int_equal(range_tree_count(copy), 1);
    assert_int_equal(range_tree_add_tree(copy, holes), -EEXIST);
    assert_false(range_tree_equal(copy, rt));

    range_tree_destroy(copy);
    range_tree_destroy(gaps);
    range_tree_destroy(holes);
    range_tree_destroy(rt);
    free(order);
}

/* find_first and find_best with an alignment coarser than the extents. */
static void test_unaligned_extents(void **state)
{
    (void)state;
    range_tree_t *rt = range_tree_create();
    assert_int_equal(range_tree_add(rt, 100, 40), 0);    /* [100, 140): 128..140 aligned 4 */
    assert_int_equal(range_tree_add(rt, 1000, 70), 0);   /* [1000, 1070) */
    assert_int_equal(range_tree_add(rt, 5000, 33), 0);   /* [5000, 5033): 5024..5033 */
    uint64_t off;
    /* 32 bytes aligned to 32: not in [100,140) (128+32 > 140), first in [1000,1070) at 1024. */
    assert_true(range_tree_find_first(rt, 0, 32, 32, &off));
    assert_int_equal(off, 1024);
    /* Best fit: [5000,5033) is smaller but cannot hold 32 at a 32 boundary. */
    assert_true(range_tree_find_best(rt, 32, 32, &off));
    assert_int_equal(off, 1024);
    assert_true(range_tree_find_best(rt, 9, 32, &off));
    assert_int_equal(off, 5024);
    assert_true(range_tree_find_best(rt, 10, 32, &off));   /* 5024 + 10 > 5033 */
    assert_int_equal(off, 128);
    /* From a cursor inside an extent, the rest of that extent comes first. */
    assert_true(range_tree_find_first(rt, 1010, 16, 16, &off));
    assert_int_equal(off, 1024);
    assert_true(range_tree_find_first(rt, 1050, 16, 16, &off));
    assert_int_equal(off, 5008);
    assert_false(range_tree_find_first(rt, 5010, 32, 1, &off));
    assert_false(range_tree_find_first(rt, 0, 8, 3, &off));   /* align not a power of 2 */
    range_tree_destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_and_split),
        cmocka_unit_test(test_unaligned_extents),
        cmocka_unit_test(test_random_vs_bitmap),
        cmocka_unit_test(test_scale_merges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
