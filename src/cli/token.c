/*
 * `cairn token create [--read-only] NAME`, `cairn token list [-H] [-p] [--json]`,
 * `cairn token revoke NAME`: the API tokens of cairnd's HTTPS API. create
 * prints the new token on stdout, alone on its line, and this is the only time
 * it is shown (the daemon keeps a salted hash).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int cmd_token_create(int argc, char **argv)
{
    const char *what = "token create";
    static const struct option longopts[] = {{"read-only", no_argument, NULL, 'r'}, {0}};
    bool read_only = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":", longopts, what)) != -1)
        if (c == 'r') read_only = true;
    want_args(argc, argv, 1, 1, what, "NAME");
    Cairn__Mgmt__TokenCreate tc = CAIRN__MGMT__TOKEN_CREATE__INIT;
    tc.name = argv[optind];
    tc.read_only = read_only;
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_TOKEN_CREATE;
    req.token_create = &tc;
    Cairn__Mgmt__Response *r = call(&req);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_TOKENS || r->tokens->n_rows != 1)
        fail("unexpected response");
    printf("%s\n", r->tokens->rows[0]->secret);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

static int cmd_token_list(int argc, char **argv)
{
    const char *what = "token list";
    list_opts_t lo = {0};
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":Hp", g_list_longopts, what)) != -1) parse_list_opts(c, &lo);
    want_args(argc, argv, 0, 0, what, "");
    Cairn__Mgmt__TokenList tl = CAIRN__MGMT__TOKEN_LIST__INIT;
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_TOKEN_LIST;
    req.token_list = &tl;
    Cairn__Mgmt__Response *r = call(&req);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_TOKENS) fail("unexpected response");
    static const char *const hdr[] = {"NAME", "ROLE", "CREATED"};
    mgmt_table_t *t = mgmt_table_new(3, hdr, lo.exact ? 0x4 : 0);
    for (size_t i = 0; i < r->tokens->n_rows; i++) {
        const Cairn__Mgmt__TokenRow *row = r->tokens->rows[i];
        char created[32];
        time_t when = (time_t)row->created;
        struct tm tm;
        if (lo.exact) snprintf(created, sizeof created, "%llu", (unsigned long long)row->created);
        else strftime(created, sizeof created, "%Y-%m-%d %H:%M:%S", localtime_r(&when, &tm));
        const char *cells[] = {row->name, row->role, created};
        mgmt_table_add_row(t, cells);
    }
    mgmt_table_print(t, stdout, lo.mode, "tokens");
    mgmt_table_free(t);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

static int cmd_token_revoke(int argc, char **argv)
{
    const char *what = "token revoke";
    reset_getopt();
    while (next_opt(argc, argv, ":", NULL, what) != -1) {
    }
    want_args(argc, argv, 1, 1, what, "NAME");
    Cairn__Mgmt__TokenRevoke tr = CAIRN__MGMT__TOKEN_REVOKE__INIT;
    tr.name = argv[optind];
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_TOKEN_REVOKE;
    req.token_revoke = &tr;
    cairn__mgmt__response__free_unpacked(call(&req), NULL);
    return 0;
}

int token_command(const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "token")) return -1;
    if (argc < 2) fail("token: missing subcommand (create, list, revoke)");
    if (!strcmp(argv[1], "create")) return cmd_token_create(argc - 1, argv + 1);
    if (!strcmp(argv[1], "list")) return cmd_token_list(argc - 1, argv + 1);
    if (!strcmp(argv[1], "revoke")) return cmd_token_revoke(argc - 1, argv + 1);
    fail("token: unknown subcommand '%s' (create, list, revoke)", argv[1]);
}
