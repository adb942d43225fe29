/*
 * Volumes that are datasets (zvol_open over the DSL): creation of the data
 * object on first open, volsize/volblocksize from the properties, space
 * charged to the dataset and given back by unmap, refquota (-EDQUOT),
 * readonly=on, snapshots (old data, read-only), zvol_resize through the
 * volsize property, refusal of filesystems, persistence across export/import;
 * logbias=throughput keeps large writes out of the intent log; sync=always
 * makes plain writes survive a power cut, sync=disabled makes FUA writes and
 * flushes return without writing the log or waiting for a txg; a clone of a
 * volume has its origin's size and data; what would promise space the pool
 * lacks (thick volumes, reservations) or set a quota under its use is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zvol_fixture.h"

#include <cairn/vdev_fault.h>
#include <cairn/zil.h>

#include <errno.h>

#define MIB (1024ull * 1024)

typedef struct dvol {
    zfix_t f;
    dsl_pool_t *dp;
    char vol[128];
} dvol_t;

static uint64_t prop_num(dvol_t *d, const char *ds, const char *prop)
{
    dsl_prop_t p;
    char err[256];
    int e = dsl_prop_get(d->dp, ds, prop, &p, err, sizeof(err));
    if (e) fprintf(stderr, "get %s: %s\n", prop, err);
    assert_int_equal(e, 0);
    return p.numeric;
}

static void dvol_make(dvol_t *d)
{
    dsl_init();
    zfix_make(&d->f, "zvdsl", 512 * MIB);
    assert_int_equal(dsl_pool_open(d->f.spa, &d->dp), 0);
    snprintf(d->vol, sizeof(d->vol), "%s/vol", d->f.name);
    dsl_create_opts_t o = {.type = DSL_TYPE_VOLUME, .volsize = 32 * MIB, .sparse = true};
    char err[256];
    int e = dsl_dataset_create(d->dp, d->vol, &o, err, sizeof(err));
    if (e) fprintf(stderr, "create: %s\n", err);
    assert_int_equal(e, 0);
}

static void dvol_reimport(dvol_t *d)
{
    dsl_pool_close(d->dp);
    zfix_reimport(&d->f);
    assert_int_equal(dsl_pool_open(d->f.spa, &d->dp), 0);
}

/* Incompressible bytes, a function of (tag, off): space checks stay exact under compression. */
static void fill(uint8_t *b, uint64_t tag, uint64_t off, uint64_t len)
{
    cairn_rng_t r;
    cairn_rng_seed(&r, tag * 1000003 + off);
    for (uint64_t i = 0; i < len; i++) b[i] = (uint8_t)cairn_rng_next(&r);
}

static void test_dsl_volume(void **state)
{
    (void)state;
    dvol_t d;
    dvol_make(&d);
    char err[256];
    zvol_t *zv;
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    assert_int_equal(zvol_size(zv), 32 * MIB);
    assert_int_equal(zvol_volblocksize(zv), ZVOL_DEFAULT_VOLBLOCKSIZE);
    assert_int_equal(zvol_block_size(zv), 512);
    /* the pool's root filesystem is not a volume */
    zvol_t *bad;
    assert_int_equal(zvol_open(d.dp, d.f.name, &bad), -ENOTBLK);

    uint8_t *b = malloc(4 * MIB), *g = malloc(4 * MIB);
    fill(b, 1, 0, 4 * MIB);
    uint64_t used0 = prop_num(&d, d.vol, "used");
    assert_int_equal(zvol_write(zv, MIB, 4 * MIB, b, ZVOL_WRITE_FUA), 0);
    assert_int_equal(zvol_read(zv, MIB, 4 * MIB, g), 0);
    assert_memory_equal(b, g, 4 * MIB);
    assert_int_equal(zvol_flush(zv), 0);
    /* used is as of the last sync: the flush wrote the log (and the records
     * as blocks the sync adopts), not necessarily a txg. */
    spa_txg_wait_synced(d.f.spa, 0);
    uint64_t used1 = prop_num(&d, d.vol, "used");
    fprintf(stderr, "used before %llu after 4 MiB %llu\n", (unsigned long long)used0,
            (unsigned long long)used1);
    assert_true(used1 >= used0 + 4 * MIB);
    assert_true(used1 < used0 + 6 * MIB); /* thin: only what was written */

    /* snapshot keeps the old data, read-only */
    char snap[160];
    snprintf(snap, sizeof(snap), "%s@s1", d.vol);
    assert_int_equal(dsl_snapshot(d.dp, snap, false, err, sizeof(err)), 0);
    fill(g, 2, MIB, MIB);
    assert_int_equal(zvol_write(zv, MIB, MIB, g, 0), 0);
    zvol_t *zs;
    assert_int_equal(zvol_open(d.dp, snap, &zs), 0);
    assert_true(zvol_is_readonly(zs));
    assert_int_equal(zvol_size(zs), 32 * MIB);
    assert_int_equal(zvol_read(zs, MIB, MIB, g), 0);
    assert_memory_equal(g, b, MIB);
    assert_int_equal(zvol_write(zs, 0, 512, b, 0), -EROFS);
    zvol_close(zs);
    char snapfull[200];
    snprintf(snapfull, sizeof(snapfull), "%s", snap);
    assert_int_equal(dsl_dataset_destroy(d.dp, snapfull, false, false, err, sizeof(err)), 0);

    /* unmap gives the space back to the dataset */
    assert_int_equal(zvol_unmap(zv, 0, 32 * MIB, 0), 0);
    assert_int_equal(zvol_flush(zv), 0);
    spa_txg_wait_synced(d.f.spa, 0); /* space is as of the last sync; flush writes the log */
    uint64_t used2 = prop_num(&d, d.vol, "used");
    assert_true(used2 < used0 + 512 * 1024);

    /* refquota: writes fail with -EDQUOT before the volume goes past it */
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "refquota", "2M", err, sizeof(err)), 0);
    int e = 0;
    uint64_t off = 0;
    for (; off < 16 * MIB && !e; off += 256 * 1024) {
        e = zvol_write(zv, off, 256 * 1024, b, 0);
        if (!e) assert_int_equal(zvol_flush(zv), 0);
        spa_txg_wait_synced(d.f.spa, 0); /* quotas count synced space; flush writes the log */
    }
    assert_int_equal(e, -EDQUOT);
    assert_true(off <= 4 * MIB);
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "refquota", "none", err, sizeof(err)), 0);

    /* readonly=on refuses writes and unmaps at once */
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "readonly", "on", err, sizeof(err)), 0);
    assert_int_equal(zvol_write(zv, 0, 512, b, 0), -EROFS);
    assert_int_equal(zvol_unmap(zv, 0, 512, 0), -EROFS);
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "readonly", "off", err, sizeof(err)), 0);

    /* resize goes through the volsize property */
    assert_int_equal(zvol_resize(zv, 64 * MIB, false, err, sizeof(err)), 0);
    assert_int_equal(prop_num(&d, d.vol, "volsize"), 64 * MIB);
    assert_int_equal(zvol_size(zv), 64 * MIB);
    fill(b, 3, 60 * MIB, MIB);
    assert_int_equal(zvol_write(zv, 60 * MIB, MIB, b, 0), 0);
    assert_int_equal(zvol_resize(zv, 16 * MIB, false, err, sizeof(err)), -EPERM);
    assert_int_equal(zvol_resize(zv, 48 * MIB, true, err, sizeof(err)), 0);
    assert_int_equal(prop_num(&d, d.vol, "volsize"), 48 * MIB);
    assert_int_equal(zvol_write(zv, 60 * MIB, 512, b, 0), -ERANGE);
    /* The property alone never shrinks: that would hide the tail, not free it. */
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "volsize", "16M", err, sizeof(err)), -EPERM);
    assert_non_null(strstr(err, "force"));
    assert_int_equal(prop_num(&d, d.vol, "volsize"), 48 * MIB);
    assert_int_equal(zvol_size(zv), 48 * MIB);
    /* What the forced shrink cut off was freed: grown again, it reads as zeros. */
    assert_int_equal(zvol_resize(zv, 64 * MIB, false, err, sizeof(err)), 0);
    assert_int_equal(zvol_read(zv, 60 * MIB, MIB, g), 0);
    for (uint64_t i = 0; i < MIB; i++)
        if (g[i]) fail_msg("byte %llu beyond the shrunk end survived", (unsigned long long)i);
    assert_int_equal(zvol_resize(zv, 48 * MIB, true, err, sizeof(err)), 0);
    /* Blocks beyond the end that a shrink left behind (a crash between its
     * two steps, or an old pool where the property alone shrank) are not
     * shown by a grow: written here behind the volume's back. */
    {
        dsl_dataset_t *ds;
        assert_int_equal(dsl_dataset_hold(d.dp, d.vol, &ds), 0);
        objset_t *os = dsl_dataset_objset(ds);
        fill(b, 6, 56 * MIB, MIB);
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, ZVOL_OBJECT, 56 * MIB, MIB, b, tx), 0);
        dmu_tx_commit(tx);
        dsl_dataset_rele(ds);
        assert_int_equal(zvol_resize(zv, 64 * MIB, false, err, sizeof(err)), 0);
        assert_int_equal(zvol_read(zv, 56 * MIB, MIB, g), 0);
        for (uint64_t i = 0; i < MIB; i++)
            if (g[i]) fail_msg("byte %llu left beyond the old end shows after a grow", (unsigned long long)i);
        assert_int_equal(zvol_resize(zv, 48 * MIB, true, err, sizeof(err)), 0);
    }
    fill(b, 4, 0, MIB);
    assert_int_equal(zvol_write(zv, 0, MIB, b, 0), 0);
    assert_int_equal(zvol_flush(zv), 0);
    zvol_close(zv);

    /* persistence */
    dvol_reimport(&d);
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    assert_int_equal(zvol_size(zv), 48 * MIB);
    assert_int_equal(zvol_read(zv, 0, MIB, g), 0);
    assert_memory_equal(g, b, MIB);
    zvol_close(zv);
    free(b);
    free(g);
    dsl_pool_close(d.dp);
    zfix_done(&d.f);
}

/* The volume's intent log counters, through a handle of the same (shared) log. */
static zil_stats_t log_stats(zilog_t *zl)
{
    zil_stats_t st;
    zil_get_stats(zl, &st);
    return st;
}

/* logbias on a pool without a log device, as in ZFS: a large durable write
 * goes to its blocks at once and the log points at them (throughput, and
 * latency from ZIL_INDIRECT_MIN on); a small one is copied into the log; a
 * large write under throughput that is not durable yet is written once, by
 * its txg, which the flush then waits for. Everything survives a reimport. */
static void test_logbias(void **state)
{
    (void)state;
    dvol_t d;
    dvol_make(&d);
    char err[256];
    dsl_dataset_t *ds;
    assert_int_equal(dsl_dataset_hold(d.dp, d.vol, &ds), 0);
    zilog_t *zl;
    assert_int_equal(zil_open(dsl_dataset_objset(ds), zil_replay_dmu, dsl_dataset_objset(ds), &zl), 0);
    const uint64_t len = 64 * 1024;
    uint8_t *b = malloc(len);
    fill(b, 5, 0, len);
    struct {
        const char *bias;
        uint64_t len;
        int flags;
    } cases[] = {{"throughput", len, ZVOL_WRITE_FUA}, {"latency", 16 * 1024, ZVOL_WRITE_FUA},
                 {"throughput", len, 0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dsl_prop_set(d.dp, d.vol, "logbias", cases[i].bias, err, sizeof(err)), 0);
        zvol_t *zv; /* a fresh open reads the properties now, not a TTL later */
        assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
        zil_stats_t before = log_stats(zl);
        assert_int_equal(zvol_write(zv, (uint64_t)i * MIB, cases[i].len, b, cases[i].flags), 0);
        if (!cases[i].flags) assert_int_equal(zvol_flush(zv), 0);
        zil_stats_t after = log_stats(zl);
        if (i == 0) { /* pointers to the directly written blocks, no copy */
            assert_true(after.block_records > before.block_records);
            assert_int_equal(after.txg_waits, before.txg_waits);
        } else if (i == 1) { /* small: the bytes are copied into the log */
            assert_true(after.records > before.records);
            assert_int_equal(after.block_records, before.block_records);
        } else { /* not logged: the flush waited for the txg */
            assert_int_equal(after.block_records, before.block_records);
            assert_true(after.txg_waits > before.txg_waits);
        }
        zvol_close(zv);
    }
    zil_close(zl);
    dsl_dataset_rele(ds);
    dvol_reimport(&d);
    zvol_t *zv;
    uint8_t *g = malloc(len);
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zvol_read(zv, (uint64_t)i * MIB, cases[i].len, g), 0);
        assert_memory_equal(g, b, cases[i].len);
    }
    zvol_close(zv);
    free(b);
    free(g);
    dsl_pool_close(d.dp);
    zfix_done(&d.f);
}

/* The pool again, through a fault leaf over the same file: a disk whose writes not
 * yet flushed a power cut loses. */
static void dvol_import_fault(dvol_t *d, int flags)
{
    char fpath[700], err[256] = "";
    snprintf(fpath, sizeof fpath, "fault:%s", d->f.path);
    const char *paths[] = {fpath};
    int e = spa_import(d->f.name, paths, 1, flags, &d->f.spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(dsl_pool_open(d->f.spa, &d->dp), 0);
}

/* Power cut (no unflushed write survives), then the pool imported again and the
 * volume opened, which replays its log. */
static void dvol_powercut(dvol_t *d, zvol_t **zv)
{
    vdev_fault_powercut(0xc47, VDEV_FAULT_CUT_DROP);
    zvol_close(*zv); /* its waits for a sync fail now: nothing more reaches the disk */
    dsl_pool_close(d->dp);
    spa_abandon(d->f.spa);
    d->f.spa = NULL;
    vdev_fault_reset();
    dvol_import_fault(d, SPA_IMPORT_FORCE);
    assert_int_equal(zvol_open(d->dp, d->vol, zv), 0);
}

static void expect_fill(zvol_t *zv, uint64_t tag, uint64_t off, uint64_t len)
{
    uint8_t *w = malloc(len), *g = malloc(len);
    fill(w, tag, off, len);
    assert_int_equal(zvol_read(zv, off, len, g), 0);
    assert_memory_equal(g, w, len);
    free(w);
    free(g);
}

/* sync=always and sync=disabled on a volume, as test_zpl_zil does for files, on a
 * pool whose txgs never sync on their own and whose disk loses every unflushed
 * write at a power cut: under always, writes without FUA are acknowledged durable
 * (through the log) and the cut loses none; under disabled, FUA writes and flushes
 * return without writing a log block, flushing or waiting for a txg - and the cut
 * takes them (nothing else breaks). */
static void test_sync_always_and_disabled(void **state)
{
    (void)state;
    dvol_t d;
    dvol_make(&d);
    char err[256];
    dsl_pool_close(d.dp);
    test_pool_export(&d.f);
    dvol_import_fault(&d, 0);
    assert_int_equal(spa_prop_set(d.f.spa, "txg_timeout", "300", err, sizeof err), 0);
    const uint64_t len = 8192, n = 16;
    uint8_t *b = malloc(len);

    assert_int_equal(dsl_prop_set(d.dp, d.vol, "sync", "always", err, sizeof err), 0);
    zvol_t *zv; /* opened after the change: a fresh open reads the properties now */
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    spa_log_stats_t before, after;
    spa_log_get_stats(d.f.spa, &before);
    for (uint64_t i = 0; i < n; i++) {
        fill(b, 11, i * 65536, len);
        assert_int_equal(zvol_write(zv, i * 65536, len, b, 0), 0);
    }
    spa_log_get_stats(d.f.spa, &after);
    assert_true(after.blocks_written > before.blocks_written);
    dvol_powercut(&d, &zv);
    for (uint64_t i = 0; i < n; i++) expect_fill(zv, 11, i * 65536, len);
    zvol_close(zv);

    assert_int_equal(dsl_prop_set(d.dp, d.vol, "sync", "disabled", err, sizeof err), 0);
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    uint64_t synced = spa_last_synced_txg(d.f.spa);
    spa_log_get_stats(d.f.spa, &before);
    for (uint64_t i = 0; i < n; i++) {
        fill(b, 12, 4 * MIB + i * 65536, len);
        assert_int_equal(zvol_write(zv, 4 * MIB + i * 65536, len, b, ZVOL_WRITE_FUA), 0);
    }
    assert_int_equal(zvol_flush(zv), 0);
    spa_log_get_stats(d.f.spa, &after);
    assert_int_equal(after.blocks_written, before.blocks_written);
    assert_int_equal(after.flushes, before.flushes);
    assert_int_equal(spa_last_synced_txg(d.f.spa), synced);
    dvol_powercut(&d, &zv);
    uint8_t *g = malloc(len);
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(zvol_read(zv, 4 * MIB + i * 65536, len, g), 0);
        for (uint64_t k = 0; k < len; k++)
            if (g[k]) fail_msg("a write under sync=disabled survived the cut at %llu",
                               (unsigned long long)(4 * MIB + i * 65536 + k));
        expect_fill(zv, 11, i * 65536, len);
    }
    zvol_close(zv);
    free(b);
    free(g);
    dsl_pool_close(d.dp);
    zfix_done(&d.f);
}

/* A clone of a volume has its origin snapshot's volsize (not the head's
 * later one) and data; growing it keeps every byte below the old end, and a
 * forced shrink keeps what lies below the new one. */
static void test_volume_clone(void **state)
{
    (void)state;
    dvol_t d;
    dvol_make(&d);
    char err[256], snap[160], clone[160];
    zvol_t *zv;
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    uint8_t *b = malloc(32 * MIB), *g = malloc(32 * MIB);
    fill(b, 7, 0, 32 * MIB);
    assert_int_equal(zvol_write(zv, 0, 32 * MIB, b, ZVOL_WRITE_FUA), 0);
    snprintf(snap, sizeof(snap), "%s@base", d.vol);
    assert_int_equal(dsl_snapshot(d.dp, snap, false, err, sizeof(err)), 0);
    assert_int_equal(zvol_resize(zv, 48 * MIB, false, err, sizeof(err)), 0);
    zvol_close(zv);
    snprintf(clone, sizeof(clone), "%s/vm01", d.f.name);
    assert_int_equal(dsl_clone(d.dp, snap, clone, NULL, 0, err, sizeof(err)), 0);
    assert_int_equal(prop_num(&d, clone, "volsize"), 32 * MIB);
    assert_int_equal(prop_num(&d, clone, "volblocksize"), ZVOL_DEFAULT_VOLBLOCKSIZE);
    zvol_t *zc;
    assert_int_equal(zvol_open(d.dp, clone, &zc), 0);
    assert_int_equal(zvol_size(zc), 32 * MIB);
    assert_int_equal(zvol_read(zc, 0, 32 * MIB, g), 0);
    assert_memory_equal(b, g, 32 * MIB);
    assert_int_equal(zvol_resize(zc, 64 * MIB, false, err, sizeof(err)), 0);
    assert_int_equal(zvol_read(zc, 0, 32 * MIB, g), 0);
    assert_memory_equal(b, g, 32 * MIB);
    assert_int_equal(zvol_resize(zc, 16 * MIB, true, err, sizeof(err)), 0);
    zvol_close(zc);
    dvol_reimport(&d);
    assert_int_equal(zvol_open(d.dp, clone, &zc), 0);
    assert_int_equal(zvol_size(zc), 16 * MIB);
    assert_int_equal(zvol_read(zc, 0, 16 * MIB, g), 0);
    assert_memory_equal(b, g, 16 * MIB);
    zvol_close(zc);
    free(b);
    free(g);
    dsl_pool_close(d.dp);
    zfix_done(&d.f);
}

/* What would promise space the pool does not have is refused with one line
 * and changes nothing: a thick volume larger than what is available, a
 * reservation or refreservation beyond it, a thick volume grown beyond it; so
 * is a quota below what is used now. */
static void test_space_refusals(void **state)
{
    (void)state;
    dvol_t d;
    dvol_make(&d);
    char err[256] = "", big[160], fs[160];
    uint64_t avail = prop_num(&d, d.f.name, "available");
    snprintf(big, sizeof(big), "%s/big", d.f.name);
    dsl_create_opts_t o = {.type = DSL_TYPE_VOLUME, .volsize = (avail + 64 * MIB) & ~(MIB - 1)};
    assert_int_equal(dsl_dataset_create(d.dp, big, &o, err, sizeof(err)), -ENOSPC);
    assert_non_null(strstr(err, "-s"));
    dsl_prop_t p;
    assert_int_equal(dsl_prop_get(d.dp, big, "used", &p, err, sizeof(err)), -ENOENT);
    o.sparse = true; /* thin is fine */
    assert_int_equal(dsl_dataset_create(d.dp, big, &o, err, sizeof(err)), 0);
    assert_int_equal(dsl_dataset_destroy(d.dp, big, false, false, err, sizeof(err)), 0);

    snprintf(fs, sizeof(fs), "%s/fs", d.f.name);
    dsl_create_opts_t fo = {.type = DSL_TYPE_FILESYSTEM};
    assert_int_equal(dsl_dataset_create(d.dp, fs, &fo, err, sizeof(err)), 0);
    char v[64];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)(avail + MIB));
    assert_int_equal(dsl_prop_set(d.dp, fs, "reservation", v, err, sizeof(err)), -ENOSPC);
    assert_int_equal(dsl_prop_set(d.dp, fs, "refreservation", v, err, sizeof(err)), -ENOSPC);
    assert_int_equal(prop_num(&d, fs, "reservation"), 0);
    assert_int_equal(prop_num(&d, fs, "refreservation"), 0);
    /* Half fits; the other half then does not fit beside it. */
    snprintf(v, sizeof(v), "%llu", (unsigned long long)(avail / 2));
    assert_int_equal(dsl_prop_set(d.dp, fs, "reservation", v, err, sizeof(err)), 0);
    snprintf(v, sizeof(v), "%llu", (unsigned long long)(avail / 2 + 8 * MIB));
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "refreservation", v, err, sizeof(err)), -ENOSPC);
    /* ... but the reservation itself may grow into what it already holds. */
    snprintf(v, sizeof(v), "%llu", (unsigned long long)(avail / 2 + 4 * MIB));
    assert_int_equal(dsl_prop_set(d.dp, fs, "reservation", v, err, sizeof(err)), 0);

    /* A thick volume's volsize drags its refreservation: growing past what
     * is available is refused, and the size stays. */
    char thick[160];
    snprintf(thick, sizeof(thick), "%s/thick", d.f.name);
    dsl_create_opts_t to = {.type = DSL_TYPE_VOLUME, .volsize = 16 * MIB};
    assert_int_equal(dsl_dataset_create(d.dp, thick, &to, err, sizeof(err)), 0);
    snprintf(v, sizeof(v), "%llu", (unsigned long long)(avail & ~(MIB - 1)));
    assert_int_equal(dsl_prop_set(d.dp, thick, "volsize", v, err, sizeof(err)), -ENOSPC);
    assert_int_equal(prop_num(&d, thick, "volsize"), 16 * MIB);
    assert_int_equal(prop_num(&d, thick, "refreservation"), 16 * MIB);

    /* Quotas below what is used now. */
    zvol_t *zv;
    assert_int_equal(zvol_open(d.dp, d.vol, &zv), 0);
    uint8_t *b = malloc(4 * MIB);
    fill(b, 3, 0, 4 * MIB);
    assert_int_equal(zvol_write(zv, 0, 4 * MIB, b, ZVOL_WRITE_FUA), 0);
    zvol_close(zv);
    free(b);
    spa_txg_wait_synced(d.f.spa, 0);
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "refquota", "1M", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "refquota=1"));
    assert_int_equal(prop_num(&d, d.vol, "refquota"), 0);
    assert_int_equal(dsl_prop_set(d.dp, d.vol, "refquota", "8M", err, sizeof(err)), 0);
    assert_int_equal(dsl_prop_set(d.dp, d.f.name, "quota", "2M", err, sizeof(err)), -EINVAL);
    assert_int_equal(prop_num(&d, d.f.name, "quota"), 0);
    dsl_pool_close(d.dp);
    zfix_done(&d.f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dsl_volume),
        cmocka_unit_test(test_logbias),
        cmocka_unit_test(test_sync_always_and_disabled),
        cmocka_unit_test(test_volume_clone),
        cmocka_unit_test(test_space_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
