/*
 * The record cache: a bounded LRU of clean records.
 *
 * Without it every dmu_read() of a record that is not dirty goes to the disks,
 * and the layers above (ZAP lookups, directory and property lookups, the
 * DSL's dead lists) would read the same few blocks over and over.
 *
 * Why key by block and not by (object set, object, record)? A block written
 * by copy-on-write never changes: a record's new content is a new block with
 * a new birth txg. So a cache keyed by (first DVA, birth txg) needs no
 * invalidation on writes at all - a rewritten record simply names another
 * key, and the stale entry ages out. Snapshots and clones, which share blocks
 * with their head, share cache entries too. A DVA can be reused only after
 * the block was freed and a later txg allocated it, so (DVA, birth) never
 * names two contents. Freeing a block drops its entry early to give the
 * memory back.
 *
 * One process-wide lock guards the table and the LRU list: the critical
 * sections are a hash probe and a memcpy of one record. (The real ARC, with
 * its per-bucket locks and adaptive lists, comes later.)
 */
#include "dmu_impl.h"

#include <cairn/util.h>
#include <stdlib.h>
#include <string.h>

typedef struct cache_ent {
    const spa_t *spa;
    uint64_t k1, birth;
    uint32_t size;
    uint8_t *data;
    struct cache_ent *hnext;             /* hash chain */
    struct cache_ent *prev, *next;       /* LRU list, most recent at head */
} cache_ent_t;

static struct {
    pthread_mutex_t lock;
    cache_ent_t **buckets;
    size_t nbuckets, count;
    cache_ent_t *head, *tail;
    uint64_t bytes, limit, hits, misses;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .limit = 256 * CAIRN_MIB};

static inline uint64_t bp_k1(const cairn_blkptr_t *bp)
{
    return ((uint64_t)bp->dva[0].vdev << 56) | (bp->dva[0].offset >> CAIRN_SECTOR_SHIFT);
}

static inline size_t bucket_of(uint64_t k1, uint64_t birth, size_t nb)
{
    uint64_t h = (k1 ^ (birth * 0xff51afd7ed558ccdULL)) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 17) & (nb - 1);
}

static cache_ent_t **find_slot(const spa_t *spa, uint64_t k1, uint64_t birth)
{
    if (!cache.nbuckets) return NULL;
    cache_ent_t **pp = &cache.buckets[bucket_of(k1, birth, cache.nbuckets)];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->k1 == k1 && (*pp)->birth == birth && (*pp)->spa == spa) return pp;
    return pp;
}

static void lru_unlink(cache_ent_t *e)
{
    if (e->prev) e->prev->next = e->next;
    else cache.head = e->next;
    if (e->next) e->next->prev = e->prev;
    else cache.tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push(cache_ent_t *e)
{
    e->next = cache.head;
    e->prev = NULL;
    if (cache.head) cache.head->prev = e;
    cache.head = e;
    if (!cache.tail) cache.tail = e;
}

static void ent_remove(cache_ent_t *e)
{
    cache_ent_t **pp = find_slot(e->spa, e->k1, e->birth);
    if (pp && *pp == e) *pp = e->hnext;
    lru_unlink(e);
    cache.bytes -= e->size;
    cache.count--;
    free(e->data);
    free(e);
}

static void evict_to(uint64_t limit)
{
    while (cache.bytes > limit && cache.tail) ent_remove(cache.tail);
}

static void grow(void)
{
    size_t nb = cache.nbuckets ? cache.nbuckets * 2 : 1024;
    cache_ent_t **nbk = cairn_zalloc(nb * sizeof(*nbk));
    for (size_t b = 0; b < cache.nbuckets; b++) {
        cache_ent_t *e = cache.buckets[b];
        while (e) {
            cache_ent_t *n = e->hnext;
            size_t i = bucket_of(e->k1, e->birth, nb);
            e->hnext = nbk[i];
            nbk[i] = e;
            e = n;
        }
    }
    free(cache.buckets);
    cache.buckets = nbk;
    cache.nbuckets = nb;
}

static void insert_locked(const spa_t *spa, const cairn_blkptr_t *bp, const void *data)
{
    if (bp->lsize == 0 || bp->lsize > cache.limit / 8) return;
    uint64_t k1 = bp_k1(bp);
    cache_ent_t **pp = find_slot(spa, k1, bp->birth_txg);
    if (pp && *pp) return;
    if (cache.count + 1 > cache.nbuckets) grow();
    evict_to(cache.limit - bp->lsize);
    cache_ent_t *e = cairn_zalloc(sizeof(*e));
    e->spa = spa;
    e->k1 = k1;
    e->birth = bp->birth_txg;
    e->size = bp->lsize;
    e->data = malloc(bp->lsize);
    if (!e->data) abort();
    memcpy(e->data, data, bp->lsize);
    pp = find_slot(spa, k1, e->birth);
    *pp = e;
    lru_push(e);
    cache.bytes += e->size;
    cache.count++;
}

int dmu_cache_read(spa_t *spa, const cairn_blkptr_t *bp, void *buf)
{
    pthread_mutex_lock(&cache.lock);
    cache_ent_t **pp = find_slot(spa, bp_k1(bp), bp->birth_txg);
    if (pp && *pp && (*pp)->size == bp->lsize) {
        cache_ent_t *e = *pp;
        memcpy(buf, e->data, e->size);
        lru_unlink(e);
        lru_push(e);
        cache.hits++;
        pthread_mutex_unlock(&cache.lock);
        return 0;
    }
    cache.misses++;
    pthread_mutex_unlock(&cache.lock);
    int err = spa_block_read(spa, bp, buf);
    if (err) return err;
    pthread_mutex_lock(&cache.lock);
    insert_locked(spa, bp, buf);
    pthread_mutex_unlock(&cache.lock);
    return 0;
}

void dmu_cache_insert(const spa_t *spa, const cairn_blkptr_t *bp, const void *data)
{
    if (cairn_bp_is_hole(bp)) return;
    pthread_mutex_lock(&cache.lock);
    insert_locked(spa, bp, data);
    pthread_mutex_unlock(&cache.lock);
}

void dmu_cache_drop(const spa_t *spa, const cairn_blkptr_t *bp)
{
    pthread_mutex_lock(&cache.lock);
    cache_ent_t **pp = find_slot(spa, bp_k1(bp), bp->birth_txg);
    if (pp && *pp) ent_remove(*pp);
    pthread_mutex_unlock(&cache.lock);
}

/* A pool closing: its blocks may be rewritten differently after a crash and
 * re-import (a txg that never committed is written again), and another pool
 * may later get the same spa_t address. */
void dmu_cache_purge_pool(const spa_t *spa)
{
    pthread_mutex_lock(&cache.lock);
    cache_ent_t *e = cache.head;
    while (e) {
        cache_ent_t *n = e->next;
        if (e->spa == spa) ent_remove(e);
        e = n;
    }
    pthread_mutex_unlock(&cache.lock);
}

void dmu_cache_set_limit(uint64_t bytes)
{
    pthread_mutex_lock(&cache.lock);
    cache.limit = bytes;
    evict_to(bytes);
    pthread_mutex_unlock(&cache.lock);
}

void dmu_cache_get_stats(dmu_cache_stats_t *out)
{
    pthread_mutex_lock(&cache.lock);
    out->bytes = cache.bytes;
    out->limit = cache.limit;
    out->hits = cache.hits;
    out->misses = cache.misses;
    out->entries = cache.count;
    pthread_mutex_unlock(&cache.lock);
}
