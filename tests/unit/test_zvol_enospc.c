/*
 * A thin volume larger than its pool, filled by writes that never wait for a
 * sync: they stop with ENOSPC near the pool's free space less its slop (never
 * past it), the txgs holding them sync, the pool is not suspended, unmapped
 * blocks give their space back to later writes, and the pool exports and
 * checks clean. (Before space checks counted unsynced data, such writes ran
 * ahead of the pool until a sync failed and suspended it.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zvol_fixture.h"

#include <cairn/dsl.h>

#include <errno.h>

#define MIB (1024ull * 1024)

static void test_fill_pool_through_volume(void **state)
{
    (void)state;
    dsl_init();
    zfix_t f;
    zfix_make(&f, "zvfull", 256 * MIB);
    dsl_pool_t *dp;
    assert_int_equal(dsl_pool_open(f.spa, &dp), 0);
    char err[256], vol[128];
    assert_int_equal(spa_prop_set(f.spa, "txg_timeout", "300", err, sizeof(err)), 0);
    snprintf(vol, sizeof(vol), "%s/vol", f.name);
    dsl_create_opts_t o = {.type = DSL_TYPE_VOLUME, .volsize = 1024 * MIB, .sparse = true};
    assert_int_equal(dsl_dataset_create(dp, vol, &o, err, sizeof(err)), 0);
    assert_int_equal(dsl_prop_set(dp, vol, "compression", "off", err, sizeof(err)), 0);
    zvol_t *zv;
    assert_int_equal(zvol_open(dp, vol, &zv), 0);
    spa_space_t ss;
    spa_get_space(f.spa, &ss);
    uint64_t slop = spa_slop(f.spa);
    uint8_t *b = malloc(MIB);
    uint64_t off = 0;
    int e = 0;
    for (; off < 1024 * MIB; off += MIB) {
        zfill(b, 3, off, MIB);
        if ((e = zvol_write(zv, off, MIB, b, 0))) break;
    }
    assert_int_equal(e, -ENOSPC);
    printf("pool free %llu MiB, slop %llu MiB: the volume took %llu MiB before ENOSPC\n",
           (unsigned long long)(ss.free / MIB), (unsigned long long)(slop / MIB),
           (unsigned long long)(off / MIB));
    assert_true(off <= ss.free - slop);
    assert_true(off + slop + 16 * MIB >= ss.free);
    /* The syncs of all that succeed: the pool is not suspended. */
    assert_int_equal(zvol_flush(zv), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    /* Unmapping the first half gives room for new writes past the old end. */
    assert_int_equal(zvol_unmap(zv, 0, off / 2, 0), 0);
    for (int i = 0; i < SPA_DEFER_TXGS + 2; i++) assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    for (uint64_t o2 = off; o2 < off + 32 * MIB; o2 += MIB) {
        zfill(b, 4, o2, MIB);
        assert_int_equal(zvol_write(zv, o2, MIB, b, ZVOL_WRITE_FUA), 0);
    }
    /* What the volume holds is what was written. */
    uint8_t *want = malloc(MIB);
    assert_int_equal(zvol_read(zv, off / 2, MIB, b), 0);
    zfill(want, 3, off / 2, MIB);
    assert_memory_equal(b, want, MIB);
    assert_int_equal(zvol_read(zv, off + 31 * MIB, MIB, b), 0);
    zfill(want, 4, off + 31 * MIB, MIB);
    assert_memory_equal(b, want, MIB);
    free(want);
    free(b);
    zvol_close(zv);
    dsl_pool_close(dp);
    zfix_done(&f); /* exports and runs the offline check */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_pool_through_volume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
