/*
 * `cairn pool history [-l] POOL`: the command lines cairnd recorded in the
 * pool's history (src/cairnd/history.c decides which requests are history;
 * the CLI sends its line with every request, client.c). The long form (-l)
 * adds who ran it where: user name, uid and host, as `zpool history -l`
 * does.
 */
#include "cli.h"

#include <cairn/util.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cmd_pool_history(int argc, char **argv)
{
    const char *what = "pool history";
    bool longform = flag_given(argc, argv, "+:l", NULL, what);
    const char *name = pool_args(argc, argv, 1, 1, what, "pool name");
    Cairn__Mgmt__PoolHistory ph = CAIRN__MGMT__POOL_HISTORY__INIT;
    ph.name = (char *)name;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_HISTORY, &ph);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_POOL_HISTORY || !r->pool_history)
        fail("%s: unexpected answer from cairnd", what);
    const Cairn__Mgmt__PoolHistoryResult *h = r->pool_history;
    printf("History for '%s':\n", name);
    for (size_t i = 0; i < h->n_entries; i++) {
        const Cairn__Mgmt__HistoryEntry *e = h->entries[i];
        time_t t = (time_t)e->time;
        struct tm tm;
        char when[32];
        localtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%d.%H:%M:%S", &tm);
        if (longform && e->info[0]) printf("%s %s [%s]\n", when, e->line, e->info);
        else printf("%s %s\n", when, e->line);
        /* Where older records were dropped: after the first, which is always kept. */
        if (i == 0 && h->dropped)
            printf("... %llu older records dropped (the history keeps 1 MiB) ...\n",
                   (unsigned long long)h->dropped);
    }
    fflush(stdout);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}
