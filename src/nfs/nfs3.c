/*
 * NFSv3 (RFC 1813): the 22 procedures over the ZPL.
 *
 * Every procedure that takes a file handle resolves it the same way: the
 * export guid in the handle finds the export (none: STALE, or BADHANDLE when
 * the bytes are not a Cairn handle; JUKEBOX while it is suspended), the export authorizes the client
 * (ACCES) and yields the effective credential after squashing and whether
 * the client may write, and the ZPL turns the handle into a node (STALE when
 * the object is gone). The export stays held until the reply is encoded, so
 * an unexport waits for the call.
 *
 * The ZPL does not check mode bits; this file does, as a kernel server does:
 * exec on a directory to look names up in it, write on a directory to create
 * or remove names, write on a file for WRITE and size changes, read for READ
 * (the owner may always read and write his own file, so a client that
 * created a file read-only can still write back its cache). uid 0 after
 * squashing passes, as zpl_access decides.
 *
 * Arguments are decoded with the XDR cursor straight from the received
 * record: WRITE data is used in place, and READ data is read by the ZPL
 * directly into the reply buffer, or lent to it by the ARC (nfs_xdr_lend: the
 * socket copies from the ARC's buffers). The calls that only read - NULL,
 * GETATTR, LOOKUP, ACCESS, READLINK and READ - may run with memory_only on
 * the transport's I/O thread (nfs_impl.h), under the SPA's memory-only mode:
 * zpl_read_spans (memory_only) serves a READ from memory, and -EWOULDBLOCK (a
 * record to read from disk, a due atime) sets would_block after only lookups
 * and checks, so the worker's rerun answers the same checks with nothing done
 * twice; any other block the call would read from a device is refused below
 * the ZPL (zpl_memory_only_begin), which rpc_server.c turns into would_block.
 * Metadata changes are committed before the reply (RFC 1813 requires them on
 * stable storage) unless the dataset has sync=disabled; UNSTABLE writes are
 * left to the txg and COMMIT.
 */
#include "nfs_srv.h"

#include <cairn/log.h>

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

enum {
    NFS3_OK = 0,
    NFS3ERR_PERM = 1,
    NFS3ERR_NOENT = 2,
    NFS3ERR_IO = 5,
    NFS3ERR_NXIO = 6,
    NFS3ERR_ACCES = 13,
    NFS3ERR_EXIST = 17,
    NFS3ERR_XDEV = 18,
    NFS3ERR_NODEV = 19,
    NFS3ERR_NOTDIR = 20,
    NFS3ERR_ISDIR = 21,
    NFS3ERR_INVAL = 22,
    NFS3ERR_FBIG = 27,
    NFS3ERR_NOSPC = 28,
    NFS3ERR_ROFS = 30,
    NFS3ERR_MLINK = 31,
    NFS3ERR_NAMETOOLONG = 63,
    NFS3ERR_NOTEMPTY = 66,
    NFS3ERR_DQUOT = 69,
    NFS3ERR_STALE = 70,
    NFS3ERR_BADHANDLE = 10001,
    NFS3ERR_NOT_SYNC = 10002,
    NFS3ERR_BAD_COOKIE = 10003,
    NFS3ERR_NOTSUPP = 10004,
    NFS3ERR_TOOSMALL = 10005,
    NFS3ERR_SERVERFAULT = 10006,
    NFS3ERR_BADTYPE = 10007,
    NFS3ERR_JUKEBOX = 10008,
};

enum { NF3REG = 1, NF3DIR, NF3BLK, NF3CHR, NF3LNK, NF3SOCK, NF3FIFO };
enum { UNSTABLE = 0, DATA_SYNC = 1, FILE_SYNC = 2 };
enum {
    ACCESS3_READ = 1, ACCESS3_LOOKUP = 2, ACCESS3_MODIFY = 4,
    ACCESS3_EXTEND = 8, ACCESS3_DELETE = 16, ACCESS3_EXECUTE = 32,
};

#define FH3_MAX 64
#define NFS3_COOKIEVERF 8
#define TOOSMALL (-100000) /* internal: the reply cannot hold one entry */

static uint32_t nfsstat(int e)
{
    switch (e) {
    case 0: return NFS3_OK;
    case -EPERM: return NFS3ERR_PERM;
    case -ENOENT: return NFS3ERR_NOENT;
    case -ENXIO: return NFS3ERR_NXIO;
    case -EACCES: return NFS3ERR_ACCES;
    case -EEXIST: return NFS3ERR_EXIST;
    case -EXDEV: return NFS3ERR_XDEV;
    case -ENODEV: return NFS3ERR_NODEV;
    case -ENOTDIR: return NFS3ERR_NOTDIR;
    case -EISDIR: return NFS3ERR_ISDIR;
    case -EINVAL: return NFS3ERR_INVAL;
    case -EFBIG: return NFS3ERR_FBIG;
    case -ENOSPC: return NFS3ERR_NOSPC;
    case -EROFS: return NFS3ERR_ROFS;
    case -EMLINK: return NFS3ERR_MLINK;
    case -ENAMETOOLONG: return NFS3ERR_NAMETOOLONG;
    case -ENOTEMPTY: return NFS3ERR_NOTEMPTY;
    case -EDQUOT: return NFS3ERR_DQUOT;
    case -ESTALE: return NFS3ERR_STALE;
    case -EBADF: return NFS3ERR_BADHANDLE;
    case -EOPNOTSUPP: return NFS3ERR_NOTSUPP;
    case -EAGAIN: return NFS3ERR_JUKEBOX;
    case -EIO: return NFS3ERR_IO;
    /* No good copy of a block: a medium error to the client, as a disk's. */
    case -ECKSUM: return NFS3ERR_IO;
    default: return NFS3ERR_SERVERFAULT;
    }
}

/* ------------------------------------------------------------ per-call state */

typedef struct ctx {
    nfs_call_t *call;
    nfs_xdr_t *a, *r;
    nfs_export_t *exp;
    zpl_cred_t cred;
    bool writable;
} ctx_t;

/* Resolves a file handle argument to a node; errors are negative errnos (-EBADF
 * for garbage = BADHANDLE). The first handle of a call decides the export;
 * a second one must be on the same export (else XDEV). */
static int get_node(ctx_t *c, zpl_node_t **out)
{
    uint32_t len;
    const uint8_t *fh = nfs_xdr_get_opaque(c->a, &len, FH3_MAX);
    *out = NULL;
    if (c->a->err) return -EPROTO;
    uint64_t guid;
    if (zpl_fh_export_guid(fh, len, &guid) < 0) return -EBADF;
    nfs_export_t *exp;
    int found = nfs_export_lookup_fh(c->call->srv, fh, len, &exp);
    if (found) return found; /* -ESTALE, or -EAGAIN (JUKEBOX) while suspended */
    if (c->exp && c->exp != exp) {
        nfs_export_rele(exp);
        return -EXDEV;
    }
    if (!c->exp) {
        int rc = nfs_export_authorize(exp, c->call, &c->cred, &c->writable);
        if (rc) {
            nfs_export_rele(exp);
            return rc;
        }
        c->exp = exp;
    } else {
        nfs_export_rele(exp);
    }
    int rc = zpl_fh_to_inode(nfs_export_fs(c->exp), fh, len, out);
    if (rc == -EINVAL) rc = -EBADF;
    return rc;
}

/* Name arguments: up to 255 bytes, no NUL or '/'. */
static int get_name(ctx_t *c, char *name)
{
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(c->a, &len, 4096);
    if (c->a->err) return -EPROTO;
    if (len > ZPL_NAME_MAX) return -ENAMETOOLONG;
    memcpy(name, p, len);
    name[len] = '\0';
    if (strlen(name) != len || strchr(name, '/')) return -EINVAL;
    if (len == 0) return -ENOENT;
    return 0;
}

/* ------------------------------------------------------------ encoders */

static uint32_t ftype(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return NF3REG;
    case S_IFDIR: return NF3DIR;
    case S_IFBLK: return NF3BLK;
    case S_IFCHR: return NF3CHR;
    case S_IFLNK: return NF3LNK;
    case S_IFSOCK: return NF3SOCK;
    case S_IFIFO: return NF3FIFO;
    default: return NF3REG;
    }
}

static void put_time(nfs_xdr_t *r, int64_t ns)
{
    if (ns < 0) ns = 0;
    nfs_xdr_put_u32(r, (uint32_t)(ns / 1000000000));
    nfs_xdr_put_u32(r, (uint32_t)(ns % 1000000000));
}

static void put_fattr(nfs_xdr_t *r, const zpl_attr_t *a)
{
    nfs_xdr_put_u32(r, ftype(a->mode));
    nfs_xdr_put_u32(r, a->mode & 07777);
    nfs_xdr_put_u32(r, a->nlink > UINT32_MAX ? UINT32_MAX : (uint32_t)a->nlink);
    nfs_xdr_put_u32(r, a->uid);
    nfs_xdr_put_u32(r, a->gid);
    nfs_xdr_put_u64(r, a->size);
    nfs_xdr_put_u64(r, a->used);
    nfs_xdr_put_u32(r, major(a->rdev));
    nfs_xdr_put_u32(r, minor(a->rdev));
    nfs_xdr_put_u64(r, a->fsid);
    nfs_xdr_put_u64(r, a->ino);
    put_time(r, a->atime_ns);
    put_time(r, a->mtime_ns);
    put_time(r, a->ctime_ns);
}

static void put_post_attr(nfs_xdr_t *r, zpl_node_t *n)
{
    zpl_attr_t a;
    if (n && zpl_getattr(n, &a) == 0) {
        nfs_xdr_put_u32(r, 1);
        put_fattr(r, &a);
    } else {
        nfs_xdr_put_u32(r, 0);
    }
}

/* wcc_data: a ZPL wcc when the operation ran (ok), else whatever we know. */
static void put_wcc(nfs_xdr_t *r, const zpl_wcc_t *w, bool valid, zpl_node_t *n)
{
    if (valid) {
        nfs_xdr_put_u32(r, 1);
        nfs_xdr_put_u64(r, w->pre_size);
        put_time(r, w->pre_mtime_ns);
        put_time(r, w->pre_ctime_ns);
        nfs_xdr_put_u32(r, 1);
        put_fattr(r, &w->post);
    } else {
        nfs_xdr_put_u32(r, 0);
        put_post_attr(r, n);
    }
}

static void put_fh(nfs_xdr_t *r, zpl_node_t *n)
{
    zpl_fh_t fh;
    if (zpl_fh_encode(n, &fh) == 0) nfs_xdr_put_opaque(r, fh.bytes, ZPL_FH_SIZE);
    else nfs_xdr_put_opaque(r, NULL, 0);
}

static void put_post_fh(nfs_xdr_t *r, zpl_node_t *n)
{
    zpl_fh_t fh;
    if (n && zpl_fh_encode(n, &fh) == 0) {
        nfs_xdr_put_u32(r, 1);
        nfs_xdr_put_opaque(r, fh.bytes, ZPL_FH_SIZE);
    } else {
        nfs_xdr_put_u32(r, 0);
    }
}

/* ------------------------------------------------------------ sattr3 */

static void get_sattr(ctx_t *c, zpl_setattr_t *sa)
{
    nfs_xdr_t *a = c->a;
    memset(sa, 0, sizeof *sa);
    if (nfs_xdr_get_u32(a)) {
        sa->mask |= ZPL_SET_MODE;
        sa->mode = nfs_xdr_get_u32(a) & 07777;
    }
    if (nfs_xdr_get_u32(a)) {
        sa->mask |= ZPL_SET_UID;
        sa->uid = nfs_xdr_get_u32(a);
    }
    if (nfs_xdr_get_u32(a)) {
        sa->mask |= ZPL_SET_GID;
        sa->gid = nfs_xdr_get_u32(a);
    }
    if (nfs_xdr_get_u32(a)) {
        sa->mask |= ZPL_SET_SIZE;
        sa->size = nfs_xdr_get_u64(a);
    }
    for (int i = 0; i < 2; i++) {
        uint32_t how = nfs_xdr_get_u32(a);
        if (how == 1) {
            sa->mask |= i == 0 ? ZPL_SET_ATIME_NOW : ZPL_SET_MTIME_NOW;
        } else if (how == 2) {
            uint32_t s = nfs_xdr_get_u32(a), ns = nfs_xdr_get_u32(a);
            int64_t t = (int64_t)s * 1000000000 + ns;
            if (i == 0) sa->mask |= ZPL_SET_ATIME, sa->atime_ns = t;
            else sa->mask |= ZPL_SET_MTIME, sa->mtime_ns = t;
        } else if (how != 0) {
            a->err = true;
        }
    }
}

static bool is_member(const zpl_cred_t *cr, uint32_t gid)
{
    if (cr->gid == gid) return true;
    for (uint32_t i = 0; i < cr->ngroups && i < 16; i++)
        if (cr->groups[i] == gid) return true;
    return false;
}

/* 0 when cred has every bit of want on n. */
static int may(ctx_t *c, zpl_node_t *n, uint32_t want)
{
    uint32_t granted = 0;
    int rc = zpl_access(n, &c->cred, want, &granted);
    if (rc) return rc;
    return (granted & want) == want ? 0 : -EACCES;
}

/* For operations on names in a directory: NOTDIR before any permission. */
static int may_dir(ctx_t *c, zpl_node_t *dir, uint32_t want)
{
    zpl_attr_t at;
    int rc = zpl_getattr(dir, &at);
    if (rc) return rc;
    if (!S_ISDIR(at.mode)) return -ENOTDIR;
    return may(c, dir, want);
}

/* May the caller add a name to dir (create, mkdir, symlink, mknod, link)? The
 * export must be writable and dir a directory the caller may write and search. */
static int may_add_entry(ctx_t *c, zpl_node_t *dir)
{
    if (!c->writable) return -EROFS;
    return may_dir(c, dir, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC);
}

/* Permission for a setattr, as a local chmod/chown/truncate/utimes would be. */
static int may_setattr(ctx_t *c, zpl_node_t *n, const zpl_setattr_t *sa)
{
    if (c->cred.uid == 0) return 0;
    zpl_attr_t at;
    int rc = zpl_getattr(n, &at);
    if (rc) return rc;
    bool owner = at.uid == c->cred.uid;
    if ((sa->mask & ZPL_SET_MODE) && !owner) return -EPERM;
    if ((sa->mask & ZPL_SET_UID) && sa->uid != at.uid) return -EPERM;
    if ((sa->mask & ZPL_SET_GID) && sa->gid != at.gid && !(owner && is_member(&c->cred, sa->gid)))
        return -EPERM;
    if ((sa->mask & (ZPL_SET_ATIME | ZPL_SET_MTIME)) && !owner) return -EPERM;
    if ((sa->mask & (ZPL_SET_ATIME_NOW | ZPL_SET_MTIME_NOW)) && !owner &&
        may(c, n, ZPL_ACCESS_WRITE))
        return -EACCES;
    if ((sa->mask & ZPL_SET_SIZE) && !owner && may(c, n, ZPL_ACCESS_WRITE)) return -EACCES;
    return 0;
}

/* Sticky directories: only the owner of the entry or of the directory may
 * remove or rename it. */
static int may_delete(ctx_t *c, zpl_node_t *dir, const char *name)
{
    int rc = may_dir(c, dir, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC);
    if (rc || c->cred.uid == 0) return rc;
    zpl_attr_t da;
    if (zpl_getattr(dir, &da) || !(da.mode & S_ISVTX) || da.uid == c->cred.uid) return 0;
    zpl_node_t *n;
    if (zpl_lookup(dir, name, &n)) return 0;
    zpl_attr_t na;
    rc = zpl_getattr(n, &na);
    zpl_node_rele(n);
    if (rc) return 0;
    return na.uid == c->cred.uid ? 0 : -EACCES;
}

/* After a metadata change: stable before the reply (RFC 1813). */
static void commit_meta(ctx_t *c)
{
    if (c->exp && !nfs_export_sync_disabled(c->exp)) zpl_commit(nfs_export_fs(c->exp));
}

/* The credential new nodes are owned by. */
static const zpl_cred_t *owner_cred(ctx_t *c) { return &c->cred; }

/* ------------------------------------------------------------ procedures */

static void proc_getattr(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    if (rc == -EPROTO) return;
    zpl_attr_t at;
    if (!rc) rc = zpl_getattr(n, &at);
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    if (!rc) put_fattr(c->r, &at);
    if (n) zpl_node_rele(n);
}

static void proc_setattr(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    if (rc == -EPROTO) return;
    zpl_setattr_t sa;
    get_sattr(c, &sa);
    if (nfs_xdr_get_u32(c->a)) {
        uint32_t s = nfs_xdr_get_u32(c->a), ns = nfs_xdr_get_u32(c->a);
        sa.mask |= ZPL_SET_GUARD_CTIME;
        sa.guard_ctime_ns = (int64_t)s * 1000000000 + ns;
    }
    if (c->a->err) {
        if (n) zpl_node_rele(n);
        return;
    }
    zpl_wcc_t w;
    bool done = false, not_sync = false;
    if (!rc && !c->writable) rc = -EROFS;
    if (!rc) rc = may_setattr(c, n, &sa);
    if (!rc) rc = nfs4_deleg_yield(c->call->srv, n, true);
    if (!rc) {
        rc = zpl_setattr(n, &sa, &w);
        /* A failed guard is NOT_SYNC, not "try later". */
        if (rc == -EAGAIN && (sa.mask & ZPL_SET_GUARD_CTIME)) not_sync = true;
        done = rc == 0;
        if (done) commit_meta(c);
    }
    nfs_xdr_put_u32(c->r, not_sync ? NFS3ERR_NOT_SYNC : nfsstat(rc));
    put_wcc(c->r, &w, done, n);
    if (n) zpl_node_rele(n);
}

static void proc_lookup(ctx_t *c)
{
    zpl_node_t *dir, *n = NULL;
    int rc = get_node(c, &dir);
    if (rc == -EPROTO) return;
    char name[ZPL_NAME_MAX + 1];
    int nrc = get_name(c, name);
    if (nrc == -EPROTO) {
        c->a->err = true;
        if (dir) zpl_node_rele(dir);
        return;
    }
    if (!rc) rc = nrc;
    if (!rc) rc = may_dir(c, dir, ZPL_ACCESS_EXEC);
    if (!rc) rc = zpl_lookup(dir, name, &n);
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    if (!rc) {
        put_fh(c->r, n);
        put_post_attr(c->r, n);
    }
    put_post_attr(c->r, dir);
    if (n) zpl_node_rele(n);
    if (dir) zpl_node_rele(dir);
}

static void proc_access(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    uint32_t want = nfs_xdr_get_u32(c->a);
    if (rc == -EPROTO || c->a->err) {
        if (n) zpl_node_rele(n);
        c->a->err = true;
        return;
    }
    zpl_attr_t at;
    uint32_t granted = 0, out = 0;
    if (!rc) rc = zpl_getattr(n, &at);
    if (!rc) rc = zpl_access(n, &c->cred, ZPL_ACCESS_READ | ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC,
                             &granted);
    if (!rc) {
        bool dir = S_ISDIR(at.mode);
        if (granted & ZPL_ACCESS_READ) out |= ACCESS3_READ;
        if (granted & ZPL_ACCESS_WRITE && c->writable)
            out |= ACCESS3_MODIFY | ACCESS3_EXTEND | (dir ? ACCESS3_DELETE : 0);
        if (granted & ZPL_ACCESS_EXEC) out |= dir ? ACCESS3_LOOKUP : ACCESS3_EXECUTE;
        out &= want;
    }
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_post_attr(c->r, n);
    if (!rc) nfs_xdr_put_u32(c->r, out);
    if (n) zpl_node_rele(n);
}

static void proc_readlink(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    if (rc == -EPROTO) return;
    char buf[ZPL_SYMLINK_MAX + 1];
    size_t len = 0;
    if (!rc) rc = zpl_readlink(n, buf, sizeof buf, &len);
    if (!rc && len > ZPL_SYMLINK_MAX) rc = -EIO;
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_post_attr(c->r, n);
    if (!rc) nfs_xdr_put_opaque(c->r, buf, (uint32_t)len);
    if (n) zpl_node_rele(n);
}

/* Owner override: the owner may read and write his own regular file
 * whatever its mode, as kernel servers allow. */
static int may_io(ctx_t *c, zpl_node_t *n, uint32_t want, zpl_attr_t *at)
{
    int rc = zpl_getattr(n, at);
    if (rc) return rc;
    if (S_ISDIR(at->mode)) return -EISDIR;
    if (!S_ISREG(at->mode)) return -EINVAL;
    if (at->uid == c->cred.uid) return 0;
    return may(c, n, want);
}

static void proc_read(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    uint64_t off = nfs_xdr_get_u64(c->a);
    uint32_t count = nfs_xdr_get_u32(c->a);
    if (rc == -EPROTO || c->a->err) {
        if (n) zpl_node_rele(n);
        c->a->err = true;
        return;
    }
    if (count > NFS_IO_MAX) count = NFS_IO_MAX;
    zpl_attr_t at;
    if (!rc) rc = may_io(c, n, ZPL_ACCESS_READ, &at);
    if (!rc) rc = nfs4_deleg_yield(c->call->srv, n, false);   /* a write delegation */
    if (rc) {
        nfs_xdr_put_u32(c->r, nfsstat(rc));
        put_post_attr(c->r, n);
        if (n) zpl_node_rele(n);
        return;
    }
    /* Status and attributes go first, but the attributes must describe the
     * file after the read: reserve their room, read, then fill them in. */
    size_t head = c->r->pos;
    nfs_xdr_put_u32(c->r, NFS3_OK);
    size_t attr_pos = c->r->pos;
    uint8_t *hole = nfs_xdr_reserve(c->r, 4 + 84 + 4 + 4 + 4);
    if (!hole) goto out;
    size_t data_pos = c->r->pos;
    uint8_t *data = nfs_xdr_reserve(c->r, ((size_t)count + 3) & ~(size_t)3);
    if (!data) goto out;
    size_t nread = 0;
    bool eof = false;
    /* Records the ARC holds are lent to the reply rather than copied into it
     * (nfs_xdr_lend): the socket's copy is then the only one. */
    cairn_span_t sv[NFS_READ_SPANS];
    cairn_spans_t spans = {.v = sv, .cap = NFS_READ_SPANS};
    if (off >= at.size) rc = 0;
    else rc = zpl_read_spans(n, off, count, data, &nread, &eof, c->call->memory_only, &spans);
    if (off >= at.size) eof = true;
    if (rc == -EWOULDBLOCK && c->call->memory_only) {
        /* Nothing changed yet: the call runs again on a worker. */
        c->call->would_block = true;
        goto out;
    }
    if (rc) {
        c->r->pos = c->r->len = head;
        nfs_xdr_put_u32(c->r, nfsstat(rc));
        put_post_attr(c->r, n);
        goto out;
    }
    c->call->stat_read_bytes += nread;
    nfs_stats_file(c->call, c->exp, n);
    size_t padded = (nread + 3) & ~(size_t)3;
    memset(c->r->buf + data_pos + nread, 0, padded - nread);
    c->r->pos = c->r->len = attr_pos;
    zpl_attr_t post;
    if (zpl_getattr(n, &post) == 0) {
        nfs_xdr_put_u32(c->r, 1);
        put_fattr(c->r, &post);
    } else {
        nfs_xdr_put_u32(c->r, 1);
        put_fattr(c->r, &at);
    }
    nfs_xdr_put_u32(c->r, (uint32_t)nread);
    nfs_xdr_put_u32(c->r, eof ? 1 : 0);
    nfs_xdr_put_u32(c->r, (uint32_t)nread);
    c->r->pos = c->r->len = data_pos + padded;
    nfs_xdr_lend(c->r, data_pos, &spans);
out:
    zpl_node_rele(n);
}

static void proc_write(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    uint64_t off = nfs_xdr_get_u64(c->a);
    uint32_t count = nfs_xdr_get_u32(c->a);
    uint32_t stable = nfs_xdr_get_u32(c->a);
    uint32_t dlen;
    const uint8_t *data = nfs_xdr_get_opaque(c->a, &dlen, NFS_IO_MAX);
    if (rc == -EPROTO || c->a->err || stable > FILE_SYNC) {
        if (n) zpl_node_rele(n);
        c->a->err = true;
        return;
    }
    if (count > dlen) count = dlen;
    zpl_attr_t at;
    zpl_wcc_t w;
    bool done = false;
    if (!rc && !c->writable) rc = -EROFS;
    if (!rc) rc = may_io(c, n, ZPL_ACCESS_WRITE, &at);
    if (!rc && off + count < off) rc = -EFBIG;
    if (!rc) rc = nfs4_deleg_yield(c->call->srv, n, true);   /* JUKEBOX while recalled */
    if (!rc) {
        rc = zpl_write(n, off, count, data, stable == UNSTABLE ? 0 : ZPL_IO_SYNC, &w);
        done = rc == 0;
    }
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_wcc(c->r, &w, done, n);
    if (!rc) {
        c->call->stat_write_bytes += count;
        nfs_stats_file(c->call, c->exp, n);
        nfs_xdr_put_u32(c->r, count);
        nfs_xdr_put_u32(c->r, stable == UNSTABLE ? UNSTABLE : FILE_SYNC);
        nfs_xdr_put_u64(c->r, nfs_server_write_verifier(c->call->srv));
    }
    if (n) zpl_node_rele(n);
}

/* Shared tail of CREATE/MKDIR/SYMLINK/MKNOD: post_op_fh3, post_op_attr, wcc. */
static void put_create_res(ctx_t *c, int rc, zpl_node_t *n, zpl_node_t *dir,
                           const zpl_wcc_t *w, bool done)
{
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    if (!rc) {
        put_post_fh(c->r, n);
        put_post_attr(c->r, n);
    }
    put_wcc(c->r, w, done, dir);
}

/* Applies the attributes a create came with that the create itself did not
 * set (owner, size, times). Mode is given to the create. */
static int apply_create_attrs(ctx_t *c, zpl_node_t *n, zpl_setattr_t *sa)
{
    sa->mask &= ~(uint32_t)ZPL_SET_MODE;
    if (c->cred.uid != 0) sa->mask &= ~(uint32_t)(ZPL_SET_UID | ZPL_SET_GID);
    if (!sa->mask) return 0;
    zpl_wcc_t w;
    return zpl_setattr(n, sa, &w);
}

static int dir_and_name(ctx_t *c, zpl_node_t **dir, char *name)
{
    int rc = get_node(c, dir);
    if (rc == -EPROTO) return rc;
    int nrc = get_name(c, name);
    if (nrc == -EPROTO) {
        c->a->err = true;
        return nrc;
    }
    return rc ? rc : nrc;
}

static void proc_create(ctx_t *c)
{
    zpl_node_t *dir = NULL, *n = NULL;
    char name[ZPL_NAME_MAX + 1];
    int rc = dir_and_name(c, &dir, name);
    if (rc == -EPROTO) goto out;
    uint32_t how = nfs_xdr_get_u32(c->a);
    zpl_setattr_t sa = {0};
    uint8_t verf[ZPL_VERF_SIZE] = {0};
    if (how == ZPL_CREATE_EXCLUSIVE) {
        const uint8_t *v = nfs_xdr_get_fixed(c->a, ZPL_VERF_SIZE);
        if (v) memcpy(verf, v, ZPL_VERF_SIZE);
    } else if (how <= ZPL_CREATE_GUARDED) {
        get_sattr(c, &sa);
    } else {
        c->a->err = true;
    }
    if (c->a->err) goto out;
    zpl_wcc_t w;
    bool done = false;
    if (!rc) rc = may_add_entry(c, dir);
    if (!rc) {
        uint32_t mode = (sa.mask & ZPL_SET_MODE) ? sa.mode : 0644;
        if (how == ZPL_CREATE_EXCLUSIVE) mode = 0644;
        if (how == ZPL_CREATE_UNCHECKED && (sa.mask & ZPL_SET_SIZE)) {
            /* Truncating an existing file needs write permission on it. */
            zpl_node_t *old;
            if (zpl_lookup(dir, name, &old) == 0) {
                zpl_attr_t oa;
                if (zpl_getattr(old, &oa) == 0 && S_ISREG(oa.mode) && oa.uid != c->cred.uid)
                    rc = may(c, old, ZPL_ACCESS_WRITE);
                zpl_node_rele(old);
            }
        }
        if (!rc)
            rc = zpl_create(dir, name, S_IFREG | mode, owner_cred(c), (zpl_create_how_t)how, verf,
                            &n, &w);
        done = rc == 0;
        if (!rc && how != ZPL_CREATE_EXCLUSIVE) rc = apply_create_attrs(c, n, &sa);
        if (done) commit_meta(c);
    }
    put_create_res(c, rc, n, dir, &w, done);
out:
    if (n) zpl_node_rele(n);
    if (dir) zpl_node_rele(dir);
}

static void proc_mkdir(ctx_t *c)
{
    zpl_node_t *dir = NULL, *n = NULL;
    char name[ZPL_NAME_MAX + 1];
    int rc = dir_and_name(c, &dir, name);
    if (rc == -EPROTO) goto out;
    zpl_setattr_t sa;
    get_sattr(c, &sa);
    if (c->a->err) goto out;
    zpl_wcc_t w;
    bool done = false;
    if (!rc) rc = may_add_entry(c, dir);
    if (!rc) {
        uint32_t mode = (sa.mask & ZPL_SET_MODE) ? sa.mode : 0755;
        rc = zpl_mkdir(dir, name, S_IFDIR | mode, owner_cred(c), &n, &w);
        done = rc == 0;
        if (!rc) rc = apply_create_attrs(c, n, &sa);
        if (done) commit_meta(c);
    }
    put_create_res(c, rc, n, dir, &w, done);
out:
    if (n) zpl_node_rele(n);
    if (dir) zpl_node_rele(dir);
}

static void proc_symlink(ctx_t *c)
{
    zpl_node_t *dir = NULL, *n = NULL;
    char name[ZPL_NAME_MAX + 1];
    int rc = dir_and_name(c, &dir, name);
    if (rc == -EPROTO) goto out;
    zpl_setattr_t sa;
    get_sattr(c, &sa);
    uint32_t tlen;
    const uint8_t *t = nfs_xdr_get_opaque(c->a, &tlen, 65536);
    if (c->a->err) goto out;
    char target[ZPL_SYMLINK_MAX + 1];
    if (!rc && tlen > ZPL_SYMLINK_MAX) rc = -ENAMETOOLONG;
    if (!rc) {
        memcpy(target, t, tlen);
        target[tlen] = '\0';
        if (strlen(target) != tlen || tlen == 0) rc = -EINVAL;
    }
    zpl_wcc_t w;
    bool done = false;
    if (!rc) rc = may_add_entry(c, dir);
    if (!rc) {
        rc = zpl_symlink(dir, name, target, owner_cred(c), &n, &w);
        done = rc == 0;
        if (done) commit_meta(c);
    }
    put_create_res(c, rc, n, dir, &w, done);
out:
    if (n) zpl_node_rele(n);
    if (dir) zpl_node_rele(dir);
}

static void proc_mknod(ctx_t *c)
{
    zpl_node_t *dir = NULL, *n = NULL;
    char name[ZPL_NAME_MAX + 1];
    int rc = dir_and_name(c, &dir, name);
    if (rc == -EPROTO) goto out;
    uint32_t type = nfs_xdr_get_u32(c->a);
    zpl_setattr_t sa = {0};
    uint64_t rdev = 0;
    uint32_t fmt = 0;
    bool badtype = false;
    switch (type) {
    case NF3CHR:
    case NF3BLK: {
        get_sattr(c, &sa);
        uint32_t maj = nfs_xdr_get_u32(c->a), min = nfs_xdr_get_u32(c->a);
        rdev = makedev(maj, min);
        fmt = type == NF3CHR ? S_IFCHR : S_IFBLK;
        break;
    }
    case NF3SOCK:
    case NF3FIFO:
        get_sattr(c, &sa);
        fmt = type == NF3SOCK ? S_IFSOCK : S_IFIFO;
        break;
    default:
        badtype = true;
    }
    if (c->a->err) goto out;
    zpl_wcc_t w;
    bool done = false;
    if (!rc) rc = may_add_entry(c, dir);
    if (!rc && badtype) {
        nfs_xdr_put_u32(c->r, NFS3ERR_BADTYPE);
        put_wcc(c->r, &w, false, dir);
        goto out;
    }
    if (!rc && (fmt == S_IFCHR || fmt == S_IFBLK) && c->cred.uid != 0) rc = -EPERM;
    if (!rc) {
        uint32_t mode = (sa.mask & ZPL_SET_MODE) ? sa.mode : 0644;
        rc = zpl_mknod(dir, name, fmt | mode, rdev, owner_cred(c), &n, &w);
        done = rc == 0;
        if (!rc) rc = apply_create_attrs(c, n, &sa);
        if (done) commit_meta(c);
    }
    put_create_res(c, rc, n, dir, &w, done);
out:
    if (n) zpl_node_rele(n);
    if (dir) zpl_node_rele(dir);
}

static void proc_remove(ctx_t *c, bool rmdir)
{
    zpl_node_t *dir = NULL;
    char name[ZPL_NAME_MAX + 1];
    int rc = dir_and_name(c, &dir, name);
    if (rc == -EPROTO) goto out;
    zpl_wcc_t w;
    bool done = false;
    if (!rc && !c->writable) rc = -EROFS;
    if (!rc && rmdir && !strcmp(name, ".")) rc = -EINVAL;
    if (!rc && rmdir && !strcmp(name, "..")) rc = -ENOTEMPTY;
    if (!rc) rc = may_delete(c, dir, name);
    if (!rc && !rmdir) rc = nfs4_deleg_yield_name(c->call->srv, dir, name);
    if (!rc) {
        rc = rmdir ? zpl_rmdir(dir, name, &w) : zpl_remove(dir, name, &w);
        done = rc == 0;
        if (done) commit_meta(c);
    }
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_wcc(c->r, &w, done, dir);
out:
    if (dir) zpl_node_rele(dir);
}

static void proc_rename(ctx_t *c)
{
    zpl_node_t *sdir = NULL, *tdir = NULL;
    char sname[ZPL_NAME_MAX + 1], tname[ZPL_NAME_MAX + 1];
    int rc = dir_and_name(c, &sdir, sname);
    if (rc == -EPROTO) goto out;
    int rc2 = dir_and_name(c, &tdir, tname);
    if (rc2 == -EPROTO) goto out;
    if (!rc) rc = rc2;
    zpl_wcc_t sw, tw;
    bool done = false;
    if (!rc && !c->writable) rc = -EROFS;
    if (!rc) rc = may_delete(c, sdir, sname);
    if (!rc) rc = may_dir(c, tdir, ZPL_ACCESS_WRITE | ZPL_ACCESS_EXEC);
    if (!rc) {
        zpl_node_t *victim;
        if (zpl_lookup(tdir, tname, &victim) == 0) {
            zpl_node_rele(victim);
            rc = may_delete(c, tdir, tname);
        }
    }
    if (!rc) rc = nfs4_deleg_yield_name(c->call->srv, sdir, sname);
    if (!rc) rc = nfs4_deleg_yield_name(c->call->srv, tdir, tname);
    if (!rc) {
        rc = zpl_rename(sdir, sname, tdir, tname, &sw, &tw);
        done = rc == 0;
        if (done) commit_meta(c);
    }
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_wcc(c->r, &sw, done, sdir);
    put_wcc(c->r, &tw, done, tdir);
out:
    if (sdir) zpl_node_rele(sdir);
    if (tdir) zpl_node_rele(tdir);
}

static void proc_link(ctx_t *c)
{
    zpl_node_t *file = NULL, *dir = NULL;
    int rc = get_node(c, &file);
    if (rc == -EPROTO) goto out;
    char name[ZPL_NAME_MAX + 1];
    int rc2 = dir_and_name(c, &dir, name);
    if (rc2 == -EPROTO) goto out;
    if (!rc) rc = rc2;
    zpl_wcc_t w;
    bool done = false;
    if (!rc) rc = may_add_entry(c, dir);
    if (!rc) rc = nfs4_deleg_yield(c->call->srv, file, true);   /* its nlink changes */
    if (!rc) {
        rc = zpl_link(file, dir, name, &w);
        done = rc == 0;
        if (done) commit_meta(c);
    }
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_post_attr(c->r, file);
    put_wcc(c->r, &w, done, dir);
out:
    if (file) zpl_node_rele(file);
    if (dir) zpl_node_rele(dir);
}

/* ---- READDIR / READDIRPLUS ---- */

typedef struct dent {
    char *name;
    uint64_t ino, cookie;
} dent_t;

typedef struct dcollect {
    dent_t *v;
    size_t n, cap;
    size_t budget;       /* bytes left for entries */
    size_t dir_budget;   /* READDIRPLUS dircount */
    bool plus;
    bool full;
} dcollect_t;

static size_t xdr_str(size_t n) { return 4 + ((n + 3) & ~(size_t)3); }

static int collect(void *arg, const char *name, uint64_t ino, uint32_t type, uint64_t cookie)
{
    (void)type;
    dcollect_t *d = arg;
    size_t nl = strlen(name);
    size_t sz = 4 + 8 + xdr_str(nl) + 8;
    size_t dsz = sz;
    if (d->plus) sz += 4 + 84 + 4 + xdr_str(ZPL_FH_SIZE);
    if (sz > d->budget || (d->plus && dsz > d->dir_budget)) {
        d->full = true;
        return 1;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 64;
        dent_t *nv = realloc(d->v, nc * sizeof *nv);
        if (!nv) return 1;
        d->v = nv;
        d->cap = nc;
    }
    char *copy = strdup(name);
    if (!copy) return 1;
    d->v[d->n++] = (dent_t){copy, ino, cookie};
    d->budget -= sz;
    if (d->plus) d->dir_budget -= dsz;
    return 0;
}

/* A cookie verifier that changes only if the directory is replaced (cookies
 * stay valid while entries come and go). */
static uint64_t dir_verifier(const zpl_attr_t *a)
{
    return (a->ino * 0x9e3779b97f4a7c15ull) ^ (a->generation + 1) ^ a->crtime_ns;
}

static void proc_readdir(ctx_t *c, bool plus)
{
    zpl_node_t *dir;
    int rc = get_node(c, &dir);
    uint64_t cookie = nfs_xdr_get_u64(c->a);
    const uint8_t *vb = nfs_xdr_get_fixed(c->a, NFS3_COOKIEVERF);
    uint32_t dircount = nfs_xdr_get_u32(c->a);
    uint32_t maxcount = plus ? nfs_xdr_get_u32(c->a) : dircount;
    if (rc == -EPROTO || c->a->err) {
        if (dir) zpl_node_rele(dir);
        c->a->err = true;
        return;
    }
    uint64_t verf = 0;
    for (int i = 0; i < 8; i++) verf = verf << 8 | vb[i];
    zpl_attr_t da;
    if (!rc) rc = zpl_getattr(dir, &da);
    if (!rc && !S_ISDIR(da.mode)) rc = -ENOTDIR;
    if (!rc) rc = may(c, dir, ZPL_ACCESS_READ);
    uint64_t myverf = rc ? 0 : dir_verifier(&da);
    if (!rc && cookie != 0 && verf != 0 && verf != myverf) {
        nfs_xdr_put_u32(c->r, NFS3ERR_BAD_COOKIE);
        put_post_attr(c->r, dir);
        zpl_node_rele(dir);
        return;
    }
    if (maxcount > NFS_IO_MAX) maxcount = NFS_IO_MAX;
    /* status + dir attributes + verifier + end-of-list + eof */
    const size_t overhead = 4 + 4 + 84 + 8 + 4 + 4;
    dcollect_t d = {.plus = plus};
    bool eof = false;
    if (!rc) {
        if (maxcount <= overhead) {
            rc = TOOSMALL;
        } else {
            d.budget = maxcount - overhead;
            d.dir_budget = plus ? (dircount ? dircount : maxcount) : SIZE_MAX;
            rc = zpl_readdir(dir, cookie, collect, &d, &eof);
            if (!rc && d.n == 0 && !eof) rc = TOOSMALL;
        }
    }
    if (rc) {
        nfs_xdr_put_u32(c->r, rc == TOOSMALL ? NFS3ERR_TOOSMALL : nfsstat(rc));
        put_post_attr(c->r, dir);
        goto out;
    }
    nfs_xdr_put_u32(c->r, NFS3_OK);
    put_post_attr(c->r, dir);
    nfs_xdr_put_u64(c->r, myverf);
    for (size_t i = 0; i < d.n; i++) {
        nfs_xdr_put_u32(c->r, 1);
        nfs_xdr_put_u64(c->r, d.v[i].ino);
        nfs_xdr_put_string(c->r, d.v[i].name);
        nfs_xdr_put_u64(c->r, d.v[i].cookie);
        if (plus) {
            zpl_node_t *n = NULL;
            if (!strcmp(d.v[i].name, ".") || !strcmp(d.v[i].name, "..") ||
                zpl_iget(zpl_node_fs(dir), d.v[i].ino, &n) != 0) {
                n = NULL;
                if (zpl_lookup(dir, d.v[i].name, &n) != 0) n = NULL;
            }
            put_post_attr(c->r, n);
            put_post_fh(c->r, n);
            if (n) zpl_node_rele(n);
        }
    }
    nfs_xdr_put_u32(c->r, 0);
    nfs_xdr_put_u32(c->r, eof && !d.full ? 1 : 0);
out:
    for (size_t i = 0; i < d.n; i++) free(d.v[i].name);
    free(d.v);
    if (dir) zpl_node_rele(dir);
}

static void proc_fsstat(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    if (rc == -EPROTO) return;
    zpl_statfs_t st;
    if (!rc) rc = zpl_statfs(zpl_node_fs(n), &st);
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_post_attr(c->r, n);
    if (!rc) {
        nfs_xdr_put_u64(c->r, st.total_bytes);
        nfs_xdr_put_u64(c->r, st.free_bytes);
        nfs_xdr_put_u64(c->r, st.avail_bytes);
        nfs_xdr_put_u64(c->r, st.total_files);
        nfs_xdr_put_u64(c->r, st.free_files);
        nfs_xdr_put_u64(c->r, st.free_files);
        nfs_xdr_put_u32(c->r, 0);
    }
    if (n) zpl_node_rele(n);
}

static void proc_fsinfo(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    if (rc == -EPROTO) return;
    zpl_statfs_t st;
    if (!rc) rc = zpl_statfs(zpl_node_fs(n), &st);
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_post_attr(c->r, n);
    if (!rc) {
        uint32_t pref = st.blocksize ? st.blocksize : 131072;
        if (pref < 65536) pref = 65536;
        if (pref > NFS_IO_MAX) pref = NFS_IO_MAX;
        nfs_xdr_put_u32(c->r, NFS_IO_MAX); /* rtmax */
        nfs_xdr_put_u32(c->r, pref);       /* rtpref */
        nfs_xdr_put_u32(c->r, 4096);       /* rtmult */
        nfs_xdr_put_u32(c->r, NFS_IO_MAX); /* wtmax */
        nfs_xdr_put_u32(c->r, pref);       /* wtpref */
        nfs_xdr_put_u32(c->r, 4096);       /* wtmult */
        nfs_xdr_put_u32(c->r, 65536);      /* dtpref */
        nfs_xdr_put_u64(c->r, ZPL_MAX_FILE_SIZE);
        nfs_xdr_put_u32(c->r, 0);          /* time_delta: 1 ns */
        nfs_xdr_put_u32(c->r, 1);
        nfs_xdr_put_u32(c->r, 0x1 | 0x2 | 0x8 | 0x10);
    }
    if (n) zpl_node_rele(n);
}

static void proc_pathconf(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    if (rc == -EPROTO) return;
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    put_post_attr(c->r, n);
    if (!rc) {
        nfs_xdr_put_u32(c->r, ZPL_LINK_MAX_DEFAULT);
        nfs_xdr_put_u32(c->r, ZPL_NAME_MAX);
        nfs_xdr_put_u32(c->r, 1); /* no_trunc */
        nfs_xdr_put_u32(c->r, 1); /* chown_restricted */
        nfs_xdr_put_u32(c->r, 0); /* case_insensitive */
        nfs_xdr_put_u32(c->r, 1); /* case_preserving */
    }
    if (n) zpl_node_rele(n);
}

static void proc_commit(ctx_t *c)
{
    zpl_node_t *n;
    int rc = get_node(c, &n);
    nfs_xdr_get_u64(c->a);
    nfs_xdr_get_u32(c->a);
    if (rc == -EPROTO || c->a->err) {
        if (n) zpl_node_rele(n);
        c->a->err = true;
        return;
    }
    zpl_attr_t pre;
    bool have_pre = false;
    if (!rc) have_pre = zpl_getattr(n, &pre) == 0;
    if (!rc && !c->writable) rc = -EROFS;
    if (!rc) rc = zpl_fsync(n);
    nfs_xdr_put_u32(c->r, nfsstat(rc));
    if (have_pre) {
        nfs_xdr_put_u32(c->r, 1);
        nfs_xdr_put_u64(c->r, pre.size);
        put_time(c->r, pre.mtime_ns);
        put_time(c->r, pre.ctime_ns);
        put_post_attr(c->r, n);
    } else {
        nfs_xdr_put_u32(c->r, 0);
        put_post_attr(c->r, n);
    }
    if (!rc) nfs_xdr_put_u64(c->r, nfs_server_write_verifier(c->call->srv));
    if (n) zpl_node_rele(n);
}

static void proc_remove_file(ctx_t *c) { proc_remove(c, false); }
static void proc_rmdir(ctx_t *c) { proc_remove(c, true); }
static void proc_readdir_names(ctx_t *c) { proc_readdir(c, false); }
static void proc_readdirplus(ctx_t *c) { proc_readdir(c, true); }

/* The procedure table, indexed by RFC 1813's procedure numbers. READS_ONLY
 * marks the procedures that change nothing and are cheap, the ones worth
 * trying on the I/O thread (nfs_impl.h): READDIR and READDIRPLUS change
 * nothing either, but a large directory's reply is long work that other
 * clients would wait behind. NULL has no handler: it answers nothing. */
enum { NFS3_READS_ONLY = 1 };
typedef struct nfs3_proc {
    const char *name;
    void (*run)(ctx_t *c);
    unsigned flags;
} nfs3_proc_t;

static const nfs3_proc_t nfs3_procs[] = {
    [NFSPROC3_NULL] = {"NULL", NULL, NFS3_READS_ONLY},
    [NFSPROC3_GETATTR] = {"GETATTR", proc_getattr, NFS3_READS_ONLY},
    [NFSPROC3_SETATTR] = {"SETATTR", proc_setattr, 0},
    [NFSPROC3_LOOKUP] = {"LOOKUP", proc_lookup, NFS3_READS_ONLY},
    [NFSPROC3_ACCESS] = {"ACCESS", proc_access, NFS3_READS_ONLY},
    [NFSPROC3_READLINK] = {"READLINK", proc_readlink, NFS3_READS_ONLY},
    [NFSPROC3_READ] = {"READ", proc_read, NFS3_READS_ONLY},
    [NFSPROC3_WRITE] = {"WRITE", proc_write, 0},
    [NFSPROC3_CREATE] = {"CREATE", proc_create, 0},
    [NFSPROC3_MKDIR] = {"MKDIR", proc_mkdir, 0},
    [NFSPROC3_SYMLINK] = {"SYMLINK", proc_symlink, 0},
    [NFSPROC3_MKNOD] = {"MKNOD", proc_mknod, 0},
    [NFSPROC3_REMOVE] = {"REMOVE", proc_remove_file, 0},
    [NFSPROC3_RMDIR] = {"RMDIR", proc_rmdir, 0},
    [NFSPROC3_RENAME] = {"RENAME", proc_rename, 0},
    [NFSPROC3_LINK] = {"LINK", proc_link, 0},
    [NFSPROC3_READDIR] = {"READDIR", proc_readdir_names, 0},
    [NFSPROC3_READDIRPLUS] = {"READDIRPLUS", proc_readdirplus, 0},
    [NFSPROC3_FSSTAT] = {"FSSTAT", proc_fsstat, 0},
    [NFSPROC3_FSINFO] = {"FSINFO", proc_fsinfo, 0},
    [NFSPROC3_PATHCONF] = {"PATHCONF", proc_pathconf, 0},
    [NFSPROC3_COMMIT] = {"COMMIT", proc_commit, 0},
};
#define NFS3_NPROCS (sizeof(nfs3_procs) / sizeof(nfs3_procs[0]))

const char *nfs3_proc_name(uint32_t proc)
{
    return proc < NFS3_NPROCS ? nfs3_procs[proc].name : NULL;
}

bool nfs3_proc_reads_only(uint32_t proc)
{
    return proc < NFS3_NPROCS && (nfs3_procs[proc].flags & NFS3_READS_ONLY);
}

nfs_accept_t nfs3_program(nfs_call_t *call)
{
    if (call->proc >= NFS3_NPROCS) return NFS_ACCEPT_PROC_UNAVAIL;
    const nfs3_proc_t *p = &nfs3_procs[call->proc];
    if (!p->run) return NFS_ACCEPT_SUCCESS;
    /* Only the calls that change nothing may run without waiting (rpc_server.c
     * sends nothing else here with memory_only; this keeps it so). */
    if (call->memory_only && !(p->flags & NFS3_READS_ONLY)) {
        call->would_block = true;
        return NFS_ACCEPT_SUCCESS;
    }
    ctx_t c = {.call = call, .a = &call->args, .r = call->res};
    p->run(&c);
    bool garbage = call->args.err;
    if (garbage) log_debug("nfs", "NFSv3 %s: arguments do not decode", p->name);
    nfs_stats_keep_export(call, c.exp); /* released once counted */
    return garbage ? NFS_ACCEPT_GARBAGE_ARGS : NFS_ACCEPT_SUCCESS;
}
