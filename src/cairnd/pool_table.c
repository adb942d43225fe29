/*
 * cairnd's pool table and its cache file.
 *
 * The table maps pool names to open spa_t handles and their dataset layers.
 * It is guarded by one reader-writer lock, taken per request by dispatch.c
 * (which says who takes it for writing); the functions here that read
 * the table run with it held, those that change it with it held for writing.
 *
 * The cache file (state_dir/pools.cache) lists the pools to import when the
 * daemon starts: a "pool NAME" line followed by one "path /abs/leaf" line per
 * leaf, in tree order. It is the daemon's memory across restarts and crashes,
 * so it is rewritten atomically (temp file, fsync, rename, fsync of the
 * directory) after every change: a crash leaves either the old or the new
 * list, never half of one. A cached pool that fails to import at start stays
 * listed (its disks may just be late) and is retried on the next start.
 */
#include "cairnd.h"

#include <cairn/assert.h>
#include <cairn/dsl.h>
#include <cairn/log.h>
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

static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static cairnd_pool_entry_t *g_pools;
static size_t g_npools;
static char g_cache_path[MGMT_PATH_MAX + 32];
static char g_state_dir[MGMT_PATH_MAX];

void cairnd_table_entry_free_paths(cairnd_pool_entry_t *e)
{
    for (size_t i = 0; i < e->npaths; i++) free(e->paths[i]);
    free(e->paths);
    e->paths = NULL;
    e->npaths = 0;
}

cairnd_pool_entry_t *cairnd_table_find(const char *name)
{
    for (size_t i = 0; i < g_npools; i++)
        if (!strcmp(g_pools[i].name, name)) return &g_pools[i];
    return NULL;
}

spa_t *cairnd_table_find_spa(const char *name)
{
    cairnd_pool_entry_t *e = cairnd_table_find(name);
    return e ? e->spa : NULL;
}

void cairnd_table_remove(cairnd_pool_entry_t *e)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&g_lock));
    cairnd_table_entry_free_paths(e);
    size_t i = (size_t)(e - g_pools);
    memmove(&g_pools[i], &g_pools[i + 1], (g_npools - i - 1) * sizeof *g_pools);
    g_npools--;
}

/* Adds (or refreshes) the entry of a freshly opened pool and its dataset layer. */
void cairnd_table_add(spa_t *spa, dsl_pool_t *dp)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&g_lock));
    cairnd_pool_entry_t *e = cairnd_table_find(spa_name(spa));
    if (!e) {
        g_pools = cairn_realloc(g_pools, sizeof *g_pools * (g_npools + 1));
        e = &g_pools[g_npools++];
        memset(e, 0, sizeof *e);
        cairn_strlcpy(e->name, spa_name(spa), sizeof e->name);
    }
    e->spa = spa;
    e->dp = dp;
    e->opened_ns = cairn_now_ns();
    char **paths = NULL;
    size_t n = 0;
    if (spa_leaf_paths(spa, &paths, &n) == 0) {
        cairnd_table_entry_free_paths(e);
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
int cairnd_table_write_cache(void)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&g_lock));
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
    cairnd_pool_entry_t *cur = NULL;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if (!line[0] || line[0] == '#') continue;
        if (!strncmp(line, "pool ", 5) && line[5] && strlen(line + 5) < SPA_NAME_MAX) {
            if (cairnd_table_find(line + 5)) {
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

void cairnd_table_lock(bool writer)
{
    if (writer) pthread_rwlock_wrlock(&g_lock);
    else pthread_rwlock_rdlock(&g_lock);
}

void cairnd_table_unlock(void) { pthread_rwlock_unlock(&g_lock); }

size_t cairnd_table_count(void) { return g_npools; }

cairnd_pool_entry_t *cairnd_table_at(size_t i) { return &g_pools[i]; }

/* Daemon shutdown, the pools closed: forgets them all. */
void cairnd_table_clear(void)
{
    for (size_t i = 0; i < g_npools; i++) cairnd_table_entry_free_paths(&g_pools[i]);
    free(g_pools);
    g_pools = NULL;
    g_npools = 0;
}

dsl_pool_t *cairnd_pool_dsl(const char *pool)
{
    cairnd_pool_entry_t *e = cairnd_table_find(pool);
    return e && e->spa ? e->dp : NULL;
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
