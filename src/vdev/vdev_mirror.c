/*
 * Block I/O through a top-level vdev: the public entry points, which
 * dispatch on the vdev type, and the mirror (and single-leaf) implementation.
 * Raidz lives in vdev_raidz.c.
 *
 * A single leaf is handled as a one-sided mirror: the same code paths, with
 * no other side to fall back to or to repair from.
 *
 * Mirror layout is trivial: top-level offset o is device offset
 * VDEV_DATA_START + o on every side; a block occupies psize rounded up to the
 * sector size (1 << ashift).
 *
 * Writes go to every usable side at once; the write succeeds when at least
 * one side took it, since one good copy is enough to read it back (and a
 * scrub or the next read will heal the others).
 *
 * Normal reads go to one side at a time, starting at a side chosen by the
 * block's offset so that concurrent readers spread over all sides; when the
 * copy fails (EIO) or does not verify, the next side is tried. Once a copy
 * verifies, every side that failed or lied is rewritten with it
 * (self-healing) and a checksum error is charged to each side that returned
 * data that did not verify. Scrub reads every side in parallel and verifies
 * each copy on its own, so silent damage on a side that a normal read would
 * never have looked at is found and repaired too.
 *
 * The leaf driver counts reads, writes and their errors on each leaf; this
 * layer adds what only it can know: checksum errors and repaired bytes.
 */
#include <cairn/raidz.h>
#include <cairn/util.h>
#include <cairn/vdev.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Stands for a leaf that must not be read: never usable. */
static vdev_t no_leaf = {.type = VDEV_TYPE_LEAF, .state = VDEV_STATE_UNAVAIL};

static bool is_io_aligned(const void *p) { return ((uintptr_t)p & (CAIRN_IO_ALIGN - 1)) == 0; }

/* Which sides of the top-level vdev hold copies: its children, or (NULL)
 * the top-level leaf itself. */
static vdev_t **mirror_sides(vdev_t *top, unsigned *n, vdev_t **buf)
{
    if (top->type == VDEV_TYPE_LEAF) {
        *n = 1;
        return NULL;
    }
    unsigned nc = top->nchildren;
    *n = nc;
    /* A side being replaced is two sides, OLD and NEW: a mirror within the mirror. */
    bool replacing = false;
    for (unsigned i = 0; i < nc; i++) replacing |= top->children[i]->type == VDEV_TYPE_REPLACING;
    if (!replacing) return top->children;
    unsigned k = 0;
    for (unsigned i = 0; i < nc; i++) {
        vdev_t *c = top->children[i];
        if (c->type != VDEV_TYPE_REPLACING) buf[k++] = c;
        else
            for (uint32_t j = 0; j < c->nchildren; j++) buf[k++] = c->children[j];
    }
    *n = k;
    return buf;
}

/* The side a read of the block at offset tries first: readers spread over the
 * sides by block position, in 1 MiB granules. */
static unsigned first_side(uint64_t offset, unsigned n) { return (unsigned)((offset >> 20) % n); }

static int mirror_write(vdev_t *top, vdev_t **sides, unsigned n, uint64_t offset, const void *buf,
                        uint64_t psize)
{
    uint64_t len = CAIRN_P2ROUNDUP(psize, 1ULL << top->ashift);
    void *wbuf = (void *)buf, *bounce = NULL;
    if (!is_io_aligned(buf)) {
        wbuf = bounce = cairn_alloc_aligned(len);
        memcpy(bounce, buf, psize);
    }
    vdev_batch_io_t stack_io[4];
    vdev_batch_io_t *io = n <= 4 ? stack_io : cairn_zalloc(n * sizeof *io);
    for (unsigned i = 0; i < n; i++)
        io[i] = (vdev_batch_io_t){.leaf = sides[i], .op = VDEV_IO_WRITE,
                                  .offset = VDEV_DATA_START + offset, .buf = wbuf, .len = len};
    unsigned failed = vdev_batch_run(io, n);
    if (io != stack_io) free(io);
    free(bounce);
    return failed < n ? 0 : -EIO;
}

/* SIDE_STALE: a leaf under resilver, never read; a resilver read writes it. */
enum side_status { SIDE_UNTRIED = 0, SIDE_MISSING, SIDE_EIO, SIDE_BAD, SIDE_GOOD, SIDE_STALE };

static int mirror_read(vdev_t *top, vdev_t **sides, unsigned n, uint64_t offset, void *buf,
                       uint64_t psize, vdev_verify_fn verify, void *arg, int flags,
                       vdev_read_result_t *res)
{
    uint64_t len = CAIRN_P2ROUNDUP(psize, 1ULL << top->ashift);
    uint64_t dev_off = VDEV_DATA_START + offset;
    bool scrub = flags & VDEV_READ_SCRUB;
    uint8_t st_stack[8];
    uint8_t *status = n <= 8 ? st_stack : cairn_zalloc(n);
    memset(status, 0, n);
    void *rbuf = is_io_aligned(buf) ? buf : NULL;
    void *bounce = NULL, **copies = NULL;
    int good = -1;
    bool any_bad = false;

    if (scrub) {
        /* Every side into its own buffer, all at once. */
        copies = cairn_zalloc(n * sizeof *copies);
        vdev_batch_io_t *io = cairn_zalloc(n * sizeof *io);
        for (unsigned i = 0; i < n; i++) {
            copies[i] = cairn_alloc_aligned(len);
            /* A stale side's copy may not be there: not read (the leaf is
             * given as missing, which the batch skips). */
            io[i] = (vdev_batch_io_t){.leaf = vdev_leaf_readable(sides[i]) ? sides[i] : &no_leaf,
                                      .op = VDEV_IO_READ, .offset = dev_off,
                                      .buf = copies[i], .len = len};
        }
        vdev_batch_run(io, n);
        for (unsigned i = 0; i < n; i++) {
            if (vdev_leaf_usable(sides[i]) && atomic_load(&sides[i]->stale)) status[i] = SIDE_STALE;
            else if (io[i].error == -ENXIO && !vdev_leaf_usable(sides[i])) status[i] = SIDE_MISSING;
            else if (io[i].error) status[i] = SIDE_EIO;
            else if (!verify || verify(copies[i], psize, arg)) status[i] = SIDE_GOOD;
            else status[i] = SIDE_BAD;
            if (status[i] == SIDE_GOOD && good < 0) good = (int)i;
        }
        free(io);
        if (good >= 0) memcpy(buf, copies[good], len);
    } else {
        if (!rbuf) rbuf = bounce = cairn_alloc_aligned(len);
        unsigned start = first_side(offset, n);
        for (unsigned k = 0; k < n && good < 0; k++) {
            unsigned i = (start + k) % n;
            if (!vdev_leaf_readable(sides[i])) {
                status[i] = vdev_leaf_usable(sides[i]) ? SIDE_STALE : SIDE_MISSING;
                continue;
            }
            vdev_batch_io_t io = {.leaf = sides[i], .op = VDEV_IO_READ, .offset = dev_off,
                                  .buf = rbuf, .len = len};
            if ((flags & VDEV_READ_NOW) && sides[i]->type == VDEV_TYPE_LEAF && sides[i]->ops &&
                sides[i]->ops->io_now)
                io.error = sides[i]->ops->io_now(sides[i], VDEV_IO_READ, dev_off, rbuf, len);
            else
                vdev_batch_run(&io, 1);
            if (io.error) status[i] = SIDE_EIO;
            else if (!verify || verify(rbuf, psize, arg)) status[i] = SIDE_GOOD, good = (int)i;
            else status[i] = SIDE_BAD;
        }
        if (good >= 0 && bounce) memcpy(buf, bounce, len);
    }

    uint32_t errors = 0;
    /* Speculative and nothing verified: no copy is known to be bad. */
    bool charge = good >= 0 || !(flags & VDEV_READ_SPECULATIVE);
    for (unsigned i = 0; i < n; i++) {
        if (status[i] == SIDE_BAD) any_bad = true;
        if (!charge) continue;
        if (status[i] == SIDE_EIO || status[i] == SIDE_BAD) errors++;
        if (status[i] == SIDE_BAD) vdev_note_error(sides[i], VDEV_ERR_CHECKSUM, dev_off, len, -ECKSUM);
    }

    bool resilver = flags & VDEV_READ_RESILVER;
    unsigned nstale = 0;
    for (unsigned i = 0; i < n; i++) {
        /* Sides after the one that verified were never looked at. */
        if (status[i] == SIDE_UNTRIED && vdev_leaf_usable(sides[i]) && atomic_load(&sides[i]->stale))
            status[i] = SIDE_STALE;
        nstale += status[i] == SIDE_STALE;
    }
    uint64_t repaired = 0;
    if (good >= 0 && (errors || (resilver && nstale)) && !(flags & VDEV_READ_NOREPAIR)) {
        const void *src = copies ? copies[good] : (bounce ? bounce : rbuf);
        vdev_batch_io_t *io = cairn_zalloc(n * sizeof *io);
        unsigned nio = 0;
        for (unsigned i = 0; i < n; i++)
            if (status[i] == SIDE_EIO || status[i] == SIDE_BAD ||
                (resilver && status[i] == SIDE_STALE))
                io[nio++] = (vdev_batch_io_t){.leaf = sides[i], .op = VDEV_IO_WRITE,
                                              .offset = dev_off, .buf = (void *)src, .len = len};
        vdev_batch_run(io, nio);
        for (unsigned k = 0; k < nio; k++) {
            if (io[k].error) continue;
            io[k].leaf->stats.repaired_bytes += len;
            repaired += len;
        }
        free(io);
    }

    if (copies) {
        for (unsigned i = 0; i < n; i++) free(copies[i]);
        free(copies);
    }
    free(bounce);
    if (status != st_stack) free(status);
    if (res) {
        res->repaired_bytes += repaired;
        res->errors_found += errors;
    }
    if (good >= 0) return 0;
    return any_bad ? -ECKSUM : -EIO;
}

/* ---- public entry points ---- */

uint64_t vdev_psize_to_asize(const vdev_t *top, uint64_t psize)
{
    if (top->type == VDEV_TYPE_RAIDZ) return vdev_raidz_psize_to_asize(top, psize);
    return CAIRN_P2ROUNDUP(psize, 1ULL << top->ashift);
}

static int check_block_args(const vdev_t *top, uint64_t offset, uint64_t psize)
{
    if (psize == 0 || !CAIRN_IS_P2ALIGNED(offset, 1ULL << top->ashift)) return -EINVAL;
    if (top->type != VDEV_TYPE_LEAF && top->type != VDEV_TYPE_MIRROR &&
        top->type != VDEV_TYPE_RAIDZ)
        return -EINVAL;
    if (top->type != VDEV_TYPE_LEAF && top->nchildren == 0) return -EINVAL;
    /* asize 0: not computed yet (tests, early import); the leaves bound I/O. */
    if (top->asize && (offset >= top->asize || vdev_psize_to_asize(top, psize) > top->asize - offset))
        return -EINVAL;
    return 0;
}

int vdev_write_block(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize)
{
    int rc = check_block_args(top, offset, psize);
    if (rc) return rc;
    if (top->type == VDEV_TYPE_RAIDZ) return vdev_raidz_write(top, offset, buf, psize);
    unsigned n;
    vdev_t *side_buf[2 * VDEV_MAX_CHILDREN];
    vdev_t **sides = mirror_sides(top, &n, side_buf);
    return mirror_write(top, sides ? sides : &top, n, offset, buf, psize);
}

int vdev_write_block_now(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize)
{
    if (top->type != VDEV_TYPE_LEAF || !top->ops || !top->ops->io_now || !is_io_aligned(buf) ||
        !vdev_leaf_usable(top))
        return vdev_write_block(top, offset, buf, psize);
    int rc = check_block_args(top, offset, psize);
    if (rc) return rc;
    return top->ops->io_now(top, VDEV_IO_WRITE, VDEV_DATA_START + offset, (void *)buf,
                            CAIRN_P2ROUNDUP(psize, 1ULL << top->ashift));
}

int vdev_read_run_now(vdev_t *top, uint64_t offset, const struct iovec *iov, int iovcnt)
{
    if (top->type != VDEV_TYPE_LEAF && top->type != VDEV_TYPE_MIRROR) return -ENOTSUP;
    uint64_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (!is_io_aligned(iov[i].iov_base) || !CAIRN_IS_P2ALIGNED(iov[i].iov_len, 1ULL << top->ashift))
            return -EINVAL;
        len += iov[i].iov_len;
    }
    int rc = check_block_args(top, offset, len);
    if (rc) return rc;
    unsigned n;
    vdev_t *side_buf[2 * VDEV_MAX_CHILDREN];
    vdev_t **sides = mirror_sides(top, &n, side_buf);
    if (!sides) sides = &top;
    /* The side a lone read of the first block would start at; the next usable
     * one if that is gone. No fallback to other sides here: the caller's
     * per-block reads do that, with repair. */
    unsigned start = first_side(offset, n);
    for (unsigned k = 0; k < n; k++) {
        vdev_t *side = sides[(start + k) % n];
        if (!vdev_leaf_readable(side)) continue;
        if (side->type != VDEV_TYPE_LEAF || !side->ops || !side->ops->readv_now) return -ENOTSUP;
        return side->ops->readv_now(side, VDEV_DATA_START + offset, iov, iovcnt) ? -EIO : 0;
    }
    return -EIO;
}

unsigned vdev_write_blocks(vdev_t *top, vdev_block_write_t *blocks, size_t n)
{
    unsigned failed = 0;
    size_t nvalid = 0;
    for (size_t i = 0; i < n; i++) {
        blocks[i].error = check_block_args(top, blocks[i].offset, blocks[i].psize);
        if (blocks[i].error) failed++;
        else nvalid++;
    }
    if (!nvalid) return failed;
    vdev_block_write_t *ok = cairn_zalloc(nvalid * sizeof *ok);
    size_t *idx = cairn_zalloc(nvalid * sizeof *idx);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!blocks[i].error) {
            idx[k] = i;
            ok[k++] = blocks[i];
        }
    if (top->type == VDEV_TYPE_RAIDZ) {
        failed += vdev_raidz_write_many(top, ok, nvalid);
    } else {
        unsigned nsides;
        vdev_t *side_buf[2 * VDEV_MAX_CHILDREN];
        vdev_t **sides = mirror_sides(top, &nsides, side_buf);
        if (!sides) sides = &top;
        vdev_batch_io_t *io = cairn_zalloc(nvalid * nsides * sizeof *io);
        void **bounce = cairn_zalloc(nvalid * sizeof *bounce);
        for (size_t b = 0; b < nvalid; b++) {
            uint64_t len = CAIRN_P2ROUNDUP(ok[b].psize, 1ULL << top->ashift);
            void *wbuf = (void *)ok[b].buf;
            if (!is_io_aligned(wbuf)) {
                wbuf = bounce[b] = cairn_alloc_aligned(len);
                memcpy(wbuf, ok[b].buf, ok[b].psize);
            }
            for (unsigned s = 0; s < nsides; s++)
                io[b * nsides + s] = (vdev_batch_io_t){.leaf = sides[s], .op = VDEV_IO_WRITE,
                                                       .offset = VDEV_DATA_START + ok[b].offset,
                                                       .buf = wbuf, .len = len};
        }
        vdev_batch_run_merged(io, (unsigned)(nvalid * nsides));
        for (size_t b = 0; b < nvalid; b++) {
            unsigned bad = 0;
            for (unsigned s = 0; s < nsides; s++) bad += io[b * nsides + s].error != 0;
            /* Written when at least one side took it. */
            ok[b].error = bad < nsides ? 0 : -EIO;
            failed += ok[b].error != 0;
            free(bounce[b]);
        }
        free(bounce);
        free(io);
    }
    for (k = 0; k < nvalid; k++) blocks[idx[k]].error = ok[k].error;
    free(ok);
    free(idx);
    return failed;
}

int vdev_read_block(vdev_t *top, uint64_t offset, void *buf, uint64_t psize, vdev_verify_fn verify,
                    void *arg, int flags, vdev_read_result_t *res)
{
    if (res) *res = (vdev_read_result_t){0};
    int rc = check_block_args(top, offset, psize);
    if (rc) return rc;
    if (top->type == VDEV_TYPE_RAIDZ)
        return vdev_raidz_read(top, offset, buf, psize, verify, arg, flags, res);
    unsigned n;
    vdev_t *side_buf[2 * VDEV_MAX_CHILDREN];
    vdev_t **sides = mirror_sides(top, &n, side_buf);
    return mirror_read(top, sides ? sides : &top, n, offset, buf, psize, verify, arg, flags, res);
}
