/*
 * bench_nfs_stream: writes a local file to an NFS URL with libnfs's async API,
 * CHUNK bytes per WRITE and DEPTH WRITEs in flight, then COMMIT and CLOSE; or,
 * with -r, reads the whole file at the URL with DEPTH READs of CHUNK bytes in
 * flight (as a kernel client's read-ahead keeps several READs going) and
 * throws the data away.
 *
 *   bench_nfs_stream SRCFILE nfs://HOST/PATH/FILE?version=4&nfsport=N CHUNK DEPTH
 *   bench_nfs_stream -r nfs://HOST/PATH/FILE?... CHUNK DEPTH
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

/* One direction of transfer over the whole file: WRITEs of src, or (src NULL) READs. */
typedef struct stream {
    const uint8_t *src;
    const char *op; /* "read" or "write", for messages */
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

/* A READ's or a WRITE's reply: err is the byte count, or negative with data the message. */
static void completed(int err, struct nfs_context *nfs, void *data, void *priv)
{
    (void)nfs;
    stream_t *s = priv;
    s->inflight--;
    if (err < 0) {
        fprintf(stderr, "bench_nfs_stream: %s: %s\n", s->op, (const char *)data);
        s->failed = true;
        return;
    }
    s->done += (uint64_t)err;
}

static bool issue(struct nfs_context *nfs, struct nfsfh *fh, stream_t *s)
{
    uint64_t n = s->size - s->next < s->chunk ? s->size - s->next : s->chunk;
    int rc = s->src ? nfs_pwrite_async(nfs, fh, s->next, n, s->src + s->next, completed, s)
                    : nfs_pread_async(nfs, fh, s->next, n, completed, s);
    if (rc != 0) {
        fprintf(stderr, "bench_nfs_stream: queue %s: %s\n", s->op, nfs_get_error(nfs));
        return false;
    }
    s->next += n;
    s->inflight++;
    return true;
}

/* Keeps depth requests in flight until the whole file is through; false on an error
 * of the transport (a failed request sets s->failed). */
static bool pump(struct nfs_context *nfs, struct nfsfh *fh, stream_t *s, unsigned depth)
{
    while (!s->failed && (s->next < s->size || s->inflight)) {
        while (!s->failed && s->next < s->size && s->inflight < depth)
            if (!issue(nfs, fh, s)) return false;
        struct pollfd p = {.fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs)};
        if (poll(&p, 1, 1000) < 0) {
            perror("poll");
            return false;
        }
        if (nfs_service(nfs, p.revents) < 0) {
            fprintf(stderr, "bench_nfs_stream: service: %s\n", nfs_get_error(nfs));
            return false;
        }
    }
    return true;
}

/* Mounts the export of urlstr; NULL after a message. */
static struct nfs_context *mount_url(const char *urlstr, struct nfs_url **url)
{
    struct nfs_context *nfs = nfs_init_context();
    *url = nfs ? nfs_parse_url_full(nfs, urlstr) : NULL;
    if (!*url || nfs_mount(nfs, (*url)->server, (*url)->path) != 0) {
        fprintf(stderr, "bench_nfs_stream: %s: %s\n", urlstr, nfs ? nfs_get_error(nfs) : "no memory");
        return NULL;
    }
    return nfs;
}

/* -r: the whole file, DEPTH READs in flight. */
static int read_stream(const char *urlstr, uint64_t chunk, unsigned depth)
{
    struct nfs_url *url;
    struct nfs_context *nfs = mount_url(urlstr, &url);
    if (!nfs) return 1;
    struct nfsfh *fh;
    struct nfs_stat_64 st;
    if (nfs_open(nfs, url->file, O_RDONLY, &fh) != 0 || nfs_fstat64(nfs, fh, &st) != 0) {
        fprintf(stderr, "bench_nfs_stream: open %s: %s\n", url->file, nfs_get_error(nfs));
        return 1;
    }
    stream_t s = {.op = "read", .size = st.nfs_size, .chunk = chunk};
    double t0 = now();
    if (!pump(nfs, fh, &s, depth)) return 1;
    if (s.failed || s.done != s.size) {
        fprintf(stderr, "bench_nfs_stream: %llu of %llu bytes read\n", (unsigned long long)s.done,
                (unsigned long long)s.size);
        return 1;
    }
    printf("bytes=%llu seconds=%.3f\n", (unsigned long long)s.size, now() - t0);
    nfs_close(nfs, fh);
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "-r")) {
        uint64_t chunk = strtoull(argv[3], NULL, 0);
        unsigned depth = (unsigned)strtoul(argv[4], NULL, 0);
        if (!chunk || !depth) {
            fprintf(stderr, "bench_nfs_stream: bad CHUNK or DEPTH\n");
            return 1;
        }
        return read_stream(argv[2], chunk, depth);
    }
    if (argc != 5) {
        fprintf(stderr, "usage: %s SRCFILE NFS_URL CHUNK DEPTH | -r NFS_URL CHUNK DEPTH\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
        perror(argv[1]);
        return 1;
    }
    stream_t s = {.op = "write", .size = (uint64_t)st.st_size, .chunk = strtoull(argv[3], NULL, 0)};
    unsigned depth = (unsigned)strtoul(argv[4], NULL, 0);
    s.src = mmap(NULL, s.size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (s.src == MAP_FAILED || !s.chunk || !depth) {
        fprintf(stderr, "bench_nfs_stream: bad source, CHUNK or DEPTH\n");
        return 1;
    }
    struct nfs_url *url;
    struct nfs_context *nfs = mount_url(argv[2], &url);
    if (!nfs) return 1;
    struct nfsfh *fh;
    if (nfs_open2(nfs, url->file, O_CREAT | O_WRONLY | O_TRUNC, 0644, &fh) != 0) {
        fprintf(stderr, "bench_nfs_stream: open %s: %s\n", url->file, nfs_get_error(nfs));
        return 1;
    }
    double t0 = now();
    if (!pump(nfs, fh, &s, depth)) return 1;
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
