/*
 * The pool's configuration store (src/dsl/dsl_config.c): a batch of sets and
 * removes is one task (one config write, so one txg) and reads back after an
 * export and import; a batch with one bad key changes nothing; a lone remove of
 * a missing key still says -ENOENT. And the store's writes, like the history's,
 * leave the datasets alone: a held dataset's cached properties and its cached
 * space answer stay valid across them (dp->props_gen does not move), while a
 * property set still invalidates both.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/dsl/dsl_impl.h"

#include <errno.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "dsl_fixture.h"
#pragma GCC diagnostic pop

static void config_is(dsl_pool_t *dp, const char *key, const char *want)
{
    char buf[64];
    uint32_t len = 0;
    int rc = dsl_pool_config_get(dp, key, buf, sizeof buf, &len);
    if (!want) {
        assert_int_equal(rc, -ENOENT);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
}

static void test_batch(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslconfig");
    OK(dsl_pool_config_set(f.dp, "k.old", "gone soon", 9));
    uint64_t w0 = dsl_pool_config_writes(f.dp);
    dsl_config_change_t batch[] = {
        {.key = "k.a", .val = "alpha", .len = 5},
        {.key = "k.b", .val = "beta", .len = 4},
        {.key = "k.old"},
        {.key = "k.never-there"},
    };
    OK(dsl_pool_config_apply(f.dp, batch, 4));
    assert_int_equal(dsl_pool_config_writes(f.dp), w0 + 1);
    config_is(f.dp, "k.a", "alpha");
    config_is(f.dp, "k.b", "beta");
    config_is(f.dp, "k.old", NULL);

    char long_key[ZAP_NAME_MAX + 2];
    memset(long_key, 'x', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    dsl_config_change_t bad[] = {
        {.key = "k.a"},
        {.key = long_key, .val = "v", .len = 1},
    };
    assert_int_equal(dsl_pool_config_apply(f.dp, bad, 2), -ENAMETOOLONG);
    assert_int_equal(dsl_pool_config_writes(f.dp), w0 + 1);
    config_is(f.dp, "k.a", "alpha");
    assert_int_equal(dsl_pool_config_remove(f.dp, "k.never-there"), -ENOENT);
    OK(dsl_pool_config_apply(f.dp, NULL, 0));

    fx_reimport(&f);
    config_is(f.dp, "k.a", "alpha");
    config_is(f.dp, "k.b", "beta");
    config_is(f.dp, "k.old", NULL);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

/* Whether ds's cached properties and space answer are still the current ones. */
static bool caches_valid(dsl_dataset_t *ds)
{
    uint64_t gen = atomic_load(&ds->dp->props_gen);
    pthread_rwlock_rdlock(&ds->props_lock);
    bool props = ds->props.gen == gen;
    pthread_rwlock_unlock(&ds->props_lock);
    return props && atomic_load(&ds->fp_gen) == gen;
}

static void fill_caches(dsl_dataset_t *ds)
{
    dsl_dataset_props_t p;
    dsl_dataset_get_props(ds, &p);
    OK(dsl_dataset_check_space(ds, 4096));
    assert_true(caches_valid(ds));
}

static void test_records_keep_dataset_caches(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslconfigcache");
    char a[300];
    fx_ds_name(&f, a, sizeof a, "a");
    fx_create_fs(&f, a);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, a, &ds));
    fill_caches(ds);
    uint64_t gen = atomic_load(&f.dp->props_gen);

    OK(dsl_pool_config_set(f.dp, "nfs4.client:0001", "0a0b", 4));
    dsl_config_change_t batch[] = {
        {.key = "nfs4.client:0002", .val = "0c0d", .len = 4},
        {.key = "nfs4.client:0001"},
    };
    OK(dsl_pool_config_apply(f.dp, batch, 2));
    OK(dsl_pool_config_remove(f.dp, "nfs4.client:0002"));
    OK(dsl_history_log(f.dp, 1, "test record", NULL));
    assert_int_equal(atomic_load(&f.dp->props_gen), gen);
    assert_true(caches_valid(ds));

    /* A change of the dataset tree still throws the answers away. */
    OK(dsl_prop_set(f.dp, a, "recordsize", "16K", fx_err, sizeof fx_err));
    assert_true(atomic_load(&f.dp->props_gen) > gen);
    assert_false(caches_valid(ds));
    dsl_dataset_props_t p;
    dsl_dataset_get_props(ds, &p);
    assert_int_equal(p.recordsize, 16384);
    dsl_dataset_rele(ds);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_records_keep_dataset_caches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
