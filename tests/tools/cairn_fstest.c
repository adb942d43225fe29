/*
 * cairn_fstest: crash writer and tree verifier for filesystems (the POSIX
 * layer over datasets), run in process by tests/integration/test_crash_datasets.sh.
 *
 * The writer is meant to be killed with SIGKILL at any moment; the verifier
 * then proves the pool holds a consistent tree and kept everything the writer
 * was told was durable. Three ideas make that checkable without a model of
 * every operation:
 *
 * Self-describing content. Every regular file is a sequence of 512-byte
 * chunks; each chunk starts with (magic, seed, file id, version, chunk index)
 * and the rest is a hash of those. Every operation the writer does keeps every
 * file a whole number of valid chunks (create, overwrite of a chunk range,
 * append, truncate to a chunk boundary), so after any crash each chunk must be
 * exactly one version of the right chunk of the right file: a stale block, a
 * block of another file, a torn record or a size that disagrees with the data
 * all show. Symlink targets are "sym-SEED-OP".
 *
 * Structural invariants. The verifier walks each filesystem and each
 * snapshot: every entry leads to a live object of the entry's type, lookup
 * agrees with readdir, directories are reached once with ".." naming their
 * parent, a directory's size is entries + 2 and its link count 2 +
 * subdirectories, its ZAP holds exactly the entries, every other node's link
 * count equals the entries naming it, and every allocated object of the object
 * set except the master node (object 1) is reachable (nothing leaked).
 *
 * A journal for durability. Operations are numbered; before doing one the
 * writer appends "N kind ..." to the journal file (so every operation that may
 * have happened is in it). A syncer repeatedly takes K = the highest number
 * such that every operation <= K has returned, calls zpl_commit on both
 * filesystems and prints "durable K" (stdout and journal). Acknowledged files
 * ("ack N F": acks/aN in filesystem F, content a function of N, fsync'ed) and
 * recursive snapshots ("snap N": fs1@sN and fs1/sub@sN) are what the verifier
 * holds the pool to: created at <= K and not removed by a journaled operation
 * means present and exact; removed at <= K means absent; otherwise either (but
 * a recursive snapshot is atomic: both or neither). On start the writer
 * reconciles the journal with what the crash left (operations past the last K
 * that did not happen are closed with new, journaled operations) and dies if
 * something durable is missing.
 *
 * Modes:
 *   crash-writer -d DIR POOL --seed S --journal FILE [--threads T] [--max-ops N]
 *   verify       -d DIR POOL --seed S [--journal FILE] [--durable K]
 *                (read-only import; exit 0, or 1 with a "PROBLEM ..." line for
 *                each violation; without a journal only structure and content
 *                are checked)
 */
#include <cairn/dsl.h>
#include <cairn/util.h>
#include <cairn/zap.h>
#include <cairn/zpl.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 512
#define CHUNK_MAGIC 0x434149524e465343ULL   /* "CAIRNFSC" */
#define NFS 2                               /* fs1 and fs1/sub */
#define MAX_DIRS 16
#define MAX_THREADS 8
#define SNAP_KEEP 4
#define MAX_PROBLEMS 200
#define NAME_LEN 512

typedef struct opts {
    const char *mode;
    const char *pool;
    const char *dirs[MAX_DIRS];
    size_t ndirs;
    const char *journal;
    uint64_t seed;
    uint32_t threads;
    int64_t durable;
    int64_t max_ops;
} opts_t;

static const zpl_cred_t fs_cred = {.uid = 0, .gid = 0};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cairn_fstest: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stdout);
    exit(2);
}

/* ---------------------------------------------------------------- content */

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

/* Chunk idx of file id at version ver. Half the chunks are half zeros, so
 * compression gets something to do. */
static void chunk_fill(uint8_t *buf, uint64_t seed, uint64_t id, uint64_t ver, uint64_t idx)
{
    uint64_t w[CHUNK / 8];
    uint64_t base = hash4(seed, id, ver, idx);
    w[0] = CHUNK_MAGIC;
    w[1] = seed;
    w[2] = id;
    w[3] = ver;
    w[4] = idx;
    for (size_t i = 5; i < CHUNK / 8; i++) w[i] = ((base & 1) && (i & 1)) ? 0 : mix64(base + i);
    memcpy(buf, w, CHUNK);
}

/* An acknowledged file: everything follows from its op number. */
static uint64_t ack_chunks(uint64_t c) { return 1 + mix64(c) % 12; }

static void ack_name(char *buf, size_t len, uint64_t c) { snprintf(buf, len, "a%" PRIu64, c); }

/* ---------------------------------------------------------------- journal */

typedef struct jack {
    uint64_t c;          /* op that created acks/aC */
    int fs;
    uint64_t rm;         /* first op that removed it (unack or lost), 0: none */
} jack_t;

typedef struct jsnap {
    uint64_t c;          /* op that took fs1@sC and fs1/sub@sC */
    uint64_t rm;
} jsnap_t;

typedef struct journal {
    uint64_t maxop;
    uint64_t durable;
    bool ends_clean;     /* the file ends with a newline (or is empty) */
    bool present;        /* verify without --journal: structure and content only */
    jack_t *acks;
    size_t nacks, capacks;
    jsnap_t *snaps;
    size_t nsnaps, capsnaps;
} journal_t;

static jack_t *journal_ack(journal_t *j, uint64_t c)
{
    for (size_t i = 0; i < j->nacks; i++)
        if (j->acks[i].c == c) return &j->acks[i];
    return NULL;
}

static jsnap_t *journal_snap(journal_t *j, uint64_t c)
{
    for (size_t i = 0; i < j->nsnaps; i++)
        if (j->snaps[i].c == c) return &j->snaps[i];
    return NULL;
}

static void set_rm(uint64_t *rm, uint64_t op)
{
    if (!*rm || op < *rm) *rm = op;
}

/* Reads the journal (a missing file is an empty journal). A last line without
 * its newline (cannot normally happen: lines are single appends) is ignored. */
static void journal_read(const char *path, journal_t *j)
{
    memset(j, 0, sizeof(*j));
    j->ends_clean = true;
    j->present = path != NULL;
    if (!path) {
        j->maxop = UINT64_MAX;
        return;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return;
        die("cannot read journal %s: %s", path, strerror(errno));
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        if (!l || line[l - 1] != '\n') {
            j->ends_clean = false;
            break;
        }
        uint64_t n, a;
        int fs;
        char kind[32];
        if (sscanf(line, "durable %" SCNu64, &n) == 1) {
            if (n > j->durable) j->durable = n;
            continue;
        }
        if (sscanf(line, "%" SCNu64 " %31s", &n, kind) != 2) die("bad journal line: %s", line);
        if (n > j->maxop) j->maxop = n;
        if (!strcmp(kind, "ack") && sscanf(line, "%*u %*s %d", &fs) == 1) {
            if (j->nacks == j->capacks) {
                j->capacks = j->capacks ? 2 * j->capacks : 64;
                j->acks = realloc(j->acks, j->capacks * sizeof(jack_t));
            }
            j->acks[j->nacks++] = (jack_t){.c = n, .fs = fs};
        } else if ((!strcmp(kind, "unack") || !strcmp(kind, "lost")) &&
                   sscanf(line, "%*u %*s %d %" SCNu64, &fs, &a) == 2) {
            jack_t *ja = journal_ack(j, a);
            if (!ja) die("journal: %s of unknown ack %" PRIu64, kind, a);
            set_rm(&ja->rm, n);
        } else if (!strcmp(kind, "snap")) {
            if (j->nsnaps == j->capsnaps) {
                j->capsnaps = j->capsnaps ? 2 * j->capsnaps : 32;
                j->snaps = realloc(j->snaps, j->capsnaps * sizeof(jsnap_t));
            }
            j->snaps[j->nsnaps++] = (jsnap_t){.c = n};
        } else if (!strcmp(kind, "unsnap") && sscanf(line, "%*u %*s %" SCNu64, &a) == 1) {
            jsnap_t *js = journal_snap(j, a);
            if (!js) die("journal: unsnap of unknown snapshot %" PRIu64, a);
            set_rm(&js->rm, n);
        }
    }
    fclose(f);
}

static void journal_free(journal_t *j)
{
    free(j->acks);
    free(j->snaps);
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

static void fs_name(char *buf, size_t len, const char *pool, int fsidx)
{
    snprintf(buf, len, fsidx == 0 ? "%s/fs1" : "%s/fs1/sub", pool);
}

/* Looks up name in dir; the node's attributes in *a when a is not NULL. */
static int lookup_attr(zpl_node_t *dir, const char *name, zpl_node_t **out, zpl_attr_t *a)
{
    int e = zpl_lookup(dir, name, out);
    if (e) return e;
    if (a && (e = zpl_getattr(*out, a))) {
        zpl_node_rele(*out);
        *out = NULL;
    }
    return e;
}

/* Chunks [first, first + count) of file id at version ver, one write (one txg). */
static int write_chunks(zpl_node_t *n, uint64_t seed, uint64_t id, uint64_t ver, uint64_t first,
                        uint64_t count)
{
    uint8_t *buf = malloc(count * CHUNK);
    for (uint64_t i = 0; i < count; i++)
        chunk_fill(buf + i * CHUNK, seed, id, ver, first + i);
    int e = zpl_write(n, first * CHUNK, count * CHUNK, buf, 0, NULL);
    free(buf);
    return e;
}

/* The exact content of ack c: present and whole? (1 yes, 0 empty, -1 otherwise) */
static int ack_state(zpl_node_t *n, uint64_t seed, uint64_t c)
{
    zpl_attr_t a;
    if (zpl_getattr(n, &a) || !S_ISREG(a.mode)) return -1;
    if (a.size == 0) return 0;
    uint64_t nch = ack_chunks(c);
    if (a.size != nch * CHUNK) return -1;
    uint8_t *buf = malloc(nch * CHUNK), want[CHUNK];
    size_t got = 0;
    bool eof;
    int r = -1;
    if (!zpl_read(n, 0, nch * CHUNK, buf, &got, &eof) && got == nch * CHUNK) {
        r = 1;
        for (uint64_t i = 0; i < nch && r == 1; i++) {
            chunk_fill(want, seed, c, c, i);
            if (memcmp(want, buf + i * CHUNK, CHUNK)) r = -1;
        }
    }
    free(buf);
    return r;
}

/* ================================================================ writer */

typedef struct writer {
    const opts_t *o;
    spa_t *spa;
    dsl_pool_t *dp;
    zpl_fs_t *fs[NFS];
    char dsname[NFS][DSL_NAME_MAX + 1];
    int jfd;

    pthread_mutex_t lock;            /* op numbers, journal order, ack lists */
    uint64_t next_op;
    uint64_t stop_op;                /* --max-ops: no op numbered >= this */
    _Atomic uint64_t inflight[MAX_THREADS + 1];
    uint64_t *acks[NFS];             /* live acknowledged files per fs */
    size_t nacks[NFS], capacks[NFS];

    pthread_mutex_t snap_lock;
    uint64_t snaps[64];              /* live snapshots, oldest first */
    size_t nsnaps;

    atomic_bool stop;
    uint64_t last_durable;
} writer_t;

static void jwrite(writer_t *w, const char *line)
{
    size_t len = strlen(line);
    if (write(w->jfd, line, len) != (ssize_t)len) die("journal write: %s", strerror(errno));
}

/* Takes the next op number for thread t and journals it (before the op runs).
 * 0: the writer is stopping. */
static uint64_t op_begin(writer_t *w, unsigned t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static uint64_t op_begin(writer_t *w, unsigned t, const char *fmt, ...)
{
    char line[1024], rest[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&w->lock);
    if (w->next_op >= w->stop_op) {
        pthread_mutex_unlock(&w->lock);
        atomic_store(&w->stop, true);
        return 0;
    }
    uint64_t n = w->next_op++;
    atomic_store(&w->inflight[t], n);
    snprintf(line, sizeof line, "%" PRIu64 " %s\n", n, rest);
    jwrite(w, line);
    pthread_mutex_unlock(&w->lock);
    return n;
}

static void op_end(writer_t *w, unsigned t) { atomic_store(&w->inflight[t], 0); }

static void ack_list_add(writer_t *w, int fs, uint64_t c)
{
    if (w->nacks[fs] == w->capacks[fs]) {
        w->capacks[fs] = w->capacks[fs] ? 2 * w->capacks[fs] : 64;
        w->acks[fs] = realloc(w->acks[fs], w->capacks[fs] * sizeof(uint64_t));
    }
    w->acks[fs][w->nacks[fs]++] = c;
}

/* Everything that has returned is made durable, then announced. */
static void writer_commit(writer_t *w)
{
    pthread_mutex_lock(&w->lock);
    uint64_t k = w->next_op - 1;
    for (unsigned t = 0; t <= MAX_THREADS; t++) {
        uint64_t f = atomic_load(&w->inflight[t]);
        if (f && f - 1 < k) k = f - 1;
    }
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < NFS; i++) {
        int e = zpl_commit(w->fs[i]);
        if (e) die("zpl_commit %s: %s", w->dsname[i], strerror(-e));
    }
    if (k > w->last_durable) {
        w->last_durable = k;
        char line[64];
        snprintf(line, sizeof line, "durable %" PRIu64 "\n", k);
        pthread_mutex_lock(&w->lock);
        jwrite(w, line);
        pthread_mutex_unlock(&w->lock);
        fputs(line, stdout);
        fflush(stdout);
    }
}

static void *syncer_main(void *arg)
{
    writer_t *w = arg;
    while (!atomic_load(&w->stop)) {
        struct timespec ts = {0, 40 * 1000 * 1000};
        nanosleep(&ts, NULL);
        writer_commit(w);
    }
    return NULL;
}

/* A random directory under w/ of fs (held), its path in path. */
static zpl_node_t *pick_dir(writer_t *w, int fs, cairn_rng_t *r, char *path, size_t plen)
{
    zpl_node_t *root, *d;
    if (zpl_root(w->fs[fs], &root)) die("zpl_root");
    if (zpl_lookup(root, "w", &d)) die("w/ missing in %s", w->dsname[fs]);
    zpl_node_rele(root);
    snprintf(path, plen, "w");
    for (int depth = 0; depth < 4 && cairn_rng_below(r, 3) != 0; depth++) {
        char name[8];
        snprintf(name, sizeof name, "d%u", (unsigned)cairn_rng_below(r, 4));
        zpl_node_t *c;
        zpl_attr_t a;
        if (lookup_attr(d, name, &c, &a)) break;
        if (!S_ISDIR(a.mode)) {
            zpl_node_rele(c);
            break;
        }
        zpl_node_rele(d);
        d = c;
        size_t l = strlen(path);
        snprintf(path + l, plen - l, "/%s", name);
    }
    return d;
}

static void pick_name(cairn_rng_t *r, char prefix, char *buf)
{
    unsigned range = prefix == 'f' ? 10 : 4;
    snprintf(buf, 8, "%c%u", prefix, (unsigned)cairn_rng_below(r, range));
}

static char any_prefix(cairn_rng_t *r)
{
    static const char p[] = "fffdl";
    return p[cairn_rng_below(r, 5)];
}

/* Errors a random operation may meet on a random tree; anything else is fatal. */
static void expect(int e, const char *what, const char *path)
{
    switch (e) {
    case 0: case -ENOENT: case -EEXIST: case -ENOTDIR: case -EISDIR: case -ENOTEMPTY:
    case -EINVAL: case -EPERM: case -EMLINK: case -ESTALE:
        return;
    default: die("%s %s: %s", what, path, strerror(-e));
    }
}

static uint64_t pick_chunks(cairn_rng_t *r)
{
    uint64_t p = cairn_rng_below(r, 100);
    if (p < 70) return 1 + cairn_rng_below(r, 8);
    if (p < 96) return 9 + cairn_rng_below(r, 56);
    return 65 + cairn_rng_below(r, 500);
}

/* The id of a regular file from its first chunk (0 when unreadable/empty). */
static uint64_t file_id(zpl_node_t *n)
{
    uint64_t hdr[5] = {0};
    size_t got = 0;
    bool eof;
    if (zpl_read(n, 0, sizeof hdr, hdr, &got, &eof) || got != sizeof hdr) return 0;
    return hdr[0] == CHUNK_MAGIC ? hdr[2] : 0;
}

static void snapshot_ops(writer_t *w, unsigned t)
{
    char name[DSL_NAME_MAX + 64], err[512] = "";
    pthread_mutex_lock(&w->snap_lock);
    uint64_t n = op_begin(w, t, "snap");
    if (n) {
        snprintf(name, sizeof name, "%s@s%" PRIu64, w->dsname[0], n);
        int e = dsl_snapshot(w->dp, name, true, err, sizeof err);
        if (e) die("snapshot %s: %s", name, err);
        w->snaps[w->nsnaps++] = n;
        op_end(w, t);
    }
    while (w->nsnaps > SNAP_KEEP) {
        uint64_t old = w->snaps[0];
        n = op_begin(w, t, "unsnap %" PRIu64, old);
        if (!n) break;
        for (int i = NFS - 1; i >= 0; i--) {
            snprintf(name, sizeof name, "%s@s%" PRIu64, w->dsname[i], old);
            int e = dsl_dataset_destroy(w->dp, name, false, false, err, sizeof err);
            if (e && e != -ENOENT) die("destroy %s: %s", name, err);
        }
        memmove(w->snaps, w->snaps + 1, (w->nsnaps - 1) * sizeof(uint64_t));
        w->nsnaps--;
        op_end(w, t);
    }
    pthread_mutex_unlock(&w->snap_lock);
}

static void ack_op(writer_t *w, unsigned t, int fs)
{
    uint64_t n = op_begin(w, t, "ack %d", fs);
    if (!n) return;
    zpl_node_t *root, *acks, *f;
    char name[32];
    ack_name(name, sizeof name, n);
    if (zpl_root(w->fs[fs], &root) || zpl_lookup(root, "acks", &acks)) die("acks/ missing");
    int e = zpl_create(acks, name, 0644, &fs_cred, ZPL_CREATE_GUARDED, NULL, &f, NULL);
    if (e) die("create acks/%s: %s", name, strerror(-e));
    e = write_chunks(f, w->o->seed, n, n, 0, ack_chunks(n));
    if (!e) e = zpl_fsync(f);
    if (e) die("write acks/%s: %s", name, strerror(-e));
    zpl_node_rele(f);
    zpl_node_rele(acks);
    zpl_node_rele(root);
    pthread_mutex_lock(&w->lock);
    ack_list_add(w, fs, n);
    pthread_mutex_unlock(&w->lock);
    op_end(w, t);
}

static void unack_op(writer_t *w, unsigned t, int fs, cairn_rng_t *r)
{
    /* Take the victim off the list before journaling, under the same lock, so
     * no other thread picks it. */
    pthread_mutex_lock(&w->lock);
    if (w->nacks[fs] == 0) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    size_t i = cairn_rng_below(r, w->nacks[fs]);
    uint64_t c = w->acks[fs][i];
    w->acks[fs][i] = w->acks[fs][--w->nacks[fs]];
    pthread_mutex_unlock(&w->lock);
    uint64_t n = op_begin(w, t, "unack %d %" PRIu64, fs, c);
    if (!n) return;
    zpl_node_t *root, *acks;
    char name[32];
    ack_name(name, sizeof name, c);
    if (zpl_root(w->fs[fs], &root) || zpl_lookup(root, "acks", &acks)) die("acks/ missing");
    int e = zpl_remove(acks, name, NULL);
    if (e) die("remove acks/%s: %s", name, strerror(-e));
    zpl_node_rele(acks);
    zpl_node_rele(root);
    op_end(w, t);
}

/* Threads must not interleave read-modify-write cycles on one file (an append
 * computed from a stale size, or a write of an id another thread just
 * replaced, would break the one-id-per-file rule the verifier holds files to):
 * data operations hold a lock striped by inode number. */
#define DATA_STRIPES 64
static pthread_mutex_t data_stripe[DATA_STRIPES];

/* A data operation on regular file n: kind 0 first write after create (whole
 * file), 1 overwrite of a chunk range, 2 append, 3 truncate to a chunk. */
static void file_data_op(writer_t *w, unsigned t, cairn_rng_t *r, zpl_node_t *n, int fs,
                         const char *path, const char *name, int kind)
{
    zpl_attr_t a;
    pthread_mutex_t *m = &data_stripe[zpl_node_ino(n) % DATA_STRIPES];
    pthread_mutex_lock(m);
    if (zpl_getattr(n, &a)) goto out;   /* removed meanwhile */
    uint64_t nch = a.size / CHUNK, id = file_id(n), op;
    if (kind == 3 && nch) {
        uint64_t keep = cairn_rng_below(r, nch);
        if (!(op = op_begin(w, t, "truncate %d %s/%s %" PRIu64, fs, path, name, keep))) goto out;
        zpl_setattr_t sa = {.mask = ZPL_SET_SIZE, .size = keep * CHUNK};
        expect(zpl_setattr(n, &sa, NULL), "truncate", name);
    } else {
        uint64_t first = nch, count = pick_chunks(r);
        if (kind == 0) {
            first = 0;
        } else if (kind == 1 && nch) {
            first = cairn_rng_below(r, nch);
            count = 1 + cairn_rng_below(r, nch - first);
        }
        if (!(op = op_begin(w, t, "write %d %s/%s %" PRIu64 "+%" PRIu64, fs, path, name, first,
                            count)))
            goto out;
        /* An empty file (new, truncated, or left so by a crash) takes a new identity. */
        if (!id || !nch) id = op;
        expect(write_chunks(n, w->o->seed, id, op, first, count), "write", name);
    }
    op_end(w, t);
out:
    pthread_mutex_unlock(m);
}

/* One random namespace or data operation under w/ of a random filesystem. */
static void random_op(writer_t *w, unsigned t, cairn_rng_t *r)
{
    int fs = (int)cairn_rng_below(r, NFS);
    uint64_t p = cairn_rng_below(r, 1000);
    if (p < 3) return snapshot_ops(w, t);
    if (p < 23) return ack_op(w, t, fs);
    if (p < 29) return unack_op(w, t, fs, r);

    char path[256], path2[256], name[8], name2[8];
    zpl_node_t *d = pick_dir(w, fs, r, path, sizeof path), *d2 = NULL, *n = NULL;
    uint64_t op;
    int e = 0;
    zpl_attr_t a;
    p = cairn_rng_below(r, 100);
    if (p < 18) {                                   /* create (+ first write) */
        pick_name(r, 'f', name);
        if (!(op = op_begin(w, t, "create %d %s/%s", fs, path, name))) goto out;
        e = zpl_create(d, name, 0644, &fs_cred, ZPL_CREATE_GUARDED, NULL, &n, NULL);
        expect(e, "create", name);
        op_end(w, t);
        if (!e) file_data_op(w, t, r, n, fs, path, name, 0);
        goto out;
    } else if (p < 46) {                            /* overwrite / append / truncate */
        pick_name(r, 'f', name);
        if (lookup_attr(d, name, &n, &a) || !S_ISREG(a.mode)) goto out;
        file_data_op(w, t, r, n, fs, path, name, 1 + (int)cairn_rng_below(r, 3));
        goto out;
    } else if (p < 60) {                            /* rename */
        d2 = pick_dir(w, fs, r, path2, sizeof path2);
        pick_name(r, any_prefix(r), name);
        pick_name(r, any_prefix(r), name2);
        if (!(op = op_begin(w, t, "rename %d %s/%s %s/%s", fs, path, name, path2, name2))) goto out;
        expect(zpl_rename(d, name, d2, name2, NULL, NULL), "rename", name);
    } else if (p < 66) {                            /* hard link */
        d2 = pick_dir(w, fs, r, path2, sizeof path2);
        pick_name(r, 'f', name);
        pick_name(r, cairn_rng_below(r, 2) ? 'f' : 'l', name2);
        if (lookup_attr(d, name, &n, &a) || S_ISDIR(a.mode)) goto out;
        if (!(op = op_begin(w, t, "link %d %s/%s %s/%s", fs, path, name, path2, name2))) goto out;
        expect(zpl_link(n, d2, name2, NULL), "link", name2);
    } else if (p < 80) {                            /* unlink */
        pick_name(r, cairn_rng_below(r, 3) ? 'f' : 'l', name);
        if (!(op = op_begin(w, t, "unlink %d %s/%s", fs, path, name))) goto out;
        expect(zpl_remove(d, name, NULL), "remove", name);
    } else if (p < 88) {                            /* mkdir */
        pick_name(r, 'd', name);
        if (!(op = op_begin(w, t, "mkdir %d %s/%s", fs, path, name))) goto out;
        e = zpl_mkdir(d, name, 0755, &fs_cred, &n, NULL);
        expect(e, "mkdir", name);
    } else if (p < 94) {                            /* rmdir */
        pick_name(r, 'd', name);
        if (!(op = op_begin(w, t, "rmdir %d %s/%s", fs, path, name))) goto out;
        expect(zpl_rmdir(d, name, NULL), "rmdir", name);
    } else {                                        /* symlink */
        char target[64];
        pick_name(r, 'l', name);
        if (!(op = op_begin(w, t, "symlink %d %s/%s", fs, path, name))) goto out;
        snprintf(target, sizeof target, "sym-%" PRIu64 "-%" PRIu64, w->o->seed, op);
        e = zpl_symlink(d, name, target, &fs_cred, &n, NULL);
        expect(e, "symlink", name);
    }
    op_end(w, t);
out:
    if (n) zpl_node_rele(n);
    if (d2) zpl_node_rele(d2);
    zpl_node_rele(d);
}

typedef struct worker_arg {
    writer_t *w;
    unsigned t;
} worker_arg_t;

static void *worker_main(void *arg)
{
    worker_arg_t *wa = arg;
    cairn_rng_t r;
    cairn_rng_seed(&r, hash4(wa->w->o->seed, wa->w->next_op, wa->t, (uint64_t)getpid()));
    while (!atomic_load(&wa->w->stop)) random_op(wa->w, wa->t, &r);
    return NULL;
}

static void ensure_dataset(writer_t *w, const char *name)
{
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM};
    char err[512] = "";
    int e = dsl_dataset_create(w->dp, name, &co, err, sizeof err);
    if (e && e != -EEXIST) die("create %s: %s", name, err);
}

static void ensure_dir(zpl_fs_t *fs, const char *name)
{
    zpl_node_t *root, *d;
    if (zpl_root(fs, &root)) die("zpl_root");
    int e = zpl_mkdir(root, name, 0755, &fs_cred, &d, NULL);
    if (e && e != -EEXIST) die("mkdir %s: %s", name, strerror(-e));
    if (!e) zpl_node_rele(d);
    zpl_node_rele(root);
}

static bool snap_exists(writer_t *w, int fs, uint64_t c)
{
    char name[DSL_NAME_MAX + 64];
    dsl_dataset_t *ds;
    snprintf(name, sizeof name, "%s@s%" PRIu64, w->dsname[fs], c);
    if (dsl_dataset_hold(w->dp, name, &ds)) return false;
    dsl_dataset_rele(ds);
    return true;
}

/* Closes what the last crash left open: every journaled ack and snapshot gets
 * a definite state again, by new journaled ops (thread slot MAX_THREADS). */
static void writer_reconcile(writer_t *w, journal_t *j)
{
    const unsigned t = MAX_THREADS;
    char err[512], name[DSL_NAME_MAX + 64];
    for (size_t i = 0; i < j->nacks; i++) {
        jack_t *ja = &j->acks[i];
        zpl_node_t *root, *acks, *f = NULL;
        char an[32];
        ack_name(an, sizeof an, ja->c);
        if (zpl_root(w->fs[ja->fs], &root) || zpl_lookup(root, "acks", &acks)) die("acks/ missing");
        int e = zpl_lookup(acks, an, &f);
        int st = e ? -2 : ack_state(f, w->o->seed, ja->c);
        if (f) zpl_node_rele(f);
        if (ja->rm) {
            /* Removed (or lost) before: a removal after the last durable point may not have happened. */
            if (!e) {
                op_begin(w, t, "unack %d %" PRIu64, ja->fs, ja->c);
                if ((e = zpl_remove(acks, an, NULL))) die("remove acks/%s: %s", an, strerror(-e));
                op_end(w, t);
            }
        } else if (st == 1) {
            ack_list_add(w, ja->fs, ja->c);
        } else {
            if (ja->c <= j->durable)
                die("durable ack %" PRIu64 " (fs %d) is %s after restart (durable %" PRIu64 ")",
                    ja->c, ja->fs, e ? "missing" : "damaged", j->durable);
            op_begin(w, t, "%s %d %" PRIu64, e ? "lost" : "unack", ja->fs, ja->c);
            if (!e && (e = zpl_remove(acks, an, NULL))) die("remove acks/%s: %s", an, strerror(-e));
            op_end(w, t);
        }
        zpl_node_rele(acks);
        zpl_node_rele(root);
    }
    for (size_t i = 0; i < j->nsnaps; i++) {
        jsnap_t *js = &j->snaps[i];
        bool both = snap_exists(w, 0, js->c) && snap_exists(w, 1, js->c);
        bool any = snap_exists(w, 0, js->c) || snap_exists(w, 1, js->c);
        if (!js->rm && both) {
            if (w->nsnaps == 64) die("too many snapshots");
            w->snaps[w->nsnaps++] = js->c;
            continue;
        }
        if (!js->rm && js->c <= j->durable)
            die("durable snapshot s%" PRIu64 " is missing after restart", js->c);
        if (!any && js->rm) continue;
        op_begin(w, t, "unsnap %" PRIu64, js->c);
        for (int f = NFS - 1; f >= 0; f--) {
            snprintf(name, sizeof name, "%s@s%" PRIu64, w->dsname[f], js->c);
            int e = dsl_dataset_destroy(w->dp, name, false, false, err, sizeof err);
            if (e && e != -ENOENT) die("destroy %s: %s", name, err);
        }
        op_end(w, t);
    }
}

static int cmd_writer(const opts_t *o)
{
    writer_t w;
    memset(&w, 0, sizeof w);
    w.o = o;
    pthread_mutex_init(&w.lock, NULL);
    pthread_mutex_init(&w.snap_lock, NULL);
    journal_t j;
    journal_read(o->journal, &j);
    w.jfd = open(o->journal, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (w.jfd < 0) die("open journal %s: %s", o->journal, strerror(errno));
    if (!j.ends_clean) jwrite(&w, "\n");
    w.next_op = j.maxop + 1;
    w.last_durable = j.durable;
    w.stop_op = o->max_ops >= 0 ? w.next_op + (uint64_t)o->max_ops : UINT64_MAX;
    char line[64];
    snprintf(line, sizeof line, "%" PRIu64 " start\n", w.next_op++);
    jwrite(&w, line);

    w.spa = open_pool(o, SPA_IMPORT_FORCE);
    int e = dsl_pool_open(w.spa, &w.dp);
    if (e) die("dsl_pool_open: %s", strerror(-e));
    for (int i = 0; i < NFS; i++) {
        fs_name(w.dsname[i], sizeof w.dsname[i], o->pool, i);
        ensure_dataset(&w, w.dsname[i]);
        if ((e = zpl_mount(w.dp, w.dsname[i], &w.fs[i]))) die("mount %s: %s", w.dsname[i], strerror(-e));
        ensure_dir(w.fs[i], "w");
        ensure_dir(w.fs[i], "acks");
    }
    writer_reconcile(&w, &j);
    journal_free(&j);
    writer_commit(&w);
    printf("ready %" PRIu64 "\n", w.next_op);
    fflush(stdout);

    pthread_t syncer, th[MAX_THREADS];
    worker_arg_t wa[MAX_THREADS];
    pthread_create(&syncer, NULL, syncer_main, &w);
    for (unsigned t = 0; t < o->threads; t++) {
        wa[t] = (worker_arg_t){&w, t};
        pthread_create(&th[t], NULL, worker_main, &wa[t]);
    }
    for (unsigned t = 0; t < o->threads; t++) pthread_join(th[t], NULL);
    atomic_store(&w.stop, true);
    pthread_join(syncer, NULL);
    writer_commit(&w);
    for (int i = NFS - 1; i >= 0; i--)
        if ((e = zpl_unmount(w.fs[i]))) die("unmount %s: %s", w.dsname[i], strerror(-e));
    dsl_pool_close(w.dp);
    if ((e = spa_export(w.spa))) die("export: %s", strerror(-e));
    for (int i = 0; i < NFS; i++) free(w.acks[i]);
    close(w.jfd);
    printf("stopped %" PRIu64 "\n", w.last_durable);
    return 0;
}

/* ================================================================ verifier */

typedef struct vobj {
    uint64_t ino;
    bool allocated;      /* dmu_object_list */
    bool reached;
    uint32_t mode;
    uint64_t nlink;
    uint64_t refs;       /* entries naming it */
    char path[NAME_LEN]; /* first path it was reached by */
} vobj_t;

typedef struct vfs {
    const opts_t *o;
    journal_t *j;
    uint64_t K;
    const char *name;    /* dataset */
    zpl_fs_t *fs;
    objset_t *os;
    vobj_t *tab;
    size_t cap;
    uint64_t nfiles, ndirs, nlinks, nbytes;
} vfs_t;

static unsigned long problems;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    if (++problems > MAX_PROBLEMS) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("PROBLEM ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

static vobj_t *vobj_get(vfs_t *v, uint64_t ino, bool create)
{
    size_t i = mix64(ino) & (v->cap - 1);
    while (v->tab[i].ino) {
        if (v->tab[i].ino == ino) return &v->tab[i];
        i = (i + 1) & (v->cap - 1);
    }
    if (!create) return NULL;
    v->tab[i].ino = ino;
    return &v->tab[i];
}

static void count_obj(uint64_t obj, void *arg) { (void)obj; (*(uint64_t *)arg)++; }
static void mark_obj(uint64_t obj, void *arg)
{
    vfs_t *v = arg;
    vobj_get(v, obj, true)->allocated = true;
}

typedef struct ventry {
    char name[ZPL_NAME_MAX + 1];
    uint64_t ino;
    uint32_t type;
} ventry_t;

typedef struct vlist {
    ventry_t *e;
    size_t n, cap;
    uint64_t dot, dotdot;
    int dots;
} vlist_t;

static int collect(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)cookie;
    vlist_t *l = arg;
    if (!strcmp(name, ".") || !strcmp(name, "..")) {
        if (name[1]) l->dotdot = ino;
        else l->dot = ino;
        l->dots++;
        return 0;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->e = realloc(l->e, l->cap * sizeof(ventry_t));
    }
    ventry_t *e = &l->e[l->n++];
    cairn_strlcpy(e->name, name, sizeof e->name);
    e->ino = ino;
    e->type = type;
    return 0;
}

static uint32_t dt_of(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return DT_REG;
    case S_IFDIR: return DT_DIR;
    case S_IFLNK: return DT_LNK;
    default: return DT_UNKNOWN;
    }
}

/* Every chunk of a regular file valid, of one file id, and no version from the future. */
static void check_file(vfs_t *v, zpl_node_t *n, const zpl_attr_t *a, const char *path)
{
    if (a->size % CHUNK) {
        problem("%s:%s: size %" PRIu64 " is not a whole number of chunks", v->name, path, a->size);
        return;
    }
    uint64_t nch = a->size / CHUNK, id = 0;
    uint8_t *buf = malloc(64 * CHUNK), want[CHUNK];
    for (uint64_t c0 = 0; c0 < nch; c0 += 64) {
        uint64_t cnt = CAIRN_MIN(nch - c0, 64);
        size_t got = 0;
        bool eof = false;
        int e = zpl_read(n, c0 * CHUNK, cnt * CHUNK, buf, &got, &eof);
        if (e || got != cnt * CHUNK) {
            problem("%s:%s: read at chunk %" PRIu64 ": %s (got %zu)", v->name, path, c0,
                    e ? strerror(-e) : "short", got);
            break;
        }
        for (uint64_t i = 0; i < cnt; i++) {
            uint64_t h[5];
            memcpy(h, buf + i * CHUNK, sizeof h);
            uint64_t idx = c0 + i;
            if (idx == 0) id = h[2];
            if (h[0] != CHUNK_MAGIC || h[1] != v->o->seed || h[2] != id || h[4] != idx ||
                h[3] > v->j->maxop || h[3] < id) {
                problem("%s:%s (ino %" PRIu64 "): chunk %" PRIu64 " of %" PRIu64
                        " has header magic %016" PRIx64 " seed %" PRIu64 " id %" PRIu64
                        " ver %" PRIu64 " idx %" PRIu64 " (file id %" PRIu64 ")",
                        v->name, path, a->ino, idx, nch, h[0], h[1], h[2], h[3], h[4], id);
                free(buf);
                return;
            }
            chunk_fill(want, v->o->seed, h[2], h[3], idx);
            if (memcmp(want, buf + i * CHUNK, CHUNK)) {
                problem("%s:%s: chunk %" PRIu64 " (id %" PRIu64 " ver %" PRIu64 ") body differs",
                        v->name, path, idx, h[2], h[3]);
                free(buf);
                return;
            }
        }
    }
    free(buf);
    v->nbytes += a->size;
}

static void check_symlink(vfs_t *v, zpl_node_t *n, const char *path)
{
    char t[ZPL_SYMLINK_MAX + 1], want[64];
    size_t len = 0;
    int e = zpl_readlink(n, t, sizeof t - 1, &len);
    if (e) {
        problem("%s:%s: readlink: %s", v->name, path, strerror(-e));
        return;
    }
    t[CAIRN_MIN(len, sizeof t - 1)] = 0;
    uint64_t seed = 0, op = 0;
    if (sscanf(t, "sym-%" SCNu64 "-%" SCNu64, &seed, &op) != 2 || seed != v->o->seed ||
        op > v->j->maxop || (snprintf(want, sizeof want, "sym-%" PRIu64 "-%" PRIu64, seed, op),
                             strcmp(want, t)))
        problem("%s:%s: symlink target '%s' is not one the writer made", v->name, path, t);
}

/* Directories still to walk: a heap stack, not recursion, because renames of
 * directories into each other's subtrees legitimately build chains hundreds
 * deep. A cycle cannot loop the walk: a directory reached a second time is
 * reported and not entered. */
typedef struct vpending {
    uint64_t ino, parent;
    char path[NAME_LEN];
} vpending_t;

static vpending_t *pending;
static size_t npending, cappending;

static void push_dir(uint64_t ino, uint64_t parent, const char *path)
{
    if (npending == cappending) {
        cappending = cappending ? 2 * cappending : 64;
        pending = realloc(pending, cappending * sizeof(vpending_t));
    }
    vpending_t *p = &pending[npending++];
    p->ino = ino;
    p->parent = parent;
    cairn_strlcpy(p->path, path, sizeof p->path);
}

static void walk_dir(vfs_t *v, zpl_node_t *dir, uint64_t ino, uint64_t parent, const char *path)
{
    vlist_t l = {0};
    bool eof = false;
    int e = zpl_readdir(dir, 0, collect, &l, &eof);
    if (e || !eof) {
        problem("%s:%s: readdir: %s", v->name, path, e ? strerror(-e) : "no eof");
        free(l.e);
        return;
    }
    if (l.dots != 2 || l.dot != ino || l.dotdot != parent)
        problem("%s:%s: '.'/'..' are %" PRIu64 "/%" PRIu64 ", want %" PRIu64 "/%" PRIu64, v->name,
                path, l.dot, l.dotdot, ino, parent);
    uint64_t subdirs = 0, zcount = 0;
    for (size_t i = 0; i < l.n; i++) {
        ventry_t *en = &l.e[i];
        char cpath[NAME_LEN];
        snprintf(cpath, sizeof cpath, "%s/%s", path, en->name);
        zpl_node_t *c;
        zpl_attr_t a;
        e = lookup_attr(dir, en->name, &c, &a);
        if (e) {
            problem("%s:%s: listed but lookup fails: %s (ino %" PRIu64 ")", v->name, cpath,
                    strerror(-e), en->ino);
            continue;
        }
        if (a.ino != en->ino)
            problem("%s:%s: readdir says ino %" PRIu64 ", lookup %" PRIu64, v->name, cpath, en->ino,
                    a.ino);
        if (dt_of(a.mode) != en->type || dt_of(a.mode) == DT_UNKNOWN)
            problem("%s:%s: entry type %u, object mode %o", v->name, cpath, en->type, a.mode);
        vobj_t *vo = vobj_get(v, a.ino, false);
        if (!vo || !vo->allocated) {
            problem("%s:%s: ino %" PRIu64 " is not an allocated object", v->name, cpath, a.ino);
            zpl_node_rele(c);
            continue;
        }
        vo->refs++;
        if (!vo->reached) {
            vo->reached = true;
            vo->mode = a.mode;
            vo->nlink = a.nlink;
            cairn_strlcpy(vo->path, cpath, sizeof vo->path);
            if (S_ISREG(a.mode)) {
                v->nfiles++;
                check_file(v, c, &a, cpath);
            } else if (S_ISLNK(a.mode)) {
                v->nlinks++;
                check_symlink(v, c, cpath);
            }
        }
        if (S_ISDIR(a.mode)) {
            subdirs++;
            if (vo->refs > 1)
                problem("%s:%s: directory ino %" PRIu64 " also reached as %s", v->name, cpath, a.ino,
                        vo->path);
            else {
                v->ndirs++;
                if (a.parent != ino)
                    problem("%s:%s: parent is %" PRIu64 ", found in %" PRIu64, v->name, cpath,
                            a.parent, ino);
                push_dir(a.ino, ino, cpath);
            }
        }
        zpl_node_rele(c);
    }
    zpl_attr_t da;
    if ((e = zpl_getattr(dir, &da))) {
        problem("%s:%s: getattr: %s", v->name, path, strerror(-e));
    } else {
        if (da.size != l.n + 2)
            problem("%s:%s: size %" PRIu64 " but %zu entries", v->name, path, da.size, l.n);
        if (da.nlink != 2 + subdirs)
            problem("%s:%s: nlink %" PRIu64 " but %" PRIu64 " subdirectories", v->name, path,
                    da.nlink, subdirs);
    }
    if ((e = zap_count(v->os, ino, &zcount)) || zcount != l.n)
        problem("%s:%s: ZAP count %" PRIu64 " (%s), readdir %zu", v->name, path, zcount,
                e ? strerror(-e) : "ok", l.n);
    free(l.e);
}

/* The acks/ directory of a head against the journal (heads: durability; snapshots: content). */
static void check_acks(vfs_t *v, zpl_node_t *root, int fsidx, bool head)
{
    zpl_node_t *acks;
    int e = zpl_lookup(root, "acks", &acks);
    if (e) {
        problem("%s: acks/: %s", v->name, strerror(-e));
        return;
    }
    vlist_t l = {0};
    bool eof;
    if ((e = zpl_readdir(acks, 0, collect, &l, &eof)))
        problem("%s: readdir acks/: %s", v->name, strerror(-e));
    for (size_t i = 0; i < l.n; i++) {
        uint64_t c = 0;
        char want[32];
        jack_t *ja = NULL, unjournaled;
        if (sscanf(l.e[i].name, "a%" SCNu64, &c) == 1) {
            ack_name(want, sizeof want, c);
            if (!strcmp(want, l.e[i].name)) ja = journal_ack(v->j, c);
        }
        if (!v->j->present) {
            unjournaled = (jack_t){.c = c, .fs = fsidx};
            ja = &unjournaled;
            head = false;
        }
        if (!ja || ja->fs != fsidx) {
            problem("%s: acks/%s was never journaled as an ack of this filesystem", v->name,
                    l.e[i].name);
            continue;
        }
        zpl_node_t *f;
        if (zpl_lookup(acks, l.e[i].name, &f)) continue;   /* the walk reported it */
        int st = ack_state(f, v->o->seed, c);
        zpl_node_rele(f);
        if (st < 0) problem("%s: acks/%s has neither its content nor none", v->name, l.e[i].name);
        if (head && ja->rm && ja->rm <= v->K)
            problem("%s: acks/%s exists but op %" PRIu64 " removed it and durable is %" PRIu64,
                    v->name, l.e[i].name, ja->rm, v->K);
        if (head && !ja->rm && c <= v->K && st != 1)
            problem("%s: acks/%s is acknowledged (durable %" PRIu64 ") but empty", v->name,
                    l.e[i].name, v->K);
    }
    if (head) {
        for (size_t a = 0; a < v->j->nacks; a++) {
            jack_t *ja = &v->j->acks[a];
            if (ja->fs != fsidx || ja->rm || ja->c > v->K) continue;
            char an[32];
            ack_name(an, sizeof an, ja->c);
            bool found = false;
            for (size_t i = 0; i < l.n && !found; i++) found = !strcmp(l.e[i].name, an);
            if (!found)
                problem("%s: acknowledged acks/%s (op %" PRIu64 " <= durable %" PRIu64
                        ", never removed) is missing",
                        v->name, an, ja->c, v->K);
        }
    }
    free(l.e);
    zpl_node_rele(acks);
}

static void verify_fs(const opts_t *o, dsl_pool_t *dp, journal_t *j, uint64_t K, const char *name,
                      int fsidx, bool head)
{
    vfs_t v = {.o = o, .j = j, .K = K, .name = name};
    int e = zpl_mount(dp, name, &v.fs);
    if (e) {
        problem("%s: mount: %s", name, strerror(-e));
        return;
    }
    v.os = dsl_dataset_objset(zpl_fs_dataset(v.fs));
    uint64_t nobj = 0;
    if ((e = dmu_object_list(v.os, count_obj, &nobj))) problem("%s: object list: %s", name, strerror(-e));
    v.cap = 64;
    while (v.cap < 2 * nobj + 16) v.cap *= 2;
    v.tab = cairn_zalloc(v.cap * sizeof(vobj_t));
    dmu_object_list(v.os, mark_obj, &v);

    zpl_node_t *root;
    zpl_attr_t ra;
    if ((e = zpl_root(v.fs, &root)) || (e = zpl_getattr(root, &ra))) {
        problem("%s: root: %s", name, strerror(-e));
    } else {
        vobj_t *vr = vobj_get(&v, ra.ino, false);
        if (!vr || !vr->allocated) problem("%s: root ino %" PRIu64 " not allocated", name, ra.ino);
        else {
            vr->reached = true;
            vr->refs = 1;
            vr->mode = ra.mode;
            snprintf(vr->path, sizeof vr->path, "/");
        }
        if (!S_ISDIR(ra.mode)) problem("%s: root is not a directory", name);
        if (ra.parent != ra.ino) problem("%s: root's parent is %" PRIu64, name, ra.parent);
        v.ndirs++;
        walk_dir(&v, root, ra.ino, ra.ino, "");
        while (npending) {
            vpending_t p = pending[--npending];
            zpl_node_t *d;
            if ((e = zpl_iget(v.fs, p.ino, &d))) {
                problem("%s:%s: iget of directory %" PRIu64 ": %s", name, p.path, p.ino, strerror(-e));
                continue;
            }
            walk_dir(&v, d, p.ino, p.parent, p.path);
            zpl_node_rele(d);
        }
        check_acks(&v, root, fsidx, head);
        zpl_node_rele(root);
    }
    for (size_t i = 0; i < v.cap; i++) {
        vobj_t *vo = &v.tab[i];
        if (!vo->ino) continue;
        if (vo->allocated && !vo->reached && vo->ino != 1) {
            zpl_node_t *n;
            zpl_attr_t a = {0};
            int ge = zpl_iget(v.fs, vo->ino, &n);
            if (!ge) {
                ge = zpl_getattr(n, &a);
                zpl_node_rele(n);
            }
            problem("%s: object %" PRIu64 " is allocated but unreachable (mode %o nlink %" PRIu64
                    " size %" PRIu64 " parent %" PRIu64 "%s%s)",
                    name, vo->ino, a.mode, a.nlink, a.size, a.parent, ge ? ", iget: " : "",
                    ge ? strerror(-ge) : "");
        }
        if (vo->reached && !S_ISDIR(vo->mode) && vo->nlink != vo->refs)
            problem("%s:%s: nlink %" PRIu64 " but %" PRIu64 " entries name ino %" PRIu64, name,
                    vo->path, vo->nlink, vo->refs, vo->ino);
    }
    printf("%s: %" PRIu64 " objects, %" PRIu64 " dirs, %" PRIu64 " files (%" PRIu64
           " bytes), %" PRIu64 " symlinks\n",
           name, nobj, v.ndirs, v.nfiles, v.nbytes, v.nlinks);
    free(v.tab);
    if ((e = zpl_unmount(v.fs))) problem("%s: unmount: %s", name, strerror(-e));
}

typedef struct snaplist {
    char (*names)[DSL_NAME_MAX + 1];
    size_t n;
} snaplist_t;

static void add_snap(const dsl_dataset_info_t *info, void *arg)
{
    snaplist_t *s = arg;
    s->names = realloc(s->names, (s->n + 1) * sizeof(*s->names));
    cairn_strlcpy(s->names[s->n++], info->name, DSL_NAME_MAX + 1);
}

static int cmd_verify(const opts_t *o)
{
    journal_t j;
    journal_read(o->journal, &j);
    uint64_t K = j.durable;
    if (o->durable > 0 && (uint64_t)o->durable > K) K = (uint64_t)o->durable;
    spa_t *spa = open_pool(o, SPA_IMPORT_READONLY);
    dsl_pool_t *dp;
    int e = dsl_pool_open(spa, &dp);
    if (e) die("dsl_pool_open: %s", strerror(-e));
    char dsname[NFS][DSL_NAME_MAX + 1];
    bool have[NFS];
    snaplist_t snaps[NFS];
    memset(snaps, 0, sizeof snaps);
    for (int i = 0; i < NFS; i++) {
        fs_name(dsname[i], sizeof dsname[i], o->pool, i);
        dsl_dataset_t *ds;
        have[i] = dsl_dataset_hold(dp, dsname[i], &ds) == 0;
        if (!have[i]) {
            if (K) problem("%s is missing (durable %" PRIu64 ")", dsname[i], K);
            continue;
        }
        dsl_dataset_rele(ds);
        verify_fs(o, dp, &j, K, dsname[i], i, true);
        char err[512] = "";
        if ((e = dsl_dataset_list(dp, dsname[i], true, 1u << DSL_TYPE_SNAPSHOT, add_snap, &snaps[i],
                                  err, sizeof err)))
            problem("list snapshots of %s: %s", dsname[i], err);
        for (size_t s = 0; s < snaps[i].n; s++) {
            const char *at = strchr(snaps[i].names[s], '@');
            /* dsl_dataset_list -r on fs1 also lists fs1/sub's snapshots */
            if (!at || (size_t)(at - snaps[i].names[s]) != strlen(dsname[i])) continue;
            uint64_t c = 0;
            char want[64];
            if (sscanf(at, "@s%" SCNu64, &c) != 1 ||
                (snprintf(want, sizeof want, "@s%" PRIu64, c), strcmp(want, at)) ||
                (j.present && !journal_snap(&j, c)))
                problem("snapshot %s was never journaled", snaps[i].names[s]);
            verify_fs(o, dp, &j, K, snaps[i].names[s], i, false);
        }
    }
    /* Snapshot existence against the journal. */
    for (size_t s = 0; s < j.nsnaps; s++) {
        jsnap_t *js = &j.snaps[s];
        bool ex[NFS];
        for (int i = 0; i < NFS; i++) {
            char name[2 * DSL_NAME_MAX + 64];
            snprintf(name, sizeof name, "%s@s%" PRIu64, dsname[i], js->c);
            ex[i] = false;
            for (size_t k = 0; k < snaps[i].n; k++) ex[i] |= !strcmp(snaps[i].names[k], name);
        }
        if (js->rm && js->rm <= K && (ex[0] || ex[1]))
            problem("snapshot s%" PRIu64 " exists but op %" PRIu64 " destroyed it (durable %" PRIu64 ")",
                    js->c, js->rm, K);
        if (!js->rm && js->c <= K && !(ex[0] && ex[1]))
            problem("durable snapshot s%" PRIu64 " is missing (fs1 %d, sub %d; durable %" PRIu64 ")",
                    js->c, ex[0], ex[1], K);
        if (!js->rm && ex[0] != ex[1])
            problem("recursive snapshot s%" PRIu64 " exists in only one dataset (fs1 %d, sub %d)",
                    js->c, ex[0], ex[1]);
    }
    for (int i = 0; i < NFS; i++) free(snaps[i].names);
    free(pending);
    dsl_pool_close(dp);
    if ((e = spa_close(spa))) die("close: %s", strerror(-e));
    journal_free(&j);
    if (problems) {
        printf("%lu problems (durable %" PRIu64 ")\n", problems, K);
        return 1;
    }
    printf("consistent (durable %" PRIu64 ", %zu snapshots journaled)\n", K, j.nsnaps);
    return 0;
}

/* ================================================================ main */

static void usage(void)
{
    fprintf(stderr,
            "usage: cairn_fstest crash-writer -d DIR... POOL --seed S --journal FILE [--threads T] "
            "[--max-ops N]\n"
            "       cairn_fstest verify -d DIR... POOL --seed S [--journal FILE] [--durable K]\n");
    exit(2);
}

static int64_t parse_i64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || *end || end == s) die("bad %s '%s'", what, s);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2) usage();
    opts_t o = {.mode = argv[1], .seed = 1, .threads = 2, .durable = -1, .max_ops = -1};
    if (strcmp(o.mode, "crash-writer") && strcmp(o.mode, "verify")) usage();
    enum { O_SEED = 256, O_THREADS, O_DURABLE, O_JOURNAL, O_MAX };
    static const struct option lo[] = {
        {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS}, {"durable", 1, 0, O_DURABLE},
        {"journal", 1, 0, O_JOURNAL}, {"max-ops", 1, 0, O_MAX}, {0, 0, 0, 0}};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "d:", lo, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (o.ndirs == MAX_DIRS) die("too many -d");
            o.dirs[o.ndirs++] = optarg;
            break;
        case O_SEED: o.seed = (uint64_t)parse_i64(optarg, "seed"); break;
        case O_THREADS: o.threads = (uint32_t)parse_i64(optarg, "thread count"); break;
        case O_DURABLE: o.durable = parse_i64(optarg, "durable"); break;
        case O_JOURNAL: o.journal = optarg; break;
        case O_MAX: o.max_ops = parse_i64(optarg, "max-ops"); break;
        default: usage();
        }
    }
    if (optind != argc - 1 || o.ndirs == 0) usage();
    if (!o.journal && !strcmp(o.mode, "crash-writer")) die("crash-writer needs --journal");
    if (o.threads == 0 || o.threads > MAX_THREADS) die("--threads must be 1..%d", MAX_THREADS);
    o.pool = argv[optind];
    for (int i = 0; i < DATA_STRIPES; i++) pthread_mutex_init(&data_stripe[i], NULL);
    dsl_init();
    if (!strcmp(o.mode, "crash-writer")) return cmd_writer(&o);
    return cmd_verify(&o);
}
