/*
 * DSL dataset tests on a real pool: the hierarchy (create with and without
 * -p, list order, rename, destroy with and without -r, error cases), holds,
 * properties (set, get, inherit, SOURCE and inherited_from, user properties,
 * refusal of unknown, unimplemented and bad values, mountpoint inheritance),
 * everything again after export/import, and the check-only destroy, rename
 * and rollback (the operation's refusals and words, holds aside, nothing changed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dsl.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsl_fixture.h"

typedef struct names {
    char v[64][DSL_NAME_MAX + 1];
    int n;
} names_t;

static void collect(const dsl_dataset_info_t *info, void *arg)
{
    names_t *nm = arg;
    if (nm->n < 64) cairn_strlcpy(nm->v[nm->n++], info->name, DSL_NAME_MAX + 1);
}

static void list_all(fx_t *f, names_t *nm)
{
    memset(nm, 0, sizeof(*nm));
    OK(dsl_dataset_list(f->dp, NULL, true, 0, collect, nm, fx_err, sizeof(fx_err)));
}

static bool listed(const names_t *nm, const char *n)
{
    for (int i = 0; i < nm->n; i++)
        if (!strcmp(nm->v[i], n)) return true;
    return false;
}

static void test_hierarchy(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslds");
    char a[300], ab[300], abc[300], x[300], y[400];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_ds_name(&f, ab, sizeof(ab), "a/b");
    fx_ds_name(&f, abc, sizeof(abc), "a/b/c");
    names_t nm;
    list_all(&f, &nm);
    assert_int_equal(nm.n, 1);
    assert_string_equal(nm.v[0], f.name);

    /* Without -p a missing parent is an error; with -p the chain appears. */
    dsl_create_opts_t o = {.type = DSL_TYPE_FILESYSTEM};
    char err[256] = "";
    assert_int_equal(dsl_dataset_create(f.dp, abc, &o, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "parent"));
    o.create_parents = true;
    OK(dsl_dataset_create(f.dp, abc, &o, fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_create(f.dp, abc, &o, err, sizeof(err)), -EEXIST);
    assert_int_equal(dsl_dataset_create(f.dp, "bad//name", &o, err, sizeof(err)), -EINVAL);
    assert_int_equal(dsl_dataset_create(f.dp, "otherpool/x", &o, err, sizeof(err)), -ENOENT);
    list_all(&f, &nm);
    assert_int_equal(nm.n, 4);
    assert_string_equal(nm.v[1], a);
    assert_string_equal(nm.v[2], ab);
    assert_string_equal(nm.v[3], abc);

    /* A volume under a filesystem; nothing can be created below a volume. */
    fx_ds_name(&f, x, sizeof(x), "vol");
    dsl_create_opts_t vo = {.type = DSL_TYPE_VOLUME, .volsize = 64 * CAIRN_MIB};
    OK(dsl_dataset_create(f.dp, x, &vo, fx_err, sizeof(fx_err)));
    snprintf(y, sizeof(y), "%s/under", x);
    o.create_parents = false;
    assert_int_equal(dsl_dataset_create(f.dp, y, &o, err, sizeof(err)), -ENOTDIR);
    vo.volsize = 1000; /* not a multiple of 8K */
    fx_ds_name(&f, y, sizeof(y), "vol2");
    assert_int_equal(dsl_dataset_create(f.dp, y, &vo, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "volsize"));
    /* Non-sparse volume reserves its size. */
    assert_int_equal(fx_num(&f, x, "refreservation"), 64 * CAIRN_MIB);
    assert_int_equal(fx_num(&f, x, "volblocksize"), 8192);

    /* Destroy: children need -r; the root never goes. */
    assert_int_equal(dsl_dataset_destroy(f.dp, a, false, false, err, sizeof(err)), -EEXIST);
    assert_int_equal(dsl_dataset_destroy(f.dp, f.name, true, false, err, sizeof(err)), -EBUSY);
    assert_int_equal(dsl_dataset_destroy(f.dp, y, false, false, err, sizeof(err)), -ENOENT);

    /* Rename moves a subtree; not across pools, not below itself. */
    fx_ds_name(&f, y, sizeof(y), "z");
    OK(dsl_dataset_rename(f.dp, a, y, fx_err, sizeof(fx_err)));
    char zbc[300];
    fx_ds_name(&f, zbc, sizeof(zbc), "z/b/c");
    list_all(&f, &nm);
    assert_true(listed(&nm, zbc));
    assert_false(listed(&nm, abc));
    assert_int_equal(dsl_dataset_rename(f.dp, y, "elsewhere/z", err, sizeof(err)), -EXDEV);
    assert_int_equal(dsl_dataset_rename(f.dp, y, zbc, err, sizeof(err)), -EEXIST);
    char below[300];
    fx_ds_name(&f, below, sizeof(below), "z/b/c/d");
    assert_int_equal(dsl_dataset_rename(f.dp, y, below, err, sizeof(err)), -EINVAL);

    /* Holds: by name and guid; a held dataset cannot be destroyed. */
    dsl_dataset_t *ds, *ds2;
    OK(dsl_dataset_hold(f.dp, zbc, &ds));
    assert_int_equal(dsl_dataset_type(ds), DSL_TYPE_FILESYSTEM);
    assert_false(dsl_dataset_is_snapshot(ds));
    assert_non_null(dsl_dataset_objset(ds));
    uint64_t guid = dsl_dataset_guid(ds);
    assert_int_not_equal(guid, 0);
    OK(dsl_dataset_hold_by_guid(f.dp, guid, &ds2));
    assert_string_equal(dsl_dataset_name(ds2), zbc);
    assert_int_equal(dsl_dataset_destroy(f.dp, zbc, false, false, err, sizeof(err)), -EBUSY);
    dsl_dataset_rele(ds2);
    dsl_dataset_rele(ds);

    /* Survives export/import: names, types, guid. */
    fx_reimport(&f);
    list_all(&f, &nm);
    assert_int_equal(nm.n, 5);
    assert_true(listed(&nm, zbc));
    assert_true(listed(&nm, x));
    OK(dsl_dataset_hold_by_guid(f.dp, guid, &ds));
    assert_string_equal(dsl_dataset_name(ds), zbc);
    dsl_dataset_rele(ds);
    assert_int_equal(fx_num(&f, x, "volsize"), 64 * CAIRN_MIB);

    OK(dsl_dataset_destroy(f.dp, y, true, false, fx_err, sizeof(fx_err)));
    OK(dsl_dataset_destroy(f.dp, x, false, false, fx_err, sizeof(fx_err)));
    list_all(&f, &nm);
    assert_int_equal(nm.n, 1);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

static void test_properties(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslprop");
    char a[300], ab[300];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_ds_name(&f, ab, sizeof(ab), "a/b");
    fx_create_fs(&f, a);
    fx_create_fs(&f, ab);
    dsl_prop_t p;
    char err[256];

    /* Defaults. */
    OK(dsl_prop_get(f.dp, ab, "recordsize", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.numeric, 128 * 1024);
    assert_int_equal(p.source, DSL_SRC_DEFAULT);
    OK(dsl_prop_get(f.dp, ab, "compression", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, "lz4");
    OK(dsl_prop_get(f.dp, ab, "mountpoint", &p, fx_err, sizeof(fx_err)));
    char mp[400];
    snprintf(mp, sizeof(mp), "/%s", ab);
    assert_string_equal(p.value, mp);

    /* Local on a, inherited by b with inherited_from. */
    OK(dsl_prop_set(f.dp, a, "recordsize", "16K", fx_err, sizeof(fx_err)));
    OK(dsl_prop_set(f.dp, a, "compression", "gzip-5", fx_err, sizeof(fx_err)));
    OK(dsl_prop_set(f.dp, a, "mountpoint", "/export/data", fx_err, sizeof(fx_err)));
    OK(dsl_prop_set(f.dp, a, "acme:owner", "alice", fx_err, sizeof(fx_err)));
    OK(dsl_prop_set(f.dp, a, "quota", "1G", fx_err, sizeof(fx_err)));
    OK(dsl_prop_get(f.dp, ab, "recordsize", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.numeric, 16384);
    assert_int_equal(p.source, DSL_SRC_INHERITED);
    assert_string_equal(p.inherited_from, a);
    OK(dsl_prop_get(f.dp, a, "recordsize", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.source, DSL_SRC_LOCAL);
    OK(dsl_prop_get(f.dp, ab, "mountpoint", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, "/export/data/b");
    OK(dsl_prop_get(f.dp, ab, "acme:owner", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, "alice");
    assert_int_equal(p.source, DSL_SRC_INHERITED);
    /* quota does not inherit. */
    OK(dsl_prop_get(f.dp, ab, "quota", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.source, DSL_SRC_DEFAULT);
    assert_string_equal(p.value, "none");
    assert_int_equal(fx_num(&f, a, "quota"), CAIRN_GIB);

    /* The data path's view. */
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, ab, &ds));
    dsl_dataset_props_t dpv;
    dsl_dataset_get_props(ds, &dpv);
    assert_int_equal(dpv.recordsize, 16384);
    assert_int_equal(dpv.compress, CAIRN_COMPRESS_GZIP(5));
    assert_int_equal(dpv.checksum, CAIRN_CHECKSUM_FLETCHER4);
    assert_int_equal(dpv.copies, 1);
    assert_true(dpv.atime);
    assert_false(dpv.readonly);
    assert_string_equal(dpv.mountpoint, "/export/data/b");
    dsl_dataset_rele(ds);

    /* Refusals, each with a message naming the property. */
    struct { const char *prop, *val; int e; } bad[] = {
        {"recordsize", "3000", -EINVAL}, {"recordsize", "2M", -EINVAL},
        {"compression", "zstd", -EINVAL}, {"checksum", "md5", -EINVAL},
        {"copies", "4", -EINVAL}, {"atime", "maybe", -EINVAL},
        {"sync", "sometimes", -EINVAL}, {"quota", "lots", -EINVAL},
        {"mountpoint", "relative/path", -EINVAL}, {"dedup", "on", -ENOTSUP},
        {"used", "5", -EINVAL}, {"nosuchprop", "1", -EINVAL},
        {"volblocksize", "8K", -EINVAL}, {"volsize", "1G", -EINVAL},
        {"Bad:Name", "x", -EINVAL},
    };
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(bad); i++) {
        err[0] = 0;
        int e = dsl_prop_set(f.dp, ab, bad[i].prop, bad[i].val, err, sizeof(err));
        if (e != bad[i].e) fprintf(stderr, "%s=%s gave %d (%s)\n", bad[i].prop, bad[i].val, e, err);
        assert_int_equal(e, bad[i].e);
        assert_true(strlen(err) > 0);
        if (strcmp(bad[i].prop, "Bad:Name") != 0) assert_non_null(strstr(err, bad[i].prop));
    }
    assert_int_equal(dsl_prop_get(f.dp, ab, "dedup", &p, err, sizeof(err)), -ENOTSUP);
    assert_non_null(strstr(err, "not implemented"));

    /* Statistics are read-only and have no source. */
    OK(dsl_prop_get(f.dp, ab, "type", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, "filesystem");
    assert_int_equal(p.source, DSL_SRC_NONE);

    /* Survives export/import; inherit removes the local value. */
    fx_reimport(&f);
    OK(dsl_prop_get(f.dp, ab, "recordsize", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.numeric, 16384);
    assert_int_equal(p.source, DSL_SRC_INHERITED);
    OK(dsl_prop_get(f.dp, ab, "acme:owner", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, "alice");
    OK(dsl_prop_set(f.dp, ab, "recordsize", "1M", fx_err, sizeof(fx_err)));
    assert_int_equal(fx_num(&f, ab, "recordsize"), 1024 * 1024);
    OK(dsl_prop_inherit(f.dp, ab, "recordsize", fx_err, sizeof(fx_err)));
    assert_int_equal(fx_num(&f, ab, "recordsize"), 16384);
    OK(dsl_prop_inherit(f.dp, a, "recordsize", fx_err, sizeof(fx_err)));
    OK(dsl_prop_get(f.dp, ab, "recordsize", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.numeric, 128 * 1024);
    assert_int_equal(p.source, DSL_SRC_DEFAULT);
    OK(dsl_prop_inherit(f.dp, a, "acme:owner", fx_err, sizeof(fx_err)));
    OK(dsl_prop_get(f.dp, ab, "acme:owner", &p, fx_err, sizeof(fx_err)));
    assert_string_equal(p.value, "-");
    fx_reimport(&f);
    OK(dsl_prop_get(f.dp, ab, "recordsize", &p, fx_err, sizeof(fx_err)));
    assert_int_equal(p.source, DSL_SRC_DEFAULT);
    assert_string_equal(dsl_prop_names()[0], "type");
    fx_destroy(&f);
}

typedef struct all_ctx {
    int native, user;
    bool saw_used, saw_user;
} all_ctx_t;

static void all_cb(const dsl_prop_t *p, void *arg)
{
    all_ctx_t *c = arg;
    if (strchr(p->name, ':')) {
        c->user++;
        if (!strcmp(p->name, "acme:tag") && !strcmp(p->value, "blue")) c->saw_user = true;
    } else {
        c->native++;
        if (!strcmp(p->name, "used")) c->saw_used = true;
    }
}

static void test_get_all(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslall");
    char a[300];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_create_fs(&f, a);
    OK(dsl_prop_set(f.dp, f.name, "acme:tag", "blue", fx_err, sizeof(fx_err)));
    all_ctx_t c = {0};
    OK(dsl_prop_get_all(f.dp, a, all_cb, &c, fx_err, sizeof(fx_err)));
    assert_true(c.saw_used);
    assert_true(c.saw_user);
    assert_int_equal(c.user, 1);
    assert_true(c.native > 20);
    fx_destroy(&f);
}

/* The check refuses as the operation does (code and words) and changes nothing. */
#define SAME_REFUSAL(check, op, want)                                                      \
    do {                                                                                   \
        char e1[256] = "", e2[256] = "";                                                   \
        names_t before, after;                                                             \
        list_all(&f, &before);                                                             \
        assert_int_equal(check, want);                                                     \
        list_all(&f, &after);                                                              \
        assert_memory_equal(&before, &after, sizeof before);                               \
        assert_int_equal(op, want);                                                        \
        assert_string_equal(e1, e2);                                                       \
        assert_true(e1[0] != 0);                                                           \
    } while (0)

static void test_checks(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslck");
    char a[300], ab[300], s1[310], s2[310], z[300], below[300], nopar[300];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_ds_name(&f, ab, sizeof(ab), "a/b");
    fx_ds_name(&f, z, sizeof(z), "z");
    fx_ds_name(&f, below, sizeof(below), "a/b/x");
    fx_ds_name(&f, nopar, sizeof(nopar), "none/x");
    snprintf(s1, sizeof(s1), "%s@s1", a);
    snprintf(s2, sizeof(s2), "%s@s2", a);
    fx_create_fs(&f, a);
    fx_create_fs(&f, ab);
    OK(dsl_snapshot(f.dp, s1, false, fx_err, sizeof(fx_err)));
    OK(dsl_snapshot(f.dp, s2, false, fx_err, sizeof(fx_err)));

    SAME_REFUSAL(dsl_dataset_destroy_check(f.dp, a, false, e1, sizeof e1),
                 dsl_dataset_destroy(f.dp, a, false, false, e2, sizeof e2), -EEXIST);
    SAME_REFUSAL(dsl_dataset_destroy_check(f.dp, f.name, true, e1, sizeof e1),
                 dsl_dataset_destroy(f.dp, f.name, true, false, e2, sizeof e2), -EBUSY);
    SAME_REFUSAL(dsl_dataset_destroy_check(f.dp, nopar, false, e1, sizeof e1),
                 dsl_dataset_destroy(f.dp, nopar, false, false, e2, sizeof e2), -ENOENT);
    SAME_REFUSAL(dsl_dataset_rename_check(f.dp, a, below, e1, sizeof e1),
                 dsl_dataset_rename(f.dp, a, below, e2, sizeof e2), -EINVAL);
    SAME_REFUSAL(dsl_dataset_rename_check(f.dp, a, ab, e1, sizeof e1),
                 dsl_dataset_rename(f.dp, a, ab, e2, sizeof e2), -EEXIST);
    SAME_REFUSAL(dsl_dataset_rename_check(f.dp, a, nopar, e1, sizeof e1),
                 dsl_dataset_rename(f.dp, a, nopar, e2, sizeof e2), -ENOENT);
    SAME_REFUSAL(dsl_rollback_check(f.dp, s1, false, e1, sizeof e1),
                 dsl_rollback(f.dp, s1, false, e2, sizeof e2), -EEXIST);

    /* Holds are the caller's to release: the check passes over them, the operation
     * does not; what the check accepts it leaves as it was. */
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, ab, &ds));
    OK(dsl_dataset_destroy_check(f.dp, ab, false, fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_destroy(f.dp, ab, false, false, fx_err, sizeof(fx_err)), -EBUSY);
    dsl_dataset_rele(ds);
    OK(dsl_dataset_hold(f.dp, a, &ds));
    OK(dsl_rollback_check(f.dp, s2, false, fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_rollback(f.dp, s2, false, fx_err, sizeof(fx_err)), -EBUSY);
    dsl_dataset_rele(ds);
    names_t before, after;
    list_all(&f, &before);
    OK(dsl_dataset_rename_check(f.dp, a, z, fx_err, sizeof(fx_err)));
    OK(dsl_dataset_destroy_check(f.dp, a, true, fx_err, sizeof(fx_err)));
    list_all(&f, &after);
    assert_memory_equal(&before, &after, sizeof before);
    assert_true(listed(&after, ab));

    OK(dsl_dataset_rename(f.dp, a, z, fx_err, sizeof(fx_err)));
    OK(dsl_dataset_destroy(f.dp, z, true, false, fx_err, sizeof(fx_err)));
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hierarchy),
        cmocka_unit_test(test_properties),
        cmocka_unit_test(test_get_all),
        cmocka_unit_test(test_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
