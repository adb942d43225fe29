/*
 * Many threads writing one object at once (the DMU's shared-lock write path,
 * src/dmu/dnode.c "Locking"). Each thread owns a 512-byte slice of every
 * 4 KiB record of object A, so every record is written partially by all
 * threads at once (read-modify-write of the same record, across txgs that
 * close and sync under them), and owns whole records of object B (whole
 * records swapped in, records beyond the end growing maxblkid). Every write
 * is read back at once by its writer; at the end every slice and record is
 * checked, then again after export/import, and the pool is checked for leaks.
 * A lost update (two writers of one record racing) shows as a wrong slice.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_fixture.h"

#define NTHREADS 8
#define RS 4096u
#define SLICE (RS / NTHREADS)
#define NRECS 96
#define ITERS 1500
#define BREC_PER_THREAD 24

typedef struct shared {
    objset_t *os;
    uint64_t a, b;
    _Atomic int failures;
} shared_t;

typedef struct worker {
    shared_t *sh;
    int id;
    uint32_t a_stamp[NRECS];            /* last stamp written per record of A */
    uint32_t b_stamp[BREC_PER_THREAD];  /* ... per owned record of B */
} worker_t;

static void stamp_fill(uint8_t *p, size_t n, int id, uint32_t stamp)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((stamp * 31 + i * 7 + (size_t)id * 13) | 1);
}

static bool stamp_check(const uint8_t *p, size_t n, int id, uint32_t stamp)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)((stamp * 31 + i * 7 + (size_t)id * 13) | 1)) return false;
    return true;
}

static uint64_t b_record(int id, int k) { return (uint64_t)k * NTHREADS + (uint64_t)id; }

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    shared_t *sh = w->sh;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1000 + (uint64_t)w->id);
    uint8_t slice[SLICE], rec[RS], back[RS];
    for (uint32_t it = 1; it <= ITERS; it++) {
        bool whole = cairn_rng_below(&rng, 4) == 0;
        dmu_tx_t *tx = dmu_tx_begin(sh->os);
        int err;
        uint64_t obj, off, len;
        uint8_t *src;
        if (whole) {
            int k = (int)cairn_rng_below(&rng, BREC_PER_THREAD);
            stamp_fill(rec, RS, w->id, it);
            obj = sh->b, off = b_record(w->id, k) * RS, len = RS, src = rec;
            w->b_stamp[k] = it;
        } else {
            uint64_t r = cairn_rng_below(&rng, NRECS);
            stamp_fill(slice, SLICE, w->id, it);
            obj = sh->a, off = r * RS + (uint64_t)w->id * SLICE, len = SLICE, src = slice;
            w->a_stamp[r] = it;
        }
        err = dmu_write(sh->os, obj, off, len, src, tx);
        dmu_tx_commit(tx);
        if (err || dmu_read(sh->os, obj, off, len, back) || memcmp(back, src, len)) {
            atomic_fetch_add(&sh->failures, 1);
            break;
        }
        /* Now and then push the txg along so writes straddle txgs and syncs. */
        if (it % 256 == (uint32_t)w->id * 16 && dmu_objset_sync(sh->os)) {
            atomic_fetch_add(&sh->failures, 1);
            break;
        }
    }
    return NULL;
}

static void verify(objset_t *os, uint64_t a, uint64_t b, worker_t *ws)
{
    uint8_t *buf = malloc((size_t)NRECS * RS);
    assert_int_equal(dmu_read(os, a, 0, (uint64_t)NRECS * RS, buf), 0);
    for (int t = 0; t < NTHREADS; t++)
        for (int r = 0; r < NRECS; r++) {
            const uint8_t *p = buf + (size_t)r * RS + (size_t)t * SLICE;
            if (ws[t].a_stamp[r] == 0) {
                for (unsigned i = 0; i < SLICE; i++) assert_int_equal(p[i], 0);
            } else if (!stamp_check(p, SLICE, t, ws[t].a_stamp[r])) {
                fprintf(stderr, "object A record %d slice %d: lost stamp %u\n", r, t,
                        ws[t].a_stamp[r]);
                fail();
            }
        }
    for (int t = 0; t < NTHREADS; t++)
        for (int k = 0; k < BREC_PER_THREAD; k++) {
            uint8_t rec[RS];
            assert_int_equal(dmu_read(os, b, b_record(t, k) * RS, RS, rec), 0);
            if (ws[t].b_stamp[k] == 0) {
                for (unsigned i = 0; i < RS; i++) assert_int_equal(rec[i], 0);
            } else {
                assert_true(stamp_check(rec, RS, t, ws[t].b_stamp[k]));
            }
        }
    free(buf);
}

static void test_one_object_many_writers(void **state)
{
    (void)state;
    test_pool_t f;
    test_pool_make(&f, "dmu_conc", 256 * CAIRN_MIB);
    assert_int_equal(dmu_objset_create(f.spa, "data", NULL), 0);
    shared_t sh = {0};
    assert_int_equal(dmu_objset_open(f.spa, "data", &sh.os), 0);
    dmu_object_props_t p = {.recordsize = RS, .compress = CAIRN_COMPRESS_LZ4,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(sh.os);
    assert_int_equal(dmu_object_alloc(sh.os, &p, &sh.a, tx), 0);
    assert_int_equal(dmu_object_alloc(sh.os, &p, &sh.b, tx), 0);
    dmu_tx_commit(tx);

    worker_t *ws = calloc(NTHREADS, sizeof(*ws));
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        ws[i].sh = &sh;
        ws[i].id = i;
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&sh.failures), 0);

    verify(sh.os, sh.a, sh.b, ws);
    assert_int_equal(dmu_objset_sync(sh.os), 0);
    verify(sh.os, sh.a, sh.b, ws);
    /* maxblkid grew under the shared lock's exclusive step to the last record written. */
    uint64_t top = 0;
    for (int t = 0; t < NTHREADS; t++)
        for (int k = 0; k < BREC_PER_THREAD; k++)
            if (ws[t].b_stamp[k] && b_record(t, k) + 1 > top) top = b_record(t, k) + 1;
    dmu_object_info_t info;
    assert_int_equal(dmu_object_info(sh.os, sh.b, &info), 0);
    assert_int_equal(info.max_offset, top * RS);
    dmu_objset_close(sh.os);

    test_pool_reimport(&f);
    assert_int_equal(dmu_objset_open(f.spa, "data", &sh.os), 0);
    verify(sh.os, sh.a, sh.b, ws);
    dmu_objset_close(sh.os);
    test_pool_check(&f);
    test_pool_remove(&f);
    free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_object_many_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
