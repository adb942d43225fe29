/*
 * `cairn iscsi ...`: targets, LUNs, access lists and CHAP of cairnd's iSCSI
 * target. The daemon checks names and states (it knows the pools); the CLI
 * checks the grammar. Every failure is one "cairn: ..." line and exit 1.
 *
 * Listings: `iscsi list` prints one row per LUN (a target without LUNs gets
 * one row with "-"), `iscsi target list` one row per target; -H, -p and
 * --json as for the other list commands. CHAP secrets never leave the
 * daemon: the CHAP column says "-", "set" or "mutual".
 */
#include <cairn/util.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* No options, then exactly n words (named by names). */
static void exact_words(int argc, char **argv, int n, const char *what, const char *names)
{
    reset_getopt();
    static const struct option none[] = {{0}};
    while (next_opt(argc, argv, ":", none, what) != -1) {
    }
    want_args(argc, argv, n, n, what, names);
}

/* The word after argv[0] (fail with missing when there is none), the words
 * shifted so that it becomes argv[0]. */
static const char *subcommand(int *argc, char ***argv, const char *missing)
{
    if (*argc < 2) fail("%s", missing);
    (*argc)--;
    (*argv)++;
    return (*argv)[0];
}

static uint32_t parse_lun(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v > 16383 || s[0] == '-')
        fail("%s: bad LUN '%s' (want 0 to 16383)", what, s);
    return (uint32_t)v;
}

static int cmd_target(int argc, char **argv)
{
    const char *sub = subcommand(&argc, &argv, "iscsi target: missing subcommand (create, destroy, list)");
    if (!strcmp(sub, "create")) {
        const char *what = "iscsi target create";
        exact_words(argc, argv, 1, what, "IQN");
        Cairn__Mgmt__IscsiTargetCreate m = CAIRN__MGMT__ISCSI_TARGET_CREATE__INIT;
        m.name = argv[optind];
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ISCSI_TARGET_CREATE, &m);
        return 0;
    }
    if (!strcmp(sub, "destroy")) {
        const char *what = "iscsi target destroy";
        Cairn__Mgmt__IscsiTargetDestroy m = CAIRN__MGMT__ISCSI_TARGET_DESTROY__INIT;
        static const struct option none[] = {{0}};
        m.force = flag_given(argc, argv, ":f", none, what);
        want_args(argc, argv, 1, 1, what, "IQN");
        m.name = argv[optind];
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ISCSI_TARGET_DESTROY, &m);
        return 0;
    }
    if (!strcmp(sub, "list")) return -2; /* handled by the listing below */
    fail("iscsi target: unknown subcommand '%s'", sub);
}

static void join(char *buf, size_t cap, char *const *items, size_t n, const char *none)
{
    buf[0] = '\0';
    if (!n) {
        cairn_strlcpy(buf, none, cap);
        return;
    }
    size_t len = 0;
    for (size_t i = 0; i < n && len + 1 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? "," : "", items[i]);
}

static int cmd_list(int argc, char **argv, bool targets_only)
{
    const char *what = targets_only ? "iscsi target list" : "iscsi list";
    list_opts_t lo = list_args(argc, argv, 0, 1, what, "", NULL);
    Cairn__Mgmt__IscsiList m = CAIRN__MGMT__ISCSI_LIST__INIT;
    if (optind < argc) m.name = argv[optind];
    Cairn__Mgmt__Response *resp = call_cmd(CAIRN__MGMT__REQUEST__CMD_ISCSI_LIST, &m);
    if (resp->result_case != CAIRN__MGMT__RESPONSE__RESULT_ISCSI_TARGETS)
        fail("unexpected answer from cairnd");
    Cairn__Mgmt__IscsiTargets *ts = resp->iscsi_targets;
    mgmt_table_t *tab;
    if (targets_only) {
        static const char *const h[] = {"TARGET", "LUNS", "ACL", "CHAP", "SESSIONS"};
        tab = mgmt_table_new(5, h, 1u << 1 | 1u << 4);
    } else {
        static const char *const h[] = {"TARGET", "LUN", "VOLUME", "ID", "ACL", "CHAP", "SESSIONS"};
        tab = mgmt_table_new(7, h, 1u << 1 | 1u << 6);
    }
    for (size_t i = 0; i < ts->n_targets; i++) {
        Cairn__Mgmt__IscsiTargetRow *t = ts->targets[i];
        char acl[4096], nl[16], ns[16];
        join(acl, sizeof acl, t->acl, t->n_acl, "any");
        snprintf(nl, sizeof nl, "%zu", t->n_luns);
        snprintf(ns, sizeof ns, "%zu", t->n_sessions);
        if (targets_only) {
            const char *cells[] = {t->name, nl, acl, t->chap, ns};
            mgmt_table_add_row(tab, cells);
            continue;
        }
        if (!t->n_luns) {
            const char *cells[] = {t->name, "-", "-", "-", acl, t->chap, ns};
            mgmt_table_add_row(tab, cells);
        }
        for (size_t k = 0; k < t->n_luns; k++) {
            Cairn__Mgmt__IscsiLunRow *l = t->luns[k];
            char lun[16], id[24];
            snprintf(lun, sizeof lun, "%u", l->lun);
            snprintf(id, sizeof id, "%016" PRIx64, l->lu_id);
            const char *cells[] = {t->name, lun, l->volume, id, acl, t->chap, ns};
            mgmt_table_add_row(tab, cells);
        }
    }
    table_print_free(tab, lo.mode, "iscsi");
    if (!targets_only && lo.mode != MGMT_OUT_JSON && lo.mode != MGMT_OUT_TABS) {
        for (size_t i = 0; i < ts->n_targets; i++)
            for (size_t k = 0; k < ts->targets[i]->n_sessions; k++) {
                Cairn__Mgmt__IscsiSessionRow *s = ts->targets[i]->sessions[k];
                printf("session: %s from %s to %s\n", s->initiator, s->peer, ts->targets[i]->name);
            }
    }
    cairn__mgmt__response__free_unpacked(resp, NULL);
    return 0;
}

int iscsi_command(int argc, char **argv)
{
    const char *sub = subcommand(&argc, &argv, "iscsi: missing subcommand (target, lun, acl, chap, list)");
    if (!strcmp(sub, "target")) {
        int rc = cmd_target(argc, argv);
        if (rc != -2) return rc;
        return cmd_list(argc - 1, argv + 1, true);
    }
    if (!strcmp(sub, "list")) return cmd_list(argc, argv, false);
    if (!strcmp(sub, "lun")) {
        const char *op = subcommand(&argc, &argv, "iscsi lun: missing subcommand (add, remove)");
        if (!strcmp(op, "add")) {
            const char *what = "iscsi lun add";
            Cairn__Mgmt__IscsiLunAdd m = CAIRN__MGMT__ISCSI_LUN_ADD__INIT;
            static const struct option lo[] = {{"lun", required_argument, NULL, 'l'}, {0}};
            int c;
            reset_getopt();
            while ((c = next_opt(argc, argv, ":", lo, what)) != -1)
                if (c == 'l') {
                    m.lun = parse_lun(optarg, what);
                    m.lun_given = true;
                }
            want_args(argc, argv, 2, 2, what, "IQN VOLUME");
            m.target = argv[optind];
            m.volume = argv[optind + 1];
            call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ISCSI_LUN_ADD, &m);
            return 0;
        }
        if (!strcmp(op, "remove")) {
            const char *what = "iscsi lun remove";
            exact_words(argc, argv, 2, what, "IQN LUN");
            Cairn__Mgmt__IscsiLunRemove m = CAIRN__MGMT__ISCSI_LUN_REMOVE__INIT;
            m.target = argv[optind];
            m.lun = parse_lun(argv[optind + 1], what);
            call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ISCSI_LUN_REMOVE, &m);
            return 0;
        }
        fail("iscsi lun: unknown subcommand '%s'", op);
    }
    if (!strcmp(sub, "acl")) {
        const char *op = subcommand(&argc, &argv, "iscsi acl: missing subcommand (add, remove)");
        if (strcmp(op, "add") && strcmp(op, "remove")) fail("iscsi acl: unknown subcommand '%s'", op);
        const char *what = !strcmp(op, "add") ? "iscsi acl add" : "iscsi acl remove";
        exact_words(argc, argv, 2, what, "IQN INITIATOR_IQN");
        Cairn__Mgmt__IscsiAcl m = CAIRN__MGMT__ISCSI_ACL__INIT;
        m.target = argv[optind];
        m.initiator = argv[optind + 1];
        m.remove = !strcmp(op, "remove");
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ISCSI_ACL, &m);
        return 0;
    }
    if (!strcmp(sub, "chap")) {
        const char *op = subcommand(&argc, &argv, "iscsi chap: missing subcommand (set, clear)");
        Cairn__Mgmt__IscsiChap m = CAIRN__MGMT__ISCSI_CHAP__INIT;
        if (!strcmp(op, "set")) {
            const char *what = "iscsi chap set";
            static const struct option lo[] = {{"mutual", no_argument, NULL, 'm'}, {0}};
            bool mutual = false;
            int c;
            reset_getopt();
            /* "+": options stop at the first word, so --mutual USER SECRET keeps its order. */
            while ((c = next_opt(argc, argv, "+:", lo, what)) != -1)
                if (c == 'm') mutual = true;
            /* IQN USER SECRET [--mutual USER SECRET] */
            int rest = argc - optind;
            if (!mutual && rest == 5 && !strcmp(argv[optind + 3], "--mutual")) fail("%s: --mutual needs USER SECRET", what);
            if (!mutual && rest == 6 && !strcmp(argv[optind + 3], "--mutual")) {
                mutual = true;
                m.mutual_user = argv[optind + 4];
                m.mutual_secret = argv[optind + 5];
                rest = 3;
            } else if (mutual) {
                fail("%s: usage: iscsi chap set IQN USER SECRET [--mutual USER SECRET]", what);
            }
            if (rest != 3) fail("%s: usage: iscsi chap set IQN USER SECRET [--mutual USER SECRET]", what);
            m.target = argv[optind];
            m.user = argv[optind + 1];
            m.secret = argv[optind + 2];
        } else if (!strcmp(op, "clear")) {
            const char *what = "iscsi chap clear";
            exact_words(argc, argv, 1, what, "IQN");
            m.target = argv[optind];
            m.clear = true;
        } else {
            fail("iscsi chap: unknown subcommand '%s'", op);
        }
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_ISCSI_CHAP, &m);
        return 0;
    }
    fail("iscsi: unknown subcommand '%s'", sub);
}
