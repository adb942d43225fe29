/*
 * NFSv4 byte-range lock lists and the small sequencing rules (owner seqids,
 * stateid seqids, special stateids), kept free of any other server state so
 * unit tests can drive them directly.
 *
 * A file's locks are an unsorted array of ranges; files rarely carry more
 * than a handful, so linear scans beat any tree. Setting a lock first carves
 * the owner's existing ranges out of [first,last] (keeping the parts outside)
 * and then inserts the new range, merging it with the owner's adjacent or
 * touching ranges of the same type, which is what POSIX fcntl locks do and
 * what the Linux client expects when it upgrades or splits a lock.
 */
#include "nfs4_impl.h"

#include <errno.h>
#include <stdlib.h>

uint32_t nfs4_range_from_wire(uint64_t offset, uint64_t length, uint64_t *first, uint64_t *last)
{
    if (length == 0) return NFS4ERR_INVAL;
    if (length == UINT64_MAX) {
        *first = offset;
        *last = UINT64_MAX;
        return NFS4_OK;
    }
    if (length - 1 > UINT64_MAX - offset) return NFS4ERR_INVAL;
    *first = offset;
    *last = offset + (length - 1);
    return NFS4_OK;
}

static bool overlaps(const nfs4_range_t *r, uint64_t first, uint64_t last)
{
    return r->first <= last && first <= r->last;
}

long nfs4_range_conflict(const nfs4_range_list_t *l, const void *owner, uint64_t first,
                         uint64_t last, uint32_t type)
{
    bool write = type == WRITE_LT || type == WRITEW_LT;
    for (size_t i = 0; i < l->n; i++) {
        const nfs4_range_t *r = &l->v[i];
        if (r->owner == owner || !overlaps(r, first, last)) continue;
        if (write || r->type == WRITE_LT) return (long)i;
    }
    return -1;
}

/* Room for one more range (the list unchanged when there is none). */
static int reserve_one(nfs4_range_list_t *l)
{
    if (l->n < l->cap) return 0;
    size_t cap = l->cap ? l->cap * 2 : 4;
    nfs4_range_t *v = realloc(l->v, cap * sizeof *v);
    if (!v) return -ENOMEM;
    l->v = v;
    l->cap = cap;
    return 0;
}

static int push(nfs4_range_list_t *l, nfs4_range_t r)
{
    if (reserve_one(l)) return -ENOMEM;
    l->v[l->n++] = r;
    return 0;
}

int nfs4_range_clear(nfs4_range_list_t *l, const void *owner, uint64_t first, uint64_t last)
{
    /* Reserve room for the one split that can add a range, so failure leaves
     * the list untouched. */
    if (reserve_one(l)) return -ENOMEM;
    for (size_t i = 0; i < l->n;) {
        nfs4_range_t *r = &l->v[i];
        if (r->owner != owner || !overlaps(r, first, last)) { i++; continue; }
        bool keep_left = r->first < first, keep_right = r->last > last;
        if (keep_left && keep_right) {
            nfs4_range_t right = *r;
            right.first = last + 1;
            r->last = first - 1;
            if (push(l, right)) return -ENOMEM;   /* cannot fail: room reserved */
            i++;
        } else if (keep_left) {
            r->last = first - 1;
            i++;
        } else if (keep_right) {
            r->first = last + 1;
            i++;
        } else {
            l->v[i] = l->v[--l->n];
        }
    }
    return 0;
}

int nfs4_range_set(nfs4_range_list_t *l, const void *owner, uint64_t first, uint64_t last,
                   uint32_t type)
{
    return nfs4_range_set_tagged(l, owner, first, last, type, false);
}

int nfs4_range_set_tagged(nfs4_range_list_t *l, const void *owner, uint64_t first,
                          uint64_t last, uint32_t type, bool nlm)
{
    type = (type == WRITE_LT || type == WRITEW_LT) ? WRITE_LT : READ_LT;
    int rc = nfs4_range_clear(l, owner, first, last);
    if (rc) return rc;
    /* Merge with the owner's same-type ranges that touch the new one. */
    for (size_t i = 0; i < l->n;) {
        nfs4_range_t *r = &l->v[i];
        bool touches = r->owner == owner && r->type == type &&
                       (r->last == UINT64_MAX || r->last + 1 >= first) &&
                       (last == UINT64_MAX || last + 1 >= r->first);
        if (!touches) { i++; continue; }
        if (r->first < first) first = r->first;
        if (r->last > last) last = r->last;
        l->v[i] = l->v[--l->n];
    }
    return push(l, (nfs4_range_t){ .first = first, .last = last, .type = type, .owner = owner,
                                   .nlm = nlm });
}

bool nfs4_range_owner_holds(const nfs4_range_list_t *l, const void *owner)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].owner == owner) return true;
    return false;
}

void nfs4_range_drop_owner(nfs4_range_list_t *l, const void *owner)
{
    for (size_t i = 0; i < l->n;) {
        if (l->v[i].owner == owner) l->v[i] = l->v[--l->n];
        else i++;
    }
}

void nfs4_range_free(nfs4_range_list_t *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

nfs4_seq_verdict_t nfs4_seqid_check(bool have_last, uint32_t last, uint32_t seqid)
{
    if (!have_last) return NFS4_SEQ_NEW;
    if (seqid == last + 1) return NFS4_SEQ_NEW;
    if (seqid == last) return NFS4_SEQ_REPLAY;
    return NFS4_SEQ_BAD;
}

bool nfs4_status_bumps_seqid(uint32_t status)
{
    switch (status) {
    case NFS4ERR_STALE_CLIENTID:
    case NFS4ERR_STALE_STATEID:
    case NFS4ERR_BAD_STATEID:
    case NFS4ERR_BAD_SEQID:
    case NFS4ERR_BADXDR:
    case NFS4ERR_RESOURCE:
    case NFS4ERR_NOFILEHANDLE:
    case NFS4ERR_MOVED:
        return false;
    default:
        return true;
    }
}

uint32_t nfs4_stateid_seqid_check(uint32_t minor, uint32_t presented, uint32_t current)
{
    if (minor >= 1 && presented == 0) return NFS4_OK;
    if (presented == current) return NFS4_OK;
    /* Serial-number comparison, so a wrapped counter still orders right. */
    if ((int32_t)(presented - current) < 0) return NFS4ERR_OLD_STATEID;
    return NFS4ERR_BAD_STATEID;
}

static bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return false;
    return true;
}

bool nfs4_stateid_is_anon(const nfs4_stateid_t *s)
{
    return s->seqid == 0 && all_bytes(s->other, 12, 0);
}

bool nfs4_stateid_is_bypass(const nfs4_stateid_t *s)
{
    return s->seqid == UINT32_MAX && all_bytes(s->other, 12, 0xff);
}

bool nfs4_stateid_is_current(const nfs4_stateid_t *s)
{
    return s->seqid == 1 && all_bytes(s->other, 12, 0);
}

uint32_t nfs4_errno_to_status(int err)
{
    if (err < 0) err = -err;
    switch (err) {
    case 0: return NFS4_OK;
    case EPERM: return NFS4ERR_PERM;
    case ENOENT: return NFS4ERR_NOENT;
    case EIO: return NFS4ERR_IO;
    case ECKSUM: return NFS4ERR_IO; /* no good copy of a block: a medium error */
    case ENXIO: return NFS4ERR_NXIO;
    case EACCES: return NFS4ERR_ACCESS;
    case EEXIST: return NFS4ERR_EXIST;
    case EXDEV: return NFS4ERR_XDEV;
    case ENOTDIR: return NFS4ERR_NOTDIR;
    case EISDIR: return NFS4ERR_ISDIR;
    case EINVAL: return NFS4ERR_INVAL;
    case EFBIG: return NFS4ERR_FBIG;
    case ENOSPC: return NFS4ERR_NOSPC;
    case EROFS: return NFS4ERR_ROFS;
    case EMLINK: return NFS4ERR_MLINK;
    case ENAMETOOLONG: return NFS4ERR_NAMETOOLONG;
    case ENOTEMPTY: return NFS4ERR_NOTEMPTY;
    case EDQUOT: return NFS4ERR_DQUOT;
    case ESTALE: return NFS4ERR_STALE;
    case EAGAIN: return NFS4ERR_DELAY;
    case EBUSY: return NFS4ERR_DELAY;
    case ENOTSUP: return NFS4ERR_NOTSUPP;
    case ELOOP: return NFS4ERR_SYMLINK;
    default: return NFS4ERR_SERVERFAULT;
    }
}
