/*
 * Task queues: a fixed pool of worker threads draining a FIFO of closures.
 *
 * The I/O pipeline runs compression, checksums and parity on every core by
 * dispatching one task per block; a caller that needs the results waits on a
 * taskq_group, which counts the tasks it dispatched and wakes when all have run.
 */
#ifndef CAIRN_TASKQ_H
#define CAIRN_TASKQ_H

#include <pthread.h>
#include <stddef.h>

typedef struct taskq taskq_t;
typedef void (*taskq_fn)(void *arg);

typedef struct taskq_group {
    pthread_mutex_t lock;
    pthread_cond_t done;
    size_t pending;
} taskq_group_t;

/* nthreads == 0 means one per online CPU. */
taskq_t *taskq_create(const char *name, unsigned nthreads);
/* taskq_create() whose workers run at nice value nice (0..19 lowers their
 * priority: for work that should only take CPU nobody else wants). */
taskq_t *taskq_create_niced(const char *name, unsigned nthreads, int nice);
/* Runs every queued task, then joins the workers. */
void taskq_destroy(taskq_t *tq);
unsigned taskq_nthreads(const taskq_t *tq);

/* Queue fn(arg). With a group, taskq_group_wait() returns only after it ran. */
void taskq_dispatch(taskq_t *tq, taskq_fn fn, void *arg, taskq_group_t *group);

void taskq_group_init(taskq_group_t *g);
void taskq_group_wait(taskq_group_t *g);
void taskq_group_fini(taskq_group_t *g);

#endif
