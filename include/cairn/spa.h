/*
 * SPA: the storage pool allocator, the layer that makes a set of vdevs into a
 * pool (src/spa/).
 *
 * It owns the vdev tree, the labels and their uberblock ring, the allocator
 * and its persistent space map log, the transaction-group (txg) machinery and
 * the block pipeline: compress -> checksum -> allocate -> write every copy, and
 * read -> verify -> self-heal -> decompress. It knows nothing of objects: the
 * layer above (the DMU) registers an upper-layer ops table and is called to
 * initialise a new pool, to write out a txg (returning the new root block
 * pointer of its meta object set, the MOS), and to enumerate every block it
 * references (for scrub and the offline check).
 *
 * Transaction groups. At any moment one txg is open (accepting changes) and at
 * most one is syncing. A writer brackets its changes with spa_tx_hold() and
 * spa_tx_rele(); the sync thread closes the open txg on a timer (txg_timeout,
 * 5 s) or when its dirty data passes a threshold, waits for its holders to
 * leave, then writes it out: the upper layer's blocks, the space map log block,
 * a flush of every leaf, the uberblock into every label, another flush. Only
 * then is the txg durable and spa_txg_wait_synced() returns for it. Writers are
 * throttled in spa_tx_hold() while dirty data runs ahead of the disks.
 *
 * Frees are deferred: a block freed in txg T becomes allocatable again only
 * after txg T + SPA_DEFER_TXGS is durable, so the last few uberblocks (which
 * import may fall back to) still point at intact trees.
 */
#ifndef CAIRN_SPA_H
#define CAIRN_SPA_H

#include <cairn/blkptr.h>
#include <cairn/rbuf.h>
#include <cairn/types.h>
#include <cairn/vdev.h>

typedef struct spa spa_t;

/* Where a block sits in the layer above's trees, as ZFS's bookmark: object set
 * (the DMU's id; the MOS is 0), object (0: the object set's meta-dnode), level
 * (0: a record, >0: an indirect block, -1: the object set's root block) and the
 * block's index at that level. The pool knows blocks only by pointer; the layer
 * above names them so that a block with no good copy can be reported as a file
 * and an offset (the error log below). */
typedef struct spa_bookmark {
    uint64_t objset;
    uint64_t object;
    int64_t level;
    uint64_t blkid;
} spa_bookmark_t;

#define SPA_NAME_MAX 64
#define SPA_DEFER_TXGS 2

/* ---- describing a pool's vdevs (CLI -> daemon -> spa_create) ---- */
typedef struct spa_vdev_spec {
    vdev_type_t type;     /* ROOT at the top; LEAF, MIRROR or RAIDZ below */
    uint32_t nparity;     /* RAIDZ: 1..3 */
    uint32_t vclass;      /* top-level: VDEV_CLASS_NORMAL or VDEV_CLASS_LOG */
    const char *path;     /* LEAF */
    uint32_t nchildren;
    struct spa_vdev_spec *children;
} spa_vdev_spec_t;

typedef struct spa_create_opts {
    uint32_t ashift;      /* 0 = VDEV_DEFAULT_ASHIFT */
    bool force;           /* use devices that carry another pool's label */
} spa_create_opts_t;

enum {
    SPA_IMPORT_FORCE = 1 << 0,    /* import a pool that looks active elsewhere */
    SPA_IMPORT_READONLY = 1 << 1, /* never write (offline check) */
    SPA_IMPORT_MISSING_LOG = 1 << 2, /* import without a missing log vdev, dropping its log */
    /* the daemon's own pool from its cache: active with no host recorded is expected
     * (a pool of a build before host records); another host's is refused, and so is
     * one exported since (by whoever took it over) */
    SPA_IMPORT_CACHED = 1 << 3,
};

/* ---- multihost protection (src/spa/spa_mmp.c) ----
 * Process-wide: this host's id (nonzero; 0 = none: tools and tests that never
 * import a multihost pool) and name, recorded in the labels of every pool it
 * imports; and the heartbeat policy (cairnd.conf mmp_interval in ms and
 * mmp_fail_intervals). A pool with multihost=on gets a heartbeat every
 * interval; one that cannot write one for fail_intervals intervals suspends
 * itself, and an import watches the heartbeats for (fail_intervals + 1)
 * intervals (the writer's, when longer) before it claims the pool. */
#define SPA_MMP_INTERVAL_MS_DEFAULT 1000
#define SPA_MMP_FAIL_INTERVALS_DEFAULT 10
#define SPA_MMP_INTERVAL_MS_MIN 100
#define SPA_MMP_INTERVAL_MS_MAX 10000
#define SPA_MMP_FAIL_INTERVALS_MIN 2
#define SPA_MMP_FAIL_INTERVALS_MAX 60
void spa_set_host(uint32_t hostid, const char *hostname);
uint32_t spa_hostid(void);
void spa_mmp_set_policy(uint32_t interval_ms, uint32_t fail_intervals);
/* The pool stopped writing for good (a failed sync, or multihost suspension). */
bool spa_suspended(spa_t *spa);
/* What `pool list|status|get health` show: SUSPENDED, else the root's state. */
const char *spa_health_name(spa_t *spa);

/* Every function that can fail for a reason a user must hear about fills err
 * (one line, no trailing newline) and returns a negative errno. */
int spa_create(const char *name, const spa_vdev_spec_t *root, const spa_create_opts_t *opts,
               spa_t **out, char *err, size_t errlen);
/* paths: leaf files/devices or directories to search. name NULL: the only pool found. */
int spa_import(const char *name, const char *const *paths, size_t npaths, int flags,
               spa_t **out, char *err, size_t errlen);

typedef struct spa_import_candidate {
    char name[SPA_NAME_MAX];
    uint64_t guid;
    uint64_t txg;
    int state;            /* spa_pool_state_t from its label */
    uint32_t nleaves_found;
} spa_import_candidate_t;
/* Lists the pools whose labels are found under paths. Caller frees *out. */
int spa_import_scan(const char *const *paths, size_t npaths, spa_import_candidate_t **out,
                    size_t *n);

/* Writes out everything, marks every label exported and closes. */
int spa_export(spa_t *spa);
/* Marks every label destroyed (the devices can be reused) and closes. */
int spa_destroy(spa_t *spa);
/* Writes out everything and closes, leaving the pool active (daemon shutdown). */
int spa_close(spa_t *spa);
/* Test hook: stop at once, writing nothing more (the pool as after a crash). */
void spa_abandon(spa_t *spa);

typedef enum spa_pool_state {
    SPA_STATE_ACTIVE = 0,
    SPA_STATE_EXPORTED = 1,
    SPA_STATE_DESTROYED = 2,
} spa_pool_state_t;

const char *spa_name(const spa_t *spa);
uint64_t spa_guid(const spa_t *spa);
vdev_t *spa_root_vdev(spa_t *spa);
bool spa_readonly(const spa_t *spa);
/* Health of the pool as a whole: the root vdev's state. */
vdev_state_t spa_health(spa_t *spa);
/* Leaf paths in tree order (for the daemon's cache file). Caller frees each and the array. */
int spa_leaf_paths(spa_t *spa, char ***paths, size_t *n);

typedef struct spa_space {
    uint64_t size;        /* allocatable bytes over all top-level vdevs */
    uint64_t alloc;       /* allocated bytes (including parity and padding) */
    uint64_t free;
    /* size and free deflated (spa_asize_deflate): what they hold of users'
     * data once raidz parity and padding are left out. Datasets count space
     * so, as `zfs list` does; the pool's own listing stays raw. */
    uint64_t dsize, dfree;
} spa_space_t;
void spa_get_space(spa_t *spa, spa_space_t *out);
/* asize bytes allocated on top-level vdev `vdev`, deflated; a block's
 * deflated size over all its copies. */
uint64_t spa_asize_deflate(spa_t *spa, uint32_t vdev, uint64_t asize);
uint64_t spa_bp_dsize(spa_t *spa, const cairn_blkptr_t *bp);
/* The part of alloc that the space map log's chain holds (all copies): it grows
 * by a block or more every txg until the chain is condensed, so it is what
 * keeps alloc from returning to a baseline after equal work. */
uint64_t spa_spacemap_log_bytes(spa_t *spa);
/* One top-level vdev (by id): a log vdev's alloc is its live intent-log blocks. */
void spa_top_space(spa_t *spa, uint32_t top, spa_space_t *out);
uint64_t spa_last_synced_txg(spa_t *spa);

/* ---- properties: size alloc free capacity health guid ashift (read-only),
 *      comment, txg_timeout, dirty_max (settable, kept in the labels; dirty_max
 *      only once set, so an unset one follows the machine's memory) ---- */
/* dirty_max of a pool whose administrator never set one: a tenth of memory,
 * from 256 MiB to 4 GiB. */
uint64_t spa_default_dirty_max(void);
/* Whether a settable property still has its default value (source "default"). */
bool spa_prop_is_default(spa_t *spa, const char *prop);
int spa_prop_get(spa_t *spa, const char *prop, char *buf, size_t len);
int spa_prop_set(spa_t *spa, const char *prop, const char *value, char *err, size_t errlen);
/* Names of all pool properties, NULL-terminated. */
const char *const *spa_prop_names(void);

/* ---- changing the vdev tree of a live pool (src/spa/spa_vdev.c) ----
 * Both kinds of change take effect in the next txg and return once it is durable. */
/* Adds root's children as new top-level vdevs, in the holes removed log vdevs left
 * first: data vdevs (a disk, a mirror, a raidz) take new blocks by their share of
 * the pool's free space from that txg on; log vdevs (a disk or a mirror) serve the
 * intent log. Checks every device before writing anything (size, labels of this or
 * another pool) and refuses data vdevs whose redundancy differs from the pool's
 * (spa_replication_check); force: devices labelled by another pool and mismatched
 * redundancy are accepted. */
int spa_vdev_add(spa_t *spa, const spa_vdev_spec_t *root, bool force, char *err, size_t errlen);
/* Every check spa_vdev_add() makes, and nothing written (`pool add -n`). */
int spa_vdev_add_dry_run(spa_t *spa, const spa_vdev_spec_t *root, bool force, char *err,
                         size_t errlen);

/* ---- growing (src/spa/spa_expand.c) ----
 * A top-level vdev grows, in whole steps, when all its leaves grew (the smallest
 * governs): at once with the pool property autoexpand=on, or when asked here
 * (`pool online -e`, DEV one of its leaves); returns once the growth (if any) is
 * durable. expandsize: the bytes the pool could grow by now and has not. */
int spa_vdev_expand(spa_t *spa, const char *path, char *err, size_t errlen);
uint64_t spa_expandsize(spa_t *spa);

/* ---- redundancy of top-level vdevs (src/spa/spa_replication.c, pure) ---- */
typedef struct spa_replication {
    vdev_type_t type;     /* VDEV_TYPE_LEAF (a single disk), MIRROR or RAIDZ */
    uint32_t nparity;     /* RAIDZ */
    uint32_t width;       /* children of a mirror or raidz; 1 for a disk */
} spa_replication_t;
/* "a 2-way mirror", "a 6-wide raidz2", "a single disk". */
void spa_replication_describe(const spa_replication_t *r, char *buf, size_t len);
/* 0 when every new vdev (add) has the kind, parity and width of every existing
 * data vdev (pool) and of the other new ones; else -EINVAL and a one-line err
 * naming both sides. */
int spa_replication_check(const spa_replication_t *pool, size_t npool,
                          const spa_replication_t *add, size_t nadd, char *err, size_t errlen);
/* Removing a log vdev, any of them, named by leaf path or as `pool status` names a
 * mirror ("mirror-2"), in two steps around the intent logs moving off it (the vdevs
 * after it keep their ids: a hole takes its place, see src/spa/spa_vdev.c):
 * begin() stops new log blocks there and returns its top-level id (or a negative
 * errno with err: unknown device, a data vdev, one side of a log mirror, another
 * removal or a scrub running); the caller then restarts every open log's
 * chain (zil_restart_chains()); commit() checks that no chain in the log directory
 * reaches the vdev any more and takes it out of the pool, or refuses (and undoes
 * begin()). abort() undoes begin() when the caller gives up in between. */
int spa_vdev_remove_log_begin(spa_t *spa, const char *name, char *err, size_t errlen);
int spa_vdev_remove_log_commit(spa_t *spa, uint32_t id, const char *name, char *err,
                               size_t errlen);
void spa_vdev_remove_log_abort(spa_t *spa);

/* ---- taking leaves out and putting them back (src/spa/spa_resilver.c) ----
 * Leaves are named by path. A leaf offline takes no I/O; the pool remembers
 * the txgs it missed (its dirty time log) and, once it is back (online) or
 * its replacement is in (replace), a resilver writes it the blocks born in
 * those txgs: scrub's walk, restricted by birth txg, reading each block from
 * the other children and writing only the stale leaves' copies or columns.
 * The state (offline, dirty time logs, a replacement in progress) is kept in
 * the labels, so it survives export, import and crashes; a pool opened with a
 * leaf to resilver starts the resilver by itself. */
/* temporary: until the pool is closed (offline -t). Refused when the leaf's
 * vdev would be left without a good copy of some block. */
int spa_vdev_offline(spa_t *spa, const char *path, bool temporary, char *err, size_t errlen);
int spa_vdev_online(spa_t *spa, const char *path, char *err, size_t errlen);
/* new_path NULL or equal to old_path: a new disk in the old one's place.
 * sequential (replace -s, attach -s): NEW is filled by a sequential rebuild
 * (spa_rebuild.c) followed by a scrub; only in a mirror, and refused while a
 * resilver runs. */
int spa_vdev_replace(spa_t *spa, const char *old_path, const char *new_path, bool force,
                     bool sequential, char *err, size_t errlen);
/* attach: EXISTING (a top-level disk or a mirror's side) gets NEW as one more
 * mirror side (a disk becomes a 2-way mirror), resilvered from the others.
 * detach: a mirror side leaves the pool (a 2-way mirror becomes a disk); refused
 * when no good copy would be left. The detached leaf's labels are cleared; it
 * stays open until the pool closes (a reader may still hold it). */
int spa_vdev_attach(spa_t *spa, const char *existing, const char *new_path, bool force,
                    bool sequential, char *err, size_t errlen);
int spa_vdev_detach(spa_t *spa, const char *path, char *err, size_t errlen);
/* Starts a resilver when a leaf needs one and none runs (import does). */
void spa_resilver_check(spa_t *spa);
/* Blocks until no scan of that kind (-1: any) runs. */
void spa_scan_wait(spa_t *spa, int func);
/* Tests: a scan that has found its work done waits before it ends while on;
 * whether one waits there now. */
void spa_scan_test_hold_end(bool on);
bool spa_scan_test_end_held(void);

/* ---- scrub ---- */
typedef enum spa_scrub_state {
    SPA_SCRUB_NONE = 0, SPA_SCRUB_SCANNING, SPA_SCRUB_FINISHED, SPA_SCRUB_CANCELED,
} spa_scrub_state_t;
typedef enum spa_scan_func { SPA_SCAN_SCRUB = 0, SPA_SCAN_RESILVER = 1 } spa_scan_func_t;
typedef struct spa_scrub_stat {
    spa_scrub_state_t state;
    spa_scan_func_t func;              /* a scrub, or a resilver (repaired: resilvered) */
    uint64_t start_time, end_time;     /* wall clock seconds */
    uint64_t to_examine;               /* allocated bytes when it started */
    uint64_t examined;                 /* bytes of blocks verified so far */
    uint64_t scanned;                  /* bytes of blocks the walk reached so far
                                        * (examined lags it by the read in flight) */
    uint64_t issued;                   /* bytes of blocks read (a resilver skips most) */
    uint64_t repaired;                 /* bytes rewritten */
    uint64_t errors;                   /* blocks with no good copy left */
    bool resumed;                      /* went on from where an earlier run of the pool left it */
    bool sequential;                   /* a sequential rebuild (attach/replace -s) */
    uint64_t run_start;                /* wall clock second this run of it began */
    uint64_t run_scanned, run_examined, run_issued; /* the counters when this run began */
} spa_scrub_stat_t;
/* How scans yield to client I/O, process-wide (cairnd.conf's scan_idle_ms,
 * resilver_delay_ms, scrub_delay_ms): a scan issues one block at a time, and
 * while a pool served a client read or took client writes within the last
 * idle_ms it pauses resilver_delay_ms (scrub_delay_ms) before each block it
 * reads. A delay of 0 never pauses. */
#define SPA_SCAN_IDLE_MS_DEFAULT 50
#define SPA_RESILVER_DELAY_MS_DEFAULT 2
#define SPA_SCRUB_DELAY_MS_DEFAULT 4
typedef struct spa_scan_throttle {
    uint32_t idle_ms, resilver_delay_ms, scrub_delay_ms;
} spa_scan_throttle_t;
void spa_set_scan_throttle(const spa_scan_throttle_t *t);
/* Nanoseconds since a client read of the pool reached its disks or client writes
 * dirtied data (UINT64_MAX: never since it opened): background work (the DMU's
 * defragmenter) runs only once this exceeds its idle threshold. */
uint64_t spa_client_idle_ns(spa_t *spa);
/* Marks the calling thread's reads and dirtied data as background work, not client
 * I/O (on: true), so that it does not keep itself or a scan from seeing the pool
 * idle; returns the previous setting for the caller to put back. */
bool spa_background_thread(bool on);
/* Runs in the background; -EBUSY while a scrub or resilver runs. */
int spa_scrub_start(spa_t *spa);
int spa_scrub_stop(spa_t *spa);
void spa_scrub_wait(spa_t *spa);
void spa_scrub_get(spa_t *spa, spa_scrub_stat_t *out);
/* The last sequential rebuild since the pool was opened (state NONE: none). */
void spa_rebuild_get(spa_t *spa, spa_scrub_stat_t *out);
/* Resets the error counters of every vdev and the count of data errors (not
 * the error log below: only a scrub that finds a block good takes it off, as
 * in ZFS). */
void spa_clear_errors(spa_t *spa);

/* ---- fault management (src/spa/spa_fault.c) ----
 * A leaf with more than `errors` I/O or checksum errors within `window_s`
 * seconds (ZFS's defaults: 10 in 600 s), or whose device is gone (ENXIO),
 * becomes FAULTED: no more I/O, the txgs it misses in its dirty time log, its
 * vdev DEGRADED. Only when the vdev keeps a readable copy of every block
 * without it: otherwise it stays in use as DEGRADED ("too many errors"). A
 * write a leaf failed puts that txg in its log, so a resilver rewrites it.
 * Process-wide policy (cairnd.conf fault_errors, fault_window). */
void spa_fault_set_policy(uint32_t errors, uint32_t window_s);
/* A leaf whose device is gone (ENXIO/ENODEV) or could not be opened at import
 * is missing (UNAVAIL), not FAULTED: every `interval` ms (cairnd.conf
 * vdev_probe_interval_ms; 0: never) its path is opened again, and the very
 * device that left - its labels name this pool and leaf - is taken back and
 * resilvered, without the administrator (src/spa/spa_probe.c). Anything else
 * at that path is refused (event ereport.fs.cairn.vdev.bad_label). Process-wide;
 * read when a pool opens. spa_probe_missing: one such pass now. */
#define SPA_PROBE_INTERVAL_MS_DEFAULT 5000
void spa_set_probe_interval(uint32_t interval_ms);
void spa_probe_missing(spa_t *spa);
/* `pool clear POOL [DEV]`: resets the error counts of DEV (NULL: every leaf,
 * and the pool's data error count) and reopens a FAULTED leaf that answers a
 * read of its label again: it takes I/O again and resilvers what it missed.
 * A named leaf that does not answer stays FAULTED and is an error. */
int spa_vdev_clear(spa_t *spa, const char *path, char *err, size_t errlen);

/* ---- hot spares (src/spa/spa_spare.c) ----
 * Devices kept in reserve (in the labels, not opened while available). When
 * fault management FAULTS a leaf, an available spare steps in: a spare-N vdev
 * holds the failed leaf and the spare, which is resilvered. replace of the
 * failed leaf then returns the spare (available again once the new disk is
 * whole); detach of the spare returns it at once; detach of the failed leaf
 * keeps the spare for good; the failed leaf back in service (clear/online) and
 * resilvered returns the spare by itself. A leaf found FAULTED or missing at
 * import, or when spares are added, gets a spare too. */
int spa_spare_add(spa_t *spa, const char *const *paths, size_t n, bool force, char *err,
                  size_t errlen);
/* `pool add -n ... spare DEV...`: the checks spa_spare_add makes (the device
 * opens, is big enough, is no device or spare of this pool nor, without force,
 * of another; none given twice), nothing changed. */
int spa_spare_add_dry_run(spa_t *spa, const char *const *paths, size_t n, bool force, char *err,
                          size_t errlen);
/* Refused while the spare is in use, or when path is no spare of spa. */
int spa_spare_remove(spa_t *spa, const char *path, char *err, size_t errlen);
bool spa_is_spare(spa_t *spa, const char *path);
typedef struct spa_spare_info {
    char path[256];
    bool in_use;
} spa_spare_info_t;
size_t spa_spares_get(spa_t *spa, spa_spare_info_t *out, size_t max);

/* ---- events (src/spa/spa_events.c) ----
 * A bounded process-wide ring of what happened to the pools' devices and
 * scans, read by `cairn pool events`. Classes as zpool names them, with
 * "cairn" for "zfs": ereport.fs.cairn.io|checksum, ereport.fs.cairn.vdev.bad_label (a
 * device refused at a missing leaf's path), resource.fs.cairn.statechange,
 * sysevent.fs.cairn.{resilver,scrub}_{start,finish}, vdev_attach, vdev_remove,
 * vdev_spare, vdev_clear. */
#define SPA_EVENTS_MAX 1024
typedef struct spa_event {
    uint64_t seq;            /* 1, 2, ...: order of posting */
    uint64_t time_ns;        /* wall clock */
    char pool[SPA_NAME_MAX];
    char cls[64];
    char detail[320];        /* key=value pairs: vdev=PATH state=... offset=... size=... */
} spa_event_t;
void spa_event_post(const char *pool, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copies up to max events posted after sequence number `after` (of pool, or
 * every pool when NULL or empty) into out; with wait_ms, first waits that long
 * at most for one to be posted. Returns how many were copied. */
size_t spa_events_read(uint64_t after, const char *pool, spa_event_t *out, size_t max,
                       uint32_t wait_ms);
uint64_t spa_events_last_seq(void);
/* Forgets every event kept; returns how many. */
size_t spa_events_clear(void);

/* ---- the persistent error log (src/spa/spa_errlog.c) ----
 * Blocks no copy of which could be read, by bookmark: what `pool status -v`
 * names. The layer above adds an entry when its read of a block fails for
 * good; a scrub adds every block it finds so. Two lists as in ZFS: `last`
 * (stored in the pool) and `scrub` (what the scrub in progress found); a
 * finished scrub replaces `last` with its own list, so an entry disappears after
 * a scrub in which its block no longer fails (healed, rewritten or freed). The
 * layer above stores `last` in its meta object set at every sync that changed
 * it (spa_errlog_sync_take) and hands it back when the pool opens. */
#define SPA_ERRLOG_MAX 65536u   /* entries kept; more are counted, not named */
/* Adds bm (to both lists while a scrub runs). True when it was not logged yet,
 * so the caller reports each bad block once, not at every read. */
bool spa_errlog_add(spa_t *spa, const spa_bookmark_t *bm);
/* Every entry of both lists, sorted, each once. Caller frees *out. */
size_t spa_errlog_list(spa_t *spa, spa_bookmark_t **out);
/* Syncing context: when `last` changed since the last call, a copy of it in
 * its stored form (*buf malloc'ed) and true. */
bool spa_errlog_sync_take(spa_t *spa, void **buf, size_t *len);
/* Pool open: the stored form back. -EINVAL when it is not one. */
int spa_errlog_load(spa_t *spa, const void *buf, size_t len);

/* ---- offline consistency check of an exported (or not imported) pool ---- */
typedef struct spa_check_report {
    uint64_t blocks;             /* distinct blocks referenced */
    uint64_t bytes_referenced;   /* allocated bytes they occupy */
    uint64_t bytes_allocated;    /* allocated bytes per the space maps */
    uint64_t bad_blocks;         /* blocks with no copy that verifies */
    uint64_t leaked_bytes;       /* allocated but referenced by nothing */
    uint64_t double_bytes;       /* referenced twice, or referenced but free */
    uint64_t gang_blocks;        /* of blocks, those stored in fragments (spa_gang.c) */
    uint64_t brt_entries;        /* blocks the block reference table says are shared */
    uint64_t brt_orphans;        /* of those, blocks nothing references (an error) */
} spa_check_report_t;
/* Returns 0 when every block verifies and accounting is exact; -EUCLEAN otherwise,
 * with a one-line summary in err. */
int spa_check(const char *name, const char *const *paths, size_t npaths,
              spa_check_report_t *rep, char *err, size_t errlen);

/* ======== interface for the layer above (the DMU) ======== */

/* How a block is to be written. */
typedef struct spa_write_props {
    cairn_blk_type_t type;
    uint8_t level;
    cairn_checksum_t checksum;
    cairn_compress_t compress;
    uint8_t copies;          /* 1..3; the pool may store more for metadata */
    /* Keep the block in the ARC once written, as stored and unread (a reader
     * of what was just written then needs no disk read), with this ARC_POLICY(). */
    bool cache;
    uint8_t cache_policy;
} spa_write_props_t;

/* Compresses (if it saves >= 12.5%), checksums, allocates `copies` DVAs on distinct
 * top-level vdevs where possible, writes them and fills *bp. Syncing context only
 * (the upper layer's sync callback), callable from many threads at once. */
int spa_block_write(spa_t *spa, uint64_t txg, const void *data, uint32_t lsize,
                    const spa_write_props_t *props, cairn_blkptr_t *bp);
/* The same outside syncing context, for a block written ahead of its txg (an
 * intent-log record's data): the caller holds txg open (a transaction), and
 * the block must end up referenced by that txg's sync or freed in that txg
 * (spa_block_free_at_sync); the pool records the allocation in txg. The block
 * is written but not yet durable: spa_blocks_flush() makes it so. */
int spa_block_write_open(spa_t *spa, uint64_t txg, const void *data, uint32_t lsize,
                         const spa_write_props_t *props, cairn_blkptr_t *bp);
/* spa_block_write_open() for n blocks at once, allocated one after another, with
 * holders as for spa_block_write_many_held (NULL: none). Returns 0 or the first
 * error (then no block of the call is allocated). */
int spa_block_write_many_open(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                              cairn_rbuf_t *const *holders, const uint32_t *lsizes,
                              const spa_write_props_t *props, cairn_blkptr_t *bps);
/* Flushes the top-level vdevs holding the copies of n blocks, each vdev once. */
int spa_blocks_flush(spa_t *spa, const cairn_blkptr_t *bps, size_t n);
/* spa_block_write() for n blocks at once, each from datas[i] of lsizes[i] bytes: they
 * are allocated one after another, so they sit next to each other on the devices and
 * are written as a few large I/Os per leaf. Fills bps[]; returns 0 or the first error
 * (then no block of the call is allocated). */
int spa_block_write_many(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                         const uint32_t *lsizes, const spa_write_props_t *props,
                         cairn_blkptr_t *bps);
/* spa_block_write_many() where holders[i] (when not NULL) is a reference-counted
 * buffer whose data is datas[i], never written again: a block stored raw from
 * it is cached by a reference on it (props->cache) instead of a copy, and a
 * compressed one offers it to the ARC as its logical bytes. The caller keeps
 * its own references. */
int spa_block_write_many_held(spa_t *spa, uint64_t txg, size_t n, const void *const *datas,
                              cairn_rbuf_t *const *holders, const uint32_t *lsizes,
                              const spa_write_props_t *props, cairn_blkptr_t *bps);
/* Reads the block into buf (bp->lsize bytes), verifying it against bp and
 * repairing bad copies. -ECKSUM when no copy verifies. Any context. */
int spa_block_read(spa_t *spa, const cairn_blkptr_t *bp, void *buf);
/*
 * Memory-only mode of the calling thread. The NFS server's I/O thread runs
 * cheap calls itself when everything they read is in memory, which saves a
 * hand-off to a worker and back (two wake-ups per call); it must never wait
 * for a device meanwhile, or every other client would wait with it. While the
 * mode is on, a block read that the ARC cannot serve from memory fails with
 * -EWOULDBLOCK before it touches a device or a cache device, and the thread
 * remembers that, because the layers above may turn the error into another
 * one (a lookup's ENOENT, a handle's ESTALE): spa_memory_only_end() tells the
 * caller to drop whatever the call produced and run it where it may wait.
 * Layers above call spa_memory_only_refuse() on their own paths that could
 * wait for something other than a block read (a pool-wide lock held across a
 * txg sync, mounting a snapshot); it returns 0 when the mode is off.
 */
void spa_memory_only_begin(void);
bool spa_memory_only_end(void);
int spa_memory_only_refuse(void);
/* Whether a read was refused since spa_memory_only_begin(), the mode going on
 * (for a caller that must undo its own bookkeeping before it gives up). */
bool spa_memory_only_refused(void);
/* Suspends the mode for a read the thread must make even if it waits (a
 * read-ahead's block pointers: without them the stream would go to the
 * workers read by read); returns whether it was on, for _resume. */
bool spa_memory_only_pause(void);
void spa_memory_only_resume(bool was_on);
/* Whether the calling thread is in memory-only mode now. */
bool spa_memory_only_active(void);
/* spa_block_read() through the ARC with a dataset's cache policy (ARC_POLICY() of
 * include/cairn/arc.h: primarycache and secondarycache); spa_block_read() uses
 * ARC_POLICY_DEFAULT (cache everything). */
int spa_block_read_cached(spa_t *spa, const cairn_blkptr_t *bp, void *buf, uint8_t cache_policy);
/* Read-ahead: brings the verified block into the ARC as stored and unread
 * unless it is there already, without counting a hit or promoting it; a
 * compressed one is left for the caller to decompress ahead of its reader
 * (arc_decompress_ahead). Whether the ARC keeps it follows the policy. */
int spa_block_prefetch(spa_t *spa, const cairn_blkptr_t *bp, uint8_t cache_policy);
/* spa_block_prefetch() of several blocks (a stream's next records, in file
 * order): those laid end to end on one mirror or disk are read together, in
 * one vectored read of the calling thread, then verified one by one. Errors
 * are counted as for single reads and otherwise ignored (the reader will read
 * the block itself). */
void spa_blocks_prefetch(spa_t *spa, const cairn_blkptr_t *bps, size_t n, uint8_t cache_policy);
/* Frees the block's DVAs in txg (deferred as described above). Syncing context. */
void spa_block_free(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp);
/* spa_block_free() from any context: the block is freed in txg (which the
 * caller holds open) when that txg syncs. */
void spa_block_free_at_sync(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp);

/*
 * Block cloning (spa_brt.c). A block may be referenced more than once in a
 * pool: spa_block_clone_ref() records one more reference (in txg, which the
 * caller holds open, and whose sync must then write the new pointer), and
 * spa_block_free() of a block with more references drops one and keeps the
 * space. Holes and gang blocks cannot be cloned (-EOPNOTSUPP: copy instead).
 */
bool spa_block_cloneable(const cairn_blkptr_t *bp);
int spa_block_clone_ref(spa_t *spa, uint64_t txg, const cairn_blkptr_t *bp);
/* References of bp beyond the first (0: not shared). */
uint64_t spa_brt_refs(spa_t *spa, const cairn_blkptr_t *bp);
typedef struct spa_brt_stats {
    uint64_t used;    /* allocated bytes of blocks referenced more than once */
    uint64_t saved;   /* bytes the extra references would take if copied */
    uint64_t entries; /* blocks referenced more than once */
} spa_brt_stats_t;
void spa_brt_stats(spa_t *spa, spa_brt_stats_t *st);
typedef struct spa_brt_ref {
    uint32_t vdev;
    uint64_t offset;
    uint64_t refs;
    uint64_t asize;
} spa_brt_ref_t;
/* Every shared block (live table). Caller frees *out. */
size_t spa_brt_list(spa_t *spa, spa_brt_ref_t **out);

/* Transactions: hold the open txg while making changes to it. spa_tx_hold()
 * first waits on the write throttle; spa_tx_throttle() is that wait alone and
 * spa_tx_hold_nowait() the hold alone (for callers that must wait before
 * taking their locks but join a txg only once they hold them). */
uint64_t spa_tx_hold(spa_t *spa);
/* -EIO when the pool is suspended (a failed sync): no change can be made. */
int spa_tx_throttle(spa_t *spa);
uint64_t spa_tx_hold_nowait(spa_t *spa);
/* Whether spa_tx_throttle() might make a writer wait now (the open txg is
 * near the throttle's limit): for callers that must not wait. */
bool spa_tx_would_throttle(spa_t *spa);
void spa_tx_rele(spa_t *spa, uint64_t txg);
/* Holds txg only if it is the open txg now (true; spa_tx_rele to end). */
bool spa_tx_hold_if_open(spa_t *spa, uint64_t txg);
/* Tell the txg machinery how many bytes of dirty data txg now carries (for the
 * size trigger and the write throttle; delta may be negative), and how many
 * bytes its sync will allocate for them, estimated from above (space: data with
 * its copies, raidz parity and the indirect blocks it dirties; see
 * spa_space_pending). */
void spa_dirty_add(spa_t *spa, uint64_t txg, int64_t delta, uint64_t space);
/* Space that txgs not yet synced will allocate, by the estimates given to
 * spa_dirty_add: the dataset layer counts it as used before it is, so that
 * quotas hold and the pool never fills under a sync. */
uint64_t spa_space_pending(spa_t *spa);
/* Space on its way back: bytes freed by synced txgs and not yet usable (the
 * defer window; they become free within SPA_DEFER_TXGS more syncs, which the
 * sync thread runs by itself while any remain, even on an idle pool), plus
 * what the txgs not yet synced will free by the estimates given to
 * spa_space_freeing_add (from above: a block a snapshot keeps frees nothing).
 * A write refused for space waits for those syncs instead of failing. */
uint64_t spa_space_freeing(spa_t *spa);
void spa_space_freeing_add(spa_t *spa, uint64_t txg, uint64_t bytes);
/* A counter that grows by every space estimate given to spa_dirty_add and by
 * every allocation (so by at least what any dataset's used + pending grows,
 * frees aside), never shrinks, and reads without a lock: the dataset layer's
 * space check skips its full computation while the pool has claimed little
 * since the last one. */
uint64_t spa_space_claimed(spa_t *spa);
/* Bytes a block of lsize logical bytes, stored uncompressed with `copies`
 * copies, may allocate on this pool's data vdevs, deflated (raidz padding of
 * small blocks counts; parity of a 128 KiB block does not): the dataset
 * layer's units. */
uint64_t spa_space_estimate(spa_t *spa, uint64_t lsize, int copies);
/* The pool's slop: free space that only the sync itself may use (its metadata,
 * the space map log, frees that allocate), never new data. 1/32 of the pool,
 * at least an eighth of it up to 32 MiB, at most 128 GiB. */
uint64_t spa_slop(spa_t *spa);
/* Waits until txg (0: the currently open one) is durable. Forces it to close now. */
int spa_txg_wait_synced(spa_t *spa, uint64_t txg);
uint64_t spa_open_txg(spa_t *spa);
/* Asks the sync thread to close and write the open txg now, without waiting. */
void spa_txg_kick(spa_t *spa);

/* A visitor for block enumeration: called once per block pointer reachable,
 * with its bookmark (NULL for the pool's own blocks: space map log, intent log).
 * Returns 0 to go on, < 0 to stop the walk, > 0 to skip the block's subtree
 * (the resilver prunes subtrees born before the txgs it rewrites). */
typedef int (*spa_bp_visitor_t)(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm,
                                void *arg);

typedef struct spa_upper_ops {
    /* A new pool: set up an empty meta object set; called once in txg 1. */
    int (*create)(spa_t *spa, uint64_t txg);
    /* Pool opened (created or imported): load from the MOS root block pointer. */
    int (*open)(spa_t *spa, const cairn_blkptr_t *mos_root);
    /* Write out txg's changes; set *mos_root to the new MOS root (unchanged if nothing
     * changed). Called by the sync thread. */
    int (*sync)(spa_t *spa, uint64_t txg, cairn_blkptr_t *mos_root);
    /* Call visit for every block pointer reachable from mos_root, each shared block
     * once, including the MOS root itself. Holes are not visited. The walk goes
     * in bookmark order by object set and object; from (NULL: the start) resumes
     * it at that object set and object (level and blkid ignored) in a newer
     * tree: every block not visited by a walk that reached `from` is visited
     * (a resumed scan, spa_scrub.c). Blocks before it may be skipped. */
    int (*traverse)(spa_t *spa, const cairn_blkptr_t *mos_root, const spa_bookmark_t *from,
                    spa_bp_visitor_t visit, void *arg);
    /* Pool closing: release everything. */
    void (*close)(spa_t *spa);
} spa_upper_ops_t;

/* Registered once per process by the upper layer (dmu_init()). */
void spa_register_upper(const spa_upper_ops_t *ops);
/* Upper layer's per-pool state. */
void spa_set_upper_private(spa_t *spa, void *priv);
void *spa_get_upper_private(spa_t *spa);

/* ======== intent-log space (src/spa/spa_log.c), for the ZIL above ========
 *
 * The pool sets aside a log region - the whole of every log-class top-level
 * vdev, or else chunks reserved from the normal vdevs - and hands out log
 * blocks from it outside syncing context, without touching the space maps:
 * the region itself is allocated (and referenced, for `cairn check`) as a
 * whole. Log blocks form chains, one per object set, each block framed with
 * the chain's guid, its sequence number, a checksum and the address of the
 * next block, allocated before the block is written; a reader follows a chain
 * until a block does not verify, so a torn tail ends it cleanly. Each chain's
 * header lives in the pool's log directory (named by the uberblock) and
 * changes as part of a txg. At import the pool walks every chain and keeps
 * its blocks allocated; every other block of the region is free. */
typedef struct spa_log_header {
    uint64_t chain_guid;   /* 0: no chain */
    uint64_t head_seq;     /* sequence number of the first live block */
    cairn_dva_t head;      /* the first live block (possibly not yet written) */
    uint64_t claim_txg;    /* set at import when the chain holds blocks: last synced txg */
    uint64_t replay_seq;   /* the ZIL's: records up to here are applied */
    uint64_t reserved[2];
} spa_log_header_t;

#define SPA_LOG_BLOCK_MAX (128 * 1024u)
#define SPA_LOG_BLOCK_FRAME 128u   /* framing bytes at the start of every log block */

/* The newest header of object set os_id (zeroed when it has none). */
void spa_log_header_get(spa_t *spa, uint64_t os_id, spa_log_header_t *out);
/* Sets it as part of txg, which the caller holds open (a transaction's txg or
 * spa_tx_hold_nowait()). A zeroed header removes the entry. */
void spa_log_header_set(spa_t *spa, uint64_t os_id, const spa_log_header_t *h, uint64_t txg);
/* A log block of size bytes (rounded up to the allocation unit, at most
 * SPA_LOG_BLOCK_MAX); -ENOSPC when the region is full even after growing it
 * (growing waits for one txg sync). */
int spa_log_alloc(spa_t *spa, uint32_t size, cairn_dva_t *out);
/* The block goes back to the region once txg (in which the header that no
 * longer names it was set) is durable. */
void spa_log_free(spa_t *spa, const cairn_dva_t *dva, uint64_t txg);
/* A block a log record points at (written with spa_block_write_open in the
 * record's txg), with the record's sequence number. A log block carries the
 * references of its records after the payload so that import can keep those
 * blocks allocated until replay (see spa_log_load in src/spa/spa_log.c). */
typedef struct spa_log_ref {
    cairn_blkptr_t bp;
    uint64_t seq;
} spa_log_ref_t;
/* Writes block as block seq of chain guid, naming next as its successor; not
 * durable until spa_log_flush(). block (from spa_log_block_alloc, the caller's
 * to free or reuse) holds len payload bytes from SPA_LOG_BLOCK_FRAME on and the
 * nrefs references right after them (len plus references <= capacity of the
 * block); the frame and padding are written in place, so the ZIL packs its
 * records straight into the buffer that goes to the device. */
void *spa_log_block_alloc(void);   /* SPA_LOG_BLOCK_MAX bytes, aligned for direct I/O */
int spa_log_write_block(spa_t *spa, const cairn_dva_t *dva, uint64_t guid, uint64_t seq,
                        const cairn_dva_t *next, void *block, uint32_t len, uint32_t nrefs);
/* Payload plus references must fit: bytes a block of that DVA can hold (on
 * raidz its allocated size counts parity too: only the data part holds them). */
uint32_t spa_log_capacity(spa_t *spa, const cairn_dva_t *dva);
/* Makes every log block written so far on these blocks' vdevs durable (one
 * flush per top-level vdev involved). Concurrent callers share flushes: one is
 * in flight at a time, and those arriving meanwhile wait for the next, which
 * covers all of them (group commit across object sets). *issued (may be NULL):
 * whether this call issued the flush that covered it. */
int spa_log_flush(spa_t *spa, const cairn_dva_t *dvas, size_t n, bool *issued);
/* Tests: flushes block before touching the device while on; whether one is
 * blocked there now. */
void spa_log_test_hold_flush(bool on);
bool spa_log_test_flush_held(void);
/* Reads block seq of chain guid at dva: *payload (malloc'ed), *len, *next.
 * -ENOENT when the block is not that block (end of the chain). */
int spa_log_read(spa_t *spa, const cairn_dva_t *dva, uint64_t guid, uint64_t seq,
                 void **payload, uint32_t *len, cairn_dva_t *next);
/* spa_log_read() that also returns the block's references (*refs malloc'ed). */
int spa_log_read_refs(spa_t *spa, const cairn_dva_t *dva, uint64_t guid, uint64_t seq,
                      void **payload, uint32_t *len, cairn_dva_t *next, spa_log_ref_t **refs,
                      uint32_t *nrefs);
/* The last synced txg at the time the pool was opened. */
uint64_t spa_import_txg(spa_t *spa);
/* Counters: log blocks written and log flushes issued (tests, benchmarks). */
typedef struct spa_log_stats {
    uint64_t blocks_written, flushes, region_bytes, region_free;
    uint64_t flushes_shared;       /* spa_log_flush calls covered by a flush another caller issued */
    uint32_t flush_waiters;        /* callers waiting for the next flush now */
    uint64_t region_normal_bytes;  /* the part of region_bytes taken from the normal vdevs */
    uint64_t chunks_dropped;       /* chunks of the normal vdevs given back (idle) */
} spa_log_stats_t;
void spa_log_get_stats(spa_t *spa, spa_log_stats_t *out);
/* The region grows in chunks of the normal vdevs while the log needs room;
 * once no log block was allocated or freed for a while (10 s; tests set
 * it in ms), the next txg gives every wholly free chunk back. The sync
 * thread asks spa_log_shrink_due() whether to run a txg for that. */
void spa_log_set_shrink_delay(spa_t *spa, uint64_t ms);
bool spa_log_shrink_due(spa_t *spa, uint64_t now_ns);
/* True when the pool has log-class vdevs. */
bool spa_has_log_vdevs(spa_t *spa);

#endif
