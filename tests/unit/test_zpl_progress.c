/*
 * One client's large write does not hold up other clients (issue 3, "Built
 * for many clients at once"). A DMU write hook stops a writer inside
 * zpl_write - after it took the file's locks, before its data is in - until
 * another thread has completed a fixed number of lookups, getattrs, reads
 * and readdirs in the same filesystem, including of the file being written.
 * The test counts that progress; it never measures time. If an operation
 * waited for the writer, the hook would give up after a long bound (only to
 * let the test fail rather than hang) and the count would fall short.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define TARGET_OPS 400
#define BIG (8u << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static uint64_t held_obj;     /* object whose writer the hook holds */
static bool writer_inside;    /* the writer is in the hook */
static int progress;          /* ops the other thread completed while it was */
static bool gave_up;

static void hold_writer(objset_t *os, uint64_t obj, uint64_t off, uint64_t len)
{
    (void)os;
    (void)off;
    (void)len;
    pthread_mutex_lock(&mu);
    if (obj == held_obj && !writer_inside && progress < TARGET_OPS) {
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

typedef struct writer_arg {
    zpl_node_t *file;
    uint8_t *buf;
    int err;
} writer_arg_t;

static void *writer_main(void *p)
{
    writer_arg_t *w = p;
    w->err = zpl_write(w->file, 0, BIG, w->buf, 0, NULL);
    return NULL;
}

static int count_entry(void *arg, const char *name, uint64_t ino, uint32_t type,
                       uint64_t cookie)
{
    (void)name;
    (void)ino;
    (void)type;
    (void)cookie;
    (*(int *)arg)++;
    return 0;
}

static void test_write_does_not_block_others(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplprog", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *big = NULL, *other = NULL;
    assert_int_equal(
        zpl_create(root, "big", 0644, &zfix_cred, ZPL_CREATE_UNCHECKED, NULL, &big, NULL), 0);
    assert_int_equal(
        zpl_create(root, "other", 0644, &zfix_cred, ZPL_CREATE_UNCHECKED, NULL, &other, NULL), 0);
    uint8_t *buf = malloc(BIG);
    for (size_t i = 0; i < BIG; i++) buf[i] = (uint8_t)(i * 7 + 1);
    /* A first write fixes the record size; the held write is the second. */
    assert_int_equal(zpl_write(big, 0, 1u << 20, buf, 0, NULL), 0);
    assert_int_equal(zpl_write(other, 0, 4096, buf, 0, NULL), 0);
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(big, &a), 0);

    held_obj = a.ino;
    dmu_set_write_hook(hold_writer);
    writer_arg_t w = {.file = big, .buf = buf};
    pthread_t th;
    pthread_create(&th, NULL, writer_main, &w);
    pthread_mutex_lock(&mu);
    while (!writer_inside) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);

    /* The writer now holds big's locks. Everything here must still complete. */
    uint8_t rbuf[4096];
    for (int i = 0; i < TARGET_OPS; i++) {
        zpl_node_t *n = NULL;
        const char *name = (i & 1) ? "big" : "other";
        assert_int_equal(zpl_lookup(root, name, &n), 0);
        assert_int_equal(zpl_getattr(n, &a), 0);
        size_t nread = 0;
        bool eof = false;
        assert_int_equal(zpl_read(n, 0, sizeof(rbuf), rbuf, &nread, &eof), 0);
        assert_int_equal(nread, 4096);
        zpl_node_rele(n);
        int entries = 0;
        bool deof = false;
        assert_int_equal(zpl_readdir(root, 0, count_entry, &entries, &deof), 0);
        assert_true(entries >= 2);
        pthread_mutex_lock(&mu);
        progress++;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    pthread_join(th, NULL);
    dmu_set_write_hook(NULL);
    assert_false(gave_up);
    assert_int_equal(w.err, 0);

    /* The held write completed whole. */
    assert_int_equal(zpl_getattr(big, &a), 0);
    assert_int_equal(a.size, BIG);
    uint8_t *check = malloc(BIG);
    size_t nread = 0;
    bool eof = false;
    assert_int_equal(zpl_read(big, 0, BIG, check, &nread, &eof), 0);
    assert_int_equal(nread, BIG);
    assert_memory_equal(check, buf, BIG);
    zpl_node_rele(big);
    zpl_node_rele(other);
    zpl_node_rele(root);

    /* And it is on disk. */
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "big", &big), 0);
    memset(check, 0, BIG);
    assert_int_equal(zpl_read(big, 0, BIG, check, &nread, &eof), 0);
    assert_int_equal(nread, BIG);
    assert_memory_equal(check, buf, BIG);
    zpl_node_rele(big);
    zpl_node_rele(root);
    free(check);
    free(buf);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_does_not_block_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
