/* Failed invariants and the lock-owner check; see include/cairn/assert.h. */
#include <cairn/assert.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void cairn_assert_fail(const char *file, int line, const char *func, const char *expr)
{
    fprintf(stderr, "cairn: %s:%d: %s: assertion failed: %s\n", file, line, func, expr);
    fflush(stderr);
    abort();
}

bool cairn_mutex_held(const pthread_mutex_t *m)
{
#if defined(__GLIBC__)
    /* glibc stores the owner's kernel thread id on every lock, whatever the
     * mutex type, and clears it on unlock (a condition wait included). */
    return m->__data.__owner == (int)gettid();
#else
    pthread_mutex_t *mm = (pthread_mutex_t *)m;
    if (pthread_mutex_trylock(mm) == EBUSY) return true;
    pthread_mutex_unlock(mm);
    return false;
#endif
}

bool cairn_rwlock_wrheld(const pthread_rwlock_t *rw)
{
#if defined(__GLIBC__)
    return rw->__data.__cur_writer == (int)gettid();
#else
    pthread_rwlock_t *r = (pthread_rwlock_t *)rw;
    if (pthread_rwlock_tryrdlock(r) == EBUSY) return true;
    pthread_rwlock_unlock(r);
    return false;
#endif
}
