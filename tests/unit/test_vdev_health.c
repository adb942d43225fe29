/*
 * Leaf health (src/vdev/vdev_health.c): the error window that decides when
 * a disk has failed too often, the hooks that carry each error to the pool
 * with what and where, and a tree-wide flush that one failing side of a
 * mirror or raidz does not fail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S 1000ULL /* ms per second */

/* ---- the error window ---- */

static void test_window_threshold(void **state)
{
    (void)state;
    vdev_errwin_t w;
    vdev_errwin_reset(&w);
    /* Ten errors within the window: not yet more than ten. */
    for (int i = 0; i < 10; i++)
        assert_false(vdev_errwin_note(&w, 1000 * S + (uint64_t)i * S, 10, 600 * S));
    /* The eleventh within 600 s is. */
    assert_true(vdev_errwin_note(&w, 1100 * S, 10, 600 * S));
    /* And so is every later one while the last eleven fit. */
    assert_true(vdev_errwin_note(&w, 1101 * S, 10, 600 * S));
}

static void test_window_spread(void **state)
{
    (void)state;
    vdev_errwin_t w;
    vdev_errwin_reset(&w);
    /* One error a minute: any eleven span 600 s or more... */
    for (int i = 0; i < 40; i++)
        assert_false(vdev_errwin_note(&w, (uint64_t)i * 61 * S, 10, 600 * S));
    /* ...until a burst puts eleven within the window (the ten newest and the next). */
    uint64_t t = 40 * 61 * S;
    bool fired = false;
    for (int i = 0; i < 10 && !fired; i++)
        fired = vdev_errwin_note(&w, t + (uint64_t)i, 10, 600 * S);
    assert_true(fired);
}

static void test_window_edges(void **state)
{
    (void)state;
    vdev_errwin_t w;
    vdev_errwin_reset(&w);
    /* Threshold 1: the second error within the window trips it, not the first. */
    assert_false(vdev_errwin_note(&w, 5 * S, 1, 10 * S));
    assert_true(vdev_errwin_note(&w, 15 * S, 1, 10 * S)); /* exactly 10 s apart: within */
    vdev_errwin_reset(&w);
    assert_false(vdev_errwin_note(&w, 5 * S, 1, 10 * S));
    assert_false(vdev_errwin_note(&w, 15 * S + 1, 1, 10 * S));
    /* A threshold beyond what the ring remembers is clamped, not overrun. */
    vdev_errwin_reset(&w);
    int trips = 0;
    for (int i = 0; i < 3 * VDEV_ERRWIN_MAX; i++)
        trips += vdev_errwin_note(&w, (uint64_t)i, 1000, 600 * S);
    assert_int_equal(trips, 3 * VDEV_ERRWIN_MAX - (VDEV_ERRWIN_MAX - 1));
    /* reset forgets every error. */
    vdev_errwin_reset(&w);
    assert_false(vdev_errwin_note(&w, 0, 1, 600 * S));
}

/* ---- hooks and flushes over fake leaves ---- */

#define LEAF_SIZE (16 * CAIRN_MIB)

typedef struct fake {
    uint8_t *mem;
    _Atomic bool fail_writes, fail_flush, garbage;
} fake_t;

static int fake_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                       vdev_io_done_t done, void *arg)
{
    fake_t *f = leaf->leaf_priv;
    int err = 0;
    if (op == VDEV_IO_READ) {
        memcpy(buf, f->mem + offset, len);
        if (f->garbage) memset(buf, 0xa5, len);
    } else if (op == VDEV_IO_WRITE) {
        if (f->fail_writes) err = -EIO;
        else memcpy(f->mem + offset, buf, len);
    } else if (f->fail_flush) {
        err = -EIO;
    }
    vdev_leaf_account(leaf, op, offset, len, err, cairn_now_ns()); /* as every leaf driver does */
    done(arg, err);
    return 0;
}

static void fake_close(vdev_t *leaf)
{
    fake_t *f = leaf->leaf_priv;
    free(f->mem);
    free(f);
}

static const vdev_leaf_ops_t fake_ops = {.submit = fake_submit, .close = fake_close};

static vdev_t *fake_leaf(const char *name)
{
    vdev_t *leaf = vdev_alloc(VDEV_TYPE_LEAF, cairn_random_guid());
    fake_t *f = cairn_zalloc(sizeof *f);
    f->mem = cairn_zalloc(LEAF_SIZE);
    leaf->leaf_priv = f;
    leaf->ops = &fake_ops;
    leaf->psize = LEAF_SIZE;
    leaf->path = cairn_strdup(name);
    return leaf;
}

static fake_t *F(vdev_t *leaf) { return leaf->leaf_priv; }

/* root -> top (mirror of n sides, or raidz1 of n) */
static vdev_t *make_pool(vdev_type_t type, unsigned n)
{
    vdev_t *root = vdev_alloc(VDEV_TYPE_ROOT, cairn_random_guid());
    vdev_t *top = vdev_alloc(type, cairn_random_guid());
    top->nparity = type == VDEV_TYPE_RAIDZ ? 1 : 0;
    char name[16];
    for (unsigned i = 0; i < n; i++) {
        snprintf(name, sizeof name, "d%u", i);
        vdev_add_child(top, fake_leaf(name));
    }
    vdev_add_child(root, top);
    vdev_compute_asize(root);
    return root;
}

typedef struct heard {
    unsigned n[4];
    vdev_t *last_leaf;
    uint64_t last_offset, last_size;
} heard_t;

static void on_error(void *arg, vdev_t *leaf, vdev_error_kind_t kind, uint64_t offset,
                     uint64_t size, int error)
{
    heard_t *h = arg;
    assert_true(error < 0);
    h->n[kind]++;
    h->last_leaf = leaf;
    h->last_offset = offset;
    h->last_size = size;
}

/* The verify callback: every byte of the block is *arg. */
static bool all_bytes_are(const void *b, uint64_t psize, void *arg)
{
    const uint8_t *p = b, v = *(const uint8_t *)arg;
    for (uint64_t i = 0; i < psize; i++)
        if (p[i] != v) return false;
    return true;
}

static void test_hooks_hear_errors(void **state)
{
    (void)state;
    vdev_t *root = make_pool(VDEV_TYPE_MIRROR, 2);
    vdev_t *top = root->children[0], *d0 = top->children[0], *d1 = top->children[1];
    heard_t h = {0};
    vdev_hooks_t hooks = {.leaf_error = on_error, .arg = &h};
    vdev_set_hooks(root, &hooks);

    uint8_t *buf = cairn_alloc_aligned(8192);
    memset(buf, 7, 8192);
    /* A write one side fails: the block is written (the other side has it), the
     * failing side's error reaches the hook with where it was. */
    atomic_store(&F(d1)->fail_writes, true);
    assert_int_equal(vdev_write_block(top, 8192, buf, 8192), 0);
    assert_int_equal(h.n[VDEV_ERR_WRITE], 1);
    assert_ptr_equal(h.last_leaf, d1);
    assert_int_equal(h.last_offset, VDEV_DATA_START + 8192);
    assert_int_equal(h.last_size, 8192);
    assert_int_equal(d1->stats.write_errors, 1);
    atomic_store(&F(d1)->fail_writes, false);

    /* A side returning data that does not verify: a checksum error on that side. */
    assert_int_equal(vdev_write_block(top, 8192, buf, 8192), 0);
    atomic_store(&F(d0)->garbage, true);
    uint8_t *rd = cairn_alloc_aligned(8192);
    uint8_t seven = 7;
    assert_int_equal(vdev_read_block(top, 8192, rd, 8192, all_bytes_are, &seven,
                                     VDEV_READ_SCRUB | VDEV_READ_NOREPAIR, NULL),
                     0);
    assert_int_equal(h.n[VDEV_ERR_CHECKSUM], 1);
    assert_ptr_equal(h.last_leaf, d0);
    assert_int_equal(d0->stats.checksum_errors, 1);
    atomic_store(&F(d0)->garbage, false);

    /* Without hooks, errors are still counted. */
    vdev_set_hooks(root, NULL);
    atomic_store(&F(d1)->fail_writes, true);
    assert_int_equal(vdev_write_block(top, 16384, buf, 8192), 0);
    assert_int_equal(h.n[VDEV_ERR_WRITE], 1);
    assert_int_equal(d1->stats.write_errors, 2);
    free(rd);
    free(buf);
    vdev_free(root);
}

static void test_flush_redundancy(void **state)
{
    (void)state;
    heard_t h = {0};
    vdev_hooks_t hooks = {.leaf_error = on_error, .arg = &h};
    /* Mirror: one side failing its flush is covered by the other. */
    vdev_t *root = make_pool(VDEV_TYPE_MIRROR, 2);
    vdev_set_hooks(root, &hooks);
    vdev_t *top = root->children[0];
    atomic_store(&F(top->children[1])->fail_flush, true);
    assert_int_equal(vdev_flush(root), 0);
    assert_int_equal(h.n[VDEV_ERR_FLUSH], 1);
    assert_int_equal(top->children[1]->stats.write_errors, 1);
    /* Both sides failing: nothing is durable. */
    atomic_store(&F(top->children[0])->fail_flush, true);
    assert_int_equal(vdev_flush(root), -EIO);
    /* One side failing while the other is out of service: not covered either. */
    atomic_store(&F(top->children[0])->fail_flush, false);
    atomic_store(&top->children[0]->state, VDEV_STATE_FAULTED);
    assert_int_equal(vdev_flush(root), -EIO);
    /* Out of service and no failure: as before, nothing to flush is no error. */
    atomic_store(&F(top->children[1])->fail_flush, false);
    assert_int_equal(vdev_flush(root), 0);
    vdev_free(root);

    /* raidz1 of 4: one failing child is covered, two are not. */
    root = make_pool(VDEV_TYPE_RAIDZ, 4);
    top = root->children[0];
    atomic_store(&F(top->children[2])->fail_flush, true);
    assert_int_equal(vdev_flush(root), 0);
    atomic_store(&F(top->children[3])->fail_flush, true);
    assert_int_equal(vdev_flush(root), -EIO);
    vdev_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_threshold),
        cmocka_unit_test(test_window_spread),
        cmocka_unit_test(test_window_edges),
        cmocka_unit_test(test_hooks_hear_errors),
        cmocka_unit_test(test_flush_redundancy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
