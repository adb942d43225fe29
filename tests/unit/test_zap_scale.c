/*
 * ZAP at scale: 200k entries in one object (1M with CAIRN_TEST_LONG set):
 * every entry verified after inserting, after removing half, after
 * export/import (read back from disk), and by a full cursor walk.
 *
 * Near-constant cost is shown by counting, not timing (zap_thread_stats):
 * at 10k, 100k (and 1M) entries every lookup, hit or miss, looks at exactly
 * one block and reads at most one; inserts cost the same number of blocks on
 * average at 100k (1M) as at 10k - about two, the leaf and the header, with
 * splits and table doublings amortised; and after an import, with nothing
 * cached, a lookup reads one block. Rates are printed, never asserted.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dmu.h>
#include <cairn/util.h>
#include <cairn/zap.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pool_fixture {
    char dir[512];
    char path[600];
    spa_t *spa;
    objset_t *os;
    char name[64];
} pool_fixture_t;

static void fixture_make(pool_fixture_t *f, const char *tag)
{
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", base);
    assert_int_equal(system(cmd), 0);
    snprintf(f->dir, sizeof(f->dir), "%s/%s.XXXXXX", base, tag);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/leaf0", f->dir);
    int fd = open(f->path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 2048ull * CAIRN_MIB), 0);
    close(fd);
    snprintf(f->name, sizeof(f->name), "zaps%u", (unsigned)getpid());
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = f->path};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    spa_create_opts_t opts = {0};
    char err[256] = "";
    int e = spa_create(f->name, &root, &opts, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(dmu_objset_create(f->spa, "fs", NULL), 0);
    assert_int_equal(dmu_objset_open(f->spa, "fs", &f->os), 0);
}

/* Closes everything (dropping the ZAP cache of the objset), exports, imports, reopens. */
static void fixture_reimport(pool_fixture_t *f)
{
    assert_int_equal(dmu_objset_sync(f->os), 0);
    zap_objset_evict(f->os);
    dmu_objset_close(f->os);
    assert_int_equal(spa_export(f->spa), 0);
    const char *paths[] = {f->path};
    char err[256] = "";
    int e = spa_import(f->name, paths, 1, 0, &f->spa, err, sizeof(err));
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(dmu_objset_open(f->spa, "fs", &f->os), 0);
}

static void fixture_done(pool_fixture_t *f)
{
    zap_objset_evict(f->os);
    dmu_objset_close(f->os);
    assert_int_equal(spa_export(f->spa), 0);
    const char *paths[] = {f->path};
    spa_check_report_t rep;
    char err[256] = "";
    int e = spa_check(f->name, paths, 1, &rep, err, sizeof(err));
    if (e) fprintf(stderr, "spa_check: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(rep.leaked_bytes, 0);
    assert_int_equal(rep.double_bytes, 0);
    unlink(f->path);
    rmdir(f->dir);
}

static void ename(uint64_t i, char *buf, size_t cap) { snprintf(buf, cap, "file-%08llu.dat", (unsigned long long)i); }

static uint64_t val_of(uint64_t i) { return i * 0x9E3779B97F4A7C15ULL + 1; }

static void check(objset_t *os, uint64_t obj, uint64_t i, bool present)
{
    char nm[64];
    ename(i, nm, sizeof(nm));
    uint64_t v = 0;
    int e = zap_lookup_u64(os, obj, nm, &v);
    if (present) {
        if (e || v != val_of(i)) fprintf(stderr, "%s: err %d value %llx\n", nm, e, (unsigned long long)v);
        assert_int_equal(e, 0);
        assert_true(v == val_of(i));
    } else {
        assert_int_equal(e, -ENOENT);
    }
}

typedef struct cost {
    uint64_t ops, blocks, reads, writes, max_blocks, max_reads;
} cost_t;

static void cost_add(cost_t *c, const zap_op_stats_t *a, const zap_op_stats_t *b)
{
    uint64_t bl = b->blocks - a->blocks, rd = b->reads - a->reads;
    c->ops++;
    c->blocks += bl;
    c->reads += rd;
    c->writes += b->writes - a->writes;
    if (bl > c->max_blocks) c->max_blocks = bl;
    if (rd > c->max_reads) c->max_reads = rd;
}

/* Looks up k random present and k absent names, one cost each. */
static void lookup_costs(objset_t *os, uint64_t z, uint64_t n, uint64_t k, cairn_rng_t *rng,
                         cost_t *c)
{
    for (uint64_t j = 0; j < 2 * k; j++) {
        uint64_t i = j % 2 ? n + cairn_rng_below(rng, n) : cairn_rng_below(rng, n);
        zap_op_stats_t a, b;
        zap_thread_stats(&a);
        check(os, z, i, j % 2 == 0 && (i < n));
        zap_thread_stats(&b);
        cost_add(c, &a, &b);
    }
}

static void run_scale(uint64_t N)
{
    pool_fixture_t f;
    fixture_make(&f, "zapscale");
    uint64_t z = 0;
    dmu_tx_t *tx = dmu_tx_begin(f.os);
    assert_int_equal(zap_create(f.os, &z, tx), 0);
    dmu_tx_commit(tx);

    uint64_t marks[] = {10000, 100000, 1000000};
    uint64_t done = 0, t0 = cairn_now_ns();
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 5);
    char nm[64];
    double first_insert_cost = 0;
    for (int m = 0; m < 3 && marks[m] <= N; m++) {
        /* Insert up to the mark; count and time the last tenth. */
        uint64_t tstart = 0, from = marks[m] - marks[m] / 10;
        cost_t ic = {0};
        tx = NULL;
        for (; done < marks[m]; done++) {
            if (done == from) tstart = cairn_now_ns();
            if (done % 1000 == 0) {
                if (tx) dmu_tx_commit(tx);
                tx = dmu_tx_begin(f.os);
            }
            ename(done, nm, sizeof(nm));
            zap_op_stats_t a, b;
            zap_thread_stats(&a);
            assert_int_equal(zap_add_u64(f.os, z, nm, val_of(done), tx), 0);
            zap_thread_stats(&b);
            if (done >= from) cost_add(&ic, &a, &b);
        }
        dmu_tx_commit(tx);
        double ins = (double)(marks[m] / 10) * 1e9 / (double)(cairn_now_ns() - tstart);
        uint64_t l0 = cairn_now_ns();
        cost_t lc = {0};
        lookup_costs(f.os, z, done, 10000, &rng, &lc);
        double look = (double)lc.ops * 1e9 / (double)(cairn_now_ns() - l0);
        zap_cache_stats_t cs;
        zap_cache_get_stats(&cs);
        double ib = (double)ic.blocks / (double)ic.ops, iw = (double)ic.writes / (double)ic.ops;
        fprintf(stderr, "zap scale: %8llu entries: insert %.0f/s, lookup %.0f/s (cache %llu MiB, %llu misses)\n"
                        "           blocks per insert %.3f (at most %llu), writes %.3f; "
                        "per lookup %.3f (at most %llu), reads at most %llu\n",
                (unsigned long long)marks[m], ins, look, (unsigned long long)(cs.bytes >> 20),
                (unsigned long long)cs.misses, ib, (unsigned long long)ic.max_blocks, iw,
                (double)lc.blocks / (double)lc.ops, (unsigned long long)lc.max_blocks,
                (unsigned long long)lc.max_reads);
        /* A lookup is one pointer-table index and one leaf, whatever the size. */
        assert_int_equal(lc.blocks, lc.ops);
        assert_int_equal(lc.max_blocks, 1);
        assert_true(lc.max_reads <= 1);
        assert_int_equal(lc.writes, 0);
        /* An insert touches the leaf and the header; splits and doublings,
         * amortised, add little and do not grow with the size. */
        assert_true(ib <= 2.5 && iw <= 2.5);
        if (m == 0) first_insert_cost = ib;
        else assert_true(ib <= first_insert_cost + 0.25);
    }
    /* Fill to N if it is not a mark. */
    tx = dmu_tx_begin(f.os);
    for (; done < N; done++) {
        ename(done, nm, sizeof(nm));
        assert_int_equal(zap_add_u64(f.os, z, nm, val_of(done), tx), 0);
    }
    dmu_tx_commit(tx);
    fprintf(stderr, "zap scale: %llu inserts and lookups took %.1f s\n", (unsigned long long)N,
            (double)(cairn_now_ns() - t0) / 1e9);

    for (uint64_t i = 0; i < N; i++) check(f.os, z, i, true);
    uint64_t n = 0;
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, N);
    /* Remove every other entry. */
    tx = NULL;
    for (uint64_t i = 0; i < N; i += 2) {
        if (i % 2000 == 0) {
            if (tx) dmu_tx_commit(tx);
            tx = dmu_tx_begin(f.os);
        }
        ename(i, nm, sizeof(nm));
        assert_int_equal(zap_remove(f.os, z, nm, tx), 0);
    }
    dmu_tx_commit(tx);
    for (uint64_t i = 0; i < N; i++) check(f.os, z, i, i % 2);
    fixture_reimport(&f);
    /* Nothing cached: the first lookup loads the header and the pointer
     * table, every later one reads one leaf at most. */
    {
        zap_op_stats_t a, b;
        zap_thread_stats(&a);
        check(f.os, z, 1, true);
        zap_thread_stats(&b);
        uint64_t first = b.reads - a.reads;
        cost_t cc = {0};
        for (uint64_t k = 0; k < 10000; k++) {
            uint64_t i = cairn_rng_below(&rng, N) | 1;
            zap_thread_stats(&a);
            check(f.os, z, i, true);
            zap_thread_stats(&b);
            cost_add(&cc, &a, &b);
        }
        fprintf(stderr, "zap scale: after import: first lookup read %llu blocks, then %.3f per "
                        "lookup (at most %llu)\n",
                (unsigned long long)first, (double)cc.reads / (double)cc.ops,
                (unsigned long long)cc.max_reads);
        assert_true(first >= 2);          /* header, leaf (and table blocks) */
        assert_int_equal(cc.max_blocks, 1);
        assert_int_equal(cc.max_reads, 1);
    }
    for (uint64_t i = 0; i < N; i++) check(f.os, z, i, i % 2);
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, N / 2);

    /* A full walk returns each survivor exactly once, in increasing cookie order. */
    uint8_t *seen = cairn_zalloc(N);
    static zap_entry_t e;
    zap_cursor_t zc;
    zap_cursor_init(&zc, f.os, z, 0);
    uint64_t total = 0, last = 0;
    int r;
    while ((r = zap_cursor_next(&zc, &e)) == 1) {
        unsigned long long i;
        assert_int_equal(sscanf(e.name, "file-%llu.dat", &i), 1);
        assert_true(i < N && i % 2 == 1);
        assert_int_equal(seen[i], 0);
        assert_true(e.next_cookie > last);
        last = e.next_cookie;
        uint64_t v;
        assert_int_equal(e.value_len, 8);
        memcpy(&v, e.value, 8);
        assert_true(v == val_of(i));
        seen[i] = 1;
        total++;
    }
    assert_int_equal(r, 0);
    assert_int_equal(total, N / 2);
    free(seen);
    dmu_object_info_t info;
    assert_int_equal(dmu_object_info(f.os, z, &info), 0);
    fprintf(stderr, "zap scale: object spans %llu MiB of records\n",
            (unsigned long long)(info.max_offset >> 20));
    tx = dmu_tx_begin(f.os);
    assert_int_equal(zap_destroy(f.os, z, tx), 0);
    dmu_tx_commit(tx);
    fixture_done(&f);
}

static void test_scale(void **state)
{
    (void)state;
    /* 1M takes ~17 s in a release build and ~45 s under ASan: long mode only. */
    const char *lng = getenv("CAIRN_TEST_LONG");
    run_scale(lng && *lng && strcmp(lng, "0") ? 1000000 : 200000);
}

int main(void)
{
    dmu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
