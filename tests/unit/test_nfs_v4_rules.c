/* NFSv4 rules that need no transport: byte-range lock conflicts, splitting and
 * merging (POSIX semantics), offset/length validation, 4.0 owner seqid
 * verdicts and which errors consume a seqid, stateid seqid ordering and the
 * special stateids, attribute bitmap encoding, settable-attribute decoding and
 * owner strings, and the errno mapping. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs4_impl.h"

#include <errno.h>

static int A, B;   /* two lock owners */

static void test_range_wire(void **state)
{
    (void)state;
    uint64_t f, l;
    assert_int_equal(nfs4_range_from_wire(0, 0, &f, &l), NFS4ERR_INVAL);
    assert_int_equal(nfs4_range_from_wire(10, 5, &f, &l), NFS4_OK);
    assert_true(f == 10 && l == 14);
    assert_int_equal(nfs4_range_from_wire(7, UINT64_MAX, &f, &l), NFS4_OK);
    assert_true(f == 7 && l == UINT64_MAX);
    assert_int_equal(nfs4_range_from_wire(UINT64_MAX - 1, 2, &f, &l), NFS4_OK);
    assert_true(l == UINT64_MAX);
    assert_int_equal(nfs4_range_from_wire(UINT64_MAX - 1, 3, &f, &l), NFS4ERR_INVAL);
}

static void test_range_conflicts(void **state)
{
    (void)state;
    nfs4_range_list_t L = { 0 };
    assert_int_equal(nfs4_range_set(&L, &A, 0, 99, READ_LT), 0);
    /* Readers share, a writer conflicts, the owner never conflicts with itself. */
    assert_int_equal(nfs4_range_conflict(&L, &B, 50, 60, READ_LT), -1);
    assert_int_equal(nfs4_range_conflict(&L, &B, 99, 200, WRITE_LT), 0);
    assert_int_equal(nfs4_range_conflict(&L, &B, 100, 200, WRITE_LT), -1);
    assert_int_equal(nfs4_range_conflict(&L, &A, 0, 99, WRITEW_LT), -1);
    /* B reads 100.., then A's write over it conflicts. */
    assert_int_equal(nfs4_range_set(&L, &B, 100, UINT64_MAX, READ_LT), 0);
    assert_true(nfs4_range_conflict(&L, &A, 150, 150, WRITE_LT) >= 0);
    assert_int_equal(nfs4_range_conflict(&L, &A, 150, 150, READ_LT), -1);
    nfs4_range_drop_owner(&L, &B);
    assert_false(nfs4_range_owner_holds(&L, &B));
    assert_int_equal(nfs4_range_conflict(&L, &A, 150, 150, WRITE_LT), -1);
    nfs4_range_free(&L);
}

static size_t count_owner(const nfs4_range_list_t *L, const void *o)
{
    size_t n = 0;
    for (size_t i = 0; i < L->n; i++) n += L->v[i].owner == o;
    return n;
}

static const nfs4_range_t *find_at(const nfs4_range_list_t *L, const void *o, uint64_t off)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->v[i].owner == o && L->v[i].first <= off && off <= L->v[i].last) return &L->v[i];
    return NULL;
}

static void test_range_split_merge(void **state)
{
    (void)state;
    nfs4_range_list_t L = { 0 };
    /* Unlocking the middle splits one lock in two. */
    assert_int_equal(nfs4_range_set(&L, &A, 0, 99, WRITE_LT), 0);
    assert_int_equal(nfs4_range_clear(&L, &A, 40, 59), 0);
    assert_int_equal(count_owner(&L, &A), 2);
    assert_null(find_at(&L, &A, 50));
    assert_int_equal(find_at(&L, &A, 39)->last, 39);
    assert_int_equal(find_at(&L, &A, 60)->first, 60);
    /* B may now lock the hole, not one byte more. */
    assert_int_equal(nfs4_range_conflict(&L, &B, 40, 59, WRITE_LT), -1);
    assert_true(nfs4_range_conflict(&L, &B, 40, 60, WRITE_LT) >= 0);
    /* Filling the hole with the same type merges back into one range. */
    assert_int_equal(nfs4_range_set(&L, &A, 40, 59, WRITE_LT), 0);
    assert_int_equal(count_owner(&L, &A), 1);
    assert_true(find_at(&L, &A, 0)->last == 99);
    /* Downgrading part of it to read splits by type. */
    assert_int_equal(nfs4_range_set(&L, &A, 10, 19, READ_LT), 0);
    assert_int_equal(count_owner(&L, &A), 3);
    assert_int_equal(find_at(&L, &A, 15)->type, READ_LT);
    assert_int_equal(find_at(&L, &A, 25)->type, WRITE_LT);
    assert_int_equal(nfs4_range_conflict(&L, &B, 15, 15, READ_LT), -1);
    assert_true(nfs4_range_conflict(&L, &B, 20, 20, READ_LT) >= 0);
    /* Unlock everything to the end of file. */
    assert_int_equal(nfs4_range_clear(&L, &A, 0, UINT64_MAX), 0);
    assert_int_equal(L.n, 0);
    /* Touching ranges up to the end merge without overflow. */
    assert_int_equal(nfs4_range_set(&L, &A, 10, UINT64_MAX, READ_LT), 0);
    assert_int_equal(nfs4_range_set(&L, &A, 0, 9, READ_LT), 0);
    assert_int_equal(L.n, 1);
    assert_true(L.v[0].first == 0 && L.v[0].last == UINT64_MAX);
    nfs4_range_free(&L);
}

static void test_seqids(void **state)
{
    (void)state;
    assert_int_equal(nfs4_seqid_check(false, 0, 77), NFS4_SEQ_NEW);
    assert_int_equal(nfs4_seqid_check(true, 5, 6), NFS4_SEQ_NEW);
    assert_int_equal(nfs4_seqid_check(true, 5, 5), NFS4_SEQ_REPLAY);
    assert_int_equal(nfs4_seqid_check(true, 5, 7), NFS4_SEQ_BAD);
    assert_int_equal(nfs4_seqid_check(true, 5, 4), NFS4_SEQ_BAD);
    assert_int_equal(nfs4_seqid_check(true, UINT32_MAX, 0), NFS4_SEQ_NEW);
    assert_true(nfs4_status_bumps_seqid(NFS4_OK));
    assert_true(nfs4_status_bumps_seqid(NFS4ERR_DENIED));
    assert_true(nfs4_status_bumps_seqid(NFS4ERR_NOENT));
    assert_false(nfs4_status_bumps_seqid(NFS4ERR_BAD_SEQID));
    assert_false(nfs4_status_bumps_seqid(NFS4ERR_BAD_STATEID));
    assert_false(nfs4_status_bumps_seqid(NFS4ERR_STALE_CLIENTID));
    assert_false(nfs4_status_bumps_seqid(NFS4ERR_NOFILEHANDLE));
    assert_false(nfs4_status_bumps_seqid(NFS4ERR_MOVED));
}

static void test_stateids(void **state)
{
    (void)state;
    assert_int_equal(nfs4_stateid_seqid_check(0, 3, 3), NFS4_OK);
    assert_int_equal(nfs4_stateid_seqid_check(0, 2, 3), NFS4ERR_OLD_STATEID);
    assert_int_equal(nfs4_stateid_seqid_check(0, 4, 3), NFS4ERR_BAD_STATEID);
    assert_int_equal(nfs4_stateid_seqid_check(0, 0, 3), NFS4ERR_OLD_STATEID);
    assert_int_equal(nfs4_stateid_seqid_check(1, 0, 3), NFS4_OK);   /* 4.1: "current" */
    assert_int_equal(nfs4_stateid_seqid_check(1, UINT32_MAX, 1), NFS4ERR_OLD_STATEID);
    nfs4_stateid_t s = { 0 };
    assert_true(nfs4_stateid_is_anon(&s));
    assert_false(nfs4_stateid_is_bypass(&s));
    s.seqid = 1;
    assert_true(nfs4_stateid_is_current(&s));
    assert_false(nfs4_stateid_is_anon(&s));
    s.seqid = UINT32_MAX;
    memset(s.other, 0xff, sizeof s.other);
    assert_true(nfs4_stateid_is_bypass(&s));
    s.other[5] = 0;
    assert_false(nfs4_stateid_is_bypass(&s));
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void test_bitmaps(void **state)
{
    (void)state;
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 64);
    nfs4_bitmap_t b = { { 0 } };
    nfs4_bm_set(&b, FATTR4_TYPE);
    nfs4_bm_set(&b, FATTR4_MODE);    /* word 1 */
    nfs4_bitmap_put(&x, &b);
    assert_int_equal(x.len, 12);     /* trailing zero word trimmed */
    assert_int_equal(be32(x.buf), 2);
    assert_int_equal(be32(x.buf + 4), 1u << 1);
    assert_int_equal(be32(x.buf + 8), 1u << 1);
    nfs_xdr_t d;
    nfs_xdr_init_decode(&d, x.buf, x.len);
    nfs4_bitmap_t back;
    bool extra;
    nfs4_bitmap_get(&d, &back, &extra);
    assert_false(d.err || extra);
    assert_memory_equal(&back, &b, sizeof b);
    nfs_xdr_free(&x);

    /* Words beyond ours are remembered when set, and an absurd count is an error. */
    uint8_t five[24] = { 0, 0, 0, 5 };
    five[23] = 1;
    nfs_xdr_init_decode(&d, five, sizeof five);
    nfs4_bitmap_get(&d, &back, &extra);
    assert_false(d.err);
    assert_true(extra);
    uint8_t huge[4] = { 0xff, 0xff, 0xff, 0xff };
    nfs_xdr_init_decode(&d, huge, sizeof huge);
    nfs4_bitmap_get(&d, &back, &extra);
    assert_true(d.err);

    nfs4_bitmap_t s0, s1;
    nfs4_supported_attrs(0, &s0);
    nfs4_supported_attrs(1, &s1);
    assert_true(nfs4_bm_isset(&s0, FATTR4_MOUNTED_ON_FILEID));
    assert_false(nfs4_bm_isset(&s0, FATTR4_SUPPATTR_EXCLCREAT));
    assert_true(nfs4_bm_isset(&s1, FATTR4_SUPPATTR_EXCLCREAT));
    assert_false(nfs4_bm_isset(&s1, FATTR4_ACL));
}

static void test_fattr_encode(void **state)
{
    (void)state;
    nfs4_attr_src_t src = { .minor = 1, .lease_time = 90, .fsid_major = 7 };
    src.a.mode = 0100640;
    src.a.size = 12345;
    src.a.uid = 1000;
    src.a.ino = 42;
    nfs4_bitmap_t req = { { 0 } };
    nfs4_bm_set(&req, FATTR4_TYPE);
    nfs4_bm_set(&req, FATTR4_SIZE);
    nfs4_bm_set(&req, FATTR4_ACL);        /* unsupported: left out */
    nfs4_bm_set(&req, FATTR4_FILEID);
    nfs4_bm_set(&req, FATTR4_OWNER);
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 64);
    nfs4_fattr_encode(&x, &src, &req);
    nfs_xdr_t d;
    nfs_xdr_init_decode(&d, x.buf, x.len);
    nfs4_bitmap_t got;
    nfs4_bitmap_get(&d, &got, NULL);
    assert_false(nfs4_bm_isset(&got, FATTR4_ACL));
    assert_true(nfs4_bm_isset(&got, FATTR4_SIZE) && nfs4_bm_isset(&got, FATTR4_OWNER));
    uint32_t len = nfs_xdr_get_u32(&d);
    assert_int_equal(len, 4 + 8 + 8 + 4 + 4);   /* type, size, fileid, "1000" */
    assert_int_equal(nfs_xdr_get_u32(&d), NF4REG);
    assert_int_equal(nfs_xdr_get_u64(&d), 12345);
    assert_int_equal(nfs_xdr_get_u64(&d), 42);
    uint32_t olen;
    const uint8_t *o = nfs_xdr_get_opaque(&d, &olen, 64);
    assert_int_equal(olen, 4);
    assert_memory_equal(o, "1000", 4);
    assert_false(d.err);
    nfs_xdr_free(&x);
}

/* Builds a fattr4 with the given bitmap and raw attrlist. */
static void make_fattr(nfs_xdr_t *x, const nfs4_bitmap_t *b, const void *vals, uint32_t len)
{
    nfs_xdr_init_encode(x, 64);
    nfs4_bitmap_put(x, b);
    nfs_xdr_put_opaque(x, vals, len);
}

static uint32_t decode_sattr(const nfs4_bitmap_t *b, const void *vals, uint32_t len,
                             nfs4_sattr_t *out)
{
    nfs_xdr_t x, d;
    make_fattr(&x, b, vals, len);
    nfs_xdr_init_decode(&d, x.buf, x.len);
    uint32_t st = nfs4_sattr_decode(&d, out);
    nfs_xdr_free(&x);
    return st;
}

static void test_sattr_decode(void **state)
{
    (void)state;
    nfs4_sattr_t sa;
    nfs4_bitmap_t b = { { 0 } };
    nfs4_bm_set(&b, FATTR4_SIZE);
    nfs4_bm_set(&b, FATTR4_MODE);
    nfs4_bm_set(&b, FATTR4_OWNER);
    nfs4_bm_set(&b, FATTR4_TIME_MODIFY_SET);
    const uint8_t vals[] = { 0, 0, 0, 0, 0, 0, 0x10, 0,      /* size 4096 */
                             0, 0, 0x81, 0xed,               /* mode with type bits: 0755 kept */
                             0, 0, 0, 3, '5', '0', '0', 0,   /* owner "500" */
                             0, 0, 0, 0 };                   /* mtime: server time */
    assert_int_equal(decode_sattr(&b, vals, sizeof vals, &sa), NFS4_OK);
    assert_int_equal(sa.sa.size, 4096);
    assert_int_equal(sa.sa.mode, 0755);
    assert_int_equal(sa.sa.uid, 500);
    assert_true(sa.sa.mask & ZPL_SET_MTIME_NOW);
    assert_false(sa.sa.mask & ZPL_SET_GID);

    /* A read-only attribute is INVAL, an unknown one ATTRNOTSUPP, a short list BADXDR. */
    nfs4_bitmap_t ro = { { 0 } };
    nfs4_bm_set(&ro, FATTR4_FILEID);
    uint8_t eight[8] = { 0 };
    assert_int_equal(decode_sattr(&ro, eight, 8, &sa), NFS4ERR_INVAL);
    nfs4_bitmap_t acl = { { 0 } };
    nfs4_bm_set(&acl, FATTR4_ACL);
    assert_int_equal(decode_sattr(&acl, eight, 8, &sa), NFS4ERR_ATTRNOTSUPP);
    assert_int_equal(decode_sattr(&b, vals, 6, &sa), NFS4ERR_BADXDR);
    /* Trailing garbage after the values is BADXDR too. */
    uint8_t longer[sizeof vals + 4] = { 0 };
    memcpy(longer, vals, sizeof vals);
    assert_int_equal(decode_sattr(&b, longer, sizeof longer, &sa), NFS4ERR_BADXDR);
    /* An owner nobody can map. */
    nfs4_bitmap_t ow = { { 0 } };
    nfs4_bm_set(&ow, FATTR4_OWNER);
    const uint8_t who[] = { 0, 0, 0, 9, 'a', 'l', 'i', 'c', 'e', '@', 'x', 'y', 'z', 0, 0, 0 };
    assert_int_equal(decode_sattr(&ow, who, sizeof who, &sa), NFS4ERR_BADOWNER);
    /* An empty owner or group names no principal: INVAL (pynfs SATT16/17). */
    const uint8_t empty[] = { 0, 0, 0, 0 };
    assert_int_equal(decode_sattr(&ow, empty, sizeof empty, &sa), NFS4ERR_INVAL);
    nfs4_bitmap_t grp = { { 0 } };
    nfs4_bm_set(&grp, FATTR4_OWNER_GROUP);
    assert_int_equal(decode_sattr(&grp, empty, sizeof empty, &sa), NFS4ERR_INVAL);
    /* Nanoseconds out of range. */
    nfs4_bitmap_t at = { { 0 } };
    nfs4_bm_set(&at, FATTR4_TIME_ACCESS_SET);
    const uint8_t t[] = { 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0x3b, 0x9a, 0xca, 0x00 };
    assert_int_equal(decode_sattr(&at, t, sizeof t, &sa), NFS4ERR_INVAL);
}

static void test_owner_strings(void **state)
{
    (void)state;
    uint32_t id = 7;
    assert_true(nfs4_parse_owner((const uint8_t *)"0", 1, &id) && id == 0);
    assert_true(nfs4_parse_owner((const uint8_t *)"4294967295", 10, &id) && id == UINT32_MAX);
    assert_false(nfs4_parse_owner((const uint8_t *)"4294967296", 10, &id));
    assert_true(nfs4_parse_owner((const uint8_t *)"root@example.com", 16, &id) && id == 0);
    assert_true(nfs4_parse_owner((const uint8_t *)"nobody@x", 8, &id) && id == 65534);
    assert_false(nfs4_parse_owner((const uint8_t *)"", 0, &id));
    assert_false(nfs4_parse_owner((const uint8_t *)"12a", 3, &id));
}

static void test_errno_map(void **state)
{
    (void)state;
    assert_int_equal(nfs4_errno_to_status(-ENOENT), NFS4ERR_NOENT);
    assert_int_equal(nfs4_errno_to_status(-ENOTEMPTY), NFS4ERR_NOTEMPTY);
    assert_int_equal(nfs4_errno_to_status(-EROFS), NFS4ERR_ROFS);
    assert_int_equal(nfs4_errno_to_status(-ESTALE), NFS4ERR_STALE);
    assert_int_equal(nfs4_errno_to_status(-EAGAIN), NFS4ERR_DELAY);
    assert_int_equal(nfs4_errno_to_status(-EDQUOT), NFS4ERR_DQUOT);
    assert_int_equal(nfs4_errno_to_status(-EMLINK), NFS4ERR_MLINK);
    assert_int_equal(nfs4_errno_to_status(-ENAMETOOLONG), NFS4ERR_NAMETOOLONG);
    assert_int_equal(nfs4_errno_to_status(-EXDEV), NFS4ERR_XDEV);
    assert_int_equal(nfs4_errno_to_status(-EOWNERDEAD), NFS4ERR_SERVERFAULT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_wire),
        cmocka_unit_test(test_range_conflicts),
        cmocka_unit_test(test_range_split_merge),
        cmocka_unit_test(test_seqids),
        cmocka_unit_test(test_stateids),
        cmocka_unit_test(test_bitmaps),
        cmocka_unit_test(test_fattr_encode),
        cmocka_unit_test(test_sattr_decode),
        cmocka_unit_test(test_owner_strings),
        cmocka_unit_test(test_errno_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
