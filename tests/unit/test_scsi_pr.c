/*
 * Reservations with several I_T nexuses: persistent reservations of all six
 * types and what each lets registered and unregistered nexuses do, REGISTER
 * (and IGNORE EXISTING KEY), RESERVE, RELEASE, CLEAR, PREEMPT (AND ABORT) with
 * the unit attentions they leave behind, READ KEYS / RESERVATION / FULL
 * STATUS / REPORT CAPABILITIES, the persistence hook and restore, and
 * SPC-2 RESERVE/RELEASE(6/10) with its release on logout and reset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_scsi_fixture.h"

#include <errno.h>

enum { A, B, C };
enum { SA_REGISTER, SA_RESERVE, SA_RELEASE, SA_CLEAR, SA_PREEMPT, SA_PREEMPT_ABORT, SA_REG_IGNORE };

static uint32_t g32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint64_t g64(const uint8_t *p) { return (uint64_t)g32(p) << 32 | g32(p + 4); }

static uint8_t prout_ex(sfix_t *s, int nx, uint8_t sa, uint8_t type, uint64_t key, uint64_t sakey,
                        uint8_t flags, uint32_t plen)
{
    uint8_t p[24] = {0};
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(key >> (56 - 8 * i));
        p[8 + i] = (uint8_t)(sakey >> (56 - 8 * i));
    }
    p[20] = flags;
    uint8_t cdb[10] = {0x5f, sa, type, 0, 0, 0, 0, 0, (uint8_t)plen, 0};
    return sfix_run(s, nx, 0, cdb, 10, p, plen, 0);
}

static uint8_t prout(sfix_t *s, int nx, uint8_t sa, uint8_t type, uint64_t key, uint64_t sakey)
{
    return prout_ex(s, nx, sa, type, key, sakey, 0, 24);
}

static uint8_t prin(sfix_t *s, int nx, uint8_t sa)
{
    uint8_t cdb[10] = {0x5e, sa, 0, 0, 0, 0, 0, 0x04, 0x00, 0};
    return sfix_run(s, nx, 0, cdb, 10, NULL, 0, 1024);
}

static uint8_t rd(sfix_t *s, int nx)
{
    return SRUN(s, nx, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
}

static uint8_t wr(sfix_t *s, int nx)
{
    static uint8_t blk[512];
    return SRUN(s, nx, 0, blk, 512, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0);
}

#define GOOD SCSI_STATUS_GOOD
#define CONFLICT SCSI_STATUS_RESERVATION_CONFLICT

/* What an outsider (C, unregistered) and a registrant (B, not the reserver) may do. */
static void expect_access(sfix_t *s, uint8_t b_read, uint8_t b_write, uint8_t c_read, uint8_t c_write)
{
    assert_int_equal(rd(s, A), GOOD);
    assert_int_equal(wr(s, A), GOOD);
    assert_int_equal(rd(s, B), b_read);
    assert_int_equal(wr(s, B), b_write);
    assert_int_equal(rd(s, C), c_read);
    assert_int_equal(wr(s, C), c_write);
    /* always allowed */
    assert_int_equal(SRUN(s, C, 0, NULL, 0, 96, 0x12, 0, 0, 0, 96, 0), GOOD);
    assert_int_equal(SRUN(s, C, 0, NULL, 0, 64, 0x03, 0, 0, 0, 64, 0), GOOD);
    assert_int_equal(SRUN(s, C, 0, NULL, 0, 64, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), GOOD);
    assert_int_equal(SRUN(s, C, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(SRUN(s, C, 0, NULL, 0, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(prin(s, C, 0), GOOD);
}

static void test_pr_types(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_prtypes", 512, true);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in), 0);
    assert_int_equal(g32(s.in + 4), 0);

    assert_int_equal(prout(&s, A, SA_REGISTER, 0, 0, 0xaa), GOOD);
    assert_int_equal(prout(&s, A, SA_REGISTER, 0, 0, 0xab), CONFLICT);   /* wrong old key */
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), GOOD);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in), 2);
    assert_int_equal(g32(s.in + 4), 16);
    uint64_t k1 = g64(s.in + 8), k2 = g64(s.in + 16);
    assert_true((k1 == 0xaa && k2 == 0xbb) || (k1 == 0xbb && k2 == 0xaa));
    /* an unregistered nexus cannot reserve; a registered one needs its key */
    assert_int_equal(prout(&s, C, SA_RESERVE, 1, 0, 0), CONFLICT);
    assert_int_equal(prout(&s, A, SA_RESERVE, 1, 0xbb, 0), CONFLICT);
    assert_int_equal(prout(&s, A, SA_RESERVE, 2, 0xaa, 0), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    assert_int_equal(prout(&s, A, SA_RESERVE, 0x21, 0xaa, 0), SCSI_STATUS_CHECK_CONDITION);   /* scope */
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    static const struct {
        uint8_t type, b_read, b_write, c_read, c_write;
    } cases[] = {
        {1, GOOD, CONFLICT, GOOD, CONFLICT},       /* write exclusive */
        {3, CONFLICT, CONFLICT, CONFLICT, CONFLICT}, /* exclusive access */
        {5, GOOD, GOOD, GOOD, CONFLICT},           /* WE registrants only */
        {6, GOOD, GOOD, CONFLICT, CONFLICT},       /* EA registrants only */
        {7, GOOD, GOOD, GOOD, CONFLICT},           /* WE all registrants */
        {8, GOOD, GOOD, CONFLICT, CONFLICT},       /* EA all registrants */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t t = cases[i].type;
        assert_int_equal(prout(&s, A, SA_RESERVE, t, 0xaa, 0), GOOD);
        assert_int_equal(prout(&s, A, SA_RESERVE, t, 0xaa, 0), GOOD);   /* again: no-op */
        assert_int_equal(prin(&s, A, 1), GOOD);
        assert_int_equal(g32(s.in + 4), 16);
        assert_int_equal(g64(s.in + 8), t >= 7 ? 0 : 0xaa);
        assert_int_equal(s.in[21], t);
        expect_access(&s, cases[i].b_read, cases[i].b_write, cases[i].c_read, cases[i].c_write);
        /* someone else's reservation: B cannot reserve (unless it holds it too) */
        assert_int_equal(prout(&s, B, SA_RESERVE, t, 0xbb, 0), t >= 7 ? GOOD : CONFLICT);
        /* MODE SENSE reads, MODE SELECT writes */
        uint8_t ms = SRUN(&s, C, 0, NULL, 0, 64, 0x1a, 0x08, 0x08, 0, 64, 0);
        assert_int_equal(ms, cases[i].c_read);
        /* a non-holder's RELEASE does nothing; the wrong type is refused */
        if (t < 7) {
            assert_int_equal(prout(&s, B, SA_RELEASE, t, 0xbb, 0), GOOD);
            assert_int_equal(prin(&s, A, 1), GOOD);
            assert_int_equal(g32(s.in + 4), 16);
        }
        assert_int_equal(prout(&s, A, SA_RELEASE, t == 1 ? 3 : 1, 0xaa, 0), SCSI_STATUS_CHECK_CONDITION);
        sfix_expect_sense(&s, 0x5, 0x26, 0x04);
        assert_int_equal(prout(&s, t >= 7 ? B : A, SA_RELEASE, t, t >= 7 ? 0xbb : 0xaa, 0), GOOD);
        assert_int_equal(prin(&s, C, 1), GOOD);
        assert_int_equal(g32(s.in + 4), 0);
        /* registrants-only release tells the other registrants */
        if (t >= 5) {
            assert_int_equal(SRUN(&s, t >= 7 ? A : B, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0),
                             SCSI_STATUS_CHECK_CONDITION);
            sfix_expect_sense(&s, 0x6, 0x2a, 0x04);
        }
        expect_access(&s, GOOD, GOOD, GOOD, GOOD);
    }

    /* all-registrants: the reservation lasts while any registrant remains */
    assert_int_equal(prout(&s, A, SA_RESERVE, 7, 0xaa, 0), GOOD);
    assert_int_equal(prout(&s, A, SA_REGISTER, 0, 0xaa, 0), GOOD);   /* A unregisters */
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(g32(s.in + 4), 16);
    assert_int_equal(wr(&s, A), CONFLICT);
    assert_int_equal(wr(&s, B), GOOD);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0xbb, 0), GOOD);   /* last one */
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(g32(s.in + 4), 0);
    assert_int_equal(wr(&s, A), GOOD);
    /* generation counts registrations only */
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in), 4);
    sfix_done(&s);
}

static void test_pr_preempt_clear(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_prpre", 512, true);
    assert_int_equal(prout(&s, A, SA_REGISTER, 0, 0, 0xaa), GOOD);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), GOOD);
    assert_int_equal(prout(&s, B, SA_RESERVE, 3, 0xbb, 0), GOOD);
    assert_int_equal(wr(&s, A), CONFLICT);
    /* A preempts B: B's registration and reservation go, A holds EA */
    assert_int_equal(prout(&s, A, SA_PREEMPT, 3, 0xaa, 0xbb), GOOD);
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(g64(s.in + 8), 0xaa);
    assert_int_equal(wr(&s, A), GOOD);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x05);
    assert_int_equal(rd(&s, B), CONFLICT);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 8);
    /* B (unregistered now) cannot preempt; preempting a key nobody has conflicts */
    assert_int_equal(prout(&s, B, SA_PREEMPT, 3, 0xbb, 0xaa), CONFLICT);
    assert_int_equal(prout(&s, A, SA_PREEMPT, 3, 0xaa, 0x77), CONFLICT);
    /* REGISTER AND IGNORE EXISTING KEY works whatever key is given */
    assert_int_equal(prout(&s, B, SA_REG_IGNORE, 0, 0x1234, 0xb2), GOOD);
    assert_int_equal(prout(&s, B, SA_REG_IGNORE, 0, 0x9999, 0xb3), GOOD);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 16);
    /* PREEMPT AND ABORT of a non-holder key removes just that registration */
    assert_int_equal(prout(&s, A, SA_PREEMPT_ABORT, 3, 0xaa, 0xb3), GOOD);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 8);
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(g64(s.in + 8), 0xaa);   /* A's reservation is untouched */
    SRUN(&s, B, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x05);
    /* preempting key 0 without an all-registrants reservation is invalid */
    assert_int_equal(prout(&s, A, SA_PREEMPT, 3, 0xaa, 0), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);
    /* preempting one's own reservation changes its type */
    assert_int_equal(prout(&s, A, SA_PREEMPT, 1, 0xaa, 0xaa), GOOD);
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(s.in[21], 1);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 8);   /* and keeps the registration */

    /* all-registrants preempted with key 0: everyone else goes */
    assert_int_equal(prout(&s, A, SA_RELEASE, 1, 0xaa, 0), GOOD);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), GOOD);
    assert_int_equal(prout(&s, C, SA_REGISTER, 0, 0, 0xcc), GOOD);
    assert_int_equal(prout(&s, B, SA_RESERVE, 8, 0xbb, 0), GOOD);
    assert_int_equal(prout(&s, A, SA_PREEMPT, 1, 0xaa, 0), GOOD);
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(s.in[21], 1);
    assert_int_equal(g64(s.in + 8), 0xaa);
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 8);
    SRUN(&s, C, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x05);

    /* CLEAR: registrations and reservation gone, others hear RESERVATIONS PREEMPTED */
    SRUN(&s, B, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x05);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), GOOD);
    assert_int_equal(prout(&s, B, SA_CLEAR, 0, 0xb0, 0), CONFLICT);   /* wrong key */
    assert_int_equal(prout(&s, B, SA_CLEAR, 0, 0xbb, 0), GOOD);
    assert_int_equal(prin(&s, C, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 0);
    assert_int_equal(prin(&s, C, 1), GOOD);
    assert_int_equal(g32(s.in + 4), 0);
    SRUN(&s, A, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x03);
    assert_int_equal(wr(&s, C), GOOD);
    sfix_done(&s);
}

typedef struct hook_log {
    int calls, erases;
    int fail;             /* what the next call returns (then 0 again) */
    uint8_t last[1024];
    size_t len;
} hook_log_t;

static int hook(void *arg, uint64_t lun, const void *state, size_t len)
{
    hook_log_t *h = arg;
    assert_true(lun == 0 || lun == 3);
    h->calls++;
    if (h->fail) {
        int e = h->fail;
        h->fail = 0;
        return e;
    }
    if (!state) {
        assert_int_equal(len, 0);
        h->erases++;
        h->len = 0;
        return 0;
    }
    assert_true(len <= sizeof(h->last));
    memcpy(h->last, state, len);
    h->len = len;
    return 0;
}

static void test_pr_status_and_persistence(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_prstat", 512, true);
    /* REPORT CAPABILITIES without a persistence hook */
    assert_int_equal(prin(&s, A, 2), GOOD);
    assert_int_equal(s.cmd.data_in_len, 8);
    assert_int_equal(s.in[1], 8);
    assert_int_equal(s.in[2], 0x14);   /* CRH, ATP_C */
    assert_int_equal(s.in[3], 0x90);   /* TMV, ALLOW COMMANDS 1 */
    assert_int_equal(s.in[4], 0xea);
    assert_int_equal(s.in[5], 0x01);
    assert_int_equal(prout_ex(&s, A, SA_REGISTER, 0, 0, 0xaa, 0x01, 24), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);   /* APTPL unsupported without a hook */
    assert_int_equal(prout_ex(&s, A, SA_REGISTER, 0, 0, 0xaa, 0x08, 24), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);   /* SPEC_I_PT */
    assert_int_equal(prout_ex(&s, A, SA_REGISTER, 0, 0, 0xaa, 0, 23), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x1a, 0x00);
    assert_int_equal(prout_ex(&s, A, SA_RESERVE, 1, 0, 0xaa, 0x04, 24), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);   /* ALL_TG_PT outside REGISTER */
    SRUN(&s, A, 0, NULL, 0, 0, 0x5f, 0x07, 0, 0, 0, 0, 0, 0, 24, 0);   /* REGISTER AND MOVE */
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    hook_log_t h = {0};
    scsi_lu_set_pr_hook(s.tgt, 0, hook, &h);
    assert_int_equal(prin(&s, A, 2), GOOD);
    assert_int_equal(s.in[2], 0x15);   /* PTPL_C */
    assert_int_equal(s.in[3], 0x90);   /* not PTPL_A: nobody asked yet */
    /* without APTPL nothing is stored */
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), GOOD);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0xbb, 0), GOOD);
    assert_int_equal(h.calls, 0);
    /* A registers through all target ports and asks for persistence; so does C */
    assert_int_equal(prout_ex(&s, A, SA_REGISTER, 0, 0, 0xaa, 0x05, 24), GOOD);
    assert_int_equal(prout_ex(&s, C, SA_REGISTER, 0, 0, 0xcc, 0x01, 24), GOOD);
    assert_int_equal(prout(&s, C, SA_RESERVE, 6, 0xcc, 0), GOOD);   /* APTPL ignored here */
    assert_int_equal(h.calls, 3);
    assert_int_equal(h.erases, 0);
    assert_int_equal(prin(&s, A, 2), GOOD);
    assert_int_equal(s.in[3], 0x91);   /* PTPL_A */
    uint8_t saved[1024];
    size_t saved_len = h.len;
    memcpy(saved, h.last, h.len);

    /* a store that fails: the command fails and nothing changed */
    h.fail = -EIO;
    assert_int_equal(prout(&s, C, SA_RELEASE, 6, 0xcc, 0), SCSI_STATUS_CHECK_CONDITION);
    assert_int_equal(prin(&s, A, 1), GOOD);
    assert_int_equal(g64(s.in + 8), 0xcc);
    assert_int_equal(s.in[21], 6);
    assert_int_equal(g32(s.in), 4);   /* generation as before */
    h.fail = -E2BIG;
    assert_int_equal(prout_ex(&s, B, SA_REGISTER, 0, 0, 0xbb, 0x01, 24), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x5, 0x55, 0x04);   /* INSUFFICIENT REGISTRATION RESOURCES */
    assert_int_equal(prin(&s, A, 0), GOOD);
    assert_int_equal(g32(s.in + 4), 16);   /* still A and C only */
    assert_int_equal(h.calls, 5);
    assert_int_equal(h.len, saved_len);
    assert_memory_equal(h.last, saved, saved_len);

    /* READ FULL STATUS: both, C the holder, iSCSI TransportIDs */
    assert_int_equal(prin(&s, B, 3), GOOD);
    uint32_t add = g32(s.in + 4);
    bool saw_a = false, saw_c = false;
    for (uint32_t off = 8; off < 8 + add;) {
        const uint8_t *d = s.in + off;
        uint32_t tl = g32(d + 20);
        const uint8_t *tid = d + 24;
        assert_int_equal(tid[0] & 0x0f, 5);
        assert_int_equal(tl % 4, 0);
        if (g64(d) == 0xaa) {
            saw_a = true;
            assert_int_equal(d[12], 0x02);   /* ALL_TG_PT, not holder */
            assert_int_equal(tid[0] & 0xc0, 0x40);
            assert_string_equal((const char *)tid + 4, s.nx[A].initiator);
        } else {
            assert_int_equal(g64(d), 0xcc);
            saw_c = true;
            assert_int_equal(d[12], 0x01);   /* holder */
            assert_int_equal(d[13], 6);
            assert_int_equal((d[18] << 8) | d[19], 2);
            assert_int_equal(tid[0] & 0xc0, 0x00);
            assert_string_equal((const char *)tid + 4, "iqn.2026-11.test:c");
        }
        off += 24 + tl;
    }
    assert_true(saw_a && saw_c);

    /* a registration without APTPL turns persistence off: the store forgets */
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), GOOD);
    assert_int_equal(h.erases, 1);
    assert_int_equal(prin(&s, A, 2), GOOD);
    assert_int_equal(s.in[3], 0x90);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0xbb, 0), GOOD);
    assert_int_equal(h.calls, 6);   /* nothing stored, nothing to forget again */

    /* restore into a fresh LU over the other volume: same keys, holder and APTPL */
    scsi_lu_opts_t lo = {.id = 5, .thin = true, .pr_state = saved, .pr_state_len = saved_len - 1};
    assert_int_equal(scsi_lu_add(s.tgt, 3, s.zv[1], &lo, NULL), -EINVAL);
    lo.pr_state_len = saved_len;
    lo.pr_hook = hook;
    lo.pr_hook_arg = &h;
    assert_int_equal(scsi_lu_add(s.tgt, 3, s.zv[1], &lo, NULL), 0);
    assert_int_equal(scsi_lu_pr_restore(s.tgt, 3, saved, saved_len - 1), -EINVAL);
    assert_int_equal(scsi_lu_pr_restore(s.tgt, 9, saved, saved_len), -ENOENT);
    const uint8_t tur[6] = {0};
    for (int n = 0; n < 3; n++) {   /* the new LU's power-on UA for every known nexus */
        sfix_run(&s, n, 3, tur, 6, NULL, 0, 0);
        sfix_expect_sense(&s, 0x6, 0x29, 0x00);
    }
    uint8_t cdb[10] = {0x5e, 1, 0, 0, 0, 0, 0, 0x04, 0, 0};
    sfix_run(&s, A, 3, cdb, 10, NULL, 0, 1024);
    sfix_expect_good(&s);
    assert_int_equal(g64(s.in + 8), 0xcc);
    assert_int_equal(s.in[21], 6);
    assert_int_equal(g32(s.in), 4);   /* generation kept */
    cdb[1] = 2;
    sfix_run(&s, A, 3, cdb, 10, NULL, 0, 1024);
    sfix_expect_good(&s);
    assert_int_equal(s.in[3], 0x91);   /* PTPL_A came back with it */
    const uint8_t rd3[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    assert_int_equal(sfix_run(&s, B, 3, rd3, 10, NULL, 0, 512), CONFLICT);
    assert_int_equal(sfix_run(&s, A, 3, rd3, 10, NULL, 0, 512), GOOD);
    /* the restored LU keeps storing its changes, and forgets them when asked */
    int calls = h.calls;
    const uint8_t rel[10] = {0x5f, SA_RELEASE, 6, 0, 0, 0, 0, 0, 24, 0};
    uint8_t rp[24] = {0};
    rp[7] = 0xcc;
    sfix_run(&s, C, 3, rel, 10, rp, 24, 0);
    sfix_expect_good(&s);
    assert_int_equal(h.calls, calls + 1);
    assert_true(h.len > 0);
    const uint8_t reg[10] = {0x5f, SA_REGISTER, 0, 0, 0, 0, 0, 0, 24, 0};
    uint8_t rg[24] = {0};
    rg[7] = 0xcc;   /* C unregisters, APTPL=0 */
    sfix_run(&s, C, 3, reg, 10, rg, 24, 0);
    sfix_expect_good(&s);
    assert_int_equal(h.calls, calls + 2);
    assert_int_equal(h.erases, 2);
    assert_int_equal(scsi_lu_remove(s.tgt, 3), 0);
    sfix_done(&s);
}

/*
 * pr_persist_all (an HA pair): every change reaches the store, APTPL or not,
 * and the stored string says whether APTPL was active, so the store can keep
 * it all for a takeover and drop what a restart must forget. A fresh LU given
 * the string holds the same keys and reservation.
 */
static void test_pr_persist_all(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_prall", 512, true);
    hook_log_t h = {0};
    scsi_lu_opts_t lo = {.id = 7, .thin = true, .pr_hook = hook, .pr_hook_arg = &h,
                         .pr_persist_all = true};
    assert_int_equal(scsi_lu_add(s.tgt, 3, s.zv[1], &lo, NULL), 0);
    const uint8_t tur[6] = {0};
    sfix_run(&s, A, 3, tur, 6, NULL, 0, 0);   /* the new LU's power-on UA */
    uint8_t reg[10] = {0x5f, SA_REGISTER, 0, 0, 0, 0, 0, 0, 24, 0};
    uint8_t p[24] = {0};
    p[15] = 0xa1;
    assert_int_equal(sfix_run(&s, A, 3, reg, 10, p, 24, 0), GOOD);
    assert_int_equal(h.calls, 1);
    assert_false(scsi_pr_state_aptpl(h.last, h.len));
    uint8_t res[10] = {0x5f, SA_RESERVE, 3, 0, 0, 0, 0, 0, 24, 0};
    p[7] = 0xa1;
    p[15] = 0;
    assert_int_equal(sfix_run(&s, A, 3, res, 10, p, 24, 0), GOOD);
    assert_int_equal(h.calls, 2);
    assert_false(scsi_pr_state_aptpl(h.last, h.len));
    assert_false(scsi_pr_state_aptpl(h.last, h.len - 1));   /* malformed: no */

    uint8_t saved[1024];
    size_t saved_len = h.len;
    memcpy(saved, h.last, h.len);
    assert_int_equal(scsi_lu_remove(s.tgt, 3), 0);
    lo.pr_state = saved;
    lo.pr_state_len = saved_len;
    assert_int_equal(scsi_lu_add(s.tgt, 3, s.zv[1], &lo, NULL), 0);
    sfix_run(&s, A, 3, tur, 6, NULL, 0, 0);
    sfix_run(&s, B, 3, tur, 6, NULL, 0, 0);
    const uint8_t wr[10] = {0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    uint8_t block[512] = {0};
    assert_int_equal(sfix_run(&s, B, 3, wr, 10, block, 512, 0), CONFLICT);
    assert_int_equal(sfix_run(&s, A, 3, wr, 10, block, 512, 0), GOOD);
    assert_int_equal(scsi_lu_remove(s.tgt, 3), 0);
    sfix_done(&s);
}

static void test_reserve6(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_res6", 512, true);
    assert_int_equal(SRUN(&s, A, 0, NULL, 0, 0, 0x16, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(SRUN(&s, A, 0, NULL, 0, 0, 0x16, 0, 0, 0, 0, 0), GOOD);   /* again */
    assert_int_equal(rd(&s, B), CONFLICT);
    assert_int_equal(wr(&s, B), CONFLICT);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0), CONFLICT);
    assert_int_equal(prin(&s, B, 0), CONFLICT);
    assert_int_equal(prout(&s, B, SA_REGISTER, 0, 0, 0xbb), CONFLICT);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0), CONFLICT);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 96, 0x12, 0, 0, 0, 96, 0), GOOD);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 64, 0x03, 0, 0, 0, 64, 0), GOOD);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 64, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0), GOOD);
    /* B's RELEASE succeeds without releasing anything */
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x17, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(rd(&s, B), CONFLICT);
    assert_int_equal(rd(&s, A), GOOD);
    assert_int_equal(wr(&s, A), GOOD);
    /* LU 1 is not reserved */
    const uint8_t rd10[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    assert_int_equal(sfix_run(&s, B, 1, rd10, 10, NULL, 0, 512), GOOD);
    /* logout of the holder releases */
    scsi_nexus_logout(s.tgt, &s.nx[A]);
    assert_int_equal(rd(&s, B), GOOD);
    /* RESERVE(10), RELEASE(10) */
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(wr(&s, A), CONFLICT);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(wr(&s, A), GOOD);
    /* a reset releases too (and raises its unit attention) */
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x16, 0, 0, 0, 0, 0), GOOD);
    scsi_reset(s.tgt, UINT64_MAX);
    assert_int_equal(SRUN(&s, A, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0), SCSI_STATUS_CHECK_CONDITION);
    sfix_expect_sense(&s, 0x6, 0x29, 0x03);
    assert_int_equal(wr(&s, A), GOOD);

    /* with a persistent reservation: its holder's RESERVE(6) is a no-op, others conflict */
    assert_int_equal(prout(&s, A, SA_REGISTER, 0, 0, 0xaa), GOOD);
    assert_int_equal(prout(&s, A, SA_RESERVE, 1, 0xaa, 0), GOOD);
    SRUN(&s, B, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);   /* B's reset UA */
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x16, 0, 0, 0, 0, 0), CONFLICT);
    assert_int_equal(SRUN(&s, B, 0, NULL, 0, 0, 0x17, 0, 0, 0, 0, 0), CONFLICT);
    assert_int_equal(SRUN(&s, A, 0, NULL, 0, 0, 0x16, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(SRUN(&s, A, 0, NULL, 0, 0, 0x17, 0, 0, 0, 0, 0), GOOD);
    assert_int_equal(wr(&s, B), CONFLICT);   /* the persistent reservation holds */
    assert_int_equal(rd(&s, B), GOOD);
    /* a persistent reservation survives the holder's logout */
    scsi_nexus_logout(s.tgt, &s.nx[A]);
    assert_int_equal(wr(&s, B), CONFLICT);
    assert_int_equal(prout(&s, A, SA_CLEAR, 0, 0xaa, 0), GOOD);
    assert_int_equal(wr(&s, B), GOOD);
    sfix_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pr_types),
        cmocka_unit_test(test_pr_preempt_clear),
        cmocka_unit_test(test_pr_status_and_persistence),
        cmocka_unit_test(test_pr_persist_all),
        cmocka_unit_test(test_reserve6),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
