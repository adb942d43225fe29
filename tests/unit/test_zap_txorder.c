/*
 * Changes to one object must land in txgs in the order they are made: a
 * transaction that began before a txg boundary but changes a ZAP after a
 * newer transaction did must not put that newer state into the older txg
 * (a crash between the two txgs would then expose half of the newer
 * transaction). Transactions join a txg at their first change, under the
 * caller's locks; this pins that behaviour.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>
#include <cairn/zap.h>

#include <unistd.h>

#include "pool_fixture.h"

static void test_late_transaction_joins_a_newer_txg(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "txorder", 128 * CAIRN_MIB);
    spa_t *spa = p.spa;
    assert_int_equal(dmu_objset_create(spa, "os", NULL), 0);
    objset_t *os = NULL;
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    uint64_t z = 0;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(zap_create(os, &z, tx), 0);
    dmu_tx_commit(tx);

    dmu_tx_t *early = dmu_tx_begin(os); /* begun first ... */
    uint64_t t0 = spa_open_txg(spa);
    spa_txg_kick(spa);                  /* ... a txg boundary passes ... */
    for (int i = 0; i < 10000 && spa_open_txg(spa) == t0; i++) usleep(1000);
    assert_true(spa_open_txg(spa) > t0);
    dmu_tx_t *late = dmu_tx_begin(os);
    assert_int_equal(zap_add_u64(os, z, "b", 2, late), 0); /* ... a newer change lands ... */
    uint64_t late_txg = dmu_tx_txg(late);
    dmu_tx_commit(late);
    assert_int_equal(zap_add_u64(os, z, "a", 1, early), 0); /* ... then the early one changes */
    uint64_t early_txg = dmu_tx_txg(early);
    dmu_tx_commit(early);
    assert_true(early_txg >= late_txg);

    assert_int_equal(dmu_objset_sync(os), 0);
    uint64_t v = 0;
    assert_int_equal(zap_lookup_u64(os, z, "a", &v), 0);
    assert_int_equal(v, 1);
    dmu_objset_close(os);
    test_pool_check(&p);
    test_pool_remove(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_transaction_joins_a_newer_txg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
