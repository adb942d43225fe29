/*
 * Details of the POSIX layer the main suite does not reach: a snapshot
 * renamed while the head is mounted (and while one of its files is in use)
 * answers to its new name only under .cairn/snapshot; ZPL_SET_CTIME restores
 * a ctime; with atime=off no read dirties anything (the object set's root
 * stays as it was across syncs; atime=on, the control, moves it); a write is
 * refused with ENOSPC - not EDQUOT - when another dataset's reservation holds
 * the pool's free space.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

static void expect_content(zpl_node_t *n, const char *s)
{
    char buf[256] = "";
    size_t got = 0;
    bool eof = false;
    assert_int_equal(zpl_read(n, 0, sizeof(buf), buf, &got, &eof), 0);
    assert_int_equal(got, strlen(s));
    assert_memory_equal(buf, s, got);
}

/* ---- snapshot rename under a mounted head ---- */

static zpl_node_t *snapdir(zpl_node_t *root)
{
    zpl_node_t *ctl = NULL, *sd = NULL;
    assert_int_equal(zpl_lookup(root, ZPL_CTLDIR_NAME, &ctl), 0);
    assert_int_equal(zpl_lookup(ctl, "snapshot", &sd), 0);
    zpl_node_rele(ctl);
    return sd;
}

typedef struct names {
    int n;
    char v[8][64];
} names_t;

static int names_cb(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)ino, (void)type, (void)cookie;
    names_t *l = arg;
    if (strcmp(name, ".") && strcmp(name, "..") && l->n < 8) cairn_strlcpy(l->v[l->n++], name, 64);
    return 0;
}

static bool listed(zpl_node_t *dir, const char *name)
{
    names_t l = {0};
    bool eof = false;
    assert_int_equal(zpl_readdir(dir, 0, names_cb, &l, &eof), 0);
    assert_true(eof);
    for (int i = 0; i < l.n; i++)
        if (!strcmp(l.v[i], name)) return true;
    return false;
}

static void test_snapshot_rename(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplsnapren", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    zfix_write_str(a, 0, "as of s1");
    char s1[200], s2[200], s3[200], err[256];
    snprintf(s1, sizeof(s1), "%s@s1", f.fsname);
    snprintf(s2, sizeof(s2), "%s@s2", f.fsname);
    snprintf(s3, sizeof(s3), "%s@s3", f.fsname);
    assert_int_equal(dsl_snapshot(f.dp, s1, false, err, sizeof(err)), 0);
    zfix_write_str(a, 0, "as of s3");
    assert_int_equal(dsl_snapshot(f.dp, s3, false, err, sizeof(err)), 0);

    /* Mount both through the head; keep a file of s1 in use. */
    zpl_node_t *sd = snapdir(root), *sroot = NULL, *sa = NULL, *x = NULL;
    assert_int_equal(zpl_lookup(sd, "s1", &sroot), 0);
    assert_int_equal(zpl_lookup(sroot, "a", &sa), 0);
    expect_content(sa, "as of s1");
    zpl_fh_t fh;
    assert_int_equal(zpl_fh_encode(sa, &fh), 0);
    zpl_node_rele(sroot);
    assert_int_equal(zpl_lookup(sd, "s3", &x), 0);
    zpl_node_rele(x);

    /* The documented way: release the idle ones first (s3 goes, s1 is busy). */
    assert_int_equal(zpl_fs_release_snapshots(f.fs), 1);
    assert_int_equal(dsl_dataset_rename(f.dp, s1, s2, err, sizeof(err)), 0);
    assert_int_equal(zpl_lookup(sd, "s1", &x), -ENOENT);
    assert_false(listed(sd, "s1"));
    assert_true(listed(sd, "s2"));
    assert_int_equal(zpl_lookup(sd, "s2", &sroot), 0);
    assert_int_equal(zpl_lookup(sroot, "a", &x), 0);
    expect_content(x, "as of s1");
    assert_ptr_equal(x, sa);                 /* one snapshot, one node table */
    zpl_node_rele(x);
    zpl_statfs_t st;
    assert_int_equal(zpl_statfs(zpl_node_fs(sroot), &st), 0);
    zpl_node_rele(sroot);
    /* A handle from before the rename still resolves. */
    assert_int_equal(zpl_fh_to_inode(f.fs, fh.bytes, sizeof(fh.bytes), &x), 0);
    expect_content(x, "as of s1");
    zpl_node_rele(x);
    /* The old name may be taken again, by a new snapshot with other data. */
    zfix_write_str(a, 0, "new s1!!");
    assert_int_equal(dsl_snapshot(f.dp, s1, false, err, sizeof(err)), 0);
    assert_int_equal(zpl_lookup(sd, "s1", &sroot), 0);
    assert_int_equal(zpl_lookup(sroot, "a", &x), 0);
    expect_content(x, "new s1!!");
    zpl_node_rele(x);
    zpl_node_rele(sroot);
    /* And s3 renamed while not mounted, then looked up by its new name. */
    char s4[200];
    snprintf(s4, sizeof(s4), "%s@s4", f.fsname);
    assert_int_equal(dsl_dataset_rename(f.dp, s3, s4, err, sizeof(err)), 0);
    assert_int_equal(zpl_lookup(sd, "s3", &x), -ENOENT);
    assert_int_equal(zpl_lookup(sd, "s4", &sroot), 0);
    assert_int_equal(zpl_lookup(sroot, "a", &x), 0);
    expect_content(x, "as of s3");
    zpl_node_rele(x);
    zpl_node_rele(sroot);

    zpl_node_rele(sa);
    zpl_node_rele(sd);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* ---- ZPL_SET_CTIME ---- */

static void test_set_ctime(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplctime", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    zpl_attr_t before = zfix_attr(a);
    /* Restored along with another attribute... */
    zpl_setattr_t sa = {.mask = ZPL_SET_CTIME | ZPL_SET_MODE, .mode = 0600, .ctime_ns = 123456789};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    zpl_attr_t at = zfix_attr(a);
    assert_int_equal(at.ctime_ns, 123456789);
    assert_int_equal(at.mode, S_IFREG | 0600);
    assert_true(at.change > before.change);      /* still a change */
    /* ...and without one bit of the mask it is "now" again... */
    sa = (zpl_setattr_t){.mask = ZPL_SET_MODE, .mode = 0644};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    assert_true(zfix_attr(a).ctime_ns >= before.ctime_ns);
    /* ...alone, and as the guard's reference. */
    sa = (zpl_setattr_t){.mask = ZPL_SET_CTIME, .ctime_ns = 42};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    assert_int_equal(zfix_attr(a).ctime_ns, 42);
    zpl_setattr_t g = {.mask = ZPL_SET_GUARD_CTIME | ZPL_SET_CTIME, .guard_ctime_ns = 41, .ctime_ns = 7};
    assert_int_equal(zpl_setattr(a, &g, NULL), -EAGAIN);
    assert_int_equal(zfix_attr(a).ctime_ns, 42);
    g.guard_ctime_ns = 42;
    assert_int_equal(zpl_setattr(a, &g, NULL), 0);
    assert_int_equal(zfix_attr(a).ctime_ns, 7);
    /* It is on disk. */
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "a", &a), 0);
    assert_int_equal(zfix_attr(a).ctime_ns, 7);
    assert_int_equal(zfix_attr(a).mode, S_IFREG | 0644);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* ---- atime=off: reads dirty nothing ---- */

static int count_cb(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)name, (void)ino, (void)type, (void)cookie;
    (*(int *)arg)++;
    return 0;
}

/* Every kind of read, several times over. */
static void read_everything(zpl_node_t *root, zpl_node_t *a)
{
    for (int i = 0; i < 4; i++) {
        char buf[64];
        size_t got = 0;
        assert_int_equal(zpl_read(a, 0, sizeof(buf), buf, &got, NULL), 0);
        assert_int_equal(got, 4);
        assert_int_equal(zpl_read_memory(a, 0, sizeof(buf), buf, &got, NULL), 0);
        zpl_node_t *x = NULL;
        assert_int_equal(zpl_lookup(root, "a", &x), 0);
        zpl_node_rele(x);
        (void)zfix_attr(a);
        int n = 0;
        assert_int_equal(zpl_readdir(root, 0, count_cb, &n, NULL), 0);
        assert_true(n >= 3);
    }
}

static void os_root(zfix_t *f, cairn_blkptr_t *bp)
{
    for (int i = 0; i < 2; i++) assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
    dmu_objset_root(dsl_dataset_objset(zpl_fs_dataset(f->fs)), bp);
}

static void test_atime_off_dirties_nothing(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplatime", 256ull << 20);
    zfix_set_prop(&f, f.fsname, "atime", "off");
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    zfix_write_str(a, 0, "data");
    /* An atime older than mtime: due for any relatime update. */
    zpl_setattr_t sa = {.mask = ZPL_SET_ATIME, .atime_ns = 1000};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    cairn_blkptr_t r0, r1;
    os_root(&f, &r0);
    read_everything(root, a);
    os_root(&f, &r1);
    /* Nothing of the object set was written in those txgs: no dnode, no
     * attribute block, no indirect block was dirtied by the reads. */
    assert_memory_equal(&r0, &r1, sizeof(r0));
    assert_int_equal(zfix_attr(a).atime_ns, 1000);

    /* The control: the same reads with atime=on do write (the property change
     * itself touches only the pool's MOS). */
    zfix_set_prop(&f, f.fsname, "atime", "on");
    os_root(&f, &r1);
    assert_memory_equal(&r0, &r1, sizeof(r0));
    read_everything(root, a);
    os_root(&f, &r1);
    assert_true(r1.birth_txg > r0.birth_txg);
    assert_true(zfix_attr(a).atime_ns > 1000);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* ---- ENOSPC from another dataset's reservation ---- */

static uint64_t ds_num(zfix_t *f, const char *ds, const char *prop)
{
    dsl_prop_t p;
    char err[256];
    int e = dsl_prop_get(f->dp, ds, prop, &p, err, sizeof(err));
    if (e) fail_msg("get %s of %s: %s", prop, ds, err);
    return p.numeric;
}

static void test_enospc_from_other_reservation(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplresv", 512ull << 20);
    zfix_set_prop(&f, f.fsname, "compression", "off");
    char other[160], err[256], val[32];
    snprintf(other, sizeof(other), "%s/other", f.pool);
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM};
    assert_int_equal(dsl_dataset_create(f.dp, other, &co, err, sizeof(err)), 0);
    zfix_set_prop(&f, other, "compression", "off");
    const uint64_t mib = 1024 * 1024;
    uint64_t avail = ds_num(&f, f.fsname, "available");
    assert_true(avail > 64 * mib);
    /* other reserves all but 8 MiB of what fs could have. */
    snprintf(val, sizeof(val), "%llu", (unsigned long long)((avail - 8 * mib) & ~(mib - 1)));
    zfix_set_prop(&f, other, "reservation", val);
    assert_true(ds_num(&f, f.fsname, "available") <= 9 * mib);
    assert_true(ds_num(&f, other, "available") >= avail - 9 * mib);

    size_t big = 32 * mib;
    char *buf = malloc(big);
    for (size_t i = 0; i < big; i++) buf[i] = (char)(i * 2654435761u >> 7) | 1;
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    assert_int_equal(zpl_write(a, 0, mib, buf, 0, NULL), 0);  /* within what is left */
    zpl_attr_t before = zfix_attr(a);
    /* Not a quota of fs: the pool is full for it (ENOSPC, not EDQUOT), and the
     * refused write changed nothing. */
    assert_int_equal(zpl_write(a, mib, big, buf, 0, NULL), -ENOSPC);
    assert_int_equal(zfix_attr(a).size, before.size);
    assert_int_equal(zfix_attr(a).change, before.change);
    zpl_node_t *b = NULL;
    assert_int_equal(zpl_create(root, "b", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &b, NULL), 0);
    assert_int_equal(zpl_write(b, 0, big, buf, 0, NULL), -ENOSPC);
    zpl_node_rele(b);

    /* The reserving dataset itself writes into its reservation. */
    zpl_fs_t *ofs = NULL;
    assert_int_equal(zpl_mount(f.dp, other, &ofs), 0);
    zpl_node_t *oroot = NULL, *o = NULL;
    assert_int_equal(zpl_root(ofs, &oroot), 0);
    assert_int_equal(zpl_create(oroot, "o", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &o, NULL), 0);
    assert_int_equal(zpl_write(o, 0, big, buf, 0, NULL), 0);
    zpl_node_rele(o);
    zpl_node_rele(oroot);
    assert_int_equal(zpl_unmount(ofs), 0);

    /* Without the reservation, fs writes again. */
    zfix_set_prop(&f, other, "reservation", "none");
    assert_int_equal(zpl_write(a, mib, big, buf, 0, NULL), 0);
    assert_int_equal(zfix_attr(a).size, mib + big);
    free(buf);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_rename),
        cmocka_unit_test(test_set_ctime),
        cmocka_unit_test(test_atime_off_dirties_nothing),
        cmocka_unit_test(test_enospc_from_other_reservation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
