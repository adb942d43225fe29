/*
 * DSL space tests: quotas and refquotas enforced by dsl_dataset_check_space
 * (-EDQUOT), reservations taken from everyone else's `available`, sparse and
 * thick volumes, compressratio, and a randomized model - writes, frees,
 * snapshots, snapshot destroys, clones, rollbacks - checked against an
 * in-memory model (content of every object in every head and snapshot)
 * after each step and across export/import, ending with the space invariant:
 * with every snapshot, clone and object gone, the root's `used` is back at
 * its baseline and spa_check finds no leak and no double free.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dsl.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsl_fixture.h"

static const dmu_object_props_t pr = {.recordsize = 4096, .compress = CAIRN_COMPRESS_OFF,
                                      .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};

static void sync_pool(fx_t *f)
{
    for (int i = 0; i < SPA_DEFER_TXGS + 2; i++) assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
}

static void write_bytes(objset_t *os, uint64_t obj, uint64_t off, size_t len, uint8_t v)
{
    uint8_t *b = malloc(len);
    memset(b, v, len);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, off, len, b, tx), 0);
    dmu_tx_commit(tx);
    free(b);
}

static void test_quota_reservation(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslquota");
    char a[300], ab[300], r[300], v[300], sv[300];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_ds_name(&f, ab, sizeof(ab), "a/b");
    fx_ds_name(&f, r, sizeof(r), "resv");
    fx_ds_name(&f, v, sizeof(v), "vol");
    fx_ds_name(&f, sv, sizeof(sv), "svol");
    fx_create_fs(&f, a);
    fx_create_fs(&f, ab);
    fx_create_fs(&f, r);
    uint64_t avail0 = fx_num(&f, ab, "available");
    assert_true(avail0 > 100 * CAIRN_MIB);

    /* quota on a caps its descendants. */
    OK(dsl_prop_set(f.dp, a, "quota", "2M", fx_err, sizeof(fx_err)));
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, ab, &ds));
    assert_true(fx_num(&f, ab, "available") <= 2 * CAIRN_MIB);
    assert_int_equal(dsl_dataset_check_space(ds, 1 * CAIRN_MIB), 0);
    assert_int_equal(dsl_dataset_check_space(ds, 3 * CAIRN_MIB), -EDQUOT);
    objset_t *os = dsl_dataset_objset(ds);
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &pr, &obj, tx), 0);
    dmu_tx_commit(tx);
    write_bytes(os, obj, 0, 1536 * 1024, 0x5a);
    sync_pool(&f);
    /* Used space counts against the quota. */
    assert_true(fx_num(&f, a, "used") >= 1536 * 1024);
    assert_int_equal(dsl_dataset_check_space(ds, 1 * CAIRN_MIB), -EDQUOT);
    assert_int_equal(dsl_dataset_check_space(ds, 64 * 1024), 0);
    /* refquota on b: referenced bytes. */
    OK(dsl_prop_set(f.dp, a, "quota", "none", fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_check_space(ds, 1 * CAIRN_MIB), 0);
    OK(dsl_prop_set(f.dp, ab, "refquota", "1M", fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_check_space(ds, 4096), -EDQUOT);
    OK(dsl_prop_set(f.dp, ab, "refquota", "none", fx_err, sizeof(fx_err)));
    /* readonly. */
    OK(dsl_prop_set(f.dp, a, "readonly", "on", fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_check_space(ds, 1), -EROFS);
    OK(dsl_prop_inherit(f.dp, a, "readonly", fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_check_space(ds, 1), 0);

    /* A reservation is taken from everyone else's available, not its own. */
    uint64_t before_b = fx_num(&f, ab, "available");
    uint64_t before_r = fx_num(&f, r, "available");
    OK(dsl_prop_set(f.dp, r, "reservation", "50M", fx_err, sizeof(fx_err)));
    uint64_t after_b = fx_num(&f, ab, "available");
    assert_true(before_b - after_b >= 50 * CAIRN_MIB - 64 * 1024 && before_b - after_b <= 50 * CAIRN_MIB + 64 * 1024);
    assert_true(fx_num(&f, r, "available") + 64 * 1024 >= before_r);
    /* The reserved space is charged to the parent (usedbychildren). */
    assert_true(fx_num(&f, f.name, "usedbychildren") >= 50 * CAIRN_MIB);
    dsl_dataset_rele(ds);

    /* A thick volume reserves its size; a sparse one does not. */
    uint64_t root_used = fx_num(&f, f.name, "used");
    dsl_create_opts_t vo = {.type = DSL_TYPE_VOLUME, .volsize = 32 * CAIRN_MIB};
    OK(dsl_dataset_create(f.dp, v, &vo, fx_err, sizeof(fx_err)));
    assert_true(fx_num(&f, v, "usedbyrefreservation") > 31 * CAIRN_MIB);
    assert_true(fx_num(&f, f.name, "used") - root_used > 31 * CAIRN_MIB);
    vo.sparse = true;
    root_used = fx_num(&f, f.name, "used");
    OK(dsl_dataset_create(f.dp, sv, &vo, fx_err, sizeof(fx_err)));
    assert_int_equal(fx_num(&f, sv, "refreservation"), 0);
    assert_true(fx_num(&f, f.name, "used") - root_used < CAIRN_MIB);
    /* Growing volsize drags the matching refreservation along. */
    OK(dsl_prop_set(f.dp, v, "volsize", "64M", fx_err, sizeof(fx_err)));
    assert_int_equal(fx_num(&f, v, "refreservation"), 64 * CAIRN_MIB);

    /* Persisted. */
    fx_reimport(&f);
    assert_int_equal(fx_num(&f, r, "reservation"), 50 * CAIRN_MIB);
    assert_true(fx_num(&f, ab, "used") >= 1536 * 1024);
    fx_destroy(&f);
}

/* |got - want| within what MOS updates of a task move the pool's free space. */
static void assert_near(uint64_t got, uint64_t want)
{
    uint64_t d = got > want ? got - want : want - got;
    if (d > 256 * 1024)
        fail_msg("got %llu, want %llu", (unsigned long long)got, (unsigned long long)want);
}

/* Everyone's available follows reservations as they are set, unset,
 * destroyed with their dataset, made by a thick volume, and re-imported. */
static void test_available_follows_reservations(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslavail");
    char a[300], b[300], bc[300], v[300];
    fx_ds_name(&f, a, sizeof(a), "a");
    fx_ds_name(&f, b, sizeof(b), "b");
    fx_ds_name(&f, bc, sizeof(bc), "b/c");
    fx_ds_name(&f, v, sizeof(v), "v");
    fx_create_fs(&f, a);
    fx_create_fs(&f, b);
    fx_create_fs(&f, bc);
    sync_pool(&f);
    uint64_t base = fx_num(&f, a, "available");
    dsl_create_opts_t vo = {.type = DSL_TYPE_VOLUME, .volsize = 32 * CAIRN_MIB};
    OK(dsl_dataset_create(f.dp, v, &vo, fx_err, sizeof(fx_err)));
    assert_near(fx_num(&f, a, "available"), base - 32 * CAIRN_MIB);
    OK(dsl_prop_set(f.dp, b, "reservation", "40M", fx_err, sizeof(fx_err)));
    assert_near(fx_num(&f, a, "available"), base - 72 * CAIRN_MIB);
    assert_near(fx_num(&f, bc, "available"), base - 32 * CAIRN_MIB); /* b's is c's to use */
    OK(dsl_prop_set(f.dp, bc, "refreservation", "8M", fx_err, sizeof(fx_err)));
    assert_near(fx_num(&f, a, "available"), base - 72 * CAIRN_MIB); /* inside b's 40M */
    OK(dsl_prop_inherit(f.dp, b, "reservation", fx_err, sizeof(fx_err)));
    assert_near(fx_num(&f, a, "available"), base - 40 * CAIRN_MIB);
    fx_reimport(&f);
    assert_near(fx_num(&f, a, "available"), base - 40 * CAIRN_MIB);
    OK(dsl_dataset_destroy(f.dp, v, false, false, fx_err, sizeof(fx_err)));
    assert_near(fx_num(&f, a, "available"), base - 8 * CAIRN_MIB);
    OK(dsl_dataset_destroy(f.dp, b, true, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    assert_near(fx_num(&f, a, "available"), base);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

static void test_compressratio(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslcomp");
    char a[300];
    fx_ds_name(&f, a, sizeof(a), "c");
    fx_create_fs(&f, a);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, a, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    dmu_object_props_t p = {.recordsize = 65536, .compress = CAIRN_COMPRESS_LZ4,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &obj, tx), 0);
    dmu_tx_commit(tx);
    uint8_t *b = malloc(1024 * 1024);
    for (int i = 0; i < 1024 * 1024; i++) b[i] = (uint8_t)("compressible text "[i % 18]);
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, 1024 * 1024, b, tx), 0);
    dmu_tx_commit(tx);
    free(b);
    dsl_dataset_rele(ds);
    sync_pool(&f);
    dsl_prop_t pr2;
    OK(dsl_prop_get(f.dp, a, "compressratio", &pr2, fx_err, sizeof(fx_err)));
    assert_true(pr2.numeric >= 400); /* at least 4.00x */
    assert_true(fx_num(&f, a, "logicalreferenced") >= 1024 * 1024);
    assert_true(fx_num(&f, a, "referenced") < 512 * 1024);
    OK(dsl_prop_get(f.dp, a, "refcompressratio", &pr2, fx_err, sizeof(fx_err)));
    assert_true(pr2.numeric >= 400);
    assert_int_equal(pr2.source, DSL_SRC_NONE);
    char want[32];
    snprintf(want, sizeof(want), "%llu.%02llux", (unsigned long long)pr2.numeric / 100,
             (unsigned long long)pr2.numeric % 100);
    assert_string_equal(pr2.value, want);
    char err[256];
    assert_int_equal(dsl_prop_set(f.dp, a, "refcompressratio", "2", err, sizeof(err)), -EINVAL);

    /* refcompressratio is of what the root references now; compressratio of
     * everything used, children included. The snapshot keeps its ratio when
     * the head is overwritten with incompressible data (only its metadata
     * still compresses), and a compressible child raises the parent's
     * compressratio only. */
    char sn[400], kid[400];
    snprintf(sn, sizeof(sn), "%s@s", a);
    snprintf(kid, sizeof(kid), "%s/kid", a);
    OK(dsl_snapshot(f.dp, sn, false, fx_err, sizeof(fx_err)));
    fx_create_fs(&f, kid);
    OK(dsl_dataset_hold(f.dp, a, &ds));
    os = dsl_dataset_objset(ds);
    b = malloc(1024 * 1024);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 7);
    for (int i = 0; i < 1024 * 1024; i += 8) {
        uint64_t v = cairn_rng_next(&rng);
        memcpy(b + i, &v, 8);
    }
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, obj, 0, 1024 * 1024, b, tx), 0);
    dmu_tx_commit(tx);
    dsl_dataset_rele(ds);
    OK(dsl_dataset_hold(f.dp, kid, &ds));
    os = dsl_dataset_objset(ds);
    uint64_t kobj;
    tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &kobj, tx), 0);
    for (int i = 0; i < 1024 * 1024; i++) b[i] = (uint8_t)("compressible text "[i % 18]);
    assert_int_equal(dmu_write(os, kobj, 0, 1024 * 1024, b, tx), 0);
    dmu_tx_commit(tx);
    dsl_dataset_rele(ds);
    free(b);
    sync_pool(&f);
    assert_true(fx_num(&f, a, "refcompressratio") < 120);
    assert_true(fx_num(&f, sn, "refcompressratio") >= 400);
    assert_true(fx_num(&f, kid, "refcompressratio") >= 400);
    uint64_t whole = fx_num(&f, a, "compressratio");
    assert_true(whole >= 150 && whole < 400);
    fx_reimport(&f);
    assert_true(fx_num(&f, a, "refcompressratio") < 120);
    assert_true(fx_num(&f, sn, "refcompressratio") >= 400);
    assert_int_equal(fx_num(&f, a, "compressratio"), whole);
    fx_destroy(&f);
}

/* ---------------- the randomized model ---------------- */

#define MAXOBJ 6
#define MREC 4096
#define MNREC 8
#define MAXSNAP 4

typedef struct mstate {     /* content: one byte value per record; 0 = hole/absent */
    bool live[MAXOBJ];
    uint64_t obj[MAXOBJ];
    uint8_t rec[MAXOBJ][MNREC];
} mstate_t;

typedef struct mhead {
    char name[300];
    bool exists;
    mstate_t cur;
    int nsnaps;
    char snapname[MAXSNAP][32];
    mstate_t snap[MAXSNAP];
    int origin_head, origin_snap; /* clone of (head, snap) or -1 */
} mhead_t;

static void verify_state(fx_t *f, const char *name, const mstate_t *m)
{
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f->dp, name, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    uint8_t *b = malloc(MREC);
    for (int i = 0; i < MAXOBJ; i++) {
        if (!m->live[i]) continue;
        for (int r = 0; r < MNREC; r++) {
            assert_int_equal(dmu_read(os, m->obj[i], (uint64_t)r * MREC, MREC, b), 0);
            for (int k = 0; k < MREC; k += 512) assert_int_equal(b[k], m->rec[i][r]);
        }
    }
    free(b);
    dsl_dataset_rele(ds);
}

static void verify_all(fx_t *f, mhead_t *h, int nh)
{
    uint64_t children = 0;
    for (int i = 0; i < nh; i++)
        if (h[i].exists) children += fx_num(f, h[i].name, "used");
    assert_int_equal(fx_num(f, f->name, "usedbychildren"), children); /* no reservations here */
    for (int i = 0; i < nh; i++) {
        if (!h[i].exists) continue;
        verify_state(f, h[i].name, &h[i].cur);
        for (int s = 0; s < h[i].nsnaps; s++) {
            char sn[400];
            snprintf(sn, sizeof(sn), "%s@%s", h[i].name, h[i].snapname[s]);
            verify_state(f, sn, &h[i].snap[s]);
        }
        uint64_t used = fx_num(f, h[i].name, "used");
        assert_int_equal(used, fx_num(f, h[i].name, "usedbydataset") + fx_num(f, h[i].name, "usedbysnapshots") +
                                   fx_num(f, h[i].name, "usedbychildren") + fx_num(f, h[i].name, "usedbyrefreservation"));
    }
}

static bool snap_has_clone(mhead_t *h, int nh, int hi, int si)
{
    for (int i = 0; i < nh; i++)
        if (h[i].exists && h[i].origin_head == hi && h[i].origin_snap == si) return true;
    return false;
}

static void test_random_model(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslmodel");
    uint64_t root_base = fx_num(&f, f.name, "used");
    const char *seed_env = getenv("CAIRN_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20261122;
    int steps = getenv("CAIRN_TEST_LONG") ? 5000 : 1000;
    printf("dsl model: seed %llu, %d steps\n", (unsigned long long)seed, steps);
    /* done[k]: how often kind k ran (write, free, snapshot, destroy snapshot,
     * clone, rollback, destroy clone, export/import); each must run. */
    int done[8] = {0};
    cairn_rng_t rng;
    cairn_rng_seed(&rng, seed);
    mhead_t h[4];
    memset(h, 0, sizeof(h));
    int nh = 4;
    for (int i = 0; i < nh; i++) {
        snprintf(h[i].name, sizeof(h[i].name), "%s/h%d", f.name, i);
        h[i].origin_head = h[i].origin_snap = -1;
    }
    h[0].exists = true;
    fx_create_fs(&f, h[0].name);
    int snapseq = 0;
    for (int step = 0; step < steps; step++) {
        int hi = (int)cairn_rng_below(&rng, (uint64_t)nh);
        if (!h[hi].exists) continue;
        mhead_t *x = &h[hi];
        int op = (int)cairn_rng_below(&rng, 100);
        if (op < 45) { /* write a record (allocating the object if needed) */
            int o = (int)cairn_rng_below(&rng, MAXOBJ), r = (int)cairn_rng_below(&rng, MNREC);
            uint8_t v = (uint8_t)(1 + cairn_rng_below(&rng, 250));
            dsl_dataset_t *ds;
            OK(dsl_dataset_hold(f.dp, x->name, &ds));
            objset_t *os = dsl_dataset_objset(ds);
            if (!x->cur.live[o]) {
                dmu_tx_t *tx = dmu_tx_begin(os);
                assert_int_equal(dmu_object_alloc(os, &pr, &x->cur.obj[o], tx), 0);
                dmu_tx_commit(tx);
                x->cur.live[o] = true;
                memset(x->cur.rec[o], 0, MNREC);
            }
            write_bytes(os, x->cur.obj[o], (uint64_t)r * MREC, MREC, v);
            x->cur.rec[o][r] = v;
            dsl_dataset_rele(ds);
            done[0]++;
        } else if (op < 58) { /* free an object or a record */
            int o = (int)cairn_rng_below(&rng, MAXOBJ);
            if (!x->cur.live[o]) continue;
            dsl_dataset_t *ds;
            OK(dsl_dataset_hold(f.dp, x->name, &ds));
            objset_t *os = dsl_dataset_objset(ds);
            dmu_tx_t *tx = dmu_tx_begin(os);
            if (cairn_rng_below(&rng, 2)) {
                assert_int_equal(dmu_object_free(os, x->cur.obj[o], tx), 0);
                x->cur.live[o] = false;
            } else {
                int r = (int)cairn_rng_below(&rng, MNREC);
                assert_int_equal(dmu_free_range(os, x->cur.obj[o], (uint64_t)r * MREC, MREC, tx), 0);
                x->cur.rec[o][r] = 0;
            }
            dmu_tx_commit(tx);
            dsl_dataset_rele(ds);
            done[1]++;
        } else if (op < 70) { /* snapshot */
            if (x->nsnaps == MAXSNAP) continue;
            char sn[400];
            snprintf(x->snapname[x->nsnaps], 32, "s%d", snapseq++);
            snprintf(sn, sizeof(sn), "%s@%s", x->name, x->snapname[x->nsnaps]);
            OK(dsl_snapshot(f.dp, sn, false, fx_err, sizeof(fx_err)));
            x->snap[x->nsnaps++] = x->cur;
            done[2]++;
        } else if (op < 80) { /* destroy a snapshot */
            if (!x->nsnaps) continue;
            int s = (int)cairn_rng_below(&rng, (uint64_t)x->nsnaps);
            char sn[400], err[256];
            snprintf(sn, sizeof(sn), "%s@%s", x->name, x->snapname[s]);
            if (snap_has_clone(h, nh, hi, s)) {
                assert_int_equal(dsl_dataset_destroy(f.dp, sn, false, false, err, sizeof(err)), -EBUSY);
                continue;
            }
            OK(dsl_dataset_destroy(f.dp, sn, false, false, fx_err, sizeof(fx_err)));
            for (int k = s; k + 1 < x->nsnaps; k++) {
                x->snap[k] = x->snap[k + 1];
                memcpy(x->snapname[k], x->snapname[k + 1], 32);
                for (int c = 0; c < nh; c++)
                    if (h[c].origin_head == hi && h[c].origin_snap == k + 1) h[c].origin_snap = k;
            }
            x->nsnaps--;
            done[3]++;
        } else if (op < 86) { /* clone */
            if (!x->nsnaps) continue;
            int c = -1;
            for (int i = 0; i < nh; i++)
                if (!h[i].exists) c = i;
            if (c < 0) continue;
            int s = (int)cairn_rng_below(&rng, (uint64_t)x->nsnaps);
            char sn[400];
            snprintf(sn, sizeof(sn), "%s@%s", x->name, x->snapname[s]);
            OK(dsl_clone(f.dp, sn, h[c].name, NULL, 0, fx_err, sizeof(fx_err)));
            h[c].exists = true;
            h[c].cur = x->snap[s];
            h[c].nsnaps = 0;
            h[c].origin_head = hi;
            h[c].origin_snap = s;
            done[4]++;
        } else if (op < 92) { /* rollback to the newest snapshot */
            if (!x->nsnaps) continue;
            char sn[400];
            snprintf(sn, sizeof(sn), "%s@%s", x->name, x->snapname[x->nsnaps - 1]);
            OK(dsl_rollback(f.dp, sn, false, fx_err, sizeof(fx_err)));
            x->cur = x->snap[x->nsnaps - 1];
            done[5]++;
        } else if (op < 96) { /* destroy a clone head with its snapshots */
            if (hi == 0 || x->origin_head < 0) continue;
            bool dependents = false;
            for (int s = 0; s < x->nsnaps; s++) dependents |= snap_has_clone(h, nh, hi, s);
            if (dependents) continue;
            OK(dsl_dataset_destroy(f.dp, x->name, true, false, fx_err, sizeof(fx_err)));
            x->exists = false;
            x->nsnaps = 0;
            x->origin_head = x->origin_snap = -1;
            done[6]++;
        } else { /* export / import */
            sync_pool(&f);
            fx_reimport(&f);
            done[7]++;
        }
        if (step % 8 == 0) verify_all(&f, h, nh);
    }
    printf("dsl model: write %d free %d snapshot %d destroy-snapshot %d clone %d rollback %d "
           "destroy-clone %d export/import %d\n",
           done[0], done[1], done[2], done[3], done[4], done[5], done[6], done[7]);
    for (int k = 0; k < 8; k++) assert_true(done[k] > 0);
    verify_all(&f, h, nh);
    fx_export(&f);
    fx_check(&f);
    fx_import(&f);
    verify_all(&f, h, nh);

    /* Tear everything down: clones (newest dependency first), then h0. */
    for (int round = 0; round < 4; round++)
        for (int i = 1; i < nh; i++) {
            if (!h[i].exists) continue;
            bool dependents = false;
            for (int s = 0; s < h[i].nsnaps; s++) dependents |= snap_has_clone(h, nh, i, s);
            if (dependents) continue;
            OK(dsl_dataset_destroy(f.dp, h[i].name, true, false, fx_err, sizeof(fx_err)));
            h[i].exists = false;
            h[i].origin_head = -1;
        }
    OK(dsl_dataset_destroy(f.dp, h[0].name, true, false, fx_err, sizeof(fx_err)));
    sync_pool(&f);
    assert_int_equal(fx_num(&f, f.name, "used"), root_base);
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_reservation),
        cmocka_unit_test(test_available_follows_reservations),
        cmocka_unit_test(test_compressratio),
        cmocka_unit_test(test_random_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
