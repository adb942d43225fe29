/*
 * NFSv4 attributes (RFC 7530 section 5, RFC 8881 section 5): bitmap4
 * encoding, the fattr4 encoder for GETATTR/READDIR/VERIFY, and the decoder of
 * settable attributes for SETATTR, OPEN and CREATE.
 *
 * Values are encoded in attribute-number order into a scratch buffer that
 * becomes the attrlist4 opaque; the returned bitmap names exactly what was
 * encoded, so an attribute we do not support is simply left out, as the RFC
 * asks. Owners are numeric strings ("1000"), which the Linux client accepts
 * without an idmapper; on input "name@domain" is understood for root and
 * nobody only.
 */
#include "nfs4_impl.h"

#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

void nfs4_bitmap_get(nfs_xdr_t *x, nfs4_bitmap_t *b, bool *extra)
{
    memset(b, 0, sizeof *b);
    if (extra) *extra = false;
    uint32_t n = nfs_xdr_get_u32(x);
    if (n > 64) { x->err = true; return; }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t w = nfs_xdr_get_u32(x);
        if (i < NFS4_BITMAP_WORDS) b->w[i] = w;
        else if (w && extra) *extra = true;
    }
}

void nfs4_bitmap_put(nfs_xdr_t *x, const nfs4_bitmap_t *b)
{
    uint32_t n = NFS4_BITMAP_WORDS;
    while (n > 0 && b->w[n - 1] == 0) n--;
    nfs_xdr_put_u32(x, n);
    for (uint32_t i = 0; i < n; i++) nfs_xdr_put_u32(x, b->w[i]);
}

static const unsigned supported_list[] = {
    FATTR4_SUPPORTED_ATTRS, FATTR4_TYPE, FATTR4_FH_EXPIRE_TYPE, FATTR4_CHANGE, FATTR4_SIZE,
    FATTR4_LINK_SUPPORT, FATTR4_SYMLINK_SUPPORT, FATTR4_NAMED_ATTR, FATTR4_FSID,
    FATTR4_UNIQUE_HANDLES, FATTR4_LEASE_TIME, FATTR4_RDATTR_ERROR, FATTR4_ACLSUPPORT,
    FATTR4_CANSETTIME, FATTR4_CASE_INSENSITIVE, FATTR4_CASE_PRESERVING,
    FATTR4_CHOWN_RESTRICTED, FATTR4_FILEHANDLE, FATTR4_FILEID, FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE, FATTR4_FILES_TOTAL, FATTR4_HOMOGENEOUS, FATTR4_MAXFILESIZE,
    FATTR4_MAXLINK, FATTR4_MAXNAME, FATTR4_MAXREAD, FATTR4_MAXWRITE, FATTR4_MODE,
    FATTR4_NO_TRUNC, FATTR4_NUMLINKS, FATTR4_OWNER, FATTR4_OWNER_GROUP, FATTR4_RAWDEV,
    FATTR4_SPACE_AVAIL, FATTR4_SPACE_FREE, FATTR4_SPACE_TOTAL, FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS, FATTR4_TIME_ACCESS_SET, FATTR4_TIME_CREATE, FATTR4_TIME_DELTA,
    FATTR4_TIME_METADATA, FATTR4_TIME_MODIFY, FATTR4_TIME_MODIFY_SET,
    FATTR4_MOUNTED_ON_FILEID,
};

void nfs4_supported_attrs(uint32_t minor, nfs4_bitmap_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof supported_list / sizeof supported_list[0]; i++)
        nfs4_bm_set(out, supported_list[i]);
    if (minor >= 1) nfs4_bm_set(out, FATTR4_SUPPATTR_EXCLCREAT);
    if (minor >= 2) {
        nfs4_bm_set(out, FATTR4_CLONE_BLKSIZE);
        nfs4_bm_set(out, FATTR4_SPACE_FREED);
        nfs4_bm_set(out, FATTR4_CHANGE_ATTR_TYPE);
        nfs4_bm_set(out, FATTR4_XATTR_SUPPORT);
        nfs4_bm_set(out, FATTR4_OPEN_ARGUMENTS);
    }
}

void nfs4_exclcreat_attrs(nfs4_bitmap_t *out)
{
    memset(out, 0, sizeof *out);
    nfs4_bm_set(out, FATTR4_SIZE);
    nfs4_bm_set(out, FATTR4_MODE);
    nfs4_bm_set(out, FATTR4_OWNER);
    nfs4_bm_set(out, FATTR4_OWNER_GROUP);
}

static uint32_t nfs4_type(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return NF4REG;
    case S_IFDIR: return NF4DIR;
    case S_IFBLK: return NF4BLK;
    case S_IFCHR: return NF4CHR;
    case S_IFLNK: return NF4LNK;
    case S_IFSOCK: return NF4SOCK;
    case S_IFIFO: return NF4FIFO;
    default: return NF4REG;
    }
}

static void put_time(nfs_xdr_t *x, int64_t ns)
{
    int64_t sec = ns / 1000000000, nsec = ns % 1000000000;
    if (nsec < 0) { nsec += 1000000000; sec--; }
    nfs_xdr_put_u64(x, (uint64_t)sec);
    nfs_xdr_put_u32(x, (uint32_t)nsec);
}

static void put_id(nfs_xdr_t *x, uint32_t id)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%u", id);
    nfs_xdr_put_string(x, buf);
}

/* Encodes one attribute value; false when we do not support it. */
static bool put_attr(nfs_xdr_t *x, const nfs4_attr_src_t *s, unsigned bit)
{
    const zpl_attr_t *a = &s->a;
    nfs4_bitmap_t bm;
    switch (bit) {
    case FATTR4_SUPPORTED_ATTRS:
        nfs4_supported_attrs(s->minor, &bm);
        nfs4_bitmap_put(x, &bm);
        return true;
    case FATTR4_TYPE: nfs_xdr_put_u32(x, nfs4_type(a->mode)); return true;
    case FATTR4_FH_EXPIRE_TYPE: nfs_xdr_put_u32(x, 0 /* FH4_PERSISTENT */); return true;
    case FATTR4_CHANGE: nfs_xdr_put_u64(x, a->change); return true;
    case FATTR4_SIZE: nfs_xdr_put_u64(x, a->size); return true;
    case FATTR4_LINK_SUPPORT: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_SYMLINK_SUPPORT: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_NAMED_ATTR: nfs_xdr_put_u32(x, 0); return true;
    case FATTR4_FSID:
        nfs_xdr_put_u64(x, s->fsid_major);
        nfs_xdr_put_u64(x, s->fsid_minor);
        return true;
    case FATTR4_UNIQUE_HANDLES: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_LEASE_TIME: nfs_xdr_put_u32(x, s->lease_time); return true;
    case FATTR4_RDATTR_ERROR: nfs_xdr_put_u32(x, s->rdattr_error); return true;
    case FATTR4_ACLSUPPORT: nfs_xdr_put_u32(x, 0); return true;
    case FATTR4_CANSETTIME: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_CASE_INSENSITIVE: nfs_xdr_put_u32(x, 0); return true;
    case FATTR4_CASE_PRESERVING: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_CHOWN_RESTRICTED: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_FILEHANDLE:
        if (!s->fh) return false;
        nfs_xdr_put_opaque(x, s->fh, s->fh_len);
        return true;
    case FATTR4_FILEID: nfs_xdr_put_u64(x, a->ino); return true;
    case FATTR4_FILES_AVAIL: nfs_xdr_put_u64(x, s->have_statfs ? s->sfs.free_files : 0); return true;
    case FATTR4_FILES_FREE: nfs_xdr_put_u64(x, s->have_statfs ? s->sfs.free_files : 0); return true;
    case FATTR4_FILES_TOTAL: nfs_xdr_put_u64(x, s->have_statfs ? s->sfs.total_files : 0); return true;
    case FATTR4_HOMOGENEOUS: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_MAXFILESIZE: nfs_xdr_put_u64(x, ZPL_MAX_FILE_SIZE); return true;
    case FATTR4_MAXLINK: nfs_xdr_put_u32(x, ZPL_LINK_MAX_DEFAULT); return true;
    case FATTR4_MAXNAME: nfs_xdr_put_u32(x, ZPL_NAME_MAX); return true;
    case FATTR4_MAXREAD: nfs_xdr_put_u64(x, NFS4_MAX_IO); return true;
    case FATTR4_MAXWRITE: nfs_xdr_put_u64(x, NFS4_MAX_IO); return true;
    case FATTR4_MODE: nfs_xdr_put_u32(x, a->mode & 07777); return true;
    case FATTR4_NO_TRUNC: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_NUMLINKS: nfs_xdr_put_u32(x, a->nlink > UINT32_MAX ? UINT32_MAX : (uint32_t)a->nlink); return true;
    case FATTR4_OWNER: put_id(x, a->uid); return true;
    case FATTR4_OWNER_GROUP: put_id(x, a->gid); return true;
    case FATTR4_RAWDEV:
        nfs_xdr_put_u32(x, major(a->rdev));
        nfs_xdr_put_u32(x, minor(a->rdev));
        return true;
    case FATTR4_SPACE_AVAIL: nfs_xdr_put_u64(x, s->have_statfs ? s->sfs.avail_bytes : 0); return true;
    case FATTR4_SPACE_FREE: nfs_xdr_put_u64(x, s->have_statfs ? s->sfs.free_bytes : 0); return true;
    case FATTR4_SPACE_TOTAL: nfs_xdr_put_u64(x, s->have_statfs ? s->sfs.total_bytes : 0); return true;
    case FATTR4_SPACE_USED: nfs_xdr_put_u64(x, a->used); return true;
    case FATTR4_TIME_ACCESS: put_time(x, a->atime_ns); return true;
    case FATTR4_TIME_CREATE: put_time(x, a->crtime_ns); return true;
    case FATTR4_TIME_DELTA: put_time(x, 1); return true;
    case FATTR4_TIME_METADATA: put_time(x, a->ctime_ns); return true;
    case FATTR4_TIME_MODIFY: put_time(x, a->mtime_ns); return true;
    case FATTR4_MOUNTED_ON_FILEID: nfs_xdr_put_u64(x, s->mounted_on_fileid); return true;
    case FATTR4_SUPPATTR_EXCLCREAT:
        if (s->minor < 1) return false;
        nfs4_exclcreat_attrs(&bm);
        nfs4_bitmap_put(x, &bm);
        return true;
    /* CLONE's unit (nfs42.c): the record size, the unit blocks are shared in. */
    case FATTR4_CLONE_BLKSIZE:
        if (s->minor < 2) return false;
        nfs_xdr_put_u32(x, a->blksize);
        return true;
    /* Removing the object's last link would free what its blocks hold. */
    case FATTR4_SPACE_FREED: nfs_xdr_put_u64(x, a->used); return true;
    /* The ZPL bumps `change` with every change: NFS4_CHANGE_TYPE_IS_MONOTONIC_INCR. */
    case FATTR4_CHANGE_ATTR_TYPE: nfs_xdr_put_u32(x, 0); return true;
    /* RFC 8276 extended attributes (nfs42.c). */
    case FATTR4_XATTR_SUPPORT: nfs_xdr_put_u32(x, 1); return true;
    case FATTR4_OPEN_ARGUMENTS: nfs4_open_arguments_put(x, s->minor); return true;
    default:
        return false;   /* unsupported, or write-only (time_*_set) */
    }
}

void nfs4_attrlist_encode(nfs_xdr_t *x, const nfs4_attr_src_t *src, const nfs4_bitmap_t *req,
                          nfs4_bitmap_t *done)
{
    nfs4_bitmap_t sup;
    nfs4_supported_attrs(src->minor, &sup);
    memset(done, 0, sizeof *done);
    for (unsigned bit = 0; bit < 32 * NFS4_BITMAP_WORDS; bit++) {
        if (!nfs4_bm_isset(req, bit) || !nfs4_bm_isset(&sup, bit)) continue;
        if (put_attr(x, src, bit)) nfs4_bm_set(done, bit);
    }
}

void nfs4_fattr_encode(nfs_xdr_t *x, const nfs4_attr_src_t *src, const nfs4_bitmap_t *req)
{
    nfs_xdr_t tmp;
    nfs4_bitmap_t done;
    nfs_xdr_init_encode(&tmp, 512);
    nfs4_attrlist_encode(&tmp, src, req, &done);
    if (tmp.err) {
        x->err = true;
    } else {
        nfs4_bitmap_put(x, &done);
        nfs_xdr_put_opaque(x, tmp.buf, (uint32_t)tmp.len);
    }
    nfs_xdr_free(&tmp);
}

bool nfs4_parse_owner(const uint8_t *s, uint32_t len, uint32_t *id)
{
    if (len == 0 || len > 64) return false;
    uint64_t v = 0;
    uint32_t i = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > UINT32_MAX) return false;
    }
    if (i == len) { *id = (uint32_t)v; return true; }
    /* name@domain: only the names every system agrees on. */
    uint32_t at = 0;
    while (at < len && s[at] != '@') at++;
    if (at == 4 && memcmp(s, "root", 4) == 0) { *id = 0; return true; }
    if (at == 6 && memcmp(s, "nobody", 6) == 0) { *id = 65534; return true; }
    return false;
}

static uint32_t get_settime(nfs_xdr_t *x, int64_t *ns, bool *now)
{
    uint32_t how = nfs_xdr_get_u32(x);
    if (how == 0) { *now = true; return NFS4_OK; }   /* SET_TO_SERVER_TIME4 */
    if (how != 1) return NFS4ERR_BADXDR;
    int64_t sec = (int64_t)nfs_xdr_get_u64(x);
    uint32_t nsec = nfs_xdr_get_u32(x);
    if (nsec >= 1000000000u) return NFS4ERR_INVAL;
    if (sec > INT64_MAX / 1000000000 - 1 || sec < INT64_MIN / 1000000000 + 1) return NFS4ERR_INVAL;
    *now = false;
    *ns = sec * 1000000000 + nsec;
    return NFS4_OK;
}

uint32_t nfs4_sattr_decode(nfs_xdr_t *x, nfs4_sattr_t *out)
{
    memset(out, 0, sizeof *out);
    bool extra;
    nfs4_bitmap_get(x, &out->set, &extra);
    uint32_t len;
    const uint8_t *p = nfs_xdr_get_opaque(x, &len, 1u << 20);
    if (x->err) return NFS4ERR_BADXDR;
    if (extra) return NFS4ERR_ATTRNOTSUPP;
    nfs_xdr_t v;
    nfs_xdr_init_decode(&v, p, len);
    nfs4_bitmap_t sup;
    nfs4_supported_attrs(1, &sup);
    zpl_setattr_t *sa = &out->sa;
    for (unsigned bit = 0; bit < 32 * NFS4_BITMAP_WORDS; bit++) {
        if (!nfs4_bm_isset(&out->set, bit)) continue;
        uint32_t st = NFS4_OK, slen;
        const uint8_t *s;
        bool now = false;
        switch (bit) {
        case FATTR4_SIZE:
            sa->size = nfs_xdr_get_u64(&v);
            sa->mask |= ZPL_SET_SIZE;
            break;
        case FATTR4_MODE:
            sa->mode = nfs_xdr_get_u32(&v) & 07777;
            sa->mask |= ZPL_SET_MODE;
            break;
        case FATTR4_OWNER:
            s = nfs_xdr_get_opaque(&v, &slen, NFS4_OPAQUE_LIMIT);
            if (v.err) return NFS4ERR_BADXDR;
            if (slen == 0) return NFS4ERR_INVAL;   /* no principal at all, not a bad one */
            if (!nfs4_parse_owner(s, slen, &sa->uid)) return NFS4ERR_BADOWNER;
            sa->mask |= ZPL_SET_UID;
            break;
        case FATTR4_OWNER_GROUP:
            s = nfs_xdr_get_opaque(&v, &slen, NFS4_OPAQUE_LIMIT);
            if (v.err) return NFS4ERR_BADXDR;
            if (slen == 0) return NFS4ERR_INVAL;   /* no principal at all, not a bad one */
            if (!nfs4_parse_owner(s, slen, &sa->gid)) return NFS4ERR_BADOWNER;
            sa->mask |= ZPL_SET_GID;
            break;
        case FATTR4_TIME_ACCESS_SET:
            st = get_settime(&v, &sa->atime_ns, &now);
            sa->mask |= now ? ZPL_SET_ATIME_NOW : ZPL_SET_ATIME;
            break;
        case FATTR4_TIME_MODIFY_SET:
            st = get_settime(&v, &sa->mtime_ns, &now);
            sa->mask |= now ? ZPL_SET_MTIME_NOW : ZPL_SET_MTIME;
            break;
        default:
            /* A supported but read-only attribute cannot be set. */
            return nfs4_bm_isset(&sup, bit) ? NFS4ERR_INVAL : NFS4ERR_ATTRNOTSUPP;
        }
        if (st != NFS4_OK) return st;
        if (v.err) return NFS4ERR_BADXDR;
    }
    if (v.pos != v.len) return NFS4ERR_BADXDR;
    return NFS4_OK;
}
