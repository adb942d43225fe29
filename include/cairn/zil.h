/*
 * ZIL: the intent log (src/zil/). One log per object set, for the layers that
 * offer synchronous operations (zvol, zpl): a sync operation becomes durable
 * by writing a record to the log and flushing, instead of waiting for a whole
 * txg to sync.
 *
 * Every change the front-end layer makes is also queued as an in-memory
 * record (cheap: a write's data is not copied, it is read back from the DMU
 * when the record is written to the log). zil_commit() makes every record
 * queued so far durable: one thread at a time (the writer) writes everything
 * queued as one or a few chained log blocks and flushes once, so concurrent
 * sync operations share one write and one flush (group commit). Records whose
 * txg has synced are dropped unwritten; log blocks whose records are all in
 * synced txgs are freed.
 *
 * Replay. zil_open() of an object set whose log survived a crash re-applies,
 * in order, every record newer than the last txg that was durable then, through
 * the caller's replay function, before returning (so before any front end
 * serves the object set). The replay function applies one record in one
 * transaction and calls zil_replay_mark() in it: the mark (the sequence
 * number of the last applied record) becomes durable with the change, so a
 * crash during replay applies nothing twice.
 *
 * Operations that have no record type are queued as barriers: committing one
 * waits for its txg to sync (correct, slower).
 *
 * Large writes. A record carries its data (ZIL_REC_WRITE), or points at a
 * block the layer wrote directly with dmu_write_direct() (ZIL_REC_WRITE_BLOCK):
 * the data then goes to the main vdevs once, and the txg's sync adopts that
 * block. zil_write_indirect() is the policy, as in ZFS: logbias=throughput
 * always, logbias=latency when the pool has no log device and the write is
 * at least ZIL_INDIRECT_MIN bytes. The commit flushes the vdevs of the blocks a
 * batch points at, once per batch, before writing the log blocks that name them.
 */
#ifndef CAIRN_ZIL_H
#define CAIRN_ZIL_H

#include <cairn/dmu.h>
#include <cairn/types.h>

typedef struct zilog zilog_t;

typedef enum zil_rec_type {
    ZIL_REC_WRITE = 1,     /* obj, off, len, data: bytes written */
    ZIL_REC_FREE = 2,      /* obj, off, len: range freed (unmap, punch) */
    ZIL_REC_TRUNCATE = 3,  /* obj, off = new size */
    ZIL_REC_SETATTR = 4,   /* obj, data = the layer's attribute blob */
    ZIL_REC_CREATE = 5,    /* obj = parent, arg[0] = new obj, arg[1] = mode/type, name, data */
    ZIL_REC_REMOVE = 6,    /* obj = parent, name */
    ZIL_REC_RENAME = 7,    /* obj = src parent, arg[0] = dst parent, name -> name2 */
    ZIL_REC_LINK = 8,      /* obj = parent, arg[0] = target obj, name */
    ZIL_REC_WRITE_BLOCK = 9, /* obj, off, len; data = the cairn_blkptr_t of a block written
                              * directly (dmu_write_direct) that holds [off, off + len) */
    ZIL_REC_TYPE_MAX = 64, /* types up to here are reserved for the layers above */
} zil_rec_type_t;

/* A record, decoded (pointers into the log block or the caller's buffers). */
typedef struct zil_rec {
    uint32_t type;
    uint64_t seq;          /* position in the log (assigned by the ZIL) */
    uint64_t txg;          /* the txg that holds the change */
    uint64_t obj, off, len;
    uint64_t arg[4];
    const void *data;
    uint32_t dlen;
    const char *name, *name2;   /* NUL-terminated, or NULL */
} zil_rec_t;

#define ZIL_REC_HDR_SIZE 96u

/* Encoding of one record in a log block's payload (8-byte aligned, little-endian).
 * Returns the encoded length, or 0 when it does not fit cap. */
size_t zil_rec_encode(const zil_rec_t *rec, void *buf, size_t cap);
size_t zil_rec_encoded_size(const zil_rec_t *rec);
/* Decodes the record at buf; *used its length. -EINVAL for a malformed record. */
int zil_rec_decode(const void *buf, size_t len, zil_rec_t *rec, size_t *used);

/* Applies one record during replay; must call zil_replay_mark() in the
 * transaction that applies it. Returns 0 or a negative errno (replay stops,
 * zil_open fails). */
typedef int (*zil_replay_fn)(void *arg, zilog_t *zl, const zil_rec_t *rec);

/* A replay function for records that name DMU-level changes (arg: the objset_t):
 * ZIL_REC_WRITE (dmu_write), ZIL_REC_WRITE_BLOCK (the block read, verified and
 * dmu_write'n, then freed), ZIL_REC_FREE (dmu_free_range), ZIL_REC_SETATTR
 * (dmu_bonus_write of the whole bonus buffer). Volumes and files log only these.
 * A layer with its own replay function hands these types to this one. */
int zil_replay_dmu(void *arg, zilog_t *zl, const zil_rec_t *rec);

/* The log of os (shared by every opener of the same object set). Replays it
 * first if a crash left records in it. On a read-only object set or pool, the
 * log is inert (commits return at once). */
int zil_open(objset_t *os, zil_replay_fn replay, void *arg, zilog_t **out);
/* Waits until everything is durable, frees the log's blocks and drops it. */
void zil_close(zilog_t *zl);

/* Every open log of spa starts a new chain, allocated where spa_log_alloc() now
 * allocates (a log vdev being removed is skipped); the old chains' blocks are freed
 * once the new headers are durable. For removing a log vdev (spa_vdev_remove_log_*). */
int zil_restart_chains(spa_t *spa);

/* Drops the log without writing anything (the pool was abandoned: a crash in tests). */
void zil_abandon(zilog_t *zl);

/* Queues a record of a change committed in txg; data and names are copied,
 * except that a ZIL_REC_WRITE with data NULL is read back from the DMU when
 * written to the log. Returns its sequence number. */
uint64_t zil_log(zilog_t *zl, const zil_rec_t *rec);
/* An asynchronous write (NFS UNSTABLE) of records first.. first + n - 1 of
 * rs bytes of obj, made in txg, which dmu_write_stamped stamped (stamps[i]
 * for record first + i): nothing is copied now. Its commit writes each
 * record's bytes as a block of its own that the txg adopts
 * (dmu_write_dirty_blocks) and logs pointers to them (ZIL_REC_WRITE_BLOCK), so
 * the data is written once and the commit does not wait for the txg; when a
 * record cannot be written so (the txg is closing, the record changed since),
 * the commit waits for txg instead, as for a barrier. */
uint64_t zil_log_write_later(zilog_t *zl, uint64_t txg, uint64_t obj, uint64_t first,
                            uint32_t rs, size_t n, const uint64_t *stamps);
/* An operation the log cannot record: committing it waits for txg. */
uint64_t zil_log_barrier(zilog_t *zl, uint64_t txg);
#define ZIL_INDIRECT_MIN (32 * 1024u)
/* Whether whole records of a sync write of len bytes should be written
 * directly and logged as ZIL_REC_WRITE_BLOCK (see the top of this file). */
bool zil_write_indirect(zilog_t *zl, bool logbias_throughput, uint64_t len);
/* Makes every record up to seq durable (0: everything queued so far). */
int zil_commit(zilog_t *zl, uint64_t seq);
/* During replay, inside the transaction applying the current record. */
void zil_replay_mark(zilog_t *zl, dmu_tx_t *tx);
/* True while zil_open replays (the layer must not log its replayed changes). */
bool zil_replaying(const zilog_t *zl);

typedef struct zil_stats {
    uint64_t commits;        /* zil_commit calls that had something to make durable */
    uint64_t log_writes;     /* writer rounds that wrote log blocks */
    uint64_t flushes;        /* log flushes asked for (one per batch that wrote log blocks) */
    uint64_t flushes_issued; /* of those, flushes this log issued itself (the rest were covered
                              * by a flush another batch or log had issued: spa_log_flush) */
    uint64_t blocks;         /* log blocks written */
    uint64_t records;        /* records written */
    uint64_t txg_waits;      /* commits that fell back to waiting for a txg */
    uint64_t replayed;       /* records applied by replay */
    uint64_t block_records;  /* ZIL_REC_WRITE_BLOCK records written to the log */
    uint64_t region_full;    /* batches that found the log region full (they waited for txgs) */
    uint64_t later_blocks;   /* records of zil_log_write_later writes a commit wrote as blocks */
    uint64_t later_waits;    /* such writes whose commit waited for their txg instead */
} zil_stats_t;
void zil_get_stats(zilog_t *zl, zil_stats_t *out);
/* The counters of every open, writable log (one per mounted filesystem or open
 * volume), named by the dataset (the object set's label, dmu_objset_label): at
 * most max into out; returns how many there are. Counters start at zero when a
 * log opens (mount, import) and go with it when it closes. */
#define ZIL_DATASET_NAME_MAX 256
typedef struct zil_log_stats {
    char dataset[ZIL_DATASET_NAME_MAX];
    zil_stats_t st;
} zil_log_stats_t;
size_t zil_stats_list(zil_log_stats_t *out, size_t max);

/* Makes commits wait for the txgs of their records instead of writing the log
 * (the behaviour before the log existed; benchmarks compare the two). */
void zil_set_txg_only(zilog_t *zl, bool txg_only);

/* Tests: a committer woken to become the writer waits until the writer before
 * it has published its batch (the order a busy scheduler may impose). */
void zil_test_hold_woken_writer(bool on);

#endif
