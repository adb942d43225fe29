/*
 * NFSv4 OPEN (RFC 7530 16.16, RFC 8881 18.16), one path for every claim type.
 *
 * An OPEN names its file by a claim: a name in the current directory
 * (CLAIM_NULL, and CLAIM_DELEGATE_CUR for a client opening under a delegation
 * it holds), or the current file handle itself (CLAIM_FH, CLAIM_DELEG_CUR_FH
 * in 4.1, and CLAIM_PREVIOUS, a reclaim after a server restart). Each claim
 * type is a row of open_claims[]: how its arguments decode, which minor
 * versions know it, what it must satisfy under the state lock (grace for
 * reclaims, no grace for new state, a delegation of the client for the
 * DELEGATE ones) and which delegation it may get: a new one (CLAIM_NULL,
 * CLAIM_FH), the one held before a restart (CLAIM_PREVIOUS names its type;
 * nfs4_deleg_reclaim), or none (an open under a delegation). Everything else
 * is common:
 *
 *   decode        open_decode: share access/deny, owner, create mode, claim
 *   phase 1       open_admit, under the state lock: the client, the owner's
 *                 4.0 seqid (a retransmission is answered from its cache),
 *                 the claim's own rule
 *   phase 2       without the lock (it may wait for the disk): find or make
 *                 the file (open_by_name / open_by_fh), then open_check_file:
 *                 its type, other clients' delegations (recalled first),
 *                 permissions, O_TRUNC
 *   phase 3       open_state, under the lock again: share reservations and
 *                 the open stateid, the reply and maybe a delegation
 *
 * CLAIM_DELEGATE_PREV and CLAIM_DELEG_PREV_FH (a client reclaiming, after its
 * own restart, delegations it held) are NFS4ERR_NOTSUPP, as RFC 7530 16.16.5
 * and RFC 8881 18.16.3 allow: delegations are not kept across a client's
 * restart (its new client record drops the old one's state), so there would
 * be nothing to reclaim; DELEGPURGE says NOTSUPP to match (nfs4_deleg.c).
 */
#include "nfs4_compound.h"

#include <errno.h>
#include <sys/stat.h>

enum { OPEN4_NOCREATE = 0, OPEN4_CREATE = 1 };
enum { UNCHECKED4 = 0, GUARDED4 = 1, EXCLUSIVE4 = 2, EXCLUSIVE4_1 = 3 };
enum {
    CLAIM_NULL = 0, CLAIM_PREVIOUS = 1, CLAIM_DELEGATE_CUR = 2, CLAIM_DELEGATE_PREV = 3,
    CLAIM_FH = 4, CLAIM_DELEG_CUR_FH = 5, CLAIM_DELEG_PREV_FH = 6,
};
enum { OPEN4_RESULT_CONFIRM = 2, OPEN4_RESULT_LOCKTYPE_POSIX = 4 };
enum {
    OPEN_DELEGATE_NONE = 0, OPEN_DELEGATE_READ = 1, OPEN_DELEGATE_WRITE = 2,
    OPEN_DELEGATE_NONE_EXT = 3,
};
enum { OPEN4_SHARE_ACCESS_WANT_DELEG_MASK = 0xff00, OPEN4_SHARE_ACCESS_WANT_NO_DELEG = 0x0400,
       OPEN4_SHARE_ACCESS_WANT_CANCEL = 0x0500 };
enum { WND4_NOT_WANTED = 0, WND4_CONTENTION = 1 };

typedef struct open_claim open_claim_t;

/* The decoded arguments of one OPEN. */
typedef struct open_req {
    uint32_t seqid, access, deny, want;
    uint64_t clientid;
    const uint8_t *oid;               /* open-owner */
    uint32_t olen;
    uint32_t opentype, how;
    nfs4_sattr_t sattr;               /* UNCHECKED4, GUARDED4, EXCLUSIVE4_1 */
    uint32_t sattr_status;
    uint8_t verf[NFS4_VERIFIER_SIZE]; /* EXCLUSIVE4, EXCLUSIVE4_1 */
    uint32_t claim;
    const open_claim_t *kind;         /* the claim's row of open_claims[] */
    char name[ZPL_NAME_MAX + 1];      /* claims by name */
    uint32_t name_status;
    nfs4_stateid_t deleg_sid;         /* DELEGATE_CUR, DELEG_CUR_FH */
    uint32_t reclaim_deleg;           /* PREVIOUS: the delegation type held before */
} open_req_t;

/* What phase 1 learned of the owner's 4.0 sequencing. */
typedef struct open_seq {
    bool replayed;                    /* answered from the owner's cached reply */
    bool ours;                        /* this seqid is ours to record */
    bool seen_have;                   /* the owner's seqid then, to catch a */
    uint32_t seen_seqid;              /* concurrent OPEN of the same owner */
} open_seq_t;

/* What phase 2 found or made. */
typedef struct open_work {
    zpl_node_t *obj;                  /* held */
    zpl_wcc_t wcc;
    bool created;
    nfs4_bitmap_t attrset;
} open_work_t;

struct open_claim {
    /* Decodes the claim's arguments after its type: BADXDR or NFS4_OK (a bad
     * name is told later, in q->name_status, once the seqid is consumed). */
    uint32_t (*decode)(nfs4_cx_t *cx, open_req_t *q);
    /* Its rule in phase 1 (client c, lock held): NFS4_OK to go on. */
    uint32_t (*admit)(nfs4_cx_t *cx, nfs4_client_t *c, const open_req_t *q);
    /* The delegation it gets with open s (lock held; *recall: to be returned
     * at once); NULL: none. */
    nfs4_stid_t *(*deleg)(nfs4_cx_t *cx, const open_req_t *q, nfs4_client_t *c, nfs4_stid_t *s,
                          bool *recall);
    bool by_name;                     /* the current fh is the directory of q->name */
    bool since_41;                    /* 4.0 knows it not: NFS4ERR_INVAL there */
    bool supported;
};

/* ---------------------------------------------------------------- claims */

static uint32_t decode_name(nfs4_cx_t *cx, open_req_t *q)
{
    q->name_status = nfs4_name_get(cx, q->name);
    return q->name_status == NFS4ERR_BADXDR ? NFS4ERR_BADXDR : NFS4_OK;
}

static uint32_t decode_previous(nfs4_cx_t *cx, open_req_t *q)
{
    q->reclaim_deleg = nfs_xdr_get_u32(cx->a);
    return q->reclaim_deleg > OPEN_DELEGATE_WRITE ? NFS4ERR_BADXDR : NFS4_OK;
}

static uint32_t decode_deleg_cur(nfs4_cx_t *cx, open_req_t *q)
{
    nfs4_get_stateid(cx->a, &q->deleg_sid);
    return decode_name(cx, q);
}

static uint32_t decode_deleg_cur_fh(nfs4_cx_t *cx, open_req_t *q)
{
    nfs4_get_stateid(cx->a, &q->deleg_sid);
    return NFS4_OK;
}

static uint32_t decode_nothing(nfs4_cx_t *cx, open_req_t *q)
{
    (void)cx;
    (void)q;
    return NFS4_OK;
}

/* New state: not in grace, nor (4.1) before the client's RECLAIM_COMPLETE. */
static uint32_t admit_new(nfs4_cx_t *cx, nfs4_client_t *c, const open_req_t *q)
{
    (void)q;
    return nfs4_in_grace(cx->st) || nfs4_awaiting_reclaim_complete(cx, c) ? NFS4ERR_GRACE
                                                                           : NFS4_OK;
}

/* A reclaim: in grace, by a client that held state before the restart. */
static uint32_t admit_reclaim(nfs4_cx_t *cx, nfs4_client_t *c, const open_req_t *q)
{
    (void)q;
    if (!nfs4_in_grace(cx->st) || !c->may_reclaim || (cx->minor >= 1 && c->reclaim_complete))
        return NFS4ERR_NO_GRACE;
    return NFS4_OK;
}

/* An open under a delegation: it must be one of the client's. */
static uint32_t admit_deleg_cur(nfs4_cx_t *cx, nfs4_client_t *c, const open_req_t *q)
{
    nfs4_stid_t *d;
    uint32_t status = nfs4_stid_find(cx->st, cx->minor, &q->deleg_sid, &d);
    if (status == NFS4_OK && (d->type != NFS4_STID_DELEG || d->client != c))
        status = NFS4ERR_BAD_STATEID;
    return status;
}

/* 4.1: the client asked for no delegation with this open. */
static bool wants_no_deleg(const open_req_t *q)
{
    uint32_t wants = q->want & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
    return wants == OPEN4_SHARE_ACCESS_WANT_NO_DELEG || wants == OPEN4_SHARE_ACCESS_WANT_CANCEL;
}

/* A new delegation, as the grant policy allows (nfs4_deleg.c). */
static nfs4_stid_t *deleg_new(nfs4_cx_t *cx, const open_req_t *q, nfs4_client_t *c,
                              nfs4_stid_t *s, bool *recall)
{
    *recall = false;
    return nfs4_deleg_grant(cx->st, c, s, wants_no_deleg(q));
}

/* The delegation the client held before the restart, if it names one. */
static nfs4_stid_t *deleg_reclaimed(nfs4_cx_t *cx, const open_req_t *q, nfs4_client_t *c,
                                    nfs4_stid_t *s, bool *recall)
{
    *recall = false;
    if (q->reclaim_deleg == OPEN_DELEGATE_NONE) return NULL;
    return nfs4_deleg_reclaim(cx->st, c, s, q->reclaim_deleg == OPEN_DELEGATE_WRITE, recall);
}

static const open_claim_t open_claims[] = {
    [CLAIM_NULL] = {
        .decode = decode_name, .admit = admit_new, .deleg = deleg_new, .by_name = true,
        .supported = true },
    [CLAIM_PREVIOUS] = {
        .decode = decode_previous, .admit = admit_reclaim, .deleg = deleg_reclaimed,
        .supported = true },
    [CLAIM_DELEGATE_CUR] = {
        .decode = decode_deleg_cur, .admit = admit_deleg_cur, .by_name = true,
        .supported = true },
    [CLAIM_DELEGATE_PREV] = { .decode = decode_name, .by_name = true },
    [CLAIM_FH] = {
        .decode = decode_nothing, .admit = admit_new, .deleg = deleg_new, .since_41 = true,
        .supported = true },
    [CLAIM_DELEG_CUR_FH] = {
        .decode = decode_deleg_cur_fh, .admit = admit_deleg_cur, .since_41 = true,
        .supported = true },
    [CLAIM_DELEG_PREV_FH] = { .decode = decode_nothing },
};

/* ---------------------------------------------------------------- decode */

static uint32_t open_decode_how(nfs4_cx_t *cx, open_req_t *q)
{
    nfs_xdr_t *a = cx->a;
    q->how = UNCHECKED4;
    if (q->opentype == OPEN4_NOCREATE) return NFS4_OK;
    if (q->opentype != OPEN4_CREATE) return NFS4ERR_BADXDR;
    q->how = nfs_xdr_get_u32(a);
    if (q->how == UNCHECKED4 || q->how == GUARDED4) {
        q->sattr_status = nfs4_sattr_decode(a, &q->sattr);
    } else if (q->how == EXCLUSIVE4 || (q->how == EXCLUSIVE4_1 && cx->minor >= 1)) {
        const uint8_t *v = nfs_xdr_get_fixed(a, NFS4_VERIFIER_SIZE);
        if (v) memcpy(q->verf, v, NFS4_VERIFIER_SIZE);
        if (q->how == EXCLUSIVE4_1) q->sattr_status = nfs4_sattr_decode(a, &q->sattr);
    } else {
        return NFS4ERR_BADXDR;
    }
    return NFS4_OK;
}

/* The arguments, and the checks that need no state. */
static uint32_t open_decode(nfs4_cx_t *cx, open_req_t *q)
{
    nfs_xdr_t *a = cx->a;
    q->seqid = nfs_xdr_get_u32(a);
    q->access = nfs_xdr_get_u32(a);
    q->deny = nfs_xdr_get_u32(a);
    q->clientid = nfs_xdr_get_u64(a);
    q->oid = nfs_xdr_get_opaque(a, &q->olen, NFS4_OPAQUE_LIMIT);
    q->opentype = nfs_xdr_get_u32(a);
    uint32_t status = open_decode_how(cx, q);
    if (status) return status;
    q->claim = nfs_xdr_get_u32(a);
    if (q->claim >= sizeof open_claims / sizeof open_claims[0]) return NFS4ERR_BADXDR;
    q->kind = &open_claims[q->claim];
    if (q->kind->decode(cx, q) || a->err) return NFS4ERR_BADXDR;
    if (q->kind->since_41 && cx->minor == 0) return NFS4ERR_INVAL;
    if (!q->kind->supported) return NFS4ERR_NOTSUPP;
    q->want = q->access & ~0xffu;
    q->access &= 0xff;
    if ((q->want && cx->minor == 0) || q->access < 1 || q->access > 3 || q->deny > 3)
        return NFS4ERR_INVAL;
    if (cx->cur.kind == NFS4_FH_NONE) return NFS4ERR_NOFILEHANDLE;
    return NFS4_OK;
}

/* ---------------------------------------------------------------- phase 1 */

/* Looks the opened name up again after a 4.0 replay so GETFH/GETATTR that
 * follow see the file. */
static void replay_set_fh(nfs4_cx_t *cx, const open_req_t *q)
{
    if (q->claim != CLAIM_NULL || cx->cur.kind != NFS4_FH_REAL) return;
    zpl_node_t *n;
    if (zpl_lookup(cx->cur.node, q->name, &n) < 0) return;
    zpl_node_rele(cx->cur.node);
    cx->cur.node = n;
}

/* The client, the owner's seqid and the claim's rule, under the state lock. */
static uint32_t open_admit(nfs4_cx_t *cx, const open_req_t *q, open_seq_t *seq)
{
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c;
    uint32_t status = nfs4_client_of(cx, q->clientid, &c);
    nfs4_owner_t *o = status ? NULL : nfs4_owner_find(c, false, q->oid, q->olen);
    if (status == NFS4_OK && o) status = nfs4_seq_check(cx, o, q->seqid, &seq->replayed);
    seq->seen_have = o && o->have_seqid;
    seq->seen_seqid = o ? o->seqid : 0;
    seq->ours = status == NFS4_OK && !seq->replayed;
    if (seq->ours) status = q->kind->admit(cx, c, q);
    nfs4_unlock(st);
    return status;
}

/* ---------------------------------------------------------------- phase 2 */

/* The current fh as the directory to open a name in. */
static uint32_t open_check_dir(nfs4_cx_t *cx, const open_req_t *q, open_work_t *w)
{
    nfs4_cfh_t *dir = &cx->cur;
    if (dir->kind == NFS4_FH_PSEUDO)
        return q->opentype == OPEN4_CREATE ? NFS4ERR_ROFS : NFS4ERR_ISDIR;
    zpl_attr_t da;
    int rc = zpl_getattr(dir->node, &da);
    if (rc < 0) return nfs4_errno_to_status(rc);
    w->wcc.pre_change = w->wcc.post.change = da.change;
    if (S_ISLNK(da.mode)) return NFS4ERR_SYMLINK;
    if (!S_ISDIR(da.mode)) return NFS4ERR_NOTDIR;
    return nfs4_perm(dir, dir->node, ZPL_ACCESS_EXEC);
}

/* The create attributes beyond the mode, the size among them (a new file of
 * 32 bytes is 32 zeros, as SETATTR would make it). */
static void open_apply_create_attrs(nfs4_cx_t *cx, const open_req_t *q, open_work_t *w)
{
    if (q->how == EXCLUSIVE4_1) {
        if (q->sattr.sa.mask & ZPL_SET_MODE) nfs4_bm_set(&w->attrset, FATTR4_MODE);
        return;
    }
    if (q->how != UNCHECKED4 && q->how != GUARDED4) return;
    if (!(q->sattr.sa.mask & ~(uint32_t)ZPL_SET_MODE)) {
        w->attrset = q->sattr.set;
        return;
    }
    zpl_setattr_t s = q->sattr.sa;
    s.mask &= ~(uint32_t)ZPL_SET_MODE;
    if ((s.mask & ZPL_SET_UID) && s.uid != cx->cur.cred.uid && cx->cur.cred.uid != 0)
        s.mask &= ~(uint32_t)ZPL_SET_UID;
    if (zpl_setattr(w->obj, &s, NULL) == 0) w->attrset = q->sattr.set;
}

/* OPEN4_CREATE of q->name in the current directory, by its create mode. */
static uint32_t open_create(nfs4_cx_t *cx, const open_req_t *q, open_work_t *w)
{
    nfs4_cfh_t *dir = &cx->cur;
    if (!dir->writable || zpl_fs_readonly(zpl_node_fs(dir->node))) return NFS4ERR_ROFS;
    uint32_t mode = q->sattr.sa.mask & ZPL_SET_MODE ? q->sattr.sa.mode : 0644;
    uint32_t status;
    int rc;
    if (q->how == UNCHECKED4) {
        rc = zpl_lookup(dir->node, q->name, &w->obj);
        if (rc != -ENOENT) return rc < 0 ? nfs4_errno_to_status(rc) : NFS4_OK;
        w->obj = NULL;
    }
    if ((status = nfs4_perm(dir, dir->node, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC))) return status;
    if (q->how == UNCHECKED4) {
        rc = zpl_create(dir->node, q->name, mode, &dir->cred, ZPL_CREATE_UNCHECKED, NULL,
                        &w->obj, &w->wcc);
    } else if (q->how == GUARDED4) {
        rc = zpl_create(dir->node, q->name, mode, &dir->cred, ZPL_CREATE_GUARDED, NULL,
                        &w->obj, &w->wcc);
    } else {
        /* Ours whether new or a retransmission of the same create. */
        rc = zpl_create(dir->node, q->name, q->how == EXCLUSIVE4_1 ? mode : 0644, &dir->cred,
                        ZPL_CREATE_EXCLUSIVE, q->verf, &w->obj, &w->wcc);
    }
    if (rc < 0) return nfs4_errno_to_status(rc);
    w->created = true;
    open_apply_create_attrs(cx, q, w);
    return nfs4_durable(dir);
}

/* CLAIM_NULL, CLAIM_DELEGATE_CUR: q->name in the current directory. */
static uint32_t open_by_name(nfs4_cx_t *cx, const open_req_t *q, open_work_t *w)
{
    uint32_t status = open_check_dir(cx, q, w);
    if (status) return status;
    if (q->opentype == OPEN4_CREATE) return open_create(cx, q, w);
    int rc = zpl_lookup(cx->cur.node, q->name, &w->obj);
    return rc < 0 ? nfs4_errno_to_status(rc) : NFS4_OK;
}

/* CLAIM_PREVIOUS, CLAIM_FH, CLAIM_DELEG_CUR_FH: the current fh is the file. */
static uint32_t open_by_fh(nfs4_cx_t *cx, open_work_t *w)
{
    if (cx->cur.kind != NFS4_FH_REAL) return NFS4ERR_ISDIR;
    w->obj = cx->cur.node;
    zpl_node_hold(w->obj);
    return NFS4_OK;
}

static uint32_t open_file_type(nfs4_cx_t *cx, zpl_node_t *n)
{
    zpl_attr_t a;
    int rc = zpl_getattr(n, &a);
    if (rc < 0) return nfs4_errno_to_status(rc);
    if (S_ISDIR(a.mode)) return NFS4ERR_ISDIR;
    if (S_ISLNK(a.mode)) return NFS4ERR_SYMLINK;
    /* 4.0 says SYMLINK for every other kind too: the client's arguments were
     * right, the name just is not a file (RFC 7530 16.16.5). */
    if (!S_ISREG(a.mode)) return cx->minor >= 1 ? NFS4ERR_WRONG_TYPE : NFS4ERR_SYMLINK;
    return NFS4_OK;
}

static bool open_fs_writable(nfs4_cx_t *cx, zpl_node_t *obj)
{
    return cx->cur.writable && !zpl_fs_readonly(zpl_node_fs(obj));
}

/* O_TRUNC of an existing file (a create that found it, asking size 0). */
static uint32_t open_truncate(nfs4_cx_t *cx, nfs4_cfh_t *fh, const open_req_t *q,
                              open_work_t *w)
{
    uint32_t status = nfs4_perm(fh, w->obj, ZPL_ACCESS_WRITE);
    if (status == NFS4_OK && !open_fs_writable(cx, w->obj)) status = NFS4ERR_ROFS;
    if (status) return status;
    zpl_setattr_t s = { .mask = ZPL_SET_SIZE, .size = q->sattr.sa.size };
    int rc = zpl_setattr(w->obj, &s, NULL);
    if (rc < 0) return nfs4_errno_to_status(rc);
    nfs4_bm_set(&w->attrset, FATTR4_SIZE);
    return nfs4_durable(&cx->cur);
}

/* The file found: its type, other clients' delegations, permissions. */
static uint32_t open_check_file(nfs4_cx_t *cx, open_req_t *q, open_work_t *w)
{
    uint32_t status = open_file_type(cx, w->obj);
    /* Another client's delegation yields first (before any truncation). */
    bool writes = (q->access & OPEN4_SHARE_ACCESS_WRITE) || (q->sattr.sa.mask & ZPL_SET_SIZE);
    uint64_t requester = cx->minor >= 1 ? cx->clientid : q->clientid;
    if (status == NFS4_OK && !w->created &&
        nfs4_deleg_conflict_node(cx->st, w->obj, requester, writes))
        status = NFS4ERR_DELAY;
    nfs4_cfh_t fh = { .kind = NFS4_FH_REAL, .node = w->obj, .cred = cx->cur.cred,
                      .writable = cx->cur.writable };
    if (status == NFS4_OK && !w->created) {
        uint32_t want_perm = 0;
        if (q->access & OPEN4_SHARE_ACCESS_READ) want_perm |= ZPL_ACCESS_READ;
        if (q->access & OPEN4_SHARE_ACCESS_WRITE) want_perm |= ZPL_ACCESS_WRITE;
        /* The owner passes for a file he just made with EXCLUSIVE4 (no mode yet). */
        status = nfs4_perm(&fh, w->obj, want_perm);
    }
    if (status == NFS4_OK && (q->access & OPEN4_SHARE_ACCESS_WRITE) &&
        !open_fs_writable(cx, w->obj))
        status = NFS4ERR_ROFS;
    /* An UNCHECKED4 create that finds the file ignores its attributes, but for
     * a size of zero, which truncates it (RFC 7530 16.16.5, O_TRUNC). */
    if (!w->created && (q->sattr.sa.mask & ZPL_SET_SIZE) && q->sattr.sa.size != 0)
        q->sattr.sa.mask &= ~(uint32_t)ZPL_SET_SIZE;
    if (status == NFS4_OK && !w->created && (q->sattr.sa.mask & ZPL_SET_SIZE))
        status = open_truncate(cx, &fh, q, w);
    return status;
}

/* Phase 2: the file, without the state lock. */
static uint32_t open_find_file(nfs4_cx_t *cx, open_req_t *q, open_work_t *w)
{
    uint32_t status = q->kind->by_name ? open_by_name(cx, q, w) : open_by_fh(cx, w);
    return status ? status : open_check_file(cx, q, w);
}

/* ---------------------------------------------------------------- phase 3 */

typedef struct share_req {
    nfs4_owner_t *owner;
    uint32_t access, deny;
    nfs4_stid_t *mine;
    nfs4_client_t *against;       /* whose open denied us */
} share_req_t;

static uint32_t share_cb(nfs4_stid_t *s, void *arg)
{
    share_req_t *q = arg;
    if (s->owner == q->owner) q->mine = s;
    /* The owner's own open counts too: what it denies, it denies itself
     * (RFC 7530 9.9, 16.16.5). */
    if ((q->access & s->deny) || (q->deny & s->access)) {
        q->against = s->client;
        return NFS4ERR_SHARE_DENIED;
    }
    return NFS4_OK;
}

/* The share reservation of owner o on the file: its open state, upgraded or
 * new (lock held). Courtesy clients in the way lose their state. */
static uint32_t open_reserve(nfs4_cx_t *cx, const open_req_t *q, nfs4_client_t *c,
                             nfs4_owner_t *o, zpl_node_t *obj, nfs4_stid_t **out)
{
    nfs4_server_t *st = cx->st;
    nfs4_file_t *f = nfs4_file_get(st, cx->cur.exp, obj);
    if (!f) return NFS4ERR_RESOURCE;
    share_req_t sq = { .owner = o, .access = q->access, .deny = q->deny };
    uint32_t status;
    f->nstates++;   /* keep f while we look (and revoke) */
    do {
        sq.mine = NULL;
        sq.against = NULL;
        status = nfs4_each_open(st, f, share_cb, &sq);
    } while (status == NFS4ERR_SHARE_DENIED && nfs4_revoke_courtesy(st, sq.against));
    f->nstates--;
    nfs4_stid_t *s = sq.mine;
    if (status == NFS4_OK && s) {
        s->seqid++;                   /* an upgrade of the owner's open */
    } else if (status == NFS4_OK && !(s = nfs4_stid_new(st, NFS4_STID_OPEN, c, o, f))) {
        status = NFS4ERR_RESOURCE;
    }
    if (status == NFS4_OK) {
        s->access |= q->access;
        s->deny |= q->deny;
        s->access_modes |= (uint8_t)(1u << q->access);
        s->deny_modes |= (uint8_t)(1u << q->deny);
        *out = s;
    }
    nfs4_file_drop_unused(st, f);
    return status;
}

/* open_delegation4 of an OPEN reply: the delegation granted, or none (4.1
 * says why when the client asked for one). */
static void put_delegation(nfs4_cx_t *cx, const nfs4_stid_t *d, bool recall, uint32_t wants,
                           bool want_none)
{
    nfs_xdr_t *r = cx->r;
    if (!d) {
        if (cx->minor == 0 || !wants) {
            nfs_xdr_put_u32(r, OPEN_DELEGATE_NONE);
            return;
        }
        nfs_xdr_put_u32(r, OPEN_DELEGATE_NONE_EXT);
        nfs_xdr_put_u32(r, want_none ? WND4_NOT_WANTED : WND4_CONTENTION);
        if (!want_none) nfs_xdr_put_u32(r, 0);      /* no signal when it frees up */
        return;
    }
    bool write = d->access & OPEN4_SHARE_ACCESS_WRITE;
    nfs_xdr_put_u32(r, write ? OPEN_DELEGATE_WRITE : OPEN_DELEGATE_READ);
    nfs4_stateid_t w;
    nfs4_stid_to_wire(cx->st, d, &w);
    nfs4_put_stateid(r, &w);
    nfs_xdr_put_u32(r, recall);
    if (write) {
        nfs_xdr_put_u32(r, 1);                       /* NFS_LIMIT_SIZE: no limit */
        nfs_xdr_put_u64(r, UINT64_MAX);
    }
    /* An empty ACE: the client asks ACCESS as usual. */
    nfs_xdr_put_u32(r, 0);                           /* ACE4_ACCESS_ALLOWED_ACE_TYPE */
    nfs_xdr_put_u32(r, 0);
    nfs_xdr_put_u32(r, 0);
    nfs_xdr_put_u32(r, 0);                           /* who: "" */
}

/* OPEN4resok after the status (lock held). */
static void open_reply(nfs4_cx_t *cx, const open_req_t *q, nfs4_client_t *c, nfs4_owner_t *o,
                       nfs4_stid_t *s, const open_work_t *w)
{
    uint32_t rflags = OPEN4_RESULT_LOCKTYPE_POSIX;
    if (cx->minor >= 1) o->confirmed = true;
    else if (!o->confirmed) rflags |= OPEN4_RESULT_CONFIRM;
    cx->record_wait = nfs4_client_record(cx->st, c);   /* on disk before the reply */
    nfs4_put_stid(cx, s);
    nfs4_put_cinfo(cx->r, &w->wcc);
    nfs_xdr_put_u32(cx->r, rflags);
    nfs4_bitmap_put(cx->r, &w->attrset);
    bool recall = false;
    nfs4_stid_t *d = q->kind->deleg ? q->kind->deleg(cx, q, c, s, &recall) : NULL;
    put_delegation(cx, d, recall, q->want & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK,
                   wants_no_deleg(q));
}

/* Phase 3: the open state and the reply, under the state lock; the owner's
 * seqid is recorded whatever the status when it was ours to record. */
static uint32_t open_state(nfs4_cx_t *cx, const open_req_t *q, const open_seq_t *seq,
                           open_work_t *w, uint32_t status)
{
    nfs4_server_t *st = cx->st;
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c = NULL;
    nfs4_owner_t *o = NULL;
    if (status == NFS4_OK || seq->ours) {
        uint32_t cst = nfs4_client_of(cx, q->clientid, &c);
        if (cst == NFS4_OK) {
            o = nfs4_owner_find(c, false, q->oid, q->olen);
            if (!o && status == NFS4_OK && !(o = nfs4_owner_new(c, false, q->oid, q->olen)))
                status = NFS4ERR_RESOURCE;
        } else if (status == NFS4_OK) {
            status = cst;   /* the client went away meanwhile */
        }
    }
    if (status == NFS4_OK && cx->minor == 0 &&
        (o->have_seqid != seq->seen_have || o->seqid != seq->seen_seqid))
        status = NFS4ERR_BAD_SEQID;   /* a concurrent OPEN of the same owner got there first */
    nfs4_stid_t *s = NULL;
    if (status == NFS4_OK) status = open_reserve(cx, q, c, o, w->obj, &s);
    if (status == NFS4_OK) open_reply(cx, q, c, o, s, w);
    if (seq->ours) nfs4_seq_finish(cx, o, q->seqid, status);
    nfs4_unlock(st);
    return status;
}

/* ---------------------------------------------------------------- OPEN */

/* open_arguments4 (RFC 9754): one bitmap per argument of the values OPEN
 * takes; the claims come from open_claims[]. */
void nfs4_open_arguments_put(nfs_xdr_t *x, uint32_t minor)
{
    nfs4_bitmap_t access = { { 0 } }, deny = { { 0 } }, want = { { 0 } }, claims = { { 0 } },
                  modes = { { 0 } };
    for (unsigned v = OPEN4_SHARE_ACCESS_READ; v <= OPEN4_SHARE_ACCESS_BOTH; v++)
        nfs4_bm_set(&access, v);
    for (unsigned v = OPEN4_SHARE_DENY_NONE; v <= OPEN4_SHARE_DENY_BOTH; v++)
        nfs4_bm_set(&deny, v);
    /* OPEN_ARGS_SHARE_ACCESS_WANT_ANY_DELEG, _NO_DELEG, _CANCEL: the want
     * field's value (bits 8-15 of share_access). */
    for (unsigned v = 3; v <= 5; v++) nfs4_bm_set(&want, v);
    for (unsigned c = 0; c < sizeof open_claims / sizeof open_claims[0]; c++)
        if (open_claims[c].supported && (minor >= 1 || !open_claims[c].since_41))
            nfs4_bm_set(&claims, c);
    for (unsigned m = UNCHECKED4; m <= (minor >= 1 ? EXCLUSIVE4_1 : EXCLUSIVE4); m++)
        nfs4_bm_set(&modes, m);
    nfs4_bitmap_put(x, &access);
    nfs4_bitmap_put(x, &deny);
    nfs4_bitmap_put(x, &want);
    nfs4_bitmap_put(x, &claims);
    nfs4_bitmap_put(x, &modes);
}

uint32_t nfs4_op_open(nfs4_cx_t *cx)
{
    open_req_t q;
    memset(&q, 0, sizeof q);
    uint32_t status = open_decode(cx, &q);
    if (status) return status;

    open_seq_t seq = { 0 };
    status = open_admit(cx, &q, &seq);
    if (seq.replayed) {
        replay_set_fh(cx, &q);
        return status;
    }
    if (status == NFS4_OK) status = q.sattr_status != NFS4_OK ? q.sattr_status : q.name_status;

    open_work_t w;
    memset(&w, 0, sizeof w);
    if (status == NFS4_OK) status = open_find_file(cx, &q, &w);
    status = open_state(cx, &q, &seq, &w, status);

    if (status == NFS4_OK && w.obj != cx->cur.node) {
        zpl_node_rele(cx->cur.node);
        cx->cur.node = w.obj;
    } else if (w.obj) {
        zpl_node_rele(w.obj);
    }
    return status;
}
