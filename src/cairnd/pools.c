/*
 * cairnd's pool table, its cache file and the request handlers.
 *
 * The table maps pool names to open spa_t handles. It is guarded by one
 * reader-writer lock: commands that add or remove pools (create, import,
 * export, destroy) or change a pool's vdevs (add, remove) take it for writing,
 * everything else (list, status, iostat, get, set, scrub, clear) for reading,
 * so a pool cannot vanish under a request that is using it while ordinary
 * requests still run side by side. Long work such
 * as a scrub runs inside the SPA's own threads; the handler only starts it.
 *
 * The cache file (state_dir/pools.cache) lists the pools to import when the
 * daemon starts: a "pool NAME" line followed by one "path /abs/leaf" line per
 * leaf, in tree order. It is the daemon's memory across restarts and crashes,
 * so it is rewritten atomically (temp file, fsync, rename, fsync of the
 * directory) after every change: a crash leaves either the old or the new
 * list, never half of one. A cached pool that fails to import at start stays
 * listed (its disks may just be late) and is retried on the next start.
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

/* ---------------------------------------------------------------- arena */

void *cairnd_arena_alloc(cairnd_arena_t *a, size_t size)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->ptrs = cairn_realloc(a->ptrs, sizeof(void *) * a->cap);
    }
    void *p = cairn_zalloc(size ? size : 1);
    a->ptrs[a->n++] = p;
    return p;
}

char *cairnd_arena_strdup(cairnd_arena_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = cairnd_arena_alloc(a, n);
    memcpy(p, s, n);
    return p;
}

void cairnd_arena_free(cairnd_arena_t *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->ptrs[i]);
    free(a->ptrs);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------- table */

typedef struct cache_entry {
    char name[SPA_NAME_MAX];
    char **paths;
    size_t npaths;
    spa_t *spa; /* NULL when the import at start failed */
    dsl_pool_t *dp; /* its dataset layer, open whenever spa is */
    uint64_t opened_ns; /* CLOCK_MONOTONIC at import: `pool iostat`'s first interval */
} cache_entry_t;

static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static cache_entry_t *g_pools;
static size_t g_npools;
static char g_cache_path[MGMT_PATH_MAX + 32];
static char g_state_dir[MGMT_PATH_MAX];

static void entry_free_paths(cache_entry_t *e)
{
    for (size_t i = 0; i < e->npaths; i++) free(e->paths[i]);
    free(e->paths);
    e->paths = NULL;
    e->npaths = 0;
}

static cache_entry_t *find_entry(const char *name)
{
    for (size_t i = 0; i < g_npools; i++)
        if (!strcmp(g_pools[i].name, name)) return &g_pools[i];
    return NULL;
}

static spa_t *find_pool(const char *name)
{
    cache_entry_t *e = find_entry(name);
    return e ? e->spa : NULL;
}

static void remove_entry(cache_entry_t *e)
{
    entry_free_paths(e);
    size_t i = (size_t)(e - g_pools);
    memmove(&g_pools[i], &g_pools[i + 1], (g_npools - i - 1) * sizeof *g_pools);
    g_npools--;
}

/* Adds (or refreshes) the entry of a freshly opened pool and its dataset layer. */
static void add_pool(spa_t *spa, dsl_pool_t *dp)
{
    cache_entry_t *e = find_entry(spa_name(spa));
    if (!e) {
        g_pools = cairn_realloc(g_pools, sizeof *g_pools * (g_npools + 1));
        e = &g_pools[g_npools++];
        memset(e, 0, sizeof *e);
        cairn_strlcpy(e->name, spa_name(spa), sizeof e->name);
    }
    e->spa = spa;
    e->dp = dp;
    e->opened_ns = cairn_now_ns();
    cairnd_arc_pool_opened(spa); /* L2ARC: its cache devices (arc.c) */
    char **paths = NULL;
    size_t n = 0;
    if (spa_leaf_paths(spa, &paths, &n) == 0) {
        entry_free_paths(e);
        e->paths = paths;
        e->npaths = n;
    }
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

/* Rewrites the cache file from the table. Caller holds the write lock. */
static int cache_write(void)
{
    char tmp[sizeof g_cache_path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_cache_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        log_error(SUB, "cannot write %s: %s", tmp, strerror(e));
        return -e;
    }
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# cairnd pool cache: pools imported at start. Written by cairnd.\n");
    for (size_t i = 0; i < g_npools; i++) {
        fprintf(f, "pool %s\n", g_pools[i].name);
        for (size_t j = 0; j < g_pools[i].npaths; j++) fprintf(f, "path %s\n", g_pools[i].paths[j]);
    }
    int rc = 0;
    if (fflush(f) || fsync(fd)) rc = -errno;
    if (fclose(f) && !rc) rc = -errno;
    if (!rc && rename(tmp, g_cache_path)) rc = -errno;
    if (!rc) rc = fsync_dir(g_state_dir);
    if (rc) {
        log_error(SUB, "cannot update %s: %s", g_cache_path, strerror(-rc));
        unlink(tmp);
    }
    return rc;
}

static int cache_read(void)
{
    FILE *f = fopen(g_cache_path, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        int e = errno;
        log_error(SUB, "cannot read %s: %s", g_cache_path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned lineno = 0;
    cache_entry_t *cur = NULL;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if (!line[0] || line[0] == '#') continue;
        if (!strncmp(line, "pool ", 5) && line[5] && strlen(line + 5) < SPA_NAME_MAX) {
            if (find_entry(line + 5)) {
                log_warn(SUB, "%s:%u: pool '%s' listed twice; ignoring the repeat",
                         g_cache_path, lineno, line + 5);
                cur = NULL;
                continue;
            }
            g_pools = cairn_realloc(g_pools, sizeof *g_pools * (g_npools + 1));
            cur = &g_pools[g_npools++];
            memset(cur, 0, sizeof *cur);
            cairn_strlcpy(cur->name, line + 5, sizeof cur->name);
        } else if (!strncmp(line, "path ", 5) && cur && line[5]) {
            cur->paths = cairn_realloc(cur->paths, sizeof(char *) * (cur->npaths + 1));
            cur->paths[cur->npaths++] = cairn_strdup(line + 5);
        } else {
            log_warn(SUB, "%s:%u: ignoring unrecognised line", g_cache_path, lineno);
        }
    }
    free(line);
    fclose(f);
    return 0;
}

int cairnd_pools_init(const char *state_dir)
{
    cairn_strlcpy(g_state_dir, state_dir, sizeof g_state_dir);
    snprintf(g_cache_path, sizeof g_cache_path, "%s/pools.cache", state_dir);
    return cache_read();
}

void cairnd_pools_import_cached(void)
{
    pthread_rwlock_wrlock(&g_lock);
    for (size_t i = 0; i < g_npools; i++) {
        cache_entry_t *e = &g_pools[i];
        if (e->spa) continue;
        char err[512] = "";
        spa_t *spa = NULL;
        /* Our own pool: it looks active because we (or our crashed predecessor) had it. */
        int rc = spa_import(e->name, (const char *const *)e->paths, e->npaths,
                            SPA_IMPORT_FORCE, &spa, err, sizeof err);
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
    pthread_rwlock_unlock(&g_lock);
}

void cairnd_pools_shutdown(void)
{
    pthread_rwlock_wrlock(&g_lock);
    for (size_t i = 0; i < g_npools; i++) {
        if (!g_pools[i].spa) continue;
        cairnd_shares_pool_closing(g_pools[i].dp);
        if (g_pools[i].dp) dsl_pool_close(g_pools[i].dp);
        g_pools[i].dp = NULL;
        int rc = spa_close(g_pools[i].spa);
        g_pools[i].spa = NULL;
        if (rc) log_error(SUB, "closing pool '%s': %s", g_pools[i].name, strerror(-rc));
        else log_info(SUB, "closed pool '%s'", g_pools[i].name);
    }
    for (size_t i = 0; i < g_npools; i++) entry_free_paths(&g_pools[i]);
    free(g_pools);
    g_pools = NULL;
    g_npools = 0;
    /* Keep the lock: no request may touch a pool after this. */
}

/* ---------------------------------------------------------------- helpers */

void cairnd_set_error(Cairn__Mgmt__Response *resp, cairnd_arena_t *a, int rc, const char *fmt,
                      ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n') *p = ' ';
    resp->error = rc < 0 ? rc : -EINVAL;
    resp->message = cairnd_arena_strdup(a, msg);
}

#define set_error cairnd_set_error
/* An absolute path, or a test's fault-injecting leaf on one ("fault:/...", vdev.h). */
static bool device_path_ok(const char *p)
{
    if (!strncmp(p, "fault:", 6)) p += 6;
    return p[0] == '/';
}

#define NO_SUCH_POOL(resp, a, name) set_error(resp, a, -ENOENT, "no such pool '%s'", name)

/* The `spares` section of status: AVAIL, or INUSE while standing in for a leaf. */
static size_t spare_status(cairnd_arena_t *a, spa_t *spa, Cairn__Mgmt__VdevStatus ***out)
{
    spa_spare_info_t info[32];
    size_t n = spa_spares_get(spa, info, 32);
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

/* `spare DEV...` of create and add. */
static int add_spares(spa_t *spa, char **spares, size_t n, bool force, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (!device_path_ok(spares[i])) {
            snprintf(err, errlen, "device paths must be absolute ('%s')", spares[i]);
            return -EINVAL;
        }
    return n ? spa_spare_add(spa, (const char *const *)spares, n, force, err, errlen) : 0;
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
    r->health = cairnd_arena_strdup(a, vdev_state_name(spa_health(spa)));
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
                                                "logused", "expandsize", NULL};
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
    rows->rows = cairnd_arena_alloc(a, sizeof(*rows->rows) * (g_npools + 1));
    for (size_t i = 0; i < g_npools; i++) {
        if (!g_pools[i].spa) continue;
        if (m->name[0] && strcmp(m->name, g_pools[i].name)) continue;
        rows->rows[rows->n_rows++] = pool_row(a, g_pools[i].spa, g_pools[i].dp);
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
    st->pools = cairnd_arena_alloc(a, sizeof(*st->pools) * (g_npools + 1));
    for (size_t i = 0; i < g_npools; i++) {
        spa_t *spa = g_pools[i].spa;
        if (!spa || (m->name[0] && strcmp(m->name, g_pools[i].name))) continue;
        Cairn__Mgmt__PoolStatusResult *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__pool_status_result__init(r);
        r->name = cairnd_arena_strdup(a, spa_name(spa));
        r->state = cairnd_arena_strdup(a, vdev_state_name(spa_health(spa)));
        r->guid = spa_guid(spa);
        r->scrub = scrub_status(a, spa);
        r->rebuild = rebuild_status(a, spa);
        r->root = vdev_status(a, spa, spa_root_vdev(spa));
        r->txg = spa_last_synced_txg(spa);
        r->n_cache = cairnd_arc_cache_status(spa, a, &r->cache);
        r->n_spares = spare_status(a, spa, &r->spares);
        status_errors(a, spa, g_pools[i].dp, r, m->verbose);
        st->pools[st->n_pools++] = r;
    }
    if (m->name[0] && st->n_pools == 0) {
        NO_SUCH_POOL(resp, a, m->name);
        return;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS;
    resp->pool_status = st;
}

static void do_create(const Cairn__Mgmt__PoolCreate *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    char err[512] = "";
    if (mgmt_pool_name_check(m->name, err, sizeof err)) {
        set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    if (find_entry(m->name)) {
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
    if (!rc) rc = add_spares(spa, m->spares, m->n_spares, m->force, err, sizeof err);
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
    cache_write();
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

static void do_import(const Cairn__Mgmt__PoolImport *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    for (size_t i = 0; i < m->n_dirs; i++)
        if (m->dirs[i][0] != '/') {
            set_error(resp, a, -EINVAL, "search paths must be absolute ('%s')", m->dirs[i]);
            return;
        }
    if (m->n_dirs == 0) {
        set_error(resp, a, -EINVAL, "no search directory given (use -d DIR)");
        return;
    }
    const char *const *dirs = (const char *const *)m->dirs;
    if (!m->name[0]) {
        spa_import_candidate_t *c = NULL;
        size_t n = 0;
        int rc = spa_import_scan(dirs, m->n_dirs, &c, &n);
        if (rc) {
            set_error(resp, a, rc, "cannot scan for pools: %s", strerror(-rc));
            return;
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
        return;
    }
    if (find_pool(m->name)) {
        set_error(resp, a, -EEXIST, "pool '%s' is already imported", m->name);
        return;
    }
    char err[512] = "";
    spa_t *spa = NULL;
    int rc = spa_import(m->name, dirs, m->n_dirs,
                        (m->force ? SPA_IMPORT_FORCE : 0) |
                            (m->missing_log ? SPA_IMPORT_MISSING_LOG : 0),
                        &spa, err, sizeof err);
    if (rc) {
        set_error(resp, a, rc, "cannot import '%s': %s", m->name, err[0] ? err : strerror(-rc));
        return;
    }
    cache_entry_t *stale = find_entry(spa_name(spa));
    if (stale && stale->spa) {
        /* Imported by name alias/guid to a pool we already hold: refuse. */
        spa_close(spa);
        set_error(resp, a, -EEXIST, "pool '%s' is already imported", spa_name(stale->spa));
        return;
    }
    dsl_pool_t *dp = NULL;
    rc = dsl_pool_open(spa, &dp);
    if (rc) {
        spa_close(spa);
        set_error(resp, a, rc, "cannot import '%s': cannot open its datasets: %s", m->name,
                  strerror(-rc));
        return;
    }
    add_pool(spa, dp);
    cairnd_iscsi_pool_opened(dp);
    cache_write();
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

static void do_export_destroy(const char *name, bool destroy, Cairn__Mgmt__Response *resp,
                              cairnd_arena_t *a)
{
    cache_entry_t *e = find_entry(name);
    if (!e || !e->spa) {
        if (e && destroy) {
            /* A cached pool that never came back: forget it. */
            remove_entry(e);
            cache_write();
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
    cairnd_shares_pool_closing(e->dp);
    /* The DSL writes out what it holds before the pool's final txg. */
    if (e->dp) cairnd_iscsi_pool_closing(e->dp);
    if (e->dp) dsl_pool_close(e->dp);
    e->dp = NULL;
    uint64_t guid = spa_guid(spa);
    int rc = destroy ? spa_destroy(spa) : spa_export(spa);
    if (destroy) cairnd_arc_pool_destroyed(guid); /* L2ARC: forget its cache devices */
    /* Either call closes the pool, even when writing the labels failed. */
    remove_entry(e);
    cache_write();
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
    spa_t *spa = find_pool(m->name);
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

static void refresh_paths(cache_entry_t *e);


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
    cache_entry_t *e = find_entry(name);
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
    pl->props = cairnd_arena_alloc(a, sizeof(*pl->props) * (per_pool * g_npools + 1));
    bool found = false;
    for (size_t i = 0; i < g_npools; i++) {
        spa_t *spa = g_pools[i].spa;
        if (!spa || (m->name[0] && strcmp(m->name, g_pools[i].name))) continue;
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
    spa_t *spa = find_pool(m->name);
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
static void refresh_paths(cache_entry_t *e)
{
    char **paths = NULL;
    size_t n = 0;
    if (spa_leaf_paths(e->spa, &paths, &n) == 0) {
        entry_free_paths(e);
        e->paths = paths;
        e->npaths = n;
    }
    cache_write();
}

/* `pool add -n`: the checks of a real add (the CLI prints the layout), no change.
 * Cache devices are only checked to exist and be unused by this pool. */
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
    if (rc) set_error(resp, a, rc, "cannot add to '%s': %s", m->name, err[0] ? err : strerror(-rc));
}

static void do_add(const Cairn__Mgmt__PoolAdd *m, Cairn__Mgmt__Response *resp,
                   cairnd_arena_t *a)
{
    cache_entry_t *e = find_entry(m->name);
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
    if (m->dry_run) {
        do_add_dry_run(e->spa, root, m, resp, a);
        return;
    }
    if (m->n_spares) { /* spares first: they take nothing the rest could need back */
        int rs = add_spares(e->spa, m->spares, m->n_spares, m->force, err, sizeof err);
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
    cache_write();
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
    cache_entry_t *e = find_entry(m->name);
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
    st->pools = cairnd_arena_alloc(a, sizeof(*st->pools) * (g_npools + 1));
    for (size_t i = 0; i < g_npools; i++) {
        spa_t *spa = g_pools[i].spa;
        if (!spa || (m->name[0] && strcmp(m->name, g_pools[i].name))) continue;
        Cairn__Mgmt__PoolIostatResult *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__pool_iostat_result__init(r);
        r->timestamp_ns = cairn_now_ns();
        r->import_ns = g_pools[i].opened_ns;
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
    arc_stats_t as;
    arc_get_stats(&as);
    Cairn__Mgmt__ArcStats *arc = cairnd_arena_alloc(a, sizeof *arc);
    cairn__mgmt__arc_stats__init(arc);
#define COPY(f) arc->f = as.f
    COPY(hits); COPY(misses); COPY(mru_hits); COPY(mfu_hits); COPY(mru_ghost_hits);
    COPY(mfu_ghost_hits); COPY(size); COPY(c); COPY(p); COPY(c_max); COPY(mru_size);
    COPY(mfu_size); COPY(mru_ghost_size); COPY(mfu_ghost_size); COPY(decompressed_size);
    COPY(entries); COPY(evictions); COPY(l2_hits); COPY(l2_misses); COPY(l2_feeds);
    COPY(l2_feed_bytes); COPY(l2_size); COPY(l2_entries); COPY(l2_cksum_bad);
    COPY(l2_io_errors); COPY(l2_rebuilt);
#undef COPY
    st->arc = arc;
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_IOSTAT;
    resp->pool_iostat = st;
}

/* `pool clear POOL [DEV]`: error counts, and FAULTED devices that answer again. */
static void do_clear(const Cairn__Mgmt__PoolClear *m, Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    spa_t *spa = find_pool(m->name);
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
        pthread_rwlock_rdlock(&g_lock);
        bool known = find_pool(m->name) != NULL;
        pthread_rwlock_unlock(&g_lock);
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

void cairnd_handle_request(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a)
{
    bool writer = false;
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_POOL_CREATE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_IMPORT:
    case CAIRN__MGMT__REQUEST__CMD_POOL_EXPORT:
    case CAIRN__MGMT__REQUEST__CMD_POOL_DESTROY:
    case CAIRN__MGMT__REQUEST__CMD_POOL_ADD:
    case CAIRN__MGMT__REQUEST__CMD_POOL_REMOVE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_REPLACE:
    case CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH:
    case CAIRN__MGMT__REQUEST__CMD_POOL_DETACH: writer = true; break;
    default: break;
    }
    if (cairnd_handle_analytics(req, resp, a)) return;
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_POOL_EVENTS) {
        do_events(req->pool_events, resp, a);
        return;
    }
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_PING) {
        Cairn__Mgmt__Pong *p = cairnd_arena_alloc(a, sizeof *p);
        cairn__mgmt__pong__init(p);
        p->version = cairnd_arena_strdup(a, CAIRN_VERSION);
        p->pid = (uint32_t)getpid();
        resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_PONG;
        resp->pong = p;
        return;
    }
    if (writer) pthread_rwlock_wrlock(&g_lock);
    else pthread_rwlock_rdlock(&g_lock);
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
    case CAIRN__MGMT__REQUEST__CMD_SHARE_LIST: cairnd_handle_share_list(resp, a); break;
    default:
        if (cairnd_handle_dataset(req, resp, a)) break;
        if (cairnd_handle_arc(req, resp, a)) break;
        if (cairnd_handle_iscsi(req, resp, a)) break;
        if (cairnd_handle_history(req, resp, a)) break;
        if (cairnd_handle_tokens(req, resp, a)) break;
        set_error(resp, a, -EOPNOTSUPP, "unknown request (is cairn newer than cairnd?)");
    }
    cairnd_history_record(req, resp);
    pthread_rwlock_unlock(&g_lock);
}

/* ---------------------------------------------------------------- for datasets.c */

dsl_pool_t *cairnd_pool_dsl(const char *pool)
{
    cache_entry_t *e = find_entry(pool);
    return e && e->spa ? e->dp : NULL;
}

void cairnd_pools_refresh_shares(void)
{
    pthread_rwlock_rdlock(&g_lock);
    cairnd_shares_refresh();
    pthread_rwlock_unlock(&g_lock);
}

size_t cairnd_pool_dsls(dsl_pool_t **out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < g_npools; i++)
        if (g_pools[i].spa && g_pools[i].dp) {
            if (n < cap) out[n] = g_pools[i].dp;
            n++;
        }
    return n;
}
