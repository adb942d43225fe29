/*
 * ZAP directory-style benchmark: one ZAP grown to 1M entries ("file-%08d.dat"
 * -> u64). At 10k, 100k and 1M entries it reports the insert rate over the
 * last tenth of the inserts and the rate of 100k random lookups, for
 * transactions of 1000 operations and of 1 operation (--tx1).
 * Usage: bench_zap_dir [DIR] [--tx1] [--n N] [--cache MiB]   (DIR defaults to /tmp)
 */
#include <cairn/dmu.h>
#include <cairn/util.h>
#include <cairn/zap.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ename(uint64_t i, char *buf, size_t cap) { snprintf(buf, cap, "file-%08llu.dat", (unsigned long long)i); }

static void die(const char *what, int e)
{
    fprintf(stderr, "%s: %d\n", what, e);
    exit(1);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    uint64_t per_tx = 1000, N = 1000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tx1")) per_tx = 1;
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) N = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
            zap_cache_set_limit(strtoull(argv[++i], NULL, 10) * CAIRN_MIB);
        else dir = argv[i];
    }
    char path[512], name[64];
    snprintf(path, sizeof(path), "%s/bench_zap_dir.%d", dir, (int)getpid());
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 4096ull * CAIRN_MIB)) die("create file", -1);
    close(fd);
    snprintf(name, sizeof(name), "zbench%d", (int)getpid());
    dmu_init();
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_create_opts_t opts = {0};
    char err[256] = "";
    spa_t *spa;
    objset_t *os;
    int e = spa_create(name, &root, &opts, &spa, err, sizeof(err));
    if (e) die(err, e);
    if ((e = dmu_objset_create(spa, "fs", NULL)) || (e = dmu_objset_open(spa, "fs", &os))) die("objset", e);
    uint64_t z;
    dmu_tx_t *tx = dmu_tx_begin(os);
    if ((e = zap_create(os, &z, tx))) die("zap_create", e);
    dmu_tx_commit(tx);

    uint64_t marks[] = {10000, 100000, 1000000, 10000000};
    uint64_t done = 0;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1);
    char nm[64];
    printf("entries    insert/s   lookup/s   (txs of %llu ops)\n", (unsigned long long)per_tx);
    for (int m = 0; m < 4 && marks[m] <= N; m++) {
        uint64_t from = marks[m] - marks[m] / 10, tstart = 0;
        tx = NULL;
        for (; done < marks[m]; done++) {
            if (done == from) tstart = cairn_now_ns();
            if (done % per_tx == 0) {
                if (tx) dmu_tx_commit(tx);
                tx = dmu_tx_begin(os);
            }
            ename(done, nm, sizeof(nm));
            if ((e = zap_add_u64(os, z, nm, done, tx))) die("zap_add", e);
        }
        dmu_tx_commit(tx);
        double ins = (double)(marks[m] / 10) * 1e9 / (double)(cairn_now_ns() - tstart);
        const uint64_t NL = 100000;
        uint64_t l0 = cairn_now_ns(), v;
        for (uint64_t k = 0; k < NL; k++) {
            uint64_t i = cairn_rng_below(&rng, done);
            ename(i, nm, sizeof(nm));
            if ((e = zap_lookup_u64(os, z, nm, &v)) || v != i) die("zap_lookup", e);
        }
        double look = (double)NL * 1e9 / (double)(cairn_now_ns() - l0);
        zap_cache_stats_t cs;
        zap_cache_get_stats(&cs);
        printf("%8llu %10.0f %10.0f   (cache %llu MiB, %llu misses)\n", (unsigned long long)marks[m], ins,
               look, (unsigned long long)(cs.bytes >> 20), (unsigned long long)cs.misses);
        fflush(stdout);
    }
    zap_objset_evict(os);
    dmu_objset_close(os);
    spa_destroy(spa);
    unlink(path);
    return 0;
}
