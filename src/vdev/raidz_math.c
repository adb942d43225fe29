/*
 * RAID-Z parity generation and reconstruction over GF(2^8).
 *
 * Generation uses Horner's rule: walking the data columns from the last to
 * the first, Q = 2*Q + D_i and R = 4*R + D_i. Multiplying a whole 64-bit word
 * of field elements by 2 needs no table: shift every byte left and fold the
 * bytes whose top bit fell out with the reduction constant 0x1d. So the hot
 * loops of a write are branch-free word operations the compiler can
 * vectorize, one pass per data column per parity column.
 *
 * Reconstruction is general: the missing data columns are the unknowns of a
 * linear system whose equations are the surviving parity columns. Each used
 * parity column minus the contribution of the surviving data (its
 * "syndrome", computed with the same Horner loops, treating missing columns
 * as zero) equals sum_k g^{i_k} D_{i_k} over the missing columns i_k. The
 * small coefficient matrix is inverted by Gauss-Jordan elimination and each
 * missing column is then a GF-linear combination of the syndromes, computed
 * with a 256-byte multiply-by-constant table per coefficient. Missing
 * parity is simply regenerated afterwards. The common case, one data column
 * lost with P intact, is a plain XOR and takes a fast path.
 *
 * Why this is correct for any combination: with generators 1, 2 and 4 the
 * coefficient matrix for any choice of rows and at most three columns is a
 * (sub-)Vandermonde matrix in 2^i with distinct nonzero nodes (i < 255), hence
 * invertible; the code still checks and tries another choice of parity rows
 * if elimination finds a singular matrix, rather than trusting the argument.
 */
/* The word loops below are written to be vectorized; GCC only does that at
 * -O3 (2.5x faster parity than -O2 on x86-64), so ask for it in this file. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <cairn/raidz.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint8_t gf_exp[512];
static uint8_t gf_log[256];
static uint8_t gf_mul_tab[256][256];
static pthread_once_t gf_once = PTHREAD_ONCE_INIT;

static void gf_init(void)
{
    unsigned x = 1;
    for (unsigned i = 0; i < 255; i++) {
        gf_exp[i] = (uint8_t)x;
        gf_log[x] = (uint8_t)i;
        x <<= 1;
        if (x & 0x100) x ^= 0x11d;
    }
    for (unsigned i = 255; i < 512; i++) gf_exp[i] = gf_exp[i - 255];
    gf_log[0] = 0; /* never used: multiplication by 0 is special-cased */
    for (unsigned a = 0; a < 256; a++)
        for (unsigned b = 0; b < 256; b++)
            gf_mul_tab[a][b] = (a && b) ? gf_exp[gf_log[a] + gf_log[b]] : 0;
}

static inline void gf_ready(void) { pthread_once(&gf_once, gf_init); }

uint8_t raidz_gf_mul(uint8_t a, uint8_t b)
{
    gf_ready();
    return gf_mul_tab[a][b];
}

uint8_t raidz_gf_inv(uint8_t a)
{
    gf_ready();
    return a ? gf_exp[255 - gf_log[a]] : 0;
}

uint8_t raidz_gf_exp2(unsigned e)
{
    gf_ready();
    return gf_exp[e % 255];
}

void raidz_gf_mul_xor(uint8_t *dst, const uint8_t *src, size_t len, uint8_t c)
{
    gf_ready();
    if (c == 0) return;
    if (c == 1) {
        for (size_t i = 0; i < len; i++) dst[i] ^= src[i];
        return;
    }
    const uint8_t *t = gf_mul_tab[c];
    for (size_t i = 0; i < len; i++) dst[i] ^= t[src[i]];
}

/* ---- word-wide primitives ---- */

#define W 8
static inline uint64_t ld(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, W);
    return v;
}
static inline void st(uint8_t *p, uint64_t v) { memcpy(p, &v, W); }

static inline uint64_t mul2_word(uint64_t x)
{
    uint64_t hi = x & 0x8080808080808080ULL;
    return ((x << 1) & 0xfefefefefefefefeULL) ^ ((hi >> 7) * 0x1d);
}

/* The generator of parity column j is 2^j; multiplying by it is j doublings. */
static inline uint64_t mulg_word(uint64_t x, unsigned j)
{
    for (unsigned k = 0; k < j; k++) x = mul2_word(x);
    return x;
}

static inline uint8_t mulg_byte(uint8_t x, unsigned j) { return gf_mul_tab[1u << j][x]; }

/* dst = g_j * dst + src over n bytes (src NULL: dst = g_j * dst). */
static void horner_step(unsigned j, uint8_t *restrict dst, const uint8_t *restrict src, size_t n)
{
    size_t i = 0, nw = n & ~(size_t)(W - 1);
    switch (j) {
    case 0:
        if (!src) return;
        for (; i < nw; i += W) st(dst + i, ld(dst + i) ^ ld(src + i));
        break;
    case 1:
        if (src)
            for (; i < nw; i += W) st(dst + i, mul2_word(ld(dst + i)) ^ ld(src + i));
        else
            for (; i < nw; i += W) st(dst + i, mul2_word(ld(dst + i)));
        break;
    default:
        if (src)
            for (; i < nw; i += W) st(dst + i, mulg_word(ld(dst + i), j) ^ ld(src + i));
        else
            for (; i < nw; i += W) st(dst + i, mulg_word(ld(dst + i), j));
        break;
    }
    for (; i < n; i++) dst[i] = mulg_byte(dst[i], j) ^ (src ? src[i] : 0);
}

/*
 * out = sum_i g_j^i D_i over len bytes, skipping data columns with skip[i]
 * set (treated as zero).
 */
static void gen_one(unsigned j, uint8_t *out, size_t len, unsigned ndata,
                    const uint8_t *const data[], const size_t data_len[], const bool *skip)
{
    bool first = true;
    for (unsigned i = ndata; i-- > 0;) {
        bool absent = skip && skip[i];
        size_t dl = absent ? 0 : CAIRN_MIN(data_len[i], len);
        if (first) {
            /* Horner's first step: out = D_last, no multiply needed. */
            if (dl) memcpy(out, data[i], dl);
            memset(out + dl, 0, len - dl);
            first = false;
            continue;
        }
        if (j == 0) {
            horner_step(0, out, data[i], dl);
        } else {
            horner_step(j, out, dl ? data[i] : NULL, dl);
            horner_step(j, out + dl, NULL, len - dl);
        }
    }
    if (first) memset(out, 0, len);
}

/*
 * All parity columns in one pass over each data column: a write's parity is
 * bound by memory bandwidth, so reading every data word once (instead of
 * once per parity column) is what matters.
 */
static void gen_fused(unsigned nparity, uint8_t *const par[], size_t len, unsigned ndata,
                      const uint8_t *const data[], const size_t data_len[])
{
    uint8_t *P = par[0], *Q = nparity > 1 ? par[1] : NULL, *R = nparity > 2 ? par[2] : NULL;
    for (unsigned j = 0; j < nparity; j++) {
        size_t dl = CAIRN_MIN(data_len[ndata - 1], len);
        memcpy(par[j], data[ndata - 1], dl);
        memset(par[j] + dl, 0, len - dl);
    }
    for (unsigned i = ndata - 1; i-- > 0;) {
        const uint8_t *d = data[i];
        size_t dl = CAIRN_MIN(data_len[i], len), dw = dl & ~(size_t)(W - 1), k = 0;
        if (R) {
            for (; k < dw; k += W) {
                uint64_t v = ld(d + k);
                st(P + k, ld(P + k) ^ v);
                st(Q + k, mul2_word(ld(Q + k)) ^ v);
                st(R + k, mul2_word(mul2_word(ld(R + k))) ^ v);
            }
        } else if (Q) {
            for (; k < dw; k += W) {
                uint64_t v = ld(d + k);
                st(P + k, ld(P + k) ^ v);
                st(Q + k, mul2_word(ld(Q + k)) ^ v);
            }
        } else {
            for (; k < dw; k += W) st(P + k, ld(P + k) ^ ld(d + k));
        }
        /* Byte tail of the column, then the zero padding beyond it. */
        for (unsigned j = 0; j < nparity; j++) {
            horner_step(j, par[j] + k, d + k, dl - k);
            if (j) horner_step(j, par[j] + dl, NULL, len - dl);
        }
    }
}

void raidz_generate(unsigned nparity, uint8_t *const parity[], size_t len, unsigned ndata,
                    const uint8_t *const data[], const size_t data_len[])
{
    gf_ready();
    bool all = ndata > 0 && nparity > 0;
    for (unsigned j = 0; j < nparity; j++) all &= parity[j] != NULL;
    if (all) {
        gen_fused(nparity, parity, len, ndata, data, data_len);
        return;
    }
    for (unsigned j = 0; j < nparity; j++)
        if (parity[j]) gen_one(j, parity[j], len, ndata, data, data_len, NULL);
}

/* Inverts the m x m matrix a in place into inv; false when singular. */
static bool gf_invert(unsigned m, uint8_t a[3][3], uint8_t inv[3][3])
{
    for (unsigned r = 0; r < m; r++)
        for (unsigned c = 0; c < m; c++) inv[r][c] = r == c;
    for (unsigned col = 0; col < m; col++) {
        unsigned piv = col;
        while (piv < m && a[piv][col] == 0) piv++;
        if (piv == m) return false;
        if (piv != col) {
            for (unsigned c = 0; c < m; c++) {
                uint8_t t = a[col][c];
                a[col][c] = a[piv][c], a[piv][c] = t;
                t = inv[col][c];
                inv[col][c] = inv[piv][c], inv[piv][c] = t;
            }
        }
        uint8_t s = raidz_gf_inv(a[col][col]);
        for (unsigned c = 0; c < m; c++) {
            a[col][c] = gf_mul_tab[s][a[col][c]];
            inv[col][c] = gf_mul_tab[s][inv[col][c]];
        }
        for (unsigned r = 0; r < m; r++) {
            if (r == col || a[r][col] == 0) continue;
            uint8_t f = a[r][col];
            for (unsigned c = 0; c < m; c++) {
                a[r][c] ^= gf_mul_tab[f][a[col][c]];
                inv[r][c] ^= gf_mul_tab[f][inv[col][c]];
            }
        }
    }
    return true;
}

/* Picks the k-th (in lexicographic order) m-subset of avail[0..navail). */
static bool nth_subset(unsigned navail, unsigned m, unsigned k, unsigned out[3])
{
    unsigned idx = 0;
    for (unsigned a = 0; a < navail; a++)
        for (unsigned b = a + 1; b < (m > 1 ? navail : a + 2); b++)
            for (unsigned c = b + 1; c < (m > 2 ? navail : b + 2); c++) {
                if (idx++ != k) continue;
                out[0] = a, out[1] = b, out[2] = c;
                return true;
            }
    return false;
}

int raidz_reconstruct(unsigned nparity, uint8_t *const parity[], size_t len, unsigned ndata,
                      uint8_t *const data[], const size_t data_len[], const bool missing[])
{
    gf_ready();
    if (nparity == 0 || nparity > VDEV_MAX_NPARITY) return -EINVAL;
    unsigned mdata[3], m = 0, avail[3], navail = 0, nmiss = 0;
    for (unsigned j = 0; j < nparity; j++) {
        if (missing[j]) nmiss++;
        else avail[navail++] = j;
    }
    for (unsigned i = 0; i < ndata; i++) {
        if (!missing[nparity + i]) continue;
        if (m == 3 || ++nmiss > nparity) return -EINVAL;
        mdata[m++] = i;
    }
    if (nmiss > nparity || m > navail) return -EINVAL;

    if (m == 1 && !missing[0]) {
        /* Fast path: D_k = P + sum of the other data columns. */
        unsigned k = mdata[0];
        size_t dl = data_len[k];
        memcpy(data[k], parity[0], dl);
        for (unsigned i = 0; i < ndata; i++)
            if (i != k) horner_step(0, data[k], data[i], CAIRN_MIN(data_len[i], dl));
    } else if (m > 0) {
        unsigned rows[3] = {0, 0, 0};
        uint8_t inv[3][3];
        bool ok = false;
        for (unsigned k = 0; !ok && nth_subset(navail, m, k, rows); k++) {
            uint8_t a[3][3];
            for (unsigned r = 0; r < m; r++)
                for (unsigned c = 0; c < m; c++)
                    a[r][c] = gf_exp[(avail[rows[r]] * mdata[c]) % 255];
            ok = gf_invert(m, a, inv);
        }
        if (!ok) return -EINVAL;
        /* Syndromes: used parity minus what the surviving data contributes. */
        uint8_t *synd = malloc(m * len + 1);
        if (!synd) return -ENOMEM;
        bool skip[255];
        for (unsigned i = 0; i < ndata; i++) skip[i] = missing[nparity + i];
        for (unsigned r = 0; r < m; r++) {
            unsigned j = avail[rows[r]];
            uint8_t *s = synd + r * len;
            gen_one(j, s, len, ndata, (const uint8_t *const *)data, data_len, skip);
            horner_step(0, s, parity[j], len);
        }
        for (unsigned c = 0; c < m; c++) {
            unsigned i = mdata[c];
            memset(data[i], 0, data_len[i]);
            for (unsigned r = 0; r < m; r++)
                raidz_gf_mul_xor(data[i], synd + r * len, data_len[i], inv[c][r]);
        }
        free(synd);
    }
    for (unsigned j = 0; j < nparity; j++)
        if (missing[j] && parity[j])
            gen_one(j, parity[j], len, ndata, (const uint8_t *const *)data, data_len, NULL);
    return 0;
}
