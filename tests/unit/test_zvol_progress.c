/*
 * Disjoint requests to one volume do not wait for each other, overlapping
 * compare-and-write does (issue 3: iSCSI queue depth 32+). A DMU write hook
 * holds one writer inside zvol_write (its range locked, before its data is
 * in) until another thread has completed a fixed number of writes and reads
 * elsewhere in the volume, reads of the held range and a compare-and-write of
 * a disjoint range - progress is counted, never timed. A compare-and-write
 * overlapping the held range is started too: it must still be waiting when
 * the others are done and must then see the held write's data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_zvol_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define VBS 8192u
#define MIB (1024ull * 1024)
#define TARGET_OPS 300
#define HELD_OFF (4 * MIB)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool armed, writer_inside, gave_up;
static int progress;

static void hold_writer(objset_t *os, uint64_t obj, uint64_t off, uint64_t len)
{
    (void)os;
    (void)obj;
    (void)len;
    pthread_mutex_lock(&mu);
    if (armed && off == HELD_OFF) {
        armed = false;
        writer_inside = true;
        pthread_cond_broadcast(&cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 60; /* a bound against hanging, not a timing check */
        while (progress < TARGET_OPS && !gave_up)
            if (pthread_cond_timedwait(&cv, &mu, &until)) gave_up = true;
        writer_inside = false;
    }
    pthread_mutex_unlock(&mu);
}

typedef struct held {
    zvol_t *zv;
    uint8_t data[VBS];
    int err;
} held_t;

static void *held_main(void *p)
{
    held_t *h = p;
    h->err = zvol_write(h->zv, HELD_OFF, VBS, h->data, 0);
    return NULL;
}

typedef struct caw {
    zvol_t *zv;
    uint8_t expected[VBS], newdata[VBS];
    _Atomic int done;
    int err;
} caw_t;

static void *caw_main(void *p)
{
    caw_t *c = p;
    uint64_t mis = 0;
    c->err = zvol_compare_and_write(c->zv, HELD_OFF, VBS, c->expected, c->newdata, 0, &mis);
    atomic_store(&c->done, 1);
    return NULL;
}

static void test_disjoint_requests_proceed(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zvolprog", 512 * MIB);
    objset_t *os = zfix_objset(&f, "vol", true);
    zvol_objset_opts_t o = {.volsize = 64 * MIB, .volblocksize = VBS, .block_size = 512};
    zvol_t *zv = NULL;
    assert_int_equal(zvol_open_objset(os, &o, &zv), 0);
    uint8_t old[VBS];
    zfill(old, 1, HELD_OFF, VBS);
    assert_int_equal(zvol_write(zv, HELD_OFF, VBS, old, 0), 0);

    static held_t h;
    h.zv = zv;
    zfill(h.data, 2, HELD_OFF, VBS);
    pthread_mutex_lock(&mu);
    armed = true;
    pthread_mutex_unlock(&mu);
    dmu_set_write_hook(hold_writer);
    pthread_t hth, cth;
    pthread_create(&hth, NULL, held_main, &h);
    pthread_mutex_lock(&mu);
    while (!writer_inside) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    /* Expects the held write's data: succeeds only if it runs after it. */
    static caw_t c;
    c.zv = zv;
    memcpy(c.expected, h.data, VBS);
    zfill(c.newdata, 3, HELD_OFF, VBS);
    pthread_create(&cth, NULL, caw_main, &c);

    uint8_t buf[VBS], back[VBS];
    for (int i = 0; i < TARGET_OPS; i++) {
        uint64_t off = (uint64_t)(i % 200) * VBS * 2 + 8 * MIB; /* far from HELD_OFF */
        zfill(buf, 100 + (uint64_t)i, off, VBS);
        assert_int_equal(zvol_write(zv, off, VBS, buf, 0), 0);
        assert_int_equal(zvol_read(zv, off, VBS, back), 0);
        assert_memory_equal(back, buf, VBS);
        /* The held range reads its old data meanwhile. */
        assert_int_equal(zvol_read(zv, HELD_OFF, VBS, back), 0);
        assert_memory_equal(back, old, VBS);
        if (i % 50 == 0) {
            uint64_t mis = 0;
            assert_int_equal(zvol_compare_and_write(zv, off, VBS, buf, buf, 0, &mis), 0);
        }
        /* The overlapping compare-and-write cannot have run yet: the held
         * writer goes on only after the last count below. */
        if (i == TARGET_OPS - 1) assert_int_equal(atomic_load(&c.done), 0);
        pthread_mutex_lock(&mu);
        progress++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_join(hth, NULL);
    pthread_join(cth, NULL);
    dmu_set_write_hook(NULL);
    assert_false(gave_up);
    assert_int_equal(h.err, 0);
    assert_int_equal(c.err, 0);
    assert_int_equal(zvol_read(zv, HELD_OFF, VBS, back), 0);
    assert_memory_equal(back, c.newdata, VBS);

    zvol_close(zv);
    dmu_objset_close(os);
    zfix_done(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disjoint_requests_proceed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
