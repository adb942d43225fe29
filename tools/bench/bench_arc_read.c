/*
 * Cached-read throughput of the ARC and the L2ARC (issue 6, "Performance").
 *
 *   bench_arc_read [DIR [SIZE_MB [REPS [L2_FILE]]]]   (defaults: /var/tmp, 256, 3)
 *
 * Prints medians of REPS runs, MB/s of logical bytes and CPU-seconds per GiB
 * (getrusage of the whole process, user + system):
 *   memcpy      - copying SIZE of 128 KiB blocks between buffers: the bound
 *   arc-raw     - arc_lookup hits of uncompressed 128 KiB blocks (one memcpy each)
 *   arc-lz4-mfu - hits of lz4-compressed blocks on the MFU (decompressed copies kept)
 *   arc-lz4-mru - hits of lz4-compressed blocks read once (decompressed on every hit)
 *   l2arc       - lookups that miss memory and are served from a cache file in DIR
 *                 (pread + checksum verify + decompress-free copy), ARC 16 MiB
 * The L2ARC reads its device with buffered pread, so the feed's writes leave
 * the cache file in the page cache: measured that way, the l2arc pass would
 * time memory copies, not the device. Before each timed pass the file's pages
 * are written back and dropped (posix_fadvise DONTNEED), and the share still
 * resident is printed (mincore): near 0% or the figure means nothing (tmpfs,
 * for one, cannot drop them). With L2_FILE the cache file is that path and is
 * kept, so tools/bench/arc-read.sh can measure the same file's own read rate
 * with fio --direct=1.
 */
#include <cairn/arc.h>
#include <cairn/codec.h>
#include <cairn/util.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLK (128 * 1024)

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

typedef struct blk {
    cairn_blkptr_t bp;
    uint8_t *stored;
} blk_t;

static void make(blk_t *b, uint64_t id, bool compressible)
{
    uint8_t *l = malloc(BLK);
    uint64_t x = id * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < BLK; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t w = compressible ? ((x & 0xff) * (i / 4096 + 1)) : x; /* ~2:1 with lz4 */
        memcpy(l + i, &w, 8);
    }
    memset(&b->bp, 0, sizeof b->bp);
    b->bp.dva[0] = (cairn_dva_t){.vdev = 0, .offset = id * BLK, .asize = BLK >> 9};
    b->bp.ncopies = 1;
    b->bp.birth_txg = 7;
    b->bp.lsize = BLK;
    b->bp.type = CAIRN_BT_DATA;
    b->bp.checksum = CAIRN_CHECKSUM_FLETCHER4;
    b->stored = malloc(BLK);
    size_t c = compressible ? cairn_compress(CAIRN_COMPRESS_LZ4, l, BLK, b->stored, BLK - BLK / 8) : 0;
    if (c) {
        b->bp.compress = CAIRN_COMPRESS_LZ4;
        b->bp.psize = (uint32_t)c;
    } else {
        memcpy(b->stored, l, BLK);
        b->bp.psize = BLK;
    }
    cairn_checksum(CAIRN_CHECKSUM_FLETCHER4, b->stored, b->bp.psize, b->bp.cksum);
    free(l);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *mbs, double *cpu, int reps)
{
    qsort(mbs, (size_t)reps, sizeof *mbs, cmp_d);
    qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
    printf("%-12s %10.0f MB/s %8.3f CPU-s/GiB\n", what, mbs[reps / 2], cpu[reps / 2]);
    fflush(stdout);
}

/* Writes the file's dirty pages back and drops its page cache, so the next
 * reads go to the device; returns the percentage of its pages still resident. */
static double drop_page_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || st.st_size == 0) {
        perror(path);
        exit(1);
    }
    if (fdatasync(fd)) perror("fdatasync");
    int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (e) fprintf(stderr, "posix_fadvise(DONTNEED): %s\n", strerror(e));
    double pct = -1;
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (size_t)st.st_size, pages = (len + (size_t)page - 1) / (size_t)page;
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *vec = malloc(pages);
    if (m != MAP_FAILED && vec && mincore(m, len, vec) == 0) {
        size_t resident = 0;
        for (size_t i = 0; i < pages; i++) resident += vec[i] & 1;
        pct = 100.0 * (double)resident / (double)pages;
    }
    free(vec);
    if (m != MAP_FAILED) munmap(m, len);
    close(fd);
    return pct;
}

/* One timed pass of arc_lookup over blocks[0..n). */
static void pass(uint64_t guid, blk_t *b, size_t n, uint8_t *dst, double *mbs, double *cpu)
{
    uint64_t t0 = cairn_now_ns();
    double c0 = cpu_s();
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) hits += arc_lookup(guid, &b[i].bp, dst, ARC_POLICY_DEFAULT) == 0;
    double secs = (double)(cairn_now_ns() - t0) / 1e9, c = cpu_s() - c0;
    if (hits != n) fprintf(stderr, "warning: %zu of %zu lookups missed\n", n - hits, n);
    double bytes = (double)hits * BLK;
    *mbs = bytes / 1e6 / secs;
    *cpu = c / (bytes / (1024.0 * 1024 * 1024));
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/var/tmp";
    size_t size_mb = argc > 2 ? (size_t)atoi(argv[2]) : 256;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    const char *l2_file = argc > 4 ? argv[4] : NULL;
    if (reps < 1 || reps > 15 || size_mb < 16) {
        fprintf(stderr, "usage: bench_arc_read [DIR [SIZE_MB>=16 [REPS 1..15 [L2_FILE]]]]\n");
        return 2;
    }
    size_t n = size_mb * CAIRN_MIB / BLK;
    double mbs[15], cpu[15];
    uint8_t *dst = malloc(BLK);
    printf("bench_arc_read: %zu MiB of 128 KiB blocks, medians of %d\n", size_mb, reps);

    /* memcpy bound */
    uint8_t *src = malloc(n * BLK);
    memset(src, 1, n * BLK);
    for (size_t i = 0; i < n; i++) memcpy(dst, src + i * BLK, BLK); /* warm-up */
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = cairn_now_ns();
        double c0 = cpu_s();
        for (size_t i = 0; i < n; i++) memcpy(dst, src + i * BLK, BLK);
        double secs = (double)(cairn_now_ns() - t0) / 1e9;
        mbs[r] = (double)n * BLK / 1e6 / secs;
        cpu[r] = (cpu_s() - c0) / ((double)n * BLK / (1024.0 * 1024 * 1024));
    }
    free(src);
    report("memcpy", mbs, cpu, reps);

    arc_set_max((uint64_t)size_mb * 2 * CAIRN_MIB);
    blk_t *raw = calloc(n, sizeof *raw), *lz = calloc(n, sizeof *lz);
    for (size_t i = 0; i < n; i++) {
        make(&raw[i], i, false);
        make(&lz[i], n + i, true);
    }
    uint64_t g_raw = 101, g_lz = 102;
    for (size_t i = 0; i < n; i++) arc_insert_stored(g_raw, &raw[i].bp, raw[i].stored, ARC_POLICY_DEFAULT);
    for (int r = 0; r < reps; r++) pass(g_raw, raw, n, dst, &mbs[r], &cpu[r]);
    report("arc-raw", mbs, cpu, reps);
    arc_purge_pool(g_raw);

    /* lz4 read once: every hit decompresses (the first hit moves it to the MFU, so
     * each rep re-inserts to stay on the MRU-hit path) */
    for (int r = 0; r < reps; r++) {
        arc_purge_pool(g_lz);
        for (size_t i = 0; i < n; i++) arc_insert_stored(g_lz, &lz[i].bp, lz[i].stored, ARC_POLICY_DEFAULT);
        pass(g_lz, lz, n, dst, &mbs[r], &cpu[r]);
    }
    report("arc-lz4-mru", mbs, cpu, reps);
    for (int r = 0; r < reps; r++) pass(g_lz, lz, n, dst, &mbs[r], &cpu[r]);
    report("arc-lz4-mfu", mbs, cpu, reps);
    arc_purge_pool(g_lz);

    /* L2ARC: a cache file of 2x SIZE, ARC 16 MiB */
    char path[4096], err[256];
    if (l2_file) snprintf(path, sizeof path, "%s", l2_file);
    else snprintf(path, sizeof path, "%s/bench_arc_l2.%d", dir, (int)getpid());
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)(size_mb * 2 * CAIRN_MIB))) {
        perror(path);
        return 1;
    }
    close(fd);
    uint64_t g_l2 = 103;
    arc_l2_set_feed(64 * CAIRN_MIB, 3600 * 1000);
    if (arc_l2_add(g_l2, path, true, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    arc_set_max(16 * CAIRN_MIB);
    for (size_t i = 0; i < n; i++) {
        arc_insert_stored(g_l2, &raw[i].bp, raw[i].stored, ARC_POLICY_DEFAULT);
        if (i % 64 == 63) arc_l2_feed_now();
    }
    arc_l2_feed_now();
    arc_stats_t st;
    arc_get_stats(&st);
    printf("l2arc: %llu blocks on the cache file\n", (unsigned long long)st.l2_entries);
    for (int r = 0; r < reps; r++) {
        /* start each rep with nothing of the first blocks in memory: neither in
         * the ARC nor in the page cache over the cache file */
        arc_set_max(CAIRN_MIB);
        arc_set_max(16 * CAIRN_MIB);
        double resident = drop_page_cache(path);
        printf("l2arc: rep %d: %.1f%% of the cache file in the page cache before the pass\n", r + 1,
               resident);
        pass(g_l2, raw, n, dst, &mbs[r], &cpu[r]);
    }
    report("l2arc", mbs, cpu, reps);
    arc_purge_pool(g_l2);
    if (!l2_file) unlink(path);
    for (size_t i = 0; i < n; i++) {
        free(raw[i].stored);
        free(lz[i].stored);
    }
    free(raw);
    free(lz);
    free(dst);
    return 0;
}
