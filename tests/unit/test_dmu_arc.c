/*
 * The ARC and L2ARC under a real pool and the DMU: rewritten and freed records
 * are never served stale; an object set with primarycache=none keeps its data
 * out of the ARC; records evicted from the ARC are served from a cache device
 * (data verified), also after export and import rebuilt the device's index;
 * a cache device overwritten with junk costs nothing but time; records just
 * written are read back from the ARC, raw ones kept as the very buffer the
 * record was written from; read-ahead racing readers of the same
 * blocks never touches their buffers; records read from the disks are kept in
 * the buffer they were read into; a sync batch's records lie end to end and
 * read-ahead reads them in one read, healing a mirror side that returned a bad
 * one; a compressed block read ahead brings a decompressed copy for its first
 * hit; a read-ahead run stops at blocks a cache device holds; a thread in the
 * SPA's memory-only mode reads what is in memory and nothing from a device.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/arc.h>
#include <cairn/dmu.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_fixture.h"

#define RS (128 * 1024)

static void fill(uint8_t *b, uint64_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (uint64_t i = 0; i < len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(b + i, &x, 8);
    }
}

static uint64_t new_obj_rs(objset_t *os, uint32_t rs)
{
    dmu_object_props_t p = {.recordsize = rs, .compress = CAIRN_COMPRESS_LZ4,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &obj, tx), 0);
    dmu_tx_commit(tx);
    return obj;
}

static uint64_t new_obj(objset_t *os) { return new_obj_rs(os, RS); }

static void put(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, uint64_t seed)
{
    uint8_t *b = malloc(len);
    fill(b, len, seed);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, off, len, b, tx), 0);
    dmu_tx_commit(tx);
    free(b);
}

static void expect(objset_t *os, uint64_t obj, uint64_t off, uint64_t len, uint64_t seed)
{
    uint8_t *b = malloc(len), *w = malloc(len);
    if (seed) fill(w, len, seed);
    else memset(w, 0, len);
    assert_int_equal(dmu_read(os, obj, off, len, b), 0);
    assert_memory_equal(b, w, len);
    free(b);
    free(w);
}

/* A fresh pool (tag, pool_size) on an ARC of arc_max, its object set "d" open in *os. */
static void pool_with_objset(test_pool_t *f, const char *tag, uint64_t pool_size,
                             uint64_t arc_max, objset_t **os)
{
    arc_set_max(arc_max);
    test_pool_make(f, tag, pool_size);
    assert_int_equal(dmu_objset_create(f->spa, "d", NULL), 0);
    assert_int_equal(dmu_objset_open(f->spa, "d", os), 0);
}

/* Syncs os and opens it again after an export and import: nothing of it in memory. */
static void reopen_cold(test_pool_t *f, objset_t **os)
{
    assert_int_equal(dmu_objset_sync(*os), 0);
    dmu_objset_close(*os);
    test_pool_reimport(f);
    assert_int_equal(dmu_objset_open(f->spa, "d", os), 0);
}

/* Closes os, checks the pool and removes it. */
static void pool_done(test_pool_t *f, objset_t *os)
{
    dmu_objset_close(os);
    test_pool_check(f);
    test_pool_remove(f);
}

static void test_rewrite_and_free_never_stale(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_stale", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    for (uint64_t v = 1; v <= 4; v++) {
        put(os, obj, 0, 8 * RS, v);
        assert_int_equal(dmu_objset_sync(os), 0);
        expect(os, obj, 0, 8 * RS, v); /* into the ARC */
        expect(os, obj, 0, 8 * RS, v); /* from the ARC */
    }
    arc_stats_t st0, st;
    arc_get_stats(&st0);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_free_range(os, obj, 0, 4 * RS, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    spa_txg_wait_synced(f.spa, 0);
    expect(os, obj, 0, 4 * RS, 0);
    uint8_t *all = malloc(8 * RS), *half = malloc(4 * RS);
    fill(all, 8 * RS, 4);
    assert_int_equal(dmu_read(os, obj, 4 * RS, 4 * RS, half), 0);
    assert_memory_equal(half, all + 4 * RS, 4 * RS);
    free(all);
    free(half);
    arc_get_stats(&st);
    assert_true(st.frees_dropped > st0.frees_dropped); /* the freed records left the ARC */
    pool_done(&f, os);
}

static void test_primarycache_none_bypasses(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_none", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    dmu_objset_set_cache_policy(os, ARC_POLICY(ARC_CACHE_NONE, ARC_CACHE_NONE));
    uint64_t obj = new_obj(os);
    put(os, obj, 0, 32 * RS, 9);
    reopen_cold(&f, &os);
    dmu_objset_set_cache_policy(os, ARC_POLICY(ARC_CACHE_NONE, ARC_CACHE_NONE));
    arc_stats_t a, b;
    arc_get_stats(&a);
    expect(os, obj, 0, 32 * RS, 9);
    expect(os, obj, 0, 32 * RS, 9);
    arc_get_stats(&b);
    assert_true(b.hits - a.hits < 16);      /* no data record came from the ARC */
    assert_true(b.size - a.size < 4 * RS);  /* at most the few metadata blocks */
    /* and with the default policy the same reads are cached */
    dmu_objset_set_cache_policy(os, ARC_POLICY_DEFAULT);
    expect(os, obj, 0, 32 * RS, 9);
    arc_get_stats(&a);
    expect(os, obj, 0, 32 * RS, 9);
    arc_get_stats(&b);
    assert_true(b.hits - a.hits >= 32);
    dmu_objset_close(os);
    test_pool_export(&f);
    test_pool_remove(&f);
}

/* Half random, half a repeated phrase: lz4 stores it compressed. */
static void fill_text(uint8_t *b, uint64_t len, uint64_t seed)
{
    static const char phrase[] = "records written are read back soon; ";
    fill(b, len, seed);
    for (uint64_t i = 0; i < len; i++)
        if ((i / 4096) % 2) b[i] = (uint8_t)phrase[i % (sizeof phrase - 1)];
}

/* Records the sync writes - compressed ones too - stay in the ARC, so reading
 * back what was just written needs no disk read nor any read-ahead; not with
 * primarycache=none. */
static void test_written_records_are_read_from_the_arc(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os, *nc;
    pool_with_objset(&f, "dmu_arc_written", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    assert_int_equal(dmu_objset_create(f.spa, "nc", NULL), 0);
    assert_int_equal(dmu_objset_open(f.spa, "nc", &nc), 0);
    dmu_objset_set_cache_policy(nc, ARC_POLICY(ARC_CACHE_NONE, ARC_CACHE_NONE));
    uint64_t obj = new_obj(os), other = new_obj(nc);
    uint8_t *w = malloc(32 * RS), *r = malloc(32 * RS);
    fill_text(w, 32 * RS, 21);
    for (objset_t *o = os; o; o = o == os ? nc : NULL) {
        dmu_tx_t *tx = dmu_tx_begin(o);
        assert_int_equal(dmu_write(o, o == os ? obj : other, 0, 32 * RS, w, tx), 0);
        dmu_tx_commit(tx);
        assert_int_equal(dmu_objset_sync(o), 0);
    }
    arc_stats_t a, b;
    arc_get_stats(&a);
    uint64_t issued0 = dmu_prefetch_issued();
    for (uint64_t rec = 0; rec < 32; rec++) /* a sequential reader: read-ahead is on */
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, r + rec * RS), 0);
    assert_memory_equal(r, w, 32 * RS);
    dmu_prefetch_wait();
    assert_int_equal(dmu_prefetch_issued(), issued0); /* all cached: nothing to queue */
    arc_get_stats(&b);
    assert_true(b.hits - a.hits >= 32);
    assert_true(b.misses - a.misses < 4);  /* at most metadata */
    /* Written, each record kept the writer's bytes as its decompressed copy
     * (nothing to decompress ahead); each first read took it: compressed as
     * stored, no decompressed copies left. */
    assert_true(a.written_copies_size >= 32 * RS);
    assert_int_equal(b.written_copies_size, 0);
    assert_true(b.size <= a.size - 32 * RS);
    assert_true(b.size < 32 * RS);

    arc_get_stats(&a);
    assert_int_equal(dmu_read(nc, other, 0, 32 * RS, r), 0);
    assert_memory_equal(r, w, 32 * RS);
    arc_get_stats(&b);
    assert_true(b.hits - a.hits < 16);
    free(w);
    free(r);
    dmu_objset_close(os);
    dmu_objset_close(nc);
    test_pool_check(&f);
    test_pool_remove(&f);
}


/* The nice values of this process's threads whose name starts with prefix:
 * the lowest in *lo, the highest in *hi; returns how many there are. */
static int thread_nice_range(const char *prefix, long *lo, long *hi)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    *lo = 100;
    *hi = -100;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "", stat[1024] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        bool got = fgets(comm, sizeof comm, f) != NULL;
        fclose(f);
        if (!got || strncmp(comm, prefix, strlen(prefix)) != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        got = fgets(stat, sizeof stat, f) != NULL;
        fclose(f);
        /* Fields after the parenthesised name: state is the 3rd, nice the 19th. */
        char *p = strrchr(stat, ')');
        if (!got || !p) continue;
        long v = 0;
        int field = 2;
        for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " "))
            if (++field == 19) v = strtol(tok, NULL, 10);
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
        n++;
    }
    closedir(d);
    return n;
}

/* A synced record that is stored raw is cached as the record's own buffer
 * (counted, no copy), and what the ARC then serves is what was written, also
 * after the writer has let go of the buffer and later writes have reused the
 * memory it released: read in the SPA's memory-only mode, so nothing comes
 * from a device. Compressed records are cached as the compressor's output
 * (and the writer's bytes, test_written_records_are_read_from_the_arc). */
static void test_written_records_cached_without_copy(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_adopt", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    arc_stats_t a, b;
    arc_get_stats(&a);
    put(os, obj, 0, 16 * RS, 21); /* random: stored raw */
    assert_int_equal(dmu_objset_sync(os), 0);
    spa_txg_wait_synced(f.spa, 0);
    arc_get_stats(&b);
    assert_true(b.adopted_writes - a.adopted_writes >= 16);
    for (uint64_t v = 22; v < 26; v++) { /* the released buffers' memory written over */
        put(os, obj, 16 * RS, 16 * RS, v);
        assert_int_equal(dmu_objset_sync(os), 0);
    }
    spa_memory_only_begin();
    expect(os, obj, 0, 16 * RS, 21);
    expect(os, obj, 16 * RS, 16 * RS, 25);
    assert_false(spa_memory_only_end());
    pool_done(&f, os);
}

/* A file read right after it was written, once the ARC needed the room of
 * the writer's copies: its records are in the ARC as stored (compressed) and
 * unread. The read-ahead decompresses those ahead of the reader, off its
 * path, on threads at the lowest priority (the reads from the disks keep
 * theirs), and each first hit takes that copy. A second read finds copies
 * made ahead of it as well, which its hits keep. */
static void test_written_records_decompressed_ahead(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_wda", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    uint8_t *w = malloc(32 * RS), *r = malloc(32 * RS);
    fill_text(w, 32 * RS, 33);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, 32 * RS, w, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    arc_stats_t a, p, z;
    /* The writer's bytes kept as the records' copies are the first thing the
     * ARC gives up for room: shrunk by just their size, it keeps every record
     * (as stored) and none of them; the read-ahead then has 32 unread
     * compressed records before it. */
    arc_get_stats(&a);
    assert_true(a.written_copies_size >= 32 * RS);
    arc_set_target(a.size - a.written_copies_size);
    arc_set_target(UINT64_MAX);
    arc_get_stats(&p);
    assert_int_equal(p.written_copies_size, 0);
    assert_int_equal(p.entries, a.entries);
    assert_int_equal(p.evictions, a.evictions);
    assert_int_equal(p.decompressed_size, a.decompressed_size - a.written_copies_size);
    arc_get_stats(&a);
    uint64_t issued0 = dmu_prefetch_issued();
    for (uint64_t rec = 0; rec < 3; rec++) /* the third read in a row starts the read-ahead */
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, r + rec * RS), 0);
    dmu_prefetch_wait();
    arc_get_stats(&p);
    assert_int_equal(dmu_prefetch_issued(), issued0); /* nothing read from the disks */
    /* Records 3..31 wait decompressed (the window covers them all). */
    assert_int_equal(p.decompressed_size - a.decompressed_size, 29 * RS);
    long lo, hi;
    assert_true(thread_nice_range("decomp/", &lo, &hi) > 0);
    assert_int_equal(hi, 19); /* the one(s) that ran lowered themselves */
    assert_true(thread_nice_range("prefetch/", &lo, &hi) > 0);
    assert_int_equal(hi, 0);
    assert_int_equal(p.hits - a.hits, 3);
    for (uint64_t rec = 3; rec < 32; rec++)
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, r + rec * RS), 0);
    assert_memory_equal(r, w, 32 * RS);
    dmu_prefetch_wait();
    arc_get_stats(&z);
    assert_int_equal(z.decompressed_size, a.decompressed_size); /* taken by the first hits */
    assert_int_equal(z.mfu_hits, a.mfu_hits);                   /* still a first use each */
    assert_true(z.hits - a.hits >= 32);

    /* A second reader: each hit now makes its record hot, with a copy the ARC
     * keeps. The read-ahead has those copies made ahead of it too, so once
     * three reads start the stream, records 3..31 wait decompressed. */
    memset(r, 0, 32 * RS);
    for (uint64_t rec = 0; rec < 3; rec++)
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, r + rec * RS), 0);
    dmu_prefetch_wait();
    arc_get_stats(&p);
    assert_int_equal(p.decompressed_size - z.decompressed_size, 32 * RS); /* 3 by the reader */
    for (uint64_t rec = 3; rec < 32; rec++)
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, r + rec * RS), 0);
    assert_memory_equal(r, w, 32 * RS);
    dmu_prefetch_wait();
    arc_get_stats(&a);
    assert_int_equal(a.decompressed_size, p.decompressed_size); /* kept: hot now */
    assert_true(a.mfu_size - z.mfu_size >= 32 * RS); /* every record moved there */
    free(w);
    free(r);
    pool_done(&f, os);
}

/* A record read from the disks - a reader's miss or a read-ahead - is kept in
 * the ARC in the very buffer the device filled (adopted, not copied): what the
 * ARC lends afterwards is that direct-I/O-aligned buffer (a copy would sit in
 * a malloc'd one), with the record's bytes. */
static void test_cold_reads_adopt_the_read_buffer(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_adopt", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    put(os, obj, 0, 8 * RS, 5); /* incompressible: stored as is */
    assert_int_equal(dmu_objset_sync(os), 0);
    arc_purge_pool(spa_guid(f.spa));
    uint8_t *w = malloc(8 * RS), *r = malloc(8 * RS + 1);
    fill(w, 8 * RS, 5);
    /* Misses into a buffer the device cannot fill in place (misaligned), then
     * a sequential stream whose read-ahead brings records 4..7. */
    for (uint64_t rec = 0; rec < 4; rec++) {
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, r + 1), 0);
        assert_memory_equal(r + 1, w + rec * RS, RS);
    }
    dmu_prefetch_wait();
    cairn_span_t sv[16];
    cairn_spans_t sp = {.v = sv, .cap = 16};
    assert_int_equal(dmu_read_spans(os, obj, 0, 8 * RS, r, true, &sp), 0);
    assert_int_equal(sp.n, 8);
    for (size_t i = 0; i < sp.n; i++) {
        assert_int_equal(sp.v[i].pos, i * RS);
        assert_int_equal(sp.v[i].len, RS);
        assert_int_equal((uintptr_t)sp.v[i].data % CAIRN_IO_ALIGN, 0);
        assert_memory_equal(sp.v[i].data, w + i * RS, RS);
    }
    cairn_spans_release(&sp);
    free(w);
    free(r);
    pool_done(&f, os);
}

static void add_cache(test_pool_t *f, bool create)
{
    char dev[700], err[256];
    snprintf(dev, sizeof dev, "%s/cache0", f->dir);
    if (create) {
        int fd = open(dev, O_CREAT | O_RDWR | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 64 * CAIRN_MIB), 0);
        close(fd);
    }
    int e = arc_l2_add(spa_guid(f->spa), dev, create, err, sizeof err);
    if (e) fprintf(stderr, "%s\n", err);
    assert_int_equal(e, 0);
}

/* A pool with a cache device and an object of 64 records (data of seed),
 * written, reimported and read once, and the ARC's copy of all of it fed to the
 * device by hand; the object set is left open in *os. Returns the object. */
static uint64_t l2_fed_object(test_pool_t *f, const char *tag, uint64_t seed, objset_t **os)
{
    arc_l2_set_feed(256 * CAIRN_MIB, 3600 * 1000); /* fed by hand below */
    pool_with_objset(f, tag, 256 * CAIRN_MIB, 64 * CAIRN_MIB, os);
    add_cache(f, true);
    uint64_t obj = new_obj(*os);
    put(*os, obj, 0, 64 * RS, seed);
    assert_int_equal(dmu_objset_sync(*os), 0);
    dmu_objset_close(*os);
    test_pool_reimport(f);
    add_cache(f, false);
    assert_int_equal(dmu_objset_open(f->spa, "d", os), 0);
    expect(*os, obj, 0, 64 * RS, seed); /* from the pool into the ARC */
    assert_true(arc_l2_feed_now() >= 64 * RS);
    return obj;
}

static void test_l2arc_serves_and_survives_reimport(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    uint64_t obj = l2_fed_object(&f, "dmu_arc_l2", 5, &os); /* 8 MiB of incompressible records */
    arc_set_max(CAIRN_MIB); /* the ARC lets go of almost all of it */
    arc_stats_t a, b;
    arc_get_stats(&a);
    expect(os, obj, 0, 64 * RS, 5);
    arc_get_stats(&b);
    assert_true(b.l2_hits - a.l2_hits >= 48);
    assert_int_equal(b.l2_cksum_bad, a.l2_cksum_bad);

    /* export + import: the device's index comes back from its log */
    arc_set_max(64 * CAIRN_MIB);
    dmu_objset_close(os);
    test_pool_reimport(&f);
    arc_get_stats(&a);
    add_cache(&f, false);
    arc_get_stats(&b);
    assert_true(b.l2_rebuilt - a.l2_rebuilt >= 64);
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    arc_get_stats(&a);
    expect(os, obj, 0, 64 * RS, 5);
    arc_get_stats(&b);
    assert_true(b.l2_hits - a.l2_hits >= 64);

    /* junk over the device: reads stay right, the device is dropped */
    dmu_objset_close(os);
    test_pool_reimport(&f);
    add_cache(&f, false);
    char dev[700];
    snprintf(dev, sizeof dev, "%s/cache0", f.dir);
    int fd = open(dev, O_RDWR);
    uint8_t *junk = malloc(CAIRN_MIB);
    memset(junk, 0x3c, CAIRN_MIB);
    for (uint64_t off = 8192; off < 32 * CAIRN_MIB; off += CAIRN_MIB)
        assert_int_equal(pwrite(fd, junk, CAIRN_MIB, (off_t)off), (ssize_t)CAIRN_MIB);
    close(fd);
    free(junk);
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    arc_get_stats(&a);
    expect(os, obj, 0, 64 * RS, 5);
    arc_get_stats(&b);
    assert_true(b.l2_cksum_bad > a.l2_cksum_bad);
    assert_true(b.l2_devices_dropped > a.l2_devices_dropped);
    pool_done(&f, os);
}

/* Memory-only mode (spa_memory_only_begin): a record the ARC holds in memory
 * is read; one that is only on the disks and the cache device is refused with
 * nothing read from either (no cache-device hit, not brought into the ARC),
 * and the end of the mode says so; then the thread reads both again. */
static void test_memory_only_mode_refuses_devices(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    uint64_t obj = l2_fed_object(&f, "dmu_arc_memonly", 9, &os);
    arc_set_max(2 * CAIRN_MIB); /* the device keeps all 64 records, memory the last few */
    dmu_prefetch_wait();
    uint8_t *all = malloc(64 * RS), *b = malloc(RS);
    fill(all, 64 * RS, 9);
    spa_memory_only_begin();
    assert_int_equal(dmu_read(os, obj, 63 * RS, RS, b), 0);
    assert_false(spa_memory_only_end());
    assert_memory_equal(b, all + 63 * RS, RS);

    arc_stats_t before, after;
    arc_get_stats(&before);
    for (int i = 0; i < 2; i++) { /* the refused read brought nothing in */
        spa_memory_only_begin();
        assert_int_not_equal(dmu_read(os, obj, 0, RS, b), 0);
        assert_true(spa_memory_only_end());
    }
    arc_get_stats(&after);
    assert_int_equal(after.l2_hits, before.l2_hits);
    assert_int_equal(after.misses, before.misses);

    assert_int_equal(spa_memory_only_refuse(), 0); /* the mode is off */
    assert_int_equal(dmu_read(os, obj, 0, RS, b), 0);
    assert_memory_equal(b, all, RS);
    arc_get_stats(&after);
    assert_int_equal(after.l2_hits, before.l2_hits + 1);
    free(all);
    free(b);
    pool_done(&f, os);
}

/* A stream read on a thread in the SPA's memory-only mode (the NFS server's
 * I/O thread) keeps reading ahead although the next window's block pointers
 * lie in indirect blocks not yet in memory: the lookup may read them there
 * (refused, the window would be lost and the stream would leave memory). An
 * object of 4 KiB records, four indirect blocks, read cold after a reimport. */
static void test_prefetch_from_memory_only_thread(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_pfmo", 256 * CAIRN_MIB, 1024 * CAIRN_MIB, &os);
    const uint64_t rs = 4096, nrec = 4096;
    uint64_t obj = new_obj_rs(os, (uint32_t)rs);
    put(os, obj, 0, nrec * rs, 13);
    reopen_cold(&f, &os);
    uint8_t *all = malloc(nrec * rs), *b = malloc(rs);
    fill(all, nrec * rs, 13);
    for (uint64_t r = 0; r < 3; r++) /* the stream starts where reads may wait */
        assert_int_equal(dmu_read(os, obj, r * rs, rs, b), 0);
    dmu_prefetch_wait();
    for (uint64_t r = 3; r < nrec; r++) {
        bool refused = true;
        int err = -1;
        for (int try = 0; try < 2 && (err || refused); try++) {
            if (try) dmu_prefetch_wait(); /* read-ahead behind the reader: let it catch up */
            spa_memory_only_begin();
            err = dmu_read(os, obj, r * rs, rs, b);
            refused = spa_memory_only_end();
        }
        if (err || refused) fail_msg("record %llu not read ahead", (unsigned long long)r);
        assert_memory_equal(b, all + r * rs, rs);
    }
    free(all);
    free(b);
    pool_done(&f, os);
}

/* A sequential reader: after a few reads in a row the records ahead are read in the
 * background, so the next reads are ARC hits; a random reader gets no read-ahead, nor
 * does a stream whose records are all in the ARC already. */
static void test_sequential_prefetch(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_pf", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os), other = new_obj(os);
    put(os, obj, 0, 96 * RS, 11);
    put(os, other, 0, 96 * RS, 12);
    reopen_cold(&f, &os);
    uint8_t *all = malloc(96 * RS), *b = malloc(RS);
    /* random order over `other`: never three in a row */
    uint64_t issued0 = dmu_prefetch_issued();
    for (int i = 0; i < 16; i++) {
        uint64_t rec = (uint64_t)((i * 37) % 96);
        assert_int_equal(dmu_read(os, other, rec * RS, RS, b), 0);
    }
    dmu_prefetch_wait();
    assert_int_equal(dmu_prefetch_issued(), issued0);
    /* sequential over `obj`: records 0, 1, 2 start a stream */
    fill(all, 96 * RS, 11);
    for (uint64_t r = 0; r < 3; r++) {
        assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
        assert_memory_equal(b, all + r * RS, RS);
    }
    dmu_prefetch_wait();
    assert_true(dmu_prefetch_issued() - issued0 >= 16);
    arc_stats_t a, z;
    arc_get_stats(&a);
    for (uint64_t r = 3; r < 19; r++) {
        assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
        assert_memory_equal(b, all + r * RS, RS);
    }
    arc_get_stats(&z);
    assert_true(z.hits - a.hits >= 16); /* every one of them was read ahead */
    /* the stream goes on to the end, with the right data */
    for (uint64_t r = 19; r < 96; r++) {
        assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
        assert_memory_equal(b, all + r * RS, RS);
    }
    /* a second pass finds everything in the ARC: nothing to read ahead */
    dmu_prefetch_wait();
    uint64_t issued1 = dmu_prefetch_issued();
    for (uint64_t r = 0; r < 96; r++) {
        assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
        assert_memory_equal(b, all + r * RS, RS);
    }
    dmu_prefetch_wait();
    assert_int_equal(dmu_prefetch_issued(), issued1);
    free(all);
    free(b);
    pool_done(&f, os);
}

/* Reads record pairs [from, to) of obj, the second record of each pair first. */
static void read_pairs_swapped(objset_t *os, uint64_t obj, uint64_t from, uint64_t to,
                               const uint8_t *all, uint8_t *b)
{
    for (uint64_t pair = from; pair < to; pair++)
        for (uint64_t r = pair * 2 + 2; r-- > pair * 2;) {
            assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
            assert_memory_equal(b, all + r * RS, RS);
        }
}

/* Reads that overtake each other on their way in (a client's READs in flight,
 * run on several server threads) still make a stream: records read in swapped
 * pairs, 1 0 3 2 5 4 ..., are read ahead as a sequential reader's are. */
static void test_prefetch_reordered(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_pfr", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    put(os, obj, 0, 96 * RS, 13);
    reopen_cold(&f, &os);
    uint8_t *all = malloc(96 * RS), *b = malloc(RS);
    fill(all, 96 * RS, 13);
    uint64_t issued0 = dmu_prefetch_issued();
    read_pairs_swapped(os, obj, 0, 3, all, b);
    dmu_prefetch_wait();
    assert_true(dmu_prefetch_issued() - issued0 >= 16);
    arc_stats_t a, z;
    arc_get_stats(&a);
    read_pairs_swapped(os, obj, 3, 11, all, b);
    arc_get_stats(&z);
    assert_true(z.hits - a.hits >= 16); /* every one of them was read ahead */
    /* reading one record over and over is no stream */
    dmu_prefetch_wait();
    uint64_t issued1 = dmu_prefetch_issued();
    for (int i = 0; i < 8; i++) assert_int_equal(dmu_read(os, obj, 90 * RS, RS, b), 0);
    dmu_prefetch_wait();
    assert_int_equal(dmu_prefetch_issued(), issued1);
    free(all);
    free(b);
    pool_done(&f, os);
}

/* Reads records [from, to) of obj in order; returns how far past `to` read-ahead
 * was asked for once it is done (its first request was record `first`). */
static uint64_t read_stream(objset_t *os, uint64_t obj, uint64_t from, uint64_t to,
                            uint64_t issued0, uint64_t first, const uint8_t *all)
{
    uint8_t *b = malloc(RS);
    for (uint64_t r = from; r < to; r++) {
        assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
        assert_memory_equal(b, all + r * RS, RS);
    }
    free(b);
    dmu_prefetch_wait();
    return first + (dmu_prefetch_issued() - issued0) - to;
}

/* The read-ahead window grows as a stream goes on: three reads in a row read
 * 8 MiB ahead, a long stream up to 32 MiB (so a stall of the disk does not
 * reach the reader), never more; on a small ARC (1/32 of it below 32 MiB) it
 * stays at 8 MiB. */
static void test_prefetch_window_grows(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_pfw", 256 * CAIRN_MIB, 1024 * CAIRN_MIB, &os);
    const uint64_t nrec = 640; /* 80 MiB */
    uint64_t obj = new_obj(os);
    put(os, obj, 0, nrec * RS, 21);
    reopen_cold(&f, &os);
    uint8_t *all = malloc(nrec * RS), *b = malloc(RS);
    fill(all, nrec * RS, 21);
    uint64_t issued0 = dmu_prefetch_issued();
    for (uint64_t r = 0; r < 3; r++) assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
    dmu_prefetch_wait();
    assert_int_equal(dmu_prefetch_issued() - issued0, 8 * CAIRN_MIB / RS); /* records 3..66 */
    uint64_t ahead = read_stream(os, obj, 3, 100, issued0, 3, all);
    assert_true(ahead > 8 * CAIRN_MIB / RS);
    assert_true(ahead <= 32 * CAIRN_MIB / RS);
    ahead = read_stream(os, obj, 100, 300, issued0, 3, all);
    assert_true(ahead > 8 * CAIRN_MIB / RS);
    assert_true(ahead <= 32 * CAIRN_MIB / RS);
    read_stream(os, obj, 300, nrec, issued0, 3, all);
    /* The same stream again on a 256 MiB ARC (the default): 8 MiB at most. */
    dmu_objset_close(os);
    test_pool_reimport(&f);
    arc_set_max(256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    issued0 = dmu_prefetch_issued();
    ahead = read_stream(os, obj, 0, 300, issued0, 3, all);
    assert_true(ahead > 0);
    assert_true(ahead <= 8 * CAIRN_MIB / RS);
    free(all);
    free(b);
    pool_done(&f, os);
    arc_set_max(64 * CAIRN_MIB);
}

/* Small records get the window in bytes: three 1 MiB reads of 8 KiB records
 * in a row read 8 MiB (1024 records) ahead, where a cap of 256 records had held
 * it to 2 MiB - two of the reader's reads, which then overtook the read-ahead
 * still in flight and read record by record. On a 16 MiB ARC the window is an
 * eighth of it, so what is read ahead is not evicted before it is read. */
static void test_prefetch_window_small_records(void **state)
{
    (void)state;
    const uint32_t rs = 8192;
    const uint64_t len = 16 * CAIRN_MIB;
    for (int small_arc = 0; small_arc < 2; small_arc++) {
        test_pool_t f;
        objset_t *os;
        pool_with_objset(&f, "dmu_arc_pfsmall", 256 * CAIRN_MIB,
                         small_arc ? 16 * CAIRN_MIB : 1024 * CAIRN_MIB, &os);
        uint64_t obj = new_obj_rs(os, rs);
        put(os, obj, 0, len, 33);
        reopen_cold(&f, &os);
        uint8_t *b = malloc(CAIRN_MIB), *all = malloc(len);
        fill(all, len, 33);
        uint64_t issued0 = dmu_prefetch_issued();
        for (uint64_t i = 0; i < 3; i++) {
            assert_int_equal(dmu_read(os, obj, i * CAIRN_MIB, CAIRN_MIB, b), 0);
            assert_memory_equal(b, all + i * CAIRN_MIB, CAIRN_MIB);
        }
        dmu_prefetch_wait();
        uint64_t want = (small_arc ? 2 : 8) * CAIRN_MIB / rs;
        assert_int_equal(dmu_prefetch_issued() - issued0, want);
        free(b);
        free(all);
        pool_done(&f, os);
    }
    arc_set_max(64 * CAIRN_MIB);
}

/* Read-ahead of records the ARC let go of but a cache device holds: the records
 * ahead of a sequential reader come from the cache device (verified), not the
 * disks, and read-ahead never touches the reader's buffers (it once copied a
 * cache device's block into the buffer it does not have). */
static void test_prefetch_from_cache_device(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    uint64_t obj = l2_fed_object(&f, "dmu_arc_l2pf", 7, &os);
    arc_set_max(4 * CAIRN_MIB); /* the ARC keeps a few records, the device all */
    uint8_t *all = malloc(64 * RS), *b = malloc(RS);
    fill(all, 64 * RS, 7);
    dmu_prefetch_wait();
    uint64_t issued0 = dmu_prefetch_issued();
    arc_stats_t a, z;
    arc_get_stats(&a);
    for (uint64_t r = 0; r < 64; r++) {
        assert_int_equal(dmu_read(os, obj, r * RS, RS, b), 0);
        assert_memory_equal(b, all + r * RS, RS);
    }
    dmu_prefetch_wait();
    arc_get_stats(&z);
    assert_true(dmu_prefetch_issued() - issued0 >= 16); /* a stream was read ahead */
    /* every record came off the cache device, by the reader or by read-ahead */
    assert_true(z.l2_hits - a.l2_hits >= 56);
    assert_int_equal(z.l2_cksum_bad, a.l2_cksum_bad);
    free(all);
    free(b);
    arc_set_max(64 * CAIRN_MIB);
    pool_done(&f, os);
}

/* Reads records [from, nrec) of a stream whose copies were made ahead, checks
 * them against want, and that their first hits took every copy made since
 * *before (the stats then go to *after). */
static void stream_rest_takes_copies(objset_t *os, uint64_t obj, int from, int nrec,
                                     const uint8_t *want, const arc_stats_t *before,
                                     arc_stats_t *after)
{
    uint8_t *b = malloc(RS);
    for (int i = from; i < nrec; i++) {
        assert_int_equal(dmu_read(os, obj, (uint64_t)i * RS, RS, b), 0);
        assert_memory_equal(b, want + (size_t)i * RS, RS);
    }
    free(b);
    dmu_prefetch_wait();
    arc_get_stats(after);
    assert_int_equal(after->decompressed_size, before->decompressed_size);
}

/* Compressed records a stream's read-ahead brings from a cache device get
 * their decompressed copy ahead of the reader too, as records from the disks
 * do (arc_prefetch keeps them as stored; the read task hands them on). */
static void test_prefetch_from_cache_device_decompressed(void **state)
{
    (void)state;
    enum { NREC = 16 };
    test_pool_t f;
    objset_t *os;
    arc_l2_set_feed(256 * CAIRN_MIB, 3600 * 1000); /* fed by hand below */
    pool_with_objset(&f, "dmu_arc_l2dc", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    add_cache(&f, true);
    uint64_t obj = new_obj(os);
    uint8_t *w = malloc(NREC * RS), *b = malloc(RS);
    fill_text(w, NREC * RS, 41);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, NREC * RS, w, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    dmu_objset_close(os);
    test_pool_reimport(&f);
    add_cache(&f, false);
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    for (int i = 0; i < NREC; i++) assert_int_equal(dmu_read(os, obj, (uint64_t)i * RS, RS, b), 0);
    dmu_prefetch_wait();
    assert_true(arc_l2_feed_now() > 0); /* the records, compressed, onto the device */

    /* Out of memory, on the device only. */
    dmu_objset_close(os);
    test_pool_reimport(&f);
    add_cache(&f, false);
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    arc_stats_t a, p, z;
    arc_get_stats(&a);
    for (int i = 0; i < 3; i++) { /* the third read in a row starts the read-ahead */
        assert_int_equal(dmu_read(os, obj, (uint64_t)i * RS, RS, b), 0);
        assert_memory_equal(b, w + i * RS, RS);
    }
    dmu_prefetch_wait();
    arc_get_stats(&p);
    assert_true(p.l2_hits - a.l2_hits >= NREC);
    assert_int_equal(p.decompressed_size - a.decompressed_size, (NREC - 3) * RS);
    stream_rest_takes_copies(os, obj, 3, NREC, w, &a, &z);
    free(w);
    free(b);
    pool_done(&f, os);
}

/* ---- read-ahead racing a reader of the same blocks ---- */

#define RACE_BLOCKS 64

typedef struct race {
    spa_t *spa;
    cairn_blkptr_t bps[RACE_BLOCKS];
    size_t nbps;
    atomic_bool stop;
} race_t;

static int collect_data_bps(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa;
    (void)bm;
    race_t *r = arg;
    if (bp->level == 0 && bp->lsize == RS && r->nbps < RACE_BLOCKS) r->bps[r->nbps++] = *bp;
    return 0;
}

/* The object set's data block pointers (of RS-byte records), in record order. */
static void collect_records(spa_t *spa, objset_t *os, race_t *r)
{
    memset(r, 0, sizeof *r);
    r->spa = spa;
    cairn_blkptr_t root;
    dmu_objset_root(os, &root);
    assert_int_equal(dmu_traverse_objset(spa, &root, 0, collect_data_bps, r), 0);
}

static void *race_prefetcher(void *arg)
{
    race_t *r = arg;
    while (!atomic_load(&r->stop))
        for (size_t i = 0; i < r->nbps; i++)
            assert_int_equal(spa_block_prefetch(r->spa, &r->bps[i], ARC_POLICY_DEFAULT), 0);
    return NULL;
}

/* A block read ahead may be cached by a reader between read-ahead's look at the
 * ARC and its read: read-ahead has no buffer, so that hit must not copy into
 * one (it did, and crashed the intent-log crash test's verifier under load). One
 * thread drops the blocks from the ARC and reads them back (compressed records,
 * then their decompressed copies once they are hot) while two read them ahead. */
static void test_prefetch_races_reader(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_race", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    /* half compressible, so both the stored and the decompressed hit paths run */
    uint8_t *b = malloc(RS), *want = malloc(RS);
    for (uint64_t i = 0; i < RACE_BLOCKS; i++) {
        fill(b, RS, 100 + i);
        if (i % 2) memset(b + RS / 4, 0, RS / 2);
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, obj, i * RS, RS, b, tx), 0);
        dmu_tx_commit(tx);
    }
    assert_int_equal(dmu_objset_sync(os), 0);
    race_t r;
    collect_records(f.spa, os, &r);
    assert_int_equal(r.nbps, RACE_BLOCKS);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, race_prefetcher, &r), 0);
    for (int round = 0; round < 300; round++) {
        for (size_t i = 0; i < r.nbps; i++) {
            if (round % 3 == 0) arc_free(spa_guid(f.spa), &r.bps[i]);
            assert_int_equal(spa_block_read(f.spa, &r.bps[i], b), 0);
        }
    }
    atomic_store(&r.stop, true);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    /* and the blocks read back are the blocks written */
    for (uint64_t i = 0; i < RACE_BLOCKS; i++) {
        fill(want, RS, 100 + i);
        if (i % 2) memset(want + RS / 4, 0, RS / 2);
        assert_int_equal(dmu_read(os, obj, i * RS, RS, b), 0);
        assert_memory_equal(b, want, RS);
    }
    free(b);
    free(want);
    pool_done(&f, os);
}

/* ---- what read-ahead brings, and from where ---- */

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const cairn_blkptr_t *)a)->dva[0].offset, y = ((const cairn_blkptr_t *)b)->dva[0].offset;
    return x < y ? -1 : x > y;
}


/* A compressed block read ahead from the disks is kept as stored
 * (spa_blocks_prefetch decompresses nothing); a stream's read-ahead then
 * gives it a decompressed copy on its low-priority threads, which the first
 * hit takes; the entry then keeps only the stored bytes and stays on the MRU
 * (a stream is not hot). */
static void test_read_ahead_brings_decompressed_copy(void **state)
{
    (void)state;
    enum { NREC = 16 };
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_rad", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    uint8_t *all = malloc(NREC * RS), *b = malloc(RS);
    for (int i = 0; i < NREC; i++) {
        fill(all + i * RS, RS, 500 + (uint64_t)i);
        memset(all + i * RS + RS / 4, 0, RS / 2); /* compressible */
    }
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, NREC * RS, all, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    race_t r;
    collect_records(f.spa, os, &r);
    assert_int_equal(r.nbps, NREC);
    for (int i = 0; i < NREC; i++) assert_int_not_equal(r.bps[i].compress, CAIRN_COMPRESS_OFF);
    dmu_objset_close(os);

    /* The SPA's read-ahead alone: verified and kept as stored, unread. */
    test_pool_reimport(&f); /* nothing of it in memory */
    arc_stats_t a, p, z;
    arc_get_stats(&a);
    spa_blocks_prefetch(f.spa, r.bps, 8, ARC_POLICY_DEFAULT);
    arc_get_stats(&p);
    assert_int_equal(p.decompressed_size, a.decompressed_size);
    for (int i = 0; i < 8; i++)
        assert_int_equal(arc_ahead_state(spa_guid(f.spa), &r.bps[i]), ARC_AHEAD_DECOMPRESS);

    /* A stream from the disks: its read-ahead decompresses what it read. */
    test_pool_reimport(&f);
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    arc_get_stats(&a);
    uint64_t issued0 = dmu_prefetch_issued();
    for (int i = 0; i < 3; i++) { /* the third read in a row starts the read-ahead */
        assert_int_equal(dmu_read(os, obj, (uint64_t)i * RS, RS, b), 0);
        assert_memory_equal(b, all + i * RS, RS);
    }
    dmu_prefetch_wait();
    arc_get_stats(&p);
    assert_int_equal(dmu_prefetch_issued() - issued0, NREC - 3);
    assert_int_equal(p.decompressed_size - a.decompressed_size, (NREC - 3) * RS);
    stream_rest_takes_copies(os, obj, 3, NREC, all, &a, &z);
    assert_true(z.mru_hits - p.mru_hits >= NREC - 3);
    assert_int_equal(z.mfu_hits, p.mfu_hits);
    free(all);
    free(b);
    pool_done(&f, os);
}

/* A stream over records of which the cache device holds every other one: those
 * come from the cache device, not the disks, even where the disks' copies lie
 * end to end with the ones read from there (a read-ahead run stops at them). */
static void test_read_ahead_runs_stop_at_cache_device(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    uint64_t obj = l2_fed_object(&f, "dmu_arc_l2run", 9, &os);
    race_t r;
    collect_records(f.spa, os, &r);
    assert_int_equal(r.nbps, 64);
    dmu_objset_close(os);
    test_pool_reimport(&f); /* memory empty, the cache device's index rebuilt */
    add_cache(&f, false);
    for (size_t i = 1; i < r.nbps; i += 2) arc_free(spa_guid(f.spa), &r.bps[i]); /* off the device */
    assert_int_equal(dmu_objset_open(f.spa, "d", &os), 0);
    vdev_t *disk = spa_root_vdev(f.spa)->children[0];
    uint64_t disk0 = atomic_load(&disk->stats.read_bytes);
    arc_stats_t a, z;
    arc_get_stats(&a);
    uint8_t *all = malloc(64 * RS), *b = malloc(RS);
    fill(all, 64 * RS, 9);
    for (uint64_t rec = 0; rec < 64; rec++) { /* one record per read: a stream */
        assert_int_equal(dmu_read(os, obj, rec * RS, RS, b), 0);
        assert_memory_equal(b, all + rec * RS, RS);
    }
    free(all);
    free(b);
    dmu_prefetch_wait();
    arc_get_stats(&z);
    uint64_t from_disk = atomic_load(&disk->stats.read_bytes) - disk0;
    assert_true(z.l2_hits - a.l2_hits >= 30); /* the even records */
    /* the odd records, metadata and a few read twice (36 records' worth measured);
     * runs that carried the even ones too read all 64 */
    assert_true(from_disk < 48 * (uint64_t)RS);
    pool_done(&f, os);
}

/* A sync writes an object's records in batches of 1 MiB on parallel workers;
 * each batch's blocks lie end to end (its allocation is one critical section),
 * which read-ahead runs and merged device writes rely on. */
static void test_sync_batches_lie_end_to_end(void **state)
{
    (void)state;
    test_pool_t f;
    objset_t *os;
    pool_with_objset(&f, "dmu_arc_batch", 256 * CAIRN_MIB, 64 * CAIRN_MIB, &os);
    uint64_t obj = new_obj(os);
    uint8_t *b = malloc(RS);
    for (uint64_t i = 0; i < 64; i++) { /* sizes vary: some compress, some do not */
        fill(b, RS, 700 + i);
        if (i % 3 == 0) memset(b + RS / 8, 0, RS / 2);
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, obj, i * RS, RS, b, tx), 0);
        dmu_tx_commit(tx);
    }
    assert_int_equal(dmu_objset_sync(os), 0);
    race_t r;
    collect_records(f.spa, os, &r);
    assert_int_equal(r.nbps, 64);
    /* r.bps is in record order: records 8k..8k+7 are one batch, end to end */
    for (size_t g = 0; g < r.nbps; g += 8) {
        qsort(&r.bps[g], 8, sizeof r.bps[0], by_offset);
        for (size_t i = g + 1; i < g + 8; i++)
            assert_int_equal(r.bps[i].dva[0].offset,
                             r.bps[i - 1].dva[0].offset + cairn_dva_asize(&r.bps[i - 1].dva[0]));
    }
    free(b);
    pool_done(&f, os);
}

/* ---- read-ahead of blocks laid end to end, on a mirror with a bad side ---- */


static int mirror_import(const char *name, const char *const *paths, spa_t **spa)
{
    char err[256] = "";
    int e = spa_import(name, paths, 2, 0, spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    return e;
}

/* The records of one sync batch lie end to end (allocated together), so their
 * read-ahead is one read of the side it picks, not one per block; a block that
 * does not verify there is read from every side, served from the good one and
 * repaired on the bad one, which is charged the checksum error. */
static void test_prefetch_run_heals_mirror(void **state)
{
    (void)state;
    arc_set_max(64 * CAIRN_MIB);
    test_pool_t f; /* for its directory and name; the pool is a two-way mirror */
    test_pool_make(&f, "dmu_arc_run", 64 * CAIRN_MIB);
    test_pool_export(&f);
    char side_path[2][700];
    const char *paths[2];
    for (int i = 0; i < 2; i++) {
        snprintf(side_path[i], sizeof side_path[i], "%s/side%d", f.dir, i);
        int fd = open(side_path[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)(256 * CAIRN_MIB)), 0);
        close(fd);
        paths[i] = side_path[i];
    }
    spa_vdev_spec_t leaves[2] = {{.type = VDEV_TYPE_LEAF, .path = side_path[0]},
                                 {.type = VDEV_TYPE_LEAF, .path = side_path[1]}};
    spa_vdev_spec_t mirror = {.type = VDEV_TYPE_MIRROR, .nchildren = 2, .children = leaves};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &mirror};
    char err[256] = "";
    spa_t *spa;
    snprintf(f.name + strlen(f.name), sizeof f.name - strlen(f.name), "m");
    assert_int_equal(spa_create(f.name, &root, NULL, &spa, err, sizeof err), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_create(spa, "d", NULL), 0);
    assert_int_equal(dmu_objset_open(spa, "d", &os), 0);
    uint64_t obj = new_obj(os);
    /* One 1 MiB write: one sync batch of 8 records, half of them compressible. */
    uint8_t *all = malloc(8 * RS), *b = malloc(RS);
    for (int i = 0; i < 8; i++) {
        fill(all + i * RS, RS, 300 + (uint64_t)i);
        if (i % 2) memset(all + i * RS + RS / 4, 0, RS / 2);
    }
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, 8 * RS, all, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    race_t r;
    collect_records(spa, os, &r);
    assert_int_equal(r.nbps, 8);
    dmu_objset_close(os);
    assert_int_equal(spa_export(spa), 0);

    cairn_blkptr_t sorted[8];
    memcpy(sorted, r.bps, sizeof sorted);
    qsort(sorted, 8, sizeof sorted[0], by_offset);
    for (int i = 1; i < 8; i++)
        assert_int_equal(sorted[i].dva[0].offset,
                         sorted[i - 1].dva[0].offset + cairn_dva_asize(&sorted[i - 1].dva[0]));
    /* Damage the fourth block on the side the run is read from. */
    int bad_side = (int)((sorted[0].dva[0].offset >> 20) % 2);
    uint64_t bad_off = VDEV_DATA_START + sorted[3].dva[0].offset;
    uint8_t junk[4096], good[4096], now[4096];
    memset(junk, 0x5a, sizeof junk);
    int fd = open(side_path[bad_side], O_RDWR);
    assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)bad_off), (ssize_t)sizeof junk);
    close(fd);

    assert_int_equal(mirror_import(f.name, paths, &spa), 0);
    vdev_t *m = spa_root_vdev(spa)->children[0];
    vdev_t *bad = m->children[bad_side];
    uint64_t reads0 = atomic_load(&bad->stats.reads);
    spa_blocks_prefetch(spa, r.bps, 8, ARC_POLICY_DEFAULT);
    uint64_t reads = atomic_load(&bad->stats.reads) - reads0;
    for (int i = 0; i < 8; i++) assert_true(arc_cached(spa_guid(spa), &r.bps[i]));
    /* the run, then the bad block alone on every side (one on this one) */
    assert_true(reads >= 1 && reads <= 3);
    assert_int_equal(atomic_load(&bad->stats.checksum_errors), 1);
    assert_true(atomic_load(&bad->stats.repaired_bytes) > 0);
    assert_int_equal(atomic_load(&m->children[1 - bad_side]->stats.checksum_errors), 0);
    assert_int_equal(dmu_objset_open(spa, "d", &os), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(dmu_read(os, obj, (uint64_t)i * RS, RS, b), 0);
        assert_memory_equal(b, all + i * RS, RS);
    }
    dmu_objset_close(os);
    assert_int_equal(spa_export(spa), 0);
    /* repaired: the bad side holds the good side's bytes again */
    fd = open(side_path[bad_side], O_RDONLY);
    assert_int_equal(pread(fd, now, sizeof now, (off_t)bad_off), (ssize_t)sizeof now);
    close(fd);
    fd = open(side_path[1 - bad_side], O_RDONLY);
    assert_int_equal(pread(fd, good, sizeof good, (off_t)bad_off), (ssize_t)sizeof good);
    close(fd);
    assert_memory_equal(now, good, sizeof good);
    spa_check_report_t rep;
    assert_int_equal(spa_check(f.name, paths, 2, &rep, err, sizeof err), 0);
    assert_int_equal(rep.leaked_bytes, 0);
    free(all);
    free(b);
    test_pool_remove(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewrite_and_free_never_stale),
        cmocka_unit_test(test_primarycache_none_bypasses),
        cmocka_unit_test(test_written_records_are_read_from_the_arc),
        cmocka_unit_test(test_written_records_cached_without_copy),
        cmocka_unit_test(test_written_records_decompressed_ahead),
        cmocka_unit_test(test_cold_reads_adopt_the_read_buffer),
        cmocka_unit_test(test_l2arc_serves_and_survives_reimport),
        cmocka_unit_test(test_memory_only_mode_refuses_devices),
        cmocka_unit_test(test_prefetch_from_memory_only_thread),
        cmocka_unit_test(test_sequential_prefetch),
        cmocka_unit_test(test_prefetch_reordered),
        cmocka_unit_test(test_prefetch_window_grows),
        cmocka_unit_test(test_prefetch_window_small_records),
        cmocka_unit_test(test_prefetch_races_reader),
        cmocka_unit_test(test_prefetch_from_cache_device),
        cmocka_unit_test(test_prefetch_from_cache_device_decompressed),
        cmocka_unit_test(test_prefetch_run_heals_mirror),
        cmocka_unit_test(test_read_ahead_brings_decompressed_copy),
        cmocka_unit_test(test_read_ahead_runs_stop_at_cache_device),
        cmocka_unit_test(test_sync_batches_lie_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
