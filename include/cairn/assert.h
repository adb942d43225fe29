/*
 * Invariants as checks, not prose.
 *
 * CAIRN_VERIFY(expr) is always compiled in: for the few conditions whose
 * failure would corrupt data or the pool if the program went on (better to
 * stop, as a crash loses nothing that was acknowledged). CAIRN_ASSERT(expr)
 * is compiled in only in debug builds (no NDEBUG, as CMake's Debug type) and
 * in the sanitizer builds (CAIRN_SANITIZE, CAIRN_TSAN define CAIRN_ASSERTS),
 * which the tests run; in a release build it evaluates nothing, so it may
 * name a check that costs something. Either prints file:line, the function
 * and the expression, then aborts (a core, and under ASan a stack).
 *
 * Lock-held checks. A function named *_locked, or one whose comment says the
 * caller holds a lock, states that with
 *     CAIRN_ASSERT(cairn_mutex_held(&x->lock));
 * The mutexes stay plain pthread_mutex_t: glibc already records the owning
 * thread in every mutex it locks (the owner field its error checking and
 * robust mutexes use), so the check reads that rather than adding a wrapper
 * type or a field to each of the ~80 locks. Elsewhere (another C library) it
 * can only tell that someone holds the lock, which is still the common bug.
 */
#ifndef CAIRN_ASSERT_H
#define CAIRN_ASSERT_H

#include <pthread.h>
#include <stdbool.h>

void cairn_assert_fail(const char *file, int line, const char *func, const char *expr)
    __attribute__((noreturn, cold));

/* True when the calling thread holds m (see above for other C libraries). */
bool cairn_mutex_held(const pthread_mutex_t *m);
/* True when the calling thread holds rw for writing (glibc records the
 * writer, not the readers); elsewhere, when rw is held for writing at all. */
bool cairn_rwlock_wrheld(const pthread_rwlock_t *rw);

#define CAIRN_VERIFY(expr) \
    ((expr) ? (void)0 : cairn_assert_fail(__FILE__, __LINE__, __func__, #expr))

#if !defined(NDEBUG) || defined(CAIRN_ASSERTS)
#define CAIRN_ASSERTS_ON 1
#define CAIRN_ASSERT(expr) CAIRN_VERIFY(expr)
#else
#define CAIRN_ASSERTS_ON 0
/* Type-checked, never evaluated: names used only in assertions stay used. */
#define CAIRN_ASSERT(expr) ((void)sizeof(!(expr)))
#endif

#endif
