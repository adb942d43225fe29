/*
 * The intent log's footprint on a pool without log devices (its region is
 * chunks of the normal vdevs):
 *   - sync writes while the region fills (blocks also taken by another user of
 *     the region) make it grow, counted in the pool's ALLOC; once the log
 *     idles, the chunks it added go back to the pool: the region and ALLOC
 *     return to what they were before, and the offline check agrees (no leaked
 *     or doubly used space);
 *   - a region that cannot grow (at its cap, an eighth of a small pool, and
 *     full) never fails a commit: a batch that finds no room waits for its txg;
 *     once there is room the log carries commits again, and every committed
 *     write survives a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cairn/spa.h>
#include <cairn/zil.h>

#include <time.h>

#include "pool_fixture.h"

#define REC (16 * 1024)

typedef struct sfx {
    test_pool_t p;
    objset_t *os;
    uint64_t obj;
    zilog_t *zl;
} sfx_t;

static void sfx_make(sfx_t *z, const char *tag, uint64_t size)
{
    memset(z, 0, sizeof *z);
    test_pool_make(&z->p, tag, size);
    char err[128];
    /* txgs sync only when asked (or when the log asks for room) */
    assert_int_equal(spa_prop_set(z->p.spa, "txg_timeout", "300", err, sizeof err), 0);
    assert_int_equal(dmu_objset_create(z->p.spa, "fs", NULL), 0);
    assert_int_equal(dmu_objset_open(z->p.spa, "fs", &z->os), 0);
    dmu_object_props_t props = {.recordsize = REC, .compress = CAIRN_COMPRESS_OFF,
                                .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_object_alloc(z->os, &props, &z->obj, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(zil_open(z->os, zil_replay_dmu, z->os, &z->zl), 0);
    assert_int_equal(spa_txg_wait_synced(z->p.spa, 0), 0);
}

static void pattern(uint8_t *b, uint64_t tag)
{
    for (int i = 0; i < REC; i++) b[i] = (uint8_t)(tag * 29 + i * 11 + 5) | 1;
}

/* A sync write of record i (its bytes logged), committed. */
static void sync_write(sfx_t *z, uint64_t i, uint64_t tag)
{
    static uint8_t b[REC];
    pattern(b, tag);
    dmu_tx_t *tx = dmu_tx_begin(z->os);
    assert_int_equal(dmu_write(z->os, z->obj, i * REC, REC, b, tx), 0);
    uint64_t txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    zil_log(z->zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = z->obj, .off = i * REC,
                                .len = REC, .data = b, .dlen = REC});
    assert_int_equal(zil_commit(z->zl, 0), 0);
}

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Log blocks taken from the region by someone else (another object set's
 * log, say): the region must make room for them, and the log under test meets
 * a full region when they take everything. */
typedef struct hog {
    cairn_dva_t d[4096];
    size_t n;
} hog_t;

static int hog_take(sfx_t *z, hog_t *h)
{
    assert_true(h->n < CAIRN_ARRAY_SIZE(h->d));
    int e = spa_log_alloc(z->p.spa, SPA_LOG_BLOCK_MAX, &h->d[h->n]);
    if (!e) h->n++;
    return e;
}

/* Takes every block the region has, the largest first and then ever smaller
 * ones down to a sector, so not even a log's smallest block fits (the pieces
 * left between large blocks had let a slow run commit through the log). */
static void hog_take_all(sfx_t *z, hog_t *h)
{
    for (uint32_t size = SPA_LOG_BLOCK_MAX; size >= 512; size /= 2) {
        for (;;) {
            assert_true(h->n < CAIRN_ARRAY_SIZE(h->d));
            if (spa_log_alloc(z->p.spa, size, &h->d[h->n])) break;
            h->n++;
        }
    }
}

static void hog_release(sfx_t *z, hog_t *h)
{
    uint64_t txg = spa_tx_hold_nowait(z->p.spa);
    for (size_t i = 0; i < h->n; i++) spa_log_free(z->p.spa, &h->d[i], txg);
    spa_tx_rele(z->p.spa, txg);
    h->n = 0;
    assert_int_equal(spa_txg_wait_synced(z->p.spa, txg), 0);
}

static void test_region_shrinks_when_idle(void **state)
{
    (void)state;
    sfx_t z;
    sfx_make(&z, "zilshrink", 1024 * CAIRN_MIB);
    spa_log_stats_t st0, st;
    spa_log_get_stats(z.p.spa, &st0);
    spa_space_t sp0, sp;
    spa_get_space(z.p.spa, &sp0);
    assert_true(st0.region_normal_bytes > 0); /* the chain's first block lives there */

    /* Sync writes while the region fills up: it grows, chunk by chunk. */
    static hog_t h;
    uint64_t i = 0;
    do {
        assert_int_equal(hog_take(&z, &h), 0);
        sync_write(&z, i % 64, i);
        i++;
        spa_log_get_stats(z.p.spa, &st);
    } while (st.region_normal_bytes < 8 * st0.region_normal_bytes);
    spa_get_space(z.p.spa, &sp);
    assert_true(sp.alloc >= sp0.alloc + 7 * st0.region_normal_bytes); /* counted in ALLOC */
    zil_stats_t zs;
    zil_get_stats(z.zl, &zs);
    assert_int_equal(zs.txg_waits, 0);

    /* The other user frees its blocks; a few more commits, each after a sync,
     * let the chain move past its old blocks (into the oldest chunk with room).
     * Then nothing is logged any more. */
    hog_release(&z, &h);
    for (uint64_t k = 0; k < 4; k++) {
        sync_write(&z, k, 4000 + k);
        assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
    }
    spa_log_set_shrink_delay(z.p.spa, 200);
    bool back = false;
    for (int k = 0; k < 600 && !back; k++) { /* up to a minute */
        nap_ms(100);
        spa_log_get_stats(z.p.spa, &st);
        back = st.region_normal_bytes <= st0.region_normal_bytes;
    }
    assert_true(back);
    assert_true(st.chunks_dropped > 0);
    char v[64];
    assert_int_equal(spa_prop_get(z.p.spa, "logregion", v, sizeof v), 0);
    assert_true(strtoull(v, NULL, 10) <= st0.region_normal_bytes); /* what `pool get` shows */
    /* ALLOC is back too (once the freeing txg's space is released), but for the
     * data written (64 records of 16 KiB and their metadata) and the space map
     * log's chain (it grows with every txg until condensed). */
    uint64_t limit = 0;
    for (int k = 0; k < 10; k++) {
        assert_int_equal(spa_txg_wait_synced(z.p.spa, 0), 0);
        spa_get_space(z.p.spa, &sp);
        limit = sp0.alloc + spa_spacemap_log_bytes(z.p.spa) + 3 * CAIRN_MIB;
        if (sp.alloc <= limit) break;
    }
    if (sp.alloc > limit)
        fprintf(stderr, "alloc %llu, before %llu, space map log %llu\n",
                (unsigned long long)sp.alloc, (unsigned long long)sp0.alloc,
                (unsigned long long)spa_spacemap_log_bytes(z.p.spa));
    assert_true(sp.alloc <= limit);

    /* Still a working log. */
    for (uint64_t k = 0; k < 8; k++) sync_write(&z, k, 5000 + k);
    zil_close(z.zl);
    dmu_objset_close(z.os);
    test_pool_check(&z.p);
    test_pool_remove(&z.p);
}

static void test_full_region_commits_by_txg(void **state)
{
    (void)state;
    sfx_t z;
    /* an eighth of 96 MiB: the region stops growing at 12 MiB */
    sfx_make(&z, "zilfull", 96 * CAIRN_MIB);
    static hog_t h;
    hog_take_all(&z, &h);
    enum { N = 40, SPAN = 16 };
    for (uint64_t i = 0; i < N; i++) sync_write(&z, i % SPAN, i); /* asserts 0 */
    zil_stats_t zs;
    zil_get_stats(z.zl, &zs);
    assert_true(zs.region_full + zs.txg_waits > 0); /* the point: they found no room */

    /* Room again: the log carries commits again (no txg wait). */
    hog_release(&z, &h);
    zil_stats_t a, b;
    sync_write(&z, 0, N); /* may start a chain again */
    zil_get_stats(z.zl, &a);
    for (uint64_t k = 1; k < 6; k++) sync_write(&z, k, N + k);
    zil_get_stats(z.zl, &b);
    assert_int_equal(b.txg_waits, a.txg_waits);
    assert_int_equal(b.log_writes, a.log_writes + 5);

    /* Every committed write survives a crash. */
    zil_abandon(z.zl);
    spa_abandon(z.p.spa);
    z.p.spa = NULL;
    test_pool_import(&z.p, SPA_IMPORT_FORCE);
    assert_int_equal(dmu_objset_open(z.p.spa, "fs", &z.os), 0);
    assert_int_equal(zil_open(z.os, zil_replay_dmu, z.os, &z.zl), 0);
    static uint8_t want[REC], got[REC];
    for (uint64_t s = 0; s < SPAN; s++) {
        uint64_t last = s < 6 ? N + s : s + (N - 1 - s) / SPAN * SPAN;
        pattern(want, last);
        assert_int_equal(dmu_read(z.os, z.obj, s * REC, REC, got), 0);
        assert_memory_equal(want, got, REC);
    }
    zil_close(z.zl);
    dmu_objset_close(z.os);
    test_pool_check(&z.p);
    test_pool_remove(&z.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_region_shrinks_when_idle),
        cmocka_unit_test(test_full_region_commits_by_txg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
