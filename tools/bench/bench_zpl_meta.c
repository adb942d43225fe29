/*
 * Filesystem metadata rates: create, stat and remove of N files in one
 * directory through the ZPL library API, side by side with the same
 * operations on a plain directory of the local file system (normally ext4
 * under /var/tmp, i.e. the same disk that holds the pool's leaf file).
 *
 * Phases, each run on Cairn and then on the plain directory:
 *   create  zpl_create(GUARDED) of "fNNNNNNN" (+ one zpl_write of SIZE bytes
 *           when -s is given) / open(O_CREAT|O_EXCL) (+ write) + close;
 *   stat    zpl_lookup + zpl_getattr of every name / fstatat;
 *   remove  zpl_remove / unlinkat.
 * Every phase ends with zpl_commit() (Cairn) or syncfs() (plain) INSIDE the
 * timed span, so both numbers are for changes that reached stable storage
 * (for stat the commit has nothing to do unless something dirtied metadata;
 * it is kept for symmetry). Stats are warm on both sides: the nodes were
 * just created, the kernel's dentry/inode caches hold the plain files.
 *
 * T threads (-t) share the N names through an atomic counter, so with T > 1
 * both sides see concurrent operations on one directory (the case a
 * directory's locking decides).
 *
 * The plain side's syncfs() flushes the whole file system, so dirty data
 * other processes left on it is written too: on a shared machine the plain
 * rates of short phases are noisy and pessimistic. The seconds spent in the
 * final commit / syncfs are printed separately for that reason.
 *
 * Printed: ops/s and CPU-seconds per 1000 ops (getrusage user+sys of the
 * whole process: Cairn's sync and I/O threads are included; the kernel's
 * journal thread (jbd2) and writeback that work for the plain side are NOT,
 * so the plain CPU numbers are a lower bound), and the ratio Cairn/plain.
 * Machine-readable "RESULT ..." lines feed tools/bench/datasets.sh. This is a
 * benchmark, never a test.
 *
 * usage: bench_zpl_meta [-d DIR] [-n FILES] [-s FILE_BYTES] [-t THREADS]
 */
#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/zpl.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { PH_CREATE, PH_STAT, PH_REMOVE, PH_COUNT } meta_phase_t;
static const char *const meta_phase_name[] = {"create", "stat", "remove"};

typedef struct meta_target {
    const char *name;        /* "cairn" or "plain" */
    zpl_fs_t *fs;            /* Cairn: the filesystem and the directory */
    zpl_node_t *dir;
    int dirfd;               /* plain: the directory */
} meta_target_t;

typedef struct meta_run {
    meta_target_t *t;
    meta_phase_t ph;
    uint32_t nfiles;
    uint32_t file_bytes;
    const uint8_t *data;
    _Atomic uint32_t next;
    _Atomic int err;
} meta_run_t;

static const zpl_cred_t meta_cred = {.uid = 0, .gid = 0};

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int meta_cairn_op(meta_run_t *r, const char *name)
{
    meta_target_t *t = r->t;
    zpl_node_t *n = NULL;
    int e;
    switch (r->ph) {
    case PH_CREATE:
        e = zpl_create(t->dir, name, 0644, &meta_cred, ZPL_CREATE_GUARDED, NULL, &n, NULL);
        if (!e && r->file_bytes) e = zpl_write(n, 0, r->file_bytes, r->data, 0, NULL);
        if (n) zpl_node_rele(n);
        return e;
    case PH_STAT: {
        zpl_attr_t a;
        e = zpl_lookup(t->dir, name, &n);
        if (!e) {
            e = zpl_getattr(n, &a);
            if (!e && a.size != r->file_bytes) e = -EIO;
            zpl_node_rele(n);
        }
        return e;
    }
    case PH_REMOVE: return zpl_remove(t->dir, name, NULL);
    default: return -EINVAL;
    }
}

static int meta_plain_op(meta_run_t *r, const char *name)
{
    int dfd = r->t->dirfd;
    switch (r->ph) {
    case PH_CREATE: {
        int fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0) return -errno;
        int e = 0;
        if (r->file_bytes && write(fd, r->data, r->file_bytes) != (ssize_t)r->file_bytes)
            e = -EIO;
        close(fd);
        return e;
    }
    case PH_STAT: {
        struct stat st;
        if (fstatat(dfd, name, &st, 0)) return -errno;
        return st.st_size == (off_t)r->file_bytes ? 0 : -EIO;
    }
    case PH_REMOVE: return unlinkat(dfd, name, 0) ? -errno : 0;
    default: return -EINVAL;
    }
}

static void *meta_worker(void *arg)
{
    meta_run_t *r = arg;
    char name[32];
    for (;;) {
        uint32_t i = atomic_fetch_add(&r->next, 1);
        if (i >= r->nfiles || atomic_load(&r->err)) break;
        snprintf(name, sizeof(name), "f%07u", i);
        int e = r->t->fs ? meta_cairn_op(r, name) : meta_plain_op(r, name);
        if (e) {
            fprintf(stderr, "%s %s %s: %s\n", r->t->name, meta_phase_name[r->ph], name,
                    strerror(-e));
            atomic_store(&r->err, e);
            break;
        }
    }
    return NULL;
}

typedef struct meta_result {
    double ops_per_s, cpu_per_kop, seconds;
    double sync_seconds;     /* of which the final zpl_commit / syncfs */
} meta_result_t;

static int sync_dirfd = -1;   /* the plain directory: syncfs before each phase */

static meta_result_t meta_run_phase(meta_target_t *t, meta_phase_t ph, uint32_t nfiles,
                                    uint32_t file_bytes, const uint8_t *data, int nthreads)
{
    meta_run_t r = {.t = t, .ph = ph, .nfiles = nfiles, .file_bytes = file_bytes, .data = data};
    pthread_t th[64];
    /* Start from a quiet file system: with -o discard, ext4 discards the
     * extents a previous run freed at its next journal commit, which would
     * otherwise land in whichever phase commits first. Not timed. */
    if (sync_dirfd >= 0) syncfs(sync_dirfd);
    double c0 = cpu_seconds();
    uint64_t t0 = cairn_now_ns();
    for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, meta_worker, &r);
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    /* durability inside the timed span (see the top comment) */
    uint64_t ts = cairn_now_ns();
    int e = t->fs ? zpl_commit(t->fs) : (syncfs(t->dirfd) ? -errno : 0);
    if (e && !atomic_load(&r.err)) atomic_store(&r.err, e);
    uint64_t t1 = cairn_now_ns();
    double el = (double)(t1 - t0) / 1e9;
    double cpu = cpu_seconds() - c0;
    if (atomic_load(&r.err)) {
        fprintf(stderr, "%s %s failed: %s\n", t->name, meta_phase_name[ph],
                strerror(-atomic_load(&r.err)));
        exit(1);
    }
    return (meta_result_t){nfiles / el, cpu * 1000.0 / nfiles, el, (double)(t1 - ts) / 1e9};
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-d DIR] [-n FILES] [-s FILE_BYTES] [-t THREADS]\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *dir = "/var/tmp";
    uint32_t nfiles = 20000;
    uint32_t file_bytes = 0;
    int nthreads = 1;
    int c;
    while ((c = getopt(argc, argv, "d:n:s:t:h")) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'n': nfiles = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 's': file_bytes = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 't': nthreads = atoi(optarg); break;
        default: usage(argv[0]);
        }
    }
    if (!nfiles || nthreads < 1 || nthreads > 64 || file_bytes > 16 * 1024 * 1024)
        usage(argv[0]);

    /* ---- pool on one sparse leaf file in DIR, one filesystem ---- */
    char leaf[4096], plain[4096], pool[64], fsname[128], err[256] = "";
    mkdir(dir, 0755);
    snprintf(leaf, sizeof(leaf), "%s/bench_zpl_meta_leaf.%d", dir, (int)getpid());
    snprintf(plain, sizeof(plain), "%s/bench_zpl_meta_plain.%d", dir, (int)getpid());
    snprintf(pool, sizeof(pool), "benchzm%d", (int)getpid());
    snprintf(fsname, sizeof(fsname), "%s/fs", pool);
    uint64_t leaf_size = 4 * CAIRN_GIB + (uint64_t)nfiles * (file_bytes + 4096) * 4;
    int lfd = open(leaf, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (lfd < 0 || ftruncate(lfd, (off_t)leaf_size)) {
        perror(leaf);
        return 1;
    }
    close(lfd);
    dsl_init();
    spa_vdev_spec_t lspec = {.type = VDEV_TYPE_LEAF, .path = leaf};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &lspec};
    spa_create_opts_t copts = {0};
    spa_t *spa;
    dsl_pool_t *dp;
    if (spa_create(pool, &root, &copts, &spa, err, sizeof(err))) {
        fprintf(stderr, "spa_create: %s\n", err);
        return 1;
    }
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM};
    zpl_fs_t *fs;
    zpl_node_t *rootn, *dirn;
    if (dsl_pool_open(spa, &dp) || dsl_dataset_create(dp, fsname, &co, err, sizeof(err)) ||
        zpl_mount(dp, fsname, &fs) || zpl_root(fs, &rootn) ||
        zpl_mkdir(rootn, "bench", 0755, &meta_cred, &dirn, NULL) || zpl_commit(fs)) {
        fprintf(stderr, "setting up the filesystem failed: %s\n", err);
        return 1;
    }
    if (mkdir(plain, 0755)) {
        perror(plain);
        return 1;
    }
    meta_target_t tc = {.name = "cairn", .fs = fs, .dir = dirn, .dirfd = -1};
    meta_target_t tp = {.name = "plain", .dirfd = open(plain, O_RDONLY | O_DIRECTORY)};
    if (tp.dirfd < 0) {
        perror(plain);
        return 1;
    }
    sync_dirfd = tp.dirfd;
    uint8_t *data = calloc(1, file_bytes ? file_bytes : 1);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 11);
    for (uint32_t i = 0; i < file_bytes; i++) data[i] = (uint8_t)cairn_rng_next(&rng);

    printf("%u files of %u bytes in one directory, %d thread(s), dir %s; each phase ends with "
           "zpl_commit / syncfs (timed)\n",
           nfiles, file_bytes, nthreads, dir);
    printf("%-8s %12s %12s %10s %14s %14s %10s %10s %10s\n", "phase", "cairn ops/s",
           "plain ops/s", "ops x", "cairn CPUs/kop", "plain CPUs/kop", "CPU x", "cairn sync",
           "plain sync");
    for (meta_phase_t ph = PH_CREATE; ph < PH_COUNT; ph++) {
        meta_result_t z = meta_run_phase(&tc, ph, nfiles, file_bytes, data, nthreads);
        meta_result_t f = meta_run_phase(&tp, ph, nfiles, file_bytes, data, nthreads);
        printf("%-8s %12.0f %12.0f %10.2f %14.3f %14.3f %10.2f %9.3fs %9.3fs\n",
               meta_phase_name[ph], z.ops_per_s, f.ops_per_s, z.ops_per_s / f.ops_per_s,
               z.cpu_per_kop, f.cpu_per_kop, f.cpu_per_kop > 0 ? z.cpu_per_kop / f.cpu_per_kop : 0,
               z.sync_seconds, f.sync_seconds);
        printf("RESULT bench=meta phase=%s threads=%d file_bytes=%u cairn_ops=%.0f "
               "plain_ops=%.0f cairn_cpu_per_kop=%.4f plain_cpu_per_kop=%.4f "
               "cairn_sync_s=%.4f plain_sync_s=%.4f cairn_s=%.4f plain_s=%.4f\n",
               meta_phase_name[ph], nthreads, file_bytes, z.ops_per_s, f.ops_per_s,
               z.cpu_per_kop, f.cpu_per_kop, z.sync_seconds, f.sync_seconds, z.seconds,
               f.seconds);
        fflush(stdout);
    }

    zpl_node_rele(dirn);
    zpl_node_rele(rootn);
    int e = zpl_unmount(fs);
    dsl_pool_close(dp);
    if (!e) e = spa_export(spa);
    if (e) fprintf(stderr, "teardown: %s\n", strerror(-e));
    close(tp.dirfd);
    rmdir(plain);
    unlink(leaf);
    free(data);
    return e ? 1 : 0;
}
