/*
 * NFSv4.0 and 4.1 server (RFC 7530, RFC 8881): the COMPOUND procedure, file
 * handles, the pseudo-root, and the filesystem operations. Client, session,
 * open and lock operations live in nfs4_ops_state.c, the state tables in
 * nfs4_state.c, attributes in nfs4_attr.c.
 *
 * COMPOUND is decoded and executed one operation at a time with hand-written
 * XDR (nfs_xdr_t): each handler decodes its own arguments from the call and
 * appends its result body; the dispatcher writes the opcode and status around
 * it and stops at the first error, as the RFC requires. A 4.1 COMPOUND must
 * start with SEQUENCE (or be one of the session-less operations); its whole
 * reply is kept in the session slot so a retransmission gets the same bytes.
 *
 * A COMPOUND of operations that only read (nfs4_op_reads_only: handles,
 * lookups, attributes, ACCESS, READLINK, READ) may run on the transport's I/O
 * thread with memory_only (nfs_impl.h), in the SPA's memory-only mode: READ
 * uses zpl_read_spans (memory_only), a block any operation would read from a
 * device is refused below the ZPL, and so is the pool's dataset lock while a
 * txg sync holds it (dsl_pool_lock; the space attributes take it). A read
 * that would wait (a
 * record on disk, a due atime), a refusal or any other operation sets
 * would_block and the compound stops with nothing sent; a worker runs it
 * again. A 4.1 COMPOUND's SEQUENCE takes its slot tentatively there and gives
 * it back unchanged when the compound goes to a worker (nfs4_slot_undo). Only
 * idempotent things happen before that (lease reaping and renewal, handle
 * lookups), never a seqid or slot change that stays.
 *
 * File handles: real objects use the ZPL's handles (export guid, dataset,
 * object, generation), so they stay valid across restarts. The pseudo-root
 * is a virtual read-only tree whose leaves are the export paths (`/tank/share`
 * gives the directories `/` and `/tank`); its handles are a fixed magic plus a
 * hash of the path, recomputed from the export list when presented, so they
 * too survive restarts and die when no export lies under them any more.
 * Crossing from a pseudo directory into an export yields the export's root
 * with the dataset's fsid, so clients see a filesystem boundary there.
 *
 * Permissions: the ZPL checks no mode bits, so every operation checks them
 * here with the export's effective credential (after squashing) through
 * zpl_access(), which grants root read/write; writes to a read-only export or
 * a snapshot get NFS4ERR_ROFS. Metadata changes are made durable before the
 * reply (zpl_commit) unless the dataset has sync=disabled.
 */
#include "nfs4_compound.h"
#include "nfs_srv.h"

#include <cairn/log.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define NFS4_MAX_OPS_40 128
#define PSEUDO_MAGIC "CAIRNv4PSEUDOFH!"
#define PSEUDO_MAGIC_LEN 16
#define PSEUDO_FH_LEN (PSEUDO_MAGIC_LEN + 8)
#define PSEUDO_FSID_MAJOR 0x4341524eull   /* "CARN" */
#define PSEUDO_FSID_MINOR 0x50534555ull

enum {
    ACCESS4_READ = 1, ACCESS4_LOOKUP = 2, ACCESS4_MODIFY = 4, ACCESS4_EXTEND = 8,
    ACCESS4_DELETE = 0x10, ACCESS4_EXECUTE = 0x20,
    /* RFC 8276, minor version 2: extended attributes */
    ACCESS4_XAREAD = 0x40, ACCESS4_XAWRITE = 0x80, ACCESS4_XALIST = 0x100,
};

/* ---------------------------------------------------------------- entry points */

int nfs4_init(nfs_server_t *srv, void **state)
{
    uint32_t lease = srv->cfg.lease_seconds ? srv->cfg.lease_seconds : NFS_DEFAULT_LEASE_S;
    uint32_t grace = srv->cfg.grace_seconds ? srv->cfg.grace_seconds : lease;
    nfs4_server_t *st = nfs4_server_new(srv, nfs_server_state_dir(srv), lease, grace);
    if (!st) return -ENOMEM;
    st->delegations = !srv->cfg.no_delegations;
    int rc = nfs4_cb_start(st);
    if (rc < 0) {
        nfs4_server_free(st);
        return rc;
    }
    *state = st;
    return 0;
}

void nfs4_fini(void *state)
{
    if (!state) return;
    nfs4_cb_stop(state);
    nfs4_server_free(state);
}

void nfs4_export_removed(void *state, nfs_export_t *exp)
{
    nfs4_server_t *st = state;
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    nfs4_drop_export(st, exp);
    nfs4_unlock(st);
}

/* ---------------------------------------------------------------- small helpers */

void nfs4_put_stateid(nfs_xdr_t *x, const nfs4_stateid_t *s)
{
    nfs_xdr_put_u32(x, s->seqid);
    nfs_xdr_put_fixed(x, s->other, 12);
}

void nfs4_get_stateid(nfs_xdr_t *x, nfs4_stateid_t *s)
{
    s->seqid = nfs_xdr_get_u32(x);
    const uint8_t *p = nfs_xdr_get_fixed(x, 12);
    if (p) memcpy(s->other, p, 12);
    else memset(s->other, 0, 12);
}

void nfs4_put_cinfo(nfs_xdr_t *x, const zpl_wcc_t *wcc)
{
    nfs_xdr_put_u32(x, 1);   /* atomic: the ZPL takes both values with the change */
    nfs_xdr_put_u64(x, wcc->pre_change);
    nfs_xdr_put_u64(x, wcc->post.change);
}

uint32_t nfs4_resolve_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid)
{
    if (cx->minor >= 1 && nfs4_stateid_is_current(sid)) {
        if (!cx->have_cur_sid) return NFS4ERR_BAD_STATEID;
        *sid = cx->cur_sid;
    }
    return NFS4_OK;
}

uint32_t nfs4_arg_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid)
{
    nfs4_get_stateid(cx->a, sid);
    if (cx->a->err) return NFS4ERR_BADXDR;
    return nfs4_resolve_stateid(cx, sid);
}

uint32_t nfs4_arg_file_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid)
{
    uint32_t status = nfs4_arg_stateid(cx, sid);
    return status == NFS4_OK ? nfs4_need_real_file(cx) : status;
}

void nfs4_set_cur_stateid(nfs4_cx_t *cx, const nfs4_stateid_t *sid)
{
    cx->cur_sid = *sid;
    cx->have_cur_sid = true;
}

static uint64_t fnv64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* A pseudo directory's fileid: well away from real object numbers. */
static uint64_t pseudo_fileid(const char *path)
{
    return (fnv64(path) | 0x8000000000000000ull) & ~0xffull;
}

uint32_t nfs4_name_get(nfs4_cx_t *cx, char *name)
{
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(cx->a, &len, 4096);
    if (cx->a->err) return NFS4ERR_BADXDR;
    if (len == 0) return NFS4ERR_INVAL;
    if (len > ZPL_NAME_MAX) return NFS4ERR_NAMETOOLONG;
    for (uint32_t i = 0; i < len; i++)
        if (p[i] == '/' || p[i] == 0) return NFS4ERR_BADCHAR;
    memcpy(name, p, len);
    name[len] = 0;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return NFS4ERR_BADNAME;
    return NFS4_OK;
}

/* ---------------------------------------------------------------- current fh */

void nfs4_cfh_clear(nfs4_cfh_t *f)
{
    if (f->kind == NFS4_FH_REAL) {
        zpl_node_rele(f->node);
        nfs_export_rele(f->exp);
    }
    f->kind = NFS4_FH_NONE;
    f->node = NULL;
    f->exp = NULL;
}

/* Takes over the references to exp and node. */
void nfs4_cfh_set_real(nfs4_cfh_t *f, nfs_export_t *exp, zpl_node_t *node,
                       const zpl_cred_t *cred, bool writable)
{
    nfs4_cfh_clear(f);
    f->kind = NFS4_FH_REAL;
    f->exp = exp;
    f->node = node;
    f->cred = *cred;
    f->writable = writable;
}

static void cfh_set_pseudo(nfs4_cfh_t *f, const char *path)
{
    nfs4_cfh_clear(f);
    f->kind = NFS4_FH_PSEUDO;
    snprintf(f->path, sizeof f->path, "%s", path);
}

static void cfh_copy(nfs4_cfh_t *dst, const nfs4_cfh_t *src)
{
    if (dst == src) return;
    nfs4_cfh_clear(dst);
    *dst = *src;
    if (src->kind == NFS4_FH_REAL) {
        nfs_export_hold(src->exp);
        zpl_node_hold(src->node);
    }
}

static uint32_t cfh_encode(const nfs4_cfh_t *f, uint8_t *buf, uint32_t *len)
{
    if (f->kind == NFS4_FH_PSEUDO) {
        memcpy(buf, PSEUDO_MAGIC, PSEUDO_MAGIC_LEN);
        uint64_t h = fnv64(f->path);
        for (int i = 0; i < 8; i++) buf[PSEUDO_MAGIC_LEN + i] = (uint8_t)(h >> (56 - 8 * i));
        *len = PSEUDO_FH_LEN;
        return NFS4_OK;
    }
    zpl_fh_t fh;
    int rc = zpl_fh_encode(f->node, &fh);
    if (rc < 0) return nfs4_errno_to_status(rc);
    memcpy(buf, fh.bytes, ZPL_FH_SIZE);
    *len = ZPL_FH_SIZE;
    return NFS4_OK;
}

/* ---------------------------------------------------------------- pseudo-root */

/* a is a proper ancestor of b ("/" of everything but itself). */
static bool path_is_ancestor(const char *a, const char *b)
{
    if (!strcmp(a, "/")) return b[0] == '/' && b[1] != 0;
    size_t n = strlen(a);
    return !strncmp(a, b, n) && b[n] == '/';
}

typedef struct pseudo_probe {
    const char *path;
    bool is_dir;            /* an export lies below path */
    bool is_export;         /* path is an export */
    bool under_export;      /* path lies inside an export */
} pseudo_probe_t;

static int probe_cb(nfs_export_t *exp, void *arg)
{
    pseudo_probe_t *p = arg;
    const char *ep = nfs_export_path(exp);
    if (!strcmp(ep, p->path)) p->is_export = true;
    else if (path_is_ancestor(p->path, ep)) p->is_dir = true;
    else if (path_is_ancestor(ep, p->path)) p->under_export = true;
    return 0;
}

typedef enum { PSEUDO_NONE, PSEUDO_DIR, PSEUDO_EXPORT } pseudo_kind_t;

static pseudo_kind_t pseudo_kind(nfs_server_t *srv, const char *path)
{
    pseudo_probe_t p = { .path = path };
    nfs_export_foreach(srv, probe_cb, &p);
    if (p.is_export) return PSEUDO_EXPORT;
    if (p.under_export) return PSEUDO_NONE;
    if (p.is_dir || !strcmp(path, "/")) return PSEUDO_DIR;
    return PSEUDO_NONE;
}

typedef struct hash_find {
    uint64_t hash;
    char path[NFS4_PSEUDO_PATH_MAX];
    bool found;
} hash_find_t;

static int hash_cb(nfs_export_t *exp, void *arg)
{
    hash_find_t *h = arg;
    const char *ep = nfs_export_path(exp);
    char buf[NFS4_PSEUDO_PATH_MAX];
    if (fnv64("/") == h->hash) { strcpy(h->path, "/"); h->found = true; return 1; }
    /* Each proper ancestor of the export path. */
    for (size_t i = 1; ep[i] && i < sizeof buf; i++) {
        if (ep[i] != '/') continue;
        memcpy(buf, ep, i);
        buf[i] = 0;
        if (fnv64(buf) == h->hash) {
            strcpy(h->path, buf);
            h->found = true;
            return 1;
        }
    }
    return 0;
}

/* Whether the caller may use exp (its credentials in *eff): NFS4_OK, or the
 * refusal with exp released. */
static uint32_t authorize_export(nfs4_cx_t *cx, nfs_export_t *exp, zpl_cred_t *eff, bool *writable)
{
    int arc = nfs_export_authorize(exp, cx->call, eff, writable);
    if (arc >= 0) return NFS4_OK;
    nfs_export_rele(exp);
    return arc == -EPERM ? NFS4ERR_PERM : NFS4ERR_ACCESS; /* PERM: secure, high port */
}

/* Makes f the root of export path, if the client may use it. */
static uint32_t enter_export(nfs4_cx_t *cx, nfs4_cfh_t *f, const char *path)
{
    nfs_export_t *exp;
    /* Never wait here: a COMPOUND of lookups may run on the I/O thread. */
    int found = nfs_export_lookup_path(cx->call->srv, path, false, &exp);
    if (found) return found == -EAGAIN ? NFS4ERR_DELAY : NFS4ERR_NOENT;
    zpl_cred_t eff;
    bool writable = false;
    uint32_t st = authorize_export(cx, exp, &eff, &writable);
    if (st != NFS4_OK) return st;
    zpl_node_t *root;
    int rc = zpl_root(nfs_export_fs(exp), &root);
    if (rc < 0) {
        nfs_export_rele(exp);
        return nfs4_errno_to_status(rc);
    }
    nfs4_cfh_set_real(f, exp, root, &eff, writable);
    return NFS4_OK;
}

/* Goes to path in the pseudo tree (a pseudo directory or an export root). */
static uint32_t goto_path(nfs4_cx_t *cx, nfs4_cfh_t *f, const char *path)
{
    switch (pseudo_kind(cx->call->srv, path)) {
    case PSEUDO_DIR: cfh_set_pseudo(f, path); return NFS4_OK;
    case PSEUDO_EXPORT: return enter_export(cx, f, path);
    default: return NFS4ERR_NOENT;
    }
}

static bool is_export_root(nfs4_cfh_t *f)
{
    if (f->kind != NFS4_FH_REAL || zpl_node_fs(f->node) != nfs_export_fs(f->exp)) return false;
    zpl_node_t *root;
    if (zpl_root(nfs_export_fs(f->exp), &root) < 0) return false;
    bool same = zpl_node_ino(root) == zpl_node_ino(f->node);
    zpl_node_rele(root);
    return same;
}

static void parent_path(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash || slash == out) strcpy(out, "/");
    else *slash = 0;
}

/* dir + "/" + name; an over-long result becomes "" (which names nothing). */
static void child_path(const char *dir, const char *name, char *out, size_t cap)
{
    size_t dl = strcmp(dir, "/") ? strlen(dir) : 0, nl = strlen(name);
    if (dl + 1 + nl + 1 > cap) {
        out[0] = 0;
        return;
    }
    memcpy(out, dir, dl);
    out[dl] = '/';
    memcpy(out + dl + 1, name, nl + 1);
}

typedef struct pseudo_children {
    nfs4_cx_t *cx;
    const char *dir;
    char (*names)[ZPL_NAME_MAX + 1];
    size_t n, cap;
} pseudo_children_t;

static int children_cb(nfs_export_t *exp, void *arg)
{
    pseudo_children_t *pc = arg;
    const char *ep = nfs_export_path(exp);
    if (!path_is_ancestor(pc->dir, ep)) return 0;
    zpl_cred_t eff;
    bool w;
    if (nfs_export_authorize(exp, pc->cx->call, &eff, &w) < 0) return 0;
    const char *rest = ep + (strcmp(pc->dir, "/") ? strlen(pc->dir) + 1 : 1);
    size_t len = strcspn(rest, "/");
    if (len == 0 || len > ZPL_NAME_MAX) return 0;
    for (size_t i = 0; i < pc->n; i++)
        if (strlen(pc->names[i]) == len && !strncmp(pc->names[i], rest, len)) return 0;
    if (pc->n == pc->cap) {
        size_t cap = pc->cap ? pc->cap * 2 : 8;
        void *v = realloc(pc->names, cap * sizeof *pc->names);
        if (!v) return -ENOMEM;
        pc->names = v;
        pc->cap = cap;
    }
    memcpy(pc->names[pc->n], rest, len);
    pc->names[pc->n][len] = 0;
    pc->n++;
    return 0;
}

static void pseudo_attr(const char *path, uint64_t change, zpl_attr_t *a)
{
    memset(a, 0, sizeof *a);
    a->mode = S_IFDIR | 0555;
    a->nlink = 2;
    a->size = 4096;
    a->blksize = 4096;
    a->ino = pseudo_fileid(path);
    a->change = change;
}

static uint64_t pseudo_change(nfs4_cx_t *cx, const char *path)
{
    pseudo_children_t pc = { .cx = cx, .dir = path };
    nfs_export_foreach(cx->call->srv, children_cb, &pc);
    uint64_t h = 1;
    for (size_t i = 0; i < pc.n; i++) h = h * 31 + fnv64(pc.names[i]);
    free(pc.names);
    return h;
}

/* ---------------------------------------------------------------- fh decoding */

static uint32_t fh_decode(nfs4_cx_t *cx, const uint8_t *buf, uint32_t len, nfs4_cfh_t *f)
{
    if (len == PSEUDO_FH_LEN && !memcmp(buf, PSEUDO_MAGIC, PSEUDO_MAGIC_LEN)) {
        hash_find_t h = { 0 };
        for (int i = 0; i < 8; i++) h.hash = h.hash << 8 | buf[PSEUDO_MAGIC_LEN + i];
        if (h.hash == fnv64("/")) {
            strcpy(h.path, "/");
            h.found = true;
        } else {
            nfs_export_foreach(cx->call->srv, hash_cb, &h);
        }
        if (!h.found || pseudo_kind(cx->call->srv, h.path) != PSEUDO_DIR) return NFS4ERR_STALE;
        cfh_set_pseudo(f, h.path);
        return NFS4_OK;
    }
    uint64_t guid;
    if (zpl_fh_export_guid(buf, len, &guid) < 0) return NFS4ERR_BADHANDLE;
    nfs_export_t *exp;
    int found = nfs_export_lookup_fh(cx->call->srv, buf, len, &exp);
    if (found) return found == -EAGAIN ? NFS4ERR_DELAY : NFS4ERR_STALE;
    zpl_cred_t eff;
    bool writable = false;
    uint32_t st = authorize_export(cx, exp, &eff, &writable);
    if (st != NFS4_OK) return st;
    zpl_node_t *node;
    int rc = zpl_fh_to_inode(nfs_export_fs(exp), buf, len, &node);
    if (rc < 0) {
        nfs_export_rele(exp);
        return rc == -EINVAL ? NFS4ERR_BADHANDLE : nfs4_errno_to_status(rc);
    }
    nfs4_cfh_set_real(f, exp, node, &eff, writable);
    return NFS4_OK;
}

/* ---------------------------------------------------------------- checks */

static uint32_t need_fh(nfs4_cx_t *cx)
{
    return cx->cur.kind == NFS4_FH_NONE ? NFS4ERR_NOFILEHANDLE : NFS4_OK;
}

static uint32_t node_type_status(zpl_node_t *n, uint32_t *mode)
{
    zpl_attr_t a;
    int rc = zpl_getattr(n, &a);
    if (rc < 0) return nfs4_errno_to_status(rc);
    *mode = a.mode;
    return NFS4_OK;
}

/* A real file handle (f) names a directory: NOTDIR (SYMLINK for a link). */
static uint32_t cfh_need_dir(nfs4_cfh_t *f)
{
    uint32_t mode, st = node_type_status(f->node, &mode);
    if (st) return st;
    if (S_ISLNK(mode)) return NFS4ERR_SYMLINK;
    if (!S_ISDIR(mode)) return NFS4ERR_NOTDIR;
    return NFS4_OK;
}

/* The current fh must be a directory (pseudo ones count when allow_pseudo). */
static uint32_t need_dir(nfs4_cx_t *cx, bool allow_pseudo)
{
    if (cx->cur.kind == NFS4_FH_NONE) return NFS4ERR_NOFILEHANDLE;
    if (cx->cur.kind == NFS4_FH_PSEUDO) return allow_pseudo ? NFS4_OK : NFS4ERR_ROFS;
    return cfh_need_dir(&cx->cur);
}

uint32_t nfs4_need_real_file(nfs4_cx_t *cx)
{
    if (cx->cur.kind == NFS4_FH_NONE) return NFS4ERR_NOFILEHANDLE;
    if (cx->cur.kind == NFS4_FH_PSEUDO) return NFS4ERR_ISDIR;
    uint32_t mode, st = node_type_status(cx->cur.node, &mode);
    if (st) return st;
    if (S_ISDIR(mode)) return NFS4ERR_ISDIR;
    if (S_ISLNK(mode)) return cx->minor >= 1 ? NFS4ERR_SYMLINK : NFS4ERR_INVAL;
    if (!S_ISREG(mode)) return cx->minor >= 1 ? NFS4ERR_WRONG_TYPE : NFS4ERR_INVAL;
    return NFS4_OK;
}

uint32_t nfs4_perm(nfs4_cfh_t *f, zpl_node_t *n, uint32_t want)
{
    uint32_t granted = 0;
    int rc = zpl_access(n, &f->cred, want, &granted);
    if (rc < 0) return nfs4_errno_to_status(rc);
    return (granted & want) == want ? NFS4_OK : NFS4ERR_ACCESS;
}

/* The owner may read and write a file he opened whatever its mode says (he
 * was checked at OPEN time, or owns it), as a local fd would allow. */
static uint32_t perm_owner_override(nfs4_cfh_t *f, uint32_t want)
{
    zpl_attr_t a;
    int rc = zpl_getattr(f->node, &a);
    if (rc < 0) return nfs4_errno_to_status(rc);
    if (a.uid == f->cred.uid) return NFS4_OK;
    return nfs4_perm(f, f->node, want);
}

static uint32_t need_writable(nfs4_cfh_t *f)
{
    if (f->kind != NFS4_FH_REAL) return NFS4ERR_ROFS;
    if (!f->writable || zpl_fs_readonly(zpl_node_fs(f->node))) return NFS4ERR_ROFS;
    return NFS4_OK;
}

uint32_t nfs4_need_writable(nfs4_cfh_t *f) { return need_writable(f); }
uint32_t nfs4_owner_perm(nfs4_cfh_t *f, uint32_t want) { return perm_owner_override(f, want); }

uint32_t nfs4_durable(nfs4_cfh_t *f)
{
    if (f->kind != NFS4_FH_REAL || nfs_export_sync_disabled(f->exp)) return NFS4_OK;
    int rc = zpl_commit(zpl_node_fs(f->node));
    return rc < 0 ? nfs4_errno_to_status(rc) : NFS4_OK;
}

/* ---------------------------------------------------------------- attributes */

static bool wants_statfs(const nfs4_bitmap_t *req)
{
    static const unsigned bits[] = { FATTR4_FILES_AVAIL, FATTR4_FILES_FREE, FATTR4_FILES_TOTAL,
                                     FATTR4_SPACE_AVAIL, FATTR4_SPACE_FREE, FATTR4_SPACE_TOTAL };
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (nfs4_bm_isset(req, bits[i])) return true;
    return false;
}

/* Attributes of a real node; root_path is the export path when node is the
 * export's root (its mounted_on_fileid is the pseudo directory's). */
static uint32_t attr_src_real(nfs4_cx_t *cx, nfs4_cfh_t *f, zpl_node_t *n, bool is_root,
                              const nfs4_bitmap_t *req, nfs4_attr_src_t *src, uint8_t *fhbuf)
{
    memset(src, 0, sizeof *src);
    src->minor = cx->minor;
    src->lease_time = cx->st->lease;
    int rc = zpl_getattr(n, &src->a);
    if (rc < 0) return nfs4_errno_to_status(rc);
    src->fsid_major = src->a.fsid;
    src->fsid_minor = 0;
    src->mounted_on_fileid = src->a.ino;
    if (is_root) src->mounted_on_fileid = pseudo_fileid(nfs_export_path(f->exp));
    if (wants_statfs(req) && zpl_statfs(zpl_node_fs(n), &src->sfs) == 0) src->have_statfs = true;
    if (nfs4_bm_isset(req, FATTR4_FILEHANDLE)) {
        zpl_fh_t fh;
        if (zpl_fh_encode(n, &fh) == 0) {
            memcpy(fhbuf, fh.bytes, ZPL_FH_SIZE);
            src->fh = fhbuf;
            src->fh_len = ZPL_FH_SIZE;
        }
    }
    return NFS4_OK;
}

static void attr_src_pseudo(nfs4_cx_t *cx, const char *path, nfs4_attr_src_t *src,
                            uint8_t *fhbuf)
{
    memset(src, 0, sizeof *src);
    src->minor = cx->minor;
    src->lease_time = cx->st->lease;
    pseudo_attr(path, pseudo_change(cx, path), &src->a);
    src->fsid_major = PSEUDO_FSID_MAJOR;
    src->fsid_minor = PSEUDO_FSID_MINOR;
    src->mounted_on_fileid = src->a.ino;
    nfs4_cfh_t tmp = { .kind = NFS4_FH_PSEUDO };
    snprintf(tmp.path, sizeof tmp.path, "%s", path);
    uint32_t len;
    cfh_encode(&tmp, fhbuf, &len);
    src->fh = fhbuf;
    src->fh_len = len;
}

static uint32_t attr_src_cur(nfs4_cx_t *cx, const nfs4_bitmap_t *req, nfs4_attr_src_t *src,
                             uint8_t *fhbuf)
{
    if (cx->cur.kind == NFS4_FH_PSEUDO) {
        attr_src_pseudo(cx, cx->cur.path, src, fhbuf);
        return NFS4_OK;
    }
    return attr_src_real(cx, &cx->cur, cx->cur.node, is_export_root(&cx->cur), req, src, fhbuf);
}

/* ---------------------------------------------------------------- operations */

static uint32_t op_putfh(nfs4_cx_t *cx)
{
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(cx->a, &len, NFS4_FHSIZE);
    if (cx->a->err) return NFS4ERR_BADXDR;
    nfs4_cfh_t f = { 0 };
    uint32_t st = fh_decode(cx, p, len, &f);
    if (st) return st;
    nfs4_cfh_clear(&cx->cur);
    cx->cur = f;
    return NFS4_OK;
}

static uint32_t op_putrootfh(nfs4_cx_t *cx)
{
    cfh_set_pseudo(&cx->cur, "/");
    return NFS4_OK;
}

static uint32_t op_getfh(nfs4_cx_t *cx)
{
    uint32_t st = need_fh(cx);
    if (st) return st;
    uint8_t buf[NFS4_FHSIZE];
    uint32_t len;
    if ((st = cfh_encode(&cx->cur, buf, &len))) return st;
    nfs_xdr_put_opaque(cx->r, buf, len);
    return NFS4_OK;
}

static uint32_t op_savefh(nfs4_cx_t *cx)
{
    uint32_t st = need_fh(cx);
    if (st) return st;
    cfh_copy(&cx->saved, &cx->cur);
    return NFS4_OK;
}

static uint32_t op_restorefh(nfs4_cx_t *cx)
{
    if (cx->saved.kind == NFS4_FH_NONE) return NFS4ERR_RESTOREFH;
    cfh_copy(&cx->cur, &cx->saved);
    return NFS4_OK;
}

static uint32_t op_lookup(nfs4_cx_t *cx)
{
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = nfs4_name_get(cx, name);
    if (st == NFS4_OK) st = need_dir(cx, true);
    if (st) return st;
    char path[NFS4_PSEUDO_PATH_MAX];
    if (cx->cur.kind == NFS4_FH_PSEUDO) {
        child_path(cx->cur.path, name, path, sizeof path);
        return goto_path(cx, &cx->cur, path);
    }
    if ((st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_EXEC))) return st;
    if (is_export_root(&cx->cur)) {
        /* An export nested directly below this one shadows the directory. */
        child_path(nfs_export_path(cx->cur.exp), name, path, sizeof path);
        if (pseudo_kind(cx->call->srv, path) == PSEUDO_EXPORT) return enter_export(cx, &cx->cur, path);
    }
    zpl_node_t *n;
    int rc = zpl_lookup(cx->cur.node, name, &n);
    if (rc < 0) return nfs4_errno_to_status(rc);
    zpl_node_rele(cx->cur.node);
    cx->cur.node = n;
    return NFS4_OK;
}

static uint32_t op_lookupp(nfs4_cx_t *cx)
{
    uint32_t st = need_dir(cx, true);
    if (st) return st;
    char path[NFS4_PSEUDO_PATH_MAX];
    if (cx->cur.kind == NFS4_FH_PSEUDO) {
        if (!strcmp(cx->cur.path, "/")) return NFS4ERR_NOENT;
        parent_path(cx->cur.path, path, sizeof path);
        return goto_path(cx, &cx->cur, path);
    }
    if (is_export_root(&cx->cur)) {
        parent_path(nfs_export_path(cx->cur.exp), path, sizeof path);
        return goto_path(cx, &cx->cur, path);
    }
    zpl_node_t *n;
    int rc = zpl_lookup(cx->cur.node, "..", &n);
    if (rc < 0) return nfs4_errno_to_status(rc);
    zpl_node_rele(cx->cur.node);
    cx->cur.node = n;
    return NFS4_OK;
}

/* time_access_set and time_modify_set can only be written: asking to read
 * or compare them is NFS4ERR_INVAL (RFC 7530 5.5, 16.7.5, 16.24.5). */
static bool asks_write_only(const nfs4_bitmap_t *req)
{
    return nfs4_bm_isset(req, FATTR4_TIME_ACCESS_SET) ||
           nfs4_bm_isset(req, FATTR4_TIME_MODIFY_SET);
}

static uint32_t op_getattr(nfs4_cx_t *cx)
{
    nfs4_bitmap_t req;
    nfs4_bitmap_get(cx->a, &req, NULL);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = need_fh(cx);
    if (st) return st;
    if (asks_write_only(&req)) return NFS4ERR_INVAL;
    nfs4_attr_src_t src;
    uint8_t fhbuf[NFS4_FHSIZE];
    if ((st = attr_src_cur(cx, &req, &src, fhbuf))) return st;
    if ((st = nfs4_deleg_getattr(cx, &req, &src.a))) return st;
    nfs4_fattr_encode(cx->r, &src, &req);
    return NFS4_OK;
}

static uint32_t op_access(nfs4_cx_t *cx)
{
    uint32_t want = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = need_fh(cx);
    if (st) return st;
    uint32_t all = ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_MODIFY | ACCESS4_EXTEND |
                   ACCESS4_DELETE | ACCESS4_EXECUTE;
    if (cx->minor >= 2) all |= ACCESS4_XAREAD | ACCESS4_XAWRITE | ACCESS4_XALIST;
    /* Only the bits meaningful for the object's type are supported: LOOKUP
     * and DELETE for directories, EXECUTE for the rest (RFC 7530 16.1.4). */
    bool dir = cx->cur.kind == NFS4_FH_PSEUDO;
    zpl_attr_t a;
    if (!dir) {
        int rc = zpl_getattr(cx->cur.node, &a);
        if (rc < 0) return nfs4_errno_to_status(rc);
        dir = S_ISDIR(a.mode);
    }
    all &= dir ? ~(uint32_t)ACCESS4_EXECUTE : ~(uint32_t)(ACCESS4_LOOKUP | ACCESS4_DELETE);
    uint32_t supported = want & all, granted = 0;
    if (cx->cur.kind == NFS4_FH_PSEUDO) {
        granted = supported & (ACCESS4_READ | ACCESS4_LOOKUP | ACCESS4_EXECUTE |
                               ACCESS4_XAREAD | ACCESS4_XALIST);
    } else {
        uint32_t g = 0;
        int rc = zpl_access(cx->cur.node, &cx->cur.cred,
                        ZPL_ACCESS_READ | ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC, &g);
        if (rc < 0) return nfs4_errno_to_status(rc);
        bool w = (g & ZPL_ACCESS_WRITE) && need_writable(&cx->cur) == NFS4_OK;
        if (g & ZPL_ACCESS_READ) granted |= ACCESS4_READ | ACCESS4_XAREAD | ACCESS4_XALIST;
        if (w) granted |= ACCESS4_XAWRITE;
        if (dir) {
            if (g & ZPL_ACCESS_EXEC) granted |= ACCESS4_LOOKUP;
            if (w) granted |= ACCESS4_MODIFY | ACCESS4_EXTEND | ACCESS4_DELETE;
        } else {
            if (w) granted |= ACCESS4_MODIFY | ACCESS4_EXTEND;
            if (g & ZPL_ACCESS_EXEC) granted |= ACCESS4_EXECUTE;
        }
        granted &= supported;
    }
    nfs_xdr_put_u32(cx->r, supported);
    nfs_xdr_put_u32(cx->r, granted);
    return NFS4_OK;
}

/* How many bytes the reply may still grow by once overhead more are in: what
 * the 4.1 session allows (reply_size_status), unlimited without a session. */
static size_t reply_room(const nfs4_cx_t *cx, size_t overhead)
{
    if (!cx->have_session) return SIZE_MAX;
    size_t used = cx->r->pos - cx->start + overhead;
    return used >= cx->reply_limit ? 0 : cx->reply_limit - used;
}

static uint32_t op_read(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    uint64_t off = nfs_xdr_get_u64(cx->a);
    uint32_t count = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = nfs4_need_real_file(cx);
    if (st) return st;
    bool via_open = false;
    if ((st = nfs4_check_io_stateid(cx, &sid, false, &via_open))) return st;
    if (!via_open && (st = perm_owner_override(&cx->cur, ZPL_ACCESS_READ))) return st;
    if (count > NFS4_MAX_IO) count = NFS4_MAX_IO;
    /* A short read rather than a reply past the session's size (eof, count,
     * and the data's padding come with it). */
    count = (uint32_t)CAIRN_MIN((size_t)count, reply_room(cx, 8 + 3));
    size_t start = cx->r->pos;
    uint8_t *p = nfs_xdr_reserve(cx->r, 8 + (size_t)count + 3);
    if (!p) return NFS4ERR_RESOURCE;
    size_t nread = 0;
    bool eof = false;
    /* ARC records are lent to the reply, not copied (nfs_xdr_lend). */
    cairn_span_t sv[NFS_READ_SPANS];
    cairn_spans_t spans = {.v = sv, .cap = NFS_READ_SPANS};
    int rc = zpl_read_spans(cx->cur.node, off, count, p + 8, &nread, &eof, cx->call->memory_only,
                            &spans);
    if (rc == -EWOULDBLOCK && cx->call->memory_only) {
        cx->call->would_block = true; /* compound() stops; a worker runs it again */
        nfs_xdr_truncate(cx->r, start);
        return NFS4_OK;
    }
    if (rc < 0) {
        nfs_xdr_truncate(cx->r, start);
        return nfs4_errno_to_status(rc);
    }
    cx->call->stat_read_bytes += nread;
    nfs_stats_file(cx->call, cx->cur.exp, cx->cur.node);
    /* The reserve may have moved nothing, but re-derive p after it anyway. */
    p = cx->r->buf + start;
    uint32_t v[2] = { eof, (uint32_t)nread };
    for (int i = 0; i < 2; i++) {
        p[4 * i] = (uint8_t)(v[i] >> 24);
        p[4 * i + 1] = (uint8_t)(v[i] >> 16);
        p[4 * i + 2] = (uint8_t)(v[i] >> 8);
        p[4 * i + 3] = (uint8_t)v[i];
    }
    size_t padded = (nread + 3) & ~(size_t)3;
    memset(p + 8 + nread, 0, padded - nread);
    cx->r->pos = cx->r->len = start + 8 + padded;
    nfs_xdr_lend(cx->r, start + 8, &spans);
    return NFS4_OK;
}

static void put_verifier(nfs_xdr_t *x, uint64_t v)
{
    nfs_xdr_put_u64(x, v);
}

static uint32_t op_write(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    uint64_t off = nfs_xdr_get_u64(cx->a);
    uint32_t stable = nfs_xdr_get_u32(cx->a);
    uint32_t len;
    const uint8_t *data = nfs_xdr_get_opaque(cx->a, &len, NFS4_MAX_IO + 65536);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = nfs4_need_real_file(cx);
    if (st) return st;
    if ((st = need_writable(&cx->cur))) return st;
    bool via_open = false;
    if ((st = nfs4_check_io_stateid(cx, &sid, true, &via_open))) return st;
    /* Even through an open stateid: another user's credential does not
     * write with an opener's stateid (the owner always may, as in NFSv3). */
    if ((st = perm_owner_override(&cx->cur, ZPL_ACCESS_WRITE))) return st;
    if (stable > 2) return NFS4ERR_INVAL;
    /* Writing nothing changes nothing, time_modify included. */
    int rc = len ? zpl_write(cx->cur.node, off, len, data, stable ? ZPL_IO_SYNC : 0, NULL) : 0;
    if (rc < 0) return nfs4_errno_to_status(rc);
    cx->call->stat_write_bytes += len;
    nfs_stats_file(cx->call, cx->cur.exp, cx->cur.node);
    nfs_xdr_put_u32(cx->r, len);
    nfs_xdr_put_u32(cx->r, stable ? 2 /* FILE_SYNC4 */ : 0);
    put_verifier(cx->r, nfs_server_write_verifier(cx->call->srv));
    return NFS4_OK;
}

static uint32_t op_commit(nfs4_cx_t *cx)
{
    (void)nfs_xdr_get_u64(cx->a);
    (void)nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = nfs4_need_real_file(cx);
    if (st) return st;
    int rc = zpl_fsync(cx->cur.node);
    if (rc < 0) return nfs4_errno_to_status(rc);
    put_verifier(cx->r, nfs_server_write_verifier(cx->call->srv));
    return NFS4_OK;
}

static uint32_t op_readlink(nfs4_cx_t *cx)
{
    uint32_t st = need_fh(cx);
    if (st) return st;
    if (cx->cur.kind == NFS4_FH_PSEUDO) return NFS4ERR_INVAL;
    uint32_t mode;
    if ((st = node_type_status(cx->cur.node, &mode))) return st;
    if (!S_ISLNK(mode)) return NFS4ERR_INVAL;   /* directories too (RFC 7530 16.25.5) */
    char buf[ZPL_SYMLINK_MAX + 1];
    size_t len = 0;
    int rc = zpl_readlink(cx->cur.node, buf, sizeof buf, &len);
    if (rc < 0) return nfs4_errno_to_status(rc);
    if (len > ZPL_SYMLINK_MAX) return NFS4ERR_SERVERFAULT;
    nfs_xdr_put_opaque(cx->r, buf, (uint32_t)len);
    return NFS4_OK;
}

/* Applies attributes after a create (owner, group, times); mode went in at create. */
static uint32_t apply_create_attrs(nfs4_cfh_t *dir, zpl_node_t *n, nfs4_sattr_t *sa,
                                   nfs4_bitmap_t *attrset, bool mode_applied)
{
    memset(attrset, 0, sizeof *attrset);
    if (mode_applied && nfs4_bm_isset(&sa->set, FATTR4_MODE)) nfs4_bm_set(attrset, FATTR4_MODE);
    zpl_setattr_t s = sa->sa;
    s.mask &= ~(uint32_t)ZPL_SET_MODE;
    if (!s.mask) return NFS4_OK;
    /* Only root may give a new object to someone else. */
    if ((s.mask & ZPL_SET_UID) && s.uid != dir->cred.uid && dir->cred.uid != 0) return NFS4ERR_PERM;
    int rc = zpl_setattr(n, &s, NULL);
    if (rc < 0) return nfs4_errno_to_status(rc);
    for (unsigned b = 0; b < 32 * NFS4_BITMAP_WORDS; b++)
        if (b != FATTR4_MODE && nfs4_bm_isset(&sa->set, b)) nfs4_bm_set(attrset, b);
    return NFS4_OK;
}

static uint32_t op_create(nfs4_cx_t *cx)
{
    uint32_t type = nfs_xdr_get_u32(cx->a);
    const uint8_t *link = NULL;
    uint32_t linklen = 0, maj = 0, min = 0;
    if (type == NF4LNK) {
        link = nfs_xdr_get_opaque(cx->a, &linklen, 1u << 16);
    } else if (type == NF4BLK || type == NF4CHR) {
        maj = nfs_xdr_get_u32(cx->a);
        min = nfs_xdr_get_u32(cx->a);
    }
    if (cx->a->err) return NFS4ERR_BADXDR;
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = nfs4_name_get(cx, name);
    nfs4_sattr_t sa;
    uint32_t st2 = nfs4_sattr_decode(cx->a, &sa);
    nfs4_bitmap_t attrset = { { 0 } };
    if (st == NFS4_OK) st = st2;
    if (st == NFS4_OK) st = need_dir(cx, false);
    if (st == NFS4_OK) st = need_writable(&cx->cur);
    if (st == NFS4_OK) st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC);
    if (st) return st;
    bool has_mode = sa.sa.mask & ZPL_SET_MODE;
    uint32_t mode = sa.sa.mode;
    zpl_node_t *n = NULL;
    zpl_wcc_t wcc;
    int rc;
    switch (type) {
    case NF4DIR:
        rc = zpl_mkdir(cx->cur.node, name, has_mode ? mode : 0755, &cx->cur.cred, &n, &wcc);
        break;
    case NF4LNK: {
        if (linklen == 0) return NFS4ERR_INVAL;
        if (linklen > ZPL_SYMLINK_MAX) return NFS4ERR_NAMETOOLONG;
        char target[ZPL_SYMLINK_MAX + 1];
        memcpy(target, link, linklen);
        target[linklen] = 0;
        if (strlen(target) != linklen) return NFS4ERR_BADCHAR;
        rc = zpl_symlink(cx->cur.node, name, target, &cx->cur.cred, &n, &wcc);
        has_mode = false;
        break;
    }
    case NF4BLK:
    case NF4CHR:
    case NF4SOCK:
    case NF4FIFO: {
        uint32_t fmt = type == NF4BLK ? S_IFBLK : type == NF4CHR ? S_IFCHR
                     : type == NF4SOCK ? S_IFSOCK : S_IFIFO;
        rc = zpl_mknod(cx->cur.node, name, fmt | (has_mode ? mode : 0644),
                       makedev(maj, min), &cx->cur.cred, &n, &wcc);
        break;
    }
    default:
        return NFS4ERR_BADTYPE;
    }
    if (rc < 0) return nfs4_errno_to_status(rc);
    st = apply_create_attrs(&cx->cur, n, &sa, &attrset, has_mode);
    uint32_t dst = nfs4_durable(&cx->cur);
    if (st == NFS4_OK) st = dst;
    if (st) {
        zpl_node_rele(n);
        return st;
    }
    nfs4_put_cinfo(cx->r, &wcc);
    nfs4_bitmap_put(cx->r, &attrset);
    zpl_node_rele(cx->cur.node);
    cx->cur.node = n;
    return NFS4_OK;
}

static uint32_t op_remove(nfs4_cx_t *cx)
{
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = nfs4_name_get(cx, name);
    if (st == NFS4_OK) st = need_dir(cx, false);
    if (st == NFS4_OK) st = need_writable(&cx->cur);
    if (st == NFS4_OK) st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC);
    if (st == NFS4_OK) st = nfs4_deleg_check_name(cx, cx->cur.node, name);
    if (st) return st;
    zpl_wcc_t wcc;
    int rc = zpl_remove(cx->cur.node, name, &wcc);
    if (rc == -EISDIR) rc = zpl_rmdir(cx->cur.node, name, &wcc);
    if (rc < 0) return nfs4_errno_to_status(rc);
    if ((st = nfs4_durable(&cx->cur))) return st;
    nfs4_put_cinfo(cx->r, &wcc);
    return NFS4_OK;
}

static uint32_t op_rename(nfs4_cx_t *cx)
{
    char from[ZPL_NAME_MAX + 1], to[ZPL_NAME_MAX + 1];
    uint32_t st = nfs4_name_get(cx, from);
    uint32_t st2 = nfs4_name_get(cx, to);
    if (st == NFS4_OK) st = st2;
    if (st) return st;
    if (cx->cur.kind == NFS4_FH_NONE || cx->saved.kind == NFS4_FH_NONE) return NFS4ERR_NOFILEHANDLE;
    if (cx->saved.kind == NFS4_FH_PSEUDO || cx->cur.kind == NFS4_FH_PSEUDO) return NFS4ERR_ROFS;
    if (zpl_node_fs(cx->saved.node) != zpl_node_fs(cx->cur.node)) return NFS4ERR_XDEV;
    if ((st = need_dir(cx, false))) return st;
    if ((st = cfh_need_dir(&cx->saved))) return st;
    if ((st = need_writable(&cx->cur))) return st;
    if ((st = nfs4_perm(&cx->saved, cx->saved.node, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC))) return st;
    if ((st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC))) return st;
    if ((st = nfs4_deleg_check_name(cx, cx->saved.node, from))) return st;
    if ((st = nfs4_deleg_check_name(cx, cx->cur.node, to))) return st;
    zpl_wcc_t swcc, twcc;
    int rc = zpl_rename(cx->saved.node, from, cx->cur.node, to, &swcc, &twcc);
    if (rc < 0) return nfs4_errno_to_status(rc);
    if ((st = nfs4_durable(&cx->cur))) return st;
    nfs4_put_cinfo(cx->r, &swcc);
    nfs4_put_cinfo(cx->r, &twcc);
    return NFS4_OK;
}

static uint32_t op_link(nfs4_cx_t *cx)
{
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = nfs4_name_get(cx, name);
    if (st) return st;
    if (cx->cur.kind == NFS4_FH_NONE || cx->saved.kind == NFS4_FH_NONE) return NFS4ERR_NOFILEHANDLE;
    if (cx->saved.kind == NFS4_FH_PSEUDO) return NFS4ERR_ISDIR;
    if (cx->cur.kind == NFS4_FH_PSEUDO) return NFS4ERR_ROFS;
    if (zpl_node_fs(cx->saved.node) != zpl_node_fs(cx->cur.node)) return NFS4ERR_XDEV;
    if ((st = need_dir(cx, false))) return st;
    if ((st = need_writable(&cx->cur))) return st;
    if ((st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC))) return st;
    if ((st = nfs4_deleg_check(cx, cx->saved.node, NULL))) return st;   /* its nlink changes */
    zpl_wcc_t wcc;
    int rc = zpl_link(cx->saved.node, cx->cur.node, name, &wcc);
    if (rc == -EPERM) return NFS4ERR_ISDIR;
    if (rc < 0) return nfs4_errno_to_status(rc);
    if ((st = nfs4_durable(&cx->cur))) return st;
    nfs4_put_cinfo(cx->r, &wcc);
    return NFS4_OK;
}

static bool in_groups(const zpl_cred_t *c, uint32_t gid)
{
    if (c->gid == gid) return true;
    for (uint32_t i = 0; i < c->ngroups && i < 16; i++)
        if (c->groups[i] == gid) return true;
    return false;
}

static uint32_t op_setattr(nfs4_cx_t *cx)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    nfs4_sattr_t sa;
    uint32_t st = nfs4_sattr_decode(cx->a, &sa);
    nfs4_bitmap_t none = { { 0 } };
    cx->keep_body = true;    /* attrsset is returned with errors too */
    if (st == NFS4_OK) st = need_fh(cx);
    if (st == NFS4_OK && cx->cur.kind == NFS4_FH_PSEUDO) st = NFS4ERR_ROFS;
    if (st == NFS4_OK) st = need_writable(&cx->cur);
    zpl_attr_t a;
    memset(&a, 0, sizeof a);
    if (st == NFS4_OK) {
        int rc = zpl_getattr(cx->cur.node, &a);
        if (rc < 0) st = nfs4_errno_to_status(rc);
    }
    const zpl_cred_t *c = &cx->cur.cred;
    bool root = c->uid == 0, owner = c->uid == a.uid;
    zpl_setattr_t *s = &sa.sa;
    if (st == NFS4_OK && (s->mask & ZPL_SET_MODE) && !root && !owner) st = NFS4ERR_PERM;
    if (st == NFS4_OK && (s->mask & ZPL_SET_UID) && !root && s->uid != a.uid) st = NFS4ERR_PERM;
    if (st == NFS4_OK && (s->mask & ZPL_SET_GID) && !root &&
        (!owner || (s->gid != a.gid && !in_groups(c, s->gid))))
        st = NFS4ERR_PERM;
    if (st == NFS4_OK && (s->mask & (ZPL_SET_ATIME | ZPL_SET_MTIME)) && !root && !owner)
        st = NFS4ERR_PERM;
    if (st == NFS4_OK && (s->mask & (ZPL_SET_ATIME_NOW | ZPL_SET_MTIME_NOW)) && !root && !owner)
        st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_WRITE);
    if (st == NFS4_OK && (s->mask & ZPL_SET_SIZE)) {
        if (S_ISDIR(a.mode)) st = NFS4ERR_ISDIR;
        else if (!S_ISREG(a.mode)) st = NFS4ERR_INVAL;
        bool via_open = false;
        if (st == NFS4_OK) st = nfs4_check_io_stateid(cx, &sid, true, &via_open);
        if (st == NFS4_OK && !via_open) st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_WRITE);
    }
    if (st == NFS4_OK && s->mask) st = nfs4_deleg_check(cx, cx->cur.node, &sid);
    if (st == NFS4_OK && s->mask) {
        int rc = zpl_setattr(cx->cur.node, s, NULL);
        if (rc < 0) st = nfs4_errno_to_status(rc);
        if (st == NFS4_OK) st = nfs4_durable(&cx->cur);
    }
    nfs4_bitmap_put(cx->r, st == NFS4_OK ? &sa.set : &none);
    return st;
}

static uint32_t op_verify(nfs4_cx_t *cx, bool negate)
{
    nfs4_bitmap_t req;
    bool extra;
    nfs4_bitmap_get(cx->a, &req, &extra);
    uint32_t len;
    const uint8_t *vals = nfs_xdr_get_opaque(cx->a, &len, 1u << 20);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = need_fh(cx);
    if (st) return st;
    if (nfs4_bm_isset(&req, FATTR4_RDATTR_ERROR) || asks_write_only(&req)) return NFS4ERR_INVAL;
    nfs4_bitmap_t sup;
    nfs4_supported_attrs(cx->minor, &sup);
    for (int i = 0; i < NFS4_BITMAP_WORDS; i++)
        if (req.w[i] & ~sup.w[i]) return NFS4ERR_ATTRNOTSUPP;
    if (extra) return NFS4ERR_ATTRNOTSUPP;
    nfs4_attr_src_t src;
    uint8_t fhbuf[NFS4_FHSIZE];
    if ((st = attr_src_cur(cx, &req, &src, fhbuf))) return st;
    /* Compared with what a write delegation's holder says, as GETATTR answers. */
    if ((st = nfs4_deleg_getattr(cx, &req, &src.a))) return st;
    nfs_xdr_t mine;
    nfs4_bitmap_t done;
    nfs_xdr_init_encode(&mine, 256);
    nfs4_attrlist_encode(&mine, &src, &req, &done);
    bool same = !mine.err && mine.len == len && !memcmp(mine.buf, vals, len);
    nfs_xdr_free(&mine);
    if (negate) return same ? NFS4ERR_SAME : NFS4_OK;
    return same ? NFS4_OK : NFS4ERR_NOT_SAME;
}

enum { GDD4_OK = 0, GDD4_UNAVAIL = 1 };

/* GET_DIR_DELEGATION (RFC 8881 18.39): Cairn grants no directory delegations,
 * and says so the way 18.39.3 gives a server that will not grant one:
 * NFS4_OK with GDD4_UNAVAIL, and no promise to signal one later
 * (CB_RECALLABLE_OBJ_AVAIL). Unlike NOTSUPP or DIRDELEG_UNAVAIL this lets the
 * rest of the COMPOUND run, for clients that ask for one alongside ACCESS,
 * CREATE or REMOVE. */
static uint32_t op_get_dir_delegation(nfs4_cx_t *cx)
{
    nfs_xdr_get_u32(cx->a);   /* gdda_signal_deleg_avail */
    nfs4_bitmap_t ignored;
    nfs4_bitmap_get(cx->a, &ignored, NULL);   /* notification types */
    for (int i = 0; i < 2; i++) {   /* child and directory attribute delays */
        nfs_xdr_get_u64(cx->a);
        nfs_xdr_get_u32(cx->a);
    }
    nfs4_bitmap_get(cx->a, &ignored, NULL);   /* child attributes */
    nfs4_bitmap_get(cx->a, &ignored, NULL);   /* directory attributes */
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = need_dir(cx, true);
    if (st) return st;
    nfs_xdr_put_u32(cx->r, GDD4_UNAVAIL);
    nfs_xdr_put_u32(cx->r, 0);   /* gddrnf_will_signal_deleg_avail */
    return NFS4_OK;
}

static uint32_t put_secinfo(nfs4_cx_t *cx)
{
    nfs_xdr_put_u32(cx->r, 2);
    nfs_xdr_put_u32(cx->r, NFS_AUTH_SYS);
    nfs_xdr_put_u32(cx->r, NFS_AUTH_NONE);
    return NFS4_OK;
}

static uint32_t op_secinfo(nfs4_cx_t *cx)
{
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = nfs4_name_get(cx, name);
    if (st == NFS4_OK) st = need_dir(cx, true);
    if (st) return st;
    /* The name must exist; looking it up on a copy keeps the current fh. */
    nfs4_cfh_t probe = { 0 };
    cfh_copy(&probe, &cx->cur);
    if (probe.kind == NFS4_FH_PSEUDO) {
        char path[NFS4_PSEUDO_PATH_MAX];
        child_path(probe.path, name, path, sizeof path);
        st = pseudo_kind(cx->call->srv, path) == PSEUDO_NONE ? NFS4ERR_NOENT : NFS4_OK;
    } else {
        zpl_node_t *n;
        int rc = zpl_lookup(probe.node, name, &n);
        if (rc < 0) st = nfs4_errno_to_status(rc);
        else zpl_node_rele(n);
        if (rc == -ENOENT && is_export_root(&probe)) {
            char path[NFS4_PSEUDO_PATH_MAX];
            child_path(nfs_export_path(probe.exp), name, path, sizeof path);
            if (pseudo_kind(cx->call->srv, path) == PSEUDO_EXPORT) st = NFS4_OK;
        }
    }
    nfs4_cfh_clear(&probe);
    if (st) return st;
    if (cx->minor >= 1) nfs4_cfh_clear(&cx->cur);
    return put_secinfo(cx);
}

enum { SECINFO_STYLE4_CURRENT_FH = 0, SECINFO_STYLE4_PARENT = 1 };

static uint32_t op_secinfo_no_name(nfs4_cx_t *cx)
{
    uint32_t style = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    if (style != SECINFO_STYLE4_CURRENT_FH && style != SECINFO_STYLE4_PARENT)
        return NFS4ERR_INVAL;
    uint32_t st = need_fh(cx);
    if (st) return st;
    /* The parent's flavours are the export's, like the directory's own; the
     * root of the namespace has no parent (RFC 8881 18.45.3). */
    if (style == SECINFO_STYLE4_PARENT) {
        if ((st = need_dir(cx, true))) return st;
        if (cx->cur.kind == NFS4_FH_PSEUDO && !strcmp(cx->cur.path, "/")) return NFS4ERR_NOENT;
    }
    nfs4_cfh_clear(&cx->cur);
    return put_secinfo(cx);
}

/* ---------------------------------------------------------------- READDIR */

typedef struct dirent_rec {
    char name[ZPL_NAME_MAX + 1];
    uint64_t ino, cookie;
} dirent_rec_t;

typedef struct dir_collect {
    dirent_rec_t *v;
    size_t n, max;
} dir_collect_t;

static int collect_cb(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)type;
    dir_collect_t *d = arg;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return 0;
    if (d->n == d->max) return 1;
    dirent_rec_t *e = &d->v[d->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ino = ino;
    e->cookie = cookie;
    return 0;
}

/* Encodes one entry4 into tmp. */
static uint32_t encode_entry(nfs4_cx_t *cx, nfs_xdr_t *tmp, const char *name, uint64_t cookie,
                             nfs4_attr_src_t *src, const nfs4_bitmap_t *req)
{
    nfs_xdr_put_u32(tmp, 1);
    nfs_xdr_put_u64(tmp, cookie);
    nfs_xdr_put_string(tmp, name);
    nfs4_fattr_encode(tmp, src, req);
    (void)cx;
    return tmp->err ? NFS4ERR_RESOURCE : NFS4_OK;
}

static uint32_t op_readdir(nfs4_cx_t *cx)
{
    uint64_t cookie = nfs_xdr_get_u64(cx->a);
    const uint8_t *verf = nfs_xdr_get_fixed(cx->a, 8);
    (void)verf;
    uint32_t dircount = nfs_xdr_get_u32(cx->a);
    uint32_t maxcount = nfs_xdr_get_u32(cx->a);
    nfs4_bitmap_t req;
    nfs4_bitmap_get(cx->a, &req, NULL);
    if (cx->a->err) return NFS4ERR_BADXDR;
    (void)dircount;
    uint32_t st = need_dir(cx, true);
    if (st) return st;
    if (asks_write_only(&req)) return NFS4ERR_INVAL;
    if (cookie == 1 || cookie == 2) return NFS4ERR_BAD_COOKIE;
    if (maxcount > NFS4_MAX_IO) maxcount = NFS4_MAX_IO;
    if (maxcount < 16) return NFS4ERR_TOOSMALL;
    size_t start = cx->r->pos;
    nfs_xdr_put_u64(cx->r, 0);   /* cookie verifier: cookies stay valid across changes */
    size_t budget = maxcount - 16;   /* verifier, final value_follows, eof */
    size_t used = 0, nent = 0;
    bool eof = false;
    nfs_xdr_t tmp;
    nfs_xdr_init_encode(&tmp, 512);
    uint8_t fhbuf[NFS4_FHSIZE];
    nfs4_attr_src_t src;
    if (cx->cur.kind == NFS4_FH_PSEUDO) {
        pseudo_children_t pc = { .cx = cx, .dir = cx->cur.path };
        nfs_export_foreach(cx->call->srv, children_cb, &pc);
        size_t i = cookie >= 3 ? (size_t)(cookie - 2) : 0;
        for (; i < pc.n; i++) {
            char path[NFS4_PSEUDO_PATH_MAX];
            child_path(cx->cur.path, pc.names[i], path, sizeof path);
            nfs4_cfh_t f = { 0 };
            if (goto_path(cx, &f, path) != NFS4_OK) continue;
            if (f.kind == NFS4_FH_PSEUDO) attr_src_pseudo(cx, path, &src, fhbuf);
            else if (attr_src_real(cx, &f, f.node, true, &req, &src, fhbuf)) { nfs4_cfh_clear(&f); continue; }
            nfs4_cfh_clear(&f);
            tmp.pos = tmp.len = 0;
            encode_entry(cx, &tmp, pc.names[i], i + 3, &src, &req);
            if (tmp.err) break;
            if (used + tmp.len > budget) break;
            nfs_xdr_put_fixed(cx->r, tmp.buf, (uint32_t)tmp.len);
            used += tmp.len;
            nent++;
        }
        eof = i >= pc.n;
        free(pc.names);
    } else {
        if ((st = nfs4_perm(&cx->cur, cx->cur.node, ZPL_ACCESS_READ))) goto fail;
        size_t max = maxcount / 24 + 2;
        if (max > 4096) max = 4096;
        dir_collect_t d = { .v = malloc(max * sizeof *d.v), .max = max };
        if (!d.v) { st = NFS4ERR_RESOURCE; goto fail; }
        bool zeof = false;
        int rc = zpl_readdir(cx->cur.node, cookie, collect_cb, &d, &zeof);
        if (rc < 0) { free(d.v); st = nfs4_errno_to_status(rc); goto fail; }
        zpl_fs_t *fs = zpl_node_fs(cx->cur.node);
        size_t i = 0;
        for (; i < d.n; i++) {
            zpl_node_t *n;
            if (zpl_iget(fs, d.v[i].ino, &n) < 0) {
                if (nfs4_bm_isset(&req, FATTR4_RDATTR_ERROR)) {
                    memset(&src, 0, sizeof src);
                    src.minor = cx->minor;
                    src.rdattr_error = NFS4ERR_STALE;
                    nfs4_bitmap_t only = { { 0 } };
                    nfs4_bm_set(&only, FATTR4_RDATTR_ERROR);
                    tmp.pos = tmp.len = 0;
                    encode_entry(cx, &tmp, d.v[i].name, d.v[i].cookie, &src, &only);
                    goto append;
                }
                continue;   /* removed meanwhile */
            }
            uint32_t ast = attr_src_real(cx, &cx->cur, n, false, &req, &src, fhbuf);
            zpl_node_rele(n);
            if (ast) continue;
            tmp.pos = tmp.len = 0;
            encode_entry(cx, &tmp, d.v[i].name, d.v[i].cookie, &src, &req);
        append:
            if (tmp.err) break;
            if (used + tmp.len > budget) break;
            nfs_xdr_put_fixed(cx->r, tmp.buf, (uint32_t)tmp.len);
            used += tmp.len;
            nent++;
        }
        eof = zeof && i == d.n;
        free(d.v);
    }
    nfs_xdr_free(&tmp);
    if (nent == 0 && !eof) {
        cx->r->pos = cx->r->len = start;
        return NFS4ERR_TOOSMALL;
    }
    nfs_xdr_put_u32(cx->r, 0);   /* no more entries in this reply */
    nfs_xdr_put_u32(cx->r, eof);
    return NFS4_OK;
fail:
    nfs_xdr_free(&tmp);
    cx->r->pos = cx->r->len = start;
    return st;
}

/* ---------------------------------------------------------------- dispatch */

static bool op_is_40_only(uint32_t op)
{
    return op == OP4_SETCLIENTID || op == OP4_SETCLIENTID_CONFIRM || op == OP4_OPEN_CONFIRM ||
           op == OP4_RENEW || op == OP4_RELEASE_LOCKOWNER;
}

static uint32_t dispatch(nfs4_cx_t *cx, uint32_t op)
{
    if (cx->minor == 0 && op > OP4_RELEASE_LOCKOWNER) return NFS4ERR_OP_ILLEGAL;
    if (cx->minor >= 1 && op_is_40_only(op)) return NFS4ERR_NOTSUPP;
    switch (op) {
    case OP4_ACCESS: return op_access(cx);
    case OP4_CLOSE: return nfs4_op_close(cx);
    case OP4_COMMIT: return op_commit(cx);
    case OP4_CREATE: return op_create(cx);
    case OP4_GETATTR: return op_getattr(cx);
    case OP4_GETFH: return op_getfh(cx);
    case OP4_LINK: return op_link(cx);
    case OP4_LOCK: return nfs4_op_lock(cx);
    case OP4_LOCKT: return nfs4_op_lockt(cx);
    case OP4_LOCKU: return nfs4_op_locku(cx);
    case OP4_LOOKUP: return op_lookup(cx);
    case OP4_LOOKUPP: return op_lookupp(cx);
    case OP4_NVERIFY: return op_verify(cx, true);
    case OP4_OPEN: return nfs4_op_open(cx);
    case OP4_OPEN_CONFIRM: return nfs4_op_open_confirm(cx);
    case OP4_OPEN_DOWNGRADE: return nfs4_op_open_downgrade(cx);
    case OP4_PUTFH: return op_putfh(cx);
    case OP4_PUTPUBFH: return op_putrootfh(cx);
    case OP4_PUTROOTFH: return op_putrootfh(cx);
    case OP4_READ: return op_read(cx);
    case OP4_READDIR: return op_readdir(cx);
    case OP4_READLINK: return op_readlink(cx);
    case OP4_REMOVE: return op_remove(cx);
    case OP4_RENAME: return op_rename(cx);
    case OP4_RENEW: return nfs4_op_renew(cx);
    case OP4_RESTOREFH: return op_restorefh(cx);
    case OP4_SAVEFH: return op_savefh(cx);
    case OP4_SECINFO: return op_secinfo(cx);
    case OP4_SETATTR: return op_setattr(cx);
    case OP4_SETCLIENTID: return nfs4_op_setclientid(cx);
    case OP4_SETCLIENTID_CONFIRM: return nfs4_op_setclientid_confirm(cx);
    case OP4_VERIFY: return op_verify(cx, false);
    case OP4_WRITE: return op_write(cx);
    case OP4_RELEASE_LOCKOWNER: return nfs4_op_release_lockowner(cx);
    case OP4_BIND_CONN_TO_SESSION: return nfs4_op_bind_conn(cx);
    case OP4_EXCHANGE_ID: return nfs4_op_exchange_id(cx);
    case OP4_CREATE_SESSION: return nfs4_op_create_session(cx);
    case OP4_DESTROY_SESSION: return nfs4_op_destroy_session(cx);
    case OP4_FREE_STATEID: return nfs4_op_free_stateid(cx);
    case OP4_SECINFO_NO_NAME: return op_secinfo_no_name(cx);
    case OP4_SEQUENCE: return nfs4_op_sequence(cx);
    case OP4_TEST_STATEID: return nfs4_op_test_stateid(cx);
    case OP4_DESTROY_CLIENTID: return nfs4_op_destroy_clientid(cx);
    case OP4_RECLAIM_COMPLETE: return nfs4_op_reclaim_complete(cx);
    case OP4_DELEGPURGE: return nfs4_op_delegpurge(cx);
    case OP4_DELEGRETURN: return nfs4_op_delegreturn(cx);
    case OP4_BACKCHANNEL_CTL: return nfs4_op_backchannel_ctl(cx);
    case OP4_GET_DIR_DELEGATION: return op_get_dir_delegation(cx);
    case OP4_OPENATTR:
    case OP4_GETDEVICEINFO:
    case OP4_GETDEVICELIST:
    case OP4_LAYOUTCOMMIT:
    case OP4_LAYOUTGET:
    case OP4_LAYOUTRETURN:
    case OP4_SET_SSV:
    case OP4_WANT_DELEGATION:
        return NFS4ERR_NOTSUPP;
    default:
        if (cx->minor >= 2 && op > OP4_RECLAIM_COMPLETE && op <= OP4_LAST_42)
            return nfs42_dispatch(cx, op);
        return NFS4ERR_OP_ILLEGAL;
    }
}

static bool sessionless_op(uint32_t op)
{
    return op == OP4_EXCHANGE_ID || op == OP4_CREATE_SESSION || op == OP4_DESTROY_SESSION ||
           op == OP4_DESTROY_CLIENTID || op == OP4_BIND_CONN_TO_SESSION;
}

/* Operations that, sent without a SEQUENCE, must be the only one of their
 * COMPOUND (RFC 8881 18.34.3, 18.35.3, 18.36.3, 18.50.3): NFS4ERR_NOT_ONLY_OP
 * otherwise, before they change anything. */
static bool solo_op(uint32_t op)
{
    return op == OP4_EXCHANGE_ID || op == OP4_CREATE_SESSION || op == OP4_DESTROY_CLIENTID ||
           op == OP4_BIND_CONN_TO_SESSION;
}

/* The 4.1 current stateid follows the current filehandle (RFC 8881
 * 16.2.3.1.2): an operation that sets a new filehandle without a stateid
 * leaves none, SAVEFH and RESTOREFH carry it along with the handle. */
static void track_current_stateid(nfs4_cx_t *cx, uint32_t op)
{
    switch (op) {
    case OP4_PUTFH: case OP4_PUTROOTFH: case OP4_PUTPUBFH: case OP4_LOOKUP: case OP4_LOOKUPP:
    case OP4_CREATE:
        cx->have_cur_sid = false;
        break;
    case OP4_SAVEFH:
        cx->have_saved_sid = cx->have_cur_sid;
        cx->saved_sid = cx->cur_sid;
        break;
    case OP4_RESTOREFH:
        cx->have_cur_sid = cx->have_saved_sid;
        cx->cur_sid = cx->saved_sid;
        break;
    default:
        break;
    }
}

/* A 4.1 reply may not grow past what the session promised to the client
 * (ca_maxresponsesize), nor past what its slot can keep when the client
 * asked for it to be kept (ca_maxresponsesize_cached; RFC 8881 18.46.3). */
static uint32_t reply_size_status(const nfs4_cx_t *cx, size_t reply_len)
{
    if (!cx->have_session || reply_len <= cx->reply_limit) return NFS4_OK;
    return cx->cachethis ? NFS4ERR_REP_TOO_BIG_TO_CACHE : NFS4ERR_REP_TOO_BIG;
}

static void patch_u32(nfs_xdr_t *x, size_t pos, uint32_t v)
{
    uint8_t *p = x->buf + pos;
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static nfs_accept_t compound(nfs_call_t *call)
{
    nfs4_server_t *st = nfs_server_nfs4_state(call->srv);
    if (!st) return NFS_ACCEPT_SYSTEM_ERR;
    nfs_xdr_t *a = &call->args, *r = call->res;
    uint32_t taglen;
    const uint8_t *tag = nfs_xdr_get_opaque(a, &taglen, NFS4_OPAQUE_LIMIT);
    uint32_t minor = nfs_xdr_get_u32(a);
    uint32_t numops = nfs_xdr_get_u32(a);
    if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;

    size_t start = r->pos;
    nfs_xdr_put_u32(r, 0);
    nfs_xdr_put_opaque(r, tag, taglen);
    size_t numres_pos = r->pos;
    nfs_xdr_put_u32(r, 0);
    if (r->err) return NFS_ACCEPT_SYSTEM_ERR;
    /* 4.2 (RFC 7862) is 4.1 plus optional operations (nfs42.c). */
    if (minor > 2) {
        patch_u32(r, start, NFS4ERR_MINOR_VERS_MISMATCH);
        return NFS_ACCEPT_SUCCESS;
    }

    /* On the I/O thread (memory_only) only compounds of operations that only
     * read run (nfs4_op_reads_only), after a 4.1 SEQUENCE: that one takes its
     * slot tentatively, and a compound that goes to a worker after all gives
     * it back as it was (nfs4_slot_undo), so the worker's SEQUENCE is the
     * slot's one use. Anything else such a compound does before it would
     * block - reaping expired leases, renewing the client's - the worker's
     * rerun does again to the same effect. */
    pthread_mutex_lock(&st->lock);
    nfs4_reap(st);
    nfs4_unlock(st);

    nfs4_cx_t cx = { .st = st, .call = call, .a = a, .r = r, .minor = minor, .numops = numops,
                     .start = start };
    uint32_t status = NFS4_OK, numres = 0;
    for (uint32_t i = 0; i < numops; i++) {
        cx.opidx = i;
        uint32_t op = nfs_xdr_get_u32(a);
        if (a->err) { status = NFS4ERR_BADXDR; break; }
        if (call->memory_only && !nfs4_op_reads_only(op) &&
            !(minor >= 1 && i == 0 && op == OP4_SEQUENCE)) {
            call->would_block = true;
            break;
        }
        cx.keep_body = false;
        cx.args = a->pos;
        size_t op_pos = r->pos;
        nfs_xdr_put_u32(r, op);
        size_t status_pos = r->pos;
        nfs_xdr_put_u32(r, 0);
        cx.body = r->pos;
        if (minor == 0 && numops > NFS4_MAX_OPS_40) {
            status = NFS4ERR_RESOURCE;
        } else if (minor >= 1 && i == 0 && op != OP4_SEQUENCE && !sessionless_op(op)) {
            status = op <= OP4_LAST_42 && op >= OP4_ACCESS ? NFS4ERR_OP_NOT_IN_SESSION
                                                                    : NFS4ERR_OP_ILLEGAL;
        } else if (minor >= 1 && i == 0 && numops > 1 && solo_op(op)) {
            status = NFS4ERR_NOT_ONLY_OP;
        } else if (minor >= 1 && i > 0 && op == OP4_SEQUENCE) {
            status = NFS4ERR_SEQUENCE_POS;
        } else if (minor >= 1 && i > 0 && !cx.have_session && sessionless_op(op) &&
                   op != OP4_DESTROY_SESSION) {
            status = NFS4ERR_NOT_ONLY_OP;
        } else {
            status = dispatch(&cx, op);
        }
        nfs_stats_v4_op(call, op);
        if (call->would_block || cx.replayed) break;
        if (status == NFS4ERR_OP_ILLEGAL) patch_u32(r, op_pos, OP4_ILLEGAL);
        if (status == NFS4_OK && minor >= 1) {
            track_current_stateid(&cx, op);
            /* SEQUENCE checked its own reply before taking the slot. */
            if (i > 0 && (status = reply_size_status(&cx, r->pos - start))) cx.keep_body = false;
        }
        if (status != NFS4_OK && !cx.keep_body) nfs_xdr_truncate(r, cx.body);
        if (r->err) {
            /* Out of memory while encoding: answer what we can. */
            r->err = false;
            nfs_xdr_truncate(r, cx.body);
            status = NFS4ERR_RESOURCE;
        }
        patch_u32(r, status_pos, status);
        numres++;
        if (status != NFS4_OK) {
            log_debug("nfs4", "xid %08x minor %u op %u/%u (%u): status %u", call->xid, minor,
                      i + 1, numops, op, status);
            break;
        }
    }
    /* A block read refused below (the SPA's memory-only mode) may have become
     * any status: the slot must not keep that answer. */
    if (call->memory_only && zpl_memory_only_refused()) call->would_block = true;
    if (call->would_block) {
        if (cx.have_session) nfs4_slot_undo(&cx);
        nfs4_cfh_clear(&cx.cur);
        nfs4_cfh_clear(&cx.saved);
        return NFS_ACCEPT_SUCCESS; /* nothing is sent; the worker's run answers */
    }
    /* State granted to a client not yet in the records is not answered before
     * its record is on disk: the client must be able to reclaim it after a
     * restart or a takeover (RFC 7530 9.6.3, RFC 8881 8.4.3). */
    if (cx.record_wait) nfs4_records_wait(st, cx.record_wait);
    if (!cx.replayed) {
        patch_u32(r, start, status);
        patch_u32(r, numres_pos, numres);
        if (cx.have_session) nfs4_slot_done(&cx, r, start, r->pos - start);
    }
    /* Answered (a memory-only refusal was caught above): the COMPOUND counts
     * toward the share of its last current file handle. */
    nfs_stats_v4_answered(call, cx.cur.kind == NFS4_FH_REAL ? cx.cur.exp : NULL);
    nfs4_cfh_clear(&cx.cur);
    nfs4_cfh_clear(&cx.saved);
    return r->err ? NFS_ACCEPT_SYSTEM_ERR : NFS_ACCEPT_SUCCESS;
}

nfs_accept_t nfs4_program(nfs_call_t *call)
{
    switch (call->proc) {
    case 0: return NFS_ACCEPT_SUCCESS;
    case 1: return compound(call);
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}
