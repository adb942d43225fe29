/*
 * DMU internals shared by the src/dmu sources. The on-disk format is described at the
 * top of dnode.c; the in-memory design (dirty records per txg, the indirect
 * cache, locking) there and in objset.c.
 */
#ifndef CAIRN_DMU_IMPL_H
#define CAIRN_DMU_IMPL_H

#include <cairn/dmu.h>
#include <cairn/taskq.h>
#include <pthread.h>
#include <stdatomic.h>

/* ---------------- on-disk structures ---------------- */

#define DNODE_SIZE 512
#define DNODE_SHIFT 9
#define DN_INDBLKSHIFT 17                       /* 128 KiB indirect blocks */
#define DN_IND_BLKSZ (1u << DN_INDBLKSHIFT)
#define DN_EPB_SHIFT (DN_INDBLKSHIFT - 7)       /* 1024 block pointers per indirect */
#define DN_EPB (1u << DN_EPB_SHIFT)
#define DN_MAX_LEVELS 8
#define DN_META_BLKSZ (16 * 1024u)              /* dnode blocks: 32 dnodes */
#define DN_PER_BLOCK (DN_META_BLKSZ / DNODE_SIZE)
#define DN_PER_BLOCK_SHIFT 5
/* Objects are numbered below 2^51 (the meta-dnode's offsets below 2^60). */
#define DMU_MAX_OBJECT ((1ULL << 60) / DNODE_SIZE)
/* The tree of the deepest object (512-byte records up to DMU_MAX_OFFSET, so
 * record ids below 2^54) needs 1 + ceil(54 / 10) = 7 levels: within
 * DN_MAX_LEVELS, and its capacity 1024^6 = 2^60 records (tree_capacity) still
 * fits a u64 while 8 levels (2^70) would not. */
_Static_assert(DMU_MAX_OFFSET / DMU_MIN_RECORDSIZE <= 1ULL << (DN_EPB_SHIFT * (DN_MAX_LEVELS - 2)),
               "DN_MAX_LEVELS - 1 levels hold every record below DMU_MAX_OFFSET");
_Static_assert(DN_EPB_SHIFT * (DN_MAX_LEVELS - 2) < 64, "tree_capacity(7) fits a u64");

enum dnode_type {
    DNODE_TYPE_FREE = 0,
    DNODE_TYPE_PLAIN = 1,     /* user object: records are CAIRN_BT_DATA */
    DNODE_TYPE_DIRECTORY = 2, /* MOS object-set directory: CAIRN_BT_DIRECTORY */
    DNODE_TYPE_META = 3,      /* the meta-dnode: records are CAIRN_BT_DNODE */
    DNODE_TYPE_ZAP = 4,       /* a ZAP (dmu_object_props_t.zap): records are CAIRN_BT_ZAP */
};

#define DNODE_FLAG_WRITTEN 0x1 /* maxblkid is meaningful: a record was written */

typedef struct dnode_phys {
    uint8_t type;
    uint8_t nlevels;
    uint8_t checksum;
    uint8_t compress;
    uint8_t copies;
    uint8_t indblkshift;
    uint16_t flags;
    uint32_t datablksz;
    uint32_t bonuslen;
    uint64_t maxblkid;
    uint64_t used_bytes;
    uint64_t generation;
    uint64_t pad0[3];
    cairn_blkptr_t root;
    uint8_t bonus[DMU_BONUS_MAX];
} dnode_phys_t;
_Static_assert(sizeof(dnode_phys_t) == DNODE_SIZE, "dnode_phys is 512 bytes on disk");

#define OBJSET_MAGIC 0x31534f4e52494143ULL /* "CAIRNOS1" */
#define OBJSET_VERSION 1
#define OBJSET_PHYS_SIZE 1024

typedef struct objset_phys {
    uint64_t magic;
    uint64_t version;
    uint64_t id;
    uint64_t creation_txg;
    uint64_t pad[60];
    dnode_phys_t meta;
} objset_phys_t;
_Static_assert(sizeof(objset_phys_t) == OBJSET_PHYS_SIZE, "objset_phys is 1 KiB on disk");

#define DIR_OBJECT 1                      /* MOS object 1: the object-set directory */
#define DIR_ENTRY_SIZE 512
#define DIR_RECORDSIZE (16 * 1024u)
#define DIR_NAME_LEN 256
#define DIR_ENTRY_USED 0x1

typedef struct dir_entry_phys {
    uint64_t id;
    uint64_t flags;
    uint64_t creation_txg;
    uint64_t reserved;
    char name[DIR_NAME_LEN];
    cairn_blkptr_t root;
    uint8_t pad[DIR_ENTRY_SIZE - 32 - DIR_NAME_LEN - 128];
} dir_entry_phys_t;
_Static_assert(sizeof(dir_entry_phys_t) == DIR_ENTRY_SIZE, "directory entry is 512 bytes");
_Static_assert(DMU_OBJSET_NAME_MAX < DIR_NAME_LEN, "name fits a directory entry");

/* ---------------- a small uint64-keyed hash map ---------------- */

typedef struct dmu_map_ent {
    uint64_t key;
    void *val;
    struct dmu_map_ent *next;
} dmu_map_ent_t;

typedef struct dmu_map {
    dmu_map_ent_t **buckets;
    size_t nbuckets; /* power of two, or 0 before the first insert */
    size_t count;
} dmu_map_t;

void dmu_map_init(dmu_map_t *m);
void dmu_map_fini(dmu_map_t *m); /* frees the entries, not the values */
void *dmu_map_get(const dmu_map_t *m, uint64_t key);
void dmu_map_put(dmu_map_t *m, uint64_t key, void *val); /* inserts or replaces */
void *dmu_map_remove(dmu_map_t *m, uint64_t key);
/* Malloc'd array of the values (caller frees); *n gets the count. */
void **dmu_map_values(const dmu_map_t *m, size_t *n);

/* ---------------- in memory ---------------- */

typedef struct dnode dnode_t;
typedef struct dmu_pool dmu_pool_t;

/* One changed record of one txg. data is immutable once its txg closed. */
typedef struct dmu_rec {
    uint64_t blkid;
    uint8_t *data;
    uint32_t data_cap;         /* dmu_buf_alloc() size of data, 0: not from it */
    /* Large records: the reference-counted buffer data lies in (data_cap 0).
     * Its sync hands the ARC a reference, so the written block is cached
     * without a copy; the bytes are immutable from then on, as data is. */
    cairn_rbuf_t *data_buf;
    /* syncing context */
    dnode_t *dn;
    uint64_t txg;
    spa_write_props_t props;
    uint32_t size;
    cairn_blkptr_t bp;
    int error;
    /* open context, under the record's shard mutex */
    uint64_t mods;             /* stamp of the last change of data (rec_changed) */
    bool has_override;         /* override_bp already holds data: the sync adopts it */
    cairn_blkptr_t override_bp;
} dmu_rec_t;

typedef struct dn_range {
    uint64_t start, end; /* record ids [start, end) */
} dn_range_t;

/* Dirty records are spread over this many maps per slot, each guarded by the
 * dnode's shard mutex of the same index (see "Locking" in dnode.c). */
#define DN_SHARDS 16
static inline unsigned dn_shard(uint64_t blkid) { return (unsigned)(blkid % DN_SHARDS); }

/* A dnode's changes in one txg. */
typedef struct dn_slot {
    uint64_t txg;
    dmu_map_t recs[DN_SHARDS]; /* blkid -> dmu_rec_t, in shard dn_shard(blkid) */
    dn_range_t *frees;     /* whole records freed in this txg before recs were written */
    size_t nfrees, capfrees;
    dnode_phys_t snap;     /* attributes as of the end of txg (tree fields unused) */
    /* Indirect blocks (ind_key) the records dirtied so far make the sync rewrite,
     * each counted once in the space estimate (see "Space estimates" in dnode.c). */
    pthread_mutex_t est_lock;
    dmu_map_t est_inds;
    /* The space the records this txg dirtied will take (the same estimate from
     * above): what the object's used counts for them until the txg syncs. */
    _Atomic uint64_t space_est;
} dn_slot_t;

/* A cached indirect block: the tree as of the last sync (plus the syncing txg's edits). */
typedef struct dn_ind {
    uint8_t level;
    bool dirty;
    uint64_t blkid;
    cairn_blkptr_t *bps; /* DN_EPB entries */
} dn_ind_t;

struct dnode {
    objset_t *os;
    uint64_t obj;          /* UINT64_MAX for the meta-dnode */
    /* Shared: record writes and reads (with shard_lock of the record);
     * exclusive: everything else (attributes, slots, frees, the sync). */
    pthread_rwlock_t lock;
    pthread_mutex_t shard_lock[DN_SHARDS];
    pthread_mutex_t ind_lock; /* inserts into inds under a shared lock */
    dnode_phys_t phys;     /* on disk as of the last completed sync */
    dnode_phys_t cur;      /* attributes including open changes */
    dn_slot_t *slots[4];   /* indexed by txg & 3 */
    dmu_map_t inds;        /* ind_key(level, blkid) -> dn_ind_t */
    _Atomic uint64_t mod_gen; /* bumped by every change */
    _Atomic uint32_t holds;   /* dnode_hold()s not yet released (see dnode.c) */
    uint64_t last_use;        /* os->use_clock at the last hold (os->lock) */
    /* syncing context only */
    uint8_t wnlevels;
    cairn_blkptr_t wroot;
    uint64_t wused;
    uint64_t *dirty_inds[DN_MAX_LEVELS]; /* keys of inds to write, per level */
    size_t ndirty_inds[DN_MAX_LEVELS], capdirty_inds[DN_MAX_LEVELS];
};

typedef struct os_dirty {
    uint64_t txg;
    dnode_t **dns;
    size_t n, cap;
} os_dirty_t;

struct objset {
    dmu_pool_t *dp;
    uint64_t id;
    int refcount;          /* under dp->lock */
    uint64_t destroy_txg;  /* nonzero: destroyed in that txg */
    cairn_blkptr_t root_bp;/* as of the last sync */
    uint64_t creation_txg;
    dnode_t *meta;
    pthread_mutex_t lock;  /* dnodes map, meta_nblocks */
    pthread_mutex_t load_lock;
    pthread_mutex_t alloc_lock;
    pthread_mutex_t dirty_lock;
    dmu_map_t dnodes;      /* obj -> dnode_t */
    uint64_t meta_nblocks; /* dnode blocks that may hold allocated dnodes */
    uint64_t use_clock;    /* os->lock: orders dnode holds for eviction */
    uint64_t alloc_hint;
    uint64_t *freed;       /* objects freed, reusable once that free synced */
    size_t nfreed, capfreed;
    uint64_t dir_slot;     /* directory entry index (not for the MOS) */
    os_dirty_t dirty[4];
    dmu_objset_hooks_t hooks; /* born/kill (the DSL); zeroed: free at once */
    void *hooks_arg;
    bool readonly;
    uint64_t keep_upto_txg; /* destroyed: blocks born up to this txg are not freed */
    _Atomic uint8_t cache_policy; /* ARC_POLICY() of its datasets' primary/secondarycache */
    /* Estimated bytes the sync of each live txg will allocate for this object set
     * (dmu_objset_space_pending), tagged with its txg. */
    pthread_mutex_t space_lock;
    struct { uint64_t txg, bytes; } space_pending[4];
    pthread_mutex_t label_lock;
    char label[DIR_NAME_LEN];  /* dmu_objset_set_label: the name log lines give it */
};

typedef struct dir_ent {
    uint64_t id;
    uint64_t slot;         /* entry index in the directory object */
    char name[DIR_NAME_LEN];
    cairn_blkptr_t root;   /* as of load; objset_t holds the live one */
    uint64_t creation_txg;
    objset_t *os;          /* loaded object set, or NULL */
} dir_ent_t;

struct dmu_pool {
    spa_t *spa;
    taskq_t *tq;           /* sync workers: record and indirect block writes */
    taskq_t *rtq;          /* read workers: records of one large read in parallel */
    pthread_mutex_t lock;  /* directory, objset list */
    objset_t *mos;
    dir_ent_t **ents;
    size_t nents, capents;
    uint64_t next_id;
    uint64_t nslots;       /* directory entry slots in use or ever used */
    objset_t **dead;       /* destroyed, waiting for their txg to sync */
    size_t ndead, capdead;
};

struct dmu_tx {
    objset_t *os;
    uint64_t txg;          /* 0 until assigned (see dmu_tx_begin) or when read-only */
    bool assigned;
    bool readonly;
    bool sync_ctx;         /* dmu_tx_create_sync(): no txg hold, no dirty accounting */
    bool suspended;        /* begun on a suspended pool: every change fails with EIO */
};

/* dnode.c: whether writing [off, off + len) would read a record from disk. */
bool dnode_write_would_read(dnode_t *dn, uint64_t off, uint64_t len);

/* Accounts space the sync of txg will allocate for os (and the pool). */
void objset_space_pending_add(objset_t *os, uint64_t txg, uint64_t bytes);

/* The txg of tx, joining the open one on first use (see dmu_tx_begin()). */
uint64_t dmu_tx_assign(dmu_tx_t *tx);

/* ---------------- dnode.c ---------------- */
static inline void dn_wlock(dnode_t *dn) { pthread_rwlock_wrlock(&dn->lock); }
static inline void dn_rlock(dnode_t *dn) { pthread_rwlock_rdlock(&dn->lock); }
static inline void dn_unlock(dnode_t *dn) { pthread_rwlock_unlock(&dn->lock); }
dnode_t *dnode_create(objset_t *os, uint64_t obj, const dnode_phys_t *phys);
void dnode_destroy(dnode_t *dn);
/* Looks up (loading its dnode block) object obj; NULL if beyond every dnode block
 * unless create, in which case new blocks of free dnodes are made. */
dnode_t *dnode_hold(objset_t *os, uint64_t obj, bool create);
/* A read of block (level, blkid) of obj failed with err: into the pool's error
 * log, and one log line the first time (objset.c). */
void dmu_read_error(objset_t *os, uint64_t obj, unsigned level, uint64_t blkid, uint32_t recsize,
                    int err);
/* Ends a hold of a user object set's dnode (the MOS's are not counted). */
void dnode_rele(dnode_t *dn);
/* Syncing context: evicts clean, unheld dnode blocks beyond the limit. */
void objset_evict_dnodes(objset_t *os);
/* txg-aware primitives; sync_ctx: called by the sync thread (no dirty accounting). */
/* dmu_write_direct(): see include/cairn/dmu.h. */
/* Block cloning of one record (dnode.c, see there). */
int dnode_clone_record(dnode_t *src, uint64_t sblkid, dnode_t *dst, uint64_t txg, uint64_t dblkid);
uint64_t dnode_used_estimate(dnode_t *dn); /* dn->lock held */
int dnode_write_direct(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                       cairn_blkptr_t *bp);
int dnode_write_dirty_blocks(dnode_t *dn, uint64_t txg, uint64_t first, size_t n,
                             const uint64_t *stamps, cairn_blkptr_t *bps);
int dnode_write_stamped(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                        uint64_t *stamps, size_t nstamps);
int dnode_write_impl(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                     bool sync_ctx);
int dnode_read_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf);
/* dmu_next_data / dmu_next_hole (see dmu.h). */
int dnode_next_impl(dnode_t *dn, bool hole, uint64_t *off);
/* The same from memory only (dirty records, the ARC): -EWOULDBLOCK when a data
 * record would have to come from a device. Metadata may still be read. */
int dnode_read_memory_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf);
/* Either of them, lending ARC buffers as spans (dmu_read_spans). */
int dnode_read_spans_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf, bool memory_only,
                          cairn_spans_t *spans);
int dnode_free_range_impl(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len);
/* Sets attributes of a dnode in txg: a new object (type != 0) or a freed one (type 0). */
void dnode_set_alloc(dnode_t *dn, uint64_t txg, uint8_t type, const dmu_object_props_t *p,
                     bool sync_ctx);
bool dnode_is_reusable(dnode_t *dn); /* dn->lock held */
/* Sync of one txg: prepare (frees, list of records), records written by the caller,
 * finish (tree update, indirect blocks). */
int dnode_sync_prepare(dnode_t *dn, uint64_t txg, dmu_rec_t ***recs, size_t *nrecs);
/* Records of one dnode written together (syncing context). */
typedef struct dmu_rec_batch {
    dmu_rec_t **recs;
    size_t n;
} dmu_rec_batch_t;
#define DMU_WRITE_BATCH_BYTES (1024 * 1024)
void dnode_write_recs_task(void *arg);
int dnode_sync_finish(dnode_t *dn, uint64_t txg, dmu_rec_t **recs, size_t nrecs, taskq_t *tq);
int dnode_set_props_locked(dnode_t *dn, uint64_t txg, const dmu_object_props_t *p);
void dnode_set_bonus_locked(dnode_t *dn, uint64_t txg, const void *buf, uint32_t len);
int dnode_free_object_locked(dnode_t *dn, uint64_t txg);
/* Adds a ready-made record to the meta-dnode in syncing context (replacing any). */
void dnode_sync_put_rec(dnode_t *dn, uint64_t txg, uint64_t blkid, uint8_t *data);
void dmu_free_bp(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp);
/* A block leaves / joins os's tree in txg (syncing context): through the hooks. */
void dmu_kill_bp(objset_t *os, uint64_t txg, const cairn_blkptr_t *bp);
void dmu_born_bp(objset_t *os, uint64_t txg, const cairn_blkptr_t *bp);
void *dmu_buf_alloc(size_t size); /* aligned, not zeroed */
/* Frees a dmu_buf_alloc() buffer of that size (kept for reuse when the size is
 * a cached one); free() works too, it only bypasses the cache. */
void dmu_buf_free(void *p, size_t size);
void objset_dirty_dnode(objset_t *os, dnode_t *dn, uint64_t txg);

/* ---------------- dmu_cache.c ---------------- */
/* Reads bp (any context) through the ARC with os's cache policy. */
int dmu_cache_read(objset_t *os, const cairn_blkptr_t *bp, void *buf);
/* Whether the block is in ARC memory under the object set's cache policy. */
bool dmu_cache_in_memory(objset_t *os, const cairn_blkptr_t *bp);
/* Bytes [off, off + len) of bp from ARC memory, or -EWOULDBLOCK (no I/O).
 * With ref, the ARC may lend its buffer instead (*ref held, buf untouched:
 * arc_lookup_memory_ref). */
int dmu_cache_read_memory(objset_t *os, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                          void *buf, cairn_rbuf_t **ref);
/* A block just written with this content (syncing context). */
void dmu_cache_drop(const spa_t *spa, const cairn_blkptr_t *bp);
void dmu_cache_purge_pool(const spa_t *spa);

/* ---------------- dmu_prefetch.c (and its helper in dnode.c) ---------------- */
/* A read of [off, off + len) of dn succeeded: detect sequential streams, read ahead. */
void dmu_prefetch_note(dnode_t *dn, uint64_t off, uint64_t len);
uint32_t dnode_prefetch_bps(dnode_t *dn, uint64_t blkid, size_t n, cairn_blkptr_t *bps);

/* ---------------- dmu_defrag.c (and its helper in dnode.c) ---------------- */
/* Re-dirties the records [blkid, blkid + n) still in the blocks expect[] names,
 * with their current content, in txg; returns how many, or -errno. */
int dnode_redirty_impl(dnode_t *dn, uint64_t txg, uint64_t blkid, size_t n,
                       const cairn_blkptr_t *expect);

/* ---------------- objset.c ---------------- */
dmu_pool_t *dmu_pool(spa_t *spa);

#endif
