/*
 * Leaf health: counting a leaf's errors and telling the layer above.
 *
 * Every error a leaf shows - an I/O the device failed, data it returned that
 * did not verify - goes through vdev_note_error(): it counts the error in the
 * leaf's stats (what `pool status` shows) and hands it to the hooks the pool
 * installed on the tree's root, which post the event and decide whether the
 * disk is failing. The vdev layer itself never changes a leaf's state on an
 * error: whether a mirror can do without a side is the pool's judgement.
 *
 * The error window is that judgement's arithmetic, kept here (and unit-tested
 * alone) because it is pure: "more than N errors within T" holds exactly when
 * the error N before the newest one is at most T old, so a ring of the last
 * N + 1 times answers it whatever the rate of errors, in constant space.
 */
#include <cairn/analytics.h>
#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>

#include <stdatomic.h>
#include <string.h>

void vdev_errwin_reset(vdev_errwin_t *w) { memset(w, 0, sizeof *w); }

bool vdev_errwin_note(vdev_errwin_t *w, uint64_t now_ms, uint32_t threshold, uint64_t window_ms)
{
    if (threshold > VDEV_ERRWIN_MAX - 1) threshold = VDEV_ERRWIN_MAX - 1;
    w->t_ms[w->next] = now_ms;
    w->next = (w->next + 1) % VDEV_ERRWIN_MAX;
    if (w->count < VDEV_ERRWIN_MAX) w->count++;
    if (w->count <= threshold) return false;
    /* The (threshold + 1)-th newest error: the oldest of the ones that must fit. */
    uint32_t back = (w->next + VDEV_ERRWIN_MAX - 1 - threshold) % VDEV_ERRWIN_MAX;
    uint64_t oldest = w->t_ms[back];
    return now_ms >= oldest && now_ms - oldest <= window_ms;
}

void vdev_set_hooks(vdev_t *root, const vdev_hooks_t *hooks) { atomic_store(&root->hooks, hooks); }

void vdev_note_error(vdev_t *leaf, vdev_error_kind_t kind, uint64_t offset, uint64_t size, int error)
{
    switch (kind) {
    case VDEV_ERR_READ: leaf->stats.read_errors++; break;
    case VDEV_ERR_WRITE:
    case VDEV_ERR_FLUSH: leaf->stats.write_errors++; break;
    case VDEV_ERR_CHECKSUM: leaf->stats.checksum_errors++; break;
    }
    vdev_t *root = leaf;
    while (root->parent) root = root->parent;
    const vdev_hooks_t *h = atomic_load(&root->hooks);
    if (h && h->leaf_error) h->leaf_error(h->arg, leaf, kind, offset, size, error);
}

/* Analytics (include/cairn/analytics.h): disk.ops by disk, read/write, latency
 * and size; disk.usecs, the latencies summed by disk and read/write (each disk's
 * mean latency is its disk.usecs over its disk.ops); disk.busy: the time the leaf had I/O in flight, as the union of
 * the I/Os' [start, completion] intervals taken in completion order (exact
 * when I/Os complete in the order they started, as a device queue does). */
static void name_io_op(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    an_name_string(key == VDEV_IO_READ ? "read" : "write", key, buf, len);
}

static void record_analytics(vdev_t *leaf, vdev_io_op_t op, size_t len, uint64_t start_ns)
{
    uint64_t now = cairn_now_ns();
    if (an_stat_enabled(AN_DISK_IO)) {
        an_add_total(AN_DISK_IO, 1);
        an_add(AN_DISK_IO, AN_BY_DISK, leaf->guid, 1, an_name_string, leaf->path);
        an_add(AN_DISK_IO, AN_BY_OP, op, 1, name_io_op, NULL);
        an_add_latency(AN_DISK_IO, now - start_ns, 1);
        an_add_size(AN_DISK_IO, len, 1);
    }
    if (an_stat_enabled(AN_DISK_USECS)) {
        uint64_t us = (now - start_ns) / 1000;
        an_add_total(AN_DISK_USECS, us);
        an_add(AN_DISK_USECS, AN_BY_DISK, leaf->guid, us, an_name_string, leaf->path);
        an_add(AN_DISK_USECS, AN_BY_OP, op, us, name_io_op, NULL);
    }
    if (an_stat_enabled(AN_DISK_BUSY)) {
        uint64_t prev = atomic_exchange_explicit(&leaf->an_last_done_ns, now, memory_order_relaxed);
        uint64_t from = start_ns > prev ? start_ns : prev;
        if (now > from) {
            uint64_t us = (now - from) / 1000;
            an_add_total(AN_DISK_BUSY, us);
            an_add(AN_DISK_BUSY, AN_BY_DISK, leaf->guid, us, an_name_string, leaf->path);
        }
    }
}

void vdev_leaf_account(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, size_t len, int error,
                       uint64_t start_ns)
{
    if (error) {
        vdev_note_error(leaf, op == VDEV_IO_READ    ? VDEV_ERR_READ
                              : op == VDEV_IO_WRITE ? VDEV_ERR_WRITE
                                                    : VDEV_ERR_FLUSH,
                        offset, len, error);
        return;
    }
    switch (op) {
    case VDEV_IO_READ:
        leaf->stats.reads++;
        leaf->stats.read_bytes += len;
        break;
    case VDEV_IO_WRITE:
        leaf->stats.writes++;
        leaf->stats.write_bytes += len;
        break;
    case VDEV_IO_FLUSH: return;
    }
    record_analytics(leaf, op, len, start_ns);
}
