/*
 * cairn_fsnslog: crash writer and verifier for the filesystem's namespace and
 * attribute records in the intent log (test_crash_zil_ns.sh).
 *
 *   cairn_fsnslog writer -d DIR POOL --ack FILE --round R
 *   cairn_fsnslog verify -d DIR POOL --ack FILE
 *
 * The writer imports the pool (force: it was crashed; mounting replays the
 * log), mounts POOL/fs, and runs NTHREADS threads until killed. Thread t of
 * round R owns the directory wR_t (with a subdirectory s) and makes a
 * deterministic random sequence of operations on twelve names in them:
 * creates (some EXCLUSIVE with a verifier), mkdir, symlink, remove, rmdir,
 * rename (across the two directories, over an existing file), link, setattr
 * (mode, owner, times), truncate and write, each followed by zpl_commit (as
 * an NFS server does), then appended to the ack file ("A R t k [handle]").
 *
 * The verifier regenerates every thread's sequence, applies it to a model up
 * to the last acknowledged operation k and requires each directory to be
 * exactly the model after k or after k+1 (the one in flight at the kill):
 * names, types, modes, owners, link counts, sizes, every byte, symlink
 * targets, which names share a node, the directories' sizes and link counts;
 * handles of acknowledged creates resolve to the node at its name, and those
 * of nodes since freed are stale. Then it exports and runs the offline check.
 */
#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/zpl.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NTHREADS 3
#define NPATH 12          /* 0..5: D/n0..n5; 6..11: D/s/n0..n5 (directories only in D) */
#define MAXDATA 65536
#define MAXROUNDS 1024

static const zpl_cred_t cred = {.uid = 0, .gid = 0};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ERROR: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint8_t pat(uint64_t tag, uint64_t off) { return (uint8_t)((off * 13 + tag * 101) % 251 + 1); }

/* ---------------- the model ---------------- */

enum { T_REG = 1, T_DIR, T_LNK };
enum { OP_CREATE, OP_MKDIR, OP_SYMLINK, OP_REMOVE, OP_RMDIR, OP_RENAME, OP_LINK, OP_SETATTR,
       OP_TRUNCATE, OP_WRITE, OP_KINDS };

typedef struct minode {
    int type;
    uint32_t mode, uid;
    int64_t mtime;
    uint64_t size, nlink;
    uint8_t *data;            /* regular files: MAXDATA bytes */
    char target[32];
    bool has_fh;
    zpl_fh_t fh;
} minode_t;

typedef struct model {
    int path[NPATH];          /* inode index, or -1 */
    minode_t *ino;
    size_t nino, cap;
} model_t;

typedef struct op {
    int kind, a, b;
    uint32_t mode, uid;
    bool excl;
    uint64_t off, len, size, tag;
} op_t;

static void model_init(model_t *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < NPATH; i++) m->path[i] = -1;
}

static void model_free(model_t *m)
{
    for (size_t i = 0; i < m->nino; i++) free(m->ino[i].data);
    free(m->ino);
}

static int type_at(const model_t *m, int p) { return m->path[p] < 0 ? 0 : m->ino[m->path[p]].type; }

static int pick(uint64_t *rng, const model_t *m, int lo, int hi, int want /* 0 empty, -1 any node, T_* */)
{
    int cand[NPATH], n = 0;
    for (int p = lo; p < hi; p++) {
        int t = type_at(m, p);
        if ((want == 0 && t == 0) || (want == -1 && t) || (want > 0 && t == want)) cand[n++] = p;
    }
    return n ? cand[next_rand(rng) % (uint64_t)n] : -1;
}

/* The next operation of a sequence (deterministic in rng and the model). */
static op_t gen_op(uint64_t *rng, const model_t *m)
{
    for (;;) {
        op_t o = {.kind = (int)(next_rand(rng) % OP_KINDS), .a = -1, .b = -1};
        o.mode = 0600 | (uint32_t)(next_rand(rng) % 0100);
        o.uid = (uint32_t)(next_rand(rng) % 5);
        o.excl = next_rand(rng) % 2;
        o.off = next_rand(rng) % 49152;
        o.len = 1 + next_rand(rng) % 16384;
        o.size = next_rand(rng) % MAXDATA;
        o.tag = next_rand(rng);
        switch (o.kind) {
        case OP_CREATE: case OP_SYMLINK: o.a = pick(rng, m, 0, NPATH, 0); break;
        case OP_MKDIR: o.a = pick(rng, m, 0, 6, 0); break;
        case OP_REMOVE:
            o.a = pick(rng, m, 0, NPATH, T_REG);
            if (o.a < 0 || next_rand(rng) % 3 == 0) o.a = pick(rng, m, 0, NPATH, T_LNK);
            break;
        case OP_RMDIR: o.a = pick(rng, m, 0, 6, T_DIR); break;
        case OP_RENAME:
            o.a = pick(rng, m, 0, NPATH, -1);
            if (o.a < 0) break;
            if (type_at(m, o.a) == T_DIR) {
                o.b = pick(rng, m, 0, 6, 0);
            } else {
                o.b = (int)(next_rand(rng) % NPATH);
                int tb = type_at(m, o.b);
                if (o.b == o.a || tb == T_DIR) o.b = -1;
            }
            if (o.b < 0) o.a = -1;
            break;
        case OP_LINK:
            o.a = pick(rng, m, 0, NPATH, T_REG);
            o.b = pick(rng, m, 0, NPATH, 0);
            if (o.b < 0) o.a = -1;
            break;
        case OP_SETATTR: o.a = pick(rng, m, 0, NPATH, -1); break;
        case OP_TRUNCATE: case OP_WRITE: o.a = pick(rng, m, 0, NPATH, T_REG); break;
        }
        if (o.a >= 0) return o;
    }
}

static int model_new(model_t *m, int type)
{
    if (m->nino == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 32;
        m->ino = realloc(m->ino, m->cap * sizeof *m->ino);
    }
    minode_t *n = &m->ino[m->nino];
    memset(n, 0, sizeof *n);
    n->type = type;
    if (type == T_REG) n->data = calloc(1, MAXDATA);
    return (int)m->nino++;
}

static void model_apply(model_t *m, const op_t *o, uint64_t k)
{
    int ia = m->path[o->a];
    switch (o->kind) {
    case OP_CREATE: case OP_MKDIR: case OP_SYMLINK: {
        int i = model_new(m, o->kind == OP_CREATE ? T_REG : o->kind == OP_MKDIR ? T_DIR : T_LNK);
        minode_t *n = &m->ino[i];
        n->mode = o->kind == OP_SYMLINK ? 0777 : o->mode;
        n->nlink = o->kind == OP_MKDIR ? 2 : 1;
        n->size = o->kind == OP_MKDIR ? 2 : 0;
        if (o->kind == OP_SYMLINK) {
            snprintf(n->target, sizeof n->target, "t%" PRIu64, k);
            n->size = strlen(n->target);
        }
        m->path[o->a] = i;
        break;
    }
    case OP_REMOVE: case OP_RMDIR:
        m->ino[ia].nlink = 0;
        if (o->kind == OP_REMOVE && m->ino[ia].type == T_REG) {
            uint64_t links = 0;
            for (int p = 0; p < NPATH; p++) links += m->path[p] == ia;
            m->ino[ia].nlink = links - 1;
        }
        m->path[o->a] = -1;
        break;
    case OP_RENAME: {
        int ib = m->path[o->b];
        if (ib == ia) break;              /* two names of one node: nothing happens */
        if (ib >= 0) m->ino[ib].nlink--;
        m->path[o->b] = ia;
        m->path[o->a] = -1;
        break;
    }
    case OP_LINK:
        m->ino[ia].nlink++;
        m->path[o->b] = ia;
        break;
    case OP_SETATTR:
        m->ino[ia].mode = o->mode;
        m->ino[ia].uid = o->uid;
        m->ino[ia].mtime = (int64_t)(o->tag % 1000000) * 1000000000ll;
        break;
    case OP_TRUNCATE:
        if (o->size < m->ino[ia].size) memset(m->ino[ia].data + o->size, 0, MAXDATA - o->size);
        m->ino[ia].size = o->size;
        m->ino[ia].mtime = 0;   /* now: not checked */
        break;
    case OP_WRITE:
        for (uint64_t i = 0; i < o->len; i++) m->ino[ia].data[o->off + i] = pat(o->tag, o->off + i);
        if (o->off + o->len > m->ino[ia].size) m->ino[ia].size = o->off + o->len;
        m->ino[ia].mtime = 0;
        break;
    }
}

/* ---------------- the filesystem side ---------------- */

typedef struct opts {
    const char *dirs[8];
    size_t ndirs;
    const char *pool;
    const char *ack;
    uint64_t round;
} opts_t;

static spa_t *spa;
static dsl_pool_t *dp;
static zpl_fs_t *fs;
static zpl_node_t *root;
static int ackfd;

static void open_all(const opts_t *o)
{
    char err[512] = "";
    dsl_init();
    int e = spa_import(o->pool, o->dirs, o->ndirs, SPA_IMPORT_FORCE, &spa, err, sizeof err);
    if (e) die("import: %s", err);
    if ((e = dsl_pool_open(spa, &dp))) die("dsl_pool_open: %d", e);
    char name[256];
    snprintf(name, sizeof name, "%s/fs", o->pool);
    dsl_create_opts_t fo = {.type = DSL_TYPE_FILESYSTEM};
    e = dsl_dataset_create(dp, name, &fo, err, sizeof err);
    if (e && e != -EEXIST) die("create %s: %s", name, err);
    if ((e = zpl_mount(dp, name, &fs))) die("mount: %d", e);
    if ((e = zpl_root(fs, &root))) die("root: %d", e);
}

static void close_all(void)
{
    zpl_node_rele(root);
    if (zpl_unmount(fs)) die("unmount");
    dsl_pool_close(dp);
    if (spa_export(spa)) die("export");
}

static void ack(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ack(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (write(ackfd, line, (size_t)n) != n) die("ack write");
}

static void path_name(int p, char *name) { sprintf(name, "n%d", p % 6); }

typedef struct tdirs {
    zpl_node_t *d, *s;
} tdirs_t;

static zpl_node_t *dir_of(const tdirs_t *td, int p) { return p < 6 ? td->d : td->s; }

static void hex(const zpl_fh_t *fh, char *out)
{
    for (int i = 0; i < ZPL_FH_SIZE; i++) sprintf(out + 2 * i, "%02x", fh->bytes[i]);
}

/* Runs o against the filesystem; the handle of a created node in fhhex. */
static void fs_apply(const tdirs_t *td, const op_t *o, uint64_t k, char *fhhex)
{
    char na[8], nb[8], target[32];
    path_name(o->a, na);
    if (o->b >= 0) path_name(o->b, nb);
    zpl_node_t *da = dir_of(td, o->a), *n = NULL;
    int e = 0;
    fhhex[0] = 0;
    switch (o->kind) {
    case OP_CREATE: {
        uint8_t verf[ZPL_VERF_SIZE];
        memcpy(verf, &o->tag, sizeof verf);
        e = zpl_create(da, na, o->mode, &cred, o->excl ? ZPL_CREATE_EXCLUSIVE : ZPL_CREATE_GUARDED,
                       verf, &n, NULL);
        break;
    }
    case OP_MKDIR: e = zpl_mkdir(da, na, o->mode, &cred, &n, NULL); break;
    case OP_SYMLINK:
        snprintf(target, sizeof target, "t%" PRIu64, k);
        e = zpl_symlink(da, na, target, &cred, &n, NULL);
        break;
    case OP_REMOVE: e = zpl_remove(da, na, NULL); break;
    case OP_RMDIR: e = zpl_rmdir(da, na, NULL); break;
    case OP_RENAME: e = zpl_rename(da, na, dir_of(td, o->b), nb, NULL, NULL); break;
    case OP_LINK:
        e = zpl_lookup(da, na, &n);
        if (!e) e = zpl_link(n, dir_of(td, o->b), nb, NULL);
        zpl_node_rele(n);
        n = NULL;
        break;
    case OP_SETATTR: case OP_TRUNCATE: case OP_WRITE:
        e = zpl_lookup(da, na, &n);
        if (e) break;
        if (o->kind == OP_SETATTR) {
            zpl_setattr_t sa = {.mask = ZPL_SET_MODE | ZPL_SET_UID | ZPL_SET_MTIME, .mode = o->mode,
                                .uid = o->uid, .mtime_ns = (int64_t)(o->tag % 1000000) * 1000000000ll};
            e = zpl_setattr(n, &sa, NULL);
        } else if (o->kind == OP_TRUNCATE) {
            zpl_setattr_t sa = {.mask = ZPL_SET_SIZE, .size = o->size};
            e = zpl_setattr(n, &sa, NULL);
        } else {
            uint8_t *b = malloc(o->len);
            for (uint64_t i = 0; i < o->len; i++) b[i] = pat(o->tag, o->off + i);
            e = zpl_write(n, o->off, o->len, b, 0, NULL);
            free(b);
        }
        zpl_node_rele(n);
        n = NULL;
        break;
    }
    if (e) die("operation %d on %s (k %" PRIu64 "): %d", o->kind, na, k, e);
    if (n) {
        zpl_fh_t fh;
        if (zpl_fh_encode(n, &fh)) die("fh_encode");
        hex(&fh, fhhex);
        zpl_node_rele(n);
    }
    if ((e = zpl_commit(fs))) die("commit: %d", e);
}

static uint64_t seed_of(uint64_t round, unsigned t) { return round * 1000003u + t * 7919u + 1; }

static void thread_dirs(uint64_t round, unsigned t, bool create, tdirs_t *td)
{
    char dn[32];
    snprintf(dn, sizeof dn, "w%" PRIu64 "_%u", round, t);
    int e = create ? zpl_mkdir(root, dn, 0755, &cred, &td->d, NULL) : zpl_lookup(root, dn, &td->d);
    if (e) die("%s: %d", dn, e);
    e = create ? zpl_mkdir(td->d, "s", 0755, &cred, &td->s, NULL) : zpl_lookup(td->d, "s", &td->s);
    if (e) die("%s/s: %d", dn, e);
}

static uint64_t g_round;

static void *writer_thread(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    tdirs_t td;
    thread_dirs(g_round, t, true, &td);
    if (zpl_commit(fs)) die("commit");
    ack("S %" PRIu64 " %u\n", g_round, t);
    model_t m;
    model_init(&m);
    uint64_t rng = seed_of(g_round, t);
    char fhhex[2 * ZPL_FH_SIZE + 1];
    for (uint64_t k = 0;; k++) {
        op_t o = gen_op(&rng, &m);
        fs_apply(&td, &o, k, fhhex);
        model_apply(&m, &o, k);
        ack("A %" PRIu64 " %u %" PRIu64 " %s\n", g_round, t, k, fhhex[0] ? fhhex : "-");
    }
    return NULL;
}

static int run_writer(const opts_t *o)
{
    ackfd = open(o->ack, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (ackfd < 0) die("open %s", o->ack);
    open_all(o);
    g_round = o->round;
    printf("ready\n");
    fflush(stdout);
    pthread_t th[NTHREADS];
    for (unsigned t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, writer_thread, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    return 0;
}

/* ---------------- verify ---------------- */

typedef struct tstate {
    bool started;
    int64_t last;                 /* last acknowledged k, -1: none */
    char (*fh)[2 * ZPL_FH_SIZE + 1];  /* per k */
    size_t nfh;
} tstate_t;

static tstate_t ts[MAXROUNDS][NTHREADS];

static bool unhex(const char *s, zpl_fh_t *fh)
{
    if (strlen(s) != 2 * ZPL_FH_SIZE) return false;
    for (int i = 0; i < ZPL_FH_SIZE; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return false;
        fh->bytes[i] = (uint8_t)v;
    }
    return true;
}

/* Compares directory td with model m; NULL when equal, else why not. */
static const char *compare(const tdirs_t *td, const model_t *m, char *why, size_t cap)
{
    uint64_t ino[NPATH] = {0};
    int ndirs = 0, ntop = 1, nsub = 0;   /* D holds s */
    for (int p = 0; p < NPATH; p++) {
        char na[8];
        path_name(p, na);
        zpl_node_t *n;
        int e = zpl_lookup(dir_of(td, p), na, &n);
        const minode_t *mi = m->path[p] >= 0 ? &m->ino[m->path[p]] : NULL;
        if (!mi) {
            if (e == 0) {
                zpl_node_rele(n);
                snprintf(why, cap, "path %d exists, the model has nothing there", p);
                return why;
            }
            if (e != -ENOENT) {
                snprintf(why, cap, "path %d: lookup %d", p, e);
                return why;
            }
            continue;
        }
        if (e) {
            snprintf(why, cap, "path %d missing (lookup %d)", p, e);
            return why;
        }
        if (p < 6) ntop++;
        else nsub++;
        zpl_attr_t a;
        e = zpl_getattr(n, &a);
        ino[p] = a.ino;
        const char *bad = NULL;
        int t = S_ISREG(a.mode) ? T_REG : S_ISDIR(a.mode) ? T_DIR : S_ISLNK(a.mode) ? T_LNK : 0;
        if (e) bad = "getattr";
        else if (t != mi->type) bad = "type";
        else if ((a.mode & 07777) != mi->mode) bad = "mode";
        else if (a.nlink != mi->nlink) bad = "nlink";
        else if (a.size != mi->size) bad = "size";
        else if (t != T_LNK && a.uid != mi->uid) bad = "uid";
        else if (mi->mtime && a.mtime_ns != mi->mtime) bad = "mtime";
        if (!bad && t == T_REG && mi->size) {
            uint8_t *b = malloc(mi->size);
            size_t got = 0;
            if (zpl_read(n, 0, mi->size, b, &got, NULL) || got != mi->size ||
                memcmp(b, mi->data, mi->size))
                bad = "data";
            free(b);
        }
        if (!bad && t == T_LNK) {
            char tgt[64];
            size_t len = 0;
            if (zpl_readlink(n, tgt, sizeof tgt, &len) || len != strlen(mi->target) ||
                memcmp(tgt, mi->target, len))
                bad = "symlink target";
        }
        if (t == T_DIR) ndirs++;
        zpl_node_rele(n);
        if (bad) {
            snprintf(why, cap, "path %d: %s differs (mode %o nlink %llu size %llu)", p, bad,
                     a.mode, (unsigned long long)a.nlink, (unsigned long long)a.size);
            return why;
        }
    }
    for (int p = 0; p < NPATH; p++)
        for (int q = p + 1; q < NPATH; q++)
            if (m->path[p] >= 0 && m->path[q] >= 0 && (ino[p] == ino[q]) != (m->path[p] == m->path[q])) {
                snprintf(why, cap, "paths %d and %d: node identity differs", p, q);
                return why;
            }
    zpl_attr_t da, sa;
    if (zpl_getattr(td->d, &da) || zpl_getattr(td->s, &sa)) return "getattr of the directories";
    if (da.size != (uint64_t)ntop + 2 || da.nlink != (uint64_t)ndirs + 3 || sa.size != (uint64_t)nsub + 2) {
        snprintf(why, cap, "directory sizes %llu/%llu or link count %llu differ from the names",
                 (unsigned long long)da.size, (unsigned long long)sa.size, (unsigned long long)da.nlink);
        return why;
    }
    /* Handles of acknowledged creates: the node at its name, or stale once freed. */
    for (size_t i = 0; i < m->nino; i++) {
        const minode_t *mi = &m->ino[i];
        if (!mi->has_fh) continue;
        zpl_node_t *n;
        int e = zpl_fh_to_inode(fs, mi->fh.bytes, ZPL_FH_SIZE, &n);
        if (mi->nlink == 0) {
            if (e == 0) zpl_node_rele(n);
            if (e != -ESTALE) {
                snprintf(why, cap, "the handle of freed node %zu is not stale (%d)", i, e);
                return why;
            }
            continue;
        }
        if (e) {
            snprintf(why, cap, "the handle of node %zu does not resolve (%d)", i, e);
            return why;
        }
        uint64_t got = zpl_node_ino(n);
        zpl_node_rele(n);
        bool at_name = false;
        for (int p = 0; p < NPATH; p++) at_name |= m->path[p] == (int)i && ino[p] == got;
        if (!at_name) {
            snprintf(why, cap, "the handle of node %zu resolves to another node", i);
            return why;
        }
    }
    return NULL;
}

static int run_verify(const opts_t *o)
{
    FILE *f = fopen(o->ack, "r");
    if (!f) die("open %s", o->ack);
    char line[256];
    uint64_t nacks = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[strlen(line) - 1] != '\n') break;   /* torn last line */
        uint64_t r, k;
        unsigned t;
        char fh[2 * ZPL_FH_SIZE + 1];
        if (sscanf(line, "S %" SCNu64 " %u", &r, &t) == 2 && line[0] == 'S') {
            if (r >= MAXROUNDS || t >= NTHREADS) die("bad ack line %s", line);
            ts[r][t].started = true;
            ts[r][t].last = -1;
        } else if (line[0] == 'A' && sscanf(line, "A %" SCNu64 " %u %" SCNu64 " %80s", &r, &t, &k, fh) == 4) {
            if (r >= MAXROUNDS || t >= NTHREADS || !ts[r][t].started) die("bad ack line %s", line);
            tstate_t *s = &ts[r][t];
            if ((int64_t)k != s->last + 1) die("acks out of order: %s", line);
            s->last = (int64_t)k;
            if (s->nfh <= k) {
                s->nfh = s->nfh ? s->nfh * 2 : 256;
                while (s->nfh <= k) s->nfh *= 2;
                s->fh = realloc(s->fh, s->nfh * sizeof *s->fh);
            }
            snprintf(s->fh[k], sizeof s->fh[k], "%s", fh);
            nacks++;
        }
    }
    fclose(f);
    open_all(o);
    uint64_t dirs = 0, inflight = 0;
    for (uint64_t r = 0; r < MAXROUNDS; r++) {
        for (unsigned t = 0; t < NTHREADS; t++) {
            tstate_t *s = &ts[r][t];
            if (!s->started) continue;
            tdirs_t td;
            thread_dirs(r, t, false, &td);
            model_t m;
            model_init(&m);
            uint64_t rng = seed_of(r, t);
            for (int64_t k = 0; k <= s->last; k++) {
                op_t op = gen_op(&rng, &m);
                size_t before = m.nino;
                model_apply(&m, &op, (uint64_t)k);
                if (m.nino > before && unhex(s->fh[k], &m.ino[before].fh)) m.ino[before].has_fh = true;
            }
            char why[256], why2[256];
            const char *w = compare(&td, &m, why, sizeof why);
            if (w) {
                /* The operation in flight at the kill may have happened. */
                op_t op = gen_op(&rng, &m);
                model_apply(&m, &op, (uint64_t)(s->last + 1));
                const char *w2 = compare(&td, &m, why2, sizeof why2);
                if (w2)
                    die("round %" PRIu64 " thread %u: after %" PRId64 " acknowledged operations: %s; "
                        "after the next one: %s", r, t, s->last + 1, w, w2);
                inflight++;
            }
            model_free(&m);
            zpl_node_rele(td.d);
            zpl_node_rele(td.s);
            free(s->fh);
            dirs++;
        }
    }
    close_all();
    spa_check_report_t rep;
    char err[512] = "";
    int e = spa_check(o->pool, o->dirs, o->ndirs, &rep, err, sizeof err);
    if (e) die("check: %s", err);
    printf("verified %" PRIu64 " directories after %" PRIu64 " acknowledged operations (%" PRIu64
           " with the unacknowledged one applied); check clean\n", dirs, nacks, inflight);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) die("usage: cairn_fsnslog writer|verify -d DIR POOL --ack FILE [--round R]");
    opts_t o = {0};
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc && o.ndirs < 8) o.dirs[o.ndirs++] = argv[++i];
        else if (!strcmp(argv[i], "--ack") && i + 1 < argc) o.ack = argv[++i];
        else if (!strcmp(argv[i], "--round") && i + 1 < argc) o.round = strtoull(argv[++i], NULL, 10);
        else o.pool = argv[i];
    }
    if (!o.pool || !o.ack || !o.ndirs) die("missing arguments");
    if (o.round >= MAXROUNDS) die("--round must be below %d", MAXROUNDS);
    if (!strcmp(argv[1], "writer")) return run_writer(&o);
    if (!strcmp(argv[1], "verify")) return run_verify(&o);
    die("unknown command %s", argv[1]);
}
