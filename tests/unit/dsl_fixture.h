/*
 * Shared fixture of the dataset-layer tests: a one-file pool in its own temp
 * directory with its dataset layer open, and helpers to create, inspect,
 * re-import and check it.
 */
#ifndef DSL_FIXTURE_H
#define DSL_FIXTURE_H

#include <cairn/dsl.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A one-file pool in its own temp directory, with its dataset layer open. */
typedef struct fx {
    char dir[512];
    char path[600];
    char name[64];
    spa_t *spa;
    dsl_pool_t *dp;
} fx_t;

static void fx_open_dsl(fx_t *f)
{
    assert_int_equal(dsl_pool_open(f->spa, &f->dp), 0);
}

static void fx_make(fx_t *f, const char *tag)
{
    dsl_init();
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", base);
    assert_int_equal(system(cmd), 0);
    snprintf(f->dir, sizeof(f->dir), "%s/%s.XXXXXX", base, tag);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/leaf0", f->dir);
    int fd = open(f->path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 512 * CAIRN_MIB), 0);
    close(fd);
    snprintf(f->name, sizeof(f->name), "tank%u", (unsigned)getpid());
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = f->path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_create_opts_t opts = {0};
    char err[256] = "";
    int e = spa_create(f->name, &root, &opts, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    fx_open_dsl(f);
}

static void fx_export(fx_t *f)
{
    dsl_pool_close(f->dp);
    f->dp = NULL;
    assert_int_equal(spa_export(f->spa), 0);
    f->spa = NULL;
}

static void fx_import(fx_t *f)
{
    const char *paths[] = {f->path};
    char err[256] = "";
    int e = spa_import(f->name, paths, 1, 0, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    fx_open_dsl(f);
}

static void fx_reimport(fx_t *f)
{
    fx_export(f);
    fx_import(f);
}

/* Exported pool: the offline check must find no leak, no double reference. */
static void fx_check(fx_t *f)
{
    const char *paths[] = {f->path};
    spa_check_report_t rep;
    char err[256] = "";
    int e = spa_check(f->name, paths, 1, &rep, err, sizeof(err));
    if (e) fprintf(stderr, "spa_check: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(rep.leaked_bytes, 0);
    assert_int_equal(rep.double_bytes, 0);
}

static void fx_destroy(fx_t *f)
{
    if (f->dp) dsl_pool_close(f->dp);
    if (f->spa) spa_export(f->spa);
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", f->dir);
}

static char fx_err[512];

#define OK(call)                                                   \
    do {                                                           \
        fx_err[0] = 0;                                             \
        int _e = (call);                                           \
        if (_e) fprintf(stderr, "%s: %d %s\n", #call, _e, fx_err); \
        assert_int_equal(_e, 0);                                   \
    } while (0)

static void fx_create_fs(fx_t *f, const char *name)
{
    dsl_create_opts_t o = {.type = DSL_TYPE_FILESYSTEM};
    OK(dsl_dataset_create(f->dp, name, &o, fx_err, sizeof(fx_err)));
}

static uint64_t fx_num(fx_t *f, const char *ds, const char *prop)
{
    dsl_prop_t p;
    OK(dsl_prop_get(f->dp, ds, prop, &p, fx_err, sizeof(fx_err)));
    return p.numeric;
}

static void fx_ds_name(fx_t *f, char *buf, size_t len, const char *rel)
{
    if (rel && *rel) snprintf(buf, len, "%s%s%s", f->name, rel[0] == '@' ? "" : "/", rel);
    else snprintf(buf, len, "%s", f->name);
}

#endif
