/*
 * Internals of the ZAP layer: the block cache and the registry of open ZAP
 * objects (zap_cache.c), shared with the format code in zap.c. The on-disk
 * format is described at the top of zap.c.
 */
#ifndef CAIRN_ZAP_IMPL_H
#define CAIRN_ZAP_IMPL_H

#include <cairn/zap.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define ZAP_BLOCK_SHIFT 14
#define ZAP_BLOCK_SIZE (1u << ZAP_BLOCK_SHIFT) /* record size of every ZAP object */

/* A cached copy of one block of one ZAP object instance. */
typedef struct zap_blk {
    uint64_t inst;          /* zap_obj_t instance the block belongs to */
    uint64_t blkid;
    uint8_t *data;          /* ZAP_BLOCK_SIZE bytes, equal to what the DMU holds */
    uint64_t dirty_txg;     /* txg this block was last written whole in (0: unknown) */
    uint32_t refcnt;        /* holders; a held block is never evicted */
    uint32_t shard;
    struct zap_blk *hnext;
    struct zap_blk *lru_prev, *lru_next;
} zap_blk_t;

/* Decoded state of one ZAP object; lives in the registry, keyed (pool guid, objset id, obj). */
typedef struct zap_obj {
    /* registry (shard lock) */
    uint64_t guid;
    uint64_t osid;
    uint64_t obj;
    struct zap_obj *hnext;
    struct zap_obj *idle_prev, *idle_next;
    uint32_t refcnt;
    bool in_idle;
    bool removed;           /* no longer in the registry: freed at the last release */
    uint32_t shard;

    /* Serialises writers of this ZAP; readers share it. Everything below is
     * read under it and changed only with it held for writing. */
    pthread_rwlock_t lock;
    objset_t *os;           /* the caller's handle; set and used only under the write lock */
    bool loaded;
    uint64_t inst;          /* unique per load: keys the blocks of this incarnation */
    uint64_t generation;    /* DMU generation of the object when loaded */
    uint32_t flags;         /* ZAP_FLAG_* */
    uint64_t nentries;
    uint64_t salt;
    uint32_t gdepth;        /* global depth of the pointer table (fat) */
    uint32_t ptrtbl_nblks;  /* 0: embedded in block 0 */
    uint64_t ptrtbl_blk;
    uint64_t next_free_blk;
    uint64_t nleaves;
    uint64_t *ptrtbl;       /* 2^gdepth leaf block ids (fat) */
} zap_obj_t;

/* zap_thread_stats() of the calling thread (zap_cache.c). */
extern _Thread_local zap_op_stats_t zap_tls_stats;

/* ---- block cache (zap_cache.c) ---- */
/* The block, from the cache or read through the DMU; held. */
int zap_blk_get(objset_t *os, uint64_t obj, uint64_t inst, uint64_t blkid, zap_blk_t **out);
/* A zeroed block entered in the cache (replacing any copy), held. */
zap_blk_t *zap_blk_new(uint64_t inst, uint64_t blkid);
void zap_blk_rele(zap_blk_t *b);

/* ---- registry ---- */
/* The registry entry for (os, obj), created unloaded if absent; held. */
zap_obj_t *zap_obj_hold(objset_t *os, uint64_t obj);
void zap_obj_rele(zap_obj_t *z);
/* Takes z out of the registry (object destroyed or stale); freed at its last release. */
void zap_obj_forget(zap_obj_t *z);
uint64_t zap_new_instance(void);

#endif
