/*
 * ZAP semantics on a real pool over a sparse temp file: add/lookup/update/
 * remove/count and their errors, values of every size 0..8192, names with
 * every byte value, micro -> fat growth, persistence across export/import
 * (read back from disk, not the ZAP cache), cursor iteration (every entry
 * exactly once, stable while entries come and go), forced hash collisions,
 * a tiny cache limit, destroy, and threads on one and on different ZAPs.
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
#include <pthread.h>
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
    assert_int_equal(ftruncate(fd, 512 * CAIRN_MIB), 0);
    close(fd);
    snprintf(f->name, sizeof(f->name), "zapb%u", (unsigned)getpid());
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

static uint64_t new_zap(objset_t *os)
{
    uint64_t obj = 0;
    dmu_tx_t *tx = dmu_tx_begin(os);
    assert_int_equal(zap_create(os, &obj, tx), 0);
    dmu_tx_commit(tx);
    assert_true(obj > 0);
    return obj;
}

/* Deterministic value for entry i: length and bytes. */
static uint32_t val_len(uint64_t i) { return (uint32_t)((i * 2654435761u) % 64); }
static void val_fill(uint64_t i, uint8_t *b, uint32_t len)
{
    for (uint32_t k = 0; k < len; k++) b[k] = (uint8_t)(i * 31 + k * 7 + 1);
}
static void ename(uint64_t i, char *buf, size_t cap) { snprintf(buf, cap, "entry-%llu", (unsigned long long)i); }

static void add_range(objset_t *os, uint64_t obj, uint64_t lo, uint64_t hi)
{
    uint8_t v[64];
    char nm[64];
    dmu_tx_t *tx = NULL;
    for (uint64_t i = lo; i < hi; i++) {
        if ((i - lo) % 500 == 0) {
            if (tx) dmu_tx_commit(tx);
            tx = dmu_tx_begin(os);
        }
        ename(i, nm, sizeof(nm));
        val_fill(i, v, val_len(i));
        assert_int_equal(zap_add(os, obj, nm, v, val_len(i), tx), 0);
    }
    if (tx) dmu_tx_commit(tx);
}

static void check_entry(objset_t *os, uint64_t obj, uint64_t i, bool present)
{
    uint8_t v[64], want[64];
    char nm[64];
    uint32_t len = 999;
    ename(i, nm, sizeof(nm));
    int e = zap_lookup(os, obj, nm, v, sizeof(v), &len);
    if (!present) {
        assert_int_equal(e, -ENOENT);
        return;
    }
    if (e) fprintf(stderr, "lookup %s: %d\n", nm, e);
    assert_int_equal(e, 0);
    assert_int_equal(len, val_len(i));
    val_fill(i, want, len);
    assert_memory_equal(v, want, len);
}

static void test_basic_ops(void **state)
{
    (void)state;
    pool_fixture_t f;
    fixture_make(&f, "zapbasic");
    uint64_t z = new_zap(f.os);
    uint64_t n = 99;
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, 0);

    dmu_tx_t *tx = dmu_tx_begin(f.os);
    assert_int_equal(zap_add(f.os, z, "alpha", "one", 3, tx), 0);
    assert_int_equal(zap_add(f.os, z, "alpha", "two", 3, tx), -EEXIST);
    assert_int_equal(zap_add_u64(f.os, z, "beta", 42, tx), 0);
    assert_int_equal(zap_add(f.os, z, "empty", NULL, 0, tx), 0);
    char longname[ZAP_NAME_MAX + 2];
    memset(longname, 'x', sizeof(longname));
    longname[ZAP_NAME_MAX + 1] = '\0';
    assert_int_equal(zap_add(f.os, z, longname, "v", 1, tx), -ENAMETOOLONG);
    longname[ZAP_NAME_MAX] = '\0';
    assert_int_equal(zap_add(f.os, z, longname, "max", 3, tx), 0);
    static uint8_t big[ZAP_VALUE_MAX + 1];
    assert_int_equal(zap_add(f.os, z, "big", big, ZAP_VALUE_MAX + 1, tx), -E2BIG);
    assert_int_equal(zap_update(f.os, z, "big", big, ZAP_VALUE_MAX + 1, tx), -E2BIG);
    assert_int_equal(zap_add(f.os, z, "", "v", 1, tx), -EINVAL);
    assert_int_equal(zap_remove(f.os, z, "nothere", tx), -ENOENT);
    dmu_tx_commit(tx);

    char buf[16];
    uint32_t len = 0;
    assert_int_equal(zap_lookup(f.os, z, "alpha", buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "one", 3);
    /* A short buffer gets a prefix and the full length. */
    memset(buf, 0, sizeof(buf));
    assert_int_equal(zap_lookup(f.os, z, "alpha", buf, 2, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "on\0", 3);
    assert_int_equal(zap_lookup(f.os, z, "gamma", buf, sizeof(buf), &len), -ENOENT);
    assert_int_equal(zap_lookup(f.os, z, longname, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 3);
    longname[ZAP_NAME_MAX] = 'y';
    assert_int_equal(zap_lookup(f.os, z, longname, buf, sizeof(buf), &len), -ENAMETOOLONG);
    uint64_t u = 0;
    assert_int_equal(zap_lookup_u64(f.os, z, "beta", &u), 0);
    assert_int_equal(u, 42);
    assert_int_equal(zap_lookup(f.os, z, "empty", buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, 4);

    tx = dmu_tx_begin(f.os);
    assert_int_equal(zap_update(f.os, z, "alpha", "replaced", 8, tx), 0);
    assert_int_equal(zap_update_u64(f.os, z, "beta", 43, tx), 0);
    assert_int_equal(zap_update(f.os, z, "new", "n", 1, tx), 0);
    assert_int_equal(zap_remove(f.os, z, "empty", tx), 0);
    assert_int_equal(zap_remove(f.os, z, "empty", tx), -ENOENT);
    dmu_tx_commit(tx);
    assert_int_equal(zap_lookup(f.os, z, "alpha", buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 8);
    assert_memory_equal(buf, "replaced", 8);
    assert_int_equal(zap_lookup_u64(f.os, z, "beta", &u), 0);
    assert_int_equal(u, 43);
    assert_int_equal(zap_lookup(f.os, z, "empty", buf, sizeof(buf), &len), -ENOENT);
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, 4);
    /* A small ZAP stays one record. */
    dmu_object_info_t info;
    assert_int_equal(dmu_object_info(f.os, z, &info), 0);
    assert_int_equal(info.max_offset, info.props.recordsize);

    fixture_reimport(&f);
    assert_int_equal(zap_lookup(f.os, z, "alpha", buf, sizeof(buf), &len), 0);
    assert_memory_equal(buf, "replaced", 8);
    assert_int_equal(zap_lookup_u64(f.os, z, "beta", &u), 0);
    assert_int_equal(u, 43);
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, 4);

    /* Destroy frees it; later calls see no object. */
    tx = dmu_tx_begin(f.os);
    assert_int_equal(zap_destroy(f.os, z, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(zap_count(f.os, z, &n), -ENOENT);
    assert_int_equal(zap_lookup(f.os, z, "alpha", buf, sizeof(buf), &len), -ENOENT);
    /* A plain DMU object is not a ZAP. */
    dmu_object_props_t p = {.recordsize = 16384, .compress = CAIRN_COMPRESS_OFF,
                            .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    uint64_t plain;
    tx = dmu_tx_begin(f.os);
    assert_int_equal(dmu_object_alloc(f.os, &p, &plain, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(zap_count(f.os, plain, &n), -EINVAL);
    tx = dmu_tx_begin(f.os);
    assert_int_equal(dmu_object_free(f.os, plain, tx), 0);
    dmu_tx_commit(tx);
    fixture_done(&f);
}

/* Values of every size class 0..8192 and names made of every byte value 1..255. */
static void test_values_and_names(void **state)
{
    (void)state;
    pool_fixture_t f;
    fixture_make(&f, "zapvals");
    uint64_t z = new_zap(f.os);
    static uint8_t v[ZAP_VALUE_MAX], got[ZAP_VALUE_MAX];
    char nm[ZAP_NAME_MAX + 1];
    uint32_t sizes[600];
    int ns = 0;
    for (uint32_t s = 0; s <= 300; s++) sizes[ns++] = s;
    for (uint32_t s = 301; s < ZAP_VALUE_MAX; s += 61) sizes[ns++] = s;
    sizes[ns++] = ZAP_VALUE_MAX - 1;
    sizes[ns++] = ZAP_VALUE_MAX;
    dmu_tx_t *tx = dmu_tx_begin(f.os);
    for (int i = 0; i < ns; i++) {
        snprintf(nm, sizeof(nm), "v%d", i);
        for (uint32_t k = 0; k < sizes[i]; k++) v[k] = (uint8_t)(i + k * 13);
        assert_int_equal(zap_add(f.os, z, nm, v, sizes[i], tx), 0);
    }
    /* Names: every byte value alone, and 255-byte names of random bytes. */
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 77);
    for (int b = 1; b < 256; b++) {
        nm[0] = (char)b;
        nm[1] = '\0';
        assert_int_equal(zap_add(f.os, z, nm, &b, sizeof(b), tx), 0);
    }
    char rnames[50][ZAP_NAME_MAX + 1];
    for (int i = 0; i < 50; i++) {
        size_t len = 1 + cairn_rng_below(&rng, ZAP_NAME_MAX);
        if (i == 0) len = ZAP_NAME_MAX;
        for (size_t k = 0; k < len; k++) rnames[i][k] = (char)(1 + cairn_rng_below(&rng, 255));
        rnames[i][len] = '\0';
        assert_int_equal(zap_add(f.os, z, rnames[i], &i, sizeof(i), tx), 0);
    }
    dmu_tx_commit(tx);

    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ns; i++) {
            snprintf(nm, sizeof(nm), "v%d", i);
            for (uint32_t k = 0; k < sizes[i]; k++) v[k] = (uint8_t)(i + k * 13);
            uint32_t len = 0;
            assert_int_equal(zap_lookup(f.os, z, nm, got, sizeof(got), &len), 0);
            assert_int_equal(len, sizes[i]);
            if (len) assert_memory_equal(got, v, len);
        }
        for (int b = 1; b < 256; b++) {
            nm[0] = (char)b;
            nm[1] = '\0';
            int x = -1;
            uint32_t len;
            assert_int_equal(zap_lookup(f.os, z, nm, &x, sizeof(x), &len), 0);
            assert_int_equal(x, b);
        }
        for (int i = 0; i < 50; i++) {
            int x = -1;
            uint32_t len;
            assert_int_equal(zap_lookup(f.os, z, rnames[i], &x, sizeof(x), &len), 0);
            assert_int_equal(x, i);
        }
        uint64_t n;
        assert_int_equal(zap_count(f.os, z, &n), 0);
        assert_int_equal(n, (uint64_t)ns + 255 + 50);
        /* Grow every value to the maximum and back, in place. */
        if (pass == 0) {
            tx = dmu_tx_begin(f.os);
            for (int i = 0; i < 40; i++) {
                snprintf(nm, sizeof(nm), "v%d", i);
                assert_int_equal(zap_update(f.os, z, nm, got, ZAP_VALUE_MAX, tx), 0);
            }
            for (int i = 0; i < 40; i++) {
                snprintf(nm, sizeof(nm), "v%d", i);
                for (uint32_t k = 0; k < sizes[i]; k++) v[k] = (uint8_t)(i + k * 13);
                assert_int_equal(zap_update(f.os, z, nm, v, sizes[i], tx), 0);
            }
            dmu_tx_commit(tx);
            fixture_reimport(&f);
        }
    }
    fixture_done(&f);
}

/* Walks the whole ZAP; seen[i] counts entry-i. */
static void walk_all(objset_t *os, uint64_t obj, uint8_t *seen, uint64_t nmax, uint64_t *total)
{
    static zap_entry_t e;
    zap_cursor_t zc;
    zap_cursor_init(&zc, os, obj, 0);
    uint64_t last = 0;
    int r;
    *total = 0;
    while ((r = zap_cursor_next(&zc, &e)) == 1) {
        assert_true(e.next_cookie > 2);
        assert_true(e.next_cookie > last);
        last = e.next_cookie;
        unsigned long long i;
        assert_int_equal(sscanf(e.name, "entry-%llu", &i), 1);
        assert_true(i < nmax);
        assert_int_equal(e.value_len, val_len(i));
        uint8_t want[64];
        val_fill(i, want, e.value_len);
        if (e.value_len) assert_memory_equal(e.value, want, e.value_len);
        seen[i]++;
        (*total)++;
    }
    assert_int_equal(r, 0);
}

static void test_grow_remove_iterate(void **state)
{
    (void)state;
    pool_fixture_t f;
    fixture_make(&f, "zapgrow");
    uint64_t z = new_zap(f.os);
    const uint64_t N = 30000;
    add_range(f.os, z, 0, N);
    for (uint64_t i = 0; i < N; i++) check_entry(f.os, z, i, true);
    dmu_tx_t *tx = dmu_tx_begin(f.os);
    for (uint64_t i = 0; i < N; i += 2) {
        char nm[64];
        ename(i, nm, sizeof(nm));
        assert_int_equal(zap_remove(f.os, z, nm, tx), 0);
    }
    dmu_tx_commit(tx);
    uint64_t n;
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, N / 2);
    uint8_t *seen = cairn_zalloc(N);
    uint64_t total;
    walk_all(f.os, z, seen, N, &total);
    assert_int_equal(total, N / 2);
    for (uint64_t i = 0; i < N; i++) assert_int_equal(seen[i], i % 2);
    fixture_reimport(&f);
    for (uint64_t i = 0; i < N; i++) check_entry(f.os, z, i, i % 2);
    memset(seen, 0, N);
    walk_all(f.os, z, seen, N, &total);
    assert_int_equal(total, N / 2);
    for (uint64_t i = 0; i < N; i++) assert_int_equal(seen[i], i % 2);
    /* Removed names can come back after the reload. */
    add_range(f.os, z, N, N + 100);
    tx = dmu_tx_begin(f.os);
    assert_int_equal(zap_destroy(f.os, z, tx), 0);
    dmu_tx_commit(tx);
    free(seen);
    fixture_done(&f);
}

/*
 * Steps a cursor while adding and removing other entries in between. Entries
 * present throughout must come out exactly once; nothing comes out twice;
 * nothing comes out after it was removed. Runs with full hashes and with
 * 4-bit hashes (every entry collides with hundreds of others).
 */
static void cursor_stability(unsigned hash_bits)
{
    pool_fixture_t f;
    fixture_make(&f, "zapcursor");
    zap_test_set_hash_bits(hash_bits);
    uint64_t z = new_zap(f.os);
    /* With 4-bit hashes a leaf holds all entries of one hash: keep them fitting. */
    const uint64_t N = hash_bits ? 1500 : 3000, MAXN = hash_bits ? 3000 : 20000;
    add_range(f.os, z, 0, N);
    uint8_t *present = cairn_zalloc(MAXN), *removed_ever = cairn_zalloc(MAXN),
            *seen = cairn_zalloc(MAXN);
    for (uint64_t i = 0; i < N; i++) present[i] = 1;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1234 + hash_bits);
    uint64_t next_new = N;
    static zap_entry_t e;
    zap_cursor_t zc;
    zap_cursor_init(&zc, f.os, z, 0);
    int r;
    uint64_t steps = 0;
    while ((r = zap_cursor_next(&zc, &e)) == 1) {
        unsigned long long i;
        assert_int_equal(sscanf(e.name, "entry-%llu", &i), 1);
        assert_true(present[i]);
        assert_int_equal(seen[i], 0);
        seen[i] = 1;
        steps++;
        /* Resume through a fresh cursor from the cookie half of the time. */
        if (steps % 2) zap_cursor_init(&zc, f.os, z, e.next_cookie);
        dmu_tx_t *tx = dmu_tx_begin(f.os);
        for (int k = 0; k < 3; k++) {
            if (next_new < MAXN && cairn_rng_below(&rng, 2)) {
                char nm[64];
                ename(next_new, nm, sizeof(nm));
                uint8_t v[64];
                val_fill(next_new, v, val_len(next_new));
                assert_int_equal(zap_add(f.os, z, nm, v, val_len(next_new), tx), 0);
                present[next_new++] = 1;
            } else {
                uint64_t victim = cairn_rng_below(&rng, next_new);
                if (!present[victim]) continue;
                char nm[64];
                ename(victim, nm, sizeof(nm));
                assert_int_equal(zap_remove(f.os, z, nm, tx), 0);
                present[victim] = 0;
                removed_ever[victim] = 1;
            }
        }
        dmu_tx_commit(tx);
    }
    assert_int_equal(r, 0);
    uint64_t survivors = 0;
    for (uint64_t i = 0; i < N; i++) {
        if (present[i] && !removed_ever[i]) {
            survivors++;
            if (!seen[i]) fprintf(stderr, "survivor entry-%llu skipped\n", (unsigned long long)i);
            assert_int_equal(seen[i], 1);
        }
    }
    assert_true(survivors > N / 4);
    uint64_t n, count = 0;
    for (uint64_t i = 0; i < next_new; i++) count += present[i];
    assert_int_equal(zap_count(f.os, z, &n), 0);
    assert_int_equal(n, count);
    for (uint64_t i = 0; i < next_new; i++) check_entry(f.os, z, i, present[i]);
    fixture_reimport(&f);
    memset(seen, 0, MAXN);
    uint64_t total;
    walk_all(f.os, z, seen, MAXN, &total);
    assert_int_equal(total, count);
    for (uint64_t i = 0; i < next_new; i++) assert_int_equal(seen[i], present[i]);
    zap_test_set_hash_bits(0);
    free(present);
    free(removed_ever);
    free(seen);
    fixture_done(&f);
}

static void test_cursor_stability(void **state)
{
    (void)state;
    cursor_stability(0);
}

static void test_collisions(void **state)
{
    (void)state;
    cursor_stability(4);
    /* Many entries on one hash: the cd tells them apart, cookies stay distinct. */
    pool_fixture_t f;
    fixture_make(&f, "zapcoll");
    zap_test_set_hash_bits(1);
    uint64_t z = new_zap(f.os);
    add_range(f.os, z, 0, 400);
    for (uint64_t i = 0; i < 400; i++) check_entry(f.os, z, i, true);
    dmu_tx_t *tx = dmu_tx_begin(f.os);
    for (uint64_t i = 0; i < 400; i += 3) {
        char nm[64];
        ename(i, nm, sizeof(nm));
        assert_int_equal(zap_remove(f.os, z, nm, tx), 0);
    }
    dmu_tx_commit(tx);
    /* Freed cds are reused. */
    add_range(f.os, z, 400, 500);
    uint8_t seen[500] = {0};
    uint64_t total;
    walk_all(f.os, z, seen, 500, &total);
    assert_int_equal(total, 500 - 134);
    for (uint64_t i = 0; i < 500; i++) {
        bool want = i >= 400 || i % 3;
        assert_int_equal(seen[i], want);
        check_entry(f.os, z, i, want);
    }
    zap_test_set_hash_bits(0);
    fixture_done(&f);
}

/* A cache far smaller than the ZAP: blocks are evicted and read back correctly. */
static void test_small_cache(void **state)
{
    (void)state;
    pool_fixture_t f;
    zap_test_set_hash_bits(0);
    fixture_make(&f, "zapcache");
    zap_cache_stats_t before, after;
    zap_cache_get_stats(&before);
    zap_cache_set_limit(1024 * 1024);
    uint64_t z = new_zap(f.os);
    const uint64_t N = 40000;
    add_range(f.os, z, 0, N);
    assert_int_equal(dmu_objset_sync(f.os), 0);
    for (uint64_t i = 0; i < N; i++) check_entry(f.os, z, i, true);
    zap_cache_get_stats(&after);
    assert_true(after.evictions > before.evictions);
    assert_true(after.bytes <= after.limit + 64 * 16384);
    dmu_object_info_t info;
    assert_int_equal(dmu_object_info(f.os, z, &info), 0);
    assert_true(info.max_offset > 2 * 1024 * 1024); /* bigger than the cache */
    zap_cache_set_limit(64ull * 1024 * 1024);
    fixture_done(&f);
}

typedef struct thr_arg {
    objset_t *os;
    uint64_t own, shared;
    int id;
    int failures;
} thr_arg_t;

static void *thr_main(void *p)
{
    thr_arg_t *a = p;
    const int N = 4000;
    char nm[64];
    for (int i = 0; i < N; i++) {
        dmu_tx_t *tx = dmu_tx_begin(a->os);
        snprintf(nm, sizeof(nm), "t%d-%d", a->id, i);
        uint64_t v = (uint64_t)a->id << 32 | (uint64_t)i;
        if (zap_add_u64(a->os, a->own, nm, v, tx)) a->failures++;
        if (zap_add_u64(a->os, a->shared, nm, v, tx)) a->failures++;
        dmu_tx_commit(tx);
        /* Read back own and others' entries while they are being written. */
        uint64_t x;
        if (zap_lookup_u64(a->os, a->own, nm, &x) || x != v) a->failures++;
        int other = (a->id + 1 + i) % 4, j = i / 2;
        snprintf(nm, sizeof(nm), "t%d-%d", other, j);
        int e = zap_lookup_u64(a->os, a->shared, nm, &x);
        if (e == 0 && x != ((uint64_t)other << 32 | (uint64_t)j)) a->failures++;
        if (e != 0 && e != -ENOENT) a->failures++;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pool_fixture_t f;
    zap_test_set_hash_bits(0);
    fixture_make(&f, "zapthr");
    uint64_t shared = new_zap(f.os);
    thr_arg_t args[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (thr_arg_t){.os = f.os, .own = new_zap(f.os), .shared = shared, .id = t};
        assert_int_equal(pthread_create(&th[t], NULL, thr_main, &args[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(args[t].failures, 0);
    }
    fixture_reimport(&f);
    uint64_t n;
    assert_int_equal(zap_count(f.os, shared, &n), 0);
    assert_int_equal(n, 4 * 4000);
    for (int t = 0; t < 4; t++) {
        assert_int_equal(zap_count(f.os, args[t].own, &n), 0);
        assert_int_equal(n, 4000);
        for (int i = 0; i < 4000; i++) {
            char nm[64];
            snprintf(nm, sizeof(nm), "t%d-%d", t, i);
            uint64_t x = 0;
            assert_int_equal(zap_lookup_u64(f.os, shared, nm, &x), 0);
            assert_int_equal(x, (uint64_t)t << 32 | (uint64_t)i);
            assert_int_equal(zap_lookup_u64(f.os, args[t].own, nm, &x), 0);
            assert_int_equal(x, (uint64_t)t << 32 | (uint64_t)i);
        }
    }
    fixture_done(&f);
}

int main(void)
{
    dmu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_ops),
        cmocka_unit_test(test_values_and_names),
        cmocka_unit_test(test_grow_remove_iterate),
        cmocka_unit_test(test_cursor_stability),
        cmocka_unit_test(test_collisions),
        cmocka_unit_test(test_small_cache),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
