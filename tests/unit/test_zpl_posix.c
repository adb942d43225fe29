/*
 * POSIX semantics of the ZPL against its library API, error codes included:
 * every operation, rename edge cases, hard links, truncate/extend with holes,
 * offsets past 4 GiB, readdir cookies under concurrent change, file handles
 * across export/import and after remove + reuse, .cairn/snapshot, EROFS,
 * atime, quotas, the space invariant (write, snapshot, delete, destroy the
 * snapshot: space comes back), and a concurrency smoke test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

#include <dirent.h>
#include <pthread.h>

static void expect_content(zpl_node_t *n, uint64_t off, const char *s)
{
    size_t len = strlen(s);
    char *buf = calloc(1, len + 16);
    size_t got = 0;
    bool eof = false;
    assert_int_equal(zpl_read(n, off, len, buf, &got, &eof), 0);
    assert_int_equal(got, len);
    assert_memory_equal(buf, s, len);
    free(buf);
}

static int lookup_err(zpl_node_t *dir, const char *name)
{
    zpl_node_t *n = NULL;
    int e = zpl_lookup(dir, name, &n);
    if (!e) zpl_node_rele(n);
    return e;
}

/* ---------------------------------------------------------------- */

static void test_create_lookup_getattr(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplcreate", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_attr_t ra = zfix_attr(root);
    assert_true(S_ISDIR(ra.mode));
    assert_int_equal(ra.nlink, 2);
    assert_int_equal(ra.size, 2);

    zpl_wcc_t wcc;
    zpl_node_t *a = NULL;
    assert_int_equal(zpl_create(root, "a", 0640, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &a, &wcc), 0);
    assert_int_equal(wcc.pre_size, 2);
    assert_int_equal(wcc.post.size, 3);
    assert_true(wcc.post.change > wcc.pre_change);
    zpl_attr_t aa = zfix_attr(a);
    assert_int_equal(aa.mode, S_IFREG | 0640);
    assert_int_equal(aa.uid, 1000);
    assert_int_equal(aa.gid, 100);
    assert_int_equal(aa.nlink, 1);
    assert_int_equal(aa.size, 0);
    assert_int_equal(aa.parent, zpl_node_ino(root));
    assert_int_equal(aa.fsid, zpl_fs_guid(f.fs));
    assert_true(aa.crtime_ns > 0 && aa.mtime_ns == aa.crtime_ns);

    zpl_node_t *l = NULL;
    assert_int_equal(zpl_lookup(root, "a", &l), 0);
    assert_ptr_equal(l, a);
    zpl_node_rele(l);
    assert_int_equal(lookup_err(root, "nope"), -ENOENT);
    assert_int_equal(lookup_err(a, "x"), -ENOTDIR);

    /* GUARDED / UNCHECKED / EXCLUSIVE */
    assert_int_equal(zpl_create(root, "a", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, NULL, NULL), -EEXIST);
    zpl_node_t *u = NULL;
    assert_int_equal(zpl_create(root, "a", 0644, &zfix_cred, ZPL_CREATE_UNCHECKED, NULL, &u, NULL), 0);
    assert_ptr_equal(u, a);
    zpl_node_rele(u);
    const uint8_t v1[8] = {1, 2, 3, 4, 5, 6, 7, 8}, v2[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    zpl_node_t *x1 = NULL, *x2 = NULL;
    assert_int_equal(zpl_create(root, "x", 0644, &zfix_cred, ZPL_CREATE_EXCLUSIVE, v1, &x1, NULL), 0);
    assert_int_equal(zpl_create(root, "x", 0644, &zfix_cred, ZPL_CREATE_EXCLUSIVE, v1, &x2, NULL), 0);
    assert_ptr_equal(x1, x2);   /* a retransmission finds its own file */
    zpl_node_rele(x2);
    assert_int_equal(zpl_create(root, "x", 0644, &zfix_cred, ZPL_CREATE_EXCLUSIVE, v2, NULL, NULL), -EEXIST);
    assert_int_equal(zpl_create(root, "a", 0644, &zfix_cred, ZPL_CREATE_EXCLUSIVE, v1, NULL, NULL), -EEXIST);
    zpl_setattr_t sa = {.mask = ZPL_SET_MODE, .mode = 0600};
    assert_int_equal(zpl_setattr(x1, &sa, NULL), 0);
    /* After the client's setattr the verifier no longer matches anything. */
    assert_int_equal(zpl_create(root, "x", 0644, &zfix_cred, ZPL_CREATE_EXCLUSIVE, v1, NULL, NULL), -EEXIST);
    zpl_node_rele(x1);

    /* names */
    char longname[300];
    memset(longname, 'n', sizeof(longname));
    longname[256] = '\0';
    assert_int_equal(zpl_create(root, longname, 0644, &zfix_cred, 0, NULL, NULL, NULL), -ENAMETOOLONG);
    assert_int_equal(lookup_err(root, longname), -ENAMETOOLONG);
    longname[255] = '\0';
    assert_int_equal(zpl_create(root, longname, 0644, &zfix_cred, 0, NULL, NULL, NULL), 0);
    assert_int_equal(lookup_err(root, longname), 0);
    assert_int_equal(zpl_create(root, "a/b", 0644, &zfix_cred, 0, NULL, NULL, NULL), -EINVAL);
    assert_int_equal(zpl_create(root, ".", 0644, &zfix_cred, 0, NULL, NULL, NULL), -EINVAL);
    assert_int_equal(zpl_create(a, "in_a_file", 0644, &zfix_cred, 0, NULL, NULL, NULL), -ENOTDIR);
    assert_int_equal(zpl_create(root, ZPL_CTLDIR_NAME, 0644, &zfix_cred, 0, NULL, NULL, NULL), -EEXIST);

    zpl_node_t *dot = NULL, *dotdot = NULL;
    assert_int_equal(zpl_lookup(root, ".", &dot), 0);
    assert_int_equal(zpl_lookup(root, "..", &dotdot), 0);
    assert_ptr_equal(dot, root);
    assert_ptr_equal(dotdot, root);
    zpl_node_rele(dot);
    zpl_node_rele(dotdot);

    /* persistence */
    uint64_t ino_a = zpl_node_ino(a);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "a", &a), 0);
    assert_int_equal(zpl_node_ino(a), ino_a);
    aa = zfix_attr(a);
    assert_int_equal(aa.mode, S_IFREG | 0640);
    assert_int_equal(zfix_attr(root).size, 2 + 3);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

static void test_dirs(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zpldirs", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *d = zfix_mkdir(root, "d");
    assert_int_equal(zfix_attr(root).nlink, 3);
    assert_int_equal(zpl_mkdir(root, "d", 0755, &zfix_cred, NULL, NULL), -EEXIST);
    zpl_node_t *sub = zfix_mkdir(d, "sub");
    zpl_node_t *up = NULL;
    assert_int_equal(zpl_lookup(sub, "..", &up), 0);
    assert_ptr_equal(up, d);
    zpl_node_rele(up);
    assert_int_equal(zfix_attr(d).nlink, 3);
    zpl_node_rele(zfix_mkfile(d, "f"));
    assert_int_equal(zfix_attr(d).size, 4);

    assert_int_equal(zpl_rmdir(root, "d", NULL), -ENOTEMPTY);
    assert_int_equal(zpl_rmdir(d, "f", NULL), -ENOTDIR);
    assert_int_equal(zpl_remove(d, "sub", NULL), -EISDIR);
    assert_int_equal(zpl_rmdir(d, "nope", NULL), -ENOENT);
    assert_int_equal(zpl_remove(d, "nope", NULL), -ENOENT);
    assert_int_equal(zpl_rmdir(d, ".", NULL), -EINVAL);
    assert_int_equal(zpl_rmdir(d, "..", NULL), -ENOTEMPTY);
    assert_int_equal(zpl_remove(d, "f", NULL), 0);
    assert_int_equal(zpl_rmdir(d, "sub", NULL), 0);
    assert_int_equal(zpl_getattr(sub, &(zpl_attr_t){0}), -ESTALE);
    assert_int_equal(zfix_attr(d).nlink, 2);
    assert_int_equal(zfix_attr(d).size, 2);
    assert_int_equal(zpl_rmdir(root, "d", NULL), 0);
    assert_int_equal(zfix_attr(root).nlink, 2);
    assert_int_equal(zpl_create(d, "ghost", 0644, &zfix_cred, 0, NULL, NULL, NULL), -ESTALE);
    zpl_node_rele(sub);
    zpl_node_rele(d);

    /* symlinks, short (inline) and long (in data) */
    zpl_node_t *s = NULL;
    assert_int_equal(zpl_symlink(root, "s", "target/path", &zfix_cred, &s, NULL), 0);
    char buf[5000];
    size_t len;
    assert_int_equal(zpl_readlink(s, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 11);
    assert_string_equal(buf, "target/path");
    assert_true(S_ISLNK(zfix_attr(s).mode));
    assert_int_equal(zfix_attr(s).size, 11);
    char longt[1500];
    for (size_t i = 0; i < sizeof(longt) - 1; i++) longt[i] = (char)('a' + i % 26);
    longt[sizeof(longt) - 1] = '\0';
    zpl_node_t *s2 = NULL;
    assert_int_equal(zpl_symlink(root, "s2", longt, &zfix_cred, &s2, NULL), 0);
    assert_int_equal(zpl_symlink(root, "s3", "", &zfix_cred, NULL, NULL), -EINVAL);
    zpl_node_t *file = zfix_mkfile(root, "file");
    assert_int_equal(zpl_readlink(file, buf, sizeof(buf), &len), -EINVAL);
    size_t nr;
    assert_int_equal(zpl_read(root, 0, 10, buf, &nr, NULL), -EISDIR);
    assert_int_equal(zpl_write(root, 0, 1, "x", 0, NULL), -EISDIR);
    assert_int_equal(zpl_write(s, 0, 1, "x", 0, NULL), -EINVAL);
    zpl_node_rele(s);
    zpl_node_rele(s2);

    /* special files */
    zpl_node_t *fifo = NULL, *chr = NULL;
    assert_int_equal(zpl_mknod(root, "fifo", S_IFIFO | 0600, 0, &zfix_cred, &fifo, NULL), 0);
    assert_int_equal(zpl_mknod(root, "chr", S_IFCHR | 0600, 0x0501, &zfix_cred, &chr, NULL), 0);
    assert_int_equal(zpl_mknod(root, "bad", S_IFREG | 0600, 0, &zfix_cred, NULL, NULL), -EINVAL);
    assert_true(S_ISFIFO(zfix_attr(fifo).mode));
    assert_int_equal(zfix_attr(chr).rdev, 0x0501);
    zpl_node_rele(fifo);
    zpl_node_rele(chr);
    zpl_node_rele(file);
    zpl_node_rele(root);

    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "s2", &s2), 0);
    assert_int_equal(zpl_readlink(s2, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, strlen(longt));
    assert_string_equal(buf, longt);
    zpl_node_rele(s2);
    assert_int_equal(zpl_lookup(root, "chr", &chr), 0);
    assert_true(S_ISCHR(zfix_attr(chr).mode));
    assert_int_equal(zfix_attr(chr).rdev, 0x0501);
    zpl_node_rele(chr);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

static void test_links(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zpllinks", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *d = zfix_mkdir(root, "d");
    zpl_node_t *a = zfix_mkfile(root, "a");
    zfix_write_str(a, 0, "shared data");
    assert_int_equal(zpl_link(a, d, "b", NULL), 0);
    assert_int_equal(zfix_attr(a).nlink, 2);
    assert_int_equal(zpl_link(a, d, "b", NULL), -EEXIST);
    assert_int_equal(zpl_link(d, root, "dlink", NULL), -EPERM);
    zpl_node_t *b = NULL;
    assert_int_equal(zpl_lookup(d, "b", &b), 0);
    assert_ptr_equal(a, b);
    assert_int_equal(zpl_remove(root, "a", NULL), 0);
    assert_int_equal(zfix_attr(b).nlink, 1);
    expect_content(b, 0, "shared data");
    zpl_fs_set_link_max(f.fs, 3);
    assert_int_equal(zpl_link(b, root, "c1", NULL), 0);
    assert_int_equal(zpl_link(b, root, "c2", NULL), 0);
    assert_int_equal(zpl_link(b, root, "c3", NULL), -EMLINK);
    zpl_fs_set_link_max(f.fs, 4);
    zpl_node_t *m1 = zfix_mkdir(root, "m1");   /* root: 2 + d + m1 = 4 links, the most */
    assert_int_equal(zpl_mkdir(root, "m2", 0755, &zfix_cred, NULL, NULL), -EMLINK);
    zpl_fs_set_link_max(f.fs, ZPL_LINK_MAX_DEFAULT);
    zpl_node_rele(m1);

    /* across datasets */
    char other[160], err[256];
    snprintf(other, sizeof(other), "%s/other", f.pool);
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM};
    assert_int_equal(dsl_dataset_create(f.dp, other, &co, err, sizeof(err)), 0);
    zpl_fs_t *fs2;
    assert_int_equal(zpl_mount(f.dp, other, &fs2), 0);
    zpl_node_t *root2;
    assert_int_equal(zpl_root(fs2, &root2), 0);
    assert_int_equal(zpl_link(b, root2, "x", NULL), -EXDEV);
    assert_int_equal(zpl_rename(root, "c1", root2, "x", NULL, NULL), -EXDEV);
    zpl_node_rele(root2);
    assert_int_equal(zpl_unmount(fs2), 0);

    /* the last link frees the object */
    assert_int_equal(zpl_remove(root, "c1", NULL), 0);
    assert_int_equal(zpl_remove(root, "c2", NULL), 0);
    assert_int_equal(zfix_attr(b).nlink, 1);
    assert_int_equal(zpl_remove(d, "b", NULL), 0);
    size_t nr;
    char buf[16];
    assert_int_equal(zpl_read(b, 0, 4, buf, &nr, NULL), -ESTALE);
    assert_int_equal(zpl_write(b, 0, 4, "data", 0, NULL), -ESTALE);
    zpl_node_rele(a);
    zpl_node_rele(b);
    zpl_node_rele(d);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

static void test_rename(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplrename", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *d1 = zfix_mkdir(root, "d1"), *d2 = zfix_mkdir(root, "d2");
    zpl_node_t *a = zfix_mkfile(d1, "a");
    zfix_write_str(a, 0, "AAA");
    zpl_node_t *b = zfix_mkfile(d2, "b");
    zfix_write_str(b, 0, "BBB");

    /* simple, same dir */
    zpl_wcc_t sw, tw;
    assert_int_equal(zpl_rename(d1, "a", d1, "a2", &sw, &tw), 0);
    assert_int_equal(lookup_err(d1, "a"), -ENOENT);
    assert_int_equal(lookup_err(d1, "a2"), 0);
    assert_int_equal(sw.post.size, 3);
    /* across dirs, over an existing file: the old target is freed */
    uint64_t olda_change = zfix_attr(a).change;
    assert_int_equal(zpl_rename(d1, "a2", d2, "b", &sw, &tw), 0);
    assert_int_equal(sw.pre_size, 3);
    assert_int_equal(sw.post.size, 2);
    assert_int_equal(tw.post.size, 3);
    assert_true(zfix_attr(a).change > olda_change);
    assert_int_equal(zpl_getattr(b, &(zpl_attr_t){0}), -ESTALE);
    zpl_node_t *nb = NULL;
    assert_int_equal(zpl_lookup(d2, "b", &nb), 0);
    assert_ptr_equal(nb, a);
    expect_content(nb, 0, "AAA");
    assert_int_equal(zfix_attr(a).parent, zpl_node_ino(d2));
    zpl_node_rele(nb);

    /* a directory across dirs: link counts and ".." follow */
    zpl_node_t *sd = zfix_mkdir(d1, "sd");
    zpl_node_rele(zfix_mkfile(sd, "inside"));
    assert_int_equal(zfix_attr(d1).nlink, 3);
    assert_int_equal(zpl_rename(d1, "sd", d2, "sd", NULL, NULL), 0);
    assert_int_equal(zfix_attr(d1).nlink, 2);
    assert_int_equal(zfix_attr(d2).nlink, 3);
    zpl_node_t *up = NULL;
    assert_int_equal(zpl_lookup(sd, "..", &up), 0);
    assert_ptr_equal(up, d2);
    zpl_node_rele(up);

    /* into its own subtree */
    zpl_node_t *deep = zfix_mkdir(sd, "deep");
    assert_int_equal(zpl_rename(d2, "sd", deep, "x", NULL, NULL), -EINVAL);
    assert_int_equal(zpl_rename(d2, "sd", sd, "x", NULL, NULL), -EINVAL);
    assert_int_equal(zpl_rename(root, "d2", deep, "x", NULL, NULL), -EINVAL);
    /* "." and ".." */
    assert_int_equal(zpl_rename(d2, ".", d1, "x", NULL, NULL), -EINVAL);
    assert_int_equal(zpl_rename(d2, "sd", d1, "..", NULL, NULL), -EINVAL);
    /* missing source */
    assert_int_equal(zpl_rename(d2, "nope", d1, "x", NULL, NULL), -ENOENT);
    /* type mismatches and non-empty targets */
    zpl_node_rele(zfix_mkfile(d1, "file"));
    zpl_node_t *e1 = zfix_mkdir(d1, "empty");
    assert_int_equal(zpl_rename(d2, "sd", d1, "file", NULL, NULL), -ENOTDIR);
    assert_int_equal(zpl_rename(d1, "file", d2, "sd", NULL, NULL), -EISDIR);
    assert_int_equal(zpl_rename(d1, "empty", d2, "sd", NULL, NULL), -ENOTEMPTY);
    /* over an empty directory */
    assert_int_equal(zpl_rename(d2, "sd", d1, "empty", NULL, NULL), 0);
    assert_int_equal(zpl_getattr(e1, &(zpl_attr_t){0}), -ESTALE);
    assert_int_equal(zfix_attr(d1).nlink, 3);   /* sd replaced empty: still one subdir */
    assert_int_equal(zfix_attr(d2).nlink, 2);
    assert_int_equal(lookup_err(d1, "empty"), 0);
    zpl_node_t *in = NULL;
    assert_int_equal(zpl_lookup(sd, "inside", &in), 0);
    zpl_node_rele(in);
    /* hard links to one file: no-op, both names stay */
    zpl_node_t *h = zfix_mkfile(root, "h1");
    assert_int_equal(zpl_link(h, root, "h2", NULL), 0);
    assert_int_equal(zpl_rename(root, "h1", root, "h2", NULL, NULL), 0);
    assert_int_equal(lookup_err(root, "h1"), 0);
    assert_int_equal(lookup_err(root, "h2"), 0);
    assert_int_equal(zfix_attr(h).nlink, 2);
    /* onto itself */
    assert_int_equal(zpl_rename(root, "h1", root, "h1", NULL, NULL), 0);
    assert_int_equal(lookup_err(root, "h1"), 0);
    /* the control directory is not renamable */
    assert_int_equal(zpl_rename(root, ZPL_CTLDIR_NAME, root, "x", NULL, NULL), -EROFS);
    zpl_node_rele(h);
    zpl_node_rele(e1);
    zpl_node_rele(deep);
    zpl_node_rele(sd);
    zpl_node_rele(a);
    zpl_node_rele(b);
    zpl_node_rele(d1);
    zpl_node_rele(d2);
    zpl_node_rele(root);

    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "d1", &d1), 0);
    assert_int_equal(zpl_lookup(d1, "empty", &sd), 0);
    assert_int_equal(lookup_err(sd, "inside"), 0);
    assert_int_equal(lookup_err(sd, "deep"), 0);
    assert_int_equal(zfix_attr(d1).nlink, 3);
    zpl_node_rele(sd);
    zpl_node_rele(d1);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

static void test_truncate_holes_big(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zpltrunc", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    char buf[300000];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (char)(i * 7 + 1);
    assert_int_equal(zpl_write(a, 0, sizeof(buf), buf, 0, NULL), 0);
    assert_int_equal(zfix_attr(a).size, sizeof(buf));
    assert_int_equal(zfix_attr(a).blksize, 128 * 1024);
    zpl_setattr_t sa = {.mask = ZPL_SET_SIZE, .size = 1000};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    assert_int_equal(zfix_attr(a).size, 1000);
    sa.size = 200000;
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    char rb[300000];
    size_t nr;
    bool eof;
    assert_int_equal(zpl_read(a, 0, sizeof(rb), rb, &nr, &eof), 0);
    assert_int_equal(nr, 200000);
    assert_true(eof);
    assert_memory_equal(rb, buf, 1000);
    for (size_t i = 1000; i < 200000; i++)
        if (rb[i] != 0) fail_msg("byte %zu not zero after truncate+extend", i);
    /* a read past the end */
    assert_int_equal(zpl_read(a, 500000, 10, rb, &nr, &eof), 0);
    assert_int_equal(nr, 0);
    assert_true(eof);
    /* a small file gets a small record */
    zpl_node_t *small = zfix_mkfile(root, "small");
    zfix_write_str(small, 0, "tiny");
    assert_int_equal(zfix_attr(small).blksize, 512);
    zpl_node_rele(small);

    /* past 4 GiB with a hole below */
    zpl_node_t *big = zfix_mkfile(root, "big");
    uint64_t off = 5 * CAIRN_GIB + 12345;
    assert_int_equal(zpl_write(big, off, 4096, buf, 0, NULL), 0);
    assert_int_equal(zfix_attr(big).size, off + 4096);
    assert_int_equal(zpl_read(big, off, 4096, rb, &nr, &eof), 0);
    assert_int_equal(nr, 4096);
    assert_memory_equal(rb, buf, 4096);
    assert_int_equal(zpl_read(big, 3 * CAIRN_GIB, 8192, rb, &nr, &eof), 0);
    assert_int_equal(nr, 8192);
    for (size_t i = 0; i < 8192; i++) assert_int_equal(rb[i], 0);
    assert_true(zfix_attr(big).used < 10 * CAIRN_MIB || zfix_attr(big).used == 0);
    assert_int_equal(zpl_write(big, ZPL_MAX_FILE_SIZE - 10, 100, buf, 0, NULL), -EFBIG);
    assert_int_equal(zpl_write(big, UINT64_MAX - 5, 10, buf, 0, NULL), -EFBIG);
    sa.size = ZPL_MAX_FILE_SIZE + 1;
    assert_int_equal(zpl_setattr(big, &sa, NULL), -EFBIG);
    sa.size = 10;
    assert_int_equal(zpl_setattr(root, &sa, NULL), -EISDIR);
    zpl_node_rele(big);
    zpl_node_rele(a);
    zpl_node_rele(root);

    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "big", &big), 0);
    assert_int_equal(zfix_attr(big).size, off + 4096);
    assert_int_equal(zpl_read(big, off, 4096, rb, &nr, &eof), 0);
    assert_memory_equal(rb, buf, 4096);
    zpl_node_rele(big);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/*
 * "read and write at any 64-bit offset": a file reaches ZPL_MAX_FILE_SIZE
 * (INT64_MAX) bytes, also with 512-byte records (the deepest block tree); one
 * byte more is -EFBIG; the data survives an import and truncation frees it.
 */
static void test_largest_file(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplmax", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *wide = zfix_mkfile(root, "wide");
    zfix_write_str(wide, 1ULL << 62, "at 2^62");   /* its record size: 128 KiB */
    char err[256] = "";
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "recordsize", "512", err, sizeof(err)), 0);
    zpl_node_t *deep = zfix_mkfile(root, "deep");
    const uint64_t max = ZPL_MAX_FILE_SIZE;
    const char *tail = "the last bytes a file can hold, across two 512-byte records............"
                       "..................................................................."
                       "..................................................................."
                       "..................................................................."
                       "..................................................................."
                       "..................................................................."
                       "..................................................................."
                       "..................................................................end";
    const uint64_t tlen = strlen(tail);
    assert_true(tlen > 512);
    zpl_node_t *files[] = {wide, deep};
    for (int i = 0; i < 2; i++) {
        zpl_node_t *n = files[i];
        zfix_write_str(n, 1ULL << 62, "at 2^62");
        zfix_write_str(n, max - tlen, tail);
        assert_int_equal(zfix_attr(n).size, max);
        expect_content(n, max - tlen, tail);
        expect_content(n, 1ULL << 62, "at 2^62");
        assert_int_equal(zpl_write(n, max, 1, "x", 0, NULL), -EFBIG);
        assert_int_equal(zpl_write(n, max - 1, 2, "xy", 0, NULL), -EFBIG);
        char rb[64];
        size_t nr = 0;
        bool eof = false;
        assert_int_equal(zpl_read(n, max - 3, sizeof(rb), rb, &nr, &eof), 0);
        assert_int_equal(nr, 3);
        assert_true(eof);
        assert_memory_equal(rb, "end", 3);
        zpl_setattr_t sa = {.mask = ZPL_SET_SIZE, .size = max};
        assert_int_equal(zpl_setattr(n, &sa, NULL), 0);
        sa.size = max + 1;
        assert_int_equal(zpl_setattr(n, &sa, NULL), -EFBIG);
        assert_int_equal(zfix_attr(n).size, max);
    }
    assert_int_equal(zfix_attr(wide).blksize, 128 * 1024);
    assert_int_equal(zfix_attr(deep).blksize, 512);
    zpl_node_rele(wide);
    zpl_node_rele(deep);
    zpl_node_rele(root);

    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "wide", &files[0]), 0);
    assert_int_equal(zpl_lookup(root, "deep", &files[1]), 0);
    for (int i = 0; i < 2; i++) {
        zpl_node_t *n = files[i];
        assert_int_equal(zfix_attr(n).size, max);
        expect_content(n, max - tlen, tail);
        expect_content(n, 1ULL << 62, "at 2^62");
        assert_true(zfix_attr(n).used > 0);
        zpl_setattr_t sa = {.mask = ZPL_SET_SIZE, .size = 0};
        assert_int_equal(zpl_setattr(n, &sa, NULL), 0);
    }
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(zfix_attr(files[i]).used, 0);
        zpl_node_rele(files[i]);
    }
    zpl_node_rele(root);
    zfix_destroy(&f);
}

static void test_setattr_times_change(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplsetattr", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    zpl_attr_t before = zfix_attr(a);
    zpl_setattr_t sa = {.mask = ZPL_SET_MODE | ZPL_SET_UID | ZPL_SET_GID | ZPL_SET_ATIME | ZPL_SET_MTIME,
                        .mode = 04711, .uid = 7, .gid = 8, .atime_ns = 111, .mtime_ns = 222};
    zpl_wcc_t w;
    assert_int_equal(zpl_setattr(a, &sa, &w), 0);
    zpl_attr_t at = zfix_attr(a);
    assert_int_equal(at.mode, S_IFREG | 04711);
    assert_int_equal(at.uid, 7);
    assert_int_equal(at.gid, 8);
    assert_int_equal(at.atime_ns, 111);
    assert_int_equal(at.mtime_ns, 222);
    assert_true(at.ctime_ns >= before.ctime_ns);
    assert_true(at.change > before.change);
    assert_int_equal(w.pre_change, before.change);
    assert_int_equal(w.post.change, at.change);
    /* guard */
    zpl_setattr_t g = {.mask = ZPL_SET_GUARD_CTIME | ZPL_SET_MODE, .mode = 0600, .guard_ctime_ns = 5};
    assert_int_equal(zpl_setattr(a, &g, NULL), -EAGAIN);
    g.guard_ctime_ns = at.ctime_ns;
    assert_int_equal(zpl_setattr(a, &g, NULL), 0);
    /* "now" */
    zpl_setattr_t now = {.mask = ZPL_SET_ATIME_NOW | ZPL_SET_MTIME_NOW};
    assert_int_equal(zpl_setattr(a, &now, NULL), 0);
    at = zfix_attr(a);
    assert_true(at.mtime_ns > 222 && at.atime_ns > 111);
    /* every data change bumps change and mtime */
    uint64_t c0 = at.change;
    zfix_write_str(a, 0, "x");
    assert_true(zfix_attr(a).change > c0);

    /* atime=on (default): a read after a write updates atime (relatime) */
    char err[256];
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "atime", "on", err, sizeof(err)), 0);
    sa = (zpl_setattr_t){.mask = ZPL_SET_ATIME, .atime_ns = 1000};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    uint64_t c1 = zfix_attr(a).change;
    char buf[4];
    size_t nr;
    assert_int_equal(zpl_read(a, 0, 1, buf, &nr, NULL), 0);
    at = zfix_attr(a);
    assert_true(at.atime_ns > 1000);
    assert_int_equal(at.change, c1);   /* atime does not bump the change attribute */
    /* ...but not on every read: a fresh atime stays as it is */
    int64_t t1 = at.atime_ns;
    assert_int_equal(zpl_read(a, 0, 1, buf, &nr, NULL), 0);
    assert_int_equal(zfix_attr(a).atime_ns, t1);
    /* atime=off: never */
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "atime", "off", err, sizeof(err)), 0);
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    assert_int_equal(zpl_read(a, 0, 1, buf, &nr, NULL), 0);
    assert_int_equal(zfix_attr(a).atime_ns, 1000);

    /* access */
    zpl_cred_t owner = {.uid = 7, .gid = 99}, other = {.uid = 50, .gid = 50}, grp = {.uid = 50, .gid = 8};
    sa = (zpl_setattr_t){.mask = ZPL_SET_MODE, .mode = 0640};
    assert_int_equal(zpl_setattr(a, &sa, NULL), 0);
    uint32_t got;
    assert_int_equal(zpl_access(a, &owner, 7, &got), 0);
    assert_int_equal(got, ZPL_ACCESS_READ | ZPL_ACCESS_WRITE);
    assert_int_equal(zpl_access(a, &grp, 7, &got), 0);
    assert_int_equal(got, ZPL_ACCESS_READ);
    assert_int_equal(zpl_access(a, &other, 7, &got), 0);
    assert_int_equal(got, 0);

    zpl_statfs_t st;
    assert_int_equal(zpl_statfs(f.fs, &st), 0);
    assert_true(st.total_bytes > 0 && st.avail_bytes > 0 && st.avail_bytes <= st.total_bytes);
    assert_int_equal(st.name_max, 255);
    assert_int_equal(st.fsid, zpl_fs_guid(f.fs));
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* ---- readdir ---- */

typedef struct rd {
    char (*names)[ZPL_NAME_MAX + 1];
    size_t n, cap, limit;
    uint64_t last_cookie;
    uint64_t cookies[4];
} rd_t;

static int rd_cb(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)ino;
    (void)type;
    rd_t *r = arg;
    if (r->limit && r->n >= r->limit) return 1;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->names = realloc(r->names, r->cap * sizeof(*r->names));
    }
    snprintf(r->names[r->n], sizeof(r->names[0]), "%s", name);
    if (r->n < 4) r->cookies[r->n] = cookie;
    r->n++;
    r->last_cookie = cookie;
    return 0;
}

static void test_readdir_cookies(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplreaddir", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *d = zfix_mkdir(root, "d");
    enum { N = 600 };
    char name[64];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "e%04d", i);
        assert_int_equal(zpl_create(d, name, 0644, &zfix_cred, 0, NULL, NULL, NULL), 0);
    }
    /* "." and ".." first, at cookies 1 and 2 */
    rd_t r = {.limit = 2};
    bool eof;
    assert_int_equal(zpl_readdir(d, 0, rd_cb, &r, &eof), 0);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.names[0], ".");
    assert_string_equal(r.names[1], "..");
    assert_int_equal(r.cookies[0], 1);
    assert_int_equal(r.cookies[1], 2);
    assert_false(eof);
    free(r.names);

    /* Read in small batches while removing every 3rd entry and adding new ones:
     * each survivor (never removed) appears exactly once. */
    int seen[N] = {0};
    uint64_t cookie = 0;
    int batch = 0;
    for (;;) {
        rd_t b = {.limit = 7};
        assert_int_equal(zpl_readdir(d, cookie, rd_cb, &b, &eof), 0);
        for (size_t i = 0; i < b.n; i++) {
            int k;
            if (sscanf(b.names[i], "e%d", &k) == 1 && b.names[i][0] == 'e') seen[k]++;
        }
        if (b.n) cookie = b.last_cookie;
        free(b.names);
        if (eof || b.n == 0) break;
        batch++;
        snprintf(name, sizeof(name), "e%04d", (batch * 3) % N);
        (void)zpl_remove(d, name, NULL);
        snprintf(name, sizeof(name), "new%04d", batch);
        assert_int_equal(zpl_create(d, name, 0644, &zfix_cred, 0, NULL, NULL, NULL), 0);
    }
    for (int i = 0; i < N; i++) {
        bool removed = false;
        for (int bb = 1; bb <= batch; bb++) removed |= (bb * 3) % N == i;
        if (!removed && seen[i] != 1) fail_msg("survivor e%04d seen %d times", i, seen[i]);
        if (seen[i] > 1) fail_msg("e%04d seen %d times", i, seen[i]);
    }
    assert_int_equal(zpl_readdir(zfix_mkfile(root, "plain"), 0, rd_cb, &r, &eof), -ENOTDIR);
    zpl_node_t *plain;
    assert_int_equal(zpl_lookup(root, "plain", &plain), 0);
    zpl_node_rele(plain);
    zpl_node_rele(plain);   /* the one mkfile handed out above */
    zpl_node_rele(d);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* ---- handles ---- */

static void test_handles(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplfh", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    zfix_write_str(a, 0, "handle me");
    zpl_fh_t fa, froot;
    assert_int_equal(zpl_fh_encode(a, &fa), 0);
    assert_int_equal(zpl_fh_encode(root, &froot), 0);
    uint64_t eg;
    assert_int_equal(zpl_fh_export_guid(fa.bytes, sizeof(fa.bytes), &eg), 0);
    assert_int_equal(eg, zpl_fs_guid(f.fs));
    zpl_node_rele(a);
    zpl_node_rele(root);

    zfix_reimport(&f);
    zpl_node_t *n = NULL;
    assert_int_equal(zpl_fh_to_inode(f.fs, fa.bytes, sizeof(fa.bytes), &n), 0);
    expect_content(n, 0, "handle me");
    uint64_t ino = zpl_node_ino(n);
    zpl_node_rele(n);
    assert_int_equal(zpl_fh_to_inode(f.fs, froot.bytes, sizeof(froot.bytes), &root), 0);

    /* garbage */
    uint8_t junk[ZPL_FH_SIZE] = {0};
    assert_int_equal(zpl_fh_to_inode(f.fs, junk, sizeof(junk), &n), -EINVAL);
    assert_int_equal(zpl_fh_to_inode(f.fs, fa.bytes, 10, &n), -EINVAL);

    /* removed, then its number reused: stale */
    assert_int_equal(zpl_remove(root, "a", NULL), 0);
    assert_int_equal(zpl_fh_to_inode(f.fs, fa.bytes, sizeof(fa.bytes), &n), -ESTALE);
    assert_int_equal(zpl_commit(f.fs), 0);   /* a freed number is reusable once synced */
    bool reused = false;
    for (int i = 0; i < 50 && !reused; i++) {
        char name[32];
        snprintf(name, sizeof(name), "r%d", i);
        zpl_node_t *r = zfix_mkfile(root, name);
        reused = zpl_node_ino(r) == ino;
        zpl_node_rele(r);
    }
    assert_true(reused);   /* the DMU hands out freed numbers first */
    assert_int_equal(zpl_fh_to_inode(f.fs, fa.bytes, sizeof(fa.bytes), &n), -ESTALE);
    zpl_node_rele(root);
    zfix_reimport(&f);
    assert_int_equal(zpl_fh_to_inode(f.fs, fa.bytes, sizeof(fa.bytes), &n), -ESTALE);
    /* a handle of another export */
    zpl_fh_t other = fa;
    other.bytes[8] ^= 0xff;
    assert_int_equal(zpl_fh_to_inode(f.fs, other.bytes, sizeof(other.bytes), &n), -ESTALE);
    zfix_destroy(&f);
}

/* ---- snapshots and read-only ---- */

static int name_in(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)ino;
    (void)type;
    (void)cookie;
    rd_t *r = arg;
    return rd_cb(r, name, 0, 0, cookie);
}

static void test_snapshots_erofs(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplsnap", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    zfix_write_str(a, 0, "old contents");
    zpl_node_t *d = zfix_mkdir(root, "d");
    zpl_node_rele(zfix_mkfile(d, "f1"));
    char snap[200], err[256];
    snprintf(snap, sizeof(snap), "%s@monday", f.fsname);
    assert_int_equal(dsl_snapshot(f.dp, snap, false, err, sizeof(err)), 0);
    zfix_write_str(a, 0, "NEW");
    assert_int_equal(zpl_remove(d, "f1", NULL), 0);

    zpl_node_t *ctl = NULL, *sdir = NULL, *sroot = NULL, *sa = NULL;
    assert_int_equal(zpl_lookup(root, ZPL_CTLDIR_NAME, &ctl), 0);
    assert_true(S_ISDIR(zfix_attr(ctl).mode));
    assert_int_equal(zpl_lookup(ctl, "snapshot", &sdir), 0);
    rd_t r = {0};
    bool eof;
    assert_int_equal(zpl_readdir(sdir, 0, name_in, &r, &eof), 0);
    assert_true(eof);
    bool found = false;
    for (size_t i = 0; i < r.n; i++) found |= !strcmp(r.names[i], "monday");
    assert_true(found);
    free(r.names);
    /* the control dir is hidden from the root's listing */
    r = (rd_t){0};
    assert_int_equal(zpl_readdir(root, 0, name_in, &r, &eof), 0);
    for (size_t i = 0; i < r.n; i++) assert_string_not_equal(r.names[i], ZPL_CTLDIR_NAME);
    assert_int_equal(r.n, 4);
    free(r.names);

    assert_int_equal(lookup_err(sdir, "tuesday"), -ENOENT);
    assert_int_equal(zpl_lookup(sdir, "monday", &sroot), 0);
    zpl_fs_t *sfs = zpl_node_fs(sroot);
    assert_ptr_not_equal(sfs, f.fs);
    assert_true(zpl_fs_readonly(sfs));
    assert_int_equal(zpl_lookup(sroot, "a", &sa), 0);
    expect_content(sa, 0, "old contents");
    assert_int_equal(zfix_attr(sa).fsid, zpl_fs_guid(sfs));
    zpl_node_t *sd = NULL;
    assert_int_equal(zpl_lookup(sroot, "d", &sd), 0);
    assert_int_equal(lookup_err(sd, "f1"), 0);
    zpl_node_t *up = NULL;
    assert_int_equal(zpl_lookup(sroot, "..", &up), 0);
    assert_ptr_equal(up, sdir);
    zpl_node_rele(up);

    /* everything that changes is EROFS in a snapshot */
    assert_int_equal(zpl_write(sa, 0, 1, "x", 0, NULL), -EROFS);
    assert_int_equal(zpl_create(sroot, "n", 0644, &zfix_cred, 0, NULL, NULL, NULL), -EROFS);
    assert_int_equal(zpl_mkdir(sroot, "n", 0755, &zfix_cred, NULL, NULL), -EROFS);
    assert_int_equal(zpl_remove(sroot, "a", NULL), -EROFS);
    assert_int_equal(zpl_rmdir(sroot, "d", NULL), -EROFS);
    assert_int_equal(zpl_rename(sroot, "a", sroot, "b", NULL, NULL), -EROFS);
    assert_int_equal(zpl_link(sa, sroot, "b", NULL), -EROFS);
    zpl_setattr_t st = {.mask = ZPL_SET_MODE, .mode = 0};
    assert_int_equal(zpl_setattr(sa, &st, NULL), -EROFS);
    assert_int_equal(zpl_create(sdir, "n", 0644, &zfix_cred, 0, NULL, NULL, NULL), -EROFS);
    assert_int_equal(zpl_mkdir(ctl, "n", 0755, &zfix_cred, NULL, NULL), -EROFS);
    /* cross-fs between head and snapshot */
    assert_int_equal(zpl_rename(sroot, "a", root, "a", NULL, NULL), -EXDEV);

    /* handle of a snapshot file: carries the snapshot's guid, resolves via the head */
    zpl_fh_t fh;
    assert_int_equal(zpl_fh_encode(sa, &fh), 0);
    uint64_t eg;
    assert_int_equal(zpl_fh_export_guid(fh.bytes, sizeof(fh.bytes), &eg), 0);
    assert_int_equal(eg, zpl_fs_guid(f.fs));
    zpl_fh_t fctl;
    assert_int_equal(zpl_fh_encode(sdir, &fctl), 0);
    zpl_node_rele(sd);
    zpl_node_rele(sa);
    zpl_node_rele(sroot);
    zpl_node_rele(sdir);
    zpl_node_rele(ctl);
    zpl_node_rele(a);
    zpl_node_rele(d);
    zpl_node_rele(root);
    zfix_reimport(&f);
    zpl_node_t *n = NULL;
    assert_int_equal(zpl_fh_to_inode(f.fs, fh.bytes, sizeof(fh.bytes), &n), 0);
    expect_content(n, 0, "old contents");
    assert_true(zpl_fs_readonly(zpl_node_fs(n)));
    zpl_node_rele(n);
    assert_int_equal(zpl_fh_to_inode(f.fs, fctl.bytes, sizeof(fctl.bytes), &n), 0);
    assert_int_equal(zpl_node_ino(n), ZPL_INO_SNAPDIR);
    zpl_node_rele(n);
    /* after destroying the snapshot its handles go stale */
    assert_int_equal(zpl_fs_release_snapshots(f.fs), 0);
    assert_int_equal(dsl_dataset_destroy(f.dp, snap, false, false, err, sizeof(err)), 0);
    assert_int_equal(zpl_fh_to_inode(f.fs, fh.bytes, sizeof(fh.bytes), &n), -ESTALE);
    /* a snapshot mounted directly is read-only */
    snprintf(snap, sizeof(snap), "%s@tuesday", f.fsname);
    assert_int_equal(dsl_snapshot(f.dp, snap, false, err, sizeof(err)), 0);
    zpl_fs_t *direct;
    assert_int_equal(zpl_mount(f.dp, snap, &direct), 0);
    assert_true(zpl_fs_readonly(direct));
    zpl_node_t *droot;
    assert_int_equal(zpl_root(direct, &droot), 0);
    assert_int_equal(zpl_create(droot, "x", 0644, &zfix_cred, 0, NULL, NULL, NULL), -EROFS);
    zpl_node_rele(droot);
    assert_int_equal(zpl_unmount(direct), 0);

    /* readonly=on on the head */
    root = zfix_root(&f);
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "readonly", "on", err, sizeof(err)), 0);
    assert_true(zpl_fs_readonly(f.fs));
    assert_int_equal(zpl_create(root, "ro", 0644, &zfix_cred, 0, NULL, NULL, NULL), -EROFS);
    assert_int_equal(zpl_lookup(root, "a", &a), 0);
    assert_int_equal(zpl_write(a, 0, 1, "x", 0, NULL), -EROFS);
    expect_content(a, 0, "NEW");
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "readonly", "off", err, sizeof(err)), 0);
    assert_int_equal(zpl_write(a, 0, 1, "x", 0, NULL), 0);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

static void test_quota(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplquota", 512 * CAIRN_MIB);
    char err[256];
    assert_int_equal(dsl_prop_set(f.dp, f.fsname, "quota", "4M", err, sizeof(err)), 0);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = zfix_mkfile(root, "a");
    size_t len = 1024 * 1024;
    char *buf = malloc(len);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 42);
    for (size_t i = 0; i < len; i += 8) {   /* incompressible */
        uint64_t v = cairn_rng_next(&rng);
        memcpy(buf + i, &v, 8);
    }
    int e = 0;
    for (int i = 0; i < 64 && !e; i++) {
        e = zpl_write(a, (uint64_t)i * len, len, buf, 0, NULL);
        if (!e && i % 2) assert_int_equal(zpl_commit(f.fs), 0);
    }
    assert_int_equal(e, -EDQUOT);
    free(buf);
    zpl_node_rele(a);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

/* ---- the space invariant through files ---- */

static uint64_t fs_num(zfix_t *f, const char *ds, const char *prop)
{
    dsl_prop_t p;
    char err[256];
    int e = dsl_prop_get(f->dp, ds, prop, &p, err, sizeof(err));
    if (e) fail_msg("get %s of %s: %s", prop, ds, err);
    return p.numeric;
}

/* After frees are past their defer window: allocated bytes but the space map
 * log's (which grows every txg until condensed). */
static uint64_t pool_data_alloc(zfix_t *f)
{
    for (int i = 0; i < SPA_DEFER_TXGS + 2; i++) assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0);
    spa_space_t s;
    spa_get_space(f->spa, &s);
    return s.alloc - spa_spacemap_log_bytes(f->spa);
}

/* Write files, snapshot, delete the files, destroy the snapshot: the
 * filesystem's used and the pool's allocation come back. The first cycle
 * leaves the directory and the object set's dnode array grown to what the
 * files needed (a few blocks, kept for reuse); from then on every cycle
 * comes back to the byte. The pool checks clean at the end. */
static void test_space_cycle(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplspace", 512 * CAIRN_MIB);
    char err[256], snap[200];
    const int nfiles = 16;
    const size_t len = 256 * 1024;
    char *buf = malloc(len);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 7);
    for (size_t i = 0; i < len; i += 8) { /* incompressible */
        uint64_t v = cairn_rng_next(&rng);
        memcpy(buf + i, &v, 8);
    }
    assert_int_equal(zpl_commit(f.fs), 0);
    uint64_t used_empty = fs_num(&f, f.fsname, "used");
    uint64_t used_base = 0, alloc_base = 0;
    for (int cycle = 0; cycle < 3; cycle++) {
        zpl_node_t *root = zfix_root(&f);
        for (int i = 0; i < nfiles; i++) {
            char name[32];
            snprintf(name, sizeof(name), "file%d", i);
            zpl_node_t *n = zfix_mkfile(root, name);
            assert_int_equal(zpl_write(n, 0, len, buf, 0, NULL), 0);
            zpl_node_rele(n);
        }
        snprintf(snap, sizeof(snap), "%s@cycle%d", f.fsname, cycle);
        assert_int_equal(dsl_snapshot(f.dp, snap, false, err, sizeof(err)), 0);
        for (int i = 0; i < nfiles; i++) {
            char name[32];
            snprintf(name, sizeof(name), "file%d", i);
            assert_int_equal(zpl_remove(root, name, NULL), 0);
        }
        zpl_node_rele(root);
        assert_int_equal(zpl_commit(f.fs), 0);
        /* A commit makes the removes durable in the intent log; space is counted
         * by the txg that applies them. */
        assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
        /* The snapshot alone keeps the deleted files' data. */
        assert_true(fs_num(&f, f.fsname, "usedbysnapshots") >= nfiles * len);
        assert_true(fs_num(&f, snap, "used") >= nfiles * len);
        assert_int_equal(dsl_dataset_destroy(f.dp, snap, false, false, err, sizeof(err)), 0);
        uint64_t alloc = pool_data_alloc(&f);
        uint64_t used = fs_num(&f, f.fsname, "used");
        assert_int_equal(fs_num(&f, f.fsname, "usedbysnapshots"), 0);
        assert_true(used < used_empty + 64 * 1024);
        if (cycle == 0) {
            used_base = used;
            alloc_base = alloc;
        } else {
            assert_int_equal(used, used_base);
            assert_int_equal(alloc, alloc_base);
        }
    }
    free(buf);
    zfix_export_check(&f);
    zfix_destroy(&f);
}

/* ---- concurrency smoke test: no deadlock, consistent counts ---- */

typedef struct thr {
    zfix_t *f;
    zpl_node_t *d[3];
    int id;
} thr_t;

static void *worker(void *arg)
{
    thr_t *t = arg;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, (uint64_t)t->id + 1);
    char name[32], name2[32];
    for (int i = 0; i < 400; i++) {
        zpl_node_t *from = t->d[cairn_rng_below(&rng, 3)], *to = t->d[cairn_rng_below(&rng, 3)];
        snprintf(name, sizeof(name), "t%d_%d", t->id, (int)cairn_rng_below(&rng, 20));
        snprintf(name2, sizeof(name2), "t%d_%d", t->id, (int)cairn_rng_below(&rng, 20));
        switch (cairn_rng_below(&rng, 4)) {
        case 0: (void)zpl_create(from, name, 0644, &zfix_cred, 0, NULL, NULL, NULL); break;
        case 1: (void)zpl_rename(from, name, to, name2, NULL, NULL); break;
        case 2: (void)zpl_remove(from, name, NULL); break;
        default: {
            zpl_node_t *n;
            if (zpl_lookup(from, name, &n) == 0) {
                (void)zpl_write(n, 0, 5, "hello", 0, NULL);
                zpl_node_rele(n);
            }
        }
        }
    }
    return NULL;
}

static void test_concurrency(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplconc", 512 * CAIRN_MIB);
    zpl_node_t *root = zfix_root(&f);
    thr_t t[4];
    zpl_node_t *d[3] = {zfix_mkdir(root, "d0"), zfix_mkdir(root, "d1"), zfix_mkdir(root, "d2")};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (thr_t){.f = &f, .d = {d[0], d[1], d[2]}, .id = i};
        pthread_create(&th[i], NULL, worker, &t[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    /* each directory's size matches its entries */
    for (int i = 0; i < 3; i++) {
        rd_t r = {0};
        bool eof;
        assert_int_equal(zpl_readdir(d[i], 0, name_in, &r, &eof), 0);
        assert_int_equal(zfix_attr(d[i]).size, r.n);
        free(r.names);
        zpl_node_rele(d[i]);
    }
    zpl_node_rele(root);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_lookup_getattr),
        cmocka_unit_test(test_dirs),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_rename),
        cmocka_unit_test(test_truncate_holes_big),
        cmocka_unit_test(test_largest_file),
        cmocka_unit_test(test_setattr_times_change),
        cmocka_unit_test(test_readdir_cookies),
        cmocka_unit_test(test_handles),
        cmocka_unit_test(test_snapshots_erofs),
        cmocka_unit_test(test_quota),
        cmocka_unit_test(test_space_cycle),
        cmocka_unit_test(test_concurrency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
