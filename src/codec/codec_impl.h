/*
 * Internal interface of the codec layer: the individual algorithms behind the
 * dispatch in codec.c. Unit tests and the throughput bench include this
 * header too, so each implementation (e.g. both fletcher4 variants) can be
 * checked and measured on its own. Everything here follows the conventions of
 * cairn/codec.h: compressors return the output length or 0 when it does not
 * fit; decompressors return 0 or -EIO and never touch memory outside the two
 * buffers they are given.
 */
#ifndef CAIRN_CODEC_IMPL_H
#define CAIRN_CODEC_IMPL_H

#include <cairn/codec.h>

size_t cairn_lzjb_compress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap);
int cairn_lzjb_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);

size_t cairn_zle_compress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap);
int cairn_zle_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);

size_t cairn_gzip_compress(int level, const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_cap);
int cairn_gzip_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);

/* Fletcher-4 state: the four running sums, continued word by word. */
typedef struct cairn_fletcher4 {
    uint64_t a, b, c, d;
} cairn_fletcher4_t;

/* Both variants compute the same function; the AVX2 one may only be called
 * when cairn_fletcher4_avx2_usable() says the CPU has AVX2. */
void cairn_fletcher4_scalar(const void *buf, size_t len, cairn_fletcher4_t *out);
void cairn_fletcher4_avx2(const void *buf, size_t len, cairn_fletcher4_t *out);
bool cairn_fletcher4_avx2_usable(void);

#endif
