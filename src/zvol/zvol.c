/*
 * Volumes: a block device over one DMU object (the layer the iSCSI target
 * calls; API in include/cairn/zvol.h).
 *
 * LAYOUT. A volume dataset's object set holds one object, ZVOL_OBJECT (1),
 * created on the first open of an empty volume with record size =
 * volblocksize. Byte b of the device is byte b of the object; records never
 * written and unmapped records are holes, so a thin volume consumes only what
 * was written. volsize comes from the dataset's property (or, for a volume
 * over a bare object set, from the object's bonus buffer). The logical block
 * size (512 or 4096) belongs to the handle: it only sets the alignment that
 * requests must have; records are what the DMU stores.
 *
 * COMPLETION MODEL. Every call is synchronous; the front end runs commands on
 * a pool of worker threads and completes a command when its call returns.
 * zvol_read_memory never waits for a device: it serves a read from dirty
 * records and the ARC or says -EWOULDBLOCK, so the front end can run cached
 * reads on its connection thread and hand only the rest to its workers.
 * zvol_write with ZVOL_WRITE_NOWAIT does the same for writes (the iSCSI
 * target's reader passes it for a WRITE whose data has arrived): a write that
 * would wait - for durability (FUA, sync=always), for a device read of a
 * record it changes in part that is neither dirty, a hole nor in the ARC
 * (dmu_write_would_wait), for the write throttle, for a stripe held
 * exclusively (rl_try_enter) or for a txg near a space limit - says
 * -EWOULDBLOCK having changed nothing, and goes to the workers; the rest run
 * to completion on the caller's thread.
 * A write is one DMU transaction (dmu_tx_begin / dmu_write / commit): its data
 * sits in the open txg's dirty records, readers see it at once, and the call
 * returns without waiting for any disk. Durability is only waited for where
 * SCSI demands it: a FUA write (or any write under sync=always) waits for its
 * own txg to sync, and zvol_flush (SYNCHRONIZE CACHE) waits for the txg of the
 * newest change made so far (nothing when that is already durable).
 *
 * GROUP COMMIT. Waiting for a txg forces it to close. If every FUA writer
 * called spa_txg_wait_synced() on its own, the first arrival during a sync
 * would close the next txg immediately with just its own write in it. Instead,
 * one thread at a time (the leader) waits in spa_txg_wait_synced(); FUA
 * writers that arrive meanwhile record the txg they need (gc_want) and sleep.
 * Those whose txg is covered by the leader's wake when it returns; the rest
 * elect a new leader who waits for the highest txg wanted, so every FUA write
 * that arrived during one sync shares the next one. State is per volume.
 * (With the intent log - src/zil, opened with the volume's state - every change
 * is logged and wait_durable commits the log instead: one log write and flush.)
 *
 * CONCURRENCY. There is no volume-wide lock on the data path. What the DMU
 * guarantees (verified in src/dmu/dnode.c): each dmu_write applies its bytes
 * to each record under that record's lock, and a partial-record write that
 * must read the old record from disk drops the locks for the read and retries
 * if the record changed meanwhile - so two concurrent writes touching the same
 * record (different or overlapping bytes) never lose each other's bytes, but a
 * multi-record write is atomic per record only, not as a whole. Plain writes
 * therefore need no lock among themselves. What needs more is
 * compare_and_write and or_write (read, merge and write must not interleave
 * with another writer of the range) and a forced shrink (no write may land beyond the new
 * end after it freed it). For those there are range locks: ZVOL_NSTRIPES
 * reader-writer locks striped over 64 KiB regions of the byte space. Every
 * writer (write, unmap, write_same, copy's destination) holds the stripes of
 * its range shared; compare_and_write and or_write hold them exclusive; shrink holds all
 * of them exclusive. Two overlapping ranges always share a stripe, stripes
 * are taken in ascending index order, so there is no deadlock; unrelated
 * ranges may share a stripe, which costs only for those two. A large
 * durable write logged as pointers to directly written blocks (do_write_direct)
 * also holds its stripes exclusively, from the change until its records are
 * queued in the log: such a record carries the bytes of this write, not the
 * newest ones, so no overlapping change may slip in between. Reads
 * take no lock. (Below us, the DMU holds the volume object's dnode lock shared
 * for reads and writes and locks only the dirty-record shard of each record,
 * so disjoint writes and reads of one volume proceed in parallel there too.)
 *
 * SPACE AND ERRORS. Before dirtying anything a write asks the backend
 * (dsl_dataset_check_space) for the whole records it touches, so quota and
 * pool-full errors come before any change. Ranges are checked against volsize
 * (-ERANGE) after the stripes are held, so they are exact against a
 * concurrent shrink. Large operations (write_same, copy) are split into
 * chunks of ZVOL_CHUNK bytes, one transaction each.
 *
 * PROPERTIES. volsize, readonly, sync, logbias, compression, checksum and
 * copies are read on every operation. For a dataset, resolving them takes the DSL's pool
 * lock, so the data path reads a copy refreshed at most every
 * ZVOL_PROPS_TTL_MS by one thread (zvol_resize refreshes it at once, under all
 * stripes). readonly stays exact for every change because each transaction
 * first calls dsl_dataset_check_space, which refuses read-only datasets; a
 * volsize changed behind our back (dsl_prop_set) is seen within the TTL; it
 * can only grow there (the DSL refuses a smaller volsize but from zvol_resize,
 * which frees what lies beyond the new end). zvol_resize also frees, before a
 * grow, whatever lies beyond the old end, so a volume grows over zeros; cairnd
 * sends every `cairn set volsize` through it.
 *
 * ALL-ZERO DATA. The DMU stores an all-zero record as a hole; so does this
 * layer, which makes "reads as zeros" and "deallocated" the same thing for
 * GET LBA STATUS (LBPRZ = 1), and WRITE SAME of zeros without UNMAP also ends
 * up deallocated. GET LBA STATUS applies the same rule to each logical block,
 * so a zeroed block inside a stored record is reported deallocated: unmapping
 * less than a record zeroes those bytes, and the status follows what the
 * initiator unmapped, not the record the bytes happen to share.
 */
#include "zvol_impl.h"

#include <cairn/log.h>
#include <cairn/util.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZVOL_CHUNK (1024u * 1024u)
/* logbias=throughput: writes from this size on are not copied into the log (as files). */
#define ZVOL_ZIL_THROUGHPUT_MIN (32 * 1024u)
#define ZVOL_BONUS_MAGIC 0x314c4f5656524143ULL /* "CARVVOL1" */
/* GET LBA STATUS reads at most this much mapped data per answer. */
#define ZVOL_LBA_SCAN_MAPPED_MAX (1024u * 1024u)

/* ---------------- registry ---------------- */

static pthread_mutex_t zvol_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static zvol_state_t *zvol_registry;

static void state_destroy(zvol_state_t *zs)
{
    zil_close(zs->zil); /* ZIL */
    for (int i = 0; i < ZVOL_NSTRIPES; i++) pthread_rwlock_destroy(&zs->stripes[i]);
    pthread_mutex_destroy(&zs->props_lock);
    pthread_mutex_destroy(&zs->gc_lock);
    pthread_cond_destroy(&zs->gc_cv);
    free(zs);
}

int zvol_state_get(objset_t *os, const zvol_backend_t *be, void *be_ctx,
                   int (*init)(zvol_state_t *zs, void *arg), void *arg, zvol_state_t **out,
                   bool *created)
{
    pthread_mutex_lock(&zvol_registry_lock);
    for (zvol_state_t *zs = zvol_registry; zs; zs = zs->next) {
        if (zs->os == os) {
            zs->refs++;
            pthread_mutex_unlock(&zvol_registry_lock);
            *out = zs;
            *created = false;
            return 0;
        }
    }
    zvol_state_t *zs = cairn_zalloc(sizeof(*zs));
    zs->os = os;
    zs->spa = dmu_objset_spa(os);
    zs->be = be;
    zs->be_ctx = be_ctx;
    zs->refs = 1;
    for (int i = 0; i < ZVOL_NSTRIPES; i++) pthread_rwlock_init(&zs->stripes[i], NULL);
    pthread_mutex_init(&zs->props_lock, NULL);
    pthread_mutex_init(&zs->gc_lock, NULL);
    pthread_cond_init(&zs->gc_cv, NULL);
    /* Creating the object inside the registry lock keeps two first opens of an
     * empty volume from both creating it. */
    int err = init(zs, arg);
    if (!err) err = zil_open(os, zil_replay_dmu, os, &zs->zil); /* ZIL: replays first */
    if (err) {
        pthread_mutex_unlock(&zvol_registry_lock);
        state_destroy(zs);
        return err;
    }
    zs->next = zvol_registry;
    zvol_registry = zs;
    pthread_mutex_unlock(&zvol_registry_lock);
    *out = zs;
    *created = true;
    return 0;
}

static void state_rele(zvol_state_t *zs)
{
    pthread_mutex_lock(&zvol_registry_lock);
    if (--zs->refs > 0) {
        pthread_mutex_unlock(&zvol_registry_lock);
        return;
    }
    for (zvol_state_t **pp = &zvol_registry; *pp; pp = &(*pp)->next) {
        if (*pp == zs) {
            *pp = zs->next;
            break;
        }
    }
    pthread_mutex_unlock(&zvol_registry_lock);
    if (zs->be->release) zs->be->release(zs);
    state_destroy(zs);
}

zvol_t *zvol_handle_new(zvol_state_t *zs, uint32_t lbs, bool readonly)
{
    zvol_t *zv = cairn_zalloc(sizeof(*zv));
    zv->zs = zs;
    zv->lbs = lbs ? lbs : ZVOL_DEFAULT_BLOCK_SIZE;
    zv->readonly = readonly;
    return zv;
}

void zvol_close(zvol_t *zv)
{
    if (!zv) return;
    state_rele(zv->zs);
    free(zv);
}

/* ---------------- the data object ---------------- */

static dmu_object_props_t object_props(uint32_t rs, const zvol_props_t *p)
{
    dmu_object_props_t op = {
        .recordsize = rs,
        .compress = p->compress,
        .checksum = p->checksum ? p->checksum : CAIRN_CHECKSUM_FLETCHER4,
        .copies = p->copies ? p->copies : 1,
    };
    return op;
}

int zvol_object_setup(zvol_state_t *zs, uint32_t volblocksize, const zvol_props_t *p,
                      bool readonly)
{
    dmu_object_info_t info;
    int err = dmu_object_info(zs->os, ZVOL_OBJECT, &info);
    if (err == 0) {
        zs->obj = ZVOL_OBJECT;
        zs->rs = info.props.recordsize;
        zs->applied = info.props;
        return 0;
    }
    if (err != -ENOENT) return err;
    if (readonly) {
        /* A snapshot taken before the volume was ever opened: all zeros. */
        zs->obj = 0;
        zs->rs = volblocksize;
        return 0;
    }
    dmu_object_props_t op = object_props(volblocksize, p);
    dmu_tx_t *tx = dmu_tx_begin(zs->os);
    uint64_t obj = 0;
    err = dmu_object_alloc(zs->os, &op, &obj, tx);
    if (!err && obj != ZVOL_OBJECT) {
        /* Someone else put objects in this object set: not a volume we own. */
        dmu_object_free(zs->os, obj, tx);
        err = -EEXIST;
    }
    dmu_tx_commit(tx);
    if (err) return err;
    zs->obj = ZVOL_OBJECT;
    zs->rs = volblocksize;
    zs->applied = op;
    return 0;
}

/* Keeps the object's compression/checksum/copies equal to the properties, so a
 * property change applies to new writes. */
static int apply_props(zvol_state_t *zs, const zvol_props_t *p, dmu_tx_t *tx)
{
    dmu_object_props_t want = object_props(zs->rs, p);
    pthread_mutex_lock(&zs->props_lock);
    int err = 0;
    if (want.compress != zs->applied.compress || want.checksum != zs->applied.checksum ||
        want.copies != zs->applied.copies) {
        err = dmu_object_set_props(zs->os, zs->obj, &want, tx);
        if (!err) zs->applied = want;
    }
    pthread_mutex_unlock(&zs->props_lock);
    return err;
}

/* ---------------- range locks ---------------- */

typedef struct zvol_rl {
    uint32_t first, count; /* stripes first .. first+count-1, modulo ZVOL_NSTRIPES */
    bool excl;
} zvol_rl_t;

static void stripe_lock(zvol_state_t *zs, uint32_t i, bool excl)
{
    if (excl) pthread_rwlock_wrlock(&zs->stripes[i]);
    else pthread_rwlock_rdlock(&zs->stripes[i]);
}

static void rl_enter(zvol_state_t *zs, uint64_t off, uint64_t len, bool excl, zvol_rl_t *rl)
{
    uint64_t r0 = off >> ZVOL_REGION_SHIFT;
    uint64_t r1 = (off + (len ? len : 1) - 1) >> ZVOL_REGION_SHIFT;
    uint64_t n = r1 - r0 + 1;
    rl->excl = excl;
    if (n >= ZVOL_NSTRIPES) {
        rl->first = 0;
        rl->count = ZVOL_NSTRIPES;
    } else {
        rl->first = (uint32_t)(r0 % ZVOL_NSTRIPES);
        rl->count = (uint32_t)n;
    }
    /* Ascending index order: the wrapped part [0, ...) first. */
    uint32_t end = rl->first + rl->count;
    if (end > ZVOL_NSTRIPES)
        for (uint32_t i = 0; i < end - ZVOL_NSTRIPES; i++) stripe_lock(zs, i, excl);
    for (uint32_t i = rl->first; i < end && i < ZVOL_NSTRIPES; i++) stripe_lock(zs, i, excl);
}

static void rl_exit(zvol_state_t *zs, const zvol_rl_t *rl)
{
    for (uint32_t k = 0; k < rl->count; k++)
        pthread_rwlock_unlock(&zs->stripes[(rl->first + k) % ZVOL_NSTRIPES]);
}

/* rl_enter for a writer that must not wait (shared only): false, holding
 * nothing, when a stripe is held exclusively (compare_and_write, a shrink). */
static bool rl_try_enter(zvol_state_t *zs, uint64_t off, uint64_t len, zvol_rl_t *rl)
{
    uint64_t r0 = off >> ZVOL_REGION_SHIFT;
    uint64_t r1 = (off + (len ? len : 1) - 1) >> ZVOL_REGION_SHIFT;
    if (r1 - r0 + 1 >= ZVOL_NSTRIPES) return false; /* huge: the workers take it */
    rl->excl = false;
    rl->first = (uint32_t)(r0 % ZVOL_NSTRIPES);
    rl->count = 0;
    for (uint32_t k = 0; k < (uint32_t)(r1 - r0 + 1); k++) {
        if (pthread_rwlock_tryrdlock(&zs->stripes[(rl->first + k) % ZVOL_NSTRIPES])) {
            rl_exit(zs, rl);
            return false;
        }
        rl->count++;
    }
    return true;
}

/* ---------------- durability ---------------- */

static void note_txg(zvol_state_t *zs, uint64_t txg)
{
    uint64_t cur = atomic_load(&zs->last_write_txg);
    while (cur < txg && !atomic_compare_exchange_weak(&zs->last_write_txg, &cur, txg)) {
    }
}

/* Group commit: returns once txg is durable. See the top of the file. */
static int wait_durable(zvol_state_t *zs, uint64_t txg)
{
    int err = 0;
    if (zs->zil) return zil_commit(zs->zil, 0); /* ZIL: every change is logged (or a barrier) */
    pthread_mutex_lock(&zs->gc_lock);
    while (zs->gc_synced < txg) {
        if (zs->gc_leader) {
            if (txg > zs->gc_want) zs->gc_want = txg;
            pthread_cond_wait(&zs->gc_cv, &zs->gc_lock);
            continue;
        }
        zs->gc_leader = true;
        uint64_t target = txg > zs->gc_want ? txg : zs->gc_want;
        pthread_mutex_unlock(&zs->gc_lock);
        err = spa_txg_wait_synced(zs->spa, target);
        atomic_fetch_add(&zs->gc_syncs, 1);
        pthread_mutex_lock(&zs->gc_lock);
        zs->gc_leader = false;
        if (!err && target > zs->gc_synced) zs->gc_synced = target;
        pthread_cond_broadcast(&zs->gc_cv);
        if (err) break;
    }
    pthread_mutex_unlock(&zs->gc_lock);
    return err;
}

static bool wants_durable(const zvol_props_t *p, int flags)
{
    if (p->sync == DSL_SYNC_DISABLED) return false;
    return (flags & ZVOL_WRITE_FUA) || p->sync == DSL_SYNC_ALWAYS;
}

/* ---------------- accessors ---------------- */

uint32_t zvol_block_size(const zvol_t *zv) { return zv->lbs; }
uint32_t zvol_volblocksize(const zvol_t *zv) { return zv->zs->rs; }

static void props_refresh(zvol_state_t *zs, zvol_props_t *p)
{
    zs->be->get_props(zs, p);
    atomic_store(&zs->c_volsize, p->volsize);
    atomic_store(&zs->c_readonly, p->readonly);
    atomic_store(&zs->c_sync, p->sync);
    atomic_store(&zs->c_compress, (int)p->compress);
    atomic_store(&zs->c_checksum, (int)p->checksum);
    atomic_store(&zs->c_copies, p->copies);
    atomic_store(&zs->c_logbias, p->logbias);
    atomic_store(&zs->c_stamp_ns, cairn_now_ns());
}

/* The volume's properties as the data path sees them. Cached backends: one
 * thread at a time refreshes a stale copy, the others use it meanwhile. Writes
 * stay exact for readonly because check_space refuses them itself. */
static void get_props(zvol_state_t *zs, zvol_props_t *p)
{
    if (!zs->be->cache_props) {
        zs->be->get_props(zs, p);
        return;
    }
    uint64_t stamp = atomic_load(&zs->c_stamp_ns);
    if ((stamp == 0 || cairn_now_ns() - stamp > ZVOL_PROPS_TTL_MS * 1000000ULL) &&
        !atomic_flag_test_and_set(&zs->c_refreshing)) {
        props_refresh(zs, p);
        atomic_flag_clear(&zs->c_refreshing);
        return;
    }
    while (atomic_load(&zs->c_stamp_ns) == 0) sched_yield(); /* first fill in progress */
    memset(p, 0, sizeof(*p));
    p->volsize = atomic_load(&zs->c_volsize);
    p->readonly = atomic_load(&zs->c_readonly);
    p->sync = atomic_load(&zs->c_sync);
    p->compress = (cairn_compress_t)atomic_load(&zs->c_compress);
    p->checksum = (cairn_checksum_t)atomic_load(&zs->c_checksum);
    p->copies = (uint8_t)atomic_load(&zs->c_copies);
    p->logbias = atomic_load(&zs->c_logbias);
}

uint64_t zvol_size(zvol_t *zv)
{
    zvol_props_t p;
    get_props(zv->zs, &p);
    return p.volsize;
}

bool zvol_is_readonly(zvol_t *zv)
{
    return zv->readonly || zv->zs->be->is_readonly(zv->zs); /* exact, not the data path's copy */
}

uint64_t zvol_used_bytes(zvol_t *zv)
{
    dmu_object_info_t info;
    if (!zv->zs->obj || dmu_object_info(zv->zs->os, zv->zs->obj, &info)) return 0;
    return info.used_bytes;
}

/* ---------------- checks ---------------- */

static int check_aligned(const zvol_t *zv, uint64_t off, uint64_t len)
{
    if ((off | len) & (zv->lbs - 1)) return -EINVAL;
    return 0;
}

static int check_range(uint64_t off, uint64_t len, uint64_t volsize)
{
    if (off > volsize || len > volsize - off) return -ERANGE;
    return 0;
}

/* Bytes of whole records a change of [off, off+len) dirties. */
static uint64_t records_bytes(const zvol_state_t *zs, uint64_t off, uint64_t len)
{
    if (len == 0) return 0;
    uint64_t first = off / zs->rs, last = (off + len - 1) / zs->rs;
    return (last - first + 1) * zs->rs;
}

static int check_writable(const zvol_t *zv, const zvol_props_t *p)
{
    if (zv->readonly || !zv->zs->obj) return -EROFS;
    /* A cached readonly may be up to a TTL old; the backend's check_space,
     * called before every change, is the exact test then. */
    if (p->readonly && !zv->zs->be->cache_props) return -EROFS;
    return 0;
}

/* ---------------- I/O ---------------- */

static int read_impl(zvol_t *zv, uint64_t off, uint64_t len, void *buf, bool memory_only)
{
    zvol_state_t *zs = zv->zs;
    int err = check_aligned(zv, off, len);
    if (err) return err;
    zvol_props_t p;
    get_props(zs, &p);
    if ((err = check_range(off, len, p.volsize))) return err;
    if (len == 0) return 0;
    if (!zs->obj) {
        memset(buf, 0, len);
        return 0;
    }
    return memory_only ? dmu_read_memory(zs->os, zs->obj, off, len, buf)
                       : dmu_read(zs->os, zs->obj, off, len, buf);
}

int zvol_read(zvol_t *zv, uint64_t off, uint64_t len, void *buf)
{
    return read_impl(zv, off, len, buf, false);
}

int zvol_read_memory(zvol_t *zv, uint64_t off, uint64_t len, void *buf)
{
    return read_impl(zv, off, len, buf, true);
}

/* One transaction: data (NULL: free the range). Stripes held by the caller. */
static int do_change_ex(zvol_state_t *zs, const zvol_props_t *p, uint64_t off, uint64_t len,
                        const void *data, uint64_t *txg_out, bool nowait)
{
    /* Frees need no space, but the check also refuses read-only datasets exactly. */
    int err = zs->be->check_space(zs, data ? records_bytes(zs, off, len) : 0, nowait);
    if (err) return err;
    dmu_tx_t *tx = dmu_tx_begin(zs->os);
    err = apply_props(zs, p, tx);
    if (!err)
        err = data ? dmu_write(zs->os, zs->obj, off, len, data, tx)
                   : dmu_free_range(zs->os, zs->obj, off, len, tx);
    uint64_t txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    note_txg(zs, txg);
    /* A large write where a durable one would have gone to its blocks directly
     * (logbias=throughput, or no log device: zil_write_indirect) - here one
     * without FUA, flushed later: its data is written once, by its txg, which
     * the flush then waits for, instead of a second time into the log. */
    if (data && len >= ZVOL_ZIL_THROUGHPUT_MIN &&
        (p->logbias == DSL_LOGBIAS_THROUGHPUT || zil_write_indirect(zs->zil, false, len)))
        zil_log_barrier(zs->zil, txg);
    else
        zil_log(zs->zil, &(zil_rec_t){.type = data ? ZIL_REC_WRITE : ZIL_REC_FREE, /* ZIL */
                                     .txg = txg, .obj = zs->obj, .off = off, .len = len});
    *txg_out = txg;
    return err;
}

static int do_change(zvol_state_t *zs, const zvol_props_t *p, uint64_t off, uint64_t len,
                     const void *data, uint64_t *txg_out)
{
    return do_change_ex(zs, p, off, len, data, txg_out, false);
}

/*
 * A large durable write (zil_write_indirect): its whole records are written
 * directly as blocks (dmu_write_direct) and logged as pointers to them
 * (ZIL_REC_WRITE_BLOCK), so the data reaches the main vdevs once; partial
 * records are logged as usual. Such a record carries the bytes of this write,
 * not the newest ones, so its place in the log must match its place among the
 * changes of the range: the caller holds the stripes exclusively, from the
 * change until it is queued in the log.
 */
static int do_write_direct(zvol_state_t *zs, const zvol_props_t *p, uint64_t off, uint64_t len,
                           const uint8_t *data, uint64_t *txg_out)
{
    int err = zs->be->check_space(zs, records_bytes(zs, off, len), false);
    if (err) return err;
    uint64_t first = off / zs->rs, nrec = (off + len - 1) / zs->rs - first + 1;
    cairn_blkptr_t *bps = cairn_zalloc(nrec * sizeof *bps);
    dmu_tx_t *tx = dmu_tx_begin(zs->os);
    err = apply_props(zs, p, tx);
    for (uint64_t pos = off; pos < off + len && !err;) {
        uint64_t blk = pos / zs->rs;
        uint64_t end = CAIRN_MIN((blk + 1) * zs->rs, off + len);
        if (pos % zs->rs == 0 && end - pos == zs->rs)
            err = dmu_write_direct(zs->os, zs->obj, pos, zs->rs, data + (pos - off), tx,
                                   &bps[blk - first]);
        else
            err = dmu_write(zs->os, zs->obj, pos, end - pos, data + (pos - off), tx);
        pos = end;
    }
    uint64_t txg = dmu_tx_txg(tx); /* the commit flushes the blocks before the log */
    dmu_tx_commit(tx);
    note_txg(zs, txg);
    for (uint64_t pos = off; pos < off + len;) { /* ZIL */
        uint64_t blk = pos / zs->rs;
        uint64_t end = CAIRN_MIN((blk + 1) * zs->rs, off + len);
        const cairn_blkptr_t *bp = &bps[blk - first];
        if (!err && !cairn_bp_is_hole(bp))
            zil_log(zs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE_BLOCK, .txg = txg, .obj = zs->obj,
                                         .off = pos, .len = zs->rs, .data = bp,
                                         .dlen = sizeof *bp});
        else
            zil_log(zs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = zs->obj,
                                         .off = pos, .len = end - pos});
        pos = end;
    }
    free(bps);
    *txg_out = txg;
    return err;
}

/* Validates and locks a change of [off, off+len); on success props are current. */
static int change_begin_ex(zvol_t *zv, uint64_t off, uint64_t len, bool excl, bool nowait,
                           zvol_props_t *p, zvol_rl_t *rl)
{
    zvol_state_t *zs = zv->zs;
    int err = check_aligned(zv, off, len);
    if (err) return err;
    get_props(zs, p);
    if ((err = check_writable(zv, p))) return err;
    if ((err = check_range(off, len, p->volsize))) return err;
    if (nowait) {
        if (!rl_try_enter(zs, off, len, rl)) return -EWOULDBLOCK;
    } else {
        rl_enter(zs, off, len, excl, rl);
    }
    /* volsize may have shrunk while we waited for the stripes. */
    get_props(zs, p);
    if ((err = check_range(off, len, p->volsize))) rl_exit(zs, rl);
    return err;
}

static int change_begin(zvol_t *zv, uint64_t off, uint64_t len, bool excl, zvol_props_t *p,
                        zvol_rl_t *rl)
{
    return change_begin_ex(zv, off, len, excl, false, p, rl);
}

int zvol_write(zvol_t *zv, uint64_t off, uint64_t len, const void *buf, int flags)
{
    zvol_state_t *zs = zv->zs;
    zvol_props_t p;
    zvol_rl_t rl;
    get_props(zs, &p);
    bool nowait = flags & ZVOL_WRITE_NOWAIT;
    if (nowait && wants_durable(&p, flags)) return -EWOULDBLOCK; /* it waits, by definition */
    bool direct = len && zs->zil && wants_durable(&p, flags) &&
                  zil_write_indirect(zs->zil, p.logbias == DSL_LOGBIAS_THROUGHPUT, len);
    int err = change_begin_ex(zv, off, len, direct, nowait, &p, &rl);
    if (err) return err;
    if (nowait && len && dmu_write_would_wait(zs->os, zs->obj, off, len)) {
        rl_exit(zs, &rl);
        return -EWOULDBLOCK;
    }
    uint64_t txg = 0;
    if (len && direct) err = do_write_direct(zs, &p, off, len, buf, &txg);
    else if (len) err = do_change_ex(zs, &p, off, len, buf, &txg, nowait);
    rl_exit(zs, &rl);
    if (!err && txg && wants_durable(&p, flags)) err = wait_durable(zs, txg);
    return err;
}

int zvol_flush(zvol_t *zv)
{
    zvol_state_t *zs = zv->zs;
    zvol_props_t p;
    get_props(zs, &p);
    if (p.sync == DSL_SYNC_DISABLED) return 0;
    uint64_t txg = atomic_load(&zs->last_write_txg);
    if (txg == 0 || spa_last_synced_txg(zs->spa) >= txg) return 0;
    return wait_durable(zs, txg);
}

int zvol_unmap(zvol_t *zv, uint64_t off, uint64_t len, int flags)
{
    zvol_state_t *zs = zv->zs;
    zvol_props_t p;
    zvol_rl_t rl;
    int err = change_begin(zv, off, len, false, &p, &rl);
    if (err) return err;
    uint64_t txg = 0;
    if (len) err = do_change(zs, &p, off, len, NULL, &txg);
    rl_exit(zs, &rl);
    if (!err && txg && wants_durable(&p, flags)) err = wait_durable(zs, txg);
    return err;
}

static bool is_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

int zvol_write_same(zvol_t *zv, uint64_t off, uint64_t nblocks, const void *block, int flags)
{
    zvol_state_t *zs = zv->zs;
    if (!block) return -EINVAL;
    if (nblocks > UINT64_MAX / zv->lbs) return -ERANGE;
    uint64_t len = nblocks * zv->lbs;
    if ((flags & ZVOL_WRITE_UNMAP) && is_zero(block, zv->lbs))
        return zvol_unmap(zv, off, len, flags);
    int err = check_aligned(zv, off, len);
    if (err) return err;
    zvol_props_t p;
    get_props(zs, &p);
    if ((err = check_writable(zv, &p))) return err;
    if ((err = check_range(off, len, p.volsize))) return err;
    size_t clen = (size_t)CAIRN_MIN(len, (uint64_t)ZVOL_CHUNK);
    uint8_t *chunk = cairn_alloc_aligned(clen ? clen : zv->lbs);
    for (size_t i = 0; i < clen; i += zv->lbs) memcpy(chunk + i, block, zv->lbs);
    uint64_t txg = 0;
    for (uint64_t done = 0; done < len && !err;) {
        /* Chunks end on chunk boundaries of the volume so that every chunk but
         * the first and last covers whole records. */
        uint64_t n = CAIRN_MIN(len - done, ZVOL_CHUNK - ((off + done) % ZVOL_CHUNK));
        n = CAIRN_MIN(n, (uint64_t)clen);
        zvol_rl_t rl;
        err = change_begin(zv, off + done, n, false, &p, &rl);
        if (err) break;
        err = do_change(zs, &p, off + done, n, chunk, &txg);
        rl_exit(zs, &rl);
        done += n;
    }
    free(chunk);
    if (!err && txg && wants_durable(&p, flags)) err = wait_durable(zs, txg);
    return err;
}

/* What a read-modify-write does with the range's current bytes: fills `out`
 * with the bytes to store, or returns an error (nothing is written). */
typedef int (*zvol_merge_fn)(const uint8_t *cur, uint8_t *out, uint64_t len, const void *arg,
                             uint64_t *detail);

/* Reads [off, off+len), lets `merge` decide the new bytes and writes them, with
 * the range's stripes held exclusively throughout so no other writer of the
 * range interleaves (COMPARE AND WRITE and ORWRITE are atomic this way). */
static int read_modify_write(zvol_t *zv, uint64_t off, uint64_t len, int flags,
                             zvol_merge_fn merge, const void *arg, uint64_t *detail)
{
    zvol_state_t *zs = zv->zs;
    if (len > 16u * ZVOL_CHUNK) return -EINVAL;
    zvol_props_t p;
    zvol_rl_t rl;
    int err = change_begin(zv, off, len, true, &p, &rl);
    if (err) return err;
    if (len == 0) {
        rl_exit(zs, &rl);
        return 0;
    }
    uint8_t *cur = cairn_alloc_aligned(2 * len);
    uint8_t *out = cur + len;
    uint64_t txg = 0;
    err = dmu_read(zs->os, zs->obj, off, len, cur);
    if (!err) err = merge(cur, out, len, arg, detail);
    if (!err) err = do_change(zs, &p, off, len, out, &txg);
    rl_exit(zs, &rl);
    free(cur);
    if (!err && txg && wants_durable(&p, flags)) err = wait_durable(zs, txg);
    return err;
}

typedef struct {
    const uint8_t *expected, *newdata;
} caw_arg_t;

static int merge_compare(const uint8_t *cur, uint8_t *out, uint64_t len, const void *arg,
                         uint64_t *miscompare_off)
{
    const caw_arg_t *a = arg;
    if (memcmp(cur, a->expected, len) != 0) {
        uint64_t i = 0;
        while (cur[i] == a->expected[i]) i++;
        if (miscompare_off) *miscompare_off = i;
        return -EILSEQ;
    }
    memcpy(out, a->newdata, len);
    return 0;
}

int zvol_compare_and_write(zvol_t *zv, uint64_t off, uint64_t len, const void *expected,
                           const void *newdata, int flags, uint64_t *miscompare_off)
{
    if (!expected || !newdata) return -EINVAL;
    caw_arg_t a = {expected, newdata};
    return read_modify_write(zv, off, len, flags, merge_compare, &a, miscompare_off);
}

static int merge_or(const uint8_t *cur, uint8_t *out, uint64_t len, const void *arg,
                    uint64_t *unused)
{
    (void)unused;
    const uint8_t *mask = arg;
    for (uint64_t i = 0; i < len; i++) out[i] = cur[i] | mask[i];
    return 0;
}

int zvol_or_write(zvol_t *zv, uint64_t off, uint64_t len, const void *data, int flags)
{
    if (!data) return -EINVAL;
    return read_modify_write(zv, off, len, flags, merge_or, data, NULL);
}

/*
 * EXTENDED COPY by block cloning: between two volumes of one pool with the
 * same volblocksize and record-aligned ranges, the destination's records
 * share the source's blocks (dmu_clone_range) instead of being written again.
 * A clone has no intent-log record (the log gets a barrier), so it waits for
 * its txg to sync before it counts as done, FUA or not: a later SYNCHRONIZE
 * CACHE commits only the log. A source record not yet synced asks for a sync
 * first (a few rounds). Returns 0 when all of len was cloned, else an error
 * after which the caller copies (records cloned so far are rewritten then).
 */
#define ZVOL_CLONE_SYNC_ROUNDS 4
static int clone_range(zvol_t *src, uint64_t src_off, zvol_t *dst, uint64_t dst_off, uint64_t len)
{
    zvol_state_t *ss = src->zs, *ds = dst->zs;
    if (ss == ds || !ss->obj || !ds->obj || ss->spa != ds->spa || ss->rs != ds->rs ||
        src_off % ss->rs || dst_off % ss->rs || len % ss->rs || len == 0)
        return -EXDEV;
    int err = -EAGAIN;
    for (int round = 0; round < ZVOL_CLONE_SYNC_ROUNDS && err == -EAGAIN; round++) {
        zvol_props_t p;
        zvol_rl_t rl;
        err = change_begin(dst, dst_off, len, true, &p, &rl);
        if (err) return err;
        err = ds->be->check_space(ds, records_bytes(ds, dst_off, len), false);
        uint64_t txg = 0, n = 0;
        if (!err) {
            dmu_tx_t *tx = dmu_tx_begin(ds->os);
            err = apply_props(ds, &p, tx);
            if (!err) err = dmu_clone_range(ss->os, ss->obj, src_off, ds->os, ds->obj, dst_off, len,
                                            tx, &n);
            txg = dmu_tx_txg(tx);
            dmu_tx_commit(tx);
            note_txg(ds, txg);
            zil_log_barrier(ds->zil, txg);
        }
        rl_exit(ds, &rl);
        if (txg) {
            int e = spa_txg_wait_synced(ds->spa, txg);
            if (!err) err = e;
        }
    }
    return err;
}

int zvol_copy(zvol_t *src, uint64_t src_off, zvol_t *dst, uint64_t dst_off, uint64_t len,
              int flags)
{
    int err = check_aligned(src, src_off, len);
    if (!err) err = check_aligned(dst, dst_off, len);
    if (err) return err;
    zvol_props_t sp, dp;
    get_props(src->zs, &sp);
    get_props(dst->zs, &dp);
    if ((err = check_range(src_off, len, sp.volsize))) return err;
    if ((err = check_range(dst_off, len, dp.volsize))) return err;
    if ((err = check_writable(dst, &dp))) return err;
    if (len == 0) return 0;
    if (clone_range(src, src_off, dst, dst_off, len) == 0) return 0;
    /* Same volume, destination overlapping after the source: copy backwards
     * so every chunk is read before it is overwritten (memmove semantics). */
    bool backwards = src->zs == dst->zs && dst_off > src_off && dst_off < src_off + len;
    uint8_t *buf = cairn_alloc_aligned(CAIRN_MIN(len, (uint64_t)ZVOL_CHUNK));
    uint64_t txg = 0;
    for (uint64_t done = 0; done < len && !err;) {
        uint64_t n = CAIRN_MIN(len - done, (uint64_t)ZVOL_CHUNK);
        uint64_t rel = backwards ? len - done - n : done;
        err = zvol_read(src, src_off + rel, n, buf);
        if (err) break;
        zvol_rl_t rl;
        err = change_begin(dst, dst_off + rel, n, false, &dp, &rl);
        if (err) break;
        err = do_change(dst->zs, &dp, dst_off + rel, n, buf, &txg);
        rl_exit(dst->zs, &rl);
        done += n;
    }
    free(buf);
    if (!err && txg && wants_durable(&dp, flags)) err = wait_durable(dst->zs, txg);
    return err;
}

int zvol_get_lba_status(zvol_t *zv, uint64_t off, zvol_lba_status_t *out)
{
    zvol_state_t *zs = zv->zs;
    if (!out) return -EINVAL;
    int err = check_aligned(zv, off, 0);
    if (err) return err;
    zvol_props_t p;
    get_props(zs, &p);
    if (off >= p.volsize) return -ERANGE;
    uint64_t limit = CAIRN_MIN(p.volsize, off + ZVOL_LBA_STATUS_MAX_EXTENT);
    out->off = off;
    dmu_object_info_t info = {0};
    if (zs->obj && (err = dmu_object_info(zs->os, zs->obj, &info))) return err;
    if (!zs->obj || off >= info.max_offset) {
        /* Nothing was ever written here or beyond. */
        out->mapped = false;
        out->len = limit - off;
        return 0;
    }
    /* Judged per logical block, not per record: an initiator that unmaps or
     * zero-fills one block of a record expects that block to read back as
     * deallocated while its neighbours stay mapped. Since a deallocated block
     * is exactly one that reads as zeros (LBPRZ = 1), the zeros inside a
     * record are deallocated blocks even though the record itself is stored. */
    uint8_t *rec = cairn_alloc_aligned(zs->rs);
    uint64_t pos = off, mapped_read = 0;
    bool have = false, done = false;
    while (pos < limit && !done) {
        if (pos >= info.max_offset) {
            if (have && !out->mapped) pos = limit; /* the deallocated run reaches the end */
            break;
        }
        uint64_t rend = CAIRN_MIN((pos / zs->rs + 1) * zs->rs, limit);
        if ((err = dmu_read(zs->os, zs->obj, pos, rend - pos, rec))) break;
        const uint8_t *b = rec;
        bool any_mapped = false;
        for (; pos < rend; pos += zv->lbs, b += zv->lbs) {
            bool mapped = !is_zero(b, zv->lbs);
            if (!have) {
                out->mapped = mapped;
                have = true;
            } else if (mapped != out->mapped) {
                done = true;
                break;
            }
            any_mapped |= mapped;
        }
        if (any_mapped && (mapped_read += zs->rs) >= ZVOL_LBA_SCAN_MAPPED_MAX) break;
    }
    free(rec);
    if (err) return err;
    out->len = pos - off;
    return 0;
}

int zvol_resize(zvol_t *zv, uint64_t new_size, bool force, char *err, size_t errlen)
{
    zvol_state_t *zs = zv->zs;
    if (err && errlen) err[0] = '\0';
    zvol_props_t p;
    props_refresh(zs, &p); /* exact: an administrative call, not the data path */
    if (zv->readonly || p.readonly || !zs->obj) {
        if (err) snprintf(err, errlen, "volume is read-only");
        return -EROFS;
    }
    if (new_size == 0 || new_size % zs->rs || new_size % zv->lbs) {
        if (err) snprintf(err, errlen, "volsize must be a nonzero multiple of volblocksize (%u)",
                          zs->rs);
        return -EINVAL;
    }
    /* Shrinking must not race with writes near the end: hold every stripe. */
    zvol_rl_t rl = {.first = 0, .count = ZVOL_NSTRIPES, .excl = true};
    for (uint32_t i = 0; i < ZVOL_NSTRIPES; i++) stripe_lock(zs, i, true);
    props_refresh(zs, &p);
    int e = 0;
    uint64_t old = p.volsize;
    if (new_size < old && !force) {
        if (err) snprintf(err, errlen, "shrinking a volume destroys data beyond the new end; use force");
        e = -EPERM;
    } else if (new_size != old) {
        if (new_size > old) {
            /* Blocks may lie beyond the old end (a shrink cut short by a crash,
             * or one made by the property alone before the DSL refused that):
             * the volume must grow over zeros, never over them. */
            dmu_object_info_t info;
            uint64_t txg = 0;
            e = dmu_object_info(zs->os, zs->obj, &info);
            if (!e && info.max_offset > old) e = do_change(zs, &p, old, info.max_offset - old, NULL, &txg);
            if (e && err) snprintf(err, errlen, "freeing beyond the old end: %s", strerror(-e));
        }
        if (!e) e = zs->be->set_volsize(zs, new_size, err, errlen);
        props_refresh(zs, &p); /* writers waiting on the stripes see the new size */
        if (!e && new_size < old) {
            dmu_object_info_t info;
            e = dmu_object_info(zs->os, zs->obj, &info);
            uint64_t end = CAIRN_MAX(old, info.max_offset);
            uint64_t txg = 0;
            if (!e && end > new_size) e = do_change(zs, &p, new_size, end - new_size, NULL, &txg);
            if (e && err) snprintf(err, errlen, "freeing beyond the new end: %s", strerror(-e));
        }
    }
    rl_exit(zs, &rl);
    return e;
}

/* ---------------- volumes over a bare object set ---------------- */

typedef struct zvol_bonus {
    uint64_t magic;
    uint64_t volsize;
} zvol_bonus_t;

static void os_get_props(zvol_state_t *zs, zvol_props_t *out)
{
    memset(out, 0, sizeof(*out));
    out->volsize = atomic_load(&zs->volsize);
    out->readonly = zs->os_readonly;
    out->sync = DSL_SYNC_STANDARD;
    out->compress = zs->applied.compress; /* keep what the object has */
    out->checksum = zs->applied.checksum;
    out->copies = zs->applied.copies;
}

static int os_check_space(zvol_state_t *zs, uint64_t bytes, bool nowait)
{
    (void)zs;
    (void)bytes;
    (void)nowait;
    return 0; /* no quotas without the dataset layer; the SPA reports a full pool */
}

static bool os_is_readonly(zvol_state_t *zs) { return zs->os_readonly; }

static int os_set_volsize(zvol_state_t *zs, uint64_t volsize, char *err, size_t errlen)
{
    zvol_bonus_t b = {.magic = ZVOL_BONUS_MAGIC, .volsize = volsize};
    dmu_tx_t *tx = dmu_tx_begin(zs->os);
    int e = dmu_bonus_write(zs->os, zs->obj, &b, sizeof(b), tx);
    uint64_t txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    if (e) {
        if (err) snprintf(err, errlen, "cannot record volsize: %s", strerror(-e));
        return e;
    }
    note_txg(zs, txg);
    zil_log_barrier(zs->zil, txg); /* ZIL: not a logged record: a flush waits for its txg */
    atomic_store(&zs->volsize, volsize);
    return 0;
}

static const zvol_backend_t zvol_os_backend = {
    .get_props = os_get_props,
    .check_space = os_check_space,
    .is_readonly = os_is_readonly,
    .set_volsize = os_set_volsize,
    .release = NULL,
};

static int os_init(zvol_state_t *zs, void *arg)
{
    const zvol_objset_opts_t *o = arg;
    uint32_t vbs = o->volblocksize ? o->volblocksize : ZVOL_DEFAULT_VOLBLOCKSIZE;
    zvol_props_t p = {.compress = CAIRN_COMPRESS_OFF, .checksum = CAIRN_CHECKSUM_FLETCHER4,
                      .copies = 1};
    zs->os_readonly = o->readonly;
    int err = zvol_object_setup(zs, vbs, &p, o->readonly);
    if (err) return err;
    zvol_bonus_t b = {0};
    uint32_t blen = 0;
    if (zs->obj) err = dmu_bonus_read(zs->os, zs->obj, &b, sizeof(b), &blen);
    if (err) return err;
    if (blen == sizeof(b) && b.magic == ZVOL_BONUS_MAGIC) {
        atomic_store(&zs->volsize, b.volsize);
        return 0;
    }
    if (o->volsize == 0 || o->volsize % zs->rs) return -EINVAL;
    if (!zs->obj) {
        atomic_store(&zs->volsize, o->volsize);
        return 0;
    }
    return os_set_volsize(zs, o->volsize, NULL, 0);
}

int zvol_open_objset(objset_t *os, const zvol_objset_opts_t *opts, zvol_t **out)
{
    if (!os || !opts || !out) return -EINVAL;
    uint32_t lbs = opts->block_size ? opts->block_size : ZVOL_DEFAULT_BLOCK_SIZE;
    if (lbs != 512 && lbs != 4096) return -EINVAL;
    uint32_t vbs = opts->volblocksize ? opts->volblocksize : ZVOL_DEFAULT_VOLBLOCKSIZE;
    if (vbs < DMU_MIN_RECORDSIZE || vbs > DMU_MAX_RECORDSIZE || (vbs & (vbs - 1))) return -EINVAL;
    zvol_state_t *zs;
    bool created;
    int err = zvol_state_get(os, &zvol_os_backend, NULL, os_init, (void *)opts, &zs, &created);
    if (err) return err;
    if (zs->rs % lbs) {
        state_rele(zs);
        return -EINVAL;
    }
    *out = zvol_handle_new(zs, lbs, opts->readonly);
    return 0;
}
