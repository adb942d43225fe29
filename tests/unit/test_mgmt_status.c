/* `pool status` scan lines (mgmt_scan_format): a scrub in progress with its rates, how
 * much is done and the time to go; one that cannot estimate yet; a finished one. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1024ULL * 1024)
#define T0 1780000000ULL   /* Thu May 28 20:26:40 2026 UTC */

static int utc(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    return 0;
}

static void test_in_progress(void **state)
{
    (void)state;
    /* 100 s in: 600M reached, 400M verified of 1000M: 4M/s, 600M left -> 150 s. */
    mgmt_scan_t s = {.state = MGMT_SCAN_SCANNING, .start_time = T0, .now = T0 + 100,
                     .to_examine = 1000 * MIB, .scanned = 600 * MIB, .examined = 400 * MIB,
                     .repaired = 64 * 1024};
    char buf[1024];
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "  scan: scrub in progress since Thu May 28 20:26:40 2026\n"
                             "\t600M scanned at 6.00M/s, 400M issued at 4.00M/s, 1000M total\n"
                             "\t64.0K repaired, 40.00% done, 00:02:30 to go\n");
    /* Hours: 1 GiB of 3601 GiB verified in an hour leaves 3600 hours. */
    s = (mgmt_scan_t){.state = MGMT_SCAN_SCANNING, .start_time = T0, .now = T0 + 3600,
                      .to_examine = 3601 * 1024 * MIB, .scanned = 1024 * MIB,
                      .examined = 1024 * MIB};
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "\t0 repaired, 0.03% done, 3600:00:00 to go\n"));
}

/* A scan resumed after a restart: the rates and the time left come from this
 * run alone (the earlier runs' bytes took a time unknown here); the counters
 * and "since" are the whole scan's. */
static void test_resumed(void **state)
{
    (void)state;
    /* Began at T0, restarted at T0 + 3000 with 500M verified; 100 s later 900M:
     * 4M/s in this run, 100M left -> 25 s. */
    mgmt_scan_t s = {.state = MGMT_SCAN_SCANNING, .func = 1, .start_time = T0,
                     .run_start = T0 + 3000, .now = T0 + 3100, .to_examine = 1000 * MIB,
                     .scanned = 950 * MIB, .run_scanned = 550 * MIB, .examined = 900 * MIB,
                     .run_examined = 500 * MIB, .issued = 300 * MIB, .run_issued = 100 * MIB,
                     .repaired = 300 * MIB};
    char buf[1024];
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "  scan: resilver in progress since Thu May 28 20:26:40 2026\n"
                             "\t950M scanned at 4.00M/s, 300M issued at 2.00M/s, 1000M total\n"
                             "\t300M resilvered, 90.00% done, 00:00:25 to go\n");
    s.sequential = true;
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "  scan: resilver (sequential) in progress since"));
    s.state = MGMT_SCAN_FINISHED;
    s.end_time = T0 + 3125;
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "  scan: resilvered 300M (sequential) in 00:52:05 with 0 errors"));
}

static void test_no_estimate_yet(void **state)
{
    (void)state;
    mgmt_scan_t s = {.state = MGMT_SCAN_SCANNING, .start_time = T0, .now = T0,
                     .to_examine = 10 * MIB};
    char buf[1024];
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "\t0 scanned at 0/s, 0 issued at 0/s, 10.0M total\n"));
    assert_non_null(strstr(buf, "\t0 repaired, 0.00% done, no estimated completion time\n"));
}

static void test_finished_and_none(void **state)
{
    (void)state;
    mgmt_scan_t s = {.state = MGMT_SCAN_FINISHED, .start_time = T0, .end_time = T0 + 3725,
                     .to_examine = 10 * MIB, .scanned = 10 * MIB, .examined = 10 * MIB,
                     .repaired = 4096, .errors = 2};
    char buf[1024];
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "  scan: scrub repaired 4.00K in 01:02:05 with 2 errors on "
                             "Thu May 28 21:28:45 2026\n\t10.0M examined\n");
    s = (mgmt_scan_t){0};
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "  scan: none requested\n");
}

static void test_resilver(void **state)
{
    (void)state;
    /* 100 s in: the walk reached 600M and is done with 400M of 1000M, of which
     * it read only 50M (the blocks the stale leaf missed) and wrote 20M. */
    mgmt_scan_t s = {.state = MGMT_SCAN_SCANNING, .start_time = T0, .now = T0 + 100,
                     .to_examine = 1000 * MIB, .scanned = 600 * MIB, .examined = 400 * MIB,
                     .issued = 50 * MIB, .repaired = 20 * MIB, .func = 1};
    char buf[1024];
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "  scan: resilver in progress since Thu May 28 20:26:40 2026\n"
                             "\t600M scanned at 6.00M/s, 50.0M issued at 512K/s, 1000M total\n"
                             "\t20.0M resilvered, 40.00% done, 00:02:30 to go\n");
    s.state = MGMT_SCAN_FINISHED;
    s.end_time = T0 + 3725;
    mgmt_scan_format(&s, buf, sizeof buf);
    assert_string_equal(buf, "  scan: resilvered 20.0M in 01:02:05 with 0 errors on Thu May 28 "
                             "21:28:45 2026\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_progress),
        cmocka_unit_test(test_resumed),
        cmocka_unit_test(test_no_estimate_yet),
        cmocka_unit_test(test_finished_and_none),
        cmocka_unit_test(test_resilver),
    };
    return cmocka_run_group_tests(tests, utc, NULL);
}
