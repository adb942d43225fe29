/*
 * The pool's command history (`cairn pool history`): every administrative
 * command that changed the pool or its datasets, with its time, stored in the
 * pool so that it travels with the disks and survives export, import and
 * restarts.
 *
 * WHO WRITES. The CLI sends its command line with every request; cairnd asks
 * this module to record it once the command succeeded (a refused command
 * changed nothing, so it is not history). Each record is a DSL task: it is on
 * disk, in the txg it joined, when dsl_history_log() returns.
 *
 * ON DISK. One plain MOS object, its number in the root dataset's phys,
 * reserved[DSL_HISTORY_SLOT] (0: no history yet; older pools simply have
 * none). Its layout (docs/ondisk-format.md, "Command history"):
 *
 *     0          header: magic, version, ring size, first record length,
 *                head and tail (byte counters that only grow), dropped count
 *     4 KiB      the FIRST record (the pool's creation), kept forever
 *     8 KiB      a ring of DSL_HISTORY_RING bytes: records, oldest at head
 *                % ring, newest ending at tail % ring; a record may wrap
 *
 * A record is {u32 length (whole record, 8-byte multiple), u32 magic, u64 wall
 * clock seconds} and then two NUL-terminated strings: the command line and the
 * long form's "who and where" (`pool history -l`). When a new record does not
 * fit, the oldest ones are dropped from the head until it does: the history is
 * bounded (1 MiB in all, as ZFS's default) and the creation record is never
 * dropped. The header and the record change in one txg, so a crash leaves the
 * history as it was before the command or after it.
 *
 * The ring logic works through a small read/write interface
 * (dsl_history_io_t), so the unit test runs it on memory
 * (tests/unit/test_dsl_history.c); here it runs on the MOS object.
 */
#include "dsl_impl.h"

#include <cairn/util.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DSL_HISTORY_SLOT 3 /* root phys reserved word: [4] is the config store */
#define HIST_MAGIC 0x5453484e52494143ULL /* "CAIRNHST" */
#define HIST_REC_MAGIC 0x52534948u       /* "HISR" */
#define HIST_VERSION 1
#define HIST_HDR_SIZE 64
#define HIST_REC_HDR 16

typedef struct hist_hdr {
    uint64_t magic, version, ring_size, first_len, head, tail, dropped, reserved;
} hist_hdr_t;
_Static_assert(sizeof(hist_hdr_t) == HIST_HDR_SIZE, "history header size");

static void hdr_to_disk(const hist_hdr_t *h, uint8_t out[HIST_HDR_SIZE])
{
    const uint64_t *w = (const uint64_t *)h;
    for (int i = 0; i < HIST_HDR_SIZE / 8; i++) {
        uint64_t le = htole64(w[i]);
        memcpy(out + 8 * i, &le, 8);
    }
}

static void hdr_from_disk(const uint8_t in[HIST_HDR_SIZE], hist_hdr_t *h)
{
    uint64_t *w = (uint64_t *)h;
    for (int i = 0; i < HIST_HDR_SIZE / 8; i++) {
        uint64_t le;
        memcpy(&le, in + 8 * i, 8);
        w[i] = le64toh(le);
    }
}

static int read_hdr(const dsl_history_io_t *io, hist_hdr_t *h)
{
    uint8_t buf[HIST_HDR_SIZE];
    int e = io->read(io->arg, 0, buf, sizeof buf);
    if (e) return e;
    hdr_from_disk(buf, h);
    if (h->magic == 0) { /* a new object */
        memset(h, 0, sizeof *h);
        h->magic = HIST_MAGIC;
        h->version = HIST_VERSION;
        h->ring_size = io->ring_size;
        return 0;
    }
    if (h->magic != HIST_MAGIC || h->version != HIST_VERSION || h->ring_size < 4096 ||
        h->ring_size % 8 || h->first_len > DSL_HISTORY_FIRST_MAX || h->head > h->tail ||
        h->tail - h->head > h->ring_size)
        return -EINVAL;
    return 0;
}

/* Ring bytes [pos, pos + len) (logical positions), wrapping at the end. */
static int ring_io(const dsl_history_io_t *io, const hist_hdr_t *h, uint64_t pos, void *buf,
                   uint64_t len, bool write)
{
    uint8_t *p = buf;
    while (len) {
        uint64_t at = pos % h->ring_size, n = CAIRN_MIN(len, h->ring_size - at);
        uint64_t off = DSL_HISTORY_RING_OFF + at;
        int e = write ? io->write(io->arg, off, p, n) : io->read(io->arg, off, p, n);
        if (e) return e;
        p += n;
        pos += n;
        len -= n;
    }
    return 0;
}

/* A record of at most max bytes: the header and both strings, cut to fit. */
static uint8_t *build_record(uint64_t when, const char *line, const char *info, uint64_t max,
                             uint32_t *lenp)
{
    size_t ll = strlen(line), il = strlen(info);
    uint64_t room = max - HIST_REC_HDR - 2; /* both NULs */
    if (il > room / 4) il = room / 4;       /* the command line matters more */
    if (ll > room - il) ll = room - il;
    uint32_t len = (uint32_t)CAIRN_P2ROUNDUP(HIST_REC_HDR + ll + 1 + il + 1, (size_t)8);
    uint8_t *r = cairn_zalloc(len);
    uint32_t le32 = htole32(len), magic = htole32(HIST_REC_MAGIC);
    uint64_t le64 = htole64(when);
    memcpy(r, &le32, 4);
    memcpy(r + 4, &magic, 4);
    memcpy(r + 8, &le64, 8);
    memcpy(r + HIST_REC_HDR, line, ll);
    memcpy(r + HIST_REC_HDR + ll + 1, info, il);
    *lenp = len;
    return r;
}

static int record_len(const dsl_history_io_t *io, const hist_hdr_t *h, uint64_t pos, uint32_t *len)
{
    uint8_t b[8];
    int e = ring_io(io, h, pos, b, sizeof b, false);
    if (e) return e;
    uint32_t l, m;
    memcpy(&l, b, 4);
    memcpy(&m, b + 4, 4);
    l = le32toh(l);
    if (le32toh(m) != HIST_REC_MAGIC || l < HIST_REC_HDR || l % 8 || l > h->tail - pos)
        return -EINVAL;
    *len = l;
    return 0;
}

int dsl_history_ring_append(const dsl_history_io_t *io, uint64_t when, const char *line,
                            const char *info)
{
    hist_hdr_t h;
    int e = read_hdr(io, &h);
    if (e) return e;
    uint32_t len;
    uint8_t *rec;
    if (h.first_len == 0 && h.tail == 0) {
        rec = build_record(when, line, info, DSL_HISTORY_FIRST_MAX, &len);
        e = io->write(io->arg, DSL_HISTORY_FIRST_OFF, rec, len);
        h.first_len = len;
    } else {
        rec = build_record(when, line, info, CAIRN_MIN(h.ring_size / 4, (uint64_t)64 * 1024), &len);
        /* Oldest records go until the new one fits. */
        while (!e && h.tail + len - h.head > h.ring_size) {
            uint32_t old;
            e = record_len(io, &h, h.head, &old);
            if (!e) {
                h.head += old;
                h.dropped++;
            }
        }
        if (!e) e = ring_io(io, &h, h.tail, rec, len, true);
        h.tail += len;
    }
    free(rec);
    if (e) return e;
    uint8_t buf[HIST_HDR_SIZE];
    hdr_to_disk(&h, buf);
    return io->write(io->arg, 0, buf, sizeof buf);
}

static int visit_record(const uint8_t *r, uint32_t len, dsl_history_fn fn, void *arg)
{
    uint64_t when;
    memcpy(&when, r + 8, 8);
    /* Both strings end inside the record (its zero padding guarantees the last NUL). */
    const char *line = (const char *)r + HIST_REC_HDR;
    size_t ll = strnlen(line, len - HIST_REC_HDR);
    const char *info = ll + 1 < len - HIST_REC_HDR ? line + ll + 1 : "";
    if (memchr(r + HIST_REC_HDR, 0, len - HIST_REC_HDR) == NULL) return -EINVAL;
    if (r[len - 1] != 0) return -EINVAL;
    fn(le64toh(when), line, info, arg);
    return 0;
}

int dsl_history_ring_walk(const dsl_history_io_t *io, dsl_history_fn fn, void *arg,
                          uint64_t *dropped)
{
    hist_hdr_t h;
    int e = read_hdr(io, &h);
    if (e) return e;
    if (dropped) *dropped = h.dropped;
    if (h.first_len) {
        uint8_t *r = cairn_zalloc(h.first_len);
        e = io->read(io->arg, DSL_HISTORY_FIRST_OFF, r, h.first_len);
        if (!e) e = visit_record(r, (uint32_t)h.first_len, fn, arg);
        free(r);
        if (e) return e;
    }
    for (uint64_t pos = h.head; pos < h.tail && !e;) {
        uint32_t len;
        e = record_len(io, &h, pos, &len);
        if (e) break;
        uint8_t *r = cairn_zalloc(len);
        e = ring_io(io, &h, pos, r, len, false);
        if (!e) e = visit_record(r, len, fn, arg);
        free(r);
        pos += len;
    }
    return e;
}

/* ---------------- on the MOS object ---------------- */

typedef struct mos_io {
    dsl_pool_t *dp;
    uint64_t obj;
    dmu_tx_t *tx; /* NULL: reading */
} mos_io_t;

static int mos_read(void *arg, uint64_t off, void *buf, uint64_t len)
{
    mos_io_t *m = arg;
    return dmu_read(m->dp->mos, m->obj, off, len, buf);
}

static int mos_write(void *arg, uint64_t off, const void *buf, uint64_t len)
{
    mos_io_t *m = arg;
    return m->tx ? dmu_write(m->dp->mos, m->obj, off, len, buf, m->tx) : -EROFS;
}

static const dmu_object_props_t history_props = {
    .recordsize = 128 * 1024, .compress = CAIRN_COMPRESS_LZ4,
    .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 2};

static uint64_t history_obj(dsl_pool_t *dp)
{
    pthread_mutex_lock(&dp->lock);
    uint64_t obj = dp->root ? dp->root->phys.reserved[DSL_HISTORY_SLOT] : 0;
    pthread_mutex_unlock(&dp->lock);
    return obj;
}

typedef struct history_task {
    uint64_t when;
    const char *line, *info;
} history_task_t;

static int task_history(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    history_task_t *ht = arg;
    if (!dp->root) return -ENXIO;
    uint64_t obj = dp->root->phys.reserved[DSL_HISTORY_SLOT];
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err = 0;
    if (!obj) {
        err = dmu_object_alloc(dp->mos, &history_props, &obj, tx);
        if (!err) {
            pthread_mutex_lock(&dp->stat_lock);
            dp->root->phys.reserved[DSL_HISTORY_SLOT] = obj;
            dp->root->dirty = true; /* written after the tasks of this txg */
            pthread_mutex_unlock(&dp->stat_lock);
        }
    }
    if (!err) {
        mos_io_t m = {dp, obj, tx};
        dsl_history_io_t io = {mos_read, mos_write, &m, DSL_HISTORY_RING};
        err = dsl_history_ring_append(&io, ht->when, ht->line, ht->info);
    }
    dmu_tx_commit(tx);
    return err;
}

int dsl_history_log(dsl_pool_t *dp, uint64_t when, const char *line, const char *info)
{
    if (!line || !*line) return -EINVAL;
    history_task_t ht = {when, line, info ? info : ""};
    return dsl_run_pool_task(dp, task_history, &ht);
}

int dsl_history_walk(dsl_pool_t *dp, dsl_history_fn fn, void *arg, uint64_t *dropped)
{
    if (dropped) *dropped = 0;
    uint64_t obj = history_obj(dp);
    if (!obj) return 0;
    mos_io_t m = {dp, obj, NULL};
    dsl_history_io_t io = {mos_read, mos_write, &m, DSL_HISTORY_RING};
    return dsl_history_ring_walk(&io, fn, arg, dropped);
}
