/*
 * A file's record size grows while it has a single record (as ZFS does): a
 * file written by 4 KiB appends - what NFS clients send - ends with
 * recordsize records, not 4 KiB ones; one whose first write is past the
 * recordsize gets recordsize records at once; a small file keeps a small
 * record. Checked through the DMU's object info, data verified, before and
 * after export/import; and a file grown across txgs (synced between appends)
 * keeps its bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"

#define KIB 1024u

static uint8_t pat(uint64_t off) { return (uint8_t)((off * 2654435761u) >> 13) | 1; }

static void append(zpl_node_t *n, uint64_t total, uint32_t chunk, zfix_t *f, bool sync_each)
{
    uint8_t *b = malloc(chunk);
    for (uint64_t off = 0; off < total; off += chunk) {
        for (uint32_t i = 0; i < chunk; i++) b[i] = pat(off + i);
        assert_int_equal(zpl_write(n, off, chunk, b, 0, NULL), 0);
        if (sync_each && (off / chunk) % 3 == 0) assert_int_equal(zpl_commit(f->fs), 0);
    }
    free(b);
}

static void verify(zpl_node_t *n, uint64_t total)
{
    uint8_t *b = malloc(total);
    size_t nread = 0;
    bool eof = false;
    assert_int_equal(zpl_read(n, 0, total, b, &nread, &eof), 0);
    assert_int_equal(nread, total);
    for (uint64_t i = 0; i < total; i++)
        if (b[i] != pat(i)) {
            fprintf(stderr, "byte %llu: got %u want %u\n", (unsigned long long)i, b[i], pat(i));
            fail();
        }
    free(b);
}

static zpl_node_t *make(zpl_node_t *root, const char *name)
{
    zpl_node_t *n = NULL;
    assert_int_equal(
        zpl_create(root, name, 0644, &zfix_cred, ZPL_CREATE_UNCHECKED, NULL, &n, NULL), 0);
    return n;
}

static void test_appends_grow_records(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplrs", 256ull << 20);
    zpl_node_t *root = zfix_root(&f);
    zpl_node_t *a = make(root, "appended"), *s = make(root, "synced"), *small = make(root, "small"),
               *far = make(root, "far");

    append(a, 1024 * KIB, 4 * KIB, &f, false);
    assert_int_equal(zfix_object_info(&f, a).props.recordsize, 128 * KIB);
    verify(a, 1024 * KIB);

    /* Appends straddling txgs: the record grows while older txgs sync the old size. */
    append(s, 300 * KIB, 4 * KIB, &f, true);
    assert_int_equal(zfix_object_info(&f, s).props.recordsize, 128 * KIB);
    verify(s, 300 * KIB);

    append(small, 6 * KIB, 2 * KIB, &f, false);
    assert_int_equal(zfix_object_info(&f, small).props.recordsize, 8 * KIB);
    verify(small, 6 * KIB);

    uint8_t b[4096];
    for (unsigned i = 0; i < sizeof(b); i++) b[i] = 0x5a;
    assert_int_equal(zpl_write(far, 1024 * KIB, sizeof(b), b, 0, NULL), 0);
    assert_int_equal(zfix_object_info(&f, far).props.recordsize, 128 * KIB);

    zpl_node_rele(a);
    zpl_node_rele(s);
    zpl_node_rele(small);
    zpl_node_rele(far);
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    assert_int_equal(zpl_lookup(root, "appended", &a), 0);
    assert_int_equal(zpl_lookup(root, "synced", &s), 0);
    assert_int_equal(zpl_lookup(root, "small", &small), 0);
    assert_int_equal(zfix_object_info(&f, a).props.recordsize, 128 * KIB);
    assert_int_equal(zfix_object_info(&f, s).props.recordsize, 128 * KIB);
    assert_int_equal(zfix_object_info(&f, small).props.recordsize, 8 * KIB);
    verify(a, 1024 * KIB);
    verify(s, 300 * KIB);
    verify(small, 6 * KIB);
    /* A small file keeps growing after a restart. */
    append(small, 40 * KIB, 4 * KIB, &f, false);
    assert_int_equal(zfix_object_info(&f, small).props.recordsize, 64 * KIB);
    verify(small, 40 * KIB);
    zpl_node_rele(a);
    zpl_node_rele(s);
    zpl_node_rele(small);
    zpl_node_rele(root);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends_grow_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
