/* What the parts of the `cairn` CLI share (not a library contract). */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

#include <cairn/mgmt.h>
#include <cairn_mgmt.pb-c.h>

#include <getopt.h>
#include <stdbool.h>

extern const char *g_socket;

/* Prints "cairn: MESSAGE" (one line) on stderr and exits 1. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Sends req to cairnd and returns its response; exits through fail() on any error. */
Cairn__Mgmt__Response *call(const Cairn__Mgmt__Request *req);
/* call for the command cmd whose message is msg (of cmd's kind: the request's
 * one-of keeps every command's message in the same slot, cmd_case says which). */
Cairn__Mgmt__Response *call_cmd(Cairn__Mgmt__Request__CmdCase cmd, void *msg);
/* call_cmd, failing unless the answer is of the kind want. */
Cairn__Mgmt__Response *call_cmd_expect(Cairn__Mgmt__Request__CmdCase cmd, void *msg,
                                       Cairn__Mgmt__Response__ResultCase want);
/* call_cmd for a command that answers only success or failure. */
void call_cmd_simple(Cairn__Mgmt__Request__CmdCase cmd, void *msg);
/* The parts of call (client.c): a connection to cairnd (-1 when quiet and there is
 * none), and one exchange on it (allow_error: a failed command is returned, not fatal). */
int cli_connect(bool quiet);
Cairn__Mgmt__Response *cli_call_fd(int fd, const Cairn__Mgmt__Request *req, bool allow_error);
/* Appends arg, made absolute, to the search directories dirs (n of them). */
char **collect_dirs(char **dirs, size_t *n, const char *arg);

typedef struct list_opts {
    mgmt_out_mode_t mode;
    bool exact;
} list_opts_t;
enum { OPT_JSON = 1000 };
extern const struct option g_list_longopts[];   /* --json */
void parse_list_opts(int c, list_opts_t *lo);   /* -H, -p, --json */
/* The words of a list command with no options but those (and -v where verbose is not
 * NULL): the options, then between lo and hi positional words (want_args). */
list_opts_t list_args(int argc, char **argv, int lo, int hi, const char *what, const char *names,
                      bool *verbose);
/* Prints t in mode (JSON: under key) and frees it. */
void table_print_free(mgmt_table_t *t, mgmt_out_mode_t mode, const char *key);

/* A table of (sub)commands: the one named name runs on argc/argv (argv[0] is its name). */
typedef struct cli_verb {
    const char *name;
    int (*run)(int argc, char **argv);
} cli_verb_t;
/* Runs the verb named name; -1 when the table (n verbs) names none so. */
int cli_run_verb(const cli_verb_t *verbs, size_t n, const char *name, int argc, char **argv);
/* `GROUP SUB ...` (argv[0] is the group's word): runs the verb SUB, or fails naming
 * the group and its subcommands (names) when SUB is missing or unknown. */
int cli_run_group(const char *group, const char *names, const cli_verb_t *verbs, size_t n,
                  int argc, char **argv);
#define CLI_NVERBS(verbs) (sizeof(verbs) / sizeof((verbs)[0]))

/* getopt_long with one-line errors naming the command `what`. */
int next_opt(int argc, char **argv, const char *shortopts, const struct option *longopts,
             const char *what);
void reset_getopt(void);
/* Between lo and hi positional words left, or fail. */
void want_args(int argc, char **argv, int lo, int hi, const char *what, const char *names);
/* The options of a command whose only option is one flag (in shortopts or longopts):
 * whether it was given. */
bool flag_given(int argc, char **argv, const char *shortopts, const struct option *longopts,
                const char *what);
/* A command taking no options: fails on any (no long options either). */
void want_no_opts(int argc, char **argv, const char *what);
/* want_args, the first positional word a valid pool name (set_name), returned. */
const char *pool_args(int argc, char **argv, int lo, int hi, const char *what, const char *names);

/* Dataset commands (datasets.c): runs cmd and returns its exit code, or -1 when cmd
 * is not a dataset command. argv[0] is the command word. */
int dataset_command(const char *cmd, int argc, char **argv);
/* `cairn iscsi ...` (iscsi.c); argv[0] is "iscsi". */
int iscsi_command(int argc, char **argv);

/* The ARC (arcstat.c): `cairn arcstat [-v] [INTERVAL [COUNT]]`; and the `cache DEV...`
 * section of `pool create`, taken out of the words (*argc shrinks) into pc. */
int cmd_arcstat(int argc, char **argv);
void cli_cache_section(int *argc, char **argv, Cairn__Mgmt__PoolCreate *pc, const char *what);
void cli_cache_section_free(Cairn__Mgmt__PoolCreate *pc);

/* The prefix of a fault-injecting test leaf's path (vdev_leaf_open). */
#define CLI_FAULT_PREFIX "fault:"

/* Shared by the pool commands: a valid pool name, or fail (client.c). */
void set_name(const char *name, const char *what);
/* vdev_spec.c: a parsed layout as a request message, and its leaves made real paths
 * (refuses missing files and one device named twice). */
Cairn__Mgmt__VdevSpec *spec_to_msg(const spa_vdev_spec_t *s);
void spec_msg_free(Cairn__Mgmt__VdevSpec *m);
void resolve_leaves(spa_vdev_spec_t *s, char ***seen, char ***given, size_t *nseen);

/* pool.c (argv[0] is the subcommand; simple: export, destroy, scrub... named by sub). */
int cmd_pool_create(int argc, char **argv);
int cmd_pool_list(int argc, char **argv);
int cmd_pool_status(int argc, char **argv);
int cmd_pool_simple(int argc, char **argv);
int cmd_pool_import(int argc, char **argv);
int cmd_pool_get(int argc, char **argv);
int cmd_pool_set(int argc, char **argv);
/* `cairn check` (check.c): runs the offline checker, cairn-check (src/check/). */
int cmd_check(int argc, char **argv);

/* `pool add`, `pool remove`, `pool iostat` (pool_admin.c; argv[0] is the subcommand). */
int cmd_pool_add(int argc, char **argv);
/* A device path as the pool knows it (absolute, resolved when it exists), in buf or dev
 * (client.c). */
const char *leaf_arg(const char *dev, char *buf, size_t len, const char *what);
/* The command line sent with every request (client.c; cairnd records it in the
 * pool's history when the command changed the pool), and `pool history` (history.c). */
void cli_history_init(int argc, char **argv);
void cli_history_attach(Cairn__Mgmt__Request *req);
int cmd_pool_history(int argc, char **argv);
/* `pool list -v`: a row per vdev of pool under its pool's row (pool_admin.c). */
void cli_pool_list_vdevs(mgmt_table_t *t, const char *pool, bool exact);
int cmd_pool_remove(int argc, char **argv);
int cmd_pool_offline(int argc, char **argv); /* and online */
int cmd_pool_replace(int argc, char **argv);
int cmd_pool_wait(int argc, char **argv);
int cmd_pool_attach(int argc, char **argv); /* and detach */
int cmd_pool_iostat(int argc, char **argv);
/* The `spare DEV...` section of `pool create|add` (pool_spares.c): taken out of
 * the words (*argc shrinks), device paths resolved into *spares (malloc'd). */
void cli_spare_section(int *argc, char **argv, char ***spares, size_t *nspares, const char *what);
void cli_spare_section_free(char **spares, size_t n);
/* `pool events`, `pool clear` (pool_events.c; argv[0] is the subcommand). */
int cmd_pool_events(int argc, char **argv);
int cmd_pool_clear(int argc, char **argv);

/* `cairn share ...` (share.c): like dataset_command. */
int share_command(const char *cmd, int argc, char **argv);
/* `cairn token ...` (token.c): the HTTPS API's tokens; like dataset_command. */
int token_command(const char *cmd, int argc, char **argv);
/* `cairn user ...` (token.c); -1 when cmd is not "user". */
int user_command(const char *cmd, int argc, char **argv);
/* `cairn hostid` (pool.c). */
int cmd_hostid(int argc, char **argv);
/* `cairn analytics ...` (analytics.c): like dataset_command. */
int analytics_command(const char *cmd, int argc, char **argv);

#endif
