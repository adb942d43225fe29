/* Reference-counted buffers and spans; see include/cairn/rbuf.h. */
#include <cairn/bufpool.h>
#include <cairn/rbuf.h>
#include <cairn/util.h>

#include <stdlib.h>
#include <string.h>

#define RBUF_POOL_MIN (32 * 1024)
_Static_assert(RBUF_POOL_MIN >= CAIRN_BUFPOOL_MIN, "what malloc serves is not pooled");

cairn_rbuf_t *cairn_rbuf_new(const void *src, uint32_t size)
{
    size_t alloc = sizeof(cairn_rbuf_t) + size;
    /* The header pushes a block of whole pages into the next page class: below
     * RBUF_POOL_MIN that would waste more than an eighth (a 4 KiB block would
     * take 8), so malloc's own bins serve those (they need no alignment). */
    bool pooled = alloc >= RBUF_POOL_MIN;
    cairn_rbuf_t *b = pooled ? cairn_bufpool_alloc(alloc) : malloc(alloc);
    if (!b) abort();
    atomic_init(&b->refs, 1);
    b->size = size;
    b->head = 0;
    b->alloc = pooled ? (uint32_t)alloc : 0;
    if (src) memcpy(b->data, src, size);
    return b;
}

cairn_rbuf_t *cairn_rbuf_new_aligned(uint32_t size, size_t cap)
{
    _Static_assert(sizeof(cairn_rbuf_t) <= CAIRN_IO_ALIGN, "the header fits before the data");
    if (cap < size) abort();
    size_t alloc = CAIRN_IO_ALIGN + cap;
    void *mem = cairn_bufpool_alloc(alloc);
    /* The header ends where the aligned data starts. */
    cairn_rbuf_t *b = (cairn_rbuf_t *)((uint8_t *)mem + CAIRN_IO_ALIGN - sizeof(*b));
    atomic_init(&b->refs, 1);
    b->size = size;
    b->head = (uint32_t)(CAIRN_IO_ALIGN - sizeof(*b));
    b->alloc = (uint32_t)alloc;
    return b;
}

void cairn_rbuf_rele(cairn_rbuf_t *b)
{
    /* acq_rel: the freeing thread must see every other holder's reads done. */
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
    if (b->alloc) cairn_bufpool_free((uint8_t *)b - b->head, b->alloc);
    else free(b);
}

void cairn_spans_add(cairn_spans_t *s, size_t pos, const void *data, size_t len, cairn_rbuf_t *buf)
{
    if (s->n >= s->cap) abort(); /* callers check cairn_spans_room() first */
    s->v[s->n++] = (cairn_span_t){.pos = pos, .len = len, .data = data, .buf = buf};
}

void cairn_spans_release(cairn_spans_t *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) cairn_rbuf_rele(s->v[i].buf);
    s->n = 0;
}

void cairn_spans_copy_release(cairn_spans_t *s, uint8_t *base)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) memcpy(base + s->v[i].pos, s->v[i].data, s->v[i].len);
    cairn_spans_release(s);
}
