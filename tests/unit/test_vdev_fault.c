/*
 * Fault-injecting leaves (src/vdev/vdev_fault.c): the volatile write cache,
 * power cuts (drop, keep, random tearing), frozen leaves, read injections and
 * failing writes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/raidz.h>
#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEAF_SIZE (64 * CAIRN_MIB)

typedef struct fixture {
    char dir[512];
    char path[600];
    char fault_path[700];
    vdev_t *leaf;
} fixture_t;

static void create_file(const char *path)
{
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)LEAF_SIZE), 0);
    close(fd);
}

static int fixture_setup(void **state)
{
    fixture_t *f = cairn_zalloc(sizeof *f);
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof f->dir, "%s/test_vdev_fault.XXXXXX", base);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/leaf0", f->dir);
    snprintf(f->fault_path, sizeof f->fault_path, "fault:%s", f->path);
    create_file(f->path);
    vdev_fault_reset();
    assert_int_equal(vdev_leaf_open(f->fault_path, &f->leaf), 0);
    assert_int_equal(f->leaf->state, VDEV_STATE_ONLINE);
    assert_int_equal(f->leaf->psize, LEAF_SIZE);
    assert_string_equal(f->leaf->path, f->fault_path);
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    fixture_t *f = *state;
    if (f->leaf) vdev_free(f->leaf);
    vdev_fault_reset();
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void fill(char *buf, size_t len, uint64_t tag)
{
    cairn_rng_t r;
    cairn_rng_seed(&r, tag);
    for (size_t i = 0; i < len; i++) buf[i] = (char)(1 + cairn_rng_below(&r, 255)); /* never 0 */
}

/* Reads the file directly, bypassing the leaf. */
static void file_read(const fixture_t *f, uint64_t off, char *buf, size_t len)
{
    int fd = open(f->path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static bool all_zero(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i]) return false;
    return true;
}

static void leaf_write(vdev_t *leaf, uint64_t off, size_t len, uint64_t tag)
{
    char *buf = cairn_alloc_aligned(len);
    fill(buf, len, tag);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, off, buf, len), 0);
    free(buf);
}

static void test_writes_held_until_flush(void **state)
{
    fixture_t *f = *state;
    const size_t len = 64 * 1024;
    const uint64_t off = 8 * CAIRN_MIB;
    char *a = cairn_alloc_aligned(len), *b = cairn_alloc_aligned(4096), *got = cairn_alloc_aligned(len);
    fill(a, len, 1);
    fill(b, 4096, 2);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_WRITE, off, a, len), 0);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_WRITE, off + 8192, b, 4096), 0);

    /* Not in the file yet ... */
    file_read(f, off, got, len);
    assert_true(all_zero(got, len));
    /* ... but the leaf returns the newest data, with the later write over the earlier. */
    char *expect = cairn_alloc_aligned(len);
    memcpy(expect, a, len);
    memcpy(expect + 8192, b, 4096);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, len), 0);
    assert_memory_equal(got, expect, len);
    /* A read straddling held and unwritten data. */
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off - 4096, got, 8192), 0);
    assert_true(all_zero(got, 4096));
    assert_memory_equal(got + 4096, a, 4096);

    vdev_fault_stats_t s = vdev_fault_stats();
    assert_int_equal(s.writes_held, 2);
    assert_int_equal(s.writes_flushed, 0);

    assert_int_equal(vdev_flush(f->leaf), 0);
    file_read(f, off, got, len);
    assert_memory_equal(got, expect, len);
    s = vdev_fault_stats();
    assert_int_equal(s.writes_flushed, 2);
    assert_int_equal(f->leaf->stats.writes, 2);
    free(a);
    free(b);
    free(got);
    free(expect);
}

static void test_powercut_drop(void **state)
{
    fixture_t *f = *state;
    leaf_write(f->leaf, 4 * CAIRN_MIB, 8192, 10);
    assert_int_equal(vdev_flush(f->leaf), 0);
    leaf_write(f->leaf, 4 * CAIRN_MIB, 8192, 11); /* overwrite, unflushed */
    leaf_write(f->leaf, 5 * CAIRN_MIB, 8192, 12);
    vdev_fault_powercut(1, VDEV_FAULT_CUT_DROP);

    char *got = cairn_alloc_aligned(8192), *expect = cairn_alloc_aligned(8192);
    fill(expect, 8192, 10);
    file_read(f, 4 * CAIRN_MIB, got, 8192);
    assert_memory_equal(got, expect, 8192); /* as at the last flush */
    file_read(f, 5 * CAIRN_MIB, got, 8192);
    assert_true(all_zero(got, 8192));
    vdev_fault_stats_t s = vdev_fault_stats();
    assert_int_equal(s.cut_dropped, 2);
    assert_int_equal(s.cut_kept + s.cut_torn, 0);
    assert_int_equal(s.powercuts, 1);

    /* The dead leaf refuses everything. */
    assert_int_equal(f->leaf->ops->submit(f->leaf, VDEV_IO_READ, 0, got, 4096, NULL, NULL), -EIO);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_WRITE, 4 * CAIRN_MIB, got, 4096), -EIO);
    assert_int_equal(vdev_flush(f->leaf), -EIO);

    /* The file can be reopened while the abandoned leaf still exists. */
    vdev_t *again = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &again), 0);
    assert_int_equal(vdev_leaf_io_sync(again, VDEV_IO_READ, 4 * CAIRN_MIB, got, 8192), 0);
    assert_memory_equal(got, expect, 8192);
    vdev_free(again);

    /* reset unfreezes. */
    vdev_fault_reset();
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, 4 * CAIRN_MIB, got, 8192), 0);
    assert_memory_equal(got, expect, 8192);
    free(got);
    free(expect);
}

static void test_powercut_keep(void **state)
{
    fixture_t *f = *state;
    for (unsigned i = 0; i < 5; i++) leaf_write(f->leaf, 6 * CAIRN_MIB + i * 65536, 65536, 20 + i);
    leaf_write(f->leaf, 6 * CAIRN_MIB, 4096, 30); /* overwrites the start of the first */
    vdev_fault_powercut(7, VDEV_FAULT_CUT_KEEP);
    char *got = cairn_alloc_aligned(65536), *expect = cairn_alloc_aligned(65536);
    for (unsigned i = 0; i < 5; i++) {
        fill(expect, 65536, 20 + i);
        if (i == 0) fill(expect, 4096, 30); /* applied in order: the later write wins */
        file_read(f, 6 * CAIRN_MIB + i * 65536, got, 65536);
        assert_memory_equal(got, expect, 65536);
    }
    vdev_fault_stats_t s = vdev_fault_stats();
    assert_int_equal(s.cut_kept, 6);
    assert_int_equal(s.cut_dropped + s.cut_torn, 0);
    free(got);
    free(expect);
}

/* Per-sector outcome of a RANDOM cut over NW writes of WSECT sectors each. */
#define NW 64
#define WSECT 16
typedef struct cut_outcome {
    bool sector_new[NW][WSECT];
    unsigned whole_new, whole_old, mixed;
    vdev_fault_stats_t stats;
} cut_outcome_t;

static void random_cut_once(fixture_t *f, uint64_t seed, cut_outcome_t *out)
{
    const size_t wlen = WSECT * 512;
    const uint64_t base = 16 * CAIRN_MIB;
    /* Old contents, flushed; then new contents, held. */
    for (unsigned i = 0; i < NW; i++) leaf_write(f->leaf, base + i * 65536, wlen, 100 + i);
    assert_int_equal(vdev_flush(f->leaf), 0);
    vdev_fault_reset(); /* counters only concern the cut */
    for (unsigned i = 0; i < NW; i++) leaf_write(f->leaf, base + i * 65536, wlen, 500 + i);
    vdev_fault_powercut(seed, VDEV_FAULT_CUT_RANDOM);
    out->stats = vdev_fault_stats();

    char *got = cairn_alloc_aligned(wlen), *old = cairn_alloc_aligned(wlen),
         *new = cairn_alloc_aligned(wlen);
    out->whole_new = out->whole_old = out->mixed = 0;
    for (unsigned i = 0; i < NW; i++) {
        fill(old, wlen, 100 + i);
        fill(new, wlen, 500 + i);
        file_read(f, base + i * 65536, got, wlen);
        unsigned nnew = 0;
        for (unsigned s = 0; s < WSECT; s++) {
            bool is_new = memcmp(got + s * 512, new + s * 512, 512) == 0;
            bool is_old = memcmp(got + s * 512, old + s * 512, 512) == 0;
            assert_true(is_new != is_old); /* every sector is one or the other, never a blend */
            out->sector_new[i][s] = is_new;
            nnew += is_new;
        }
        if (nnew == WSECT) out->whole_new++;
        else if (nnew == 0) out->whole_old++;
        else out->mixed++;
    }
    free(got);
    free(old);
    free(new);
}

static void test_powercut_random(void **state)
{
    fixture_t *f = *state;
    cut_outcome_t *a = cairn_zalloc(sizeof *a), *b = cairn_zalloc(sizeof *b);
    random_cut_once(f, 42, a);
    assert_int_equal(a->stats.cut_dropped + a->stats.cut_kept + a->stats.cut_torn, NW);
    /* With 64 writes, each fate occurs (probability of missing one is ~1e-11). */
    assert_true(a->stats.cut_dropped > 0);
    assert_true(a->stats.cut_kept > 0);
    assert_true(a->stats.cut_torn > 0);
    /* The file agrees with the counters. */
    assert_int_equal(a->whole_new, a->stats.cut_kept);
    assert_int_equal(a->whole_old, a->stats.cut_dropped);
    assert_int_equal(a->mixed, a->stats.cut_torn);

    /* The same seed on the same history reproduces the same crash image. */
    vdev_free(f->leaf);
    f->leaf = NULL;
    vdev_fault_reset();
    create_file(f->path);
    assert_int_equal(vdev_leaf_open(f->fault_path, &f->leaf), 0);
    random_cut_once(f, 42, b);
    assert_memory_equal(a->sector_new, b->sector_new, sizeof a->sector_new);
    free(a);
    free(b);
}

static void test_inject_read(void **state)
{
    fixture_t *f = *state;
    const uint64_t off = 9 * CAIRN_MIB;
    const size_t len = 32768;
    leaf_write(f->leaf, off, len, 40);
    assert_int_equal(vdev_flush(f->leaf), 0);
    char *stored = cairn_alloc_aligned(len), *got = cairn_alloc_aligned(len);
    fill(stored, len, 40);

    assert_int_equal(vdev_fault_inject_read(f->path, off + 4096, 4096, VDEV_FAULT_READ_EIO), 0);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, len), -EIO);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off + 4096, got, 512), -EIO);
    /* Reads that do not overlap are untouched. */
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, 4096), 0);
    assert_memory_equal(got, stored, 4096);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off + 8192, got, 4096), 0);
    assert_memory_equal(got, stored + 8192, 4096);
    assert_int_equal(vdev_fault_stats().reads_failed, 2);
    assert_true(f->leaf->stats.read_errors >= 2);

    assert_int_equal(vdev_fault_clear(f->path), 0);
    assert_int_equal(vdev_fault_inject_read(f->path, off + 1024, 2048, VDEV_FAULT_READ_GARBAGE), 0);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, len), 0);
    for (size_t i = 0; i < len; i++) {
        if (i >= 1024 && i < 3072) assert_true(got[i] != stored[i]);
        else assert_true(got[i] == stored[i]);
    }
    assert_int_equal(vdev_fault_stats().reads_garbled, 1);
    /* Garbage is only what the reader sees: the stored data is intact. */
    file_read(f, off, got, len);
    assert_memory_equal(got, stored, len);

    assert_int_equal(vdev_fault_clear(f->path), 0);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, len), 0);
    assert_memory_equal(got, stored, len);

    /* Unknown leaves and empty ranges are refused. */
    assert_int_equal(vdev_fault_inject_read("/no/such/leaf", 0, 512, VDEV_FAULT_READ_EIO), -ENOENT);
    assert_int_equal(vdev_fault_inject_read(f->path, 0, 0, VDEV_FAULT_READ_EIO), -EINVAL);
    assert_int_equal(vdev_fault_clear("/no/such/leaf"), -ENOENT);
    free(stored);
    free(got);
}

static void test_fail_writes(void **state)
{
    fixture_t *f = *state;
    const uint64_t off = 10 * CAIRN_MIB;
    leaf_write(f->leaf, off, 4096, 50);
    assert_int_equal(vdev_fault_fail_writes(f->path, true), 0);
    char *buf = cairn_alloc_aligned(4096), *got = cairn_alloc_aligned(4096), *expect = cairn_alloc_aligned(4096);
    fill(buf, 4096, 51);
    fill(expect, 4096, 50);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_WRITE, off, buf, 4096), -EIO);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, 4096), 0);
    assert_memory_equal(got, expect, 4096); /* the failed write changed nothing */
    assert_int_equal(f->leaf->stats.write_errors, 1);
    assert_int_equal(vdev_fault_stats().writes_failed, 1);
    assert_int_equal(vdev_fault_fail_writes(f->path, false), 0);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_WRITE, off, buf, 4096), 0);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, 4096), 0);
    assert_memory_equal(got, buf, 4096);
    free(buf);
    free(got);
    free(expect);
}

static void test_close_discards_unflushed(void **state)
{
    fixture_t *f = *state;
    leaf_write(f->leaf, 11 * CAIRN_MIB, 4096, 60);
    vdev_free(f->leaf);
    f->leaf = NULL;
    char *got = cairn_alloc_aligned(4096);
    file_read(f, 11 * CAIRN_MIB, got, 4096);
    assert_true(all_zero(got, 4096));
    assert_int_equal(vdev_fault_stats().close_dropped, 1);
    free(got);
}

/* A power cut makes a leaf's flush fail; the other leaves are still flushed, and
 * a mirror whose other side flushed is durable through it, while the cut leaf
 * alone is not. */
static void test_flush_tree_after_cut(void **state)
{
    fixture_t *f = *state;
    char path2[620];
    snprintf(path2, sizeof path2, "%s/leaf1", f->dir);
    create_file(path2);
    vdev_t *plain = NULL;
    assert_int_equal(vdev_leaf_open(path2, &plain), 0);
    vdev_t *mirror = vdev_alloc(VDEV_TYPE_MIRROR, 3);
    vdev_add_child(mirror, f->leaf);
    vdev_add_child(mirror, plain);
    leaf_write(f->leaf, 12 * CAIRN_MIB, 4096, 70);
    assert_int_equal(vdev_flush(mirror), 0);
    char *got = cairn_alloc_aligned(4096);
    file_read(f, 12 * CAIRN_MIB, got, 4096);
    assert_false(all_zero(got, 4096));
    vdev_fault_powercut(3, VDEV_FAULT_CUT_DROP);
    assert_int_equal(vdev_flush(mirror), 0);
    assert_int_equal(vdev_flush(f->leaf), -EIO);
    vdev_free(mirror); /* frees f->leaf too */
    f->leaf = NULL;
    unlink(path2);
    free(got);
}

static void never_done(void *arg, int error)
{
    (void)arg, (void)error;
    fail_msg("a refused write completed");
}

/* A merged run (vdev_batch_run_merged) reaches the leaf as one vectored write,
 * held like any other: read back through the leaf before the flush, in the
 * file after it. */
static void test_vectored_write_held(void **state)
{
    fixture_t *f = *state;
    enum { N = 6, PIECE = 8192 };
    const uint64_t off = 4 * CAIRN_MIB;
    vdev_batch_io_t io[N];
    char *pieces[N], *expect = cairn_alloc_aligned(N * PIECE), *got = cairn_alloc_aligned(N * PIECE);
    for (int i = 0; i < N; i++) {
        pieces[i] = cairn_alloc_aligned(PIECE);
        fill(pieces[i], PIECE, 100 + (uint64_t)i);
        memcpy(expect + i * PIECE, pieces[i], PIECE);
        io[N - 1 - i] = (vdev_batch_io_t){.leaf = f->leaf, .op = VDEV_IO_WRITE,
                                          .offset = off + (uint64_t)i * PIECE, .buf = pieces[i],
                                          .len = PIECE};
    }
    /* Pieces not whole sectors, though 512 bytes together: refused, nothing held. */
    struct iovec bad[2] = {{pieces[0], 412}, {pieces[0] + 412, 100}};
    assert_int_equal(f->leaf->ops->submit_writev(f->leaf, off, bad, 2, never_done, NULL), -EINVAL);
    assert_int_equal(vdev_fault_stats().writes_held, 0);
    assert_int_equal(vdev_batch_run_merged(io, N), 0);
    assert_int_equal(f->leaf->stats.writes, 1); /* one write for the run */
    for (int i = 0; i < N; i++) free(pieces[i]); /* the leaf keeps its own copy */
    file_read(f, off, got, N * PIECE);
    assert_true(all_zero(got, N * PIECE));
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, N * PIECE), 0);
    assert_memory_equal(got, expect, N * PIECE);
    assert_int_equal(vdev_flush(f->leaf), 0);
    file_read(f, off, got, N * PIECE);
    assert_memory_equal(got, expect, N * PIECE);
    free(expect);
    free(got);
}

/* A FLUSH writes page-aligned held writes with O_DIRECT and the rest through
 * the page cache: interleaved and overlapping, they still land in order, and
 * the file read through the page cache afterwards shows the newest bytes. */
static void test_flush_keeps_order_across_direct_and_buffered(void **state)
{
    fixture_t *f = *state;
    const size_t len = 64 * 1024;
    const uint64_t off = 16 * CAIRN_MIB;
    char *expect = cairn_alloc_aligned(len), *got = cairn_alloc_aligned(len);
    char *piece = cairn_alloc_aligned(len);
    /* The range read through the page cache first, so stale pages exist. */
    file_read(f, off, got, len);
    struct { uint64_t at; size_t n; } seq[] = {
        {0, len},          /* aligned: direct */
        {4096 + 512, 512}, /* a sector: buffered */
        {4096, 4096},      /* aligned, over the sector: direct */
        {4096 + 1024, 1536}, /* buffered again, over that */
        {32768, 8192},     /* aligned */
        {32768 + 512, 512},
    };
    memset(expect, 0, len);
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(seq); i++) {
        fill(piece, seq[i].n, 300 + i);
        memcpy(expect + seq[i].at, piece, seq[i].n);
        assert_int_equal(
            vdev_leaf_io_sync(f->leaf, VDEV_IO_WRITE, off + seq[i].at, piece, seq[i].n), 0);
    }
    assert_int_equal(vdev_flush(f->leaf), 0);
    assert_int_equal(vdev_fault_stats().writes_flushed, CAIRN_ARRAY_SIZE(seq));
    file_read(f, off, got, len);
    assert_memory_equal(got, expect, len);
    assert_int_equal(vdev_leaf_io_sync(f->leaf, VDEV_IO_READ, off, got, len), 0);
    assert_memory_equal(got, expect, len);
    free(piece);
    free(expect);
    free(got);
}

int main(void)
{
    alarm(60); /* a deadlock fails the test instead of hanging the suite */
#define T(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
        T(test_writes_held_until_flush),
        T(test_powercut_drop),
        T(test_powercut_keep),
        T(test_powercut_random),
        T(test_inject_read),
        T(test_fail_writes),
        T(test_close_discards_unflushed),
        T(test_flush_tree_after_cut),
        T(test_vectored_write_held),
        T(test_flush_keeps_order_across_direct_and_buffered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
