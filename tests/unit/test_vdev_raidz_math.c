/* RAID-Z parity math: GF(2^8) identities, parity definitions, and
 * reconstruction of every erasure combination up to the parity count. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/raidz.h>
#include <cairn/util.h>

#include <stdlib.h>
#include <string.h>

/* Reference multiply: shift-and-add with reduction by 0x11d, no tables. */
static uint8_t ref_mul(uint8_t a, uint8_t b)
{
    unsigned r = 0, x = a;
    for (int i = 0; i < 8; i++) {
        if (b & (1u << i)) r ^= x;
        x <<= 1;
        if (x & 0x100) x ^= 0x11d;
    }
    return (uint8_t)r;
}

static void test_gf_arithmetic(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 256; a++) {
        for (unsigned b = 0; b < 256; b++)
            assert_int_equal(raidz_gf_mul((uint8_t)a, (uint8_t)b), ref_mul((uint8_t)a, (uint8_t)b));
        if (a) assert_int_equal(raidz_gf_mul((uint8_t)a, raidz_gf_inv((uint8_t)a)), 1);
    }
    /* 2 generates the whole multiplicative group: 2^0..2^254 are distinct. */
    bool seen[256] = {false};
    uint8_t x = 1;
    for (unsigned e = 0; e < 255; e++) {
        assert_int_equal(raidz_gf_exp2(e), x);
        assert_false(seen[x]);
        seen[x] = true;
        x = ref_mul(x, 2);
    }
    assert_int_equal(x, 1);
    assert_int_equal(raidz_gf_exp2(255), 1);

    uint8_t src[37], dst[37], want[37];
    for (unsigned i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 37 + 5), dst[i] = (uint8_t)i;
    for (unsigned i = 0; i < sizeof src; i++) want[i] = dst[i] ^ ref_mul(0x53, src[i]);
    raidz_gf_mul_xor(dst, src, sizeof src, 0x53);
    assert_memory_equal(dst, want, sizeof want);
}

/* Parity straight from the definition, byte by byte. */
static void ref_parity(unsigned p, uint8_t **par, size_t len, unsigned nd, uint8_t **data,
                       const size_t *dl)
{
    for (unsigned j = 0; j < p; j++) {
        uint8_t g = (uint8_t)(1u << j);
        for (size_t b = 0; b < len; b++) {
            uint8_t acc = 0, coef = 1;
            for (unsigned i = 0; i < nd; i++) {
                uint8_t d = b < dl[i] ? data[i][b] : 0;
                acc ^= ref_mul(coef, d);
                coef = ref_mul(coef, g);
            }
            par[j][b] = acc;
        }
    }
}

static bool next_subset(unsigned *idx, unsigned k, unsigned n)
{
    int i = (int)k - 1;
    while (i >= 0 && idx[i] == n - k + (unsigned)i) i--;
    if (i < 0) return false;
    idx[i]++;
    for (unsigned j = (unsigned)i + 1; j < k; j++) idx[j] = idx[j - 1] + 1;
    return true;
}

static void run_geometry(cairn_rng_t *rng, unsigned p, unsigned nd, size_t len, bool short_cols)
{
    unsigned ncols = p + nd;
    uint8_t *par[3], *data[255], *saved[258];
    size_t dl[255];
    for (unsigned j = 0; j < p; j++) par[j] = malloc(len);
    for (unsigned i = 0; i < nd; i++) {
        data[i] = malloc(len);
        /* The last columns are one "sector" (len/2) short, as in a stripe. */
        dl[i] = short_cols && i >= nd / 2 + 1 ? len / 2 : len;
        for (size_t b = 0; b < dl[i]; b++) data[i][b] = (uint8_t)cairn_rng_next(rng);
    }
    raidz_generate(p, par, len, nd, (const uint8_t *const *)data, dl);

    uint8_t *ref[3];
    for (unsigned j = 0; j < p; j++) ref[j] = malloc(len);
    ref_parity(p, ref, len, nd, data, dl);
    for (unsigned j = 0; j < p; j++) assert_memory_equal(par[j], ref[j], len);

    for (unsigned c = 0; c < ncols; c++) {
        size_t l = c < p ? len : dl[c - p];
        saved[c] = malloc(l);
        memcpy(saved[c], c < p ? par[c] : data[c - p], l);
    }
    bool missing[258];
    for (unsigned k = 1; k <= p; k++) {
        unsigned idx[3] = {0, 1, 2};
        do {
            memset(missing, 0, sizeof missing);
            for (unsigned t = 0; t < k; t++) {
                unsigned c = idx[t];
                missing[c] = true;
                uint8_t *b = c < p ? par[c] : data[c - p];
                memset(b, 0xA5, c < p ? len : dl[c - p]); /* erase */
            }
            assert_int_equal(raidz_reconstruct(p, par, len, nd, data, dl, missing), 0);
            for (unsigned c = 0; c < ncols; c++) {
                uint8_t *b = c < p ? par[c] : data[c - p];
                assert_memory_equal(b, saved[c], c < p ? len : dl[c - p]);
            }
        } while (next_subset(idx, k, ncols));
    }
    /* One more erasure than parity cannot be solved. */
    if (ncols > p) {
        memset(missing, 0, sizeof missing);
        for (unsigned c = 0; c <= p; c++) missing[c] = true;
        assert_int_equal(raidz_reconstruct(p, par, len, nd, data, dl, missing), -EINVAL);
    }
    for (unsigned c = 0; c < ncols; c++) free(saved[c]);
    for (unsigned j = 0; j < p; j++) free(par[j]), free(ref[j]);
    for (unsigned i = 0; i < nd; i++) free(data[i]);
}

static void test_reconstruct_all_erasures(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 0x5eed);
    for (unsigned p = 1; p <= 3; p++)
        for (unsigned nd = 1; nd <= 7; nd++) {
            run_geometry(&rng, p, nd, 512, false);
            run_geometry(&rng, p, nd, 1024, true);
            run_geometry(&rng, p, nd, 72, true); /* word loop plus a byte tail */
        }
}

/* Wide stripes: high column indices exercise large powers of the generators. */
static void test_reconstruct_wide(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 77);
    unsigned p = 3, nd = 252;
    size_t len = 64;
    uint8_t *par[3], *data[252], *save[252];
    size_t dl[252];
    for (unsigned j = 0; j < p; j++) par[j] = malloc(len);
    for (unsigned i = 0; i < nd; i++) {
        data[i] = malloc(len), save[i] = malloc(len), dl[i] = len;
        for (size_t b = 0; b < len; b++) data[i][b] = (uint8_t)cairn_rng_next(&rng);
        memcpy(save[i], data[i], len);
    }
    raidz_generate(p, par, len, nd, (const uint8_t *const *)data, dl);
    for (int trial = 0; trial < 200; trial++) {
        bool missing[255] = {false};
        unsigned e[3];
        for (unsigned t = 0; t < 3; t++) {
            do e[t] = (unsigned)cairn_rng_below(&rng, nd);
            while (missing[p + e[t]]);
            missing[p + e[t]] = true;
            memset(data[e[t]], 0, len);
        }
        assert_int_equal(raidz_reconstruct(p, par, len, nd, data, dl, missing), 0);
        for (unsigned t = 0; t < 3; t++) assert_memory_equal(data[e[t]], save[e[t]], len);
    }
    for (unsigned j = 0; j < p; j++) free(par[j]);
    for (unsigned i = 0; i < nd; i++) free(data[i]), free(save[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gf_arithmetic),
        cmocka_unit_test(test_reconstruct_all_erasures),
        cmocka_unit_test(test_reconstruct_wide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
