/*
 * Multihost protection (MMP): one pool on disks that several hosts can reach,
 * imported by at most one of them, as OpenZFS's multihost property does it.
 *
 * Each daemon has a host id (cairnd.conf hostid, else a random one kept in its
 * state directory). Importing a pool records the host's id and name in the
 * label config (spa_host_phys_t); exporting clears them. An import of a pool
 * left active by another host is refused without -f (spa.c).
 *
 * -f is no protection against a host that is alive, so a pool with
 * multihost=on also carries heartbeats: the host that has it imported writes a
 * record (spa_mmp_phys_t: host id, a sequence number, the time) every
 * mmp_interval to the next (leaf, label) in turn, into a 4 KiB area of the
 * label's reserved front (SPA_LABEL_MMP_OFFSET): the uberblock ring is not
 * touched, and the records say nothing about the pool's contents.
 *
 * An import of such a pool, forced or not, first runs the activity check: it
 * reads every label's record, waits (fail_intervals + 1) intervals - the
 * longer of its own and the ones the records carry - and reads again. Any
 * change means a live host: refused. Then it claims the pool: a CLAIM record
 * into every label, a wait of two intervals, and a last read; a slot that no
 * longer holds its claim means another host wrote meanwhile (its heartbeat, or
 * its own claim of a racing import): refused. Of two racing imports at most
 * one can see only its own claims at its last read, and the winner's first
 * heartbeat follows its claim within an interval, well inside the loser's
 * claim wait. Heartbeats start as soon as the claim wins, before the pool's
 * long reads, so a slow import looks alive too.
 *
 * The other half is the importing host giving way. A host whose heartbeats
 * stall (its I/O hangs, the process is stopped) may not write once another host
 * could have concluded it is dead. The tree's write fence (vdev_write_fenced)
 * stands at the time the last heartbeat that completed was issued plus
 * fail_intervals intervals; leaves check it at the last moment before a write
 * reaches the device, so nothing queued behind a stall lands later. An
 * importer's check lasts longer than that, so once it sees no change the
 * fence has passed. The heartbeat thread, when it runs again, suspends the pool
 * (the fence stays shut, the txg engine stops: as a pool whose devices all
 * failed). A heartbeat that finds another host's HEARTBEAT in a slot it wrote
 * before - someone imported the pool since - suspends at once (one in a slot
 * it never wrote may be a leftover and is overwritten); another host's CLAIM
 * is overwritten, which is what makes that claim lose.
 */
#include "spa_impl.h"

#include <cairn/assert.h>
#include <cairn/raidz.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------- this host and the policy ---------------- */

static _Atomic uint32_t g_hostid;
static char g_hostname[SPA_HOSTNAME_MAX];
static _Atomic uint32_t g_interval_ms = SPA_MMP_INTERVAL_MS_DEFAULT;
static _Atomic uint32_t g_fail_intervals = SPA_MMP_FAIL_INTERVALS_DEFAULT;

void spa_set_host(uint32_t hostid, const char *hostname)
{
    cairn_strlcpy(g_hostname, hostname ? hostname : "", sizeof g_hostname);
    atomic_store(&g_hostid, hostid);
}

uint32_t spa_hostid(void) { return atomic_load(&g_hostid); }

void spa_mmp_set_policy(uint32_t interval_ms, uint32_t fail_intervals)
{
    if (interval_ms) atomic_store(&g_interval_ms, interval_ms);
    if (fail_intervals) atomic_store(&g_fail_intervals, fail_intervals);
}

void spa_host_record(spa_host_phys_t *out)
{
    memset(out, 0, sizeof *out);
    out->hostid = atomic_load(&g_hostid);
    if (out->hostid) cairn_strlcpy(out->hostname, g_hostname, sizeof out->hostname);
}

/* ---------------- records ---------------- */

void spa_mmp_encode(const spa_mmp_phys_t *rec, void *slot)
{
    memset(slot, 0, SPA_LABEL_MMP_SIZE);
    spa_mmp_phys_t *r = slot;
    *r = *rec;
    r->magic = SPA_MMP_MAGIC;
    r->version = SPA_VERSION;
    r->hostname[SPA_HOSTNAME_MAX - 1] = '\0';
    cairn_checksum(CAIRN_CHECKSUM_SHA256, r, offsetof(spa_mmp_phys_t, cksum), r->cksum);
}

bool spa_mmp_decode(const void *slot, uint64_t pool_guid, spa_mmp_phys_t *out)
{
    const spa_mmp_phys_t *r = slot;
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    memset(out, 0, sizeof *out);
    if (r->magic != SPA_MMP_MAGIC || r->version != SPA_VERSION || r->pool_guid != pool_guid)
        return false;
    cairn_checksum(CAIRN_CHECKSUM_SHA256, r, offsetof(spa_mmp_phys_t, cksum), ck);
    if (memcmp(ck, r->cksum, sizeof ck) || !memchr(r->hostname, 0, sizeof r->hostname)) return false;
    *out = *r;
    return true;
}

static bool record_valid(const spa_mmp_phys_t *r) { return r->magic == SPA_MMP_MAGIC; }

/* ---------------- the decisions (pure: unit-tested) ---------------- */

const spa_mmp_phys_t *spa_mmp_changed(const spa_mmp_phys_t *before, const spa_mmp_phys_t *after,
                                      size_t n)
{
    const spa_mmp_phys_t *newest = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!record_valid(&after[i]) || !memcmp(&before[i], &after[i], sizeof after[i])) continue;
        if (!newest || after[i].timestamp > newest->timestamp) newest = &after[i];
    }
    return newest;
}

const spa_mmp_phys_t *spa_mmp_claim_overwritten(const spa_mmp_phys_t *mine, const bool *written,
                                                const spa_mmp_phys_t *after, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (written[i] && record_valid(&after[i]) && memcmp(&after[i], mine, sizeof *mine))
            return &after[i];
    return NULL;
}

/* The longest interval and fail count among ours and the records'. */
static void slowest_writer(const spa_mmp_phys_t *slots, size_t n, uint32_t *interval_ms,
                           uint32_t *fail_intervals)
{
    for (size_t i = 0; i < n; i++) {
        if (!record_valid(&slots[i])) continue;
        /* Bounded as cairnd.conf bounds them: a record cannot stall an import for hours. */
        uint32_t iv = CAIRN_MIN(slots[i].interval_ms, (uint32_t)SPA_MMP_INTERVAL_MS_MAX);
        uint32_t fi = CAIRN_MIN(slots[i].fail_intervals, (uint32_t)SPA_MMP_FAIL_INTERVALS_MAX);
        *interval_ms = CAIRN_MAX(*interval_ms, iv);
        *fail_intervals = CAIRN_MAX(*fail_intervals, fi);
    }
}

uint64_t spa_mmp_import_wait_ms(const spa_mmp_phys_t *slots, size_t n, uint32_t interval_ms,
                                uint32_t fail_intervals)
{
    slowest_writer(slots, n, &interval_ms, &fail_intervals);
    return (uint64_t)interval_ms * (fail_intervals + 1);
}

uint64_t spa_mmp_claim_wait_ms(const spa_mmp_phys_t *slots, size_t n, uint32_t interval_ms)
{
    uint32_t fail = 0;
    slowest_writer(slots, n, &interval_ms, &fail);
    return 2ULL * interval_ms;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* ---------------- slot I/O ---------------- */

static uint64_t slot_offset(const vdev_t *leaf, int label)
{
    return vdev_label_offset(leaf->psize, label) + SPA_LABEL_MMP_OFFSET;
}

static bool slot_read(vdev_t *leaf, int label, void *buf, uint64_t pool_guid, spa_mmp_phys_t *out)
{
    memset(out, 0, sizeof *out);
    if (!leaf->psize || !vdev_leaf_usable(leaf)) return false;
    if (vdev_leaf_io_sync(leaf, VDEV_IO_READ, slot_offset(leaf, label), buf, SPA_LABEL_MMP_SIZE))
        return false;
    return spa_mmp_decode(buf, pool_guid, out);
}

static int slot_write(vdev_t *leaf, int label, void *buf, const spa_mmp_phys_t *rec)
{
    if (!leaf->psize || !vdev_leaf_usable(leaf)) return -ENXIO;
    spa_mmp_encode(rec, buf);
    return vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, slot_offset(leaf, label), buf, SPA_LABEL_MMP_SIZE);
}

void spa_mmp_read_slots(vdev_t *const *leaves, size_t nleaves, uint64_t pool_guid,
                        spa_mmp_phys_t *out)
{
    void *buf = cairn_alloc_aligned(SPA_LABEL_MMP_SIZE);
    for (size_t i = 0; i < nleaves; i++)
        for (int l = 0; l < VDEV_LABELS; l++)
            slot_read(leaves[i], l, buf, pool_guid, &out[i * VDEV_LABELS + (size_t)l]);
    free(buf);
}

static void record_fill(spa_mmp_phys_t *r, uint64_t pool_guid, uint64_t seq, uint64_t config_txg,
                        uint32_t kind)
{
    memset(r, 0, sizeof *r);
    spa_host_phys_t me;
    spa_host_record(&me);
    r->pool_guid = pool_guid;
    r->hostid = me.hostid;
    cairn_strlcpy(r->hostname, me.hostname, sizeof r->hostname);
    r->seq = seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->timestamp = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    r->config_txg = config_txg;
    r->interval_ms = atomic_load(&g_interval_ms);
    r->fail_intervals = atomic_load(&g_fail_intervals);
    r->kind = kind;
}

static void refuse_active(const char *name, const spa_mmp_phys_t *who, uint64_t waited_ms,
                          char *err, size_t errlen)
{
    cairn_seterr(err, errlen, "pool '%s' is imported on host %s (hostid %08llx) and active "
                 "(its heartbeats changed within %llu ms); cannot import", name,
                 who->hostname[0] ? who->hostname : "?", (unsigned long long)who->hostid,
                 (unsigned long long)waited_ms);
}

/* ---------------- import: activity check and claim ---------------- */

int spa_mmp_import_check(const char *name, uint64_t pool_guid, vdev_t *const *leaves,
                         size_t nleaves, uint64_t *claim_ns, char *err, size_t errlen)
{
    size_t n = nleaves * VDEV_LABELS;
    spa_mmp_phys_t *before = cairn_zalloc(n * sizeof *before);
    spa_mmp_phys_t *after = cairn_zalloc(n * sizeof *after);
    bool *written = cairn_zalloc(n * sizeof *written);
    void *buf = cairn_alloc_aligned(SPA_LABEL_MMP_SIZE);
    int rc = 0;

    spa_mmp_read_slots(leaves, nleaves, pool_guid, before);
    uint64_t wait_ms = spa_mmp_import_wait_ms(before, n, atomic_load(&g_interval_ms),
                                              atomic_load(&g_fail_intervals));
    log_info("spa", "pool %s: multihost activity check, watching its heartbeats for %llu ms",
             name, (unsigned long long)wait_ms);
    sleep_ms(wait_ms);
    spa_mmp_read_slots(leaves, nleaves, pool_guid, after);
    const spa_mmp_phys_t *who = spa_mmp_changed(before, after, n);
    if (who) {
        refuse_active(name, who, wait_ms, err, errlen);
        rc = -EBUSY;
        goto out;
    }

    /* Quiet: claim it, and see that nobody else wrote meanwhile. */
    spa_mmp_phys_t mine;
    record_fill(&mine, pool_guid, cairn_random_guid() >> 1, 0, SPA_MMP_KIND_CLAIM);
    *claim_ns = cairn_now_ns();
    size_t nwritten = 0;
    for (size_t i = 0; i < nleaves; i++) {
        for (int l = 0; l < VDEV_LABELS; l++)
            if (slot_write(leaves[i], l, buf, &mine) == 0) written[i * VDEV_LABELS + (size_t)l] = true;
        if (vdev_leaf_io_sync(leaves[i], VDEV_IO_FLUSH, 0, NULL, 0) == 0)
            for (int l = 0; l < VDEV_LABELS; l++) nwritten += written[i * VDEV_LABELS + (size_t)l];
        else
            for (int l = 0; l < VDEV_LABELS; l++) written[i * VDEV_LABELS + (size_t)l] = false;
    }
    if (!nwritten) {
        cairn_seterr(err, errlen, "pool '%s': cannot write its multihost claim to any device", name);
        rc = -EIO;
        goto out;
    }
    /* What decode gives back for our own claim, to compare slot by slot. */
    spa_mmp_encode(&mine, buf);
    spa_mmp_decode(buf, pool_guid, &mine);
    uint64_t claim_ms = spa_mmp_claim_wait_ms(before, n, atomic_load(&g_interval_ms));
    sleep_ms(claim_ms);
    spa_mmp_read_slots(leaves, nleaves, pool_guid, after);
    who = spa_mmp_claim_overwritten(&mine, written, after, n);
    if (who) {
        if (who->kind == SPA_MMP_KIND_CLAIM)
            cairn_seterr(err, errlen, "pool '%s' is being imported by host %s (hostid %08llx) at "
                         "the same time; cannot import", name,
                         who->hostname[0] ? who->hostname : "?", (unsigned long long)who->hostid);
        else
            refuse_active(name, who, wait_ms + claim_ms, err, errlen);
        rc = -EBUSY;
        goto out;
    }
    log_info("spa", "pool %s: no other host active; claimed after %llu ms", name,
             (unsigned long long)(wait_ms + claim_ms));
out:
    free(buf);
    free(written);
    free(after);
    free(before);
    return rc;
}

/* ---------------- the heartbeat thread ---------------- */

typedef struct spa_mmp {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool stop;
    uint64_t seq;
    uint64_t next;          /* the (leaf, label) turn */
    bool warned;            /* a failed heartbeat was logged */
    /* The slots this host has written a heartbeat to (leaf guid, a bit per
     * label): another host's heartbeat found in one of them was written after
     * ours, by a host that imported the pool. One found in a slot never written
     * (a leaf the import did not claim) may be a leftover of an earlier owner. */
    struct written_slots {
        uint64_t guid;
        uint8_t labels;
    } *written;
    size_t nwritten;
} spa_mmp_t;

static struct written_slots *written_find(spa_mmp_t *m, uint64_t guid, bool add)
{
    for (size_t i = 0; i < m->nwritten; i++)
        if (m->written[i].guid == guid) return &m->written[i];
    if (!add) return NULL;
    m->written = cairn_realloc(m->written, (m->nwritten + 1) * sizeof *m->written);
    m->written[m->nwritten] = (struct written_slots){.guid = guid};
    return &m->written[m->nwritten++];
}

static bool slot_was_ours(spa_mmp_t *m, const vdev_t *leaf, int label)
{
    const struct written_slots *w = written_find(m, leaf->guid, false);
    return w && (w->labels & (1u << label));
}

typedef struct leaf_list {
    vdev_t **v;
    size_t n;
} leaf_list_t;

static void collect_leaf(vdev_t *leaf, void *arg)
{
    leaf_list_t *l = arg;
    if (!leaf->psize || !vdev_leaf_usable(leaf)) return;
    l->v = cairn_realloc(l->v, (l->n + 1) * sizeof *l->v);
    l->v[l->n++] = leaf;
}

static uint64_t fail_window_ns(void)
{
    return (uint64_t)atomic_load(&g_interval_ms) * atomic_load(&g_fail_intervals) * 1000000ULL;
}

/* Moves the fence to the issue time of a heartbeat that completed, plus the
 * fail window; it never moves back. */
static void fence_extend(spa_t *spa, uint64_t issued_ns)
{
    uint64_t want = issued_ns + fail_window_ns();
    uint64_t cur = atomic_load(&spa->root->write_fence_ns);
    while (cur != 1 && cur < want && !atomic_compare_exchange_weak(&spa->root->write_fence_ns, &cur, want)) {
    }
}

/* One heartbeat; false when the pool was suspended. Config lock held (the tree). */
static bool heartbeat_locked(spa_t *spa, spa_mmp_t *m, void *buf)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    if (vdev_write_fenced(spa->root)) {
        spa_suspend(spa, "multihost heartbeats could not be written for mmp_fail_intervals "
                         "intervals (I/O stalled?): another host may import it");
        return false;
    }
    leaf_list_t l = {0};
    vdev_foreach_leaf(spa->root, collect_leaf, &l);
    if (!l.n) return true; /* nothing to write to: the fence runs out */
    vdev_t *leaf = l.v[m->next % l.n];
    int label = (int)((m->next / l.n) % VDEV_LABELS);
    m->next++;
    free(l.v);

    spa_mmp_phys_t seen;
    if (slot_read(leaf, label, buf, spa->guid, &seen) && seen.hostid != spa_hostid() &&
        seen.kind == SPA_MMP_KIND_HEARTBEAT && slot_was_ours(m, leaf, label)) {
        char why[160];
        snprintf(why, sizeof why, "host %s (hostid %08llx) is writing its heartbeats: it imported "
                 "the pool", seen.hostname[0] ? seen.hostname : "?", (unsigned long long)seen.hostid);
        spa_suspend(spa, why);
        return false;
    }
    spa_mmp_phys_t rec;
    record_fill(&rec, spa->guid, ++m->seq, spa->config_txg, SPA_MMP_KIND_HEARTBEAT);
    uint64_t issued = cairn_now_ns();
    int e = slot_write(leaf, label, buf, &rec);
    if (!e) e = vdev_leaf_io_sync(leaf, VDEV_IO_FLUSH, 0, NULL, 0);
    if (!e) {
        fence_extend(spa, issued);
        written_find(m, leaf->guid, true)->labels |= (uint8_t)(1u << label);
        m->warned = false;
    } else if (!m->warned) {
        m->warned = true;
        log_warn("spa", "pool %s: multihost heartbeat to %s failed: %s", spa->name,
                 leaf->path ? leaf->path : "?", strerror(-e));
    }
    return true;
}

static void *mmp_thread(void *arg)
{
    spa_t *spa = arg;
    spa_mmp_t *m = spa->mmp;
    void *buf = cairn_alloc_aligned(SPA_LABEL_MMP_SIZE);
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        pthread_mutex_unlock(&m->lock);
        pthread_mutex_lock(&spa->config_lock);
        bool go_on = heartbeat_locked(spa, m, buf);
        pthread_mutex_unlock(&spa->config_lock);
        pthread_mutex_lock(&m->lock);
        if (!go_on) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)atomic_load(&g_interval_ms) * 1000000ULL;
        ts.tv_sec += (time_t)(ns / 1000000000ULL);
        ts.tv_nsec = (long)(ns % 1000000000ULL);
        if (!m->stop) pthread_cond_timedwait(&m->cv, &m->lock, &ts);
    }
    pthread_mutex_unlock(&m->lock);
    free(buf);
    return NULL;
}

void spa_mmp_start(spa_t *spa, uint64_t claim_ns)
{
    if (spa->mmp || spa->readonly) return;
    atomic_store(&spa->root->write_fence_ns, claim_ns + fail_window_ns());
    spa_mmp_t *m = cairn_zalloc(sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    m->seq = cairn_random_guid() >> 1;
    spa->mmp = m;
    pthread_create(&m->thread, NULL, mmp_thread, spa);
    pthread_setname_np(m->thread, "spa_mmp");
}

void spa_mmp_stop(spa_t *spa)
{
    spa_mmp_t *m = spa->mmp;
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cv);
    free(m->written);
    free(m);
    spa->mmp = NULL;
    /* A suspended pool's fence stays shut; a live one's is lifted (multihost=off). */
    if (!atomic_load(&spa->mmp_suspended)) atomic_store(&spa->root->write_fence_ns, 0);
}

/* ---------------- suspension ---------------- */

void spa_suspend(spa_t *spa, const char *why)
{
    /* The fence first and for good (1 ns after boot has passed): not one more
     * write reaches a device. The txg engine learns it from its next write (a
     * failed sync), and is told here when it runs already. */
    atomic_store(&spa->root->write_fence_ns, 1);
    if (atomic_exchange(&spa->mmp_suspended, true)) return;
    log_error("spa", "pool %s is suspended: %s", spa->name, why);
    spa_event_post(spa->name, "resource.fs.cairn.suspended", "reason=multihost");
    if (!atomic_load(&spa->tx_ready)) return;
    pthread_mutex_lock(&spa->tx.lock);
    spa->tx.failed = true;
    pthread_cond_broadcast(&spa->tx.done_cv);
    pthread_cond_broadcast(&spa->tx.sync_cv);
    pthread_mutex_unlock(&spa->tx.lock);
}

bool spa_suspended(spa_t *spa)
{
    if (atomic_load(&spa->mmp_suspended)) return true;
    if (!atomic_load(&spa->tx_ready)) return false;
    pthread_mutex_lock(&spa->tx.lock);
    bool f = spa->tx.failed;
    pthread_mutex_unlock(&spa->tx.lock);
    return f;
}
