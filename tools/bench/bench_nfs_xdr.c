/*
 * bench_nfs_xdr: the two data-carrying NFSv3 messages coded with libnfs's ZDR
 * codecs and with Cairn's own XDR cursor (src/nfs/nfs_xdr.c), CPU per GiB.
 *
 *   bench_nfs_xdr [GIB]      (default 4)
 *
 * READ reply, 1 MiB of data: libnfs encodes a READ3res whose data the server
 * has read into a buffer of its own (zdr_READ3res copies it into the message);
 * Cairn reserves the data's room in the reply and the ZPL reads into it, so
 * coding is the header fields plus the reply buffer's allocation.
 * WRITE call, 1 MiB of data: libnfs decodes WRITE3args (zdr_WRITE3args, which
 * in Debian's libnfs 4.0 allocates and copies the data); Cairn points at the
 * data in the received record.
 * Both sides allocate per message what they allocate per call in a server.
 * The ZPL's read or write of the data itself is the same either way and is
 * not measured. Never a test.
 */
#include "../../src/nfs/nfs_impl.h"

#include <nfsc/libnfs-zdr.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DATA (1u << 20)

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile uint32_t sink;

static void libnfs_read_reply(uint8_t *data, size_t n)
{
    uint8_t *out = malloc(DATA + 4096);
    ZDR z;
    zdrmem_create(&z, (caddr_t)out, DATA + 4096, ZDR_ENCODE);
    READ3res res;
    memset(&res, 0, sizeof res);
    res.status = NFS3_OK;
    res.READ3res_u.resok.file_attributes.attributes_follow = 1;
    res.READ3res_u.resok.file_attributes.post_op_attr_u.attributes.size = 1ull << 40;
    res.READ3res_u.resok.count = (uint32_t)n;
    res.READ3res_u.resok.data.data_len = (u_int)n;
    res.READ3res_u.resok.data.data_val = (char *)data;
    if (!zdr_READ3res(&z, &res)) abort();
    sink += out[zdr_getpos(&z) - 1];
    zdr_destroy(&z);
    free(out);
}

static void cairn_read_reply(size_t n)
{
    nfs_xdr_t r;
    nfs_xdr_init_encode(&r, 512); /* as nfs_rpc_execute() does per call */
    nfs_xdr_put_u32(&r, 0);
    uint8_t *attrs = nfs_xdr_reserve(&r, 4 + 84 + 4 + 4 + 4);
    uint8_t *room = nfs_xdr_reserve(&r, n); /* the ZPL reads into this */
    if (!attrs || !room) abort();
    memset(attrs, 0, 100);
    room[n - 1] = 1;
    sink += room[n - 1];
    nfs_xdr_free(&r);
}

static size_t write_call(uint8_t *rec, const uint8_t *data)
{
    nfs_xdr_t w;
    nfs_xdr_init_encode(&w, DATA + 4096);
    uint8_t fh[32] = {1};
    nfs_xdr_put_opaque(&w, fh, sizeof fh);
    nfs_xdr_put_u64(&w, 0);
    nfs_xdr_put_u32(&w, DATA);
    nfs_xdr_put_u32(&w, 0);
    nfs_xdr_put_opaque(&w, data, DATA);
    size_t len = w.len;
    memcpy(rec, w.buf, len);
    nfs_xdr_free(&w);
    return len;
}

static void libnfs_write_args(uint8_t *rec, size_t len)
{
    ZDR z;
    zdrmem_create(&z, (caddr_t)rec, (uint32_t)len, ZDR_DECODE);
    WRITE3args a;
    memset(&a, 0, sizeof a);
    if (!zdr_WRITE3args(&z, &a)) abort();
    sink += (uint8_t)a.data.data_val[a.data.data_len - 1];
    zdr_destroy(&z);
}

static void cairn_write_args(const uint8_t *rec, size_t len)
{
    nfs_xdr_t x;
    nfs_xdr_init_decode(&x, rec, len);
    uint32_t fhlen, n;
    nfs_xdr_get_opaque(&x, &fhlen, 64);
    nfs_xdr_get_u64(&x);
    nfs_xdr_get_u32(&x);
    nfs_xdr_get_u32(&x);
    const uint8_t *d = nfs_xdr_get_opaque(&x, &n, DATA);
    if (x.err || !d) abort();
    sink += d[n - 1];
}

int main(int argc, char **argv)
{
    unsigned gib = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
    size_t iters = (size_t)gib << 10;
    uint8_t *data = malloc(DATA), *rec = malloc(DATA + 4096);
    for (size_t i = 0; i < DATA; i++) data[i] = (uint8_t)(i * 131 + (i >> 9));
    size_t len = write_call(rec, data);
    printf("| message (1 MiB of data) | libnfs ZDR CPU-s/GiB | Cairn XDR CPU-s/GiB |\n|---|---:|---:|\n");
    double t0 = cpu_now();
    for (size_t i = 0; i < iters; i++) libnfs_read_reply(data, DATA);
    double t1 = cpu_now();
    for (size_t i = 0; i < iters; i++) cairn_read_reply(DATA);
    double t2 = cpu_now();
    printf("| READ reply (encode) | %.3f | %.3f |\n", (t1 - t0) / gib, (t2 - t1) / gib);
    t0 = cpu_now();
    for (size_t i = 0; i < iters; i++) libnfs_write_args(rec, len);
    t1 = cpu_now();
    for (size_t i = 0; i < iters; i++) cairn_write_args(rec, len);
    t2 = cpu_now();
    printf("| WRITE call (decode) | %.3f | %.3f |\n", (t1 - t0) / gib, (t2 - t1) / gib);
    free(data);
    free(rec);
    return sink == 0xdeadbeef;
}
