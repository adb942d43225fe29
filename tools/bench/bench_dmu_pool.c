/*
 * Pool throughput, end to end through the DMU: sequential write then read of
 * one object on a pool built in this process from files.
 *
 * What it does, in order:
 *   1. makes N sparse leaf files in DIR (N = 2 for mirror unless --leaves,
 *      6 for raidz2, 1 for single), spa_create()s a pool on them, dmu_init(),
 *      one object set, one object with the chosen record size / compression;
 *   2. writes SIZE bytes sequentially in 1 MiB dmu_write() calls (one tx each)
 *      from T threads that take the next 1 MiB chunk from a shared counter, then
 *      dmu_objset_sync(): the sync is inside the timed span, so the number is
 *      what reached stable storage, not what sat in dirty memory;
 *   3. exports the pool, drops the leaf files' page cache (posix_fadvise
 *      DONTNEED; the leaves normally use O_DIRECT, which the program checks in
 *      /proc/self/fdinfo and reports), imports it again, so the read phase
 *      finds nothing cached anywhere, and reads the object back in 1 MiB
 *      dmu_read() calls (same threads), checking every byte;
 *   4. prints MB/s, CPU-seconds per GiB (getrusage user+sys of the whole
 *      process, so the SPA's worker and completion threads are included) and
 *      the average number of cores busy, for both phases, plus the bytes the
 *      leaves physically took (sum of leaf write_bytes during the write phase,
 *      which counts every mirror copy, parity column, indirect block and label
 *      update) and their ratio to the logical bytes.
 *
 * The data is semi-compressible so the codecs have real work: every 1 MiB
 * buffer alternates 4 KiB of random bytes and 4 KiB of a repeated 61-byte
 * phrase, i.e. 50% random, 50% repeated; lz4 stores it at about 52% and gzip-2
 * slightly better. 64 distinct buffers are generated up front (not timed),
 * and chunk i uses buffer i % 64 with its chunk number stamped in its first
 * 8 bytes, so no two records are identical.
 *
 * The last line is machine-readable ("RESULT key=value ...") for
 * tools/bench/pool-throughput.sh. This is a benchmark, never a test.
 */
#include <cairn/dmu.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_CHUNK CAIRN_MIB
#define BENCH_NBUFS 64
#define BENCH_MAX_LEAVES 32

typedef struct bench_cfg {
    const char *layout;   /* mirror | raidz1 | raidz2 | raidz3 | single */
    const char *dir;
    uint64_t leaf_size;
    uint64_t size;        /* logical bytes written */
    uint32_t recordsize;
    cairn_compress_t compress;
    cairn_checksum_t checksum;
    uint32_t nleaves;
    uint32_t nthreads;
    bool keep;            /* leave the files (and pool) behind */
    bool verify;
} bench_cfg_t;

typedef struct bench_run {
    const bench_cfg_t *cfg;
    objset_t *os;
    uint64_t obj;
    uint8_t *bufs[BENCH_NBUFS];
    _Atomic uint64_t next_chunk;
    _Atomic int error;
    _Atomic uint64_t mismatches;
} bench_run_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_dmu_pool [options] mirror|raidz1|raidz2|raidz3|single DIR LEAF_SIZE\n"
            "  -s, --size BYTES        logical bytes to write and read (default 4G)\n"
            "  -r, --record 128k|1m    record size (any power of two 512..1m; default 128k)\n"
            "  -c, --compress ALG      off|lz4|lzjb|zle|gzip-N (default off)\n"
            "  -k, --checksum ALG      fletcher4|xxhash|sha256 (default fletcher4)\n"
            "  -t, --threads N         writer/reader threads (default 1)\n"
            "  -n, --leaves N          leaves (default: mirror 2, raidz1 3, raidz2 6, raidz3 7,\n"
            "                          single 1)\n"
            "      --no-verify         do not compare the data read back\n"
            "      --keep              keep the leaf files\n");
    exit(2);
}

/* 50% random, 50% a repeated phrase, in 4 KiB runs (see the top comment). */
static void fill_semi_compressible(uint8_t *buf, size_t len, uint64_t seed)
{
    static const char phrase[] = "copy-on-write keeps the old block until the new one is safe. ";
    const size_t plen = sizeof(phrase) - 1;
    cairn_rng_t r;
    cairn_rng_seed(&r, seed);
    size_t p = 0;
    for (size_t i = 0; i < len; i += 4096) {
        size_t n = len - i < 4096 ? len - i : 4096;
        if ((i / 4096) % 2 == 0) {
            for (size_t k = 0; k + 8 <= n; k += 8) {
                uint64_t v = cairn_rng_next(&r);
                memcpy(buf + i + k, &v, 8);
            }
        } else {
            for (size_t k = 0; k < n; k++, p++) buf[i + k] = (uint8_t)phrase[p % plen];
        }
    }
}

static void chunk_stamp(uint8_t *buf, uint64_t chunk)
{
    uint64_t v = chunk ^ 0xC0FFEE0000000000ULL;
    memcpy(buf, &v, sizeof v);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void *writer_main(void *arg)
{
    bench_run_t *run = arg;
    uint64_t nchunks = run->cfg->size / BENCH_CHUNK;
    uint8_t *buf = cairn_alloc_aligned(BENCH_CHUNK);
    for (;;) {
        uint64_t c = atomic_fetch_add(&run->next_chunk, 1);
        if (c >= nchunks || atomic_load(&run->error)) break;
        memcpy(buf, run->bufs[c % BENCH_NBUFS], BENCH_CHUNK);
        chunk_stamp(buf, c);
        dmu_tx_t *tx = dmu_tx_begin(run->os);
        int e = dmu_write(run->os, run->obj, c * BENCH_CHUNK, BENCH_CHUNK, buf, tx);
        dmu_tx_commit(tx);
        if (e) {
            fprintf(stderr, "dmu_write at %llu: %s\n", (unsigned long long)(c * BENCH_CHUNK),
                    strerror(-e));
            atomic_store(&run->error, e);
            break;
        }
    }
    free(buf);
    return NULL;
}

static void *reader_main(void *arg)
{
    bench_run_t *run = arg;
    uint64_t nchunks = run->cfg->size / BENCH_CHUNK;
    uint8_t *buf = cairn_alloc_aligned(BENCH_CHUNK);
    for (;;) {
        uint64_t c = atomic_fetch_add(&run->next_chunk, 1);
        if (c >= nchunks || atomic_load(&run->error)) break;
        int e = dmu_read(run->os, run->obj, c * BENCH_CHUNK, BENCH_CHUNK, buf);
        if (e) {
            fprintf(stderr, "dmu_read at %llu: %s\n", (unsigned long long)(c * BENCH_CHUNK),
                    strerror(-e));
            atomic_store(&run->error, e);
            break;
        }
        if (run->cfg->verify) {
            const uint8_t *want = run->bufs[c % BENCH_NBUFS];
            uint64_t v;
            memcpy(&v, buf, 8);
            if (v != (c ^ 0xC0FFEE0000000000ULL) ||
                memcmp(buf + 8, want + 8, BENCH_CHUNK - 8) != 0)
                atomic_fetch_add(&run->mismatches, 1);
        }
    }
    free(buf);
    return NULL;
}

static int run_threads(bench_run_t *run, void *(*fn)(void *))
{
    pthread_t th[64];
    uint32_t n = run->cfg->nthreads;
    atomic_store(&run->next_chunk, 0);
    for (uint32_t i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, fn, run) != 0) return -EAGAIN;
    for (uint32_t i = 0; i < n; i++) pthread_join(th[i], NULL);
    return atomic_load(&run->error);
}

typedef struct leaf_sum {
    uint64_t write_bytes, read_bytes, writes, reads;
    uint32_t nleaves;
} leaf_sum_t;

static void leaf_add(vdev_t *leaf, void *arg)
{
    leaf_sum_t *s = arg;
    s->write_bytes += atomic_load(&leaf->stats.write_bytes);
    s->read_bytes += atomic_load(&leaf->stats.read_bytes);
    s->writes += atomic_load(&leaf->stats.writes);
    s->reads += atomic_load(&leaf->stats.reads);
    s->nleaves++;
}

static leaf_sum_t leaf_totals(spa_t *spa)
{
    leaf_sum_t s = {0};
    vdev_foreach_leaf(spa_root_vdev(spa), leaf_add, &s);
    return s;
}

/* Is some open descriptor of this process on `path` opened with O_DIRECT?
 * Returns 1 yes, 0 no, -1 not found. Reads /proc/self/fdinfo (flags are octal). */
static int leaf_uses_odirect(const char *path)
{
    char want[4096];
    if (!realpath(path, want)) return -1;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int found = -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char lp[300], target[4096];
        snprintf(lp, sizeof lp, "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(lp, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        if (strcmp(target, want) != 0) continue;
        char ip[300];
        snprintf(ip, sizeof ip, "/proc/self/fdinfo/%s", de->d_name);
        FILE *f = fopen(ip, "r");
        if (!f) continue;
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long flags;
            if (sscanf(line, "flags: %lo", &flags) == 1) {
                if (flags & O_DIRECT) found = 1;
                else if (found < 0) found = 0;
            }
        }
        fclose(f);
    }
    closedir(d);
    return found;
}

static void drop_page_cache(char paths[][600], uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0) continue;
        if (fdatasync(fd) != 0) { /* nothing to flush with O_DIRECT; harmless otherwise */ }
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

static uint32_t default_leaves(const char *layout)
{
    if (!strcmp(layout, "mirror")) return 2;
    if (!strcmp(layout, "raidz1")) return 3;
    if (!strcmp(layout, "raidz2")) return 6;
    if (!strcmp(layout, "raidz3")) return 7;
    if (!strcmp(layout, "single")) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    bench_cfg_t cfg = {.size = 4 * CAIRN_GIB, .recordsize = 128 * 1024,
                       .compress = CAIRN_COMPRESS_OFF, .checksum = CAIRN_CHECKSUM_FLETCHER4,
                       .nthreads = 1, .verify = true};
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},    {"record", required_argument, NULL, 'r'},
        {"compress", required_argument, NULL, 'c'}, {"checksum", required_argument, NULL, 'k'},
        {"threads", required_argument, NULL, 't'}, {"leaves", required_argument, NULL, 'n'},
        {"no-verify", no_argument, NULL, 'V'},     {"keep", no_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    int o;
    uint64_t v;
    while ((o = getopt_long(argc, argv, "s:r:c:k:t:n:h", longopts, NULL)) != -1) {
        switch (o) {
        case 's':
            if (cairn_parse_size(optarg, &cfg.size) || cfg.size < BENCH_CHUNK) usage();
            cfg.size -= cfg.size % BENCH_CHUNK;
            break;
        case 'r':
            if (cairn_parse_size(optarg, &v) || v < DMU_MIN_RECORDSIZE ||
                v > DMU_MAX_RECORDSIZE || (v & (v - 1)))
                usage();
            cfg.recordsize = (uint32_t)v;
            break;
        case 'c': if (cairn_compress_from_name(optarg, &cfg.compress)) usage(); break;
        case 'k': if (cairn_checksum_from_name(optarg, &cfg.checksum)) usage(); break;
        case 't': cfg.nthreads = (uint32_t)atoi(optarg); break;
        case 'n': cfg.nleaves = (uint32_t)atoi(optarg); break;
        case 'V': cfg.verify = false; break;
        case 'K': cfg.keep = true; break;
        default: usage();
        }
    }
    if (argc - optind != 3) usage();
    cfg.layout = argv[optind];
    cfg.dir = argv[optind + 1];
    if (cairn_parse_size(argv[optind + 2], &cfg.leaf_size)) usage();
    if (!cfg.nleaves) cfg.nleaves = default_leaves(cfg.layout);
    if (!cfg.nleaves || cfg.nleaves > BENCH_MAX_LEAVES || cfg.nthreads < 1 || cfg.nthreads > 64)
        usage();

    uint32_t nparity = 0;
    vdev_type_t top_type = VDEV_TYPE_LEAF;
    if (!strcmp(cfg.layout, "mirror")) top_type = VDEV_TYPE_MIRROR;
    else if (!strncmp(cfg.layout, "raidz", 5)) {
        top_type = VDEV_TYPE_RAIDZ;
        nparity = (uint32_t)atoi(cfg.layout + 5);
    } else if (strcmp(cfg.layout, "single") != 0 || cfg.nleaves != 1) usage();

    /* ---- leaf files and the pool ---- */
    static char paths[BENCH_MAX_LEAVES][600];
    spa_vdev_spec_t leaves[BENCH_MAX_LEAVES];
    memset(leaves, 0, sizeof leaves);
    mkdir(cfg.dir, 0755);
    for (uint32_t i = 0; i < cfg.nleaves; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/cairn-bench-%u-leaf%u", cfg.dir,
                 (unsigned)getpid(), i);
        int fd = open(paths[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)cfg.leaf_size) != 0) {
            fprintf(stderr, "%s: %s\n", paths[i], strerror(errno));
            return 1;
        }
        close(fd);
        leaves[i] = (spa_vdev_spec_t){.type = VDEV_TYPE_LEAF, .path = paths[i]};
    }
    spa_vdev_spec_t top = {.type = top_type, .nparity = nparity, .nchildren = cfg.nleaves,
                           .children = leaves};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1,
                            .children = top_type == VDEV_TYPE_LEAF ? leaves : &top};
    char name[64], err[256] = "";
    snprintf(name, sizeof name, "bench%u", (unsigned)getpid());

    dmu_init();
    spa_t *spa = NULL;
    spa_create_opts_t copts = {0};
    int e = spa_create(name, &root, &copts, &spa, err, sizeof err);
    if (e) {
        fprintf(stderr, "spa_create: %s\n", err);
        return 1;
    }
    int odirect = leaf_uses_odirect(paths[0]);

    bench_run_t run = {.cfg = &cfg};
    for (int i = 0; i < BENCH_NBUFS; i++) {
        run.bufs[i] = cairn_alloc_aligned(BENCH_CHUNK);
        fill_semi_compressible(run.bufs[i], BENCH_CHUNK, 0xBE7C4 + (uint64_t)i);
    }
    if ((e = dmu_objset_create(spa, "bench", NULL)) || (e = dmu_objset_open(spa, "bench", &run.os))) {
        fprintf(stderr, "objset: %s\n", strerror(-e));
        return 1;
    }
    dmu_object_props_t props = {.recordsize = cfg.recordsize, .compress = cfg.compress,
                                .checksum = cfg.checksum, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(run.os);
    e = dmu_object_alloc(run.os, &props, &run.obj, tx);
    dmu_tx_commit(tx);
    if (e || (e = dmu_objset_sync(run.os))) {
        fprintf(stderr, "object alloc/sync: %s\n", strerror(-e));
        return 1;
    }

    /* ---- write ---- */
    leaf_sum_t w0 = leaf_totals(spa);
    double c0 = cpu_seconds();
    uint64_t t0 = cairn_now_ns();
    e = run_threads(&run, writer_main);
    uint64_t t_written = cairn_now_ns();
    if (!e) e = dmu_objset_sync(run.os);
    uint64_t t1 = cairn_now_ns();
    double c1 = cpu_seconds();
    leaf_sum_t w1 = leaf_totals(spa);
    if (e) {
        fprintf(stderr, "write phase failed: %s\n", strerror(-e));
        return 1;
    }
    dmu_object_info_t info;
    uint64_t used = 0;
    if (dmu_object_info(run.os, run.obj, &info) == 0) used = info.used_bytes;
    spa_space_t space;
    spa_get_space(spa, &space);

    /* ---- cold read: export, drop caches, import ---- */
    dmu_objset_close(run.os);
    run.os = NULL;
    if ((e = spa_export(spa))) {
        fprintf(stderr, "spa_export: %s\n", strerror(-e));
        return 1;
    }
    drop_page_cache(paths, cfg.nleaves);
    const char *ipaths[BENCH_MAX_LEAVES];
    for (uint32_t i = 0; i < cfg.nleaves; i++) ipaths[i] = paths[i];
    if ((e = spa_import(name, ipaths, cfg.nleaves, 0, &spa, err, sizeof err)) ||
        (e = dmu_objset_open(spa, "bench", &run.os))) {
        fprintf(stderr, "re-import: %s %s\n", err, strerror(-e));
        return 1;
    }
    leaf_sum_t r0 = leaf_totals(spa);
    double c2 = cpu_seconds();
    uint64_t t2 = cairn_now_ns();
    e = run_threads(&run, reader_main);
    uint64_t t3 = cairn_now_ns();
    double c3 = cpu_seconds();
    leaf_sum_t r1 = leaf_totals(spa);
    if (e) {
        fprintf(stderr, "read phase failed: %s\n", strerror(-e));
        return 1;
    }

    /* ---- report ---- */
    double gib = (double)cfg.size / (double)CAIRN_GIB;
    double mb = (double)cfg.size / 1e6;
    double wsec = (double)(t1 - t0) / 1e9, rsec = (double)(t3 - t2) / 1e9;
    double wcpu = c1 - c0, rcpu = c3 - c2;
    uint64_t phys_w = w1.write_bytes - w0.write_bytes;
    uint64_t phys_r = r1.read_bytes - r0.read_bytes;
    const char *cname = cairn_compress_name(cfg.compress);
    printf("pool %s (%u leaves of %llu MiB, leaf O_DIRECT: %s) record %uK compress %s "
           "checksum %s threads %u, %.2f GiB\n",
           cfg.layout, cfg.nleaves, (unsigned long long)(cfg.leaf_size / CAIRN_MIB),
           odirect == 1 ? "yes" : odirect == 0 ? "no (page cache dropped before reads)" : "?",
           cfg.recordsize / 1024, cname, cairn_checksum_name(cfg.checksum), cfg.nthreads, gib);
    printf("  write: %8.1f MB/s  (%.2f s, of which final sync %.2f s)  CPU %.2f s/GiB, "
           "%.2f cores busy\n",
           mb / wsec, wsec, (double)(t1 - t_written) / 1e9, wcpu / gib, wcpu / wsec);
    printf("  read:  %8.1f MB/s  (%.2f s)  CPU %.2f s/GiB, %.2f cores busy%s\n", mb / rsec, rsec,
           rcpu / gib, rcpu / rsec,
           run.mismatches ? "  DATA MISMATCH" : cfg.verify ? ", data verified" : "");
    printf("  leaves took %.1f MB written (%.3f x logical; %llu writes, avg %.0f KiB), "
           "object uses %.1f MB, pool alloc %.1f MB; read %.1f MB from leaves\n",
           (double)phys_w / 1e6, (double)phys_w / (double)cfg.size,
           (unsigned long long)(w1.writes - w0.writes),
           w1.writes > w0.writes ? (double)phys_w / 1024.0 / (double)(w1.writes - w0.writes) : 0,
           (double)used / 1e6, (double)space.alloc / 1e6, (double)phys_r / 1e6);
    printf("RESULT layout=%s leaves=%u record=%u compress=%s threads=%u size=%llu "
           "write_mbps=%.1f read_mbps=%.1f write_cpu_per_gib=%.3f read_cpu_per_gib=%.3f "
           "write_cores=%.2f read_cores=%.2f phys_write_bytes=%llu phys_ratio=%.4f "
           "odirect=%d mismatches=%llu\n",
           cfg.layout, cfg.nleaves, cfg.recordsize, cname, cfg.nthreads,
           (unsigned long long)cfg.size, mb / wsec, mb / rsec, wcpu / gib, rcpu / gib,
           wcpu / wsec, rcpu / rsec, (unsigned long long)phys_w,
           (double)phys_w / (double)cfg.size, odirect,
           (unsigned long long)atomic_load(&run.mismatches));
    fflush(stdout);

    dmu_objset_close(run.os);
    if (cfg.keep) {
        spa_export(spa);
    } else {
        spa_destroy(spa);
        for (uint32_t i = 0; i < cfg.nleaves; i++) unlink(paths[i]);
    }
    for (int i = 0; i < BENCH_NBUFS; i++) free(run.bufs[i]);
    return run.mismatches ? 3 : 0;
}
