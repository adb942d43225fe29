/*
 * The one-file test pool shared by the unit tests of the layers above the SPA:
 * a sparse leaf file in its own directory under $CAIRN_TEST_TMP, a pool on it,
 * and the export / import / offline-check steps the tests repeat.
 */
#ifndef POOL_FIXTURE_H
#define POOL_FIXTURE_H

#include <cairn/dmu.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct test_pool {
    char dir[512];
    char path[600];
    char name[64];
    spa_t *spa;
} test_pool_t;

/* A pool named after tag (and the process, so programs may run side by side). */
static inline void test_pool_make(test_pool_t *p, const char *tag, uint64_t leaf_size)
{
    static unsigned seq;
    dmu_init();
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(p->dir, sizeof(p->dir), "%s/%s.XXXXXX", base, tag);
    assert_non_null(mkdtemp(p->dir));
    snprintf(p->path, sizeof(p->path), "%s/leaf0", p->dir);
    int fd = open(p->path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)leaf_size), 0);
    close(fd);
    snprintf(p->name, sizeof(p->name), "%.16s%u_%u", tag, (unsigned)getpid(), seq++);
    for (char *c = p->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            *c = '_';
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = p->path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    char err[256] = "";
    int e = spa_create(p->name, &root, NULL, &p->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
}

static inline void test_pool_import(test_pool_t *p, int flags)
{
    const char *paths[] = {p->path};
    char err[256] = "";
    int e = spa_import(p->name, paths, 1, flags, &p->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
}

static inline void test_pool_export(test_pool_t *p)
{
    assert_int_equal(spa_export(p->spa), 0);
    p->spa = NULL;
}

static inline void test_pool_reimport(test_pool_t *p)
{
    test_pool_export(p);
    test_pool_import(p, 0);
}

/* Exports (if imported) and runs the offline check: every block verifies, nothing
 * leaked, nothing doubly allocated. */
static inline void test_pool_check(test_pool_t *p)
{
    if (p->spa) test_pool_export(p);
    const char *paths[] = {p->path};
    spa_check_report_t rep;
    char err[256] = "";
    int e = spa_check(p->name, paths, 1, &rep, err, sizeof(err));
    if (e)
        fprintf(stderr, "spa_check: %s (leaked %llu double %llu bad %llu)\n", err,
                (unsigned long long)rep.leaked_bytes, (unsigned long long)rep.double_bytes,
                (unsigned long long)rep.bad_blocks);
    assert_int_equal(e, 0);
    assert_int_equal(rep.leaked_bytes, 0);
    assert_int_equal(rep.double_bytes, 0);
    assert_true(rep.blocks > 0);
}

/* Removes the leaf file(s) and the directory. */
static inline void test_pool_remove(test_pool_t *p)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p->dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", p->dir);
}

#endif
