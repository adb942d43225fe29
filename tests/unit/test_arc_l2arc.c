/*
 * The L2ARC on a cache file (no pool; blocks made up with real checksums, read
 * the way the SPA's read path does). Proves: a block the ARC evicted after it
 * was fed is served from the cache device, verified; secondarycache=none keeps
 * blocks off the device; a corrupted device is detected, never serves bad data
 * and is dropped; the index is rebuilt from the device after the pool closes
 * and the device is attached again, also after the ring wrapped; a freed block
 * is not served from the device.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/arc.h>
#include <cairn/codec.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLK (64 * 1024)
static uint64_t g_guid = 0xcafe0000;
static char g_dir[512], g_dev[600];

static void content(uint8_t *b, uint32_t len, uint64_t id)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ULL + 7;
    for (uint32_t i = 0; i < len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t w = (id & 1) ? (id + i / 1024) : x; /* odd ids compress */
        memcpy(b + i, &w, 8);
    }
}

typedef struct blk {
    cairn_blkptr_t bp;
    uint8_t *stored;
} blk_t;

static void make_blk(blk_t *b, uint64_t id)
{
    uint8_t *logical = malloc(BLK);
    content(logical, BLK, id);
    memset(&b->bp, 0, sizeof b->bp);
    b->bp.dva[0] = (cairn_dva_t){.vdev = 0, .offset = id * BLK, .asize = BLK >> 9};
    b->bp.ncopies = 1;
    b->bp.birth_txg = 4;
    b->bp.lsize = BLK;
    b->bp.type = CAIRN_BT_DATA;
    b->bp.checksum = CAIRN_CHECKSUM_FLETCHER4;
    b->stored = malloc(BLK);
    size_t c = cairn_compress(CAIRN_COMPRESS_LZ4, logical, BLK, b->stored, BLK - BLK / 8);
    if (c) {
        b->bp.compress = CAIRN_COMPRESS_LZ4;
        b->bp.psize = (uint32_t)c;
    } else {
        memcpy(b->stored, logical, BLK);
        b->bp.psize = BLK;
    }
    cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, b->stored, b->bp.psize, b->bp.cksum);
    free(logical);
}

/* 0: hit with the right content; 1: miss (then "read the disk" and insert). */
static int read_blk(blk_t *b, uint64_t id, uint8_t policy)
{
    uint8_t *buf = malloc(BLK), *want = malloc(BLK);
    int rc = 1;
    if (arc_lookup(g_guid, &b->bp, buf, policy) == 0) {
        content(want, BLK, id);
        assert_memory_equal(buf, want, BLK);
        rc = 0;
    } else {
        arc_insert_stored(g_guid, &b->bp, b->stored, policy);
    }
    free(buf);
    free(want);
    return rc;
}

static void make_dev(uint64_t size)
{
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(g_dir, sizeof g_dir, "%s/l2arc.XXXXXX", base);
    assert_non_null(mkdtemp(g_dir));
    snprintf(g_dev, sizeof g_dev, "%s/cache0", g_dir);
    int fd = open(g_dev, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

static void remove_dev(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", g_dir);
}

static void fresh_pool(uint64_t dev_size)
{
    arc_purge_pool(g_guid);
    g_guid++;
    arc_set_max(CAIRN_MIB * 2); /* 32 blocks */
    arc_l2_set_feed(64 * CAIRN_MIB, 3600 * 1000); /* tests feed by hand */
    arc_reset_stats();
    make_dev(dev_size);
    char err[256];
    int e = arc_l2_add(g_guid, g_dev, true, err, sizeof err);
    if (e) fprintf(stderr, "%s\n", err);
    assert_int_equal(e, 0);
}

/* Reads blocks [lo, hi) once each (misses insert them). */
static void read_range(blk_t *b, int lo, int hi, uint8_t policy)
{
    for (int i = lo; i < hi; i++) read_blk(&b[i], (uint64_t)i, policy);
}

enum { NB = 200 };

static blk_t *make_all(void)
{
    blk_t *b = calloc(NB, sizeof(blk_t));
    for (int i = 0; i < NB; i++) make_blk(&b[i], (uint64_t)i);
    return b;
}

static void free_all(blk_t *b)
{
    for (int i = 0; i < NB; i++) free(b[i].stored);
    free(b);
}

static void test_evicted_block_served_from_device(void **state)
{
    (void)state;
    fresh_pool(64 * CAIRN_MIB);
    blk_t *b = make_all();
    read_range(b, 0, 16, ARC_POLICY_DEFAULT);
    assert_true(arc_l2_feed_now() > 0);
    read_range(b, 100, 200, ARC_POLICY(ARC_CACHE_ALL, ARC_CACHE_NONE)); /* evicts 0..15 */
    arc_stats_t st;
    arc_get_stats(&st);
    assert_true(st.l2_entries >= 16);
    uint64_t h0 = st.l2_hits;
    for (int i = 0; i < 16; i++) assert_int_equal(read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT), 0);
    arc_get_stats(&st);
    assert_int_equal(st.l2_hits - h0, 16);
    assert_int_equal(st.l2_cksum_bad, 0);
    /* secondarycache=none: 100..199 were never fed */
    arc_l2_feed_now();
    read_range(b, 20, 60, ARC_POLICY_DEFAULT);
    arc_get_stats(&st);
    uint64_t h1 = st.l2_hits;
    for (int i = 100; i < 110; i++) read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT);
    arc_get_stats(&st);
    assert_int_equal(st.l2_hits, h1);
    /* a freed block is not served from the device either */
    arc_free(g_guid, &b[3].bp);
    uint8_t *buf = malloc(BLK);
    read_range(b, 60, 100, ARC_POLICY_DEFAULT); /* push 3 out of memory, if it came back */
    assert_int_equal(arc_lookup(g_guid, &b[3].bp, buf, ARC_POLICY_DEFAULT), -ENOENT);
    free(buf);
    free_all(b);
    arc_purge_pool(g_guid);
    remove_dev();
}

static void test_corrupt_device_bypassed(void **state)
{
    (void)state;
    fresh_pool(64 * CAIRN_MIB);
    blk_t *b = make_all();
    read_range(b, 0, 30, ARC_POLICY_DEFAULT);
    assert_true(arc_l2_feed_now() > 0);
    read_range(b, 100, 200, ARC_POLICY(ARC_CACHE_ALL, ARC_CACHE_NONE));
    /* Garbage over the ring (headers left alone): every cached copy is now wrong. */
    int fd = open(g_dev, O_RDWR);
    assert_true(fd >= 0);
    uint8_t *junk = malloc(CAIRN_MIB);
    memset(junk, 0xa5, CAIRN_MIB);
    for (uint64_t off = 8192; off < 16 * CAIRN_MIB; off += CAIRN_MIB)
        assert_int_equal(pwrite(fd, junk, CAIRN_MIB, (off_t)off), (ssize_t)CAIRN_MIB);
    close(fd);
    free(junk);
    /* Every read still returns the right bytes (from "the disk"). */
    for (int i = 0; i < 30; i++) assert_int_equal(read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT), 1);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_true(st.l2_cksum_bad >= 3);
    assert_int_equal(st.l2_hits, 0);
    assert_int_equal(st.l2_devices_dropped, 1);
    arc_l2_dev_stat_t ds[2];
    assert_int_equal(arc_l2_dev_stats(g_guid, ds, 2), 1);
    assert_false(ds[0].online);
    free_all(b);
    arc_purge_pool(g_guid);
    remove_dev();
}

static void test_rebuild_after_reattach(void **state)
{
    (void)state;
    fresh_pool(64 * CAIRN_MIB);
    blk_t *b = make_all();
    read_range(b, 0, 32, ARC_POLICY_DEFAULT);
    assert_true(arc_l2_feed_now() > 0);
    read_range(b, 32, 64, ARC_POLICY_DEFAULT);
    assert_true(arc_l2_feed_now() > 0);
    arc_purge_pool(g_guid); /* the pool closes: memory forgotten, device closed */
    arc_reset_stats();
    char err[256];
    assert_int_equal(arc_l2_add(g_guid, g_dev, false, err, sizeof err), 0);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.l2_rebuilt, 64);
    for (int i = 0; i < 64; i++) assert_int_equal(read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT), 0);
    arc_get_stats(&st);
    assert_int_equal(st.l2_hits, 64);
    /* Another pool's device is not taken for ours: it is formatted afresh. */
    arc_purge_pool(g_guid);
    arc_reset_stats();
    assert_int_equal(arc_l2_add(g_guid + 1000, g_dev, false, err, sizeof err), 0);
    arc_get_stats(&st);
    assert_int_equal(st.l2_rebuilt, 0);
    arc_purge_pool(g_guid + 1000);
    free_all(b);
    remove_dev();
}

static void test_ring_wraps_and_rebuilds(void **state)
{
    (void)state;
    fresh_pool(4 * CAIRN_MIB); /* room for about 60 incompressible blocks */
    blk_t *b = make_all();
    for (int round = 0; round < NB / 20; round++) {
        read_range(b, round * 20, round * 20 + 20, ARC_POLICY_DEFAULT);
        arc_l2_feed_now();
    }
    arc_stats_t st;
    arc_get_stats(&st);
    uint64_t live = st.l2_entries;
    assert_true(live > 0 && live < NB);
    arc_purge_pool(g_guid);
    arc_reset_stats();
    char err[256];
    assert_int_equal(arc_l2_add(g_guid, g_dev, false, err, sizeof err), 0);
    arc_get_stats(&st);
    assert_true(st.l2_rebuilt > 0 && st.l2_rebuilt <= live);
    /* The newest block is there; whatever the device serves is right (read_blk checks). */
    assert_int_equal(read_blk(&b[NB - 1], NB - 1, ARC_POLICY_DEFAULT), 0);
    int served = 0;
    for (int i = 0; i < NB; i++) served += read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT) == 0;
    arc_get_stats(&st);
    assert_int_equal(st.l2_cksum_bad, 0);
    assert_true(served > 0);
    free_all(b);
    arc_purge_pool(g_guid);
    remove_dev();
}

/* A crash between writing a batch and the header naming it: the old header's chain
 * may include batches the new one overwrote; none of them may be served. */
static void test_torn_batch_not_served(void **state)
{
    (void)state;
    fresh_pool(4 * CAIRN_MIB);
    blk_t *b = make_all();
    for (int round = 0; round < 8; round++) {
        read_range(b, round * 20, round * 20 + 20, ARC_POLICY_DEFAULT);
        arc_l2_feed_now();
    }
    int fd = open(g_dev, O_RDWR);
    assert_true(fd >= 0);
    uint8_t slots[8192];
    assert_int_equal(pread(fd, slots, sizeof slots, 0), (ssize_t)sizeof slots);
    read_range(b, 160, 200, ARC_POLICY_DEFAULT);
    assert_true(arc_l2_feed_now() > 0); /* this batch is then "lost" with its header */
    arc_purge_pool(g_guid);
    assert_int_equal(pwrite(fd, slots, sizeof slots, 0), (ssize_t)sizeof slots);
    close(fd);
    arc_reset_stats();
    char err[256];
    assert_int_equal(arc_l2_add(g_guid, g_dev, false, err, sizeof err), 0);
    for (int i = 0; i < NB; i++) read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_true(st.l2_rebuilt > 0);
    assert_true(st.l2_hits > 0);
    assert_int_equal(st.l2_cksum_bad, 0);
    assert_int_equal(st.l2_devices_dropped, 0);
    free_all(b);
    arc_purge_pool(g_guid);
    remove_dev();
}

/* A device that fails reads (here: cut short under us) is dropped; reads go on. */
static void test_io_error_drops_device(void **state)
{
    (void)state;
    fresh_pool(64 * CAIRN_MIB);
    blk_t *b = make_all();
    read_range(b, 0, 20, ARC_POLICY_DEFAULT);
    assert_true(arc_l2_feed_now() > 0);
    read_range(b, 100, 200, ARC_POLICY(ARC_CACHE_ALL, ARC_CACHE_NONE));
    assert_int_equal(truncate(g_dev, 8192), 0);
    for (int i = 0; i < 20; i++) assert_int_equal(read_blk(&b[i], (uint64_t)i, ARC_POLICY_DEFAULT), 1);
    arc_stats_t st;
    arc_get_stats(&st);
    assert_int_equal(st.l2_io_errors, 1);
    assert_int_equal(st.l2_devices_dropped, 1);
    assert_int_equal(st.l2_hits, 0);
    free_all(b);
    arc_purge_pool(g_guid);
    remove_dev();
}

/* The feed thread on its own: blocks reach the device without feed_now. */
static void test_feed_thread(void **state)
{
    (void)state;
    fresh_pool(64 * CAIRN_MIB);
    arc_l2_set_feed(CAIRN_MIB, 10);
    blk_t *b = make_all();
    read_range(b, 0, 20, ARC_POLICY_DEFAULT);
    arc_stats_t st;
    for (int i = 0; i < 3000; i++) { /* up to 30 s on a loaded machine */
        arc_get_stats(&st);
        if (st.l2_entries >= 20 && st.l2_feeds >= 1) break;
        usleep(10000);
    }
    assert_true(st.l2_entries >= 20);
    assert_true(st.l2_feeds >= 1);
    arc_l2_set_feed(64 * CAIRN_MIB, 3600 * 1000);
    free_all(b);
    arc_purge_pool(g_guid);
    remove_dev();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evicted_block_served_from_device),
        cmocka_unit_test(test_corrupt_device_bypassed),
        cmocka_unit_test(test_rebuild_after_reattach),
        cmocka_unit_test(test_ring_wraps_and_rebuilds),
        cmocka_unit_test(test_torn_batch_not_served),
        cmocka_unit_test(test_io_error_drops_device),
        cmocka_unit_test(test_feed_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
