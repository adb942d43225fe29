/*
 * RAID-Z: blocks striped over n children with p = 1, 2 or 3 parity columns,
 * each block its own variable-width stripe (no read-modify-write: a block is
 * always written whole, and copy-on-write never overwrites one in place).
 *
 * ---- Layout (on-disk format) ----
 *
 * Let n be the number of children, p the parity count, a the ashift and
 * S = 2^a the sector size. The top-level address space is striped sector by
 * sector across the children: top-level sector t = offset >> a lives on child
 * (t % n) at child data offset (t / n) << a, i.e. at absolute device offset
 * VDEV_DATA_START + ((t / n) << a). The top-level asize is n times the
 * smallest child's data area (rounded down to S).
 *
 * A block of psize bytes at top-level offset o (a multiple of S), s = o >> a:
 *   q     = ceil(psize / S)         data sectors (the last one zero-padded)
 *   d     = n - p                   data columns of a full-width row
 *   rows  = ceil(q / d)             sectors in the longest column
 *   ncols = min(n, q + p)           columns; each on a distinct child
 *   big   = (q % d == 0) ? ncols : p + q % d
 * Column c (0 <= c < ncols) is on child (s + c) % n, starting at child sector
 * (s + c) / n, and holds `rows` consecutive sectors when c < big, rows - 1
 * otherwise. Columns 0..p-1 are parity P, Q, R (always `rows` long); data
 * fills columns p..ncols-1 in column-major order: column p holds the first
 * sectors of the block, column p + 1 the next ones, and so on, so each data
 * column is one contiguous piece of the block. The block's sectors are
 * exactly top-level sectors s .. s + q + p * rows - 1 (row k of column c is
 * top-level sector s + c + k * n), contiguous, with no holes.
 *
 * Parity (see raidz.h): P = sum D_i, Q = sum 2^i D_i, R = sum 4^i D_i over the
 * block's data columns i = 0..ncols-p-1, byte by byte in GF(2^8) mod 0x11d,
 * each short column treated as zero-padded to `rows` sectors.
 *
 * Allocated size: vdev_psize_to_asize() = (q + p * rows) sectors rounded up
 * to a multiple of p + 1 sectors. The rounding keeps every free gap in the
 * address space at least p + 1 sectors long, the smallest block (one data
 * sector plus p parity), so the allocator never strands unusable slivers.
 * The padding sectors at the end are allocated but never written.
 *
 * ---- Reads ----
 *
 * A normal read fetches only the data columns (one leaf I/O per column,
 * straight into the caller's buffer when it is suitably aligned, since a
 * data column is a contiguous piece of the block) and verifies the block.
 * Only when a column is missing, fails, or the block does not verify are the
 * parity columns read. Reconstruction then tries, in order: the columns that
 * failed or whose child is missing as erasures; then every set of up to p
 * erasures containing those, fewest data columns first (combinatorial
 * reconstruction), verifying each candidate. Every candidate is equivalent to
 * erasing exactly p columns (a reconstruction that needs m parity columns
 * uses the first m surviving ones), so only p-sized erasure sets are
 * enumerated, in an order that prefers the cheap P-only fast path.
 *
 * Which columns were actually bad is decided by comparison, not by the
 * erasure set that happened to work: a reconstructed data column that
 * differs from what the disk returned is bad, and all parity is regenerated
 * from the verified data and compared with what was read. Bad columns and
 * columns that returned EIO are rewritten (unless VDEV_READ_NOREPAIR) and a
 * checksum error is charged to each child that returned wrong data. When no
 * candidate verifies, nobody can be blamed: only EIOs are counted.
 *
 * A scrub reads every column, and after the data verifies (directly or by
 * reconstruction) also checks and repairs parity, which normal reads never
 * look at.
 */
#include <cairn/raidz.h>
#include <cairn/util.h>
#include <cairn/vdev.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum rz_col_state {
    COL_UNREAD = 0,
    COL_OK,      /* read (or, for writes, to be written) */
    COL_MISSING, /* child not usable: never tried */
    COL_EIO,     /* the child returned an error */
};

typedef struct rz_col {
    vdev_t *leaf;
    uint64_t dev_off; /* absolute device offset */
    size_t len;       /* bytes of this column (rows or rows - 1 sectors) */
    uint8_t *buf;     /* I/O-aligned home of the column's contents */
    size_t data_off;  /* data columns: offset of the column within the block */
    uint8_t state;
    bool needs_repair;
    bool lied; /* returned data that differed from the verified block */
    bool stale; /* its leaf is under resilver: not read, written by a resilver read */
    /* A column whose child is being replaced lives on two leaves: `leaf`, which
     * reads use (OLD while it is readable, else NEW), and leaf2, the other one,
     * which takes the column's writes too (and a resilver's, when stale). */
    vdev_t *leaf2;
} rz_col_t;

typedef struct rz_map {
    unsigned n, p, ncols, ndata;
    size_t col_size; /* rows * S: the length of a parity column */
    uint8_t *block;  /* caller's buffer */
    bool bounced;    /* data columns live in `arena`, not in the caller's buffer */
    uint8_t *arena;
    rz_col_t col[];
} rz_map_t;

static size_t io_round(size_t x) { return CAIRN_P2ROUNDUP(x, (size_t)CAIRN_IO_ALIGN); }

uint64_t vdev_raidz_psize_to_asize(const vdev_t *top, uint64_t psize)
{
    uint64_t a = top->ashift, n = top->nchildren, p = top->nparity;
    uint64_t q = CAIRN_DIV_ROUND_UP(psize, 1ULL << a);
    uint64_t rows = CAIRN_DIV_ROUND_UP(q, n - p);
    uint64_t sectors = q + p * rows;
    sectors = CAIRN_DIV_ROUND_UP(sectors, p + 1) * (p + 1);
    return sectors << a;
}

static rz_map_t *rz_map_build(vdev_t *top, uint64_t offset, uint64_t psize, uint8_t *block)
{
    unsigned n = top->nchildren, p = top->nparity, a = top->ashift;
    uint64_t S = 1ULL << a, s = offset >> a;
    uint64_t q = CAIRN_DIV_ROUND_UP(psize, S), d = n - p;
    uint64_t rows = CAIRN_DIV_ROUND_UP(q, d);
    unsigned ncols = (unsigned)CAIRN_MIN((uint64_t)n, q + p);
    unsigned big = q % d == 0 ? ncols : (unsigned)(p + q % d);

    rz_map_t *m = cairn_zalloc(sizeof *m + ncols * sizeof(rz_col_t));
    m->n = n, m->p = p, m->ncols = ncols, m->ndata = ncols - p;
    m->col_size = rows * S;
    m->block = block;
    m->bounced = ((uintptr_t)block & (CAIRN_IO_ALIGN - 1)) || S % CAIRN_IO_ALIGN;

    size_t arena = 0, data_off = 0;
    for (unsigned c = 0; c < ncols; c++) {
        rz_col_t *col = &m->col[c];
        vdev_t *child = top->children[(s + c) % n];
        col->leaf = child;
        if (child->type == VDEV_TYPE_REPLACING && child->nchildren == 2) {
            vdev_t *o = child->children[0], *nw = child->children[1];
            col->leaf = vdev_leaf_readable(o) ? o : nw;
            col->leaf2 = col->leaf == o ? nw : o;
        }
        col->dev_off = VDEV_DATA_START + (((s + c) / n) << a);
        col->len = (c < big ? rows : rows - 1) * S;
        if (c >= p) {
            col->data_off = data_off;
            data_off += col->len;
        }
        if (c < p || m->bounced) arena += io_round(col->len);
    }
    m->arena = cairn_alloc_aligned(arena);
    size_t at = 0;
    for (unsigned c = 0; c < ncols; c++) {
        rz_col_t *col = &m->col[c];
        if (c < p || m->bounced) {
            col->buf = m->arena + at;
            at += io_round(col->len);
        } else {
            col->buf = block + col->data_off;
        }
    }
    return m;
}

static void rz_map_free(rz_map_t *m)
{
    free(m->arena);
    free(m);
}

/* Pointer and length arrays for raidz_generate/raidz_reconstruct. */
static void rz_vectors(rz_map_t *m, uint8_t **parity, uint8_t **data, size_t *data_len)
{
    for (unsigned j = 0; j < m->p; j++) parity[j] = m->col[j].buf;
    for (unsigned i = 0; i < m->ndata; i++) {
        data[i] = m->col[m->p + i].buf;
        data_len[i] = m->col[m->p + i].len;
    }
}

/* Makes the caller's buffer hold the data columns' current contents. */
static void rz_assemble(rz_map_t *m)
{
    if (!m->bounced) return;
    for (unsigned c = m->p; c < m->ncols; c++)
        memcpy(m->block + m->col[c].data_off, m->col[c].buf, m->col[c].len);
}

/* Fills the map's columns (bouncing the data if needed) and computes parity. */
static rz_map_t *rz_prepare_write(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize)
{
    rz_map_t *m = rz_map_build(top, offset, psize, (uint8_t *)buf);
    if (m->bounced) {
        /* Copy only psize bytes; the arena is zeroed, which pads the tail. */
        for (unsigned c = m->p; c < m->ncols; c++) {
            rz_col_t *col = &m->col[c];
            if (col->data_off < psize)
                memcpy(col->buf, (const uint8_t *)buf + col->data_off,
                       CAIRN_MIN(col->len, psize - col->data_off));
        }
    }
    uint8_t *parity[VDEV_MAX_NPARITY], **data = cairn_zalloc(m->ndata * sizeof *data);
    size_t *data_len = cairn_zalloc(m->ndata * sizeof *data_len);
    rz_vectors(m, parity, data, data_len);
    raidz_generate(m->p, parity, m->col_size, m->ndata, (const uint8_t *const *)data, data_len);
    free(data);
    free(data_len);
    return m;
}

/* The writes of every column (a column being replaced: to both its leaves). */
static unsigned rz_add_ios(rz_map_t *m, vdev_batch_io_t *io)
{
    unsigned k = 0;
    for (unsigned c = 0; c < m->ncols; c++) {
        io[k++] = (vdev_batch_io_t){.leaf = m->col[c].leaf, .op = VDEV_IO_WRITE,
                                    .offset = m->col[c].dev_off, .buf = m->col[c].buf,
                                    .len = m->col[c].len};
        if (m->col[c].leaf2)
            io[k++] = (vdev_batch_io_t){.leaf = m->col[c].leaf2, .op = VDEV_IO_WRITE,
                                        .offset = m->col[c].dev_off, .buf = m->col[c].buf,
                                        .len = m->col[c].len};
    }
    return k;
}

static unsigned rz_nios(const rz_map_t *m)
{
    unsigned k = m->ncols;
    for (unsigned c = 0; c < m->ncols; c++) k += m->col[c].leaf2 != NULL;
    return k;
}

int vdev_raidz_write(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize)
{
    vdev_block_write_t b = {.offset = offset, .buf = buf, .psize = psize};
    vdev_raidz_write_many(top, &b, 1);
    return b.error;
}

unsigned vdev_raidz_write_many(vdev_t *top, vdev_block_write_t *blocks, size_t n)
{
    if (top->nparity < 1 || top->nparity > VDEV_MAX_NPARITY || top->nchildren <= top->nparity) {
        for (size_t i = 0; i < n; i++) blocks[i].error = -EINVAL;
        return (unsigned)n;
    }
    rz_map_t **maps = cairn_zalloc(n * sizeof *maps);
    unsigned total = 0;
    for (size_t i = 0; i < n; i++) {
        maps[i] = rz_prepare_write(top, blocks[i].offset, blocks[i].buf, blocks[i].psize);
        total += rz_nios(maps[i]);
    }
    vdev_batch_io_t *io = cairn_zalloc(total * sizeof *io);
    unsigned k = 0;
    for (size_t i = 0; i < n; i++) k += rz_add_ios(maps[i], io + k);
    vdev_batch_run_merged(io, total);
    unsigned nfailed_blocks = 0;
    k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned failed = 0;
        /* A column is lost only when none of its leaves took it. */
        for (unsigned c = 0; c < maps[i]->ncols; c++) {
            bool ok = io[k++].error == 0;
            if (maps[i]->col[c].leaf2) ok |= io[k++].error == 0;
            failed += !ok;
        }
        /* Readable as long as no more than p columns are lost. */
        blocks[i].error = failed <= maps[i]->p ? 0 : -EIO;
        nfailed_blocks += blocks[i].error != 0;
        rz_map_free(maps[i]);
    }
    free(io);
    free(maps);
    return nfailed_blocks;
}

/* Reads the columns flagged in want[] that are still unread, all at once. */
static void rz_read_cols(rz_map_t *m, const bool *want)
{
    vdev_batch_io_t *io = cairn_zalloc(m->ncols * sizeof *io);
    unsigned *idx = cairn_zalloc(m->ncols * sizeof *idx);
    unsigned nio = 0;
    for (unsigned c = 0; c < m->ncols; c++) {
        rz_col_t *col = &m->col[c];
        if (!want[c] || col->state != COL_UNREAD) continue;
        if (!vdev_leaf_readable(col->leaf)) {
            col->state = COL_MISSING;
            col->stale = vdev_leaf_usable(col->leaf);
            continue;
        }
        idx[nio] = c;
        io[nio++] = (vdev_batch_io_t){.leaf = col->leaf, .op = VDEV_IO_READ,
                                      .offset = col->dev_off, .buf = col->buf, .len = col->len};
    }
    vdev_batch_run(io, nio);
    for (unsigned k = 0; k < nio; k++) {
        rz_col_t *col = &m->col[idx[k]];
        col->state = io[k].error == 0                                           ? COL_OK
                     : io[k].error == -ENXIO && !vdev_leaf_usable(col->leaf) ? COL_MISSING
                                                                              : COL_EIO;
    }
    free(io);
    free(idx);
}

static bool rz_verify(rz_map_t *m, uint64_t psize, vdev_verify_fn verify, void *arg)
{
    rz_assemble(m);
    return !verify || verify(m->block, psize, arg);
}

/*
 * Combinatorial search. Tries every p-sized erasure set containing the
 * known-bad columns, ordered by how many data columns it erases. Leaves the
 * verified data in the data columns and returns true, or false.
 */
static bool rz_search(rz_map_t *m, uint64_t psize, vdev_verify_fn verify, void *arg,
                      uint8_t *orig)
{
    unsigned p = m->p, ncols = m->ncols, ndata = m->ndata;
    /* Enumeration order: data columns first, then parity from the last
     * (R) to P, so erasure sets that keep P (the XOR fast path) come first. */
    unsigned ord[VDEV_MAX_CHILDREN];
    for (unsigned k = 0; k < ncols; k++) ord[k] = k < ndata ? p + k : p - 1 - (k - ndata);
    unsigned known = 0, known_data = 0;
    for (unsigned c = 0; c < ncols; c++) {
        if (m->col[c].state == COL_OK) continue;
        known++;
        known_data += c >= p;
    }

    uint8_t *parity[VDEV_MAX_NPARITY], **data = cairn_zalloc(ndata * sizeof *data);
    size_t *data_len = cairn_zalloc(ndata * sizeof *data_len);
    bool *missing = cairn_zalloc(ncols);
    rz_vectors(m, parity, data, data_len);
    bool found = false;

    for (unsigned want = CAIRN_MAX(known_data, 1u); want <= p && !found; want++) {
        unsigned comb[VDEV_MAX_NPARITY];
        for (unsigned k = 0; k < p; k++) comb[k] = k;
        for (;;) {
            memset(missing, 0, ncols);
            unsigned edata = 0, eknown = 0;
            for (unsigned k = 0; k < p; k++) {
                unsigned c = ord[comb[k]];
                missing[c] = true;
                edata += c >= p;
                eknown += m->col[c].state != COL_OK;
            }
            if (edata == want && eknown == known) {
                uint8_t *use_parity[VDEV_MAX_NPARITY];
                for (unsigned j = 0; j < p; j++) use_parity[j] = missing[j] ? NULL : parity[j];
                if (raidz_reconstruct(p, use_parity, m->col_size, ndata, data, data_len,
                                      missing) == 0 &&
                    rz_verify(m, psize, verify, arg)) {
                    found = true;
                    break;
                }
                for (unsigned c = p; c < ncols; c++)
                    if (missing[c])
                        memcpy(m->col[c].buf, orig + m->col[c].data_off, m->col[c].len);
            }
            /* Next p-combination of 0..ncols-1 in lexicographic order. */
            int k = (int)p - 1;
            while (k >= 0 && comb[k] == ncols - p + (unsigned)k) k--;
            if (k < 0) break;
            comb[k]++;
            for (unsigned j = (unsigned)k + 1; j < p; j++) comb[j] = comb[j - 1] + 1;
        }
    }
    if (found) {
        /* A reconstructed column that differs from what its child returned lied. */
        for (unsigned c = p; c < ncols; c++) {
            rz_col_t *col = &m->col[c];
            if (missing[c] && col->state == COL_OK &&
                memcmp(col->buf, orig + col->data_off, col->len) != 0)
                col->lied = true;
        }
    }
    free(missing);
    free(data);
    free(data_len);
    return found;
}

int vdev_raidz_read(vdev_t *top, uint64_t offset, void *buf, uint64_t psize, vdev_verify_fn verify,
                    void *arg, int flags, vdev_read_result_t *res)
{
    if (top->nparity < 1 || top->nparity > VDEV_MAX_NPARITY || top->nchildren <= top->nparity)
        return -EINVAL;
    rz_map_t *m = rz_map_build(top, offset, psize, buf);
    unsigned p = m->p, ncols = m->ncols;
    bool scrub = flags & VDEV_READ_SCRUB;
    bool *want = cairn_zalloc(ncols);

    /* Data columns only, unless a data child is known missing or we scrub. */
    bool need_parity = scrub;
    bool resilver = flags & VDEV_READ_RESILVER, any_stale = false;
    for (unsigned c = 0; c < ncols; c++) {
        rz_col_t *col = &m->col[c];
        bool readable = vdev_leaf_readable(col->leaf);
        if (!readable && c >= p) need_parity = true;
        any_stale |= !readable && vdev_leaf_usable(col->leaf);
        any_stale |= col->leaf2 && vdev_leaf_usable(col->leaf2) && atomic_load(&col->leaf2->stale);
    }
    /* A resilver rewrites stale columns, parity ones too: it needs them all. */
    if (resilver && any_stale) need_parity = true;
    for (unsigned c = 0; c < ncols; c++) want[c] = c >= p || need_parity;
    rz_read_cols(m, want);

    bool data_complete = true;
    for (unsigned c = p; c < ncols; c++) data_complete &= m->col[c].state == COL_OK;
    bool verified = data_complete && rz_verify(m, psize, verify, arg);
    int rc = 0;
    uint8_t *orig = NULL, *regen = NULL;

    if (verified && !scrub && !(resilver && any_stale)) goto out;

    for (unsigned c = 0; c < ncols; c++) want[c] = true;
    rz_read_cols(m, want);
    unsigned failed = 0;
    for (unsigned c = 0; c < ncols; c++) failed += m->col[c].state != COL_OK;
    if (!verified) {
        if (failed > p) {
            rc = -EIO;
            goto account;
        }
        /* Keep what the children returned, to restore between attempts and
         * to tell afterwards which of them lied. */
        orig = cairn_alloc_aligned(m->col_size * m->ndata);
        for (unsigned c = p; c < ncols; c++)
            memcpy(orig + m->col[c].data_off, m->col[c].buf, m->col[c].len);
        if (!rz_search(m, psize, verify, arg, orig)) {
            rc = -ECKSUM;
            goto account;
        }
    }

    /* The data is good: regenerate parity and compare with what was read. */
    {
        uint8_t *parity[VDEV_MAX_NPARITY], **data = cairn_zalloc(m->ndata * sizeof *data);
        size_t *data_len = cairn_zalloc(m->ndata * sizeof *data_len);
        rz_vectors(m, parity, data, data_len);
        size_t slot = io_round(m->col_size);
        regen = cairn_alloc_aligned(slot * p);
        for (unsigned j = 0; j < p; j++) parity[j] = regen + j * slot;
        raidz_generate(p, parity, m->col_size, m->ndata, (const uint8_t *const *)data, data_len);
        for (unsigned j = 0; j < p; j++) {
            rz_col_t *col = &m->col[j];
            if (col->state == COL_OK && memcmp(col->buf, parity[j], col->len) != 0)
                col->lied = true;
            col->buf = parity[j]; /* repairs write the regenerated parity */
        }
        free(data);
        free(data_len);
    }

account:;
    uint32_t errors = 0;
    vdev_batch_io_t *io = cairn_zalloc(2 * ncols * sizeof *io);
    unsigned nio = 0;
    /* Speculative and nothing verified (rz_search failed): no column is known
     * to have lied. */
    bool charge = rc != -ECKSUM || !(flags & VDEV_READ_SPECULATIVE);
    for (unsigned c = 0; c < ncols && charge; c++) {
        rz_col_t *col = &m->col[c];
        if (col->state == COL_EIO || col->lied) errors++;
        if (col->lied) vdev_note_error(col->leaf, VDEV_ERR_CHECKSUM, col->dev_off, col->len, -ECKSUM);
        if (rc == 0 && (col->state == COL_EIO || col->lied || (resilver && col->stale)))
            io[nio++] = (vdev_batch_io_t){.leaf = col->leaf, .op = VDEV_IO_WRITE,
                                          .offset = col->dev_off, .buf = col->buf,
                                          .len = col->len};
        /* The replacement's copy of a column read from OLD. */
        if (rc == 0 && resilver && col->leaf2 && vdev_leaf_usable(col->leaf2) &&
            atomic_load(&col->leaf2->stale))
            io[nio++] = (vdev_batch_io_t){.leaf = col->leaf2, .op = VDEV_IO_WRITE,
                                          .offset = col->dev_off, .buf = col->buf,
                                          .len = col->len};
    }
    uint64_t repaired = 0;
    if (nio && !(flags & VDEV_READ_NOREPAIR)) {
        vdev_batch_run(io, nio);
        for (unsigned k = 0; k < nio; k++) {
            if (io[k].error) continue;
            io[k].leaf->stats.repaired_bytes += io[k].len;
            repaired += io[k].len;
        }
    }
    free(io);
    if (res) {
        res->errors_found += errors;
        res->repaired_bytes += repaired;
    }
    if (rc == 0) rz_assemble(m);

out:
    free(orig);
    free(regen);
    free(want);
    rz_map_free(m);
    return rc;
}
