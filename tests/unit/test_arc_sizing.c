/*
 * The ARC's size from the machine and under memory pressure (src/arc/arc_size.c),
 * with made-up machines: arc_max defaults to half the memory (or the cgroup's
 * limit when lower) with a floor; meminfo and cgroup v2 and v1 files are parsed
 * (a missing MemTotal is an error, "max" or v1's huge number is no limit); the pressure target shrinks below
 * the reserve, never under the floor, grows back only with twice the reserve
 * free and never past arc_max; arc_set_target() moves c within arc_max and the
 * buffer pool's bound with it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/arc.h>
#include <cairn/bufpool.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB CAIRN_MIB
#define GIB (1024 * CAIRN_MIB)

static arc_memory_t machine(uint64_t total, uint64_t available, uint64_t cg_limit, uint64_t cg_usage)
{
    return (arc_memory_t){.total = total, .available = available, .cg_limit = cg_limit, .cg_usage = cg_usage};
}

static void test_default_max(void **state)
{
    (void)state;
    arc_memory_t m = machine(24 * GIB, 20 * GIB, 0, 0);
    assert_int_equal(arc_default_max(&m), 12 * GIB);
    m = machine(24 * GIB, 20 * GIB, 2 * GIB, 100 * MIB); /* a container's limit wins */
    assert_int_equal(arc_default_max(&m), 1 * GIB);
    m = machine(24 * GIB, 20 * GIB, 64 * GIB, 0); /* a limit above the machine does not */
    assert_int_equal(arc_default_max(&m), 12 * GIB);
    m = machine(96 * MIB, 50 * MIB, 0, 0); /* the floor */
    assert_int_equal(arc_default_max(&m), ARC_MAX_FLOOR);
}

static void test_available_and_reserve(void **state)
{
    (void)state;
    arc_memory_t m = machine(32 * GIB, 10 * GIB, 0, 0);
    assert_int_equal(arc_memory_reserve(&m), 1 * GIB);
    assert_int_equal(arc_memory_available(&m), 10 * GIB);
    m = machine(32 * GIB, 10 * GIB, 4 * GIB, 3 * GIB); /* the cgroup is nearer its end */
    assert_int_equal(arc_memory_available(&m), 1 * GIB);
    assert_int_equal(arc_memory_reserve(&m), 128 * MIB);
    m = machine(32 * GIB, 10 * GIB, 4 * GIB, 5 * GIB); /* over it */
    assert_int_equal(arc_memory_available(&m), 0);
    m = machine(1 * GIB, 500 * MIB, 0, 0);
    assert_int_equal(arc_memory_reserve(&m), 64 * MIB);
}

static void test_pressure_target(void **state)
{
    (void)state;
    uint64_t c_max = 12 * GIB; /* reserve of a 24 GiB machine: 768 MiB */
    /* Plenty free at arc_max: stays. */
    arc_memory_t m = machine(24 * GIB, 10 * GIB, 0, 0);
    assert_int_equal(arc_pressure_target(c_max, c_max, &m), c_max);
    /* 268 MiB available: 500 MiB short of the reserve, a cut of that. */
    m = machine(24 * GIB, 268 * MIB, 0, 0);
    assert_int_equal(arc_pressure_target(c_max, c_max, &m), c_max - 500 * MIB);
    /* A little short: at least 1/32 of c. */
    m = machine(24 * GIB, 760 * MIB, 0, 0);
    assert_int_equal(arc_pressure_target(8 * GIB, c_max, &m), 8 * GIB - 256 * MIB);
    /* Never under the floor, and a target under it stays. */
    m = machine(24 * GIB, 0, 0, 0);
    assert_int_equal(arc_pressure_target(200 * MIB, c_max, &m), ARC_MAX_FLOOR);
    assert_int_equal(arc_pressure_target(32 * MIB, c_max, &m), 32 * MIB);
    /* Between the reserve and twice it: holds (no oscillation). */
    m = machine(24 * GIB, 1 * GIB, 0, 0);
    assert_int_equal(arc_pressure_target(4 * GIB, c_max, &m), 4 * GIB);
    /* Twice the reserve free: grows back by at most 1/32 of arc_max... */
    m = machine(24 * GIB, 10 * GIB, 0, 0);
    assert_int_equal(arc_pressure_target(4 * GIB, c_max, &m), 4 * GIB + 384 * MIB);
    /* ...and by no more than what is free past twice the reserve... */
    m = machine(24 * GIB, 1536 * MIB + 10 * MIB, 0, 0);
    assert_int_equal(arc_pressure_target(4 * GIB, c_max, &m), 4 * GIB + 10 * MIB);
    /* ...never past arc_max. */
    m = machine(24 * GIB, 20 * GIB, 0, 0);
    assert_int_equal(arc_pressure_target(c_max - MIB, c_max, &m), c_max);
    /* A cgroup near its limit squeezes even with the machine free. */
    m = machine(24 * GIB, 20 * GIB, 2 * GIB, 2 * GIB - 10 * MIB);
    assert_true(arc_pressure_target(1 * GIB, 1 * GIB, &m) < 1 * GIB);
    /* Shrinking repeatedly converges to the floor, never below. */
    m = machine(24 * GIB, 0, 0, 0);
    uint64_t c = c_max;
    for (int i = 0; i < 1000; i++) c = arc_pressure_target(c, c_max, &m);
    assert_int_equal(c, ARC_MAX_FLOOR);
}

static char g_dir[256];

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_memory_read(void **state)
{
    (void)state;
    const char *tmp = getenv("CAIRN_TEST_TMP");
    if (tmp) mkdir(tmp, 0755);
    snprintf(g_dir, sizeof g_dir, "%s/arcsize.XXXXXX", tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(g_dir));
    char meminfo[512];
    snprintf(meminfo, sizeof meminfo, "%s/meminfo", g_dir);
    write_file("meminfo", "MemTotal:       24683520 kB\nMemFree:        23000000 kB\n"
                          "MemAvailable:   23550000 kB\nBuffers:           1000 kB\n");
    arc_memory_t m;
    assert_int_equal(arc_memory_read(meminfo, NULL, &m), 0);
    assert_int_equal(m.total, 24683520ull * 1024);
    assert_int_equal(m.available, 23550000ull * 1024);
    assert_int_equal(m.cg_limit, 0);
    /* A cgroup with a limit, and one without ("max"). */
    write_file("memory.max", "2147483648\n");
    write_file("memory.current", "104857600\n");
    assert_int_equal(arc_memory_read(meminfo, g_dir, &m), 0);
    assert_int_equal(m.cg_limit, 2 * GIB);
    assert_int_equal(m.cg_usage, 100 * MIB);
    assert_int_equal(arc_default_max(&m), 1 * GIB);
    write_file("memory.max", "max\n");
    assert_int_equal(arc_memory_read(meminfo, g_dir, &m), 0);
    assert_int_equal(m.cg_limit, 0);
    /* cgroup v1's names when v2's are absent; its "no limit" is a huge number. */
    char v2max[600];
    snprintf(v2max, sizeof v2max, "%s/memory.max", g_dir);
    unlink(v2max);
    write_file("memory.limit_in_bytes", "1073741824\n");
    write_file("memory.usage_in_bytes", "52428800\n");
    assert_int_equal(arc_memory_read(meminfo, g_dir, &m), 0);
    assert_int_equal(m.cg_limit, 1 * GIB);
    assert_int_equal(m.cg_usage, 50 * MIB);
    assert_int_equal(arc_default_max(&m), 512 * MIB);
    write_file("memory.limit_in_bytes", "9223372036854771712\n");
    assert_int_equal(arc_memory_read(meminfo, g_dir, &m), 0);
    assert_int_equal(arc_default_max(&m), m.total / 2);
    /* No MemTotal, or no file: an error, nothing made up. */
    write_file("meminfo", "MemFree: 100 kB\n");
    assert_int_equal(arc_memory_read(meminfo, NULL, &m), -EINVAL);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none", g_dir);
    assert_int_equal(arc_memory_read(missing, NULL, &m), -ENOENT);
    /* This machine's own figures read. */
    assert_int_equal(arc_memory_read("/proc/meminfo", NULL, &m), 0);
    assert_true(m.total > 0 && m.available <= m.total);
    const char *names[] = {"meminfo", "memory.max", "memory.current", "memory.limit_in_bytes",
                           "memory.usage_in_bytes"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(g_dir);
}

static void test_set_target(void **state)
{
    (void)state;
    arc_set_max(512 * MIB);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.c, 512 * MIB);
    assert_int_equal(st.c_max, 512 * MIB);
    arc_set_target(100 * MIB);
    arc_get_stats(&st);
    assert_int_equal(st.c, 100 * MIB);
    assert_int_equal(st.c_max, 512 * MIB);
    assert_int_equal(arc_get_max(), 100 * MIB);
    cairn_bufpool_stats_t ps;
    cairn_bufpool_get_stats(&ps);
    assert_int_equal(ps.limit, 100 * MIB + 100 * MIB / 8);
    arc_set_target(4 * GIB); /* never past arc_max */
    arc_get_stats(&st);
    assert_int_equal(st.c, 512 * MIB);
    arc_set_target(0); /* nor under 1 MiB */
    assert_int_equal(arc_get_max(), CAIRN_MIB);
    arc_set_max(ARC_DEFAULT_MAX);
    assert_int_equal(arc_get_max(), ARC_DEFAULT_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_max),
        cmocka_unit_test(test_available_and_reserve),
        cmocka_unit_test(test_pressure_target),
        cmocka_unit_test(test_memory_read),
        cmocka_unit_test(test_set_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
