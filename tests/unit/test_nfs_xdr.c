/* The XDR cursor (overruns are sticky, opaque limits, padding) and the RPC decoder:
 * well-formed calls get the right accept status, and a deterministic stream of
 * randomized garbage (mutated headers, truncated and random arguments, real handles
 * with junk after them) is answered with a well-formed reply or a close, never a
 * crash, against a real exported filesystem. NFSv3 READ on the I/O thread
 * (memory only, else would block) against the worker path. READ data lent by the
 * ARC: the reply holds the buffers, so a rewrite, free or purge of the blocks does
 * not change what is sent, and dirty records are copied. CAIRN_TEST_SEED replays a seed;
 * CAIRN_TEST_LONG=1 runs many more rounds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/dsl/dsl_impl.h"
#include "../../src/nfs/nfs_srv.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "lock_holder.h"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop

#include <arpa/inet.h>
#include <cairn/arc.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <cairn/spa.h>

static void test_cursor(void **state)
{
    (void)state;
    nfs_xdr_t e;
    nfs_xdr_init_encode(&e, 0);
    nfs_xdr_put_u32(&e, 0xdeadbeef);
    nfs_xdr_put_u64(&e, 0x0102030405060708ull);
    nfs_xdr_put_opaque(&e, "abcde", 5);
    nfs_xdr_put_string(&e, "xy");
    nfs_xdr_put_fixed(&e, "123", 3);
    assert_false(e.err);
    assert_int_equal(e.len, 4 + 8 + 4 + 8 + 4 + 4 + 4);
    nfs_xdr_t d;
    nfs_xdr_init_decode(&d, e.buf, e.len);
    assert_int_equal(nfs_xdr_get_u32(&d), 0xdeadbeef);
    assert_true(nfs_xdr_get_u64(&d) == 0x0102030405060708ull);
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(&d, &len, 16);
    assert_int_equal(len, 5);
    assert_memory_equal(p, "abcde", 5);
    p = nfs_xdr_get_opaque(&d, &len, 1); /* longer than max: sticky error */
    assert_null(p);
    assert_true(d.err);
    assert_int_equal(nfs_xdr_get_u32(&d), 0);
    /* Overrun */
    nfs_xdr_init_decode(&d, e.buf, 6);
    nfs_xdr_get_u32(&d);
    assert_false(d.err);
    assert_int_equal(nfs_xdr_get_u32(&d), 0);
    assert_true(d.err);
    /* A length that would wrap */
    uint8_t big[8] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4};
    nfs_xdr_init_decode(&d, big, sizeof big);
    assert_null(nfs_xdr_get_opaque(&d, &len, UINT32_MAX));
    assert_true(d.err);
    nfs_xdr_free(&e);
    /* Zero bytes of an encoder with no buffer yet: a pointer that is not NULL
     * (NULL + 0 is undefined), no error (fuzz_nfs_rpc found this). */
    nfs_xdr_init_encode(&e, 0);
    assert_non_null(nfs_xdr_reserve(&e, 0));
    nfs_xdr_put_fixed(&e, "", 0);
    assert_false(e.err);
    assert_int_equal(e.len, 0);
    nfs_xdr_free(&e);
}

typedef struct rig {
    zfix_t f;
    nfs_server_t *srv;
    nfs_conn_t *conn;
    zpl_fh_t root;
} rig_t;

/* The export's root directory, held. */
static zpl_node_t *rig_root(rig_t *r)
{
    nfs_export_t *e = nfs_export_find_path(r->srv, "/x");
    zpl_node_t *root;
    assert_int_equal(zpl_root(nfs_export_fs(e), &root), 0);
    nfs_export_rele(e);
    return root;
}

static void rig_up(rig_t *r)
{
    zfix_make(&r->f, "nfsxdr", 256ull << 20);
    zfix_unmount(&r->f);
    nfs_server_config_t cfg = {.workers = 1};
    char err[256] = "";
    assert_int_equal(nfs_server_start(&cfg, &r->srv, err, sizeof err), 0);
    assert_int_equal(nfs_server_export(r->srv, r->f.dp, r->f.fsname, "/x", "no_root_squash", err,
                                       sizeof err), 0);
    zpl_node_t *root = rig_root(r);
    assert_int_equal(zpl_fh_encode(root, &r->root), 0);
    zpl_node_rele(root);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(900)};
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    r->conn = nfs_conn_detached(r->srv, (struct sockaddr *)&sin, sizeof sin);
}

static void rig_down(rig_t *r)
{
    nfs_conn_detached_free(r->conn);
    nfs_server_stop(r->srv);
    zfix_destroy(&r->f);
}

/* Creates file `name` in the export's root holding data[0, size); its handle in *fh.
 * The caller releases the node. */
static zpl_node_t *rig_file(rig_t *r, const char *name, const uint8_t *data, uint64_t size,
                            zpl_fh_t *fh)
{
    zpl_node_t *root = rig_root(r), *n;
    assert_int_equal(zpl_create(root, name, 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &n, NULL),
                     0);
    zpl_wcc_t wcc;
    assert_int_equal(zpl_write(n, 0, size, data, 0, &wcc), 0);
    assert_int_equal(zpl_fh_encode(n, fh), 0);
    zpl_node_rele(root);
    return n;
}

static void call_header(nfs_xdr_t *x, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc)
{
    nfs_xdr_put_u32(x, xid);
    nfs_xdr_put_u32(x, 0);
    nfs_xdr_put_u32(x, 2);
    nfs_xdr_put_u32(x, prog);
    nfs_xdr_put_u32(x, vers);
    nfs_xdr_put_u32(x, proc);
    nfs_xdr_t cred;
    nfs_xdr_init_encode(&cred, 0);
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_string(&cred, "unit");
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_u32(x, NFS_AUTH_SYS);
    nfs_xdr_put_opaque(x, cred.buf, (uint32_t)cred.len);
    nfs_xdr_put_u32(x, 0);
    nfs_xdr_put_u32(x, 0);
    nfs_xdr_free(&cred);
}

/* Runs rec; checks the reply's framing; returns the accept status (-1: closed,
 * -2: no reply, 100+: denied). */
static int run(rig_t *r, const uint8_t *rec, size_t len, uint32_t xid, bool check_xid)
{
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t res;
    int rc = nfs_rpc_execute(r->conn, rec, len, hdr, &hlen, &res);
    int out = -1;
    if (rc == 0) out = -2;
    if (rc > 0) {
        assert_true(hlen >= 16 && hlen <= NFS_RPC_HDR_MAX);
        nfs_xdr_t d;
        nfs_xdr_init_decode(&d, hdr, hlen);
        uint32_t mark = nfs_xdr_get_u32(&d);
        assert_true(mark & 0x80000000u);
        assert_int_equal(mark & 0x7fffffffu, hlen - 4 + res.len);
        uint32_t rxid = nfs_xdr_get_u32(&d);
        if (check_xid) assert_int_equal(rxid, xid);
        assert_int_equal(nfs_xdr_get_u32(&d), 1);
        uint32_t reply_stat = nfs_xdr_get_u32(&d);
        if (reply_stat == 0) {
            nfs_xdr_get_u32(&d);
            nfs_xdr_get_u32(&d);
            out = (int)nfs_xdr_get_u32(&d);
            assert_true(out >= 0 && out <= 5);
        } else {
            assert_int_equal(reply_stat, 1);
            out = 100 + (int)nfs_xdr_get_u32(&d);
        }
        assert_false(d.err);
    }
    nfs_xdr_free(&res);
    return out;
}

static void test_accept_status(void **state)
{
    (void)state;
    rig_t r;
    rig_up(&r);
    struct { uint32_t prog, vers, proc; bool fh; int want; } cases[] = {
        {100003, 3, 0, false, 0}, {100003, 3, 1, true, 0}, {100003, 3, 1, false, 4},
        {100003, 2, 0, false, 2}, {100003, 3, 22, false, 3}, {100005, 3, 0, false, 0},
        {100005, 2, 0, false, 2}, {100000, 2, 0, false, 0}, {100000, 2, 9, false, 3},
        {100227, 3, 0, false, 1}, {1, 1, 1, false, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nfs_xdr_t x;
        nfs_xdr_init_encode(&x, 0);
        call_header(&x, (uint32_t)i + 7, cases[i].prog, cases[i].vers, cases[i].proc);
        if (cases[i].fh) nfs_xdr_put_opaque(&x, r.root.bytes, ZPL_FH_SIZE);
        int got = run(&r, x.buf, x.len, (uint32_t)i + 7, true);
        if (got != cases[i].want)
            fail_msg("case %zu (%u/%u/%u): accept %d, expected %d", i, cases[i].prog,
                     cases[i].vers, cases[i].proc, got, cases[i].want);
        nfs_xdr_free(&x);
    }
    /* A call that is not a call, and a header cut short: close. */
    uint8_t reply[8] = {0, 0, 0, 1, 0, 0, 0, 1};
    assert_int_equal(run(&r, reply, sizeof reply, 0, false), -1);
    assert_int_equal(run(&r, reply, 3, 0, false), -1);
    rig_down(&r);
}

/* ---- NFSv3 READ on the I/O thread (nfs_rpc_execute_memory) ---- */

/* Runs the call record on the I/O thread's path (memory) or a worker's. */
static int execute(rig_t *r, const nfs_xdr_t *call, bool memory, uint8_t hdr[NFS_RPC_HDR_MAX],
                   size_t *hlen, nfs_xdr_t *res)
{
    return memory ? nfs_rpc_execute_memory(r->conn, call->buf, call->len, hdr, hlen, res)
                  : nfs_rpc_execute(r->conn, call->buf, call->len, hdr, hlen, res);
}

typedef struct read_reply {
    int rc;                 /* nfs_rpc_execute*: 1 reply, NFS_RPC_WOULD_BLOCK, ... */
    uint32_t status;
    bool has_attr;
    uint64_t size;
    uint32_t atime_s, atime_ns;
    uint32_t count;
    bool eof;
    uint8_t *data;          /* count bytes, malloc'd */
} read_reply_t;

static void read_call(rig_t *r, const zpl_fh_t *fh, uint64_t off, uint32_t count, bool memory,
                      read_reply_t *out)
{
    memset(out, 0, sizeof *out);
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 0);
    call_header(&x, 77, 100003, 3, 6);
    nfs_xdr_put_opaque(&x, fh->bytes, ZPL_FH_SIZE);
    nfs_xdr_put_u64(&x, off);
    nfs_xdr_put_u32(&x, count);
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t res;
    out->rc = execute(r, &x, memory, hdr, &hlen, &res);
    nfs_xdr_free(&x);
    if (out->rc == 1) {
        nfs_xdr_flatten(&res); /* the data lent by the ARC, in place */
        /* The accept status is the last header word; the body follows. */
        nfs_xdr_t d;
        nfs_xdr_init_decode(&d, hdr + hlen - 4, 4);
        assert_int_equal(nfs_xdr_get_u32(&d), 0);
        nfs_xdr_init_decode(&d, res.buf, res.len);
        out->status = nfs_xdr_get_u32(&d);
        out->has_attr = nfs_xdr_get_u32(&d) != 0;
        if (out->has_attr) {
            assert_non_null(nfs_xdr_get_fixed(&d, 20));
            out->size = nfs_xdr_get_u64(&d);
            assert_non_null(nfs_xdr_get_fixed(&d, 32));
            out->atime_s = nfs_xdr_get_u32(&d);
            out->atime_ns = nfs_xdr_get_u32(&d);
            assert_non_null(nfs_xdr_get_fixed(&d, 16));
        }
        if (out->status == 0) {
            out->count = nfs_xdr_get_u32(&d);
            out->eof = nfs_xdr_get_u32(&d) != 0;
            uint32_t dlen;
            const uint8_t *p = nfs_xdr_get_opaque(&d, &dlen, 1u << 20);
            assert_int_equal(dlen, out->count);
            out->data = malloc(dlen + 1);
            memcpy(out->data, p, dlen);
        }
        assert_false(d.err);
        assert_int_equal(d.pos, d.len);
    }
    nfs_xdr_free(&res);
}

static void expect_read(rig_t *r, const zpl_fh_t *fh, const uint8_t *file, uint64_t size,
                        uint64_t off, uint32_t count, bool memory, zpl_node_t *n)
{
    read_reply_t rr;
    read_call(r, fh, off, count, memory, &rr);
    assert_int_equal(rr.rc, 1);
    assert_int_equal(rr.status, 0);
    uint64_t want = off >= size ? 0 : (size - off < count ? size - off : count);
    assert_int_equal(rr.count, want);
    assert_int_equal(rr.eof, off + want >= size);
    assert_memory_equal(rr.data, file + off, want);
    /* Post-op attributes: the file as it is after the read. */
    zpl_attr_t a;
    assert_int_equal(zpl_getattr(n, &a), 0);
    assert_true(rr.has_attr);
    assert_int_equal(rr.size, size);
    assert_int_equal(rr.atime_s, (uint32_t)(a.atime_ns / 1000000000));
    assert_int_equal(rr.atime_ns, (uint32_t)(a.atime_ns % 1000000000));
    free(rr.data);
}

/* A READ whose records are in memory is served by nfs_rpc_execute_memory
 * (the I/O thread's path) with the same bytes and attributes as a worker's;
 * one that needs the disk, or an atime update, says NFS_RPC_WOULD_BLOCK
 * having changed nothing, and the worker's run serves it. Errors are
 * answered on the fast path too. */
static void test_read_memory_path(void **state)
{
    (void)state;
    rig_t r;
    rig_up(&r);
    const uint64_t size = 3 * 131072 + 1000; /* three whole records and a partial one */
    uint8_t *file = malloc(size);
    for (uint64_t i = 0; i < size; i++) file[i] = (uint8_t)(i * 7 + i / 4096);
    zpl_fh_t fh;
    zpl_node_t *n = rig_file(&r, "f", file, size, &fh);

    /* Just written: the atime is due (atime=on), so the first READ needs a
     * transaction and goes to a worker, and the I/O thread's try left the
     * atime alone. */
    zpl_attr_t before, after;
    assert_int_equal(zpl_getattr(n, &before), 0);
    read_reply_t rr;
    read_call(&r, &fh, 0, 65536, true, &rr);
    assert_int_equal(rr.rc, NFS_RPC_WOULD_BLOCK);
    assert_int_equal(zpl_getattr(n, &after), 0);
    assert_int_equal(after.atime_ns, before.atime_ns);
    expect_read(&r, &fh, file, size, 0, 65536, false, n);
    assert_int_equal(zpl_getattr(n, &after), 0);
    assert_true(after.atime_ns > before.atime_ns);

    /* Dirty records: served from memory, across records and to the end. */
    expect_read(&r, &fh, file, size, 65536, 131072, true, n);
    expect_read(&r, &fh, file, size, 3 * 131072 - 10, 65536, true, n);
    expect_read(&r, &fh, file, size, size + 5, 4096, true, n); /* past the end: eof */

    /* On disk only: would block, changing nothing; the worker reads it into
     * the ARC, after which the I/O thread serves it. */
    spa_txg_wait_synced(r.f.spa, 0);
    arc_purge_pool(spa_guid(r.f.spa));
    assert_int_equal(zpl_getattr(n, &before), 0);
    read_call(&r, &fh, 65536, 131072, true, &rr);
    assert_int_equal(rr.rc, NFS_RPC_WOULD_BLOCK);
    expect_read(&r, &fh, file, size, 65536, 131072, false, n);
    expect_read(&r, &fh, file, size, 65536, 131072, true, n);
    expect_read(&r, &fh, file, size, 131072, 65536, true, n);
    read_call(&r, &fh, 2 * 131072 + 100, 4096, true, &rr); /* record 2: still only on disk */
    assert_int_equal(rr.rc, NFS_RPC_WOULD_BLOCK);
    assert_int_equal(zpl_getattr(n, &after), 0);
    assert_int_equal(after.atime_ns, before.atime_ns); /* not due again yet */

    /* Errors answered on the I/O thread: a directory, a handle of a removed
     * file (with no attributes). */
    read_call(&r, &r.root, 0, 4096, true, &rr);
    assert_int_equal(rr.rc, 1);
    assert_int_equal(rr.status, 21); /* NFS3ERR_ISDIR */
    assert_true(rr.has_attr);
    zpl_node_rele(n);
    zpl_node_t *root = rig_root(&r);
    assert_int_equal(zpl_remove(root, "f", NULL), 0);
    read_call(&r, &fh, 0, 4096, true, &rr);
    assert_int_equal(rr.rc, 1);
    assert_int_equal(rr.status, 70); /* NFS3ERR_STALE */
    assert_false(rr.has_attr);

    /* Procedures that change something are never run on the I/O thread
     * (SETATTR, with nothing to set). */
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 0);
    call_header(&x, 78, 100003, 3, 2);
    nfs_xdr_put_opaque(&x, r.root.bytes, ZPL_FH_SIZE);
    for (int i = 0; i < 6; i++) nfs_xdr_put_u32(&x, 0); /* sattr3: set nothing */
    nfs_xdr_put_u32(&x, 0);                            /* no guard */
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t res;
    assert_int_equal(nfs_rpc_execute_memory(r.conn, x.buf, x.len, hdr, &hlen, &res),
                     NFS_RPC_WOULD_BLOCK);
    nfs_xdr_free(&res);
    nfs_xdr_free(&x);

    zpl_node_rele(root);
    free(file);
    rig_down(&r);
}

/* ---- NFSv3 calls that only read, on the I/O thread ---- */

/* Runs procedure proc of NFS version vers with arguments args (encoded after
 * the call header) on the I/O thread's path (memory) or a worker's; returns
 * the rc and, for a reply, its body (malloc'd, *blen bytes) and status (the
 * first word: an NFSv3 status, a COMPOUND's overall status). */
static int nfs_run(rig_t *r, uint32_t vers, uint32_t proc, const nfs_xdr_t *args, bool memory,
                   uint8_t **body, size_t *blen, uint32_t *status)
{
    /* Each run a new call (its own XID): a repeated XID with the same
     * arguments would be a retransmission, answered from the DRC. */
    static uint32_t next_xid = 1000;
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 0);
    call_header(&x, next_xid++, 100003, vers, proc);
    nfs_xdr_put_fixed(&x, args->buf, (uint32_t)args->len);
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t res;
    int rc = execute(r, &x, memory, hdr, &hlen, &res);
    nfs_xdr_free(&x);
    *body = NULL;
    *blen = 0;
    if (rc == 1) {
        nfs_xdr_flatten(&res);
        *body = malloc(res.len + 1);
        memcpy(*body, res.buf, res.len);
        *blen = res.len;
        nfs_xdr_t d;
        nfs_xdr_init_decode(&d, res.buf, res.len);
        *status = nfs_xdr_get_u32(&d);
    }
    nfs_xdr_free(&res);
    return rc;
}

/* The call answered on the I/O thread, byte for byte as a worker answers it
 * (nothing changes between the two runs); returns its status. */
static uint32_t same_both_ways(rig_t *r, uint32_t vers, uint32_t proc, const nfs_xdr_t *args)
{
    uint8_t *fast, *slow;
    size_t flen, slen;
    uint32_t fst = 0, sst = 0;
    assert_int_equal(nfs_run(r, vers, proc, args, true, &fast, &flen, &fst), 1);
    assert_int_equal(nfs_run(r, vers, proc, args, false, &slow, &slen, &sst), 1);
    assert_int_equal(fst, sst);
    assert_int_equal(flen, slen);
    assert_memory_equal(fast, slow, flen);
    free(fast);
    free(slow);
    return fst;
}

/* rig_up() with a small file "f" in the export's root (released by the caller). */
static zpl_node_t *rig_up_with_file(rig_t *r, zpl_fh_t *fh)
{
    rig_up(r);
    uint8_t data[100];
    memset(data, 7, sizeof data);
    return rig_file(r, "f", data, sizeof data, fh);
}

/* GETATTR, LOOKUP, ACCESS and READLINK run on the I/O thread when what they
 * read is in memory, with the worker's answer, errors included; a call that
 * would read a block from the disk is refused below the ZPL and goes to a
 * worker with nothing produced, after which the I/O thread serves it. */
static void test_metadata_memory_path(void **state)
{
    (void)state;
    rig_t r;
    zpl_fh_t ffh;
    zpl_node_t *file = rig_up_with_file(&r, &ffh);
    zpl_node_t *root = rig_root(&r), *link;
    char target[901];
    for (int i = 0; i < 900; i++) target[i] = (char)('a' + i % 26); /* too long to sit in the bonus */
    target[900] = 0;
    assert_int_equal(zpl_symlink(root, "l", target, &zfix_cred, &link, NULL), 0);
    zpl_fh_t lfh;
    assert_int_equal(zpl_fh_encode(link, &lfh), 0);

    nfs_xdr_t a;
    nfs_xdr_init_encode(&a, 0); /* GETATTR root, GETATTR file */
    nfs_xdr_put_opaque(&a, r.root.bytes, ZPL_FH_SIZE);
    assert_int_equal(same_both_ways(&r, 3, 1, &a), 0);
    nfs_xdr_free(&a);
    nfs_xdr_init_encode(&a, 0);
    nfs_xdr_put_opaque(&a, ffh.bytes, ZPL_FH_SIZE);
    assert_int_equal(same_both_ways(&r, 3, 1, &a), 0);
    nfs_xdr_free(&a);
    nfs_xdr_init_encode(&a, 0); /* LOOKUP f, LOOKUP of a name that is not there */
    nfs_xdr_put_opaque(&a, r.root.bytes, ZPL_FH_SIZE);
    nfs_xdr_put_string(&a, "f");
    assert_int_equal(same_both_ways(&r, 3, 3, &a), 0);
    nfs_xdr_free(&a);
    nfs_xdr_init_encode(&a, 0);
    nfs_xdr_put_opaque(&a, r.root.bytes, ZPL_FH_SIZE);
    nfs_xdr_put_string(&a, "nothing-here");
    assert_int_equal(same_both_ways(&r, 3, 3, &a), 2); /* NFS3ERR_NOENT */
    nfs_xdr_free(&a);
    nfs_xdr_init_encode(&a, 0); /* ACCESS file: read, modify, execute */
    nfs_xdr_put_opaque(&a, ffh.bytes, ZPL_FH_SIZE);
    nfs_xdr_put_u32(&a, 0x1 | 0x4 | 0x20);
    assert_int_equal(same_both_ways(&r, 3, 4, &a), 0);
    nfs_xdr_free(&a);

    /* READLINK: the target is in a block of its own. Once only on disk, the
     * I/O thread's try is refused; the worker's read caches it. */
    spa_txg_wait_synced(r.f.spa, 0);
    arc_purge_pool(spa_guid(r.f.spa));
    nfs_xdr_init_encode(&a, 0);
    nfs_xdr_put_opaque(&a, lfh.bytes, ZPL_FH_SIZE);
    uint8_t *body;
    size_t blen;
    uint32_t st = 99;
    assert_int_equal(nfs_run(&r, 3, 5, &a, true, &body, &blen, &st), NFS_RPC_WOULD_BLOCK);
    assert_null(body);
    assert_int_equal(nfs_run(&r, 3, 5, &a, false, &body, &blen, &st), 1);
    assert_int_equal(st, 0);
    assert_non_null(memmem(body, blen, target, 900));
    free(body);
    assert_int_equal(same_both_ways(&r, 3, 5, &a), 0);
    nfs_xdr_free(&a);
    /* The mode ended with the call: this thread reads the disk again. */
    arc_purge_pool(spa_guid(r.f.spa));
    char back[1024];
    size_t blen2 = 0;
    assert_int_equal(zpl_readlink(link, back, sizeof back, &blen2), 0);
    assert_int_equal(blen2, 900);

    zpl_node_rele(link);
    zpl_node_rele(file);
    zpl_node_rele(root);
    rig_down(&r);
}

/* LOOKUP of name in the directory of handle dir on the I/O thread's path
 * (memory) or a worker's; returns the rc, and for a reply its status and the
 * handle found (into *out). */
static int lookup3(rig_t *r, const uint8_t *dir, const char *name, bool memory, uint32_t *status,
                   uint8_t out[ZPL_FH_SIZE])
{
    nfs_xdr_t a;
    nfs_xdr_init_encode(&a, 0);
    nfs_xdr_put_opaque(&a, dir, ZPL_FH_SIZE);
    nfs_xdr_put_string(&a, name);
    uint8_t *body;
    size_t blen;
    int rc = nfs_run(r, 3, 3, &a, memory, &body, &blen, status);
    nfs_xdr_free(&a);
    if (rc == 1 && *status == 0) {
        nfs_xdr_t d;
        nfs_xdr_init_decode(&d, body, blen);
        (void)nfs_xdr_get_u32(&d);
        uint32_t len;
        const uint8_t *fh = nfs_xdr_get_opaque(&d, &len, 64);
        assert_int_equal(len, ZPL_FH_SIZE);
        memcpy(out, fh, ZPL_FH_SIZE);
    }
    free(body);
    return rc;
}

/* A snapshot reached through the control directory: the I/O thread answers
 * the control and snapshot directories itself, does not mount a snapshot
 * (that takes the pool's configuration lock, and reads the snapshot's object
 * set, which the memory-only mode refuses too when it is not in memory), and
 * once a worker has mounted it serves its lookups and attributes like any
 * others. */
static void test_snapshot_memory_path(void **state)
{
    (void)state;
    rig_t r;
    zpl_fh_t ffh;
    zpl_node_t *file = rig_up_with_file(&r, &ffh);
    char snap[200], err[256];
    snprintf(snap, sizeof snap, "%s@s1", r.f.fsname);
    assert_int_equal(dsl_snapshot(r.f.dp, snap, false, err, sizeof err), 0);
    uint8_t ctl[ZPL_FH_SIZE], sd[ZPL_FH_SIZE], s1[ZPL_FH_SIZE], s1b[ZPL_FH_SIZE], f1[ZPL_FH_SIZE];
    uint32_t st = 99;
    assert_int_equal(lookup3(&r, r.root.bytes, ZPL_CTLDIR_NAME, true, &st, ctl), 1);
    assert_int_equal(st, 0);
    assert_int_equal(lookup3(&r, ctl, "snapshot", true, &st, sd), 1);
    assert_int_equal(st, 0);
    assert_int_equal(lookup3(&r, sd, "s1", true, &st, s1), NFS_RPC_WOULD_BLOCK);
    assert_int_equal(lookup3(&r, sd, "s1", false, &st, s1), 1);
    assert_int_equal(st, 0);
    assert_int_equal(lookup3(&r, sd, "s1", true, &st, s1b), 1); /* mounted now */
    assert_int_equal(st, 0);
    assert_memory_equal(s1, s1b, ZPL_FH_SIZE);
    assert_int_equal(lookup3(&r, s1, "f", true, &st, f1), 1);
    assert_int_equal(st, 0);
    /* The snapshot's name is checked under the pool's lock: while a txg sync
     * (here: another thread) holds it, the I/O thread's try is refused and leaves
     * the mount as it was. */
    lock_holder_t sync;
    lock_holder_start(&sync, &r.f.dp->lock);
    assert_int_equal(lookup3(&r, sd, "s1", true, &st, s1b), NFS_RPC_WOULD_BLOCK);
    lock_holder_stop(&sync);
    assert_int_equal(lookup3(&r, sd, "s1", true, &st, s1b), 1);
    assert_int_equal(st, 0);
    assert_memory_equal(s1, s1b, ZPL_FH_SIZE);
    nfs_xdr_t a;
    nfs_xdr_init_encode(&a, 0);
    nfs_xdr_put_opaque(&a, f1, ZPL_FH_SIZE);
    assert_int_equal(same_both_ways(&r, 3, 1, &a), 0);
    nfs_xdr_free(&a);
    zpl_node_rele(file);
    rig_down(&r);
}

/* A 4.0 COMPOUND that resolves the export's root and file f and asks for
 * attributes: PUTROOTFH, LOOKUP x, LOOKUP f, GETFH, GETATTR (type, size,
 * fileid, and space_avail when space), ACCESS read. */
static void meta4_args(nfs_xdr_t *a, bool space)
{
    nfs_xdr_init_encode(a, 0);
    nfs_xdr_put_opaque(a, "", 0);
    nfs_xdr_put_u32(a, 0); /* minor */
    nfs_xdr_put_u32(a, 6);
    nfs_xdr_put_u32(a, 24); /* PUTROOTFH */
    nfs_xdr_put_u32(a, 15); /* LOOKUP */
    nfs_xdr_put_string(a, "x");
    nfs_xdr_put_u32(a, 15);
    nfs_xdr_put_string(a, "f");
    nfs_xdr_put_u32(a, 10); /* GETFH */
    nfs_xdr_put_u32(a, 9);  /* GETATTR: type (1), size (4), fileid (20); space_avail (42) */
    nfs_xdr_put_u32(a, 2);
    nfs_xdr_put_u32(a, 1u << 1 | 1u << 4 | 1u << 20);
    nfs_xdr_put_u32(a, space ? 1u << (42 - 32) : 0);
    nfs_xdr_put_u32(a, 3);  /* ACCESS read */
    nfs_xdr_put_u32(a, 1);
}

/* The same for NFSv4.0: a COMPOUND that only looks up and reads attributes
 * runs on the I/O thread with the worker's answer, the space attributes too
 * while the pool's lock is free; while a txg sync holds it, one asking for
 * them goes to a worker. */
static void test_metadata4_memory_path(void **state)
{
    (void)state;
    rig_t r;
    zpl_fh_t ffh;
    zpl_node_t *file = rig_up_with_file(&r, &ffh);
    nfs_xdr_t a;
    meta4_args(&a, false);
    assert_int_equal(same_both_ways(&r, 4, 1, &a), 0);
    nfs_xdr_free(&a);
    meta4_args(&a, true);
    assert_int_equal(same_both_ways(&r, 4, 1, &a), 0); /* the pool's lock free: answered */
    uint8_t *body;
    size_t blen;
    uint32_t st = 99;
    lock_holder_t sync;
    lock_holder_start(&sync, &r.f.dp->lock); /* held, as a txg sync holds it: refused */
    assert_int_equal(nfs_run(&r, 4, 1, &a, true, &body, &blen, &st), NFS_RPC_WOULD_BLOCK);
    lock_holder_stop(&sync);
    assert_int_equal(nfs_run(&r, 4, 1, &a, false, &body, &blen, &st), 1);
    assert_int_equal(st, 0);
    free(body);
    nfs_xdr_free(&a);
    zpl_node_rele(file);
    rig_down(&r);
}

/* An NFSv4 COMPOUND (minor, PUTFH fh, [COMMIT of nothing when extra_op: an
 * operation that may wait], READ with the
 * anonymous stateid); returns the rpc rc, and for a reply the READ's status,
 * bytes (malloc'd into *data) and eof. */
static int read4_call(rig_t *r, uint32_t minor, const zpl_fh_t *fh, uint64_t off, uint32_t count,
                      bool extra_op, bool memory, uint32_t *status, uint8_t **data,
                      uint32_t *dlen, bool *eof)
{
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 0);
    call_header(&x, 79, 100003, 4, 1);
    nfs_xdr_put_opaque(&x, "", 0);
    nfs_xdr_put_u32(&x, minor);
    nfs_xdr_put_u32(&x, extra_op ? 3 : 2);
    nfs_xdr_put_u32(&x, 22); /* PUTFH */
    nfs_xdr_put_opaque(&x, fh->bytes, ZPL_FH_SIZE);
    if (extra_op) {
        nfs_xdr_put_u32(&x, 5); /* COMMIT offset 0, count 0 */
        nfs_xdr_put_u64(&x, 0);
        nfs_xdr_put_u32(&x, 0);
    }
    nfs_xdr_put_u32(&x, 25); /* READ */
    for (int i = 0; i < 4; i++) nfs_xdr_put_u32(&x, 0); /* anonymous stateid */
    nfs_xdr_put_u64(&x, off);
    nfs_xdr_put_u32(&x, count);
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t res;
    int rc = execute(r, &x, memory, hdr, &hlen, &res);
    nfs_xdr_free(&x);
    *data = NULL;
    if (rc == 1) {
        nfs_xdr_flatten(&res);
        nfs_xdr_t d;
        nfs_xdr_init_decode(&d, res.buf, res.len);
        uint32_t all = nfs_xdr_get_u32(&d), tl;
        nfs_xdr_get_opaque(&d, &tl, 64);
        uint32_t numres = nfs_xdr_get_u32(&d);
        assert_int_equal(nfs_xdr_get_u32(&d), 22);
        assert_int_equal(nfs_xdr_get_u32(&d), 0);
        assert_int_equal(numres, 2);
        assert_int_equal(nfs_xdr_get_u32(&d), 25);
        *status = nfs_xdr_get_u32(&d);
        assert_int_equal(*status, all);
        if (*status == 0) {
            *eof = nfs_xdr_get_u32(&d) != 0;
            const uint8_t *p = nfs_xdr_get_opaque(&d, dlen, 1u << 20);
            *data = malloc(*dlen + 1);
            memcpy(*data, p, *dlen);
        }
        assert_false(d.err);
    }
    nfs_xdr_free(&res);
    return rc;
}

/* The same over NFSv4.0: PUTFH+READ runs on the I/O thread from memory;
 * a miss, a 4.1 compound or another operation goes to a worker. */
static void test_read4_memory_path(void **state)
{
    (void)state;
    rig_t r;
    rig_up(&r);
    const uint64_t size = 2 * 131072 + 77;
    uint8_t *file = malloc(size);
    for (uint64_t i = 0; i < size; i++) file[i] = (uint8_t)(i * 13 + i / 999);
    zpl_fh_t fh;
    zpl_node_t *n = rig_file(&r, "g", file, size, &fh);
    uint32_t st, len;
    uint8_t *data;
    bool eof;
    /* atime due: to a worker, which updates it. */
    assert_int_equal(read4_call(&r, 0, &fh, 0, 4096, false, true, &st, &data, &len, &eof),
                     NFS_RPC_WOULD_BLOCK);
    assert_int_equal(read4_call(&r, 0, &fh, 0, 4096, false, false, &st, &data, &len, &eof), 1);
    assert_int_equal(st, 0);
    free(data);
    /* In memory: served, across records, to the end. */
    assert_int_equal(read4_call(&r, 0, &fh, 100000, 200000, false, true, &st, &data, &len, &eof),
                     1);
    assert_int_equal(st, 0);
    assert_int_equal(len, size - 100000);
    assert_true(eof);
    assert_memory_equal(data, file + 100000, len);
    free(data);
    /* Operations that may change or wait never run there. */
    assert_int_equal(read4_call(&r, 0, &fh, 0, 4096, true, true, &st, &data, &len, &eof),
                     NFS_RPC_WOULD_BLOCK);
    /* On disk only: would block; the worker's read caches it. */
    spa_txg_wait_synced(r.f.spa, 0);
    arc_purge_pool(spa_guid(r.f.spa));
    assert_int_equal(read4_call(&r, 0, &fh, 0, 8192, false, true, &st, &data, &len, &eof),
                     NFS_RPC_WOULD_BLOCK);
    assert_int_equal(read4_call(&r, 0, &fh, 0, 8192, false, false, &st, &data, &len, &eof), 1);
    assert_memory_equal(data, file, 8192);
    free(data);
    assert_int_equal(read4_call(&r, 0, &fh, 4096, 8192, false, true, &st, &data, &len, &eof), 1);
    assert_int_equal(st, 0);
    assert_false(eof);
    assert_memory_equal(data, file + 4096, 8192);
    free(data);
    /* An error on the I/O thread: READ of a directory. */
    assert_int_equal(read4_call(&r, 0, &r.root, 0, 4096, false, true, &st, &data, &len, &eof), 1);
    assert_int_equal(st, 21); /* NFS4ERR_ISDIR */
    zpl_node_rele(n);
    free(file);
    rig_down(&r);
}


/* ---- READ data lent by the ARC (nfs_xdr_lend) ---- */

/* Spans over a reply: nfs_xdr_iov from every offset yields the reply's
 * bytes (buffer where no span lies, the span's bytes where one does), and
 * truncating before a span drops it. */
static void test_lent_spans_iov(void **state)
{
    (void)state;
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 0);
    uint8_t *p = nfs_xdr_reserve(&x, 100);
    memset(p, 'b', 100);
    cairn_rbuf_t *a = cairn_rbuf_new(NULL, 40), *b = cairn_rbuf_new(NULL, 40);
    memset(a->data, 'A', 40);
    memset(b->data, 'B', 40);
    cairn_span_t sv[2];
    cairn_spans_t sp = {.v = sv, .cap = 2};
    cairn_spans_add(&sp, 10, a->data + 5, 20, a);       /* reply [30, 50) */
    cairn_spans_add(&sp, 30, b->data, 30, cairn_rbuf_hold(b)); /* [50, 80), back to back */
    nfs_xdr_lend(&x, 20, &sp);
    assert_int_equal(sp.n, 0);
    assert_int_equal(x.lent.n, 2);
    uint8_t want[100], got[100];
    memset(want, 'b', 100);
    memset(want + 30, 'A', 20);
    memset(want + 50, 'B', 30);
    for (size_t skip = 0; skip <= 100; skip++) {
        memset(got, 0, sizeof got);
        nfs_xdr_copy_out(&x, skip, 100 - skip, got);
        assert_memory_equal(got, want + skip, 100 - skip);
        struct iovec iov[2];
        size_t n = nfs_xdr_iov(&x, skip, iov, 2), total = 0;
        assert_true(n <= 2);
        for (size_t i = 0; i < n; i++) total += iov[i].iov_len;
        assert_true(skip == 100 ? n == 0 : total > 0);
    }
    assert_int_equal(atomic_load(&b->refs), 2);
    nfs_xdr_truncate(&x, 50); /* rewound to b's start: it goes, a's stays */
    assert_int_equal(x.lent.n, 1);
    assert_int_equal(atomic_load(&b->refs), 1);
    nfs_xdr_flatten(&x);
    assert_int_equal(x.lent.n, 0);
    assert_memory_equal(x.buf, want, 50);
    cairn_rbuf_rele(b);
    nfs_xdr_free(&x);
}

/* An NFSv3 READ served from the ARC lends the records' buffers to the reply
 * instead of copying them. While the reply is unsent the file is rewritten
 * and synced (its old blocks freed and out of the ARC), the ARC purged and
 * refilled: the reply still carries the old bytes, and it alone holds them. A
 * record dirty in memory is copied, so a later write does not change a reply
 * already built. */
static void test_read_lends_and_holds(void **state)
{
    (void)state;
    rig_t r;
    rig_up(&r);
    const uint64_t rs = 131072, size = 4 * rs;
    uint8_t *v1 = malloc(size), *v2 = malloc(size), *v3 = malloc(size), *flat = malloc(size + 4096);
    uint64_t x = 12345;
    for (uint64_t i = 0; i < size; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        /* records 0 and 2 incompressible, 1 and 3 compressible (lz4) */
        v1[i] = (i / rs) % 2 ? (uint8_t)(i / 64) : (uint8_t)(x >> 56);
        v2[i] = (uint8_t)~v1[i];
        v3[i] = (uint8_t)(v1[i] ^ 0x5a);
    }
    zpl_fh_t fh;
    zpl_node_t *n = rig_file(&r, "h", v1, size, &fh);
    zpl_wcc_t wcc;
    spa_txg_wait_synced(r.f.spa, 0);
    /* Into the ARC, then hot (the compressed records get their copies). */
    for (int i = 0; i < 3; i++) expect_read(&r, &fh, v1, size, 0, (uint32_t)size, false, n);

    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen = 0;
    nfs_xdr_t call, res;
    nfs_xdr_init_encode(&call, 0);
    call_header(&call, 90, 100003, 3, 6);
    nfs_xdr_put_opaque(&call, fh.bytes, ZPL_FH_SIZE);
    nfs_xdr_put_u64(&call, 1000);
    nfs_xdr_put_u32(&call, (uint32_t)(size - 2000));
    assert_int_equal(nfs_rpc_execute_memory(r.conn, call.buf, call.len, hdr, &hlen, &res), 1);
    assert_int_equal(res.lent.n, 4); /* every record lent, the edges too (>= DMU_LEND_MIN) */
    size_t data_at = res.len - (size - 2000);

    /* Rewrite, sync (the old blocks are freed), purge and refill the ARC. */
    assert_int_equal(zpl_write(n, 0, size, v2, 0, &wcc), 0);
    spa_txg_wait_synced(r.f.spa, 0);
    arc_purge_pool(spa_guid(r.f.spa));
    for (int i = 0; i < 3; i++) expect_read(&r, &fh, v2, size, 0, (uint32_t)size, false, n);
    nfs_xdr_copy_out(&res, data_at, size - 2000, flat);
    assert_memory_equal(flat, v1 + 1000, size - 2000);
    for (size_t i = 0; i < res.lent.n; i++) assert_int_equal(atomic_load(&res.lent.v[i].buf->refs), 1);
    nfs_xdr_free(&res);

    /* Dirty records are copied: rewriting them again leaves the reply alone.
     * The held txg keeps record 0 dirty whatever the sync timer does. */
    uint64_t held = spa_tx_hold(r.f.spa);
    assert_int_equal(zpl_write(n, 0, rs, v3, 0, &wcc), 0);
    nfs_xdr_free(&call);
    nfs_xdr_init_encode(&call, 0);
    call_header(&call, 91, 100003, 3, 6);
    nfs_xdr_put_opaque(&call, fh.bytes, ZPL_FH_SIZE);
    nfs_xdr_put_u64(&call, 0);
    nfs_xdr_put_u32(&call, (uint32_t)(2 * rs));
    /* (on a worker: the write made the atime due) */
    assert_int_equal(nfs_rpc_execute(r.conn, call.buf, call.len, hdr, &hlen, &res), 1);
    assert_int_equal(res.lent.n, 1); /* record 1 from the ARC; record 0 dirty, copied */
    assert_int_equal(res.lent.v[0].pos, res.len - rs);
    assert_int_equal(zpl_write(n, 0, rs, v1, 0, &wcc), 0);
    nfs_xdr_copy_out(&res, res.len - 2 * rs, 2 * rs, flat);
    assert_memory_equal(flat, v3, rs);
    assert_memory_equal(flat + rs, v2 + rs, rs);
    spa_tx_rele(r.f.spa, held);
    nfs_xdr_free(&res);
    nfs_xdr_free(&call);

    zpl_node_rele(n);
    free(v1);
    free(v2);
    free(v3);
    free(flat);
    rig_down(&r);
}

static uint64_t rnd_state;
static uint32_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return (uint32_t)(rnd_state >> 11);
}

static void test_random_garbage(void **state)
{
    (void)state;
    const char *seed = getenv("CAIRN_TEST_SEED");
    rnd_state = seed ? strtoull(seed, NULL, 10) * 2654435761u + 1 : 0x5eed5eed5eedull;
    unsigned rounds = getenv("CAIRN_TEST_LONG") && !strcmp(getenv("CAIRN_TEST_LONG"), "1")
                          ? 200000 : 6000;
    rig_t r;
    rig_up(&r);
    uint8_t junk[2048];
    static const uint32_t progs[] = {100003, 100005, 100000};
    for (unsigned i = 0; i < rounds; i++) {
        nfs_xdr_t x;
        nfs_xdr_init_encode(&x, 0);
        uint32_t prog = progs[rnd() % 3];
        uint32_t vers = prog == 100003 ? 3 : prog == 100005 ? (rnd() % 2 ? 3 : 1) : 2 + rnd() % 3;
        uint32_t proc = rnd() % 23;
        call_header(&x, i, prog, vers, proc);
        size_t hdr_len = x.len;
        unsigned kind = rnd() % 5;
        if (kind <= 2) nfs_xdr_put_opaque(&x, r.root.bytes, ZPL_FH_SIZE);
        size_t jl = rnd() % (kind == 4 ? sizeof junk : 96);
        for (size_t k = 0; k < jl; k++) junk[k] = (uint8_t)rnd();
        /* Names and small counts now and then, so real work happens too. */
        if (kind == 1) {
            nfs_xdr_put_string(&x, rnd() % 2 ? "f" : "..");
            jl = jl % 40;
        }
        nfs_xdr_put_fixed(&x, junk, (uint32_t)jl);
        size_t len = x.len;
        bool header_intact = true;
        if (kind == 3 && len) {
            for (int k = 0; k < 3; k++) x.buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
            header_intact = false;
        }
        if (rnd() % 4 == 0) len = rnd() % (len + 1); /* truncated */
        if (len < hdr_len) header_intact = false;
        int got = run(&r, x.buf, len, i, header_intact);
        if (header_intact) assert_true(got >= 0 || got == -2);
        nfs_xdr_free(&x);
    }
    /* Still serving: GETATTR of the root. */
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 0);
    call_header(&x, 42, 100003, 3, 1);
    nfs_xdr_put_opaque(&x, r.root.bytes, ZPL_FH_SIZE);
    assert_int_equal(run(&r, x.buf, x.len, 42, true), 0);
    nfs_xdr_free(&x);
    rig_down(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cursor),
        cmocka_unit_test(test_accept_status),
        cmocka_unit_test(test_read_memory_path),
        cmocka_unit_test(test_metadata_memory_path),
        cmocka_unit_test(test_read4_memory_path),
        cmocka_unit_test(test_metadata4_memory_path),
        cmocka_unit_test(test_snapshot_memory_path),
        cmocka_unit_test(test_lent_spans_iov),
        cmocka_unit_test(test_read_lends_and_holds),
        cmocka_unit_test(test_random_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
