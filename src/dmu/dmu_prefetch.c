/*
 * Prefetch: sequential readers read ahead, so large reads stream.
 *
 * Every successful read of an object (dnode_read_impl) reports its range here.
 * A small direct-mapped table remembers, per (object set, object), how far
 * the stream's reads have got; a read starting there extends the stream, and
 * so does one starting up to PF_REORDER_READS of its own lengths behind or
 * ahead of it. A client keeps several READs in flight (a Linux client's
 * read-ahead does), the NFS server runs them on several threads and each
 * reports here once done, so they arrive out of turn; an exact match made
 * every swap restart the stream, its window back at the minimum. Random reads
 * stay random: a 4 KiB reader would have to land within 32 KiB of the last
 * one three times in a row. (A READ that waited for the disk while the
 * client's other READs went on can still report megabytes late and restart
 * the stream: allowing for that by the window made random reads in files of a
 * few MiB look sequential, and cold reads with four or eight 1 MiB READs in
 * flight ran no faster with it.) From the third read in a row on, the records up to a window beyond the read (at
 * least PF_MIN_RECORDS records) are read ahead on a task queue of our own
 * (PF_THREADS reads in flight), into the ARC with the object set's cache
 * policy, so the reader finds them in memory. The window is refilled only when
 * half of it has been consumed, so a stream costs a few dispatches per window,
 * not one per read. It starts at PF_WINDOW_MIN bytes and doubles with every
 * refill up to PF_WINDOW_MAX: a short run of reads reads little ahead, a long
 * stream keeps far enough ahead that a stall of the disk of a few milliseconds
 * does not reach the reader (measured: cold 1 MiB reads over NFS, 8 MiB of
 * window at 1.4-2.0 GB/s varied by pass, 32 MiB ran steadier and a sixth faster;
 * 64 MiB no better). But never beyond 1/32 of arc_max: with many streams on a
 * small ARC, what one stream reads ahead would evict what another read ahead
 * before its reader got there (the default 256 MiB keeps 8 MiB windows).
 * Each task carries up to PF_TASK_BYTES of consecutive records, which
 * spa_blocks_prefetch reads with one vectored read where they lie end to end
 * on disk, as a file written in sequence does: per 128 KiB block, a system
 * call and a sleep and wake-up of the task's thread cost about four times the
 * CPU of the transfer itself.
 *
 * A read-ahead brings the block in verified and as stored. A compressed one
 * then gets its decompressed copy from a task of its own (arc_decompress_ahead),
 * so the reader's hit lends or copies it rather than decompressing on the
 * reader's path; that copy goes at the first hit. So does a block already in
 * memory compressed without such a copy: written a moment ago, its txg synced,
 * which a file read right after its write would otherwise decompress record by
 * record on the reader's path while the other vCPU idles; or read once before,
 * whose hit now makes it hot, and the ARC keeps the copy.
 *
 * The decompressions run on threads of their own at the lowest scheduling
 * priority (nice 19). A stream's reader holds one READ in flight, ping-ponging
 * between the server's I/O thread and the client, and a decompression
 * competing as an equal for a vCPU delayed each step of it; at the lowest
 * priority they take the vCPUs' idle moments, and a reader that overtakes them
 * decompresses the block itself, as it would without them. The locks they
 * share with readers (the ARC's, this file's table, their queue's) they hold
 * for a few instructions each, never across a decompression: a reader waits
 * behind one only if it was preempted inside those. Measured with 2 GiB over
 * NFS, five alternating runs each: read right after the write, v3 2,071 ->
 * 2,238 MiB/s; cold (each block decompressed on the low-priority threads
 * instead of right after its read, on the read-ahead's thread), v3 1,956 ->
 * 2,082 and v4 1,980 -> 2,150, at the same CPU. The reads from the disks stay
 * at normal priority: there the reader waits for the disk, and delaying them
 * only made it wait longer.
 *
 * The read-ahead's thread reads itself (VDEV_READ_NOW: no hand-off to the
 * leaf's completion thread and back, which was half of a cold stream's context
 * switches), into the buffers the ARC then keeps. It skips blocks already
 * cached without counting a hit, and the ARC treats what it brings as unread,
 * so streaming a file once neither makes its blocks look hot nor keeps
 * decompressed copies of them past their first use.
 *
 * What the tasks carry is block pointers, looked up in the reader's context
 * while the object set is open (dnode_prefetch_bps), never the object set or
 * dnode, which may go while the task waits; only the pool must stay, and the
 * pool's close hook waits for the tasks in flight. A block freed while its prefetch is in
 * flight is harmless: the read either verifies (the ARC then holds a dead
 * block, which ages out; its key names no live block) or fails and is ignored.
 * Records that are dirty in memory, holes, or already in the ARC are not read
 * ahead (a cached stream would otherwise cost a task and a wakeup per record).
 *
 * Object sets with primarycache other than all are not prefetched: what would
 * be read ahead could not be kept.
 */
#include "dmu_impl.h"

#include <cairn/arc.h>
#include <cairn/taskq.h>
#include <cairn/util.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PF_SLOTS 64
#define PF_WINDOW_MIN (8 * CAIRN_MIB)
#define PF_WINDOW_MAX (32 * CAIRN_MIB)
#define PF_MIN_RECORDS 4
/* A bound on one refill's lookup, not on the window: at 256 records a volume of
 * 8 KiB records read ahead 2 MiB whatever window_bytes said, refilled half of
 * it (1 MiB) per reader's read, and a reader of 1 MiB reads then asked for
 * exactly the records the tasks were still reading: it read them itself, one
 * record per disk read (mean disk read of a sequential pass ~107 KiB; with the
 * window in bytes honoured, 288 KiB; tools/bench/frag-seqread.sh). 4096 records
 * of 8 KiB are PF_WINDOW_MAX. */
#define PF_MAX_RECORDS 4096
#define PF_TRIGGER 2 /* reads in a row before reading ahead */
#define PF_REORDER_READS 8 /* reads that may overtake each other on the way here */
/* Each task waits for its read: the threads are the read-ahead's queue depth. */
#define PF_THREADS 8
/* Decompression only computes: a thread per vCPU (0: one per online CPU). */
#define PF_DECOMPRESS_THREADS 0
#define PF_DECOMPRESS_NICE 19

typedef struct pf_stream {
    const objset_t *os;
    uint64_t obj;
    uint64_t next_off;    /* where the last read ended */
    uint64_t ahead_blk;   /* records below this were read ahead (or asked for) */
    uint64_t window_bytes; /* how far ahead of the reader; grows with each refill */
    uint32_t seq;         /* reads in a row */
} pf_stream_t;

/* Records per task: about this many bytes, read with one vectored read where
 * they lie end to end on disk (spa_blocks_prefetch, which reads at most 64
 * blocks per call). At most 16 records had capped a volume of 8 KiB records
 * at 128 KiB disk reads even where its records lay end to end (the mean disk
 * read of a sequential pass: ~70 KiB, tools/bench/frag-seqread.sh). */
#define PF_TASK_BYTES CAIRN_MIB
#define PF_TASK_MAX_RECORDS 64
_Static_assert(PF_TASK_MAX_RECORDS <= 64, "pf_task_t.hot has a bit per record");

typedef struct pf_task {
    spa_t *spa;
    uint8_t policy;
    bool decompress; /* the records are in memory, compressed: decompress them */
    uint64_t hot;    /* decompress: bit i set when record i was used before */
    size_t n;
    cairn_blkptr_t bps[PF_TASK_MAX_RECORDS];
} pf_task_t;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t idle;
    pf_stream_t slot[PF_SLOTS];
    uint64_t inflight;
    uint64_t issued;
    taskq_t *tq;  /* reads ahead from the disks */
    taskq_t *dtq; /* decompresses what is in memory compressed, at the lowest priority */
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static pthread_once_t pf_once = PTHREAD_ONCE_INIT;

/* The pool is closing: its tasks must be done before its state goes. */
static void pf_pool_close(spa_t *spa)
{
    (void)spa;
    dmu_prefetch_wait();
    pthread_mutex_lock(&P.lock);
    memset(P.slot, 0, sizeof P.slot);
    pthread_mutex_unlock(&P.lock);
}

static void pf_init(void)
{
    P.tq = taskq_create("prefetch", PF_THREADS);
    P.dtq = taskq_create_niced("decomp", PF_DECOMPRESS_THREADS, PF_DECOMPRESS_NICE);
    dmu_register_pool_close_hook(pf_pool_close);
}

static void pf_dispatch(pf_task_t *t);

/* The compressed records of a read task go to the decompression threads.
 * arc_decompress_ahead checks under the ARC's lock whether each still wants a
 * copy (still cached, none yet), so nothing is asked here: a read that
 * failed, or a reader already there, only makes that check return early. */
static void pf_decompress_after_read(const pf_task_t *t)
{
    pf_task_t *dt = NULL;
    for (size_t i = 0; i < t->n; i++) {
        if (t->bps[i].compress == CAIRN_COMPRESS_OFF) continue;
        if (!dt) {
            dt = cairn_zalloc(sizeof *dt);
            *dt = (pf_task_t){.spa = t->spa, .policy = t->policy, .decompress = true};
        }
        dt->bps[dt->n++] = t->bps[i];
    }
    if (dt) pf_dispatch(dt);
}

static void pf_run(void *arg)
{
    pf_task_t *t = arg;
    if (t->decompress) {
        uint64_t guid = spa_guid(t->spa);
        for (size_t i = 0; i < t->n; i++)
            arc_decompress_ahead(guid, &t->bps[i], (t->hot >> i) & 1);
    } else {
        spa_blocks_prefetch(t->spa, t->bps, t->n, t->policy);
        pf_decompress_after_read(t);
    }
    free(t);
    pthread_mutex_lock(&P.lock);
    if (--P.inflight == 0) pthread_cond_broadcast(&P.idle);
    pthread_mutex_unlock(&P.lock);
}

static void pf_dispatch(pf_task_t *t)
{
    pthread_mutex_lock(&P.lock);
    P.inflight++;
    if (!t->decompress) P.issued += t->n;
    pthread_mutex_unlock(&P.lock);
    taskq_dispatch(t->decompress ? P.dtq : P.tq, pf_run, t, NULL);
}

void dmu_prefetch_wait(void)
{
    pthread_mutex_lock(&P.lock);
    while (P.inflight) pthread_cond_wait(&P.idle, &P.lock);
    pthread_mutex_unlock(&P.lock);
}

uint64_t dmu_prefetch_issued(void)
{
    pthread_mutex_lock(&P.lock);
    uint64_t n = P.issued;
    pthread_mutex_unlock(&P.lock);
    return n;
}

/* How far a stream may read ahead, in bytes: PF_WINDOW_MAX, less on a small ARC,
 * and never more than an eighth of it: on a 16 MiB ARC (tools/bench/frag-seqread.sh's
 * old setting) an 8 MiB window of 8 KiB records had what was read ahead evicted
 * before the reader got there in one run of three (mean disk read 28 KiB). */
static uint64_t window_max(void)
{
    uint64_t arc = arc_get_max();
    return CAIRN_MIN(CAIRN_MIN((uint64_t)PF_WINDOW_MAX, arc / 8),
                     CAIRN_MAX((uint64_t)PF_WINDOW_MIN, arc / 32));
}

void dmu_prefetch_note(dnode_t *dn, uint64_t off, uint64_t len)
{
    objset_t *os = dn->os;
    uint8_t policy = atomic_load(&os->cache_policy);
    if (len == 0 || dn->obj == UINT64_MAX || ARC_POLICY_PRIMARY(policy) != ARC_CACHE_ALL) return;
    dn_rlock(dn);
    uint32_t rs = dn->cur.datablksz;
    dn_unlock(dn);
    if (!rs) return;
    uint64_t h = ((uintptr_t)os >> 4) * 0x9E3779B97F4A7C15ULL ^ dn->obj * 0xC2B2AE3D27D4EB4FULL;
    pthread_mutex_lock(&P.lock);
    pf_stream_t *s = &P.slot[(h >> 32) % PF_SLOTS];
    if (s->os != os || s->obj != dn->obj) {
        *s = (pf_stream_t){.os = os, .obj = dn->obj, .next_off = off + len,
                           .window_bytes = PF_WINDOW_MIN};
        pthread_mutex_unlock(&P.lock);
        return;
    }
    if (off < s->next_off && off + len == s->next_off) {
        /* The stream's last read again (a block read over and over): no step. */
        pthread_mutex_unlock(&P.lock);
        return;
    }
    uint64_t distance = off < s->next_off ? s->next_off - off : off - s->next_off;
    if (distance <= len * PF_REORDER_READS) {
        /* In the stream, if maybe out of turn: where it has got to never goes back. */
        s->seq++;
        s->next_off = CAIRN_MAX(s->next_off, off + len);
    } else {
        s->seq = 0;
        s->ahead_blk = 0;
        s->window_bytes = PF_WINDOW_MIN;
        s->next_off = off + len;
    }
    uint64_t window = CAIRN_MIN(CAIRN_MAX(CAIRN_MIN(s->window_bytes, window_max()) / rs,
                                          (uint64_t)PF_MIN_RECORDS),
                                (uint64_t)PF_MAX_RECORDS); /* in records */
    uint64_t end_blk = (s->next_off + rs - 1) / rs; /* first record past the stream's reads */
    uint64_t first = CAIRN_MAX(s->ahead_blk, end_blk), last = end_blk + window;
    if (s->seq < PF_TRIGGER || first >= last || last - first < window / 2) {
        pthread_mutex_unlock(&P.lock);
        return;
    }
    s->ahead_blk = last;
    s->window_bytes = CAIRN_MIN(s->window_bytes * 2, window_max());
    pthread_mutex_unlock(&P.lock);

    pthread_once(&pf_once, pf_init);
    size_t n = (size_t)(last - first);
    cairn_blkptr_t *bps = cairn_zalloc(n * sizeof *bps);
    /* On the NFS server's I/O thread (the SPA's memory-only mode) the lookup
     * may still read an indirect block, one per 128 MiB or so of a stream:
     * refused, the window it was for would be lost, and each of its reads
     * would go to a worker to wait for the disk (cold 1 MiB reads ran an
     * eighth slower with a third more context switches). */
    bool was_memory_only = spa_memory_only_pause();
    uint32_t found = dnode_prefetch_bps(dn, first, n, bps);
    spa_memory_only_resume(was_memory_only);
    if (found) {
        spa_t *spa = os->dp->spa;
        uint64_t guid = spa_guid(spa);
        size_t per_task = CAIRN_MIN(CAIRN_MAX((size_t)(PF_TASK_BYTES / rs), (size_t)1),
                                    (size_t)PF_TASK_MAX_RECORDS);
        pf_task_t *t = NULL, *dt = NULL;
        for (size_t i = 0; i < n; i++) {
            /* Already in memory: a task would only copy it and wake a thread,
             * unless it waits compressed for its first use (just written, say),
             * which it then gets decompressed. A gap ends a read task, whose
             * records are then consecutive. */
            arc_ahead_t st = cairn_bp_is_hole(&bps[i]) ? ARC_AHEAD_DONE
                                                       : arc_ahead_state(guid, &bps[i]);
            if (t && (st != ARC_AHEAD_READ || t->n == per_task)) {
                pf_dispatch(t);
                t = NULL;
            }
            if (st == ARC_AHEAD_DONE) continue;
            pf_task_t **tp = st == ARC_AHEAD_READ ? &t : &dt;
            if (!*tp) {
                *tp = cairn_zalloc(sizeof **tp);
                **tp = (pf_task_t){.spa = spa, .policy = policy,
                                   .decompress = st != ARC_AHEAD_READ};
            }
            if (st == ARC_AHEAD_DECOMPRESS_HOT) (*tp)->hot |= 1ull << (*tp)->n;
            (*tp)->bps[(*tp)->n++] = bps[i];
            if (dt && dt->n == per_task) {
                pf_dispatch(dt);
                dt = NULL;
            }
        }
        if (t) pf_dispatch(t);
        if (dt) pf_dispatch(dt);
    }
    free(bps);
}
