/*
 * Growing a live pool (src/spa/spa_vdev.c, src/spa/spa_expand.c), through the
 * toy upper layer (spa_toy_upper.h):
 *   - a data disk added to a pool two thirds full takes most new blocks; a
 *     mirror beside single disks is refused unless forced; a dry run changes
 *     nothing; after a crash the pool imports with the vdev, data verifies and
 *     the offline check is clean;
 *   - a mirror whose files grew: online -e (spa_vdev_expand) grows it, and a
 *     rewrite of everything, which needs more than the old size, succeeds with
 *     blocks past the old end; a crash keeps the new size (labels first);
 *   - autoexpand=on grows it by itself at the next syncs, and the property is
 *     kept in the labels.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "spa_toy_upper.h"

#include "../../src/spa/spa_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB CAIRN_MIB

typedef struct fixture {
    char dir[512];
    char d[4][600];
} fixture_t;

static void set_size(const char *path, uint64_t size)
{
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

static void fixture_init(fixture_t *f, const char *name)
{
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof f->dir, "%s/spa_%s_%d_XXXXXX", base, name, getpid());
    assert_non_null(mkdtemp(f->dir));
    for (int i = 0; i < 4; i++) {
        snprintf(f->d[i], sizeof f->d[i], "%s/d%d", f->dir, i);
        set_size(f->d[i], 128 * MIB);
    }
}

static void fixture_fini(fixture_t *f)
{
    for (int i = 0; i < 4; i++) unlink(f->d[i]);
    rmdir(f->dir);
}

static spa_t *create_pool(spa_vdev_spec_t *tops, uint32_t n)
{
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = n, .children = tops};
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_create("tank", &root, NULL, &spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(spa_prop_set(spa, "txg_timeout", "300", err, sizeof err), 0);
    return spa;
}

static spa_t *import_pool(fixture_t *f)
{
    const char *paths[] = {f->dir};
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_import("tank", paths, 1, SPA_IMPORT_FORCE, &spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    return spa;
}

static void check_pool(fixture_t *f)
{
    const char *paths[] = {f->dir};
    spa_check_report_t rep;
    char err[256] = "";
    int e = spa_check("tank", paths, 1, &rep, err, sizeof err);
    if (e) fprintf(stderr, "spa_check: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(rep.leaked_bytes, 0);
    assert_int_equal(rep.double_bytes, 0);
}

/* Slots [from, to) get 1 MiB blocks of seed; synced. */
static void write_slots(spa_t *spa, int from, int to, uint64_t seed)
{
    for (int s = from; s < to; s++)
        toy_write(spa, s, seed + (uint64_t)s, MIB, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_XXHASH, 1);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
}

static toy_root_phys_t *durable_root(spa_t *spa)
{
    toy_root_phys_t *r = malloc(sizeof *r);
    *r = ((toy_state_t *)spa_get_upper_private(spa))->root;
    return r;
}

static int add(spa_t *spa, spa_vdev_spec_t *top, bool force, bool dry_run, char *err, size_t len)
{
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = top};
    return dry_run ? spa_vdev_add_dry_run(spa, &root, force, err, len)
                   : spa_vdev_add(spa, &root, force, err, len);
}

static void test_add_disk(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, "grow_add");
    spa_vdev_spec_t d0 = {.type = VDEV_TYPE_LEAF, .path = f.d[0]};
    spa_t *spa = create_pool(&d0, 1);
    write_slots(spa, 0, 80, 1000); /* 80 of about 123 MiB */

    char err[256] = "";
    spa_vdev_spec_t mirror_leaves[2] = {{.type = VDEV_TYPE_LEAF, .path = f.d[2]},
                                        {.type = VDEV_TYPE_LEAF, .path = f.d[3]}};
    spa_vdev_spec_t mirror = {.type = VDEV_TYPE_MIRROR, .nchildren = 2, .children = mirror_leaves};
    assert_int_equal(add(spa, &mirror, false, false, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "pool uses a single disk and new vdev is a 2-way mirror"));
    spa_vdev_spec_t d1 = {.type = VDEV_TYPE_LEAF, .path = f.d[1]};
    assert_int_equal(add(spa, &d1, false, true, err, sizeof err), 0);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 1); /* the dry run changed nothing */
    spa_config_phys_t *cfg = NULL;
    vdev_t *probe = NULL;
    assert_int_equal(vdev_leaf_open(f.d[1], &probe), 0);
    assert_int_equal(spa_label_read_config(probe, &cfg), -ENOENT); /* nor labelled it */
    vdev_free(probe);
    assert_int_equal(add(spa, &d1, false, false, err, sizeof err), 0);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 2);

    /* New blocks go mostly where the free space is. */
    write_slots(spa, 80, 96, 2000);
    toy_root_phys_t *expect = durable_root(spa);
    int on[2] = {0, 0};
    for (int s = 80; s < 96; s++) on[expect->slot[s].bp.dva[0].vdev]++;
    assert_true(on[1] > on[0] * 2);

    /* A crash: the vdev is in the pool, the data where it was. */
    spa_abandon(spa);
    spa = import_pool(&f);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 2);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    free(expect);
    fixture_fini(&f);
}

static uint64_t pool_size(spa_t *spa)
{
    spa_space_t sp;
    spa_get_space(spa, &sp);
    return sp.size;
}

static void test_expand(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, "grow_expand");
    spa_vdev_spec_t leaves[2] = {{.type = VDEV_TYPE_LEAF, .path = f.d[0]},
                                 {.type = VDEV_TYPE_LEAF, .path = f.d[1]}};
    spa_vdev_spec_t mirror = {.type = VDEV_TYPE_MIRROR, .nchildren = 2, .children = leaves};
    spa_t *spa = create_pool(&mirror, 1);
    write_slots(spa, 0, 96, 3000);
    uint64_t old = pool_size(spa);
    char err[256] = "";

    /* One side grown: nothing to take yet. */
    set_size(f.d[0], 256 * MIB);
    assert_int_equal(spa_vdev_expand(spa, f.d[0], err, sizeof err), 0);
    assert_int_equal(pool_size(spa), old);
    assert_int_equal(spa_expandsize(spa), 0);
    set_size(f.d[1], 256 * MIB);
    /* Syncs notice the growth (leaves are asked at most once a second). */
    for (int i = 0; i < 100 && spa_expandsize(spa) < 120 * MIB; i++) {
        write_slots(spa, 0, 1, 3100 + (uint64_t)i);
        usleep(100 * 1000);
    }
    assert_true(spa_expandsize(spa) >= 120 * MIB);
    assert_int_equal(pool_size(spa), old);
    assert_int_equal(spa_vdev_expand(spa, f.d[1], err, sizeof err), 0);
    uint64_t grown = pool_size(spa);
    assert_true(grown >= old + 120 * MIB);
    assert_int_equal(spa_expandsize(spa), 0);

    /* Rewriting all 96 MiB while the old blocks are still held needs the new space. */
    write_slots(spa, 0, 96, 4000);
    toy_root_phys_t *expect = durable_root(spa);
    bool beyond = false;
    for (int s = 0; s < 96; s++) beyond |= expect->slot[s].bp.dva[0].offset >= old;
    assert_true(beyond);

    spa_abandon(spa);
    spa = import_pool(&f);
    assert_int_equal(pool_size(spa), grown);
    assert_int_equal(toy_verify(spa, expect), 0);

    /* autoexpand=on: the next syncs take what the leaves give. */
    assert_int_equal(spa_prop_set(spa, "autoexpand", "on", err, sizeof err), 0);
    set_size(f.d[0], 384 * MIB);
    set_size(f.d[1], 384 * MIB);
    for (int i = 0; i < 100 && pool_size(spa) < grown + 120 * MIB; i++) {
        write_slots(spa, 0, 1, 5000 + (uint64_t)i);
        usleep(100 * 1000);
    }
    assert_true(pool_size(spa) >= grown + 120 * MIB);
    free(expect);
    expect = durable_root(spa);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    spa = import_pool(&f);
    char v[16];
    assert_int_equal(spa_prop_get(spa, "autoexpand", v, sizeof v), 0);
    assert_string_equal(v, "on");
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_export(spa), 0);
    free(expect);
    fixture_fini(&f);
}

int main(void)
{
    spa_register_upper(&toy_ops);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_disk),
        cmocka_unit_test(test_expand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
