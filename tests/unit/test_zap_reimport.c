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

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void copy_file(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp --sparse=always '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static spa_t *import(const char *path)
{
    const char *paths[] = {path};
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_import("reimp", paths, 1, SPA_IMPORT_FORCE, &spa, err, sizeof err);
    if (e) fprintf(stderr, "import: %s\n", err);
    assert_int_equal(e, 0);
    return spa;
}

static void test_reimport_reads_disk_not_memory(void **state)
{
    (void)state;
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    char dir[512], path[600], saved[600];
    snprintf(dir, sizeof dir, "%s/reimport.XXXXXX", base);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/leaf0", dir);
    snprintf(saved, sizeof saved, "%s/leaf0.saved", dir);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 128 * CAIRN_MIB), 0);
    close(fd);
    dmu_init();
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_t *spa = NULL;
    char err[256];
    assert_int_equal(spa_create("reimp", &root, NULL, &spa, err, sizeof err), 0);
    assert_int_equal(dmu_objset_create(spa, "os", NULL), 0);
    objset_t *os = NULL;
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    uint64_t z = 0;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(zap_create(os, &z, tx), 0);
    assert_int_equal(zap_add_u64(os, z, "old", 1, tx), 0);
    dmu_tx_commit(tx);
    dmu_objset_close(os);
    assert_int_equal(spa_export(spa), 0);
    copy_file(path, saved); /* the pool as it was: "old" only */

    spa = import(path);
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    tx = dmu_tx_begin(os);
    for (int i = 0; i < 2000; i++) { /* enough to turn the micro ZAP into a fat one */
        char name[32];
        snprintf(name, sizeof name, "new%d", i);
        assert_int_equal(zap_add_u64(os, z, name, (uint64_t)i, tx), 0);
    }
    dmu_tx_commit(tx);
    dmu_objset_close(os);
    assert_int_equal(spa_export(spa), 0);

    copy_file(saved, path); /* changed behind this process's back */
    spa = import(path);
    assert_int_equal(dmu_objset_open(spa, "os", &os), 0);
    uint64_t v = 0, count = 0;
    assert_int_equal(zap_lookup_u64(os, z, "old", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(zap_lookup_u64(os, z, "new7", &v), -ENOENT);
    assert_int_equal(zap_count(os, z, &count), 0);
    assert_int_equal(count, 1);
    dmu_objset_close(os);
    assert_int_equal(spa_export(spa), 0);
    unlink(path);
    unlink(saved);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reimport_reads_disk_not_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
