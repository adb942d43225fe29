/* NFSv4 state against files that go away under it, end to end in one process
 * (a real server on a fixture pool, libnfs's NFSv4 client):
 *   - a file removed while a client has it open stays readable and writable
 *     through that open until CLOSE, and is freed then (nothing leaked);
 *   - a new file made under the removed one's name never inherits its state:
 *     another client locks it freely, even once object numbers are recycled;
 *   - a file replaced by RENAME stays usable by its opener (pynfs RNM21);
 *   - courtesy: a client past its lease keeps its locks while nobody wants
 *     them and gets them back by renewing, but a conflicting LOCK of another
 *     client revokes them at once (not 1.5 leases later) and proceeds; the
 *     revoked client's RENEW and stateids then answer NFS4ERR_EXPIRED. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_srv.h"
#include "../../src/nfs/nfs4_impl.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop
#include "../../src/zpl/zpl_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <nfsc/libnfs.h>

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libnfs.so\n";
}

static zfix_t fix;
static nfs_server_t *srv;
static uint16_t port;

static struct nfs_context *client(int uid)
{
    struct nfs_context *nfs = nfs_init_context();
    assert_non_null(nfs);
    static int seq;
    char id[64];
    snprintf(id, sizeof id, "cairn-state-%d-%d", (int)getpid(), seq++);
    nfs4_set_client_name(nfs, id);
    char url[512];
    snprintf(url, sizeof url, "nfs://127.0.0.1/tank/share?version=4&nfsport=%u&uid=%d&gid=%d",
             (unsigned)port, uid, uid);
    struct nfs_url *u = nfs_parse_url_dir(nfs, url);
    if (!u) fail_msg("url %s: %s", url, nfs_get_error(nfs));
    int rc = nfs_mount(nfs, u->server, u->path);
    if (rc) fail_msg("mount: %d %s", rc, nfs_get_error(nfs));
    nfs_destroy_url(u);
    return nfs;
}

static int setup(void **state)
{
    (void)state;
    zfix_make(&fix, "nfs4st", 256ull << 20);
    zfix_unmount(&fix);
    nfs_server_config_t cfg = { 0 };
    strcpy(cfg.nfs.host, "127.0.0.1");
    char err[256];
    int rc = -1;
    for (int i = 0; i < 20 && rc; i++) {
        cfg.nfs.port = (uint16_t)(30000 + (getpid() * 11 + i * 137) % 30000);
        rc = nfs_server_start(&cfg, &srv, err, sizeof err);
    }
    if (rc) fail_msg("nfs_server_start: %s", err);
    assert_int_equal(nfs_server_export(srv, fix.dp, fix.fsname, "/tank/share",
                                       "rw,no_root_squash", err, sizeof err), 0);
    uint16_t m, p;
    nfs_server_ports(srv, &port, &m, &p);
    /* Our own mount of the export's dataset (the server's, shared): to look at objects. */
    assert_int_equal(zpl_mount(fix.dp, fix.fsname, &fix.fs), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nfs_server_stop(srv);
    zfix_export_check(&fix);   /* nothing leaked by what the tests removed */
    zfix_destroy(&fix);
    return 0;
}

static struct nfsfh *open_write(struct nfs_context *nfs, const char *path, const char *data)
{
    struct nfsfh *fh;
    int rc = nfs_open2(nfs, path, O_CREAT | O_RDWR, 0644, &fh);
    if (rc) fail_msg("open %s: %d %s", path, rc, nfs_get_error(nfs));
    rc = nfs_pwrite(nfs, fh, 0, strlen(data), data);
    if (rc != (int)strlen(data)) fail_msg("write %s: %d %s", path, rc, nfs_get_error(nfs));
    return fh;
}

static void expect_fh(struct nfs_context *nfs, struct nfsfh *fh, const char *data)
{
    char buf[256] = "";
    int rc = nfs_pread(nfs, fh, 0, sizeof buf - 1, buf);
    if (rc < 0) fail_msg("read: %d %s", rc, nfs_get_error(nfs));
    buf[rc] = 0;
    assert_string_equal(buf, data);
}

static uint64_t ino_of(struct nfs_context *nfs, struct nfsfh *fh)
{
    struct nfs_stat_64 st;
    assert_int_equal(nfs_fstat64(nfs, fh, &st), 0);
    return st.nfs_ino;
}

static bool object_exists(uint64_t obj)
{
    dmu_object_info_t oi;
    return dmu_object_info(fix.fs->os, obj, &oi) == 0;
}

static void sync_pool(void)
{
    assert_int_equal(zpl_commit(fix.fs), 0);
    assert_int_equal(spa_txg_wait_synced(fix.spa, 0), 0);
    assert_int_equal(spa_txg_wait_synced(fix.spa, 0), 0);
}

static void test_remove_while_open(void **state)
{
    (void)state;
    struct nfs_context *a = client(0), *b = client(0);
    struct nfsfh *fa = open_write(a, "/victim", "old data");
    uint64_t old = ino_of(a, fa);
    struct nfs4_flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);

    assert_int_equal(nfs_unlink(b, "/victim"), 0);
    sync_pool();
    /* The opener still has it, across syncs. */
    expect_fh(a, fa, "old data");
    assert_int_equal(nfs_pwrite(a, fa, 0, 3, "OLD"), 3);
    expect_fh(a, fa, "OLD data");
    assert_true(object_exists(old));

    /* New files, some under the same name, while the removed one is open: none
     * is the old object, and b locks each freely (no inherited lock). */
    for (int i = 0; i < 8; i++) {
        /* A client each: libnfs reuses one lock owner's stateid across files. */
        struct nfs_context *c = client(0);
        char name[32];
        snprintf(name, sizeof name, i ? "/new%d" : "/victim", i);
        struct nfsfh *fc;
        int rc = nfs_open2(c, name, O_CREAT | O_EXCL | O_RDWR, 0644, &fc);
        if (rc) fail_msg("create %s: %d %s", name, rc, nfs_get_error(c));
        assert_int_not_equal(ino_of(c, fc), old);
        rc = nfs_fcntl(c, fc, NFS4_F_SETLK, &fl);
        if (rc) fail_msg("lock %s: %d %s", name, rc, nfs_get_error(c));
        fl.l_type = F_UNLCK;
        assert_int_equal(nfs_fcntl(c, fc, NFS4_F_SETLK, &fl), 0);
        fl.l_type = F_WRLCK;
        assert_int_equal(nfs_close(c, fc), 0);
        nfs_destroy_context(c);
        sync_pool();
    }

    fl.l_type = F_UNLCK;
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    assert_int_equal(nfs_close(a, fa), 0);
    sync_pool();
    assert_false(object_exists(old));   /* freed at the last CLOSE */
    nfs_destroy_context(a);
    nfs_destroy_context(b);
}

/* pynfs RNM21: RENAME over an open file. */
static void test_rename_over_open(void **state)
{
    (void)state;
    struct nfs_context *a = client(0), *b = client(0);
    struct nfsfh *fa = open_write(a, "/target", "target data");
    uint64_t old = ino_of(a, fa);
    struct nfsfh *fb = open_write(b, "/source", "source data");
    assert_int_equal(nfs_close(b, fb), 0);
    assert_int_equal(nfs_rename(b, "/source", "/target"), 0);
    sync_pool();
    expect_fh(a, fa, "target data");
    assert_int_equal(nfs_pwrite(a, fa, 0, 6, "TARGET"), 6);
    expect_fh(a, fa, "TARGET data");
    struct nfsfh *fc;
    assert_int_equal(nfs_open(b, "/target", O_RDONLY, &fc), 0);
    expect_fh(b, fc, "source data");
    assert_int_equal(nfs_close(b, fc), 0);
    assert_int_equal(nfs_close(a, fa), 0);
    sync_pool();
    assert_false(object_exists(old));
    nfs_destroy_context(a);
    nfs_destroy_context(b);
}

/* ---- courtesy clients ---- */

static void restart_server(uint32_t lease)
{
    nfs_server_stop(srv);
    nfs_server_config_t cfg = { 0 };
    strcpy(cfg.nfs.host, "127.0.0.1");
    cfg.nfs.port = port;
    cfg.lease_seconds = lease;
    char err[256];
    int rc = -1;
    for (int i = 0; i < 50 && rc; i++) {
        rc = nfs_server_start(&cfg, &srv, err, sizeof err);
        if (rc) usleep(100000);
    }
    if (rc) fail_msg("restart: %s", err);
    assert_int_equal(nfs_server_export(srv, fix.dp, fix.fsname, "/tank/share",
                                       "rw,no_root_squash", err, sizeof err), 0);
    /* The pool keeps the clients of the previous run (docs/ha.md), so the new
     * server grants them a grace period for reclaims: the tests here open anew,
     * so they wait for it to end (a lease) as a new client would. */
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    for (;;) {
        /* nfs4_in_grace ends grace under the state lock, as COMPOUNDs call it. */
        pthread_mutex_lock(&st->lock);
        bool grace = nfs4_in_grace(st);
        pthread_mutex_unlock(&st->lock);
        if (!grace) break;
        usleep(100000);
    }
}

/* The clientid of the newest client (clients are pushed at the head). */
static uint64_t newest_clientid(void)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    uint64_t id = st->clients ? st->clients->clientid : 0;
    pthread_mutex_unlock(&st->lock);
    return id;
}

/* Waits (bounded) until the client's lease has run out by a whole second. */
static void wait_lease_over(uint64_t clientid)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    bool over = false;
    for (int i = 0; i < 600 && !over; i++) {
        pthread_mutex_lock(&st->lock);
        for (nfs4_client_t *c = st->clients; c; c = c->next)
            if (c->clientid == clientid) over = nfs4_now() - c->renewed > (time_t)st->lease;
        pthread_mutex_unlock(&st->lock);
        if (!over) usleep(100000);
    }
    assert_true(over);
}

/* ---- raw NFSv4.0 COMPOUNDs straight into the server ---- */

typedef struct raw {
    nfs_xdr_t args, res, d;   /* d decodes res past the header */
    uint32_t status;
} raw_t;

static void raw_begin(raw_t *r, uint32_t numops)
{
    memset(r, 0, sizeof *r);
    nfs_xdr_init_encode(&r->args, 256);
    nfs_xdr_put_string(&r->args, "t");
    nfs_xdr_put_u32(&r->args, 0);
    nfs_xdr_put_u32(&r->args, numops);
}

/* Runs the COMPOUND; r->status is its status, r->d at the first result. */
static void raw_call(raw_t *r)
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
    nfs_xdr_init_decode(&call.args, r->args.buf, r->args.len);
    nfs_xdr_init_encode(&r->res, 256);
    call.res = &r->res;
    assert_int_equal(nfs4_program(&call), NFS_ACCEPT_SUCCESS);
    nfs_xdr_init_decode(&r->d, r->res.buf, r->res.len);
    r->status = nfs_xdr_get_u32(&r->d);
    uint32_t len;
    nfs_xdr_get_opaque(&r->d, &len, 1024);   /* tag */
    nfs_xdr_get_u32(&r->d);                  /* numres */
}

static void raw_free(raw_t *r)
{
    nfs_xdr_free(&r->args);
    nfs_xdr_free(&r->res);
}

/* The next result's status, checking its opcode. */
static uint32_t raw_op(raw_t *r, uint32_t op)
{
    assert_int_equal(nfs_xdr_get_u32(&r->d), op);
    return nfs_xdr_get_u32(&r->d);
}

/* A 4.0 RENEW of clientid; its status. */
static uint32_t raw_renew(uint64_t clientid)
{
    raw_t r;
    raw_begin(&r, 1);
    nfs_xdr_put_u32(&r.args, 30);   /* OP_RENEW */
    nfs_xdr_put_u64(&r.args, clientid);
    raw_call(&r);
    raw_free(&r);
    return r.status;
}

static void put_sid(nfs_xdr_t *x, uint32_t seqid, const uint8_t other[12])
{
    nfs_xdr_put_u32(x, seqid);
    nfs_xdr_put_fixed(x, other, 12);
}

/* pynfs RPLY9/RPLY10: a retransmitted CLOSE (same seqid, same bytes) gets the
 * first one's reply, though the open it closed is gone. */
static void test_close_replay(void **state)
{
    (void)state;
    raw_t r;
    raw_begin(&r, 1);
    nfs_xdr_put_u32(&r.args, 35);   /* SETCLIENTID */
    nfs_xdr_put_fixed(&r.args, "verifier", 8);
    nfs_xdr_put_string(&r.args, "close-replay-client");
    nfs_xdr_put_u32(&r.args, 0x40000000);
    nfs_xdr_put_string(&r.args, "tcp");
    nfs_xdr_put_string(&r.args, "127.0.0.1.0.1");
    nfs_xdr_put_u32(&r.args, 1);
    raw_call(&r);
    assert_int_equal(raw_op(&r, 35), 0);
    uint64_t clientid = nfs_xdr_get_u64(&r.d);
    uint8_t confirm[8];
    memcpy(confirm, nfs_xdr_get_fixed(&r.d, 8), 8);
    raw_free(&r);
    raw_begin(&r, 1);
    nfs_xdr_put_u32(&r.args, 36);   /* SETCLIENTID_CONFIRM */
    nfs_xdr_put_u64(&r.args, clientid);
    nfs_xdr_put_fixed(&r.args, confirm, 8);
    raw_call(&r);
    assert_int_equal(r.status, 0);
    raw_free(&r);

    /* PUTROOTFH, LOOKUP tank, LOOKUP share, OPEN (create) "replayed", GETFH */
    raw_begin(&r, 5);
    nfs_xdr_put_u32(&r.args, 24);
    nfs_xdr_put_u32(&r.args, 15);
    nfs_xdr_put_string(&r.args, "tank");
    nfs_xdr_put_u32(&r.args, 15);
    nfs_xdr_put_string(&r.args, "share");
    nfs_xdr_put_u32(&r.args, 18);
    nfs_xdr_put_u32(&r.args, 1);           /* seqid */
    nfs_xdr_put_u32(&r.args, 3);           /* access both */
    nfs_xdr_put_u32(&r.args, 0);           /* deny none */
    nfs_xdr_put_u64(&r.args, clientid);
    nfs_xdr_put_string(&r.args, "owner");
    nfs_xdr_put_u32(&r.args, 1);           /* OPEN4_CREATE */
    nfs_xdr_put_u32(&r.args, 0);           /* UNCHECKED4 */
    nfs_xdr_put_u32(&r.args, 0);           /* empty bitmap */
    nfs_xdr_put_u32(&r.args, 0);           /* empty attrs */
    nfs_xdr_put_u32(&r.args, 0);           /* CLAIM_NULL */
    nfs_xdr_put_string(&r.args, "replayed");
    nfs_xdr_put_u32(&r.args, 10);
    raw_call(&r);
    assert_int_equal(r.status, 0);
    assert_int_equal(raw_op(&r, 24), 0);
    assert_int_equal(raw_op(&r, 15), 0);
    assert_int_equal(raw_op(&r, 15), 0);
    assert_int_equal(raw_op(&r, 18), 0);
    uint32_t sseq = nfs_xdr_get_u32(&r.d);
    uint8_t other[12];
    memcpy(other, nfs_xdr_get_fixed(&r.d, 12), 12);
    nfs_xdr_get_u32(&r.d);
    nfs_xdr_get_u64(&r.d);
    nfs_xdr_get_u64(&r.d);
    uint32_t rflags = nfs_xdr_get_u32(&r.d);
    for (uint32_t n = nfs_xdr_get_u32(&r.d); n; n--) nfs_xdr_get_u32(&r.d);
    assert_int_equal(nfs_xdr_get_u32(&r.d), 0);   /* no delegation */
    assert_int_equal(raw_op(&r, 10), 0);
    uint32_t fhlen;
    const uint8_t *fhp = nfs_xdr_get_opaque(&r.d, &fhlen, 128);
    uint8_t fh[128];
    memcpy(fh, fhp, fhlen);
    raw_free(&r);
    uint32_t seqid = 2;
    if (rflags & 2) {   /* OPEN4_RESULT_CONFIRM */
        raw_begin(&r, 2);
        nfs_xdr_put_u32(&r.args, 22);
        nfs_xdr_put_opaque(&r.args, fh, fhlen);
        nfs_xdr_put_u32(&r.args, 20);
        put_sid(&r.args, sseq, other);
        nfs_xdr_put_u32(&r.args, seqid++);
        raw_call(&r);
        assert_int_equal(r.status, 0);
        assert_int_equal(raw_op(&r, 22), 0);
        assert_int_equal(raw_op(&r, 20), 0);
        sseq = nfs_xdr_get_u32(&r.d);
        raw_free(&r);
    }
    /* PUTFH, CLOSE; then the very same bytes again. */
    uint32_t got_seq[2];
    for (int i = 0; i < 2; i++) {
        raw_begin(&r, 2);
        nfs_xdr_put_u32(&r.args, 22);
        nfs_xdr_put_opaque(&r.args, fh, fhlen);
        nfs_xdr_put_u32(&r.args, 4);
        nfs_xdr_put_u32(&r.args, seqid);
        put_sid(&r.args, sseq, other);
        raw_call(&r);
        if (r.status) fail_msg("CLOSE %s: status %u", i ? "retransmitted" : "first", r.status);
        assert_int_equal(raw_op(&r, 22), 0);
        assert_int_equal(raw_op(&r, 4), 0);
        got_seq[i] = nfs_xdr_get_u32(&r.d);
        assert_memory_equal(nfs_xdr_get_fixed(&r.d, 12), other, 12);
        raw_free(&r);
    }
    assert_int_equal(got_seq[0], got_seq[1]);
    /* A new CLOSE of the closed stateid (next seqid) is refused. */
    raw_begin(&r, 2);
    nfs_xdr_put_u32(&r.args, 22);
    nfs_xdr_put_opaque(&r.args, fh, fhlen);
    nfs_xdr_put_u32(&r.args, 4);
    nfs_xdr_put_u32(&r.args, seqid + 1);
    put_sid(&r.args, sseq, other);
    raw_call(&r);
    assert_int_equal(r.status, 10025);   /* BAD_STATEID */
    raw_free(&r);
}

static void test_courtesy(void **state)
{
    (void)state;
    restart_server(4);
    struct nfs4_flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };

    /* A courtesy client nobody conflicts with keeps its lock and renews. */
    struct nfs_context *a = client(0);
    uint64_t aid = newest_clientid();
    struct nfsfh *fa = open_write(a, "/kept", "kept");
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    wait_lease_over(aid);
    assert_int_equal(raw_renew(aid), 0);
    fl.l_type = F_UNLCK;
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    fl.l_type = F_WRLCK;
    assert_int_equal(nfs_close(a, fa), 0);
    nfs_destroy_context(a);

    /* A silent client's lock yields to another client's conflicting LOCK as
     * soon as its lease is over. */
    a = client(0);
    aid = newest_clientid();
    fa = open_write(a, "/contended", "data");
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    struct nfs_context *b = client(0);
    struct nfsfh *fb;
    assert_int_equal(nfs_open(b, "/contended", O_RDWR, &fb), 0);
    assert_true(nfs_fcntl(b, fb, NFS4_F_SETLK, &fl) < 0);   /* a's lease runs */
    wait_lease_over(aid);
    int rc = nfs_fcntl(b, fb, NFS4_F_SETLK, &fl);
    if (rc) fail_msg("lock against an expired client: %d %s", rc, nfs_get_error(b));
    /* a's state is gone: its RENEW and its lock say EXPIRED. */
    assert_int_equal(raw_renew(aid), 10011);
    fl.l_type = F_UNLCK;
    assert_true(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl) < 0);
    assert_non_null(strstr(nfs_get_error(a), "EXPIRED"));
    assert_int_equal(nfs_fcntl(b, fb, NFS4_F_SETLK, &fl), 0);
    assert_int_equal(nfs_close(b, fb), 0);
    nfs_destroy_context(b);
    nfs_destroy_context(a);
    /* NLM (NFSv3 locks, one table with v4's) meets an expired v4 client's lock
     * the same way: through nfs4_lock_conflict, which revokes it. */
    a = client(0);
    aid = newest_clientid();
    fa = open_write(a, "/nlmv4", "data");
    fl.l_type = F_WRLCK;
    assert_int_equal(nfs_fcntl(a, fa, NFS4_F_SETLK, &fl), 0);
    zpl_node_t *root, *node;
    assert_int_equal(zpl_root(fix.fs, &root), 0);
    assert_int_equal(zpl_lookup(root, "nlmv4", &node), 0);
    zpl_node_rele(root);
    static int nlm_owner;   /* any pointer that is no v4 owner */
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    nfs4_file_t *f = nfs4_file_find(st, node);
    assert_non_null(f);
    f->nstates++;
    assert_true(nfs4_lock_conflict(st, f, &nlm_owner, 0, 99, WRITE_LT) >= 0);   /* lease runs */
    f->nstates--;
    nfs4_unlock(st);
    wait_lease_over(aid);
    pthread_mutex_lock(&st->lock);
    f = nfs4_file_find(st, node);
    assert_non_null(f);
    f->nstates++;
    assert_int_equal(nfs4_lock_conflict(st, f, &nlm_owner, 0, 99, WRITE_LT), -1);
    f->nstates--;
    nfs4_file_drop_unused(st, f);
    nfs4_unlock(st);
    zpl_node_rele(node);
    assert_int_equal(raw_renew(aid), 10011);
    nfs_destroy_context(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_while_open),
        cmocka_unit_test(test_rename_over_open),
        cmocka_unit_test(test_close_replay),
        cmocka_unit_test(test_courtesy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
