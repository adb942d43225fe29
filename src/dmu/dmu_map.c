/*
 * A chained hash map keyed by uint64, used for dirty records (blkid), the
 * indirect-block cache (level, blkid) and the dnodes of an object set (object
 * number). Buckets double when the load passes one entry per bucket, so every
 * operation is O(1) on average; callers hold whatever lock protects the map.
 */
#include "dmu_impl.h"

#include <cairn/util.h>
#include <stdlib.h>

static inline size_t map_bucket(const dmu_map_t *m, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
    return (size_t)h & (m->nbuckets - 1);
}

void dmu_map_init(dmu_map_t *m)
{
    m->buckets = NULL;
    m->nbuckets = 0;
    m->count = 0;
}

void dmu_map_fini(dmu_map_t *m)
{
    for (size_t b = 0; b < m->nbuckets; b++) {
        dmu_map_ent_t *e = m->buckets[b];
        while (e) {
            dmu_map_ent_t *n = e->next;
            free(e);
            e = n;
        }
    }
    free(m->buckets);
    dmu_map_init(m);
}

void *dmu_map_get(const dmu_map_t *m, uint64_t key)
{
    if (m->nbuckets == 0) return NULL;
    for (dmu_map_ent_t *e = m->buckets[map_bucket(m, key)]; e; e = e->next)
        if (e->key == key) return e->val;
    return NULL;
}

static void map_grow(dmu_map_t *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : 16;
    dmu_map_ent_t **old = m->buckets;
    size_t oldn = m->nbuckets;
    m->buckets = cairn_zalloc(nb * sizeof(*m->buckets));
    m->nbuckets = nb;
    for (size_t b = 0; b < oldn; b++) {
        dmu_map_ent_t *e = old[b];
        while (e) {
            dmu_map_ent_t *n = e->next;
            size_t nbk = map_bucket(m, e->key);
            e->next = m->buckets[nbk];
            m->buckets[nbk] = e;
            e = n;
        }
    }
    free(old);
}

void dmu_map_put(dmu_map_t *m, uint64_t key, void *val)
{
    if (m->nbuckets) {
        for (dmu_map_ent_t *e = m->buckets[map_bucket(m, key)]; e; e = e->next)
            if (e->key == key) {
                e->val = val;
                return;
            }
    }
    if (m->count + 1 > m->nbuckets) map_grow(m);
    dmu_map_ent_t *e = cairn_zalloc(sizeof(*e));
    size_t b = map_bucket(m, key);
    e->key = key;
    e->val = val;
    e->next = m->buckets[b];
    m->buckets[b] = e;
    m->count++;
}

void *dmu_map_remove(dmu_map_t *m, uint64_t key)
{
    if (m->nbuckets == 0) return NULL;
    dmu_map_ent_t **pp = &m->buckets[map_bucket(m, key)];
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->key == key) {
            dmu_map_ent_t *e = *pp;
            void *v = e->val;
            *pp = e->next;
            free(e);
            m->count--;
            return v;
        }
    }
    return NULL;
}

void **dmu_map_values(const dmu_map_t *m, size_t *n)
{
    void **out = cairn_zalloc((m->count ? m->count : 1) * sizeof(void *));
    size_t k = 0;
    for (size_t b = 0; b < m->nbuckets; b++)
        for (dmu_map_ent_t *e = m->buckets[b]; e; e = e->next) out[k++] = e->val;
    *n = k;
    return out;
}
