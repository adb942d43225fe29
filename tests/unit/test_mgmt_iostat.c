/* `pool iostat` rows (mgmt_iostat_cells): capacity, per-second rates between two
 * samples or since import, counters that restarted, exact and human formats. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt.h>

#include <string.h>

#define SEC 1000000000ULL

static void cells_of(const mgmt_iostat_counters_t *prev, const mgmt_iostat_counters_t *cur,
                     uint64_t dt, bool exact, bool space, char out[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL])
{
    memset(out, 'x', MGMT_IOSTAT_CELLS * MGMT_IOSTAT_CELL);
    mgmt_iostat_cells(prev, cur, dt, exact, space, out);
}

static void test_rates_over_interval(void **state)
{
    (void)state;
    mgmt_iostat_counters_t a = {.alloc = 100, .size = 1000, .reads = 10, .writes = 20,
                                .read_bytes = 4096, .write_bytes = 8192};
    mgmt_iostat_counters_t b = {.alloc = 300, .size = 1000, .reads = 30, .writes = 80,
                                .read_bytes = 4096 + 2 * 1048576, .write_bytes = 8192 + 4096 * 4};
    char c[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL];
    cells_of(&a, &b, 2 * SEC, true, true, c);
    assert_string_equal(c[0], "300");   /* alloc as of the sample */
    assert_string_equal(c[1], "700");   /* free = size - alloc */
    assert_string_equal(c[2], "10");    /* (30 - 10) / 2 s */
    assert_string_equal(c[3], "30");    /* (80 - 20) / 2 s */
    assert_string_equal(c[4], "1048576");
    assert_string_equal(c[5], "8192");
    /* Rounded to the nearest unit: 3 in 2 s is 1.5 -> 2; 1 in 4 s is 0.25 -> 0. */
    mgmt_iostat_counters_t d = a;
    d.reads += 3;
    d.writes += 1;
    cells_of(&a, &d, 2 * SEC, true, true, c);
    assert_string_equal(c[2], "2");
    cells_of(&a, &d, 4 * SEC, true, true, c);
    assert_string_equal(c[3], "0");
}

static void test_since_import_and_restart(void **state)
{
    (void)state;
    mgmt_iostat_counters_t cur = {.size = 10, .alloc = 20, .reads = 50, .write_bytes = 5000};
    char c[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL];
    /* No previous sample: totals over the time since import. */
    cells_of(NULL, &cur, 10 * SEC, true, true, c);
    assert_string_equal(c[2], "5");
    assert_string_equal(c[5], "500");
    assert_string_equal(c[1], "0");     /* alloc above size (in flight) never wraps */
    /* Counters that went backwards restarted (re-import): the new value counts. */
    mgmt_iostat_counters_t old = {.reads = 1000, .write_bytes = 1 << 20};
    cells_of(&old, &cur, 10 * SEC, true, true, c);
    assert_string_equal(c[2], "5");
    assert_string_equal(c[5], "500");
    /* A zero interval divides nothing. */
    cells_of(NULL, &cur, 0, true, true, c);
    assert_string_equal(c[2], "0");
}

static void test_human_and_no_space(void **state)
{
    (void)state;
    mgmt_iostat_counters_t cur = {.alloc = 3 * 1048576 / 2, .size = 1073741824,
                                  .reads = 12345, .writes = 999, .write_bytes = 10 * 1048576};
    char c[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL];
    cells_of(NULL, &cur, SEC, false, true, c);
    assert_string_equal(c[0], "1.50M");
    assert_string_equal(c[2], "12K");
    assert_string_equal(c[3], "999");
    assert_string_equal(c[4], "0");
    assert_string_equal(c[5], "10.0M");
    cur.reads = 1500;
    cells_of(NULL, &cur, SEC, false, false, c);
    assert_string_equal(c[0], "-");     /* a mirror side has no capacity of its own */
    assert_string_equal(c[1], "-");
    assert_string_equal(c[2], "1.5K");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_over_interval),
        cmocka_unit_test(test_since_import_and_restart),
        cmocka_unit_test(test_human_and_no_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
