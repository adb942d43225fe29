/*
 * Task queues (src/util/taskq.c): every task dispatched runs once and a group
 * waits for its own; a queue made with a nice value runs its tasks at that
 * priority, a plain queue at the creator's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/taskq.h>

#include <errno.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

enum { NTASKS = 200 };

typedef struct {
    atomic_int runs, errors; /* counted, not asserted: cmocka asserts only on the test's thread */
    atomic_int nice_seen_min, nice_seen_max;
} seen_t;

static void note_nice(void *arg)
{
    seen_t *s = arg;
    errno = 0;
    int n = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno) atomic_fetch_add(&s->errors, 1);
    int lo = atomic_load(&s->nice_seen_min), hi = atomic_load(&s->nice_seen_max);
    while (n < lo && !atomic_compare_exchange_weak(&s->nice_seen_min, &lo, n)) {}
    while (n > hi && !atomic_compare_exchange_weak(&s->nice_seen_max, &hi, n)) {}
    atomic_fetch_add(&s->runs, 1);
}

static void run_all(taskq_t *tq, seen_t *s)
{
    atomic_init(&s->runs, 0);
    atomic_init(&s->errors, 0);
    atomic_init(&s->nice_seen_min, 100);
    atomic_init(&s->nice_seen_max, -100);
    taskq_group_t g;
    taskq_group_init(&g);
    for (int i = 0; i < NTASKS; i++) taskq_dispatch(tq, note_nice, s, &g);
    taskq_group_wait(&g);
    taskq_group_fini(&g);
    assert_int_equal(atomic_load(&s->runs), NTASKS);
    assert_int_equal(atomic_load(&s->errors), 0);
}

static void test_niced_queue_runs_its_tasks_at_that_priority(void **state)
{
    (void)state;
    errno = 0;
    int mine = getpriority(PRIO_PROCESS, (id_t)gettid());
    assert_int_equal(errno, 0);
    assert_true(mine < 19);

    taskq_t *plain = taskq_create("plain", 3);
    seen_t s;
    run_all(plain, &s);
    assert_int_equal(atomic_load(&s.nice_seen_min), mine);
    assert_int_equal(atomic_load(&s.nice_seen_max), mine);
    taskq_destroy(plain);

    taskq_t *low = taskq_create_niced("low", 3, 19);
    assert_int_equal(taskq_nthreads(low), 3);
    run_all(low, &s);
    assert_int_equal(atomic_load(&s.nice_seen_min), 19);
    assert_int_equal(atomic_load(&s.nice_seen_max), 19);
    taskq_destroy(low);

    /* The creating thread keeps its own. */
    errno = 0;
    assert_int_equal(getpriority(PRIO_PROCESS, (id_t)gettid()), mine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_niced_queue_runs_its_tasks_at_that_priority),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
