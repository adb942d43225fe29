/* Analytics (include/cairn/analytics.h): the bounded top-N tables with their
 * "other" bucket, sampling into deltas, the rings and their rollups, and the
 * saved form. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/analytics.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void name_key(const void *arg, uint64_t key, char *buf, size_t len)
{
    snprintf(buf, len, "%s%llu", (const char *)arg, (unsigned long long)key);
}

/* The value of (stat, dim, name) among entries; 0 when absent. */
static uint64_t find(an_history_t *h, const an_entry_t *e, size_t n, an_stat_t s, unsigned d,
                     const char *name)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].stat == s && e[i].dim == d && !strcmp(an_history_name(h, e[i].name), name))
            v += e[i].value;
    return v;
}

static uint64_t sum_dim(const an_entry_t *e, size_t n, an_stat_t s, unsigned d)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].stat == s && e[i].dim == d) v += e[i].value;
    return v;
}

static size_t collect(an_history_t *h, an_entry_t **e)
{
    size_t n = 0, cap = 0;
    *e = NULL;
    an_collect(h, e, &n, &cap);
    return n;
}

/* Top N keep the largest keys; "other" gets the rest; same names are summed;
 * totals pass through; nothing is lost. */
static void test_merge_topn(void **state)
{
    (void)state;
    an_entry_t in[40], out[40];
    size_t n = 0;
    for (uint32_t k = 1; k <= 15; k++)
        in[n++] = (an_entry_t){AN_NFS3_OPS, AN_BY_CLIENT, k, k * 10};
    in[n++] = (an_entry_t){AN_NFS3_OPS, AN_BY_CLIENT, 3, 1000}; /* key 3 again: 1030 */
    in[n++] = (an_entry_t){AN_NFS3_OPS, AN_BY_CLIENT, AN_NAME_OTHER, 7};
    in[n++] = (an_entry_t){AN_NFS3_OPS, AN_DIM_TOTAL, AN_NAME_OTHER, 5};
    in[n++] = (an_entry_t){AN_NFS3_OPS, AN_DIM_TOTAL, AN_NAME_OTHER, 6};
    in[n++] = (an_entry_t){AN_ISCSI_OPS, AN_BY_OP, 1, 4};
    size_t m = an_merge_topn(in, n, 10, out);
    uint64_t in_sum = 0, out_sum = 0;
    for (size_t i = 0; i < n; i++) in_sum += in[i].value;
    for (size_t i = 0; i < m; i++) out_sum += out[i].value;
    assert_int_equal(in_sum, out_sum);
    /* nfs3 total (one entry of 11), client: 10 keys + other, iscsi op: 1 */
    assert_int_equal(m, 1 + 11 + 1);
    size_t c = 0;
    uint64_t other = 0;
    for (size_t i = 0; i < m; i++) {
        if (out[i].stat != AN_NFS3_OPS || out[i].dim != AN_BY_CLIENT) continue;
        if (out[i].name == AN_NAME_OTHER) {
            other = out[i].value;
            assert_int_equal(i + 1 < m ? out[i + 1].dim : AN_DIM_TOTAL, AN_DIM_TOTAL);
            continue;
        }
        c++;
        assert_true(out[i].name == 3 || out[i].name >= 7); /* 3 (1030) and 15..7 */
    }
    assert_int_equal(c, 10);
    assert_int_equal(other, 7 + 10 + 20 + 40 + 50 + 60);
    assert_int_equal(out[m - 2].dim, AN_DIM_TOTAL);
    assert_int_equal(out[m - 2].value, 11);
}

/* Histograms (latency, size) keep every bucket: a heat map cannot use "other". */
static void test_histograms_whole(void **state)
{
    (void)state;
    an_entry_t in[AN_LOG2_BUCKETS], out[AN_LOG2_BUCKETS];
    for (uint32_t b = 0; b < AN_LOG2_BUCKETS; b++)
        in[b] = (an_entry_t){AN_DISK_IO, AN_BY_LATENCY, b + 1, b + 1};
    assert_int_equal(an_merge_topn(in, AN_LOG2_BUCKETS, AN_TOPN, out), AN_LOG2_BUCKETS);
    for (size_t i = 0; i < AN_LOG2_BUCKETS; i++) assert_int_not_equal(out[i].name, AN_NAME_OTHER);
    char name[32];
    an_bucket_name(AN_BY_SIZE, 13, name, sizeof name);
    assert_int_equal(an_bucket_of(AN_BY_SIZE, name), 13);
    assert_int_equal(an_bucket_of(AN_BY_SIZE, "nonsense"), -1);
}

/* Recording into a table: exact per key, beyond AN_SLOTS keys into "other", a
 * disabled dimension records nothing, deltas are per interval, and an idle
 * slot is freed for a new key. */
static void test_table_bounds(void **state)
{
    (void)state;
    an_history_t *h = an_history_create(2);
    an_entry_t *e;
    collect(h, &e); /* start from zero deltas */
    free(e);
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_FILE, false);
    an_add(AN_NFS3_OPS, AN_BY_FILE, 1, 1, name_key, "f");
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_CLIENT, true);
    const unsigned keys = AN_SLOTS * 2;
    for (unsigned k = 0; k < keys; k++)
        for (unsigned i = 0; i <= k % 3; i++) an_add(AN_NFS3_OPS, AN_BY_CLIENT, k, 1, name_key, "c");
    an_add(AN_NFS3_OPS, AN_BY_CLIENT, 0, 100, name_key, "c"); /* c0 leads */
    size_t n = collect(h, &e);
    uint64_t want = 100;
    for (unsigned k = 0; k < keys; k++) want += k % 3 + 1;
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_CLIENT), want);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT, "c0"), 101);
    assert_true(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT, AN_OTHER) > 0);
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_FILE), 0);
    size_t named = 0;
    for (size_t i = 0; i < n; i++)
        named += e[i].dim == AN_BY_CLIENT && e[i].name != AN_NAME_OTHER;
    assert_int_equal(named, AN_TOPN);
    free(e);
    /* Nothing new: no entries for the table. */
    n = collect(h, &e);
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_CLIENT), 0);
    free(e);
    /* Idle long enough: the slots are freed and a new key gets one. */
    for (int i = 0; i < AN_IDLE_FREE_S; i++) {
        collect(h, &e);
        free(e);
    }
    an_add(AN_NFS3_OPS, AN_BY_CLIENT, 999999, 3, name_key, "new");
    n = collect(h, &e);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT, "new999999"), 3);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT, AN_OTHER), 0);
    free(e);
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_CLIENT, false);
    an_add(AN_NFS3_OPS, AN_BY_CLIENT, 5, 1, name_key, "c");
    n = collect(h, &e);
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_CLIENT), 0);
    free(e);
    an_history_free(h);
}

#define RACE_THREADS 4
#define RACE_ADDS 50000
#define RACE_KEYS 40

static void *race_adder(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < RACE_ADDS; i++)
        an_add(AN_ISCSI_OPS, AN_BY_INITIATOR, i % RACE_KEYS, 1, name_key, "i");
    return NULL;
}

/* Threads claiming and counting the same keys at once: every event counted once,
 * each key in one slot (or summed with its twin), none lost to "other". */
static void test_concurrent_claims(void **state)
{
    (void)state;
    an_history_t *h = an_history_create(2);
    an_entry_t *e;
    collect(h, &e);
    free(e);
    pthread_t t[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) pthread_create(&t[i], NULL, race_adder, NULL);
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(t[i], NULL);
    size_t n = collect(h, &e);
    assert_int_equal(sum_dim(e, n, AN_ISCSI_OPS, AN_BY_INITIATOR), RACE_THREADS * RACE_ADDS);
    /* The top 10 named keys each hold exactly their share. */
    size_t named = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].dim == AN_BY_INITIATOR && e[i].name != AN_NAME_OTHER) {
            assert_int_equal(e[i].value, RACE_THREADS * RACE_ADDS / RACE_KEYS);
            named++;
        }
    assert_int_equal(named, AN_TOPN);
    free(e);
    an_history_free(h);
}

static void test_buckets(void **state)
{
    (void)state;
    char b[32];
    assert_int_equal(an_log2_bucket(0), 0);
    assert_int_equal(an_log2_bucket(1), 1);
    assert_int_equal(an_log2_bucket(4096), 13);
    assert_int_equal(an_log2_bucket(UINT64_MAX), AN_LOG2_BUCKETS - 1);
    an_bucket_name(AN_BY_SIZE, 13, b, sizeof b);
    assert_string_equal(b, "4K");
    an_bucket_name(AN_BY_LATENCY, 0, b, sizeof b);
    assert_string_equal(b, "<1us");
    an_bucket_name(AN_BY_LATENCY, 11, b, sizeof b);
    assert_string_equal(b, "1ms");
    assert_int_equal(an_stat_lookup("nfs3.ops"), AN_NFS3_OPS);
    assert_int_equal(an_stat_lookup("nfs3.opz"), -1);
    assert_int_equal(an_dim_lookup("file"), AN_BY_FILE);
    assert_true(an_stat_has_dim(AN_ISCSI_OPS, AN_BY_INITIATOR));
    assert_false(an_stat_has_dim(AN_ISCSI_OPS, AN_BY_FILE));
}

static void name_op(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    if (key == 1) snprintf(buf, len, "READ");
    else if (key == 3) snprintf(buf, len, "WRITE");
    else snprintf(buf, len, "OP%llu", (unsigned long long)key);
}

/* op-latency: off by default; on, each (operation, bucket) is exact under the
 * name "OP BUCKET", kept whole however many operations (a heat map per op),
 * and names sort by operation, then bucket. */
static void test_op_latency(void **state)
{
    (void)state;
    an_history_t *h = an_history_create(2);
    an_entry_t *e;
    collect(h, &e); /* what earlier tests left */
    free(e);
    assert_false(an_dim_default_on(AN_NFS3_OPS, AN_BY_OP_LATENCY));
    assert_true(an_stat_has_dim(AN_ISCSI_OPS, AN_BY_OP_LATENCY));
    assert_false(an_stat_has_dim(AN_DISK_IO, AN_BY_OP_LATENCY));
    an_add_op_latency(AN_NFS3_OPS, 3, 100000, name_op, NULL); /* off: nothing */
    size_t n = collect(h, &e);
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY), 0);
    free(e);

    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_OP_LATENCY, true);
    for (int i = 0; i < 5; i++) an_add_op_latency(AN_NFS3_OPS, 3, 100000, name_op, NULL);
    for (int i = 0; i < 2; i++) an_add_op_latency(AN_NFS3_OPS, 3, 2500000, name_op, NULL);
    an_add_op_latency(AN_NFS3_OPS, 1, 1500, name_op, NULL);
    for (uint64_t op = 10; op < 10 + 2 * AN_TOPN; op++)
        an_add_op_latency(AN_NFS3_OPS, op, 1000000, name_op, NULL);
    n = collect(h, &e);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY, "WRITE 64us"), 5);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY, "WRITE 2ms"), 2);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY, "READ 1us"), 1);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY, "OP29 512us"), 1);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY, AN_OTHER), 0);
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_OP_LATENCY), 8 + 2 * AN_TOPN);
    /* the stored sample keeps them whole too */
    an_entry_t *out = malloc(n * sizeof *out);
    size_t m = an_merge_topn(e, n, AN_TOPN, out);
    assert_int_equal(sum_dim(out, m, AN_NFS3_OPS, AN_BY_OP_LATENCY), 8 + 2 * AN_TOPN);
    assert_int_equal(find(h, out, m, AN_NFS3_OPS, AN_BY_OP_LATENCY, AN_OTHER), 0);
    free(out);
    free(e);
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_OP_LATENCY, false);

    assert_int_equal(an_bucket_of(AN_BY_OP_LATENCY, "WRITE 64us"), 7);
    assert_int_equal(an_bucket_of(AN_BY_OP_LATENCY, "WRITE SAME(16) <1us"), 0);
    assert_true(an_histogram_cmp(AN_BY_OP_LATENCY, "READ 2us", "READ 1ms") < 0);
    assert_true(an_histogram_cmp(AN_BY_OP_LATENCY, "READ 1ms", "WRITE <1us") < 0);
    assert_true(an_histogram_cmp(AN_BY_OP_LATENCY, "WRITE <1us", "READ 1ms") > 0);
    assert_true(an_histogram_cmp(AN_BY_OP_LATENCY, "READ 2us", "READDIR <1us") < 0);
    assert_int_equal(an_histogram_cmp(AN_BY_OP_LATENCY, "READ 2us", "READ 2us"), 0);
    assert_true(an_histogram_cmp(AN_BY_LATENCY, "8us", "1ms") < 0);
    /* bytes by client: off by default (an address to hash); by initiator: on */
    assert_false(an_dim_default_on(AN_NET_BYTES, AN_BY_CLIENT));
    assert_true(an_dim_default_on(AN_NET_BYTES, AN_BY_INITIATOR));
    an_history_free(h);
}

static int g_names_made;

static void name_counted(const void *arg, uint64_t key, char *buf, size_t len)
{
    g_names_made++;
    snprintf(buf, len, "%s", (const char *)arg);
    (void)key;
}

/* Joint drill-downs: a pair counts under "A B", exact per pair; off, nothing is
 * recorded and no name is made; a part without a name function is its key. */
static void test_pairs(void **state)
{
    (void)state;
    an_history_t *h = an_history_create(2);
    an_entry_t *e;
    collect(h, &e); /* what earlier tests left */
    free(e);
    an_part_t c1 = {0x11, name_counted, "10.0.0.1"}, c2 = {0x22, name_counted, "10.0.0.2"};
    an_part_t write = {3, name_op, NULL}, read = {1, name_op, NULL};
    assert_false(an_dim_default_on(AN_NFS3_OPS, AN_BY_CLIENT_OP));
    an_add_pair(AN_NFS3_OPS, AN_BY_CLIENT_OP, c1, write, 1);
    assert_int_equal(g_names_made, 0);

    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_CLIENT_OP, true);
    for (int i = 0; i < 4; i++) an_add_pair(AN_NFS3_OPS, AN_BY_CLIENT_OP, c1, write, 1);
    an_add_pair(AN_NFS3_OPS, AN_BY_CLIENT_OP, c1, read, 2);
    an_add_pair(AN_NFS3_OPS, AN_BY_CLIENT_OP, c2, write, 5);
    an_add_pair(AN_NFS3_OPS, AN_BY_CLIENT_OP, c2, (an_part_t){42, NULL, NULL}, 1);
    assert_int_equal(g_names_made, 4); /* once per pair, not per event */
    size_t n = collect(h, &e);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT_OP, "10.0.0.1 WRITE"), 4);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT_OP, "10.0.0.1 READ"), 2);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT_OP, "10.0.0.2 WRITE"), 5);
    assert_int_equal(find(h, e, n, AN_NFS3_OPS, AN_BY_CLIENT_OP, "10.0.0.2 42"), 1);
    assert_int_equal(sum_dim(e, n, AN_NFS3_OPS, AN_BY_CLIENT_OP), 12);
    free(e);
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_CLIENT_OP, false);
    assert_true(an_stat_has_dim(AN_ISCSI_OPS, AN_BY_INITIATOR_OP));
    assert_false(an_stat_has_dim(AN_ISCSI_OPS, AN_BY_CLIENT_FILE));
    assert_int_equal(an_dim_lookup("client-file"), AN_BY_CLIENT_FILE);
    an_history_free(h);
}

typedef struct sum_ctx {
    an_history_t *h;
    size_t samples;
    uint64_t total, key_a;
    int64_t first_t;
} sum_ctx_t;

static void sum_sample(const an_sample_t *s, void *arg)
{
    sum_ctx_t *c = arg;
    if (!c->samples++) c->first_t = s->t;
    c->total += sum_dim(s->e, s->n, AN_NFS3_OPS, AN_DIM_TOTAL);
    c->key_a += find(c->h, s->e, s->n, AN_NFS3_OPS, AN_BY_OP, "A");
}

static sum_ctx_t walk(an_history_t *h, int res)
{
    sum_ctx_t c = {.h = h};
    an_history_walk(h, res, 0, INT64_MAX, sum_sample, &c);
    return c;
}

/* Seconds roll up into minutes and minutes into hours with exact sums; the
 * rings keep their capacity (an hour of seconds; `hours` hours). */
static void test_rollups(void **state)
{
    (void)state;
    an_history_t *h = an_history_create(2);
    uint32_t a = an_history_intern(h, "A");
    const int64_t t0 = 1700000000 - 1700000000 % 3600; /* an hour boundary */
    const int64_t seconds = 3 * 3600 + 120;
    for (int64_t t = t0; t < t0 + seconds; t++) {
        an_entry_t e[2] = {{AN_NFS3_OPS, AN_DIM_TOTAL, AN_NAME_OTHER, 2},
                           {AN_NFS3_OPS, AN_BY_OP, a, 1}};
        assert_int_equal(an_history_add(h, t, e, 2), 0);
    }
    assert_int_equal(an_history_add(h, t0, NULL, 0), -EINVAL);
    sum_ctx_t s = walk(h, AN_RES_SECOND);
    assert_int_equal(s.samples, 3600);
    assert_int_equal(s.first_t, t0 + seconds - 3600);
    assert_int_equal(s.total, 2 * 3600);
    sum_ctx_t m = walk(h, AN_RES_MINUTE);
    assert_int_equal(m.samples, 3 * 60 + 1); /* the minute in progress is not rolled yet */
    assert_int_equal(m.total, 2 * 60 * m.samples);
    assert_int_equal(m.key_a, 60 * m.samples);
    sum_ctx_t hr = walk(h, AN_RES_HOUR);
    assert_int_equal(hr.samples, 2); /* 3 hours complete, 2 kept */
    assert_int_equal(hr.first_t, t0 + 3600);
    assert_int_equal(hr.total, 2 * 2 * 3600);
    assert_int_equal(an_history_walk(h, AN_RES_HOUR, t0 + 7200, t0 + 7201, NULL, NULL), 1);
    an_history_free(h);
}

/* Saved and loaded, the rings and names come back; bad bytes change nothing. */
static void test_save_load(void **state)
{
    (void)state;
    an_history_t *h = an_history_create(24);
    uint32_t a = an_history_intern(h, "A");
    for (int64_t t = 1000; t < 1200; t++) {
        an_entry_t e = {AN_NFS3_OPS, AN_BY_OP, a, 3};
        an_history_add(h, t, &e, 1);
    }
    uint8_t *buf;
    size_t len;
    assert_int_equal(an_history_save(h, &buf, &len), 0);
    an_history_t *g = an_history_create(24);
    assert_int_equal(an_history_load(g, buf, len, false), 0);
    sum_ctx_t s = walk(g, AN_RES_SECOND), m = walk(g, AN_RES_MINUTE);
    assert_int_equal(s.samples, 200);
    assert_int_equal(s.key_a, 600);
    assert_int_equal(m.samples, walk(h, AN_RES_MINUTE).samples);
    /* The next second after a gap rolls up what the saved rings held. */
    assert_int_equal(an_history_add(g, 1199, NULL, 0), -EINVAL);
    assert_int_equal(an_history_add(g, 5000, NULL, 0), 0);
    assert_int_equal(walk(g, AN_RES_MINUTE).key_a, 600);
    /* Corrupt: truncated, bad magic, a name id out of range. */
    an_history_t *k = an_history_create(24);
    assert_int_equal(an_history_load(k, buf, len - 1, false), -EINVAL);
    buf[0] ^= 1;
    assert_int_equal(an_history_load(k, buf, len, false), -EINVAL);
    buf[0] ^= 1;
    buf[len - 4 - 12] = 0xff; /* the minutes' last entry's name id (no hours yet) */
    assert_int_equal(an_history_load(k, buf, len, false), -EINVAL);
    assert_int_equal(walk(k, AN_RES_SECOND).samples, 0);
    free(buf);
    an_history_free(k);
    an_history_free(g);
    an_history_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_topn), cmocka_unit_test(test_histograms_whole),
        cmocka_unit_test(test_table_bounds),
        cmocka_unit_test(test_buckets),    cmocka_unit_test(test_op_latency),
        cmocka_unit_test(test_pairs),    cmocka_unit_test(test_rollups),
        cmocka_unit_test(test_save_load), cmocka_unit_test(test_concurrent_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
