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

#include <cairn/analytics.h>
#include <cairn/arc.h>
#include <cairn/util.h>
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>

/* analytics' arc.accesses by dataset: the ARC's lookups during a read count
 * under the object set's label (its dataset's name, set by the DSL). */
static void name_objset(const void *arg, uint64_t key, char *buf, size_t len)
{
    objset_t *os = (objset_t *)arg;
    pthread_mutex_lock(&os->label_lock);
    if (os->label[0]) cairn_strlcpy(buf, os->label, len);
    else if (os == os->dp->mos) snprintf(buf, len, "%s (MOS)", spa_name(os->dp->spa));
    else snprintf(buf, len, "%s objset %llu", spa_name(os->dp->spa), (unsigned long long)os->id);
    pthread_mutex_unlock(&os->label_lock);
    (void)key;
}

static an_tag_t objset_tag(objset_t *os)
{
    return (an_tag_t){spa_guid(os->dp->spa) * 0x9e3779b97f4a7c15ull ^ os->id, name_objset, os};
}

int dmu_cache_read(objset_t *os, const cairn_blkptr_t *bp, void *buf)
{
    an_tag_t tag = objset_tag(os);
    const an_tag_t *prev = an_thread_tag_set(&tag);
    int rc = spa_block_read_cached(os->dp->spa, bp, buf, atomic_load(&os->cache_policy));
    an_thread_tag_set(prev);
    return rc;
}

int dmu_cache_read_memory(objset_t *os, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                          void *buf, cairn_rbuf_t **ref)
{
    if (ref) *ref = NULL;
    spa_t *spa = os->dp->spa;
    uint8_t policy = atomic_load(&os->cache_policy);
    if (spa_readonly(spa) || policy == ARC_POLICY_BYPASS) return -EWOULDBLOCK;
    an_tag_t tag = objset_tag(os);
    const an_tag_t *prev = an_thread_tag_set(&tag);
    bool missed = arc_lookup_memory_ref(spa_guid(spa), bp, off, len, buf, policy, ref);
    an_thread_tag_set(prev);
    return missed ? -EWOULDBLOCK : 0;
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
