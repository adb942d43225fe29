/*
 * `cairn check -d DIR... POOL`: the offline checker. Unlike every other
 * command it runs the engine in this process, on an exported pool, read-only,
 * so it works with no daemon at all; it refuses a pool the running daemon
 * holds, which would change underneath it. It prints its report whether or
 * not the pool is clean.
 */
#include <cairn/dsl.h>
#include <cairn/mgmt.h>
#include <cairn/util.h>
#include <cairn_mgmt.pb-c.h>

#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A pool the running daemon holds must not be checked: it changes underneath. */
static void refuse_if_imported(const char *name)
{
    int fd = cli_connect(true);
    if (fd < 0) return;
    Cairn__Mgmt__PoolList pl;
    cairn__mgmt__pool_list__init(&pl);
    pl.name = (char *)name;
    Cairn__Mgmt__Request req;
    cairn__mgmt__request__init(&req);
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_POOL_LIST;
    req.pool_list = &pl;
    Cairn__Mgmt__Response *r = cli_call_fd(fd, &req, true);
    close(fd);
    bool imported = r->error == 0;
    cairn__mgmt__response__free_unpacked(r, NULL);
    if (imported) fail("check: pool '%s' is imported by cairnd at %s; export it first", name, g_socket);
}

/* Kept reachable from a static: fail() exits from deep inside a command. */
static char **check_dirs;

int cmd_check(int argc, char **argv)
{
    const char *what = "check";
    char **dirs = NULL;
    size_t ndirs = 0;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":d:", NULL, what)) != -1)
        if (c == 'd') check_dirs = dirs = collect_dirs(dirs, &ndirs, optarg);
    want_args(argc, argv, 1, 1, what, "pool name");
    const char *name = argv[optind];
    set_name(name, what);
    if (ndirs == 0) fail("%s: give -d DIR (where to look for the pool's devices)", what);
    refuse_if_imported(name);
    dsl_init();
    spa_check_report_t rep;
    memset(&rep, 0, sizeof rep);
    char err[512] = "";
    int rc = spa_check(name, (const char *const *)dirs, ndirs, &rep, err, sizeof err);
    if (rc == 0 || rc == -EUCLEAN) {
        printf("pool:        %s\n", name);
        printf("blocks:      %llu\n", (unsigned long long)rep.blocks);
        printf("referenced:  %llu\n", (unsigned long long)rep.bytes_referenced);
        printf("allocated:   %llu\n", (unsigned long long)rep.bytes_allocated);
        printf("leaked:      %llu\n", (unsigned long long)rep.leaked_bytes);
        printf("double:      %llu\n", (unsigned long long)rep.double_bytes);
        printf("bad blocks:  %llu\n", (unsigned long long)rep.bad_blocks);
        printf("gang blocks: %llu\n", (unsigned long long)rep.gang_blocks);
        printf("result:      %s\n", rc == 0 ? "clean" : "ERRORS");
    }
    for (size_t i = 0; i < ndirs; i++) free(dirs[i]);
    free(dirs);
    if (rc) fail("check of '%s' failed: %s", name, err[0] ? err : strerror(-rc));
    return 0;
}
