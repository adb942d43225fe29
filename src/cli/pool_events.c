/*
 * `cairn pool events [-f] [-c] [-H] [POOL]` and `cairn pool clear POOL [DEV]`:
 * the fault-management side of the pool commands.
 *
 * Events come from the daemon's bounded ring (src/spa/spa_events.c) in pages;
 * -f keeps asking for the ones after the last seen, each ask waiting a
 * moment in the daemon for the next, until interrupted - so a follower sees
 * an event as it is posted without polling fast.
 */
#include "cli.h"

#include <cairn/util.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long each ask of -f waits in the daemon for an event. */
#define EVENTS_FOLLOW_WAIT_MS 1000

static void print_event(const Cairn__Mgmt__PoolEvent *e, bool scripted)
{
    time_t s = (time_t)(e->time_ns / 1000000000ULL);
    struct tm tm;
    localtime_r(&s, &tm);
    char when[64];
    strftime(when, sizeof when, "%b %e %Y %H:%M:%S", &tm);
    if (scripted)
        printf("%s.%09llu\t%s\t%s\t%s\n", when, (unsigned long long)(e->time_ns % 1000000000ULL),
               e->eclass, e->pool, e->detail);
    else
        printf("%s.%09llu %-38s pool=%s %s\n", when,
               (unsigned long long)(e->time_ns % 1000000000ULL), e->eclass, e->pool, e->detail);
}

/* One ask; prints what came and returns how many, *after moved past them. */
static size_t events_page(const char *pool, uint64_t *after, uint32_t wait_ms, bool scripted)
{
    Cairn__Mgmt__PoolEvents m = CAIRN__MGMT__POOL_EVENTS__INIT;
    m.name = (char *)(pool ? pool : "");
    m.after = *after;
    m.wait_ms = wait_ms;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_EVENTS, &m);
    size_t n = 0;
    if (r->result_case == CAIRN__MGMT__RESPONSE__RESULT_EVENTS) {
        n = r->events->n_events;
        for (size_t i = 0; i < n; i++) print_event(r->events->events[i], scripted);
        *after = r->events->last;
    }
    cairn__mgmt__response__free_unpacked(r, NULL);
    fflush(stdout);
    return n;
}

int cmd_pool_events(int argc, char **argv)
{
    const char *what = "pool events";
    bool follow = false, clear = false, scripted = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":fcH", NULL, what)) != -1) {
        if (c == 'f') follow = true;
        if (c == 'c') clear = true;
        if (c == 'H') scripted = true;
    }
    want_args(argc, argv, 0, 1, what, "");
    const char *pool = optind < argc ? argv[optind] : NULL;
    if (pool) set_name(pool, what);
    if (clear && follow) fail("%s: -c and -f cannot be combined", what);
    if (clear) {
        Cairn__Mgmt__PoolEvents m = CAIRN__MGMT__POOL_EVENTS__INIT;
        m.name = (char *)(pool ? pool : "");
        m.clear = true;
        Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_EVENTS, &m);
        if (r->result_case == CAIRN__MGMT__RESPONSE__RESULT_EVENTS)
            printf("cleared %llu events\n", (unsigned long long)r->events->cleared);
        cairn__mgmt__response__free_unpacked(r, NULL);
        return 0;
    }
    if (!scripted) printf("%-30s %s\n", "TIME", "CLASS");
    uint64_t after = 0;
    /* Everything kept, page by page, then (-f) whatever comes. */
    while (events_page(pool, &after, 0, scripted) > 0) {
    }
    while (follow) events_page(pool, &after, EVENTS_FOLLOW_WAIT_MS, scripted);
    return 0;
}

int cmd_pool_clear(int argc, char **argv)
{
    const char *what = "pool clear";
    want_no_opts(argc, argv, what);
    const char *name = pool_args(argc, argv, 1, 2, what, "pool name");
    char buf[PATH_MAX + 64];
    const char *dev = optind + 1 < argc ? leaf_arg(argv[optind + 1], buf, sizeof buf, what) : "";
    Cairn__Mgmt__PoolClear cl = CAIRN__MGMT__POOL_CLEAR__INIT;
    cl.name = (char *)name;
    cl.device = (char *)dev;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_CLEAR, &cl);
    return 0;
}
