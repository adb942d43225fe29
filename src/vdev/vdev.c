/*
 * The vdev tree: construction, sizes, states, and the parallel leaf I/O
 * batch every top-level block operation is built on.
 *
 * A top-level vdev's address space (asize) is what its smallest leaf can
 * hold: a leaf contributes only its data area (between the 4 MiB front
 * reserve and the two end labels), rounded down to the allocation unit, so
 * every allocation maps onto whole sectors of every child. A mirror offers
 * one such area; raidz stripes sectors across all children, so it offers
 * nchildren of them (parity comes out of that space per block, see
 * vdev_raidz.c).
 *
 * States are derived bottom-up from the leaves, which the leaf driver marks
 * UNAVAIL when they cannot be opened (or FAULTED when they fail): a mirror
 * needs one side, raidz needs all but nparity children, and the root is only
 * as healthy as its worst top-level vdev, since data is spread over all of them.
 *
 * The batch (vdev_batch_run) is how mirrors and raidz stay fast: all the
 * children's I/Os of a block are queued at once through the leaves'
 * asynchronous submit, and one countdown latch waits for the last
 * completion. Completions may arrive on any thread, or synchronously inside
 * submit, so the count is raised before each submit.
 */
#include <cairn/raidz.h>
#include <cairn/util.h>
#include <cairn/vdev.h>

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

vdev_t *vdev_alloc(vdev_type_t type, uint64_t guid)
{
    vdev_t *vd = cairn_zalloc(sizeof *vd);
    vd->type = type;
    vd->guid = guid;
    vd->ashift = VDEV_DEFAULT_ASHIFT;
    vd->state = VDEV_STATE_ONLINE;
    return vd;
}

void vdev_add_child(vdev_t *parent, vdev_t *child)
{
    parent->children = cairn_realloc(parent->children, (parent->nchildren + 1) * sizeof(vdev_t *));
    child->id = parent->nchildren;
    child->parent = parent;
    parent->children[parent->nchildren++] = child;
}

void vdev_free(vdev_t *vd)
{
    if (!vd) return;
    for (uint32_t i = 0; i < vd->nchildren; i++) vdev_free(vd->children[i]);
    if (vd->ops && vd->ops->close) vd->ops->close(vd);
    free(vd->children);
    free(vd->path);
    free(vd);
}

bool vdev_is_leaf(const vdev_t *vd) { return vd->type == VDEV_TYPE_LEAF; }

/* Same formula as vdev_leaf_data_size(); kept here so sizing does not depend
 * on the leaf driver's object being linked. */
static uint64_t vdev_data_size_of(uint64_t psize)
{
    uint64_t end = CAIRN_P2ALIGN(psize, VDEV_LABEL_SIZE);
    if (end < VDEV_DATA_START + VDEV_END_RESERVE) return 0;
    return end - VDEV_DATA_START - VDEV_END_RESERVE;
}

void vdev_compute_asize(vdev_t *top)
{
    if (top->type == VDEV_TYPE_ROOT) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < top->nchildren; i++) {
            vdev_compute_asize(top->children[i]);
            sum += top->children[i]->asize;
        }
        top->asize = sum;
        return;
    }
    top->asize = vdev_asize_of(top);
}

uint64_t vdev_asize_of(vdev_t *top)
{
    if (top->type == VDEV_TYPE_ROOT) return 0;
    if (top->ashift == 0) top->ashift = VDEV_DEFAULT_ASHIFT;
    if (top->type == VDEV_TYPE_HOLE) return 0;
    uint64_t unit = 1ULL << top->ashift;
    if (top->type == VDEV_TYPE_LEAF) return CAIRN_P2ALIGN(vdev_data_size_of(top->psize), unit);
    /* Missing leaves (psize 0) do not shrink the vdev: the smallest leaf
     * present governs; a replacement must be at least that big. */
    uint64_t min = UINT64_MAX;
    for (uint32_t i = 0; i < top->nchildren; i++) {
        vdev_t *c = top->children[i];
        c->ashift = top->ashift;
        if (c->psize == 0) continue;
        min = CAIRN_MIN(min, vdev_data_size_of(c->psize));
    }
    if (min == UINT64_MAX) return 0;
    min = CAIRN_P2ALIGN(min, unit);
    return top->type == VDEV_TYPE_RAIDZ ? min * top->nchildren : min;
}

static bool state_missing(int s)
{
    return s == VDEV_STATE_UNAVAIL || s == VDEV_STATE_FAULTED || s == VDEV_STATE_OFFLINE;
}

void vdev_state_refresh(vdev_t *vd)
{
    if (vd->type == VDEV_TYPE_LEAF) return; /* set by the leaf driver */
    if (vd->type == VDEV_TYPE_HOLE) {
        vd->state = VDEV_STATE_ONLINE; /* holds nothing, so it can lack nothing */
        return;
    }
    uint32_t missing = 0, degraded = 0;
    for (uint32_t i = 0; i < vd->nchildren; i++) {
        vdev_state_refresh(vd->children[i]);
        int s = vd->children[i]->state;
        if (state_missing(s)) missing++;
        else if (s == VDEV_STATE_DEGRADED) degraded++;
    }
    int st;
    switch (vd->type) {
    case VDEV_TYPE_REPLACING:
    case VDEV_TYPE_MIRROR:
        st = missing == vd->nchildren ? VDEV_STATE_FAULTED
             : (missing || degraded)  ? VDEV_STATE_DEGRADED
                                      : VDEV_STATE_ONLINE;
        break;
    case VDEV_TYPE_RAIDZ:
        st = missing > vd->nparity || vd->nchildren == 0 ? VDEV_STATE_FAULTED
             : (missing || degraded)                     ? VDEV_STATE_DEGRADED
                                                         : VDEV_STATE_ONLINE;
        break;
    default: { /* root: every normal top-level vdev holds part of the data; a log
                * vdev lost only degrades the pool (its log moves to the others) */
        uint32_t log_missing = 0;
        for (uint32_t i = 0; i < vd->nchildren; i++)
            if (vd->children[i]->alloc_class == VDEV_CLASS_LOG && state_missing(vd->children[i]->state))
                log_missing++;
        st = missing > log_missing ? VDEV_STATE_FAULTED
             : (degraded || log_missing) ? VDEV_STATE_DEGRADED
                                         : VDEV_STATE_ONLINE;
        break;
    }
    }
    vd->state = st;
}

vdev_t *vdev_top(vdev_t *vd)
{
    if (!vd || vd->type == VDEV_TYPE_ROOT) return NULL;
    while (vd->parent && vd->parent->type != VDEV_TYPE_ROOT) vd = vd->parent;
    return vd;
}

const char *vdev_state_name(vdev_state_t s)
{
    switch (s) {
    case VDEV_STATE_ONLINE: return "ONLINE";
    case VDEV_STATE_DEGRADED: return "DEGRADED";
    case VDEV_STATE_FAULTED: return "FAULTED";
    case VDEV_STATE_UNAVAIL: return "UNAVAIL";
    case VDEV_STATE_OFFLINE: return "OFFLINE";
    }
    return "UNKNOWN";
}

const char *vdev_type_name(const vdev_t *vd)
{
    switch (vd->type) {
    case VDEV_TYPE_ROOT: return "root";
    case VDEV_TYPE_MIRROR: return "mirror";
    case VDEV_TYPE_RAIDZ:
        switch (vd->nparity) {
        case 1: return "raidz1";
        case 2: return "raidz2";
        case 3: return "raidz3";
        default: return "raidz";
        }
    case VDEV_TYPE_LEAF:
        return vd->path && strncmp(vd->path, "/dev/", 5) == 0 ? "disk" : "file";
    case VDEV_TYPE_HOLE: return "hole";
    case VDEV_TYPE_REPLACING: return vd->is_spare ? "spare" : "replacing";
    }
    return "unknown";
}

void vdev_foreach_leaf(vdev_t *vd, void (*fn)(vdev_t *leaf, void *arg), void *arg)
{
    if (vd->type == VDEV_TYPE_LEAF) {
        fn(vd, arg);
        return;
    }
    for (uint32_t i = 0; i < vd->nchildren; i++) vdev_foreach_leaf(vd->children[i], fn, arg);
}

/* ---- multihost fencing ---- */

static _Atomic bool g_device_lock = true;

void vdev_set_device_lock(bool on) { atomic_store(&g_device_lock, on); }
bool vdev_device_lock(void) { return atomic_load(&g_device_lock); }

bool vdev_write_fenced(const vdev_t *leaf)
{
    const vdev_t *root = leaf;
    while (root->parent) root = root->parent;
    uint64_t fence = atomic_load(&root->write_fence_ns);
    return fence && cairn_now_ns() >= fence;
}

/* ---- parallel leaf I/O ---- */

typedef struct vdev_batch {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    unsigned pending;
} vdev_batch_t;

bool vdev_leaf_usable(const vdev_t *leaf)
{
    int s = leaf->state;
    return leaf->ops && leaf->ops->submit && !state_missing(s);
}

static int gone_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                       vdev_io_done_t done, void *arg)
{
    (void)leaf, (void)op, (void)offset, (void)buf, (void)len, (void)done, (void)arg;
    return -ENXIO;
}

const vdev_leaf_ops_t vdev_gone_ops = {.submit = gone_submit};

bool vdev_leaf_readable(const vdev_t *leaf)
{
    return vdev_leaf_usable(leaf) && !atomic_load(&leaf->stale);
}

bool vdev_child_readable(const vdev_t *c)
{
    if (c->type != VDEV_TYPE_REPLACING) return vdev_leaf_readable(c);
    for (uint32_t i = 0; i < c->nchildren; i++)
        if (vdev_leaf_readable(c->children[i])) return true;
    return false;
}

/* ---- dirty time logs ---- */

void vdev_dtl_add(vdev_t *leaf, uint64_t lo, uint64_t hi)
{
    if (lo > hi) return;
    uint32_t n = leaf->ndtl;
    uint64_t (*r)[2] = leaf->dtl;
    /* Insert in order, then merge overlapping or adjacent ranges. */
    uint32_t at = 0;
    while (at < n && r[at][0] < lo) at++;
    uint64_t tmp[VDEV_DTL_MAX + 1][2];
    memcpy(tmp, r, at * sizeof tmp[0]);
    tmp[at][0] = lo, tmp[at][1] = hi;
    memcpy(tmp + at + 1, r + at, (n - at) * sizeof tmp[0]);
    n++;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m && tmp[i][0] <= (tmp[m - 1][1] == UINT64_MAX ? UINT64_MAX : tmp[m - 1][1] + 1)) {
            if (tmp[i][1] > tmp[m - 1][1]) tmp[m - 1][1] = tmp[i][1];
            continue;
        }
        tmp[m][0] = tmp[i][0], tmp[m][1] = tmp[i][1];
        m++;
    }
    while (m > VDEV_DTL_MAX) {
        /* Too many: close the smallest gap (covers more txgs, loses none). */
        uint32_t best = 0;
        for (uint32_t i = 1; i + 1 < m; i++)
            if (tmp[i + 1][0] - tmp[i][1] < tmp[best + 1][0] - tmp[best][1]) best = i;
        tmp[best][1] = tmp[best + 1][1];
        memmove(tmp + best + 1, tmp + best + 2, (m - best - 2) * sizeof tmp[0]);
        m--;
    }
    memcpy(r, tmp, m * sizeof tmp[0]);
    leaf->ndtl = m;
}

bool vdev_dtl_contains(const vdev_t *leaf, uint64_t txg)
{
    for (uint32_t i = 0; i < leaf->ndtl; i++)
        if (txg >= leaf->dtl[i][0] && txg <= leaf->dtl[i][1]) return true;
    return false;
}

bool vdev_dtl_empty(const vdev_t *leaf) { return leaf->ndtl == 0; }

static void vdev_batch_done(void *arg, int error)
{
    vdev_batch_io_t *io = arg;
    vdev_batch_t *b = io->batch;
    io->error = error;
    /* Signal under the lock: once the waiter sees pending == 0 it frees b. */
    pthread_mutex_lock(&b->lock);
    if (--b->pending == 0) pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->lock);
}

unsigned vdev_batch_run(vdev_batch_io_t *io, unsigned n)
{
    vdev_batch_t b = {.pending = 1}; /* our own reference until all are queued */
    pthread_mutex_init(&b.lock, NULL);
    pthread_cond_init(&b.cv, NULL);
    for (unsigned i = 0; i < n; i++) {
        io[i].batch = &b;
        io[i].error = 0;
        if (!vdev_leaf_usable(io[i].leaf)) {
            io[i].error = -ENXIO;
            continue;
        }
        pthread_mutex_lock(&b.lock);
        b.pending++;
        pthread_mutex_unlock(&b.lock);
        int rc = io[i].iov ? io[i].leaf->ops->submit_writev(io[i].leaf, io[i].offset, io[i].iov,
                                                             io[i].iovcnt, vdev_batch_done, &io[i])
                           : io[i].leaf->ops->submit(io[i].leaf, io[i].op, io[i].offset, io[i].buf,
                                                     io[i].len, vdev_batch_done, &io[i]);
        if (rc) {
            /* Not queued: the completion will never run. */
            io[i].error = rc;
            pthread_mutex_lock(&b.lock);
            b.pending--;
            pthread_mutex_unlock(&b.lock);
        }
    }
    pthread_mutex_lock(&b.lock);
    b.pending--;
    while (b.pending) pthread_cond_wait(&b.cv, &b.lock);
    pthread_mutex_unlock(&b.lock);
    pthread_mutex_destroy(&b.lock);
    pthread_cond_destroy(&b.cv);
    unsigned failed = 0;
    for (unsigned i = 0; i < n; i++) failed += io[i].error != 0;
    return failed;
}

/*
 * Write aggregation. Consecutive blocks are allocated next to each other, so
 * their pieces on each leaf touch; issuing them as one write turns many small
 * device I/Os (a raidz column of a 128K block is 32K on six leaves) into a few
 * large ones. A leaf that writes from several buffers (submit_writev) gets
 * the pieces where they are; for any other the pieces are copied into one
 * bounce buffer per merged run: a memcpy costs far less than the per-I/O
 * overhead it saves, but it was still 4-5% of the CPU of 128 KiB volume
 * writes (docs/benchmarks.md, session 13).
 */
typedef struct merge_ref {
    vdev_batch_io_t *io;
} merge_ref_t;

static int merge_cmp(const void *a, const void *b)
{
    const vdev_batch_io_t *x = ((const merge_ref_t *)a)->io, *y = ((const merge_ref_t *)b)->io;
    if (x->leaf != y->leaf) return (uintptr_t)x->leaf < (uintptr_t)y->leaf ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

unsigned vdev_batch_run_merged(vdev_batch_io_t *io, unsigned n)
{
    if (n <= 1) return vdev_batch_run(io, n);
    merge_ref_t *ref = cairn_zalloc(n * sizeof *ref);
    for (unsigned i = 0; i < n; i++) ref[i].io = &io[i];
    qsort(ref, n, sizeof *ref, merge_cmp);
    /* runs[k] covers ref[start[k] .. start[k+1]) */
    unsigned *start = cairn_zalloc((n + 1) * sizeof *start);
    unsigned nruns = 0;
    for (unsigned i = 0; i < n;) {
        unsigned j = i + 1;
        uint64_t end = ref[i].io->offset + ref[i].io->len, total = ref[i].io->len;
        while (j < n && ref[i].io->op == VDEV_IO_WRITE && ref[j].io->op == VDEV_IO_WRITE &&
               ref[j].io->leaf == ref[i].io->leaf && ref[j].io->offset == end &&
               total + ref[j].io->len <= VDEV_AGGREGATE_MAX) {
            end += ref[j].io->len;
            total += ref[j].io->len;
            j++;
        }
        start[nruns++] = i;
        i = j;
    }
    start[nruns] = n;
    vdev_batch_io_t *merged = cairn_zalloc(nruns * sizeof *merged);
    void **bounce = cairn_zalloc(nruns * sizeof *bounce);
    /* The pieces of every vectored run, in ref's order: run k's are iov[start[k] ..]. */
    struct iovec *iov = cairn_zalloc(n * sizeof *iov);
    for (unsigned k = 0; k < nruns; k++) {
        vdev_batch_io_t *first = ref[start[k]].io;
        merged[k] = *first;
        unsigned pieces = start[k + 1] - start[k];
        if (pieces == 1) continue;
        size_t len = 0;
        for (unsigned i = start[k]; i < start[k + 1]; i++) len += ref[i].io->len;
        if (first->leaf->ops && first->leaf->ops->submit_writev && pieces <= IOV_MAX) {
            for (unsigned i = start[k]; i < start[k + 1]; i++)
                iov[i] = (struct iovec){ref[i].io->buf, ref[i].io->len};
            merged[k].iov = &iov[start[k]];
            merged[k].iovcnt = (int)pieces;
            merged[k].len = len;
            continue;
        }
        uint8_t *b = NULL;
        if (posix_memalign((void **)&b, CAIRN_IO_ALIGN, CAIRN_P2ROUNDUP(len, (size_t)CAIRN_IO_ALIGN)))
            abort();
        size_t pos = 0;
        for (unsigned i = start[k]; i < start[k + 1]; i++) {
            memcpy(b + pos, ref[i].io->buf, ref[i].io->len);
            pos += ref[i].io->len;
        }
        merged[k].buf = b;
        merged[k].len = len;
        bounce[k] = b;
    }
    vdev_batch_run(merged, nruns);
    unsigned failed = 0;
    for (unsigned k = 0; k < nruns; k++) {
        for (unsigned i = start[k]; i < start[k + 1]; i++) {
            ref[i].io->error = merged[k].error;
            failed += merged[k].error != 0;
        }
        free(bounce[k]);
    }
    free(bounce);
    free(iov);
    free(merged);
    free(start);
    free(ref);
    return failed;
}
