/*
 * The DMU's uint64-keyed hash map against a reference model: random puts,
 * replacements, removes and lookups (keys drawn from a small range, so chains of
 * colliding keys form and removals hit their heads, middles and tails), with the
 * contents compared after every step and in full at checkpoints, including
 * dmu_map_values; the map grows, empties and grows again. Sequential blkids and
 * sparse indirect keys are what the DMU puts in. CAIRN_TEST_SEED replays a seed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cairn/util.h>

#include "../../src/dmu/dmu_impl.h"

#define NKEYS 4096

static uintptr_t model[NKEYS]; /* 0: absent */
static cairn_rng_t rng;

/* Keys spread over the whole uint64 range but drawn from NKEYS of them. */
static uint64_t key_of(size_t i) { return i % 3 == 0 ? i : (i * 0x100000001B3ULL) ^ ((uint64_t)i << 52); }

static int cmp_uintptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

/* Every key's value, the count, and dmu_map_values as a multiset, against the model. */
static void check_all(const dmu_map_t *m)
{
    size_t present = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        assert_ptr_equal(dmu_map_get(m, key_of(i)), (void *)model[i]);
        present += model[i] != 0;
    }
    assert_int_equal(m->count, present);
    size_t n, k = 0;
    void **vals = dmu_map_values(m, &n);
    assert_int_equal(n, present);
    uintptr_t *got = cairn_zalloc((n ? n : 1) * sizeof(*got)), *want = cairn_zalloc((n ? n : 1) * sizeof(*want));
    for (size_t i = 0; i < n; i++) got[i] = (uintptr_t)vals[i];
    for (size_t i = 0; i < NKEYS; i++)
        if (model[i]) want[k++] = model[i];
    qsort(got, n, sizeof(*got), cmp_uintptr);
    qsort(want, n, sizeof(*want), cmp_uintptr);
    for (size_t i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
    free(got);
    free(want);
    free(vals);
}

static void test_random_against_model(void **state)
{
    (void)state;
    dmu_map_t m;
    dmu_map_init(&m);
    assert_null(dmu_map_get(&m, 0));
    assert_null(dmu_map_remove(&m, 0));
    memset(model, 0, sizeof(model));
    const char *seed = getenv("CAIRN_TEST_SEED");
    cairn_rng_seed(&rng, seed ? strtoull(seed, NULL, 0) : 20261129);
    for (int step = 0; step < 400000; step++) {
        /* The key range narrows and widens so the map grows, empties and regrows. */
        size_t span = (size_t)(step / 50000 % 2 ? NKEYS : 300);
        size_t i = cairn_rng_below(&rng, span);
        uint64_t op = cairn_rng_below(&rng, 10);
        if (op < 5) {
            uintptr_t v = (uintptr_t)(step + 1) * 16; /* never NULL */
            dmu_map_put(&m, key_of(i), (void *)v);
            model[i] = v;
        } else if (op < 8) {
            assert_ptr_equal(dmu_map_remove(&m, key_of(i)), (void *)model[i]);
            model[i] = 0;
        } else {
            assert_ptr_equal(dmu_map_get(&m, key_of(i)), (void *)model[i]);
        }
        if (step % 20000 == 0) check_all(&m);
    }
    check_all(&m);
    for (size_t i = 0; i < NKEYS; i++) {
        assert_ptr_equal(dmu_map_remove(&m, key_of(i)), (void *)model[i]);
        model[i] = 0;
    }
    check_all(&m);
    dmu_map_fini(&m);
    assert_null(dmu_map_get(&m, 1));
}

static void *val_of(uint64_t k) { return (void *)(uintptr_t)(k + 1); }

/* Sequential keys (blkids), half removed in insertion order, the rest in reverse. */
static void test_sequential_fill_and_drain(void **state)
{
    (void)state;
    dmu_map_t m;
    dmu_map_init(&m);
    for (uint64_t k = 0; k < 100000; k++) dmu_map_put(&m, k, val_of(k));
    assert_int_equal(m.count, 100000);
    for (uint64_t k = 0; k < 100000; k += 2) assert_ptr_equal(dmu_map_remove(&m, k), val_of(k));
    for (uint64_t k = 0; k < 100000; k++)
        assert_ptr_equal(dmu_map_get(&m, k), k % 2 ? val_of(k) : NULL);
    for (uint64_t k = 100000; k-- > 0;)
        assert_ptr_equal(dmu_map_remove(&m, k), k % 2 ? val_of(k) : NULL);
    assert_int_equal(m.count, 0);
    for (uint64_t k = 0; k < 100000; k++) assert_null(dmu_map_get(&m, k));
    dmu_map_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_sequential_fill_and_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
