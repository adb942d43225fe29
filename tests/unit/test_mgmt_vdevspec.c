/* The zpool vdev grammar parser and pool name rules (pure logic, no engine). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt.h>
#include <cairn/spa.h>

#include <string.h>

static int parse(char *const *words, int n, spa_vdev_spec_t **root, char *err)
{
    err[0] = '\0';
    return mgmt_vdev_spec_parse(n, words, root, err, 256);
}

static void test_single_leaves(void **state)
{
    (void)state;
    char *w[] = {"/d/a", "/d/b"};
    spa_vdev_spec_t *root;
    char err[256];
    assert_int_equal(parse(w, 2, &root, err), 0);
    assert_int_equal(root->type, VDEV_TYPE_ROOT);
    assert_int_equal(root->nchildren, 2);
    assert_int_equal(root->children[0].type, VDEV_TYPE_LEAF);
    assert_string_equal(root->children[0].path, "/d/a");
    assert_string_equal(root->children[1].path, "/d/b");
    const char *paths[4];
    assert_int_equal(mgmt_vdev_spec_leaves(root, paths, 4), 2);
    assert_string_equal(paths[1], "/d/b");
    mgmt_vdev_spec_free(root);
}

static void test_groups(void **state)
{
    (void)state;
    char *w[] = {"mirror", "/d/a", "/d/b", "/d/c", "raidz2", "/d/e", "/d/f", "/d/g", "/d/h",
                 "raidz", "/d/i", "/d/j", "/d/k", "raidz3", "/d/l", "/d/m", "/d/n", "/d/o",
                 "/d/p"};
    spa_vdev_spec_t *root;
    char err[256];
    assert_int_equal(parse(w, 19, &root, err), 0);
    assert_int_equal(root->nchildren, 4);
    assert_int_equal(root->children[0].type, VDEV_TYPE_MIRROR);
    assert_int_equal(root->children[0].nchildren, 3);
    assert_int_equal(root->children[1].type, VDEV_TYPE_RAIDZ);
    assert_int_equal(root->children[1].nparity, 2);
    assert_int_equal(root->children[1].nchildren, 4);
    assert_string_equal(root->children[1].children[3].path, "/d/h");
    assert_int_equal(root->children[2].nparity, 1);
    assert_int_equal(root->children[3].nparity, 3);
    assert_int_equal(root->children[3].nchildren, 5);
    const char *paths[32];
    assert_int_equal(mgmt_vdev_spec_leaves(root, paths, 32), 15);
    mgmt_vdev_spec_free(root);
}

static void expect_error(char *const *w, int n, const char *needle)
{
    spa_vdev_spec_t *root = (spa_vdev_spec_t *)0x1;
    char err[256];
    assert_true(parse(w, n, &root, err) < 0);
    assert_null(root);
    if (!strstr(err, needle)) fail_msg("error '%s' lacks '%s'", err, needle);
}

/* The log section: top-level vdevs after "log" are log-class (device or mirror). */
static void test_log_section(void **state)
{
    (void)state;
    char *w[] = {"mirror", "/d/a", "/d/b", "log", "mirror", "/d/c", "/d/d"};
    spa_vdev_spec_t *root = NULL;
    char err[256] = "";
    assert_int_equal(parse(w, 7, &root, err), 0);
    assert_int_equal(root->nchildren, 2);
    assert_int_equal(root->children[0].vclass, VDEV_CLASS_NORMAL);
    assert_int_equal(root->children[1].vclass, VDEV_CLASS_LOG);
    assert_int_equal(root->children[1].type, VDEV_TYPE_MIRROR);
    assert_int_equal(root->children[1].nchildren, 2);
    mgmt_vdev_spec_free(root);
    char *w2[] = {"/d/a", "log", "/d/e", "/d/f"};
    assert_int_equal(parse(w2, 4, &root, err), 0);
    assert_int_equal(root->nchildren, 3);
    assert_int_equal(root->children[0].vclass, VDEV_CLASS_NORMAL);
    assert_int_equal(root->children[1].vclass, VDEV_CLASS_LOG);
    assert_int_equal(root->children[2].vclass, VDEV_CLASS_LOG);
    assert_string_equal(root->children[2].path, "/d/f");
    mgmt_vdev_spec_free(root);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error(NULL, 0, "no vdevs");
    char *m1[] = {"mirror", "/d/a"};
    expect_error(m1, 2, "mirror needs at least 2");
    char *m0[] = {"mirror", "mirror", "/d/a", "/d/b"};
    expect_error(m0, 4, "mirror needs at least 2");
    char *r1[] = {"raidz1", "/d/a", "/d/b"};
    expect_error(r1, 3, "raidz1 needs at least 3");
    char *r3[] = {"raidz3", "/d/a", "/d/b", "/d/c", "/d/d"};
    expect_error(r3, 5, "raidz3 needs at least 5");
    char *last[] = {"mirror", "/d/a", "/d/b", "raidz2", "/d/c"};
    expect_error(last, 5, "raidz2 needs at least 4");
    char *unk[] = {"raidz4", "/d/a", "/d/b"};
    expect_error(unk, 3, "unknown vdev type");
    char *unk2[] = {"mirorr", "/d/a", "/d/b"};
    expect_error(unk2, 3, "'mirorr'");
    char *logz[] = {"/d/a", "log", "raidz1", "/d/b", "/d/c", "/d/d"};
    expect_error(logz, 6, "a log vdev is a device or a mirror");
    char *logempty[] = {"/d/a", "log"};
    expect_error(logempty, 2, "'log' must be followed");
    char *log2[] = {"/d/a", "log", "/d/b", "log", "/d/c"};
    expect_error(log2, 5, "'log' given twice");
    char *cache[] = {"/d/a", "cache", "/d/b"};
    expect_error(cache, 3, "'cache'");
    char *spare[] = {"/d/a", "spare", "/d/b"};
    expect_error(spare, 3, "'spare'");
    char *dup[] = {"mirror", "/d/a", "/d/b", "/d/a"};
    expect_error(dup, 4, "'/d/a' is given more than once");
    char *empty[] = {"/d/a", ""};
    expect_error(empty, 2, "empty");
}

static void test_pool_names(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(mgmt_pool_name_check("tank", err, sizeof err), 0);
    assert_int_equal(mgmt_pool_name_check("t-1_a.b:c", err, sizeof err), 0);
    assert_true(mgmt_pool_name_check("", err, sizeof err) < 0);
    assert_true(mgmt_pool_name_check("1tank", err, sizeof err) < 0);
    assert_true(mgmt_pool_name_check("ta/nk", err, sizeof err) < 0);
    assert_true(mgmt_pool_name_check("ta nk", err, sizeof err) < 0);
    assert_true(mgmt_pool_name_check("mirror", err, sizeof err) < 0);
    assert_true(mgmt_pool_name_check("raidz2", err, sizeof err) < 0);
    assert_true(mgmt_pool_name_check("log", err, sizeof err) < 0);
    char longname[SPA_NAME_MAX + 1];
    memset(longname, 'a', SPA_NAME_MAX);
    longname[SPA_NAME_MAX] = '\0';
    assert_true(mgmt_pool_name_check(longname, err, sizeof err) < 0);
    longname[SPA_NAME_MAX - 1] = '\0';
    assert_int_equal(mgmt_pool_name_check(longname, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_leaves),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_log_section),
        cmocka_unit_test(test_pool_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
