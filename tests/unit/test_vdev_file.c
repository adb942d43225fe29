/*
 * File leaves (src/vdev/vdev_file.c) and the generic leaf helpers
 * (src/vdev/vdev_leaf.c): label placement, concurrent asynchronous I/O,
 * flush, UNAVAIL leaves, exclusivity and the bounded queue.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/util.h>
#include <cairn/vdev.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEAF_SIZE (64 * CAIRN_MIB)

typedef struct fixture {
    char dir[512];
    char path[600];
} fixture_t;

static int fixture_setup(void **state)
{
    fixture_t *f = cairn_zalloc(sizeof *f);
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof f->dir, "%s/test_vdev_file.XXXXXX", base);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/leaf0", f->dir);
    int fd = open(f->path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)LEAF_SIZE), 0);
    close(fd);
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    fixture_t *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* ---- label math ---- */

static void test_label_offsets(void **state)
{
    (void)state;
    uint64_t psize = 64 * CAIRN_MIB + 100 * CAIRN_KIB;
    uint64_t end = 64 * CAIRN_MIB; /* the 100 KiB tail is ignored */
    assert_int_equal(vdev_label_offset(psize, 0), 0);
    assert_int_equal(vdev_label_offset(psize, 1), 256 * CAIRN_KIB);
    assert_int_equal(vdev_label_offset(psize, 2), end - 512 * CAIRN_KIB);
    assert_int_equal(vdev_label_offset(psize, 3), end - 256 * CAIRN_KIB);

    psize = 10 * CAIRN_GIB + 300 * CAIRN_KIB; /* tail of 300K: one extra 256K unit */
    end = 10 * CAIRN_GIB + 256 * CAIRN_KIB;
    assert_int_equal(vdev_label_offset(psize, 2), end - 512 * CAIRN_KIB);
    assert_int_equal(vdev_label_offset(psize, 3), end - 256 * CAIRN_KIB);
    /* Every label fits in the device and the back ones do not overlap the front ones. */
    for (int l = 0; l < VDEV_LABELS; l++)
        assert_true(vdev_label_offset(psize, l) + VDEV_LABEL_SIZE <= psize);

    assert_int_equal(vdev_leaf_data_size(64 * CAIRN_MIB),
                     64 * CAIRN_MIB - 4 * CAIRN_MIB - 512 * CAIRN_KIB);
    assert_int_equal(vdev_leaf_data_size(64 * CAIRN_MIB + 100 * CAIRN_KIB),
                     64 * CAIRN_MIB - 4 * CAIRN_MIB - 512 * CAIRN_KIB);
    assert_int_equal(vdev_leaf_data_size(0), 0);
    assert_int_equal(vdev_leaf_data_size(4 * CAIRN_MIB), 0);
    assert_int_equal(vdev_leaf_data_size(4 * CAIRN_MIB + 512 * CAIRN_KIB), 0);
    assert_int_equal(vdev_leaf_data_size(4 * CAIRN_MIB + 768 * CAIRN_KIB), 256 * CAIRN_KIB);
}

/* ---- concurrent asynchronous I/O ---- */

typedef struct io_counter {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    unsigned pending;
    unsigned errors;
    unsigned max_pending;
    unsigned done_sleep_us; /* makes completions slow, to fill the queue */
} io_counter_t;

static void io_counter_init(io_counter_t *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void io_counter_add(io_counter_t *c)
{
    pthread_mutex_lock(&c->lock);
    c->pending++;
    if (c->pending > c->max_pending) c->max_pending = c->pending;
    pthread_mutex_unlock(&c->lock);
}

static void io_counter_done(void *arg, int error)
{
    io_counter_t *c = arg;
    if (c->done_sleep_us) usleep(c->done_sleep_us);
    pthread_mutex_lock(&c->lock);
    if (error) c->errors++;
    if (--c->pending == 0) pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

static void io_counter_wait(io_counter_t *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->pending) pthread_cond_wait(&c->cv, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

#define RW_THREADS 4
#define RW_BLOCKS 96 /* per thread */
#define RW_MAX_BLOCK (64 * 1024)
#define RW_SLOT (128 * 1024) /* blocks live in disjoint slots of the data area */

typedef struct rw_thread {
    vdev_t *leaf;
    unsigned index;
    unsigned failures;
} rw_thread_t;

static void fill_pattern(char *buf, size_t len, uint64_t tag)
{
    cairn_rng_t r;
    cairn_rng_seed(&r, tag);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = cairn_rng_next(&r);
        memcpy(buf + i, &v, 8);
    }
}

static void *rw_thread_main(void *arg)
{
    rw_thread_t *t = arg;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1000 + t->index);
    uint64_t nslots = (LEAF_SIZE - VDEV_DATA_START) / RW_SLOT;
    uint64_t offs[RW_BLOCKS];
    size_t lens[RW_BLOCKS];
    char *wbuf[RW_BLOCKS], *rbuf[RW_BLOCKS];
    for (unsigned round = 0; round < 2; round++) {
        io_counter_t c;
        io_counter_init(&c);
        for (unsigned i = 0; i < RW_BLOCKS; i++) {
            /* Slots interleave between threads so they share the device but never a byte. */
            uint64_t slot = (cairn_rng_below(&rng, nslots / RW_THREADS) * RW_THREADS + t->index);
            offs[i] = VDEV_DATA_START + slot * RW_SLOT +
                      cairn_rng_below(&rng, (RW_SLOT - RW_MAX_BLOCK) / 4096) * 4096;
            lens[i] = (1 + cairn_rng_below(&rng, RW_MAX_BLOCK / 4096)) * 4096;
            /* Two blocks in one round may land in the same slot: keep only the last. */
            for (unsigned j = 0; j < i; j++)
                if (offs[j] / RW_SLOT == offs[i] / RW_SLOT) lens[j] = 0;
        }
        for (unsigned i = 0; i < RW_BLOCKS; i++) {
            wbuf[i] = cairn_alloc_aligned(RW_MAX_BLOCK);
            rbuf[i] = cairn_alloc_aligned(RW_MAX_BLOCK);
            if (!lens[i]) continue;
            fill_pattern(wbuf[i], lens[i], (round << 24) | (t->index << 16) | i);
            io_counter_add(&c);
            if (t->leaf->ops->submit(t->leaf, VDEV_IO_WRITE, offs[i], wbuf[i], lens[i],
                                     io_counter_done, &c) != 0)
                io_counter_done(&c, -EIO);
        }
        io_counter_wait(&c);
        for (unsigned i = 0; i < RW_BLOCKS; i++) {
            if (!lens[i]) continue;
            io_counter_add(&c);
            if (t->leaf->ops->submit(t->leaf, VDEV_IO_READ, offs[i], rbuf[i], lens[i],
                                     io_counter_done, &c) != 0)
                io_counter_done(&c, -EIO);
        }
        io_counter_wait(&c);
        t->failures += c.errors;
        for (unsigned i = 0; i < RW_BLOCKS; i++) {
            if (lens[i] && memcmp(wbuf[i], rbuf[i], lens[i]) != 0) t->failures++;
            free(wbuf[i]);
            free(rbuf[i]);
        }
    }
    return NULL;
}

static void test_concurrent_rw(void **state)
{
    fixture_t *f = *state;
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &leaf), 0);
    assert_non_null(leaf);
    assert_int_equal(leaf->state, VDEV_STATE_ONLINE);
    assert_int_equal(leaf->psize, LEAF_SIZE);
    assert_string_equal(leaf->path, f->path);

    pthread_t th[RW_THREADS];
    rw_thread_t t[RW_THREADS];
    for (unsigned i = 0; i < RW_THREADS; i++) {
        t[i] = (rw_thread_t){.leaf = leaf, .index = i};
        pthread_create(&th[i], NULL, rw_thread_main, &t[i]);
    }
    for (unsigned i = 0; i < RW_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].failures, 0);
    }
    assert_true(leaf->stats.writes > 0);
    assert_int_equal(leaf->stats.writes, leaf->stats.reads);
    assert_int_equal(leaf->stats.write_bytes, leaf->stats.read_bytes);
    assert_int_equal(leaf->stats.read_errors + leaf->stats.write_errors, 0);
    assert_int_equal(vdev_flush(leaf), 0);

    /* The data really reached the file (read it outside the leaf). */
    char *buf = cairn_alloc_aligned(8192), *back = cairn_alloc_aligned(8192);
    fill_pattern(buf, 8192, 77);
    uint64_t off = vdev_label_offset(leaf->psize, 3);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, off, buf, 8192), 0);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_FLUSH, 0, NULL, 0), 0);
    int fd = open(f->path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, back, 8192, (off_t)off), 8192);
    close(fd);
    assert_memory_equal(buf, back, 8192);
    free(buf);
    free(back);
    vdev_free(leaf);
}

static void test_bad_requests(void **state)
{
    fixture_t *f = *state;
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &leaf), 0);
    char *buf = cairn_alloc_aligned(8192);
    /* The last sector reads, one past the end does not. */
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_READ, LEAF_SIZE - 4096, buf, 4096), 0);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_READ, LEAF_SIZE - 4096, buf, 8192), -EIO);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, LEAF_SIZE, buf, 512), -EIO);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_READ, 100, buf, 512), -EINVAL);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_READ, 0, buf, 100), -EINVAL);
    /* 512-byte granularity works (labels are written this way). */
    memset(buf, 0xA5, 512);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, 512, buf, 512), 0);
    memset(buf, 0, 8192);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_READ, 0, buf, 4096), 0);
    for (int i = 0; i < 4096; i++) assert_int_equal((uint8_t)buf[i], i >= 512 && i < 1024 ? 0xA5 : 0);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_size, LEAF_SIZE); /* no write extended the file */
    free(buf);
    vdev_free(leaf);
}

/* ---- UNAVAIL and exclusivity ---- */

static void test_missing_is_unavail(void **state)
{
    fixture_t *f = *state;
    char missing[700];
    snprintf(missing, sizeof missing, "%s/no-such-device", f->dir);
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(missing, &leaf), -ENOENT);
    assert_non_null(leaf);
    assert_int_equal(leaf->type, VDEV_TYPE_LEAF);
    assert_int_equal(leaf->state, VDEV_STATE_UNAVAIL);
    assert_string_equal(leaf->path, missing);
    assert_int_equal(leaf->psize, 0);
    char *buf = cairn_alloc_aligned(4096);
    assert_int_equal(leaf->ops->submit(leaf, VDEV_IO_READ, 0, buf, 4096, io_counter_done, NULL),
                     -ENXIO);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, 0, buf, 4096), -ENXIO);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_FLUSH, 0, NULL, 0), -ENXIO);
    /* vdev_flush skips what is UNAVAIL: nothing there to make durable. */
    assert_int_equal(vdev_flush(leaf), 0);
    free(buf);
    vdev_free(leaf);

    /* The fault: prefix gives the same answer for a missing file. */
    char fault_missing[720];
    snprintf(fault_missing, sizeof fault_missing, "fault:%s", missing);
    assert_int_equal(vdev_leaf_open(fault_missing, &leaf), -ENOENT);
    assert_int_equal(leaf->state, VDEV_STATE_UNAVAIL);
    assert_string_equal(leaf->path, fault_missing);
    vdev_free(leaf);
}

static void test_exclusive_open(void **state)
{
    fixture_t *f = *state;
    vdev_t *a = NULL, *b = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &a), 0);
    assert_int_equal(vdev_leaf_open(f->path, &b), -EBUSY);
    assert_int_equal(b->state, VDEV_STATE_UNAVAIL);
    vdev_free(b);
    char fault_path[700];
    snprintf(fault_path, sizeof fault_path, "fault:%s", f->path);
    assert_int_equal(vdev_leaf_open(fault_path, &b), -EBUSY);
    vdev_free(b);
    vdev_free(a);
    /* Closing releases the device. */
    assert_int_equal(vdev_leaf_open(f->path, &b), 0);
    assert_int_equal(b->state, VDEV_STATE_ONLINE);
    vdev_free(b);
}

/* ---- the bounded queue ---- */

static void test_queue_bound(void **state)
{
    fixture_t *f = *state;
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &leaf), 0);
    enum { N = 1000 };
    char *buf = cairn_alloc_aligned(4096);
    io_counter_t c;
    io_counter_init(&c);
    c.done_sleep_us = 200; /* completions drain slower than we submit */
    for (unsigned i = 0; i < N; i++) {
        io_counter_add(&c);
        uint64_t off = VDEV_DATA_START + (uint64_t)(i % 512) * 4096;
        int rc = leaf->ops->submit(leaf, i % 2 ? VDEV_IO_READ : VDEV_IO_WRITE, off, buf, 4096,
                                   io_counter_done, &c);
        assert_int_equal(rc, 0);
    }
    io_counter_wait(&c);
    assert_int_equal(c.errors, 0);
    /* Without a bound, nearly all N would be outstanding at once. */
    assert_true(c.max_pending <= 128);
    assert_true(c.max_pending >= 2);
    assert_int_equal(leaf->stats.writes + leaf->stats.reads, N);
    free(buf);
    vdev_free(leaf);
}

/* A done callback may submit more I/O to the same leaf (it runs on the completion thread). */
#define CHAIN_STEPS 50
#define CHAIN_FANOUT_BIG 100
typedef struct chain {
    vdev_t *leaf;
    char *buf;
    io_counter_t *c;
    _Atomic unsigned remaining;
} chain_t;

static void chain_done(void *arg, int error)
{
    chain_t *ch = arg;
    if (!error && --ch->remaining > 0) {
        /* The first step fans out beyond the queue bound from the completion thread, which
         * must not wait for a slot only it could free. */
        int fanout = ch->remaining == CHAIN_STEPS - 1 ? CHAIN_FANOUT_BIG : 3;
        for (int k = 0; k < fanout; k++) {
            io_counter_add(ch->c);
            if (ch->leaf->ops->submit(ch->leaf, VDEV_IO_READ, VDEV_DATA_START, ch->buf, 4096,
                                      io_counter_done, ch->c) != 0)
                io_counter_done(ch->c, -EIO);
        }
        if (ch->leaf->ops->submit(ch->leaf, VDEV_IO_READ, VDEV_DATA_START, ch->buf, 4096, chain_done,
                                  ch) == 0)
            return;
        error = -EIO;
    }
    io_counter_done(ch->c, error);
}

static void test_submit_from_callback(void **state)
{
    fixture_t *f = *state;
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &leaf), 0);
    io_counter_t c;
    io_counter_init(&c);
    chain_t ch = {.leaf = leaf, .buf = cairn_alloc_aligned(4096), .c = &c, .remaining = CHAIN_STEPS};
    io_counter_add(&c);
    assert_int_equal(leaf->ops->submit(leaf, VDEV_IO_READ, 0, ch.buf, 4096, chain_done, &ch), 0);
    io_counter_wait(&c);
    assert_int_equal(c.errors, 0);
    assert_int_equal(ch.remaining, 0);
    assert_int_equal(leaf->stats.reads, CHAIN_STEPS + CHAIN_FANOUT_BIG + (CHAIN_STEPS - 2) * 3);
    free(ch.buf);
    vdev_free(leaf);
}

/* ---- flush over a tree ---- */

static void test_flush_tree(void **state)
{
    fixture_t *f = *state;
    char missing[700];
    snprintf(missing, sizeof missing, "%s/gone", f->dir);
    vdev_t *root = vdev_alloc(VDEV_TYPE_ROOT, 1);
    vdev_t *mirror = vdev_alloc(VDEV_TYPE_MIRROR, 2);
    vdev_t *good = NULL, *gone = NULL;
    assert_int_equal(vdev_leaf_open(f->path, &good), 0);
    assert_int_equal(vdev_leaf_open(missing, &gone), -ENOENT);
    vdev_add_child(mirror, good);
    vdev_add_child(mirror, gone);
    vdev_add_child(root, mirror);
    assert_int_equal(vdev_flush(root), 0);
    vdev_free(root);
}

/* Bytes of [from, to) of the file at path that are holes. */
static uint64_t hole_bytes(const char *path, uint64_t from, uint64_t to)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint64_t holes = 0;
    for (uint64_t pos = from; pos < to;) {
        off_t h = lseek(fd, (off_t)pos, SEEK_HOLE);
        if (h < 0 || (uint64_t)h >= to) break;
        off_t d = lseek(fd, h, SEEK_DATA);
        uint64_t e = d < 0 || (uint64_t)d > to ? to : (uint64_t)d;
        holes += e - (uint64_t)h;
        pos = e;
    }
    close(fd);
    return holes;
}

/* vdev_preallocate on sparse files: the leaf ranges that hold a top-level
 * range are written (no hole left), what was written there before keeps its
 * bytes, and nothing outside the ranges changes. On a mirror both sides; on
 * raidz every child, over the rows the range spans. */
static void test_preallocate(void **state)
{
    fixture_t *f = *state;
    char paths[3][700];
    vdev_t *leaves[3];
    for (int i = 0; i < 3; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/p%d", f->dir, i);
        int fd = open(paths[i], O_CREAT | O_RDWR | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)LEAF_SIZE), 0);
        close(fd);
        assert_int_equal(vdev_leaf_open(paths[i], &leaves[i]), 0);
        leaves[i]->ashift = 12;
    }
    /* A single leaf, with data already inside the range. */
    uint8_t *pat = aligned_alloc(CAIRN_IO_ALIGN, 8192);
    memset(pat, 0x5a, 8192);
    uint64_t at = VDEV_DATA_START + 3 * CAIRN_MIB + 65536;
    assert_int_equal(vdev_leaf_io_sync(leaves[0], VDEV_IO_WRITE, at, pat, 8192), 0);
    uint64_t off = 2 * CAIRN_MIB, len = 4 * CAIRN_MIB;
    assert_true(hole_bytes(paths[0], VDEV_DATA_START + off, VDEV_DATA_START + off + len) > 0);
    assert_int_equal(vdev_preallocate(leaves[0], off, len), 0);
    assert_int_equal(hole_bytes(paths[0], VDEV_DATA_START + off, VDEV_DATA_START + off + len), 0);
    assert_int_equal(hole_bytes(paths[0], VDEV_DATA_START + off + len, VDEV_DATA_START + off + len + CAIRN_MIB),
                     CAIRN_MIB);
    uint8_t *back = aligned_alloc(CAIRN_IO_ALIGN, 8192);
    assert_int_equal(vdev_leaf_io_sync(leaves[0], VDEV_IO_READ, at, back, 8192), 0);
    assert_memory_equal(back, pat, 8192);
    assert_int_equal(vdev_leaf_io_sync(leaves[0], VDEV_IO_READ, VDEV_DATA_START + off, back, 8192), 0);
    memset(pat, 0, 8192);
    assert_memory_equal(back, pat, 8192);
    vdev_free(leaves[0]);

    /* A mirror: both sides. */
    vdev_t *mirror = vdev_alloc(VDEV_TYPE_MIRROR, 7);
    mirror->ashift = 12;
    vdev_add_child(mirror, leaves[1]);
    vdev_add_child(mirror, leaves[2]);
    assert_int_equal(vdev_preallocate(mirror, 8 * CAIRN_MIB, CAIRN_MIB), 0);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(hole_bytes(paths[i], VDEV_DATA_START + 8 * CAIRN_MIB,
                                    VDEV_DATA_START + 9 * CAIRN_MIB), 0);
        assert_true(hole_bytes(paths[i], VDEV_DATA_START, VDEV_DATA_START + 8 * CAIRN_MIB) ==
                    8 * CAIRN_MIB);
    }
    vdev_free(mirror);
    for (int i = 0; i < 3; i++) unlink(paths[i]);

    vdev_t *raidz = vdev_alloc(VDEV_TYPE_RAIDZ, 8);
    raidz->ashift = 12;
    raidz->nparity = 1;
    for (int i = 0; i < 3; i++) {
        int fd = open(paths[i], O_CREAT | O_RDWR | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)LEAF_SIZE), 0);
        close(fd);
        assert_int_equal(vdev_leaf_open(paths[i], &leaves[i]), 0);
        vdev_add_child(raidz, leaves[i]);
    }
    /* Top-level [6 MiB, 9 MiB) is child rows [2 MiB, 3 MiB) and one more sector. */
    assert_int_equal(vdev_preallocate(raidz, 6 * CAIRN_MIB, 3 * CAIRN_MIB), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(hole_bytes(paths[i], VDEV_DATA_START + 2 * CAIRN_MIB,
                                    VDEV_DATA_START + 3 * CAIRN_MIB + 4096), 0);
        assert_true(hole_bytes(paths[i], VDEV_DATA_START, VDEV_DATA_START + 2 * CAIRN_MIB) ==
                    2 * CAIRN_MIB);
    }
    vdev_free(raidz);
    for (int i = 0; i < 3; i++) unlink(paths[i]);
    free(pat);
    free(back);
}

int main(void)
{
    alarm(60); /* a deadlock fails the test instead of hanging the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_offsets),
        cmocka_unit_test_setup_teardown(test_concurrent_rw, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_missing_is_unavail, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_exclusive_open, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_queue_bound, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_submit_from_callback, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_flush_tree, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_preallocate, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
