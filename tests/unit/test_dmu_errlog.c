/*
 * The pool's persistent error log, as the DMU feeds and stores it: the pool walk
 * names every block by bookmark; a read that finds no good copy of a record enters
 * (object set, object, level, block) once, however often it is retried; the entry
 * survives export and import (stored in the MOS); a scrub that still finds the block
 * bad keeps it, and once the record is rewritten the next scrub drops it, which also
 * survives an import. A stored log that is not one is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pool_fixture.h"

#include <cairn/vdev.h>

#define RS (128 * 1024u)

static const dmu_object_props_t props = {.recordsize = RS, .compress = CAIRN_COMPRESS_OFF,
                                         .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = cairn_rng_next(&r);
        memcpy(b + i, &v, CAIRN_MIN(8, n - i));
    }
}

typedef struct find {
    spa_bookmark_t want;
    cairn_blkptr_t bp;
    int found;
    int roots;          /* object set roots seen (level -1) */
} find_t;

static int find_visit(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa;
    find_t *f = arg;
    assert_non_null(bm);
    if (bm->level == -1) f->roots++;
    if (!memcmp(bm, &f->want, sizeof *bm)) {
        f->bp = *bp;
        f->found++;
    }
    return 0;
}

static size_t errlog(spa_t *spa, spa_bookmark_t *first)
{
    spa_bookmark_t *v = NULL;
    size_t n = spa_errlog_list(spa, &v);
    if (n && first) *first = v[0];
    free(v);
    return n;
}

static void scrub(spa_t *spa, uint64_t want_errors)
{
    assert_int_equal(spa_scrub_start(spa), 0);
    spa_scrub_wait(spa);
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    assert_int_equal(st.state, SPA_SCRUB_FINISHED);
    assert_int_equal(st.errors, want_errors);
    assert_true(st.scanned >= st.examined && st.examined > 0);
}

static void test_errlog_lifecycle(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "errlog", 256ULL << 20);
    uint64_t osid;
    objset_t *os;
    assert_int_equal(dmu_objset_create(p.spa, "fs", &osid), 0);
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);
    uint8_t *data = malloc(2 * RS), *b = malloc(2 * RS);
    fill(data, 2 * RS, 7);
    uint64_t a, c;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &props, &a, tx), 0);
    assert_int_equal(dmu_object_alloc(os, &props, &c, tx), 0);
    assert_int_equal(dmu_write(os, a, 0, 2 * RS, data, tx), 0);
    assert_int_equal(dmu_write(os, c, 0, RS, data, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    assert_int_equal(errlog(p.spa, NULL), 0);

    /* The walk names record 1 of a; every object set's root comes with level -1. */
    find_t f = {.want = {osid, a, 0, 1}};
    assert_int_equal(dmu_traverse_pool(p.spa, find_visit, &f), 0);
    assert_int_equal(f.found, 1);
    assert_true(f.roots >= 2); /* the MOS and fs */
    dmu_objset_close(os);
    test_pool_export(&p);

    /* Its only copy destroyed. */
    uint8_t junk[4096];
    memset(junk, 0x5a, sizeof junk);
    int fd = open(p.path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)(VDEV_DATA_START + f.bp.dva[0].offset)),
                     (ssize_t)sizeof junk);
    close(fd);

    test_pool_import(&p, 0);
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);
    for (int i = 0; i < 3; i++) assert_int_not_equal(dmu_read(os, a, RS, RS, b), 0);
    assert_int_equal(dmu_read(os, a, 0, RS, b), 0);
    assert_int_equal(dmu_read(os, c, 0, RS, b), 0);
    spa_bookmark_t e;
    assert_int_equal(errlog(p.spa, &e), 1); /* once, however often it was read */
    assert_memory_equal(&e, &f.want, sizeof e);
    assert_int_equal(dmu_objset_sync(os), 0); /* stored with the next txg */
    dmu_objset_close(os);

    test_pool_reimport(&p);
    assert_int_equal(errlog(p.spa, &e), 1);
    assert_memory_equal(&e, &f.want, sizeof e);

    /* Still bad: the scrub finds it and keeps it. */
    scrub(p.spa, 1);
    assert_int_equal(errlog(p.spa, &e), 1);
    assert_memory_equal(&e, &f.want, sizeof e);

    /* Rewritten: still listed until a scrub no longer finds it bad. */
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, a, RS, RS, data, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(dmu_objset_sync(os), 0);
    assert_int_equal(errlog(p.spa, NULL), 1);
    scrub(p.spa, 0);
    assert_int_equal(errlog(p.spa, NULL), 0);
    assert_int_equal(dmu_read(os, a, RS, RS, b), 0);
    assert_memory_equal(b, data, RS);
    assert_int_equal(dmu_objset_sync(os), 0);
    dmu_objset_close(os);
    test_pool_reimport(&p);
    assert_int_equal(errlog(p.spa, NULL), 0);

    /* A stored log that is not one is refused and changes nothing. */
    uint8_t garbage[64];
    memset(garbage, 0xa5, sizeof garbage);
    assert_int_equal(spa_errlog_load(p.spa, garbage, sizeof garbage), -EINVAL);
    assert_int_equal(spa_errlog_load(p.spa, garbage, 8), -EINVAL);
    assert_int_equal(errlog(p.spa, NULL), 0);

    test_pool_check(&p);
    test_pool_remove(&p);
    free(data);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errlog_lifecycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
