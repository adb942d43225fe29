/*
 * Missing disks taken back by themselves (API in include/cairn/spa.h).
 *
 * A leaf is missing (UNAVAIL) when its device could not be opened at import,
 * or vanished under the running pool: I/O failing with ENXIO/ENODEV, or past
 * the error threshold from a device its path no longer names (a disk
 * unplugged; spa_fault.c). A file leaf removed or moved away still takes I/O
 * through its open descriptor, so each pass of the thread below also asks
 * every file leaf in service whether it is still at its path
 * (vdev_leaf_file_gone) and, when not, takes it out as a vanished device
 * (spa_fault_leaf_gone) - not block devices, whose /dev links udev may remove
 * and re-create for a moment. Such a disk often comes back as
 * it was: plugged in again, its path restored, its file put back. As ZFS's
 * zed does when a device arrives, the pool then takes it back without the
 * administrator: every probe interval (cairnd.conf vdev_probe_interval_ms) a
 * thread of each writable pool opens the path of each missing leaf of a
 * mirror or raidz again and reads what is there.
 *
 * ONLY THE DISK THAT LEFT. Its labels must name this pool and this very leaf
 * (pool and leaf guids) and hold a valid uberblock of the pool, and it must
 * still be big enough. Anything else at that path - a blank disk, another
 * pool's, another leaf of this one, one held by another process - is refused:
 * said once (log and event ereport.fs.cairn.vdev.bad_label) until the path is
 * empty again, and the leaf stays UNAVAIL until it is replaced. A file moved
 * away and back is the file the leaf still holds open: its own lock refuses a
 * second open, and its old handle is used again (vdev_leaf_open_again).
 *
 * WHAT IT MISSED. The leaf's dirty time log names the txgs it missed since it
 * vanished (spa_fault.c). A disk that went missing while the pool was
 * exported, or a copy restored from an older backup, may lack more: the txgs
 * after the newest uberblock it holds join its log too, so the resilver
 * writes everything it may lack - and, for a disk that only blinked, nothing
 * more. Then it is back in service as `clear`/`online` put one
 * (spa_leaf_back_in_service): ONLINE, stale until resilvered; a spare that
 * stood in for it steps back out once it is whole (spa_spare.c).
 *
 * NEVER PROBED: a FAULTED leaf (too many errors) and an OFFLINE one (the
 * administrator's): only a person says they are good again. Nor the OLD side
 * of a replacement, nor a lone disk (nothing to resilver it from).
 *
 * LOCKING. Opening a device and reading its labels can take long (a disk
 * spinning up, a hung path), and the sync thread needs the config lock: the
 * lock is held only to pick the candidates and, after checking that a leaf
 * is still missing, to put its device in. Leaves are never freed while the
 * pool runs, so a candidate's pointer stays valid between the two. The
 * handle a leaf had before (a dead device) stays open in a retired vdev until
 * the pool closes, as every handle a reader may still hold.
 */
#include "spa_impl.h"

#include <cairn/analytics.h>
#include <cairn/assert.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Atomic uint32_t probe_interval_ms = SPA_PROBE_INTERVAL_MS_DEFAULT;

void spa_set_probe_interval(uint32_t ms) { atomic_store(&probe_interval_ms, ms); }

struct spa_probe {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool stop;
};

/* What is at a missing leaf's path now. */
typedef enum { FOUND_NOTHING, FOUND_OTHER, FOUND_IT } found_kind_t;
typedef struct probe_found {
    found_kind_t kind;
    vdev_t *fresh;       /* FOUND_IT: a new handle on it; NULL: the leaf's own handle */
    uint64_t ub_txg;     /* FOUND_IT: the newest uberblock it holds */
    char why[200];       /* FOUND_OTHER: what it is instead */
} probe_found_t;

/* Under config_lock: a missing leaf that may be taken back. */
static bool probe_candidate(vdev_t *leaf)
{
    if (atomic_load(&leaf->state) != VDEV_STATE_UNAVAIL || !leaf->path) return false;
    vdev_t *p = leaf->parent;
    if (p && p->type == VDEV_TYPE_REPLACING && !p->is_spare && leaf != vdev_io_child(p))
        return false; /* OLD of a replacement: it leaves with it */
    vdev_t *top = vdev_top(leaf);
    return top && top != leaf;
}

/* The newest valid uberblock of spa on dev; 0: none. */
static uint64_t newest_uberblock(spa_t *spa, vdev_t *dev)
{
    spa_uberblock_phys_t *list = NULL;
    size_t n = 0;
    spa_uberblock_collect(dev, spa->guid, spa->ub_slot_size, &list, &n);
    uint64_t txg = 0;
    for (size_t i = 0; i < n; i++) txg = CAIRN_MAX(txg, list[i].txg);
    free(list);
    return txg;
}

/* No lock: whether dev (a new handle, or the leaf's own) is the leaf with guid. */
static void identify(spa_t *spa, uint64_t guid, vdev_t *dev, probe_found_t *f)
{
    spa_config_phys_t *cfg = NULL;
    f->kind = FOUND_OTHER;
    if (spa_label_read_config(dev, &cfg)) {
        snprintf(f->why, sizeof f->why, "it has no label of a pool");
    } else if (cfg->pool_guid != spa->guid) {
        snprintf(f->why, sizeof f->why, "it belongs to pool '%s' (guid %llu)", cfg->name,
                 (unsigned long long)cfg->pool_guid);
    } else if (cfg->leaf_guid != guid) {
        snprintf(f->why, sizeof f->why, "it is another device of this pool (guid %llu)",
                 (unsigned long long)cfg->leaf_guid);
    } else if (!(f->ub_txg = newest_uberblock(spa, dev))) {
        snprintf(f->why, sizeof f->why, "it holds no valid uberblock of this pool");
    } else {
        f->kind = FOUND_IT;
    }
    free(cfg);
}

/* No lock: what is at missing leaf's path (guid: the leaf's, read under the
 * lock). The caller frees f->fresh when it does not take it. */
static void probe_look(spa_t *spa, vdev_t *leaf, uint64_t guid, probe_found_t *f)
{
    memset(f, 0, sizeof *f);
    vdev_t *fresh = NULL;
    int e = vdev_leaf_open_again(leaf, &fresh);
    if (e == -EBUSY) {
        f->kind = FOUND_OTHER;
        snprintf(f->why, sizeof f->why, "it is in use by another pool or process");
        return;
    }
    if (e && e != -EALREADY) return; /* nothing there (yet) */
    identify(spa, guid, fresh ? fresh : leaf, f);
    if (f->kind == FOUND_IT) f->fresh = fresh;
    else vdev_free(fresh);
}

/* Under config_lock: says once that the device at leaf's path is not taken
 * (again when another device, refused for another reason, takes its place). */
static void refuse(spa_t *spa, vdev_t *leaf, const char *why)
{
    uint64_t h = an_hash(why, strlen(why));
    if (leaf->probe_refused == h) return;
    leaf->probe_refused = h;
    log_warn("spa", "pool %s: a device is back at %s but is not taken: %s", spa->name, leaf->path,
             why);
    spa_event_post(spa->name, "ereport.fs.cairn.vdev.bad_label", "vdev=%s reason=%s", leaf->path,
                   why);
}

/* Under config_lock, leaf still a candidate: takes what probe_look found.
 * 0: the leaf is back in service (the caller writes the labels and starts the
 * resilver); else an error and why in err. f->fresh is NULL on return (taken
 * into the leaf, or freed). */
static int probe_take(spa_t *spa, vdev_t *leaf, probe_found_t *f, char *err, size_t errlen)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    const char *path = leaf->path;
    if (f->kind == FOUND_IT && f->fresh && !spa_leaf_fits(vdev_top(leaf), f->fresh->psize)) {
        f->kind = FOUND_OTHER;
        snprintf(f->why, sizeof f->why, "it is smaller than the device that left");
        vdev_free(f->fresh);
        f->fresh = NULL;
    }
    if (f->kind == FOUND_NOTHING) {
        leaf->probe_refused = 0; /* the next device to appear is news */
        cairn_seterr(err, errlen, "cannot online '%s': the device is missing; replace it", path);
        return -ENXIO;
    }
    if (f->kind == FOUND_OTHER) {
        refuse(spa, leaf, f->why);
        cairn_seterr(err, errlen, "cannot online '%s': %s; replace it", path, f->why);
        return -EINVAL;
    }
    if (f->fresh) {
        vdev_leaf_swap_device(leaf, f->fresh);
        spa_vdev_retire(spa, f->fresh); /* now the dead handle: readers may hold it */
        f->fresh = NULL;
    }
    /* Whatever it lacks past its newest uberblock, besides what the log names. */
    vdev_dtl_add(leaf, f->ub_txg + 1, UINT64_MAX);
    leaf->probe_refused = 0;
    log_info("spa", "pool %s: %s is back (its newest txg %llu)", spa->name, path,
             (unsigned long long)f->ub_txg);
    spa_leaf_back_in_service(spa, leaf);
    return 0;
}

int spa_probe_leaf_locked(spa_t *spa, vdev_t *leaf, char *err, size_t errlen)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    if (!probe_candidate(leaf)) {
        cairn_seterr(err, errlen, "cannot online '%s': the device is %s; replace it", leaf->path,
                     vdev_state_name((vdev_state_t)atomic_load(&leaf->state)));
        return -ENXIO;
    }
    probe_found_t f;
    probe_look(spa, leaf, leaf->guid, &f);
    return probe_take(spa, leaf, &f, err, errlen);
}

typedef struct candidates {
    vdev_t **leaf;
    uint64_t *guid;
    size_t n;
} candidates_t;

static void note_candidate(vdev_t *leaf, void *arg)
{
    candidates_t *c = arg;
    if (!probe_candidate(leaf)) return;
    c->leaf = cairn_realloc(c->leaf, (c->n + 1) * sizeof *c->leaf);
    c->guid = cairn_realloc(c->guid, (c->n + 1) * sizeof *c->guid);
    c->leaf[c->n] = leaf;
    c->guid[c->n++] = leaf->guid;
}

/* Under config_lock: a file leaf in service that is no longer at its path. */
static void note_file_gone(vdev_t *leaf, void *arg)
{
    candidates_t *c = arg;
    int st = atomic_load(&leaf->state);
    if ((st != VDEV_STATE_ONLINE && st != VDEV_STATE_DEGRADED) || !vdev_leaf_file_gone(leaf)) return;
    c->leaf = cairn_realloc(c->leaf, (c->n + 1) * sizeof *c->leaf);
    c->leaf[c->n++] = leaf;
}

/* File leaves removed or moved away leave service as vanished devices do. */
static void take_out_gone_files(spa_t *spa)
{
    candidates_t c = {0};
    pthread_mutex_lock(&spa->config_lock);
    vdev_foreach_leaf(spa->root, note_file_gone, &c);
    pthread_mutex_unlock(&spa->config_lock);
    for (size_t i = 0; i < c.n; i++)
        if (spa_fault_leaf_gone(spa, c.leaf[i]))
            log_warn("spa", "pool %s: %s is no longer at its path", spa->name, c.leaf[i]->path);
    free(c.leaf);
}

void spa_probe_missing(spa_t *spa)
{
    if (spa->readonly) return;
    take_out_gone_files(spa);
    candidates_t c = {0};
    pthread_mutex_lock(&spa->config_lock);
    vdev_foreach_leaf(spa->root, note_candidate, &c);
    pthread_mutex_unlock(&spa->config_lock);
    bool back = false;
    for (size_t i = 0; i < c.n; i++) {
        probe_found_t f;
        probe_look(spa, c.leaf[i], c.guid[i], &f);
        pthread_mutex_lock(&spa->config_lock);
        /* Meanwhile replaced, detached or brought back by the administrator? */
        if (probe_candidate(c.leaf[i]) && c.leaf[i]->guid == c.guid[i] &&
            spa_leaf_by_path(spa, c.leaf[i]->path) == c.leaf[i]) {
            back |= probe_take(spa, c.leaf[i], &f, NULL, 0) == 0;
        }
        pthread_mutex_unlock(&spa->config_lock);
        vdev_free(f.fresh); /* not taken */
    }
    free(c.leaf);
    free(c.guid);
    if (!back) return;
    pthread_mutex_lock(&spa->config_lock);
    spa_health_refresh_locked(spa);
    int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) log_warn("spa", "pool %s: cannot write labels after a device came back: %s", spa->name,
                    strerror(-e));
    pthread_mutex_unlock(&spa->config_lock);
    spa_resilver_check(spa);
}

static void *probe_thread(void *arg)
{
    spa_t *spa = arg;
    struct spa_probe *p = spa->probe;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)atomic_load(&probe_interval_ms) * 1000000ULL;
        ts.tv_sec += (time_t)(ns / 1000000000ULL);
        ts.tv_nsec = (long)(ns % 1000000000ULL);
        pthread_cond_timedwait(&p->cv, &p->lock, &ts);
        if (p->stop) break;
        pthread_mutex_unlock(&p->lock);
        spa_probe_missing(spa);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void spa_probe_start(spa_t *spa)
{
    if (spa->probe || spa->readonly || !atomic_load(&probe_interval_ms)) return;
    struct spa_probe *p = cairn_zalloc(sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    spa->probe = p;
    pthread_create(&p->thread, NULL, probe_thread, spa);
    pthread_setname_np(p->thread, "spa_probe");
}

void spa_probe_stop(spa_t *spa)
{
    struct spa_probe *p = spa->probe;
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cv);
    free(p);
    spa->probe = NULL;
}
