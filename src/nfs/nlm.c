/*
 * NLM (RFC 1813 appendix, X/Open XNFS): byte-range locks for NFSv3 clients,
 * program 100021 versions 1 and 3 (32-bit offsets) and 4 (64-bit), on the
 * NFS port over TCP and UDP (rpc_udp.c).
 *
 * One lock table: an NLM lock is a range in the NFSv4 file's list
 * (nfs4_file_t.locks, under nfs4_server_t.lock), tagged as NLM, so an NFSv3
 * lock and an NFSv4 lock on one file conflict exactly as two v4 locks would,
 * and the split/merge rules are the v4 ones (POSIX fcntl's). An NLM owner is
 * (caller_name, svid, oh): one process on one host. While an owner has a
 * lock, a blocked request or a share on a file it holds the file (a
 * reference counted in nstates), so the file and its list outlive any v4
 * state on it.
 *
 * Blocking locks: a LOCK with block=true that conflicts is queued and
 * answered BLOCKED. A thread of ours retries the queue when an NLM lock is
 * released and once a second (an NFSv4 unlock, close or lease expiry frees
 * ranges without telling us); a request that can be granted now takes its
 * range and the client is told with an NLM_GRANTED call to its lock manager,
 * found through the portmapper on the client's host (nfs_server_config_t's
 * nlm_client_portmap: 111 normally, another port for tests). A client that
 * misses the callback re-sends its LOCK and finds the lock already its own.
 * A client answering the callback DENIED (it gave up waiting) has the lock
 * released again.
 *
 * The asynchronous forms (TEST_MSG ... UNLOCK_MSG) run the same procedures
 * and send the result as a *_RES call to the client's lock manager; the
 * *_RES calls a client sends us are accepted and dropped.
 *
 * Grace: after a restart with hosts monitored by the previous run (nsm.c),
 * the server is in grace (the NFSv4 grace period, extended to cover NLM:
 * nfs4_server_t.nlm_grace_end); then only reclaims (LOCK/SHARE with
 * reclaim=true) are granted, and new locks, TESTs and CANCELs are answered
 * DENIED_GRACE_PERIOD, as Linux's lockd does.
 */
#include "nfs_srv.h"
#include "nlm_impl.h"

#include <cairn/log.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SUB "nlm"

struct nlm_owner {
    nlm_owner_t *next;
    char *caller;
    uint32_t svid;
    uint8_t *oh;
    uint32_t ohlen;
};

typedef struct nlm_hold {            /* an owner keeps a file */
    struct nlm_hold *next;
    nlm_owner_t *o;
    nfs4_file_t *f;
} nlm_hold_t;

typedef struct nlm_block {           /* a blocked LOCK waiting for its range */
    struct nlm_block *next;
    nlm_owner_t *o;
    nfs4_file_t *f;
    uint64_t first, last;
    bool excl;
    uint32_t vers;
    uint64_t woff, wlen;             /* as the client sent them */
    uint8_t *cookie, *fh;
    uint32_t cookie_len, fh_len;
    struct sockaddr_storage peer;
} nlm_block_t;

typedef struct nlm_share {           /* a DOS share reservation (SHARE) */
    struct nlm_share *next;
    nlm_owner_t *o;
    nfs4_file_t *f;
    uint32_t mode, access;
} nlm_share_t;

typedef struct cb_job {              /* a call to send to a client */
    struct cb_job *next;
    struct sockaddr_storage peer;
    uint32_t prog, vers, proc;
    uint8_t *args;
    size_t alen;
    /* NLM_GRANTED: what to release when the client answers DENIED */
    bool grant;
    char *caller;
    uint32_t svid;
    uint8_t *oh;
    uint32_t ohlen;
    uint64_t fsid, ino, gen, first, last;
    /* SM_NOTIFY (args built when sent): the entry it is for */
    bool notify;
    char server[NSM_ADDR_MAX], pool[NSM_POOL_MAX];
    time_t not_before, deadline;     /* nfs4_now(): waiting for the address or pool */
} cb_job_t;

struct nlm_state {
    nfs_server_t *srv;
    nfs4_server_t *st;
    nsm_state_t *nsm;
    nlm_owner_t *owners;
    nlm_hold_t *holds;
    nlm_block_t *blocks;
    nlm_share_t *shares;
    cb_job_t *jobs, *jobs_tail;
    pthread_cond_t cv;               /* with st->lock: work for the thread */
    pthread_t thread;
    bool thread_started, retry, prune_pending;
    atomic_bool stop;                /* read by the thread between callback attempts */
    char hostname[256];
};

/* ------------------------------------------------------------ pure rules */

void nlm_range_from_wire(uint64_t offset, uint64_t length, uint64_t *first, uint64_t *last)
{
    *first = offset;
    if (length == 0 || length - 1 > UINT64_MAX - offset) *last = UINT64_MAX;
    else *last = offset + (length - 1);
}

void nlm_range_to_wire(uint32_t vers, uint64_t first, uint64_t last, uint64_t *offset,
                       uint64_t *length)
{
    *offset = first;
    *length = last == UINT64_MAX ? 0 : last - first + 1;
    if (vers < 4) {
        if (*offset > UINT32_MAX) *offset = UINT32_MAX;
        if (*length > UINT32_MAX || *offset + *length > (uint64_t)UINT32_MAX + 1) *length = 0;
    }
}

uint32_t nlm_stat_for(uint32_t vers, uint32_t stat)
{
    if (vers >= 4 || stat <= NLM_DENIED_GRACE_PERIOD) return stat;
    return stat == NLM_DEADLCK ? NLM_DENIED : NLM_DENIED_NOLOCKS;
}

nlm_owner_t *nlm_owner_alloc(const char *caller, uint32_t svid, const uint8_t *oh,
                             uint32_t ohlen)
{
    nlm_owner_t *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->caller = strdup(caller);
    o->oh = malloc(ohlen ? ohlen : 1);
    if (!o->caller || !o->oh) {
        nlm_owner_free_one(o);
        return NULL;
    }
    if (ohlen) memcpy(o->oh, oh, ohlen);
    o->ohlen = ohlen;
    o->svid = svid;
    return o;
}

void nlm_owner_free_one(nlm_owner_t *o)
{
    if (!o) return;
    free(o->caller);
    free(o->oh);
    free(o);
}

void nlm_owner_name(const void *owner, char *buf, size_t len)
{
    const nlm_owner_t *o = owner;
    snprintf(buf, len, "nlm:%.64s:%" PRIu32, o->caller, o->svid);
}

/* ------------------------------------------------------------ owners, holds */

static nlm_owner_t *owner_find(nlm_state_t *ns, const char *caller, uint32_t svid,
                               const uint8_t *oh, uint32_t ohlen)
{
    for (nlm_owner_t *o = ns->owners; o; o = o->next)
        if (o->svid == svid && o->ohlen == ohlen && !strcmp(o->caller, caller) &&
            (!ohlen || !memcmp(o->oh, oh, ohlen)))
            return o;
    return NULL;
}

static nlm_owner_t *owner_get(nlm_state_t *ns, const char *caller, uint32_t svid,
                              const uint8_t *oh, uint32_t ohlen)
{
    nlm_owner_t *o = owner_find(ns, caller, svid, oh, ohlen);
    if (o) return o;
    if (!(o = nlm_owner_alloc(caller, svid, oh, ohlen))) return NULL;
    o->next = ns->owners;
    ns->owners = o;
    return o;
}

static nlm_hold_t *hold_find(nlm_state_t *ns, nlm_owner_t *o, nfs4_file_t *f)
{
    for (nlm_hold_t *h = ns->holds; h; h = h->next)
        if (h->o == o && h->f == f) return h;
    return NULL;
}

static bool hold_get(nlm_state_t *ns, nlm_owner_t *o, nfs4_file_t *f)
{
    if (hold_find(ns, o, f)) return true;
    nlm_hold_t *h = calloc(1, sizeof *h);
    if (!h) return false;
    h->o = o;
    h->f = f;
    f->nstates++;
    h->next = ns->holds;
    ns->holds = h;
    return true;
}

static bool host_busy(nlm_state_t *ns, const char *caller)
{
    for (nlm_owner_t *o = ns->owners; o; o = o->next)
        if (!strcmp(o->caller, caller)) return true;
    return false;
}

/* Lets go of what o no longer needs on f: the hold when it has no range, no
 * blocked request and no share there, the owner when it holds no file, the
 * host's monitor when none of its owners is left. */
static void tidy(nlm_state_t *ns, nlm_owner_t *o, nfs4_file_t *f)
{
    if (f) {
        bool used = nfs4_range_owner_holds(&f->locks, o);
        for (nlm_block_t *b = ns->blocks; b && !used; b = b->next) used = b->o == o && b->f == f;
        for (nlm_share_t *s = ns->shares; s && !used; s = s->next) used = s->o == o && s->f == f;
        if (!used) {
            for (nlm_hold_t **pp = &ns->holds; *pp; pp = &(*pp)->next) {
                if ((*pp)->o != o || (*pp)->f != f) continue;
                nlm_hold_t *h = *pp;
                *pp = h->next;
                free(h);
                nfs4_file_put(ns->st, f);
                break;
            }
        }
    }
    for (nlm_hold_t *h = ns->holds; h; h = h->next)
        if (h->o == o) return;
    for (nlm_owner_t **pp = &ns->owners; *pp; pp = &(*pp)->next) {
        if (*pp != o) continue;
        *pp = o->next;
        break;
    }
    if (!host_busy(ns, o->caller)) nsm_host_idle(ns->nsm, o->caller);
    nlm_owner_free_one(o);
}

static void block_free(nlm_block_t *b)
{
    free(b->cookie);
    free(b->fh);
    free(b);
}

static void cb_free(cb_job_t *j)
{
    free(j->args);
    free(j->caller);
    free(j->oh);
    free(j);
}

/* With st->lock: queues a call to a client for the thread. */
static void cb_queue(nlm_state_t *ns, cb_job_t *j)
{
    j->next = NULL;
    if (ns->jobs_tail) ns->jobs_tail->next = j;
    else ns->jobs = j;
    ns->jobs_tail = j;
    pthread_cond_signal(&ns->cv);
}

/* ------------------------------------------------------------ decoding */

typedef struct nlm_lock_arg {
    char caller[NLM_MAXSTR + 1];
    const uint8_t *fh, *oh;
    uint32_t fh_len, oh_len;
    uint32_t svid;
    uint64_t off, len;
} nlm_lock_arg_t;

static void get_string(nfs_xdr_t *a, char *out, uint32_t max)
{
    uint32_t n;
    const uint8_t *p = nfs_xdr_get_opaque(a, &n, max);
    out[0] = '\0';
    if (!p) return;
    memcpy(out, p, n);
    out[n] = '\0';
    if (strlen(out) != n) a->err = true;   /* an embedded NUL: not a name */
}

static void get_lock(nfs_xdr_t *a, uint32_t vers, nlm_lock_arg_t *l)
{
    get_string(a, l->caller, NLM_MAXSTR);
    l->fh = nfs_xdr_get_opaque(a, &l->fh_len, NLM_MAXOBJ);
    l->oh = nfs_xdr_get_opaque(a, &l->oh_len, NLM_MAXOBJ);
    l->svid = nfs_xdr_get_u32(a);
    if (vers >= 4) {
        l->off = nfs_xdr_get_u64(a);
        l->len = nfs_xdr_get_u64(a);
    } else {
        l->off = nfs_xdr_get_u32(a);
        l->len = nfs_xdr_get_u32(a);
    }
}

static void put_lock(nfs_xdr_t *r, uint32_t vers, const char *caller, const uint8_t *fh,
                     uint32_t fh_len, const uint8_t *oh, uint32_t oh_len, uint32_t svid,
                     uint64_t off, uint64_t len)
{
    nfs_xdr_put_string(r, caller);
    nfs_xdr_put_opaque(r, fh, fh_len);
    nfs_xdr_put_opaque(r, oh, oh_len);
    nfs_xdr_put_u32(r, svid);
    if (vers >= 4) {
        nfs_xdr_put_u64(r, off);
        nfs_xdr_put_u64(r, len);
    } else {
        nfs_xdr_put_u32(r, (uint32_t)off);
        nfs_xdr_put_u32(r, (uint32_t)len);
    }
}

/* The file a handle names: 0 and the export (held) and node (held), or a status.
 * With check, the caller must be allowed to read it or own it (what Linux's
 * lockd asks of a lock, so a client cannot lock files it may not even read). */
static uint32_t resolve(nfs_call_t *call, const uint8_t *fh, uint32_t len, nfs_export_t **exp,
                        zpl_node_t **node, bool check)
{
    *exp = NULL;
    *node = NULL;
    int rc = nfs_export_lookup_fh(call->srv, fh, len, exp);
    if (rc == -EAGAIN) return NLM_DENIED_NOLOCKS;  /* suspended for a moment: retry */
    if (rc) return NLM_STALE_FH;
    zpl_cred_t eff;
    bool writable;
    if (nfs_export_authorize(*exp, call, &eff, &writable) < 0) {
        nfs_export_rele(*exp);
        *exp = NULL;
        return NLM_FAILED;
    }
    rc = zpl_fh_to_inode(nfs_export_fs(*exp), fh, len, node);
    if (rc) {
        nfs_export_rele(*exp);
        *exp = NULL;
        return NLM_STALE_FH;
    }
    zpl_attr_t at;
    uint32_t granted = 0;
    if (check && (zpl_getattr(*node, &at) < 0 ||
                  (at.uid != eff.uid &&
                   (zpl_access(*node, &eff, ZPL_ACCESS_READ, &granted) < 0 ||
                    !(granted & ZPL_ACCESS_READ))))) {
        zpl_node_rele(*node);
        *node = NULL;
        nfs_export_rele(*exp);
        *exp = NULL;
        return NLM_FAILED;
    }
    return NLM_GRANTED;
}

static void release_file(nfs_export_t *exp, zpl_node_t *node)
{
    if (node) zpl_node_rele(node);
    if (exp) nfs_export_rele(exp);
}

static nfs4_file_t *file_of(nlm_state_t *ns, nfs_export_t *exp, zpl_node_t *node, bool create)
{
    if (!create) return nfs4_file_find(ns->st, node);
    return nfs4_file_get(ns->st, exp, node);
}

static nlm_state_t *state_of(nfs_call_t *call) { return call->srv->nlm_state; }

/* The caller's host holds state on exp's file: monitored, with the address of
 * ours it reached (what its statd knows us by) and the file's pool. */
static void host_active(nlm_state_t *ns, nfs_call_t *call, const char *caller,
                        nfs_export_t *exp)
{
    struct sockaddr_storage local;
    socklen_t ll = sizeof local;
    bool have_local = nfs_conn_local(call->conn, &local, &ll) == 0;
    char pool[NSM_POOL_MAX];
    const char *ds = nfs_export_dataset(exp);
    snprintf(pool, sizeof pool, "%.*s", (int)strcspn(ds, "/@"), ds);
    nsm_host_active(ns->nsm, caller, (struct sockaddr *)&call->peer,
                    have_local ? (struct sockaddr *)&local : NULL, pool);
}

/* ------------------------------------------------------------ procedures */

/* A holder of a conflicting range, as TEST reports it. */
static void put_holder(nfs_xdr_t *r, uint32_t vers, const nfs4_range_t *h)
{
    nfs_xdr_put_u32(r, h->type == WRITE_LT);
    uint64_t off, len;
    nlm_range_to_wire(vers, h->first, h->last, &off, &len);
    if (h->nlm) {
        const nlm_owner_t *o = h->owner;
        nfs_xdr_put_u32(r, o->svid);
        nfs_xdr_put_opaque(r, o->oh, o->ohlen);
    } else {
        const nfs4_owner_t *o = h->owner;
        nfs_xdr_put_u32(r, 0);
        nfs_xdr_put_opaque(r, o->id, o->id_len > NLM_MAXOBJ ? NLM_MAXOBJ : o->id_len);
    }
    if (vers >= 4) {
        nfs_xdr_put_u64(r, off);
        nfs_xdr_put_u64(r, len);
    } else {
        nfs_xdr_put_u32(r, (uint32_t)off);
        nfs_xdr_put_u32(r, (uint32_t)len);
    }
}

static nfs_accept_t proc_test(nfs_call_t *call, nfs_xdr_t *r)
{
    nfs_xdr_t *a = &call->args;
    uint32_t clen;
    const uint8_t *cookie = nfs_xdr_get_opaque(a, &clen, NLM_MAXOBJ);
    bool excl = nfs_xdr_get_u32(a) != 0;
    nlm_lock_arg_t l;
    get_lock(a, call->vers, &l);
    if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
    nfs_xdr_put_opaque(r, cookie, clen);
    nlm_state_t *ns = state_of(call);
    nfs_export_t *exp;
    zpl_node_t *node;
    uint32_t stat = resolve(call, l.fh, l.fh_len, &exp, &node, true);
    if (stat == NLM_GRANTED) {
        uint64_t first, last;
        nlm_range_from_wire(l.off, l.len, &first, &last);
        pthread_mutex_lock(&ns->st->lock);
        if (nfs4_in_grace(ns->st)) {
            stat = NLM_DENIED_GRACE_PERIOD;
        } else {
            nfs4_file_t *f = file_of(ns, exp, node, false);
            const void *me = owner_find(ns, l.caller, l.svid, l.oh, l.oh_len);
            long k = -1;
            if (f) {
                f->nstates++;   /* kept while expired NFSv4 clients' state is revoked */
                k = nfs4_lock_conflict(ns->st, f, me ? me : (const void *)&me, first, last,
                                       excl ? WRITE_LT : READ_LT);
                f->nstates--;
            }
            if (k >= 0) {
                nfs_xdr_put_u32(r, NLM_DENIED);
                put_holder(r, call->vers, &f->locks.v[k]);
                nfs4_unlock(ns->st);
                release_file(exp, node);
                return NFS_ACCEPT_SUCCESS;
            }
            if (f) nfs4_file_drop_unused(ns->st, f);
        }
        nfs4_unlock(ns->st);
    }
    release_file(exp, node);
    nfs_xdr_put_u32(r, nlm_stat_for(call->vers, stat));
    return NFS_ACCEPT_SUCCESS;
}

/* With st->lock: drops o's blocked requests on f for [first,last]. */
static void blocks_drop(nlm_state_t *ns, nlm_owner_t *o, nfs4_file_t *f, uint64_t first,
                        uint64_t last)
{
    for (nlm_block_t **pp = &ns->blocks; *pp;) {
        nlm_block_t *b = *pp;
        if (b->o == o && b->f == f && b->first == first && b->last == last) {
            *pp = b->next;
            block_free(b);
        } else {
            pp = &b->next;
        }
    }
}

static uint32_t do_lock(nfs_call_t *call, bool block, bool excl, const nlm_lock_arg_t *l,
                        const uint8_t *cookie, uint32_t clen, bool reclaim, bool monitor)
{
    nlm_state_t *ns = state_of(call);
    nfs_export_t *exp;
    zpl_node_t *node;
    uint32_t stat = resolve(call, l->fh, l->fh_len, &exp, &node, true);
    if (stat != NLM_GRANTED) return stat;
    uint64_t first, last;
    nlm_range_from_wire(l->off, l->len, &first, &last);
    nfs4_server_t *st = ns->st;
    pthread_mutex_lock(&st->lock);
    bool grace = nfs4_in_grace(st);
    nlm_owner_t *o = NULL;
    nfs4_file_t *f = NULL;
    if (grace != reclaim) {
        /* A new lock waits for the end of grace; a reclaim after it has no
         * lock to reclaim (Linux answers the same). */
        stat = NLM_DENIED_GRACE_PERIOD;
    } else if (!(o = owner_get(ns, l->caller, l->svid, l->oh, l->oh_len)) ||
               !(f = file_of(ns, exp, node, true)) || !hold_get(ns, o, f)) {
        if (f) nfs4_file_drop_unused(st, f);
        f = NULL;
        stat = NLM_DENIED_NOLOCKS;
    } else if (nfs4_deleg_conflict(st, f, NULL, excl)) {
        /* An NFSv4 client caching the file is being asked to give it back;
         * the client host tries again, as after a restart. */
        stat = NLM_DENIED_GRACE_PERIOD;
    } else {
        uint32_t type = excl ? WRITE_LT : READ_LT;
        long k = nfs4_lock_conflict(st, f, o, first, last, type);
        if (k < 0) {
            if (nfs4_range_set_tagged(&f->locks, o, first, last, type, true) < 0) {
                stat = NLM_DENIED_NOLOCKS;
            } else {
                stat = NLM_GRANTED;
                blocks_drop(ns, o, f, first, last);
                if (monitor) host_active(ns, call, l->caller, exp);
            }
        } else if (block) {
            bool have = false;
            for (nlm_block_t *b = ns->blocks; b && !have; b = b->next)
                have = b->o == o && b->f == f && b->first == first && b->last == last &&
                       b->excl == excl;
            nlm_block_t *b = have ? NULL : calloc(1, sizeof *b);
            if (!have && b) {
                b->o = o, b->f = f, b->first = first, b->last = last, b->excl = excl;
                b->vers = call->vers, b->woff = l->off, b->wlen = l->len;
                b->cookie = malloc(clen + 1), b->fh = malloc(l->fh_len + 1);
                b->cookie_len = clen, b->fh_len = l->fh_len;
                b->peer = call->peer;
                if (b->cookie && b->fh) {
                    if (clen) memcpy(b->cookie, cookie, clen);
                    memcpy(b->fh, l->fh, l->fh_len);
                    b->next = ns->blocks;
                    ns->blocks = b;
                    if (monitor) host_active(ns, call, l->caller, exp);
                } else {
                    block_free(b);
                    b = NULL;
                }
            }
            stat = (have || b) ? NLM_BLOCKED : NLM_DENIED_NOLOCKS;
        } else {
            stat = NLM_DENIED;
        }
    }
    if (o) tidy(ns, o, f);
    nfs4_unlock(st);
    release_file(exp, node);
    return stat;
}

static nfs_accept_t proc_lock(nfs_call_t *call, nfs_xdr_t *r, bool monitor)
{
    nfs_xdr_t *a = &call->args;
    uint32_t clen;
    const uint8_t *cookie = nfs_xdr_get_opaque(a, &clen, NLM_MAXOBJ);
    bool block = nfs_xdr_get_u32(a) != 0;
    bool excl = nfs_xdr_get_u32(a) != 0;
    nlm_lock_arg_t l;
    get_lock(a, call->vers, &l);
    bool reclaim = nfs_xdr_get_u32(a) != 0;
    nfs_xdr_get_u32(a); /* the client's NSM state: its reboots reach us by SM_NOTIFY */
    if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
    uint32_t stat = do_lock(call, block && monitor, excl, &l, cookie, clen, reclaim, monitor);
    nfs_xdr_put_opaque(r, cookie, clen);
    nfs_xdr_put_u32(r, nlm_stat_for(call->vers, stat));
    return NFS_ACCEPT_SUCCESS;
}

static nfs_accept_t proc_cancel(nfs_call_t *call, nfs_xdr_t *r)
{
    nfs_xdr_t *a = &call->args;
    uint32_t clen;
    const uint8_t *cookie = nfs_xdr_get_opaque(a, &clen, NLM_MAXOBJ);
    nfs_xdr_get_u32(a); /* block */
    bool excl = nfs_xdr_get_u32(a) != 0;
    nlm_lock_arg_t l;
    get_lock(a, call->vers, &l);
    if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
    nfs_xdr_put_opaque(r, cookie, clen);
    nlm_state_t *ns = state_of(call);
    nfs_export_t *exp;
    zpl_node_t *node;
    uint32_t stat = resolve(call, l.fh, l.fh_len, &exp, &node, false);
    if (stat == NLM_GRANTED) {
        uint64_t first, last;
        nlm_range_from_wire(l.off, l.len, &first, &last);
        pthread_mutex_lock(&ns->st->lock);
        if (nfs4_in_grace(ns->st)) {
            stat = NLM_DENIED_GRACE_PERIOD;
        } else {
            nfs4_file_t *f = file_of(ns, exp, node, false);
            nlm_owner_t *o = owner_find(ns, l.caller, l.svid, l.oh, l.oh_len);
            bool found = false;
            for (nlm_block_t **pp = &ns->blocks; *pp && o && f;) {
                nlm_block_t *b = *pp;
                if (b->o == o && b->f == f && b->first == first && b->last == last &&
                    b->excl == excl) {
                    *pp = b->next;
                    block_free(b);
                    found = true;
                } else {
                    pp = &b->next;
                }
            }
            /* Nothing waiting (already granted, or never asked): Linux says
             * DENIED; the client then unlocks what it may have got. */
            stat = found ? NLM_GRANTED : NLM_DENIED;
            if (o) tidy(ns, o, f);
        }
        nfs4_unlock(ns->st);
    }
    release_file(exp, node);
    nfs_xdr_put_u32(r, nlm_stat_for(call->vers, stat));
    return NFS_ACCEPT_SUCCESS;
}

static nfs_accept_t proc_unlock(nfs_call_t *call, nfs_xdr_t *r)
{
    nfs_xdr_t *a = &call->args;
    uint32_t clen;
    const uint8_t *cookie = nfs_xdr_get_opaque(a, &clen, NLM_MAXOBJ);
    nlm_lock_arg_t l;
    get_lock(a, call->vers, &l);
    if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
    nfs_xdr_put_opaque(r, cookie, clen);
    nlm_state_t *ns = state_of(call);
    nfs_export_t *exp;
    zpl_node_t *node;
    uint32_t stat = resolve(call, l.fh, l.fh_len, &exp, &node, false);
    if (stat == NLM_GRANTED) {
        uint64_t first, last;
        nlm_range_from_wire(l.off, l.len, &first, &last);
        pthread_mutex_lock(&ns->st->lock);
        nfs4_file_t *f = file_of(ns, exp, node, false);
        nlm_owner_t *o = owner_find(ns, l.caller, l.svid, l.oh, l.oh_len);
        if (o && f && hold_find(ns, o, f)) {
            if (nfs4_range_clear(&f->locks, o, first, last) < 0) stat = NLM_DENIED_NOLOCKS;
            ns->retry = true;
            pthread_cond_signal(&ns->cv);
            tidy(ns, o, f);
        }
        nfs4_unlock(ns->st);
    }
    release_file(exp, node);
    nfs_xdr_put_u32(r, nlm_stat_for(call->vers, stat));
    return NFS_ACCEPT_SUCCESS;
}

static nfs_accept_t proc_share(nfs_call_t *call, nfs_xdr_t *r, bool share)
{
    nfs_xdr_t *a = &call->args;
    uint32_t clen;
    const uint8_t *cookie = nfs_xdr_get_opaque(a, &clen, NLM_MAXOBJ);
    char caller[NLM_MAXSTR + 1];
    get_string(a, caller, NLM_MAXSTR);
    uint32_t fh_len, oh_len;
    const uint8_t *fh = nfs_xdr_get_opaque(a, &fh_len, NLM_MAXOBJ);
    const uint8_t *oh = nfs_xdr_get_opaque(a, &oh_len, NLM_MAXOBJ);
    uint32_t mode = nfs_xdr_get_u32(a), access = nfs_xdr_get_u32(a);
    bool reclaim = nfs_xdr_get_u32(a) != 0;
    if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
    nfs_xdr_put_opaque(r, cookie, clen);
    nlm_state_t *ns = state_of(call);
    nfs_export_t *exp;
    zpl_node_t *node;
    uint32_t stat = resolve(call, fh, fh_len, &exp, &node, share);
    if (stat == NLM_GRANTED) {
        nfs4_server_t *st = ns->st;
        pthread_mutex_lock(&st->lock);
        nlm_owner_t *o = NULL;
        nfs4_file_t *f = NULL;
        if (share && nfs4_in_grace(st) != reclaim) {
            stat = NLM_DENIED_GRACE_PERIOD;
        } else if (!share) {
            f = file_of(ns, exp, node, false);
            o = owner_find(ns, caller, 0, oh, oh_len);
            for (nlm_share_t **pp = &ns->shares; *pp && o && f;) {
                nlm_share_t *s = *pp;
                if (s->o == o && s->f == f) {
                    *pp = s->next;
                    free(s);
                } else {
                    pp = &s->next;
                }
            }
        } else if (!(o = owner_get(ns, caller, 0, oh, oh_len)) ||
                   !(f = file_of(ns, exp, node, true)) || !hold_get(ns, o, f)) {
            if (f) nfs4_file_drop_unused(st, f);
            f = NULL;
            stat = NLM_DENIED_NOLOCKS;
        } else {
            nlm_share_t *mine = NULL;
            for (nlm_share_t *s = ns->shares; s; s = s->next) {
                if (s->f != f) continue;
                if (s->o == o) mine = s;
                else if ((s->mode & access) || (s->access & mode)) stat = NLM_DENIED;
            }
            if (stat == NLM_GRANTED && !mine && (mine = calloc(1, sizeof *mine))) {
                mine->o = o, mine->f = f;
                mine->next = ns->shares;
                ns->shares = mine;
            }
            if (stat == NLM_GRANTED && !mine) stat = NLM_DENIED_NOLOCKS;
            if (stat == NLM_GRANTED) {
                mine->mode = mode, mine->access = access;
                host_active(ns, call, caller, exp);
            }
        }
        if (o) tidy(ns, o, f);
        nfs4_unlock(st);
    }
    release_file(exp, node);
    nfs_xdr_put_u32(r, nlm_stat_for(call->vers, stat));
    nfs_xdr_put_u32(r, 0); /* sequence */
    return NFS_ACCEPT_SUCCESS;
}

/* With st->lock: drops everything of the owners of host name. */
static void host_free_all(nlm_state_t *ns, const char *name)
{
    for (nlm_block_t **pp = &ns->blocks; *pp;) {
        nlm_block_t *b = *pp;
        if (!strcmp(b->o->caller, name)) {
            *pp = b->next;
            block_free(b);
        } else {
            pp = &b->next;
        }
    }
    for (nlm_share_t **pp = &ns->shares; *pp;) {
        nlm_share_t *s = *pp;
        if (!strcmp(s->o->caller, name)) {
            *pp = s->next;
            free(s);
        } else {
            pp = &s->next;
        }
    }
    for (nlm_hold_t *h = ns->holds; h; h = h->next)
        if (!strcmp(h->o->caller, name)) nfs4_range_drop_owner(&h->f->locks, h->o);
    for (;;) {
        nlm_hold_t *h = ns->holds;
        while (h && strcmp(h->o->caller, name)) h = h->next;
        if (!h) break;
        tidy(ns, h->o, h->f);
    }
    nsm_host_idle(ns->nsm, name);
    ns->retry = true;
    pthread_cond_signal(&ns->cv);
}

void nlm_host_rebooted(nfs_server_t *srv, const char *name, const struct sockaddr *peer)
{
    nlm_state_t *ns = srv->nlm_state;
    if (!ns) return;
    if (!nsm_host_is(ns->nsm, name, peer)) {
        /* Anyone could name a host; only the host itself may drop its locks. */
        char a[64];
        nfs_addr_string(peer, a, sizeof a);
        log_warn(SUB, "%s says host %s restarted, but %s holds its locks from elsewhere: "
                 "ignored", a, name, name);
        return;
    }
    log_info(SUB, "host %s restarted: its NFSv3 locks are released", name);
    pthread_mutex_lock(&ns->st->lock);
    host_free_all(ns, name);
    nfs4_unlock(ns->st);
}

static nfs_accept_t proc_free_all(nfs_call_t *call)
{
    char name[NLM_MAXSTR + 1];
    get_string(&call->args, name, NLM_MAXSTR);
    nfs_xdr_get_u32(&call->args); /* state */
    if (call->args.err) return NFS_ACCEPT_GARBAGE_ARGS;
    nlm_host_rebooted(call->srv, name, (struct sockaddr *)&call->peer);
    return NFS_ACCEPT_SUCCESS;
}

/* Runs procedure proc's body into r; for the _MSG forms the caller sends r. */
static nfs_accept_t run(nfs_call_t *call, uint32_t proc, nfs_xdr_t *r)
{
    switch (proc) {
    case NLMPROC_TEST: return proc_test(call, r);
    case NLMPROC_LOCK: return proc_lock(call, r, true);
    case NLMPROC_CANCEL: return proc_cancel(call, r);
    case NLMPROC_UNLOCK: return proc_unlock(call, r);
    case NLMPROC_GRANTED: { /* we are no client: nothing was waiting for this */
        uint32_t clen;
        const uint8_t *cookie = nfs_xdr_get_opaque(&call->args, &clen, NLM_MAXOBJ);
        if (call->args.err) return NFS_ACCEPT_GARBAGE_ARGS;
        nfs_xdr_put_opaque(r, cookie, clen);
        nfs_xdr_put_u32(r, NLM_DENIED);
        return NFS_ACCEPT_SUCCESS;
    }
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}

nfs_accept_t nlm_program(nfs_call_t *call)
{
    nlm_state_t *ns = state_of(call);
    if (!ns) return NFS_ACCEPT_PROG_UNAVAIL;
    uint32_t p = call->proc;
    switch (p) {
    case NLMPROC_NULL: return NFS_ACCEPT_SUCCESS;
    case NLMPROC_TEST: case NLMPROC_LOCK: case NLMPROC_CANCEL: case NLMPROC_UNLOCK:
    case NLMPROC_GRANTED:
        return run(call, p, call->res);
    case NLMPROC_TEST_MSG: case NLMPROC_LOCK_MSG: case NLMPROC_CANCEL_MSG:
    case NLMPROC_UNLOCK_MSG: case NLMPROC_GRANTED_MSG: {
        nfs_xdr_t res;
        nfs_xdr_init_encode(&res, 256);
        nfs_accept_t acc = run(call, p - 5, &res);
        cb_job_t *j = acc == NFS_ACCEPT_SUCCESS && !res.err ? calloc(1, sizeof *j) : NULL;
        if (j && (j->args = malloc(res.len ? res.len : 1))) {
            memcpy(j->args, res.buf, res.len);
            j->alen = res.len;
            j->peer = call->peer;
            j->prog = NFS_PROG_NLM, j->vers = call->vers, j->proc = p + 5;
            pthread_mutex_lock(&ns->st->lock);
            cb_queue(ns, j);
            nfs4_unlock(ns->st);
        } else if (j) {
            free(j);
        }
        nfs_xdr_free(&res);
        return acc;   /* the reply itself is void */
    }
    case NLMPROC_TEST_RES: case NLMPROC_LOCK_RES: case NLMPROC_CANCEL_RES:
    case NLMPROC_UNLOCK_RES: case NLMPROC_GRANTED_RES:
        /* Answers to calls of ours; a GRANTED_MSG is never sent (GRANTED is). */
        return NFS_ACCEPT_SUCCESS;
    case NLMPROC_SHARE: return proc_share(call, call->res, true);
    case NLMPROC_UNSHARE: return proc_share(call, call->res, false);
    case NLMPROC_NM_LOCK: return proc_lock(call, call->res, false);
    case NLMPROC_FREE_ALL: return proc_free_all(call);
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}

/* ------------------------------------------------------------ the thread */

/* With st->lock: grants what blocked requests can have now. */
static void grant_blocked(nlm_state_t *ns)
{
    for (nlm_block_t **pp = &ns->blocks; *pp;) {
        nlm_block_t *b = *pp;
        uint32_t type = b->excl ? WRITE_LT : READ_LT;
        if (nfs4_lock_conflict(ns->st, b->f, b->o, b->first, b->last, type) >= 0 ||
            nfs4_range_set_tagged(&b->f->locks, b->o, b->first, b->last, type, true) < 0) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        cb_job_t *j = calloc(1, sizeof *j);
        nfs_xdr_t x;
        nfs_xdr_init_encode(&x, 256);
        nfs_xdr_put_opaque(&x, b->cookie, b->cookie_len);
        nfs_xdr_put_u32(&x, b->excl);
        put_lock(&x, b->vers, ns->hostname, b->fh, b->fh_len, b->o->oh, b->o->ohlen, b->o->svid,
                 b->woff, b->wlen);
        if (j && !x.err && (j->args = malloc(x.len)) && (j->caller = strdup(b->o->caller)) &&
            (j->oh = malloc(b->o->ohlen + 1))) {
            memcpy(j->args, x.buf, x.len);
            j->alen = x.len;
            j->peer = b->peer;
            j->prog = NFS_PROG_NLM, j->vers = b->vers, j->proc = NLMPROC_GRANTED;
            j->grant = true;
            j->svid = b->o->svid;
            memcpy(j->oh, b->o->oh, b->o->ohlen);
            j->ohlen = b->o->ohlen;
            j->fsid = b->f->fsid, j->ino = b->f->ino, j->gen = b->f->gen;
            j->first = b->first, j->last = b->last;
            cb_queue(ns, j);
        } else if (j) {
            cb_free(j);   /* the client's next LOCK finds the lock its own */
        }
        nfs_xdr_free(&x);
        log_debug(SUB, "blocked lock of %s granted", b->o->caller);
        block_free(b);
    }
}

/* With st->lock: the first queued call not waiting for later, taken off. */
static cb_job_t *cb_take_ready(nlm_state_t *ns, time_t now)
{
    cb_job_t *prev = NULL;
    for (cb_job_t *j = ns->jobs; j; prev = j, j = j->next) {
        if (j->not_before > now) continue;
        if (prev) prev->next = j->next;
        else ns->jobs = j->next;
        if (ns->jobs_tail == j) ns->jobs_tail = prev;
        return j;
    }
    return NULL;
}

/* SM_NOTIFY for one host entry of the previous run. mon_name is the pool's
 * NSM_NOTIFY_NAME_PROP, else the server address the host reached us on, else
 * our host name (entries from before addresses were kept), and the call
 * leaves from that server address, since statd checks the sender's address
 * against mon_name too. A pool's service address comes up after the pool
 * (Pacemaker starts IPaddr2 once the import is done) and a pool imported at
 * start may be served a moment after grace began: until either is here the
 * call waits (true: queue it again), up to the end of grace, after which a
 * reclaim would be refused anyway. */
static bool send_notify(nlm_state_t *ns, cb_job_t *j, uint16_t pmap)
{
    char override[256], where[64];
    bool served = nsm_pool_notify_name(ns->nsm, j->pool, override, sizeof override);
    time_t now = nfs4_now();
    nfs_addr_string((struct sockaddr *)&j->peer, where, sizeof where);
    if (!served) {
        if (now < j->deadline) goto later;
        log_warn(SUB, "host %s (%s) was not told to reclaim its locks: pool %s is not "
                 "served here", j->caller, where, j->pool);
        return false;
    }
    const char *mon = override[0] ? override : j->server[0] ? j->server : ns->hostname;
    struct sockaddr_storage source;
    bool bound = false;
    if (j->server[0]) {
        struct addrinfo hints = {.ai_flags = AI_NUMERICHOST}, *ai;
        if (getaddrinfo(j->server, NULL, &hints, &ai) == 0) {
            memset(&source, 0, sizeof source);
            memcpy(&source, ai->ai_addr, ai->ai_addrlen);
            freeaddrinfo(ai);
            bound = true;
        }
    }
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 128);
    nfs_xdr_put_string(&x, mon);
    nfs_xdr_put_u32(&x, nsm_state_number(ns->nsm));
    int rc = x.err ? -ENOMEM : -EIO;
    uint8_t *res = NULL;
    size_t rlen = 0;
    for (int attempt = 0; attempt < 3 && !x.err && rc < 0 && rc != -EADDRNOTAVAIL && !ns->stop;
         attempt++) {
        if (attempt) sleep(1);
        rc = nlm_rpc_call_from(bound ? &source : NULL, &j->peer, pmap, 0, NFS_PROG_NSM, 1,
                               SM_NOTIFY, x.buf, x.len, &res, &rlen);
        free(res);
        res = NULL;
    }
    nfs_xdr_free(&x);
    if (rc == -EADDRNOTAVAIL) {
        if (now < j->deadline) goto later;
        log_warn(SUB, "host %s (%s) was not told to reclaim its locks: %s is not an address "
                 "of this head", j->caller, where, j->server);
    } else if (rc < 0) {
        log_info(SUB, "SM_NOTIFY to %s (%s) failed: %s", j->caller, where, strerror(-rc));
    } else {
        log_info(SUB, "told %s (%s, monitored before) to reclaim its locks: SM_NOTIFY for %s%s%s",
                 j->caller, where, mon, bound ? " from " : "", bound ? j->server : "");
    }
    return false;
later:
    j->not_before = now + 1;
    return true;
}

/* A queued call to a client; true when it must be queued again (later). */
static bool send_job(nlm_state_t *ns, cb_job_t *j)
{
    uint16_t pmap = ns->srv->cfg.nlm_client_portmap ? ns->srv->cfg.nlm_client_portmap : 111;
    if (j->notify) return send_notify(ns, j, pmap);
    uint8_t *res = NULL;
    size_t rlen = 0;
    int rc = -EIO;
    for (int attempt = 0; attempt < 3 && rc < 0 && !ns->stop; attempt++) {
        if (attempt) sleep(1);
        rc = nlm_rpc_call(&j->peer, pmap, 0, j->prog, j->vers, j->proc, j->args, j->alen, &res,
                          &rlen);
    }
    char a[64];
    nfs_addr_string((struct sockaddr *)&j->peer, a, sizeof a);
    if (rc < 0) {
        log_info(SUB, "call %" PRIu32 "/%" PRIu32 " to %s failed: %s", j->prog, j->proc, a,
                 strerror(-rc));
    } else if (j->grant) {
        nfs_xdr_t x;
        nfs_xdr_init_decode(&x, res, rlen);
        uint32_t clen;
        nfs_xdr_get_opaque(&x, &clen, NLM_MAXOBJ);
        uint32_t stat = nfs_xdr_get_u32(&x);
        if (!x.err && stat == NLM_DENIED) {
            /* The client no longer waits for this lock: give it back. */
            nfs4_server_t *st = ns->st;
            pthread_mutex_lock(&st->lock);
            nlm_owner_t *o = owner_find(ns, j->caller, j->svid, j->oh, j->ohlen);
            nfs4_file_t *f = nfs4_file_find_id(st, j->fsid, j->ino, j->gen);
            if (o && f && hold_find(ns, o, f)) {
                nfs4_range_clear(&f->locks, o, j->first, j->last);
                ns->retry = true;
                tidy(ns, o, f);
            }
            nfs4_unlock(st);
        }
    }
    free(res);
    return false;
}

/* With st->lock: queues SM_NOTIFY for a host entry (send_notify). */
static void notify_one(const nsm_record_t *rec, const struct sockaddr_storage *addr, void *arg)
{
    nlm_state_t *ns = arg;
    cb_job_t *j = calloc(1, sizeof *j);
    if (!j || !(j->caller = strdup(rec->name))) {
        free(j);
        return;
    }
    j->notify = true;
    j->peer = *addr;
    j->prog = NFS_PROG_NSM, j->vers = 1, j->proc = SM_NOTIFY;
    snprintf(j->server, sizeof j->server, "%s", rec->server);
    snprintf(j->pool, sizeof j->pool, "%s", rec->pool);
    j->deadline = ns->st->nlm_grace_end;
    cb_queue(ns, j);
}

static void *nlm_thread(void *arg)
{
    nlm_state_t *ns = arg;
    nfs4_server_t *st = ns->st;
    pthread_mutex_lock(&st->lock);
    while (!ns->stop) {
        grant_blocked(ns);
        ns->retry = false;
        if (ns->prune_pending && !nfs4_in_grace(st)) {
            ns->prune_pending = false;
            nsm_prune_previous(ns->nsm);
        }
        cb_job_t *j = cb_take_ready(ns, nfs4_now());
        if (j) {
            nfs4_unlock(st);
            bool again = send_job(ns, j);
            pthread_mutex_lock(&st->lock);
            if (again && !ns->stop) cb_queue(ns, j);
            else cb_free(j);
            continue;
        }
        if (ns->retry) continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&ns->cv, &st->lock, &ts);
    }
    nfs4_unlock(st);
    return NULL;
}

/* ------------------------------------------------------------ lifetime */

nsm_state_t *nlm_server_nsm(nfs_server_t *srv)
{
    nlm_state_t *ns = srv->nlm_state;
    return ns ? ns->nsm : NULL;
}

/* With st->lock: NLM grace (which NFSv4 honours too) for `why` hosts, and
 * SM_NOTIFY to every host of a previous run. */
static void grace_and_notify(nlm_state_t *ns, const char *why)
{
    time_t end = nfs4_now() + ns->st->grace;
    if (ns->st->nlm_grace_end < end) ns->st->nlm_grace_end = end;
    ns->prune_pending = true;
    nsm_foreach_previous(ns->nsm, notify_one, ns);
    log_info(SUB, "NFSv3 lock grace period: %" PRIu32 " s for %s", ns->st->grace, why);
}

void nlm_records_pool_add(void *state, dsl_pool_t *dp)
{
    nlm_state_t *ns = state;
    if (!nsm_pool_add(ns->nsm, dp)) return;
    pthread_mutex_lock(&ns->st->lock);
    grace_and_notify(ns, "the hosts that held locks on a pool another head had");
    nfs4_unlock(ns->st);
}

void nlm_records_pool_remove(void *state, dsl_pool_t *dp)
{
    nlm_state_t *ns = state;
    nsm_pool_remove(ns->nsm, dp);
}

int nlm_init(nfs_server_t *srv, void **state)
{
    nlm_state_t *ns = calloc(1, sizeof *ns);
    if (!ns) return -ENOMEM;
    ns->srv = srv;
    ns->st = srv->nfs4_state;
    if (gethostname(ns->hostname, sizeof ns->hostname - 1) < 0)
        snprintf(ns->hostname, sizeof ns->hostname, "cairnd");
    bool had = false;
    ns->nsm = nsm_open(nfs_server_state_dir(srv), &had);
    if (!ns->nsm) {
        free(ns);
        return -ENOMEM;
    }
    pthread_cond_init(&ns->cv, NULL);
    pthread_mutex_lock(&ns->st->lock);
    if (had) grace_and_notify(ns, "the hosts that held locks");
    nfs4_unlock(ns->st);
    if (pthread_create(&ns->thread, NULL, nlm_thread, ns) != 0) {
        nlm_fini(ns);
        return -EAGAIN;
    }
    ns->thread_started = true;
    *state = ns;
    return 0;
}

/* With st->lock: drops every NLM state on files matching exp (all for NULL). */
static void drop_files(nlm_state_t *ns, nfs_export_t *exp)
{
    for (nlm_block_t **pp = &ns->blocks; *pp;) {
        nlm_block_t *b = *pp;
        if (!exp || b->f->exp == exp) {
            *pp = b->next;
            block_free(b);
        } else {
            pp = &b->next;
        }
    }
    for (nlm_share_t **pp = &ns->shares; *pp;) {
        nlm_share_t *s = *pp;
        if (!exp || s->f->exp == exp) {
            *pp = s->next;
            free(s);
        } else {
            pp = &s->next;
        }
    }
    for (nlm_hold_t *h = ns->holds; h; h = h->next)
        if (!exp || h->f->exp == exp) nfs4_range_drop_owner(&h->f->locks, h->o);
    for (;;) {
        nlm_hold_t *h = ns->holds;
        while (h && exp && h->f->exp != exp) h = h->next;
        if (!h) break;
        tidy(ns, h->o, h->f);
    }
}

void nlm_export_removed(void *state, nfs_export_t *exp)
{
    nlm_state_t *ns = state;
    if (!ns) return;
    pthread_mutex_lock(&ns->st->lock);
    drop_files(ns, exp);
    nfs4_unlock(ns->st);
}

void nlm_stopping(void *state)
{
    nlm_state_t *ns = state;
    /* Stopping unexports everything, which releases every lock: the hosts
     * must stay listed so they are told to reclaim after the next start. */
    if (ns) nsm_freeze(ns->nsm);
}

void nlm_fini(void *state)
{
    nlm_state_t *ns = state;
    if (!ns) return;
    pthread_mutex_lock(&ns->st->lock);
    ns->stop = true;
    pthread_cond_signal(&ns->cv);
    nfs4_unlock(ns->st);
    if (ns->thread_started) pthread_join(ns->thread, NULL);
    pthread_mutex_lock(&ns->st->lock);
    /* The hosts stay monitored on disk: they reclaim after the next start. */
    nsm_freeze(ns->nsm);
    drop_files(ns, NULL);
    while (ns->jobs) {
        cb_job_t *j = ns->jobs;
        ns->jobs = j->next;
        cb_free(j);
    }
    nfs4_unlock(ns->st);
    nsm_close(ns->nsm);
    pthread_cond_destroy(&ns->cv);
    free(ns);
}
