/*
 * gzip-1..9: deflate through zlib, in the zlib container (2-byte header,
 * Adler-32 trailer), exactly what zlib's compress2() produces at that level
 * and what ZFS stores for its gzip-N. The container's few bytes of overhead
 * buy an end-to-end check inside the stream, which turns most corruption into
 * a clean -EIO even before the block checksum is looked at.
 *
 * Why not simply compress2()/uncompress(): each call allocates and zeroes a
 * fresh deflate state (about 256 KiB) or inflate state and frees it again,
 * which costs more than compressing a small block. Instead every thread keeps
 * its streams (one per level it has used, plus one inflater) and resets them
 * between blocks; pthread key destructors free them when the thread exits.
 * The output bytes are the same as compress2()'s: same parameters, one
 * Z_FINISH.
 *
 * Decompression is strict: the zlib stream must end (checksum verified)
 * exactly at the end of src and produce exactly dst_len bytes.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <zlib.h>

#include <cairn/util.h>

#include "codec_impl.h"

typedef struct gzip_thread_state {
    bool deflate_ready[9];
    bool inflate_ready;
    z_stream deflaters[9];
    z_stream inflater;
} gzip_thread_state_t;

static pthread_key_t gzip_key;
static pthread_once_t gzip_key_once = PTHREAD_ONCE_INIT;

static void gzip_state_free(void *arg)
{
    gzip_thread_state_t *st = arg;
    for (int i = 0; i < 9; i++)
        if (st->deflate_ready[i])
            deflateEnd(&st->deflaters[i]);
    if (st->inflate_ready)
        inflateEnd(&st->inflater);
    free(st);
}

static void gzip_key_create(void)
{
    if (pthread_key_create(&gzip_key, gzip_state_free) != 0)
        abort();
}

static gzip_thread_state_t *gzip_state(void)
{
    pthread_once(&gzip_key_once, gzip_key_create);
    gzip_thread_state_t *st = pthread_getspecific(gzip_key);
    if (st == NULL) {
        st = cairn_zalloc(sizeof(*st));
        pthread_setspecific(gzip_key, st);
    }
    return st;
}

size_t cairn_gzip_compress(int level, const uint8_t *src, size_t src_len, uint8_t *dst,
                           size_t dst_cap)
{
    if (level < 1 || level > 9 || src_len > UINT_MAX)
        return 0;
    gzip_thread_state_t *st = gzip_state();
    z_stream *zs = &st->deflaters[level - 1];
    if (!st->deflate_ready[level - 1]) {
        if (deflateInit(zs, level) != Z_OK)
            return 0; /* out of memory: store the block uncompressed */
        st->deflate_ready[level - 1] = true;
    } else if (deflateReset(zs) != Z_OK) {
        return 0;
    }
    zs->next_in = (Bytef *)src;
    zs->avail_in = (uInt)src_len;
    zs->next_out = dst;
    zs->avail_out = (uInt)CAIRN_MIN(dst_cap, (size_t)UINT_MAX);
    if (deflate(zs, Z_FINISH) != Z_STREAM_END)
        return 0; /* ran out of room */
    return (size_t)zs->total_out;
}

int cairn_gzip_decompress(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
    if (src_len > UINT_MAX || dst_len > UINT_MAX)
        return -EIO;
    gzip_thread_state_t *st = gzip_state();
    z_stream *zs = &st->inflater;
    if (!st->inflate_ready) {
        zs->next_in = Z_NULL;
        zs->avail_in = 0;
        if (inflateInit(zs) != Z_OK)
            return -EIO;
        st->inflate_ready = true;
    } else if (inflateReset(zs) != Z_OK) {
        return -EIO;
    }
    zs->next_in = (Bytef *)src;
    zs->avail_in = (uInt)src_len;
    zs->next_out = dst;
    zs->avail_out = (uInt)dst_len;
    int ret = inflate(zs, Z_FINISH);
    if (ret != Z_STREAM_END || zs->avail_in != 0 || zs->total_out != dst_len)
        return -EIO;
    return 0;
}
