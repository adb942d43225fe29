/*
 * cairn: the administrator's command line. This file is its usage and the
 * dispatch of the command words; client.c what every command stands on.
 *
 * Almost every command is a thin client: parse and check the words locally,
 * turn them into one cairn.mgmt.Request, send it to cairnd over its admin
 * socket and print the Response. The checks done here are the cheap ones that
 * need no pool (grammar, pool names, device files that exist and are not
 * given twice after resolving links); device paths are made absolute here
 * because the daemon runs in "/". Everything that needs the devices' contents
 * is left to the engine in the daemon, which reports it as a one-line message.
 *
 * `cairn check` is the exception: it needs no daemon. It hands over to
 * cairn-check (src/check/), a program apart that runs the engine on an
 * exported pool, read-only, so that this CLI links none of the engine (check.c).
 *
 * Error contract (tests rely on it): on any failure exactly one line
 * "cairn: ..." on stderr and a non-zero exit; output goes to stdout only on
 * success (check prints its report either way).
 *
 * Import and check need -d: there is no default device directory. Scanning
 * /dev as zpool does would open every device node (some block on read), and
 * Cairn's pools are mostly files, so the administrator says where to look.
 */
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

static void usage(FILE *f)
{
    fputs("usage: cairn [--socket PATH] COMMAND ...\n"
          "  pool create [-f] [-o prop=val]... POOL VDEV...\n"
          "       VDEV: PATH | mirror PATH PATH... | raidz[1|2|3] PATH... | cache PATH... |\n"
          "             spare PATH...\n"
          "  pool list [-v] [-H] [-p] [--json] [POOL]\n"
          "  pool status [-v] [POOL]\n"
          "  pool export POOL\n"
          "  pool import -d DIR [-d DIR]... [-f] [-m] [POOL]\n"
          "  pool destroy POOL\n"
          "  pool scrub [-s] POOL\n"
          "  pool clear POOL [DEV]\n"
          "  pool events [-f] [-c] [-H] [POOL]\n"
          "  pool get [-H] [-p] [--json] PROP[,PROP...]|all [POOL]\n"
          "  pool set PROP=VALUE POOL\n"
          "  check -d DIR [-d DIR]... POOL   (offline, on an exported pool)\n"
          "  hostid                          (the daemon's host id, for multihost pools)\n"
          "  pool add [-f] [-n] POOL VDEV... [log VDEV...] [cache DEV...] [spare DEV...]\n"
          "  pool remove POOL DEV     (a log device, log mirror-N, cache device or spare)\n"
          "  pool offline [-t] POOL DEV | pool online [-e] POOL DEV\n"
          "  pool replace [-f] [-s] POOL OLD [NEW]\n"
          "  pool attach [-f] [-s] POOL EXISTING NEW | pool detach POOL DEV\n"
          "  pool wait [-t resilver|scrub] POOL\n"
          "  pool iostat [-v] [-H] [-p] [--json] [POOL] [INTERVAL [COUNT]]\n"
          "  pool history [-l] POOL\n"
          "  arcstat [-v] [INTERVAL [COUNT]]\n"
          "  create [-p] [-o prop=val]... FILESYSTEM\n"
          "  create [-p] [-s] [-b BLOCKSIZE] [-o prop=val]... -V SIZE VOLUME\n"
          "  destroy [-r] [-f] DATASET|SNAPSHOT\n"
          "  rename OLD NEW\n"
          "  list [-r] [-H] [-p] [--json] [-t TYPE[,TYPE...]] [-o COL[,COL...]] [DATASET]\n"
          "       TYPE: filesystem volume snapshot all\n"
          "  get [-r] [-H] [-p] [--json] [-o name,property,value,source] PROP[,PROP...]|all\n"
          "      DATASET...\n"
          "  set [-f] PROP=VALUE DATASET   (-f: shrink volsize)\n"
          "  inherit PROP DATASET\n"
          "  snapshot [-r] DATASET@NAME\n"
          "  rollback [-r] DATASET@NAME\n"
          "  clone [-o prop=val]... SNAPSHOT DATASET\n"
          "  share list [-H] [-p] [--json]\n"
          "  token create [--read-only] NAME | token list [-H] [-p] [--json] | token revoke NAME\n"
          "  user add [--read-only] NAME | user passwd NAME | user remove NAME\n"
          "  user list [-H] [-p] [--json]   (the password: asked on a terminal, else stdin's first line)\n"
          "  analytics list [-H] [-p] [--json]\n"
          "  analytics enable|disable STAT [--by DIM]\n"
          "  analytics show STAT [--by DIM] [-w SECS] [-r second|minute|hour] [-H] [-p] [--json]\n"
          "  analytics show STAT [--by DIM] -i SECS [COUNT]\n"
          "socket: --socket, else $CAIRN_SOCKET, else " CAIRN_DEFAULT_SOCKET "\n",
          f);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    g_socket = getenv(CAIRN_SOCKET_ENV);
    if (!g_socket || !*g_socket) g_socket = CAIRN_DEFAULT_SOCKET;
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (!strcmp(argv[i], "--socket")) {
            if (i + 1 >= argc) fail("option '--socket' needs an argument");
            g_socket = argv[i + 1];
            i += 2;
        } else if (!strncmp(argv[i], "--socket=", 9)) {
            g_socket = argv[i] + 9;
            i++;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("cairn %s\n", CAIRN_VERSION);
            return 0;
        } else {
            fail("unknown option '%s' (see cairn --help)", argv[i]);
        }
    }
    if (!*g_socket) fail("empty socket path");
    if (i >= argc) fail("missing command (see cairn --help)");
    const char *cmd = argv[i];
    cli_history_init(argc - i, argv + i);
    if (!strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "check")) return cmd_check(argc - i, argv + i);
    if (!strcmp(cmd, "hostid")) return cmd_hostid(argc - i, argv + i);
    if (!strcmp(cmd, "arcstat")) return cmd_arcstat(argc - i, argv + i);
    int dsret = dataset_command(cmd, argc - i, argv + i);
    if (dsret >= 0) return dsret;
    if (!strcmp(cmd, "iscsi")) return iscsi_command(argc - i, argv + i);
    if ((dsret = share_command(cmd, argc - i, argv + i)) >= 0) return dsret;
    if ((dsret = token_command(cmd, argc - i, argv + i)) >= 0) return dsret;
    if ((dsret = user_command(cmd, argc - i, argv + i)) >= 0) return dsret;
    if ((dsret = analytics_command(cmd, argc - i, argv + i)) >= 0) return dsret;
    if (strcmp(cmd, "pool")) fail("unknown command '%s' (see cairn --help)", cmd);
    static const cli_verb_t pool_verbs[] = {
        {"create", cmd_pool_create},   {"list", cmd_pool_list},       {"status", cmd_pool_status},
        {"import", cmd_pool_import},   {"get", cmd_pool_get},         {"set", cmd_pool_set},
        {"add", cmd_pool_add},         {"remove", cmd_pool_remove},   {"offline", cmd_pool_offline},
        {"online", cmd_pool_offline},  {"replace", cmd_pool_replace}, {"wait", cmd_pool_wait},
        {"attach", cmd_pool_attach},   {"detach", cmd_pool_attach},   {"iostat", cmd_pool_iostat},
        {"events", cmd_pool_events},   {"clear", cmd_pool_clear},     {"history", cmd_pool_history},
        {"export", cmd_pool_simple},   {"destroy", cmd_pool_simple},  {"scrub", cmd_pool_simple},
    };
    return cli_run_group("pool",
                         "create, list, status, iostat, export, import, destroy, scrub, clear, "
                         "events, history, get, set, add, remove, offline, online, replace, "
                         "attach, detach, wait",
                         pool_verbs, CLI_NVERBS(pool_verbs), argc - i, argv + i);
}
