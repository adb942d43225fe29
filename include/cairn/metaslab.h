/*
 * Metaslab: the space allocator of one top-level vdev (src/metaslab/metaslab.c).
 *
 * It hands out extents of the vdev's linear address space [0, asize), always
 * multiples of 1 << ashift, keeps freed extents out of reach until their defer
 * window has passed, and records every allocation and free per txg so the pool
 * can append them to its space map log (spacemap.h). It does no I/O.
 *
 * Life cycle in the pool:
 *   create (everything free) -> replay the log with spacemap_replay() (or
 *   metaslab_replay_record()) -> per syncing txg T: metaslab_alloc/free(T, ..),
 *   then metaslab_take_records(T) and write them to the log, and once T is
 *   durable metaslab_txg_synced(T) -> from time to time metaslab_condense(T)
 *   to start a new log chain with a snapshot.
 *
 * Every function is thread-safe (one mutex per metaslab); allocation is meant
 * for syncing context, where one txg at a time is being written.
 */
#ifndef CAIRN_METASLAB_H
#define CAIRN_METASLAB_H

#include <cairn/range_tree.h>
#include <cairn/spacemap.h>
#include <cairn/types.h>

typedef struct metaslab metaslab_t;

#define METASLAB_MIN_ASHIFT 9
#define METASLAB_MAX_ASHIFT 16

typedef struct metaslab_stats {
    uint64_t size;            /* allocatable space: asize rounded down to the unit */
    uint64_t allocated;       /* in use (deferred frees not included) */
    uint64_t deferred;        /* freed, waiting for the defer window */
    uint64_t free;            /* allocatable now; size = allocated + deferred + free */
    uint64_t largest_free;    /* largest allocatable extent */
    uint64_t free_extents;    /* number of allocatable extents (fragmentation) */
    uint64_t pending_records; /* records not yet taken by metaslab_take_records() */
} metaslab_stats_t;

/* A new allocator for top-level vdev vdev_id (< SPACEMAP_MAX_VDEVS) with all of
 * [0, asize) free. ashift in 9..16. A free in txg T becomes allocatable once
 * metaslab_txg_synced(T + defer_txgs) has been called (the pool passes
 * SPA_DEFER_TXGS). -EINVAL for bad arguments or asize below one unit. */
int metaslab_create(uint32_t vdev_id, uint64_t asize, uint32_t ashift, uint32_t defer_txgs,
                    metaslab_t **out);
void metaslab_destroy(metaslab_t *ms);   /* NULL is fine */
/* The vdev grew: [old size, asize) becomes free space (records nothing: the
 * space beyond the old size was never in the log, and the pool's config says
 * how big the vdev is). -EINVAL if asize is below the current size. */
int metaslab_grow(metaslab_t *ms, uint64_t asize);

uint32_t metaslab_vdev_id(const metaslab_t *ms);
uint32_t metaslab_ashift(const metaslab_t *ms);

/* Allocates size bytes (a non-zero multiple of 1 << ashift) in txg, storing
 * the offset in *offset and recording an ALLOC record for txg. -ENOSPC when no
 * free extent can hold it (decided in O(1) when size exceeds the largest free
 * extent); -EINVAL for a bad size or txg 0.
 * Policy: next fit from a cursor kept per size class, so a stream of blocks of
 * one size lands contiguously; best fit instead when the space is more than
 * 90% used or no free extent of 1 MiB is left, where locality is already lost
 * and best fit slows fragmentation. Both are O(log n) in the free extents. */
int metaslab_alloc(metaslab_t *ms, uint64_t txg, uint64_t size, uint64_t *offset);

/* Frees [offset, offset + size) in txg: deferred, not allocatable until
 * metaslab_txg_synced(txg + defer_txgs); records a FREE record. -EINVAL if the
 * range is misaligned, beyond asize, or not entirely allocated (double free);
 * nothing changes then. */
int metaslab_free(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size);

/* Gives back an extent allocated in this same txg whose block was never
 * written (a failed write): it is free again at once and its ALLOC record is
 * withdrawn, when that record is still pending and among the last few; else
 * this falls back to metaslab_free(). Same errors as metaslab_free(). */
int metaslab_unalloc(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size);

/* Allocates exactly [offset, offset + size) in txg, recording an ALLOC record
 * (import claims blocks named by the intent log). -EEXIST if any part of it is
 * not free; -EINVAL if misaligned, out of range or txg is 0. */
int metaslab_alloc_at(metaslab_t *ms, uint64_t txg, uint64_t offset, uint64_t size);

/* Marks [offset, offset + size) allocated without recording anything (for
 * space the pool knows is in use but that is not in the log). -EEXIST if any
 * part of it is not free (allocated or deferred); -EINVAL if misaligned or out
 * of range. */
int metaslab_claim(metaslab_t *ms, uint64_t offset, uint64_t size);

/* txg is durable: frees of txgs <= txg - defer_txgs become allocatable. */
void metaslab_txg_synced(metaslab_t *ms, uint64_t txg);

/* Hands over (and forgets) the pending records of every txg <= txg, in the
 * order they happened; contiguous records of one kind and txg are merged.
 * *recs is malloc'ed (caller free()s; NULL when *n is 0). */
int metaslab_take_records(metaslab_t *ms, uint64_t txg, spacemap_record_t **recs, size_t *n);

/* The snapshot that starts a new log chain, written in txg: an ALLOC record
 * (txg `txg`) for every extent not allocatable now (allocated or deferred),
 * then a FREE record with its own txg for every deferred extent; extents over
 * SPACEMAP_MAX_EXTENT are split. Under the same lock it drops the pending
 * records of txgs <= txg, which the snapshot already contains, so the next
 * metaslab_take_records(txg) returns only what happens after the snapshot
 * (e.g. the allocation of the snapshot's own blocks). Allocations recorded for a
 * txg above txg are left out of the snapshot (shown free) and stay pending;
 * -EINVAL if a free was recorded or deferred for a txg above txg. *recs as for take_records. */
int metaslab_condense(metaslab_t *ms, uint64_t txg, spacemap_record_t **recs, size_t *n);

/* Applies one replayed log record (import): ALLOC claims the extent; FREE
 * frees it, into the deferred set of rec->txg when rec->txg + defer_txgs >
 * last_synced_txg (its window was still open at the last durable txg), else
 * straight into the free space. Nothing is recorded. -EINVAL if the record is
 * invalid, names another vdev, lies beyond asize, has a txg above
 * last_synced_txg, or contradicts the state (ALLOC of space not free, FREE of
 * space not allocated): the log is corrupt. */
int metaslab_replay_record(metaslab_t *ms, const spacemap_record_t *rec,
                           uint64_t last_synced_txg);

void metaslab_get_stats(metaslab_t *ms, metaslab_stats_t *st);

/* Which extents metaslab_walk() visits. */
typedef enum metaslab_space {
    METASLAB_SPACE_FREE = 0,       /* allocatable now */
    METASLAB_SPACE_DEFERRED = 1,   /* freed, in the defer window (any txg) */
    METASLAB_SPACE_ALLOCATED = 2,  /* in use: neither free nor deferred */
} metaslab_space_t;

/* Calls fn for every extent of that kind in address order, holding the
 * metaslab's lock (fn must not call back into this metaslab). Returns 0 or the
 * nonzero value that stopped the walk. */
int metaslab_walk(metaslab_t *ms, metaslab_space_t which, range_tree_walk_fn fn, void *arg);

/* Test and check helper: true if [offset, offset + size) is entirely of kind which. */
bool metaslab_range_is(metaslab_t *ms, metaslab_space_t which, uint64_t offset, uint64_t size);

#endif
