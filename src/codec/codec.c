/*
 * Compression dispatch: maps the on-disk cairn_compress_t value of a block
 * pointer to an implementation and enforces the rules every algorithm shares,
 * so that each implementation only has to be right about its own format.
 *
 * Shared rules:
 *   - cairn_compress() returns 0 whenever compressing is pointless or
 *     impossible: algorithm "off" or unknown, empty input, or output that does
 *     not fit in dst_cap. 0 always means "store the block as it is", so a
 *     caller needs no special cases.
 *   - Streams carry no header: the block pointer holds the exact compressed
 *     length (psize) and logical length (lsize), and decompression must
 *     consume exactly src_len bytes and produce exactly dst_len bytes, or it
 *     fails with -EIO. Every decompressor is bounds-checked on both buffers,
 *     so a corrupt stream (the checksum normally catches corruption first,
 *     but reading must stay safe regardless) can never write
 *     outside dst or read outside src.
 *   - "off" decompresses as a plain copy, so a caller may route stored blocks
 *     through the same call.
 *
 * Algorithms: lzjb and zle are our own implementations of ZFS's formats
 * (lzjb.c, zle.c); lz4 is liblz4's raw block format (no frame, no ZFS-style
 * 4-byte length prefix, since the lengths are in the block pointer); gzip-N is
 * zlib's deflate in the zlib container (gzip.c).
 */
#include <limits.h>
#include <string.h>

#include <lz4.h>

#include "codec_impl.h"

/* Each thread keeps its compression state. LZ4_compress_default clears a
 * 16 KiB hash table for every block; a kept state is only marked stale
 * (LZ4_resetStream_fast: old entries are placed out of reach), and the first
 * block after that reset depends on nothing before it - the same raw block
 * format, decoded alone. */
static __thread LZ4_stream_t lz4_state;
static __thread bool lz4_state_ready;

static size_t lz4_compress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap)
{
    if (src_len > (size_t)LZ4_MAX_INPUT_SIZE)
        return 0;
    int cap = (int)CAIRN_MIN(dst_cap, (size_t)INT_MAX);
    if (!lz4_state_ready) {
        LZ4_initStream(&lz4_state, sizeof lz4_state);
        lz4_state_ready = true;
    }
    LZ4_resetStream_fast(&lz4_state);
    int n = LZ4_compress_fast_continue(&lz4_state, (const char *)src, (char *)dst, (int)src_len,
                                       cap, 1);
    return n > 0 ? (size_t)n : 0;
}

static int lz4_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    if (src_len > INT_MAX || dst_len > INT_MAX)
        return -EIO;
    int n = LZ4_decompress_safe((const char *)src, (char *)dst, (int)src_len, (int)dst_len);
    return n >= 0 && (size_t)n == dst_len ? 0 : -EIO;
}

static bool compress_is_gzip(cairn_compress_t alg)
{
    return alg >= CAIRN_COMPRESS_GZIP_1 && alg <= CAIRN_COMPRESS_GZIP_9;
}

/* The codecs below gzip's levels (gzip takes its level as an argument). */
static const struct {
    size_t (*compress)(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap);
    int (*decompress)(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);
} g_codecs[CAIRN_COMPRESS_GZIP_1] = {
    [CAIRN_COMPRESS_LZJB] = {cairn_lzjb_compress, cairn_lzjb_decompress},
    [CAIRN_COMPRESS_LZ4] = {lz4_compress, lz4_decompress},
    [CAIRN_COMPRESS_ZLE] = {cairn_zle_compress, cairn_zle_decompress},
};

size_t cairn_compress(cairn_compress_t alg, const void *src, size_t src_len, void *dst,
                      size_t dst_cap)
{
    if (src_len == 0 || dst_cap == 0)
        return 0;
    if (compress_is_gzip(alg))
        return cairn_gzip_compress((int)(alg - CAIRN_COMPRESS_GZIP_1) + 1, src, src_len, dst,
                                   dst_cap);
    if ((unsigned)alg < CAIRN_COMPRESS_GZIP_1 && g_codecs[alg].compress)
        return g_codecs[alg].compress(src, src_len, dst, dst_cap);
    return 0; /* off, or a value we do not know: store uncompressed */
}

int cairn_decompress(cairn_compress_t alg, const void *src, size_t src_len, void *dst,
                     size_t dst_len)
{
    if ((unsigned)alg >= CAIRN_COMPRESS_COUNT)
        return -EIO;
    /* Nothing to produce: only the empty stream is a valid encoding of it. */
    if (dst_len == 0)
        return src_len == 0 ? 0 : -EIO;
    if (src_len == 0)
        return -EIO;
    if (alg == CAIRN_COMPRESS_OFF) {
        if (src_len != dst_len)
            return -EIO;
        memmove(dst, src, dst_len);
        return 0;
    }
    if (compress_is_gzip(alg))
        return cairn_gzip_decompress(src, src_len, dst, dst_len);
    return g_codecs[alg].decompress(src, src_len, dst, dst_len);
}

static const char *const compress_names[CAIRN_COMPRESS_COUNT] = {
    [CAIRN_COMPRESS_OFF] = "off",
    [CAIRN_COMPRESS_LZJB] = "lzjb",
    [CAIRN_COMPRESS_LZ4] = "lz4",
    [CAIRN_COMPRESS_ZLE] = "zle",
    [CAIRN_COMPRESS_GZIP(1)] = "gzip-1",
    [CAIRN_COMPRESS_GZIP(2)] = "gzip-2",
    [CAIRN_COMPRESS_GZIP(3)] = "gzip-3",
    [CAIRN_COMPRESS_GZIP(4)] = "gzip-4",
    [CAIRN_COMPRESS_GZIP(5)] = "gzip-5",
    [CAIRN_COMPRESS_GZIP(6)] = "gzip-6",
    [CAIRN_COMPRESS_GZIP(7)] = "gzip-7",
    [CAIRN_COMPRESS_GZIP(8)] = "gzip-8",
    [CAIRN_COMPRESS_GZIP(9)] = "gzip-9",
};

const char *cairn_compress_name(cairn_compress_t alg)
{
    if ((unsigned)alg >= CAIRN_COMPRESS_COUNT)
        return NULL;
    return compress_names[alg];
}

int cairn_compress_from_name(const char *name, cairn_compress_t *out)
{
    if (name == NULL)
        return -EINVAL;
    if (strcmp(name, "on") == 0) {
        *out = CAIRN_COMPRESS_LZ4;
        return 0;
    }
    if (strcmp(name, "gzip") == 0) {
        *out = CAIRN_COMPRESS_GZIP(6);
        return 0;
    }
    for (unsigned i = 0; i < CAIRN_COMPRESS_COUNT; i++) {
        if (strcmp(name, compress_names[i]) == 0) {
            *out = (cairn_compress_t)i;
            return 0;
        }
    }
    return -EINVAL;
}
