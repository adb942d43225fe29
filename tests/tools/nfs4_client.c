/*
 * nfs4_client URL MODE [ARGS]: drives Cairn's NFSv4.0 server through libnfs's
 * NFSv4 client (one NFSv4 client identity per process) for the integration
 * tests. URL is nfs://HOST/EXPORT?version=4&nfsport=N[&uid=U&gid=G].
 *
 *   basic            create/write/read/append/truncate/rename/link/symlink/mkdir/
 *                    readdir/remove/rmdir and the errors ENOENT, EEXIST, ENOTEMPTY
 *   lock-hold FILE   takes a write lock on bytes [0,100) of FILE, prints "locked",
 *                    holds it until stdin closes, then unlocks
 *   lock-try FILE    expects LOCKT to see the conflict in [50,60) and none in
 *                    [100,110), then [50,60) to be refused and [100,110) granted
 *   removed-open     a file removed while open still reads through its open
 *                    (NFSv4 opens keep it until CLOSE)
 *   expect-errno FILE OPEN_FLAGS ERRNO
 *                    opening FILE (r, w, or c for create) must fail with -ERRNO
 *
 * Exit status 0 on success; a failed check prints why and exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libnfs_lsan.h"

static struct nfs_context *nfs;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "nfs4_client: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s)\n", nfs ? nfs_get_error(nfs) : "");
    va_end(ap);
    exit(1);
}

#define CHECK(expr, ...) do { if (!(expr)) die(__VA_ARGS__); } while (0)

static void put(const char *path, const char *data, int flags)
{
    struct nfsfh *fh;
    int rc = nfs_open2(nfs, path, flags, 0644, &fh);
    CHECK(rc == 0, "open %s: %d", path, rc);
    rc = nfs_write(nfs, fh, strlen(data), data);
    CHECK(rc == (int)strlen(data), "write %s: %d", path, rc);
    CHECK(nfs_close(nfs, fh) == 0, "close %s", path);
}

static void expect(const char *path, const char *data)
{
    struct nfsfh *fh;
    int rc = nfs_open(nfs, path, O_RDONLY, &fh);
    CHECK(rc == 0, "open %s: %d", path, rc);
    char buf[4096];
    rc = nfs_pread(nfs, fh, 0, sizeof buf - 1, buf);
    CHECK(rc >= 0, "read %s: %d", path, rc);
    buf[rc] = 0;
    CHECK(!strcmp(buf, data), "%s holds '%s', not '%s'", path, buf, data);
    nfs_close(nfs, fh);
}

static void basic(void)
{
    char dir[64], a[96], b[96], c[96], l[96];
    snprintf(dir, sizeof dir, "/basic-%d", (int)getpid());
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    snprintf(c, sizeof c, "%s/c", dir);
    snprintf(l, sizeof l, "%s/l", dir);
    CHECK(nfs_mkdir(nfs, dir) == 0, "mkdir %s", dir);
    CHECK(nfs_mkdir(nfs, dir) == -EEXIST, "mkdir twice is not EEXIST");
    put(a, "first", O_CREAT | O_WRONLY | O_TRUNC);
    expect(a, "first");
    put(a, "+more", O_WRONLY | O_APPEND);
    expect(a, "first+more");
    put(a, "new", O_WRONLY | O_TRUNC);
    expect(a, "new");
    put(a, "X", O_WRONLY);
    struct nfsfh *fh;
    CHECK(nfs_open2(nfs, a, O_CREAT | O_EXCL | O_WRONLY, 0644, &fh) == -EEXIST, "O_EXCL on an existing file");
    expect(a, "Xew");
    CHECK(nfs_rename(nfs, a, b) == 0, "rename");
    struct nfs_stat_64 st;
    CHECK(nfs_stat64(nfs, a, &st) == -ENOENT, "renamed file still there");
    CHECK(nfs_stat64(nfs, b, &st) == 0 && st.nfs_size == 3, "stat after rename");
    CHECK(nfs_link(nfs, b, c) == 0, "link");
    CHECK(nfs_stat64(nfs, b, &st) == 0 && st.nfs_nlink == 2, "nlink after link: %d", (int)st.nfs_nlink);
    CHECK(nfs_symlink(nfs, "b", l) == 0, "symlink");
    char target[64] = "";
    CHECK(nfs_readlink(nfs, l, target, sizeof target) == 0 && !strcmp(target, "b"), "readlink");
    struct nfsdir *d;
    CHECK(nfs_opendir(nfs, dir, &d) == 0, "opendir");
    int seen = 0;
    for (struct nfsdirent *e; (e = nfs_readdir(nfs, d));)
        seen += !strcmp(e->name, "b") + !strcmp(e->name, "c") + !strcmp(e->name, "l");
    nfs_closedir(nfs, d);
    CHECK(seen == 3, "readdir saw %d of 3 entries", seen);
    CHECK(nfs_rmdir(nfs, dir) == -ENOTEMPTY, "rmdir of a full directory");
    CHECK(nfs_unlink(nfs, b) == 0 && nfs_unlink(nfs, c) == 0 && nfs_unlink(nfs, l) == 0, "unlink");
    CHECK(nfs_unlink(nfs, b) == -ENOENT, "unlink twice");
    CHECK(nfs_rmdir(nfs, dir) == 0, "rmdir");
}

static struct nfsfh *open_rw(const char *path)
{
    /* libnfs sends O_CREAT as EXCLUSIVE4, which an existing file refuses. */
    struct nfsfh *fh;
    int rc = nfs_open(nfs, path, O_RDWR, &fh);
    if (rc == -ENOENT) rc = nfs_open2(nfs, path, O_CREAT | O_RDWR, 0644, &fh);
    CHECK(rc == 0, "open %s: %d", path, rc);
    return fh;
}

static int lock(struct nfsfh *fh, int type, uint64_t start, uint64_t len)
{
    struct nfs4_flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
    return nfs_fcntl(nfs, fh, NFS4_F_SETLK, &fl);
}

/* LOCKT of a write lock on [start, start+len): libnfs's lockf(F_TEST) tests
 * from the file position. */
static int lock_test(struct nfsfh *fh, uint64_t start, uint64_t len)
{
    uint64_t pos;
    CHECK(nfs_lseek(nfs, fh, (int64_t)start, SEEK_SET, &pos) == 0 && pos == start, "lseek");
    return nfs_lockf(nfs, fh, NFS4_F_TEST, len);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nfs4_client URL MODE [ARGS]\n");
        return 2;
    }
    nfs = nfs_init_context();
    CHECK(nfs, "nfs_init_context");
    char id[64];
    snprintf(id, sizeof id, "cairn-nfs4-client-%d", (int)getpid());
    nfs4_set_client_name(nfs, id);
    struct nfs_url *u = nfs_parse_url_dir(nfs, argv[1]);
    CHECK(u, "bad url %s", argv[1]);
    int rc = nfs_mount(nfs, u->server, u->path);
    CHECK(rc == 0, "mount %s: %d", argv[1], rc);
    const char *mode = argv[2];
    if (!strcmp(mode, "basic")) {
        basic();
    } else if (!strcmp(mode, "lock-hold") && argc == 4) {
        struct nfsfh *fh = open_rw(argv[3]);
        CHECK(lock(fh, F_WRLCK, 0, 100) == 0, "lock [0,100)");
        printf("locked\n");
        fflush(stdout);
        char buf[64];
        while (fgets(buf, sizeof buf, stdin)) {}
        CHECK(lock(fh, F_UNLCK, 0, 100) == 0, "unlock");
        nfs_close(nfs, fh);
    } else if (!strcmp(mode, "lock-try") && argc == 4) {
        struct nfsfh *fh = open_rw(argv[3]);
        rc = lock_test(fh, 50, 10);
        CHECK(rc < 0, "LOCKT found no conflict in [50,60) under another client's lock");
        CHECK(lock_test(fh, 100, 10) == 0, "LOCKT found a conflict in the free [100,110)");
        CHECK(lock(fh, F_WRLCK, 50, 10) < 0, "[50,60) granted over another client's lock");
        CHECK(lock(fh, F_RDLCK, 0, 1) < 0, "a read lock granted over another's write lock");
        CHECK(lock(fh, F_WRLCK, 100, 10) == 0, "[100,110) refused");
        CHECK(lock(fh, F_UNLCK, 100, 10) == 0, "unlock [100,110)");
        nfs_close(nfs, fh);
    } else if (!strcmp(mode, "removed-open")) {
        char path[64];
        snprintf(path, sizeof path, "/removed-%d", (int)getpid());
        put(path, "soon gone", O_CREAT | O_WRONLY | O_TRUNC);
        struct nfsfh *fh;
        CHECK(nfs_open(nfs, path, O_RDONLY, &fh) == 0, "open");
        CHECK(nfs_unlink(nfs, path) == 0, "unlink");
        char buf[64];
        rc = nfs_pread(nfs, fh, 0, sizeof buf, buf);
        CHECK(rc == 9 && !memcmp(buf, "soon gone", 9), "read of a removed open file returned %d", rc);
        CHECK(nfs_close(nfs, fh) == 0, "close");
    } else if (!strcmp(mode, "expect-errno") && argc == 6) {
        int flags = !strcmp(argv[4], "r") ? O_RDONLY : !strcmp(argv[4], "w") ? O_WRONLY
                  : O_CREAT | O_WRONLY;
        int want = atoi(argv[5]);
        struct nfsfh *fh;
        rc = nfs_open2(nfs, argv[3], flags, 0644, &fh);
        CHECK(rc == -want, "open %s (%s) gave %d, not -%d", argv[3], argv[4], rc, want);
    } else {
        fprintf(stderr, "nfs4_client: unknown mode %s\n", mode);
        return 2;
    }
    nfs_destroy_url(u);
    nfs_umount(nfs);
    nfs_destroy_context(nfs);
    return 0;
}
