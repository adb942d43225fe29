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

#if defined(__GLIBC__)
/* glibc stores the owner's kernel thread id on every lock it takes, whatever
 * the mutex type, and clears it on unlock (a condition wait included); a
 * rwlock's writer likewise. */
static bool owned_here(int owner) { return owner == (int)gettid(); }

bool cairn_mutex_held(const pthread_mutex_t *m) { return owned_here(m->__data.__owner); }

bool cairn_rwlock_wrheld(const pthread_rwlock_t *rw) { return owned_here(rw->__data.__cur_writer); }
#else
/* Only whether someone holds it: a failed try, undone when it succeeds. */
bool cairn_mutex_held(const pthread_mutex_t *m)
{
    pthread_mutex_t *mm = (pthread_mutex_t *)m;
    if (pthread_mutex_trylock(mm) == EBUSY) return true;
    pthread_mutex_unlock(mm);
    return false;
}

bool cairn_rwlock_wrheld(const pthread_rwlock_t *rw)
{
    pthread_rwlock_t *r = (pthread_rwlock_t *)rw;
    if (pthread_rwlock_tryrdlock(r) == EBUSY) return true;
    pthread_rwlock_unlock(r);
    return false;
}
#endif
