/*
 * An NFS client for the integration tests, on libnfs's synchronous API.
 *
 *   nfs_client URL basic            every procedure the library reaches, with checks (v3)
 *   nfs_client URL errors           ENOENT, EEXIST, ENOTEMPTY, ENOTDIR, EISDIR, EACCES... (v3)
 *   nfs_client URL denied           the mount itself must fail (client not allowed)
 *   nfs_client URL rofs             reads work, every change fails with EROFS (v3)
 *   nfs_client URL big              a sparse file past 4 GiB, 1 MiB transfers
 *   nfs_client URL concurrent N     N clients (threads, one connection each) at once
 *   nfs_client URL syncwrite NAME   FILE_SYNC 64 KiB records until killed; prints
 *                                   each acknowledged record number (flushed)
 *   nfs_client URL hawrite NAME     like syncwrite, but rides through a failover: a
 *                                   failed request is retried on a new connection
 *                                   (same record, same offset) until it succeeds;
 *                                   prints "N MS" per acknowledged record (MS: wall
 *                                   clock in ms) and one "retry ..." line on stderr
 *                                   per reconnection (tests/integration/test_ha_*)
 *   nfs_client URL verify NAME N    records 0..N-1 of NAME hold their pattern
 *   nfs_client URL stream NAME MIB WKIB CMIB   MIB MiB in writes of WKIB KiB, unstable
 *                                   with a COMMIT after every CMIB MiB (0: FILE_SYNC
 *                                   writes, no COMMIT), then a last COMMIT; prints the
 *                                   bytes acknowledged (tools/bench/zil-write-amp.sh)
 *   nfs_client URL put NAME TEXT / get NAME   small files
 *   nfs_client URL fill NAME BYTES  writes BYTES of incompressible data (1 MiB
 *                                   UNSTABLE writes, then COMMIT); prints
 *                                   "fill N" with the bytes written, and exits 3
 *                                   with "ENOSPC N" / "EDQUOT N" when the server
 *                                   refused (N: bytes written before that)
 *   nfs_client URL mkdir NAME / rm NAME        a directory, a file removed (rm:
 *                                   exit 4 when it does not exist)
 *   nfs_client URL putfile NAME LOCAL          NAME gets the bytes of file LOCAL
 *   nfs_client URL readerr NAME     reads NAME to its end; succeeds only when a
 *                                   READ fails (prints "READ error at OFFSET"; libnfs
 *                                   reports every failed READ as EFAULT or EIO)
 *
 * URL is a libnfs directory URL: nfs://127.0.0.1/tank/share?nfsport=P&mountport=M&version=3
 * (uid= and gid= pick the AUTH_SYS identity). With version=4 the modes not marked
 * (v3) speak NFSv4.0, within what libnfs 4.0's NFSv4 client can do: its WRITE
 * cannot carry more than about 3.9 KB (larger ones fail to encode), so writes go
 * in pieces of V4_WRITE_MAX (reads stay 1 MiB); its O_CREAT is EXCLUSIVE4, so an
 * existing file is opened without it; its O_SYNC writes are DATA_SYNC4. Every
 * connection is a client of its own (SETCLIENTID with the name
 * cairn-nfs-client-PID-N). Exit 0 on success; a failed check prints "FAIL: ..."
 * and exits 1.
 */
#include <nfsc/libnfs.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "libnfs_lsan.h"

static const char *g_url;
static bool g_v4;
static size_t g_wmax = 1 << 20;

#define V4_WRITE_MAX 2048
#define CAIRN_FILL_MIN(a, b) ((a) < (b) ? (a) : (b))

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) die(__VA_ARGS__);                                                            \
    } while (0)

/* rc must be exactly want (0 or a negative errno). */
#define EXPECT(nfs, expr, want)                                                                   \
    do {                                                                                          \
        int _rc = (expr);                                                                         \
        if (_rc != (want))                                                                        \
            die("%s:%d: %s returned %d (%s), expected %d", __FILE__, __LINE__, #expr, _rc,       \
                nfs_get_error(nfs) ? nfs_get_error(nfs) : "", (want));                            \
    } while (0)

static struct nfs_context *connect_ctx(int *rc_out)
{
    struct nfs_context *nfs = nfs_init_context();
    CHECK(nfs, "nfs_init_context");
    if (g_v4) {
        /* libnfs would name every connection of this process alike, making
         * them one client to the server. */
        static int seq;
        char id[64];
        snprintf(id, sizeof id, "cairn-nfs-client-%d-%d", (int)getpid(),
                 __atomic_fetch_add(&seq, 1, __ATOMIC_SEQ_CST));
        nfs4_set_client_name(nfs, id);
    }
    struct nfs_url *u = nfs_parse_url_dir(nfs, g_url);
    CHECK(u, "bad url %s: %s", g_url, nfs_get_error(nfs));
    int rc = nfs_mount(nfs, u->server, u->path);
    nfs_destroy_url(u);
    if (rc_out) {
        *rc_out = rc;
        if (rc) {
            nfs_destroy_context(nfs);
            return NULL;
        }
    } else {
        CHECK(rc == 0, "mount %s: %s", g_url, nfs_get_error(nfs));
    }
    return nfs;
}

/* Writes all of data at off, in pieces the protocol version can carry. */
static void pwrite_all(struct nfs_context *nfs, struct nfsfh *fh, uint64_t off, const void *data,
                       size_t len)
{
    size_t done = 0;
    while (done < len) {
        size_t want = len - done < g_wmax ? len - done : g_wmax;
        int n = nfs_pwrite(nfs, fh, off + done, want, (const char *)data + done);
        CHECK(n > 0, "write of %zu bytes at %" PRIu64 ": %s", want, off + done,
              nfs_get_error(nfs));
        done += (size_t)n;
    }
}

/* Opens path for writing, created or truncated; flags adds to O_WRONLY. */
static struct nfsfh *open_trunc(struct nfs_context *nfs, const char *path, int flags)
{
    struct nfsfh *fh;
    int rc = -ENOENT;
    if (g_v4) rc = nfs_open2(nfs, path, O_TRUNC | O_WRONLY | flags, 0644, &fh);
    if (rc == -ENOENT) rc = nfs_open2(nfs, path, O_CREAT | O_TRUNC | O_WRONLY | flags, 0644, &fh);
    CHECK(rc == 0, "open %s: %d (%s)", path, rc, nfs_get_error(nfs));
    return fh;
}

static void put_file(struct nfs_context *nfs, const char *path, const void *data, size_t len,
                     int flags)
{
    struct nfsfh *fh = open_trunc(nfs, path, flags);
    pwrite_all(nfs, fh, 0, data, len);
    EXPECT(nfs, nfs_close(nfs, fh), 0);
}

static size_t get_file(struct nfs_context *nfs, const char *path, void *buf, size_t cap)
{
    struct nfsfh *fh;
    EXPECT(nfs, nfs_open(nfs, path, O_RDONLY, &fh), 0);
    size_t off = 0;
    for (;;) {
        int n = nfs_pread(nfs, fh, off, cap - off, (char *)buf + off);
        CHECK(n >= 0, "read %s: %s", path, nfs_get_error(nfs));
        if (n == 0) break;
        off += (size_t)n;
        if (off == cap) break;
    }
    nfs_close(nfs, fh);
    return off;
}

static int count_entries(struct nfs_context *nfs, const char *dir, const char *want,
                         struct nfsdirent *found)
{
    struct nfsdir *d;
    EXPECT(nfs, nfs_opendir(nfs, dir, &d), 0);
    int n = 0;
    struct nfsdirent *e;
    while ((e = nfs_readdir(nfs, d))) {
        if (!strcmp(e->name, ".") || !strcmp(e->name, "..")) continue;
        n++;
        if (want && found && !strcmp(e->name, want)) *found = *e;
    }
    nfs_closedir(nfs, d);
    return n;
}

static void move_aside(struct nfs_context *nfs, const char *dir)
{
    char p[128];
    snprintf(p, sizeof p, "%s.old.%ld", dir, (long)getpid());
    nfs_rename(nfs, dir, p);
}

static void mode_basic(void)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfs_stat_64 st;
    move_aside(nfs, "/basic"); /* a rerun starts afresh */
    EXPECT(nfs, nfs_mkdir(nfs, "/basic"), 0);
    EXPECT(nfs, nfs_stat64(nfs, "/basic", &st), 0);
    CHECK(S_ISDIR(st.nfs_mode), "basic is not a directory");

    /* CREATE + WRITE + READ + GETATTR */
    const char *text = "the quick brown fox\n";
    put_file(nfs, "/basic/a.txt", text, strlen(text), 0);
    char buf[256] = "";
    size_t n = get_file(nfs, "/basic/a.txt", buf, sizeof buf);
    CHECK(n == strlen(text) && !memcmp(buf, text, n), "read back a.txt: '%.*s'", (int)n, buf);
    EXPECT(nfs, nfs_stat64(nfs, "/basic/a.txt", &st), 0);
    CHECK(st.nfs_size == strlen(text), "size %" PRIu64, (uint64_t)st.nfs_size);
    CHECK(S_ISREG(st.nfs_mode) && (st.nfs_mode & 0777) == 0644, "mode %o", (unsigned)st.nfs_mode);
    CHECK(st.nfs_nlink == 1, "nlink %" PRIu64, (uint64_t)st.nfs_nlink);

    /* SETATTR: chmod, truncate, utimes, chown to ourselves */
    EXPECT(nfs, nfs_chmod(nfs, "/basic/a.txt", 0600), 0);
    EXPECT(nfs, nfs_truncate(nfs, "/basic/a.txt", 4), 0);
    struct timeval tv[2] = {{1000000000, 0}, {1200000000, 0}};
    EXPECT(nfs, nfs_utimes(nfs, "/basic/a.txt", tv), 0);
    EXPECT(nfs, nfs_stat64(nfs, "/basic/a.txt", &st), 0);
    CHECK((st.nfs_mode & 0777) == 0600, "chmod: mode %o", (unsigned)st.nfs_mode);
    CHECK(st.nfs_size == 4, "truncate: size %" PRIu64, (uint64_t)st.nfs_size);
    CHECK(st.nfs_mtime == 1200000000 && st.nfs_atime == 1000000000, "utimes: %" PRIu64 " %" PRIu64,
          (uint64_t)st.nfs_mtime, (uint64_t)st.nfs_atime);
    EXPECT(nfs, nfs_chown(nfs, "/basic/a.txt", (int)st.nfs_uid, (int)st.nfs_gid), 0);

    /* ACCESS */
    EXPECT(nfs, nfs_access(nfs, "/basic/a.txt", R_OK | W_OK), 0);

    /* MKDIR, LINK, SYMLINK, READLINK, RENAME, READDIRPLUS */
    nfs_mkdir(nfs, "/basic/sub");
    EXPECT(nfs, nfs_link(nfs, "/basic/a.txt", "/basic/sub/hard"), 0);
    EXPECT(nfs, nfs_stat64(nfs, "/basic/a.txt", &st), 0);
    CHECK(st.nfs_nlink == 2, "link: nlink %" PRIu64, (uint64_t)st.nfs_nlink);
    EXPECT(nfs, nfs_symlink(nfs, "../a.txt", "/basic/sub/sym"), 0);
    char target[256] = "";
    EXPECT(nfs, nfs_readlink(nfs, "/basic/sub/sym", target, sizeof target), 0);
    CHECK(!strcmp(target, "../a.txt"), "readlink: '%s'", target);
    EXPECT(nfs, nfs_lstat64(nfs, "/basic/sub/sym", &st), 0);
    CHECK(S_ISLNK(st.nfs_mode), "symlink type %o", (unsigned)st.nfs_mode);
    EXPECT(nfs, nfs_rename(nfs, "/basic/sub/hard", "/basic/sub/hard2"), 0);
    struct nfsdirent de;
    memset(&de, 0, sizeof de);
    CHECK(count_entries(nfs, "/basic/sub", "hard2", &de) == 2, "sub should hold hard2 and sym");
    CHECK(de.size == 4 && de.nlink == 2, "readdirplus attributes: size %" PRIu64 " nlink %u",
          (uint64_t)de.size, (unsigned)de.nlink);

    /* MKNOD (a FIFO) */
    EXPECT(nfs, nfs_mknod(nfs, "/basic/sub/fifo", S_IFIFO | 0644, 0), 0);
    EXPECT(nfs, nfs_stat64(nfs, "/basic/sub/fifo", &st), 0);
    CHECK(S_ISFIFO(st.nfs_mode), "mknod type %o", (unsigned)st.nfs_mode);

    /* A directory with many entries: READDIRPLUS in several rounds. */
    nfs_mkdir(nfs, "/basic/many");
    for (int i = 0; i < 300; i++) {
        char p[64];
        snprintf(p, sizeof p, "/basic/many/file-with-a-longish-name-%04d", i);
        struct nfsfh *fh;
        EXPECT(nfs, nfs_creat(nfs, p, 0644, &fh), 0);
        nfs_close(nfs, fh);
    }
    CHECK(count_entries(nfs, "/basic/many", NULL, NULL) == 300, "many: wrong count");

    /* FSSTAT, and COMMIT through fsync of an unstable write */
    struct nfs_statvfs_64 sv;
    EXPECT(nfs, nfs_statvfs64(nfs, "/basic", &sv), 0);
    CHECK(sv.f_blocks > 0 && sv.f_bfree > 0, "statvfs");
    struct nfsfh *fh;
    EXPECT(nfs, nfs_open(nfs, "/basic/a.txt", O_WRONLY, &fh), 0);
    CHECK(nfs_pwrite(nfs, fh, 0, 4, "ABCD") == 4, "pwrite");
    EXPECT(nfs, nfs_fsync(nfs, fh), 0);
    EXPECT(nfs, nfs_fstat64(nfs, fh, &st), 0);
    nfs_close(nfs, fh);

    /* REMOVE, RMDIR */
    EXPECT(nfs, nfs_unlink(nfs, "/basic/sub/hard2"), 0);
    EXPECT(nfs, nfs_unlink(nfs, "/basic/sub/sym"), 0);
    EXPECT(nfs, nfs_unlink(nfs, "/basic/sub/fifo"), 0);
    EXPECT(nfs, nfs_rmdir(nfs, "/basic/sub"), 0);
    EXPECT(nfs, nfs_stat64(nfs, "/basic/a.txt", &st), 0);
    CHECK(st.nfs_nlink == 1, "after unlink of the hard link: nlink %" PRIu64, (uint64_t)st.nfs_nlink);

    /* ESXi-style lock file: create, heartbeat (GETATTR), rename over, remove */
    char lck[64];
    snprintf(lck, sizeof lck, "/basic/.lck-%016" PRIx64, (uint64_t)st.nfs_ino);
    put_file(nfs, lck, "lock", 4, O_SYNC);
    for (int i = 0; i < 5; i++) EXPECT(nfs, nfs_stat64(nfs, lck, &st), 0);
    put_file(nfs, "/basic/.lck-new", "lk2", 3, O_SYNC);
    EXPECT(nfs, nfs_rename(nfs, "/basic/.lck-new", lck), 0);
    EXPECT(nfs, nfs_stat64(nfs, lck, &st), 0);
    CHECK(st.nfs_size == 3, ".lck rename over: size %" PRIu64, (uint64_t)st.nfs_size);
    EXPECT(nfs, nfs_unlink(nfs, lck), 0);

    nfs_destroy_context(nfs);
    printf("basic ok\n");
}

static void mode_errors(void)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfs_stat_64 st;
    struct nfsfh *fh;
    move_aside(nfs, "/err");
    EXPECT(nfs, nfs_mkdir(nfs, "/err"), 0);
    EXPECT(nfs, nfs_stat64(nfs, "/err/nope", &st), -ENOENT);
    EXPECT(nfs, nfs_open(nfs, "/err/nope", O_RDONLY, &fh), -ENOENT);
    EXPECT(nfs, nfs_mkdir(nfs, "/err/d"), 0);
    EXPECT(nfs, nfs_mkdir(nfs, "/err/d"), -EEXIST);
    put_file(nfs, "/err/d/f", "x", 1, 0);
    EXPECT(nfs, nfs_rmdir(nfs, "/err/d"), -ENOTEMPTY);
    EXPECT(nfs, nfs_open2(nfs, "/err/d/f", O_CREAT | O_EXCL | O_WRONLY, 0644, &fh), -EEXIST);
    EXPECT(nfs, nfs_mkdir(nfs, "/err/d/f/x"), -ENOTDIR);
    EXPECT(nfs, nfs_unlink(nfs, "/err/d"), -EISDIR);
    EXPECT(nfs, nfs_rmdir(nfs, "/err/d/f"), -ENOTDIR);
    EXPECT(nfs, nfs_rename(nfs, "/err/nope", "/err/x"), -ENOENT);
    EXPECT(nfs, nfs_link(nfs, "/err/d", "/err/dlink"), -EPERM);
    char longname[300];
    memset(longname, 'n', sizeof longname);
    longname[0] = '/';
    longname[sizeof longname - 1] = '\0';
    char p[320];
    snprintf(p, sizeof p, "/err%s", longname);
    EXPECT(nfs, nfs_mkdir(nfs, p), -ENAMETOOLONG);
    /* rename a directory into itself */
    EXPECT(nfs, nfs_mkdir(nfs, "/err/d/inner"), 0);
    EXPECT(nfs, nfs_rename(nfs, "/err/d", "/err/d/inner/x"), -EINVAL);

    /* Permission checks as another user: a 0700 directory of ours is closed. */
    EXPECT(nfs, nfs_mkdir(nfs, "/err/private"), 0);
    EXPECT(nfs, nfs_chmod(nfs, "/err/private", 0700), 0);
    put_file(nfs, "/err/ro.txt", "ro", 2, 0);
    EXPECT(nfs, nfs_chmod(nfs, "/err/ro.txt", 0444), 0);
    EXPECT(nfs, nfs_chmod(nfs, "/err", 0755), 0);
    struct nfs_context *other = connect_ctx(NULL);
    nfs_set_uid(other, 4242);
    nfs_set_gid(other, 4242);
    EXPECT(other, nfs_mkdir(other, "/err/private/x"), -EACCES);
    EXPECT(other, nfs_stat64(other, "/err/private/x", &st), -EACCES);
    EXPECT(other, nfs_mkdir(other, "/err/x4242"), -EACCES);
    EXPECT(other, nfs_open(other, "/err/ro.txt", O_WRONLY, &fh), -EACCES);
    EXPECT(other, nfs_chmod(other, "/err/ro.txt", 0666), -EPERM);
    EXPECT(other, nfs_unlink(other, "/err/ro.txt"), -EACCES);
    EXPECT(other, nfs_access(other, "/err/ro.txt", W_OK), -EACCES);
    EXPECT(other, nfs_access(other, "/err/ro.txt", R_OK), 0);
    nfs_destroy_context(other);

    /* A handle of a removed file is stale. */
    put_file(nfs, "/err/gone", "bye", 3, 0);
    EXPECT(nfs, nfs_open(nfs, "/err/gone", O_RDONLY, &fh), 0);
    EXPECT(nfs, nfs_unlink(nfs, "/err/gone"), 0);
    EXPECT(nfs, nfs_fstat64(nfs, fh, &st), -ESTALE);
    nfs_close(nfs, fh);

    nfs_destroy_context(nfs);
    printf("errors ok\n");
}

static void mode_denied(void)
{
    int rc = 0;
    struct nfs_context *nfs = connect_ctx(&rc);
    CHECK(!nfs && rc != 0, "mount of %s succeeded for a client the export excludes", g_url);
    printf("denied ok (%d)\n", rc);
}

static void mode_rofs(void)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfs_stat_64 st;
    struct nfsfh *fh;
    char buf[64];
    EXPECT(nfs, nfs_stat64(nfs, "/", &st), 0);
    size_t n = get_file(nfs, "/ro-probe", buf, sizeof buf);
    CHECK(n == 6 && !memcmp(buf, "probe\n", 6), "read on a read-only export");
    EXPECT(nfs, nfs_mkdir(nfs, "/newdir"), -EROFS);
    EXPECT(nfs, nfs_open2(nfs, "/newfile", O_CREAT | O_WRONLY, 0644, &fh), -EROFS);
    EXPECT(nfs, nfs_unlink(nfs, "/ro-probe"), -EROFS);
    EXPECT(nfs, nfs_chmod(nfs, "/ro-probe", 0600), -EROFS);
    /* libnfs asks ACCESS before opening for write; the raw prober checks WRITE itself. */
    EXPECT(nfs, nfs_open(nfs, "/ro-probe", O_WRONLY, &fh), -EACCES);
    EXPECT(nfs, nfs_access(nfs, "/ro-probe", W_OK), -EACCES);
    nfs_destroy_context(nfs);
    printf("rofs ok\n");
}

static void fill(uint8_t *b, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(b + i, &x, len - i < 8 ? len - i : 8);
    }
}

static void mode_big(void)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    /* libnfs asks FSINFO over v3 only; over v4 the 1 MiB READs below show it. */
    CHECK(g_v4 || nfs_get_readmax(nfs) >= 1048576, "readmax %" PRIu64 " (FSINFO rtmax)",
          nfs_get_readmax(nfs));
    const size_t mib = 1 << 20;
    uint8_t *w = malloc(mib), *r = malloc(mib);
    struct nfsfh *fh;
    if (g_v4) {
        /* OPEN with O_RDWR: a new name through libnfs's EXCLUSIVE4 create. */
        nfs_unlink(nfs, "/big");
        EXPECT(nfs, nfs_open2(nfs, "/big", O_CREAT | O_RDWR, 0644, &fh), 0);
    } else {
        EXPECT(nfs, nfs_open2(nfs, "/big", O_CREAT | O_TRUNC | O_RDWR, 0644, &fh), 0);
    }
    const uint64_t base = 5ull << 30; /* past 4 GiB */
    for (int i = 0; i < 4; i++) {
        fill(w, mib, (uint64_t)i);
        pwrite_all(nfs, fh, base + (uint64_t)i * mib, w, mib);
    }
    fill(w, 4096, 99);
    pwrite_all(nfs, fh, 4096, w, 4096);
    EXPECT(nfs, nfs_fsync(nfs, fh), 0);
    struct nfs_stat_64 st;
    EXPECT(nfs, nfs_fstat64(nfs, fh, &st), 0);
    CHECK(st.nfs_size == base + 4 * mib, "size %" PRIu64, (uint64_t)st.nfs_size);
    for (int i = 0; i < 4; i++) {
        fill(w, mib, (uint64_t)i);
        CHECK(nfs_pread(nfs, fh, base + (uint64_t)i * mib, mib, r) == (int)mib, "1 MiB read %d", i);
        CHECK(!memcmp(w, r, mib), "1 MiB read %d: data differs", i);
    }
    /* A hole reads as zeros; the low block has its data. */
    CHECK(nfs_pread(nfs, fh, 3ull << 30, 65536, r) == 65536, "hole read");
    for (int i = 0; i < 65536; i++) CHECK(r[i] == 0, "hole byte %d is %u", i, r[i]);
    fill(w, 4096, 99);
    CHECK(nfs_pread(nfs, fh, 4096, 4096, r) == 4096 && !memcmp(w, r, 4096), "low block");
    /* Reading at and past the end: 0 bytes. */
    CHECK(nfs_pread(nfs, fh, base + 4 * mib, 4096, r) == 0, "read at eof");
    nfs_close(nfs, fh);
    EXPECT(nfs, nfs_unlink(nfs, "/big"), 0);
    free(w);
    free(r);
    nfs_destroy_context(nfs);
    printf("big ok\n");
}

static int g_fail;

static void *worker(void *arg)
{
    long id = (long)arg;
    struct nfs_context *nfs = connect_ctx(NULL);
    const size_t len = 256 * 1024;
    uint8_t *w = malloc(len), *r = malloc(len);
    char p[64];
    snprintf(p, sizeof p, "/conc-%ld", id);
    for (int round = 0; round < 4; round++) {
        fill(w, len, (uint64_t)id * 100 + (uint64_t)round);
        put_file(nfs, p, w, len, 0);
        size_t n = get_file(nfs, p, r, len);
        if (n != len || memcmp(w, r, len)) {
            fprintf(stderr, "FAIL: client %ld round %d: data differs\n", id, round);
            __atomic_store_n(&g_fail, 1, __ATOMIC_SEQ_CST);
        }
        struct nfs_stat_64 st;
        if (nfs_stat64(nfs, "/", &st)) __atomic_store_n(&g_fail, 1, __ATOMIC_SEQ_CST);
    }
    nfs_unlink(nfs, p);
    free(w);
    free(r);
    nfs_destroy_context(nfs);
    return NULL;
}

static void mode_concurrent(int n)
{
    pthread_t *t = calloc((size_t)n, sizeof *t);
    for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    free(t);
    CHECK(!g_fail, "a concurrent client failed");
    printf("concurrent %d ok\n", n);
}

#define REC 65536

static void mode_syncwrite(const char *name)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfsfh *fh;
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    fh = open_trunc(nfs, p, O_SYNC);
    uint8_t *w = malloc(REC);
    for (uint64_t i = 0;; i++) {
        fill(w, REC, i);
        pwrite_all(nfs, fh, i * REC, w, REC);
        printf("%" PRIu64 "\n", i);
        fflush(stdout);
    }
}

static uint64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* One FILE_SYNC record written whole, or false with the connection left to the caller. */
static bool try_write_record(struct nfs_context *nfs, struct nfsfh *fh, uint64_t i,
                             const uint8_t *w)
{
    for (size_t done = 0; done < REC;) {
        size_t want = REC - done < g_wmax ? REC - done : g_wmax;
        int n = nfs_pwrite(nfs, fh, i * REC + done, want, (const char *)w + done);
        if (n <= 0) return false;
        done += (size_t)n;
    }
    return true;
}

/* A client of a clustered service: the address may move to the other head under
 * it, so a failed request (connection reset, server gone) is not an error but a
 * reason to reconnect and send the same record again. Each request has a deadline
 * so a connection to a dead head cannot hang the client. */
/* CAIRN_HAWRITE_PACE_MS: a pause after each acknowledged record, so a writer that
 * runs for minutes stays within its pool on a fast machine (0: none). */
static void hawrite_pace(void)
{
    const char *v = getenv("CAIRN_HAWRITE_PACE_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms > 0) usleep((useconds_t)ms * 1000);
}

static void mode_hawrite(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    struct nfs_context *nfs = connect_ctx(NULL);
    nfs_set_timeout(nfs, 5000);
    struct nfsfh *fh = open_trunc(nfs, p, O_SYNC);
    uint8_t *w = malloc(REC);
    for (uint64_t i = 0;; i++) {
        fill(w, REC, i);
        while (!try_write_record(nfs, fh, i, w)) {
            fprintf(stderr, "retry record %" PRIu64 " at %" PRIu64 " ms: %s\n", i, wall_ms(),
                    nfs_get_error(nfs) ? nfs_get_error(nfs) : "?");
            nfs_destroy_context(nfs); /* the handle goes with its context */
            int rc;
            for (;;) {
                usleep(200 * 1000);
                nfs = connect_ctx(&rc);
                if (!nfs) continue;
                nfs_set_timeout(nfs, 5000);
                if (nfs_open2(nfs, p, O_WRONLY | O_SYNC, 0644, &fh) == 0) break;
                nfs_destroy_context(nfs);
            }
        }
        printf("%" PRIu64 " %" PRIu64 "\n", i, wall_ms());
        fflush(stdout);
        hawrite_pace();
    }
}

/* Unstable writes made durable by COMMIT: prints the index of every record once a
 * COMMIT covering it has been answered (so the caller may count it acknowledged). */
static void mode_commitwrite(const char *name)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfsfh *fh;
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    fh = open_trunc(nfs, p, 0);
    uint8_t *w = malloc(REC);
    const uint64_t per_commit = 4;
    for (uint64_t i = 0;; i++) {
        fill(w, REC, i);
        pwrite_all(nfs, fh, i * REC, w, REC);
        if (i % per_commit != per_commit - 1) continue;
        CHECK(nfs_fsync(nfs, fh) == 0, "commit after %" PRIu64 ": %s", i, nfs_get_error(nfs));
        for (uint64_t k = i + 1 - per_commit; k <= i; k++) printf("%" PRIu64 "\n", k);
        fflush(stdout);
    }
}

static void mode_stream(const char *name, uint64_t mib, uint64_t wkib, uint64_t cmib)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    struct nfsfh *fh = open_trunc(nfs, p, cmib ? 0 : O_SYNC);
    size_t w = (size_t)wkib * 1024;
    CHECK(w > 0 && w <= g_wmax, "write size %zu", w);
    uint8_t *b = malloc(w);
    uint64_t total = mib << 20, since = 0;
    for (uint64_t off = 0; off < total; off += w) {
        fill(b, w, off / w);
        pwrite_all(nfs, fh, off, b, w);
        since += w;
        if (cmib && since >= (cmib << 20)) {
            CHECK(nfs_fsync(nfs, fh) == 0, "commit: %s", nfs_get_error(nfs));
            since = 0;
        }
    }
    CHECK(nfs_fsync(nfs, fh) == 0, "commit: %s", nfs_get_error(nfs));
    nfs_close(nfs, fh);
    nfs_destroy_context(nfs);
    free(b);
    printf("%" PRIu64 "\n", total);
}

static void mode_verify(const char *name, uint64_t n)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfsfh *fh;
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    EXPECT(nfs, nfs_open(nfs, p, O_RDONLY, &fh), 0);
    uint8_t *w = malloc(REC), *r = malloc(REC);
    for (uint64_t i = 0; i < n; i++) {
        fill(w, REC, i);
        int got = nfs_pread(nfs, fh, i * REC, REC, r);
        CHECK(got == REC, "record %" PRIu64 ": read %d", i, got);
        CHECK(!memcmp(w, r, REC), "record %" PRIu64 " (acknowledged) differs", i);
    }
    nfs_close(nfs, fh);
    nfs_destroy_context(nfs);
    free(w);
    free(r);
    printf("verify %" PRIu64 " ok\n", n);
}

struct wait_status {
    int status;
    bool done;
};

static void wait_status_cb(int status, struct nfs_context *nfs, void *data, void *priv)
{
    (void)nfs;
    (void)data;
    struct wait_status *w = priv;
    w->status = status;
    w->done = true;
}

/* One WRITE through the asynchronous API, whose callback carries the errno of
 * the server's status (libnfs 4.0's nfs_pwrite reports every failure as a
 * bare -EFAULT): bytes written or -errno. */
static int pwrite_status(struct nfs_context *nfs, struct nfsfh *fh, uint64_t off, size_t n,
                         const void *buf)
{
    struct wait_status w = {0};
    if (nfs_pwrite_async(nfs, fh, off, n, buf, wait_status_cb, &w) != 0) return -EIO;
    while (!w.done) {
        struct pollfd pfd = {.fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs)};
        if (poll(&pfd, 1, 30000) <= 0) return -ETIMEDOUT;
        if (nfs_service(nfs, pfd.revents) < 0) return -EIO;
    }
    return w.status;
}

/* Incompressible bytes (lz4 must not shrink them), different for every offset. */
static void fill_random(uint8_t *b, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(b + i, &x, 8);
    }
}

static void mode_fill(const char *name, uint64_t bytes)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    struct nfsfh *fh;
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    fh = open_trunc(nfs, p, 0);
    /* One WRITE per call: libnfs reports a failed piece of a split write as a bare -EFAULT. */
    size_t chunk = g_wmax;
    if (nfs_get_writemax(nfs) && nfs_get_writemax(nfs) < chunk) chunk = nfs_get_writemax(nfs);
    uint8_t *w = malloc(chunk);
    uint64_t done = 0;
    int err = 0;
    while (done < bytes) {
        size_t n = (size_t)CAIRN_FILL_MIN(chunk, bytes - done);
        fill_random(w, n, done / chunk + 1 + (uint64_t)getpid() * 1000003ULL);
        int got = pwrite_status(nfs, fh, done, n, w);
        if (got < 0) {
            err = got;
            break;
        }
        done += (uint64_t)got;
    }
    if (!err) err = nfs_fsync(nfs, fh);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", err ? nfs_get_error(nfs) : "");
    nfs_close(nfs, fh);
    nfs_destroy_context(nfs);
    free(w);
    /* libnfs reports a WRITE's NFS3ERR_NOSPC/DQUOT as -EFAULT with the status in its message. */
    bool nospc = err == -ENOSPC || strstr(msg, "NOSPC"), dquot = err == -EDQUOT || strstr(msg, "DQUOT");
    if (nospc || dquot) {
        printf("%s %" PRIu64 "\n", nospc ? "ENOSPC" : "EDQUOT", done);
        exit(3);
    }
    CHECK(err == 0, "fill %s at %" PRIu64 ": %d (%s)", name, done, err, msg);
    printf("fill %" PRIu64 "\n", done);
}

static void mode_rm(const char *name)
{
    struct nfs_context *nfs = connect_ctx(NULL);
    char p[256];
    snprintf(p, sizeof p, "/%s", name);
    int err = nfs_unlink(nfs, p);
    nfs_destroy_context(nfs);
    if (err == -ENOENT) exit(4);
    CHECK(err == 0, "remove %s: %s", name, strerror(-err));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nfs_client URL MODE [ARGS]\n");
        return 2;
    }
    g_url = argv[1];
    g_v4 = strstr(g_url, "version=4") != NULL;
    if (g_v4) g_wmax = V4_WRITE_MAX;
    const char *mode = argv[2];
    if (!strcmp(mode, "basic")) mode_basic();
    else if (!strcmp(mode, "errors")) mode_errors();
    else if (!strcmp(mode, "denied")) mode_denied();
    else if (!strcmp(mode, "rofs")) mode_rofs();
    else if (!strcmp(mode, "big")) mode_big();
    else if (!strcmp(mode, "concurrent") && argc > 3) mode_concurrent(atoi(argv[3]));
    else if (!strcmp(mode, "syncwrite") && argc > 3) mode_syncwrite(argv[3]);
    else if (!strcmp(mode, "hawrite") && argc > 3) mode_hawrite(argv[3]);
    else if (!strcmp(mode, "commitwrite") && argc > 3) mode_commitwrite(argv[3]);
    else if (!strcmp(mode, "stream") && argc > 6)
        mode_stream(argv[3], strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
                    strtoull(argv[6], NULL, 10));
    else if (!strcmp(mode, "verify") && argc > 4) mode_verify(argv[3], strtoull(argv[4], NULL, 10));
    else if (!strcmp(mode, "fill") && argc > 4) mode_fill(argv[3], strtoull(argv[4], NULL, 0));
    else if (!strcmp(mode, "rm") && argc > 3) mode_rm(argv[3]);
    else if (!strcmp(mode, "put") && argc > 4) {
        struct nfs_context *nfs = connect_ctx(NULL);
        char p[256];
        snprintf(p, sizeof p, "/%s", argv[3]);
        put_file(nfs, p, argv[4], strlen(argv[4]), 0);
        nfs_destroy_context(nfs);
    } else if (!strcmp(mode, "get") && argc > 3) {
        struct nfs_context *nfs = connect_ctx(NULL);
        char p[256], buf[4096];
        snprintf(p, sizeof p, "/%s", argv[3]);
        size_t n = get_file(nfs, p, buf, sizeof buf);
        fwrite(buf, 1, n, stdout);
        nfs_destroy_context(nfs);
    } else if (!strcmp(mode, "putfile") && argc > 4) {
        struct nfs_context *nfs = connect_ctx(NULL);
        char p[256];
        snprintf(p, sizeof p, "/%s", argv[3]);
        FILE *f = fopen(argv[4], "rb");
        CHECK(f != NULL, "cannot open %s", argv[4]);
        /* The whole file, however large, in pieces of the buffer's size. */
        static uint8_t data[16 << 20];
        struct nfsfh *fh = open_trunc(nfs, p, 0);
        uint64_t off = 0;
        size_t n;
        while ((n = fread(data, 1, sizeof data, f)) > 0) {
            pwrite_all(nfs, fh, off, data, n);
            off += n;
        }
        CHECK(!ferror(f), "cannot read %s", argv[4]);
        fclose(f);
        EXPECT(nfs, nfs_close(nfs, fh), 0);
        nfs_destroy_context(nfs);
    } else if (!strcmp(mode, "symlink") && argc > 4) {
        struct nfs_context *nfs = connect_ctx(NULL);
        char p[256];
        snprintf(p, sizeof p, "/%s", argv[4]);
        EXPECT(nfs, nfs_symlink(nfs, argv[3], p), 0);
        nfs_destroy_context(nfs);
    } else if (!strcmp(mode, "mkdir") && argc > 3) {
        struct nfs_context *nfs = connect_ctx(NULL);
        char p[256];
        snprintf(p, sizeof p, "/%s", argv[3]);
        EXPECT(nfs, nfs_mkdir(nfs, p), 0);
        nfs_destroy_context(nfs);
    } else if (!strcmp(mode, "readerr") && argc > 3) {
        struct nfs_context *nfs = connect_ctx(NULL);
        struct nfsfh *fh;
        char p[256];
        snprintf(p, sizeof p, "/%s", argv[3]);
        EXPECT(nfs, nfs_open(nfs, p, O_RDONLY, &fh), 0);
        uint8_t *r = malloc(REC);
        uint64_t off = 0;
        int got;
        while ((got = nfs_pread(nfs, fh, off, REC, r)) > 0) off += (uint64_t)got;
        CHECK(got < 0, "read of %s to its end (%" PRIu64 " bytes) did not fail", p, off);
        printf("READ error at %" PRIu64 "\n", off);
        nfs_close(nfs, fh);
        nfs_destroy_context(nfs);
        free(r);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
