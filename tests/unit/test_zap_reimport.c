/*
 * A pool exported, changed elsewhere and imported again in the same process
 * must be read from disk: the ZAP layer's caches must not serve what this
 * process remembered from before. "Elsewhere" is simulated by putting back an
 * older copy of the pool's device while it is exported.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>
#include <cairn/zap.h>

#include <stdio.h>
#include <stdlib.h>

#include "pool_fixture.h"

static void copy_file(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp --sparse=always '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static void test_reimport_reads_disk_not_memory(void **state)
{
    (void)state;
    test_pool_t p;
    test_pool_make(&p, "reimport", 128 * CAIRN_MIB);
    spa_t *spa = p.spa;
    char saved[700];
    snprintf(saved, sizeof saved, "%s/leaf0.saved", p.dir);
    assert_int_equal(dmu_objset_create(spa, "os", NULL), 0);
    objset_t *os = NULL;
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    uint64_t z = 0;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(zap_create(os, &z, tx), 0);
    assert_int_equal(zap_add_u64(os, z, "old", 1, tx), 0);
    dmu_tx_commit(tx);
    dmu_objset_close(os);
    test_pool_export(&p);
    copy_file(p.path, saved); /* the pool as it was: "old" only */

    test_pool_import(&p, 0);
    spa = p.spa;
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    tx = dmu_tx_begin(os);
    for (int i = 0; i < 2000; i++) { /* enough to turn the micro ZAP into a fat one */
        char name[32];
        snprintf(name, sizeof name, "new%d", i);
        assert_int_equal(zap_add_u64(os, z, name, (uint64_t)i, tx), 0);
    }
    dmu_tx_commit(tx);
    dmu_objset_close(os);
    test_pool_export(&p);

    copy_file(saved, p.path); /* changed behind this process's back */
    test_pool_import(&p, 0);
    spa = p.spa;
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    uint64_t v = 0, count = 0;
    assert_int_equal(zap_lookup_u64(os, z, "old", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(zap_lookup_u64(os, z, "new7", &v), -ENOENT);
    assert_int_equal(zap_count(os, z, &count), 0);
    assert_int_equal(count, 1);
    dmu_objset_close(os);
    test_pool_check(&p);
    test_pool_remove(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reimport_reads_disk_not_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
