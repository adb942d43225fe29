/*
 * Private structures of the POSIX layer: the on-disk znode (bonus buffer),
 * the mounted filesystem and the in-memory node table.
 */
#ifndef CAIRN_ZPL_IMPL_H
#define CAIRN_ZPL_IMPL_H

#include <cairn/zap.h>
#include <cairn/zil.h>
#include <cairn/zpl.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define ZPL_MAGIC 0x314c505au   /* "ZPL1" */
#define ZPL_VERSION 1
#define ZPL_MASTER_OBJ 1        /* the first object of a filesystem's object set */
#define ZPL_PHYS_HDR 112
#define ZPL_INLINE_MAX (DMU_BONUS_MAX - ZPL_PHYS_HDR)

/* phys.flags */
enum {
    ZPL_ZF_EXCL = 1 << 0,         /* verf holds an EXCLUSIVE create's verifier */
    ZPL_ZF_BLKSZ_FIXED = 1 << 1,  /* record size reached recordsize, or several records */
};

/* The attributes of a file, in its dnode's bonus buffer (little-endian). */
typedef struct zpl_phys {
    uint32_t magic;
    uint16_t version;
    uint16_t inline_len;          /* bytes of inline_data in use (short symlinks) */
    uint32_t mode, uid, gid, flags;
    uint64_t nlink, size, gen, parent, change, rdev;
    int64_t atime, mtime, ctime, crtime;
    uint8_t verf[ZPL_VERF_SIZE];
    uint8_t inline_data[ZPL_INLINE_MAX];
} zpl_phys_t;
_Static_assert(sizeof(zpl_phys_t) == DMU_BONUS_MAX, "znode must fill the bonus buffer");
_Static_assert(offsetof(zpl_phys_t, inline_data) == ZPL_PHYS_HDR, "znode header size");

typedef enum zpl_node_kind {
    ZPL_NODE_REAL = 0,
    ZPL_NODE_CTLDIR = 1,          /* /.cairn */
    ZPL_NODE_SNAPDIR = 2,         /* /.cairn/snapshot */
} zpl_node_kind_t;

struct zpl_node {
    zpl_fs_t *fs;
    uint64_t obj;
    zpl_node_kind_t kind;
    uint32_t refcnt;              /* fs->table_lock */
    bool hashed;                  /* fs->table_lock */
    bool dead;                    /* n->lock: the object was freed */
    uint32_t opens;               /* n->lock: zpl_open_hold()s outstanding */
    pthread_rwlock_t lock;        /* attributes, data and (directories) entries */
    pthread_mutex_t data_lock;    /* writers and size changes of a file, before n->lock */
    zpl_phys_t phys;              /* n->lock; authoritative while hashed */
    uint64_t props_gen;           /* n->lock: dataset properties last applied to the object */
    struct zpl_node *hnext;
};

typedef struct zpl_snapmount {
    char name[DSL_NAME_MAX + 1];  /* short snapshot name */
    zpl_fs_t *fs;
} zpl_snapmount_t;

struct zpl_fs {
    dsl_pool_t *dp;
    dsl_dataset_t *ds;
    objset_t *os;
    uint64_t guid;
    bool snapshot;
    char name[DSL_NAME_MAX + 1];
    uint64_t root_obj;
    zpl_fs_t *parent;             /* head this snapshot was mounted through */
    uint32_t mount_refs;          /* zpl_global_lock */
    zpl_fs_t *gnext;              /* the registry of mounted filesystems */

    pthread_mutex_t table_lock;
    zpl_node_t **buckets;
    size_t nbuckets, nnodes;
    uint64_t table_seq;           /* bumped whenever a node is hashed or unhashed */

    pthread_mutex_t rename_lock;  /* cross-directory renames */
    atomic_uint_fast64_t gen_seq;
    _Atomic uint64_t link_max;

    pthread_mutex_t snap_lock;
    zpl_snapmount_t *snaps;
    size_t nsnaps;

    zpl_node_t *ctldir, *snapdir; /* virtual (heads only) */

    /* The unlinked set: a ZAP in the master node ("DELETE_QUEUE") naming, by
     * object number in hex, the files whose last link went while they were
     * open; created on first use. unlinked_lock guards its creation. */
    pthread_mutex_t unlinked_lock;
    uint64_t unlinked_obj;

    /* The xattr index (zpl.c, "extended attributes"): xattr_lock guards its
     * creation. */
    pthread_mutex_t xattr_lock;

    struct zilog *zil;            /* the intent log (src/zil); NULL for snapshots */
};

static inline uint32_t mode_to_dt(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return DT_REG;
    case S_IFDIR: return DT_DIR;
    case S_IFLNK: return DT_LNK;
    case S_IFCHR: return DT_CHR;
    case S_IFBLK: return DT_BLK;
    case S_IFIFO: return DT_FIFO;
    case S_IFSOCK: return DT_SOCK;
    default: return DT_UNKNOWN;
    }
}

/* A directory entry's value: DT_* type << 60 | object number. */
static inline uint64_t dirent_encode(uint32_t dt, uint64_t obj) { return ((uint64_t)dt << 60) | obj; }
static inline uint64_t dirent_obj(uint64_t v) { return v & ((1ull << 60) - 1); }
static inline uint32_t dirent_dt(uint64_t v) { return (uint32_t)(v >> 60); }

/* The DMU properties of a new object: the dataset's, with recordsize (0: the dataset's). */
dmu_object_props_t zpl_object_props(const dsl_dataset_props_t *dp, uint32_t recordsize);

/* zpl_zil.c: the blocks a sync write wrote directly, one per record of the
 * range (holes where the record was copied instead). */
typedef struct zpl_zil_direct {
    uint32_t rs;                  /* the file's record size */
    uint64_t first;               /* record id of bps[0] */
    size_t n;
    cairn_blkptr_t *bps;
    uint64_t *stamps;             /* instead of bps: an asynchronous write's stamps */
    uint64_t txg;                 /* the data's txg (the attributes' may be newer) */
} zpl_zil_direct_t;
/* Whether an asynchronous write of len bytes is logged as zil_log_write_later
 * (where a sync write that large would be written directly). */
bool zpl_zil_write_later(zpl_fs_t *fs, uint64_t len, bool throughput);
/* Writes an asynchronous write's data (n->lock shared, in its transaction)
 * with dmu_write_stamped, for zpl_zil_log_write. */
int zpl_zil_write_stamped(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf,
                          dmu_tx_t *tx, zpl_zil_direct_t *d);
/* Writes a sync write's data (n->lock shared, in its transaction): whole
 * records with dmu_write_direct, the rest with dmu_write. */
int zpl_zil_write_direct(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf,
                         dmu_tx_t *tx, zpl_zil_direct_t *d);
/* zpl_zil.c: the intent-log records of the POSIX layer. Each is called under
 * the locks of every node the operation changed, in its transaction, after
 * the change (so records of dependent operations are queued in the order the
 * operations happened). */
/* A file write; direct: what zpl_zil_write_direct wrote, or NULL. */
void zpl_zil_log_write(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf, dmu_tx_t *tx,
                       bool throughput, const zpl_zil_direct_t *direct);
/* A new node obj (attributes p, record size recordsize, 0 for directories)
 * entered as name in dir; target: a symlink target too long for p's inline data. */
void zpl_zil_log_create(zpl_node_t *dir, const char *name, uint64_t obj, const zpl_phys_t *p,
                        uint32_t recordsize, const char *target, dmu_tx_t *tx);
/* name (node obj, attributes p, nlink already dropped) left dir; freed when its last link went. */
void zpl_zil_log_remove(zpl_node_t *dir, const char *name, uint64_t obj, const zpl_phys_t *p,
                        bool freed, dmu_tx_t *tx);
void zpl_zil_log_link(zpl_node_t *dir, const char *name, zpl_node_t *file, dmu_tx_t *tx);
/* snode moved from sdir/sname to tdir/tname, replacing tnode (or NULL; tnode_freed
 * when that was its last link). */
void zpl_zil_log_rename(zpl_node_t *sdir, const char *sname, zpl_node_t *tdir, const char *tname,
                        zpl_node_t *snode, zpl_node_t *tnode, bool tnode_freed, dmu_tx_t *tx);
/* New attributes of n; size_changed: its size was set (data beyond it freed). */
void zpl_zil_log_setattr(zpl_node_t *n, bool size_changed, dmu_tx_t *tx);
/* The replay function of a filesystem's log (arg: the zpl_fs_t being mounted). */
int zpl_zil_replay(void *arg, zilog_t *zl, const zil_rec_t *rec);
/* Frees the extended attributes of object obj (its attribute ZAP and index
 * entry), if it has any: whoever frees a node calls it in the same transaction. */
int zpl_xattr_free(objset_t *os, uint64_t obj, dmu_tx_t *tx);

#endif
