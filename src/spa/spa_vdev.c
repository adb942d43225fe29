/*
 * Live changes to a pool's vdev tree: adding data and log vdevs, removing a log vdev
 * (API in include/cairn/spa.h, "changing the vdev tree").
 *
 * WHERE A CHANGE HAPPENS. Everything that walks the tree by top-level id -
 * the allocators, the space map log, the intent-log region, the uberblock and
 * config writes - runs in the sync thread or reads a slot it cannot lose. So
 * a change is prepared by the caller (devices opened and checked, nothing
 * written), handed over, and applied by the sync thread at the start of the
 * next txg's sync, before anything of that txg is allocated: the tree, the
 * allocators and the labels change together, and the uberblock that ends that
 * txg is the first to describe the new shape. root->children and the per-vdev
 * arrays are sized for SPA_MAX_TOP from the start, so a new slot is filled
 * before the count that makes it visible grows, and no array moves under a
 * reader; a vdev or allocator that leaves the tree is retired (freed with the
 * pool), never freed under a reader that may still hold it.
 *
 * IDS NEVER SHIFT. A top-level vdev's id is its index in the tree and the
 * vdev number in every DVA that names it (log blocks, chain headers, data
 * blocks), so removing a vdev must not renumber the ones after it. A removed
 * vdev that is not the last leaves a HOLE in its place (VDEV_TYPE_HOLE: no
 * children, no space, no allocator), written into the config like any vdev,
 * so the tree keeps its shape across export and import. Holes at the end of
 * the tree are trimmed (nothing after them to keep in place). Every walk over
 * the top-level vdevs skips holes (spa_top_vdev() gives NULL for one, the
 * allocator slot is NULL), and a DVA naming a hole reads as a bad pointer.
 *
 * ADDING a vdev writes the new config (new leaves included) before the txg's
 * uberblock, the new leaves' labels first (all four, flushed) and then the old
 * leaves', so every config that names the vdev finds its leaves labelled. A
 * data vdev gets its allocator (all free) and its deflation ratio before it
 * becomes visible, and takes blocks from that txg's sync on; the rotor
 * (spa_zio.c) gives each vdev a run proportional to its share of the free
 * space, so an empty vdev takes most new writes until the vdevs even out. Its
 * allocations go to the pool-wide space map log like any vdev's, so it needs no
 * space map object of its own. New data vdevs must match the redundancy of the
 * pool's (kind, raidz parity, width: spa_replication.c) unless forced. A log
 * vdev is claimed by the intent-log region in the same txg (spa_log.c), and it
 * takes new log blocks once that txg is durable. A new
 * vdev fills the lowest hole, else a new slot at the end, as ZFS does, so
 * adding and removing log devices never runs out of ids - except ids that
 * stale_ids names (spa_impl.h): the durable space map log or log directory
 * may still describe the removed vdev there, and a crash before the adding
 * txg's uberblock would hand that to the new one. A crash before the labels
 * are written leaves the pool as it was; after, the vdev is part of the pool
 * and holds nothing yet. Either way the pool imports.
 *
 * REMOVING a log vdev never loses an acknowledged synchronous write, because
 * no durable chain header may lead to it when it goes:
 *   1. spa_vdev_remove_log_begin() marks it: no new log block is allocated
 *      there (alloc skips it) from now on.
 *   2. The caller has every open intent log start a new chain
 *      (zil_restart_chains()): new chains come from other log vdevs or from
 *      the normal vdevs, and the old chains' records all belong to txgs up to
 *      the one that sets the new headers, so once it is durable they are
 *      obsolete.
 *   3. spa_vdev_remove_log_commit() waits for that txg, then walks every
 *      chain in the log directory; if one still reaches the vdev (the log of a
 *      dataset nobody opened, with records to replay) it refuses. Otherwise the
 *      next sync drops the vdev's region from the directory, puts a hole in its
 *      place (or shortens the tree when it was last), rewrites the labels of
 *      the remaining leaves, clears the removed leaves' labels (after, so there
 *      is always a config naming the pool's real shape) and condenses the space
 *      map log (dropping the vdev's records before its id can be reused).
 * A crash before the new labels are durable leaves the vdev in the pool with
 * no chain on it; after, the old uberblock's directory region and space map
 * records for the hole or missing id are ignored at import (spa_log.c,
 * spa_spacemap.c). Only a log vdev can go: data vdevs hold blocks that would
 * have to move first.
 */
#include "spa_impl.h"

#include <cairn/assert.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void spa_vdev_reserve(spa_t *spa)
{
    uint32_t cap = CAIRN_MAX(spa->root->nchildren, (uint32_t)SPA_MAX_TOP);
    spa->root->children = cairn_realloc(spa->root->children, cap * sizeof(vdev_t *));
    for (uint32_t i = spa->root->nchildren; i < cap; i++) spa->root->children[i] = NULL;
}

void spa_vdev_fini(spa_t *spa)
{
    for (size_t i = 0; i < spa->nretired; i++) vdev_free(spa->retired[i]);
    free(spa->retired);
    spa->retired = NULL;
    spa->nretired = 0;
    for (size_t i = 0; i < spa->nretired_mem; i++) free(spa->retired_mem[i]);
    free(spa->retired_mem);
    spa->retired_mem = NULL;
    spa->nretired_mem = 0;
    for (size_t i = 0; i < spa->nretired_ms; i++) metaslab_destroy(spa->retired_ms[i]);
    free(spa->retired_ms);
    spa->retired_ms = NULL;
    spa->nretired_ms = 0;
    for (vdev_t **t = spa->pending_add; t && *t; t++) vdev_free(*t);
    free(spa->pending_add);
    spa->pending_add = NULL;
}

void spa_vdev_retire(spa_t *spa, vdev_t *vd)
{
    spa->retired = cairn_realloc(spa->retired, (spa->nretired + 1) * sizeof *spa->retired);
    spa->retired[spa->nretired++] = vd;
}

static void retire_ms(spa_t *spa, metaslab_t *ms)
{
    if (!ms) return;
    spa->retired_ms = cairn_realloc(spa->retired_ms, (spa->nretired_ms + 1) * sizeof *spa->retired_ms);
    spa->retired_ms[spa->nretired_ms++] = ms;
}

static vdev_t *hole_alloc(spa_t *spa, uint32_t id)
{
    vdev_t *h = vdev_alloc(VDEV_TYPE_HOLE, 0);
    h->id = id;
    h->parent = spa->root;
    h->ashift = spa->ashift;
    return h;
}

/* Ids the next add may fill: holes and free slots at the end, not stale ones. */
static uint32_t free_ids(const spa_t *spa)
{
    uint32_t n = 0;
    for (uint32_t id = 0; id < SPA_MAX_TOP; id++)
        if ((id >= spa->ntop || spa->root->children[id]->type == VDEV_TYPE_HOLE) &&
            !(spa->stale_ids >> id & 1))
            n++;
    return n;
}

/* Hands the prepared change to the sync thread and waits for it to be applied
 * and durable. */
static int config_change_wait(spa_t *spa)
{
    pthread_mutex_lock(&spa->config_lock);
    uint64_t seq = ++spa->config_change_seq;
    pthread_mutex_unlock(&spa->config_lock);
    int err = spa_txg_wait_synced(spa, 0);
    pthread_mutex_lock(&spa->config_lock);
    if (spa->config_done_seq >= seq) {
        err = spa->config_change_err;
    } else {
        /* The pool stopped syncing (it failed or is closing): take the change back. */
        if (!err) err = -EIO;
        for (vdev_t **t = spa->pending_add; t && *t; t++) vdev_free(*t);
        free(spa->pending_add);
        spa->pending_add = NULL;
        spa->pending_remove = -1;
        atomic_store(&spa->removing, -1);
        spa->config_done_seq = spa->config_change_seq;
    }
    pthread_mutex_unlock(&spa->config_lock);
    return err;
}

static void close_leaf(vdev_t *leaf, void *arg)
{
    (void)arg;
    if (leaf->ops && leaf->ops->close) leaf->ops->close(leaf);
    leaf->ops = NULL;
    atomic_store(&leaf->state, VDEV_STATE_UNAVAIL);
}

static void clear_leaf_label(vdev_t *leaf, void *arg)
{
    const char *pool = arg;
    int e = spa_label_clear(leaf);
    if (e) log_warn("spa", "pool %s: cannot clear the labels of removed device %s: %s", pool,
                    leaf->path ? leaf->path : "?", strerror(-e));
}

/* ---------------- adding ---------------- */

/* The redundancy of a top-level vdev, spec or live. */
static spa_replication_t spec_replication(const spa_vdev_spec_t *s)
{
    return (spa_replication_t){.type = s->type, .nparity = s->nparity,
                               .width = s->type == VDEV_TYPE_LEAF ? 1 : s->nchildren};
}

static spa_replication_t top_replication(const vdev_t *top)
{
    return (spa_replication_t){.type = top->type, .nparity = top->nparity,
                               .width = vdev_is_leaf(top) ? 1 : top->nchildren};
}

/* New data vdevs must match the pool's (spa_replication.c), unless forced. */
static int check_data_replication(spa_t *spa, const spa_vdev_spec_t *root, char *err,
                                  size_t errlen)
{
    spa_replication_t have[SPA_MAX_TOP], add[SPA_MAX_TOP];
    size_t nhave = 0, nadd = 0;
    pthread_mutex_lock(&spa->config_lock);
    for (uint32_t i = 0; i < spa->ntop; i++) {
        vdev_t *top = spa_top_vdev(spa, i);
        if (top && top->alloc_class == VDEV_CLASS_NORMAL) have[nhave++] = top_replication(top);
    }
    pthread_mutex_unlock(&spa->config_lock);
    for (uint32_t i = 0; i < root->nchildren && nadd < SPA_MAX_TOP; i++)
        if (root->children[i].vclass == VDEV_CLASS_NORMAL)
            add[nadd++] = spec_replication(&root->children[i]);
    return spa_replication_check(have, nhave, add, nadd, err, errlen);
}

/* What the words ask for, before any device is opened: classes and shapes, no
 * device twice or already in this pool, room for the new ids, the redundancy. */
static int check_add_spec(spa_t *spa, const spa_vdev_spec_t *root, bool force, char *err,
                          size_t errlen)
{
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        return -EROFS;
    }
    if (!root || root->type != VDEV_TYPE_ROOT || !root->nchildren) {
        cairn_seterr(err, errlen, "no vdevs given");
        return -EINVAL;
    }
    int e = spa_validate_spec(root, err, errlen);
    if (e) return e;
    for (uint32_t i = 0; i < root->nchildren; i++) {
        const spa_vdev_spec_t *c = &root->children[i];
        if (c->vclass == VDEV_CLASS_LOG && c->type != VDEV_TYPE_LEAF && c->type != VDEV_TYPE_MIRROR) {
            cairn_seterr(err, errlen, "a log vdev is a device or a mirror");
            return -EINVAL;
        }
        /* A device of this pool would otherwise fail to open as "in use". */
        uint32_t nleaves = c->type == VDEV_TYPE_LEAF ? 1 : c->nchildren;
        for (uint32_t k = 0; k < nleaves; k++) {
            const spa_vdev_spec_t *leaf = c->type == VDEV_TYPE_LEAF ? c : &c->children[k];
            if (spa_tree_leaf(spa, leaf->path)) {
                cairn_seterr(err, errlen, "device '%s' is already in pool '%s'", leaf->path, spa->name);
                return -EEXIST;
            }
        }
    }
    pthread_mutex_lock(&spa->config_lock);
    uint32_t room = free_ids(spa);
    pthread_mutex_unlock(&spa->config_lock);
    if (root->nchildren > room) {
        cairn_seterr(err, errlen, "a pool can have at most %d top-level vdevs", SPA_MAX_TOP);
        return -EINVAL;
    }
    return force ? 0 : check_data_replication(spa, root, err, errlen);
}

static void free_tops(vdev_t **tops, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (tops[i]) vdev_free(tops[i]);
    free(tops);
}

/* Opens and checks every device (size, labels) and builds the new top-level
 * vdevs, writing nothing. NULL-terminated array, or NULL and err. */
static vdev_t **prepare_add(spa_t *spa, const spa_vdev_spec_t *root, bool force, int *errp,
                            char *err, size_t errlen)
{
    int e = check_add_spec(spa, root, force, err, errlen);
    if (e) {
        *errp = e;
        return NULL;
    }
    vdev_t **tops = cairn_zalloc(sizeof(vdev_t *) * (root->nchildren + 1));
    for (uint32_t n = 0; n < root->nchildren && !e; n++) {
        tops[n] = spa_build_tree(&root->children[n], spa->ashift, &e, err, errlen);
        if (!tops[n]) {
            if (!e) e = -EIO;
            break;
        }
        uint32_t ashift = spa->ashift;
        vdev_foreach_leaf(tops[n], spa_leaf_set_ashift, &ashift);
        leaf_scan_ctx_t lc = {.force = force, .err = err, .errlen = errlen};
        vdev_foreach_leaf(tops[n], spa_check_new_leaf, &lc);
        e = lc.error;
        if (!e) {
            vdev_compute_asize(tops[n]);
            vdev_state_refresh(tops[n]);
        }
    }
    if (e) {
        free_tops(tops, root->nchildren);
        *errp = e;
        return NULL;
    }
    return tops;
}

int spa_vdev_add_dry_run(spa_t *spa, const spa_vdev_spec_t *root, bool force, char *err,
                         size_t errlen)
{
    int e = 0;
    vdev_t **tops = prepare_add(spa, root, force, &e, err, errlen);
    if (tops) free_tops(tops, root->nchildren);
    return e;
}

int spa_vdev_add(spa_t *spa, const spa_vdev_spec_t *root, bool force, char *err, size_t errlen)
{
    int e = 0;
    vdev_t **tops = prepare_add(spa, root, force, &e, err, errlen);
    if (!tops) return e;
    pthread_mutex_lock(&spa->config_lock);
    if (spa->pending_add || spa->pending_remove >= 0) {
        pthread_mutex_unlock(&spa->config_lock);
        free_tops(tops, root->nchildren);
        cairn_seterr(err, errlen, "another change to pool '%s' is in progress", spa->name);
        return -EBUSY;
    }
    spa->pending_add = tops;
    pthread_mutex_unlock(&spa->config_lock);
    e = config_change_wait(spa);
    if (e) {
        cairn_seterr(err, errlen, "cannot add to pool '%s': %s", spa->name, strerror(-e));
        return e;
    }
    return 0;
}

/* Sync thread, under config_lock: the new tops join the tree, each in the
 * lowest hole or at the end (see the top of this file). On a label write
 * failure they leave again (nothing of theirs is referenced yet). */
static int apply_add(spa_t *spa, uint64_t txg)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    vdev_t **tops = spa->pending_add;
    spa->pending_add = NULL;
    uint32_t n = 0;
    while (tops[n]) n++;
    uint32_t old_ntop = spa->ntop, new_ntop = old_ntop, ids[SPA_MAX_TOP];
    for (uint32_t i = 0, id = 0; i < n; i++, id++) {
        while (id < SPA_MAX_TOP &&
               ((id < old_ntop && spa->root->children[id]->type != VDEV_TYPE_HOLE) ||
                (spa->stale_ids >> id & 1)))
            id++;
        if (id == SPA_MAX_TOP) { /* spa_vdev_add counted the room; a crash's stale ids took it */
            for (uint32_t k = 0; k < n; k++) vdev_free(tops[k]);
            free(tops);
            return -ENOSPC;
        }
        ids[i] = id;
        new_ntop = CAIRN_MAX(new_ntop, id + 1);
    }
    vdev_t *was[SPA_MAX_TOP] = {NULL}; /* the holes the new tops fill */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        vdev_t *top = tops[i];
        top->id = id;
        top->parent = spa->root;
        int e = metaslab_create(id, top->asize, top->ashift, SPA_DEFER_TXGS, &spa->ms[id]);
        if (e) log_error("spa", "pool %s: cannot set up allocator for vdev %u: %s", spa->name, id,
                         strerror(-e));
        /* Its deflation before its first block: a block's dsize must never change. */
        spa_deflate_init_top(spa, id, top);
        if (id < old_ntop) was[id] = spa->root->children[id];
        /* Allocator first, then the vdev: a reader that sees the vdev sees its allocator. */
        __atomic_store_n(&spa->root->children[id], top, __ATOMIC_RELEASE);
    }
    /* Slots skipped at the end (stale ids) become holes. */
    for (uint32_t id = old_ntop; id < new_ntop; id++) {
        bool used = false;
        for (uint32_t i = 0; i < n; i++) used |= ids[i] == id;
        if (!used) spa->root->children[id] = hole_alloc(spa, id);
    }
    /* Filled first, counted after: readers that see the count see the slots. */
    __atomic_store_n(&spa->root->nchildren, new_ntop, __ATOMIC_RELEASE);
    __atomic_store_n(&spa->ntop, new_ntop, __ATOMIC_RELEASE);
    vdev_state_refresh(spa->root);
    spa_space_estimate_init(spa); /* the worst raidz ratio may be the new vdev's */
    /* The new leaves are labelled before any old leaf names them: a crash in
     * between finds either the old config or a new one whose every leaf is there. */
    int e = spa_config_write_new_first_locked(spa, SPA_STATE_ACTIVE, tops);
    if (e) {
        __atomic_store_n(&spa->ntop, old_ntop, __ATOMIC_RELEASE);
        __atomic_store_n(&spa->root->nchildren, old_ntop, __ATOMIC_RELEASE);
        for (uint32_t id = old_ntop; id < new_ntop; id++)
            if (spa->root->children[id]->type == VDEV_TYPE_HOLE) spa_vdev_retire(spa, spa->root->children[id]);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t id = ids[i];
            if (was[id]) __atomic_store_n(&spa->root->children[id], was[id], __ATOMIC_RELEASE);
            metaslab_destroy(spa->ms[id]);
            spa->ms[id] = NULL;
            /* A label it got names a pool it never joined. */
            vdev_foreach_leaf(tops[i], clear_leaf_label, spa->name);
            vdev_free(tops[i]);
        }
        vdev_state_refresh(spa->root);
        spa_space_estimate_init(spa);
        log_error("spa", "pool %s: adding vdevs failed in txg %llu: labels: %s", spa->name,
                  (unsigned long long)txg, strerror(-e));
    } else {
        for (uint32_t i = 0; i < n; i++) {
            if (was[ids[i]]) spa_vdev_retire(spa, was[ids[i]]);
            log_info("spa", "pool %s: %s vdev %u added%s: %s, txg %llu", spa->name,
                     tops[i]->alloc_class == VDEV_CLASS_LOG ? "log" : "data", ids[i],
                     was[ids[i]] ? " (in the hole of a removed one)" : "",
                     vdev_type_name(tops[i]), (unsigned long long)txg);
        }
    }
    free(tops);
    return e;
}

/* ---------------- removing ---------------- */

int spa_vdev_remove_log_begin(spa_t *spa, const char *name, char *err, size_t errlen)
{
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        return -EROFS;
    }
    /* Find it: a top-level vdev by its status name, or a leaf by path. */
    vdev_t *found = NULL;
    for (uint32_t i = 0; i < spa->ntop && !found; i++) {
        vdev_t *top = spa->root->children[i];
        if (top->type == VDEV_TYPE_HOLE) continue; /* nothing there to remove */
        char tname[64];
        snprintf(tname, sizeof tname, "%s-%u", vdev_type_name(top), top->id);
        if (!vdev_is_leaf(top) && !strcmp(tname, name)) found = top;
    }
    if (!found) found = spa_tree_leaf(spa, name);
    if (!found) {
        cairn_seterr(err, errlen, "cannot remove '%s': no such device in pool '%s'", name, spa->name);
        return -ENOENT;
    }
    vdev_t *top = vdev_top(found);
    if (top->alloc_class != VDEV_CLASS_LOG) {
        cairn_seterr(err, errlen, "cannot remove '%s': removing a data vdev is not supported "
               "(only log and cache devices can be removed)", name);
        return -ENOTSUP;
    }
    if (found != top) {
        cairn_seterr(err, errlen, "cannot remove '%s': it is one side of log vdev '%s-%u'; remove "
               "the mirror as a whole", name, vdev_type_name(top), top->id);
        return -ENOTSUP;
    }
    pthread_mutex_lock(&spa->scrub_lock);
    bool scrubbing = spa->scrub.state == SPA_SCRUB_SCANNING;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (scrubbing) {
        cairn_seterr(err, errlen, "cannot remove '%s': a scrub of pool '%s' is running", name,
               spa->name);
        return -EBUSY;
    }
    int32_t none = -1;
    if (!atomic_compare_exchange_strong(&spa->removing, &none, (int32_t)top->id)) {
        cairn_seterr(err, errlen, "cannot remove '%s': another removal is in progress", name);
        return -EBUSY;
    }
    log_info("spa", "pool %s: removing log vdev %u (%s): no new log blocks there", spa->name,
             top->id, name);
    return (int)top->id;
}

void spa_vdev_remove_log_abort(spa_t *spa) { atomic_store(&spa->removing, -1); }

int spa_vdev_remove_log_commit(spa_t *spa, uint32_t id, const char *name, char *err,
                               size_t errlen)
{
    /* The headers that moved the chains off it are set in the open txg. */
    int e = spa_txg_wait_synced(spa, 0);
    uint64_t os_id = 0;
    if (!e && spa_log_vdev_in_use(spa, id, &os_id)) {
        cairn_seterr(err, errlen, "cannot remove '%s': the intent log of object set %llu still has "
               "records on it (open or mount that dataset so they replay, then retry)", name,
               (unsigned long long)os_id);
        spa_vdev_remove_log_abort(spa);
        return -EBUSY;
    }
    if (e) {
        cairn_seterr(err, errlen, "cannot remove '%s': %s", name, strerror(-e));
        spa_vdev_remove_log_abort(spa);
        return e;
    }
    pthread_mutex_lock(&spa->config_lock);
    spa->pending_remove = (int32_t)id;
    pthread_mutex_unlock(&spa->config_lock);
    e = config_change_wait(spa);
    if (e) {
        cairn_seterr(err, errlen, "cannot remove '%s': %s", name, strerror(-e));
        return e;
    }
    log_info("spa", "pool %s: log vdev %u (%s) removed", spa->name, id, name);
    return 0;
}

/* Sync thread, under config_lock: the vdev leaves the tree, a hole keeping its
 * id unless nothing follows it. */
static int apply_remove(spa_t *spa, uint64_t txg)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    uint32_t id = (uint32_t)spa->pending_remove;
    spa->pending_remove = -1;
    if (!spa_top_vdev(spa, id) || !spa_top_is_log(spa, id)) return -EINVAL; /* checked at begin */
    vdev_t *top = spa->root->children[id];
    spa_log_drop_vdev(spa, id);
    metaslab_t *ms = spa->ms[id];
    spa->ms[id] = NULL;
    __atomic_store_n(&spa->root->children[id], hole_alloc(spa, id), __ATOMIC_RELEASE);
    /* Holes at the end keep nothing in place: the tree ends at its last vdev. */
    uint32_t old_ntop = spa->ntop, new_ntop = old_ntop;
    while (new_ntop > 1 && spa->root->children[new_ntop - 1]->type == VDEV_TYPE_HOLE) new_ntop--;
    __atomic_store_n(&spa->ntop, new_ntop, __ATOMIC_RELEASE);
    __atomic_store_n(&spa->root->nchildren, new_ntop, __ATOMIC_RELEASE);
    for (uint32_t i = new_ntop; i < old_ntop; i++) spa_vdev_retire(spa, spa->root->children[i]);
    spa->sm_condense = true;
    vdev_state_refresh(spa->root);
    int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) log_error("spa", "pool %s: labels after removing log vdev %u in txg %llu: %s",
                     spa->name, id, (unsigned long long)txg, strerror(-e));
    /* The remaining labels no longer name it: now it may forget the pool. */
    vdev_foreach_leaf(top, clear_leaf_label, spa->name);
    vdev_foreach_leaf(top, close_leaf, NULL);
    /* Kept (closed) until the pool is freed: a reader may still hold the pointers. */
    retire_ms(spa, ms);
    spa_vdev_retire(spa, top);
    atomic_store(&spa->removing, -1);
    if (id + 1 < old_ntop)
        log_info("spa", "pool %s: log vdev %u leaves a hole: the %u vdev(s) after it keep their ids",
                 spa->name, id, old_ntop - id - 1);
    return e;
}

void spa_vdev_sync_changes(spa_t *spa, uint64_t txg)
{
    pthread_mutex_lock(&spa->config_lock);
    if (spa->config_done_seq != spa->config_change_seq) {
        int e = 0;
        if (spa->pending_add) e = apply_add(spa, txg);
        else if (spa->pending_remove >= 0) e = apply_remove(spa, txg);
        spa->config_change_err = e;
        spa->config_done_seq = spa->config_change_seq;
    }
    spa_expand_sync(spa, txg);
    pthread_mutex_unlock(&spa->config_lock);
}
