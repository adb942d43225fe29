/*
 * libFuzzer target for the NFS server's RPC and XDR decoding: each input is one
 * RPC record run through nfs_rpc_execute() against a real exported filesystem
 * (a pool on a sparse file in $TMPDIR). Inputs whose first byte is odd get a
 * valid call header and the export's root handle spliced in front of the rest,
 * so the fuzzer reaches the procedures' argument decoding quickly.
 *
 * Built only with clang (tests/CMakeLists.txt):
 *   CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCAIRN_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_nfs_rpc
 *   build-fuzz/fuzz_nfs_rpc -max_len=4096 -runs=1000000
 * The suite (tests/integration/test_fuzz_targets.sh) builds it so and runs a fixed
 * 20000 inputs; the deterministic randomized-garbage unit test (test_nfs_xdr) runs in
 * the gcc builds too.
 */
#include "../../src/nfs/nfs_srv.h"

#include <cairn/dsl.h>
#include <cairn/spa.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static nfs_server_t *g_srv;
static nfs_conn_t *g_conn;
static zpl_fh_t g_root;

static void setup(void)
{
    dsl_init();
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/cairn-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/leaf", dir);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 256ll << 20) < 0) abort();
    close(fd);
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_create_opts_t opts = {0};
    char err[256];
    spa_t *spa;
    dsl_pool_t *dp;
    if (spa_create("fuzz", &root, &opts, &spa, err, sizeof err)) abort();
    if (dsl_pool_open(spa, &dp)) abort();
    nfs_server_config_t cfg = {.workers = 1};
    if (nfs_server_start(&cfg, &g_srv, err, sizeof err)) abort();
    if (nfs_server_export(g_srv, dp, "fuzz", "/fuzz", "no_root_squash", err, sizeof err)) abort();
    nfs_export_t *e = nfs_export_find_path(g_srv, "/fuzz");
    zpl_node_t *r;
    if (zpl_root(nfs_export_fs(e), &r) || zpl_fh_encode(r, &g_root)) abort();
    zpl_node_rele(r);
    nfs_export_rele(e);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    g_conn = nfs_conn_detached(g_srv, (struct sockaddr *)&sin, sizeof sin);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_srv) setup();
    nfs_xdr_t rec;
    nfs_xdr_init_encode(&rec, 0);
    if (size >= 3 && (data[0] & 1)) {
        static const uint32_t progs[] = {100003, 100005, 100000, 100003};
        nfs_xdr_put_u32(&rec, 1);
        nfs_xdr_put_u32(&rec, 0);
        nfs_xdr_put_u32(&rec, 2);
        uint32_t prog = progs[(data[0] >> 1) & 3];
        nfs_xdr_put_u32(&rec, prog);
        nfs_xdr_put_u32(&rec, prog == 100003 ? 3 : prog == 100005 ? 3 : 2);
        nfs_xdr_put_u32(&rec, data[1] % 23);
        nfs_xdr_put_u32(&rec, NFS_AUTH_SYS);
        static const uint8_t cred[] = {0, 0, 0, 0, 0, 0, 0, 1, 'f', 0, 0, 0,
                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        nfs_xdr_put_opaque(&rec, cred, sizeof cred);
        nfs_xdr_put_u32(&rec, 0);
        nfs_xdr_put_u32(&rec, 0);
        if (data[2] & 1) nfs_xdr_put_opaque(&rec, g_root.bytes, ZPL_FH_SIZE);
        nfs_xdr_put_fixed(&rec, data + 3, (uint32_t)(size - 3) & ~3u);
    } else {
        nfs_xdr_put_fixed(&rec, data, (uint32_t)size);
        rec.len = size;
    }
    uint8_t hdr[NFS_RPC_HDR_MAX];
    size_t hlen;
    nfs_xdr_t res;
    nfs_rpc_execute(g_conn, rec.buf, rec.len, hdr, &hlen, &res);
    nfs_xdr_free(&res);
    nfs_xdr_free(&rec);
    return 0;
}
