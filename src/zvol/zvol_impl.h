/*
 * ZVOL internals shared by zvol.c (the data path, backend independent) and
 * zvol_dsl.c (volumes that are datasets). See the top of zvol.c.
 */
#ifndef CAIRN_ZVOL_IMPL_H
#define CAIRN_ZVOL_IMPL_H

#include <cairn/zil.h>
#include <cairn/zvol.h>
#include <pthread.h>
#include <stdatomic.h>

/* Range locks are striped over 64 KiB regions of the volume's byte space.
 * Any number of stripes is correct (a region takes stripe region % N); more
 * only means fewer unrelated ranges sharing one. ThreadSanitizer's deadlock
 * detector follows at most 64 locks held by one thread (it stops the process
 * beyond that), and a shrink, or a range of N regions or more, holds every
 * stripe: its build has 32, so the lock order is checked there as well. */
#define ZVOL_REGION_SHIFT 16
#if defined(__SANITIZE_THREAD__)
#define ZVOL_NSTRIPES 32
#else
#define ZVOL_NSTRIPES 512
#endif

typedef struct zvol_state zvol_state_t;

/* What the data path needs to know about the volume, read on every operation. */
typedef struct zvol_props {
    uint64_t volsize;
    bool readonly;
    int sync;                       /* DSL_SYNC_STANDARD / ALWAYS / DISABLED */
    cairn_compress_t compress;
    cairn_checksum_t checksum;
    uint8_t copies;
    int logbias;                    /* DSL_LOGBIAS_LATENCY / THROUGHPUT */
} zvol_props_t;

/* Where volsize, properties and space checks come from: a dataset or, for
 * tests and tools, a plain object set. */
typedef struct zvol_backend {
    void (*get_props)(zvol_state_t *zs, zvol_props_t *out);
    /* nowait: -EWOULDBLOCK rather than wait for a txg (see ZVOL_WRITE_NOWAIT). */
    int (*check_space)(zvol_state_t *zs, uint64_t bytes, bool nowait);
    /* Exact and cheap (every write asks): writes are refused. */
    bool (*is_readonly)(zvol_state_t *zs);
    /* Persists a new volsize (the caller holds every stripe exclusively). */
    int (*set_volsize)(zvol_state_t *zs, uint64_t volsize, char *err, size_t errlen);
    void (*release)(zvol_state_t *zs);
    /* get_props is costly (the DSL resolves inheritance under its pool lock):
     * the data path reads a copy refreshed every ZVOL_PROPS_TTL_MS instead. */
    bool cache_props;
} zvol_backend_t;

#define ZVOL_PROPS_TTL_MS 50

/* One per open volume (object set), shared by every handle of it. */
struct zvol_state {
    objset_t *os;
    spa_t *spa;
    const zvol_backend_t *be;
    void *be_ctx;                   /* the backend's (dsl_dataset_t * or NULL) */
    int refs;                       /* under the registry lock */
    zvol_state_t *next;             /* registry list */

    uint64_t obj;                   /* ZVOL_OBJECT, or 0: no data object (empty snapshot) */
    uint32_t rs;                    /* volblocksize = record size of obj */
    _Atomic uint64_t volsize;       /* objset backend: the current volsize */
    bool os_readonly;               /* objset backend: opened read-only */

    pthread_rwlock_t stripes[ZVOL_NSTRIPES];

    /* Cached properties (cache_props backends): each field atomic on its own;
     * a mix of old and new fields during a refresh is harmless. */
    _Atomic uint64_t c_volsize;
    _Atomic int c_readonly, c_sync, c_compress, c_checksum, c_copies, c_logbias;
    _Atomic uint64_t c_stamp_ns;    /* 0: never filled */
    atomic_flag c_refreshing;

    pthread_mutex_t props_lock;     /* applied */
    dmu_object_props_t applied;     /* compress/checksum/copies last set on obj */

    /* Group commit. */
    pthread_mutex_t gc_lock;
    pthread_cond_t gc_cv;
    uint64_t gc_synced;             /* txgs <= this are known durable */
    uint64_t gc_want;               /* highest txg a waiter needs */
    bool gc_leader;                 /* a thread is in spa_txg_wait_synced for us */
    _Atomic uint64_t last_write_txg;/* highest txg of a committed change */
    _Atomic uint64_t gc_syncs;      /* syncs waited for (stats, tests) */

    struct zilog *zil;              /* the intent log (src/zil); NULL until opened */
};

struct zvol {
    zvol_state_t *zs;
    uint32_t lbs;
    bool readonly;
};

/* Finds the state of os in the registry (taking a reference) or creates it via
 * init (called under the registry lock with a zeroed state whose os, spa, be,
 * be_ctx are filled; it sets obj, rs, volsize...). *created tells which; when
 * false the caller drops its own backend context. */
int zvol_state_get(objset_t *os, const zvol_backend_t *be, void *be_ctx,
                   int (*init)(zvol_state_t *zs, void *arg), void *arg, zvol_state_t **out,
                   bool *created);
/* Opens or creates the data object; object props from p. readonly: never create. */
int zvol_object_setup(zvol_state_t *zs, uint32_t volblocksize, const zvol_props_t *p,
                      bool readonly);
zvol_t *zvol_handle_new(zvol_state_t *zs, uint32_t lbs, bool readonly);

#endif
