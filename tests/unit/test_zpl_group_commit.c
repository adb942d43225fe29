/*
 * Group commit of namespace changes across directories, as NFS clients make
 * them: eight threads each create a file in a directory of their own and
 * commit it (what an NFSv3 CREATE does before its reply). The first commit's
 * log flush is held at the device while the seven others are logged and
 * written; they must then share one flush: two flushes for eight durable
 * creates, counted, not timed. Before, every batch of the log flushed on its
 * own, side by side with the one in flight. The creates must all be there
 * after a remount.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_zpl_fixture.h"
#include "wait_until.h"
#include "../../src/zpl/zpl_impl.h"

#include <cairn/spa.h>
#include <cairn/zil.h>

#include <pthread.h>

enum { CREATORS = 8 };

typedef struct creator {
    zpl_node_t *dir;
    zpl_fs_t *fs;
    int err;
} creator_t;

static void *create_and_commit(void *arg)
{
    creator_t *c = arg;
    zpl_node_t *n = NULL;
    c->err = zpl_create(c->dir, "f", 0644, &zfix_cred, ZPL_CREATE_GUARDED, NULL, &n, NULL);
    if (!c->err) {
        zpl_node_rele(n);
        c->err = zpl_commit(c->fs);
    }
    return NULL;
}

/* Every record is in a batch, every batch has asked for its flush, and every
 * one but the held first one waits for the next flush. */
static bool all_waiting(zfix_t *f, const zil_stats_t *z0)
{
    zil_stats_t z;
    spa_log_stats_t s;
    zil_get_stats(f->fs->zil, &z);
    spa_log_get_stats(f->spa, &s);
    uint64_t asked = z.flushes - z0->flushes;
    return z.records - z0->records == CREATORS && z.commits - z0->commits == asked &&
           asked >= 1 && s.flush_waiters == asked - 1;
}

static void test_creates_in_many_directories_share_flushes(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "zplgroup", 256 * CAIRN_MIB);
    char err[128];
    assert_int_equal(spa_prop_set(f.spa, "txg_timeout", "300", err, sizeof err), 0);
    zpl_node_t *root = zfix_root(&f);
    creator_t c[CREATORS];
    for (int i = 0; i < CREATORS; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        c[i] = (creator_t){.dir = zfix_mkdir(root, name), .fs = f.fs, .err = -1};
    }
    /* The chain's header becomes durable here, so the creates only write log blocks. */
    assert_int_equal(zpl_commit(f.fs), 0);
    assert_int_equal(spa_txg_wait_synced(f.spa, 0), 0);
    zil_stats_t z0, z;
    spa_log_stats_t s0, s;
    zil_get_stats(f.fs->zil, &z0);
    spa_log_get_stats(f.spa, &s0);

    spa_log_test_hold_flush(true);
    pthread_t th[CREATORS];
    assert_int_equal(pthread_create(&th[0], NULL, create_and_commit, &c[0]), 0);
    WAIT_UNTIL(spa_log_test_flush_held(), "the first create's flush reached the device");
    for (int i = 1; i < CREATORS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, create_and_commit, &c[i]), 0);
    WAIT_UNTIL(all_waiting(&f, &z0), "every later create is written and waits for the next flush");
    spa_log_test_hold_flush(false);
    for (int i = 0; i < CREATORS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(c[i].err, 0);
    }
    zil_get_stats(f.fs->zil, &z);
    spa_log_get_stats(f.spa, &s);
    print_message("%d durable creates in %d directories: %llu log writes, %llu flushes\n", CREATORS,
                  CREATORS, (unsigned long long)(z.log_writes - z0.log_writes),
                  (unsigned long long)(s.flushes - s0.flushes));
    assert_int_equal(s.flushes - s0.flushes, 2);
    assert_int_equal(z.flushes_issued - z0.flushes_issued, 2);
    assert_int_equal(z.txg_waits, z0.txg_waits);

    for (int i = 0; i < CREATORS; i++) zpl_node_rele(c[i].dir);
    zpl_node_rele(root);
    zfix_reimport(&f);
    root = zfix_root(&f);
    for (int i = 0; i < CREATORS; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        zpl_node_t *d, *n;
        assert_int_equal(zpl_lookup(root, name, &d), 0);
        assert_int_equal(zpl_lookup(d, "f", &n), 0);
        zpl_node_rele(n);
        zpl_node_rele(d);
    }
    zpl_node_rele(root);
    zfix_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_creates_in_many_directories_share_flushes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
