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
 * The copy keeps REBUILD_SLOTS chunks in flight, each read from a source and
 * then written to the new sides with queued leaf I/O: reads of later chunks
 * run while earlier ones are written, and the device always has several
 * large requests queued, so neither a single request's latency nor the time
 * this thread takes to be scheduled again (one wake-up per chunk on a busy
 * machine) limits the rate. Chunks are reported (and the position
 * checkpointed) in offset order, each once its writes have completed, so a
 * checkpoint's flush covers every chunk before the position. A chunk whose
 * read failed is read again synchronously from each source in turn.
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
/* Chunks in flight: a few large requests queued keep a disk streaming
 * (OpenZFS keeps up to 64 MiB of rebuild I/O in flight per leaf). */
#define REBUILD_SLOTS 4

static int add_extent(void *arg, uint64_t start, uint64_t size)
{
    range_tree_add(arg, start, size);
    return 0;
}

/* A chunk's way: read from a source, then written to every new side. */
typedef enum slot_state { SLOT_FREE, SLOT_READING, SLOT_READ, SLOT_WRITING, SLOT_WRITTEN } slot_state_t;

struct rebuild_copy;
typedef struct rebuild_slot {
    struct rebuild_copy *rc;
    void *buf;
    uint64_t off;
    uint32_t len;
    slot_state_t state;         /* (rc->lock) */
    unsigned pending;           /* (rc->lock) I/Os of this stage not completed */
    int read_err, write_err;    /* (rc->lock) the stages' first errors */
} rebuild_slot_t;

typedef struct rebuild_copy {
    spa_t *spa;
    vdev_t *top;
    vdev_t *const *dst;
    size_t ndst;
    uint64_t from;
    spa_rebuild_progress_fn progress;
    void *arg;
    uint64_t errors;
    pthread_mutex_t lock;
    pthread_cond_t cv;          /* a slot's stage completed */
    rebuild_slot_t slot[REBUILD_SLOTS]; /* a ring: head is the oldest chunk in flight */
    unsigned head, count;       /* (only this thread changes them) */
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

static void find_sources(rebuild_copy_t *rc, src_find_t *f)
{
    *f = (src_find_t){.dst = rc->dst, .ndst = rc->ndst};
    vdev_foreach_leaf(rc->top, find_source, f);
}

/* A chunk from the first source that answers, synchronously (after a failed read). */
static int read_chunk_again(rebuild_copy_t *rc, uint64_t offset, uint32_t len, void *buf)
{
    src_find_t f;
    find_sources(rc, &f);
    int e = -ENXIO;
    for (size_t i = 0; i < f.n && e; i++)
        e = vdev_leaf_io_sync(f.found[i], VDEV_IO_READ, VDEV_DATA_START + offset, buf, len);
    return e;
}

static int write_chunk_sync(rebuild_copy_t *rc, uint64_t offset, uint32_t len, void *buf)
{
    int e = 0;
    for (size_t i = 0; i < rc->ndst; i++) {
        if (!vdev_leaf_usable(rc->dst[i])) continue;
        int we = vdev_leaf_io_sync(rc->dst[i], VDEV_IO_WRITE, VDEV_DATA_START + offset, buf, len);
        if (we) e = we;
    }
    return e;
}

/* A leaf I/O of the slot completed (in a completion thread, or in this one
 * when the submit failed): the stage ends with its last I/O. */
static void slot_io_done(void *arg, int error)
{
    rebuild_slot_t *s = arg;
    rebuild_copy_t *rc = s->rc;
    pthread_mutex_lock(&rc->lock);
    int *err = s->state == SLOT_READING ? &s->read_err : &s->write_err;
    if (error && !*err) *err = error;
    if (--s->pending == 0) {
        s->state = s->state == SLOT_READING ? SLOT_READ : SLOT_WRITTEN;
        pthread_cond_broadcast(&rc->cv);
    }
    pthread_mutex_unlock(&rc->lock);
}

/* Starts a stage of the slot's I/Os; the extra count held while submitting
 * keeps a fast completion from ending the stage before the last submit. */
static void slot_stage_begin(rebuild_slot_t *s, slot_state_t state)
{
    pthread_mutex_lock(&s->rc->lock);
    s->state = state;
    s->pending = 1;
    pthread_mutex_unlock(&s->rc->lock);
}

static void slot_submit(rebuild_slot_t *s, vdev_t *leaf, vdev_io_op_t op)
{
    pthread_mutex_lock(&s->rc->lock);
    s->pending++;
    pthread_mutex_unlock(&s->rc->lock);
    int e = vdev_leaf_io_submit(leaf, op, VDEV_DATA_START + s->off, s->buf, s->len, slot_io_done, s);
    if (e < 0) slot_io_done(s, e);
}

/* The next chunk into a free slot: its read from the first readable source. */
static void issue_read(rebuild_copy_t *rc, uint64_t off, uint32_t len)
{
    rebuild_slot_t *s = &rc->slot[(rc->head + rc->count++) % REBUILD_SLOTS];
    s->off = off;
    s->len = len;
    s->read_err = s->write_err = 0;
    src_find_t f;
    find_sources(rc, &f);
    slot_stage_begin(s, SLOT_READING);
    if (f.n) slot_submit(s, f.found[0], VDEV_IO_READ);
    slot_io_done(s, f.n ? 0 : -ENXIO);
}

static void issue_writes(rebuild_copy_t *rc, rebuild_slot_t *s)
{
    slot_stage_begin(s, SLOT_WRITING);
    for (size_t i = 0; i < rc->ndst; i++)
        if (vdev_leaf_usable(rc->dst[i])) slot_submit(s, rc->dst[i], VDEV_IO_WRITE);
    slot_io_done(s, 0);
}

/* The oldest chunk is through: reported, its slot freed. A chunk whose read
 * failed is read from each source in turn and written here. <0: stop. */
static int retire(rebuild_copy_t *rc, rebuild_slot_t *s)
{
    pthread_mutex_lock(&rc->lock);
    int re = s->read_err, we = s->write_err;
    pthread_mutex_unlock(&rc->lock);
    if (re) {
        re = read_chunk_again(rc, s->off, s->len, s->buf);
        if (!re) we = write_chunk_sync(rc, s->off, s->len, s->buf);
    }
    if (re || we) {
        rc->errors++;
        log_warn("spa", "pool %s: sequential rebuild cannot %s vdev %u offset %llu: %s",
                 rc->spa->name, re ? "read" : "copy", rc->top->id, (unsigned long long)s->off,
                 strerror(-(re ? re : we)));
    }
    uint64_t end = s->off + s->len, bytes = re || we ? 0 : s->len;
    pthread_mutex_lock(&rc->lock);
    s->state = SLOT_FREE;
    pthread_mutex_unlock(&rc->lock);
    rc->head = (rc->head + 1) % REBUILD_SLOTS;
    rc->count--;
    return rc->progress(rc->spa, rc->top->id, end, bytes, rc->arg);
}

/* Moves the chunks in flight on: the writes of each chunk read, the oldest
 * chunk retired once written (or once its read failed). Returns when a slot is
 * free (all: when none is in flight), or <0 to stop. */
static int advance(rebuild_copy_t *rc, bool all)
{
    for (;;) {
        rebuild_slot_t *read = NULL, *oldest = rc->count ? &rc->slot[rc->head] : NULL;
        bool retire_oldest = false;
        pthread_mutex_lock(&rc->lock);
        for (;;) {
            for (unsigned i = 0; i < rc->count && !read; i++) {
                rebuild_slot_t *s = &rc->slot[(rc->head + i) % REBUILD_SLOTS];
                if (s->state == SLOT_READ && !s->read_err) read = s;
            }
            retire_oldest = oldest && (oldest->state == SLOT_WRITTEN ||
                                       (oldest->state == SLOT_READ && oldest->read_err));
            if (read || retire_oldest || !rc->count || (!all && rc->count < REBUILD_SLOTS)) break;
            pthread_cond_wait(&rc->cv, &rc->lock);
        }
        pthread_mutex_unlock(&rc->lock);
        if (read) {
            issue_writes(rc, read);
        } else if (retire_oldest) {
            int r = retire(rc, oldest);
            if (r < 0) return r;
        } else {
            return 0;
        }
    }
}

/* Stopping: waits out the I/Os in flight (their buffers are about to go). */
static void quiesce(rebuild_copy_t *rc)
{
    pthread_mutex_lock(&rc->lock);
    for (unsigned i = 0; i < REBUILD_SLOTS; i++)
        while (rc->slot[i].state == SLOT_READING || rc->slot[i].state == SLOT_WRITING)
            pthread_cond_wait(&rc->cv, &rc->lock);
    pthread_mutex_unlock(&rc->lock);
}

static int copy_extent(void *arg, uint64_t start, uint64_t size)
{
    rebuild_copy_t *rc = arg;
    uint64_t end = start + size;
    if (end <= rc->from) return 0;
    for (uint64_t off = CAIRN_MAX(start, rc->from); off < end;) {
        uint32_t len = (uint32_t)CAIRN_MIN((uint64_t)REBUILD_CHUNK, end - off);
        int r = advance(rc, false);
        if (r < 0) return r;
        issue_read(rc, off, len);
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
    pthread_mutex_init(&rc.lock, NULL);
    pthread_cond_init(&rc.cv, NULL);
    for (unsigned i = 0; i < REBUILD_SLOTS; i++) {
        rc.slot[i].rc = &rc;
        rc.slot[i].buf = cairn_alloc_aligned(REBUILD_CHUNK);
    }
    if (!e) e = range_tree_walk(copy, copy_extent, &rc);
    if (!e) e = advance(&rc, true); /* the last chunks */
    quiesce(&rc);
    for (unsigned i = 0; i < REBUILD_SLOTS; i++) free(rc.slot[i].buf);
    pthread_cond_destroy(&rc.cv);
    pthread_mutex_destroy(&rc.lock);
    range_tree_destroy(copy);
    *errors = rc.errors;
    return e;
}
