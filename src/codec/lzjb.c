/*
 * LZJB: the small, fast Lempel-Ziv variant ZFS has used since its first
 * release. Cairn writes and reads the same byte stream as ZFS, so a pool's
 * lzjb blocks mean the same thing to both; this file is our own code written
 * from the format definition below.
 *
 * Stream format. The stream is a sequence of items, grouped by eight. Each
 * group starts with a copy-map byte whose bit k (k = 0 is the least
 * significant bit) describes the group's k-th item:
 *
 *   bit clear: a literal, one byte copied to the output as is;
 *   bit set:   a match, two bytes  LLLLLLOO OOOOOOOO  (big-endian order):
 *              length = L + 3 (3..66), offset = O (1..1023); the decoder
 *              copies `length` bytes starting `offset` bytes back in the
 *              output produced so far, byte by byte, so a match may overlap
 *              the bytes it is producing (offset 1 repeats one byte).
 *
 * The last group may hold fewer than eight items; its unused map bits are 0.
 * There is no header and no end marker: the block pointer records both the
 * compressed and the logical length.
 *
 * Compressor. One pass, greedy, no lazy matching. At each input position p a
 * hash of the next three bytes,
 *
 *   h = (b0 << 16) + (b1 << 8) + b2;  h += h >> 9;  h += h >> 5;  slot = h & 1023,
 *
 * selects one entry of a 1024-entry table that holds the low 16 bits of the
 * last position with that hash (initially 0). The candidate offset is
 * (p - entry) & 1023 and the entry is then set to p. If the offset is not 0,
 * does not reach before the start of the input, and the three bytes there
 * equal the three at p, a match is emitted and extended as far as it goes (at
 * most 66 bytes); otherwise one literal. The last 66 bytes of the input (or
 * all of it, when shorter) are always literals, so extending a match never
 * reads past the input.
 *
 * Why this is byte-identical to ZFS: ZFS keeps the low 16 bits of the *address*
 * of each position rather than of its index, and starts with a zeroed table.
 * Every offset is reduced modulo 1024, which divides 65536, so for an input
 * buffer aligned to 1024 bytes (ZFS's block buffers are page aligned) address
 * and index give the same offsets, including the first-use case where both
 * compute (p & 1023). Using indices makes our output independent of where the
 * caller's buffer happens to sit, which ZFS's is not. The only deliberate
 * difference is when we give up: ZFS stops early with a conservative
 * "dst nearly full" test, we test every write exactly, so a block that fits
 * in dst_cap is never refused; the bytes written are the same either way.
 *
 * Decoder. Strict: every item must lie fully inside src, every match must lie
 * inside the output already produced (offset 0 or reaching before the start
 * is corruption) and must not run past dst_len, and the stream must end
 * exactly when the output is full. ZFS's own decoder clips an overlong final
 * match and ignores trailing bytes; no compressor emits either, so refusing
 * them costs nothing and turns more corruption into -EIO.
 */
#include <string.h>

#include "codec_impl.h"

#define LZJB_MATCH_BITS 6
#define LZJB_MATCH_MIN 3
#define LZJB_MATCH_MAX ((1 << LZJB_MATCH_BITS) + LZJB_MATCH_MIN - 1) /* 66 */
#define LZJB_OFFSET_MASK ((1 << (16 - LZJB_MATCH_BITS)) - 1)         /* 1023 */
#define LZJB_TABLE_SIZE 1024
#define LZJB_GROUP 8

static inline unsigned lzjb_hash(const uint8_t *p)
{
    unsigned h = ((unsigned)p[0] << 16) + ((unsigned)p[1] << 8) + p[2];
    h += h >> 9;
    h += h >> 5;
    return h & (LZJB_TABLE_SIZE - 1);
}

size_t cairn_lzjb_compress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_cap)
{
    uint16_t table[LZJB_TABLE_SIZE];
    size_t sp = 0, dp = 0;
    size_t map_pos = 0;
    unsigned item = LZJB_GROUP; /* items used in the current group; 8 = start a new one */

    memset(table, 0, sizeof(table));
    while (sp < src_len) {
        if (item == LZJB_GROUP) {
            if (dp >= dst_cap)
                return 0;
            map_pos = dp;
            dst[dp++] = 0;
            item = 0;
        }
        /* Near the end a match could not be extended safely: literals only. */
        if (src_len - sp >= LZJB_MATCH_MAX) {
            uint16_t *slot = &table[lzjb_hash(src + sp)];
            size_t offset = (sp - *slot) & LZJB_OFFSET_MASK;
            *slot = (uint16_t)sp;
            if (offset != 0 && offset <= sp) {
                const uint8_t *cur = src + sp, *ref = cur - offset;
                if (cur[0] == ref[0] && cur[1] == ref[1] && cur[2] == ref[2]) {
                    size_t len = LZJB_MATCH_MIN;
                    while (len < LZJB_MATCH_MAX && cur[len] == ref[len])
                        len++;
                    if (dst_cap - dp < 2)
                        return 0;
                    dst[map_pos] |= (uint8_t)(1u << item);
                    dst[dp++] = (uint8_t)(((len - LZJB_MATCH_MIN) << (8 - LZJB_MATCH_BITS)) |
                                          (offset >> 8));
                    dst[dp++] = (uint8_t)offset;
                    sp += len;
                    item++;
                    continue;
                }
            }
        }
        if (dp >= dst_cap)
            return 0;
        dst[dp++] = src[sp++];
        item++;
    }
    return dp;
}

int cairn_lzjb_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    size_t sp = 0, dp = 0;
    unsigned map = 0, item = LZJB_GROUP;

    while (dp < dst_len) {
        if (item == LZJB_GROUP) {
            if (sp >= src_len)
                return -EIO;
            map = src[sp++];
            item = 0;
        }
        if (map & (1u << item)) {
            if (src_len - sp < 2)
                return -EIO;
            size_t len = (size_t)(src[sp] >> (8 - LZJB_MATCH_BITS)) + LZJB_MATCH_MIN;
            size_t offset = (((size_t)src[sp] << 8) | src[sp + 1]) & LZJB_OFFSET_MASK;
            sp += 2;
            if (offset == 0 || offset > dp || len > dst_len - dp)
                return -EIO;
            uint8_t *out = dst + dp;
            const uint8_t *ref = out - offset;
            if (offset >= len) {
                memcpy(out, ref, len);
            } else {
                for (size_t i = 0; i < len; i++)
                    out[i] = ref[i]; /* overlapping: each byte may be one just written */
            }
            dp += len;
        } else {
            if (sp >= src_len)
                return -EIO;
            dst[dp++] = src[sp++];
        }
        item++;
    }
    return sp == src_len ? 0 : -EIO;
}
