/* NFSv4.0 end to end inside one process: a real server (transport, exports,
 * NFSv4) on a fixture pool, driven by libnfs's NFSv4 client. Proves the
 * pseudo-root path to an export, create/write/read back, readdir, mkdir,
 * rename, remove, symlinks, ENOENT/EEXIST/ENOTEMPTY, permission checks with
 * squashed and unprivileged users, byte-range lock conflicts between two
 * clients, and that a read-only export refuses writes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/dsl/dsl_impl.h"
#include "../../src/nfs/nfs_srv.h"
#include "../../src/nfs/nfs4_impl.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "lock_holder.h"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <nfsc/libnfs.h>

/* libnfs's client keeps a few allocations past nfs_destroy_context (its own
 * bookkeeping, not the server's): keep LeakSanitizer on everything else. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libnfs.so\n";
}

static zfix_t fix;
static nfs_server_t *srv;
static uint16_t port;

static struct nfs_context *client(const char *path, int uid)
{
    struct nfs_context *nfs = nfs_init_context();
    assert_non_null(nfs);
    /* Each context is its own NFSv4 client (libnfs would name them alike). */
    static int seq;
    char id[64];
    snprintf(id, sizeof id, "cairn-test-%d-%d", (int)getpid(), seq++);
    nfs4_set_client_name(nfs, id);
    char url[512];
    snprintf(url, sizeof url, "nfs://127.0.0.1%s?version=4&nfsport=%u&uid=%d&gid=%d", path,
             (unsigned)port, uid, uid);
    struct nfs_url *u = nfs_parse_url_dir(nfs, url);
    if (!u) fail_msg("url %s: %s", url, nfs_get_error(nfs));
    int rc = nfs_mount(nfs, u->server, u->path);
    if (rc) fail_msg("mount %s: %d %s", path, rc, nfs_get_error(nfs));
    nfs_destroy_url(u);
    return nfs;
}

static int setup(void **state)
{
    (void)state;
    zfix_make(&fix, "nfs4", 256ull << 20);
    zfix_unmount(&fix);
    nfs_server_config_t cfg = { 0 };
    strcpy(cfg.nfs.host, "127.0.0.1");
    char err[256];
    /* A port of our own: a few tries in case another test holds one. */
    int rc = -1;
    for (int i = 0; i < 20 && rc; i++) {
        cfg.nfs.port = (uint16_t)(30000 + (getpid() * 7 + i * 131) % 30000);
        rc = nfs_server_start(&cfg, &srv, err, sizeof err);
    }
    if (rc) fail_msg("nfs_server_start: %s", err);
    assert_int_equal(nfs_server_export(srv, fix.dp, fix.fsname, "/tank/share",
                                       "rw,no_root_squash", err, sizeof err), 0);
    uint16_t m, p;
    nfs_server_ports(srv, &port, &m, &p);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nfs_server_stop(srv);
    char path[800];
    snprintf(path, sizeof path, "%s/nfs4state/nfs4-clients", fix.dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/nfs4state", fix.dir);
    rmdir(path);
    zfix_destroy(&fix);
    return 0;
}

static void write_file(struct nfs_context *nfs, const char *path, const char *data)
{
    struct nfsfh *fh;
    int rc = nfs_open2(nfs, path, O_CREAT | O_WRONLY | O_TRUNC, 0644, &fh);
    if (rc) fail_msg("open %s: %d %s", path, rc, nfs_get_error(nfs));
    rc = nfs_pwrite(nfs, fh, 0, strlen(data), data);
    if (rc != (int)strlen(data)) fail_msg("write %s: %d %s", path, rc, nfs_get_error(nfs));
    assert_int_equal(nfs_close(nfs, fh), 0);
}

static void expect_content(struct nfs_context *nfs, const char *path, const char *data)
{
    struct nfsfh *fh;
    int rc = nfs_open(nfs, path, O_RDONLY, &fh);
    if (rc) fail_msg("open %s: %d %s", path, rc, nfs_get_error(nfs));
    char buf[4096] = "";
    rc = nfs_pread(nfs, fh, 0, sizeof buf - 1, buf);
    if (rc < 0) fail_msg("read %s: %d %s", path, rc, nfs_get_error(nfs));
    buf[rc] = 0;
    assert_string_equal(buf, data);
    assert_int_equal(nfs_close(nfs, fh), 0);
}

static void test_files(void **state)
{
    (void)state;
    struct nfs_context *nfs = client("/tank/share", 0);
    write_file(nfs, "/hello.txt", "hello, nfs4\n");
    expect_content(nfs, "/hello.txt", "hello, nfs4\n");
    /* libnfs sends O_CREAT as EXCLUSIVE4: an existing file with another
     * verifier is EEXIST, as RFC 7530 says. */
    struct nfsfh *again;
    assert_int_equal(nfs_open2(nfs, "/hello.txt", O_CREAT | O_RDWR, 0644, &again), -EEXIST);
    struct nfs_stat_64 stt;
    assert_int_equal(nfs_stat64(nfs, "/hello.txt", &stt), 0);
    assert_int_equal(stt.nfs_size, 12);
    assert_int_equal(stt.nfs_mode & 0777, 0644);

    assert_int_equal(nfs_mkdir(nfs, "/dir"), 0);
    assert_int_equal(nfs_mkdir(nfs, "/dir"), -EEXIST);
    write_file(nfs, "/dir/a", "A");
    assert_int_equal(nfs_rename(nfs, "/dir/a", "/dir/b"), 0);
    expect_content(nfs, "/dir/b", "A");
    assert_int_equal(nfs_stat64(nfs, "/dir/a", &stt), -ENOENT);
    assert_int_equal(nfs_rmdir(nfs, "/dir"), -ENOTEMPTY);

    struct nfsdir *d;
    assert_int_equal(nfs_opendir(nfs, "/dir", &d), 0);
    int n = 0;
    for (struct nfsdirent *e; (e = nfs_readdir(nfs, d));) {
        if (!strcmp(e->name, "b")) n++;
    }
    nfs_closedir(nfs, d);
    assert_int_equal(n, 1);

    assert_int_equal(nfs_symlink(nfs, "b", "/dir/link"), 0);
    char target[64] = "";
    assert_int_equal(nfs_readlink(nfs, "/dir/link", target, sizeof target), 0);
    assert_string_equal(target, "b");
    assert_int_equal(nfs_unlink(nfs, "/dir/link"), 0);
    assert_int_equal(nfs_unlink(nfs, "/dir/b"), 0);
    assert_int_equal(nfs_rmdir(nfs, "/dir"), 0);
    assert_int_equal(nfs_unlink(nfs, "/nope"), -ENOENT);

    /* Many small writes then one read of the whole. */
    struct nfsfh *fh;
    assert_int_equal(nfs_open2(nfs, "/big", O_CREAT | O_RDWR, 0600, &fh), 0);
    char chunk[3000];
    for (int i = 0; i < 20; i++) {
        memset(chunk, 'a' + i, sizeof chunk);
        assert_int_equal(nfs_pwrite(nfs, fh, (uint64_t)i * sizeof chunk, sizeof chunk, chunk),
                         (int)sizeof chunk);
    }
    assert_int_equal(nfs_fsync(nfs, fh), 0);
    static char all[60000];
    int got = 0;
    while (got < (int)sizeof all) {
        int rc = nfs_pread(nfs, fh, (uint64_t)got, sizeof all - (size_t)got, all + got);
        assert_true(rc > 0);
        got += rc;
    }
    for (int i = 0; i < 20; i++) assert_int_equal(all[i * 3000 + 17], 'a' + i);
    assert_int_equal(nfs_close(nfs, fh), 0);
    nfs_destroy_context(nfs);
}

static void test_permissions(void **state)
{
    (void)state;
    struct nfs_context *root = client("/tank/share", 0);
    assert_int_equal(nfs_mkdir2(root, "/private", 0700), 0);
    write_file(root, "/private/secret", "x");
    write_file(root, "/rootonly", "r");
    assert_int_equal(nfs_chmod(root, "/rootonly", 0600), 0);

    struct nfs_context *user = client("/tank/share", 1000);
    struct nfsfh *fh;
    assert_int_equal(nfs_open(user, "/rootonly", O_RDONLY, &fh), -EACCES);
    assert_int_equal(nfs_open2(user, "/private/new", O_CREAT | O_WRONLY, 0644, &fh), -EACCES);
    assert_int_equal(nfs_unlink(user, "/rootonly"), -EACCES);
    assert_true(nfs_chmod(user, "/hello.txt", 0666) < 0);
    nfs_destroy_context(user);
    nfs_destroy_context(root);
}

static void test_locks(void **state)
{
    (void)state;
    struct nfs_context *a = client("/tank/share", 0), *b = client("/tank/share", 0);
    write_file(a, "/locked", "0123456789");
    struct nfsfh *fa, *fb;
    assert_int_equal(nfs_open(a, "/locked", O_RDWR, &fa), 0);
    assert_int_equal(nfs_open(b, "/locked", O_RDWR, &fb), 0);
    struct nfs4_flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 5 };
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    struct nfs4_flock fl2 = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 3, .l_len = 4 };
    assert_true(nfs_fcntl(b, fb, NFS4_F_SETLK, &fl2) < 0);
    /* A range that does not overlap is fine. */
    struct nfs4_flock fl3 = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 5, .l_len = 5 };
    assert_int_equal(nfs_fcntl(b, fb, NFS4_F_SETLK, &fl3), 0);
    fl.l_type = F_UNLCK;
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    fl2.l_len = 2;
    assert_int_equal(nfs_fcntl(b, fb, NFS4_F_SETLK, &fl2), 0);
    assert_int_equal(nfs_close(a, fa), 0);
    assert_int_equal(nfs_close(b, fb), 0);
    nfs_destroy_context(a);
    nfs_destroy_context(b);
}

static void test_pseudo_root(void **state)
{
    (void)state;
    /* Mounting the pseudo directory /tank shows the export below it. */
    struct nfs_context *nfs = client("/tank", 0);
    struct nfsdir *d;
    assert_int_equal(nfs_opendir(nfs, "/", &d), 0);
    bool seen = false;
    for (struct nfsdirent *e; (e = nfs_readdir(nfs, d));)
        if (!strcmp(e->name, "share")) seen = true;
    nfs_closedir(nfs, d);
    assert_true(seen);
    struct nfsfh *fh;
    assert_int_equal(nfs_open2(nfs, "/newfile", O_CREAT | O_WRONLY, 0644, &fh), -EROFS);
    nfs_destroy_context(nfs);
}

/* ---- raw COMPOUNDs straight into nfs4_program ---- */

typedef struct raw {
    nfs_xdr_t args, res;
    nfs_accept_t accept;
    nfs_xdr_t d;   /* decoder over res */
    bool memory;   /* run as the transport's I/O thread runs it (memory_only) */
    bool would_block;
} raw_t;

static void raw_begin(raw_t *r, uint32_t minor, uint32_t numops)
{
    memset(r, 0, sizeof *r);
    nfs_xdr_init_encode(&r->args, 256);
    nfs_xdr_put_string(&r->args, "t");
    nfs_xdr_put_u32(&r->args, minor);
    nfs_xdr_put_u32(&r->args, numops);
}

static void raw_call_bytes(raw_t *r, const void *buf, size_t len)
{
    nfs_call_t call;
    memset(&call, 0, sizeof call);
    call.srv = srv;
    struct sockaddr_in *sin = (struct sockaddr_in *)&call.peer;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    call.peer_len = sizeof *sin;
    call.prog = 100003;
    call.vers = 4;
    call.proc = 1;
    call.flavor = NFS_AUTH_SYS;
    call.machine_name = "test";
    nfs_xdr_init_decode(&call.args, buf, len);
    nfs_xdr_init_encode(&r->res, 256);
    call.res = &r->res;
    call.memory_only = r->memory;
    if (r->memory) spa_memory_only_begin();
    r->accept = nfs4_program(&call);
    r->would_block = (r->memory && spa_memory_only_end()) || call.would_block;
    nfs_xdr_init_decode(&r->d, r->res.buf, r->res.len);
}

static void raw_call(raw_t *r)
{
    raw_call_bytes(r, r->args.buf, r->args.len);
}

/* Compound status, skipping the tag and numres (returned in *numres). */
static uint32_t raw_status(raw_t *r, uint32_t *numres)
{
    uint32_t st = nfs_xdr_get_u32(&r->d), len;
    nfs_xdr_get_opaque(&r->d, &len, 1024);
    uint32_t n = nfs_xdr_get_u32(&r->d);
    if (numres) *numres = n;
    return st;
}

static void raw_free(raw_t *r)
{
    nfs_xdr_free(&r->args);
    nfs_xdr_free(&r->res);
}

static void test_compound_garbage(void **state)
{
    (void)state;
    raw_t r = {0}; /* raw_call_bytes alone leaves args as they are: freed below */
    uint32_t n;
    /* A header cut short is GARBAGE_ARGS. */
    const uint8_t shortargs[] = { 0, 0, 0, 1, 't', 0, 0, 0, 0, 0 };
    raw_call_bytes(&r, shortargs, sizeof shortargs);
    assert_int_equal(r.accept, NFS_ACCEPT_GARBAGE_ARGS);
    raw_free(&r);
    /* Minor version 3 does not exist. */
    raw_begin(&r, 3, 1);
    nfs_xdr_put_u32(&r.args, 24);
    raw_call(&r);
    assert_int_equal(r.accept, NFS_ACCEPT_SUCCESS);
    assert_int_equal(raw_status(&r, &n), 10021);
    assert_int_equal(n, 0);
    raw_free(&r);
    /* An unknown operation: OP_ILLEGAL answered under opcode OP_ILLEGAL, and it stops. */
    raw_begin(&r, 0, 2);
    nfs_xdr_put_u32(&r.args, 9999);
    nfs_xdr_put_u32(&r.args, 24);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10044);
    assert_int_equal(n, 1);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 10044);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 10044);
    raw_free(&r);
    /* Too many operations for 4.0. */
    raw_begin(&r, 0, 100000);
    nfs_xdr_put_u32(&r.args, 24);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10018);
    raw_free(&r);
    /* A PUTFH whose handle runs past the end: BADXDR. */
    raw_begin(&r, 0, 1);
    nfs_xdr_put_u32(&r.args, 22);
    nfs_xdr_put_u32(&r.args, 64);
    nfs_xdr_put_u32(&r.args, 1);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10036);
    raw_free(&r);
    /* Handles: too long is BADXDR, garbage BADHANDLE, GETFH without one NOFILEHANDLE. */
    raw_begin(&r, 0, 1);
    nfs_xdr_put_u32(&r.args, 22);
    uint8_t junk[200];
    memset(junk, 0x5a, sizeof junk);
    nfs_xdr_put_opaque(&r.args, junk, 129);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10036);
    raw_free(&r);
    raw_begin(&r, 0, 1);
    nfs_xdr_put_u32(&r.args, 22);
    nfs_xdr_put_opaque(&r.args, junk, 40);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10001);
    raw_free(&r);
    raw_begin(&r, 0, 1);
    nfs_xdr_put_u32(&r.args, 10);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10020);
    raw_free(&r);
    /* 4.1 without SEQUENCE first; SEQUENCE not first. */
    raw_begin(&r, 1, 1);
    nfs_xdr_put_u32(&r.args, 24);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10071);
    raw_free(&r);
    /* Random bytes after a valid header never take the server down. */
    srand(42);
    for (int i = 0; i < 3000; i++) {
        raw_begin(&r, (uint32_t)(rand() % 3), (uint32_t)(rand() % 8));
        int len = rand() % 200;
        for (int k = 0; k < len; k++) {
            uint8_t b = (uint8_t)rand();
            /* Bias toward small opcodes and lengths. */
            if (k % 4 != 3) b = 0;
            nfs_xdr_put_fixed(&r.args, &b, 1);
        }
        raw_call(&r);
        assert_true(r.accept == NFS_ACCEPT_SUCCESS || r.accept == NFS_ACCEPT_GARBAGE_ARGS);
        raw_free(&r);
    }
}

/* PUTROOTFH; VERIFY or NVERIFY (op) of type == type. */
static uint32_t verify_type(uint32_t op, uint32_t type)
{
    raw_t r;
    raw_begin(&r, 0, 2);
    nfs_xdr_put_u32(&r.args, 24);
    nfs_xdr_put_u32(&r.args, op);
    nfs_xdr_put_u32(&r.args, 1);
    nfs_xdr_put_u32(&r.args, 1u << 1);   /* FATTR4_TYPE */
    nfs_xdr_put_u32(&r.args, 4);
    nfs_xdr_put_u32(&r.args, type);
    raw_call(&r);
    uint32_t n, st = raw_status(&r, &n);
    raw_free(&r);
    return st;
}

static void test_verify(void **state)
{
    (void)state;
    assert_int_equal(verify_type(37, 2), 0);        /* VERIFY dir: the root is one */
    assert_int_equal(verify_type(37, 1), 10027);    /* NOT_SAME */
    assert_int_equal(verify_type(17, 2), 10009);    /* NVERIFY: SAME */
    assert_int_equal(verify_type(17, 1), 0);
}

/* EXCHANGE_ID + CREATE_SESSION; returns the session id. */
static void make_session(uint8_t sid[16], const char *owner)
{
    raw_t r;
    raw_begin(&r, 1, 1);
    nfs_xdr_put_u32(&r.args, 42);
    nfs_xdr_put_fixed(&r.args, "verifier", 8);
    nfs_xdr_put_string(&r.args, owner);
    nfs_xdr_put_u32(&r.args, 0);
    nfs_xdr_put_u32(&r.args, 0);   /* SP4_NONE */
    nfs_xdr_put_u32(&r.args, 0);   /* no impl id */
    raw_call(&r);
    uint32_t n;
    assert_int_equal(raw_status(&r, &n), 0);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 42);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);
    uint64_t clientid = nfs_xdr_get_u64(&r.d);
    uint32_t seq = nfs_xdr_get_u32(&r.d);
    raw_free(&r);

    raw_begin(&r, 1, 1);
    nfs_xdr_put_u32(&r.args, 43);
    nfs_xdr_put_u64(&r.args, clientid);
    nfs_xdr_put_u32(&r.args, seq);
    nfs_xdr_put_u32(&r.args, 0);
    for (int c = 0; c < 2; c++) {
        uint32_t ch[] = { 0, 1 << 20, 1 << 20, 8192, 16, 4, 0 };
        for (int k = 0; k < 7; k++) nfs_xdr_put_u32(&r.args, ch[k]);
    }
    nfs_xdr_put_u32(&r.args, 0x40000000);
    nfs_xdr_put_u32(&r.args, 1);
    nfs_xdr_put_u32(&r.args, 0);   /* AUTH_NONE */
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 0);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 43);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);
    memcpy(sid, nfs_xdr_get_fixed(&r.d, 16), 16);
    raw_free(&r);
}

static void put_sequence(raw_t *r, const uint8_t sid[16], uint32_t seq, uint32_t slot)
{
    nfs_xdr_put_u32(&r->args, 53);
    nfs_xdr_put_fixed(&r->args, sid, 16);
    nfs_xdr_put_u32(&r->args, seq);
    nfs_xdr_put_u32(&r->args, slot);
    nfs_xdr_put_u32(&r->args, 3);
    nfs_xdr_put_u32(&r->args, 1);
}

static void test_sessions(void **state)
{
    (void)state;
    uint8_t sid[16];
    make_session(sid, "raw-session-client");
    raw_t r;
    uint32_t n;
    /* SEQUENCE, PUTROOTFH, GETFH */
    raw_begin(&r, 1, 3);
    put_sequence(&r, sid, 1, 0);
    nfs_xdr_put_u32(&r.args, 24);
    nfs_xdr_put_u32(&r.args, 10);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 0);
    assert_int_equal(n, 3);
    /* The retransmission gets the very same bytes back. */
    nfs_xdr_t saved;
    nfs_xdr_init_encode(&saved, r.res.len);
    nfs_xdr_put_fixed(&saved, r.res.buf, (uint32_t)r.res.len);
    nfs_xdr_free(&r.res);
    raw_call(&r);
    assert_int_equal(r.res.len, saved.len);
    assert_memory_equal(r.res.buf, saved.buf, saved.len);
    nfs_xdr_free(&saved);
    raw_free(&r);
    /* Skipping a sequence id, a slot beyond the table, SEQUENCE twice. */
    raw_begin(&r, 1, 1);
    put_sequence(&r, sid, 3, 0);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10063);
    raw_free(&r);
    raw_begin(&r, 1, 1);
    put_sequence(&r, sid, 1, 999);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10053);
    raw_free(&r);
    raw_begin(&r, 1, 2);
    put_sequence(&r, sid, 2, 0);
    put_sequence(&r, sid, 3, 0);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10064);
    raw_free(&r);
    /* DESTROY_SESSION, after which the session is unknown. */
    raw_begin(&r, 1, 1);
    nfs_xdr_put_u32(&r.args, 44);
    nfs_xdr_put_fixed(&r.args, sid, 16);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 0);
    raw_free(&r);
    raw_begin(&r, 1, 1);
    put_sequence(&r, sid, 3, 0);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10052);
    raw_free(&r);
}

/* GET_DIR_DELEGATION4args asking for nothing in particular. */
static void put_get_dir_delegation(raw_t *r)
{
    nfs_xdr_put_u32(&r->args, 46);
    nfs_xdr_put_u32(&r->args, 1);   /* signal when one becomes available */
    nfs_xdr_put_u32(&r->args, 0);   /* no notification types */
    for (int i = 0; i < 2; i++) {   /* attribute delays */
        nfs_xdr_put_u64(&r->args, 0);
        nfs_xdr_put_u32(&r->args, 0);
    }
    nfs_xdr_put_u32(&r->args, 0);   /* child attributes */
    nfs_xdr_put_u32(&r->args, 0);   /* directory attributes */
}

/* Skips a SEQUENCE4res that succeeded. */
static void skip_sequence_res(raw_t *r)
{
    assert_int_equal(nfs_xdr_get_u32(&r->d), 53);
    assert_int_equal(nfs_xdr_get_u32(&r->d), 0);
    nfs_xdr_get_fixed(&r->d, 16 + 5 * 4);
}

/* No directory delegations: GET_DIR_DELEGATION is NFS4_OK with GDD4_UNAVAIL and
 * no promise to signal one (RFC 8881 18.39.3), and the COMPOUND goes on; it
 * still needs a directory as the current filehandle, and 4.0 has no such
 * operation. */
static void test_get_dir_delegation(void **state)
{
    (void)state;
    uint8_t sid[16];
    make_session(sid, "dir-delegation-client");
    raw_t r;
    uint32_t n;
    raw_begin(&r, 1, 4);   /* SEQUENCE, PUTROOTFH, GET_DIR_DELEGATION, GETFH */
    put_sequence(&r, sid, 1, 0);
    nfs_xdr_put_u32(&r.args, 24);
    put_get_dir_delegation(&r);
    nfs_xdr_put_u32(&r.args, 10);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 0);
    assert_int_equal(n, 4);
    skip_sequence_res(&r);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 24);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 46);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);    /* NFS4_OK */
    assert_int_equal(nfs_xdr_get_u32(&r.d), 1);    /* GDD4_UNAVAIL */
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);    /* will not signal */
    assert_int_equal(nfs_xdr_get_u32(&r.d), 10);   /* GETFH ran after it */
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);
    assert_false(r.d.err);
    raw_free(&r);
    /* Without a current filehandle: NOFILEHANDLE. */
    raw_begin(&r, 1, 2);
    put_sequence(&r, sid, 2, 0);
    put_get_dir_delegation(&r);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10020);
    assert_int_equal(n, 2);
    raw_free(&r);
    /* Arguments cut short: BADXDR. */
    raw_begin(&r, 1, 3);
    put_sequence(&r, sid, 3, 0);
    nfs_xdr_put_u32(&r.args, 24);
    nfs_xdr_put_u32(&r.args, 46);
    nfs_xdr_put_u32(&r.args, 1);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10036);
    raw_free(&r);
    /* Not an operation of 4.0. */
    raw_begin(&r, 0, 2);
    nfs_xdr_put_u32(&r.args, 24);
    put_get_dir_delegation(&r);
    raw_call(&r);
    assert_int_equal(raw_status(&r, &n), 10044);
    raw_free(&r);
}

/* SEQUENCE seq on slot 0, PUTROOTFH, LOOKUP tank, LOOKUP share, then GETATTR of
 * size (and of space_avail, which needs the pool's lock, when space) or, when mutate, a COMMIT (an operation that may wait). */
static void seq_compound(raw_t *r, const uint8_t sid[16], uint32_t seq, bool space, bool mutate,
                         bool memory)
{
    raw_begin(r, 1, 5);
    r->memory = memory;
    put_sequence(r, sid, seq, 0);
    nfs_xdr_put_u32(&r->args, 24);
    nfs_xdr_put_u32(&r->args, 15);
    nfs_xdr_put_string(&r->args, "tank");
    nfs_xdr_put_u32(&r->args, 15);
    nfs_xdr_put_string(&r->args, "share");
    if (mutate) {
        nfs_xdr_put_u32(&r->args, 5);
        nfs_xdr_put_u64(&r->args, 0);
        nfs_xdr_put_u32(&r->args, 0);
    } else {
        nfs_xdr_put_u32(&r->args, 9);
        nfs_xdr_put_u32(&r->args, 2);
        nfs_xdr_put_u32(&r->args, 1u << 4);
        nfs_xdr_put_u32(&r->args, space ? 1u << (42 - 32) : 0);
    }
    raw_call(r);
}

/* A 4.1 COMPOUND on the I/O thread: SEQUENCE takes its slot tentatively. One
 * that must go to a worker after all (an operation that may wait, a read the
 * SPA's memory-only mode refuses) leaves the slot as it was, so the worker's
 * run of the same request is its first use, not a retransmission; one that
 * completes there leaves its answer in the slot for retransmissions. */
static void test_session_memory_path(void **state)
{
    (void)state;
    uint8_t sid[16];
    make_session(sid, "memory-path-client");
    raw_t r;
    uint32_t n;
    /* The space attributes need the pool's lock: held (as a txg sync holds it),
     * the I/O thread is refused - twice, and the slot keeps its seqid 0. */
    lock_holder_t sync;
    lock_holder_start(&sync, &fix.dp->lock);
    for (int i = 0; i < 2; i++) {
        seq_compound(&r, sid, 1, true, false, true);
        assert_true(r.would_block);
        raw_free(&r);
    }
    lock_holder_stop(&sync);
    seq_compound(&r, sid, 1, true, false, false);
    assert_int_equal(raw_status(&r, &n), 0);
    assert_int_equal(n, 5);
    raw_free(&r);

    seq_compound(&r, sid, 2, false, true, true); /* COMMIT: to a worker */
    assert_true(r.would_block);
    raw_free(&r);
    seq_compound(&r, sid, 2, false, true, false);
    assert_int_equal(raw_status(&r, &n), 21); /* COMMIT of a directory: ISDIR */
    assert_int_equal(n, 5);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 53); /* ...after a SEQUENCE that took the slot */
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);
    raw_free(&r);

    seq_compound(&r, sid, 3, false, false, true); /* all in memory: answered there */
    assert_false(r.would_block);
    assert_int_equal(raw_status(&r, &n), 0);
    assert_int_equal(n, 5);
    nfs_xdr_t fast;
    nfs_xdr_init_encode(&fast, r.res.len);
    nfs_xdr_put_fixed(&fast, r.res.buf, (uint32_t)r.res.len);
    raw_free(&r);
    seq_compound(&r, sid, 3, false, false, false); /* the retransmission: the same bytes */
    assert_int_equal(r.res.len, fast.len);
    assert_memory_equal(r.res.buf, fast.buf, fast.len);
    raw_free(&r);
    nfs_xdr_free(&fast);
    seq_compound(&r, sid, 4, false, false, true);
    assert_false(r.would_block);
    assert_int_equal(raw_status(&r, &n), 0);
    raw_free(&r);
}

static void restart_server(const char *state_dir, uint32_t lease, uint32_t grace)
{
    nfs_server_stop(srv);
    nfs_server_config_t cfg = { 0 };
    strcpy(cfg.nfs.host, "127.0.0.1");
    cfg.nfs.port = port;
    cfg.state_dir = state_dir;
    cfg.lease_seconds = lease;
    cfg.grace_seconds = grace;
    char err[256];
    int rc = -1;
    for (int i = 0; i < 50 && rc; i++) {
        rc = nfs_server_start(&cfg, &srv, err, sizeof err);
        if (rc) usleep(100000);
    }
    if (rc) fail_msg("restart: %s", err);
    assert_int_equal(nfs_server_export(srv, fix.dp, fix.fsname, "/tank/share",
                                       "rw,no_root_squash", err, sizeof err), 0);
}

static bool in_grace(void)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    bool g = nfs4_in_grace(st);
    pthread_mutex_unlock(&st->lock);
    return g;
}

/* Leases: a client that stops renewing loses its locks. Grace: after a restart
 * the server knows (from its state directory) that a client held state and
 * holds new state back until the grace period ends. */
static void test_lease_and_grace(void **state)
{
    (void)state;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/nfs4state", fix.dir);
    restart_server(dir, 2, 3);
    /* The pool remembers the clients of the tests before (docs/ha.md), who never
     * come back to reclaim: their grace period runs out on its own. */
    for (int i = 0; i < 100 && in_grace(); i++) usleep(100000);
    assert_false(in_grace());

    struct nfs_context *a = client("/tank/share", 0);
    write_file(a, "/leased", "0123456789");
    struct nfsfh *fa;
    assert_int_equal(nfs_open(a, "/leased", O_RDWR, &fa), 0);
    struct nfs4_flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    char recs[800];
    snprintf(recs, sizeof recs, "%s/nfs4-clients", dir);
    struct stat sb;
    assert_int_equal(stat(recs, &sb), 0);
    assert_true(sb.st_size > 0);

    /* Client a goes silent (its context is dropped without unlocking). */
    struct nfs_context *b = client("/tank/share", 0);
    struct nfsfh *fb;
    assert_int_equal(nfs_open(b, "/leased", O_RDWR, &fb), 0);
    assert_true(nfs_fcntl(b, fb, NFS4_F_SETLK, &fl) < 0);
    nfs_destroy_context(a);
    bool got = false;
    for (int i = 0; i < 300 && !got; i++) {
        got = nfs_fcntl(b, fb, NFS4_F_SETLK, &fl) == 0;
        if (!got) usleep(100000);
    }
    assert_true(got);
    nfs_destroy_context(b);

    /* Restart: b held state, so the server starts in grace, then leaves it. */
    restart_server(dir, 2, 3);
    assert_true(in_grace());
    bool over = false;
    for (int i = 0; i < 300 && !over; i++) {
        over = !in_grace();
        if (!over) usleep(100000);
    }
    assert_true(over);
    struct nfs_context *c = client("/tank/share", 0);
    expect_content(c, "/leased", "0123456789");
    nfs_destroy_context(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_permissions),
        cmocka_unit_test(test_locks),
        cmocka_unit_test(test_pseudo_root),
        cmocka_unit_test(test_compound_garbage),
        cmocka_unit_test(test_sessions),
        cmocka_unit_test(test_get_dir_delegation),
        cmocka_unit_test(test_session_memory_path),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_lease_and_grace),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
