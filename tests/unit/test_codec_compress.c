/*
 * Compression codecs: round trips for every algorithm over many data shapes
 * and sizes, exact output of LZJB and ZLE on hand-derived vectors, decoding
 * of hand-built streams, strict length handling, and corrupt-stream safety
 * (run under ASan with exactly sized heap buffers, so any stray read or write
 * is caught).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairn/codec.h>
#include <cairn/util.h>
#include <zlib.h>

#include "../../src/codec/codec_impl.h"

enum data_kind { DATA_ZEROS, DATA_RANDOM, DATA_TEXT, DATA_MIXED, DATA_KIND_COUNT };
static const char *const data_kind_names[] = {"zeros", "random", "text", "mixed"};

static void fill_random(cairn_rng_t *r, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)cairn_rng_next(r);
}

/* Words from a small vocabulary: compresses well, contains no zero bytes. */
static void fill_text(cairn_rng_t *r, uint8_t *buf, size_t len)
{
    static const char *const words[] = {"the ", "pool ", "block ", "pointer ", "checksum ",
                                        "copy-on-write ", "txg ", "vdev ", "mirror ", "raidz ",
                                        "scrub ", "resilver ", "snapshot ", "dataset ", "\n"};
    size_t i = 0;
    while (i < len) {
        const char *w = words[cairn_rng_below(r, CAIRN_ARRAY_SIZE(words))];
        for (size_t k = 0; w[k] && i < len; k++)
            buf[i++] = (uint8_t)w[k];
    }
}

/* Chunks of zeros, text and random bytes, as a real file block might hold. */
static void fill_mixed(cairn_rng_t *r, uint8_t *buf, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t want = 1 + cairn_rng_below(r, 3000); /* CAIRN_MIN evaluates twice */
        size_t n = CAIRN_MIN(len - i, want);
        switch (cairn_rng_below(r, 3)) {
        case 0: memset(buf + i, 0, n); break;
        case 1: fill_text(r, buf + i, n); break;
        default: fill_random(r, buf + i, n); break;
        }
        i += n;
    }
}

static void fill_kind(enum data_kind kind, uint64_t seed, uint8_t *buf, size_t len)
{
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    switch (kind) {
    case DATA_ZEROS: memset(buf, 0, len); break;
    case DATA_RANDOM: fill_random(&r, buf, len); break;
    case DATA_TEXT: fill_text(&r, buf, len); break;
    default: fill_mixed(&r, buf, len); break;
    }
}

static bool alg_compresses(cairn_compress_t alg)
{
    return alg != CAIRN_COMPRESS_OFF;
}

/*
 * Decompress into a heap buffer of exactly dst_len bytes from a heap copy of
 * exactly src_len bytes, so ASan flags any access outside either.
 */
static int decompress_exact(cairn_compress_t alg, const uint8_t *src, size_t src_len,
                            uint8_t **out, size_t dst_len)
{
    uint8_t *s = malloc(src_len ? src_len : 1);
    uint8_t *d = malloc(dst_len ? dst_len : 1);
    assert_non_null(s);
    assert_non_null(d);
    if (src_len)
        memcpy(s, src, src_len);
    int rc = cairn_decompress(alg, s, src_len, d, dst_len);
    free(s);
    if (out)
        *out = d;
    else
        free(d);
    return rc;
}

/* ---- round trips -------------------------------------------------------- */

static void roundtrip_one(cairn_compress_t alg, enum data_kind kind, size_t len, uint64_t seed)
{
    uint8_t *src = malloc(len);
    size_t cap = len + len / 8 + 1024; /* room even for expanding output */
    uint8_t *dst = malloc(cap);
    assert_non_null(src);
    assert_non_null(dst);
    fill_kind(kind, seed, src, len);

    size_t c = cairn_compress(alg, src, len, dst, cap);
    if (!alg_compresses(alg)) {
        assert_int_equal(c, 0);
    } else {
        assert_true(c <= cap);
        /* Zeros shrink under every algorithm; text under all but zle (no zeros). */
        if (kind == DATA_ZEROS)
            assert_true(c > 0 && c < len / 4 + 16);
        if (kind == DATA_TEXT && alg != CAIRN_COMPRESS_ZLE)
            assert_true(c > 0 && c < len - len / 4 + 16);
        if (kind == DATA_MIXED && len >= 128 * 1024)
            assert_true(c > 0 && c < len);
    }
    if (c == 0) {
        /* Stored uncompressed: "off" must still round-trip as a plain copy. */
        uint8_t *out = NULL;
        assert_int_equal(decompress_exact(CAIRN_COMPRESS_OFF, src, len, &out, len), 0);
        assert_memory_equal(out, src, len);
        free(out);
    } else {
        uint8_t *out = NULL;
        int rc = decompress_exact(alg, dst, c, &out, len);
        if (rc != 0 || memcmp(out, src, len) != 0)
            fail_msg("%s on %s, %zu bytes: round trip failed (rc %d)", cairn_compress_name(alg),
                     data_kind_names[kind], len, rc);
        free(out);
        /* The logical length is part of the contract: off by one either way fails. */
        assert_int_equal(decompress_exact(alg, dst, c, NULL, len - 1), -EIO);
        assert_int_equal(decompress_exact(alg, dst, c, NULL, len + 1), -EIO);
        /* So is the compressed length: a trailing byte is corruption too. */
        if (c < cap) {
            dst[c] = 0;
            assert_int_equal(decompress_exact(alg, dst, c + 1, NULL, len), -EIO);
        }
    }
    free(src);
    free(dst);
}

static void test_roundtrip_all_algorithms(void **state)
{
    (void)state;
    static const size_t sizes[] = {512, 1000, 4096, 65537, 128 * 1024, 1024 * 1024};
    for (unsigned a = 0; a < CAIRN_COMPRESS_COUNT; a++)
        for (unsigned k = 0; k < DATA_KIND_COUNT; k++)
            for (unsigned s = 0; s < CAIRN_ARRAY_SIZE(sizes); s++) {
                /* gzip-2..8 behave like their neighbours: keep 1 MiB runs for 1 and 9. */
                cairn_compress_t alg = (cairn_compress_t)a;
                if (sizes[s] > 128 * 1024 && alg > CAIRN_COMPRESS_GZIP_1 &&
                    alg < CAIRN_COMPRESS_GZIP_9)
                    continue;
                roundtrip_one(alg, (enum data_kind)k, sizes[s], 1000 * a + 10 * k + s);
            }
}

/* lz4 keeps a compression state per thread and only marks it stale between
 * blocks: each block must still depend on nothing compressed before it. Blocks
 * cut from one buffer (so each begins where the last ended, and repeats it),
 * one block compressed twice in a row from the same address, then from a copy:
 * every output decodes alone into its block, with the same length each time. */
static void test_lz4_blocks_are_independent(void **state)
{
    (void)state;
    const size_t blk = 8192, nblk = 64;
    uint8_t *src = malloc(blk * nblk), *out = malloc(blk * 2), *back = malloc(blk);
    cairn_rng_t r;
    cairn_rng_seed(&r, 77);
    fill_random(&r, src, blk);
    for (size_t i = 1; i < nblk; i++) { /* each block: the one before, a few bytes changed */
        memcpy(src + i * blk, src + (i - 1) * blk, blk);
        for (int k = 0; k < 16; k++) src[i * blk + cairn_rng_next(&r) % blk] ^= 0x5a;
    }
    for (size_t i = 0; i < nblk; i++) {
        size_t c = cairn_compress(CAIRN_COMPRESS_LZ4, src + i * blk, blk, out, 2 * blk);
        assert_true(c > 0);
        assert_true(i == 0 || c > blk / 2); /* no reference into the block before */
        assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZ4, out, c, back, blk), 0);
        assert_memory_equal(back, src + i * blk, blk);
        size_t again = cairn_compress(CAIRN_COMPRESS_LZ4, src + i * blk, blk, out, 2 * blk);
        assert_int_equal(again, c);
        assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZ4, out, again, back, blk), 0);
        assert_memory_equal(back, src + i * blk, blk);
        memcpy(back, src + i * blk, blk);
        assert_int_equal(cairn_compress(CAIRN_COMPRESS_LZ4, back, blk, out, 2 * blk), c);
    }
    free(src);
    free(out);
    free(back);
}

static void test_empty_and_one_byte(void **state)
{
    (void)state;
    uint8_t in[1] = {0x5a}, zero[1] = {0}, out[64], back[1];
    for (unsigned a = 0; a < CAIRN_COMPRESS_COUNT; a++) {
        cairn_compress_t alg = (cairn_compress_t)a;
        /* Nothing to gain from an empty block: always "store as is". */
        assert_int_equal(cairn_compress(alg, in, 0, out, sizeof(out)), 0);
        assert_int_equal(cairn_decompress(alg, in, 0, back, 0), 0);
        assert_int_equal(cairn_decompress(alg, in, 1, back, 0), -EIO);
        assert_int_equal(cairn_decompress(alg, in, 0, back, 1), -EIO);

        for (int z = 0; z < 2; z++) {
            const uint8_t *src = z ? zero : in;
            size_t c = cairn_compress(alg, src, 1, out, sizeof(out));
            if (!alg_compresses(alg)) {
                assert_int_equal(c, 0);
                continue;
            }
            assert_true(c > 0);
            back[0] = 0xee;
            assert_int_equal(cairn_decompress(alg, out, c, back, 1), 0);
            assert_int_equal(back[0], src[0]);
        }
    }
    /* Exact encodings of one byte. lzjb: copy map 0 + the literal. */
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_LZJB, in, 1, out, sizeof(out)), 2);
    assert_int_equal(out[0], 0x00);
    assert_int_equal(out[1], 0x5a);
    /* zle: literal run of 1 (header 0), or a zero run of 1 (header 64). */
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_ZLE, in, 1, out, sizeof(out)), 2);
    assert_int_equal(out[0], 0x00);
    assert_int_equal(out[1], 0x5a);
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_ZLE, zero, 1, out, sizeof(out)), 1);
    assert_int_equal(out[0], 0x40);
    /* lz4: a single last-literals sequence, token 0x10. */
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_LZ4, in, 1, out, sizeof(out)), 2);
    assert_int_equal(out[0], 0x10);
    assert_int_equal(out[1], 0x5a);
}

/* Random data never fits in less than its own size: every algorithm says 0. */
static void test_incompressible_does_not_fit(void **state)
{
    (void)state;
    size_t len = 128 * 1024;
    uint8_t *src = malloc(len), *dst = malloc(len);
    fill_kind(DATA_RANDOM, 77, src, len);
    for (unsigned a = 0; a < CAIRN_COMPRESS_COUNT; a++) {
        assert_int_equal(cairn_compress((cairn_compress_t)a, src, len, dst, len - 1), 0);
        assert_int_equal(cairn_compress((cairn_compress_t)a, src, len, dst, len - len / 8), 0);
    }
    /* Zero-capacity output is refused, not overrun. */
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_LZJB, src, len, dst, 0), 0);
    free(src);
    free(dst);
}

/*
 * dst_cap is honoured exactly: output that fits in exactly c bytes is
 * produced with cap c (same bytes as with a big cap), and refused with c - 1.
 * The destination is an exactly sized heap buffer, so a write past the cap
 * is an ASan error even where the return value looked right.
 */
static void test_dst_cap_is_exact(void **state)
{
    (void)state;
    static const cairn_compress_t algs[] = {CAIRN_COMPRESS_LZJB, CAIRN_COMPRESS_ZLE,
                                            CAIRN_COMPRESS_LZ4, CAIRN_COMPRESS_GZIP(1),
                                            CAIRN_COMPRESS_GZIP(9)};
    size_t len = 16 * 1024;
    uint8_t *src = malloc(len), *big = malloc(2 * len);
    fill_kind(DATA_MIXED, 5, src, len);
    for (unsigned i = 0; i < CAIRN_ARRAY_SIZE(algs); i++) {
        size_t c = cairn_compress(algs[i], src, len, big, 2 * len);
        assert_true(c > 0);
        uint8_t *exact = malloc(c);
        assert_int_equal(cairn_compress(algs[i], src, len, exact, c), c);
        assert_memory_equal(exact, big, c);
        free(exact);
        uint8_t *short_buf = malloc(c - 1);
        assert_int_equal(cairn_compress(algs[i], src, len, short_buf, c - 1), 0);
        free(short_buf);
    }
    free(src);
    free(big);
}

/* ---- LZJB known vectors ------------------------------------------------- */

/* Our own statement of the LZJB hash, to state the vectors' premises. */
static unsigned vector_lzjb_hash(const char *p)
{
    unsigned h = ((unsigned)(uint8_t)p[0] << 16) + ((unsigned)(uint8_t)p[1] << 8) + (uint8_t)p[2];
    h += h >> 9;
    h += h >> 5;
    return h & 1023;
}

static void expect_lzjb(const uint8_t *src, size_t len, const uint8_t *want, size_t want_len)
{
    uint8_t out[512];
    size_t c = cairn_compress(CAIRN_COMPRESS_LZJB, src, len, out, sizeof(out));
    assert_int_equal(c, want_len);
    assert_memory_equal(out, want, want_len);
    uint8_t back[512];
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, out, c, back, len), 0);
    assert_memory_equal(back, src, len);
}

/*
 * Why these are ZFS's bytes: each vector is derived step by step from the
 * LZJB compressor as ZFS defines it (greedy; a 1024-entry table indexed by
 * the 3-byte hash, holding the low 16 bits of the last position seen at item
 * starts only, initially 0; candidate offset = (p - entry) & 1023, used only
 * if non-zero, not before the buffer and the 3 bytes match; matches of 3..66
 * bytes; the final 66 input bytes always literal; copy-map bit k for item k,
 * LSB first; match = (len-3)<<2 | offset>>8, then offset & 0xff). ZFS keys
 * the table by buffer address rather than index; for a 1024-aligned buffer
 * (ZFS's are page aligned) the two give identical offsets because 1024
 * divides 65536, including the initial-zero case, where both give p & 1023.
 */
static void test_lzjb_vector_abc_repeated(void **state)
{
    (void)state;
    /* "abc" x 24 = 72 bytes. Hashes: abc 940, bca 310, cab 938: distinct. */
    assert_int_equal(vector_lzjb_hash("abc"), 940);
    assert_int_equal(vector_lzjb_hash("bca"), 310);
    assert_int_equal(vector_lzjb_hash("cab"), 938);
    uint8_t src[72];
    for (int i = 0; i < 72; i++)
        src[i] = (uint8_t)("abc"[i % 3]);
    /*
     * p=0 'abc': entry 0 gives offset 0 -> literal. p=1 'bca': offset 1, "abc"
     * != "bca" -> literal. p=2 'cab': offset 2, "abc" != "cab" -> literal.
     * p=3 'abc': entry 0 -> offset 3, matches, extends to the 66 maximum
     * (72-3 >= 66) -> item 3 is a match: (66-3)<<2 | 0 = 0xfc, 0x03. p=69:
     * only 3 bytes left (< 66) -> literals a, b, c. 7 items, map = bit 3.
     */
    static const uint8_t want[] = {0x08, 'a', 'b', 'c', 0xfc, 0x03, 'a', 'b', 'c'};
    expect_lzjb(src, sizeof(src), want, sizeof(want));
}

static void test_lzjb_vector_byte_run(void **state)
{
    (void)state;
    /*
     * 100 x 'x'. p=0: offset 0 -> literal. p=1: entry 0 -> offset 1, matches,
     * length 66 (100-1 >= 66): 0xfc 0x01. p=67: 33 bytes left < 66 -> 33
     * literals. Items: lit, match, 33 lits = 35 items in 5 groups:
     * [map 0x02: x, match, 6 x] [0x00: 8 x] [0x00: 8 x] [0x00: 8 x] [0x00: 3 x].
     */
    uint8_t src[100];
    memset(src, 'x', sizeof(src));
    uint8_t want[41];
    size_t n = 0;
    want[n++] = 0x02;
    want[n++] = 'x';
    want[n++] = 0xfc;
    want[n++] = 0x01;
    for (int i = 0; i < 6; i++)
        want[n++] = 'x';
    for (int g = 0; g < 3; g++) {
        want[n++] = 0x00;
        for (int i = 0; i < 8; i++)
            want[n++] = 'x';
    }
    want[n++] = 0x00;
    for (int i = 0; i < 3; i++)
        want[n++] = 'x';
    assert_int_equal(n, sizeof(want));
    expect_lzjb(src, sizeof(src), want, sizeof(want));
}

static void test_lzjb_vector_zero_run_table_not_updated_inside_matches(void **state)
{
    (void)state;
    /*
     * 200 zeros (hash 0). p=0 literal (offset 0), entry := 0. p=1: offset 1,
     * match 66 -> 0xfc 0x01, entry := 1. p=67: entry 1 -> offset 66 (the
     * table only learns item starts), match 66 -> 0xfc 0x42, entry := 67.
     * p=133 (67 left): offset 66 again -> 0xfc 0x42. p=199: 1 left -> literal.
     * Items lit, M, M, M, lit: map bits 1..3 = 0x0e.
     */
    uint8_t src[200] = {0};
    static const uint8_t want[] = {0x0e, 0x00, 0xfc, 0x01, 0xfc, 0x42, 0xfc, 0x42, 0x00};
    expect_lzjb(src, sizeof(src), want, sizeof(want));
}

static void test_lzjb_vector_match_ending_the_stream(void **state)
{
    (void)state;
    /*
     * "abc" x 23 = 69 bytes. As above until p=3, where exactly 66 bytes
     * remain: still allowed to match (only positions with fewer than 66 left
     * are forced literals), length 66 ends the input. 4 items, map bit 3.
     * The stream ends with a match, so it is also the case where the output
     * limit is reached by a 2-byte item: cap 6 fits, cap 5 does not.
     */
    uint8_t src[69];
    for (int i = 0; i < 69; i++)
        src[i] = (uint8_t)("abc"[i % 3]);
    static const uint8_t want[] = {0x08, 'a', 'b', 'c', 0xfc, 0x03};
    expect_lzjb(src, sizeof(src), want, sizeof(want));
    uint8_t *exact = malloc(6);
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_LZJB, src, sizeof(src), exact, 6), 6);
    assert_memory_equal(exact, want, 6);
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_LZJB, src, sizeof(src), exact, 5), 0);
    free(exact);
}

static void test_lzjb_vector_hash_collision_hides_match(void **state)
{
    (void)state;
    /*
     * "aqa" and "bae" share hash slot 809. Input "aqa" "bae" "aqa" then 66
     * distinct filler bytes 0x80..0xc1 (no 3-byte sequence repeats, so no
     * other match is possible). p=0 "aqa": offset 0 -> literal, slot 809 := 0.
     * p=3 "bae": slot 809 gives offset 3, "aqa" != "bae" -> literal, slot
     * 809 := 3. p=6 "aqa": slot 809 now gives offset 3 -> compares against
     * "bae" -> literal, although "aqa" at offset 6 would have matched: the
     * one-entry table forgets. So all 75 bytes are literals, a 0 map byte
     * before every 8. (A different hash would find the match at p=6.)
     */
    assert_int_equal(vector_lzjb_hash("aqa"), 809);
    assert_int_equal(vector_lzjb_hash("bae"), 809);
    uint8_t src[75];
    memcpy(src, "aqabaeaqa", 9);
    for (int i = 0; i < 66; i++)
        src[9 + i] = (uint8_t)(0x80 + i);
    uint8_t want[75 + 10];
    size_t n = 0;
    for (int i = 0; i < 75; i++) {
        if (i % 8 == 0)
            want[n++] = 0x00;
        want[n++] = src[i];
    }
    assert_int_equal(n, sizeof(want));
    expect_lzjb(src, sizeof(src), want, sizeof(want));
}

static void test_lzjb_vector_literals_only(void **state)
{
    (void)state;
    /* Shorter than 66 bytes: all literals, a map byte before every 8. */
    static const uint8_t hello_want[] = {0x00, 'h', 'e', 'l', 'l', 'o'};
    expect_lzjb((const uint8_t *)"hello", 5, hello_want, sizeof(hello_want));
    static const uint8_t nine_want[] = {0x00, '1', '2', '3', '4', '5', '6', '7', '8', 0x00, '9'};
    expect_lzjb((const uint8_t *)"123456789", 9, nine_want, sizeof(nine_want));
}

/* Our output does not depend on where the caller's buffer sits. */
static void test_lzjb_output_independent_of_alignment(void **state)
{
    (void)state;
    size_t len = 8192;
    uint8_t *buf = malloc(len + 64), *a = malloc(2 * len), *b = malloc(2 * len);
    fill_kind(DATA_MIXED, 11, buf, len);
    size_t ca = cairn_compress(CAIRN_COMPRESS_LZJB, buf, len, a, 2 * len);
    for (size_t shift = 1; shift < 64; shift += 7) {
        fill_kind(DATA_MIXED, 11, buf + shift, len);
        size_t cb = cairn_compress(CAIRN_COMPRESS_LZJB, buf + shift, len, b, 2 * len);
        assert_int_equal(ca, cb);
        assert_memory_equal(a, b, ca);
    }
    free(buf);
    free(a);
    free(b);
}

/* Streams built by hand from the format definition, decoded. */
static void test_lzjb_decode_hand_built(void **state)
{
    (void)state;
    uint8_t out[2048];

    /* Literal 'a', then match len 4 at offset 1 (overlapping): "aaaaa". */
    static const uint8_t s1[] = {0x02, 'a', (1 << 2) | 0, 0x01};
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, s1, sizeof(s1), out, 5), 0);
    assert_memory_equal(out, "aaaaa", 5);

    /* "xy", match len 3 offset 2 -> "xyxyx", literal 'z', match len 66 off 6. */
    static const uint8_t s2[] = {0x14, 'x', 'y', 0x00, 0x02, 'z', 0xfc, 0x06};
    char want2[72];
    memcpy(want2, "xyxyxz", 6);
    for (int i = 6; i < 72; i++)
        want2[i] = want2[i - 6];
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, s2, sizeof(s2), out, 72), 0);
    assert_memory_equal(out, want2, 72);

    /* 1023 literals, then a match at the largest offset (0x3ff, high bits in byte 0). */
    uint8_t s3[1200];
    size_t n = 0, produced = 0;
    uint8_t want3[1023 + 5];
    for (int i = 0; i < 1023; i++) {
        if (i % 8 == 0)
            s3[n++] = 0x00;
        s3[n++] = (uint8_t)(i * 7 + 1);
        want3[produced++] = (uint8_t)(i * 7 + 1);
    }
    /* Item 1023 is item 7 of its group (1023 % 8 == 7): set that map bit. */
    s3[n - 8] |= 0x80;
    s3[n++] = (uint8_t)((5 - 3) << 2 | 0x03);
    s3[n++] = 0xff;
    memcpy(want3 + produced, want3, 5);
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, s3, n, out, sizeof(want3)), 0);
    assert_memory_equal(out, want3, sizeof(want3));

    /* Offset 0 (never emitted), reaching before the start, overrunning dst: corrupt. */
    static const uint8_t bad_zero[] = {0x02, 'a', 0x00, 0x00};
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, bad_zero, 4, out, 4), -EIO);
    static const uint8_t bad_far[] = {0x02, 'a', 0x00, 0x02};
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, bad_far, 4, out, 4), -EIO);
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, s1, sizeof(s1), out, 4), -EIO);
    /* A trailing byte after the output is complete. */
    static const uint8_t trailing[] = {0x00, 'a', 'b'};
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, trailing, 3, out, 1), -EIO);
    /* A match cut off after its first byte. */
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_LZJB, s1, 3, out, 5), -EIO);
}

/* ---- ZLE known vectors -------------------------------------------------- */

static void expect_zle(const uint8_t *src, size_t len, const uint8_t *want, size_t want_len)
{
    uint8_t out[512];
    size_t c = cairn_compress(CAIRN_COMPRESS_ZLE, src, len, out, sizeof(out));
    assert_int_equal(c, want_len);
    assert_memory_equal(out, want, want_len);
    uint8_t back[512];
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_ZLE, out, c, back, len), 0);
    assert_memory_equal(back, src, len);
}

static void test_zle_vectors(void **state)
{
    (void)state;
    /* 300 zeros: a full run of 192 (header 255) and one of 108 (64+107). */
    uint8_t zeros[300] = {0};
    static const uint8_t w1[] = {0xff, 0xab};
    expect_zle(zeros, sizeof(zeros), w1, sizeof(w1));

    /* A lone zero stays in the literal; a zero pair ends it. */
    static const uint8_t s2[] = {'a', 'b', 0, 'c', 'd', 0, 0, 'e', 'f'};
    static const uint8_t w2[] = {0x04, 'a', 'b', 0, 'c', 'd', 0x41, 0x01, 'e', 'f'};
    expect_zle(s2, sizeof(s2), w2, sizeof(w2));

    /* 70 non-zero bytes: literal runs of 64 (header 63) and 6 (header 5). */
    uint8_t s3[70];
    uint8_t w3[72];
    memset(s3, 'q', sizeof(s3));
    w3[0] = 0x3f;
    memset(w3 + 1, 'q', 64);
    w3[65] = 0x05;
    memset(w3 + 66, 'q', 6);
    expect_zle(s3, sizeof(s3), w3, sizeof(w3));

    /* A zero falling on the 64th literal slot is left to a zero run. */
    uint8_t s4[65];
    uint8_t w4[67];
    memset(s4, 'r', 63);
    s4[63] = 0;
    s4[64] = 'z';
    w4[0] = 0x3e;
    memset(w4 + 1, 'r', 63);
    w4[64] = 0x40;
    w4[65] = 0x00;
    w4[66] = 'z';
    expect_zle(s4, sizeof(s4), w4, sizeof(w4));

    /* Hand-built stream decoding, and strictness. */
    uint8_t out[16];
    static const uint8_t h1[] = {0x42, 0x01, 'h', 'i', 0x40};
    static const uint8_t want[] = {0, 0, 0, 'h', 'i', 0};
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_ZLE, h1, sizeof(h1), out, 6), 0);
    assert_memory_equal(out, want, 6);
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_ZLE, h1, sizeof(h1), out, 5), -EIO);
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_ZLE, h1, sizeof(h1), out, 7), -EIO);
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_ZLE, h1, 3, out, 4), -EIO); /* cut literal */
}

/* ---- corrupt streams ---------------------------------------------------- */

static void test_corrupt_streams_are_safe(void **state)
{
    (void)state;
    size_t len = 16 * 1024;
    uint8_t *src = malloc(len), *comp = malloc(2 * len), *bad = malloc(2 * len);
    cairn_rng_t r;
    cairn_rng_seed(&r, 99);

    for (unsigned a = 1; a < CAIRN_COMPRESS_COUNT; a++) {
        cairn_compress_t alg = (cairn_compress_t)a;
        for (unsigned k = DATA_TEXT; k <= DATA_MIXED; k++) {
            fill_kind((enum data_kind)k, 1234 + a, src, len);
            size_t c = cairn_compress(alg, src, len, comp, 2 * len);
            assert_true(c > 1);

            /* Truncation always fails: the stream must end where the data does. */
            for (size_t cut = 0; cut < c; cut += 1 + c / 97) {
                if (decompress_exact(alg, comp, cut, NULL, len) != -EIO)
                    fail_msg("%s: stream cut to %zu of %zu bytes decoded", cairn_compress_name(alg),
                             cut, c);
            }
            assert_int_equal(decompress_exact(alg, comp, c - 1, NULL, len), -EIO);

            /* Flipped bytes: may decode (to wrong data) but only inside bounds. */
            for (int t = 0; t < 300; t++) {
                memcpy(bad, comp, c);
                int flips = 1 + (int)cairn_rng_below(&r, 4);
                for (int f = 0; f < flips; f++)
                    bad[cairn_rng_below(&r, c)] ^= (uint8_t)(1 + cairn_rng_below(&r, 255));
                int rc = decompress_exact(alg, bad, c, NULL, len);
                assert_true(rc == 0 || rc == -EIO);
            }
        }
        /* Pure garbage of assorted lengths. */
        for (int t = 0; t < 200; t++) {
            size_t glen = 1 + cairn_rng_below(&r, 4096);
            fill_random(&r, bad, glen);
            int rc = decompress_exact(alg, bad, glen, NULL, 1 + cairn_rng_below(&r, 2 * len));
            assert_true(rc == 0 || rc == -EIO);
        }
    }
    /* The zlib container's checksum turns a flipped payload byte into -EIO. */
    fill_kind(DATA_TEXT, 3, src, len);
    size_t c = cairn_compress(CAIRN_COMPRESS_GZIP(6), src, len, comp, 2 * len);
    comp[c - 1] ^= 0x01;
    assert_int_equal(decompress_exact(CAIRN_COMPRESS_GZIP(6), comp, c, NULL, len), -EIO);
    /* Unknown algorithm values are refused. */
    assert_int_equal(cairn_decompress(CAIRN_COMPRESS_COUNT, comp, c, src, len), -EIO);
    assert_int_equal(cairn_compress(CAIRN_COMPRESS_COUNT, src, len, comp, 2 * len), 0);
    free(src);
    free(comp);
    free(bad);
}

/* ---- threads: per-thread zlib state ------------------------------------- */

static void *gzip_worker(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    size_t len = 64 * 1024;
    uint8_t *src = malloc(len), *comp = malloc(2 * len), *back = malloc(len);
    bool ok = true;
    for (int i = 0; i < 20 && ok; i++) {
        fill_kind(DATA_MIXED, seed * 100 + i, src, len);
        cairn_compress_t alg = CAIRN_COMPRESS_GZIP(1 + (i + (int)seed) % 9);
        size_t c = cairn_compress(alg, src, len, comp, 2 * len);
        ok = c > 0 && cairn_decompress(alg, comp, c, back, len) == 0 &&
             memcmp(src, back, len) == 0;
    }
    free(src);
    free(comp);
    free(back);
    return ok ? arg : NULL;
}

static void test_gzip_from_many_threads(void **state)
{
    (void)state;
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, gzip_worker, (void *)(i + 1)), 0);
    for (uintptr_t i = 0; i < 4; i++) {
        void *ret;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_ptr_equal(ret, (void *)(i + 1));
    }
}

/* gzip-N is zlib's compress2 at level N, byte for byte. */
static void test_gzip_matches_compress2(void **state)
{
    (void)state;
    size_t len = 32 * 1024;
    uint8_t *src = malloc(len), *ours = malloc(2 * len), *ref = malloc(2 * len);
    fill_kind(DATA_MIXED, 8, src, len);
    for (int level = 1; level <= 9; level++) {
        size_t c = cairn_compress(CAIRN_COMPRESS_GZIP(level), src, len, ours, 2 * len);
        unsigned long rlen = 2 * len;
        assert_int_equal(compress2(ref, &rlen, src, len, level), Z_OK);
        assert_int_equal(c, rlen);
        assert_memory_equal(ours, ref, c);
    }
    free(src);
    free(ours);
    free(ref);
}

/* ---- names -------------------------------------------------------------- */

static void test_compress_names(void **state)
{
    (void)state;
    cairn_compress_t alg;
    for (unsigned a = 0; a < CAIRN_COMPRESS_COUNT; a++) {
        const char *name = cairn_compress_name((cairn_compress_t)a);
        assert_non_null(name);
        assert_int_equal(cairn_compress_from_name(name, &alg), 0);
        assert_int_equal(alg, a);
    }
    assert_string_equal(cairn_compress_name(CAIRN_COMPRESS_OFF), "off");
    assert_string_equal(cairn_compress_name(CAIRN_COMPRESS_LZJB), "lzjb");
    assert_string_equal(cairn_compress_name(CAIRN_COMPRESS_LZ4), "lz4");
    assert_string_equal(cairn_compress_name(CAIRN_COMPRESS_ZLE), "zle");
    for (int level = 1; level <= 9; level++) {
        char want[16];
        snprintf(want, sizeof(want), "gzip-%d", level);
        assert_string_equal(cairn_compress_name(CAIRN_COMPRESS_GZIP(level)), want);
    }
    assert_null(cairn_compress_name(CAIRN_COMPRESS_COUNT));
    assert_null(cairn_compress_name((cairn_compress_t)-1));

    assert_int_equal(cairn_compress_from_name("gzip", &alg), 0);
    assert_int_equal(alg, CAIRN_COMPRESS_GZIP(6));
    assert_int_equal(cairn_compress_from_name("on", &alg), 0);
    assert_int_equal(alg, CAIRN_COMPRESS_LZ4);

    static const char *const junk[] = {"", "gzip-0", "gzip-10", "gzip-", "LZ4", "lz4 ",
                                       "lzjb2", "none", "of", "gzip6", "zstd"};
    for (unsigned i = 0; i < CAIRN_ARRAY_SIZE(junk); i++) {
        alg = CAIRN_COMPRESS_ZLE;
        assert_int_equal(cairn_compress_from_name(junk[i], &alg), -EINVAL);
        assert_int_equal(alg, CAIRN_COMPRESS_ZLE); /* untouched on failure */
    }
    assert_int_equal(cairn_compress_from_name(NULL, &alg), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_algorithms),
        cmocka_unit_test(test_lz4_blocks_are_independent),
        cmocka_unit_test(test_empty_and_one_byte),
        cmocka_unit_test(test_incompressible_does_not_fit),
        cmocka_unit_test(test_dst_cap_is_exact),
        cmocka_unit_test(test_lzjb_vector_abc_repeated),
        cmocka_unit_test(test_lzjb_vector_byte_run),
        cmocka_unit_test(test_lzjb_vector_zero_run_table_not_updated_inside_matches),
        cmocka_unit_test(test_lzjb_vector_match_ending_the_stream),
        cmocka_unit_test(test_lzjb_vector_hash_collision_hides_match),
        cmocka_unit_test(test_lzjb_vector_literals_only),
        cmocka_unit_test(test_lzjb_output_independent_of_alignment),
        cmocka_unit_test(test_lzjb_decode_hand_built),
        cmocka_unit_test(test_zle_vectors),
        cmocka_unit_test(test_corrupt_streams_are_safe),
        cmocka_unit_test(test_gzip_from_many_threads),
        cmocka_unit_test(test_gzip_matches_compress2),
        cmocka_unit_test(test_compress_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
