/*
 * L2ARC: the second level of the ARC on cache devices.
 *
 * Feeding. A feed thread wakes every interval (200 ms by default) and asks
 * the ARC for blocks near the eviction ends of its lists that are not yet on
 * a cache device and whose read allowed it (secondarycache), at most
 * bytes_per_tick of them (8 MiB). So the device sees a bounded, sequential
 * write stream, and only of what the ARC is about to lose. Blocks are written
 * as stored (compressed), so the device holds as much as it can.
 *
 * Layout (docs/ondisk-format.md, "L2ARC cache devices"): two header slots at
 * 0 and 4 KiB, then a ring. Each feed pass writes one log batch at the ring's
 * write hand: a 4 KiB log header listing up to L2_LOG_ENTRIES blocks (their
 * identity, sizes, codecs, checksum and device offset), followed by their
 * stored bytes. The log header names the previous batch, and the device
 * header (the slot of the next generation, so a torn header write leaves the
 * other intact) names the newest. When the hand reaches the end it wraps to
 * the ring's start, and whatever the new batch overwrites is dropped from the
 * index first.
 *
 * Rebuild at attach walks the chain from the newest batch backwards; a batch
 * is taken while its header verifies, its sequence number is one less than
 * its successor's and its extent does not overlap any newer batch (the ring
 * has overwritten it otherwise). Newer entries win. A crash after a batch was
 * written but before the header naming it leaves a chain that may reach the
 * region the batch overwrote; batches are written contiguously from the hand,
 * so the first old batch it touched lost its header (the batch starts where
 * that header was, or before it) and the walk stops there.
 *
 * Reads are never trusted: the bytes read are checked against the asking
 * block pointer's checksum. A read error, or L2_MAX_ERRORS bad checksums,
 * drops the device (one log line); either way the caller falls back to the
 * main vdevs, so a cache device can cost time but never a read.
 */
#include "arc_impl.h"

#include <cairn/assert.h>
#include <cairn/codec.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUB "l2arc"
#define L2_HDR_MAGIC 0x4843324C4E524143ULL /* "CARNL2CH" */
#define L2_LOG_MAGIC 0x474C324C4E524143ULL /* "CARNL2LG" */
#define L2_VERSION 1
#define L2_SLOT_SIZE 4096
#define L2_RING_START (2 * L2_SLOT_SIZE)
#define L2_LOG_SIZE 4096
#define L2_ALIGN 512
#define L2_MAX_ERRORS 3
#define L2_MIN_SIZE (4 * CAIRN_MIB)
#define L2_BATCH_MAX (8 * CAIRN_MIB) /* payload bytes of one batch, at most an 8th of the ring */

typedef struct l2_dev_hdr {
    uint64_t magic;
    uint32_t version, pad;
    uint64_t pool_guid;
    uint64_t generation;
    uint64_t ring_start, ring_end;
    uint64_t hand;          /* next write offset */
    uint64_t newest_log;    /* 0: no batch yet */
    uint64_t newest_seq;
    uint8_t cksum[CAIRN_CHECKSUM_LEN]; /* xxhash of the bytes before it */
} l2_dev_hdr_t;

typedef struct l2_log_ent {
    uint64_t offset, birth;      /* the block's first DVA and birth */
    uint64_t dev_off;            /* where its stored bytes are on this device */
    uint32_t vdev, lsize, psize;
    uint8_t compress, checksum, type, pad;
    uint8_t cksum[CAIRN_CHECKSUM_LEN];
} l2_log_ent_t;
_Static_assert(sizeof(l2_log_ent_t) == 72, "L2 log entry is 72 bytes on disk");

typedef struct l2_log_hdr {
    uint64_t magic;
    uint64_t pool_guid;
    uint64_t seq;
    uint64_t prev_log;       /* 0: none */
    uint32_t nents, len;     /* entries; bytes of the batch (this header + payloads) */
    uint64_t pad;
} l2_log_hdr_t;
#define L2_LOG_ENTRIES ((L2_LOG_SIZE - sizeof(l2_log_hdr_t) - CAIRN_CHECKSUM_LEN) / sizeof(l2_log_ent_t))

typedef struct l2_ent {
    arc_key_t key;
    uint64_t dev_off;
    uint32_t lsize, psize;
    uint8_t compress, checksum, type;
    uint8_t cksum[CAIRN_CHECKSUM_LEN];
    struct l2_ent *hnext;
} l2_ent_t;

typedef struct l2_dev {
    char *path;
    uint64_t guid;
    int fd;
    atomic_bool online;
    pthread_mutex_t lock;       /* index, hand, header, I/O ordering */
    l2_ent_t **buckets;
    size_t nbuckets, count;
    uint64_t alloc;
    uint64_t ring_start, ring_end, hand, newest_log, newest_seq, generation;
    atomic_uint_fast64_t reads, writes, errors;
    atomic_uint_fast64_t read_bytes, write_bytes; /* `pool iostat` bandwidth */
    struct l2_dev *next;
} l2_dev_t;

static struct {
    pthread_rwlock_t lock;      /* the device list; write-held to add or free devices */
    l2_dev_t *devs;
    pthread_mutex_t feed_lock;  /* one feed pass at a time */
    pthread_mutex_t thr_lock;
    pthread_cond_t thr_cv;
    pthread_t thread;
    bool thread_started;
    uint64_t feed_bytes;
    uint32_t feed_ms;
    atomic_uint_fast64_t hits, misses, feeds, feed_bytes_total, cksum_bad, io_errors, dropped,
        rebuilt;
} L = {.lock = PTHREAD_RWLOCK_INITIALIZER,
       .feed_lock = PTHREAD_MUTEX_INITIALIZER,
       .thr_lock = PTHREAD_MUTEX_INITIALIZER,
       .thr_cv = PTHREAD_COND_INITIALIZER,
       .feed_bytes = 8 * CAIRN_MIB,
       .feed_ms = 200};

/* ---------------- the index of one device ---------------- */

static uint64_t batch_max(const l2_dev_t *d)
{
    return CAIRN_MIN((uint64_t)L2_BATCH_MAX, (d->ring_end - d->ring_start) / 8);
}

static l2_ent_t **ent_slot(l2_dev_t *d, const arc_key_t *k)
{
    if (!d->nbuckets) return NULL;
    l2_ent_t **pp = &d->buckets[arc_key_hash(k) & (d->nbuckets - 1)];
    while (*pp && !arc_key_eq(&(*pp)->key, k)) pp = &(*pp)->hnext;
    return pp;
}

static void ent_remove(l2_dev_t *d, l2_ent_t **pp)
{
    l2_ent_t *e = *pp;
    *pp = e->hnext;
    d->count--;
    d->alloc -= e->psize;
    free(e);
}

static void index_add(l2_dev_t *d, l2_ent_t *e)
{
    if (d->count + 1 > d->nbuckets) {
        size_t nb = d->nbuckets ? d->nbuckets * 2 : 1024;
        l2_ent_t **nbk = cairn_zalloc(nb * sizeof(*nbk));
        for (size_t b = 0; b < d->nbuckets; b++) {
            l2_ent_t *x = d->buckets[b];
            while (x) {
                l2_ent_t *n = x->hnext;
                size_t i = arc_key_hash(&x->key) & (nb - 1);
                x->hnext = nbk[i];
                nbk[i] = x;
                x = n;
            }
        }
        free(d->buckets);
        d->buckets = nbk;
        d->nbuckets = nb;
    }
    l2_ent_t **pp = ent_slot(d, &e->key);
    if (*pp) ent_remove(d, pp);
    pp = ent_slot(d, &e->key);
    e->hnext = *pp;
    *pp = e;
    d->count++;
    d->alloc += e->psize;
}

/* A new index entry for the block key k, logged as le. */
static l2_ent_t *ent_from_log(const arc_key_t *k, const l2_log_ent_t *le)
{
    l2_ent_t *e = cairn_zalloc(sizeof(*e));
    e->key = *k;
    e->dev_off = le->dev_off;
    e->lsize = le->lsize;
    e->psize = le->psize;
    e->compress = le->compress;
    e->checksum = le->checksum;
    e->type = le->type;
    memcpy(e->cksum, le->cksum, CAIRN_CHECKSUM_LEN);
    return e;
}

/* Drops every entry whose bytes lie in [lo, hi): the ring is about to overwrite them. */
static void index_drop_range(l2_dev_t *d, uint64_t lo, uint64_t hi)
{
    for (size_t b = 0; b < d->nbuckets; b++) {
        l2_ent_t **pp = &d->buckets[b];
        while (*pp) {
            if ((*pp)->dev_off < hi && (*pp)->dev_off + (*pp)->psize > lo) ent_remove(d, pp);
            else pp = &(*pp)->hnext;
        }
    }
}

static void index_clear(l2_dev_t *d)
{
    for (size_t b = 0; b < d->nbuckets; b++)
        while (d->buckets[b]) ent_remove(d, &d->buckets[b]);
}

/* Called with d->lock held. */
static void dev_drop(l2_dev_t *d, const char *why)
{
    CAIRN_ASSERT(cairn_mutex_held(&d->lock));
    if (!atomic_exchange(&d->online, false)) return;
    log_error(SUB, "cache device %s dropped: %s; reads go to the pool's vdevs", d->path, why);
    index_clear(d);
    L.dropped++;
}

/* ---------------- device I/O ---------------- */

static int header_write(l2_dev_t *d)
{
    uint8_t slot[L2_SLOT_SIZE] = {0};
    l2_dev_hdr_t *h = (l2_dev_hdr_t *)slot;
    d->generation++;
    *h = (l2_dev_hdr_t){.magic = L2_HDR_MAGIC, .version = L2_VERSION, .pool_guid = d->guid,
                        .generation = d->generation, .ring_start = d->ring_start,
                        .ring_end = d->ring_end, .hand = d->hand, .newest_log = d->newest_log,
                        .newest_seq = d->newest_seq};
    cairn_checksum(CAIRN_CHECKSUM_XXHASH, h, offsetof(l2_dev_hdr_t, cksum), h->cksum);
    return cairn_pwrite_all(d->fd, slot, sizeof slot, (d->generation % 2) * L2_SLOT_SIZE);
}

static bool header_valid(const l2_dev_hdr_t *h)
{
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    if (h->magic != L2_HDR_MAGIC || h->version != L2_VERSION) return false;
    cairn_checksum(CAIRN_CHECKSUM_XXHASH, h, offsetof(l2_dev_hdr_t, cksum), ck);
    return memcmp(ck, h->cksum, sizeof ck) == 0;
}

static bool log_valid(const uint8_t *blk, uint64_t guid, uint64_t seq)
{
    const l2_log_hdr_t *lh = (const l2_log_hdr_t *)blk;
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    if (lh->magic != L2_LOG_MAGIC || lh->pool_guid != guid || lh->seq != seq ||
        lh->nents > L2_LOG_ENTRIES || lh->len < L2_LOG_SIZE)
        return false;
    cairn_checksum(CAIRN_CHECKSUM_XXHASH, blk, L2_LOG_SIZE - CAIRN_CHECKSUM_LEN, ck);
    return memcmp(ck, blk + L2_LOG_SIZE - CAIRN_CHECKSUM_LEN, sizeof ck) == 0;
}

/* Rebuilds the index from the chain of batches (see the top comment). */
static void rebuild(l2_dev_t *d)
{
    typedef struct { uint64_t lo, hi; } ext_t;
    size_t next = 0, cap = 64;
    ext_t *seen = cairn_zalloc(cap * sizeof(*seen));
    uint8_t *blk = cairn_zalloc(L2_LOG_SIZE);
    uint64_t cur = d->newest_log, seq = d->newest_seq;
    uint64_t got = 0;
    while (cur >= d->ring_start && cur + L2_LOG_SIZE <= d->ring_end && seq > 0) {
        if (cairn_pread_all(d->fd, blk, L2_LOG_SIZE, cur) || !log_valid(blk, d->guid, seq)) break;
        const l2_log_hdr_t *lh = (const l2_log_hdr_t *)blk;
        ext_t x = {cur, cur + lh->len};
        if (x.hi > d->ring_end) break;
        bool overlap = false;
        for (size_t i = 0; i < next && !overlap; i++)
            overlap = x.lo < seen[i].hi && seen[i].lo < x.hi;
        if (overlap) break;
        if (next == cap) seen = cairn_realloc(seen, (cap *= 2) * sizeof(*seen));
        seen[next++] = x;
        const l2_log_ent_t *le = (const l2_log_ent_t *)(blk + sizeof(l2_log_hdr_t));
        for (uint32_t i = 0; i < lh->nents; i++) {
            if (le[i].dev_off < x.lo || le[i].dev_off + le[i].psize > x.hi) continue;
            arc_key_t k = {.guid = d->guid, .offset = le[i].offset, .birth = le[i].birth,
                           .vdev = le[i].vdev};
            l2_ent_t **pp = ent_slot(d, &k);
            if (pp && *pp) continue; /* a newer batch has it */
            index_add(d, ent_from_log(&k, &le[i]));
            got++;
        }
        cur = lh->prev_log;
        seq--;
    }
    free(blk);
    free(seen);
    L.rebuilt += got;
    if (got) log_info(SUB, "cache device %s: %llu blocks rebuilt from its log", d->path,
                      (unsigned long long)got);
}

/* ---------------- attach / detach ---------------- */

static void *feed_thread(void *arg);

static void feed_thread_start(void)
{
    pthread_mutex_lock(&L.thr_lock);
    if (!L.thread_started) {
        L.thread_started = true;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&L.thread, &a, feed_thread, NULL)) L.thread_started = false;
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&L.thr_lock);
}

static uint64_t dev_size(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb)) return 0;
    if (S_ISREG(sb.st_mode)) return (uint64_t)sb.st_size;
    off_t end = lseek(fd, 0, SEEK_END);
    return end > 0 ? (uint64_t)end : 0;
}

int arc_l2_add(uint64_t pool_guid, const char *path, bool create, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open cache device %s: %s", path, strerror(e));
        return -e;
    }
    uint64_t size = CAIRN_P2ALIGN(dev_size(fd), (uint64_t)L2_ALIGN);
    if (size < L2_MIN_SIZE) {
        close(fd);
        snprintf(err, errlen, "cache device %s is too small (at least 4M)", path);
        return -EINVAL;
    }
    pthread_rwlock_wrlock(&L.lock);
    for (l2_dev_t *x = L.devs; x; x = x->next) {
        if (strcmp(x->path, path) == 0) {
            pthread_rwlock_unlock(&L.lock);
            close(fd);
            snprintf(err, errlen, "%s is already a cache device", path);
            return -EEXIST;
        }
    }
    l2_dev_t *d = cairn_zalloc(sizeof(*d));
    d->path = cairn_strdup(path);
    d->guid = pool_guid;
    d->fd = fd;
    pthread_mutex_init(&d->lock, NULL);
    d->ring_start = L2_RING_START;
    d->ring_end = size;
    d->hand = d->ring_start;
    bool fresh = true;
    if (!create) {
        uint8_t slots[2][L2_SLOT_SIZE];
        const l2_dev_hdr_t *best = NULL;
        if (cairn_pread_all(fd, slots, sizeof slots, 0) == 0) {
            for (int i = 0; i < 2; i++) {
                const l2_dev_hdr_t *h = (const l2_dev_hdr_t *)slots[i];
                if (header_valid(h) && h->pool_guid == pool_guid && h->ring_end <= size &&
                    h->ring_start == L2_RING_START && h->hand >= h->ring_start &&
                    h->hand <= h->ring_end && (!best || h->generation > best->generation))
                    best = h;
            }
        }
        if (best) {
            fresh = false;
            d->ring_end = best->ring_end;
            d->hand = best->hand;
            d->newest_log = best->newest_log;
            d->newest_seq = best->newest_seq;
            d->generation = best->generation;
            rebuild(d);
        }
    }
    int e = 0;
    if (fresh) {
        /* Both slots: a stale header of an earlier life must never win over this one. */
        uint8_t *zero = cairn_zalloc(L2_RING_START);
        e = cairn_pwrite_all(fd, zero, L2_RING_START, 0);
        free(zero);
        if (!e) e = header_write(d);
    }
    if (e) {
        pthread_rwlock_unlock(&L.lock);
        snprintf(err, errlen, "cannot write cache device %s: %s", path, strerror(-e));
        close(fd);
        free(d->path);
        free(d);
        return e;
    }
    atomic_store(&d->online, true);
    d->next = L.devs;
    L.devs = d;
    pthread_rwlock_unlock(&L.lock);
    feed_thread_start();
    return 0;
}

static void dev_free(l2_dev_t *d)
{
    pthread_mutex_lock(&d->lock);
    if (atomic_load(&d->online)) {
        header_write(d);
        fdatasync(d->fd);
    }
    index_clear(d);
    pthread_mutex_unlock(&d->lock);
    close(d->fd);
    free(d->buckets);
    pthread_mutex_destroy(&d->lock);
    free(d->path);
    free(d);
}

int arc_l2_remove(uint64_t pool_guid, const char *path)
{
    pthread_mutex_lock(&L.feed_lock);
    pthread_rwlock_wrlock(&L.lock);
    l2_dev_t *found = NULL;
    for (l2_dev_t **pp = &L.devs; *pp; pp = &(*pp)->next) {
        if ((*pp)->guid == pool_guid && strcmp((*pp)->path, path) == 0) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_rwlock_unlock(&L.lock);
    pthread_mutex_unlock(&L.feed_lock);
    if (!found) return -ENOENT;
    dev_free(found);
    return 0;
}

void l2arc_close_pool(uint64_t guid)
{
    pthread_mutex_lock(&L.feed_lock);
    pthread_rwlock_wrlock(&L.lock);
    l2_dev_t *mine = NULL;
    for (l2_dev_t **pp = &L.devs; *pp;) {
        l2_dev_t *d = *pp;
        if (d->guid == guid) {
            *pp = d->next;
            d->next = mine;
            mine = d;
        } else {
            pp = &d->next;
        }
    }
    pthread_rwlock_unlock(&L.lock);
    pthread_mutex_unlock(&L.feed_lock);
    while (mine) {
        l2_dev_t *n = mine->next;
        dev_free(mine);
        mine = n;
    }
}

int arc_l2_paths(uint64_t pool_guid, char ***paths, size_t *n)
{
    pthread_rwlock_rdlock(&L.lock);
    size_t k = 0;
    for (l2_dev_t *d = L.devs; d; d = d->next) k += d->guid == pool_guid;
    char **v = cairn_zalloc((k ? k : 1) * sizeof(*v));
    size_t i = 0;
    for (l2_dev_t *d = L.devs; d; d = d->next)
        if (d->guid == pool_guid) v[i++] = cairn_strdup(d->path);
    pthread_rwlock_unlock(&L.lock);
    *paths = v;
    *n = i;
    return 0;
}

bool l2arc_pool_has_devices(uint64_t guid)
{
    pthread_rwlock_rdlock(&L.lock);
    bool any = false;
    for (l2_dev_t *d = L.devs; d && !any; d = d->next)
        any = d->guid == guid && atomic_load(&d->online);
    pthread_rwlock_unlock(&L.lock);
    return any;
}

/* ---------------- reads ---------------- */

int l2arc_read(uint64_t guid, const cairn_blkptr_t *bp, uint8_t policy, uint8_t **stored)
{
    (void)policy;
    arc_key_t k = arc_key_of(guid, bp);
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&L.lock);
    for (l2_dev_t *d = L.devs; d && rc == -ENOENT; d = d->next) {
        if (d->guid != guid || !atomic_load(&d->online)) continue;
        pthread_mutex_lock(&d->lock);
        l2_ent_t **pp = ent_slot(d, &k);
        l2_ent_t *e = pp ? *pp : NULL;
        if (!e || e->psize != bp->psize || e->lsize != bp->lsize || e->compress != bp->compress ||
            memcmp(e->cksum, bp->cksum, CAIRN_CHECKSUM_LEN) != 0) {
            pthread_mutex_unlock(&d->lock);
            continue;
        }
        uint64_t off = e->dev_off;
        pthread_mutex_unlock(&d->lock);
        uint8_t *buf = malloc(bp->psize);
        if (!buf) abort();
        d->reads++;
        d->read_bytes += bp->psize;
        int e2 = cairn_pread_all(d->fd, buf, bp->psize, off);
        uint8_t ck[CAIRN_CHECKSUM_LEN];
        if (!e2 && bp->checksum > CAIRN_CHECKSUM_NONE && bp->checksum < CAIRN_CHECKSUM_COUNT) {
            cairn_checksum((cairn_checksum_t)bp->checksum, buf, bp->psize, ck);
            if (memcmp(ck, bp->cksum, sizeof ck) == 0) {
                *stored = buf;
                rc = 0;
                break;
            }
        }
        free(buf);
        pthread_mutex_lock(&d->lock);
        pp = ent_slot(d, &k);
        if (!e2 && (!pp || !*pp || (*pp)->dev_off != off)) {
            /* The ring overwrote it while we read: a miss, not a bad device. */
            pthread_mutex_unlock(&d->lock);
            continue;
        }
        d->errors++;
        if (e2) {
            L.io_errors++;
            dev_drop(d, strerror(-e2));
        } else {
            L.cksum_bad++;
            if (pp && *pp) ent_remove(d, pp);
            if (d->errors >= L2_MAX_ERRORS) dev_drop(d, "blocks read back with bad checksums");
        }
        pthread_mutex_unlock(&d->lock);
        rc = -EIO;
    }
    pthread_rwlock_unlock(&L.lock);
    if (rc == 0) L.hits++;
    else L.misses++;
    return rc;
}

void l2arc_forget(uint64_t guid, const cairn_blkptr_t *bp)
{
    arc_key_t k = arc_key_of(guid, bp);
    pthread_rwlock_rdlock(&L.lock);
    for (l2_dev_t *d = L.devs; d; d = d->next) {
        if (d->guid != guid) continue;
        pthread_mutex_lock(&d->lock);
        l2_ent_t **pp = ent_slot(d, &k);
        if (pp && *pp) ent_remove(d, pp);
        pthread_mutex_unlock(&d->lock);
    }
    pthread_rwlock_unlock(&L.lock);
}

/* ---------------- feeding ---------------- */

/* Writes one batch of candidates to d. Caller holds L.lock (read) and L.feed_lock. */
static uint64_t feed_dev(l2_dev_t *d, arc_l2_cand_t *c, size_t n)
{
    CAIRN_ASSERT(cairn_mutex_held(&L.feed_lock));
    uint64_t len = L2_LOG_SIZE;
    for (size_t i = 0; i < n; i++) len += CAIRN_P2ROUNDUP((uint64_t)c[i].psize, (uint64_t)L2_ALIGN);
    len = CAIRN_P2ROUNDUP(len, (uint64_t)L2_LOG_SIZE);
    uint64_t ring = d->ring_end - d->ring_start;
    if (len > ring) return 0;
    uint8_t *batch = cairn_zalloc(len);
    pthread_mutex_lock(&d->lock);
    if (!atomic_load(&d->online)) {
        pthread_mutex_unlock(&d->lock);
        free(batch);
        return 0;
    }
    uint64_t at = d->hand;
    if (at + len > d->ring_end) at = d->ring_start; /* wrap */
    /* Whatever the batch overwrites is gone from now on. */
    index_drop_range(d, at, at + len);
    l2_log_hdr_t *lh = (l2_log_hdr_t *)batch;
    *lh = (l2_log_hdr_t){.magic = L2_LOG_MAGIC, .pool_guid = d->guid, .seq = d->newest_seq + 1,
                         .prev_log = d->newest_log, .nents = (uint32_t)n, .len = (uint32_t)len};
    l2_log_ent_t *le = (l2_log_ent_t *)(batch + sizeof(*lh));
    uint64_t pos = L2_LOG_SIZE;
    for (size_t i = 0; i < n; i++) {
        le[i] = (l2_log_ent_t){.offset = c[i].key.offset, .birth = c[i].key.birth,
                               .dev_off = at + pos, .vdev = c[i].key.vdev, .lsize = c[i].lsize,
                               .psize = c[i].psize, .compress = c[i].compress,
                               .checksum = c[i].checksum, .type = c[i].type};
        memcpy(le[i].cksum, c[i].cksum, CAIRN_CHECKSUM_LEN);
        memcpy(batch + pos, c[i].stored->data, c[i].psize);
        pos += CAIRN_P2ROUNDUP((uint64_t)c[i].psize, (uint64_t)L2_ALIGN);
    }
    cairn_checksum(CAIRN_CHECKSUM_XXHASH, batch, L2_LOG_SIZE - CAIRN_CHECKSUM_LEN,
                   batch + L2_LOG_SIZE - CAIRN_CHECKSUM_LEN);
    /* The header may name the batch only once the batch is on the device. */
    int e = cairn_pwrite_all(d->fd, batch, len, at);
    if (!e) e = fdatasync(d->fd) ? -errno : 0;
    uint64_t wrote = 0;
    if (!e) {
        d->hand = at + len;
        d->newest_log = at;
        d->newest_seq++;
        e = header_write(d);
    }
    if (e) {
        L.io_errors++;
        d->errors++;
        dev_drop(d, strerror(-e));
    } else {
        d->writes++;
        d->write_bytes += len;
        for (size_t i = 0; i < n; i++) {
            index_add(d, ent_from_log(&c[i].key, &le[i])); /* le[i] is c[i] as logged */
            wrote += c[i].psize;
        }
    }
    pthread_mutex_unlock(&d->lock);
    free(batch);
    return wrote;
}

static uint64_t feed_pass(void)
{
    uint64_t total = 0;
    pthread_mutex_lock(&L.feed_lock);
    pthread_rwlock_rdlock(&L.lock);
    arc_l2_cand_t *c = cairn_zalloc(L2_LOG_ENTRIES * sizeof(*c));
    for (l2_dev_t *d = L.devs; d; d = d->next) {
        if (!atomic_load(&d->online)) continue;
        uint64_t budget = L.feed_bytes;
        while (budget > 0) {
            size_t n = arc_l2_candidates(d->guid, c, L2_LOG_ENTRIES,
                                         CAIRN_MIN(budget, batch_max(d)));
            if (!n) break;
            uint64_t w = feed_dev(d, c, n), sum = 0;
            for (size_t i = 0; i < n; i++) {
                sum += c[i].psize;
                arc_buf_rele(c[i].stored);
            }
            if (!w) break;
            L.feeds++;
            L.feed_bytes_total += w;
            total += w;
            budget = budget > sum ? budget - sum : 0;
        }
    }
    free(c);
    pthread_rwlock_unlock(&L.lock);
    pthread_mutex_unlock(&L.feed_lock);
    return total;
}

static void *feed_thread(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&L.thr_lock);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)L.feed_ms * 1000000ULL;
        ts.tv_sec += (time_t)(ns / 1000000000ULL);
        ts.tv_nsec = (long)(ns % 1000000000ULL);
        /* arc_l2_set_feed() wakes us to take a new interval at once */
        pthread_cond_timedwait(&L.thr_cv, &L.thr_lock, &ts);
        pthread_mutex_unlock(&L.thr_lock);
        feed_pass();
    }
    return NULL;
}

void arc_l2_set_feed(uint64_t bytes_per_tick, uint32_t interval_ms)
{
    pthread_mutex_lock(&L.thr_lock);
    L.feed_bytes = bytes_per_tick;
    L.feed_ms = interval_ms ? interval_ms : 200;
    pthread_cond_broadcast(&L.thr_cv);
    pthread_mutex_unlock(&L.thr_lock);
}

uint64_t arc_l2_feed_now(void) { return feed_pass(); }

/* ---------------- statistics ---------------- */

size_t arc_l2_dev_stats(uint64_t pool_guid, arc_l2_dev_stat_t *out, size_t cap)
{
    size_t n = 0;
    pthread_rwlock_rdlock(&L.lock);
    for (l2_dev_t *d = L.devs; d; d = d->next) {
        if (d->guid != pool_guid) continue;
        if (n < cap) {
            arc_l2_dev_stat_t *s = &out[n];
            memset(s, 0, sizeof *s);
            cairn_strlcpy(s->path, d->path, sizeof s->path);
            s->online = atomic_load(&d->online);
            pthread_mutex_lock(&d->lock);
            s->size = d->ring_end - d->ring_start;
            s->alloc = d->alloc;
            s->entries = d->count;
            pthread_mutex_unlock(&d->lock);
            s->reads = d->reads;
            s->writes = d->writes;
            s->read_bytes = d->read_bytes;
            s->write_bytes = d->write_bytes;
            s->errors = d->errors;
        }
        n++;
    }
    pthread_rwlock_unlock(&L.lock);
    return n;
}

void l2arc_fill_stats(arc_stats_t *st)
{
    st->l2_hits = L.hits;
    st->l2_misses = L.misses;
    st->l2_feeds = L.feeds;
    st->l2_feed_bytes = L.feed_bytes_total;
    st->l2_cksum_bad = L.cksum_bad;
    st->l2_io_errors = L.io_errors;
    st->l2_devices_dropped = L.dropped;
    st->l2_rebuilt = L.rebuilt;
    st->l2_size = st->l2_entries = 0;
    pthread_rwlock_rdlock(&L.lock);
    for (l2_dev_t *d = L.devs; d; d = d->next) {
        pthread_mutex_lock(&d->lock);
        st->l2_size += d->alloc;
        st->l2_entries += d->count;
        pthread_mutex_unlock(&d->lock);
    }
    pthread_rwlock_unlock(&L.lock);
}

void l2arc_reset_stats(void)
{
    L.hits = L.misses = L.feeds = L.feed_bytes_total = 0;
    L.cksum_bad = L.io_errors = L.dropped = L.rebuilt = 0;
}
