/*
 * `cairn share list [-H] [-p] [--json]`: what the NFS server exports, to whom
 * (the sharenfs options), over which NFS versions, and how many clients have
 * mounted each share.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static int cmd_share_list(int argc, char **argv)
{
    list_opts_t lo = list_args(argc, argv, 0, 0, "share list", "", NULL);
    Cairn__Mgmt__ShareList sl = CAIRN__MGMT__SHARE_LIST__INIT;
    Cairn__Mgmt__Response *r =
        call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_SHARE_LIST, &sl, CAIRN__MGMT__RESPONSE__RESULT_SHARES);
    static const char *const hdr[] = {"DATASET", "PATH", "OPTIONS", "VERSIONS", "CLIENTS"};
    mgmt_table_t *t = mgmt_table_new(5, hdr, 0x10);
    for (size_t i = 0; i < r->shares->n_rows; i++) {
        Cairn__Mgmt__ShareRow *row = r->shares->rows[i];
        char clients[32];
        snprintf(clients, sizeof clients, "%llu", (unsigned long long)row->clients);
        const char *cells[] = {row->dataset, row->path, row->options, row->versions, clients};
        mgmt_table_add_row(t, cells);
    }
    table_print_free(t, lo.mode, "shares");
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

int share_command(const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "share")) return -1;
    static const cli_verb_t verbs[] = {{"list", cmd_share_list}};
    return cli_run_group("share", "list", verbs, CLI_NVERBS(verbs), argc, argv);
}
