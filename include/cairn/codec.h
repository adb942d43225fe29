/*
 * Block codecs: compression and checksums, pure functions over buffers.
 *
 * The numeric values of both enums are stored in every block pointer, so they
 * are part of the on-disk format (docs/ondisk-format.md) and never renumbered.
 *
 * Compression: cairn_compress() writes at most dst_cap bytes and returns the
 * compressed length, or 0 when the output would not fit (the caller then
 * stores the block uncompressed). The caller chooses dst_cap to express "only
 * if it saves at least 12.5%". Decompression is told the exact compressed and
 * logical lengths (both live in the block pointer), so streams carry no
 * headers of their own.
 *
 * Checksums fill 32 bytes: fletcher4 (four 64-bit sums over 32-bit words),
 * xxhash (XXH3-128, zero-padded), sha256.
 */
#ifndef CAIRN_CODEC_H
#define CAIRN_CODEC_H

#include <cairn/types.h>

typedef enum cairn_compress {
    CAIRN_COMPRESS_OFF = 0,
    CAIRN_COMPRESS_LZJB = 1,
    CAIRN_COMPRESS_LZ4 = 2,
    CAIRN_COMPRESS_ZLE = 3,
    CAIRN_COMPRESS_GZIP_1 = 4, /* GZIP_N = GZIP_1 + N - 1 */
    CAIRN_COMPRESS_GZIP_9 = 12,
    CAIRN_COMPRESS_COUNT = 13,
} cairn_compress_t;
#define CAIRN_COMPRESS_GZIP(level) ((cairn_compress_t)(CAIRN_COMPRESS_GZIP_1 + (level) - 1))

typedef enum cairn_checksum {
    CAIRN_CHECKSUM_NONE = 0, /* never valid for a stored block; reserved */
    CAIRN_CHECKSUM_FLETCHER4 = 1,
    CAIRN_CHECKSUM_XXHASH = 2,
    CAIRN_CHECKSUM_SHA256 = 3,
    CAIRN_CHECKSUM_COUNT = 4,
} cairn_checksum_t;

#define CAIRN_CHECKSUM_LEN 32

/* Returns compressed length (1..dst_cap) or 0 if it would not fit in dst_cap. */
size_t cairn_compress(cairn_compress_t alg, const void *src, size_t src_len, void *dst,
                      size_t dst_cap);
/* Decompress exactly src_len bytes into exactly dst_len bytes: 0 or -EIO on a corrupt stream. */
int cairn_decompress(cairn_compress_t alg, const void *src, size_t src_len, void *dst,
                     size_t dst_len);
/* "off", "lzjb", "lz4", "zle", "gzip-1".."gzip-9"; NULL for an invalid value. */
const char *cairn_compress_name(cairn_compress_t alg);
/* Accepts the names above plus "gzip" (= gzip-6) and "on" (= lz4); -EINVAL otherwise. */
int cairn_compress_from_name(const char *name, cairn_compress_t *out);

void cairn_checksum(cairn_checksum_t alg, const void *buf, size_t len,
                    uint8_t out[CAIRN_CHECKSUM_LEN]);
/* "fletcher4", "xxhash", "sha256"; NULL for an invalid value. */
const char *cairn_checksum_name(cairn_checksum_t alg);
/* Accepts the names above plus "on" (= fletcher4); -EINVAL otherwise ("off" is refused). */
int cairn_checksum_from_name(const char *name, cairn_checksum_t *out);

#endif
