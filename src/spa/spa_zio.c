/*
 * The block pipeline: how a buffer becomes a verified block on disk and back.
 *
 * Write (spa_block_write / spa_block_write_many, syncing context, many
 * threads at once):
 *   compress    - with the block's codec, into a buffer 12.5% smaller than the
 *                 logical size; if it does not fit, the block is stored raw
 *   checksum    - of the stored bytes, into the block pointer
 *   allocate    - `copies` DVAs, on distinct top-level vdevs where the pool
 *                 has them (ditto blocks), metadata always at least two
 *   issue       - vdev_write_blocks() for each copy of the whole batch, per
 *                 top-level vdev: the blocks were allocated back to back, so
 *                 the vdev layer merges their pieces on each leaf into large
 *                 writes (mirror sides, raidz columns and parity in parallel)
 * The DMU dispatches one batch (up to 1 MiB of one object's records) per task
 * on its sync workers, so compression, checksums and parity use every core.
 *
 * Read (spa_block_read, any context): each DVA in turn is read through its
 * top-level vdev with a verify callback that checks the pointer's checksum.
 * The vdev layer itself tries the other mirror sides or raidz reconstruction
 * and repairs what lied; if a whole copy is bad the next DVA is tried and the
 * bad copy is rewritten from the good one. Then the data is decompressed. A
 * block of at least SPA_ARC_ADOPT_MIN that the ARC will keep is read into a
 * buffer the ARC then adopts as the block's stored copy (no copy into the
 * ARC); smaller ones use a per-thread scratch buffer and are copied, since
 * the adopted buffer's alignment costs a page of memory per block. Likewise a
 * written block stored raw from a buffer the caller holds by reference
 * (spa_block_write_many_held: the DMU's records) is cached as that buffer,
 * not as a copy; a compressed one hands that buffer to the ARC as the block's
 * logical bytes, kept until the first read if the ARC has room.
 *
 * Placement across top-level vdevs: a rotor stays on one vdev for a run of
 * bytes proportional to its share of the pool's free space, then moves on, so
 * vdevs fill evenly and a sequential stream lands in contiguous extents.
 */
#include "spa_impl.h"

#include <cairn/arc.h>
#include <stdlib.h>
#include <string.h>

#define SPA_ROTOR_CHUNK (4 * CAIRN_MIB)
/* Blocks read straight into the buffer the ARC keeps: from here the page of
 * alignment such a buffer costs is at most 1/16 of the block. */
#define SPA_ARC_ADOPT_MIN (64u * 1024)

/*
 * I/O bounce buffers. A fresh aligned allocation per block costs an mmap,
 * a page-zeroing fault per page and an munmap at these sizes; keeping one
 * buffer per thread and role removes that from the hot path. The pipeline's
 * threads are long-lived task queue workers, so the buffers are few.
 */
enum { ZBUF_READ = 0, ZBUF_SCRUB = 1, ZBUF_RUN = 2, ZBUF_WRITE = 3, ZBUF_ROLES = 4 };
/* A write batch's compressed blocks share one such buffer when they fit in
 * this much (a txg's sync batches are 1 MiB of records); a bigger batch, a
 * block of many MiB, gets a buffer per block, not kept. */
#define SPA_WRITE_SLAB_MAX (2u * CAIRN_MIB)
typedef struct zbuf_slot {
    void *buf;
    size_t cap;
} zbuf_slot_t;

static pthread_key_t zbuf_key;
static pthread_once_t zbuf_once = PTHREAD_ONCE_INIT;

static void zbuf_free_slots(void *p)
{
    zbuf_slot_t *slots = p;
    for (int i = 0; i < ZBUF_ROLES; i++) free(slots[i].buf);
    free(slots);
}

static void zbuf_init(void) { pthread_key_create(&zbuf_key, zbuf_free_slots); }

/* An aligned buffer of at least size bytes, contents undefined, owned by this thread. */
static void *zbuf_get(int role, size_t size)
{
    pthread_once(&zbuf_once, zbuf_init);
    zbuf_slot_t *slots = pthread_getspecific(zbuf_key);
    if (!slots) {
        slots = cairn_zalloc(sizeof(zbuf_slot_t) * ZBUF_ROLES);
        pthread_setspecific(zbuf_key, slots);
    }
    zbuf_slot_t *z = &slots[role];
    if (z->cap < size) {
        free(z->buf);
        z->cap = CAIRN_P2ROUNDUP(size, (size_t)CAIRN_IO_ALIGN);
        if (posix_memalign(&z->buf, CAIRN_IO_ALIGN, z->cap)) abort();
    }
    return z->buf;
}

static bool io_aligned(const void *p, size_t len, uint32_t ashift)
{
    return CAIRN_IS_P2ALIGNED((uintptr_t)p, (uintptr_t)CAIRN_IO_ALIGN) &&
           CAIRN_IS_P2ALIGNED(len, (size_t)1 << ashift);
}

bool spa_bp_verify(const cairn_blkptr_t *bp, const void *data)
{
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    if (bp->checksum == CAIRN_CHECKSUM_NONE || bp->checksum >= CAIRN_CHECKSUM_COUNT) return false;
    cairn_checksum((cairn_checksum_t)bp->checksum, data, bp->psize, ck);
    return memcmp(ck, bp->cksum, CAIRN_CHECKSUM_LEN) == 0;
}

bool spa_bp_verify_cb(const void *buf, uint64_t psize, void *arg)
{
    const cairn_blkptr_t *bp = arg;
    return psize == bp->psize && spa_bp_verify(bp, buf);
}

/* Picks the top-level vdev for the next allocation (see the rotor above). */
static uint64_t ms_free(metaslab_t *ms)
{
    if (!ms) return 0; /* a hole */
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    return st.free;
}

static uint32_t spa_pick_vdev(spa_t *spa, uint64_t asize_hint, uint32_t avoid_mask)
{
    pthread_mutex_lock(&spa->rotor_lock);
    uint64_t total_free = 0;
    for (uint32_t i = 0; i < spa->ntop; i++)
        if (!spa_top_is_log(spa, i)) total_free += ms_free(spa->ms[i]);
    uint32_t v = spa->rotor % spa->ntop;
    uint64_t share = total_free ? (uint64_t)((double)SPA_ROTOR_CHUNK * spa->ntop *
                                             ((double)ms_free(spa->ms[v]) / (double)total_free))
                                : SPA_ROTOR_CHUNK;
    if (spa->rotor_bytes >= share) {
        spa->rotor = (spa->rotor + 1) % spa->ntop;
        spa->rotor_bytes = 0;
        v = spa->rotor;
    }
    /* Ditto copies go elsewhere when possible. */
    for (uint32_t k = 0; k < spa->ntop && (avoid_mask & (1U << (v % 32))); k++)
        v = (v + 1) % spa->ntop;
    spa->rotor_bytes += asize_hint;
    pthread_mutex_unlock(&spa->rotor_lock);
    return v;
}

static vdev_t *spa_top(spa_t *spa, uint32_t id) { return spa_top_vdev(spa, id); }

int spa_alloc_dvas(spa_t *spa, uint64_t txg, uint64_t psize, int copies, cairn_dva_t *dvas)
{
    uint32_t used = 0;
    for (int c = 0; c < copies; c++) {
        int err = -ENOSPC;
        /* Try each vdev once, starting at the rotor's choice. */
        uint32_t first = spa_pick_vdev(spa, 0, c ? used : 0);
        for (uint32_t k = 0; k < spa->ntop && err; k++) {
            uint32_t v = (first + k) % spa->ntop;
            vdev_t *top = spa_top(spa, v);
            if (!top || atomic_load(&top->state) == VDEV_STATE_FAULTED) continue;
            if (spa_top_is_log(spa, v)) continue; /* the intent log's alone */
            uint64_t asize = vdev_psize_to_asize(top, psize);
            uint64_t off;
            int e = metaslab_alloc(spa->ms[v], txg, asize, &off);
            if (e) { err = e; continue; }
            dvas[c].vdev = v;
            dvas[c].offset = (uint64_t)off;
            dvas[c].asize = (uint32_t)(asize >> CAIRN_SECTOR_SHIFT);
            atomic_fetch_add_explicit(&spa->space_claimed, asize, memory_order_relaxed);
            used |= 1U << (v % 32);
            pthread_mutex_lock(&spa->rotor_lock);
            spa->rotor_bytes += asize;
            pthread_mutex_unlock(&spa->rotor_lock);
            err = 0;
        }
        if (err) {
            for (int u = 0; u < c; u++)
                metaslab_unalloc(spa->ms[dvas[u].vdev], txg, dvas[u].offset, cairn_dva_asize(&dvas[u]));
            return err;
        }
    }
    return 0;
}

int spa_write_dvas(spa_t *spa, const cairn_dva_t *dvas, int n, const void *buf, uint64_t psize)
{
    int ok = 0, err = 0;
    for (int c = 0; c < n; c++) {
        vdev_t *top = spa_top(spa, dvas[c].vdev);
        int e = top ? vdev_write_block(top, dvas[c].offset, buf, psize) : -ENXIO;
        if (e) err = e; else ok++;
    }
    return ok ? 0 : err;
}

/* The room block_prepare needs for a block of lsize bytes. */
static size_t block_out_cap(const spa_t *spa, uint32_t lsize)
{
    size_t cap = CAIRN_P2ROUNDUP((size_t)lsize, (size_t)1 << spa->ashift);
    return CAIRN_P2ROUNDUP(cap, (size_t)CAIRN_IO_ALIGN);
}

/* block_prepare's output buffer: the caller's scratch, else one of its own. */
static uint8_t *block_out(const spa_t *spa, uint32_t lsize, uint8_t *scratch)
{
    void *p = scratch;
    if (!p && posix_memalign(&p, CAIRN_IO_ALIGN, block_out_cap(spa, lsize))) abort();
    return p;
}

/*
 * The first half of the write pipeline for one block: compress (into scratch,
 * block_out_cap() bytes the caller keeps until the block is written, or when
 * scratch is NULL into *owned, allocated here, when compression pays) and
 * checksum; bp gets everything but its DVAs (ncopies says how many to
 * allocate). *stored is what must go to the devices: the caller's data when
 * the block is stored raw and the devices can take that buffer as it is.
 */
static void block_prepare(spa_t *spa, uint64_t txg, const void *data, uint32_t lsize,
                         const spa_write_props_t *props, cairn_blkptr_t *bp, uint8_t *scratch,
                         uint8_t **owned, const uint8_t **stored)
{
    memset(bp, 0, sizeof *bp);
    *owned = NULL;
    uint32_t psize = 0;
    cairn_compress_t comp = props->compress;
    uint8_t *out = NULL;
    if (comp != CAIRN_COMPRESS_OFF) {
        out = block_out(spa, lsize, scratch);
        size_t want = lsize - lsize / 8; /* keep only if it saves >= 12.5% */
        size_t c = cairn_compress(comp, data, lsize, out, want);
        if (c > 0 && c <= want) psize = (uint32_t)c;
    }
    if (!psize) {
        comp = CAIRN_COMPRESS_OFF;
        psize = lsize;
        if (io_aligned(data, lsize, spa->ashift)) {
            /* Stored raw: written straight from the caller's buffer. */
            if (out != scratch) free(out);
            out = NULL;
            *stored = data;
        } else {
            if (!out) out = block_out(spa, lsize, scratch);
            memcpy(out, data, lsize);
        }
    }
    if (out) {
        /* The devices take psize rounded up to a sector (raidz copies psize and
         * pads itself), so only that padding reaches a disk and gets zeroed, not
         * stale memory; nothing reads past it. Zeroing up to cap cleared most of
         * an 8 KiB record that compressed to a few hundred bytes: 7% of the CPU
         * of 128 KiB volume writes. */
        memset(out + psize, 0, CAIRN_P2ROUNDUP((size_t)psize, (size_t)1 << spa->ashift) - psize);
        if (out != scratch) *owned = out;
        *stored = out;
    }

    int copies = props->copies ? props->copies : 1;
    /* Metadata gets ditto copies; a ZAP's records (directories) keep the
     * copies of their object, like file data. */
    if (props->type != CAIRN_BT_DATA && props->type != CAIRN_BT_ZAP && copies < 2) copies = 2;
    if (copies > CAIRN_MAX_COPIES) copies = CAIRN_MAX_COPIES;
    bp->type = (uint8_t)props->type;
    bp->level = props->level;
    bp->checksum = (uint8_t)props->checksum;
    bp->compress = (uint8_t)comp;
    bp->lsize = lsize;
    bp->psize = psize;
    bp->birth_txg = txg;
    bp->fill = 1;
    cairn_checksum(props->checksum, *stored, psize, bp->cksum);
    bp->ncopies = (uint8_t)copies;
}

static void block_unalloc(spa_t *spa, uint64_t txg, cairn_blkptr_t *bp)
{
    for (int c = 0; c < bp->ncopies; c++)
        metaslab_unalloc(spa->ms[bp->dva[c].vdev], txg, bp->dva[c].offset,
                         cairn_dva_asize(&bp->dva[c]));
    memset(bp, 0, sizeof *bp);
}

static int write_many(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                      cairn_rbuf_t *const *holders, const uint32_t *lsizes,
                      const spa_write_props_t *props, cairn_blkptr_t *bps, bool may_gang);

int spa_block_write(spa_t *spa, uint64_t txg, const void *data, uint32_t lsize,
                    const spa_write_props_t *props, cairn_blkptr_t *bp)
{
    return write_many(spa, txg, 1, &data, NULL, &lsize, props, bp, true);
}

/* Nothing in the pipeline is tied to the syncing thread: the allocator records
 * the allocation under txg, which the caller holds open, so it reaches the
 * space map log with that txg (and a condense of an older txg leaves it out).
 * Never a gang block: the intent log then carries the data itself. */
int spa_block_write_open(spa_t *spa, uint64_t txg, const void *data, uint32_t lsize,
                         const spa_write_props_t *props, cairn_blkptr_t *bp)
{
    return write_many(spa, txg, 1, &data, NULL, &lsize, props, bp, false);
}

int spa_block_write_many_open(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                              cairn_rbuf_t *const *holders, const uint32_t *lsizes,
                              const spa_write_props_t *props, cairn_blkptr_t *bps)
{
    return write_many(spa, txg, n, datas, holders, lsizes, props, bps, false);
}

int spa_blocks_flush(spa_t *spa, const cairn_blkptr_t *bps, size_t n)
{
    uint64_t done[(SPACEMAP_MAX_VDEVS + 63) / 64] = {0};
    int err = 0;
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < bps[i].ncopies; c++) {
            uint32_t v = bps[i].dva[c].vdev;
            vdev_t *top = spa_top(spa, v);
            if (!top || v >= SPACEMAP_MAX_VDEVS || (done[v / 64] >> (v % 64) & 1)) continue;
            done[v / 64] |= 1ULL << (v % 64);
            int e = vdev_flush(top);
            if (e) err = e;
        }
    }
    return err;
}

int spa_block_write_many(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                         const uint32_t *lsizes, const spa_write_props_t *props,
                         cairn_blkptr_t *bps)
{
    return write_many(spa, txg, n, datas, NULL, lsizes, props, bps, true);
}

int spa_block_write_many_held(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                              cairn_rbuf_t *const *holders, const uint32_t *lsizes,
                              const spa_write_props_t *props, cairn_blkptr_t *bps)
{
    return write_many(spa, txg, n, datas, holders, lsizes, props, bps, true);
}

static int write_many(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                      cairn_rbuf_t *const *holders, const uint32_t *lsizes,
                      const spa_write_props_t *props, cairn_blkptr_t *bps, bool may_gang)
{
    if (spa->readonly) return -EROFS;
    for (size_t i = 0; i < n; i++)
        if (lsizes[i] == 0 || lsizes[i] > 16 * CAIRN_MIB) return -EINVAL;
    uint8_t **owned = cairn_zalloc(n * sizeof *owned);
    const uint8_t **stored = cairn_zalloc(n * sizeof *stored);
    int err = 0;
    /* Compressed blocks go to one buffer this thread keeps, cut in pieces,
     * rather than to an allocation each: a sync batch of 8 KiB records asked
     * malloc for 128 aligned buffers and gave them back (6% of the CPU of
     * 128 KiB volume writes went to malloc's chunk lists). */
    size_t slab_bytes = 0;
    for (size_t i = 0; i < n; i++) slab_bytes += block_out_cap(spa, lsizes[i]);
#if defined(__SANITIZE_ADDRESS__)
    uint8_t *slab = NULL; /* a block of its own each, so an overrun of one is seen */
#else
    uint8_t *slab = slab_bytes <= SPA_WRITE_SLAB_MAX ? zbuf_get(ZBUF_WRITE, slab_bytes) : NULL;
#endif
    for (size_t i = 0, at = 0; i < n; i++) {
        block_prepare(spa, txg, datas[i], lsizes[i], props, &bps[i], slab ? slab + at : NULL,
                      &owned[i], &stored[i]);
        at += block_out_cap(spa, lsizes[i]);
    }
    /* Allocated together, once sizes are known: the batch's blocks end to end. */
    /* A block no free extent holds whole is stored in fragments (spa_gang.c). */
    size_t prepared = 0;
    spa_gang_t **gangs = cairn_zalloc(n * sizeof *gangs);
    pthread_mutex_lock(&spa->batch_alloc_lock);
    for (; prepared < n && !err; prepared++) {
        cairn_blkptr_t *bp = &bps[prepared];
        err = spa_alloc_dvas(spa, txg, bp->psize, bp->ncopies, bp->dva);
        if (err == -ENOSPC && may_gang)
            err = spa_gang_alloc(spa, txg, bp, stored[prepared], &gangs[prepared]);
    }
    pthread_mutex_unlock(&spa->batch_alloc_lock);
    if (err) {
        prepared--; /* the failed one allocated nothing */
        for (size_t i = prepared; i < n; i++) memset(&bps[i], 0, sizeof bps[i]);
    }

    /* Issue copy c of every block, grouped by top-level vdev, as one aggregated call. */
    int *copies_ok = cairn_zalloc(n * sizeof *copies_ok);
    vdev_block_write_t *grp = cairn_zalloc((n ? n : 1) * sizeof *grp);
    size_t *gidx = cairn_zalloc((n ? n : 1) * sizeof *gidx);
    for (int c = 0; c < CAIRN_MAX_COPIES && !err; c++) {
        for (uint32_t v = 0; v < spa->ntop; v++) {
            size_t k = 0;
            for (size_t i = 0; i < prepared; i++) {
                if (gangs[i] || bps[i].ncopies <= c || bps[i].dva[c].vdev != v) continue;
                gidx[k] = i;
                grp[k++] = (vdev_block_write_t){.offset = bps[i].dva[c].offset,
                                                .buf = stored[i], .psize = bps[i].psize};
            }
            if (!k) continue;
            vdev_write_blocks(spa_top(spa, v), grp, k);
            for (size_t j = 0; j < k; j++) if (grp[j].error == 0) copies_ok[gidx[j]]++;
        }
    }
    for (size_t i = 0; i < prepared && !err; i++)
        if (gangs[i]) copies_ok[i] = spa_gang_write(spa, &bps[i], gangs[i], stored[i]) == 0;
    for (size_t i = 0; i < prepared && !err; i++)
        if (!copies_ok[i]) err = -EIO; /* no copy of it reached a device */
    if (err)
        for (size_t i = 0; i < prepared; i++) {
            if (gangs[i]) spa_gang_unalloc(spa, txg, &bps[i], gangs[i]);
            else block_unalloc(spa, txg, &bps[i]);
            memset(&bps[i], 0, sizeof bps[i]);
        }
    else if (props->cache) {
        /* A block stored raw from a holder's buffer is cached as that buffer:
         * the bytes the devices got and the checksum covers, never written
         * again (the holder's contract), so nothing is copied. */
        /* A compressed one offers the holder's buffer as its logical bytes,
         * which the ARC may keep for a read right after the write. */
        cairn_rbuf_t **adopt = NULL, **logical = NULL;
        for (size_t i = 0; holders && i < n; i++) {
            if (!holders[i]) continue;
            bool raw = (const void *)stored[i] == datas[i];
            cairn_rbuf_t ***to = raw ? &adopt : &logical;
            if (!*to) *to = cairn_zalloc(n * sizeof **to);
            (*to)[i] = cairn_rbuf_hold(holders[i]);
        }
        arc_insert_unread_many(spa->guid, bps, (const void *const *)stored, adopt, logical, n,
                               props->cache_policy);
        free(adopt);
        free(logical);
    }
    for (size_t i = 0; i < n; i++) {
        free(owned[i]);
        spa_gang_destroy(gangs[i]);
    }
    free(gangs);
    free(owned);
    free(stored);
    free(copies_ok);
    free(grp);
    free(gidx);
    return err;
}

/* Memory-only mode (spa.h): per thread, so other threads' reads are unaffected. */
static _Thread_local bool memory_only, memory_only_refused;

void spa_memory_only_begin(void)
{
    memory_only = true;
    memory_only_refused = false;
}

bool spa_memory_only_end(void)
{
    memory_only = false;
    return memory_only_refused;
}

bool spa_memory_only_refused(void) { return memory_only && memory_only_refused; }

bool spa_memory_only_pause(void)
{
    bool was = memory_only;
    memory_only = false;
    return was;
}

void spa_memory_only_resume(bool was_on) { memory_only = was_on; }

bool spa_memory_only_active(void) { return memory_only; }

int spa_memory_only_refuse(void)
{
    if (!memory_only) return 0;
    memory_only_refused = true;
    return -EWOULDBLOCK;
}

int spa_read_copies(spa_t *spa, const cairn_dva_t *dvas, int n, uint64_t psize, void *raw,
                    vdev_verify_fn verify, void *arg, int vflags, uint64_t *repaired)
{
    int err = -EIO;
    int good = -1;
    bool bad[CAIRN_MAX_COPIES] = {false};
    size_t cap = CAIRN_P2ROUNDUP((size_t)psize, (size_t)1 << spa->ashift);
    for (int c = 0; c < n && c < CAIRN_MAX_COPIES; c++) {
        vdev_t *top = spa_top(spa, dvas[c].vdev);
        if (!top || dvas[c].offset + cairn_dva_asize(&dvas[c]) > top->asize) continue;
        vdev_read_result_t res = {0};
        int e;
        if (good >= 0 && !(vflags & (VDEV_READ_SCRUB | VDEV_READ_RESILVER))) break;
        /* Scrub: verify the other copies too, into a scratch buffer; resilver:
         * each copy's vdev may have stale leaves to write. */
        void *into = good >= 0 ? zbuf_get(ZBUF_SCRUB, cap) : raw;
        e = vdev_read_block(top, dvas[c].offset, into, psize, verify, arg, vflags, &res);
        if (repaired) *repaired += res.repaired_bytes;
        if (e == 0) {
            if (good < 0) good = c;
        } else {
            bad[c] = true;
            err = e;
        }
    }
    if (good < 0) return err == 0 ? -EIO : err;
    /* A whole copy failed while another verified: rewrite it from the good one. */
    if (!(vflags & VDEV_READ_NOREPAIR)) {
        for (int c = 0; c < n && c < CAIRN_MAX_COPIES; c++) {
            if (!bad[c]) continue;
            vdev_t *top = spa_top(spa, dvas[c].vdev);
            if (vdev_write_block(top, dvas[c].offset, raw, psize) == 0 && repaired)
                *repaired += psize;
        }
    }
    return 0;
}

/* buf NULL: read ahead, i.e. only bring the verified block into the ARC. */
static int block_read_impl(spa_t *spa, const cairn_blkptr_t *bp, void *buf, int vflags,
                           uint64_t *repaired, uint8_t cache_policy)
{
    if (cairn_bp_is_hole(bp)) {
        if (buf) memset(buf, 0, bp->lsize);
        return 0;
    }
    if (bp->ncopies > CAIRN_MAX_COPIES || bp->psize == 0 || bp->psize > bp->lsize ||
        bp->compress >= CAIRN_COMPRESS_COUNT)
        return -EINVAL;
    if (memory_only) {
        /* No device, not even a cache device: memory or nothing. */
        bool hit = cache_policy != ARC_POLICY_BYPASS &&
                   (buf ? arc_lookup_memory(spa->guid, bp, 0, bp->lsize, buf, cache_policy) == 0
                        : arc_cached(spa->guid, bp));
        return hit ? 0 : spa_memory_only_refuse();
    }
    /* ---- ARC (src/arc): a hit is served from memory or a cache device ---- */
    if (cache_policy != ARC_POLICY_BYPASS) {
        /* A read ahead has no buffer to copy a hit into: it asks whether the block
         * is in memory (a reader may have cached it since the caller looked) or on
         * a cache device, and never counts as a hit or promotes the block. */
        if (!buf ? arc_prefetch(spa->guid, bp, cache_policy) == 0
                 : arc_lookup(spa->guid, bp, buf, cache_policy) == 0)
            return 0;
    }
    if (spa->readonly) vflags |= VDEV_READ_NOREPAIR;
    if (!(vflags & (VDEV_READ_SCRUB | VDEV_READ_RESILVER))) spa_client_io(spa);
    /* A read-ahead's thread only waits for its block: read it in that thread
     * (VDEV_READ_NOW), sparing the ring's completion thread two wake-ups per
     * block - most of a cold stream's context switches. */
    if (!buf) vflags |= VDEV_READ_NOW;
    size_t cap = CAIRN_P2ROUNDUP((size_t)bp->psize, (size_t)1 << spa->ashift);
    /* Uncompressed into a suitable buffer: read in place, no bounce copy. */
    bool direct = buf && bp->compress == CAIRN_COMPRESS_OFF && bp->psize == bp->lsize &&
                  io_aligned(buf, bp->psize, spa->ashift);
    /* A large block the ARC will keep is read into a buffer it adopts once
     * verified, instead of a scratch buffer it would copy (cold reads and
     * read-ahead paid that copy for every block). */
    cairn_rbuf_t *keep = NULL;
    if (!direct && bp->psize >= SPA_ARC_ADOPT_MIN && cache_policy != ARC_POLICY_BYPASS &&
        arc_policy_allows(ARC_POLICY_PRIMARY(cache_policy), bp->type))
        keep = cairn_rbuf_new_aligned(bp->psize, cap);
    uint8_t *raw = direct ? buf : keep ? keep->data : zbuf_get(ZBUF_READ, cap);
    int err = cairn_bp_is_gang(bp) ? spa_gang_read(spa, bp, raw, vflags, repaired)
                                   : spa_read_copies(spa, bp->dva, bp->ncopies, bp->psize, raw,
                                                     spa_bp_verify_cb, (void *)bp, vflags, repaired);
    if (err) {
        atomic_fetch_add(&spa->data_errors, 1);
        cairn_rbuf_rele(keep);
        return err;
    }
    err = 0;
    if (!buf) {
        /* Read ahead: verified, cached as stored; the reader decompresses it
         * once, from the ARC (a block that then fails to decompress fails
         * the reader's arc_lookup, so its read goes to the disks and reports
         * the error). */
    } else if (bp->compress == CAIRN_COMPRESS_OFF) {
        if (!direct) memcpy(buf, raw, bp->lsize);
    } else {
        err = cairn_decompress((cairn_compress_t)bp->compress, raw, bp->psize, buf, bp->lsize);
        if (err) atomic_fetch_add(&spa->data_errors, 1);
    }
    /* ---- ARC: keep the verified block as stored ---- */
    if (keep && !err) {
        arc_insert_adopt(spa->guid, bp, keep, cache_policy, !buf);
    } else if (keep) {
        cairn_rbuf_rele(keep);
    } else if (!err && cache_policy != ARC_POLICY_BYPASS) {
        if (buf) arc_insert_stored(spa->guid, bp, raw, cache_policy);
        else arc_insert_unread(spa->guid, bp, raw, cache_policy);
    }
    return err;
}

/* Scrub, import and the offline check read the disks, never the cache. */
int spa_block_read_flags(spa_t *spa, const cairn_blkptr_t *bp, void *buf, int vflags,
                         uint64_t *repaired)
{
    bool uncached =
        spa->readonly || (vflags & (VDEV_READ_SCRUB | VDEV_READ_NOREPAIR | VDEV_READ_RESILVER));
    return block_read_impl(spa, bp, buf, vflags, repaired,
                           uncached ? ARC_POLICY_BYPASS : ARC_POLICY_DEFAULT);
}

int spa_block_read(spa_t *spa, const cairn_blkptr_t *bp, void *buf)
{
    return spa_block_read_flags(spa, bp, buf, 0, NULL);
}

int spa_block_read_cached(spa_t *spa, const cairn_blkptr_t *bp, void *buf, uint8_t cache_policy)
{
    return block_read_impl(spa, bp, buf, 0, NULL, spa->readonly ? ARC_POLICY_BYPASS : cache_policy);
}

int spa_block_prefetch(spa_t *spa, const cairn_blkptr_t *bp, uint8_t cache_policy)
{
    if (cairn_bp_is_hole(bp) || spa->readonly || cache_policy == ARC_POLICY_BYPASS) return 0;
    /* Cached already (block_read_impl asks arc_prefetch): a read ahead must
     * neither count as a hit nor promote the block to the MFU, or every streamed
     * block would look hot. */
    return block_read_impl(spa, bp, NULL, 0, NULL, cache_policy);
}

/* Blocks read ahead together when they lie end to end: up to this many bytes per read. */
#define SPA_RUN_MAX_BYTES (2 * CAIRN_MIB)
#define SPA_RUN_MAX_BLOCKS 64

/* Where a block read ahead in a run lies: its one copy, on a mirror or leaf. */
static vdev_t *run_top(spa_t *spa, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp) || cairn_bp_is_gang(bp) || bp->ncopies != 1 || bp->psize == 0 ||
        bp->psize > bp->lsize ||
        bp->compress >= CAIRN_COMPRESS_COUNT)
        return NULL;
    vdev_t *top = spa_top(spa, bp->dva[0].vdev);
    if (!top || (top->type != VDEV_TYPE_LEAF && top->type != VDEV_TYPE_MIRROR)) return NULL;
    uint64_t asize = cairn_dva_asize(&bp->dva[0]);
    if (asize != vdev_psize_to_asize(top, bp->psize) || bp->dva[0].offset + asize > top->asize)
        return NULL;
    return top;
}

/* Reads bps[0..n) (end to end on top) with one vectored read and hands each
 * verified block to the ARC. The rest go through block_read_impl: all of them
 * if the read failed; a block that did not verify as a scrub read, which reads
 * every side and so also repairs (and charges) the one that lied here - a
 * plain read might start at a good side and never look at it. */
static void prefetch_run(spa_t *spa, vdev_t *top, const cairn_blkptr_t *bps, size_t n,
                         uint8_t policy)
{
    struct iovec iov[SPA_RUN_MAX_BLOCKS];
    cairn_rbuf_t *keep[SPA_RUN_MAX_BLOCKS];
    size_t small = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t asize = cairn_dva_asize(&bps[i].dva[0]);
        keep[i] = bps[i].psize >= SPA_ARC_ADOPT_MIN ? cairn_rbuf_new_aligned(bps[i].psize, asize)
                                                    : NULL;
        if (!keep[i]) small += asize;
        iov[i].iov_len = asize;
    }
    /* Small blocks share a scratch buffer and are copied into the ARC, as in
     * block_read_impl (an adopted buffer would cost a page of alignment each). */
    uint8_t *scratch = small ? zbuf_get(ZBUF_RUN, small) : NULL;
    for (size_t i = 0, pos = 0; i < n; i++) {
        if (keep[i]) {
            iov[i].iov_base = keep[i]->data;
        } else {
            iov[i].iov_base = scratch + pos;
            pos += iov[i].iov_len;
        }
    }
    int err = vdev_read_run_now(top, bps[0].dva[0].offset, iov, (int)n);
    for (size_t i = 0; i < n; i++) {
        if (!err && spa_bp_verify_cb(iov[i].iov_base, bps[i].psize, (void *)&bps[i])) {
            if (keep[i]) arc_insert_adopt(spa->guid, &bps[i], keep[i], policy, true);
            else arc_insert_unread(spa->guid, &bps[i], iov[i].iov_base, policy);
            continue;
        }
        cairn_rbuf_rele(keep[i]);
        (void)block_read_impl(spa, &bps[i], NULL, err ? 0 : VDEV_READ_SCRUB, NULL, policy);
    }
}

/* Whether read-ahead has to read bp from the disks: the ARC would keep it and
 * holds it neither in memory nor on a cache device (from where arc_prefetch
 * brings it right here). */
static bool wanted_from_disk(spa_t *spa, const cairn_blkptr_t *bp, uint8_t cache_policy)
{
    return arc_policy_allows(ARC_POLICY_PRIMARY(cache_policy), bp->type) &&
           arc_prefetch(spa->guid, bp, cache_policy) != 0;
}

static int bp_by_place(const void *a, const void *b)
{
    const cairn_dva_t *x = &((const cairn_blkptr_t *)a)->dva[0], *y = &((const cairn_blkptr_t *)b)->dva[0];
    if (x->vdev != y->vdev) return x->vdev < y->vdev ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void spa_blocks_prefetch(spa_t *spa, const cairn_blkptr_t *in, size_t n, uint8_t cache_policy)
{
    if (spa->readonly || cache_policy == ARC_POLICY_BYPASS || n == 0) return;
    /* By place on disk: the records of a file written in sequence lie end to
     * end, but a txg's sync workers allocate its batches in whatever order
     * they finish. */
    cairn_blkptr_t *bps = cairn_zalloc(n * sizeof *bps);
    memcpy(bps, in, n * sizeof *bps);
    qsort(bps, n, sizeof *bps, bp_by_place);
    size_t i = 0;
    while (i < n) {
        vdev_t *top = run_top(spa, &bps[i]);
        if (!top) { /* a hole, or a block read alone (copies, raidz) */
            (void)spa_block_prefetch(spa, &bps[i], cache_policy);
            i++;
            continue;
        }
        if (!wanted_from_disk(spa, &bps[i], cache_policy)) {
            i++;
            continue;
        }
        size_t k = 1;
        uint64_t bytes = cairn_dva_asize(&bps[i].dva[0]);
        while (i + k < n && k < SPA_RUN_MAX_BLOCKS) {
            const cairn_blkptr_t *prev = &bps[i + k - 1], *next = &bps[i + k];
            uint64_t asize = cairn_dva_asize(&next->dva[0]);
            if (run_top(spa, next) != top ||
                next->dva[0].offset != prev->dva[0].offset + cairn_dva_asize(&prev->dva[0]) ||
                bytes + asize > SPA_RUN_MAX_BYTES || !wanted_from_disk(spa, next, cache_policy))
                break;
            bytes += asize;
            k++;
        }
        prefetch_run(spa, top, &bps[i], k, cache_policy);
        i += k;
    }
    free(bps);
}

void spa_block_free(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp) || spa->readonly) return;
    /* A shared block loses one reference and keeps its space and its cached
     * copies (the other references still read it). */
    if (spa_brt_release(spa, txg, bp)) return;
    arc_free(spa->guid, bp); /* ARC: a freed block's cached copies go at once */
    if (cairn_bp_is_gang(bp)) {
        spa_gang_free(spa, txg, bp);
        return;
    }
    for (int c = 0; c < bp->ncopies; c++) {
        const cairn_dva_t *d = &bp->dva[c];
        metaslab_t *ms = d->vdev < spa->ntop ? spa->ms[d->vdev] : NULL;
        if (!ms || d->asize == 0) continue; /* beyond the tree or a hole: nothing to free */
        if (metaslab_free(ms, txg, d->offset, cairn_dva_asize(d)))
            log_error("spa", "pool %s: free of unallocated space (vdev %u offset %llu)", spa->name,
                      d->vdev, (unsigned long long)d->offset);
    }
}
