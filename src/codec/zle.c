/*
 * ZLE, zero-length encoding: the cheapest useful compressor for blocks that
 * are mostly zeros with some data (sparse tables, partially written records).
 * It only ever removes runs of zero bytes; anything else is copied.
 *
 * Stream format (the same as ZFS's zle with its fixed parameter n = 64). The
 * stream is a sequence of runs, each introduced by one header byte h:
 *
 *   h in 0..63:    a literal run: the next h + 1 bytes (1..64) are copied;
 *   h in 64..255:  a zero run: h - 63 zero bytes (1..192) are produced and
 *                  nothing more is read.
 *
 * No header and no terminator: the block pointer records both lengths.
 *
 * Encoder decisions (all of them, so the output is exactly defined, and equal
 * to ZFS's for the same input):
 *   - at a zero byte, start a zero run and take as many zeros as follow, up
 *     to 192;
 *   - at a non-zero byte, start a literal run of at most 64 bytes. It ends
 *     in front of the first PAIR of zero bytes; a lone zero between non-zero
 *     bytes stays inside the literal (a separate zero run would cost a header
 *     byte to save one byte, and break the literal in two). When the 64-byte
 *     limit is reached and its last byte would be a zero, that zero is left
 *     for the next (zero) run, so a literal run never ends in a zero.
 * ZFS gives up early with a conservative room check; we check every write
 * exactly, so any output that fits in dst_cap is produced, with the same
 * bytes.
 *
 * Decoder: strict. A run must fit both in the remaining input and in the
 * remaining output, and the stream must end exactly when the output is full
 * (ZFS ignores trailing input; our encoder never produces any).
 */
#include <string.h>

#include "codec_impl.h"

#define ZLE_LITERAL_MAX 64 /* headers 0..63 */
#define ZLE_ZERO_MAX (256 - ZLE_LITERAL_MAX) /* headers 64..255: 1..192 zeros */

size_t cairn_zle_compress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap)
{
    size_t sp = 0, dp = 0;

    while (sp < src_len) {
        size_t start = sp;
        if (dp >= dst_cap)
            return 0;
        if (src[sp] == 0) {
            size_t limit = CAIRN_MIN(src_len, start + ZLE_ZERO_MAX);
            while (sp < limit && src[sp] == 0)
                sp++;
            dst[dp++] = (uint8_t)(ZLE_LITERAL_MAX + (sp - start) - 1);
        } else {
            size_t limit = CAIRN_MIN(src_len, start + ZLE_LITERAL_MAX);
            /* Advance over bytes that are not the first of a zero pair. */
            while (sp + 1 < limit && (src[sp] | src[sp + 1]) != 0)
                sp++;
            /* sp is now the last byte allowed, or the first of a zero pair. */
            if (src[sp] != 0)
                sp++;
            size_t len = sp - start;
            if (dst_cap - dp < 1 + len)
                return 0;
            dst[dp++] = (uint8_t)(len - 1);
            memcpy(dst + dp, src + start, len);
            dp += len;
        }
    }
    return dp;
}

int cairn_zle_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    size_t sp = 0, dp = 0;

    while (sp < src_len) {
        unsigned h = src[sp++];
        if (h < ZLE_LITERAL_MAX) {
            size_t len = (size_t)h + 1;
            if (len > src_len - sp || len > dst_len - dp)
                return -EIO;
            memcpy(dst + dp, src + sp, len);
            sp += len;
            dp += len;
        } else {
            size_t len = (size_t)h - ZLE_LITERAL_MAX + 1;
            if (len > dst_len - dp)
                return -EIO;
            memset(dst + dp, 0, len);
            dp += len;
        }
    }
    return dp == dst_len ? 0 : -EIO;
}
