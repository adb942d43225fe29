/*
 * `cairn pool add`, `pool remove` and `pool iostat`.
 *
 * add: the words after the pool name are the create grammar's: data vdevs (a
 * device, `mirror DEV...`, `raidzN DEV...`), then the sections; a `cache
 * DEV...` section is taken out first (as for create). The daemon checks the
 * devices and the redundancy (-f accepts a mismatch). -n asks it for the same
 * checks without the change, then prints the layout the pool would have: the
 * tree `pool status` reports, the new vdevs after it (unnumbered: their ids
 * are given when they join).
 *
 * remove: DEV is a log or cache device path (made absolute when it exists,
 * sent as given otherwise, so a device that vanished can still be named), or
 * a log mirror as `pool status` shows it ("mirror-2"). The daemon decides.
 *
 * iostat: the daemon reports counters since import; this side turns two
 * samples into rates (mgmt_iostat_cells()). The first report covers the time
 * since import, each later one the interval, as zpool iostat does. -v adds
 * every vdev (CLASS says data, log or cache) and a second table of the ARC
 * and L2ARC figures; --json prints both tables in one document.
 */
#include "cli.h"

#include <cairn/spa.h>
#include <cairn/util.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- add */

/* The status tree of one pool (the caller frees the response). */
static Cairn__Mgmt__Response *pool_status_of(const char *name, const char *what)
{
    Cairn__Mgmt__PoolStatus ps = CAIRN__MGMT__POOL_STATUS__INIT;
    ps.name = (char *)name;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_STATUS, &ps);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS || !r->pool_status->n_pools ||
        !r->pool_status->pools[0]->root)
        fail("%s: unexpected answer from cairnd", what);
    return r;
}

static void print_status_vdev(const Cairn__Mgmt__VdevStatus *v, int depth, bool want_log)
{
    if (depth == 1 && (v->vclass[0] != 0) != want_log) return;
    printf("\t%*s%s\n", 2 * depth, "", v->name);
    for (size_t i = 0; i < v->n_children; i++) print_status_vdev(v->children[i], depth + 1, want_log);
}

static void print_spec_vdev(const spa_vdev_spec_t *s, bool want_log)
{
    if ((s->vclass == VDEV_CLASS_LOG) != want_log) return;
    if (s->type == VDEV_TYPE_LEAF) {
        printf("\t  %s\n", s->path);
        return;
    }
    if (s->type == VDEV_TYPE_RAIDZ) printf("\t  raidz%u\n", s->nparity);
    else printf("\t  mirror\n");
    for (uint32_t i = 0; i < s->nchildren; i++) printf("\t    %s\n", s->children[i].path);
}

/* A section (cache, spares) of `pool add -n`: the pool's devices, then the new ones. */
static void print_add_section(const char *title, Cairn__Mgmt__VdevStatus *const *have, size_t nhave,
                              char *const *added, size_t nadded)
{
    if (nhave || nadded) printf("\t%s\n", title);
    for (size_t i = 0; i < nhave; i++) printf("\t  %s\n", have[i]->name);
    for (size_t i = 0; i < nadded; i++) printf("\t  %s\n", added[i]);
}

/* `pool add -n`: the pool's tree as it would be, data vdevs, then logs, cache, spares. */
static void print_add_layout(const char *name, const spa_vdev_spec_t *root,
                             const Cairn__Mgmt__PoolCreate *cache, const Cairn__Mgmt__PoolAdd *pa,
                             const char *what)
{
    Cairn__Mgmt__Response *r = pool_status_of(name, what);
    const Cairn__Mgmt__PoolStatusResult *p = r->pool_status->pools[0];
    printf("would update '%s' to the following configuration:\n\n\t%s\n", name, p->name);
    for (int want_log = 0; want_log < 2; want_log++) {
        bool any = false;
        for (size_t i = 0; i < p->root->n_children; i++)
            any |= (p->root->children[i]->vclass[0] != 0) == want_log;
        for (uint32_t i = 0; root && i < root->nchildren; i++)
            any |= (root->children[i].vclass == VDEV_CLASS_LOG) == want_log;
        if (want_log && any) printf("\tlogs\n");
        for (size_t i = 0; i < p->root->n_children; i++)
            print_status_vdev(p->root->children[i], 1, want_log);
        for (uint32_t i = 0; root && i < root->nchildren; i++)
            print_spec_vdev(&root->children[i], want_log);
    }
    print_add_section("cache", p->cache, p->n_cache, cache->cache_devices, cache->n_cache_devices);
    print_add_section("spares", p->spares, p->n_spares, pa->spares, pa->n_spares);
    fflush(stdout);
    cairn__mgmt__response__free_unpacked(r, NULL);
}

int cmd_pool_add(int argc, char **argv)
{
    const char *what = "pool add";
    Cairn__Mgmt__PoolAdd pa;
    cairn__mgmt__pool_add__init(&pa);
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, "+:fn", NULL, what)) != -1) {
        if (c == 'f') pa.force = true;
        if (c == 'n') pa.dry_run = true;
    }
    if (optind >= argc) fail("%s: missing pool name", what);
    const char *name = argv[optind++];
    set_name(name, what);
    if (optind >= argc) fail("%s: missing vdevs (VDEV..., log VDEV..., cache DEV...)", what);
    int nwords = argc - optind;
    Cairn__Mgmt__PoolCreate pc; /* the create path's parsing of the cache section */
    cairn__mgmt__pool_create__init(&pc);
    cli_cache_section(&nwords, argv + optind, &pc, what);
    cli_spare_section(&nwords, argv + optind, &pa.spares, &pa.n_spares, what);
    spa_vdev_spec_t *root = NULL;
    char **seen = NULL, **given = NULL;
    size_t nseen = 0;
    if (nwords) {
        char err[512];
        if (mgmt_vdev_spec_parse(nwords, argv + optind, &root, err, sizeof err))
            fail("%s: %s", what, err);
        resolve_leaves(root, &seen, &given, &nseen);
        pa.root = spec_to_msg(root);
    }
    if (!pa.root && !pc.n_cache_devices && !pa.n_spares)
        fail("%s: 'cache' needs at least one device", what);
    pa.name = (char *)name;
    pa.cache_devices = pc.cache_devices;
    pa.n_cache_devices = pc.n_cache_devices;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_ADD, &pa);
    if (pa.dry_run) print_add_layout(name, root, &pc, &pa, what);
    if (pa.root) spec_msg_free(pa.root);
    mgmt_vdev_spec_free(root);
    cli_cache_section_free(&pc);
    cli_spare_section_free(pa.spares, pa.n_spares);
    for (size_t i = 0; i < nseen; i++) {
        free(seen[i]);
        free(given[i]);
    }
    free(seen);
    free(given);
    return 0;
}

/* ---------------------------------------------------------------- remove */

int cmd_pool_remove(int argc, char **argv)
{
    const char *what = "pool remove";
    reset_getopt();
    while (next_opt(argc, argv, "+:", NULL, what) != -1) {
    }
    const char *name = pool_args(argc, argv, 2, 2, what, "pool name and device");
    const char *dev = argv[optind + 1];
    if (!dev[0]) fail("%s: empty device name", what);
    char buf[PATH_MAX];
    char *sent = (char *)dev;
    struct stat st;
    bool vdev_name = !strncmp(dev, "mirror-", 7) && !strchr(dev, '/');
    if (!vdev_name && stat(dev, &st) == 0 && realpath(dev, buf)) sent = buf;
    else if (strchr(dev, '/') && dev[0] != '/')
        fail("%s: cannot open '%s': %s", what, dev, strerror(errno));
    Cairn__Mgmt__PoolRemove pr = CAIRN__MGMT__POOL_REMOVE__INIT;
    pr.name = (char *)name;
    pr.device = sent;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_REMOVE, &pr);
    return 0;
}

/* ---------------------------------------------------------------- offline, online, replace, wait */

int cmd_pool_offline(int argc, char **argv)
{
    bool online = !strcmp(argv[0], "online");
    const char *what = online ? "pool online" : "pool offline";
    bool temporary = false, expand = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, online ? "+:e" : "+:t", NULL, what)) != -1) {
        if (c == 't') temporary = true;
        if (c == 'e') expand = true;
    }
    const char *name = pool_args(argc, argv, 2, 2, what, "pool name and device");
    char buf[PATH_MAX + 64];
    const char *dev = leaf_arg(argv[optind + 1], buf, sizeof buf, what);
    if (online) {
        Cairn__Mgmt__PoolOnline on = CAIRN__MGMT__POOL_ONLINE__INIT;
        on.name = (char *)name;
        on.device = (char *)dev;
        on.expand = expand;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_ONLINE, &on);
    } else {
        Cairn__Mgmt__PoolOffline off = CAIRN__MGMT__POOL_OFFLINE__INIT;
        off.name = (char *)name;
        off.device = (char *)dev;
        off.temporary = temporary;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_OFFLINE, &off);
    }
    return 0;
}

int cmd_pool_replace(int argc, char **argv)
{
    const char *what = "pool replace";
    bool force = false, sequential = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, "+:fs", NULL, what)) != -1) {
        if (c == 'f') force = true;
        if (c == 's') sequential = true;
    }
    const char *name = pool_args(argc, argv, 2, 3, what, "pool name and device");
    char b1[PATH_MAX + 64], b2[PATH_MAX + 64];
    Cairn__Mgmt__PoolReplace m = CAIRN__MGMT__POOL_REPLACE__INIT;
    m.name = (char *)name;
    m.old_device = (char *)leaf_arg(argv[optind + 1], b1, sizeof b1, what);
    m.new_device = optind + 2 < argc ? (char *)leaf_arg(argv[optind + 2], b2, sizeof b2, what) : "";
    m.force = force;
    m.sequential = sequential;
    call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_REPLACE, &m);
    return 0;
}

int cmd_pool_attach(int argc, char **argv)
{
    bool detach = !strcmp(argv[0], "detach");
    const char *what = detach ? "pool detach" : "pool attach";
    bool force = false, sequential = false;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, detach ? "+:" : "+:fs", NULL, what)) != -1) {
        if (c == 'f') force = true;
        if (c == 's') sequential = true;
    }
    const char *name = pool_args(argc, argv, detach ? 2 : 3, detach ? 2 : 3, what,
              detach ? "pool name and device" : "pool name, existing device and new device");
    char b1[PATH_MAX + 64], b2[PATH_MAX + 64];
    if (detach) {
        Cairn__Mgmt__PoolDetach de = CAIRN__MGMT__POOL_DETACH__INIT;
        de.name = (char *)name;
        de.device = (char *)leaf_arg(argv[optind + 1], b1, sizeof b1, what);
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_DETACH, &de);
    } else {
        Cairn__Mgmt__PoolAttach at = CAIRN__MGMT__POOL_ATTACH__INIT;
        at.name = (char *)name;
        at.device = (char *)leaf_arg(argv[optind + 1], b1, sizeof b1, what);
        at.new_device = (char *)leaf_arg(argv[optind + 2], b2, sizeof b2, what);
        at.force = force;
        at.sequential = sequential;
        call_cmd_simple(CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH, &at);
    }
    return 0;
}

/* `pool wait [-t resilver|scrub] POOL`: polls the pool's status until no scan
 * of that kind runs (a poll, not a held request: the daemon's pool table stays
 * free for everyone else meanwhile). */
int cmd_pool_wait(int argc, char **argv)
{
    const char *what = "pool wait";
    int func = -1;
    int c;
    reset_getopt();
    while ((c = next_opt(argc, argv, "+:t:", NULL, what)) != -1) {
        if (c != 't') continue;
        if (!strcmp(optarg, "resilver")) func = 1;
        else if (!strcmp(optarg, "scrub")) func = 0;
        else fail("%s: unknown activity '%s' (resilver, scrub)", what, optarg);
    }
    const char *name = pool_args(argc, argv, 1, 1, what, "pool name");
    for (;;) {
        Cairn__Mgmt__PoolStatus ps = CAIRN__MGMT__POOL_STATUS__INIT;
        ps.name = (char *)name;
        Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_STATUS, &ps);
        bool busy = false;
        if (r->result_case == CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS && r->pool_status->n_pools) {
            const Cairn__Mgmt__ScrubStatus *s = r->pool_status->pools[0]->scrub;
            busy = s && s->state == CAIRN__MGMT__SCRUB_STATUS__STATE__SCANNING &&
                   (func < 0 || (int)s->func == func);
        }
        cairn__mgmt__response__free_unpacked(r, NULL);
        if (!busy) return 0;
        usleep(200 * 1000);
    }
}

static Cairn__Mgmt__Response *fetch(const char *pool);

/* ---------------------------------------------------------------- list -v */

static void list_vdev_row(mgmt_table_t *t, const Cairn__Mgmt__VdevIostat *v, int depth, bool exact)
{
    char name[PATH_MAX + 16], size[32] = "-", alloc[32] = "-", freeb[32] = "-", cap[32] = "-";
    snprintf(name, sizeof name, "%*s%s", exact ? 0 : 2 * depth, "", v->name);
    if (depth == 1) { /* capacity belongs to top-level vdevs, not to mirror sides */
        uint64_t fr = v->size > v->alloc ? v->size - v->alloc : 0;
        mgmt_format_size(v->size, exact, size, sizeof size);
        mgmt_format_size(v->alloc, exact, alloc, sizeof alloc);
        mgmt_format_size(fr, exact, freeb, sizeof freeb);
        unsigned pct = v->size ? (unsigned)(v->alloc * 100 / v->size) : 0;
        snprintf(cap, sizeof cap, exact ? "%u" : "%u%%", pct);
    }
    const char *cells[] = {name, size, alloc, freeb, cap, "-", "-", "-"};
    mgmt_table_add_row(t, cells);
    for (size_t i = 0; i < v->n_children; i++) list_vdev_row(t, v->children[i], depth + 1, exact);
}

void cli_pool_list_vdevs(mgmt_table_t *t, const char *pool, bool exact)
{
    Cairn__Mgmt__Response *r = fetch(pool);
    for (size_t p = 0; p < r->pool_iostat->n_pools; p++) {
        const Cairn__Mgmt__VdevIostat *root = r->pool_iostat->pools[p]->root;
        /* Data vdevs, then the log and cache sections, as pool status orders them. */
        static const char *const order[] = {"", "log", "cache"};
        for (int sct = 0; sct < 3; sct++) {
            bool header = false;
            for (size_t i = 0; i < root->n_children; i++) {
                const Cairn__Mgmt__VdevIostat *v = root->children[i];
                if (strcmp(v->vclass, order[sct])) continue;
                if (sct && !header) {
                    const char *cells[] = {sct == 1 ? "logs" : "cache", "-", "-", "-", "-", "-", "-", "-"};
                    mgmt_table_add_row(t, cells);
                    header = true;
                }
                list_vdev_row(t, v, 1, exact);
            }
        }
    }
    cairn__mgmt__response__free_unpacked(r, NULL);
}

/* ---------------------------------------------------------------- iostat */

static bool is_number(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static unsigned long parse_positive(const char *s, const char *what, const char *which)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v == 0 || v > 86400 * 365UL)
        fail("%s: bad %s '%s' (want a whole number of %s)", what, which, s,
             strcmp(which, "interval") ? "reports" : "seconds");
    return v;
}

static Cairn__Mgmt__Response *fetch(const char *pool)
{
    Cairn__Mgmt__PoolIostat pi = CAIRN__MGMT__POOL_IOSTAT__INIT;
    if (pool) pi.name = (char *)pool;
    Cairn__Mgmt__Response *r = call_cmd(CAIRN__MGMT__REQUEST__CMD_POOL_IOSTAT, &pi);
    if (r->result_case != CAIRN__MGMT__RESPONSE__RESULT_POOL_IOSTAT || !r->pool_iostat)
        fail("pool iostat: unexpected answer from cairnd");
    return r;
}

static mgmt_iostat_counters_t counters(const Cairn__Mgmt__VdevIostat *v)
{
    return (mgmt_iostat_counters_t){.alloc = v->alloc, .size = v->size, .reads = v->reads,
                                    .writes = v->writes, .read_bytes = v->read_bytes,
                                    .write_bytes = v->write_bytes};
}

/* The same vdev in the previous sample: matched by name and class under the
 * matching parent (the tree may change between samples). */
static const Cairn__Mgmt__VdevIostat *match(const Cairn__Mgmt__VdevIostat *prev_parent,
                                            const Cairn__Mgmt__VdevIostat *v)
{
    for (size_t i = 0; prev_parent && i < prev_parent->n_children; i++) {
        const Cairn__Mgmt__VdevIostat *p = prev_parent->children[i];
        if (!strcmp(p->name, v->name) && !strcmp(p->vclass, v->vclass)) return p;
    }
    return NULL;
}

typedef struct iostat_ctx {
    mgmt_table_t *t;
    bool verbose, exact;
    uint64_t dt_ns;
    bool first;          /* rates since import */
} iostat_ctx_t;

static void add_row(iostat_ctx_t *c, const Cairn__Mgmt__VdevIostat *v,
                    const Cairn__Mgmt__VdevIostat *prev, int depth, const char *vclass,
                    bool has_space)
{
    char cells[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL];
    mgmt_iostat_counters_t cur = counters(v), old;
    if (prev) old = counters(prev);
    mgmt_iostat_cells(prev ? &old : NULL, &cur, c->dt_ns, c->exact, has_space, cells);
    char name[PATH_MAX + 16];
    /* Indented like pool status in the human table; plain names for scripts. */
    int indent = c->exact ? 0 : 2 * depth;
    snprintf(name, sizeof name, "%*s%s", indent, "", v->name);
    const char *row[9];
    size_t k = 0;
    row[k++] = name;
    if (c->verbose) row[k++] = vclass;
    for (int i = 0; i < MGMT_IOSTAT_CELLS; i++) row[k++] = cells[i];
    mgmt_table_add_row(c->t, row);
}

static void add_vdev(iostat_ctx_t *c, const Cairn__Mgmt__VdevIostat *v,
                     const Cairn__Mgmt__VdevIostat *prev, int depth, const char *vclass)
{
    /* Capacity belongs to top-level vdevs and cache devices, not to mirror sides. */
    add_row(c, v, prev, depth, vclass, depth == 1);
    for (size_t i = 0; i < v->n_children; i++)
        add_vdev(c, v->children[i], match(prev, v->children[i]), depth + 1, vclass);
}

static void add_pool(iostat_ctx_t *c, const Cairn__Mgmt__PoolIostatResult *p,
                     const Cairn__Mgmt__PoolIostatResult *prev)
{
    const Cairn__Mgmt__VdevIostat *root = p->root, *proot = prev ? prev->root : NULL;
    add_row(c, root, proot, 0, "pool", true);
    if (!c->verbose) return;
    /* Data vdevs, then the log and cache sections, as pool status orders them. */
    static const char *const order[] = {"", "log", "cache"};
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < root->n_children; i++) {
            const Cairn__Mgmt__VdevIostat *v = root->children[i];
            if (strcmp(v->vclass, order[s])) continue;
            add_vdev(c, v, match(proot, v), 1, s == 0 ? "data" : order[s]);
        }
}

static const Cairn__Mgmt__PoolIostatResult *find_prev(const Cairn__Mgmt__PoolIostats *prev,
                                                      const char *name)
{
    for (size_t i = 0; prev && i < prev->n_pools; i++)
        if (!strcmp(prev->pools[i]->root->name, name)) return prev->pools[i];
    return NULL;
}

static void arc_table(mgmt_table_t *t, const Cairn__Mgmt__ArcStats *a,
                      const Cairn__Mgmt__ArcStats *prev, uint64_t dt_ns, bool exact)
{
    static const Cairn__Mgmt__ArcStats zero = CAIRN__MGMT__ARC_STATS__INIT;
    if (!prev) prev = &zero;
    char v[5][32];
    mgmt_format_size(a->size, exact, v[0], 32);
    mgmt_format_size(a->c, exact, v[1], 32);
    mgmt_format_size(a->p, exact, v[2], 32);
    mgmt_format_size(a->c_max, exact, v[3], 32);
    /* Hits, misses, L2 hits and feeds per second over the interval, like the I/O. */
    mgmt_iostat_counters_t hc = {.reads = a->hits, .writes = a->misses},
                           hp = {.reads = prev->hits, .writes = prev->misses};
    mgmt_iostat_counters_t lc = {.reads = a->l2_hits, .writes = a->l2_misses,
                                 .write_bytes = a->l2_feed_bytes},
                           lp = {.reads = prev->l2_hits, .writes = prev->l2_misses,
                                 .write_bytes = prev->l2_feed_bytes};
    /* Feeds (passes that wrote to the cache devices) per second, as a count. */
    mgmt_iostat_counters_t fc = {.reads = a->l2_feeds}, fp = {.reads = prev->l2_feeds};
    char fd[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL];
    mgmt_iostat_cells(&fp, &fc, dt_ns, exact, false, fd);
    char h[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL], l[MGMT_IOSTAT_CELLS][MGMT_IOSTAT_CELL];
    mgmt_iostat_cells(&hp, &hc, dt_ns, exact, false, h);
    mgmt_iostat_cells(&lp, &lc, dt_ns, exact, false, l);
    mgmt_format_size(a->l2_size, exact, v[4], 32);
    const char *row[] = {"arc", v[0], v[1], v[2], v[3], h[2], h[3], v[4], l[2], l[3], fd[2], l[5]};
    mgmt_table_add_row(t, row);
}

static void print_tables(mgmt_table_t *io, mgmt_table_t *arc, list_opts_t *lo)
{
    if (lo->mode != MGMT_OUT_JSON || !arc) {
        mgmt_table_print(io, stdout, lo->mode, "iostat");
        if (arc) {
            if (lo->mode == MGMT_OUT_HUMAN) putchar('\n');
            mgmt_table_print(arc, stdout, lo->mode, "arc");
        }
        fflush(stdout);
        return;
    }
    /* One JSON document holding both tables: {"iostat": [...], "arc": [...]}. */
    char *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    FILE *f = open_memstream(&a, &alen);
    mgmt_table_print(io, f, MGMT_OUT_JSON, "iostat");
    fclose(f);
    f = open_memstream(&b, &blen);
    mgmt_table_print(arc, f, MGMT_OUT_JSON, "arc");
    fclose(f);
    char *end = strrchr(a, '}');
    char *start = strchr(b, '{');
    if (!end || !start) fail("pool iostat: internal error formatting JSON");
    *end = '\0';
    printf("%s, %s", a, start + 1);
    fflush(stdout);
    free(a);
    free(b);
}

int cmd_pool_iostat(int argc, char **argv)
{
    const char *what = "pool iostat";
    bool verbose = false;
    list_opts_t lo = list_args(argc, argv, 0, 3, what, "", &verbose);
    const char *pool = NULL;
    if (optind < argc && !is_number(argv[optind])) {
        pool = argv[optind++];
        set_name(pool, what);
    }
    if (argc - optind > 2) fail("%s: unexpected argument '%s'", what, argv[optind + 2]);
    unsigned long interval = 0, count = 1;
    if (optind < argc) {
        interval = parse_positive(argv[optind], what, "interval");
        count = optind + 1 < argc ? parse_positive(argv[optind + 1], what, "count") : ULONG_MAX;
    }
    bool exact = lo.exact || lo.mode == MGMT_OUT_JSON;
    static const char *const hdr[] = {"NAME", "ALLOC", "FREE", "READ_OPS", "WRITE_OPS", "READ_BW", "WRITE_BW"};
    static const char *const vhdr[] = {"NAME", "CLASS", "ALLOC", "FREE", "READ_OPS", "WRITE_OPS", "READ_BW", "WRITE_BW"};
    /* NAME "arc": with -H every line still starts with what it describes. */
    static const char *const ahdr[] = {"NAME", "ARC_SIZE", "TARGET", "MRU_TARGET", "ARC_MAX", "HITS", "MISSES",
                                       "L2_SIZE", "L2_HITS", "L2_MISSES", "L2_FEEDS", "L2_FEED_BW"};
    Cairn__Mgmt__Response *prev = NULL;
    for (unsigned long n = 0; n < count; n++) {
        if (n) sleep((unsigned)interval);
        Cairn__Mgmt__Response *cur = fetch(pool);
        const Cairn__Mgmt__PoolIostats *st = cur->pool_iostat;
        mgmt_table_t *t = verbose ? mgmt_table_new(8, vhdr, 0xfc) : mgmt_table_new(7, hdr, 0x7e);
        for (size_t i = 0; i < st->n_pools; i++) {
            const Cairn__Mgmt__PoolIostatResult *p = st->pools[i];
            const Cairn__Mgmt__PoolIostatResult *pp = prev ? find_prev(prev->pool_iostat, p->root->name) : NULL;
            iostat_ctx_t ctx = {.t = t, .verbose = verbose, .exact = exact};
            /* The first report (or a pool imported since the last) covers the time since import. */
            if (pp && pp->import_ns == p->import_ns) ctx.dt_ns = p->timestamp_ns - pp->timestamp_ns;
            else {
                pp = NULL;
                ctx.dt_ns = p->timestamp_ns > p->import_ns ? p->timestamp_ns - p->import_ns : 0;
            }
            add_pool(&ctx, p, pp);
        }
        mgmt_table_t *at = NULL;
        if (verbose && st->arc) {
            at = mgmt_table_new(12, ahdr, 0xffe);
            /* ARC counters are the daemon's, since it started: the first report is
             * of totals, later ones per second over the interval. */
            const Cairn__Mgmt__ArcStats *pa = prev ? prev->pool_iostat->arc : NULL;
            arc_table(at, st->arc, pa, pa ? (uint64_t)interval * 1000000000ULL : 1000000000ULL,
                      exact);
        }
        if (lo.mode == MGMT_OUT_HUMAN && st->n_pools == 0) printf("no pools available\n");
        else print_tables(t, at, &lo);
        mgmt_table_free(t);
        if (at) mgmt_table_free(at);
        if (prev) cairn__mgmt__response__free_unpacked(prev, NULL);
        prev = cur;
    }
    if (prev) cairn__mgmt__response__free_unpacked(prev, NULL);
    return 0;
}
