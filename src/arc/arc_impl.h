/* Between the ARC core (arc.c) and its cache devices (l2arc.c). */
#ifndef CAIRN_ARC_IMPL_H
#define CAIRN_ARC_IMPL_H

#include <cairn/arc.h>
#include <cairn/rbuf.h>
#include <stdatomic.h>

/* The identity of a block and what a reader must find to trust a copy. */
typedef struct arc_key {
    uint64_t guid, offset, birth;
    uint32_t vdev;
} arc_key_t;

static inline arc_key_t arc_key_of(uint64_t guid, const cairn_blkptr_t *bp)
{
    return (arc_key_t){.guid = guid, .offset = bp->dva[0].offset, .birth = bp->birth_txg,
                       .vdev = bp->dva[0].vdev};
}
static inline bool arc_key_eq(const arc_key_t *a, const arc_key_t *b)
{
    return a->offset == b->offset && a->birth == b->birth && a->vdev == b->vdev &&
           a->guid == b->guid;
}
static inline uint64_t arc_key_hash(const arc_key_t *k)
{
    uint64_t h = k->offset ^ (k->birth * 0xff51afd7ed558ccdULL) ^ ((uint64_t)k->vdev << 48) ^
                 (k->guid * 0xc4ceb9fe1a85ec53ULL);
    h *= 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* A refcounted byte buffer: readers copy out of it without holding the ARC
 * lock, or hold it while they send from it (arc_lookup_memory_ref). Its bytes
 * never change once an entry holds it. */
typedef cairn_rbuf_t arc_buf_t;
static inline arc_buf_t *arc_buf_new(const void *src, uint32_t size) { return cairn_rbuf_new(src, size); }
static inline void arc_buf_rele(arc_buf_t *b) { cairn_rbuf_rele(b); }

/* A block the feed thread may copy to a cache device (stored holds a reference). */
typedef struct arc_l2_cand {
    arc_key_t key;
    uint32_t lsize, psize;
    uint8_t compress, checksum, type;
    uint8_t cksum[CAIRN_CHECKSUM_LEN];
    arc_buf_t *stored;
} arc_l2_cand_t;
/* Up to max blocks of the pool from the eviction ends of the lists, not yet on a
 * cache device and allowed there, totalling at most bytes. */
size_t arc_l2_candidates(uint64_t guid, arc_l2_cand_t *out, size_t max, uint64_t bytes);

/* l2arc.c, called by arc.c */
/* A verified copy of the stored bytes from a cache device (caller frees *stored);
 * -ENOENT when no device has it, another negative errno when the copy was bad. */
int l2arc_read(uint64_t guid, const cairn_blkptr_t *bp, uint8_t policy, uint8_t **stored);
bool l2arc_pool_has_devices(uint64_t guid);
void l2arc_forget(uint64_t guid, const cairn_blkptr_t *bp);
void l2arc_close_pool(uint64_t guid);
void l2arc_fill_stats(arc_stats_t *st);
void l2arc_reset_stats(void);


#endif
