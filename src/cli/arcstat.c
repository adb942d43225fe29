/*
 * `cairn arcstat [-v] [INTERVAL [COUNT]]`: the ARC's and L2ARC's counters, one
 * line per interval like arcstat(1). Without an interval one line of totals
 * since cairnd started; with one, the first line is totals and each later line
 * the rates over the interval (counters per second, sizes as they are). -v adds
 * the cache devices after the last line.
 *
 * Also the `cache DEV...` section of `pool create`: the devices are taken out
 * of the words before the vdev grammar sees them (mgmt_cachespec.c) and sent
 * as their resolved paths.
 */
#include "cli.h"

#include <cairn/util.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void cli_cache_section(int *argc, char **argv, Cairn__Mgmt__PoolCreate *pc, const char *what)
{
    char **devs;
    size_t n;
    char err[256];
    if (mgmt_cache_section_split(argc, argv, &devs, &n, err, sizeof err)) fail("%s: %s", what, err);
    if (!n) return;
    pc->cache_devices = cairn_zalloc(n * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        char buf[PATH_MAX];
        struct stat st;
        if (!realpath(devs[i], buf) || stat(buf, &st))
            fail("cannot open cache device '%s': %s", devs[i], strerror(errno));
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
            fail("'%s' is not a file or block device", devs[i]);
        pc->cache_devices[i] = cairn_strdup(buf);
    }
    pc->n_cache_devices = n;
    free(devs);
}

void cli_cache_section_free(Cairn__Mgmt__PoolCreate *pc)
{
    for (size_t i = 0; i < pc->n_cache_devices; i++) free(pc->cache_devices[i]);
    free(pc->cache_devices);
    pc->cache_devices = NULL;
    pc->n_cache_devices = 0;
}

static Cairn__Mgmt__Response *fetch(void)
{
    Cairn__Mgmt__ArcStat m = CAIRN__MGMT__ARC_STAT__INIT;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_ARC_STAT, &m);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_ARC_STATS)
        fail("arcstat: unexpected answer from cairnd");
    return r;
}

static void human(uint64_t v, char *buf, size_t len)
{
    if (v < 1024) snprintf(buf, len, "%llu", (unsigned long long)v);
    else cairn_format_size(v, buf, len);
}

static void header(void)
{
    printf("%8s %6s %6s %6s %4s %6s %6s %5s %5s %7s %7s %7s %7s %7s %6s %6s %6s %7s\n", "time",
           "read", "hit", "miss", "hit%", "mfuh", "mruh", "mrug", "mfug", "size", "c", "p",
           "cmax", "dsize", "l2read", "l2hit", "l2feed", "l2size");
}

/* One line: counters are deltas over secs (totals when prev is NULL). */
static void line(const Cairn__Mgmt__ArcStats *s, const Cairn__Mgmt__ArcStats *prev, double secs)
{
#define D(f) ((uint64_t)((prev ? (double)(s->f - prev->f) : (double)s->f) / (prev ? secs : 1.0)))
    uint64_t hits = D(hits), miss = D(misses), reads = hits + miss;
    char t[16], sz[5][16], a[8][16];
    time_t now = time(NULL);
    strftime(t, sizeof t, "%H:%M:%S", localtime(&now));
    human(s->size, sz[0], 16);
    human(s->c, sz[1], 16);
    human(s->p, sz[2], 16);
    human(s->decompressed_size, sz[3], 16);
    human(s->c_max, sz[4], 16); /* c is below it while memory is short */
    human(reads, a[0], 16);
    human(hits, a[1], 16);
    human(miss, a[2], 16);
    human(D(mfu_hits), a[3], 16);
    human(D(mru_hits), a[4], 16);
    human(D(l2_hits) + D(l2_misses), a[5], 16);
    human(D(l2_hits), a[6], 16);
    human(D(l2_feed_bytes), a[7], 16);
    char l2[16];
    human(s->l2_size, l2, sizeof l2);
    printf("%8s %6s %6s %6s %4u %6s %6s %5llu %5llu %7s %7s %7s %7s %7s %6s %6s %6s %7s\n", t,
           a[0], a[1], a[2], reads ? (unsigned)(hits * 100 / reads) : 0, a[3], a[4],
           (unsigned long long)D(mru_ghost_hits), (unsigned long long)D(mfu_ghost_hits), sz[0],
           sz[1], sz[2], sz[4], sz[3], a[5], a[6], a[7], l2);
    fflush(stdout);
#undef D
}

static void devices(const Cairn__Mgmt__ArcStats *s)
{
    printf("%-12s %-40s %-8s %8s %8s %8s %8s %8s %6s\n", "pool", "cache device", "state", "size",
           "alloc", "blocks", "reads", "writes", "errors");
    for (size_t i = 0; i < s->n_devices; i++) {
        const Cairn__Mgmt__CacheDevice *d = s->devices[i];
        char size[16], alloc[16];
        cairn_format_size(d->size, size, sizeof size);
        cairn_format_size(d->alloc, alloc, sizeof alloc);
        printf("%-12s %-40s %-8s %8s %8s %8llu %8llu %8llu %6llu\n", d->pool, d->path,
               d->online ? "ONLINE" : "REMOVED", size, alloc, (unsigned long long)d->entries,
               (unsigned long long)d->reads, (unsigned long long)d->writes,
               (unsigned long long)d->errors);
    }
}

static unsigned long parse_count(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v == 0 || v > 86400 * 365UL) fail("arcstat: bad %s '%s'", what, s);
    return v;
}

int cmd_arcstat(int argc, char **argv)
{
    bool verbose = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":v", NULL, "arcstat")) != -1)
        if (c == 'v') verbose = true;
    want_args(argc, argv, 0, 2, "arcstat", "[INTERVAL [COUNT]]");
    unsigned long interval = 0, count = 1;
    if (optind < argc) {
        interval = parse_count(argv[optind], "interval");
        count = optind + 1 < argc ? parse_count(argv[optind + 1], "count") : ULONG_MAX;
    }
    header();
    Cairn__Mgmt__Response *prev = fetch();
    line(prev->arc_stats, NULL, 1.0);
    for (unsigned long i = 1; i < count; i++) {
        sleep((unsigned)interval);
        Cairn__Mgmt__Response *cur = fetch();
        line(cur->arc_stats, prev->arc_stats, (double)interval);
        cairn__mgmt__response__free_unpacked(prev, NULL);
        prev = cur;
    }
    if (verbose) devices(prev->arc_stats);
    cairn__mgmt__response__free_unpacked(prev, NULL);
    return 0;
}
