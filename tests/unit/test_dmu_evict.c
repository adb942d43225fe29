/*
 * The DMU keeps a bounded number of dnodes in memory: touching many thousands
 * of objects (creating them, writing them, reading them back) leaves at most
 * the limit plus what one txg dirtied resident (dmu_dnode_get_stats), evicts
 * something, and every object still reads back its own data and bonus -
 * from a reloaded dnode, across txgs, and after export/import.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_fixture.h"

#define LIMIT 1000
#define NOBJ 5000
#define BATCH 500
/* Dnodes one batch dirties (rounded up to whole dnode blocks) plus the MOS's. */
#define SLACK (BATCH + 2 * 32 + 200)

static void content(uint64_t obj, uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(obj * 31 + i * 7 + 1);
}

static uint64_t resident(void)
{
    dmu_dnode_stats_t st;
    dmu_dnode_get_stats(&st);
    return st.resident;
}

static void check_object(objset_t *os, uint64_t obj)
{
    uint8_t want[600], got[600];
    content(obj, want, sizeof(want));
    assert_int_equal(dmu_read(os, obj, 4096, sizeof(got), got), 0);
    assert_memory_equal(got, want, sizeof(want));
    uint32_t len = 0;
    uint64_t bonus = 0;
    assert_int_equal(dmu_bonus_read(os, obj, &bonus, sizeof(bonus), &len), 0);
    assert_int_equal(len, sizeof(bonus));
    assert_int_equal(bonus, obj ^ 0xabcdef);
}

static void test_dnodes_bounded(void **state)
{
    (void)state;
    dmu_dnode_set_limit(LIMIT);
    test_pool_t f;
    test_pool_make(&f, "dmu_evict", 512 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "many", NULL), 0);
    objset_t *os = NULL;
    assert_int_equal(dmu_objset_open(f.spa, "many", &os), 0);
    dmu_object_props_t p = {.recordsize = 4096, .compress = CAIRN_COMPRESS_LZ4,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t *objs = calloc(NOBJ, sizeof(*objs));
    uint64_t peak = 0;
    uint8_t data[600];
    for (int i = 0; i < NOBJ; i++) {
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_object_alloc(os, &p, &objs[i], tx), 0);
        content(objs[i], data, sizeof(data));
        assert_int_equal(dmu_write(os, objs[i], 4096, sizeof(data), data, tx), 0);
        uint64_t bonus = objs[i] ^ 0xabcdef;
        assert_int_equal(dmu_bonus_write(os, objs[i], &bonus, sizeof(bonus), tx), 0);
        dmu_tx_commit(tx);
        if ((i + 1) % BATCH == 0) {
            assert_int_equal(dmu_objset_sync(os), 0);
            uint64_t r = resident();
            if (r > peak) peak = r;
        }
    }
    dmu_dnode_stats_t st;
    dmu_dnode_get_stats(&st);
    fprintf(stderr, "after creating %d objects: peak %llu resident, %llu evicted\n", NOBJ,
            (unsigned long long)peak, (unsigned long long)st.evicted);
    assert_true(peak <= LIMIT + SLACK);
    assert_true(st.evicted >= NOBJ - LIMIT - SLACK);

    /* Every object reads back (most from reloaded dnodes); reads alone evict
     * nothing until a txg syncs, so a small write per batch moves txgs along. */
    for (int i = 0; i < NOBJ; i++) {
        check_object(os, objs[i]);
        if ((i + 1) % BATCH == 0) {
            dmu_tx_t *tx = dmu_tx_begin(os);
            assert_int_equal(dmu_write(os, objs[0], 0, 8, "tickTOCK", tx), 0);
            dmu_tx_commit(tx);
            assert_int_equal(dmu_objset_sync(os), 0);
            uint64_t r = resident();
            if (r > peak) peak = r;
        }
    }
    assert_true(peak <= LIMIT + SLACK);
    dmu_objset_close(os);

    test_pool_reimport(&f);
    assert_int_equal(dmu_objset_open(f.spa, "many", &os), 0);
    for (int i = 0; i < NOBJ; i += 7) check_object(os, objs[i]);
    dmu_object_info_t info;
    assert_int_equal(dmu_object_info(os, objs[NOBJ - 1], &info), 0);
    assert_int_equal(info.max_offset, 8192);
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
    free(objs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dnodes_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
