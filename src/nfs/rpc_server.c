/*
 * ONC RPC transport (RFC 5531) over TCP for the NFS server.
 *
 * One I/O thread runs an epoll loop over the listeners and every connection.
 * Sockets are non-blocking; a connection reassembles records from fragments
 * (record marking: a 4-byte header whose top bit marks the last fragment)
 * into one buffer of at most NFS_RECORD_MAX bytes, so a hostile header
 * announcing a huge fragment only costs that connection (it is closed), and a
 * client dribbling bytes (slowloris) only holds its own buffer: the loop never
 * waits on one socket.
 *
 * An NFSv3 call that only reads (READ, GETATTR, LOOKUP, ACCESS, READLINK,
 * NULL: nfs3_proc_reads_only) or an NFSv4 COMPOUND of such operations
 * (nfs4_op_reads_only, after a 4.1 SEQUENCE) is first run on the I/O thread itself with memory_only
 * (nfs_impl.h): when all it reads is in memory (dirty or in the ARC) its
 * reply is sent from there -
 * no hand-off to a worker and back, which cost two wakeups and four context
 * switches per call: most of what a cached READ cost with one READ in flight,
 * and half the time of a GETATTR or LOOKUP (a client resolving paths or
 * stat-ing files one call at a time ran at half the rate). Only when no other
 * connection is ready at the same time, so many clients still spread over the
 * workers' cores (one connection's READs, however many in flight, leave one at
 * a time under its send lock anyway). The call runs in the SPA's memory-only
 * mode (zpl_memory_only_begin): a block it would read from a device - a file's
 * record, a dnode, an indirect or directory block - is refused, and so is the
 * pool's dataset lock while a txg sync holds it (dsl_pool_lock) and mounting
 * a snapshot; then, or when the handler
 * itself stops (a READ whose atime is due), the record goes to a worker like
 * every other call and what the try produced is dropped. Node locks are taken
 * as anywhere: their holders keep them for in-memory work only.
 *
 * A complete record becomes a job on the worker pool (taskq). The worker
 * decodes the call header and credential, runs the program's handler (which
 * calls the ZPL synchronously) and sends the reply under the connection's
 * send lock, so one connection has many calls in flight and replies leave in
 * completion order. The reply is sent straight from the worker when the
 * socket takes it; what it does not take is queued and the I/O thread
 * flushes it on EPOLLOUT, so a client that does not read its replies never
 * blocks a worker. A READ's data may be lent by the ARC (nfs_xdr_lend): the
 * reply goes out as iovecs over its buffer and the ARC's buffers, and a
 * queued reply keeps holding them until it is sent, so the socket's copy is
 * the only copy of cached data.
 *
 * Backpressure: a connection with NFS_CONN_INFLIGHT_MAX calls in flight, or
 * with too many reply bytes queued, is taken out of the read set until
 * workers finish; other connections keep being served.
 *
 * Caps: connections are counted per client address (conn_limits_t, under
 * conns_lock); accept refuses a client at its cap and, with the server full,
 * admits a newcomer only by closing an idle connection of the client holding
 * the most (conn_admit). Once a second the I/O thread closes connections idle
 * for idle_timeout_s (sweep_idle), so a client that opens connections and
 * leaves them holds its share only that long.
 *
 * Lifetime: a connection is reference counted (the I/O loop holds one
 * reference, each call one more). Closing takes it out of epoll and shuts the
 * socket down; the descriptor is closed with the last reference, so a worker
 * never writes to a reused descriptor.
 */
#include "nfs_srv.h"
#include "nlm_impl.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/zpl.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SUB "nfs"

#define OUTQ_MAX ((size_t)8 << 20)     /* queued reply bytes before reading stops */
#define STAGE_SIZE 65536u

/* A reply the socket has not taken all of: the reply itself (its buffer and
 * the ARC buffers lent to it stay held until sent), and how far it got. */
typedef struct out_buf {
    struct out_buf *next;
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen;
    nfs_xdr_t body;
    size_t len, off;     /* hlen + body.len; bytes sent */
} out_buf_t;

struct nfs_conn {
    nfs_server_t *srv;
    int fd;
    uint64_t id;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    struct sockaddr_storage local;
    socklen_t local_len;
    conn_addr_t addr;    /* the peer without its port: what the caps count */
    bool counted;        /* in srv->limits */
    atomic_int refs;
    /* The server sent a call (a callback) on it: only then may RPC replies
     * arrive from the client; anywhere else a reply is hostile input. */
    atomic_bool sent_calls;
    /* When the last request arrived or a call finished or a reply made
     * progress (CLOCK_MONOTONIC ns): the idle timer and eviction go by it. */
    _Atomic uint64_t last_active_ns;

    /* I/O thread only */
    uint8_t hdr[4];
    unsigned hdr_have;
    bool in_fragment;
    bool last_fragment;
    size_t frag_left;
    uint8_t *rec;
    size_t rec_len, rec_cap;
    uint8_t stage[STAGE_SIZE];
    size_t stage_len, stage_off;
    bool alone;          /* the only connection of this epoll round (conn_try_inline) */

    pthread_mutex_t lock;             /* everything below */
    bool closed;
    bool loop_ref_dropped;            /* the I/O loop's reference is gone */
    unsigned inflight;
    uint32_t events;                  /* current epoll interest */
    out_buf_t *outq, *outq_tail;
    size_t outq_bytes;

    nfs_conn_t *next, *prev;          /* srv->conns */
};

typedef struct listener_tag {
    int fd;
} listener_tag_t;

uint64_t nfs_conn_id(const nfs_conn_t *conn) { return conn->id; }

int nfs_conn_local(const nfs_conn_t *c, struct sockaddr_storage *ss, socklen_t *sl)
{
    if (!c || !c->local_len) return -ENOTCONN;
    *ss = c->local;
    *sl = c->local_len;
    return 0;
}

uint64_t nfs_server_write_verifier(nfs_server_t *srv) { return srv->write_verifier; }
const char *nfs_server_state_dir(nfs_server_t *srv) { return srv->cfg.state_dir; }
void *nfs_server_nfs4_state(nfs_server_t *srv) { return srv->nfs4_state; }

void nfs_server_ports(nfs_server_t *srv, uint16_t *nfs, uint16_t *mount, uint16_t *portmap)
{
    if (nfs) *nfs = srv->port_nfs;
    if (mount) *mount = srv->port_mount;
    if (portmap) *portmap = srv->port_portmap;
}

void nfs_addr_string(const struct sockaddr *addr, char *buf, size_t len)
{
    buf[0] = '\0';
    if (addr->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, buf, (socklen_t)len);
    } else if (addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)addr;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
            inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], buf, (socklen_t)len);
        else
            inet_ntop(AF_INET6, &s6->sin6_addr, buf, (socklen_t)len);
    }
}

/* ------------------------------------------------------------ connections */

static void conn_rele(nfs_conn_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    nfs_server_t *srv = c->srv;
    pthread_mutex_lock(&srv->conns_lock);
    if (c->prev) c->prev->next = c->next;
    else srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    srv->nconns--;
    if (c->counted) conn_limits_del(&srv->limits, &c->addr);
    pthread_mutex_unlock(&srv->conns_lock);
    close(c->fd);
    for (out_buf_t *o = c->outq, *n; o; o = n) {
        n = o->next;
        nfs_xdr_free(&o->body);
        free(o);
    }
    free(c->rec);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* With c->lock held: brings the epoll interest in line with the state. */
static void conn_update_events(nfs_conn_t *c)
{
    CAIRN_ASSERT(cairn_mutex_held(&c->lock));
    if (c->closed) return;
    uint32_t ev = 0;
    if (c->inflight < NFS_CONN_INFLIGHT_MAX && c->outq_bytes < OUTQ_MAX) ev |= EPOLLIN;
    if (c->outq) ev |= EPOLLOUT;
    if (ev == c->events) return;
    struct epoll_event e = {.events = ev | ((ev & EPOLLIN) ? EPOLLRDHUP : 0), .data.ptr = c};
    if (epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0) c->events = ev;
}

/* With c->lock held. */
static void conn_close_locked(nfs_conn_t *c)
{
    CAIRN_ASSERT(cairn_mutex_held(&c->lock));
    if (c->closed) return;
    c->closed = true;
    epoll_ctl(c->srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    shutdown(c->fd, SHUT_RDWR);
    atomic_store(&c->srv->dead_pending, true);
}

static void conn_touch(nfs_conn_t *c)
{
    atomic_store_explicit(&c->last_active_ns, cairn_now_ns(), memory_order_relaxed);
}

/* I/O thread: closes and drops the loop's reference. */
static void conn_close(nfs_conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    conn_close_locked(c);
    bool drop = !c->loop_ref_dropped;
    c->loop_ref_dropped = true;
    pthread_mutex_unlock(&c->lock);
    if (drop) conn_rele(c);
}

/* iovecs per sendmsg: a 1 MiB READ lent as 128 KiB records takes ~17, and
 * at most ~150 (DMU_LEND_MIN pieces); a longer reply takes several calls. */
#define SEND_IOV 160

/* The iovecs of a reply (header, then the body's buffer with the spans lent
 * to it) from byte `sent` on. */
static size_t reply_iov(const uint8_t *hdr, size_t hlen, const nfs_xdr_t *body, size_t sent,
                        struct iovec *iov)
{
    size_t n = 0;
    if (sent < hlen) iov[n++] = (struct iovec){(void *)(hdr + sent), hlen - sent};
    return n + nfs_xdr_iov(body, sent < hlen ? 0 : sent - hlen, iov + n, SEND_IOV - n);
}

/* With c->lock held: writes what the socket takes from the queue; false when
 * the connection broke. */
static bool conn_flush_locked(nfs_conn_t *c)
{
    CAIRN_ASSERT(cairn_mutex_held(&c->lock));
    while (c->outq) {
        out_buf_t *o = c->outq;
        struct iovec iov[SEND_IOV];
        struct msghdr mh = {.msg_iov = iov,
                            .msg_iovlen = reply_iov(o->hdr, o->hlen, &o->body, o->off, iov)};
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
            return false;
        }
        o->off += (size_t)n;
        c->outq_bytes -= (size_t)n;
        conn_touch(c);
        if (o->off == o->len) {
            c->outq = o->next;
            if (!c->outq) c->outq_tail = NULL;
            nfs_xdr_free(&o->body);
            free(o);
        }
    }
    return true;
}

/* Sends header+body as one record: the body's buffer with the spans lent to
 * it (a READ's data still in the ARC's buffers, nfs_xdr_lend), so the socket's
 * copy is the only one. What the socket does not take is queued - the body
 * itself, moved out of the caller's hands with its spans still held, not a
 * copy - and flushed by the I/O thread on EPOLLOUT. Runs on workers and on
 * the I/O thread (inline READs). */
static void conn_send_reply(nfs_conn_t *c, const uint8_t *hdr, size_t hlen, nfs_xdr_t *body)
{
    pthread_mutex_lock(&c->lock);
    if (c->closed) goto out;
    size_t total = hlen + body->len, sent = 0;
    if (!c->outq) {
        while (sent < total) {
            struct iovec iov[SEND_IOV];
            struct msghdr mh = {.msg_iov = iov,
                                .msg_iovlen = reply_iov(hdr, hlen, body, sent, iov)};
            ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                conn_close_locked(c);
                goto out_unref;
            }
            sent += (size_t)w;
        }
    }
    if (sent < total) {
        out_buf_t *o = calloc(1, sizeof *o);
        if (!o) {
            conn_close_locked(c);
            goto out_unref;
        }
        memcpy(o->hdr, hdr, hlen);
        o->hlen = hlen;
        o->body = *body;
        memset(body, 0, sizeof *body); /* the queue owns it now; the caller's free is a no-op */
        o->len = total;
        o->off = sent;
        if (c->outq_tail) c->outq_tail->next = o;
        else c->outq = o;
        c->outq_tail = o;
        c->outq_bytes += total - sent;
    }
out:
    conn_update_events(c);
out_unref:
    pthread_mutex_unlock(&c->lock);
    /* A connection a worker closed still holds the loop's reference; the loop
     * drops it when it sees dead_pending. */
}

/* The end of a call: its reply sent (rc > 0), or the connection closed (rc < 0:
 * the record made no sense), and the reply buffer freed. */
static void conn_finish_call(nfs_conn_t *c, int rc, const uint8_t *hdr, size_t hlen, nfs_xdr_t *res)
{
    if (rc > 0) {
        conn_send_reply(c, hdr, hlen, res);
    } else if (rc < 0) {
        pthread_mutex_lock(&c->lock);
        conn_close_locked(c);
        pthread_mutex_unlock(&c->lock);
    }
    nfs_xdr_free(res);
}

/* ------------------------------------------------------------ back channel */

static size_t put_be32(uint8_t *p, uint32_t v);

void nfs_conn_hold(nfs_conn_t *c) { atomic_fetch_add(&c->refs, 1); }
void nfs_conn_put(nfs_conn_t *c) { conn_rele(c); }

bool nfs_conn_closed(nfs_conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    bool closed = c->closed;
    pthread_mutex_unlock(&c->lock);
    return closed;
}

/* A callback goes out like a reply: one record, queued behind what the
 * socket has not taken yet. */
int nfs_conn_send_call(nfs_conn_t *c, nfs_xdr_t *body)
{
    if (body->len > 0x7fffffffu) return -EINVAL;
    uint8_t mark[4];
    put_be32(mark, 0x80000000u | (uint32_t)body->len);
    atomic_store(&c->sent_calls, true);
    conn_send_reply(c, mark, sizeof mark, body);
    return nfs_conn_closed(c) ? -EPIPE : 0;
}

/* ------------------------------------------------------------ calls */

typedef struct call_job {
    nfs_conn_t *conn;
    uint8_t *rec;
    size_t len;
} call_job_t;

enum { RPC_CALL = 0, RPC_REPLY = 1, MSG_ACCEPTED = 0, MSG_DENIED = 1 };
enum { REJ_RPC_MISMATCH = 0, REJ_AUTH_ERROR = 1 };
enum { AUTH_BADCRED = 1, AUTH_TOOWEAK = 5 };

static size_t put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

/* Decodes the credential; false when malformed. */
static bool decode_cred(nfs_xdr_t *x, nfs_call_t *call, char *machine, bool *flavor_ok)
{
    uint32_t flavor = nfs_xdr_get_u32(x);
    uint32_t clen;
    const uint8_t *body = nfs_xdr_get_opaque(x, &clen, 400);
    uint32_t vflavor = nfs_xdr_get_u32(x);
    uint32_t vlen;
    nfs_xdr_get_opaque(x, &vlen, 400);
    (void)vflavor;
    if (x->err) return false;
    call->flavor = flavor;
    call->cred = (zpl_cred_t){.uid = 65534, .gid = 65534};
    machine[0] = '\0';
    *flavor_ok = true;
    if (flavor == NFS_AUTH_NONE) return true;
    if (flavor != NFS_AUTH_SYS) {
        *flavor_ok = false;
        return true;
    }
    nfs_xdr_t c;
    nfs_xdr_init_decode(&c, body, clen);
    nfs_xdr_get_u32(&c); /* stamp */
    uint32_t mlen;
    const uint8_t *m = nfs_xdr_get_opaque(&c, &mlen, 255);
    call->cred.uid = nfs_xdr_get_u32(&c);
    call->cred.gid = nfs_xdr_get_u32(&c);
    uint32_t ng = nfs_xdr_get_u32(&c);
    if (ng > 16) c.err = true;
    for (uint32_t i = 0; i < ng && !c.err; i++) call->cred.groups[i] = nfs_xdr_get_u32(&c);
    call->cred.ngroups = c.err ? 0 : ng;
    if (c.err) return false;
    if (m && mlen) memcpy(machine, m, mlen);
    machine[mlen] = '\0';
    return true;
}

static nfs_accept_t dispatch(nfs_call_t *call, uint32_t *low, uint32_t *high)
{
    switch (call->prog) {
    case NFS_PROG_PORTMAP:
        if (call->vers >= 2 && call->vers <= 4) return nfs_portmap_program(call);
        *low = 2, *high = 4;
        return NFS_ACCEPT_PROG_MISMATCH;
    case NFS_PROG_MOUNT:
        if (call->vers == 1 || call->vers == 3) return nfs_mount_program(call);
        *low = 1, *high = 3;
        return NFS_ACCEPT_PROG_MISMATCH;
    case NFS_PROG_NFS:
        if (call->vers == 3) return nfs3_program(call);
        if (call->vers == 4) return nfs4_program(call);
        *low = 3, *high = 4;
        return NFS_ACCEPT_PROG_MISMATCH;
    case NFS_PROG_NLM:
        if (call->vers == 1 || call->vers == 3 || call->vers == 4) return nlm_program(call);
        *low = 1, *high = 4;
        return NFS_ACCEPT_PROG_MISMATCH;
    case NFS_PROG_NSM:
        if (call->vers == 1) return nsm_program(call);
        *low = 1, *high = 1;
        return NFS_ACCEPT_PROG_MISMATCH;
    default:
        return NFS_ACCEPT_PROG_UNAVAIL;
    }
}

static void conn_call_done(nfs_conn_t *c)
{
    /* Before the call stops counting, lest the idle sweep see neither. */
    conn_touch(c);
    pthread_mutex_lock(&c->lock);
    c->inflight--;
    conn_update_events(c);
    pthread_mutex_unlock(&c->lock);
    conn_rele(c);
}

/* Calls whose retransmission must get the first answer rather than run
 * again (nfs_drc.c): NFSv3's that change the namespace or attributes, and
 * NFSv4.0 COMPOUNDs (4.1 and later have their session slots). */
static bool drc_wanted(const nfs_call_t *call)
{
    if (call->prog != NFS_PROG_NFS) return false;
    if (call->vers == 3)
        return call->proc == NFSPROC3_SETATTR ||
               (call->proc >= NFSPROC3_CREATE && call->proc <= NFSPROC3_LINK);
    if (call->vers != 4 || call->proc != 1) return false;
    nfs_xdr_t peek = call->args;
    uint32_t taglen;
    (void)nfs_xdr_get_opaque(&peek, &taglen, 1024);
    uint32_t minor = nfs_xdr_get_u32(&peek);
    return !peek.err && minor == 0;
}

static int rpc_execute(nfs_conn_t *c, const uint8_t *rec, size_t len, uint8_t hdr[NFS_RPC_HDR_MAX],
                       size_t *hlen, nfs_xdr_t *res, bool memory_only)
{
    nfs_server_t *srv = c->srv;
    uint64_t start_ns = cairn_now_ns();
    nfs_xdr_t x;
    nfs_xdr_init_decode(&x, rec, len);
    uint32_t xid = nfs_xdr_get_u32(&x);
    uint32_t mtype = nfs_xdr_get_u32(&x);
    uint32_t rpcvers = nfs_xdr_get_u32(&x);
    nfs_call_t call = {.srv = srv, .conn = c, .peer = c->peer, .peer_len = c->peer_len, .xid = xid,
                       .memory_only = memory_only};
    call.prog = nfs_xdr_get_u32(&x);
    call.vers = nfs_xdr_get_u32(&x);
    call.proc = nfs_xdr_get_u32(&x);
    char machine[256];
    bool flavor_ok = true;
    bool cred_ok = !x.err && decode_cred(&x, &call, machine, &flavor_ok);
    call.machine_name = machine;
    nfs_xdr_init_encode(res, 0);
    nfs_drc_key_t key;
    bool remembered = false;          /* a reply the DRC keeps (drc_wanted) */
    size_t h = 4;
    /* Not even a call header: nothing sensible to answer. */
    if (x.err || mtype != RPC_CALL) return -1;
    h += put_be32(hdr + h, xid);
    h += put_be32(hdr + h, RPC_REPLY);
    if (rpcvers != 2) {
        h += put_be32(hdr + h, MSG_DENIED);
        h += put_be32(hdr + h, REJ_RPC_MISMATCH);
        h += put_be32(hdr + h, 2);
        h += put_be32(hdr + h, 2);
    } else if (!cred_ok || !flavor_ok) {
        h += put_be32(hdr + h, MSG_DENIED);
        h += put_be32(hdr + h, REJ_AUTH_ERROR);
        h += put_be32(hdr + h, cred_ok ? AUTH_TOOWEAK : AUTH_BADCRED);
    } else {
        nfs_xdr_init_decode(&call.args, rec + x.pos, len - x.pos);
        remembered = srv->drc && drc_wanted(&call);
        if (remembered) {
            nfs_drc_key(&key, &call);
            if (nfs_drc_answer(srv->drc, &key, hdr, hlen, res)) {
                nfs_stats_call_done(&call, start_ns);
                return 1;   /* a retransmission: the first run's answer */
            }
        }
        nfs_xdr_init_encode(res, 512);
        call.res = res;
        uint32_t low = 0, high = 0;
        if (memory_only) zpl_memory_only_begin();
        nfs_accept_t st = res->err ? NFS_ACCEPT_SYSTEM_ERR : dispatch(&call, &low, &high);
        /* A refused read may have become any error on its way up: the whole
         * answer is dropped, not just the would_block ones. */
        if (memory_only && zpl_memory_only_end()) call.would_block = true;
        if (call.would_block) {
            nfs_stats_call_retried(&call);
            return NFS_RPC_WOULD_BLOCK;
        }
        nfs_stats_call_done(&call, start_ns);
        if (st == NFS_ACCEPT_SUCCESS && res->err) st = NFS_ACCEPT_SYSTEM_ERR;
        if (st == NFS_ACCEPT_DROP) return 0;
        if (st == NFS_ACCEPT_CLOSE) return -1;
        h += put_be32(hdr + h, MSG_ACCEPTED);
        h += put_be32(hdr + h, NFS_AUTH_NONE); /* verifier */
        h += put_be32(hdr + h, 0);
        h += put_be32(hdr + h, (uint32_t)st);
        if (st == NFS_ACCEPT_PROG_MISMATCH) {
            h += put_be32(hdr + h, low);
            h += put_be32(hdr + h, high);
        }
        if (st != NFS_ACCEPT_SUCCESS) nfs_xdr_truncate(res, 0);
    }
    if ((h - 4) + res->len > 0x7fffffffu) return -1;
    put_be32(hdr, 0x80000000u | (uint32_t)((h - 4) + res->len));
    *hlen = h;
    if (remembered) nfs_drc_store(srv->drc, &key, hdr, h, res);
    return 1;
}

int nfs_rpc_execute(nfs_conn_t *c, const uint8_t *rec, size_t len, uint8_t hdr[NFS_RPC_HDR_MAX],
                    size_t *hlen, nfs_xdr_t *res)
{
    return rpc_execute(c, rec, len, hdr, hlen, res, false);
}

int nfs_rpc_execute_memory(nfs_conn_t *c, const uint8_t *rec, size_t len,
                           uint8_t hdr[NFS_RPC_HDR_MAX], size_t *hlen, nfs_xdr_t *res)
{
    return rpc_execute(c, rec, len, hdr, hlen, res, true);
}

/* Whether a record is an NFSv3 call that only reads or an NFSv4 COMPOUND, the
 * calls worth trying on the I/O thread (a peek at the fixed call header;
 * rpc_execute checks it properly, and compound() runs only 4.0 compounds
 * of nfs4_op_reads_only operations there). */
static bool rec_may_run_inline(const uint8_t *rec, size_t len)
{
    if (len < 24) return false;
    uint32_t w[6];
    for (int i = 0; i < 6; i++)
        w[i] = (uint32_t)rec[4 * i] << 24 | (uint32_t)rec[4 * i + 1] << 16 |
               (uint32_t)rec[4 * i + 2] << 8 | rec[4 * i + 3];
    return w[1] == RPC_CALL && w[2] == 2 && w[3] == NFS_PROG_NFS &&
           ((w[4] == 3 && nfs3_proc_reads_only(w[5])) || (w[4] == 4 && w[5] == 1));
}

/* I/O thread: runs a call whose data is all in memory right here, sending its
 * reply without a hand-off; false when it would block (nothing was done, the
 * record is left for a worker). */
static bool conn_try_inline(nfs_conn_t *c)
{
    /* Only when no other connection waits for the I/O thread: this one was
     * the only one ready. Otherwise the READs go to the workers, which send
     * on every core: one I/O thread sending for many readers would serialize
     * them on one core. One connection's READs, however many are in flight,
     * stay here: its replies leave one at a time under its send lock anyway,
     * so workers only added a wakeup and two context switches each (with 8
     * in flight, ten times the switches per GiB for the same rate). */
    if (!c->alone) return false;
    if (!rec_may_run_inline(c->rec, c->rec_len)) return false;
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t h = 0;
    nfs_xdr_t res;
    int rc = rpc_execute(c, c->rec, c->rec_len, hdr, &h, &res, true);
    if (rc == NFS_RPC_WOULD_BLOCK) {
        nfs_xdr_free(&res);
        return false;
    }
    conn_finish_call(c, rc, hdr, h, &res);
    c->rec_len = 0; /* the buffer is kept for the connection's next record */
    return true;
}

/* Runs one call on a worker: decode, dispatch, reply. */
static void run_call(void *arg)
{
    call_job_t *job = arg;
    nfs_conn_t *c = job->conn;
    nfs_server_t *srv = c->srv;
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t h = 0;
    nfs_xdr_t res;
    int rc = nfs_rpc_execute(c, job->rec, job->len, hdr, &h, &res);
    conn_finish_call(c, rc, hdr, h, &res);
    free(job->rec);
    free(job);
    conn_call_done(c);

    pthread_mutex_lock(&srv->calls_lock);
    if (--srv->calls_running == 0) pthread_cond_broadcast(&srv->calls_cv);
    pthread_mutex_unlock(&srv->calls_lock);
}

nfs_conn_t *nfs_conn_detached(nfs_server_t *srv, const struct sockaddr *peer, socklen_t plen)
{
    nfs_conn_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->srv = srv;
    c->fd = -1;
    c->id = atomic_fetch_add(&srv->next_conn_id, 1);
    if (plen > sizeof c->peer) plen = sizeof c->peer;
    memcpy(&c->peer, peer, plen);
    c->peer_len = plen;
    c->local = c->peer;
    c->local_len = plen;
    c->closed = c->loop_ref_dropped = true;
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void nfs_conn_set_local(nfs_conn_t *c, const struct sockaddr *addr, socklen_t len)
{
    if (len > sizeof c->local) len = sizeof c->local;
    memcpy(&c->local, addr, len);
    c->local_len = len;
}

void nfs_conn_detached_free(nfs_conn_t *c)
{
    if (!c) return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* I/O thread: a complete record goes to the workers, unless it is a call
 * served from memory right here. */
static void conn_record_done(nfs_conn_t *c)
{
    nfs_server_t *srv = c->srv;
    conn_touch(c);
    if (c->rec_len >= 8 && c->rec[4] == 0 && c->rec[5] == 0 && c->rec[6] == 0 &&
        c->rec[7] == RPC_REPLY) {
        if (!atomic_load(&c->sent_calls)) { /* nobody asked: not a protocol peer */
            conn_close(c);
            return;
        }
        /* The client's answer to a callback on its back channel. */
        nfs4_cb_reply(srv, c, c->rec, c->rec_len);
        c->rec_len = 0;
        return;
    }
    if (conn_try_inline(c)) return;
    call_job_t *job = malloc(sizeof *job);
    if (!job) {
        conn_close(c);
        return;
    }
    job->conn = c;
    job->rec = c->rec;
    job->len = c->rec_len;
    c->rec = NULL;
    c->rec_len = c->rec_cap = 0;
    atomic_fetch_add(&c->refs, 1);
    pthread_mutex_lock(&c->lock);
    c->inflight++;
    conn_update_events(c);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_lock(&srv->calls_lock);
    srv->calls_running++;
    pthread_mutex_unlock(&srv->calls_lock);
    taskq_dispatch(srv->workers, run_call, job, NULL);
}

/* Makes room for n more record bytes; false when the record would be too big. */
static bool rec_reserve(nfs_conn_t *c, size_t n)
{
    if (c->rec_len + n > NFS_RECORD_MAX) return false;
    if (c->rec_len + n <= c->rec_cap) return true;
    size_t cap = c->rec_cap ? c->rec_cap : 1024;
    while (cap < c->rec_len + n) cap *= 2;
    if (cap > NFS_RECORD_MAX) cap = NFS_RECORD_MAX;
    uint8_t *nb = realloc(c->rec, cap);
    if (!nb) return false;
    c->rec = nb;
    c->rec_cap = cap;
    return true;
}

/* Consumes staged bytes into records; false when the connection must close. */
static bool conn_parse(nfs_conn_t *c)
{
    while (c->stage_off < c->stage_len) {
        if (!c->in_fragment) {
            while (c->hdr_have < 4 && c->stage_off < c->stage_len)
                c->hdr[c->hdr_have++] = c->stage[c->stage_off++];
            if (c->hdr_have < 4) return true;
            uint32_t v = (uint32_t)c->hdr[0] << 24 | (uint32_t)c->hdr[1] << 16 |
                         (uint32_t)c->hdr[2] << 8 | c->hdr[3];
            c->hdr_have = 0;
            c->last_fragment = v >> 31;
            c->frag_left = v & 0x7fffffffu;
            if (!rec_reserve(c, c->frag_left)) {
                char a[64];
                nfs_addr_string((struct sockaddr *)&c->peer, a, sizeof a);
                log_debug(SUB, "closing connection from %s: record larger than %zu bytes", a,
                          NFS_RECORD_MAX);
                return false;
            }
            c->in_fragment = true;
        }
        size_t take = c->stage_len - c->stage_off;
        if (take > c->frag_left) take = c->frag_left;
        if (take) memcpy(c->rec + c->rec_len, c->stage + c->stage_off, take);
        c->rec_len += take;
        c->stage_off += take;
        c->frag_left -= take;
        if (c->frag_left == 0) {
            c->in_fragment = false;
            if (c->last_fragment) conn_record_done(c);
        }
    }
    return true;
}

static void conn_readable(nfs_conn_t *c)
{
    for (int rounds = 0; rounds < 16; rounds++) {
        pthread_mutex_lock(&c->lock);
        bool paused = c->closed || !(c->events & EPOLLIN);
        pthread_mutex_unlock(&c->lock);
        if (paused) return;
        ssize_t n;
        if (c->in_fragment && c->frag_left >= STAGE_SIZE / 4) {
            /* Large fragment bodies go straight into the record. */
            n = recv(c->fd, c->rec + c->rec_len, c->frag_left, 0);
            if (n > 0) {
                c->rec_len += (size_t)n;
                c->frag_left -= (size_t)n;
                if (c->frag_left == 0) {
                    c->in_fragment = false;
                    if (c->last_fragment) conn_record_done(c);
                }
                continue;
            }
        } else {
            n = recv(c->fd, c->stage, STAGE_SIZE, 0);
            if (n > 0) {
                c->stage_len = (size_t)n;
                c->stage_off = 0;
                if (!conn_parse(c)) {
                    conn_close(c);
                    return;
                }
                c->stage_len = c->stage_off = 0;
                continue;
            }
        }
        if (n == 0) {
            conn_close(c);
            return;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) conn_close(c);
        return;
    }
}

static void conn_writable(nfs_conn_t *c)
{
    pthread_mutex_lock(&c->lock);
    bool ok = c->closed || conn_flush_locked(c);
    if (!ok) conn_close_locked(c);
    else conn_update_events(c);
    bool closed = c->closed;
    pthread_mutex_unlock(&c->lock);
    (void)closed;
}

/* With conns_lock held: the connection of addr a that has been idle the
 * longest (no call in flight, no reply queued), with a reference for the
 * caller; NULL when all are busy. */
static nfs_conn_t *oldest_idle_of(nfs_server_t *srv, const conn_addr_t *a)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->conns_lock));
    nfs_conn_t *best = NULL;
    uint64_t best_t = 0;
    for (nfs_conn_t *c = srv->conns; c; c = c->next) {
        if (!c->counted || !conn_addr_equal(&c->addr, a)) continue;
        pthread_mutex_lock(&c->lock);
        bool idle = !c->closed && !c->inflight && !c->outq;
        pthread_mutex_unlock(&c->lock);
        uint64_t t = atomic_load_explicit(&c->last_active_ns, memory_order_relaxed);
        if (idle && (!best || t < best_t)) {
            best = c;
            best_t = t;
        }
    }
    if (best) atomic_fetch_add(&best->refs, 1);
    return best;
}

/* With conns_lock held: whether a new connection from a gets in, making room
 * by closing an idle connection of the client holding the most when the
 * server is full (*evict, referenced, for the caller to close once the lock
 * is dropped). Reaching a cap is logged, rate-limited. */
static bool conn_admit(nfs_server_t *srv, const conn_addr_t *a, nfs_conn_t **evict)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->conns_lock));
    conn_limits_t *l = &srv->limits;
    conn_addr_t victim;
    unsigned vcount = 0;
    conn_verdict_t v = conn_limits_admit(l, a, &victim, &vcount);
    *evict = NULL;
    if (v == CONN_ADMIT) return true;
    if (v == CONN_ADMIT_EVICT) {
        *evict = oldest_idle_of(srv, &victim);
        if (!*evict) v = CONN_REFUSE_FULL;
    }
    int kind = v == CONN_REFUSE_CLIENT ? CONN_LOG_CLIENT : CONN_LOG_TOTAL;
    uint64_t held;
    if (conn_limits_log_ok(l, kind, &held)) {
        char who[INET6_ADDRSTRLEN], big[INET6_ADDRSTRLEN], more[64] = "";
        conn_addr_string(a, who, sizeof who);
        if (held) snprintf(more, sizeof more, " (%" PRIu64 " more since the last line)", held);
        if (v == CONN_REFUSE_CLIENT) {
            log_warn(SUB, "connection from %s refused: it holds %u, the cap "
                     "(nfs_max_connections_per_client)%s", who, l->max_per_client, more);
        } else if (v == CONN_ADMIT_EVICT) {
            conn_addr_string(&victim, big, sizeof big);
            log_warn(SUB, "%u connections, the cap (nfs_max_connections): an idle one of %s "
                     "(which holds %u) closed to let %s in%s", l->max_total, big, vcount, who,
                     more);
        } else {
            log_warn(SUB, "%u connections, the cap (nfs_max_connections): connection from %s "
                     "refused, no client holds more%s", l->max_total, who, more);
        }
    }
    return v == CONN_ADMIT_EVICT;
}

/* I/O thread: accept() failed for want of descriptors or memory. The
 * connection stays in the backlog and the listener readable, so the loop
 * would spin on it: the listeners leave the epoll set until the next sweep
 * (a second), when connections may have gone. */
static void accept_pause(nfs_server_t *srv, int err)
{
    for (int i = 0; i < srv->nlisten; i++) {
        struct epoll_event ev = {.events = 0, .data.ptr = &srv->listen_fd[i]};
        epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->listen_fd[i], &ev);
    }
    srv->accept_paused = true;
    pthread_mutex_lock(&srv->conns_lock);
    uint64_t held;
    bool log = conn_limits_log_ok(&srv->limits, CONN_LOG_ACCEPT, &held);
    size_t n = srv->nconns;
    pthread_mutex_unlock(&srv->conns_lock);
    if (log) conn_limits_warn_accept(SUB, n, err, held, "nfs_max_connections");
}

static void accept_resume(nfs_server_t *srv)
{
    for (int i = 0; i < srv->nlisten; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->listen_fd[i]};
        epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->listen_fd[i], &ev);
    }
    srv->accept_paused = false;
}

static void accept_conns(nfs_server_t *srv, int lfd)
{
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_pause(srv, errno);
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        nfs_conn_t *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->srv = srv;
        c->fd = fd;
        c->id = atomic_fetch_add(&srv->next_conn_id, 1);
        c->peer = peer;
        c->peer_len = plen;
        conn_addr_from((struct sockaddr *)&peer, &c->addr);
        c->local_len = sizeof c->local;
        getsockname(fd, (struct sockaddr *)&c->local, &c->local_len);
        atomic_init(&c->refs, 1);
        atomic_init(&c->last_active_ns, cairn_now_ns());
        pthread_mutex_init(&c->lock, NULL);
        c->events = EPOLLIN;
        nfs_conn_t *evict = NULL;
        pthread_mutex_lock(&srv->conns_lock);
        bool in = conn_admit(srv, &c->addr, &evict) &&
                  conn_limits_add(&srv->limits, &c->addr) == 0;
        if (in) {
            c->counted = true;
            c->next = srv->conns;
            if (srv->conns) srv->conns->prev = c;
            srv->conns = c;
            srv->nconns++;
        }
        pthread_mutex_unlock(&srv->conns_lock);
        if (evict) {
            conn_close(evict);
            conn_rele(evict);
        }
        if (!in) {
            close(fd);
            pthread_mutex_destroy(&c->lock);
            free(c);
            continue;
        }
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
            pthread_mutex_lock(&c->lock);
            c->closed = c->loop_ref_dropped = true;
            pthread_mutex_unlock(&c->lock);
            conn_rele(c);
        }
    }
}

/* I/O thread, about once a second: closes the connections that sent no
 * request for idle_timeout_s (and have no call in flight and no reply that
 * moved since), as knfsd does: NFS clients reconnect when they need to, and
 * a client that opens connections and leaves them would otherwise keep its
 * share of the caps for good. */
static void sweep_idle(nfs_server_t *srv)
{
    uint64_t now = cairn_now_ns();
    if (now < srv->next_sweep_ns) return;
    srv->next_sweep_ns = now + 1000000000ull;
    if (srv->accept_paused) accept_resume(srv);
    uint64_t limit = (uint64_t)srv->cfg.idle_timeout_s * 1000000000ull;
    for (;;) {
        nfs_conn_t *idle[64];
        size_t n = 0;
        pthread_mutex_lock(&srv->conns_lock);
        for (nfs_conn_t *c = srv->conns; c && n < 64; c = c->next) {
            uint64_t t = atomic_load_explicit(&c->last_active_ns, memory_order_relaxed);
            if (now < t || now - t < limit) continue;
            pthread_mutex_lock(&c->lock);
            bool close_it = !c->closed && !c->inflight && !c->outq;
            pthread_mutex_unlock(&c->lock);
            if (!close_it) continue;
            atomic_fetch_add(&c->refs, 1);
            idle[n++] = c;
        }
        pthread_mutex_unlock(&srv->conns_lock);
        for (size_t i = 0; i < n; i++) {
            char a[INET6_ADDRSTRLEN];
            conn_addr_string(&idle[i]->addr, a, sizeof a);
            log_debug(SUB, "closing a connection of %s: no request for %u s", a,
                      srv->cfg.idle_timeout_s);
            conn_close(idle[i]);
            conn_rele(idle[i]);
        }
        if (n < 64) return;
    }
}

static bool is_listener(nfs_server_t *srv, void *ptr, int *fd)
{
    for (int i = 0; i < srv->nlisten; i++) {
        if (ptr == (void *)&srv->listen_fd[i]) {
            *fd = srv->listen_fd[i];
            return true;
        }
    }
    return false;
}

static void *io_loop(void *arg)
{
    nfs_server_t *srv = arg;
    struct epoll_event evs[64];
    while (!atomic_load(&srv->stopping)) {
        int n = epoll_wait(srv->epfd, evs, 64, 1000);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            int lfd;
            if (p == (void *)&srv->wake_fd) continue;
            if (is_listener(srv, p, &lfd)) {
                accept_conns(srv, lfd);
                continue;
            }
            nfs_conn_t *c = p;
            uint32_t e = evs[i].events;
            pthread_mutex_lock(&c->lock);
            bool closed = c->closed;
            pthread_mutex_unlock(&c->lock);
            if (closed) {
                /* Closed by a worker (a reply that could not be sent). */
                continue;
            }
            atomic_fetch_add(&c->refs, 1);
            c->alone = n == 1;
            if (e & EPOLLOUT) conn_writable(c);
            if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) conn_readable(c);
            if (e & (EPOLLHUP | EPOLLERR)) conn_close(c);
            conn_rele(c);
        }
        sweep_idle(srv);
        /* Drop the loop's reference of connections workers closed. */
        while (atomic_exchange(&srv->dead_pending, false)) {
            nfs_conn_t *dead[64];
            size_t nd = 0;
            pthread_mutex_lock(&srv->conns_lock);
            for (nfs_conn_t *c = srv->conns; c && nd < 64; c = c->next) {
                pthread_mutex_lock(&c->lock);
                if (c->closed && !c->loop_ref_dropped) {
                    c->loop_ref_dropped = true;
                    dead[nd++] = c;
                }
                pthread_mutex_unlock(&c->lock);
            }
            pthread_mutex_unlock(&srv->conns_lock);
            if (nd == 64) atomic_store(&srv->dead_pending, true);
            for (size_t k = 0; k < nd; k++) conn_rele(dead[k]);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ start/stop */

/* The I/O loop accepts on listener i from now on. */
static void listener_watch(nfs_server_t *srv, int i)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &srv->listen_fd[i]};
    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->listen_fd[i], &ev);
}

static int bind_one(nfs_server_t *srv, const nfs_listen_addr_t *la, uint16_t *bound, bool soft,
                    char *err, size_t errlen)
{
    if (la->port == 0) {
        *bound = 0;
        return 0;
    }
    const char *host = la->host[0] ? la->host : NULL;
    if (host && !strcmp(host, "0.0.0.0")) host = NULL;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICHOST};
    hints.ai_family = host ? AF_UNSPEC : AF_INET6;
    char port[8];
    snprintf(port, sizeof port, "%u", la->port);
    struct addrinfo *ai;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 && !host) {
        hints.ai_family = AF_INET;
        rc = getaddrinfo(host, port, &hints, &ai);
    }
    if (rc != 0) {
        snprintf(err, errlen, "bad listen address %s:%u: %s", la->host, la->port,
                 gai_strerror(rc));
        return -EINVAL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int e = 0;
    if (fd < 0) e = errno;
    if (fd >= 0) {
        int one = 1, zero = 0;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6 && !host)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
            e = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        if (soft) {
            log_info(SUB, "portmapper not started: %s:%u: %s (a system rpcbind may run)",
                     la->host[0] ? la->host : "*", la->port, strerror(e));
            *bound = 0;
            return 0;
        }
        snprintf(err, errlen, "cannot listen on %s:%u: %s", la->host[0] ? la->host : "*",
                 la->port, strerror(e));
        return -e;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                           : ((struct sockaddr_in6 *)&ss)->sin6_port);
    int i = srv->nlisten++;
    srv->listen_fd[i] = fd;
    if (!srv->cfg.defer_accept) listener_watch(srv, i);
    return 0;
}

int nfs_server_start(const nfs_server_config_t *cfg, nfs_server_t **out, char *err,
                     size_t errlen)
{
    nfs_server_t *srv = calloc(1, sizeof *srv);
    if (!srv) return -ENOMEM;
    srv->cfg = *cfg;
    if (!srv->cfg.max_conns) srv->cfg.max_conns = NFS_DEFAULT_MAX_CONNS;
    if (!srv->cfg.max_conns_per_client)
        srv->cfg.max_conns_per_client = NFS_DEFAULT_MAX_CONNS_PER_CLIENT;
    if (!srv->cfg.idle_timeout_s) srv->cfg.idle_timeout_s = NFS_DEFAULT_IDLE_TIMEOUT_S;
    if (conn_limits_init(&srv->limits, srv->cfg.max_conns, srv->cfg.max_conns_per_client)) {
        free(srv);
        return -ENOMEM;
    }
    if (cfg->state_dir) srv->cfg.state_dir = strdup(cfg->state_dir);
    srv->epfd = epoll_create1(EPOLL_CLOEXEC);
    srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&srv->conns_lock, NULL);
    pthread_mutex_init(&srv->calls_lock, NULL);
    pthread_cond_init(&srv->calls_cv, NULL);
    atomic_init(&srv->next_conn_id, 1);
    atomic_init(&srv->stopping, false);
    nfs_exports_init(srv);
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != sizeof v) v = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    srv->write_verifier = v ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)ts.tv_nsec;
    unsigned workers = cfg->workers;
    if (!workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        workers = n > 0 ? (unsigned)n * 4 : 8;
        if (workers < 8) workers = 8;
        if (workers > 64) workers = 64;
    }
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &srv->wake_fd};
    epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->wake_fd, &wev);

    int rc = nfs4_init(srv, &srv->nfs4_state);
    if (rc < 0) {
        snprintf(err, errlen, "NFSv4 state: %s", strerror(-rc));
        goto fail;
    }
    rc = nlm_init(srv, &srv->nlm_state);
    if (rc < 0) {
        snprintf(err, errlen, "NLM state: %s", strerror(-rc));
        goto fail;
    }
    srv->drc = nfs_drc_create();
    if (!srv->drc) {
        rc = -ENOMEM;
        snprintf(err, errlen, "duplicate request cache: %s", strerror(-rc));
        goto fail;
    }
    srv->workers = taskq_create("nfs", workers);
    if (!srv->workers) {
        rc = -ENOMEM;
        snprintf(err, errlen, "cannot start NFS workers");
        goto fail;
    }
    if ((rc = bind_one(srv, &cfg->nfs, &srv->port_nfs, false, err, errlen)) < 0) goto fail;
    if ((rc = bind_one(srv, &cfg->mount, &srv->port_mount, false, err, errlen)) < 0) goto fail;
    if ((rc = bind_one(srv, &cfg->portmap, &srv->port_portmap, true, err, errlen)) < 0) goto fail;
    nfs_udp_start(srv);
    if (pthread_create(&srv->io_thread, NULL, io_loop, srv) != 0) {
        rc = -EAGAIN;
        snprintf(err, errlen, "cannot start the NFS I/O thread");
        goto fail;
    }
    srv->io_started = true;
    log_info(SUB, "NFS server: nfs port %u, mount port %u, portmap port %u, %u workers",
             srv->port_nfs, srv->port_mount, srv->port_portmap, workers);
    *out = srv;
    return 0;
fail:
    nfs_server_stop(srv);
    return rc;
}

void nfs_server_serve(nfs_server_t *srv)
{
    if (!srv || !srv->cfg.defer_accept || srv->serving) return;
    srv->serving = true;
    for (int i = 0; i < srv->nlisten; i++) listener_watch(srv, i);
    log_info(SUB, "NFS server: accepting connections");
}

void nfs_server_stop(nfs_server_t *srv)
{
    if (!srv) return;
    nlm_stopping(srv->nlm_state);
    atomic_store(&srv->stopping, true);
    uint64_t one = 1;
    if (write(srv->wake_fd, &one, sizeof one) < 0) { /* the loop also times out */ }
    if (srv->io_started) pthread_join(srv->io_thread, NULL);
    nfs_udp_stop(srv);
    for (int i = 0; i < srv->nlisten; i++) close(srv->listen_fd[i]);
    srv->nlisten = 0;
    /* Shut every connection down so blocked clients see the end. */
    pthread_mutex_lock(&srv->conns_lock);
    /* No accept can add one now: the I/O thread is gone. */
    nfs_conn_t **list = calloc(srv->nconns + 1, sizeof *list);
    size_t n = 0;
    for (nfs_conn_t *c = srv->conns; c && list; c = c->next) {
        pthread_mutex_lock(&c->lock);
        conn_close_locked(c);
        if (!c->loop_ref_dropped) {
            c->loop_ref_dropped = true;
            list[n++] = c;
        }
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&srv->conns_lock);
    pthread_mutex_lock(&srv->calls_lock);
    while (srv->calls_running) pthread_cond_wait(&srv->calls_cv, &srv->calls_lock);
    pthread_mutex_unlock(&srv->calls_lock);
    for (size_t i = 0; i < n; i++) conn_rele(list[i]);
    free(list);
    if (srv->workers) taskq_destroy(srv->workers);
    nfs_exports_fini(srv);
    if (srv->nlm_state) nlm_fini(srv->nlm_state);
    if (srv->nfs4_state) nfs4_fini(srv->nfs4_state);
    nfs_drc_destroy(srv->drc);
    close(srv->epfd);
    close(srv->wake_fd);
    free((char *)srv->cfg.state_dir);
    conn_limits_fini(&srv->limits);
    free(srv);
}
