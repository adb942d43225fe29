/*
 * Dnodes: objects as sparse arrays of records, their dirty state per txg and
 * the writing out of one txg's changes.
 *
 * ON-DISK FORMAT (all little-endian; see dmu_impl.h for the C structs)
 *
 * dnode_phys_t, 512 bytes:
 *   0  u8  type          0 free slot, 1 plain object (records CAIRN_BT_DATA),
 *                        2 object-set directory (CAIRN_BT_DIRECTORY),
 *                        3 meta-dnode (records CAIRN_BT_DNODE)
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
 * when n = 1. Capacity is 1024^(n-1) records. Indirect blocks are
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
 * indirect blocks are written without the lock held. Metadata reads (loading
 * an indirect block) hold the dnode lock: they happen once per 1024 records.
 */
#include "dmu_impl.h"

#include <cairn/log.h>
#include <cairn/util.h>
#include <stdlib.h>
#include <string.h>

#define META_OBJ UINT64_MAX

enum { LK_ZERO = 0, LK_DATA = 1, LK_BP = 2 };

void *dmu_buf_alloc(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, CAIRN_IO_ALIGN, CAIRN_P2ROUNDUP(size, (size_t)CAIRN_IO_ALIGN))) abort();
    return p;
}

uint64_t bp_asize(const cairn_blkptr_t *bp)
{
    uint64_t s = 0;
    for (int i = 0; i < CAIRN_MAX_COPIES; i++) s += cairn_dva_asize(&bp->dva[i]);
    return s;
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

static cairn_blk_type_t dn_blk_type(uint8_t type)
{
    switch (type) {
    case DNODE_TYPE_DIRECTORY: return CAIRN_BT_DIRECTORY;
    case DNODE_TYPE_META: return CAIRN_BT_DNODE;
    default: return CAIRN_BT_DATA;
    }
}

static spa_t *dn_spa(const dnode_t *dn) { return dn->os->dp->spa; }

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
    pthread_mutex_init(&dn->lock, NULL);
    if (phys) dn->phys = *phys;
    dn->cur = dn->phys;
    dmu_map_init(&dn->inds);
    return dn;
}

static void rec_free(dmu_rec_t *r)
{
    free(r->data);
    free(r);
}

static void slot_destroy(dn_slot_t *s)
{
    size_t n;
    void **v = dmu_map_values(&s->recs, &n);
    for (size_t i = 0; i < n; i++) rec_free(v[i]);
    free(v);
    dmu_map_fini(&s->recs);
    free(s->frees);
    free(s);
}

static void ind_free(dn_ind_t *ind)
{
    free(ind->bps);
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
    for (int i = 0; i < 4; i++)
        if (dn->slots[i]) slot_destroy(dn->slots[i]);
    dn_drop_inds(dn);
    for (int l = 0; l < DN_MAX_LEVELS; l++) free(dn->dirty_inds[l]);
    pthread_mutex_destroy(&dn->lock);
    free(dn);
}

/* ---------------- slots ---------------- */

static dn_slot_t *slot_find(dnode_t *dn, uint64_t txg)
{
    dn_slot_t *s = dn->slots[txg & 3];
    return s && s->txg == txg ? s : NULL;
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
    s = cairn_zalloc(sizeof(*s));
    s->txg = txg;
    dmu_map_init(&s->recs);
    dn_slot_t *older = NULL;
    for (int i = 0; i < 4; i++) {
        dn_slot_t *o = dn->slots[i];
        if (o && o->txg < txg && (!older || o->txg > older->txg)) older = o;
    }
    s->snap = older ? older->snap : dn->phys;
    dn->slots[txg & 3] = s;
    if (dn->obj != META_OBJ) {
        objset_dirty_dnode(dn->os, dn, txg);
        if (!sync_ctx) spa_dirty_add(dn_spa(dn), txg, DNODE_SIZE);
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

int dnode_set_props_locked(dnode_t *dn, uint64_t txg, const dmu_object_props_t *p)
{
    if (p->recordsize != dn->cur.datablksz && (dn->cur.flags & DNODE_FLAG_WRITTEN))
        return -EINVAL;
    attr_change_t c = {.kind = ATTR_PROPS, .txg = txg, .props = p};
    dn_attr_change(dn, txg, &c, false);
    return 0;
}

void dnode_set_bonus_locked(dnode_t *dn, uint64_t txg, const void *buf, uint32_t len)
{
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
    dn_ind_t *ind = get_ind(dn, nl, root, 1, blkid >> DN_EPB_SHIFT, false, &err);
    if (ind) *out = ind->bps[blkid & (DN_EPB - 1)];
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
        dmu_rec_t *r = dmu_map_get(&ss[i]->recs, blkid);
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

/* The record blkid of txg's slot, created from its current content unless the
 * caller overwrites it whole. May drop and retake dn->lock around a read. */
static int dirty_rec(dnode_t *dn, uint64_t txg, uint64_t blkid, bool whole, bool sync_ctx,
                     dmu_rec_t **out)
{
    for (;;) {
        dn_slot_t *s = slot_get(dn, txg, sync_ctx);
        dmu_rec_t *r = dmu_map_get(&s->recs, blkid);
        if (r) {
            *out = r;
            return 0;
        }
        uint32_t rs = dn->cur.datablksz;
        uint8_t *data = dmu_buf_alloc(rs);
        if (!whole) {
            const uint8_t *src = NULL;
            cairn_blkptr_t bp;
            int err;
            int k = dn_lookup(dn, txg, blkid, &src, &bp, &err);
            if (err) {
                free(data);
                return err;
            }
            if (k == LK_DATA) {
                memcpy(data, src, rs);
            } else if (k == LK_ZERO) {
                memset(data, 0, rs);
            } else {
                uint64_t gen = dn->mod_gen;
                pthread_mutex_unlock(&dn->lock);
                err = bp.lsize == rs ? dmu_cache_read(dn->os, &bp, data) : -EIO;
                pthread_mutex_lock(&dn->lock);
                if (err) {
                    free(data);
                    return err;
                }
                if (dn->cur.type == DNODE_TYPE_FREE) {
                    free(data);
                    return -ENOENT;
                }
                if (gen != dn->mod_gen) {
                    /* Someone changed the dnode while we read: look again. */
                    free(data);
                    continue;
                }
            }
        }
        r = cairn_zalloc(sizeof(*r));
        r->blkid = blkid;
        r->data = data;
        s = slot_get(dn, txg, sync_ctx);
        dmu_map_put(&s->recs, blkid, r);
        dn->mod_gen++;
        if (!sync_ctx && dn->obj != META_OBJ) spa_dirty_add(dn_spa(dn), txg, rs);
        *out = r;
        return 0;
    }
}

/* Writes (src NULL: zeros) into records of txg, dn->lock held. */
static int dn_write_locked(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len,
                           const uint8_t *src, bool sync_ctx)
{
    while (len > 0) {
        uint32_t rs = dn->cur.datablksz;
        uint64_t blkid = off / rs;
        uint32_t boff = (uint32_t)(off % rs);
        uint32_t n = (uint32_t)CAIRN_MIN(len, (uint64_t)(rs - boff));
        bool whole = boff == 0 && n == rs;
        dmu_rec_t *r;
        int err = dirty_rec(dn, txg, blkid, whole, sync_ctx, &r);
        if (err) return err;
        if (src) memcpy(r->data + boff, src, n);
        else memset(r->data + boff, 0, n);
        /* Keep newer txgs that shadow this record up to date. */
        for (int i = 0; i < 4; i++) {
            dn_slot_t *s = dn->slots[i];
            if (!s || s->txg <= txg) continue;
            dmu_rec_t *nr = dmu_map_get(&s->recs, blkid);
            if (!nr && slot_freed(s, blkid)) {
                err = dirty_rec(dn, s->txg, blkid, false, false, &nr);
                if (err) return err;
            }
            if (nr) {
                if (src) memcpy(nr->data + boff, src, n);
                else memset(nr->data + boff, 0, n);
            }
        }
        attr_change_t c = {.kind = ATTR_MAXBLKID, .blkid = blkid};
        dn_attr_change(dn, txg, &c, sync_ctx);
        off += n;
        len -= n;
        if (src) src += n;
    }
    return 0;
}

int dnode_write_impl(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len, const void *buf,
                     bool sync_ctx)
{
    if (off > DMU_MAX_OFFSET || len > DMU_MAX_OFFSET - off) return -EFBIG;
    pthread_mutex_lock(&dn->lock);
    int err = dn->cur.type == DNODE_TYPE_FREE ? -ENOENT
                                               : dn_write_locked(dn, txg, off, len, buf, sync_ctx);
    pthread_mutex_unlock(&dn->lock);
    return err;
}

static void slot_drop_recs(dn_slot_t *s, uint64_t start, uint64_t end)
{
    if (s->recs.count == 0) return;
    if (end - start <= s->recs.count) {
        for (uint64_t b = start; b < end; b++) {
            dmu_rec_t *r = dmu_map_remove(&s->recs, b);
            if (r) rec_free(r);
        }
        return;
    }
    size_t n;
    void **v = dmu_map_values(&s->recs, &n);
    for (size_t i = 0; i < n; i++) {
        dmu_rec_t *r = v[i];
        if (r->blkid >= start && r->blkid < end) {
            dmu_map_remove(&s->recs, r->blkid);
            rec_free(r);
        }
    }
    free(v);
}

static int dn_free_range_locked(dnode_t *dn, uint64_t txg, uint64_t off, uint64_t len)
{
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
        if (dn->slots[i] && dn->slots[i]->txg >= txg) slot_drop_recs(dn->slots[i], first, last);
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
    pthread_mutex_lock(&dn->lock);
    int err = dn->cur.type == DNODE_TYPE_FREE ? -ENOENT : dn_free_range_locked(dn, txg, off, len);
    pthread_mutex_unlock(&dn->lock);
    return err;
}

int dnode_free_object_locked(dnode_t *dn, uint64_t txg)
{
    if (dn->cur.type == DNODE_TYPE_FREE) return -ENOENT;
    int err = dn_free_range_locked(dn, txg, 0, UINT64_MAX);
    if (err) return err;
    /* Records dirtied at the edges of the range are moot now. */
    for (int i = 0; i < 4; i++)
        if (dn->slots[i] && dn->slots[i]->txg >= txg) slot_drop_recs(dn->slots[i], 0, UINT64_MAX);
    dnode_set_alloc(dn, txg, DNODE_TYPE_FREE, NULL, false);
    return 0;
}

/*
 * A read spanning several records on disk issues them in parallel on the
 * pool's read workers, so one large read keeps several devices (and raidz
 * columns) busy instead of waiting for each record in turn.
 */
typedef struct dn_read_io {
    objset_t *os;      /* its cache policy (primarycache/secondarycache) */
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
        return;
    }
    uint8_t *tmp = dmu_buf_alloc(io->bp.lsize);
    io->err = dmu_cache_read(io->os, &io->bp, tmp);
    if (!io->err) memcpy(io->dst, tmp + io->boff, io->n);
    free(tmp);
}

#define DN_READ_BATCH 64

static int dn_read_batch(dnode_t *dn, dn_read_io_t *ios, size_t n)
{
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

int dnode_read_impl(dnode_t *dn, uint64_t off, uint64_t len, void *buf)
{
    uint8_t *dst = buf;
    int err = 0;
    const uint64_t pf_off = off, pf_len = len; /* for prefetch (dmu_prefetch.c) */
    dn_read_io_t ios[DN_READ_BATCH];
    size_t nio = 0;
    if (off > DMU_MAX_OFFSET || len > DMU_MAX_OFFSET - off) return -EFBIG;
    while (len > 0) {
        pthread_mutex_lock(&dn->lock);
        if (dn->cur.type == DNODE_TYPE_FREE) {
            pthread_mutex_unlock(&dn->lock);
            err = -ENOENT;
            break;
        }
        uint32_t rs = dn->cur.datablksz;
        uint64_t blkid = off / rs;
        uint32_t boff = (uint32_t)(off % rs);
        uint32_t n = (uint32_t)CAIRN_MIN(len, (uint64_t)(rs - boff));
        const uint8_t *src = NULL;
        cairn_blkptr_t bp;
        int k = dn_lookup(dn, UINT64_MAX, blkid, &src, &bp, &err);
        if (k == LK_DATA) memcpy(dst, src + boff, n);
        else if (k == LK_ZERO) memset(dst, 0, n);
        pthread_mutex_unlock(&dn->lock);
        if (err) break;
        if (k == LK_BP) {
            if (bp.lsize != rs) {
                err = -EIO;
                break;
            }
            /* Blocks never change under copy-on-write: reading them after the
             * lock is dropped returns what the pointer named, even if the
             * record is rewritten meanwhile. */
            ios[nio++] = (dn_read_io_t){.os = dn->os, .bp = bp, .dst = dst, .boff = boff, .n = n};
            if (nio == DN_READ_BATCH) {
                err = dn_read_batch(dn, ios, nio);
                nio = 0;
                if (err) break;
            }
        }
        dst += n;
        off += n;
        len -= n;
    }
    if (!err && nio) err = dn_read_batch(dn, ios, nio);
    if (!err) dmu_prefetch_note(dn, pf_off, pf_len); /* sequential readers read ahead */
    return err;
}

/* ---- for prefetch (dmu_prefetch.c): the on-disk pointers of records
 * [blkid, blkid + n); records that are holes or dirty in memory come back as
 * holes (nothing to read ahead). Returns the record size, 0 if the object is free. */
uint32_t dnode_prefetch_bps(dnode_t *dn, uint64_t blkid, size_t n, cairn_blkptr_t *bps)
{
    pthread_mutex_lock(&dn->lock);
    uint32_t rs = dn->cur.type == DNODE_TYPE_FREE ? 0 : dn->cur.datablksz;
    for (size_t i = 0; i < n; i++) {
        memset(&bps[i], 0, sizeof bps[i]);
        if (!rs) continue;
        const uint8_t *src = NULL;
        int err = 0;
        if (dn_lookup(dn, UINT64_MAX, blkid + i, &src, &bps[i], &err) != LK_BP || err)
            memset(&bps[i], 0, sizeof bps[i]);
    }
    pthread_mutex_unlock(&dn->lock);
    return rs;
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
    dn->wused -= CAIRN_MIN(dn->wused, bp_asize(bp));
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
    pthread_mutex_lock(&dn->lock);
    dn_slot_t *s = slot_find(dn, txg);
    if (!s) {
        pthread_mutex_unlock(&dn->lock);
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
        pthread_mutex_unlock(&dn->lock);
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

    size_t n;
    dmu_rec_t **recs = (dmu_rec_t **)dmu_map_values(&s->recs, &n);
    spa_write_props_t props = {
        .type = dn_blk_type(s->snap.type),
        .level = 0,
        .checksum = s->snap.checksum ? s->snap.checksum : CAIRN_CHECKSUM_FLETCHER4,
        .compress = s->snap.compress,
        .copies = s->snap.copies ? s->snap.copies : 1,
    };
    if (s->snap.type != DNODE_TYPE_PLAIN) props.copies = 2;
    for (size_t i = 0; i < n; i++) {
        recs[i]->dn = dn;
        recs[i]->txg = txg;
        recs[i]->props = props;
        recs[i]->size = s->snap.datablksz;
        recs[i]->error = 0;
    }
    pthread_mutex_unlock(&dn->lock);
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
    uint32_t *sizes = cairn_zalloc(b->n * sizeof *sizes);
    cairn_blkptr_t *bps = cairn_zalloc(b->n * sizeof *bps);
    dmu_rec_t **live = cairn_zalloc(b->n * sizeof *live);
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        dmu_rec_t *r = b->recs[i];
        memset(&r->bp, 0, sizeof(r->bp));
        r->error = 0;
        if (buf_is_zero(r->data, r->size)) continue;
        live[k] = r;
        datas[k] = r->data;
        sizes[k++] = r->size;
    }
    if (k) {
        dmu_rec_t *r0 = live[0];
        int err = spa_block_write_many(dn_spa(r0->dn), r0->txg, k, datas, sizes, &r0->props, bps);
        for (size_t j = 0; j < k; j++) {
            dmu_rec_t *r = live[j];
            r->error = err;
            if (err) continue;
            r->bp = bps[j];
            r->bp.fill = 1;
            if (r->props.type == CAIRN_BT_DATA) dmu_cache_insert(r->dn->os, &r->bp, r->data);
        }
    }
    free(datas);
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
    dn->wused += bp_asize(bp);
    dmu_born_bp(dn->os, txg, bp);
    return 0;
}

int dnode_sync_finish(dnode_t *dn, uint64_t txg, dmu_rec_t **recs, size_t nrecs, taskq_t *tq)
{
    int err = 0;
    pthread_mutex_lock(&dn->lock);
    dn_slot_t *s = slot_find(dn, txg);
    if (!s) {
        pthread_mutex_unlock(&dn->lock);
        return 0;
    }
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
            pthread_mutex_unlock(&dn->lock);
            if (n == 1 || !tq) {
                for (size_t i = 0; i < n; i++) ind_write_task(&ws[i]);
            } else {
                taskq_group_t g;
                taskq_group_init(&g);
                for (size_t i = 0; i < n; i++) taskq_dispatch(tq, ind_write_task, &ws[i], &g);
                taskq_group_wait(&g);
                taskq_group_fini(&g);
            }
            pthread_mutex_lock(&dn->lock);
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
        pthread_mutex_unlock(&dn->lock);
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
    pthread_mutex_unlock(&dn->lock);
    return 0;
}

void dnode_sync_put_rec(dnode_t *dn, uint64_t txg, uint64_t blkid, uint8_t *data)
{
    pthread_mutex_lock(&dn->lock);
    dn_slot_t *s = slot_get(dn, txg, true);
    dmu_rec_t *r = dmu_map_get(&s->recs, blkid);
    if (r) {
        free(r->data);
    } else {
        r = cairn_zalloc(sizeof(*r));
        r->blkid = blkid;
        dmu_map_put(&s->recs, blkid, r);
    }
    r->data = data;
    attr_change_t c = {.kind = ATTR_MAXBLKID, .blkid = blkid};
    dn_attr_change(dn, txg, &c, true);
    pthread_mutex_unlock(&dn->lock);
}

/* ---------------- loading dnodes ---------------- */

dnode_t *dnode_hold(objset_t *os, uint64_t obj, bool create)
{
    pthread_mutex_lock(&os->lock);
    dnode_t *dn = dmu_map_get(&os->dnodes, obj);
    uint64_t nb = os->meta_nblocks;
    pthread_mutex_unlock(&os->lock);
    if (dn) return dn;
    uint64_t b = obj >> DN_PER_BLOCK_SHIFT;
    if (obj >= DMU_MAX_OFFSET / DNODE_SIZE || (b >= nb && !create)) return NULL;

    pthread_mutex_lock(&os->load_lock);
    pthread_mutex_lock(&os->lock);
    dn = dmu_map_get(&os->dnodes, obj);
    nb = os->meta_nblocks;
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
    pthread_mutex_unlock(&os->lock);
    pthread_mutex_unlock(&os->load_lock);
    free(blk);
    return dn;
}
