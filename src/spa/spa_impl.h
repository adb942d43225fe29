/*
 * Private structures of the pool layer, shared by the files of src/spa/ only.
 */
#ifndef CAIRN_SPA_IMPL_H
#define CAIRN_SPA_IMPL_H

#define SPA_DEFLATE_VDEVS 256
#include <cairn/log.h>
#include <cairn/metaslab.h>
#include <cairn/spa.h>
#include <cairn/taskq.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdatomic.h>

/* ---------------- on-disk: labels and uberblocks ---------------- */

#define SPA_LABEL_CONFIG_OFFSET (16 * 1024)   /* within a label */
#define SPA_LABEL_CONFIG_SIZE (112 * 1024)
#define SPA_LABEL_RING_OFFSET (128 * 1024)
#define SPA_LABEL_RING_SIZE (128 * 1024)
#define SPA_CONFIG_MAGIC 0x4746434e52494143ULL  /* "CAIRNCFG" */
#define SPA_UBERBLOCK_MAGIC 0x4b4c42524542ULL   /* "UBERBLK" */
#define SPA_VERSION 1
/* Labels and uberblocks of a pool with a block reference table (spa_brt.c):
 * builds that only know version 1 refuse the pool. */
#define SPA_VERSION_BRT 2
#define SPA_PATH_MAX 256
#define SPA_COMMENT_MAX 256

/* One vdev of the tree, in pre-order; the root is entry 0. */
typedef struct spa_vdev_phys {
    uint32_t type;          /* vdev_type_t */
    uint32_t id;
    int32_t parent;         /* index of the parent entry, -1 for the root */
    uint32_t nchildren;
    uint32_t nparity;
    uint32_t ashift;
    uint64_t guid;
    uint64_t asize;
    char path[SPA_PATH_MAX];
} spa_vdev_phys_t;

/* The config area of a label: pool identity, state, properties and the vdev tree. */
typedef struct spa_config_phys {
    uint64_t magic;
    uint64_t version;
    uint8_t cksum[CAIRN_CHECKSUM_LEN]; /* sha256 of the bytes after this field up to `length` */
    uint64_t length;        /* bytes of the whole config, header included */
    uint64_t pool_guid;
    uint64_t config_txg;    /* newer config wins */
    uint64_t leaf_guid;     /* which leaf this label is on */
    uint32_t state;         /* spa_pool_state_t */
    uint32_t nvdevs;
    char name[SPA_NAME_MAX];
    char comment[SPA_COMMENT_MAX];
    uint64_t txg_timeout_ms;
    uint64_t dirty_max;
    uint64_t reserved[16];
    spa_vdev_phys_t vdevs[]; /* nvdevs entries */
} spa_config_phys_t;

typedef struct spa_uberblock_phys {
    uint64_t magic;
    uint64_t version;
    uint64_t txg;
    uint64_t pool_guid;
    uint64_t timestamp;
    uint64_t sm_chain_len;  /* log blocks since the last condensed snapshot */
    cairn_blkptr_t mos_root;
    cairn_blkptr_t sm_head; /* newest space map log block */
    cairn_blkptr_t log_dir; /* the intent-log directory (spa_log.c); a hole when none */
    uint8_t cksum[CAIRN_CHECKSUM_LEN]; /* sha256 of everything before it */
    /* version >= SPA_VERSION_BRT only (version 1 ends above; these read as a hole): */
    cairn_blkptr_t brt_root;            /* the block reference table; a hole when empty */
    uint8_t cksum2[CAIRN_CHECKSUM_LEN]; /* sha256 of everything before it */
} spa_uberblock_phys_t;

/* Per vdev entry, after the vdevs[] array, when the header's reserved[0] is
 * SPA_CONFIG_EXT_MAGIC: the state of offline and resilver (spa_resilver.c). */
#define SPA_CONFIG_EXT_MAGIC 0x5458454e52494143ULL  /* "CAIRNEXT" */
enum {
    SPA_VDEV_EXT_OFFLINE = 1 << 0,
    SPA_VDEV_EXT_FAULTED = 1 << 1,
    SPA_VDEV_EXT_DEGRADED = 1 << 2,
    SPA_VDEV_EXT_SPARE = 1 << 3, /* a replacing entry that is a spare-N */
};
typedef struct spa_vdev_ext_phys {
    uint32_t flags;         /* SPA_VDEV_EXT_* */
    uint32_t ndtl;          /* ranges of dtl in use */
    uint64_t dtl[VDEV_DTL_MAX][2]; /* txgs the leaf may lack, inclusive; end ~0: open */
    uint64_t reserved;
} spa_vdev_ext_phys_t;
_Static_assert(sizeof(spa_vdev_ext_phys_t) == 80, "vdev config extension size");

/* A scan in progress, in the config header's reserved[2..13] when reserved[0]
 * is SPA_CONFIG_EXT_MAGIC, so that a scrub or resilver goes on where it was
 * after a crash or an export (spa_scrub.c). All zero: none. */
#define SPA_CONFIG_SCAN_WORD 2
enum { SPA_SCAN_PHYS_NONE = 0, SPA_SCAN_PHYS_SCRUB = 1, SPA_SCAN_PHYS_RESILVER = 2 };
enum { SPA_SCAN_PHYS_FUNC_MASK = 0xff, SPA_SCAN_PHYS_SEQUENTIAL = 1 << 8 };
/* The resume position past the blocks of the layer above: the pool's own. */
#define SPA_SCAN_POS_POOL UINT64_MAX
typedef struct spa_scan_phys {
    uint64_t func;           /* SPA_SCAN_PHYS_* | flags */
    uint64_t pass_txg;       /* the pass covers blocks born up to this txg */
    uint64_t objset, object; /* resume here: every block before was scanned */
    uint64_t start_time;     /* wall clock second the scan began */
    uint64_t to_examine, scanned, examined, issued, repaired, errors;
    uint64_t reserved;
} spa_scan_phys_t;
_Static_assert(sizeof(spa_scan_phys_t) == 12 * 8, "scan record fits reserved[2..13]");
/* Hot spares, after the extension when the header's
 * reserved[SPA_CONFIG_SPARES_WORD] (their count) is nonzero (spa_spare.c). */
#define SPA_CONFIG_SPARES_WORD 14
#define SPA_MAX_SPARES 16
typedef struct spa_spare_phys {
    uint64_t guid;
    char path[SPA_PATH_MAX];
} spa_spare_phys_t;
_Static_assert(sizeof(spa_spare_phys_t) == 264, "spare config entry size");

/* The host that imported the pool (spa_mmp.c), after the spares when the flags
 * word has SPA_CONFIG_FLAG_HOSTREC. hostid 0: none (a tool, or exported). */
#define SPA_HOSTNAME_MAX 64
typedef struct spa_host_phys {
    uint64_t hostid;
    char hostname[SPA_HOSTNAME_MAX];
} spa_host_phys_t;
_Static_assert(sizeof(spa_host_phys_t) == 72, "host record size");

/* A multihost (MMP) heartbeat record, at SPA_LABEL_MMP_OFFSET of a label, in
 * its own SPA_LABEL_MMP_SIZE bytes so the uberblock ring is untouched
 * (docs/ondisk-format.md 1.4). */
#define SPA_LABEL_MMP_OFFSET (12 * 1024)
#define SPA_LABEL_MMP_SIZE (4 * 1024)
#define SPA_MMP_MAGIC 0x504d4d4e52494143ULL /* "CAIRNMMP" */
enum {
    SPA_MMP_KIND_HEARTBEAT = 1, /* written by the host that has the pool imported */
    SPA_MMP_KIND_CLAIM = 2,     /* written by a host at the end of its activity check */
};
typedef struct spa_mmp_phys {
    uint64_t magic;
    uint64_t version;
    uint64_t pool_guid;
    uint64_t hostid;
    uint64_t seq;           /* per writer, +1 a record; starts at a random value each import */
    uint64_t timestamp;     /* wall clock, ns since the epoch */
    uint64_t config_txg;    /* the writer's label config txg */
    uint32_t interval_ms;   /* the writer's mmp_interval */
    uint32_t fail_intervals;/* the writer's mmp_fail_intervals */
    uint32_t kind;          /* SPA_MMP_KIND_* */
    uint32_t reserved;
    char hostname[SPA_HOSTNAME_MAX];
    uint8_t cksum[CAIRN_CHECKSUM_LEN]; /* sha256 of everything before it */
} spa_mmp_phys_t;
_Static_assert(sizeof(spa_mmp_phys_t) == 168, "mmp record size");

/* The layouts above are the on-disk format (docs/ondisk-format.md). */
_Static_assert(sizeof(spa_vdev_phys_t) == 296, "vdev config entry size");
_Static_assert(offsetof(spa_config_phys_t, vdevs) == 552, "config header size");
_Static_assert(offsetof(spa_uberblock_phys_t, brt_root) == 464, "uberblock version 1 size");
_Static_assert(sizeof(spa_uberblock_phys_t) == 624, "uberblock size");
_Static_assert(offsetof(spa_uberblock_phys_t, mos_root) == 48, "uberblock layout");

/* ---------------- in memory ---------------- */

typedef struct spa_errlist {   /* sorted bookmarks (spa_errlog.c) */
    spa_bookmark_t *v;
    size_t n, cap;
} spa_errlist_t;

typedef struct spa_txg_state {
    pthread_mutex_t lock;
    /* Three conditions, so a change wakes only who waits for it: a write's
     * tx release must not wake the sync thread unless it is the last holder of
     * the txg being quiesced. */
    pthread_cond_t sync_cv;         /* the sync thread: a reason to close the open txg */
    pthread_cond_t quiesce_cv;      /* the sync thread: the quiescing txg's holders left */
    pthread_cond_t done_cv;         /* waiters: a txg synced, the pool failed or stopped */
    uint64_t open_txg;
    uint64_t quiescing_txg;         /* 0 when none */
    uint64_t syncing_txg;           /* 0 when none */
    uint64_t synced_txg;
    uint64_t holders[4];            /* indexed by txg & 3 */
    uint64_t dirty[4];
    uint64_t space[4];              /* bytes txg will allocate, estimated (spa_space_pending) */
    uint64_t freeing[4];            /* bytes txg will free, estimated (spa_space_freeing) */
    bool touched[4];
    uint64_t wait_target;           /* highest txg someone waits for */
    uint64_t last_sync_ns;
    bool stop;
    bool failed;                    /* a sync failed: the pool stops accepting writes */
    pthread_t thread;
    bool thread_running;
} spa_txg_state_t;

struct spa {
    char name[SPA_NAME_MAX];
    uint64_t guid;
    vdev_t *root;
    uint32_t ntop;
    bool readonly;
    uint32_t ashift;
    char comment[SPA_COMMENT_MAX];  /* changed under config_lock (the labels read it) */
    /* Tunables an administrator changes (spa_prop_set) while the sync thread
     * and writers read them: atomics. */
    _Atomic uint64_t txg_timeout_ms;
    _Atomic uint64_t dirty_max;
    bool dirty_max_set;             /* set by an administrator: kept in the labels (config_lock) */
    uint64_t config_txg;

    spa_uberblock_phys_t ub;        /* the last durable uberblock */
    uint32_t ub_slot_size;

    /* allocation: one allocator per top-level vdev, indexed by vdev id */
    metaslab_t **ms;
    void *sm_chain;                 /* spa_sm_chain_t, see spa_spacemap.c */
    pthread_mutex_t rotor_lock;
    /* Held while one write batch allocates all its blocks, so they lie end to
     * end (one device write, and one read for a stream's read-ahead) instead of
     * interleaved with another sync worker's. */
    pthread_mutex_t batch_alloc_lock;
    uint32_t rotor;
    uint64_t rotor_bytes;

    spa_txg_state_t tx;
    /* Allocated bytes per logical byte, x1024, for blocks of 512 << i bytes: the
     * worst over the data vdevs (raidz parity and padding), for estimates of what
     * dirty data will take once written (spa_space_estimate). Set at open. */
    uint32_t asize_ratio[12];       /* rewritten by a vdev add while writers read: __atomic */
    /* Per top-level vdev: deflated bytes per 512-byte sector of it, so that
     * (asize >> 9) * deflate is what the user's data took without raidz
     * parity and padding (512 on a disk or mirror, about 341 on a 6-wide
     * raidz2). Vdevs past the array count as undeflated. */
    _Atomic uint32_t deflate[SPA_DEFLATE_VDEVS];
    /* Every estimate given to spa_dirty_add and every allocation, ever: only
     * grows (spa_space_claimed). */
    _Atomic uint64_t space_claimed;

    /* Live changes to the vdev tree (spa_vdev.c), applied by the sync thread at the
     * start of a txg's sync. root->children and ms have room for SPA_MAX_TOP top-level
     * vdevs from the start, so adding one never moves an array under a reader. */
    pthread_mutex_t config_lock;    /* the tree and config_txg as the labels see them */
    vdev_t **pending_add;           /* prepared top-level vdevs (NULL-terminated) for the sync */
    int32_t pending_remove;         /* top-level id to remove, -1: none */
    _Atomic int32_t removing;             /* log vdev being emptied (no new log blocks), -1: none */
    int config_change_err;          /* result of the last change applied */
    uint64_t config_change_seq, config_done_seq;
    vdev_t **retired;               /* removed top-level vdevs and displaced holes, freed
                                     * with the pool (a reader may still hold one) */
    size_t nretired;
    metaslab_t **retired_ms;        /* their allocators, for the same reason */
    size_t nretired_ms;
    void **retired_mem;             /* children arrays replaced under readers (attach, detach) */
    size_t nretired_mem;
    bool sm_condense;               /* write a space map snapshot in the next sync */
    /* Ids (bit v) of removed vdevs whose records or log region the durable space map
     * log or log directory may still hold (dropped at import, rewritten by the first
     * sync): a vdev added in that sync must not take such an id, or a crash before
     * its uberblock would replay the old vdev's records onto the new one. Atomic:
     * the sync thread drops ids while an add reads them under the config lock. */
    _Atomic uint32_t stale_ids;
    /* Growing vdevs whose leaves grew (spa_expand.c), config lock. */
    bool autoexpand;                /* pool property, kept in the labels */
    /* Multihost protection (spa_mmp.c): the property, and the heartbeat thread. */
    bool multihost;                 /* pool property, kept in the labels (config lock) */
    spa_host_phys_t last_host;      /* who imported it last, from the labels at import */
    struct spa_mmp *mmp;            /* NULL while no heartbeats are written */
    _Atomic bool mmp_suspended;     /* it gave way to another host (spa_suspend) */
    _Atomic bool tx_ready;          /* spa->tx is initialised (spa_txg_init) */
    uint32_t pending_expand;        /* top-level vdevs asked to grow (bit v): online -e */
    int expand_err;                 /* the last asked expansion's result */
    uint64_t expand_probe_ns;       /* leaves were last asked their size */
    _Atomic uint64_t expand_due_ns; /* the same, by the waiting sync thread */

    /* intent-log region and directory (spa_log.c) */
    void *log;
    /* block reference table (spa_brt.c); brt_feature (config_lock): the pool
     * carries version-2 labels and uberblocks */
    void *brt;
    _Atomic bool brt_feature;
    uint64_t import_txg;

    /* upper layer */
    void *upper_priv;
    bool upper_open;

    /* scrub */
    pthread_mutex_t scrub_lock;
    pthread_cond_t scrub_cv;
    spa_scrub_stat_t scrub;
    bool scrub_stop;
    bool resilver_again;            /* a leaf turned stale while a resilver runs */
    /* Wall clock second the pending resilver was asked for (0: none), kept in
     * the labels: after a restart status still says since when. Config lock. */
    uint64_t resilver_since;
    int scan_closing;               /* SPA_SCAN_CLOSE_*: the pool closes, the scan stops */
    bool scan_resuming;             /* the scan starting goes on from scan_resume */
    bool rebuild_asked;             /* (config_lock) the next resilver copies mirrors sequentially */
    spa_scrub_stat_t rebuild_last;  /* (scrub_lock) the last sequential rebuild, once finished */
    spa_scan_phys_t scan_resume;
    /* The scan's persistent record (config_lock): the last checkpoint, or the
     * one read at open until the scan resumes. */
    spa_scan_phys_t scan_saved;
    bool scrub_thread_running;
    pthread_t scrub_thread;
    _Atomic uint64_t last_client_io_ns; /* a client read reached the disks or dirtied data */
    _Atomic uint64_t hold_frees;    /* >0: deferred frees are not released (scrub running) */
    /* Bytes freed and still in their defer window as of the last sync: while
     * nonzero the sync thread runs (empty) txgs of its own, so freed space
     * comes back on an idle pool too (spa_txg.c, txg_should_close). */
    _Atomic uint64_t frees_deferred;
    uint64_t held_synced_txg;       /* frees released up to here before the hold */
    _Atomic uint64_t data_errors;   /* blocks read with no good copy */
    _Atomic uint64_t gang_blocks;   /* blocks written as gang blocks since open (spa_gang.c) */

    /* fault management (spa_fault.c) */
    pthread_mutex_t fault_lock;     /* leaves' error windows and pending faults (after config_lock) */
    taskq_t *fault_tq;              /* applies faults under the config lock; NULL: not started */
    bool fault_queued;              /* a fault_apply task is pending */
    vdev_hooks_t hooks;
    struct spa_probe *probe;        /* missing leaves looked for (spa_probe.c); NULL: not */
    /* hot spares (spa_spare.c), under the config lock: devices the pool may take in
     * place of a FAULTED leaf; not opened while available. */
    spa_spare_phys_t spares[SPA_MAX_SPARES];
    uint32_t nspares;

    /* the error log (spa_errlog.c) */
    pthread_mutex_t errlog_lock;
    spa_errlist_t errlog_last;      /* stored in the pool */
    spa_errlist_t errlog_scrub;     /* found by the scrub in progress */
    bool errlog_scrubbing;
    bool errlog_dirty;              /* last changed since it was stored */
};

extern const spa_upper_ops_t *spa_upper;

/* spa_label.c */
size_t spa_config_size(uint32_t nvdevs);
spa_config_phys_t *spa_config_build(spa_t *spa, spa_pool_state_t state, uint64_t txg);
int spa_config_verify(const spa_config_phys_t *cfg, size_t bufsize);
/* Writes the config into all labels of all available leaves: front labels, flush, back labels, flush. */
int spa_config_write_all(spa_t *spa, spa_pool_state_t state);
/* Reads the newest valid config from any label of one leaf. Caller frees. */
int spa_label_read_config(vdev_t *leaf, spa_config_phys_t **out);
int spa_uberblock_write_all(spa_t *spa, const spa_uberblock_phys_t *ub);
/* Best (highest-txg valid) uberblock on a leaf; -ENOENT when none. */
void spa_uberblock_collect(vdev_t *leaf, uint64_t pool_guid, uint32_t slot_size,
                           spa_uberblock_phys_t **list, size_t *n);
bool spa_uberblock_valid(const spa_uberblock_phys_t *ub, uint64_t pool_guid);
void spa_uberblock_seal(spa_uberblock_phys_t *ub);
uint32_t spa_ub_slot_size(uint32_t ashift);
/* Builds an in-memory vdev tree from a config, opening leaves found in `leaves`
 * (leaf guid -> opened leaf) or by their recorded path. */
vdev_t *spa_vdev_tree_from_config(const spa_config_phys_t *cfg, vdev_t **found, size_t nfound);

/* spa_txg.c */
void spa_txg_init(spa_t *spa, uint64_t first_open_txg);
void spa_txg_start(spa_t *spa);
void spa_txg_stop(spa_t *spa);      /* syncs what is dirty first unless abandoning */
int spa_sync(spa_t *spa, uint64_t txg);

/* spa_zio.c */
int spa_alloc_dvas(spa_t *spa, uint64_t txg, uint64_t psize, int copies, cairn_dva_t *dvas);
int spa_write_dvas(spa_t *spa, const cairn_dva_t *dvas, int n, const void *buf, uint64_t psize);
int spa_block_read_flags(spa_t *spa, const cairn_blkptr_t *bp, void *buf, int vflags,
                         uint64_t *repaired);
bool spa_bp_verify(const cairn_blkptr_t *bp, const void *data);
/* vdev_verify_fn for a plain block: arg is its pointer. */
bool spa_bp_verify_cb(const void *buf, uint64_t psize, void *arg);
/* Reads psize bytes of one of n copies (dvas) into raw (aligned, psize rounded up
 * to a sector) until one verifies; a scrub or resilver read (vflags) checks every
 * copy, and a whole copy that failed is rewritten from the good one unless
 * NOREPAIR. 0 or the last copy's error. */
int spa_read_copies(spa_t *spa, const cairn_dva_t *dvas, int n, uint64_t psize, void *raw,
                    vdev_verify_fn verify, void *arg, int vflags, uint64_t *repaired);

/* spa_gang.c: blocks stored in fragments when no extent holds them whole */
#define SPA_GANG_HEADER_SIZE 4096
#define SPA_GANG_FRAGS 31
typedef struct spa_gang spa_gang_t;
typedef void (*spa_extent_fn)(void *arg, uint32_t vdev, uint64_t offset, uint64_t size);
/* Allocates bp (prepared, psize stored bytes at stored) as a gang block under
 * txg: sets CAIRN_BP_GANG and its DVAs, *out the tree spa_gang_write needs.
 * -ENOSPC when even fragments of one sector do not fit. */
int spa_gang_alloc(spa_t *spa, uint64_t txg, cairn_blkptr_t *bp, const uint8_t *stored,
                   spa_gang_t **out);
int spa_gang_write(spa_t *spa, const cairn_blkptr_t *bp, const spa_gang_t *g, const uint8_t *stored);
void spa_gang_unalloc(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp, spa_gang_t *g);
void spa_gang_destroy(spa_gang_t *g);
/* The stored bytes of gang block bp into raw (bp->psize, verified). */
int spa_gang_read(spa_t *spa, const cairn_blkptr_t *bp, uint8_t *raw, int vflags,
                  uint64_t *repaired);
int spa_gang_extents(spa_t *spa, const cairn_blkptr_t *bp, spa_extent_fn fn, void *arg);
void spa_gang_free(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp);

/* spa_spacemap.c */
int spa_spacemap_sync(spa_t *spa, uint64_t txg, spa_uberblock_phys_t *ub);
int spa_spacemap_load(spa_t *spa);
/* Every block of the space map log chain (for the offline check). */
int spa_spacemap_visit(spa_t *spa, spa_bp_visitor_t visit, void *arg);
void spa_metaslabs_init(spa_t *spa);
void spa_metaslabs_fini(spa_t *spa);

/* spa_brt.c */
void spa_brt_init(spa_t *spa); /* empty */
void spa_brt_fini(spa_t *spa);
int spa_brt_load(spa_t *spa);  /* import: the table of spa->ub */
/* Syncing context, before the space map log: writes the table as of txg if txg changed it. */
int spa_brt_sync(spa_t *spa, uint64_t txg, spa_uberblock_phys_t *ub);
/* The table's own blocks (check, scrub). */
int spa_brt_visit(spa_t *spa, spa_bp_visitor_t visit, void *arg);
/* spa_block_free()'s first step: true when bp has other references, one of
 * which goes now (in txg); the block then stays allocated. */
bool spa_brt_release(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp);

/* spa_log.c */
bool spa_top_is_log(const spa_t *spa, uint32_t v);
void spa_log_init(spa_t *spa);                   /* empty (new pool) */
int spa_log_load(spa_t *spa);                    /* import: directory, region, chain walk */
void spa_log_fini(spa_t *spa);
/* Syncing context, before the space map log: writes the directory if txg changed it
 * (and grows the region reserved on normal vdevs when asked to). */
int spa_log_sync(spa_t *spa, uint64_t txg, spa_uberblock_phys_t *ub);
int spa_log_visit(spa_t *spa, spa_bp_visitor_t visit, void *arg);
/* check: the region's extents as referenced */
void spa_log_add_region_refs(spa_t *spa, range_tree_t **referenced, spa_check_report_t *rep);

/* spa_log.c: bytes of log vdev v in live log blocks. */
uint64_t spa_log_vdev_used(spa_t *spa, uint32_t v);

/* spa.c, shared with spa_vdev.c */
typedef struct leaf_scan_ctx {
    bool force;
    char *err;
    size_t errlen;
    int error;
} leaf_scan_ctx_t;
vdev_t *spa_build_tree(const spa_vdev_spec_t *s, uint32_t ashift, int *errp, char *err,
                       size_t errlen);
/* The shape of a spec (types, counts, leaves that exist and are not listed twice). */
int spa_validate_spec(const spa_vdev_spec_t *root, char *err, size_t errlen);
void spa_check_new_leaf(vdev_t *leaf, void *arg);   /* size and foreign labels; arg: leaf_scan_ctx_t */
void spa_leaf_set_ashift(vdev_t *leaf, void *arg);  /* arg: uint32_t */

/* spa_vdev.c */
#define SPA_MAX_TOP 32
/* Whether top-level id v is a hole: a removed vdev's place (spa_vdev.c). */
/* Lock-free readers of the top-level array (the write path, the log): a
 * vdev added in syncing context stores its slot, then the count, both with
 * release (spa_vdev.c, apply_add); these load them with acquire, so a reader
 * that sees the count sees the slot. */
static inline vdev_t *spa_top_slot(const spa_t *spa, uint32_t v)
{
    if (v >= __atomic_load_n(&spa->ntop, __ATOMIC_ACQUIRE)) return NULL;
    return __atomic_load_n(&spa->root->children[v], __ATOMIC_ACQUIRE);
}
static inline bool spa_top_is_hole(const spa_t *spa, uint32_t v)
{
    vdev_t *top = spa_top_slot(spa, v);
    return top && top->type == VDEV_TYPE_HOLE;
}
/* Top-level vdev v that can hold blocks: NULL beyond the tree or for a hole. */
static inline vdev_t *spa_top_vdev(const spa_t *spa, uint32_t v)
{
    vdev_t *top = spa_top_slot(spa, v);
    return top && top->type != VDEV_TYPE_HOLE ? top : NULL;
}
void spa_vdev_reserve(spa_t *spa);               /* after the tree is built */
void spa_space_estimate_init(spa_t *spa);        /* after the tree is built (spa.c) */
/* The deflation ratio of top-level vdev id (spa.c), set before its first block. */
void spa_deflate_init_top(spa_t *spa, uint32_t id, vdev_t *top);
void spa_vdev_sync_changes(spa_t *spa, uint64_t txg); /* start of spa_sync() */
void spa_vdev_fini(spa_t *spa);
/* spa_expand.c, sync thread with the config lock: notices grown leaves, grows
 * top-level vdevs (autoexpand, online -e). */
void spa_expand_sync(spa_t *spa, uint64_t txg);
/* The waiting sync thread, once per txg_timeout: a leaf grew, a txg should run. */
bool spa_expand_due(spa_t *spa, uint64_t now);
/* Label config header, reserved[SPA_CONFIG_FLAGS_WORD]: pool flags. */
#define SPA_CONFIG_FLAGS_WORD 15
#define SPA_CONFIG_FLAG_AUTOEXPAND (1ULL << 0)
#define SPA_CONFIG_FLAG_MULTIHOST (1ULL << 1)  /* pool property multihost=on */
#define SPA_CONFIG_FLAG_HOSTREC (1ULL << 2)    /* a spa_host_phys_t follows the spares */
/* spa_log.c, for removal: drop the region of log vdev v (syncing context). */
void spa_log_drop_vdev(spa_t *spa, uint32_t v);
/* spa_log.c: -EBUSY when a chain in the directory still reaches vdev v. */
int spa_log_vdev_in_use(spa_t *spa, uint32_t v, uint64_t *os_id);
/* spa_label.c: zeroes the config areas of a removed leaf's labels. */
int spa_label_clear(vdev_t *leaf);
int spa_config_write_all_locked(spa_t *spa, spa_pool_state_t state);
/* The same, but first all four labels of the leaves under first (NULL-terminated
 * top-level vdevs joining the pool), flushed, then every leaf as usual. */
int spa_config_write_new_first_locked(spa_t *spa, spa_pool_state_t state, vdev_t *const *first);

/* spa_rebuild.c: the sequential rebuild of mirror top-level vdev top_id:
 * its allocated space from byte `from` on copied from a readable side to the
 * leaves dst. progress is called after each chunk with the offset copied up
 * to and the bytes copied (0 when the chunk failed; *errors counts those); a
 * negative return stops the copy and is returned. */
typedef int (*spa_rebuild_progress_fn)(spa_t *spa, uint32_t top_id, uint64_t offset,
                                       uint64_t bytes, void *arg);
int spa_rebuild_top(spa_t *spa, uint32_t top_id, uint64_t from, vdev_t *const *dst, size_t ndst,
                    spa_rebuild_progress_fn progress, void *arg, uint64_t *errors);

/* spa_scrub.c */
/* Set in the scan's own thread: its reads are no client I/O (the throttle). */
extern __thread bool spa_in_scan_thread;
static inline void spa_client_io(spa_t *spa)
{
    if (!spa_in_scan_thread) atomic_store_explicit(&spa->last_client_io_ns, cairn_now_ns(),
                                                   memory_order_relaxed);
}
/* Stops the scan as the pool closes; save: its position is made durable, to
 * go on when the pool opens again (else nothing is written: a power cut). */
enum { SPA_SCAN_CLOSE_NONE = 0, SPA_SCAN_CLOSE_SAVE, SPA_SCAN_CLOSE_ABANDON };
void spa_scrub_fini(spa_t *spa, bool save);
/* Pool open, after the resilver check: a scrub the last run left unfinished goes on. */
void spa_scan_resume_saved(spa_t *spa);
int spa_scan_start(spa_t *spa, spa_scan_func_t func);

/* spa_resilver.c */
/* Under config_lock, leaf resilvered: when it is a replacement, its OLD sibling
 * leaves the tree and it takes the replacing vdev's place. */
void spa_vdev_replace_done(spa_t *spa, vdev_t *leaf);
/* spa_vdev.c: a vdev that left the tree, freed with the pool. */
void spa_vdev_retire(spa_t *spa, vdev_t *vd);
/* spa_resilver.c: the resilver began (or resumed) / ended; hook points. */
void spa_resilver_began(spa_t *spa, bool resumed, bool sequential);
void spa_resilver_ended(spa_t *spa, bool finished, const spa_scrub_stat_t *st);
/* spa_resilver.c, pool open: logs left open-ended (by a crash, or a
 * temporary offline) end at open_txg; leaves with a log and in service are stale. */
void spa_dtl_open_fixup(vdev_t *root, uint64_t open_txg);

/* spa_resilver.c, shared with fault management (spa_fault.c). Config lock. */
bool spa_vdev_survives_without(vdev_t *top, vdev_t *leaf);
vdev_t *spa_leaf_by_path(spa_t *spa, const char *path); /* NULL: no such leaf (OLD of a replacement neither) */
/* The tree's leaf at path, any side of a replacing or spare vdev included (a leaf
 * that left the tree for good is no longer under it). */
vdev_t *spa_tree_leaf(spa_t *spa, const char *path); /* a good copy of every block is left */
void spa_resilver_asked(spa_t *spa);               /* a leaf turned stale: resilver since now */
void spa_dtl_close(vdev_t *leaf, uint64_t txg);    /* its open-ended log ends at txg */

/* spa_label.c: the host record of a config; false (zeroed) when it has none. */
bool spa_config_host(const spa_config_phys_t *cfg, spa_host_phys_t *out);

/* spa_mmp.c */
/* The records of every label of the given leaves, in order (leaf by leaf,
 * labels 0..3): out must hold 4 * nleaves; an unreadable or invalid slot is
 * zero. */
void spa_mmp_read_slots(vdev_t *const *leaves, size_t nleaves, uint64_t pool_guid,
                        spa_mmp_phys_t *out);
/* Import of a multihost pool: the activity check and the claim on leaves (the
 * scanned devices of the pool). 0: the pool is ours to import, claimed at
 * *claim_ns (monotonic); -EBUSY with err when another host is active. */
int spa_mmp_import_check(const char *name, uint64_t pool_guid, vdev_t *const *leaves,
                         size_t nleaves, uint64_t *claim_ns, char *err, size_t errlen);
/* Starts the heartbeats of an imported pool whose claim was issued at
 * claim_ns; its tree's write fence follows them. Stop: idempotent. */
void spa_mmp_start(spa_t *spa, uint64_t claim_ns);
void spa_mmp_stop(spa_t *spa);
/* Suspends the pool at once: no write reaches its leaves from now on. */
void spa_suspend(spa_t *spa, const char *why);
/* The records and decisions, pure (tests/unit/test_spa_mmp.c). encode seals rec
 * into a zeroed slot of SPA_LABEL_MMP_SIZE bytes; decode gives false (and a
 * zeroed *out) for a slot that is not a valid record of the pool. */
void spa_mmp_encode(const spa_mmp_phys_t *rec, void *slot);
bool spa_mmp_decode(const void *slot, uint64_t pool_guid, spa_mmp_phys_t *out);
/* The newest valid record of after[] that differs from before[] (the same
 * slots): a host wrote during the check; NULL: quiet. */
const spa_mmp_phys_t *spa_mmp_changed(const spa_mmp_phys_t *before, const spa_mmp_phys_t *after,
                                      size_t n);
/* A slot our claim was written to (written[i]) that now holds another valid
 * record; NULL: the claim stands. */
const spa_mmp_phys_t *spa_mmp_claim_overwritten(const spa_mmp_phys_t *mine, const bool *written,
                                                const spa_mmp_phys_t *after, size_t n);
/* How long the activity check watches: (fail + 1) intervals, of the slowest
 * writer among ours and the records' (bounded like cairnd.conf). And the claim's
 * wait: two intervals. */
uint64_t spa_mmp_import_wait_ms(const spa_mmp_phys_t *slots, size_t n, uint32_t interval_ms,
                                uint32_t fail_intervals);
uint64_t spa_mmp_claim_wait_ms(const spa_mmp_phys_t *slots, size_t n, uint32_t interval_ms);
/* The host record this process writes into the labels. */
void spa_host_record(spa_host_phys_t *out);

/* spa_fault.c */
void spa_fault_init(spa_t *spa);
void spa_fault_start(spa_t *spa);    /* a writable pool: errors reach fault management */
void spa_fault_stop(spa_t *spa);     /* before the tree is freed; idempotent */
void spa_fault_fini(spa_t *spa);
/* Under config_lock: a FAULTED leaf answers again (online, clear): it takes
 * I/O and, when it missed txgs, is stale and resilvered. -ENXIO and an error
 * message when it does not answer. */
int spa_fault_reopen(spa_t *spa, vdev_t *leaf, char *err, size_t errlen);
/* Under config_lock: a leaf that answers (FAULTED, DEGRADED, or missing and
 * back) takes I/O again: ONLINE, its log closed at the open txg, stale and
 * resilvered when the log is not empty; its statechange posted. */
void spa_leaf_back_in_service(spa_t *spa, vdev_t *leaf);
/* A leaf in service whose device is gone though its I/O still works (a file
 * removed or moved away, spa_probe.c): UNAVAIL as an ENXIO would make it,
 * when its vdev can do without it (false: it stays). */
bool spa_fault_leaf_gone(spa_t *spa, vdev_t *leaf);
/* Under config_lock: the root's state recomputed, a change of the pool's
 * health posted as an event. */
void spa_health_refresh_locked(spa_t *spa);

/* spa_probe.c: the thread that looks for missing leaves (started and stopped
 * with fault management), and `online` of a missing leaf (config lock): the
 * device at its path, when it is the very one that left, is taken back. */
void spa_probe_start(spa_t *spa);
void spa_probe_stop(spa_t *spa);
int spa_probe_leaf_locked(spa_t *spa, vdev_t *leaf, char *err, size_t errlen);
/* spa_resilver.c: whether a leaf of psize bytes can serve in top-level vdev top. */
bool spa_leaf_fits(const vdev_t *top, uint64_t psize);

/* spa_label.c: what follows the per-vdev extension of a config (the spares). */
void *spa_config_tail(const spa_config_phys_t *cfg);
/* spa_spare.c: the config's spares section (after the extension) */
size_t spa_spares_size(uint32_t nspares);
void spa_spares_to_config(const spa_t *spa, spa_config_phys_t *cfg); /* fills the section */
void spa_spares_from_config(spa_t *spa, const spa_config_phys_t *cfg);
/* Under config_lock: whether path is one of spa's spares. */
bool spa_spare_listed(const spa_t *spa, const char *path);
/* Under config_lock, `replace FAILED NEW` where FAILED is the failed side of
 * spare vdev sp: the spare takes sp's place (FAILED leaves) and is returned,
 * to be replaced by NEW like any leaf; once NEW is whole it is available again. */
vdev_t *spa_spare_step_aside(spa_t *spa, vdev_t *sp);
/* Under config_lock, `detach` of a side of spare vdev leaf->parent. */
int spa_spare_detach_locked(spa_t *spa, vdev_t *leaf, char *err, size_t errlen);
/* No lock held: an available spare steps in for a leaf just FAULTED (or missing). */
void spa_spare_activate(spa_t *spa, const char *faulted_path);
/* No lock held: a spare steps in for every FAULTED or missing data leaf that has
 * none (at import, after spares are added). */
void spa_spare_activate_all(spa_t *spa);
/* Under config_lock: leaf was just made whole; when it is the failed side of a
 * spare-N vdev and back in service, the spare returns to the list. */
void spa_spare_return_if_whole(spa_t *spa, vdev_t *leaf);

/* spa_errlog.c */
/* resumed: the scrub goes on from a saved position, what it found before
 * (in `last` now) stays known. */
void spa_errlog_scrub_begin(spa_t *spa, bool resumed);
void spa_errlog_scrub_end(spa_t *spa, bool finished);
void spa_errlog_fini(spa_t *spa);

#endif
