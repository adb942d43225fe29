/*
 * Multihost protection (src/spa/spa_mmp.c):
 *   - a heartbeat record survives encode/decode, and decode refuses one of
 *     another pool, with a flipped bit, or of another version;
 *   - the activity check's decisions: a changed valid slot is activity (the
 *     newest one is named), an unchanged or unreadable one is not; a claim is
 *     lost when a slot it was written to holds another record; the wait is
 *     (fail + 1) intervals of the slowest writer, bounded;
 *   - the check itself on file leaves: quiet slots give a claim in every label;
 *     a writer that keeps changing one slot makes the import refuse.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/spa/spa_impl.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static spa_mmp_phys_t record(uint64_t guid, uint64_t hostid, uint64_t seq, uint64_t ts)
{
    spa_mmp_phys_t r;
    memset(&r, 0, sizeof r);
    r.magic = SPA_MMP_MAGIC;
    r.version = SPA_VERSION;
    r.pool_guid = guid;
    r.hostid = hostid;
    r.seq = seq;
    r.timestamp = ts;
    r.interval_ms = 1000;
    r.fail_intervals = 10;
    r.kind = SPA_MMP_KIND_HEARTBEAT;
    snprintf(r.hostname, sizeof r.hostname, "host-%llx", (unsigned long long)hostid);
    return r;
}

static void test_encode_decode(void **state)
{
    (void)state;
    uint8_t *slot = malloc(SPA_LABEL_MMP_SIZE);
    memset(slot, 0xa5, SPA_LABEL_MMP_SIZE);
    spa_mmp_phys_t in = record(0x1234, 0xabcd, 77, 1000), out;
    in.magic = 0; /* encode sets magic and version itself */
    in.version = 0;
    in.config_txg = 9;
    in.kind = SPA_MMP_KIND_CLAIM;
    spa_mmp_encode(&in, slot);
    for (size_t i = sizeof in; i < SPA_LABEL_MMP_SIZE; i++) assert_int_equal(slot[i], 0);
    assert_true(spa_mmp_decode(slot, 0x1234, &out));
    assert_int_equal(out.magic, SPA_MMP_MAGIC);
    assert_int_equal(out.hostid, 0xabcd);
    assert_int_equal(out.seq, 77);
    assert_int_equal(out.timestamp, 1000);
    assert_int_equal(out.config_txg, 9);
    assert_int_equal(out.kind, SPA_MMP_KIND_CLAIM);
    assert_string_equal(out.hostname, "host-abcd");

    /* Another pool's record is not ours to read. */
    assert_false(spa_mmp_decode(slot, 0x9999, &out));
    assert_int_equal(out.magic, 0);
    /* One bit flipped anywhere before the checksum: refused. */
    slot[offsetof(spa_mmp_phys_t, seq)] ^= 1;
    assert_false(spa_mmp_decode(slot, 0x1234, &out));
    slot[offsetof(spa_mmp_phys_t, seq)] ^= 1;
    assert_true(spa_mmp_decode(slot, 0x1234, &out));
    /* A zeroed slot (a pool that never had heartbeats). */
    memset(slot, 0, SPA_LABEL_MMP_SIZE);
    assert_false(spa_mmp_decode(slot, 0x1234, &out));
    /* A future version. */
    spa_mmp_encode(&in, slot);
    ((spa_mmp_phys_t *)slot)->version = SPA_VERSION + 1;
    assert_false(spa_mmp_decode(slot, 0x1234, &out));
    free(slot);
}

static void test_changed(void **state)
{
    (void)state;
    spa_mmp_phys_t before[4], after[4];
    memset(before, 0, sizeof before);
    before[0] = record(1, 0xa, 5, 100);
    before[2] = record(1, 0xa, 6, 200);
    memcpy(after, before, sizeof after);
    assert_null(spa_mmp_changed(before, after, 4)); /* nothing moved: quiet */

    after[3] = record(1, 0xa, 7, 300);              /* a new record in an empty slot */
    assert_ptr_equal(spa_mmp_changed(before, after, 4), &after[3]);
    after[0] = record(1, 0xa, 8, 400);              /* two changes: the newest is named */
    assert_ptr_equal(spa_mmp_changed(before, after, 4), &after[0]);

    memcpy(after, before, sizeof after);
    memset(&after[2], 0, sizeof after[2]);          /* a slot that no longer reads */
    assert_null(spa_mmp_changed(before, after, 4));
}

static void test_claim(void **state)
{
    (void)state;
    spa_mmp_phys_t mine = record(1, 0xa, 50, 100), after[4];
    mine.kind = SPA_MMP_KIND_CLAIM;
    bool written[4] = {true, true, false, true};
    for (int i = 0; i < 4; i++) after[i] = mine;
    assert_null(spa_mmp_claim_overwritten(&mine, written, after, 4));

    after[2] = record(1, 0xb, 1, 200);              /* a slot we could not write: not ours to judge */
    assert_null(spa_mmp_claim_overwritten(&mine, written, after, 4));
    memset(&after[1], 0, sizeof after[1]);          /* unreadable now: no evidence */
    assert_null(spa_mmp_claim_overwritten(&mine, written, after, 4));

    after[3] = record(1, 0xb, 2, 300);              /* another host's heartbeat over our claim */
    assert_ptr_equal(spa_mmp_claim_overwritten(&mine, written, after, 4), &after[3]);
    after[3] = mine;
    after[3].seq++;                                 /* even our own id: another writer */
    assert_ptr_equal(spa_mmp_claim_overwritten(&mine, written, after, 4), &after[3]);
}

static void test_wait(void **state)
{
    (void)state;
    spa_mmp_phys_t slots[3];
    memset(slots, 0, sizeof slots);
    assert_int_equal(spa_mmp_import_wait_ms(slots, 3, 1000, 10), 11000);
    assert_int_equal(spa_mmp_claim_wait_ms(slots, 3, 1000), 2000);
    slots[1] = record(1, 0xa, 1, 1);
    slots[1].interval_ms = 3000;
    slots[1].fail_intervals = 4;
    /* The slower writer's interval, the larger fail count. */
    assert_int_equal(spa_mmp_import_wait_ms(slots, 3, 1000, 10), 33000);
    assert_int_equal(spa_mmp_claim_wait_ms(slots, 3, 1000), 6000);
    /* A record cannot make an import wait beyond the configurable bounds. */
    slots[1].interval_ms = UINT32_MAX;
    slots[1].fail_intervals = UINT32_MAX;
    assert_int_equal(spa_mmp_import_wait_ms(slots, 3, 1000, 10),
                     (uint64_t)SPA_MMP_INTERVAL_MS_MAX * (SPA_MMP_FAIL_INTERVALS_MAX + 1));
}

/* ---- the check on real leaves ---- */

#define GUID 0x5eedULL

typedef struct fixture {
    char dir[256];
    char path[2][300];
    vdev_t *leaf[2];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    const char *tmp = getenv("CAIRN_TEST_TMP");
    snprintf(f->dir, sizeof f->dir, "%s/mmpXXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (tmp && *tmp) mkdir(tmp, 0755);
    assert_non_null(mkdtemp(f->dir));
    for (int i = 0; i < 2; i++) {
        snprintf(f->path[i], sizeof f->path[i], "%s/l%d", f->dir, i);
        int fd = open(f->path[i], O_CREAT | O_RDWR, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 64 << 20), 0);
        close(fd);
        assert_int_equal(vdev_leaf_open(f->path[i], &f->leaf[i]), 0);
    }
    spa_set_host(0xa1, "unit");
    spa_mmp_set_policy(100, 2);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 2; i++) {
        vdev_free(f->leaf[i]);
        unlink(f->path[i]);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static void test_check_quiet_claims(void **state)
{
    fixture_t *f = *state;
    char err[256] = "";
    uint64_t claim_ns = 0;
    assert_int_equal(spa_mmp_import_check("p", GUID, f->leaf, 2, &claim_ns, err, sizeof err), 0);
    assert_true(claim_ns > 0);
    spa_mmp_phys_t slots[2 * VDEV_LABELS];
    spa_mmp_read_slots(f->leaf, 2, GUID, slots);
    for (int i = 0; i < 2 * VDEV_LABELS; i++) {
        assert_int_equal(slots[i].magic, SPA_MMP_MAGIC);
        assert_int_equal(slots[i].hostid, 0xa1);
        assert_int_equal(slots[i].kind, SPA_MMP_KIND_CLAIM);
    }
}

typedef struct writer {
    vdev_t *leaf;
    _Atomic bool stop;
} writer_t;

/* Another host: a heartbeat into label 3 of the leaf every 50 ms. */
static void *other_host(void *arg)
{
    writer_t *w = arg;
    void *buf = cairn_alloc_aligned(SPA_LABEL_MMP_SIZE);
    for (uint64_t seq = 1; !atomic_load(&w->stop); seq++) {
        spa_mmp_phys_t r = record(GUID, 0xb2, seq, seq);
        r.interval_ms = 50;
        r.fail_intervals = 2;
        spa_mmp_encode(&r, buf);
        uint64_t off = vdev_label_offset(w->leaf->psize, 3) + SPA_LABEL_MMP_OFFSET;
        vdev_leaf_io_sync(w->leaf, VDEV_IO_WRITE, off, buf, SPA_LABEL_MMP_SIZE);
        usleep(50000);
    }
    free(buf);
    return NULL;
}

static void test_check_active_refused(void **state)
{
    fixture_t *f = *state;
    writer_t w = {.leaf = f->leaf[1]};
    pthread_t t;
    pthread_create(&t, NULL, other_host, &w);
    char err[256] = "";
    uint64_t claim_ns = 0;
    int rc = spa_mmp_import_check("p", GUID, f->leaf, 2, &claim_ns, err, sizeof err);
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    assert_int_equal(rc, -EBUSY);
    assert_non_null(strstr(err, "is imported on host host-b2 (hostid 000000b2) and active"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_changed),
        cmocka_unit_test(test_claim),
        cmocka_unit_test(test_wait),
        cmocka_unit_test_setup_teardown(test_check_quiet_claims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_active_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
