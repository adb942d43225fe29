/*
 * Volume IOPS: 8 KiB random reads and writes at queue depth Q (Q threads, each
 * with one request in flight, as an iSCSI target's worker pool would issue
 * them) on a volume in a pool backed by one file, side by side with the same
 * pattern done with pread/pwrite on a plain file opened O_DIRECT in the same
 * directory (so on the same disk).
 *
 * Phases, each for SECONDS on both targets:
 *   randwrite     8 KiB writes at random 8 KiB-aligned offsets, no FUA; the
 *                 zvol span ends with zvol_flush() and the file span with
 *                 fdatasync(), so both numbers are for data that reached the
 *                 disk;
 *   randwrite-fua every write FUA (zvol: ZVOL_WRITE_FUA, group commit; file:
 *                 O_DIRECT|O_DSYNC);
 *   randread      8 KiB reads at random offsets (the DMU caches no data
 *                 records, the file bypasses the page cache: both hit the
 *                 disk unless the device caches).
 * Both targets are filled with random data first (not timed), so reads find
 * data and writes overwrite (copy-on-write allocation on the volume).
 * Printed: IOPS, MB/s, CPU-seconds per GiB moved (getrusage user+sys of the
 * whole process, so the pool's sync and I/O threads count) and the ratio
 * zvol/file. This is a benchmark, never a test.
 *
 * usage: bench_zvol_iops [-d DIR] [-s VOLSIZE_MIB] [-t SECONDS] [-q THREADS]
 */
#include <cairn/dmu.h>
#include <cairn/log.h>
#include <cairn/util.h>
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

#define IO_SIZE 8192u
#define MIB (1024ull * 1024)

typedef enum { PH_WRITE, PH_WRITE_FUA, PH_READ } phase_t;
static const char *phase_name[] = {"randwrite", "randwrite-fua", "randread"};

typedef struct target {
    const char *name;
    zvol_t *zv;     /* or */
    int fd, fd_sync;
    uint64_t size;
} target_t;

typedef struct run {
    target_t *t;
    phase_t ph;
    uint64_t deadline_ns;
    _Atomic uint64_t ops;
    _Atomic int err;
} run_t;

typedef struct worker {
    run_t *r;
    int id;
} worker_t;

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static int do_io(target_t *t, phase_t ph, uint64_t off, uint8_t *buf)
{
    if (t->zv) {
        if (ph == PH_READ) return zvol_read(t->zv, off, IO_SIZE, buf);
        return zvol_write(t->zv, off, IO_SIZE, buf, ph == PH_WRITE_FUA ? ZVOL_WRITE_FUA : 0);
    }
    ssize_t n;
    if (ph == PH_READ) n = pread(t->fd, buf, IO_SIZE, (off_t)off);
    else n = pwrite(ph == PH_WRITE_FUA ? t->fd_sync : t->fd, buf, IO_SIZE, (off_t)off);
    return n == IO_SIZE ? 0 : -EIO;
}

static void *worker_main(void *p)
{
    worker_t *w = p;
    run_t *r = w->r;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 77 + (uint64_t)w->id * 1000 + r->ph);
    uint8_t *buf = cairn_alloc_aligned(IO_SIZE);
    for (unsigned i = 0; i < IO_SIZE; i++) buf[i] = (uint8_t)cairn_rng_next(&rng);
    uint64_t nrec = r->t->size / IO_SIZE;
    uint64_t n = 0;
    while (!atomic_load(&r->err)) {
        if ((n & 15) == 0 && cairn_now_ns() >= r->deadline_ns) break;
        uint64_t off = cairn_rng_below(&rng, nrec) * IO_SIZE;
        memcpy(buf, &n, sizeof(n)); /* no two writes identical */
        int e = do_io(r->t, r->ph, off, buf);
        if (e) {
            atomic_store(&r->err, e);
            break;
        }
        n++;
    }
    atomic_fetch_add(&r->ops, n);
    free(buf);
    return NULL;
}

typedef struct result {
    double iops, mbs, cpu_per_gib;
} result_t;

static result_t run_phase(target_t *t, phase_t ph, int nthreads, double seconds)
{
    run_t r = {.t = t, .ph = ph};
    double c0 = cpu_seconds();
    uint64_t t0 = cairn_now_ns();
    r.deadline_ns = t0 + (uint64_t)(seconds * 1e9);
    pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
    worker_t *ws = calloc((size_t)nthreads, sizeof(*ws));
    for (int i = 0; i < nthreads; i++) {
        ws[i] = (worker_t){&r, i};
        pthread_create(&th[i], NULL, worker_main, &ws[i]);
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    if (ph != PH_READ) {
        int e = t->zv ? zvol_flush(t->zv) : (fdatasync(t->fd) ? -errno : 0);
        if (e) atomic_store(&r.err, e);
    }
    double el = (cairn_now_ns() - t0) / 1e9;
    double cpu = cpu_seconds() - c0;
    free(th);
    free(ws);
    if (atomic_load(&r.err)) {
        fprintf(stderr, "%s %s: error %d\n", t->name, phase_name[ph], atomic_load(&r.err));
        exit(1);
    }
    uint64_t ops = atomic_load(&r.ops);
    double gib = (double)ops * IO_SIZE / (1024.0 * 1024 * 1024);
    result_t res = {ops / el, ops * (double)IO_SIZE / el / 1e6, gib > 0 ? cpu / gib : 0};
    return res;
}

static void fill(target_t *t)
{
    uint8_t *b = cairn_alloc_aligned(MIB);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 5);
    for (uint64_t off = 0; off < t->size; off += MIB) {
        for (size_t i = 0; i < MIB; i += 8) {
            uint64_t x = cairn_rng_next(&rng);
            memcpy(b + i, &x, 8);
        }
        int e = t->zv ? zvol_write(t->zv, off, MIB, b, 0)
                      : (pwrite(t->fd, b, MIB, (off_t)off) == (ssize_t)MIB ? 0 : -EIO);
        if (e) {
            fprintf(stderr, "fill %s: %d\n", t->name, e);
            exit(1);
        }
    }
    int e = t->zv ? zvol_flush(t->zv) : fdatasync(t->fd);
    if (e) {
        fprintf(stderr, "fill flush %s: %d\n", t->name, e);
        exit(1);
    }
    free(b);
}

int main(int argc, char **argv)
{
    const char *dir = ".";
    uint64_t vol_mib = 1024;
    double seconds = 8;
    int nthreads = 32;
    int c;
    while ((c = getopt(argc, argv, "d:s:t:q:")) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 's': vol_mib = strtoull(optarg, NULL, 0); break;
        case 't': seconds = atof(optarg); break;
        case 'q': nthreads = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-d DIR] [-s VOLSIZE_MIB] [-t SECONDS] [-q THREADS]\n", argv[0]);
            return 2;
        }
    }
    uint64_t size = vol_mib * MIB;
    char leaf[4096], plain[4096];
    snprintf(leaf, sizeof(leaf), "%s/bench_zvol_leaf.%d", dir, (int)getpid());
    snprintf(plain, sizeof(plain), "%s/bench_zvol_plain.%d", dir, (int)getpid());

    /* pool: one leaf file, room for the volume rewritten twice over (copy-on-write) */
    int lfd = open(leaf, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (lfd < 0 || ftruncate(lfd, (off_t)(size * 3 + 512 * MIB))) {
        perror(leaf);
        return 1;
    }
    close(lfd);
    dmu_init();
    spa_vdev_spec_t lspec = {.type = VDEV_TYPE_LEAF, .path = leaf};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &lspec};
    spa_create_opts_t copts = {0};
    char err[256] = "";
    spa_t *spa;
    char pname[64];
    snprintf(pname, sizeof(pname), "benchzv%d", (int)getpid());
    if (spa_create(pname, &root, &copts, &spa, err, sizeof(err))) {
        fprintf(stderr, "spa_create: %s\n", err);
        return 1;
    }
    objset_t *os;
    if (dmu_objset_create(spa, "vol", NULL) || dmu_objset_open(spa, "vol", &os)) {
        fprintf(stderr, "objset\n");
        return 1;
    }
    target_t tz = {.name = "zvol", .size = size, .fd = -1};
    zvol_objset_opts_t zo = {.volsize = size, .volblocksize = 8192, .block_size = 4096};
    if (zvol_open_objset(os, &zo, &tz.zv)) {
        fprintf(stderr, "zvol_open_objset\n");
        return 1;
    }
    target_t tf = {.name = "file", .size = size};
    tf.fd = open(plain, O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0600);
    tf.fd_sync = open(plain, O_RDWR | O_DIRECT | O_DSYNC);
    if (tf.fd < 0 || tf.fd_sync < 0 || ftruncate(tf.fd, (off_t)size)) {
        perror(plain);
        return 1;
    }
    printf("volume %llu MiB, volblocksize 8K, %d threads (queue depth), %.0f s per phase, dir %s\n",
           (unsigned long long)vol_mib, nthreads, seconds, dir);
    fill(&tz);
    fill(&tf);
    printf("%-14s %12s %12s %10s %10s %12s %12s %8s %10s\n", "phase", "zvol IOPS", "file IOPS",
           "zvol MB/s", "file MB/s", "zvol CPUs/G", "file CPUs/G", "IOPS x", "CPU/GiB x");
    for (phase_t ph = PH_WRITE; ph <= PH_READ; ph++) {
        result_t z = run_phase(&tz, ph, nthreads, seconds);
        result_t f = run_phase(&tf, ph, nthreads, seconds);
        printf("%-14s %12.0f %12.0f %10.1f %10.1f %12.2f %12.2f %8.2f %10.2f\n", phase_name[ph],
               z.iops, f.iops, z.mbs, f.mbs, z.cpu_per_gib, f.cpu_per_gib,
               f.iops > 0 ? z.iops / f.iops : 0, f.cpu_per_gib > 0 ? z.cpu_per_gib / f.cpu_per_gib : 0);
        printf("RESULT phase=%s zvol_iops=%.0f file_iops=%.0f zvol_cpu_per_gib=%.3f file_cpu_per_gib=%.3f\n",
               phase_name[ph], z.iops, f.iops, z.cpu_per_gib, f.cpu_per_gib);
        fflush(stdout);
    }
    zvol_close(tz.zv);
    dmu_objset_close(os);
    spa_destroy(spa);
    close(tf.fd);
    close(tf.fd_sync);
    unlink(leaf);
    unlink(plain);
    return 0;
}
