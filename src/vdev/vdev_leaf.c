/*
 * Leaf helpers shared by every kind of leaf: label placement, the size of the
 * data area, synchronous I/O for callers that cannot pipeline (labels, tests)
 * and a tree-wide flush.
 *
 * Layout of a leaf of psize bytes (see vdev.h):
 *
 *   0        256K     512K            4M                      end-512K  end
 *   | label0 | label1 | boot/reserved | data ...              | label2 | label3 |
 *
 * "end" is psize rounded down to 256 KiB, so that the back labels sit at the
 * same offsets whatever tail of less than 256 KiB a device happens to have;
 * an importer that only knows the device size finds them without a hint.
 *
 * Synchronous I/O is built on the asynchronous submit operation with a
 * stack-allocated waiter, so every leaf type only has to implement submit.
 *
 * vdev_flush() issues one FLUSH per leaf before waiting for any, so a pool of
 * N devices pays for one cache flush, not N in a row. UNAVAIL leaves are
 * skipped: they hold nothing that could be made durable. A leaf whose flush
 * fails fails the flush only when its mirror or raidz cannot do without it:
 * one failing disk must not stop a redundant pool's syncs (the failure is
 * counted as the leaf's write error, and the pool records what it missed).
 */
#include <cairn/raidz.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

uint64_t vdev_label_offset(uint64_t leaf_psize, int l)
{
    if (l < 2) return (uint64_t)l * VDEV_LABEL_SIZE;
    uint64_t end = CAIRN_P2ALIGN(leaf_psize, VDEV_LABEL_SIZE);
    return end - (uint64_t)(VDEV_LABELS - l) * VDEV_LABEL_SIZE;
}

uint64_t vdev_leaf_data_size(uint64_t leaf_psize)
{
    uint64_t end = CAIRN_P2ALIGN(leaf_psize, VDEV_LABEL_SIZE);
    if (end <= VDEV_DATA_START + VDEV_END_RESERVE) return 0;
    return end - VDEV_DATA_START - VDEV_END_RESERVE;
}

ssize_t vdev_writev_len(const struct iovec *iov, int iovcnt)
{
    if (iovcnt <= 0 || iovcnt > IOV_MAX) return -EINVAL;
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (!iov[i].iov_len || !CAIRN_IS_P2ALIGNED(iov[i].iov_len, 512)) return -EINVAL;
        len += iov[i].iov_len;
    }
    return (ssize_t)len;
}

/* Counts outstanding I/Os and remembers the first error, for callers that wait. */
typedef struct leaf_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    unsigned pending;
    int error;
} leaf_waiter_t;

static void leaf_waiter_init(leaf_waiter_t *w)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->pending = 0;
    w->error = 0;
}

static void leaf_waiter_done(void *arg, int error)
{
    leaf_waiter_t *w = arg;
    pthread_mutex_lock(&w->lock);
    if (error && !w->error) w->error = error;
    /* Broadcast while holding the lock: the waiter may destroy w as soon as it sees 0. */
    if (--w->pending == 0) pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
}

static int leaf_waiter_wait(leaf_waiter_t *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->pending > 0) pthread_cond_wait(&w->cv, &w->lock);
    int error = w->error;
    pthread_mutex_unlock(&w->lock);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->lock);
    return error;
}

/* Submits one I/O counted by w; a synchronous refusal is recorded as the I/O's error. */
static void leaf_waiter_submit(leaf_waiter_t *w, vdev_t *leaf, vdev_io_op_t op, uint64_t offset,
                               void *buf, size_t len)
{
    pthread_mutex_lock(&w->lock);
    w->pending++;
    pthread_mutex_unlock(&w->lock);
    int rc = leaf->ops ? leaf->ops->submit(leaf, op, offset, buf, len, leaf_waiter_done, w) : -ENXIO;
    if (rc < 0) leaf_waiter_done(w, rc);
}

int vdev_leaf_io_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                        vdev_io_done_t done, void *arg)
{
    return leaf->ops ? leaf->ops->submit(leaf, op, offset, buf, len, done, arg) : -ENXIO;
}

int vdev_leaf_io_sync(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len)
{
    leaf_waiter_t w;
    leaf_waiter_init(&w);
    leaf_waiter_submit(&w, leaf, op, offset, buf, len);
    return leaf_waiter_wait(&w);
}

/* The leaf range holding [offset, offset + len) of top's space: the same range
 * on a single leaf or a mirror side; on raidz (see vdev_raidz.c) top-level
 * sector t lies on child t % n at child sector t / n, and a block's columns
 * run at most one sector past its last top-level sector's row. */
typedef struct prealloc_range {
    uint64_t start, end; /* of each leaf's data area */
    int err;
} prealloc_range_t;

static void leaf_preallocate(vdev_t *leaf, void *arg)
{
    prealloc_range_t *r = arg;
    if (!leaf->ops || !leaf->ops->preallocate || !vdev_leaf_usable(leaf)) return;
    uint64_t data = vdev_leaf_data_size(leaf->psize);
    if (r->start >= data) return;
    int e = leaf->ops->preallocate(leaf, VDEV_DATA_START + r->start,
                                   CAIRN_MIN(r->end, data) - r->start);
    if (e && !r->err) r->err = e;
}

int vdev_preallocate(vdev_t *top, uint64_t offset, uint64_t len)
{
    prealloc_range_t r = {.start = offset, .end = offset + len};
    if (top->type == VDEV_TYPE_RAIDZ) {
        uint64_t n = top->nchildren, a = top->ashift;
        r.start = ((offset >> a) / n) << a;
        r.end = ((((offset + len + (1ULL << a) - 1) >> a) + n - 1) / n + 1) << a;
    }
    vdev_foreach_leaf(top, leaf_preallocate, &r);
    return r.err;
}

int vdev_flush_now(vdev_t *vd)
{
    if (vd->type != VDEV_TYPE_LEAF || !vd->ops || !vd->ops->io_now || !vdev_leaf_usable(vd))
        return vdev_flush(vd);
    return vd->ops->io_now(vd, VDEV_IO_FLUSH, 0, NULL, 0);
}

/* One leaf's flush in a tree-wide flush. */
typedef struct flush_one {
    leaf_waiter_t *w;
    vdev_t *leaf;
    int error;
    bool sent;
} flush_one_t;

typedef struct flush_all {
    leaf_waiter_t w;
    flush_one_t *one;
    size_t n;
} flush_all_t;

static void flush_one_done(void *arg, int error)
{
    flush_one_t *f = arg;
    f->error = error;
    leaf_waiter_done(f->w, error);
}

static void flush_count_leaf(vdev_t *leaf, void *arg)
{
    (void)leaf;
    (*(size_t *)arg)++;
}

static void flush_send_leaf(vdev_t *leaf, void *arg)
{
    flush_all_t *fa = arg;
    flush_one_t *f = &fa->one[fa->n++];
    *f = (flush_one_t){.w = &fa->w, .leaf = leaf};
    if (!vdev_leaf_usable(leaf)) return;
    f->sent = true;
    pthread_mutex_lock(&fa->w.lock);
    fa->w.pending++;
    pthread_mutex_unlock(&fa->w.lock);
    int rc = leaf->ops->submit(leaf, VDEV_IO_FLUSH, 0, NULL, 0, flush_one_done, f);
    if (rc < 0) flush_one_done(f, rc);
}

/* Whether vd's data is durable although some leaves failed their flush: a
 * mirror needs one side flushed, raidz all but nparity children, the root
 * every top-level vdev. A leaf that took no flush (out of service) counts as
 * failed. */
static bool flushed_enough(const vdev_t *vd, const flush_all_t *fa)
{
    if (vd->type == VDEV_TYPE_LEAF) {
        for (size_t i = 0; i < fa->n; i++)
            if (fa->one[i].leaf == vd) return fa->one[i].sent && !fa->one[i].error;
        return false;
    }
    if (vd->type == VDEV_TYPE_HOLE) return true;
    uint32_t ok = 0;
    for (uint32_t i = 0; i < vd->nchildren; i++) ok += flushed_enough(vd->children[i], fa);
    switch (vd->type) {
    case VDEV_TYPE_MIRROR:
    case VDEV_TYPE_REPLACING: return ok > 0;
    case VDEV_TYPE_RAIDZ: return ok + vd->nparity >= vd->nchildren;
    default: return ok == vd->nchildren;
    }
}

int vdev_flush(vdev_t *vd)
{
    flush_all_t fa = {.n = 0};
    size_t nleaves = 0;
    vdev_foreach_leaf(vd, flush_count_leaf, &nleaves);
    flush_one_t stack_one[16];
    fa.one = nleaves <= 16 ? stack_one : cairn_zalloc(nleaves * sizeof *fa.one);
    leaf_waiter_init(&fa.w);
    vdev_foreach_leaf(vd, flush_send_leaf, &fa);
    int err = leaf_waiter_wait(&fa.w);
    /* A leaf that failed its flush is charged a write error (the pool records
     * what it may have lost); the flush fails only when redundancy does not
     * cover it. */
    if (err && flushed_enough(vd, &fa)) err = 0;
    if (fa.one != stack_one) free(fa.one);
    return err;
}

int vdev_leaf_probe_size(const vdev_t *leaf, uint64_t *size)
{
    if (!leaf->path) return -ENOENT;
    /* A fault-injecting leaf names the file it wraps after the prefix. */
    const char *path = !strncmp(leaf->path, "fault:", 6) ? leaf->path + 6 : leaf->path;
    struct stat st;
    if (stat(path, &st) < 0) return -errno;
    if (S_ISREG(st.st_mode)) {
        *size = (uint64_t)st.st_size;
        return 0;
    }
    if (!S_ISBLK(st.st_mode)) return -ENODEV;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    uint64_t bytes = 0;
    int e = ioctl(fd, BLKGETSIZE64, &bytes) < 0 ? -errno : 0;
    close(fd);
    if (!e) *size = bytes;
    return e;
}
