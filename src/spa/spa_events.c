/*
 * Pool events (`cairn pool events`): what happened to the pools' devices and
 * scans, newest last, in a bounded ring shared by every pool of the process.
 *
 * The engine posts an event where the thing happens - an I/O or checksum
 * error on a leaf (ereport.*), a leaf changing state (resource.*.statechange),
 * a scan starting or ending, a device attached, removed or taken in as a spare
 * (sysevent.*) - with spa_event_post(), which never blocks on I/O and may be
 * called from any thread, I/O completion threads included. Readers ask for
 * the events after a sequence number they saw last (0: all kept), so a
 * follower (`events -f`) misses none while the ring has not wrapped past it,
 * and may wait for the next one.
 *
 * As with zpool events the ring is memory only: a restart starts it empty.
 * Its bound keeps a disk that fails every I/O from growing the daemon: the
 * oldest events are dropped.
 */
#include "spa_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t events_cv = PTHREAD_COND_INITIALIZER;
static spa_event_t events_ring[SPA_EVENTS_MAX];
static uint64_t events_next_seq = 1; /* sequence number of the next event posted */
static uint64_t events_first_seq = 1; /* oldest kept (after a clear: the next one) */

void spa_event_post(const char *pool, const char *cls, const char *fmt, ...)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&events_lock);
    uint64_t seq = events_next_seq++;
    spa_event_t *ev = &events_ring[seq % SPA_EVENTS_MAX];
    memset(ev, 0, sizeof *ev);
    ev->seq = seq;
    ev->time_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    cairn_strlcpy(ev->pool, pool ? pool : "", sizeof ev->pool);
    cairn_strlcpy(ev->cls, cls, sizeof ev->cls);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ev->detail, sizeof ev->detail, fmt, ap);
        va_end(ap);
    }
    if (events_next_seq - events_first_seq > SPA_EVENTS_MAX)
        events_first_seq = events_next_seq - SPA_EVENTS_MAX;
    pthread_cond_broadcast(&events_cv);
    pthread_mutex_unlock(&events_lock);
}

size_t spa_events_read(uint64_t after, const char *pool, spa_event_t *out, size_t max,
                       uint32_t wait_ms)
{
    pthread_mutex_lock(&events_lock);
    if (wait_ms && events_next_seq <= after + 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += wait_ms / 1000;
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        while (events_next_seq <= after + 1 &&
               pthread_cond_timedwait(&events_cv, &events_lock, &ts) == 0) {
        }
    }
    size_t n = 0;
    uint64_t seq = after + 1 > events_first_seq ? after + 1 : events_first_seq;
    for (; seq < events_next_seq && n < max; seq++) {
        const spa_event_t *ev = &events_ring[seq % SPA_EVENTS_MAX];
        if (pool && *pool && strcmp(ev->pool, pool)) continue;
        out[n++] = *ev;
    }
    pthread_mutex_unlock(&events_lock);
    return n;
}

uint64_t spa_events_last_seq(void)
{
    pthread_mutex_lock(&events_lock);
    uint64_t s = events_next_seq - 1;
    pthread_mutex_unlock(&events_lock);
    return s;
}

size_t spa_events_clear(void)
{
    pthread_mutex_lock(&events_lock);
    size_t n = events_next_seq - events_first_seq;
    events_first_seq = events_next_seq;
    pthread_mutex_unlock(&events_lock);
    return n;
}
