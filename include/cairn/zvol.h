/*
 * ZVOL: volumes as block devices (src/zvol/), the layer the iSCSI target calls.
 *
 * A volume is a dataset of type VOLUME. Its data is object 1 of the volume's
 * object set, with record size = volblocksize (default 8 KiB), created on the
 * first open of an empty volume; its size is the dataset's volsize property.
 * A handle addresses it in logical blocks of 512 or 4096 bytes chosen at open
 * (READ CAPACITY reports zvol_size() / zvol_block_size()).
 *
 * Completion model: every call is synchronous and thread-safe. A front end
 * runs its SCSI commands on a pool of worker threads (as many as it wants in
 * flight: queue depth 32+ per session, many sessions) and completes a command
 * when its call returns. Reads and writes of different ranges run in parallel;
 * a plain write returns as soon as its data is in the open txg (in memory),
 * so it costs no disk wait. Durability is asked for explicitly: a write with
 * ZVOL_WRITE_FUA returns only when that write is on stable storage, and
 * zvol_flush() (SYNCHRONIZE CACHE) makes everything acknowledged so far
 * durable. Concurrent FUA writes and flushes share one txg sync (group
 * commit). With the dataset property sync=always every write is FUA; with
 * sync=disabled FUA and flush return at once. A durable write is copied into
 * the intent log, except with logbias=throughput one of 32 KiB or more, which
 * waits for its txg instead (its data is written once).
 *
 * Errors (negative errno) and the sense the SCSI layer should send:
 *   -ERANGE   the range is not inside the volume      LBA OUT OF RANGE
 *   -EINVAL   offset/length not a multiple of the logical block size, bad
 *             argument                                INVALID FIELD IN CDB
 *   -EROFS    read-only volume or a snapshot          WRITE PROTECTED
 *   -EILSEQ   compare_and_write miscompare            MISCOMPARE (the
 *             offset of the first differing byte in *miscompare_off)
 *   -ENOSPC / -EDQUOT  out of space (checked before anything is dirtied)
 *                                                     SPACE ALLOCATION FAILED
 *                                                     WRITE PROTECT (thin
 *                                                     provisioning)
 *   -EPERM    zvol_resize shrinking without force
 *   -EIO / -ECKSUM  medium error
 * Offsets and lengths are in bytes; all must be multiples of the handle's
 * logical block size.
 */
#ifndef CAIRN_ZVOL_H
#define CAIRN_ZVOL_H

#include <cairn/dmu.h>
#include <cairn/dsl.h>
#include <cairn/types.h>

typedef struct zvol zvol_t;

#define ZVOL_OBJECT 1                        /* the data object in the volume's object set */
#define ZVOL_DEFAULT_VOLBLOCKSIZE (8 * 1024u)
#define ZVOL_DEFAULT_BLOCK_SIZE 512u
/* Longest extent zvol_get_lba_status() describes in one answer. */
#define ZVOL_LBA_STATUS_MAX_EXTENT (64ULL * 1024 * 1024)

typedef struct zvol_open_opts {
    uint32_t block_size;   /* logical block size: 512 or 4096; 0 = 512 */
    bool readonly;         /* open read-only even if the volume is writable */
} zvol_open_opts_t;

/* Opens volume `name` ("pool/vol" or a snapshot "pool/vol@snap", read-only) of
 * the pool. Handles of the same volume share their locks and group commit, so
 * compare_and_write is atomic across them. Logical block size 512. */
int zvol_open(dsl_pool_t *dp, const char *name, zvol_t **out);
int zvol_open_ex(dsl_pool_t *dp, const char *name, const zvol_open_opts_t *opts, zvol_t **out);
/* No call on the handle may be running or follow. Does not sync. */
void zvol_close(zvol_t *zv);

/* Volume over a plain DMU object set, without the dataset layer (tests, tools):
 * volsize and volblocksize are kept in object 1's bonus buffer. An existing
 * volume keeps its stored volsize and record size (opts values are used only
 * when object 1 is created). The object set must stay open until zvol_close. */
typedef struct zvol_objset_opts {
    uint64_t volsize;      /* bytes, a multiple of volblocksize */
    uint32_t volblocksize; /* 0 = 8 KiB */
    uint32_t block_size;   /* 512 or 4096; 0 = 512 */
    bool readonly;
} zvol_objset_opts_t;
int zvol_open_objset(objset_t *os, const zvol_objset_opts_t *opts, zvol_t **out);

uint32_t zvol_block_size(const zvol_t *zv);   /* logical block size */
uint64_t zvol_size(zvol_t *zv);               /* volsize in bytes */
uint32_t zvol_volblocksize(const zvol_t *zv); /* record size (optimal transfer granularity) */
bool zvol_is_readonly(zvol_t *zv);
/* Allocated bytes of the volume's data as of the last txg sync. */
uint64_t zvol_used_bytes(zvol_t *zv);

/* ---- I/O ---- */
enum {
    ZVOL_WRITE_FUA = 1 << 0,    /* durable before return */
    ZVOL_WRITE_UNMAP = 1 << 1,  /* write_same: all-zero data may be unmapped */
    /* zvol_write: -EWOULDBLOCK, having changed nothing, where the write would
     * wait (for durability, a device read of a record it changes in part, the
     * write throttle, another writer's exclusive range, a txg near a space
     * limit): for a front end that runs writes on its connection thread when
     * they need no device and hands the rest to its workers. */
    ZVOL_WRITE_NOWAIT = 1 << 2,
};

int zvol_read(zvol_t *zv, uint64_t off, uint64_t len, void *buf);
/* zvol_read without waiting for a device: from memory (dirty records, the
 * ARC) or -EWOULDBLOCK, for a front end that runs cached reads on its
 * connection thread and hands the rest to its workers. */
int zvol_read_memory(zvol_t *zv, uint64_t off, uint64_t len, void *buf);
int zvol_write(zvol_t *zv, uint64_t off, uint64_t len, const void *buf, int flags);
/* SYNCHRONIZE CACHE: every write acknowledged so far is durable on return. */
int zvol_flush(zvol_t *zv);
/* Deallocates the range: whole records are freed (holes cost no space),
 * partial ones zeroed. Reads of it return zeros. flags: FUA. */
int zvol_unmap(zvol_t *zv, uint64_t off, uint64_t len, int flags);
/* WRITE SAME: writes `block` (one logical block) nblocks times from off. With
 * ZVOL_WRITE_UNMAP and an all-zero block the range is unmapped instead. */
int zvol_write_same(zvol_t *zv, uint64_t off, uint64_t nblocks, const void *block, int flags);
/* COMPARE AND WRITE: if [off, off+len) equals `expected`, writes `newdata` there,
 * atomically with respect to every other writer of the range. On a mismatch
 * returns -EILSEQ, writes nothing and sets *miscompare_off to the offset (from
 * off) of the first differing byte. flags: FUA. */
int zvol_compare_and_write(zvol_t *zv, uint64_t off, uint64_t len, const void *expected,
                           const void *newdata, int flags, uint64_t *miscompare_off);
/* ORWRITE: stores the bitwise OR of `data` and the range's current bytes,
 * atomically with respect to every other writer of the range. flags: FUA. */
int zvol_or_write(zvol_t *zv, uint64_t off, uint64_t len, const void *data, int flags);
/* EXTENDED COPY within a target: copies len bytes from src at src_off to dst at
 * dst_off (src may be dst; overlapping ranges copy as memmove). Both volumes
 * must be in the same process; their block sizes may differ but offsets and len
 * must be aligned to both. flags: FUA. Between two volumes of one pool with one
 * volblocksize and record-aligned ranges the records are cloned (they share
 * the source's blocks; durable on return); otherwise, or when that fails,
 * copied. */
int zvol_copy(zvol_t *src, uint64_t src_off, zvol_t *dst, uint64_t dst_off, uint64_t len,
              int flags);

/* GET LBA STATUS: the extent starting at off (<= ZVOL_LBA_STATUS_MAX_EXTENT, not
 * past the end, a multiple of the block size) whose blocks are all mapped or all
 * deallocated. A block reads as zeros iff it is deallocated (the DMU stores an
 * all-zero record as a hole), so LBPRZ=1 holds. Granularity: the logical block
 * (a zero block inside a stored record is deallocated). */
typedef struct zvol_lba_status {
    uint64_t off, len;
    bool mapped;
} zvol_lba_status_t;
int zvol_get_lba_status(zvol_t *zv, uint64_t off, zvol_lba_status_t *out);

/* Changes volsize (a multiple of volblocksize). Growing always works and shows
 * zeros beyond the old end (whatever lay there is freed first); shrinking is
 * refused (-EPERM) unless force, which frees everything beyond the new end.
 * On a dataset it sets the volsize property (err gets the DSL's message). */
int zvol_resize(zvol_t *zv, uint64_t new_size, bool force, char *err, size_t errlen);

#endif
