/*
 * Block checksums. Every one fills CAIRN_CHECKSUM_LEN (32) bytes, the size of
 * the checksum field of a block pointer.
 *
 * fletcher4 — the default, because it is nearly free. The buffer is read as
 * 32-bit little-endian words w[0..n-1]; four 64-bit sums run over them
 *     a += w;  b += a;  c += b;  d += c        (all modulo 2^64)
 * and the result is a, b, c, d as four little-endian uint64. A buffer whose
 * length is not a multiple of 4 is treated as if zero-padded to the next
 * word, so its tail bytes are still covered (the padded word does enter the
 * sums). This is the same function as ZFS's fletcher-4 for word-multiple
 * lengths, which is all ZFS ever checksums.
 *
 * The scalar loop is one long dependency chain (each sum needs the previous
 * word's), so it retires about one word per cycle. The AVX2 variant breaks
 * the chain: it runs four independent Fletcher-4 streams, lane j taking the
 * words with index = j (mod 4), and combines them at the end. For a word at
 * index i of N (N a multiple of 4), the final sums weigh it by
 *     a: 1,  b: N-i,  c: (N-i)(N-i+1)/2,  d: (N-i)(N-i+1)(N-i+2)/6,
 * and in its lane, with m = M-k (M = N/4 words per lane, k its position in
 * the lane) and N-i = 4m-j, the lane sums weigh it by 1, m, m(m+1)/2 and
 * m(m+1)(m+2)/6. Writing the first set as integer combinations of the second
 * gives, summed over lanes j = 0..3 (A..D the lane sums):
 *     a = sum A_j
 *     b = sum 4 B_j - j A_j
 *     c = sum 16 C_j - (6 + 4j) B_j + j(j-1)/2 A_j
 *     d = sum 64 D_j - (48 + 16j) C_j + beta_j B_j + gamma_j A_j
 *         with beta = {4, 10, 20, 34}, gamma = {0, 0, 0, -1}.
 * These are identities over the integers, so they hold modulo 2^64 too. The
 * words after the last full 16-byte group are then fed to the scalar loop,
 * which simply continues from the combined sums. The tests check both
 * variants against a naive loop on many lengths; the variant is chosen once
 * per call from __builtin_cpu_supports (a cached CPUID bit, so cheap).
 *
 * xxhash — XXH3-128 from libxxhash, stored in xxhash's canonical byte order
 * (XXH128_canonicalFromHash: big-endian high64 then low64, the form xxhsum
 * prints), then 16 zero bytes.
 *
 * sha256 — OpenSSL 3's EVP. One-shot SHA256() re-fetches the algorithm and
 * allocates a context on every call, which costs more than hashing a small
 * block; so the algorithm is fetched once per process and each thread keeps
 * one digest context, freed by a pthread key destructor when the thread
 * exits.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include <cairn/log.h>

#include "codec_impl.h"

/* ---- fletcher4 ---------------------------------------------------------- */

static inline void fletcher4_continue(cairn_fletcher4_t *s, const uint8_t *p, size_t len)
{
    uint64_t a = s->a, b = s->b, c = s->c, d = s->d;
    size_t words = len / 4;

    for (size_t i = 0; i < words; i++) {
        uint32_t w;
        memcpy(&w, p + 4 * i, 4);
        a += w;
        b += a;
        c += b;
        d += c;
    }
    if (len % 4) {
        uint32_t w = 0;
        memcpy(&w, p + 4 * words, len % 4);
        a += w;
        b += a;
        c += b;
        d += c;
    }
    s->a = a;
    s->b = b;
    s->c = c;
    s->d = d;
}

void cairn_fletcher4_scalar(const void *buf, size_t len, cairn_fletcher4_t *out)
{
    *out = (cairn_fletcher4_t){0};
    fletcher4_continue(out, buf, len);
}

bool cairn_fletcher4_avx2_usable(void)
{
    return __builtin_cpu_supports("avx2");
}

__attribute__((target("avx2"))) void cairn_fletcher4_avx2(const void *buf, size_t len,
                                                          cairn_fletcher4_t *out)
{
    const uint8_t *p = buf;
    size_t groups = len / 16;
    __m256i va = _mm256_setzero_si256(), vb = va, vc = va, vd = va;

    for (size_t i = 0; i < groups; i++) {
        __m256i w = _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(p + 16 * i)));
        va = _mm256_add_epi64(va, w);
        vb = _mm256_add_epi64(vb, va);
        vc = _mm256_add_epi64(vc, vb);
        vd = _mm256_add_epi64(vd, vc);
    }

    uint64_t A[4], B[4], C[4], D[4];
    _mm256_storeu_si256((__m256i *)A, va);
    _mm256_storeu_si256((__m256i *)B, vb);
    _mm256_storeu_si256((__m256i *)C, vc);
    _mm256_storeu_si256((__m256i *)D, vd);

    static const uint64_t c_from_a[4] = {0, 0, 1, 3}; /* j(j-1)/2 */
    static const uint64_t d_from_b[4] = {4, 10, 20, 34};
    cairn_fletcher4_t s = {0};
    for (uint64_t j = 0; j < 4; j++) {
        s.a += A[j];
        s.b += 4 * B[j] - j * A[j];
        s.c += 16 * C[j] - (6 + 4 * j) * B[j] + c_from_a[j] * A[j];
        s.d += 64 * D[j] - (48 + 16 * j) * C[j] + d_from_b[j] * B[j];
    }
    s.d -= A[3]; /* gamma_3 = -1 */

    fletcher4_continue(&s, p + 16 * groups, len - 16 * groups);
    *out = s;
}

static void checksum_fletcher4(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    cairn_fletcher4_t s;
    if (len >= 256 && cairn_fletcher4_avx2_usable())
        cairn_fletcher4_avx2(buf, len, &s);
    else
        cairn_fletcher4_scalar(buf, len, &s);
    uint64_t words[4] = {s.a, s.b, s.c, s.d}; /* host is little-endian (types.h) */
    memcpy(out, words, sizeof(words));
}

/* ---- xxhash ------------------------------------------------------------- */

static void checksum_xxhash(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits(buf, len));
    memset(out, 0, CAIRN_CHECKSUM_LEN);
    memcpy(out, canon.digest, sizeof(canon.digest));
}

/* ---- sha256 ------------------------------------------------------------- */

static EVP_MD *sha256_md;
static pthread_key_t sha256_ctx_key;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_ctx_free(void *ctx)
{
    EVP_MD_CTX_free(ctx);
}

static void sha256_init_once(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (sha256_md == NULL || pthread_key_create(&sha256_ctx_key, sha256_ctx_free) != 0) {
        log_error("codec", "OpenSSL has no usable SHA256 implementation");
        abort();
    }
}

static void checksum_sha256(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    pthread_once(&sha256_once, sha256_init_once);
    EVP_MD_CTX *ctx = pthread_getspecific(sha256_ctx_key);
    if (ctx == NULL) {
        ctx = EVP_MD_CTX_new();
        if (ctx == NULL || pthread_setspecific(sha256_ctx_key, ctx) != 0) {
            log_error("codec", "out of memory for a SHA256 context");
            abort();
        }
    }
    unsigned int outlen = 0;
    /* A checksum has no failure path; an engine that cannot hash is fatal. */
    if (EVP_DigestInit_ex2(ctx, sha256_md, NULL) != 1 || EVP_DigestUpdate(ctx, buf, len) != 1 ||
        EVP_DigestFinal_ex(ctx, out, &outlen) != 1 || outlen != CAIRN_CHECKSUM_LEN) {
        log_error("codec", "SHA256 digest failed");
        abort();
    }
}

/* ---- dispatch ----------------------------------------------------------- */

void cairn_checksum(cairn_checksum_t alg, const void *buf, size_t len,
                    uint8_t out[CAIRN_CHECKSUM_LEN])
{
    switch (alg) {
    case CAIRN_CHECKSUM_FLETCHER4:
        checksum_fletcher4(buf, len, out);
        return;
    case CAIRN_CHECKSUM_XXHASH:
        checksum_xxhash(buf, len, out);
        return;
    case CAIRN_CHECKSUM_SHA256:
        checksum_sha256(buf, len, out);
        return;
    case CAIRN_CHECKSUM_NONE:
    case CAIRN_CHECKSUM_COUNT:
        break;
    }
    /* No valid checksum: all zeros, which verification of real data will not match. */
    memset(out, 0, CAIRN_CHECKSUM_LEN);
}

static const char *const checksum_names[CAIRN_CHECKSUM_COUNT] = {
    [CAIRN_CHECKSUM_FLETCHER4] = "fletcher4",
    [CAIRN_CHECKSUM_XXHASH] = "xxhash",
    [CAIRN_CHECKSUM_SHA256] = "sha256",
};

const char *cairn_checksum_name(cairn_checksum_t alg)
{
    if ((unsigned)alg >= CAIRN_CHECKSUM_COUNT)
        return NULL;
    return checksum_names[alg];
}

int cairn_checksum_from_name(const char *name, cairn_checksum_t *out)
{
    if (name == NULL)
        return -EINVAL;
    if (strcmp(name, "on") == 0) {
        *out = CAIRN_CHECKSUM_FLETCHER4;
        return 0;
    }
    for (unsigned i = 0; i < CAIRN_CHECKSUM_COUNT; i++) {
        if (checksum_names[i] != NULL && strcmp(name, checksum_names[i]) == 0) {
            *out = (cairn_checksum_t)i;
            return 0;
        }
    }
    return -EINVAL;
}
