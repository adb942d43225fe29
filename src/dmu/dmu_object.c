/*
 * The object API of dmu.h: allocation, attributes, data and bonus access.
 * Thin wrappers that validate arguments and route to the dnode primitives in
 * dnode.c, which hold the per-dnode lock.
 *
 * Allocation: a dnode slot is reusable once it is free and has no pending
 * change in any txg, so an object freed in txg T gets its number back only
 * after T synced (until then its blocks are still being released). Freed
 * numbers are remembered so they are reused first; otherwise a hint moves
 * forward through the dnode blocks, creating new ones at the end. A caller
 * may also claim one given number (intent-log replay recreating an object
 * under the number file handles name), under the same reuse rule.
 */
#include "dmu_impl.h"

#include <cairn/util.h>
#include <stdlib.h>
#include <string.h>

static bool props_ok(const dmu_object_props_t *p)
{
    return p && p->recordsize >= DMU_MIN_RECORDSIZE && p->recordsize <= DMU_MAX_RECORDSIZE &&
           (p->recordsize & (p->recordsize - 1)) == 0 && (unsigned)p->compress < CAIRN_COMPRESS_COUNT &&
           p->checksum > CAIRN_CHECKSUM_NONE && p->checksum < CAIRN_CHECKSUM_COUNT &&
           p->copies >= 1 && p->copies <= CAIRN_MAX_COPIES;
}

static uint8_t object_type(const dmu_object_props_t *p)
{
    return p->zap ? DNODE_TYPE_ZAP : DNODE_TYPE_PLAIN;
}

static int tx_check(objset_t *os, dmu_tx_t *tx)
{
    if (!tx || tx->os->dp != os->dp) return -EINVAL;
    if (tx->suspended) return -EIO;
    if (!dmu_tx_assign(tx)) return -EROFS;
    return 0;
}

/* A held user object (object 0 is never one), or NULL. */
static dnode_t *hold_user(objset_t *os, uint64_t obj)
{
    if (obj == 0) return NULL;
    return dnode_hold(os, obj, false);
}

int dmu_object_alloc(objset_t *os, const dmu_object_props_t *props, uint64_t *obj, dmu_tx_t *tx)
{
    int err = tx_check(os, tx);
    if (err) return err;
    if (!props_ok(props)) return -EINVAL;
    pthread_mutex_lock(&os->alloc_lock);
    /* Freed numbers first. */
    for (size_t i = 0; i < os->nfreed; i++) {
        dnode_t *dn = dnode_hold(os, os->freed[i], false);
        if (!dn) continue;
        dn_wlock(dn);
        bool ok = dnode_is_reusable(dn);
        if (ok) dnode_set_alloc(dn, tx->txg, object_type(props), props, tx->sync_ctx);
        bool stale = !ok && dn->cur.type != DNODE_TYPE_FREE;
        uint64_t reused = dn->obj;
        dn_unlock(dn);
        dnode_rele(dn);
        if (ok || stale) {
            os->freed[i] = os->freed[--os->nfreed];
            if (ok) {
                *obj = reused;
                pthread_mutex_unlock(&os->alloc_lock);
                return 0;
            }
            i--;
        }
    }
    for (uint64_t o = os->alloc_hint ? os->alloc_hint : 1;; o++) {
        dnode_t *dn = dnode_hold(os, o, true);
        if (!dn) {
            err = -ENOSPC;
            break;
        }
        dn_wlock(dn);
        bool ok = dnode_is_reusable(dn);
        if (ok) dnode_set_alloc(dn, tx->txg, object_type(props), props, tx->sync_ctx);
        dn_unlock(dn);
        dnode_rele(dn);
        if (ok) {
            os->alloc_hint = o + 1;
            *obj = o;
            break;
        }
    }
    pthread_mutex_unlock(&os->alloc_lock);
    return err;
}

int dmu_object_claim(objset_t *os, uint64_t obj, const dmu_object_props_t *props, dmu_tx_t *tx)
{
    int err = tx_check(os, tx);
    if (err) return err;
    if (!props_ok(props) || obj == 0) return -EINVAL;
    pthread_mutex_lock(&os->alloc_lock);
    dnode_t *dn = dnode_hold(os, obj, true);
    if (!dn) {
        pthread_mutex_unlock(&os->alloc_lock);
        return -ENOSPC;
    }
    dn_wlock(dn);
    if (dn->cur.type != DNODE_TYPE_FREE) err = -EEXIST;
    else if (!dnode_is_reusable(dn)) err = -EBUSY;
    else dnode_set_alloc(dn, tx->txg, object_type(props), props, tx->sync_ctx);
    dn_unlock(dn);
    dnode_rele(dn);
    /* A number on the freed list is skipped there once it is in use again. */
    pthread_mutex_unlock(&os->alloc_lock);
    return err;
}

int dmu_object_free(objset_t *os, uint64_t obj, dmu_tx_t *tx)
{
    int err = tx_check(os, tx);
    if (err) return err;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    dn_wlock(dn);
    uint64_t freeing = dn->phys.used_bytes; /* as of the last sync: a write refused */
    err = dnode_free_object_locked(dn, tx->txg); /* for space meanwhile may wait for it */
    dn_unlock(dn);
    dnode_rele(dn);
    if (err) return err;
    spa_space_freeing_add(os->dp->spa, tx->txg, freeing);
    pthread_mutex_lock(&os->alloc_lock);
    if (os->nfreed == os->capfreed) {
        os->capfreed = os->capfreed ? os->capfreed * 2 : 16;
        os->freed = cairn_realloc(os->freed, os->capfreed * sizeof(*os->freed));
    }
    os->freed[os->nfreed++] = obj;
    pthread_mutex_unlock(&os->alloc_lock);
    return 0;
}

int dmu_object_info(objset_t *os, uint64_t obj, dmu_object_info_t *out)
{
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    int err = 0;
    dn_rlock(dn);
    const dnode_phys_t *c = &dn->cur;
    if (c->type == DNODE_TYPE_FREE) {
        err = -ENOENT;
    } else {
        memset(out, 0, sizeof(*out));
        out->props.recordsize = c->datablksz;
        out->props.compress = c->compress;
        out->props.checksum = c->checksum;
        out->props.copies = c->copies;
        out->props.zap = c->type == DNODE_TYPE_ZAP;
        out->max_offset = (c->flags & DNODE_FLAG_WRITTEN) ? (c->maxblkid + 1) * c->datablksz : 0;
        out->used_bytes = dnode_used_estimate(dn);
        out->generation = c->generation;
        out->bonus_len = c->bonuslen;
    }
    dn_unlock(dn);
    dnode_rele(dn);
    return err;
}

int dmu_object_set_props(objset_t *os, uint64_t obj, const dmu_object_props_t *props,
                         dmu_tx_t *tx)
{
    int err = tx_check(os, tx);
    if (err) return err;
    if (!props_ok(props)) return -EINVAL;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    dn_wlock(dn);
    err = dn->cur.type == DNODE_TYPE_FREE ? -ENOENT : dnode_set_props_locked(dn, tx->txg, props);
    dn_unlock(dn);
    dnode_rele(dn);
    return err;
}

int dmu_object_list(objset_t *os, void (*fn)(uint64_t obj, void *arg), void *arg)
{
    pthread_mutex_lock(&os->lock);
    uint64_t nb = os->meta_nblocks;
    pthread_mutex_unlock(&os->lock);
    uint64_t *objs = NULL;
    size_t n = 0, cap = 0;
    for (uint64_t o = 1; o < nb * DN_PER_BLOCK; o++) {
        dnode_t *dn = dnode_hold(os, o, false);
        if (!dn) continue;
        dn_rlock(dn);
        bool used = dn->cur.type != DNODE_TYPE_FREE;
        dn_unlock(dn);
        dnode_rele(dn);
        if (!used) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            objs = cairn_realloc(objs, cap * sizeof(*objs));
        }
        objs[n++] = o;
    }
    for (size_t i = 0; i < n; i++) fn(objs[i], arg);
    free(objs);
    return 0;
}

static _Atomic(dmu_write_hook_t) write_hook;

void dmu_set_write_hook(dmu_write_hook_t fn) { atomic_store(&write_hook, fn); }

int dmu_write(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
              dmu_tx_t *tx)
{
    dmu_write_hook_t hook = atomic_load_explicit(&write_hook, memory_order_relaxed);
    if (hook) hook(os, obj, off, len);
    int err = tx_check(os, tx);
    if (err) return err;
    if (len == 0) return 0;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    err = dnode_write_impl(dn, tx->txg, off, len, buf, tx->sync_ctx);
    dnode_rele(dn);
    return err;
}

int dmu_write_direct(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
                     dmu_tx_t *tx, cairn_blkptr_t *bp)
{
    memset(bp, 0, sizeof *bp);
    dmu_write_hook_t hook = atomic_load_explicit(&write_hook, memory_order_relaxed);
    if (hook) hook(os, obj, off, len);
    int err = tx_check(os, tx);
    if (err) return err;
    if (tx->sync_ctx || len == 0) return -EINVAL;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    err = dnode_write_direct(dn, tx->txg, off, len, buf, bp);
    dnode_rele(dn);
    return err;
}

int dmu_write_stamped(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, const void *buf,
                      dmu_tx_t *tx, uint64_t *stamps, size_t nstamps)
{
    memset(stamps, 0, nstamps * sizeof *stamps);
    dmu_write_hook_t hook = atomic_load_explicit(&write_hook, memory_order_relaxed);
    if (hook) hook(os, obj, off, len);
    int err = tx_check(os, tx);
    if (err) return err;
    if (len == 0) return 0;
    if (tx->sync_ctx) return -EINVAL;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    err = dnode_write_stamped(dn, tx->txg, off, len, buf, stamps, nstamps);
    dnode_rele(dn);
    return err;
}

int dmu_write_dirty_blocks(objset_t *os, uint64_t obj, uint64_t first, size_t n, uint64_t txg,
                           const uint64_t *stamps, cairn_blkptr_t *bps)
{
    memset(bps, 0, n * sizeof *bps);
    if (os->readonly) return -EAGAIN;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -EAGAIN;
    int err = dnode_write_dirty_blocks(dn, txg, first, n, stamps, bps);
    dnode_rele(dn);
    return err;
}

int dmu_clone_range(objset_t *src_os, uint64_t src_obj, uint64_t src_off, objset_t *dst_os,
                    uint64_t dst_obj, uint64_t dst_off, uint64_t len, dmu_tx_t *tx,
                    uint64_t *cloned)
{
    *cloned = 0;
    int err = tx_check(dst_os, tx);
    if (err) return err;
    if (tx->sync_ctx) return -EINVAL;
    if (src_os->dp->spa != dst_os->dp->spa) return -EXDEV;
    if (src_os == dst_os && src_obj == dst_obj) return -EINVAL;
    dnode_t *src = hold_user(src_os, src_obj);
    if (!src) return -ENOENT;
    dnode_t *dst = hold_user(dst_os, dst_obj);
    if (!dst) {
        dnode_rele(src);
        return -ENOENT;
    }
    dmu_object_info_t si, di;
    err = dmu_object_info(src_os, src_obj, &si);
    if (!err) err = dmu_object_info(dst_os, dst_obj, &di);
    if (!err && si.props.recordsize != di.props.recordsize) err = -EXDEV;
    uint64_t rs = err ? 1 : si.props.recordsize;
    if (!err && (src_off % rs || dst_off % rs || len % rs)) err = -EINVAL;
    if (!err && (src_off > DMU_MAX_OFFSET || dst_off > DMU_MAX_OFFSET ||
                 len > DMU_MAX_OFFSET - CAIRN_MAX(src_off, dst_off)))
        err = -EFBIG;
    for (uint64_t i = 0; !err && i < len / rs; i++) {
        int r = dnode_clone_record(src, src_off / rs + i, dst, tx->txg, dst_off / rs + i);
        if (r < 0) err = r;
        else *cloned += (uint64_t)r;
    }
    dnode_rele(dst);
    dnode_rele(src);
    return err;
}

int dmu_read(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf)
{
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    int err = len ? dnode_read_impl(dn, off, len, buf) : 0;
    dnode_rele(dn);
    return err;
}

int dmu_read_memory(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf)
{
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    int err = len ? dnode_read_memory_impl(dn, off, len, buf) : 0;
    dnode_rele(dn);
    return err;
}

int dmu_read_spans(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, void *buf,
                   bool memory_only, cairn_spans_t *spans)
{
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    int err = len ? dnode_read_spans_impl(dn, off, len, buf, memory_only, spans) : 0;
    dnode_rele(dn);
    return err;
}

static int next_content(objset_t *os, uint64_t obj, bool hole, uint64_t *off)
{
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    int err = dnode_next_impl(dn, hole, off);
    dnode_rele(dn);
    return err;
}

int dmu_next_data(objset_t *os, uint64_t obj, uint64_t *off)
{
    return next_content(os, obj, false, off);
}

int dmu_next_hole(objset_t *os, uint64_t obj, uint64_t *off)
{
    return next_content(os, obj, true, off);
}

bool dmu_write_would_wait(objset_t *os, uint64_t obj, uint64_t off, uint64_t len)
{
    if (spa_tx_would_throttle(os->dp->spa)) return true;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return true; /* let the caller's full path report it */
    bool wait = dnode_write_would_read(dn, off, len);
    dnode_rele(dn);
    return wait;
}

int dmu_free_range(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, dmu_tx_t *tx)
{
    int err = tx_check(os, tx);
    if (err) return err;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    uint64_t freeing = CAIRN_MIN(len, dn->phys.used_bytes); /* see dmu_object_free */
    err = dnode_free_range_impl(dn, tx->txg, off, len);
    dnode_rele(dn);
    if (!err) spa_space_freeing_add(os->dp->spa, tx->txg, freeing);
    return err;
}

int dmu_bonus_write(objset_t *os, uint64_t obj, const void *buf, uint32_t len, dmu_tx_t *tx)
{
    int err = tx_check(os, tx);
    if (err) return err;
    if (len > DMU_BONUS_MAX || (len && !buf)) return -EINVAL;
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    dn_wlock(dn);
    if (dn->cur.type == DNODE_TYPE_FREE) err = -ENOENT;
    else dnode_set_bonus_locked(dn, tx->txg, buf, len);
    dn_unlock(dn);
    dnode_rele(dn);
    return err;
}

int dmu_bonus_read(objset_t *os, uint64_t obj, void *buf, uint32_t cap, uint32_t *len)
{
    dnode_t *dn = hold_user(os, obj);
    if (!dn) return -ENOENT;
    int err = 0;
    dn_rlock(dn);
    if (dn->cur.type == DNODE_TYPE_FREE) {
        err = -ENOENT;
    } else {
        uint32_t l = dn->cur.bonuslen;
        memcpy(buf, dn->cur.bonus, CAIRN_MIN(l, cap));
        if (len) *len = l;
    }
    dn_unlock(dn);
    dnode_rele(dn);
    return err;
}
