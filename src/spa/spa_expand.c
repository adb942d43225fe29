/*
 * Growing top-level vdevs whose leaves grew: `autoexpand=on` and
 * `pool online -e POOL DEV` (API in include/cairn/spa.h, "growing").
 *
 * NOTICING. Once a second at most, the sync thread asks every leaf how big
 * its device is now (vdev_leaf_probe_size: a file that was truncated larger,
 * a LUN that was resized) and takes a larger size as the leaf's psize. An idle
 * pool syncs no txg, so the sync thread also asks once per txg_timeout while
 * it waits, and runs a txg when a leaf grew (spa_expand_due): EXPANDSZ shows
 * and autoexpand acts without waiting for writes. From
 * then on the leaf's back labels live at its new end (vdev_label_offset()
 * follows psize, as at import), so the labels are rewritten in that txg: the
 * new end gets the config at once and the uberblocks from this txg on. The old
 * back labels are left where they were, inside what is now the leaf's data
 * area past the vdev's space: nothing reads them (import looks at the end of
 * the device as it is), and they are overwritten when the vdev grows over
 * them. A device that shrank is not followed (its psize stays).
 *
 * GROWING. A top-level vdev's space is what its leaves allow: the smallest
 * leaf of a mirror, the smallest times the width for a raidz
 * (vdev_asize_of()). Growth is taken in whole steps of SPA_EXPAND_STEP per
 * leaf (a "metaslab" of space, so a device that grows by a few sectors does not
 * rewrite the config for nothing); the difference not yet taken is the pool's
 * `expandsize` (EXPANDSZ in `pool list`). With autoexpand=on a top-level vdev
 * grows as soon as its leaves allow; with off, only when asked (`online -e`
 * names one of its leaves). Log vdevs do not grow (their whole space is the
 * intent log's region, sized when they joined).
 *
 * ORDER. In the sync thread, at the start of a txg, under the config lock:
 * the new asize goes into the config of every label first; only once that is
 * written does the allocator get the new space (metaslab_grow). So no block
 * can be allocated in the new space unless every label that the next
 * uberblock goes with says the vdev is that large; a crash before that leaves
 * the vdev as it was, and the space is offered again at the next expansion.
 * The space map log needs nothing: the new space is free, and free is what
 * the log does not record.
 */
#include "spa_impl.h"

#include <cairn/assert.h>
#include <cairn/raidz.h>

#include <stdio.h>
#include <string.h>

#define SPA_EXPAND_STEP (16 * CAIRN_MIB)     /* per leaf */
#define SPA_EXPAND_PROBE_NS (1000000000ULL)  /* how often leaves are asked their size */

typedef struct probe_ctx {
    bool grew;
    const char *pool;
} probe_ctx_t;

static void probe_leaf(vdev_t *leaf, void *arg)
{
    probe_ctx_t *p = arg;
    uint64_t size;
    if (!vdev_leaf_usable(leaf) || !leaf->psize || vdev_leaf_probe_size(leaf, &size)) return;
    if (size <= leaf->psize) return;
    log_info("spa", "pool %s: device %s grew from %llu to %llu bytes", p->pool,
             leaf->path ? leaf->path : "?", (unsigned long long)leaf->psize,
             (unsigned long long)size);
    leaf->psize = size;
    p->grew = true;
}

static void leaf_grew(vdev_t *leaf, void *arg)
{
    uint64_t size;
    if (vdev_leaf_usable(leaf) && leaf->psize && !vdev_leaf_probe_size(leaf, &size) &&
        size > leaf->psize)
        *(bool *)arg = true;
}

bool spa_expand_due(spa_t *spa, uint64_t now)
{
    uint64_t last = atomic_load(&spa->expand_due_ns);
    if (spa->readonly || now - last < spa->txg_timeout_ms * 1000000ULL) return false;
    atomic_store(&spa->expand_due_ns, now);
    bool grew = false;
    vdev_foreach_leaf(spa->root, leaf_grew, &grew);
    return grew;
}

/* Bytes top could grow by now, in whole steps (0: none). */
static uint64_t top_growth(vdev_t *top)
{
    if (top->type == VDEV_TYPE_HOLE || top->alloc_class != VDEV_CLASS_NORMAL) return 0;
    uint64_t can = vdev_asize_of(top), step = SPA_EXPAND_STEP;
    if (top->type == VDEV_TYPE_RAIDZ) step *= top->nchildren;
    return can > top->asize ? (can - top->asize) / step * step : 0; /* raidz: not a power of 2 */
}

uint64_t spa_expandsize(spa_t *spa)
{
    uint64_t total = 0;
    pthread_mutex_lock(&spa->config_lock);
    for (uint32_t i = 0; i < spa->ntop; i++) {
        vdev_t *top = spa_top_vdev(spa, i);
        if (top) total += top_growth(top);
    }
    pthread_mutex_unlock(&spa->config_lock);
    return total;
}

/* Sync thread, config lock held: grows the asked top-level vdevs (bit v of
 * mask) by what their leaves allow, labels first, allocators after. */
static int grow_tops(spa_t *spa, uint32_t mask, uint64_t txg)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    uint64_t old[SPA_MAX_TOP] = {0}, grow[SPA_MAX_TOP] = {0};
    bool any = false;
    for (uint32_t i = 0; i < spa->ntop; i++) {
        vdev_t *top = spa_top_vdev(spa, i);
        if (!top || !(mask >> i & 1) || !spa->ms[i]) continue;
        grow[i] = top_growth(top);
        if (!grow[i]) continue;
        old[i] = top->asize;
        __atomic_store_n(&top->asize, old[i] + grow[i], __ATOMIC_RELEASE);
        any = true;
    }
    if (!any) return 0;
    int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    for (uint32_t i = 0; i < spa->ntop; i++) {
        if (!grow[i]) continue;
        vdev_t *top = spa->root->children[i];
        if (e) { /* the labels may not say so: the allocator must not either */
            __atomic_store_n(&top->asize, old[i], __ATOMIC_RELEASE);
            continue;
        }
        metaslab_grow(spa->ms[i], top->asize);
        log_info("spa", "pool %s: vdev %u (%s) expanded by %llu bytes to %llu in txg %llu",
                 spa->name, i, vdev_type_name(top), (unsigned long long)grow[i],
                 (unsigned long long)top->asize, (unsigned long long)txg);
    }
    if (e) log_error("spa", "pool %s: cannot write the labels of an expansion in txg %llu: %s",
                     spa->name, (unsigned long long)txg, strerror(-e));
    return e;
}

void spa_expand_sync(spa_t *spa, uint64_t txg)
{
    if (spa->readonly) return;
    uint32_t asked = spa->pending_expand;
    spa->pending_expand = 0;
    uint64_t now = cairn_now_ns();
    if (!asked && now - spa->expand_probe_ns < SPA_EXPAND_PROBE_NS) return;
    spa->expand_probe_ns = now;
    probe_ctx_t p = {.pool = spa->name};
    vdev_foreach_leaf(spa->root, probe_leaf, &p);
    uint32_t mask = spa->autoexpand ? ~0u : asked;
    int e = mask ? grow_tops(spa, mask, txg) : 0;
    /* Grown leaves whose vdev did not grow: their new end still gets its labels. */
    if (p.grew && !e && !mask) e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e && asked) spa->expand_err = e;
}

int spa_vdev_expand(spa_t *spa, const char *path, char *err, size_t errlen)
{
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        return -EROFS;
    }
    pthread_mutex_lock(&spa->config_lock);
    vdev_t *leaf = spa_tree_leaf(spa, path);
    vdev_t *top = leaf ? vdev_top(leaf) : NULL;
    int e = 0;
    if (!leaf) {
        cairn_seterr(err, errlen, "cannot expand '%s': no such device in pool '%s'", path, spa->name);
        e = -ENOENT;
    } else if (top->alloc_class != VDEV_CLASS_NORMAL) {
        cairn_seterr(err, errlen, "cannot expand '%s': it is a log device (log devices do not grow)",
                     path);
        e = -ENOTSUP;
    } else {
        spa->pending_expand |= 1u << top->id;
        spa->expand_err = 0;
    }
    pthread_mutex_unlock(&spa->config_lock);
    if (e) return e;
    e = spa_txg_wait_synced(spa, 0);
    pthread_mutex_lock(&spa->config_lock);
    if (!e) e = spa->expand_err;
    pthread_mutex_unlock(&spa->config_lock);
    if (e) cairn_seterr(err, errlen, "cannot expand '%s': %s", path, strerror(-e));
    return e;
}
