/* NFSv4 callback inputs that need no transport: the 4.0 callback address a
 * client gives SETCLIENTID (netid + universal address) and the callback
 * security parameters of CREATE_SESSION/BACKCHANNEL_CTL. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs4_impl.h"

#include <arpa/inet.h>
#include <string.h>

static bool parse(const char *netid, const char *uaddr, struct sockaddr_storage *ss)
{
    socklen_t sl = 0;
    return nfs4_cb_parse_addr((const uint8_t *)netid, (uint32_t)strlen(netid),
                              (const uint8_t *)uaddr, (uint32_t)strlen(uaddr), ss, &sl);
}

static void test_uaddr(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    assert_true(parse("tcp", "192.168.1.7.3.232", &ss));
    const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
    assert_int_equal(in->sin_family, AF_INET);
    assert_int_equal(ntohs(in->sin_port), 3 * 256 + 232);
    assert_int_equal(ntohl(in->sin_addr.s_addr), 0xc0a80107u);
    assert_true(parse("tcp6", "fe80::1.0.111", &ss));
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
    assert_int_equal(in6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(in6->sin6_port), 111);
    /* Not TCP, no port bytes, a byte out of range, not an address. */
    assert_false(parse("udp", "192.168.1.7.3.232", &ss));
    assert_false(parse("tcp", "192.168", &ss));
    assert_false(parse("tcp", "1.2.3.4.256.1", &ss));
    assert_false(parse("tcp", "host.example.1.2", &ss));
    assert_false(parse("tcp", "", &ss));
    assert_false(parse("tcp6", "1.2.3.4.0.1", &ss));
}

static void test_sec_parms(void **state)
{
    (void)state;
    /* AUTH_NONE then AUTH_SYS (stamp, "m", uid 5, gid 6, one group 7). */
    uint32_t sys[] = {1, 42, 1, 0x6d000000, 5, 6, 1, 7};
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 64);
    nfs_xdr_put_u32(&x, 2);
    nfs_xdr_put_u32(&x, 0);
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++) nfs_xdr_put_u32(&x, sys[i]);
    nfs_xdr_t d;
    nfs_xdr_init_decode(&d, x.buf, x.len);
    nfs4_cb_sec_t sec;
    assert_int_equal(nfs4_cb_sec_decode(&d, &sec), NFS4_OK);
    assert_int_equal(sec.flavor, NFS_AUTH_SYS);
    assert_int_equal(sec.len, 7 * 4);   /* the authsys_parms as given */
    assert_int_equal(d.pos, d.len);
    /* Only AUTH_NONE: callbacks go without a credential. */
    nfs_xdr_truncate(&x, 0);
    nfs_xdr_put_u32(&x, 1);
    nfs_xdr_put_u32(&x, 0);
    nfs_xdr_init_decode(&d, x.buf, x.len);
    assert_int_equal(nfs4_cb_sec_decode(&d, &sec), NFS4_OK);
    assert_int_equal(sec.flavor, NFS_AUTH_NONE);
    /* An unknown flavor, a truncated list. */
    nfs_xdr_truncate(&x, 0);
    nfs_xdr_put_u32(&x, 1);
    nfs_xdr_put_u32(&x, 9);
    nfs_xdr_init_decode(&d, x.buf, x.len);
    assert_int_equal(nfs4_cb_sec_decode(&d, &sec), NFS4ERR_BADXDR);
    nfs_xdr_truncate(&x, 0);
    nfs_xdr_put_u32(&x, 2);
    nfs_xdr_put_u32(&x, 0);
    nfs_xdr_init_decode(&d, x.buf, x.len);
    assert_int_equal(nfs4_cb_sec_decode(&d, &sec), NFS4ERR_BADXDR);
    nfs_xdr_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uaddr),
        cmocka_unit_test(test_sec_parms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
