/*
 * Checksums: fletcher4 against hand-computed sums and a naive reference loop
 * (both the scalar and the AVX2 implementation, at every length and
 * alignment that exercises their edges), sha256 against the FIPS 180-2
 * vectors, xxhash against libxxhash called directly, thread safety of the
 * per-thread SHA256 contexts, and name parsing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include <cairn/codec.h>
#include <cairn/util.h>

#include "../../src/codec/codec_impl.h"

/* The definition, word by word, zero-padding the tail: the test's oracle. */
static void reference_fletcher4(const uint8_t *p, size_t len, uint64_t out[4])
{
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t w = 0;
        for (size_t k = 0; k < 4 && i + k < len; k++)
            w |= (uint32_t)p[i + k] << (8 * k);
        a += w;
        b += a;
        c += b;
        d += c;
    }
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void expect_fletcher4(const uint8_t *buf, size_t len, uint64_t a, uint64_t b, uint64_t c,
                             uint64_t d)
{
    uint8_t out[CAIRN_CHECKSUM_LEN];
    cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, buf, len, out);
    assert_int_equal(le64(out), a);
    assert_int_equal(le64(out + 8), b);
    assert_int_equal(le64(out + 16), c);
    assert_int_equal(le64(out + 24), d);
}

static void test_fletcher4_hand_vectors(void **state)
{
    (void)state;
    /* Words 1,2,3,4: a = 1+2+3+4 = 10; b = 1+3+6+10 = 20; c = 1+4+10+20 = 35;
     * d = 1+5+15+35 = 56. */
    static const uint8_t w1234[] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
    expect_fletcher4(w1234, sizeof(w1234), 10, 20, 35, 56);

    /* Little-endian words: bytes 01 02 03 04 are the word 0x04030201. */
    static const uint8_t le[] = {1, 2, 3, 4};
    expect_fletcher4(le, 4, 0x04030201, 0x04030201, 0x04030201, 0x04030201);

    /* 5 bytes = words 1 and 2 (the tail byte zero-padded): a=3, b=1+3=4, c=1+4=5, d=1+5=6. */
    static const uint8_t tail[] = {1, 0, 0, 0, 2};
    expect_fletcher4(tail, sizeof(tail), 3, 4, 5, 6);
    /* The tail is covered: changing it changes the sum, and 5 bytes != the first 4. */
    static const uint8_t tail2[] = {1, 0, 0, 0, 3};
    expect_fletcher4(tail2, sizeof(tail2), 4, 5, 6, 7);
    expect_fletcher4(tail, 4, 1, 1, 1, 1);

    /* Empty buffer: all sums zero. */
    expect_fletcher4(tail, 0, 0, 0, 0, 0);

    /* Sums wrap modulo 2^64: 2^20 words of 0xffffffff. a = n*w exactly; check
     * b = w * n(n+1)/2 (fits), and c, d against the reference. */
    size_t n = 1u << 20;
    uint8_t *ones = malloc(4 * n);
    memset(ones, 0xff, 4 * n);
    uint64_t ref[4];
    reference_fletcher4(ones, 4 * n, ref);
    uint64_t w = 0xffffffffu;
    assert_int_equal(ref[0], w * n);
    assert_int_equal(ref[1], w * (n * (n + 1) / 2));
    expect_fletcher4(ones, 4 * n, ref[0], ref[1], ref[2], ref[3]);
    free(ones);
}

static void check_impls_against_reference(const uint8_t *p, size_t len)
{
    uint64_t ref[4];
    reference_fletcher4(p, len, ref);

    cairn_fletcher4_t s;
    cairn_fletcher4_scalar(p, len, &s);
    if (s.a != ref[0] || s.b != ref[1] || s.c != ref[2] || s.d != ref[3])
        fail_msg("scalar fletcher4 wrong at length %zu", len);
    if (cairn_fletcher4_avx2_usable()) {
        cairn_fletcher4_avx2(p, len, &s);
        if (s.a != ref[0] || s.b != ref[1] || s.c != ref[2] || s.d != ref[3])
            fail_msg("avx2 fletcher4 wrong at length %zu", len);
    }
    uint8_t out[CAIRN_CHECKSUM_LEN];
    cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, p, len, out);
    for (int i = 0; i < 4; i++)
        if (le64(out + 8 * i) != ref[i])
            fail_msg("cairn_checksum fletcher4 wrong at length %zu", len);
}

static void test_fletcher4_against_reference(void **state)
{
    (void)state;
    size_t big = 1024 * 1024 + 3;
    uint8_t *buf = malloc(big + 16);
    cairn_rng_t r;
    cairn_rng_seed(&r, 42);
    for (size_t i = 0; i < big + 16; i++)
        buf[i] = (uint8_t)cairn_rng_next(&r);

    /* Every small length, at every alignment mod 16, covers the AVX2 groups
     * and the scalar tail after them. */
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 0; len <= 300; len++)
            check_impls_against_reference(buf + off, len);
    /* Block sizes, large and odd. */
    static const size_t sizes[] = {512, 4096, 131072, 131075, 1024 * 1024, 1024 * 1024 + 3};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(sizes); i++)
        check_impls_against_reference(buf + (i % 3), sizes[i]);
    /* High words everywhere, so the combination of AVX2 lanes is tested with
     * sums that wrap. */
    memset(buf, 0xff, big);
    check_impls_against_reference(buf, big);
    free(buf);
}

/* ---- sha256 ------------------------------------------------------------- */

static void hex_to_bytes(const char *hex, uint8_t *out)
{
    for (size_t i = 0; hex[2 * i]; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void expect_sha256(const char *msg, const char *hex)
{
    uint8_t want[32], out[CAIRN_CHECKSUM_LEN];
    hex_to_bytes(hex, want);
    cairn_checksum(CAIRN_CHECKSUM_SHA256, msg, strlen(msg), out);
    assert_memory_equal(out, want, 32);
}

static void test_sha256_fips_vectors(void **state)
{
    (void)state;
    expect_sha256("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect_sha256("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

#define SHA_THREADS 4
static void *sha_worker(void *arg)
{
    const uint8_t *expected = arg;
    uint8_t out[CAIRN_CHECKSUM_LEN];
    for (int i = 0; i < 2000; i++) {
        cairn_checksum(CAIRN_CHECKSUM_SHA256, "abc", 3, out);
        if (memcmp(out, expected, 32) != 0)
            return NULL;
    }
    return arg;
}

/* Per-thread digest contexts: concurrent hashing gives the right answer. */
static void test_sha256_threads(void **state)
{
    (void)state;
    uint8_t want[32];
    hex_to_bytes("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", want);
    pthread_t th[SHA_THREADS];
    for (int i = 0; i < SHA_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, sha_worker, want), 0);
    for (int i = 0; i < SHA_THREADS; i++) {
        void *ret;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_ptr_equal(ret, want);
    }
}

/* ---- xxhash ------------------------------------------------------------- */

static void test_xxhash_matches_libxxhash(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 3, 16, 17, 128, 129, 240, 241, 4096, 131072};
    uint8_t *buf = malloc(131072);
    cairn_rng_t r;
    cairn_rng_seed(&r, 7);
    for (size_t i = 0; i < 131072; i++)
        buf[i] = (uint8_t)cairn_rng_next(&r);
    uint8_t prev[CAIRN_CHECKSUM_LEN] = {0};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(sizes); i++) {
        uint8_t out[CAIRN_CHECKSUM_LEN], zeros[16] = {0};
        memset(out, 0xaa, sizeof(out));
        cairn_checksum(CAIRN_CHECKSUM_XXHASH, buf, sizes[i], out);
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits(buf, sizes[i]));
        assert_memory_equal(out, canon.digest, 16);
        assert_memory_equal(out + 16, zeros, 16);
        assert_memory_not_equal(out, prev, 16);
        memcpy(prev, out, sizeof(prev));
    }
    free(buf);
}

/* Every algorithm notices a one-bit change anywhere in a block. */
static void test_checksums_detect_bit_flips(void **state)
{
    (void)state;
    size_t len = 4096;
    uint8_t *buf = calloc(1, len);
    for (unsigned alg = CAIRN_CHECKSUM_FLETCHER4; alg < CAIRN_CHECKSUM_COUNT; alg++) {
        uint8_t base[CAIRN_CHECKSUM_LEN], out[CAIRN_CHECKSUM_LEN];
        cairn_checksum((cairn_checksum_t)alg, buf, len, base);
        for (size_t pos = 0; pos < len; pos += 509) {
            buf[pos] ^= 0x10;
            cairn_checksum((cairn_checksum_t)alg, buf, len, out);
            buf[pos] ^= 0x10;
            assert_memory_not_equal(out, base, CAIRN_CHECKSUM_LEN);
        }
    }
    free(buf);
}

/* ---- names -------------------------------------------------------------- */

static void test_checksum_names(void **state)
{
    (void)state;
    cairn_checksum_t alg;
    assert_string_equal(cairn_checksum_name(CAIRN_CHECKSUM_FLETCHER4), "fletcher4");
    assert_string_equal(cairn_checksum_name(CAIRN_CHECKSUM_XXHASH), "xxhash");
    assert_string_equal(cairn_checksum_name(CAIRN_CHECKSUM_SHA256), "sha256");
    assert_null(cairn_checksum_name(CAIRN_CHECKSUM_NONE));
    assert_null(cairn_checksum_name(CAIRN_CHECKSUM_COUNT));
    assert_null(cairn_checksum_name((cairn_checksum_t)-1));
    for (unsigned a = CAIRN_CHECKSUM_FLETCHER4; a < CAIRN_CHECKSUM_COUNT; a++) {
        assert_int_equal(cairn_checksum_from_name(cairn_checksum_name((cairn_checksum_t)a), &alg),
                         0);
        assert_int_equal(alg, a);
    }
    assert_int_equal(cairn_checksum_from_name("on", &alg), 0);
    assert_int_equal(alg, CAIRN_CHECKSUM_FLETCHER4);

    static const char *const junk[] = {"off", "none", "", "fletcher2", "SHA256", "sha256 ",
                                       "xxh", "on "};
    for (unsigned i = 0; i < CAIRN_ARRAY_SIZE(junk); i++) {
        alg = CAIRN_CHECKSUM_SHA256;
        assert_int_equal(cairn_checksum_from_name(junk[i], &alg), -EINVAL);
        assert_int_equal(alg, CAIRN_CHECKSUM_SHA256);
    }
    assert_int_equal(cairn_checksum_from_name(NULL, &alg), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fletcher4_hand_vectors),
        cmocka_unit_test(test_fletcher4_against_reference),
        cmocka_unit_test(test_sha256_fips_vectors),
        cmocka_unit_test(test_sha256_threads),
        cmocka_unit_test(test_xxhash_matches_libxxhash),
        cmocka_unit_test(test_checksums_detect_bit_flips),
        cmocka_unit_test(test_checksum_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
