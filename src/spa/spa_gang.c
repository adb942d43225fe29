/*
 * Gang blocks: a block stored in pieces because no free extent holds it whole.
 *
 * WHY. Allocation happens in syncing context, after the dataset layer has
 * admitted the writes by counting free bytes. Free bytes are not free extents:
 * a pool that took small overwrites (8 KiB volume blocks, the first half of a
 * record rewritten in the next txg) ends up with its free space in holes
 * smaller than a 128 KiB record, and the next sync could not place its records
 * although the pool had room for them by any count. A sync cannot give up: its
 * data was acknowledged (the intent log holds it). So a block that does not fit
 * whole is written in fragments wherever they fit, named by a header.
 *
 * FORMAT. A gang block's pointer carries CAIRN_BP_GANG; its DVAs name copies
 * of the gang header (SPA_GANG_HEADER_SIZE bytes), not of the data. Each DVA's
 * asize is the whole allocation of that copy, header and fragments together,
 * so `used` and every space count read a gang pointer as they read any other;
 * the header's own extent is vdev_psize_to_asize(top, SPA_GANG_HEADER_SIZE).
 * The header lists up to SPA_GANG_FRAGS fragment pointers whose stored bytes,
 * end to end, are the block's stored bytes (the pointer's checksum covers the
 * concatenation, so a read verifies fragments one by one and then the whole).
 * Fragments are stored raw, with the block's copies; one that does not fit
 * either is a gang block itself, so any fragmentation down to one allocation
 * unit per fragment is served. The header verifies itself (magic, its own
 * fletcher4) before any pointer in it is believed.
 *
 * WHERE. Only syncing-context writes gang. A block written ahead of its txg
 * for the intent log (spa_block_write_open) does not: the log then carries the
 * data itself, and log claims at import never meet a gang block.
 *
 * Reads, frees, scrub and resilver reach fragments through the same pointer
 * code (spa_gang_read, spa_gang_free, spa_gang_extents), so a fragment's bad
 * copy is repaired like any block's.
 */
#include "spa_impl.h"

#include <cairn/log.h>
#include <stdlib.h>
#include <string.h>

#define SPA_GANG_MAGIC 0x474e4147454e5241ULL /* "ARNEGANG" */
#define SPA_GANG_VERSION 1

typedef struct spa_gang_header_phys {
    uint64_t magic;
    uint32_t version;
    uint32_t nfrags;
    uint64_t birth_txg;
    uint64_t psize;                          /* sum of the fragments' psize */
    uint8_t reserved[32];
    uint8_t cksum[CAIRN_CHECKSUM_LEN];       /* fletcher4 of the header, this field zero */
    cairn_blkptr_t frags[SPA_GANG_FRAGS];
    uint8_t pad[SPA_GANG_HEADER_SIZE - 96 - SPA_GANG_FRAGS * sizeof(cairn_blkptr_t)];
} spa_gang_header_phys_t;

_Static_assert(sizeof(spa_gang_header_phys_t) == SPA_GANG_HEADER_SIZE, "gang header size");

/* The in-memory tree of a gang block being written: its header and, for each
 * fragment that is a gang block itself, that fragment's tree. */
struct spa_gang {
    spa_gang_header_phys_t *hdr; /* aligned, SPA_GANG_HEADER_SIZE bytes */
    spa_gang_t *child[SPA_GANG_FRAGS];
};

static void header_seal(spa_gang_header_phys_t *h)
{
    memset(h->cksum, 0, sizeof h->cksum);
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, h, sizeof *h, ck);
    memcpy(h->cksum, ck, sizeof ck);
}

static bool header_verify_cb(const void *buf, uint64_t psize, void *arg)
{
    const cairn_blkptr_t *bp = arg;
    if (psize != SPA_GANG_HEADER_SIZE) return false;
    spa_gang_header_phys_t *h = cairn_alloc_aligned(sizeof *h);
    memcpy(h, buf, sizeof *h);
    uint8_t want[CAIRN_CHECKSUM_LEN];
    memcpy(want, h->cksum, sizeof want);
    header_seal(h);
    bool ok = !memcmp(want, h->cksum, sizeof want) && h->magic == SPA_GANG_MAGIC &&
              h->version == SPA_GANG_VERSION && h->nfrags >= 1 && h->nfrags <= SPA_GANG_FRAGS &&
              h->psize == bp->psize && h->birth_txg == bp->birth_txg;
    free(h);
    return ok;
}

static uint64_t header_asize(spa_t *spa, uint32_t vdev)
{
    vdev_t *top = spa_top_vdev(spa, vdev);
    return top ? vdev_psize_to_asize(top, SPA_GANG_HEADER_SIZE) : 0;
}

/* The header copies' DVAs with their own extents (a gang DVA's asize counts
 * the fragments too). */
static int header_dvas(spa_t *spa, const cairn_blkptr_t *bp, cairn_dva_t *out)
{
    int n = bp->ncopies < CAIRN_MAX_COPIES ? bp->ncopies : CAIRN_MAX_COPIES;
    for (int c = 0; c < n; c++) {
        out[c] = bp->dva[c];
        out[c].asize = (uint32_t)(header_asize(spa, bp->dva[c].vdev) >> CAIRN_SECTOR_SHIFT);
    }
    return n;
}

void spa_gang_destroy(spa_gang_t *g)
{
    if (!g) return;
    for (int i = 0; i < SPA_GANG_FRAGS; i++) spa_gang_destroy(g->child[i]);
    free(g->hdr);
    free(g);
}

static void unalloc_dvas(spa_t *spa, uint64_t txg, const cairn_dva_t *d, int n)
{
    for (int c = 0; c < n; c++)
        if (d[c].asize)
            metaslab_unalloc(spa->ms[d[c].vdev], txg, d[c].offset, cairn_dva_asize(&d[c]));
}

void spa_gang_unalloc(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp, spa_gang_t *g)
{
    for (uint32_t i = 0; i < g->hdr->nfrags; i++) {
        const cairn_blkptr_t *f = &g->hdr->frags[i];
        if (g->child[i]) spa_gang_unalloc(spa, txg, f, g->child[i]);
        else unalloc_dvas(spa, txg, f->dva, f->ncopies);
    }
    cairn_dva_t hd[CAIRN_MAX_COPIES];
    unalloc_dvas(spa, txg, hd, header_dvas(spa, bp, hd));
}

/* A fragment of psize stored bytes at data, allocated whole or as a gang
 * block of its own; fills *f and *child (NULL when whole). */
static int frag_alloc(spa_t *spa, uint64_t txg, const cairn_blkptr_t *parent, const uint8_t *data,
                      uint64_t psize, cairn_blkptr_t *f, spa_gang_t **child)
{
    memset(f, 0, sizeof *f);
    *child = NULL;
    f->type = parent->type;
    f->level = parent->level;
    f->checksum = CAIRN_CHECKSUM_FLETCHER4;
    f->compress = CAIRN_COMPRESS_OFF;
    f->lsize = f->psize = (uint32_t)psize;
    f->birth_txg = txg;
    f->fill = 1;
    f->ncopies = parent->ncopies;
    cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, data, psize, f->cksum);
    int err = spa_alloc_dvas(spa, txg, psize, f->ncopies, f->dva);
    if (err == -ENOSPC && psize > (1ULL << spa->ashift))
        err = spa_gang_alloc(spa, txg, f, data, child);
    return err;
}

int spa_gang_alloc(spa_t *spa, uint64_t txg, cairn_blkptr_t *bp, const uint8_t *stored,
                   spa_gang_t **out)
{
    *out = NULL;
    uint64_t unit = 1ULL << spa->ashift;
    cairn_dva_t hd[CAIRN_MAX_COPIES] = {{0}};
    int err = spa_alloc_dvas(spa, txg, SPA_GANG_HEADER_SIZE, bp->ncopies, hd);
    if (err) return err;
    spa_gang_t *g = cairn_zalloc(sizeof *g);
    g->hdr = cairn_alloc_aligned(sizeof *g->hdr);
    spa_gang_header_phys_t *h = g->hdr;
    h->magic = SPA_GANG_MAGIC;
    h->version = SPA_GANG_VERSION;
    h->birth_txg = txg;
    h->psize = bp->psize;
    /* Equal shares of what is left over the slots left: a pool whose holes are
     * all small still fits the block in SPA_GANG_FRAGS pieces, each of which
     * gangs again if it must. */
    uint64_t done = 0;
    while (done < bp->psize && !err) {
        uint32_t slots = SPA_GANG_FRAGS - h->nfrags;
        uint64_t left = bp->psize - done;
        uint64_t size = slots == 1 ? left : CAIRN_P2ROUNDUP((left + slots - 1) / slots, unit);
        if (size > left) size = left;
        err = frag_alloc(spa, txg, bp, stored + done, size, &h->frags[h->nfrags],
                         &g->child[h->nfrags]);
        if (!err) {
            done += size;
            h->nfrags++;
        }
    }
    cairn_blkptr_t tmp = *bp;
    memcpy(tmp.dva, hd, sizeof hd);
    if (err) {
        spa_gang_unalloc(spa, txg, &tmp, g);
        spa_gang_destroy(g);
        return err;
    }
    header_seal(h);
    bp->flags |= CAIRN_BP_GANG;
    /* Each copy's asize: its header and its fragments' share. */
    for (int c = 0; c < bp->ncopies; c++) {
        uint64_t total = cairn_dva_asize(&hd[c]);
        for (uint32_t i = 0; i < h->nfrags; i++) total += cairn_dva_asize(&h->frags[i].dva[c]);
        bp->dva[c] = hd[c];
        bp->dva[c].asize = (uint32_t)(total >> CAIRN_SECTOR_SHIFT);
    }
    atomic_fetch_add(&spa->gang_blocks, 1);
    *out = g;
    return 0;
}

int spa_gang_write(spa_t *spa, const cairn_blkptr_t *bp, const spa_gang_t *g, const uint8_t *stored)
{
    const spa_gang_header_phys_t *h = g->hdr;
    uint64_t unit = 1ULL << spa->ashift;
    uint8_t *piece = NULL;
    size_t cap = 0;
    int err = 0;
    uint64_t at = 0;
    for (uint32_t i = 0; i < h->nfrags && !err; i++) {
        const cairn_blkptr_t *f = &h->frags[i];
        if (g->child[i]) {
            err = spa_gang_write(spa, f, g->child[i], stored + at);
        } else {
            /* The devices read psize rounded up to a sector: a padded copy. */
            size_t need = CAIRN_P2ROUNDUP((size_t)f->psize, (size_t)unit);
            if (need > cap) {
                free(piece);
                piece = cairn_alloc_aligned(need);
                cap = need;
            }
            memcpy(piece, stored + at, f->psize);
            memset(piece + f->psize, 0, need - f->psize);
            err = spa_write_dvas(spa, f->dva, f->ncopies, piece, f->psize);
        }
        at += f->psize;
    }
    free(piece);
    if (err) return err;
    cairn_dva_t hd[CAIRN_MAX_COPIES];
    return spa_write_dvas(spa, hd, header_dvas(spa, bp, hd), h, SPA_GANG_HEADER_SIZE);
}

/* The verified header of a gang block (from any copy; a scrub or resilver read
 * checks and repairs every copy), aligned, or NULL. */
static spa_gang_header_phys_t *header_read(spa_t *spa, const cairn_blkptr_t *bp, int vflags,
                                           uint64_t *repaired, int *err)
{
    cairn_dva_t hd[CAIRN_MAX_COPIES];
    int n = header_dvas(spa, bp, hd);
    spa_gang_header_phys_t *h = cairn_alloc_aligned(sizeof *h);
    *err = spa_read_copies(spa, hd, n, SPA_GANG_HEADER_SIZE, h, header_verify_cb, (void *)bp,
                           vflags, repaired);
    if (*err) {
        free(h);
        return NULL;
    }
    return h;
}

/* A fragment's stored bytes into buf (room for psize rounded up to a sector). */
static int frag_read(spa_t *spa, const cairn_blkptr_t *f, uint8_t *buf, int vflags,
                     uint64_t *repaired)
{
    if (f->ncopies == 0 || f->ncopies > CAIRN_MAX_COPIES || f->compress != CAIRN_COMPRESS_OFF ||
        f->psize != f->lsize || f->psize == 0)
        return -EINVAL;
    if (cairn_bp_is_gang(f)) return spa_gang_read(spa, f, buf, vflags, repaired);
    return spa_read_copies(spa, f->dva, f->ncopies, f->psize, buf, spa_bp_verify_cb, (void *)f,
                           vflags, repaired);
}

int spa_gang_read(spa_t *spa, const cairn_blkptr_t *bp, uint8_t *raw, int vflags,
                  uint64_t *repaired)
{
    int err;
    spa_gang_header_phys_t *h = header_read(spa, bp, vflags, repaired, &err);
    if (!h) return err;
    uint64_t unit = 1ULL << spa->ashift;
    uint64_t at = 0;
    err = 0;
    for (uint32_t i = 0; i < h->nfrags && !err; i++) {
        const cairn_blkptr_t *f = &h->frags[i];
        if (at + f->psize > bp->psize) {
            err = -ECKSUM;
            break;
        }
        uint8_t *tmp = cairn_alloc_aligned(CAIRN_P2ROUNDUP((size_t)f->psize, (size_t)unit));
        err = frag_read(spa, f, tmp, vflags, repaired);
        if (!err) memcpy(raw + at, tmp, f->psize);
        free(tmp);
        at += f->psize;
    }
    free(h);
    if (err) return err;
    if (at != bp->psize || !spa_bp_verify(bp, raw)) return -ECKSUM;
    return 0;
}

/* Calls fn for each extent the gang block holds: header copies, fragments'
 * copies, nested gangs' likewise. The header must be readable: a gang block
 * whose header is lost cannot say where its fragments are. */
int spa_gang_extents(spa_t *spa, const cairn_blkptr_t *bp, spa_extent_fn fn, void *arg)
{
    int err;
    spa_gang_header_phys_t *h = header_read(spa, bp, VDEV_READ_NOREPAIR, NULL, &err);
    cairn_dva_t hd[CAIRN_MAX_COPIES];
    int n = header_dvas(spa, bp, hd);
    for (int c = 0; c < n; c++) fn(arg, hd[c].vdev, hd[c].offset, cairn_dva_asize(&hd[c]));
    if (!h) return err;
    for (uint32_t i = 0; i < h->nfrags && !err; i++) {
        const cairn_blkptr_t *f = &h->frags[i];
        if (cairn_bp_is_gang(f)) {
            err = spa_gang_extents(spa, f, fn, arg);
            continue;
        }
        for (int c = 0; c < f->ncopies && c < CAIRN_MAX_COPIES; c++)
            fn(arg, f->dva[c].vdev, f->dva[c].offset, cairn_dva_asize(&f->dva[c]));
    }
    free(h);
    return err;
}

typedef struct gang_free_ctx {
    spa_t *spa;
    uint64_t txg;
} gang_free_ctx_t;

static void free_extent(void *arg, uint32_t vdev, uint64_t offset, uint64_t size)
{
    gang_free_ctx_t *c = arg;
    metaslab_t *ms = vdev < c->spa->ntop ? c->spa->ms[vdev] : NULL;
    if (!ms || size == 0) return;
    if (metaslab_free(ms, c->txg, offset, size))
        log_error("spa", "pool %s: free of unallocated gang space (vdev %u offset %llu)",
                  c->spa->name, vdev, (unsigned long long)offset);
}

void spa_gang_free(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp)
{
    gang_free_ctx_t c = {spa, txg};
    int err = spa_gang_extents(spa, bp, free_extent, &c);
    if (err)
        log_error("spa", "pool %s: gang block at vdev %u offset %llu: header unreadable (%s); "
                  "its fragments stay allocated",
                  spa->name, bp->dva[0].vdev, (unsigned long long)bp->dva[0].offset,
                  strerror(-err));
}
