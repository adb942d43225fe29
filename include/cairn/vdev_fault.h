/*
 * Fault-injecting leaves, for crash-consistency and self-healing tests.
 *
 * vdev_leaf_open("fault:/path/file") opens a leaf over a regular file that
 * behaves like a disk with a volatile write cache: a completed write is held
 * in memory (reads through the leaf see it) and reaches the file only when a
 * FLUSH completes, which applies the held writes in order and fdatasync()s
 * the file. Closing a leaf discards writes that were never flushed, so a
 * pool that forgets its final flush is caught on the next import.
 *
 * Tests drive every open fault leaf through the functions below. Leaves are
 * named by the path of their file, without the "fault:" prefix (the same
 * string given after the prefix, or any path to the same file).
 *
 * A crash test typically does:
 *     ... I/O through a pool on fault: leaves ...
 *     vdev_fault_powercut(seed, VDEV_FAULT_CUT_RANDOM);
 *     spa_abandon(...);                 // every leaf I/O now fails with -EIO
 *     ... import the pool again from the plain file paths and check it ...
 *     vdev_fault_reset();
 */
#ifndef CAIRN_VDEV_FAULT_H
#define CAIRN_VDEV_FAULT_H

#include <cairn/vdev.h>

/* What a power cut does to each write held in a leaf's volatile cache. */
typedef enum vdev_fault_cut_mode {
    VDEV_FAULT_CUT_DROP = 0,   /* no unflushed write survives */
    VDEV_FAULT_CUT_KEEP = 1,   /* every unflushed write survives (as if flushed) */
    /* Each write, chosen by an RNG seeded with the cut's seed: dropped, kept, or
     * torn (only some of its 512-byte sectors reach the file: a prefix, or a
     * random subset). A single-sector write is never torn, as on real disks. */
    VDEV_FAULT_CUT_RANDOM = 2,
} vdev_fault_cut_mode_t;

typedef enum vdev_fault_read_mode {
    VDEV_FAULT_READ_EIO = 0,     /* reads overlapping the range fail with -EIO */
    VDEV_FAULT_READ_GARBAGE = 1, /* reads succeed, but every byte in the range differs from
                                  * what is stored (XORed with a random nonzero byte) */
} vdev_fault_read_mode_t;

/* Global counters since the last vdev_fault_reset(); for tests to check that a fault
 * really happened. */
typedef struct vdev_fault_stats {
    uint64_t writes_held;    /* writes accepted into a volatile cache */
    uint64_t writes_flushed; /* held writes applied to the file by a FLUSH */
    uint64_t cut_dropped;    /* held writes lost by a power cut */
    uint64_t cut_kept;       /* held writes that a power cut applied whole */
    uint64_t cut_torn;       /* held writes that a power cut applied in part */
    uint64_t close_dropped;  /* held writes discarded by closing a leaf unflushed */
    uint64_t powercuts;      /* calls to vdev_fault_powercut() */
    uint64_t reads_failed;   /* reads failed by an injected EIO */
    uint64_t reads_garbled;  /* reads whose data an injection corrupted */
    uint64_t writes_failed;  /* writes failed by vdev_fault_fail_writes() */
} vdev_fault_stats_t;

/* Simulates a power loss on every open fault leaf: each held write is dropped,
 * kept or torn according to mode (RANDOM is reproducible from seed), the files
 * are synced, and the leaves freeze: from then on their submit returns -EIO and
 * does nothing (a frozen leaf also gives up its exclusive lock, so the files can
 * be reopened while the abandoned pool still holds them). */
void vdev_fault_powercut(uint64_t seed, vdev_fault_cut_mode_t mode);

/* Makes reads through the fault leaf over `path` that overlap [offset, offset+len)
 * fail or return garbage, until vdev_fault_clear(path). Several ranges may be
 * active at once. Returns 0, -ENOENT when no open fault leaf has that file, or
 * -EINVAL for an empty range. */
int vdev_fault_inject_read(const char *path, uint64_t offset, uint64_t len,
                           vdev_fault_read_mode_t mode);

/* While fail is true, writes through the fault leaf over `path` complete with -EIO
 * and change nothing. Returns 0 or -ENOENT. */
int vdev_fault_fail_writes(const char *path, bool fail);

/* Removes the read injections and write failures of the leaf over `path`.
 * Returns 0 or -ENOENT. */
int vdev_fault_clear(const char *path);

/* Clears every injection, unfreezes every leaf and zeroes the counters. Held writes
 * are kept. For isolation between tests. */
void vdev_fault_reset(void);

vdev_fault_stats_t vdev_fault_stats(void);

/* Test hooks of the file leaf's deadman (src/vdev/vdev_file.c): shorten its
 * thresholds (report after report_ns, treat an I/O the kernel no longer knows as lost
 * after lost_ns; the defaults are 30 s and 120 s), and make the next I/O submitted to
 * a file leaf vanish before it reaches the kernel, as one once did under load.
 * lose_next returns -EINVAL for a leaf that is not a file leaf. */
void vdev_file_test_deadman(uint64_t report_ns, uint64_t lost_ns);
int vdev_file_test_lose_next(vdev_t *leaf);

/* Internal to the vdev layer: opens the fault leaf behind vdev_leaf_open("fault:..."),
 * with file_path the part after the prefix. Returns 0 and the leaf, or a negative
 * errno and *out == NULL (vdev_leaf_open then builds the UNAVAIL leaf). */
int vdev_fault_leaf_open(const char *file_path, const char *display_path, vdev_t **out);
/* Internal to the vdev layer: the exclusive lock every leaf takes on its device
 * at open (unless vdev_set_device_lock(false)); -EBUSY when another holder keeps
 * it for more than two seconds, or at once unless wait. */
int vdev_device_flock(int fd, bool wait);
/* Internal to the vdev layer: after vdev_leaf_swap_device, a fault leaf's
 * device learns which vdev_t it now serves (no-op for other leaves). */
void vdev_fault_leaf_rebind(vdev_t *vd);
/* Internal to the vdev layer: counts one finished leaf I/O in leaf->stats (a
 * failed one through vdev_note_error; a failed flush counts against writes:
 * completed writes may be lost). offset: the I/O's device offset; start_ns:
 * when it was issued (analytics: latency, busy time). */
void vdev_leaf_account(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, size_t len, int error,
                       uint64_t start_ns);
/* Internal to the vdev layer: the bytes of a submit_writev's pieces, or -EINVAL
 * when they break vdev.h's rules for it (none, more than IOV_MAX, one empty or
 * not a multiple of 512), so every leaf refuses the same writes. */
ssize_t vdev_writev_len(const struct iovec *iov, int iovcnt);

/* Makes every FLUSH of the leaf take us microseconds longer (emulates a slow disk
 * whose cache flush costs a rotation or more; benchmarks). 0 turns it off. */
int vdev_fault_set_flush_delay(const char *path, uint32_t us);

/* While gate is true, FLUSHes of the leaf wait before they run (writes go on):
 * a test orders what happens while a flush is in flight. Returns 0 or -ENOENT. */
int vdev_fault_gate_flushes(const char *path, bool gate);

/* The leaf's next FLUSH fails with -EIO and loses every write it held, as a
 * disk whose cache flush failed may have. Returns 0 or -ENOENT. */
int vdev_fault_fail_next_flush(const char *path);

#endif
