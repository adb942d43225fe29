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
 * RESUMING. A scan's position and counters are made durable every
 * SCAN_CHECKPOINT_NS (and when the pool closes) in the config (spa_scan_phys_t,
 * docs/ondisk-format.md 1.2), after a flush of every leaf so that the copies a
 * resilver rewrote are durable before the position says so. The position is
 * the object the walk is in: the layer above walks in bookmark order and no
 * block moves to an earlier position (spa_upper_ops_t.traverse), so a scan
 * opened again (after a crash or an import) walks the newer tree from there and
 * still reaches every block it had not. A resilver pass covers the blocks born
 * up to pass_txg (synced when the pass began, kept in the record): a stale
 * leaf whose dirty time log ends at or before it is whole once the pass ends;
 * a log that grew since ends later and gets another pass from the start. A
 * leaf made stale while a resilver runs (an attach, a spare, a disk back)
 * starts no resilver of its own but asks this one for another pass
 * (resilver_again); the resilver's last look at that request and its end are
 * one critical section (scrub_lock), so no such leaf is left stale with no
 * resilver coming.
 *
 * The offline check imports the pool read-only (nothing is ever written), reads
 * and verifies every copy of every block, and compares the set of extents the
 * blocks occupy with the allocated set rebuilt from the space map log: any
 * allocated byte no block references is leaked, any byte referenced twice or
 * referenced while free is a double allocation. Exact accounting is what makes
 * crash tests able to say "nothing leaked, nothing doubly allocated".
 */
#include "spa_impl.h"

#include <cairn/assert.h>
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

__thread bool spa_in_scan_thread;

/* THROTTLE. A scan issues one block at a time (a sequential rebuild: one chunk
 * read while the last is written) and,
 * while clients are busy (a client read reached the disks or client writes
 * dirtied data within idle_ms: spa_client_io), pauses before each block, so
 * that clients keep most of the disks; an idle pool is scanned at full speed. */
static _Atomic uint32_t throttle_idle_ms = SPA_SCAN_IDLE_MS_DEFAULT;
static _Atomic uint32_t throttle_resilver_ms = SPA_RESILVER_DELAY_MS_DEFAULT;
static _Atomic uint32_t throttle_scrub_ms = SPA_SCRUB_DELAY_MS_DEFAULT;

void spa_set_scan_throttle(const spa_scan_throttle_t *t)
{
    atomic_store(&throttle_idle_ms, t->idle_ms);
    atomic_store(&throttle_resilver_ms, t->resilver_delay_ms);
    atomic_store(&throttle_scrub_ms, t->scrub_delay_ms);
}

uint64_t spa_client_idle_ns(spa_t *spa)
{
    uint64_t last = atomic_load_explicit(&spa->last_client_io_ns, memory_order_relaxed);
    uint64_t now = cairn_now_ns();
    return !last ? UINT64_MAX : now > last ? now - last : 0;
}

bool spa_background_thread(bool on)
{
    bool was = spa_in_scan_thread;
    spa_in_scan_thread = on;
    return was;
}

/* Before the scan issues a block: the test delay, then the pause while clients are busy. */
static void scan_throttle(spa_t *spa, spa_scan_func_t func, uint64_t test_delay_us)
{
    if (test_delay_us) usleep((useconds_t)test_delay_us);
    uint32_t pause_ms = atomic_load(func == SPA_SCAN_RESILVER ? &throttle_resilver_ms
                                                              : &throttle_scrub_ms);
    uint64_t last = atomic_load_explicit(&spa->last_client_io_ns, memory_order_relaxed);
    uint64_t idle_ns = (uint64_t)atomic_load(&throttle_idle_ms) * 1000000ULL;
    if (pause_ms && last && cairn_now_ns() - last < idle_ns) usleep(pause_ms * 1000u);
}

/* How often a running scan makes its position durable. */
#define SCAN_CHECKPOINT_NS (2ULL * 1000000000ULL)

typedef struct scan_ctx {
    spa_scan_func_t func;
    rs_leaf_t *leaves;
    size_t nleaves;
    uint32_t *top_of;           /* top-level id of leaves[i] */
    uint64_t min_birth;         /* the lowest txg any stale leaf missed */
    uint64_t delay_us;          /* tests: CAIRN_RESILVER_DELAY_US / CAIRN_SCRUB_DELAY_US */
    spa_bookmark_t pos;         /* the walk's position: every block before is done */
    uint64_t pass_txg;          /* the pass covers the blocks born up to this txg */
    bool resuming;              /* the first pass goes on from a saved position */
    uint64_t checkpoint_ns;     /* when the position was last made durable */
    unsigned checkpoints;
    spa_scan_phys_t resume;     /* where the first pass goes on (resuming) */
    bool sequential;            /* a resilver copying mirrors in offset order */
    bool rebuilt;               /* a sequential pass made leaves whole: a scrub follows */
} scan_ctx_t;

static uint64_t scan_phys_func(spa_scan_func_t func)
{
    return func == SPA_SCAN_RESILVER ? SPA_SCAN_PHYS_RESILVER : SPA_SCAN_PHYS_SCRUB;
}

/* Makes the scan's position and counters durable: every leaf flushed first
 * (what the scan rewrote is on disk), then the config with the record. */
static void scan_checkpoint(spa_t *spa, scan_ctx_t *c)
{
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    spa_scan_phys_t r = {
        .func = scan_phys_func(c->func) | (c->sequential ? SPA_SCAN_PHYS_SEQUENTIAL : 0),
        .pass_txg = c->pass_txg,
        .objset = c->pos.objset, .object = c->pos.object, .start_time = st.start_time,
        .to_examine = st.to_examine, .scanned = st.scanned, .examined = st.examined,
        .issued = st.issued, .repaired = st.repaired, .errors = st.errors,
    };
    c->checkpoint_ns = cairn_now_ns();
    int e = vdev_flush(spa->root);
    if (!e) {
        pthread_mutex_lock(&spa->config_lock);
        spa->scan_saved = r;
        e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        pthread_mutex_unlock(&spa->config_lock);
    }
    if (e) {
        log_warn("spa", "pool %s: cannot save the scan's position: %s", spa->name, strerror(-e));
        return;
    }
    /* The first of a run says where a restart would go on; the rest are routine. */
    cairn_log(c->checkpoints++ ? CAIRN_LOG_DEBUG : CAIRN_LOG_INFO, "spa",
              "pool %s: %s checkpoint at %s %llu %s %llu (%llu bytes examined)", spa->name,
              c->func == SPA_SCAN_RESILVER ? "resilver" : "scrub", c->sequential ? "vdev" : "objset",
              (unsigned long long)r.objset, c->sequential ? "offset" : "object",
              (unsigned long long)r.object, (unsigned long long)r.examined);
}

/* The scan ended (finished, or stopped by the administrator): nothing to resume. */
static void scan_record_clear(spa_t *spa)
{
    pthread_mutex_lock(&spa->config_lock);
    if (spa->scan_saved.func) {
        memset(&spa->scan_saved, 0, sizeof spa->scan_saved);
        int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        if (e) log_warn("spa", "pool %s: cannot write labels after a scan: %s", spa->name,
                        strerror(-e));
    }
    pthread_mutex_unlock(&spa->config_lock);
}

/* Whether a resilver pass must rewrite the block: one of its copies lies on a
 * top-level vdev with a stale leaf that missed the block's birth txg. */
static bool rs_needs(const scan_ctx_t *c, const cairn_blkptr_t *bp)
{
    for (size_t i = 0; i < c->nleaves; i++) {
        const rs_leaf_t *l = &c->leaves[i];
        bool born = false;
        for (uint32_t r = 0; r < l->ndtl && !born; r++)
            born = cairn_bp_phys_birth(bp) >= l->dtl[r][0] &&
                   cairn_bp_phys_birth(bp) <= l->dtl[r][1];
        if (!born) continue;
        /* A gang block's fragments may lie on any vdev: read it all again. */
        if (cairn_bp_is_gang(bp)) return true;
        for (int k = 0; k < bp->ncopies && k < CAIRN_MAX_COPIES; k++)
            if (bp->dva[k].vdev == c->top_of[i]) return true;
    }
    return false;
}

static int scrub_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    scan_ctx_t *c = arg;
    if (bm) { /* the walk goes by object set, then object (spa_upper_ops_t.traverse) */
        if (bm->objset != c->pos.objset) c->pos = (spa_bookmark_t){bm->objset, bm->object, 0, 0};
        else c->pos.object = CAIRN_MAX(c->pos.object, bm->object);
    }
    if (cairn_now_ns() - c->checkpoint_ns >= SCAN_CHECKPOINT_NS) scan_checkpoint(spa, c);
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
    scan_throttle(spa, c->func, c->delay_us);
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
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
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

/* Whether every txg a leaf's log names is at most txg. A log only grows by
 * txgs not yet synced, so a log that ends by the pass's txg is the one the
 * pass began with (or was resumed with). */
static bool dtl_ends_by(const vdev_t *leaf, uint64_t txg)
{
    for (uint32_t r = 0; r < leaf->ndtl; r++)
        if (leaf->dtl[r][1] > txg) return false;
    return true;
}

/* Under config_lock, after a pass walked every block: each leaf whose log did
 * not grow since the pass began holds everything now. */
static bool rs_complete(spa_t *spa, scan_ctx_t *c)
{
    bool changed = false;
    for (size_t i = 0; i < c->nleaves; i++) {
        rs_leaf_t *l = &c->leaves[i];
        vdev_t *leaf = l->leaf;
        if (!atomic_load(&leaf->stale) || !dtl_ends_by(leaf, c->pass_txg)) continue;
        leaf->ndtl = 0;
        atomic_store(&leaf->stale, false);
        changed = true;
        spa_vdev_replace_done(spa, leaf);
        spa_spare_return_if_whole(spa, leaf);
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

/* The first pass of a scan opened again: where the saved record left it. */
static void scan_resume_from(spa_t *spa, scan_ctx_t *c, const spa_scan_phys_t *rp)
{
    spa_scan_phys_t r = *rp;
    c->pos = (spa_bookmark_t){r.objset, r.object, 0, 0};
    c->pass_txg = r.pass_txg;
    log_info("spa", "pool %s: %s resumed at %s %llu %s %llu (%llu bytes examined, %llu "
             "issued before)", spa->name, c->func == SPA_SCAN_RESILVER ? "resilver" : "scrub",
             c->sequential ? "vdev" : "objset", (unsigned long long)r.objset,
             c->sequential ? "offset" : "object", (unsigned long long)r.object,
             (unsigned long long)r.examined, (unsigned long long)r.issued);
}

/* One walk of every block from c->pos on: the layer above's, then the pool's own. */
static int scan_walk(spa_t *spa, scan_ctx_t *c)
{
    pthread_mutex_lock(&spa->tx.lock);
    cairn_blkptr_t mos_root = spa->ub.mos_root;
    pthread_mutex_unlock(&spa->tx.lock);
    int e = 0;
    if (c->pos.objset != SPA_SCAN_POS_POOL && spa_upper && spa->upper_open)
        e = spa_upper->traverse(spa, &mos_root, &c->pos, scrub_visit, c);
    if (e > 0) e = 0; /* a skipped subtree (the root's) is no error */
    if (e == -ECANCELED) return e;
    c->pos = (spa_bookmark_t){SPA_SCAN_POS_POOL, 0, 0, 0};
    int e2 = spa_spacemap_visit(spa, scrub_visit, c);
    if (!e) e = e2;
    e2 = spa_brt_visit(spa, scrub_visit, c);
    if (!e) e = e2;
    e2 = spa_log_visit(spa, scrub_visit, c);
    return e ? e : e2;
}

static bool scan_stopping(spa_t *spa)
{
    pthread_mutex_lock(&spa->scrub_lock);
    bool stop = spa->scrub_stop;
    pthread_mutex_unlock(&spa->scrub_lock);
    return stop;
}

/* Tests slow a scan down to catch it in progress. */
static uint64_t test_delay_us(spa_scan_func_t func)
{
    const char *d = getenv(func == SPA_SCAN_RESILVER ? "CAIRN_RESILVER_DELAY_US"
                                                     : "CAIRN_SCRUB_DELAY_US");
    return d ? strtoull(d, NULL, 10) : 0;
}

static int rebuild_progress(spa_t *spa, uint32_t top_id, uint64_t offset, uint64_t bytes,
                            void *arg)
{
    scan_ctx_t *c = arg;
    c->pos = (spa_bookmark_t){top_id, offset, 0, 0};
    pthread_mutex_lock(&spa->scrub_lock);
    bool stop = spa->scrub_stop;
    spa->scrub.scanned += bytes;
    spa->scrub.examined += bytes;
    spa->scrub.issued += bytes;
    spa->scrub.repaired += bytes;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (stop) return -ECANCELED;
    if (cairn_now_ns() - c->checkpoint_ns >= SCAN_CHECKPOINT_NS) scan_checkpoint(spa, c);
    scan_throttle(spa, c->func, c->delay_us);
    return 0;
}

/* A sequential rebuild pass: each top-level vdev with stale leaves copied in
 * id and offset order from c->pos (objset: the vdev, object: the offset), then
 * the intent log's blocks by the walk (spa_rebuild.c says why). */
static int rebuild_walk(spa_t *spa, scan_ctx_t *c, uint64_t *copy_errors)
{
    vdev_t **dst = cairn_zalloc((c->nleaves + 1) * sizeof *dst);
    int e = 0;
    for (uint32_t v = 0; v < spa->ntop && !e; v++) {
        if (c->pos.objset != v && (c->pos.objset > v || c->pos.objset == SPA_SCAN_POS_POOL))
            continue; /* copied before the restart */
        size_t n = 0;
        for (size_t i = 0; i < c->nleaves; i++)
            if (c->top_of[i] == v) dst[n++] = c->leaves[i].leaf;
        if (!n) continue;
        uint64_t from = c->pos.objset == v ? c->pos.object : 0, errs = 0;
        uint64_t t0 = cairn_now_ns();
        e = spa_rebuild_top(spa, v, from, dst, n, rebuild_progress, c, &errs);
        log_debug("spa", "pool %s: sequential copy of vdev %u from offset %llu took %llu ms",
                  spa->name, v, (unsigned long long)from,
                  (unsigned long long)((cairn_now_ns() - t0) / 1000000));
        *copy_errors += errs;
    }
    free(dst);
    if (e) return e;
    c->pos = (spa_bookmark_t){SPA_SCAN_POS_POOL, 0, 0, 0};
    return spa_log_visit(spa, scrub_visit, c);
}

/* Only a mirror's side can be copied from a sibling (a raidz column cannot). */
static bool rebuild_possible(spa_t *spa, const scan_ctx_t *c)
{
    for (size_t i = 0; i < c->nleaves; i++) {
        vdev_t *top = spa_top_vdev(spa, c->top_of[i]);
        if (!top || top->type != VDEV_TYPE_MIRROR) return false;
    }
    return true;
}

/* Passes until every stale leaf is whole (a resilver) or one walk (a scrub). */
static int scan_passes(spa_t *spa, scan_ctx_t *c)
{
    int e = 0;
    for (int pass = 0;; pass++) {
        if (c->resuming) {
            scan_resume_from(spa, c, &c->resume);
            c->resuming = false;
        } else {
            if (pass && c->func == SPA_SCAN_RESILVER)
                spa_txg_wait_synced(spa, 0); /* the newest blocks of new logs */
            c->pos = (spa_bookmark_t){0, 0, 0, 0};
            c->pass_txg = spa_last_synced_txg(spa);
        }
        if (c->func == SPA_SCAN_RESILVER) {
            pthread_mutex_lock(&spa->config_lock);
            rs_collect(spa, c);
            pthread_mutex_unlock(&spa->config_lock);
            if (!c->nleaves) break;
        }
        if (c->sequential && !rebuild_possible(spa, c)) {
            log_warn("spa", "pool %s: a stale leaf outside a mirror: resilvering by the block "
                     "walk, not sequentially", spa->name);
            c->sequential = false;
        }
        uint64_t copy_errors = 0;
        e = c->sequential ? rebuild_walk(spa, c, &copy_errors) : scan_walk(spa, c);
        if (c->func != SPA_SCAN_RESILVER || e || scan_stopping(spa)) break;
        if (copy_errors) {
            /* A side it could not read: the block walk rebuilds from any good copy. */
            log_warn("spa", "pool %s: sequential rebuild failed on %llu chunks; resilvering by "
                     "the block walk", spa->name, (unsigned long long)copy_errors);
            c->sequential = false;
            continue;
        }
        pthread_mutex_lock(&spa->config_lock);
        rs_complete(spa, c);
        pthread_mutex_unlock(&spa->config_lock);
        if (c->sequential) c->rebuilt = true;
        /* Another pass when a leaf's log grew or a leaf turned stale meanwhile. */
    }
    return e;
}

/* A finished sequential rebuild turns into the scrub that verifies it, in
 * this thread: its record says scrub (a crash from here resumes the scrub),
 * its summary stays for `pool status`. Unless a leaf turned stale since its
 * last look: then nothing changes, and the resilver makes another pass. */
static void rebuild_to_scrub(spa_t *spa, scan_ctx_t *c)
{
    spa_space_t sp;
    spa_get_space(spa, &sp);
    pthread_mutex_lock(&spa->scrub_lock);
    if (spa->resilver_again) {
        /* A leaf turned stale since the resilver's last look: it goes on first. */
        spa->resilver_again = false;
        pthread_mutex_unlock(&spa->scrub_lock);
        return;
    }
    spa->rebuild_last = spa->scrub;
    spa->rebuild_last.state = SPA_SCRUB_FINISHED;
    spa->rebuild_last.end_time = cairn_wallclock_s();
    spa_scrub_stat_t r = spa->rebuild_last;
    memset(&spa->scrub, 0, sizeof spa->scrub);
    spa->scrub.state = SPA_SCRUB_SCANNING;
    spa->scrub.func = SPA_SCAN_SCRUB;
    spa->scrub.start_time = spa->scrub.run_start = cairn_wallclock_s();
    spa->scrub.to_examine = sp.alloc;
    spa_errlog_scrub_begin(spa, false);
    pthread_cond_broadcast(&spa->scrub_cv); /* `pool wait -t resilver` is over */
    pthread_mutex_unlock(&spa->scrub_lock);
    log_info("spa", "pool %s: resilver finished (sequential): %llu bytes resilvered, %llu "
             "errors; a scrub verifies it", spa->name, (unsigned long long)r.repaired,
             (unsigned long long)r.errors);
    *c = (scan_ctx_t){.func = SPA_SCAN_SCRUB, .delay_us = test_delay_us(SPA_SCAN_SCRUB),
                      .checkpoint_ns = c->checkpoint_ns, .leaves = c->leaves,
                      .top_of = c->top_of};
    scan_checkpoint(spa, c);
}

static _Atomic bool test_hold_scan_end;
static _Atomic bool test_scan_end_held;

void spa_scan_test_hold_end(bool on) { atomic_store(&test_hold_scan_end, on); }
bool spa_scan_test_end_held(void) { return atomic_load(&test_scan_end_held); }

/* Tests: a scan that has found its work done waits here before it ends. */
static void scan_end_test_hold(void)
{
    if (!atomic_load(&test_hold_scan_end)) return;
    atomic_store(&test_scan_end_held, true);
    while (atomic_load(&test_hold_scan_end)) usleep(1000);
    atomic_store(&test_scan_end_held, false);
}

static void *scrub_thread(void *arg)
{
    spa_t *spa = arg;
    spa_in_scan_thread = true;
    pthread_mutex_lock(&spa->scrub_lock);
    scan_ctx_t c = {.func = spa->scrub.func, .sequential = spa->scrub.sequential,
                    .checkpoint_ns = cairn_now_ns(), .resuming = spa->scan_resuming,
                    .resume = spa->scan_resume};
    spa->scan_resuming = false;
    pthread_mutex_unlock(&spa->scrub_lock);
    c.delay_us = test_delay_us(c.func);
    /* Make what was written so far part of the walked tree (frees are held
     * already: the tree as of any later txg stays whole). */
    spa_txg_wait_synced(spa, 0);
    if (c.func == SPA_SCAN_RESILVER) spa_resilver_began(spa, c.resuming, c.sequential);
    int e = 0;
again:
    e = scan_passes(spa, &c);
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
    scan_end_test_hold();
    if (c.func == SPA_SCAN_RESILVER && c.rebuilt && finished && !e) {
        spa_scrub_stat_t st;
        spa_scrub_get(spa, &st);
        spa_resilver_ended(spa, true, &st);
        rebuild_to_scrub(spa, &c);
        goto again;
    }
    pthread_mutex_lock(&spa->scrub_lock);
    int closing = spa->scan_closing;
    pthread_mutex_unlock(&spa->scrub_lock);
    /* Stopped because the pool closes: it goes on from here when opened again
     * (a power cut, SPA_SCAN_CLOSE_ABANDON, writes nothing more). Otherwise the
     * scan is over. */
    if (!finished && closing == SPA_SCAN_CLOSE_SAVE) scan_checkpoint(spa, &c);
    else if (!closing) scan_record_clear(spa);
    pthread_mutex_lock(&spa->scrub_lock);
    /* A leaf that turned stale since the look above (its spa_resilver_check
     * saw this resilver running, so it started none): another pass, decided
     * under the same lock as the end, or that leaf would wait for the next
     * resilver someone else starts. */
    if (c.func == SPA_SCAN_RESILVER && finished && !e && !closing && spa->resilver_again) {
        spa->resilver_again = false;
        pthread_mutex_unlock(&spa->scrub_lock);
        goto again;
    }
    atomic_fetch_sub(&spa->hold_frees, 1);
    /* Before the state changes, so whoever waits for the scrub sees its list. */
    if (c.func == SPA_SCAN_SCRUB) spa_errlog_scrub_end(spa, finished);
    spa->scrub.end_time = cairn_wallclock_s();
    spa->scrub.state = finished ? SPA_SCRUB_FINISHED : SPA_SCRUB_CANCELED;
    spa_scrub_stat_t final = spa->scrub;
    pthread_cond_broadcast(&spa->scrub_cv);
    pthread_mutex_unlock(&spa->scrub_lock);
    free(c.leaves);
    free(c.top_of);
    spa_event_post(spa->name,
                   c.func == SPA_SCAN_RESILVER ? "sysevent.fs.cairn.resilver_finish"
                                               : "sysevent.fs.cairn.scrub_finish",
                   "state=%s examined=%llu %s=%llu errors=%llu",
                   final.state == SPA_SCRUB_FINISHED ? "finished" : "canceled",
                   (unsigned long long)final.examined,
                   c.func == SPA_SCAN_RESILVER ? "resilvered" : "repaired",
                   (unsigned long long)final.repaired, (unsigned long long)final.errors);
    if (c.func == SPA_SCAN_RESILVER) spa_resilver_ended(spa, finished, &final);
    log_info("spa", "pool %s: %s%s %s: %llu bytes examined, %llu %s, %llu errors; %llu bytes "
             "issued (%llu in this run)", spa->name,
             c.func == SPA_SCAN_RESILVER ? "resilver" : "scrub",
             c.sequential ? " (sequential)" : "",
             spa->scrub.state == SPA_SCRUB_FINISHED ? "finished" : "canceled",
             (unsigned long long)spa->scrub.examined, (unsigned long long)spa->scrub.repaired,
             c.func == SPA_SCAN_RESILVER ? "resilvered" : "repaired",
             (unsigned long long)spa->scrub.errors, (unsigned long long)spa->scrub.issued,
             (unsigned long long)(spa->scrub.issued - spa->scrub.run_issued));
    return NULL;
}

void spa_rebuild_get(spa_t *spa, spa_scrub_stat_t *out)
{
    pthread_mutex_lock(&spa->scrub_lock);
    *out = spa->rebuild_last;
    pthread_mutex_unlock(&spa->scrub_lock);
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
        /* The last scan's thread, ended but not joined: joined by this caller
         * alone (two starts at once must not both join it). */
        pthread_t ended = spa->scrub_thread;
        spa->scrub_thread_running = false;
        pthread_mutex_unlock(&spa->scrub_lock);
        pthread_join(ended, NULL);
        pthread_mutex_lock(&spa->scrub_lock);
        if (spa->scrub.state == SPA_SCRUB_SCANNING) { /* another start won the race */
            pthread_mutex_unlock(&spa->scrub_lock);
            return -EBUSY;
        }
    }
    /* Running from here on, as `pool status` and `pool wait` see it: the txg
     * sync that makes what was written so far part of the walked tree is the
     * thread's first step, not a gap in which a resilver is due and yet
     * nothing runs. */
    spa_space_t sp;
    spa_get_space(spa, &sp);
    memset(&spa->scrub, 0, sizeof spa->scrub);
    spa->scrub.state = SPA_SCRUB_SCANNING;
    spa->scrub.func = func;
    spa->scrub.start_time = cairn_wallclock_s();
    spa->scrub.to_examine = sp.alloc;
    pthread_mutex_lock(&spa->config_lock);
    if (func == SPA_SCAN_RESILVER && spa->resilver_since) spa->scrub.start_time = spa->resilver_since;
    /* A scan of this kind the pool's last run left unfinished goes on. */
    const spa_scan_phys_t *r = &spa->scan_saved;
    spa->scan_resuming = (r->func & SPA_SCAN_PHYS_FUNC_MASK) == scan_phys_func(func);
    if (spa->scan_resuming) {
        spa->scan_resume = *r;
        spa->scrub.start_time = r->start_time;
        spa->scrub.to_examine = CAIRN_MAX(r->to_examine, r->examined);
        spa->scrub.scanned = r->scanned;
        spa->scrub.examined = r->examined;
        spa->scrub.issued = r->issued;
        spa->scrub.repaired = r->repaired;
        spa->scrub.errors = r->errors;
        spa->scrub.resumed = true;
    }
    if (func == SPA_SCAN_RESILVER) {
        spa->scrub.sequential = spa->scan_resuming ? (r->func & SPA_SCAN_PHYS_SEQUENTIAL) != 0
                                                   : spa->rebuild_asked;
        spa->rebuild_asked = false;
        memset(&spa->rebuild_last, 0, sizeof spa->rebuild_last); /* superseded */
    }
    pthread_mutex_unlock(&spa->config_lock);
    /* Rates and the time left are this run's (a resumed scan's earlier bytes took
     * an unknown time). */
    spa->scrub.run_start = cairn_wallclock_s();
    spa->scrub.run_scanned = spa->scrub.scanned;
    spa->scrub.run_issued = spa->scrub.issued;
    spa->scrub.run_examined = spa->scrub.examined;
    spa->scrub_stop = false;
    if (func == SPA_SCAN_SCRUB) spa_errlog_scrub_begin(spa, spa->scan_resuming);
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

void spa_scan_resume_saved(spa_t *spa)
{
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    if (st.state == SPA_SCRUB_SCANNING) return; /* the resilver took the record */
    pthread_mutex_lock(&spa->config_lock);
    uint64_t func = spa->scan_saved.func & SPA_SCAN_PHYS_FUNC_MASK;
    /* A resilver record with nothing left to resilver: its end was not recorded. */
    if (func == SPA_SCAN_PHYS_RESILVER) memset(&spa->scan_saved, 0, sizeof spa->scan_saved);
    pthread_mutex_unlock(&spa->config_lock);
    if (func != SPA_SCAN_PHYS_SCRUB) return;
    int e = spa_scan_start(spa, SPA_SCAN_SCRUB);
    if (e && e != -EBUSY) log_warn("spa", "pool %s: cannot resume the scrub: %s", spa->name, strerror(-e));
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

void spa_scrub_fini(spa_t *spa, bool save)
{
    pthread_mutex_lock(&spa->scrub_lock);
    spa->scan_closing = save ? SPA_SCAN_CLOSE_SAVE : SPA_SCAN_CLOSE_ABANDON;
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
    spa_t *spa;
    range_tree_t **referenced; /* per top-level vdev */
    spa_check_report_t *rep;
} check_ctx_t;

/* One extent a block holds, into the referenced set (spa_extent_fn). */
static void check_extent(void *arg, uint32_t vdev, uint64_t offset, uint64_t size)
{
    check_ctx_t *c = arg;
    spa_t *spa = c->spa;
    if (!spa_top_vdev(spa, vdev) || size == 0 || offset + size > spa->root->children[vdev]->asize) {
        c->rep->double_bytes += size; /* points outside the pool: cannot be allocated */
        return;
    }
    c->rep->bytes_referenced += size;
    range_tree_t *rt = c->referenced[vdev];
    uint64_t dup = range_tree_overlap_space(rt, offset, size);
    c->rep->double_bytes += dup;
    if (dup) range_tree_clear(rt, offset, size);
    range_tree_add(rt, offset, size);
}

static int check_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)bm;
    check_ctx_t *c = arg;
    c->rep->blocks++;
    if (cairn_bp_is_gang(bp)) {
        c->rep->gang_blocks++;
        if (spa_gang_extents(spa, bp, check_extent, c)) c->rep->bad_blocks++;
    } else {
        for (int i = 0; i < bp->ncopies && i < CAIRN_MAX_COPIES; i++)
            check_extent(c, bp->dva[i].vdev, bp->dva[i].offset, cairn_dva_asize(&bp->dva[i]));
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
    check_ctx_t c = {.spa = spa, .rep = rep};
    c.referenced = cairn_zalloc(sizeof(range_tree_t *) * spa->ntop);
    for (uint32_t i = 0; i < spa->ntop; i++) c.referenced[i] = range_tree_create();
    e = spa_upper->traverse(spa, &spa->ub.mos_root, NULL, check_visit, &c);
    if (!e) e = spa_spacemap_visit(spa, check_visit, &c);
    if (!e) e = spa_log_visit(spa, check_visit, &c);
    if (!e) e = spa_brt_visit(spa, check_visit, &c);
    if (!e) spa_log_add_region_refs(spa, c.referenced, rep);
    /* A shared block is walked (and counted allocated) once; an entry of the
     * block reference table whose block nothing references would make a
     * future free of nothing, or keep space forever. */
    if (!e) {
        spa_brt_ref_t *refs = NULL;
        size_t n = spa_brt_list(spa, &refs);
        rep->brt_entries = n;
        for (size_t i = 0; i < n; i++)
            if (refs[i].vdev >= spa->ntop ||
                !range_tree_contains(c.referenced[refs[i].vdev], refs[i].offset, 1))
                rep->brt_orphans++;
        free(refs);
    }
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
    if (rep->bad_blocks || rep->leaked_bytes || rep->double_bytes || rep->brt_orphans) {
        if (err)
            snprintf(err, errlen,
                     "pool is inconsistent: %llu bad blocks, %llu bytes leaked, %llu bytes doubly "
                     "allocated, %llu shared-block entries without their block",
                     (unsigned long long)rep->bad_blocks, (unsigned long long)rep->leaked_bytes,
                     (unsigned long long)rep->double_bytes, (unsigned long long)rep->brt_orphans);
        return -EUCLEAN;
    }
    return 0;
}
