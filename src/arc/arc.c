/*
 * The ARC: an adaptive replacement cache of blocks, in memory.
 *
 * Four lists. A block read once lives on the recency list (MRU); read again
 * while cached it moves to the frequency list (MFU). What either list evicts
 * leaves a ghost behind: a header with the block's identity and size but no
 * data, on the MRU-ghost or MFU-ghost list. The cache holds at most c bytes
 * of data (arc_max, or less while memory is short: arc_set_target, driven by
 * cairnd's watch of the machine's memory); p is the target share of the MRU. Ghosts steer p: a miss
 * that finds its block on the MRU ghost list means the MRU was evicted too
 * early, so p grows (by the block's size, more when the other ghost list is the
 * bigger one); a hit on the MFU ghost list shrinks p the same way. Eviction
 * takes the MRU's tail while the MRU is over p, otherwise the MFU's tail. The
 * ghost lists are trimmed so MRU + MRU-ghost <= c and everything <= 2c.
 *
 * A block that arrives unasked - read ahead, or just written - is "unread":
 * it goes on the MRU and its first hit leaves it there (that hit is its first
 * use, not its second), so streaming a file once keeps it on the MRU. A
 * compressed block a reader is about to reach gets a decompressed copy ahead
 * of it (arc_decompress_ahead, called by the read-ahead on threads of its
 * own): a streaming reader waits for each reply, so decompressing on its path
 * cost it throughput. An unread block's first hit takes that copy and the
 * entry drops it (keeping it would double the memory of a scan); a block used
 * before keeps it, as its hit makes it hot (the MFU copy below, made before
 * the reader gets there: a file read a second time, decompressing on the
 * reader's path, streamed at a fifth of the first read's rate).
 *
 * Written copies. A compressed block just written arrives with the writer's
 * record buffer (its logical bytes, never written again), which the entry
 * keeps as its decompressed copy instead of letting it go: a read right after
 * the write is lent those bytes with nothing decompressed, and the buffers it
 * then drops are memory already touched for the next copies (where this
 * guest's page clearing was most of a second read's CPU). Such a copy is the
 * cheapest thing the ARC holds, the stored bytes make it again, so written
 * copies are the first to go when room is needed, oldest first, before any
 * entry is evicted: they only use room nothing else wants.
 *
 * Scan resistance falls out of that: a one-pass scan touches each block once,
 * so it only ever fills (and evicts from) the MRU, and produces no ghost hits
 * that could grow p; the hot set, read at least twice, sits on the MFU and the
 * scan never reaches it.
 *
 * What is held. Each entry keeps the block as stored (compressed, exactly the
 * bytes whose checksum the block pointer carries, verified when read) - that
 * is what the cache devices are fed from, and it makes the ARC hold more
 * blocks in the same memory. An entry on the MFU also gets a decompressed
 * copy the first time it is read from there, so hot data costs a memcpy per
 * read rather than a decompression; both count against arc_max. Uncompressed
 * blocks have one buffer serving as both.
 *
 * Why this replaced the DMU's record cache (src/dmu/dmu_cache.c is now a thin
 * shim over this file): the record cache was a second LRU of decompressed
 * records keyed the same way (DVA + birth). Keeping both would store hot
 * records twice and let two independent bounds and two replacement policies
 * fight over memory; the ARC's decompressed copies are that tier, under one
 * bound and one policy, and the ARC also caches metadata (indirect blocks,
 * dnode blocks, the MOS) that the record cache never saw.
 *
 * Staleness. A copy-on-write block never changes, so (pool guid, first DVA,
 * birth txg) names one content for as long as the block is allocated. Frees
 * drop the entry (and its cache-device index entry) at once, which bounds the
 * memory of dead blocks. After a crash a txg that never committed can be
 * written again with the same DVAs and birth but other bytes; every entry
 * also keeps the 32-byte checksum, and a hit requires it to equal the asking
 * pointer's, so such a block can never be served from the cache.
 *
 * Locking: one mutex guards the table and the lists; data buffers are
 * refcounted so the memcpy or decompression of a hit runs outside it.
 *
 * Lending (arc_lookup_memory_ref): a reader that can send from several
 * buffers at once (the NFS server's READ reply) takes a reference on the
 * buffer holding the block's logical bytes - the stored buffer of an
 * uncompressed block, the decompressed copy of a hot one - instead of copying
 * it, and drops it when its send is done. That is safe because a buffer is
 * written only before an entry holds it: a rewritten block is a new entry
 * (new birth) with new buffers, a freed or evicted entry drops its reference
 * and leaves the bytes to whoever still holds them. Lent buffers that the ARC
 * has dropped are not counted in arc_max; they live as long as a send.
 */
#include "arc_impl.h"

#include <cairn/analytics.h>
#include <cairn/assert.h>
#include <cairn/bufpool.h>
#include <cairn/codec.h>
#include <cairn/util.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ARC_GHOST_BYTES 4096

enum { ST_NONE = 0, ST_MRU, ST_MFU, ST_MRU_GHOST, ST_MFU_GHOST, ST_COUNT };

typedef struct arc_hdr {
    arc_key_t key;
    uint32_t lsize, psize;
    uint8_t compress, checksum, type, state;
    uint8_t l2_policy;      /* secondarycache of the read that brought it in */
    bool l2_done;           /* offered to a cache device already */
    bool unread;            /* read ahead, not yet asked for: its first hit is its first use */
    uint8_t cksum[CAIRN_CHECKSUM_LEN];
    arc_buf_t *stored;      /* psize bytes as stored; NULL on ghosts */
    arc_buf_t *decomp;      /* lsize bytes, only for compressed MFU blocks */
    bool written_copy;      /* decomp is the writer's logical bytes, on the written list */
    struct arc_hdr *wprev, *wnext; /* the written list: head = newest */
    struct arc_hdr *hnext;
    struct arc_hdr *prev, *next; /* list: head = most recent */
} arc_hdr_t;

typedef struct arc_list {
    arc_hdr_t *head, *tail;
    uint64_t size, count;
} arc_list_t;

static struct {
    pthread_mutex_t lock;
    arc_hdr_t **buckets;
    size_t nbuckets, count;
    arc_list_t list[ST_COUNT];
    uint64_t c, c_max, p, decomp_size; /* c: the target, c_max (arc_max) or less under pressure */
    arc_hdr_t *written_head, *written_tail; /* entries holding a written copy */
    uint64_t written_size;
    arc_stats_t st; /* counters only; sizes are filled from the lists */
} A = {.lock = PTHREAD_MUTEX_INITIALIZER, .c = ARC_DEFAULT_MAX, .c_max = ARC_DEFAULT_MAX, .p = 0};

/* ---------------- buffers ---------------- */

static arc_buf_t *buf_hold(arc_buf_t *b) { return cairn_rbuf_hold(b); }

bool arc_policy_allows(arc_cache_policy_t pol, uint8_t type)
{
    if (pol == ARC_CACHE_ALL) return true;
    if (pol == ARC_CACHE_METADATA) return type != CAIRN_BT_DATA;
    return false;
}

/* ---------------- table and lists ---------------- */

static uint64_t hdr_bytes(const arc_hdr_t *h)
{
    if (h->state == ST_MRU_GHOST || h->state == ST_MFU_GHOST) return h->psize;
    return (h->stored ? h->stored->size : 0) + (h->decomp ? h->decomp->size : 0);
}

/* The head of k's chain; A.nbuckets > 0. */
static arc_hdr_t **bucket_of(const arc_key_t *k)
{
    return &A.buckets[arc_key_hash(k) & (A.nbuckets - 1)];
}

static arc_hdr_t **slot_of(const arc_key_t *k)
{
    if (!A.nbuckets) return NULL;
    arc_hdr_t **pp = bucket_of(k);
    while (*pp && !arc_key_eq(&(*pp)->key, k)) pp = &(*pp)->hnext;
    return pp;
}

static void table_grow(void)
{
    size_t nb = A.nbuckets ? A.nbuckets * 2 : 4096;
    arc_hdr_t **nbk = cairn_zalloc(nb * sizeof(*nbk));
    for (size_t b = 0; b < A.nbuckets; b++) {
        arc_hdr_t *h = A.buckets[b];
        while (h) {
            arc_hdr_t *n = h->hnext;
            size_t i = arc_key_hash(&h->key) & (nb - 1);
            h->hnext = nbk[i];
            nbk[i] = h;
            h = n;
        }
    }
    free(A.buckets);
    A.buckets = nbk;
    A.nbuckets = nb;
}

static void list_unlink(arc_hdr_t *h)
{
    arc_list_t *l = &A.list[h->state];
    if (h->prev) h->prev->next = h->next;
    else l->head = h->next;
    if (h->next) h->next->prev = h->prev;
    else l->tail = h->prev;
    h->prev = h->next = NULL;
    l->size -= hdr_bytes(h);
    l->count--;
}

static void list_push(arc_hdr_t *h, int state)
{
    h->state = (uint8_t)state;
    arc_list_t *l = &A.list[state];
    h->next = l->head;
    h->prev = NULL;
    if (l->head) l->head->prev = h;
    l->head = h;
    if (!l->tail) l->tail = h;
    l->size += hdr_bytes(h);
    l->count++;
}

/* The written list. A compressed block just written can keep the logical bytes
 * the writer handed over (its record buffer, no copy) as its decompressed
 * copy, so a read right after the write neither decompresses nor takes fresh
 * memory for the copy. Such a copy is the cheapest thing the ARC holds (the
 * stored bytes make it again), so it is the first to go when room is needed,
 * oldest first, before any entry is evicted: written copies only ever use
 * room the cache is not using for anything else. */
static void written_link(arc_hdr_t *h)
{
    h->written_copy = true;
    h->wprev = NULL;
    h->wnext = A.written_head;
    if (A.written_head) A.written_head->wprev = h;
    A.written_head = h;
    if (!A.written_tail) A.written_tail = h;
    A.written_size += h->decomp->size;
}

static void written_unlink(arc_hdr_t *h)
{
    if (!h->written_copy) return;
    if (h->wprev) h->wprev->wnext = h->wnext;
    else A.written_head = h->wnext;
    if (h->wnext) h->wnext->wprev = h->wprev;
    else A.written_tail = h->wprev;
    h->wprev = h->wnext = NULL;
    h->written_copy = false;
    A.written_size -= h->decomp->size;
}

/* Drops h's decompressed copy; the caller keeps its list's size right (h
 * unlinked from it, or the size adjusted in place). */
static void decomp_drop(arc_hdr_t *h)
{
    if (!h->decomp) return;
    written_unlink(h);
    A.decomp_size -= h->decomp->size;
    arc_buf_rele(h->decomp);
    h->decomp = NULL;
}

static void drop_data(arc_hdr_t *h)
{
    decomp_drop(h);
    arc_buf_rele(h->stored);
    h->stored = NULL;
}

/* The oldest written copy goes; its entry stays where it is on its list. */
static void drop_oldest_written_locked(void)
{
    arc_hdr_t *h = A.written_tail;
    A.list[h->state].size -= h->decomp->size;
    decomp_drop(h);
    A.st.written_copies_dropped++;
}

/* Unlinks h from its list and the table and frees it. */
static void hdr_destroy(arc_hdr_t *h)
{
    arc_hdr_t **pp = slot_of(&h->key);
    if (pp && *pp == h) *pp = h->hnext;
    list_unlink(h);
    drop_data(h);
    A.count--;
    free(h);
}

static uint64_t live_size(void) { return A.list[ST_MRU].size + A.list[ST_MFU].size; }

/* A live block becomes a ghost (its data goes). */
static void hdr_to_ghost(arc_hdr_t *h)
{
    int ghost = h->state == ST_MRU ? ST_MRU_GHOST : ST_MFU_GHOST;
    list_unlink(h);
    drop_data(h);
    list_push(h, ghost);
    A.st.evictions++;
}

/* Brings the live lists under c, then trims the ghost lists. */
static void evict_locked(uint64_t need)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock));
    while (live_size() + need > A.c && live_size() > 0) {
        if (A.written_tail) {
            drop_oldest_written_locked();
            continue;
        }
        arc_list_t *mru = &A.list[ST_MRU], *mfu = &A.list[ST_MFU];
        arc_hdr_t *victim = (mru->tail && (mru->size > A.p || !mfu->tail)) ? mru->tail : mfu->tail;
        hdr_to_ghost(victim);
    }
}

/* Keeps MRU + MRU-ghost <= c and all four lists <= 2c. */
static void trim_ghosts_locked(void)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock));
    while (A.list[ST_MRU].size + A.list[ST_MRU_GHOST].size > A.c && A.list[ST_MRU_GHOST].tail)
        hdr_destroy(A.list[ST_MRU_GHOST].tail);
    uint64_t all = 0;
    for (int s = ST_MRU; s < ST_COUNT; s++) all += A.list[s].size;
    while (all > 2 * A.c && A.list[ST_MFU_GHOST].tail) {
        all -= A.list[ST_MFU_GHOST].tail->psize;
        hdr_destroy(A.list[ST_MFU_GHOST].tail);
    }
    while (all > 2 * A.c && A.list[ST_MRU_GHOST].tail) {
        all -= A.list[ST_MRU_GHOST].tail->psize;
        hdr_destroy(A.list[ST_MRU_GHOST].tail);
    }
    /* Ghost headers cost memory arc_max does not count: with small blocks there could
     * be millions. Keep at most one per ARC_GHOST_BYTES of c. */
    uint64_t max_ghosts = A.c / ARC_GHOST_BYTES;
    while (A.list[ST_MRU_GHOST].count + A.list[ST_MFU_GHOST].count > max_ghosts) {
        int s = A.list[ST_MRU_GHOST].count >= A.list[ST_MFU_GHOST].count ? ST_MRU_GHOST
                                                                          : ST_MFU_GHOST;
        hdr_destroy(A.list[s].tail);
    }
}

/* A miss found its block's ghost: adapt p toward the list that lost it. */
static void ghost_adapt(const arc_hdr_t *h)
{
    uint64_t b1 = A.list[ST_MRU_GHOST].size, b2 = A.list[ST_MFU_GHOST].size;
    if (h->state == ST_MRU_GHOST) {
        uint64_t delta = (b2 > b1 && b1) ? h->psize * (b2 / b1) : h->psize;
        A.p = CAIRN_MIN(A.c, A.p + delta);
        A.st.mru_ghost_hits++;
    } else {
        uint64_t delta = (b1 > b2 && b2) ? h->psize * (b1 / b2) : h->psize;
        A.p = A.p > delta ? A.p - delta : 0;
        A.st.mfu_ghost_hits++;
    }
}

/* ---------------- reads ---------------- */

static void insert_buf(uint64_t pool_guid, const cairn_blkptr_t *bp, arc_buf_t *b, uint8_t policy,
                       bool on_l2, bool unread);

static bool hdr_matches(const arc_hdr_t *h, const cairn_blkptr_t *bp)
{
    return h->lsize == bp->lsize && h->psize == bp->psize && h->compress == bp->compress &&
           h->checksum == bp->checksum && memcmp(h->cksum, bp->cksum, CAIRN_CHECKSUM_LEN) == 0;
}

/* Under A.lock: the entry holding bp's block in memory (MRU or MFU, the same
 * content), or NULL. */
static arc_hdr_t *live_hdr_locked(const arc_key_t *k, const cairn_blkptr_t *bp)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock));
    arc_hdr_t **pp = slot_of(k);
    arc_hdr_t *h = pp ? *pp : NULL;
    return h && (h->state == ST_MRU || h->state == ST_MFU) && hdr_matches(h, bp) ? h : NULL;
}

/* Gives a live entry the decompressed copy made outside the lock (the entry
 * holds it from now on; it counts against arc_max, so something may go). */
static void attach_decomp_locked(arc_hdr_t *h, arc_buf_t *copy)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock));
    int state = h->state;
    list_unlink(h);
    h->decomp = buf_hold(copy);
    A.decomp_size += copy->size;
    list_push(h, state);
    evict_locked(0);
    trim_ghosts_locked();
}

/* Copies a block out of its stored bytes (decompressing) into buf. */
static int materialise(const cairn_blkptr_t *bp, const uint8_t *stored, void *buf)
{
    if (bp->compress == CAIRN_COMPRESS_OFF) {
        memcpy(buf, stored, bp->lsize);
        return 0;
    }
    return cairn_decompress((cairn_compress_t)bp->compress, stored, bp->psize, buf, bp->lsize);
}

/* analytics' arc.accesses (include/cairn/analytics.h): by result, and by the
 * dataset the DMU tagged this thread with ("-": a read of no dataset's, the
 * pool's own metadata). */
static void arc_analytics(bool hit)
{
    if (!an_stat_enabled(AN_ARC_ACCESSES)) return;
    an_add_total(AN_ARC_ACCESSES, 1);
    an_add(AN_ARC_ACCESSES, AN_BY_RESULT, hit, 1, an_name_string, hit ? "hit" : "miss");
    const an_tag_t *tag = an_thread_tag();
    if (tag) an_add(AN_ARC_ACCESSES, AN_BY_DATASET, tag->key, 1, tag->name, tag->arg);
    else an_add(AN_ARC_ACCESSES, AN_BY_DATASET, 0, 1, an_name_string, "-");
}

/* A hit copies bytes [off, off + len) of the block into buf, or, when ref is
 * given and the logical bytes sit in a buffer the ARC keeps, lends that buffer
 * (*ref, held) and leaves buf alone; memory_only leaves a miss alone (neither
 * counted nor looked for on a cache device): the caller's full read that
 * follows does both. */
static int lookup_impl(uint64_t pool_guid, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                       void *buf, uint8_t policy, bool memory_only, arc_buf_t **ref)
{
    if (ref) *ref = NULL;
    if (cairn_bp_is_hole(bp)) return -ENOENT;
    bool whole = off == 0 && len == bp->lsize;
    arc_key_t k = arc_key_of(pool_guid, bp);
    pthread_mutex_lock(&A.lock);
    arc_hdr_t **pp = slot_of(&k);
    arc_hdr_t *h = pp ? *pp : NULL;
    if (h && !hdr_matches(h, bp)) {
        /* Same place and birth, other content: a txg rewritten after a crash. */
        hdr_destroy(h);
        h = NULL;
    }
    if (h && (h->state == ST_MRU || h->state == ST_MFU)) {
        A.st.hits++;
        arc_analytics(true);
        if (h->state == ST_MRU) A.st.mru_hits++;
        else A.st.mfu_hits++;
        /* A block read ahead is used for the first time now: it stays where it
         * is (a stream must not look hot and double its memory). */
        int to = h->unread ? h->state : ST_MFU;
        bool first_use = h->unread;
        h->unread = false;
        list_unlink(h);
        arc_buf_t *dc = buf_hold(h->decomp), *st = dc ? NULL : buf_hold(h->stored);
        if (first_use) {
            /* Decompressed by the read-ahead, or written, for this use only:
             * one copy per streamed block stays, the stored one. */
            decomp_drop(h);
        }
        list_push(h, to);
        bool want_decomp = !dc && to == ST_MFU && bp->compress != CAIRN_COMPRESS_OFF &&
                           arc_policy_allows(ARC_POLICY_PRIMARY(policy), bp->type);
        pthread_mutex_unlock(&A.lock);
        if (dc || bp->compress == CAIRN_COMPRESS_OFF) {
            /* The logical bytes are in a buffer the ARC keeps: lend it, or copy. */
            arc_buf_t *lb = dc ? dc : st;
            if (ref) {
                *ref = lb;
                return 0;
            }
            memcpy(buf, lb->data + off, len);
            arc_buf_rele(lb);
            return 0;
        }
        if (want_decomp) {
            /* Hot (on the MFU now): decompress once into the buffer the ARC
             * keeps for the next reads, which this reader may borrow too. */
            arc_buf_t *copy = arc_buf_new(NULL, bp->lsize);
            int err = materialise(bp, st->data, copy->data);
            if (err) {
                arc_buf_rele(copy);
                arc_buf_rele(st);
                return err;
            }
            pthread_mutex_lock(&A.lock);
            h = live_hdr_locked(&k, bp);
            if (h && h->stored == st && h->state == ST_MFU && !h->decomp) attach_decomp_locked(h, copy);
            pthread_mutex_unlock(&A.lock);
            arc_buf_rele(st);
            if (ref) {
                *ref = copy; /* ours even if the ARC dropped the block meanwhile */
                return 0;
            }
            memcpy(buf, copy->data + off, len);
            arc_buf_rele(copy);
            return 0;
        }
        /* Not kept decompressed (first use of a block read ahead): decompress
         * straight into the caller's buffer. */
        uint8_t *full = whole ? buf : malloc(bp->lsize);
        if (!full) abort();
        int err = materialise(bp, st->data, full);
        if (!err && !whole) memcpy(buf, full + off, len);
        if (!whole) free(full);
        arc_buf_rele(st);
        return err;
    }
    if (memory_only) {
        pthread_mutex_unlock(&A.lock);
        return -ENOENT;
    }
    if (h) ghost_adapt(h); /* stays a ghost until the read comes back and inserts */
    A.st.misses++;
    arc_analytics(false);
    pthread_mutex_unlock(&A.lock);

    if (!arc_policy_allows(ARC_POLICY_SECONDARY(policy), bp->type) ||
        !l2arc_pool_has_devices(pool_guid))
        return -ENOENT;
    uint8_t *stored = NULL;
    if (l2arc_read(pool_guid, bp, policy, &stored) != 0) return -ENOENT;
    int err = materialise(bp, stored, buf);
    if (!err && arc_policy_allows(ARC_POLICY_PRIMARY(policy), bp->type))
        insert_buf(pool_guid, bp, arc_buf_new(stored, bp->psize), policy, true, false);
    free(stored);
    return err ? -ENOENT : 0;
}

int arc_lookup(uint64_t pool_guid, const cairn_blkptr_t *bp, void *buf, uint8_t policy)
{
    if (!buf) return -EINVAL; /* read-ahead asks arc_prefetch() */
    return lookup_impl(pool_guid, bp, 0, bp->lsize, buf, policy, false, NULL);
}

int arc_prefetch(uint64_t pool_guid, const cairn_blkptr_t *bp, uint8_t policy)
{
    if (arc_cached(pool_guid, bp)) return 0;
    if (!arc_policy_allows(ARC_POLICY_PRIMARY(policy), bp->type) ||
        !arc_policy_allows(ARC_POLICY_SECONDARY(policy), bp->type) ||
        !l2arc_pool_has_devices(pool_guid))
        return -ENOENT;
    uint8_t *stored = NULL;
    if (l2arc_read(pool_guid, bp, policy, &stored) != 0) return -ENOENT;
    /* Verified against bp by l2arc_read; kept like a block read ahead from the disks. */
    insert_buf(pool_guid, bp, arc_buf_new(stored, bp->psize), policy, true, true);
    free(stored);
    return 0;
}

bool arc_cached(uint64_t pool_guid, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp)) return false;
    arc_key_t k = arc_key_of(pool_guid, bp);
    pthread_mutex_lock(&A.lock);
    bool in = live_hdr_locked(&k, bp) != NULL;
    pthread_mutex_unlock(&A.lock);
    return in;
}

arc_ahead_t arc_ahead_state(uint64_t pool_guid, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp)) return ARC_AHEAD_READ;
    arc_key_t k = arc_key_of(pool_guid, bp);
    pthread_mutex_lock(&A.lock);
    arc_hdr_t *h = live_hdr_locked(&k, bp);
    arc_ahead_t st = ARC_AHEAD_READ;
    if (h)
        st = h->decomp || h->compress == CAIRN_COMPRESS_OFF ? ARC_AHEAD_DONE
             : h->unread                                    ? ARC_AHEAD_DECOMPRESS
                                                            : ARC_AHEAD_DECOMPRESS_HOT;
    pthread_mutex_unlock(&A.lock);
    return st;
}

void arc_decompress_ahead(uint64_t pool_guid, const cairn_blkptr_t *bp, bool hot)
{
    if (cairn_bp_is_hole(bp) || bp->compress == CAIRN_COMPRESS_OFF) return;
    arc_key_t k = arc_key_of(pool_guid, bp);
    pthread_mutex_lock(&A.lock);
    arc_hdr_t *h = live_hdr_locked(&k, bp);
    if (!h || h->decomp || (!hot && !h->unread)) {
        pthread_mutex_unlock(&A.lock); /* gone, done by someone else, or used already */
        return;
    }
    arc_buf_t *st = buf_hold(h->stored);
    pthread_mutex_unlock(&A.lock);
    arc_buf_t *copy = arc_buf_new(NULL, bp->lsize);
    if (materialise(bp, st->data, copy->data)) {
        /* Verified yet not decompressible: the reader's hit reports it. */
        arc_buf_rele(copy);
        arc_buf_rele(st);
        return;
    }
    pthread_mutex_lock(&A.lock);
    h = live_hdr_locked(&k, bp);
    /* Still the same entry and still wanting the copy (otherwise a reader got
     * there first): an unread entry's first hit takes it (lookup_impl drops it
     * then), a hot one's next hit keeps it. */
    if (h && h->stored == st && !h->decomp && (hot || h->unread)) attach_decomp_locked(h, copy);
    pthread_mutex_unlock(&A.lock);
    arc_buf_rele(copy);
    arc_buf_rele(st);
}

int arc_lookup_memory(uint64_t pool_guid, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                      void *buf, uint8_t policy)
{
    if (off > bp->lsize || len > bp->lsize - off) return -EINVAL;
    return lookup_impl(pool_guid, bp, off, len, buf, policy, true, NULL);
}

int arc_lookup_memory_ref(uint64_t pool_guid, const cairn_blkptr_t *bp, uint32_t off, uint32_t len,
                          void *buf, uint8_t policy, cairn_rbuf_t **ref)
{
    if (ref) *ref = NULL;
    if (off > bp->lsize || len > bp->lsize - off) return -EINVAL;
    return lookup_impl(pool_guid, bp, off, len, buf, policy, true, ref);
}

/* Under A.lock: enters the block with its stored buffer, which the ARC then
 * owns, and returns its entry; NULL when it is not entered (too big, or cached
 * already), the buffer still the caller's to release (after unlocking). */
static arc_hdr_t *insert_locked(uint64_t pool_guid, const cairn_blkptr_t *bp, arc_buf_t *b,
                          uint8_t policy, bool on_l2, bool unread)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock));
    arc_key_t k = arc_key_of(pool_guid, bp);
    if (b->size > A.c / 4) {
        /* A block that big would flush a quarter of the cache by itself. */
        A.st.bypassed++;
        return NULL;
    }
    if (A.count + 1 > A.nbuckets) table_grow();
    arc_hdr_t **pp = slot_of(&k);
    arc_hdr_t *h = *pp;
    int target = ST_MRU;
    if (h && (h->state == ST_MRU || h->state == ST_MFU) && hdr_matches(h, bp))
        return NULL; /* raced with another reader: already cached */
    if (h && hdr_matches(h, bp) && (h->state == ST_MRU_GHOST || h->state == ST_MFU_GHOST)) {
        /* Seen before and evicted: it has proved itself, so it goes to the MFU. */
        target = ST_MFU;
        list_unlink(h);
    } else {
        if (h) hdr_destroy(h);
        h = cairn_zalloc(sizeof(*h));
        h->key = k;
        pp = slot_of(&k);
        h->hnext = *pp;
        *pp = h;
        A.count++;
    }
    h->lsize = bp->lsize;
    h->psize = bp->psize;
    h->compress = bp->compress;
    h->checksum = bp->checksum;
    h->type = bp->type;
    h->l2_policy = ARC_POLICY_SECONDARY(policy);
    h->l2_done = on_l2; /* read back from a cache device: it is there already */
    h->unread = unread;
    memcpy(h->cksum, bp->cksum, CAIRN_CHECKSUM_LEN);
    evict_locked(b->size);
    h->stored = b;
    h->decomp = NULL;
    list_push(h, target);
    trim_ghosts_locked();
    return h;
}

static void insert_buf(uint64_t pool_guid, const cairn_blkptr_t *bp, arc_buf_t *b, uint8_t policy,
                       bool on_l2, bool unread)
{
    pthread_mutex_lock(&A.lock);
    bool in = insert_locked(pool_guid, bp, b, policy, on_l2, unread) != NULL;
    pthread_mutex_unlock(&A.lock);
    if (!in) arc_buf_rele(b);
}

/* Whether the policy keeps this block in memory at all. */
static bool kept_by(const cairn_blkptr_t *bp, uint8_t policy)
{
    return !cairn_bp_is_hole(bp) && arc_policy_allows(ARC_POLICY_PRIMARY(policy), bp->type);
}

static void count_bypass(uint64_t n)
{
    pthread_mutex_lock(&A.lock);
    A.st.bypassed += n;
    pthread_mutex_unlock(&A.lock);
}

void arc_insert_adopt(uint64_t pool_guid, const cairn_blkptr_t *bp, cairn_rbuf_t *stored,
                      uint8_t policy, bool unread)
{
    if (!kept_by(bp, policy) || stored->size != bp->psize) {
        count_bypass(1);
        arc_buf_rele(stored);
        return;
    }
    insert_buf(pool_guid, bp, stored, policy, false, unread);
}

void arc_insert_stored(uint64_t pool_guid, const cairn_blkptr_t *bp, const void *stored,
                       uint8_t policy)
{
    if (!kept_by(bp, policy)) {
        count_bypass(1);
        return;
    }
    insert_buf(pool_guid, bp, arc_buf_new(stored, bp->psize), policy, false, false);
}

void arc_insert_unread(uint64_t pool_guid, const cairn_blkptr_t *bp, const void *stored,
                       uint8_t policy)
{
    arc_insert_unread_many(pool_guid, bp, &stored, NULL, NULL, 1, policy);
}

/* Under A.lock, right after insert_locked entered h: gives the new entry the
 * writer's logical bytes as its written copy (the ARC owns copy from now on). */
static void attach_written_locked(arc_hdr_t *h, arc_buf_t *copy)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock) && !h->decomp);
    h->decomp = copy;
    A.decomp_size += copy->size;
    A.list[h->state].size += copy->size;
    written_link(h);
    A.st.written_copies++;
    evict_locked(0);
}

void arc_insert_unread_many(uint64_t pool_guid, const cairn_blkptr_t *bps,
                            const void *const *stored, cairn_rbuf_t *const *adopt,
                            cairn_rbuf_t *const *logical, size_t n, uint8_t policy)
{
    arc_buf_t *small[64], *small_copies[64];
    arc_buf_t **bufs = n <= 64 ? small : cairn_zalloc(n * sizeof *bufs);
    arc_buf_t **copies = n <= 64 ? small_copies : cairn_zalloc(n * sizeof *copies);
    uint64_t bypassed = 0, adopted = 0;
    for (size_t i = 0; i < n; i++) {
        copies[i] = logical ? logical[i] : NULL;
        arc_buf_t *given = adopt ? adopt[i] : NULL;
        bool keep = kept_by(&bps[i], policy);
        if (given && (!keep || given->size != bps[i].psize || given->data != stored[i])) {
            arc_buf_rele(given); /* not the block as stored: copied below, or not kept */
            given = NULL;
        }
        /* The writer's buffer, taken as it is: at 1 MiB NFS writes the copy into
         * a new buffer was most of the sync threads' CPU (docs/benchmarks.md). */
        bufs[i] = given ? given : keep ? arc_buf_new(stored[i], bps[i].psize) : NULL;
        if (given) adopted++;
        if (!keep) bypassed++;
    }
    pthread_mutex_lock(&A.lock);
    A.st.bypassed += bypassed;
    A.st.adopted_writes += adopted;
    /* Each insert's walk of its bucket misses the cache: bring every bucket,
     * then every chain's first entry, in before walking any, so the misses
     * overlap instead of following one another under the lock. */
    if (A.nbuckets) {
        for (size_t i = 0; i < n; i++) {
            arc_key_t k = arc_key_of(pool_guid, &bps[i]);
            __builtin_prefetch(bucket_of(&k));
        }
        for (size_t i = 0; i < n; i++) {
            arc_key_t k = arc_key_of(pool_guid, &bps[i]);
            arc_hdr_t *h = *bucket_of(&k);
            if (h) __builtin_prefetch(h);
        }
    }
    for (size_t i = 0; i < n; i++) {
        arc_hdr_t *h =
            bufs[i] ? insert_locked(pool_guid, &bps[i], bufs[i], policy, false, true) : NULL;
        if (h) bufs[i] = NULL;
        if (h && copies[i] && copies[i]->size == bps[i].lsize &&
            bps[i].compress != CAIRN_COMPRESS_OFF) {
            attach_written_locked(h, copies[i]);
            copies[i] = NULL;
        }
    }
    pthread_mutex_unlock(&A.lock);
    for (size_t i = 0; i < n; i++) arc_buf_rele(copies[i]);
    for (size_t i = 0; i < n; i++) arc_buf_rele(bufs[i]);
    if (bufs != small) free(bufs);
    if (copies != small_copies) free(copies);
}

void arc_free(uint64_t pool_guid, const cairn_blkptr_t *bp)
{
    if (cairn_bp_is_hole(bp)) return;
    arc_key_t k = arc_key_of(pool_guid, bp);
    pthread_mutex_lock(&A.lock);
    arc_hdr_t **pp = slot_of(&k);
    if (pp && *pp) {
        hdr_destroy(*pp);
        A.st.frees_dropped++;
    }
    pthread_mutex_unlock(&A.lock);
    l2arc_forget(pool_guid, bp);
}

void arc_purge_pool(uint64_t pool_guid)
{
    pthread_mutex_lock(&A.lock);
    for (int s = ST_MRU; s < ST_COUNT; s++) {
        arc_hdr_t *h = A.list[s].head;
        while (h) {
            arc_hdr_t *n = h->next;
            if (h->key.guid == pool_guid) hdr_destroy(h);
            h = n;
        }
    }
    pthread_mutex_unlock(&A.lock);
    l2arc_close_pool(pool_guid);
}

/* ---------------- feeding the cache devices ---------------- */

size_t arc_l2_candidates(uint64_t guid, arc_l2_cand_t *out, size_t max, uint64_t bytes)
{
    size_t n = 0;
    uint64_t total = 0;
    pthread_mutex_lock(&A.lock);
    /* From the eviction ends: what the ARC is about to lose. Scan a bounded window. */
    arc_hdr_t *cur[2] = {A.list[ST_MRU].tail, A.list[ST_MFU].tail};
    size_t scanned = 0;
    while (n < max && (cur[0] || cur[1]) && scanned < 16 * max) {
        for (int i = 0; i < 2 && n < max; i++) {
            arc_hdr_t *h = cur[i];
            if (!h) continue;
            cur[i] = h->prev;
            scanned++;
            if (h->l2_done || h->key.guid != guid || !h->stored ||
                !arc_policy_allows((arc_cache_policy_t)h->l2_policy, h->type))
                continue;
            if (total + h->psize > bytes) {
                cur[0] = cur[1] = NULL;
                break;
            }
            h->l2_done = true;
            arc_l2_cand_t *c = &out[n++];
            c->key = h->key;
            c->lsize = h->lsize;
            c->psize = h->psize;
            c->compress = h->compress;
            c->checksum = h->checksum;
            c->type = h->type;
            memcpy(c->cksum, h->cksum, CAIRN_CHECKSUM_LEN);
            c->stored = buf_hold(h->stored);
            total += h->psize;
        }
    }
    pthread_mutex_unlock(&A.lock);
    return n;
}

/* ---------------- sizing and statistics ---------------- */

/* Under A.lock: makes c the target and evicts down to it. */
static void set_target_locked(uint64_t c)
{
    CAIRN_ASSERT(cairn_mutex_held(&A.lock));
    A.c = c;
    if (A.p > A.c) A.p = A.c;
    evict_locked(0);
    trim_ghosts_locked();
}

/* The buffers the ARC drops are kept for its next blocks, within its target and
 * an eighth more for buffers lent to senders or in flight. */
static void bound_buffer_pool(uint64_t c) { cairn_bufpool_set_limit(c + c / 8); }

void arc_set_max(uint64_t bytes)
{
    if (bytes < CAIRN_MIB) bytes = CAIRN_MIB;
    pthread_mutex_lock(&A.lock);
    A.c_max = bytes;
    set_target_locked(bytes);
    pthread_mutex_unlock(&A.lock);
    bound_buffer_pool(bytes);
}

void arc_set_target(uint64_t bytes)
{
    pthread_mutex_lock(&A.lock);
    uint64_t c = CAIRN_MIN(CAIRN_MAX(bytes, (uint64_t)CAIRN_MIB), A.c_max);
    bool shrinks = c < A.c;
    set_target_locked(c);
    pthread_mutex_unlock(&A.lock);
    bound_buffer_pool(c);
    /* Under pressure the memory must reach the kernel, not wait in the heap. */
    if (shrinks) cairn_bufpool_trim();
}

uint64_t arc_get_max(void)
{
    pthread_mutex_lock(&A.lock);
    uint64_t c = A.c;
    pthread_mutex_unlock(&A.lock);
    return c;
}

void arc_get_stats(arc_stats_t *out)
{
    pthread_mutex_lock(&A.lock);
    *out = A.st;
    out->c = A.c;
    out->c_max = A.c_max;
    out->p = A.p;
    out->mru_size = A.list[ST_MRU].size;
    out->mfu_size = A.list[ST_MFU].size;
    out->mru_ghost_size = A.list[ST_MRU_GHOST].size;
    out->mfu_ghost_size = A.list[ST_MFU_GHOST].size;
    out->size = out->mru_size + out->mfu_size;
    out->decompressed_size = A.decomp_size;
    out->written_copies_size = A.written_size;
    out->entries = A.list[ST_MRU].count + A.list[ST_MFU].count;
    pthread_mutex_unlock(&A.lock);
    l2arc_fill_stats(out);
}

void arc_reset_stats(void)
{
    pthread_mutex_lock(&A.lock);
    memset(&A.st, 0, sizeof A.st);
    pthread_mutex_unlock(&A.lock);
    l2arc_reset_stats();
}
