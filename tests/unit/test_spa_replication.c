/*
 * The redundancy rules of `pool add` (src/spa/spa_replication.c): which new
 * top-level vdevs match a pool's, and what the refusal says.
 */
#include <cairn/spa.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static const spa_replication_t DISK = {VDEV_TYPE_LEAF, 0, 1};
static const spa_replication_t MIRROR2 = {VDEV_TYPE_MIRROR, 0, 2};
static const spa_replication_t MIRROR3 = {VDEV_TYPE_MIRROR, 0, 3};
static const spa_replication_t RAIDZ1_4 = {VDEV_TYPE_RAIDZ, 1, 4};
static const spa_replication_t RAIDZ1_5 = {VDEV_TYPE_RAIDZ, 1, 5};
static const spa_replication_t RAIDZ2_4 = {VDEV_TYPE_RAIDZ, 2, 4};

static char g_err[256];

static int check(const spa_replication_t *pool, size_t npool, const spa_replication_t *add,
                 size_t nadd)
{
    g_err[0] = 0;
    return spa_replication_check(pool, npool, add, nadd, g_err, sizeof g_err);
}

static void test_same_kind_accepted(void **state)
{
    (void)state;
    assert_int_equal(check(&DISK, 1, &DISK, 1), 0);
    assert_int_equal(check(&MIRROR2, 1, &MIRROR2, 1), 0);
    const spa_replication_t two[] = {RAIDZ2_4, RAIDZ2_4};
    assert_int_equal(check(two, 2, two, 2), 0);
    assert_string_equal(g_err, "");
}

static void test_kind_mismatch(void **state)
{
    (void)state;
    assert_int_equal(check(&MIRROR2, 1, &DISK, 1), -EINVAL);
    assert_string_equal(g_err, "mismatched replication level: pool uses a 2-way mirror and new "
                               "vdev is a single disk (use -f to add it anyway)");
    assert_int_equal(check(&DISK, 1, &MIRROR2, 1), -EINVAL);
    assert_int_equal(check(&MIRROR2, 1, &RAIDZ1_4, 1), -EINVAL);
    assert_non_null(strstr(g_err, "pool uses a 2-way mirror and new vdev is a 4-wide raidz1"));
}

static void test_parity_and_width_mismatch(void **state)
{
    (void)state;
    assert_int_equal(check(&RAIDZ2_4, 1, &RAIDZ1_4, 1), -EINVAL);
    assert_non_null(strstr(g_err, "pool uses a 4-wide raidz2 and new vdev is a 4-wide raidz1"));
    assert_int_equal(check(&RAIDZ1_4, 1, &RAIDZ1_5, 1), -EINVAL);
    assert_int_equal(check(&MIRROR2, 1, &MIRROR3, 1), -EINVAL);
    assert_non_null(strstr(g_err, "a 3-way mirror"));
}

/* A pool already mixed (an earlier -f): every one of its vdevs is compared. */
static void test_mixed_pool_compares_all(void **state)
{
    (void)state;
    const spa_replication_t mixed[] = {MIRROR2, MIRROR3};
    assert_int_equal(check(mixed, 2, &MIRROR2, 1), -EINVAL);
    assert_non_null(strstr(g_err, "pool uses a 3-way mirror and new vdev is a 2-way mirror"));
}

/* New vdevs must agree among themselves too, whatever the pool has. */
static void test_new_vdevs_agree(void **state)
{
    (void)state;
    const spa_replication_t add[] = {MIRROR2, RAIDZ1_4};
    assert_int_equal(check(NULL, 0, add, 2), -EINVAL);
    assert_non_null(strstr(g_err, "new vdevs are both a 2-way mirror and a 4-wide raidz1"));
    const spa_replication_t same[] = {MIRROR2, MIRROR2};
    assert_int_equal(check(&MIRROR2, 1, same, 2), 0);
}

static void test_describe(void **state)
{
    (void)state;
    char b[64];
    spa_replication_describe(&DISK, b, sizeof b);
    assert_string_equal(b, "a single disk");
    spa_replication_describe(&RAIDZ2_4, b, sizeof b);
    assert_string_equal(b, "a 4-wide raidz2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_kind_accepted),
        cmocka_unit_test(test_kind_mismatch),
        cmocka_unit_test(test_parity_and_width_mismatch),
        cmocka_unit_test(test_mixed_pool_compares_all),
        cmocka_unit_test(test_new_vdevs_agree),
        cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
