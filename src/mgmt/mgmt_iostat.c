/*
 * `pool iostat` rows: capacity and per-second I/O from two samples of a vdev's
 * cumulative counters.
 *
 * The daemon only ever reports counters since import; rates are the CLI's
 * business, as in zpool iostat: the first line divides by the time since the
 * pool was imported, every later one by the interval between its two samples.
 * A counter that went backwards (the pool was exported and imported between
 * two samples, so the counters restarted) yields the new value over the
 * interval rather than a huge unsigned difference.
 */
#include <cairn/mgmt.h>
#include <cairn/util.h>

#include <stdio.h>
#include <string.h>

static uint64_t delta(uint64_t prev, uint64_t cur) { return cur >= prev ? cur - prev : cur; }

static uint64_t per_second(uint64_t count, uint64_t dt_ns)
{
    if (!dt_ns) return 0;
    /* Rounded to the nearest whole unit; long double keeps 64-bit counts exact enough. */
    long double r = (long double)count * 1e9L / (long double)dt_ns;
    return (uint64_t)(r + 0.5L);
}

static void format_count(uint64_t n, bool exact, char *buf, size_t len)
{
    if (exact || n < 1000) {
        snprintf(buf, len, "%llu", (unsigned long long)n);
        return;
    }
    static const char units[] = "KMGTPE";
    double v = (double)n;
    int u = -1;
    while (v >= 1000.0 && u < 5) { v /= 1000.0; u++; }
    if (v < 10.0) snprintf(buf, len, "%.1f%c", v, units[u]);
    else snprintf(buf, len, "%.0f%c", v, units[u]);
}

void mgmt_iostat_cells(const mgmt_iostat_counters_t *prev, const mgmt_iostat_counters_t *cur,
                       uint64_t dt_ns, bool exact, bool has_space,
                       char cells[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL])
{
    static const mgmt_iostat_counters_t zero;
    if (!prev) prev = &zero;
    if (has_space) {
        mgmt_format_size(cur->alloc, exact, cells[0], MGMT_IOSTAT_CELL);
        mgmt_format_size(cur->size > cur->alloc ? cur->size - cur->alloc : 0, exact, cells[1],
                         MGMT_IOSTAT_CELL);
    } else {
        cairn_strlcpy(cells[0], "-", MGMT_IOSTAT_CELL);
        cairn_strlcpy(cells[1], "-", MGMT_IOSTAT_CELL);
    }
    format_count(per_second(delta(prev->reads, cur->reads), dt_ns), exact, cells[2],
                 MGMT_IOSTAT_CELL);
    format_count(per_second(delta(prev->writes, cur->writes), dt_ns), exact, cells[3],
                 MGMT_IOSTAT_CELL);
    mgmt_format_size(per_second(delta(prev->read_bytes, cur->read_bytes), dt_ns), exact, cells[4],
                     MGMT_IOSTAT_CELL);
    mgmt_format_size(per_second(delta(prev->write_bytes, cur->write_bytes), dt_ns), exact,
                     cells[5], MGMT_IOSTAT_CELL);
}
