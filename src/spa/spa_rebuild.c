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
 * The copy reads chunk k while a writer thread writes chunk k - 1 (two
 * buffers): about the longer of the reads and the writes, not their sum. The
 * position reported (and checkpointed) is the end of the last chunk written.
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
#define REBUILD_CHUNK (4 * 1024 * 1024u)

static int add_extent(void *arg, uint64_t start, uint64_t size)
{
    range_tree_add(arg, start, size);
    return 0;
}

/* The copy is a two-stage pipeline: this thread reads chunk k while a writer
 * thread writes chunk k - 1 to the new sides, so a copy takes about the longer
 * of its reads and its writes rather than their sum. Two buffers alternate. */
typedef struct rebuild_copy {
    spa_t *spa;
    vdev_t *top;
    vdev_t *const *dst;
    size_t ndst;
    uint64_t from;
    spa_rebuild_progress_fn progress;
    void *arg;
    uint64_t errors;
    void *buf[2];
    unsigned next;              /* the buffer the next read fills */
    /* The writer: one chunk handed over at a time. */
    pthread_mutex_t lock;
    pthread_cond_t cv;
    pthread_t writer;
    bool have, busy, quit;      /* a chunk waits / is being written / no more chunks */
    unsigned wbuf;
    uint64_t woff;
    uint32_t wlen;
    int werr;                   /* the result of the last chunk written */
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

/* A chunk from the first source that answers. */
static int read_chunk(rebuild_copy_t *rc, uint64_t offset, uint32_t len, void *buf)
{
    src_find_t f = {.dst = rc->dst, .ndst = rc->ndst};
    vdev_foreach_leaf(rc->top, find_source, &f);
    int e = -ENXIO;
    for (size_t i = 0; i < f.n && e; i++)
        e = vdev_leaf_io_sync(f.found[i], VDEV_IO_READ, VDEV_DATA_START + offset, buf, len);
    return e;
}

static int write_chunk(rebuild_copy_t *rc, uint64_t offset, uint32_t len, void *buf)
{
    int e = 0;
    for (size_t i = 0; i < rc->ndst; i++) {
        if (!vdev_leaf_usable(rc->dst[i])) continue;
        int we = vdev_leaf_io_sync(rc->dst[i], VDEV_IO_WRITE, VDEV_DATA_START + offset, buf, len);
        if (we) e = we;
    }
    return e;
}

static void *writer_thread(void *arg)
{
    rebuild_copy_t *rc = arg;
    pthread_mutex_lock(&rc->lock);
    for (;;) {
        while (!rc->have && !rc->quit) pthread_cond_wait(&rc->cv, &rc->lock);
        if (!rc->have) break;
        rc->have = false;
        rc->busy = true;
        pthread_mutex_unlock(&rc->lock);
        int e = write_chunk(rc, rc->woff, rc->wlen, rc->buf[rc->wbuf]);
        pthread_mutex_lock(&rc->lock);
        rc->werr = e;
        rc->busy = false;
        pthread_cond_broadcast(&rc->cv);
    }
    pthread_mutex_unlock(&rc->lock);
    return NULL;
}

/* Waits for the chunk in the writer's hands; reports it. <0: stop the copy. */
static int chunk_written(rebuild_copy_t *rc)
{
    pthread_mutex_lock(&rc->lock);
    while (rc->have || rc->busy) pthread_cond_wait(&rc->cv, &rc->lock);
    uint64_t off = rc->woff;
    uint32_t len = rc->wlen;
    int e = rc->werr;
    rc->wlen = 0;
    pthread_mutex_unlock(&rc->lock);
    if (!len) return 0; /* nothing was handed over */
    if (e) {
        rc->errors++;
        log_warn("spa", "pool %s: sequential rebuild cannot copy vdev %u offset %llu: %s",
                 rc->spa->name, rc->top->id, (unsigned long long)off, strerror(-e));
    }
    return rc->progress(rc->spa, rc->top->id, off + len, e ? 0 : len, rc->arg);
}

static int copy_extent(void *arg, uint64_t start, uint64_t size)
{
    rebuild_copy_t *rc = arg;
    uint64_t end = start + size;
    if (end <= rc->from) return 0;
    for (uint64_t off = CAIRN_MAX(start, rc->from); off < end;) {
        uint32_t len = (uint32_t)CAIRN_MIN((uint64_t)REBUILD_CHUNK, end - off);
        unsigned b = rc->next;
        int e = read_chunk(rc, off, len, rc->buf[b]);
        int r = chunk_written(rc); /* the previous chunk, written meanwhile */
        if (r < 0) return r;
        if (e) {
            rc->errors++;
            log_warn("spa", "pool %s: sequential rebuild cannot read vdev %u offset %llu: %s",
                     rc->spa->name, rc->top->id, (unsigned long long)off, strerror(-e));
            r = rc->progress(rc->spa, rc->top->id, off + len, 0, rc->arg);
            if (r < 0) return r;
        } else {
            pthread_mutex_lock(&rc->lock);
            rc->wbuf = b;
            rc->woff = off;
            rc->wlen = len;
            rc->have = true;
            pthread_cond_broadcast(&rc->cv);
            pthread_mutex_unlock(&rc->lock);
            rc->next ^= 1;
        }
        off += len;
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
    rc.buf[0] = cairn_alloc_aligned(REBUILD_CHUNK);
    rc.buf[1] = cairn_alloc_aligned(REBUILD_CHUNK);
    pthread_mutex_init(&rc.lock, NULL);
    pthread_cond_init(&rc.cv, NULL);
    pthread_create(&rc.writer, NULL, writer_thread, &rc);
    pthread_setname_np(rc.writer, "spa_rebuild_wr");
    if (!e) e = range_tree_walk(copy, copy_extent, &rc);
    int r = chunk_written(&rc); /* the last one */
    if (!e) e = r;
    pthread_mutex_lock(&rc.lock);
    rc.quit = true;
    pthread_cond_broadcast(&rc.cv);
    pthread_mutex_unlock(&rc.lock);
    pthread_join(rc.writer, NULL);
    pthread_cond_destroy(&rc.cv);
    pthread_mutex_destroy(&rc.lock);
    free(rc.buf[0]);
    free(rc.buf[1]);
    range_tree_destroy(copy);
    *errors = rc.errors;
    return e;
}
