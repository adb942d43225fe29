/*
 * Claiming a given object number (what intent-log replay does to recreate a
 * file or directory under the number its handles name): dmu_object_claim()
 * and zap_create_claim() on a real pool.
 *   - a free number is claimed, used, and kept across export/import;
 *   - a number in use is -EEXIST and left alone;
 *   - a number freed in a txg not yet synced is -EBUSY (its earlier life is
 *     still being written out), and claimable once that txg synced;
 *   - normal allocation never hands out a claimed number;
 *   - a claimed ZAP works as a directory and survives a reimport.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>
#include <cairn/zap.h>

#include <errno.h>
#include <string.h>

#include "pool_fixture.h"

static const dmu_object_props_t props = {.recordsize = 4096, .compress = CAIRN_COMPRESS_OFF,
                                         .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};

static void test_object_claim(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "dmu_claim", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(p.spa, "fs", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);

    /* A number far past anything allocated, and one in use. */
    dmu_tx_t *tx = dmu_tx_begin(os);
    uint64_t used;
    assert_int_equal(dmu_object_alloc(os, &props, &used, tx), 0);
    assert_int_equal(dmu_object_claim(os, 1000, &props, tx), 0);
    assert_int_equal(dmu_object_claim(os, 1000, &props, tx), -EEXIST);
    assert_int_equal(dmu_object_claim(os, used, &props, tx), -EEXIST);
    assert_int_equal(dmu_object_claim(os, 0, &props, tx), -EINVAL);
    assert_int_equal(dmu_write(os, 1000, 0, 5, "hello", tx), 0);
    dmu_tx_commit(tx);

    /* Freed in an unsynced txg: busy until that txg is written out. */
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_free(os, used, tx), 0);
    assert_int_equal(dmu_object_claim(os, used, &props, tx), -EBUSY);
    dmu_tx_commit(tx);
    assert_int_equal(spa_txg_wait_synced(p.spa, 0), 0);
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_claim(os, used, &props, tx), 0);
    /* Allocation goes round the claimed numbers. */
    for (int i = 0; i < 40; i++) {
        uint64_t o;
        assert_int_equal(dmu_object_alloc(os, &props, &o, tx), 0);
        assert_true(o != used && o != 1000);
    }
    dmu_tx_commit(tx);

    dmu_objset_close(os);
    test_pool_reimport(&p);
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);
    char buf[6] = "";
    assert_int_equal(dmu_read(os, 1000, 0, 5, buf), 0);
    assert_string_equal(buf, "hello");
    dmu_object_info_t oi;
    assert_int_equal(dmu_object_info(os, used, &oi), 0);
    assert_int_equal(oi.props.recordsize, 4096);
    dmu_objset_close(os);
    test_pool_check(&p);
    test_pool_remove(&p);
}

static void test_zap_claim(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "zap_claim", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(p.spa, "fs", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);
    dmu_tx_t *tx = dmu_tx_begin(os);
    uint64_t z;
    assert_int_equal(zap_create(os, &z, tx), 0);
    assert_int_equal(zap_create_claim(os, z, tx), -EEXIST);
    assert_int_equal(zap_create_claim(os, 777, tx), 0);
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof name, "entry-%d", i);
        assert_int_equal(zap_add_u64(os, 777, name, (uint64_t)i * 3, tx), 0);
    }
    dmu_tx_commit(tx);
    /* Destroyed and claimed again (after the sync that frees it): an empty ZAP. */
    tx = dmu_tx_begin(os);
    assert_int_equal(zap_destroy(os, z, tx), 0);
    assert_int_equal(zap_create_claim(os, z, tx), -EBUSY);
    dmu_tx_commit(tx);
    assert_int_equal(spa_txg_wait_synced(p.spa, 0), 0);
    tx = dmu_tx_begin(os);
    assert_int_equal(zap_create_claim(os, z, tx), 0);
    assert_int_equal(zap_add_u64(os, z, "again", 1, tx), 0);
    dmu_tx_commit(tx);

    dmu_objset_close(os);
    test_pool_reimport(&p);
    assert_int_equal(dmu_objset_open(p.spa, "fs", &os), 0);
    for (int i = 0; i < 300; i += 37) {
        char name[32];
        snprintf(name, sizeof name, "entry-%d", i);
        uint64_t v = 0;
        assert_int_equal(zap_lookup_u64(os, 777, name, &v), 0);
        assert_int_equal(v, (uint64_t)i * 3);
    }
    uint64_t v = 0;
    assert_int_equal(zap_lookup_u64(os, z, "again", &v), 0);
    assert_int_equal(v, 1);
    dmu_objset_close(os);
    test_pool_check(&p);
    test_pool_remove(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_object_claim),
        cmocka_unit_test(test_zap_claim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
