/*
 * DMU object tests on a real pool over sparse temp files: records of every
 * size, sparse offsets past 4 GiB, partial records, holes, free_range, object
 * free and number reuse, bonus buffers, compression, persistence across
 * export/import, block enumeration, where data and holes begin (dmu_next_data,
 * dmu_next_hole), and which writes would first read a
 * record from a device (dmu_write_would_wait).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/arc.h>
#include <cairn/dmu.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_fixture.h"
#include "../../src/dmu/dmu_impl.h"

/* Deterministic content for (obj, byte offset). */
static uint8_t pat(uint64_t obj, uint64_t off)
{
    uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ULL ^ obj * 0xC2B2AE3D27D4EB4FULL;
    return (uint8_t)((x >> 29) ^ (off & 7) ^ 0x5a) | 1; /* never 0: zero records become holes */
}

static void fill_pat(uint8_t *b, uint64_t obj, uint64_t off, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++) b[i] = pat(obj, off + i);
}

static void check_pat(objset_t *os, uint64_t obj, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len);
    assert_int_equal(dmu_read(os, obj, off, len, b), 0);
    for (uint64_t i = 0; i < len; i++)
        if (b[i] != pat(obj, off + i)) {
            fprintf(stderr, "obj %llu off %llu: got %u want %u\n", (unsigned long long)obj,
                    (unsigned long long)(off + i), b[i], pat(obj, off + i));
            fail();
        }
    free(b);
}

static void check_zero(objset_t *os, uint64_t obj, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len);
    memset(b, 0xee, len);
    assert_int_equal(dmu_read(os, obj, off, len, b), 0);
    for (uint64_t i = 0; i < len; i++)
        if (b[i]) {
            fprintf(stderr, "obj %llu off %llu: got %u want 0\n", (unsigned long long)obj,
                    (unsigned long long)(off + i), b[i]);
            fail();
        }
    free(b);
}

static void write_pat(objset_t *os, uint64_t obj, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len);
    fill_pat(b, obj, off, len);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, off, len, b, tx), 0);
    dmu_tx_commit(tx);
    free(b);
}

static uint64_t alloc_obj(objset_t *os, uint32_t rs, cairn_compress_t c)
{
    dmu_object_props_t p = {.recordsize = rs, .compress = c,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t obj = 0;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &obj, tx), 0);
    dmu_tx_commit(tx);
    assert_true(obj > 0);
    return obj;
}

/* Extents written per object, checked three times: in memory, synced, reimported. */
typedef struct extent {
    uint64_t off, len;
} extent_t;

static void test_records_and_persistence(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_objects", 256 * CAIRN_MIB);
    uint64_t osid;
    assert_int_equal(dmu_objset_create(f.spa, "data", &osid), 0);
    assert_int_equal(dmu_objset_create(f.spa, "data", NULL), -EEXIST);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "data", &os), 0);

    const uint32_t sizes[] = {512, 4096, 128 * 1024, 1024 * 1024};
    uint64_t objs[4];
    /* Non-overlapping extents, some past 4 GiB, most unaligned. */
    const extent_t ext[] = {
        {0, 100},           {777, 5000},          {300000, 131072},
        {5ULL * CAIRN_GIB + 123, 70000}, {9ULL * CAIRN_GIB, 4096}, {2 * CAIRN_MIB - 10, 20},
    };
    for (int i = 0; i < 4; i++) {
        objs[i] = alloc_obj(os, sizes[i], CAIRN_COMPRESS_OFF);
        for (size_t k = 0; k < CAIRN_ARRAY_SIZE(ext); k++) write_pat(os, objs[i], ext[k].off, ext[k].len);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 4; i++) {
            for (size_t k = 0; k < CAIRN_ARRAY_SIZE(ext); k++) check_pat(os, objs[i], ext[k].off, ext[k].len);
            /* Gaps between extents are holes or zero tails of records. */
            check_zero(os, objs[i], 100, 677);
            check_zero(os, objs[i], 431072, 1000);
            check_zero(os, objs[i], 3ULL * CAIRN_GIB, 8192);
            check_zero(os, objs[i], 20ULL * CAIRN_GIB, 100);
            dmu_object_info_t info;
            assert_int_equal(dmu_object_info(os, objs[i], &info), 0);
            assert_int_equal(info.props.recordsize, sizes[i]);
            assert_int_equal(info.max_offset,
                             CAIRN_P2ROUNDUP(9ULL * CAIRN_GIB + 4096, (uint64_t)sizes[i]));
            if (round > 0) assert_true(info.used_bytes > 0);
        }
        if (round == 0) {
            assert_int_equal(dmu_objset_sync(os), 0);
        } else if (round == 1) {
            dmu_objset_close(os);
            test_pool_reimport(&f);
            assert_int_equal(dmu_objset_open(f.spa, "data", &os), 0);
        }
    }
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static void test_free_range_holes_and_reuse(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_free", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "fs", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "fs", &os), 0);
    uint64_t obj = alloc_obj(os, 4096, CAIRN_COMPRESS_OFF);
    write_pat(os, obj, 0, 64 * 1024);
    assert_int_equal(dmu_objset_sync(os), 0);
    dmu_object_info_t before, after;
    assert_int_equal(dmu_object_info(os, obj, &before), 0);

    /* Partial head, whole middle records, partial tail. */
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_free_range(os, obj, 1000, 20000, tx), 0);
    dmu_tx_commit(tx);
    check_pat(os, obj, 0, 1000);
    check_zero(os, obj, 1000, 20000);
    check_pat(os, obj, 21000, 64 * 1024 - 21000);
    /* A write after the free in the same txg wins over the free. */
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_free_range(os, obj, 32768, 8192, tx), 0);
    uint8_t b[100];
    fill_pat(b, obj, 33000, 100);
    assert_int_equal(dmu_write(os, obj, 33000, 100, b, tx), 0);
    dmu_tx_commit(tx);
    check_zero(os, obj, 32768, 232);
    check_pat(os, obj, 33000, 100);
    check_zero(os, obj, 33100, 40960 - 33100);
    assert_int_equal(dmu_objset_sync(os), 0);
    check_pat(os, obj, 0, 1000);
    check_zero(os, obj, 1000, 20000);
    check_pat(os, obj, 33000, 100);
    assert_int_equal(dmu_object_info(os, obj, &after), 0);
    assert_true(after.used_bytes < before.used_bytes);

    /* Bonus buffer. */
    char bonus[DMU_BONUS_MAX];
    for (int i = 0; i < DMU_BONUS_MAX; i++) bonus[i] = (char)(i * 7 + 1);
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_bonus_write(os, obj, bonus, 200, tx), 0);
    assert_int_equal(dmu_bonus_write(os, obj, bonus, DMU_BONUS_MAX + 1, tx), -EINVAL);
    dmu_tx_commit(tx);

    /* Object free: gone at once, number reused only after the free synced. */
    uint64_t victim = alloc_obj(os, 512, CAIRN_COMPRESS_OFF);
    write_pat(os, victim, 0, 10000);
    assert_int_equal(dmu_objset_sync(os), 0);
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_free(os, victim, tx), 0);
    assert_int_equal(dmu_object_free(os, victim, tx), -ENOENT);
    dmu_tx_commit(tx);
    uint8_t x;
    assert_int_equal(dmu_read(os, victim, 0, 1, &x), -ENOENT);
    dmu_object_info_t vi;
    assert_int_equal(dmu_object_info(os, victim, &vi), -ENOENT);
    uint64_t other = alloc_obj(os, 512, CAIRN_COMPRESS_OFF);
    assert_int_not_equal(other, victim);
    assert_int_equal(dmu_objset_sync(os), 0);
    uint64_t again = alloc_obj(os, 8192, CAIRN_COMPRESS_OFF);
    assert_int_equal(again, victim);
    check_zero(os, again, 0, 10000); /* a reused number starts empty */
    assert_int_equal(dmu_object_info(os, again, &vi), 0);
    assert_int_equal(vi.props.recordsize, 8192);
    assert_int_equal(vi.max_offset, 0);

    /* Recordsize may change only while the object holds no records. */
    dmu_object_props_t np = {.recordsize = 65536, .compress = CAIRN_COMPRESS_LZ4,
                             .checksum = CAIRN_CHECKSUM_XXHASH, .copies = 2};
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_set_props(os, again, &np, tx), 0);
    assert_int_equal(dmu_object_set_props(os, obj, &np, tx), -EINVAL);
    dmu_tx_commit(tx);

    dmu_objset_close(os);
    test_pool_reimport(&f);
    assert_int_equal(dmu_objset_open(f.spa, "fs", &os), 0);
    check_pat(os, obj, 0, 1000);
    check_zero(os, obj, 1000, 20000);
    check_pat(os, obj, 21000, 32768 - 21000);
    check_pat(os, obj, 33000, 100);
    check_pat(os, obj, 40960, 64 * 1024 - 40960);
    char rb[DMU_BONUS_MAX];
    uint32_t rl = 0;
    assert_int_equal(dmu_bonus_read(os, obj, rb, sizeof(rb), &rl), 0);
    assert_int_equal(rl, 200);
    assert_memory_equal(rb, bonus, 200);
    assert_int_equal(dmu_object_info(os, again, &vi), 0);
    assert_int_equal(vi.props.recordsize, 65536);
    assert_int_equal(vi.props.checksum, CAIRN_CHECKSUM_XXHASH);
    assert_int_equal(dmu_object_info(os, victim == again ? 999999 : victim, &vi), -ENOENT);
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

/*
 * Offsets reach the end of the signed 64-bit range: with 512-byte records the
 * last one is record 2^54 - 1, under the deepest tree (7 levels). Records at
 * the very end are written, synced, read back after an import and freed
 * without a leak; one byte more is -EFBIG.
 */
static void test_largest_offsets(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_maxoff", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "big", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "big", &os), 0);
    const uint64_t end = 1ULL << 63;
    assert_int_equal(DMU_MAX_OFFSET, end);
    const uint32_t sizes[] = {512, 128 * 1024, 1024 * 1024};
    uint64_t objs[3];
    for (int i = 0; i < 3; i++) {
        objs[i] = alloc_obj(os, sizes[i], CAIRN_COMPRESS_OFF);
        write_pat(os, objs[i], end - 1000, 1000);  /* the last bytes, across records */
        write_pat(os, objs[i], 1ULL << 62, 4096);
        write_pat(os, objs[i], 0, 100);
        uint8_t b[16] = {1};
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, objs[i], end - 10, 11, b, tx), -EFBIG);
        assert_int_equal(dmu_write(os, objs[i], end, 1, b, tx), -EFBIG);
        assert_int_equal(dmu_write(os, objs[i], UINT64_MAX - 5, 5, b, tx), -EFBIG);
        dmu_tx_commit(tx);
        assert_int_equal(dmu_read(os, objs[i], end - 1, 2, b), -EFBIG);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            check_pat(os, objs[i], end - 1000, 1000);
            check_pat(os, objs[i], 1ULL << 62, 4096);
            check_pat(os, objs[i], 0, 100);
            check_zero(os, objs[i], end - 100000, 99000);
            check_zero(os, objs[i], 1ULL << 61, 4096);
            dmu_object_info_t info;
            assert_int_equal(dmu_object_info(os, objs[i], &info), 0);
            assert_int_equal(info.max_offset, end);
        }
        if (round == 0) {
            assert_int_equal(dmu_objset_sync(os), 0);
        } else if (round == 1) {
            dmu_objset_close(os);
            test_pool_reimport(&f);
            assert_int_equal(dmu_objset_open(f.spa, "big", &os), 0);
        }
    }
    /* Freeing the tail and then everything leaves no block behind. */
    dmu_tx_t *tx = dmu_tx_begin(os);
    for (int i = 0; i < 3; i++) assert_int_equal(dmu_free_range(os, objs[i], end - 500, 500, tx), 0);
    dmu_tx_commit(tx);
    for (int i = 0; i < 3; i++) {
        check_pat(os, objs[i], end - 1000, 500);
        check_zero(os, objs[i], end - 500, 500);
    }
    assert_int_equal(dmu_objset_sync(os), 0);
    tx = dmu_tx_begin(os);
    for (int i = 0; i < 3; i++) assert_int_equal(dmu_free_range(os, objs[i], 0, UINT64_MAX, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    for (int i = 0; i < 3; i++) {
        dmu_object_info_t info;
        assert_int_equal(dmu_object_info(os, objs[i], &info), 0);
        assert_int_equal(info.used_bytes, 0);
        check_zero(os, objs[i], end - 1000, 1000);
    }
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static void test_compression(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_compress", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "c", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "c", &os), 0);
    const cairn_compress_t algs[] = {CAIRN_COMPRESS_OFF, CAIRN_COMPRESS_LZ4, CAIRN_COMPRESS_GZIP(6)};
    uint64_t objs[3];
    const uint64_t len = 2 * CAIRN_MIB;
    uint8_t *b = malloc(len);
    for (uint64_t i = 0; i < len; i++) b[i] = (uint8_t)("compressible text, "[i % 19]);
    for (int i = 0; i < 3; i++) {
        objs[i] = alloc_obj(os, 128 * 1024, algs[i]);
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, objs[i], 0, len, b, tx), 0);
        dmu_tx_commit(tx);
    }
    assert_int_equal(dmu_objset_sync(os), 0);
    dmu_object_info_t info[3];
    for (int i = 0; i < 3; i++) assert_int_equal(dmu_object_info(os, objs[i], &info[i]), 0);
    assert_true(info[0].used_bytes >= len);
    assert_true(info[1].used_bytes * 4 < info[0].used_bytes);
    assert_true(info[2].used_bytes * 4 < info[0].used_bytes);
    dmu_objset_close(os);
    test_pool_reimport(&f);
    assert_int_equal(dmu_objset_open(f.spa, "c", &os), 0);
    uint8_t *r = malloc(len);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dmu_read(os, objs[i], 0, len, r), 0);
        assert_memory_equal(r, b, len);
    }
    free(r);
    free(b);
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

/* ---- enumeration ---- */

typedef struct seen {
    cairn_blkptr_t *bps;
    size_t n, cap;
    uint64_t data_records;
    uint64_t asize;
} seen_t;

static int seen_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa;
    (void)bm;
    seen_t *s = arg;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->bps = realloc(s->bps, s->cap * sizeof(*s->bps));
    }
    s->bps[s->n++] = *bp;
    if (bp->type == CAIRN_BT_DATA && bp->level == 0) s->data_records++;
    for (int i = 0; i < CAIRN_MAX_COPIES; i++) s->asize += cairn_dva_asize(&bp->dva[i]);
    return 0;
}

static int cmp_dva(const void *a, const void *b)
{
    const cairn_blkptr_t *x = a, *y = b;
    if (x->dva[0].vdev != y->dva[0].vdev) return x->dva[0].vdev < y->dva[0].vdev ? -1 : 1;
    if (x->dva[0].offset != y->dva[0].offset) return x->dva[0].offset < y->dva[0].offset ? -1 : 1;
    return 0;
}

/* Positions of the data records a walk visits, in walk order. */
typedef struct pos_seen {
    spa_bookmark_t *v;
    size_t n, cap;
    spa_bookmark_t last; /* the walk's position: object set, highest object in it */
    bool ordered;
} pos_seen_t;

static int pos_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa;
    pos_seen_t *s = arg;
    if (bm->objset < s->last.objset ||
        (bm->objset == s->last.objset && bm->object && bm->object < s->last.object))
        s->ordered = false;
    if (bm->objset != s->last.objset) s->last = (spa_bookmark_t){bm->objset, 0, 0, 0};
    if (bm->object > s->last.object) s->last.object = bm->object;
    if (bp->type != CAIRN_BT_DATA || bm->level != 0) return 0;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = *bm;
    return 0;
}

/* The pool walk goes by object set id, then object; resumed at a position it
 * visits every data record at or after it and none before. */
static void test_traverse_resume(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_traverse_resume", 256 * CAIRN_MIB);
    objset_t *osa, *osb;
    assert_int_equal(dmu_objset_create(f.spa, "a", NULL), 0);
    assert_int_equal(dmu_objset_create(f.spa, "b", NULL), 0);
    assert_int_equal(dmu_objset_open(f.spa, "a", &osa), 0);
    assert_int_equal(dmu_objset_open(f.spa, "b", &osb), 0);
    for (int i = 0; i < 70; i++) { /* three dnode blocks in each */
        write_pat(osa, alloc_obj(osa, 1024, CAIRN_COMPRESS_OFF), 0, 1024);
        write_pat(osb, alloc_obj(osb, 1024, CAIRN_COMPRESS_OFF), 0, 2048);
    }
    assert_int_equal(dmu_objset_sync(osa), 0);

    pos_seen_t all = {.ordered = true};
    assert_int_equal(dmu_traverse_pool(f.spa, pos_visit, &all), 0);
    assert_true(all.ordered);
    assert_int_equal(all.n, 70 + 140);
    /* Resume in the first user object set, in its second dnode block. */
    uint64_t first = all.v[0].objset;
    spa_bookmark_t from = {first, 40, 0, 0};
    pos_seen_t part = {.ordered = true};
    assert_int_equal(dmu_traverse_pool_from(f.spa, &from, pos_visit, &part), 0);
    assert_true(part.ordered);
    size_t want = 0;
    for (size_t i = 0; i < all.n; i++)
        want += all.v[i].objset > first || all.v[i].object >= 40;
    assert_int_equal(part.n, want);
    for (size_t i = 0; i < part.n; i++)
        assert_true(part.v[i].objset > first || part.v[i].object >= 40);
    free(all.v);
    free(part.v);
    dmu_objset_close(osa);
    dmu_objset_close(osb);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static void test_traverse(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_traverse", 256 * CAIRN_MIB);
    objset_t *osa, *osb;
    assert_int_equal(dmu_objset_create(f.spa, "a", NULL), 0);
    assert_int_equal(dmu_objset_create(f.spa, "b", NULL), 0);
    assert_int_equal(dmu_objset_open(f.spa, "a", &osa), 0);
    assert_int_equal(dmu_objset_open(f.spa, "b", &osb), 0);
    uint64_t records = 0;
    /* 600 records of 512 B each beyond 1024 forces 2+ levels; a 4 KiB object far out. */
    uint64_t o1 = alloc_obj(osa, 512, CAIRN_COMPRESS_OFF);
    write_pat(osa, o1, 0, 600 * 512);
    records += 600;
    write_pat(osa, o1, 2000 * 512, 512);
    records += 1;
    uint64_t o2 = alloc_obj(osb, 4096, CAIRN_COMPRESS_LZ4);
    write_pat(osb, o2, 6ULL * CAIRN_GIB, 3 * 4096);
    records += 3;
    for (int i = 0; i < 40; i++) { /* enough objects for two dnode blocks */
        uint64_t o = alloc_obj(osb, 1024, CAIRN_COMPRESS_OFF);
        write_pat(osb, o, 0, 1024);
        records++;
    }
    assert_int_equal(dmu_objset_sync(osa), 0);
    /* Overwrite some records: the old blocks must no longer be reachable. */
    write_pat(osa, o1, 0, 10 * 512);
    assert_int_equal(dmu_objset_sync(osa), 0);

    seen_t s = {0};
    assert_int_equal(dmu_traverse_pool(f.spa, seen_visit, &s), 0);
    assert_int_equal(s.data_records, records);
    qsort(s.bps, s.n, sizeof(*s.bps), cmp_dva);
    for (size_t i = 1; i < s.n; i++) assert_int_not_equal(cmp_dva(&s.bps[i - 1], &s.bps[i]), 0);
    spa_space_t sp;
    spa_get_space(f.spa, &sp);
    assert_true(s.asize <= sp.alloc);
    free(s.bps);

    /* Destroying an object set releases its blocks from the walk. */
    dmu_objset_close(osb);
    assert_int_equal(dmu_objset_destroy(f.spa, "b"), 0);
    assert_int_equal(dmu_objset_open(f.spa, "b", &osb), -ENOENT);
    assert_int_equal(dmu_objset_sync(osa), 0);
    seen_t s2 = {0};
    assert_int_equal(dmu_traverse_pool(f.spa, seen_visit, &s2), 0);
    assert_int_equal(s2.data_records, 601);
    free(s2.bps);
    dmu_objset_close(osa);

    test_pool_reimport(&f);
    seen_t s3 = {0};
    assert_int_equal(dmu_traverse_pool(f.spa, seen_visit, &s3), 0);
    assert_int_equal(s3.data_records, 601);
    free(s3.bps);
    assert_int_equal(dmu_objset_open(f.spa, "a", &osa), 0);
    check_pat(osa, o1, 0, 600 * 512);
    check_pat(osa, o1, 2000 * 512, 512);
    dmu_objset_close(osa);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static void list_cb(const char *name, uint64_t id, void *arg)
{
    char *out = arg;
    (void)id;
    strcat(out, name);
    strcat(out, ",");
}

static void test_objset_list(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_list", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "zeta", NULL), 0);
    assert_int_equal(dmu_objset_create(f.spa, "alpha", NULL), 0);
    assert_int_equal(dmu_objset_create(f.spa, "mid", NULL), 0);
    assert_int_equal(dmu_objset_create(f.spa, "", NULL), -EINVAL);
    assert_int_equal(dmu_objset_destroy(f.spa, "mid"), 0);
    assert_int_equal(dmu_objset_destroy(f.spa, "mid"), -ENOENT);
    char out[256] = "";
    assert_int_equal(dmu_objset_list(f.spa, list_cb, out), 0);
    assert_string_equal(out, "alpha,zeta,");
    test_pool_reimport(&f);
    out[0] = 0;
    assert_int_equal(dmu_objset_list(f.spa, list_cb, out), 0);
    assert_string_equal(out, "alpha,zeta,");
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "zeta", &os), 0);
    assert_int_equal(dmu_objset_destroy(f.spa, "zeta"), -EBUSY);
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

/* dmu_write_would_wait: a write must read a record first only where it covers the
 * record in part - starting inside it, ending inside it or lying within it - and the
 * record is neither dirty, a hole nor in the ARC; either edge alone decides. */
static void test_write_would_wait(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_wouldwait", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "data", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "data", &os), 0);
    const uint64_t rs = 8192;
    uint64_t obj = alloc_obj(os, rs, CAIRN_COMPRESS_OFF);
    write_pat(os, obj, 0, 4 * rs); /* records 0-3; record 4 stays a hole */
    write_pat(os, obj, 5 * rs, 2 * rs); /* records 5-6 */
    assert_int_equal(dmu_objset_sync(os), 0);
    arc_purge_pool(spa_guid(f.spa)); /* on disk only */

    assert_false(dmu_write_would_wait(os, obj, 0, 2 * rs));          /* whole records */
    assert_false(dmu_write_would_wait(os, obj, 0, 0));
    assert_true(dmu_write_would_wait(os, obj, 10, 2 * rs - 10));     /* starts inside 0 */
    assert_true(dmu_write_would_wait(os, obj, 0, rs + 10));          /* ends inside 1 */
    assert_true(dmu_write_would_wait(os, obj, rs + 10, 100));        /* within 1 */
    assert_true(dmu_write_would_wait(os, obj, rs, 100));             /* the head of 1 */
    assert_true(dmu_write_would_wait(os, obj, 2 * rs - 100, 100));   /* the tail of 1 */
    assert_false(dmu_write_would_wait(os, obj, 3 * rs, rs + 10));    /* ends inside hole 4 */
    assert_false(dmu_write_would_wait(os, obj, 4 * rs + 10, 100));   /* within hole 4 */
    assert_false(dmu_write_would_wait(os, obj, 4 * rs + 10, 2 * rs - 10)); /* hole 4 to 5's end */
    assert_true(dmu_write_would_wait(os, obj, 4 * rs + 10, rs + 10)); /* hole 4, ends inside 5 */
    assert_true(dmu_write_would_wait(os, obj, 3 * rs + 10, rs));     /* inside 3, ends in hole 4 */
    assert_false(dmu_write_would_wait(os, obj, 9 * rs + 10, 100));   /* past the end: a hole */

    /* Record 1 in the ARC: its edges need no read; record 2 still does. */
    uint8_t *b = malloc(rs);
    assert_int_equal(dmu_read(os, obj, rs, rs, b), 0);
    free(b);
    assert_false(dmu_write_would_wait(os, obj, rs + 10, 100));
    assert_false(dmu_write_would_wait(os, obj, rs + 10, rs - 10));
    assert_true(dmu_write_would_wait(os, obj, rs + 10, rs + 10));    /* ends inside 2 */
    assert_true(dmu_write_would_wait(os, obj, 10, rs));              /* starts inside 0 */

    /* Record 2 dirty (the held txg keeps it so whatever the sync timer does), and
     * out of the ARC again: dirty is enough. */
    uint64_t held = spa_tx_hold(f.spa);
    write_pat(os, obj, 2 * rs + 5, 10);
    arc_purge_pool(spa_guid(f.spa));
    assert_false(dmu_write_would_wait(os, obj, 2 * rs + 100, 50));       /* within 2 */
    assert_false(dmu_write_would_wait(os, obj, 2 * rs + 100, rs - 100)); /* to 2's end */
    assert_true(dmu_write_would_wait(os, obj, 2 * rs + 100, rs));        /* ends inside 3 */
    spa_tx_rele(f.spa, held);

    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Record buffers freed by one txg's sync come back to the next txg's writers -
 * 64 MiB of 128 KiB ones here, eight times what was once kept per size - instead
 * of going back to the allocator, which hands big txgs' memory to the system
 * for the next txg to fault in again. Runs first: no pool is busy with the
 * lists, and they are last in, first out. */
static void test_freed_buffers_reused(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* nothing is kept under AddressSanitizer */
#endif
    enum { N = 512, SZ = 128 * 1024 };
    void **freed = malloc(N * sizeof *freed), **again = malloc(N * sizeof *again);
    for (int i = 0; i < N; i++) freed[i] = dmu_buf_alloc(SZ);
    for (int i = 0; i < N; i++) dmu_buf_free(freed[i], SZ);
    for (int i = 0; i < N; i++) again[i] = dmu_buf_alloc(SZ);
    qsort(freed, N, sizeof *freed, ptr_cmp);
    qsort(again, N, sizeof *again, ptr_cmp);
    assert_memory_equal(freed, again, N * sizeof *freed);
    for (int i = 0; i < N; i++) dmu_buf_free(again[i], SZ);
    free(freed);
    free(again);
}

/* The copy whole-record writes use (streaming stores): every byte lands, at
 * every size and alignment, including the ones it leaves to memcpy. */
static void test_copy_nontemporal(void **state)
{
    (void)state;
    enum { MAX = 3 * 4096 };
    uint8_t *src = malloc(MAX + 64), *dst = aligned_alloc(4096, 4 * 4096), *want = malloc(MAX + 128);
    for (size_t i = 0; i < MAX + 64; i++) src[i] = (uint8_t)(i * 37 + 11);
    const size_t sizes[] = {0, 1, 63, 64, 128, 4096, 4100, 8192, MAX};
    const size_t dst_offs[] = {0, 16, 8, 1};
    for (size_t a = 0; a < 4; a++)
        for (size_t so = 0; so < 3; so++)
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                memset(dst, 0xee, MAX + 128);
                memcpy(want, dst, MAX + 128);
                memcpy(want + dst_offs[a], src + so, sizes[k]);
                cairn_copy_nontemporal(dst + dst_offs[a], src + so, sizes[k]);
                assert_memory_equal(dst, want, MAX + 128); /* nothing outside it either */
            }
    free(src);
    free(dst);
    free(want);
}

/* Where dmu_next_data / dmu_next_hole land from off (UINT64_MAX: -ENXIO). */
static uint64_t next(objset_t *os, uint64_t obj, bool hole, uint64_t off)
{
    int err = hole ? dmu_next_hole(os, obj, &off) : dmu_next_data(os, obj, &off);
    if (err == -ENXIO) return UINT64_MAX;
    assert_int_equal(err, 0);
    return off;
}

/* Records 0, 3 and 100 written (4 KiB records), the rest holes: the same answers
 * from dirty records, after the sync, after a free (open and synced), and for a
 * record written with zeros (a hole once synced, and already before). */
static void check_next_layout(objset_t *os, uint64_t obj, bool rec3)
{
    const uint64_t RS = 4096;
    assert_int_equal(next(os, obj, false, 0), 0);
    assert_int_equal(next(os, obj, false, 17), 17);
    assert_int_equal(next(os, obj, true, 0), RS);
    assert_int_equal(next(os, obj, false, RS), rec3 ? 3 * RS : 100 * RS);
    assert_int_equal(next(os, obj, true, 3 * RS + 5), rec3 ? 4 * RS : 3 * RS + 5);
    assert_int_equal(next(os, obj, false, 4 * RS), 100 * RS);
    assert_int_equal(next(os, obj, true, 100 * RS), 101 * RS); /* past the last record */
    assert_int_equal(next(os, obj, false, 101 * RS), UINT64_MAX);
    assert_int_equal(next(os, obj, true, 1ull << 40), 1ull << 40);
}

static void test_next_data_and_hole(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_next", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "fs", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "fs", &os), 0);
    uint64_t obj = alloc_obj(os, 4096, CAIRN_COMPRESS_OFF);
    assert_int_equal(next(os, obj, false, 0), UINT64_MAX); /* never written */
    assert_int_equal(next(os, obj, true, 5), 5);
    write_pat(os, obj, 0, 4096);
    write_pat(os, obj, 3 * 4096, 4096);
    write_pat(os, obj, 100 * 4096, 4096);
    uint8_t zeros[4096] = {0};
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 50 * 4096, 4096, zeros, tx), 0);
    dmu_tx_commit(tx);
    check_next_layout(os, obj, true);
    assert_int_equal(dmu_objset_sync(os), 0);
    check_next_layout(os, obj, true);
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_free_range(os, obj, 3 * 4096, 4096, tx), 0);
    dmu_tx_commit(tx);
    check_next_layout(os, obj, false);
    assert_int_equal(dmu_objset_sync(os), 0);
    check_next_layout(os, obj, false);
    /* Data 5000 records on, beyond level-1 indirect blocks that are holes
     * (skipped whole once nothing is dirty). */
    write_pat(os, obj, 5000 * 4096, 4096);
    assert_int_equal(next(os, obj, false, 101 * 4096), 5000 * 4096);
    assert_int_equal(dmu_objset_sync(os), 0);
    assert_int_equal(next(os, obj, false, 101 * 4096), 5000 * 4096);
    assert_int_equal(next(os, obj, false, 3000 * 4096 + 1), 5000 * 4096);
    assert_int_equal(next(os, obj, true, 5000 * 4096), 5001 * 4096);
    assert_int_equal(next(os, obj, false, 5001 * 4096), UINT64_MAX);
    dmu_objset_close(os);
    test_pool_remove(&f);
}

int main(void)
{
    dmu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freed_buffers_reused),
        cmocka_unit_test(test_records_and_persistence),
        cmocka_unit_test(test_free_range_holes_and_reuse),
        cmocka_unit_test(test_next_data_and_hole),
        cmocka_unit_test(test_largest_offsets),
        cmocka_unit_test(test_compression),
        cmocka_unit_test(test_traverse),
        cmocka_unit_test(test_traverse_resume),
        cmocka_unit_test(test_objset_list),
        cmocka_unit_test(test_write_would_wait),
        cmocka_unit_test(test_copy_nontemporal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
