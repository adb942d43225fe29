/*
 * The pool commands that map one to one on a request: `pool create`, `list`,
 * `status` (with the advice under the tree), `import`, `get`, `set` and the
 * simple ones (export, destroy, scrub...). The commands that change a pool's
 * vdevs are pool_admin.c; events and clear pool_events.c.
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

int cmd_pool_create(int argc, char **argv)
{
    const char *what = "pool create";
    Cairn__Mgmt__PoolCreate pc;
    cairn__mgmt__pool_create__init(&pc);
    Cairn__Mgmt__Property **props = NULL;
    size_t nprops = 0;
    int c;
    reset_getopt();
    /* '+': stop at the pool name, so vdev words are never taken for options. */
    while ((c = next_opt(argc, argv, "+:fo:", NULL, what)) != -1) {
        if (c == 'f') {
            pc.force = true;
        } else if (c == 'o') {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) fail("%s: bad property '%s' (want -o prop=value)", what, optarg);
            Cairn__Mgmt__Property *p = cairn_zalloc(sizeof *p);
            cairn__mgmt__property__init(p);
            *eq = '\0';
            p->name = optarg;
            p->value = eq + 1;
            props = cairn_realloc(props, sizeof(*props) * (nprops + 1));
            props[nprops++] = p;
        }
    }
    if (optind >= argc) fail("%s: missing pool name", what);
    const char *name = argv[optind++];
    set_name(name, what);
    if (optind >= argc) fail("%s: missing vdevs (PATH, mirror PATH..., raidzN PATH...)", what);
    spa_vdev_spec_t *root;
    char err[512];
    int nwords = argc - optind;
    cli_cache_section(&nwords, argv + optind, &pc, what); /* L2ARC: `cache DEV...` (arcstat.c) */
    cli_spare_section(&nwords, argv + optind, &pc.spares, &pc.n_spares, what);
    if (mgmt_vdev_spec_parse(nwords, argv + optind, &root, err, sizeof err))
        fail("%s: %s", what, err);
    char **seen = NULL, **given = NULL;
    size_t nseen = 0;
    resolve_leaves(root, &seen, &given, &nseen);

    pc.name = (char *)name;
    pc.root = spec_to_msg(root);
    pc.props = props;
    pc.n_props = nprops;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_CREATE, &pc);
    spec_msg_free(pc.root);
    cli_cache_section_free(&pc);
    cli_spare_section_free(pc.spares, pc.n_spares);
    mgmt_vdev_spec_free(root);
    for (size_t i = 0; i < nseen; i++) {
        free(seen[i]);
        free(given[i]);
    }
    free(seen);
    free(given);
    for (size_t i = 0; i < nprops; i++) free(props[i]);
    free(props);
    return 0;
}

/* ---------------------------------------------------------------- pool list */

int cmd_pool_list(int argc, char **argv)
{
    const char *what = "pool list";
    bool verbose = false;
    list_opts_t lo = list_args(argc, argv, 0, 1, what, "", &verbose);
    Cairn__Mgmt__PoolList pl;
    cairn__mgmt__pool_list__init(&pl);
    if (optind < argc) {
        set_name(argv[optind], what);
        pl.name = argv[optind];
    }
    Cairn__Mgmt__Response *r = call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_POOL_LIST, &pl,
                                               CAIRN__MGMT__RESPONSE__RESULT_POOL_LIST);
    bool exact = lo.exact || lo.mode == MGMT_OUT_JSON;
    /* EXPANDSZ last: scripts that cut the columns before it keep working. */
    static const char *const hdr[] = {"NAME", "SIZE", "ALLOC", "FREE", "CAP", "RATIO", "HEALTH",
                                      "EXPANDSZ"};
    mgmt_table_t *t = mgmt_table_new(8, hdr, 0xbe);
    for (size_t i = 0; i < r->pool_list->n_rows; i++) {
        Cairn__Mgmt__PoolRow *row = r->pool_list->rows[i];
        char size[32], alloc[32], freeb[32], cap[32];
        mgmt_format_size(row->size, exact, size, sizeof size);
        mgmt_format_size(row->alloc, exact, alloc, sizeof alloc);
        mgmt_format_size(row->free, exact, freeb, sizeof freeb);
        unsigned pct = row->size ? (unsigned)(row->alloc * 100 / row->size) : 0;
        snprintf(cap, sizeof cap, exact ? "%u" : "%u%%", pct);
        /* RATIO: the root dataset's compressratio; -p drops the "x" as zfs does. */
        char ratio[32];
        cairn_strlcpy(ratio, row->compressratio && row->compressratio[0] ? row->compressratio : "-",
                      sizeof ratio);
        size_t rl = strlen(ratio);
        if (exact && rl > 1 && ratio[rl - 1] == 'x') ratio[rl - 1] = '\0';
        char expand[32] = "-"; /* as zpool: a dash when nothing waits */
        if (row->expandsize || exact) mgmt_format_size(row->expandsize, exact, expand, sizeof expand);
        const char *cells[] = {row->name, size, alloc, freeb, cap, ratio, row->health, expand};
        mgmt_table_add_row(t, cells);
        if (verbose) cli_pool_list_vdevs(t, row->name, exact);
    }
    if (lo.mode == MGMT_OUT_HUMAN && mgmt_table_rows(t) == 0) printf("no pools available\n");
    else mgmt_table_print(t, stdout, lo.mode, "pools");
    mgmt_table_free(t);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

/* ---------------------------------------------------------------- pool status */

static void print_scan(const Cairn__Mgmt__ScrubStatus *s)
{
    mgmt_scan_t m = {0};
    if (s) {
        m = (mgmt_scan_t){.state = (int)s->state, .start_time = s->start_time,
                          .end_time = s->end_time, .now = s->now ? s->now : (uint64_t)time(NULL),
                          .to_examine = s->to_examine, .scanned = s->scanned,
                          .examined = s->examined, .repaired = s->repaired, .errors = s->errors,
                          .func = (int)s->func, .issued = s->issued,
                          .run_start = s->run_start, .run_scanned = s->run_scanned,
                          .run_examined = s->run_examined, .run_issued = s->run_issued,
                          .sequential = s->sequential};
    }
    char buf[1024];
    mgmt_scan_format(&m, buf, sizeof buf);
    fputs(buf, stdout);
}

/* One entry of the error log as zpool names it: "DATASET:/path" for a file,
 * "DATASET:<0xOBJ>" when no path is found (a volume's data, an object whose
 * name is gone), "<metadata>:<0xOBJ>" for the pool's own objects and
 * "<0xOBJSET>:<0xOBJ>" when the dataset is gone. */
static void error_name(const Cairn__Mgmt__DataError *e, char *buf, size_t len)
{
    if (!e->dataset[0] && e->objset == 0)
        snprintf(buf, len, "<metadata>:<0x%llx>", (unsigned long long)e->object);
    else if (!e->dataset[0])
        snprintf(buf, len, "<0x%llx>:<0x%llx>", (unsigned long long)e->objset,
                 (unsigned long long)e->object);
    else if (e->path[0])
        snprintf(buf, len, "%s:%s", e->dataset, e->path);
    else if (e->level < 0 || e->object == 0)
        snprintf(buf, len, "%s:<metadata>", e->dataset);
    else
        snprintf(buf, len, "%s:<0x%llx>", e->dataset, (unsigned long long)e->object);
}

static void print_errors(const Cairn__Mgmt__PoolStatusResult *p, bool verbose)
{
    if (p->error_count == 0) {
        printf("errors: No known data errors\n");
        return;
    }
    if (!verbose) {
        printf("errors: %llu data errors, use '-v' for a list\n",
               (unsigned long long)p->error_count);
        return;
    }
    printf("errors: Permanent errors have been detected in the following files:\n\n");
    /* One line per object (entries come sorted by object set, object, level,
     * block), with the byte ranges of it that are lost. */
    for (size_t i = 0; i < p->n_errors;) {
        const Cairn__Mgmt__DataError *e = p->errors[i];
        char name[4400];
        error_name(e, name, sizeof name);
        printf("        %s", name);
        const char *sep = "  (bytes ";
        size_t j = i;
        for (; j < p->n_errors && p->errors[j]->objset == e->objset &&
               p->errors[j]->object == e->object;
             j++) {
            const Cairn__Mgmt__DataError *x = p->errors[j];
            if (!x->length) continue;
            printf("%s0x%llx-0x%llx", sep, (unsigned long long)x->offset,
                   (unsigned long long)(x->offset + x->length - 1));
            if (x->level > 0) printf(" (indirect)");
            sep = ", ";
        }
        if (sep[0] == ',') putchar(')');
        putchar('\n');
        i = j;
    }
    if (p->error_count > p->n_errors)
        printf("        ... and %llu more\n", (unsigned long long)(p->error_count - p->n_errors));
}

static size_t tree_width(const Cairn__Mgmt__VdevStatus *v, size_t indent)
{
    size_t w = indent + strlen(v->name);
    for (size_t i = 0; i < v->n_children; i++) w = CAIRN_MAX(w, tree_width(v->children[i], indent + 2));
    return w;
}

static void print_tree(const Cairn__Mgmt__VdevStatus *v, size_t indent, size_t width, bool verbose)
{
    printf("\t%*s%-*s  %-8s %5llu %5llu %5llu", (int)indent, "", (int)(width - indent), v->name,
           v->state, (unsigned long long)v->read_errors, (unsigned long long)v->write_errors,
           (unsigned long long)v->checksum_errors);
    if (v->resilvering) printf("  (resilvering)");
    /* A leaf taken out (or kept in, DEGRADED) by fault management. */
    if (!v->n_children && (!strcmp(v->state, "FAULTED") || !strcmp(v->state, "DEGRADED")))
        printf("  too many errors");
    if (verbose && v->repaired_bytes) {
        char b[32];
        cairn_format_size(v->repaired_bytes, b, sizeof b);
        printf("  (repaired %s)", b);
    }
    putchar('\n');
    bool logs = false;
    for (size_t i = 0; i < v->n_children; i++) {
        if (v->children[i]->vclass && !strcmp(v->children[i]->vclass, "log")) logs = true;
        else print_tree(v->children[i], indent + 2, width, verbose);
    }
    /* Log devices hold no data: they come under their own heading, as in zpool. */
    if (logs) printf("\t%*slogs\n", (int)indent, "");
    for (size_t i = 0; logs && i < v->n_children; i++)
        if (v->children[i]->vclass && !strcmp(v->children[i]->vclass, "log"))
            print_tree(v->children[i], indent + 2, width, verbose);
}

/* Whether any vdev of the tree is in state st (or, st NULL, resilvering). */
static bool tree_has(const Cairn__Mgmt__VdevStatus *v, const char *st)
{
    if (st ? !strcmp(v->state, st) : v->resilvering) return true;
    for (size_t i = 0; i < v->n_children; i++)
        if (tree_has(v->children[i], st)) return true;
    return false;
}

/* Whether a leaf of the tree is in state st. */
static bool leaf_has(const Cairn__Mgmt__VdevStatus *v, const char *st)
{
    if (!v->n_children) return !strcmp(v->state, st);
    for (size_t i = 0; i < v->n_children; i++)
        if (leaf_has(v->children[i], st)) return true;
    return false;
}

/* zpool's advice for a pool that is not whole: what happened, what to do. */
static void print_advice(const Cairn__Mgmt__PoolStatusResult *p)
{
    if (!p->root) return;
    if (tree_has(p->root, NULL)) {
        printf("status: One or more devices is currently being resilvered.  The pool will\n"
               "\tcontinue to function, possibly in a degraded state.\n"
               "action: Wait for the resilver to complete.\n");
    } else if (tree_has(p->root, "OFFLINE")) {
        printf("status: One or more devices has been taken offline by the administrator.\n"
               "\tSufficient replicas exist for the pool to continue functioning in a\n"
               "\tdegraded state.\n"
               "action: Online the device using 'cairn pool online' or replace the device with\n"
               "\t'cairn pool replace'.\n");
    } else if (leaf_has(p->root, "FAULTED")) {
        printf("status: One or more devices are faulted in response to persistent errors.\n"
               "\tSufficient replicas exist for the pool to continue functioning in a\n"
               "\tdegraded state.\n"
               "action: Replace the faulted device, or use 'cairn pool clear' to mark the device\n"
               "\trepaired.\n");
    } else if (leaf_has(p->root, "DEGRADED")) {
        printf("status: One or more devices has experienced an unrecoverable error.  An\n"
               "\tattempt was made to correct the error.  Applications are unaffected.\n"
               "action: Determine if the device needs to be replaced, and clear the errors\n"
               "\tusing 'cairn pool clear' or replace the device with 'cairn pool replace'.\n");
    } else if (tree_has(p->root, "UNAVAIL") || tree_has(p->root, "FAULTED")) {
        printf("status: One or more devices could not be opened.  Sufficient replicas exist for\n"
               "\tthe pool to continue functioning in a degraded state.\n"
               "action: Attach the missing device: it is taken back by itself once it answers\n"
               "\t(or use 'cairn pool online'). Or replace it using 'cairn pool replace'.\n");
    }
}

int cmd_pool_status(int argc, char **argv)
{
    const char *what = "pool status";
    bool verbose = flag_given(argc, argv, ":v", NULL, what);
    want_args(argc, argv, 0, 1, what, "");
    Cairn__Mgmt__PoolStatus ps;
    cairn__mgmt__pool_status__init(&ps);
    if (optind < argc) {
        set_name(argv[optind], what);
        ps.name = argv[optind];
    }
    ps.verbose = verbose;
    Cairn__Mgmt__Response *r = call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_POOL_STATUS, &ps,
                                               CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS);
    if (r->pool_status->n_pools == 0) printf("no pools available\n");
    for (size_t i = 0; i < r->pool_status->n_pools; i++) {
        const Cairn__Mgmt__PoolStatusResult *p = r->pool_status->pools[i];
        if (i) putchar('\n');
        printf("  pool: %s\n", p->name);
        printf(" state: %s\n", p->state);
        if (verbose) printf("    id: %llu\n   txg: %llu\n", (unsigned long long)p->guid,
                            (unsigned long long)p->txg);
        if (strcmp(p->state, "FAULTED")) print_advice(p);
        /* A sequential rebuild's line, then the scrub that verifies it. */
        if (p->rebuild) print_scan(p->rebuild);
        print_scan(p->scrub);
        printf("config:\n\n");
        size_t w = p->root ? CAIRN_MAX(tree_width(p->root, 0), 4) : 4;
        for (size_t k = 0; k < p->n_cache; k++) w = CAIRN_MAX(w, tree_width(p->cache[k], 2));
        for (size_t k = 0; k < p->n_spares; k++) w = CAIRN_MAX(w, tree_width(p->spares[k], 2));
        printf("\t%-*s  %-8s %5s %5s %5s\n", (int)w, "NAME", "STATE", "READ", "WRITE", "CKSUM");
        if (p->root) print_tree(p->root, 0, w, verbose);
        /* L2ARC devices hold only copies: their own heading, as in zpool. */
        if (p->n_cache) printf("\tcache\n");
        for (size_t k = 0; k < p->n_cache; k++) print_tree(p->cache[k], 2, w, verbose);
        /* Hot spares: name and AVAIL or INUSE only, as zpool shows them. */
        if (p->n_spares) printf("\tspares\n");
        for (size_t k = 0; k < p->n_spares; k++)
            printf("\t  %-*s  %s\n", (int)(w - 2), p->spares[k]->name, p->spares[k]->state);
        putchar('\n');
        print_errors(p, verbose);
    }
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

/* ---------------------------------------------------------------- simple pool commands */

int cmd_pool_simple(int argc, char **argv)
{
    const char *sub = argv[0];
    char what[64];
    snprintf(what, sizeof what, "pool %s", sub);
    bool flag = flag_given(argc, argv, !strcmp(sub, "scrub") ? ":s" : ":f", NULL, what);
    char *name = (char *)pool_args(argc, argv, 1, 1, what, "pool name");
    if (!strcmp(sub, "export")) {
        Cairn__Mgmt__PoolExport ex = CAIRN__MGMT__POOL_EXPORT__INIT;
        ex.name = name;
        ex.force = flag;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_EXPORT, &ex);
    } else if (!strcmp(sub, "destroy")) {
        Cairn__Mgmt__PoolDestroy de = CAIRN__MGMT__POOL_DESTROY__INIT;
        de.name = name;
        de.force = flag;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_DESTROY, &de);
    } else {
        Cairn__Mgmt__PoolScrub sc = CAIRN__MGMT__POOL_SCRUB__INIT;
        sc.name = name;
        sc.stop = flag;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_SCRUB, &sc);
    }
    return 0;
}

/* ---------------------------------------------------------------- hostid */

/* `cairn hostid`: the id the daemon records in the pools it imports, as hostid(1) prints it. */
int cmd_hostid(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) fail("hostid: takes no arguments");
    Cairn__Mgmt__Ping ping = CAIRN__MGMT__PING__INIT;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_PING, &ping);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_PONG || !r->pong->hostid)
        fail("hostid: the daemon reports no host id");
    printf("%08x\n", r->pong->hostid);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

/* ---------------------------------------------------------------- pool import */

int cmd_pool_import(int argc, char **argv)
{
    const char *what = "pool import";
    Cairn__Mgmt__PoolImport pi;
    cairn__mgmt__pool_import__init(&pi);
    char **dirs = NULL;
    size_t ndirs = 0;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":d:fm", NULL, what)) != -1) {
        if (c == 'd') dirs = collect_dirs(dirs, &ndirs, optarg);
        else if (c == 'f') pi.force = true;
        else if (c == 'm') pi.missing_log = true;
    }
    want_args(argc, argv, 0, 1, what, "");
    if (optind < argc) {
        set_name(argv[optind], what);
        pi.name = argv[optind];
    }
    if (ndirs == 0) fail("%s: give -d DIR (where to look for devices; there is no default)", what);
    pi.dirs = dirs;
    pi.n_dirs = ndirs;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_IMPORT, &pi);
    if (!pi.name[0]) {
        if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_IMPORT_CANDIDATES)
            fail("unexpected response");
        Cairn__Mgmt__ImportCandidates *ic = r->import_candidates;
        if (ic->n_candidates == 0) {
            printf("no pools available to import\n");
        } else {
            static const char *const hdr[] = {"NAME", "GUID", "STATE", "TXG", "LEAVES"};
            mgmt_table_t *t = mgmt_table_new(5, hdr, 0x1a);
            for (size_t i = 0; i < ic->n_candidates; i++) {
                char guid[32], txg[32], nl[16];
                snprintf(guid, sizeof guid, "%llu", (unsigned long long)ic->candidates[i]->guid);
                snprintf(txg, sizeof txg, "%llu", (unsigned long long)ic->candidates[i]->txg);
                snprintf(nl, sizeof nl, "%u", ic->candidates[i]->nleaves_found);
                const char *cells[] = {ic->candidates[i]->name, guid, ic->candidates[i]->state,
                                       txg, nl};
                mgmt_table_add_row(t, cells);
            }
            table_print_free(t, MGMT_OUT_HUMAN, NULL);
        }
    }
    cairn__mgmt__response__free_unpacked(r, NULL);
    for (size_t i = 0; i < ndirs; i++) free(dirs[i]);
    free(dirs);
    return 0;
}

/* ---------------------------------------------------------------- pool get/set */

static bool is_size_prop(const char *n)
{
    return !strcmp(n, "size") || !strcmp(n, "alloc") || !strcmp(n, "free") ||
           !strcmp(n, "dirty_max") || !strcmp(n, "logregion") || !strcmp(n, "logused");
}

int cmd_pool_get(int argc, char **argv)
{
    const char *what = "pool get";
    list_opts_t lo = list_args(argc, argv, 1, 2, what, "property name (or 'all')", NULL);
    Cairn__Mgmt__PoolGet pg;
    cairn__mgmt__pool_get__init(&pg);
    char *list = cairn_strdup(argv[optind]);
    char **props = NULL;
    size_t n = 0;
    for (char *save, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        props = cairn_realloc(props, sizeof(char *) * (n + 1));
        props[n++] = tok;
    }
    if (n == 0) fail("%s: missing property name", what);
    pg.props = props;
    pg.n_props = n;
    if (optind + 1 < argc) {
        set_name(argv[optind + 1], what);
        pg.name = argv[optind + 1];
    }
    Cairn__Mgmt__Response *r =
        call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_POOL_GET, &pg, CAIRN__MGMT__RESPONSE__RESULT_PROPS);
    bool exact = lo.exact || lo.mode == MGMT_OUT_JSON;
    static const char *const hdr[] = {"NAME", "PROPERTY", "VALUE", "SOURCE"};
    mgmt_table_t *t = mgmt_table_new(4, hdr, exact ? 0x4 : 0);
    for (size_t i = 0; i < r->props->n_props; i++) {
        Cairn__Mgmt__Property *p = r->props->props[i];
        char val[64];
        const char *v = p->value;
        char *end;
        unsigned long long num = strtoull(v, &end, 10);
        if (!exact && is_size_prop(p->name) && *v && !*end) {
            cairn_format_size(num, val, sizeof val);
            v = val;
        }
        const char *cells[] = {p->target, p->name, v[0] ? v : "-", p->source};
        mgmt_table_add_row(t, cells);
    }
    table_print_free(t, lo.mode, "properties");
    cairn__mgmt__response__free_unpacked(r, NULL);
    free(props);
    free(list);
    return 0;
}

int cmd_pool_set(int argc, char **argv)
{
    const char *what = "pool set";
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, "+:", NULL, what)) != -1) {
    }
    want_args(argc, argv, 2, 2, what, "PROP=VALUE and pool name");
    char *eq = strchr(argv[optind], '=');
    if (!eq || eq == argv[optind]) fail("%s: bad assignment '%s' (want PROP=VALUE)", what, argv[optind]);
    *eq = '\0';
    set_name(argv[optind + 1], what);
    Cairn__Mgmt__PoolSet ps;
    cairn__mgmt__pool_set__init(&ps);
    ps.prop = argv[optind];
    ps.value = eq + 1;
    ps.name = argv[optind + 1];
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_SET, &ps);
    return 0;
}
