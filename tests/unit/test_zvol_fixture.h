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

#include "pool_fixture.h"

typedef test_pool_t zfix_t;

static inline void zfix_make(zfix_t *f, const char *tag, uint64_t leaf_size)
{
    test_pool_make(f, tag, leaf_size);
}

static inline void zfix_import(zfix_t *f, int flags) { test_pool_import(f, flags); }
static inline void zfix_reimport(zfix_t *f) { test_pool_reimport(f); }

/* The pool as after a crash: nothing more is written, then imported again. */
static inline void zfix_crash_reimport(zfix_t *f)
{
    spa_abandon(f->spa);
    f->spa = NULL;
    test_pool_import(f, SPA_IMPORT_FORCE);
}

static inline void zfix_done(zfix_t *f)
{
    if (f->spa) test_pool_check(f);
    test_pool_remove(f);
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
