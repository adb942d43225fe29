/*
 * A task queue is a mutex-protected singly linked FIFO drained by N workers.
 * Tasks are heap nodes; the cost (one malloc per task) is negligible next to
 * the compression or checksum of a block, which is what tasks carry.
 */
#include <cairn/log.h>
#include <cairn/taskq.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct task {
    struct task *next;
    taskq_fn fn;
    void *arg;
    taskq_group_t *group;
} task_t;

struct taskq {
    pthread_mutex_t lock;
    pthread_cond_t work;
    task_t *head, *tail;
    bool stopping;
    unsigned nthreads;
    pthread_t *threads;
    int nice;           /* each worker's, set by itself as it starts */
    char name[32];
};

static void *taskq_worker(void *arg)
{
    taskq_t *tq = arg;
    /* Lowering one's own priority needs no privilege, and only the thread
     * itself can name itself here (setpriority takes a thread id). */
    if (tq->nice && setpriority(PRIO_PROCESS, (id_t)gettid(), tq->nice) != 0)
        log_warn("taskq", "%s: a worker keeps its priority (nice %d refused: %s)", tq->name, tq->nice,
                 strerror(errno));
    pthread_mutex_lock(&tq->lock);
    for (;;) {
        while (!tq->head && !tq->stopping) pthread_cond_wait(&tq->work, &tq->lock);
        task_t *t = tq->head;
        if (!t) break; /* stopping and drained */
        tq->head = t->next;
        if (!tq->head) tq->tail = NULL;
        pthread_mutex_unlock(&tq->lock);
        t->fn(t->arg);
        if (t->group) {
            pthread_mutex_lock(&t->group->lock);
            if (--t->group->pending == 0) pthread_cond_broadcast(&t->group->done);
            pthread_mutex_unlock(&t->group->lock);
        }
        free(t);
        pthread_mutex_lock(&tq->lock);
    }
    pthread_mutex_unlock(&tq->lock);
    return NULL;
}

taskq_t *taskq_create(const char *name, unsigned nthreads)
{
    return taskq_create_niced(name, nthreads, 0);
}

taskq_t *taskq_create_niced(const char *name, unsigned nthreads, int nice)
{
    if (nthreads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = n > 0 ? (unsigned)n : 1;
    }
    taskq_t *tq = cairn_zalloc(sizeof *tq);
    pthread_mutex_init(&tq->lock, NULL);
    pthread_cond_init(&tq->work, NULL);
    cairn_strlcpy(tq->name, name, sizeof tq->name);
    tq->nthreads = nthreads;
    tq->nice = nice;
    tq->threads = cairn_zalloc(sizeof(pthread_t) * nthreads);
    for (unsigned i = 0; i < nthreads; i++) {
        pthread_create(&tq->threads[i], NULL, taskq_worker, tq);
        char tname[16];
        snprintf(tname, sizeof tname, "%.8s/%u", tq->name, i % 1000);
        pthread_setname_np(tq->threads[i], tname);
    }
    return tq;
}

unsigned taskq_nthreads(const taskq_t *tq) { return tq->nthreads; }

void taskq_destroy(taskq_t *tq)
{
    if (!tq) return;
    pthread_mutex_lock(&tq->lock);
    tq->stopping = true;
    pthread_cond_broadcast(&tq->work);
    pthread_mutex_unlock(&tq->lock);
    for (unsigned i = 0; i < tq->nthreads; i++) pthread_join(tq->threads[i], NULL);
    free(tq->threads);
    pthread_mutex_destroy(&tq->lock);
    pthread_cond_destroy(&tq->work);
    free(tq);
}

void taskq_dispatch(taskq_t *tq, taskq_fn fn, void *arg, taskq_group_t *group)
{
    task_t *t = cairn_zalloc(sizeof *t);
    t->fn = fn;
    t->arg = arg;
    t->group = group;
    if (group) {
        pthread_mutex_lock(&group->lock);
        group->pending++;
        pthread_mutex_unlock(&group->lock);
    }
    pthread_mutex_lock(&tq->lock);
    if (tq->tail) tq->tail->next = t; else tq->head = t;
    tq->tail = t;
    pthread_cond_signal(&tq->work);
    pthread_mutex_unlock(&tq->lock);
}

void taskq_group_init(taskq_group_t *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->done, NULL);
    g->pending = 0;
}

void taskq_group_wait(taskq_group_t *g)
{
    pthread_mutex_lock(&g->lock);
    while (g->pending) pthread_cond_wait(&g->done, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void taskq_group_fini(taskq_group_t *g)
{
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->done);
}
