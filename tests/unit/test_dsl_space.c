/*
 * DSL space tests: quotas and refquotas enforced by dsl_dataset_check_space
 * (-EDQUOT), reservations taken from everyone else's `available`, sparse and
 * thick volumes, compressratio, and a randomized model - writes, frees,
 * snapshots, snapshot destroys, clones, rollbacks - checked against an
 * in-memory model (content of every object in every head and snapshot)
 * after each step and across export/import, ending with the space invariant:
 * with every snapshot, clone and object gone, the root's `used` is back at
 * its baseline and spa_check finds no leak and no double free. Freed space
 * comes back on an idle pool, by empty txgs that leave a txg with changes to
 * its timeout.
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
    /* Below what it references now: refused (as zfs does), nothing set. */
    assert_int_equal(dsl_prop_set(f.dp, ab, "refquota", "1M", fx_err, sizeof(fx_err)), -EINVAL);
    assert_int_equal(fx_num(&f, ab, "refquota"), 0);
    char rq[32];
    snprintf(rq, sizeof(rq), "%llu", (unsigned long long)fx_num(&f, ab, "referenced") + 8192);
    OK(dsl_prop_set(f.dp, ab, "refquota", rq, fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_check_space(ds, 64 * 1024), -EDQUOT);
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


/* ---------------- space numbers against a model of blocks ---------------- */

/* Every record written is a new block of exactly SM_RS allocated bytes
 * (compression off, one copy), named by a serial number; the model derives
 * each number of zfs(8)'s space family from which heads and snapshots hold
 * which blocks. Metadata (dnode, indirect and root blocks) is not modelled:
 * each number may exceed the model by SM_META, well under one record. */
#define SM_RS (128 * 1024)
#define SM_NREC 12
#define SM_SNAPS 6
#define SM_META (96 * 1024) /* dnode, indirect and root blocks, two copies each */

typedef struct sm_head {
    char name[300];
    uint64_t obj;
    uint32_t cur[SM_NREC];            /* block serial per record, 0 = hole */
    int nsnaps;
    char snap[SM_SNAPS][16];
    uint32_t snaprec[SM_SNAPS][SM_NREC];
    uint32_t origin[SM_NREC];         /* clone: the origin snapshot's blocks */
} sm_head_t;

static bool sm_in(const uint32_t *v, uint32_t b)
{
    for (int i = 0; i < SM_NREC; i++)
        if (b && v[i] == b) return true;
    return false;
}

static uint64_t sm_count(const uint32_t *v, const uint32_t *const *not, int nnot)
{
    uint64_t n = 0;
    for (int i = 0; i < SM_NREC; i++) {
        if (!v[i]) continue;
        bool other = false;
        for (int k = 0; k < nnot && !other; k++) other = sm_in(not[k], v[i]);
        /* a block held twice in one list (never here) would count once */
        if (!other) n++;
    }
    return n * SM_RS;
}

/* metas: how many generations of metadata the number may hold (a head's
 * own, and one per snapshot: each keeps the dnode and indirect blocks of its
 * time). */
static void sm_expect(fx_t *f, const char *ds, const char *prop, uint64_t want, int metas)
{
    uint64_t got = fx_num(f, ds, prop);
    uint64_t slack = (uint64_t)metas * SM_META;
    if (got < want || got > want + slack)
        fail_msg("%s %s: got %llu, model %llu (+ at most %llu of metadata)", ds, prop,
                 (unsigned long long)got, (unsigned long long)want, (unsigned long long)slack);
}

static void sm_verify(fx_t *f, sm_head_t *h)
{
    const uint32_t *not[SM_SNAPS + 2];
    uint64_t ref = sm_count(h->cur, NULL, 0);
    not[0] = h->origin;
    uint64_t own = sm_count(h->cur, not, 1);
    /* Blocks only snapshots hold: each snapshot's, less the head's, the
     * origin's and those of the snapshots before it (counted there). */
    uint64_t snaps = 0;
    for (int s = 0; s < h->nsnaps; s++) {
        int k = 0;
        not[k++] = h->cur;
        not[k++] = h->origin;
        for (int p = 0; p < s; p++) not[k++] = h->snaprec[p];
        snaps += sm_count(h->snaprec[s], not, k);
    }
    sm_expect(f, h->name, "referenced", ref, 1);
    sm_expect(f, h->name, "usedbydataset", own, 1);
    sm_expect(f, h->name, "usedbysnapshots", snaps, h->nsnaps);
    sm_expect(f, h->name, "used", own + snaps, 1 + h->nsnaps);
    not[0] = h->nsnaps ? h->snaprec[h->nsnaps - 1] : h->origin;
    sm_expect(f, h->name, "written", sm_count(h->cur, not, 1), 1);
    for (int s = 0; s < h->nsnaps; s++) {
        char sn[400];
        snprintf(sn, sizeof(sn), "%s@%s", h->name, h->snap[s]);
        int k = 0;
        not[k++] = h->cur;
        not[k++] = h->origin;
        for (int p = 0; p < h->nsnaps; p++)
            if (p != s) not[k++] = h->snaprec[p];
        sm_expect(f, sn, "used", sm_count(h->snaprec[s], not, k), 1);
        sm_expect(f, sn, "referenced", sm_count(h->snaprec[s], NULL, 0), 1);
    }
}

static void sm_write(fx_t *f, sm_head_t *h, int r, uint32_t serial)
{
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f->dp, h->name, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    uint8_t *b = malloc(SM_RS);
    for (size_t i = 0; i < SM_RS; i += 4) memcpy(b + i, &serial, 4);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_write(os, h->obj, (uint64_t)r * SM_RS, SM_RS, b, tx), 0);
    dmu_tx_commit(tx);
    free(b);
    dsl_dataset_rele(ds);
    h->cur[r] = serial;
}

static void sm_free(fx_t *f, sm_head_t *h, int r)
{
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f->dp, h->name, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_free_range(os, h->obj, (uint64_t)r * SM_RS, SM_RS, tx), 0);
    dmu_tx_commit(tx);
    dsl_dataset_rele(ds);
    h->cur[r] = 0;
}

static void sm_snapshot(fx_t *f, sm_head_t *h, const char *snap)
{
    char sn[400];
    snprintf(sn, sizeof(sn), "%s@%s", h->name, snap);
    OK(dsl_snapshot(f->dp, sn, false, fx_err, sizeof(fx_err)));
    cairn_strlcpy(h->snap[h->nsnaps], snap, sizeof(h->snap[0]));
    memcpy(h->snaprec[h->nsnaps], h->cur, sizeof(h->cur));
    h->nsnaps++;
}

static void sm_destroy_snap(fx_t *f, sm_head_t *h, int s)
{
    char sn[400];
    snprintf(sn, sizeof(sn), "%s@%s", h->name, h->snap[s]);
    OK(dsl_dataset_destroy(f->dp, sn, false, false, fx_err, sizeof(fx_err)));
    for (int i = s; i + 1 < h->nsnaps; i++) {
        memcpy(h->snap[i], h->snap[i + 1], sizeof(h->snap[0]));
        memcpy(h->snaprec[i], h->snaprec[i + 1], sizeof(h->snaprec[0]));
    }
    h->nsnaps--;
}

static void sm_make(fx_t *f, sm_head_t *h, const char *rel)
{
    memset(h, 0, sizeof(*h));
    fx_ds_name(f, h->name, sizeof(h->name), rel);
    fx_create_fs(f, h->name);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f->dp, h->name, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    dmu_object_props_t p = {.recordsize = SM_RS, .compress = CAIRN_COMPRESS_OFF,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &h->obj, tx), 0);
    dmu_tx_commit(tx);
    dsl_dataset_rele(ds);
}

/* used, usedbydataset, usedbysnapshots, written, referenced and every
 * snapshot's used follow a model of which blocks each head and snapshot
 * holds, through writes, overwrites, frees, snapshots, snapshot destroys and
 * a clone, across export/import. A snapshot leaves the head's used as it was
 * (zfs(8)): the blocks it shares with the head stay the head's. */
static void test_space_model(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslsm");
    cairn_rng_t rng;
    const char *seed_env = getenv("CAIRN_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 24;
    fprintf(stderr, "test_space_model: seed %llu (CAIRN_TEST_SEED)\n", (unsigned long long)seed);
    cairn_rng_seed(&rng, seed);
    sm_head_t h[2];
    sm_make(&f, &h[0], "m");
    uint32_t serial = 1;
    /* The case of the report: 100% written, then a snapshot, then removed. */
    for (int r = 0; r < SM_NREC; r++) sm_write(&f, &h[0], r, serial++);
    sync_pool(&f);
    sm_verify(&f, &h[0]);
    uint64_t used0 = fx_num(&f, h[0].name, "used");
    sm_snapshot(&f, &h[0], "s0");
    sm_verify(&f, &h[0]);
    assert_int_equal(fx_num(&f, h[0].name, "used"), used0);
    for (int r = 0; r < SM_NREC; r++) sm_free(&f, &h[0], r);
    sync_pool(&f);
    sm_verify(&f, &h[0]);
    assert_true(fx_num(&f, h[0].name, "usedbysnapshots") >= SM_NREC * SM_RS);

    int nheads = 1, nsnapname = 1;
    for (int step = 0; step < 70; step++) {
        sm_head_t *x = &h[cairn_rng_next(&rng) % (uint64_t)nheads];
        uint64_t op = cairn_rng_next(&rng) % 10;
        int r = (int)(cairn_rng_next(&rng) % SM_NREC);
        if (op < 5) {
            sm_write(&f, x, r, serial++);
        } else if (op < 7) {
            sm_free(&f, x, r);
        } else if (op < 8 && x->nsnaps < SM_SNAPS) {
            char sn[16];
            snprintf(sn, sizeof(sn), "s%d", nsnapname++);
            sm_snapshot(&f, x, sn);
        } else if (op < 9 && x->nsnaps > 0) {
            int s = (int)(cairn_rng_next(&rng) % (uint64_t)x->nsnaps);
            if (nheads == 2 && x == &h[0] && !strcmp(x->snap[s], "origin")) continue;
            sm_destroy_snap(&f, x, s);
        } else if (nheads == 1 && x->nsnaps < SM_SNAPS) {
            /* A clone: what it shares with its origin is the origin's. */
            sm_snapshot(&f, x, "origin");
            char sn[400], cn[300];
            snprintf(sn, sizeof(sn), "%s@origin", x->name);
            fx_ds_name(&f, cn, sizeof(cn), "clone");
            OK(dsl_clone(f.dp, sn, cn, NULL, 0, fx_err, sizeof(fx_err)));
            memset(&h[1], 0, sizeof(h[1]));
            cairn_strlcpy(h[1].name, cn, sizeof(h[1].name));
            h[1].obj = x->obj;
            memcpy(h[1].cur, x->cur, sizeof(x->cur));
            memcpy(h[1].origin, x->cur, sizeof(x->cur));
            nheads = 2;
        }
        sync_pool(&f);
        for (int i = 0; i < nheads; i++) sm_verify(&f, &h[i]);
        if (step % 25 == 24) {
            fx_reimport(&f);
            for (int i = 0; i < nheads; i++) sm_verify(&f, &h[i]);
        }
    }
    fx_export(&f);
    fx_check(&f);
    fx_destroy(&f);
}

/* quota counts snapshots (and descendants), refquota only what the head
 * references: five snapshots of a 4-record file rewritten each time cannot
 * take a 6-record quota past it (the report: 162 MiB under quota=48M). */
static void test_quota_counts_snapshots(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslqsnap");
    sm_head_t h;
    sm_make(&f, &h, "q");
    OK(dsl_prop_set(f.dp, h.name, "quota", "768K", fx_err, sizeof(fx_err))); /* 6 records */
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, h.name, &ds));
    uint32_t serial = 1;
    int refused = -1;
    for (int round = 0; round < 5 && refused < 0; round++) {
        for (int r = 0; r < 4; r++) {
            int e = dsl_dataset_check_space(ds, SM_RS);
            if (e) {
                assert_int_equal(e, -EDQUOT);
                refused = round;
                break;
            }
            sm_write(&f, &h, r, serial++);
        }
        sync_pool(&f);
        char sn[16];
        snprintf(sn, sizeof(sn), "r%d", round);
        if (refused < 0) sm_snapshot(&f, &h, sn);
    }
    /* Round 0 fits (4 records), round 1 is refused at its third record. */
    assert_int_equal(refused, 1);
    assert_true(fx_num(&f, h.name, "used") <= 768 * 1024);
    sm_verify(&f, &h);
    /* refquota ignores what only the snapshots hold. */
    OK(dsl_prop_set(f.dp, h.name, "quota", "none", fx_err, sizeof(fx_err)));
    OK(dsl_prop_set(f.dp, h.name, "refquota", "768K", fx_err, sizeof(fx_err)));
    assert_int_equal(dsl_dataset_check_space(ds, SM_RS), 0);
    for (int r = 0; r < 4; r++) sm_write(&f, &h, r, serial++);
    sync_pool(&f);
    assert_true(fx_num(&f, h.name, "used") > 768 * 1024);
    assert_int_equal(dsl_dataset_check_space(ds, 3 * SM_RS), -EDQUOT);
    dsl_dataset_rele(ds);
    fx_destroy(&f);
}

/* Space freed on a pool that then goes idle comes back by itself: nothing
 * else will ever sync a txg, yet the defer window must pass. */
static void test_frees_return_when_idle(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslidle");
    sm_head_t h;
    sm_make(&f, &h, "idle");
    for (int r = 0; r < SM_NREC; r++) sm_write(&f, &h, r, (uint32_t)r + 1);
    sync_pool(&f);
    spa_space_t before;
    spa_get_space(f.spa, &before);
    for (int r = 0; r < SM_NREC; r++) sm_free(&f, &h, r);
    /* No more waiting for syncs from here on: only the sync thread's own. */
    uint64_t want = before.alloc - (SM_NREC - 1) * SM_RS;
    spa_space_t now = before;
    for (int i = 0; i < 300 && now.alloc > want; i++) {
        usleep(100 * 1000);
        spa_get_space(f.spa, &now);
    }
    if (now.alloc > want)
        fail_msg("alloc still %llu 30 s after freeing %u bytes (was %llu)",
                 (unsigned long long)now.alloc, SM_NREC * SM_RS, (unsigned long long)before.alloc);
    fx_destroy(&f);
}

/* Deferred frees close empty txgs only: a txg with changes in it keeps its
 * timeout. It was closed too, SPA_FREE_SYNC_MS after a sync that freed
 * something, which synced what callers count on staying unsynced until the
 * timeout (the intent log tests' simulated crashes lost less than they must). */
static void test_deferred_frees_leave_changed_txg_open(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dsldefer");
    OK(spa_prop_set(f.spa, "txg_timeout", "300", fx_err, sizeof(fx_err)));
    sm_head_t h;
    sm_make(&f, &h, "defer");
    sm_write(&f, &h, 0, 1);
    sync_pool(&f);
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, h.name, &ds));
    objset_t *os = dsl_dataset_objset(ds);
    uint8_t *b = malloc(SM_RS);
    /* Txg f frees the block record 0 had; those frees stay deferred until
     * f + SPA_DEFER_TXGS has synced. The write to record 1 must come in a txg
     * up to that one, or nothing was deferred when it came: a slow machine
     * may need another round. */
    uint64_t f_txg = 0, t = 0;
    for (int round = 0; round < 100; round++) {
        memset(b, round + 2, SM_RS);
        dmu_tx_t *tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, h.obj, 0, SM_RS, b, tx), 0);
        f_txg = dmu_tx_txg(tx);
        dmu_tx_commit(tx);
        assert_int_equal(spa_txg_wait_synced(f.spa, f_txg), 0);
        tx = dmu_tx_begin(os);
        assert_int_equal(dmu_write(os, h.obj, SM_RS, SM_RS, b, tx), 0);
        t = dmu_tx_txg(tx);
        dmu_tx_commit(tx);
        if (t <= f_txg + SPA_DEFER_TXGS) break;
        assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    }
    assert_true(t <= f_txg + SPA_DEFER_TXGS);
    /* Nothing waits for t, its dirty data is small, its timeout far off. */
    usleep(500 * 1000);
    assert_true(spa_last_synced_txg(f.spa) < t);
    free(b);
    dsl_dataset_rele(ds);
    fx_destroy(&f);
}

/* On a full pool, a write right after a remove waits for the freed space
 * instead of failing: the remove's txg and the defer window are synced for it. */
static void test_write_after_free_on_full_pool(void **state)
{
    (void)state;
    fx_t f = {0};
    fx_make(&f, "dslfull");
    sm_head_t h;
    sm_make(&f, &h, "full");
    char other[300];
    fx_ds_name(&f, other, sizeof(other), "hog");
    fx_create_fs(&f, other);
    for (int r = 0; r < SM_NREC; r++) sm_write(&f, &h, r, (uint32_t)r + 1);
    sync_pool(&f);
    /* Leave about four records free for h. */
    uint64_t avail = fx_num(&f, h.name, "available");
    char resv[64];
    snprintf(resv, sizeof(resv), "%llu", (unsigned long long)(avail - 4 * SM_RS));
    OK(dsl_prop_set(f.dp, other, "reservation", resv, fx_err, sizeof(fx_err)));
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, h.name, &ds));
    assert_int_equal(dsl_dataset_check_space(ds, 8 * SM_RS), -ENOSPC);
    for (int r = 0; r < SM_NREC; r++) sm_free(&f, &h, r); /* in the open txg */
    assert_int_equal(dsl_dataset_check_space(ds, 8 * SM_RS), 0);
    dsl_dataset_rele(ds);
    fx_destroy(&f);
}

/* On raidz, datasets count users' bytes (zfs list), not parity: a file of
 * 32 records uses about 32 records on a 6-wide raidz2, and what is available
 * is about 4/6 of the raw free space, so a quota holds data. The pool's own
 * numbers stay raw. */
static void test_raidz_deflated(void **state)
{
    (void)state;
    fx_t f = {0};
    dsl_init();
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    snprintf(f.dir, sizeof(f.dir), "%s/dslrz.XXXXXX", base);
    assert_non_null(mkdtemp(f.dir));
    spa_vdev_spec_t leaves[6];
    char paths[6][700];
    for (int i = 0; i < 6; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/leaf%d", f.dir, i);
        int fd = open(paths[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 256 * CAIRN_MIB), 0);
        close(fd);
        leaves[i] = (spa_vdev_spec_t){.type = VDEV_TYPE_LEAF, .path = paths[i]};
    }
    spa_vdev_spec_t rz = {.type = VDEV_TYPE_RAIDZ, .nparity = 2, .nchildren = 6, .children = leaves};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &rz};
    spa_create_opts_t opts = {0};
    snprintf(f.name, sizeof(f.name), "rz%u", (unsigned)getpid());
    char err[256] = "";
    assert_int_equal(spa_create(f.name, &root, &opts, &f.spa, err, sizeof(err)), 0);
    fx_open_dsl(&f);
    spa_space_t ss;
    spa_get_space(f.spa, &ss);
    uint64_t avail = fx_num(&f, f.name, "available");
    /* 4 of every 6 sectors are data; the slop (1/32) is taken off too. */
    assert_true(avail > ss.size / 6 * 4 * 9 / 10 && avail < ss.size / 6 * 4);
    sm_head_t h;
    sm_make(&f, &h, "fs");
    for (int r = 0; r < SM_NREC; r++) sm_write(&f, &h, r, (uint32_t)r + 1);
    sync_pool(&f);
    sm_verify(&f, &h);
    spa_space_t after;
    spa_get_space(f.spa, &after);
    assert_true(after.alloc - ss.alloc >= SM_NREC * SM_RS * 3 / 2); /* raw: parity counted */
    /* A quota of 6 records holds 6 records of data (parity would make it 4). */
    sm_head_t q;
    sm_make(&f, &q, "q");
    OK(dsl_prop_set(f.dp, q.name, "refquota", "900K", fx_err, sizeof(fx_err)));
    dsl_dataset_t *ds;
    OK(dsl_dataset_hold(f.dp, q.name, &ds));
    for (int r = 0; r < 6; r++) {
        assert_int_equal(dsl_dataset_check_space(ds, SM_RS), 0);
        sm_write(&f, &q, r, (uint32_t)r + 100);
        sync_pool(&f);
    }
    assert_int_equal(dsl_dataset_check_space(ds, SM_RS), -EDQUOT);
    dsl_dataset_rele(ds);
    sm_verify(&f, &q);
    fx_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_reservation),
        cmocka_unit_test(test_available_follows_reservations),
        cmocka_unit_test(test_compressratio),
        cmocka_unit_test(test_random_model),
        cmocka_unit_test(test_space_model),
        cmocka_unit_test(test_quota_counts_snapshots),
        cmocka_unit_test(test_frees_return_when_idle),
        cmocka_unit_test(test_deferred_frees_leave_changed_txg_open),
        cmocka_unit_test(test_write_after_free_on_full_pool),
        cmocka_unit_test(test_raidz_deflated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
