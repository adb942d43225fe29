/*
 * The defragmenter: gathering an object's scattered records side by side again.
 *
 * WHY. Copy-on-write never overwrites a record in place: each rewrite goes
 * wherever the sync's allocation puts that txg's data. A volume written in
 * sequence lies in long runs on disk; after random 8 KiB rewrites of it
 * neighbouring records lie far apart, and read-ahead, which reads the blocks of
 * a 1 MiB task that lie end to end with one system call each
 * (spa_blocks_prefetch), reads 8-16 KiB at a time instead of hundreds of KiB
 * (docs/benchmarks.md, "Sequential reads after random rewrites").
 *
 * HOW. An object is looked at window by window, a window being the records
 * one read-ahead task carries (1 MiB by default). The window's block pointers
 * (from the tree; records dirty in memory count as holes) are sorted by place
 * as read-ahead sorts them, and cut into runs of blocks that lie end to end on
 * one vdev. A window whose runs are on average shorter than min_run_bytes is
 * scattered: its records are re-dirtied in one transaction with their current
 * content (dnode_redirty_impl), so the sync writes them as any client write,
 * in record order and allocated together (one spa_block_write_many batch per
 * megabyte), and frees the old blocks through the object set's kill hook.
 *
 * WHAT IT LEAVES ALONE.
 *   - Shared blocks: born at or before the object set's shared_upto hook's txg
 *     (its newest snapshot, a clone's origin). Their old copy would stay for the
 *     snapshot, so a rewrite would double the space for no gain to the snapshot.
 *     Cloned blocks (with references in the pool's block reference table) too.
 *   - Records a client changed: the check that the record is still in the
 *     block looked up, and the re-dirtying, are done under the record's shard
 *     mutex (dnode.c), so a client write before it leaves the record to the
 *     client, and one after it changes the copy the defragmenter made.
 * BOUNDS. One transaction per window, at most txg_bytes re-dirtied per txg
 * (past it, the txg is synced before the next window), and with idle_ms set,
 * nothing while clients use the pool (its own reads and dirtied data are not
 * counted as client I/O: spa_background_thread). A rewrite allocates before it
 * frees, so it stops (-ENOSPC) while less than an eighth of the pool, its slop
 * and a txg's worth are free: defragmenting must never be what fills a pool.
 */
#include "dmu_impl.h"

#include <cairn/util.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static _Atomic(dmu_defrag_test_hook_t) test_hook;
static void *_Atomic test_hook_arg;

void dmu_defrag_set_test_hook(dmu_defrag_test_hook_t fn, void *arg)
{
    atomic_store(&test_hook_arg, arg);
    atomic_store(&test_hook, fn);
}

typedef struct place {
    uint32_t vdev;
    uint64_t offset, asize;
} place_t;

static int place_cmp(const void *a, const void *b)
{
    const place_t *x = a, *y = b;
    if (x->vdev != y->vdev) return x->vdev < y->vdev ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The number of runs the window's blocks form on disk (0: no block), and their
 * allocated bytes. Gang blocks are runs of their own. */
static size_t window_runs(const cairn_blkptr_t *bps, size_t n, place_t *tmp, uint64_t *bytes)
{
    size_t k = 0;
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (cairn_bp_is_hole(&bps[i])) continue;
        const cairn_dva_t *d = &bps[i].dva[0];
        tmp[k++] = (place_t){d->vdev, d->offset, cairn_dva_asize(d)};
        *bytes += cairn_dva_asize(d);
    }
    if (k == 0) return 0;
    qsort(tmp, k, sizeof(*tmp), place_cmp);
    size_t runs = 1;
    for (size_t i = 1; i < k; i++)
        if (tmp[i].vdev != tmp[i - 1].vdev || tmp[i].offset != tmp[i - 1].offset + tmp[i - 1].asize)
            runs++;
    return runs;
}

static bool pool_has_room(spa_t *spa, uint64_t txg_budget)
{
    spa_space_t sp;
    spa_get_space(spa, &sp);
    uint64_t pending = spa_space_pending(spa);
    uint64_t reserve = spa_slop(spa) + sp.size / 8 + 2 * txg_budget;
    return sp.free > pending && sp.free - pending > reserve;
}

int dmu_defrag_object(objset_t *os, uint64_t obj, const dmu_defrag_opts_t *opts,
                      dmu_defrag_stats_t *st)
{
    uint64_t window = opts->window_bytes ? opts->window_bytes : DMU_DEFRAG_WINDOW_DEFAULT;
    uint64_t min_run = opts->min_run_bytes ? opts->min_run_bytes : DMU_DEFRAG_MIN_RUN_DEFAULT;
    uint64_t txg_budget = opts->txg_bytes ? opts->txg_bytes : DMU_DEFRAG_TXG_BYTES_DEFAULT;
    uint64_t idle_ns = (uint64_t)opts->idle_ms * 1000000ull;
    st->next_blkid = opts->start_blkid;
    if (os->readonly || spa_readonly(os->dp->spa)) return -EROFS;
    if (obj == 0) return -ENOENT;
    dnode_t *dn = dnode_hold(os, obj, false);
    if (!dn) return -ENOENT;
    dn_rlock(dn);
    uint8_t type = dn->cur.type;
    uint32_t rs = dn->cur.datablksz;
    bool written = (dn->cur.flags & DNODE_FLAG_WRITTEN) != 0;
    uint64_t maxblkid = dn->cur.maxblkid;
    dn_unlock(dn);
    int err = 0;
    if (type == DNODE_TYPE_FREE) err = -ENOENT;
    /* Only user data: metadata objects are small or written by their own layer. */
    if (err || type != DNODE_TYPE_PLAIN || !written || rs == 0 || window / rs < 2) {
        dnode_rele(dn);
        return err;
    }
    size_t n = (size_t)(window / rs);
    cairn_blkptr_t *bps = cairn_zalloc(n * sizeof(*bps));
    place_t *tmp = cairn_zalloc(n * sizeof(*tmp));
    spa_t *spa = os->dp->spa;
    bool was_background = spa_background_thread(true);
    uint64_t done_bytes = 0, last_txg = 0, txg_bytes = 0;
    uint64_t b = opts->start_blkid - opts->start_blkid % n; /* the same windows when resuming */
    for (; b <= maxblkid; b += n) {
        if (opts->max_bytes && done_bytes >= opts->max_bytes) break;
        if (idle_ns && spa_client_idle_ns(spa) < idle_ns) {
            err = -EAGAIN;
            break;
        }
        if (!pool_has_room(spa, txg_budget)) {
            err = -ENOSPC;
            break;
        }
        uint32_t got = dnode_prefetch_bps(dn, b, n, bps);
        if (got != rs) {
            err = got ? -EAGAIN : -ENOENT; /* record size changed, or object freed */
            break;
        }
        st->windows++;
        uint64_t bytes;
        size_t runs = window_runs(bps, n, tmp, &bytes);
        if (runs < 2 || bytes / runs >= min_run) continue;
        uint64_t shared_upto = os->hooks.shared_upto ? os->hooks.shared_upto(os, os->hooks_arg) : 0;
        size_t mine = 0;
        for (size_t i = 0; i < n; i++) {
            if (cairn_bp_is_hole(&bps[i])) continue;
            /* A cloned block (another reference in the block reference
             * table) is shared as a snapshot's is. */
            if (bps[i].birth_txg <= shared_upto || spa_brt_refs(spa, &bps[i]) > 0) {
                memset(&bps[i], 0, sizeof(bps[i]));
                st->shared_records++;
            } else {
                mine++;
            }
        }
        if (mine < 2) continue;
        dmu_defrag_test_hook_t hook = atomic_load(&test_hook);
        if (hook) hook(os, obj, b, atomic_load(&test_hook_arg));
        dmu_tx_t *tx = dmu_tx_begin(os);
        if (dmu_tx_suspended(tx) || dmu_tx_readonly(tx)) {
            err = dmu_tx_readonly(tx) ? -EROFS : -EIO;
            dmu_tx_commit(tx);
            break;
        }
        uint64_t txg = dmu_tx_txg(tx);
        if (txg != last_txg) txg_bytes = 0;
        last_txg = txg;
        int r = dnode_redirty_impl(dn, txg, b, n, bps);
        dmu_tx_commit(tx);
        if (r < 0) {
            err = r;
            break;
        }
        st->windows_rewritten++;
        st->records += (uint64_t)r;
        st->bytes += (uint64_t)r * rs;
        done_bytes += (uint64_t)r * rs;
        txg_bytes += (uint64_t)r * rs;
        if (txg_bytes >= txg_budget) {
            /* Bounded per txg: this one is written before the next window. */
            err = spa_txg_wait_synced(spa, txg);
            txg_bytes = 0;
            if (err) {
                b += n;
                break;
            }
        }
    }
    st->next_blkid = b;
    spa_background_thread(was_background);
    free(bps);
    free(tmp);
    dnode_rele(dn);
    return err;
}
