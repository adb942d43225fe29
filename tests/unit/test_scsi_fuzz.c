/*
 * Hostile and concurrent input: thousands of random CDBs (fixed seed) with
 * random, half-plausible parameter data and buffer sizes, interleaved with
 * logins, logouts, resets and capacity changes, must always come back with a
 * valid status and well-formed sense, never write past a buffer, never leak
 * (ASan), and leave a pool that passes the offline check. Then several
 * threads drive data, reservation and mode commands at once on two LUs and
 * every thread's data reads back intact.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_scsi_fixture.h"

#include <pthread.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static const uint8_t opcodes[] = {
    0x00, 0x03, 0x08, 0x0a, 0x12, 0x15, 0x16, 0x17, 0x1a, 0x1b, 0x1e, 0x25, 0x28, 0x2a, 0x2e, 0x2f,
    0x35, 0x41, 0x42, 0x55, 0x56, 0x57, 0x5a, 0x5e, 0x5f, 0x83, 0x84, 0x88, 0x89, 0x8a, 0x8e, 0x8f,
    0x91, 0x93, 0x9e, 0xa0, 0xa3, 0xa8, 0xaa, 0xae, 0xaf, 0x4d, 0x1d, 0x3b, 0x3c, 0x7f,
};

static void plausible(uint8_t *cdb)
{
    switch (cdb[0] >> 5) {
    case 1: case 2:   /* 10-byte: LBA < 65536, length < 256 */
        cdb[2] = cdb[3] = 0;
        cdb[7] = 0;
        break;
    case 4:           /* 16-byte */
        memset(cdb + 2, 0, 6);
        cdb[10] = cdb[11] = cdb[12] = 0;
        break;
    case 5:           /* 12-byte */
        cdb[2] = cdb[3] = 0;
        cdb[6] = cdb[7] = cdb[8] = 0;
        break;
    }
    switch (cdb[0]) {
    case 0x5e: cdb[1] &= 3; break;
    case 0x5f: cdb[1] &= 7; cdb[2] = (uint8_t)(rnd() % 9); memset(cdb + 3, 0, 5); cdb[8] = 24; break;
    case 0x9e: cdb[1] = rnd() & 1 ? 0x10 : 0x12; break;
    case 0xa3: cdb[1] = (uint8_t)(0x0a + rnd() % 4); break;
    case 0x84: cdb[1] = rnd() & 1 ? 0 : 3; break;
    case 0x83: cdb[1] = 0; break;
    case 0x42: cdb[1] = 0; cdb[7] = 0; cdb[8] = (uint8_t)(8 + 16 * (rnd() % 4)); break;
    }
}

static void plausible_params(uint8_t *p, uint32_t len, uint8_t op)
{
    if (op == 0x5f && len >= 24) {
        memset(p, 0, 24);
        p[7] = (uint8_t)(rnd() % 3);
        p[15] = (uint8_t)(rnd() % 3);
        p[20] = rnd() % 4 == 0 ? 0x04 : 0;
    } else if (op == 0x42 && len >= 8) {
        uint32_t nd = (len - 8) / 16;
        memset(p, 0, len);
        p[3] = (uint8_t)(16 * nd);
        for (uint32_t i = 0; i < nd; i++) {
            p[8 + 16 * i + 5] = (uint8_t)(rnd() % 2);
            p[8 + 16 * i + 6] = (uint8_t)rnd();
            p[8 + 16 * i + 11] = (uint8_t)rnd();
        }
    }
}

/* The target's own CDB usage maps (REPORT SUPPORTED OPERATION CODES). */
typedef struct usage {
    uint8_t len;
    bool has_sa;
    uint8_t map[16];
} usage_t;
static usage_t usages[128];
static size_t nusages;

static void learn_usage(sfix_t *s)
{
    SRUN(s, 0, 0, NULL, 0, 4096, 0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0);
    sfix_expect_good(s);
    uint8_t all[4096];
    memcpy(all, s->in, sizeof(all));
    uint32_t n = (uint32_t)all[0] << 24 | (uint32_t)all[1] << 16 | (uint32_t)all[2] << 8 | all[3];
    for (uint32_t off = 4; off < 4 + n && nusages < 128; off += 8) {
        bool has_sa = all[off + 5] & 1;
        uint8_t cdb[12] = {0xa3, 0x0c, (uint8_t)(has_sa ? 2 : 1), all[off], all[off + 2], all[off + 3],
                           0, 0, 0, 64, 0, 0};
        sfix_run(s, 0, 0, cdb, 12, NULL, 0, 64);
        sfix_expect_good(s);
        assert_int_equal(s->in[1] & 7, 3);
        usage_t *u = &usages[nusages++];
        u->len = (uint8_t)(s->in[2] << 8 | s->in[3]);
        assert_true(u->len >= 6 && u->len <= 16);
        assert_int_equal(u->len, all[off + 6] << 8 | all[off + 7]);
        u->has_sa = has_sa;
        memcpy(u->map, s->in + 4, u->len);
        assert_int_equal(u->map[0], all[off]);
    }
    assert_true(nusages > 40);
}

/* Random bits only where the map allows them. */
static void from_usage(uint8_t *cdb)
{
    const usage_t *u = &usages[rnd() % nusages];
    cdb[0] = u->map[0];
    for (unsigned i = 1; i < u->len; i++) cdb[i] &= u->map[i];
    if (u->has_sa) cdb[1] = (uint8_t)((cdb[1] & 0xe0) | (u->map[1] & 0x1f));
}

static void check_result(const scsi_cmd_t *cmd, uint32_t cap)
{
    switch (cmd->status) {
    case SCSI_STATUS_GOOD:
    case SCSI_STATUS_BUSY:
    case SCSI_STATUS_RESERVATION_CONFLICT:
        break;
    case SCSI_STATUS_CHECK_CONDITION: {
        assert_int_equal(cmd->sense_len, 18);
        assert_int_equal(cmd->sense[0] & 0x7f, 0x70);
        assert_int_equal(cmd->sense[7], 10);
        uint8_t key = cmd->sense[2] & 0x0f;
        assert_true(key == 0x2 || key == 0x3 || key == 0x4 || key == 0x5 || key == 0x6 || key == 0x7 ||
                    key == 0xa || key == 0xb || key == 0xe);
        assert_true(cmd->sense[12] != 0 || key == 0x6);
        break;
    }
    default:
        fail_msg("status %02x", cmd->status);
    }
    assert_true(cmd->data_in_len <= cap);
    if (cmd->status != SCSI_STATUS_GOOD) assert_int_equal(cmd->data_in_len, 0);
}

static void test_random_cdbs(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_fuzz", 512, true);
    sfix_login_clear(&s);
    learn_usage(&s);
    const unsigned iterations = 20000;
    unsigned good = 0, check = 0, conflict = 0;
    uint8_t *out = malloc(1024 * 1024);
    for (unsigned it = 0; it < iterations; it++) {
        uint8_t cdb[SCSI_CDB_MAX];
        for (int i = 0; i < SCSI_CDB_MAX; i++) cdb[i] = (uint8_t)rnd();
        cdb[0] = rnd() % 8 ? opcodes[rnd() % sizeof(opcodes)] : (uint8_t)rnd();
        if (rnd() % 4) from_usage(cdb);
        if (rnd() % 2) plausible(cdb);
        uint8_t cdb_len = rnd() % 10 ? 16 : (uint8_t)(1 + rnd() % SCSI_CDB_MAX);
        if (rnd() % 10) {
            cdb[(cdb[0] >> 5) == 0 ? 5 : (cdb[0] >> 5) == 5 ? 11 : (cdb[0] >> 5) == 4 ? 15 : 9] = 0;
            cdb[15] = 0;
        }
        int nx = (int)(rnd() % 3);
        uint64_t lun = rnd() % 10 < 6 ? 0 : rnd() % 4 ? 1 : rnd() % 2 ? rnd() : rnd() % 20;

        scsi_dir_t dir;
        uint32_t bytes = 0;
        (void)scsi_cdb_transfer(s.tgt, lun, cdb, cdb_len, &dir, &bytes);
        uint32_t out_len = 0, in_cap;
        if (dir == SCSI_DIR_WRITE) out_len = rnd() % 4 ? bytes : (uint32_t)(rnd() % 4096);
        else if (rnd() % 8 == 0) out_len = (uint32_t)(rnd() % 512);
        if (out_len > 1024 * 1024) out_len = 1024 * 1024;
        for (uint32_t i = 0; i < out_len; i++) out[i] = (uint8_t)rnd();
        if (rnd() % 2) plausible_params(out, out_len, cdb[0]);
        in_cap = dir == SCSI_DIR_READ && rnd() % 4 ? bytes : (uint32_t)(rnd() % 8192);
        if (in_cap > 1024 * 1024) in_cap = 1024 * 1024;

        sfix_run(&s, nx, lun, cdb, cdb_len, out_len ? out : NULL, out_len, in_cap);
        check_result(&s.cmd, in_cap);
        good += s.cmd.status == SCSI_STATUS_GOOD;
        check += s.cmd.status == SCSI_STATUS_CHECK_CONDITION;
        conflict += s.cmd.status == SCSI_STATUS_RESERVATION_CONFLICT;

        switch (rnd() % 400) {
        case 0: scsi_nexus_logout(s.tgt, &s.nx[rnd() % 3]); break;
        case 1: scsi_nexus_login(s.tgt, &s.nx[rnd() % 3]); break;
        case 2: scsi_reset(s.tgt, rnd() % 2 ? UINT64_MAX : rnd() % 3); break;
        case 3: scsi_lu_capacity_changed(s.tgt, rnd() % 3); break;
        }
    }
    fprintf(stderr, "fuzz: %u good, %u check condition, %u conflict\n", good, check, conflict);
    assert_true(good > iterations / 20);
    assert_true(check > iterations / 4);
    free(out);
    /* the target still works: clear everything and read/write */
    for (int n = 0; n < 3; n++) scsi_nexus_logout(s.tgt, &s.nx[n]);
    uint8_t clear[24] = {0};
    for (int n = 0; n < 3; n++) {
        clear[15] = 0x42;   /* REGISTER AND IGNORE key 0x42, then CLEAR */
        for (uint64_t l = 0; l < 2; l++) {
            const uint8_t reg[10] = {0x5f, 0x06, 0, 0, 0, 0, 0, 0, 24, 0};
            sfix_run(&s, n, l, reg, 10, clear, 24, 0);
        }
    }
    memset(clear, 0, sizeof(clear));
    clear[7] = 0x42;
    for (uint64_t l = 0; l < 2; l++) {
        const uint8_t clr[10] = {0x5f, 0x03, 0, 0, 0, 0, 0, 0, 24, 0};
        sfix_run(&s, 0, l, clr, 10, clear, 24, 0);
        sfix_expect_good(&s);
    }
    /* mode pages back to WCE=1, SWP=0 */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0x3f, 0, 255, 0);
    sfix_expect_good(&s);
    uint8_t mp[4 + 20 + 12 + 12];
    assert_int_equal(s.cmd.data_in_len, sizeof(mp));
    memcpy(mp, s.in, sizeof(mp));
    mp[0] = 0;
    mp[4 + 2] |= 0x04;
    mp[4 + 20 + 4] &= (uint8_t)~0x08;
    SRUN(&s, 0, 0, mp, sizeof(mp), 0, 0x15, 0x10, 0, 0, sizeof(mp), 0);
    sfix_expect_good(&s);
    for (int n = 1; n < 3; n++) {   /* their RESERVATIONS PREEMPTED unit attention */
        for (int k = 0; k < 4; k++) SRUN(&s, n, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
        sfix_expect_good(&s);
    }
    uint8_t w[512];
    memset(w, 0x3c, sizeof(w));
    SRUN(&s, 1, 0, w, 512, 0, 0x2a, 0, 0, 0, 0, 0x77, 0, 0, 1, 0);
    sfix_expect_good(&s);
    SRUN(&s, 2, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0x77, 0, 0, 1, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, w, 512);
    sfix_done(&s);
}

/* ---------------------------------------------------------- concurrency */

typedef struct worker {
    sfix_t *s;
    int id;
    scsi_nexus_t nx;
    char name[64];
    int failures;
} worker_t;

static uint8_t exec(worker_t *w, uint64_t lun, const uint8_t *cdb, uint8_t len, const void *out,
                    uint32_t out_len, void *in, uint32_t in_cap)
{
    scsi_cmd_t cmd;
    for (int tries = 0; tries < 10; tries++) {
        memset(&cmd, 0, sizeof(cmd));
        cmd.nexus = &w->nx;
        cmd.lun = lun;
        memcpy(cmd.cdb, cdb, len);
        cmd.cdb_len = len;
        cmd.data_out = out;
        cmd.data_out_len = out_len;
        cmd.data_in = in;
        cmd.data_in_cap = in_cap;
        scsi_execute(w->s->tgt, &cmd);
        if (cmd.status != SCSI_STATUS_CHECK_CONDITION || (cmd.sense[2] & 0xf) != 0x6) break;
    }
    return cmd.status;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    uint8_t buf[8192], got[8192];
    uint64_t seed = 0x1234567ull * (uint64_t)(w->id + 1);
    for (int i = 0; i < 300; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t lba = (uint32_t)(w->id * 4096 + (seed >> 33) % 4000);
        unsigned nblk = 1 + (unsigned)((seed >> 20) % 16);
        memset(buf, (uint8_t)(w->id * 16 + i), nblk * 512);
        const uint8_t wcdb[10] = {0x2a, (uint8_t)(i % 3 == 0 ? 0x08 : 0), 0, 0, (uint8_t)(lba >> 8),
                                  (uint8_t)lba, 0, 0, (uint8_t)nblk, 0};
        if (exec(w, 0, wcdb, 10, buf, nblk * 512, NULL, 0) != SCSI_STATUS_GOOD) w->failures++;
        const uint8_t rcdb[10] = {0x28, 0, 0, 0, (uint8_t)(lba >> 8), (uint8_t)lba, 0, 0, (uint8_t)nblk, 0};
        if (exec(w, 0, rcdb, 10, NULL, 0, got, sizeof(got)) != SCSI_STATUS_GOOD ||
            memcmp(got, buf, nblk * 512) != 0)
            w->failures++;
        /* reservation and mode traffic on LU 1, outcomes irrelevant */
        uint8_t p[24] = {0};
        p[15] = (uint8_t)(i & 1 ? 0 : w->id + 1);
        const uint8_t reg[10] = {0x5f, 0x06, 0, 0, 0, 0, 0, 0, 24, 0};
        (void)exec(w, 1, reg, 10, p, 24, NULL, 0);
        const uint8_t keys[10] = {0x5e, 0x00, 0, 0, 0, 0, 0, 0x01, 0, 0};
        (void)exec(w, 1, keys, 10, NULL, 0, got, 256);
        const uint8_t ms[6] = {0x1a, 0x08, 0x3f, 0, 255, 0};
        (void)exec(w, 1, ms, 6, NULL, 0, got, 255);
        if (i % 50 == 0) {
            scsi_nexus_logout(w->s->tgt, &w->nx);
            scsi_nexus_login(w->s->tgt, &w->nx);
        }
        if (w->id == 0 && i % 100 == 0) scsi_reset(w->s->tgt, 1);
    }
    return NULL;
}

static void test_concurrent_nexuses(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_conc", 512, true);
    enum { N = 4 };
    worker_t w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker_t){.s = &s, .id = i};
        snprintf(w[i].name, sizeof(w[i].name), "iqn.2026-11.test:worker%d", i);
        w[i].nx = (scsi_nexus_t){.initiator = w[i].name, .target_port = "tp", .rel_port_id = 1,
                                 .nexus_id = 1000 + (uint64_t)i};
        scsi_nexus_login(s.tgt, &w[i].nx);
    }
    for (int i = 0; i < N; i++) assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].failures, 0);
        scsi_nexus_logout(s.tgt, &w[i].nx);
    }
    sfix_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_cdbs),
        cmocka_unit_test(test_concurrent_nexuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
