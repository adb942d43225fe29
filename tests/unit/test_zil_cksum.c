/*
 * Checksum errors charged while reading the intent log, on a two-way mirror
 * pool whose log lives in the main vdevs (no log device):
 *   - a crash with committed records pending, import and replay: every chain
 *     ends at a block that does not verify (the unwritten successor), which is
 *     expected and charges no side of the mirror;
 *   - a log block really corrupted on one side (the side read first) is still
 *     a checksum error of that side, repaired from the other, and replay still
 *     finds every record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cairn/spa.h>
#include <cairn/zil.h>

#include "../../src/spa/spa_impl.h"
#include "pool_fixture.h"

#define BLK 4096

typedef struct mfx {
    char dir[512];
    char path[2][600];
    char name[64];
    spa_t *spa;
    objset_t *os;
    uint64_t obj;
    zilog_t *zl;
} mfx_t;

static void mfx_import(mfx_t *m)
{
    const char *paths[] = {m->path[0], m->path[1]};
    char err[256] = "";
    int e = spa_import(m->name, paths, 2, SPA_IMPORT_FORCE, &m->spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(dmu_objset_open(m->spa, "fs", &m->os), 0);
}

static void mfx_make(mfx_t *m)
{
    memset(m, 0, sizeof *m);
    dmu_init();
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(m->dir, sizeof m->dir, "%s/zilcksum.XXXXXX", base);
    assert_non_null(mkdtemp(m->dir));
    spa_vdev_spec_t leaves[2];
    for (int i = 0; i < 2; i++) {
        snprintf(m->path[i], sizeof m->path[i], "%s/leaf%d", m->dir, i);
        int fd = open(m->path[i], O_CREAT | O_RDWR | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)(256 * CAIRN_MIB)), 0);
        close(fd);
        leaves[i] = (spa_vdev_spec_t){.type = VDEV_TYPE_LEAF, .path = m->path[i]};
    }
    snprintf(m->name, sizeof m->name, "zilcksum%u", (unsigned)getpid());
    spa_vdev_spec_t mirror = {.type = VDEV_TYPE_MIRROR, .nchildren = 2, .children = leaves};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &mirror};
    char err[256] = "";
    int e = spa_create(m->name, &root, NULL, &m->spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    /* txgs sync only when asked: a crash loses everything not in the log */
    assert_int_equal(spa_prop_set(m->spa, "txg_timeout", "300", err, sizeof err), 0);
    assert_int_equal(dmu_objset_create(m->spa, "fs", NULL), 0);
    assert_int_equal(dmu_objset_open(m->spa, "fs", &m->os), 0);
    dmu_object_props_t props = {.recordsize = BLK, .compress = CAIRN_COMPRESS_OFF,
                                .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1};
    dmu_tx_t *tx = dmu_tx_begin(m->os);
    assert_int_equal(dmu_object_alloc(m->os, &props, &m->obj, tx), 0);
    dmu_tx_commit(tx);
    assert_int_equal(spa_txg_wait_synced(m->spa, 0), 0);
    assert_int_equal(zil_open(m->os, zil_replay_dmu, m->os, &m->zl), 0);
    assert_int_equal(spa_txg_wait_synced(m->spa, 0), 0);
}

static void pattern(uint8_t *b, uint64_t tag)
{
    for (int i = 0; i < BLK; i++) b[i] = (uint8_t)(tag * 13 + i * 5 + 3) | 1;
}

/* Blocks [first, first + n) written, logged and committed, in no synced txg. */
static void committed_writes(mfx_t *m, uint64_t first, uint64_t n)
{
    for (uint64_t i = first; i < first + n; i++) {
        uint8_t b[BLK];
        pattern(b, i);
        dmu_tx_t *tx = dmu_tx_begin(m->os);
        assert_int_equal(dmu_write(m->os, m->obj, i * BLK, BLK, b, tx), 0);
        uint64_t txg = dmu_tx_txg(tx);
        dmu_tx_commit(tx);
        zil_log(m->zl, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = m->obj,
                                    .off = i * BLK, .len = BLK});
        assert_int_equal(zil_commit(m->zl, 0), 0);
    }
}

static void crash(mfx_t *m)
{
    zil_abandon(m->zl);
    m->zl = NULL;
    spa_abandon(m->spa);
    m->spa = NULL;
    m->os = NULL;
}

static uint64_t side_cksum(mfx_t *m, int side)
{
    return atomic_load(&m->spa->root->children[0]->children[side]->stats.checksum_errors);
}

static void replay_and_verify(mfx_t *m, uint64_t nblocks, uint64_t want_replayed)
{
    assert_int_equal(zil_open(m->os, zil_replay_dmu, m->os, &m->zl), 0);
    zil_stats_t st;
    zil_get_stats(m->zl, &st);
    assert_int_equal(st.replayed, want_replayed);
    for (uint64_t i = 0; i < nblocks; i++) {
        uint8_t b[BLK], g[BLK];
        pattern(b, i);
        assert_int_equal(dmu_read(m->os, m->obj, i * BLK, BLK, g), 0);
        assert_memory_equal(b, g, BLK);
    }
}

static void test_replay_charges_nothing(void **state)
{
    (void)state;
    mfx_t m;
    mfx_make(&m);
    committed_writes(&m, 0, 8);
    crash(&m);
    mfx_import(&m);
    replay_and_verify(&m, 8, 8);
    /* The import's walk and replay both read up to the chain's unwritten end. */
    assert_int_equal(side_cksum(&m, 0), 0);
    assert_int_equal(side_cksum(&m, 1), 0);
    assert_int_equal(atomic_load(&m.spa->root->children[0]->stats.checksum_errors), 0);
    zil_close(m.zl);
    dmu_objset_close(m.os);
    assert_int_equal(spa_export(m.spa), 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", m.dir);
    assert_int_equal(system(cmd), 0);
}

static void test_corrupt_block_still_counts(void **state)
{
    (void)state;
    mfx_t m;
    mfx_make(&m);
    committed_writes(&m, 0, 4);
    spa_log_header_t h;
    spa_log_header_get(m.spa, dmu_objset_id(m.os), &h);
    assert_true(h.chain_guid != 0);
    cairn_dva_t head = h.head;
    crash(&m);
    /* The mirror reads a block's side (offset >> 20) % 2 first: that one is
     * made bad, so the read meets it (a bad side never read is never known). */
    int bad = (int)((head.offset >> 20) % 2);
    int fd = open(m.path[bad], O_RDWR);
    assert_true(fd >= 0);
    off_t at = (off_t)(VDEV_DATA_START + head.offset + SPA_LOG_BLOCK_FRAME + 40);
    uint8_t byte;
    assert_int_equal(pread(fd, &byte, 1, at), 1);
    byte ^= 0x5a;
    assert_int_equal(pwrite(fd, &byte, 1, at), 1);
    close(fd);
    mfx_import(&m);
    /* Counted once, by the import's walk, which repaired it from the other side. */
    assert_int_equal(side_cksum(&m, bad), 1);
    assert_int_equal(side_cksum(&m, 1 - bad), 0);
    replay_and_verify(&m, 4, 4);
    assert_int_equal(side_cksum(&m, bad), 1);
    assert_int_equal(side_cksum(&m, 1 - bad), 0);
    zil_close(m.zl);
    dmu_objset_close(m.os);
    assert_int_equal(spa_export(m.spa), 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", m.dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_charges_nothing),
        cmocka_unit_test(test_corrupt_block_still_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
