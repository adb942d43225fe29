/*
 * DSL: the dataset and snapshot layer (src/dsl/).
 *
 * A pool holds a hierarchy of datasets named like paths: "tank" (the root
 * filesystem, created with the pool), "tank/sasdata/work". A dataset is a
 * filesystem or a volume; each has a head object set (DMU) and any number of
 * snapshots ("tank/a@monday"), read-only frozen object sets sharing blocks
 * with the head. A clone is a new head whose first state is a snapshot's.
 *
 * Blocks are shared without reference counts, by birth txg: when a head kills
 * a block (copy-on-write replaced or freed it) born after the head's newest
 * snapshot, nothing else can reference it and it is freed at once; otherwise
 * it goes on the head's dead list. Destroying a snapshot frees exactly the
 * blocks of the next dataset's dead list born after the previous snapshot,
 * and hands its own dead list to the next. The design and its on-disk objects
 * are described at the top of src/dsl/dsl_dataset.c and in
 * docs/ondisk-format.md.
 *
 * Properties follow ZFS: each has a default, may be set locally, and (for
 * inheritable ones) is inherited from the nearest ancestor that sets it; the
 * SOURCE tells which. Statistics (used, available, referenced, ...) are
 * read-only properties. A property the engine does not implement is refused
 * with a clear message, never stored and ignored. User properties are
 * "module:name" and always inherit.
 *
 * Space accounting is exact and persistent: every block born or killed in a
 * dataset's object set is charged to it in the txg where it happens. Quotas
 * (quota: dataset + descendants + snapshots; refquota: referenced) are
 * enforced by dsl_dataset_check_space() before changes are made (-EDQUOT);
 * reservations are subtracted from the available space of everyone else.
 *
 * Every function is thread-safe. Functions taking char *err fill it with one
 * line naming what is wrong when they fail.
 */
#ifndef CAIRN_DSL_H
#define CAIRN_DSL_H

#include <cairn/dmu.h>
#include <cairn/dsl_types.h>
#include <cairn/spa.h>
#include <cairn/types.h>

typedef struct dsl_pool dsl_pool_t;
typedef struct dsl_dataset dsl_dataset_t;

#define DSL_PROP_VALUE_MAX 8192

/* Registers the DSL with the layers below (call once, after or instead of dmu_init()). */
void dsl_init(void);

/* The dataset layer of an imported pool; creates the root filesystem (named like
 * the pool) on a pool that has none. Reference counted: one dsl_pool_t per spa. */
int dsl_pool_open(spa_t *spa, dsl_pool_t **out);
void dsl_pool_close(dsl_pool_t *dp);
/* The background defragmenter (dsl_defrag.c; the mechanism is dmu_defrag_object):
 * while a pool saw no client I/O for idle_ms it gathers the scattered records of
 * its heads' objects. Process-wide (cairnd.conf's defrag_idle_ms); 0 turns it off. */
#define DSL_DEFRAG_IDLE_MS_DEFAULT 10000
void dsl_set_defrag_idle_ms(uint32_t ms);
/* Tests: passes over every head the thread has finished, and a wake-up now. */
uint64_t dsl_defrag_passes(dsl_pool_t *dp);
void dsl_defrag_kick(dsl_pool_t *dp);
spa_t *dsl_pool_spa(dsl_pool_t *dp);

/* ---- properties (dsl_prop_source_t: dsl_types.h) ---- */

typedef struct dsl_prop {
    char name[256];
    char value[DSL_PROP_VALUE_MAX];   /* as `cairn get` shows it (e.g. "128K", "lz4", "1.50x") */
    uint64_t numeric;                 /* exact number for numeric properties (get -p) */
    bool is_numeric;
    dsl_prop_source_t source;
    char inherited_from[DSL_NAME_MAX + 1];
} dsl_prop_t;

/* A "name=value" list for create and clone. */
typedef struct dsl_prop_pair {
    const char *name;
    const char *value;
} dsl_prop_pair_t;

int dsl_prop_get(dsl_pool_t *dp, const char *dsname, const char *prop, dsl_prop_t *out,
                 char *err, size_t errlen);
/* Every property of the dataset (native ones in a fixed order, then user ones). */
int dsl_prop_get_all(dsl_pool_t *dp, const char *dsname,
                     void (*fn)(const dsl_prop_t *p, void *arg), void *arg, char *err,
                     size_t errlen);
/* A volsize smaller than the current one is refused (-EPERM): see dsl_volsize_set. */
int dsl_prop_set(dsl_pool_t *dp, const char *dsname, const char *prop, const char *value,
                 char *err, size_t errlen);
/* Sets a volume's volsize; a smaller one only with shrink. The property alone
 * frees nothing: the caller that shrinks (zvol_resize) frees what lies beyond
 * the new end. */
int dsl_volsize_set(dsl_pool_t *dp, const char *dsname, uint64_t volsize, bool shrink, char *err,
                    size_t errlen);
int dsl_prop_inherit(dsl_pool_t *dp, const char *dsname, const char *prop, char *err,
                     size_t errlen);
/* Names of the native properties, NULL-terminated (for "get all" and completion). */
const char *const *dsl_prop_names(void);

/* ---- datasets ---- */
typedef struct dsl_create_opts {
    dsl_type_t type;              /* FILESYSTEM or VOLUME */
    uint64_t volsize;             /* VOLUME: bytes, a multiple of volblocksize */
    uint32_t volblocksize;        /* VOLUME: 0 = default 8K */
    bool sparse;                  /* VOLUME: no refreservation (thin) */
    bool create_parents;          /* -p */
    const dsl_prop_pair_t *props; /* -o name=value ... */
    size_t nprops;
} dsl_create_opts_t;

int dsl_dataset_create(dsl_pool_t *dp, const char *name, const dsl_create_opts_t *opts,
                       char *err, size_t errlen);
/* recursive: children and snapshots too (-r). A dataset with children or snapshots
 * is refused without it. One that is held open (in use) is always refused with
 * -EBUSY, force or not: the holder still reads its blocks. force belongs to the
 * caller, who releases the holds it owns first (cairnd takes the LUNs of the
 * volumes down with -f; it unexports shares for every destroy). Destroying
 * "fs@snap" destroys a snapshot (a clone's origin: -EBUSY). */
int dsl_dataset_destroy(dsl_pool_t *dp, const char *name, bool recursive, bool force, char *err,
                        size_t errlen);
int dsl_dataset_rename(dsl_pool_t *dp, const char *oldname, const char *newname, char *err,
                       size_t errlen);
/* "fs@snap": O(1), atomic; with recursive, every descendant gets "@snap" in the same txg. */
int dsl_snapshot(dsl_pool_t *dp, const char *snapname, bool recursive, char *err, size_t errlen);
/* Rolls the head back to its newest snapshot (older ones: -EEXIST unless destroy_newer). */
int dsl_rollback(dsl_pool_t *dp, const char *snapname, bool destroy_newer, char *err,
                 size_t errlen);
/* Whether destroy, rename or rollback would be accepted once the caller has released
 * the holds it owns (shares, LUNs): every other refusal with the very error and words
 * the operation would give, changing nothing and waiting for no txg. Holds count only
 * in the operation itself. So a front end asks first and takes a share or LUN down
 * only for an operation that will go ahead: a refused one leaves clients untouched. */
int dsl_dataset_destroy_check(dsl_pool_t *dp, const char *name, bool recursive, char *err,
                              size_t errlen);
int dsl_dataset_rename_check(dsl_pool_t *dp, const char *oldname, const char *newname,
                             char *err, size_t errlen);
int dsl_rollback_check(dsl_pool_t *dp, const char *snapname, bool destroy_newer, char *err,
                       size_t errlen);
int dsl_clone(dsl_pool_t *dp, const char *snapname, const char *clonename,
              const dsl_prop_pair_t *props, size_t nprops, char *err, size_t errlen);

typedef struct dsl_dataset_info {
    char name[DSL_NAME_MAX + 1];
    dsl_type_t type;
    uint64_t guid;                 /* stable, unique in the pool (file handles use it) */
    uint64_t creation_txg;
    uint64_t creation_time;        /* seconds */
    uint64_t used, available, referenced;
} dsl_dataset_info_t;
/* Calls fn for name (or every dataset when name is NULL) and, with recursive, its
 * descendants; types is a mask of 1 << dsl_type_t. Sorted by name. */
int dsl_dataset_list(dsl_pool_t *dp, const char *name, bool recursive, unsigned types,
                     void (*fn)(const dsl_dataset_info_t *info, void *arg), void *arg,
                     char *err, size_t errlen);

/* ---- using a dataset (the POSIX layer and volumes) ---- */
/* Holds a head or snapshot open; snapshots are read-only. */
int dsl_dataset_hold(dsl_pool_t *dp, const char *name, dsl_dataset_t **out);
int dsl_dataset_hold_by_guid(dsl_pool_t *dp, uint64_t guid, dsl_dataset_t **out);
/* The dataset whose object set has this DMU id (a bookmark's, in the pool's
 * error log); -ENOENT when it is gone. */
int dsl_dataset_hold_by_objset_id(dsl_pool_t *dp, uint64_t os_id, dsl_dataset_t **out);
void dsl_dataset_rele(dsl_dataset_t *ds);
objset_t *dsl_dataset_objset(dsl_dataset_t *ds);
dsl_pool_t *dsl_dataset_pool(dsl_dataset_t *ds);
const char *dsl_dataset_name(dsl_dataset_t *ds);   /* valid while held */
/* The name now (a rename may have changed it since the hold), copied. */
void dsl_dataset_get_name(dsl_dataset_t *ds, char *buf, size_t len);
uint64_t dsl_dataset_guid(dsl_dataset_t *ds);
dsl_type_t dsl_dataset_type(dsl_dataset_t *ds);
bool dsl_dataset_is_snapshot(dsl_dataset_t *ds);

/* The effective values of the properties the data path needs, kept current when
 * properties change (read them on every operation: without a change since the
 * last call they are a copy, no lookup and no pool lock). */
typedef struct dsl_dataset_props {
    uint32_t recordsize;           /* filesystems */
    uint32_t volblocksize;         /* volumes */
    uint64_t volsize;
    cairn_compress_t compress;
    cairn_checksum_t checksum;
    uint8_t copies;
    bool atime;
    bool readonly;                 /* readonly=on, or a snapshot */
    enum { DSL_SYNC_STANDARD = 0, DSL_SYNC_ALWAYS = 1, DSL_SYNC_DISABLED = 2 } sync;
    enum { DSL_LOGBIAS_LATENCY = 0, DSL_LOGBIAS_THROUGHPUT = 1 } logbias;
    enum { DSL_CACHE_ALL = 0, DSL_CACHE_METADATA = 1, DSL_CACHE_NONE = 2 } primarycache,
        secondarycache;
    char sharenfs[1024];           /* "off", "on" or an option string */
    char mountpoint[DSL_NAME_MAX + 2];
    /* Grows whenever any dataset's properties may have changed: a caller that
     * derived state from these (an object's compression) redoes it when the
     * gen it saw differs. Never 0. */
    uint64_t gen;
} dsl_dataset_props_t;
void dsl_dataset_get_props(dsl_dataset_t *ds, dsl_dataset_props_t *out);

/* Before dirtying about `bytes` of new data in ds: -EDQUOT when a quota or refquota
 * would be exceeded, -ENOSPC when the pool (less others' reservations) is full,
 * -EROFS when the dataset is read-only. */
int dsl_dataset_check_space(dsl_dataset_t *ds, uint64_t bytes);
/* The same, but -EWOULDBLOCK where it would wait for a txg to sync. */
int dsl_dataset_check_space_nowait(dsl_dataset_t *ds, uint64_t bytes);
/* Whether writes to ds are refused (readonly=on, inherited too, or a snapshot),
 * exact and cheap enough for every write. */
bool dsl_dataset_readonly(dsl_dataset_t *ds);
/* Tests: how much must be available before writes skip the full space
 * computation (default 1 GiB; see dsl_dataset_check_space). */
void dsl_set_space_fast_min(uint64_t bytes);

/* Snapshots of a filesystem, for the POSIX layer's .cairn/snapshot directory:
 * calls fn with each snapshot's short name ("monday") in creation order. */
int dsl_dataset_list_snapshots(dsl_dataset_t *ds, void (*fn)(const char *snap, void *arg),
                               void *arg);

/* ---- pool-wide configuration store (src/dsl/dsl_config.c) ----
 * Records for front ends (iSCSI targets and LUNs) that travel with the pool,
 * hidden from dataset properties. Keys are 1..255 bytes, values up to 8 KiB.
 * set/remove return when the change is on disk. */
int dsl_pool_config_set(dsl_pool_t *dp, const char *key, const void *val, uint32_t len);
int dsl_pool_config_remove(dsl_pool_t *dp, const char *key); /* -ENOENT */
/* -ENOENT; copies min(len, cap) bytes, the full length goes to *len. */
int dsl_pool_config_get(dsl_pool_t *dp, const char *key, void *val, uint32_t cap, uint32_t *len);
/* Several sets (val non-NULL) and removes (val NULL; a key that is not there is
 * no error) in one task, so one txg: durable together when it returns. A key
 * or value out of bounds refuses the whole batch, changing nothing. */
typedef struct dsl_config_change {
    const char *key;
    const void *val;
    uint32_t len;
} dsl_config_change_t;
int dsl_pool_config_apply(dsl_pool_t *dp, const dsl_config_change_t *v, size_t n);
/* Configuration store tasks run since the pool was opened (one per set, remove
 * or batch): how a test counts the txgs the front ends' records cost. */
uint64_t dsl_pool_config_writes(dsl_pool_t *dp);
/* Calls fn for every record whose key starts with prefix (NULL: all). */
int dsl_pool_config_list(dsl_pool_t *dp, const char *prefix,
                         void (*fn)(const char *key, const void *val, uint32_t len, void *arg),
                         void *arg);

/* ---- the pool's command history (src/dsl/dsl_history.c) ----
 * Administrative commands that changed the pool, with their time, in a bounded
 * ring in the pool (oldest dropped first; the first record, the pool's
 * creation, kept). log() returns when the record is on disk. */
typedef void (*dsl_history_fn)(uint64_t when, const char *line, const char *info, void *arg);
int dsl_history_log(dsl_pool_t *dp, uint64_t when, const char *line, const char *info);
/* fn for every record, oldest first; *dropped: records dropped so far. */
int dsl_history_walk(dsl_pool_t *dp, dsl_history_fn fn, void *arg, uint64_t *dropped);

/* The ring itself, on any store (the unit test's memory, the MOS object). Byte
 * offsets in the store: header at 0, first record at FIRST_OFF, ring at RING_OFF. */
#define DSL_HISTORY_FIRST_OFF 4096
#define DSL_HISTORY_FIRST_MAX 4096
#define DSL_HISTORY_RING_OFF 8192
#define DSL_HISTORY_RING ((uint64_t)1024 * 1024 - DSL_HISTORY_RING_OFF) /* 1 MiB in all */
typedef struct dsl_history_io {
    int (*read)(void *arg, uint64_t off, void *buf, uint64_t len);  /* zeros past the end */
    int (*write)(void *arg, uint64_t off, const void *buf, uint64_t len);
    void *arg;
    uint64_t ring_size; /* for a new store: a multiple of 8, at least 4096 */
} dsl_history_io_t;
int dsl_history_ring_append(const dsl_history_io_t *io, uint64_t when, const char *line,
                            const char *info);
int dsl_history_ring_walk(const dsl_history_io_t *io, dsl_history_fn fn, void *arg,
                          uint64_t *dropped);

#endif
