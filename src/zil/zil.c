/*
 * The intent log (API and model in include/cairn/zil.h; the log space and
 * block chains in src/spa/spa_log.c).
 *
 * IN MEMORY. Each log keeps a queue of records (itx) in the order the layer
 * above logged them; each carries the txg of its change. A record whose txg
 * has synced needs no log: it is dropped when met. A ZIL_REC_WRITE logged
 * without data is read back from the DMU when it is written out (the newest
 * bytes of the range, which may be newer than the write itself; the records of
 * those newer changes follow it in the log, so replay ends in the same state).
 *
 * COMMIT (group commit). zil_commit(seq) returns once every record up to seq
 * is durable. One thread at a time is the writer: it takes the whole queue,
 * packs it into the pre-allocated next block of the chain (allocating the
 * successor as it goes; a large batch spans several blocks) and writes the
 * blocks. Then it gives up the writer role and flushes (once per top-level
 * vdev involved) while the next writer already gathers and writes the records
 * that queued meanwhile. Batches are published in the order they were taken
 * (tickets): a batch is durable only once every earlier batch - the way to its
 * blocks along the chain - is flushed too. So N concurrent sync operations
 * cost far fewer than N writes and flushes. Barriers (operations with no
 * record type) make the batch also wait for their txg. A commit that finds
 * nothing queued and nothing in flight is done (its records' txgs synced).
 *
 * CHAIN LIFE. zil_open creates a chain (a header naming a first, unwritten
 * block) in an open txg; the first commit waits for that txg if it has not
 * synced yet - a record in a chain whose header is not durable would not be
 * found after a crash. Written blocks are remembered with the highest txg of
 * their records; when the writer sees that txg synced, it moves the head past
 * them (header set in an open txg U) and frees them with U. If a log write
 * fails, the writer falls back to waiting for the txgs of the batch and starts
 * a new chain (the old one may now have a hole). A flush runs after the writer
 * role is handed on, so when one fails the next batch may already be written
 * behind the hole: that batch too waits for its txgs before it is published
 * (broken_chain), and the writer after it starts the new chain. zil_restart_chains() starts
 * a new chain for every open log of a pool on demand (a log vdev is being
 * removed: the new chains are allocated elsewhere).
 *
 * REPLAY. At import the pool has kept every chain's blocks and, for chains
 * that held written blocks, recorded claim_txg (the last durable txg). The
 * first zil_open walks the chain and hands every record with txg > claim_txg
 * and seq > replay_seq to the replay function in order; each application
 * moves replay_seq in its own transaction. Then it waits for those changes
 * to sync and for the txgs past the newest logged one (so no later change
 * reuses a txg number a replayed record carries), frees the old chain and
 * starts a new one.
 *
 * LARGE WRITES (ZIL_REC_WRITE_BLOCK). The layer wrote the record's block
 * itself (dmu_write_direct, flushed before it logs) and queues a record whose
 * data is that block's pointer. When the record goes into a log block, the
 * pointer also goes into the block's reference table (spa_log_write_block), the
 * part of the log block the pool itself reads at import: a block born in a txg
 * that was lost with a crash is claimed there, so nothing else is allocated
 * over it before replay. Life of such a block: born in the record's txg T;
 * if T syncs, the object tree adopts it (or frees it in T if the record changed
 * again) and the record is never replayed; if T is lost, import claims it,
 * replay reads it (verified against the pointer), writes its bytes into the
 * object and frees it in the transaction that moves the replay marker past the
 * record - exactly once, even across further crashes. Claimed blocks that
 * replay does not reach (it stopped at a malformed record) are freed with the
 * old chain when zil_open starts a new one.
 *
 * WRITES COMMITTED LATER (zil_log_write_later, NFS UNSTABLE + COMMIT). An
 * asynchronous write queues only its range and the DMU's stamps of the records
 * it changed. The writer, before it measures a batch, asks the DMU to write
 * each such record as a block (dmu_write_dirty_blocks: only while the record's
 * txg is still open and the record still has that write's stamp, so the bytes
 * are exactly the write's result, as a copy would be) and the record becomes
 * ZIL_REC_WRITE_BLOCK pointers, one sequence number each (reserved when
 * queued): from there on a LARGE WRITE's life, above. A record that cannot be
 * written so turns the whole itx into a barrier, waited for before the batch is
 * written like any barrier; what was already written stays with the txg. Such
 * a block born in a txg lost with a crash before its log block was written was
 * never durable anywhere: nothing leaks.
 *
 * Log block payload: records back to back (zil_rec_encode), nothing else.
 */
#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/spa.h>
#include <cairn/util.h>
#include <cairn/zil.h>

#include <errno.h>
#include <pthread.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define ZIL_MIN_BLOCK (8 * 1024u)
#define ZIL_WRITE_CHUNK (64 * 1024u)   /* a logged write is split into records of this much */

/* ---------------- records ---------------- */

typedef struct zil_rec_phys {
    uint32_t type;
    uint32_t reclen;       /* whole record, header included, multiple of 8 */
    uint64_t seq;
    uint64_t txg;
    uint64_t obj, off, len;
    uint64_t arg[4];
    uint32_t dlen;
    uint16_t name_len;     /* including the NUL; 0 = none */
    uint16_t name2_len;
    uint64_t reserved;
} zil_rec_phys_t;
_Static_assert(sizeof(zil_rec_phys_t) == ZIL_REC_HDR_SIZE, "record header size");

static size_t name_len(const char *s) { return s ? strlen(s) + 1 : 0; }

size_t zil_rec_encoded_size(const zil_rec_t *rec)
{
    size_t n = sizeof(zil_rec_phys_t) + rec->dlen + name_len(rec->name) + name_len(rec->name2);
    return CAIRN_P2ROUNDUP(n, (size_t)8);
}

size_t zil_rec_encode(const zil_rec_t *rec, void *buf, size_t cap)
{
    size_t n = zil_rec_encoded_size(rec);
    if (n > cap || n > UINT32_MAX || name_len(rec->name) > UINT16_MAX ||
        name_len(rec->name2) > UINT16_MAX)
        return 0;
    uint8_t *p = buf;
    zil_rec_phys_t h = {.type = rec->type, .reclen = (uint32_t)n, .seq = rec->seq, .txg = rec->txg,
                        .obj = rec->obj, .off = rec->off, .len = rec->len, .dlen = rec->dlen,
                        .name_len = (uint16_t)name_len(rec->name),
                        .name2_len = (uint16_t)name_len(rec->name2)};
    memcpy(h.arg, rec->arg, sizeof h.arg);
    memcpy(p, &h, sizeof h);
    size_t o = sizeof h;
    if (rec->dlen) memcpy(p + o, rec->data, rec->dlen);
    o += rec->dlen;
    if (h.name_len) memcpy(p + o, rec->name, h.name_len);
    o += h.name_len;
    if (h.name2_len) memcpy(p + o, rec->name2, h.name2_len);
    o += h.name2_len;
    memset(p + o, 0, n - o);
    return n;
}

int zil_rec_decode(const void *buf, size_t len, zil_rec_t *rec, size_t *used)
{
    if (len < sizeof(zil_rec_phys_t)) return -EINVAL;
    zil_rec_phys_t h;
    memcpy(&h, buf, sizeof h);
    uint64_t need = (uint64_t)sizeof h + h.dlen + h.name_len + h.name2_len;
    if (h.reclen < need || h.reclen > len || h.reclen % 8 || h.type == 0 ||
        h.type > ZIL_REC_TYPE_MAX)
        return -EINVAL;
    const uint8_t *p = buf;
    memset(rec, 0, sizeof *rec);
    rec->type = h.type;
    rec->seq = h.seq;
    rec->txg = h.txg;
    rec->obj = h.obj;
    rec->off = h.off;
    rec->len = h.len;
    memcpy(rec->arg, h.arg, sizeof h.arg);
    size_t o = sizeof h;
    rec->data = h.dlen ? p + o : NULL;
    rec->dlen = h.dlen;
    o += h.dlen;
    if (h.name_len) {
        if (p[o + h.name_len - 1] != 0) return -EINVAL;
        rec->name = (const char *)p + o;
    }
    o += h.name_len;
    if (h.name2_len) {
        if (p[o + h.name2_len - 1] != 0) return -EINVAL;
        rec->name2 = (const char *)p + o;
    }
    *used = h.reclen;
    return 0;
}

/* ---------------- the log ---------------- */

typedef struct itx {
    struct itx *next;
    zil_rec_t rec;          /* data/name point into the same allocation (or NULL) */
    bool barrier;
    bool read_back;         /* ZIL_REC_WRITE whose data is read from the DMU */
    /* zil_log_write_later: records later_first.. of later_rs bytes, their
     * stamps, and once the commit wrote them (converted), their blocks; the
     * record's seq is the last of later_n numbers, one per block record */
    bool later, converted;
    uint32_t later_rs;
    uint64_t later_first;
    size_t later_n;
    uint64_t *stamps;
    cairn_blkptr_t *bps;
} itx_t;

#define ZIL_REFS_MAX (SPA_LOG_BLOCK_MAX / (ZIL_REC_HDR_SIZE + sizeof(cairn_blkptr_t)) + 1)

/* Committers asleep until a publication covers their record (zil_commit)
 * all sleep on one word of the log, pub_word (a futex), each with a bit for
 * the ticket whose publication covers its record (TICKET_BIT): the next
 * ticket for a record still queued (the next writer takes the whole queue),
 * the batch in flight that took it otherwise. A publication wakes
 * the bit of its ticket with one system call, however many committers its
 * batch carried; one committer of the next ticket is woken to look again
 * when records wait with nobody to write them (it becomes the writer); every
 * bit after an error or a chain restart. Every such event bumps pub_word
 * under the log's lock, so a committer between dropping the lock and
 * sleeping does not sleep through it. A woken committer whose record is
 * durable returns without touching the lock (committed_seq and commit_err are
 * read atomically); any other looks again under the lock.
 * Why one word: the earlier semaphore per committer cost a system call and a
 * wake-up of its own for each committer of a batch, the largest share of the
 * commit path's CPU at 32 sync writes in flight (half of it in the
 * scheduler's wake-up path, with interrupts off while it signals the other
 * vCPU); one call for the whole batch pays that once. Before the semaphores,
 * a condition variable of the lock woke every committer twice. */
typedef struct wakeups {
    uint32_t all;   /* ticket bits whose every sleeper wakes */
    uint32_t one;   /* ticket bits of which one sleeper wakes (to write) */
} wakeups_t;

#define ZIL_TICKET_SLOTS 32u /* the bits of a futex bitset */
#define TICKET_BIT(t) (1u << ((t) % ZIL_TICKET_SLOTS))

#define ZIL_RECENT 8        /* batches whose sizes size the next pre-allocated block */
#define ZIL_SPARE_BLOCKS 4  /* block buffers a log keeps (a batch of 4K-64K writes needs one or two) */

typedef struct lwb {       /* a log block written and not yet freed */
    cairn_dva_t dva;
    uint64_t seq;
    uint64_t max_txg;
} lwb_t;

struct zilog {
    objset_t *os;
    spa_t *spa;
    uint64_t os_id;
    int refs;                       /* under registry lock */
    zilog_t *reg_next;
    bool inert;                     /* read-only: nothing is logged */
    _Atomic bool txg_only;

    pthread_mutex_t lock;
    pthread_cond_t done_cv;         /* a batch was published (publication order, restarts) */
    _Atomic uint32_t pub_word;      /* futex of the committers asleep (bumped per wake event) */
    _Atomic uint32_t sleepers;      /* committers asleep on it, or on their way */
    /* [ticket % ZIL_TICKET_SLOTS]: the last record of that batch; the one of
     * the latest ticket is the last record a writer has taken */
    uint64_t ticket_last_seq[ZIL_TICKET_SLOTS];
    pthread_cond_t writer_cv;       /* the writer role is free (for writer_waiting) */
    bool writer_waiting;            /* a thread waits on writer_cv to be the next writer */
    itx_t *head, *tail;
    uint64_t next_seq;              /* next record's sequence number */
    _Atomic uint64_t committed_seq; /* every record up to here is durable */
    bool writer;                    /* a thread is writing a batch to the log */
    uint64_t tickets, published;    /* batches started / published in order */
    _Atomic int commit_err;         /* sticky: a commit failed even by txg (pool failed) */
    /* The chain (its guid) a log flush failed on, 0: none. Its blocks may be
     * lost and with them the way to every later block of that chain, so the
     * next writer restarts the chain, and a batch written on it after the failed
     * one cannot count on its own flush (commit). Under lock. */
    uint64_t broken_chain;
    uint64_t published_blk_seq;     /* blocks up to here belong to published batches */
    uint8_t *chunk_buf;             /* the writer's buffers */
    spa_log_ref_t *refs_buf;
    void *spare_blocks[ZIL_SPARE_BLOCKS]; /* log block buffers kept for the next batches */
    size_t nspare;

    /* chain state: the writer only (or open/close) */
    spa_log_header_t hdr;           /* as last set */
    uint64_t chain_ready_txg;       /* the header naming this chain is durable after it */
    cairn_dva_t next_dva;           /* pre-allocated, unwritten */
    uint64_t next_blk_seq;
    lwb_t *lwbs;
    size_t nlwbs, caplwbs;
    uint64_t recent_bytes[ZIL_RECENT];
    unsigned recent_next;
    uint64_t cleaned_txg;

    /* replay */
    bool replaying;
    uint64_t replay_cur_seq;
    uint64_t replay_applied_seq;    /* the last record replay applied */

    _Atomic uint64_t st_commits, st_log_writes, st_flushes, st_flushes_issued, st_blocks, st_records, st_txg_waits,
        st_replayed, st_block_records, st_replayed_blocks, st_region_full, st_later_blocks,
        st_later_waits;
};

static pthread_mutex_t zil_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static zilog_t *zil_registry;

bool zil_replaying(const zilog_t *zl) { return zl && zl->replaying; }

void zil_set_txg_only(zilog_t *zl, bool txg_only)
{
    if (zl) atomic_store(&zl->txg_only, txg_only);
}

void zil_get_stats(zilog_t *zl, zil_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!zl) return;
    out->commits = atomic_load(&zl->st_commits);
    out->log_writes = atomic_load(&zl->st_log_writes);
    out->flushes = atomic_load(&zl->st_flushes);
    out->flushes_issued = atomic_load(&zl->st_flushes_issued);
    out->blocks = atomic_load(&zl->st_blocks);
    out->records = atomic_load(&zl->st_records);
    out->txg_waits = atomic_load(&zl->st_txg_waits);
    out->replayed = atomic_load(&zl->st_replayed);
    out->block_records = atomic_load(&zl->st_block_records);
    out->region_full = atomic_load(&zl->st_region_full);
    out->later_blocks = atomic_load(&zl->st_later_blocks);
    out->later_waits = atomic_load(&zl->st_later_waits);
}

size_t zil_stats_list(zil_log_stats_t *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&zil_registry_lock);
    for (zilog_t *z = zil_registry; z; z = z->reg_next) {
        if (z->inert) continue;
        if (n < max) {
            dmu_objset_label(z->os, out[n].dataset, sizeof out[n].dataset);
            zil_get_stats(z, &out[n].st);
        }
        n++;
    }
    pthread_mutex_unlock(&zil_registry_lock);
    return n;
}

bool zil_write_indirect(zilog_t *zl, bool logbias_throughput, uint64_t len)
{
    if (!zl || zl->inert || zl->replaying || atomic_load(&zl->txg_only)) return false;
    if (logbias_throughput) return true;
    return len >= ZIL_INDIRECT_MIN && !spa_has_log_vdevs(zl->spa);
}

static bool is_block_rec(const zil_rec_t *rec)
{
    return rec->type == ZIL_REC_WRITE_BLOCK && rec->dlen == sizeof(cairn_blkptr_t);
}

static void lwb_push(zilog_t *zl, const cairn_dva_t *dva, uint64_t seq, uint64_t max_txg)
{
    if (zl->nlwbs == zl->caplwbs) {
        zl->caplwbs = zl->caplwbs ? zl->caplwbs * 2 : 32;
        zl->lwbs = cairn_realloc(zl->lwbs, zl->caplwbs * sizeof *zl->lwbs);
    }
    zl->lwbs[zl->nlwbs++] = (lwb_t){.dva = *dva, .seq = seq, .max_txg = max_txg};
}

/* The old chain's blocks (written ones, the pre-allocated one and `extra`) and
 * the blocks its records still hold (`extra_bps`) freed with txg; the header
 * cleared for the caller to set. */
static void chain_free_old(zilog_t *zl, uint64_t txg, const cairn_dva_t *extra, size_t nextra,
                           const cairn_blkptr_t *extra_bps, size_t nextra_bps)
{
    for (size_t i = 0; i < nextra_bps; i++) spa_block_free_at_sync(zl->spa, txg, &extra_bps[i]);
    for (size_t i = 0; i < zl->nlwbs; i++) spa_log_free(zl->spa, &zl->lwbs[i].dva, txg);
    zl->nlwbs = 0;
    if (zl->next_dva.asize) spa_log_free(zl->spa, &zl->next_dva, txg);
    for (size_t i = 0; i < nextra; i++) spa_log_free(zl->spa, &extra[i], txg);
    memset(&zl->next_dva, 0, sizeof zl->next_dva);
    memset(&zl->hdr, 0, sizeof zl->hdr);
}

/* Ends the chain: an empty header and the chain's blocks freed in one txg. */
static void chain_restart_freeing_empty(zilog_t *zl, const cairn_dva_t *extra, size_t nextra,
                                        const cairn_blkptr_t *extra_bps, size_t nextra_bps)
{
    uint64_t txg = spa_tx_hold_nowait(zl->spa);
    chain_free_old(zl, txg, extra, nextra, extra_bps, nextra_bps);
    spa_log_header_set(zl->spa, zl->os_id, &zl->hdr, txg);
    zl->chain_ready_txg = txg;
    spa_tx_rele(zl->spa, txg);
}

/* Starts a new chain (header set in an open txg); the old chain's blocks
 * (written ones, the pre-allocated one and `extra`) and the blocks its records
 * still hold (`extra_bps`) are freed with that txg. */
static int chain_restart_freeing(zilog_t *zl, const cairn_dva_t *extra, size_t nextra,
                                 const cairn_blkptr_t *extra_bps, size_t nextra_bps)
{
    cairn_dva_t first;
    int err = spa_log_alloc(zl->spa, ZIL_MIN_BLOCK, &first);
    if (err == -ENOSPC && zl->hdr.chain_guid) {
        /* The region is full, maybe of this very chain: drop the chain first
         * (no header in that txg, so no durable header leads to blocks that
         * may be reused once it syncs), then allocate again - spa_log_alloc
         * waits for the sync that gives those blocks back. */
        chain_restart_freeing_empty(zl, extra, nextra, extra_bps, nextra_bps);
        extra = NULL;
        nextra = nextra_bps = 0;
        err = spa_log_alloc(zl->spa, ZIL_MIN_BLOCK, &first);
    }
    uint64_t txg = spa_tx_hold_nowait(zl->spa);
    chain_free_old(zl, txg, extra, nextra, extra_bps, nextra_bps);
    if (!err) {
        zl->hdr.chain_guid = cairn_random_guid();
        zl->hdr.head = first;
        zl->hdr.head_seq = 1;
        zl->next_dva = first;
        zl->next_blk_seq = 1;
    }
    spa_log_header_set(zl->spa, zl->os_id, &zl->hdr, txg);
    zl->chain_ready_txg = txg;
    spa_tx_rele(zl->spa, txg);
    return err;
}

static int chain_restart(zilog_t *zl, const cairn_dva_t *extra, size_t nextra)
{
    return chain_restart_freeing(zl, extra, nextra, NULL, 0);
}

/* Frees the blocks whose records are all in synced txgs (writer only). */
static void chain_clean(zilog_t *zl, uint64_t synced)
{
    if (synced <= zl->cleaned_txg || !zl->hdr.chain_guid) return;
    zl->cleaned_txg = synced;
    /* Only blocks of published batches: a block still being written must not be
     * freed (and reused) under its write. */
    pthread_mutex_lock(&zl->lock);
    uint64_t published = zl->published_blk_seq;
    pthread_mutex_unlock(&zl->lock);
    size_t k = 0;
    while (k < zl->nlwbs && zl->lwbs[k].max_txg <= synced && zl->lwbs[k].seq <= published) k++;
    if (!k) return;
    uint64_t txg = spa_tx_hold_nowait(zl->spa);
    for (size_t i = 0; i < k; i++) spa_log_free(zl->spa, &zl->lwbs[i].dva, txg);
    memmove(zl->lwbs, zl->lwbs + k, (zl->nlwbs - k) * sizeof *zl->lwbs);
    zl->nlwbs -= k;
    if (zl->nlwbs) {
        zl->hdr.head = zl->lwbs[0].dva;
        zl->hdr.head_seq = zl->lwbs[0].seq;
    } else {
        zl->hdr.head = zl->next_dva;
        zl->hdr.head_seq = zl->next_blk_seq;
    }
    spa_log_header_set(zl->spa, zl->os_id, &zl->hdr, txg);
    spa_tx_rele(zl->spa, txg);
}

static void itx_free_list(itx_t *it)
{
    while (it) {
        itx_t *n = it->next;
        free(it);
        it = n;
    }
}

/* A packed block waiting to be written: frame room, payload, references. */
typedef struct pend_blk {
    cairn_dva_t dva, next;
    uint64_t seq;
    uint8_t *block;        /* from block_get */
    uint32_t len;          /* payload bytes */
    uint32_t nrefs;
} pend_blk_t;

/* Log block buffers, the writer's only. Records are packed straight into the
 * buffer that is written (the frame goes in front in place), and buffers are
 * kept for the next batch: two copies of each block and two allocations fewer
 * in the writer's phase, which every queued committer waits for (18 of its 197
 * us per batch at 32 sync writes in flight). */
static uint8_t *block_get(zilog_t *zl)
{
    return zl->nspare ? zl->spare_blocks[--zl->nspare] : spa_log_block_alloc();
}

static void block_put(zilog_t *zl, uint8_t *b)
{
    if (zl->nspare < ZIL_SPARE_BLOCKS) zl->spare_blocks[zl->nspare++] = b;
    else free(b);
}

#define ZIL_PEND_MAX 32 /* packed blocks kept before the writer writes them itself */

/* The block being filled by the writer. */
typedef struct fill {
    uint8_t *block;        /* the block being filled (block_get) */
    uint8_t *buf;          /* its payload: block + SPA_LOG_BLOCK_FRAME */
    uint32_t used, cap;
    spa_log_ref_t *refs;   /* the block's reference table, ZIL_REFS_MAX entries */
    uint32_t nrefs;
    uint64_t max_txg;
    cairn_dva_t written[64];
    size_t nwritten;
    pend_blk_t pend[ZIL_PEND_MAX];
    size_t npend;
} fill_t;

/* Writes the packed blocks; frees their buffers. */
static int pend_write(zilog_t *zl, pend_blk_t *pend, size_t *npend)
{
    int err = 0;
    for (size_t i = 0; i < *npend; i++) {
        if (!err)
            err = spa_log_write_block(zl->spa, &pend[i].dva, zl->hdr.chain_guid, pend[i].seq,
                                      &pend[i].next, pend[i].block, pend[i].len, pend[i].nrefs);
        block_put(zl, pend[i].block);
    }
    *npend = 0;
    return err;
}

static uint32_t clamp_block(uint64_t want)
{
    if (want < ZIL_MIN_BLOCK) return ZIL_MIN_BLOCK;
    if (want > SPA_LOG_BLOCK_MAX) return SPA_LOG_BLOCK_MAX;
    return (uint32_t)want;
}

/* Writes the current block (naming a freshly allocated successor sized for
 * `remaining` more bytes) and starts filling the successor. */
static int fill_flush(zilog_t *zl, fill_t *f, uint64_t remaining, bool force)
{
    if (!f->used && !force) return 0;
    cairn_dva_t next;
    int err = spa_log_alloc(zl->spa, clamp_block(remaining + SPA_LOG_BLOCK_FRAME), &next);
    if (err) return err;
    if (f->npend == ZIL_PEND_MAX) {
        err = pend_write(zl, f->pend, &f->npend);
        if (err) {
            spa_log_free(zl->spa, &next, 0);
            return err;
        }
    }
    pend_blk_t *pb = &f->pend[f->npend++];
    pb->dva = zl->next_dva;
    pb->next = next;
    pb->seq = zl->next_blk_seq;
    pb->len = f->used;
    pb->nrefs = f->nrefs;
    /* The reference table follows the payload (fill_add kept room for it). */
    if (f->nrefs) memcpy(f->buf + f->used, f->refs, f->nrefs * sizeof *f->refs);
    pb->block = f->block;
    f->block = block_get(zl);
    f->buf = f->block + SPA_LOG_BLOCK_FRAME;
    f->nrefs = 0;
    lwb_push(zl, &zl->next_dva, zl->next_blk_seq, f->max_txg);
    if (f->nwritten < CAIRN_ARRAY_SIZE(f->written)) f->written[f->nwritten++] = zl->next_dva;
    atomic_fetch_add(&zl->st_blocks, 1);
    zl->next_dva = next;
    zl->next_blk_seq++;
    f->used = 0;
    f->max_txg = 0;
    f->cap = spa_log_capacity(zl->spa, &next);
    return 0;
}

static int fill_add(zilog_t *zl, fill_t *f, const zil_rec_t *rec, uint64_t remaining)
{
    size_t n = zil_rec_encoded_size(rec);
    bool ref = is_block_rec(rec);
    /* The reference table follows the payload in the same block. */
    size_t need = n + (ref ? sizeof(spa_log_ref_t) : 0);
    if (f->used + f->nrefs * sizeof(spa_log_ref_t) + need > f->cap) {
        int err = fill_flush(zl, f, remaining, false);
        if (err) return err;
        /* Too big for this (empty) block: pass it on, empty, to a bigger successor. */
        if (need > f->cap) err = fill_flush(zl, f, need, true);
        if (err) return err;
        if (need > f->cap) return -E2BIG;
    }
    zil_rec_encode(rec, f->buf + f->used, f->cap - f->used);
    f->used += (uint32_t)n;
    if (ref) {
        spa_log_ref_t *r = &f->refs[f->nrefs++];
        memcpy(&r->bp, rec->data, sizeof r->bp);
        r->seq = rec->seq;
        atomic_fetch_add(&zl->st_block_records, 1);
    }
    if (rec->txg > f->max_txg) f->max_txg = rec->txg;
    atomic_fetch_add(&zl->st_records, 1);
    return 0;
}

/* What a writer did with its batch, for the flush phase. */
typedef struct batch_plan {
    uint64_t ticket;             /* writers publish in ticket order */
    uint64_t last_seq;           /* the batch covers records up to here */
    uint64_t max_txg, barrier_txg;
    cairn_dva_t written[64];
    size_t nwritten;
    uint64_t last_blk_seq;
    bool wait_txg;               /* no log write: wait for max_txg instead */
    uint64_t chain_guid;         /* the chain its blocks were written on, 0: none */
} batch_plan_t;

/* Waits until every batch before ticket is published (no block write of the
 * chain is in flight any more): before the chain is restarted under them. */
static void wait_prior(zilog_t *zl, uint64_t ticket)
{
    pthread_mutex_lock(&zl->lock);
    while (zl->published + 1 < ticket) pthread_cond_wait(&zl->done_cv, &zl->lock);
    pthread_mutex_unlock(&zl->lock);
}

static bool later_pending(const itx_t *it, uint64_t synced)
{
    return it->later && !it->converted && !it->barrier && it->rec.txg > synced;
}

/* Whether b continues a's records (one DMU call writes both: with NFS's
 * sequential 1 MiB writes, one allocation and a few large I/Os per leaf for
 * the whole batch instead of one round per write). */
static bool later_follows(const itx_t *a, const itx_t *b)
{
    return b->rec.obj == a->rec.obj && b->rec.txg == a->rec.txg && b->later_rs == a->later_rs &&
           b->later_first == a->later_first + a->later_n;
}

/* The batch's asynchronous writes (zil_log_write_later) whose txg is still
 * open: each record is written as a block, which its txg adopts
 * (dmu_write_dirty_blocks), and logged as a pointer to it. One that cannot be
 * (its txg is closing, a record changed since the write, the log is off...)
 * becomes a barrier: the batch waits for its txg, which writes the data.
 * Records written before such a failure stay the txg's blocks. */
static void later_convert(zilog_t *zl, itx_t *batch, uint64_t synced)
{
    bool txg_only = atomic_load(&zl->txg_only);
    for (itx_t *it = batch; it; it = it->next) {
        if (!later_pending(it, synced)) continue;
        /* The run of writes continuing this one, in batch order (the pending
         * writes between it and its last follower all follow). */
        size_t n = 0, nitx = 0, cap = 8;
        itx_t **run = cairn_zalloc(cap * sizeof *run);
        for (itx_t *o = it; o; o = o->next) {
            if (!later_pending(o, synced)) continue;
            if (nitx && !later_follows(run[nitx - 1], o)) break;
            if (nitx == cap) run = cairn_realloc(run, (cap *= 2) * sizeof *run);
            run[nitx++] = o;
            n += o->later_n;
        }
        uint64_t *stamps = cairn_zalloc(n * sizeof *stamps);
        cairn_blkptr_t *bps = cairn_zalloc(n * sizeof *bps);
        for (size_t j = 0, k = 0; j < nitx; k += run[j++]->later_n)
            memcpy(stamps + k, run[j]->stamps, run[j]->later_n * sizeof *stamps);
        bool ok = !txg_only && dmu_write_dirty_blocks(zl->os, it->rec.obj, it->later_first, n,
                                                      it->rec.txg, stamps, bps) == 0;
        for (size_t j = 0, k = 0; j < nitx; k += run[j++]->later_n) {
            if (ok) memcpy(run[j]->bps, bps + k, run[j]->later_n * sizeof *bps);
            run[j]->converted = ok;
            run[j]->barrier = !ok;
        }
        if (ok) atomic_fetch_add(&zl->st_later_blocks, n);
        else atomic_fetch_add(&zl->st_later_waits, nitx);
        free(run);
        free(stamps);
        free(bps);
    }
}

/* What the batch asks of the log: the records not yet covered by a synced txg
 * (*synced, updated), their encoded size (*bytes), whether any is to be logged
 * (*any: barriers are not), and the txgs they need (p->max_txg, p->barrier_txg).
 * A barrier stands for a change the log does not describe (a create, a rename,
 * a truncate...), and records logged after it may depend on it (a write's
 * attributes carry the link count a link set). Its txg must be on disk before
 * any log block that replay could apply on top of it, so it is waited for here,
 * before writing, not after the flush; then the batch is measured again. */
static int batch_measure(zilog_t *zl, itx_t *batch, batch_plan_t *p, uint64_t *synced,
                         uint64_t *bytes, bool *any)
{
    *synced = spa_last_synced_txg(zl->spa);
    later_convert(zl, batch, *synced);
    for (int pass = 0; pass < 2; pass++) {
        *bytes = 0;
        *any = false;
        p->max_txg = p->barrier_txg = 0;
        for (itx_t *it = batch; it; it = it->next) {
            if (it->rec.txg <= *synced) continue;
            if (it->rec.txg > p->max_txg) p->max_txg = it->rec.txg;
            if (it->barrier) {
                if (it->rec.txg > p->barrier_txg) p->barrier_txg = it->rec.txg;
                continue;
            }
            *any = true;
            if (it->later)
                *bytes += it->later_n * (CAIRN_P2ROUNDUP(ZIL_REC_HDR_SIZE + sizeof(cairn_blkptr_t),
                                                         (size_t)8) + sizeof(spa_log_ref_t));
            else
                *bytes += zil_rec_encoded_size(&it->rec) + (it->read_back ? it->rec.len : 0) +
                          (is_block_rec(&it->rec) ? sizeof(spa_log_ref_t) : 0);
        }
        if (pass == 0 && p->barrier_txg && *any && !atomic_load(&zl->txg_only)) {
            atomic_fetch_add(&zl->st_txg_waits, 1);
            int err = spa_txg_wait_synced(zl->spa, p->barrier_txg);
            if (err) return err;
            *synced = spa_last_synced_txg(zl->spa);
            continue;
        }
        break;
    }
    return 0;
}

/* A chain to write the batch on: restarted after a failed flush, or, when the
 * log is off (txg_only) or the region had no room for a chain, none: then
 * *txg_instead and the batch waits for its txg (p->wait_txg). Blocks of txgs
 * already synced leave the chain (chain_clean). */
static int chain_prepare(zilog_t *zl, batch_plan_t *p, uint64_t synced, bool *txg_instead)
{
    pthread_mutex_lock(&zl->lock);
    bool broken = zl->hdr.chain_guid && zl->broken_chain == zl->hdr.chain_guid;
    pthread_mutex_unlock(&zl->lock);
    if (broken) {
        /* A flush failed under an earlier batch: its blocks may be lost, and with
         * them the way to everything after. Start over once the txgs cover it. */
        wait_prior(zl, p->ticket);
        int err = spa_txg_wait_synced(zl->spa, 0);
        if (err) return err;
        chain_restart(zl, NULL, 0);
    }
    if (atomic_load(&zl->txg_only)) {
        p->wait_txg = *txg_instead = true;
        return 0;
    }
    if (!zl->hdr.chain_guid) {
        /* No chain (the region had no room when the last one was started):
         * this batch waits for its txg, which gives log blocks back, and the
         * next finds a chain again. */
        p->wait_txg = *txg_instead = true;
        atomic_fetch_add(&zl->st_txg_waits, 1);
        wait_prior(zl, p->ticket);
        int err = spa_txg_wait_synced(zl->spa, p->max_txg);
        if (!err) chain_restart(zl, NULL, 0);
        return err;
    }
    chain_clean(zl, synced);
    return 0;
}

/* Blocks the batch's records point at are written but maybe not durable: one
 * flush of their vdevs for the whole batch, before any log block names them
 * (a log device's flush does not cover the main disks). */
static int flush_referenced_blocks(zilog_t *zl, itx_t *batch, uint64_t synced)
{
    size_t nbps = 0;
    for (itx_t *it = batch; it; it = it->next) {
        if (it->rec.txg <= synced) continue;
        nbps += is_block_rec(&it->rec) ? 1 : it->converted ? it->later_n : 0;
    }
    if (!nbps) return 0;
    cairn_blkptr_t *bps = cairn_zalloc(nbps * sizeof *bps);
    size_t k = 0;
    for (itx_t *it = batch; it; it = it->next) {
        if (it->rec.txg <= synced) continue;
        if (is_block_rec(&it->rec)) memcpy(&bps[k++], it->rec.data, sizeof *bps);
        else if (it->converted)
            for (size_t i = 0; i < it->later_n; i++) bps[k++] = it->bps[i];
    }
    int err = spa_blocks_flush(zl->spa, bps, k);
    free(bps);
    return err;
}

/* A write logged with its data: the current bytes of the range, read back
 * in chunks, each a record of its own. */
static int fill_add_write(zilog_t *zl, fill_t *f, const itx_t *it, uint64_t *remaining)
{
    /* Kept across batches (one writer at a time): no allocation per commit. */
    if (!zl->chunk_buf) zl->chunk_buf = cairn_zalloc(ZIL_WRITE_CHUNK);
    uint8_t *chunk = zl->chunk_buf;
    for (uint64_t done = 0; done < it->rec.len;) {
        uint32_t n = (uint32_t)CAIRN_MIN((uint64_t)ZIL_WRITE_CHUNK, it->rec.len - done);
        int err = dmu_read(zl->os, it->rec.obj, it->rec.off + done, n, chunk);
        if (err) return err;
        zil_rec_t r = it->rec;
        r.off += done;
        r.len = n;
        r.data = chunk;
        r.dlen = n;
        err = fill_add(zl, f, &r, *remaining);
        if (err) return err;
        *remaining -= CAIRN_MIN(*remaining, (uint64_t)n + ZIL_REC_HDR_SIZE);
        done += n;
    }
    return 0;
}

/* A converted asynchronous write: one pointer record per block, each with a
 * sequence number of its own (replay marks progress by number, and each
 * record's replay frees its block). */
static int fill_add_later(zilog_t *zl, fill_t *f, const itx_t *it, uint64_t *remaining)
{
    for (size_t i = 0; i < it->later_n; i++) {
        zil_rec_t r = {.type = ZIL_REC_WRITE_BLOCK, .seq = it->rec.seq - (it->later_n - 1) + i,
                       .txg = it->bps[i].birth_txg, .obj = it->rec.obj,
                       .off = (it->later_first + i) * it->later_rs, .len = it->later_rs,
                       .data = &it->bps[i], .dlen = sizeof it->bps[i]};
        int err = fill_add(zl, f, &r, *remaining);
        if (err) return err;
        *remaining -= CAIRN_MIN(*remaining, zil_rec_encoded_size(&r) + sizeof(spa_log_ref_t));
    }
    return 0;
}

/* Packs the batch's records into chained blocks (those full are written as
 * they fill, fill_flush), then the last block with its successor allocated. */
static int fill_batch(zilog_t *zl, fill_t *f, itx_t *batch, uint64_t synced, uint64_t bytes)
{
    uint64_t remaining = bytes;
    for (itx_t *it = batch; it; it = it->next) {
        if (it->rec.txg <= synced || it->barrier) continue;
        int err;
        if (it->read_back) {
            err = fill_add_write(zl, f, it, &remaining);
        } else if (it->converted) {
            err = fill_add_later(zl, f, it, &remaining);
        } else {
            err = fill_add(zl, f, &it->rec, remaining);
            remaining -= CAIRN_MIN(remaining, zil_rec_encoded_size(&it->rec));
        }
        if (err) return err;
    }
    /* The successor is allocated now, before the next batch is known: sized
     * for the largest of the recent batches. Sized for this one alone, every
     * batch larger than its predecessor spilled into a second block, written
     * after the first in the writer's phase: 1.45 blocks per batch at 32 sync
     * writes in flight, 1.09 sized this way. */
    zl->recent_bytes[zl->recent_next++ % ZIL_RECENT] = bytes;
    uint64_t predict = 0;
    for (int i = 0; i < ZIL_RECENT; i++) predict = CAIRN_MAX(predict, zl->recent_bytes[i]);
    return fill_flush(zl, f, predict, false);
}

/* A batch the log could not take waits for its txg instead, and the chain
 * starts over once that has synced. */
static int batch_to_txg(zilog_t *zl, batch_plan_t *p, int err)
{
    /* A full region is no failure: the pool has the room, in the txg. */
    if (err == -ENOSPC)
        log_debug("zil", "object set %llu: intent-log region full; this commit waits "
                  "for the txg", (unsigned long long)zl->os_id);
    else
        log_warn("zil", "object set %llu: log write failed (%s); waiting for the txg "
                 "instead", (unsigned long long)zl->os_id, strerror(-err));
    atomic_fetch_add(&zl->st_region_full, err == -ENOSPC);
    atomic_fetch_add(&zl->st_txg_waits, 1);
    wait_prior(zl, p->ticket);
    err = spa_txg_wait_synced(zl->spa, 0);
    if (!err) chain_restart(zl, NULL, 0);
    p->nwritten = 0;
    p->barrier_txg = 0;
    return err;
}

/* Phase 1, the writer (one at a time, no lock held): packs the batch into
 * chained log blocks and writes them. Everything that touches the chain happens
 * here. Slow paths (no chain, a failed write) wait for txgs right here. */
static int write_batch(zilog_t *zl, itx_t *batch, batch_plan_t *p)
{
    uint64_t synced, bytes;
    bool any, txg_instead = false;
    int err = batch_measure(zl, batch, p, &synced, &bytes, &any);
    if (err || !p->max_txg) return err;   /* !max_txg: everything already synced */
    atomic_fetch_add(&zl->st_commits, 1);
    err = chain_prepare(zl, p, synced, &txg_instead);
    if (err || txg_instead || !any) return err;
    if (zl->chain_ready_txg > spa_last_synced_txg(zl->spa)) {
        err = spa_txg_wait_synced(zl->spa, zl->chain_ready_txg);
        if (err) return err;
    }
    err = flush_referenced_blocks(zl, batch, synced);
    fill_t f = {.cap = spa_log_capacity(zl->spa, &zl->next_dva), .block = block_get(zl)};
    f.buf = f.block + SPA_LOG_BLOCK_FRAME;
    /* Kept across batches (one writer at a time): no allocation per commit. */
    if (!zl->refs_buf) zl->refs_buf = cairn_zalloc(ZIL_REFS_MAX * sizeof *zl->refs_buf);
    f.refs = zl->refs_buf;
    if (!err) err = fill_batch(zl, &f, batch, synced, bytes);
    /* The writes stay in the writer's phase: while they run, the next batch
     * gathers (measured: handing them to phase 2 makes batches, and so flushes,
     * smaller and slower). Only the flush overlaps the next writer. */
    if (f.npend) {
        int e = pend_write(zl, f.pend, &f.npend);
        if (!err) err = e;
    }
    block_put(zl, f.block);
    memcpy(p->written, f.written, f.nwritten * sizeof *f.written);
    p->nwritten = f.nwritten;
    p->last_blk_seq = zl->next_blk_seq - 1;
    if (err) return batch_to_txg(zl, p, err);
    if (p->nwritten) atomic_fetch_add(&zl->st_log_writes, 1);
    p->chain_guid = zl->hdr.chain_guid;
    return 0;
}

/* Phase 2, concurrently with the next writer's phase 1: the flush of the
 * batch's blocks (or a txg wait). Publishing in ticket order makes this safe:
 * a batch counts as durable only once every earlier batch's blocks (the way to
 * its own) are flushed too. */
static int flush_batch(zilog_t *zl, batch_plan_t *p)
{
    int err = 0;
    if (p->nwritten) {
        bool issued;
        atomic_fetch_add(&zl->st_flushes, 1);
        err = spa_log_flush(zl->spa, p->written, p->nwritten, &issued);
        if (issued) atomic_fetch_add(&zl->st_flushes_issued, 1);
        if (err) {
            log_warn("zil", "object set %llu: log flush failed (%s); waiting for the txg instead",
                     (unsigned long long)zl->os_id, strerror(-err));
            pthread_mutex_lock(&zl->lock);
            zl->broken_chain = p->chain_guid;
            pthread_mutex_unlock(&zl->lock);
            p->wait_txg = true;
        }
    }
    if (p->wait_txg && p->max_txg) {
        atomic_fetch_add(&zl->st_txg_waits, 1);
        return spa_txg_wait_synced(zl->spa, p->max_txg);
    }
    if (p->barrier_txg) {
        atomic_fetch_add(&zl->st_txg_waits, 1);
        err = spa_txg_wait_synced(zl->spa, p->barrier_txg);
    }
    return err;
}

/* Records queued with nobody to write them and nobody waiting for the role:
 * one committer of the next ticket is to look again (and write). */
static void want_writer_locked(zilog_t *zl, wakeups_t *w)
{
    CAIRN_ASSERT(cairn_mutex_held(&zl->lock));
    if (!zl->writer && zl->head && !zl->writer_waiting) w->one |= TICKET_BIT(zl->tickets + 1);
}

/* Makes the wake-ups in *w count: a committer about to sleep with the old
 * pub_word finds it changed and looks again. Under the lock. */
static void wakeups_arm_locked(zilog_t *zl, const wakeups_t *w)
{
    CAIRN_ASSERT(cairn_mutex_held(&zl->lock));
    if (w->all | w->one) atomic_fetch_add(&zl->pub_word, 1);
}

static void futex_wake_bits(_Atomic uint32_t *word, int n, uint32_t bits)
{
    syscall(SYS_futex, word, FUTEX_WAKE_BITSET_PRIVATE, n, NULL, NULL, bits);
}

/* Returns when woken, at once if *word no longer holds seen (EAGAIN), or on a
 * signal: the caller checks again in every case. */
static void futex_wait_bits(_Atomic uint32_t *word, uint32_t seen, uint32_t bits)
{
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, seen, NULL, NULL, bits);
}

/* Sends what wakeups_arm_locked armed, without the lock. */
static void wakeups_send(zilog_t *zl, const wakeups_t *w)
{
    if (!atomic_load(&zl->sleepers)) return;
    if (w->all) futex_wake_bits(&zl->pub_word, INT32_MAX, w->all);
    if (w->one & ~w->all) futex_wake_bits(&zl->pub_word, 1, w->one & ~w->all);
}

static atomic_bool hold_woken_writer;

void zil_test_hold_woken_writer(bool on) { atomic_store(&hold_woken_writer, on); }

/* Sleeps until a publication may cover seq, or until woken to look again.
 * Called under the lock; returns true when seq is durable or the log failed
 * (*err; the lock is not held), false otherwise (the lock is held again). */
static bool wait_publication_locked(zilog_t *zl, uint64_t seq, int *err)
{
    CAIRN_ASSERT(cairn_mutex_held(&zl->lock));
    /* The ticket whose publication covers seq: the next one for a record
     * still queued, else the first batch in flight that took it. */
    uint32_t bits = UINT32_MAX; /* more batches in flight than slots: any */
    if (seq > zl->ticket_last_seq[zl->tickets % ZIL_TICKET_SLOTS]) {
        bits = TICKET_BIT(zl->tickets + 1);
    } else if (zl->tickets - zl->published <= ZIL_TICKET_SLOTS) {
        for (uint64_t t = zl->published + 1; t <= zl->tickets; t++) {
            if (zl->ticket_last_seq[t % ZIL_TICKET_SLOTS] >= seq) {
                bits = TICKET_BIT(t);
                break;
            }
        }
    }
    uint32_t seen = atomic_load(&zl->pub_word);
    atomic_fetch_add(&zl->sleepers, 1);
    pthread_mutex_unlock(&zl->lock);
    futex_wait_bits(&zl->pub_word, seen, bits);
    atomic_fetch_sub(&zl->sleepers, 1);
    if (atomic_load(&zl->committed_seq) >= seq) {
        *err = 0;
        return true;
    }
    if ((*err = atomic_load(&zl->commit_err))) return true;
    pthread_mutex_lock(&zl->lock);
    return false;
}

int zil_commit(zilog_t *zl, uint64_t seq)
{
    if (!zl || zl->inert) return 0;
    int err = 0;
    wakeups_t wake = {0};
    pthread_mutex_lock(&zl->lock);
    if (seq == 0 || seq >= zl->next_seq) seq = zl->next_seq - 1;
    while (zl->committed_seq < seq && !err) {
        if (zl->commit_err) {
            err = zl->commit_err;
            break;
        }
        /* One writer at a time; records already taken by a writer that is now
         * flushing are published when it (and every writer before it) is done.
         * Waking is targeted: a single thread waits to become the next writer
         * (writer_cv, signalled when the role is free); every other one sleeps
         * on pub_word with the bit of the ticket that covers its record until
         * that publication (or until woken to be the next writer:
         * want_writer_locked). Whenever someone sleeps, a batch is in flight
         * or the role is taken, so a publication always follows. (One
         * broadcast for both woke every waiting thread twice per batch; one
         * for the publications still woke those whose records were in the
         * next batch, a futile wakeup per commit at 32 in flight.) */
        if (zl->writer || (!zl->head && zl->published != zl->tickets)) {
            if (zl->writer && zl->head && !zl->writer_waiting) {
                zl->writer_waiting = true;
                pthread_cond_wait(&zl->writer_cv, &zl->lock);
                /* Tests: the scheduler's worst case, the writer publishing
                 * before this thread runs again. */
                while (atomic_load(&hold_woken_writer) && zl->published != zl->tickets)
                    pthread_cond_wait(&zl->done_cv, &zl->lock);
                zl->writer_waiting = false;
            } else if (wait_publication_locked(zl, seq, &err)) {
                return err; /* the lock is not held */
            }
            continue;
        }
        if (!zl->head) {
            /* Nothing queued or in flight: every record was written or dropped
             * because its txg synced. */
            zl->committed_seq = zl->next_seq - 1;
            break;
        }
        CAIRN_ASSERT(!zl->writer);
        zl->writer = true;
        batch_plan_t p = {.ticket = ++zl->tickets, .last_seq = zl->next_seq - 1};
        zl->ticket_last_seq[p.ticket % ZIL_TICKET_SLOTS] = p.last_seq;
        itx_t *batch = zl->head;
        zl->head = zl->tail = NULL;
        pthread_mutex_unlock(&zl->lock);
        err = write_batch(zl, batch, &p);
        itx_free_list(batch);
        pthread_mutex_lock(&zl->lock);
        CAIRN_ASSERT(zl->writer);
        zl->writer = false;
        if (zl->writer_waiting) pthread_cond_signal(&zl->writer_cv);
        pthread_mutex_unlock(&zl->lock);
        if (!err) err = flush_batch(zl, &p);
        pthread_mutex_lock(&zl->lock);
        /* Publish in order: a later batch's flush must not vouch for an earlier one's. */
        while (zl->published != p.ticket - 1) pthread_cond_wait(&zl->done_cv, &zl->lock);
        if (!err && p.nwritten && !p.wait_txg && p.chain_guid == zl->broken_chain) {
            /* An earlier batch's flush failed on the chain this one's blocks
             * follow (it was written before the failure was known): a replay may
             * never reach them, so the txg vouches for these records instead.
             * Later batches wait to publish behind this one meanwhile. */
            pthread_mutex_unlock(&zl->lock);
            atomic_fetch_add(&zl->st_txg_waits, 1);
            err = spa_txg_wait_synced(zl->spa, p.max_txg);
            pthread_mutex_lock(&zl->lock);
        }
        CAIRN_ASSERT(p.ticket <= zl->tickets);
        zl->published = p.ticket;
        if (p.last_blk_seq > zl->published_blk_seq) zl->published_blk_seq = p.last_blk_seq;
        if (err) zl->commit_err = err; /* the pool stopped: no later commit can succeed */
        else if (p.last_seq > zl->committed_seq) zl->committed_seq = p.last_seq;
        pthread_cond_broadcast(&zl->done_cv); /* writers waiting to publish in order */
        /* Woken below once the lock is dropped, so none of them blocks on it
         * right away. This publication covers this committer's own record
         * (its batch took the queue holding it), so the loop ends. */
        wake.all |= zl->commit_err ? UINT32_MAX : TICKET_BIT(p.ticket);
        if (zl->writer_waiting) pthread_cond_signal(&zl->writer_cv);
    }
    /* Leaving, hand the role on. A thread waiting on writer_cv takes it when
     * signalled; that one may be this thread, whose record a publication
     * covered - it leaves here without writing what others queued since, and
     * they sleep until someone wakes one of them. */
    want_writer_locked(zl, &wake);
    wakeups_arm_locked(zl, &wake);
    pthread_mutex_unlock(&zl->lock);
    wakeups_send(zl, &wake);
    return err;
}

/* Drops records at the head of the queue whose txg has synced (no commit will
 * need them), so a log nobody commits stays small. Under the lock. */
static void queue_trim_locked(zilog_t *zl)
{
    CAIRN_ASSERT(cairn_mutex_held(&zl->lock));
    if (!zl->head) return;
    uint64_t synced = spa_last_synced_txg(zl->spa);
    while (zl->head && zl->head->rec.txg <= synced) {
        itx_t *it = zl->head;
        zl->head = it->next;
        if (!zl->head) zl->tail = NULL;
        free(it);
    }
}

/* Queues it with nseq sequence numbers (its seq is the last). */
static uint64_t queue_n(zilog_t *zl, itx_t *it, uint64_t nseq)
{
    pthread_mutex_lock(&zl->lock);
    queue_trim_locked(zl);
    zl->next_seq += nseq;
    it->rec.seq = zl->next_seq - 1;
    if (zl->tail) zl->tail->next = it;
    else zl->head = it;
    zl->tail = it;
    uint64_t s = it->rec.seq;
    pthread_mutex_unlock(&zl->lock);
    return s;
}

static uint64_t queue(zilog_t *zl, itx_t *it) { return queue_n(zl, it, 1); }

uint64_t zil_log(zilog_t *zl, const zil_rec_t *rec)
{
    if (!zl || zl->inert || zl->replaying) return 0;
    bool read_back = rec->type == ZIL_REC_WRITE && !rec->data;
    size_t extra = (read_back ? 0 : rec->dlen) + name_len(rec->name) + name_len(rec->name2);
    itx_t *it = cairn_zalloc(sizeof *it + extra);
    it->rec = *rec;
    it->read_back = read_back;
    if (is_block_rec(rec)) {
        /* Replay and the claim at import decide by the block's txg: the record
         * must be the block's, whatever transaction logs it. */
        cairn_blkptr_t bp;
        memcpy(&bp, rec->data, sizeof bp);
        it->rec.txg = bp.birth_txg;
    }
    uint8_t *p = (uint8_t *)(it + 1);
    if (!read_back && rec->dlen) {
        memcpy(p, rec->data, rec->dlen);
        it->rec.data = p;
        p += rec->dlen;
    } else {
        it->rec.data = NULL;
        it->rec.dlen = 0;
    }
    if (rec->name) {
        memcpy(p, rec->name, name_len(rec->name));
        it->rec.name = (const char *)p;
        p += name_len(rec->name);
    }
    if (rec->name2) {
        memcpy(p, rec->name2, name_len(rec->name2));
        it->rec.name2 = (const char *)p;
    }
    return queue(zl, it);
}

uint64_t zil_log_write_later(zilog_t *zl, uint64_t txg, uint64_t obj, uint64_t first,
                            uint32_t rs, size_t n, const uint64_t *stamps)
{
    if (!zl || zl->inert || zl->replaying) return 0;
    if (!n || !rs) return zil_log_barrier(zl, txg);
    itx_t *it = cairn_zalloc(sizeof *it + n * (sizeof *it->stamps + sizeof *it->bps));
    it->later = true;
    it->later_rs = rs;
    it->later_first = first;
    it->later_n = n;
    it->bps = (cairn_blkptr_t *)(it + 1);
    it->stamps = (uint64_t *)(it->bps + n);
    memcpy(it->stamps, stamps, n * sizeof *stamps);
    it->rec.type = ZIL_REC_WRITE_BLOCK; /* what it becomes; data comes with the commit */
    it->rec.txg = txg;
    it->rec.obj = obj;
    it->rec.off = first * rs;
    it->rec.len = n * rs;
    return queue_n(zl, it, n);
}

uint64_t zil_log_barrier(zilog_t *zl, uint64_t txg)
{
    if (!zl || zl->inert || zl->replaying) return 0;
    itx_t *it = cairn_zalloc(sizeof *it);
    it->barrier = true;
    it->rec.type = 0;
    it->rec.txg = txg;
    return queue(zl, it);
}

/* ---------------- open, replay, close ---------------- */

void zil_replay_mark(zilog_t *zl, dmu_tx_t *tx)
{
    if (!zl || !zl->replaying) return;
    spa_log_header_t h = zl->hdr;
    h.replay_seq = zl->replay_cur_seq;
    spa_log_header_set(zl->spa, zl->os_id, &h, dmu_tx_txg(tx));
}

typedef struct walked {
    cairn_dva_t *dvas;
    size_t n, cap;
    spa_log_ref_t *refs;     /* the walked blocks' references */
    size_t nrefs, caprefs;
} walked_t;

static void walked_push(walked_t *w, const cairn_dva_t *d)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 16;
        w->dvas = cairn_realloc(w->dvas, w->cap * sizeof *w->dvas);
    }
    w->dvas[w->n++] = *d;
}

/* Walks the chain named by zl->hdr; replays when apply is set. Every block the
 * pool kept for it (including the unwritten successor) ends up in *w. */
static int chain_walk(zilog_t *zl, bool apply, zil_replay_fn replay, void *arg, walked_t *w,
                      uint64_t *max_txg)
{
    const spa_log_header_t *h = &zl->hdr;
    cairn_dva_t d = h->head;
    uint64_t seq = h->head_seq;
    int err = 0;
    while (d.asize && !err) {
        walked_push(w, &d);
        void *payload;
        uint32_t len, nrefs;
        cairn_dva_t next;
        spa_log_ref_t *refs;
        if (spa_log_read_refs(zl->spa, &d, h->chain_guid, seq, &payload, &len, &next, &refs,
                              &nrefs))
            break;
        if (nrefs) {
            if (w->nrefs + nrefs > w->caprefs) {
                w->caprefs = (w->nrefs + nrefs) * 2;
                w->refs = cairn_realloc(w->refs, w->caprefs * sizeof *w->refs);
            }
            memcpy(w->refs + w->nrefs, refs, nrefs * sizeof *refs);
            w->nrefs += nrefs;
        }
        free(refs);
        for (size_t o = 0; apply && o < len && !err;) {
            zil_rec_t rec;
            size_t used;
            if (zil_rec_decode((uint8_t *)payload + o, len - o, &rec, &used)) {
                log_warn("zil", "object set %llu: malformed record in log block %llu; replay "
                         "stops there", (unsigned long long)zl->os_id, (unsigned long long)seq);
                apply = false;
                break;
            }
            o += used;
            if (rec.txg > *max_txg) *max_txg = rec.txg;
            if (rec.seq <= h->replay_seq || rec.txg <= h->claim_txg) continue;
            zl->replay_cur_seq = rec.seq;
            err = replay(arg, zl, &rec);
            if (!err) zl->replay_applied_seq = rec.seq;
            if (err)
                log_error("zil", "object set %llu: replaying record %llu (type %u) failed: %s",
                          (unsigned long long)zl->os_id, (unsigned long long)rec.seq, rec.type,
                          strerror(-err));
            else
                atomic_fetch_add(&zl->st_replayed, 1);
            if (!err && rec.type == ZIL_REC_WRITE_BLOCK) atomic_fetch_add(&zl->st_replayed_blocks, 1);
        }
        free(payload);
        d = next;
        seq++;
    }
    return err;
}

int zil_open(objset_t *os, zil_replay_fn replay, void *arg, zilog_t **out)
{
    spa_t *spa = dmu_objset_spa(os);
    uint64_t id = dmu_objset_id(os);
    pthread_mutex_lock(&zil_registry_lock);
    for (zilog_t *z = zil_registry; z; z = z->reg_next) {
        if (z->os == os) {
            z->refs++;
            pthread_mutex_unlock(&zil_registry_lock);
            *out = z;
            return 0;
        }
    }
    zilog_t *zl = cairn_zalloc(sizeof *zl);
    zl->os = os;
    zl->spa = spa;
    zl->os_id = id;
    zl->refs = 1;
    zl->next_seq = 1;
    pthread_mutex_init(&zl->lock, NULL);
    pthread_cond_init(&zl->done_cv, NULL);
    pthread_cond_init(&zl->writer_cv, NULL);
    /* A debugging and benchmarking knob: sync operations wait for txgs as before the log. */
    const char *txg_only = getenv("CAIRN_ZIL_TXG_ONLY");
    if (txg_only && *txg_only == '1') atomic_store(&zl->txg_only, true);
    dmu_tx_t *probe = dmu_tx_begin(os);
    zl->inert = spa_readonly(spa) || dmu_tx_readonly(probe);
    dmu_tx_commit(probe);
    int err = 0;
    if (!zl->inert) {
        spa_log_header_get(spa, id, &zl->hdr);
        walked_t w = {0};
        uint64_t max_txg = 0;
        if (zl->hdr.chain_guid) {
            bool apply = zl->hdr.claim_txg != 0 && replay;
            if (apply) {
                log_info("zil", "object set %llu: replaying the intent log (records after txg "
                         "%llu, after record %llu)", (unsigned long long)id,
                         (unsigned long long)zl->hdr.claim_txg,
                         (unsigned long long)zl->hdr.replay_seq);
                zl->replaying = true;
            }
            err = chain_walk(zl, apply, replay, arg, &w, &max_txg);
            zl->replaying = false;
            if (!err && apply) {
                err = spa_txg_wait_synced(spa, 0);
                /* Txgs the crash left unsynced come round again; the layers name
                 * things after txgs (file generations), and a record kept its
                 * original txg: later changes must land in later txgs. */
                if (!err && max_txg > spa_last_synced_txg(spa))
                    err = spa_txg_wait_synced(spa, max_txg);
                log_info("zil", "object set %llu: replayed %llu record(s), %llu of them from "
                         "directly written blocks", (unsigned long long)id,
                         (unsigned long long)atomic_load(&zl->st_replayed),
                         (unsigned long long)atomic_load(&zl->st_replayed_blocks));
            }
        }
        /* The walked blocks are the pool's to free once the new header is durable. */
        memset(&zl->next_dva, 0, sizeof zl->next_dva);
        if (!err) {
            /* Blocks claimed at import for records replay did not apply (it
             * freed the others itself) go with the old chain. */
            uint64_t applied = CAIRN_MAX(zl->hdr.replay_seq, zl->replay_applied_seq);
            cairn_blkptr_t *drop = cairn_zalloc((w.nrefs + 1) * sizeof *drop);
            size_t ndrop = 0;
            for (size_t i = 0; i < w.nrefs; i++) {
                const spa_log_ref_t *r = &w.refs[i];
                if (zl->hdr.claim_txg && r->bp.birth_txg > zl->hdr.claim_txg && r->seq > applied)
                    drop[ndrop++] = r->bp;
            }
            chain_restart_freeing(zl, w.dvas, w.n, drop, ndrop);
            free(drop);
            if (!zl->hdr.chain_guid)
                log_warn("zil", "object set %llu: no room for an intent log; sync operations "
                         "will wait for txgs", (unsigned long long)id);
        }
        free(w.dvas);
        free(w.refs);
    }
    if (err) {
        pthread_mutex_unlock(&zil_registry_lock);
        pthread_mutex_destroy(&zl->lock);
        pthread_cond_destroy(&zl->done_cv);
    pthread_cond_destroy(&zl->writer_cv);
        free(zl->lwbs);
        free(zl);
        return err;
    }
    zl->reg_next = zil_registry;
    zil_registry = zl;
    pthread_mutex_unlock(&zil_registry_lock);
    *out = zl;
    return 0;
}

int zil_restart_chains(spa_t *spa)
{
    int err = 0;
    pthread_mutex_lock(&zil_registry_lock);
    for (zilog_t *zl = zil_registry; zl; zl = zl->reg_next) {
        if (zl->spa != spa || zl->inert) continue;
        /* Take the writer role with every earlier batch published, so no block
         * of the old chain is still being written when it is freed. */
        pthread_mutex_lock(&zl->lock);
        /* A writer holds a ticket until it publishes, and every publication
         * broadcasts done_cv. */
        while (zl->writer || zl->published != zl->tickets) pthread_cond_wait(&zl->done_cv, &zl->lock);
        zl->writer = true;
        pthread_mutex_unlock(&zl->lock);
        /* The old chain's records all have txgs up to the one that sets the new
         * header: once that is durable they are obsolete, and until then the old
         * header (and its blocks, freed with that txg) still stand. */
        if (zl->hdr.chain_guid) {
            int e = chain_restart(zl, NULL, 0);
            if (e && !err) err = e;
        }
        pthread_mutex_lock(&zl->lock);
        zl->writer = false;
        /* No publication follows (no ticket was taken): wake every kind of waiter. */
        pthread_cond_broadcast(&zl->done_cv);
        wakeups_t wake = {.all = UINT32_MAX};
        wakeups_arm_locked(zl, &wake);
        if (zl->writer_waiting) pthread_cond_signal(&zl->writer_cv);
        pthread_mutex_unlock(&zl->lock);
        wakeups_send(zl, &wake);
    }
    pthread_mutex_unlock(&zil_registry_lock);
    return err;
}

static void registry_remove(zilog_t *zl)
{
    for (zilog_t **pp = &zil_registry; *pp; pp = &(*pp)->reg_next) {
        if (*pp == zl) {
            *pp = zl->reg_next;
            break;
        }
    }
}

/* The memory of a log, once nobody can use it (abandon and close). */
static void zilog_free(zilog_t *zl)
{
    itx_free_list(zl->head);
    free(zl->lwbs);
    while (zl->nspare) free(zl->spare_blocks[--zl->nspare]);
    free(zl->chunk_buf);
    free(zl->refs_buf);
    pthread_mutex_destroy(&zl->lock);
    pthread_cond_destroy(&zl->done_cv);
    pthread_cond_destroy(&zl->writer_cv);
    free(zl);
}

void zil_abandon(zilog_t *zl)
{
    if (!zl) return;
    pthread_mutex_lock(&zil_registry_lock);
    registry_remove(zl);
    pthread_mutex_unlock(&zil_registry_lock);
    zilog_free(zl);
}

void zil_close(zilog_t *zl)
{
    if (!zl) return;
    pthread_mutex_lock(&zil_registry_lock);
    if (--zl->refs > 0) {
        pthread_mutex_unlock(&zil_registry_lock);
        return;
    }
    registry_remove(zl);
    pthread_mutex_unlock(&zil_registry_lock);
    if (!zl->inert && atomic_load(&zl->st_commits)) {
        /* How well commits were grouped (flushes per commit), for whoever
         * reads the log after a benchmark: /metrics loses them with the log. */
        zil_stats_t st;
        zil_get_stats(zl, &st);
        log_info("zil",
                 "object set %llu: closing the intent log: %llu commits, %llu log writes, "
                 "%llu flushes asked, %llu flushes, %llu records, %llu txg waits",
                 (unsigned long long)zl->os_id, (unsigned long long)st.commits,
                 (unsigned long long)st.log_writes, (unsigned long long)st.flushes,
                 (unsigned long long)st.flushes_issued,
                 (unsigned long long)st.records, (unsigned long long)st.txg_waits);
    }
    if (!zl->inert) {
        /* Everything logged is in some txg: once that is durable the log is empty. */
        if (spa_txg_wait_synced(zl->spa, 0) == 0) {
            uint64_t txg = spa_tx_hold_nowait(zl->spa);
            for (size_t i = 0; i < zl->nlwbs; i++) spa_log_free(zl->spa, &zl->lwbs[i].dva, txg);
            if (zl->next_dva.asize) spa_log_free(zl->spa, &zl->next_dva, txg);
            spa_log_header_t empty = {0};
            spa_log_header_set(zl->spa, zl->os_id, &empty, txg);
            spa_tx_rele(zl->spa, txg);
        }
    }
    zilog_free(zl);
}

/* ---------------- replay of object-level records ---------------- */

int zil_replay_dmu(void *arg, zilog_t *zl, const zil_rec_t *rec)
{
    objset_t *os = arg;
    dmu_tx_t *tx = dmu_tx_begin(os);
    int err;
    switch (rec->type) {
    case ZIL_REC_WRITE:
        err = rec->dlen == rec->len ? dmu_write(os, rec->obj, rec->off, rec->len, rec->data, tx)
                                    : -EINVAL;
        break;
    case ZIL_REC_WRITE_BLOCK: {
        /* The block was claimed at import; it is read (verified against its
         * pointer) and its bytes written like a WRITE's, then freed with the
         * transaction that marks the record applied. */
        cairn_blkptr_t bp;
        if (rec->dlen != sizeof bp) {
            err = -EINVAL;
            break;
        }
        memcpy(&bp, rec->data, sizeof bp);
        if (bp.lsize != rec->len || cairn_bp_is_hole(&bp)) {
            err = -EINVAL;
            break;
        }
        uint8_t *buf = cairn_alloc_aligned(bp.lsize);
        err = spa_block_read(dmu_objset_spa(os), &bp, buf);
        if (!err) err = dmu_write(os, rec->obj, rec->off, rec->len, buf, tx);
        free(buf);
        if (!err || err == -ENOENT) spa_block_free_at_sync(dmu_objset_spa(os), dmu_tx_txg(tx), &bp);
        break;
    }
    case ZIL_REC_FREE:
        err = dmu_free_range(os, rec->obj, rec->off, rec->len, tx);
        break;
    case ZIL_REC_SETATTR:
        err = rec->dlen <= DMU_BONUS_MAX ? dmu_bonus_write(os, rec->obj, rec->data, rec->dlen, tx)
                                         : -EINVAL;
        break;
    default:
        err = -ENOTSUP;
        break;
    }
    /* An object freed by a later, durable change: the record has nothing left to do. */
    if (err == -ENOENT) {
        log_warn("zil", "replay: object %llu no longer exists; record %llu skipped",
                 (unsigned long long)rec->obj, (unsigned long long)rec->seq);
        err = 0;
    }
    if (!err) zil_replay_mark(zl, tx);
    dmu_tx_commit(tx);
    return err;
}
