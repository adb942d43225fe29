/*
 * The filesystem's intent-log records across a crash. Each scenario runs in a
 * child process (this program re-executed) on a pool whose txgs never sync on
 * their own (txg_timeout 300 s): it builds a base state and syncs it, makes
 * the logged changes, commits, reports what it saw and exits without
 * unmounting or exporting - a crash. The parent imports the pool (mounting
 * replays the log) and requires:
 *   - creates of every kind (file, EXCLUSIVE with its verifier, directory,
 *     short and long symlink, fifo, device) come back under the same object
 *     number and generation: handles from before the crash resolve, with
 *     every attribute as it was; an EXCLUSIVE retransmission finds its file;
 *   - removes (last link and not), rmdir, renames (same directory, across,
 *     over an existing target, a directory across) and links leave exactly
 *     the names, link counts and directory sizes they left; handles of freed
 *     nodes are stale;
 *   - setattrs and truncates interleaved with writes leave the bytes and
 *     attributes they left;
 *   - commits of namespace operations wait for the log, not for txgs;
 *   - large unstable writes (NFS UNSTABLE) committed later (COMMIT): their
 *     bytes are not copied into the log; the commit writes their records as
 *     blocks the txg adopts (written once) and logs pointers, without waiting
 *     for the txg; small ones are copied; both are there after the crash,
 *     also records rewritten after a commit in the same txg (newest bytes,
 *     nothing leaked), and a txg that syncs afterwards writes no data twice;
 *   - sync=always makes a change durable without a commit; sync=disabled
 *     logs nothing and its commit does not wait (the change is lost, and
 *     nothing else breaks);
 *   - the pool checks clean afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* The fixture's export/import helpers are for in-process tests; these crash in a child. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop
#include "../../src/zpl/zpl_impl.h"
#include <cairn/vdev.h>

#include <stdatomic.h>

#include <errno.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#define MAXN 16

typedef struct report {
    char dir[512], path[600], pool[64], fsname[128];
    int nnodes;
    char names[MAXN][64];        /* paths from the root */
    zpl_fh_t fh[MAXN];
    zpl_attr_t attr[MAXN];       /* after the logged changes (unused for stale ones) */
    bool stale[MAXN];            /* freed by the logged changes */
    uint64_t txg_waits, records;
    uint64_t later_blocks;       /* records the commits wrote as blocks */
    uint64_t later_waits;        /* unstable writes whose commit waited for the txg instead */
    uint64_t synced_delta;       /* txgs synced while the logged part ran and committed */
    uint64_t sync_bytes;         /* unstable_synced: leaf bytes its last sync wrote */
    uint8_t verf[ZPL_VERF_SIZE];
} report_t;

static const char *self_exe;

/* ---------------- helpers (both sides) ---------------- */

static zpl_node_t *walk(zpl_fs_t *fs, const char *path)
{
    zpl_node_t *n;
    assert_int_equal(zpl_root(fs, &n), 0);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        zpl_node_t *next;
        int e = zpl_lookup(n, c, &next);
        zpl_node_rele(n);
        if (e) return NULL;
        n = next;
    }
    return n;
}

static zpl_node_t *must(zpl_fs_t *fs, const char *path)
{
    zpl_node_t *n = walk(fs, path);
    if (!n) fprintf(stderr, "missing: %s\n", path);
    assert_non_null(n);
    return n;
}

static uint8_t pat(uint64_t tag, uint64_t off) { return (uint8_t)((off * 7 + tag * 131) % 251 + 1); }

static void put(zpl_fs_t *fs, const char *path, uint64_t off, uint64_t len, uint64_t tag)
{
    uint8_t *b = malloc(len);
    for (uint64_t i = 0; i < len; i++) b[i] = pat(tag, off + i);
    zpl_node_t *n = must(fs, path);
    assert_int_equal(zpl_write(n, off, len, b, 0, NULL), 0);
    zpl_node_rele(n);
    free(b);
}

/* Records a node in the report: its handle, and its attributes once the changes are done. */
static void note(report_t *r, zpl_fs_t *fs, const char *path)
{
    assert_true(r->nnodes < MAXN);
    int i = r->nnodes++;
    snprintf(r->names[i], sizeof r->names[i], "%s", path);
    zpl_node_t *n = must(fs, path);
    assert_int_equal(zpl_fh_encode(n, &r->fh[i]), 0);
    zpl_node_rele(n);
}

static void note_attrs(report_t *r, zpl_fs_t *fs)
{
    for (int i = 0; i < r->nnodes; i++) {
        zpl_node_t *n;
        int e = zpl_fh_to_inode(fs, r->fh[i].bytes, ZPL_FH_SIZE, &n);
        r->stale[i] = e == -ESTALE;
        if (e) continue;
        assert_int_equal(zpl_getattr(n, &r->attr[i]), 0);
        zpl_node_rele(n);
    }
}

/* ---------------- the scenarios (child side) ---------------- */

static const uint8_t verf_a[ZPL_VERF_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8};

static void long_target(char *t, size_t len)
{
    for (size_t i = 0; i < len; i++) t[i] = (char)('a' + i % 26);
    t[len] = 0;
}

static void sc_create_base(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_mkdir(root, "d", 0755, &zfix_cred, NULL, NULL), 0);
    zpl_node_rele(root);
}

static void sc_create(zpl_fs_t *fs, report_t *r)
{
    zpl_node_t *root = must(fs, ""), *d = must(fs, "d");
    char tgt[1001];
    long_target(tgt, 1000);
    assert_int_equal(zpl_create(root, "f", 0640, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    put(fs, "f", 0, 5000, 1);
    assert_int_equal(zpl_create(root, "x", 0600, &zfix_cred, ZPL_CREATE_EXCLUSIVE, verf_a, NULL, NULL), 0);
    assert_int_equal(zpl_mkdir(d, "sub", 0750, &zfix_cred, NULL, NULL), 0);
    assert_int_equal(zpl_symlink(root, "s", "short/target", &zfix_cred, NULL, NULL), 0);
    assert_int_equal(zpl_symlink(d, "L", tgt, &zfix_cred, NULL, NULL), 0);
    assert_int_equal(zpl_mknod(root, "fifo", S_IFIFO | 0644, 0, &zfix_cred, NULL, NULL), 0);
    assert_int_equal(zpl_mknod(d, "chr", S_IFCHR | 0600, makedev(1, 3), &zfix_cred, NULL, NULL), 0);
    zpl_node_rele(root);
    zpl_node_rele(d);
    const char *all[] = {"", "d", "f", "x", "d/sub", "s", "d/L", "fifo", "d/chr"};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(all); i++) note(r, fs, all[i]);
}

static void sc_ns_base(zpl_fs_t *fs, report_t *r)
{
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_mkdir(root, "a", 0755, &zfix_cred, NULL, NULL), 0);
    assert_int_equal(zpl_mkdir(root, "b", 0755, &zfix_cred, NULL, NULL), 0);
    zpl_node_t *a = must(fs, "a"), *b = must(fs, "b");
    assert_int_equal(zpl_mkdir(a, "sub", 0755, &zfix_cred, NULL, NULL), 0);
    assert_int_equal(zpl_mkdir(b, "emptydir", 0755, &zfix_cred, NULL, NULL), 0);
    const char *afiles[] = {"f1", "f2", "f3", "h1", "gone"};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(afiles); i++)
        assert_int_equal(zpl_create(a, afiles[i], 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    assert_int_equal(zpl_create(b, "t1", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    zpl_node_t *h1 = must(fs, "a/h1");
    assert_int_equal(zpl_link(h1, b, "h2", NULL), 0);
    zpl_node_rele(h1);
    put(fs, "a/f2", 0, 20000, 2);
    put(fs, "b/t1", 0, 9000, 3);
    zpl_node_rele(a);
    zpl_node_rele(b);
    zpl_node_rele(root);
    const char *all[] = {"a", "b", "a/f1", "a/f2", "a/f3", "a/h1", "a/gone", "b/t1", "a/sub",
                         "b/emptydir"};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(all); i++) note(r, fs, all[i]);
}

static void sc_ns(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    zpl_node_t *a = must(fs, "a"), *b = must(fs, "b");
    assert_int_equal(zpl_remove(a, "gone", NULL), 0);
    assert_int_equal(zpl_remove(b, "h2", NULL), 0);
    assert_int_equal(zpl_rmdir(b, "emptydir", NULL), 0);
    assert_int_equal(zpl_rename(a, "f1", a, "f1r", NULL, NULL), 0);
    assert_int_equal(zpl_rename(a, "f2", b, "f2x", NULL, NULL), 0);
    assert_int_equal(zpl_rename(a, "f3", b, "t1", NULL, NULL), 0);
    assert_int_equal(zpl_rename(a, "sub", b, "sub", NULL, NULL), 0);
    zpl_node_t *h1 = must(fs, "a/h1");
    assert_int_equal(zpl_link(h1, b, "h3", NULL), 0);
    zpl_node_rele(h1);
    zpl_node_rele(a);
    zpl_node_rele(b);
}

static void sc_attr_base(zpl_fs_t *fs, report_t *r)
{
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_create(root, "f", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    assert_int_equal(zpl_create(root, "g", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    zpl_node_rele(root);
    put(fs, "f", 0, 3 * 65536, 4);
    note(r, fs, "f");
    note(r, fs, "g");
}

static void sc_attr(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    zpl_node_t *f = must(fs, "f"), *g = must(fs, "g");
    zpl_setattr_t sa = {.mask = ZPL_SET_MODE | ZPL_SET_UID | ZPL_SET_GID | ZPL_SET_ATIME |
                                ZPL_SET_MTIME,
                        .mode = 0600, .uid = 7, .gid = 8, .atime_ns = 1000000000ll * 1000,
                        .mtime_ns = 1000000000ll * 2000};
    assert_int_equal(zpl_setattr(f, &sa, NULL), 0);
    zpl_setattr_t tr = {.mask = ZPL_SET_SIZE, .size = 70000};
    assert_int_equal(zpl_setattr(f, &tr, NULL), 0);
    put(fs, "f", 100000, 5000, 5);
    tr.size = 200000;
    assert_int_equal(zpl_setattr(f, &tr, NULL), 0);
    put(fs, "g", 0, 10000, 6);
    tr.size = 3000;
    assert_int_equal(zpl_setattr(g, &tr, NULL), 0);
    put(fs, "g", 6000, 1000, 7);
    zpl_node_rele(f);
    zpl_node_rele(g);
}

/* sync=always: every change is durable when it returns, no commit needed. */
static void sc_always(zpl_fs_t *fs, report_t *r)
{
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_create(root, "a1", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    put(fs, "a1", 0, 3000, 8);
    assert_int_equal(zpl_mkdir(root, "a2", 0755, &zfix_cred, NULL, NULL), 0);
    zpl_node_rele(root);
    note(r, fs, "a1");
    note(r, fs, "a2");
}

/* sync=disabled: nothing is logged and commits return at once: a crash loses the change. */
static void sc_disabled(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_create(root, "d1", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    put(fs, "d1", 0, 3000, 9);
    assert_int_equal(zpl_commit(fs), 0);
    zpl_node_rele(root);
}

/* NFS UNSTABLE writes, then COMMIT: 1 MiB in 128 KiB writes (whole records)
 * and a small one. */
static void sc_unstable_base(zpl_fs_t *fs, report_t *r)
{
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_create(root, "u", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    zpl_node_rele(root);
    note(r, fs, "u");
}

static void sc_unstable(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    for (uint64_t off = 0; off < 1024 * 1024; off += 128 * 1024) put(fs, "u", off, 128 * 1024, 11);
    put(fs, "u", 2 * 1024 * 1024, 1000, 12);
}

/* Committed, then records 1 and 3 rewritten whole and 64 KiB of record 5
 * (stamped, not copied: large enough) in the same txg, committed again. */
static void sc_unstable_rewrite(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    for (uint64_t off = 0; off < 1024 * 1024; off += 128 * 1024) put(fs, "u", off, 128 * 1024, 11);
    assert_int_equal(zpl_commit(fs), 0);
    put(fs, "u", 1 * 128 * 1024, 128 * 1024, 13);
    put(fs, "u", 3 * 128 * 1024, 128 * 1024, 14);
    put(fs, "u", 5 * 128 * 1024 + 32 * 1024, 64 * 1024, 15);
}

/* A small write (copied into the log) changes record 3 after the large ones:
 * that record no longer holds what its write made of it, so the commit does
 * not write it as a block but waits for the txg (which writes everything). */
static void sc_unstable_changed(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    for (uint64_t off = 0; off < 1024 * 1024; off += 128 * 1024) put(fs, "u", off, 128 * 1024, 11);
    put(fs, "u", 3 * 128 * 1024 + 5000, 1000, 12);
}

/* Bytes written to the pool's leaves so far. */
static uint64_t leaf_write_bytes(const vdev_t *v)
{
    if (!v->nchildren) return atomic_load(&v->stats.write_bytes);
    uint64_t sum = 0;
    for (uint32_t c = 0; c < v->nchildren; c++) sum += leaf_write_bytes(v->children[c]);
    return sum;
}

/* Committed, record 2 rewritten, then the txg syncs: it adopts the seven
 * blocks the commit wrote and writes record 2 alone (plus metadata). */
static void sc_unstable_synced(zpl_fs_t *fs, report_t *r)
{
    spa_t *spa = dmu_objset_spa(fs->os);
    uint64_t synced = spa_last_synced_txg(spa);
    for (uint64_t off = 0; off < 1024 * 1024; off += 128 * 1024) put(fs, "u", off, 128 * 1024, 11);
    assert_int_equal(zpl_commit(fs), 0);
    r->synced_delta = spa_last_synced_txg(spa) - synced;
    put(fs, "u", 2 * 128 * 1024, 128 * 1024, 13);
    uint64_t before = leaf_write_bytes(spa_root_vdev(spa));
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    r->sync_bytes = leaf_write_bytes(spa_root_vdev(spa)) - before;
}

/* Files removed while open (as NFSv4 holds them), then the crash: "a" went
 * in a synced txg (the unlinked set on disk names it), "b" in a logged remove. */
static void sc_unlinked_base(zpl_fs_t *fs, report_t *r)
{
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_create(root, "a", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    assert_int_equal(zpl_create(root, "b", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), 0);
    put(fs, "a", 0, 300000, 21);
    put(fs, "b", 0, 300000, 22);
    note(r, fs, "a");
    note(r, fs, "b");
    zpl_node_t *a = must(fs, "a"), *b = must(fs, "b");
    assert_int_equal(zpl_open_hold(a), 0);
    assert_int_equal(zpl_open_hold(b), 0);
    /* The opens die with the process: these references are never dropped. */
    assert_int_equal(zpl_remove(root, "a", NULL), 0);
    zpl_node_rele(root);
}

static void sc_unlinked(zpl_fs_t *fs, report_t *r)
{
    (void)r;
    zpl_node_t *root = must(fs, "");
    assert_int_equal(zpl_remove(root, "b", NULL), 0);
    zpl_node_rele(root);
}

typedef struct scenario {
    const char *name;
    const char *sync;                            /* the dataset's sync property */
    void (*base)(zpl_fs_t *fs, report_t *r);     /* synced before the logged part */
    void (*logged)(zpl_fs_t *fs, report_t *r);
    bool commit;                                 /* zpl_commit after the logged part */
} scenario_t;

static void sc_none(zpl_fs_t *fs, report_t *r) { (void)fs, (void)r; }

static const scenario_t scenarios[] = {
    {"create", "standard", sc_create_base, sc_create, true},
    {"ns", "standard", sc_ns_base, sc_ns, true},
    {"attr", "standard", sc_attr_base, sc_attr, true},
    {"always", "always", sc_none, sc_always, false},
    {"disabled", "disabled", sc_none, sc_disabled, false},
    {"unstable", "standard", sc_unstable_base, sc_unstable, true},
    {"unstable_rewrite", "standard", sc_unstable_base, sc_unstable_rewrite, true},
    {"unstable_synced", "standard", sc_unstable_base, sc_unstable_synced, false},
    {"unstable_changed", "standard", sc_unstable_base, sc_unstable_changed, true},
    {"unlinked", "standard", sc_unlinked_base, sc_unlinked, true},
};

/* The child: runs one scenario, reports on fd and "crashes". */
static int child_main(const char *name, int fd)
{
    const scenario_t *sc = NULL;
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(scenarios); i++)
        if (!strcmp(scenarios[i].name, name)) sc = &scenarios[i];
    if (!sc) return 2;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    zfix_make(&f, "zplzil", 256 * CAIRN_MIB);
    char err[256];
    assert_int_equal(spa_prop_set(f.spa, "txg_timeout", "300", err, sizeof err), 0);
    snprintf(r->dir, sizeof r->dir, "%s", f.dir);
    snprintf(r->path, sizeof r->path, "%s", f.path);
    snprintf(r->pool, sizeof r->pool, "%s", f.pool);
    snprintf(r->fsname, sizeof r->fsname, "%s", f.fsname);
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "sync", sc->sync, err, sizeof err), 0);
    /* Bytes on the leaves are the data's own (the patterns compress well). */
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "compression", "off", err, sizeof err), 0);
    sc->base(f.fs, r);
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    zil_stats_t before, after;
    zil_get_stats(f.fs->zil, &before);
    uint64_t synced = spa_last_synced_txg(f.spa);
    sc->logged(f.fs, r);
    if (sc->commit) assert_int_equal(zpl_commit(f.fs), 0);
    if (sc->commit) r->synced_delta = spa_last_synced_txg(f.spa) - synced;
    zil_get_stats(f.fs->zil, &after);
    r->later_blocks = after.later_blocks - before.later_blocks;
    r->later_waits = after.later_waits - before.later_waits;
    r->txg_waits = after.txg_waits - before.txg_waits;
    r->records = after.records - before.records;
    note_attrs(r, f.fs);
    if (write(fd, r, sizeof *r) != (ssize_t)sizeof *r) return 3;
    _exit(0);   /* no unmount, no export: everything not synced is in the log only */
}

/* ---------------- the parent ---------------- */

/* Runs scenario name in a child that crashes; imports the pool and mounts it (replaying:
 * expect_replay says whether the log must have brought something back). */
static void crash_run_ex(const char *name, report_t *r, zfix_t *f, bool expect_replay,
                         bool by_txg)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        char fdarg[16];
        snprintf(fdarg, sizeof fdarg, "%d", p[1]);
        execl(self_exe, self_exe, "--crash-child", name, fdarg, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    ssize_t got = read(p[0], r, sizeof *r);
    close(p[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(got, (ssize_t)sizeof *r);
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", r->dir);
    snprintf(f->path, sizeof f->path, "%s", r->path);
    snprintf(f->pool, sizeof f->pool, "%s", r->pool);
    snprintf(f->fsname, sizeof f->fsname, "%s", r->fsname);
    const char *paths[] = {f->path};
    char err[256] = "";
    assert_int_equal(spa_import(f->pool, paths, 1, SPA_IMPORT_FORCE, &f->spa, err, sizeof err), 0);
    zfix_open_dsl(f);
    assert_int_equal(zpl_mount(f->dp, f->fsname, &f->fs), 0);
    zil_stats_t st2;
    zil_get_stats(f->fs->zil, &st2);
    /* The logged part came back through the log, not through a txg. */
    if (expect_replay) assert_true(st2.replayed > 0);
    else assert_int_equal(st2.replayed, 0);
    if (by_txg) assert_true(r->txg_waits > 0);
    else assert_int_equal(r->txg_waits, 0);
}

static void crash_run(const char *name, report_t *r, zfix_t *f, bool expect_replay)
{
    crash_run_ex(name, r, f, expect_replay, false);
}

static void finish(zfix_t *f)
{
    zfix_export_check(f);
    zfix_destroy(f);
}

/* Every handle of the report resolves to its node with the same attributes, or is stale. */
static void check_nodes(zfix_t *f, const report_t *r)
{
    for (int i = 0; i < r->nnodes; i++) {
        zpl_node_t *n;
        int e = zpl_fh_to_inode(f->fs, r->fh[i].bytes, ZPL_FH_SIZE, &n);
        if (r->stale[i]) {
            if (e != -ESTALE) fprintf(stderr, "%s: not stale after replay\n", r->names[i]);
            assert_int_equal(e, -ESTALE);
            continue;
        }
        if (e) fprintf(stderr, "%s: handle does not resolve after replay: %d\n", r->names[i], e);
        assert_int_equal(e, 0);
        zpl_attr_t a;
        assert_int_equal(zpl_getattr(n, &a), 0);
        zpl_node_rele(n);
        const zpl_attr_t *w = &r->attr[i];
        if (a.mode != w->mode || a.nlink != w->nlink || a.size != w->size || a.change != w->change)
            fprintf(stderr, "%s: mode %o/%o nlink %llu/%llu size %llu/%llu change %llu/%llu\n",
                    r->names[i], a.mode, w->mode, (unsigned long long)a.nlink,
                    (unsigned long long)w->nlink, (unsigned long long)a.size,
                    (unsigned long long)w->size, (unsigned long long)a.change,
                    (unsigned long long)w->change);
        assert_int_equal(a.ino, w->ino);
        assert_int_equal(a.generation, w->generation);
        assert_int_equal(a.mode, w->mode);
        assert_int_equal(a.uid, w->uid);
        assert_int_equal(a.gid, w->gid);
        assert_int_equal(a.nlink, w->nlink);
        assert_int_equal(a.size, w->size);
        assert_int_equal(a.rdev, w->rdev);
        assert_int_equal(a.parent, w->parent);
        assert_int_equal(a.change, w->change);
        assert_true(a.atime_ns == w->atime_ns && a.mtime_ns == w->mtime_ns &&
                    a.ctime_ns == w->ctime_ns && a.crtime_ns == w->crtime_ns);
    }
}

static void check_bytes(zfix_t *f, const char *path, uint64_t off, uint64_t len, int64_t tag)
{
    zpl_node_t *n = must(f->fs, path);
    uint8_t *b = malloc(len);
    size_t got = 0;
    assert_int_equal(zpl_read(n, off, len, b, &got, NULL), 0);
    assert_int_equal(got, len);
    for (uint64_t i = 0; i < len; i++) {
        uint8_t want = tag < 0 ? 0 : pat((uint64_t)tag, off + i);
        if (b[i] != want) fprintf(stderr, "%s: byte %llu is %u, not %u\n", path,
                                  (unsigned long long)(off + i), b[i], want);
        assert_int_equal(b[i], want);
    }
    free(b);
    zpl_node_rele(n);
}

static bool exists(zfix_t *f, const char *path)
{
    zpl_node_t *n = walk(f->fs, path);
    zpl_node_rele(n);
    return n != NULL;
}

static uint64_t ino_of(zfix_t *f, const char *path)
{
    zpl_node_t *n = must(f->fs, path);
    uint64_t ino = zpl_node_ino(n);
    zpl_node_rele(n);
    return ino;
}

static int count_entries_cb(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t c)
{
    (void)name, (void)ino, (void)type, (void)c;
    ++*(int *)arg;
    return 0;
}

static int count_entries(zfix_t *f, const char *path)
{
    zpl_node_t *n = must(f->fs, path);
    int cnt = 0;
    assert_int_equal(zpl_readdir(n, 0, count_entries_cb, &cnt, NULL), 0);
    zpl_node_rele(n);
    return cnt - 2;
}

static void test_replay_creates(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("create", r, &f, true);
    check_nodes(&f, r);
    check_bytes(&f, "f", 0, 5000, 1);
    zpl_node_t *root = must(f.fs, ""), *L = must(f.fs, "d/L");
    char tgt[1001], got[1100];
    long_target(tgt, 1000);
    size_t len = 0;
    assert_int_equal(zpl_readlink(L, got, sizeof got, &len), 0);
    assert_int_equal(len, 1000);
    assert_memory_equal(got, tgt, 1000);
    zpl_node_t *s = must(f.fs, "s");
    assert_int_equal(zpl_readlink(s, got, sizeof got, &len), 0);
    assert_string_equal(got, "short/target");
    /* A retransmitted EXCLUSIVE create finds its own file; another verifier does not. */
    zpl_node_t *x;
    static const uint8_t other[ZPL_VERF_SIZE] = {9};
    assert_int_equal(zpl_create(root, "x", 0600, &zfix_cred, ZPL_CREATE_EXCLUSIVE, verf_a, &x, NULL), 0);
    assert_int_equal(zpl_node_ino(x), ino_of(&f, "x"));
    zpl_node_rele(x);
    assert_int_equal(zpl_create(root, "x", 0600, &zfix_cred, ZPL_CREATE_EXCLUSIVE, other, NULL, NULL),
                     -EEXIST);
    assert_int_equal(count_entries(&f, "d"), 3);
    /* New objects after replay do not collide with replayed ones. */
    zpl_node_t *y;
    assert_int_equal(zpl_create(root, "y", 0600, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &y, NULL), 0);
    zpl_attr_t ya;
    assert_int_equal(zpl_getattr(y, &ya), 0);
    for (int i = 0; i < r->nnodes; i++) {
        assert_true(ya.ino != r->attr[i].ino);
        /* Replayed generations keep their txgs: new ones come from later txgs. */
        assert_true(ya.generation >> 20 > r->attr[i].generation >> 20);
    }
    zpl_node_rele(y);
    zpl_node_rele(s);
    zpl_node_rele(L);
    zpl_node_rele(root);
    finish(&f);
    free(r);
}

static void test_replay_namespace(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("ns", r, &f, true);
    check_nodes(&f, r);
    const char *gone[] = {"a/f1", "a/f2", "a/f3", "a/sub", "a/gone", "b/h2", "b/emptydir"};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(gone); i++) {
        if (exists(&f, gone[i])) fprintf(stderr, "%s is back\n", gone[i]);
        assert_false(exists(&f, gone[i]));
    }
    /* names: the report's nodes are a, b, a/f1, a/f2, a/f3, a/h1, a/gone, b/t1, a/sub, b/emptydir */
    assert_int_equal(ino_of(&f, "a/f1r"), r->attr[2].ino);
    assert_int_equal(ino_of(&f, "b/f2x"), r->attr[3].ino);
    assert_int_equal(ino_of(&f, "b/t1"), r->attr[4].ino);
    assert_int_equal(ino_of(&f, "b/h3"), r->attr[5].ino);
    assert_int_equal(ino_of(&f, "b/sub"), r->attr[8].ino);
    assert_true(r->stale[6] && r->stale[7] && r->stale[9]);
    check_bytes(&f, "b/f2x", 0, 20000, 2);
    assert_int_equal(count_entries(&f, "a"), 2);   /* f1r h1 */
    assert_int_equal(count_entries(&f, "b"), 4);   /* f2x t1 sub h3 */
    finish(&f);
    free(r);
}

static void test_replay_setattr_truncate(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("attr", r, &f, true);
    check_nodes(&f, r);
    assert_int_equal(r->attr[0].size, 200000);
    assert_int_equal(r->attr[0].uid, 7);
    check_bytes(&f, "f", 0, 70000, 4);
    check_bytes(&f, "f", 70000, 30000, -1);
    check_bytes(&f, "f", 100000, 5000, 5);
    check_bytes(&f, "f", 105000, 95000, -1);
    assert_int_equal(r->attr[1].size, 7000);
    check_bytes(&f, "g", 0, 3000, 6);
    check_bytes(&f, "g", 3000, 3000, -1);
    check_bytes(&f, "g", 6000, 1000, 7);
    finish(&f);
    free(r);
}

static void test_sync_always_and_disabled(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("always", r, &f, true);
    check_nodes(&f, r);
    check_bytes(&f, "a1", 0, 3000, 8);
    finish(&f);
    memset(r, 0, sizeof *r);
    crash_run("disabled", r, &f, false);
    assert_false(exists(&f, "d1"));
    assert_int_equal(count_entries(&f, ""), 0);
    finish(&f);
    free(r);
}

static void test_unstable_then_commit(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    /* The commit wrote the eight records as blocks and logged pointers to
     * them: no txg wait, no txg synced, and the crash replays them. */
    crash_run("unstable", r, &f, true);
    assert_int_equal(r->later_blocks, 8);
    assert_int_equal(r->synced_delta, 0);
    /* Not 16 records of 64 KiB copies: eight pointers with their attribute
     * records, and the small write's copy and attributes. */
    assert_int_equal(r->records, 8 + 8 + 2);
    check_nodes(&f, r);
    assert_int_equal(r->attr[0].size, 2 * 1024 * 1024 + 1000);
    check_bytes(&f, "u", 0, 1024 * 1024, 11);
    check_bytes(&f, "u", 1024 * 1024, 1024 * 1024, -1);
    check_bytes(&f, "u", 2 * 1024 * 1024, 1000, 12);
    finish(&f);
    free(r);
}

/* Records rewritten after a commit in the same txg: the second commit writes
 * new blocks for them (the first ones are freed with the txg, or, after the
 * crash, claimed, replayed and freed by replay): the newest bytes come back
 * and the check finds nothing leaked. */
static void test_unstable_rewritten_after_commit(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("unstable_rewrite", r, &f, true);
    assert_int_equal(r->later_blocks, 8 + 3);
    assert_int_equal(r->synced_delta, 0);
    check_nodes(&f, r);
    assert_int_equal(r->attr[0].size, 1024 * 1024);
    const uint64_t rs = 128 * 1024;
    check_bytes(&f, "u", 0, rs, 11);
    check_bytes(&f, "u", rs, rs, 13);
    check_bytes(&f, "u", 2 * rs, rs, 11);
    check_bytes(&f, "u", 3 * rs, rs, 14);
    check_bytes(&f, "u", 4 * rs, rs, 11);
    check_bytes(&f, "u", 5 * rs, 32 * 1024, 11);
    check_bytes(&f, "u", 5 * rs + 32 * 1024, 64 * 1024, 15);
    check_bytes(&f, "u", 5 * rs + 96 * 1024, 32 * 1024, 11);
    check_bytes(&f, "u", 6 * rs, 2 * rs, 11);
    finish(&f);
    free(r);
}

/* A record changed between the write and the commit: the commit falls back to
 * the txg, and both writes' bytes are there after the crash; nothing leaked. */
static void test_unstable_changed_before_commit(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run_ex("unstable_changed", r, &f, false, true);
    assert_int_equal(r->later_blocks, 0);
    assert_true(r->later_waits > 0);
    assert_true(r->synced_delta > 0);
    check_nodes(&f, r);
    check_bytes(&f, "u", 0, 3 * 128 * 1024 + 5000, 11);
    check_bytes(&f, "u", 3 * 128 * 1024 + 5000, 1000, 12);
    check_bytes(&f, "u", 3 * 128 * 1024 + 6000, 5 * 128 * 1024 - 6000, 11);
    finish(&f);
    free(r);
}

/* The txg after such a commit adopts its blocks: its sync writes the record
 * rewritten since and metadata, not the megabyte again (on a single leaf,
 * copies=1); the commit itself let no txg sync; nothing leaked. */
static void test_unstable_commit_blocks_adopted(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("unstable_synced", r, &f, false);
    assert_int_equal(r->synced_delta, 0);
    assert_int_equal(r->later_blocks, 8);
    assert_true(r->sync_bytes >= 128 * 1024);
    if (r->sync_bytes >= 512 * 1024)
        fprintf(stderr, "the sync wrote %llu bytes\n", (unsigned long long)r->sync_bytes);
    assert_true(r->sync_bytes < 512 * 1024);
    check_nodes(&f, r);
    check_bytes(&f, "u", 0, 2 * 128 * 1024, 11);
    check_bytes(&f, "u", 2 * 128 * 1024, 128 * 1024, 13);
    check_bytes(&f, "u", 3 * 128 * 1024, 5 * 128 * 1024, 11);
    finish(&f);
    free(r);
}

/* Nothing survives a crash holding a removed file open: the next mount frees
 * what the unlinked set names and replay frees what a logged remove unlinked;
 * the pool checks clean (nothing leaked). */
static void test_unlinked_set_after_crash(void **state)
{
    (void)state;
    report_t *r = calloc(1, sizeof *r);
    zfix_t f;
    crash_run("unlinked", r, &f, true);
    for (int i = 0; i < 2; i++) {
        assert_false(r->stale[i]);           /* the child still had them, unlinked */
        assert_int_equal(r->attr[i].nlink, 0);
        dmu_object_info_t oi;
        assert_int_equal(dmu_object_info(f.fs->os, r->attr[i].ino, &oi), -ENOENT);
        zpl_node_t *n;
        assert_int_equal(zpl_fh_to_inode(f.fs, r->fh[i].bytes, ZPL_FH_SIZE, &n), -ESTALE);
    }
    uint64_t set = 0, count = 1;
    assert_int_equal(zap_lookup_u64(f.fs->os, ZPL_MASTER_OBJ, "DELETE_QUEUE", &set), 0);
    assert_int_equal(zap_count(f.fs->os, set, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(count_entries(&f, ""), 0);
    finish(&f);
    free(r);
}

int main(int argc, char **argv)
{
    self_exe = "/proc/self/exe";
    if (argc == 4 && !strcmp(argv[1], "--crash-child")) return child_main(argv[2], atoi(argv[3]));
    dsl_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_creates),
        cmocka_unit_test(test_replay_namespace),
        cmocka_unit_test(test_replay_setattr_truncate),
        cmocka_unit_test(test_sync_always_and_disabled),
        cmocka_unit_test(test_unstable_then_commit),
        cmocka_unit_test(test_unlinked_set_after_crash),
        cmocka_unit_test(test_unstable_rewritten_after_commit),
        cmocka_unit_test(test_unstable_commit_blocks_adopted),
        cmocka_unit_test(test_unstable_changed_before_commit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
