/*
 * `cairn token create [--read-only] NAME`, `cairn token list [-H] [-p] [--json]`,
 * `cairn token revoke NAME`: the API tokens of cairnd's HTTPS API. create
 * prints the new token on stdout, alone on its line, and this is the only time
 * it is shown (the daemon keeps a salted hash).
 *
 * `cairn user add [--read-only] NAME`, `user passwd NAME`, `user remove NAME`,
 * `user list`: the people who log in to the web UI. The password is never an
 * argument (it would show in ps and in shell history): on a terminal it is
 * asked twice without echo, otherwise it is the first line of stdin, so
 * scripts can pipe it in.
 */
#include "cli.h"

#include <cairn/mgmt_token.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static int cmd_token_create(int argc, char **argv)
{
    const char *what = "token create";
    static const struct option longopts[] = {{"read-only", no_argument, NULL, 'r'}, {0}};
    bool read_only = flag_given(argc, argv, ":", longopts, what);
    want_args(argc, argv, 1, 1, what, "NAME");
    Cairn__Mgmt__TokenCreate tc = CAIRN__MGMT__TOKEN_CREATE__INIT;
    tc.name = argv[optind];
    tc.read_only = read_only;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_TOKEN_CREATE, &tc);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_TOKENS || r->tokens->n_rows != 1)
        fail("unexpected response");
    printf("%s\n", r->tokens->rows[0]->secret);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

/* The rows of `token list` and `user list`: NAME ROLE CREATED. */
static void print_credentials(const Cairn__Mgmt__TokenRows *rows, const list_opts_t *lo,
                              const char *what)
{
    static const char *const hdr[] = {"NAME", "ROLE", "CREATED"};
    mgmt_table_t *t = mgmt_table_new(3, hdr, lo->exact ? 0x4 : 0);
    for (size_t i = 0; i < rows->n_rows; i++) {
        const Cairn__Mgmt__TokenRow *row = rows->rows[i];
        char created[32];
        time_t when = (time_t)row->created;
        struct tm tm;
        if (lo->exact) snprintf(created, sizeof created, "%llu", (unsigned long long)row->created);
        else strftime(created, sizeof created, "%Y-%m-%d %H:%M:%S", localtime_r(&when, &tm));
        const char *cells[] = {row->name, row->role, created};
        mgmt_table_add_row(t, cells);
    }
    table_print_free(t, lo->mode, what);
}

/* `token list` and `user list` (users). */
static int cmd_credential_list(int argc, char **argv, bool users)
{
    list_opts_t lo = list_args(argc, argv, 0, 0, users ? "user list" : "token list", "", NULL);
    Cairn__Mgmt__TokenList tl = CAIRN__MGMT__TOKEN_LIST__INIT;
    Cairn__Mgmt__UserList ul = CAIRN__MGMT__USER_LIST__INIT;
    Cairn__Mgmt__Response *r =
        users ? call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_USER_LIST, &ul, CAIRN__MGMT__RESPONSE__RESULT_USERS)
              : call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_TOKEN_LIST, &tl, CAIRN__MGMT__RESPONSE__RESULT_TOKENS);
    print_credentials(users ? r->users : r->tokens, &lo, users ? "users" : "tokens");
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

static int cmd_token_list(int argc, char **argv) { return cmd_credential_list(argc, argv, false); }
static int cmd_user_list(int argc, char **argv) { return cmd_credential_list(argc, argv, true); }

static int cmd_token_revoke(int argc, char **argv)
{
    const char *what = "token revoke";
    want_no_opts(argc, argv, what);
    want_args(argc, argv, 1, 1, what, "NAME");
    Cairn__Mgmt__TokenRevoke tr = CAIRN__MGMT__TOKEN_REVOKE__INIT;
    tr.name = argv[optind];
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_TOKEN_REVOKE, &tr);
    return 0;
}

int token_command(const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "token")) return -1;
    static const cli_verb_t verbs[] = {
        {"create", cmd_token_create}, {"list", cmd_token_list}, {"revoke", cmd_token_revoke}};
    return cli_run_group("token", "create, list, revoke", verbs, CLI_NVERBS(verbs), argc, argv);
}

/* ------------------------------------------------------------------ users */

/* One line from f without its newline; NULL at end of input. */
static char *read_line(FILE *f, char *buf, size_t len)
{
    if (!fgets(buf, (int)len, f)) return NULL;
    size_t n = strlen(buf);
    if (n && buf[n - 1] == '\n') buf[--n] = '\0';
    else if (n == len - 1) fail("password longer than %zu bytes", len - 2);
    return buf;
}

/* Asks on the terminal with echo off. */
static void ask(const char *prompt, char *buf, size_t len)
{
    FILE *tty = fopen("/dev/tty", "r+");
    if (!tty) fail("cannot open the terminal: %s", strerror(errno));
    struct termios old, quiet;
    tcgetattr(fileno(tty), &old);
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    fputs(prompt, tty);
    fflush(tty);
    tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
    char *got = read_line(tty, buf, len);
    tcsetattr(fileno(tty), TCSAFLUSH, &old);
    fputc('\n', tty);
    fclose(tty);
    if (!got) fail("no password given");
}

static void read_password(char *buf, size_t len)
{
    if (isatty(STDIN_FILENO)) {
        char again[MGMT_PASSWORD_MAX + 2];
        ask("New password: ", buf, len);
        ask("Again: ", again, sizeof again);
        if (strcmp(buf, again)) fail("the passwords do not match; nothing changed");
        return;
    }
    if (!read_line(stdin, buf, len)) fail("no password on stdin (give it as the first line)");
}

/* `user add [--read-only] NAME`, `user passwd NAME`, `user remove NAME`: one name,
 * and a password for add and passwd. */
static int cmd_user_change(int argc, char **argv)
{
    const char *sub = argv[0];
    char what[32];
    snprintf(what, sizeof what, "user %s", sub);
    static const struct option add_opts[] = {{"read-only", no_argument, NULL, 'r'}, {0}};
    bool add = !strcmp(sub, "add"), remove = !strcmp(sub, "remove");
    bool read_only = flag_given(argc, argv, ":", add ? add_opts : NULL, what);
    want_args(argc, argv, 1, 1, what, "NAME");
    char password[MGMT_PASSWORD_MAX + 2] = "";
    if (!remove) read_password(password, sizeof password);
    Cairn__Mgmt__UserAdd ua = CAIRN__MGMT__USER_ADD__INIT;
    Cairn__Mgmt__UserPasswd up = CAIRN__MGMT__USER_PASSWD__INIT;
    Cairn__Mgmt__UserRemove ur = CAIRN__MGMT__USER_REMOVE__INIT;
    if (add) {
        ua.name = argv[optind];
        ua.read_only = read_only;
        ua.password = password;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_USER_ADD, &ua);
    } else if (remove) {
        ur.name = argv[optind];
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_USER_REMOVE, &ur);
    } else {
        up.name = argv[optind];
        up.password = password;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_USER_PASSWD, &up);
    }
    return 0;
}

int user_command(const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "user")) return -1;
    static const cli_verb_t verbs[] = {{"add", cmd_user_change},
                                       {"passwd", cmd_user_change},
                                       {"remove", cmd_user_change},
                                       {"list", cmd_user_list}};
    return cli_run_group("user", "add, passwd, remove, list", verbs, CLI_NVERBS(verbs), argc, argv);
}
