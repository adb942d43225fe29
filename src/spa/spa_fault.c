/*
 * Fault management: a disk that keeps failing is taken out of service by
 * itself, and put back by `pool clear` / `pool online` once it answers again
 * (API in include/cairn/spa.h).
 *
 * HEARING OF ERRORS. The pool installs hooks on its tree's root
 * (vdev_set_hooks); every I/O or checksum error of a leaf reaches
 * fault_leaf_error() on the I/O thread that saw it. That thread must not wait
 * for I/O - a label write holding the config lock may wait for this very
 * leaf - so the hook only decides, under the fault lock, and records; the
 * fault taskq applies what was decided under the config lock (fault_apply).
 *
 * DECIDING. Each error goes into the leaf's error window; more than the
 * policy's errors within its window (ZFS's zed: 10 in 600 s) faults the leaf
 * - at once: its state turns FAULTED in the hook, so no new I/O is sent to it.
 * An error saying the device is gone (ENXIO, ENODEV), or errors past the
 * threshold of a device whose path no longer names it (pulled out, its node
 * removed, though its driver answers EIO), take it out the same way but as UNAVAIL: a missing disk, not a failing one, which the pool takes back
 * by itself if it reappears (spa_probe.c); it is not kept so in the labels. Checksum
 * errors alone only make it DEGRADED ("too many errors"), as ZFS's retire
 * agent does: the disk answers, every block it returns is verified, and a
 * scrub goes on repairing it. A leaf is only faulted when its vdev keeps a
 * readable copy of every block without it (the check offline makes): a leaf
 * the data still needs stays in use, DEGRADED, since a failing disk that
 * still returns most blocks is better than none. Acknowledged data is never
 * made unreadable by a fault.
 *
 * WHAT A FAULTED LEAF MISSES. From the moment it faulted, writes skip it:
 * the txgs from the last synced one + 1 on (the one syncing and the open one
 * may already have skipped it, as for offline) go into its dirty time log,
 * open-ended until it is back, and the labels say so at once. A write that
 * failed on a leaf that stays in service is remembered the same way (first
 * txg it may lack, up to the txg open when the fault taskq runs), and the leaf
 * turns stale and is resilvered: a lost write is not left for a later read to
 * find. That log reaches the labels with their next write (a crash before
 * leaves the block for a read's checksum or a scrub to find and heal, as
 * before). A pool whose sync failed (every device lost at once: power, a
 * controller) is suspended, not faulty: nothing is decided or written then.
 *
 * BACK IN SERVICE. clear/online read the leaf's first label through its open
 * handle: a disk that answers is ONLINE again, stale when its log is not
 * empty, and resilvered - only the txgs it missed. FAULTED and DEGRADED are
 * in the labels (docs/ondisk-format.md 1.2), so they survive export and restart.
 */
#include "spa_impl.h"

#include <cairn/assert.h>
#include <cairn/raidz.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint32_t fault_errors = 10;
static _Atomic uint32_t fault_window_s = 600;

void spa_fault_set_policy(uint32_t errors, uint32_t window_s)
{
    if (errors) atomic_store(&fault_errors, errors);
    if (window_s) atomic_store(&fault_window_s, window_s);
}

static const char *error_kind_name(vdev_error_kind_t k)
{
    switch (k) {
    case VDEV_ERR_READ: return "read";
    case VDEV_ERR_WRITE: return "write";
    case VDEV_ERR_CHECKSUM: return "checksum";
    case VDEV_ERR_FLUSH: return "flush";
    }
    return "?";
}

static void post_statechange(spa_t *spa, const vdev_t *leaf, const char *why)
{
    spa_event_post(spa->name, "resource.fs.cairn.statechange", "vdev=%s state=%s%s%s",
                   leaf->path ? leaf->path : "?",
                   vdev_state_name((vdev_state_t)atomic_load(&leaf->state)), why ? " reason=" : "",
                   why ? why : "");
}

/* Under fault_lock: have the taskq apply what the hooks decided. */
static void fault_apply(void *arg);
static void fault_queue_locked(spa_t *spa)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->fault_lock));
    if (spa->fault_queued || !spa->fault_tq) return;
    spa->fault_queued = true;
    taskq_dispatch(spa->fault_tq, fault_apply, spa, NULL);
}

static bool device_gone(int error) { return error == -ENXIO || error == -ENODEV; }

/* Under fault_lock: leaf leaves service at once - no new I/O - as FAULTED or
 * UNAVAIL (gone) as of txg from; the taskq applies the rest. */
static void take_out_locked(spa_t *spa, vdev_t *leaf, uint64_t from, vdev_state_t st)
{
    leaf->fault_from = from;
    atomic_store(&leaf->state, st);
    fault_queue_locked(spa);
}

static void fault_leaf_error(void *arg, vdev_t *leaf, vdev_error_kind_t kind, uint64_t offset,
                             uint64_t size, int error)
{
    spa_t *spa = arg;
    spa_event_post(spa->name,
                   kind == VDEV_ERR_CHECKSUM ? "ereport.fs.cairn.checksum" : "ereport.fs.cairn.io",
                   "vdev=%s op=%s offset=%llu size=%llu errno=%d", leaf->path ? leaf->path : "?",
                   error_kind_name(kind), (unsigned long long)offset, (unsigned long long)size,
                   -error);
    pthread_mutex_lock(&spa->fault_lock);
    uint64_t from = spa_last_synced_txg(spa) + 1;
    bool queue = false;
    if ((kind == VDEV_ERR_WRITE || kind == VDEV_ERR_FLUSH) && !leaf->missed_from) {
        leaf->missed_from = from;
        queue = true;
    }
    int st = atomic_load(&leaf->state);
    if (st == VDEV_STATE_ONLINE || st == VDEV_STATE_DEGRADED) {
        bool over = vdev_errwin_note(&leaf->errwin, cairn_now_ns() / 1000000ULL,
                                     atomic_load(&fault_errors),
                                     (uint64_t)atomic_load(&fault_window_s) * 1000ULL);
        vdev_t *top = vdev_top(leaf);
        /* Bad data alone only degrades, as ZFS's retire agent does: the disk still
         * answers, and what it returns is verified and repaired anyway. */
        bool fault = (over && kind != VDEV_ERR_CHECKSUM) || device_gone(error);
        if (fault && top && top != leaf && spa_vdev_survives_without(top, leaf)) {
            /* A device that is gone is missing, not failing: UNAVAIL, and taken
             * back when it reappears (spa_probe.c). Gone: it said so, or its path
             * no longer names it (pulled out, its driver answering EIO). */
            bool gone = device_gone(error) || !vdev_leaf_holds_path(leaf);
            take_out_locked(spa, leaf, from, gone ? VDEV_STATE_UNAVAIL : VDEV_STATE_FAULTED);
        } else if (over && st == VDEV_STATE_ONLINE) {
            atomic_store(&leaf->state, VDEV_STATE_DEGRADED);
            queue = true;
        }
    }
    if (queue) fault_queue_locked(spa);
    pthread_mutex_unlock(&spa->fault_lock);
}

#define FAULTS_PER_APPLY 8 /* leaves a spare is sought for in one pass (more: the next faults') */

typedef struct apply_ctx {
    spa_t *spa;
    uint64_t open_txg;
    char faulted[FAULTS_PER_APPLY][SPA_PATH_MAX]; /* newly FAULTED: a spare may step in */
    uint32_t nfaulted;
    bool changed;  /* a leaf changed state: the labels say so at once */
    bool resilver; /* a leaf in service missed writes */
} apply_ctx_t;

/* Under config_lock and fault_lock: one leaf's pending fault and missed writes. */
static void apply_leaf(vdev_t *leaf, void *arg)
{
    apply_ctx_t *a = arg;
    int st = atomic_load(&leaf->state);
    if (leaf->fault_from) {
        vdev_dtl_add(leaf, leaf->fault_from, UINT64_MAX);
        leaf->fault_from = 0;
        bool gone = st == VDEV_STATE_UNAVAIL;
        /* FAULTED stays so in the labels; a missing disk found at import is used. */
        leaf->fault_persist = !gone;
        log_warn("spa", "pool %s: %s %s (%llu read, %llu write, %llu checksum errors)",
                 a->spa->name, leaf->path ? leaf->path : "?",
                 gone ? "UNAVAIL: the device is gone" : "FAULTED",
                 (unsigned long long)leaf->stats.read_errors,
                 (unsigned long long)leaf->stats.write_errors,
                 (unsigned long long)leaf->stats.checksum_errors);
        post_statechange(a->spa, leaf, gone ? "device gone" : "too many errors");
        if (leaf->path && a->nfaulted < FAULTS_PER_APPLY)
            cairn_strlcpy(a->faulted[a->nfaulted++], leaf->path, SPA_PATH_MAX);
        a->changed = true;
    } else if (st == VDEV_STATE_DEGRADED && !leaf->fault_announced) {
        log_warn("spa", "pool %s: %s DEGRADED: too many errors (%llu read, %llu write, "
                 "%llu checksum); kept in service", a->spa->name, leaf->path ? leaf->path : "?",
                 (unsigned long long)leaf->stats.read_errors,
                 (unsigned long long)leaf->stats.write_errors,
                 (unsigned long long)leaf->stats.checksum_errors);
        post_statechange(a->spa, leaf, "too many errors");
        leaf->fault_announced = true;
        leaf->fault_persist = true;
        a->changed = true;
    }
    if (leaf->missed_from) {
        bool usable = vdev_leaf_usable(leaf);
        vdev_dtl_add(leaf, leaf->missed_from, usable ? a->open_txg : UINT64_MAX);
        leaf->missed_from = 0;
        if (usable) {
            atomic_store(&leaf->stale, true);
            spa_resilver_asked(a->spa);
            a->resilver = true;
        }
    }
}

static void fault_apply(void *arg)
{
    spa_t *spa = arg;
    pthread_mutex_lock(&spa->tx.lock);
    bool suspended = spa->tx.failed || atomic_load(&spa->mmp_suspended);
    pthread_mutex_unlock(&spa->tx.lock);
    pthread_mutex_lock(&spa->config_lock);
    pthread_mutex_lock(&spa->fault_lock);
    spa->fault_queued = false;
    if (suspended) {
        /* Every device failed at once (power, a controller): not one disk's
         * fault, and nothing can be written about it. The import after decides. */
        pthread_mutex_unlock(&spa->fault_lock);
        pthread_mutex_unlock(&spa->config_lock);
        return;
    }
    apply_ctx_t a = {.spa = spa, .open_txg = spa_open_txg(spa)};
    vdev_foreach_leaf(spa->root, apply_leaf, &a);
    pthread_mutex_unlock(&spa->fault_lock);
    if (a.changed) {
        spa_health_refresh_locked(spa);
        int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        if (e) log_warn("spa", "pool %s: cannot write labels after a fault: %s", spa->name, strerror(-e));
    }
    pthread_mutex_unlock(&spa->config_lock);
    if (a.resilver) spa_resilver_check(spa);
    for (uint32_t i = 0; i < a.nfaulted; i++) spa_spare_activate(spa, a.faulted[i]);
}

bool spa_fault_leaf_gone(spa_t *spa, vdev_t *leaf)
{
    pthread_mutex_lock(&spa->fault_lock);
    int st = atomic_load(&leaf->state);
    vdev_t *top = vdev_top(leaf);
    bool out = (st == VDEV_STATE_ONLINE || st == VDEV_STATE_DEGRADED) && spa->fault_tq && top &&
               top != leaf && spa_vdev_survives_without(top, leaf);
    if (out) take_out_locked(spa, leaf, spa_last_synced_txg(spa) + 1, VDEV_STATE_UNAVAIL);
    pthread_mutex_unlock(&spa->fault_lock);
    return out;
}

void spa_health_refresh_locked(spa_t *spa)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    int before = atomic_load(&spa->root->state);
    vdev_state_refresh(spa->root);
    int after = atomic_load(&spa->root->state);
    if (before != after)
        spa_event_post(spa->name, "resource.fs.cairn.statechange", "state=%s",
                       vdev_state_name((vdev_state_t)after));
}

void spa_fault_init(spa_t *spa) { pthread_mutex_init(&spa->fault_lock, NULL); }

void spa_fault_start(spa_t *spa)
{
    if (spa->readonly || spa->fault_tq) return;
    spa->fault_tq = taskq_create("spa_fault", 1);
    spa->hooks = (vdev_hooks_t){.leaf_error = fault_leaf_error, .arg = spa};
    vdev_set_hooks(spa->root, &spa->hooks);
    spa_probe_start(spa);
}

void spa_fault_stop(spa_t *spa)
{
    spa_probe_stop(spa); /* first: a device it takes back starts a resilver */
    if (spa->root) vdev_set_hooks(spa->root, NULL);
    pthread_mutex_lock(&spa->fault_lock);
    taskq_t *tq = spa->fault_tq;
    spa->fault_tq = NULL; /* hooks still running queue nothing more */
    pthread_mutex_unlock(&spa->fault_lock);
    if (tq) taskq_destroy(tq); /* runs what was queued */
}

void spa_fault_fini(spa_t *spa) { pthread_mutex_destroy(&spa->fault_lock); }

int spa_fault_reopen(spa_t *spa, vdev_t *leaf, char *err, size_t errlen)
{
    int e = -ENXIO;
    void *buf = NULL;
    if (leaf->ops && leaf->ops != &vdev_gone_ops && leaf->psize) {
        buf = cairn_alloc_aligned(4096);
        e = vdev_leaf_io_sync(leaf, VDEV_IO_READ, vdev_label_offset(leaf->psize, 0), buf, 4096);
        free(buf);
    }
    if (e) {
        cairn_seterr(err, errlen, "cannot reopen '%s': the device does not answer (%s); replace it",
                     leaf->path ? leaf->path : "?", strerror(-e));
        return -ENXIO;
    }
    spa_leaf_back_in_service(spa, leaf);
    return 0;
}

void spa_leaf_back_in_service(spa_t *spa, vdev_t *leaf)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    const char *path = leaf->path ? leaf->path : "?";
    pthread_mutex_lock(&spa->fault_lock);
    vdev_errwin_reset(&leaf->errwin);
    leaf->fault_from = 0;
    leaf->fault_persist = false;
    leaf->fault_announced = false;
    if (leaf->ndtl) atomic_store(&leaf->stale, true); /* before it takes reads */
    atomic_store(&leaf->state, VDEV_STATE_ONLINE);
    pthread_mutex_unlock(&spa->fault_lock);
    /* Writes reach it from here on: the txg open now is the last it may have missed. */
    spa_dtl_close(leaf, spa_open_txg(spa));
    if (leaf->ndtl) spa_resilver_asked(spa);
    post_statechange(spa, leaf, NULL);
    log_info("spa", "pool %s: %s reopened", spa->name, path);
}

typedef struct clear_ctx {
    spa_t *spa;
    vdev_t *only;       /* NULL: every leaf */
    int err;
    char *msg;
    size_t msglen;
    bool reopened;
} clear_ctx_t;

static void clear_leaf(vdev_t *leaf, void *arg)
{
    clear_ctx_t *c = arg;
    if (c->only && leaf != c->only) return;
    atomic_store(&leaf->stats.read_errors, 0);
    atomic_store(&leaf->stats.write_errors, 0);
    atomic_store(&leaf->stats.checksum_errors, 0);
    int st = atomic_load(&leaf->state);
    if (st == VDEV_STATE_FAULTED || st == VDEV_STATE_DEGRADED) {
        /* Without a device named, a leaf that does not answer just stays out. */
        int e = spa_fault_reopen(c->spa, leaf, c->only ? c->msg : NULL, c->msglen);
        if (e && c->only) c->err = e;
        c->reopened |= !e;
    } else {
        pthread_mutex_lock(&c->spa->fault_lock);
        vdev_errwin_reset(&leaf->errwin);
        pthread_mutex_unlock(&c->spa->fault_lock);
    }
}

int spa_vdev_clear(spa_t *spa, const char *path, char *err, size_t errlen)
{
    pthread_mutex_lock(&spa->config_lock);
    clear_ctx_t c = {.spa = spa, .msg = err, .msglen = errlen};
    if (path && *path) {
        c.only = spa_leaf_by_path(spa, path);
        if (!c.only) {
            cairn_seterr(err, errlen, "no such device '%s' in pool '%s'", path, spa->name);
            pthread_mutex_unlock(&spa->config_lock);
            return -ENOENT;
        }
    }
    spa_event_post(spa->name, "sysevent.fs.cairn.vdev_clear", "vdev=%s",
                   c.only ? c.only->path : "all");
    vdev_foreach_leaf(spa->root, clear_leaf, &c);
    if (!c.only) atomic_store(&spa->data_errors, 0);
    vdev_state_refresh(spa->root);
    if (c.reopened && !spa->readonly) {
        int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        if (e && !c.err) {
            cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
            c.err = e;
        }
    }
    pthread_mutex_unlock(&spa->config_lock);
    if (c.reopened) spa_resilver_check(spa);
    return c.err;
}
