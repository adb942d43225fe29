/*
 * Sequential rebuild of a mirror (`pool attach -s`, `pool replace -s`): the new
 * side gets the top-level vdev's allocated space copied from a readable side in
 * large sequential I/Os, in offset order, instead of block by block in the
 * order of the block-pointer walk. Nothing is verified while copying (a mirror
 * side holds the same bytes at the same offsets, so no block pointer is
 * needed); the scan thread (spa_scrub.c) runs a scrub right after, which
 * verifies every copy and repairs any that a bad source gave the new side.
 *
 * What is copied: every extent the top-level vdev's metaslab holds as allocated
 * or deferred (freed, still in the defer window), taken when the pass begins.
 * The scan holds frees (hold_frees), so none of it is reused while the copy
 * runs, and the copy waits until the txg open when it took the extents has
 * synced: every write into them has been made by then, to every side
 * including the new one (it takes writes from the moment it joined), so the
 * copy never races a block's first write. Blocks born later are written to the
 * new side by the txgs themselves. The intent log's blocks can be written at
 * any time into their reserved region: the scan thread resilvers them by the
 * block walk (spa_log_visit) after the copy.
 *
 * Only mirrors: a raidz column cannot be copied from another column; it is
 * rebuilt from parity by the healing resilver, and `-s` is refused there.
 */
#include "spa_impl.h"

#include <cairn/raidz.h>
#include <cairn/range_tree.h>

#include <stdlib.h>
#include <string.h>

/* Bytes per copy I/O: large enough to stream, small enough to yield often. */
#define REBUILD_CHUNK (1024 * 1024u)

static int add_extent(void *arg, uint64_t start, uint64_t size)
{
    range_tree_add(arg, start, size);
    return 0;
}

typedef struct rebuild_copy {
    spa_t *spa;
    vdev_t *top;
    vdev_t *const *dst;
    size_t ndst;
    uint64_t from;
    void *buf;
    spa_rebuild_progress_fn progress;
    void *arg;
    uint64_t errors;
} rebuild_copy_t;

typedef struct src_find {
    vdev_t *const *dst;
    size_t ndst;
    vdev_t *found[VDEV_MAX_CHILDREN * 2];
    size_t n;
} src_find_t;

/* Readable sides that are not being rebuilt: where the copy reads from. */
static void find_source(vdev_t *leaf, void *arg)
{
    src_find_t *f = arg;
    for (size_t i = 0; i < f->ndst; i++)
        if (f->dst[i] == leaf) return;
    if (vdev_leaf_readable(leaf) && f->n < CAIRN_ARRAY_SIZE(f->found)) f->found[f->n++] = leaf;
}

/* One chunk: read from the first source that answers, written to every new side. */
static int copy_chunk(rebuild_copy_t *rc, uint64_t offset, uint32_t len)
{
    src_find_t f = {.dst = rc->dst, .ndst = rc->ndst};
    vdev_foreach_leaf(rc->top, find_source, &f);
    int e = -ENXIO;
    for (size_t i = 0; i < f.n && e; i++)
        e = vdev_leaf_io_sync(f.found[i], VDEV_IO_READ, VDEV_DATA_START + offset, rc->buf, len);
    if (e) return e;
    for (size_t i = 0; i < rc->ndst; i++) {
        if (!vdev_leaf_usable(rc->dst[i])) continue;
        int we = vdev_leaf_io_sync(rc->dst[i], VDEV_IO_WRITE, VDEV_DATA_START + offset, rc->buf, len);
        if (we) e = we;
    }
    return e;
}

static int copy_extent(void *arg, uint64_t start, uint64_t size)
{
    rebuild_copy_t *rc = arg;
    uint64_t end = start + size;
    if (end <= rc->from) return 0;
    for (uint64_t off = CAIRN_MAX(start, rc->from); off < end;) {
        uint32_t len = (uint32_t)CAIRN_MIN((uint64_t)REBUILD_CHUNK, end - off);
        int e = copy_chunk(rc, off, len);
        if (e) {
            rc->errors++;
            log_warn("spa", "pool %s: sequential rebuild cannot copy vdev %u offset %llu: %s",
                     rc->spa->name, rc->top->id, (unsigned long long)off, strerror(-e));
        }
        off += len;
        int r = rc->progress(rc->spa, rc->top->id, off, e ? 0 : len, rc->arg);
        if (r < 0) return r;
    }
    return 0;
}

int spa_rebuild_top(spa_t *spa, uint32_t top_id, uint64_t from, vdev_t *const *dst, size_t ndst,
                    spa_rebuild_progress_fn progress, void *arg, uint64_t *errors)
{
    vdev_t *top = spa_top_vdev(spa, top_id);
    *errors = 0;
    if (!top || !spa->ms[top_id]) return 0; /* no metaslab: nothing allocated by it */
    range_tree_t *copy = range_tree_create();
    metaslab_walk(spa->ms[top_id], METASLAB_SPACE_ALLOCATED, add_extent, copy);
    metaslab_walk(spa->ms[top_id], METASLAB_SPACE_DEFERRED, add_extent, copy);
    /* Every write into those extents has been made once the txg open now syncs. */
    int e = spa_txg_wait_synced(spa, 0);
    rebuild_copy_t rc = {.spa = spa, .top = top, .dst = dst, .ndst = ndst, .from = from,
                         .progress = progress, .arg = arg};
    rc.buf = cairn_alloc_aligned(REBUILD_CHUNK);
    if (!e) e = range_tree_walk(copy, copy_extent, &rc);
    free(rc.buf);
    range_tree_destroy(copy);
    *errors = rc.errors;
    return e;
}
