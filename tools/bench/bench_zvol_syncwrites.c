/*
 * Synchronous 4 KiB writes: what the intent log buys (driver of
 * tools/bench/sync-writes.sh, which runs every mode and prints the table).
 *
 *   bench_zvol_syncwrites -d DIR [-t SECONDS] [-q THREADS] [-s SLOW_US] [-b BYTES] MODE
 *
 * MODE
 *   limit   pwrite 4 KiB (O_DIRECT, as the pool opens its leaves) + fdatasync per
 *           write on DIR/limit.img, a file in the
 *           same directory as the log device: the best a log device can do. Both
 *           files are written through once first (a device's blocks exist).
 *   txg     volume FUA writes on a pool of one slow main disk, log disabled
 *           (CAIRN_ZIL_TXG_ONLY: every sync write waits for a txg, as before).
 *   nolog   the same pool with the intent log on the main disk.
 *   log     the same main disk plus a log device (DIR/log.img, a plain file).
 * The main disk is a fault leaf over DIR/main.img whose every cache flush takes
 * SLOW_US microseconds more (default 8000: one rotation and a bit of a 7200 rpm
 * disk): a slow disk. THREADS threads (default 1) each keep one write in flight at
 * random BYTES-aligned offsets (BYTES: -b, default 4096; 8 KiB volblocksize beyond
 * 4 KiB, so large writes span whole records) of a 256 MiB range. Prints "MODE qd=Q iops=N cpu_us=C":
 * C is the process's user+system CPU time per write while the writers ran (the
 * steady figure on a loaded machine, where wall-clock rates are noisy).
 */
#include <cairn/dmu.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/vdev_fault.h>
#include <cairn/zvol.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static uint32_t BS = 4096;
#define SPAN (256ULL * 1024 * 1024)

static _Atomic bool stop;
static _Atomic uint64_t ops;
static zvol_t *zv;
static int limit_fd;
static const char *mode;

static void *worker(void *arg)
{
    uint64_t r = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    uint8_t *b = aligned_alloc(4096, BS);
    for (uint32_t i = 0; i < BS; i++) b[i] = (uint8_t)(i * 131 + (uintptr_t)arg);
    while (!atomic_load(&stop)) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        uint64_t off = (r % (SPAN / BS)) * BS;
        memcpy(b, &r, 8);
        int e;
        if (!strcmp(mode, "limit")) {
            e = pwrite(limit_fd, b, BS, (off_t)off) == BS && fdatasync(limit_fd) == 0 ? 0 : -errno;
        } else {
            e = zvol_write(zv, off, BS, b, ZVOL_WRITE_FUA);
        }
        if (e) {
            fprintf(stderr, "write failed: %d\n", e);
            exit(1);
        }
        atomic_fetch_add(&ops, 1);
    }
    free(b);
    return NULL;
}

/* written: every byte written once (as a real device's blocks exist), so neither the
 * limit nor the log device pays for the file system allocating blocks. */
static void make_file(const char *path, uint64_t size, bool written)
{
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size)) {
        perror(path);
        exit(1);
    }
    if (written) {
        static uint8_t zero[1 << 20];
        for (uint64_t o = 0; o < size; o += sizeof zero)
            if (pwrite(fd, zero, sizeof zero, (off_t)o) != (ssize_t)sizeof zero) exit(1);
        fsync(fd);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    int secs = 5, qd = 1, c;
    uint32_t slow_us = 8000;
    while ((c = getopt(argc, argv, "d:t:q:s:b:")) != -1) {
        if (c == 'b') BS = (uint32_t)atoi(optarg);
        if (c == 'd') dir = optarg;
        else if (c == 't') secs = atoi(optarg);
        else if (c == 'q') qd = atoi(optarg);
        else if (c == 's') slow_us = (uint32_t)atoi(optarg);
    }
    if (optind >= argc) {
        fprintf(stderr, "usage: %s -d DIR [-t S] [-q Q] [-s SLOW_US] limit|txg|nolog|log\n", argv[0]);
        return 2;
    }
    mode = argv[optind];
    cairn_log_set_level(CAIRN_LOG_WARN);
    char main_img[512], log_img[512], limit_img[512], fault_main[600];
    snprintf(main_img, sizeof main_img, "%s/main.img", dir);
    snprintf(log_img, sizeof log_img, "%s/log.img", dir);
    snprintf(limit_img, sizeof limit_img, "%s/limit.img", dir);
    snprintf(fault_main, sizeof fault_main, "fault:%s", main_img);
    spa_t *spa = NULL;
    objset_t *os = NULL;
    if (!strcmp(mode, "limit")) {
        make_file(limit_img, SPAN, true);
        /* O_DIRECT as the pool opens its leaves: the device's cost, not the page cache's. */
        limit_fd = open(limit_img, O_RDWR | O_DIRECT);
        if (limit_fd < 0) limit_fd = open(limit_img, O_RDWR);
    } else {
        if (!strcmp(mode, "txg")) setenv("CAIRN_ZIL_TXG_ONLY", "1", 1);
        make_file(main_img, 2048ULL * 1024 * 1024, false);
        make_file(log_img, SPAN, !strcmp(mode, "log"));
        dmu_init();
        spa_vdev_spec_t leaves[2] = {{.type = VDEV_TYPE_LEAF, .path = fault_main},
                                     {.type = VDEV_TYPE_LEAF, .path = log_img,
                                      .vclass = VDEV_CLASS_LOG}};
        spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = strcmp(mode, "log") ? 1 : 2,
                                .children = leaves};
        char err[256];
        char pname[64];
        snprintf(pname, sizeof pname, "syncb%d", (int)getpid());
        if (spa_create(pname, &root, NULL, &spa, err, sizeof err)) {
            fprintf(stderr, "spa_create: %s\n", err);
            return 1;
        }
        vdev_fault_set_flush_delay(main_img, slow_us);
        if (dmu_objset_create(spa, "vol", NULL) || dmu_objset_open(spa, "vol", &os)) return 1;
        zvol_objset_opts_t zo = {.volsize = SPAN, .volblocksize = BS > 4096 ? 8192 : BS,
                                 .block_size = 4096};
        if (zvol_open_objset(os, &zo, &zv)) return 1;
        /* The first commit makes the new log chain's header durable: not timed. */
        uint8_t *b = aligned_alloc(4096, BS);
        memset(b, 1, BS);
        zvol_write(zv, 0, BS, b, ZVOL_WRITE_FUA);
        zvol_write(zv, 0, BS, b, ZVOL_WRITE_FUA);
        free(b);
    }
    pthread_t *th = calloc((size_t)qd, sizeof *th);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = cairn_now_ns();
    for (int i = 0; i < qd; i++) pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    sleep((unsigned)secs);
    atomic_store(&stop, true);
    for (int i = 0; i < qd; i++) pthread_join(th[i], NULL);
    double el = (double)(cairn_now_ns() - t0) / 1e9;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                          ru0.ru_stime.tv_sec) * 1e6 +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                          ru0.ru_stime.tv_usec);
    uint64_t n = atomic_load(&ops);
    printf("%s qd=%d iops=%.0f cpu_us=%.1f\n", mode, qd, (double)n / el, n ? cpu / (double)n : 0);
    fflush(stdout);
    if (zv) zvol_close(zv);
    if (os) dmu_objset_close(os);
    if (spa) spa_destroy(spa);
    if (limit_fd > 0) close(limit_fd);
    unlink(main_img);
    unlink(log_img);
    unlink(limit_img);
    free(th);
    return 0;
}
