/*
 * Shared fixture of the ZPL tests: a pool on a sparse temp file, its DSL, a
 * filesystem dataset, and helpers to export/import everything.
 */
#ifndef TEST_ZPL_FIXTURE_H
#define TEST_ZPL_FIXTURE_H

#include <cairn/dsl.h>
#include <cairn/util.h>
#include <cairn/zpl.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct zfix {
    char dir[512];
    char path[600];
    char pool[64];
    char fsname[128];
    spa_t *spa;
    dsl_pool_t *dp;
    zpl_fs_t *fs;
} zfix_t;

static const zpl_cred_t zfix_cred = {.uid = 1000, .gid = 100};

static void zfix_open_dsl(zfix_t *f)
{
    assert_int_equal(dsl_pool_open(f->spa, &f->dp), 0);
}

static void zfix_make(zfix_t *f, const char *tag, uint64_t pool_bytes)
{
    static bool inited;
    if (!inited) {
        dsl_init();
        inited = true;
    }
    memset(f, 0, sizeof(*f));
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof(f->dir), "%s/%s.XXXXXX", base, tag);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/leaf0", f->dir);
    int fd = open(f->path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)pool_bytes), 0);
    close(fd);
    static unsigned seq;
    snprintf(f->pool, sizeof(f->pool), "zpl%u_%u", (unsigned)getpid(), seq++);
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = f->path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_create_opts_t opts = {0};
    char err[256] = "";
    int e = spa_create(f->pool, &root, &opts, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    zfix_open_dsl(f);
    snprintf(f->fsname, sizeof(f->fsname), "%s/fs", f->pool);
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM};
    e = dsl_dataset_create(f->dp, f->fsname, &co, err, sizeof(err));
    if (e) fprintf(stderr, "dsl_dataset_create: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(zpl_mount(f->dp, f->fsname, &f->fs), 0);
}

static void zfix_unmount(zfix_t *f)
{
    if (f->fs) assert_int_equal(zpl_unmount(f->fs), 0);
    f->fs = NULL;
}

/* The helpers below are static inline: each test uses only some of them. */

/* Unmounts, closes the DSL and exports the pool (zfix_destroy removes its file). */
static inline void zfix_export(zfix_t *f)
{
    zfix_unmount(f);
    dsl_pool_close(f->dp);
    f->dp = NULL;
    assert_int_equal(spa_export(f->spa), 0);
    f->spa = NULL;
}

/* Exports; then the offline check must pass: every block verifies and the space
 * accounting is exact (nothing leaked, nothing allocated twice). */
static inline void zfix_export_check(zfix_t *f)
{
    zfix_export(f);
    const char *paths[] = {f->path};
    spa_check_report_t rep;
    char err[512] = "";
    int e = spa_check(f->pool, paths, 1, &rep, err, sizeof(err));
    if (e) fail_msg("check of %s: %s", f->pool, err);
}

/* Unmounts, exports the pool, imports it again and remounts. */
static void zfix_reimport(zfix_t *f)
{
    zfix_export(f);
    const char *paths[] = {f->path};
    char err[256] = "";
    int e = spa_import(f->pool, paths, 1, 0, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    zfix_open_dsl(f);
    assert_int_equal(zpl_mount(f->dp, f->fsname, &f->fs), 0);
}

static void zfix_destroy(zfix_t *f)
{
    zfix_unmount(f);
    if (f->dp) dsl_pool_close(f->dp);
    if (f->spa) assert_int_equal(spa_export(f->spa), 0);
    unlink(f->path);
    rmdir(f->dir);
}

static zpl_node_t *zfix_root(zfix_t *f)
{
    zpl_node_t *r = NULL;
    assert_int_equal(zpl_root(f->fs, &r), 0);
    return r;
}

/* A new empty file (0644) in dir; the caller releases it. */
static inline zpl_node_t *zfix_mkfile(zpl_node_t *dir, const char *name)
{
    zpl_node_t *n = NULL;
    assert_int_equal(zpl_create(dir, name, 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &n, NULL), 0);
    return n;
}

/* A new directory (0755) in dir; the caller releases it. */
static inline zpl_node_t *zfix_mkdir(zpl_node_t *dir, const char *name)
{
    zpl_node_t *n = NULL;
    assert_int_equal(zpl_mkdir(dir, name, 0755, &zfix_cred, &n, NULL), 0);
    return n;
}

static inline zpl_attr_t zfix_attr(zpl_node_t *n)
{
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(n, &a), 0);
    return a;
}

static inline void zfix_write_str(zpl_node_t *n, uint64_t off, const char *s)
{
    assert_int_equal(zpl_write(n, off, strlen(s), s, 0, NULL), 0);
}

/* The DMU's view of file n of f's filesystem: its record size, the space it uses. */
static inline dmu_object_info_t zfix_object_info(zfix_t *f, zpl_node_t *n)
{
    dsl_dataset_t *ds = NULL;
    assert_int_equal(dsl_dataset_hold(f->dp, f->fsname, &ds), 0);
    dmu_object_info_t info;
    assert_int_equal(dmu_object_info(dsl_dataset_objset(ds), zfix_attr(n).ino, &info), 0);
    dsl_dataset_rele(ds);
    return info;
}

static inline void zfix_set_prop(zfix_t *f, const char *ds, const char *prop, const char *val)
{
    char err[256] = "";
    int e = dsl_prop_set(f->dp, ds, prop, val, err, sizeof(err));
    if (e) fail_msg("set %s=%s on %s: %s", prop, val, ds, err);
}

#endif
