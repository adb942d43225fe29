/*
 * Shared fixture of the zvol tests: a pool on one sparse temp file, a DMU
 * object set per volume, helpers to export/import (or crash and import) it.
 * Header-only so each test program stays one file plus this.
 */
#ifndef TEST_ZVOL_FIXTURE_H
#define TEST_ZVOL_FIXTURE_H

#include <cairn/dmu.h>
#include <cairn/util.h>
#include <cairn/zvol.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct zfix {
    char dir[512];
    char path[600];
    char name[64];
    spa_t *spa;
} zfix_t;

static inline void zfix_make(zfix_t *f, const char *tag, uint64_t leaf_size)
{
    static int once;
    if (!once) {
        dmu_init();
        once = 1;
    }
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
    assert_int_equal(ftruncate(fd, (off_t)leaf_size), 0);
    close(fd);
    static unsigned seq;
    snprintf(f->name, sizeof(f->name), "zv%u_%u", (unsigned)getpid(), seq++);
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = f->path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_create_opts_t opts = {0};
    char err[256] = "";
    int e = spa_create(f->name, &root, &opts, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
}

static inline void zfix_import(zfix_t *f, int flags)
{
    const char *paths[] = {f->path};
    char err[256] = "";
    int e = spa_import(f->name, paths, 1, flags, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
}

static inline void zfix_reimport(zfix_t *f)
{
    assert_int_equal(spa_export(f->spa), 0);
    f->spa = NULL;
    zfix_import(f, 0);
}

/* The pool as after a crash: nothing more is written, then imported again. */
static inline void zfix_crash_reimport(zfix_t *f)
{
    spa_abandon(f->spa);
    f->spa = NULL;
    zfix_import(f, SPA_IMPORT_FORCE);
}

static inline void zfix_done(zfix_t *f)
{
    if (f->spa) {
        assert_int_equal(spa_export(f->spa), 0);
        f->spa = NULL;
        const char *paths[] = {f->path};
        spa_check_report_t rep;
        char err[256] = "";
        int e = spa_check(f->name, paths, 1, &rep, err, sizeof(err));
        if (e) fprintf(stderr, "spa_check: %s\n", err);
        assert_int_equal(e, 0);
    }
    unlink(f->path);
    rmdir(f->dir);
}

static inline objset_t *zfix_objset(zfix_t *f, const char *osname, bool create)
{
    if (create) assert_int_equal(dmu_objset_create(f->spa, osname, NULL), 0);
    objset_t *os = NULL;
    assert_int_equal(dmu_objset_open(f->spa, osname, &os), 0);
    return os;
}

/* Deterministic non-zero bytes for (tag, offset). */
static inline uint8_t zpat(uint64_t tag, uint64_t off)
{
    uint64_t x = (off >> 3) * 0x9E3779B97F4A7C15ULL ^ (tag + 1) * 0xC2B2AE3D27D4EB4FULL;
    return (uint8_t)((x >> 29) ^ (off & 7) ^ 0x5a) | 1;
}

static inline void zfill(uint8_t *b, uint64_t tag, uint64_t off, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++) b[i] = zpat(tag, off + i);
}

#endif
