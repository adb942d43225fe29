/*
 * The block pointer: how every block of a pool is named.
 *
 * A block pointer is 128 bytes, stored little-endian. It locates up to three
 * copies of a block (DVAs: top-level vdev, offset in that vdev's allocatable
 * address space, allocated size), says how to decode it (compression,
 * checksum, logical and physical size) and carries its checksum, so a parent
 * always verifies its child: the whole tree is self-validating from the
 * uberblock down. birth_txg is the transaction group that wrote the block
 * (for a clone's pointer: the one that put the reference in place, with
 * phys_birth_txg saying when the bytes were written); snapshots and
 * incremental walks rely on it.
 *
 * A hole (a never-written or freed range of an object) is a pointer with
 * ncopies == 0; it costs no space. `fill` counts the non-hole level-0 blocks
 * beneath a pointer, so a walk can skip empty subtrees.
 */
#ifndef CAIRN_BLKPTR_H
#define CAIRN_BLKPTR_H

#include <cairn/codec.h>
#include <cairn/types.h>

#define CAIRN_MAX_COPIES 3
#define CAIRN_SECTOR_SHIFT 9 /* DVA sizes are counted in 512-byte sectors */

typedef struct cairn_dva {
    uint32_t vdev;    /* top-level vdev id */
    uint32_t asize;   /* allocated size in 512-byte sectors; 0 = unused DVA */
    uint64_t offset;  /* byte offset in the top-level vdev's address space */
} cairn_dva_t;

/* What a block holds; checked on read so a misdirected pointer is caught. */
typedef enum cairn_blk_type {
    CAIRN_BT_NONE = 0,
    CAIRN_BT_OBJSET = 1,      /* objset_phys: the root of an object set */
    CAIRN_BT_DNODE = 2,       /* an array of dnodes (the meta-dnode's data) */
    CAIRN_BT_INDIRECT = 3,    /* an array of block pointers */
    CAIRN_BT_DATA = 4,        /* a record of a plain object */
    CAIRN_BT_SPACEMAP = 5,    /* a space map log block */
    CAIRN_BT_DIRECTORY = 6,   /* object-set directory entries (MOS) */
    CAIRN_BT_LOGDIR = 7,      /* the intent-log directory (spa_log.c) */
    CAIRN_BT_ZAP = 8,         /* a record of a ZAP object (directories, properties) */
    CAIRN_BT_BRT = 9,         /* the block reference table (spa_brt.c) */
    CAIRN_BT_COUNT
} cairn_blk_type_t;

typedef struct cairn_blkptr {
    cairn_dva_t dva[CAIRN_MAX_COPIES]; /* 48 */
    uint64_t birth_txg;                /* 56 */
    uint64_t fill;                     /* 64 */
    uint32_t lsize;                    /* 68: logical (uncompressed) bytes */
    uint32_t psize;                    /* 72: stored bytes (compressed length) */
    uint8_t type;                      /* cairn_blk_type_t */
    uint8_t level;                     /* 0 = data, n = indirect of level n */
    uint8_t checksum;                  /* cairn_checksum_t */
    uint8_t compress;                  /* cairn_compress_t */
    uint8_t ncopies;                   /* DVAs in use; 0 = hole */
    uint8_t flags;
    uint16_t reserved0;                /* 80 */
    uint64_t phys_birth_txg;           /* 88: a clone's: when its bytes were written (0: birth_txg) */
    uint64_t reserved1;                /* 96 */
    uint8_t cksum[CAIRN_CHECKSUM_LEN]; /* 128: checksum of the stored bytes */
} cairn_blkptr_t;

_Static_assert(sizeof(cairn_blkptr_t) == 128, "block pointer is 128 bytes on disk");

/* flags: the DVAs name copies of a gang header, which lists the fragments
 * the stored bytes were split into (src/spa/spa_gang.c). */
#define CAIRN_BP_GANG 0x01

static inline bool cairn_bp_is_hole(const cairn_blkptr_t *bp) { return bp->ncopies == 0; }
static inline bool cairn_bp_is_gang(const cairn_blkptr_t *bp) { return (bp->flags & CAIRN_BP_GANG) != 0; }

/* When the block's bytes reached the disks. A pointer a clone put in place
 * (dmu_clone_range) is born, as a reference, in the clone's txg - which is
 * what snapshots, dead lists, rollback and destroy go by - while its bytes
 * are older: a resilver, which asks what a stale disk missed, goes by this. */
static inline uint64_t cairn_bp_phys_birth(const cairn_blkptr_t *bp)
{
    return bp->phys_birth_txg ? bp->phys_birth_txg : bp->birth_txg;
}
static inline uint64_t cairn_dva_asize(const cairn_dva_t *d)
{
    return (uint64_t)d->asize << CAIRN_SECTOR_SHIFT;
}
/* Bytes the block takes on its vdevs, all copies together (raw, not deflated). */
static inline uint64_t cairn_bp_asize(const cairn_blkptr_t *bp)
{
    uint64_t s = 0;
    for (int c = 0; c < bp->ncopies && c < CAIRN_MAX_COPIES; c++) s += cairn_dva_asize(&bp->dva[c]);
    return s;
}
/* Two pointers name the same block when their first DVA matches. */
static inline bool cairn_bp_same_block(const cairn_blkptr_t *a, const cairn_blkptr_t *b)
{
    return a->dva[0].vdev == b->dva[0].vdev && a->dva[0].offset == b->dva[0].offset &&
           a->birth_txg == b->birth_txg;
}

#endif
