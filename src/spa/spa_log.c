/*
 * Intent-log space: the log region, log block chains and the log directory
 * (API at the end of include/cairn/spa.h; the ZIL in src/zil/ is the user).
 *
 * WHY A REGION. A synchronous operation must become durable with one write
 * and one flush, outside syncing context. Allocating each log block from the
 * metaslabs would record it in the space map of some txg that may or may not
 * become durable before a crash, and a block allocated for a chain whose write
 * then tore would be leaked. Instead the pool reserves a region as a whole -
 * every log-class top-level vdev entirely, or chunks of the normal vdevs
 * allocated (and recorded in the space map log) in syncing context - and keeps
 * the region's own free space in memory only. Which blocks of the region are
 * in use is derived, at import, from the chains themselves: the blocks a
 * chain walk reaches (plus the pre-allocated successor of the last one) are
 * in use, everything else is free. `cairn check` counts the region's extents
 * as referenced by the directory.
 *
 * A LOG BLOCK starts with a frame (SPA_LOG_BLOCK_FRAME bytes): magic, chain
 * guid, sequence number, payload length, the DVA of the next block and a
 * checksum of the frame and payload. The successor is allocated before the
 * block is written, so a chain is followed from its head without any other
 * metadata, and it ends at the first block whose frame does not verify - a
 * torn write, a never-written successor or a block since reused by another
 * chain (the guid and sequence differ). Only the frame and payload are
 * written (rounded up to the allocation unit), except on raidz where a block
 * is always written whole (its layout depends on the written size).
 *
 * REFERENCES. A log record may point at a block the layer above wrote
 * directly to the normal vdevs in the record's txg (a large write). Those
 * pointers also sit in the log block's reference table, after the payload
 * (frame field nrefs), so the pool can keep such blocks without knowing the
 * record format: at the first import after a crash, a referenced block born
 * after the last durable txg lost its allocation with that txg, and is
 * allocated again (claimed) in the txg that records claim_txg. The ZIL frees
 * it after replay. A read-only import (the check) counts the claimed blocks of
 * records not yet replayed as referenced.
 *
 * FREEING. When the ZIL moves a chain's head past blocks whose records are
 * all in synced txgs, it sets the new header in txg U and frees the old blocks
 * with U: they return to the free space only once U is durable, because until
 * then a crash would bring back the header that leads to them. So space comes
 * back only through syncs: an allocation that leaves less than a quarter of
 * the region free kicks the txg sync instead of waiting for the timer.
 *
 * THE DIRECTORY is one block (CAIRN_BT_LOGDIR) named by the uberblock's
 * log_dir pointer: the region's extents and one header per object set that
 * has a chain. Changes are queued with the txg they belong to and applied to
 * the durable copy when that txg syncs, so a header set in a transaction's
 * txg (the ZIL's replay marker) becomes durable exactly with that txg.
 *
 * LOG VDEVS COME AND GO (spa_vdev.c). An added log vdev is claimed as a
 * region in the txg that adds it. One being removed gets no new blocks
 * (alloc skips it) while the ZIL moves its chains away, and its region leaves
 * the directory in the txg that takes it out of the tree; a region naming a
 * hole or a vdev beyond the tree (that txg's labels were written, its
 * uberblock not) is dropped at import.
 */
#include "spa_impl.h"

#include <cairn/assert.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOGDIR_MAGIC 0x524944474f4c4e43ULL   /* "CNLOGDIR" */
#define LOGBLK_MAGIC 0x4b4c42474f4c4e43ULL   /* "CNLOGBLK" */
#define LOGDIR_VERSION 1
#define LOG_REGION_CHUNK (64 * CAIRN_MIB)
#define LOG_REGION_MIN_CHUNK (4 * CAIRN_MIB)
/* A log that allocated nothing for this long gives its wholly free chunks back. */
#define LOG_SHRINK_DELAY_NS (10 * 1000000000ULL)

typedef struct logdir_region_phys {
    uint32_t vdev;
    uint32_t flags;
    uint64_t offset;
    uint64_t size;
} logdir_region_phys_t;

typedef struct logdir_ent_phys {
    uint64_t os_id;
    spa_log_header_t h;
} logdir_ent_phys_t;

typedef struct logdir_phys {
    uint64_t magic;
    uint64_t version;
    uint32_t nregions;
    uint32_t nents;
    uint64_t reserved[5];
    /* logdir_region_phys_t regions[nregions]; logdir_ent_phys_t ents[nents]; */
} logdir_phys_t;

typedef struct logblk_frame {
    uint64_t magic;
    uint64_t guid;
    uint64_t seq;
    uint32_t len;          /* payload bytes after the frame */
    uint32_t flags;
    cairn_dva_t next;
    uint8_t cksum[CAIRN_CHECKSUM_LEN]; /* xxhash of the frame (this field zero), payload, refs */
    uint32_t nrefs;        /* spa_log_ref_t entries after the payload */
    uint32_t reserved32;
    uint64_t reserved[5];
} logblk_frame_t;

_Static_assert(sizeof(spa_log_header_t) == 64, "log header is 64 bytes on disk");
_Static_assert(sizeof(logdir_region_phys_t) == 24, "log region entry");
_Static_assert(sizeof(logdir_ent_phys_t) == 72, "log directory entry");
_Static_assert(sizeof(logdir_phys_t) == 64, "log directory header");
_Static_assert(sizeof(logblk_frame_t) == SPA_LOG_BLOCK_FRAME, "log block frame");
_Static_assert(sizeof(spa_log_ref_t) == 136, "log block reference");

typedef enum { PEND_HEADER, PEND_REGION } pend_kind_t;

typedef struct log_pending {
    uint64_t txg;
    pend_kind_t kind;
    logdir_ent_phys_t ent;
    logdir_region_phys_t region;
} log_pending_t;

typedef struct log_deferred {
    cairn_dva_t dva;
    uint64_t txg;
} log_deferred_t;

typedef struct sync_free {
    cairn_blkptr_t bp;
    uint64_t txg;
} sync_free_t;

typedef struct spa_log {
    pthread_mutex_t lock;
    /* the directory as of the last synced txg */
    logdir_region_phys_t *regions;
    size_t nregions;
    logdir_ent_phys_t *ents;
    size_t nents;
    cairn_blkptr_t dir_bp;
    /* changes waiting for their txg */
    log_pending_t *pend;
    size_t npend, cappend;
    /* free space of the region, per top-level vdev (NULL: no region there) */
    range_tree_t **free;
    uint32_t ntop;
    log_deferred_t *deferred;
    size_t ndeferred, capdeferred;
    uint64_t region_bytes;
    uint64_t released_txg;       /* deferred frees were released as of this synced txg */
    bool dir_dirty;              /* regions dropped: write the directory in the next sync */
    pthread_mutex_t grow_lock;   /* one region growth at a time */
    _Atomic uint64_t blocks_written, flushes;
    /* Shared flushes (spa_log_flush): one flush of the log's vdevs in flight at
     * a time; callers arriving meanwhile add their vdevs to flush_pend and wait
     * for the next one, which covers them all. Generations count flushes
     * started and finished; flush_failed_gen/err: the last one that failed. */
    pthread_mutex_t flush_lock;
    pthread_cond_t flush_cv;
    bool flushing;
    uint64_t flush_started, flush_done, flush_failed_gen;
    int flush_failed_err;
    uint32_t flush_pend[SPA_MAX_TOP];
    size_t nflush_pend;
    bool flush_pend_all;         /* flush_pend overflowed: the next flush takes every log vdev */
    uint32_t flush_waiters;
    _Atomic uint64_t flushes_shared;
    /* blocks to free when their txg syncs (spa_block_free_at_sync) */
    sync_free_t *sync_frees;
    size_t nsync_frees, capsync_frees;
    /* read-only import: blocks that live chains' claimed references keep
     * allocated, for the check (see spa_log_load) */
    cairn_blkptr_t *live_refs;
    size_t nlive_refs, caplive_refs;
    uint64_t claimed_refs;
    /* shrinking (spa_log_shrink_due, shrink_locked) */
    _Atomic uint64_t last_use_ns;  /* the last allocation or free of a log block */
    _Atomic bool may_shrink;       /* chunks may have become wholly free since the last try */
    _Atomic uint64_t shrink_delay_ns;
    _Atomic uint64_t chunks_dropped;
} spa_log_t;

static spa_log_t *log_of(spa_t *spa) { return spa->log; }

void spa_log_init(spa_t *spa)
{
    spa_log_t *l = cairn_zalloc(sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    pthread_mutex_init(&l->grow_lock, NULL);
    pthread_mutex_init(&l->flush_lock, NULL);
    pthread_cond_init(&l->flush_cv, NULL);
    l->ntop = spa->ntop;
    atomic_store(&l->shrink_delay_ns, LOG_SHRINK_DELAY_NS);
    /* Room for log vdevs added later (spa_vdev.c). */
    l->free = cairn_zalloc(sizeof(range_tree_t *) * CAIRN_MAX(spa->ntop, (uint32_t)SPA_MAX_TOP));
    spa->log = l;
}

void spa_log_fini(spa_t *spa)
{
    spa_log_t *l = spa->log;
    if (!l) return;
    for (uint32_t i = 0; i < l->ntop; i++) range_tree_destroy(l->free[i]);
    free(l->free);
    free(l->regions);
    free(l->ents);
    free(l->pend);
    free(l->deferred);
    free(l->sync_frees);
    free(l->live_refs);
    pthread_mutex_destroy(&l->lock);
    pthread_mutex_destroy(&l->grow_lock);
    pthread_mutex_destroy(&l->flush_lock);
    pthread_cond_destroy(&l->flush_cv);
    free(l);
    spa->log = NULL;
}

uint64_t spa_import_txg(spa_t *spa) { return spa->import_txg; }

static vdev_t *log_top(spa_t *spa, uint32_t id) { return spa_top_vdev(spa, id); }

bool spa_has_log_vdevs(spa_t *spa)
{
    for (uint32_t i = 0; i < spa->ntop; i++)
        if (spa_top_is_log(spa, i)) return true;
    return false;
}

/* ---------------- directory ---------------- */

static void region_add_free(spa_log_t *l, const logdir_region_phys_t *r)
{
    if (r->vdev >= l->ntop) return;
    if (!l->free[r->vdev]) l->free[r->vdev] = range_tree_create();
    range_tree_add(l->free[r->vdev], r->offset, r->size);
    l->region_bytes += r->size;
}

static logdir_ent_phys_t *ent_find(logdir_ent_phys_t *ents, size_t n, uint64_t os_id)
{
    for (size_t i = 0; i < n; i++)
        if (ents[i].os_id == os_id) return &ents[i];
    return NULL;
}

void spa_log_header_get(spa_t *spa, uint64_t os_id, spa_log_header_t *out)
{
    spa_log_t *l = log_of(spa);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->lock);
    logdir_ent_phys_t *e = ent_find(l->ents, l->nents, os_id);
    if (e) *out = e->h;
    for (size_t i = 0; i < l->npend; i++)
        if (l->pend[i].kind == PEND_HEADER && l->pend[i].ent.os_id == os_id) *out = l->pend[i].ent.h;
    pthread_mutex_unlock(&l->lock);
}

static void pend_push(spa_log_t *l, const log_pending_t *p)
{
    if (l->npend == l->cappend) {
        l->cappend = l->cappend ? l->cappend * 2 : 16;
        l->pend = cairn_realloc(l->pend, l->cappend * sizeof *l->pend);
    }
    l->pend[l->npend++] = *p;
}

void spa_log_header_set(spa_t *spa, uint64_t os_id, const spa_log_header_t *h, uint64_t txg)
{
    spa_log_t *l = log_of(spa);
    log_pending_t p = {.txg = txg, .kind = PEND_HEADER, .ent = {.os_id = os_id, .h = *h}};
    pthread_mutex_lock(&l->lock);
    pend_push(l, &p);
    pthread_mutex_unlock(&l->lock);
}

static void apply_header(spa_log_t *l, const logdir_ent_phys_t *src)
{
    logdir_ent_phys_t *e = ent_find(l->ents, l->nents, src->os_id);
    bool empty = src->h.chain_guid == 0 && src->h.replay_seq == 0;
    if (e && empty) {
        *e = l->ents[--l->nents];
    } else if (e) {
        *e = *src;
    } else if (!empty) {
        l->ents = cairn_realloc(l->ents, (l->nents + 1) * sizeof *l->ents);
        l->ents[l->nents++] = *src;
    }
}

/* A log vdev without a region becomes one whole region, in this txg. Its
 * blocks are usable once the txg is durable (they wait as deferred frees). */
static void claim_log_vdevs(spa_t *spa, spa_log_t *l, uint64_t txg)
{
    for (uint32_t v = 0; v < spa->ntop; v++) {
        if (!spa_top_is_log(spa, v) || l->free[v]) continue;
        vdev_t *top = log_top(spa, v);
        if (atomic_load(&top->state) == VDEV_STATE_FAULTED ||
            atomic_load(&top->state) == VDEV_STATE_UNAVAIL)
            continue;
        metaslab_stats_t st;
        metaslab_get_stats(spa->ms[v], &st);
        uint64_t off;
        if (!st.largest_free || metaslab_alloc(spa->ms[v], txg, st.largest_free, &off)) continue;
        log_pending_t p = {.txg = txg, .kind = PEND_REGION,
                           .region = {.vdev = v, .offset = off, .size = st.largest_free}};
        pend_push(l, &p);
        l->free[v] = range_tree_create();
        l->region_bytes += st.largest_free;
        /* Usable once this txg is durable. */
        for (uint64_t o = 0; o < st.largest_free; o += SPA_LOG_BLOCK_MAX * 64ULL) {
            uint64_t n = CAIRN_MIN(SPA_LOG_BLOCK_MAX * 64ULL, st.largest_free - o);
            if (l->ndeferred == l->capdeferred) {
                l->capdeferred = l->capdeferred ? l->capdeferred * 2 : 64;
                l->deferred = cairn_realloc(l->deferred, l->capdeferred * sizeof *l->deferred);
            }
            l->deferred[l->ndeferred++] = (log_deferred_t){
                .dva = {.vdev = v, .offset = off + o, .asize = (uint32_t)(n >> CAIRN_SECTOR_SHIFT)},
                .txg = txg};
        }
        log_info("spa", "pool %s: log vdev %u holds a %llu-byte intent-log region", spa->name, v,
                 (unsigned long long)st.largest_free);
    }
}

static void release_deferred_locked(spa_t *spa, spa_log_t *l);

bool spa_log_shrink_due(spa_t *spa, uint64_t now_ns)
{
    spa_log_t *l = log_of(spa);
    if (!l || spa->readonly || !atomic_load(&l->may_shrink)) return false;
    return now_ns - atomic_load(&l->last_use_ns) >= atomic_load(&l->shrink_delay_ns);
}

void spa_log_set_shrink_delay(spa_t *spa, uint64_t ms)
{
    atomic_store(&log_of(spa)->shrink_delay_ns, ms * 1000000ULL);
}

/*
 * The region's chunks on the normal vdevs that hold no log block any more
 * go back to the pool, in txg (syncing context): the directory written in
 * txg no longer names them and the space map frees them in the same txg, so a
 * crash sees either both or neither. Only wholly free chunks: a block in use,
 * or freed and waiting for its txg (deferred), keeps its chunk. Log vdevs
 * stay whole regions.
 */
static void shrink_locked(spa_t *spa, spa_log_t *l, uint64_t txg)
{
    CAIRN_ASSERT(cairn_mutex_held(&l->lock));
    atomic_store(&l->may_shrink, false);
    release_deferred_locked(spa, l);
    size_t keep = 0;
    for (size_t i = 0; i < l->nregions; i++) {
        logdir_region_phys_t *r = &l->regions[i];
        range_tree_t *fr = r->vdev < l->ntop ? l->free[r->vdev] : NULL;
        if (spa_top_is_log(spa, r->vdev) || !fr || !spa->ms[r->vdev] ||
            !range_tree_contains(fr, r->offset, r->size) ||
            metaslab_free(spa->ms[r->vdev], txg, r->offset, r->size)) {
            l->regions[keep++] = *r;
            continue;
        }
        range_tree_remove(fr, r->offset, r->size);
        l->region_bytes -= r->size;
        l->dir_dirty = true;
        atomic_fetch_add(&l->chunks_dropped, 1);
        log_info("spa", "pool %s: intent-log region shrunk by %llu bytes on vdev %u (idle)",
                 spa->name, (unsigned long long)r->size, r->vdev);
    }
    l->nregions = keep;
}

int spa_log_sync(spa_t *spa, uint64_t txg, spa_uberblock_phys_t *ub)
{
    spa_log_t *l = log_of(spa);
    pthread_mutex_lock(&l->lock);
    size_t keepf = 0, nfree = 0;
    sync_free_t *frees = cairn_zalloc((l->nsync_frees + 1) * sizeof *frees);
    for (size_t i = 0; i < l->nsync_frees; i++) {
        if (l->sync_frees[i].txg <= txg) frees[nfree++] = l->sync_frees[i];
        else l->sync_frees[keepf++] = l->sync_frees[i];
    }
    l->nsync_frees = keepf;
    pthread_mutex_unlock(&l->lock);
    for (size_t i = 0; i < nfree; i++) spa_block_free(spa, txg, &frees[i].bp);
    free(frees);
    pthread_mutex_lock(&l->lock);
    l->ntop = spa->ntop; /* log vdevs added in this txg (spa_vdev.c) */
    claim_log_vdevs(spa, l, txg);
    if (spa_log_shrink_due(spa, cairn_now_ns())) shrink_locked(spa, l, txg);
    bool changed = l->dir_dirty;
    l->dir_dirty = false;
    size_t keep = 0;
    for (size_t i = 0; i < l->npend; i++) {
        log_pending_t *p = &l->pend[i];
        if (p->txg > txg) {
            l->pend[keep++] = *p;
            continue;
        }
        changed = true;
        if (p->kind == PEND_HEADER) {
            apply_header(l, &p->ent);
        } else {
            l->regions = cairn_realloc(l->regions, (l->nregions + 1) * sizeof *l->regions);
            l->regions[l->nregions++] = p->region;
        }
    }
    l->npend = keep;
    if (!changed) {
        pthread_mutex_unlock(&l->lock);
        ub->log_dir = l->dir_bp;
        return 0;
    }
    size_t len = sizeof(logdir_phys_t) + l->nregions * sizeof(logdir_region_phys_t) +
                 l->nents * sizeof(logdir_ent_phys_t);
    size_t cap = CAIRN_P2ROUNDUP(len, (size_t)512);
    uint8_t *buf = cairn_zalloc(cap);
    logdir_phys_t *d = (logdir_phys_t *)buf;
    d->magic = LOGDIR_MAGIC;
    d->version = LOGDIR_VERSION;
    d->nregions = (uint32_t)l->nregions;
    d->nents = (uint32_t)l->nents;
    if (l->nregions) memcpy(buf + sizeof *d, l->regions, l->nregions * sizeof(logdir_region_phys_t));
    if (l->nents)
        memcpy(buf + sizeof *d + l->nregions * sizeof(logdir_region_phys_t), l->ents,
               l->nents * sizeof(logdir_ent_phys_t));
    cairn_blkptr_t old = l->dir_bp;
    pthread_mutex_unlock(&l->lock);

    spa_write_props_t props = {.type = CAIRN_BT_LOGDIR, .checksum = CAIRN_CHECKSUM_FLETCHER4,
                               .compress = CAIRN_COMPRESS_LZ4, .copies = 2};
    cairn_blkptr_t bp;
    int err = spa_block_write(spa, txg, buf, (uint32_t)cap, &props, &bp);
    free(buf);
    if (err) return err;
    if (!cairn_bp_is_hole(&old)) spa_block_free(spa, txg, &old);
    pthread_mutex_lock(&l->lock);
    l->dir_bp = bp;
    pthread_mutex_unlock(&l->lock);
    ub->log_dir = bp;
    return 0;
}

void spa_block_free_at_sync(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    spa_log_t *l = log_of(spa);
    if (cairn_bp_is_hole(bp) || spa->readonly) return;
    pthread_mutex_lock(&l->lock);
    if (l->nsync_frees == l->capsync_frees) {
        l->capsync_frees = l->capsync_frees ? l->capsync_frees * 2 : 16;
        l->sync_frees = cairn_realloc(l->sync_frees, l->capsync_frees * sizeof *l->sync_frees);
    }
    l->sync_frees[l->nsync_frees++] = (sync_free_t){.bp = *bp, .txg = txg};
    pthread_mutex_unlock(&l->lock);
}

int spa_log_visit(spa_t *spa, spa_bp_visitor_t visit, void *arg)
{
    spa_log_t *l = log_of(spa);
    if (!l || cairn_bp_is_hole(&l->dir_bp)) return 0;
    int r = visit(spa, &l->dir_bp, NULL, arg);
    for (size_t i = 0; i < l->nlive_refs && r >= 0; i++) r = visit(spa, &l->live_refs[i], NULL, arg);
    return r < 0 ? r : 0;
}

void spa_log_add_region_refs(spa_t *spa, range_tree_t **referenced, spa_check_report_t *rep)
{
    spa_log_t *l = log_of(spa);
    if (!l) return;
    for (size_t i = 0; i < l->nregions; i++) {
        const logdir_region_phys_t *r = &l->regions[i];
        if (!spa_top_vdev(spa, r->vdev)) {
            rep->double_bytes += r->size;
            continue;
        }
        rep->bytes_referenced += r->size;
        uint64_t dup = range_tree_overlap_space(referenced[r->vdev], r->offset, r->size);
        rep->double_bytes += dup;
        if (dup) range_tree_clear(referenced[r->vdev], r->offset, r->size);
        range_tree_add(referenced[r->vdev], r->offset, r->size);
    }
}

/* ---------------- log blocks ---------------- */

static uint64_t dva_size(const cairn_dva_t *d) { return cairn_dva_asize(d); }

/* On raidz the allocated size includes parity: the data size is what fits. */
static uint64_t block_psize(vdev_t *top, const cairn_dva_t *d)
{
    uint64_t a = dva_size(d);
    if (top->type != VDEV_TYPE_RAIDZ) return a;
    uint64_t unit = 1ULL << top->ashift, p = unit;
    while (p + unit <= SPA_LOG_BLOCK_MAX && vdev_psize_to_asize(top, p + unit) <= a) p += unit;
    return p;
}

/* The writer packs up to this: counted from the allocated size, a raidz block
 * took records and references into its parity's share, and writing it zeroed
 * past the end of the buffer (a batch of 63 block pointers in a 12 KiB block). */
uint32_t spa_log_capacity(spa_t *spa, const cairn_dva_t *dva)
{
    vdev_t *top = log_top(spa, dva->vdev);
    uint64_t s = top ? block_psize(top, dva) : dva_size(dva);
    if (s > SPA_LOG_BLOCK_MAX) s = SPA_LOG_BLOCK_MAX;
    return s > SPA_LOG_BLOCK_FRAME ? (uint32_t)(s - SPA_LOG_BLOCK_FRAME) : 0;
}

static void release_deferred_locked(spa_t *spa, spa_log_t *l)
{
    CAIRN_ASSERT(cairn_mutex_held(&l->lock));
    uint64_t synced = spa_last_synced_txg(spa);
    if (synced == l->released_txg) return; /* nothing new became releasable */
    l->released_txg = synced;
    size_t keep = 0;
    for (size_t i = 0; i < l->ndeferred; i++) {
        log_deferred_t *d = &l->deferred[i];
        if (d->txg <= synced && d->dva.vdev < l->ntop && l->free[d->dva.vdev])
            range_tree_add(l->free[d->dva.vdev], d->dva.offset, dva_size(&d->dva));
        else
            l->deferred[keep++] = *d;
    }
    l->ndeferred = keep;
}

/* A block in the oldest chunk of the normal vdevs' region that has room:
 * blocks gather in the first chunks, so the ones a burst added drain when it
 * ends and can be given back (shrink_locked). */
static bool alloc_normal_locked(spa_t *spa, spa_log_t *l, uint64_t size, cairn_dva_t *out)
{
    CAIRN_ASSERT(cairn_mutex_held(&l->lock));
    for (size_t i = 0; i < l->nregions; i++) {
        const logdir_region_phys_t *r = &l->regions[i];
        uint32_t v = r->vdev;
        if (v >= l->ntop || !l->free[v] || spa_top_is_log(spa, v)) continue;
        if ((int32_t)v == atomic_load(&spa->removing)) continue;
        vdev_t *top = log_top(spa, v);
        if (!top || atomic_load(&top->state) == VDEV_STATE_FAULTED) continue;
        uint64_t asize = vdev_psize_to_asize(top, size), off;
        if (!range_tree_find_first(l->free[v], r->offset, asize, 1, &off) ||
            off + asize > r->offset + r->size)
            continue;
        range_tree_remove(l->free[v], off, asize);
        out->vdev = v;
        out->offset = off;
        out->asize = (uint32_t)(asize >> CAIRN_SECTOR_SHIFT);
        return true;
    }
    return false;
}

static int alloc_locked(spa_t *spa, spa_log_t *l, uint64_t size, cairn_dva_t *out)
{
    CAIRN_ASSERT(cairn_mutex_held(&l->lock));
    release_deferred_locked(spa, l);
    /* Log-class vdevs first; then the rest, oldest chunk first. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && alloc_normal_locked(spa, l, size, out)) return 0;
        for (uint32_t v = 0; v < l->ntop; v++) {
            if (!l->free[v] || spa_top_is_log(spa, v) != (pass == 0)) continue;
            if ((int32_t)v == atomic_load(&spa->removing)) continue; /* being emptied */
            vdev_t *top = log_top(spa, v);
            if (!top || atomic_load(&top->state) == VDEV_STATE_FAULTED) continue;
            uint64_t asize = vdev_psize_to_asize(top, size);
            uint64_t off;
            if (!range_tree_find_best(l->free[v], asize, 1, &off)) continue;
            range_tree_remove(l->free[v], off, asize);
            out->vdev = v;
            out->offset = off;
            out->asize = (uint32_t)(asize >> CAIRN_SECTOR_SHIFT);
            return 0;
        }
    }
    return -ENOSPC;
}

/* Reserves another chunk of the normal vdevs for the region: allocated in an
 * open txg (so the space map and the directory record it together), usable
 * once that txg is durable. */
static int region_grow(spa_t *spa, spa_log_t *l)
{
    if (spa->readonly) return -EROFS;
    spa_space_t sp;
    spa_get_space(spa, &sp);
    /* At most an eighth of the pool goes to the log. Only the chunks of normal
     * vdevs count: a log vdev being removed still holds its region meanwhile. */
    uint64_t normal = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < l->nregions; i++)
        if (!spa_top_is_log(spa, l->regions[i].vdev)) normal += l->regions[i].size;
    for (size_t i = 0; i < l->npend; i++)
        if (l->pend[i].kind == PEND_REGION && !spa_top_is_log(spa, l->pend[i].region.vdev))
            normal += l->pend[i].region.size;
    pthread_mutex_unlock(&l->lock);
    if (normal + LOG_REGION_MIN_CHUNK > sp.size / 8) return -ENOSPC;
    /* Doubles the region, from a small first chunk: an idle pool keeps little
     * (see shrink_locked), a busy one reaches full-size chunks quickly. */
    uint64_t want = CAIRN_MIN((uint64_t)LOG_REGION_CHUNK, CAIRN_MAX((uint64_t)LOG_REGION_MIN_CHUNK, normal));
    if (normal + want > sp.size / 8) want = sp.size / 8 - normal;
    uint64_t txg = spa_tx_hold_nowait(spa);
    int err = -ENOSPC;
    logdir_region_phys_t r = {0};
    for (uint64_t sz = want; sz >= LOG_REGION_MIN_CHUNK && err; sz /= 2) {
        for (uint32_t v = 0; v < spa->ntop && err; v++) {
            if (spa_top_is_log(spa, v)) continue;
            vdev_t *top = log_top(spa, v);
            if (!top || atomic_load(&top->state) == VDEV_STATE_FAULTED) continue;
            uint64_t unit = 1ULL << top->ashift;
            uint64_t asz = sz / unit * unit;
            uint64_t off;
            if (metaslab_alloc(spa->ms[v], txg, asz, &off) == 0) {
                atomic_fetch_add_explicit(&spa->space_claimed, asz, memory_order_relaxed);
                r.vdev = v;
                r.offset = off;
                r.size = asz;
                err = 0;
            }
        }
    }
    if (!err) {
        log_pending_t p = {.txg = txg, .kind = PEND_REGION, .region = r};
        pthread_mutex_lock(&l->lock);
        pend_push(l, &p);
        pthread_mutex_unlock(&l->lock);
    }
    spa_tx_rele(spa, txg);
    if (err) return err;
    err = spa_txg_wait_synced(spa, txg);
    if (err) return err;
    /* Before any log block can be allocated there: every sync operation waits
     * for its log write, which must not be the file system's allocation too. */
    (void)vdev_preallocate(log_top(spa, r.vdev), r.offset, r.size);
    pthread_mutex_lock(&l->lock);
    region_add_free(l, &r);
    pthread_mutex_unlock(&l->lock);
    log_info("spa", "pool %s: intent-log region grown by %llu bytes on vdev %u", spa->name,
             (unsigned long long)r.size, r.vdev);
    return 0;
}

/* Bytes of the region free now (l->lock held). */
static uint64_t region_free_locked(const spa_log_t *l)
{
    CAIRN_ASSERT(cairn_mutex_held(&l->lock));
    uint64_t bytes = 0;
    for (uint32_t v = 0; v < l->ntop; v++)
        if (l->free[v]) bytes += range_tree_space(l->free[v]);
    return bytes;
}

int spa_log_alloc(spa_t *spa, uint32_t size, cairn_dva_t *out)
{
    spa_log_t *l = log_of(spa);
    if (spa->readonly) return -EROFS;
    atomic_store(&l->last_use_ns, cairn_now_ns());
    atomic_store(&l->may_shrink, true);
    if (size > SPA_LOG_BLOCK_MAX) size = SPA_LOG_BLOCK_MAX;
    if (size < SPA_LOG_BLOCK_FRAME + 512) size = SPA_LOG_BLOCK_FRAME + 512;
    size = (uint32_t)CAIRN_P2ROUNDUP((uint64_t)size, 1ULL << spa->ashift);
    for (int attempt = 0; attempt < 3; attempt++) {
        pthread_mutex_lock(&l->lock);
        int err = alloc_locked(spa, l, size, out);
        bool have_deferred = l->ndeferred > 0;
        /* Blocks come back only through syncs (their records' txgs, then the
         * txg that frees them): ask for one while a quarter is left, rather than
         * let the region run out and every commit fall back to waiting for txgs. */
        bool low = !err && region_free_locked(l) < l->region_bytes / 4;
        pthread_mutex_unlock(&l->lock);
        if (low) spa_txg_kick(spa);
        if (!err) return 0;
        if (have_deferred && attempt == 0) {
            /* Blocks wait for a sync to come back: make one happen. */
            spa_txg_wait_synced(spa, 0);
            continue;
        }
        pthread_mutex_lock(&l->grow_lock);
        pthread_mutex_lock(&l->lock);
        err = alloc_locked(spa, l, size, out);
        pthread_mutex_unlock(&l->lock);
        if (!err) {
            pthread_mutex_unlock(&l->grow_lock);
            return 0;
        }
        err = region_grow(spa, l);
        pthread_mutex_unlock(&l->grow_lock);
        if (err) return err;
    }
    return -ENOSPC;
}

void spa_log_free(spa_t *spa, const cairn_dva_t *dva, uint64_t txg)
{
    spa_log_t *l = log_of(spa);
    if (!dva->asize) return;
    atomic_store(&l->last_use_ns, cairn_now_ns());
    atomic_store(&l->may_shrink, true);
    pthread_mutex_lock(&l->lock);
    if (l->ndeferred == l->capdeferred) {
        l->capdeferred = l->capdeferred ? l->capdeferred * 2 : 64;
        l->deferred = cairn_realloc(l->deferred, l->capdeferred * sizeof *l->deferred);
    }
    l->deferred[l->ndeferred++] = (log_deferred_t){.dva = *dva, .txg = txg};
    pthread_mutex_unlock(&l->lock);
}

/* The checksum of a block as laid out in buf (frame, then payload), computed
 * with the frame's checksum field zero; buf is restored. */
static void frame_checksum(uint8_t *buf, uint32_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    uint8_t saved[CAIRN_CHECKSUM_LEN];
    uint8_t *field = buf + offsetof(logblk_frame_t, cksum);
    memcpy(saved, field, sizeof saved);
    memset(field, 0, sizeof saved);
    cairn_checksum(CAIRN_CHECKSUM_XXHASH, buf, SPA_LOG_BLOCK_FRAME + (size_t)len, out);
    memcpy(field, saved, sizeof saved);
}

void *spa_log_block_alloc(void)
{
    void *b;
    if (posix_memalign(&b, CAIRN_IO_ALIGN, SPA_LOG_BLOCK_MAX)) abort();
    return b;
}

int spa_log_write_block(spa_t *spa, const cairn_dva_t *dva, uint64_t guid, uint64_t seq,
                        const cairn_dva_t *next, void *block, uint32_t len, uint32_t nrefs)
{
    vdev_t *top = log_top(spa, dva->vdev);
    uint64_t body = (uint64_t)len + (uint64_t)nrefs * sizeof(spa_log_ref_t);
    if (!top || body > spa_log_capacity(spa, dva)) return -EINVAL;
    uint64_t psize = block_psize(top, dva);
    uint64_t wlen = top->type == VDEV_TYPE_RAIDZ
                        ? psize
                        : CAIRN_P2ROUNDUP((uint64_t)SPA_LOG_BLOCK_FRAME + body, 1ULL << top->ashift);
    if (wlen > psize || wlen > SPA_LOG_BLOCK_MAX) return -EINVAL;
    uint8_t *buf = block;
    logblk_frame_t f = {.magic = LOGBLK_MAGIC, .guid = guid, .seq = seq, .len = len, .next = *next,
                        .nrefs = nrefs};
    memcpy(buf, &f, sizeof f);
    memset(buf + sizeof f + body, 0, wlen - sizeof f - body);
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    frame_checksum(buf, (uint32_t)body, ck);
    memcpy(buf + offsetof(logblk_frame_t, cksum), ck, sizeof ck);
    int err = vdev_write_block_now(top, dva->offset, buf, wlen);
    if (!err) atomic_fetch_add(&log_of(spa)->blocks_written, 1);
    return err;
}

static _Atomic bool test_hold_flush;
static _Atomic bool test_flush_held;

void spa_log_test_hold_flush(bool on) { atomic_store(&test_hold_flush, on); }
bool spa_log_test_flush_held(void) { return atomic_load(&test_flush_held); }

/* Flushes the vdevs in tops, or every top-level vdev (all), without the flush lock. */
static int flush_tops(spa_t *spa, const uint32_t *tops, size_t n, bool all)
{
    if (atomic_load(&test_hold_flush)) {
        atomic_store(&test_flush_held, true);
        while (atomic_load(&test_hold_flush)) usleep(1000);
        atomic_store(&test_flush_held, false);
    }
    int err = 0;
    if (all) n = __atomic_load_n(&spa->ntop, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++) {
        vdev_t *top = log_top(spa, all ? (uint32_t)i : tops[i]);
        if (!top) continue;
        int e = vdev_flush_now(top);
        if (e) err = e;
    }
    return err;
}

/* Group flush. A caller's blocks were written (their writes completed) before
 * it came here, so any flush of their vdevs that starts from now on makes
 * them durable: while one is in flight, callers queue their vdevs and the
 * next flush, started by whichever of them finds the device free, covers all
 * of them. Concurrent commits - of one log or of the logs of several object
 * sets, from many clients - then pay one flush per flush time instead of one
 * each: a flush of a file or a virtual disk costs a device cache flush and,
 * on a host file system, a journal commit, and ran in parallel with every
 * other (the ZIL's writers hand the writer role on before they flush). */
int spa_log_flush(spa_t *spa, const cairn_dva_t *dvas, size_t n, bool *issued)
{
    spa_log_t *l = log_of(spa);
    if (issued) *issued = false;
    pthread_mutex_lock(&l->flush_lock);
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; k < l->nflush_pend; k++) seen |= l->flush_pend[k] == dvas[i].vdev;
        if (seen) continue;
        if (l->nflush_pend < SPA_MAX_TOP) l->flush_pend[l->nflush_pend++] = dvas[i].vdev;
        else l->flush_pend_all = true;
    }
    const uint64_t mine = l->flush_started + 1; /* the first flush to start after this point */
    bool waited = false;
    while (l->flush_done < mine) {
        if (l->flushing) {
            waited = true;
            l->flush_waiters++;
            pthread_cond_wait(&l->flush_cv, &l->flush_lock);
            l->flush_waiters--;
            continue;
        }
        l->flushing = true;
        const uint64_t gen = ++l->flush_started;
        uint32_t tops[SPA_MAX_TOP];
        size_t ntops = l->nflush_pend;
        bool all = l->flush_pend_all;
        memcpy(tops, l->flush_pend, ntops * sizeof *tops);
        l->nflush_pend = 0;
        l->flush_pend_all = false;
        pthread_mutex_unlock(&l->flush_lock);
        int err = flush_tops(spa, tops, ntops, all);
        atomic_fetch_add(&l->flushes, 1);
        if (issued) *issued = true;
        pthread_mutex_lock(&l->flush_lock);
        l->flushing = false;
        l->flush_done = gen;
        if (err) {
            l->flush_failed_gen = gen;
            l->flush_failed_err = err;
        }
        pthread_cond_broadcast(&l->flush_cv);
    }
    /* A failure of a later generation is reported too (it may be this one's
     * own, overwritten): the caller then falls back to the txg, which is safe. */
    int err = l->flush_failed_gen >= mine ? l->flush_failed_err : 0;
    pthread_mutex_unlock(&l->flush_lock);
    if (waited) atomic_fetch_add(&l->flushes_shared, 1);
    return err;
}

typedef struct frame_check {
    uint64_t guid, seq;
    uint64_t psize;
} frame_check_t;

static bool frame_verify(const void *buf, uint64_t psize, void *arg)
{
    const frame_check_t *c = arg;
    logblk_frame_t f;
    memcpy(&f, buf, sizeof f);
    if (f.magic != LOGBLK_MAGIC || f.guid != c->guid || f.seq != c->seq) return false;
    uint64_t body = (uint64_t)f.len + (uint64_t)f.nrefs * sizeof(spa_log_ref_t);
    if (body + SPA_LOG_BLOCK_FRAME > psize) return false;
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    frame_checksum((uint8_t *)buf, (uint32_t)body, ck); /* the read buffer is ours: restored after */
    return memcmp(ck, f.cksum, CAIRN_CHECKSUM_LEN) == 0;
}

int spa_log_read(spa_t *spa, const cairn_dva_t *dva, uint64_t guid, uint64_t seq,
                 void **payload, uint32_t *len, cairn_dva_t *next)
{
    return spa_log_read_refs(spa, dva, guid, seq, payload, len, next, NULL, NULL);
}

int spa_log_read_refs(spa_t *spa, const cairn_dva_t *dva, uint64_t guid, uint64_t seq,
                      void **payload, uint32_t *len, cairn_dva_t *next, spa_log_ref_t **refs,
                      uint32_t *nrefs)
{
    vdev_t *top = log_top(spa, dva->vdev);
    if (!top || dva->asize == 0 || dva_size(dva) > 2 * SPA_LOG_BLOCK_MAX ||
        dva->offset + dva_size(dva) > top->asize)
        return -ENOENT;
    uint64_t psize = block_psize(top, dva);
    uint8_t *buf;
    if (posix_memalign((void **)&buf, CAIRN_IO_ALIGN, CAIRN_P2ROUNDUP(psize, (uint64_t)CAIRN_IO_ALIGN)))
        abort();
    frame_check_t c = {.guid = guid, .seq = seq, .psize = psize};
    /* Every chain ends at a block that does not verify (the unwritten
     * successor, a torn tail, a block reused by another chain): expected, so
     * speculative - only a copy that fails while another verifies is bad. */
    int e = vdev_read_block(top, dva->offset, buf, psize, frame_verify, &c,
                            VDEV_READ_SPECULATIVE | (spa->readonly ? VDEV_READ_NOREPAIR : 0),
                            NULL);
    if (e) {
        free(buf);
        return -ENOENT;
    }
    logblk_frame_t f;
    memcpy(&f, buf, sizeof f);
    *len = f.len;
    *next = f.next;
    *payload = cairn_zalloc(f.len ? f.len : 1);
    memcpy(*payload, buf + sizeof f, f.len);
    if (refs) {
        *nrefs = f.nrefs;
        *refs = cairn_zalloc((f.nrefs ? f.nrefs : 1) * sizeof **refs);
        memcpy(*refs, buf + sizeof f + f.len, f.nrefs * sizeof **refs);
    }
    free(buf);
    return 0;
}

void spa_log_get_stats(spa_t *spa, spa_log_stats_t *out)
{
    spa_log_t *l = log_of(spa);
    memset(out, 0, sizeof *out);
    if (!l) return;
    out->blocks_written = atomic_load(&l->blocks_written);
    out->flushes = atomic_load(&l->flushes);
    out->flushes_shared = atomic_load(&l->flushes_shared);
    pthread_mutex_lock(&l->flush_lock);
    out->flush_waiters = l->flush_waiters;
    pthread_mutex_unlock(&l->flush_lock);
    pthread_mutex_lock(&l->lock);
    out->region_bytes = l->region_bytes;
    out->chunks_dropped = atomic_load(&l->chunks_dropped);
    for (size_t i = 0; i < l->nregions; i++)
        if (!spa_top_is_log(spa, l->regions[i].vdev)) out->region_normal_bytes += l->regions[i].size;
    for (uint32_t v = 0; v < l->ntop; v++)
        if (l->free[v]) out->region_free += range_tree_space(l->free[v]);
    pthread_mutex_unlock(&l->lock);
}

/* ---------------- import ---------------- */

/* A block of a chain is in use: take it out of the free space. False when it
 * lies outside the region or was taken already (then the walk stops there). */
static bool take_block(spa_log_t *l, const cairn_dva_t *d)
{
    if (d->vdev >= l->ntop || !l->free[d->vdev] || !d->asize) return false;
    if (!range_tree_contains(l->free[d->vdev], d->offset, dva_size(d))) return false;
    range_tree_remove(l->free[d->vdev], d->offset, dva_size(d));
    return true;
}

static void live_ref_push(spa_log_t *l, const cairn_blkptr_t *bp)
{
    if (l->nlive_refs == l->caplive_refs) {
        l->caplive_refs = l->caplive_refs ? l->caplive_refs * 2 : 16;
        l->live_refs = cairn_realloc(l->live_refs, l->caplive_refs * sizeof *l->live_refs);
    }
    l->live_refs[l->nlive_refs++] = *bp;
}

/*
 * A block a log record points at (written directly, outside syncing context,
 * in the record's txg). Born in a txg that became durable, it is the object
 * tree's business (adopted or freed by that sync). Born later, its allocation
 * was lost with that txg: the first import claims it, allocating it in the
 * txg that also records claim_txg, so the claim and the header that says
 * "claimed" become durable together; the ZIL frees it once replay applied it
 * (or dropped it). A read-only import only notes the claimed, unreplayed ones
 * as referenced, for the check.
 */
static void claim_ref(spa_t *spa, spa_log_t *l, const spa_log_header_t *h, const spa_log_ref_t *r)
{
    const cairn_blkptr_t *bp = &r->bp;
    if (cairn_bp_is_hole(bp)) return;
    if (h->claim_txg) {
        if (spa->readonly && bp->birth_txg > h->claim_txg && r->seq > h->replay_seq)
            live_ref_push(l, bp);
        return;
    }
    if (spa->readonly || bp->birth_txg <= spa->ub.txg) return;
    for (int c = 0; c < bp->ncopies; c++) {
        const cairn_dva_t *dv = &bp->dva[c];
        if (!spa_top_vdev(spa, dv->vdev) || spa_top_is_log(spa, dv->vdev) ||
            metaslab_alloc_at(spa->ms[dv->vdev], spa->ub.txg + 1, dv->offset,
                              cairn_dva_asize(dv))) {
            log_error("spa", "pool %s: block of intent-log record %llu (vdev %u offset %llu) "
                      "cannot be claimed", spa->name, (unsigned long long)r->seq, dv->vdev,
                      (unsigned long long)dv->offset);
            continue;
        }
    }
    l->claimed_refs++;
}

int spa_log_load(spa_t *spa)
{
    spa_log_t *l = log_of(spa);
    spa->import_txg = spa->ub.txg;
    l->dir_bp = spa->ub.log_dir;
    if (!cairn_bp_is_hole(&l->dir_bp)) {
        if (l->dir_bp.type != CAIRN_BT_LOGDIR) return -EIO;
        uint8_t *buf = cairn_zalloc(l->dir_bp.lsize);
        int e = spa_block_read(spa, &l->dir_bp, buf);
        const logdir_phys_t *d = (const logdir_phys_t *)buf;
        if (!e && (d->magic != LOGDIR_MAGIC ||
                   sizeof *d + (uint64_t)d->nregions * sizeof(logdir_region_phys_t) +
                           (uint64_t)d->nents * sizeof(logdir_ent_phys_t) > l->dir_bp.lsize))
            e = -EIO;
        if (e) {
            free(buf);
            return e;
        }
        l->nregions = d->nregions;
        l->nents = d->nents;
        l->regions = cairn_zalloc((l->nregions + 1) * sizeof *l->regions);
        l->ents = cairn_zalloc((l->nents + 1) * sizeof *l->ents);
        memcpy(l->regions, buf + sizeof *d, l->nregions * sizeof *l->regions);
        memcpy(l->ents, buf + sizeof *d + l->nregions * sizeof *l->regions,
               l->nents * sizeof *l->ents);
        free(buf);
    }
    /* A region on a vdev beyond the tree or on a hole was on a log vdev removed in
     * a txg that did not become durable while the new labels did: it left with the
     * vdev. (Its id stays stale until the directory is rewritten without it.) */
    size_t kept = 0;
    for (size_t i = 0; i < l->nregions; i++) {
        uint32_t v = l->regions[i].vdev;
        if (spa_top_vdev(spa, v)) l->regions[kept++] = l->regions[i];
        else if (v < 32) spa->stale_ids |= 1U << v;
    }
    if (kept != l->nregions) l->dir_dirty = !spa->readonly;
    l->nregions = kept;
    for (size_t i = 0; i < l->nregions; i++) region_add_free(l, &l->regions[i]);
    /* Chunks a crash or an export left behind go back once the log idles. */
    atomic_store(&l->last_use_ns, cairn_now_ns());
    atomic_store(&l->may_shrink, l->nregions > 0);
    /* Walk every chain: its blocks stay allocated. */
    for (size_t i = 0; i < l->nents; i++) {
        logdir_ent_phys_t *ent = &l->ents[i];
        spa_log_header_t *h = &ent->h;
        if (!h->chain_guid) continue;
        cairn_dva_t d = h->head;
        uint64_t seq = h->head_seq;
        size_t nblocks = 0;
        while (take_block(l, &d)) {
            void *payload;
            uint32_t len, nrefs;
            cairn_dva_t next;
            spa_log_ref_t *refs;
            if (spa_log_read_refs(spa, &d, h->chain_guid, seq, &payload, &len, &next, &refs,
                                  &nrefs))
                break;
            free(payload);
            for (uint32_t k = 0; k < nrefs; k++) claim_ref(spa, l, h, &refs[k]);
            free(refs);
            nblocks++;
            d = next;
            seq++;
        }
        /* A chain with written blocks was cut short by a crash: remember which
         * txgs were durable then, so replay (perhaps after further crashes)
         * knows which records it must apply. */
        if (nblocks && !h->claim_txg && !spa->readonly) {
            log_pending_t p = {.txg = spa->ub.txg + 1, .kind = PEND_HEADER, .ent = *ent};
            p.ent.h.claim_txg = spa->ub.txg;
            pend_push(l, &p);
        }
        if (nblocks)
            log_info("spa", "pool %s: object set %llu has %zu intent-log block(s) to replay "
                     "(%llu directly written block(s) claimed so far)", spa->name,
                     (unsigned long long)ent->os_id, nblocks,
                     (unsigned long long)l->claimed_refs);
    }
    return 0;
}

bool spa_top_is_log(const spa_t *spa, uint32_t v)
{
    vdev_t *top = spa_top_slot(spa, v);   /* lock-free: a vdev add may be growing the array */
    return top && top->alloc_class == VDEV_CLASS_LOG;
}

/* ---------------- removing a log vdev (spa_vdev.c) ---------------- */

void spa_log_drop_vdev(spa_t *spa, uint32_t v)
{
    spa_log_t *l = log_of(spa);
    pthread_mutex_lock(&l->lock);
    size_t keep = 0;
    for (size_t i = 0; i < l->nregions; i++)
        if (l->regions[i].vdev != v) l->regions[keep++] = l->regions[i];
        else l->region_bytes -= l->regions[i].size;
    l->dir_dirty |= keep != l->nregions;
    l->nregions = keep;
    keep = 0;
    for (size_t i = 0; i < l->npend; i++)
        if (l->pend[i].kind != PEND_REGION || l->pend[i].region.vdev != v) l->pend[keep++] = l->pend[i];
        else l->region_bytes -= l->pend[i].region.size;
    l->npend = keep;
    keep = 0;
    for (size_t i = 0; i < l->ndeferred; i++)
        if (l->deferred[i].dva.vdev != v) l->deferred[keep++] = l->deferred[i];
    l->ndeferred = keep;
    if (v < l->ntop && l->free[v]) {
        range_tree_destroy(l->free[v]);
        l->free[v] = NULL;
    }
    pthread_mutex_unlock(&l->lock);
}

/* Whether the chain of h reaches vdev v: its blocks from the head, and the
 * pre-allocated successor where it ends. */
static bool chain_reaches(spa_t *spa, const spa_log_header_t *h, uint32_t v)
{
    cairn_dva_t d = h->head;
    uint64_t seq = h->head_seq;
    for (size_t n = 0; n < 1000000; n++) {
        if (d.asize && d.vdev == v) return true;
        void *payload;
        uint32_t len;
        cairn_dva_t next;
        if (spa_log_read(spa, &d, h->chain_guid, seq, &payload, &len, &next)) return false;
        free(payload);
        d = next;
        seq++;
    }
    return true;
}

int spa_log_vdev_in_use(spa_t *spa, uint32_t v, uint64_t *os_id)
{
    spa_log_t *l = log_of(spa);
    pthread_mutex_lock(&l->lock);
    size_t n = l->nents + l->npend;
    logdir_ent_phys_t *ents = cairn_zalloc((n ? n : 1) * sizeof *ents);
    size_t k = 0;
    for (size_t i = 0; i < l->nents; i++) ents[k++] = l->ents[i];
    for (size_t i = 0; i < l->npend; i++)
        if (l->pend[i].kind == PEND_HEADER) ents[k++] = l->pend[i].ent;
    pthread_mutex_unlock(&l->lock);
    int err = 0;
    for (size_t i = 0; i < k && !err; i++) {
        if (!ents[i].h.chain_guid || !chain_reaches(spa, &ents[i].h, v)) continue;
        *os_id = ents[i].os_id;
        err = -EBUSY;
    }
    free(ents);
    return err;
}

/* Bytes of log vdev v in live log blocks (for `pool iostat`). */
uint64_t spa_log_vdev_used(spa_t *spa, uint32_t v)
{
    spa_log_t *l = log_of(spa);
    uint64_t region = 0, freeb = 0;
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < l->nregions; i++)
        if (l->regions[i].vdev == v) region += l->regions[i].size;
    if (v < l->ntop && l->free[v]) freeb = range_tree_space(l->free[v]);
    for (size_t i = 0; i < l->ndeferred; i++) /* freed, or not yet usable */
        if (l->deferred[i].dva.vdev == v) freeb += dva_size(&l->deferred[i].dva);
    pthread_mutex_unlock(&l->lock);
    return region > freeb ? region - freeb : 0;
}
