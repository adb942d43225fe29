/*
 * Analytics: statistics with drill-downs, as a storage appliance's analytics
 * shows them ("NFSv3 operations per second by client", "iSCSI operations by
 * initiator", latency heat maps), recorded by the layers that see the events
 * and sampled once a second by cairnd, which keeps the history.
 *
 * Recording (src/util/analytics.c) is lock-free. A statistic is a total and,
 * per drill-down ("dimension": op, client, share, file, latency, size, ...),
 * a fixed table of AN_SLOTS keyed counters. A key is a 64-bit number the
 * recorder chooses (an operation number, a hash of an address, a dataset guid
 * and object); the first event with a new key claims a free slot with one
 * compare-and-swap and names it (the name function runs then, once per key,
 * never per event), every later event is a probe and a relaxed atomic add.
 * Keys that find no slot count in the table's "other" counter, so memory is
 * bounded however many clients or files there are; the sampler frees slots
 * idle for AN_IDLE_FREE_S seconds so new keys get them. Latency and size are
 * dimensions too, keyed by log2 bucket: a histogram per second, a heat map.
 *
 * Joint drill-downs count two things at once, keyed by both and named "A B"
 * (an_add_pair), so a row of one breakdown drills down into the other: the
 * names that begin with the row's. op-latency (a heat map per operation:
 * "WRITE 64us", kept whole like the other histograms), client-op, client-file
 * and initiator-op; each is off until enabled (one more probe per event).
 *
 * Cheap drill-downs (op, share, latency, size, initiator, target, ...) are on
 * by default; the costly ones (client: an address to hash; file: a path to
 * find once per file) are off until enabled (an_set_dim_enabled). A disabled
 * statistic or dimension costs one relaxed load per event.
 *
 * Sampling (an_collect) turns the cumulative counters into the deltas of one
 * interval: entries (stat, dim, name, value), every non-zero key plus "other".
 * The history (an_history_*, analytics_history.c) keeps them: per-second
 * samples for an hour, rolled up per minute for a day and per hour for the
 * retention asked (a month by default), each sample cut to its top AN_TOPN
 * keys per dimension with the rest summed into "other", and saved to and
 * loaded from a byte buffer (cairnd writes it in its state directory).
 */
#ifndef CAIRN_ANALYTICS_H
#define CAIRN_ANALYTICS_H

#include <cairn/stats.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum an_stat {
    AN_NFS3_OPS,     /* NFSv3 calls */
    AN_NFS4_OPS,     /* NFSv4 operations (each of a COMPOUND's) */
    AN_ISCSI_OPS,    /* SCSI commands over iSCSI */
    AN_ARC_ACCESSES, /* ARC lookups, by result (hit/miss) and dataset */
    AN_DISK_IO,      /* leaf vdev I/Os */
    AN_DISK_BUSY,    /* microseconds a leaf vdev had I/O in flight (utilisation) */
    AN_DISK_USECS,   /* microseconds of I/O latency summed: / disk.ops = mean latency */
    AN_NET_BYTES,    /* payload bytes the front ends moved, by protocol and direction */
    AN_CPU,          /* microseconds of CPU cairnd used, by mode */
    AN_NSTATS
} an_stat_t;

typedef enum an_dim {
    AN_BY_OP,           /* NFS procedure/operation, SCSI command, read/write */
    AN_BY_CLIENT,       /* NFS client address */
    AN_BY_SHARE,        /* NFS share (export path) */
    AN_BY_FILE,         /* NFS file: share and path */
    AN_BY_LATENCY,      /* log2 microsecond buckets */
    AN_BY_SIZE,         /* log2 byte buckets */
    AN_BY_INITIATOR,    /* iSCSI initiator name */
    AN_BY_TARGET,       /* iSCSI target and LUN */
    AN_BY_RESULT,       /* ARC: hit or miss */
    AN_BY_DATASET,      /* ARC: the dataset read (the DMU tags its thread, an_thread_tag) */
    AN_BY_DISK,         /* leaf vdev path */
    AN_BY_PROTOCOL,     /* net: "nfs3 read", "iscsi write", ... */
    AN_BY_MODE,         /* cpu: user or system */
    AN_BY_OP_LATENCY,   /* latency per operation: "OP BUCKET", a heat map per op */
    AN_BY_CLIENT_OP,    /* NFS client and operation: "CLIENT OP" */
    AN_BY_CLIENT_FILE,  /* NFS client and file: "CLIENT SHARE/PATH" */
    AN_BY_INITIATOR_OP, /* iSCSI initiator and command: "INITIATOR COMMAND" */
    AN_NDIMS
} an_dim_t;

#define AN_SLOTS 256        /* keys per dimension table (a power of two) */
#define AN_NAME_MAX 128     /* a key's name, with its terminator */
#define AN_TOPN 10          /* keys a stored sample keeps per dimension (histograms: all) */
#define AN_IDLE_FREE_S 60   /* a slot idle this long is freed for other keys */
#define AN_LOG2_BUCKETS 32  /* latency: < 1 us, 1 us, 2 us, ... ; size: 0, 1 B, 2 B, ... */
#define AN_OTHER "other"

/* Names: "nfs3.ops", "client", ...; lookups return -1 for an unknown name. */
const char *an_stat_name(an_stat_t s);
const char *an_stat_description(an_stat_t s);
const char *an_dim_name(an_dim_t d);
int an_stat_lookup(const char *name);
int an_dim_lookup(const char *name);
bool an_stat_has_dim(an_stat_t s, an_dim_t d);
bool an_dim_default_on(an_stat_t s, an_dim_t d);

/* Switches (relaxed: an event racing a switch is counted or not). */
bool an_stat_enabled(an_stat_t s);
bool an_dim_enabled(an_stat_t s, an_dim_t d);
void an_set_stat_enabled(an_stat_t s, bool on);
void an_set_dim_enabled(an_stat_t s, an_dim_t d, bool on);
/* Everything off (a cairnd started with analytics = 0) or back to the defaults. */
void an_set_all(bool on);
/* The dimensions switched on, as a mask of 1 << an_dim_t (the saved switches). */
uint32_t an_dims_mask(an_stat_t s);
void an_set_dims_mask(an_stat_t s, uint32_t mask);

/* Writes a key's name into buf (called once, when the key claims a slot). */
typedef void (*an_name_fn)(const void *arg, uint64_t key, char *buf, size_t len);

/* Recording. an_add_total: the statistic's total; an_add: one dimension's key
 * (nothing when that dimension is off). an_add_latency/an_add_size: the log2
 * bucket of ns / bytes in the latency / size dimension. */
void an_add_total(an_stat_t s, uint64_t v);
void an_add(an_stat_t s, an_dim_t d, uint64_t key, uint64_t v, an_name_fn name, const void *arg);
void an_add_latency(an_stat_t s, uint64_t ns, uint64_t v);
void an_add_size(an_stat_t s, uint64_t bytes, uint64_t v);
/* One part of a joint key: its key and how to name it. */
typedef struct an_part {
    uint64_t key;
    an_name_fn name; /* NULL: the key in decimal */
    const void *arg;
} an_part_t;
/* A joint drill-down d: v under the pair (a, b), named "A B" when the pair first
 * claims a slot (nothing, not even a name, while d is off). */
void an_add_pair(an_stat_t s, an_dim_t d, an_part_t a, an_part_t b, uint64_t v);
/* op-latency: the log2 bucket of ns for the operation op_key, named by
 * op_name(arg, op_key) and the bucket. */
void an_add_op_latency(an_stat_t s, uint64_t op_key, uint64_t ns, an_name_fn op_name,
                       const void *arg);
/* What a lower layer's events are for, known only above it: the DMU tags the
 * thread with the dataset around its reads, and the ARC's lookups count under
 * it. Returns the previous tag (restore it after); NULL: none. */
typedef struct an_tag {
    uint64_t key;
    an_name_fn name;
    const void *arg;
} an_tag_t;
const an_tag_t *an_thread_tag_set(const an_tag_t *tag);
const an_tag_t *an_thread_tag(void);
/* An an_name_fn for a key whose name is the string arg. */
void an_name_string(const void *arg, uint64_t key, char *buf, size_t len);
/* 64-bit FNV-1a of n bytes: keys from names or addresses. */
uint64_t an_hash(const void *p, size_t n);
/* Latency, size and op-latency: histograms, kept whole (at most AN_LOG2_BUCKETS
 * keys, per operation for op-latency), never cut to a top N. */
bool an_dim_is_histogram(unsigned d);
/* Bucket of a log2 dimension and its name ("<1us", "8us", "4K", ...); the bucket a
 * name is of, -1 for none (op-latency: of the name's last word). */
int an_bucket_of(an_dim_t d, const char *name);
/* Histogram names in reading order: bucket order, op-latency by operation first. */
int an_histogram_cmp(an_dim_t d, const char *a, const char *b);
unsigned an_log2_bucket(uint64_t v);
void an_bucket_name(an_dim_t d, unsigned bucket, char *buf, size_t len);

/* ------------------------------------------------------------ sampling */

typedef struct an_entry {
    uint16_t stat;   /* an_stat_t */
    uint16_t dim;    /* an_dim_t, or AN_DIM_TOTAL */
    uint32_t name;   /* an_history_t name id; AN_NAME_OTHER for "other" */
    uint64_t value;
} an_entry_t;
#define AN_DIM_TOTAL 0xffff
#define AN_NAME_OTHER 0

typedef struct an_history an_history_t;

/* The deltas since the previous an_collect, as entries with names interned in h,
 * appended to *out (grown with cairn_realloc; *n and *cap updated). Also frees
 * slots idle for AN_IDLE_FREE_S calls. Called by one thread (the sampler). */
void an_collect(an_history_t *h, an_entry_t **out, size_t *n, size_t *cap);

/* ------------------------------------------------------------- history */

enum { AN_RES_SECOND, AN_RES_MINUTE, AN_RES_HOUR, AN_NRES };

typedef struct an_sample {
    int64_t t;           /* wall clock second the interval began */
    uint32_t n;
    an_entry_t *e;       /* sorted by (stat, dim, value descending) */
} an_sample_t;

/* Rings of `hours` hourly samples (and an hour of seconds, a day of minutes). */
an_history_t *an_history_create(uint32_t hours);
void an_history_free(an_history_t *h);
/* Interns name (AN_NAME_OTHER for "other"); names are kept for the history's life. */
uint32_t an_history_intern(an_history_t *h, const char *name);
const char *an_history_name(const an_history_t *h, uint32_t id);
size_t an_history_nnames(const an_history_t *h); /* ids are 0 .. this - 1 */
int64_t an_history_last(const an_history_t *h);  /* the newest second added; 0: none */
/* Adds the second that began at t (its entries: any order, same (stat, dim, name)
 * allowed more than once, summed). Seconds are added in increasing order; a
 * minute (an hour) is rolled up from the seconds (minutes) it holds when the
 * first sample of the next one arrives. Returns 0 or -EINVAL for t not after
 * the last second. */
int an_history_add(an_history_t *h, int64_t t, const an_entry_t *e, size_t n);
/* The samples of resolution res that began in [from, to), oldest first: calls fn
 * for each. Returns how many. */
size_t an_history_walk(const an_history_t *h, int res, int64_t from, int64_t to,
                       void (*fn)(const an_sample_t *s, void *arg), void *arg);
/* Seconds a sample of res spans; how many res keeps. */
int64_t an_res_seconds(int res);
size_t an_history_capacity(const an_history_t *h, int res);
/* Sums entries into top-n per (stat, dim) plus "other" (pure: the rollups and
 * the sampler use it). Returns the number of entries written to out (out must
 * hold n). */
size_t an_merge_topn(const an_entry_t *in, size_t n, size_t topn, an_entry_t *out);

/* Serialized form (cairnd keeps it in its state directory): malloc'd bytes. The
 * switches (an_stat_enabled, an_dim_enabled) travel with it. */
int an_history_save(const an_history_t *h, uint8_t **buf, size_t *len);
/* -EINVAL for bytes that are not a saved history (nothing changes then). */
int an_history_load(an_history_t *h, const uint8_t *buf, size_t len, bool restore_switches);

#endif
