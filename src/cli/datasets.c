/*
 * The dataset commands of the `cairn` CLI, in the grammar of zfs(8):
 * create, destroy, rename, list, get, set, inherit, snapshot, rollback, clone.
 *
 * As for pools, the CLI checks what needs no pool (option grammar, dataset
 * names, sizes, -t and -o words) and the daemon's dataset layer checks the
 * rest; either way a failure is one "cairn: ..." line and a non-zero exit.
 * Property names go over the wire canonical ("avail" becomes "available"),
 * so the daemon knows only the real names.
 *
 * Output: `list` and `get` print aligned columns, -H tab-separated rows
 * without a header, -p exact numbers, --json one document whose keys are the
 * property names (always exact numbers, as `pool list --json` does).
 */
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static void check_name(const char *name, unsigned allowed, const char *what)
{
    char err[512];
    if (mgmt_dataset_name_check(name, allowed, err, sizeof err)) fail("%s: %s", what, err);
}

/* -o name=value into a Property list (pointers into argv). */
typedef struct prop_vec {
    Cairn__Mgmt__Property **v;
    size_t n;
} prop_vec_t;

static void prop_vec_add(prop_vec_t *pv, char *arg, const char *what)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg) fail("%s: bad property '%s' (want -o prop=value)", what, arg);
    *eq = '\0';
    for (size_t i = 0; i < pv->n; i++)
        if (!strcmp(pv->v[i]->name, mgmt_prop_canonical(arg)))
            fail("%s: property '%s' given more than once", what, arg);
    Cairn__Mgmt__Property *p = cairn_zalloc(sizeof *p);
    cairn__mgmt__property__init(p);
    p->name = (char *)mgmt_prop_canonical(arg);
    p->value = eq + 1;
    pv->v = cairn_realloc(pv->v, sizeof *pv->v * (pv->n + 1));
    pv->v[pv->n++] = p;
}

static void prop_vec_free(prop_vec_t *pv)
{
    for (size_t i = 0; i < pv->n; i++) free(pv->v[i]);
    free(pv->v);
}

static uint64_t parse_size_arg(const char *s, const char *what, const char *which)
{
    uint64_t v;
    int rc = mgmt_parse_size(s, &v);
    if (rc == -ERANGE) fail("%s: %s '%s' is too large", what, which, s);
    if (rc) fail("%s: bad %s '%s' (want a size like 8K, 512M, 1G)", what, which, s);
    return v;
}

/* ---------------------------------------------------------------- create */

static int cmd_create(int argc, char **argv)
{
    const char *what = "create";
    Cairn__Mgmt__DatasetCreate dc;
    cairn__mgmt__dataset_create__init(&dc);
    prop_vec_t pv = {0};
    bool have_b = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":po:sb:V:", NULL, what)) != -1) {
        switch (c) {
        case 'p': dc.parents = true; break;
        case 's': dc.sparse = true; break;
        case 'o': prop_vec_add(&pv, optarg, what); break;
        case 'V':
            dc.volume = true;
            dc.volsize = parse_size_arg(optarg, what, "volume size");
            if (dc.volsize == 0) fail("%s: volume size must be greater than zero", what);
            break;
        case 'b': {
            uint64_t b = parse_size_arg(optarg, what, "block size");
            if (b > UINT32_MAX) fail("%s: block size '%s' is too large", what, optarg);
            dc.volblocksize = (uint32_t)b;
            have_b = true;
            break;
        }
        }
    }
    if (!dc.volume && dc.sparse) fail("%s: -s is only for volumes (-V SIZE)", what);
    if (!dc.volume && have_b) fail("%s: -b is only for volumes (-V SIZE)", what);
    want_args(argc, argv, 1, 1, what, "dataset name");
    dc.name = argv[optind];
    check_name(dc.name, MGMT_DSNAME_DATASET, what);
    dc.props = pv.v;
    dc.n_props = pv.n;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_CREATE, &dc);
    prop_vec_free(&pv);
    return 0;
}

/* ---------------------------------------------------------------- destroy, rename, snapshot, rollback */

static int cmd_destroy(int argc, char **argv)
{
    const char *what = "destroy";
    Cairn__Mgmt__DatasetDestroy dd;
    cairn__mgmt__dataset_destroy__init(&dd);
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":rf", NULL, what)) != -1) {
        if (c == 'r') dd.recursive = true;
        else if (c == 'f') dd.force = true;
    }
    want_args(argc, argv, 1, 1, what, "dataset or snapshot name");
    dd.name = argv[optind];
    check_name(dd.name, MGMT_DSNAME_ANY, what);
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_DESTROY, &dd);
    return 0;
}

static int cmd_rename(int argc, char **argv)
{
    const char *what = "rename";
    want_no_opts(argc, argv, what);
    want_args(argc, argv, 2, 2, what, "old and new names");
    Cairn__Mgmt__DatasetRename dr;
    cairn__mgmt__dataset_rename__init(&dr);
    dr.old_name = argv[optind];
    dr.new_name = argv[optind + 1];
    check_name(dr.old_name, MGMT_DSNAME_ANY, what);
    check_name(dr.new_name, strchr(dr.old_name, '@') ? MGMT_DSNAME_SNAPSHOT : MGMT_DSNAME_DATASET,
               what);
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_RENAME, &dr);
    return 0;
}

/* `snapshot` (or `snap`) and `rollback`. */
static int cmd_snapshot(int argc, char **argv)
{
    bool rollback = !strcmp(argv[0], "rollback");
    const char *what = rollback ? "rollback" : "snapshot";
    bool flag = flag_given(argc, argv, ":r", NULL, what);
    want_args(argc, argv, 1, 1, what, "snapshot name (DATASET@NAME)");
    char *name = argv[optind];
    check_name(name, MGMT_DSNAME_SNAPSHOT, what);
    if (rollback) {
        Cairn__Mgmt__DatasetRollback rb = CAIRN__MGMT__DATASET_ROLLBACK__INIT;
        rb.name = name;
        rb.destroy_newer = flag;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_ROLLBACK, &rb);
    } else {
        Cairn__Mgmt__DatasetSnapshot sn = CAIRN__MGMT__DATASET_SNAPSHOT__INIT;
        sn.name = name;
        sn.recursive = flag;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_SNAPSHOT, &sn);
    }
    return 0;
}

static int cmd_clone(int argc, char **argv)
{
    const char *what = "clone";
    prop_vec_t pv = {0};
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":o:", NULL, what)) != -1)
        if (c == 'o') prop_vec_add(&pv, optarg, what);
    want_args(argc, argv, 2, 2, what, "snapshot and new dataset name");
    Cairn__Mgmt__DatasetClone dc;
    cairn__mgmt__dataset_clone__init(&dc);
    dc.snapshot = argv[optind];
    dc.name = argv[optind + 1];
    check_name(dc.snapshot, MGMT_DSNAME_SNAPSHOT, what);
    check_name(dc.name, MGMT_DSNAME_DATASET, what);
    dc.props = pv.v;
    dc.n_props = pv.n;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_CLONE, &dc);
    prop_vec_free(&pv);
    return 0;
}

/* ---------------------------------------------------------------- set, inherit */

static int cmd_set(int argc, char **argv)
{
    const char *what = "set";
    bool force = flag_given(argc, argv, "+:f", NULL, what);
    want_args(argc, argv, 2, 2, what, "PROP=VALUE and dataset name");
    char *eq = strchr(argv[optind], '=');
    if (!eq || eq == argv[optind])
        fail("%s: bad assignment '%s' (want PROP=VALUE)", what, argv[optind]);
    *eq = '\0';
    Cairn__Mgmt__DatasetSet ds;
    cairn__mgmt__dataset_set__init(&ds);
    ds.prop = (char *)mgmt_prop_canonical(argv[optind]);
    ds.value = eq + 1;
    ds.name = argv[optind + 1];
    ds.force = force;
    check_name(ds.name, MGMT_DSNAME_ANY, what);
    if (force && strcmp(ds.prop, "volsize"))
        fail("%s: -f applies to volsize only (a shrink that destroys data)", what);
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_SET, &ds);
    return 0;
}

static int cmd_inherit(int argc, char **argv)
{
    const char *what = "inherit";
    want_no_opts(argc, argv, what);
    want_args(argc, argv, 2, 2, what, "property and dataset name");
    if (strchr(argv[optind], '='))
        fail("%s: '%s': give the property name only (inherit PROP DATASET)", what, argv[optind]);
    Cairn__Mgmt__DatasetInherit di;
    cairn__mgmt__dataset_inherit__init(&di);
    di.prop = (char *)mgmt_prop_canonical(argv[optind]);
    di.name = argv[optind + 1];
    check_name(di.name, MGMT_DSNAME_ANY, what);
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_DS_INHERIT, &di);
    return 0;
}

/* ---------------------------------------------------------------- list */

/* A cell: the exact number when asked for and there is one, else the shown value.
 * Ratios ("1.50x") are exact already; -p drops the "x" as zfs does. */
static const char *cell_value(const Cairn__Mgmt__Property *p, bool exact, char *buf, size_t len)
{
    size_t vl = p->value ? strlen(p->value) : 0;
    if (exact && vl > 1 && vl < len && p->value[vl - 1] == 'x' &&
        strspn(p->value, "0123456789.") == vl - 1) {
        memcpy(buf, p->value, vl - 1);
        buf[vl - 1] = '\0';
        return buf;
    }
    if (exact && p->is_numeric) {
        snprintf(buf, len, "%llu", (unsigned long long)p->numeric);
        return buf;
    }
    /* creation is seconds since the epoch; people read a date (zfs's format). */
    if (!exact && p->is_numeric && p->name && !strcmp(p->name, "creation")) {
        time_t t = (time_t)p->numeric;
        struct tm tm;
        if (localtime_r(&t, &tm) && strftime(buf, len, "%a %b %e %H:%M %Y", &tm)) return buf;
    }
    return p->value && p->value[0] ? p->value : "-";
}

static int cmd_list(int argc, char **argv)
{
    const char *what = "list";
    list_opts_t lo = {0};
    Cairn__Mgmt__DatasetList dl;
    cairn__mgmt__dataset_list__init(&dl);
    const char *cols_arg = "name,used,available,referenced,mountpoint";
    char err[512];
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":rHpt:o:", g_list_longopts, what)) != -1) {
        switch (c) {
        case 'r': dl.recursive = true; break;
        case 't':
            if (mgmt_parse_types(optarg, &dl.types, err, sizeof err)) fail("%s: %s", what, err);
            break;
        case 'o': cols_arg = optarg; break;
        default: parse_list_opts(c, &lo);
        }
    }
    want_args(argc, argv, 0, 1, what, "");
    if (optind < argc) {
        dl.name = argv[optind];
        check_name(dl.name, MGMT_DSNAME_ANY, what);
    }
    mgmt_column_t *cols = NULL;
    size_t ncols = 0;
    if (mgmt_parse_columns(cols_arg, &cols, &ncols, err, sizeof err)) fail("%s: %s", what, err);
    char **props = cairn_zalloc(sizeof(char *) * ncols);
    for (size_t i = 0; i < ncols; i++) props[i] = cols[i].prop;
    dl.props = props;
    dl.n_props = ncols;
    Cairn__Mgmt__Response *r =
        call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_DS_LIST, &dl, CAIRN__MGMT__RESPONSE__RESULT_DATASETS);
    bool exact = lo.exact || lo.mode == MGMT_OUT_JSON;
    /* Right-align (and make JSON numbers of) the columns holding numbers. */
    uint32_t mask = 0;
    for (size_t i = 0; i < r->datasets->n_rows; i++) {
        const Cairn__Mgmt__DatasetRow *row = r->datasets->rows[i];
        for (size_t j = 0; j < row->n_props && j < ncols && j < 32; j++)
            if (row->props[j]->is_numeric) mask |= 1u << j;
    }
    const char **hdr = cairn_zalloc(sizeof(char *) * ncols);
    for (size_t i = 0; i < ncols; i++)
        hdr[i] = lo.mode == MGMT_OUT_JSON ? cols[i].prop : cols[i].header;
    mgmt_table_t *t = mgmt_table_new(ncols, hdr, mask);
    const char **cells = cairn_zalloc(sizeof(char *) * ncols);
    char (*bufs)[64] = cairn_zalloc(sizeof *bufs * ncols);
    for (size_t i = 0; i < r->datasets->n_rows; i++) {
        const Cairn__Mgmt__DatasetRow *row = r->datasets->rows[i];
        if (row->n_props != ncols) fail("malformed response from cairnd (column count)");
        for (size_t j = 0; j < ncols; j++)
            cells[j] = cell_value(row->props[j], exact, bufs[j], sizeof bufs[j]);
        mgmt_table_add_row(t, cells);
    }
    if (lo.mode == MGMT_OUT_HUMAN && mgmt_table_rows(t) == 0) printf("no datasets available\n");
    else mgmt_table_print(t, stdout, lo.mode, "datasets");
    mgmt_table_free(t);
    free(bufs);
    free(cells);
    free(hdr);
    free(props);
    free(cols);
    cairn__mgmt__response__free_unpacked(r, NULL);
    return 0;
}

/* ---------------------------------------------------------------- get */

enum { GET_NAME, GET_PROPERTY, GET_VALUE, GET_SOURCE, GET_NFIELDS };

static int cmd_get(int argc, char **argv)
{
    const char *what = "get";
    list_opts_t lo = {0};
    Cairn__Mgmt__DatasetGet dg;
    cairn__mgmt__dataset_get__init(&dg);
    int fields[GET_NFIELDS] = {GET_NAME, GET_PROPERTY, GET_VALUE, GET_SOURCE};
    size_t nfields = GET_NFIELDS;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, ":rHpo:", g_list_longopts, what)) != -1) {
        if (c == 'r') {
            dg.recursive = true;
        } else if (c == 'o') {
            nfields = 0;
            char *list = cairn_strdup(optarg);
            for (char *save, *tok = strtok_r(list, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                int f;
                if (!strcmp(tok, "name")) f = GET_NAME;
                else if (!strcmp(tok, "property")) f = GET_PROPERTY;
                else if (!strcmp(tok, "value")) f = GET_VALUE;
                else if (!strcmp(tok, "source")) f = GET_SOURCE;
                else fail("%s: invalid field '%s' (want name, property, value, source)", what, tok);
                if (nfields == GET_NFIELDS) fail("%s: field '%s' given twice", what, tok);
                for (size_t k = 0; k < nfields; k++)
                    if (fields[k] == f) fail("%s: field '%s' given twice", what, tok);
                fields[nfields++] = f;
            }
            free(list);
            if (nfields == 0) fail("%s: -o needs at least one field", what);
        } else {
            parse_list_opts(c, &lo);
        }
    }
    if (optind >= argc) fail("%s: missing property name (or 'all')", what);
    if (optind + 1 >= argc) fail("%s: missing dataset name", what);
    char *plist = cairn_strdup(argv[optind]);
    char **props = NULL;
    size_t np = 0;
    for (char *save, *tok = strtok_r(plist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        props = cairn_realloc(props, sizeof(char *) * (np + 1));
        props[np++] = (char *)mgmt_prop_canonical(tok);
    }
    if (np == 0) fail("%s: missing property name (or 'all')", what);
    for (int i = optind + 1; i < argc; i++) check_name(argv[i], MGMT_DSNAME_ANY, what);
    dg.props = props;
    dg.n_props = np;
    dg.names = argv + optind + 1;
    dg.n_names = (size_t)(argc - optind - 1);
    Cairn__Mgmt__Response *r =
        call_cmd_expect(CAIRN__MGMT__REQUEST__CMD_DS_GET, &dg, CAIRN__MGMT__RESPONSE__RESULT_PROPS);
    bool exact = lo.exact || lo.mode == MGMT_OUT_JSON;
    static const char *const names[GET_NFIELDS] = {"NAME", "PROPERTY", "VALUE", "SOURCE"};
    const char *hdr[GET_NFIELDS];
    uint32_t mask = 0;
    for (size_t k = 0; k < nfields; k++) {
        hdr[k] = names[fields[k]];
        if (fields[k] == GET_VALUE && exact) mask |= 1u << k;
    }
    mgmt_table_t *t = mgmt_table_new(nfields, hdr, mask);
    for (size_t i = 0; i < r->props->n_props; i++) {
        const Cairn__Mgmt__Property *p = r->props->props[i];
        char buf[64];
        const char *all[GET_NFIELDS] = {p->target, p->name, cell_value(p, exact, buf, sizeof buf),
                                        p->source && p->source[0] ? p->source : "-"};
        const char *cells[GET_NFIELDS];
        for (size_t k = 0; k < nfields; k++) cells[k] = all[fields[k]];
        mgmt_table_add_row(t, cells);
    }
    table_print_free(t, lo.mode, "properties");
    cairn__mgmt__response__free_unpacked(r, NULL);
    free(props);
    free(plist);
    return 0;
}

/* ---------------------------------------------------------------- dispatch */

int dataset_command(const char *cmd, int argc, char **argv)
{
    static const cli_verb_t verbs[] = {
        {"create", cmd_create},     {"destroy", cmd_destroy},   {"rename", cmd_rename},
        {"list", cmd_list},         {"get", cmd_get},           {"set", cmd_set},
        {"inherit", cmd_inherit},   {"snapshot", cmd_snapshot}, {"snap", cmd_snapshot},
        {"rollback", cmd_snapshot}, {"clone", cmd_clone},
    };
    return cli_run_verb(verbs, CLI_NVERBS(verbs), cmd, argc, argv);
}
