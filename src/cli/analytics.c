/*
 * `cairn analytics list|enable|disable|show` (include/cairn/analytics.h).
 *
 *   list [-H] [-p] [--json]            the statistics, their drill-downs (* = on)
 *   enable STAT [--by DIM]             turn a statistic or one drill-down on
 *   disable STAT [--by DIM]            ... off
 *   show STAT [--by DIM] [-w SECS] [-r second|minute|hour] [-H] [-p] [--json]
 *                                      summed over the last SECS seconds (60)
 *   show STAT [--by DIM] -i SECS [COUNT]
 *                                      live: every SECS seconds the rates over
 *                                      them, COUNT times (forever without), as
 *                                      `pool iostat INTERVAL` does
 *
 * Every check of STAT and DIM is the daemon's (the REST API sends the same
 * requests), so the CLI and /api/v1/analytics refuse alike.
 */
#include "cli.h"

#include <cairn/util.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct option g_show_longopts[] = {
    {"by", required_argument, NULL, 'b'}, {"json", no_argument, NULL, OPT_JSON}, {0}};

static int cmd_list(int argc, char **argv)
{
    list_opts_t lo = list_args(argc, argv, 0, 0, "analytics list", "", NULL);
    Cairn__Mgmt__AnalyticsList m = CAIRN__MGMT__ANALYTICS_LIST__INIT;
    Cairn__Mgmt__Response *r = call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_ANALYTICS_LIST, &m,
                                               CAIRN__MGMT__RESPONSE__RESULT_ANALYTICS_STATS);
    static const char *const hdr[] = {"STATISTIC", "ENABLED", "DRILL-DOWNS (* on)", "DESCRIPTION"};
    mgmt_table_t *t = mgmt_table_new(4, hdr, 0);
    for (size_t i = 0; i < r->analytics_stats->n_stats; i++) {
        const Cairn__Mgmt__AnalyticsStatRow *s = r->analytics_stats->stats[i];
        char dims[256];
        size_t used = 0;
        dims[0] = '\0';
        for (size_t d = 0; d < s->n_dims && used < sizeof dims; d++) {
            bool on = false;
            for (size_t k = 0; k < s->n_dims_enabled; k++) on |= !strcmp(s->dims_enabled[k], s->dims[d]);
            used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%s%s", d ? "," : "",
                                     s->dims[d], on ? "*" : "");
        }
        const char *cells[] = {s->name, s->enabled ? "yes" : "no", dims, s->description};
        mgmt_table_add_row(t, cells);
    }
    table_print_free(t, lo.mode, "analytics");
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

/* `enable` and `disable`. */
static int cmd_switch(int argc, char **argv)
{
    bool on = !strcmp(argv[0], "enable");
    const char *what = on ? "analytics enable" : "analytics disable";
    const char *by = "";
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":", g_show_longopts, what)) != -1)
        if (c == 'b') by = optarg;
    want_args(argc, argv, 1, 1, what, "STAT");
    if (on) {
        Cairn__Mgmt__AnalyticsEnable m = CAIRN__MGMT__ANALYTICS_ENABLE__INIT;
        m.stat = argv[optind];
        m.by = (char *)by;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ANALYTICS_ENABLE, &m);
    } else {
        Cairn__Mgmt__AnalyticsDisable off = CAIRN__MGMT__ANALYTICS_DISABLE__INIT;
        off.stat = argv[optind];
        off.by = (char *)by;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ANALYTICS_DISABLE, &off);
    }
    return 0;
}

static unsigned long parse_number(const char *s, const char *what, const char *name,
                                  unsigned long max)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v == 0 || v > max) fail("%s: bad %s '%s'", what, name, s);
    return v;
}

static Cairn__Mgmt__Response *fetch(const char *stat, const char *by, uint32_t window,
                                    const char *res)
{
    Cairn__Mgmt__AnalyticsShow m = CAIRN__MGMT__ANALYTICS_SHOW__INIT;
    m.stat = (char *)stat;
    m.by = (char *)by;
    m.window = window;
    m.resolution = (char *)res;
    return call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_ANALYTICS_SHOW, &m,
                           CAIRN__MGMT__RESPONSE__RESULT_ANALYTICS);
}

static void rate(uint64_t v, double secs, char *buf, size_t len)
{
    snprintf(buf, len, "%.1f", secs > 0 ? (double)v / secs : 0.0);
}

/* The summed window as a table: NAME COUNT PER-SECOND (no --by: one "total" row). */
static void print_window(const Cairn__Mgmt__AnalyticsResult *a, const list_opts_t *lo)
{
    static const char *const hdr[] = {"NAME", "COUNT", "PER-SECOND"};
    mgmt_table_t *t = mgmt_table_new(3, hdr, 0x6);
    double secs = (double)(a->to - a->from);
    char count[32], per[32];
    if (!*a->by) {
        snprintf(count, sizeof count, "%llu", (unsigned long long)a->total);
        rate(a->total, secs, per, sizeof per);
        const char *cells[] = {"total", count, per};
        mgmt_table_add_row(t, cells);
    }
    for (size_t i = 0; i < a->n_values; i++) {
        snprintf(count, sizeof count, "%llu", (unsigned long long)a->values[i]->value);
        rate(a->values[i]->value, secs, per, sizeof per);
        const char *cells[] = {a->values[i]->name, count, per};
        mgmt_table_add_row(t, cells);
    }
    table_print_free(t, lo->mode, "analytics");
}

/* Live output: a line per interval without --by, a block with it. */
static void print_live(const Cairn__Mgmt__AnalyticsResult *a, unsigned long interval, bool first)
{
    char when[16], per[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
    if (!*a->by) {
        if (first) printf("%-8s %14s\n", "time", a->stat);
        rate(a->total, (double)interval, per, sizeof per);
        printf("%-8s %14s\n", when, per);
    } else {
        rate(a->total, (double)interval, per, sizeof per);
        printf("%s  %s %s/s by %s%s\n", when, a->stat, per, a->by,
               a->by_enabled ? "" : " (drill-down off: cairn analytics enable)");
        for (size_t i = 0; i < a->n_values; i++) {
            rate(a->values[i]->value, (double)interval, per, sizeof per);
            printf("  %-48s %12s\n", a->values[i]->name, per);
        }
    }
    fflush(stdout);
}

static int cmd_show(int argc, char **argv)
{
    const char *what = "analytics show";
    const char *by = "", *res = "";
    unsigned long window = 60, interval = 0;
    list_opts_t lo = {0};
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":Hpw:r:i:", g_show_longopts, what)) != -1) {
        if (c == 'b') by = optarg;
        else if (c == 'w') window = parse_number(optarg, what, "window", 366UL * 86400);
        else if (c == 'r') res = optarg;
        else if (c == 'i') interval = parse_number(optarg, what, "interval", 3600);
        else parse_list_opts(c, &lo);
    }
    want_args(argc, argv, 1, interval ? 2 : 1, what, interval ? "STAT [COUNT]" : "STAT");
    const char *stat = argv[optind];
    if (!interval) {
        Cairn__Mgmt__Response *r = fetch(stat, by, (uint32_t)window, res);
        print_window(r->analytics, &lo);
        cairn__mgmt__response__free_unpacked(r, NULL);
        return 0;
    }
    unsigned long count =
        optind + 1 < argc ? parse_number(argv[optind + 1], what, "count", ULONG_MAX) : ULONG_MAX;
    /* Checks the names before the first wait. */
    cairn__mgmt__response__free_unpacked(fetch(stat, by, 1, "second"), NULL);
    for (unsigned long i = 0; i < count; i++) {
        sleep((unsigned)interval);
        Cairn__Mgmt__Response *r = fetch(stat, by, (uint32_t)interval, "second");
        print_live(r->analytics, interval, i == 0);
        cairn__mgmt__response__free_unpacked(r, NULL);
    }
    return 0;
}

int analytics_command(const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "analytics")) return -1;
    static const cli_verb_t verbs[] = {
        {"list", cmd_list}, {"enable", cmd_switch}, {"disable", cmd_switch}, {"show", cmd_show}};
    return cli_run_group("analytics", "list, enable, disable, show", verbs, CLI_NVERBS(verbs), argc,
                         argv);
}
