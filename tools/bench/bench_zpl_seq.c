/*
 * Filesystem sequential throughput: 1 MiB writes of SIZE bytes into one file
 * through the ZPL, then a cold read back, side by side with a plain file on
 * the local file system (same directory, so the same disk) written and read
 * with O_DIRECT.
 *
 * Cairn, once per compression given with -c (default "lz4,off"):
 *   - a pool on a 2-way mirror of two sparse leaf files in DIR, one
 *     filesystem with compression=ALG (lz4 is the dataset default) and the
 *     default recordsize (128K unless -r);
 *   - write: zpl_create, SIZE/1 MiB zpl_write calls, zpl_commit; the commit is
 *     inside the timed span, so the number is for data on stable storage;
 *   - cold read: unmount, close the DSL, export the pool, drop the leaves'
 *     page cache (they are O_DIRECT anyway), import, mount, look the file up
 *     and read it back in 1 MiB zpl_read calls, checking every byte.
 * Plain, once per run:
 *   - write: open(O_CREAT|O_DIRECT), SIZE/1 MiB pwrite calls, fdatasync
 *     (timed); close;
 *   - read: posix_fadvise(DONTNEED), open(O_DIRECT), 1 MiB preads, same check.
 *
 * The mirror writes every block twice; the plain file once. Printed: MB/s of
 * logical (user) bytes, CPU-seconds per GiB (getrusage user+sys of the whole
 * process: Cairn's sync and I/O threads are included; the kernel's writeback
 * work for the plain file mostly is too, since O_DIRECT submits from the
 * caller), the bytes the leaves took per logical byte, and for writes two
 * ratios against the plain file: raw (logical MB/s / plain MB/s) and per copy
 * (raw x copies the mirror keeps, i.e. what each of the mirror's devices got
 * compared to the plain file's one device).
 *
 * The data is semi-compressible: each 1 MiB buffer alternates 4 KiB of
 * random bytes and 4 KiB of a repeated phrase (lz4 stores it at ~52%); 64
 * buffers are made up front and chunk i uses buffer i % 64 stamped with i.
 * Both sides write exactly the same bytes.
 *
 * "RESULT ..." lines feed tools/bench/datasets.sh. This is a benchmark, never
 * a test.
 *
 * usage: bench_zpl_seq [-d DIR] [-s SIZE] [-c ALG[,ALG...]] [-r RECORDSIZE]
 */
#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/zpl.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEQ_CHUNK CAIRN_MIB
#define SEQ_NBUFS 64
#define SEQ_COPIES 2   /* a 2-way mirror */

static const zpl_cred_t seq_cred = {.uid = 0, .gid = 0};
static uint8_t *seq_bufs[SEQ_NBUFS];

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void seq_fill_semi_compressible(uint8_t *buf, size_t len, uint64_t seed)
{
    static const char phrase[] = "a dataset is a tree of blocks rooted in one pointer. ";
    const size_t plen = sizeof(phrase) - 1;
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    size_t p = 0;
    for (size_t i = 0; i < len; i += 4096) {
        if ((i / 4096) % 2 == 0) {
            for (size_t k = 0; k < 4096; k += 8) {
                uint64_t v = cairn_rng_next(&r);
                memcpy(buf + i + k, &v, 8);
            }
        } else {
            for (size_t k = 0; k < 4096; k++, p++) buf[i + k] = (uint8_t)phrase[p % plen];
        }
    }
}

/* The bytes of chunk c, into buf. */
static void seq_chunk(uint8_t *buf, uint64_t c)
{
    memcpy(buf, seq_bufs[c % SEQ_NBUFS], SEQ_CHUNK);
    uint64_t v = c ^ 0x5E9C0FFEE0000000ULL;
    memcpy(buf, &v, sizeof(v));
}

static bool seq_chunk_ok(const uint8_t *buf, uint64_t c)
{
    uint64_t v;
    memcpy(&v, buf, sizeof(v));
    return v == (c ^ 0x5E9C0FFEE0000000ULL) &&
           memcmp(buf + 8, seq_bufs[c % SEQ_NBUFS] + 8, SEQ_CHUNK - 8) == 0;
}

typedef struct seq_result {
    double mbs, cpu_per_gib, seconds;
} seq_result_t;

static seq_result_t seq_result(uint64_t size, uint64_t t0, double c0)
{
    double el = (double)(cairn_now_ns() - t0) / 1e9;
    double cpu = cpu_seconds() - c0;
    return (seq_result_t){(double)size / el / 1e6, cpu / ((double)size / CAIRN_GIB), el};
}

static void die(const char *what, int e, const char *err)
{
    fprintf(stderr, "%s: %s%s%s\n", what, strerror(e < 0 ? -e : e), err && *err ? ": " : "",
            err ? err : "");
    exit(1);
}

/* ---- plain file ---- */

static void seq_plain(const char *dir, uint64_t size, seq_result_t *w, seq_result_t *r)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/bench_zpl_seq_plain.%d", dir, (int)getpid());
    uint8_t *buf = cairn_alloc_aligned(SEQ_CHUNK);
    uint64_t nchunks = size / SEQ_CHUNK;

    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0600);
    if (fd < 0) die(path, errno, NULL);
    syncfs(fd); /* start from a quiet file system (not timed) */
    double c0 = cpu_seconds();
    uint64_t t0 = cairn_now_ns();
    for (uint64_t c = 0; c < nchunks; c++) {
        seq_chunk(buf, c);
        if (pwrite(fd, buf, SEQ_CHUNK, (off_t)(c * SEQ_CHUNK)) != (ssize_t)SEQ_CHUNK)
            die("plain pwrite", errno ? errno : EIO, NULL);
    }
    if (fdatasync(fd)) die("plain fdatasync", errno, NULL);
    *w = seq_result(size, t0, c0);
    close(fd);

    fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) die(path, errno, NULL);
    uint64_t bad = 0;
    c0 = cpu_seconds();
    t0 = cairn_now_ns();
    for (uint64_t c = 0; c < nchunks; c++) {
        if (pread(fd, buf, SEQ_CHUNK, (off_t)(c * SEQ_CHUNK)) != (ssize_t)SEQ_CHUNK)
            die("plain pread", errno ? errno : EIO, NULL);
        if (!seq_chunk_ok(buf, c)) bad++;
    }
    *r = seq_result(size, t0, c0);
    close(fd);
    unlink(path);
    free(buf);
    if (bad) die("plain read back wrong data", EIO, NULL);
}

/* ---- Cairn ---- */

typedef struct seq_leaf_sum {
    uint64_t write_bytes;
} seq_leaf_sum_t;

static void seq_leaf_add(vdev_t *leaf, void *arg)
{
    ((seq_leaf_sum_t *)arg)->write_bytes += atomic_load(&leaf->stats.write_bytes);
}

static uint64_t seq_leaf_written(spa_t *spa)
{
    seq_leaf_sum_t s = {0};
    vdev_foreach_leaf(spa_root_vdev(spa), seq_leaf_add, &s);
    return s.write_bytes;
}

typedef struct seq_pool {
    char paths[2][4096];
    const char *path_ptrs[2];
    char pool[64], fsname[128];
    spa_t *spa;
    dsl_pool_t *dp;
    zpl_fs_t *fs;
} seq_pool_t;

static void seq_pool_mount(seq_pool_t *p)
{
    int e = dsl_pool_open(p->spa, &p->dp);
    if (e) die("dsl_pool_open", e, NULL);
    if ((e = zpl_mount(p->dp, p->fsname, &p->fs))) die("zpl_mount", e, NULL);
}

static void seq_pool_export(seq_pool_t *p)
{
    int e = zpl_unmount(p->fs);
    if (e) die("zpl_unmount", e, NULL);
    dsl_pool_close(p->dp);
    if ((e = spa_export(p->spa))) die("spa_export", e, NULL);
    p->fs = NULL;
    p->dp = NULL;
    p->spa = NULL;
}

static void seq_cairn(const char *dir, uint64_t size, const char *comp, uint32_t recordsize,
                      seq_result_t *w, seq_result_t *r, double *leaf_per_logical)
{
    seq_pool_t p = {0};
    char err[256] = "";
    spa_vdev_spec_t leaves[2];
    /* room for every copy of the data uncompressed, plus metadata */
    uint64_t leaf_size = size + size / 4 + CAIRN_GIB;
    for (int i = 0; i < 2; i++) {
        snprintf(p.paths[i], sizeof(p.paths[i]), "%s/bench_zpl_seq_leaf%d.%d", dir, i,
                 (int)getpid());
        p.path_ptrs[i] = p.paths[i];
        int fd = open(p.paths[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)leaf_size)) die(p.paths[i], errno, NULL);
        close(fd);
        leaves[i] = (spa_vdev_spec_t){.type = VDEV_TYPE_LEAF, .path = p.paths[i]};
    }
    spa_vdev_spec_t mirror = {.type = VDEV_TYPE_MIRROR, .nchildren = 2, .children = leaves};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &mirror};
    spa_create_opts_t copts = {0};
    snprintf(p.pool, sizeof(p.pool), "benchzs%d", (int)getpid());
    snprintf(p.fsname, sizeof(p.fsname), "%s/fs", p.pool);
    int e = spa_create(p.pool, &root, &copts, &p.spa, err, sizeof(err));
    if (e) die("spa_create", e, err);
    if ((e = dsl_pool_open(p.spa, &p.dp))) die("dsl_pool_open", e, NULL);
    char rs[32];
    snprintf(rs, sizeof(rs), "%u", recordsize);
    dsl_prop_pair_t props[] = {{"compression", comp}, {"recordsize", rs}};
    dsl_create_opts_t co = {.type = DSL_TYPE_FILESYSTEM, .props = props, .nprops = 2};
    if ((e = dsl_dataset_create(p.dp, p.fsname, &co, err, sizeof(err))))
        die("dsl_dataset_create", e, err);
    if ((e = zpl_mount(p.dp, p.fsname, &p.fs))) die("zpl_mount", e, NULL);

    zpl_node_t *rootn, *file;
    if ((e = zpl_root(p.fs, &rootn)) ||
        (e = zpl_create(rootn, "big", 0644, &seq_cred, ZPL_CREATE_GUARDED, NULL, &file, NULL)) ||
        (e = zpl_commit(p.fs)))
        die("creating the file", e, NULL);

    uint8_t *buf = cairn_alloc_aligned(SEQ_CHUNK);
    uint64_t nchunks = size / SEQ_CHUNK;
    int qfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (qfd >= 0) {
        syncfs(qfd); /* start from a quiet file system (not timed) */
        close(qfd);
    }
    uint64_t lw0 = seq_leaf_written(p.spa);
    double c0 = cpu_seconds();
    uint64_t t0 = cairn_now_ns();
    for (uint64_t c = 0; c < nchunks; c++) {
        seq_chunk(buf, c);
        if ((e = zpl_write(file, c * SEQ_CHUNK, SEQ_CHUNK, buf, 0, NULL))) die("zpl_write", e, NULL);
    }
    if ((e = zpl_commit(p.fs))) die("zpl_commit", e, NULL);
    *w = seq_result(size, t0, c0);
    *leaf_per_logical = (double)(seq_leaf_written(p.spa) - lw0) / (double)size;
    zpl_node_rele(file);
    zpl_node_rele(rootn);

    /* cold: nothing of the pool survives in this process or the page cache */
    seq_pool_export(&p);
    for (int i = 0; i < 2; i++) {
        int fd = open(p.paths[i], O_RDONLY);
        if (fd >= 0) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
    if ((e = spa_import(p.pool, p.path_ptrs, 2, 0, &p.spa, err, sizeof(err))))
        die("spa_import", e, err);
    seq_pool_mount(&p);

    uint64_t bad = 0;
    c0 = cpu_seconds();
    t0 = cairn_now_ns();
    if ((e = zpl_root(p.fs, &rootn)) || (e = zpl_lookup(rootn, "big", &file)))
        die("looking the file up", e, NULL);
    for (uint64_t c = 0; c < nchunks; c++) {
        size_t got = 0;
        bool eof = false;
        if ((e = zpl_read(file, c * SEQ_CHUNK, SEQ_CHUNK, buf, &got, &eof))) die("zpl_read", e, NULL);
        if (got != SEQ_CHUNK || !seq_chunk_ok(buf, c)) bad++;
    }
    *r = seq_result(size, t0, c0);
    zpl_node_rele(file);
    zpl_node_rele(rootn);
    seq_pool_export(&p);
    for (int i = 0; i < 2; i++) unlink(p.paths[i]);
    free(buf);
    if (bad) die("Cairn read back wrong data", EIO, NULL);
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-d DIR] [-s SIZE] [-c ALG[,ALG...]] [-r RECORDSIZE]\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *dir = "/var/tmp";
    uint64_t size = 2 * CAIRN_GIB;
    uint64_t recordsize = 128 * 1024;
    char comps[256] = "lz4,off";
    int o;
    while ((o = getopt(argc, argv, "d:s:c:r:h")) != -1) {
        switch (o) {
        case 'd': dir = optarg; break;
        case 's':
            if (cairn_parse_size(optarg, &size) || size < SEQ_CHUNK) usage(argv[0]);
            size -= size % SEQ_CHUNK;
            break;
        case 'c': cairn_strlcpy(comps, optarg, sizeof(comps)); break;
        case 'r':
            if (cairn_parse_size(optarg, &recordsize)) usage(argv[0]);
            break;
        default: usage(argv[0]);
        }
    }
    mkdir(dir, 0755);
    dsl_init();
    for (int i = 0; i < SEQ_NBUFS; i++) {
        seq_bufs[i] = cairn_alloc_aligned(SEQ_CHUNK);
        seq_fill_semi_compressible(seq_bufs[i], SEQ_CHUNK, 0xD5B3 + (uint64_t)i);
    }
    printf("%llu MiB in 1 MiB I/Os; Cairn: 2-way mirror of sparse files, recordsize %llu, "
           "commit inside the timed write; plain: O_DIRECT + fdatasync; dir %s\n",
           (unsigned long long)(size / CAIRN_MIB), (unsigned long long)recordsize, dir);

    seq_result_t pw, pr;
    seq_plain(dir, size, &pw, &pr);
    printf("%-10s %10s %10s %12s %12s %12s %8s %10s %8s\n", "target", "write MB/s",
           "read MB/s", "wr CPUs/GiB", "rd CPUs/GiB", "leaf/logic", "raw wr x", "percopy x",
           "read x");
    printf("%-10s %10.0f %10.0f %12.2f %12.2f %12s %8s %10s %8s\n", "plain", pw.mbs, pr.mbs,
           pw.cpu_per_gib, pr.cpu_per_gib, "1.000", "-", "-", "-");
    printf("RESULT bench=seq target=plain write_mbs=%.1f read_mbs=%.1f write_cpu_per_gib=%.3f "
           "read_cpu_per_gib=%.3f\n",
           pw.mbs, pr.mbs, pw.cpu_per_gib, pr.cpu_per_gib);
    fflush(stdout);

    char *save = NULL;
    for (char *comp = strtok_r(comps, ",", &save); comp; comp = strtok_r(NULL, ",", &save)) {
        seq_result_t cw, cr;
        double lpl = 0;
        seq_cairn(dir, size, comp, (uint32_t)recordsize, &cw, &cr, &lpl);
        double raw = cw.mbs / pw.mbs;
        char label[64];
        snprintf(label, sizeof(label), "cairn-%s", comp);
        printf("%-10s %10.0f %10.0f %12.2f %12.2f %12.3f %8.2f %10.2f %8.2f\n", label, cw.mbs,
               cr.mbs, cw.cpu_per_gib, cr.cpu_per_gib, lpl, raw, raw * SEQ_COPIES,
               cr.mbs / pr.mbs);
        printf("RESULT bench=seq target=cairn comp=%s write_mbs=%.1f read_mbs=%.1f "
               "write_cpu_per_gib=%.3f read_cpu_per_gib=%.3f leaf_per_logical=%.3f "
               "plain_write_mbs=%.1f plain_read_mbs=%.1f\n",
               comp, cw.mbs, cr.mbs, cw.cpu_per_gib, cr.cpu_per_gib, lpl, pw.mbs, pr.mbs);
        fflush(stdout);
    }
    for (int i = 0; i < SEQ_NBUFS; i++) free(seq_bufs[i]);
    return 0;
}
