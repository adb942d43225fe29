/*
 * One phase of the NFS small-file benchmark at a time, so a profiler can be
 * attached to the server for just that phase (tools/bench/nfs-meta-profile.sh):
 *
 *   nfs_meta_phase URL create N    mkdir /d, then N x nfs_create + nfs_close of /d/fNNNNNNN
 *   nfs_meta_phase URL remove N    N x nfs_unlink of the same names
 *
 * The calls are those of nfs-meta-bench's create and unlink phases (one call in
 * flight); prints "PHASE RATE/s". Built by the script with gcc -lnfs (libnfs-dev),
 * not by CMake: nothing else needs libnfs. A benchmark aid, never a test.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/time.h>
#include <nfsc/libnfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "create") && strcmp(argv[2], "remove")) || atol(argv[3]) <= 0) {
        fprintf(stderr, "usage: nfs_meta_phase URL create|remove N\n");
        return 2;
    }
    struct nfs_context *nfs = nfs_init_context();
    struct nfs_url *url = nfs ? nfs_parse_url_dir(nfs, argv[1]) : NULL;
    if (!url || nfs_mount(nfs, url->server, url->path) != 0) {
        fprintf(stderr, "nfs_meta_phase: mount %s: %s\n", argv[1], nfs ? nfs_get_error(nfs) : "no memory");
        return 1;
    }
    bool create = !strcmp(argv[2], "create");
    long n = atol(argv[3]);
    char path[64];
    if (create && nfs_mkdir(nfs, "/d") != 0) {
        fprintf(stderr, "nfs_meta_phase: mkdir /d: %s\n", nfs_get_error(nfs));
        return 1;
    }
    double t0 = now();
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/d/f%07ld", i);
        struct nfsfh *fh;
        int rc = create ? nfs_create(nfs, path, O_WRONLY, 0644, &fh) : nfs_unlink(nfs, path);
        if (rc == 0 && create) rc = nfs_close(nfs, fh);
        if (rc != 0) {
            fprintf(stderr, "nfs_meta_phase: %s %s: %s\n", argv[2], path, nfs_get_error(nfs));
            return 1;
        }
    }
    double t = now() - t0;
    printf("%s %.0f/s\n", argv[2], (double)n / t);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    return 0;
}
