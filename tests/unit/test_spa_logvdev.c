/*
 * Removing a log vdev that is not the last top-level vdev (src/spa/spa_vdev.c),
 * driven through the toy upper layer (spa_toy_upper.h) and the intent-log
 * space API:
 *   - the first of two log vdevs goes while a chain lives on the second: a
 *     hole keeps its id, so the chain's block pointers (vdev 2) stay valid
 *     across a crash, an export/import and the offline check;
 *   - a hole is not a device: it cannot be removed, holds no blocks;
 *   - a new log vdev fills the hole; holes left at the end are trimmed;
 *   - a crash between the removal's labels and its uberblock (simulated by
 *     wiping the newer uberblocks) leaves the old vdev's space map records and
 *     log region in the durable state: they are ignored, and the first sync
 *     after that import does not hand their id to a new vdev - else a second
 *     such crash would replay them onto it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "spa_toy_upper.h"

#include "../../src/spa/spa_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB CAIRN_MIB

typedef struct fixture {
    char dir[512];
    char d0[600], l1[600], l2[600], l3[600], l4[600];
} fixture_t;

static void make_file(const char *path, uint64_t size)
{
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

static void fixture_init(fixture_t *f, const char *name)
{
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof f->dir, "%s/spa_%s_%d_XXXXXX", base, name, getpid());
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->d0, sizeof f->d0, "%s/d0", f->dir);
    snprintf(f->l1, sizeof f->l1, "%s/l1", f->dir);
    snprintf(f->l2, sizeof f->l2, "%s/l2", f->dir);
    snprintf(f->l3, sizeof f->l3, "%s/l3", f->dir);
    snprintf(f->l4, sizeof f->l4, "%s/l4", f->dir);
    make_file(f->d0, 128 * MIB);
    make_file(f->l1, 96 * MIB); /* larger than l3: its region does not fit there */
    make_file(f->l2, 64 * MIB);
    make_file(f->l3, 64 * MIB);
    make_file(f->l4, 64 * MIB);
}

static void fixture_fini(fixture_t *f)
{
    const char *files[] = {f->d0, f->l1, f->l2, f->l3, f->l4};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(files); i++) unlink(files[i]);
    rmdir(f->dir);
}

/* d0 with log devices l1 and l2 (ids 0, 1, 2); txgs sync only when asked. */
static spa_t *create_pool(fixture_t *f)
{
    spa_vdev_spec_t tops[3] = {
        {.type = VDEV_TYPE_LEAF, .path = f->d0},
        {.type = VDEV_TYPE_LEAF, .path = f->l1, .vclass = VDEV_CLASS_LOG},
        {.type = VDEV_TYPE_LEAF, .path = f->l2, .vclass = VDEV_CLASS_LOG},
    };
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 3, .children = tops};
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_create("tank", &root, NULL, &spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    assert_int_equal(spa_prop_set(spa, "txg_timeout", "300", err, sizeof err), 0);
    for (int s = 0; s < 8; s++)
        toy_write(spa, s, 100 + (uint64_t)s, 64 * 1024, CAIRN_COMPRESS_LZ4, CAIRN_CHECKSUM_XXHASH, 1);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
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
    assert_int_equal(rep.leaked_bytes, 0);
    assert_int_equal(rep.double_bytes, 0);
}

static void remove_log(spa_t *spa, const char *name)
{
    char err[256] = "";
    int id = spa_vdev_remove_log_begin(spa, name, err, sizeof err);
    if (id < 0) fprintf(stderr, "remove %s: %s\n", name, err);
    assert_true(id >= 0);
    int e = spa_vdev_remove_log_commit(spa, (uint32_t)id, name, err, sizeof err);
    if (e) fprintf(stderr, "remove %s: %s\n", name, err);
    assert_int_equal(e, 0);
}

static void add_log(spa_t *spa, const char *path)
{
    spa_vdev_spec_t leaf = {.type = VDEV_TYPE_LEAF, .path = (char *)path, .vclass = VDEV_CLASS_LOG};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &leaf};
    char err[256] = "";
    int e = spa_vdev_add(spa, &root, false, err, sizeof err);
    if (e) fprintf(stderr, "add %s: %s\n", path, err);
    assert_int_equal(e, 0);
}

/* The top-level vdev at id: a hole (NULL path) or a single leaf with this path. */
static void expect_top(spa_t *spa, uint32_t id, const char *path)
{
    vdev_t *root = spa_root_vdev(spa);
    assert_true(id < root->nchildren);
    vdev_t *top = root->children[id];
    assert_int_equal(top->id, id);
    if (!path) {
        assert_int_equal(top->type, VDEV_TYPE_HOLE);
        return;
    }
    assert_int_equal(top->type, VDEV_TYPE_LEAF);
    assert_string_equal(top->path, path);
    assert_int_equal(top->alloc_class, VDEV_CLASS_LOG);
}

/* Wipes the uberblocks of txg >= from in every label of every file: as if the
 * pool had died after writing the labels of txg `from` but before its uberblock. */
static void forget_uberblocks(fixture_t *f, uint64_t from)
{
    const char *files[] = {f->d0, f->l1, f->l2, f->l3, f->l4};
    uint32_t slot = spa_ub_slot_size(VDEV_DEFAULT_ASHIFT);
    uint8_t *ring = malloc(SPA_LABEL_RING_SIZE);
    int wiped = 0;
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(files); i++) {
        int fd = open(files[i], O_RDWR);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        for (int l = 0; l < VDEV_LABELS; l++) {
            off_t off = (off_t)(vdev_label_offset((uint64_t)st.st_size, l) + SPA_LABEL_RING_OFFSET);
            assert_int_equal(pread(fd, ring, SPA_LABEL_RING_SIZE, off), SPA_LABEL_RING_SIZE);
            for (uint32_t s = 0; s < SPA_LABEL_RING_SIZE / slot; s++) {
                spa_uberblock_phys_t *ub = (spa_uberblock_phys_t *)(ring + (size_t)s * slot);
                if (ub->magic != SPA_UBERBLOCK_MAGIC || ub->txg < from) continue;
                memset(ub, 0, slot);
                wiped++;
            }
            assert_int_equal(pwrite(fd, ring, SPA_LABEL_RING_SIZE, off), SPA_LABEL_RING_SIZE);
        }
        assert_int_equal(fsync(fd), 0);
        close(fd);
    }
    free(ring);
    assert_true(wiped > 0);
}

static void test_remove_first_log_vdev(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, "holelog");
    spa_t *spa = create_pool(&f);
    toy_root_phys_t *expect = cairn_zalloc(sizeof *expect);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;

    /* l1 stops taking log blocks: a chain is started on l2, as the ZIL would. */
    char err[256] = "";
    int id = spa_vdev_remove_log_begin(spa, f.l1, err, sizeof err);
    if (id < 0) fprintf(stderr, "remove_log_begin: %s\n", err);
    assert_int_equal(id, 1);
    const uint64_t guid = 0xfeedf00d, os_id = 77;
    cairn_dva_t d[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(spa_log_alloc(spa, 8192, &d[i]), 0);
        assert_int_equal(d[i].vdev, 2);
    }
    char payload[100] = {0};
    uint8_t *block = spa_log_block_alloc();
    for (int i = 0; i < 3; i++) {
        snprintf(payload, sizeof payload, "record %d", i);
        memcpy(block + SPA_LOG_BLOCK_FRAME, payload, sizeof payload);
        assert_int_equal(spa_log_write_block(spa, &d[i], guid, 1 + (uint64_t)i, &d[i + 1], block,
                                             sizeof payload, 0), 0);
    }
    free(block);
    assert_int_equal(spa_log_flush(spa, d, 3, NULL), 0);
    spa_log_header_t h = {.chain_guid = guid, .head_seq = 1, .head = d[0]};
    uint64_t txg = spa_tx_hold_nowait(spa);
    spa_log_header_set(spa, os_id, &h, txg);
    spa_tx_rele(spa, txg);
    int e = spa_vdev_remove_log_commit(spa, 1, f.l1, err, sizeof err);
    if (e) fprintf(stderr, "remove_log_commit: %s\n", err);
    assert_int_equal(e, 0);

    /* The vdev after it keeps id 2; a hole holds id 1. */
    assert_int_equal(spa_root_vdev(spa)->nchildren, 3);
    expect_top(spa, 1, NULL);
    expect_top(spa, 2, f.l2);
    assert_true(spa_has_log_vdevs(spa));
    spa_space_t sp;
    spa_top_space(spa, 1, &sp);
    assert_int_equal(sp.size, 0);
    /* A hole is no device: nothing to remove there; data vdevs stay. */
    assert_int_equal(spa_vdev_remove_log_begin(spa, "hole-1", err, sizeof err), -ENOENT);
    assert_int_equal(spa_vdev_remove_log_begin(spa, f.l1, err, sizeof err), -ENOENT);
    assert_int_equal(spa_vdev_remove_log_begin(spa, f.d0, err, sizeof err), -ENOTSUP);
    /* Log blocks keep coming from l2 (the only log vdev left); data goes to d0. */
    cairn_dva_t more;
    assert_int_equal(spa_log_alloc(spa, 8192, &more), 0);
    assert_int_equal(more.vdev, 2);
    spa_log_free(spa, &more, spa_open_txg(spa));
    toy_write(spa, 9, 999, 128 * 1024, CAIRN_COMPRESS_OFF, CAIRN_CHECKSUM_FLETCHER4, 2);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    *expect = ((toy_state_t *)spa_get_upper_private(spa))->root;
    for (int c = 0; c < expect->slot[9].bp.ncopies; c++) assert_int_equal(expect->slot[9].bp.dva[c].vdev, 0);

    /* A crash: the chain on vdev 2 is found and read back through the same ids. */
    spa_abandon(spa);
    spa = import_pool(&f, SPA_IMPORT_FORCE);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 3);
    expect_top(spa, 1, NULL);
    expect_top(spa, 2, f.l2);
    assert_int_equal(toy_verify(spa, expect), 0);
    spa_log_header_get(spa, os_id, &h);
    assert_int_equal(h.chain_guid, guid);
    assert_true(h.claim_txg > 0);
    for (int i = 0; i < 3; i++) {
        void *pl;
        uint32_t len;
        cairn_dva_t next;
        assert_int_equal(spa_log_read(spa, &d[i], guid, 1 + (uint64_t)i, &pl, &len, &next), 0);
        snprintf(payload, sizeof payload, "record %d", i);
        assert_int_equal(len, sizeof payload);
        assert_memory_equal(pl, payload, sizeof payload);
        free(pl);
    }
    /* The log is done with (as after replay): its blocks go, its header too. */
    txg = spa_tx_hold_nowait(spa);
    for (int i = 0; i < 4; i++) spa_log_free(spa, &d[i], txg);
    spa_log_header_set(spa, os_id, &(spa_log_header_t){0}, txg);
    spa_tx_rele(spa, txg);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);

    /* The hole survives export/import and the offline check accepts it. */
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    spa = import_pool(&f, 0);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 3);
    expect_top(spa, 1, NULL);
    assert_int_equal(toy_verify(spa, expect), 0);

    /* A new log vdev fills the hole and gets a log region there. */
    add_log(spa, f.l3);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 3);
    expect_top(spa, 1, f.l3);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    spa_top_space(spa, 1, &sp);
    assert_true(sp.size > 32 * MIB);
    assert_int_equal(spa_vdev_remove_log_begin(spa, f.l2, err, sizeof err), 2);
    assert_int_equal(spa_log_alloc(spa, 8192, &more), 0);
    assert_int_equal(more.vdev, 1);
    spa_log_free(spa, &more, spa_open_txg(spa));
    spa_vdev_remove_log_abort(spa);
    assert_int_equal(spa_export(spa), 0);
    spa = import_pool(&f, 0);
    expect_top(spa, 1, f.l3);
    expect_top(spa, 2, f.l2);

    /* Removing the last one trims the tree; then l3 is last and goes too. */
    remove_log(spa, f.l2);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 2);
    remove_log(spa, f.l3);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 1);
    assert_false(spa_has_log_vdevs(spa));
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    spa = import_pool(&f, 0);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 1);
    assert_int_equal(toy_verify(spa, expect), 0);
    assert_int_equal(spa_destroy(spa), 0);
    free(expect);
    fixture_fini(&f);
}

static void test_crash_after_removal_labels(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, "holestale");
    spa_t *spa = create_pool(&f);
    remove_log(spa, f.l1);
    uint64_t removed = spa_last_synced_txg(spa);
    expect_top(spa, 1, NULL);

    /* The labels name the hole; the uberblock is one from before the removal,
     * whose space map and log directory still describe l1 at id 1. */
    spa_abandon(spa);
    forget_uberblocks(&f, removed);
    spa = import_pool(&f, SPA_IMPORT_FORCE);
    assert_true(spa_last_synced_txg(spa) < removed);
    expect_top(spa, 1, NULL);
    expect_top(spa, 2, f.l2);
    /* l3 joins in the first sync since, while those records are still durable:
     * not at id 1. */
    add_log(spa, f.l3);
    assert_int_equal(spa_root_vdev(spa)->nchildren, 4);
    expect_top(spa, 1, NULL);
    expect_top(spa, 3, f.l3);
    uint64_t added = spa_last_synced_txg(spa);

    /* The same crash once more: l3's labels, the pre-removal uberblock. Had l3
     * taken id 1, l1's records (beyond l3's end) would be replayed onto it. */
    spa_abandon(spa);
    forget_uberblocks(&f, added);
    spa = import_pool(&f, SPA_IMPORT_FORCE);
    assert_true(spa_last_synced_txg(spa) < removed);
    expect_top(spa, 3, f.l3);
    assert_int_equal(toy_verify(spa, NULL), 0);
    /* After a sync the old records are gone: id 1 is free for the next one. */
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    add_log(spa, f.l4);
    expect_top(spa, 1, f.l4);
    assert_int_equal(spa_txg_wait_synced(spa, 0), 0);
    spa_space_t sp;
    spa_top_space(spa, 1, &sp);
    assert_true(sp.size > 32 * MIB);
    spa_top_space(spa, 3, &sp);
    assert_true(sp.size > 32 * MIB);
    assert_int_equal(spa_export(spa), 0);
    check_pool(&f);
    spa = import_pool(&f, 0);
    expect_top(spa, 1, f.l4);
    expect_top(spa, 2, f.l2);
    expect_top(spa, 3, f.l3);
    assert_int_equal(spa_destroy(spa), 0);
    fixture_fini(&f);
}

/* A log block on raidz holds what its data part holds: its allocated size counts
 * parity too. Filled to spa_log_capacity, it is written and read back whole (the
 * capacity once came from the allocated size: a ZIL batch of 63 block pointers
 * packed 24 KiB into a block whose data part is 12 KiB, and writing it zeroed
 * past the end of the buffer - cairnd died under NFS COMMITs on a raidz pool). */
static void test_raidz_log_block_capacity(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f, "rzlog");
    spa_vdev_spec_t disks[3] = {{.type = VDEV_TYPE_LEAF, .path = f.d0},
                                {.type = VDEV_TYPE_LEAF, .path = f.l1},
                                {.type = VDEV_TYPE_LEAF, .path = f.l2}};
    spa_vdev_spec_t rz = {.type = VDEV_TYPE_RAIDZ, .nparity = 1, .nchildren = 3, .children = disks};
    spa_vdev_spec_t root = {.type = VDEV_TYPE_ROOT, .nchildren = 1, .children = &rz};
    spa_t *spa = NULL;
    char err[256] = "";
    int e = spa_create("tank", &root, NULL, &spa, err, sizeof err);
    if (e) fprintf(stderr, "spa_create: %s\n", err);
    assert_int_equal(e, 0);
    const uint64_t guid = 0xabcdef01;
    uint8_t *block = spa_log_block_alloc();
    for (uint32_t want = 8192; want <= 64 * 1024; want *= 2) {
        cairn_dva_t d, next;
        assert_int_equal(spa_log_alloc(spa, want, &d), 0);
        assert_int_equal(spa_log_alloc(spa, 8192, &next), 0);
        uint32_t cap = spa_log_capacity(spa, &d);
        assert_true(cap + SPA_LOG_BLOCK_FRAME >= want);         /* what was asked fits */
        assert_true(cap + SPA_LOG_BLOCK_FRAME < cairn_dva_asize(&d)); /* parity's share does not */
        for (uint32_t i = 0; i < cap; i++) block[SPA_LOG_BLOCK_FRAME + i] = (uint8_t)(i * 7 + want);
        assert_int_equal(spa_log_write_block(spa, &d, guid, want, &next, block, cap, 0), 0);
        assert_int_equal(spa_log_write_block(spa, &d, guid, want, &next, block, cap + 8, 0), -EINVAL);
        assert_int_equal(spa_log_flush(spa, &d, 1, NULL), 0);
        void *pl;
        uint32_t len;
        cairn_dva_t back;
        assert_int_equal(spa_log_read(spa, &d, guid, want, &pl, &len, &back), 0);
        assert_int_equal(len, cap);
        for (uint32_t i = 0; i < cap; i++)
            if (((uint8_t *)pl)[i] != (uint8_t)(i * 7 + want)) fail_msg("byte %u of %u", i, cap);
        free(pl);
        uint64_t txg = spa_open_txg(spa);
        spa_log_free(spa, &d, txg);
        spa_log_free(spa, &next, txg);
    }
    free(block);
    assert_int_equal(spa_destroy(spa), 0);
    fixture_fini(&f);
}

int main(void)
{
    spa_register_upper(&toy_ops);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_first_log_vdev),
        cmocka_unit_test(test_crash_after_removal_labels),
        cmocka_unit_test(test_raidz_log_block_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
