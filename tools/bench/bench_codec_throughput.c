/*
 * Codec throughput, one core: MB/s for every compression algorithm (both
 * directions) and every checksum, over 128 KiB blocks of semi-compressible,
 * text-like data (the block size and data a file system mostly sees). lz4 is
 * also measured calling liblz4 directly, side by side, so the cost of our
 * dispatch layer is visible; likewise both fletcher4 implementations.
 *
 * Usage: bench_codec_throughput [MiB of data per measurement, default 32]
 * Not a test: timings are printed, never judged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <xxhash.h>

#include <cairn/codec.h>
#include <cairn/util.h>

#include "../../src/codec/codec_impl.h"

#define BLOCK (128 * 1024)

/* Text from a vocabulary, with a sprinkling of random bytes and zero runs:
 * lz4 gets roughly 2:1 on it, like ordinary files. */
static void fill_semi_compressible(uint8_t *buf, size_t len, uint64_t seed)
{
    static const char *const words[] = {
        "the ",     "storage ", "pool ",   "writes ",   "every ",    "block ",   "once ",
        "and ",     "never ",   "over ",   "itself, ",  "so ",       "a ",       "crash ",
        "leaves ",  "either ",  "old ",    "or ",       "new ",      "state.\n", "checksum ",
        "mirror ",  "scrub ",   "repair ", "snapshot ", "clone ",    "dataset ", "txg "};
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    size_t i = 0;
    while (i < len) {
        uint64_t pick = cairn_rng_below(&r, 100);
        if (pick < 8) { /* random bytes */
            size_t n = 1 + cairn_rng_below(&r, 24);
            for (size_t k = 0; k < n && i < len; k++)
                buf[i++] = (uint8_t)cairn_rng_next(&r);
        } else if (pick < 10) { /* a short zero run */
            size_t n = 1 + cairn_rng_below(&r, 64);
            for (size_t k = 0; k < n && i < len; k++)
                buf[i++] = 0;
        } else {
            const char *w = words[cairn_rng_below(&r, CAIRN_ARRAY_SIZE(words))];
            for (size_t k = 0; w[k] && i < len; k++)
                buf[i++] = (uint8_t)w[k];
        }
    }
}

static double mbps(size_t bytes, uint64_t ns)
{
    return ns ? (double)bytes / (1024.0 * 1024.0) / ((double)ns / 1e9) : 0.0;
}

typedef struct bench_data {
    uint8_t *src;   /* nblocks * BLOCK */
    uint8_t *comp;  /* nblocks * cap */
    size_t *clen;
    uint8_t *out;   /* one block */
    size_t nblocks;
    size_t cap;
} bench_data_t;

static void bench_compress(bench_data_t *d, cairn_compress_t alg)
{
    size_t total_in = d->nblocks * BLOCK, total_out = 0, stored = 0;
    uint64_t t0 = cairn_now_ns();
    for (size_t b = 0; b < d->nblocks; b++) {
        d->clen[b] = cairn_compress(alg, d->src + b * BLOCK, BLOCK, d->comp + b * d->cap, d->cap);
        total_out += d->clen[b] ? d->clen[b] : BLOCK;
    }
    uint64_t t1 = cairn_now_ns();
    for (size_t b = 0; b < d->nblocks; b++) {
        if (d->clen[b] == 0) {
            stored++;
            continue;
        }
        if (cairn_decompress(alg, d->comp + b * d->cap, d->clen[b], d->out, BLOCK) != 0 ||
            memcmp(d->out, d->src + b * BLOCK, BLOCK) != 0) {
            fprintf(stderr, "%s: round trip failed\n", cairn_compress_name(alg));
            exit(1);
        }
    }
    uint64_t t2 = cairn_now_ns();
    /* The decode timing includes one memcmp per block, as a reader would verify. */
    printf("%-14s %8.2f %12.1f %12.1f %8zu\n", cairn_compress_name(alg),
           (double)total_in / (double)total_out, mbps(total_in, t1 - t0),
           mbps((d->nblocks - stored) * BLOCK, t2 - t1), stored);
}

static void bench_raw_lz4(bench_data_t *d)
{
    size_t total_in = d->nblocks * BLOCK, total_out = 0;
    uint64_t t0 = cairn_now_ns();
    for (size_t b = 0; b < d->nblocks; b++) {
        int n = LZ4_compress_default((const char *)d->src + b * BLOCK,
                                     (char *)d->comp + b * d->cap, BLOCK, (int)d->cap);
        d->clen[b] = n > 0 ? (size_t)n : 0;
        total_out += d->clen[b];
    }
    uint64_t t1 = cairn_now_ns();
    for (size_t b = 0; b < d->nblocks; b++) {
        if (LZ4_decompress_safe((const char *)d->comp + b * d->cap, (char *)d->out,
                                (int)d->clen[b], BLOCK) != BLOCK ||
            memcmp(d->out, d->src + b * BLOCK, BLOCK) != 0) {
            fprintf(stderr, "raw lz4: round trip failed\n");
            exit(1);
        }
    }
    uint64_t t2 = cairn_now_ns();
    printf("%-14s %8.2f %12.1f %12.1f %8s\n", "lz4 (liblz4)", (double)total_in / (double)total_out,
           mbps(total_in, t1 - t0), mbps(total_in, t2 - t1), "-");
}

typedef void (*checksum_fn)(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN]);

static void fletcher4_scalar_32(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    cairn_fletcher4_t s;
    cairn_fletcher4_scalar(buf, len, &s);
    memcpy(out, &s, sizeof(s));
}

static void fletcher4_avx2_32(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    cairn_fletcher4_t s;
    cairn_fletcher4_avx2(buf, len, &s);
    memcpy(out, &s, sizeof(s));
}

static void xxh3_raw_32(const void *buf, size_t len, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    XXH128_hash_t h = XXH3_128bits(buf, len);
    memcpy(out, &h, sizeof(h));
}

static void bench_checksum_fn(const bench_data_t *d, const char *name, checksum_fn fn,
                              cairn_checksum_t alg)
{
    uint8_t out[CAIRN_CHECKSUM_LEN];
    uint64_t sink = 0;
    uint64_t t0 = cairn_now_ns();
    for (size_t b = 0; b < d->nblocks; b++) {
        if (fn)
            fn(d->src + b * BLOCK, BLOCK, out);
        else
            cairn_checksum(alg, d->src + b * BLOCK, BLOCK, out);
        sink += out[0];
    }
    uint64_t t1 = cairn_now_ns();
    printf("%-22s %12.1f   (%llu)\n", name, mbps(d->nblocks * BLOCK, t1 - t0),
           (unsigned long long)(sink & 0xf));
}

int main(int argc, char **argv)
{
    size_t mib = 32;
    if (argc > 1) {
        char *end;
        long v = strtol(argv[1], &end, 10);
        if (*end != '\0' || v < 1 || v > 4096) {
            fprintf(stderr, "usage: %s [MiB per measurement, 1..4096, default 32]\n", argv[0]);
            return 2;
        }
        mib = (size_t)v;
    }
    bench_data_t d = {0};
    d.nblocks = mib * 1024 * 1024 / BLOCK;
    d.cap = BLOCK + BLOCK / 8 + 1024;
    d.src = cairn_alloc_aligned(d.nblocks * BLOCK);
    d.comp = cairn_alloc_aligned(d.nblocks * d.cap);
    d.clen = cairn_zalloc(d.nblocks * sizeof(size_t));
    d.out = cairn_alloc_aligned(BLOCK);
    for (size_t b = 0; b < d.nblocks; b++)
        fill_semi_compressible(d.src + b * BLOCK, BLOCK, b + 1);

    printf("codec throughput, one core, %zu x 128 KiB blocks (%zu MiB), semi-compressible "
           "text\n\n",
           d.nblocks, mib);
    printf("%-14s %8s %12s %12s %8s\n", "compression", "ratio", "comp MB/s", "decomp MB/s",
           "stored");
    for (unsigned a = 1; a < CAIRN_COMPRESS_COUNT; a++) {
        bench_compress(&d, (cairn_compress_t)a);
        if (a == CAIRN_COMPRESS_LZ4)
            bench_raw_lz4(&d);
    }
    printf("(ratio counts a block that did not compress at full size; 'stored' counts those)\n\n");

    printf("%-22s %12s\n", "checksum", "MB/s");
    bench_checksum_fn(&d, "fletcher4", NULL, CAIRN_CHECKSUM_FLETCHER4);
    bench_checksum_fn(&d, "  fletcher4 scalar", fletcher4_scalar_32, 0);
    if (cairn_fletcher4_avx2_usable())
        bench_checksum_fn(&d, "  fletcher4 avx2", fletcher4_avx2_32, 0);
    bench_checksum_fn(&d, "xxhash", NULL, CAIRN_CHECKSUM_XXHASH);
    bench_checksum_fn(&d, "  XXH3_128bits raw", xxh3_raw_32, 0);
    bench_checksum_fn(&d, "sha256", NULL, CAIRN_CHECKSUM_SHA256);

    free(d.src);
    free(d.comp);
    free(d.clen);
    free(d.out);
    return 0;
}
