/*
 * cairnd's side of the ARC: arc_max from the configuration or the machine, the
 * watch that lowers the ARC's target under memory pressure, the pools' cache
 * devices, and the arcstat request.
 *
 * Sizing (the policy is src/arc/arc_size.c): with no arc_max configured, half
 * of the memory cairnd may use (MemTotal, or its cgroup's memory.max when
 * lower). Either way a thread samples /proc/meminfo and the cgroup once a
 * second and moves the target (arc_set_target) down when memory runs short and
 * back toward arc_max when it is free again; `cairn arcstat` shows the target
 * (c) and `cairn pool iostat`'s ARC figures arc_max beside it.
 *
 * Cache devices are not in a pool's labels (they hold only verified copies,
 * and the pool must import without them), so the daemon remembers them in
 * STATE_DIR/l2arc.cache, one "GUID PATH" line each, written atomically. When a
 * pool opens (created, imported, or brought back at start) its devices are
 * attached again and their index is rebuilt from the log on the device; one
 * that is missing or unreadable is logged and skipped, never failing the
 * import. Destroying a pool forgets its devices.
 */
#include "cairnd.h"

#include <cairn/arc.h>
#include <cairn/bufpool.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUB "cairnd"

typedef struct l2_rec {
    uint64_t guid;
    char *path;
} l2_rec_t;

static pthread_mutex_t g_arc_lock = PTHREAD_MUTEX_INITIALIZER;
static l2_rec_t *g_recs;
static size_t g_nrecs;
static char g_l2_path[MGMT_PATH_MAX + 32];

static int recs_write(void)
{
    if (!g_l2_path[0]) return 0;
    char tmp[sizeof g_l2_path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_l2_path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -errno;
    fprintf(f, "# cairnd L2ARC cache devices: pool guid, device. Written by cairnd.\n");
    for (size_t i = 0; i < g_nrecs; i++)
        fprintf(f, "%016" PRIx64 " %s\n", g_recs[i].guid, g_recs[i].path);
    int rc = fflush(f) || fsync(fileno(f)) ? -errno : 0;
    if (fclose(f) && !rc) rc = -errno;
    if (!rc && rename(tmp, g_l2_path)) rc = -errno;
    if (rc) log_error(SUB, "cannot update %s: %s", g_l2_path, strerror(-rc));
    return rc;
}

static void recs_add(uint64_t guid, const char *path)
{
    g_recs = cairn_realloc(g_recs, (g_nrecs + 1) * sizeof *g_recs);
    g_recs[g_nrecs++] = (l2_rec_t){.guid = guid, .path = cairn_strdup(path)};
}

#define MEMINFO "/proc/meminfo"
#define PRESSURE_INTERVAL_S 1

/* The directory of cairnd's memory cgroup, "" when there is none to read: the v2
 * hierarchy's when it has the memory controller, else v1's memory hierarchy. */
static char g_cgroup_dir[MGMT_PATH_MAX + 32];

static void find_cgroup_dir(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[MGMT_PATH_MAX], v1[sizeof g_cgroup_dir] = "", probe[sizeof g_cgroup_dir + 16];
    g_cgroup_dir[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *rest = strchr(line, ':'), *path = rest ? strchr(rest + 1, ':') : NULL;
        if (!path) continue;
        *path++ = '\0';
        if (!strcmp(rest + 1, "")) { /* "0::/path": v2 */
            snprintf(g_cgroup_dir, sizeof g_cgroup_dir, "/sys/fs/cgroup%s", path);
            snprintf(probe, sizeof probe, "%s/memory.max", g_cgroup_dir);
            if (access(probe, R_OK)) g_cgroup_dir[0] = '\0';
        } else if (!strcmp(rest + 1, "memory")) {
            snprintf(v1, sizeof v1, "/sys/fs/cgroup/memory%s", path);
        }
    }
    if (f) fclose(f);
    if (!g_cgroup_dir[0]) cairn_strlcpy(g_cgroup_dir, v1, sizeof g_cgroup_dir);
}

static int read_memory(arc_memory_t *m)
{
    return arc_memory_read(MEMINFO, g_cgroup_dir[0] ? g_cgroup_dir : NULL, m);
}

static void *pressure_watch(void *arg)
{
    uint64_t c_max = (uint64_t)(uintptr_t)arg;
    bool squeezed = false;
    for (;;) {
        sleep(PRESSURE_INTERVAL_S);
        arc_memory_t m;
        if (read_memory(&m)) continue;
        uint64_t c = arc_get_max(), next = arc_pressure_target(c, c_max, &m);
        if (next == c) {
            /* At its floor already: what the pool keeps for the ARC can go still. */
            if (arc_memory_available(&m) < arc_memory_reserve(&m)) cairn_bufpool_trim();
            continue;
        }
        arc_set_target(next);
        if (next < c && !squeezed)
            log_info(SUB, "memory is short (%" PRIu64 " MiB available): ARC target lowered to %" PRIu64 " MiB",
                     arc_memory_available(&m) >> 20, next >> 20);
        else if (next == c_max && squeezed)
            log_info(SUB, "memory is free again: ARC target back at arc_max (%" PRIu64 " MiB)", c_max >> 20);
        squeezed = next < c_max;
    }
    return NULL;
}

/* arc_max: the configured one, or half of what the machine lets cairnd use. */
static uint64_t choose_arc_max(uint64_t configured)
{
    arc_memory_t m;
    if (configured) return configured;
    if (read_memory(&m)) {
        log_warn(SUB, "cannot read %s: arc_max %" PRIu64 " MiB", MEMINFO, (uint64_t)ARC_DEFAULT_MAX >> 20);
        return ARC_DEFAULT_MAX;
    }
    uint64_t max = arc_default_max(&m);
    bool cgroup = m.cg_limit && m.cg_limit < m.total;
    log_info(SUB, "arc_max %" PRIu64 " MiB: half of %" PRIu64 " MiB%s", max >> 20,
             (cgroup ? m.cg_limit : m.total) >> 20, cgroup ? " (the cgroup's memory limit)" : "");
    return max;
}

static void start_pressure_watch(uint64_t c_max)
{
    pthread_t t;
    if (pthread_create(&t, NULL, pressure_watch, (void *)(uintptr_t)c_max)) {
        log_warn(SUB, "cannot start the memory pressure watch: the ARC keeps arc_max");
        return;
    }
    pthread_detach(t);
}

void cairnd_arc_init(const char *state_dir, uint64_t arc_max)
{
    find_cgroup_dir();
    arc_max = choose_arc_max(arc_max);
    arc_set_max(arc_max);
    start_pressure_watch(arc_max);
    snprintf(g_l2_path, sizeof g_l2_path, "%s/l2arc.cache", state_dir);
    FILE *f = fopen(g_l2_path, "r");
    if (!f) return;
    char line[MGMT_PATH_MAX + 64];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        char *sp = strchr(line, ' ');
        char *end;
        uint64_t guid = sp ? strtoull(line, &end, 16) : 0;
        if (!sp || end != sp || !sp[1]) {
            log_warn(SUB, "%s: ignoring unrecognised line", g_l2_path);
            continue;
        }
        recs_add(guid, sp + 1);
    }
    fclose(f);
}

int cairnd_arc_add_devices(spa_t *spa, char *const *paths, size_t n, char *err, size_t errlen)
{
    uint64_t guid = spa_guid(spa);
    size_t i = 0;
    int rc = 0;
    for (; i < n && !rc; i++) rc = arc_l2_add(guid, paths[i], true, err, errlen);
    if (rc) {
        for (size_t j = 0; j + 1 < i; j++) arc_l2_remove(guid, paths[j]);
        return rc;
    }
    pthread_mutex_lock(&g_arc_lock);
    for (i = 0; i < n; i++) recs_add(guid, paths[i]);
    recs_write();
    pthread_mutex_unlock(&g_arc_lock);
    for (i = 0; i < n; i++) log_info(SUB, "pool '%s': cache device %s added", spa_name(spa), paths[i]);
    return 0;
}

void cairnd_arc_pool_opened(spa_t *spa)
{
    uint64_t guid = spa_guid(spa);
    pthread_mutex_lock(&g_arc_lock);
    for (size_t i = 0; i < g_nrecs; i++) {
        if (g_recs[i].guid != guid) continue;
        char err[512];
        int rc = arc_l2_add(guid, g_recs[i].path, false, err, sizeof err);
        if (rc && rc != -EEXIST)
            log_warn(SUB, "pool '%s': cache device not used: %s", spa_name(spa), err);
    }
    pthread_mutex_unlock(&g_arc_lock);
}

void cairnd_arc_pool_destroyed(uint64_t guid)
{
    pthread_mutex_lock(&g_arc_lock);
    size_t out = 0;
    for (size_t i = 0; i < g_nrecs; i++) {
        if (g_recs[i].guid == guid) free(g_recs[i].path);
        else g_recs[out++] = g_recs[i];
    }
    if (out != g_nrecs) {
        g_nrecs = out;
        recs_write();
    }
    pthread_mutex_unlock(&g_arc_lock);
}

int cairnd_arc_remove_device(spa_t *spa, const char *path)
{
    uint64_t guid = spa_guid(spa);
    pthread_mutex_lock(&g_arc_lock);
    size_t i = 0;
    while (i < g_nrecs && (g_recs[i].guid != guid || strcmp(g_recs[i].path, path))) i++;
    if (i == g_nrecs) {
        pthread_mutex_unlock(&g_arc_lock);
        return -ENOENT;
    }
    /* Its index (the L2ARC headers of its blocks) goes with it; the ARC misses
     * that would have hit it read the pool's vdevs. A dropped device is not
     * attached any more: only the record goes then. */
    int rc = arc_l2_remove(guid, path);
    if (rc && rc != -ENOENT) {
        pthread_mutex_unlock(&g_arc_lock);
        return rc;
    }
    free(g_recs[i].path);
    memmove(&g_recs[i], &g_recs[i + 1], (g_nrecs - i - 1) * sizeof *g_recs);
    g_nrecs--;
    rc = recs_write();
    pthread_mutex_unlock(&g_arc_lock);
    log_info(SUB, "pool '%s': cache device %s removed", spa_name(spa), path);
    return rc;
}

bool cairnd_arc_is_device(spa_t *spa, const char *path)
{
    bool found = false;
    pthread_mutex_lock(&g_arc_lock);
    for (size_t i = 0; i < g_nrecs && !found; i++)
        found = g_recs[i].guid == spa_guid(spa) && !strcmp(g_recs[i].path, path);
    pthread_mutex_unlock(&g_arc_lock);
    return found;
}

static void do_cache_add(const Cairn__Mgmt__ArcCacheAdd *m, Cairn__Mgmt__Response *resp,
                         cairnd_arena_t *a)
{
    dsl_pool_t *dp = m->pool ? cairnd_pool_dsl(m->pool) : NULL;
    if (!dp) {
        cairnd_set_error(resp, a, -ENOENT, "no such pool '%s'", m->pool ? m->pool : "");
        return;
    }
    if (!m->n_devices) {
        cairnd_set_error(resp, a, -EINVAL, "'cache' needs at least one device");
        return;
    }
    char err[512] = "";
    int rc = cairnd_arc_add_devices(dsl_pool_spa(dp), m->devices, m->n_devices, err, sizeof err);
    if (rc) cairnd_set_error(resp, a, rc, "cannot add to '%s': %s", m->pool, err);
}

Cairn__Mgmt__ArcStats *cairnd_arc_stats_msg(cairnd_arena_t *a)
{
    arc_stats_t st;
    arc_get_stats(&st);
    Cairn__Mgmt__ArcStats *r = cairnd_arena_alloc(a, sizeof *r);
    cairn__mgmt__arc_stats__init(r);
#define COPY(f) r->f = st.f
    COPY(hits); COPY(misses); COPY(mru_hits); COPY(mfu_hits); COPY(mru_ghost_hits);
    COPY(mfu_ghost_hits); COPY(size); COPY(c); COPY(p); COPY(c_max); COPY(mru_size);
    COPY(mfu_size); COPY(mru_ghost_size); COPY(mfu_ghost_size); COPY(decompressed_size);
    COPY(entries); COPY(evictions); COPY(l2_hits); COPY(l2_misses); COPY(l2_feeds);
    COPY(l2_feed_bytes); COPY(l2_size); COPY(l2_entries); COPY(l2_cksum_bad);
    COPY(l2_io_errors); COPY(l2_rebuilt);
#undef COPY
    return r;
}

bool cairnd_handle_arc(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                       cairnd_arena_t *a)
{
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_ARC_CACHE_ADD) {
        do_cache_add(req->arc_cache_add, resp, a);
        return true;
    }
    if (req->cmd_case != CAIRN__MGMT__REQUEST__CMD_ARC_STAT) return false;
    Cairn__Mgmt__ArcStats *r = cairnd_arc_stats_msg(a);
    /* Cache devices of the imported pools (the caller holds the pool table). */
    dsl_pool_t *dps[64];
    size_t np = CAIRN_MIN(cairnd_pool_dsls(dps, 64), (size_t)64);
    const char *only = req->arc_stat && req->arc_stat->pool ? req->arc_stat->pool : "";
    for (size_t i = 0; i < np; i++) {
        spa_t *spa = dsl_pool_spa(dps[i]);
        if (*only && strcmp(only, spa_name(spa))) continue;
        arc_l2_dev_stat_t ds[16];
        size_t nd = CAIRN_MIN(arc_l2_dev_stats(spa_guid(spa), ds, 16), (size_t)16);
        for (size_t k = 0; k < nd; k++) {
            Cairn__Mgmt__CacheDevice *d = cairnd_arena_alloc(a, sizeof *d);
            cairn__mgmt__cache_device__init(d);
            d->pool = cairnd_arena_strdup(a, spa_name(spa));
            d->path = cairnd_arena_strdup(a, ds[k].path);
            d->online = ds[k].online;
            d->size = ds[k].size;
            d->alloc = ds[k].alloc;
            d->entries = ds[k].entries;
            d->reads = ds[k].reads;
            d->writes = ds[k].writes;
            d->errors = ds[k].errors;
            Cairn__Mgmt__CacheDevice **nv =
                cairnd_arena_alloc(a, (r->n_devices + 1) * sizeof *nv);
            if (r->n_devices) memcpy(nv, r->devices, r->n_devices * sizeof *nv);
            nv[r->n_devices++] = d;
            r->devices = nv;
        }
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_ARC_STATS;
    resp->arc_stats = r;
    return true;
}

size_t cairnd_arc_cache_status(spa_t *spa, cairnd_arena_t *a, Cairn__Mgmt__VdevStatus ***out)
{
    uint64_t guid = spa_guid(spa);
    arc_l2_dev_stat_t ds[16];
    size_t nd = CAIRN_MIN(arc_l2_dev_stats(guid, ds, 16), (size_t)16);
    pthread_mutex_lock(&g_arc_lock);
    *out = cairnd_arena_alloc(a, sizeof(**out) * (g_nrecs + 1));
    size_t n = 0;
    for (size_t i = 0; i < g_nrecs; i++) {
        if (g_recs[i].guid != guid) continue;
        Cairn__Mgmt__VdevStatus *s = cairnd_arena_alloc(a, sizeof *s);
        cairn__mgmt__vdev_status__init(s);
        s->name = cairnd_arena_strdup(a, g_recs[i].path);
        s->type = cairnd_arena_strdup(a, "cache");
        s->vclass = cairnd_arena_strdup(a, "cache");
        /* Remembered but not attached (missing when the pool opened): UNAVAIL,
         * as zpool shows a cache device it cannot open; dropped after errors:
         * FAULTED. */
        const char *state = "UNAVAIL";
        for (size_t k = 0; k < nd; k++) {
            if (strcmp(ds[k].path, g_recs[i].path)) continue;
            state = ds[k].online ? "ONLINE" : "FAULTED";
            s->read_errors = ds[k].errors;
        }
        s->state = cairnd_arena_strdup(a, state);
        (*out)[n++] = s;
    }
    pthread_mutex_unlock(&g_arc_lock);
    return n;
}
