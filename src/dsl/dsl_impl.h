/*
 * DSL internals shared by the src/dsl sources. The design is described at the top of
 * dsl_dataset.c.
 */
#ifndef CAIRN_DSL_IMPL_H
#define CAIRN_DSL_IMPL_H

#include <cairn/dsl.h>
#include <cairn/zap.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define DSL_PHYS_MAGIC 0x3153445f4e524943ULL /* "CIRN_DS1" */

/* One dataset (head or snapshot) on disk: the bonus buffer of its MOS object. */
typedef struct dsl_ds_phys {
    uint64_t magic;
    uint64_t type;            /* dsl_type_t */
    uint64_t guid;
    uint64_t creation_txg;
    uint64_t creation_time;
    uint64_t parent;          /* head: parent head's object (0: the root); snapshot: its head */
    uint64_t props_zap;       /* head: local properties (0: none yet) */
    uint64_t prev_snap;       /* newest older snapshot of the same head (0: none) */
    uint64_t prev_snap_txg;   /* its txg, or the origin's for a clone without one; 0 */
    uint64_t next_snap;       /* snapshot: the next newer one (0: the head is next) */
    uint64_t origin;          /* clone: origin snapshot's object */
    uint64_t origin_txg;      /* clone: origin snapshot's txg (blocks up to it are not ours) */
    uint64_t num_clones;      /* snapshot: clones made from it */
    uint64_t deadlist_obj;    /* MOS object of block pointers (0: none yet) */
    uint64_t dead_count;      /* entries in it */
    uint64_t dead_bytes, dead_comp, dead_uncomp;
    uint64_t referenced, comp, uncomp; /* all blocks reachable from its root */
    uint64_t snapused, snapused_uncomp; /* head: dead-list bytes born after origin_txg */
    /* Stored and logical bytes of the level-0 records of plain objects among
     * `referenced`: what compressratio is a ratio of (metadata - dnode blocks
     * of zeros, indirect blocks - would make an empty dataset read 70x). */
    uint64_t data_comp, data_uncomp; /* were reserved[0..1]: zero on older pools */
    uint64_t snap_volsize;            /* snapshot of a volume: its volsize then (0: unknown) */
    uint64_t reserved[5];             /* [4]: the root's config store (dsl_config.c) */
} dsl_ds_phys_t;
_Static_assert(sizeof(dsl_ds_phys_t) <= DMU_BONUS_MAX, "dataset phys fits a bonus buffer");

typedef struct dsl_propval {
    char *name;
    char *value;
} dsl_propval_t;

/* What snap_unique() has summed so far of the next dataset's dead list: that
 * list only grows between the changes that bump its dead_gen, so a later call
 * sums only the entries added since. */
typedef struct dsl_unique_cache {
    bool valid;
    uint64_t next_obj, next_dead_gen, lo_txg, hi_txg; /* what the sums are of */
    uint64_t counted;         /* entries of (flushed list, then pending) summed */
    uint64_t bytes, logical;  /* allocated and logical sizes of those in (lo, hi] */
} dsl_unique_cache_t;

typedef struct dsl_node dsl_node_t;
struct dsl_node {
    uint64_t obj;             /* MOS object */
    dsl_ds_phys_t phys;
    char name[DSL_NAME_MAX + 1]; /* short: "b" of "pool/a/b", "snap" of "a@snap" */
    dsl_node_t *parent;       /* head: parent head; snapshot: its head */
    dsl_node_t **children;    /* heads */
    size_t nchildren;
    dsl_node_t **snaps;       /* oldest first */
    size_t nsnaps;
    dsl_propval_t *props;     /* local properties */
    size_t nprops;
    objset_t *os;             /* heads: open with hooks; snapshots: opened on demand */
    int holds;                /* dsl_dataset_hold()s */
    bool dirty;               /* phys must be written in the syncing txg */
    cairn_blkptr_t *pending;  /* dead-list entries not yet written */
    size_t npending, cappending;
    uint64_t dead_gen;        /* new whenever the dead list is replaced or moved */
    dsl_unique_cache_t unique;/* snapshot: its used/logicalused so far */
    dsl_pool_t *dp;
};

typedef struct dsl_task {
    int (*fn)(dsl_pool_t *dp, void *arg, uint64_t txg);
    void *arg;
    uint64_t txg;
    int result;
    bool done;
    bool keeps_datasets;      /* changes no dataset's properties or space: props_gen stays */
    struct dsl_task *next;
} dsl_task_t;

struct dsl_pool {
    spa_t *spa;
    objset_t *mos;
    int refcount;             /* under the global list lock */
    pthread_mutex_t lock;     /* the tree, properties, holds, tasks */
    pthread_mutex_t stat_lock;/* counters the sync thread updates from the block hooks */
    pthread_cond_t task_cv;
    uint64_t registry;        /* MOS ZAP: "<obj>" -> short name, every dataset */
    dsl_node_t *root;
    dsl_node_t **all;         /* every node, sorted by object (dsl_node_by_obj) */
    size_t nall, capall;
    dsl_node_t **reservers;   /* heads with a local (ref)reservation */
    size_t nreservers;
    bool reservers_stale;     /* rebuild before use: the tree or those properties changed */
    dsl_task_t *tasks;
    uint64_t dead_gen_seq;    /* source of dsl_node_t.dead_gen */
    /* Bumped (under lock) after every task of the dataset tree: any dataset's
     * effective properties may have changed (a set, an inherit, a rename under
     * another parent), and its space limits (a quota, a reservation elsewhere,
     * a destroy): what a hold computed at an older value may be stale
     * (dsl_dataset_get_props, dsl_dataset_check_space). Tasks of the pool's own
     * records (dsl_run_pool_task: the configuration store, the history) leave
     * it alone, so the front ends' frequent record writes cost no dataset its
     * cached properties. Starts at 1. */
    _Atomic uint64_t props_gen;
    _Atomic uint64_t config_writes; /* configuration store tasks run (dsl_pool_config_writes) */
    dsl_pool_t *next_pool;
    /* The background defragmenter (dsl_defrag.c); the fields under lock but the atomics. */
    pthread_t defrag_thread;
    bool defrag_started;
    pthread_cond_t defrag_cv;   /* wakes the thread; a step ended (defrag_busy cleared) */
    bool defrag_busy;           /* a step runs (the thread holds a head) */
    time_t defrag_rest_until;   /* after a pass that rewrote nothing */
    _Atomic bool defrag_stop;
    _Atomic unsigned defrag_fence; /* dataset tasks waiting or running: no step starts */
    _Atomic uint64_t defrag_passes; /* passes over every head ended */
};

struct dsl_dataset {
    dsl_pool_t *dp;
    dsl_node_t *node;
    char name[DSL_NAME_MAX + 1];
    /* The write check's last full answer (see dsl_dataset_check_space), read
     * without a lock under a sequence count: odd while the slow path, under
     * dp->lock, rewrites the fields. */
    _Atomic uint64_t fp_seq;
    _Atomic uint64_t fp_gen;   /* dp->props_gen it was computed at (0: never) */
    _Atomic uint64_t fp_claim; /* spa_space_claimed() then */
    _Atomic uint64_t fp_room;  /* claims allowed before asking again (0: always ask) */
    _Atomic int fp_rofs;       /* -EROFS when the dataset is read-only, else 0 */
    /* dsl_dataset_get_props() as of props.gen (0: never read), so the data
     * path reads them without dp->lock while no task ran since. */
    pthread_rwlock_t props_lock;
    dsl_dataset_props_t props;
};

/* dsl_dataset.c */
/* dp->lock for a call that may run on a thread in the SPA's memory-only mode
 * (the NFS server's I/O thread, spa.h): a txg sync holds the lock across the
 * pool's dataset tasks, which may read the disks, so such a thread takes it
 * only when it is free and otherwise is refused like a block read (its
 * caller's answer is dropped and the call runs where it may wait). Any other
 * thread waits for it as usual. 0, or -EWOULDBLOCK having taken nothing. */
static inline int dsl_pool_lock(dsl_pool_t *dp)
{
    if (pthread_mutex_trylock(&dp->lock) == 0) return 0;
    int refused = spa_memory_only_refuse();
    if (refused) return refused;
    pthread_mutex_lock(&dp->lock);
    return 0;
}
dsl_node_t *dsl_lookup(dsl_pool_t *dp, const char *name); /* dp->lock held */
void dsl_node_fullname(const dsl_node_t *n, char *buf, size_t len);
int dsl_run_task(dsl_pool_t *dp, int (*fn)(dsl_pool_t *, void *, uint64_t), void *arg);
/* The same for a task that changes no dataset's properties or space (records of
 * the pool itself): it leaves dp->props_gen, and so every cached answer, alone. */
int dsl_run_pool_task(dsl_pool_t *dp, int (*fn)(dsl_pool_t *, void *, uint64_t), void *arg);
dsl_node_t *dsl_node_by_obj(dsl_pool_t *dp, uint64_t obj);
/* dsl_defrag.c: the thread (started once the pool is loaded, stopped first at
 * close) and the fence a dataset task puts up around itself. */
void dsl_defrag_start(dsl_pool_t *dp);
void dsl_defrag_stop(dsl_pool_t *dp);
void dsl_defrag_fence(dsl_pool_t *dp);
void dsl_defrag_unfence(dsl_pool_t *dp);

/* Space numbers of a node (dp->lock held; reads stat_lock). */
typedef struct dsl_space {
    uint64_t used, available, referenced, logicalused, logicalreferenced;
    uint64_t usedbysnapshots, usedbydataset, usedbychildren, usedbyrefreservation;
    uint64_t written;
    /* Stored and logical bytes of data records (dsl_ds_phys_t.data_comp): of
     * the dataset and its descendants, and (ref) of what its root references. */
    uint64_t comp, uncomp, refcomp, refuncomp;
} dsl_space_t;
void dsl_node_space(dsl_pool_t *dp, dsl_node_t *n, dsl_space_t *out);

/* Whether setting prop (quota, refquota, reservation, refreservation) to v
 * on head n may be done: a quota below what is used or referenced now, or a
 * reservation the pool cannot give, is refused with one line in err
 * (-EINVAL, -ENOSPC). Other properties: 0. dp->lock held (syncing context). */
int dsl_space_check_limit(dsl_pool_t *dp, dsl_node_t *n, const char *prop, uint64_t v,
                          char *err, size_t errlen);

/* A head's reservation or refreservation changed (dsl_prop.c). */
void dsl_reservers_changed(dsl_pool_t *dp);

/* dsl_prop.c */
const char *dsl_prop_local(const dsl_node_t *n, const char *name); /* NULL if unset */
/* Effective value of a native property as text and number (dp->lock held). */
int dsl_prop_effective(dsl_pool_t *dp, dsl_node_t *n, const char *name, char *val, size_t len,
                       uint64_t *num, dsl_prop_source_t *src, char *from, size_t fromlen);
uint64_t dsl_prop_num(dsl_pool_t *dp, dsl_node_t *n, const char *name); /* dp->lock held */
/* Validates (and normalises) a value for setting; err filled on failure. create: at creation. */
int dsl_prop_validate(dsl_node_t *n, dsl_type_t type, const char *name, const char *value,
                      bool create, char *norm, size_t normlen, char *err, size_t errlen);
/* In syncing context: stores / removes a local property. */
int dsl_prop_store(dsl_pool_t *dp, dsl_node_t *n, const char *name, const char *value,
                   dmu_tx_t *tx);
int dsl_prop_load(dsl_pool_t *dp, dsl_node_t *n);
void dsl_prop_free_all(dsl_node_t *n);

#endif
