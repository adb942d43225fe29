/*
 * ZIL record encoding: round trips of every field, and malformed records
 * (truncated, lying lengths, unterminated names, unknown types) refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cairn/zil.h>

#include <errno.h>
#include <string.h>

static void test_round_trip(void **state)
{
    (void)state;
    uint8_t data[1000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 3);
    zil_rec_t r = {.type = ZIL_REC_RENAME, .seq = 42, .txg = 77, .obj = 5, .off = 1ULL << 40,
                   .len = 1000, .arg = {1, 2, 3, UINT64_MAX}, .data = data, .dlen = 1000,
                   .name = "from-name", .name2 = "to"};
    uint8_t buf[2048];
    size_t n = zil_rec_encode(&r, buf, sizeof buf);
    assert_int_equal(n, zil_rec_encoded_size(&r));
    assert_int_equal(n % 8, 0);
    zil_rec_t d;
    size_t used = 0;
    assert_int_equal(zil_rec_decode(buf, n, &d, &used), 0);
    assert_int_equal(used, n);
    assert_int_equal(d.type, ZIL_REC_RENAME);
    assert_int_equal(d.seq, 42);
    assert_int_equal(d.txg, 77);
    assert_int_equal(d.obj, 5);
    assert_int_equal(d.off, 1ULL << 40);
    assert_int_equal(d.len, 1000);
    assert_int_equal(d.arg[3], UINT64_MAX);
    assert_int_equal(d.dlen, 1000);
    assert_memory_equal(d.data, data, 1000);
    assert_string_equal(d.name, "from-name");
    assert_string_equal(d.name2, "to");

    /* Without data or names. */
    zil_rec_t f = {.type = ZIL_REC_FREE, .seq = 1, .txg = 2, .obj = 3, .off = 4, .len = 5};
    n = zil_rec_encode(&f, buf, sizeof buf);
    assert_int_equal(n, ZIL_REC_HDR_SIZE);
    assert_int_equal(zil_rec_decode(buf, n, &d, &used), 0);
    assert_null(d.data);
    assert_null(d.name);
    assert_null(d.name2);
    assert_int_equal(d.len, 5);

    /* Back to back: a payload of several records decodes in order. */
    size_t o = zil_rec_encode(&r, buf, sizeof buf);
    o += zil_rec_encode(&f, buf + o, sizeof buf - o);
    assert_int_equal(zil_rec_decode(buf, o, &d, &used), 0);
    assert_int_equal(zil_rec_decode(buf + used, o - used, &d, &used), 0);
    assert_int_equal(d.type, ZIL_REC_FREE);
}

static void test_does_not_fit(void **state)
{
    (void)state;
    uint8_t data[100] = {0};
    zil_rec_t r = {.type = ZIL_REC_WRITE, .data = data, .dlen = 100, .len = 100};
    uint8_t buf[256];
    assert_int_equal(zil_rec_encode(&r, buf, ZIL_REC_HDR_SIZE + 99), 0);
    assert_int_not_equal(zil_rec_encode(&r, buf, sizeof buf), 0);
}

static void test_malformed(void **state)
{
    (void)state;
    uint8_t data[64];
    memset(data, 0xab, sizeof data);
    zil_rec_t r = {.type = ZIL_REC_CREATE, .seq = 9, .data = data, .dlen = 64, .name = "x"};
    uint8_t buf[512];
    size_t n = zil_rec_encode(&r, buf, sizeof buf);
    zil_rec_t d;
    size_t used;
    /* truncated: shorter than the header, and shorter than reclen */
    assert_int_equal(zil_rec_decode(buf, ZIL_REC_HDR_SIZE - 1, &d, &used), -EINVAL);
    assert_int_equal(zil_rec_decode(buf, n - 8, &d, &used), -EINVAL);
    /* reclen smaller than what the lengths claim */
    uint8_t bad[512];
    memcpy(bad, buf, n);
    uint32_t small = ZIL_REC_HDR_SIZE;
    memcpy(bad + 4, &small, 4);
    assert_int_equal(zil_rec_decode(bad, n, &d, &used), -EINVAL);
    /* reclen not a multiple of 8 */
    memcpy(bad, buf, n);
    uint32_t odd = (uint32_t)n - 1;
    memcpy(bad + 4, &odd, 4);
    assert_int_equal(zil_rec_decode(bad, n, &d, &used), -EINVAL);
    /* name not NUL-terminated */
    memcpy(bad, buf, n);
    bad[ZIL_REC_HDR_SIZE + 64 + 1] = 'y';
    assert_int_equal(zil_rec_decode(bad, n, &d, &used), -EINVAL);
    /* type 0 and types out of range */
    memcpy(bad, buf, n);
    uint32_t t = 0;
    memcpy(bad, &t, 4);
    assert_int_equal(zil_rec_decode(bad, n, &d, &used), -EINVAL);
    t = ZIL_REC_TYPE_MAX + 1;
    memcpy(bad, &t, 4);
    assert_int_equal(zil_rec_decode(bad, n, &d, &used), -EINVAL);
    /* the untouched record still decodes */
    assert_int_equal(zil_rec_decode(buf, n, &d, &used), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_does_not_fit),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
