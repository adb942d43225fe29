/*
 * Randomized DMU test against an in-memory model: thousands of writes,
 * free_ranges, object allocs/frees and bonus updates with syncs between
 * them, every object checked after each sync and after export/import, and
 * the pool checked offline at the end (no leaked or doubly used block).
 * Seed: CAIRN_TEST_SEED (default fixed). A second test races writers of the
 * same records against txg syncs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_fixture.h"
#include "wait_until.h"

static uint64_t test_seed(void)
{
    const char *s = getenv("CAIRN_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : 0x5eed2024;
    fprintf(stderr, "seed 0x%llx\n", (unsigned long long)seed);
    return seed;
}

/* ---- the model ---- */

#define MODEL_SPAN (768 * 1024)  /* bytes modelled per object */
#define MODEL_OBJS 10

typedef struct mobj {
    bool live;
    uint64_t obj;
    uint64_t base;        /* where the modelled span starts (some past 4 GiB) */
    uint32_t recordsize;
    uint8_t *data;        /* MODEL_SPAN bytes */
    uint8_t bonus[DMU_BONUS_MAX];
    uint32_t bonuslen;
} mobj_t;

static void verify_all(objset_t *os, mobj_t *m, uint8_t *buf)
{
    for (int i = 0; i < MODEL_OBJS; i++) {
        if (!m[i].live) continue;
        assert_int_equal(dmu_read(os, m[i].obj, m[i].base, MODEL_SPAN, buf), 0);
        if (memcmp(buf, m[i].data, MODEL_SPAN) != 0) {
            for (uint64_t k = 0; k < MODEL_SPAN; k++)
                if (buf[k] != m[i].data[k]) {
                    fprintf(stderr, "object %llu (rs %u) differs at +%llu: %u vs model %u\n",
                            (unsigned long long)m[i].obj, m[i].recordsize, (unsigned long long)k,
                            buf[k], m[i].data[k]);
                    break;
                }
            fail();
        }
        /* Outside the span nothing was ever written. */
        uint8_t z[64];
        assert_int_equal(dmu_read(os, m[i].obj, m[i].base + MODEL_SPAN, sizeof(z), z), 0);
        for (size_t k = 0; k < sizeof(z); k++) assert_int_equal(z[k], 0);
        uint8_t b[DMU_BONUS_MAX];
        uint32_t bl = 0;
        assert_int_equal(dmu_bonus_read(os, m[i].obj, b, sizeof(b), &bl), 0);
        assert_int_equal(bl, m[i].bonuslen);
        assert_memory_equal(b, m[i].bonus, bl);
    }
}

static void test_random_model(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_model", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "model", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "model", &os), 0);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, test_seed());
    mobj_t m[MODEL_OBJS];
    memset(m, 0, sizeof(m));
    for (int i = 0; i < MODEL_OBJS; i++) m[i].data = calloc(1, MODEL_SPAN);
    uint8_t *buf = malloc(MODEL_SPAN);
    const uint32_t sizes[] = {512, 4096, 16384, 131072};
    const cairn_compress_t comps[] = {CAIRN_COMPRESS_OFF, CAIRN_COMPRESS_LZ4, CAIRN_COMPRESS_GZIP(1)};

    dmu_tx_t *tx = NULL;
    const int nops = 3000;
    for (int op = 0; op < nops; op++) {
        if (!tx) tx = dmu_tx_begin(os);
        unsigned r = (unsigned)cairn_rng_below(&rng, 100);
        mobj_t *o = &m[cairn_rng_below(&rng, MODEL_OBJS)];
        if (!o->live || r < 5) {
            if (o->live) { /* free it */
                assert_int_equal(dmu_object_free(os, o->obj, tx), 0);
                o->live = false;
                continue;
            }
            dmu_object_props_t p = {.recordsize = sizes[cairn_rng_below(&rng, 4)],
                                    .compress = comps[cairn_rng_below(&rng, 3)],
                                    .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
            assert_int_equal(dmu_object_alloc(os, &p, &o->obj, tx), 0);
            for (int i = 0; i < MODEL_OBJS; i++)
                if (&m[i] != o && m[i].live) assert_int_not_equal(m[i].obj, o->obj);
            o->live = true;
            o->recordsize = p.recordsize;
            o->base = cairn_rng_below(&rng, 2) ? 0 : (5ULL * CAIRN_GIB + p.recordsize * 3);
            memset(o->data, 0, MODEL_SPAN);
            o->bonuslen = 0;
            continue;
        }
        if (r < 60) { /* write */
            /* Long writes only where they are a few records: keeps the block count (and time) bounded. */
            uint64_t maxlen = cairn_rng_below(&rng, 4) ? 20000 : CAIRN_MIN(300000, 64ULL * o->recordsize);
            uint64_t len = 1 + cairn_rng_below(&rng, maxlen);
            uint64_t off = cairn_rng_below(&rng, MODEL_SPAN - CAIRN_MIN(len, (uint64_t)MODEL_SPAN - 1));
            if (off + len > MODEL_SPAN) len = MODEL_SPAN - off;
            bool zeros = cairn_rng_below(&rng, 8) == 0;
            uint8_t v = (uint8_t)cairn_rng_next(&rng);
            for (uint64_t k = 0; k < len; k++)
                buf[k] = zeros ? 0 : (uint8_t)(v + (k / 7)); /* compressible-ish */
            assert_int_equal(dmu_write(os, o->obj, o->base + off, len, buf, tx), 0);
            memcpy(o->data + off, buf, len);
        } else if (r < 75) { /* free range */
            uint64_t len = 1 + cairn_rng_below(&rng, 200000);
            uint64_t off = cairn_rng_below(&rng, MODEL_SPAN);
            if (off + len > MODEL_SPAN) len = MODEL_SPAN - off;
            if (cairn_rng_below(&rng, 10) == 0) len = UINT64_MAX - o->base - off; /* to the end */
            assert_int_equal(dmu_free_range(os, o->obj, o->base + off, len, tx), 0);
            memset(o->data + off, 0, CAIRN_MIN(len, MODEL_SPAN - off));
        } else if (r < 80) { /* bonus */
            uint32_t bl = (uint32_t)cairn_rng_below(&rng, DMU_BONUS_MAX + 1);
            for (uint32_t k = 0; k < bl; k++) o->bonus[k] = (uint8_t)cairn_rng_next(&rng);
            assert_int_equal(dmu_bonus_write(os, o->obj, o->bonus, bl, tx), 0);
            o->bonuslen = bl;
        } else if (r < 85) { /* spot read, unsynced */
            uint64_t off = cairn_rng_below(&rng, MODEL_SPAN - 100);
            assert_int_equal(dmu_read(os, o->obj, o->base + off, 100, buf), 0);
            assert_memory_equal(buf, o->data + off, 100);
        } else if (r < 95) { /* end the tx: the next op may join a later txg */
            dmu_tx_commit(tx);
            tx = NULL;
        } else if (r < 97) { /* sync and verify everything */
            dmu_tx_commit(tx);
            tx = NULL;
            assert_int_equal(dmu_objset_sync(os), 0);
            verify_all(os, m, buf);
        }
    }
    if (tx) dmu_tx_commit(tx);
    verify_all(os, m, buf);
    assert_int_equal(dmu_objset_sync(os), 0);
    verify_all(os, m, buf);
    dmu_objset_close(os);
    test_pool_reimport(&f);
    assert_int_equal(dmu_objset_open(f.spa, "model", &os), 0);
    verify_all(os, m, buf);
    /* The object list matches the model. */
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
    for (int i = 0; i < MODEL_OBJS; i++) free(m[i].data);
    free(buf);
}

/* ---- writers racing txg syncs on shared records ---- */

#define RACE_WRITERS 4
#define RACE_REC (128 * 1024)
#define RACE_RECS 4
#define RACE_ROUNDS 400

typedef struct race {
    objset_t *os;
    uint64_t obj;
    int id;
    atomic_bool stop;
} race_t;

static void *race_writer(void *arg)
{
    race_t *r = arg;
    uint8_t b[512];
    /* Writer i owns every RACE_WRITERS-th 512-byte piece, so all writers share every record. */
    for (int round = 0; round < RACE_ROUNDS; round++) {
        for (int rec = 0; rec < RACE_RECS; rec++) {
            uint64_t piece = (uint64_t)(round % (RACE_REC / 512 / RACE_WRITERS)) * RACE_WRITERS + r->id;
            uint64_t off = (uint64_t)rec * RACE_REC + piece * 512;
            memset(b, (round & 0x7f) + 1, sizeof(b));
            dmu_tx_t *tx = dmu_tx_begin(r->os);
            assert_int_equal(dmu_write(r->os, r->obj, off, sizeof(b), b, tx), 0);
            dmu_tx_commit(tx);
        }
    }
    return NULL;
}

static void *race_syncer(void *arg)
{
    race_t *r = arg;
    while (!r->stop) {
        assert_int_equal(dmu_objset_sync(r->os), 0);
        usleep(2000);
    }
    return NULL;
}

static void test_concurrent_writers(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_race", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "race", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "race", &os), 0);
    dmu_object_props_t p = {.recordsize = RACE_REC, .compress = CAIRN_COMPRESS_LZ4,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &obj, tx), 0);
    dmu_tx_commit(tx);

    race_t rs[RACE_WRITERS], syncer = {.os = os, .obj = obj};
    pthread_t th[RACE_WRITERS], sth;
    assert_int_equal(pthread_create(&sth, NULL, race_syncer, &syncer), 0);
    for (int i = 0; i < RACE_WRITERS; i++) {
        rs[i] = (race_t){.os = os, .obj = obj, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, race_writer, &rs[i]), 0);
    }
    for (int i = 0; i < RACE_WRITERS; i++) pthread_join(th[i], NULL);
    syncer.stop = true;
    pthread_join(sth, NULL);

    /* Expected: each piece holds the value of the last round that wrote it. */
    uint8_t *want = calloc(1, RACE_REC * RACE_RECS), *got = malloc(RACE_REC * RACE_RECS);
    for (int round = 0; round < RACE_ROUNDS; round++)
        for (int id = 0; id < RACE_WRITERS; id++)
            for (int rec = 0; rec < RACE_RECS; rec++) {
                uint64_t piece = (uint64_t)(round % (RACE_REC / 512 / RACE_WRITERS)) * RACE_WRITERS + id;
                memset(want + (uint64_t)rec * RACE_REC + piece * 512, (round & 0x7f) + 1, 512);
            }
    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(dmu_read(os, obj, 0, RACE_REC * RACE_RECS, got), 0);
        assert_memory_equal(got, want, RACE_REC * RACE_RECS);
        if (pass == 0) {
            dmu_objset_close(os);
            test_pool_reimport(&f);
            assert_int_equal(dmu_objset_open(f.spa, "race", &os), 0);
        }
    }
    free(want);
    free(got);
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

static void *sync_thread(void *arg)
{
    assert_int_equal(dmu_objset_sync(arg), 0);
    return NULL;
}

/* A holder of a closing txg T writes a record after a writer in T+1 copied it:
 * both changes must survive (the T write is carried into T+1's copy). */
static void test_write_behind_newer_txg(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_behind", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "b", NULL), 0);
    objset_t *os;
    assert_int_equal(dmu_objset_open(f.spa, "b", &os), 0);
    dmu_object_props_t p = {.recordsize = 4096, .compress = CAIRN_COMPRESS_OFF,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t obj;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(dmu_object_alloc(os, &p, &obj, tx), 0);
    dmu_tx_commit(tx);
    uint8_t a[100], b[100], r[4096];
    memset(a, 0xaa, sizeof(a));
    memset(b, 0xbb, sizeof(b));

    dmu_tx_t *old = dmu_tx_begin(os);
    uint64_t t = dmu_tx_txg(old);
    assert_int_equal(dmu_write(os, obj, 0, 10, a, old), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sync_thread, os), 0);
    /* Wait for T to close and T+1 to open (the SPA opens it while T quiesces). */
    WAIT_UNTIL(spa_open_txg(f.spa) > t, "txg T+1 opens");
    dmu_tx_t *newer = dmu_tx_begin(os);
    assert_true(dmu_tx_txg(newer) > t);
    assert_int_equal(dmu_write(os, obj, 1000, 100, b, newer), 0);
    assert_int_equal(dmu_write(os, obj, 2000, 100, a, old), 0);
    dmu_tx_commit(old);
    dmu_tx_commit(newer);
    pthread_join(th, NULL);
    for (int pass = 0; pass < 3; pass++) {
        assert_int_equal(dmu_read(os, obj, 0, sizeof(r), r), 0);
        assert_memory_equal(r, a, 10);
        assert_memory_equal(r + 1000, b, 100);
        assert_memory_equal(r + 2000, a, 100);
        if (pass == 0) assert_int_equal(dmu_objset_sync(os), 0);
        if (pass == 1) {
            dmu_objset_close(os);
            test_pool_reimport(&f);
            assert_int_equal(dmu_objset_open(f.spa, "b", &os), 0);
        }
    }
    dmu_objset_close(os);
    test_pool_check(&f);
    test_pool_remove(&f);
}

int main(void)
{
    dmu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_model),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_write_behind_newer_txg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
