/*
 * The background defragmenter of a pool: one thread per open dataset layer that,
 * while clients leave the pool alone, runs the DMU's defragmenter
 * (dmu_defrag_object, src/dmu/dmu_defrag.c) over the objects of its datasets.
 *
 * WHY HERE. The DMU knows how to gather an object's scattered records; which
 * object sets may be changed, and when, is the DSL's knowledge: heads only
 * (snapshots are read-only), never while a dataset task (destroy, rollback,
 * snapshot, rename, property) is about to run, and the hold that keeps a head's
 * object set open must not be the one that makes a destroy fail as busy.
 *
 * SCHEDULE. Every second (process-wide knob dsl_set_defrag_idle_ms: cairnd.conf's
 * defrag_idle_ms; 0 turns it off) the thread looks whether the pool saw no
 * client I/O for idle_ms. If so it takes the next open head in object order,
 * lists its objects once per visit, and defragments from where it stopped, at
 * most DEFRAG_STEP_BYTES re-dirtied per step (and the DMU's bound per txg);
 * the first client I/O makes the DMU stop (-EAGAIN) at the next window, and the
 * step resumes there later. A pass over every head that rewrote nothing makes
 * the thread rest DEFRAG_REST_S before the next: data that does not change does
 * not fragment.
 *
 * FENCE. A dataset task first raises dp->defrag_fence and waits (open context,
 * holding nothing a sync needs) until no step is running; the thread starts no
 * step while the fence is up. So a destroy or rollback never sees the thread's
 * hold, and a snapshot never lands in the middle of a window.
 */
#include "dsl_impl.h"

#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFRAG_STEP_BYTES (16ull * 1024 * 1024)
#define DEFRAG_STEP_OBJECTS 256
#define DEFRAG_REST_S 60

static _Atomic uint32_t defrag_idle_ms = DSL_DEFRAG_IDLE_MS_DEFAULT;

void dsl_set_defrag_idle_ms(uint32_t ms) { atomic_store(&defrag_idle_ms, ms); }

typedef struct obj_list {
    uint64_t *v;
    size_t n, cap;
} obj_list_t;

static void collect_obj(uint64_t obj, void *arg)
{
    obj_list_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = cairn_realloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = obj;
}

/* Where the thread is: the head (MOS object) being visited, its objects, the
 * object and record it goes on from. */
typedef struct cursor {
    uint64_t ds_obj;
    obj_list_t objs;
    bool listed;
    size_t idx;
    uint64_t blkid;
    uint64_t pass_bytes; /* re-dirtied since the pass over all heads began */
} cursor_t;

/* The first open head at or after ds_obj (dp->lock held), or NULL. */
static dsl_node_t *next_head(dsl_pool_t *dp, uint64_t ds_obj)
{
    for (size_t i = 0; i < dp->nall; i++) {
        dsl_node_t *n = dp->all[i]; /* sorted by object */
        if (n->obj >= ds_obj && n->phys.type != DSL_TYPE_SNAPSHOT && n->os) return n;
    }
    return NULL;
}

/* One step on head n (held by the caller). Returns false when the head is done. */
static bool step_head(dsl_pool_t *dp, dsl_node_t *n, cursor_t *c, uint32_t idle_ms)
{
    objset_t *os = n->os;
    if (!c->listed) {
        c->objs.n = 0;
        dmu_object_list(os, collect_obj, &c->objs);
        c->listed = true;
        c->idx = 0;
        c->blkid = 0;
    }
    uint64_t step_bytes = 0;
    for (int k = 0; k < DEFRAG_STEP_OBJECTS && c->idx < c->objs.n; k++) {
        if (atomic_load(&dp->defrag_stop) || atomic_load(&dp->defrag_fence)) return true;
        dmu_defrag_opts_t o = {.start_blkid = c->blkid,
                               .max_bytes = DEFRAG_STEP_BYTES - step_bytes,
                               .idle_ms = idle_ms};
        dmu_defrag_stats_t st = {0};
        int err = dmu_defrag_object(os, c->objs.v[c->idx], &o, &st);
        step_bytes += st.bytes;
        c->pass_bytes += st.bytes;
        if (err == -EAGAIN) {
            c->blkid = st.next_blkid; /* busy: go on from here next time */
            return true;
        }
        if (err == -EROFS || err == -EIO || err == -ENOSPC) return false;
        if (!err && step_bytes >= DEFRAG_STEP_BYTES) {
            c->blkid = st.next_blkid;
            return true;
        }
        c->idx++; /* done with it, or it went away (-ENOENT) */
        c->blkid = 0;
    }
    return c->idx < c->objs.n;
}

static void *defrag_main(void *arg)
{
    dsl_pool_t *dp = arg;
    cursor_t c = {0};
    /* Its reads (object lists, records) and what it dirties are no client I/O. */
    spa_background_thread(true);
    pthread_mutex_lock(&dp->lock);
    while (!atomic_load(&dp->defrag_stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&dp->defrag_cv, &dp->lock, &ts);
        if (atomic_load(&dp->defrag_stop)) break;
        uint32_t idle_ms = atomic_load(&defrag_idle_ms);
        if (!idle_ms || dp->defrag_fence || time(NULL) < dp->defrag_rest_until) continue;
        if (spa_client_idle_ns(dp->spa) < (uint64_t)idle_ms * 1000000ull) continue;
        dsl_node_t *n = next_head(dp, c.ds_obj);
        if (!n) {
            /* A pass over every head ended. */
            if (!c.pass_bytes) dp->defrag_rest_until = time(NULL) + DEFRAG_REST_S;
            c.pass_bytes = 0;
            atomic_fetch_add(&dp->defrag_passes, 1);
            c.ds_obj = 0;
            c.listed = false;
            continue;
        }
        if (n->obj != c.ds_obj) c.listed = false;
        c.ds_obj = n->obj;
        n->holds++;
        dp->defrag_busy = true;
        pthread_mutex_unlock(&dp->lock);
        bool more = step_head(dp, n, &c, idle_ms);
        pthread_mutex_lock(&dp->lock);
        n->holds--;
        dp->defrag_busy = false;
        pthread_cond_broadcast(&dp->defrag_cv);
        if (!more) {
            c.ds_obj++;
            c.listed = false;
        }
    }
    pthread_mutex_unlock(&dp->lock);
    free(c.objs.v);
    return NULL;
}

void dsl_defrag_start(dsl_pool_t *dp)
{
    if (spa_readonly(dp->spa)) return;
    if (pthread_create(&dp->defrag_thread, NULL, defrag_main, dp) == 0) dp->defrag_started = true;
    else log_warn("dsl", "pool %s: no defragmenter thread", spa_name(dp->spa));
}

void dsl_defrag_stop(dsl_pool_t *dp)
{
    if (dp->defrag_started) {
        pthread_mutex_lock(&dp->lock);
        atomic_store(&dp->defrag_stop, true);
        pthread_cond_broadcast(&dp->defrag_cv);
        pthread_mutex_unlock(&dp->lock);
        pthread_join(dp->defrag_thread, NULL);
        dp->defrag_started = false;
    }
}

void dsl_defrag_fence(dsl_pool_t *dp)
{
    pthread_mutex_lock(&dp->lock);
    atomic_fetch_add(&dp->defrag_fence, 1);
    while (dp->defrag_busy) pthread_cond_wait(&dp->defrag_cv, &dp->lock);
    pthread_mutex_unlock(&dp->lock);
}

void dsl_defrag_unfence(dsl_pool_t *dp) { atomic_fetch_sub(&dp->defrag_fence, 1); }

uint64_t dsl_defrag_passes(dsl_pool_t *dp) { return atomic_load(&dp->defrag_passes); }

void dsl_defrag_kick(dsl_pool_t *dp)
{
    pthread_mutex_lock(&dp->lock);
    dp->defrag_rest_until = 0;
    pthread_cond_broadcast(&dp->defrag_cv);
    pthread_mutex_unlock(&dp->lock);
}
