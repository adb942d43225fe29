/*
 * File and block-device leaves, driven through io_uring.
 *
 * Design
 * ------
 * Each open leaf owns one fd, one io_uring and one completion thread.
 *
 *  - Submission. Any thread may call submit. A mutex serializes access to the
 *    submission queue (liburing's SQ helpers are not thread-safe); each call
 *    prepares one SQE and enters the kernel right away. Batching several SQEs
 *    per io_uring_enter would save a syscall per I/O, but the callers issue
 *    large blocks from several threads, where the syscall is noise next to the
 *    transfer and an I/O that waits for a batch to fill adds latency.
 *
 *  - Bounded queue. At most VDEV_FILE_QDEPTH I/Os are in flight per leaf;
 *    further submitters sleep on a condition variable until a completion frees
 *    a slot. This caps the memory pinned by one slow device and keeps one busy
 *    pool from starving the others of the device's attention. The completion
 *    thread itself never waits for a slot (a done callback that submits more I/O
 *    would otherwise wait for itself); the ring has room for twice the bound so
 *    those rare extra submissions always find an SQE.
 *
 *  - Completion. The completion thread loops on io_uring_wait_cqe. A short
 *    transfer (legal for buffered I/O on regular files, e.g. after a signal) is
 *    resubmitted for the remainder from the completion thread; a transfer of 0
 *    bytes means the I/O ran past the end of the device, which the range check
 *    at submit should have made impossible, so it is reported as -EIO. Leaf
 *    statistics are updated before the done callback runs, and the in-flight
 *    slot is released before it too, so a callback may submit to this leaf.
 *
 *  - In the caller's thread (io_now). A lone small synchronous write and its
 *    flush (the intent log's), and the reads of a read-ahead thread
 *    (VDEV_READ_NOW), can skip the ring: pread/pwrite/fdatasync directly,
 *    still counted against the bound, without the deadman.
 *
 *  - Flush is IORING_OP_FSYNC with DATASYNC: on a file it persists the data
 *    and the block mapping of sparse regions; on a block device it flushes the
 *    drive's volatile cache. It orders nothing against in-flight writes: as
 *    vdev.h says, it covers writes that have completed.
 *
 *  - Direct I/O. Leaves are opened O_DIRECT so the pool's own cache (the ARC's
 *    job) is not duplicated in the page cache. Some file systems refuse O_DIRECT
 *    at open, or accept it but refuse 512-byte aligned transfers (4K-sector
 *    devices); a probe read at open detects the second case and both fall back
 *    to buffered I/O, which is still correct because flush syncs.
 *
 *  - Exclusivity. An exclusive flock on the fd keeps two daemons (or one daemon
 *    importing twice) from driving the same device: the second open fails
 *    with -EBUSY.
 *
 *  - Errors. submit returns a negative errno without ever calling done when it
 *    refuses a request (misaligned: -EINVAL, past the end: -EIO, closed or
 *    UNAVAIL leaf: -ENXIO); once it returns 0, done is called exactly once.
 *
 *  - Close waits for in-flight I/O, then posts a NOP whose user_data is the
 *    ring itself; the completion thread exits when it sees it.
 *
 *  - Deadman. Every in-flight I/O is on a list with its start time; the
 *    completion thread wakes at least once a second and looks for I/Os older
 *    than VDEV_FILE_DEADMAN_NS. Each is reported once, then an ASYNC_CANCEL is
 *    posted for it: if the kernel cancels it (the I/O then completes with
 *    -ECANCELED) it is simply issued again, which is safe because the kernel
 *    said it will never run. If the kernel no longer knows the request at all
 *    (-ENOENT) and it is older than VDEV_FILE_LOST_NS, far beyond any
 *    block-layer timeout, it is taken as lost (seen on loaded machines with
 *    I/O punted to io_uring's workers) and redone synchronously with
 *    pread/pwrite/fdatasync; its bookkeeping is kept until close in case a
 *    late completion still names it. Anything else keeps waiting, as a
 *    storage stack must for a slow disk.
 *
 * A leaf that cannot be opened still yields a vdev_t, in state UNAVAIL with
 * psize 0, whose submit refuses everything with -ENXIO: the pool keeps the
 * device's place in the tree and can show it as missing.
 */
#include <cairn/assert.h>
#include <cairn/raidz.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define VDEV_FILE_QDEPTH 64
/* Deadman thresholds (VDEV_FILE_DEADMAN_NS / VDEV_FILE_LOST_NS in the design
 * comment); tests shorten them with vdev_file_test_deadman(). */
static _Atomic uint64_t deadman_ns = 30ULL * 1000000000ULL;
static _Atomic uint64_t lost_ns = 120ULL * 1000000000ULL;
#define VDEV_FILE_DEADMAN_NS atomic_load(&deadman_ns)
#define VDEV_FILE_LOST_NS atomic_load(&lost_ns)
#define VDEV_FILE_RING_ENTRIES (2 * VDEV_FILE_QDEPTH)
#define VDEV_FAULT_PREFIX "fault:"

typedef struct file_leaf {
    int fd;
    bool direct;
    struct io_uring ring;
    pthread_mutex_t lock;     /* SQ access, inflight, closing */
    pthread_cond_t slot_free; /* inflight dropped below the bound, or reached 0 */
    unsigned inflight;
    bool closing;
    bool lose_next;           /* test hook: the next I/O never reaches the kernel */
    pthread_t completer;
    struct file_io *active;   /* in-flight I/Os, for the deadman (under lock) */
    struct file_io *zombies;  /* I/Os redone after being lost; freed at close */
} file_leaf_t;

typedef struct file_io {
    struct file_io *next, *prev; /* on active, or next on zombies */
    uint64_t start_ns;
    bool reported;
    bool cancel_sent;  /* an ASYNC_CANCEL naming this I/O is outstanding */
    bool finished;     /* completed; kept on the zombie list because something may still name it */
    bool zombie;
    vdev_t *leaf;
    vdev_io_op_t op;
    uint64_t offset;
    char *buf;
    size_t len;
    size_t xferred; /* bytes done so far (short transfers resubmit the rest) */
    /* A write from several buffers (submit_writev) instead of buf: the
     * caller's pieces, and room for what remains of them after xferred. */
    const struct iovec *iov;
    int iovcnt;
    struct iovec *rest;
    vdev_io_done_t done;
    void *arg;
} file_io_t;

/* ---- UNAVAIL leaves ---- */

static int unavail_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                          vdev_io_done_t done, void *arg)
{
    (void)leaf, (void)op, (void)offset, (void)buf, (void)len, (void)done, (void)arg;
    return -ENXIO;
}

static void unavail_close(vdev_t *leaf) { (void)leaf; }

static const vdev_leaf_ops_t unavail_ops = {.submit = unavail_submit, .close = unavail_close};

/* ---- I/O ---- */

/* The pieces of a vectored write still to do after io->xferred bytes, in
 * io->rest; returns how many. */
static int file_io_rest(file_io_t *io)
{
    size_t skip = io->xferred;
    int i = 0, n = 0;
    while (i < io->iovcnt && skip >= io->iov[i].iov_len) skip -= io->iov[i++].iov_len;
    for (; i < io->iovcnt; i++, skip = 0)
        io->rest[n++] = (struct iovec){(char *)io->iov[i].iov_base + skip, io->iov[i].iov_len - skip};
    return n;
}

/* Prepares and submits the (remaining part of the) I/O; fl->lock held. */
static void file_leaf_queue_locked(file_leaf_t *fl, file_io_t *io)
{
    CAIRN_ASSERT(cairn_mutex_held(&fl->lock));
    struct io_uring_sqe *sqe;
    while ((sqe = io_uring_get_sqe(&fl->ring)) == NULL) {
        /* Only possible when the completion thread exceeds the bound; push what is queued. */
        io_uring_submit(&fl->ring);
        sched_yield();
    }
    size_t left = io->len - io->xferred;
    switch (io->op) {
    case VDEV_IO_READ:
        io_uring_prep_read(sqe, fl->fd, io->buf + io->xferred, (unsigned)left,
                           io->offset + io->xferred);
        break;
    case VDEV_IO_WRITE:
        if (io->iov)
            io_uring_prep_writev(sqe, fl->fd, io->rest, (unsigned)file_io_rest(io),
                                 io->offset + io->xferred);
        else
            io_uring_prep_write(sqe, fl->fd, io->buf + io->xferred, (unsigned)left,
                                io->offset + io->xferred);
        break;
    case VDEV_IO_FLUSH:
        io_uring_prep_fsync(sqe, fl->fd, IORING_FSYNC_DATASYNC);
        break;
    }
    CAIRN_TSAN_RELEASE(io);
    io_uring_sqe_set_data(sqe, io);
    int rc;
    /* The SQ tail is already published, so a failed enter only delays the I/O until the
     * next one; retry the transient failures so it is not left waiting. */
    do {
        rc = io_uring_submit(&fl->ring);
    } while (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
    if (rc < 0) log_error("vdev", "io_uring_submit on %s: %s", io->leaf->path, strerror(-rc));
}

static void active_add_locked(file_leaf_t *fl, file_io_t *io)
{
    CAIRN_ASSERT(cairn_mutex_held(&fl->lock));
    io->prev = NULL;
    io->next = fl->active;
    if (fl->active) fl->active->prev = io;
    fl->active = io;
}

static void active_remove_locked(file_leaf_t *fl, file_io_t *io)
{
    CAIRN_ASSERT(cairn_mutex_held(&fl->lock));
    if (io->prev) io->prev->next = io->next;
    else fl->active = io->next;
    if (io->next) io->next->prev = io->prev;
    io->next = io->prev = NULL;
}

/* Marks the cancel requests posted by the deadman (their user_data). */
typedef struct file_cancel {
    uint64_t magic;
    file_io_t *io;
} file_cancel_t;
#define FILE_CANCEL_MAGIC 0x4c45434e41434c46ULL

static void file_io_finish(file_leaf_t *fl, file_io_t *io, int error)
{
    vdev_t *leaf = io->leaf;
    vdev_leaf_account(leaf, io->op, io->offset, io->len, error, io->start_ns);
    vdev_io_done_t done = io->done;
    void *arg = io->arg;

    pthread_mutex_lock(&fl->lock);
    active_remove_locked(fl, io);
    if (io->zombie || io->cancel_sent) {
        /* A late completion or the cancel's completion may still name it: keep it
         * until close. */
        io->finished = true;
        io->next = fl->zombies;
        fl->zombies = io;
    } else {
        free(io);
    }
    /* One freed slot wakes one submitter; close waits for 0 and needs everyone woken. */
    if (--fl->inflight == 0) pthread_cond_broadcast(&fl->slot_free);
    else pthread_cond_signal(&fl->slot_free);
    pthread_mutex_unlock(&fl->lock);

    done(arg, error);
}

/* Redoes a lost I/O synchronously; returns 0 or -errno. */
static int file_io_redo_sync(file_leaf_t *fl, file_io_t *io)
{
    if (io->op == VDEV_IO_FLUSH) return fdatasync(fl->fd) < 0 ? -errno : 0;
    while (io->xferred < io->len) {
        ssize_t n = io->iov ? pwritev(fl->fd, io->rest, file_io_rest(io),
                                      (off_t)(io->offset + io->xferred))
                    : io->op == VDEV_IO_READ
                        ? pread(fl->fd, io->buf + io->xferred, io->len - io->xferred,
                                (off_t)(io->offset + io->xferred))
                        : pwrite(fl->fd, io->buf + io->xferred, io->len - io->xferred,
                                 (off_t)(io->offset + io->xferred));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        io->xferred += (size_t)n;
    }
    return 0;
}

/* The deadman's scan (see the top comment); completion thread only. */
static void file_leaf_deadman(vdev_t *leaf, file_leaf_t *fl)
{
    pthread_mutex_lock(&fl->lock);
    uint64_t now = cairn_now_ns(); /* under the lock: no I/O on the list is newer */
    for (file_io_t *io = fl->active; io; io = io->next) {
        if (io->cancel_sent || io->start_ns > now || now - io->start_ns < VDEV_FILE_DEADMAN_NS)
            continue;
        if (!io->reported) {
            io->reported = true;
            log_warn("vdev", "%s: %s of %zu bytes at offset %llu outstanding for %llu s",
                     leaf->path, io->op == VDEV_IO_READ ? "read" : io->op == VDEV_IO_WRITE ? "write" : "flush",
                     io->len, (unsigned long long)io->offset,
                     (unsigned long long)((now - io->start_ns) / 1000000000ULL));
        }
        struct io_uring_sqe *sqe = io_uring_get_sqe(&fl->ring);
        if (!sqe) break;
        file_cancel_t *c = cairn_zalloc(sizeof *c);
        c->magic = FILE_CANCEL_MAGIC;
        c->io = io;
        io_uring_prep_cancel(sqe, io, 0);
        CAIRN_TSAN_RELEASE(c);
        io_uring_sqe_set_data(sqe, c);
        io->cancel_sent = true;
        io_uring_submit(&fl->ring);
    }
    pthread_mutex_unlock(&fl->lock);
}

static void file_cancel_done(vdev_t *leaf, file_leaf_t *fl, file_cancel_t *c, int res)
{
    file_io_t *io = c->io;
    free(c);
    pthread_mutex_lock(&fl->lock);
    if (io->finished) { /* it completed on its own meanwhile (freed at close) */
        pthread_mutex_unlock(&fl->lock);
        return;
    }
    io->cancel_sent = false;
    if (res == 0) { /* cancelled: it completes with -ECANCELED and is reissued */
        pthread_mutex_unlock(&fl->lock);
        return;
    }
    uint64_t age = cairn_now_ns() - io->start_ns;
    if (res == -ENOENT && age >= VDEV_FILE_LOST_NS) {
        io->zombie = true;
        pthread_mutex_unlock(&fl->lock);
        log_warn("vdev", "%s: I/O at offset %llu was lost by the kernel; redoing it synchronously",
                 leaf->path, (unsigned long long)io->offset);
        file_io_finish(fl, io, file_io_redo_sync(fl, io));
        return;
    }
    /* Running, or not yet old enough to call lost: look again later. */
    pthread_mutex_unlock(&fl->lock);
}

static void *file_leaf_completer(void *arg)
{
    vdev_t *leaf = arg;
    file_leaf_t *fl = leaf->leaf_priv;
    uint64_t last_scan = cairn_now_ns();
    for (;;) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_sec = 1, .tv_nsec = 0};
        int rc = io_uring_wait_cqe_timeout(&fl->ring, &cqe, &ts);
        if (cairn_now_ns() - last_scan >= 1000000000ULL) {
            last_scan = cairn_now_ns();
            file_leaf_deadman(leaf, fl);
        }
        if (rc == -ETIME || rc == -EINTR || rc == -EAGAIN) continue;
        if (rc < 0) {
            log_error("vdev", "io_uring_wait_cqe on %s: %s", leaf->path, strerror(-rc));
            sched_yield();
            continue;
        }
        void *data = io_uring_cqe_get_data(cqe);
        if (data) CAIRN_TSAN_ACQUIRE(data);
        int res = cqe->res;
        io_uring_cqe_seen(&fl->ring, cqe);
        if (data == &fl->ring) break; /* close's stop marker */
        if (data && *(uint64_t *)data == FILE_CANCEL_MAGIC) {
            file_cancel_done(leaf, fl, data, res);
            continue;
        }

        file_io_t *io = data;
        if (io->zombie) continue; /* a late completion of an I/O already redone */
        if (res == -ECANCELED) {
            /* Only the deadman cancels; the kernel vouched it never ran: issue it again. */
            pthread_mutex_lock(&fl->lock);
            io->start_ns = cairn_now_ns();
            file_leaf_queue_locked(fl, io);
            pthread_mutex_unlock(&fl->lock);
            continue;
        }
        if (res < 0) {
            file_io_finish(fl, io, res);
        } else if (io->op == VDEV_IO_FLUSH) {
            file_io_finish(fl, io, 0);
        } else if (res == 0) {
            file_io_finish(fl, io, -EIO); /* past the end of the device */
        } else {
            io->xferred += (size_t)res;
            if (io->xferred >= io->len) {
                file_io_finish(fl, io, 0);
            } else {
                pthread_mutex_lock(&fl->lock);
                file_leaf_queue_locked(fl, io);
                pthread_mutex_unlock(&fl->lock);
            }
        }
    }
    return NULL;
}

/* Queues io (filled in by the caller, freed here on failure). */
static int file_leaf_queue(file_leaf_t *fl, file_io_t *io);

/* What submit and submit_writev refuse before queueing: 0 or a negative errno. */
static int file_io_check(const vdev_t *leaf, vdev_io_op_t op, uint64_t offset, size_t len)
{
    if (op == VDEV_IO_FLUSH) return 0;
    if (op != VDEV_IO_READ && op != VDEV_IO_WRITE) return -EINVAL;
    if (len == 0 || len > UINT32_MAX || !CAIRN_IS_P2ALIGNED(offset | len, 512)) return -EINVAL;
    if (offset > leaf->psize || len > leaf->psize - offset) return -EIO;
    return 0;
}

static int file_leaf_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                            vdev_io_done_t done, void *arg)
{
    file_leaf_t *fl = leaf->leaf_priv;
    if (!fl) return -ENXIO;
    int err = file_io_check(leaf, op, offset, len);
    if (err) return err;
    file_io_t *io = malloc(sizeof *io);
    if (!io) return -ENOMEM;
    *io = (file_io_t){.leaf = leaf, .op = op, .offset = offset, .buf = buf, .len = len,
                      .done = done, .arg = arg};
    return file_leaf_queue(fl, io);
}

static int file_leaf_submit_writev(vdev_t *leaf, uint64_t offset, const struct iovec *iov,
                                   int iovcnt, vdev_io_done_t done, void *arg)
{
    file_leaf_t *fl = leaf->leaf_priv;
    if (!fl) return -ENXIO;
    ssize_t len = vdev_writev_len(iov, iovcnt);
    if (len < 0) return (int)len;
    int err = file_io_check(leaf, VDEV_IO_WRITE, offset, (size_t)len);
    if (err) return err;
    /* The remaining pieces live with the I/O: the ring reads them at issue. */
    file_io_t *io = malloc(sizeof *io + (size_t)iovcnt * sizeof(struct iovec));
    if (!io) return -ENOMEM;
    *io = (file_io_t){.leaf = leaf, .op = VDEV_IO_WRITE, .offset = offset, .len = (size_t)len,
                      .iov = iov, .iovcnt = iovcnt, .rest = (struct iovec *)(io + 1),
                      .done = done, .arg = arg};
    return file_leaf_queue(fl, io);
}

static int file_leaf_queue(file_leaf_t *fl, file_io_t *io)
{
    bool from_completer = pthread_equal(pthread_self(), fl->completer);
    pthread_mutex_lock(&fl->lock);
    while (!from_completer && fl->inflight >= VDEV_FILE_QDEPTH && !fl->closing)
        pthread_cond_wait(&fl->slot_free, &fl->lock);
    /* The multihost fence, checked after any wait for a slot: the last moment
     * before the kernel has the write. */
    int refuse = fl->closing ? -ENXIO
                 : io->op != VDEV_IO_READ && vdev_write_fenced(io->leaf) ? -EIO : 0;
    if (refuse) {
        pthread_mutex_unlock(&fl->lock);
        free(io);
        return refuse;
    }
    fl->inflight++;
    io->start_ns = cairn_now_ns();
    active_add_locked(fl, io);
    if (fl->lose_next) fl->lose_next = false; /* as the kernel once did: it vanishes */
    else file_leaf_queue_locked(fl, io);
    pthread_mutex_unlock(&fl->lock);
    return 0;
}

/* An I/O done in the caller's thread counts in flight like a queued one: it
 * waits for room under the bound, and close waits for it. False: closing. */
static bool slot_take(file_leaf_t *fl)
{
    pthread_mutex_lock(&fl->lock);
    while (fl->inflight >= VDEV_FILE_QDEPTH && !fl->closing)
        pthread_cond_wait(&fl->slot_free, &fl->lock);
    bool ok = !fl->closing;
    if (ok) fl->inflight++;
    pthread_mutex_unlock(&fl->lock);
    return ok;
}

static void slot_release(file_leaf_t *fl)
{
    pthread_mutex_lock(&fl->lock);
    if (--fl->inflight == 0) pthread_cond_broadcast(&fl->slot_free);
    else pthread_cond_signal(&fl->slot_free);
    pthread_mutex_unlock(&fl->lock);
}

/* The I/O in the calling thread: a pread/pwrite/fdatasync, counted in flight like
 * a queued one (close waits for it, the bound holds), but without the round trip
 * through the ring and the completion thread - two thread wakeups per I/O, which
 * is most of the latency of a lone 4 KiB log write and its flush. The deadman does
 * not watch it: the caller is blocked in the kernel as the kernel decides. */
static int file_leaf_io_now(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len)
{
    file_leaf_t *fl = leaf->leaf_priv;
    if (!fl) return -ENXIO;
    if (op != VDEV_IO_FLUSH) {
        if (op != VDEV_IO_READ && op != VDEV_IO_WRITE) return -EINVAL;
        if (len == 0 || len > UINT32_MAX || !CAIRN_IS_P2ALIGNED(offset | len, 512)) return -EINVAL;
        if (offset > leaf->psize || len > leaf->psize - offset) return -EIO;
    }
    if (!slot_take(fl)) return -ENXIO;
    if (op != VDEV_IO_READ && vdev_write_fenced(leaf)) {
        slot_release(fl);
        return -EIO;
    }
    file_io_t io = {.leaf = leaf, .op = op, .offset = offset, .buf = buf, .len = len};
    uint64_t start = cairn_now_ns();
    int err = file_io_redo_sync(fl, &io);
    vdev_leaf_account(leaf, op, offset, len, err, start);
    slot_release(fl);
    return err;
}

/* file_leaf_io_now's read, into several buffers. */
static int file_leaf_readv_now(vdev_t *leaf, uint64_t offset, const struct iovec *iov, int iovcnt)
{
    file_leaf_t *fl = leaf->leaf_priv;
    if (!fl) return -ENXIO;
    uint64_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (!CAIRN_IS_P2ALIGNED(iov[i].iov_len, 512)) return -EINVAL;
        len += iov[i].iov_len;
    }
    if (iovcnt <= 0 || iovcnt > IOV_MAX || len == 0 || !CAIRN_IS_P2ALIGNED(offset, 512))
        return -EINVAL;
    if (offset > leaf->psize || len > leaf->psize - offset) return -EIO;
    if (!slot_take(fl)) return -ENXIO;
    ssize_t n;
    uint64_t start = cairn_now_ns();
    do {
        n = preadv(fl->fd, iov, iovcnt, (off_t)offset);
    } while (n < 0 && errno == EINTR);
    /* Short: rare for direct I/O within the device, and the caller reads the
     * blocks one by one then, so no resumption here. */
    int err = n < 0 ? -errno : (uint64_t)n == len ? 0 : -EIO;
    vdev_leaf_account(leaf, VDEV_IO_READ, offset, len, err, start);
    slot_release(fl);
    return err;
}

static void file_leaf_close(vdev_t *leaf)
{
    file_leaf_t *fl = leaf->leaf_priv;
    if (!fl) return;
    pthread_mutex_lock(&fl->lock);
    while (fl->inflight > 0) pthread_cond_wait(&fl->slot_free, &fl->lock);
    fl->closing = true;
    pthread_cond_broadcast(&fl->slot_free);
    struct io_uring_sqe *sqe;
    while ((sqe = io_uring_get_sqe(&fl->ring)) == NULL) {
        io_uring_submit(&fl->ring);
        sched_yield();
    }
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, &fl->ring);
    int rc;
    do {
        rc = io_uring_submit(&fl->ring);
    } while (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
    pthread_mutex_unlock(&fl->lock);

    pthread_join(fl->completer, NULL);
    io_uring_queue_exit(&fl->ring);
    while (fl->zombies) {
        file_io_t *z = fl->zombies;
        fl->zombies = z->next;
        free(z);
    }
    close(fl->fd); /* also drops the flock */
    pthread_cond_destroy(&fl->slot_free);
    pthread_mutex_destroy(&fl->lock);
    free(fl);
    leaf->leaf_priv = NULL;
}

/* Zeros over the holes of [offset, offset + len) of a regular file, then one
 * flush (vdev_preallocate says why). SEEK_HOLE finds them; a file system
 * reports space allocated but never written (fallocate's unwritten extents)
 * as a hole too, and writing it is what turns it into plain space. Holes
 * start and end on file-system blocks, which O_DIRECT accepts. */
static int file_leaf_preallocate(vdev_t *leaf, uint64_t offset, uint64_t len)
{
    file_leaf_t *fl = leaf->leaf_priv;
    struct stat st;
    if (!fl || fstat(fl->fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    const size_t chunk = CAIRN_MIB;
    void *zeros = NULL;
    uint64_t end = offset + len, pos = offset, written = 0;
    int err = 0;
    while (pos < end && !err) {
        off_t hole = lseek(fl->fd, (off_t)pos, SEEK_HOLE);
        if (hole < 0) {
            err = errno == ENXIO ? 0 : -errno; /* ENXIO: pos is past the end */
            break;
        }
        if ((uint64_t)hole >= end) break;
        off_t data = lseek(fl->fd, hole, SEEK_DATA);
        if (data < 0 && errno != ENXIO) {
            err = -errno;
            break;
        }
        uint64_t stop = data < 0 ? end : CAIRN_MIN((uint64_t)data, end); /* ENXIO: a hole to the end */
        if (!zeros) {
            if (posix_memalign(&zeros, CAIRN_IO_ALIGN, chunk)) abort();
            memset(zeros, 0, chunk);
        }
        for (uint64_t o = (uint64_t)hole; o < stop && !err;) {
            size_t n = (size_t)CAIRN_MIN((uint64_t)chunk, stop - o);
            ssize_t w = pwrite(fl->fd, zeros, n, (off_t)o);
            if (w <= 0) err = w < 0 ? -errno : -EIO;
            else o += (uint64_t)w, written += (uint64_t)w;
        }
        pos = stop;
    }
    free(zeros);
    if (!err && written && fdatasync(fl->fd) != 0) err = -errno;
    if (err)
        log_warn("vdev", "%s: cannot preallocate %llu bytes at %llu (%s); writes there may be slower",
                 leaf->path, (unsigned long long)len, (unsigned long long)offset, strerror(-err));
    return err;
}

static int file_leaf_fstat(const vdev_t *leaf, struct stat *st)
{
    const file_leaf_t *fl = leaf->leaf_priv;
    if (!fl) return -ENXIO;
    return fstat(fl->fd, st) ? -errno : 0;
}

static const vdev_leaf_ops_t file_leaf_ops = {.submit = file_leaf_submit,
                                              .submit_writev = file_leaf_submit_writev,
                                              .close = file_leaf_close,
                                              .io_now = file_leaf_io_now,
                                              .readv_now = file_leaf_readv_now,
                                              .preallocate = file_leaf_preallocate,
                                              .fstat = file_leaf_fstat};

/* ---- open ---- */

/* Opens path for O_DIRECT I/O if the file system really supports 512-byte aligned
 * direct transfers, else buffered. Returns the fd or -errno. */
static int file_leaf_open_fd(const char *path, bool *direct)
{
    int fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (fd < 0 && errno != EINVAL) return -errno;
    if (fd >= 0) {
        /* O_DIRECT accepted at open; check that the smallest transfer the pool issues works. */
        void *probe = cairn_alloc_aligned(CAIRN_IO_ALIGN);
        ssize_t n = pread(fd, probe, 512, 512);
        int err = n < 0 ? errno : 0;
        free(probe);
        if (err != EINVAL) {
            *direct = true;
            return fd;
        }
        close(fd);
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    *direct = false;
    return fd;
}

static int file_leaf_size(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    if (S_ISREG(st.st_mode)) {
        *size = (uint64_t)st.st_size;
        return 0;
    }
    if (S_ISBLK(st.st_mode)) {
        uint64_t bytes = 0;
        if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) return -errno;
        *size = bytes;
        return 0;
    }
    return -ENODEV;
}

int vdev_device_flock(int fd, bool wait)
{
    /* A process killed with io_uring I/O in flight keeps its files (and so its
     * lock) open in the kernel for a few milliseconds after it is reaped; a
     * daemon restarted at once must not mistake that for a live owner, nor an
     * administrator's replace a look the probe of missing disks takes at the
     * device (spa_probe.c). Wait a little before calling the device busy
     * (unless the caller asks not to: an import scanning others' devices). */
    int tries = wait ? 0 : 100;
    while (vdev_device_lock() && flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK) return -errno;
        if (++tries > 100) return -EBUSY;
        usleep(20000);
    }
    return 0;
}

/* Opens the file leaf; on failure returns -errno and leaves *out untouched. */
static int vdev_file_open(const char *path, vdev_open_lock_t how, vdev_t **out)
{
    bool direct = false;
    int fd = file_leaf_open_fd(path, &direct);
    if (fd < 0) return fd;
    int err = how == VDEV_OPEN_PEEK ? 0 : vdev_device_flock(fd, how == VDEV_OPEN_LOCK_WAIT);
    if (err) {
        close(fd);
        return err;
    }
    uint64_t psize = 0;
    int rc = file_leaf_size(fd, &psize);
    if (rc < 0) {
        close(fd);
        return rc;
    }

    file_leaf_t *fl = cairn_zalloc(sizeof *fl);
    fl->fd = fd;
    fl->direct = direct;
    rc = io_uring_queue_init(VDEV_FILE_RING_ENTRIES, &fl->ring, 0);
    if (rc < 0) {
        log_error("vdev", "io_uring_queue_init for %s: %s", path, strerror(-rc));
        close(fd);
        free(fl);
        return rc;
    }
    pthread_mutex_init(&fl->lock, NULL);
    pthread_cond_init(&fl->slot_free, NULL);

    vdev_t *leaf = vdev_alloc(VDEV_TYPE_LEAF, 0);
    leaf->path = cairn_strdup(path);
    leaf->psize = psize;
    leaf->ops = &file_leaf_ops;
    leaf->leaf_priv = fl;
    leaf->state = VDEV_STATE_ONLINE;
    rc = pthread_create(&fl->completer, NULL, file_leaf_completer, leaf);
    if (rc != 0) {
        io_uring_queue_exit(&fl->ring);
        close(fd);
        pthread_cond_destroy(&fl->slot_free);
        pthread_mutex_destroy(&fl->lock);
        free(fl);
        leaf->leaf_priv = NULL;
        leaf->ops = &unavail_ops;
        vdev_free(leaf);
        return -rc;
    }
    pthread_setname_np(fl->completer, "vdev_cq");
    if (!direct) log_debug("vdev", "%s: O_DIRECT unsupported, using buffered I/O", path);
    *out = leaf;
    return 0;
}

void vdev_file_test_deadman(uint64_t report_ns, uint64_t lost)
{
    atomic_store(&deadman_ns, report_ns);
    atomic_store(&lost_ns, lost);
}

int vdev_file_test_lose_next(vdev_t *leaf)
{
    if (!leaf || leaf->ops != &file_leaf_ops) return -EINVAL;
    file_leaf_t *fl = leaf->leaf_priv;
    pthread_mutex_lock(&fl->lock);
    fl->lose_next = true;
    pthread_mutex_unlock(&fl->lock);
    return 0;
}

const char *vdev_leaf_device_path(const char *path)
{
    size_t plen = strlen(VDEV_FAULT_PREFIX);
    return strncmp(path, VDEV_FAULT_PREFIX, plen) ? path : path + plen;
}

bool vdev_leaf_holds_path(const vdev_t *leaf)
{
    struct stat held, named;
    if (!leaf->path || !leaf->ops || !leaf->ops->fstat || leaf->ops->fstat(leaf, &held)) return false;
    if (stat(vdev_leaf_device_path(leaf->path), &named)) return false;
    return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

bool vdev_leaf_file_gone(const vdev_t *leaf)
{
    struct stat held;
    if (!leaf->ops || !leaf->ops->fstat || leaf->ops->fstat(leaf, &held) || !S_ISREG(held.st_mode))
        return false;
    return !vdev_leaf_holds_path(leaf);
}

int vdev_leaf_open_again(const vdev_t *leaf, vdev_t **out)
{
    *out = NULL;
    if (!leaf->path) return -ENOENT;
    vdev_t *fresh = NULL;
    int e = vdev_leaf_open(leaf->path, &fresh);
    if (!e) {
        *out = fresh;
        return 0;
    }
    vdev_free(fresh);
    /* Our own lock on the same file refused the open: the device came back
     * under the handle the leaf never closed. */
    if (e == -EBUSY && vdev_leaf_holds_path(leaf)) return -EALREADY;
    return e;
}

void vdev_leaf_swap_device(vdev_t *leaf, vdev_t *other)
{
    const vdev_leaf_ops_t *ops = leaf->ops;
    void *priv = leaf->leaf_priv;
    uint64_t psize = leaf->psize;
    leaf->leaf_priv = other->leaf_priv;
    leaf->psize = other->psize;
    __atomic_store_n(&leaf->ops, other->ops, __ATOMIC_RELEASE);
    other->ops = ops;
    other->leaf_priv = priv;
    other->psize = psize;
    vdev_fault_leaf_rebind(leaf);
    vdev_fault_leaf_rebind(other);
}

void vdev_leaf_take_device(vdev_t *to, vdev_t *from)
{
    to->psize = from->psize;
    to->leaf_priv = from->leaf_priv;
    __atomic_store_n(&to->ops, from->ops, __ATOMIC_RELEASE);
    vdev_fault_leaf_rebind(to);
    atomic_store(&from->state, VDEV_STATE_UNAVAIL);
    __atomic_store_n(&from->ops, &vdev_gone_ops, __ATOMIC_RELEASE);
}

int vdev_leaf_open(const char *path, vdev_t **out)
{
    return vdev_leaf_open_how(path, VDEV_OPEN_LOCK_WAIT, out);
}

int vdev_leaf_open_how(const char *path, vdev_open_lock_t how, vdev_t **out)
{
    vdev_t *leaf = NULL;
    int rc;
    size_t plen = strlen(VDEV_FAULT_PREFIX);
    if (strncmp(path, VDEV_FAULT_PREFIX, plen) == 0)
        rc = vdev_fault_leaf_open(path + plen, path, &leaf);
    else
        rc = vdev_file_open(path, how, &leaf);
    if (rc == 0) {
        *out = leaf;
        return 0;
    }
    leaf = vdev_alloc(VDEV_TYPE_LEAF, 0);
    leaf->path = cairn_strdup(path);
    leaf->psize = 0;
    leaf->ops = &unavail_ops;
    leaf->leaf_priv = NULL;
    leaf->state = VDEV_STATE_UNAVAIL;
    *out = leaf;
    return rc;
}
