/*
 * bench_nfs_stream: writes a local file to an NFS URL with libnfs's async API,
 * CHUNK bytes per WRITE and DEPTH WRITEs in flight, then COMMIT and CLOSE.
 *
 *   bench_nfs_stream SRCFILE nfs://HOST/PATH/FILE?version=4&nfsport=N CHUNK DEPTH
 *
 * Why it exists: Debian 12's libnfs 4.0 cannot encode an NFSv4 WRITE of more
 * than ~3.9 KB, so nfs-cp cannot write over NFSv4 at all; this program lets the
 * NFSv4 write rows use many small WRITEs in flight instead (the NFSv3 rows use
 * nfs-cp). Prints "bytes=N seconds=S" and exits 0, or 1 on any error. Never a test.
 */
#include <nfsc/libnfs.h>

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct stream {
    const uint8_t *src;
    uint64_t size, next, done;
    uint64_t chunk;
    unsigned inflight;
    bool failed;
} stream_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void wrote(int err, struct nfs_context *nfs, void *data, void *priv)
{
    (void)nfs;
    stream_t *s = priv;
    s->inflight--;
    if (err < 0) {
        fprintf(stderr, "bench_nfs_stream: write: %s\n", (const char *)data);
        s->failed = true;
        return;
    }
    s->done += (uint64_t)err;
}

static bool issue(struct nfs_context *nfs, struct nfsfh *fh, stream_t *s)
{
    uint64_t n = s->size - s->next < s->chunk ? s->size - s->next : s->chunk;
    if (nfs_pwrite_async(nfs, fh, s->next, n, s->src + s->next, wrote, s) != 0) {
        fprintf(stderr, "bench_nfs_stream: queue write: %s\n", nfs_get_error(nfs));
        return false;
    }
    s->next += n;
    s->inflight++;
    return true;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s SRCFILE NFS_URL CHUNK DEPTH\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
        perror(argv[1]);
        return 1;
    }
    stream_t s = {.size = (uint64_t)st.st_size, .chunk = strtoull(argv[3], NULL, 0)};
    unsigned depth = (unsigned)strtoul(argv[4], NULL, 0);
    s.src = mmap(NULL, s.size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (s.src == MAP_FAILED || !s.chunk || !depth) {
        fprintf(stderr, "bench_nfs_stream: bad source, CHUNK or DEPTH\n");
        return 1;
    }
    struct nfs_context *nfs = nfs_init_context();
    struct nfs_url *url = nfs ? nfs_parse_url_full(nfs, argv[2]) : NULL;
    if (!url || nfs_mount(nfs, url->server, url->path) != 0) {
        fprintf(stderr, "bench_nfs_stream: %s: %s\n", argv[2], nfs ? nfs_get_error(nfs) : "no memory");
        return 1;
    }
    struct nfsfh *fh;
    if (nfs_open2(nfs, url->file, O_CREAT | O_WRONLY | O_TRUNC, 0644, &fh) != 0) {
        fprintf(stderr, "bench_nfs_stream: open %s: %s\n", url->file, nfs_get_error(nfs));
        return 1;
    }
    double t0 = now();
    while (!s.failed && (s.next < s.size || s.inflight)) {
        while (!s.failed && s.next < s.size && s.inflight < depth)
            if (!issue(nfs, fh, &s)) return 1;
        struct pollfd p = {.fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs)};
        if (poll(&p, 1, 1000) < 0) {
            perror("poll");
            return 1;
        }
        if (nfs_service(nfs, p.revents) < 0) {
            fprintf(stderr, "bench_nfs_stream: service: %s\n", nfs_get_error(nfs));
            return 1;
        }
    }
    if (s.failed || s.done != s.size || nfs_fsync(nfs, fh) != 0 || nfs_close(nfs, fh) != 0) {
        fprintf(stderr, "bench_nfs_stream: %llu of %llu bytes written: %s\n",
                (unsigned long long)s.done, (unsigned long long)s.size, nfs_get_error(nfs));
        return 1;
    }
    printf("bytes=%llu seconds=%.3f\n", (unsigned long long)s.size, now() - t0);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    munmap((void *)s.src, s.size);
    close(fd);
    return 0;
}
