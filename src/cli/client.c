/*
 * What every `cairn` command stands on: the one-line failure, the call to
 * cairnd over its admin socket (each request carrying the command line, which
 * cairnd records in the pool's history when the command changed the pool),
 * and the parsing of words common to the commands (options, pool names,
 * device paths, search directories).
 *
 * The command line is "cairn" and the words after the global options, quoted
 * when a word has blanks or quotes, so it reads as something one could type
 * again; the long form adds who ran it where (`pool history -l`).
 */
#include "cli.h"

#include <cairn/util.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

const char *g_socket;

void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cairn_vdie("cairn", fmt, ap);
}

static char g_line[4096];
static char g_info[256];

static void append_word(const char *w)
{
    size_t n = strlen(g_line);
    bool quote = !*w || strpbrk(w, " \t\n'\"\\$") != NULL;
    if (!quote) {
        snprintf(g_line + n, sizeof g_line - n, " %s", w);
        return;
    }
    /* Single quotes, with ' written as '\'' (the shell's way). */
    n += (size_t)snprintf(g_line + n, sizeof g_line - n, " '");
    for (const char *c = w; *c && n + 5 < sizeof g_line; c++) {
        if (*c == '\'') n += (size_t)snprintf(g_line + n, sizeof g_line - n, "'\\''");
        else g_line[n++] = *c == '\n' ? ' ' : *c;
    }
    g_line[n] = 0;
    snprintf(g_line + n, sizeof g_line - n, "'");
}

void cli_history_init(int argc, char **argv)
{
    cairn_strlcpy(g_line, "cairn", sizeof g_line);
    for (int i = 0; i < argc; i++) append_word(argv[i]);
    uid_t uid = getuid();
    struct passwd *pw = getpwuid(uid);
    char host[128] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    snprintf(g_info, sizeof g_info, "user %s (uid %u) on %s", pw ? pw->pw_name : "?",
             (unsigned)uid, host);
}

void cli_history_attach(Cairn__Mgmt__Request *req)
{
    req->history_line = g_line;
    req->history_info = g_info;
}

/* ---------------------------------------------------------------- transport */

int cli_connect(bool quiet)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(g_socket) >= sizeof sa.sun_path) {
        if (quiet) return -1;
        fail("socket path too long: %s", g_socket);
    }
    cairn_strlcpy(sa.sun_path, g_socket, sizeof sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        int e = errno;
        close(fd);
        if (quiet) return -1;
        fail("cannot connect to cairnd at %s: %s", g_socket, strerror(e));
    }
    return fd;
}

/* Sends req, returns the response (exits on transport or command failure). */
Cairn__Mgmt__Response *cli_call_fd(int fd, const Cairn__Mgmt__Request *orig, bool allow_error)
{
    Cairn__Mgmt__Request withline = *orig;
    cli_history_attach(&withline);
    const Cairn__Mgmt__Request *req = &withline;
    size_t len = cairn__mgmt__request__get_packed_size(req);
    uint8_t *buf = cairn_zalloc(len + 1);
    cairn__mgmt__request__pack(req, buf);
    int rc = mgmt_frame_send(fd, buf, len);
    free(buf);
    if (rc) fail("cannot send to cairnd at %s: %s", g_socket, strerror(-rc));
    uint8_t *in;
    size_t inlen;
    rc = mgmt_frame_recv(fd, &in, &inlen);
    if (rc == -ENOTCONN || rc == -EPROTO)
        fail("cairnd at %s closed the connection (did it crash? see its log)", g_socket);
    if (rc) fail("cannot read from cairnd at %s: %s", g_socket, strerror(-rc));
    Cairn__Mgmt__Response *resp = cairn__mgmt__response__unpack(NULL, inlen, in);
    free(in);
    if (!resp) fail("malformed response from cairnd at %s", g_socket);
    if (resp->error && !allow_error)
        fail("%s", resp->message && resp->message[0] ? resp->message : strerror(-resp->error));
    if (!resp->error && resp->warning && resp->warning[0]) fprintf(stderr, "cairn: warning: %s\n", resp->warning);
    return resp;
}

Cairn__Mgmt__Response *call(const Cairn__Mgmt__Request *req)
{
    int fd = cli_connect(false);
    Cairn__Mgmt__Response *r = cli_call_fd(fd, req, false);
    close(fd);
    return r;
}

Cairn__Mgmt__Response *call_cmd(Cairn__Mgmt__Request__CmdCase cmd, void *msg)
{
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    req.cmd_case = cmd;
    req.ping = msg; /* any member: they are one pointer slot */
    return call(&req);
}

Cairn__Mgmt__Response *call_cmd_expect(Cairn__Mgmt__Request__CmdCase cmd, void *msg,
                                       Cairn__Mgmt__Response__ResultCase want)
{
    Cairn__Mgmt__Response *r = call_cmd(cmd, msg);
    if (r->result_case != want) fail("unexpected response");
    return r;
}

void call_cmd_simple(Cairn__Mgmt__Request__CmdCase cmd, void *msg)
{
    cairn__mgmt__response__free_unpacked(call_cmd(cmd, msg), NULL);
}

int cli_run_verb(const cli_verb_t *verbs, size_t n, const char *name, int argc, char **argv)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(verbs[i].name, name)) return verbs[i].run(argc, argv);
    return -1;
}

int cli_run_group(const char *group, const char *names, const cli_verb_t *verbs, size_t n,
                  int argc, char **argv)
{
    if (argc < 2) fail("%s: missing subcommand (%s)", group, names);
    int rc = cli_run_verb(verbs, n, argv[1], argc - 1, argv + 1);
    if (rc < 0) fail("%s: unknown subcommand '%s' (%s)", group, argv[1], names);
    return rc;
}

/* ---------------------------------------------------------------- options */

/* getopt_long with our error messages; `what` names the command. */
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts,
                    const char *what)
{
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (c == '?') {
        if (optopt && optopt < 256) fail("%s: unknown option '-%c'", what, optopt);
        fail("%s: unknown option '%s'", what, argv[optind - 1]);
    }
    if (c == ':') fail("%s: option '%s' needs an argument", what, argv[optind - 1]);
    return c;
}

void reset_getopt(void)
{
    optind = 0; /* GNU: full re-initialisation */
    opterr = 0;
}

const struct option g_list_longopts[] = {{"json", no_argument, NULL, OPT_JSON}, {0}};

/* Exactly n positional words left, or fail naming the first surplus or the lack. */
void want_args(int argc, char **argv, int lo, int hi, const char *what, const char *names)
{
    int have = argc - optind;
    if (have < lo) fail("%s: missing %s", what, names);
    if (have > hi) fail("%s: unexpected argument '%s'", what, argv[optind + hi]);
}

bool flag_given(int argc, char **argv, const char *shortopts, const struct option *longopts,
                const char *what)
{
    bool given = false;
    reset_getopt();
    while (next_opt(argc, argv, shortopts, longopts, what) != -1) given = true;
    return given;
}

void want_no_opts(int argc, char **argv, const char *what)
{
    reset_getopt();
    while (next_opt(argc, argv, ":", NULL, what) != -1) {
    }
}

void set_name(const char *name, const char *what)
{
    char err[256];
    if (mgmt_pool_name_check(name, err, sizeof err)) fail("%s: %s", what, err);
}

const char *pool_args(int argc, char **argv, int lo, int hi, const char *what, const char *names)
{
    want_args(argc, argv, lo, hi, what, names);
    set_name(argv[optind], what);
    return argv[optind];
}

void parse_list_opts(int c, list_opts_t *lo)
{
    if (c == 'H') lo->mode = MGMT_OUT_TABS;
    else if (c == 'p') lo->exact = true;
    else if (c == OPT_JSON) lo->mode = MGMT_OUT_JSON;
}

list_opts_t list_args(int argc, char **argv, int lo, int hi, const char *what, const char *names,
                      bool *verbose)
{
    list_opts_t opts = {0};
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, verbose ? ":vHp" : ":Hp", g_list_longopts, what)) != -1) {
        if (c == 'v') *verbose = true;
        else parse_list_opts(c, &opts);
    }
    want_args(argc, argv, lo, hi, what, names);
    return opts;
}

void table_print_free(mgmt_table_t *t, mgmt_out_mode_t mode, const char *key)
{
    mgmt_table_print(t, stdout, mode, key);
    mgmt_table_free(t);
}

static char *abs_path(const char *p, const char *what)
{
    char buf[PATH_MAX];
    if (!realpath(p, buf)) fail("cannot open %s '%s': %s", what, p, strerror(errno));
    return cairn_strdup(buf);
}

char **collect_dirs(char **dirs, size_t *n, const char *arg)
{
    dirs = cairn_realloc(dirs, sizeof(char *) * (*n + 1));
    dirs[(*n)++] = abs_path(arg, "search directory");
    return dirs;
}

/* A device path as the pool knows it: absolute, resolved when it exists (a
 * removed disk file is named by the path it had). */
const char *leaf_arg(const char *dev, char *buf, size_t len, const char *what)
{
    if (!dev[0]) fail("%s: empty device name", what);
    /* A test's fault-injecting leaf: the file after the prefix is resolved. */
    size_t pre = strlen(CLI_FAULT_PREFIX);
    if (!strncmp(dev, CLI_FAULT_PREFIX, pre) && len > pre) {
        const char *file = leaf_arg(dev + pre, buf + pre, len - pre, what);
        if (file != buf + pre) snprintf(buf + pre, len - pre, "%s", file);
        memcpy(buf, CLI_FAULT_PREFIX, pre);
        return buf;
    }
    struct stat st;
    char real[PATH_MAX];
    if (stat(dev, &st) == 0 && realpath(dev, real)) {
        snprintf(buf, len, "%s", real);
        return buf;
    }
    if (dev[0] == '/') return dev;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) fail("%s: cannot resolve '%s': %s", what, dev, strerror(errno));
    snprintf(buf, len, "%s/%s", cwd, dev);
    return buf;
}
