/*
 * `cairn check -d DIR... POOL`: the offline checker. The checking itself is a
 * program apart, cairn-check (src/check/), which runs the engine on an exported
 * pool, read-only, and needs no daemon; keeping it apart keeps this CLI a thin
 * client that links none of the engine. What is done here first is what only a
 * client of cairnd can do: refuse a pool the running daemon holds, which would
 * change underneath the check. The words are checked here too, so a mistake
 * reads like every other command's.
 */
#include <cairn/mgmt.h>
#include <cairn/util.h>
#include <cairn_mgmt.pb-c.h>

#include "cli.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A pool the running daemon holds must not be checked: it changes underneath. */
static void refuse_if_imported(const char *name)
{
    int fd = cli_connect(true);
    if (fd < 0) return;
    Cairn__Mgmt__PoolList pl = CAIRN__MGMT__POOL_LIST__INIT;
    pl.name = (char *)name;
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_POOL_LIST;
    req.pool_list = &pl;
    Cairn__Mgmt__Response *r = cli_call_fd(fd, &req, true);
    close(fd);
    bool imported = r->error == 0;
    cairn__mgmt__response__free_unpacked(r, NULL);
    if (imported) fail("check: pool '%s' is imported by cairnd at %s; export it first", name, g_socket);
}

/* The checker installed beside this program (a build directory, or `cmake
 * --install`'s bin), else the first one on PATH. */
static void exec_checker(char **args) __attribute__((noreturn));
static void exec_checker(char **args)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char beside[PATH_MAX + 16];
        snprintf(beside, sizeof beside, "%s/cairn-check", dirname(self));
        if (access(beside, X_OK) == 0) execv(beside, args);
    }
    execvp("cairn-check", args);
    fail("check: cannot run cairn-check (installed beside cairn or on PATH): %s", strerror(errno));
}

int cmd_check(int argc, char **argv)
{
    const char *what = "check";
    char **dirs = NULL;
    size_t ndirs = 0;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":d:", NULL, what)) != -1)
        if (c == 'd') dirs = collect_dirs(dirs, &ndirs, optarg);
    const char *name = pool_args(argc, argv, 1, 1, what, "pool name");
    if (ndirs == 0) fail("%s: give -d DIR (where to look for the pool's devices)", what);
    refuse_if_imported(name);
    /* cairn-check -d DIR... POOL, the directories already made absolute; called
     * "cairn", its one-line errors read as this program's. */
    char **args = cairn_zalloc(sizeof(char *) * (2 * ndirs + 3));
    size_t k = 0;
    args[k++] = "cairn";
    for (size_t i = 0; i < ndirs; i++) {
        args[k++] = "-d";
        args[k++] = dirs[i];
    }
    args[k++] = (char *)name;
    fflush(stdout);
    exec_checker(args);
}
