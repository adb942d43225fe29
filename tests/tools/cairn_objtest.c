/*
 * cairn_objtest: writes and verifies patterned objects on a pool, in process,
 * for the integration tests (layouts, self-healing, crash consistency).
 *
 * Every byte a test checks is re-derived from a few numbers, so a verifier
 * needs no copy of what was written: the content of record r of object i at
 * version v is a function of (seed, i, v, r). Half the records (chosen by the
 * same hash) are compressible - runs of zeros and repeated words, so every
 * codec including zle stores them smaller - and half are incompressible, so
 * both the compressed and the raw write paths are exercised.
 *
 * The first STAMP_WORDS 64-bit words of every record are a stamp: a magic,
 * the seed, the object index, the version and the txg the record was written
 * in. The stamp catches a record that came from the wrong object, the wrong
 * version or the wrong txg (a stale block left by a broken copy-on-write or a
 * torn uberblock), and the verifier checks the txgs it finds against the
 * order the writer used.
 *
 * Objects are found by their bonus buffer (magic, seed, index, count), not by
 * object number, so the tool does not depend on how the DMU numbers objects.
 *
 * Modes:
 *   write         objset "objtest": N objects, each a dense region of --size
 *                 bytes (records that hash to "hole" are never written, the
 *                 last record may be partial) plus two records past 4 GiB;
 *                 version 1 everywhere, a sync, then version 2 over a third of
 *                 the records (copy-on-write overwrites and frees); export.
 *   verify        re-derives every byte (holes and never-written ranges read
 *                 as zeros), checks stamps, txgs and object info; read-only.
 *   crash-writer  objset "crash": step k rewrites object k % N completely
 *                 (every record, one transaction) at version k. Writer threads
 *                 own objects by parity, so each object has one writer and its
 *                 versions only grow. A syncer repeatedly takes K = the highest
 *                 step such that every step <= K has committed, waits for
 *                 dmu_objset_sync and prints "durable K"; then prints
 *                 "limit L" (L = K + window) before it lets writers issue steps
 *                 up to L. So after a SIGKILL the last lines printed bound what
 *                 the pool may hold: every object is at least at its last
 *                 version <= K and no object is past L.
 *                 On start it finds the highest version on disk and continues
 *                 from the next multiple of N with one transaction that
 *                 rewrites every object (so step numbers stay contiguous).
 *   crash-verify  read-only: every object is exactly one version v (stamp and
 *                 content of every record), v = index (mod N), v >= its last
 *                 step <= K, v <= L, txgs never go backwards as versions grow
 *                 within one writer thread, and no txg is newer than the pool.
 */
#include <cairn/dmu.h>
#include <cairn/util.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OBJTEST_MAGIC 0x434149524e4f424aULL   /* "CAIRNOBJ" */
#define BONUS_MAGIC 0x434149524e424f4eULL     /* "CAIRNBON" */
#define STAMP_WORDS 5
#define HIGH_BASE (4ULL << 30)                /* the region past 4 GiB */
#define HIGH_RECORDS 2
#define CRASH_DENSE_RECORDS 3
#define MAX_DIRS 16
#define MAX_REPORTS 10

typedef struct opts {
    const char *mode;
    const char *pool;
    const char *dirs[MAX_DIRS];
    size_t ndirs;
    uint64_t seed;
    uint64_t nobj;
    uint64_t size;
    uint32_t recordsize;
    cairn_compress_t compress;
    bool force;
    uint32_t threads;
    int64_t durable;
    int64_t limit;
    uint64_t window;
    int64_t max_steps;     /* crash-writer: stop cleanly after this many steps (-1: never) */
} opts_t;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cairn_objtest: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* ---------------------------------------------------------------- patterns */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

typedef struct stamp {
    uint64_t magic, seed, index, version, txg;
} stamp_t;

/* Fills len bytes (the part of a record that is written) for (seed, idx, ver, rec). */
static void fill_record(uint8_t *buf, uint32_t len, uint64_t seed, uint64_t idx, uint64_t ver,
                        uint64_t rec, uint64_t txg)
{
    uint64_t base = hash4(seed, idx, ver, rec);
    bool compressible = (hash4(seed, idx, rec, 0xC0) & 1) != 0;
    uint64_t nwords = len / 8;
    uint64_t *w = (uint64_t *)buf;
    for (uint64_t i = 0; i < nwords; i++) {
        if (compressible)
            w[i] = (i % 64 < 32) ? 0 : mix64(base + i / 64);
        else
            w[i] = mix64(base + i);
    }
    for (uint64_t i = nwords * 8; i < len; i++) buf[i] = (uint8_t)(base >> (i % 8 * 8)) | 1;
    stamp_t s = {OBJTEST_MAGIC, seed, idx, ver, txg};
    memcpy(buf, &s, CAIRN_MIN((size_t)len, sizeof s));
}

static bool is_zero(const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (b[i]) return false;
    return true;
}

/* ---------------------------------------------------------------- pool helpers */

static spa_t *open_pool(const opts_t *o, int flags)
{
    spa_t *spa = NULL;
    char err[512] = "";
    int e = spa_import(o->pool, o->dirs, o->ndirs, flags, &spa, err, sizeof err);
    if (e) die("import of '%s' failed: %s", o->pool, err[0] ? err : strerror(-e));
    return spa;
}

static void close_pool(spa_t *spa, bool export)
{
    int e = export ? spa_export(spa) : spa_close(spa);
    if (e) die("%s failed: %s", export ? "export" : "close", strerror(-e));
}

typedef struct bonus {
    uint64_t magic, seed, index, nobj;
} bonus_t;

typedef struct objmap {
    objset_t *os;
    const opts_t *o;
    uint64_t *obj;          /* index -> object number, 0 = missing */
    uint64_t foreign;       /* objects that are not ours */
    uint64_t dup;
} objmap_t;

static void map_one(uint64_t obj, void *arg)
{
    objmap_t *m = arg;
    bonus_t b;
    uint32_t len = 0;
    memset(&b, 0, sizeof b);
    if (dmu_bonus_read(m->os, obj, &b, sizeof b, &len) || len != sizeof b ||
        b.magic != BONUS_MAGIC || b.seed != m->o->seed || b.nobj != m->o->nobj ||
        b.index >= m->o->nobj) {
        m->foreign++;
        return;
    }
    if (m->obj[b.index]) m->dup++;
    m->obj[b.index] = obj;
}

static uint64_t *map_objects(objset_t *os, const opts_t *o, uint64_t *foreign, uint64_t *dup)
{
    objmap_t m = {.os = os, .o = o, .obj = cairn_zalloc(o->nobj * sizeof(uint64_t))};
    int e = dmu_object_list(os, map_one, &m);
    if (e) die("dmu_object_list: %s", strerror(-e));
    *foreign = m.foreign;
    *dup = m.dup;
    return m.obj;
}

static uint64_t alloc_tagged(objset_t *os, const opts_t *o, uint64_t idx, dmu_tx_t *tx)
{
    dmu_object_props_t p = {.recordsize = o->recordsize, .compress = o->compress,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t obj = 0;
    int e = dmu_object_alloc(os, &p, &obj, tx);
    if (e) die("dmu_object_alloc: %s", strerror(-e));
    bonus_t b = {BONUS_MAGIC, o->seed, idx, o->nobj};
    e = dmu_bonus_write(os, obj, &b, sizeof b, tx);
    if (e) die("dmu_bonus_write: %s", strerror(-e));
    return obj;
}

/* ---------------------------------------------------------------- write / verify */

/* The layout of object idx in write/verify mode. */
static uint64_t dense_records(const opts_t *o) { return (o->size + o->recordsize - 1) / o->recordsize; }
static uint64_t high_first(const opts_t *o, uint64_t idx)
{
    return (HIGH_BASE + idx * CAIRN_MIB) / o->recordsize;
}
static bool is_hole(const opts_t *o, uint64_t idx, uint64_t rec)
{
    return rec != 0 && hash4(o->seed, idx, rec, 0x401E) % 5 == 0;
}
static bool has_v2(const opts_t *o, uint64_t idx, uint64_t rec)
{
    return hash4(o->seed, idx, rec, 0x5EC0) % 3 == 0;
}
static uint32_t record_len(const opts_t *o, uint64_t rec)
{
    if (rec < dense_records(o) && (rec + 1) * o->recordsize > o->size)
        return (uint32_t)(o->size - rec * o->recordsize);
    return o->recordsize;
}

/* Calls fn for every written record of object idx (dense, non-hole, then high). */
static void for_each_record(const opts_t *o, uint64_t idx,
                            void (*fn)(const opts_t *, uint64_t idx, uint64_t rec, void *), void *arg)
{
    for (uint64_t r = 0; r < dense_records(o); r++)
        if (!is_hole(o, idx, r)) fn(o, idx, r, arg);
    for (uint64_t r = 0; r < HIGH_RECORDS; r++) fn(o, idx, high_first(o, idx) + r, arg);
}

typedef struct write_ctx {
    objset_t *os;
    uint64_t obj;
    uint64_t version;
    dmu_tx_t *tx;
    uint8_t *buf;
    uint64_t records;
} write_ctx_t;

static void write_record(const opts_t *o, uint64_t idx, uint64_t rec, void *arg)
{
    write_ctx_t *w = arg;
    if (w->version == 2 && !has_v2(o, idx, rec)) return;
    uint32_t len = record_len(o, rec);
    fill_record(w->buf, len, o->seed, idx, w->version, rec, dmu_tx_txg(w->tx));
    int e = dmu_write(w->os, w->obj, rec * o->recordsize, len, w->buf, w->tx);
    if (e) die("dmu_write obj %" PRIu64 " rec %" PRIu64 ": %s", w->obj, rec, strerror(-e));
    w->records++;
}

static int cmd_write(const opts_t *o)
{
    spa_t *spa = open_pool(o, o->force ? SPA_IMPORT_FORCE : 0);
    objset_t *os = NULL;
    if (dmu_objset_open(spa, "objtest", &os) == 0) {
        /* A previous run's objects: start over (this also exercises destroy). */
        dmu_objset_close(os);
        int e = dmu_objset_destroy(spa, "objtest");
        if (e) die("dmu_objset_destroy: %s", strerror(-e));
    }
    uint64_t id;
    int e = dmu_objset_create(spa, "objtest", &id);
    if (e) die("dmu_objset_create: %s", strerror(-e));
    e = dmu_objset_open(spa, "objtest", &os);
    if (e) die("dmu_objset_open: %s", strerror(-e));

    uint64_t *objs = cairn_zalloc(o->nobj * sizeof(uint64_t));
    write_ctx_t w = {.os = os, .buf = cairn_alloc_aligned(o->recordsize)};
    for (w.version = 1; w.version <= 2; w.version++) {
        for (uint64_t i = 0; i < o->nobj; i++) {
            w.tx = dmu_tx_begin(os);
            if (w.version == 1) objs[i] = alloc_tagged(os, o, i, w.tx);
            w.obj = objs[i];
            for_each_record(o, i, write_record, &w);
            dmu_tx_commit(w.tx);
        }
        /* Version 2 must land in a later txg than version 1 (verify checks it). */
        e = dmu_objset_sync(os);
        if (e) die("dmu_objset_sync: %s", strerror(-e));
    }
    uint64_t txg = spa_last_synced_txg(spa);
    dmu_objset_close(os);
    close_pool(spa, true);
    printf("write: %" PRIu64 " objects, %" PRIu64 " record writes, recordsize %u, %s, synced txg %"
           PRIu64 ", exported\n", o->nobj, w.records, o->recordsize, cairn_compress_name(o->compress),
           txg);
    free(objs);
    free(w.buf);
    return 0;
}

typedef struct verify_ctx {
    objset_t *os;
    uint64_t obj;
    uint8_t *got, *want;
    uint64_t bad;
    uint64_t records, bytes;
    uint64_t txg[3];        /* per version, 0 = not seen yet */
    uint64_t max_txg;
} verify_ctx_t;

static void report(verify_ctx_t *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(verify_ctx_t *v, const char *fmt, ...)
{
    if (v->bad++ >= MAX_REPORTS) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("MISMATCH: ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

/* Compares got against want; reports the first differing byte. */
static bool same(verify_ctx_t *v, uint64_t idx, uint64_t rec, uint64_t off, const uint8_t *got,
                 const uint8_t *want, size_t len)
{
    if (!memcmp(got, want, len)) return true;
    size_t i = 0;
    while (got[i] == want[i]) i++;
    const stamp_t *s = (const stamp_t *)got;
    report(v, "object %" PRIu64 " record %" PRIu64 " byte %" PRIu64 ": got 0x%02x want 0x%02x "
           "(stamp found: magic %s seed %" PRIu64 " index %" PRIu64 " version %" PRIu64
           " txg %" PRIu64 ")", idx, rec, off + i, got[i], want[i],
           s->magic == OBJTEST_MAGIC ? "ok" : "BAD", s->seed, s->index, s->version, s->txg);
    return false;
}

static void verify_record(const opts_t *o, uint64_t idx, uint64_t rec, void *arg)
{
    verify_ctx_t *v = arg;
    uint64_t off = rec * o->recordsize;
    int e = dmu_read(v->os, v->obj, off, o->recordsize, v->got);
    if (e) {
        report(v, "object %" PRIu64 " record %" PRIu64 ": read failed: %s", idx, rec, strerror(-e));
        return;
    }
    uint64_t ver = has_v2(o, idx, rec) ? 2 : 1;
    uint32_t len = record_len(o, rec);
    stamp_t s;
    memcpy(&s, v->got, sizeof s);
    fill_record(v->want, len, o->seed, idx, ver, rec, s.txg);
    memset(v->want + len, 0, o->recordsize - len);
    v->records++;
    v->bytes += o->recordsize;
    if (!same(v, idx, rec, off, v->got, v->want, o->recordsize)) return;
    /* Every record of one version of one object was written in one tx. */
    uint64_t *t = &v->txg[ver];
    if (*t == 0) *t = s.txg;
    else if (*t != s.txg)
        report(v, "object %" PRIu64 " record %" PRIu64 ": version %" PRIu64 " stamped txg %"
               PRIu64 ", other records of it %" PRIu64, idx, rec, ver, s.txg, *t);
    if (s.txg == 0 || s.txg > v->max_txg)
        report(v, "object %" PRIu64 " record %" PRIu64 ": txg %" PRIu64
               " is not a synced txg of this pool (last %" PRIu64 ")", idx, rec, s.txg, v->max_txg);
}

static void verify_zero(verify_ctx_t *v, uint64_t idx, uint64_t off, uint64_t len,
                        const char *what)
{
    memset(v->got, 0xA5, len);
    int e = dmu_read(v->os, v->obj, off, len, v->got);
    if (e) {
        report(v, "object %" PRIu64 " %s at %" PRIu64 ": read failed: %s", idx, what, off,
               strerror(-e));
        return;
    }
    if (!is_zero(v->got, len))
        report(v, "object %" PRIu64 " %s at offset %" PRIu64 " does not read as zeros", idx, what,
               off);
    v->bytes += len;
}

static int cmd_verify(const opts_t *o)
{
    spa_t *spa = open_pool(o, SPA_IMPORT_READONLY);
    objset_t *os = NULL;
    int e = dmu_objset_open(spa, "objtest", &os);
    if (e) die("dmu_objset_open(objtest): %s", strerror(-e));
    uint64_t foreign, dup;
    uint64_t *objs = map_objects(os, o, &foreign, &dup);
    verify_ctx_t v = {.os = os, .got = cairn_alloc_aligned(o->recordsize),
                      .want = cairn_alloc_aligned(o->recordsize),
                      .max_txg = spa_last_synced_txg(spa)};
    if (foreign || dup)
        report(&v, "%" PRIu64 " objects not written with this seed/count, %" PRIu64 " duplicates",
               foreign, dup);
    uint64_t holes = 0;
    for (uint64_t i = 0; i < o->nobj; i++) {
        if (!objs[i]) {
            report(&v, "object index %" PRIu64 " is missing", i);
            continue;
        }
        v.obj = objs[i];
        v.txg[1] = v.txg[2] = 0;
        dmu_object_info_t info;
        e = dmu_object_info(os, objs[i], &info);
        uint64_t want_max = (high_first(o, i) + HIGH_RECORDS) * o->recordsize;
        if (e)
            report(&v, "object %" PRIu64 ": info failed: %s", i, strerror(-e));
        else if (info.props.recordsize != o->recordsize || info.max_offset != want_max ||
                 info.props.compress != o->compress)
            report(&v, "object %" PRIu64 ": recordsize %u max_offset %" PRIu64 " compress %d, want "
                   "%u %" PRIu64 " %d", i, info.props.recordsize, info.max_offset,
                   (int)info.props.compress, o->recordsize, want_max, (int)o->compress);
        for_each_record(o, i, verify_record, &v);
        for (uint64_t r = 0; r < dense_records(o); r++)
            if (is_hole(o, i, r)) {
                verify_zero(&v, i, r * o->recordsize, o->recordsize, "hole");
                holes++;
            }
        /* Never-written ranges: right after the dense region, in the middle of the
         * gap below 4 GiB, and past the end. */
        verify_zero(&v, i, dense_records(o) * o->recordsize, o->recordsize, "gap");
        verify_zero(&v, i, (2ULL << 30) + 12345, CAIRN_MIN(3000u, o->recordsize), "gap");
        verify_zero(&v, i, want_max, o->recordsize, "end");
        if (v.txg[1] && v.txg[2] && v.txg[2] <= v.txg[1])
            report(&v, "object %" PRIu64 ": version 2 has txg %" PRIu64 ", not after version 1's %"
                   PRIu64, i, v.txg[2], v.txg[1]);
    }
    dmu_objset_close(os);
    close_pool(spa, false);
    printf("verify: %s: %" PRIu64 " objects, %" PRIu64 " records, %" PRIu64 " holes, %" PRIu64
           " bytes read, %" PRIu64 " problems\n", v.bad ? "FAILED" : "ok", o->nobj, v.records,
           holes, v.bytes, v.bad);
    free(objs);
    free(v.got);
    free(v.want);
    return v.bad ? 1 : 0;
}

/* ---------------------------------------------------------------- crash writer */

/* A crash object: records 0..CRASH_DENSE_RECORDS-1 and one past 4 GiB. */
static uint64_t crash_record(const opts_t *o, uint64_t idx, uint64_t j)
{
    if (j < CRASH_DENSE_RECORDS) return j;
    return high_first(o, idx);
}
#define CRASH_RECORDS (CRASH_DENSE_RECORDS + 1)

typedef struct crash_state {
    const opts_t *o;
    objset_t *os;
    uint64_t *objs;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int64_t limit;          /* writers may issue steps <= limit */
    int64_t *done;          /* per thread: last step committed */
    bool stop;
    int64_t end;            /* --max-steps: last step to issue */
} crash_state_t;

static void crash_write_object(crash_state_t *c, uint64_t idx, uint64_t ver, dmu_tx_t *tx,
                               uint8_t *buf)
{
    const opts_t *o = c->o;
    for (uint64_t j = 0; j < CRASH_RECORDS; j++) {
        uint64_t rec = crash_record(o, idx, j);
        fill_record(buf, o->recordsize, o->seed, idx, ver, rec, dmu_tx_txg(tx));
        int e = dmu_write(c->os, c->objs[idx], rec * o->recordsize, o->recordsize, buf, tx);
        if (e) die("dmu_write: %s", strerror(-e));
    }
}

typedef struct writer_arg {
    crash_state_t *c;
    uint32_t t;
    int64_t first;
} writer_arg_t;

static void *crash_writer_thread(void *arg)
{
    writer_arg_t *wa = arg;
    crash_state_t *c = wa->c;
    const opts_t *o = c->o;
    uint8_t *buf = cairn_alloc_aligned(o->recordsize);
    for (int64_t k = wa->first;; k += o->threads) {
        pthread_mutex_lock(&c->lock);
        while (!c->stop && k > c->limit) pthread_cond_wait(&c->cv, &c->lock);
        bool stop = c->stop || (c->end >= 0 && k > c->end);
        pthread_mutex_unlock(&c->lock);
        if (stop) break;
        dmu_tx_t *tx = dmu_tx_begin(c->os);
        crash_write_object(c, (uint64_t)k % o->nobj, (uint64_t)k, tx, buf);
        dmu_tx_commit(tx);
        pthread_mutex_lock(&c->lock);
        c->done[wa->t] = k;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->lock);
    }
    free(buf);
    return NULL;
}

static void say(const char *what, int64_t v)
{
    printf("%s %" PRId64 "\n", what, v);
    fflush(stdout);
}

static int cmd_crash_writer(const opts_t *o)
{
    if (o->nobj % o->threads) die("--objects must be a multiple of --threads");
    spa_t *spa = open_pool(o, SPA_IMPORT_FORCE);
    crash_state_t c = {.o = o, .end = -1};
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cv, NULL);
    int e = dmu_objset_open(spa, "crash", &c.os);
    if (e == -ENOENT) {
        uint64_t id;
        e = dmu_objset_create(spa, "crash", &id);
        if (e) die("dmu_objset_create: %s", strerror(-e));
        e = dmu_objset_open(spa, "crash", &c.os);
    }
    if (e) die("dmu_objset_open(crash): %s", strerror(-e));
    uint64_t foreign, dup;
    c.objs = map_objects(c.os, o, &foreign, &dup);
    if (foreign || dup) die("objset 'crash' holds objects of another seed or count");

    /* Continue after the highest version on disk, at a multiple of nobj. */
    int64_t maxv = -1;
    uint8_t *buf = cairn_alloc_aligned(o->recordsize);
    for (uint64_t i = 0; i < o->nobj; i++) {
        if (!c.objs[i]) continue;
        e = dmu_read(c.os, c.objs[i], 0, sizeof(stamp_t), buf);
        if (e) die("read of object %" PRIu64 ": %s", i, strerror(-e));
        stamp_t s;
        memcpy(&s, buf, sizeof s);
        if (s.magic != OBJTEST_MAGIC || s.index != i) die("object %" PRIu64 " has a bad stamp", i);
        maxv = CAIRN_MAX(maxv, (int64_t)s.version);
    }
    int64_t base = (maxv + 1 + (int64_t)o->nobj - 1) / (int64_t)o->nobj * (int64_t)o->nobj;
    int64_t init_last = base + (int64_t)o->nobj - 1;
    say("limit", init_last);
    dmu_tx_t *tx = dmu_tx_begin(c.os);
    for (uint64_t i = 0; i < o->nobj; i++) {
        if (!c.objs[i]) c.objs[i] = alloc_tagged(c.os, o, i, tx);
        crash_write_object(&c, i, (uint64_t)(base + (int64_t)i), tx, buf);
    }
    dmu_tx_commit(tx);
    e = dmu_objset_sync(c.os);
    if (e) die("dmu_objset_sync: %s", strerror(-e));
    say("durable", init_last);
    c.limit = init_last + (int64_t)o->window;
    say("limit", c.limit);
    if (o->max_steps >= 0) c.end = init_last + o->max_steps;

    c.done = cairn_zalloc(o->threads * sizeof(int64_t));
    pthread_t *th = cairn_zalloc(o->threads * sizeof(pthread_t));
    writer_arg_t *wa = cairn_zalloc(o->threads * sizeof(writer_arg_t));
    for (uint32_t t = 0; t < o->threads; t++) {
        c.done[t] = init_last;
        wa[t] = (writer_arg_t){.c = &c, .t = t, .first = init_last + 1 + t};
        if (pthread_create(&th[t], NULL, crash_writer_thread, &wa[t])) die("pthread_create");
    }
    cairn_rng_t rng;
    cairn_rng_seed(&rng, o->seed ^ (uint64_t)getpid());
    int64_t durable = init_last;
    for (;;) {
        /* Sometimes sync at once, sometimes let the txg fill (or its timer fire). */
        uint64_t ms = cairn_rng_below(&rng, 60);
        struct timespec ts = {0, (long)(ms * 1000000)};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&c.lock);
        int64_t k = c.done[0];
        for (uint32_t t = 1; t < o->threads; t++) k = CAIRN_MIN(k, c.done[t]);
        pthread_mutex_unlock(&c.lock);
        e = dmu_objset_sync(c.os);
        if (e) die("dmu_objset_sync: %s", strerror(-e));
        if (k > durable) {
            durable = k;
            say("durable", k);
            pthread_mutex_lock(&c.lock);
            c.limit = k + (int64_t)o->window;
            pthread_mutex_unlock(&c.lock);
            /* Printed before any writer may issue a step up to it. */
            say("limit", k + (int64_t)o->window);
            pthread_mutex_lock(&c.lock);
            pthread_cond_broadcast(&c.cv);
            pthread_mutex_unlock(&c.lock);
        }
        /* Each thread's last step is within threads - 1 of the end. */
        if (c.end >= 0 && durable >= c.end - (int64_t)o->threads + 1) break;
    }
    pthread_mutex_lock(&c.lock);
    c.stop = true;
    pthread_cond_broadcast(&c.cv);
    pthread_mutex_unlock(&c.lock);
    for (uint32_t t = 0; t < o->threads; t++) pthread_join(th[t], NULL);
    dmu_objset_close(c.os);
    close_pool(spa, true);
    /* Exported: every step issued is on disk now. */
    say("durable", c.end);
    free(th);
    free(wa);
    free(c.done);
    free(c.objs);
    free(buf);
    return 0;
}

/* ---------------------------------------------------------------- crash verify */

static int cmd_crash_verify(const opts_t *o)
{
    spa_t *spa = open_pool(o, SPA_IMPORT_READONLY);
    uint64_t pool_txg = spa_last_synced_txg(spa);
    verify_ctx_t v = {.got = cairn_alloc_aligned(o->recordsize),
                      .want = cairn_alloc_aligned(o->recordsize)};
    objset_t *os = NULL;
    int e = dmu_objset_open(spa, "crash", &os);
    if (e) {
        close_pool(spa, false);
        if (e == -ENOENT && o->durable < 0) {
            printf("crash-verify: ok: nothing durable yet and no objset\n");
            return 0;
        }
        printf("crash-verify: FAILED: objset 'crash': %s (durable %" PRId64 ")\n", strerror(-e),
               o->durable);
        return 1;
    }
    v.os = os;
    uint64_t foreign, dup;
    uint64_t *objs = map_objects(os, o, &foreign, &dup);
    if (foreign || dup)
        report(&v, "%" PRIu64 " foreign objects, %" PRIu64 " duplicates", foreign, dup);
    int64_t *ver = cairn_zalloc(o->nobj * sizeof(int64_t));
    uint64_t *txg = cairn_zalloc(o->nobj * sizeof(uint64_t));
    int64_t vmin = INT64_MAX, vmax = -1;
    uint64_t present = 0;
    for (uint64_t i = 0; i < o->nobj; i++) {
        ver[i] = -1;
        if (!objs[i]) {
            if (o->durable >= 0) report(&v, "object %" PRIu64 " is missing", i);
            continue;
        }
        present++;
        for (uint64_t j = 0; j < CRASH_RECORDS; j++) {
            uint64_t rec = crash_record(o, i, j);
            e = dmu_read(os, objs[i], rec * o->recordsize, o->recordsize, v.got);
            if (e) {
                report(&v, "object %" PRIu64 " record %" PRIu64 ": read: %s", i, rec, strerror(-e));
                break;
            }
            stamp_t s;
            memcpy(&s, v.got, sizeof s);
            if (j == 0) {
                ver[i] = (int64_t)s.version;
                txg[i] = s.txg;
            } else if ((int64_t)s.version != ver[i] || s.txg != txg[i]) {
                report(&v, "object %" PRIu64 " mixes versions: record %" PRIu64 " has version %"
                       PRIu64 " txg %" PRIu64 ", record 0 has version %" PRId64 " txg %" PRIu64, i,
                       rec, s.version, s.txg, ver[i], txg[i]);
            }
            fill_record(v.want, o->recordsize, o->seed, i, (uint64_t)ver[i], rec, txg[i]);
            if (!same(&v, i, rec, rec * o->recordsize, v.got, v.want, o->recordsize)) break;
        }
        int64_t vi = ver[i];
        if (vi < 0) continue;
        vmin = CAIRN_MIN(vmin, vi);
        vmax = CAIRN_MAX(vmax, vi);
        if ((uint64_t)vi % o->nobj != i)
            report(&v, "object %" PRIu64 " holds version %" PRId64 ", which step never wrote to it",
                   i, vi);
        if (o->durable >= (int64_t)i) {
            /* The last step <= K that wrote this object was acknowledged durable. */
            int64_t lb = o->durable - (int64_t)(((uint64_t)o->durable - i) % o->nobj);
            if (vi < lb)
                report(&v, "object %" PRIu64 " is at version %" PRId64 " but version %" PRId64
                       " was durable (K=%" PRId64 "): lost a durable write", i, vi, lb, o->durable);
        }
        if (o->limit >= 0 && vi > o->limit)
            report(&v, "object %" PRIu64 " is at version %" PRId64 ", past the writers' limit %"
                   PRId64, i, vi, o->limit);
        if (txg[i] == 0 || txg[i] > pool_txg)
            report(&v, "object %" PRIu64 " stamped txg %" PRIu64 ", pool is at txg %" PRIu64, i,
                   txg[i], pool_txg);
    }
    /* One writer per object class: as its versions grow, its txgs never go back. */
    for (uint64_t a = 0; a < o->nobj; a++)
        for (uint64_t b = 0; b < o->nobj; b++)
            if (a % o->threads == b % o->threads && ver[a] >= 0 && ver[b] >= 0 &&
                ver[a] < ver[b] && txg[a] > txg[b])
                report(&v, "object %" PRIu64 " version %" PRId64 " has txg %" PRIu64
                       " but later object %" PRIu64 " version %" PRId64 " has older txg %" PRIu64,
                       a, ver[a], txg[a], b, ver[b], txg[b]);
    dmu_objset_close(os);
    close_pool(spa, false);
    if (vmax < 0) vmin = -1;
    printf("crash-verify: %s: %" PRIu64 "/%" PRIu64 " objects, versions %" PRId64 "..%" PRId64
           ", durable %" PRId64 ", limit %" PRId64 ", pool txg %" PRIu64 ", %" PRIu64 " problems\n",
           v.bad ? "FAILED" : "ok", present, o->nobj, vmin, vmax, o->durable, o->limit, pool_txg,
           v.bad);
    free(objs);
    free(ver);
    free(txg);
    free(v.got);
    free(v.want);
    return v.bad ? 1 : 0;
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
    fputs("usage: cairn_objtest MODE -d DIR [-d DIR]... POOL --seed S [options]\n"
          "  MODE: write | verify | crash-writer | crash-verify\n"
          "  --objects N       objects (write/verify: 8, crash: 16)\n"
          "  --size BYTES      write/verify: dense bytes per object (default 1M)\n"
          "  --recordsize R    (write/verify: 128K, crash: 16K)\n"
          "  --compress C      off|lzjb|lz4|zle|gzip-N (default lz4)\n"
          "  --force           write: import even if not exported\n"
          "  --threads T       crash-writer/verify: writer threads (default 2)\n"
          "  --window W        crash-writer: steps allowed past the last durable one\n"
          "  --max-steps N     crash-writer: stop, sync and export after N steps\n"
          "  --durable K       crash-verify: last 'durable K' printed (-1: none)\n"
          "  --limit L         crash-verify: last 'limit L' printed (-1: unknown)\n",
          stderr);
    exit(2);
}

static uint64_t parse_u64(const char *s, const char *what)
{
    uint64_t v;
    if (cairn_parse_size(s, &v)) die("bad %s '%s'", what, s);
    return v;
}

static int64_t parse_i64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s) die("bad %s '%s'", what, s);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    opts_t o = {.mode = argv[1], .seed = 1, .nobj = 0, .size = CAIRN_MIB, .recordsize = 0,
                .compress = CAIRN_COMPRESS_LZ4, .threads = 2, .durable = -1, .limit = -1,
                .window = 0, .max_steps = -1};
    bool crash = !strncmp(o.mode, "crash-", 6);
    if (strcmp(o.mode, "write") && strcmp(o.mode, "verify") && strcmp(o.mode, "crash-writer") &&
        strcmp(o.mode, "crash-verify"))
        usage();
    enum { O_SEED = 256, O_OBJECTS, O_SIZE, O_RS, O_COMP, O_FORCE, O_THREADS, O_WINDOW, O_MAX,
           O_DURABLE, O_LIMIT };
    static const struct option lo[] = {
        {"seed", 1, 0, O_SEED}, {"objects", 1, 0, O_OBJECTS}, {"size", 1, 0, O_SIZE},
        {"recordsize", 1, 0, O_RS}, {"compress", 1, 0, O_COMP}, {"force", 0, 0, O_FORCE},
        {"threads", 1, 0, O_THREADS}, {"window", 1, 0, O_WINDOW}, {"max-steps", 1, 0, O_MAX},
        {"durable", 1, 0, O_DURABLE}, {"limit", 1, 0, O_LIMIT}, {0, 0, 0, 0}};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "d:", lo, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (o.ndirs == MAX_DIRS) die("too many -d");
            o.dirs[o.ndirs++] = optarg;
            break;
        case O_SEED: o.seed = (uint64_t)parse_i64(optarg, "seed"); break;
        case O_OBJECTS: o.nobj = parse_u64(optarg, "object count"); break;
        case O_SIZE: o.size = parse_u64(optarg, "size"); break;
        case O_RS: o.recordsize = (uint32_t)parse_u64(optarg, "recordsize"); break;
        case O_COMP:
            if (cairn_compress_from_name(optarg, &o.compress)) die("bad compression '%s'", optarg);
            break;
        case O_FORCE: o.force = true; break;
        case O_THREADS: o.threads = (uint32_t)parse_u64(optarg, "thread count"); break;
        case O_WINDOW: o.window = parse_u64(optarg, "window"); break;
        case O_MAX: o.max_steps = parse_i64(optarg, "max-steps"); break;
        case O_DURABLE: o.durable = parse_i64(optarg, "durable"); break;
        case O_LIMIT: o.limit = parse_i64(optarg, "limit"); break;
        default: usage();
        }
    }
    if (optind != argc - 1 || o.ndirs == 0) usage();
    o.pool = argv[optind];
    if (!o.nobj) o.nobj = crash ? 16 : 8;
    if (!o.recordsize) o.recordsize = crash ? 16 * 1024 : 128 * 1024;
    if (o.recordsize < DMU_MIN_RECORDSIZE || o.recordsize > DMU_MAX_RECORDSIZE ||
        (o.recordsize & (o.recordsize - 1)))
        die("recordsize must be a power of two from 512 to 1M");
    if (o.size == 0 || o.size > 64 * CAIRN_MIB) die("--size must be 1 .. 64M");
    if (o.size > HIGH_BASE) die("--size too large");
    if (o.threads == 0 || o.threads > 16) die("--threads must be 1..16");
    if (!o.window) o.window = 4 * o.nobj;
    if (o.recordsize < sizeof(stamp_t)) die("recordsize too small for the stamp");

    dmu_init();
    if (!strcmp(o.mode, "write")) return cmd_write(&o);
    if (!strcmp(o.mode, "verify")) return cmd_verify(&o);
    if (!strcmp(o.mode, "crash-writer")) return cmd_crash_writer(&o);
    return cmd_crash_verify(&o);
}
