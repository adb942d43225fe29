/* The invariant checks (include/cairn/assert.h): the lock-owner check tells
 * the holder from everyone else, and a failed check stops the program with
 * a line naming where and what. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/assert.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *held_here(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)cairn_mutex_held(&lock);
}

static bool held_by_other_thread(void)
{
    pthread_t t;
    void *r;
    assert_int_equal(pthread_create(&t, NULL, held_here, NULL), 0);
    assert_int_equal(pthread_join(t, &r), 0);
    return r != NULL;
}

static void test_mutex_held(void **state)
{
    (void)state;
    assert_false(cairn_mutex_held(&lock));
    pthread_mutex_lock(&lock);
    assert_true(cairn_mutex_held(&lock));
#if defined(__GLIBC__)
    assert_false(held_by_other_thread()); /* the owner, not just "locked" */
#endif
    pthread_mutex_unlock(&lock);
    assert_false(cairn_mutex_held(&lock));
    assert_false(held_by_other_thread());
}

/* A condition wait gives the lock up and takes it back: held again after. */
static void test_mutex_held_after_cond_wait(void **state)
{
    (void)state;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    pthread_mutex_lock(&lock);
    pthread_cond_timedwait(&cv, &lock, &ts);
    assert_true(cairn_mutex_held(&lock));
    pthread_mutex_unlock(&lock);
    assert_false(cairn_mutex_held(&lock));
}

/* Runs fn in a child; returns its stderr, and whether it died of SIGABRT. */
static bool child_aborts(void (*fn)(void), char *err, size_t errlen)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < errlen && (r = read(p[0], err + n, errlen - 1 - n)) > 0) n += (size_t)r;
    err[n] = '\0';
    close(p[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static int always_zero(void) { return 0; }

static void verify_false(void) { CAIRN_VERIFY(always_zero() == 1); }
static void verify_true(void) { CAIRN_VERIFY(always_zero() == 0); }

static void test_verify(void **state)
{
    (void)state;
    char err[512];
    assert_true(child_aborts(verify_false, err, sizeof(err)));
    assert_non_null(strstr(err, "test_util_assert.c:"));
    assert_non_null(strstr(err, "verify_false"));
    assert_non_null(strstr(err, "always_zero() == 1"));
    assert_false(child_aborts(verify_true, err, sizeof(err)));
    assert_string_equal(err, "");
}

static int evaluations;
static int count_evaluation(void) { return ++evaluations; }

/* The tests are built with assertions on (a Debug or sanitizer build) or off
 * (a release build); either way the macro does what assert.h says. */
static void test_assert_matches_build(void **state)
{
    (void)state;
    evaluations = 0;
    CAIRN_ASSERT(count_evaluation() > 0);
    assert_int_equal(evaluations, CAIRN_ASSERTS_ON ? 1 : 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutex_held),
        cmocka_unit_test(test_mutex_held_after_cond_wait),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_assert_matches_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
