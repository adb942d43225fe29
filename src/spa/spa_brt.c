/*
 * The block reference table (BRT): blocks referenced more than once.
 *
 * WHY. A clone of a file range (NFSv4.2 CLONE and COPY, src/dmu dmu_clone_range)
 * points the destination at the source's blocks instead of writing them
 * again. Until then every block had exactly one owner, and every free path
 * returned the space at once. With clones, a free must first ask whether
 * somebody else still references the block.
 *
 * WHAT. One entry per shared block, keyed by its first DVA (top-level vdev,
 * offset): `refs` counts the references beyond the first one, `asize` is the
 * block's allocated size with all its copies (for bcloneused/bclonesaved). A
 * block with no entry has one reference, as before. spa_block_clone_ref()
 * adds one; spa_block_free() calls spa_brt_release() first: an entry present
 * means a reference goes away and the space stays (the pool counts the block
 * once), the entry disappearing at zero; no entry means the last reference
 * goes and the block is freed as always. Gang blocks and holes are never
 * entered (the caller copies instead): a gang pointer's DVAs name a header,
 * and its fragments have their own frees.
 *
 * TXG CONSISTENCY. The table in memory is the live one (what open context
 * must see to decide a free), but what a sync writes must be the table as of
 * that txg, like the space maps: a decrement made for open txg N+1 must not
 * reach the disk with txg N, or a crash at N would leave a table with one
 * reference too few and a later free would lose live data. So each change is
 * also queued with its txg; spa_brt_sync(N) applies the queued changes of
 * txgs <= N to each entry's `synced` count and writes the entries whose synced
 * count is nonzero. A crash leaves the table of the last synced uberblock.
 *
 * ON DISK (docs/ondisk-format.md): the uberblock's brt_root (version 2
 * uberblocks) names a root block (CAIRN_BT_BRT) holding a header and the
 * pointers of chunk blocks (CAIRN_BT_BRT too) of up to BRT_CHUNK_ENTRIES
 * sorted entries. A sync that changed the table rewrites it whole and frees
 * the old blocks: simple, and cheap while the table is small (tens of
 * thousands of entries); a very large table would want a log of changes.
 * The first clone in a pool marks it (label config and uberblock version 2)
 * so that an older build refuses it instead of freeing shared blocks.
 */
#include "spa_impl.h"

#include <cairn/log.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BRT_MAGIC 0x5452425f4e524143ULL /* "CARN_BRT" */
#define BRT_PHYS_VERSION 1
#define BRT_CHUNK_ENTRIES 4096u   /* 128 KiB of entries a chunk */
#define BRT_MAX_CHUNKS 8000u      /* root block under 1 MiB */
#define BRT_HASH_MIN 1024u

typedef struct brt_entry_phys {
    uint32_t vdev;
    uint32_t reserved;
    uint64_t offset;
    uint64_t refs;  /* references beyond the first */
    uint64_t asize; /* allocated bytes of the block, all copies */
} brt_entry_phys_t;
_Static_assert(sizeof(brt_entry_phys_t) == 32, "BRT entry size");

typedef struct brt_root_phys {
    uint64_t magic;
    uint64_t version;
    uint64_t nentries;
    uint64_t nchunks;
    uint64_t reserved[4];
    /* nchunks block pointers follow */
} brt_root_phys_t;
_Static_assert(sizeof(brt_root_phys_t) == 64, "BRT root header size");

typedef struct brt_entry {
    struct brt_entry *next;
    uint32_t vdev;
    uint64_t offset;
    uint64_t asize;
    uint64_t live;     /* refs including changes of txgs not synced yet */
    uint64_t synced;   /* refs as of the last synced txg */
    uint64_t queued;   /* changes of this entry still queued */
} brt_entry_t;

typedef struct brt_change {
    brt_entry_t *e;
    uint64_t txg;
    int64_t delta;
} brt_change_t;

typedef struct spa_brt {
    pthread_mutex_t lock;
    brt_entry_t **buckets;
    size_t nbuckets, nentries;
    brt_change_t *changes;
    size_t nchanges, capchanges;
    _Atomic size_t live_entries; /* lock-free "table empty" for the free path */
    uint64_t used, saved;        /* live: sum of asize, sum of refs * asize */
    cairn_blkptr_t root;         /* as of the last sync */
    cairn_blkptr_t *chunks;
    size_t nchunks;
} spa_brt_t;

static spa_brt_t *brt_of(spa_t *spa) { return spa->brt; }

static size_t bucket_of(const spa_brt_t *b, uint32_t vdev, uint64_t offset)
{
    uint64_t h = (offset >> 9) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)vdev << 56);
    return (size_t)(h ^ (h >> 29)) & (b->nbuckets - 1);
}

static brt_entry_t *lookup(spa_brt_t *b, uint32_t vdev, uint64_t offset)
{
    for (brt_entry_t *e = b->buckets[bucket_of(b, vdev, offset)]; e; e = e->next)
        if (e->vdev == vdev && e->offset == offset) return e;
    return NULL;
}

static void grow(spa_brt_t *b)
{
    size_t n = b->nbuckets * 2;
    brt_entry_t **old = b->buckets;
    size_t oldn = b->nbuckets;
    b->buckets = cairn_zalloc(n * sizeof *b->buckets);
    b->nbuckets = n;
    for (size_t i = 0; i < oldn; i++)
        for (brt_entry_t *e = old[i], *next; e; e = next) {
            next = e->next;
            size_t k = bucket_of(b, e->vdev, e->offset);
            e->next = b->buckets[k];
            b->buckets[k] = e;
        }
    free(old);
}

static brt_entry_t *insert(spa_brt_t *b, uint32_t vdev, uint64_t offset, uint64_t asize)
{
    if (b->nentries >= b->nbuckets) grow(b);
    brt_entry_t *e = cairn_zalloc(sizeof *e);
    e->vdev = vdev;
    e->offset = offset;
    e->asize = asize;
    size_t k = bucket_of(b, vdev, offset);
    e->next = b->buckets[k];
    b->buckets[k] = e;
    b->nentries++;
    return e;
}

static void remove_entry(spa_brt_t *b, brt_entry_t *e)
{
    brt_entry_t **pp = &b->buckets[bucket_of(b, e->vdev, e->offset)];
    while (*pp != e) pp = &(*pp)->next;
    *pp = e->next;
    b->nentries--;
    free(e);
}

static void queue_change(spa_brt_t *b, brt_entry_t *e, uint64_t txg, int64_t delta)
{
    if (b->nchanges == b->capchanges) {
        b->capchanges = b->capchanges ? b->capchanges * 2 : 256;
        b->changes = cairn_realloc(b->changes, b->capchanges * sizeof *b->changes);
    }
    b->changes[b->nchanges++] = (brt_change_t){.e = e, .txg = txg, .delta = delta};
    e->queued++;
}

void spa_brt_init(spa_t *spa)
{
    spa_brt_t *b = cairn_zalloc(sizeof *b);
    pthread_mutex_init(&b->lock, NULL);
    b->nbuckets = BRT_HASH_MIN;
    b->buckets = cairn_zalloc(b->nbuckets * sizeof *b->buckets);
    spa->brt = b;
}

void spa_brt_fini(spa_t *spa)
{
    spa_brt_t *b = brt_of(spa);
    if (!b) return;
    for (size_t i = 0; i < b->nbuckets; i++)
        for (brt_entry_t *e = b->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(b->buckets);
    free(b->changes);
    free(b->chunks);
    pthread_mutex_destroy(&b->lock);
    free(b);
    spa->brt = NULL;
}

bool spa_block_cloneable(const cairn_blkptr_t *bp)
{
    return !cairn_bp_is_hole(bp) && !cairn_bp_is_gang(bp) && bp->birth_txg != 0 &&
           bp->dva[0].asize != 0;
}

/* The pool's marker for builds that know the table (label config and
 * uberblock version 2): written before the first reference is, so no build
 * that would free a shared block can import a pool that has one. */
static int brt_feature_activate(spa_t *spa)
{
    pthread_mutex_lock(&spa->config_lock);
    bool had = spa->brt_feature;
    spa->brt_feature = true;
    int e = had ? 0 : spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) spa->brt_feature = false;
    pthread_mutex_unlock(&spa->config_lock);
    return e;
}

int spa_block_clone_ref(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    if (spa->readonly) return -EROFS;
    if (!spa_block_cloneable(bp)) return -EOPNOTSUPP;
    if (bp->dva[0].vdev >= spa->ntop || !spa->ms[bp->dva[0].vdev]) return -EINVAL;
    if (!spa->brt_feature) {
        int e = brt_feature_activate(spa);
        if (e) return e;
    }
    spa_brt_t *b = brt_of(spa);
    pthread_mutex_lock(&b->lock);
    brt_entry_t *e = lookup(b, bp->dva[0].vdev, bp->dva[0].offset);
    if (!e) e = insert(b, bp->dva[0].vdev, bp->dva[0].offset, cairn_bp_asize(bp));
    if (e->live == 0) {
        b->used += e->asize;
        atomic_fetch_add(&b->live_entries, 1);
    }
    e->live++;
    b->saved += e->asize;
    queue_change(b, e, txg, +1);
    pthread_mutex_unlock(&b->lock);
    return 0;
}

bool spa_brt_release(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    spa_brt_t *b = brt_of(spa);
    if (!b || atomic_load(&b->live_entries) == 0 || !spa_block_cloneable(bp)) return false;
    pthread_mutex_lock(&b->lock);
    brt_entry_t *e = lookup(b, bp->dva[0].vdev, bp->dva[0].offset);
    bool shared = e && e->live > 0;
    if (shared) {
        e->live--;
        b->saved -= e->asize;
        if (e->live == 0) {
            b->used -= e->asize;
            atomic_fetch_sub(&b->live_entries, 1);
        }
        queue_change(b, e, txg, -1);
    }
    pthread_mutex_unlock(&b->lock);
    return shared;
}

uint64_t spa_brt_refs(spa_t *spa, const cairn_blkptr_t *bp)
{
    spa_brt_t *b = brt_of(spa);
    if (!b || atomic_load(&b->live_entries) == 0 || cairn_bp_is_hole(bp)) return 0;
    pthread_mutex_lock(&b->lock);
    brt_entry_t *e = lookup(b, bp->dva[0].vdev, bp->dva[0].offset);
    uint64_t refs = e ? e->live : 0;
    pthread_mutex_unlock(&b->lock);
    return refs;
}

void spa_brt_stats(spa_t *spa, spa_brt_stats_t *st)
{
    memset(st, 0, sizeof *st);
    spa_brt_t *b = brt_of(spa);
    if (!b) return;
    pthread_mutex_lock(&b->lock);
    st->used = b->used;
    st->saved = b->saved;
    st->entries = atomic_load(&b->live_entries);
    pthread_mutex_unlock(&b->lock);
}

static int entry_cmp(const void *x, const void *y)
{
    const brt_entry_phys_t *a = x, *b = y;
    if (a->vdev != b->vdev) return a->vdev < b->vdev ? -1 : 1;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static const spa_write_props_t brt_props = {.type = CAIRN_BT_BRT,
                                            .checksum = CAIRN_CHECKSUM_FLETCHER4,
                                            .compress = CAIRN_COMPRESS_LZ4,
                                            .copies = 2};

int spa_brt_sync(spa_t *spa, uint64_t txg, spa_uberblock_phys_t *ub)
{
    spa_brt_t *b = brt_of(spa);
    pthread_mutex_lock(&b->lock);
    bool changed = false;
    size_t keep = 0;
    for (size_t i = 0; i < b->nchanges; i++) {
        brt_change_t *c = &b->changes[i];
        if (c->txg > txg) {
            b->changes[keep++] = *c;
            continue;
        }
        changed = true;
        c->e->queued--;
        if (c->delta < 0 && c->e->synced == 0) {
            /* A reference of txg <= T went while the only extra one was
             * taken for a later txg: the callers keep a clone's source
             * unchanged, so this is a bug. Kept as a leak (the count errs
             * high, the check reports it), never as a count too low. */
            log_error("spa", "pool %s: block reference table: release of vdev %u offset %llu "
                      "in txg %llu below zero", spa->name, c->e->vdev,
                      (unsigned long long)c->e->offset, (unsigned long long)c->txg);
            continue;
        }
        c->e->synced = (uint64_t)((int64_t)c->e->synced + c->delta);
    }
    b->nchanges = keep;
    if (!changed) {
        pthread_mutex_unlock(&b->lock);
        ub->brt_root = b->root;
        return 0;
    }
    brt_entry_phys_t *ents = cairn_zalloc((b->nentries + 1) * sizeof *ents);
    size_t n = 0;
    for (size_t i = 0; i < b->nbuckets; i++)
        for (brt_entry_t *e = b->buckets[i], *next; e; e = next) {
            next = e->next;
            if (e->synced)
                ents[n++] = (brt_entry_phys_t){.vdev = e->vdev, .offset = e->offset,
                                               .refs = e->synced, .asize = e->asize};
            else if (!e->live && !e->queued)
                remove_entry(b, e);
        }
    cairn_blkptr_t old_root = b->root, *old_chunks = b->chunks;
    size_t old_n = b->nchunks;
    b->chunks = NULL;
    b->nchunks = 0;
    pthread_mutex_unlock(&b->lock);

    qsort(ents, n, sizeof *ents, entry_cmp);
    size_t nchunks = (n + BRT_CHUNK_ENTRIES - 1) / BRT_CHUNK_ENTRIES;
    int err = nchunks > BRT_MAX_CHUNKS ? -ENOSPC : 0;
    if (err) log_error("spa", "pool %s: block reference table too large (%zu entries)", spa->name, n);
    cairn_blkptr_t *chunks = cairn_zalloc((nchunks + 1) * sizeof *chunks);
    cairn_blkptr_t root = {0};
    for (size_t c = 0; c < nchunks && !err; c++) {
        size_t k = CAIRN_MIN((size_t)BRT_CHUNK_ENTRIES, n - c * BRT_CHUNK_ENTRIES);
        err = spa_block_write(spa, txg, &ents[c * BRT_CHUNK_ENTRIES],
                              (uint32_t)(k * sizeof *ents), &brt_props, &chunks[c]);
    }
    if (!err && n) {
        size_t len = CAIRN_P2ROUNDUP(sizeof(brt_root_phys_t) + nchunks * sizeof(cairn_blkptr_t),
                                     (size_t)512);
        uint8_t *buf = cairn_zalloc(len);
        brt_root_phys_t *h = (brt_root_phys_t *)buf;
        *h = (brt_root_phys_t){.magic = BRT_MAGIC, .version = BRT_PHYS_VERSION, .nentries = n,
                               .nchunks = nchunks};
        memcpy(buf + sizeof *h, chunks, nchunks * sizeof *chunks);
        err = spa_block_write(spa, txg, buf, (uint32_t)len, &brt_props, &root);
        free(buf);
    }
    free(ents);
    if (err) {
        /* The sync fails and the pool suspends; keep naming the old table. */
        free(chunks);
        pthread_mutex_lock(&b->lock);
        b->chunks = old_chunks;
        b->nchunks = old_n;
        pthread_mutex_unlock(&b->lock);
        return err;
    }
    /* The old table's blocks are never in the table themselves: real frees. */
    if (!cairn_bp_is_hole(&old_root)) spa_block_free(spa, txg, &old_root);
    for (size_t i = 0; i < old_n; i++) spa_block_free(spa, txg, &old_chunks[i]);
    free(old_chunks);
    pthread_mutex_lock(&b->lock);
    b->root = root;
    b->chunks = chunks;
    b->nchunks = nchunks;
    pthread_mutex_unlock(&b->lock);
    ub->brt_root = root;
    return 0;
}

int spa_brt_load(spa_t *spa)
{
    spa_brt_t *b = brt_of(spa);
    const cairn_blkptr_t *rbp = &spa->ub.brt_root;
    if (spa->ub.version < SPA_VERSION_BRT || cairn_bp_is_hole(rbp)) return 0;
    if (rbp->type != CAIRN_BT_BRT || rbp->lsize < sizeof(brt_root_phys_t)) return -EIO;
    uint8_t *buf = cairn_zalloc(rbp->lsize);
    int err = spa_block_read(spa, rbp, buf);
    brt_root_phys_t *h = (brt_root_phys_t *)buf;
    if (!err && (h->magic != BRT_MAGIC || h->version != BRT_PHYS_VERSION ||
                 h->nchunks > BRT_MAX_CHUNKS ||
                 sizeof *h + h->nchunks * sizeof(cairn_blkptr_t) > rbp->lsize))
        err = -EIO;
    if (err) {
        free(buf);
        return err;
    }
    size_t nchunks = h->nchunks;
    cairn_blkptr_t *chunks = cairn_zalloc((nchunks + 1) * sizeof *chunks);
    memcpy(chunks, buf + sizeof *h, nchunks * sizeof *chunks);
    uint64_t want = h->nentries, got = 0;
    free(buf);
    pthread_mutex_lock(&b->lock);
    for (size_t c = 0; c < nchunks && !err; c++) {
        const cairn_blkptr_t *cbp = &chunks[c];
        if (cbp->type != CAIRN_BT_BRT || cbp->lsize % sizeof(brt_entry_phys_t)) {
            err = -EIO;
            break;
        }
        brt_entry_phys_t *ents = cairn_zalloc(cbp->lsize);
        err = spa_block_read(spa, cbp, ents);
        for (size_t i = 0; !err && i < cbp->lsize / sizeof *ents; i++) {
            if (ents[i].refs == 0 || lookup(b, ents[i].vdev, ents[i].offset)) {
                err = -EIO;
                break;
            }
            brt_entry_t *e = insert(b, ents[i].vdev, ents[i].offset, ents[i].asize);
            e->live = e->synced = ents[i].refs;
            b->used += e->asize;
            b->saved += e->live * e->asize;
            got++;
        }
        free(ents);
    }
    if (!err && got != want) err = -EIO;
    b->root = *rbp;
    b->chunks = chunks;
    b->nchunks = nchunks;
    atomic_store(&b->live_entries, b->nentries);
    pthread_mutex_unlock(&b->lock);
    return err;
}

int spa_brt_visit(spa_t *spa, spa_bp_visitor_t visit, void *arg)
{
    spa_brt_t *b = brt_of(spa);
    pthread_mutex_lock(&b->lock);
    size_t n = b->nchunks;
    cairn_blkptr_t *copy = cairn_zalloc((n + 1) * sizeof *copy);
    copy[0] = b->root;
    if (n) memcpy(copy + 1, b->chunks, n * sizeof *copy);
    pthread_mutex_unlock(&b->lock);
    int err = 0;
    for (size_t i = 0; i <= n && err >= 0; i++)
        if (!cairn_bp_is_hole(&copy[i])) err = visit(spa, &copy[i], NULL, arg);
    free(copy);
    return err < 0 ? err : 0;
}

size_t spa_brt_list(spa_t *spa, spa_brt_ref_t **out)
{
    spa_brt_t *b = brt_of(spa);
    pthread_mutex_lock(&b->lock);
    spa_brt_ref_t *v = cairn_zalloc((b->nentries + 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < b->nbuckets; i++)
        for (brt_entry_t *e = b->buckets[i]; e; e = e->next)
            if (e->live)
                v[n++] = (spa_brt_ref_t){.vdev = e->vdev, .offset = e->offset, .refs = e->live,
                                         .asize = e->asize};
    pthread_mutex_unlock(&b->lock);
    *out = v;
    return n;
}
