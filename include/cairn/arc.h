/*
 * ARC: the adaptive replacement cache of blocks, and its second level on
 * cache devices (L2ARC) (src/arc/).
 *
 * The ARC sits inside the SPA's read path (spa_block_read*): a read first asks
 * arc_lookup(); on a miss the SPA reads and verifies the block from the vdevs
 * and hands the stored (still compressed, verified) bytes to arc_insert_stored().
 * spa_block_free() calls arc_free() so a freed block's memory goes at once.
 * The library depends only on util and codec: it never calls the SPA, so a
 * pool is named by its guid and a block by its block pointer.
 *
 * One ARC per process (like the kernel's), bounded by arc_max bytes over all
 * pools. Blocks are identified by (pool guid, first DVA, birth txg); an entry
 * also carries the block's full checksum and a hit requires it to match the
 * pointer asking, so a block rewritten at the same place after a crash can
 * never be served stale.
 *
 * Policies (a dataset's primarycache / secondarycache) travel with each read:
 * ARC_CACHE_ALL caches everything, ARC_CACHE_METADATA only blocks that are not
 * plain data records (bp->type != CAIRN_BT_DATA), ARC_CACHE_NONE nothing.
 */
#ifndef CAIRN_ARC_H
#define CAIRN_ARC_H

#include <cairn/blkptr.h>
#include <cairn/rbuf.h>
#include <cairn/types.h>

typedef enum arc_cache_policy {
    ARC_CACHE_ALL = 0,
    ARC_CACHE_METADATA = 1,
    ARC_CACHE_NONE = 2,
} arc_cache_policy_t;

/* Both policies of a read packed in one small integer (what the DMU keeps per object set). */
#define ARC_POLICY(primary, secondary) ((uint8_t)(((secondary) << 4) | (primary)))
#define ARC_POLICY_PRIMARY(p) ((arc_cache_policy_t)((p) & 0xf))
#define ARC_POLICY_SECONDARY(p) ((arc_cache_policy_t)(((p) >> 4) & 0xf))
#define ARC_POLICY_DEFAULT ARC_POLICY(ARC_CACHE_ALL, ARC_CACHE_ALL)
#define ARC_POLICY_BYPASS ARC_POLICY(ARC_CACHE_NONE, ARC_CACHE_NONE)

/* Whether a policy keeps blocks of this type (bp->type). */
bool arc_policy_allows(arc_cache_policy_t pol, uint8_t type);

/* arc_max of a process that sets none (a library user, a test); cairnd sizes it
 * from the machine (arc_default_max). */
#define ARC_DEFAULT_MAX (256 * CAIRN_MIB)

/* ---- the read path (called by the SPA) ---- */
/* Fills buf with the block's bp->lsize logical bytes on a hit (from ARC memory or
 * a cache device, verified) and returns 0; -ENOENT on a miss. */
int arc_lookup(uint64_t pool_guid, const cairn_blkptr_t *bp, void *buf, uint8_t policy);
/* Memory only, for callers that must not wait for a device: on a hit in ARC
 * memory copies bytes [off, off + len) of the block's logical content into buf
 * and returns 0; -ENOENT otherwise (a miss is not counted and no cache device
 * is read: the caller's arc_lookup/vdev read that follows does that). */
int arc_lookup_memory(uint64_t pool_guid, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                      void *buf, uint8_t policy);
/* arc_lookup_memory() that lends instead of copying where it can: on a hit
 * whose logical bytes sit in a buffer the ARC keeps (an uncompressed block, or
 * the decompressed copy of a hot block, made now when it is due), *ref gets a
 * held reference to that buffer, buf is left untouched and the bytes are at
 * (*ref)->data + off; the caller drops it with cairn_rbuf_rele() when done
 * (the bytes stay valid and unchanged until then, even if the block is
 * evicted or freed meanwhile). Otherwise *ref is NULL and buf is filled as
 * arc_lookup_memory() fills it. */
int arc_lookup_memory_ref(uint64_t pool_guid, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                          void *buf, uint8_t policy, cairn_rbuf_t **ref);
/* Whether the block is in ARC memory now (its lists and counters untouched):
 * for read-ahead, which has nothing to do for such a block. */
bool arc_cached(uint64_t pool_guid, const cairn_blkptr_t *bp);
/* Read-ahead's look at a block, without counting or promoting it: READ when it
 * is not in ARC memory; when it is there compressed and without a decompressed
 * copy, so the reader's hit would decompress on its path, DECOMPRESS if it is
 * unread (written or read ahead, not yet asked for) and DECOMPRESS_HOT if it
 * was used before (its next hit makes it hot); DONE otherwise. */
typedef enum {
    ARC_AHEAD_READ,
    ARC_AHEAD_DONE,
    ARC_AHEAD_DECOMPRESS,
    ARC_AHEAD_DECOMPRESS_HOT,
} arc_ahead_t;
arc_ahead_t arc_ahead_state(uint64_t pool_guid, const cairn_blkptr_t *bp);
/* For a block arc_ahead_state() found DECOMPRESS (hot false) or DECOMPRESS_HOT
 * (hot true): makes now, on the caller's thread, a decompressed copy for the
 * block's next hit, if the block is still in memory, without one, and (not hot)
 * still unread when the copy is done. An unread block's first hit takes the
 * copy and the entry keeps only the stored bytes, so a streamed block costs no
 * second buffer; a hot block keeps it, as the copy its hit would make anyway.
 * (An unread block the reader reached first is used now: a copy made for it
 * would only stay, unasked for.) */
void arc_decompress_ahead(uint64_t pool_guid, const cairn_blkptr_t *bp, bool hot);
/* Read-ahead's question: 0 when the block is in ARC memory (untouched, as
 * arc_cached) or has just been brought there from a cache device (verified, kept
 * as stored and unread); -ENOENT when the disks must be read. */
int arc_prefetch(uint64_t pool_guid, const cairn_blkptr_t *bp, uint8_t policy);
/* After a verified read of the vdevs: stored is the block as stored (bp->psize
 * bytes, compressed per bp->compress). Whether it is kept follows the policy. */
void arc_insert_stored(uint64_t pool_guid, const cairn_blkptr_t *bp, const void *stored,
                       uint8_t policy);
/* arc_insert_stored() for a block nobody has asked for yet (read ahead, or just
 * written): its first hit is its first use, so it leaves the block on the MRU and
 * keeps no decompressed copy; only a second use makes it hot. */
void arc_insert_unread(uint64_t pool_guid, const cairn_blkptr_t *bp, const void *stored,
                       uint8_t policy);
/* arc_insert_unread() of the n blocks one write just stored (stored[i] is
 * bps[i].psize bytes), under one taking of the ARC's lock: a txg's sync
 * writes its records in batches of up to 1 MiB from many threads at once.
 * adopt (NULL, or NULL entries: copy stored[i]): a reference on the buffer
 * whose data is stored[i], bytes never written again, which the ARC takes
 * over (kept or released) instead of copying the block: the writer's own
 * buffer becomes the cached one. logical (NULL, or NULL entries): for a
 * compressed block, a reference on a buffer of its bps[i].lsize logical
 * bytes, never written again, which the ARC takes over too and may keep as
 * the block's decompressed copy until its first read (the first thing it
 * drops when it needs room). */
void arc_insert_unread_many(uint64_t pool_guid, const cairn_blkptr_t *bps,
                            const void *const *stored, cairn_rbuf_t *const *adopt,
                            cairn_rbuf_t *const *logical, size_t n, uint8_t policy);
/* arc_insert_stored() / arc_insert_unread() (unread) of a buffer the caller
 * read the block into: the ARC takes over the caller's reference on stored
 * (bp->psize bytes, verified, never written again) instead of copying it. */
void arc_insert_adopt(uint64_t pool_guid, const cairn_blkptr_t *bp, cairn_rbuf_t *stored,
                      uint8_t policy, bool unread);
/* The block was freed: drop it from memory and from the cache devices' index. */
void arc_free(uint64_t pool_guid, const cairn_blkptr_t *bp);
/* A pool closed: forget its blocks in memory and close its cache devices
 * (their contents stay valid for the next import). */
void arc_purge_pool(uint64_t pool_guid);

/* ---- sizing ---- */
/* Sets arc_max (bytes, >= 1 MiB) and the target with it; shrinks at once if needed. */
void arc_set_max(uint64_t bytes);
/* Sets the target c (memory pressure), at most arc_max and at least 1 MiB;
 * shrinks at once if needed. arc_set_max() sets both. */
void arc_set_target(uint64_t bytes);
/* The current target c: arc_max, or less under memory pressure. */
uint64_t arc_get_max(void);

/* Sizing from the machine (src/arc/arc_size.c): the figures below are pure
 * functions of what arc_memory_read() found, so they are tested without one. */
#define ARC_MAX_FLOOR (64 * CAIRN_MIB)
typedef struct arc_memory {
    uint64_t total;     /* MemTotal */
    uint64_t available; /* MemAvailable */
    uint64_t cg_limit;  /* the cgroup's memory.max; 0: no limit */
    uint64_t cg_usage;  /* the cgroup's memory.current */
} arc_memory_t;
/* Reads meminfo (/proc/meminfo) and, when cgroup_dir is given, its memory.max and
 * memory.current (cgroup v2) or else memory.limit_in_bytes and memory.usage_in_bytes
 * (v1); missing files or "max": no limit. 0, or -errno when meminfo cannot be read
 * or has no MemTotal. */
int arc_memory_read(const char *meminfo, const char *cgroup_dir, arc_memory_t *out);
/* arc_max when the configuration sets none: half of the memory the process may
 * use (the machine's, or its cgroup's limit if lower), at least ARC_MAX_FLOOR. */
uint64_t arc_default_max(const arc_memory_t *m);
/* Memory the system keeps free before the ARC gives way: 1/32 of it, >= 64 MiB. */
uint64_t arc_memory_reserve(const arc_memory_t *m);
/* What the process could still take: MemAvailable, or less when its cgroup is nearer its limit. */
uint64_t arc_memory_available(const arc_memory_t *m);
/* The next target for an ARC of target c and bound c_max: below the reserve it
 * shrinks by the shortfall (at least 1/32 of c, to no less than
 * min(c_max, ARC_MAX_FLOOR)); with twice the reserve free it grows back toward
 * c_max by at most 1/32 of c_max a step; otherwise c. */
uint64_t arc_pressure_target(uint64_t c, uint64_t c_max, const arc_memory_t *m);

/* ---- L2ARC: cache devices ---- */
/* Attaches a cache device (a file or block device) to a pool. create: format it
 * (its old contents are forgotten); otherwise its entries are rebuilt from the
 * log on the device, or it is formatted when it carries no valid header of this
 * pool. */
int arc_l2_add(uint64_t pool_guid, const char *path, bool create, char *err, size_t errlen);
/* Detaches one cache device (its header is written first). -ENOENT if unknown. */
int arc_l2_remove(uint64_t pool_guid, const char *path);
/* Paths of the pool's cache devices (attached or dropped). Caller frees each and the array. */
int arc_l2_paths(uint64_t pool_guid, char ***paths, size_t *n);
/* Feeding: at most bytes_per_tick every interval_ms (defaults 8 MiB / 200 ms). */
void arc_l2_set_feed(uint64_t bytes_per_tick, uint32_t interval_ms);
/* Tests: run one feed pass now, waiting for it. Returns bytes written. */
uint64_t arc_l2_feed_now(void);

typedef struct arc_l2_dev_stat {
    char path[256];
    bool online;            /* false: dropped after I/O or checksum errors */
    uint64_t size;          /* bytes of the ring */
    uint64_t alloc;         /* bytes of live entries in the ring */
    uint64_t entries;
    uint64_t reads, writes, errors;
    uint64_t read_bytes, write_bytes;
} arc_l2_dev_stat_t;
/* Fills up to cap descriptions of the pool's cache devices; returns how many it has. */
size_t arc_l2_dev_stats(uint64_t pool_guid, arc_l2_dev_stat_t *out, size_t cap);

/* ---- statistics (process-wide) ---- */
typedef struct arc_stats {
    uint64_t hits, misses;
    uint64_t mru_hits, mfu_hits, mru_ghost_hits, mfu_ghost_hits;
    uint64_t size;            /* bytes held: stored + decompressed copies */
    uint64_t c, p, c_max;     /* target size, target of the recency list, arc_max */
    uint64_t mru_size, mfu_size, mru_ghost_size, mfu_ghost_size;
    uint64_t decompressed_size; /* bytes of decompressed copies (hot blocks; read ahead, until used) */
    uint64_t entries;
    uint64_t evictions, frees_dropped, bypassed;
    uint64_t adopted_writes;  /* written blocks cached as the writer's buffer, not a copy */
    uint64_t written_copies;  /* compressed blocks written that kept the writer's logical bytes */
    uint64_t written_copies_dropped; /* of those, dropped unread to make room */
    uint64_t written_copies_size;    /* bytes of such copies held now (in decompressed_size) */
    uint64_t l2_hits, l2_misses, l2_feeds, l2_feed_bytes, l2_size, l2_entries;
    uint64_t l2_cksum_bad, l2_io_errors, l2_devices_dropped, l2_rebuilt;
} arc_stats_t;
void arc_get_stats(arc_stats_t *out);
/* Tests: zero the counters (sizes and targets stay). */
void arc_reset_stats(void);

#endif
