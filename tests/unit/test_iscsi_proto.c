/* The iSCSI target's protocol logic on buffers: CRC32C (RFC 3720 B.4
 * vectors, hardware and table paths agree), BHS decoding, LUN encoding, the
 * CmdSN window, text keys, parameter negotiation, CHAP arithmetic, names. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/iscsi/iscsi_impl.h"

static void test_crc32c_rfc3720_vectors(void **state)
{
    (void)state;
    uint8_t buf[48];
    memset(buf, 0, 32);
    assert_int_equal(iscsi_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    assert_int_equal(iscsi_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    assert_int_equal(iscsi_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
    assert_int_equal(iscsi_crc32c(0, buf, 32), 0x113FDB5Cu);
    /* An iSCSI SCSI Read (10) command PDU header. */
    static const uint8_t read_pdu[48] = {
        0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14, 0, 0, 0, 0, 0, 0x04, 0,
        0, 0, 0, 0x14, 0, 0, 0, 0x18, 0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(iscsi_crc32c(0, read_pdu, 48), 0xD9963A56u);
    assert_int_equal(iscsi_crc32c_table(0, read_pdu, 48), 0xD9963A56u);
}

static void test_crc32c_paths_agree(void **state)
{
    (void)state;
    uint8_t *buf = malloc(70000);
    srand(7);
    for (size_t i = 0; i < 70000; i++) buf[i] = (uint8_t)rand();
    for (size_t len = 0; len < 300; len++)
        for (size_t off = 0; off < 9; off++)
            assert_int_equal(iscsi_crc32c(0, buf + off, len), iscsi_crc32c_table(0, buf + off, len));
    /* Continuation: crc(a||b) == crc(crc(a), b). */
    uint32_t whole = iscsi_crc32c(0, buf, 70000);
    assert_int_equal(iscsi_crc32c(iscsi_crc32c(0, buf, 12345), buf + 12345, 70000 - 12345), whole);
    free(buf);
}

static void test_bhs_parse(void **state)
{
    (void)state;
    uint8_t bhs[48] = {0};
    iscsi_bhs_info_t info;
    bhs[0] = 0x40 | ISCSI_OP_SCSI_CMD;
    bhs[1] = 0x80;
    bhs[4] = 2;            /* 8 bytes of AHS */
    bhs[5] = 0x01;
    bhs[6] = 0x00;
    bhs[7] = 0x03;         /* 65539 bytes of data */
    iscsi_put32(bhs + 16, 0xdeadbeef);
    assert_int_equal(iscsi_bhs_parse(bhs, 1 << 20, &info), 0);
    assert_int_equal(info.opcode, ISCSI_OP_SCSI_CMD);
    assert_true(info.immediate);
    assert_true(info.final);
    assert_int_equal(info.ahs_bytes, 8);
    assert_int_equal(info.data_len, 65539);
    assert_int_equal(info.data_padded, 65540);
    assert_int_equal(info.itt, 0xdeadbeef);
    /* Too much data for the negotiated limit. */
    assert_int_equal(iscsi_bhs_parse(bhs, 65536, &info), -EMSGSIZE);
    /* Target opcodes and unassigned ones are not for a target to receive. */
    bhs[0] = ISCSI_OP_SCSI_RSP;
    assert_int_equal(iscsi_bhs_parse(bhs, 1 << 20, &info), -EPROTO);
    bhs[0] = 0x1c;
    assert_int_equal(iscsi_bhs_parse(bhs, 1 << 20, &info), -EPROTO);
    bhs[0] = 0x80 | ISCSI_OP_NOP_OUT; /* reserved top bit */
    assert_int_equal(iscsi_bhs_parse(bhs, 1 << 20, &info), -EPROTO);
}

static void test_lun_codec(void **state)
{
    (void)state;
    uint8_t l[8];
    for (uint64_t lun = 0; lun < 16384; lun += 97) {
        iscsi_lun_encode(lun, l);
        assert_int_equal(iscsi_lun_decode(l), lun);
    }
    iscsi_lun_encode(5, l);
    assert_int_equal(l[0], 0);
    assert_int_equal(l[1], 5);
    iscsi_lun_encode(300, l);
    assert_int_equal(l[0], 0x41);
    assert_int_equal(l[1], 300 & 0xff);
    memset(l, 0, 8);
    l[0] = 0xc0; /* extended addressing: nothing we configure */
    assert_true(iscsi_lun_decode(l) > 16383);
}

static void test_cmdsn_window(void **state)
{
    (void)state;
    iscsi_cmdsn_window_t w = {.exp_cmdsn = 100, .depth = 4};
    assert_int_equal(iscsi_window_max(&w), 103);
    assert_int_equal(iscsi_window_check(&w, 100, false), ISCSI_CMDSN_ACCEPT);
    assert_int_equal(w.exp_cmdsn, 101);
    w.in_flight = 1;
    assert_int_equal(iscsi_window_max(&w), 103);
    /* duplicate and beyond the window: silently dropped */
    assert_int_equal(iscsi_window_check(&w, 100, false), ISCSI_CMDSN_DROP);
    assert_int_equal(iscsi_window_check(&w, 200, false), ISCSI_CMDSN_DROP);
    assert_int_equal(w.exp_cmdsn, 101);
    /* immediate commands do not advance */
    assert_int_equal(iscsi_window_check(&w, 101, true), ISCSI_CMDSN_IMMEDIATE);
    assert_int_equal(w.exp_cmdsn, 101);
    /* a full queue closes the window: MaxCmdSN = ExpCmdSN - 1 */
    w.in_flight = 4;
    assert_int_equal(iscsi_window_max(&w), 100);
    assert_int_equal(iscsi_window_check(&w, 101, false), ISCSI_CMDSN_DROP);
    w.in_flight = 0;
    /* serial arithmetic across the wrap */
    w.exp_cmdsn = 0xffffffffu;
    assert_int_equal(iscsi_window_check(&w, 0xffffffffu, false), ISCSI_CMDSN_ACCEPT);
    assert_int_equal(w.exp_cmdsn, 0);
    assert_int_equal(iscsi_window_check(&w, 0, false), ISCSI_CMDSN_ACCEPT);
    assert_true(iscsi_sn_lt(0xfffffff0u, 5));
    assert_false(iscsi_sn_lt(5, 0xfffffff0u));
}

static void test_text_keys(void **state)
{
    (void)state;
    static const char text[] = "InitiatorName=iqn.2020-01.x:y\0SessionType=Normal\0\0\0";
    iscsi_kv_iter_t it;
    const char *k, *v;
    assert_int_equal(iscsi_kv_iter_init(&it, (const uint8_t *)text, sizeof text - 1), 0);
    assert_int_equal(iscsi_kv_next(&it, &k, &v), 1);
    assert_string_equal(k, "InitiatorName");
    assert_string_equal(v, "iqn.2020-01.x:y");
    assert_int_equal(iscsi_kv_next(&it, &k, &v), 1);
    assert_string_equal(k, "SessionType");
    assert_int_equal(iscsi_kv_next(&it, &k, &v), 0);
    iscsi_kv_iter_fini(&it);
    /* no '=' / empty key / unterminated last pair */
    static const char bad1[] = "NoEquals\0";
    assert_int_equal(iscsi_kv_iter_init(&it, (const uint8_t *)bad1, sizeof bad1 - 1), 0);
    assert_int_equal(iscsi_kv_next(&it, &k, &v), -EINVAL);
    iscsi_kv_iter_fini(&it);
    static const char bad2[] = "=x\0";
    assert_int_equal(iscsi_kv_iter_init(&it, (const uint8_t *)bad2, sizeof bad2 - 1), 0);
    assert_int_equal(iscsi_kv_next(&it, &k, &v), -EINVAL);
    iscsi_kv_iter_fini(&it);
    static const char unterminated[] = {'A', '=', 'b'};
    assert_int_equal(iscsi_kv_iter_init(&it, (const uint8_t *)unterminated, 3), 0);
    assert_int_equal(iscsi_kv_next(&it, &k, &v), 1);
    assert_string_equal(v, "b");
    iscsi_kv_iter_fini(&it);

    iscsi_kv_out_t o = {0};
    for (int i = 0; i < 500; i++) assert_int_equal(iscsi_kv_add(&o, "Key", "Value"), 0);
    assert_int_equal(o.len, 500 * 10);
    assert_memory_equal(o.buf, "Key=Value\0Key", 13);
    iscsi_kv_out_free(&o);
}

/* Negotiates one key and returns our answer ("" when none). */
static const char *nego(iscsi_params_t *p, const char *key, const char *value, int *rc)
{
    static char answer[256];
    iscsi_kv_out_t o = {0};
    *rc = iscsi_param_negotiate(p, key, value, &o);
    answer[0] = '\0';
    if (o.len) {
        const char *eq = memchr(o.buf, '=', o.len);
        assert_non_null(eq);
        snprintf(answer, sizeof answer, "%s", eq + 1);
    }
    iscsi_kv_out_free(&o);
    return answer;
}

static void test_negotiation(void **state)
{
    (void)state;
    iscsi_params_t p;
    iscsi_params_defaults(&p);
    int rc;
    assert_string_equal(nego(&p, "HeaderDigest", "CRC32C,None", &rc), "CRC32C");
    assert_true(p.header_digest);
    assert_string_equal(nego(&p, "DataDigest", "None,CRC32C", &rc), "None");
    assert_false(p.data_digest);
    assert_string_equal(nego(&p, "DataDigest", "MD5", &rc), "Reject");
    assert_string_equal(nego(&p, "MaxConnections", "8", &rc), "1");
    assert_string_equal(nego(&p, "InitialR2T", "No", &rc), "No");
    assert_false(p.initial_r2t);
    assert_string_equal(nego(&p, "InitialR2T", "Yes", &rc), "Yes");
    assert_string_equal(nego(&p, "ImmediateData", "No", &rc), "No");
    assert_false(p.immediate_data);
    assert_string_equal(nego(&p, "MaxRecvDataSegmentLength", "65536", &rc), "");
    assert_int_equal(rc, 0);
    assert_int_equal(p.max_recv_dsl_initiator, 65536);
    assert_string_equal(nego(&p, "MaxBurstLength", "16777215", &rc), "16776192");
    assert_string_equal(nego(&p, "MaxBurstLength", "1048576", &rc), "1048576");
    assert_string_equal(nego(&p, "FirstBurstLength", "16777215", &rc), "262144");
    assert_string_equal(nego(&p, "DefaultTime2Wait", "0", &rc), "2");
    assert_string_equal(nego(&p, "DefaultTime2Retain", "20", &rc), "0");
    assert_string_equal(nego(&p, "MaxOutstandingR2T", "64", &rc), "16");
    assert_string_equal(nego(&p, "ErrorRecoveryLevel", "2", &rc), "0");
    assert_string_equal(nego(&p, "DataPDUInOrder", "No", &rc), "Yes");
    assert_string_equal(nego(&p, "DataSequenceInOrder", "No", &rc), "Yes");
    assert_string_equal(nego(&p, "IFMarker", "Yes", &rc), "No");
    /* Illegal values fail the login. */
    nego(&p, "MaxRecvDataSegmentLength", "100", &rc);
    assert_int_equal(rc, -EINVAL);
    nego(&p, "MaxBurstLength", "16777216", &rc);
    assert_int_equal(rc, -EINVAL);
    nego(&p, "MaxBurstLength", "12abc", &rc);
    assert_int_equal(rc, -EINVAL);
    nego(&p, "MaxConnections", "0", &rc);
    assert_int_equal(rc, -EINVAL);
    nego(&p, "InitialR2T", "yes", &rc);
    assert_int_equal(rc, -EINVAL);
    nego(&p, "ErrorRecoveryLevel", "3", &rc);
    assert_int_equal(rc, -EINVAL);
    nego(&p, "DefaultTime2Wait", "-1", &rc);
    assert_int_equal(rc, -EINVAL);
    /* Unknown keys are for the caller (NotUnderstood). */
    nego(&p, "X-com.example.Foo", "1", &rc);
    assert_int_equal(rc, 1);
    /* Hex numbers are legal numeric values. */
    assert_string_equal(nego(&p, "MaxBurstLength", "0x1000", &rc), "4096");
}

static void test_chap(void **state)
{
    (void)state;
    uint8_t chal[16], out[16];
    for (int i = 0; i < 16; i++) chal[i] = (uint8_t)i;
    /* MD5(0x2a || "secretsecret12" || 00 01 .. 0f), computed independently. */
    static const uint8_t want[16] = {0x98, 0x60, 0xbd, 0x91, 0x69, 0x5f, 0xa1, 0x9d,
                                     0x45, 0x38, 0xa1, 0x0a, 0xde, 0x82, 0x96, 0x98};
    iscsi_chap_response(0x2a, "secretsecret12", chal, 16, out);
    assert_memory_equal(out, want, 16);

    char hex[64];
    iscsi_chap_encode_hex(want, 16, hex, sizeof hex);
    assert_string_equal(hex, "0x9860bd91695fa19d4538a10ade829698");
    uint8_t back[32];
    assert_int_equal(iscsi_chap_decode(hex, back, sizeof back), 16);
    assert_memory_equal(back, want, 16);
    assert_int_equal(iscsi_chap_decode("0X0A0b", back, sizeof back), 2);
    assert_int_equal(back[0], 0x0a);
    assert_int_equal(back[1], 0x0b);
    assert_int_equal(iscsi_chap_decode("0xabc", back, sizeof back), 2); /* odd: leading nibble */
    assert_int_equal(back[0], 0x0a);
    assert_int_equal(back[1], 0xbc);
    /* base64 "AQID" = 01 02 03 */
    assert_int_equal(iscsi_chap_decode("0bAQID", back, sizeof back), 3);
    assert_int_equal(back[2], 3);
    assert_int_equal(iscsi_chap_decode("0xzz", back, sizeof back), -EINVAL);
    assert_int_equal(iscsi_chap_decode("1234", back, sizeof back), -EINVAL);
    assert_int_equal(iscsi_chap_decode("0x", back, sizeof back), -EINVAL);
    char big[200] = "0x";
    memset(big + 2, 'a', 100);
    assert_int_equal(iscsi_chap_decode(big, back, sizeof back), -EINVAL);
}

static void test_names(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(iscsi_name_check("iqn.2026-11.org.cairn:tgt1", err, sizeof err), 0);
    assert_int_equal(iscsi_name_check("iqn.1998-01.com.vmware:esx-1", err, sizeof err), 0);
    assert_int_equal(iscsi_name_check("eui.02004567A425678D", err, sizeof err), 0);
    assert_int_equal(iscsi_name_check("naa.52004567BA64678D", err, sizeof err), 0);
    assert_int_equal(iscsi_name_check("naa.62004567BA64678D0123456789ABCDEF", err, sizeof err), 0);
    assert_int_equal(iscsi_name_check("iqn.2026-11.Org.cairn", err, sizeof err), -EINVAL);
    assert_int_equal(iscsi_name_check("iqn.26-11.org.cairn", err, sizeof err), -EINVAL);
    assert_int_equal(iscsi_name_check("iqn.2026-11", err, sizeof err), -EINVAL);
    assert_int_equal(iscsi_name_check("iqn.2026-11.org cairn", err, sizeof err), -EINVAL);
    assert_int_equal(iscsi_name_check("eui.0200", err, sizeof err), -EINVAL);
    assert_int_equal(iscsi_name_check("tgt1", err, sizeof err), -EINVAL);
    assert_int_equal(iscsi_name_check("", err, sizeof err), -EINVAL);
    char longname[300] = "iqn.2026-11.org.cairn:";
    memset(longname + strlen(longname), 'a', 220);
    assert_int_equal(iscsi_name_check(longname, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "iSCSI name"));
}

/* Random headers never crash the decoder and only ever yield its documented
 * results; a CI-friendly cousin of tests/fuzz/fuzz_iscsi_pdu.c. */
static void test_random_headers(void **state)
{
    (void)state;
    srand(12345);
    uint8_t bhs[48];
    for (int round = 0; round < 200000; round++) {
        for (int i = 0; i < 48; i++) bhs[i] = (uint8_t)rand();
        if (round & 1) bhs[0] &= 0x7f;
        iscsi_bhs_info_t info;
        int rc = iscsi_bhs_parse(bhs, 262144, &info);
        assert_true(rc == 0 || rc == -EPROTO || rc == -EMSGSIZE);
        if (rc == 0) {
            assert_true(iscsi_opcode_known(info.opcode));
            assert_true(info.data_len <= 262144);
            assert_true(info.data_padded % 4 == 0 && info.data_padded - info.data_len < 4);
        }
        (void)iscsi_lun_decode(bhs + 8);
        iscsi_kv_iter_t it;
        const char *k, *v;
        assert_int_equal(iscsi_kv_iter_init(&it, bhs, 48), 0);
        int n = 0;
        while (iscsi_kv_next(&it, &k, &v) > 0) n++;
        assert_true(n <= 24);
        iscsi_kv_iter_fini(&it);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_rfc3720_vectors),
        cmocka_unit_test(test_crc32c_paths_agree),
        cmocka_unit_test(test_bhs_parse),
        cmocka_unit_test(test_lun_codec),
        cmocka_unit_test(test_cmdsn_window),
        cmocka_unit_test(test_text_keys),
        cmocka_unit_test(test_negotiation),
        cmocka_unit_test(test_chap),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_random_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
