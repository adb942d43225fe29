/*
 * Block cloning at the DMU and SPA (dmu_clone_range, src/spa/spa_brt.c): a
 * clone reads back as its source, shares its blocks (the pool's allocated
 * space does not grow by the data), frees in either order give the space
 * back only with the last reference, the table survives export/import, a
 * crash before the clone's txg synced leaves a pool without it, and the
 * offline check finds nothing leaked, doubly allocated or orphaned.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/dmu/dmu_impl.h"
#include "pool_fixture.h"

#define REC (128u * 1024)
#define NREC 128u /* 16 MiB */
#define DATA_BYTES ((uint64_t)NREC * REC)
#define SLACK (2u * CAIRN_MIB) /* metadata: indirect blocks, dnodes, the table */

static const dmu_object_props_t props = {.recordsize = REC,
                                         .compress = CAIRN_COMPRESS_OFF,
                                         .checksum = CAIRN_CHECKSUM_FLETCHER4,
                                         .copies = 1};

static void sync_pool(spa_t *spa) { assert_int_equal(spa_txg_wait_synced(spa, 0), 0); }

/* Past the defer window of frees, so alloc shows them. */
static void settle(spa_t *spa)
{
    for (int i = 0; i < 6; i++) sync_pool(spa);
}

static uint64_t pool_alloc(spa_t *spa)
{
    settle(spa);
    spa_space_t sp;
    spa_get_space(spa, &sp);
    return sp.alloc;
}

static uint8_t *pattern(uint32_t seed)
{
    uint8_t *b = malloc(DATA_BYTES);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < DATA_BYTES / 8; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ((uint64_t *)b)[i] = x;
    }
    return b;
}

static uint64_t new_object(objset_t *os)
{
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &props, &obj, tx), 0);
    dmu_tx_commit(tx);
    return obj;
}

static void write_all(objset_t *os, uint64_t obj, const uint8_t *data)
{
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, DATA_BYTES, data, tx), 0);
    dmu_tx_commit(tx);
}

static void assert_reads(objset_t *os, uint64_t obj, const uint8_t *want)
{
    uint8_t *got = malloc(DATA_BYTES);
    assert_int_equal(dmu_read(os, obj, 0, DATA_BYTES, got), 0);
    assert_memory_equal(got, want, DATA_BYTES);
    free(got);
}

static int clone_all(objset_t *src, uint64_t sobj, objset_t *dst, uint64_t dobj, uint64_t *n)
{
    dmu_tx_t *tx = dmu_tx_begin(dst);
    int e = dmu_clone_range(src, sobj, 0, dst, dobj, 0, DATA_BYTES, tx, n);
    dmu_tx_commit(tx);
    return e;
}

static void free_object(objset_t *os, uint64_t obj)
{
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_free(os, obj, tx), 0);
    dmu_tx_commit(tx);
}

typedef struct pair {
    test_pool_t p;
    objset_t *os;
    uint64_t a, b;
    uint8_t *data;
    uint64_t alloc_empty, alloc_one;
} pair_t;

static void pair_open(pair_t *x)
{
    char name[128];
    snprintf(name, sizeof name, "%s/fs", x->p.name);
    assert_int_equal(dmu_objset_open(x->p.spa, name, &x->os), 0);
}

/* A written object a (synced) and an empty object b of the same record size. */
static void pair_make(pair_t *x, const char *tag)
{
    memset(x, 0, sizeof *x);
    test_pool_make(&x->p, tag, 512 * CAIRN_MIB);
    char name[128];
    snprintf(name, sizeof name, "%s/fs", x->p.name);
    assert_int_equal(dmu_objset_create(x->p.spa, name, NULL), 0);
    pair_open(x);
    x->a = new_object(x->os);
    x->b = new_object(x->os);
    x->alloc_empty = pool_alloc(x->p.spa);
    x->data = pattern(7);
    write_all(x->os, x->a, x->data);
    x->alloc_one = pool_alloc(x->p.spa);
    assert_true(x->alloc_one >= x->alloc_empty + DATA_BYTES);
}

static void pair_clone(pair_t *x)
{
    uint64_t n = 0;
    assert_int_equal(clone_all(x->os, x->a, x->os, x->b, &n), 0);
    assert_int_equal(n, NREC);
    assert_reads(x->os, x->b, x->data); /* from the dirty records */
    uint64_t alloc = pool_alloc(x->p.spa);
    if (alloc > x->alloc_one + SLACK)
        fail_msg("a clone of %llu bytes allocated %llu", (unsigned long long)DATA_BYTES,
                 (unsigned long long)(alloc - x->alloc_one));
    spa_brt_stats_t st;
    spa_brt_stats(x->p.spa, &st);
    assert_int_equal(st.entries, NREC);
    assert_int_equal(st.saved, DATA_BYTES);
    char v[64];
    assert_int_equal(spa_prop_get(x->p.spa, "bclonesaved", v, sizeof v), 0);
    assert_int_equal(strtoull(v, NULL, 10), DATA_BYTES);
    assert_int_equal(spa_prop_get(x->p.spa, "bcloneratio", v, sizeof v), 0);
    assert_string_equal(v, "2.00x");
    assert_reads(x->os, x->b, x->data); /* from the shared blocks */
}

static void pair_done(pair_t *x)
{
    if (x->os) dmu_objset_close(x->os);
    x->os = NULL;
    test_pool_check(&x->p);
    test_pool_remove(&x->p);
    free(x->data);
}

static void assert_alloc_near(spa_t *spa, uint64_t want, const char *what)
{
    uint64_t alloc = pool_alloc(spa);
    if (alloc > want + SLACK || alloc + SLACK < want)
        fail_msg("%s: alloc %llu, expected about %llu", what, (unsigned long long)alloc,
                 (unsigned long long)want);
}

static void test_clone_then_free_source_first(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonesrc");
    pair_clone(&x);
    free_object(x.os, x.a);
    assert_alloc_near(x.p.spa, x.alloc_one, "source freed, clone holds the blocks");
    assert_reads(x.os, x.b, x.data);
    spa_brt_stats_t st;
    spa_brt_stats(x.p.spa, &st);
    assert_int_equal(st.entries, 0);
    free_object(x.os, x.b);
    assert_alloc_near(x.p.spa, x.alloc_empty, "both freed");
    pair_done(&x);
}

static void test_clone_then_free_clone_first(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonedst");
    pair_clone(&x);
    free_object(x.os, x.b);
    assert_alloc_near(x.p.spa, x.alloc_one, "clone freed");
    assert_reads(x.os, x.a, x.data);
    free_object(x.os, x.a);
    assert_alloc_near(x.p.spa, x.alloc_empty, "both freed");
    pair_done(&x);
}

/* Overwriting the clone's records gives their references back one by one. */
static void test_clone_overwritten(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonerw");
    pair_clone(&x);
    uint8_t *other = pattern(9);
    write_all(x.os, x.b, other);
    assert_alloc_near(x.p.spa, x.alloc_one + DATA_BYTES, "clone overwritten");
    spa_brt_stats_t st;
    spa_brt_stats(x.p.spa, &st);
    assert_int_equal(st.entries, 0);
    assert_reads(x.os, x.a, x.data);
    assert_reads(x.os, x.b, other);
    free(other);
    pair_done(&x);
}

/* Two clones and the table across export/import, with the check in between. */
static void test_clone_export_import(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "cloneexp");
    pair_clone(&x);
    uint64_t c = new_object(x.os);
    uint64_t n = 0;
    assert_int_equal(clone_all(x.os, x.b, x.os, c, &n), 0); /* a clone of the clone */
    assert_int_equal(n, NREC);
    assert_alloc_near(x.p.spa, x.alloc_one, "three references");
    dmu_objset_close(x.os);
    x.os = NULL;
    test_pool_check(&x.p); /* exports */
    test_pool_import(&x.p, 0);
    pair_open(&x);
    spa_brt_stats_t st;
    spa_brt_stats(x.p.spa, &st);
    assert_int_equal(st.entries, NREC);
    assert_int_equal(st.saved, 2 * DATA_BYTES);
    assert_reads(x.os, x.a, x.data);
    assert_reads(x.os, x.b, x.data);
    assert_reads(x.os, c, x.data);
    free_object(x.os, x.b);
    free_object(x.os, x.a);
    assert_alloc_near(x.p.spa, x.alloc_one, "one reference left");
    dmu_objset_close(x.os);
    x.os = NULL;
    test_pool_reimport(&x.p);
    pair_open(&x);
    assert_reads(x.os, c, x.data);
    free_object(x.os, c);
    assert_alloc_near(x.p.spa, x.alloc_empty, "all freed");
    pair_done(&x);
}

/* Another object set of the same pool. */
static void test_clone_across_objsets(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonexos");
    char name[128];
    snprintf(name, sizeof name, "%s/other", x.p.name);
    assert_int_equal(dmu_objset_create(x.p.spa, name, NULL), 0);
    objset_t *os2;
    assert_int_equal(dmu_objset_open(x.p.spa, name, &os2), 0);
    uint64_t d = new_object(os2);
    uint64_t base = pool_alloc(x.p.spa);
    uint64_t n = 0;
    assert_int_equal(clone_all(x.os, x.a, os2, d, &n), 0);
    assert_int_equal(n, NREC);
    assert_alloc_near(x.p.spa, base, "cloned to another object set");
    free_object(x.os, x.a);
    assert_alloc_near(x.p.spa, base, "source freed");
    assert_reads(os2, d, x.data);
    free_object(os2, d);
    assert_alloc_near(x.p.spa, x.alloc_empty, "both freed");
    dmu_objset_close(os2);
    pair_done(&x);
}

/* A source record not synced yet is -EAGAIN; once synced it clones. Records
 * must be whole and aligned. */
static void test_clone_dirty_source_and_alignment(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonedirty");
    uint8_t *other = pattern(3);
    dmu_tx_t *tx = dmu_tx_begin(x.os);
    assert_int_equal(dmu_write(x.os, x.a, 0, REC, other, tx), 0);
    dmu_tx_commit(tx);
    uint64_t n = 0;
    tx = dmu_tx_begin(x.os);
    assert_int_equal(dmu_clone_range(x.os, x.a, 0, x.os, x.b, 0, REC, tx, &n), -EAGAIN);
    assert_int_equal(dmu_clone_range(x.os, x.a, 512, x.os, x.b, 0, REC, tx, &n), -EINVAL);
    assert_int_equal(dmu_clone_range(x.os, x.a, 0, x.os, x.b, 0, REC / 2, tx, &n), -EINVAL);
    assert_int_equal(dmu_clone_range(x.os, x.a, 0, x.os, x.a, REC, REC, tx, &n), -EINVAL);
    dmu_tx_commit(tx);
    sync_pool(x.p.spa);
    assert_int_equal(clone_all(x.os, x.a, x.os, x.b, &n), 0);
    assert_int_equal(n, NREC);
    memcpy(x.data, other, REC);
    assert_reads(x.os, x.b, x.data);
    free(other);
    pair_done(&x);
}

/* A crash before the clone's txg synced: the pool comes back without the
 * clone and without table entries; the check is clean. A crash after: with. */
static void test_clone_crash(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonecrash");
    uint64_t n = 0;
    assert_int_equal(clone_all(x.os, x.a, x.os, x.b, &n), 0);
    dmu_objset_close(x.os);
    x.os = NULL;
    spa_abandon(x.p.spa);
    test_pool_import(&x.p, SPA_IMPORT_FORCE);
    spa_brt_stats_t st;
    spa_brt_stats(x.p.spa, &st);
    assert_int_equal(st.entries, 0);
    test_pool_check(&x.p);
    test_pool_import(&x.p, 0);
    pair_open(&x);
    assert_int_equal(clone_all(x.os, x.a, x.os, x.b, &n), 0);
    sync_pool(x.p.spa);
    /* A later txg changes the table in memory only, then the crash. */
    free_object(x.os, x.a);
    dmu_objset_close(x.os);
    x.os = NULL;
    spa_abandon(x.p.spa);
    test_pool_import(&x.p, SPA_IMPORT_FORCE);
    pair_open(&x);
    spa_brt_stats(x.p.spa, &st);
    assert_int_equal(st.entries, NREC);
    assert_reads(x.os, x.a, x.data);
    assert_reads(x.os, x.b, x.data);
    free_object(x.os, x.a);
    free_object(x.os, x.b);
    assert_alloc_near(x.p.spa, x.alloc_empty, "both freed after the crash");
    pair_done(&x);
}

/* The offline check reports table entries whose block no pointer names
 * (here: references taken without a pointer, a bug it must catch), and the
 * space they keep as leaked. */
static void test_check_finds_orphaned_entries(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "cloneorph");
    cairn_blkptr_t *bps = calloc(NREC, sizeof *bps);
    dnode_t *dn = dnode_hold(x.os, x.a, false);
    assert_non_null(dn);
    assert_int_equal(dnode_prefetch_bps(dn, 0, NREC, bps), REC);
    dnode_rele(dn);
    dmu_tx_t *tx = dmu_tx_begin(x.os);
    uint64_t txg = dmu_tx_txg(tx);
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < NREC; i++) assert_int_equal(spa_block_clone_ref(x.p.spa, txg, &bps[i]), 0);
    dmu_tx_commit(tx);
    free(bps);
    free_object(x.os, x.a);
    sync_pool(x.p.spa);
    dmu_objset_close(x.os);
    x.os = NULL;
    test_pool_export(&x.p);
    const char *paths[] = {x.p.path};
    spa_check_report_t rep;
    char err[256] = "";
    assert_int_equal(spa_check(x.p.name, paths, 1, &rep, err, sizeof err), -EUCLEAN);
    assert_int_equal(rep.brt_entries, NREC);
    assert_int_equal(rep.brt_orphans, NREC);
    assert_true(rep.leaked_bytes >= DATA_BYTES);
    assert_non_null(strstr(err, "shared-block entries"));
    test_pool_remove(&x.p);
    free(x.data);
}

/* The table's rules at the SPA: holes and gang blocks are refused, counts go
 * up and down, and the first reference marks the pool version 2 on disk
 * (label config and uberblock), which older builds refuse. */
static uint64_t label_u64(const char *path, uint64_t off)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint64_t v = 0;
    assert_int_equal(fseeko(f, (off_t)off, SEEK_SET), 0);
    assert_int_equal(fread(&v, sizeof v, 1, f), 1);
    fclose(f);
    return v;
}

/* Version of the newest uberblock in label 0's ring (slots of 4 KiB at 128 KiB). */
static uint64_t newest_ub_version(const char *path)
{
    uint64_t best_txg = 0, version = 0;
    for (uint64_t slot = 0; slot < 32; slot++) {
        uint64_t off = 128 * 1024 + slot * 4096;
        if (label_u64(path, off) != 0x4b4c42524542ULL) continue;
        uint64_t txg = label_u64(path, off + 16);
        if (txg > best_txg) {
            best_txg = txg;
            version = label_u64(path, off + 8);
        }
    }
    return version;
}

static void test_spa_table_rules(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonerules");
    dmu_objset_close(x.os);
    x.os = NULL;
    test_pool_reimport(&x.p);
    assert_int_equal(label_u64(x.p.path, 16 * 1024 + 8), 1); /* config version, no clone yet */
    pair_open(&x);
    cairn_blkptr_t *bps = calloc(NREC, sizeof *bps);
    dnode_t *dn = dnode_hold(x.os, x.a, false);
    assert_int_equal(dnode_prefetch_bps(dn, 0, NREC, bps), REC);
    dnode_rele(dn);
    cairn_blkptr_t hole = {0}, gang = bps[0];
    gang.flags |= CAIRN_BP_GANG;
    uint64_t txg = spa_tx_hold(x.p.spa);
    assert_int_equal(spa_block_clone_ref(x.p.spa, txg, &hole), -EOPNOTSUPP);
    assert_int_equal(spa_block_clone_ref(x.p.spa, txg, &gang), -EOPNOTSUPP);
    spa_tx_rele(x.p.spa, txg);
    assert_int_equal(spa_brt_refs(x.p.spa, &bps[0]), 0);
    uint64_t n = 0;
    assert_int_equal(clone_all(x.os, x.a, x.os, x.b, &n), 0);
    uint64_t c = new_object(x.os);
    assert_int_equal(clone_all(x.os, x.a, x.os, c, &n), 0);
    assert_int_equal(spa_brt_refs(x.p.spa, &bps[0]), 2);
    free_object(x.os, c);
    sync_pool(x.p.spa);
    assert_int_equal(spa_brt_refs(x.p.spa, &bps[0]), 1);
    dmu_objset_close(x.os);
    x.os = NULL;
    test_pool_export(&x.p);
    assert_int_equal(label_u64(x.p.path, 16 * 1024 + 8), 2);
    assert_int_equal(newest_ub_version(x.p.path), 2);
    test_pool_import(&x.p, 0);
    assert_int_equal(spa_brt_refs(x.p.spa, &bps[0]), 1);
    free(bps);
    pair_done(&x);
}

/* The defragmenter leaves cloned blocks alone (rewriting one would give the
 * clone its own copy and double the space), as it leaves a snapshot's: an
 * object whose records lie scattered (each record synced between two records
 * of another object) is rewritten when it is alone, not once it is cloned. */
static void scattered_object(pair_t *x, uint64_t obj, uint64_t filler)
{
    for (uint32_t r = 0; r < 32; r++) {
        dmu_tx_t *tx = dmu_tx_begin(x->os);
        assert_int_equal(dmu_write(x->os, obj, (uint64_t)r * REC, REC, x->data + (size_t)r * REC, tx), 0);
        assert_int_equal(dmu_write(x->os, filler, (uint64_t)r * REC, REC, x->data, tx), 0);
        dmu_tx_commit(tx);
        sync_pool(x->p.spa);
    }
}

static void test_defrag_leaves_clones(void **state)
{
    (void)state;
    pair_t x;
    pair_make(&x, "clonedefrag");
    uint64_t s1 = new_object(x.os), s2 = new_object(x.os), f = new_object(x.os);
    scattered_object(&x, s1, f);
    scattered_object(&x, s2, f);
    dmu_defrag_opts_t opts = {0};
    dmu_defrag_stats_t st = {0};
    assert_int_equal(dmu_defrag_object(x.os, s1, &opts, &st), 0);
    assert_true(st.records > 0); /* scattered indeed: alone, it is rewritten */
    uint64_t c = new_object(x.os), n = 0;
    dmu_tx_t *tx = dmu_tx_begin(x.os);
    assert_int_equal(dmu_clone_range(x.os, s2, 0, x.os, c, 0, 32 * REC, tx, &n), 0);
    dmu_tx_commit(tx);
    assert_int_equal(n, 32);
    sync_pool(x.p.spa);
    memset(&st, 0, sizeof st);
    assert_int_equal(dmu_defrag_object(x.os, s2, &opts, &st), 0);
    assert_int_equal(st.records, 0);
    assert_true(st.shared_records > 0);
    assert_int_equal(dmu_defrag_object(x.os, c, &opts, &st), 0);
    assert_int_equal(st.records, 0);
    spa_brt_stats_t bs;
    spa_brt_stats(x.p.spa, &bs);
    assert_int_equal(bs.entries, 32);
    pair_done(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_then_free_source_first),
        cmocka_unit_test(test_clone_then_free_clone_first),
        cmocka_unit_test(test_clone_overwritten),
        cmocka_unit_test(test_clone_export_import),
        cmocka_unit_test(test_clone_across_objsets),
        cmocka_unit_test(test_clone_dirty_source_and_alignment),
        cmocka_unit_test(test_clone_crash),
        cmocka_unit_test(test_check_finds_orphaned_entries),
        cmocka_unit_test(test_spa_table_rules),
        cmocka_unit_test(test_defrag_leaves_clones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
