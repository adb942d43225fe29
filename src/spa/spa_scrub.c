/*
 * Scrub and the offline check: walking every block of the pool.
 *
 * Both walk the tree named by the last durable uberblock: the upper layer
 * enumerates every block pointer reachable from the MOS root (each shared
 * block once) and the space map log chain adds its own blocks.
 *
 * Scrub reads every copy of every block (every mirror side, every raidz
 * column including parity) and repairs what does not verify. It runs in the
 * background while the pool keeps changing; to keep the tree it walks intact,
 * frees are held back (hold_frees) while it runs, so no block of the walked
 * tree is reallocated and overwritten under it. That costs free space freed
 * during a scrub until the scrub ends, never correctness.
 *
 * The offline check imports the pool read-only (nothing is ever written), reads
 * and verifies every copy of every block, and compares the set of extents the
 * blocks occupy with the allocated set rebuilt from the space map log: any
 * allocated byte no block references is leaked, any byte referenced twice or
 * referenced while free is a double allocation. Exact accounting is what makes
 * crash tests able to say "nothing leaked, nothing doubly allocated".
 */
#include "spa_impl.h"

#include <cairn/range_tree.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bp_asize(const cairn_blkptr_t *bp)
{
    uint64_t s = 0;
    for (int c = 0; c < bp->ncopies && c < CAIRN_MAX_COPIES; c++) s += cairn_dva_asize(&bp->dva[c]);
    return s;
}

static int scrub_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&spa->scrub_lock);
    bool stop = spa->scrub_stop;
    spa->scrub.scanned += bp_asize(bp);
    pthread_mutex_unlock(&spa->scrub_lock);
    if (stop) return -ECANCELED;
    void *buf = cairn_zalloc(bp->lsize ? bp->lsize : 1);
    uint64_t repaired = 0;
    int e = spa_block_read_flags(spa, bp, buf, VDEV_READ_SCRUB, &repaired);
    free(buf);
    pthread_mutex_lock(&spa->scrub_lock);
    spa->scrub.examined += bp_asize(bp);
    spa->scrub.repaired += repaired;
    if (e) spa->scrub.errors++;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (e && bm) {
        spa_errlog_add(spa, bm);
        log_warn("spa",
                 "pool %s: scrub found a block with no good copy: objset %llu object %llu "
                 "level %lld block %llu (vdev %u offset %llu)",
                 spa->name, (unsigned long long)bm->objset, (unsigned long long)bm->object,
                 (long long)bm->level, (unsigned long long)bm->blkid, bp->dva[0].vdev,
                 (unsigned long long)bp->dva[0].offset);
    } else if (e) {
        /* The pool's own blocks (space map log, intent log): pool metadata. */
        spa_errlog_add(spa, &(spa_bookmark_t){0, 0, -1, 0});
        log_warn("spa", "pool %s: scrub found a block with no good copy (vdev %u offset %llu)",
                 spa->name, bp->dva[0].vdev, (unsigned long long)bp->dva[0].offset);
    }
    return 0; /* keep walking */
}

static void *scrub_thread(void *arg)
{
    spa_t *spa = arg;
    pthread_mutex_lock(&spa->tx.lock);
    cairn_blkptr_t mos_root = spa->ub.mos_root;
    pthread_mutex_unlock(&spa->tx.lock);
    int e = 0;
    if (spa_upper && spa->upper_open) e = spa_upper->traverse(spa, &mos_root, scrub_visit, NULL);
    if (e != -ECANCELED) {
        int e2 = spa_spacemap_visit(spa, scrub_visit, NULL);
        if (!e) e = e2;
        e2 = spa_log_visit(spa, scrub_visit, NULL);
        if (!e) e = e2;
    }
    atomic_fetch_sub(&spa->hold_frees, 1);
    pthread_mutex_lock(&spa->scrub_lock);
    bool finished = !(spa->scrub_stop || e == -ECANCELED);
    /* Before the state changes, so whoever waits for the scrub sees its list. */
    spa_errlog_scrub_end(spa, finished);
    spa->scrub.end_time = cairn_wallclock_s();
    spa->scrub.state = finished ? SPA_SCRUB_FINISHED : SPA_SCRUB_CANCELED;
    pthread_cond_broadcast(&spa->scrub_cv);
    pthread_mutex_unlock(&spa->scrub_lock);
    log_info("spa", "pool %s: scrub %s: %llu bytes examined, %llu repaired, %llu errors", spa->name,
             spa->scrub.state == SPA_SCRUB_FINISHED ? "finished" : "canceled",
             (unsigned long long)spa->scrub.examined, (unsigned long long)spa->scrub.repaired,
             (unsigned long long)spa->scrub.errors);
    return NULL;
}

int spa_scrub_start(spa_t *spa)
{
    if (spa->readonly) return -EROFS;
    pthread_mutex_lock(&spa->scrub_lock);
    if (spa->scrub.state == SPA_SCRUB_SCANNING) {
        pthread_mutex_unlock(&spa->scrub_lock);
        return -EBUSY;
    }
    if (spa->scrub_thread_running) {
        pthread_mutex_unlock(&spa->scrub_lock);
        pthread_join(spa->scrub_thread, NULL);
        pthread_mutex_lock(&spa->scrub_lock);
        spa->scrub_thread_running = false;
    }
    /* Make what was written so far part of the walked tree. */
    pthread_mutex_unlock(&spa->scrub_lock);
    spa_txg_wait_synced(spa, 0);
    pthread_mutex_lock(&spa->scrub_lock);
    spa_space_t sp;
    spa_get_space(spa, &sp);
    memset(&spa->scrub, 0, sizeof spa->scrub);
    spa->scrub.state = SPA_SCRUB_SCANNING;
    spa->scrub.start_time = cairn_wallclock_s();
    spa->scrub.to_examine = sp.alloc;
    spa->scrub_stop = false;
    spa_errlog_scrub_begin(spa);
    atomic_fetch_add(&spa->hold_frees, 1);
    spa->scrub_thread_running = true;
    pthread_create(&spa->scrub_thread, NULL, scrub_thread, spa);
    pthread_setname_np(spa->scrub_thread, "spa_scrub");
    pthread_mutex_unlock(&spa->scrub_lock);
    return 0;
}

int spa_scrub_stop(spa_t *spa)
{
    pthread_mutex_lock(&spa->scrub_lock);
    int e = spa->scrub.state == SPA_SCRUB_SCANNING ? 0 : -ENOENT;
    spa->scrub_stop = true;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (!e) spa_scrub_wait(spa);
    return e;
}

void spa_scrub_wait(spa_t *spa)
{
    pthread_mutex_lock(&spa->scrub_lock);
    while (spa->scrub.state == SPA_SCRUB_SCANNING) pthread_cond_wait(&spa->scrub_cv, &spa->scrub_lock);
    pthread_mutex_unlock(&spa->scrub_lock);
}

void spa_scrub_get(spa_t *spa, spa_scrub_stat_t *out)
{
    pthread_mutex_lock(&spa->scrub_lock);
    *out = spa->scrub;
    pthread_mutex_unlock(&spa->scrub_lock);
}

void spa_scrub_fini(spa_t *spa)
{
    pthread_mutex_lock(&spa->scrub_lock);
    spa->scrub_stop = true;
    bool running = spa->scrub_thread_running;
    spa->scrub_thread_running = false;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (running) pthread_join(spa->scrub_thread, NULL);
}

static void clear_leaf(vdev_t *leaf, void *arg)
{
    (void)arg;
    atomic_store(&leaf->stats.read_errors, 0);
    atomic_store(&leaf->stats.write_errors, 0);
    atomic_store(&leaf->stats.checksum_errors, 0);
}

void spa_clear_errors(spa_t *spa)
{
    vdev_foreach_leaf(spa->root, clear_leaf, NULL);
    atomic_store(&spa->data_errors, 0);
    vdev_state_refresh(spa->root);
}

/* ---------------- offline check ---------------- */

typedef struct check_ctx {
    range_tree_t **referenced; /* per top-level vdev */
    spa_check_report_t *rep;
} check_ctx_t;

static int check_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)bm;
    check_ctx_t *c = arg;
    c->rep->blocks++;
    for (int i = 0; i < bp->ncopies && i < CAIRN_MAX_COPIES; i++) {
        const cairn_dva_t *d = &bp->dva[i];
        uint64_t size = cairn_dva_asize(d);
        if (!spa_top_vdev(spa, d->vdev) || size == 0 ||
            d->offset + size > spa->root->children[d->vdev]->asize) {
            c->rep->double_bytes += size; /* points outside the pool: cannot be allocated */
            continue;
        }
        c->rep->bytes_referenced += size;
        range_tree_t *rt = c->referenced[d->vdev];
        uint64_t dup = range_tree_overlap_space(rt, d->offset, size);
        c->rep->double_bytes += dup;
        if (dup) range_tree_clear(rt, d->offset, size);
        range_tree_add(rt, d->offset, size);
    }
    void *buf = cairn_zalloc(bp->lsize ? bp->lsize : 1);
    int e = spa_block_read_flags(spa, bp, buf, VDEV_READ_SCRUB | VDEV_READ_NOREPAIR, NULL);
    free(buf);
    if (e) c->rep->bad_blocks++;
    return 0;
}

typedef struct alloc_cmp_ctx {
    range_tree_t *referenced;
    spa_check_report_t *rep;
} alloc_cmp_ctx_t;

/* For each allocated extent: the part nobody references is leaked. */
static int compare_alloc(void *arg, uint64_t start, uint64_t size)
{
    alloc_cmp_ctx_t *c = arg;
    c->rep->bytes_allocated += size;
    uint64_t ref = range_tree_overlap_space(c->referenced, start, size);
    c->rep->leaked_bytes += size - ref;
    range_tree_clear(c->referenced, start, size);
    return 0;
}

int spa_check(const char *name, const char *const *paths, size_t npaths,
              spa_check_report_t *rep, char *err, size_t errlen)
{
    memset(rep, 0, sizeof *rep);
    spa_t *spa = NULL;
    int e = spa_import(name, paths, npaths, SPA_IMPORT_READONLY, &spa, err, errlen);
    if (e) return e;
    check_ctx_t c = {.rep = rep};
    c.referenced = cairn_zalloc(sizeof(range_tree_t *) * spa->ntop);
    for (uint32_t i = 0; i < spa->ntop; i++) c.referenced[i] = range_tree_create();
    e = spa_upper->traverse(spa, &spa->ub.mos_root, check_visit, &c);
    if (!e) e = spa_spacemap_visit(spa, check_visit, &c);
    if (!e) e = spa_log_visit(spa, check_visit, &c);
    if (!e) spa_log_add_region_refs(spa, c.referenced, rep);
    for (uint32_t i = 0; i < spa->ntop; i++) {
        alloc_cmp_ctx_t ac = {.referenced = c.referenced[i], .rep = rep};
        if (spa->ms[i]) metaslab_walk(spa->ms[i], METASLAB_SPACE_ALLOCATED, compare_alloc, &ac);
        /* Whatever is left was referenced but is free in the space maps. */
        rep->double_bytes += range_tree_space(c.referenced[i]);
        range_tree_destroy(c.referenced[i]);
    }
    free(c.referenced);
    spa_close(spa);
    if (e) {
        if (err) snprintf(err, errlen, "cannot walk the pool: %s", strerror(-e));
        return e;
    }
    if (rep->bad_blocks || rep->leaked_bytes || rep->double_bytes) {
        if (err)
            snprintf(err, errlen,
                     "pool is inconsistent: %llu bad blocks, %llu bytes leaked, %llu bytes doubly "
                     "allocated", (unsigned long long)rep->bad_blocks,
                     (unsigned long long)rep->leaked_bytes, (unsigned long long)rep->double_bytes);
        return -EUCLEAN;
    }
    return 0;
}
