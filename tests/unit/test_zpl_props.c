/*
 * Property changes reach files that already exist: a file written with
 * compression=off gets compressed records once compression is set (less space
 * for the same data, the old records still read back), a checksum or copies
 * change shows in the next records' block pointers, and a value inherited
 * from a parent counts as much as a local one. Block pointers are read by a
 * walk of the filesystem's object set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

#define KIB 1024u
#define RS (128 * KIB)

/* Compressible (text-like, never all zeros) and different per offset. */
static void fill(uint8_t *b, uint64_t off, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint64_t o = off + i;
        b[i] = (uint8_t)("abcdefgh"[(o >> 6) & 7] + ((o >> 17) & 7));
    }
}

static void write_range(zpl_node_t *n, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len);
    fill(b, off, len);
    assert_int_equal(zpl_write(n, off, len, b, 0, NULL), 0);
    free(b);
}

static void verify_range(zpl_node_t *n, uint64_t off, uint64_t len)
{
    uint8_t *b = malloc(len), *want = malloc(len);
    size_t got = 0;
    bool eof = false;
    fill(want, off, len);
    assert_int_equal(zpl_read(n, off, len, b, &got, &eof), 0);
    assert_int_equal(got, len);
    assert_memory_equal(b, want, len);
    free(b);
    free(want);
}

static void sync_all(zfix_t *f) { assert_int_equal(spa_txg_wait_synced(f->spa, 0), 0); }

/* The file's records (128 KiB data blocks) born after min_txg. */
typedef struct recs {
    size_t n;
    cairn_blkptr_t bps[64];
} recs_t;

static int collect(spa_t *spa, const cairn_blkptr_t *bp, const spa_bookmark_t *bm, void *arg)
{
    (void)spa;
    (void)bm;
    recs_t *r = arg;
    if (bp->type == CAIRN_BT_DATA && bp->level == 0 && bp->lsize == RS && r->n < 64)
        r->bps[r->n++] = *bp;
    return 0;
}

static void records(zfix_t *f, uint64_t min_txg, recs_t *r)
{
    memset(r, 0, sizeof(*r));
    dsl_dataset_t *ds = NULL;
    assert_int_equal(dsl_dataset_hold(f->dp, f->fsname, &ds), 0);
    cairn_blkptr_t root;
    dmu_objset_root(dsl_dataset_objset(ds), &root);
    assert_int_equal(dmu_traverse_objset(f->spa, &root, min_txg, collect, r), 0);
    dsl_dataset_rele(ds);
}

static void test_compression_reaches_existing_file(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplprops", 256ull << 20);
    zfix_set_prop(&f, f.fsname, "compression", "off");
    zpl_node_t *root = zfix_root(&f), *n = NULL;
    assert_int_equal(
        zpl_create(root, "file", 0644, &zfix_cred, ZPL_CREATE_UNCHECKED, NULL, &n, NULL), 0);
    write_range(n, 0, 4 * RS);
    sync_all(&f);
    uint64_t used_plain = zfix_object_info(&f, n).used_bytes;
    recs_t r;
    records(&f, 0, &r);
    assert_int_equal(r.n, 4);
    for (size_t i = 0; i < r.n; i++) {
        assert_int_equal(r.bps[i].compress, CAIRN_COMPRESS_OFF);
        assert_int_equal(r.bps[i].psize, RS);
        assert_int_equal(r.bps[i].checksum, CAIRN_CHECKSUM_FLETCHER4);
    }
    uint64_t before = spa_last_synced_txg(f.spa);

    zfix_set_prop(&f, f.fsname, "compression", "gzip");
    zfix_set_prop(&f, f.fsname, "checksum", "sha256");
    write_range(n, 4 * RS, 4 * RS);
    sync_all(&f);
    uint64_t used_gzip = zfix_object_info(&f, n).used_bytes - used_plain;
    records(&f, before, &r);
    assert_int_equal(r.n, 4);
    for (size_t i = 0; i < r.n; i++) {
        assert_int_equal(r.bps[i].compress, CAIRN_COMPRESS_GZIP(6));
        assert_true(r.bps[i].psize < RS / 4);
        assert_int_equal(r.bps[i].checksum, CAIRN_CHECKSUM_SHA256);
    }
    /* The same amount of the same kind of data now takes well under half. */
    assert_true(used_gzip < used_plain / 4);
    verify_range(n, 0, 8 * RS);

    /* A value inherited from the parent reaches the file too. */
    before = spa_last_synced_txg(f.spa);
    zfix_set_prop(&f, f.pool, "compression", "lz4");
    zfix_set_prop(&f, f.pool, "copies", "2");
    char err[256] = "";
    assert_int_equal(dsl_prop_inherit(f.dp, f.fsname, "compression", err, sizeof(err)), 0);
    write_range(n, 8 * RS, 2 * RS);
    sync_all(&f);
    records(&f, before, &r);
    assert_int_equal(r.n, 2);
    for (size_t i = 0; i < r.n; i++) {
        assert_int_equal(r.bps[i].compress, CAIRN_COMPRESS_LZ4);
        assert_int_equal(r.bps[i].ncopies, 2);
        assert_int_equal(r.bps[i].checksum, CAIRN_CHECKSUM_SHA256);
    }
    zpl_node_rele(n);

    /* Every generation of records reads back after a restart. */
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "file", &n), 0);
    verify_range(n, 0, 10 * RS);
    zpl_node_rele(n);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compression_reaches_existing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
