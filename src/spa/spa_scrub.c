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

#include <cairn/raidz.h>

#include <cairn/range_tree.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a resilver pass writes: per top-level vdev, the txgs that any of its
 * stale leaves missed (the union of their dirty time logs, taken when the pass
 * starts), and the leaves with the logs they had then. */
typedef struct rs_leaf {
    vdev_t *leaf;
    uint32_t ndtl;
    uint64_t dtl[VDEV_DTL_MAX][2];
} rs_leaf_t;

typedef struct scan_ctx {
    spa_scan_func_t func;
    rs_leaf_t *leaves;
    size_t nleaves;
    uint32_t *top_of;           /* top-level id of leaves[i] */
    uint64_t min_birth;         /* the lowest txg any stale leaf missed */
    uint64_t delay_us;          /* resilver throttle (CAIRN_RESILVER_DELAY_US) */
} scan_ctx_t;

/* Whether a resilver pass must rewrite the block: one of its copies lies on a
 * top-level vdev with a stale leaf that missed the block's birth txg. */
static bool rs_needs(const scan_ctx_t *c, const cairn_blkptr_t *bp)
{
    for (size_t i = 0; i < c->nleaves; i++) {
        const rs_leaf_t *l = &c->leaves[i];
        bool born = false;
        for (uint32_t r = 0; r < l->ndtl && !born; r++)
            born = bp->birth_txg >= l->dtl[r][0] && bp->birth_txg <= l->dtl[r][1];
        if (!born) continue;
        for (int k = 0; k < bp->ncopies && k < CAIRN_MAX_COPIES; k++)
            if (bp->dva[k].vdev == c->top_of[i]) return true;
    }
    return false;
}

static int scrub_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    scan_ctx_t *c = arg;
    pthread_mutex_lock(&spa->scrub_lock);
    bool stop = spa->scrub_stop;
    spa->scrub.scanned += cairn_bp_asize(bp);
    bool skip = c->func == SPA_SCAN_RESILVER && !rs_needs(c, bp);
    /* A resilver issues only the blocks it rewrites; what it skips is done too. */
    if (skip) spa->scrub.examined += cairn_bp_asize(bp);
    pthread_mutex_unlock(&spa->scrub_lock);
    if (stop) return -ECANCELED;
    /* Copy-on-write: a block is born no earlier than anything beneath it, so
     * below a block older than every log there is nothing to resilver. */
    if (skip) return bp->birth_txg < c->min_birth ? 1 : 0;
    if (c->delay_us) usleep((useconds_t)c->delay_us);
    void *buf = cairn_zalloc(bp->lsize ? bp->lsize : 1);
    uint64_t repaired = 0;
    int e = spa_block_read_flags(spa, bp, buf,
                                 c->func == SPA_SCAN_RESILVER ? VDEV_READ_RESILVER : VDEV_READ_SCRUB,
                                 &repaired);
    free(buf);
    pthread_mutex_lock(&spa->scrub_lock);
    spa->scrub.examined += cairn_bp_asize(bp);
    spa->scrub.issued += cairn_bp_asize(bp);
    spa->scrub.repaired += repaired;
    if (e) spa->scrub.errors++;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (e && bm) {
        spa_errlog_add(spa, bm);
        log_warn("spa",
                 "pool %s: %s found a block with no good copy: objset %llu object %llu "
                 "level %lld block %llu (vdev %u offset %llu)",
                 spa->name, c->func == SPA_SCAN_RESILVER ? "resilver" : "scrub",
                 (unsigned long long)bm->objset, (unsigned long long)bm->object,
                 (long long)bm->level, (unsigned long long)bm->blkid, bp->dva[0].vdev,
                 (unsigned long long)bp->dva[0].offset);
    } else if (e) {
        /* The pool's own blocks (space map log, intent log): pool metadata. */
        spa_errlog_add(spa, &(spa_bookmark_t){0, 0, -1, 0});
        log_warn("spa", "pool %s: scan found a block with no good copy (vdev %u offset %llu)",
                 spa->name, bp->dva[0].vdev, (unsigned long long)bp->dva[0].offset);
    }
    return 0; /* keep walking */
}

typedef struct rs_collect {
    scan_ctx_t *c;
    uint32_t top;
} rs_collect_t;

static void rs_collect_leaf(vdev_t *leaf, void *arg)
{
    rs_collect_t *rc = arg;
    if (!atomic_load(&leaf->stale) || !vdev_leaf_usable(leaf) || !leaf->ndtl) return;
    scan_ctx_t *c = rc->c;
    c->leaves = cairn_realloc(c->leaves, (c->nleaves + 1) * sizeof *c->leaves);
    c->top_of = cairn_realloc(c->top_of, (c->nleaves + 1) * sizeof *c->top_of);
    rs_leaf_t *l = &c->leaves[c->nleaves];
    l->leaf = leaf;
    l->ndtl = leaf->ndtl;
    memcpy(l->dtl, leaf->dtl, sizeof l->dtl);
    c->top_of[c->nleaves++] = rc->top;
    for (uint32_t r = 0; r < l->ndtl; r++) c->min_birth = CAIRN_MIN(c->min_birth, l->dtl[r][0]);
}

/* Under config_lock: the stale leaves a resilver pass now has to serve. */
static void rs_collect(spa_t *spa, scan_ctx_t *c)
{
    c->nleaves = 0;
    c->min_birth = UINT64_MAX;
    for (uint32_t v = 0; v < spa->ntop; v++) {
        vdev_t *top = spa_top_vdev(spa, v);
        if (!top) continue;
        rs_collect_t rc = {.c = c, .top = v};
        vdev_foreach_leaf(top, rs_collect_leaf, &rc);
    }
}

static void any_stale_leaf(vdev_t *leaf, void *arg)
{
    if (atomic_load(&leaf->stale) && vdev_leaf_usable(leaf)) *(bool *)arg = true;
}

/* Under config_lock, after a pass walked every block: each leaf whose log did
 * not grow meanwhile holds everything now. */
static bool rs_complete(spa_t *spa, scan_ctx_t *c)
{
    bool changed = false;
    for (size_t i = 0; i < c->nleaves; i++) {
        rs_leaf_t *l = &c->leaves[i];
        vdev_t *leaf = l->leaf;
        if (!atomic_load(&leaf->stale) || leaf->ndtl != l->ndtl ||
            memcmp(leaf->dtl, l->dtl, l->ndtl * sizeof l->dtl[0]))
            continue;
        leaf->ndtl = 0;
        atomic_store(&leaf->stale, false);
        changed = true;
        spa_vdev_replace_done(spa, leaf);
    }
    if (changed) {
        bool more = false;
        for (uint32_t v = 0; v < spa->ntop && !more; v++)
            if (spa_top_vdev(spa, v)) vdev_foreach_leaf(spa->root->children[v], any_stale_leaf, &more);
        if (!more) spa->resilver_since = 0;
        vdev_state_refresh(spa->root);
        int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        if (e) log_warn("spa", "pool %s: cannot write labels after resilver: %s", spa->name,
                        strerror(-e));
    }
    return changed;
}

static void *scrub_thread(void *arg)
{
    spa_t *spa = arg;
    scan_ctx_t c = {.func = spa->scrub.func};
    const char *d = getenv("CAIRN_RESILVER_DELAY_US");
    if (c.func == SPA_SCAN_RESILVER && d) c.delay_us = strtoull(d, NULL, 10);
    int e = 0;
again:
    for (int pass = 0;; pass++) {
        if (c.func == SPA_SCAN_RESILVER) {
            if (pass) spa_txg_wait_synced(spa, 0); /* the newest blocks of new logs */
            pthread_mutex_lock(&spa->config_lock);
            rs_collect(spa, &c);
            pthread_mutex_unlock(&spa->config_lock);
            if (!c.nleaves) break;
        }
        pthread_mutex_lock(&spa->tx.lock);
        cairn_blkptr_t mos_root = spa->ub.mos_root;
        pthread_mutex_unlock(&spa->tx.lock);
        e = 0;
        if (spa_upper && spa->upper_open) e = spa_upper->traverse(spa, &mos_root, scrub_visit, &c);
        if (e > 0) e = 0; /* a skipped subtree (the root's) is no error */
        if (e != -ECANCELED) {
            int e2 = spa_spacemap_visit(spa, scrub_visit, &c);
            if (!e) e = e2;
            e2 = spa_log_visit(spa, scrub_visit, &c);
            if (!e) e = e2;
        }
        if (c.func != SPA_SCAN_RESILVER || e) break;
        pthread_mutex_lock(&spa->scrub_lock);
        bool stop = spa->scrub_stop;
        pthread_mutex_unlock(&spa->scrub_lock);
        if (stop) break;
        pthread_mutex_lock(&spa->config_lock);
        rs_complete(spa, &c);
        pthread_mutex_unlock(&spa->config_lock);
        /* Another pass when a leaf's log grew or a leaf turned stale meanwhile. */
    }
    pthread_mutex_lock(&spa->scrub_lock);
    bool finished = !(spa->scrub_stop || e == -ECANCELED);
    if (c.func == SPA_SCAN_RESILVER && finished && !e && spa->resilver_again) {
        /* A leaf turned stale after this resilver's last look. */
        spa->resilver_again = false;
        pthread_mutex_unlock(&spa->scrub_lock);
        goto again;
    }
    spa->resilver_again = false;
    pthread_mutex_unlock(&spa->scrub_lock);
    free(c.leaves);
    free(c.top_of);
    atomic_fetch_sub(&spa->hold_frees, 1);
    pthread_mutex_lock(&spa->scrub_lock);
    /* Before the state changes, so whoever waits for the scrub sees its list. */
    if (c.func == SPA_SCAN_SCRUB) spa_errlog_scrub_end(spa, finished);
    spa->scrub.end_time = cairn_wallclock_s();
    spa->scrub.state = finished ? SPA_SCRUB_FINISHED : SPA_SCRUB_CANCELED;
    pthread_cond_broadcast(&spa->scrub_cv);
    pthread_mutex_unlock(&spa->scrub_lock);
    spa_event_post(spa->name,
                   c.func == SPA_SCAN_RESILVER ? "sysevent.fs.cairn.resilver_finish"
                                               : "sysevent.fs.cairn.scrub_finish",
                   "state=%s examined=%llu %s=%llu errors=%llu",
                   spa->scrub.state == SPA_SCRUB_FINISHED ? "finished" : "canceled",
                   (unsigned long long)spa->scrub.examined,
                   c.func == SPA_SCAN_RESILVER ? "resilvered" : "repaired",
                   (unsigned long long)spa->scrub.repaired, (unsigned long long)spa->scrub.errors);
    log_info("spa", "pool %s: %s %s: %llu bytes examined, %llu %s, %llu errors", spa->name,
             c.func == SPA_SCAN_RESILVER ? "resilver" : "scrub",
             spa->scrub.state == SPA_SCRUB_FINISHED ? "finished" : "canceled",
             (unsigned long long)spa->scrub.examined, (unsigned long long)spa->scrub.repaired,
             c.func == SPA_SCAN_RESILVER ? "resilvered" : "repaired",
             (unsigned long long)spa->scrub.errors);
    return NULL;
}

int spa_scan_start(spa_t *spa, spa_scan_func_t func)
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
    if (spa->scrub.state == SPA_SCRUB_SCANNING) { /* another start won the race */
        pthread_mutex_unlock(&spa->scrub_lock);
        return -EBUSY;
    }
    spa_space_t sp;
    spa_get_space(spa, &sp);
    memset(&spa->scrub, 0, sizeof spa->scrub);
    spa->scrub.state = SPA_SCRUB_SCANNING;
    spa->scrub.func = func;
    spa->scrub.start_time = cairn_wallclock_s();
    pthread_mutex_lock(&spa->config_lock);
    if (func == SPA_SCAN_RESILVER && spa->resilver_since) spa->scrub.start_time = spa->resilver_since;
    pthread_mutex_unlock(&spa->config_lock);
    spa->scrub.to_examine = sp.alloc;
    spa->scrub_stop = false;
    if (func == SPA_SCAN_SCRUB) spa_errlog_scrub_begin(spa);
    atomic_fetch_add(&spa->hold_frees, 1);
    spa->scrub_thread_running = true;
    pthread_create(&spa->scrub_thread, NULL, scrub_thread, spa);
    pthread_setname_np(spa->scrub_thread, func == SPA_SCAN_RESILVER ? "spa_resilver" : "spa_scrub");
    pthread_mutex_unlock(&spa->scrub_lock);
    spa_event_post(spa->name,
                   func == SPA_SCAN_RESILVER ? "sysevent.fs.cairn.resilver_start"
                                             : "sysevent.fs.cairn.scrub_start",
                   "to_examine=%llu", (unsigned long long)sp.alloc);
    return 0;
}

int spa_scrub_start(spa_t *spa) { return spa_scan_start(spa, SPA_SCAN_SCRUB); }

int spa_scrub_stop(spa_t *spa)
{
    pthread_mutex_lock(&spa->scrub_lock);
    /* A resilver is not the administrator's to stop: the pool needs it. */
    int e = spa->scrub.state == SPA_SCRUB_SCANNING && spa->scrub.func == SPA_SCAN_SCRUB ? 0
                                                                                        : -ENOENT;
    if (!e) spa->scrub_stop = true;
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

void spa_scan_wait(spa_t *spa, int func)
{
    pthread_mutex_lock(&spa->scrub_lock);
    while (spa->scrub.state == SPA_SCRUB_SCANNING && (func < 0 || (int)spa->scrub.func == func))
        pthread_cond_wait(&spa->scrub_cv, &spa->scrub_lock);
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
