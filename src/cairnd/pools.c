/*
 * The pool commands (create, import, export, destroy, status, list, get, set,
 * add, remove, replace, attach, detach, online, offline, scrub, clear,
 * iostat, events) and the pools' life in the daemon: imported at start from
 * the cache file, closed at shutdown. The table they live in and its cache
 * file are pool_table.c; the lock a request holds is taken by dispatch.c.
 *
 * Every imported pool also has its dataset layer open (dsl_pool_open right
 * after create or import, dsl_pool_close before export, destroy or shutdown):
 * a pool is only listed as usable when both halves are up, so dataset
 * requests (datasets.c) never see a pool without its DSL. They run under the
 * read lock like the other non-structural commands; the DSL does its own
 * locking, so dataset commands on one pool run side by side.
 */
#include "cairnd.h"

#include <cairn/arc.h>
#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/dmu.h>
#include <cairn/zil.h>
#include <cairn/zpl.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUB "cairnd"

/* Adds (or refreshes) the table's entry of a freshly opened pool and its
 * dataset layer, and brings in its cache devices (L2ARC, arc.c). */
static void add_pool(spa_t *spa, dsl_pool_t *dp)
{
    cairnd_table_add(spa, dp);
    cairnd_arc_pool_opened(spa);
}

void cairnd_pools_import_cached(void)
{
    cairnd_table_lock(true);
    for (size_t i = 0; i < cairnd_table_count(); i++) {
        cairnd_pool_entry_t *e = cairnd_table_at(i);
        if (e->spa) continue;
        char err[512] = "";
        spa_t *spa = NULL;
        /* Our own pool: it looks active because we (or our crashed predecessor) had
         * it. Unless another host took it over meanwhile (its id in the labels). */
        int rc = spa_import(e->name, (const char *const *)e->paths, e->npaths,
                            SPA_IMPORT_CACHED, &spa, err, sizeof err);
        if (rc) {
            log_error(SUB, "cannot import cached pool '%s': %s", e->name,
                      err[0] ? err : strerror(-rc));
            continue;
        }
        if (strcmp(spa_name(spa), e->name)) {
            log_error(SUB, "cached pool '%s' came back named '%s'; closing it", e->name,
                      spa_name(spa));
            spa_close(spa);
            continue;
        }
        rc = dsl_pool_open(spa, &e->dp);
        if (rc) {
            log_error(SUB, "cannot open the datasets of cached pool '%s': %s; closing it",
                      e->name, strerror(-rc));
            spa_close(spa);
            continue;
        }
        e->spa = spa;
        e->opened_ns = cairn_now_ns();
        cairnd_arc_pool_opened(spa); /* L2ARC: its cache devices (arc.c) */
        log_info(SUB, "imported pool '%s' (%s)", e->name, vdev_state_name(spa_health(spa)));
    }
    cairnd_table_unlock();
}

void cairnd_pools_shutdown(void)
{
    cairnd_table_lock(true);
    for (size_t i = 0; i < cairnd_table_count(); i++) {
        if (!cairnd_table_at(i)->spa) continue;
        cairnd_shares_pool_closing(cairnd_table_at(i)->dp);
        if (cairnd_table_at(i)->dp) dsl_pool_close(cairnd_table_at(i)->dp);
        cairnd_table_at(i)->dp = NULL;
        int rc = spa_close(cairnd_table_at(i)->spa);
        cairnd_table_at(i)->spa = NULL;
        if (rc) log_error(SUB, "closing pool '%s': %s", cairnd_table_at(i)->name, strerror(-rc));
        else log_info(SUB, "closed pool '%s'", cairnd_table_at(i)->name);
    }
    cairnd_table_clear();
    /* Keep the lock: no request may touch a pool after this. */
}

/* ---------------------------------------------------------------- helpers */

#define set_error cairnd_set_error
/* An absolute path, or a test's fault-injecting leaf on one ("fault:/...", vdev.h). */
static bool device_path_ok(const char *p)
{
    if (!strncmp(p, "fault:", 6)) p += 6;
    return p[0] == '/';
}

#define NO_SUCH_POOL(resp, a, name) set_error(resp, a, -ENOENT, "no such pool '%s'", name)

#define SPARES_MAX 32 /* spares a pool may have, and more */

/* The `spares` section of status: AVAIL, or INUSE while standing in for a leaf. */
static size_t spare_status(cairnd_arena_t *a, spa_t *spa, Cairn__Mgmt__VdevStatus ***out)
{
    spa_spare_info_t info[SPARES_MAX];
    size_t n = spa_spares_get(spa, info, SPARES_MAX);
    *out = cairnd_arena_alloc(a, (n ? n : 1) * sizeof **out);
    for (size_t i = 0; i < n; i++) {
        Cairn__Mgmt__VdevStatus *s = cairnd_arena_alloc(a, sizeof *s);
        cairn__mgmt__vdev_status__init(s);
        s->name = cairnd_arena_strdup(a, info[i].path);
        s->type = cairnd_arena_strdup(a, "spare");
        s->state = cairnd_arena_strdup(a, info[i].in_use ? "INUSE" : "AVAIL");
        (*out)[i] = s;
    }
    return n;
}

/* `spare DEV...` of create and add (dry_run: add -n, the checks only). */
static int add_spares(spa_t *spa, char **spares, size_t n, bool force, bool dry_run, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (!device_path_ok(spares[i])) {
            snprintf(err, errlen, "device paths must be absolute ('%s')", spares[i]);
            return -EINVAL;
        }
    if (!n) return 0;
    const char *const *paths = (const char *const *)spares;
    return dry_run ? spa_spare_add_dry_run(spa, paths, n, force, err, errlen)
                   : spa_spare_add(spa, paths, n, force, err, errlen);
}

static Cairn__Mgmt__PoolRow *pool_row(cairnd_arena_t *a, spa_t *spa, dsl_pool_t *dp)
{
    Cairn__Mgmt__PoolRow *r = cairnd_arena_alloc(a, sizeof *r);
    cairn__mgmt__pool_row__init(r);
    spa_space_t sp;
    spa_get_space(spa, &sp);
    r->name = cairnd_arena_strdup(a, spa_name(spa));
    r->size = sp.size;
    r->alloc = sp.alloc;
    r->free = sp.free;
    r->health = cairnd_arena_strdup(a, spa_health_name(spa));
    r->guid = spa_guid(spa);
    r->expandsize = spa_expandsize(spa);
    dsl_prop_t *prop = cairn_zalloc(sizeof *prop);
    char err[256];
    bool have = dp && dsl_prop_get(dp, spa_name(spa), "compressratio", prop, err, sizeof err) == 0;
    r->compressratio = cairnd_arena_strdup(a, have ? prop->value : "-");
    free(prop);
    return r;
}

static Cairn__Mgmt__VdevStatus *vdev_status(cairnd_arena_t *a, spa_t *spa, vdev_t *vd)
{
    Cairn__Mgmt__VdevStatus *s = cairnd_arena_alloc(a, sizeof *s);
    cairn__mgmt__vdev_status__init(s);
    char name[MGMT_PATH_MAX];
    if (vd->type == VDEV_TYPE_ROOT) cairn_strlcpy(name, spa_name(spa), sizeof name);
    else if (vdev_is_leaf(vd)) cairn_strlcpy(name, vd->path ? vd->path : "?", sizeof name);
    else snprintf(name, sizeof name, "%s-%u", vdev_type_name(vd), vd->id);
    /* A stale leaf out of service (FAULTED, OFFLINE) waits; it is not being resilvered. */
    int st = atomic_load(&vd->state);
    s->resilvering = vdev_is_leaf(vd) && atomic_load(&vd->stale) &&
                     (st == VDEV_STATE_ONLINE || st == VDEV_STATE_DEGRADED);
    s->name = cairnd_arena_strdup(a, name);
    s->type = cairnd_arena_strdup(a, vd->type == VDEV_TYPE_ROOT ? "root" : vdev_type_name(vd));
    s->state = cairnd_arena_strdup(a, vdev_state_name((vdev_state_t)vd->state));
    /* Each vdev shows its own counters (errors are counted where they happen). */
    s->read_errors = vd->stats.read_errors;
    s->write_errors = vd->stats.write_errors;
    s->checksum_errors = vd->stats.checksum_errors;
    s->repaired_bytes = vd->stats.repaired_bytes;
    s->vclass = cairnd_arena_strdup(a, vd->alloc_class == VDEV_CLASS_LOG ? "log" : "");
    if (vd->nchildren) {
        s->children = cairnd_arena_alloc(a, sizeof(*s->children) * vd->nchildren);
        for (uint32_t i = 0; i < vd->nchildren; i++) {
            /* A removed log vdev's hole keeps its id; there is nothing to show. */
            if (vd->children[i]->type == VDEV_TYPE_HOLE) continue;
            s->children[s->n_children++] = vdev_status(a, spa, vd->children[i]);
        }
    }
    return s;
}

static Cairn__Mgmt__ScrubStatus *scan_status(cairnd_arena_t *a, const spa_scrub_stat_t *stp)
{
    spa_scrub_stat_t st = *stp;
    Cairn__Mgmt__ScrubStatus *s = cairnd_arena_alloc(a, sizeof *s);
    cairn__mgmt__scrub_status__init(s);
    s->state = (Cairn__Mgmt__ScrubStatus__State)st.state;
    s->start_time = st.start_time;
    s->end_time = st.end_time;
    s->to_examine = st.to_examine;
    s->examined = st.examined;
    s->repaired = st.repaired;
    s->errors = st.errors;
    s->scanned = st.scanned;
    s->now = cairn_wallclock_s();
    s->func = st.func;
    s->issued = st.issued;
    s->run_start = st.run_start;
    s->run_scanned = st.run_scanned;
    s->run_examined = st.run_examined;
    s->run_issued = st.run_issued;
    s->resumed = st.resumed;
    s->sequential = st.sequential;
    return s;
}

static Cairn__Mgmt__ScrubStatus *scrub_status(cairnd_arena_t *a, spa_t *spa)
{
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    return scan_status(a, &st);
}

/* The last sequential rebuild, when one finished since import (a scrub follows it). */
static Cairn__Mgmt__ScrubStatus *rebuild_status(cairnd_arena_t *a, spa_t *spa)
{
    spa_scrub_stat_t st;
    spa_rebuild_get(spa, &st);
    return st.state == SPA_SCRUB_NONE ? NULL : scan_status(a, &st);
}

/* Entries named in one `pool status -v` answer: enough for any operator, and
 * the answer stays far below a frame's limit. */
#define STATUS_ERRORS_MAX 10000

/* Names the pool's error log: each bookmark's dataset, and for a file its path
 * (parent pointers, zpl_obj_to_path), with the bytes of the object the block
 * holds. Bookmarks come sorted by object set, so each dataset is held once. */
static void status_errors(cairnd_arena_t *a, spa_t *spa, dsl_pool_t *dp,
                          Cairn__Mgmt__PoolStatusResult *r, bool verbose)
{
    spa_bookmark_t *bms = NULL;
    size_t n = spa_errlog_list(spa, &bms);
    r->error_count = n;
    if (!verbose || !n || !dp) {
        free(bms);
        return;
    }
    size_t shown = CAIRN_MIN(n, (size_t)STATUS_ERRORS_MAX);
    r->errors = cairnd_arena_alloc(a, sizeof(*r->errors) * shown);
    dsl_dataset_t *ds = NULL;
    uint64_t ds_id = UINT64_MAX;
    char dsname[DSL_NAME_MAX + 1] = "";
    char *path = malloc(4096);
    for (size_t i = 0; i < shown; i++) {
        const spa_bookmark_t *bm = &bms[i];
        if (bm->objset != ds_id) {
            dsl_dataset_rele(ds);
            ds = NULL;
            ds_id = bm->objset;
            /* Object set 0 is the MOS: pool metadata, no dataset. */
            if (ds_id == 0 || dsl_dataset_hold_by_objset_id(dp, ds_id, &ds)) ds = NULL;
            if (ds) dsl_dataset_get_name(ds, dsname, sizeof dsname);
        }
        Cairn__Mgmt__DataError *e = cairnd_arena_alloc(a, sizeof *e);
        cairn__mgmt__data_error__init(e);
        e->objset = bm->objset;
        e->object = bm->object;
        e->level = bm->level;
        e->blkid = bm->blkid;
        dsl_type_t type = ds ? dsl_dataset_type(ds) : 0;
        e->dataset = cairnd_arena_strdup(a, ds ? dsname : "");
        e->type = cairnd_arena_strdup(a, type == DSL_TYPE_FILESYSTEM ? "filesystem"
                                         : type == DSL_TYPE_VOLUME   ? "volume"
                                         : type == DSL_TYPE_SNAPSHOT ? "snapshot"
                                                                     : "");
        objset_t *os = ds ? dsl_dataset_objset(ds) : NULL;
        dmu_object_info_t info;
        if (os && bm->level >= 0 && bm->level < 6 && bm->object &&
            dmu_object_info(os, bm->object, &info) == 0) {
            uint64_t span = (uint64_t)info.props.recordsize << (10 * bm->level);
            if (bm->blkid <= UINT64_MAX / span) {
                e->offset = bm->blkid * span;
                e->length = span;
            }
        }
        if (os && path && bm->object && type != DSL_TYPE_VOLUME &&
            zpl_obj_to_path(os, bm->object, path, 4096) == 0)
            e->path = cairnd_arena_strdup(a, path);
        else
            e->path = cairnd_arena_strdup(a, "");
        r->errors[r->n_errors++] = e;
    }
    dsl_dataset_rele(ds);
    free(path);
    free(bms);
}

/* Builds an spa_vdev_spec_t over the message's strings (valid while req lives). */
static spa_vdev_spec_t *spec_from_msg(cairnd_arena_t *a, const Cairn__Mgmt__VdevSpec *m,
                                      int depth, char *err, size_t errlen)
{
    if (depth > 2) {
        snprintf(err, errlen, "vdev tree too deep");
        return NULL;
    }
    spa_vdev_spec_t *s = cairnd_arena_alloc(a, sizeof *s);
    switch (m->type) {
    case CAIRN__MGMT__VDEV_SPEC__TYPE__ROOT: s->type = VDEV_TYPE_ROOT; break;
    case CAIRN__MGMT__VDEV_SPEC__TYPE__LEAF: s->type = VDEV_TYPE_LEAF; break;
    case CAIRN__MGMT__VDEV_SPEC__TYPE__MIRROR: s->type = VDEV_TYPE_MIRROR; break;
    case CAIRN__MGMT__VDEV_SPEC__TYPE__RAIDZ: s->type = VDEV_TYPE_RAIDZ; break;
    default: snprintf(err, errlen, "unknown vdev type %d", (int)m->type); return NULL;
    }
    if (m->vclass > VDEV_CLASS_LOG || (m->vclass && depth != 1)) {
        snprintf(err, errlen, "bad vdev class %u", m->vclass);
        return NULL;
    }
    s->vclass = m->vclass;
    if ((depth == 0) != (s->type == VDEV_TYPE_ROOT)) {
        snprintf(err, errlen, "malformed vdev tree");
        return NULL;
    }
    if (s->type == VDEV_TYPE_LEAF) {
        if (!m->path || !device_path_ok(m->path)) {
            snprintf(err, errlen, "device paths must be absolute ('%s')", m->path ? m->path : "");
            return NULL;
        }
        s->path = m->path;
        return s;
    }
    s->nparity = m->nparity;
    s->nchildren = (uint32_t)m->n_children;
    s->children = cairnd_arena_alloc(a, sizeof(*s->children) * m->n_children);
    for (size_t i = 0; i < m->n_children; i++) {
        spa_vdev_spec_t *c = spec_from_msg(a, m->children[i], depth + 1, err, errlen);
        if (!c) return NULL;
        s->children[i] = *c;
    }
    return s;
}

static const char *const g_readonly_props[] = {"size", "alloc", "free", "capacity",
                                                "health", "guid", "ashift", "logregion",
                                                "logused", "expandsize", "bcloneused",
                                                "bclonesaved", "bcloneratio", NULL};
static bool prop_readonly(const char *name)
{
    for (const char *const *p = g_readonly_props; *p; p++)
        if (!strcmp(*p, name)) return true;
    return false;
}
static bool prop_known(const char *name)
{
    for (const char *const *p = spa_prop_names(); *p; p++)
        if (!strcmp(*p, name)) return true;
    return false;
}

/* ---------------------------------------------------------------- handlers */

static void do_list(const Cairn__Mgmt__PoolList *m, Cairn__Mgmt__Response *resp,
                    cairnd_arena_t *a)
{
    Cairn__Mgmt__PoolRows *rows = cairnd_arena_alloc(a, sizeof *rows);
    cairn__mgmt__pool_rows__init(rows);
    rows->rows = cairnd_arena_alloc(a, sizeof(*rows->rows) * (cairnd_table_count() + 1));
    for (size_t i = 0; i < cairnd_table_count(); i++) {
        if (!cairnd_table_at(i)->spa) continue;
        if (m->name[0] && strcmp(m->name, cairnd_table_at(i)->name)) continue;
        rows->rows[rows->n_rows++] = pool_row(a, cairnd_table_at(i)->spa, cairnd_table_at(i)->dp);
    }
    if (m->name[0] && rows->n_rows == 0) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_LIST;
    resp->pool_list = rows;
}

static void do_status(const Cairn__Mgmt__PoolStatus *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    Cairn__Mgmt__PoolStatuses *st = cairnd_arena_alloc(a, sizeof *st);
    cairn__mgmt__pool_statuses__init(st);
    st->pools = cairnd_arena_alloc(a, sizeof(*st->pools) * (cairnd_table_count() + 1));
    for (size_t i = 0; i < cairnd_table_count(); i++) {
        spa_t *spa = cairnd_table_at(i)->spa;
        if (!spa || (m->name[0] && strcmp(m->name, cairnd_table_at(i)->name))) continue;
        Cairn__Mgmt__PoolStatusResult *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__pool_status_result__init(r);
        r->name = cairnd_arena_strdup(a, spa_name(spa));
        r->state = cairnd_arena_strdup(a, spa_health_name(spa));
        r->guid = spa_guid(spa);
        r->scrub = scrub_status(a, spa);
        r->rebuild = rebuild_status(a, spa);
        r->root = vdev_status(a, spa, spa_root_vdev(spa));
        r->txg = spa_last_synced_txg(spa);
        r->n_cache = cairnd_arc_cache_status(spa, a, &r->cache);
        r->n_spares = spare_status(a, spa, &r->spares);
        status_errors(a, spa, cairnd_table_at(i)->dp, r, m->verbose);
        st->pools[st->n_pools++] = r;
    }
    if (m->name[0] && st->n_pools == 0) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS;
    resp->pool_status = st;
}

static void spec_paths(const spa_vdev_spec_t *s, char ***paths, size_t *n);

static void free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

/* Whether two device paths name one device (a test's "fault:FILE" is FILE). */
static bool same_device(const char *x, const char *y)
{
    return !strcmp(vdev_leaf_device_path(x), vdev_leaf_device_path(y));
}

/* The role device path already has in spa, as words before "pool 'NAME'":
 * "in", "a spare of", "a cache device of"; NULL: none. */
static const char *role_in_pool(spa_t *spa, const char *path)
{
    char **leaves = NULL;
    size_t n = 0;
    const char *role = NULL;
    if (spa_leaf_paths(spa, &leaves, &n) == 0)
        for (size_t i = 0; i < n && !role; i++)
            if (same_device(leaves[i], path)) role = "in";
    free_paths(leaves, n);
    spa_spare_info_t spares[SPARES_MAX];
    size_t ns = spa_spares_get(spa, spares, SPARES_MAX);
    for (size_t i = 0; i < ns && !role; i++)
        if (same_device(spares[i].path, path)) role = "a spare of";
    if (!role && cairnd_arc_is_device(spa, path)) role = "a cache device of";
    return role;
}

/* Every device a create or an add names - data and log leaves, cache devices,
 * spares - is named once, and (add: spa) is none of the pool's already: a disk
 * that were both a data disk and a spare or a cache device would have two
 * owners writing it. 0, or an error naming the device. */
static int devices_once(spa_t *spa, const spa_vdev_spec_t *root, char **cache, size_t ncache,
                        char **spares, size_t nspares, char *err, size_t errlen)
{
    char **given = NULL;
    size_t n = 0;
    if (root) spec_paths(root, &given, &n);
    given = cairn_realloc(given, (n + ncache + nspares + 1) * sizeof *given);
    for (size_t i = 0; i < ncache; i++) given[n++] = cairn_strdup(cache[i]);
    for (size_t i = 0; i < nspares; i++) given[n++] = cairn_strdup(spares[i]);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        for (size_t j = 0; j < i && !rc; j++)
            if (same_device(given[i], given[j])) {
                snprintf(err, errlen, "device '%s' is given more than once", given[i]);
                rc = -EINVAL;
            }
        const char *role = rc || !spa ? NULL : role_in_pool(spa, given[i]);
        if (role) {
            snprintf(err, errlen, "device '%s' is already %s pool '%s'", given[i], role, spa_name(spa));
            rc = -EEXIST;
        }
    }
    free_paths(given, n);
    return rc;
}

static void do_create(const Cairn__Mgmt__PoolCreate *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    char err[512] = "";
    if (mgmt_pool_name_check(m->name, err, sizeof err)) {
        set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    if (cairnd_table_find(m->name)) {
        set_error(resp, a, -EEXIST, "pool '%s' already exists", m->name);
        return;
    }
    if (!m->root) {
        set_error(resp, a, -EINVAL, "no vdevs given");
        return;
    }
    spa_vdev_spec_t *root = spec_from_msg(a, m->root, 0, err, sizeof err);
    if (!root) {
        set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    int dup = devices_once(NULL, root, m->cache_devices, m->n_cache_devices, m->spares,
                           m->n_spares, err, sizeof err);
    if (dup) {
        set_error(resp, a, dup, "cannot create '%s': %s", m->name, err);
        return;
    }
    spa_create_opts_t opts = {.ashift = 0, .force = m->force};
    /* Validate every property before touching a device. */
    for (size_t i = 0; i < m->n_props; i++) {
        const char *n = m->props[i]->name, *v = m->props[i]->value;
        if (!strcmp(n, "ashift")) {
            char *end;
            unsigned long s = strtoul(v, &end, 10);
            if (!*v || *end || s < 9 || s > 16) {
                set_error(resp, a, -EINVAL, "bad ashift '%s' (want 9..16)", v);
                return;
            }
            opts.ashift = (uint32_t)s;
        } else if (!prop_known(n)) {
            set_error(resp, a, -EINVAL, "unknown pool property '%s'", n);
            return;
        } else if (prop_readonly(n)) {
            set_error(resp, a, -EINVAL, "pool property '%s' is read-only", n);
            return;
        }
    }
    spa_t *spa = NULL;
    int rc = spa_create(m->name, root, &opts, &spa, err, sizeof err);
    if (rc) {
        set_error(resp, a, rc, "cannot create '%s': %s", m->name, err[0] ? err : strerror(-rc));
        return;
    }
    for (size_t i = 0; i < m->n_props; i++) {
        const char *n = m->props[i]->name, *v = m->props[i]->value;
        if (!strcmp(n, "ashift")) continue;
        rc = spa_prop_set(spa, n, v, err, sizeof err);
        if (rc) {
            /* Leave no half-configured pool behind: the devices become reusable again. */
            spa_destroy(spa);
            set_error(resp, a, rc, "cannot set %s=%s: %s", n, v, err[0] ? err : strerror(-rc));
            return;
        }
    }
    rc = cairnd_arc_add_devices(spa, m->cache_devices, m->n_cache_devices, err, sizeof err);
    if (!rc) rc = add_spares(spa, m->spares, m->n_spares, m->force, false, err, sizeof err);
    if (rc) { /* L2ARC: the `cache` section (arc.c); hot spares */
        spa_destroy(spa);
        set_error(resp, a, rc, "cannot create '%s': %s", m->name, err);
        return;
    }
    dsl_pool_t *dp = NULL;
    rc = dsl_pool_open(spa, &dp);
    if (rc) {
        spa_destroy(spa);
        set_error(resp, a, rc, "cannot create '%s': cannot set up its root dataset: %s", m->name,
                  strerror(-rc));
        return;
    }
    add_pool(spa, dp);
    cairnd_table_write_cache();
    cairnd_shares_refresh();
    log_info(SUB, "created pool '%s'", m->name);
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL;
    resp->pool = pool_row(a, spa, dp);
}

static const char *pool_state_name(int s)
{
    switch (s) {
    case SPA_STATE_ACTIVE: return "active";
    case SPA_STATE_EXPORTED: return "exported";
    case SPA_STATE_DESTROYED: return "destroyed";
    default: return "unknown";
    }
}

/* Imports, one at a time, without the table lock while the pool's devices are
 * read: the multihost activity check of a pool waits for seconds, and the
 * daemon's other pools (an active/active partner's monitor) must not wait with it. */
static pthread_mutex_t g_import_lock = PTHREAD_MUTEX_INITIALIZER;

/* The import's first part, without the table lock: checks, the candidates' list,
 * or the pool opened (true, *out). */
static bool import_open(const Cairn__Mgmt__PoolImport *m, Cairn__Mgmt__Response *resp,
                        cairnd_arena_t *a, spa_t **out)
{
    for (size_t i = 0; i < m->n_dirs; i++)
        if (m->dirs[i][0] != '/') {
            set_error(resp, a, -EINVAL, "search paths must be absolute ('%s')", m->dirs[i]);
            return false;
        }
    if (m->n_dirs == 0) {
        set_error(resp, a, -EINVAL, "no search directory given (use -d DIR)");
        return false;
    }
    const char *const *dirs = (const char *const *)m->dirs;
    if (!m->name[0]) {
        spa_import_candidate_t *c = NULL;
        size_t n = 0;
        int rc = spa_import_scan(dirs, m->n_dirs, &c, &n);
        if (rc) {
            set_error(resp, a, rc, "cannot scan for pools: %s", strerror(-rc));
            return false;
        }
        Cairn__Mgmt__ImportCandidates *ic = cairnd_arena_alloc(a, sizeof *ic);
        cairn__mgmt__import_candidates__init(ic);
        ic->candidates = cairnd_arena_alloc(a, sizeof(*ic->candidates) * (n + 1));
        for (size_t i = 0; i < n; i++) {
            Cairn__Mgmt__ImportCandidate *x = cairnd_arena_alloc(a, sizeof *x);
            cairn__mgmt__import_candidate__init(x);
            x->name = cairnd_arena_strdup(a, c[i].name);
            x->guid = c[i].guid;
            x->txg = c[i].txg;
            x->state = cairnd_arena_strdup(a, pool_state_name(c[i].state));
            x->nleaves_found = c[i].nleaves_found;
            ic->candidates[ic->n_candidates++] = x;
        }
        free(c);
        resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_IMPORT_CANDIDATES;
        resp->import_candidates = ic;
        return false;
    }
    cairnd_table_lock(false);
    bool exists = cairnd_table_find_spa(m->name) != NULL;
    cairnd_table_unlock();
    if (exists) {
        set_error(resp, a, -EEXIST, "pool '%s' is already imported", m->name);
        return false;
    }
    char err[512] = "";
    spa_t *spa = NULL;
    int rc = spa_import(m->name, dirs, m->n_dirs,
                        (m->force ? SPA_IMPORT_FORCE : 0) |
                            (m->missing_log ? SPA_IMPORT_MISSING_LOG : 0),
                        &spa, err, sizeof err);
    if (rc) {
        set_error(resp, a, rc, "cannot import '%s': %s", m->name, err[0] ? err : strerror(-rc));
        return false;
    }
    *out = spa;
    return true;
}

/* The rest, under the table lock (write). */
static void import_finish(const Cairn__Mgmt__PoolImport *m, spa_t *spa, Cairn__Mgmt__Response *resp,
                          cairnd_arena_t *a)
{
    cairnd_pool_entry_t *stale = cairnd_table_find(spa_name(spa));
    if (stale && stale->spa) {
        /* Imported by name alias/guid to a pool we already hold: refuse. */
        spa_close(spa);
        set_error(resp, a, -EEXIST, "pool '%s' is already imported", spa_name(stale->spa));
        return;
    }
    dsl_pool_t *dp = NULL;
    int rc = dsl_pool_open(spa, &dp);
    if (rc) {
        spa_close(spa);
        set_error(resp, a, rc, "cannot import '%s': cannot open its datasets: %s", m->name,
                  strerror(-rc));
        return;
    }
    add_pool(spa, dp);
    cairnd_iscsi_pool_opened(dp);
    cairnd_table_write_cache();
    cairnd_shares_refresh();
    log_info(SUB, "imported pool '%s'", spa_name(spa));
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL;
    resp->pool = pool_row(a, spa, dp);
    /* -m dropped what only a missing log device held: the administrator hears it. */
    vdev_t *root = spa_root_vdev(spa);
    for (uint32_t i = 0; i < root->nchildren; i++) {
        vdev_t *top = root->children[i];
        int st = atomic_load(&top->state);
        if (top->alloc_class != VDEV_CLASS_LOG || (st != VDEV_STATE_FAULTED && st != VDEV_STATE_UNAVAIL))
            continue;
        char name[MGMT_PATH_MAX];
        if (vdev_is_leaf(top)) cairn_strlcpy(name, top->path ? top->path : "?", sizeof name);
        else snprintf(name, sizeof name, "%s-%u", vdev_type_name(top), top->id);
        char w[2 * MGMT_PATH_MAX + 512];
        snprintf(w, sizeof w, "pool '%s' imported without its log device '%s': synchronous "
                 "writes that only it held are lost; 'cairn pool remove %s %s' drops it",
                 spa_name(spa), name, spa_name(spa), name);
        resp->warning = cairnd_arena_strdup(a, w);
        break;
    }
}

/* Called without the table lock (dispatch.c leaves it to us); returns holding it
 * for writing, which the dispatcher releases. */
static void do_import(const Cairn__Mgmt__PoolImport *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    pthread_mutex_lock(&g_import_lock);
    spa_t *spa = NULL;
    bool opened = import_open(m, resp, a, &spa);
    cairnd_table_lock(true);
    if (opened) import_finish(m, spa, resp, a);
    pthread_mutex_unlock(&g_import_lock);
}

static void do_export_destroy(const char *name, bool destroy, Cairn__Mgmt__Response *resp,
                              cairnd_arena_t *a)
{
    cairnd_pool_entry_t *e = cairnd_table_find(name);
    if (!e || !e->spa) {
        if (e && destroy) {
            /* A cached pool that never came back: forget it. */
            cairnd_table_remove(e);
            cairnd_table_write_cache();
            set_error(resp, a, -ENOENT,
                      "pool '%s' is not imported (its disks were missing); removed it from "
                      "the cache",
                      name);
            return;
        }
        NO_SUCH_POOL(resp, a, name);
        return;
    }
    spa_t *spa = e->spa;
    if (e->dp) cairnd_iscsi_pool_exporting(e->dp);
    cairnd_shares_pool_closing(e->dp);
    /* The DSL writes out what it holds before the pool's final txg. */
    if (e->dp) cairnd_iscsi_pool_closing(e->dp);
    if (e->dp) dsl_pool_close(e->dp);
    e->dp = NULL;
    uint64_t guid = spa_guid(spa);
    int rc = destroy ? spa_destroy(spa) : spa_export(spa);
    if (destroy) cairnd_arc_pool_destroyed(guid); /* L2ARC: forget its cache devices */
    /* Either call closes the pool, even when writing the labels failed. */
    cairnd_table_remove(e);
    cairnd_table_write_cache();
    if (rc) {
        set_error(resp, a, rc, "cannot %s '%s': %s", destroy ? "destroy" : "export", name,
                  strerror(-rc));
        return;
    }
    log_info(SUB, "%s pool '%s'", destroy ? "destroyed" : "exported", name);
}

static void do_scrub(const Cairn__Mgmt__PoolScrub *m, Cairn__Mgmt__Response *resp,
                     cairnd_arena_t *a)
{
    spa_t *spa = cairnd_table_find_spa(m->name);
    if (!spa) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    int rc = m->stop ? spa_scrub_stop(spa) : spa_scrub_start(spa);
    if (rc) {
        if (m->stop && rc == -ENOENT)
            set_error(resp, a, rc, "there is no active scrub on '%s'", m->name);
        else if (!m->stop && rc == -EBUSY) {
            spa_scrub_stat_t st;
            spa_scrub_get(spa, &st);
            set_error(resp, a, rc, st.func == SPA_SCAN_RESILVER
                                       ? "a resilver is in progress on '%s'; scrub once it ends"
                                       : "a scrub is already running on '%s'", m->name);
        }
        else
            set_error(resp, a, rc, "cannot %s scrub on '%s': %s", m->stop ? "stop" : "start",
                      m->name, strerror(-rc));
        return;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_SCRUB;
    resp->scrub = scrub_status(a, spa);
}

static void add_prop(Cairn__Mgmt__PropertyList *pl, cairnd_arena_t *a, spa_t *spa,
                     const char *name)
{
    char buf[1024] = "";
    int rc = spa_prop_get(spa, name, buf, sizeof buf);
    Cairn__Mgmt__Property *p = cairnd_arena_alloc(a, sizeof *p);
    cairn__mgmt__property__init(p);
    p->target = cairnd_arena_strdup(a, spa_name(spa));
    p->name = cairnd_arena_strdup(a, name);
    p->value = cairnd_arena_strdup(a, rc ? "-" : buf);
    p->source = cairnd_arena_strdup(a, prop_readonly(name)                         ? "-"
                                       : (rc || spa_prop_is_default(spa, name)) ? "default"
                                                                                 : "local");
    pl->props[pl->n_props++] = p;
}

static void refresh_paths(cairnd_pool_entry_t *e);


/* offline, online, replace, attach, detach: the pool's own lock orders them with its
 * syncs. */
static void do_leaf_change(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a)
{
    const char *name;
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_POOL_OFFLINE: name = req->pool_offline->name; break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ONLINE: name = req->pool_online->name; break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH: name = req->pool_attach->name; break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_DETACH: name = req->pool_detach->name; break;
    default: name = req->pool_replace->name; break;
    }
    cairnd_pool_entry_t *e = cairnd_table_find(name);
    if (!e || !e->spa) {
        NO_SUCH_POOL(resp, a, name);
        return;
    }
    char err[512] = "";
    int rc;
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_POOL_OFFLINE:
        rc = spa_vdev_offline(e->spa, req->pool_offline->device, req->pool_offline->temporary, err,
                              sizeof err);
        break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ONLINE:
        rc = spa_vdev_online(e->spa, req->pool_online->device, err, sizeof err);
        if (!rc && req->pool_online->expand)
            rc = spa_vdev_expand(e->spa, req->pool_online->device, err, sizeof err);
        break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH: {
        const Cairn__Mgmt__PoolAttach *m = req->pool_attach;
        if (!device_path_ok(m->new_device)) {
            set_error(resp, a, -EINVAL, "device paths must be absolute");
            return;
        }
        rc = spa_vdev_attach(e->spa, m->device, m->new_device, m->force, m->sequential, err,
                             sizeof err);
        if (!rc) refresh_paths(e);
        break;
    }
    case CAIRN__MGMT__REQUEST__CMD_POOL_DETACH:
        rc = spa_vdev_detach(e->spa, req->pool_detach->device, err, sizeof err);
        if (!rc) refresh_paths(e);
        break;
    default: {
        const Cairn__Mgmt__PoolReplace *m = req->pool_replace;
        if (!device_path_ok(m->old_device) || (m->new_device[0] && !device_path_ok(m->new_device))) {
            set_error(resp, a, -EINVAL, "device paths must be absolute");
            return;
        }
        rc = spa_vdev_replace(e->spa, m->old_device, m->new_device[0] ? m->new_device : NULL,
                              m->force, m->sequential, err, sizeof err);
        /* The cache file lists NEW from now on, so a restart finds it. */
        if (!rc) refresh_paths(e);
        break;
    }
    }
    if (rc) set_error(resp, a, rc, "%s", err[0] ? err : strerror(-rc));
}

static void do_get(const Cairn__Mgmt__PoolGet *m, Cairn__Mgmt__Response *resp,
                   cairnd_arena_t *a)
{
    bool all = m->n_props == 0;
    for (size_t i = 0; i < m->n_props; i++) {
        if (!strcmp(m->props[i], "all")) all = true;
        else if (!prop_known(m->props[i])) {
            set_error(resp, a, -EINVAL, "unknown pool property '%s'", m->props[i]);
            return;
        }
    }
    size_t nnames = 0;
    while (spa_prop_names()[nnames]) nnames++;
    size_t per_pool = all ? nnames : m->n_props;
    Cairn__Mgmt__PropertyList *pl = cairnd_arena_alloc(a, sizeof *pl);
    cairn__mgmt__property_list__init(pl);
    pl->props = cairnd_arena_alloc(a, sizeof(*pl->props) * (per_pool * cairnd_table_count() + 1));
    bool found = false;
    for (size_t i = 0; i < cairnd_table_count(); i++) {
        spa_t *spa = cairnd_table_at(i)->spa;
        if (!spa || (m->name[0] && strcmp(m->name, cairnd_table_at(i)->name))) continue;
        found = true;
        if (all)
            for (size_t j = 0; j < nnames; j++) add_prop(pl, a, spa, spa_prop_names()[j]);
        else
            for (size_t j = 0; j < m->n_props; j++) add_prop(pl, a, spa, m->props[j]);
    }
    if (m->name[0] && !found) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_PROPS;
    resp->props = pl;
}

static void do_set(const Cairn__Mgmt__PoolSet *m, Cairn__Mgmt__Response *resp,
                   cairnd_arena_t *a)
{
    spa_t *spa = cairnd_table_find_spa(m->name);
    if (!spa) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    if (!prop_known(m->prop)) {
        set_error(resp, a, -EINVAL, "unknown pool property '%s'", m->prop);
        return;
    }
    if (prop_readonly(m->prop)) {
        set_error(resp, a, -EINVAL, "pool property '%s' is read-only", m->prop);
        return;
    }
    char err[512] = "";
    int rc = spa_prop_set(spa, m->prop, m->value, err, sizeof err);
    if (rc) set_error(resp, a, rc, "cannot set %s: %s", m->prop, err[0] ? err : strerror(-rc));
}

/* Collects the leaf paths of a spec (for the cache file before the devices join). */
static void spec_paths(const spa_vdev_spec_t *s, char ***paths, size_t *n)
{
    if (s->type == VDEV_TYPE_LEAF) {
        *paths = cairn_realloc(*paths, (*n + 1) * sizeof **paths);
        (*paths)[(*n)++] = cairn_strdup(s->path);
        return;
    }
    for (uint32_t i = 0; i < s->nchildren; i++) spec_paths(&s->children[i], paths, n);
}

/* The cache file's leaf list from the pool as it is now. */
static void refresh_paths(cairnd_pool_entry_t *e)
{
    char **paths = NULL;
    size_t n = 0;
    if (spa_leaf_paths(e->spa, &paths, &n) == 0) {
        cairnd_table_entry_free_paths(e);
        e->paths = paths;
        e->npaths = n;
    }
    cairnd_table_write_cache();
}

/* `pool add -n`: the checks of a real add (the CLI prints the layout), no change.
 * Cache devices are only checked to exist and be unused by this pool; spares get
 * the checks of a real add of spares. */
static void do_add_dry_run(spa_t *spa, const spa_vdev_spec_t *root, const Cairn__Mgmt__PoolAdd *m,
                           Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    char err[512] = "";
    for (size_t i = 0; i < m->n_cache_devices; i++) {
        if (access(m->cache_devices[i], F_OK)) {
            set_error(resp, a, -ENOENT, "cannot add to '%s': cannot open '%s': %s", m->name,
                      m->cache_devices[i], strerror(errno));
            return;
        }
        if (cairnd_arc_is_device(spa, m->cache_devices[i])) {
            set_error(resp, a, -EEXIST, "cannot add to '%s': '%s' is already a cache device",
                      m->name, m->cache_devices[i]);
            return;
        }
    }
    int rc = root ? spa_vdev_add_dry_run(spa, root, m->force, err, sizeof err) : 0;
    if (!rc) rc = add_spares(spa, m->spares, m->n_spares, m->force, true, err, sizeof err);
    if (rc) set_error(resp, a, rc, "cannot add to '%s': %s", m->name, err[0] ? err : strerror(-rc));
}

static void do_add(const Cairn__Mgmt__PoolAdd *m, Cairn__Mgmt__Response *resp,
                   cairnd_arena_t *a)
{
    cairnd_pool_entry_t *e = cairnd_table_find(m->name);
    if (!e || !e->spa) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    char err[512] = "";
    spa_vdev_spec_t *root = NULL;
    if (m->root) {
        root = spec_from_msg(a, m->root, 0, err, sizeof err);
        if (!root) {
            set_error(resp, a, -EINVAL, "%s", err);
            return;
        }
        if (!root->nchildren) root = NULL;
    }
    if (!root && !m->n_cache_devices && !m->n_spares) {
        set_error(resp, a, -EINVAL, "cannot add to '%s': no vdevs given", m->name);
        return;
    }
    int dup = devices_once(e->spa, root, m->cache_devices, m->n_cache_devices, m->spares,
                           m->n_spares, err, sizeof err);
    if (dup) {
        set_error(resp, a, dup, "cannot add to '%s': %s", m->name, err);
        return;
    }
    if (m->dry_run) {
        do_add_dry_run(e->spa, root, m, resp, a);
        return;
    }
    if (m->n_spares) { /* spares first: they take nothing the rest could need back */
        int rs = add_spares(e->spa, m->spares, m->n_spares, m->force, false, err, sizeof err);
        if (rs) {
            set_error(resp, a, rs, "cannot add to '%s': %s", m->name, err);
            return;
        }
    }
    /* Cache devices first: they can be taken back if the log vdevs fail. */
    int rc = cairnd_arc_add_devices(e->spa, m->cache_devices, m->n_cache_devices, err, sizeof err);
    if (rc) {
        set_error(resp, a, rc, "cannot add to '%s': %s", m->name, err);
        return;
    }
    if (!root) return;
    /* The cache file names the new devices before they join: a crash right after
     * must find them at the next start, or the pool would miss its log device. */
    spec_paths(root, &e->paths, &e->npaths);
    cairnd_table_write_cache();
    rc = spa_vdev_add(e->spa, root, m->force, err, sizeof err);
    refresh_paths(e);
    if (rc) {
        for (size_t i = 0; i < m->n_cache_devices; i++)
            cairnd_arc_remove_device(e->spa, m->cache_devices[i]);
        set_error(resp, a, rc, "cannot add to '%s': %s", m->name, err[0] ? err : strerror(-rc));
        return;
    }
    log_info(SUB, "pool '%s': vdevs added", m->name);
}

static void do_remove(const Cairn__Mgmt__PoolRemove *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    cairnd_pool_entry_t *e = cairnd_table_find(m->name);
    if (!e || !e->spa) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    if (!m->device || !m->device[0]) {
        set_error(resp, a, -EINVAL, "cannot remove: no device given");
        return;
    }
    if (cairnd_arc_is_device(e->spa, m->device)) {
        int rc = cairnd_arc_remove_device(e->spa, m->device);
        if (rc) set_error(resp, a, rc, "cannot remove '%s': %s", m->device, strerror(-rc));
        return;
    }
    char err[512] = "";
    if (spa_is_spare(e->spa, m->device)) { /* a hot spare: refused while in use */
        int rc = spa_spare_remove(e->spa, m->device, err, sizeof err);
        if (rc) set_error(resp, a, rc, "%s", err);
        return;
    }
    int id = spa_vdev_remove_log_begin(e->spa, m->device, err, sizeof err);
    if (id < 0) {
        set_error(resp, a, id, "%s", err);
        return;
    }
    /* Every open intent log starts a new chain away from the vdev. */
    int rc = zil_restart_chains(e->spa);
    if (rc) {
        spa_vdev_remove_log_abort(e->spa);
        set_error(resp, a, rc, "cannot remove '%s': cannot move the intent logs off it: %s",
                  m->device, strerror(-rc));
        return;
    }
    rc = spa_vdev_remove_log_commit(e->spa, (uint32_t)id, m->device, err, sizeof err);
    if (rc) {
        set_error(resp, a, rc, "%s", err);
        return;
    }
    refresh_paths(e);
}

/* ---- pool iostat ---- */

static Cairn__Mgmt__VdevIostat *iostat_node(cairnd_arena_t *a, const char *name, const char *vclass)
{
    Cairn__Mgmt__VdevIostat *n = cairnd_arena_alloc(a, sizeof *n);
    cairn__mgmt__vdev_iostat__init(n);
    n->name = cairnd_arena_strdup(a, name);
    n->vclass = cairnd_arena_strdup(a, vclass);
    return n;
}

static void iostat_add_child(cairnd_arena_t *a, Cairn__Mgmt__VdevIostat *p, Cairn__Mgmt__VdevIostat *c)
{
    Cairn__Mgmt__VdevIostat **nv = cairnd_arena_alloc(a, (p->n_children + 1) * sizeof *nv);
    if (p->n_children) memcpy(nv, p->children, p->n_children * sizeof *nv);
    nv[p->n_children++] = c;
    p->children = nv;
}

/* A vdev and its subtree; an interior vdev's I/O is the sum of its leaves'. */
static Cairn__Mgmt__VdevIostat *iostat_vdev(cairnd_arena_t *a, vdev_t *vd)
{
    char name[MGMT_PATH_MAX];
    if (vdev_is_leaf(vd)) cairn_strlcpy(name, vd->path ? vd->path : "?", sizeof name);
    else snprintf(name, sizeof name, "%s-%u", vdev_type_name(vd), vd->id);
    Cairn__Mgmt__VdevIostat *n =
        iostat_node(a, name, vd->parent && vd->parent->type == VDEV_TYPE_ROOT &&
                                     vd->alloc_class == VDEV_CLASS_LOG ? "log" : "");
    if (vdev_is_leaf(vd)) {
        n->reads = atomic_load(&vd->stats.reads);
        n->writes = atomic_load(&vd->stats.writes);
        n->read_bytes = atomic_load(&vd->stats.read_bytes);
        n->write_bytes = atomic_load(&vd->stats.write_bytes);
    }
    for (uint32_t i = 0; i < vd->nchildren; i++) {
        Cairn__Mgmt__VdevIostat *c = iostat_vdev(a, vd->children[i]);
        n->reads += c->reads;
        n->writes += c->writes;
        n->read_bytes += c->read_bytes;
        n->write_bytes += c->write_bytes;
        iostat_add_child(a, n, c);
    }
    return n;
}

static void do_iostat(const Cairn__Mgmt__PoolIostat *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    Cairn__Mgmt__PoolIostats *st = cairnd_arena_alloc(a, sizeof *st);
    cairn__mgmt__pool_iostats__init(st);
    st->pools = cairnd_arena_alloc(a, sizeof(*st->pools) * (cairnd_table_count() + 1));
    for (size_t i = 0; i < cairnd_table_count(); i++) {
        spa_t *spa = cairnd_table_at(i)->spa;
        if (!spa || (m->name[0] && strcmp(m->name, cairnd_table_at(i)->name))) continue;
        Cairn__Mgmt__PoolIostatResult *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__pool_iostat_result__init(r);
        r->timestamp_ns = cairn_now_ns();
        r->import_ns = cairnd_table_at(i)->opened_ns;
        vdev_t *root = spa_root_vdev(spa);
        Cairn__Mgmt__VdevIostat *p = iostat_node(a, spa_name(spa), "");
        for (uint32_t t = 0; t < root->nchildren; t++) {
            if (root->children[t]->type == VDEV_TYPE_HOLE) continue;
            Cairn__Mgmt__VdevIostat *c = iostat_vdev(a, root->children[t]);
            spa_space_t sp;
            spa_top_space(spa, t, &sp);
            c->alloc = sp.alloc;
            c->size = sp.size;
            /* The pool's I/O is what its vdevs did; cache devices are the ARC's. */
            p->reads += c->reads;
            p->writes += c->writes;
            p->read_bytes += c->read_bytes;
            p->write_bytes += c->write_bytes;
            iostat_add_child(a, p, c);
        }
        spa_space_t sp;
        spa_get_space(spa, &sp);
        p->alloc = sp.alloc;
        p->size = sp.size;
        arc_l2_dev_stat_t ds[16];
        size_t nd = CAIRN_MIN(arc_l2_dev_stats(spa_guid(spa), ds, 16), (size_t)16);
        for (size_t k = 0; k < nd; k++) {
            Cairn__Mgmt__VdevIostat *c = iostat_node(a, ds[k].path, "cache");
            c->alloc = ds[k].alloc;
            c->size = ds[k].size;
            c->reads = ds[k].reads;
            c->writes = ds[k].writes;
            c->read_bytes = ds[k].read_bytes;
            c->write_bytes = ds[k].write_bytes;
            iostat_add_child(a, p, c);
        }
        r->root = p;
        st->pools[st->n_pools++] = r;
    }
    if (m->name[0] && st->n_pools == 0) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    st->arc = cairnd_arc_stats_msg(a);
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_IOSTAT;
    resp->pool_iostat = st;
}

/* `pool clear POOL [DEV]`: error counts, and FAULTED devices that answer again. */
static void do_clear(const Cairn__Mgmt__PoolClear *m, Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    spa_t *spa = cairnd_table_find_spa(m->name);
    if (!spa) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    char err[512] = "";
    int rc = spa_vdev_clear(spa, m->device && m->device[0] ? m->device : NULL, err, sizeof err);
    if (rc) set_error(resp, a, rc, "%s", err[0] ? err : strerror(-rc));
}

/* The most events one answer carries; a follower asks again for the rest. */
#define EVENTS_PER_ANSWER 256

/* `pool events`: read from the engine's ring without the pools lock, since a
 * follower waits here for the next event and must not hold up an export. */
static void do_events(const Cairn__Mgmt__PoolEvents *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    if (m->name && m->name[0]) {
        cairnd_table_lock(false);
        bool known = cairnd_table_find_spa(m->name) != NULL;
        cairnd_table_unlock();
        if (!known) {
            NO_SUCH_POOL(resp, a, m->name);
            return;
        }
    }
    Cairn__Mgmt__PoolEventList *l = cairnd_arena_alloc(a, sizeof *l);
    cairn__mgmt__pool_event_list__init(l);
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_EVENTS;
    resp->events = l;
    if (m->clear) {
        l->cleared = spa_events_clear();
        l->last = spa_events_last_seq();
        return;
    }
    spa_event_t *ev = malloc(EVENTS_PER_ANSWER * sizeof *ev);
    if (!ev) {
        set_error(resp, a, -ENOMEM, "out of memory");
        return;
    }
    uint32_t wait_ms = m->wait_ms > 5000 ? 5000 : m->wait_ms;
    /* Where the next ask resumes: after the last event sent, or (none sent)
     * after what had been posted before this read looked, so none is missed. */
    uint64_t before = spa_events_last_seq();
    size_t n = spa_events_read(m->after, m->name, ev, EVENTS_PER_ANSWER, wait_ms);
    uint64_t last = n ? ev[n - 1].seq : before;
    l->last = last > m->after ? last : m->after;
    l->events = cairnd_arena_alloc(a, (n ? n : 1) * sizeof *l->events);
    for (size_t i = 0; i < n; i++) {
        Cairn__Mgmt__PoolEvent *e = cairnd_arena_alloc(a, sizeof *e);
        cairn__mgmt__pool_event__init(e);
        e->seq = ev[i].seq;
        e->time_ns = ev[i].time_ns;
        e->pool = cairnd_arena_strdup(a, ev[i].pool);
        e->eclass = cairnd_arena_strdup(a, ev[i].cls);
        e->detail = cairnd_arena_strdup(a, ev[i].detail);
        l->events[l->n_events++] = e;
    }
    free(ev);
}


bool cairnd_handle_pool(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                        cairnd_arena_t *a)
{
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_POOL_CREATE: do_create(req->pool_create, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_LIST: do_list(req->pool_list, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_STATUS: do_status(req->pool_status, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_EXPORT:
        do_export_destroy(req->pool_export->name, false, resp, a);
        break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_DESTROY:
        do_export_destroy(req->pool_destroy->name, true, resp, a);
        break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_IMPORT: do_import(req->pool_import, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_SCRUB: do_scrub(req->pool_scrub, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_CLEAR: do_clear(req->pool_clear, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_GET: do_get(req->pool_get, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_SET: do_set(req->pool_set, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ADD: do_add(req->pool_add, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_REMOVE: do_remove(req->pool_remove, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_OFFLINE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_ONLINE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_REPLACE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH:
    case CAIRN__MGMT__REQUEST__CMD_POOL_DETACH: do_leaf_change(req, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_POOL_IOSTAT: do_iostat(req->pool_iostat, resp, a); break;
    default: return false;
    }
    return true;
}

void cairnd_handle_pool_events(const Cairn__Mgmt__PoolEvents *m, Cairn__Mgmt__Response *resp,
                               cairnd_arena_t *a)
{
    do_events(m, resp, a);
}

void cairnd_pools_refresh_shares(void)
{
    cairnd_table_lock(false);
    cairnd_shares_refresh();
    cairnd_table_unlock();
}
