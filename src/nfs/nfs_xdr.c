/*
 * XDR cursor (RFC 4506) shared by every NFS program: big-endian 32-bit units,
 * opaque data padded to 4 bytes. Decoding never copies opaque data (it points
 * into the received record, which lives until the reply is sent), and a
 * decoding error is sticky: after the first overrun every get returns zero, so
 * handlers decode a whole argument structure and test `err` once. Encoding
 * grows the reply buffer geometrically; a failed allocation is sticky too and
 * the transport answers SYSTEM_ERR.
 *
 * Lent spans (nfs_impl.h): a READ's data may stay in the ARC's buffers; the
 * reply keeps the room reserved in buf (never touched, so it costs no copy
 * and no page faults) and a list of spans over it, each holding its buffer
 * until the reply is freed. Positions never move, so code that patches or
 * rewinds the buffer before a span is unaffected; rewinding past a span
 * drops it (nfs_xdr_truncate).
 */
#include "nfs_impl.h"

#include <stdlib.h>
#include <sys/uio.h>

void nfs_xdr_init_encode(nfs_xdr_t *x, size_t initial_cap)
{
    memset(x, 0, sizeof *x);
    x->growable = true;
    if (initial_cap) {
        x->buf = malloc(initial_cap);
        if (x->buf) x->cap = initial_cap;
        else x->err = true;
    }
}

void nfs_xdr_init_decode(nfs_xdr_t *x, const void *buf, size_t len)
{
    memset(x, 0, sizeof *x);
    x->buf = (uint8_t *)buf;
    x->len = len;
}

void nfs_xdr_free(nfs_xdr_t *x)
{
    if (x->growable) {
        cairn_spans_release(&x->lent);
        free(x->lent.v);
        free(x->buf);
    }
    memset(x, 0, sizeof *x);
}

void nfs_xdr_lend(nfs_xdr_t *x, size_t base, cairn_spans_t *spans)
{
    if (!spans || !spans->n) return;
    if (x->lent.n + spans->n > x->lent.cap) {
        size_t cap = CAIRN_MAX(x->lent.cap * 2, x->lent.n + spans->n);
        cairn_span_t *nv = realloc(x->lent.v, cap * sizeof *nv);
        if (!nv) {
            cairn_spans_copy_release(spans, x->buf + base);
            return;
        }
        x->lent.v = nv;
        x->lent.cap = cap;
    }
    for (size_t i = 0; i < spans->n; i++) {
        x->lent.v[x->lent.n] = spans->v[i];
        x->lent.v[x->lent.n++].pos += base;
    }
    spans->n = 0;
}

void nfs_xdr_truncate(nfs_xdr_t *x, size_t pos)
{
    x->pos = x->len = pos;
    while (x->lent.n && x->lent.v[x->lent.n - 1].pos + x->lent.v[x->lent.n - 1].len > pos)
        cairn_rbuf_rele(x->lent.v[--x->lent.n].buf);
}

void nfs_xdr_flatten(nfs_xdr_t *x) { cairn_spans_copy_release(&x->lent, x->buf); }

size_t nfs_xdr_iov(const nfs_xdr_t *x, size_t skip, struct iovec *iov, size_t max)
{
    size_t n = 0, at = 0; /* at: reply offset where the next buffer piece starts */
    for (size_t i = 0; i <= x->lent.n && n < max; i++) {
        const cairn_span_t *sp = i < x->lent.n ? &x->lent.v[i] : NULL;
        size_t end = sp ? sp->pos : x->len;
        /* The buffer's bytes in [at, end), then the span's. */
        size_t from = CAIRN_MAX(at, skip);
        if (from < end) iov[n++] = (struct iovec){x->buf + from, end - from};
        if (!sp || n >= max) break;
        size_t send = sp->pos + sp->len;
        if (skip < send) {
            size_t in = skip > sp->pos ? skip - sp->pos : 0;
            iov[n++] = (struct iovec){(void *)(sp->data + in), sp->len - in};
        }
        at = send;
    }
    return n;
}

void nfs_xdr_copy_out(const nfs_xdr_t *x, size_t start, size_t n, uint8_t *dst)
{
    struct iovec iov[16];
    size_t k;
    while (n && (k = nfs_xdr_iov(x, start, iov, 16)) > 0) {
        for (size_t i = 0; i < k && n; i++) {
            size_t m = CAIRN_MIN(n, iov[i].iov_len);
            memcpy(dst, iov[i].iov_base, m);
            dst += m;
            start += m;
            n -= m;
        }
    }
}

uint8_t *nfs_xdr_reserve(nfs_xdr_t *x, size_t n)
{
    if (x->err) return NULL;
    /* An encoder that has no buffer yet gets one even for zero bytes: the
     * caller may do arithmetic on the pointer, which must not be NULL. */
    if (x->pos + n > x->cap || !x->buf) {
        if (!x->growable) { x->err = true; return NULL; }
        size_t cap = x->cap ? x->cap : 256;
        while (cap < x->pos + n) cap *= 2;
        uint8_t *nb = realloc(x->buf, cap);
        if (!nb) { x->err = true; return NULL; }
        x->buf = nb;
        x->cap = cap;
    }
    uint8_t *p = x->buf + x->pos;
    x->pos += n;
    x->len = x->pos;
    return p;
}

static const uint8_t *take(nfs_xdr_t *x, size_t n)
{
    if (x->err || n > x->len - x->pos) { x->err = true; return NULL; }
    const uint8_t *p = x->buf + x->pos;
    x->pos += n;
    return p;
}

uint32_t nfs_xdr_get_u32(nfs_xdr_t *x)
{
    const uint8_t *p = take(x, 4);
    if (!p) return 0;
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint64_t nfs_xdr_get_u64(nfs_xdr_t *x)
{
    uint64_t hi = nfs_xdr_get_u32(x);
    return hi << 32 | nfs_xdr_get_u32(x);
}

static size_t padded(uint32_t n) { return ((size_t)n + 3) & ~(size_t)3; }

const uint8_t *nfs_xdr_get_fixed(nfs_xdr_t *x, uint32_t n)
{
    const uint8_t *p = take(x, padded(n));
    return p;
}

const uint8_t *nfs_xdr_get_opaque(nfs_xdr_t *x, uint32_t *len, uint32_t max)
{
    uint32_t n = nfs_xdr_get_u32(x);
    if (x->err || n > max) { x->err = true; *len = 0; return NULL; }
    *len = n;
    return nfs_xdr_get_fixed(x, n);
}

void nfs_xdr_put_u32(nfs_xdr_t *x, uint32_t v)
{
    uint8_t *p = nfs_xdr_reserve(x, 4);
    if (!p) return;
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void nfs_xdr_put_u64(nfs_xdr_t *x, uint64_t v)
{
    nfs_xdr_put_u32(x, (uint32_t)(v >> 32));
    nfs_xdr_put_u32(x, (uint32_t)v);
}

void nfs_xdr_put_fixed(nfs_xdr_t *x, const void *data, uint32_t len)
{
    size_t n = padded(len);
    uint8_t *p = nfs_xdr_reserve(x, n);
    if (!p) return;
    if (len) memcpy(p, data, len);
    memset(p + len, 0, n - len);
}

void nfs_xdr_put_opaque(nfs_xdr_t *x, const void *data, uint32_t len)
{
    nfs_xdr_put_u32(x, len);
    nfs_xdr_put_fixed(x, data, len);
}

void nfs_xdr_put_string(nfs_xdr_t *x, const char *s)
{
    nfs_xdr_put_opaque(x, s, (uint32_t)strlen(s));
}
