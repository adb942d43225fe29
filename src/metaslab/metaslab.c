/*
 * Metaslab: the allocator of one top-level vdev.
 *
 * State. The vdev's space [0, size) is split three ways:
 *   - free:      a range tree of extents that can be handed out now;
 *   - deferred:  one range tree per txg of extents freed in that txg, which
 *                must not be reused until txg + defer_txgs is durable, so the
 *                trees named by the last few uberblocks stay intact and an
 *                import can fall back to them;
 *   - allocated: everything else. It is not stored: it is the complement of
 *                the other two, so an allocation or a free touches at most two
 *                trees and the allocated set costs no memory.
 * A free is checked against both the free and deferred trees, so a double free
 * is refused instead of corrupting the pool.
 *
 * Allocation policy. Blocks written together are usually read together, and
 * a device writes sequentially fastest, so the normal policy is next fit: a
 * cursor per size class (the size's lowest set bit, as blocks of one size tend
 * to come from one stream) and the first extent at or after it that holds the
 * request; the cursor then moves past the allocation, so a stream of writes
 * lands contiguously. The range tree answers "first fit at or after x" in
 * O(log n) (its by-start index carries subtree maxima), so this stays fast on
 * a fragmented space. When the space is more than 90% used, or no free extent
 * of 1 MiB is left, contiguity is already lost and next fit would chop up the
 * few large extents that remain, so the allocator switches to best fit (the
 * smallest extent that holds the request, from the size index). A request
 * larger than the largest free extent fails at once: that is an O(1) check.
 *
 * Records. Every allocation and free is appended to a pending list tagged with
 * its txg, merged with the previous record when it extends it (same kind, txg
 * and vdev), so a sequential stream costs one log entry. The pool takes a
 * txg's records when it writes that txg's log block. Replay at import applies
 * records in log order; a FREE whose defer window was still open at the last
 * durable txg goes back into the deferred trees, so a crash does not shorten
 * the window.
 *
 * Condensing. The snapshot lists every non-free extent as ALLOC (allocated
 * and deferred alike) and then the deferred extents as FREE records carrying
 * their own txgs, so replaying a snapshot reproduces the deferred state too.
 * It is built and the pending records it covers are dropped under one lock
 * hold, which gives the pool a clean cut between snapshot and log. Blocks are
 * also allocated outside syncing context, in the open txg (intent-log data
 * written ahead of its txg, log-region growth): a snapshot of txg T shows
 * allocations recorded for later txgs as free and leaves their records
 * pending, so they reach the log with their own txg.
 *
 * Locking: one mutex guards everything. Allocation is O(log n) and short, so a
 * single lock per top-level vdev is enough for the pool's write threads; if
 * it ever is not, the space can be split into several metaslabs per vdev,
 * each with its own lock, without changing this interface.
 */
#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/metaslab.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Best fit when less than this percentage of the space is free... */
#define METASLAB_BESTFIT_FREE_PCT 10
/* ...or when the largest free extent is below this. */
#define METASLAB_BESTFIT_LARGEST (1ULL * CAIRN_MIB)
/* How far back unalloc looks for the ALLOC record to withdraw. */
#define METASLAB_UNALLOC_LOOKBACK 64
#define METASLAB_NCURSORS 64

typedef struct ms_defer {
    uint64_t txg;
    range_tree_t *tree;
} ms_defer_t;

struct metaslab {
    pthread_mutex_t lock;
    uint32_t vdev_id;
    uint32_t ashift;
    uint32_t defer_txgs;
    uint64_t unit;
    uint64_t size;

    range_tree_t *free_tree;
    ms_defer_t *defer;       /* sorted by txg, one per txg with pending frees */
    size_t ndefer, defer_cap;
    uint64_t deferred_space;

    uint64_t cursor[METASLAB_NCURSORS];

    spacemap_record_t *recs; /* pending records, in the order they happened */
    size_t nrecs, recs_cap;
};

int metaslab_create(uint32_t vdev_id, uint64_t asize, uint32_t ashift, uint32_t defer_txgs,
                    metaslab_t **out)
{
    *out = NULL;
    if (ashift < METASLAB_MIN_ASHIFT || ashift > METASLAB_MAX_ASHIFT ||
        vdev_id >= SPACEMAP_MAX_VDEVS)
        return -EINVAL;
    uint64_t unit = 1ULL << ashift;
    uint64_t size = CAIRN_P2ALIGN(asize, unit);
    if (size == 0)
        return -EINVAL;
    metaslab_t *ms = cairn_zalloc(sizeof(*ms));
    pthread_mutex_init(&ms->lock, NULL);
    ms->vdev_id = vdev_id;
    ms->ashift = ashift;
    ms->defer_txgs = defer_txgs;
    ms->unit = unit;
    ms->size = size;
    ms->free_tree = range_tree_create();
    range_tree_add(ms->free_tree, 0, size);
    *out = ms;
    return 0;
}

int metaslab_grow(metaslab_t *ms, uint64_t asize)
{
    pthread_mutex_lock(&ms->lock);
    uint64_t size = CAIRN_P2ALIGN(asize, ms->unit);
    int e = size < ms->size ? -EINVAL : 0;
    if (!e && size > ms->size) {
        range_tree_add(ms->free_tree, ms->size, size - ms->size);
        ms->size = size;
    }
    pthread_mutex_unlock(&ms->lock);
    return e;
}

void metaslab_destroy(metaslab_t *ms)
{
    if (!ms)
        return;
    range_tree_destroy(ms->free_tree);
    for (size_t i = 0; i < ms->ndefer; i++)
        range_tree_destroy(ms->defer[i].tree);
    free(ms->defer);
    free(ms->recs);
    pthread_mutex_destroy(&ms->lock);
    free(ms);
}

uint32_t metaslab_vdev_id(const metaslab_t *ms) { return ms->vdev_id; }
uint32_t metaslab_ashift(const metaslab_t *ms) { return ms->ashift; }

/* ---- helpers (lock held) ---- */

static bool ms_range_ok(const metaslab_t *ms, uint64_t offset, uint64_t size)
{
    return size != 0 && CAIRN_IS_P2ALIGNED(offset, ms->unit) &&
           CAIRN_IS_P2ALIGNED(size, ms->unit) && offset < ms->size && size <= ms->size - offset;
}

static bool ms_overlaps_deferred(const metaslab_t *ms, uint64_t offset, uint64_t size)
{
    for (size_t i = 0; i < ms->ndefer; i++)
        if (range_tree_overlaps(ms->defer[i].tree, offset, size))
            return true;
    return false;
}

/* Allocated: neither free nor deferred anywhere. */
static bool ms_is_allocated(const metaslab_t *ms, uint64_t offset, uint64_t size)
{
    return !range_tree_overlaps(ms->free_tree, offset, size) &&
           !ms_overlaps_deferred(ms, offset, size);
}

static range_tree_t *ms_defer_tree(metaslab_t *ms, uint64_t txg)
{
    size_t i = ms->ndefer;
    while (i > 0 && ms->defer[i - 1].txg > txg)
        i--;
    if (i > 0 && ms->defer[i - 1].txg == txg)
        return ms->defer[i - 1].tree;
    if (ms->ndefer == ms->defer_cap) {
        ms->defer_cap = ms->defer_cap ? ms->defer_cap * 2 : 4;
        ms->defer = cairn_realloc(ms->defer, ms->defer_cap * sizeof(*ms->defer));
    }
    memmove(&ms->defer[i + 1], &ms->defer[i], (ms->ndefer - i) * sizeof(*ms->defer));
    ms->defer[i].txg = txg;
    ms->defer[i].tree = range_tree_create();
    ms->ndefer++;
    return ms->defer[i].tree;
}

static void ms_record(metaslab_t *ms, uint64_t txg, uint8_t type, uint64_t offset, uint64_t size)
{
    if (ms->nrecs > 0) {
        spacemap_record_t *last = &ms->recs[ms->nrecs - 1];
        if (last->txg == txg && last->type == type && last->offset + last->size == offset &&
            last->size + size <= SPACEMAP_MAX_EXTENT) {
            last->size += size;
            return;
        }
    }
    if (ms->nrecs == ms->recs_cap) {
        ms->recs_cap = ms->recs_cap ? ms->recs_cap * 2 : 64;
        ms->recs = cairn_realloc(ms->recs, ms->recs_cap * sizeof(*ms->recs));
    }
    ms->recs[ms->nrecs++] = (spacemap_record_t){
        .txg = txg, .offset = offset, .size = size, .vdev = ms->vdev_id, .type = type};
}

/* Moves the pending records of txgs <= txg to a new array (NULL if none). */
static spacemap_record_t *ms_take_pending(metaslab_t *ms, uint64_t txg, size_t *n)
{
    size_t cnt = 0;
    for (size_t i = 0; i < ms->nrecs; i++)
        cnt += ms->recs[i].txg <= txg;
    *n = cnt;
    if (cnt == 0)
        return NULL;
    spacemap_record_t *out = malloc(cnt * sizeof(*out));
    if (!out)
        abort();
    size_t o = 0, keep = 0;
    for (size_t i = 0; i < ms->nrecs; i++) {
        if (ms->recs[i].txg <= txg)
            out[o++] = ms->recs[i];
        else
            ms->recs[keep++] = ms->recs[i];
    }
    ms->nrecs = keep;
    return out;
}

/* ---- allocation ---- */

int metaslab_alloc(metaslab_t *ms, uint64_t txg, uint64_t size, uint64_t *offset)
{
    if (txg == 0 || size == 0 || !CAIRN_IS_P2ALIGNED(size, ms->unit))
        return -EINVAL;
    pthread_mutex_lock(&ms->lock);
    uint64_t free_space = range_tree_space(ms->free_tree);
    uint64_t largest = range_tree_largest(ms->free_tree, NULL);
    if (largest < size) {
        pthread_mutex_unlock(&ms->lock);
        return -ENOSPC;
    }
    bool best = free_space < ms->size / 100 * METASLAB_BESTFIT_FREE_PCT ||
                largest < METASLAB_BESTFIT_LARGEST;
    uint64_t off = 0;
    bool found;
    if (best) {
        found = range_tree_find_best(ms->free_tree, size, ms->unit, &off);
    } else {
        uint64_t *cursor = &ms->cursor[__builtin_ctzll(size) % METASLAB_NCURSORS];
        found = range_tree_find_first(ms->free_tree, *cursor, size, ms->unit, &off);
        if (!found && *cursor != 0)
            found = range_tree_find_first(ms->free_tree, 0, size, ms->unit, &off);
        if (found)
            *cursor = off + size;
    }
    /* largest >= size and the space is unit-aligned, so something must fit. */
    if (!found) {
        pthread_mutex_unlock(&ms->lock);
        log_error("metaslab", "vdev %u: no fit for %llu bytes despite largest %llu", ms->vdev_id,
                  (unsigned long long)size, (unsigned long long)largest);
        return -ENOSPC;
    }
    int rc = range_tree_remove(ms->free_tree, off, size);
    (void)rc;
    ms_record(ms, txg, SPACEMAP_ALLOC, off, size);
    pthread_mutex_unlock(&ms->lock);
    *offset = off;
    return 0;
}

static int ms_free_locked(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size)
{
    CAIRN_ASSERT(cairn_mutex_held(&ms->lock));
    if (!ms_is_allocated(ms, offset, size)) {
        log_error("metaslab", "vdev %u: free of [%llu, +%llu) in txg %llu: not allocated",
                  ms->vdev_id, (unsigned long long)offset, (unsigned long long)size,
                  (unsigned long long)txg);
        return -EINVAL;
    }
    range_tree_add(ms_defer_tree(ms, txg), offset, size);
    ms->deferred_space += size;
    ms_record(ms, txg, SPACEMAP_FREE, offset, size);
    return 0;
}

int metaslab_free(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size)
{
    if (txg == 0 || !ms_range_ok(ms, offset, size))
        return -EINVAL;
    pthread_mutex_lock(&ms->lock);
    int rc = ms_free_locked(ms, txg, offset, size);
    pthread_mutex_unlock(&ms->lock);
    return rc;
}

/* Withdraws [offset, end) from a pending ALLOC record of txg that covers it. */
static bool ms_withdraw_alloc(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size)
{
    uint64_t end = offset + size;
    size_t lo = ms->nrecs > METASLAB_UNALLOC_LOOKBACK ? ms->nrecs - METASLAB_UNALLOC_LOOKBACK : 0;
    for (size_t i = ms->nrecs; i-- > lo;) {
        spacemap_record_t *r = &ms->recs[i];
        if (r->txg != txg || r->type != SPACEMAP_ALLOC || r->offset > offset ||
            r->offset + r->size < end)
            continue;
        /* The range stayed allocated since this record, so no later record
         * touches it and the record can be cut without reordering anything. */
        uint64_t r_end = r->offset + r->size;
        if (r->offset == offset && r_end == end) {
            memmove(r, r + 1, (ms->nrecs - i - 1) * sizeof(*r));
            ms->nrecs--;
        } else if (r->offset == offset) {
            r->offset = end;
            r->size = r_end - end;
        } else if (r_end == end) {
            r->size = offset - r->offset;
        } else {
            spacemap_record_t tail = *r;
            tail.offset = end;
            tail.size = r_end - end;
            r->size = offset - r->offset;
            if (ms->nrecs == ms->recs_cap) {
                ms->recs_cap *= 2;
                ms->recs = cairn_realloc(ms->recs, ms->recs_cap * sizeof(*ms->recs));
            }
            memmove(&ms->recs[i + 2], &ms->recs[i + 1], (ms->nrecs - i - 1) * sizeof(tail));
            ms->recs[i + 1] = tail;
            ms->nrecs++;
        }
        return true;
    }
    return false;
}

int metaslab_unalloc(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size)
{
    if (txg == 0 || !ms_range_ok(ms, offset, size))
        return -EINVAL;
    pthread_mutex_lock(&ms->lock);
    int rc;
    if (!ms_is_allocated(ms, offset, size)) {
        rc = ms_free_locked(ms, txg, offset, size);   /* logs and fails */
    } else if (ms_withdraw_alloc(ms, txg, offset, size)) {
        range_tree_add(ms->free_tree, offset, size);
        rc = 0;
    } else {
        rc = ms_free_locked(ms, txg, offset, size);
    }
    pthread_mutex_unlock(&ms->lock);
    return rc;
}

int metaslab_alloc_at(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size)
{
    if (txg == 0 || !ms_range_ok(ms, offset, size))
        return -EINVAL;
    pthread_mutex_lock(&ms->lock);
    int rc = range_tree_remove(ms->free_tree, offset, size) == 0 ? 0 : -EEXIST;
    if (rc == 0)
        ms_record(ms, txg, SPACEMAP_ALLOC, offset, size);
    pthread_mutex_unlock(&ms->lock);
    return rc;
}

int metaslab_claim(metaslab_t *ms, uint64_t offset, uint64_t size)
{
    if (!ms_range_ok(ms, offset, size))
        return -EINVAL;
    pthread_mutex_lock(&ms->lock);
    int rc = range_tree_remove(ms->free_tree, offset, size) == 0 ? 0 : -EEXIST;
    pthread_mutex_unlock(&ms->lock);
    return rc;
}

void metaslab_txg_synced(metaslab_t *ms, uint64_t txg)
{
    pthread_mutex_lock(&ms->lock);
    size_t done = 0;
    while (done < ms->ndefer && ms->defer[done].txg <= txg &&
           txg - ms->defer[done].txg >= ms->defer_txgs) {
        range_tree_t *t = ms->defer[done].tree;
        ms->deferred_space -= range_tree_space(t);
        int rc = range_tree_add_tree(ms->free_tree, t);
        if (rc)   /* cannot happen: frees are checked against the free tree */
            log_error("metaslab", "vdev %u: deferred frees of txg %llu overlap free space",
                      ms->vdev_id, (unsigned long long)ms->defer[done].txg);
        range_tree_destroy(t);
        done++;
    }
    if (done) {
        memmove(ms->defer, ms->defer + done, (ms->ndefer - done) * sizeof(*ms->defer));
        ms->ndefer -= done;
    }
    pthread_mutex_unlock(&ms->lock);
}

/* ---- records ---- */

int metaslab_take_records(metaslab_t *ms, uint64_t txg, spacemap_record_t **recs, size_t *n)
{
    pthread_mutex_lock(&ms->lock);
    *recs = ms_take_pending(ms, txg, n);
    pthread_mutex_unlock(&ms->lock);
    return 0;
}

typedef struct ms_snap {
    const metaslab_t *ms;
    uint64_t txg;
    uint8_t type;
    spacemap_record_t *recs;
    size_t n, cap;
} ms_snap_t;

static int ms_snap_cb(void *arg, uint64_t start, uint64_t size)
{
    ms_snap_t *s = arg;
    while (size > 0) {
        uint64_t chunk = size < SPACEMAP_MAX_EXTENT ? size : SPACEMAP_MAX_EXTENT;
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 64;
            s->recs = cairn_realloc(s->recs, s->cap * sizeof(*s->recs));
        }
        s->recs[s->n++] = (spacemap_record_t){
            .txg = s->txg, .offset = start, .size = chunk, .vdev = s->ms->vdev_id, .type = s->type};
        start += chunk;
        size -= chunk;
    }
    return 0;
}

int metaslab_condense(metaslab_t *ms, uint64_t txg, spacemap_record_t **recs, size_t *n)
{
    *recs = NULL;
    *n = 0;
    if (txg == 0)
        return -EINVAL;
    pthread_mutex_lock(&ms->lock);
    /* Allocations of a newer, still open txg (blocks written outside syncing
     * context: intent-log writes, log-region growth) are not part of txg's
     * state: the snapshot shows them free and their records stay pending for
     * their own txg. Newer frees cannot be represented: refused. */
    bool newer = ms->ndefer > 0 && ms->defer[ms->ndefer - 1].txg > txg;
    bool newer_allocs = false;
    for (size_t i = 0; i < ms->nrecs && !newer; i++) {
        if (ms->recs[i].txg <= txg)
            continue;
        if (ms->recs[i].type == SPACEMAP_ALLOC)
            newer_allocs = true;
        else
            newer = true;
    }
    if (newer) {
        pthread_mutex_unlock(&ms->lock);
        return -EINVAL;
    }
    ms_snap_t s = {.ms = ms, .txg = txg, .type = SPACEMAP_ALLOC};
    if (newer_allocs) {
        range_tree_t *as_of = range_tree_create();
        range_tree_add_tree(as_of, ms->free_tree);
        for (size_t i = 0; i < ms->nrecs; i++)
            if (ms->recs[i].txg > txg)
                range_tree_add(as_of, ms->recs[i].offset, ms->recs[i].size);
        range_tree_walk_gaps(as_of, 0, ms->size, ms_snap_cb, &s);
        range_tree_destroy(as_of);
    } else {
        range_tree_walk_gaps(ms->free_tree, 0, ms->size, ms_snap_cb, &s);
    }
    s.type = SPACEMAP_FREE;
    for (size_t i = 0; i < ms->ndefer; i++) {
        s.txg = ms->defer[i].txg;
        range_tree_walk(ms->defer[i].tree, ms_snap_cb, &s);
    }
    size_t dropped;
    free(ms_take_pending(ms, txg, &dropped));
    pthread_mutex_unlock(&ms->lock);
    *recs = s.recs;
    *n = s.n;
    return 0;
}

int metaslab_replay_record(metaslab_t *ms, const spacemap_record_t *rec,
                           uint64_t last_synced_txg)
{
    if (!spacemap_record_valid(rec) || rec->vdev != ms->vdev_id ||
        rec->txg > last_synced_txg || !ms_range_ok(ms, rec->offset, rec->size))
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&ms->lock);
    if (rec->type == SPACEMAP_ALLOC) {
        if (range_tree_remove(ms->free_tree, rec->offset, rec->size) != 0)
            rc = -EINVAL;
    } else if (!ms_is_allocated(ms, rec->offset, rec->size)) {
        rc = -EINVAL;
    } else if (last_synced_txg - rec->txg >= ms->defer_txgs) {
        range_tree_add(ms->free_tree, rec->offset, rec->size);
    } else {
        range_tree_add(ms_defer_tree(ms, rec->txg), rec->offset, rec->size);
        ms->deferred_space += rec->size;
    }
    pthread_mutex_unlock(&ms->lock);
    if (rc)
        log_error("metaslab", "vdev %u: log record %s [%llu, +%llu) txg %llu contradicts the map",
                  ms->vdev_id, rec->type == SPACEMAP_ALLOC ? "ALLOC" : "FREE",
                  (unsigned long long)rec->offset, (unsigned long long)rec->size,
                  (unsigned long long)rec->txg);
    return rc;
}

/* ---- inspection ---- */

void metaslab_get_stats(metaslab_t *ms, metaslab_stats_t *st)
{
    pthread_mutex_lock(&ms->lock);
    st->size = ms->size;
    st->free = range_tree_space(ms->free_tree);
    st->deferred = ms->deferred_space;
    st->allocated = ms->size - st->free - st->deferred;
    st->largest_free = range_tree_largest(ms->free_tree, NULL);
    st->free_extents = range_tree_count(ms->free_tree);
    st->pending_records = ms->nrecs;
    pthread_mutex_unlock(&ms->lock);
}

static void ms_add_deferred_to(const metaslab_t *ms, range_tree_t *t)
{
    for (size_t i = 0; i < ms->ndefer; i++)
        range_tree_add_tree(t, ms->defer[i].tree);
}

int metaslab_walk(metaslab_t *ms, metaslab_space_t which, range_tree_walk_fn fn, void *arg)
{
    int rc = 0;
    pthread_mutex_lock(&ms->lock);
    if (which == METASLAB_SPACE_FREE) {
        rc = range_tree_walk(ms->free_tree, fn, arg);
    } else {
        /* Deferred extents of different txgs may touch: merge them first, so a
         * walk reports each maximal extent once. */
        range_tree_t *t = range_tree_create();
        ms_add_deferred_to(ms, t);
        if (which == METASLAB_SPACE_ALLOCATED) {
            range_tree_add_tree(t, ms->free_tree);
            rc = range_tree_walk_gaps(t, 0, ms->size, fn, arg);
        } else {
            rc = range_tree_walk(t, fn, arg);
        }
        range_tree_destroy(t);
    }
    pthread_mutex_unlock(&ms->lock);
    return rc;
}

bool metaslab_range_is(metaslab_t *ms, metaslab_space_t which, uint64_t offset, uint64_t size)
{
    if (size == 0 || offset >= ms->size || size > ms->size - offset)
        return false;
    bool r = false;
    pthread_mutex_lock(&ms->lock);
    switch (which) {
    case METASLAB_SPACE_FREE:
        r = range_tree_contains(ms->free_tree, offset, size);
        break;
    case METASLAB_SPACE_ALLOCATED:
        r = ms_is_allocated(ms, offset, size);
        break;
    case METASLAB_SPACE_DEFERRED: {
        uint64_t covered = 0;
        for (size_t i = 0; i < ms->ndefer; i++)
            covered += range_tree_overlap_space(ms->defer[i].tree, offset, size);
        r = covered == size;   /* deferred trees are disjoint from each other */
        break;
    }
    }
    pthread_mutex_unlock(&ms->lock);
    return r;
}
