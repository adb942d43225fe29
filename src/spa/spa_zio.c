/*
 * The block pipeline: how a buffer becomes a verified block on disk and back.
 *
 * Write (spa_block_write, syncing context, many threads at once):
 *   compress    - with the block's codec, into a buffer 12.5% smaller than the
 *                 logical size; if it does not fit, the block is stored raw
 *   checksum    - of the stored bytes, into the block pointer
 *   allocate    - `copies` DVAs, on distinct top-level vdevs where the pool
 *                 has them (ditto blocks), metadata always at least two
 *   issue       - vdev_write_block() for each copy (mirror sides / raidz
 *                 columns and parity are written in parallel by the vdev layer)
 * The sync path dispatches one such pipeline per dirty block on the pool's
 * worker taskq, so compression, checksums and parity use every core.
 *
 * Read (spa_block_read, any context): each DVA in turn is read through its
 * top-level vdev with a verify callback that checks the pointer's checksum.
 * The vdev layer itself tries the other mirror sides or raidz reconstruction
 * and repairs what lied; if a whole copy is bad the next DVA is tried and the
 * bad copy is rewritten from the good one. Then the data is decompressed.
 *
 * Placement across top-level vdevs: a rotor stays on one vdev for a run of
 * bytes proportional to its share of the pool's free space, then moves on, so
 * vdevs fill evenly and a sequential stream lands in contiguous extents.
 */
#include "spa_impl.h"

#include <stdlib.h>
#include <string.h>

#define SPA_ROTOR_CHUNK (4 * CAIRN_MIB)

/*
 * I/O bounce buffers. A fresh aligned allocation per block costs an mmap,
 * a page-zeroing fault per page and an munmap at these sizes; keeping one
 * buffer per thread and role removes that from the hot path. The pipeline's
 * threads are long-lived task queue workers, so the buffers are few.
 */
enum { ZBUF_WRITE = 0, ZBUF_READ = 1, ZBUF_SCRUB = 2, ZBUF_ROLES = 3 };
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

static bool verify_cb(const void *buf, uint64_t psize, void *arg)
{
    const cairn_blkptr_t *bp = arg;
    return psize == bp->psize && spa_bp_verify(bp, buf);
}

/* Picks the top-level vdev for the next allocation (see the rotor above). */
static uint64_t ms_free(metaslab_t *ms)
{
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    return st.free;
}

static uint32_t spa_pick_vdev(spa_t *spa, uint64_t asize_hint, uint32_t avoid_mask)
{
    pthread_mutex_lock(&spa->rotor_lock);
    uint64_t total_free = 0;
    for (uint32_t i = 0; i < spa->ntop; i++) total_free += ms_free(spa->ms[i]);
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

static vdev_t *spa_top(spa_t *spa, uint32_t id)
{
    return id < spa->ntop ? spa->root->children[id] : NULL;
}

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
            if (atomic_load(&top->state) == VDEV_STATE_FAULTED) continue;
            uint64_t asize = vdev_psize_to_asize(top, psize);
            uint64_t off;
            int e = metaslab_alloc(spa->ms[v], txg, asize, &off);
            if (e) { err = e; continue; }
            dvas[c].vdev = v;
            dvas[c].offset = (uint64_t)off;
            dvas[c].asize = (uint32_t)(asize >> CAIRN_SECTOR_SHIFT);
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
        int e = vdev_write_block(spa_top(spa, dvas[c].vdev), dvas[c].offset, buf, psize);
        if (e) err = e; else ok++;
    }
    return ok ? 0 : err;
}

int spa_block_write(spa_t *spa, uint64_t txg, const void *data, uint32_t lsize,
                    const spa_write_props_t *props, cairn_blkptr_t *bp)
{
    if (spa->readonly) return -EROFS;
    if (lsize == 0 || lsize > 16 * CAIRN_MIB) return -EINVAL;
    memset(bp, 0, sizeof *bp);
    size_t cap = CAIRN_P2ROUNDUP((size_t)lsize, (size_t)1 << spa->ashift);
    uint8_t *out = zbuf_get(ZBUF_WRITE, cap);
    uint32_t psize = 0;
    cairn_compress_t comp = props->compress;
    if (comp != CAIRN_COMPRESS_OFF) {
        size_t want = lsize - lsize / 8; /* keep only if it saves >= 12.5% */
        size_t c = cairn_compress(comp, data, lsize, out, want);
        if (c > 0 && c <= want) psize = (uint32_t)c;
    }
    if (!psize) {
        comp = CAIRN_COMPRESS_OFF;
        psize = lsize;
        /* Stored raw: write straight from the caller's buffer when the devices can. */
        if (io_aligned(data, lsize, spa->ashift)) out = (uint8_t *)data;
        else memcpy(out, data, lsize);
    }
    if (out != data) memset(out + psize, 0, cap - psize);

    int copies = props->copies ? props->copies : 1;
    if (props->type != CAIRN_BT_DATA && copies < 2) copies = 2; /* metadata: ditto */
    if (copies > CAIRN_MAX_COPIES) copies = CAIRN_MAX_COPIES;

    bp->type = (uint8_t)props->type;
    bp->level = props->level;
    bp->checksum = (uint8_t)props->checksum;
    bp->compress = (uint8_t)comp;
    bp->lsize = lsize;
    bp->psize = psize;
    bp->birth_txg = txg;
    bp->fill = 1;
    cairn_checksum(props->checksum, out, psize, bp->cksum);

    int err = spa_alloc_dvas(spa, txg, psize, copies, bp->dva);
    if (!err) {
        err = spa_write_dvas(spa, bp->dva, copies, out, psize);
        if (err) {
            for (int c = 0; c < copies; c++)
                metaslab_unalloc(spa->ms[bp->dva[c].vdev], txg, bp->dva[c].offset,
                                 cairn_dva_asize(&bp->dva[c]));
        }
    }
    if (err) {
        memset(bp, 0, sizeof *bp);
        return err;
    }
    bp->ncopies = (uint8_t)copies;
    return 0;
}

int spa_block_read_flags(spa_t *spa, const cairn_blkptr_t *bp, void *buf, int vflags,
                         uint64_t *repaired)
{
    if (cairn_bp_is_hole(bp)) {
        memset(buf, 0, bp->lsize);
        return 0;
    }
    if (bp->ncopies > CAIRN_MAX_COPIES || bp->psize == 0 || bp->psize > bp->lsize ||
        bp->compress >= CAIRN_COMPRESS_COUNT)
        return -EINVAL;
    if (spa->readonly) vflags |= VDEV_READ_NOREPAIR;
    size_t cap = CAIRN_P2ROUNDUP((size_t)bp->psize, (size_t)1 << spa->ashift);
    /* Uncompressed into a suitable buffer: read in place, no bounce copy. */
    bool direct = bp->compress == CAIRN_COMPRESS_OFF && bp->psize == bp->lsize &&
                  io_aligned(buf, bp->psize, spa->ashift);
    uint8_t *raw = direct ? buf : zbuf_get(ZBUF_READ, cap);
    int err = -EIO;
    int good = -1;
    bool bad[CAIRN_MAX_COPIES] = {false};
    for (int c = 0; c < bp->ncopies; c++) {
        vdev_t *top = spa_top(spa, bp->dva[c].vdev);
        if (!top || bp->dva[c].offset + cairn_dva_asize(&bp->dva[c]) > top->asize) {
            bad[c] = false;
            continue;
        }
        vdev_read_result_t res = {0};
        int e;
        if (good >= 0 && !(vflags & VDEV_READ_SCRUB)) break;
        if (good >= 0) {
            /* Scrub: verify the other copies too, into a scratch buffer. */
            uint8_t *tmp = zbuf_get(ZBUF_SCRUB, cap);
            e = vdev_read_block(top, bp->dva[c].offset, tmp, bp->psize, verify_cb, (void *)bp,
                                vflags, &res);
        } else {
            e = vdev_read_block(top, bp->dva[c].offset, raw, bp->psize, verify_cb, (void *)bp,
                                vflags, &res);
        }
        if (repaired) *repaired += res.repaired_bytes;
        if (e == 0) {
            if (good < 0) good = c;
        } else {
            bad[c] = true;
            err = e;
        }
    }
    if (good < 0) {
        atomic_fetch_add(&spa->data_errors, 1);
        return err == 0 ? -EIO : err;
    }
    /* A whole copy failed while another verified: rewrite it from the good one. */
    if (!(vflags & VDEV_READ_NOREPAIR)) {
        for (int c = 0; c < bp->ncopies; c++) {
            if (!bad[c]) continue;
            vdev_t *top = spa_top(spa, bp->dva[c].vdev);
            if (vdev_write_block(top, bp->dva[c].offset, raw, bp->psize) == 0 && repaired)
                *repaired += bp->psize;
        }
    }
    err = 0;
    if (bp->compress == CAIRN_COMPRESS_OFF) {
        if (!direct) memcpy(buf, raw, bp->lsize);
    } else {
        err = cairn_decompress((cairn_compress_t)bp->compress, raw, bp->psize, buf, bp->lsize);
        if (err) atomic_fetch_add(&spa->data_errors, 1);
    }
    return err;
}

int spa_block_read(spa_t *spa, const cairn_blkptr_t *bp, void *buf)
{
    return spa_block_read_flags(spa, bp, buf, 0, NULL);
}

void spa_block_free(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp) || spa->readonly) return;
    for (int c = 0; c < bp->ncopies; c++) {
        const cairn_dva_t *d = &bp->dva[c];
        if (d->vdev >= spa->ntop || d->asize == 0) continue;
        if (metaslab_free(spa->ms[d->vdev], txg, d->offset, cairn_dva_asize(d)))
            log_error("spa", "pool %s: free of unallocated space (vdev %u offset %llu)", spa->name,
                      d->vdev, (unsigned long long)d->offset);
    }
}
