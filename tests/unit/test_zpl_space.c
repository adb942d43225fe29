/*
 * The ZPL's NFSv4.2 calls: extended attributes (create/replace rules, listing
 * by cookie, persistence across export/import, a snapshot keeping the values
 * it saw, and no attribute object outliving its node: removed, removed while
 * open, or a directory), and holes (zpl_seek, zpl_deallocate, zpl_allocate,
 * zpl_copy_range keeping the source's holes). Each test ends with the pool's
 * offline check, whose space accounting must be exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <cairn/dmu.h>

#include "test_zpl_fixture.h"
#include "../../src/zpl/zpl_impl.h"

static void count_cb(uint64_t obj, void *arg)
{
    (void)obj;
    (*(uint64_t *)arg)++;
}

static uint64_t objects(zfix_t *f)
{
    uint64_t n = 0;
    assert_int_equal(dmu_object_list(f->fs->os, count_cb, &n), 0);
    return n;
}

static void expect_xattr(zpl_node_t *n, const char *name, const char *want)
{
    char buf[64] = "";
    size_t len = 0;
    assert_int_equal(zpl_getxattr(n, name, buf, sizeof buf, &len), 0);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(buf, want, len);
}

static void set(zpl_node_t *n, const char *name, const char *val, zpl_xattr_how_t how, int want)
{
    assert_int_equal(zpl_setxattr(n, name, val, strlen(val), how, NULL), want);
}

typedef struct seen {
    int n;
    char names[4][32];
    uint64_t cookie;
    int stop_after;
} seen_t;

static int list_cb(void *arg, const char *name, uint64_t cookie)
{
    seen_t *s = arg;
    if (s->n == s->stop_after) return 1;
    cairn_strlcpy(s->names[s->n++], name, 32);
    s->cookie = cookie;
    return 0;
}

static void test_xattr_rules_and_persistence(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplxattr", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    char buf[16];
    size_t len = 0;
    assert_int_equal(zpl_getxattr(a, "k", buf, sizeof buf, &len), -ENODATA);
    set(a, "k", "v1", ZPL_XATTR_REPLACE, -ENODATA);
    uint64_t change = zfix_attr(a).change;
    set(a, "k", "v1", ZPL_XATTR_CREATE, 0);
    assert_true(zfix_attr(a).change > change);
    set(a, "k", "v2", ZPL_XATTR_CREATE, -EEXIST);
    set(a, "k", "v2", ZPL_XATTR_REPLACE, 0);
    set(a, "j", "other", ZPL_XATTR_EITHER, 0);
    expect_xattr(a, "k", "v2");
    assert_int_equal(zpl_getxattr(a, "j", buf, 2, &len), -ERANGE);
    assert_int_equal(len, 5);
    char big[ZAP_VALUE_MAX + 1];
    memset(big, 'x', sizeof big);
    assert_int_equal(zpl_setxattr(a, "big", big, sizeof big, ZPL_XATTR_EITHER, NULL), -E2BIG);
    assert_int_equal(zpl_setxattr(a, "", "v", 1, ZPL_XATTR_EITHER, NULL), -EINVAL);

    /* Listing, whole and resumed by cookie. */
    seen_t s = {.stop_after = 4};
    bool eof = false;
    assert_int_equal(zpl_listxattr(a, 0, list_cb, &s, &eof), 0);
    assert_true(eof);
    assert_int_equal(s.n, 2);
    seen_t one = {.stop_after = 1}, rest = {.stop_after = 4};
    assert_int_equal(zpl_listxattr(a, 0, list_cb, &one, &eof), 0);
    assert_false(eof);
    assert_int_equal(zpl_listxattr(a, one.cookie, list_cb, &rest, &eof), 0);
    assert_true(eof);
    assert_int_equal(rest.n, 1);
    assert_string_not_equal(one.names[0], rest.names[0]);

    /* A snapshot keeps the values it saw. */
    char snap[200], err[256];
    snprintf(snap, sizeof snap, "%s@s", f.fsname);
    assert_int_equal(dsl_snapshot(f.dp, snap, false, err, sizeof err), 0);
    set(a, "k", "after", ZPL_XATTR_EITHER, 0);
    zpl_node_t *ctl = NULL, *sd = NULL, *sroot = NULL, *sa = NULL;
    assert_int_equal(zpl_lookup(root, ZPL_CTLDIR_NAME, &ctl), 0);
    assert_int_equal(zpl_lookup(ctl, "snapshot", &sd), 0);
    assert_int_equal(zpl_lookup(sd, "s", &sroot), 0);
    assert_int_equal(zpl_lookup(sroot, "a", &sa), 0);
    expect_xattr(sa, "k", "v2");
    set(sa, "k", "no", ZPL_XATTR_EITHER, -EROFS);
    zpl_node_rele(sa);
    zpl_node_rele(sroot);
    zpl_node_rele(sd);
    zpl_node_rele(ctl);
    assert_int_equal(zpl_fs_release_snapshots(f.fs), 0);

    assert_int_equal(zpl_removexattr(a, "j", NULL), 0);
    assert_int_equal(zpl_removexattr(a, "j", NULL), -ENODATA);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "a", &a), 0);
    expect_xattr(a, "k", "after");
    assert_int_equal(zpl_getxattr(a, "j", buf, sizeof buf, &len), -ENODATA);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

static void test_xattrs_freed_with_their_node(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplxattrfree", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *first = zfix_mkfile(root, "first");
    set(first, "k", "v", ZPL_XATTR_EITHER, 0); /* makes the index */
    uint64_t base = objects(&f);

    zpl_node_t *b = zfix_mkfile(root, "b");
    set(b, "k", "v", ZPL_XATTR_EITHER, 0);
    assert_int_equal(objects(&f), base + 2);
    zpl_node_rele(b);
    assert_int_equal(zpl_remove(root, "b", NULL), 0);
    assert_int_equal(objects(&f), base);

    /* Removed while open: freed with the node at its last close. */
    zpl_node_t *c = zfix_mkfile(root, "c");
    set(c, "k", "v", ZPL_XATTR_EITHER, 0);
    assert_int_equal(zpl_open_hold(c), 0);
    assert_int_equal(zpl_remove(root, "c", NULL), 0);
    expect_xattr(c, "k", "v");
    uint64_t held = objects(&f); /* c, its attributes, and the unlinked set made for it */
    assert_int_equal(held, base + 3);
    zpl_open_rele(c);
    assert_int_equal(objects(&f), held - 2);
    base = held - 2;
    zpl_node_rele(c);

    zpl_node_t *d = zfix_mkdir(root, "d");
    set(d, "k", "v", ZPL_XATTR_EITHER, 0);
    zpl_node_rele(d);
    assert_int_equal(zpl_rmdir(root, "d", NULL), 0);
    assert_int_equal(objects(&f), base);
    zpl_node_rele(first);
    zpl_node_rele(root);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

static void test_holes(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplholes", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    const uint64_t RS = 128 * 1024;
    uint8_t *rec = malloc(RS);
    memset(rec, 0xab, RS);
    assert_int_equal(zpl_write(a, 0, RS, rec, 0, NULL), 0);
    assert_int_equal(zpl_write(a, 8 * RS, RS, rec, 0, NULL), 0);
    uint64_t pos = 0;
    assert_int_equal(zpl_seek(a, 0, true, &pos), 0);
    assert_int_equal(pos, RS);
    assert_int_equal(zpl_seek(a, RS, false, &pos), 0);
    assert_int_equal(pos, 8 * RS);
    assert_int_equal(zpl_seek(a, 8 * RS, true, &pos), 0);
    assert_int_equal(pos, 9 * RS);
    assert_int_equal(zpl_seek(a, 9 * RS, false, &pos), -ENXIO);

    /* ALLOCATE past the end: the size grows, no data. */
    assert_int_equal(zpl_allocate(a, 9 * RS, RS, NULL), 0);
    assert_int_equal(zfix_attr(a).size, 10 * RS);
    assert_int_equal(zpl_seek(a, 9 * RS, false, &pos), -ENXIO);
    assert_int_equal(zpl_allocate(a, 0, 1ull << 50, NULL), -ENOSPC);

    /* A copy keeps the holes. */
    zpl_node_t *b = zfix_mkfile(root, "b");
    uint64_t copied = 0;
    assert_int_equal(zpl_copy_range(a, 0, b, 0, 10 * RS, &copied), 0);
    assert_int_equal(copied, 10 * RS);
    assert_int_equal(zfix_attr(b).size, 10 * RS);
    assert_int_equal(zpl_seek(b, 0, true, &pos), 0);
    assert_int_equal(pos, RS);
    assert_int_equal(zpl_seek(b, RS, false, &pos), 0);
    assert_int_equal(pos, 8 * RS);

    /* DEALLOCATE: a hole at once, the size kept, the space back after the sync. */
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(dmu_objset_sync(f.fs->os), 0);
    uint64_t used = zfix_attr(a).used;
    assert_int_equal(zpl_deallocate(a, 0, 9 * RS, NULL), 0);
    assert_int_equal(zpl_seek(a, 0, false, &pos), -ENXIO);
    assert_int_equal(zfix_attr(a).size, 10 * RS);
    assert_int_equal(dmu_objset_sync(f.fs->os), 0);
    assert_true(zfix_attr(a).used < used);
    free(rec);
    zpl_node_rele(a);
    zpl_node_rele(b);
    zpl_node_rele(root);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xattr_rules_and_persistence),
        cmocka_unit_test(test_xattrs_freed_with_their_node),
        cmocka_unit_test(test_holes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
