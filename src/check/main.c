/*
 * cairn-check: the offline pool checker, a program of its own as zdb is.
 *
 *   cairn-check -d DIR [-d DIR]... POOL
 *
 * It runs the whole engine in this process on an exported pool, read-only:
 * every block is read and verified and the space maps are compared with what
 * the blocks reference (spa_check). It works with no daemon at all, which is
 * why it is not a request to cairnd; and it is a program apart from the `cairn`
 * CLI so that the CLI stays a thin client that links none of the engine.
 *
 * `cairn check` runs this program after refusing a pool the running daemon
 * holds (one that changes underneath a check gives a meaningless report);
 * run directly, cairn-check does not ask the daemon. It prints its report
 * whether or not the pool is clean and exits 0 only when it is. A failure is
 * one line on stderr named after the program as it was called (argv[0]):
 * `cairn check` calls it "cairn", so the CLI's contract ("cairn: ...") holds.
 */
#include <cairn/dsl.h>
#include <cairn/mgmt.h>
#include <cairn/util.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_prog = "cairn-check";

static void check_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void check_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cairn_vdie(g_prog, fmt, ap);
}

static void usage_fail(const char *why)
{
    check_fail("%s (usage: cairn-check -d DIR [-d DIR]... POOL)", why);
}

/* The search directories (absolute) and the pool, from the command line. */
typedef struct check_args {
    char **dirs;
    size_t ndirs;
    const char *pool;
} check_args_t;

static void parse_args(int argc, char **argv, check_args_t *a)
{
    int c;
    opterr = 0;
    while ((c = getopt(argc, argv, ":d:")) != -1) {
        if (c == ':') usage_fail("option '-d' needs a directory");
        if (c != 'd') usage_fail("unknown option");
        char real[PATH_MAX];
        if (!realpath(optarg, real))
            check_fail("cannot open search directory '%s': %s", optarg, strerror(errno));
        a->dirs = cairn_realloc(a->dirs, sizeof(char *) * (a->ndirs + 1));
        a->dirs[a->ndirs++] = cairn_strdup(real);
    }
    if (optind != argc - 1) usage_fail(optind == argc ? "give the pool name" : "one pool at a time");
    a->pool = argv[optind];
    char err[256];
    if (mgmt_pool_name_check(a->pool, err, sizeof err)) check_fail("%s", err);
    if (a->ndirs == 0) usage_fail("give -d DIR (where to look for the pool's devices)");
}

static void print_report(const char *pool, const spa_check_report_t *rep, bool clean)
{
    printf("pool:        %s\n", pool);
    printf("blocks:      %llu\n", (unsigned long long)rep->blocks);
    printf("referenced:  %llu\n", (unsigned long long)rep->bytes_referenced);
    printf("allocated:   %llu\n", (unsigned long long)rep->bytes_allocated);
    printf("leaked:      %llu\n", (unsigned long long)rep->leaked_bytes);
    printf("double:      %llu\n", (unsigned long long)rep->double_bytes);
    printf("bad blocks:  %llu\n", (unsigned long long)rep->bad_blocks);
    printf("gang blocks: %llu\n", (unsigned long long)rep->gang_blocks);
    printf("shared:      %llu\n", (unsigned long long)rep->brt_entries);
    printf("orphaned:    %llu\n", (unsigned long long)rep->brt_orphans);
    printf("result:      %s\n", clean ? "clean" : "ERRORS");
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0][0]) {
        const char *slash = strrchr(argv[0], '/');
        g_prog = slash ? slash + 1 : argv[0];
    }
    check_args_t a = {0};
    parse_args(argc, argv, &a);
    dsl_init();
    spa_check_report_t rep;
    memset(&rep, 0, sizeof rep);
    char err[512] = "";
    int rc = spa_check(a.pool, (const char *const *)a.dirs, a.ndirs, &rep, err, sizeof err);
    if (rc == 0 || rc == -EUCLEAN) print_report(a.pool, &rep, rc == 0);
    for (size_t i = 0; i < a.ndirs; i++) free(a.dirs[i]);
    free(a.dirs);
    if (rc) check_fail("check of '%s' failed: %s", a.pool, err[0] ? err : strerror(-rc));
    return 0;
}
