/*
 * NFSv4.2 operations (RFC 7862) on top of the 4.1 COMPOUND (nfs4.c):
 *
 *   SEEK        where data or a hole begins (zpl_seek: the DMU's records,
 *               so a hole is a run of whole records never written or freed)
 *   ALLOCATE    fallocate mode 0 as copy-on-write can honour it: the space is
 *               checked, the size extended, nothing reserved (zpl_allocate)
 *   DEALLOCATE  hole punching: whole records are freed, the rest zeroed, the
 *               size kept; logged and durable before the reply
 *   READ_PLUS   READ that sends holes as (offset, length) instead of zeros
 *   COPY        intra-server and synchronous, nothing crosses the wire; at
 *               most NFS42_COPY_MAX bytes per call. The records both ranges
 *               cover whole are cloned (zpl_clone_range: the pool shares the
 *               source's blocks through its block reference table), the
 *               unaligned head and tail are read and written (zpl_copy_range).
 *   CLONE       the same by clones alone, in units of clone_blksize (the
 *               record size, advertised as FATTR4 77); where the pool cannot
 *               share (another record size, a gang block) it copies.
 *               Clones are not in the intent log: each waits for its txg.
 *
 * Every other 4.2 operation (COPY_NOTIFY, OFFLOAD_CANCEL/STATUS - there are no
 * asynchronous copies to ask about - IO_ADVISE, LAYOUTERROR/STATS,
 * WRITE_SAME) is NFS4ERR_NOTSUPP, as RFC 7862 allows for optional
 * operations.
 *
 * Extended attributes (RFC 8276: GETXATTR, SETXATTR, LISTXATTRS, REMOVEXATTR)
 * are the ZPL's (zpl_getxattr & co.: kept in the dataset with the node, values
 * up to 8 KiB); reading them takes read permission, changing them write
 * permission on a writable export, as ACCESS's XAREAD/XAWRITE/XALIST say.
 *
 * The dispatcher (nfs4.c) sends only minor version 2 here: in 4.0 and 4.1
 * these operation numbers do not exist (NFS4ERR_OP_ILLEGAL).
 *
 * Stateids are checked like READ's and WRITE's (nfs4_check_io_stateid), except
 * that ALLOCATE and DEALLOCATE take the all-ones stateid as the anonymous one,
 * as Linux nfsd does (pynfs ALLOC3 expects it): an open that denies writing
 * still refuses them, as it refuses anonymous WRITEs.
 */
#include "nfs4_compound.h"
#include "nfs_srv.h"

#include <stdlib.h>
#include <string.h>

enum nfs42_op {
    OP4_ALLOCATE = 59, OP4_COPY = 60, OP4_COPY_NOTIFY = 61, OP4_DEALLOCATE = 62,
    OP4_IO_ADVISE = 63, OP4_LAYOUTERROR = 64, OP4_LAYOUTSTATS = 65, OP4_OFFLOAD_CANCEL = 66,
    OP4_OFFLOAD_STATUS = 67, OP4_READ_PLUS = 68, OP4_SEEK = 69, OP4_WRITE_SAME = 70,
    OP4_CLONE = 71,
    OP4_GETXATTR = 72, OP4_SETXATTR = 73, OP4_LISTXATTRS = 74, OP4_REMOVEXATTR = 75,
};

enum { NFS4_CONTENT_DATA = 0, NFS4_CONTENT_HOLE = 1 };
enum { NFS4ERR_UNION_NOTSUPP = 10090, NFS4ERR_NOXATTR = 10095, NFS4ERR_XATTR2BIG = 10096 };
enum { SETXATTR4_EITHER = 0, SETXATTR4_CREATE = 1, SETXATTR4_REPLACE = 2 };
enum { NL4_NAME = 1, NL4_URL = 2, NL4_NETADDR = 3 };
enum { FILE_SYNC4 = 2 };

/* Most bytes one COPY moves: a synchronous copy holds a worker thread until
 * it is done, and the client's RPC timer runs meanwhile. A shorter count is a
 * legal answer; copy_file_range returns it and its caller asks for the rest. */
#define NFS42_COPY_MAX (64ull << 20)
/* Largest extended attribute value (the ZPL keeps up to ZAP_VALUE_MAX). */
#define NFS42_XATTR_MAX 8192u

/* ---------------------------------------------------------------- checks */

/* The current file may be read through sid. */
static uint32_t need_readable(nfs4_cx_t *cx, nfs4_stateid_t *sid)
{
    uint32_t st = nfs4_need_real_file(cx);
    if (st) return st;
    bool via_open = false;
    if ((st = nfs4_check_io_stateid(cx, sid, false, &via_open))) return st;
    return via_open ? NFS4_OK : nfs4_owner_perm(&cx->cur, ZPL_ACCESS_READ);
}

/* The arguments SEEK and READ_PLUS share (stateid, offset, then a word: what
 * to seek, how much to read), read, and the current file readable through the
 * stateid. */
static uint32_t readable_args(nfs4_cx_t *cx, uint64_t *off, uint32_t *word)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    *off = nfs_xdr_get_u64(cx->a);
    *word = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    return need_readable(cx, &sid);
}

/* The current file may be changed through sid. */
static uint32_t need_changeable(nfs4_cx_t *cx, nfs4_stateid_t *sid)
{
    uint32_t st = nfs4_need_real_file(cx);
    if (st) return st;
    if ((st = nfs4_need_writable(&cx->cur))) return st;
    bool via_open = false;
    if ((st = nfs4_check_io_stateid(cx, sid, true, &via_open))) return st;
    return via_open ? NFS4_OK : nfs4_owner_perm(&cx->cur, ZPL_ACCESS_WRITE);
}

/* Runs check on the saved file as if it were the current one (COPY's source):
 * the handles trade places for the call, so no reference changes hands. */
static uint32_t on_saved(nfs4_cx_t *cx, nfs4_stateid_t *sid,
                         uint32_t (*check)(nfs4_cx_t *, nfs4_stateid_t *))
{
    nfs4_cfh_t cur = cx->cur;
    cx->cur = cx->saved;
    uint32_t st = check(cx, sid);
    cx->saved = cx->cur;
    cx->cur = cur;
    return st;
}

/* ---------------------------------------------------------------- ALLOCATE, DEALLOCATE */

static uint32_t op_fallocate(nfs4_cx_t *cx, bool punch)
{
    nfs4_stateid_t sid;
    nfs4_get_stateid(cx->a, &sid);
    uint64_t off = nfs_xdr_get_u64(cx->a);
    uint64_t len = nfs_xdr_get_u64(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    if (nfs4_stateid_is_bypass(&sid)) memset(&sid, 0, sizeof sid);
    uint32_t st = need_changeable(cx, &sid);
    if (st) return st;
    if (len == 0) return NFS4ERR_INVAL;
    if (off > ZPL_MAX_FILE_SIZE || len > ZPL_MAX_FILE_SIZE - off) return NFS4ERR_FBIG;
    int rc = punch ? zpl_deallocate(cx->cur.node, off, len, NULL)
                   : zpl_allocate(cx->cur.node, off, len, NULL);
    return rc < 0 ? nfs4_errno_to_status(rc) : NFS4_OK;
}

/* ---------------------------------------------------------------- SEEK */

static uint32_t op_seek(nfs4_cx_t *cx)
{
    uint64_t off;
    uint32_t what;
    uint32_t st = readable_args(cx, &off, &what);
    if (st) return st;
    if (what != NFS4_CONTENT_DATA && what != NFS4_CONTENT_HOLE) return NFS4ERR_UNION_NOTSUPP;
    bool hole = what == NFS4_CONTENT_HOLE;
    uint64_t pos = 0;
    int rc = zpl_seek(cx->cur.node, off, hole, &pos);
    zpl_attr_t a;
    if ((rc == 0 || rc == -ENXIO) && zpl_getattr(cx->cur.node, &a) == 0) {
        /* RFC 7862 15.11.3: past the end of file is NXIO; no data after an
         * offset inside the file is OK with sr_eof set (and the size). */
        if (rc == -ENXIO && !hole && off < a.size) {
            rc = 0;
            pos = a.size;
        }
    } else if (rc == 0) {
        rc = -ESTALE; /* removed meanwhile */
    }
    if (rc < 0) return nfs4_errno_to_status(rc);
    bool eof = pos >= a.size;
    nfs_xdr_put_u32(cx->r, eof);
    nfs_xdr_put_u64(cx->r, pos);
    return NFS4_OK;
}

/* ---------------------------------------------------------------- READ_PLUS */

static void patch_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_hole(nfs_xdr_t *r, uint64_t off, uint64_t len)
{
    nfs_xdr_put_u32(r, NFS4_CONTENT_HOLE);
    nfs_xdr_put_u64(r, off);
    nfs_xdr_put_u64(r, len);
}

/* A data segment of [off, off + len): read straight into the reply. */
static int put_data(nfs4_cx_t *cx, uint64_t off, uint32_t len, size_t *nread)
{
    nfs_xdr_put_u32(cx->r, NFS4_CONTENT_DATA);
    nfs_xdr_put_u64(cx->r, off);
    size_t at = cx->r->pos;
    size_t pad = ((size_t)len + 3) & ~(size_t)3;
    if (!nfs_xdr_reserve(cx->r, 4 + pad)) return -ENOMEM;
    bool eof = false;
    int rc = zpl_read(cx->cur.node, off, len, cx->r->buf + at + 4, nread, &eof);
    if (rc < 0) return rc;
    uint8_t *p = cx->r->buf + at;
    patch_be32(p, (uint32_t)*nread);
    size_t used = ((size_t)*nread + 3) & ~(size_t)3;
    memset(p + 4 + *nread, 0, used - *nread);
    cx->r->pos = cx->r->len = at + 4 + used;
    return 0;
}

/* Segments of [pos, end): holes as holes, the rest as data. *pos ends where
 * the file (or the range) ends. */
static int put_segments(nfs4_cx_t *cx, uint64_t *pos, uint64_t end, uint32_t *nseg)
{
    zpl_node_t *n = cx->cur.node;
    while (*pos < end) {
        uint64_t data = *pos;
        int rc = zpl_seek(n, *pos, false, &data);
        if (rc == -ENXIO) data = end;
        else if (rc < 0) return rc;
        if (data > *pos) {
            uint64_t stop = data < end ? data : end;
            put_hole(cx->r, *pos, stop - *pos);
            (*nseg)++;
            *pos = stop;
            continue;
        }
        uint64_t hole = *pos;
        rc = zpl_seek(n, *pos, true, &hole);
        if (rc == -ENXIO) return 0; /* the file shrank meanwhile */
        if (rc < 0) return rc;
        uint64_t stop = hole < end ? hole : end;
        uint64_t want = stop - *pos;
        size_t got = 0;
        rc = put_data(cx, *pos, (uint32_t)want, &got);
        if (rc < 0) return rc;
        (*nseg)++;
        *pos += got;
        if (got < want) return 0; /* short read: the file shrank meanwhile */
    }
    return 0;
}

static uint32_t op_read_plus(nfs4_cx_t *cx)
{
    uint64_t off;
    uint32_t count;
    uint32_t st = readable_args(cx, &off, &count);
    if (st) return st;
    if (count > NFS4_MAX_IO) count = NFS4_MAX_IO;
    zpl_attr_t a;
    int rc = zpl_getattr(cx->cur.node, &a);
    if (rc < 0) return nfs4_errno_to_status(rc);
    size_t start = cx->r->pos;
    nfs_xdr_put_u32(cx->r, 0);   /* rpr_eof, patched */
    nfs_xdr_put_u32(cx->r, 0);   /* number of segments, patched */
    uint64_t pos = off, end = off < a.size ? off + CAIRN_MIN((uint64_t)count, a.size - off) : off;
    uint32_t nseg = 0;
    rc = put_segments(cx, &pos, end, &nseg);
    if (rc == 0 && cx->r->err) rc = -ENOMEM;
    if (rc < 0) {
        nfs_xdr_truncate(cx->r, start);
        return rc == -ENOMEM ? NFS4ERR_RESOURCE : nfs4_errno_to_status(rc);
    }
    /* The size may have moved while the segments were read: ask again. */
    rc = zpl_getattr(cx->cur.node, &a);
    if (rc < 0) {
        nfs_xdr_truncate(cx->r, start);
        return nfs4_errno_to_status(rc);
    }
    patch_be32(cx->r->buf + start, pos >= a.size);
    patch_be32(cx->r->buf + start + 4, nseg);
    return NFS4_OK;
}

/* ---------------------------------------------------------------- COPY */

/* Skips ca_source_server<>: how many entries there were. */
static uint32_t skip_netlocs(nfs_xdr_t *a, uint32_t *count)
{
    *count = nfs_xdr_get_u32(a);
    for (uint32_t i = 0; i < *count && !a->err; i++) {
        uint32_t len, kind = nfs_xdr_get_u32(a);
        switch (kind) {
        case NL4_NAME:
        case NL4_URL:
            (void)nfs_xdr_get_opaque(a, &len, NFS4_OPAQUE_LIMIT);
            break;
        case NL4_NETADDR:
            (void)nfs_xdr_get_opaque(a, &len, NFS4_OPAQUE_LIMIT); /* na_r_netid */
            (void)nfs_xdr_get_opaque(a, &len, NFS4_OPAQUE_LIMIT); /* na_r_addr */
            break;
        default:
            return NFS4ERR_BADXDR;
        }
    }
    return a->err ? NFS4ERR_BADXDR : NFS4_OK;
}

/* RFC 7862 15.2.3: both files regular (else WRONG_TYPE), both ranges inside
 * what can be addressed, the source range inside the source file (count 0:
 * to its end), no overlap within one file. */
static uint32_t copy_range_check(nfs4_cx_t *cx, uint64_t soff, uint64_t doff, uint64_t *count)
{
    zpl_attr_t sa;
    int rc = zpl_getattr(cx->saved.node, &sa);
    if (rc < 0) return nfs4_errno_to_status(rc);
    if (soff > sa.size) return NFS4ERR_INVAL;
    if (*count == 0) *count = sa.size - soff;
    if (*count > sa.size - soff) return NFS4ERR_INVAL;
    if (doff > ZPL_MAX_FILE_SIZE || *count > ZPL_MAX_FILE_SIZE - doff) return NFS4ERR_FBIG;
    bool same = zpl_node_fs(cx->saved.node) == zpl_node_fs(cx->cur.node) &&
                zpl_node_ino(cx->saved.node) == zpl_node_ino(cx->cur.node);
    if (same && *count && soff < doff + *count && doff < soff + *count) return NFS4ERR_INVAL;
    return NFS4_OK;
}

static uint32_t regular_or_wrong_type(uint32_t st)
{
    return st == NFS4ERR_ISDIR || st == NFS4ERR_SYMLINK || st == NFS4ERR_INVAL
               ? NFS4ERR_WRONG_TYPE : st;
}

/* A clone failure that copying gets around: another pool or record size,
 * a block that cannot be shared, a source that kept changing, one file. */
static bool clone_fallback(int rc)
{
    return rc == -EXDEV || rc == -EOPNOTSUPP || rc == -EAGAIN || rc == -EINVAL;
}

/* Whole records cloned, or copied where the pool cannot share them: COPY's
 * aligned middle and CLONE's whole records read the same either way. */
static int clone_else_copy(zpl_node_t *src, uint64_t soff, zpl_node_t *dst, uint64_t doff,
                           uint64_t len, uint64_t *done)
{
    int rc = zpl_clone_range(src, soff, dst, doff, len, done);
    if (rc < 0 && clone_fallback(rc)) rc = zpl_copy_range(src, soff, dst, doff, len, done);
    return rc;
}

/* The arguments COPY and CLONE begin with. */
typedef struct {
    nfs4_stateid_t src_sid, dst_sid;
    uint64_t soff, doff, count;
} copy_args_t;

static void copy_args_get(nfs_xdr_t *a, copy_args_t *ca)
{
    nfs4_get_stateid(a, &ca->src_sid);
    nfs4_get_stateid(a, &ca->dst_sid);
    ca->soff = nfs_xdr_get_u64(a);
    ca->doff = nfs_xdr_get_u64(a);
    ca->count = nfs_xdr_get_u64(a);
}

/* The checks COPY and CLONE share, in the order that decides the answer when
 * several fail: the arguments, both file handles, then (COPY only: nsrv
 * source servers named) NOTSUPP for an inter-server copy, then the saved file
 * readable and the current one changeable through their stateids. */
static uint32_t copy_ends_check(nfs4_cx_t *cx, copy_args_t *ca, uint32_t nsrv)
{
    if (cx->a->err) return NFS4ERR_BADXDR;
    if (cx->cur.kind == NFS4_FH_NONE || cx->saved.kind == NFS4_FH_NONE)
        return NFS4ERR_NOFILEHANDLE;
    if (nsrv) return NFS4ERR_NOTSUPP;
    uint32_t st;
    if ((st = on_saved(cx, &ca->src_sid, need_readable))) return regular_or_wrong_type(st);
    return regular_or_wrong_type(need_changeable(cx, &ca->dst_sid));
}

/* COPY: the records both ranges cover whole (when the offsets are as far
 * from a record boundary in both files) are cloned - the pool shares their
 * blocks instead of writing them again - and the unaligned head and tail are
 * copied. Whatever cannot be cloned is copied. Durable when it returns. */
static int copy_by_clones(zpl_node_t *src, uint64_t soff, zpl_node_t *dst, uint64_t doff,
                          uint64_t count, uint64_t *copied)
{
    *copied = 0;
    uint64_t rs = zpl_clone_blksize(src);
    if (!rs || rs != zpl_clone_blksize(dst) || soff % rs != doff % rs || src == dst)
        return zpl_copy_range(src, soff, dst, doff, count, copied);
    uint64_t head = CAIRN_MIN(count, (rs - soff % rs) % rs);
    uint64_t mid = (count - head) / rs * rs;
    int rc = 0;
    if (head) {
        rc = zpl_copy_range(src, soff, dst, doff, head, copied);
        if (rc < 0 || *copied < head) return rc;
    }
    if (mid) {
        uint64_t done = 0;
        rc = clone_else_copy(src, soff + head, dst, doff + head, mid, &done);
        *copied += done;
        if (rc < 0 || done < mid) return rc;
    }
    if (count > head + mid) {
        uint64_t done = 0;
        rc = zpl_copy_range(src, soff + head + mid, dst, doff + head + mid, count - head - mid,
                            &done);
        *copied += done;
    }
    return rc;
}

static uint32_t op_copy(nfs4_cx_t *cx)
{
    copy_args_t ca;
    copy_args_get(cx->a, &ca);
    (void)nfs_xdr_get_u32(cx->a);   /* ca_consecutive: a synchronous copy always is */
    (void)nfs_xdr_get_u32(cx->a);   /* ca_synchronous: done synchronously either way */
    uint32_t nsrv = 0;
    uint32_t st = skip_netlocs(cx->a, &nsrv);
    if (st) return st;
    if ((st = copy_ends_check(cx, &ca, nsrv))) return st;
    if ((st = copy_range_check(cx, ca.soff, ca.doff, &ca.count))) return st;
    uint64_t count = CAIRN_MIN(ca.count, NFS42_COPY_MAX);
    uint64_t copied = 0;
    int rc = count ? copy_by_clones(cx->saved.node, ca.soff, cx->cur.node, ca.doff, count, &copied)
                   : 0;
    /* What was copied stands (like a short WRITE); an error with nothing
     * copied is the answer. */
    if (rc < 0 && copied == 0) return nfs4_errno_to_status(rc);
    nfs_xdr_put_u32(cx->r, 0);      /* wr_callback_id<1>: none, the copy is done */
    nfs_xdr_put_u64(cx->r, copied);
    nfs_xdr_put_u32(cx->r, FILE_SYNC4);
    nfs_xdr_put_u64(cx->r, nfs_server_write_verifier(cx->call->srv));
    nfs_xdr_put_u32(cx->r, 1);      /* cr_consecutive */
    nfs_xdr_put_u32(cx->r, 1);      /* cr_synchronous */
    return NFS4_OK;
}

/* ---------------------------------------------------------------- CLONE */

/* RFC 7862 15.13: the range of the saved file (count 0: to its end) becomes
 * the range of the current one by sharing blocks. Offsets are multiples of
 * clone_blksize (the record size), and so is count unless the range ends at
 * the source's end; the partial last record is copied. Where the pool cannot
 * share (another record size, a gang block, a source that kept changing) the
 * range is copied: the result reads the same. Durable before the reply. */
static uint32_t op_clone(nfs4_cx_t *cx)
{
    copy_args_t ca;
    copy_args_get(cx->a, &ca);
    uint32_t st = copy_ends_check(cx, &ca, 0);
    if (st) return st;
    uint64_t soff = ca.soff, doff = ca.doff, count = ca.count;
    zpl_attr_t sa;
    int rc = zpl_getattr(cx->saved.node, &sa);
    if (rc < 0) return nfs4_errno_to_status(rc);
    uint64_t bs = zpl_clone_blksize(cx->saved.node);
    if (!bs) return NFS4ERR_INVAL;
    if (soff % bs || doff % bs) return NFS4ERR_INVAL;
    bool whole = count == 0;
    if ((st = copy_range_check(cx, soff, doff, &count))) return st;
    if (count % bs && !(whole || soff + count == sa.size)) return NFS4ERR_INVAL;
    uint64_t mid = count / bs * bs, done = 0;
    rc = 0;
    if (mid) {
        rc = clone_else_copy(cx->saved.node, soff, cx->cur.node, doff, mid, &done);
        if (rc < 0) return nfs4_errno_to_status(rc);
        if (done < mid) return NFS4ERR_INVAL; /* the source shrank meanwhile */
    }
    if (count > mid) {
        rc = zpl_copy_range(cx->saved.node, soff + mid, cx->cur.node, doff + mid, count - mid,
                            &done);
        if (rc < 0) return nfs4_errno_to_status(rc);
    }
    return NFS4_OK;
}

/* ---------------------------------------------------------------- xattrs */

static uint32_t xattr_status(int rc)
{
    switch (rc) {
    case -ENODATA: return NFS4ERR_NOXATTR;
    case -E2BIG: case -ERANGE: return NFS4ERR_XATTR2BIG;
    default: return nfs4_errno_to_status(rc);
    }
}

/* xattrkey4 into name[ZPL_NAME_MAX + 1]. */
static uint32_t xattr_name_get(nfs4_cx_t *cx, char *name)
{
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(cx->a, &len, NFS4_OPAQUE_LIMIT);
    if (cx->a->err) return NFS4ERR_BADXDR;
    if (len == 0 || memchr(p, 0, len)) return NFS4ERR_INVAL;
    if (len > ZPL_NAME_MAX) return NFS4ERR_NAMETOOLONG;
    memcpy(name, p, len);
    name[len] = 0;
    return NFS4_OK;
}

/* The current object's extended attributes may be read (or changed). */
static uint32_t xattr_access(nfs4_cx_t *cx, bool change)
{
    if (cx->cur.kind == NFS4_FH_NONE) return NFS4ERR_NOFILEHANDLE;
    if (cx->cur.kind != NFS4_FH_REAL) return change ? NFS4ERR_ROFS : NFS4ERR_NOXATTR;
    if (change) {
        uint32_t st = nfs4_need_writable(&cx->cur);
        if (st) return st;
    }
    return nfs4_perm(&cx->cur, cx->cur.node, change ? ZPL_ACCESS_WRITE : ZPL_ACCESS_READ);
}

static uint32_t op_getxattr(nfs4_cx_t *cx)
{
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = xattr_name_get(cx, name);
    if (st) return st;
    if ((st = xattr_access(cx, false))) return st;
    uint8_t *val = malloc(NFS42_XATTR_MAX);
    if (!val) return NFS4ERR_RESOURCE;
    size_t len = 0;
    int rc = zpl_getxattr(cx->cur.node, name, val, NFS42_XATTR_MAX, &len);
    if (rc == 0) nfs_xdr_put_opaque(cx->r, val, (uint32_t)len);
    free(val);
    return rc < 0 ? xattr_status(rc) : NFS4_OK;
}

static uint32_t op_setxattr(nfs4_cx_t *cx)
{
    uint32_t option = nfs_xdr_get_u32(cx->a);
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = xattr_name_get(cx, name);
    if (st) return st;
    uint32_t len;
    const uint8_t *val = nfs_xdr_get_opaque(cx->a, &len, NFS4_MAX_IO);
    if (cx->a->err) return NFS4ERR_BADXDR;
    if (option > SETXATTR4_REPLACE) return NFS4ERR_INVAL;
    if ((st = xattr_access(cx, true))) return st;
    if (len > NFS42_XATTR_MAX) return NFS4ERR_XATTR2BIG;
    zpl_wcc_t wcc;
    int rc = zpl_setxattr(cx->cur.node, name, val, len, (zpl_xattr_how_t)option, &wcc);
    if (rc < 0) return xattr_status(rc);
    nfs4_put_cinfo(cx->r, &wcc);
    return NFS4_OK;
}

static uint32_t op_removexattr(nfs4_cx_t *cx)
{
    char name[ZPL_NAME_MAX + 1];
    uint32_t st = xattr_name_get(cx, name);
    if (st) return st;
    if ((st = xattr_access(cx, true))) return st;
    zpl_wcc_t wcc;
    int rc = zpl_removexattr(cx->cur.node, name, &wcc);
    if (rc < 0) return xattr_status(rc);
    nfs4_put_cinfo(cx->r, &wcc);
    return NFS4_OK;
}

/* LISTXATTRS: names encoded while they fit in lxa_maxcount bytes of result. */
typedef struct xattr_list {
    nfs_xdr_t *r;
    uint32_t room;                    /* bytes left for names */
    uint32_t n;
    uint64_t cookie;                  /* of the last name taken */
} xattr_list_t;

static int list_cb(void *arg, const char *name, uint64_t cookie)
{
    xattr_list_t *l = arg;
    uint32_t len = (uint32_t)strlen(name), need = 4 + ((len + 3) & ~3u);
    if (need > l->room) return 1;
    nfs_xdr_put_opaque(l->r, name, len);
    l->room -= need;
    l->n++;
    l->cookie = cookie;
    return 0;
}

static uint32_t op_listxattrs(nfs4_cx_t *cx)
{
    uint64_t cookie = nfs_xdr_get_u64(cx->a);
    uint32_t maxcount = nfs_xdr_get_u32(cx->a);
    if (cx->a->err) return NFS4ERR_BADXDR;
    uint32_t st = xattr_access(cx, false);
    if (st == NFS4ERR_NOXATTR) st = NFS4_OK; /* the pseudo-root: none */
    if (st) return st;
    /* cookie, the array's count and eof around the names */
    const uint32_t fixed = 8 + 4 + 4;
    if (maxcount < fixed) return NFS4ERR_TOOSMALL;
    size_t start = cx->r->pos;
    nfs_xdr_put_u64(cx->r, 0);        /* lxr_cookie, patched */
    nfs_xdr_put_u32(cx->r, 0);        /* number of names, patched */
    xattr_list_t l = {.r = cx->r, .room = maxcount - fixed, .cookie = cookie};
    bool eof = true;
    int rc = cx->cur.kind == NFS4_FH_REAL
                 ? zpl_listxattr(cx->cur.node, cookie, list_cb, &l, &eof) : 0;
    if (rc == 0 && !eof && l.n == 0) rc = -ERANGE;  /* not even one name fits */
    if (rc < 0) {
        nfs_xdr_truncate(cx->r, start);
        return rc == -ERANGE ? NFS4ERR_TOOSMALL : nfs4_errno_to_status(rc);
    }
    nfs_xdr_put_u32(cx->r, eof);
    if (cx->r->err) return NFS4ERR_RESOURCE;
    uint8_t *p = cx->r->buf + start;
    patch_be32(p, (uint32_t)(l.cookie >> 32));
    patch_be32(p + 4, (uint32_t)l.cookie);
    patch_be32(p + 8, l.n);
    return NFS4_OK;
}

/* ---------------------------------------------------------------- dispatch */

uint32_t nfs42_dispatch(nfs4_cx_t *cx, uint32_t op)
{
    switch (op) {
    case OP4_ALLOCATE: return op_fallocate(cx, false);
    case OP4_DEALLOCATE: return op_fallocate(cx, true);
    case OP4_SEEK: return op_seek(cx);
    case OP4_READ_PLUS: return op_read_plus(cx);
    case OP4_COPY: return op_copy(cx);
    case OP4_CLONE: return op_clone(cx);
    case OP4_GETXATTR: return op_getxattr(cx);
    case OP4_SETXATTR: return op_setxattr(cx);
    case OP4_LISTXATTRS: return op_listxattrs(cx);
    case OP4_REMOVEXATTR: return op_removexattr(cx);
    default: return NFS4ERR_NOTSUPP;
    }
}
