/*
 * Transaction groups.
 *
 * Every change to a pool belongs to a txg. Three txgs can be alive at once:
 *
 *   open       - accepts new holders (spa_tx_hold); there is always one
 *   quiescing  - closed to new holders, waiting for its holders to leave
 *   syncing    - being written out by the sync thread
 *
 * The sync thread closes the open txg when the txg timeout has passed since
 * the last sync and the txg is non-empty, when its dirty data passes a
 * quarter of dirty_max, or when someone waits for it (spa_txg_wait_synced).
 * Closing is cheap for writers: the open txg number simply advances, so new
 * holders join the next txg while the closed one drains.
 *
 * The write throttle: spa_tx_hold() sleeps while the open txg already carries
 * dirty_max bytes, i.e. while writers run ahead of what the disks absorb; it
 * wakes as soon as a sync completes. This keeps memory bounded and makes the
 * stall smooth rather than a cliff at a hard limit.
 *
 * Frees are deferred (SPA_DEFER_TXGS) and become free space only when later
 * txgs sync. A pool that goes idle right after a remove would keep that space
 * deferred until its next change, which on a full pool may never come (every
 * write is refused for want of the very space that waits): so while deferred
 * frees remain after a sync, the sync thread closes empty txgs of its own,
 * SPA_FREE_SYNC_MS apart, until they are released. An empty txg allocates
 * nothing (nothing dirty, the space map log unchanged), so this stops. A txg
 * with changes in it is not closed for this: it syncs on its own terms (the
 * timeout, dirty data, a waiter), and the frees advance with it; a writer
 * refused for space waits for those syncs itself (spa_space_freeing).
 *
 * spa_sync() writes txg T: the upper layer's blocks (giving a new MOS root),
 * then the space map log for T, a flush of every leaf, the uberblock, and a
 * second flush. Only after that second flush is T durable; deferred frees of
 * T - SPA_DEFER_TXGS are released then. If anything fails, the pool stops
 * accepting new changes (failed) rather than write an uberblock over a tree
 * that is not entirely on disk.
 */
#include "spa_impl.h"

#include <cairn/assert.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

void spa_txg_init(spa_t *spa, uint64_t first_open_txg)
{
    spa_txg_state_t *tx = &spa->tx;
    memset(tx, 0, sizeof *tx);
    pthread_mutex_init(&tx->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tx->sync_cv, &ca);
    pthread_cond_init(&tx->quiesce_cv, NULL);
    pthread_cond_init(&tx->done_cv, NULL);
    pthread_condattr_destroy(&ca);
    tx->open_txg = first_open_txg;
    tx->synced_txg = first_open_txg - 1;
    tx->last_sync_ns = cairn_now_ns();
    atomic_store(&spa->tx_ready, true); /* spa_suspend may take tx->lock from now on */
}

uint64_t spa_open_txg(spa_t *spa)
{
    pthread_mutex_lock(&spa->tx.lock);
    uint64_t t = spa->tx.open_txg;
    pthread_mutex_unlock(&spa->tx.lock);
    return t;
}

uint64_t spa_last_synced_txg(spa_t *spa)
{
    pthread_mutex_lock(&spa->tx.lock);
    uint64_t t = spa->tx.synced_txg;
    pthread_mutex_unlock(&spa->tx.lock);
    return t;
}

/* num/den of dirty_max, and whether the open txg's dirty data has reached it:
 * 1/1 is the throttle's limit (spa_tx_hold waits), 3/4 its forecast
 * (spa_tx_would_throttle), 1/4 where the sync thread closes the txg (and
 * spa_dirty_add wakes it on the crossing). Computed here only, so that these
 * cannot drift apart. tx.lock held. */
static uint64_t dirty_share(const spa_t *spa, uint64_t num, uint64_t den)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->tx.lock));
    return spa->dirty_max / den * num;
}

static bool open_dirty_reaches(const spa_t *spa, uint64_t num, uint64_t den)
{
    return spa->tx.dirty[spa->tx.open_txg & 3] >= dirty_share(spa, num, den);
}

/* Throttle: wait while the open txg is full and a sync is making room. */
static void throttle_locked(spa_t *spa)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->tx.lock));
    spa_txg_state_t *tx = &spa->tx;
    while (!tx->stop && !tx->failed && open_dirty_reaches(spa, 1, 1) && tx->thread_running) {
        pthread_cond_signal(&tx->sync_cv);
        pthread_cond_wait(&tx->done_cv, &tx->lock);
    }
}

bool spa_tx_would_throttle(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    /* Three quarters: others may fill the rest before this caller's change. */
    bool near = open_dirty_reaches(spa, 3, 4) || tx->failed;
    pthread_mutex_unlock(&tx->lock);
    return near;
}

int spa_tx_throttle(spa_t *spa)
{
    pthread_mutex_lock(&spa->tx.lock);
    throttle_locked(spa);
    int err = spa->tx.failed ? -EIO : 0;
    pthread_mutex_unlock(&spa->tx.lock);
    return err;
}

uint64_t spa_tx_hold_nowait(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    uint64_t t = tx->open_txg;
    tx->holders[t & 3]++;
    tx->touched[t & 3] = true;
    pthread_mutex_unlock(&tx->lock);
    return t;
}

uint64_t spa_tx_hold(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    throttle_locked(spa);
    uint64_t t = tx->open_txg;
    tx->holders[t & 3]++;
    tx->touched[t & 3] = true;
    pthread_mutex_unlock(&tx->lock);
    return t;
}

bool spa_tx_hold_if_open(spa_t *spa, uint64_t txg)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    bool open = txg == tx->open_txg && !tx->failed;
    if (open) {
        tx->holders[txg & 3]++;
        tx->touched[txg & 3] = true;
    }
    pthread_mutex_unlock(&tx->lock);
    return open;
}

void spa_tx_rele(spa_t *spa, uint64_t txg)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    /* Only a txg that is open or quiescing has holders. */
    CAIRN_ASSERT(txg > tx->synced_txg && txg <= tx->open_txg && txg != tx->syncing_txg);
    CAIRN_ASSERT(tx->holders[txg & 3] > 0);
    if (--tx->holders[txg & 3] == 0 && txg == tx->quiescing_txg) pthread_cond_signal(&tx->quiesce_cv);
    pthread_mutex_unlock(&tx->lock);
}

void spa_dirty_add(spa_t *spa, uint64_t txg, int64_t delta, uint64_t space)
{
    spa_txg_state_t *tx = &spa->tx;
    if (delta > 0) spa_client_io(spa);
    pthread_mutex_lock(&tx->lock);
    uint64_t *d = &tx->dirty[txg & 3];
    uint64_t before = *d;
    if (delta < 0 && (uint64_t)-delta > *d) *d = 0;
    else *d += (uint64_t)delta;
    tx->space[txg & 3] += space;
    atomic_fetch_add_explicit(&spa->space_claimed, space, memory_order_relaxed);
    /* Only the crossing is news to the sync thread (txg_should_close). */
    uint64_t close_at = dirty_share(spa, 1, 4);
    if (txg == tx->open_txg && before < close_at && *d >= close_at) pthread_cond_signal(&tx->sync_cv);
    pthread_mutex_unlock(&tx->lock);
}

uint64_t spa_space_claimed(spa_t *spa)
{
    return atomic_load_explicit(&spa->space_claimed, memory_order_relaxed);
}

uint64_t spa_space_pending(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    uint64_t sum = 0;
    /* Open, quiescing and syncing txgs: a synced one's blocks are in alloc. */
    for (uint64_t t = tx->synced_txg + 1; t <= tx->open_txg && t - tx->synced_txg <= 4; t++)
        sum += tx->space[t & 3];
    pthread_mutex_unlock(&tx->lock);
    return sum;
}

void spa_space_freeing_add(spa_t *spa, uint64_t txg, uint64_t bytes)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    if (txg > tx->synced_txg) tx->freeing[txg & 3] += bytes;
    pthread_mutex_unlock(&tx->lock);
}

uint64_t spa_space_freeing(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    uint64_t sum = atomic_load(&spa->frees_deferred);
    for (uint64_t t = tx->synced_txg + 1; t <= tx->open_txg && t - tx->synced_txg <= 4; t++)
        sum += tx->freeing[t & 3];
    pthread_mutex_unlock(&tx->lock);
    return sum;
}

int spa_txg_wait_synced(spa_t *spa, uint64_t txg)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    if (txg == 0) txg = tx->open_txg;
    if (txg > tx->wait_target) tx->wait_target = txg;
    pthread_cond_signal(&tx->sync_cv);
    while (tx->synced_txg < txg && !tx->failed && tx->thread_running)
        pthread_cond_wait(&tx->done_cv, &tx->lock);
    int err = tx->synced_txg >= txg ? 0 : (tx->failed ? -EIO : -ESHUTDOWN);
    pthread_mutex_unlock(&tx->lock);
    return err;
}

void spa_txg_kick(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    if (tx->open_txg > tx->wait_target) tx->wait_target = tx->open_txg;
    pthread_cond_signal(&tx->sync_cv);
    pthread_mutex_unlock(&tx->lock);
}

#define SPA_FREE_SYNC_MS 100

static bool txg_should_close(spa_t *spa, uint64_t now)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->tx.lock));
    spa_txg_state_t *tx = &spa->tx;
    uint64_t t = tx->open_txg;
    /* A failed pool closes no more txgs: the failed one's changes stay in
     * their slots (nothing wrote them), and a txg four later would reuse
     * those slots. New transactions are refused (spa_tx_throttle); what was
     * acknowledged lives in the intent log until the pool is imported again. */
    if (tx->failed) return false;
    if (tx->wait_target >= t) return true;
    /* Only an empty txg: one with changes keeps its timeout. On a pool that
     * keeps overwriting, every sync frees, so closing changed txgs here would
     * cut them SPA_FREE_SYNC_MS apart whatever txg_timeout says. */
    if (atomic_load(&spa->frees_deferred) && !atomic_load(&spa->hold_frees) && !tx->failed &&
        !tx->touched[t & 3] && now - tx->last_sync_ns >= SPA_FREE_SYNC_MS * 1000000ULL)
        return true;
    /* An idle intent log gives its free chunks back in a txg of its own. */
    if (spa_log_shrink_due(spa, now)) return true;
    /* A grown device: its labels move and the vdev may grow (spa_expand.c). */
    if (!tx->failed && spa_expand_due(spa, now)) return true;
    if (!tx->touched[t & 3]) return false;
    if (open_dirty_reaches(spa, 1, 4)) return true;
    if (tx->stop) return true;
    return now - tx->last_sync_ns >= spa->txg_timeout_ms * 1000000ULL;
}

static void *spa_sync_thread(void *arg)
{
    spa_t *spa = arg;
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    for (;;) {
        uint64_t now = cairn_now_ns();
        if (!txg_should_close(spa, now)) {
            if (tx->stop) break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t wait_ns = spa->txg_timeout_ms * 1000000ULL;
            if (atomic_load(&spa->frees_deferred) && wait_ns > SPA_FREE_SYNC_MS * 1000000ULL)
                wait_ns = SPA_FREE_SYNC_MS * 1000000ULL;
            uint64_t since = now - tx->last_sync_ns;
            wait_ns = since < wait_ns ? wait_ns - since : 1000000ULL;
            if (wait_ns > 500000000ULL) wait_ns = 500000000ULL;
            ts.tv_sec += (time_t)(wait_ns / 1000000000ULL);
            ts.tv_nsec += (long)(wait_ns % 1000000000ULL);
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&tx->sync_cv, &tx->lock, &ts);
            continue;
        }
        /* Close the open txg: new holders join the next one. Its slot in the
         * rings of four was last used by t - 3, which synced (or the pool
         * failed and nothing syncs any more). */
        uint64_t t = tx->open_txg;
        CAIRN_ASSERT(tx->failed || tx->synced_txg + 1 == t);
        CAIRN_ASSERT(tx->quiescing_txg == 0 && tx->syncing_txg == 0);
        tx->open_txg = t + 1;
        tx->holders[(t + 1) & 3] = 0;
        tx->dirty[(t + 1) & 3] = 0;
        tx->space[(t + 1) & 3] = 0;
        tx->freeing[(t + 1) & 3] = 0;
        tx->touched[(t + 1) & 3] = false;
        tx->quiescing_txg = t;
        while (tx->holders[t & 3]) pthread_cond_wait(&tx->quiesce_cv, &tx->lock);
        tx->quiescing_txg = 0;
        tx->syncing_txg = t;
        bool failed = tx->failed;   /* spa_abandon, a suspension set it under the lock */
        pthread_mutex_unlock(&tx->lock);

        int err = failed ? -EIO : spa_sync(spa, t);

        pthread_mutex_lock(&tx->lock);
        tx->syncing_txg = 0;
        tx->last_sync_ns = cairn_now_ns();
        if (err) {
            if (!tx->failed)
                log_error("spa", "pool %s: sync of txg %llu failed (%s); the pool is suspended",
                          spa->name, (unsigned long long)t, strerror(-err));
            tx->failed = true;
        } else {
            CAIRN_ASSERT(t == tx->synced_txg + 1); /* txgs sync one at a time, in order */
            tx->synced_txg = t;
        }
        tx->dirty[t & 3] = 0;
        tx->touched[t & 3] = false;
        pthread_cond_broadcast(&tx->done_cv);
        if (tx->failed && tx->stop) break;
    }
    tx->thread_running = false;
    pthread_cond_broadcast(&tx->done_cv);
    pthread_mutex_unlock(&tx->lock);
    return NULL;
}

void spa_txg_start(spa_t *spa)
{
    if (spa->readonly) return;
    spa->tx.thread_running = true;
    pthread_create(&spa->tx.thread, NULL, spa_sync_thread, spa);
    pthread_setname_np(spa->tx.thread, "spa_sync");
}

void spa_txg_stop(spa_t *spa)
{
    spa_txg_state_t *tx = &spa->tx;
    pthread_mutex_lock(&tx->lock);
    bool running = tx->thread_running;
    tx->stop = true;
    pthread_cond_signal(&tx->sync_cv);
    pthread_cond_broadcast(&tx->done_cv);
    pthread_mutex_unlock(&tx->lock);
    if (running || spa->tx.thread) pthread_join(tx->thread, NULL);
    spa->tx.thread = 0;
}

int spa_sync(spa_t *spa, uint64_t txg)
{
    spa_uberblock_phys_t ub = spa->ub;
    int err = 0;
    uint32_t stale = spa->stale_ids;
    spa_vdev_sync_changes(spa, txg); /* log vdevs added or removed join this txg */
    if (spa_upper && spa->upper_open) {
        err = spa_upper->sync(spa, txg, &ub.mos_root);
        if (err) return err;
    }
    err = spa_log_sync(spa, txg, &ub);
    if (err) return err;
    err = spa_brt_sync(spa, txg, &ub);
    if (err) return err;
    err = spa_spacemap_sync(spa, txg, &ub);
    if (err) return err;
    /* Every block of txg must be on stable storage before the uberblock names it. */
    err = vdev_flush(spa->root);
    if (err) return err;
    ub.magic = SPA_UBERBLOCK_MAGIC;
    ub.version = atomic_load(&spa->brt_feature) ? SPA_VERSION_BRT : SPA_VERSION;
    ub.txg = txg;
    ub.pool_guid = spa->guid;
    ub.timestamp = cairn_wallclock_s();
    spa_uberblock_seal(&ub);
    err = spa_uberblock_write_all(spa, &ub);
    if (err) return err;
    pthread_mutex_lock(&spa->tx.lock);
    spa->ub = ub;
    pthread_mutex_unlock(&spa->tx.lock);
    uint64_t release = txg;
    if (atomic_load(&spa->hold_frees)) release = spa->held_synced_txg;
    else spa->held_synced_txg = txg;
    uint64_t deferred = 0;
    for (uint32_t i = 0; i < spa->ntop; i++)
        if (spa->ms[i]) {
            metaslab_txg_synced(spa->ms[i], release);
            metaslab_stats_t st;
            metaslab_get_stats(spa->ms[i], &st);
            deferred += st.deferred;
        }
    atomic_store(&spa->frees_deferred, deferred);
    /* This txg rewrote the space map log and the log directory without the ids a
     * crash had left in them (both were due at the first sync after import). */
    spa->stale_ids &= ~stale;
    return 0;
}
