/*
 * Shared fixture of the SCSI tests: two real volumes on a file-backed pool,
 * exported as LUN 0 and LUN 1 of one target, two I_T nexuses (A and B), and
 * a helper that runs one CDB and keeps the command for inspection.
 */
#ifndef TEST_SCSI_FIXTURE_H
#define TEST_SCSI_FIXTURE_H

#include <cairn/scsi.h>

#include "test_zvol_fixture.h"

#define SF_MIB (1024ull * 1024)
#define SF_VOLSIZE (64 * SF_MIB)
#define SF_VBS 8192u
#define SF_ID0 0x1122334455667788ull
#define SF_ID1 0x99aabbccddeeff00ull

typedef struct sfix {
    zfix_t f;
    objset_t *os[2];
    zvol_t *zv[2];
    scsi_target_t *tgt;
    scsi_nexus_t nx[3];   /* A, B, C */
    scsi_cmd_t cmd;     /* the last command run */
    uint8_t *in;        /* its Data-In buffer */
    uint32_t bs;
} sfix_t;

static inline void sfix_make(sfix_t *s, const char *tag, uint32_t lbs, bool thin)
{
    memset(s, 0, sizeof(*s));
    zfix_make(&s->f, tag, 512 * SF_MIB);
    s->tgt = scsi_target_create("iqn.2026-11.org.cairn:test");
    assert_non_null(s->tgt);
    s->bs = lbs;
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof(name), "vol%d", i);
        s->os[i] = zfix_objset(&s->f, name, true);
        zvol_objset_opts_t o = {.volsize = SF_VOLSIZE, .volblocksize = SF_VBS, .block_size = lbs};
        assert_int_equal(zvol_open_objset(s->os[i], &o, &s->zv[i]), 0);
        scsi_lu_opts_t lo = {.id = i ? SF_ID1 : SF_ID0, .thin = thin};
        assert_int_equal(scsi_lu_add(s->tgt, (uint64_t)i, s->zv[i], &lo, NULL), 0);
    }
    s->nx[0] = (scsi_nexus_t){.initiator = "iqn.2026-11.test:a,i,0x23d000001",
                              .target_port = "iqn.2026-11.org.cairn:test,t,0x1",
                              .rel_port_id = 1, .nexus_id = 101};
    s->nx[1] = (scsi_nexus_t){.initiator = "iqn.2026-11.test:b",
                              .target_port = "iqn.2026-11.org.cairn:test,t,0x1",
                              .rel_port_id = 1, .nexus_id = 202};
    s->nx[2] = (scsi_nexus_t){.initiator = "iqn.2026-11.test:c",
                              .target_port = "iqn.2026-11.org.cairn:test,t,0x2",
                              .rel_port_id = 2, .nexus_id = 303};
}

static inline void sfix_done(sfix_t *s)
{
    assert_int_equal(scsi_lu_remove(s->tgt, 0), 0);
    assert_int_equal(scsi_lu_remove(s->tgt, 1), 0);
    scsi_target_destroy(s->tgt);
    for (int i = 0; i < 2; i++) {
        zvol_close(s->zv[i]);
        dmu_objset_close(s->os[i]);
    }
    free(s->in);
    s->in = NULL;
    zfix_done(&s->f);
}

/* Runs cdb on (nexus, lun); in_cap bytes of Data-In room. Returns status. */
static inline uint8_t sfix_run(sfix_t *s, int nexus, uint64_t lun, const uint8_t *cdb, unsigned cdb_len,
                               const void *out, uint32_t out_len, uint32_t in_cap)
{
    free(s->in);
    s->in = in_cap ? calloc(1, in_cap) : NULL;
    memset(&s->cmd, 0, sizeof(s->cmd));
    s->cmd.nexus = &s->nx[nexus];
    s->cmd.lun = lun;
    memcpy(s->cmd.cdb, cdb, cdb_len);
    s->cmd.cdb_len = (uint8_t)cdb_len;
    s->cmd.data_out = out;
    s->cmd.data_out_len = out_len;
    s->cmd.data_in = s->in;
    s->cmd.data_in_cap = in_cap;
    scsi_execute(s->tgt, &s->cmd);
    if (s->cmd.status == SCSI_STATUS_CHECK_CONDITION) assert_true(s->cmd.sense_len >= 18);
    assert_true(s->cmd.data_in_len <= in_cap);
    return s->cmd.status;
}

#define SRUN(s, nexus, lun, out, out_len, in_cap, ...)                                         \
    ({                                                                                         \
        const uint8_t _cdb[] = {__VA_ARGS__};                                                  \
        sfix_run((s), (nexus), (lun), _cdb, sizeof(_cdb), (out), (out_len), (in_cap));        \
    })

static inline void sfix_expect_good(sfix_t *s)
{
    if (s->cmd.status != SCSI_STATUS_GOOD)
        fprintf(stderr, "cdb %02x: status %02x sense key %x asc %02x/%02x\n", s->cmd.cdb[0],
                s->cmd.status, s->cmd.sense[2] & 0xf, s->cmd.sense[12], s->cmd.sense[13]);
    assert_int_equal(s->cmd.status, SCSI_STATUS_GOOD);
}

static inline void sfix_expect_sense(sfix_t *s, uint8_t key, uint8_t asc, uint8_t ascq)
{
    if (s->cmd.status != SCSI_STATUS_CHECK_CONDITION || (s->cmd.sense[2] & 0xf) != key ||
        s->cmd.sense[12] != asc || s->cmd.sense[13] != ascq)
        fprintf(stderr, "cdb %02x: status %02x sense %x/%02x/%02x, want %x/%02x/%02x\n", s->cmd.cdb[0],
                s->cmd.status, s->cmd.sense[2] & 0xf, s->cmd.sense[12], s->cmd.sense[13], key, asc, ascq);
    assert_int_equal(s->cmd.status, SCSI_STATUS_CHECK_CONDITION);
    assert_int_equal(s->cmd.sense[0] & 0x7f, 0x70);
    assert_int_equal(s->cmd.sense[7], 10);
    assert_int_equal(s->cmd.sense[2] & 0xf, key);
    assert_int_equal(s->cmd.sense[12], asc);
    assert_int_equal(s->cmd.sense[13], ascq);
}

/* Clears the power-on unit attention of both nexuses on both LUs. */
static inline void sfix_login_clear(sfix_t *s)
{
    for (int n = 0; n < 2; n++) {
        scsi_nexus_login(s->tgt, &s->nx[n]);
        for (uint64_t l = 0; l < 2; l++) {
            SRUN(s, n, l, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
            sfix_expect_sense(s, 0x6, 0x29, 0x00);
            SRUN(s, n, l, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
            sfix_expect_good(s);
        }
    }
}

#endif
