/*
 * Sequential reads after random rewrites (issue 27 goal 4): how much of a
 * volume's sequential read rate copy-on-write fragmentation takes away.
 *
 * A volume (volblocksize 8K) in a pool on one file is written in sequence,
 * then read in sequence; then every 8 KiB block's worth of random 8 KiB
 * rewrites is done (100%: as many rewrites as the volume has blocks, at random
 * offsets, so some blocks are hit twice and some not at all), and the volume
 * is read in sequence again; then another 100% (200% in all) and a last read.
 * Each sequential pass reads the whole volume with 1 MiB zvol_read calls from
 * one thread (as dd or a table scan would; the DMU's read-ahead streams
 * behind it) after the ARC has been emptied of the pool's blocks and the leaf
 * file's pages dropped from the page cache (POSIX_FADV_DONTNEED), so every
 * block comes from the disk.
 *
 * Printed per pass: MB/s, and from the leaf's counters the disk reads and
 * their mean size (bytes read / read operations: the number that says how
 * well logical neighbours lie together on disk, and that does not depend on
 * how busy the machine is). Printed per rewrite phase: its IOPS (random write
 * cost). With -D, after the 200% rewrites the volume is defragmented
 * (dmu_defrag_object, defaults; its time and the records it rewrote printed),
 * read in sequence again, and rewritten randomly once more (its IOPS: what the
 * defragmented layout costs random writes).
 * This is a benchmark, never a test.
 *
 * -a sets arc_max (default 16 MiB; frag-seqread.sh passes 256).
 * usage: bench_zvol_fragseq [-d DIR] [-s VOLSIZE_MIB] [-q THREADS] [-a ARC_MIB] [-D]
 */
#include <cairn/arc.h>
#include <cairn/dmu.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/zvol.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 8192u
#define MIB (1024ull * 1024)

typedef struct bench {
    zvol_t *zv;
    spa_t *spa;
    vdev_t *leaf;
    const char *leaf_path;
    uint64_t size;
} bench_t;

static void die(const char *what, int err)
{
    fprintf(stderr, "%s: error %d\n", what, err);
    exit(1);
}

static vdev_t *first_leaf(vdev_t *v)
{
    while (v->nchildren) v = v->children[0];
    return v;
}

/* Nothing of the pool left in memory: the next read of any block is a disk read. */
static void drop_caches(bench_t *b)
{
    arc_purge_pool(spa_guid(b->spa));
    int fd = open(b->leaf_path, O_RDONLY);
    if (fd >= 0) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

typedef struct seq_result {
    double mbs, mean_read_kib;
    uint64_t reads;
} seq_result_t;

static seq_result_t seq_read(bench_t *b)
{
    drop_caches(b);
    uint8_t *buf = cairn_alloc_aligned(MIB);
    uint64_t r0 = atomic_load(&b->leaf->stats.reads), rb0 = atomic_load(&b->leaf->stats.read_bytes);
    uint64_t t0 = cairn_now_ns();
    for (uint64_t off = 0; off < b->size; off += MIB) {
        int e = zvol_read(b->zv, off, MIB, buf);
        if (e) die("sequential read", e);
    }
    double el = (cairn_now_ns() - t0) / 1e9;
    uint64_t reads = atomic_load(&b->leaf->stats.reads) - r0;
    uint64_t bytes = atomic_load(&b->leaf->stats.read_bytes) - rb0;
    free(buf);
    return (seq_result_t){b->size / el / 1e6, reads ? bytes / 1024.0 / reads : 0, reads};
}

typedef struct rewrite_run {
    bench_t *b;
    uint64_t per_thread;
    int id;
    _Atomic int *err;
} rewrite_run_t;

static void *rewrite_worker(void *p)
{
    rewrite_run_t *r = p;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 991 + (uint64_t)r->id * 7919);
    uint8_t *buf = cairn_alloc_aligned(BLOCK);
    for (unsigned i = 0; i < BLOCK; i++) buf[i] = (uint8_t)cairn_rng_next(&rng);
    uint64_t nblk = r->b->size / BLOCK;
    for (uint64_t n = 0; n < r->per_thread && !atomic_load(r->err); n++) {
        memcpy(buf, &n, sizeof(n)); /* no two writes identical */
        int e = zvol_write(r->b->zv, cairn_rng_below(&rng, nblk) * BLOCK, BLOCK, buf, 0);
        if (e) atomic_store(r->err, e);
    }
    free(buf);
    return NULL;
}

/* As many random 8 KiB rewrites as the volume has blocks, on nthreads threads;
 * returns IOPS including the final flush. */
static double random_rewrite(bench_t *b, int nthreads)
{
    _Atomic int err = 0;
    pthread_t th[nthreads];
    rewrite_run_t runs[nthreads];
    uint64_t per = b->size / BLOCK / (uint64_t)nthreads;
    uint64_t t0 = cairn_now_ns();
    for (int i = 0; i < nthreads; i++) {
        runs[i] = (rewrite_run_t){b, per, i, &err};
        pthread_create(&th[i], NULL, rewrite_worker, &runs[i]);
    }
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    int e = zvol_flush(b->zv);
    if (err || e) die("random rewrite", err ? err : e);
    return (double)per * nthreads / ((cairn_now_ns() - t0) / 1e9);
}

static void fill(bench_t *b)
{
    uint8_t *buf = cairn_alloc_aligned(MIB);
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 5);
    for (uint64_t off = 0; off < b->size; off += MIB) {
        for (size_t i = 0; i < MIB; i += 8) {
            uint64_t x = cairn_rng_next(&rng);
            memcpy(buf + i, &x, 8);
        }
        int e = zvol_write(b->zv, off, MIB, buf, 0);
        if (e) die("fill", e);
    }
    int e = zvol_flush(b->zv);
    if (e) die("fill flush", e);
    free(buf);
}

static void report(const char *label, seq_result_t r, const seq_result_t *base)
{
    printf("%-22s %9.1f MB/s %10llu disk reads  mean %7.1f KiB", label, r.mbs,
           (unsigned long long)r.reads, r.mean_read_kib);
    if (base)
        printf("   loss x%.2f (rate)  x%.2f (read size)", base->mbs / r.mbs,
               base->mean_read_kib / r.mean_read_kib);
    printf("\n");
    printf("RESULT pass=%s seq_mbs=%.1f disk_reads=%llu mean_read_kib=%.1f\n", label, r.mbs,
           (unsigned long long)r.reads, r.mean_read_kib);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *dir = ".";
    uint64_t vol_mib = 2048;
    int nthreads = 8;
    bool defrag = false;
    uint64_t arc_mib = 16;
    int c;
    while ((c = getopt(argc, argv, "d:s:q:a:D")) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 's': vol_mib = strtoull(optarg, NULL, 0); break;
        case 'q': nthreads = atoi(optarg); break;
        case 'D': defrag = true; break;
        case 'a': arc_mib = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: %s [-d DIR] [-s VOLSIZE_MIB] [-q THREADS] [-a ARC_MIB] [-D]\n",
                    argv[0]);
            return 2;
        }
    }
    if (vol_mib < 16 || nthreads < 1 || nthreads > 256) {
        fprintf(stderr, "volume size must be at least 16 MiB, threads 1..256\n");
        return 2;
    }
    bench_t b = {.size = vol_mib * MIB};
    char leaf[4096];
    snprintf(leaf, sizeof(leaf), "%s/bench_fragseq_leaf.%d", dir, (int)getpid());
    b.leaf_path = leaf;
    /* room for the volume, its rewrites and their deferred frees */
    int lfd = open(leaf, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (lfd < 0 || ftruncate(lfd, (off_t)(b.size * 3 + 512 * MIB))) {
        perror(leaf);
        return 1;
    }
    close(lfd);
    dmu_init();
    arc_set_max(arc_mib * MIB); /* purged before each pass: reads come from the disk */
    spa_vdev_spec_t lspec = {.type = VDEV_TYPE_LEAF, .path = leaf};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &lspec};
    spa_create_opts_t copts = {0};
    char err[256] = "";
    char pname[64];
    snprintf(pname, sizeof(pname), "benchfrag%d", (int)getpid());
    if (spa_create(pname, &root, &copts, &b.spa, err, sizeof(err))) {
        fprintf(stderr, "spa_create: %s\n", err);
        return 1;
    }
    b.leaf = first_leaf(spa_root_vdev(b.spa));
    objset_t *os;
    if (dmu_objset_create(b.spa, "vol", NULL) || dmu_objset_open(b.spa, "vol", &os))
        die("objset", -EIO);
    zvol_objset_opts_t zo = {.volsize = b.size, .volblocksize = BLOCK, .block_size = 4096};
    if (zvol_open_objset(os, &zo, &b.zv)) die("zvol_open_objset", -EIO);

    printf("volume %llu MiB, volblocksize 8K, arc_max %llu MiB, %d rewrite threads, dir %s\n",
           (unsigned long long)vol_mib, (unsigned long long)arc_mib, nthreads, dir);
    fill(&b);
    seq_result_t base = seq_read(&b);
    report("sequential-written", base, NULL);
    for (int pct = 100; pct <= 200; pct += 100) {
        double iops = random_rewrite(&b, nthreads);
        printf("random-rewrite-%d%%     %9.0f IOPS (8 KiB, %d threads, incl. flush)\n", pct, iops,
               nthreads);
        printf("RESULT pass=rewrite-%d rewrite_iops=%.0f\n", pct, iops);
        char label[32];
        snprintf(label, sizeof(label), "after-%d%%-rewrite", pct);
        report(label, seq_read(&b), &base);
    }
    if (defrag) {
        dmu_defrag_opts_t dopts = {0};
        dmu_defrag_stats_t st = {0};
        uint64_t t0 = cairn_now_ns();
        int e = dmu_defrag_object(os, ZVOL_OBJECT, &dopts, &st);
        if (e) die("defrag", e);
        e = zvol_flush(b.zv);
        if (e) die("defrag flush", e);
        double el = (cairn_now_ns() - t0) / 1e9;
        printf("defrag                 %9.1f s   %llu of %llu windows rewritten, %llu MiB, %.1f "
               "MB/s\n",
               el, (unsigned long long)st.windows_rewritten, (unsigned long long)st.windows,
               (unsigned long long)(st.bytes / MIB), st.bytes / el / 1e6);
        printf("RESULT pass=defrag seconds=%.1f windows=%llu rewritten=%llu bytes=%llu\n", el,
               (unsigned long long)st.windows, (unsigned long long)st.windows_rewritten,
               (unsigned long long)st.bytes);
        report("after-defrag", seq_read(&b), &base);
        double iops = random_rewrite(&b, nthreads);
        printf("random-rewrite-300%%     %9.0f IOPS (8 KiB, %d threads, incl. flush)\n", iops,
               nthreads);
        printf("RESULT pass=rewrite-300 rewrite_iops=%.0f\n", iops);
    }
    zvol_close(b.zv);
    dmu_objset_close(os);
    spa_destroy(b.spa);
    unlink(leaf);
    return 0;
}
