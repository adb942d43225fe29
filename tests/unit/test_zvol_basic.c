/*
 * Volume basics on a real pool (volumes over a bare DMU object set): I/O at
 * 512 B and 4 KiB granularity across record boundaries, alignment and range
 * refusals, unmap and thin provisioning measured in allocated bytes,
 * write_same, compare_and_write, copy, GET LBA STATUS, resize, read-only
 * handles, FUA/flush durability across a crash, and zvol_read_memory (reads
 * that never wait for a device).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zvol_fixture.h"

#include <cairn/arc.h>
#include <cairn/spa.h>

#include <errno.h>
#include <pthread.h>

#define VBS 8192u
#define MIB (1024ull * 1024)

typedef struct vol {
    zfix_t f;
    objset_t *os;
    zvol_t *zv;
} vol_t;

static void vol_open(vol_t *v, uint64_t volsize, uint32_t lbs)
{
    zvol_objset_opts_t o = {.volsize = volsize, .volblocksize = VBS, .block_size = lbs};
    assert_int_equal(zvol_open_objset(v->os, &o, &v->zv), 0);
}

static void vol_make(vol_t *v, const char *tag, uint64_t volsize, uint32_t lbs)
{
    zfix_make(&v->f, tag, 512 * MIB);
    v->os = zfix_objset(&v->f, "vol", true);
    vol_open(v, volsize, lbs);
}

static void vol_close(vol_t *v)
{
    zvol_close(v->zv);
    v->zv = NULL;
    dmu_objset_close(v->os);
    v->os = NULL;
}

static void vol_reimport(vol_t *v, bool crash, uint32_t lbs)
{
    vol_close(v);
    if (crash) zfix_crash_reimport(&v->f);
    else zfix_reimport(&v->f);
    v->os = zfix_objset(&v->f, "vol", false);
    vol_open(v, 0, lbs);
}

static void vol_done(vol_t *v)
{
    vol_close(v);
    zfix_done(&v->f);
}

static void expect_pattern(zvol_t *zv, uint64_t tag, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len), *w = malloc(len);
    assert_int_equal(zvol_read(zv, off, len, b), 0);
    zfill(w, tag, off, len);
    for (uint64_t i = 0; i < len; i++)
        if (b[i] != w[i]) {
            fprintf(stderr, "off %llu: got %u want %u\n", (unsigned long long)(off + i), b[i], w[i]);
            fail();
        }
    free(b);
    free(w);
}

static void expect_zero(zvol_t *zv, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len);
    memset(b, 0xee, len);
    assert_int_equal(zvol_read(zv, off, len, b), 0);
    for (uint64_t i = 0; i < len; i++)
        if (b[i]) {
            fprintf(stderr, "off %llu: got %u want 0\n", (unsigned long long)(off + i), b[i]);
            fail();
        }
    free(b);
}

static void write_pattern(zvol_t *zv, uint64_t tag, uint64_t off, uint64_t len, int flags)
{
    uint8_t *b = malloc(len);
    zfill(b, tag, off, len);
    assert_int_equal(zvol_write(zv, off, len, b, flags), 0);
    free(b);
}

/* ---- tests ---- */

static void test_rw_granularity(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvrw", 4 * MIB, 512);
    assert_int_equal(zvol_block_size(v.zv), 512);
    assert_int_equal(zvol_size(v.zv), 4 * MIB);
    assert_int_equal(zvol_volblocksize(v.zv), VBS);
    expect_zero(v.zv, 0, 64 * 1024);

    /* Model of the first 64 KiB. */
    uint8_t model[64 * 1024];
    memset(model, 0, sizeof(model));
    struct { uint64_t off, len, tag; } w[] = {
        {0, 512, 1},            /* first sector */
        {7680, 1024, 2},        /* last sector of record 0 + first of record 1 */
        {8192 + 512, 512, 3},   /* inside record 1, next to the previous */
        {4096, 12288, 4},       /* 4K-aligned, three records partly */
        {24576, 16384, 5},      /* two whole records */
        {40960 - 512, 8192 + 1024, 6},
    };
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        write_pattern(v.zv, w[i].tag, w[i].off, w[i].len, 0);
        zfill(model + w[i].off, w[i].tag, w[i].off, w[i].len);
    }
    uint8_t got[64 * 1024];
    assert_int_equal(zvol_read(v.zv, 0, sizeof(got), got), 0);
    assert_memory_equal(got, model, sizeof(model));
    /* Single-sector reads at odd places agree too. */
    for (uint64_t off = 0; off < sizeof(model); off += 3 * 512) {
        uint8_t s[512];
        assert_int_equal(zvol_read(v.zv, off, 512, s), 0);
        assert_memory_equal(s, model + off, 512);
    }

    /* A 4 KiB handle on the same volume sees the same bytes. */
    zvol_t *zv4;
    zvol_objset_opts_t o4 = {.block_size = 4096};
    assert_int_equal(zvol_open_objset(v.os, &o4, &zv4), 0);
    assert_int_equal(zvol_block_size(zv4), 4096);
    assert_int_equal(zvol_size(zv4), 4 * MIB);
    uint8_t b4[8192];
    zfill(b4, 7, 12288, sizeof(b4));
    assert_int_equal(zvol_write(zv4, 12288, sizeof(b4), b4, 0), 0);
    zfill(model + 12288, 7, 12288, sizeof(b4));
    assert_int_equal(zvol_read(v.zv, 0, sizeof(got), got), 0);
    assert_memory_equal(got, model, sizeof(model));
    zvol_close(zv4);

    /* Persistent across export/import. */
    vol_reimport(&v, false, 512);
    assert_int_equal(zvol_size(v.zv), 4 * MIB);
    assert_int_equal(zvol_read(v.zv, 0, sizeof(got), got), 0);
    assert_memory_equal(got, model, sizeof(model));
    vol_done(&v);
}

static void test_refusals(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvref", 1 * MIB, 512);
    uint8_t b[8192] = {1};
    uint64_t mis;
    /* alignment */
    assert_int_equal(zvol_write(v.zv, 100, 512, b, 0), -EINVAL);
    assert_int_equal(zvol_write(v.zv, 0, 500, b, 0), -EINVAL);
    assert_int_equal(zvol_read(v.zv, 1, 512, b), -EINVAL);
    assert_int_equal(zvol_unmap(v.zv, 0, 100, 0), -EINVAL);
    assert_int_equal(zvol_compare_and_write(v.zv, 256, 512, b, b, 0, &mis), -EINVAL);
    /* range */
    assert_int_equal(zvol_read(v.zv, MIB, 512, b), -ERANGE);
    assert_int_equal(zvol_write(v.zv, MIB - 512, 1024, b, 0), -ERANGE);
    assert_int_equal(zvol_write(v.zv, UINT64_MAX - 511, 512, b, 0), -ERANGE);
    assert_int_equal(zvol_unmap(v.zv, MIB - 512, 1024, 0), -ERANGE);
    assert_int_equal(zvol_write_same(v.zv, MIB - 512, 2, b, 0), -ERANGE);
    assert_int_equal(zvol_copy(v.zv, 0, v.zv, MIB - 512, 1024, 0), -ERANGE);
    assert_int_equal(zvol_copy(v.zv, MIB - 512, v.zv, 0, 1024, 0), -ERANGE);
    zvol_lba_status_t st;
    assert_int_equal(zvol_get_lba_status(v.zv, MIB, &st), -ERANGE);
    /* the last sector itself is fine */
    assert_int_equal(zvol_write(v.zv, MIB - 512, 512, b, 0), 0);
    assert_int_equal(zvol_read(v.zv, MIB - 512, 512, b), 0);
    assert_int_equal(b[0], 1);

    /* a 4 KiB handle refuses 512-byte alignment */
    zvol_t *zv4;
    zvol_objset_opts_t o4 = {.block_size = 4096};
    assert_int_equal(zvol_open_objset(v.os, &o4, &zv4), 0);
    assert_int_equal(zvol_write(zv4, 512, 4096, b, 0), -EINVAL);
    assert_int_equal(zvol_write(zv4, 0, 512, b, 0), -EINVAL);
    assert_int_equal(zvol_write(zv4, 4096, 4096, b, 0), 0);
    zvol_close(zv4);
    zvol_objset_opts_t bad = {.block_size = 1024};
    zvol_t *zbad;
    assert_int_equal(zvol_open_objset(v.os, &bad, &zbad), -EINVAL);

    /* a read-only handle refuses every change */
    zvol_t *ro;
    zvol_objset_opts_t oro = {.readonly = true};
    assert_int_equal(zvol_open_objset(v.os, &oro, &ro), 0);
    assert_true(zvol_is_readonly(ro));
    assert_false(zvol_is_readonly(v.zv));
    assert_int_equal(zvol_write(ro, 0, 512, b, 0), -EROFS);
    assert_int_equal(zvol_unmap(ro, 0, 512, 0), -EROFS);
    assert_int_equal(zvol_write_same(ro, 0, 1, b, 0), -EROFS);
    assert_int_equal(zvol_compare_and_write(ro, 0, 512, b, b, 0, &mis), -EROFS);
    assert_int_equal(zvol_copy(v.zv, 0, ro, 4096, 512, 0), -EROFS);
    char err[128];
    assert_int_equal(zvol_resize(ro, 2 * MIB, false, err, sizeof(err)), -EROFS);
    assert_int_equal(zvol_read(ro, 4096, 512, b), 0); /* reads are fine */
    zvol_close(ro);
    vol_done(&v);
}

static void test_unmap_frees_space(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvunmap", 64 * MIB, 512);
    for (uint64_t off = 0; off < 4 * MIB; off += MIB) write_pattern(v.zv, 11, off, MIB, 0);
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_txg_wait_synced(v.f.spa, 0); /* space is as of the last sync; flush writes the log */
    uint64_t used_full = zvol_used_bytes(v.zv);
    assert_true(used_full >= 4 * MIB);

    /* Unmap 3 MiB starting mid-record: the partial record at each edge is zeroed,
     * whole records become holes. */
    uint64_t u0 = MIB / 2 + 512, ulen = 3 * MIB;
    assert_int_equal(zvol_unmap(v.zv, u0, ulen, 0), 0);
    expect_zero(v.zv, u0, ulen);
    expect_pattern(v.zv, 11, 0, u0);
    expect_pattern(v.zv, 11, u0 + ulen, 4 * MIB - (u0 + ulen));
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_txg_wait_synced(v.f.spa, 0);
    uint64_t used_after = zvol_used_bytes(v.zv);
    /* About 1 MiB of data remains. */
    assert_true(used_after < used_full - 2 * MIB);
    assert_true(used_after >= MIB - VBS);

    /* Unmapping everything returns to (almost) nothing, also after reimport. */
    assert_int_equal(zvol_unmap(v.zv, 0, 64 * MIB, ZVOL_WRITE_FUA), 0);
    vol_reimport(&v, false, 512);
    spa_txg_wait_synced(v.f.spa, 0);
    assert_true(zvol_used_bytes(v.zv) < 64 * 1024);
    expect_zero(v.zv, 0, 4 * MIB);
    vol_done(&v);
}

static void test_thin(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvthin", 1024 * MIB * 64, 4096); /* 64 GiB on a 512 MiB pool */
    spa_space_t s0, s1;
    spa_get_space(v.f.spa, &s0);
    /* Scattered 64 KiB writes far apart. */
    for (int i = 0; i < 8; i++) write_pattern(v.zv, 20 + i, (uint64_t)i * 7 * 1024 * MIB, 65536, 0);
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_get_space(v.f.spa, &s1);
    spa_txg_wait_synced(v.f.spa, 0);
    uint64_t used = zvol_used_bytes(v.zv);
    assert_true(used >= 8 * 65536);
    assert_true(used < 8 * 65536 + 2 * MIB); /* data plus a few indirect blocks */
    assert_true(s1.alloc - s0.alloc < 16 * MIB);
    for (int i = 0; i < 8; i++) expect_pattern(v.zv, 20 + i, (uint64_t)i * 7 * 1024 * MIB, 65536);
    expect_zero(v.zv, 65536, 65536);
    vol_done(&v);
}

static void test_write_same(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvws", 16 * MIB, 512);
    uint8_t blk[512];
    for (int i = 0; i < 512; i++) blk[i] = (uint8_t)(i * 7 + 3);
    /* 3000 blocks from an unaligned sector: crosses chunk and record boundaries */
    uint64_t off = 3 * 512, n = 3000;
    assert_int_equal(zvol_write_same(v.zv, off, n, blk, 0), 0);
    uint8_t *b = malloc(n * 512);
    assert_int_equal(zvol_read(v.zv, off, n * 512, b), 0);
    for (uint64_t i = 0; i < n; i++) assert_memory_equal(b + i * 512, blk, 512);
    expect_zero(v.zv, 0, off);
    expect_zero(v.zv, off + n * 512, 8192);
    /* UNMAP with non-zero data still writes */
    assert_int_equal(zvol_write_same(v.zv, 8 * MIB, 16, blk, ZVOL_WRITE_UNMAP), 0);
    assert_int_equal(zvol_read(v.zv, 8 * MIB + 15 * 512, 512, b), 0);
    assert_memory_equal(b, blk, 512);
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_txg_wait_synced(v.f.spa, 0);
    uint64_t used_before = zvol_used_bytes(v.zv);

    /* zeros with UNMAP: deallocates */
    uint8_t zero[512] = {0};
    assert_int_equal(zvol_write_same(v.zv, 0, 2048, zero, ZVOL_WRITE_UNMAP), 0);
    expect_zero(v.zv, 0, MIB);
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_txg_wait_synced(v.f.spa, 0);
    uint64_t used_after = zvol_used_bytes(v.zv);
    assert_true(used_after + 900 * 1024 < used_before);
    zvol_lba_status_t st;
    assert_int_equal(zvol_get_lba_status(v.zv, 0, &st), 0);
    assert_false(st.mapped);
    assert_true(st.len >= MIB);
    /* zeros without UNMAP: reads zeros too */
    assert_int_equal(zvol_write_same(v.zv, MIB, 100, zero, 0), 0);
    expect_zero(v.zv, MIB, 100 * 512); /* had the pattern before */
    assert_int_equal(zvol_read(v.zv, MIB + 100 * 512, 512, b), 0);
    assert_memory_equal(b, blk, 512);
    free(b);
    vol_done(&v);
}

static void test_compare_and_write(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvcaw", 4 * MIB, 512);
    uint64_t off = 8192 - 512, len = 1024; /* spans two records */
    write_pattern(v.zv, 30, off, len, 0);
    uint8_t expect[1024], newd[1024], got[1024];
    zfill(expect, 30, off, len);
    zfill(newd, 31, off, len);
    uint64_t mis = 12345;
    assert_int_equal(zvol_compare_and_write(v.zv, off, len, expect, newd, 0, &mis), 0);
    assert_int_equal(zvol_read(v.zv, off, len, got), 0);
    assert_memory_equal(got, newd, len);

    /* Stale expectation: miscompare at the first differing byte, nothing written. */
    uint8_t wrong[1024];
    memcpy(wrong, newd, len);
    wrong[700] ^= 0x40;
    wrong[900] ^= 0x01;
    uint8_t newer[1024];
    zfill(newer, 32, off, len);
    assert_int_equal(zvol_compare_and_write(v.zv, off, len, wrong, newer, 0, &mis), -EILSEQ);
    assert_int_equal(mis, 700);
    assert_int_equal(zvol_read(v.zv, off, len, got), 0);
    assert_memory_equal(got, newd, len);
    /* Byte 0 differs */
    wrong[0] ^= 0xff;
    assert_int_equal(zvol_compare_and_write(v.zv, off, len, wrong, newer, 0, &mis), -EILSEQ);
    assert_int_equal(mis, 0);
    /* On a never-written range the expectation is zeros. */
    uint8_t zeros[512] = {0};
    assert_int_equal(zvol_compare_and_write(v.zv, MIB, 512, zeros, newer, ZVOL_WRITE_FUA, &mis), 0);
    assert_int_equal(zvol_read(v.zv, MIB, 512, got), 0);
    assert_memory_equal(got, newer, 512);
    vol_done(&v);
}

typedef struct or_worker {
    zvol_t *zv;
    uint8_t bit;
} or_worker_t;

/* Sets its four bits in every byte of one block, one ORWRITE per bit and byte,
 * so two workers race 2048 read-modify-writes each of the same block. */
static void *or_bits(void *arg)
{
    or_worker_t *w = arg;
    for (int i = 0; i < 4 * 512; i++) {
        uint8_t mask[512] = {0};
        mask[i % 512] = (uint8_t)(w->bit << (i / 512));
        if (zvol_or_write(w->zv, 2 * MIB, 512, mask, 0)) return (void *)1;
    }
    return NULL;
}

static void test_or_write(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvor", 4 * MIB, 512);
    uint64_t off = 8192 - 512, len = 1024; /* spans two records */
    write_pattern(v.zv, 50, off, len, 0);
    uint8_t old[1024], mask[1024], got[1024];
    zfill(old, 50, off, len);
    for (size_t i = 0; i < len; i++) mask[i] = (uint8_t)(0x11u << (i % 4));
    assert_int_equal(zvol_or_write(v.zv, off, len, mask, ZVOL_WRITE_FUA), 0);
    assert_int_equal(zvol_read(v.zv, off, len, got), 0);
    for (size_t i = 0; i < len; i++) assert_int_equal(got[i], old[i] | mask[i]);
    /* ORing into a never-written range stores the mask itself */
    assert_int_equal(zvol_or_write(v.zv, MIB, 512, mask, 0), 0);
    assert_int_equal(zvol_read(v.zv, MIB, 512, got), 0);
    assert_memory_equal(got, mask, 512);
    /* refusals change nothing */
    assert_int_equal(zvol_or_write(v.zv, 100, 512, mask, 0), -EINVAL);
    assert_int_equal(zvol_or_write(v.zv, 4 * MIB - 512, 1024, mask, 0), -ERANGE);
    zvol_t *ro;
    zvol_objset_opts_t oro = {.readonly = true};
    assert_int_equal(zvol_open_objset(v.os, &oro, &ro), 0);
    assert_int_equal(zvol_or_write(ro, off, 512, mask, 0), -EROFS);
    zvol_close(ro);
    /* Two writers ORing different bits into the same block lose none of them.
     * (A lost update needs the threads to interleave between the read and the
     * write of one call, which a loaded machine rarely schedules: this guards
     * the result, the exclusive range lock is what guarantees it.) */
    or_worker_t w[2] = {{v.zv, 0x01}, {v.zv, 0x10}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, or_bits, &w[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        assert_null(rv);
    }
    assert_int_equal(zvol_read(v.zv, 2 * MIB, 512, got), 0);
    for (int i = 0; i < 512; i++) assert_int_equal(got[i], 0xff);
    vol_done(&v);
}

static void test_copy(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvcopy", 16 * MIB, 512);
    /* within the volume, 2.5 MiB (more than one chunk), unaligned to records */
    uint64_t len = 2 * MIB + MIB / 2 + 512;
    write_pattern(v.zv, 40, 512, len, 0);
    assert_int_equal(zvol_copy(v.zv, 512, v.zv, 8 * MIB + 1024, len, 0), 0);
    uint8_t *a = malloc(len), *b = malloc(len);
    assert_int_equal(zvol_read(v.zv, 512, len, a), 0);
    assert_int_equal(zvol_read(v.zv, 8 * MIB + 1024, len, b), 0);
    assert_memory_equal(a, b, len);

    /* overlapping, destination after the source: memmove semantics */
    assert_int_equal(zvol_copy(v.zv, 512, v.zv, 512 + MIB / 2, len, 0), 0);
    assert_int_equal(zvol_read(v.zv, 512 + MIB / 2, len, b), 0);
    assert_memory_equal(a, b, len);
    /* overlapping, destination before the source */
    assert_int_equal(zvol_copy(v.zv, 512 + MIB / 2, v.zv, 512, len, ZVOL_WRITE_FUA), 0);
    assert_int_equal(zvol_read(v.zv, 512, len, b), 0);
    assert_memory_equal(a, b, len);

    /* to another volume (another object set, 4 KiB blocks) */
    objset_t *os2 = zfix_objset(&v.f, "vol2", true);
    zvol_t *z2;
    zvol_objset_opts_t o = {.volsize = 8 * MIB, .block_size = 4096};
    assert_int_equal(zvol_open_objset(os2, &o, &z2), 0);
    assert_int_equal(zvol_copy(v.zv, 512, z2, 4096, 512, 0), -EINVAL); /* dst block size */
    assert_int_equal(zvol_copy(v.zv, 4096, z2, 4096, 2 * MIB, 0), 0);
    assert_int_equal(zvol_read(v.zv, 4096, 2 * MIB, a), 0);
    assert_int_equal(zvol_read(z2, 4096, 2 * MIB, b), 0);
    assert_memory_equal(a, b, 2 * MIB);
    zvol_close(z2);
    dmu_objset_close(os2);
    free(a);
    free(b);
    vol_done(&v);
}

/* EXTENDED COPY between two volumes of one pool, record-aligned: the records
 * are cloned (the pool's allocated space does not grow by them), read back as
 * the source, and stay when the source is rewritten; the pool checks clean. */
static uint64_t settled_alloc(spa_t *spa)
{
    for (int i = 0; i < 6; i++) assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    spa_space_t sp;
    spa_get_space(spa, &sp);
    return sp.alloc;
}

static void test_copy_clones(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvclone", 16 * MIB, 512);
    objset_t *os2 = zfix_objset(&v.f, "vol2", true);
    zvol_t *z2;
    zvol_objset_opts_t o = {.volsize = 16 * MIB, .volblocksize = VBS, .block_size = 512};
    assert_int_equal(zvol_open_objset(os2, &o, &z2), 0);
    write_pattern(v.zv, 60, 0, 8 * MIB, 0);
    write_pattern(z2, 61, 0, 16 * MIB, 0); /* the clone replaces blocks the volume had */
    uint64_t before = settled_alloc(v.f.spa);
    assert_int_equal(zvol_copy(v.zv, 0, z2, 4 * MIB, 8 * MIB, 0), 0);
    uint64_t after = settled_alloc(v.f.spa);
    if (after + 8 * MIB > before + MIB)
        fail_msg("a clone of 8 MiB over 8 MiB of the volume: alloc %llu -> %llu",
                 (unsigned long long)before, (unsigned long long)after);
    spa_brt_stats_t st;
    spa_brt_stats(v.f.spa, &st);
    assert_int_equal(st.saved, 8 * MIB);
    uint8_t *a = malloc(8 * MIB), *b = malloc(8 * MIB);
    assert_int_equal(zvol_read(v.zv, 0, 8 * MIB, a), 0);
    assert_int_equal(zvol_read(z2, 4 * MIB, 8 * MIB, b), 0);
    assert_memory_equal(a, b, 8 * MIB);
    expect_pattern(z2, 61, 0, 4 * MIB);
    expect_pattern(z2, 61, 12 * MIB, 4 * MIB);
    write_pattern(v.zv, 62, 0, 8 * MIB, ZVOL_WRITE_FUA);
    assert_int_equal(zvol_read(z2, 4 * MIB, 8 * MIB, b), 0);
    assert_memory_equal(a, b, 8 * MIB);
    settled_alloc(v.f.spa);
    spa_brt_stats(v.f.spa, &st);
    assert_int_equal(st.entries, 0);
    zvol_close(z2);
    dmu_objset_close(os2);
    free(a);
    free(b);
    vol_done(&v);
}

static void test_lba_status(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvlba", 256 * MIB, 512);
    zvol_lba_status_t st;
    /* fresh: one deallocated extent, capped */
    assert_int_equal(zvol_get_lba_status(v.zv, 0, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.off, 0);
    assert_int_equal(st.len, ZVOL_LBA_STATUS_MAX_EXTENT);
    /* records 3 and 4 written but for their first and last block, 5 a hole,
     * 6 written in its first block only: the status follows logical blocks */
    write_pattern(v.zv, 50, 3 * VBS + 512, 2 * VBS - 1024, 0);
    write_pattern(v.zv, 51, 6 * VBS, 512, 0);
    assert_int_equal(zvol_get_lba_status(v.zv, 0, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, 3 * VBS + 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 3 * VBS, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 3 * VBS + 512, &st), 0);
    assert_true(st.mapped);
    assert_int_equal(st.len, 2 * VBS - 1024);
    assert_int_equal(zvol_get_lba_status(v.zv, 4 * VBS + 512, &st), 0);
    assert_true(st.mapped);
    assert_int_equal(st.off, 4 * VBS + 512);
    assert_int_equal(st.len, VBS - 1024);
    assert_int_equal(zvol_get_lba_status(v.zv, 5 * VBS - 512, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, VBS + 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 6 * VBS, &st), 0);
    assert_true(st.mapped);
    assert_int_equal(st.len, 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 6 * VBS + 512, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, ZVOL_LBA_STATUS_MAX_EXTENT);
    /* after the last written record: deallocated to the cap */
    assert_int_equal(zvol_get_lba_status(v.zv, 7 * VBS, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, ZVOL_LBA_STATUS_MAX_EXTENT);
    /* near the end of the volume: capped by volsize */
    assert_int_equal(zvol_get_lba_status(v.zv, 256 * MIB - 1024, &st), 0);
    assert_int_equal(st.len, 1024);
    /* unmapping record 4 splits the mapped run, also once synced */
    assert_int_equal(zvol_unmap(v.zv, 4 * VBS, VBS, 0), 0);
    assert_int_equal(zvol_flush(v.zv), 0);
    assert_int_equal(zvol_get_lba_status(v.zv, 3 * VBS + 512, &st), 0);
    assert_true(st.mapped);
    assert_int_equal(st.len, VBS - 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 4 * VBS, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, 2 * VBS);
    /* unmapping one logical block inside a stored record deallocates just it */
    assert_int_equal(zvol_unmap(v.zv, 3 * VBS + 1024, 512, 0), 0);
    assert_int_equal(zvol_flush(v.zv), 0);
    assert_int_equal(zvol_get_lba_status(v.zv, 3 * VBS + 512, &st), 0);
    assert_true(st.mapped);
    assert_int_equal(st.len, 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 3 * VBS + 1024, &st), 0);
    assert_false(st.mapped);
    assert_int_equal(st.len, 512);
    assert_int_equal(zvol_get_lba_status(v.zv, 3 * VBS + 1536, &st), 0);
    assert_true(st.mapped);
    assert_int_equal(st.len, VBS - 1536);
    vol_done(&v);
}

static void test_resize(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvresize", 4 * MIB, 512);
    char err[256];
    uint8_t b[512] = {9};
    assert_int_equal(zvol_write(v.zv, 5 * MIB, 512, b, 0), -ERANGE);
    assert_int_equal(zvol_resize(v.zv, 8 * MIB + 100, false, err, sizeof(err)), -EINVAL);
    assert_int_equal(zvol_resize(v.zv, 8 * MIB, false, err, sizeof(err)), 0);
    assert_int_equal(zvol_size(v.zv), 8 * MIB);
    write_pattern(v.zv, 60, 5 * MIB, MIB, 0);
    write_pattern(v.zv, 61, 0, 64 * 1024, 0);

    /* shrink refused without force, nothing changes */
    assert_int_equal(zvol_resize(v.zv, 2 * MIB, false, err, sizeof(err)), -EPERM);
    assert_true(strlen(err) > 0);
    assert_int_equal(zvol_size(v.zv), 8 * MIB);
    expect_pattern(v.zv, 60, 5 * MIB, MIB);

    /* forced: data beyond the end is freed */
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_txg_wait_synced(v.f.spa, 0);
    uint64_t used_before = zvol_used_bytes(v.zv);
    assert_int_equal(zvol_resize(v.zv, 2 * MIB, true, err, sizeof(err)), 0);
    assert_int_equal(zvol_size(v.zv), 2 * MIB);
    assert_int_equal(zvol_read(v.zv, 5 * MIB, 512, b), -ERANGE);
    assert_int_equal(zvol_flush(v.zv), 0);
    spa_txg_wait_synced(v.f.spa, 0);
    assert_true(zvol_used_bytes(v.zv) + 900 * 1024 < used_before);
    expect_pattern(v.zv, 61, 0, 64 * 1024);

    /* the new size persists; growing again shows zeros where the old data was */
    vol_reimport(&v, false, 512);
    assert_int_equal(zvol_size(v.zv), 2 * MIB);
    assert_int_equal(zvol_resize(v.zv, 8 * MIB, false, err, sizeof(err)), 0);
    expect_zero(v.zv, 2 * MIB, 6 * MIB);
    expect_pattern(v.zv, 61, 0, 64 * 1024);
    vol_done(&v);
}

typedef struct fua_arg {
    zvol_t *zv;
    int id;
} fua_arg_t;

static void *fua_writer(void *p)
{
    fua_arg_t *a = p;
    uint8_t b[8192];
    for (int i = 0; i < 16; i++) {
        uint64_t off = ((uint64_t)a->id * 16 + i) * 8192;
        zfill(b, 70 + a->id, off, sizeof(b));
        if (zvol_write(a->zv, off, sizeof(b), b, ZVOL_WRITE_FUA)) return (void *)1;
    }
    return NULL;
}

static void test_durability(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvfua", 16 * MIB, 512);
    /* make the volume itself durable first */
    assert_int_equal(zvol_flush(v.zv), 0);
    /* A long txg timeout so nothing syncs by itself within the test. */
    char err[128];
    assert_int_equal(spa_prop_set(v.f.spa, "txg_timeout", "300", err, sizeof(err)), 0);

    /* FUA writes from 8 threads (sharing syncs) */
    pthread_t th[8];
    fua_arg_t args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (fua_arg_t){v.zv, i};
        pthread_create(&th[i], NULL, fua_writer, &args[i]);
    }
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    /* plain writes then SYNCHRONIZE CACHE */
    write_pattern(v.zv, 90, 4 * MIB, MIB, 0);
    assert_int_equal(zvol_unmap(v.zv, 4 * MIB, 8192, 0), 0);
    assert_int_equal(zvol_flush(v.zv), 0);
    /* a FUA compare_and_write and write_same */
    uint8_t zeros[512] = {0}, one[512];
    memset(one, 0x77, sizeof(one));
    uint64_t mis;
    assert_int_equal(zvol_compare_and_write(v.zv, 6 * MIB, 512, zeros, one, ZVOL_WRITE_FUA, &mis), 0);
    assert_int_equal(zvol_write_same(v.zv, 7 * MIB, 64, one, ZVOL_WRITE_FUA), 0);
    /* a plain write, not flushed: may or may not survive; it must not break anything */
    write_pattern(v.zv, 91, 10 * MIB, 8192, 0);

    vol_reimport(&v, true, 512);
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 16; i++) {
            uint64_t off = ((uint64_t)t * 16 + i) * 8192;
            expect_pattern(v.zv, 70 + t, off, 8192);
        }
    expect_zero(v.zv, 4 * MIB, 8192);
    expect_pattern(v.zv, 90, 4 * MIB + 8192, MIB - 8192);
    uint8_t got[512];
    assert_int_equal(zvol_read(v.zv, 6 * MIB, 512, got), 0);
    assert_memory_equal(got, one, 512);
    for (int i = 0; i < 64; i++) {
        assert_int_equal(zvol_read(v.zv, 7 * MIB + i * 512, 512, got), 0);
        assert_memory_equal(got, one, 512);
    }
    vol_done(&v);
}

static void expect_memory_pattern(zvol_t *zv, uint64_t tag, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len), *w = malloc(len);
    memset(b, 0xee, len);
    assert_int_equal(zvol_read_memory(zv, off, len, b), 0);
    zfill(w, tag, off, len);
    assert_memory_equal(b, w, len);
    free(b);
    free(w);
}

/* zvol_read_memory serves dirty records, holes and ARC hits (whole records and
 * 4 KiB halves of 8 KiB records), and says -EWOULDBLOCK - nothing else - when a
 * record would have to come from the disk; zvol_read then caches it. */
static void test_read_memory(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvmem", 64 * MIB, 4096);
    uint8_t *b = malloc(65536);
    write_pattern(v.zv, 41, 0, 65536, 0);
    expect_memory_pattern(v.zv, 41, 4096, 4096);   /* dirty, second half of record 0 */
    expect_memory_pattern(v.zv, 41, 4096, 32768);  /* dirty, across records */
    memset(b, 0xee, 65536);
    assert_int_equal(zvol_read_memory(v.zv, MIB, 8192, b), 0); /* never written: a hole */
    for (int i = 0; i < 8192; i++) assert_int_equal(b[i], 0);
    assert_int_equal(zvol_read_memory(v.zv, 4095, 4096, b), -EINVAL);
    assert_int_equal(zvol_read_memory(v.zv, 64 * MIB, 4096, b), -ERANGE);

    spa_txg_wait_synced(v.f.spa, 0);
    arc_purge_pool(spa_guid(v.f.spa)); /* on disk only now */
    assert_int_equal(zvol_read_memory(v.zv, 4096, 4096, b), -EWOULDBLOCK);
    assert_int_equal(zvol_read_memory(v.zv, 0, 65536, b), -EWOULDBLOCK);
    expect_pattern(v.zv, 41, 0, 32768);            /* records 0-3 come into the ARC */
    /* Checked before the reads below: three of them in a row near the end of
     * the last read make a read-ahead stream, which would bring record 4 in
     * behind the test's back. Waiting for any read-ahead makes that, should
     * one start here, fail every time rather than now and then. */
    dmu_prefetch_wait();
    assert_int_equal(zvol_read_memory(v.zv, 28672, 8192, b), -EWOULDBLOCK); /* 3 cached, 4 not */
    expect_memory_pattern(v.zv, 41, 12288, 4096);  /* a half record from the ARC */
    expect_memory_pattern(v.zv, 41, 8192, 8192);   /* a whole one */
    expect_memory_pattern(v.zv, 41, 4096, 20480);  /* a read across cached records */

    write_pattern(v.zv, 42, 32768, 4096, 0);       /* dirty again over a purged record */
    expect_memory_pattern(v.zv, 42, 32768, 4096);
    assert_int_equal(zvol_read_memory(v.zv, 36864, 4096, b), 0); /* the rest of it: dirty */
    free(b);
    vol_done(&v);
}

static void test_shared_handles(void **state)
{
    (void)state;
    vol_t v;
    vol_make(&v, "zvshare", 4 * MIB, 512);
    /* A second open shares the volume: a resize through one is seen by the other. */
    zvol_t *b;
    zvol_objset_opts_t o = {0};
    assert_int_equal(zvol_open_objset(v.os, &o, &b), 0);
    char err[128];
    assert_int_equal(zvol_resize(b, 6 * MIB, false, err, sizeof(err)), 0);
    assert_int_equal(zvol_size(v.zv), 6 * MIB);
    write_pattern(b, 95, 5 * MIB, 4096, 0);
    zvol_close(b);
    expect_pattern(v.zv, 95, 5 * MIB, 4096);
    vol_done(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rw_granularity),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_unmap_frees_space),
        cmocka_unit_test(test_thin),
        cmocka_unit_test(test_write_same),
        cmocka_unit_test(test_compare_and_write),
        cmocka_unit_test(test_or_write),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_copy_clones),
        cmocka_unit_test(test_lba_status),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_durability),
        cmocka_unit_test(test_shared_handles),
        cmocka_unit_test(test_read_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
