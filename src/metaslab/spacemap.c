/*
 * Space map log blocks: encoding and decoding of allocation records.
 *
 * Why a log. The allocated space of a pool changes in every txg, by a few
 * extents to many thousands. Rewriting a map of the whole space each txg would
 * cost I/O in proportion to the pool's size; appending only the txg's changes
 * costs I/O in proportion to the work done. Replay at import rebuilds the
 * allocators exactly, and condensing (a snapshot of the allocated extents
 * that starts a new chain) bounds how long the log, and so import, can get.
 *
 * Why fixed 16-byte entries rather than varints. A fixed size lets the pool
 * know exactly how many records a block holds before encoding them
 * (spacemap_block_entries()), which it needs because allocating the log's own
 * blocks adds records to the same txg. Sequential allocations are already
 * merged into one record before they get here, so the space a varint scheme
 * would save is small.
 *
 * BYTE FORMAT (version 1). All integers little-endian. A block is one buffer
 * of the pool's choosing (any length >= 64 bytes):
 *
 *   header, 32 bytes:
 *     0   u64  magic     0x50414d5053524e43 ("CRNSPMAP" in byte order)
 *     8   u16  version   1
 *     10  u16  flags     bit 0: SNAPSHOT (block belongs to a condensed
 *                        snapshot); other bits 0
 *     12  u32  nentries  number of 16-byte entries that follow;
 *                        32 + 16 * nentries <= block length
 *     16  u64  block_txg txg the block was written in, >= 1
 *     24  u64  reserved  0
 *   entries, 16 bytes each, at offset 32 + 16 * i:
 *     0   u64  word0
 *     8   u64  word1
 *   the rest of the block is zero (written so, not checked).
 *
 *   word0 bits 0..3 are the entry kind:
 *     0 TXG    word0 == 0 entirely; word1 = txg, 1 <= txg <= block_txg.
 *              Sets the txg of the extent entries that follow it.
 *     1 ALLOC  an extent was allocated in the current txg
 *     2 FREE   an extent was freed in the current txg
 *     3..15    invalid
 *   ALLOC and FREE entries:
 *     word0 bits 4..27   top-level vdev id (24 bits)
 *     word0 bits 28..63  extent size in 512-byte sectors, minus 1 (36 bits;
 *                        so 512 bytes .. 32 TiB)
 *     word1              extent byte offset in the vdev, a multiple of 512;
 *                        offset + size must not exceed 2^64 - 1
 *   Every block is self-contained: its first extent entry is preceded by a TXG
 *   entry in the same block. A writer emits a TXG entry whenever the txg
 *   changes; txgs within a block need not increase (a snapshot lists its
 *   ALLOC records under the condense txg, then older deferred FREE records).
 *
 * Semantics (replay, see metaslab_replay_record()): records are applied in
 * the order written, block after block along the chain. ALLOC marks the extent
 * allocated (it must be free). FREE marks it free (it must be allocated); the
 * freed space stays unallocatable until txg + defer is durable.
 *
 * Robustness: the reader checks the header before anything else, bounds every
 * entry by nentries (itself bounded by the buffer length), and rejects any
 * entry with reserved bits set, an unknown kind, a zero or too-new txg, an
 * unaligned or wrapping extent, so no input can make it read past the buffer
 * or hand back a record the allocator would misinterpret.
 */
#include <cairn/endian.h>
#include <cairn/metaslab.h>
#include <cairn/spacemap.h>
#include <cairn/util.h>

#include <stdlib.h>
#include <string.h>

enum {
    SM_KIND_TXG = 0,
    SM_KIND_ALLOC = 1,
    SM_KIND_FREE = 2,
};

#define SM_KIND_MASK 0xfULL
#define SM_VDEV_SHIFT 4
#define SM_VDEV_MASK 0xffffffULL
#define SM_SECTORS_SHIFT 28
#define SM_SECTOR ((uint64_t)1 << SPACEMAP_SECTOR_SHIFT)

#define get_le64 cairn_get_le64
#define get_le32 cairn_get_le32
#define get_le16 cairn_get_le16
#define put_le64 cairn_put_le64
#define put_le32 cairn_put_le32
#define put_le16 cairn_put_le16

bool spacemap_record_valid(const spacemap_record_t *rec)
{
    if (rec->type != SPACEMAP_ALLOC && rec->type != SPACEMAP_FREE)
        return false;
    if (rec->txg == 0 || rec->vdev >= SPACEMAP_MAX_VDEVS)
        return false;
    if (rec->size == 0 || rec->size > SPACEMAP_MAX_EXTENT)
        return false;
    if (!CAIRN_IS_P2ALIGNED(rec->offset, SM_SECTOR) || !CAIRN_IS_P2ALIGNED(rec->size, SM_SECTOR))
        return false;
    return rec->size <= UINT64_MAX - rec->offset;
}

/* ---- encoding ---- */

size_t spacemap_block_entries(size_t len)
{
    return len < SPACEMAP_HEADER_SIZE ? 0 : (len - SPACEMAP_HEADER_SIZE) / SPACEMAP_ENTRY_SIZE;
}

int spacemap_writer_init(spacemap_writer_t *w, void *buf, size_t len, uint64_t block_txg,
                         uint32_t flags)
{
    if (!buf || len < SPACEMAP_MIN_BLOCK || block_txg == 0 || (flags & ~SPACEMAP_FLAG_SNAPSHOT))
        return -EINVAL;
    /* nentries is a u32 on disk; larger blocks simply leave their tail unused. */
    size_t max_len = SPACEMAP_HEADER_SIZE + (size_t)UINT32_MAX * SPACEMAP_ENTRY_SIZE;
    w->buf = buf;
    w->len = len < max_len ? len : max_len;
    w->block_txg = block_txg;
    w->flags = flags;
    w->nentries = 0;
    w->cur_txg = 0;
    return 0;
}

static void put_entry(spacemap_writer_t *w, uint64_t word0, uint64_t word1)
{
    uint8_t *p = w->buf + SPACEMAP_HEADER_SIZE + (size_t)w->nentries * SPACEMAP_ENTRY_SIZE;
    put_le64(p, word0);
    put_le64(p + 8, word1);
    w->nentries++;
}

int spacemap_writer_add(spacemap_writer_t *w, const spacemap_record_t *rec)
{
    if (!spacemap_record_valid(rec) || rec->txg > w->block_txg)
        return -EINVAL;
    size_t need = rec->txg != w->cur_txg ? 2 : 1;
    if (w->nentries + need > spacemap_block_entries(w->len))
        return -ENOSPC;
    if (rec->txg != w->cur_txg) {
        put_entry(w, SM_KIND_TXG, rec->txg);
        w->cur_txg = rec->txg;
    }
    uint64_t kind = rec->type == SPACEMAP_ALLOC ? SM_KIND_ALLOC : SM_KIND_FREE;
    uint64_t sectors_m1 = (rec->size >> SPACEMAP_SECTOR_SHIFT) - 1;
    uint64_t word0 = kind | ((uint64_t)rec->vdev << SM_VDEV_SHIFT) |
                     (sectors_m1 << SM_SECTORS_SHIFT);
    put_entry(w, word0, rec->offset);
    return 0;
}

bool spacemap_writer_empty(const spacemap_writer_t *w) { return w->nentries == 0; }

size_t spacemap_writer_finish(spacemap_writer_t *w)
{
    uint8_t *h = w->buf;
    put_le64(h, SPACEMAP_MAGIC);
    put_le16(h + 8, SPACEMAP_VERSION);
    put_le16(h + 10, (uint16_t)w->flags);
    put_le32(h + 12, w->nentries);
    put_le64(h + 16, w->block_txg);
    put_le64(h + 24, 0);
    size_t used = SPACEMAP_HEADER_SIZE + (size_t)w->nentries * SPACEMAP_ENTRY_SIZE;
    memset(w->buf + used, 0, w->len - used);
    return used;
}

long spacemap_encode(void *buf, size_t len, uint64_t block_txg, uint32_t flags,
                     const spacemap_record_t *recs, size_t n)
{
    spacemap_writer_t w;
    int rc = spacemap_writer_init(&w, buf, len, block_txg, flags);
    if (rc)
        return rc;
    size_t i;
    for (i = 0; i < n; i++) {
        rc = spacemap_writer_add(&w, &recs[i]);
        if (rc == -ENOSPC)
            break;
        if (rc)
            return rc;
    }
    spacemap_writer_finish(&w);
    return (long)i;
}

size_t spacemap_blocks_needed(size_t len, const spacemap_record_t *recs, size_t n)
{
    size_t cap = spacemap_block_entries(len);
    if (cap < 2 || n == 0)
        return 0;
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    size_t blocks = 1, used = 0;
    uint64_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        size_t need = recs[i].txg != cur ? 2 : 1;
        if (used + need > cap) {
            blocks++;
            used = 0;
            need = 2;
        }
        used += need;
        cur = recs[i].txg;
    }
    return blocks;
}

/* ---- decoding ---- */

int spacemap_reader_init(spacemap_reader_t *r, const void *buf, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->next = UINT32_MAX;   /* failed until proven good */
    if (!buf || len < SPACEMAP_HEADER_SIZE)
        return -EINVAL;
    const uint8_t *h = buf;
    uint64_t magic = get_le64(h);
    uint16_t version = get_le16(h + 8);
    uint16_t flags = get_le16(h + 10);
    uint32_t nentries = get_le32(h + 12);
    uint64_t block_txg = get_le64(h + 16);
    uint64_t reserved = get_le64(h + 24);
    if (magic != SPACEMAP_MAGIC || version != SPACEMAP_VERSION || reserved != 0 ||
        (flags & ~SPACEMAP_FLAG_SNAPSHOT) || block_txg == 0)
        return -EINVAL;
    if (nentries > spacemap_block_entries(len))
        return -EINVAL;
    r->buf = h;
    r->nentries = nentries;
    r->next = 0;
    r->block_txg = block_txg;
    r->flags = flags;
    r->cur_txg = 0;
    return 0;
}

int spacemap_reader_next(spacemap_reader_t *r, spacemap_record_t *rec)
{
    for (;;) {
        if (r->next == UINT32_MAX)
            return -EINVAL;
        if (r->next >= r->nentries)
            return 0;
        const uint8_t *p = r->buf + SPACEMAP_HEADER_SIZE + (size_t)r->next * SPACEMAP_ENTRY_SIZE;
        uint64_t w0 = get_le64(p), w1 = get_le64(p + 8);
        r->next++;
        uint64_t kind = w0 & SM_KIND_MASK;
        if (kind == SM_KIND_TXG) {
            if (w0 != 0 || w1 == 0 || w1 > r->block_txg)
                goto bad;
            r->cur_txg = w1;
            continue;
        }
        if ((kind != SM_KIND_ALLOC && kind != SM_KIND_FREE) || r->cur_txg == 0)
            goto bad;
        uint64_t sectors = (w0 >> SM_SECTORS_SHIFT) + 1;
        rec->txg = r->cur_txg;
        rec->type = kind == SM_KIND_ALLOC ? SPACEMAP_ALLOC : SPACEMAP_FREE;
        rec->vdev = (uint32_t)((w0 >> SM_VDEV_SHIFT) & SM_VDEV_MASK);
        rec->size = sectors << SPACEMAP_SECTOR_SHIFT;
        rec->offset = w1;
        if (!spacemap_record_valid(rec))
            goto bad;
        return 1;
    bad:
        r->next = UINT32_MAX;
        return -EINVAL;
    }
}

int spacemap_decode(const void *buf, size_t len, spacemap_record_t **recs, size_t *n,
                    uint64_t *block_txg, uint32_t *flags)
{
    *recs = NULL;
    *n = 0;
    spacemap_reader_t r;
    int rc = spacemap_reader_init(&r, buf, len);
    if (rc)
        return rc;
    /* Each record needs an entry, so nentries bounds the array. */
    spacemap_record_t *out = r.nentries ? cairn_zalloc((size_t)r.nentries * sizeof(*out)) : NULL;
    size_t cnt = 0;
    spacemap_record_t rec;
    while ((rc = spacemap_reader_next(&r, &rec)) == 1)
        out[cnt++] = rec;
    if (rc < 0) {
        free(out);
        return rc;
    }
    if (cnt == 0) {
        free(out);
        out = NULL;
    }
    *recs = out;
    *n = cnt;
    if (block_txg)
        *block_txg = r.block_txg;
    if (flags)
        *flags = r.flags;
    return 0;
}

/* ---- replay ---- */

int spacemap_replay_records(const spacemap_record_t *recs, size_t n, struct metaslab *const *ms,
                            size_t nms, uint64_t last_synced_txg)
{
    for (size_t i = 0; i < n; i++)
        if (recs[i].vdev >= nms || !ms[recs[i].vdev])
            return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        int rc = metaslab_replay_record(ms[recs[i].vdev], &recs[i], last_synced_txg);
        if (rc)
            return rc;
    }
    return 0;
}

int spacemap_replay(const void *buf, size_t len, struct metaslab *const *ms, size_t nms,
                    uint64_t last_synced_txg)
{
    spacemap_record_t *recs;
    size_t n;
    int rc = spacemap_decode(buf, len, &recs, &n, NULL, NULL);
    if (rc)
        return rc;
    rc = spacemap_replay_records(recs, n, ms, nms, last_synced_txg);
    free(recs);
    return rc;
}
