/*
 * DMU: the data management unit (src/dmu/): object sets of objects, each a
 * sparse array of fixed-size records, on top of the SPA's block pipeline.
 *
 * The pool's meta object set (MOS) holds the object-set directory: the named
 * object sets of the pool and the block pointer of each one's root. An object
 * set's root block (objset_phys) holds its meta-dnode, an object whose records
 * are arrays of 512-byte dnodes; object N is dnode N. A dnode names its record
 * size (512 B .. 1 MiB), compression, checksum and copies, and roots a tree of
 * indirect blocks (128 KiB, 1024 block pointers each) over its records. Holes
 * cost no space; an all-zero record written is stored as a hole.
 *
 * Changes are made in transactions (dmu_tx_*), which join the SPA's open txg.
 * Changed records are kept in memory per txg (dirty records); the sync
 * callback writes them out bottom-up - records in parallel on the SPA's
 * workers, then indirect blocks level by level, dnodes, object-set roots, the
 * MOS - freeing the blocks they replace. Readers see the newest version of
 * every record: open txg, then syncing txg, then disk.
 *
 * Thread safety: every function may be called from many threads at once;
 * locks are per dnode, so writers of different objects do not wait on each
 * other; within one object, reads and writes of different records hold its
 * lock shared and run in parallel (see dnode.c); readers never wait for a txg
 * to sync.
 */
#ifndef CAIRN_DMU_H
#define CAIRN_DMU_H

#include <cairn/codec.h>
#include <cairn/rbuf.h>
#include <cairn/spa.h>
#include <cairn/types.h>

typedef struct objset objset_t;
typedef struct dmu_tx dmu_tx_t;

#define DMU_OBJSET_NAME_MAX 200
#define DMU_MIN_RECORDSIZE 512
#define DMU_MAX_RECORDSIZE (1024 * 1024)
#define DMU_BONUS_MAX 320
/* Reads, writes and frees end at or below this byte offset (-EFBIG past it): the
 * whole signed 64-bit range, so a file may reach INT64_MAX bytes. */
#define DMU_MAX_OFFSET (1ULL << 63)

/* Registers the DMU with the SPA (spa_register_upper). Call once before any pool opens. */
void dmu_init(void);

/* ---- object sets (named, in the pool's MOS directory) ---- */
int dmu_objset_create(spa_t *spa, const char *name, uint64_t *id_out);
int dmu_objset_destroy(spa_t *spa, const char *name);  /* frees every block it holds */
int dmu_objset_open(spa_t *spa, const char *name, objset_t **out);
void dmu_objset_close(objset_t *os);
/* Calls fn for each object set of the pool, in name order. */
int dmu_objset_list(spa_t *spa, void (*fn)(const char *name, uint64_t id, void *arg), void *arg);
spa_t *dmu_objset_spa(objset_t *os);

/* ---- transactions ---- */
/* Starts a transaction, waiting while the write throttle says dirty data runs ahead. */
dmu_tx_t *dmu_tx_begin(objset_t *os);
/* The txg the transaction's changes belong to. A transaction joins the open
 * txg at its first change (or at this call), not when it begins, so callers
 * take the locks of the objects they will change before changing them. */
uint64_t dmu_tx_txg(dmu_tx_t *tx);
/* True when the object set cannot be changed (read-only pool or snapshot). */
bool dmu_tx_readonly(const dmu_tx_t *tx);
/* True when the pool was suspended (a sync failed) as it began: its changes fail
 * with EIO. */
bool dmu_tx_suspended(const dmu_tx_t *tx);
void dmu_tx_commit(dmu_tx_t *tx);
/* Waits until everything committed to os so far is durable. */
int dmu_objset_sync(objset_t *os);

/* ---- objects ---- */
typedef struct dmu_object_props {
    uint32_t recordsize;           /* power of two, 512 .. 1 MiB */
    cairn_compress_t compress;
    cairn_checksum_t checksum;
    uint8_t copies;                /* 1..3 */
    /* At creation: the object is a ZAP (names, not user data): its records
     * are CAIRN_BT_ZAP, so space accounting (compressratio) and
     * primarycache=metadata tell them from the data of files and volumes.
     * Stored copies are still `copies`. */
    bool zap;
} dmu_object_props_t;

typedef struct dmu_object_info {
    dmu_object_props_t props;
    uint64_t max_offset;           /* end of the highest record ever written (not a file size) */
    uint64_t used_bytes;           /* allocated bytes of its blocks as of the last sync, plus an
                                    * estimate (from above) for records dirty in unsynced txgs */
    uint64_t generation;           /* txg that created it */
    uint32_t bonus_len;
} dmu_object_info_t;

int dmu_object_alloc(objset_t *os, const dmu_object_props_t *props, uint64_t *obj, dmu_tx_t *tx);
/* Allocates the given number (replay recreates an object under the number
 * handed out before a crash): -EEXIST while it is in use, -EBUSY while its
 * earlier life still has changes in an unsynced txg (retry after a sync). */
int dmu_object_claim(objset_t *os, uint64_t obj, const dmu_object_props_t *props, dmu_tx_t *tx);
int dmu_object_free(objset_t *os, uint64_t obj, dmu_tx_t *tx);
int dmu_object_info(objset_t *os, uint64_t obj, dmu_object_info_t *out); /* -ENOENT if free */
/* New compression/checksum/copies apply to records written from now on. The
 * record size may change while nothing was written, and grow while the object
 * has a single record (record 0 keeps its bytes, zero-extended); otherwise
 * -EINVAL. */
int dmu_object_set_props(objset_t *os, uint64_t obj, const dmu_object_props_t *props,
                         dmu_tx_t *tx);
/* Calls fn for every allocated object number. */
int dmu_object_list(objset_t *os, void (*fn)(uint64_t obj, void *arg), void *arg);

int dmu_write(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
              dmu_tx_t *tx);
/* dmu_write() of exactly one whole record [off, off + len) that also writes
 * that record at once as a block of its own (outside syncing context,
 * compressed and checksummed like the object's records), for an intent-log
 * record to point at. Not yet durable: the intent log flushes the blocks of a
 * commit together (spa_blocks_flush) before writing records that point at them. The txg's sync adopts the
 * block instead of writing the record again, unless the record changes again
 * before: then the block is freed in that txg. *bp is the block, or a hole when
 * it could not be written (the data is written all the same). -EINVAL if the
 * range is not one whole record. */
int dmu_write_direct(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
                     dmu_tx_t *tx, cairn_blkptr_t *bp);
/* dmu_write() that also tells, for each record of the range (stamps[i] for
 * record off / recordsize + i, up to nstamps), a stamp of the content the
 * write left in it: unique to that change, so a later change of the record
 * (or its drop and rewrite) gives it another. 0: not known. */
int dmu_write_stamped(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
                      dmu_tx_t *tx, uint64_t *stamps, size_t nstamps);
/* For the intent log's commit of an asynchronous write: if txg is still the
 * open txg and records first.. first + n - 1 of obj, dirty in it, still have
 * stamps[i] (nothing changed them since the write that left those stamps),
 * writes their bytes at once as blocks (as dmu_write_direct does, allocated
 * together; not yet durable: spa_blocks_flush) that become the records'
 * overrides, so the txg's sync adopts them. 0 and bps[], or -EAGAIN for every
 * other case (the txg closed, a record changed or already has a block, a
 * write failed...): the caller waits for txg instead (blocks already adopted
 * stay the txg's; bps[] are then holes). */
int dmu_write_dirty_blocks(objset_t *os, uint64_t obj, uint64_t first, size_t n, uint64_t txg,
                           const uint64_t *stamps, cairn_blkptr_t *bps);
/* Holes and ranges never written read as zeros. */
/* Block cloning: [dst_off, dst_off + len) of dst_obj becomes [src_off, ...) of
 * src_obj by sharing its blocks (the pool's block reference table counts the
 * extra references; the pool allocates nothing for the data). Object sets of
 * one pool; record-aligned whole records of equal record size (else -EINVAL,
 * -EXDEV for another pool or record size). A source record not yet synced is
 * -EAGAIN: wait for the txg to sync (spa_txg_wait_synced) and call again (the
 * records done so far are done). A block that cannot be shared (gang) is
 * -EOPNOTSUPP from that record on: copy the rest. *cloned counts the records
 * that share their block (hole records are made holes). Open context. */
int dmu_clone_range(objset_t *src_os, uint64_t src_obj, uint64_t src_off, objset_t *dst_os,
                    uint64_t dst_obj, uint64_t dst_off, uint64_t len, dmu_tx_t *tx,
                    uint64_t *cloned);
int dmu_read(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf);
/* dmu_read for callers that must not wait for a device (a connection thread):
 * served only from memory - dirty records and the ARC - or -EWOULDBLOCK, and
 * the caller goes to dmu_read on a thread that may block. Only data records
 * count: the dnode and indirect blocks are read if they are not resident. */
int dmu_read_memory(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf);
/* dmu_read (memory_only: dmu_read_memory) that lends ARC buffers instead of
 * copying: a record (or part of one) of at least DMU_LEND_MIN bytes found in
 * ARC memory, whose logical bytes the ARC keeps, is appended to spans (pos
 * relative to buf, its buffer held) and its room in buf is left untouched;
 * every other byte is in buf as dmu_read leaves it. When spans is full the
 * rest is copied. On error nothing is added. The caller sends buf with the
 * spans laid over it and then calls cairn_spans_release(). Why: a cached
 * NFS READ then costs the socket's copy only (src/arc/arc.c, "Lending"). */
#define DMU_LEND_MIN ((uint32_t)16384)
int dmu_read_spans(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf,
                   bool memory_only, cairn_spans_t *spans);
/* Whether dmu_write of [off, off + len) of obj might wait for a device now: a
 * record it changes only in part is neither dirty, a hole nor in ARC memory
 * (it would be read from disk), or dmu_tx_begin would wait on the write
 * throttle. For a front end that runs writes on its connection thread when
 * they need no device and hands the rest to its workers; false is a forecast
 * (the ARC may let go of a record meanwhile), never a lock. */
bool dmu_write_would_wait(objset_t *os, uint64_t obj, uint64_t off, uint64_t len);
/* Where data or a hole begins at or after *off, at record granularity (a
 * record is data if it has a block, or is dirty and not all zeros; a record
 * freed or never written is a hole), as readers see the object now, before
 * and after its txg syncs. dmu_next_data: -ENXIO when no data lies at or after
 * *off. dmu_next_hole always finds one: past the last record written the
 * object is one endless hole. *off is moved forward only. */
int dmu_next_data(objset_t *os, uint64_t obj, uint64_t *off);
int dmu_next_hole(objset_t *os, uint64_t obj, uint64_t *off);
/* Turns whole records in the range into holes and zeroes partial ones. */
int dmu_free_range(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, dmu_tx_t *tx);

/* The bonus buffer: up to DMU_BONUS_MAX bytes kept in the dnode (file attributes). */
int dmu_bonus_write(objset_t *os, uint64_t obj, const void *buf, uint32_t len, dmu_tx_t *tx);
int dmu_bonus_read(objset_t *os, uint64_t obj, void *buf, uint32_t cap, uint32_t *len);

/* ---- enumeration ---- */
/* Calls visit for every block pointer reachable from the pool's last synced MOS
 * root (what the SPA's traverse callback does): each before its subtree, holes
 * never. A visitor returning < 0 stops the walk (returned), > 0 skips the subtree. */
int dmu_traverse_pool(spa_t *spa, spa_bp_visitor_t visit, void *arg);
/* The same walk resumed at from's object set and object (spa_upper_ops_t.traverse). */
int dmu_traverse_pool_from(spa_t *spa, const spa_bookmark_t *from, spa_bp_visitor_t visit,
                           void *arg);

/* ======== extensions for the DSL (datasets, snapshots, clones) ========
 *
 * Block life hooks. An object set may carry hooks, called on the sync thread
 * (one at a time) while it writes out txg: born() for every block it writes
 * (records, indirect blocks, dnode blocks, its objset_phys root) once the
 * block is part of its tree, kill() for every block of its tree it replaces
 * or frees (same set). Without hooks a killed block is freed at once; with
 * hooks, kill() decides (spa_block_free() it, or keep it for a snapshot). */
typedef struct dmu_objset_hooks {
    void (*born)(objset_t *os, const cairn_blkptr_t *bp, uint64_t txg, void *arg);
    void (*kill)(objset_t *os, const cairn_blkptr_t *bp, uint64_t txg, void *arg);
    /* Blocks born at or before the txg this returns are shared (a snapshot or a
     * clone's origin holds them too): the defragmenter leaves them in place.
     * NULL: nothing is shared. */
    uint64_t (*shared_upto)(objset_t *os, void *arg);
} dmu_objset_hooks_t;
void dmu_objset_set_hooks(objset_t *os, const dmu_objset_hooks_t *hooks, void *arg);
/* A read-only object set gives transactions with no txg (every change: -EROFS). */
void dmu_objset_set_readonly(objset_t *os, bool ro);
uint64_t dmu_objset_id(objset_t *os);
/* The name the DMU's log lines give the object set (the DSL's dataset name; a
 * rename sets it again). A read that finds no good copy of a block logs it once,
 * with dataset, object and offset, and enters it in the pool's error log. */
void dmu_objset_set_label(objset_t *os, const char *name);
/* That name, or "<metadata>" / "<objset ID>" for an object set without one. */
void dmu_objset_label(objset_t *os, char *buf, size_t len);
/* What the syncs of txgs not yet synced will allocate for this object set, an
 * estimate from above (data with copies and parity, the indirect blocks it
 * dirties): the dataset layer counts it as used until those txgs are synced. */
uint64_t dmu_objset_space_pending(objset_t *os);
/* The root block pointer as of the last sync (in the pool-sync hook of txg T:
 * as of the end of T). A hole for an object set never written. */
void dmu_objset_root(objset_t *os, cairn_blkptr_t *out);

/* The pool-sync hook (one per process, registered by the DSL): called on the
 * sync thread for every txg after every object set wrote out its changes and
 * before object sets destroyed in txg are freed and the MOS is written. Changes
 * made from it (transactions from dmu_tx_create_sync(), object sets created or
 * destroyed with the *_sync calls) are part of txg. */
/* Called as each pool closes (export, destroy, close, crash), before its DMU state
 * goes: layers above that cache what they read from a pool drop it here. */
typedef void (*dmu_pool_close_hook_t)(spa_t *spa);
void dmu_register_pool_close_hook(dmu_pool_close_hook_t fn);
typedef int (*dmu_pool_sync_hook_t)(spa_t *spa, uint64_t txg);
void dmu_register_pool_sync_hook(dmu_pool_sync_hook_t fn);

/* The pool's meta object set: objects of the layers above (the DSL's dataset
 * tree, properties, dead lists) live there. */
objset_t *dmu_pool_mos(spa_t *spa);
/* One MOS object number the layer above finds its state from (0: none yet).
 * Kept in the directory object's bonus buffer. */
uint64_t dmu_pool_root_obj(spa_t *spa);
int dmu_pool_set_root_obj(spa_t *spa, uint64_t obj, dmu_tx_t *tx);

/* A transaction of txg for syncing context (the pool-sync hook): holds no txg,
 * does no dirty accounting; commit just frees it. */
dmu_tx_t *dmu_tx_create_sync(objset_t *os, uint64_t txg);

/* Syncing context (the pool-sync hook of txg): a new object set whose tree
 * starts as the one under root (NULL or a hole: empty) - clones and snapshots
 * share the blocks; and destroying one, freeing only the blocks born after
 * keep_upto_txg (UINT64_MAX: free nothing - the caller accounts for them;
 * 0: free everything). -EBUSY if it is open. */
int dmu_objset_create_sync(spa_t *spa, uint64_t txg, const char *name,
                           const cairn_blkptr_t *root, uint64_t *id_out);
int dmu_objset_destroy_sync(spa_t *spa, uint64_t txg, const char *name, uint64_t keep_upto_txg);

/* Visits every block of the object set under root born after min_txg, each
 * before its subtree; subtrees whose pointer is not newer are skipped whole
 * (copy-on-write: nothing under an old pointer is newer). Reads from disk. */
int dmu_traverse_objset(spa_t *spa, const cairn_blkptr_t *root, uint64_t min_txg,
                        spa_bp_visitor_t visit, void *arg);

/* The record cache is the ARC (include/cairn/arc.h): clean records read from
 * disk or written by a sync are kept there with every other block. These are
 * the older names for its bound (arc_max) and counters. */
void dmu_cache_set_limit(uint64_t bytes);
typedef struct dmu_cache_stats {
    uint64_t bytes, limit, hits, misses, entries;
} dmu_cache_stats_t;
void dmu_cache_get_stats(dmu_cache_stats_t *out);
/* How the object set's blocks are cached: ARC_POLICY(primarycache, secondarycache)
 * of include/cairn/arc.h (the DSL sets it from the dataset's properties). */
void dmu_objset_set_cache_policy(objset_t *os, uint8_t policy);
uint8_t dmu_objset_cache_policy(objset_t *os);
/* Prefetch: a sequential reader of an object gets the records ahead of it read
 * into the ARC in the background. For tests: wait until no read-ahead is in
 * flight; how many record reads were issued so far. */
/* ---- defragmentation (dmu_defrag.c) ----
 * Random rewrites of a copy-on-write volume or file leave its records scattered
 * on disk, and a sequential read then reads them in small pieces. The
 * defragmenter looks at an object window by window (records that read-ahead
 * reads together) and, where the window's blocks lie in runs shorter than
 * min_run_bytes on average, re-dirties its records with their current content
 * so that the sync writes them anew, side by side. Shared blocks (see
 * dmu_objset_hooks_t.shared_upto) are left alone: rewriting them would double
 * the space they take. A client write racing it always wins. */
typedef struct dmu_defrag_opts {
    uint64_t start_blkid;   /* first record to look at (resuming: the last next_blkid) */
    uint64_t max_bytes;     /* stop after re-dirtying this much (0: no bound) */
    uint32_t window_bytes;  /* records judged together (0: DMU_DEFRAG_WINDOW_DEFAULT) */
    uint32_t min_run_bytes; /* a window whose runs are shorter on average is rewritten
                               (0: DMU_DEFRAG_MIN_RUN_DEFAULT) */
    uint64_t txg_bytes;     /* at most this much re-dirtied per txg; past it the txg is
                               synced first (0: DMU_DEFRAG_TXG_BYTES_DEFAULT) */
    uint32_t idle_ms;       /* nonzero: stop (-EAGAIN) unless the pool saw no client
                               I/O for this long (checked before each window) */
} dmu_defrag_opts_t;
#define DMU_DEFRAG_WINDOW_DEFAULT (1024u * 1024)
#define DMU_DEFRAG_MIN_RUN_DEFAULT (256u * 1024)
#define DMU_DEFRAG_TXG_BYTES_DEFAULT (32ull * 1024 * 1024)
typedef struct dmu_defrag_stats {
    uint64_t windows;           /* windows looked at */
    uint64_t windows_rewritten; /* of which scattered, and re-dirtied */
    uint64_t records;           /* records re-dirtied */
    uint64_t bytes;             /* their logical bytes */
    uint64_t shared_records;    /* records of scattered windows left alone: shared */
    uint64_t next_blkid;        /* where the pass stopped (past the end: done) */
} dmu_defrag_stats_t;
/* One pass over object obj of os (a plain object: a volume's data or a file),
 * adding to *st. Returns 0 at the object's end or at max_bytes, -EAGAIN when the
 * pool was busy (idle_ms) or the record size changed, -ENOSPC while the pool is
 * short of free space (under an eighth, its slop and two txgs' worth), -ENOENT
 * for a free object, -EROFS for a read-only object set, or another -errno. */
int dmu_defrag_object(objset_t *os, uint64_t obj, const dmu_defrag_opts_t *opts,
                      dmu_defrag_stats_t *st);
/* Tests only: called for each scattered window after its block pointers were
 * looked up and before its records are re-dirtied (no transaction open). */
typedef void (*dmu_defrag_test_hook_t)(objset_t *os, uint64_t obj, uint64_t blkid, void *arg);
void dmu_defrag_set_test_hook(dmu_defrag_test_hook_t fn, void *arg);

void dmu_prefetch_wait(void);
uint64_t dmu_prefetch_issued(void);

/* Loaded dnodes (and their cached indirect blocks) are kept while in use or
 * dirty; at each txg sync, once more than the limit are resident (process-wide,
 * default 50000), the least recently used clean ones are evicted. */
void dmu_dnode_set_limit(uint64_t n);
typedef struct dmu_dnode_stats {
    uint64_t resident, limit, evicted;
} dmu_dnode_stats_t;
void dmu_dnode_get_stats(dmu_dnode_stats_t *out);

/* Testing: fn (NULL: none) is called at the start of every dmu_write, in the
 * caller's thread and under the caller's locks, so a test can hold a writer
 * there and check what other threads can do meanwhile. */
typedef void (*dmu_write_hook_t)(objset_t *os, uint64_t obj, uint64_t off, uint64_t len);
void dmu_set_write_hook(dmu_write_hook_t fn);

#endif
