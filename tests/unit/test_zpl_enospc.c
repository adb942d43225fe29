/*
 * Full pools and quotas through the POSIX layer, with data not yet synced.
 *
 * Space checks count what the txgs not yet synced will allocate (estimated by
 * the DMU) and keep the pool's slop free: without that a quota held only for
 * synced data (a 4 MiB quota let 100 MiB through between syncs), and writes ran
 * ahead of a full pool until the txg's sync failed for want of space and the
 * pool was suspended. Here: a quota and a refquota are never passed, even by
 * writes that are all in one txg; a pool filled by writes that never commit
 * refuses with ENOSPC, still syncs, exports and checks clean; a remove on the
 * full pool works and gives the space back. Each runs twice: as is, and with
 * the check's lock-free fast path allowed on these small pools.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

#include <errno.h>

#define MIB (1024ull * 1024)

static uint8_t *random_buf(size_t len, uint64_t seed)
{
    uint8_t *b = malloc(len);
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = cairn_rng_next(&r);
        memcpy(b + i, &v, 8);
    }
    return b;
}

static uint64_t num(zfix_t *f, const char *ds, const char *prop)
{
    dsl_prop_t p;
    char err[256];
    int e = dsl_prop_get(f->dp, ds, prop, &p, err, sizeof(err));
    if (e) fail_msg("get %s of %s: %s", prop, ds, err);
    return p.numeric;
}

/* Writes chunk-sized pieces of incompressible data at the end of n until a
 * write fails; returns the bytes accepted and the error in *err. */
static uint64_t write_until_error(zpl_node_t *n, uint64_t start, size_t chunk, uint64_t limit,
                                  int *err)
{
    uint8_t *b = random_buf(chunk, start + 7);
    uint64_t off = start;
    *err = 0;
    while (off - start < limit) {
        b[0] = (uint8_t)(off >> 20); /* no two chunks alike */
        *err = zpl_write(n, off, chunk, b, 0, NULL);
        if (*err) break;
        off += chunk;
    }
    free(b);
    return off - start;
}

/* The quota of test_quota_holds_before_sync, in MiB: larger when the fast path
 * runs, so that it has room to run in. */
static uint64_t quota_mib = 8;

/* A quota (on the dataset) and a refquota (on another) are never exceeded by
 * writes that all sit in one open txg: the check counts them before they sync.
 * Not absurdly early either: most of the quota can be filled. */
static void test_quota_holds_before_sync(void **state)
{
    (void)state;
    const uint64_t Q = quota_mib * MIB, RQ = Q * 3 / 4;
    char qs[32], rqs[32];
    snprintf(qs, sizeof qs, "%lluM", (unsigned long long)quota_mib);
    snprintf(rqs, sizeof rqs, "%lluM", (unsigned long long)(quota_mib * 3 / 4));
    zfix_t f;
    zfix_make(&f, "zplq", 512 * MIB);
    char err[256];
    /* A long txg timeout: only the writes themselves could close a txg. */
    assert_int_equal(spa_prop_set(f.spa, "txg_timeout", "300", err, sizeof(err)), 0);
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "quota", qs, err, sizeof(err)), 0);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    int e;
    uint64_t took = write_until_error(a, 0, 256 * 1024, 64 * MIB, &e);
    assert_int_equal(e, -EDQUOT);
    assert_true(took <= Q);
    assert_true(took >= RQ);
    /* What was accepted fits once it is on disk. */
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    assert_true(num(&f, f.fsname, "used") <= Q);
    /* And the quota still holds with it on disk. */
    uint64_t more = write_until_error(a, took, 256 * 1024, 64 * MIB, &e);
    assert_int_equal(e, -EDQUOT);
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    assert_true(took + more <= Q);
    assert_true(num(&f, f.fsname, "used") <= Q);
    zpl_node_rele(a);
    /* After export and import too. */
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "a", &a), 0);
    write_until_error(a, took + more, 256 * 1024, 64 * MIB, &e);
    assert_int_equal(e, -EDQUOT);
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    assert_true(num(&f, f.fsname, "used") <= Q);
    zpl_node_rele(a);

    /* refquota on a second filesystem */
    char fs2[200];
    snprintf(fs2, sizeof fs2, "%s/rq", f.pool);
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM};
    assert_int_equal(dsl_dataset_create(f.dp, fs2, &co, err, sizeof(err)), 0);
    assert_int_equal(dsl_prop_set(f.dp, fs2, "refquota", rqs, err, sizeof(err)), 0);
    zpl_fs_t *fs;
    assert_int_equal(zpl_mount(f.dp, fs2, &fs), 0);
    zpl_node_t *r2;
    assert_int_equal(zpl_root(fs, &r2), 0);
    zpl_node_t *b = zfix_mkfile(r2, "b");
    took = write_until_error(b, 0, 128 * 1024, 64 * MIB, &e);
    assert_int_equal(e, -EDQUOT);
    assert_true(took <= RQ && took >= RQ / 2);
    assert_int_equal(zpl_commit(fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    assert_true(num(&f, fs2, "referenced") <= RQ);
    zpl_node_rele(b);
    zpl_node_rele(r2);
    assert_int_equal(zpl_unmount(fs), 0);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* A 256 MiB pool filled by writes that never wait for a sync: they stop with
 * ENOSPC before the pool's free space is promised twice over, the txgs that
 * hold them sync (the pool is not suspended), a remove works on the full pool
 * and gives its space back, and the pool exports and checks clean. */
static void test_fill_pool_without_syncing(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplfull", 256 * MIB);
    char err[256];
    assert_int_equal(spa_prop_set(f.spa, "txg_timeout", "300", err, sizeof(err)), 0);
    spa_space_t ss;
    spa_get_space(f.spa, &ss);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a"), *b = zfix_mkfile(root, "b");
    int e;
    uint64_t took_a = write_until_error(a, 0, MIB, 1024 * MIB, &e);
    assert_int_equal(e, -ENOSPC);
    /* Never past the free space less the slop; and near it, since a write that
     * only the estimates refuse waits for a sync and asks again. */
    uint64_t slop = spa_slop(f.spa);
    assert_true(took_a <= ss.free - slop);
    assert_true(took_a + slop + 16 * MIB >= ss.free);
    printf("pool free %llu MiB: writes took %llu MiB before ENOSPC\n", (unsigned long long)(ss.free / MIB),
           (unsigned long long)(took_a / MIB));
    /* Nothing more fits, in another file either. */
    uint64_t took_b = write_until_error(b, 0, MIB, 1024 * MIB, &e);
    assert_int_equal(e, -ENOSPC);
    assert_true(took_b <= 8 * MIB);
    /* The sync of all that succeeds: the pool is not suspended. */
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    /* Remove and create work on a full pool; the space comes back. */
    zpl_node_rele(a);
    zpl_node_rele(b);
    assert_int_equal(zpl_remove(root, "a", NULL), 0);
    assert_int_equal(zpl_commit(f.fs), 0);
    for (int i = 0; i < SPA_DEFER_TXGS + 2; i++) assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    zpl_node_t *c = zfix_mkfile(root, "c");
    uint64_t took_c = write_until_error(c, 0, MIB, 32 * MIB, &e);
    assert_int_equal(e, 0);
    assert_int_equal(took_c, 32 * MIB);
    assert_int_equal(zpl_commit(f.fs), 0);
    zpl_node_rele(c);
    zpl_node_rele(root);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

/* The same with the write check's fast path on down to 8 MiB of room (it
 * needs 1 GiB by default, more than these pools have): what it lets through
 * between full checks must not break a limit either. */
static int fast_path_on(void **state)
{
    (void)state;
    dsl_set_space_fast_min(8 * MIB);
    quota_mib = 64;
    return 0;
}

static int fast_path_default(void **state)
{
    (void)state;
    dsl_set_space_fast_min(1ULL << 30);
    quota_mib = 8;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_holds_before_sync),
        cmocka_unit_test(test_fill_pool_without_syncing),
        cmocka_unit_test_setup_teardown(test_quota_holds_before_sync, fast_path_on, fast_path_default),
        cmocka_unit_test_setup_teardown(test_fill_pool_without_syncing, fast_path_on,
                                        fast_path_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
