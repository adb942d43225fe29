/*
 * Dnodes: objects as sparse arrays of records, their dirty state per txg and
 * the writing out of one txg's changes.
 *
 * ON-DISK FORMAT (all little-endian; see dmu_impl.h for the C structs)
 *
 * dnode_phys_t, 512 bytes:
 *   0  u8  type          0 free slot, 1 plain object (records CAIRN_BT_DATA),
 *                        2 object-set directory (CAIRN_BT_DIRECTORY),
 *                        3 meta-dnode (records CAIRN_BT_DNODE),
 *                        4 ZAP object (records CAIRN_BT_ZAP; older pools
 *                        made their ZAPs plain objects)
 *   1  u8  nlevels       height of the block tree (1: root points at record 0)
 *   2  u8  checksum      cairn_checksum_t of its data records
 *   3  u8  compress      cairn_compress_t of its data records
 *   4  u8  copies        1..3 for data records
 *   5  u8  indblkshift   17: indirect blocks are 128 KiB = 1024 block pointers
 *   6  u16 flags         bit 0: a record was written (maxblkid is meaningful)
 *   8  u32 datablksz     record size, a power of two, 512 .. 1 MiB
 *  12  u32 bonuslen
 *  16  u64 maxblkid      highest record id ever written
 *  24  u64 used_bytes    sum of the allocated sizes of all its blocks (all DVAs)
 *  32  u64 generation    txg that allocated the object
 *  40  u64 pad[3]
 *  64  blkptr root       128 bytes
 * 192  u8  bonus[320]
 *
 * The tree: with nlevels = n, record id b (byte offset b * datablksz) hangs
 * under the level-1 indirect block b >> 10 at slot b & 1023; a level-L
 * indirect block i hangs under level L+1 block i >> 10 at slot i & 1023; the
 * root block pointer points at the single level n-1 block 0, or at record 0
 * when n = 1. Capacity is 1024^(n-1) records; offsets end at DMU_MAX_OFFSET
 * (2^63), so n <= 7 (see dmu_impl.h). Indirect blocks are
 * CAIRN_BT_INDIRECT with bp.level = their level, lz4 and fletcher4, and
 * always 128 KiB logically. Holes (ncopies == 0) cost nothing; a subtree with
 * no records is a hole, an all-zero record is a hole. fill of a record's bp is
 * 1, fill of an indirect's bp the sum of its children's fills.
 *
 * An object set's root block (CAIRN_BT_OBJSET, 1 KiB, objset_phys_t):
 *   0 u64 magic "CAIRNOS1" (0x31534f4e52494143), 8 u64 version (1),
 *  16 u64 object-set id, 24 u64 creation txg, 32 pad to 512,
 * 512 dnode_phys_t meta-dnode (type 3, datablksz 16 KiB): its record r holds
 *     dnodes 32r .. 32r+31, so object N is the dnode at byte N * 512 of the
 *     meta-dnode's data. Object 0 is never allocated.
 *
 * The pool's MOS is an object set (id 0) whose object 1 is the directory
 * (type 2, 16 KiB records) of 512-byte entries, entry k at byte k * 512:
 *   0 u64 id, 8 u64 flags (bit 0: in use), 16 u64 creation txg, 24 u64 0,
 *  32 char name[256] (NUL-terminated), 288 blkptr root of that object set
 *     (a hole while it is empty), 416 pad to 512.
 *
 * IN MEMORY
 *
 * A dnode_t keeps `phys`, the dnode as of the last completed sync, and `cur`,
 * its attributes including open changes. Changes are made in a txg: each live
 * txg (the open one, perhaps a quiescing one, the syncing one - never more
 * than four) has a slot with the records written in it (whole record
 * buffers), the ranges of whole records freed in it before those writes, and
 * a snapshot of the attributes as of the end of that txg. A reader looks at
 * the newest slot first: a record there wins, a freed range reads as zeros,
 * otherwise it falls through to older slots and finally to the block tree.
 * A change made in txg t is also applied to any newer slot that already
 * shadows the same record, so a writer still holding a closing txg cannot be
 * lost behind a newer copy of its record.
 *
 * The block tree is read through a per-dnode cache of indirect blocks keyed
 * by (level, blkid), equal to disk between syncs. The sync thread edits the
 * cached blocks in place (under the dnode lock, in memory only) while the
 * syncing slot still shadows every record it changes, so readers see either
 * version consistently; nlevels and the root are published when the slot is
 * retired. Record buffers of a closed txg are immutable, so records and
 * indirect blocks are written without the lock held.
 *
 * LOCKING. dn->lock is a writer-preferring reader-writer lock; the dirty
 * records of every slot are spread over DN_SHARDS maps by record id, each
 * guarded by the dnode's shard mutex of that index (one mutex covers record
 * b in all slots, so the shadowing of newer slots stays under it).
 *   - shared + the record's shard mutex: reading a record and, in open
 *     context, writing one (creating or changing its dirty copy, shadowing
 *     newer slots). Writers and readers of different records of one object
 *     run in parallel.
 *   - exclusive: everything that changes the slots' shape or attributes - the
 *     first change of a txg (creating its slot), a write past the known end
 *     (maxblkid, done after the records under a brief exclusive hold), frees,
 *     props, bonus, allocation, growing the record size, and the sync.
 *   - dn->ind_lock: inserting loaded indirect blocks into the cache while the
 *     dnode lock is shared (the sync edits them only under exclusive). Loading
 *     one holds it across the read: once per 1024 records.
 * DIRECT WRITES (dnode_write_direct, for the intent log's large writes). A
 * whole record is written into its dirty record as usual and, at once, as a
 * block of its own in the open txg. The dirty record then carries that block
 * as its override and the sync adopts it instead of writing the record; every
 * later change of the record's data (mods), a drop (freed range or object) or
 * a zero record turns the override into a block freed in its txg at that
 * txg's sync (spa_block_free_at_sync). The caller's transaction keeps the txg
 * open while the block is written.
 *
 * A partial-record write whose record must come from disk drops its locks
 * for the read and then looks again, keeping the read only if the lookup
 * still names the same block. Order: dn->lock, shard mutex, ind_lock; the
 * write throttle's accounting (spa_dirty_add) is done after unlocking.
 */
#include "dmu_impl.h"

#include <cairn/assert.h>
#include <cairn/bufpool.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <stdlib.h>
#include <string.h>

#define META_OBJ UINT64_MAX

/* Eviction statistics and limit (see "Holds and eviction" below). */
static _Atomic uint64_t dnodes_resident, dnodes_evicted;
static _Atomic uint64_t dnode_limit = 50000; /* ~2.2 KiB each, plus indirect blocks */

enum { LK_ZERO = 0, LK_DATA = 1, LK_BP = 2 };

/*
 * Record and indirect buffers. Every dirty record is an aligned allocation
 * freed when its txg has synced, so a write-heavy pool asks the allocator for
 * tens of thousands of same-sized aligned blocks per txg and gives them all
 * back at once: posix_memalign splits and the frees coalesce and split again
 * (a tenth of the CPU of 4 KiB sync writes went to malloc's chunk lists).
 * Freed buffers of a power-of-two size from 4 KiB to 1 MiB are kept on a list
 * per size and handed out again as they are, up to half the default dirty_max
 * in all: what one txg's sync frees, the next txg's writers reuse. The budget
 * is that large because the allocator would otherwise hand big txgs' memory
 * back to the system - a thread's arena deletes a whole free heap - and the
 * next txg faults it in again, zeroing every page: with 8 MiB kept per size,
 * 128 KiB sequential writes spent a third of their CPU in page faults once
 * txgs grew to hundreds of MiB. The memory stays with the process, as a
 * kernel's slab caches keep theirs. Each list is an array of pointers, not a
 * chain through the buffers: a kept buffer is cold, and a chain made every
 * allocation wait for a cache miss inside the list's lock (4% of the CPU of
 * 128 KiB volume writes, on the connection's thread).
 */
#define BUFCACHE_MIN_SHIFT 12
#define BUFCACHE_CLASSES 9 /* 4 KiB .. 1 MiB */

typedef struct bufcache_class {
    pthread_mutex_t lock;
    void **bufs; /* a stack: the last freed is the next handed out */
    size_t n, cap;
} bufcache_class_t;

static bufcache_class_t bufcache[BUFCACHE_CLASSES] = {
    [0 ... BUFCACHE_CLASSES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static _Atomic uint64_t bufcache_kept; /* bytes on the lists, all sizes */
static uint64_t bufcache_budget;
static pthread_once_t bufcache_once = PTHREAD_ONCE_INIT;

static void bufcache_size(void)
{
    bufcache_budget = spa_default_dirty_max() / 2;
    /* The same room for large records, which live in the buffer pool. */
    cairn_bufpool_set_reserve(bufcache_budget);
}

/* The class of an aligned size, or -1 when it is not one of them. Under
 * AddressSanitizer nothing is kept, so a use after free stays visible. */
static int bufcache_class(size_t size)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)size;
    return -1;
#endif
    for (int c = 0; c < BUFCACHE_CLASSES; c++)
        if (size == (size_t)1 << (BUFCACHE_MIN_SHIFT + c)) return c;
    return -1;
}

void *dmu_buf_alloc(size_t size)
{
    size_t asz = CAIRN_P2ROUNDUP(size, (size_t)CAIRN_IO_ALIGN);
    int c = bufcache_class(asz);
    if (c >= 0) {
        bufcache_class_t *bc = &bufcache[c];
        pthread_mutex_lock(&bc->lock);
        void *p = bc->n ? bc->bufs[--bc->n] : NULL;
        pthread_mutex_unlock(&bc->lock);
        if (p) {
            atomic_fetch_sub(&bufcache_kept, asz);
            return p;
        }
    }
    void *p = NULL;
    if (posix_memalign(&p, CAIRN_IO_ALIGN, asz)) abort();
    return p;
}

void dmu_buf_free(void *p, size_t size)
{
    if (!p) return;
    size_t asz = CAIRN_P2ROUNDUP(size, (size_t)CAIRN_IO_ALIGN);
    int c = bufcache_class(asz);
    if (c >= 0) {
        pthread_once(&bufcache_once, bufcache_size);
        /* Reserve first, so concurrent frees cannot overshoot the budget together. */
        if (atomic_fetch_add(&bufcache_kept, asz) + asz <= bufcache_budget) {
            bufcache_class_t *bc = &bufcache[c];
            pthread_mutex_lock(&bc->lock);
            if (bc->n == bc->cap) {
                bc->cap = bc->cap ? bc->cap * 2 : 1024;
                bc->bufs = cairn_realloc(bc->bufs, bc->cap * sizeof(*bc->bufs));
            }
            bc->bufs[bc->n++] = p;
            pthread_mutex_unlock(&bc->lock);
            return;
        }
        atomic_fetch_sub(&bufcache_kept, asz);
    }
    free(p);
}

void dmu_free_bp(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (!cairn_bp_is_hole(bp) && bp->birth_txg != 0) {
        dmu_cache_drop(spa, bp);
        spa_block_free(spa, txg, bp);
    }
}

void dmu_kill_bp(objset_t *os, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp) || bp->birth_txg == 0) return;
    if (os->hooks.kill) os->hooks.kill(os, bp, txg, os->hooks_arg);
    else dmu_free_bp(os->dp->spa, txg, bp);
}

void dmu_born_bp(objset_t *os, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp)) return;
    if (os->hooks.born) os->hooks.born(os, bp, txg, os->hooks_arg);
}

static inline uint64_t ind_key(unsigned level, uint64_t blkid)
{
    return ((uint64_t)level << 58) | blkid;
}

static inline uint64_t tree_capacity(unsigned nl)
{
    return nl <= 1 ? 1 : 1ULL << (DN_EPB_SHIFT * (nl - 1));
}

static unsigned levels_for(uint64_t maxblkid)
{
    unsigned nl = 1;
    while (maxblkid >= tree_capacity(nl)) nl++;
    return nl;
}

/*
 * Space estimates. Every change that dirties something new tells the pool two
 * things (spa_dirty_add): how many bytes are dirty (the write throttle and the
 * txg size trigger) and how much its sync will allocate, estimated from above
 * (the dataset layer counts that as used until the txg has synced, so quotas
 * and the pool's free space hold before the blocks exist). A newly dirtied
 * record costs its size with its copies and the pool's worst raidz parity, plus
 * every indirect block above it that this txg has not dirtied yet, in two
 * copies; a dnode its 512 bytes twice. Records dirtied again in the same txg,
 * frees and compression are not counted: the estimate only errs high.
 */
static spa_t *dn_spa(const dnode_t *dn) { return dn->os->dp->spa; }

typedef struct dn_newbytes {
    uint64_t dirty, space;
} dn_newbytes_t;

static void dn_account(dnode_t *dn, uint64_t txg, const dn_newbytes_t *nb)
{
    if (!nb->dirty && !nb->space) return;
    spa_dirty_add(dn_spa(dn), txg, (int64_t)nb->dirty, nb->space);
    objset_space_pending_add(dn->os, txg, nb->space);
}

/* A record newly dirty in slot s (of dn's txg s->txg): rs bytes, plus the
 * indirect blocks above it that s has not counted yet. An object of one record
 * has none (the dnode points at the record). */
static void note_new_record(dnode_t *dn, dn_slot_t *s, uint64_t blkid, uint32_t rs,
                            dn_newbytes_t *nb)
{
    spa_t *spa = dn_spa(dn);
    uint64_t est = spa_space_estimate(spa, rs, dn->cur.copies);
    nb->dirty += rs;
    uint64_t top = CAIRN_MAX(blkid, (dn->cur.flags & DNODE_FLAG_WRITTEN) ? dn->cur.maxblkid : 0);
    unsigned nl = levels_for(top);
    if (nl > 1) {
        uint64_t ind = spa_space_estimate(spa, DN_IND_BLKSZ, 2);
        pthread_mutex_lock(&s->est_lock);
        for (unsigned level = 1; level < nl; level++) {
            uint64_t key = ind_key(level, blkid >> (DN_EPB_SHIFT * level));
            if (dmu_map_get(&s->est_inds, key)) break; /* and every level above it */
            dmu_map_put(&s->est_inds, key, s);
            est += ind;
        }
        pthread_mutex_unlock(&s->est_lock);
    }
    nb->space += est;
    atomic_fetch_add_explicit(&s->space_est, est, memory_order_relaxed);
}

static cairn_blk_type_t dn_blk_type(uint8_t type)
{
    switch (type) {
    case DNODE_TYPE_DIRECTORY: return CAIRN_BT_DIRECTORY;
    case DNODE_TYPE_META: return CAIRN_BT_DNODE;
    case DNODE_TYPE_ZAP: return CAIRN_BT_ZAP;
    default: return CAIRN_BT_DATA;
    }
}

static bool buf_is_zero(const uint8_t *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)p;
    for (size_t i = 0; i < n / 8; i++)
        if (w[i]) return false;
    return true;
}

/* ---------------- creation ---------------- */

dnode_t *dnode_create(objset_t *os, uint64_t obj, const dnode_phys_t *phys)
{
    dnode_t *dn = cairn_zalloc(sizeof(*dn));
    dn->os = os;
    dn->obj = obj;
    /* Writer-preferring: a stream of shared holders (readers, writers of
     * records) must not starve the sync thread or a txg's first change. No
     * thread ever takes the same dnode's lock shared twice. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&dn->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    for (int i = 0; i < DN_SHARDS; i++) pthread_mutex_init(&dn->shard_lock[i], NULL);
    pthread_mutex_init(&dn->ind_lock, NULL);
    if (phys) dn->phys = *phys;
    dn->cur = dn->phys;
    dmu_map_init(&dn->inds);
    if (obj != META_OBJ) atomic_fetch_add(&dnodes_resident, 1);
    return dn;
}

/* Records from this size on live in a reference-counted buffer the ARC can
 * keep as the written block (dmu_rec_t.data_buf); the page of alignment that
 * buffer costs is then at most 1/16 of the record. Smaller ones are copied. */
#define REC_SHARED_MIN (64u * 1024)

/* A record buffer of rs bytes: *holder gets the buffer it lies in, or NULL. */
static uint8_t *rec_data_alloc(uint32_t rs, cairn_rbuf_t **holder)
{
    if (rs < REC_SHARED_MIN) {
        *holder = NULL;
        return dmu_buf_alloc(rs);
    }
    pthread_once(&bufcache_once, bufcache_size);
    *holder = cairn_rbuf_new_aligned(rs, CAIRN_P2ROUNDUP((size_t)rs, (size_t)CAIRN_IO_ALIGN));
    return (*holder)->data;
}

/* Gives back data from rec_data_alloc(rs, &holder). */
static void rec_data_free(uint8_t *data, uint32_t rs, cairn_rbuf_t *holder)
{
    if (holder) cairn_rbuf_rele(holder);
    else dmu_buf_free(data, rs);
}

/* Gives back the record's data, however it was allocated. */
static void rec_data_release(dmu_rec_t *r)
{
    if (r->data_buf) cairn_rbuf_rele(r->data_buf);
    else if (r->data_cap) dmu_buf_free(r->data, r->data_cap);
    else free(r->data);
    r->data = NULL;
    r->data_buf = NULL;
    r->data_cap = 0;
}

/* Sets the record's data to a new buffer of rs bytes (the old one not released). */
static void rec_data_new(dmu_rec_t *r, uint32_t rs)
{
    r->data = rec_data_alloc(rs, &r->data_buf);
    r->data_cap = r->data_buf ? 0 : rs;
}

static void rec_free(dmu_rec_t *r)
{
    rec_data_release(r);
    free(r);
}

/* Stamps of record changes: unique across records, dnodes and time, so a
 * stamp taken at a write names that very content (a record dropped and made
 * again does not start over from the same count). 0 is never a stamp. */
static _Atomic uint64_t rec_mods_clock;

/* The record's data changed (open context, its shard mutex held): a block
 * written directly from its old content no longer describes it. */
static void rec_changed(dnode_t *dn, uint64_t txg, dmu_rec_t *r)
{
    r->mods = atomic_fetch_add_explicit(&rec_mods_clock, 1, memory_order_relaxed) + 1;
    if (r->has_override) {
        r->has_override = false;
        spa_block_free_at_sync(dn->os->dp->spa, txg, &r->override_bp);
    }
}

/* A dirty record dropped before its sync (freed range, freed object). */
static void rec_drop(dnode_t *dn, uint64_t txg, dmu_rec_t *r)
{
    if (r->has_override) spa_block_free_at_sync(dn->os->dp->spa, txg, &r->override_bp);
    rec_free(r);
}

static void slot_destroy(dn_slot_t *s)
{
    for (int sh = 0; sh < DN_SHARDS; sh++) {
        size_t n;
        void **v = dmu_map_values(&s->recs[sh], &n);
        for (size_t i = 0; i < n; i++) rec_free(v[i]);
        free(v);
        dmu_map_fini(&s->recs[sh]);
    }
    dmu_map_fini(&s->est_inds);
    pthread_mutex_destroy(&s->est_lock);
    free(s->frees);
    free(s);
}

static void ind_free(dn_ind_t *ind)
{
    dmu_buf_free(ind->bps, DN_IND_BLKSZ);
    free(ind);
}

static void dn_drop_inds(dnode_t *dn)
{
    size_t n;
    void **v = dmu_map_values(&dn->inds, &n);
    for (size_t i = 0; i < n; i++) ind_free(v[i]);
    free(v);
    dmu_map_fini(&dn->inds);
}

void dnode_destroy(dnode_t *dn)
{
    if (dn->obj != META_OBJ) atomic_fetch_sub(&dnodes_resident, 1);
    for (int i = 0; i < 4; i++)
        if (dn->slots[i]) slot_destroy(dn->slots[i]);
    dn_drop_inds(dn);
    for (int l = 0; l < DN_MAX_LEVELS; l++) free(dn->dirty_inds[l]);
    pthread_rwlock_destroy(&dn->lock);
    for (int i = 0; i < DN_SHARDS; i++) pthread_mutex_destroy(&dn->shard_lock[i]);
    pthread_mutex_destroy(&dn->ind_lock);
    free(dn);
}

/* ---------------- slots ---------------- */

static dn_slot_t *slot_find(dnode_t *dn, uint64_t txg)
{
    dn_slot_t *s = dn->slots[txg & 3];
    return s && s->txg == txg ? s : NULL;
}

/*
 * What the object's blocks take as of the last sync, plus the estimate for the
 * records its unsynced txgs dirtied (dn->lock held): the used space a user
 * reads of a file just written, not zero until its txg syncs. A commit that
 * writes no txg (the intent log's commit-time blocks) answers before that
 * sync, and a client that caches attributes under a delegation keeps what the
 * commit's reply said. From above while records are overwritten, as the
 * dataset's pending space is.
 */
uint64_t dnode_used_estimate(dnode_t *dn)
{
    uint64_t used = dn->phys.used_bytes;
    for (int i = 0; i < 4; i++)
        if (dn->slots[i]) used += atomic_load_explicit(&dn->slots[i]->space_est, memory_order_relaxed);
    return used;
}

/* Live slots, oldest first. */
static size_t slots_sorted(dnode_t *dn, dn_slot_t *out[4])
{
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        if (dn->slots[i]) out[n++] = dn->slots[i];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && out[j - 1]->txg > out[j]->txg; j--) {
            dn_slot_t *t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* For the assertion that slots retire oldest first. */
static inline dn_slot_t *oldest_slot(dnode_t *dn)
{
    dn_slot_t *live[4];
    return slots_sorted(dn, live) ? live[0] : NULL;
}

void objset_dirty_dnode(objset_t *os, dnode_t *dn, uint64_t txg)
{
    pthread_mutex_lock(&os->dirty_lock);
    os_dirty_t *d = &os->dirty[txg & 3];
    if (d->txg != txg) {
        if (d->n) log_error("dmu", "objset %llu: dirty list of txg %llu not synced before %llu",
                            (unsigned long long)os->id, (unsigned long long)d->txg,
                            (unsigned long long)txg);
        d->txg = txg;
        d->n = 0;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->dns = cairn_realloc(d->dns, d->cap * sizeof(*d->dns));
    }
    d->dns[d->n++] = dn;
    pthread_mutex_unlock(&os->dirty_lock);
}

static dn_slot_t *slot_get(dnode_t *dn, uint64_t txg, bool sync_ctx)
{
    dn_slot_t *s = slot_find(dn, txg);
    if (s) return s;
    if (dn->slots[txg & 3]) {
        /* Four txgs can never be live at once; this would be an SPA bug. */
        log_error("dmu", "dnode %llu: txg %llu still live when txg %llu dirties it",
                  (unsigned long long)dn->obj, (unsigned long long)dn->slots[txg & 3]->txg,
                  (unsigned long long)txg);
        abort();
    }
    /* A new slot changes the dnode's txg state: only under dn->lock exclusive. */
    CAIRN_ASSERT(txg != 0 && cairn_rwlock_wrheld(&dn->lock));
    s = cairn_zalloc(sizeof(*s));
    s->txg = txg;
    for (int sh = 0; sh < DN_SHARDS; sh++) dmu_map_init(&s->recs[sh]);
    pthread_mutex_init(&s->est_lock, NULL);
    dmu_map_init(&s->est_inds);
    dn_slot_t *older = NULL;
    for (int i = 0; i < 4; i++) {
        dn_slot_t *o = dn->slots[i];
        if (o && o->txg < txg && (!older || o->txg > older->txg)) older = o;
    }
    s->snap = older ? older->snap : dn->phys;
    dn->slots[txg & 3] = s;
    if (dn->obj != META_OBJ) {
        objset_dirty_dnode(dn->os, dn, txg);
        /* Its share of a rewritten dnode block, in both metadata copies. */
        if (!sync_ctx) dn_account(dn, txg, &(dn_newbytes_t){DNODE_SIZE, 2 * DNODE_SIZE});
    }
    return s;
}

static bool slot_freed(const dn_slot_t *s, uint64_t blkid)
{
    for (size_t i = 0; i < s->nfrees; i++)
        if (blkid >= s->frees[i].start && blkid < s->frees[i].end) return true;
    return false;
}

/* ---------------- attributes ---------------- */

enum attr_kind { ATTR_ALLOC, ATTR_FREE, ATTR_PROPS, ATTR_BONUS, ATTR_MAXBLKID };

typedef struct attr_change {
    enum attr_kind kind;
    uint8_t type;
    uint64_t txg;
    const dmu_object_props_t *props;
    const void *bonus;
    uint32_t bonuslen;
    uint64_t blkid;
} attr_change_t;

static void attr_apply_one(dnode_phys_t *p, const attr_change_t *c)
{
    switch (c->kind) {
    case ATTR_ALLOC:
        memset(p, 0, sizeof(*p));
        p->type = c->type;
        p->nlevels = 1;
        p->indblkshift = DN_INDBLKSHIFT;
        /* fallthrough */
    case ATTR_PROPS:
        p->checksum = c->props->checksum;
        p->compress = c->props->compress;
        p->copies = c->props->copies;
        p->datablksz = c->props->recordsize;
        if (c->kind == ATTR_ALLOC) p->generation = c->txg;
        break;
    case ATTR_FREE: memset(p, 0, sizeof(*p)); break;
    case ATTR_BONUS:
        memset(p->bonus, 0, sizeof(p->bonus));
        memcpy(p->bonus, c->bonus, c->bonuslen);
        p->bonuslen = c->bonuslen;
        break;
    case ATTR_MAXBLKID:
        if (!(p->flags & DNODE_FLAG_WRITTEN) || p->maxblkid < c->blkid) p->maxblkid = c->blkid;
        p->flags |= DNODE_FLAG_WRITTEN;
        break;
    }
}

static void dn_attr_change(dnode_t *dn, uint64_t txg, const attr_change_t *c, bool sync_ctx)
{
    slot_get(dn, txg, sync_ctx);
    attr_apply_one(&dn->cur, c);
    for (int i = 0; i < 4; i++)
        if (dn->slots[i] && dn->slots[i]->txg >= txg) attr_apply_one(&dn->slots[i]->snap, c);
    dn->mod_gen++;
}

void dnode_set_alloc(dnode_t *dn, uint64_t txg, uint8_t type, const dmu_object_props_t *p,
                     bool sync_ctx)
{
    attr_change_t c = {.kind = type ? ATTR_ALLOC : ATTR_FREE, .type = type, .txg = txg,
                       .props = p};
    dn_attr_change(dn, txg, &c, sync_ctx);
}

static int dirty_rec(dnode_t *dn, uint64_t txg, uint64_t blkid, bool whole, bool shared,
                     dmu_rec_t **out, dn_newbytes_t *nb);

/*
 * The record size of an object that has a single record (record 0) may grow,
 * so a file written in small appends ends with full-size records: record 0
 * becomes a dirty record of txg (and of every newer live txg that has it) at
 * the new size, its bytes first and zeros after. Older txgs still write their
 * copy at the old size: their attribute snapshot says so. dn->lock exclusive.
 */
static int grow_single_record(dnode_t *dn, uint64_t txg, uint32_t newsz)
{
    dn_newbytes_t nb = {0, 0};
    dmu_rec_t *r;
    slot_get(dn, txg, false);
    int err = dirty_rec(dn, txg, 0, false, false, &r, &nb);
    if (err) return err;
    /* dirty_rec may have dropped the lock: check again. */
    if (dn->cur.type == DNODE_TYPE_FREE) return -ENOENT;
    if (dn->cur.maxblkid != 0) return -EINVAL;
    uint32_t old = dn->cur.datablksz;
    if (old >= newsz) return 0;
    for (int i = 0; i < 4; i++) {
        dn_slot_t *s = dn->slots[i];
        dmu_rec_t *x = s && s->txg >= txg ? dmu_map_get(&s->recs[dn_shard(0)], 0) : NULL;
        if (!x) continue;
        cairn_rbuf_t *holder;
        uint8_t *d = rec_data_alloc(newsz, &holder);
        memcpy(d, x->data, old);
        memset(d + old, 0, newsz - old);
        rec_data_release(x);
        x->data = d;
        x->data_buf = holder;
        x->data_cap = holder ? 0 : newsz;
        rec_changed(dn, s->txg, x); /* a block written at the old size is not it */
        nb.dirty += newsz - old;
        uint64_t est = spa_space_estimate(dn_spa(dn), newsz - old, dn->cur.copies);
        nb.space += est;
        atomic_fetch_add_explicit(&s->space_est, est, memory_order_relaxed);
    }
    dn_account(dn, txg, &nb);
    return 0;
}

int dnode_set_props_locked(dnode_t *dn, uint64_t txg, const dmu_object_props_t *p)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&dn->lock));
    if (p->recordsize != dn->cur.datablksz && (dn->cur.flags & DNODE_FLAG_WRITTEN)) {
        if (p->recordsize < dn->cur.datablksz || dn->cur.maxblkid != 0 || dn->obj == META_OBJ)
            return -EINVAL;
        int err = grow_single_record(dn, txg, p->recordsize);
        if (err) return err;
    }
    attr_change_t c = {.kind = ATTR_PROPS, .txg = txg, .props = p};
    dn_attr_change(dn, txg, &c, false);
    return 0;
}

void dnode_set_bonus_locked(dnode_t *dn, uint64_t txg, const void *buf, uint32_t len)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&dn->lock));
    attr_change_t c = {.kind = ATTR_BONUS, .txg = txg, .bonus = buf, .bonuslen = len};
    dn_attr_change(dn, txg, &c, false);
}

bool dnode_is_reusable(dnode_t *dn)
{
    if (dn->cur.type != DNODE_TYPE_FREE) return false;
    for (int i = 0; i < 4; i++)
        if (dn->slots[i]) return false;
    return true;
}

/* ---------------- the block tree (dn->lock held) ---------------- */

/* The indirect block (level, id) of a tree of nl levels rooted at root: from the
 * cache, else read through its parent. A hole gives NULL, or a new empty block
 * when create (syncing context). */
static dn_ind_t *get_ind(dnode_t *dn, unsigned nl, const cairn_blkptr_t *root, unsigned level,
                         uint64_t id, bool create, int *err)
{
    dn_ind_t *ind = dmu_map_get(&dn->inds, ind_key(level, id));
    if (ind) return ind;
    const cairn_blkptr_t *pbp;
    if (level == nl - 1) {
        pbp = root;
    } else {
        dn_ind_t *parent = get_ind(dn, nl, root, level + 1, id >> DN_EPB_SHIFT, create, err);
        if (!parent) return NULL;
        pbp = &parent->bps[id & (DN_EPB - 1)];
    }
    if (cairn_bp_is_hole(pbp) && !create) return NULL;
    cairn_blkptr_t *bps = dmu_buf_alloc(DN_IND_BLKSZ);
    if (cairn_bp_is_hole(pbp)) {
        memset(bps, 0, DN_IND_BLKSZ);
    } else {
        int e = pbp->lsize == DN_IND_BLKSZ ? spa_block_read(dn_spa(dn), pbp, bps) : -EIO;
        if (e) {
            dmu_read_error(dn->os, dn->obj, level, id, dn->cur.datablksz, e);
            free(bps);
            *err = e;
            return NULL;
        }
    }
    ind = cairn_zalloc(sizeof(*ind));
    ind->level = (uint8_t)level;
    ind->blkid = id;
    ind->bps = bps;
    dmu_map_put(&dn->inds, ind_key(level, id), ind);
    return ind;
}

static int tree_get_bp(dnode_t *dn, unsigned nl, const cairn_blkptr_t *root, uint64_t blkid,
                       cairn_blkptr_t *out)
{
    if (nl == 0) nl = 1;
    memset(out, 0, sizeof(*out));
    if (blkid >= tree_capacity(nl)) return 0;
    if (nl == 1) {
        *out = *root;
        return 0;
    }
    int err = 0;
    /* Under a shared dnode lock several readers may load indirect blocks. */
    pthread_mutex_lock(&dn->ind_lock);
    dn_ind_t *ind = get_ind(dn, nl, root, 1, blkid >> DN_EPB_SHIFT, false, &err);
    if (ind) *out = ind->bps[blkid & (DN_EPB - 1)];
    pthread_mutex_unlock(&dn->ind_lock);
    return err;
}

/* Where the content of record blkid comes from, as seen by txg `upto`. */
static int dn_lookup(dnode_t *dn, uint64_t upto, uint64_t blkid, const uint8_t **data,
                     cairn_blkptr_t *bp, int *err)
{
    dn_slot_t *ss[4];
    size_t n = slots_sorted(dn, ss);
    *err = 0;
    for (size_t i = n; i-- > 0;) {
        if (ss[i]->txg > upto) continue;
        dmu_rec_t *r = dmu_map_get(&ss[i]->recs[dn_shard(blkid)], blkid);
        if (r) {
            *data = r->data;
            return LK_DATA;
        }
        if (slot_freed(ss[i], blkid)) return LK_ZERO;
    }
    *err = tree_get_bp(dn, dn->phys.nlevels, &dn->phys.root, blkid, bp);
    if (*err || cairn_bp_is_hole(bp)) return LK_ZERO;
    return LK_BP;
}

/* ---------------- open context: records ---------------- */

/* The record blkid of txg's slot (which exists), created from its current
 * content unless the caller overwrites it whole. Called with dn->lock held
 * exclusively, or shared together with the record's shard lock. A record that
 * must come from disk is read with the locks dropped; the lookup is then
 * repeated and the read kept only if it still names the same block (any
 * change to the record in the meantime shows as a dirty record or another
 * block pointer). *nb gets what was newly dirtied; the caller accounts
 * them once it has unlocked. */
static int dirty_rec(dnode_t *dn, uint64_t txg, uint64_t blkid, bool whole, bool shared,
                     dmu_rec_t **out, dn_newbytes_t *nb)
{
    unsigned sh = dn_shard(blkid);
    uint8_t *data = NULL;
    cairn_rbuf_t *holder = NULL;
    uint32_t data_size = 0;
    cairn_blkptr_t read_bp;
    bool have_read = false;
    for (;;) {
        dn_slot_t *s = slot_find(dn, txg);
        dmu_rec_t *r = dmu_map_get(&s->recs[sh], blkid);
        if (r) {
            rec_data_free(data, data_size, holder);
            *out = r;
            return 0;
        }
        uint32_t rs = dn->cur.datablksz;
        if (data && data_size != rs) {
            rec_data_free(data, data_size, holder);
            data = NULL;
            have_read = false;
        }
        if (!data) {
            data = rec_data_alloc(rs, &holder);
            data_size = rs;
        }
        if (!whole) {
            const uint8_t *src = NULL;
            cairn_blkptr_t bp;
            int err;
            int k = dn_lookup(dn, txg, blkid, &src, &bp, &err);
            if (err) {
                rec_data_free(data, data_size, holder);
                return err;
            }
            if (k == LK_DATA) {
                memcpy(data, src, rs);
            } else if (k == LK_ZERO) {
                memset(data, 0, rs);
            } else if (!have_read || memcmp(&bp, &read_bp, sizeof(bp))) {
                if (bp.lsize != rs) {
                    rec_data_free(data, data_size, holder);
                    return -EIO;
                }
                if (shared) pthread_mutex_unlock(&dn->shard_lock[sh]);
                dn_unlock(dn);
                err = dmu_cache_read(dn->os, &bp, data);
                if (err) dmu_read_error(dn->os, dn->obj, 0, blkid, rs, err);
                if (shared) {
                    dn_rlock(dn);
                    pthread_mutex_lock(&dn->shard_lock[sh]);
                } else {
                    dn_wlock(dn);
                }
                if (!err && dn->cur.type == DNODE_TYPE_FREE) err = -ENOENT;
                if (err) {
                    rec_data_free(data, data_size, holder);
                    return err;
                }
                read_bp = bp;
                have_read = true;
                continue; /* look again: someone may have changed the record meanwhile */
            }
        }
        r = cairn_zalloc(sizeof(*r));
        r->blkid = blkid;
        r->data = data;
        r->data_buf = holder;
        r->data_cap = holder ? 0 : data_size;
        dmu_map_put(&s->recs[sh], blkid, r);
        dn->mod_gen++;
        note_new_record(dn, s, blkid, rs, nb);
        *out = r;
        return 0;
    }
}

/*
 * Writes (src NULL: zeros) into the records of txg, whose slot exists.
 * Exclusive: dn->lock held exclusively. Shared: dn->lock held shared, and
 * each record is changed under its shard lock, so writers of different
 * records run in parallel. Attributes never change under a shared lock:
 * *maxblkid gets the highest record written (*wrote set) for the caller to
 * record.
 */
static int dn_write_records(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len,
                            const uint8_t *src, bool shared, dn_newbytes_t *nb,
                            uint64_t *maxblkid, bool *wrote, uint64_t *mods_out, size_t nmods)
{
    /* mods_out[i]: the stamp record off / rs + i got (0: not known) */
    uint32_t rs0 = dn->cur.datablksz;
    uint64_t first_blkid = off / rs0;
    /* A writer still in a txg older than a record-size change cannot write:
     * its txg stores records at the old size. */
    if (slot_find(dn, txg)->snap.datablksz != dn->cur.datablksz) return -EINVAL;
    while (len > 0) {
        uint32_t rs = dn->cur.datablksz;
        uint64_t blkid = off / rs;
        uint32_t boff = (uint32_t)(off % rs);
        uint32_t n = (uint32_t)CAIRN_MIN(len, (uint64_t)(rs - boff));
        bool whole = boff == 0 && n == rs;
        unsigned sh = dn_shard(blkid);
        if (shared) pthread_mutex_lock(&dn->shard_lock[sh]);
        dmu_rec_t *r = dmu_map_get(&slot_find(dn, txg)->recs[sh], blkid);
        int err = 0;
        if (whole) {
            /* Overwritten whole: the old content is not needed. (Copying into
             * a fresh buffer before locking was tried: the allocator's page
             * faults cost more than the copy under the shard mutex.) */
            if (!r) {
                r = cairn_zalloc(sizeof(*r));
                r->blkid = blkid;
                rec_data_new(r, rs);
                dn_slot_t *s = slot_find(dn, txg);
                dmu_map_put(&s->recs[sh], blkid, r);
                dn->mod_gen++;
                note_new_record(dn, s, blkid, rs, nb);
            }
            /* Streaming stores: the record is next read when its txg syncs, long
             * after this write has left the cache, and a plain copy first read
             * every line of the (cold, recycled) buffer it overwrites - at 128
             * KiB iSCSI writes a tenth of the CPU per write. */
            if (src) cairn_copy_nontemporal(r->data, src, rs);
            else memset(r->data, 0, rs);
            rec_changed(dn, txg, r);
            if (rs == rs0 && blkid - first_blkid < nmods) mods_out[blkid - first_blkid] = r->mods;
        } else {
            err = dirty_rec(dn, txg, blkid, false, shared, &r, nb);
            if (!err && dn->cur.datablksz != rs) {
                /* The record size changed while the locks were dropped: again. */
                if (shared) pthread_mutex_unlock(&dn->shard_lock[sh]);
                continue;
            }
            if (!err) {
                if (src) memcpy(r->data + boff, src, n);
                else memset(r->data + boff, 0, n);
                rec_changed(dn, txg, r);
                if (rs == rs0 && blkid - first_blkid < nmods)
                    mods_out[blkid - first_blkid] = r->mods;
            }
        }
        /* Keep newer txgs that shadow this record up to date. */
        for (int i = 0; i < 4 && !err; i++) {
            dn_slot_t *s = dn->slots[i];
            if (!s || s->txg <= txg) continue;
            dmu_rec_t *nr = dmu_map_get(&s->recs[sh], blkid);
            if (!nr && slot_freed(s, blkid))
                err = dirty_rec(dn, s->txg, blkid, false, shared, &nr, nb);
            if (nr && !err) {
                if (src) memcpy(nr->data + boff, src, n);
                else memset(nr->data + boff, 0, n);
                rec_changed(dn, s->txg, nr);
            }
        }
        if (shared) pthread_mutex_unlock(&dn->shard_lock[sh]);
        if (err) return err;
        if (!*wrote || *maxblkid < blkid) *maxblkid = blkid;
        *wrote = true;
        off += n;
        len -= n;
        if (src) src += n;
    }
    return 0;
}

static void note_maxblkid(dnode_t *dn, uint64_t txg, uint64_t blkid, bool sync_ctx)
{
    attr_change_t c = {.kind = ATTR_MAXBLKID, .blkid = blkid};
    dn_attr_change(dn, txg, &c, sync_ctx);
}

/* True when txg and every newer txg already know a record up to blkid. */
static bool maxblkid_covers(const dnode_t *dn, uint64_t txg, uint64_t blkid)
{
    if (!(dn->cur.flags & DNODE_FLAG_WRITTEN) || dn->cur.maxblkid < blkid) return false;
    for (int i = 0; i < 4; i++) {
        const dn_slot_t *s = dn->slots[i];
        if (!s || s->txg < txg) continue;
        if (!(s->snap.flags & DNODE_FLAG_WRITTEN) || s->snap.maxblkid < blkid) return false;
    }
    return true;
}

/* Writes (src NULL: zeros) into records of txg, dn->lock held exclusively. */
static int dn_write_locked(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len,
                           const uint8_t *src, bool sync_ctx)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&dn->lock));
    dn_newbytes_t nb = {0, 0};
    uint64_t maxblkid = 0;
    bool wrote = false;
    slot_get(dn, txg, sync_ctx);
    int err = dn_write_records(dn, txg, off, len, src, false, &nb, &maxblkid, &wrote, NULL, 0);
    if (wrote) note_maxblkid(dn, txg, maxblkid, sync_ctx);
    if (!sync_ctx && dn->obj != META_OBJ) dn_account(dn, txg, &nb);
    return err;
}

/*
 * Open-context writes of user objects hold the dnode lock shared, so writers
 * of different records of one object (a volume's random writes) proceed in
 * parallel; only the first change of a txg (its slot) and a record beyond the
 * known end (maxblkid) take it exclusively, briefly. The txg cannot sync
 * while the caller's transaction holds it, so the slot stays between the two.
 */
static int dn_write_open(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                         uint64_t *mods_out, size_t nmods);

int dnode_write_impl(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                     bool sync_ctx)
{
    if (off > DMU_MAX_OFFSET || len > DMU_MAX_OFFSET - off) return -EFBIG;
    if (sync_ctx || dn->obj == META_OBJ) {
        dn_wlock(dn);
        int err = dn->cur.type == DNODE_TYPE_FREE
                      ? -ENOENT
                      : dn_write_locked(dn, txg, off, len, buf, sync_ctx);
        dn_unlock(dn);
        return err;
    }
    return dn_write_open(dn, txg, off, len, buf, NULL, 0);
}

int dnode_write_stamped(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                        uint64_t *stamps, size_t nstamps)
{
    memset(stamps, 0, nstamps * sizeof *stamps);
    if (off > DMU_MAX_OFFSET || len > DMU_MAX_OFFSET - off) return -EFBIG;
    if (dn->obj == META_OBJ) return -EINVAL;
    return dn_write_open(dn, txg, off, len, buf, stamps, nstamps);
}

static int dn_write_open(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                         uint64_t *mods_out, size_t nmods)
{
    dn_rlock(dn);
    if (!slot_find(dn, txg)) {
        dn_unlock(dn);
        dn_wlock(dn);
        if (dn->cur.type != DNODE_TYPE_FREE) slot_get(dn, txg, false);
        dn_unlock(dn);
        dn_rlock(dn);
    }
    dn_newbytes_t nb = {0, 0};
    uint64_t maxblkid = 0;
    bool wrote = false;
    int err = dn->cur.type == DNODE_TYPE_FREE || !slot_find(dn, txg)
                  ? -ENOENT
                  : dn_write_records(dn, txg, off, len, buf, true, &nb, &maxblkid, &wrote,
                                     mods_out, nmods);
    bool need_max = wrote && !maxblkid_covers(dn, txg, maxblkid);
    dn_unlock(dn);
    if (need_max) {
        dn_wlock(dn);
        if (dn->cur.type != DNODE_TYPE_FREE) note_maxblkid(dn, txg, maxblkid, false);
        dn_unlock(dn);
    }
    dn_account(dn, txg, &nb);
    return err;
}

/*
 * The last step of a direct write and of a clone, which both put a block
 * beside a record they have just written in txg (held open by the caller):
 * bp becomes record blkid's override, for the sync to adopt instead of
 * writing the record, only if nothing changed the record since that write
 * (its mods count is still mods) and nothing else gave it an override;
 * otherwise the block describes older content and is freed at txg's sync.
 * Returns whether bp became the override.
 */
static bool rec_override_or_free(dnode_t *dn, uint64_t txg, uint64_t blkid, uint64_t mods,
                                 const cairn_blkptr_t *bp)
{
    unsigned sh = dn_shard(blkid);
    dn_rlock(dn);
    pthread_mutex_lock(&dn->shard_lock[sh]);
    dn_slot_t *s = slot_find(dn, txg);
    dmu_rec_t *r = s ? dmu_map_get(&s->recs[sh], blkid) : NULL;
    bool adopt = r && r->mods == mods && !r->has_override;
    if (adopt) {
        r->has_override = true;
        r->override_bp = *bp;
    }
    pthread_mutex_unlock(&dn->shard_lock[sh]);
    dn_unlock(dn);
    if (!adopt) spa_block_free_at_sync(dn_spa(dn), txg, bp);
    return adopt;
}

/*
 * A whole record written now and, at once, as its own block (for the intent
 * log, see dmu_write_direct in include/cairn/dmu.h). The caller's transaction
 * holds txg open, so the slot stays while the block is written; the record's
 * mods count, taken under its shard mutex with the write, tells whether
 * anything changed it meanwhile. If so the block describes an older content
 * and is freed in txg; else it becomes the record's override and the sync
 * adopts it (dnode_write_recs_task).
 */
int dnode_write_direct(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                       cairn_blkptr_t *bp)
{
    memset(bp, 0, sizeof *bp);
    if (dn->obj == META_OBJ) return -EINVAL;
    dn_rlock(dn);
    uint32_t rs = dn->cur.datablksz;
    dn_unlock(dn);
    if (len != rs || off % rs) return -EINVAL;
    uint64_t mods = 0;
    int err = dn_write_open(dn, txg, off, len, buf, &mods, 1);
    if (err) return err;
    uint64_t blkid = off / rs;
    dn_rlock(dn);
    dn_slot_t *s = slot_find(dn, txg);
    if (!s || s->snap.datablksz != rs || dn->cur.type == DNODE_TYPE_FREE) {
        dn_unlock(dn);
        return 0; /* the data is written; the caller logs it some other way */
    }
    spa_write_props_t props = {
        .type = dn_blk_type(s->snap.type),
        .checksum = s->snap.checksum ? s->snap.checksum : CAIRN_CHECKSUM_FLETCHER4,
        .compress = s->snap.compress,
        .copies = s->snap.copies ? s->snap.copies : 1,
        /* kept in the ARC as stored, as the sync's own writes are */
        .cache = true,
        .cache_policy = dmu_objset_cache_policy(dn->os),
    };
    dn_unlock(dn);
    if (props.type != CAIRN_BT_DATA) return 0;
    spa_t *spa = dn_spa(dn);
    cairn_blkptr_t nbp;
    if (spa_block_write_open(spa, txg, buf, rs, &props, &nbp)) return 0;
    /* If the record changed meanwhile, this block is not the record's, but it
     * does hold the bytes this write wrote, so a log record may still point at
     * it: it lives until txg, whose sync frees it. */
    (void)rec_override_or_free(dn, txg, blkid, mods, &nbp);
    *bp = nbp;
    return 0;
}

/*
 * Dirty records written as blocks at commit time (dmu_write_dirty_blocks in
 * include/cairn/dmu.h): the intent log's way to make an asynchronous write
 * durable without a second copy of its bytes. Only while txg is the open txg
 * (held here, so the records' slot stays and no newer txg can change them)
 * and only if each record still carries the stamp its write left: then its
 * bytes are exactly what that write made of it. They are copied under the
 * shard mutex (writers change records in place; the copies go to the ARC as
 * they are, as a syncing record's buffer does) and written together, one
 * allocation after another (a few large I/Os per leaf, as the sync writes
 * records), like dnode_write_direct's blocks; each becomes its record's
 * override for the sync to adopt. A change in between (the stamp moved)
 * frees that block in txg and asks the caller to wait for the txg instead, as
 * does everything unusual; blocks already adopted stay the txg's.
 */
int dnode_write_dirty_blocks(dnode_t *dn, uint64_t txg, uint64_t first, size_t n,
                             const uint64_t *stamps, cairn_blkptr_t *bps)
{
    memset(bps, 0, n * sizeof *bps);
    if (dn->obj == META_OBJ || !n) return -EAGAIN;
    spa_t *spa = dn_spa(dn);
    if (!spa_tx_hold_if_open(spa, txg)) return -EAGAIN;
    int err = -EAGAIN;
    uint32_t rs = 0;
    cairn_rbuf_t **bufs = cairn_zalloc(n * sizeof *bufs);
    const void **datas = cairn_zalloc(n * sizeof *datas);
    uint32_t *sizes = cairn_zalloc(n * sizeof *sizes);
    spa_write_props_t props = {0};
    dn_rlock(dn);
    dn_slot_t *s = slot_find(dn, txg);
    if (s && dn->cur.type == DNODE_TYPE_PLAIN && s->snap.datablksz == dn->cur.datablksz &&
        dn_blk_type(s->snap.type) == CAIRN_BT_DATA) {
        rs = s->snap.datablksz;
        props = (spa_write_props_t){
            .type = CAIRN_BT_DATA,
            .checksum = s->snap.checksum ? s->snap.checksum : CAIRN_CHECKSUM_FLETCHER4,
            .compress = s->snap.compress,
            .copies = s->snap.copies ? s->snap.copies : 1,
            .cache = true,
            .cache_policy = dmu_objset_cache_policy(dn->os),
        };
        err = 0;
        for (size_t i = 0; i < n && !err; i++) {
            unsigned sh = dn_shard(first + i);
            pthread_mutex_lock(&dn->shard_lock[sh]);
            dmu_rec_t *r = dmu_map_get(&s->recs[sh], first + i);
            if (r && stamps[i] && r->mods == stamps[i] && !r->has_override) {
                bufs[i] = cairn_rbuf_new_aligned(rs, rs);
                memcpy(bufs[i]->data, r->data, rs);
                datas[i] = bufs[i]->data;
                sizes[i] = rs;
            } else {
                err = -EAGAIN;
            }
            pthread_mutex_unlock(&dn->shard_lock[sh]);
        }
    }
    dn_unlock(dn);
    /* The copies are never written again: the ARC keeps them as they are. */
    if (!err && spa_block_write_many_open(spa, txg, n, datas, bufs, sizes, &props, bps))
        err = -EAGAIN;
    for (size_t i = 0; i < n && !err; i++) {
        if (!rec_override_or_free(dn, txg, first + i, stamps[i], &bps[i])) {
            err = -EAGAIN; /* freed in txg; the rest are freed the same way */
            for (size_t j = i + 1; j < n; j++) spa_block_free_at_sync(spa, txg, &bps[j]);
        }
    }
    for (size_t i = 0; i < n; i++) cairn_rbuf_rele(bufs[i]);
    free(bufs);
    free(datas);
    free(sizes);
    spa_tx_rele(spa, txg);
    if (err) memset(bps, 0, n * sizeof *bps);
    return err;
}

/*
 * Block cloning (dmu_clone_range): record sblkid of src becomes record dblkid
 * of dst in txg (held open by the caller) by sharing src's block. The dirty
 * record gets the block's bytes (readers of dirty records read memory) and the
 * block as its override, which the sync adopts as it adopts a direct write's
 * block: no new allocation, the same DVAs, checksum and compression, born in
 * txg with the bytes' own txg as its physical birth (a
 * block's checksum covers its bytes only, nothing of its place, so the pointer
 * verifies wherever it is put). The extra reference is taken in the pool's
 * block reference table before the override is set; every way the override can
 * be dropped (a later change, a free, a zero record) frees it in txg, which
 * gives that reference back. The source record must be on disk as of the last
 * sync: a dirty one (in any live txg) is -EAGAIN, so the caller waits for its
 * sync and asks again. Returns 1 cloned, 0 a hole (dst written as zeros), or
 * -errno (-EOPNOTSUPP: the block cannot be shared, e.g. a gang block; copy).
 */
int dnode_clone_record(dnode_t *src, uint64_t sblkid, dnode_t *dst, uint64_t txg, uint64_t dblkid)
{
    if (src->obj == META_OBJ || dst->obj == META_OBJ) return -EINVAL;
    spa_t *spa = dn_spa(dst);
    if (dn_spa(src) != spa) return -EXDEV;
    dn_rlock(src);
    uint32_t rs = src->cur.datablksz;
    int err = src->cur.type != DNODE_TYPE_PLAIN ? -EINVAL : 0;
    const uint8_t *data = NULL;
    cairn_blkptr_t bp;
    memset(&bp, 0, sizeof bp);
    int k = LK_ZERO;
    if (!err) {
        pthread_mutex_t *shard = &src->shard_lock[dn_shard(sblkid)];
        pthread_mutex_lock(shard);
        k = dn_lookup(src, UINT64_MAX, sblkid, &data, &bp, &err);
        pthread_mutex_unlock(shard);
    }
    dn_unlock(src);
    if (err) return err;
    if (k == LK_DATA) return -EAGAIN;
    dn_rlock(dst);
    uint32_t drs = dst->cur.datablksz;
    bool plain = dst->cur.type == DNODE_TYPE_PLAIN;
    dn_unlock(dst);
    if (!plain) return -EINVAL;
    if (drs != rs) return -EXDEV;
    uint8_t *buf = dmu_buf_alloc(rs);
    if (k == LK_ZERO) {
        memset(buf, 0, rs);
        err = dn_write_open(dst, txg, dblkid * rs, rs, buf, NULL, 0);
        dmu_buf_free(buf, rs);
        return err;
    }
    if (!spa_block_cloneable(&bp) || bp.type != CAIRN_BT_DATA || bp.level != 0 || bp.lsize != rs) {
        dmu_buf_free(buf, rs);
        return -EOPNOTSUPP;
    }
    err = spa_block_read(spa, &bp, buf);
    uint64_t mods = 0;
    if (!err) err = dn_write_open(dst, txg, dblkid * rs, rs, buf, &mods, 1);
    dmu_buf_free(buf, rs);
    if (err) return err;
    dn_rlock(dst);
    dn_slot_t *s = slot_find(dst, txg);
    bool ok = s && s->snap.datablksz == rs && dst->cur.type == DNODE_TYPE_PLAIN;
    dn_unlock(dst);
    if (!ok) return -EAGAIN; /* changed under us; the bytes are written, not shared */
    err = spa_block_clone_ref(spa, txg, &bp);
    if (err) return err == -EOPNOTSUPP ? 0 : err; /* written as a copy */
    /* The reference is born now: the destination's snapshots, dead list,
     * rollback and destroy go by birth_txg, and a pointer still dated by the
     * source's write would look held by an older snapshot of the destination
     * (or its origin) and never be given back. The bytes keep their date for
     * a resilver (cairn_bp_phys_birth). */
    bp.phys_birth_txg = cairn_bp_phys_birth(&bp);
    bp.birth_txg = txg;
    /* Changed meanwhile: the record is a copy; the reference goes back in txg. */
    return rec_override_or_free(dst, txg, dblkid, mods, &bp) ? 1 : 0;
}

/* dn->lock held exclusively. */
static void slot_drop_recs(dnode_t *dn, dn_slot_t *s, uint64_t start, uint64_t end)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&dn->lock));
    size_t count = 0;
    for (int sh = 0; sh < DN_SHARDS; sh++) count += s->recs[sh].count;
    if (count == 0) return;
    if (end - start <= count) {
        for (uint64_t b = start; b < end; b++) {
            dmu_rec_t *r = dmu_map_remove(&s->recs[dn_shard(b)], b);
            if (r) rec_drop(dn, s->txg, r);
        }
        return;
    }
    for (int sh = 0; sh < DN_SHARDS; sh++) {
        size_t n;
        void **v = dmu_map_values(&s->recs[sh], &n);
        for (size_t i = 0; i < n; i++) {
            dmu_rec_t *r = v[i];
            if (r->blkid >= start && r->blkid < end) {
                dmu_map_remove(&s->recs[sh], r->blkid);
                rec_drop(dn, s->txg, r);
            }
        }
        free(v);
    }
}

static int dn_free_range_locked(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&dn->lock));
    if (len == 0 || !(dn->cur.flags & DNODE_FLAG_WRITTEN)) {
        slot_get(dn, txg, false); /* the dnode is still part of this txg */
        return 0;
    }
    uint32_t rs = dn->cur.datablksz;
    uint64_t data_end = (dn->cur.maxblkid + 1) * rs;
    uint64_t end = (len > UINT64_MAX - off) ? UINT64_MAX : off + len;
    if (end > data_end) end = data_end;
    if (off >= end) {
        slot_get(dn, txg, false);
        return 0;
    }
    uint64_t first = CAIRN_DIV_ROUND_UP(off, rs), last = end / rs; /* whole records [first,last) */
    if (first > last) { /* inside one record */
        return dn_write_locked(dn, txg, off, end - off, NULL, false);
    }
    int err = 0;
    if (off % rs) err = dn_write_locked(dn, txg, off, first * rs - off, NULL, false);
    if (!err && end % rs && end > last * rs)
        err = dn_write_locked(dn, txg, last * rs, end - last * rs, NULL, false);
    if (err || first == last) return err;
    dn_slot_t *s = slot_get(dn, txg, false);
    for (int i = 0; i < 4; i++)
        if (dn->slots[i] && dn->slots[i]->txg >= txg) slot_drop_recs(dn, dn->slots[i], first, last);
    if (s->nfrees == s->capfrees) {
        s->capfrees = s->capfrees ? s->capfrees * 2 : 4;
        s->frees = cairn_realloc(s->frees, s->capfrees * sizeof(*s->frees));
    }
    s->frees[s->nfrees++] = (dn_range_t){first, last};
    dn->mod_gen++;
    return 0;
}

int dnode_free_range_impl(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len)
{
    dn_wlock(dn);
    int err = dn->cur.type == DNODE_TYPE_FREE ? -ENOENT : dn_free_range_locked(dn, txg, off, len);
    dn_unlock(dn);
    return err;
}

int dnode_free_object_locked(dnode_t *dn, uint64_t txg)
{
    CAIRN_ASSERT(cairn_rwlock_wrheld(&dn->lock));
    if (dn->cur.type == DNODE_TYPE_FREE) return -ENOENT;
    int err = dn_free_range_locked(dn, txg, 0, UINT64_MAX);
    if (err) return err;
    /* Records dirtied at the edges of the range are moot now. */
    for (int i = 0; i < 4; i++)
        if (dn->slots[i] && dn->slots[i]->txg >= txg) slot_drop_recs(dn, dn->slots[i], 0, UINT64_MAX);
    dnode_set_alloc(dn, txg, DNODE_TYPE_FREE, NULL, false);
    return 0;
}

/*
 * A read spanning several records on disk issues them in parallel on the
 * pool's read workers, so one large read keeps several devices (and raidz
 * columns) busy instead of waiting for each record in turn. Records found in
 * ARC memory are copied first, on the caller (just the part wanted: a 4 KiB
 * read of an 8 KiB record needs no bounce buffer); only misses are handed on,
 * so a cached read costs no thread hand-off.
 *
 * With spans (dmu_read_spans), an ARC hit of at least DMU_LEND_MIN bytes whose
 * logical bytes the ARC keeps is lent instead of copied: a span names the ARC
 * buffer and holds it. Dirty records are still copied, under their shard
 * lock: their bytes may change as soon as it is dropped.
 */
typedef struct dn_read_io {
    objset_t *os;      /* its cache policy (primarycache/secondarycache) */
    uint64_t obj, blkid; /* which record (the error log) */
    uint32_t recsize;
    cairn_blkptr_t bp;
    uint8_t *dst;       /* where the bytes go */
    uint32_t boff, n;   /* part of the record wanted */
    int err;
} dn_read_io_t;

static void dn_read_io_run(void *arg)
{
    dn_read_io_t *io = arg;
    if (io->boff == 0 && io->n == io->bp.lsize) {
        io->err = dmu_cache_read(io->os, &io->bp, io->dst);
    } else {
        uint8_t *tmp = dmu_buf_alloc(io->bp.lsize);
        io->err = dmu_cache_read(io->os, &io->bp, tmp);
        if (!io->err) memcpy(io->dst, tmp + io->boff, io->n);
        free(tmp);
    }
    if (io->err) dmu_read_error(io->os, io->obj, 0, io->blkid, io->recsize, io->err);
}

#define DN_READ_BATCH 64

/* An ARC hit copied into dst or, where spans have room and the piece is big
 * enough to be worth an iovec of its own, lent as a span (pos relative to
 * base). -EWOULDBLOCK when the ARC does not have it in memory. */
static int dn_read_hit(objset_t *os, const cairn_blkptr_t *bp, uint32_t boff, uint32_t n,
                       uint8_t *dst, uint8_t *base, cairn_spans_t *spans)
{
    if (n < DMU_LEND_MIN || !cairn_spans_room(spans))
        return dmu_cache_read_memory(os, bp, boff, n, dst, NULL);
    cairn_rbuf_t *ref = NULL;
    int err = dmu_cache_read_memory(os, bp, boff, n, dst, &ref);
    if (!err && ref) cairn_spans_add(spans, (size_t)(dst - base), ref->data + boff, n, ref);
    return err;
}

static int dn_read_batch(dnode_t *dn, dn_read_io_t *ios, size_t n, uint8_t *base,
                         cairn_spans_t *spans)
{
    size_t nmiss = 0;
    for (size_t i = 0; i < n; i++)
        if (dn_read_hit(ios[i].os, &ios[i].bp, ios[i].boff, ios[i].n, ios[i].dst, base, spans))
            ios[nmiss++] = ios[i];
    n = nmiss;
    if (n == 0) return 0;
    if (n == 1) {
        dn_read_io_run(&ios[0]);
        return ios[0].err;
    }
    taskq_group_t g;
    taskq_group_init(&g);
    for (size_t i = 0; i < n; i++) taskq_dispatch(dn->os->dp->rtq, dn_read_io_run, &ios[i], &g);
    taskq_group_wait(&g);
    taskq_group_fini(&g);
    for (size_t i = 0; i < n; i++)
        if (ios[i].err) return ios[i].err;
    return 0;
}

static int dn_read(dnode_t *dn, uint64_t off, uint64_t len, void *buf, bool memory_only,
                   cairn_spans_t *spans)
{
    uint8_t *dst = buf;
    int err = 0;
    const uint64_t pf_off = off, pf_len = len; /* for prefetch (dmu_prefetch.c) */
    const size_t spans0 = spans ? spans->n : 0;
    dn_read_io_t ios[DN_READ_BATCH];
    size_t nio = 0;
    if (off > DMU_MAX_OFFSET || len > DMU_MAX_OFFSET - off) return -EFBIG;
    while (len > 0) {
        dn_rlock(dn);
        if (dn->cur.type == DNODE_TYPE_FREE) {
            dn_unlock(dn);
            err = -ENOENT;
            break;
        }
        uint32_t rs = dn->cur.datablksz;
        uint64_t blkid = off / rs;
        uint32_t boff = (uint32_t)(off % rs);
        uint32_t n = (uint32_t)CAIRN_MIN(len, (uint64_t)(rs - boff));
        const uint8_t *src = NULL;
        cairn_blkptr_t bp;
        pthread_mutex_t *shard = &dn->shard_lock[dn_shard(blkid)];
        pthread_mutex_lock(shard);
        int k = dn_lookup(dn, UINT64_MAX, blkid, &src, &bp, &err);
        if (k == LK_DATA) memcpy(dst, src + boff, n);
        else if (k == LK_ZERO) memset(dst, 0, n);
        pthread_mutex_unlock(shard);
        dn_unlock(dn);
        if (err) break;
        if (k == LK_BP) {
            if (bp.lsize != rs) {
                err = -EIO;
                break;
            }
            /* Blocks never change under copy-on-write: reading them after the
             * lock is dropped returns what the pointer named, even if the
             * record is rewritten meanwhile (and a lent ARC buffer is never
             * written again, see src/arc/arc.c). */
            if (memory_only) {
                err = dn_read_hit(dn->os, &bp, boff, n, dst, buf, spans);
                if (err) break;
                dst += n;
                off += n;
                len -= n;
                continue;
            }
            ios[nio++] = (dn_read_io_t){.os = dn->os, .obj = dn->obj, .blkid = blkid, .recsize = rs,
                                        .bp = bp, .dst = dst, .boff = boff, .n = n};
            if (nio == DN_READ_BATCH) {
                err = dn_read_batch(dn, ios, nio, buf, spans);
                nio = 0;
                if (err) break;
            }
        }
        dst += n;
        off += n;
        len -= n;
    }
    if (!err && nio) err = dn_read_batch(dn, ios, nio, buf, spans);
    if (!err) dmu_prefetch_note(dn, pf_off, pf_len); /* sequential readers read ahead */
    if (err && spans) {
        /* A failed read lends nothing. */
        for (size_t i = spans0; i < spans->n; i++) cairn_rbuf_rele(spans->v[i].buf);
        spans->n = spans0;
    }
    return err;
}

/* Whether record blkid's old content would come from a device: it is not dirty,
 * not a hole and not in memory (or its block pointer could not be found). Called
 * with dn->lock held. */
static bool record_needs_read(dnode_t *dn, uint64_t blkid)
{
    const uint8_t *src = NULL;
    cairn_blkptr_t bp;
    int err = 0;
    pthread_mutex_t *shard = &dn->shard_lock[dn_shard(blkid)];
    pthread_mutex_lock(shard);
    int k = dn_lookup(dn, UINT64_MAX, blkid, &src, &bp, &err);
    pthread_mutex_unlock(shard);
    return err || (k == LK_BP && !dmu_cache_in_memory(dn->os, &bp));
}

/* Only a record written in part needs its old content (dirty_rec): the one the
 * range starts inside and the one it ends inside - the first and the last
 * record, or one record once when the range lies within it. */
bool dnode_write_would_read(dnode_t *dn, uint64_t off, uint64_t len)
{
    if (!len) return false;
    if (off > DMU_MAX_OFFSET || len > DMU_MAX_OFFSET - off) return false; /* EFBIG, at once */
    dn_rlock(dn);
    bool wait = false;
    if (dn->cur.type != DNODE_TYPE_FREE) {
        uint32_t rs = dn->cur.datablksz;
        uint64_t first = off / rs, last = (off + len - 1) / rs;
        bool starts_inside = off % rs != 0, ends_inside = (off + len) % rs != 0;
        if (first == last)
            wait = (starts_inside || ends_inside) && record_needs_read(dn, first);
        else
            wait = (starts_inside && record_needs_read(dn, first)) ||
                   (ends_inside && record_needs_read(dn, last));
    }
    dn_unlock(dn);
    return wait;
}

/* Whether record blkid holds data as readers see it now: a block, or a dirty
 * record that is not all zeros (a zero record becomes a hole when it syncs,
 * so it is reported as one already). dn->lock held. */
static int record_has_data(dnode_t *dn, uint64_t blkid, bool *data)
{
    const uint8_t *src = NULL;
    cairn_blkptr_t bp;
    int err = 0;
    pthread_mutex_t *shard = &dn->shard_lock[dn_shard(blkid)];
    pthread_mutex_lock(shard);
    int k = dn_lookup(dn, UINT64_MAX, blkid, &src, &bp, &err);
    *data = k == LK_BP || (k == LK_DATA && !buf_is_zero(src, dn->cur.datablksz));
    pthread_mutex_unlock(shard);
    return err;
}

/* Whether any live slot holds dirty records. dn->lock held. */
static bool dn_has_dirty_records(dnode_t *dn)
{
    bool any = false;
    for (int i = 0; i < 4 && !any; i++) {
        dn_slot_t *s = dn->slots[i];
        for (int sh = 0; s && sh < DN_SHARDS && !any; sh++) {
            pthread_mutex_lock(&dn->shard_lock[sh]);
            any = s->recs[sh].count != 0;
            pthread_mutex_unlock(&dn->shard_lock[sh]);
        }
    }
    return any;
}

/* Whether the block tree has no level-1 indirect block over record blkid: its
 * 1024 records are all holes there. dn->lock held. */
static int tree_l1_is_hole(dnode_t *dn, uint64_t blkid, bool *hole)
{
    unsigned nl = dn->phys.nlevels;
    *hole = false;
    if (nl < 2 || blkid >= tree_capacity(nl)) return 0;
    int err = 0;
    pthread_mutex_lock(&dn->ind_lock);
    dn_ind_t *ind = get_ind(dn, nl, &dn->phys.root, 1, blkid >> DN_EPB_SHIFT, false, &err);
    pthread_mutex_unlock(&dn->ind_lock);
    *hole = !err && !ind;
    return err;
}

/* Walks the records from *off's one; the space past the last record written
 * is one endless hole. Record by record (a lookup is a few map probes, and an
 * indirect block read once serves 1024 records), except that a search for
 * data skips 1024 records at a time where the tree has no indirect block and
 * no dirty record could lie (none at all), so a file with data far apart
 * costs a lookup per 1024 records of hole. */
int dnode_next_impl(dnode_t *dn, bool hole, uint64_t *off)
{
    dn_rlock(dn);
    int err = 0;
    if (dn->cur.type == DNODE_TYPE_FREE) {
        err = -ENOENT;
    } else if (!(dn->cur.flags & DNODE_FLAG_WRITTEN)) {
        err = hole ? 0 : -ENXIO;
    } else {
        uint32_t rs = dn->cur.datablksz;
        uint64_t end = dn->cur.maxblkid + 1;
        uint64_t b = *off / rs;
        bool skip_holes = !hole && !dn_has_dirty_records(dn);
        bool check_l1 = true;
        while (b < end) {
            bool data, l1_hole = false;
            if (skip_holes && check_l1 && (err = tree_l1_is_hole(dn, b, &l1_hole))) break;
            if (l1_hole) {
                b = ((b >> DN_EPB_SHIFT) + 1) << DN_EPB_SHIFT;
                continue;
            }
            err = record_has_data(dn, b, &data);
            if (err || data != hole) break;
            b++;
            check_l1 = (b & (DN_EPB - 1)) == 0;
        }
        if (b > end) b = end;
        if (!err && b == end && !hole) err = -ENXIO;
        if (!err && b * rs > *off) *off = b * rs;
    }
    dn_unlock(dn);
    return err;
}

int dnode_read_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf)
{
    return dn_read(dn, off, len, buf, false, NULL);
}

int dnode_read_memory_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf)
{
    return dn_read(dn, off, len, buf, true, NULL);
}

int dnode_read_spans_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf, bool memory_only,
                          cairn_spans_t *spans)
{
    return dn_read(dn, off, len, buf, memory_only, spans);
}

/* ---- for prefetch (dmu_prefetch.c): the on-disk pointers of records
 * [blkid, blkid + n); records that are holes or dirty in memory come back as
 * holes (nothing to read ahead). Returns the record size, 0 if the object is free. */
uint32_t dnode_prefetch_bps(dnode_t *dn, uint64_t blkid, size_t n, cairn_blkptr_t *bps)
{
    dn_rlock(dn);
    uint32_t rs = dn->cur.type == DNODE_TYPE_FREE ? 0 : dn->cur.datablksz;
    for (size_t i = 0; i < n; i++) {
        memset(&bps[i], 0, sizeof bps[i]);
        if (!rs) continue;
        const uint8_t *src = NULL;
        int err = 0;
        pthread_mutex_t *shard = &dn->shard_lock[dn_shard(blkid + i)];
        pthread_mutex_lock(shard);
        if (dn_lookup(dn, UINT64_MAX, blkid + i, &src, &bps[i], &err) != LK_BP || err)
            memset(&bps[i], 0, sizeof bps[i]);
        pthread_mutex_unlock(shard);
    }
    dn_unlock(dn);
    return rs;
}

/* ---- for the defragmenter (dmu_defrag.c) ----
 * Re-dirties records [blkid, blkid + n) in txg (held open by the caller's
 * transaction) with their current content, as a client writing back the bytes
 * it read would, so that txg's sync writes them anew, side by side (records go
 * out in record order, allocated together). A record is taken only while, seen
 * from txg, it still lies in the block expect[i] names (holes in expect are
 * skipped); the check and the dirtying are done under the record's shard mutex,
 * and dirty_rec() looks again after a disk read, so a client write to the record
 * wins whichever comes first: before, the record is dirty or elsewhere and left
 * alone; after, it changes the dirty copy made here. Nothing in newer txgs is
 * touched: a newer slot's copy of the record already shadows this one. Returns
 * how many records were re-dirtied, or -errno. */
int dnode_redirty_impl(dnode_t *dn, uint64_t txg, uint64_t blkid, size_t n,
                       const cairn_blkptr_t *expect)
{
    dn_wlock(dn);
    if (dn->cur.type != DNODE_TYPE_FREE) slot_get(dn, txg, false);
    dn_unlock(dn);
    dn_rlock(dn);
    int done = 0, err = 0;
    dn_newbytes_t nb = {0, 0};
    if (dn->cur.type == DNODE_TYPE_FREE || !slot_find(dn, txg)) err = -ENOENT;
    else if (slot_find(dn, txg)->snap.datablksz != dn->cur.datablksz) err = -EAGAIN;
    for (size_t i = 0; i < n && !err; i++) {
        if (cairn_bp_is_hole(&expect[i])) continue;
        uint64_t b = blkid + i;
        unsigned sh = dn_shard(b);
        pthread_mutex_lock(&dn->shard_lock[sh]);
        const uint8_t *src = NULL;
        cairn_blkptr_t bp;
        int k = dn_lookup(dn, txg, b, &src, &bp, &err);
        if (!err && k == LK_BP && !memcmp(&bp, &expect[i], sizeof(bp))) {
            dmu_rec_t *r = NULL;
            err = dirty_rec(dn, txg, b, false, true, &r, &nb);
            if (!err) done++;
        }
        pthread_mutex_unlock(&dn->shard_lock[sh]);
    }
    dn_unlock(dn);
    dn_account(dn, txg, &nb);
    return err ? err : done;
}

/* ---------------- syncing context ---------------- */

static void mark_ind_dirty(dnode_t *dn, dn_ind_t *ind)
{
    if (ind->dirty) return;
    ind->dirty = true;
    unsigned l = ind->level;
    if (dn->ndirty_inds[l] == dn->capdirty_inds[l]) {
        dn->capdirty_inds[l] = dn->capdirty_inds[l] ? dn->capdirty_inds[l] * 2 : 16;
        dn->dirty_inds[l] =
            cairn_realloc(dn->dirty_inds[l], dn->capdirty_inds[l] * sizeof(uint64_t));
    }
    dn->dirty_inds[l][dn->ndirty_inds[l]++] = ind_key(l, ind->blkid);
}

static void free_sync_bp(dnode_t *dn, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp)) return;
    dn->wused -= CAIRN_MIN(dn->wused, cairn_bp_asize(bp));
    dmu_kill_bp(dn->os, txg, bp);
}

/* Frees bp and everything beneath it (bp is the pointer to (level, id)). */
static int free_tree(dnode_t *dn, uint64_t txg, const cairn_blkptr_t *bp, unsigned level,
                     uint64_t id)
{
    int err = 0;
    if (level > 0) {
        dn_ind_t *ind = dmu_map_remove(&dn->inds, ind_key(level, id));
        cairn_blkptr_t *bps = ind ? ind->bps : NULL;
        if (!bps && !cairn_bp_is_hole(bp)) {
            bps = dmu_buf_alloc(DN_IND_BLKSZ);
            err = bp->lsize == DN_IND_BLKSZ ? spa_block_read(dn_spa(dn), bp, bps) : -EIO;
            if (err) {
                dmu_read_error(dn->os, dn->obj, level, id, dn->cur.datablksz, err);
                /* Leak the unreadable subtree rather than fail the txg. */
                log_error("dmu", "object %llu: cannot read indirect block to free it: %d",
                          (unsigned long long)dn->obj, err);
                free(bps);
                bps = NULL;
            }
        }
        if (bps) {
            for (unsigned i = 0; i < DN_EPB; i++) {
                if (cairn_bp_is_hole(&bps[i])) continue;
                if (level == 1) free_sync_bp(dn, txg, &bps[i]);
                else free_tree(dn, txg, &bps[i], level - 1, (id << DN_EPB_SHIFT) + i);
            }
            if (ind) ind_free(ind);
            else free(bps);
        }
    }
    free_sync_bp(dn, txg, bp);
    return err;
}

static int free_range_ind(dnode_t *dn, uint64_t txg, unsigned level, uint64_t id, uint64_t s,
                          uint64_t e)
{
    int err = 0;
    dn_ind_t *ind = get_ind(dn, dn->wnlevels, &dn->wroot, level, id, false, &err);
    if (!ind) return err;
    unsigned span_shift = DN_EPB_SHIFT * (level - 1);
    uint64_t base = id << (DN_EPB_SHIFT * level);
    uint64_t top = base + (1ULL << (DN_EPB_SHIFT * level));
    uint64_t lo = (CAIRN_MAX(s, base) - base) >> span_shift;
    uint64_t hi = (CAIRN_MIN(e, top) - 1 - base) >> span_shift;
    for (uint64_t i = lo; i <= hi; i++) {
        uint64_t cb = base + (i << span_shift), ce = cb + (1ULL << span_shift);
        cairn_blkptr_t *bp = &ind->bps[i];
        uint64_t cid = (id << DN_EPB_SHIFT) + i;
        if (level == 1) {
            if (cairn_bp_is_hole(bp)) continue;
            free_sync_bp(dn, txg, bp);
            memset(bp, 0, sizeof(*bp));
            mark_ind_dirty(dn, ind);
        } else if (s <= cb && ce <= e) {
            if (cairn_bp_is_hole(bp) && !dmu_map_get(&dn->inds, ind_key(level - 1, cid))) continue;
            cairn_blkptr_t old = *bp;
            err = free_tree(dn, txg, &old, level - 1, cid);
            memset(bp, 0, sizeof(*bp));
            mark_ind_dirty(dn, ind);
        } else {
            if (cairn_bp_is_hole(bp) && !dmu_map_get(&dn->inds, ind_key(level - 1, cid))) continue;
            err = free_range_ind(dn, txg, level - 1, cid, s, e);
        }
        if (err) return err;
    }
    return 0;
}

static int tree_free_range(dnode_t *dn, uint64_t txg, uint64_t s, uint64_t e)
{
    uint64_t cap = tree_capacity(dn->wnlevels);
    if (s >= cap) return 0;
    if (e > cap) e = cap;
    if (dn->wnlevels == 1) {
        free_sync_bp(dn, txg, &dn->wroot);
        memset(&dn->wroot, 0, sizeof(dn->wroot));
        return 0;
    }
    return free_range_ind(dn, txg, dn->wnlevels - 1, 0, s, e);
}

int dnode_sync_prepare(dnode_t *dn, uint64_t txg, dmu_rec_t ***recs_out, size_t *nrecs)
{
    int err = 0;
    *recs_out = NULL;
    *nrecs = 0;
    dn_wlock(dn);
    dn_slot_t *s = slot_find(dn, txg);
    if (!s) {
        dn_unlock(dn);
        return 0;
    }
    dn->wnlevels = dn->phys.nlevels ? dn->phys.nlevels : 1;
    dn->wroot = dn->phys.root;
    dn->wused = dn->phys.used_bytes;
    for (int l = 0; l < DN_MAX_LEVELS; l++) dn->ndirty_inds[l] = 0;

    if (s->snap.type == DNODE_TYPE_FREE) {
        /* Object freed: release its whole tree. */
        if (!cairn_bp_is_hole(&dn->wroot))
            err = free_tree(dn, txg, &dn->wroot, dn->wnlevels - 1, 0);
        memset(&dn->wroot, 0, sizeof(dn->wroot));
        dn->wnlevels = 1;
        dn_unlock(dn);
        return err;
    }

    if (s->snap.flags & DNODE_FLAG_WRITTEN) {
        unsigned need = levels_for(s->snap.maxblkid);
        if (need > DN_MAX_LEVELS) need = DN_MAX_LEVELS;
        while (dn->wnlevels < need) {
            /* Grow: a new top whose first child is the old root. */
            dn_ind_t *top = cairn_zalloc(sizeof(*top));
            top->level = dn->wnlevels;
            top->blkid = 0;
            top->bps = dmu_buf_alloc(DN_IND_BLKSZ);
            memset(top->bps, 0, DN_IND_BLKSZ);
            top->bps[0] = dn->wroot;
            dmu_map_put(&dn->inds, ind_key(top->level, 0), top);
            mark_ind_dirty(dn, top);
            memset(&dn->wroot, 0, sizeof(dn->wroot));
            dn->wnlevels++;
        }
    }
    for (size_t i = 0; i < s->nfrees && !err; i++)
        err = tree_free_range(dn, txg, s->frees[i].start, s->frees[i].end);

    size_t n = 0;
    for (int sh = 0; sh < DN_SHARDS; sh++) n += s->recs[sh].count;
    dmu_rec_t **recs = cairn_zalloc((n + 1) * sizeof(*recs));
    n = 0;
    for (int sh = 0; sh < DN_SHARDS; sh++) {
        size_t k;
        void **v = dmu_map_values(&s->recs[sh], &k);
        memcpy(recs + n, v, k * sizeof(*recs));
        n += k;
        free(v);
    }
    spa_write_props_t props = {
        .type = dn_blk_type(s->snap.type),
        .level = 0,
        .checksum = s->snap.checksum ? s->snap.checksum : CAIRN_CHECKSUM_FLETCHER4,
        .compress = s->snap.compress,
        .copies = s->snap.copies ? s->snap.copies : 1,
    };
    if (s->snap.type != DNODE_TYPE_PLAIN && s->snap.type != DNODE_TYPE_ZAP) props.copies = 2;
    /* Data records stay in the ARC as written, compressed or not: what was
     * just written is often read back soon. */
    props.cache = props.type == CAIRN_BT_DATA || props.type == CAIRN_BT_ZAP;
    props.cache_policy = dmu_objset_cache_policy(dn->os);
    for (size_t i = 0; i < n; i++) {
        recs[i]->dn = dn;
        recs[i]->txg = txg;
        recs[i]->props = props;
        recs[i]->size = s->snap.datablksz;
        recs[i]->error = 0;
    }
    dn_unlock(dn);
    *recs_out = recs;
    *nrecs = n;
    return err;
}

/*
 * Writes a batch of records of one dnode (same write properties) with one
 * spa_block_write_many(): they are allocated back to back, so the devices
 * receive a few large writes instead of one per record (and per raidz column).
 * All-zero records become holes and are not written.
 */
void dnode_write_recs_task(void *arg)
{
    dmu_rec_batch_t *b = arg;
    const void **datas = cairn_zalloc(b->n * sizeof *datas);
    cairn_rbuf_t **holders = cairn_zalloc(b->n * sizeof *holders);
    uint32_t *sizes = cairn_zalloc(b->n * sizeof *sizes);
    cairn_blkptr_t *bps = cairn_zalloc(b->n * sizeof *bps);
    dmu_rec_t **live = cairn_zalloc(b->n * sizeof *live);
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        dmu_rec_t *r = b->recs[i];
        memset(&r->bp, 0, sizeof(r->bp));
        r->error = 0;
        if (r->has_override) {
            /* Written already (an intent-log record points at it): adopted as
             * it is, unless the record reads as zeros, which is a hole. */
            r->has_override = false;
            if (buf_is_zero(r->data, r->size)) {
                spa_block_free_at_sync(dn_spa(r->dn), r->txg, &r->override_bp);
                continue;
            }
            r->bp = r->override_bp; /* cached when it was written (dmu_write_direct) */
            continue;
        }
        if (buf_is_zero(r->data, r->size)) continue;
        live[k] = r;
        datas[k] = r->data;
        /* Immutable now that its txg is syncing: the ARC may keep it as it is. */
        holders[k] = r->data_buf && r->data_buf->size == r->size ? r->data_buf : NULL;
        sizes[k++] = r->size;
    }
    if (k) {
        dmu_rec_t *r0 = live[0];
        int err = spa_block_write_many_held(dn_spa(r0->dn), r0->txg, k, datas, holders, sizes,
                                            &r0->props, bps);
        for (size_t j = 0; j < k; j++) {
            dmu_rec_t *r = live[j];
            r->error = err;
            if (err) continue;
            r->bp = bps[j];
            r->bp.fill = 1;
        }
    }
    free(datas);
    free(holders);
    free(sizes);
    free(bps);
    free(live);
}

typedef struct ind_write {
    dnode_t *dn;
    dn_ind_t *ind;
    uint64_t txg;
    cairn_blkptr_t bp;
    int error;
} ind_write_t;

static void ind_write_task(void *arg)
{
    ind_write_t *w = arg;
    uint64_t fill = 0;
    for (unsigned i = 0; i < DN_EPB; i++)
        if (!cairn_bp_is_hole(&w->ind->bps[i])) fill += w->ind->level == 1 ? 1 : w->ind->bps[i].fill;
    memset(&w->bp, 0, sizeof(w->bp));
    w->error = 0;
    if (fill == 0) return;
    spa_write_props_t props = {.type = CAIRN_BT_INDIRECT, .level = w->ind->level,
                               .checksum = CAIRN_CHECKSUM_FLETCHER4,
                               .compress = CAIRN_COMPRESS_LZ4, .copies = 2};
    w->error = spa_block_write(dn_spa(w->dn), w->txg, w->ind->bps, DN_IND_BLKSZ, &props, &w->bp);
    w->bp.fill = fill;
}

/* Puts bp as child (level, id) into its parent (or the root), freeing the old one. */
static int set_child_bp(dnode_t *dn, uint64_t txg, unsigned level, uint64_t id,
                        const cairn_blkptr_t *bp)
{
    cairn_blkptr_t *slot;
    if (level == dn->wnlevels - 1u) {
        slot = &dn->wroot;
    } else {
        int err = 0;
        dn_ind_t *p = get_ind(dn, dn->wnlevels, &dn->wroot, level + 1, id >> DN_EPB_SHIFT, true,
                              &err);
        if (!p) return err ? err : -EIO;
        slot = &p->bps[id & (DN_EPB - 1)];
        mark_ind_dirty(dn, p);
    }
    if (cairn_bp_is_hole(slot) && cairn_bp_is_hole(bp)) return 0;
    free_sync_bp(dn, txg, slot);
    *slot = *bp;
    dn->wused += cairn_bp_asize(bp);
    dmu_born_bp(dn->os, txg, bp);
    return 0;
}

int dnode_sync_finish(dnode_t *dn, uint64_t txg, dmu_rec_t **recs, size_t nrecs, taskq_t *tq)
{
    int err = 0;
    dn_wlock(dn);
    dn_slot_t *s = slot_find(dn, txg);
    if (!s) {
        dn_unlock(dn);
        return 0;
    }
    CAIRN_ASSERT(oldest_slot(dn) == s); /* txgs sync in order */
    bool freed = s->snap.type == DNODE_TYPE_FREE;
    if (!freed) {
        for (size_t i = 0; i < nrecs && !err; i++) {
            if (recs[i]->error) {
                err = recs[i]->error;
                break;
            }
            err = set_child_bp(dn, txg, 0, recs[i]->blkid, &recs[i]->bp);
        }
        for (unsigned l = 1; l < dn->wnlevels && !err; l++) {
            size_t n = 0;
            ind_write_t *ws = cairn_zalloc((dn->ndirty_inds[l] + 1) * sizeof(*ws));
            for (size_t i = 0; i < dn->ndirty_inds[l]; i++) {
                dn_ind_t *ind = dmu_map_get(&dn->inds, dn->dirty_inds[l][i]);
                if (!ind || !ind->dirty) continue;
                ind->dirty = false;
                ws[n++] = (ind_write_t){.dn = dn, .ind = ind, .txg = txg};
            }
            dn->ndirty_inds[l] = 0;
            /* Only this thread edits the tree, so the blocks are stable unlocked. */
            dn_unlock(dn);
            if (n == 1 || !tq) {
                for (size_t i = 0; i < n; i++) ind_write_task(&ws[i]);
            } else {
                taskq_group_t g;
                taskq_group_init(&g);
                for (size_t i = 0; i < n; i++) taskq_dispatch(tq, ind_write_task, &ws[i], &g);
                taskq_group_wait(&g);
                taskq_group_fini(&g);
            }
            dn_wlock(dn);
            for (size_t i = 0; i < n && !err; i++) {
                if (ws[i].error) err = ws[i].error;
                else err = set_child_bp(dn, txg, l, ws[i].ind->blkid, &ws[i].bp);
            }
            free(ws);
        }
    }
    if (err) {
        log_error("dmu", "object %llu: sync of txg %llu failed: %d", (unsigned long long)dn->obj,
                  (unsigned long long)txg, err);
        dn_unlock(dn);
        return err;
    }
    /* Publish the new tree and retire the slot in one step. */
    dnode_phys_t np = s->snap;
    if (freed) {
        memset(&np, 0, sizeof(np));
        dn_drop_inds(dn);
    } else {
        np.nlevels = dn->wnlevels;
        np.indblkshift = DN_INDBLKSHIFT;
        np.root = dn->wroot;
        np.used_bytes = dn->wused;
    }
    dn->phys = np;
    dn->slots[txg & 3] = NULL;
    slot_destroy(s);
    dn->mod_gen++;
    dn_unlock(dn);
    return 0;
}

void dnode_sync_put_rec(dnode_t *dn, uint64_t txg, uint64_t blkid, uint8_t *data)
{
    dn_wlock(dn);
    dn_slot_t *s = slot_get(dn, txg, true);
    dmu_rec_t *r = dmu_map_get(&s->recs[dn_shard(blkid)], blkid);
    if (r) {
        rec_data_release(r);
    } else {
        r = cairn_zalloc(sizeof(*r));
        r->blkid = blkid;
        dmu_map_put(&s->recs[dn_shard(blkid)], blkid, r);
    }
    r->data = data;
    attr_change_t c = {.kind = ATTR_MAXBLKID, .blkid = blkid};
    dn_attr_change(dn, txg, &c, true);
    dn_unlock(dn);
}

/* ---------------- loading dnodes ---------------- */

/*
 * Holds and eviction. A dnode found by dnode_hold() is held until
 * dnode_rele(); the count changes only under os->lock (the release may race
 * harmlessly: eviction just sees it held). At the start of each object set's
 * sync, when more dnodes are resident than the limit, whole dnode blocks
 * whose 32 dnodes are all unheld and clean (no live txg slot) are evicted,
 * least recently held first, down to 3/4 of the limit; their indirect-block
 * caches go with them. A clean dnode equals its copy in the meta-dnode, so a
 * later hold reloads it exactly; the sync thread is the only evicter, and a
 * block holding a dnode dirty in the syncing txg is never evicted, so the
 * dnode blocks that sync writes out always find all 32 dnodes. The MOS is
 * never evicted (its directory dnode is used without holds).
 */

void dmu_dnode_set_limit(uint64_t n) { atomic_store(&dnode_limit, n ? n : 1); }

void dmu_dnode_get_stats(dmu_dnode_stats_t *out)
{
    out->resident = atomic_load(&dnodes_resident);
    out->evicted = atomic_load(&dnodes_evicted);
    out->limit = atomic_load(&dnode_limit);
}

static bool counts_holds(const objset_t *os) { return os != os->dp->mos; }

static void hold_locked(objset_t *os, dnode_t *dn)
{
    CAIRN_ASSERT(cairn_mutex_held(&os->lock));
    if (!dn || !counts_holds(os)) return;
    atomic_fetch_add(&dn->holds, 1);
    dn->last_use = ++os->use_clock;
}

void dnode_rele(dnode_t *dn)
{
    if (counts_holds(dn->os)) atomic_fetch_sub(&dn->holds, 1);
}

typedef struct evict_blk {
    uint64_t blk, last_use;
    bool busy;
} evict_blk_t;

static int evict_blk_cmp(const void *a, const void *b)
{
    const evict_blk_t *x = a, *y = b;
    if (x->busy != y->busy) return x->busy ? 1 : -1;
    if (x->last_use != y->last_use) return x->last_use < y->last_use ? -1 : 1;
    return x->blk < y->blk ? -1 : x->blk > y->blk;
}

static int dn_obj_cmp(const void *a, const void *b)
{
    const dnode_t *x = *(dnode_t *const *)a, *y = *(dnode_t *const *)b;
    return x->obj < y->obj ? -1 : x->obj > y->obj;
}

void objset_evict_dnodes(objset_t *os)
{
    uint64_t limit = atomic_load(&dnode_limit);
    if (!counts_holds(os) || atomic_load(&dnodes_resident) <= limit) return;
    uint64_t target = limit - limit / 4;
    pthread_mutex_lock(&os->load_lock);
    pthread_mutex_lock(&os->lock);
    size_t n;
    dnode_t **dns = (dnode_t **)dmu_map_values(&os->dnodes, &n);
    qsort(dns, n, sizeof(*dns), dn_obj_cmp);
    evict_blk_t *blks = cairn_zalloc((n + 1) * sizeof(*blks));
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        dnode_t *dn = dns[i];
        uint64_t b = dn->obj >> DN_PER_BLOCK_SHIFT;
        if (!nb || blks[nb - 1].blk != b) blks[nb++] = (evict_blk_t){.blk = b};
        evict_blk_t *e = &blks[nb - 1];
        if (dn->last_use > e->last_use) e->last_use = dn->last_use;
        if (atomic_load(&dn->holds)) e->busy = true;
        for (int k = 0; k < 4; k++)
            if (dn->slots[k]) e->busy = true;
    }
    qsort(blks, nb, sizeof(*blks), evict_blk_cmp);
    for (size_t i = 0; i < nb && !blks[i].busy && atomic_load(&dnodes_resident) > target; i++) {
        for (unsigned k = 0; k < DN_PER_BLOCK; k++) {
            dnode_t *dn = dmu_map_remove(&os->dnodes, (blks[i].blk << DN_PER_BLOCK_SHIFT) + k);
            if (!dn) continue;
            dnode_destroy(dn);
            atomic_fetch_add(&dnodes_evicted, 1);
        }
    }
    pthread_mutex_unlock(&os->lock);
    pthread_mutex_unlock(&os->load_lock);
    free(blks);
    free(dns);
}

dnode_t *dnode_hold(objset_t *os, uint64_t obj, bool create)
{
    pthread_mutex_lock(&os->lock);
    dnode_t *dn = dmu_map_get(&os->dnodes, obj);
    uint64_t nb = os->meta_nblocks;
    hold_locked(os, dn);
    pthread_mutex_unlock(&os->lock);
    if (dn) return dn;
    uint64_t b = obj >> DN_PER_BLOCK_SHIFT;
    if (obj >= DMU_MAX_OBJECT || (b >= nb && !create)) return NULL;

    pthread_mutex_lock(&os->load_lock);
    pthread_mutex_lock(&os->lock);
    dn = dmu_map_get(&os->dnodes, obj);
    nb = os->meta_nblocks;
    hold_locked(os, dn);
    pthread_mutex_unlock(&os->lock);
    if (dn) {
        pthread_mutex_unlock(&os->load_lock);
        return dn;
    }
    /* Dnodes are loaded a block at a time, so if any dnode of a block is in
     * memory all are, and a block being synced is never re-read from disk. */
    dnode_phys_t *blk = dmu_buf_alloc(DN_META_BLKSZ);
    memset(blk, 0, DN_META_BLKSZ);
    if (b < nb) {
        int err = dnode_read_impl(os->meta, b * DN_META_BLKSZ, DN_META_BLKSZ, blk);
        if (err) {
            log_error("dmu", "objset %llu: cannot read dnode block %llu: %d",
                      (unsigned long long)os->id, (unsigned long long)b, err);
            free(blk);
            pthread_mutex_unlock(&os->load_lock);
            return NULL;
        }
    }
    pthread_mutex_lock(&os->lock);
    for (unsigned i = 0; i < DN_PER_BLOCK; i++) {
        uint64_t o = (b << DN_PER_BLOCK_SHIFT) + i;
        if (!dmu_map_get(&os->dnodes, o)) dmu_map_put(&os->dnodes, o, dnode_create(os, o, &blk[i]));
    }
    if (os->meta_nblocks < b + 1) os->meta_nblocks = b + 1;
    dn = dmu_map_get(&os->dnodes, obj);
    hold_locked(os, dn);
    pthread_mutex_unlock(&os->lock);
    pthread_mutex_unlock(&os->load_lock);
    free(blk);
    return dn;
}
