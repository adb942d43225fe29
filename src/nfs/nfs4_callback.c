/*
 * NFSv4 callbacks (RFC 8881 §20, RFC 7530 §16.2): the server calling its
 * clients to recall delegations (CB_RECALL), to ask the holder of a write
 * delegation for the file's size and change attribute (CB_GETATTR), and to
 * probe a 4.0 client's callback address (CB_NULL).
 *
 * One callback thread per server works through a queue, one call at a time:
 * a recall never waits in the request that caused it (that request answers
 * NFS4ERR_DELAY and is retried), and one back-channel slot per session is
 * then all a client needs (calls are never concurrent).
 *
 * 4.1 and later: the back channel is a connection the client opened for its
 * fore channel and bound to the session for callbacks (CREATE_SESSION with
 * CREATE_SESSION4_FLAG_CONN_BACK_CHAN, BIND_CONN_TO_SESSION with CDFC4_BACK).
 * The thread sends CB_COMPOUND (CB_SEQUENCE, CB_RECALL) on that connection
 * through the transport like a reply, and the connection's reader hands the
 * records that are RPC replies to nfs4_cb_reply, which matches the xid of the
 * call waiting. A call that gets no answer (connection gone, client silent)
 * unbinds the back channel: the client learns of it from SEQUENCE
 * (SEQ4_STATUS_CB_PATH_DOWN_SESSION) and may bind another connection.
 *
 * 4.0: SETCLIENTID names a callback address; the server connects to it (a
 * connection of its own, made per call), first with CB_NULL after the client
 * is confirmed. Only a client whose probe answered gets delegations.
 *
 * A recall that goes unanswered is not retried: the delegation is revoked a
 * lease after the recall by the conflicting request's retry (nfs4_deleg.c).
 *
 * CB_GETATTR is the one call a request waits for: the GETATTR of another
 * client needs its answer (nfs4_deleg_getattr). That request runs on a worker
 * (never the I/O thread, which reads the replies) and waits on the job's
 * cb_waiter_t; it gives up after CB_GETATTR_WAIT and unhooks itself, so the
 * job, freed only by the thread that ran it, never writes to a waiter gone.
 */
#include "nfs4_impl.h"

#include <cairn/log.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define SUB "nfs4"

enum { CB_NULL = 0, CB_COMPOUND = 1 };
enum { OP_CB_GETATTR = 3, OP_CB_RECALL = 4, OP_CB_SEQUENCE = 11 };
enum { CB_JOB_RECALL, CB_JOB_PROBE, CB_JOB_GETATTR };
/* Seconds a callback waits for its answer. */
#define CB_REPLY_TIMEOUT 5
/* Seconds a request waits for its CB_GETATTR: its own call and one queued ahead. */
#define CB_GETATTR_WAIT (2 * CB_REPLY_TIMEOUT + 1)

/* A request waiting for its callback's result (CB_GETATTR). */
typedef struct cb_waiter {
    bool done;
    uint32_t status;
    nfs4_cb_attrs_t attrs;
} cb_waiter_t;

typedef struct cb_job {
    struct cb_job *next;
    int kind;
    uint64_t clientid;
    nfs4_stateid_t sid;
    uint8_t fh[ZPL_FH_SIZE];
    uint32_t status;                  /* the operation's (SERVERFAULT: no answer) */
    nfs4_cb_attrs_t attrs;            /* GETATTR's answer */
    cb_waiter_t *waiter;              /* under nfs4_cb_t.lock; NULL: nobody waits */
} cb_job_t;

typedef struct nfs4_cb {
    nfs4_server_t *st;
    pthread_t thread;
    bool started, stopping;
    pthread_mutex_t lock;             /* everything below */
    pthread_cond_t cv;
    cb_job_t *head, *tail;
    uint32_t next_xid;
    /* The back-channel call waiting for its reply (nfs4_cb_reply). */
    bool waiting;
    uint32_t wait_xid;
    uint8_t *reply;
    size_t reply_len;
} nfs4_cb_t;

/* ---------------------------------------------------------------- security */

uint32_t nfs4_cb_sec_decode(nfs_xdr_t *a, nfs4_cb_sec_t *out)
{
    memset(out, 0, sizeof *out);
    out->flavor = NFS_AUTH_NONE;
    uint32_t n = nfs_xdr_get_u32(a), l;
    if (n > 16) return NFS4ERR_BADXDR;
    for (uint32_t i = 0; i < n && !a->err; i++) {
        uint32_t flavor = nfs_xdr_get_u32(a);
        if (flavor == NFS_AUTH_SYS) {
            size_t start = a->pos;
            (void)nfs_xdr_get_u32(a);                 /* stamp */
            (void)nfs_xdr_get_opaque(a, &l, 255);     /* machine name */
            (void)nfs_xdr_get_u32(a);
            (void)nfs_xdr_get_u32(a);
            uint32_t ng = nfs_xdr_get_u32(a);
            if (ng > 16) return NFS4ERR_BADXDR;
            for (uint32_t k = 0; k < ng; k++) (void)nfs_xdr_get_u32(a);
            size_t len = a->pos - start;
            if (!a->err && out->flavor != NFS_AUTH_SYS && len <= sizeof out->body) {
                out->flavor = NFS_AUTH_SYS;
                out->len = (uint32_t)len;
                memcpy(out->body, a->buf + start, len);
            }
        } else if (flavor == 6) {                     /* RPCSEC_GSS: not offered by us */
            (void)nfs_xdr_get_u32(a);
            (void)nfs_xdr_get_opaque(a, &l, NFS4_OPAQUE_LIMIT);
            (void)nfs_xdr_get_opaque(a, &l, NFS4_OPAQUE_LIMIT);
        } else if (flavor != NFS_AUTH_NONE) {
            return NFS4ERR_BADXDR;
        }
    }
    return a->err ? NFS4ERR_BADXDR : NFS4_OK;
}

/* ---------------------------------------------------------------- paths */

void nfs4_cb_bind(nfs4_session_t *s, nfs_conn_t *conn)
{
    if (s->back_conn == conn) return;
    if (conn) nfs_conn_hold(conn);
    if (s->back_conn) nfs_conn_put(s->back_conn);
    s->back_conn = conn;
}

static nfs4_session_t *live_back_channel(nfs4_client_t *c)
{
    for (nfs4_session_t *s = c->sessions; s; s = s->next)
        if (s->back_conn && !nfs_conn_closed(s->back_conn)) return s;
    return NULL;
}

bool nfs4_cb_path_up(nfs4_client_t *c)
{
    return c->minor >= 1 ? live_back_channel(c) != NULL : c->cb_up;
}

bool nfs4_cb_parse_addr(const uint8_t *netid, uint32_t nlen, const uint8_t *uaddr,
                        uint32_t ulen, struct sockaddr_storage *ss, socklen_t *sl)
{
    char net[8], u[128];
    if (!netid || !uaddr || nlen >= sizeof net || ulen >= sizeof u || ulen == 0) return false;
    memcpy(net, netid, nlen);
    net[nlen] = 0;
    memcpy(u, uaddr, ulen);
    u[ulen] = 0;
    /* The universal address ends with the port as two decimal bytes. */
    char *d2 = strrchr(u, '.');
    if (!d2) return false;
    *d2 = 0;
    char *d1 = strrchr(u, '.');
    if (!d1) return false;
    *d1 = 0;
    unsigned hi = (unsigned)atoi(d1 + 1), lo = (unsigned)atoi(d2 + 1);
    if (hi > 255 || lo > 255) return false;
    uint16_t port = (uint16_t)(hi << 8 | lo);
    memset(ss, 0, sizeof *ss);
    if (!strcmp(net, "tcp")) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        if (inet_pton(AF_INET, u, &in->sin_addr) != 1) return false;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        *sl = sizeof *in;
        return true;
    }
    if (!strcmp(net, "tcp6")) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET6, u, &in6->sin6_addr) != 1) return false;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        *sl = sizeof *in6;
        return true;
    }
    return false;
}

/* ---------------------------------------------------------------- queue */

static void enqueue(nfs4_server_t *st, cb_job_t *j)
{
    nfs4_cb_t *cb = st->cb;
    if (!cb) {
        free(j);
        return;
    }
    pthread_mutex_lock(&cb->lock);
    if (cb->tail) cb->tail->next = j;
    else cb->head = j;
    cb->tail = j;
    pthread_cond_broadcast(&cb->cv);
    pthread_mutex_unlock(&cb->lock);
}

void nfs4_cb_recall(nfs4_server_t *st, nfs4_stid_t *s)
{
    cb_job_t *j = calloc(1, sizeof *j);
    zpl_fh_t fh;
    if (!j || zpl_fh_encode(s->file->node, &fh) < 0) {
        free(j);
        return;   /* unanswered: revoked a lease from now */
    }
    j->kind = CB_JOB_RECALL;
    j->clientid = s->client->clientid;
    nfs4_stid_to_wire(st, s, &j->sid);
    memcpy(j->fh, fh.bytes, ZPL_FH_SIZE);
    enqueue(st, j);
}

void nfs4_cb_probe(nfs4_server_t *st, nfs4_client_t *c)
{
    c->cb_up = false;
    if (!c->cb_addr_len) return;
    cb_job_t *j = calloc(1, sizeof *j);
    if (!j) return;
    j->kind = CB_JOB_PROBE;
    j->clientid = c->clientid;
    enqueue(st, j);
}

/* ---------------------------------------------------------------- encoding */

/* The RPC call header of a callback: program prog version 1. */
static void put_call_header(nfs_xdr_t *x, uint32_t xid, uint32_t prog, uint32_t proc,
                            const nfs4_cb_sec_t *sec)
{
    nfs_xdr_put_u32(x, xid);
    nfs_xdr_put_u32(x, 0);                            /* CALL */
    nfs_xdr_put_u32(x, 2);
    nfs_xdr_put_u32(x, prog);
    nfs_xdr_put_u32(x, 1);
    nfs_xdr_put_u32(x, proc);
    if (sec && sec->flavor == NFS_AUTH_SYS) {
        nfs_xdr_put_u32(x, NFS_AUTH_SYS);
        nfs_xdr_put_opaque(x, sec->body, sec->len);
    } else {
        nfs_xdr_put_u32(x, NFS_AUTH_NONE);
        nfs_xdr_put_u32(x, 0);
    }
    nfs_xdr_put_u32(x, NFS_AUTH_NONE);                /* verifier */
    nfs_xdr_put_u32(x, 0);
}

static void put_cb_recall(nfs_xdr_t *x, const cb_job_t *j)
{
    nfs_xdr_put_u32(x, OP_CB_RECALL);
    nfs_xdr_put_u32(x, j->sid.seqid);
    nfs_xdr_put_fixed(x, j->sid.other, 12);
    nfs_xdr_put_u32(x, 0);                            /* truncate: no */
    nfs_xdr_put_opaque(x, j->fh, ZPL_FH_SIZE);
}

static void put_cb_getattr(nfs_xdr_t *x, const cb_job_t *j)
{
    nfs_xdr_put_u32(x, OP_CB_GETATTR);
    nfs_xdr_put_opaque(x, j->fh, ZPL_FH_SIZE);
    nfs4_bitmap_t want = { { 0 } };
    nfs4_bm_set(&want, FATTR4_CHANGE);
    nfs4_bm_set(&want, FATTR4_SIZE);
    nfs4_bitmap_put(x, &want);
}

/* The job's operation in a CB_COMPOUND. */
static void put_cb_op(nfs_xdr_t *x, const cb_job_t *j)
{
    if (j->kind == CB_JOB_GETATTR) put_cb_getattr(x, j);
    else put_cb_recall(x, j);
}

/* CB_GETATTR4resok: the fattr4 whose change and size the holder must give. */
static uint32_t get_cb_getattr_res(nfs_xdr_t *x, nfs4_cb_attrs_t *out)
{
    nfs4_bitmap_t got;
    nfs4_bitmap_get(x, &got, NULL);
    uint32_t len;
    const uint8_t *vals = nfs_xdr_get_opaque(x, &len, NFS4_OPAQUE_LIMIT);
    if (x->err || !nfs4_bm_isset(&got, FATTR4_CHANGE) || !nfs4_bm_isset(&got, FATTR4_SIZE))
        return NFS4ERR_BADXDR;
    nfs_xdr_t v;
    nfs_xdr_init_decode(&v, vals, len);
    /* In attribute order; nothing below change (3) may come before it but
     * the ones we did not ask for, which a holder does not send. */
    out->change = nfs_xdr_get_u64(&v);
    out->size = nfs_xdr_get_u64(&v);
    return v.err ? NFS4ERR_BADXDR : NFS4_OK;
}

/* The result of the job's operation, after those before it: its status (and
 * CB_GETATTR's attributes in j->attrs). */
static uint32_t get_cb_op_res(nfs_xdr_t *x, cb_job_t *j)
{
    uint32_t op = nfs_xdr_get_u32(x), status = nfs_xdr_get_u32(x);
    if (x->err) return NFS4ERR_BADXDR;
    if (op != (j->kind == CB_JOB_GETATTR ? OP_CB_GETATTR : OP_CB_RECALL))
        return NFS4ERR_SERVERFAULT;
    if (status == NFS4_OK && j->kind == CB_JOB_GETATTR) status = get_cb_getattr_res(x, &j->attrs);
    return status;
}

/* Skips a reply's header up to the procedure's results: false unless the
 * call was accepted and succeeded. */
static bool reply_accepted(nfs_xdr_t *x, uint32_t xid)
{
    uint32_t rxid = nfs_xdr_get_u32(x);
    uint32_t mtype = nfs_xdr_get_u32(x);
    uint32_t stat = nfs_xdr_get_u32(x);
    if (x->err || rxid != xid || mtype != 1 || stat != 0) return false;
    uint32_t l;
    (void)nfs_xdr_get_u32(x);                         /* verifier */
    (void)nfs_xdr_get_opaque(x, &l, 400);
    return nfs_xdr_get_u32(x) == 0 && !x->err;
}

/* The status of a CB_COMPOUND reply and of its CB_SEQUENCE (4.1); the
 * job's own result is read into j->status when the reply has it. */
static uint32_t compound_status(nfs_xdr_t *x, bool with_sequence, uint32_t *seq_status,
                                cb_job_t *j)
{
    uint32_t status = nfs_xdr_get_u32(x), l;
    (void)nfs_xdr_get_opaque(x, &l, NFS4_OPAQUE_LIMIT); /* tag */
    uint32_t n = nfs_xdr_get_u32(x);
    *seq_status = NFS4ERR_SERVERFAULT;
    if (with_sequence && n >= 1) {
        (void)nfs_xdr_get_u32(x);                     /* OP_CB_SEQUENCE */
        *seq_status = nfs_xdr_get_u32(x);
        if (*seq_status == NFS4_OK)                   /* sessionid, seqid, slot, slots */
            (void)nfs_xdr_get_fixed(x, NFS4_SESSIONID_SIZE + 4 * 4);
    }
    if (n > (with_sequence ? 1u : 0u) && (!with_sequence || *seq_status == NFS4_OK))
        j->status = get_cb_op_res(x, j);
    return x->err ? NFS4ERR_BADXDR : status;
}

/* ---------------------------------------------------------------- 4.1 */

void nfs4_cb_reply(nfs_server_t *srv, nfs_conn_t *conn, const uint8_t *rec, size_t len)
{
    (void)conn;
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    if (!st || !st->cb || len < 4) return;
    nfs4_cb_t *cb = st->cb;
    uint32_t xid = (uint32_t)rec[0] << 24 | (uint32_t)rec[1] << 16 | (uint32_t)rec[2] << 8 | rec[3];
    pthread_mutex_lock(&cb->lock);
    if (cb->waiting && xid == cb->wait_xid && !cb->reply && (cb->reply = malloc(len))) {
        memcpy(cb->reply, rec, len);
        cb->reply_len = len;
        pthread_cond_broadcast(&cb->cv);
    }
    pthread_mutex_unlock(&cb->lock);
}

/* Waits for the reply to xid on a back channel; NULL on timeout or stop. */
static uint8_t *wait_reply(nfs4_cb_t *cb, size_t *len)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CB_REPLY_TIMEOUT;
    pthread_mutex_lock(&cb->lock);
    while (!cb->reply && !cb->stopping &&
           pthread_cond_timedwait(&cb->cv, &cb->lock, &until) != ETIMEDOUT) {
    }
    uint8_t *r = cb->reply;
    *len = cb->reply_len;
    cb->reply = NULL;
    cb->waiting = false;
    pthread_mutex_unlock(&cb->lock);
    return r;
}

/* Reserves an xid whose reply nfs4_cb_reply keeps for wait_reply. */
static uint32_t expect_reply(nfs4_cb_t *cb)
{
    pthread_mutex_lock(&cb->lock);
    uint32_t xid = cb->next_xid++;
    cb->waiting = true;
    cb->wait_xid = xid;
    pthread_mutex_unlock(&cb->lock);
    return xid;
}

/* Sends a call on a back channel and waits for its answer (NULL: none). */
static uint8_t *back_channel_call(nfs4_cb_t *cb, nfs_conn_t *conn, nfs_xdr_t *x, size_t *len)
{
    if (!x->err && nfs_conn_send_call(conn, x) == 0) return wait_reply(cb, len);
    pthread_mutex_lock(&cb->lock);
    cb->waiting = false;
    pthread_mutex_unlock(&cb->lock);
    return NULL;
}

static void put_cb_sequence(nfs_xdr_t *x, const uint8_t sid[NFS4_SESSIONID_SIZE], uint32_t seqid)
{
    nfs_xdr_put_u32(x, OP_CB_SEQUENCE);
    nfs_xdr_put_fixed(x, sid, NFS4_SESSIONID_SIZE);
    nfs_xdr_put_u32(x, seqid);
    nfs_xdr_put_u32(x, 0);                            /* slot */
    nfs_xdr_put_u32(x, 0);                            /* highest slot */
    nfs_xdr_put_u32(x, 0);                            /* cachethis */
    nfs_xdr_put_u32(x, 0);                            /* referring call lists */
}

/* The job's CB_COMPOUND over c's back channel; the lock is held on entry and
 * dropped. */
static void call_41(nfs4_cb_t *cb, nfs4_client_t *c, cb_job_t *j)
{
    nfs4_server_t *st = cb->st;
    nfs4_session_t *s = live_back_channel(c);
    if (!s) {
        nfs4_unlock(st);
        log_debug(SUB, "client %016llx: no back channel to call back on",
                  (unsigned long long)j->clientid);
        return;
    }
    uint8_t sid[NFS4_SESSIONID_SIZE];
    memcpy(sid, s->id, sizeof sid);
    nfs_conn_t *conn = s->back_conn;
    nfs_conn_hold(conn);
    uint32_t seqid = s->cb_seqid + 1, xid = expect_reply(cb);
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 512);
    put_call_header(&x, xid, s->cb_prog, CB_COMPOUND, &s->cb_sec);
    nfs_xdr_put_u32(&x, 0);                           /* tag */
    nfs_xdr_put_u32(&x, s->cb_minor);
    nfs4_unlock(st);
    nfs_xdr_put_u32(&x, 0);                           /* callback_ident */
    nfs_xdr_put_u32(&x, 2);
    put_cb_sequence(&x, sid, seqid);
    put_cb_op(&x, j);
    size_t len = 0;
    uint8_t *rep = back_channel_call(cb, conn, &x, &len);
    nfs_xdr_free(&x);

    uint32_t status = NFS4ERR_SERVERFAULT, seq_status = NFS4ERR_SERVERFAULT;
    if (rep) {
        nfs_xdr_t r;
        nfs_xdr_init_decode(&r, rep, len);
        if (reply_accepted(&r, xid)) status = compound_status(&r, true, &seq_status, j);
        log_debug(SUB, "client %016llx: CB_COMPOUND (%s) answered %u (CB_SEQUENCE %u, op %u)",
                  (unsigned long long)j->clientid,
                  j->kind == CB_JOB_GETATTR ? "CB_GETATTR" : "CB_RECALL", status, seq_status,
                  j->status);
    }
    pthread_mutex_lock(&st->lock);
    nfs4_session_t *now = nfs4_session_find(st, sid);
    if (now && seq_status == NFS4_OK) now->cb_seqid = seqid;
    if (now && !rep && now->back_conn == conn) {
        log_info(SUB, "client %016llx: no answer to a callback on its back channel; "
                 "the channel is down", (unsigned long long)j->clientid);
        nfs4_cb_bind(now, NULL);
    }
    nfs4_unlock(st);
    nfs_conn_put(conn);
    free(rep);
}

/* ---------------------------------------------------------------- 4.0 */

static bool send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool recv_all(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* One call over a connection of its own to a 4.0 client's callback address:
 * the reply record (malloc'd) or NULL. */
static uint8_t *call_40(const struct sockaddr_storage *addr, socklen_t alen, nfs_xdr_t *call,
                        size_t *len)
{
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return NULL;
    struct timeval tv = {.tv_sec = CB_REPLY_TIMEOUT};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    uint8_t *rec = NULL;
    size_t have = 0;
    uint8_t mark[4] = {(uint8_t)(0x80 | call->len >> 24), (uint8_t)(call->len >> 16),
                       (uint8_t)(call->len >> 8), (uint8_t)call->len};
    if (connect(fd, (const struct sockaddr *)addr, alen) < 0 || !send_all(fd, mark, 4) ||
        !send_all(fd, call->buf, call->len))
        goto out;
    for (bool last = false; !last;) {
        uint8_t h[4];
        if (!recv_all(fd, h, 4)) goto fail;
        uint32_t v = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        last = v >> 31;
        size_t n = v & 0x7fffffffu;
        if (have + n > 65536) goto fail;
        uint8_t *nr = realloc(rec, have + n + 1);
        if (!nr) goto fail;
        rec = nr;
        if (!recv_all(fd, rec + have, n)) goto fail;
        have += n;
    }
    *len = have;
    goto out;
fail:
    free(rec);
    rec = NULL;
out:
    close(fd);
    return rec;
}

/* Runs a 4.0 callback (CB_NULL, or CB_COMPOUND with CB_RECALL or CB_GETATTR)
 * for c; the lock is held on entry and dropped. True when the client answered
 * it. */
static bool callback_40(nfs4_cb_t *cb, nfs4_client_t *c, cb_job_t *j)
{
    nfs4_server_t *st = cb->st;
    struct sockaddr_storage addr = c->cb_addr;
    socklen_t alen = c->cb_addr_len;
    uint32_t prog = c->cb_prog, ident = c->cb_ident;
    nfs4_unlock(st);
    if (!alen) return false;
    pthread_mutex_lock(&cb->lock);
    uint32_t xid = cb->next_xid++;
    pthread_mutex_unlock(&cb->lock);
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 256);
    bool compound = j->kind != CB_JOB_PROBE;
    put_call_header(&x, xid, prog, compound ? CB_COMPOUND : CB_NULL, NULL);
    if (compound) {
        nfs_xdr_put_u32(&x, 0);                       /* tag */
        nfs_xdr_put_u32(&x, 0);                       /* minor version */
        nfs_xdr_put_u32(&x, ident);
        nfs_xdr_put_u32(&x, 1);
        put_cb_op(&x, j);
    }
    size_t len = 0;
    uint8_t *rep = x.err ? NULL : call_40(&addr, alen, &x, &len);
    nfs_xdr_free(&x);
    bool ok = false;
    if (rep) {
        nfs_xdr_t r;
        nfs_xdr_init_decode(&r, rep, len);
        uint32_t seq_status;
        ok = reply_accepted(&r, xid);
        uint32_t status = ok && compound ? compound_status(&r, false, &seq_status, j) : 0;
        if (ok && compound)
            log_debug(SUB, "client %016llx: CB_COMPOUND answered %u (op %u)",
                      (unsigned long long)j->clientid, status, j->status);
    }
    free(rep);
    return ok;
}

/* ---------------------------------------------------------------- thread */

/* Hands a job's result to the request waiting for it, if one still does. */
static void deliver(nfs4_cb_t *cb, cb_job_t *j)
{
    pthread_mutex_lock(&cb->lock);
    if (j->waiter) {
        j->waiter->status = j->status;
        j->waiter->attrs = j->attrs;
        j->waiter->done = true;
        j->waiter = NULL;
        pthread_cond_broadcast(&cb->cv);
    }
    pthread_mutex_unlock(&cb->lock);
}

static void run_job(nfs4_cb_t *cb, cb_job_t *j)
{
    nfs4_server_t *st = cb->st;
    pthread_mutex_lock(&st->lock);
    uint32_t status;
    nfs4_client_t *c = nfs4_client_by_id(st, j->clientid, &status);
    if (!c) {
        nfs4_unlock(st);
        return;
    }
    if (c->minor >= 1) {
        call_41(cb, c, j);   /* probes are 4.0 only */
        return;
    }
    bool ok = callback_40(cb, c, j);
    if (ok && j->kind != CB_JOB_PROBE) return;
    /* A probe's verdict, or a recall that found the path down: no new
     * delegations until the client gives a callback address that answers
     * (RENEW tells it CB_PATH_DOWN meanwhile). */
    pthread_mutex_lock(&st->lock);
    c = nfs4_client_by_id(st, j->clientid, &status);
    if (c) c->cb_up = ok;
    nfs4_unlock(st);
    /* Debug only: many 4.0 clients (libnfs, guests behind NAT) give an
     * address nobody listens on, and each would log a line. */
    if (!ok)
        log_debug(SUB, "client %016llx: its callback address does not answer %s; "
                 "no delegations for it", (unsigned long long)j->clientid,
                 j->kind == CB_JOB_PROBE ? "CB_NULL" : "CB_COMPOUND");
}

static void *cb_thread(void *arg)
{
    nfs4_cb_t *cb = arg;
    pthread_mutex_lock(&cb->lock);
    for (;;) {
        while (!cb->head && !cb->stopping) pthread_cond_wait(&cb->cv, &cb->lock);
        if (cb->stopping) break;
        cb_job_t *j = cb->head;
        cb->head = j->next;
        if (!cb->head) cb->tail = NULL;
        pthread_mutex_unlock(&cb->lock);
        j->status = NFS4ERR_SERVERFAULT;
        run_job(cb, j);
        deliver(cb, j);
        free(j);
        pthread_mutex_lock(&cb->lock);
    }
    pthread_mutex_unlock(&cb->lock);
    return NULL;
}

int nfs4_cb_start(nfs4_server_t *st)
{
    nfs4_cb_t *cb = calloc(1, sizeof *cb);
    if (!cb) return -ENOMEM;
    cb->st = st;
    cb->next_xid = (uint32_t)rand();
    pthread_mutex_init(&cb->lock, NULL);
    pthread_cond_init(&cb->cv, NULL);
    if (pthread_create(&cb->thread, NULL, cb_thread, cb) != 0) {
        pthread_mutex_destroy(&cb->lock);
        pthread_cond_destroy(&cb->cv);
        free(cb);
        return -EAGAIN;
    }
    cb->started = true;
    st->cb = cb;
    return 0;
}

void nfs4_cb_stop(nfs4_server_t *st)
{
    nfs4_cb_t *cb = st->cb;
    if (!cb) return;
    pthread_mutex_lock(&cb->lock);
    cb->stopping = true;
    pthread_cond_broadcast(&cb->cv);
    pthread_mutex_unlock(&cb->lock);
    if (cb->started) pthread_join(cb->thread, NULL);
    st->cb = NULL;
    for (cb_job_t *j = cb->head, *n; j; j = n) {
        n = j->next;
        j->status = NFS4ERR_SERVERFAULT;
        deliver(cb, j);
        free(j);
    }
    free(cb->reply);
    pthread_mutex_destroy(&cb->lock);
    pthread_cond_destroy(&cb->cv);
    free(cb);
}

/* ---------------------------------------------------------------- CB_GETATTR */

uint32_t nfs4_cb_getattr(nfs4_server_t *st, uint64_t clientid, const uint8_t fh[ZPL_FH_SIZE],
                         nfs4_cb_attrs_t *out)
{
    nfs4_cb_t *cb = st->cb;
    cb_job_t *j = cb ? calloc(1, sizeof *j) : NULL;
    if (!j) return NFS4ERR_SERVERFAULT;
    cb_waiter_t w = { .status = NFS4ERR_SERVERFAULT };
    j->kind = CB_JOB_GETATTR;
    j->clientid = clientid;
    memcpy(j->fh, fh, ZPL_FH_SIZE);
    j->waiter = &w;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CB_GETATTR_WAIT;
    enqueue(st, j);
    pthread_mutex_lock(&cb->lock);
    while (!w.done && pthread_cond_timedwait(&cb->cv, &cb->lock, &until) != ETIMEDOUT) {
    }
    if (!w.done) j->waiter = NULL;   /* not delivered yet, so j is still alive */
    pthread_mutex_unlock(&cb->lock);
    *out = w.attrs;
    return w.done ? w.status : NFS4ERR_SERVERFAULT;
}
