/*
 * Randomized model test of the ZPL: thousands of random operations (create,
 * write, truncate, rename, link, unlink, mkdir, rmdir, snapshot, rollback,
 * clone) run against the library and against an in-memory model. After each
 * step the result code and the touched objects must match the model; every
 * 100 steps and after each export/import the whole tree is compared (after an
 * import the live snapshot's too).
 * Seed: CAIRN_TEST_SEED (default fixed); CAIRN_TEST_LONG runs more steps.
 *
 * Also: a 100k-entry directory (1M with CAIRN_TEST_LONG) whose lookups and
 * creates cost as many directory blocks at the end as at 10k entries
 * (counted, not timed; rates are printed, never asserted).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

#include <cairn/zap.h>

#define M_MAX_INODES 4096
#define M_MAX_ENTRIES 64
#define M_NAMES 8
#define M_MAX_FILE (256 * 1024)

typedef struct m_entry {
    char name[16];
    int ino;
} m_entry_t;

typedef struct m_inode {
    int type;                 /* 0 free, 1 file, 2 dir */
    int nlink;
    int parent;               /* dirs */
    uint8_t *data;            /* files: M_MAX_FILE bytes */
    uint64_t size;
    m_entry_t *ents;          /* dirs */
    int nents;
} m_inode_t;

static char m_last_op[200];

typedef struct model {
    m_inode_t in[M_MAX_INODES];
} model_t;

static int m_alloc(model_t *m, int type)
{
    for (int i = 1; i < M_MAX_INODES; i++) {
        if (m->in[i].type) continue;
        m_inode_t *x = &m->in[i];
        memset(x, 0, sizeof(*x));
        x->type = type;
        if (type == 1) x->data = calloc(1, M_MAX_FILE);
        else x->ents = calloc(M_MAX_ENTRIES, sizeof(m_entry_t));
        return i;
    }
    return -1;
}

static void m_free(model_t *m, int i)
{
    free(m->in[i].data);
    free(m->in[i].ents);
    memset(&m->in[i], 0, sizeof(m->in[i]));
}

static void m_copy(model_t *dst, const model_t *src)
{
    for (int i = 0; i < M_MAX_INODES; i++) {
        free(dst->in[i].data);
        free(dst->in[i].ents);
        dst->in[i] = src->in[i];
        if (src->in[i].data) {
            dst->in[i].data = malloc(M_MAX_FILE);
            memcpy(dst->in[i].data, src->in[i].data, M_MAX_FILE);
        }
        if (src->in[i].ents) {
            dst->in[i].ents = malloc(M_MAX_ENTRIES * sizeof(m_entry_t));
            memcpy(dst->in[i].ents, src->in[i].ents, M_MAX_ENTRIES * sizeof(m_entry_t));
        }
    }
}

static void m_clear(model_t *m)
{
    for (int i = 0; i < M_MAX_INODES; i++) m_free(m, i);
}

static int m_find(const m_inode_t *d, const char *name)
{
    for (int i = 0; i < d->nents; i++)
        if (!strcmp(d->ents[i].name, name)) return i;
    return -1;
}

static void m_del_ent(m_inode_t *d, int idx) { d->ents[idx] = d->ents[--d->nents]; }

static void m_add_ent(m_inode_t *d, const char *name, int ino)
{
    snprintf(d->ents[d->nents].name, sizeof(d->ents[0].name), "%s", name);
    d->ents[d->nents].ino = ino;
    d->nents++;
}

static int m_subdirs(const model_t *m, const m_inode_t *d)
{
    int n = 0;
    for (int i = 0; i < d->nents; i++) n += m->in[d->ents[i].ino].type == 2;
    return n;
}

/* Drops one link of ino; frees it at zero (directories: always). */
static void m_unlink(model_t *m, int ino)
{
    m_inode_t *x = &m->in[ino];
    if (x->type == 2 || --x->nlink == 0) m_free(m, ino);
}

static bool m_is_ancestor(const model_t *m, int anc, int d)
{
    for (;;) {
        if (d == anc) return true;
        if (d == 1) return false;
        d = m->in[d].parent;
    }
}

/* ---- the real side: nodes by model directory (resolved by path each time) ---- */

static zpl_node_t *resolve(zpl_fs_t *fs, const model_t *m, int dir)
{
    int chain[256], n = 0;
    for (int d = dir; d != 1; d = m->in[d].parent) chain[n++] = d;
    zpl_node_t *cur;
    assert_int_equal(zpl_root(fs, &cur), 0);
    for (int i = n - 1; i >= 0; i--) {
        const m_inode_t *p = &m->in[i == n - 1 ? 1 : chain[i + 1]];
        const char *name = NULL;
        for (int k = 0; k < p->nents; k++)
            if (p->ents[k].ino == chain[i]) name = p->ents[k].name;
        assert_non_null(name);
        zpl_node_t *next;
        int e = zpl_lookup(cur, name, &next);
        if (e) fail_msg("lookup of %s failed: %d", name, e);
        zpl_node_rele(cur);
        cur = next;
    }
    return cur;
}

static void check_file(zpl_node_t *n, const m_inode_t *x)
{
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(n, &a), 0);
    assert_true(S_ISREG(a.mode));
    if (a.size != x->size) fail_msg("size %llu, model %llu", (unsigned long long)a.size,
                                    (unsigned long long)x->size);
    assert_int_equal(a.nlink, x->nlink);
    static uint8_t buf[M_MAX_FILE];
    size_t nr = 0;
    assert_int_equal(zpl_read(n, 0, M_MAX_FILE, buf, &nr, NULL), 0);
    assert_int_equal(nr, x->size);
    if (memcmp(buf, x->data, x->size)) fail_msg("file content differs from the model");
}

static void check_dir_attrs(zpl_node_t *n, const model_t *m, const m_inode_t *d)
{
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(n, &a), 0);
    assert_true(S_ISDIR(a.mode));
    if (a.size != (uint64_t)d->nents + 2 || a.nlink != (uint64_t)m_subdirs(m, d) + 2)
        fail_msg("dir %llu: size %llu nlink %llu, model %d entries %d subdirs (after %s)",
                 (unsigned long long)a.ino, (unsigned long long)a.size,
                 (unsigned long long)a.nlink, d->nents, m_subdirs(m, d), m_last_op);
}

typedef struct listing {
    int n;
    bool bad;
} listing_t;

static int count_cb(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)ino;
    (void)type;
    (void)cookie;
    listing_t *l = arg;
    if (strcmp(name, ".") && strcmp(name, "..")) l->n++;
    return 0;
}

static void check_tree(zpl_node_t *dn, const model_t *m, int dir, uint64_t *ino_map)
{
    const m_inode_t *d = &m->in[dir];
    check_dir_attrs(dn, m, d);
    listing_t l = {0};
    bool eof = false;
    assert_int_equal(zpl_readdir(dn, 0, count_cb, &l, &eof), 0);
    assert_true(eof);
    if (l.n != d->nents) {
        for (int i = 0; i < d->nents; i++) fprintf(stderr, "  model: %s\n", d->ents[i].name);
        fail_msg("readdir found %d entries, model %d (after %s)", l.n, d->nents, m_last_op);
    }
    for (int i = 0; i < d->nents; i++) {
        zpl_node_t *c;
        int e = zpl_lookup(dn, d->ents[i].name, &c);
        if (e) fail_msg("lookup %s: %d", d->ents[i].name, e);
        int ino = d->ents[i].ino;
        if (ino_map[ino] && ino_map[ino] != zpl_node_ino(c)) fail_msg("hard link identity lost");
        ino_map[ino] = zpl_node_ino(c);
        if (m->in[ino].type == 1) check_file(c, &m->in[ino]);
        else check_tree(c, m, ino, ino_map);
        zpl_node_rele(c);
    }
}

static void check_all(zpl_fs_t *fs, const model_t *m)
{
    static uint64_t ino_map[M_MAX_INODES];
    memset(ino_map, 0, sizeof(ino_map));
    zpl_node_t *root;
    assert_int_equal(zpl_root(fs, &root), 0);
    check_tree(root, m, 1, ino_map);
    zpl_node_rele(root);
}

/* ---- random operations ---- */

typedef struct mt {
    zfix_t f;
    model_t *m;
    model_t *snapmodel;
    char snapname[200];
    bool have_snap;
    cairn_rng_t rng;
    bool dsl_snapshots;
    unsigned long counts[16];
} mt_t;

static int rand_dir(mt_t *t)
{
    int dirs[M_MAX_INODES], n = 0;
    for (int i = 1; i < M_MAX_INODES; i++)
        if (t->m->in[i].type == 2) dirs[n++] = i;
    return dirs[cairn_rng_below(&t->rng, (uint64_t)n)];
}

static void rand_name(mt_t *t, char *name)
{
    snprintf(name, 16, "n%d", (int)cairn_rng_below(&t->rng, M_NAMES));
}

static void fill(mt_t *t, uint8_t *buf, size_t len)
{
    uint64_t v = cairn_rng_next(&t->rng);
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(v + i * 13);
}

static void step(mt_t *t)
{
    model_t *m = t->m;
    zpl_fs_t *fs = t->f.fs;
    char name[16], name2[16];
    int d = rand_dir(t);
    m_inode_t *D = &m->in[d];
    rand_name(t, name);
    int idx = m_find(D, name);
    int op = (int)cairn_rng_below(&t->rng, 100);
    zpl_node_t *dn = resolve(fs, m, d);
    int expect = 0, got = 0;
    int kind;
    if (op < 15) { /* create */
        kind = 0;
        expect = idx >= 0 ? -EEXIST : (D->nents >= M_MAX_ENTRIES ? 1 : 0);
        if (expect == 1) goto done;
        got = zpl_create(dn, name, 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL);
        if (!expect) {
            int ino = m_alloc(m, 1);
            m->in[ino].nlink = 1;
            m_add_ent(D, name, ino);
        }
    } else if (op < 40) { /* write */
        kind = 1;
        if (idx < 0 || m->in[D->ents[idx].ino].type != 1) goto done;
        m_inode_t *x = &m->in[D->ents[idx].ino];
        uint64_t off = cairn_rng_below(&t->rng, M_MAX_FILE - 16384);
        size_t len = 1 + cairn_rng_below(&t->rng, 16384);
        uint8_t buf[16384];
        fill(t, buf, len);
        zpl_node_t *n;
        assert_int_equal(zpl_lookup(dn, name, &n), 0);
        got = zpl_write(n, off, len, buf, 0, NULL);
        memcpy(x->data + off, buf, len);
        if (off + len > x->size) x->size = off + len;
        check_file(n, x);
        zpl_node_rele(n);
    } else if (op < 48) { /* truncate */
        kind = 2;
        if (idx < 0 || m->in[D->ents[idx].ino].type != 1) goto done;
        m_inode_t *x = &m->in[D->ents[idx].ino];
        uint64_t size = cairn_rng_below(&t->rng, M_MAX_FILE);
        zpl_node_t *n;
        assert_int_equal(zpl_lookup(dn, name, &n), 0);
        zpl_setattr_t sa = {.mask = ZPL_SET_SIZE, .size = size};
        got = zpl_setattr(n, &sa, NULL);
        if (size < x->size) memset(x->data + size, 0, x->size - size);
        x->size = size;
        check_file(n, x);
        zpl_node_rele(n);
    } else if (op < 63) { /* rename */
        kind = 3;
        int td = rand_dir(t);
        m_inode_t *T = &m->in[td];
        rand_name(t, name2);
        int tidx = m_find(T, name2);
        zpl_node_t *tn = resolve(fs, m, td);
        int sino = idx >= 0 ? D->ents[idx].ino : 0;
        int tino = tidx >= 0 ? T->ents[tidx].ino : 0;
        if (idx < 0) expect = -ENOENT;
        else if (sino == tino) expect = 0;
        else if (d != td && m->in[sino].type == 2 && m_is_ancestor(m, sino, td)) expect = -EINVAL;
        else if (tino && m->in[sino].type == 2 && m->in[tino].type != 2) expect = -ENOTDIR;
        else if (tino && m->in[sino].type != 2 && m->in[tino].type == 2) expect = -EISDIR;
        else if (tino && m->in[tino].type == 2 && m->in[tino].nents) expect = -ENOTEMPTY;
        else if (!tino && T->nents >= M_MAX_ENTRIES) {
            zpl_node_rele(tn);
            goto done;
        }
        got = zpl_rename(dn, name, tn, name2, NULL, NULL);
        if (!expect && sino != tino) {
            if (tino) {
                m_del_ent(T, m_find(T, name2));
                m_unlink(m, tino);
            }
            m_del_ent(D, m_find(D, name));
            m_add_ent(T, name2, sino);
            if (m->in[sino].type == 2) m->in[sino].parent = td;
        }
        if (!expect) check_dir_attrs(tn, m, T);
        zpl_node_rele(tn);
    } else if (op < 70) { /* link */
        kind = 4;
        int td = rand_dir(t);
        m_inode_t *T = &m->in[td];
        rand_name(t, name2);
        if (idx < 0 || T->nents >= M_MAX_ENTRIES) goto done;
        int sino = D->ents[idx].ino;
        expect = m->in[sino].type == 2 ? -EPERM : m_find(T, name2) >= 0 ? -EEXIST : 0;
        zpl_node_t *tn = resolve(fs, m, td), *sn;
        assert_int_equal(zpl_lookup(dn, name, &sn), 0);
        got = zpl_link(sn, tn, name2, NULL);
        if (!expect) {
            m->in[sino].nlink++;
            m_add_ent(T, name2, sino);
        }
        zpl_node_rele(sn);
        zpl_node_rele(tn);
    } else if (op < 82) { /* unlink */
        kind = 5;
        expect = idx < 0 ? -ENOENT : m->in[D->ents[idx].ino].type == 2 ? -EISDIR : 0;
        got = zpl_remove(dn, name, NULL);
        if (!expect) {
            int ino = D->ents[idx].ino;
            m_del_ent(D, idx);
            m_unlink(m, ino);
        }
    } else if (op < 92) { /* mkdir */
        kind = 6;
        expect = idx >= 0 ? -EEXIST : 0;
        if (!expect && D->nents >= M_MAX_ENTRIES) goto done;
        int depth = 0;
        for (int x = d; x != 1; x = m->in[x].parent) depth++;
        if (depth > 12) goto done;
        got = zpl_mkdir(dn, name, 0755, &zfix_cred, NULL, NULL);
        if (!expect) {
            int ino = m_alloc(m, 2);
            m->in[ino].parent = d;
            m_add_ent(D, name, ino);
        }
    } else { /* rmdir */
        kind = 7;
        expect = idx < 0 ? -ENOENT
                 : m->in[D->ents[idx].ino].type != 2 ? -ENOTDIR
                 : m->in[D->ents[idx].ino].nents ? -ENOTEMPTY : 0;
        got = zpl_rmdir(dn, name, NULL);
        if (!expect) {
            int ino = D->ents[idx].ino;
            m_del_ent(D, idx);
            m_unlink(m, ino);
        }
    }
    snprintf(m_last_op, sizeof(m_last_op), "op %d on dir %d name %s -> %d", kind, d, name, got);
    if (got != expect) fail_msg("op kind %d on %s: got %d, model says %d", kind, name, got, expect);
    t->counts[kind]++;
    if (m->in[d].type == 2) check_dir_attrs(dn, m, &m->in[d]);
done:
    zpl_node_rele(dn);
}

static void snapshot_step(mt_t *t, int i)
{
    char err[256];
    int what = (int)cairn_rng_below(&t->rng, 3);
    if (what == 0 || !t->have_snap) {
        if (t->have_snap) {
            assert_int_equal(zpl_fs_release_snapshots(t->f.fs), 0);
            assert_int_equal(dsl_dataset_destroy(t->f.dp, t->snapname, false, false, err, sizeof(err)), 0);
        }
        snprintf(t->snapname, sizeof(t->snapname), "%s@s%d", t->f.fsname, i);
        assert_int_equal(dsl_snapshot(t->f.dp, t->snapname, false, err, sizeof(err)), 0);
        m_copy(t->snapmodel, t->m);
        t->have_snap = true;
        t->counts[8]++;
        /* the snapshot, read through .cairn/snapshot, is the model of this moment */
        zpl_node_t *root, *ctl, *sd, *sroot;
        assert_int_equal(zpl_root(t->f.fs, &root), 0);
        assert_int_equal(zpl_lookup(root, ZPL_CTLDIR_NAME, &ctl), 0);
        assert_int_equal(zpl_lookup(ctl, "snapshot", &sd), 0);
        assert_int_equal(zpl_lookup(sd, strchr(t->snapname, '@') + 1, &sroot), 0);
        zpl_node_rele(sroot);
        zpl_node_rele(sd);
        zpl_node_rele(ctl);
        zpl_node_rele(root);
    } else if (what == 1) {
        /* rollback to the snapshot */
        assert_int_equal(zpl_unmount(t->f.fs), 0);
        t->f.fs = NULL;
        int e = dsl_rollback(t->f.dp, t->snapname, false, err, sizeof(err));
        if (e) fail_msg("rollback: %s", err);
        assert_int_equal(zpl_mount(t->f.dp, t->f.fsname, &t->f.fs), 0);
        m_copy(t->m, t->snapmodel);
        check_all(t->f.fs, t->m);
        t->counts[9]++;
    } else {
        /* the snapshot as seen read-only and in a clone */
        zpl_fs_t *sfs;
        assert_int_equal(zpl_mount(t->f.dp, t->snapname, &sfs), 0);
        check_all(sfs, t->snapmodel);
        assert_int_equal(zpl_unmount(sfs), 0);
        char clone[200];
        snprintf(clone, sizeof(clone), "%s/clone%d", t->f.pool, i);
        int e = dsl_clone(t->f.dp, t->snapname, clone, NULL, 0, err, sizeof(err));
        if (e) fail_msg("clone: %s", err);
        zpl_fs_t *cfs;
        assert_int_equal(zpl_mount(t->f.dp, clone, &cfs), 0);
        check_all(cfs, t->snapmodel);
        zpl_node_t *croot;
        assert_int_equal(zpl_root(cfs, &croot), 0);
        assert_int_equal(zpl_create(croot, "clone-only", 0644, &zfix_cred, 0, NULL, NULL, NULL), 0);
        zpl_node_rele(croot);
        assert_int_equal(zpl_unmount(cfs), 0);
        assert_int_equal(dsl_dataset_destroy(t->f.dp, clone, false, false, err, sizeof(err)), 0);
        t->counts[10]++;
    }
}

static uint64_t env_seed(void)
{
    const char *s = getenv("CAIRN_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : 0x5eed2024ull;
}

static void test_model(void **state)
{
    (void)state;
    mt_t *t = calloc(1, sizeof(*t));
    t->m = calloc(1, sizeof(model_t));
    t->snapmodel = calloc(1, sizeof(model_t));
    uint64_t seed = env_seed();
    cairn_rng_seed(&t->rng, seed);
    bool lng = getenv("CAIRN_TEST_LONG") != NULL;
    int steps = lng ? 50000 : 4000;
    printf("zpl model: seed 0x%llx, %d steps\n", (unsigned long long)seed, steps);
    zfix_make(&t->f, "zplmodel", 1024 * CAIRN_MIB);
    int root = m_alloc(t->m, 2);
    assert_int_equal(root, 1);
    t->m->in[1].parent = 1;
    for (int i = 1; i <= steps; i++) {
        step(t);
        if (i % 100 == 0) check_all(t->f.fs, t->m);
        if (i % 250 == 0) snapshot_step(t, i);
        if (i % 1000 == 0) {
            if (t->have_snap) assert_int_equal(zpl_fs_release_snapshots(t->f.fs), 0);
            zfix_reimport(&t->f);
            check_all(t->f.fs, t->m);
            if (t->have_snap) { /* the snapshot too came back as it was taken */
                zpl_fs_t *sfs;
                assert_int_equal(zpl_mount(t->f.dp, t->snapname, &sfs), 0);
                check_all(sfs, t->snapmodel);
                assert_int_equal(zpl_unmount(sfs), 0);
            }
        }
    }
    check_all(t->f.fs, t->m);
    printf("zpl model: create %lu write %lu truncate %lu rename %lu link %lu unlink %lu mkdir %lu "
           "rmdir %lu snapshot %lu rollback %lu clone %lu\n",
           t->counts[0], t->counts[1], t->counts[2], t->counts[3], t->counts[4], t->counts[5],
           t->counts[6], t->counts[7], t->counts[8], t->counts[9], t->counts[10]);
    assert_true(t->counts[3] > 0 && t->counts[4] > 0 && t->counts[7] > 0);
    /* the fixed seed must reach snapshot, rollback and clone, or the suite proves less */
    assert_true(t->counts[8] > 0 && t->counts[9] > 0 && t->counts[10] > 0);
    zfix_destroy(&t->f);
    m_clear(t->m);
    m_clear(t->snapmodel);
    free(t->m);
    free(t->snapmodel);
    free(t);
}

/* ZAP blocks one directory operation looked at. */
typedef struct dircost {
    uint64_t ops, blocks, max_blocks;
} dircost_t;

static void dircost_add(dircost_t *c, const zap_op_stats_t *a)
{
    zap_op_stats_t b;
    zap_thread_stats(&b);
    c->ops++;
    c->blocks += b.blocks - a->blocks;
    if (b.blocks - a->blocks > c->max_blocks) c->max_blocks = b.blocks - a->blocks;
}

/* Lookups of k random entries of the first n, and of k absent names. */
static void dir_lookups(zpl_node_t *d, int n, int k, cairn_rng_t *rng, dircost_t *c)
{
    char name[32];
    for (int i = 0; i < k; i++) {
        int j = (int)cairn_rng_below(rng, (uint64_t)n);
        zap_op_stats_t a;
        zpl_node_t *x;
        snprintf(name, sizeof(name), "file-%08d", j);
        zap_thread_stats(&a);
        int e = zpl_lookup(d, name, &x);
        dircost_add(c, &a);
        if (e) fail_msg("lookup %s: %d", name, e);
        zpl_node_rele(x);
        snprintf(name, sizeof(name), "none-%08d", j);
        zap_thread_stats(&a);
        assert_int_equal(zpl_lookup(d, name, &x), -ENOENT);
        dircost_add(c, &a);
    }
}

/* A directory of 100k (1M in long mode) entries: lookups and creates cost
 * the same number of directory blocks at 10k entries as at the end (counted
 * with zap_thread_stats, not timed): a lookup one block, a create about three
 * (the name's leaf looked up, then the leaf and the header written). Rates are
 * printed, never asserted. */
static void test_big_directory(void **state)
{
    (void)state;
    bool lng = getenv("CAIRN_TEST_LONG") != NULL;
    int n = lng ? 1000000 : 100000;
    zfix_t f;
    zfix_make(&f, "zplbigdir", (lng ? 8192 : 2048) * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *d;
    assert_int_equal(zpl_mkdir(root, "big", 0755, &zfix_cred, &d, NULL), 0);
    char name[32];
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 7);
    const int marks[2] = {10000, n};
    dircost_t creates[2] = {{0}}, lookups[2] = {{0}};
    uint64_t t0 = cairn_now_ns(), tprev = t0;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "file-%08d", i);
        int m = i < marks[0] ? 0 : 1;
        zap_op_stats_t a;
        zap_thread_stats(&a);
        int e = zpl_create(d, name, 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL);
        if (i >= marks[m] - 1000) dircost_add(&creates[m], &a);
        if (e) fail_msg("create %s: %d", name, e);
        if (i + 1 == marks[0] || i + 1 == marks[1]) dir_lookups(d, i + 1, 1000, &rng, &lookups[m]);
        if ((i + 1) % (n / 4) == 0) {
            uint64_t now = cairn_now_ns();
            printf("big dir: entries %d..%d: %.0f creates/s\n", i + 1 - n / 4, i + 1,
                   (n / 4) / ((now - tprev) / 1e9));
            tprev = now;
        }
    }
    for (int m = 0; m < 2; m++) {
        printf("big dir: at %d entries: directory blocks per create %.3f (at most %llu), "
               "per lookup %.3f (at most %llu)\n",
               marks[m], (double)creates[m].blocks / (double)creates[m].ops,
               (unsigned long long)creates[m].max_blocks,
               (double)lookups[m].blocks / (double)lookups[m].ops,
               (unsigned long long)lookups[m].max_blocks);
        assert_int_equal(lookups[m].ops, 2000);
        assert_int_equal(lookups[m].max_blocks, 1);
        assert_int_equal(lookups[m].blocks, lookups[m].ops);
        assert_int_equal(creates[m].ops, 1000);
        assert_true(creates[m].blocks <= creates[m].ops * 7 / 2);
    }
    assert_true(creates[1].blocks <= creates[0].blocks + creates[0].ops / 4);
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(d, &a), 0);
    assert_int_equal(a.size, (uint64_t)n + 2);
    int nl = 20000;
    uint64_t t1 = cairn_now_ns();
    for (int i = 0; i < nl; i++) {
        int k = (int)cairn_rng_below(&rng, (uint64_t)n);
        snprintf(name, sizeof(name), "file-%08d", k);
        zpl_node_t *c;
        int e = zpl_lookup(d, name, &c);
        if (e) fail_msg("lookup %s: %d", name, e);
        zpl_node_rele(c);
        snprintf(name, sizeof(name), "none-%08d", k);
        assert_int_equal(zpl_lookup(d, name, &c), -ENOENT);
    }
    uint64_t t2 = cairn_now_ns();
    printf("big dir: %d entries, %.0f lookups/s (hits and misses)\n", n, 2.0 * nl / ((t2 - t1) / 1e9));
    zpl_node_rele(d);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_big_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
