/*
 * Pool layer tests, driven through a toy upper layer (spa_toy_upper.h):
 * every layout created, written, exported, imported and checked; corruption
 * on mirror sides and up to P raidz leaves (labels included) healed by reads
 * and scrub; a missing leaf imported DEGRADED; and power cuts at random
 * moments on fault-injecting leaves, after which the pool must import to its
 * last durable txg and pass the offline check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "spa_toy_upper.h"
#include "wait_until.h"

#include "../../src/spa/spa_impl.h"

#include <cairn/vdev_fault.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEAF_SIZE (128 * CAIRN_MIB)

typedef struct fixture {
    char dir[512];
    char paths[8][600];
    int nleaves;
} fixture_t;

static uint64_t test_seed(void)
{
    const char *s = getenv("CAIRN_TEST_SEED");
    return s ? strtoull(s, NULL, 0) : 20261122;
}

static bool long_mode(void) { return getenv("CAIRN_TEST_LONG") != NULL; }

static void fixture_init(fixture_t *f, const char *name, int nleaves)
{
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof f->dir, "%s/spa_%s_%d_XXXXXX", base, name, getpid());
    assert_non_null(mkdtemp(f->dir));
    f->nleaves = nleaves;
    for (int i = 0; i < nleaves; i++) {
        snprintf(f->paths[i], sizeof f->paths[i], "%s/d%d.img", f->dir, i);
        int fd = open(f->paths[i], O_CREAT | O_RDWR | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)LEAF_SIZE), 0);
        close(fd);
    }
}

static void fixture_fini(fixture_t *f)
{
    for (int i = 0; i < f->nleaves; i++) unlink(f->paths[i]);
    rmdir(f->dir);
}

/* layout: "single" (1 leaf), "mirror2", "mirror3", "raidz1" (4), "raidz2" (5), "raidz3" (6),
 * "stripe2" (two single leaves). Leaf paths get prefix (e.g. "fault:"). */
static spa_vdev_spec_t *make_spec(fixture_t *f, const char *layout, const char *prefix,
                                  char paths[][620])
{
    static spa_vdev_spec_t root, tops[8], leaves[8];
    memset(&root, 0, sizeof root);
    memset(tops, 0, sizeof tops);
    memset(leaves, 0, sizeof leaves);
    for (int i = 0; i < f->nleaves; i++) {
        snprintf(paths[i], 620, "%s%s", prefix, f->paths[i]);
        leaves[i].type = VDEV_TYPE_LEAF;
        leaves[i].path = paths[i];
    }
    root.type = VDEV_TYPE_ROOT;
    if (!strcmp(layout, "single")) {
        root.nchildren = 1;
        root.children = leaves;
    } else if (!strcmp(layout, "stripe2")) {
        root.nchildren = 2;
        root.children = leaves;
    } else if (!strncmp(layout, "mirror", 6)) {
        tops[0].type = VDEV_TYPE_MIRROR;
        tops[0].nchildren = (uint32_t)f->nleaves;
        tops[0].children = leaves;
        root.nchildren = 1;
        root.children = tops;
    } else if (!strncmp(layout, "raidz", 5)) {
        tops[0].type = VDEV_TYPE_RAIDZ;
        tops[0].nparity = (uint32_t)(layout[5] - '0');
        tops[0].nchildren = (uint32_t)f->nleaves;
        tops[0].children = leaves;
        root.nchildren = 1;
        root.children = tops;
    } else if (!strcmp(layout, "mirror2x2")) {
        /* handled by the caller */
    }
    return &root;
}

static int layout_leaves(const char *layout)
{
    if (!strcmp(layout, "single")) return 1;
    if (!strcmp(layout, "stripe2")) return 2;
    if (!strcmp(layout, "mirror2")) return 2;
    if (!strcmp(layout, "mirror3")) return 3;
    if (!strcmp(layout, "raidz1")) return 4;
    if (!strcmp(layout, "raidz2")) return 5;
    if (!strcmp(layout, "raidz3")) return 6;
    return 0;
}

static spa_t *create_pool(fixture_t *f, const char *layout, const char *prefix)
{
    static char paths[8][620];
    spa_vdev_spec_t *root = make_spec(f, layout, prefix, paths);
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_create("tank", root, NULL, &spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    assert_non_null(spa);
    return spa;
}

static spa_t *import_pool(fixture_t *f, int flags)
{
    const char *paths[] = {f->dir};
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_import("tank", paths, 1, flags, &spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_import: %s\n", err);
    assert_int_equal(e, 0);
    return spa;
}

static void check_pool(fixture_t *f)
{
    const char *paths[] = {f->dir};
    spa_check_report_t rep;
    char err[256] = "";
    int e = spa_check("tank", paths, 1, &rep, err, sizeof err);
    if (e) fprintf(stderr, "spa_check: %s\n", err);
    assert_int_equal(e, 0);
    assert_true(rep.blocks > 0);
    assert_int_equal(rep.bytes_referenced, rep.bytes_allocated);
}

static const cairn_compress_t codecs[] = {
    CAIRN_COMPRESS_OFF, CAIRN_COMPRESS_LZ4, CAIRN_COMPRESS_LZJB, CAIRN_COMPRESS_GZIP(2),
    CAIRN_COMPRESS_ZLE,
};
static const cairn_checksum_t cksums[] = {CAIRN_CHECKSUM_FLETCHER4, CAIRN_CHECKSUM_XXHASH,
                                          CAIRN_CHECKSUM_SHA256};

/* Writes every slot across a few txgs with varied sizes, codecs, checksums and copies. */
static void fill_pool(spa_t *spa, cairn_rng_t *r, int rounds)
{
    for (int round = 0; round < rounds; round++) {
        for (int s = 0; s < TOY_SLOTS; s++) {
            if (round && cairn_rng_below(r, 3)) continue;
            uint64_t size = 512ULL << cairn_rng_below(r, 12); /* 512 B .. 1 MiB */
            if (cairn_rng_below(r, 4) == 0) size += 24 * cairn_rng_below(r, 100); /* odd sizes */
            toy_write(spa, s, cairn_rng_next(r), size, codecs[cairn_rng_below(r, 5)],
                      cksums[cairn_rng_below(r, 3)], 1 + (int)cairn_rng_below(r, 3));
        }
        assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    }
}

static void run_layout(const char *layout)
{
    fixture_t f;
    fixture_init(&f, layout, layout_leaves(layout));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed());
    spa_t *spa = create_pool(&f, layout, "");
    fill_pool(spa, &r, 3);
    toy_state_t *t = spa_get_upper_private(spa);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = t->root;
    assert_int_equal(toy_verify(spa, NULL), 0);
    /* Let the defer window pass so no free is pending on either side of the export. */
    for (int i = 0; i <= SPA_DEFER_TXGS; i++) assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    spa_space_t sp;
    spa_get_space(spa, &sp);
    assert_true(sp.alloc > 0 && sp.alloc < sp.size);
    assert_int_equal(spa_export(spa), 0);

    spa = import_pool(&f, 0);
    assert_int_equal(spa_health(spa), VDEV_STATE_ONLINE);
    assert_int_equal(toy_verify(spa, expect), 0);
    for (int i = 0; i <= SPA_DEFER_TXGS; i++) assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    spa_space_t sp2;
    spa_get_space(spa, &sp2);
    assert_int_equal(sp2.alloc, sp.alloc); /* the space map log rebuilt the same state */
    /* Rewrite some, so frees and the defer window are exercised across an import. */
    fill_pool(spa, &r, 2);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    spa = import_pool(&f, 0);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_destroy(spa), 0);
    /* A destroyed pool is not imported. */
    const char *paths[] = {f.dir};
    char err[256];
    assert_int_not_equal(spa_import("tank", paths, 1, 0, &spa, err, sizeof err), 0);
    free(expect);
    fixture_fini(&f);
}

static void test_layout_single(void **s) { (void)s; run_layout("single"); }
static void test_layout_stripe2(void **s) { (void)s; run_layout("stripe2"); }
static void test_layout_mirror2(void **s) { (void)s; run_layout("mirror2"); }
static void test_layout_mirror3(void **s) { (void)s; run_layout("mirror3"); }
static void test_layout_raidz1(void **s) { (void)s; run_layout("raidz1"); }
static void test_layout_raidz2(void **s) { (void)s; run_layout("raidz2"); }
static void test_layout_raidz3(void **s) { (void)s; run_layout("raidz3"); }

/* Overwrites nchunks random 4 KiB chunks of the data area, and labels 0 and 1. */
static void corrupt_leaf(const char *path, cairn_rng_t *r, int nchunks, bool labels)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t junk[4096];
    uint64_t span = LEAF_SIZE - VDEV_DATA_START - VDEV_END_RESERVE;
    /* Most writes land in the first 16 MiB of the data area, where the blocks are. */
    for (int i = 0; i < nchunks; i++) {
        for (size_t k = 0; k < sizeof junk; k++) junk[k] = (uint8_t)cairn_rng_next(r);
        uint64_t lim = i % 4 ? 16 * CAIRN_MIB : span;
        uint64_t off = VDEV_DATA_START + CAIRN_P2ALIGN(cairn_rng_below(r, lim - 4096), 4096ULL);
        assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)off), (ssize_t)sizeof junk);
    }
    if (labels) {
        memset(junk, 0xa5, sizeof junk);
        for (uint64_t off = 0; off < 2 * VDEV_LABEL_SIZE; off += sizeof junk)
            assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)off), (ssize_t)sizeof junk);
    }
    close(fd);
}

static void run_heal(const char *layout, int nbad)
{
    fixture_t f;
    fixture_init(&f, layout, layout_leaves(layout));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 7);
    spa_t *spa = create_pool(&f, layout, "");
    fill_pool(spa, &r, 2);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    assert_int_equal(spa_export(spa), 0);

    for (int i = 0; i < nbad; i++) corrupt_leaf(f.paths[i], &r, 600, true);

    spa = import_pool(&f, 0);
    assert_int_equal(toy_verify(spa, expect), 0);       /* reads heal or reconstruct */
    assert_int_equal(spa_scrub_start(spa), 0);
    spa_scrub_wait(spa);
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    assert_int_equal(st.state, SPA_SCRUB_FINISHED);
    assert_int_equal(st.errors, 0);
    assert_true(st.examined > 0);
    assert_true(st.repaired > 0);
    /* Errors were counted on the leaves that lied. */
    uint64_t cksum_errors = 0;
    for (uint32_t t = 0; t < spa_root_vdev(spa)->nchildren; t++) {
        vdev_t *top = spa_root_vdev(spa)->children[t];
        for (uint32_t c = 0; c < top->nchildren; c++)
            cksum_errors += atomic_load(&top->children[c]->stats.checksum_errors);
    }
    assert_true(cksum_errors > 0);
    assert_int_equal(spa_scrub_start(spa), 0);
    spa_scrub_wait(spa);
    spa_scrub_get(spa, &st);
    assert_int_equal(st.repaired, 0);                     /* nothing left to repair */
    assert_int_equal(st.errors, 0);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    free(expect);
    fixture_fini(&f);
}

/* ---- gang blocks: a block no free extent holds whole ---- */

/* Takes all of top-level vdev 0's free space, then frees every other sector of
 * it and, every 16th chunk of 256 KiB, its first 64 KiB: the largest free extent
 * is then well under 128 KiB while the pool has megabytes free. Returns the
 * bytes still held (allocated, referenced by nothing) for the caller to free. */
static void hold_push(uint64_t **v, size_t *n, size_t *cap, uint64_t off)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *v = cairn_realloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = off;
}

/* Takes all of top-level vdev 0's free space in chunks of 256 KiB and gives
 * back at once (metaslab_unalloc: free now, no record) every other grain of
 * each (a grain: what a one-sector block allocates, two sectors on raidz1)
 * and the first 64 KiB of every 16th: the largest free extent is then
 * well under 128 KiB while megabytes are free. The tail that no chunk took is
 * held in 128 KiB pieces. Returns the bytes held (allocated, referenced by
 * nothing), each sector's offset in *held for the caller to free. */
static uint64_t fragment_free_space(spa_t *spa, uint64_t **held, size_t *nheld)
{
    metaslab_t *ms = spa->ms[0];
    uint64_t unit = vdev_psize_to_asize(spa->root->children[0], 1ULL << spa->ashift);
    uint64_t chunk = 256 * 1024, run = 64 * 1024, piece = 128 * 1024;
    uint64_t txg = spa_tx_hold_nowait(spa);
    uint64_t *v = NULL, bytes = 0, off;
    size_t n = 0, cap = 0;
    for (uint64_t k = 0; metaslab_alloc(ms, txg, chunk, &off) == 0; k++) {
        for (uint64_t at = 0; at < chunk; at += unit) {
            if ((k % 16 == 0 && at < run) || (at / unit) % 2) {
                assert_int_equal(metaslab_unalloc(ms, txg, off + at, unit), 0);
            } else {
                hold_push(&v, &n, &cap, off + at);
                bytes += unit;
            }
        }
    }
    while (metaslab_alloc(ms, txg, piece, &off) == 0) {
        for (uint64_t at = 0; at < piece; at += unit) hold_push(&v, &n, &cap, off + at);
        bytes += piece;
    }
    spa_tx_rele(spa, txg);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    metaslab_stats_t st;
    metaslab_get_stats(ms, &st);
    assert_true(st.largest_free < piece);
    assert_true(st.free > 8 * CAIRN_MIB);
    *held = v;
    *nheld = n;
    return bytes;
}

static void run_gang(const char *layout)
{
    fixture_t f;
    fixture_init(&f, layout, layout_leaves(layout));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 11);
    spa_t *spa = create_pool(&f, layout, "");
    uint64_t *held;
    size_t nheld;
    uint64_t held_bytes = fragment_free_space(spa, &held, &nheld);
    uint64_t before = atomic_load(&spa->gang_blocks);
    /* Raw 128 KiB and 1 MiB blocks (32 and 256 sectors of 4 KiB: fragments of
     * fragments), with one and two copies. */
    toy_write(spa, 0, cairn_rng_next(&r), 128 * 1024, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_SHA256, 1);
    toy_write(spa, 1, cairn_rng_next(&r), 1024 * 1024, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_FLETCHER4, 1);
    toy_write(spa, 2, cairn_rng_next(&r), 200 * 1024 + 24, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_XXHASH, 2);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    assert_true(atomic_load(&spa->gang_blocks) >= before + 3);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    for (int sl = 0; sl < 3; sl++) assert_true(cairn_bp_is_gang(&expect->slot[sl].bp));
    assert_int_equal(toy_verify(spa, expect), 0);
    for (int i = 0; i <= SPA_DEFER_TXGS; i++) assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    assert_int_equal(spa_export(spa), 0);

    /* The check walks the fragments: the only unreferenced space is what this
     * test holds, to the byte. */
    const char *paths[] = {f.dir};
    spa_check_report_t rep;
    char err[256] = "";
    spa_check("tank", paths, 1, &rep, err, sizeof err);
    assert_int_equal(rep.bad_blocks, 0);
    assert_int_equal(rep.double_bytes, 0);
    assert_true(rep.gang_blocks >= 3);
    assert_int_equal(rep.leaked_bytes, held_bytes);

    if (f.nleaves > 1) corrupt_leaf(f.paths[0], &r, 600, false);
    spa = import_pool(&f, 0);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_scrub_start(spa), 0);
    spa_scrub_wait(spa);
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    assert_int_equal(st.state, SPA_SCRUB_FINISHED);
    assert_int_equal(st.errors, 0);
    if (f.nleaves > 1) assert_true(st.repaired > 0);

    /* Overwritten, the gang blocks free everything they held; so do we. */
    for (int sl = 0; sl < 3; sl++)
        toy_write(spa, sl, cairn_rng_next(&r), 4096, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_FLETCHER4, 1);
    uint64_t txg = spa_tx_hold_nowait(spa);
    uint64_t grain = vdev_psize_to_asize(spa->root->children[0], 1ULL << spa->ashift);
    for (size_t i = 0; i < nheld; i++)
        assert_int_equal(metaslab_free(spa->ms[0], txg, held[i], grain), 0);
    spa_tx_rele(spa, txg);
    for (int i = 0; i <= SPA_DEFER_TXGS + 1; i++) assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    free(held);
    free(expect);
    fixture_fini(&f);
}

static void test_gang_single(void **s) { (void)s; run_gang("single"); }
static void test_gang_mirror2(void **s) { (void)s; run_gang("mirror2"); }
static void test_gang_raidz1(void **s) { (void)s; run_gang("raidz1"); }

static void test_heal_mirror2(void **s) { (void)s; run_heal("mirror2", 1); }
static void test_heal_mirror3(void **s) { (void)s; run_heal("mirror3", 2); }
static void test_heal_raidz1(void **s) { (void)s; run_heal("raidz1", 1); }
static void test_heal_raidz2(void **s) { (void)s; run_heal("raidz2", 2); }
static void test_heal_raidz3(void **s) { (void)s; run_heal("raidz3", 3); }

/* Offline leaves, writes, export and import, online: the dirty time logs name
 * exactly the txgs the leaves missed and survive the export; the resilver
 * rewrites only blocks born in them (far less than the pool holds), empties
 * the logs, and a scrub afterwards repairs nothing. One more offline than the
 * layout survives is refused and changes nothing. */
static void run_offline_resilver(const char *layout, int noff)
{
    fixture_t f;
    fixture_init(&f, layout, layout_leaves(layout));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 21);
    spa_t *spa = create_pool(&f, layout, "");
    fill_pool(spa, &r, 2);
    char err[256] = "";
    uint64_t synced = spa_last_synced_txg(spa);
    for (int i = 1; i <= noff; i++)
        assert_int_equal(spa_vdev_offline(spa, f.paths[i], false, err, sizeof err), 0);
    assert_int_equal(spa_vdev_offline(spa, f.paths[0], false, err, sizeof err), -EBUSY);
    assert_non_null(strstr(err, "no valid replicas"));
    vdev_t *top = spa_root_vdev(spa)->children[0];
    assert_int_equal(atomic_load(&top->children[0]->state), VDEV_STATE_ONLINE);
    assert_int_equal(spa_health(spa), VDEV_STATE_DEGRADED);
    for (int i = 1; i <= noff; i++) {
        vdev_t *l = top->children[i];
        assert_int_equal(l->ndtl, 1);
        assert_true(l->dtl[0][0] > synced - 1 && l->dtl[0][1] == UINT64_MAX);
    }
    /* A little written while they are out. */
    for (int s = 0; s < 4; s++)
        toy_write(spa, s, cairn_rng_next(&r), 65536, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_SHA256, 1);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    assert_int_equal(spa_export(spa), 0);

    spa = import_pool(&f, 0);
    top = spa_root_vdev(spa)->children[0];
    for (int i = 1; i <= noff; i++) {
        assert_int_equal(atomic_load(&top->children[i]->state), VDEV_STATE_OFFLINE);
        assert_int_equal(top->children[i]->ndtl, 1);
    }
    assert_int_equal(toy_verify(spa, expect), 0);
    spa_space_t sp;
    spa_get_space(spa, &sp);
    for (int i = 1; i <= noff; i++)
        assert_int_equal(spa_vdev_online(spa, f.paths[i], err, sizeof err), 0);
    spa_scan_wait(spa, SPA_SCAN_RESILVER);
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    assert_int_equal(st.func, SPA_SCAN_RESILVER);
    assert_int_equal(st.state, SPA_SCRUB_FINISHED);
    assert_int_equal(st.errors, 0);
    assert_true(st.repaired > 0);
    assert_true(st.repaired < sp.alloc / 8); /* only the missed txgs' blocks */
    assert_true(st.issued <= st.examined);
    /* Subtrees born before the logs are not even walked. */
    assert_true(st.scanned < sp.alloc / 2);
    for (int i = 1; i <= noff; i++) {
        assert_int_equal(top->children[i]->ndtl, 0);
        assert_false(atomic_load(&top->children[i]->stale));
    }
    assert_int_equal(spa_health(spa), VDEV_STATE_ONLINE);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_scrub_start(spa), 0);
    spa_scrub_wait(spa);
    spa_scrub_get(spa, &st);
    assert_int_equal(st.repaired, 0);
    assert_int_equal(st.errors, 0);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    free(expect);
    fixture_fini(&f);
}

static void test_offline_resilver_mirror2(void **s) { (void)s; run_offline_resilver("mirror2", 1); }
static void test_offline_resilver_raidz2(void **s) { (void)s; run_offline_resilver("raidz2", 2); }

/* A leaf that turns stale as a resilver ends (here: brought online while the
 * resilver, its work found done, has not ended yet) saw the resilver running
 * and started none; the resilver must take it in another pass. It used to end
 * regardless, leaving the leaf stale - shown "(resilvering)" with no resilver
 * to come, a replacement never finishing. */
static void test_resilver_takes_leaf_stale_at_its_end(void **s)
{
    (void)s;
    fixture_t f;
    fixture_init(&f, "mirror3", layout_leaves("mirror3"));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 31);
    spa_t *spa = create_pool(&f, "mirror3", "");
    fill_pool(spa, &r, 1);
    char err[256] = "";
    for (int i = 1; i <= 2; i++) assert_int_equal(spa_vdev_offline(spa, f.paths[i], false, err, sizeof err), 0);
    for (int sl = 0; sl < 4; sl++)
        toy_write(spa, sl, cairn_rng_next(&r), 65536, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_SHA256, 1);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;

    vdev_t *top = spa_root_vdev(spa)->children[0];
    spa_scan_test_hold_end(true);
    assert_int_equal(spa_vdev_online(spa, f.paths[1], err, sizeof err), 0);
    WAIT_UNTIL(spa_scan_test_end_held(), "the resilver of leaf 1 reaches its end");
    assert_false(atomic_load(&top->children[1]->stale));
    assert_int_equal(spa_vdev_online(spa, f.paths[2], err, sizeof err), 0);
    assert_true(atomic_load(&top->children[2]->stale));
    spa_scan_test_hold_end(false);
    spa_scan_wait(spa, SPA_SCAN_RESILVER);
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    assert_int_equal(st.func, SPA_SCAN_RESILVER);
    assert_int_equal(st.state, SPA_SCRUB_FINISHED);
    assert_false(atomic_load(&top->children[2]->stale));
    assert_int_equal(top->children[2]->ndtl, 0);
    assert_int_equal(spa_health(spa), VDEV_STATE_ONLINE);

    /* Leaf 2 alone serves every block. */
    assert_int_equal(spa_vdev_offline(spa, f.paths[0], false, err, sizeof err), 0);
    assert_int_equal(spa_vdev_offline(spa, f.paths[1], false, err, sizeof err), 0);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_vdev_online(spa, f.paths[0], err, sizeof err), 0);
    assert_int_equal(spa_vdev_online(spa, f.paths[1], err, sizeof err), 0);
    spa_scan_wait(spa, SPA_SCAN_RESILVER);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    free(expect);
    fixture_fini(&f);
}

typedef struct scan_starter {
    spa_t *spa;
    int rc;
} scan_starter_t;

static void *start_scrub(void *arg)
{
    scan_starter_t *a = arg;
    a->rc = spa_scrub_start(a->spa);
    return NULL;
}

/* A scan is running, as status and `pool wait` see it, from the moment it is
 * started: the txg sync it begins with (what was written so far joins the
 * walked tree) is its own first step. It used to come before the scan showed
 * as running, so for a whole sync a resilver that a spare or a disk back made
 * due was nowhere, and `pool wait -t resilver` returned at once. Here every
 * leaf's flushes wait at a gate, so that sync cannot end until the test lets
 * it: the scan must show as running meanwhile. */
static void test_scan_runs_before_its_first_sync(void **s)
{
    (void)s;
    fixture_t f;
    fixture_init(&f, "mirror2", layout_leaves("mirror2"));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 41);
    vdev_fault_reset();
    spa_t *spa = create_pool(&f, "mirror2", "fault:");
    fill_pool(spa, &r, 1);
    for (int i = 0; i < f.nleaves; i++) assert_int_equal(vdev_fault_gate_flushes(f.paths[i], true), 0);
    toy_write(spa, 0, cairn_rng_next(&r), 65536, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_SHA256, 1);
    scan_starter_t a = {.spa = spa, .rc = -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, start_scrub, &a), 0);
    spa_scrub_stat_t st;
    WAIT_UNTIL((spa_scrub_get(spa, &st), st.state == SPA_SCRUB_SCANNING), "the scrub shows as running");
    assert_int_equal(st.func, SPA_SCAN_SCRUB);
    for (int i = 0; i < f.nleaves; i++) assert_int_equal(vdev_fault_gate_flushes(f.paths[i], false), 0);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, 0);
    spa_scrub_wait(spa);
    spa_scrub_get(spa, &st);
    assert_int_equal(st.state, SPA_SCRUB_FINISHED);
    assert_int_equal(st.errors, 0);
    assert_int_equal(toy_verify(spa, NULL), 0);
    assert_int_equal(spa_export(spa), 0);
    vdev_fault_reset();
    check_pool(&f);
    fixture_fini(&f);
}

/* Ditto copies on a single disk: a corrupted copy is repaired from the other one. */
static void test_heal_ditto_single(void **s)
{
    (void)s;
    fixture_t f;
    fixture_init(&f, "ditto", 1);
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 11);
    spa_t *spa = create_pool(&f, "single", "");
    for (int sl = 0; sl < TOY_SLOTS; sl++)
        toy_write(spa, sl, cairn_rng_next(&r), 64 * 1024, CAIRN_COMPRESS_OFF,
                  CAIRN_CHECKSUM_FLETCHER4, 2);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    assert_int_equal(spa_export(spa), 0);
    /* Corrupt the first copy of every slot's block. */
    int fd = open(f.paths[0], O_RDWR);
    uint8_t junk[4096];
    memset(junk, 0x5a, sizeof junk);
    for (int sl = 0; sl < TOY_SLOTS; sl++) {
        uint64_t off = VDEV_DATA_START + expect->slot[sl].bp.dva[0].offset;
        assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)off), (ssize_t)sizeof junk);
    }
    close(fd);
    spa = import_pool(&f, 0);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    free(expect);
    fixture_fini(&f);
}

static void test_missing_leaf_degraded(void **s)
{
    (void)s;
    fixture_t f;
    fixture_init(&f, "missing", 4);
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 3);
    spa_t *spa = create_pool(&f, "raidz1", "");
    fill_pool(spa, &r, 1);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    assert_int_equal(spa_export(spa), 0);
    unlink(f.paths[2]);
    spa = import_pool(&f, 0);
    assert_int_equal(spa_health(spa), VDEV_STATE_DEGRADED);
    assert_int_equal(toy_verify(spa, expect), 0);
    /* Still writable: redundancy covers the missing leaf. */
    fill_pool(spa, &r, 1);
    assert_int_equal(toy_verify(spa, NULL), 0);
    assert_int_equal(spa_export(spa), 0);
    /* A second missing leaf is more than raidz1 covers. */
    unlink(f.paths[1]);
    const char *paths[] = {f.dir};
    char err[256] = "";
    assert_int_not_equal(spa_import("tank", paths, 1, 0, &spa, err, sizeof err), 0);
    assert_non_null(strstr(err, "missing"));
    free(expect);
    fixture_fini(&f);
}

/* A compressed block goes to disk padded to a whole sector, and the padding is
 * zeros however much the compression buffers held from earlier blocks: stale
 * memory never lands on a device. */
static void test_compressed_padding_zeroed(void **s)
{
    (void)s;
    fixture_t f;
    fixture_init(&f, "pad", 1);
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed());
    spa_t *spa = create_pool(&f, "single", "");
    /* Rounds of varied sizes leave compressed bytes all over the write buffers. */
    for (int round = 0; round < 4; round++) {
        for (int sl = 0; sl < TOY_SLOTS; sl++)
            toy_write(spa, sl, cairn_rng_next(&r), 4096 + 512 * cairn_rng_below(&r, 57),
                      CAIRN_COMPRESS_LZ4, CAIRN_CHECKSUM_FLETCHER4, 1);
        assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    }
    toy_state_t *t = spa_get_upper_private(spa);
    uint64_t sector = 1ULL << spa->ashift;
    int fd = open(f.paths[0], O_RDONLY);
    assert_true(fd >= 0);
    int checked = 0;
    for (int sl = 0; sl < TOY_SLOTS; sl++) {
        const cairn_blkptr_t *bp = &t->root.slot[sl].bp;
        if (cairn_bp_is_hole(bp) || bp->compress == CAIRN_COMPRESS_OFF) continue;
        uint64_t len = CAIRN_P2ROUNDUP((uint64_t)bp->psize, sector);
        if (len == bp->psize) continue;
        uint8_t *buf = cairn_alloc_aligned(len);
        assert_int_equal(pread(fd, buf, len, (off_t)(VDEV_DATA_START + bp->dva[0].offset)),
                         (ssize_t)len);
        for (uint64_t i = bp->psize; i < len; i++)
            if (buf[i]) fail_msg("slot %d: byte %llu of the padding after %u is %#x", sl,
                                 (unsigned long long)i, bp->psize, buf[i]);
        free(buf);
        checked++;
    }
    close(fd);
    assert_true(checked > TOY_SLOTS / 2);
    assert_int_equal(toy_verify(spa, NULL), 0);
    assert_int_equal(spa_export(spa), 0);
    fixture_fini(&f);
}

static void test_create_refusals(void **s)
{
    (void)s;
    fixture_t f;
    fixture_init(&f, "refuse", 2);
    static char paths[8][620];
    spa_vdev_spec_t *root = make_spec(&f, "mirror2", "", paths);
    spa_t *spa = NULL;
    char err[256];
    /* Names. */
    assert_int_equal(spa_create("1tank", root, NULL, &spa, err, sizeof err), -EINVAL);
    assert_int_equal(spa_create("mirror", root, NULL, &spa, err, sizeof err), -EINVAL);
    /* A mirror of one. */
    root->children[0].nchildren = 1;
    assert_int_equal(spa_create("tank", root, NULL, &spa, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "at least 2"));
    root->children[0].nchildren = 2;
    /* The same device twice. */
    const char *saved = root->children[0].children[1].path;
    root->children[0].children[1].path = root->children[0].children[0].path;
    assert_int_equal(spa_create("tank", root, NULL, &spa, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "more than once"));
    root->children[0].children[1].path = saved;
    /* A file too small. */
    assert_int_equal(truncate(f.paths[1], 1024 * 1024), 0);
    assert_int_not_equal(spa_create("tank", root, NULL, &spa, err, sizeof err), 0);
    assert_non_null(strstr(err, "too small"));
    /* Nothing was written on the other device. */
    uint8_t buf[4096];
    int fd = open(f.paths[0], O_RDONLY);
    assert_int_equal(pread(fd, buf, sizeof buf, (off_t)(16 * 1024)), (ssize_t)sizeof buf);
    close(fd);
    for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(buf[i], 0);
    assert_int_equal(truncate(f.paths[1], (off_t)LEAF_SIZE), 0);
    /* In use by another pool: refused unless forced. */
    spa = create_pool(&f, "mirror2", "");
    assert_int_equal(spa_export(spa), 0);
    assert_int_equal(spa_create("other", root, NULL, &spa, err, sizeof err), -EEXIST);
    assert_non_null(strstr(err, "exported pool 'tank'"));
    spa_create_opts_t force = {.force = true};
    assert_int_equal(spa_create("other", root, &force, &spa, err, sizeof err), 0);
    assert_int_equal(spa_destroy(spa), 0);
    fixture_fini(&f);
}

/* Writers run while a power cut strikes at a random moment; the pool must come
 * back at a txg no older than the last one acknowledged durable, whole. */
static void run_powercut(const char *layout, int iterations)
{
    fixture_t f;
    fixture_init(&f, layout, layout_leaves(layout));
    cairn_rng_t r;
    cairn_rng_seed(&r, test_seed() + 99);
    vdev_fault_reset();
    uint64_t lost_writes = 0;
    spa_t *spa = create_pool(&f, layout, "fault:");
    assert_int_equal(spa_prop_set(spa, "txg_timeout", "1", NULL, 0), 0);
    /* Until some cut has struck writes in flight, up to 60 rounds more: where a cut
     * lands is timing, and a loaded machine once let all twelve land outside. */
    for (int it = 0; it < iterations || (lost_writes == 0 && it < iterations + 60); it++) {
        /* Some txgs that complete, then writes in flight when the power goes. */
        int full = 1 + (int)cairn_rng_below(&r, 3);
        uint64_t durable = 0;
        toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
        for (int k = 0; k < full; k++) {
            for (int n = 0; n < 20; n++)
                toy_write(spa, (int)cairn_rng_below(&r, TOY_SLOTS), cairn_rng_next(&r),
                          4096ULL << cairn_rng_below(&r, 6), codecs[cairn_rng_below(&r, 5)],
                          cksums[cairn_rng_below(&r, 3)], 1);
            assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
            durable = spa_last_synced_txg(spa);
            *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
        }
        for (int n = 0; n < 30; n++)
            toy_write(spa, (int)cairn_rng_below(&r, TOY_SLOTS), cairn_rng_next(&r),
                      4096ULL << cairn_rng_below(&r, 6), CAIRN_COMPRESS_LZ4,
                      CAIRN_CHECKSUM_FLETCHER4, 1);
        /* Kick a sync and cut the power somewhere inside it (or before/after).
         * Mostly inside: once the sync's first write is held, a few ms later -
         * a fixed sleep after the kick ends before the writes or after the
         * flush on a machine faster or slower than the one it was tuned on
         * (a txg's blocks written as one batch leave writes held for only a
         * few ms, and 0-30 ms then struck none in some runs). */
        uint64_t held0 = vdev_fault_stats().writes_held;
        spa_txg_kick(spa);
        if (cairn_rng_below(&r, 4) == 0) {
            usleep((useconds_t)cairn_rng_below(&r, 30000));
        } else {
            for (int w = 0; w < 1000 && vdev_fault_stats().writes_held == held0; w++) usleep(100);
            usleep((useconds_t)cairn_rng_below(&r, 3000));
        }
        vdev_fault_powercut(cairn_rng_next(&r), VDEV_FAULT_CUT_RANDOM);
        vdev_fault_stats_t fs = vdev_fault_stats();
        lost_writes += fs.cut_dropped + fs.cut_torn;
        spa_abandon(spa);
        vdev_fault_reset();

        check_pool(&f); /* the offline check first: nothing written before it */
        spa = import_pool(&f, SPA_IMPORT_FORCE);
        char txgbuf[32];
        spa_prop_get(spa, "txg", txgbuf, sizeof txgbuf);
        uint64_t got = strtoull(txgbuf, NULL, 10);
        assert_true(got >= durable);
        toy_state_t *t = spa_get_upper_private(spa);
        assert_int_equal(toy_verify(spa, NULL), 0);
        if (got == durable) assert_int_equal(toy_verify(spa, expect), 0);
        else assert_true(t->root.last_txg > expect->last_txg || t->root.last_txg == got);
        free(expect);
        spa_export(spa);
        /* Back on fault leaves for the next round. */
        const char *paths[8];
        char fpaths[8][620];
        for (int i = 0; i < f.nleaves; i++) {
            snprintf(fpaths[i], sizeof fpaths[i], "fault:%s", f.paths[i]);
            paths[i] = fpaths[i];
        }
        char err[256] = "";
        int e = spa_import("tank", paths, (size_t)f.nleaves, 0, &spa, err, sizeof err);
        if (e) fprintf(stderr, "reimport: %s\n", err);
        assert_int_equal(e, 0);
        spa_prop_set(spa, "txg_timeout", "1", NULL, 0);
    }
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    /* The cuts did strike writes in flight: the test exercised what it claims. */
    assert_true(lost_writes > 0);
    fixture_fini(&f);
}

static void test_powercut_mirror2(void **s) { (void)s; run_powercut("mirror2", long_mode() ? 200 : 12); }
static void test_powercut_raidz2(void **s) { (void)s; run_powercut("raidz2", long_mode() ? 200 : 12); }
static void test_powercut_single(void **s) { (void)s; run_powercut("single", long_mode() ? 200 : 12); }

int main(void)
{
    spa_register_upper(&toy_ops);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gang_single),
        cmocka_unit_test(test_gang_mirror2),
        cmocka_unit_test(test_gang_raidz1),
        cmocka_unit_test(test_layout_single),
        cmocka_unit_test(test_layout_stripe2),
        cmocka_unit_test(test_layout_mirror2),
        cmocka_unit_test(test_layout_mirror3),
        cmocka_unit_test(test_layout_raidz1),
        cmocka_unit_test(test_layout_raidz2),
        cmocka_unit_test(test_layout_raidz3),
        cmocka_unit_test(test_heal_mirror2),
        cmocka_unit_test(test_heal_mirror3),
        cmocka_unit_test(test_heal_raidz1),
        cmocka_unit_test(test_heal_raidz2),
        cmocka_unit_test(test_heal_raidz3),
        cmocka_unit_test(test_heal_ditto_single),
        cmocka_unit_test(test_offline_resilver_mirror2),
        cmocka_unit_test(test_offline_resilver_raidz2),
        cmocka_unit_test(test_resilver_takes_leaf_stale_at_its_end),
        cmocka_unit_test(test_scan_runs_before_its_first_sync),
        cmocka_unit_test(test_missing_leaf_degraded),
        cmocka_unit_test(test_create_refusals),
        cmocka_unit_test(test_compressed_padding_zeroed),
        cmocka_unit_test(test_powercut_single),
        cmocka_unit_test(test_powercut_mirror2),
        cmocka_unit_test(test_powercut_raidz2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
