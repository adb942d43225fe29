/*
 * Volumes against in-memory models:
 *  - concurrency: 8 threads do random reads and writes (512 B .. 16 KiB,
 *    across record boundaries) on ranges they own, checked against a model
 *    per thread, while all of them hammer one shared record: a counter block
 *    updated only with compare_and_write (a lost or torn update shows as a
 *    wrong count) and one 512-byte slot per thread next to it written with
 *    plain partial-record writes (a lost update shows as a wrong slot);
 *  - randomized: thousands of random write / unmap / write_same /
 *    compare_and_write / copy / resize operations on one volume checked
 *    against a byte array, with export/import and flush-then-crash/import
 *    along the way. Seed and length from ZVOL_MODEL_SEED / ZVOL_MODEL_OPS
 *    (fixed defaults for CI).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zvol_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define VBS 8192u
#define MIB (1024ull * 1024)

/* ---------------- concurrency ---------------- */

#define NTHREADS 8
#define REGION (2 * MIB)
#define SHARED_OFF ((uint64_t)NTHREADS * REGION)
#define CONC_VOLSIZE (SHARED_OFF + MIB)

typedef struct conc {
    zvol_t *zv;
    _Atomic uint64_t increments;
    _Atomic int failures;
    uint8_t slot_last[NTHREADS][512];
} conc_t;

typedef struct conc_arg {
    conc_t *c;
    int id;
} conc_arg_t;

#define CFAIL(c, ...)                                                                              \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        atomic_fetch_add(&(c)->failures, 1);                                                       \
    } while (0)

static void counter_block(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 512; i += 8) memcpy(b + i, &v, 8);
}

static void *conc_worker(void *p)
{
    conc_arg_t *a = p;
    conc_t *c = a->c;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1000 + a->id);
    uint64_t base = (uint64_t)a->id * REGION;
    uint8_t *model = cairn_zalloc(REGION);
    uint8_t *buf = malloc(16384), *got = malloc(16384);
    for (int it = 0; it < 400 && !atomic_load(&c->failures); it++) {
        unsigned op = (unsigned)cairn_rng_below(&rng, 10);
        uint64_t len = (cairn_rng_below(&rng, 4) == 0) ? 8192 : 512 * (1 + cairn_rng_below(&rng, 32));
        uint64_t off = 512 * cairn_rng_below(&rng, (REGION - len) / 512 + 1);
        if (cairn_rng_below(&rng, 2)) off = off / 8192 * 8192; /* 8 KiB aligned half the time */
        if (off + len > REGION) off = REGION - len;
        if (op < 4) {
            for (uint64_t i = 0; i < len; i++) buf[i] = (uint8_t)cairn_rng_next(&rng) | 1;
            int fl = cairn_rng_below(&rng, 16) == 0 ? ZVOL_WRITE_FUA : 0;
            int e = zvol_write(c->zv, base + off, len, buf, fl);
            if (e) CFAIL(c, "write %d\n", e);
            memcpy(model + off, buf, len);
        } else if (op < 7) {
            int e = zvol_read(c->zv, base + off, len, got);
            if (e) CFAIL(c, "read %d\n", e);
            if (memcmp(got, model + off, len)) CFAIL(c, "thread %d: read mismatch at %llu\n", a->id,
                                                     (unsigned long long)(base + off));
        } else if (op < 9) {
            /* increment the shared counter with compare_and_write */
            uint8_t cur[512], want[512];
            for (;;) {
                if (zvol_read(c->zv, SHARED_OFF, 512, cur)) {
                    CFAIL(c, "read counter\n");
                    break;
                }
                uint64_t v;
                memcpy(&v, cur, 8);
                counter_block(want, v);
                if (memcmp(cur, want, 512)) {
                    CFAIL(c, "torn counter block\n");
                    break;
                }
                counter_block(want, v + 1);
                uint64_t mis;
                int e = zvol_compare_and_write(c->zv, SHARED_OFF, 512, cur, want, 0, &mis);
                if (e == 0) {
                    atomic_fetch_add(&c->increments, 1);
                    break;
                }
                if (e != -EILSEQ || mis >= 8) {
                    CFAIL(c, "caw %d mis %llu\n", e, (unsigned long long)mis);
                    break;
                }
            }
        } else {
            /* plain write of this thread's slot in the shared record */
            uint8_t s[512];
            for (int i = 0; i < 512; i++) s[i] = (uint8_t)cairn_rng_next(&rng);
            int e = zvol_write(c->zv, SHARED_OFF + 512 * (a->id + 1), 512, s, 0);
            if (e) CFAIL(c, "slot write %d\n", e);
            memcpy(c->slot_last[a->id], s, 512);
        }
        if (a->id == 0 && it % 64 == 63 && zvol_flush(c->zv)) CFAIL(c, "flush\n");
    }
    /* final check of the whole region */
    uint8_t *all = malloc(REGION);
    if (zvol_read(c->zv, base, REGION, all) || memcmp(all, model, REGION))
        CFAIL(c, "thread %d: final region mismatch\n", a->id);
    free(all);
    free(model);
    free(buf);
    free(got);
    return NULL;
}

static void test_concurrency(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zvconc", 512 * MIB);
    objset_t *os = zfix_objset(&f, "vol", true);
    conc_t c = {0};
    zvol_objset_opts_t o = {.volsize = CONC_VOLSIZE, .volblocksize = VBS};
    assert_int_equal(zvol_open_objset(os, &o, &c.zv), 0);
    uint8_t zero_counter[512];
    counter_block(zero_counter, 0);
    pthread_t th[NTHREADS];
    conc_arg_t args[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        args[i] = (conc_arg_t){&c, i};
        assert_int_equal(pthread_create(&th[i], NULL, conc_worker, &args[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&c.failures), 0);
    uint8_t b[512], want[512];
    assert_int_equal(zvol_read(c.zv, SHARED_OFF, 512, b), 0);
    counter_block(want, atomic_load(&c.increments));
    assert_memory_equal(b, want, 512);
    assert_true(atomic_load(&c.increments) > 100);
    for (int t = 0; t < NTHREADS; t++) {
        assert_int_equal(zvol_read(c.zv, SHARED_OFF + 512 * (t + 1), 512, b), 0);
        assert_memory_equal(b, c.slot_last[t], 512);
    }
    zvol_close(c.zv);
    dmu_objset_close(os);
    zfix_done(&f);
}

/* ---------------- randomized model ---------------- */

typedef struct mvol {
    zfix_t f;
    objset_t *os;
    zvol_t *zv;
    uint32_t lbs;
    uint64_t size;
    uint8_t *model; /* capacity MODEL_MAX */
} mvol_t;

#define MODEL_MAX (6 * MIB)

static void mvol_open(mvol_t *m)
{
    m->os = zfix_objset(&m->f, "vol", false);
    zvol_objset_opts_t o = {.volsize = m->size, .volblocksize = VBS, .block_size = m->lbs};
    assert_int_equal(zvol_open_objset(m->os, &o, &m->zv), 0);
    assert_int_equal(zvol_size(m->zv), m->size);
}

static void mvol_close(mvol_t *m)
{
    zvol_close(m->zv);
    dmu_objset_close(m->os);
}

static void mvol_verify(mvol_t *m, const char *when, int op)
{
    uint8_t *b = malloc(m->size);
    assert_int_equal(zvol_read(m->zv, 0, m->size, b), 0);
    if (memcmp(b, m->model, m->size)) {
        uint64_t i = 0;
        while (b[i] == m->model[i]) i++;
        fprintf(stderr, "%s (op %d): mismatch at %llu: got %u want %u\n", when, op,
                (unsigned long long)i, b[i], m->model[i]);
        fail();
    }
    free(b);
}

static void random_range(cairn_rng_t *r, mvol_t *m, uint64_t maxlen, uint64_t *off, uint64_t *len)
{
    uint64_t nb = m->size / m->lbs;
    uint64_t lb = 1 + cairn_rng_below(r, maxlen / m->lbs);
    if (lb > nb) lb = nb;
    *len = lb * m->lbs;
    *off = m->lbs * cairn_rng_below(r, nb - lb + 1);
}

static void run_model(uint32_t lbs, uint64_t seed, int nops)
{
    mvol_t m = {.lbs = lbs, .size = 4 * MIB};
    m.model = cairn_zalloc(MODEL_MAX);
    zfix_make(&m.f, "zvmodel", 512 * MIB);
    dmu_objset_close(zfix_objset(&m.f, "vol", true));
    mvol_open(&m);
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    uint8_t *buf = malloc(MODEL_MAX), *buf2 = malloc(MODEL_MAX);
    char err[256];
    for (int op = 0; op < nops; op++) {
        unsigned k = (unsigned)cairn_rng_below(&r, 100);
        uint64_t off, len;
        if (k < 35) { /* write */
            random_range(&r, &m, 64 * 1024, &off, &len);
            for (uint64_t i = 0; i < len; i++) buf[i] = (uint8_t)cairn_rng_next(&r);
            assert_int_equal(zvol_write(m.zv, off, len, buf, cairn_rng_below(&r, 8) ? 0 : ZVOL_WRITE_FUA), 0);
            memcpy(m.model + off, buf, len);
        } else if (k < 45) { /* unmap */
            random_range(&r, &m, 256 * 1024, &off, &len);
            assert_int_equal(zvol_unmap(m.zv, off, len, 0), 0);
            memset(m.model + off, 0, len);
        } else if (k < 55) { /* write_same */
            random_range(&r, &m, 256 * 1024, &off, &len);
            uint8_t blk[4096];
            bool zero = cairn_rng_below(&r, 3) == 0;
            for (uint32_t i = 0; i < lbs; i++) blk[i] = zero ? 0 : (uint8_t)cairn_rng_next(&r);
            int fl = cairn_rng_below(&r, 2) ? ZVOL_WRITE_UNMAP : 0;
            assert_int_equal(zvol_write_same(m.zv, off, len / lbs, blk, fl), 0);
            for (uint64_t i = 0; i < len; i += lbs) memcpy(m.model + off + i, blk, lbs);
        } else if (k < 67) { /* compare_and_write */
            random_range(&r, &m, 16 * 1024, &off, &len);
            memcpy(buf, m.model + off, len);
            for (uint64_t i = 0; i < len; i++) buf2[i] = (uint8_t)cairn_rng_next(&r);
            uint64_t mis = UINT64_MAX;
            if (cairn_rng_below(&r, 3) == 0) {
                uint64_t at = cairn_rng_below(&r, len);
                buf[at] ^= (uint8_t)(1 + cairn_rng_below(&r, 255));
                assert_int_equal(zvol_compare_and_write(m.zv, off, len, buf, buf2, 0, &mis), -EILSEQ);
                assert_int_equal(mis, at);
            } else {
                assert_int_equal(zvol_compare_and_write(m.zv, off, len, buf, buf2, 0, &mis), 0);
                memcpy(m.model + off, buf2, len);
            }
        } else if (k < 77) { /* copy within the volume, overlapping or not */
            uint64_t soff;
            random_range(&r, &m, 1536 * 1024, &soff, &len);
            off = lbs * cairn_rng_below(&r, (m.size - len) / lbs + 1);
            assert_int_equal(zvol_copy(m.zv, soff, m.zv, off, len, 0), 0);
            memmove(m.model + off, m.model + soff, len);
        } else if (k < 92) { /* read a range */
            random_range(&r, &m, 128 * 1024, &off, &len);
            assert_int_equal(zvol_read(m.zv, off, len, buf), 0);
            assert_memory_equal(buf, m.model + off, len);
        } else if (k < 95) { /* resize: grow, or shrink with force */
            uint64_t ns = (3 + cairn_rng_below(&r, 4)) * MIB; /* 3..6 MiB */
            assert_int_equal(zvol_resize(m.zv, ns, true, err, sizeof(err)), 0);
            if (ns < m.size) memset(m.model + ns, 0, MODEL_MAX - ns);
            m.size = ns;
            assert_int_equal(zvol_size(m.zv), m.size);
        } else if (k < 97) {
            assert_int_equal(zvol_flush(m.zv), 0);
        } else if (k < 98) { /* lba status agrees with the model's zeros */
            off = lbs * cairn_rng_below(&r, m.size / lbs);
            zvol_lba_status_t st;
            assert_int_equal(zvol_get_lba_status(m.zv, off, &st), 0);
            assert_int_equal(st.off, off);
            assert_true(st.len > 0 && st.off + st.len <= m.size);
            /* deallocated means the model has zeros there; mapped means some record
             * of the first one has data */
            if (!st.mapped) {
                for (uint64_t i = 0; i < st.len; i++) assert_int_equal(m.model[off + i], 0);
            } else {
                uint64_t rend = (off / VBS + 1) * VBS;
                bool any = false;
                for (uint64_t i = off; i < rend && i < m.size; i++) any |= m.model[i] != 0;
                assert_true(any);
            }
        } else if (k < 99) {
            mvol_close(&m);
            zfix_reimport(&m.f);
            mvol_open(&m);
            mvol_verify(&m, "after import", op);
        } else {
            /* Flush then crash: everything acknowledged before the flush survives. */
            assert_int_equal(zvol_flush(m.zv), 0);
            mvol_close(&m);
            zfix_crash_reimport(&m.f);
            mvol_open(&m);
            mvol_verify(&m, "after crash", op);
        }
        if (op % 250 == 249) mvol_verify(&m, "periodic", op);
    }
    mvol_verify(&m, "end", nops);
    mvol_close(&m);
    zfix_reimport(&m.f);
    mvol_open(&m);
    mvol_verify(&m, "final import", nops);
    mvol_close(&m);
    zfix_done(&m.f);
    free(buf);
    free(buf2);
    free(m.model);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

static void test_model_512(void **state)
{
    (void)state;
    uint64_t seed = env_u64("ZVOL_MODEL_SEED", 42);
    int nops = (int)env_u64("ZVOL_MODEL_OPS", 1500);
    fprintf(stderr, "model 512: seed %llu ops %d\n", (unsigned long long)seed, nops);
    run_model(512, seed, nops);
}

static void test_model_4k(void **state)
{
    (void)state;
    uint64_t seed = env_u64("ZVOL_MODEL_SEED", 42) + 1;
    int nops = (int)env_u64("ZVOL_MODEL_OPS", 1500);
    fprintf(stderr, "model 4k: seed %llu ops %d\n", (unsigned long long)seed, nops);
    run_model(4096, seed, nops);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrency),
        cmocka_unit_test(test_model_512),
        cmocka_unit_test(test_model_4k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
