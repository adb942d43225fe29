/*
 * Reference-counted byte buffers, and spans of them (src/util/rbuf.c).
 *
 * Why: a cached read used to copy each record out of the ARC into the reply
 * it was building, and then the socket copied the reply again. A caller that
 * can send from several places at once (an iovec per piece) asks for spans
 * instead: "bytes [pos, pos + len) of what you asked for are at data, which
 * lives in buf". The span holds a reference on buf, so the bytes stay valid
 * however long the send takes, even if the cache that owned them evicts or
 * frees the block meanwhile.
 *
 * The contract that makes sharing safe: a buffer's bytes are written only
 * before it is shared (by whoever allocated it) and never after - the ARC
 * fills a buffer, then publishes it; a rewritten or freed block gets a new
 * buffer or none, never new bytes in the old one.
 *
 * The memory comes from the buffer pool (cairn/bufpool.h): a released
 * buffer's pages serve the next buffer of its size class on any thread
 * instead of going back to malloc's per-thread arenas.
 */
#ifndef CAIRN_RBUF_H
#define CAIRN_RBUF_H

#include <cairn/types.h>

#include <stdatomic.h>

typedef struct cairn_rbuf {
    atomic_uint refs;
    uint32_t size;
    uint32_t head;          /* bytes of the allocation before this header */
    uint32_t alloc;         /* bytes of the allocation from the buffer pool; 0: malloc's */
    uint8_t data[];
} cairn_rbuf_t;

/* A buffer of size bytes holding one reference; its bytes are a copy of src,
 * or uninitialised when src is NULL (the caller fills them before sharing). */
cairn_rbuf_t *cairn_rbuf_new(const void *src, uint32_t size);
/* An uninitialised buffer whose data is aligned for direct I/O (CAIRN_IO_ALIGN)
 * with room for cap >= size bytes, so a device can read into it and the
 * buffer be kept as it is (the ARC adopting a verified block). Costs one
 * CAIRN_IO_ALIGN of memory more than cap. */
cairn_rbuf_t *cairn_rbuf_new_aligned(uint32_t size, size_t cap);
static inline cairn_rbuf_t *cairn_rbuf_hold(cairn_rbuf_t *b)
{
    if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}
/* Drops one reference; the last frees the buffer. NULL is ignored. */
void cairn_rbuf_rele(cairn_rbuf_t *b);

/* Bytes [pos, pos + len) of a read come from data (inside buf, held). */
typedef struct cairn_span {
    size_t pos;
    size_t len;
    const uint8_t *data;
    cairn_rbuf_t *buf;
} cairn_span_t;

/* Spans collected by one read, in increasing pos, in storage the caller
 * gives (v, cap): a reader with no room left copies instead, so the number
 * of pieces a reply is sent from stays bounded. */
typedef struct cairn_spans {
    cairn_span_t *v;
    size_t n, cap;
} cairn_spans_t;

static inline bool cairn_spans_room(const cairn_spans_t *s) { return s && s->n < s->cap; }
/* Appends a span taking over the caller's reference on buf (room checked first). */
void cairn_spans_add(cairn_spans_t *s, size_t pos, const void *data, size_t len, cairn_rbuf_t *buf);
/* Releases every span's reference; n becomes 0. */
void cairn_spans_release(cairn_spans_t *s);
/* Copies the spans' bytes into base (base + pos for each) and releases them. */
void cairn_spans_copy_release(cairn_spans_t *s, uint8_t *base);

#endif
