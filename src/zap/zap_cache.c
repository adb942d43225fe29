/*
 * The ZAP layer's memory: a bounded cache of ZAP blocks and the registry of
 * ZAP objects in use.
 *
 * WHY A CACHE HERE. The DMU keeps dirty records in memory but reads every
 * clean record from disk, and a ZAP operation touches one leaf (plus block 0
 * for the entry count). Without a cache every lookup would be a disk read and
 * a decompression. The ZAP layer is the only writer of ZAP objects, so it can
 * keep a write-through copy of their blocks that is always equal to what the
 * DMU returns: every change is made to the cached block and handed to
 * dmu_write in the same call, under the object's write lock.
 *
 * BLOCK CACHE. Blocks are keyed by (instance, block id). An instance is a
 * number handed out each time a ZAP object is loaded into the registry, so
 * when a registry entry is dropped or reloaded its old blocks can never be
 * found again; they simply age out of the LRU. The cache is split into
 * ZAP_CACHE_SHARDS shards by key hash, each with its own mutex, hash table,
 * LRU list and an equal share of the global byte limit (zap_cache_set_limit,
 * default 64 MiB), so threads working on different ZAPs rarely meet on a
 * lock and there is no global lock on the hot path. Held blocks (refcnt > 0)
 * are never evicted: a caller holds a block only for the duration of one
 * ZAP operation, so a shard may run over its share by the blocks in use.
 *
 * Two readers of one ZAP (sharing its rwlock) may miss on the same block at
 * once; both read it and the second to insert discards its copy. Writers
 * exclude readers of the same ZAP, so cached data is never read while it
 * changes.
 *
 * REGISTRY. zap_obj_t holds the decoded header and the whole pointer table of
 * one ZAP object, plus the rwlock that orders operations on it. Entries are
 * keyed (pool guid, objset id, object number) in ZAP_REG_SHARDS shards, so an
 * objset closed and opened again finds its ZAPs still cached (its contents
 * did not change: the ZAP layer is their only writer).
 * An entry nobody holds goes on its shard's idle list and the oldest idle
 * entries are freed beyond ZAP_REG_IDLE_MAX per shard. Staleness is checked
 * by the caller (zap.c compares the DMU generation of the object on every
 * hold); zap_objset_evict() drops every entry of an objset and must be called
 * when its contents are replaced underneath (rollback, receive), and should
 * be when it is closed for good (to give the memory back early).
 */
#include "zap_impl.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define ZAP_CACHE_SHARDS 16
#define ZAP_REG_SHARDS 64
#define ZAP_REG_IDLE_MAX 64
#define ZAP_CACHE_DEFAULT_LIMIT (64ull * 1024 * 1024)

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* ---------------- block cache ---------------- */

typedef struct blk_shard {
    pthread_mutex_t lock;
    zap_blk_t **buckets;
    size_t nbuckets;
    size_t count;
    uint64_t bytes;
    zap_blk_t lru;          /* sentinel: lru.lru_next is the most recent */
    uint64_t hits, misses, evictions;
} blk_shard_t;

static blk_shard_t blk_shards[ZAP_CACHE_SHARDS];
static _Atomic uint64_t cache_limit = ZAP_CACHE_DEFAULT_LIMIT;
static _Atomic uint64_t instance_next = 1;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

typedef struct reg_shard {
    pthread_mutex_t lock;
    zap_obj_t **buckets;
    size_t nbuckets;
    size_t count;
    zap_obj_t idle;         /* sentinel; idle.idle_next is the oldest */
    size_t nidle;
} reg_shard_t;

static reg_shard_t reg_shards[ZAP_REG_SHARDS];

static void zap_pool_closing(spa_t *spa);

static void cache_init_once(void)
{
    dmu_register_pool_close_hook(zap_pool_closing);
    for (int i = 0; i < ZAP_CACHE_SHARDS; i++) {
        blk_shard_t *s = &blk_shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->lru.lru_next = s->lru.lru_prev = &s->lru;
    }
    for (int i = 0; i < ZAP_REG_SHARDS; i++) {
        reg_shard_t *r = &reg_shards[i];
        pthread_mutex_init(&r->lock, NULL);
        r->idle.idle_next = r->idle.idle_prev = &r->idle;
    }
}

static inline void cache_init(void)
{
    pthread_once(&cache_once, cache_init_once);
}

uint64_t zap_new_instance(void)
{
    return atomic_fetch_add(&instance_next, 1);
}

void zap_cache_set_limit(uint64_t bytes)
{
    if (bytes < (uint64_t)ZAP_CACHE_SHARDS * ZAP_BLOCK_SIZE * 4)
        bytes = (uint64_t)ZAP_CACHE_SHARDS * ZAP_BLOCK_SIZE * 4;
    atomic_store(&cache_limit, bytes);
}

void zap_cache_get_stats(zap_cache_stats_t *out)
{
    cache_init();
    memset(out, 0, sizeof(*out));
    out->limit = atomic_load(&cache_limit);
    for (int i = 0; i < ZAP_CACHE_SHARDS; i++) {
        blk_shard_t *s = &blk_shards[i];
        pthread_mutex_lock(&s->lock);
        out->bytes += s->bytes;
        out->blocks += s->count;
        out->hits += s->hits;
        out->misses += s->misses;
        out->evictions += s->evictions;
        pthread_mutex_unlock(&s->lock);
    }
}

static inline uint64_t blk_hash(uint64_t inst, uint64_t blkid)
{
    return mix64(inst * 0x9E3779B97F4A7C15ULL ^ blkid);
}

static void lru_unlink(zap_blk_t *b)
{
    b->lru_prev->lru_next = b->lru_next;
    b->lru_next->lru_prev = b->lru_prev;
}

static void lru_push_front(blk_shard_t *s, zap_blk_t *b)
{
    b->lru_next = s->lru.lru_next;
    b->lru_prev = &s->lru;
    s->lru.lru_next->lru_prev = b;
    s->lru.lru_next = b;
}

static zap_blk_t **blk_slot(blk_shard_t *s, uint64_t inst, uint64_t blkid)
{
    if (!s->nbuckets) return NULL;
    zap_blk_t **pp = &s->buckets[(blk_hash(inst, blkid) >> 8) & (s->nbuckets - 1)];
    while (*pp && ((*pp)->inst != inst || (*pp)->blkid != blkid)) pp = &(*pp)->hnext;
    return pp;
}

static void blk_table_grow(blk_shard_t *s)
{
    size_t nb = s->nbuckets ? s->nbuckets * 2 : 64;
    zap_blk_t **nbk = cairn_zalloc(nb * sizeof(*nbk));
    for (size_t i = 0; i < s->nbuckets; i++) {
        zap_blk_t *b = s->buckets[i];
        while (b) {
            zap_blk_t *next = b->hnext;
            size_t j = (blk_hash(b->inst, b->blkid) >> 8) & (nb - 1);
            b->hnext = nbk[j];
            nbk[j] = b;
            b = next;
        }
    }
    free(s->buckets);
    s->buckets = nbk;
    s->nbuckets = nb;
}

static void blk_free(zap_blk_t *b)
{
    free(b->data);
    free(b);
}

/* Removes b from the shard's table and LRU (shard lock held). */
static void blk_unhash(blk_shard_t *s, zap_blk_t *b)
{
    CAIRN_ASSERT(cairn_mutex_held(&s->lock));
    zap_blk_t **pp = blk_slot(s, b->inst, b->blkid);
    if (pp && *pp == b) *pp = b->hnext;
    lru_unlink(b);
    s->count--;
    s->bytes -= ZAP_BLOCK_SIZE;
}

/* Evicts unheld blocks from the cold end until the shard fits its share;
 * returns them in a list to be freed outside the lock. */
static zap_blk_t *blk_evict_locked(blk_shard_t *s)
{
    CAIRN_ASSERT(cairn_mutex_held(&s->lock));
    uint64_t share = atomic_load(&cache_limit) / ZAP_CACHE_SHARDS;
    zap_blk_t *victims = NULL;
    zap_blk_t *b = s->lru.lru_prev;
    while (s->bytes > share && b != &s->lru) {
        zap_blk_t *prev = b->lru_prev;
        if (b->refcnt == 0) {
            blk_unhash(s, b);
            b->hnext = victims;
            victims = b;
            s->evictions++;
        }
        b = prev;
    }
    return victims;
}

static void blk_free_list(zap_blk_t *v)
{
    while (v) {
        zap_blk_t *n = v->hnext;
        blk_free(v);
        v = n;
    }
}

/* Inserts nb (held) unless a copy is present; returns the block now cached, held. */
static zap_blk_t *blk_insert(zap_blk_t *nb, bool replace)
{
    blk_shard_t *s = &blk_shards[nb->shard];
    zap_blk_t *victims = NULL, *dup = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->count + 1 > s->nbuckets) blk_table_grow(s);
    zap_blk_t **pp = blk_slot(s, nb->inst, nb->blkid);
    zap_blk_t *old = *pp;
    if (old && !replace) {
        old->refcnt++;
        lru_unlink(old);
        lru_push_front(s, old);
        pthread_mutex_unlock(&s->lock);
        blk_free(nb);
        return old;
    }
    if (old) {
        /* Replaced content: nobody may be using it (the caller holds the ZAP
         * for writing), so it is dropped from the table now. */
        *pp = old->hnext;
        lru_unlink(old);
        s->count--;
        s->bytes -= ZAP_BLOCK_SIZE;
        if (old->refcnt == 0) dup = old;
        else old->blkid = UINT64_MAX; /* orphan: freed at its last release */
        pp = blk_slot(s, nb->inst, nb->blkid);
    }
    nb->hnext = *pp;
    *pp = nb;
    lru_push_front(s, nb);
    s->count++;
    s->bytes += ZAP_BLOCK_SIZE;
    victims = blk_evict_locked(s);
    pthread_mutex_unlock(&s->lock);
    if (dup) blk_free(dup);
    blk_free_list(victims);
    return nb;
}

static zap_blk_t *blk_alloc(uint64_t inst, uint64_t blkid)
{
    zap_blk_t *b = cairn_zalloc(sizeof(*b));
    b->inst = inst;
    b->blkid = blkid;
    b->refcnt = 1;
    b->shard = (uint32_t)(blk_hash(inst, blkid) % ZAP_CACHE_SHARDS);
    b->data = cairn_alloc_aligned(ZAP_BLOCK_SIZE);
    return b;
}

_Thread_local zap_op_stats_t zap_tls_stats;

void zap_thread_stats(zap_op_stats_t *out) { *out = zap_tls_stats; }

int zap_blk_get(objset_t *os, uint64_t obj, uint64_t inst, uint64_t blkid, zap_blk_t **out)
{
    cache_init();
    zap_tls_stats.blocks++;
    uint32_t sh = (uint32_t)(blk_hash(inst, blkid) % ZAP_CACHE_SHARDS);
    blk_shard_t *s = &blk_shards[sh];
    pthread_mutex_lock(&s->lock);
    zap_blk_t **pp = blk_slot(s, inst, blkid);
    if (pp && *pp) {
        zap_blk_t *b = *pp;
        b->refcnt++;
        lru_unlink(b);
        lru_push_front(s, b);
        s->hits++;
        pthread_mutex_unlock(&s->lock);
        *out = b;
        return 0;
    }
    s->misses++;
    pthread_mutex_unlock(&s->lock);
    zap_tls_stats.reads++;

    zap_blk_t *b = blk_alloc(inst, blkid);
    int err = dmu_read(os, obj, blkid << ZAP_BLOCK_SHIFT, ZAP_BLOCK_SIZE, b->data);
    if (err) {
        blk_free(b);
        return err;
    }
    *out = blk_insert(b, false);
    return 0;
}

zap_blk_t *zap_blk_new(uint64_t inst, uint64_t blkid)
{
    cache_init();
    zap_tls_stats.blocks++;
    return blk_insert(blk_alloc(inst, blkid), true);
}

void zap_blk_rele(zap_blk_t *b)
{
    blk_shard_t *s = &blk_shards[b->shard];
    zap_blk_t *victims = NULL;
    bool orphan;
    pthread_mutex_lock(&s->lock);
    orphan = --b->refcnt == 0 && b->blkid == UINT64_MAX;
    if (!orphan && b->refcnt == 0 && s->bytes > atomic_load(&cache_limit) / ZAP_CACHE_SHARDS)
        victims = blk_evict_locked(s);
    pthread_mutex_unlock(&s->lock);
    if (orphan) blk_free(b);
    blk_free_list(victims);
}

/* ---------------- registry ---------------- */

static inline uint64_t reg_hash(uint64_t guid, uint64_t osid, uint64_t obj)
{
    return mix64(guid ^ mix64(osid) ^ (obj * 0x9E3779B97F4A7C15ULL));
}

static zap_obj_t **reg_slot(reg_shard_t *r, uint64_t h, uint64_t guid, uint64_t osid, uint64_t obj)
{
    zap_obj_t **pp = &r->buckets[(h >> 8) & (r->nbuckets - 1)];
    while (*pp && ((*pp)->guid != guid || (*pp)->osid != osid || (*pp)->obj != obj))
        pp = &(*pp)->hnext;
    return pp;
}

static void reg_grow(reg_shard_t *r)
{
    size_t nb = r->nbuckets ? r->nbuckets * 2 : 16;
    zap_obj_t **nbk = cairn_zalloc(nb * sizeof(*nbk));
    for (size_t i = 0; i < r->nbuckets; i++) {
        zap_obj_t *z = r->buckets[i];
        while (z) {
            zap_obj_t *next = z->hnext;
            size_t j = (reg_hash(z->guid, z->osid, z->obj) >> 8) & (nb - 1);
            z->hnext = nbk[j];
            nbk[j] = z;
            z = next;
        }
    }
    free(r->buckets);
    r->buckets = nbk;
    r->nbuckets = nb;
}

static void zobj_free(zap_obj_t *z)
{
    pthread_rwlock_destroy(&z->lock);
    free(z->ptrtbl);
    free(z);
}

static void idle_unlink(reg_shard_t *r, zap_obj_t *z)
{
    z->idle_prev->idle_next = z->idle_next;
    z->idle_next->idle_prev = z->idle_prev;
    z->in_idle = false;
    r->nidle--;
}

/* Unhashes z (shard lock held). */
static void reg_unhash(reg_shard_t *r, zap_obj_t *z)
{
    CAIRN_ASSERT(cairn_mutex_held(&r->lock));
    zap_obj_t **pp = reg_slot(r, reg_hash(z->guid, z->osid, z->obj), z->guid, z->osid, z->obj);
    if (*pp == z) *pp = z->hnext;
    r->count--;
    z->removed = true;
    if (z->in_idle) idle_unlink(r, z);
}

zap_obj_t *zap_obj_hold(objset_t *os, uint64_t obj)
{
    cache_init();
    uint64_t guid = spa_guid(dmu_objset_spa(os));
    uint64_t osid = dmu_objset_id(os);
    uint64_t h = reg_hash(guid, osid, obj);
    uint32_t sh = (uint32_t)(h % ZAP_REG_SHARDS);
    reg_shard_t *r = &reg_shards[sh];
    pthread_mutex_lock(&r->lock);
    if (r->count + 1 > r->nbuckets) reg_grow(r);
    zap_obj_t **pp = reg_slot(r, h, guid, osid, obj);
    zap_obj_t *z = *pp;
    if (z) {
        if (z->in_idle) idle_unlink(r, z);
        z->refcnt++;
        pthread_mutex_unlock(&r->lock);
        return z;
    }
    z = cairn_zalloc(sizeof(*z));
    z->guid = guid;
    z->osid = osid;
    z->os = os;
    z->obj = obj;
    z->shard = sh;
    z->refcnt = 1;
    pthread_rwlock_init(&z->lock, NULL);
    z->hnext = NULL;
    *pp = z;
    r->count++;
    pthread_mutex_unlock(&r->lock);
    return z;
}

void zap_obj_rele(zap_obj_t *z)
{
    reg_shard_t *r = &reg_shards[z->shard];
    zap_obj_t *victim = NULL;
    bool free_it = false;
    pthread_mutex_lock(&r->lock);
    if (--z->refcnt == 0) {
        if (z->removed) {
            free_it = true;
        } else {
            z->idle_prev = r->idle.idle_prev;
            z->idle_next = &r->idle;
            r->idle.idle_prev->idle_next = z;
            r->idle.idle_prev = z;
            z->in_idle = true;
            r->nidle++;
            if (r->nidle > ZAP_REG_IDLE_MAX) {
                victim = r->idle.idle_next;
                reg_unhash(r, victim);
            }
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (free_it) zobj_free(z);
    if (victim) zobj_free(victim);
}

void zap_obj_forget(zap_obj_t *z)
{
    reg_shard_t *r = &reg_shards[z->shard];
    pthread_mutex_lock(&r->lock);
    if (!z->removed) reg_unhash(r, z);
    pthread_mutex_unlock(&r->lock);
}

/* Drops every registry entry of pool `guid` (of object set osid unless any_os). */
static void reg_evict(uint64_t guid, bool any_os, uint64_t osid)
{
    for (int i = 0; i < ZAP_REG_SHARDS; i++) {
        reg_shard_t *r = &reg_shards[i];
        zap_obj_t *victims = NULL;
        pthread_mutex_lock(&r->lock);
        for (size_t b = 0; b < r->nbuckets; b++) {
            zap_obj_t *z = r->buckets[b];
            while (z) {
                zap_obj_t *next = z->hnext;
                if (z->guid == guid && (any_os || z->osid == osid)) {
                    bool idle = z->refcnt == 0;
                    reg_unhash(r, z);
                    if (idle) {
                        z->hnext = victims;
                        victims = z;
                    }
                }
                z = next;
            }
        }
        pthread_mutex_unlock(&r->lock);
        while (victims) {
            zap_obj_t *n = victims->hnext;
            zobj_free(victims);
            victims = n;
        }
    }
}

void zap_objset_evict(objset_t *os)
{
    cache_init();
    reg_evict(spa_guid(dmu_objset_spa(os)), false, dmu_objset_id(os));
}

/*
 * A pool that closes takes its cached ZAP state with it: once exported, another
 * process may change it, and the same pool (same guid) imported again here must
 * be read from disk, not from what this process remembered.
 */
static void zap_pool_closing(spa_t *spa) { reg_evict(spa_guid(spa), true, 0); }
