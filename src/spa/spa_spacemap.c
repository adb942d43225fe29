/*
 * The space map log: how the allocators' state survives a crash exactly.
 *
 * Each top-level vdev has an in-memory allocator (src/metaslab) that records
 * every allocation and free it makes, stamped with the txg. When txg T syncs,
 * after the upper layer has written (and so allocated and freed) everything
 * of T, the records of T are encoded into one or more space map log blocks
 * (format in src/metaslab/spacemap.c) and written, each block naming the
 * previous one. The uberblock of T points at the newest block, so the log and
 * the tree it describes become durable in the same instant: after a crash the
 * pool comes back with allocators exactly matching the last durable tree.
 *
 * A log block is lsize bytes, uncompressed (its size must be known before its
 * own space is allocated), checksummed with fletcher4 and stored as two
 * copies:
 *
 *     0 .. 256    spa_sm_block_phys_t: magic, txg, flags, prev block pointer
 *   256 .. end    space map records (spacemap_encode)
 *
 * The log's own blocks are allocations of T too: their space is allocated
 * first, then T's records (which now include those allocations) are taken and
 * encoded into them. More blocks are added until everything fits.
 *
 * Condensing: once the chain since the last snapshot is SPA_SM_CONDENSE_BLOCKS
 * long, the next txg writes a snapshot instead (every allocated extent, and
 * deferred frees with their own txg so the defer window survives), frees the
 * old chain, and starts a new chain whose first block has a hole for prev.
 * Import walks back from the uberblock's head to that first block and replays
 * forward.
 */
#include "spa_impl.h"

#include <cairn/spacemap.h>

#include <stdlib.h>
#include <string.h>

#define SPA_SM_MAGIC 0x474f4c4d534e5243ULL /* "CRNSMLOG" */
#define SPA_SM_HEADER 256
#define SPA_SM_MAX_BLOCK (128 * 1024)
#define SPA_SM_CONDENSE_BLOCKS 64
#define SPA_SM_COPIES 2

typedef struct spa_sm_block_phys {
    uint64_t magic;
    uint64_t txg;
    uint64_t flags;          /* SPACEMAP_FLAG_SNAPSHOT on snapshot blocks */
    uint64_t reserved[13];
    cairn_blkptr_t prev;     /* older block of the chain; hole for the first */
} spa_sm_block_phys_t;
_Static_assert(sizeof(spa_sm_block_phys_t) == SPA_SM_HEADER, "log block header");

/* The chain since the last snapshot, oldest first. Guarded by tx.lock for readers. */
typedef struct spa_sm_chain {
    cairn_blkptr_t *bps;
    size_t n, cap;
} spa_sm_chain_t;

static spa_sm_chain_t *chain_of(spa_t *spa)
{
    if (!spa->sm_chain) spa->sm_chain = cairn_zalloc(sizeof(spa_sm_chain_t));
    return spa->sm_chain;
}

static void chain_push(spa_t *spa, const cairn_blkptr_t *bp)
{
    spa_sm_chain_t *c = chain_of(spa);
    pthread_mutex_lock(&spa->tx.lock);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->bps = cairn_realloc(c->bps, c->cap * sizeof *c->bps);
    }
    c->bps[c->n++] = *bp;
    pthread_mutex_unlock(&spa->tx.lock);
}

void spa_metaslabs_init(spa_t *spa)
{
    /* Room for top-level vdevs added later (spa_vdev.c). */
    spa->ms = cairn_zalloc(sizeof(metaslab_t *) * CAIRN_MAX(spa->ntop, (uint32_t)SPA_MAX_TOP));
    for (uint32_t i = 0; i < spa->ntop; i++) {
        vdev_t *top = spa->root->children[i];
        if (top->type == VDEV_TYPE_HOLE) continue; /* no space, no allocator */
        int e = metaslab_create(i, top->asize, top->ashift, SPA_DEFER_TXGS, &spa->ms[i]);
        if (e) log_error("spa", "pool %s: cannot set up allocator for vdev %u: %s", spa->name, i,
                         strerror(-e));
    }
}

void spa_metaslabs_fini(spa_t *spa)
{
    if (spa->ms) {
        for (uint32_t i = 0; i < spa->ntop; i++) metaslab_destroy(spa->ms[i]);
        free(spa->ms);
        spa->ms = NULL;
    }
    spa_sm_chain_t *c = spa->sm_chain;
    if (c) {
        free(c->bps);
        free(c);
        spa->sm_chain = NULL;
    }
}

typedef struct rec_list {
    spacemap_record_t *r;
    size_t n;
} rec_list_t;

static void recs_append(rec_list_t *l, spacemap_record_t *add, size_t n)
{
    if (!n) { free(add); return; }
    l->r = cairn_realloc(l->r, (l->n + n) * sizeof *l->r);
    memcpy(l->r + l->n, add, n * sizeof *add);
    l->n += n;
    free(add);
}

static int take_all(spa_t *spa, uint64_t txg, rec_list_t *l)
{
    for (uint32_t i = 0; i < spa->ntop; i++) {
        spacemap_record_t *r = NULL;
        size_t n = 0;
        if (!spa->ms[i]) continue;
        int e = metaslab_take_records(spa->ms[i], txg, &r, &n);
        if (e) return e;
        recs_append(l, r, n);
    }
    return 0;
}

#define SPA_SM_MIN_BLOCK 4096u

static uint32_t choose_block_size(spa_t *spa, size_t nrecs)
{
    size_t want = SPA_SM_HEADER + SPACEMAP_HEADER_SIZE + (nrecs + 32) * 2 * SPACEMAP_ENTRY_SIZE;
    size_t sz = (size_t)1 << spa->ashift;
    if (sz < SPA_SM_MIN_BLOCK) sz = SPA_SM_MIN_BLOCK;
    while (sz < want && sz < SPA_SM_MAX_BLOCK) sz <<= 1;
    return (uint32_t)sz;
}

/* The log blocks being allocated for one sync, each with its own size. */
typedef struct sm_blocks {
    cairn_dva_t (*dvas)[CAIRN_MAX_COPIES];
    uint32_t *size;
    size_t n, cap;
} sm_blocks_t;

/* One more log block: bsize, else halves of it down to SPA_SM_MIN_BLOCK. */
static int sm_block_alloc(spa_t *spa, uint64_t txg, uint32_t bsize, sm_blocks_t *b)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 4;
        b->dvas = cairn_realloc(b->dvas, b->cap * sizeof *b->dvas);
        b->size = cairn_realloc(b->size, b->cap * sizeof *b->size);
    }
    memset(b->dvas[b->n], 0, sizeof b->dvas[b->n]);
    int err;
    for (;; bsize /= 2) {
        err = spa_alloc_dvas(spa, txg, bsize, SPA_SM_COPIES, b->dvas[b->n]);
        if (err != -ENOSPC || bsize <= SPA_SM_MIN_BLOCK) break;
    }
    if (err) return err;
    b->size[b->n++] = bsize;
    return 0;
}

/* How many of recs[0..n) the blocks hold, encoded in order (scratch: room for
 * the largest block). */
static size_t records_fitting(const sm_blocks_t *b, uint64_t txg, uint32_t flags,
                              const spacemap_record_t *recs, size_t n, uint8_t *scratch)
{
    size_t done = 0;
    for (size_t i = 0; i < b->n && done < n; i++) {
        long used = spacemap_encode(scratch, b->size[i] - SPA_SM_HEADER, txg, flags, recs + done,
                                    n - done);
        if (used <= 0) break;
        done += (size_t)used;
    }
    return done;
}

int spa_spacemap_sync(spa_t *spa, uint64_t txg, spa_uberblock_phys_t *ub)
{
    spa_sm_chain_t *chain = chain_of(spa);
    bool condense = cairn_bp_is_hole(&ub->sm_head) || chain->n >= SPA_SM_CONDENSE_BLOCKS ||
                    spa->sm_condense;
    spa->sm_condense = false;
    rec_list_t recs = {0};
    int err = 0;
    if (condense) {
        /* The old chain dies in this txg; the snapshot below accounts for that. */
        for (size_t i = 0; i < chain->n; i++) spa_block_free(spa, txg, &chain->bps[i]);
        for (uint32_t i = 0; i < spa->ntop && !err; i++) {
            spacemap_record_t *r = NULL;
            size_t n = 0;
            if (!spa->ms[i]) continue;
            err = metaslab_condense(spa->ms[i], txg, &r, &n);
            recs_append(&recs, r, n);
        }
    } else {
        err = take_all(spa, txg, &recs);
    }
    if (err) { free(recs.r); return err; }
    if (!condense && recs.n == 0) return 0; /* nothing allocated or freed: log unchanged */

    /* Blocks of bsize, or smaller ones where the pool has no extent of bsize
     * left (a fragmented pool must still sync): the chain names each block
     * with its own size. */
    uint32_t bsize = choose_block_size(spa, recs.n);
    uint8_t *buf = cairn_alloc_aligned(bsize);
    sm_blocks_t blk = {0};
    for (;;) {
        const uint32_t h = condense ? SPACEMAP_FLAG_SNAPSHOT : 0;
        size_t fit = records_fitting(&blk, txg, h, recs.r, recs.n, buf);
        if (fit == recs.n && blk.n > 0) break;
        size_t need = spacemap_blocks_needed(bsize - SPA_SM_HEADER, recs.r + fit, recs.n - fit);
        if (need == 0) need = 1;
        for (size_t b = 0; b < need && !err; b++) err = sm_block_alloc(spa, txg, bsize, &blk);
        if (!err) err = take_all(spa, txg, &recs); /* the allocations just made */
        if (err) { free(buf); free(blk.dvas); free(blk.size); free(recs.r); return err; }
    }
    size_t nblocks = blk.n;

    cairn_blkptr_t prev = condense ? (cairn_blkptr_t){0} : ub->sm_head;
    size_t done = 0;
    cairn_blkptr_t *written = cairn_zalloc(nblocks * sizeof *written);
    for (size_t b = 0; b < nblocks && !err; b++) {
        uint32_t bs = blk.size[b];
        memset(buf, 0, bs);
        spa_sm_block_phys_t *h = (spa_sm_block_phys_t *)buf;
        h->magic = SPA_SM_MAGIC;
        h->txg = txg;
        h->flags = condense ? SPACEMAP_FLAG_SNAPSHOT : 0;
        h->prev = prev;
        long used = spacemap_encode(buf + SPA_SM_HEADER, bs - SPA_SM_HEADER, txg, (uint32_t)h->flags,
                                    recs.r + done, recs.n - done);
        if (used < 0) { err = (int)used; break; }
        done += (size_t)used;
        cairn_blkptr_t bp = {0};
        memcpy(bp.dva, blk.dvas[b], sizeof bp.dva);
        bp.birth_txg = txg;
        bp.fill = 1;
        bp.lsize = bp.psize = bs;
        bp.type = CAIRN_BT_SPACEMAP;
        bp.checksum = CAIRN_CHECKSUM_FLETCHER4;
        bp.compress = CAIRN_COMPRESS_OFF;
        bp.ncopies = SPA_SM_COPIES;
        cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, buf, bs, bp.cksum);
        err = spa_write_dvas(spa, bp.dva, SPA_SM_COPIES, buf, bs);
        written[b] = bp;
        prev = bp;
    }
    if (!err && done != recs.n) err = -EIO; /* cannot happen: blocks_needed said it fits */
    free(buf);
    free(blk.dvas);
    free(blk.size);
    free(recs.r);
    if (err) { free(written); return err; }

    if (condense) {
        pthread_mutex_lock(&spa->tx.lock);
        chain->n = 0;
        pthread_mutex_unlock(&spa->tx.lock);
        ub->sm_chain_len = 0;
    }
    for (size_t b = 0; b < nblocks; b++) chain_push(spa, &written[b]);
    ub->sm_chain_len += nblocks;
    ub->sm_head = prev;
    free(written);
    return 0;
}

/* Records of a top-level vdev beyond the tree or of a hole belong to a log
 * vdev removed since (spa_vdev.c): its space left the pool with it. They are
 * skipped, and the next sync writes a snapshot so they are gone before the id
 * is reused (stale_ids keeps that sync from reusing it). */
static int replay_block(spa_t *spa, const uint8_t *buf, size_t len)
{
    spacemap_record_t *recs;
    size_t n;
    int err = spacemap_decode(buf, len, &recs, &n, NULL, NULL);
    if (err) return err;
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = recs[i].vdev;
        if (v < spa->ntop && !spa_top_is_hole(spa, v)) recs[keep++] = recs[i];
        else if (v < 32) spa->stale_ids |= 1U << v;
    }
    if (keep != n) spa->sm_condense = true;
    err = spacemap_replay_records(recs, keep, spa->ms, spa->ntop, spa->ub.txg);
    free(recs);
    return err;
}

int spa_spacemap_load(spa_t *spa)
{
    spa_sm_chain_t *chain = chain_of(spa);
    chain->n = 0;
    if (cairn_bp_is_hole(&spa->ub.sm_head)) return 0;
    /* Walk back to the start of the chain, then replay forward. */
    cairn_blkptr_t *bps = NULL;
    size_t n = 0;
    cairn_blkptr_t cur = spa->ub.sm_head;
    int err = 0;
    uint8_t *buf = NULL;
    while (!cairn_bp_is_hole(&cur)) {
        if (cur.type != CAIRN_BT_SPACEMAP || cur.lsize < SPA_SM_HEADER + SPACEMAP_MIN_BLOCK ||
            cur.lsize > SPA_SM_MAX_BLOCK || n > 1000000) { err = -EINVAL; break; }
        buf = cairn_realloc(buf, cur.lsize);
        err = spa_block_read_flags(spa, &cur, buf, 0, NULL);
        if (err) break;
        const spa_sm_block_phys_t *h = (const spa_sm_block_phys_t *)buf;
        if (h->magic != SPA_SM_MAGIC) { err = -EINVAL; break; }
        bps = cairn_realloc(bps, (n + 1) * sizeof *bps);
        bps[n++] = cur;
        cur = h->prev;
    }
    for (size_t i = n; i-- > 0 && !err;) {
        buf = cairn_realloc(buf, bps[i].lsize);
        err = spa_block_read_flags(spa, &bps[i], buf, 0, NULL);
        if (err) break;
        err = replay_block(spa, buf + SPA_SM_HEADER, bps[i].lsize - SPA_SM_HEADER);
        if (err) log_error("spa", "pool %s: space map log block of txg %llu is inconsistent",
                           spa->name, (unsigned long long)bps[i].birth_txg);
        chain_push(spa, &bps[i]);
    }
    free(buf);
    free(bps);
    /* Frees still in their defer window at the last durable txg stay deferred. */
    for (uint32_t i = 0; i < spa->ntop && !err; i++)
        if (spa->ms[i]) metaslab_txg_synced(spa->ms[i], spa->ub.txg);
    spa->held_synced_txg = spa->ub.txg;
    return err;
}

uint64_t spa_spacemap_log_bytes(spa_t *spa)
{
    spa_sm_chain_t *chain = chain_of(spa);
    uint64_t bytes = 0;
    pthread_mutex_lock(&spa->tx.lock);
    for (size_t i = 0; i < chain->n; i++)
        for (int c = 0; c < chain->bps[i].ncopies && c < CAIRN_MAX_COPIES; c++)
            bytes += cairn_dva_asize(&chain->bps[i].dva[c]);
    pthread_mutex_unlock(&spa->tx.lock);
    return bytes;
}

int spa_spacemap_visit(spa_t *spa, spa_bp_visitor_t visit, void *arg)
{
    spa_sm_chain_t *chain = chain_of(spa);
    pthread_mutex_lock(&spa->tx.lock);
    size_t n = chain->n;
    cairn_blkptr_t *copy = cairn_zalloc((n ? n : 1) * sizeof *copy);
    if (n) memcpy(copy, chain->bps, n * sizeof *copy);
    pthread_mutex_unlock(&spa->tx.lock);
    int err = 0;
    /* > 0 skips a block's subtree: these blocks have none. */
    for (size_t i = 0; i < n && err >= 0; i++) err = visit(spa, &copy[i], NULL, arg);
    free(copy);
    return err < 0 ? err : 0;
}
