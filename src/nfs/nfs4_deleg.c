/*
 * NFSv4 delegations (RFC 7530 §10.4, RFC 8881 §10.4): the grant policy, the
 * conflicts that recall them, revocation, and DELEGRETURN/BACKCHANNEL_CTL.
 *
 * A delegation is a stateid (NFS4_STID_DELEG) of its client on a file, with
 * `access` READ (read delegation) or BOTH (write delegation); it counts in the
 * file's state like an open, and in f->ndelegs and st->ndelegs while it is not
 * revoked (NFSv3 checks st->ndelegs without the lock, so a server with none
 * costs v3 I/O nothing).
 *
 * Policy (conservative, close to Linux's knfsd): OPEN grants one when the
 * client can be called back (nfs4_cb_path_up), the server is out of grace,
 * the client holds none on the file yet, no NLM lock is on it, and
 *  - for an open for read only: no other client has the file open for write
 *    (or holds a write delegation);
 *  - for an open with write access: no other client has the file open or
 *    holds a delegation on it.
 *
 * Conflicts (nfs4_deleg_conflict): another client's OPEN (for write against
 * any delegation, for read against a write delegation), its or an anonymous
 * READ/WRITE/SETATTR, REMOVE/RENAME/LINK/SETATTR through NFSv4, NFSv3 WRITE,
 * SETATTR, REMOVE, RENAME, LINK (and READ against write delegations), and NLM
 * locks.
 * The first one queues a CB_RECALL and every one answers "later" (DELAY,
 * JUKEBOX, DENIED_GRACE_PERIOD) until the client returns the delegation. A
 * delegation still held a lease after its recall, or whose client's lease ran
 * out, is revoked by the next conflicting request: it stops counting, and its
 * stateid answers DELEG_REVOKED (4.1, and SEQUENCE flags
 * SEQ4_STATUS_RECALLABLE_STATE_REVOKED until the client frees it) or EXPIRED
 * (4.0). Delegations are not written down: after a restart a client
 * reclaims those it held by naming their type in its CLAIM_PREVIOUS OPEN
 * (nfs4_deleg_reclaim, RFC 7530 10.2.1, RFC 8881 10.2.1), which gives it one
 * back when nothing else on the file conflicts, with `recall` set (and the
 * lease-long wait for its return started) when it cannot be called back yet.
 * No new delegations are granted in grace.
 *
 * Attributes under a write delegation (nfs4_deleg_getattr, RFC 8881 10.4.3,
 * RFC 7530 10.4.3): the holder may have written into its cache, so another
 * client's GETATTR, VERIFY or NVERIFY of size or change asks it with
 * CB_GETATTR and answers (or compares) with its size, and with our change
 * attribute moved one past the file's for each new change value the holder
 * reports (so it grows as the holder's does), the modify time being when that
 * value was first seen. READDIR answers from the file (one callback per entry
 * would stall a listing behind every holder). One GETATTR at a time
 * waits for a holder (cb_asking; the others are told DELAY), so a silent
 * holder ties up one worker, not one per caller. A holder that does not
 * answer has its delegation recalled, and the GETATTR is told DELAY.
 */
#include "nfs4_compound.h"

#include <cairn/assert.h>
#include <cairn/log.h>

#include <errno.h>

#define SUB "nfs4"

/* ---------------------------------------------------------------- conflicts */

static void deleg_revoke(nfs4_server_t *st, nfs4_stid_t *s, const char *why)
{
    log_info(SUB, "client %016llx: delegation on object %llu revoked (%s)",
             (unsigned long long)s->client->clientid, (unsigned long long)s->file->ino, why);
    s->revoked = true;
    s->file->ndelegs--;
    atomic_fetch_sub(&st->ndelegs, 1);
    s->client->nrevoked++;
}

void nfs4_deleg_forget(nfs4_server_t *st, nfs4_stid_t *s)
{
    if (s->revoked) {
        s->client->nrevoked--;
        return;
    }
    s->file->ndelegs--;
    atomic_fetch_sub(&st->ndelegs, 1);
}

static bool deleg_conflicts(const nfs4_stid_t *s, const nfs4_file_t *f, bool write)
{
    return s->type == NFS4_STID_DELEG && s->file == f && !s->revoked &&
           (write || (s->access & OPEN4_SHARE_ACCESS_WRITE));
}

bool nfs4_deleg_conflict(nfs4_server_t *st, nfs4_file_t *f, const nfs4_client_t *requester,
                         bool write)
{
    bool busy = false;
    time_t now = nfs4_now();
again:
    if (!f->ndelegs) return busy;
    for (nfs4_client_t *c = st->clients; c; c = c->next) {
        if (c == requester) continue;
        for (nfs4_stid_t *s = c->stids; s; s = s->cnext) {
            if (!deleg_conflicts(s, f, write)) continue;
            if (nfs4_revoke_courtesy(st, c)) goto again;   /* c and s are gone */
            if (!s->recalled) {
                s->recalled = now;
                nfs4_cb_recall(st, s);
                busy = true;
            } else if (now - s->recalled > (time_t)st->lease) {
                deleg_revoke(st, s, "not returned a lease after its recall");
            } else {
                busy = true;
            }
        }
    }
    return busy;
}

bool nfs4_deleg_conflict_node_locked(nfs4_server_t *st, zpl_node_t *node, uint64_t requester,
                                     bool write)
{
    CAIRN_ASSERT(cairn_mutex_held(&st->lock));
    if (!atomic_load(&st->ndelegs)) return false;
    nfs4_file_t *f = nfs4_file_find(st, node);
    if (!f || !f->ndelegs) return false;
    uint32_t status;
    const nfs4_client_t *c = requester ? nfs4_client_by_id(st, requester, &status) : NULL;
    f->nstates++;   /* revoking an expired client's state may drop the file's last */
    bool busy = nfs4_deleg_conflict(st, f, c, write);
    nfs4_file_put(st, f);
    return busy;
}

bool nfs4_deleg_conflict_node(nfs4_server_t *st, zpl_node_t *node, uint64_t requester,
                              bool write)
{
    if (!atomic_load(&st->ndelegs)) return false;
    pthread_mutex_lock(&st->lock);
    bool busy = nfs4_deleg_conflict_node_locked(st, node, requester, write);
    nfs4_unlock(st);
    return busy;
}

int nfs4_deleg_yield(nfs_server_t *srv, zpl_node_t *node, bool write)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    if (!st || !node) return 0;
    return nfs4_deleg_conflict_node(st, node, 0, write) ? -EAGAIN : 0;
}

int nfs4_deleg_yield_name(nfs_server_t *srv, zpl_node_t *dir, const char *name)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    if (!st || !dir || !atomic_load(&st->ndelegs)) return 0;
    zpl_node_t *n;
    if (zpl_lookup(dir, name, &n) < 0) return 0;
    int rc = nfs4_deleg_yield(srv, n, true);
    zpl_node_rele(n);
    return rc;
}

/* The client an NFSv4 request comes from: its session's, or (4.0) the one
 * whose stateid it carries; 0 when it cannot tell. */
static uint64_t requester_of(nfs4_cx_t *cx, const nfs4_stateid_t *sid)
{
    if (cx->minor >= 1 && cx->have_session) return cx->clientid;
    if (!sid || nfs4_stateid_is_anon(sid) || nfs4_stateid_is_bypass(sid)) return 0;
    uint32_t epoch = (uint32_t)sid->other[0] << 24 | (uint32_t)sid->other[1] << 16 |
                     (uint32_t)sid->other[2] << 8 | sid->other[3];
    uint32_t num = (uint32_t)sid->other[4] << 24 | (uint32_t)sid->other[5] << 16 |
                   (uint32_t)sid->other[6] << 8 | sid->other[7];
    return epoch == cx->st->epoch ? (uint64_t)epoch << 32 | num : 0;
}

uint32_t nfs4_deleg_check(nfs4_cx_t *cx, zpl_node_t *node, const nfs4_stateid_t *sid)
{
    return nfs4_deleg_conflict_node(cx->st, node, requester_of(cx, sid), true) ? NFS4ERR_DELAY
                                                                                : NFS4_OK;
}

uint32_t nfs4_deleg_check_name(nfs4_cx_t *cx, zpl_node_t *dir, const char *name)
{
    if (!atomic_load(&cx->st->ndelegs)) return NFS4_OK;
    zpl_node_t *n;
    if (zpl_lookup(dir, name, &n) < 0) return NFS4_OK;
    uint32_t status = nfs4_deleg_check(cx, n, NULL);
    zpl_node_rele(n);
    return status;
}

/* ---------------------------------------------------------------- CB_GETATTR */

/* A write delegation on f of a client other than requester (0: unknown). A
 * holder whose lease ran out loses its state instead of being asked. The
 * caller holds a state count on f. */
static nfs4_stid_t *write_deleg_of_other(nfs4_server_t *st, nfs4_file_t *f, uint64_t requester)
{
again:
    for (nfs4_client_t *c = st->clients; c; c = c->next) {
        if (requester && c->clientid == requester) continue;
        for (nfs4_stid_t *s = c->stids; s; s = s->cnext) {
            if (s->type != NFS4_STID_DELEG || s->file != f || s->revoked ||
                !(s->access & OPEN4_SHARE_ACCESS_WRITE))
                continue;
            if (nfs4_revoke_courtesy(st, c)) goto again;   /* c and s are gone */
            return s;
        }
    }
    return NULL;
}

/* The holder's answer h laid over the file's attributes a (lock held). */
static void apply_holder_attrs(nfs4_stid_t *d, const nfs4_cb_attrs_t *h, zpl_attr_t *a)
{
    if (h->change == a->change && !d->cb_bumps) return;   /* nothing written in its cache */
    if (!d->cb_bumps || h->change != d->cb_change) {
        d->cb_change = h->change;
        d->cb_bumps++;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        d->cb_mtime_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    }
    a->change += d->cb_bumps;
    a->size = h->size;
    a->mtime_ns = a->ctime_ns = d->cb_mtime_ns;
}

/* Finds the delegation sid names again after the lock was dropped (NULL: it
 * was returned or revoked meanwhile). */
static nfs4_stid_t *deleg_again(nfs4_server_t *st, const nfs4_stateid_t *sid)
{
    nfs4_stateid_t any = *sid;
    any.seqid = 0;
    nfs4_stid_t *d = NULL;
    if (nfs4_stid_find(st, 1, &any, &d) != NFS4_OK || d->type != NFS4_STID_DELEG) return NULL;
    return d;
}

/* What a GETATTR needs to ask a write delegation's holder. */
typedef struct holder_query {
    nfs4_stateid_t sid;               /* the delegation */
    uint64_t holder;                  /* its client */
    zpl_fh_t fh;
} holder_query_t;

/* Under the lock: whether cx's GETATTR must ask a holder (NFS4_OK with *asking
 * set and *q filled, the delegation marked cb_asking), may answer from the
 * file (NFS4_OK), or must wait (DELAY; on the I/O thread, would_block). */
static uint32_t holder_to_ask(nfs4_cx_t *cx, holder_query_t *q, bool *asking)
{
    nfs4_server_t *st = cx->st;
    uint64_t requester = cx->minor >= 1 ? requester_of(cx, NULL) : cx->client40;
    nfs4_file_t *f = nfs4_file_find(st, cx->cur.node);
    nfs4_stid_t *d = NULL;
    int fh_rc = 0;
    *asking = false;
    if (f && f->ndelegs) {
        f->nstates++;   /* revoking an expired holder may drop the file's last state */
        d = write_deleg_of_other(st, f, requester);
        if (d) fh_rc = zpl_fh_encode(f->node, &q->fh);
        nfs4_file_put(st, f);   /* d, if any, keeps f */
    }
    if (!d) return NFS4_OK;
    if (d->recalled || fh_rc < 0) return NFS4ERR_DELAY;   /* it is being returned */
    if (d->cb_asking) return NFS4ERR_DELAY;   /* one request at a time waits for it */
    if (cx->call->memory_only) {
        cx->call->would_block = true;   /* waiting for the holder is a worker's job */
        return NFS4ERR_DELAY;
    }
    nfs4_stid_to_wire(st, d, &q->sid);
    q->holder = d->client->clientid;
    d->cb_asking = true;
    *asking = true;
    return NFS4_OK;
}

/* Under the lock, after CB_GETATTR said status (h: its answer): the holder's
 * values in *a, or DELAY (the delegation is gone, or is recalled now that its
 * holder did not answer). */
static uint32_t holder_answered(nfs4_server_t *st, const holder_query_t *q, uint32_t status,
                                const nfs4_cb_attrs_t *h, zpl_attr_t *a)
{
    nfs4_stid_t *d = deleg_again(st, &q->sid);
    if (!d) return NFS4ERR_DELAY;   /* returned meanwhile: the file's attributes changed */
    d->cb_asking = false;
    if (status == NFS4_OK) {
        apply_holder_attrs(d, h, a);
        return NFS4_OK;
    }
    nfs4_file_t *f = d->file;
    log_info(SUB, "client %016llx: CB_GETATTR not answered (%u); recalling its delegation "
             "on object %llu", (unsigned long long)q->holder, status,
             (unsigned long long)f->ino);
    f->nstates++;   /* nfs4_deleg_conflict's contract */
    nfs4_deleg_conflict(st, f, NULL, true);
    nfs4_file_put(st, f);
    return NFS4ERR_DELAY;
}

uint32_t nfs4_deleg_getattr(nfs4_cx_t *cx, const nfs4_bitmap_t *req, zpl_attr_t *a)
{
    nfs4_server_t *st = cx->st;
    if (!nfs4_bm_isset(req, FATTR4_CHANGE) && !nfs4_bm_isset(req, FATTR4_SIZE)) return NFS4_OK;
    if (cx->cur.kind != NFS4_FH_REAL || !atomic_load(&st->ndelegs)) return NFS4_OK;
    holder_query_t q;
    bool asking;
    pthread_mutex_lock(&st->lock);
    uint32_t status = holder_to_ask(cx, &q, &asking);
    nfs4_unlock(st);
    if (status || !asking) return status;

    nfs4_cb_attrs_t h;
    status = nfs4_cb_getattr(st, q.holder, q.fh.bytes, &h);
    pthread_mutex_lock(&st->lock);
    status = holder_answered(st, &q, status, &h, a);
    nfs4_unlock(st);
    return status;
}

/* ---------------------------------------------------------------- grant */

static bool nlm_locked(const nfs4_file_t *f)
{
    for (size_t i = 0; i < f->locks.n; i++)
        if (f->locks.v[i].nlm) return true;
    return false;
}

/* Whether the file's other state lets client c have a delegation for an open
 * with write access (write) or for reading only. */
static bool grant_allowed(nfs4_server_t *st, nfs4_client_t *c, nfs4_file_t *f, bool write)
{
    for (nfs4_client_t *o = st->clients; o; o = o->next)
        for (nfs4_stid_t *s = o->stids; s; s = s->cnext) {
            if (s->file != f) continue;
            if (s->type == NFS4_STID_DELEG && !s->revoked) {
                if (o == c || write || (s->access & OPEN4_SHARE_ACCESS_WRITE)) return false;
            } else if (s->type == NFS4_STID_OPEN && o != c) {
                if (write || (s->access & OPEN4_SHARE_ACCESS_WRITE)) return false;
            }
        }
    return true;
}

/* A delegation of client c on f, read or write, if f's state allows it. */
static nfs4_stid_t *deleg_new(nfs4_server_t *st, nfs4_client_t *c, nfs4_file_t *f, bool write)
{
    if (!st->delegations || nlm_locked(f) || !grant_allowed(st, c, f, write)) return NULL;
    nfs4_stid_t *d = nfs4_stid_new(st, NFS4_STID_DELEG, c, NULL, f);
    if (!d) return NULL;
    d->access = write ? OPEN4_SHARE_ACCESS_BOTH : OPEN4_SHARE_ACCESS_READ;
    f->ndelegs++;
    atomic_fetch_add(&st->ndelegs, 1);
    return d;
}

nfs4_stid_t *nfs4_deleg_grant(nfs4_server_t *st, nfs4_client_t *c, nfs4_stid_t *open,
                              bool want_none)
{
    if (want_none || nfs4_in_grace(st) || !nfs4_cb_path_up(c)) return NULL;
    return deleg_new(st, c, open->file, open->access & OPEN4_SHARE_ACCESS_WRITE);
}

nfs4_stid_t *nfs4_deleg_reclaim(nfs4_server_t *st, nfs4_client_t *c, nfs4_stid_t *open,
                                bool write, bool *recall)
{
    *recall = false;
    if (write && !(open->access & OPEN4_SHARE_ACCESS_WRITE)) return NULL;
    nfs4_stid_t *d = deleg_new(st, c, open->file, write);
    if (d && !nfs4_cb_path_up(c)) {
        /* Nobody could recall it: the client is to give it back by itself,
         * and a conflict a lease from now revokes it if it does not. */
        *recall = true;
        d->recalled = nfs4_now();
    }
    return d;
}

/* ---------------------------------------------------------------- operations */

uint32_t nfs4_op_delegreturn(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    uint32_t status = nfs4_arg_file_stateid(cx, &sid);
    if (status) return status;
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_stid_t *s;
    status = nfs4_stid_find(st, cx->minor, &sid, &s);
    if (s && (s->type != NFS4_STID_DELEG || !nfs4_file_is(s->file, cx->cur.node)))
        status = NFS4ERR_BAD_STATEID;
    else if (s && status == NFS4_OK) {
        s->client->renewed = nfs4_now();
        nfs4_stid_free(st, s);
    } else if (s && cx->minor == 0) {
        nfs4_stid_free(st, s);   /* revoked: 4.0 has no FREE_STATEID */
    }
    nfs4_unlock(st);
    return status;
}

uint32_t nfs4_op_delegpurge(nfs4_cx_t *cx)
{
    (void)nfs_xdr_get_u64(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    /* Delegations are not kept across restarts, so CLAIM_DELEGATE_PREV is not
     * served and there is nothing to purge (RFC 7530 16.5.4). */
    return NFS4ERR_NOTSUPP;
}

uint32_t nfs4_op_backchannel_ctl(nfs4_cx_t *cx)
{
    uint32_t prog = nfs_xdr_get_u32(cx->a);
    nfs4_cb_sec_t sec;
    uint32_t status = nfs4_cb_sec_decode(cx->a, &sec);
    if (status) return status;
    pthread_mutex_lock(&cx->st->lock);
    nfs4_session_t *s = cx->have_session ? nfs4_session_find(cx->st, cx->sessionid) : NULL;
    if (s) {
        s->cb_prog = prog;
        s->cb_sec = sec;
    }
    nfs4_unlock(cx->st);
    return s ? NFS4_OK : NFS4ERR_BADSESSION;
}
