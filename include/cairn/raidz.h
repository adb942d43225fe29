/*
 * RAID-Z parity arithmetic, and the few helpers the vdev layer's top-level
 * block I/O files share with each other.
 *
 * Parity columns are computed over GF(2^8) with the field polynomial
 * x^8 + x^4 + x^3 + x^2 + 1 (0x11d):
 *     P = D_0 + D_1 + ... + D_{k-1}                 (plain XOR)
 *     Q = 2^0 D_0 + 2^1 D_1 + ... + 2^{k-1} D_{k-1}
 *     R = 4^0 D_0 + 4^1 D_1 + ... + 4^{k-1} D_{k-1}
 * where D_i is data column i of the stripe (byte-wise), and "+" is XOR.
 * Because 4^i = (2^i)^2 the three equations form a Vandermonde system in
 * x_i = 2^i, so any three erased columns can be solved for while k <= 255.
 *
 * Columns may be of different lengths (a stripe's short columns); every
 * column is treated as zero-padded to the parity length.
 */
#ifndef CAIRN_RAIDZ_H
#define CAIRN_RAIDZ_H

#include <cairn/types.h>
#include <cairn/vdev.h>

/* ---- GF(2^8) ---- */
uint8_t raidz_gf_mul(uint8_t a, uint8_t b);
uint8_t raidz_gf_inv(uint8_t a);          /* a != 0 */
uint8_t raidz_gf_exp2(unsigned e);        /* 2^e */
/* dst[i] ^= c * src[i] for i < len (table-driven). */
void raidz_gf_mul_xor(uint8_t *dst, const uint8_t *src, size_t len, uint8_t c);

/*
 * Computes parity columns 0..nparity-1 (P, Q, R), each `len` bytes, from
 * ndata data columns; data[i] holds data_len[i] <= len bytes, the rest of the
 * column being zero. A NULL parity[j] is not computed.
 */
void raidz_generate(unsigned nparity, uint8_t *const parity[], size_t len, unsigned ndata,
                    const uint8_t *const data[], const size_t data_len[]);

/*
 * Rebuilds the columns flagged in missing[] (indices 0..nparity-1 are the
 * parity columns, nparity + i is data column i) from the others. At most
 * nparity columns may be missing. Missing data columns are rewritten
 * (data_len[i] bytes); a missing parity column is regenerated unless its
 * parity[] pointer is NULL. Returns 0, or -EINVAL when too many are missing.
 */
int raidz_reconstruct(unsigned nparity, uint8_t *const parity[], size_t len, unsigned ndata,
                      uint8_t *const data[], const size_t data_len[], const bool missing[]);

/* ---- internal to src/vdev: parallel leaf I/O and per-type block I/O ---- */

/* One leaf I/O of a batch; error is filled in when the batch completes. */
typedef struct vdev_batch_io {
    vdev_t *leaf;
    vdev_io_op_t op;
    uint64_t offset; /* absolute device offset */
    void *buf;
    size_t len;
    /* A write from several buffers instead of buf (len is their total): only
     * for a leaf with submit_writev (vdev_batch_run_merged). */
    const struct iovec *iov;
    int iovcnt;
    int error;       /* 0, or negative errno (-ENXIO: leaf missing, not tried) */
    struct vdev_batch *batch;
} vdev_batch_io_t;

/* True when a leaf can take I/O (not UNAVAIL/FAULTED/OFFLINE, has ops). */
bool vdev_leaf_usable(const vdev_t *leaf);
/* Ops of a leaf whose device another vdev_t took over (a replacement of the
 * same file): every I/O fails with -ENXIO, close does nothing. A reader that
 * still holds the old vdev_t never reaches freed state through it. */
extern const vdev_leaf_ops_t vdev_gone_ops;
/* Issues every io[] in parallel through leaf->ops->submit and waits for all.
 * Leaves that are not usable get -ENXIO without being tried. Returns the
 * number of I/Os that failed. */
unsigned vdev_batch_run(vdev_batch_io_t *io, unsigned n);
/* The same, but writes to one leaf whose ranges touch are merged (up to
 * VDEV_AGGREGATE_MAX bytes) into one I/O through a bounce buffer; each io[] still
 * gets its own error. Returns the number of I/Os that failed. */
#define VDEV_AGGREGATE_MAX (1024 * 1024)
unsigned vdev_batch_run_merged(vdev_batch_io_t *io, unsigned n);

uint64_t vdev_raidz_psize_to_asize(const vdev_t *top, uint64_t psize);
int vdev_raidz_write(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize);
unsigned vdev_raidz_write_many(vdev_t *top, vdev_block_write_t *blocks, size_t n);
int vdev_raidz_read(vdev_t *top, uint64_t offset, void *buf, uint64_t psize, vdev_verify_fn verify,
                    void *arg, int flags, vdev_read_result_t *res);

#endif
