/*
 * The record cache, now the ARC's: what the DMU reads goes through the
 * adaptive replacement cache (src/arc/arc.c, whose top comment says why one
 * cache replaced the DMU's LRU of decompressed records), carrying the object
 * set's cache policy (its datasets' primarycache and secondarycache). Records
 * the sync writes are put in the ARC by the SPA's write itself, as stored
 * (spa_write_props_t.cache, set in dnode.c), since only it has the compressed
 * bytes.
 *
 * Freed blocks leave the ARC in spa_block_free() and a closing pool's blocks
 * in the SPA's close path, so the drop and purge calls here have nothing left
 * to do; they stay so the DMU's call sites read as before.
 */
#include "dmu_impl.h"

#include <cairn/arc.h>
#include <errno.h>
#include <stdatomic.h>

int dmu_cache_read(objset_t *os, const cairn_blkptr_t *bp, void *buf)
{
    return spa_block_read_cached(os->dp->spa, bp, buf, atomic_load(&os->cache_policy));
}

int dmu_cache_read_memory(objset_t *os, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                          void *buf, cairn_rbuf_t **ref)
{
    if (ref) *ref = NULL;
    spa_t *spa = os->dp->spa;
    uint8_t policy = atomic_load(&os->cache_policy);
    if (spa_readonly(spa) || policy == ARC_POLICY_BYPASS) return -EWOULDBLOCK;
    return arc_lookup_memory_ref(spa_guid(spa), bp, off, len, buf, policy, ref) ? -EWOULDBLOCK
                                                                                : 0;
}

bool dmu_cache_in_memory(objset_t *os, const cairn_blkptr_t *bp)
{
    spa_t *spa = os->dp->spa;
    uint8_t policy = atomic_load(&os->cache_policy);
    if (spa_readonly(spa) || policy == ARC_POLICY_BYPASS) return false;
    return arc_cached(spa_guid(spa), bp);
}

void dmu_cache_drop(const spa_t *spa, const cairn_blkptr_t *bp)
{
    (void)spa;
    (void)bp;
}

void dmu_cache_purge_pool(const spa_t *spa) { (void)spa; }

void dmu_objset_set_cache_policy(objset_t *os, uint8_t policy)
{
    atomic_store(&os->cache_policy, policy);
}

uint8_t dmu_objset_cache_policy(objset_t *os) { return atomic_load(&os->cache_policy); }

void dmu_cache_set_limit(uint64_t bytes) { arc_set_max(bytes); }

void dmu_cache_get_stats(dmu_cache_stats_t *out)
{
    arc_stats_t st;
    arc_get_stats(&st);
    out->bytes = st.size;
    out->limit = st.c_max;
    out->hits = st.hits;
    out->misses = st.misses;
    out->entries = st.entries;
}
