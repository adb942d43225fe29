/*
 * Write aggregation: blocks written together through vdev_write_blocks() whose
 * pieces touch on a leaf must reach that leaf as fewer, larger writes, and
 * every block must read back intact (mirror, raidz, single), including when a
 * leaf fails the merged write.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "leaf_file_fixture.h"

#include <cairn/raidz.h>
#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MEM_LEAF_SIZE (96 * CAIRN_MIB)

typedef struct mem_leaf {
    uint8_t *data;
    _Atomic unsigned writes;
    uint64_t max_write;
    bool fail_writes;
} mem_leaf_t;

static int mem_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t off, void *buf, size_t len,
                      vdev_io_done_t done, void *arg)
{
    mem_leaf_t *m = leaf->leaf_priv;
    int err = 0;
    if (op == VDEV_IO_WRITE) {
        atomic_fetch_add(&m->writes, 1);
        if (len > m->max_write) m->max_write = len;
        if (m->fail_writes) err = -EIO;
        else memcpy(m->data + off, buf, len);
    } else if (op == VDEV_IO_READ) {
        memcpy(buf, m->data + off, len);
    }
    done(arg, err);
    return 0;
}

static void mem_close(vdev_t *leaf)
{
    mem_leaf_t *m = leaf->leaf_priv;
    free(m->data);
    free(m);
    leaf->leaf_priv = NULL;
}

static const vdev_leaf_ops_t mem_ops = {.submit = mem_submit, .close = mem_close};

static vdev_t *mem_leaf(void)
{
    vdev_t *v = vdev_alloc(VDEV_TYPE_LEAF, cairn_random_guid());
    mem_leaf_t *m = cairn_zalloc(sizeof *m);
    m->data = cairn_zalloc(MEM_LEAF_SIZE);
    v->leaf_priv = m;
    v->ops = &mem_ops;
    v->psize = MEM_LEAF_SIZE;
    v->path = cairn_strdup("mem");
    return v;
}

static vdev_t *make_top(vdev_type_t type, unsigned nchildren, unsigned nparity)
{
    vdev_t *top = type == VDEV_TYPE_LEAF ? mem_leaf() : vdev_alloc(type, cairn_random_guid());
    top->nparity = nparity;
    top->ashift = 12;
    for (unsigned i = 0; i < nchildren; i++) vdev_add_child(top, mem_leaf());
    vdev_compute_asize(top);
    vdev_state_refresh(top);
    return top;
}

typedef struct expect {
    uint8_t *data;
    uint64_t psize;
} expect_t;

static bool verify_eq(const void *buf, uint64_t psize, void *arg)
{
    const expect_t *e = arg;
    return psize == e->psize && memcmp(buf, e->data, psize) == 0;
}

static unsigned total_writes(vdev_t *top)
{
    if (vdev_is_leaf(top)) return ((mem_leaf_t *)top->leaf_priv)->writes;
    unsigned n = 0;
    for (uint32_t i = 0; i < top->nchildren; i++) n += total_writes(top->children[i]);
    return n;
}

/* Writes nblocks consecutive blocks of bsize, first one by one, then together. */
static void run(vdev_type_t type, unsigned nchildren, unsigned nparity, uint64_t bsize)
{
    const unsigned nblocks = 16;
    vdev_t *top = make_top(type, nchildren, nparity);
    uint64_t asize = vdev_psize_to_asize(top, bsize);
    cairn_rng_t r;
    cairn_rng_seed(&r, bsize * 31 + nchildren);
    vdev_block_write_t *blocks = cairn_zalloc(nblocks * sizeof *blocks);
    expect_t *exp = cairn_zalloc(nblocks * sizeof *exp);
    for (unsigned i = 0; i < nblocks; i++) {
        exp[i].data = cairn_alloc_aligned(bsize);
        exp[i].psize = bsize;
        for (uint64_t k = 0; k < bsize; k++) exp[i].data[k] = (uint8_t)cairn_rng_next(&r);
    }
    /* One by one, at the start of the address space. */
    unsigned w0 = total_writes(top);
    for (unsigned i = 0; i < nblocks; i++)
        assert_int_equal(vdev_write_block(top, i * asize, exp[i].data, bsize), 0);
    unsigned single = total_writes(top) - w0;
    /* Together, further on. */
    uint64_t base = nblocks * asize;
    for (unsigned i = 0; i < nblocks; i++)
        blocks[i] = (vdev_block_write_t){.offset = base + i * asize, .buf = exp[i].data, .psize = bsize};
    w0 = total_writes(top);
    assert_int_equal(vdev_write_blocks(top, blocks, nblocks), 0);
    unsigned merged = total_writes(top) - w0;
    for (unsigned i = 0; i < nblocks; i++) assert_int_equal(blocks[i].error, 0);
    assert_true(merged * 4 <= single); /* far fewer device writes */
    uint8_t *buf = cairn_alloc_aligned(bsize);
    for (unsigned i = 0; i < nblocks; i++) {
        memset(buf, 0, bsize);
        assert_int_equal(vdev_read_block(top, base + i * asize, buf, bsize, verify_eq, &exp[i],
                                         VDEV_READ_SCRUB, NULL), 0);
        assert_memory_equal(buf, exp[i].data, bsize);
    }
    /* A leaf that fails: the redundancy still covers every block. */
    if (type != VDEV_TYPE_LEAF) {
        ((mem_leaf_t *)top->children[0]->leaf_priv)->fail_writes = true;
        for (unsigned i = 0; i < nblocks; i++) blocks[i].offset += nblocks * asize;
        assert_int_equal(vdev_write_blocks(top, blocks, nblocks), 0);
        for (unsigned i = 0; i < nblocks; i++) {
            assert_int_equal(blocks[i].error, 0);
            assert_int_equal(vdev_read_block(top, blocks[i].offset, buf, bsize, verify_eq, &exp[i],
                                             VDEV_READ_NOREPAIR, NULL), 0);
        }
        /* Every leaf failing: every block reports the error. */
        for (uint32_t c = 0; c < top->nchildren; c++)
            ((mem_leaf_t *)top->children[c]->leaf_priv)->fail_writes = true;
        assert_int_equal(vdev_write_blocks(top, blocks, nblocks), nblocks);
        for (unsigned i = 0; i < nblocks; i++) assert_int_equal(blocks[i].error, -EIO);
    }
    free(buf);
    for (unsigned i = 0; i < nblocks; i++) free(exp[i].data);
    free(exp);
    free(blocks);
    vdev_free(top);
}

static void test_mirror_128k(void **s) { (void)s; run(VDEV_TYPE_MIRROR, 2, 0, 128 * 1024); }
static void test_raidz2_128k(void **s) { (void)s; run(VDEV_TYPE_RAIDZ, 6, 2, 128 * 1024); }
static void test_raidz1_16k(void **s) { (void)s; run(VDEV_TYPE_RAIDZ, 4, 1, 16 * 1024); }
static void test_single_64k(void **s) { (void)s; run(VDEV_TYPE_LEAF, 0, 0, 64 * 1024); }

/* Pieces that do not touch are not merged, and a merged run never exceeds the cap. */
static void test_merge_rules(void **s)
{
    (void)s;
    vdev_t *leaf = mem_leaf();
    mem_leaf_t *m = leaf->leaf_priv;
    enum { N = 40 };
    vdev_batch_io_t io[N];
    uint8_t *bufs[N];
    for (int i = 0; i < N; i++) {
        bufs[i] = cairn_alloc_aligned(64 * 1024);
        memset(bufs[i], i + 1, 64 * 1024);
        /* 0..19 touch each other; 20..39 leave a 4K gap after each. */
        uint64_t off = i < 20 ? (uint64_t)i * 65536 : 8 * CAIRN_MIB + (uint64_t)(i - 20) * 69632;
        io[N - 1 - i] = (vdev_batch_io_t){.leaf = leaf, .op = VDEV_IO_WRITE, .offset = off,
                                          .buf = bufs[i], .len = 64 * 1024};
    }
    assert_int_equal(vdev_batch_run_merged(io, N), 0);
    /* 20 touching 64K pieces = 1.25 MiB: two runs (1 MiB cap); 20 separate ones. */
    assert_int_equal(m->writes, 2 + 20);
    assert_true(m->max_write <= VDEV_AGGREGATE_MAX);
    for (int i = 0; i < N; i++) {
        uint64_t off = i < 20 ? (uint64_t)i * 65536 : 8 * CAIRN_MIB + (uint64_t)(i - 20) * 69632;
        assert_memory_equal(m->data + off, bufs[i], 64 * 1024);
        free(bufs[i]);
    }
    vdev_free(leaf);
}

/* Piece i's size: 4-16 KiB, so runs mix sizes. */
static size_t piece_len(int i) { return (size_t)(i % 4 + 1) * 4096; }

/* Fills n pieces that touch from off (sizes piece_len, each its own buffer) and
 * queues them into io[] in reverse order, as a txg's blocks may come. */
static void touching_pieces(vdev_t *leaf, uint64_t off, int n, uint8_t seed, vdev_batch_io_t *io,
                            uint8_t **bufs, uint64_t *offs)
{
    for (int i = 0; i < n; i++) {
        size_t len = piece_len(i);
        bufs[i] = cairn_alloc_aligned(len);
        for (size_t b = 0; b < len; b++) bufs[i][b] = (uint8_t)(b * 13 + i * 7 + seed);
        offs[i] = off;
        io[n - 1 - i] = (vdev_batch_io_t){.leaf = leaf, .op = VDEV_IO_WRITE, .offset = off,
                                          .buf = bufs[i], .len = len};
        off += len;
    }
}

static void check_pieces(int fd, int n, uint8_t **bufs, const uint64_t *offs)
{
    for (int i = 0; i < n; i++) {
        size_t len = piece_len(i);
        uint8_t *got = cairn_alloc_aligned(len);
        assert_int_equal(pread(fd, got, len, (off_t)offs[i]), (ssize_t)len);
        assert_memory_equal(got, bufs[i], len);
        free(got);
        free(bufs[i]);
    }
}

/* Pieces that break vdev.h's rules for submit_writev are refused before
 * anything is queued: none, an empty one, pieces not multiples of 512 even
 * when their total is (a direct write needs every piece whole sectors). */
static void never_done(void *arg, int error)
{
    (void)arg, (void)error;
    fail_msg("a refused write completed");
}

static void refuses_bad_pieces(vdev_t *leaf)
{
    uint8_t *b = cairn_alloc_aligned(8192);
    struct iovec bad[][2] = {{{b, 4096}, {b + 4096, 0}}, {{b, 3996}, {b + 3996, 100}}};
    assert_int_equal(leaf->ops->submit_writev(leaf, 0, bad[0], 0, never_done, NULL), -EINVAL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(leaf->ops->submit_writev(leaf, 0, bad[i], 2, never_done, NULL), -EINVAL);
    free(b);
}

/* A file leaf takes a merged run as one write from the pieces themselves
 * (submit_writev, no bounce buffer): one device write per run, every byte in
 * place - also when the kernel loses the write and the deadman redoes it
 * (pwritev from the pieces still to do). */
static void test_file_leaf_writes_from_pieces(void **s)
{
    (void)s;
    alarm(60); /* a lost write the deadman does not redo would hang: fail instead */
    test_leaf_file_t f;
    test_leaf_file_make(&f, "aggregate", 32 * CAIRN_MIB);
    int fd = f.fd;
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(f.path, &leaf), 0);
    assert_non_null(leaf->ops->submit_writev);
    refuses_bad_pieces(leaf);

    enum { N = 24, SEP = 3 };
    vdev_batch_io_t io[N + SEP];
    uint8_t *bufs[N + SEP];
    uint64_t offs[N + SEP];
    touching_pieces(leaf, 4 * CAIRN_MIB, N, 1, io, bufs, offs);
    for (int i = 0; i < SEP; i++) { /* apart from everything: written alone */
        bufs[N + i] = cairn_alloc_aligned(4096);
        memset(bufs[N + i], 0xa0 + i, 4096);
        offs[N + i] = 12 * CAIRN_MIB + (uint64_t)i * 65536;
        io[N + i] = (vdev_batch_io_t){.leaf = leaf, .op = VDEV_IO_WRITE, .offset = offs[N + i],
                                      .buf = bufs[N + i], .len = 4096};
    }
    uint64_t w0 = atomic_load(&leaf->stats.writes);
    assert_int_equal(vdev_batch_run_merged(io, N + SEP), 0);
    assert_int_equal(atomic_load(&leaf->stats.writes) - w0, 1 + SEP);
    for (int i = 0; i < N + SEP; i++) assert_int_equal(io[i].error, 0);
    for (int i = N; i < N + SEP; i++) {
        uint8_t *got = cairn_alloc_aligned(4096);
        assert_int_equal(pread(fd, got, 4096, (off_t)offs[i]), 4096);
        assert_memory_equal(got, bufs[i], 4096);
        free(got);
        free(bufs[i]);
    }
    check_pieces(fd, N, bufs, offs);

    /* Lost by the kernel: the deadman redoes the vectored write synchronously. */
    vdev_file_test_deadman(50 * 1000000ULL, 200 * 1000000ULL);
    touching_pieces(leaf, 8 * CAIRN_MIB, N, 99, io, bufs, offs);
    assert_int_equal(vdev_file_test_lose_next(leaf), 0);
    uint64_t t0 = cairn_now_ns();
    assert_int_equal(vdev_batch_run_merged(io, N), 0);
    assert_true(cairn_now_ns() - t0 >= 200 * 1000000ULL); /* it went through the deadman */
    check_pieces(fd, N, bufs, offs);
    vdev_file_test_deadman(30ULL * 1000000000ULL, 120ULL * 1000000000ULL);

    vdev_free(leaf);
    test_leaf_file_remove(&f);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mirror_128k), cmocka_unit_test(test_raidz2_128k),
        cmocka_unit_test(test_raidz1_16k), cmocka_unit_test(test_single_64k),
        cmocka_unit_test(test_merge_rules), cmocka_unit_test(test_file_leaf_writes_from_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
