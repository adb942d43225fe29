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
 * other, and readers never wait for a txg to sync.
 */
#ifndef CAIRN_DMU_H
#define CAIRN_DMU_H

#include <cairn/codec.h>
#include <cairn/spa.h>
#include <cairn/types.h>

typedef struct objset objset_t;
typedef struct dmu_tx dmu_tx_t;

#define DMU_OBJSET_NAME_MAX 200
#define DMU_MIN_RECORDSIZE 512
#define DMU_MAX_RECORDSIZE (1024 * 1024)
#define DMU_BONUS_MAX 320

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
/* Joins the open txg (waiting while the write throttle says dirty data runs ahead). */
dmu_tx_t *dmu_tx_begin(objset_t *os);
uint64_t dmu_tx_txg(const dmu_tx_t *tx);
void dmu_tx_commit(dmu_tx_t *tx);
/* Waits until everything committed to os so far is durable. */
int dmu_objset_sync(objset_t *os);

/* ---- objects ---- */
typedef struct dmu_object_props {
    uint32_t recordsize;           /* power of two, 512 .. 1 MiB */
    cairn_compress_t compress;
    cairn_checksum_t checksum;
    uint8_t copies;                /* 1..3 */
} dmu_object_props_t;

typedef struct dmu_object_info {
    dmu_object_props_t props;
    uint64_t max_offset;           /* end of the highest record ever written (not a file size) */
    uint64_t used_bytes;           /* allocated bytes of its blocks, as of the last sync */
    uint64_t generation;           /* txg that created it */
    uint32_t bonus_len;
} dmu_object_info_t;

int dmu_object_alloc(objset_t *os, const dmu_object_props_t *props, uint64_t *obj, dmu_tx_t *tx);
int dmu_object_free(objset_t *os, uint64_t obj, dmu_tx_t *tx);
int dmu_object_info(objset_t *os, uint64_t obj, dmu_object_info_t *out); /* -ENOENT if free */
/* New compression/checksum/copies apply to records written from now on. */
int dmu_object_set_props(objset_t *os, uint64_t obj, const dmu_object_props_t *props,
                         dmu_tx_t *tx);
/* Calls fn for every allocated object number. */
int dmu_object_list(objset_t *os, void (*fn)(uint64_t obj, void *arg), void *arg);

int dmu_write(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
              dmu_tx_t *tx);
/* Holes and ranges never written read as zeros. */
int dmu_read(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf);
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

#endif
