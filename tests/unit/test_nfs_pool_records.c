/*
 * The NFS server's client records kept in a pool (src/nfs/nfs_pool_records.c),
 * which a partner head reads after a takeover: a stored set reads back as
 * stored, after the pool was exported and imported again too; storing another
 * set removes what it lacks and keeps what it shares; prefixes do not see
 * each other's entries; a value longer than a key is kept whole; the pool
 * list knows each pool once and forgets one or all.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_srv.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "dsl_fixture.h"
#pragma GCC diagnostic pop

/* Whether r holds s. */
static bool holds(const nfs_pool_records_t *r, const char *s)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i], s)) return true;
    return false;
}

static void expect_set(dsl_pool_t *dp, const char *prefix, const char *const *want, size_t n)
{
    nfs_pool_records_t r;
    nfs_pool_records_load(dp, prefix, &r);
    assert_int_equal(r.n, n);
    for (size_t i = 0; i < n; i++) assert_true(holds(&r, want[i]));
    nfs_pool_records_free(&r);
}

static void test_store_load(void **state)
{
    (void)state;
    fx_t f;
    fx_make(&f, "nfs_pool_records");
    char long_owner[2049];
    memset(long_owner, 'f', sizeof long_owner - 1);
    long_owner[sizeof long_owner - 1] = '\0';
    char *first[] = {"0a0b", "host-a 10.0.0.1", long_owner, NULL};
    assert_int_equal(nfs_pool_records_store(f.dp, "nfs4.client:", first, 4), 0);
    expect_set(f.dp, "nfs4.client:", (const char *const *)first, 3);
    expect_set(f.dp, "nlm.host:", NULL, 0);

    char *hosts[] = {"client-a 127.0.0.1"};
    assert_int_equal(nfs_pool_records_store(f.dp, "nlm.host:", hosts, 1), 0);
    char *second[] = {"host-a 10.0.0.1", "0c0d"};
    assert_int_equal(nfs_pool_records_store(f.dp, "nfs4.client:", second, 2), 0);
    expect_set(f.dp, "nfs4.client:", (const char *const *)second, 2);
    expect_set(f.dp, "nlm.host:", (const char *const *)hosts, 1);

    fx_reimport(&f);
    expect_set(f.dp, "nfs4.client:", (const char *const *)second, 2);
    expect_set(f.dp, "nlm.host:", (const char *const *)hosts, 1);
    assert_int_equal(nfs_pool_records_store(f.dp, "nfs4.client:", NULL, 0), 0);
    expect_set(f.dp, "nfs4.client:", NULL, 0);
    expect_set(f.dp, "nlm.host:", (const char *const *)hosts, 1);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

static void test_pool_list(void **state)
{
    (void)state;
    nfs_pool_list_t l = {0};
    dsl_pool_t *a = (dsl_pool_t *)&l, *b = (dsl_pool_t *)&a;   /* never dereferenced */
    assert_true(nfs_pool_list_add(&l, a));
    assert_false(nfs_pool_list_add(&l, a));
    assert_true(nfs_pool_list_add(&l, b));
    assert_int_equal(l.n, 2);
    nfs_pool_list_remove(&l, a);
    assert_int_equal(l.n, 1);
    assert_ptr_equal(l.v[0], b);
    assert_true(nfs_pool_list_add(&l, a));
    nfs_pool_list_remove(&l, NULL);
    assert_int_equal(l.n, 0);
    nfs_pool_list_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_load),
        cmocka_unit_test(test_pool_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
