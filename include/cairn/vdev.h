/*
 * Virtual devices: the bottom layer of a pool.
 *
 * A pool's vdevs form a tree. Its root has one child per top-level vdev; a
 * top-level vdev is a single leaf, an N-way mirror of leaves, or a raidz1/2/3
 * group of leaves. Leaves are files or block devices, driven asynchronously
 * through io_uring with a bounded queue per leaf (src/vdev/vdev_file.c), or,
 * for tests, a fault-injecting leaf that can simulate a power cut and return
 * EIO or garbage on chosen reads (src/vdev/vdev_fault.c).
 *
 * Leaf layout: four 256 KiB labels, two at the front (0 and 256 KiB) and two
 * at the end of the device (its size rounded down to 256 KiB); data starts at
 * 4 MiB. Labels are read and written by the pool layer with
 * vdev_leaf_io_sync() at vdev_label_offset(); the vdev layer only reserves
 * their space.
 *
 * Each top-level vdev has a linear address space of `asize` bytes in which
 * the allocator hands out extents, always multiples of 1 << ashift. A block
 * is written and read through its top-level vdev with vdev_write_block() and
 * vdev_read_block(): a mirror writes every side and reads any side that
 * verifies; raidz spreads the block over the children as a variable-width
 * stripe with P parity columns (see docs/ondisk-format.md, "raidz layout") and
 * reconstructs up to P missing or bad columns. Reads take a verify callback
 * (the pool checks the block pointer's checksum): when the data a device
 * returned does not verify, the vdev tries another mirror side or another
 * combination of columns to reconstruct, and on success rewrites the bad
 * copy (self-healing) and counts a checksum error on the leaf that lied.
 *
 * Thread safety: every function here may be called from many threads at once.
 */
#ifndef CAIRN_VDEV_H
#define CAIRN_VDEV_H

#include <cairn/types.h>

#include <sys/stat.h>
#include <sys/uio.h>

typedef enum vdev_type {
    VDEV_TYPE_ROOT = 0,
    VDEV_TYPE_LEAF = 1, /* a file or a block device */
    VDEV_TYPE_MIRROR = 2,
    VDEV_TYPE_RAIDZ = 3,
    /* A removed top-level vdev's place: it keeps the id, so the ids of the vdevs
     * after it - which block pointers name - never shift. No children, no space. */
    VDEV_TYPE_HOLE = 4,
    /* `pool replace` in progress: children OLD and NEW, in place of OLD under its
     * mirror or raidz, acting as a mirror of the two: writes go to both, reads to
     * whichever is readable (OLD while NEW is stale). When NEW's resilver ends OLD
     * is detached. An OLD that is gone (or the same device as NEW) is simply not
     * usable. */
    VDEV_TYPE_REPLACING = 5,
} vdev_type_t;

typedef enum vdev_state {
    VDEV_STATE_ONLINE = 0,
    VDEV_STATE_DEGRADED = 1, /* working, with less redundancy than configured */
    VDEV_STATE_FAULTED = 2,  /* too many errors or children lost to serve I/O */
    VDEV_STATE_UNAVAIL = 3,  /* leaf could not be opened */
    VDEV_STATE_OFFLINE = 4,  /* leaf taken out by the administrator: no I/O at all */
} vdev_state_t;

enum { VDEV_CLASS_NORMAL = 0, VDEV_CLASS_LOG = 1 };

#define VDEV_LABEL_SIZE (256 * 1024ULL)
#define VDEV_LABELS 4
#define VDEV_DATA_START (4 * 1024 * 1024ULL)
#define VDEV_END_RESERVE (2 * VDEV_LABEL_SIZE)
#define VDEV_MIN_LEAF_SIZE (64 * 1024 * 1024ULL)
#define VDEV_DEFAULT_ASHIFT 12
#define VDEV_MAX_CHILDREN 255
#define VDEV_MAX_NPARITY 3
#define VDEV_DTL_MAX 4          /* ranges a leaf's dirty time log keeps (merged beyond) */

typedef struct vdev_stats {
    _Atomic uint64_t reads, writes, read_bytes, write_bytes;
    _Atomic uint64_t read_errors, write_errors, checksum_errors;
    _Atomic uint64_t repaired_bytes; /* bytes rewritten by self-healing */
} vdev_stats_t;

typedef struct vdev vdev_t;

/*
 * Error windows (src/vdev/vdev_health.c): the times of a leaf's most recent
 * errors, so that "more than N errors within T seconds" - the rule that turns
 * a failing disk FAULTED - is a question about the last N + 1 of them.
 */
#define VDEV_ERRWIN_MAX 64       /* errors remembered: thresholds go up to VDEV_ERRWIN_MAX - 1 */
typedef struct vdev_errwin {
    uint64_t t_ms[VDEV_ERRWIN_MAX]; /* ring of error times, oldest overwritten */
    uint32_t next, count;
} vdev_errwin_t;
/* Records an error at now_ms; true when more than threshold errors (threshold
 * clamped to VDEV_ERRWIN_MAX - 1) fell within the last window_ms. */
bool vdev_errwin_note(vdev_errwin_t *w, uint64_t now_ms, uint32_t threshold, uint64_t window_ms);
void vdev_errwin_reset(vdev_errwin_t *w);

/* What went wrong on a leaf, as the layer above hears of it. */
typedef enum vdev_error_kind {
    VDEV_ERR_READ = 0,
    VDEV_ERR_WRITE = 1,
    VDEV_ERR_CHECKSUM = 2, /* data returned that did not verify */
    VDEV_ERR_FLUSH = 3     /* a cache flush: completed writes may be lost (a write error) */
} vdev_error_kind_t;

/* Set by the layer above on a tree's root vdev (vdev_set_hooks): how it hears
 * of leaf errors without the vdev layer knowing it. Called from any I/O
 * thread, possibly with a leaf's I/O in flight: it must not wait for I/O. */
typedef struct vdev_hooks {
    void (*leaf_error)(void *arg, vdev_t *leaf, vdev_error_kind_t kind, uint64_t offset,
                       uint64_t size, int error);
    void *arg;
} vdev_hooks_t;

/* Leaf I/O operations. Offsets and lengths are absolute device bytes. */
typedef enum vdev_io_op { VDEV_IO_READ = 0, VDEV_IO_WRITE = 1, VDEV_IO_FLUSH = 2 } vdev_io_op_t;
/* Completion: error is 0 or a negative errno. Called from a completion thread. */
typedef void (*vdev_io_done_t)(void *arg, int error);

typedef struct vdev_leaf_ops {
    /* Queue one I/O; blocks while the leaf's queue is full. buf is CAIRN_IO_ALIGN-aligned,
     * offset and len are multiples of 512 (of 1 << ashift for data). */
    int (*submit)(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                  vdev_io_done_t done, void *arg);
    void (*close)(vdev_t *leaf);
    /* Optional: the same I/O done in the calling thread, returning its result (same
     * arguments and errors as submit). For a lone small synchronous write and its
     * flush (the intent log), and for reads of a thread that only waits for them
     * (read-ahead, VDEV_READ_NOW), where handing the I/O to a completion thread and
     * the result back costs more than the I/O. */
    int (*io_now)(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len);
    /* Optional: a read in the calling thread of one contiguous range into several
     * buffers (each CAIRN_IO_ALIGN-aligned, lengths multiples of 512). A short
     * read is -EIO. For read-ahead of blocks laid end to end: one system call
     * and one wake-up instead of one per block. */
    int (*readv_now)(vdev_t *leaf, uint64_t offset, const struct iovec *iov, int iovcnt);
    /* Optional: submit of a write of one contiguous range from several buffers
     * (each CAIRN_IO_ALIGN-aligned, lengths multiples of 512; iovcnt at most
     * IOV_MAX), which must stay unchanged until done. For the aggregated writes
     * of a txg (vdev_batch_run_merged): the blocks go to the device from where
     * they are, not through a copy into one buffer. */
    int (*submit_writev)(vdev_t *leaf, uint64_t offset, const struct iovec *iov, int iovcnt,
                         vdev_io_done_t done, void *arg);
    /* Optional: makes later writes of [offset, offset + len) overwrites of space
     * the leaf already holds (a file: zeros written over its holes, then
     * flushed). Only for ranges nothing else writes meanwhile. */
    int (*preallocate)(vdev_t *leaf, uint64_t offset, uint64_t len);
    /* Optional: fstat() of the device the leaf holds open, so that a reopen can
     * tell whether its path names that very device again (vdev_leaf_open_again). */
    int (*fstat)(const vdev_t *leaf, struct stat *st);
} vdev_leaf_ops_t;

struct vdev {
    vdev_type_t type;
    uint64_t guid;
    uint32_t id;            /* index within the parent; for a top-level vdev, its DVA id */
    vdev_t *parent;
    vdev_t **children;
    uint32_t nchildren;
    uint32_t nparity;       /* raidz only: 1, 2 or 3 */
    uint32_t ashift;        /* allocation unit of a top-level vdev (and its leaves) */
    uint64_t asize;         /* top-level: bytes of allocatable address space */
    uint32_t alloc_class;   /* top-level: VDEV_CLASS_NORMAL or VDEV_CLASS_LOG (intent log only) */
    /* leaves */
    char *path;
    uint64_t psize;         /* device size in bytes (0 when unavailable) */
    const vdev_leaf_ops_t *ops;
    void *leaf_priv;
    _Atomic int state;      /* vdev_state_t */
    vdev_stats_t stats;
    _Atomic uint64_t an_last_done_ns; /* analytics' disk.busy: the leaf's last completion */
    /* Resilver (src/spa/spa_resilver.c). A stale leaf takes writes but serves no
     * reads: it lacks the blocks born in the txgs of its dirty time log (dtl,
     * inclusive ranges, guarded by the pool's config lock), which the resilver
     * writes to it (VDEV_READ_RESILVER) before it is made whole again. */
    _Atomic bool stale;
    bool offline_persist;   /* offline across restarts (offline without -t) */
    uint32_t ndtl;
    uint64_t dtl[VDEV_DTL_MAX][2];
    /* Fault management (src/spa/spa_fault.c, under its fault lock). */
    vdev_errwin_t errwin;
    uint64_t fault_from;     /* FAULTED by errors: first txg it may lack (0: not pending) */
    uint64_t missed_from;    /* a write failed: first txg it may lack (0: none) */
    bool fault_persist;      /* FAULTED, kept so in the labels until clear/online/replace */
    bool fault_announced;    /* its state change has been posted and written */
    /* Missing (UNAVAIL) and probed by path (src/spa/spa_probe.c, config lock): a
     * hash of why the device last found there was refused, said once (0: none). */
    uint64_t probe_refused;
    /* replacing only: a hot spare standing in for a failed leaf (spare-N): it
     * stays when the spare is whole (src/spa/spa_spare.c) */
    bool is_spare;
    /* root only: the layer above's hooks (NULL: none) */
    _Atomic(const vdev_hooks_t *) hooks;
    /* root only: the multihost write fence (src/spa/spa_mmp.c). Nonzero: leaves
     * refuse every write and flush of the tree (-EIO) once the monotonic clock
     * (cairn_now_ns) reaches it; 0: no fence. */
    _Atomic uint64_t write_fence_ns;
};

/* ---- tree construction (src/vdev/vdev.c) ---- */
vdev_t *vdev_alloc(vdev_type_t type, uint64_t guid);
void vdev_add_child(vdev_t *parent, vdev_t *child);  /* sets child->id and parent */
/* Closes leaves and frees the subtree. */
void vdev_free(vdev_t *vd);
/* Computes asize of a top-level vdev from its leaves' sizes (smallest leaf governs). */
void vdev_compute_asize(vdev_t *top);
/* What vdev_compute_asize() would set for a top-level vdev from its leaves' psize
 * now, without setting it (a grown leaf: the space an expansion would give). */
uint64_t vdev_asize_of(vdev_t *top);
/* A leaf's device size as the device reports it now (a file that grew, a LUN that
 * was resized), without changing leaf->psize. */
int vdev_leaf_probe_size(const vdev_t *leaf, uint64_t *size);
/* Recomputes states bottom-up from leaf states: a mirror is DEGRADED while a side is
 * missing and FAULTED when none is left; raidz tolerates nparity missing children. */
void vdev_state_refresh(vdev_t *vd);
vdev_t *vdev_top(vdev_t *vd);                 /* the top-level vdev above (or equal to) vd */
bool vdev_is_leaf(const vdev_t *vd);
/* The NEW leaf of a replacing vdev c; c itself for a leaf. */
static inline vdev_t *vdev_io_child(vdev_t *c)
{
    return c->type == VDEV_TYPE_REPLACING && c->nchildren ? c->children[c->nchildren - 1] : c;
}
/* A leaf that serves reads: usable and not stale. */
bool vdev_leaf_readable(const vdev_t *leaf);
/* Child c of a mirror or raidz can serve reads: a readable leaf, or a replacing
 * vdev with a readable side. */
bool vdev_child_readable(const vdev_t *c);

/* Installs (or, NULL, removes) hooks on a tree's root. */
void vdev_set_hooks(vdev_t *root, const vdev_hooks_t *hooks);
/* Counts an error on a leaf (its stats) and tells the root's hooks; offset and
 * size are the leaf's device bytes concerned. error: negative errno (-ECKSUM for
 * data that did not verify). */
void vdev_note_error(vdev_t *leaf, vdev_error_kind_t kind, uint64_t offset, uint64_t size, int error);

/* Whether the write fence of leaf's tree (its root's write_fence_ns) has passed:
 * leaves check it at the last moment before handing a write or flush to the
 * device, so that I/O queued behind a stall never lands after the fence. */
bool vdev_write_fenced(const vdev_t *leaf);
/* Whether leaves take an exclusive flock on their device at open (default true).
 * Off only where several daemons on one machine stand for hosts sharing disks,
 * which no lock spans (tests of multihost protection): cairnd.conf device_lock. */
void vdev_set_device_lock(bool on);
bool vdev_device_lock(void);

/* ---- dirty time logs (src/vdev/vdev.c) ---- */
/* Adds the txgs [lo, hi] to a leaf's log; past VDEV_DTL_MAX ranges the two
 * closest merge (the log may only grow: a txg it names is rewritten, never lost). */
void vdev_dtl_add(vdev_t *leaf, uint64_t lo, uint64_t hi);
bool vdev_dtl_contains(const vdev_t *leaf, uint64_t txg);
bool vdev_dtl_empty(const vdev_t *leaf);
const char *vdev_state_name(vdev_state_t s); /* "ONLINE", ... */
const char *vdev_type_name(const vdev_t *vd);/* "mirror", "raidz2", "file", ... */
/* Calls fn on every leaf under vd, in tree order. */
void vdev_foreach_leaf(vdev_t *vd, void (*fn)(vdev_t *leaf, void *arg), void *arg);

/* ---- leaves (src/vdev/vdev_file.c, src/vdev/vdev_fault.c) ---- */
/* Opens a file or block device (O_DIRECT when the file system allows it). A path
 * starting with "fault:" opens a fault-injecting leaf over the file after the prefix.
 * A leaf that cannot be opened comes back with state UNAVAIL and a negative return. */
int vdev_leaf_open(const char *path, vdev_t **out);
/* The file or device a leaf path names: the path without a "fault:" prefix. */
const char *vdev_leaf_device_path(const char *path);
/* Whether leaf's path names the very file or device node its handle holds open. */
bool vdev_leaf_holds_path(const vdev_t *leaf);
/* Whether leaf is a regular file that is no longer at its path (removed, moved
 * away): I/O to it still works, but the disk the administrator named is gone.
 * (Not asked of block devices, whose /dev links come and go with udev events.) */
bool vdev_leaf_file_gone(const vdev_t *leaf);
/* Opens leaf's path again, for a leaf that went missing: 0 and *out, a new leaf
 * on whatever device is at that path now; -EALREADY (and *out NULL) when that
 * is the very device leaf still holds open (its lock refuses a second open: a
 * file moved away and back), which leaf's own handle then reaches; else a
 * negative errno (nothing there: -ENOENT; held by another: -EBUSY). */
int vdev_leaf_open_again(const vdev_t *leaf, vdev_t **out);
/* Exchanges the devices (driver, handle, size) of two leaves: a missing leaf
 * takes the device vdev_leaf_open_again found, which takes its old handle. No
 * I/O may be submitted to either meanwhile (the missing leaf is UNAVAIL). The
 * old handle must stay open while a reader may still hold it. */
void vdev_leaf_swap_device(vdev_t *leaf, vdev_t *other);
/* Leaf `to` takes the device of leaf `from`, which is left UNAVAIL with ops
 * that fail every I/O but keeps its handle pointer (a reader that loaded it
 * still finds the device open); only `to` closes it. */
void vdev_leaf_take_device(vdev_t *to, vdev_t *from);
/* How an open treats the exclusive lock another process may hold on the device. */
typedef enum vdev_open_lock {
    VDEV_OPEN_LOCK_WAIT,    /* vdev_leaf_open: busy only if still held after ~2 s */
    VDEV_OPEN_LOCK_NOWAIT,  /* -EBUSY at once when another process holds it */
    VDEV_OPEN_PEEK,         /* no lock at all: only to read labels, never written */
} vdev_open_lock_t;
int vdev_leaf_open_how(const char *path, vdev_open_lock_t how, vdev_t **out);
/* Synchronous leaf I/O at absolute device offsets (labels, tests). */
int vdev_leaf_io_sync(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len);
/* The same queued: 0 and done called exactly once later (possibly in this
 * thread), or a negative errno and done never called (a leaf without a device:
 * -ENXIO). For a caller keeping several large I/Os in flight (sequential rebuild). */
int vdev_leaf_io_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                        vdev_io_done_t done, void *arg);
/* Absolute offset of label l (0..3) on a leaf of psize bytes. */
uint64_t vdev_label_offset(uint64_t leaf_psize, int l);
/* Data area bytes of a leaf of psize bytes (between the front reserve and the end labels). */
uint64_t vdev_leaf_data_size(uint64_t leaf_psize);

/* ---- block I/O through a top-level vdev (src/vdev/vdev_mirror.c, vdev_raidz.c) ---- */
/* Bytes to allocate on top for a block of psize stored bytes (raidz adds parity/padding). */
uint64_t vdev_psize_to_asize(const vdev_t *top, uint64_t psize);

/* Writes psize bytes (buf is padded with zeros to 1 << ashift) at offset of top's address
 * space, to every mirror side or every raidz column with parity. Returns 0 when enough
 * children took the write to read it back (a mirror: one side; raidz: all but nparity). */
int vdev_write_block(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize);

/* vdev_write_block() done in the calling thread when top is a single leaf that can
 * (io_now), else exactly vdev_write_block(). */
int vdev_write_block_now(vdev_t *top, uint64_t offset, const void *buf, uint64_t psize);

/* Several blocks of one top-level vdev written together: their per-leaf pieces that
 * touch (as consecutive allocations do) go to each leaf as one larger write, so the
 * devices see big sequential I/Os even when blocks are small (raidz columns of a
 * 128K block are only 128K / data columns each). Each block succeeds or fails by the
 * rules of vdev_write_block(); error gets 0 or a negative errno. Returns the number
 * of blocks that failed. */
typedef struct vdev_block_write {
    uint64_t offset;
    const void *buf;     /* padded to 1 << ashift, as for vdev_write_block() */
    uint64_t psize;
    int error;
} vdev_block_write_t;
unsigned vdev_write_blocks(vdev_t *top, vdev_block_write_t *blocks, size_t n);

typedef bool (*vdev_verify_fn)(const void *buf, uint64_t psize, void *arg);
enum {
    VDEV_READ_SCRUB = 1 << 0,   /* read and verify every copy/column, repair all bad ones */
    VDEV_READ_NOREPAIR = 1 << 1,/* never write (read-only import, offline check) */
    /* Read each mirror side (or the single leaf) in the calling thread where the
     * leaf offers io_now, not through its ring and completion thread: for a
     * caller that only waits (read-ahead), two thread wake-ups less per block.
     * No deadman watches such a read. raidz ignores it. */
    VDEV_READ_NOW = 1 << 2,
    /* Resilver: read from the readable children, then write the block's copy or
     * columns to every stale leaf (counted in repaired_bytes). */
    VDEV_READ_RESILVER = 1 << 3,
    /* A read that may find nothing valid there (the block after an intent-log
     * chain's last one): when no copy verifies, no child is charged a checksum
     * error (raidz never blames without a verified reconstruction anyway). */
    VDEV_READ_SPECULATIVE = 1 << 4,
};
typedef struct vdev_read_result {
    uint64_t repaired_bytes;   /* bytes rewritten on children that returned bad data */
    uint32_t errors_found;     /* children that returned EIO or data that did not verify */
} vdev_read_result_t;
/* Reads psize bytes into buf (at least psize rounded up to 1 << ashift bytes). Returns
 * 0 when data that verifies was found (repairing bad children unless NOREPAIR),
 * -ECKSUM when no copy or reconstruction verifies, -EIO when too few children answer.
 * res may be NULL. */
int vdev_read_block(vdev_t *top, uint64_t offset, void *buf, uint64_t psize,
                    vdev_verify_fn verify, void *arg, int flags, vdev_read_result_t *res);

/* Blocks laid end to end on top (a single leaf or a mirror) from offset, read
 * in one vectored read in the calling thread from one side (chosen by position,
 * as vdev_read_block does), unverified: iov[i] is block i's buffer, its length
 * the block's size rounded up to 1 << ashift. The caller verifies each block and
 * reads any that does not verify again with vdev_read_block, which tries the
 * other sides and repairs. -ENOTSUP when top cannot (raidz, a side without
 * readv_now), -EIO when the side failed. */
int vdev_read_run_now(vdev_t *top, uint64_t offset, const struct iovec *iov, int iovcnt);

/* Makes a later write of [offset, offset + len) of top's address space need no
 * allocation beneath it, on every leaf that holds part of it (preallocate).
 * Why: a file leaf is often sparse, and a synchronous write into a hole of a
 * file makes its flush also write the file system's own metadata - on this
 * project's build machine that doubled the cost of each intent-log commit.
 * Used for the intent-log region, whose latency every sync operation pays; a
 * block device or a leaf without the operation needs nothing. The range must
 * be one nothing writes meanwhile (just allocated, not yet handed out).
 * Returns 0 or the first leaf's negative errno: only speed depends on it. */
int vdev_preallocate(vdev_t *top, uint64_t offset, uint64_t len);

/* Makes every write completed so far under vd durable (fdatasync on each leaf, in parallel). */
int vdev_flush(vdev_t *vd);
/* vdev_flush() of a single leaf in the calling thread when it can (io_now). */
int vdev_flush_now(vdev_t *vd);

#endif
