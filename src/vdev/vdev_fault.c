/*
 * Fault-injecting leaves (see include/cairn/vdev_fault.h for the test API).
 *
 * The point of this leaf is to make the failures that matter for a
 * copy-on-write pool reproducible in a unit test: a power cut that loses,
 * keeps or tears writes the device had acknowledged but not flushed, and a
 * device that returns EIO or wrong data for some blocks.
 *
 * Volatile cache model
 * --------------------
 * A real disk may acknowledge a write long before the data is on stable media;
 * only a completed cache flush promises durability. The leaf models this with
 * a per-leaf list of "held" writes, kept in submission order as private copies
 * of the data. A write is acknowledged once held; a read returns the file's
 * contents overlaid with every held write that overlaps it, oldest first, so
 * the newest data wins exactly as with a real cache. FLUSH applies the held
 * writes to the file in order and fdatasync()s it, so a flushed write survives
 * even a real crash of the test machine.
 *
 * A power cut walks every open leaf under the registry lock, decides the fate
 * of each held write (drop, keep whole, or tear at 512-byte sector
 * granularity: sectors are the device's unit of atomicity, so a single-sector
 * write is never torn), applies the survivors in order, and freezes the leaf:
 * from then on submit returns -EIO and I/O already queued fails with -EIO,
 * which is what a pool sees of a machine that has lost power. The RNG is
 * seeded by the caller and leaves are visited in the order they were opened,
 * so a failing seed reproduces.
 *
 * Concurrency
 * -----------
 * I/O is executed by a one-thread task queue per leaf, so done callbacks run
 * on a thread of the leaf as vdev.h promises (a callback run inside submit
 * could deadlock a caller that submits while holding a lock its callback
 * takes), and I/O to one leaf executes in submission order. Plain
 * pread/pwrite is enough: tests care about semantics, not speed. One thing
 * is kept cheap, because benchmarks use this leaf as a slow main disk
 * (vdev_fault_set_flush_delay) and its work is charged to the process under
 * test, where a real disk's would not be: held writes are page-aligned and a
 * FLUSH writes them with O_DIRECT when the file system takes it, so the page
 * cache copy of every byte the pool writes (a sixth of all CPU samples at 32
 * sync writes in flight) is not done; a vectored write's gathered buffer
 * becomes the held write itself.
 *
 * A daemon under test has no caller of the C API: there a leaf fails every
 * I/O with EIO while a file named like its file plus ".eio" exists (one
 * access() per I/O: tests only), so an integration test can make a disk die
 * and come back (fault management, spares); and executes nothing while one
 * named plus ".stall" exists (a hung path: multihost tests). A leaf whose
 * file is moved away fails every I/O with ENXIO, as an unplugged disk does,
 * until the same file is back (fault management's missing disks, spa_probe.c).
 *
 * Locks: the registry lock (list of open leaves, counters aside) is taken
 * before a leaf's lock, never after. A leaf's lock covers its held writes,
 * injections and flags, and is held across its file I/O so that a flush or a
 * power cut never interleaves with a read of the same leaf.
 */
#include <cairn/vdev_fault.h>
#include <cairn/log.h>
#include <cairn/taskq.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAULT_SECTOR 512
#define FAULT_DIRECT_ALIGN 4096 /* held buffers, and the writes a FLUSH issues with O_DIRECT */

typedef struct fault_write {
    struct fault_write *next;
    uint64_t offset;
    size_t len;
    char *data;
} fault_write_t;

typedef struct fault_inject {
    struct fault_inject *next;
    uint64_t offset, len;
    vdev_fault_read_mode_t mode;
} fault_inject_t;

typedef struct fault_leaf {
    struct fault_leaf *next; /* registry, in open order */
    vdev_t *vd;
    int fd;
    int direct_fd;    /* the same file with O_DIRECT, or -1 (FLUSH's writes) */
    char *file_path;  /* as given after "fault:" */
    char *real_path;  /* canonical, or NULL if realpath failed */
    dev_t file_dev;   /* the file opened (a file moved away: the disk is gone) */
    ino_t file_ino;
    taskq_t *tq;

    pthread_mutex_t lock;
    fault_write_t *held_head, *held_tail;
    fault_inject_t *injects;
    bool fail_writes;
    bool frozen;
    uint32_t flush_delay_us; /* added to every FLUSH: a slow disk (benchmarks) */
    _Atomic bool flush_gate; /* FLUSHes wait while set (tests order a flush's window) */
    bool fail_next_flush;    /* the next FLUSH fails and loses the held writes */
    cairn_rng_t garbage_rng;
} fault_leaf_t;

typedef struct fault_io {
    fault_leaf_t *fl;
    vdev_io_op_t op;
    uint64_t offset;
    char *buf;
    size_t len;
    bool owns_buf; /* a vectored write's pieces, gathered (fault_submit_writev) */
    vdev_io_done_t done;
    void *arg;
} fault_io_t;

static pthread_mutex_t fault_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static fault_leaf_t *fault_registry;
static vdev_fault_stats_t fault_stats; /* fields updated with __atomic builtins */

#define FAULT_STAT_ADD(field, n) __atomic_add_fetch(&fault_stats.field, (n), __ATOMIC_RELAXED)

/* ---- file helpers ---- */

static void fault_held_free(fault_write_t *w)
{
    free(w->data);
    free(w);
}

/* ---- I/O, on the leaf's task queue thread ---- */

static int fault_do_read(fault_leaf_t *fl, uint64_t offset, char *buf, size_t len)
{
    int rc = cairn_pread_all(fl->fd, buf, len, offset);
    if (rc < 0) return rc;
    uint64_t end = offset + len;
    for (fault_write_t *w = fl->held_head; w; w = w->next) {
        uint64_t lo = CAIRN_MAX(offset, w->offset), hi = CAIRN_MIN(end, w->offset + w->len);
        if (lo < hi) memcpy(buf + (lo - offset), w->data + (lo - w->offset), hi - lo);
    }
    bool failed = false, garbled = false;
    for (fault_inject_t *in = fl->injects; in; in = in->next) {
        uint64_t lo = CAIRN_MAX(offset, in->offset), hi = CAIRN_MIN(end, in->offset + in->len);
        if (lo >= hi) continue;
        if (in->mode == VDEV_FAULT_READ_EIO) {
            failed = true;
            continue;
        }
        /* XOR with a nonzero byte, so every byte really differs from what is stored. */
        for (uint64_t i = lo; i < hi; i++)
            buf[i - offset] ^= (char)(1 + cairn_rng_below(&fl->garbage_rng, 255));
        garbled = true;
    }
    if (failed) {
        FAULT_STAT_ADD(reads_failed, 1);
        return -EIO;
    }
    if (garbled) FAULT_STAT_ADD(reads_garbled, 1);
    return 0;
}

/* A page-aligned buffer (O_DIRECT's rule), not zeroed; NULL when out of memory. */
static char *fault_buf_alloc(size_t len)
{
    void *p = NULL;
    return posix_memalign(&p, FAULT_DIRECT_ALIGN, len) ? NULL : p;
}

/* Holds a write. *stolen, when not NULL, is a buffer of the write's own
 * (gathered): it becomes the held data and *stolen is set to NULL. */
static int fault_do_write(fault_leaf_t *fl, uint64_t offset, const char *buf, size_t len,
                          char **stolen)
{
    if (fl->fail_writes) {
        FAULT_STAT_ADD(writes_failed, 1);
        return -EIO;
    }
    fault_write_t *w = cairn_zalloc(sizeof *w);
    w->offset = offset;
    w->len = len;
    if (stolen && *stolen) {
        w->data = *stolen;
        *stolen = NULL;
    } else {
        w->data = fault_buf_alloc(len);
        if (!w->data) {
            free(w);
            return -ENOMEM;
        }
        memcpy(w->data, buf, len);
    }
    if (fl->held_tail) fl->held_tail->next = w;
    else fl->held_head = w;
    fl->held_tail = w;
    FAULT_STAT_ADD(writes_held, 1);
    return 0;
}

static int fault_do_flush(fault_leaf_t *fl)
{
    int rc = 0;
    if (fl->fail_next_flush) {
        fl->fail_next_flush = false;
        while (fl->held_head) {
            fault_write_t *w = fl->held_head;
            fl->held_head = w->next;
            fault_held_free(w);
            FAULT_STAT_ADD(cut_dropped, 1);
        }
        fl->held_tail = NULL;
        return -EIO;
    }
    while (fl->held_head) {
        fault_write_t *w = fl->held_head;
        rc = -EINVAL;
        /* O_DIRECT where it can (the page cache copy is the emulator's cost,
         * not the pool's); the buffered descriptor for what it refuses. The
         * kernel keeps the two views coherent, so the order still holds. */
        if (fl->direct_fd >= 0 && CAIRN_IS_P2ALIGNED(w->offset | w->len, FAULT_DIRECT_ALIGN))
            rc = cairn_pwrite_all(fl->direct_fd, w->data, w->len, w->offset);
        if (rc == -EINVAL) rc = cairn_pwrite_all(fl->fd, w->data, w->len, w->offset);
        if (rc < 0) break; /* keep the rest held: the flush did not complete */
        fl->held_head = w->next;
        fault_held_free(w);
        FAULT_STAT_ADD(writes_flushed, 1);
    }
    if (!fl->held_head) fl->held_tail = NULL;
    if (rc == 0 && fdatasync(fl->fd) < 0) rc = -errno;
    if (fl->flush_delay_us) usleep(fl->flush_delay_us);
    return rc;
}

/* The switch a test flips from outside the process: while a file named like
 * the leaf's file plus ".eio" exists, every I/O of the leaf fails with EIO - a
 * disk that stopped answering, under a running daemon. */
static bool fault_file_exists(const fault_leaf_t *fl, const char *suffix)
{
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s%s", fl->file_path, suffix) >= sizeof p) return false;
    return access(p, F_OK) == 0;
}

static bool fault_switch_on(const fault_leaf_t *fl) { return fault_file_exists(fl, ".eio"); }

/* A disk pulled out: while the leaf's file is not at its path (moved away,
 * removed), every I/O fails with ENXIO, as it does for an unplugged device;
 * once the same file is back, I/O works again. One stat() per I/O: tests only. */
static bool fault_file_in_place(const fault_leaf_t *fl)
{
    struct stat st;
    return stat(fl->file_path, &st) == 0 && st.st_dev == fl->file_dev && st.st_ino == fl->file_ino;
}

/* The other switch: while a file named like the leaf's file plus ".stall"
 * exists, the leaf executes nothing - a path that hangs (a controller, a
 * fabric) with the I/O queued in the host. What was queued runs when it goes,
 * unless the pool's multihost fence passed meanwhile (vdev_write_fenced). */
static void fault_wait_stall(const fault_leaf_t *fl)
{
    while (fault_file_exists(fl, ".stall")) usleep(10000);
}

static void fault_io_run(void *arg)
{
    fault_io_t *io = arg;
    fault_leaf_t *fl = io->fl;
    vdev_t *vd = __atomic_load_n(&fl->vd, __ATOMIC_ACQUIRE); /* rebound by a reopen */
    int rc;
    fault_wait_stall(fl);
    while (io->op == VDEV_IO_FLUSH && atomic_load(&fl->flush_gate)) usleep(1000);
    uint64_t start = cairn_now_ns();
    pthread_mutex_lock(&fl->lock);
    if (fl->frozen || fault_switch_on(fl)) rc = -EIO;
    else if (!fault_file_in_place(fl)) rc = -ENXIO;
    else if (io->op != VDEV_IO_READ && vdev_write_fenced(vd)) rc = -EIO;
    else if (io->op == VDEV_IO_READ) rc = fault_do_read(fl, io->offset, io->buf, io->len);
    else if (io->op == VDEV_IO_WRITE)
        rc = fault_do_write(fl, io->offset, io->buf, io->len, io->owns_buf ? &io->buf : NULL);
    else rc = fault_do_flush(fl);
    pthread_mutex_unlock(&fl->lock);

    vdev_leaf_account(vd, io->op, io->offset, io->len, rc, start);
    vdev_io_done_t done = io->done;
    void *done_arg = io->arg;
    if (io->owns_buf) free(io->buf); /* NULL when it became a held write */
    free(io);
    done(done_arg, rc);
}

/* Queues an I/O of a leaf that is not frozen; gathered: buf is the I/O's own. */
static int fault_queue(vdev_t *vd, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                       bool gathered, vdev_io_done_t done, void *arg)
{
    fault_leaf_t *fl = vd->leaf_priv;
    if (!fl) return -ENXIO;
    if (op != VDEV_IO_FLUSH) {
        if (op != VDEV_IO_READ && op != VDEV_IO_WRITE) return -EINVAL;
        if (len == 0 || !CAIRN_IS_P2ALIGNED(offset | len, FAULT_SECTOR)) return -EINVAL;
        if (offset > vd->psize || len > vd->psize - offset) return -EIO;
    }
    pthread_mutex_lock(&fl->lock);
    bool frozen = fl->frozen;
    pthread_mutex_unlock(&fl->lock);
    if (frozen) return -EIO;

    fault_io_t *io = cairn_zalloc(sizeof *io);
    *io = (fault_io_t){.fl = fl, .op = op, .offset = offset, .buf = buf, .len = len,
                       .owns_buf = gathered, .done = done, .arg = arg};
    taskq_dispatch(fl->tq, fault_io_run, io, NULL);
    return 0;
}

static int fault_submit(vdev_t *vd, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                        vdev_io_done_t done, void *arg)
{
    return fault_queue(vd, op, offset, buf, len, false, done, arg);
}

/* A write from several buffers is gathered into one of its own, which becomes
 * the held write (the model needs a copy anyway), so the pool's merged writes
 * reach a fault leaf by the same path as a file leaf and the power-cut tests
 * cover it. */
static int fault_submit_writev(vdev_t *vd, uint64_t offset, const struct iovec *iov, int iovcnt,
                               vdev_io_done_t done, void *arg)
{
    ssize_t len = vdev_writev_len(iov, iovcnt);
    if (len < 0) return (int)len;
    char *buf = fault_buf_alloc((size_t)len);
    if (!buf) return -ENOMEM;
    for (size_t at = 0, i = 0; i < (size_t)iovcnt; at += iov[i++].iov_len)
        memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
    int rc = fault_queue(vd, VDEV_IO_WRITE, offset, buf, (size_t)len, true, done, arg);
    if (rc) free(buf);
    return rc;
}

static void fault_close(vdev_t *vd)
{
    fault_leaf_t *fl = vd->leaf_priv;
    if (!fl) return;
    pthread_mutex_lock(&fault_registry_lock);
    for (fault_leaf_t **pp = &fault_registry; *pp; pp = &(*pp)->next) {
        if (*pp == fl) {
            *pp = fl->next;
            break;
        }
    }
    pthread_mutex_unlock(&fault_registry_lock);

    taskq_destroy(fl->tq); /* runs what is queued, so every done callback fires */

    uint64_t dropped = 0;
    while (fl->held_head) {
        fault_write_t *w = fl->held_head;
        fl->held_head = w->next;
        fault_held_free(w);
        dropped++;
    }
    FAULT_STAT_ADD(close_dropped, dropped);
    while (fl->injects) {
        fault_inject_t *in = fl->injects;
        fl->injects = in->next;
        free(in);
    }
    close(fl->fd);
    if (fl->direct_fd >= 0) close(fl->direct_fd);
    pthread_mutex_destroy(&fl->lock);
    free(fl->file_path);
    free(fl->real_path);
    free(fl);
    vd->leaf_priv = NULL;
}

static int fault_fstat(const vdev_t *vd, struct stat *st)
{
    const fault_leaf_t *fl = vd->leaf_priv;
    if (!fl) return -ENXIO;
    return fstat(fl->fd, st) ? -errno : 0;
}

static const vdev_leaf_ops_t fault_leaf_ops = {.submit = fault_submit,
                                               .submit_writev = fault_submit_writev,
                                               .close = fault_close,
                                               .fstat = fault_fstat};

void vdev_fault_leaf_rebind(vdev_t *vd)
{
    if (vd->ops != &fault_leaf_ops || !vd->leaf_priv) return;
    fault_leaf_t *fl = vd->leaf_priv;
    __atomic_store_n(&fl->vd, vd, __ATOMIC_RELEASE);
}

int vdev_fault_leaf_open(const char *file_path, const char *display_path, vdev_t **out)
{
    *out = NULL;
    int fd = open(file_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    int lock_err = vdev_device_flock(fd, true);
    if (lock_err) {
        close(fd);
        return lock_err;
    }
    struct stat st;
    uint64_t psize = 0;
    if (fstat(fd, &st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (S_ISREG(st.st_mode)) {
        psize = (uint64_t)st.st_size;
    } else if (!S_ISBLK(st.st_mode) || ioctl(fd, BLKGETSIZE64, &psize) < 0) {
        close(fd);
        return -ENODEV;
    }

    fault_leaf_t *fl = cairn_zalloc(sizeof *fl);
    fl->fd = fd;
    fl->direct_fd = open(file_path, O_RDWR | O_DIRECT | O_CLOEXEC); /* -1: buffered only */
    fl->file_path = cairn_strdup(file_path);
    fl->file_dev = st.st_dev;
    fl->file_ino = st.st_ino;
    char *rp = realpath(file_path, NULL);
    fl->real_path = rp;
    pthread_mutex_init(&fl->lock, NULL);
    cairn_rng_seed(&fl->garbage_rng, 0x6661756c74ULL ^ (uint64_t)st.st_ino);
    fl->tq = taskq_create("vfault", 1);

    vdev_t *vd = vdev_alloc(VDEV_TYPE_LEAF, 0);
    vd->path = cairn_strdup(display_path);
    vd->psize = psize;
    vd->ops = &fault_leaf_ops;
    vd->leaf_priv = fl;
    vd->state = VDEV_STATE_ONLINE;
    fl->vd = vd;

    pthread_mutex_lock(&fault_registry_lock);
    fault_leaf_t **pp = &fault_registry;
    while (*pp) pp = &(*pp)->next;
    *pp = fl;
    pthread_mutex_unlock(&fault_registry_lock);
    *out = vd;
    return 0;
}

/* ---- test control ---- */

static bool fault_leaf_matches(const fault_leaf_t *fl, const char *path, const char *real)
{
    if (strcmp(fl->file_path, path) == 0) return true;
    return real && fl->real_path && strcmp(fl->real_path, real) == 0;
}

/* Writes the sectors of w selected by keep[] (one flag per sector), coalescing runs. */
static void fault_apply_sectors(fault_leaf_t *fl, const fault_write_t *w, const bool *keep, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (!keep[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && keep[j]) j++;
        int rc = cairn_pwrite_all(fl->fd, w->data + i * FAULT_SECTOR, (j - i) * FAULT_SECTOR,
                                  w->offset + i * FAULT_SECTOR);
        if (rc < 0) log_warn("vdev", "fault cut on %s: %s", fl->file_path, strerror(-rc));
        i = j;
    }
}

/* Decides and applies the fate of one held write at a power cut. */
static void fault_cut_write(fault_leaf_t *fl, const fault_write_t *w, vdev_fault_cut_mode_t mode,
                            cairn_rng_t *rng)
{
    size_t nsect = w->len / FAULT_SECTOR;
    enum { CUT_DROP, CUT_KEEP, CUT_TEAR } fate;
    if (mode == VDEV_FAULT_CUT_DROP) fate = CUT_DROP;
    else if (mode == VDEV_FAULT_CUT_KEEP) fate = CUT_KEEP;
    else fate = (int)cairn_rng_below(rng, nsect >= 2 ? 3 : 2);

    if (fate == CUT_DROP) {
        FAULT_STAT_ADD(cut_dropped, 1);
        return;
    }
    bool *keep = cairn_zalloc(nsect * sizeof *keep);
    if (fate == CUT_KEEP) {
        for (size_t i = 0; i < nsect; i++) keep[i] = true;
        FAULT_STAT_ADD(cut_kept, 1);
    } else {
        if (cairn_rng_below(rng, 2) == 0) {
            /* The drive wrote sectors in order and stopped part way. */
            size_t k = 1 + (size_t)cairn_rng_below(rng, nsect - 1);
            for (size_t i = 0; i < k; i++) keep[i] = true;
        } else {
            /* The drive reordered sectors: any subset, but a proper, nonempty one. */
            size_t nkept = 0;
            for (size_t i = 0; i < nsect; i++) nkept += keep[i] = cairn_rng_below(rng, 2);
            if (nkept == 0) keep[cairn_rng_below(rng, nsect)] = true;
            else if (nkept == nsect) keep[cairn_rng_below(rng, nsect)] = false;
        }
        FAULT_STAT_ADD(cut_torn, 1);
    }
    fault_apply_sectors(fl, w, keep, nsect);
    free(keep);
}

void vdev_fault_powercut(uint64_t seed, vdev_fault_cut_mode_t mode)
{
    cairn_rng_t rng;
    cairn_rng_seed(&rng, seed);
    FAULT_STAT_ADD(powercuts, 1);
    pthread_mutex_lock(&fault_registry_lock);
    for (fault_leaf_t *fl = fault_registry; fl; fl = fl->next) {
        pthread_mutex_lock(&fl->lock);
        if (!fl->frozen) {
            fl->frozen = true;
            while (fl->held_head) {
                fault_write_t *w = fl->held_head;
                fl->held_head = w->next;
                fault_cut_write(fl, w, mode, &rng);
                fault_held_free(w);
            }
            fl->held_tail = NULL;
            if (fdatasync(fl->fd) < 0)
                log_warn("vdev", "fault cut: fdatasync %s: %s", fl->file_path, strerror(errno));
            /* A dead machine holds no locks: let the test reopen the file. */
            flock(fl->fd, LOCK_UN);
        }
        pthread_mutex_unlock(&fl->lock);
    }
    pthread_mutex_unlock(&fault_registry_lock);
}

/* Runs fn on every open leaf over path, under its lock; -ENOENT when there is none. */
static int fault_for_path(const char *path, void (*fn)(fault_leaf_t *fl, void *arg), void *arg)
{
    char *real = realpath(path, NULL);
    int rc = -ENOENT;
    pthread_mutex_lock(&fault_registry_lock);
    for (fault_leaf_t *fl = fault_registry; fl; fl = fl->next) {
        if (!fault_leaf_matches(fl, path, real)) continue;
        pthread_mutex_lock(&fl->lock);
        fn(fl, arg);
        pthread_mutex_unlock(&fl->lock);
        rc = 0;
    }
    pthread_mutex_unlock(&fault_registry_lock);
    free(real);
    return rc;
}

static void fault_add_inject(fault_leaf_t *fl, void *arg)
{
    const fault_inject_t *tmpl = arg;
    fault_inject_t *in = cairn_zalloc(sizeof *in);
    *in = *tmpl;
    in->next = fl->injects;
    fl->injects = in;
}

int vdev_fault_inject_read(const char *path, uint64_t offset, uint64_t len,
                           vdev_fault_read_mode_t mode)
{
    if (len == 0 || offset + len < offset) return -EINVAL;
    if (mode != VDEV_FAULT_READ_EIO && mode != VDEV_FAULT_READ_GARBAGE) return -EINVAL;
    fault_inject_t tmpl = {.offset = offset, .len = len, .mode = mode};
    return fault_for_path(path, fault_add_inject, &tmpl);
}

static void fault_set_fail_writes(fault_leaf_t *fl, void *arg)
{
    fl->fail_writes = *(const bool *)arg;
}

int vdev_fault_fail_writes(const char *path, bool fail)
{
    return fault_for_path(path, fault_set_fail_writes, &fail);
}

static void fault_set_flush_delay(fault_leaf_t *fl, void *arg)
{
    fl->flush_delay_us = *(const uint32_t *)arg;
}

int vdev_fault_set_flush_delay(const char *path, uint32_t us)
{
    return fault_for_path(path, fault_set_flush_delay, &us);
}

static void fault_set_flush_gate(fault_leaf_t *fl, void *arg)
{
    atomic_store(&fl->flush_gate, *(const bool *)arg);
}

int vdev_fault_gate_flushes(const char *path, bool gate)
{
    return fault_for_path(path, fault_set_flush_gate, &gate);
}

static void fault_set_fail_next_flush(fault_leaf_t *fl, void *arg)
{
    (void)arg;
    fl->fail_next_flush = true;
}

int vdev_fault_fail_next_flush(const char *path)
{
    return fault_for_path(path, fault_set_fail_next_flush, NULL);
}

static void fault_clear_leaf(fault_leaf_t *fl, void *arg)
{
    (void)arg;
    while (fl->injects) {
        fault_inject_t *in = fl->injects;
        fl->injects = in->next;
        free(in);
    }
    fl->fail_writes = false;
    fl->fail_next_flush = false;
    atomic_store(&fl->flush_gate, false);
}

int vdev_fault_clear(const char *path)
{
    return fault_for_path(path, fault_clear_leaf, NULL);
}

void vdev_fault_reset(void)
{
    pthread_mutex_lock(&fault_registry_lock);
    for (fault_leaf_t *fl = fault_registry; fl; fl = fl->next) {
        pthread_mutex_lock(&fl->lock);
        fault_clear_leaf(fl, NULL);
        fl->frozen = false;
        pthread_mutex_unlock(&fl->lock);
    }
    uint64_t *field = (uint64_t *)&fault_stats;
    for (size_t i = 0; i < sizeof fault_stats / sizeof *field; i++)
        __atomic_store_n(&field[i], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&fault_registry_lock);
}

vdev_fault_stats_t vdev_fault_stats(void)
{
    vdev_fault_stats_t s;
    uint64_t *dst = (uint64_t *)&s, *src = (uint64_t *)&fault_stats;
    for (size_t i = 0; i < sizeof s / sizeof *dst; i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    return s;
}
