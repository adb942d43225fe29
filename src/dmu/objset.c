/*
 * Object sets, the pool's object-set directory, and the DMU's side of the
 * SPA: creating/opening the MOS, writing out a txg, enumerating blocks.
 *
 * Per pool (dmu_pool_t, the SPA's upper-private pointer): the MOS objset_t,
 * the directory entries loaded at open (a handful: a linear scan is fine),
 * the objset_t of every object set opened since (kept until the pool closes,
 * so one objset_t exists per (pool, id)), and destroyed object sets waiting
 * for their txg to sync. The on-disk format is described in dnode.c.
 *
 * Writing out txg T (dmu_pool_sync, on the SPA's sync thread, after every
 * holder of T left):
 *   1. every user object set with changes in T: its dirty dnodes are
 *      prepared (freed ranges applied to the tree), all their changed records
 *      are written in parallel on the pool's "dmu_sync" taskq, then each
 *      dnode's indirect blocks are written level by level; the dnode blocks
 *      holding those dnodes become records of the meta-dnode, which is synced
 *      the same way; finally the objset_phys block gives the new root, which
 *      is stored into the object set's directory entry - a change to the MOS
 *      made in T itself;
 *   2. object sets destroyed in T have every block freed (walking the tree on
 *      disk);
 *   3. the MOS is synced like any object set; its new root goes to the SPA.
 * Every replaced block is freed in T (the SPA defers its reuse).
 *
 * Enumeration (dmu_pool_traverse) reads only what is on disk from the root
 * given, so it works on a pool opened read-only for the offline check.
 */
#include "dmu_impl.h"

#include <inttypes.h>

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dmu_pool_t *dmu_pool(spa_t *spa) { return spa_get_upper_private(spa); }

/* ---------------- object sets in memory ---------------- */

static objset_t *objset_alloc(dmu_pool_t *dp, uint64_t id, const cairn_blkptr_t *root, int *err)
{
    dnode_phys_t meta;
    uint64_t creation_txg = 0;
    memset(&meta, 0, sizeof(meta));
    *err = 0;
    if (root && !cairn_bp_is_hole(root)) {
        objset_phys_t *osp = dmu_buf_alloc(OBJSET_PHYS_SIZE);
        int e = root->lsize == OBJSET_PHYS_SIZE ? spa_block_read(dp->spa, root, osp) : -EIO;
        if (!e && (osp->magic != OBJSET_MAGIC || osp->meta.type != DNODE_TYPE_META)) e = -EIO;
        if (e) {
            log_error("dmu", "cannot read the root of object set %llu: %d", (unsigned long long)id, e);
            free(osp);
            *err = e;
            return NULL;
        }
        meta = osp->meta;
        creation_txg = osp->creation_txg;
        free(osp);
    } else {
        meta.type = DNODE_TYPE_META;
        meta.nlevels = 1;
        meta.checksum = CAIRN_CHECKSUM_FLETCHER4;
        meta.compress = CAIRN_COMPRESS_LZ4;
        meta.copies = 2;
        meta.indblkshift = DN_INDBLKSHIFT;
        meta.datablksz = DN_META_BLKSZ;
    }
    objset_t *os = cairn_zalloc(sizeof(*os));
    os->dp = dp;
    os->id = id;
    os->creation_txg = creation_txg;
    if (root) os->root_bp = *root;
    pthread_mutex_init(&os->lock, NULL);
    pthread_mutex_init(&os->load_lock, NULL);
    pthread_mutex_init(&os->alloc_lock, NULL);
    pthread_mutex_init(&os->dirty_lock, NULL);
    pthread_mutex_init(&os->space_lock, NULL);
    pthread_mutex_init(&os->label_lock, NULL);
    dmu_map_init(&os->dnodes);
    os->meta = dnode_create(os, UINT64_MAX, &meta);
    os->meta_nblocks = (meta.flags & DNODE_FLAG_WRITTEN) ? meta.maxblkid + 1 : 0;
    os->alloc_hint = 1;
    return os;
}

static void objset_free(objset_t *os)
{
    size_t n;
    void **v = dmu_map_values(&os->dnodes, &n);
    for (size_t i = 0; i < n; i++) dnode_destroy(v[i]);
    free(v);
    dmu_map_fini(&os->dnodes);
    dnode_destroy(os->meta);
    for (int i = 0; i < 4; i++) free(os->dirty[i].dns);
    free(os->freed);
    pthread_mutex_destroy(&os->lock);
    pthread_mutex_destroy(&os->load_lock);
    pthread_mutex_destroy(&os->alloc_lock);
    pthread_mutex_destroy(&os->dirty_lock);
    pthread_mutex_destroy(&os->space_lock);
    pthread_mutex_destroy(&os->label_lock);
    free(os);
}

/* ---------------- the directory ---------------- */

static const dmu_object_props_t dir_props = {
    .recordsize = DIR_RECORDSIZE, .compress = CAIRN_COMPRESS_LZ4,
    .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 2};

static dnode_t *dir_dnode(dmu_pool_t *dp, uint64_t txg)
{
    dnode_t *dn = dnode_hold(dp->mos, DIR_OBJECT, txg != 0);
    if (!dn || !txg) return dn;
    dn_wlock(dn);
    if (dn->cur.type == DNODE_TYPE_FREE && dnode_is_reusable(dn))
        dnode_set_alloc(dn, txg, DNODE_TYPE_DIRECTORY, &dir_props, false);
    dn_unlock(dn);
    return dn;
}

static int dir_load(dmu_pool_t *dp)
{
    dnode_t *dn = dnode_hold(dp->mos, DIR_OBJECT, false);
    if (!dn) return 0;
    dn_wlock(dn);
    bool has = dn->cur.type == DNODE_TYPE_DIRECTORY && (dn->cur.flags & DNODE_FLAG_WRITTEN);
    uint64_t nrec = has ? dn->cur.maxblkid + 1 : 0;
    dn_unlock(dn);
    if (!nrec) return 0;
    uint64_t len = nrec * DIR_RECORDSIZE;
    dir_entry_phys_t *es = dmu_buf_alloc(len);
    int err = dnode_read_impl(dn, 0, len, es);
    if (err) {
        free(es);
        return err;
    }
    uint64_t n = len / DIR_ENTRY_SIZE;
    dp->nslots = n;
    for (uint64_t i = 0; i < n; i++) {
        if (!(es[i].flags & DIR_ENTRY_USED)) continue;
        dir_ent_t *e = cairn_zalloc(sizeof(*e));
        e->id = es[i].id;
        e->slot = i;
        memcpy(e->name, es[i].name, DIR_NAME_LEN);
        e->name[DIR_NAME_LEN - 1] = 0;
        e->root = es[i].root;
        e->creation_txg = es[i].creation_txg;
        if (dp->nents == dp->capents) {
            dp->capents = dp->capents ? dp->capents * 2 : 8;
            dp->ents = cairn_realloc(dp->ents, dp->capents * sizeof(*dp->ents));
        }
        dp->ents[dp->nents++] = e;
        if (e->id >= dp->next_id) dp->next_id = e->id + 1;
    }
    free(es);
    return 0;
}

static dir_ent_t *dir_find(dmu_pool_t *dp, const char *name, size_t *idx)
{
    for (size_t i = 0; i < dp->nents; i++)
        if (strcmp(dp->ents[i]->name, name) == 0) {
            if (idx) *idx = i;
            return dp->ents[i];
        }
    return NULL;
}

/* ---------------- pool lifecycle (SPA upper ops) ---------------- */

static dmu_pool_t *pool_new(spa_t *spa)
{
    dmu_pool_t *dp = cairn_zalloc(sizeof(*dp));
    dp->spa = spa;
    /* Each sync worker compresses a record and then waits for its write, so a
     * worker per core would leave the disks with a queue depth of about one per
     * core; several per core keep both the CPUs and the devices busy. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned workers = ncpu > 0 ? (unsigned)ncpu * 4 : 4;
    dp->tq = taskq_create("dmu_sync", workers < 16 ? 16 : workers);
    dp->rtq = taskq_create("dmu_read", workers < 16 ? 16 : workers);
    pthread_mutex_init(&dp->lock, NULL);
    dp->next_id = 1;
    spa_set_upper_private(spa, dp);
    return dp;
}

static void pool_free(dmu_pool_t *dp)
{
    for (size_t i = 0; i < dp->nents; i++) {
        if (dp->ents[i]->os) objset_free(dp->ents[i]->os);
        free(dp->ents[i]);
    }
    free(dp->ents);
    for (size_t i = 0; i < dp->ndead; i++) objset_free(dp->dead[i]);
    free(dp->dead);
    if (dp->mos) objset_free(dp->mos);
    if (dp->tq) taskq_destroy(dp->tq);
    if (dp->rtq) taskq_destroy(dp->rtq);
    pthread_mutex_destroy(&dp->lock);
    free(dp);
}

static int dmu_pool_create(spa_t *spa, uint64_t txg)
{
    dmu_pool_t *dp = dmu_pool(spa);
    int err = 0;
    if (!dp) {
        dp = pool_new(spa);
        dp->mos = objset_alloc(dp, 0, NULL, &err);
    }
    dnode_t *dn = dnode_hold(dp->mos, DIR_OBJECT, true);
    dn_wlock(dn);
    if (dnode_is_reusable(dn)) dnode_set_alloc(dn, txg, DNODE_TYPE_DIRECTORY, &dir_props, true);
    dn_unlock(dn);
    return err;
}

static void errlog_load(dmu_pool_t *dp);
static int errlog_sync(dmu_pool_t *dp, uint64_t txg);

static int dmu_pool_open(spa_t *spa, const cairn_blkptr_t *mos_root)
{
    if (dmu_pool(spa)) return 0; /* just created */
    dmu_pool_t *dp = pool_new(spa);
    int err = 0;
    dp->mos = objset_alloc(dp, 0, mos_root, &err);
    if (!err) err = dir_load(dp);
    if (!err) errlog_load(dp);
    if (err) {
        spa_set_upper_private(spa, NULL);
        pool_free(dp);
    }
    return err;
}

#define DMU_CLOSE_HOOKS_MAX 8
static dmu_pool_close_hook_t close_hooks[DMU_CLOSE_HOOKS_MAX];
static _Atomic unsigned nclose_hooks;

void dmu_register_pool_close_hook(dmu_pool_close_hook_t fn)
{
    unsigned i = atomic_fetch_add(&nclose_hooks, 1);
    if (i >= DMU_CLOSE_HOOKS_MAX) abort(); /* a fixed, small set of layers registers */
    close_hooks[i] = fn;
}

static void dmu_pool_close(spa_t *spa)
{
    unsigned nh = atomic_load(&nclose_hooks);
    for (unsigned i = 0; i < nh && i < DMU_CLOSE_HOOKS_MAX; i++)
        if (close_hooks[i]) close_hooks[i](spa);
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return;
    spa_set_upper_private(spa, NULL);
    pool_free(dp);
    dmu_cache_purge_pool(spa);
}

/* ---------------- writing out a txg ---------------- */

static int rec_blkid_cmp(const void *a, const void *b)
{
    const dmu_rec_t *x = *(dmu_rec_t *const *)a, *y = *(dmu_rec_t *const *)b;
    return x->blkid < y->blkid ? -1 : x->blkid > y->blkid;
}

static int sync_dnodes(dmu_pool_t *dp, uint64_t txg, dnode_t **dns, size_t n)
{
    int err = 0;
    dmu_rec_t ***recs = cairn_zalloc((n + 1) * sizeof(*recs));
    size_t *nrecs = cairn_zalloc((n + 1) * sizeof(*nrecs));
    for (size_t i = 0; i < n; i++) {
        int e = dnode_sync_prepare(dns[i], txg, &recs[i], &nrecs[i]);
        if (e && !err) err = e;
    }
    /* Records go out in batches of up to DMU_WRITE_BATCH_BYTES per dnode, in
     * record order, so a stream's records land contiguously and reach the devices
     * as large writes; the batches run in parallel on the sync workers. */
    size_t nbatches = 0, cap = 0;
    dmu_rec_batch_t *batches = NULL;
    for (size_t i = 0; i < n; i++) {
        if (nrecs[i] > 1) qsort(recs[i], nrecs[i], sizeof(*recs[i]), rec_blkid_cmp);
        size_t j = 0;
        while (j < nrecs[i]) {
            size_t e = j, bytes = 0;
            while (e < nrecs[i] &&
                   (e == j || (bytes + recs[i][e]->size <= DMU_WRITE_BATCH_BYTES &&
                               !memcmp(&recs[i][e]->props, &recs[i][j]->props,
                                       sizeof(recs[i][j]->props))))) {
                bytes += recs[i][e]->size;
                e++;
            }
            if (nbatches == cap) {
                cap = cap ? cap * 2 : 64;
                batches = cairn_realloc(batches, cap * sizeof(*batches));
            }
            batches[nbatches++] = (dmu_rec_batch_t){.recs = &recs[i][j], .n = e - j};
            j = e;
        }
    }
    taskq_group_t g;
    taskq_group_init(&g);
    for (size_t b = 0; b < nbatches; b++) taskq_dispatch(dp->tq, dnode_write_recs_task, &batches[b], &g);
    taskq_group_wait(&g);
    taskq_group_fini(&g);
    free(batches);
    for (size_t i = 0; i < n; i++) {
        if (!err) err = dnode_sync_finish(dns[i], txg, recs[i], nrecs[i], dp->tq);
        free(recs[i]);
    }
    free(recs);
    free(nrecs);
    return err;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Writes out os's changes in txg; 1 if its root changed, 0 if not, or -errno. */
static int objset_sync(objset_t *os, uint64_t txg)
{
    dmu_pool_t *dp = os->dp;
    objset_evict_dnodes(os);
    pthread_mutex_lock(&os->dirty_lock);
    os_dirty_t *d = &os->dirty[txg & 3];
    dnode_t **dns = NULL;
    size_t n = 0;
    if (d->txg == txg && d->n) {
        dns = d->dns;
        n = d->n;
        d->dns = NULL;
        d->n = d->cap = 0;
    }
    pthread_mutex_unlock(&os->dirty_lock);
    if (!n) return 0;

    int err = sync_dnodes(dp, txg, dns, n);
    if (err) goto out;

    /* The dnode blocks holding the changed dnodes become meta-dnode records. */
    uint64_t *blks = cairn_zalloc(n * sizeof(*blks));
    for (size_t i = 0; i < n; i++) blks[i] = dns[i]->obj >> DN_PER_BLOCK_SHIFT;
    qsort(blks, n, sizeof(*blks), cmp_u64);
    for (size_t i = 0; i < n; i++) {
        if (i && blks[i] == blks[i - 1]) continue;
        dnode_phys_t *blk = dmu_buf_alloc(DN_META_BLKSZ);
        memset(blk, 0, DN_META_BLKSZ);
        for (unsigned k = 0; k < DN_PER_BLOCK; k++) {
            uint64_t o = (blks[i] << DN_PER_BLOCK_SHIFT) + k;
            pthread_mutex_lock(&os->lock);
            dnode_t *dn = dmu_map_get(&os->dnodes, o);
            pthread_mutex_unlock(&os->lock);
            if (!dn) continue;
            dn_wlock(dn);
            blk[k] = dn->phys;
            dn_unlock(dn);
        }
        dnode_sync_put_rec(os->meta, txg, blks[i], (uint8_t *)blk);
    }
    free(blks);
    dnode_t *meta = os->meta;
    err = sync_dnodes(dp, txg, &meta, 1);
    if (err) goto out;

    objset_phys_t *osp = dmu_buf_alloc(OBJSET_PHYS_SIZE);
    memset(osp, 0, OBJSET_PHYS_SIZE);
    osp->magic = OBJSET_MAGIC;
    osp->version = OBJSET_VERSION;
    osp->id = os->id;
    if (!os->creation_txg) os->creation_txg = txg;
    osp->creation_txg = os->creation_txg;
    dn_wlock(meta);
    osp->meta = meta->phys;
    dn_unlock(meta);
    spa_write_props_t props = {.type = CAIRN_BT_OBJSET, .level = 0,
                               .checksum = CAIRN_CHECKSUM_FLETCHER4,
                               .compress = CAIRN_COMPRESS_LZ4, .copies = 2};
    cairn_blkptr_t bp;
    err = spa_block_write(dp->spa, txg, osp, OBJSET_PHYS_SIZE, &props, &bp);
    free(osp);
    if (err) goto out;
    bp.fill = 1;
    dmu_kill_bp(os, txg, &os->root_bp);
    pthread_mutex_lock(&dp->lock);
    os->root_bp = bp;
    pthread_mutex_unlock(&dp->lock);
    dmu_born_bp(os, txg, &bp);
    err = 1;
out:
    free(dns);
    if (err < 0)
        log_error("dmu", "objset %llu: writing txg %llu failed: %d", (unsigned long long)os->id,
                  (unsigned long long)txg, err);
    return err;
}

typedef struct free_walk {
    uint64_t txg;
} free_walk_t;

static int free_visitor(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)bm;
    free_walk_t *fw = arg;
    dmu_free_bp(spa, fw->txg, bp);
    return 0;
}

static dmu_pool_sync_hook_t pool_sync_hook;
void dmu_register_pool_sync_hook(dmu_pool_sync_hook_t fn) { pool_sync_hook = fn; }

int dmu_traverse_objset(spa_t *spa, const cairn_blkptr_t *root, uint64_t min_txg,
                        spa_bp_visitor_t visit, void *arg);

/* Takes the object sets destroyed in txg or before off the dead list. */
static objset_t **collect_doomed(dmu_pool_t *dp, uint64_t txg, size_t *nd)
{
    pthread_mutex_lock(&dp->lock);
    objset_t **doomed = cairn_zalloc((dp->ndead + 1) * sizeof(*doomed));
    *nd = 0;
    for (size_t i = 0; i < dp->ndead;) {
        objset_t *os = dp->dead[i];
        if (os->destroy_txg <= txg) {
            doomed[(*nd)++] = os;
            dp->dead[i] = dp->dead[--dp->ndead];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&dp->lock);
    return doomed;
}

static int dmu_pool_sync(spa_t *spa, uint64_t txg, cairn_blkptr_t *mos_root)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return 0;
    int err = 0;

    pthread_mutex_lock(&dp->lock);
    size_t n = 0;
    objset_t **live = cairn_zalloc((dp->nents + dp->ndead + 1) * sizeof(*live));
    for (size_t i = 0; i < dp->nents; i++)
        if (dp->ents[i]->os) live[n++] = dp->ents[i]->os;
    for (size_t i = 0; i < dp->ndead; i++)
        if (dp->dead[i]->destroy_txg > txg) live[n++] = dp->dead[i];
    pthread_mutex_unlock(&dp->lock);

    for (size_t i = 0; i < n && !err; i++) {
        objset_t *os = live[i];
        int r = objset_sync(os, txg);
        if (r < 0) {
            err = r;
            break;
        }
        if (r == 0) continue;
        dnode_t *dir = dnode_hold(dp->mos, DIR_OBJECT, false);
        if (!dir) {
            err = -EIO;
            break;
        }
        pthread_mutex_lock(&dp->lock);
        uint64_t slot = os->dir_slot;
        cairn_blkptr_t root = os->root_bp;
        bool gone = os->destroy_txg != 0 && os->destroy_txg <= txg;
        pthread_mutex_unlock(&dp->lock);
        if (gone) continue; /* its entry was cleared in this txg */
        err = dnode_write_impl(dir, txg, slot * DIR_ENTRY_SIZE + offsetof(dir_entry_phys_t, root),
                               sizeof(root), &root, true);
    }
    free(live);
    if (err) return err;
    /* The layer above: snapshots of the roots just written, its bookkeeping. */
    if (pool_sync_hook) err = pool_sync_hook(spa, txg);
    if (err) return err;
    err = errlog_sync(dp, txg);
    if (err) return err;

    size_t nd;
    objset_t **doomed = collect_doomed(dp, txg, &nd);
    for (size_t i = 0; i < nd; i++) {
        objset_t *os = doomed[i];
        if (!err && !cairn_bp_is_hole(&os->root_bp) && os->keep_upto_txg != UINT64_MAX) {
            free_walk_t fw = {txg};
            err = dmu_traverse_objset(spa, &os->root_bp, os->keep_upto_txg, free_visitor, &fw);
        }
        objset_free(os);
    }
    free(doomed);
    if (err) return err;

    int r = objset_sync(dp->mos, txg);
    if (r < 0) return r;
    if (r > 0) *mos_root = dp->mos->root_bp;
    return 0;
}

/* ---------------- enumeration ----------------
 *
 * Order (what a resumed scan relies on): the MOS first, object by object,
 * then every user object set in ascending id, each object by object. Ids only
 * grow (a new object set, snapshot or clone takes an id above every existing
 * one), and a block never moves to another object or object set position, so
 * a walk that stopped at (object set X, object O) and resumes there in a newer
 * tree reaches every block it had not reached: blocks before that position
 * were visited, or are new. The walk may start at such a position (`from`):
 * object sets below X and objects below O are neither visited nor read, save
 * the MOS directory, read quietly to find the object sets. */

typedef struct dir_list {
    dir_entry_phys_t *v;
    size_t n, cap;
} dir_list_t;

typedef struct trav {
    spa_t *spa;
    spa_bp_visitor_t visit;
    void *arg;
    uint64_t min_txg;      /* skip blocks (and their subtrees) born at or before */
    uint64_t objset;       /* the object set walked (bookmarks) */
    uint64_t from_object;  /* objects below are skipped (a resumed walk) */
    uint64_t only_object;  /* when not 0: only this object is walked */
    dir_list_t *dirs;      /* when set: the MOS directory's entries are collected */
} trav_t;

/* A leaf record's contents: blkid is the record's index in its object. */
typedef int (*trav_leaf_fn)(trav_t *t, const void *data, uint32_t size, uint64_t blkid, void *c);

/* Whether block blkid at `level` of the meta-dnode holds only dnodes below
 * `from` (a resumed walk passed them). Conservative on overflow. */
static bool meta_subtree_passed(uint64_t blkid, unsigned level, uint64_t from)
{
    unsigned shift = level * DN_EPB_SHIFT;
    uint64_t recs_passed = from / DN_PER_BLOCK; /* records wholly below from */
    if (!from || shift >= 64 || blkid + 1 > (recs_passed >> shift)) return false;
    return ((blkid + 1) << shift) <= recs_passed;
}

/* Visits bp then its subtree; <0 from the visitor aborts, >0 skips the subtree.
 * bp is block blkid of the given level of object `object`. */
static int trav_tree(trav_t *t, const cairn_blkptr_t *bp, uint64_t object, unsigned level,
                     uint64_t blkid, trav_leaf_fn leaf, void *c)
{
    if (cairn_bp_is_hole(bp) || bp->birth_txg <= t->min_txg) return 0;
    if (object == 0 && meta_subtree_passed(blkid, level, t->from_object)) return 0;
    spa_bookmark_t bm = {t->objset, object, (int64_t)level, blkid};
    int r = t->visit(t->spa, bp, &bm, t->arg);
    if (r < 0) return r;
    if (r > 0) return 0;
    if (level == 0 && !leaf) return 0;
    void *buf = dmu_buf_alloc(bp->lsize ? bp->lsize : 512);
    if (spa_block_read(t->spa, bp, buf) != 0) {
        free(buf); /* reported already; its subtree cannot be reached */
        return 0;
    }
    if (level == 0) {
        r = leaf(t, buf, bp->lsize, blkid, c);
    } else if (bp->lsize == DN_IND_BLKSZ) {
        const cairn_blkptr_t *bps = buf;
        for (unsigned i = 0; i < DN_EPB && r >= 0; i++)
            r = trav_tree(t, &bps[i], object, level - 1, (blkid << DN_EPB_SHIFT) + i, leaf, c);
    }
    free(buf);
    return r < 0 ? r : 0;
}

static int trav_dnode(trav_t *t, const dnode_phys_t *dnp, uint64_t object, trav_leaf_fn leaf,
                      void *c)
{
    unsigned nl = dnp->nlevels ? dnp->nlevels : 1;
    if (nl > DN_MAX_LEVELS) return 0;
    return trav_tree(t, &dnp->root, object, nl - 1, 0, leaf, c);
}

static int trav_dir_leaf(trav_t *t, const void *data, uint32_t size, uint64_t blkid, void *c)
{
    (void)c;
    (void)blkid;
    const dir_entry_phys_t *es = data;
    dir_list_t *l = t->dirs;
    for (uint32_t i = 0; i < size / DIR_ENTRY_SIZE; i++) {
        if (!(es[i].flags & DIR_ENTRY_USED) || cairn_bp_is_hole(&es[i].root)) continue;
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 16;
            l->v = cairn_realloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = es[i];
    }
    return 0;
}

static int trav_dnode_leaf(trav_t *t, const void *data, uint32_t size, uint64_t blkid, void *c)
{
    (void)c;
    const dnode_phys_t *dns = data;
    uint64_t per = size / DNODE_SIZE;
    for (uint32_t i = 0; i < per; i++) {
        uint64_t obj = blkid * per + i;
        if (dns[i].type == DNODE_TYPE_FREE || obj < t->from_object) continue;
        if (t->only_object && obj != t->only_object) continue;
        bool dir = t->dirs && obj == DIR_OBJECT && dns[i].type == DNODE_TYPE_DIRECTORY;
        int r = trav_dnode(t, &dns[i], obj, dir ? trav_dir_leaf : NULL, NULL);
        if (r < 0) return r;
    }
    return 0;
}

/* Walks one object set from object from_object on: its root block, its
 * meta-dnode and its objects. */
static int traverse_objset_from(trav_t *t, const cairn_blkptr_t *bp, bool is_mos)
{
    if (cairn_bp_is_hole(bp) || bp->birth_txg <= t->min_txg) return 0;
    spa_bookmark_t bm = {t->objset, 0, -1, 0};
    int r = t->visit(t->spa, bp, &bm, t->arg);
    if (r) return r < 0 ? r : 0;
    if (bp->lsize != OBJSET_PHYS_SIZE) return 0;
    objset_phys_t *osp = dmu_buf_alloc(OBJSET_PHYS_SIZE);
    if (spa_block_read(t->spa, bp, osp) != 0 || osp->magic != OBJSET_MAGIC) {
        free(osp);
        return 0;
    }
    /* The object set's own id, which the walk from a bare root pointer
     * (dmu_traverse_objset) does not know otherwise. */
    t->objset = is_mos ? 0 : osp->id;
    r = trav_dnode(t, &osp->meta, 0, trav_dnode_leaf, NULL);
    free(osp);
    return r;
}

int dmu_traverse_objset(spa_t *spa, const cairn_blkptr_t *root, uint64_t min_txg,
                        spa_bp_visitor_t visit, void *arg)
{
    trav_t t = {.spa = spa, .visit = visit, .arg = arg, .min_txg = min_txg};
    return traverse_objset_from(&t, root, false);
}

/* Snapshots and clones share blocks, but the SPA wants each block once: the
 * walk of the pool remembers every block it visited (by first DVA) and skips
 * a block seen before together with its subtree (same block, same subtree).
 * Memory grows with the number of blocks; fine for check and scrub today. */
typedef struct dedup_walk {
    dmu_map_t seen;
    spa_bp_visitor_t visit;
    void *arg;
} dedup_walk_t;

static int dedup_visitor(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm,
                         void *arg)
{
    dedup_walk_t *w = arg;
    uint64_t key = ((uint64_t)bp->dva[0].vdev << 56) | (bp->dva[0].offset >> CAIRN_SECTOR_SHIFT);
    if (dmu_map_get(&w->seen, key)) return 1;
    dmu_map_put(&w->seen, key, (void *)1);
    return w->visit(spa, bp, bm, w->arg);
}

static int visit_nothing(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa, (void)bp, (void)bm, (void)arg;
    return 0;
}

static int dir_entry_cmp(const void *a, const void *b)
{
    const dir_entry_phys_t *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int dmu_pool_traverse(spa_t *spa, const cairn_blkptr_t *mos_root,
                             const spa_bookmark_t *from, spa_bp_visitor_t visit, void *arg)
{
    spa_bookmark_t start = from ? *from : (spa_bookmark_t){0, 0, 0, 0};
    /* The object sets, from the directory (read, not visited). */
    dir_list_t dirs = {0};
    trav_t quiet = {.spa = spa, .visit = visit_nothing, .only_object = DIR_OBJECT, .dirs = &dirs};
    traverse_objset_from(&quiet, mos_root, true);
    if (dirs.n) qsort(dirs.v, dirs.n, sizeof *dirs.v, dir_entry_cmp);

    dedup_walk_t w = {.visit = visit, .arg = arg};
    dmu_map_init(&w.seen);
    int r = 0;
    if (start.objset == 0) {
        trav_t t = {.spa = spa, .visit = dedup_visitor, .arg = &w, .from_object = start.object};
        r = traverse_objset_from(&t, mos_root, true);
    }
    for (size_t i = 0; i < dirs.n && r >= 0; i++) {
        if (dirs.v[i].id < start.objset) continue;
        trav_t t = {.spa = spa, .visit = dedup_visitor, .arg = &w, .objset = dirs.v[i].id,
                    .from_object = dirs.v[i].id == start.objset ? start.object : 0};
        r = traverse_objset_from(&t, &dirs.v[i].root, false);
    }
    dmu_map_fini(&w.seen);
    free(dirs.v);
    return r;
}

static const spa_upper_ops_t dmu_upper_ops = {
    .create = dmu_pool_create,
    .open = dmu_pool_open,
    .sync = dmu_pool_sync,
    .traverse = dmu_pool_traverse,
    .close = dmu_pool_close,
};

static pthread_once_t dmu_init_once = PTHREAD_ONCE_INIT;
/*
 * Record buffers (128 KiB .. 1 MiB) are allocated and freed at the rate data
 * flows. glibc serves such sizes with a fresh mmap each time and trims freed
 * heap tops, so every buffer costs page faults and kernel zeroing of every
 * page: in the write benchmark the largest single cost. Keeping them in the
 * heap makes a freed record buffer reusable at once. The engine is the reason
 * its processes exist, so it sets this process-wide.
 */
static void dmu_tune_malloc(void)
{
    mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 512 * 1024 * 1024);
}

static void dmu_register(void)
{
    dmu_tune_malloc();
    spa_register_upper(&dmu_upper_ops);
}
void dmu_init(void) { pthread_once(&dmu_init_once, dmu_register); }

/* ---------------- object sets: public API ---------------- */

static bool name_ok(const char *name)
{
    size_t l = name ? strlen(name) : 0;
    return l > 0 && l <= DMU_OBJSET_NAME_MAX;
}

/*
 * Adds object set `name` to the MOS directory in txg (dp->lock held): the first
 * entry slot neither in use nor held by a destroy still syncing, written through
 * dir, and the in-memory entry. root is the initial root (NULL: empty).
 */
static int dir_add_locked(dmu_pool_t *dp, dnode_t *dir, uint64_t txg, const char *name,
                          const cairn_blkptr_t *root, bool sync_ctx, uint64_t *id_out)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    if (dir_find(dp, name, NULL)) return -EEXIST;
    uint64_t slot = 0;
    for (;; slot++) {
        bool busy = false;
        for (size_t i = 0; i < dp->nents && !busy; i++) busy = dp->ents[i]->slot == slot;
        for (size_t i = 0; i < dp->ndead && !busy; i++) busy = dp->dead[i]->dir_slot == slot;
        if (!busy) break;
    }
    dir_entry_phys_t e;
    memset(&e, 0, sizeof(e));
    e.id = dp->next_id;
    e.flags = DIR_ENTRY_USED;
    e.creation_txg = txg;
    cairn_strlcpy(e.name, name, sizeof(e.name));
    if (root) e.root = *root;
    int err = dnode_write_impl(dir, txg, slot * DIR_ENTRY_SIZE, DIR_ENTRY_SIZE, &e, sync_ctx);
    if (err) return err;
    dir_ent_t *de = cairn_zalloc(sizeof(*de));
    de->id = dp->next_id++;
    de->slot = slot;
    cairn_strlcpy(de->name, name, sizeof(de->name));
    de->creation_txg = txg;
    if (root) de->root = *root;
    if (dp->nents == dp->capents) {
        dp->capents = dp->capents ? dp->capents * 2 : 8;
        dp->ents = cairn_realloc(dp->ents, dp->capents * sizeof(*dp->ents));
    }
    dp->ents[dp->nents++] = de;
    if (slot >= dp->nslots) dp->nslots = slot + 1;
    if (id_out) *id_out = de->id;
    return 0;
}

/* The start of a change to the directory entry `name` in an open txg: the
 * pool's DMU with dp->lock held and *txg held, or NULL and *err. */
static dmu_pool_t *named_change_begin(spa_t *spa, const char *name, uint64_t *txg, int *err)
{
    dmu_pool_t *dp = dmu_pool(spa);
    *err = !dp ? -ENXIO : !name_ok(name) ? -EINVAL : spa_readonly(spa) ? -EROFS : 0;
    if (*err) return NULL;
    *txg = spa_tx_hold(spa);
    pthread_mutex_lock(&dp->lock);
    return dp;
}

static void named_change_end(dmu_pool_t *dp, uint64_t txg)
{
    pthread_mutex_unlock(&dp->lock);
    spa_tx_rele(dp->spa, txg);
}

int dmu_objset_create(spa_t *spa, const char *name, uint64_t *id_out)
{
    uint64_t txg;
    int err;
    dmu_pool_t *dp = named_change_begin(spa, name, &txg, &err);
    if (!dp) return err;
    dnode_t *dir = dir_dnode(dp, txg);
    err = dir ? dir_add_locked(dp, dir, txg, name, NULL, false, id_out) : -EIO;
    named_change_end(dp, txg);
    return err;
}

static objset_t *ent_objset(dmu_pool_t *dp, dir_ent_t *de, int *err)
{
    *err = 0;
    if (!de->os) {
        de->os = objset_alloc(dp, de->id, &de->root, err);
        if (de->os) {
            de->os->dir_slot = de->slot;
            if (!de->os->creation_txg) de->os->creation_txg = de->creation_txg;
        }
    }
    return de->os;
}

/* Both destroy paths, under dp->lock: the directory entry goes in txg (written
 * from open or syncing context), the object set joins the dead list, whose
 * blocks born after keep_upto_txg the sync frees. */
static int destroy_locked(dmu_pool_t *dp, const char *name, uint64_t txg, bool sync_ctx,
                          uint64_t keep_upto_txg)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    size_t idx;
    dir_ent_t *de = dir_find(dp, name, &idx);
    if (!de) return -ENOENT;
    if (de->os && de->os->refcount > 0) return -EBUSY;
    int err = 0;
    objset_t *os = ent_objset(dp, de, &err);
    dnode_t *dir = sync_ctx ? dnode_hold(dp->mos, DIR_OBJECT, false) : dir_dnode(dp, 0);
    if (!os || !dir) return err ? err : -EIO;
    dir_entry_phys_t e;
    memset(&e, 0, sizeof(e));
    err = dnode_write_impl(dir, txg, de->slot * DIR_ENTRY_SIZE, DIR_ENTRY_SIZE, &e, sync_ctx);
    if (err) return err;
    os->destroy_txg = txg;
    os->keep_upto_txg = keep_upto_txg;
    /* An unreplayed intent log dies with its object set: ids are reused (rollback
     * recreates the same name), and a new object set must never replay old records. */
    spa_log_header_t lh;
    spa_log_header_get(dp->spa, os->id, &lh);
    if (lh.chain_guid) spa_log_header_set(dp->spa, os->id, &(spa_log_header_t){0}, txg);
    memset(&os->hooks, 0, sizeof(os->hooks));
    if (dp->ndead == dp->capdead) {
        dp->capdead = dp->capdead ? dp->capdead * 2 : 4;
        dp->dead = cairn_realloc(dp->dead, dp->capdead * sizeof(*dp->dead));
    }
    dp->dead[dp->ndead++] = os;
    dp->ents[idx] = dp->ents[--dp->nents];
    free(de);
    return 0;
}

int dmu_objset_destroy(spa_t *spa, const char *name)
{
    uint64_t txg;
    int err;
    dmu_pool_t *dp = named_change_begin(spa, name, &txg, &err);
    if (!dp) return err;
    err = destroy_locked(dp, name, txg, false, 0);
    named_change_end(dp, txg);
    return err;
}

int dmu_objset_open(spa_t *spa, const char *name, objset_t **out)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return -ENXIO;
    if (!name) return -EINVAL;
    pthread_mutex_lock(&dp->lock);
    int err = 0;
    dir_ent_t *de = dir_find(dp, name, NULL);
    objset_t *os = de ? ent_objset(dp, de, &err) : NULL;
    if (!de) err = -ENOENT;
    if (os) os->refcount++;
    pthread_mutex_unlock(&dp->lock);
    *out = os;
    return err;
}

void dmu_objset_close(objset_t *os)
{
    if (!os) return;
    pthread_mutex_lock(&os->dp->lock);
    os->refcount--;
    pthread_mutex_unlock(&os->dp->lock);
}

typedef struct name_id {
    char name[DIR_NAME_LEN];
    uint64_t id;
} name_id_t;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const name_id_t *)a)->name, ((const name_id_t *)b)->name);
}

int dmu_objset_list(spa_t *spa, void (*fn)(const char *name, uint64_t id, void *arg), void *arg)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return -ENXIO;
    pthread_mutex_lock(&dp->lock);
    size_t n = dp->nents;
    name_id_t *v = cairn_zalloc((n + 1) * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        memcpy(v[i].name, dp->ents[i]->name, DIR_NAME_LEN);
        v[i].id = dp->ents[i]->id;
    }
    pthread_mutex_unlock(&dp->lock);
    qsort(v, n, sizeof(*v), cmp_name);
    for (size_t i = 0; i < n; i++) fn(v[i].name, v[i].id, arg);
    free(v);
    return 0;
}

spa_t *dmu_objset_spa(objset_t *os) { return os->dp->spa; }

/* ---------------- transactions ---------------- */

/*
 * A transaction waits on the write throttle when it begins, but joins a txg
 * only at its first change. Callers lock the objects they change before
 * changing them, so the txg is picked under those locks: a change to an
 * object can then never land in an older txg than a change made to it before
 * (which would write the newer state of a ZAP block or a file's attributes
 * into the older txg, and a crash between the two would expose it). The
 * throttle wait, which can last a txg sync, happens before any lock is taken.
 */
dmu_tx_t *dmu_tx_begin(objset_t *os)
{
    dmu_tx_t *tx = cairn_zalloc(sizeof(*tx));
    tx->os = os;
    spa_t *spa = os->dp->spa;
    tx->readonly = spa_readonly(spa) || os->readonly;
    if (!tx->readonly && spa_tx_throttle(spa)) tx->suspended = true;
    return tx;
}

uint64_t dmu_tx_assign(dmu_tx_t *tx)
{
    if (tx->suspended) return 0;
    if (!tx->assigned) {
        tx->assigned = true;
        tx->txg = tx->readonly ? 0 : spa_tx_hold_nowait(tx->os->dp->spa);
    }
    return tx->txg;
}

bool dmu_tx_readonly(const dmu_tx_t *tx) { return tx->readonly; }
bool dmu_tx_suspended(const dmu_tx_t *tx) { return tx->suspended; }

dmu_tx_t *dmu_tx_create_sync(objset_t *os, uint64_t txg)
{
    dmu_tx_t *tx = cairn_zalloc(sizeof(*tx));
    tx->os = os;
    tx->txg = txg;
    tx->assigned = true;
    tx->sync_ctx = true;
    return tx;
}

uint64_t dmu_tx_txg(dmu_tx_t *tx) { return dmu_tx_assign(tx); }

void dmu_tx_commit(dmu_tx_t *tx)
{
    if (!tx) return;
    if (tx->txg && !tx->sync_ctx) spa_tx_rele(tx->os->dp->spa, tx->txg);
    free(tx);
}

/* ---------------- extensions for the DSL ---------------- */

void dmu_objset_set_hooks(objset_t *os, const dmu_objset_hooks_t *hooks, void *arg)
{
    pthread_mutex_lock(&os->dp->lock);
    if (hooks) os->hooks = *hooks;
    else memset(&os->hooks, 0, sizeof(os->hooks));
    os->hooks_arg = arg;
    pthread_mutex_unlock(&os->dp->lock);
}

void dmu_objset_set_readonly(objset_t *os, bool ro) { os->readonly = ro; }
uint64_t dmu_objset_id(objset_t *os) { return os->id; }

void dmu_objset_root(objset_t *os, cairn_blkptr_t *out)
{
    pthread_mutex_lock(&os->dp->lock);
    *out = os->root_bp;
    pthread_mutex_unlock(&os->dp->lock);
}

objset_t *dmu_pool_mos(spa_t *spa)
{
    dmu_pool_t *dp = dmu_pool(spa);
    return dp ? dp->mos : NULL;
}

/* The directory object's bonus: u64 words, [0] the layer above's root object
 * (dmu_pool_root_obj), [1] the error log's object (0: none yet). */
#define DIR_BONUS_ROOT 0
#define DIR_BONUS_ERRLOG 1
#define DIR_BONUS_WORDS 2

static uint64_t dir_bonus_get(dmu_pool_t *dp, unsigned word)
{
    dnode_t *dn = dnode_hold(dp->mos, DIR_OBJECT, false);
    if (!dn) return 0;
    uint64_t v = 0;
    dn_wlock(dn);
    if (dn->cur.type == DNODE_TYPE_DIRECTORY && dn->cur.bonuslen >= (word + 1) * sizeof(v))
        memcpy(&v, dn->cur.bonus + word * sizeof(v), sizeof(v));
    dn_unlock(dn);
    return v;
}

static int dir_bonus_set(dmu_pool_t *dp, uint64_t txg, unsigned word, uint64_t v)
{
    dnode_t *dn = dir_dnode(dp, txg);
    if (!dn) return -EIO;
    uint64_t words[DIR_BONUS_WORDS] = {0};
    dn_wlock(dn);
    if (dn->cur.type == DNODE_TYPE_DIRECTORY)
        memcpy(words, dn->cur.bonus, CAIRN_MIN((size_t)dn->cur.bonuslen, sizeof(words)));
    words[word] = v;
    /* A pool without an error log keeps the one-word bonus it always had. */
    uint32_t len = words[DIR_BONUS_ERRLOG] ? sizeof(words) : sizeof(words[0]);
    dnode_set_bonus_locked(dn, txg, words, len);
    dn_unlock(dn);
    return 0;
}

uint64_t dmu_pool_root_obj(spa_t *spa)
{
    dmu_pool_t *dp = dmu_pool(spa);
    return dp ? dir_bonus_get(dp, DIR_BONUS_ROOT) : 0;
}

int dmu_pool_set_root_obj(spa_t *spa, uint64_t obj, dmu_tx_t *tx)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return -ENXIO;
    if (!tx || !dmu_tx_assign(tx)) return -EROFS;
    return dir_bonus_set(dp, tx->txg, DIR_BONUS_ROOT, obj);
}

/* ---------------- the error log (spa_errlog.c keeps the lists) ---------------- */

static const dmu_object_props_t errlog_props = {
    .recordsize = 128 * 1024, .compress = CAIRN_COMPRESS_LZ4,
    .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 3};

/* Syncing context: stores the pool's error log in its MOS object when it
 * changed (an object of its own, created at the first error). */
static int errlog_sync(dmu_pool_t *dp, uint64_t txg)
{
    void *buf = NULL;
    size_t len = 0;
    if (!spa_errlog_sync_take(dp->spa, &buf, &len)) return 0;
    uint64_t obj = dir_bonus_get(dp, DIR_BONUS_ERRLOG);
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err = 0;
    if (!obj) {
        err = dmu_object_alloc(dp->mos, &errlog_props, &obj, tx);
        if (!err) err = dir_bonus_set(dp, txg, DIR_BONUS_ERRLOG, obj);
    }
    /* The header carries the count: bytes past it from a longer list are ignored. */
    if (!err) err = dmu_write(dp->mos, obj, 0, len, buf, tx);
    dmu_tx_commit(tx);
    free(buf);
    if (err) log_error("dmu", "pool %s: cannot store the error log: %s", spa_name(dp->spa),
                       strerror(-err));
    return err;
}

static void errlog_load(dmu_pool_t *dp)
{
    uint64_t obj = dir_bonus_get(dp, DIR_BONUS_ERRLOG);
    dmu_object_info_t info;
    if (!obj || dmu_object_info(dp->mos, obj, &info) || info.max_offset == 0 ||
        info.max_offset > ((uint64_t)SPA_ERRLOG_MAX + 1) * 32)
        return;
    void *buf = cairn_zalloc(info.max_offset);
    int err = dmu_read(dp->mos, obj, 0, info.max_offset, buf);
    if (!err) err = spa_errlog_load(dp->spa, buf, info.max_offset);
    if (err) log_error("dmu", "pool %s: cannot load the error log: %s", spa_name(dp->spa),
                       strerror(-err));
    free(buf);
}

void dmu_objset_set_label(objset_t *os, const char *name)
{
    pthread_mutex_lock(&os->label_lock);
    cairn_strlcpy(os->label, name, sizeof os->label);
    pthread_mutex_unlock(&os->label_lock);
}

void dmu_objset_label(objset_t *os, char *buf, size_t len)
{
    pthread_mutex_lock(&os->label_lock);
    if (os->label[0]) cairn_strlcpy(buf, os->label, len);
    else if (os == os->dp->mos) cairn_strlcpy(buf, "<metadata>", len);
    else snprintf(buf, len, "<objset %" PRIu64 ">", os->id);
    pthread_mutex_unlock(&os->label_lock);
}

void dmu_read_error(objset_t *os, uint64_t obj, unsigned level, uint64_t blkid, uint32_t recsize,
                    int err)
{
    /* Not a bad block: a refusal of the memory-only mode, an object freed meanwhile. */
    if (err == -EWOULDBLOCK || err == -ENOENT || err == -ENOMEM || err == -EINTR) return;
    spa_t *spa = os->dp->spa;
    spa_bookmark_t bm = {os->id, obj, (int64_t)level, blkid};
    if (!spa_errlog_add(spa, &bm)) return; /* once per block, not at every retry */
    char name[DIR_NAME_LEN];
    dmu_objset_label(os, name, sizeof name);
    unsigned shift = level * DN_EPB_SHIFT;
    uint64_t off = shift < 64 && blkid <= (UINT64_MAX >> shift) / (recsize ? recsize : 1)
                       ? (blkid << shift) * recsize
                       : UINT64_MAX;
    char what[48] = "";
    if (level) snprintf(what, sizeof what, " (indirect block, level %u)", level);
    log_error("dmu", "pool %s: permanent error: dataset %s object %" PRIu64 " offset %" PRIu64
              "%s: %s", spa_name(spa), name, obj, off, what,
              err == -ECKSUM ? "no copy verifies" : strerror(-err));
}

int dmu_objset_create_sync(spa_t *spa, uint64_t txg, const char *name,
                           const cairn_blkptr_t *root, uint64_t *id_out)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return -ENXIO;
    if (!name_ok(name)) return -EINVAL;
    pthread_mutex_lock(&dp->lock);
    dnode_t *dir = dnode_hold(dp->mos, DIR_OBJECT, true);
    int err = dir ? dir_add_locked(dp, dir, txg, name, root, true, id_out) : -EIO;
    pthread_mutex_unlock(&dp->lock);
    return err;
}

int dmu_objset_destroy_sync(spa_t *spa, uint64_t txg, const char *name, uint64_t keep_upto_txg)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return -ENXIO;
    if (!name_ok(name)) return -EINVAL;
    pthread_mutex_lock(&dp->lock);
    int err = destroy_locked(dp, name, txg, true, keep_upto_txg);
    pthread_mutex_unlock(&dp->lock);
    return err;
}

int dmu_objset_sync(objset_t *os) { return spa_txg_wait_synced(os->dp->spa, 0); }

int dmu_traverse_pool(spa_t *spa, spa_bp_visitor_t visit, void *arg)
{
    return dmu_traverse_pool_from(spa, NULL, visit, arg);
}

int dmu_traverse_pool_from(spa_t *spa, const spa_bookmark_t *from, spa_bp_visitor_t visit,
                           void *arg)
{
    dmu_pool_t *dp = dmu_pool(spa);
    if (!dp) return -ENXIO;
    /* The sync thread replaces the root; take a stable copy. */
    spa_txg_wait_synced(spa, 0);
    pthread_mutex_lock(&dp->lock);
    cairn_blkptr_t root = dp->mos->root_bp;
    pthread_mutex_unlock(&dp->lock);
    return dmu_pool_traverse(spa, &root, from, visit, arg);
}

/* ---------------- space the live txgs will allocate ---------------- */

void objset_space_pending_add(objset_t *os, uint64_t txg, uint64_t bytes)
{
    if (!bytes) return;
    pthread_mutex_lock(&os->space_lock);
    /* A slot is reused four txgs later, long after its txg synced. */
    if (os->space_pending[txg & 3].txg != txg) {
        os->space_pending[txg & 3].txg = txg;
        os->space_pending[txg & 3].bytes = 0;
    }
    os->space_pending[txg & 3].bytes += bytes;
    pthread_mutex_unlock(&os->space_lock);
}

uint64_t dmu_objset_space_pending(objset_t *os)
{
    uint64_t synced = spa_last_synced_txg(os->dp->spa), sum = 0;
    pthread_mutex_lock(&os->space_lock);
    for (int i = 0; i < 4; i++)
        if (os->space_pending[i].txg > synced) sum += os->space_pending[i].bytes;
    pthread_mutex_unlock(&os->space_lock);
    return sum;
}
