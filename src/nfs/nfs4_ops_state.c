/*
 * NFSv4 operations on state: client identity (SETCLIENTID for 4.0,
 * EXCHANGE_ID and sessions for 4.1), OPEN and friends, byte-range locks and
 * the stateid checks of READ/WRITE/SETATTR.
 *
 * 4.0 sequencing: OPEN, OPEN_CONFIRM, OPEN_DOWNGRADE, CLOSE, LOCK and LOCKU
 * carry an owner seqid. Each handler finds the owner, lets nfs4_seqid_check
 * decide (next: run, same: replay the owner's cached reply, else BAD_SEQID),
 * and on the way out records the seqid and caches its reply unless the status
 * is one that does not consume a seqid. In 4.1 the session slot does this job
 * for the whole COMPOUND and seqids are ignored.
 *
 * OPEN itself, the one that touches the filesystem, lives in nfs4_open.c and
 * shares the sequencing helpers declared in nfs4_compound.h.
 */
#include "nfs4_compound.h"

#include <cairn/log.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>

enum {
    EXCHGID4_FLAG_SUPP_MOVED_REFER = 0x1, EXCHGID4_FLAG_SUPP_MOVED_MIGR = 0x2,
    EXCHGID4_FLAG_BIND_PRINC_STATEID = 0x100, EXCHGID4_FLAG_USE_NON_PNFS = 0x10000,
    EXCHGID4_FLAG_USE_PNFS_MDS = 0x20000, EXCHGID4_FLAG_USE_PNFS_DS = 0x40000,
    EXCHGID4_FLAG_UPD_CONFIRMED_REC_A = 0x40000000, EXCHGID4_FLAG_CONFIRMED_R = 0x80000000u,
};
enum {
    CREATE_SESSION4_FLAG_PERSIST = 0x1, CREATE_SESSION4_FLAG_CONN_BACK_CHAN = 0x2,
    CREATE_SESSION4_FLAG_CONN_RDMA = 0x4,
    CREATE_SESSION4_FLAGS_KNOWN = CREATE_SESSION4_FLAG_PERSIST |
                                  CREATE_SESSION4_FLAG_CONN_BACK_CHAN |
                                  CREATE_SESSION4_FLAG_CONN_RDMA,
};
enum { CDFC4_FORE = 0x1, CDFC4_BACK = 0x2, CDFS4_FORE = 0x1, CDFS4_BACK = 0x2, CDFS4_BOTH = 0x3 };
enum { SEQ4_STATUS_RECALLABLE_STATE_REVOKED = 0x40, SEQ4_STATUS_CB_PATH_DOWN_SESSION = 0x200 };

#define SESSION_MAX_SLOTS 64
#define SESSION_MAX_OPS 64
#define SESSION_MAX_CACHED 65536u
#define CHANNEL_MIN_MSG 256u
#define SESSION_MAX_MSG ((uint32_t)(1u << 20) + 60000u)
/* sessionid, sequenceid, slotid, highest and target highest slotid, status flags */
#define SEQUENCE_RESULT_SIZE (NFS4_SESSIONID_SIZE + 5 * 4)

/* ---------------------------------------------------------------- helpers */

/* The client this COMPOUND acts for (lock held): 4.1 the session's, 4.0 the
 * confirmed one named by clientid. Renews its lease. */
uint32_t nfs4_client_of(nfs4_cx_t *cx, uint64_t clientid, nfs4_client_t **out)
{
    nfs4_client_t *c;
    if (cx->minor >= 1) {
        if (!cx->have_session) return NFS4ERR_OP_NOT_IN_SESSION;
        nfs4_session_t *s = nfs4_session_find(cx->st, cx->sessionid);
        if (!s) return NFS4ERR_BADSESSION;
        c = s->client;
    } else {
        uint32_t status;
        c = nfs4_client_by_id(cx->st, clientid, &status);
        if (!c) return status;
        if (!c->confirmed) return NFS4ERR_STALE_CLIENTID;
        cx->client40 = c->clientid;
    }
    c->renewed = nfs4_now();
    *out = c;
    return NFS4_OK;
}

/* Finds a stateid without checking its seqid (4.0 owners are sequenced first). */
static uint32_t stid_find_any(nfs4_cx_t *cx, const nfs4_stateid_t *sid, nfs4_stid_t **out)
{
    nfs4_stateid_t copy = *sid;
    copy.seqid = 0;
    return nfs4_stid_find(cx->st, 1, &copy, out);
}

static bool stid_on_cur(nfs4_cx_t *cx, const nfs4_stid_t *s)
{
    if (cx->cur.kind != NFS4_FH_REAL) return false;
    return nfs4_file_is(s->file, cx->cur.node);
}

/* A 4.0 retransmission: the owner's cached reply becomes this op's result. */
static uint32_t replay_owner(nfs4_cx_t *cx, nfs4_owner_t *o)
{
    if (o->reply_len) nfs_xdr_put_fixed(cx->r, o->reply, o->reply_len);
    cx->keep_body = true;
    return o->reply_status;
}

static uint64_t args_hash(nfs4_cx_t *cx)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = cx->args; i < cx->a->pos && i < cx->a->len; i++)
        h = (h ^ cx->a->buf[i]) * 0x100000001b3ull;
    return h;
}

/* Records a 4.0 seqid and the reply now in cx->r (lock held). */
void nfs4_seq_finish(nfs4_cx_t *cx, nfs4_owner_t *o, uint32_t seqid, uint32_t status)
{
    if (cx->minor >= 1 || !o || !nfs4_status_bumps_seqid(status)) return;
    o->seqid = seqid;
    o->have_seqid = true;
    o->request_hash = args_hash(cx);
    bool body = status == NFS4_OK || cx->keep_body;
    nfs4_owner_cache_reply(o, status, body ? cx->r->buf + cx->body : NULL,
                           body ? (uint32_t)(cx->r->pos - cx->body) : 0);
}

/* 4.0 sequencing verdict for owner o (lock held): NFS4_OK to run; otherwise
 * the status to return (*replayed when it is a cached reply). */
uint32_t nfs4_seq_check(nfs4_cx_t *cx, nfs4_owner_t *o, uint32_t seqid, bool *replayed)
{
    *replayed = false;
    if (cx->minor >= 1) return NFS4_OK;
    switch (nfs4_seqid_check(o->have_seqid, o->seqid, seqid)) {
    case NFS4_SEQ_NEW: return NFS4_OK;
    case NFS4_SEQ_REPLAY:
        /* Some clients (libnfs) do not advance the seqid after an error such
         * as DENIED and send a different request with the same seqid: only a
         * byte-identical request is a retransmission; run the other. */
        if (args_hash(cx) != o->request_hash) return NFS4_OK;
        *replayed = true;
        return replay_owner(cx, o);
    default: return NFS4ERR_BAD_SEQID;
    }
}

void nfs4_put_stid(nfs4_cx_t *cx, const nfs4_stid_t *s)
{
    nfs4_stateid_t w;
    nfs4_stid_to_wire(cx->st, s, &w);
    nfs4_put_stateid(cx->r, &w);
    nfs4_set_cur_stateid(cx, &w);
}

/* Calls fn on every open state of file f (lock held); stops on non-zero. */
uint32_t nfs4_each_open(nfs4_server_t *st, nfs4_file_t *f,
                        uint32_t (*fn)(nfs4_stid_t *s, void *arg), void *arg)
{
    for (nfs4_client_t *c = st->clients; c; c = c->next)
        for (nfs4_stid_t *s = c->stids; s; s = s->cnext) {
            if (s->file != f || s->type != NFS4_STID_OPEN) continue;
            uint32_t rc = fn(s, arg);
            if (rc) return rc;
        }
    return NFS4_OK;
}

/* The principal a request comes from: its RPC flavour and (AUTH_SYS) user. */
static void principal_set(nfs4_client_t *c, const nfs4_cx_t *cx)
{
    c->princ_flavor = cx->call->flavor;
    c->princ_uid = cx->call->cred.uid;
}

static bool principal_same(const nfs4_client_t *c, const nfs4_cx_t *cx)
{
    return c->princ_flavor == cx->call->flavor && c->princ_uid == cx->call->cred.uid;
}

/* Whether a client record holds anything another principal's SETCLIENTID or
 * EXCHANGE_ID may not take away from it while its lease runs: sessions or
 * stateids (RFC 7530 16.33.5, RFC 8881 18.35.4 case 3). */
static bool client_in_use(const nfs4_server_t *st, const nfs4_client_t *c)
{
    return (c->sessions || c->stids) && nfs4_now() - c->renewed <= (time_t)st->lease;
}

/* ---------------------------------------------------------------- 4.0 clients */

uint32_t nfs4_op_setclientid(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    const uint8_t *verf = nfs_xdr_get_fixed(a, 8);
    uint32_t idlen, l;
    const uint8_t *id = nfs_xdr_get_opaque(a, &idlen, NFS4_OPAQUE_LIMIT);
    uint32_t cb_prog = nfs_xdr_get_u32(a), ulen;
    const uint8_t *netid = nfs_xdr_get_opaque(a, &l, NFS4_OPAQUE_LIMIT);
    const uint8_t *uaddr = nfs_xdr_get_opaque(a, &ulen, NFS4_OPAQUE_LIMIT);
    uint32_t cb_ident = nfs_xdr_get_u32(a);
    if (a->err) return NFS4ERR_BADXDR;
    struct sockaddr_storage cb_addr;
    socklen_t cb_addr_len = 0;
    if (!nfs4_cb_parse_addr(netid, l, uaddr, ulen, &cb_addr, &cb_addr_len)) cb_addr_len = 0;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c = nfs4_client_by_owner(st, id, idlen);
    if (c && c->confirmed && !principal_same(c, cx) && client_in_use(st, c)) {
        /* Another client's name, whose state lives. The reply names the
         * client using it (clientaddr4); we keep no address worth giving. */
        nfs4_unlock(st);
        nfs_xdr_put_string(cx->r, "");
        nfs_xdr_put_string(cx->r, "");
        cx->keep_body = true;
        return NFS4ERR_CLID_INUSE;
    }
    if (c && c->confirmed && !memcmp(c->verifier, verf, 8)) {
        /* A callback update from the same client incarnation. */
        for (int i = 0; i < 8; i++) c->confirm[i] = (uint8_t)rand();
    } else {
        for (nfs4_client_t *o = st->clients, *next; o; o = next) {
            next = o->next;
            if (!o->confirmed && o->owner_len == idlen && !memcmp(o->owner, id, idlen))
                nfs4_client_destroy(st, o, false);
        }
        c = nfs4_client_new(st, id, idlen, verf, 0);
        if (!c) {
            nfs4_unlock(st);
            return NFS4ERR_RESOURCE;
        }
        principal_set(c, cx);
    }
    /* Probed once confirmed (SETCLIENTID_CONFIRM). */
    c->cb_prog = cb_prog;
    c->cb_ident = cb_ident;
    c->cb_addr = cb_addr;
    c->cb_addr_len = cb_addr_len;
    c->cb_up = false;
    nfs_xdr_put_u64(cx->r, c->clientid);
    nfs_xdr_put_fixed(cx->r, c->confirm, 8);
    nfs4_unlock(st);
    return NFS4_OK;
}

uint32_t nfs4_op_setclientid_confirm(nfs4_cx_t *cx)
{
    uint64_t clientid = nfs_xdr_get_u64(cx->a);
    const uint8_t *verf = nfs_xdr_get_fixed(cx->a, 8);
    if (cx->a->err) return NFS4ERR_BADXDR;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    uint32_t status;
    nfs4_client_t *c = nfs4_client_by_id(st, clientid, &status);
    if (c && memcmp(c->confirm, verf, 8)) status = NFS4ERR_STALE_CLIENTID;
    else if (c && !c->confirmed) nfs4_client_confirm(st, c);
    else if (c) c->renewed = nfs4_now();
    if (c && status == NFS4_OK) nfs4_cb_probe(st, c);
    nfs4_unlock(st);
    return c ? status : (status == NFS4ERR_EXPIRED ? NFS4ERR_STALE_CLIENTID : status);
}

uint32_t nfs4_op_renew(nfs4_cx_t *cx)
{
    uint64_t clientid = nfs_xdr_get_u64(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_client_t *c;
    uint32_t status = nfs4_client_of(cx, clientid, &c);
    /* Renewed, but a client holding delegations it cannot be called back
     * about is told so (RFC 7530 16.29.5), and may give a new address. */
    if (status == NFS4_OK && !c->cb_up)
        for (nfs4_stid_t *s = c->stids; s; s = s->cnext)
            if (s->type == NFS4_STID_DELEG && !s->revoked) status = NFS4ERR_CB_PATH_DOWN;
    nfs4_unlock(cx->st);
    return status;
}

/* ---------------------------------------------------------------- 4.1 sessions */

/* A 4.1 client must say RECLAIM_COMPLETE before it takes new locks, even
 * with nothing to reclaim; until then new OPENs and LOCKs are told
 * NFS4ERR_GRACE (RFC 8881 18.51.3). */
bool nfs4_awaiting_reclaim_complete(const nfs4_cx_t *cx, const nfs4_client_t *c)
{
    return cx->minor >= 1 && !c->reclaim_complete;
}

/* EXCHANGE_ID's cases (RFC 8881 18.35.4) on the record *c of the same owner
 * (NULL: none); *c becomes the record to answer with. */
static uint32_t exchange_id_record(nfs4_cx_t *cx, nfs4_client_t **c, const uint8_t *id,
                                   uint32_t idlen, const uint8_t *verf, uint32_t flags)
{
    nfs4_server_t *st = cx->st;
    nfs4_client_t *old = *c;
    bool confirmed = old && old->confirmed;
    if (flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A) {
        if (!confirmed) return NFS4ERR_NOENT;                          /* case 7 */
        if (!principal_same(old, cx)) return NFS4ERR_PERM;             /* case 9 */
        if (memcmp(old->verifier, verf, 8)) return NFS4ERR_NOT_SAME;   /* case 8 */
        return NFS4_OK;                                                /* case 6 */
    }
    if (confirmed && old->minor >= 1 && principal_same(old, cx) &&
        !memcmp(old->verifier, verf, 8))
        return NFS4_OK;                                                /* case 2 */
    if (confirmed && !principal_same(old, cx)) {
        /* Case 3, a collision of two clients' owner names: the record in
         * use stays; one without state gives way to the newcomer. */
        if (client_in_use(st, old)) return NFS4ERR_CLID_INUSE;
        nfs4_client_destroy(st, old, false);
    }
    /* Cases 1, 4 and 5: a new client, a new unconfirmed record replacing
     * another, or a restarted client (whose confirmed record goes when
     * CREATE_SESSION confirms the new one). */
    for (nfs4_client_t *o = st->clients, *next; o; o = next) {
        next = o->next;
        if (!o->confirmed && o->owner_len == idlen && !memcmp(o->owner, id, idlen))
            nfs4_client_destroy(st, o, false);
    }
    *c = nfs4_client_new(st, id, idlen, verf, 1);
    if (!*c) return NFS4ERR_RESOURCE;
    principal_set(*c, cx);
    return NFS4_OK;
}

uint32_t nfs4_op_exchange_id(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    const uint8_t *verf = nfs_xdr_get_fixed(a, 8);
    uint32_t idlen, l;
    const uint8_t *id = nfs_xdr_get_opaque(a, &idlen, NFS4_OPAQUE_LIMIT);
    uint32_t flags = nfs_xdr_get_u32(a);
    uint32_t how = nfs_xdr_get_u32(a);
    if (a->err) return NFS4ERR_BADXDR;
    if (how == 1) {           /* SP4_MACH_CRED: two bitmaps we do not enforce */
        nfs4_bitmap_t b;
        nfs4_bitmap_get(a, &b, NULL);
        nfs4_bitmap_get(a, &b, NULL);
    } else if (how != 0) {
        return NFS4ERR_NOTSUPP;
    }
    uint32_t nimpl = nfs_xdr_get_u32(a);
    if (nimpl > 1) return NFS4ERR_BADXDR;
    if (nimpl == 1) {
        (void)nfs_xdr_get_opaque(a, &l, NFS4_OPAQUE_LIMIT);
        (void)nfs_xdr_get_opaque(a, &l, NFS4_OPAQUE_LIMIT);
        (void)nfs_xdr_get_u64(a);
        (void)nfs_xdr_get_u32(a);
    }
    if (a->err) return NFS4ERR_BADXDR;
    uint32_t valid = EXCHGID4_FLAG_SUPP_MOVED_REFER | EXCHGID4_FLAG_SUPP_MOVED_MIGR |
                     EXCHGID4_FLAG_BIND_PRINC_STATEID | EXCHGID4_FLAG_USE_NON_PNFS |
                     EXCHGID4_FLAG_USE_PNFS_MDS | EXCHGID4_FLAG_USE_PNFS_DS |
                     EXCHGID4_FLAG_UPD_CONFIRMED_REC_A;
    if (flags & ~valid) return NFS4ERR_INVAL;

    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c = nfs4_client_by_owner(st, id, idlen);
    uint32_t status = exchange_id_record(cx, &c, id, idlen, verf, flags);
    if (status == NFS4_OK) {
        nfs_xdr_t *r = cx->r;
        nfs_xdr_put_u64(r, c->clientid);
        nfs_xdr_put_u32(r, c->cs_seqid);
        nfs_xdr_put_u32(r, EXCHGID4_FLAG_USE_NON_PNFS |
                               (c->confirmed ? EXCHGID4_FLAG_CONFIRMED_R : 0));
        nfs_xdr_put_u32(r, 0);                       /* SP4_NONE */
        nfs_xdr_put_u64(r, 0);                       /* server_owner.so_minor_id */
        nfs_xdr_put_string(r, "cairn");              /* so_major_id */
        nfs_xdr_put_string(r, "cairn");              /* server_scope */
        nfs_xdr_put_u32(r, 1);                       /* server_impl_id */
        nfs_xdr_put_string(r, "cairn.invalid");
        nfs_xdr_put_string(r, "Cairn NFS server");
        nfs_xdr_put_u64(r, 0);
        nfs_xdr_put_u32(r, 0);
    }
    nfs4_unlock(st);
    return status;
}

static void get_chan(nfs_xdr_t *a, nfs4_chan_attrs_t *c)
{
    c->headerpad = nfs_xdr_get_u32(a);
    c->maxreq = nfs_xdr_get_u32(a);
    c->maxresp = nfs_xdr_get_u32(a);
    c->maxresp_cached = nfs_xdr_get_u32(a);
    c->maxops = nfs_xdr_get_u32(a);
    c->maxreqs = nfs_xdr_get_u32(a);
    uint32_t n = nfs_xdr_get_u32(a);
    if (n > 1) a->err = true;
    if (n == 1) (void)nfs_xdr_get_u32(a);
}

static void put_chan(nfs_xdr_t *r, const nfs4_chan_attrs_t *c)
{
    nfs_xdr_put_u32(r, c->headerpad);
    nfs_xdr_put_u32(r, c->maxreq);
    nfs_xdr_put_u32(r, c->maxresp);
    nfs_xdr_put_u32(r, c->maxresp_cached);
    nfs_xdr_put_u32(r, c->maxops);
    nfs_xdr_put_u32(r, c->maxreqs);
    nfs_xdr_put_u32(r, 0);
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* A channel on which no COMPOUND (or CB_COMPOUND) could ever fit: fewer than
 * two operations (SEQUENCE and one more), or messages too short for them. */
static bool chan_too_small(const nfs4_chan_attrs_t *c)
{
    return c->maxops < 2 || c->maxreq < CHANNEL_MIN_MSG || c->maxresp < CHANNEL_MIN_MSG;
}

uint32_t nfs4_op_create_session(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    uint64_t clientid = nfs_xdr_get_u64(a);
    uint32_t seq = nfs_xdr_get_u32(a);
    uint32_t flags = nfs_xdr_get_u32(a);
    nfs4_chan_attrs_t fore, back;
    get_chan(a, &fore);
    get_chan(a, &back);
    uint32_t cb_prog = nfs_xdr_get_u32(a);
    nfs4_cb_sec_t cb_sec;
    if (nfs4_cb_sec_decode(a, &cb_sec) || a->err) return NFS4ERR_BADXDR;

    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    uint32_t status;
    nfs4_client_t *c = nfs4_client_by_id(st, clientid, &status);
    if (!c) {
        nfs4_unlock(st);
        return status == NFS4ERR_EXPIRED ? NFS4ERR_STALE_CLIENTID : status;
    }
    /* Only the principal that made an unconfirmed record may confirm it
     * (RFC 8881 18.36.4); a confirmed one takes sessions from any. */
    if (!c->confirmed && !principal_same(c, cx)) {
        nfs4_unlock(st);
        return NFS4ERR_CLID_INUSE;
    }
    if (seq + 1 == c->cs_seqid && c->cs_reply) {
        nfs_xdr_put_fixed(cx->r, c->cs_reply, c->cs_reply_len);
        nfs4_unlock(st);
        return NFS4_OK;
    }
    if (seq != c->cs_seqid) {
        nfs4_unlock(st);
        return NFS4ERR_SEQ_MISORDERED;
    }
    nfs4_chan_attrs_t f = {
        .headerpad = 0,
        .maxreq = min_u32(fore.maxreq, SESSION_MAX_MSG),
        .maxresp = min_u32(fore.maxresp, SESSION_MAX_MSG),
        .maxresp_cached = min_u32(fore.maxresp_cached, SESSION_MAX_CACHED),
        .maxops = min_u32(fore.maxops, SESSION_MAX_OPS),
        .maxreqs = min_u32(fore.maxreqs, SESSION_MAX_SLOTS),
    };
    if (f.maxreqs == 0) f.maxreqs = 1;
    if (flags & ~CREATE_SESSION4_FLAGS_KNOWN) {
        nfs4_unlock(st);
        return NFS4ERR_INVAL;
    }
    if (chan_too_small(&f) || chan_too_small(&back)) {
        nfs4_unlock(st);
        return NFS4ERR_TOOSMALL;
    }
    back.headerpad = 0;
    if (back.maxreqs == 0) back.maxreqs = 1;
    nfs4_session_t *s = nfs4_session_new(st, c, &f, &back);
    if (!s) {
        nfs4_unlock(st);
        return NFS4ERR_RESOURCE;
    }
    if (!c->confirmed) nfs4_client_confirm(st, c);
    /* This connection carries the back channel too when the client asks:
     * callbacks go out on it (nfs4_callback.c). No persistence, no RDMA. */
    s->cb_prog = cb_prog;
    s->cb_sec = cb_sec;
    s->cb_minor = cx->minor;
    flags &= CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
    if (flags) {
        s->back_wanted = true;
        nfs4_cb_bind(s, cx->call->conn);
    }
    size_t body = cx->r->pos;
    nfs_xdr_put_fixed(cx->r, s->id, NFS4_SESSIONID_SIZE);
    nfs_xdr_put_u32(cx->r, seq);
    nfs_xdr_put_u32(cx->r, flags);
    put_chan(cx->r, &f);
    put_chan(cx->r, &back);
    if (!cx->r->err) {
        free(c->cs_reply);
        c->cs_reply_len = (uint32_t)(cx->r->pos - body);
        c->cs_reply = malloc(c->cs_reply_len);
        if (c->cs_reply) memcpy(c->cs_reply, cx->r->buf + body, c->cs_reply_len);
    }
    c->cs_seqid++;
    nfs4_unlock(st);
    return NFS4_OK;
}

uint32_t nfs4_op_sequence(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    const uint8_t *sid = nfs_xdr_get_fixed(a, NFS4_SESSIONID_SIZE);
    uint32_t seq = nfs_xdr_get_u32(a);
    uint32_t slotid = nfs_xdr_get_u32(a);
    (void)nfs_xdr_get_u32(a);                        /* highest_slotid */
    bool cachethis = nfs_xdr_get_u32(a) != 0;
    if (a->err) return NFS4ERR_BADXDR;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_session_t *s = nfs4_session_find(st, sid);
    uint32_t status = NFS4_OK;
    if (!s) status = NFS4ERR_BADSESSION;
    else if (slotid >= s->fore.maxreqs) status = NFS4ERR_BADSLOT;
    if (status) {
        nfs4_unlock(st);
        return status;
    }
    nfs4_slot_t *slot = &s->slots[slotid];
    if (seq == slot->seqid && slot->seqid != 0) {
        if (slot->busy) status = NFS4ERR_DELAY;
        else if (!slot->cached) status = NFS4ERR_RETRY_UNCACHED_REP;
        else {
            cx->r->pos = cx->r->len = cx->start;
            nfs_xdr_put_fixed(cx->r, slot->reply, slot->reply_len);
            cx->replayed = true;
        }
        nfs4_unlock(st);
        return status;
    }
    if (seq != slot->seqid + 1) {
        nfs4_unlock(st);
        return NFS4ERR_SEQ_MISORDERED;
    }
    if (cx->numops > s->fore.maxops) {
        nfs4_unlock(st);
        return NFS4ERR_TOO_MANY_OPS;
    }
    /* Sizes the session was created with (RFC 8881 18.46.3): the request,
     * and the reply, whose SEQUENCE result alone may already be too big. */
    if (cx->a->len > s->fore.maxreq) {
        nfs4_unlock(st);
        return NFS4ERR_REQ_TOO_BIG;
    }
    uint32_t reply_limit = cachethis ? s->fore.maxresp_cached : s->fore.maxresp;
    if (cx->body - cx->start + SEQUENCE_RESULT_SIZE > reply_limit) {
        nfs4_unlock(st);
        return cachethis ? NFS4ERR_REP_TOO_BIG_TO_CACHE : NFS4ERR_REP_TOO_BIG;
    }
    if (cx->call->memory_only) {
        cx->prev_seqid = slot->seqid;
        cx->prev_cached = slot->cached;
        cx->prev_reply = slot->reply;
        cx->prev_reply_len = slot->reply_len;
    } else {
        free(slot->reply);
    }
    slot->seqid = seq;
    slot->busy = true;
    slot->cached = false;
    slot->reply = NULL;
    slot->reply_len = 0;
    s->client->renewed = nfs4_now();
    cx->have_session = true;
    memcpy(cx->sessionid, sid, NFS4_SESSIONID_SIZE);
    cx->slot = slotid;
    cx->clientid = s->client->clientid;
    cx->cachethis = cachethis;
    cx->reply_limit = reply_limit;
    nfs_xdr_put_fixed(cx->r, sid, NFS4_SESSIONID_SIZE);
    nfs_xdr_put_u32(cx->r, seq);
    nfs_xdr_put_u32(cx->r, slotid);
    nfs_xdr_put_u32(cx->r, s->fore.maxreqs - 1);
    nfs_xdr_put_u32(cx->r, s->fore.maxreqs - 1);
    uint32_t flags = 0;
    if (s->client->nrevoked) flags |= SEQ4_STATUS_RECALLABLE_STATE_REVOKED;
    if (s->back_wanted && (!s->back_conn || nfs_conn_closed(s->back_conn)))
        flags |= SEQ4_STATUS_CB_PATH_DOWN_SESSION;   /* the client binds another */
    nfs_xdr_put_u32(cx->r, flags);
    nfs4_unlock(st);
    return NFS4_OK;
}

void nfs4_slot_done(nfs4_cx_t *cx, const nfs_xdr_t *r, size_t start, size_t len)
{
    nfs4_server_t *st = cx->st;
    free(cx->prev_reply); /* the answer the slot held before this request */
    cx->prev_reply = NULL;
    pthread_mutex_lock(&st->lock);
    nfs4_session_t *s = nfs4_session_find(st, cx->sessionid);
    if (s && cx->slot < s->fore.maxreqs) {
        nfs4_slot_t *slot = &s->slots[cx->slot];
        slot->busy = false;
        if (len <= s->fore.maxresp_cached && (slot->reply = malloc(len ? len : 1))) {
            nfs_xdr_copy_out(r, start, len, slot->reply); /* with any lent READ data */
            slot->reply_len = (uint32_t)len;
            slot->cached = true;
        }
    }
    nfs4_unlock(st);
}

void nfs4_slot_undo(nfs4_cx_t *cx)
{
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_session_t *s = nfs4_session_find(st, cx->sessionid);
    if (s && cx->slot < s->fore.maxreqs) {
        nfs4_slot_t *slot = &s->slots[cx->slot];
        free(slot->reply);
        slot->seqid = cx->prev_seqid;
        slot->cached = cx->prev_cached;
        slot->reply = cx->prev_reply;
        slot->reply_len = cx->prev_reply_len;
        slot->busy = false;
    } else {
        free(cx->prev_reply);   /* the session went meanwhile */
    }
    cx->prev_reply = NULL;
    nfs4_unlock(st);
}

uint32_t nfs4_op_destroy_session(nfs4_cx_t *cx)
{
    const uint8_t *sid = nfs_xdr_get_fixed(cx->a, NFS4_SESSIONID_SIZE);
    if (cx->a->err) return NFS4ERR_BADXDR;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_session_t *s = nfs4_session_find(cx->st, sid);
    if (s) {
        nfs4_session_destroy(cx->st, s);
        if (cx->have_session && !memcmp(cx->sessionid, sid, NFS4_SESSIONID_SIZE))
            cx->have_session = false;
    }
    nfs4_unlock(cx->st);
    return s ? NFS4_OK : NFS4ERR_BADSESSION;
}

uint32_t nfs4_op_destroy_clientid(nfs4_cx_t *cx)
{
    uint64_t clientid = nfs_xdr_get_u64(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    pthread_mutex_lock(&cx->st->lock);
    uint32_t status;
    nfs4_client_t *c = nfs4_client_by_id(cx->st, clientid, &status);
    if (c && c->sessions) status = NFS4ERR_CLIENTID_BUSY;
    else if (c) nfs4_client_destroy(cx->st, c, false);
    nfs4_unlock(cx->st);
    return c || status != NFS4ERR_EXPIRED ? status : NFS4ERR_STALE_CLIENTID;
}

uint32_t nfs4_op_reclaim_complete(nfs4_cx_t *cx)
{
    bool one_fs = nfs_xdr_get_u32(cx->a) != 0;
    if (cx->a->err) return NFS4ERR_BADXDR;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_client_t *c;
    uint32_t status = nfs4_client_of(cx, 0, &c);
    if (status == NFS4_OK && !one_fs) {
        if (c->reclaim_complete) status = NFS4ERR_COMPLETE_ALREADY;
        else {
            c->reclaim_complete = true;
            nfs4_grace_check_done(cx->st);
        }
    }
    nfs4_unlock(cx->st);
    return status;
}

uint32_t nfs4_op_bind_conn(nfs4_cx_t *cx)
{
    const uint8_t *sid = nfs_xdr_get_fixed(cx->a, NFS4_SESSIONID_SIZE);
    uint32_t dir = nfs_xdr_get_u32(cx->a);
    (void)nfs_xdr_get_u32(cx->a);                    /* RDMA mode */
    if (cx->a->err) return NFS4ERR_BADXDR;
    /* Every connection may carry the fore channel; one asked to carry the
     * back channel (CDFC4_BACK, FORE_OR_BOTH, BACK_OR_BOTH) becomes the
     * session's callback connection. */
    bool back = dir & CDFC4_BACK;
    uint32_t got = !back ? CDFS4_FORE : (dir & CDFC4_FORE) ? CDFS4_BOTH : CDFS4_BACK;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_session_t *s = nfs4_session_find(cx->st, sid);
    if (s) s->client->renewed = nfs4_now();
    if (s && back) {
        s->back_wanted = true;
        nfs4_cb_bind(s, cx->call->conn);
        /* Recalls that found the channel down go again on the new one. */
        for (nfs4_stid_t *d = s->client->stids; d; d = d->cnext)
            if (d->type == NFS4_STID_DELEG && d->recalled && !d->revoked)
                nfs4_cb_recall(cx->st, d);
    }
    nfs4_unlock(cx->st);
    if (!s) return NFS4ERR_BADSESSION;
    nfs_xdr_put_fixed(cx->r, sid, NFS4_SESSIONID_SIZE);
    nfs_xdr_put_u32(cx->r, got);
    nfs_xdr_put_u32(cx->r, 0);
    return NFS4_OK;
}

uint32_t nfs4_op_test_stateid(nfs4_cx_t *cx)
{
    uint32_t n = nfs_xdr_get_u32(cx->a);
    if (n > 1024) return NFS4ERR_BADXDR;
    nfs4_stateid_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return NFS4ERR_RESOURCE;
    for (uint32_t i = 0; i < n; i++) nfs4_get_stateid(cx->a, &v[i]);
    if (cx->a->err) { free(v); return NFS4ERR_BADXDR; }
    nfs_xdr_put_u32(cx->r, n);
    pthread_mutex_lock(&cx->st->lock);
    for (uint32_t i = 0; i < n; i++) {
        nfs4_stid_t *s;
        uint32_t status = nfs4_stateid_is_anon(&v[i]) || nfs4_stateid_is_bypass(&v[i])
                              ? NFS4ERR_BAD_STATEID
                              : nfs4_stid_find(cx->st, cx->minor, &v[i], &s);
        nfs_xdr_put_u32(cx->r, status);
    }
    nfs4_unlock(cx->st);
    free(v);
    return NFS4_OK;
}

uint32_t nfs4_op_free_stateid(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    uint32_t status = nfs4_arg_stateid(cx, &sid);
    if (status) return status;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_stid_t *s;
    status = nfs4_stid_find(cx->st, cx->minor, &sid, &s);
    if (status == NFS4ERR_DELEG_REVOKED && s) {
        nfs4_stid_free(cx->st, s);   /* the client saw its delegation revoked */
        status = NFS4_OK;
    } else if (status == NFS4_OK) {
        if (s->type != NFS4_STID_LOCK || nfs4_range_owner_holds(&s->file->locks, s->owner))
            status = NFS4ERR_LOCKS_HELD;
        else
            nfs4_stid_free(cx->st, s);
    }
    nfs4_unlock(cx->st);
    return status;
}

/* ---------------------------------------------------------------- OPEN_CONFIRM, OPEN_DOWNGRADE, CLOSE */

/* OPEN_CONFIRM, OPEN_DOWNGRADE and CLOSE, under st->lock: the open stateid sid
 * names on the current file, and its owner's seqid check. *o is NULL when the
 * stateid is bad (the status says why); *replayed when the request is a
 * retransmission whose reply nfs4_seq_check already put back. */
static uint32_t open_stid_seq(nfs4_cx_t *cx, const nfs4_stateid_t *sid, uint32_t seqid,
                              nfs4_stid_t **s, nfs4_owner_t **o, bool *replayed)
{
    uint32_t status = stid_find_any(cx, sid, s);
    if (status == NFS4_OK && ((*s)->type != NFS4_STID_OPEN || !stid_on_cur(cx, *s)))
        status = NFS4ERR_BAD_STATEID;
    *o = status ? NULL : (*s)->owner;
    *replayed = false;
    if (*o) status = nfs4_seq_check(cx, *o, seqid, replayed);
    return status;
}

uint32_t nfs4_op_open_confirm(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    uint32_t seqid = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t status = nfs4_need_real_file(cx);
    if (status) return status;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_stid_t *s;
    nfs4_owner_t *o;
    bool replayed;
    status = open_stid_seq(cx, &sid, seqid, &s, &o, &replayed);
    if (!replayed && o && status == NFS4_OK) {
        status = nfs4_stateid_seqid_check(0, sid.seqid, s->seqid);
        if (status == NFS4_OK && o->confirmed) status = NFS4ERR_BAD_STATEID;
        if (status == NFS4_OK) {
            o->confirmed = true;
            s->seqid++;
            s->client->renewed = nfs4_now();
            nfs4_put_stid(cx, s);
        }
        nfs4_seq_finish(cx, o, seqid, status);
    }
    nfs4_unlock(cx->st);
    return status;
}

/* The share modes (as bits 1 << mode) that lie within mode: after a
 * downgrade to mode, the OPENs of wider ones no longer count. */
static uint32_t share_modes_within(uint32_t mode)
{
    uint32_t bits = 0;
    for (uint32_t m = 0; m <= 3; m++)
        if (!(m & ~mode)) bits |= 1u << m;
    return bits;
}

uint32_t nfs4_op_open_downgrade(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    uint32_t seqid = nfs_xdr_get_u32(cx->a);
    uint32_t access = nfs_xdr_get_u32(cx->a) & 0xff;
    uint32_t deny = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t status = nfs4_resolve_stateid(cx, &sid);
    if (status == NFS4_OK) status = nfs4_need_real_file(cx);
    if (status) return status;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_stid_t *s;
    nfs4_owner_t *o;
    bool replayed;
    status = open_stid_seq(cx, &sid, seqid, &s, &o, &replayed);
    if (!replayed && o && status == NFS4_OK) {
        status = nfs4_stateid_seqid_check(cx->minor, sid.seqid, s->seqid);
        /* Only to modes some OPEN of this state asked for (RFC 7530 16.19.4). */
        if (status == NFS4_OK && (access < 1 || access > 3 || deny > 3 ||
                                  !(s->access_modes & (1u << access)) ||
                                  !(s->deny_modes & (1u << deny))))
            status = NFS4ERR_INVAL;
        if (status == NFS4_OK) {
            s->access = access;
            s->deny = deny;
            s->access_modes &= share_modes_within(access);
            s->deny_modes &= share_modes_within(deny);
            s->seqid++;
            s->client->renewed = nfs4_now();
            nfs4_put_stid(cx, s);
        }
        nfs4_seq_finish(cx, o, seqid, status);
    }
    nfs4_unlock(cx->st);
    return status;
}

uint32_t nfs4_op_close(nfs4_cx_t *cx)
{
    uint32_t seqid = nfs_xdr_get_u32(cx->a);
    nfs4_stateid_t sid;
    uint32_t status = nfs4_arg_file_stateid(cx, &sid);
    if (status) return status;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_stid_t *s;
    nfs4_owner_t *o;
    bool replayed;
    status = open_stid_seq(cx, &sid, seqid, &s, &o, &replayed);
    if (status == NFS4ERR_BAD_STATEID && cx->minor == 0 && !o) {
        /* A retransmitted CLOSE: its open is gone, its owner keeps the reply. */
        nfs4_owner_t *co = nfs4_closed_owner(st, &sid);
        bool again = false;
        uint32_t rc = co ? nfs4_seq_check(cx, co, seqid, &again) : NFS4_OK;
        if (again) {
            nfs4_unlock(st);
            return rc;
        }
    }
    if (!replayed && o && status == NFS4_OK) {
        status = nfs4_stateid_seqid_check(cx->minor, sid.seqid, s->seqid);
        nfs4_client_t *c = s->client;
        /* Locks made through this open go with it, as closing a file drops
         * a process's POSIX locks (libnfs closes without unlocking). */
        if (status == NFS4_OK) {
            for (nfs4_stid_t *l = c->stids, *next; l; l = next) {
                next = l->cnext;
                if (l->type == NFS4_STID_LOCK && l->open == s) nfs4_stid_free(st, l);
            }
            nfs4_stateid_t out;
            nfs4_stid_to_wire(st, s, &out);
            out.seqid++;
            if (cx->minor >= 1) {
                out.seqid = UINT32_MAX;
                memset(out.other, 0, sizeof out.other);
            }
            c->renewed = nfs4_now();
            o->closed_key = s->key;
            nfs4_stid_free(st, s);
            nfs4_put_stateid(cx->r, &out);
        }
        nfs4_seq_finish(cx, o, seqid, status);
    }
    nfs4_unlock(st);
    return status;
}

/* ---------------------------------------------------------------- locks */

static void put_denied(nfs4_cx_t *cx, const nfs4_range_t *r)
{
    nfs_xdr_put_u64(cx->r, r->first);
    nfs_xdr_put_u64(cx->r, r->last == UINT64_MAX ? UINT64_MAX : r->last - r->first + 1);
    nfs_xdr_put_u32(cx->r, r->type == WRITE_LT ? WRITE_LT : READ_LT);
    if (r->nlm) {
        /* An NFSv3 (NLM) lock: no v4 client owns it; name its host and process. */
        char name[96];
        nlm_owner_name(r->owner, name, sizeof name);
        nfs_xdr_put_u64(cx->r, 0);
        nfs_xdr_put_opaque(cx->r, name, (uint32_t)strlen(name));
    } else {
        const nfs4_owner_t *o = r->owner;
        nfs_xdr_put_u64(cx->r, o->client->clientid);
        nfs_xdr_put_opaque(cx->r, o->id, o->id_len);
    }
    cx->keep_body = true;
}

uint32_t nfs4_op_lock(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    uint32_t type = nfs_xdr_get_u32(a);
    bool reclaim = nfs_xdr_get_u32(a) != 0;
    uint64_t offset = nfs_xdr_get_u64(a), length = nfs_xdr_get_u64(a);
    bool new_owner = nfs_xdr_get_u32(a) != 0;
    uint32_t open_seqid = 0, lock_seqid = 0, lolen = 0;
    uint64_t clientid = 0;
    const uint8_t *loid = NULL;
    nfs4_stateid_t sid;
    if (new_owner) {
        open_seqid = nfs_xdr_get_u32(a);
        nfs4_get_stateid(a, &sid);
        lock_seqid = nfs_xdr_get_u32(a);
        clientid = nfs_xdr_get_u64(a);
        loid = nfs_xdr_get_opaque(a, &lolen, NFS4_OPAQUE_LIMIT);
    } else {
        nfs4_get_stateid(a, &sid);
        lock_seqid = nfs_xdr_get_u32(a);
    }
    if (a->err) return NFS4ERR_BADXDR;
    uint64_t first, last;
    uint32_t status = nfs4_resolve_stateid(cx, &sid);
    if (status == NFS4_OK) status = nfs4_need_real_file(cx);
    if (status == NFS4_OK && (type < READ_LT || type > WRITEW_LT)) status = NFS4ERR_INVAL;
    if (status == NFS4_OK) status = nfs4_range_from_wire(offset, length, &first, &last);
    if (status) return status;

    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_stid_t *s, *open = NULL, *lock = NULL;
    status = stid_find_any(cx, &sid, &s);
    nfs4_owner_t *seq_owner = NULL, *lo = NULL;
    uint32_t seqid = new_owner ? open_seqid : lock_seqid;
    if (status == NFS4_OK) {
        if (!stid_on_cur(cx, s)) status = NFS4ERR_BAD_STATEID;
        else if (new_owner && s->type != NFS4_STID_OPEN) status = NFS4ERR_BAD_STATEID;
        else if (!new_owner && s->type != NFS4_STID_LOCK) status = NFS4ERR_BAD_STATEID;
    }
    if (status == NFS4_OK) {
        seq_owner = s->owner;
        bool replayed = false;
        status = nfs4_seq_check(cx, seq_owner, seqid, &replayed);
        if (replayed) {
            nfs4_unlock(st);
            return status;
        }
        if (status) seq_owner = NULL;   /* BAD_SEQID consumes nothing */
    }
    if (status == NFS4_OK) status = nfs4_stateid_seqid_check(cx->minor, sid.seqid, s->seqid);
    nfs4_client_t *c = status ? NULL : s->client;
    /* 4.0: a new lock-owner belongs to the client of the open it comes from. */
    if (status == NFS4_OK && new_owner && cx->minor == 0 && clientid != c->clientid) {
        uint32_t cst;
        status = nfs4_client_by_id(st, clientid, &cst) ? NFS4ERR_BAD_STATEID
                                                      : NFS4ERR_STALE_CLIENTID;
        c = NULL;
    }
    if (status == NFS4_OK) {
        c->renewed = nfs4_now();
        bool grace = nfs4_in_grace(st);
        if (reclaim && (!grace || !c->may_reclaim || (cx->minor >= 1 && c->reclaim_complete)))
            status = NFS4ERR_NO_GRACE;
        else if (!reclaim && (grace || nfs4_awaiting_reclaim_complete(cx, c)))
            status = NFS4ERR_GRACE;
    }
    if (status == NFS4_OK) {
        if (new_owner) {
            open = s;
            lo = nfs4_owner_find(c, true, loid, lolen);
            if (!lo && !(lo = nfs4_owner_new(c, true, loid, lolen))) status = NFS4ERR_RESOURCE;
            for (nfs4_stid_t *l = c->stids; lo && l; l = l->cnext)
                if (l->type == NFS4_STID_LOCK && l->owner == lo && l->file == s->file) lock = l;
        } else {
            lock = s;
            lo = s->owner;
            open = s->open;
        }
    }
    if (status == NFS4_OK && open) {
        bool write = type == WRITE_LT || type == WRITEW_LT;
        if (write && !(open->access & OPEN4_SHARE_ACCESS_WRITE)) status = NFS4ERR_OPENMODE;
        if (!write && !(open->access & OPEN4_SHARE_ACCESS_READ)) status = NFS4ERR_OPENMODE;
    }
    if (status == NFS4_OK) {
        nfs4_file_t *f = s->file;   /* ours keeps it while others' state is revoked */
        long k = nfs4_lock_conflict(st, f, lo, first, last, type);
        if (k >= 0) {
            status = NFS4ERR_DENIED;
            log_debug("nfs4", "LOCK [%" PRIu64 ",%" PRIu64 "] type %u denied by [%" PRIu64
                      ",%" PRIu64 "]", first, last, type, f->locks.v[k].first, f->locks.v[k].last);
            put_denied(cx, &f->locks.v[k]);
        } else if (!lock && !(lock = nfs4_stid_new(st, NFS4_STID_LOCK, c, lo, f))) {
            status = NFS4ERR_RESOURCE;
        } else if (nfs4_range_set(&f->locks, lo, first, last, type) < 0) {
            status = NFS4ERR_RESOURCE;
        } else {
            if (!lock->open) lock->open = open;
            if (lock->seqid != 1 || !new_owner || lock->open != open) lock->seqid++;
            cx->record_wait = nfs4_client_record(st, c);   /* on disk before the reply */
            nfs4_put_stid(cx, lock);
        }
    }
    if (new_owner && lo && cx->minor == 0 && nfs4_status_bumps_seqid(status)) {
        lo->seqid = lock_seqid;
        lo->have_seqid = true;
    }
    nfs4_seq_finish(cx, seq_owner, seqid, status);
    nfs4_unlock(st);
    return status;
}

uint32_t nfs4_op_lockt(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    uint32_t type = nfs_xdr_get_u32(a);
    uint64_t offset = nfs_xdr_get_u64(a), length = nfs_xdr_get_u64(a);
    uint64_t clientid = nfs_xdr_get_u64(a);
    uint32_t lolen;
    const uint8_t *loid = nfs_xdr_get_opaque(a, &lolen, NFS4_OPAQUE_LIMIT);
    if (a->err) return NFS4ERR_BADXDR;
    uint64_t first, last;
    uint32_t status = nfs4_need_real_file(cx);
    if (status == NFS4_OK && (type < READ_LT || type > WRITEW_LT)) status = NFS4ERR_INVAL;
    if (status == NFS4_OK) status = nfs4_range_from_wire(offset, length, &first, &last);
    if (status) return status;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c;
    status = nfs4_client_of(cx, clientid, &c);
    if (status == NFS4_OK && nfs4_in_grace(st)) status = NFS4ERR_GRACE;
    if (status == NFS4_OK) {
        nfs4_owner_t *lo = nfs4_owner_find(c, true, loid, lolen);
        nfs4_file_t *f = nfs4_file_find(st, cx->cur.node);
        long k = -1;
        if (f) {
            f->nstates++;   /* keep f while others' state is revoked */
            k = nfs4_lock_conflict(st, f, lo, first, last, type);
            f->nstates--;
        }
        if (k >= 0) {
            status = NFS4ERR_DENIED;
            put_denied(cx, &f->locks.v[k]);
        }
        if (f) nfs4_file_drop_unused(st, f);
    }
    nfs4_unlock(st);
    return status;
}

uint32_t nfs4_op_locku(nfs4_cx_t *cx)
{
    nfs_xdr_t *a = cx->a;
    uint32_t type = nfs_xdr_get_u32(a);
    uint32_t seqid = nfs_xdr_get_u32(a);
    nfs4_stateid_t sid;
    nfs4_get_stateid(a, &sid);
    uint64_t offset = nfs_xdr_get_u64(a), length = nfs_xdr_get_u64(a);
    if (a->err) return NFS4ERR_BADXDR;
    uint64_t first, last;
    uint32_t status = nfs4_resolve_stateid(cx, &sid);
    if (status == NFS4_OK) status = nfs4_need_real_file(cx);
    if (status == NFS4_OK && (type < READ_LT || type > WRITEW_LT)) status = NFS4ERR_INVAL;
    if (status == NFS4_OK) status = nfs4_range_from_wire(offset, length, &first, &last);
    if (status) return status;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_stid_t *s;
    status = stid_find_any(cx, &sid, &s);
    if (status == NFS4_OK && (s->type != NFS4_STID_LOCK || !stid_on_cur(cx, s)))
        status = NFS4ERR_BAD_STATEID;
    nfs4_owner_t *o = status ? NULL : s->owner;
    bool replayed = false;
    if (o) status = nfs4_seq_check(cx, o, seqid, &replayed);
    if (!replayed && o && status == NFS4_OK) {
        status = nfs4_stateid_seqid_check(cx->minor, sid.seqid, s->seqid);
        if (status == NFS4_OK && nfs4_range_clear(&s->file->locks, o, first, last) < 0)
            status = NFS4ERR_RESOURCE;
        if (status == NFS4_OK) {
            s->seqid++;
            s->client->renewed = nfs4_now();
            nfs4_put_stid(cx, s);
        }
        nfs4_seq_finish(cx, o, seqid, status);
    }
    nfs4_unlock(st);
    return status;
}

uint32_t nfs4_op_release_lockowner(nfs4_cx_t *cx)
{
    uint64_t clientid = nfs_xdr_get_u64(cx->a);
    uint32_t lolen;
    const uint8_t *loid = nfs_xdr_get_opaque(cx->a, &lolen, NFS4_OPAQUE_LIMIT);
    if (cx->a->err) return NFS4ERR_BADXDR;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c;
    uint32_t status = nfs4_client_of(cx, clientid, &c);
    nfs4_owner_t *lo = status ? NULL : nfs4_owner_find(c, true, loid, lolen);
    if (lo) {
        for (nfs4_stid_t *s = c->stids; s && status == NFS4_OK; s = s->cnext)
            if (s->owner == lo && nfs4_range_owner_holds(&s->file->locks, lo))
                status = NFS4ERR_LOCKS_HELD;
        if (status == NFS4_OK) nfs4_owner_release(st, lo);
    }
    nfs4_unlock(st);
    return status;
}

/* ---------------------------------------------------------------- I/O stateids */

typedef struct anon_req {
    bool write, bypass;
    nfs4_client_t *against;
} anon_req_t;

static uint32_t anon_cb(nfs4_stid_t *s, void *arg)
{
    anon_req_t *q = arg;
    if ((q->write && (s->deny & OPEN4_SHARE_DENY_WRITE)) ||
        (!q->write && !q->bypass && (s->deny & OPEN4_SHARE_DENY_READ))) {
        q->against = s->client;
        return NFS4ERR_LOCKED;
    }
    return NFS4_OK;
}

uint32_t nfs4_check_io_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid, bool write, bool *via_open)
{
    *via_open = false;
    uint32_t status = nfs4_resolve_stateid(cx, sid);
    if (status) return status;
    bool anon = nfs4_stateid_is_anon(sid), bypass = nfs4_stateid_is_bypass(sid);
    /* The READ bypass stateid in a WRITE or SETATTR counts as the anonymous
     * one (RFC 7530 9.1.4.3, RFC 8881 8.2.3). */
    if (bypass && write) {
        bypass = false;
        anon = true;
    }
    uint64_t requester = 0;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    if (anon || bypass) {
        anon_req_t q = { .write = write, .bypass = bypass };
        do {
            nfs4_file_t *f = nfs4_file_find(st, cx->cur.node);
            q.against = NULL;
            status = f ? nfs4_each_open(st, f, anon_cb, &q) : NFS4_OK;
        } while (status == NFS4ERR_LOCKED && nfs4_revoke_courtesy(st, q.against));
    } else {
        nfs4_stid_t *s;
        status = nfs4_stid_find(st, cx->minor, sid, &s);
        if (status == NFS4_OK && !nfs4_file_is(s->file, cx->cur.node))
            status = NFS4ERR_BAD_STATEID;
        if (status == NFS4_OK) {
            uint32_t access = s->type != NFS4_STID_LOCK ? s->access
                            : s->open ? s->open->access : OPEN4_SHARE_ACCESS_BOTH;
            if (write && !(access & OPEN4_SHARE_ACCESS_WRITE)) status = NFS4ERR_OPENMODE;
            s->client->renewed = nfs4_now();
            *via_open = status == NFS4_OK;
        }
        requester = status == NFS4_OK ? s->client->clientid : 0;
    }
    /* Another client's (or an anonymous) access waits for a delegation's return. */
    if (status == NFS4_OK &&
        nfs4_deleg_conflict_node_locked(st, cx->cur.node, requester, write))
        status = NFS4ERR_DELAY;
    nfs4_unlock(st);
    return status;
}
