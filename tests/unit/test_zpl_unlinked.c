/*
 * The unlinked set: a file whose last link goes while it is open
 * (zpl_open_hold, as the NFSv4 server does for every file carrying state)
 * keeps its object, data and handles until the last zpl_open_rele, then is
 * freed; a rename over an open target is the same; a file nobody has open is
 * freed at once as before. After each step the pool checks clean on export,
 * so nothing is leaked. (The crash case - the set drained by the next mount -
 * is in test_zpl_zil.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop
#include "../../src/zpl/zpl_impl.h"

#include <errno.h>

static zpl_node_t *mkfile(zpl_node_t *root, const char *name, const char *content)
{
    zpl_node_t *n = NULL;
    assert_int_equal(zpl_create(root, name, 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &n, NULL), 0);
    assert_int_equal(zpl_write(n, 0, strlen(content), content, 0, NULL), 0);
    return n;
}

static void expect_content(zpl_node_t *n, const char *s)
{
    char buf[256] = "";
    size_t got = 0;
    bool eof = false;
    assert_int_equal(zpl_read(n, 0, sizeof(buf), buf, &got, &eof), 0);
    assert_int_equal(got, strlen(s));
    assert_memory_equal(buf, s, got);
}

static bool object_exists(zfix_t *f, uint64_t obj)
{
    dmu_object_info_t oi;
    return dmu_object_info(f->fs->os, obj, &oi) == 0;
}

static uint64_t unlinked_count(zfix_t *f)
{
    uint64_t set = 0, n = 0;
    if (zap_lookup_u64(f->fs->os, ZPL_MASTER_OBJ, "DELETE_QUEUE", &set)) return 0;
    assert_int_equal(zap_count(f->fs->os, set, &n), 0);
    return n;
}

static void sync_all(zfix_t *f)
{
    assert_int_equal(zpl_commit(f->fs), 0);
    assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
}

/* Removed while open, across txg syncs: still there with nlink 0, readable,
 * writable, found by its handle; freed at the last release. */
static void test_remove_while_open(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplunl", 256 * CAIRN_MIB);
    zpl_node_t *root;
    assert_int_equal(zpl_root(f.fs, &root), 0);
    zpl_node_t *n = mkfile(root, "held", "hello");
    uint64_t obj = zpl_node_ino(n);
    zpl_fh_t fh;
    assert_int_equal(zpl_fh_encode(n, &fh), 0);
    assert_int_equal(zpl_open_hold(n), 0);
    assert_int_equal(zpl_open_hold(n), 0);   /* two openers */
    assert_int_equal(zpl_remove(root, "held", NULL), 0);
    zpl_node_t *x = NULL;
    assert_int_equal(zpl_lookup(root, "held", &x), -ENOENT);
    sync_all(&f);
    sync_all(&f);
    assert_true(object_exists(&f, obj));
    assert_int_equal(unlinked_count(&f), 1);
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(n, &a), 0);
    assert_int_equal(a.nlink, 0);
    expect_content(n, "hello");
    assert_int_equal(zpl_write(n, 5, 6, " world", 0, NULL), 0);
    zpl_node_t *byfh = NULL;
    assert_int_equal(zpl_fh_to_inode(f.fs, fh.bytes, ZPL_FH_SIZE, &byfh), 0);
    assert_ptr_equal(byfh, n);
    expect_content(byfh, "hello world");
    zpl_node_rele(byfh);
    /* No new name for it. */
    assert_int_equal(zpl_link(n, root, "again", NULL), -ENOENT);
    /* A new file gets another number while the old one lives. */
    zpl_node_t *other = mkfile(root, "held", "new");
    assert_int_not_equal(zpl_node_ino(other), obj);
    zpl_node_rele(other);

    zpl_open_rele(n);
    assert_true(object_exists(&f, obj));      /* one opener left */
    zpl_open_rele(n);
    assert_false(object_exists(&f, obj));
    assert_int_equal(unlinked_count(&f), 0);
    assert_int_equal(zpl_fh_to_inode(f.fs, fh.bytes, ZPL_FH_SIZE, &byfh), -ESTALE);
    assert_int_equal(zpl_open_hold(n), -ESTALE);
    zpl_node_rele(n);
    zpl_node_rele(root);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

/* A rename over an open target keeps the target for its opener; over a file
 * nobody has open it frees it at once, as before. */
static void test_rename_over_open(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplunl", 256 * CAIRN_MIB);
    zpl_node_t *root;
    assert_int_equal(zpl_root(f.fs, &root), 0);
    zpl_node_t *t = mkfile(root, "target", "old");
    zpl_node_t *s = mkfile(root, "source", "new");
    zpl_node_t *u = mkfile(root, "unopened", "x");
    uint64_t tobj = zpl_node_ino(t), uobj = zpl_node_ino(u);
    assert_int_equal(zpl_open_hold(t), 0);
    assert_int_equal(zpl_rename(root, "source", root, "target", NULL, NULL), 0);
    zpl_node_t *x = NULL;
    assert_int_equal(zpl_lookup(root, "target", &x), 0);
    assert_ptr_equal(x, s);
    zpl_node_rele(x);
    expect_content(t, "old");
    assert_int_equal(zpl_write(t, 0, 3, "OLD", 0, NULL), 0);
    expect_content(t, "OLD");
    expect_content(s, "new");
    /* Not open: gone at once. */
    zpl_node_rele(u);
    assert_int_equal(zpl_rename(root, "target", root, "unopened", NULL, NULL), 0);
    sync_all(&f);
    assert_false(object_exists(&f, uobj));
    assert_true(object_exists(&f, tobj));
    zpl_open_rele(t);
    assert_false(object_exists(&f, tobj));
    zpl_node_rele(t);
    zpl_node_rele(s);
    zpl_node_rele(root);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

/* A set left over (here: made by hand, as a crash leaves it) is freed by the next mount. */
static void test_reimport_drains(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplunl", 256 * CAIRN_MIB);
    zpl_node_t *root;
    assert_int_equal(zpl_root(f.fs, &root), 0);
    zpl_node_t *n = mkfile(root, "held", "data");
    uint64_t obj = zpl_node_ino(n);
    assert_int_equal(zpl_open_hold(n), 0);
    assert_int_equal(zpl_remove(root, "held", NULL), 0);
    /* Forget the opener the way a crash would: the node goes without its rele. */
    n->opens = 0;
    zpl_node_rele(n);
    zpl_node_rele(root);
    assert_int_equal(unlinked_count(&f), 1);
    zfix_reimport(&f);
    assert_false(object_exists(&f, obj));
    assert_int_equal(unlinked_count(&f), 0);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_while_open),
        cmocka_unit_test(test_rename_over_open),
        cmocka_unit_test(test_reimport_drains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
