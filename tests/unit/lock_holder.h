/*
 * A mutex held by another thread while the test's thread goes on: how a test
 * stands in for a txg sync holding the pool's lock. Taking the lock in the
 * test's own thread instead would look, to ThreadSanitizer, like the code
 * taking that lock before every lock it takes next (a lock order the code
 * never has), and it would report a potential deadlock that is the test's.
 */
#ifndef TEST_LOCK_HOLDER_H
#define TEST_LOCK_HOLDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct lock_holder {
    pthread_t thread;
    pthread_mutex_t *lock;    /* the lock held */
    pthread_mutex_t gate;     /* guards the two flags */
    pthread_cond_t cv;
    bool holding, release;
} lock_holder_t;

static void *lock_holder_run(void *arg)
{
    lock_holder_t *h = arg;
    pthread_mutex_lock(h->lock);
    pthread_mutex_lock(&h->gate);
    h->holding = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release) pthread_cond_wait(&h->cv, &h->gate);
    pthread_mutex_unlock(&h->gate);
    pthread_mutex_unlock(h->lock);
    return NULL;
}

/* Returns once the other thread holds lock. */
static inline void lock_holder_start(lock_holder_t *h, pthread_mutex_t *lock)
{
    *h = (lock_holder_t){.lock = lock};
    pthread_mutex_init(&h->gate, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->thread, NULL, lock_holder_run, h)) abort();
    pthread_mutex_lock(&h->gate);
    while (!h->holding) pthread_cond_wait(&h->cv, &h->gate);
    pthread_mutex_unlock(&h->gate);
}

/* Returns once the lock has been given back. */
static inline void lock_holder_stop(lock_holder_t *h)
{
    pthread_mutex_lock(&h->gate);
    h->release = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->gate);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->gate);
}

#endif
