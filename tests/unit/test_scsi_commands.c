/*
 * SPC-4 / SBC-3 commands over real volumes: INQUIRY and VPD pages, REPORT
 * LUNS, READ CAPACITY, reads and writes of every size with FUA and their
 * range checks, VERIFY, COMPARE AND WRITE, UNMAP and WRITE SAME measured in
 * allocated bytes, GET LBA STATUS, MODE SENSE/SELECT, REPORT SUPPORTED
 * OPERATION CODES, REPORT TARGET PORT GROUPS, EXTENDED COPY between two LUs,
 * unit attentions, write protection, the exact sense of each refusal, and
 * memory_only execution (a transport's connection thread).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_scsi_fixture.h"

#include <cairn/arc.h>
#include <cairn/spa.h>

#define NBLOCKS (SF_VOLSIZE / 512)

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t g32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint64_t g64(const uint8_t *p) { return (uint64_t)g32(p) << 32 | g32(p + 4); }

static void expect_field_pointer(sfix_t *s, bool cdb, unsigned byte)
{
    assert_true(s->cmd.sense[15] & 0x80);
    assert_int_equal(!!(s->cmd.sense[15] & 0x40), cdb);
    assert_int_equal(g16(s->cmd.sense + 16), byte);
}

/* Pointer to the designator of type `type` in a VPD 0x83 page, or NULL. */
static const uint8_t *find_designator(const uint8_t *p, unsigned type)
{
    unsigned len = g16(p + 2) + 4u;
    for (unsigned off = 4; off + 4 <= len; off += 4u + p[off + 3])
        if ((p[off + 1] & 0x0f) == type) return p + off;
    return NULL;
}

static void test_inquiry(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_inq", 512, true);

    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 0, 0, 0, 255, 0);
    sfix_expect_good(&s);
    const uint8_t *b = s.in;
    assert_int_equal(s.cmd.data_in_len, 66);
    assert_int_equal(b[0], 0x00);
    assert_int_equal(b[2], 0x06);
    assert_int_equal(b[3] & 0x0f, 2);
    assert_int_equal(b[4], 61);
    assert_int_equal((b[5] >> 4) & 3, 1);   /* TPGS implicit */
    assert_true(b[5] & 0x08);               /* 3PC */
    assert_true(b[7] & 0x02);               /* CmdQue */
    assert_memory_equal(b + 8, "CAIRN   ", 8);
    assert_memory_equal(b + 16, "Cairn volume    ", 16);

    /* allocation length truncates */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 0, 0, 0, 5, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 5);

    /* VPD 0x00 */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x00, 0, 255, 0);
    sfix_expect_good(&s);
    const uint8_t want_pages[] = {0x00, 0x80, 0x83, 0x86, 0xb0, 0xb1, 0xb2};
    assert_int_equal(g16(s.in + 2), sizeof(want_pages));
    assert_memory_equal(s.in + 4, want_pages, sizeof(want_pages));

    /* 0x80 serial from the LU id */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x80, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[1], 0x80);
    assert_int_equal(g16(s.in + 2), 16);
    assert_memory_equal(s.in + 4, "1122334455667788", 16);

    /* 0x83: NAA type 6 carrying the id; T10; relative port; port group */
    SRUN(&s, 1, 0, NULL, 0, 255, 0x12, 1, 0x83, 0, 255, 0);
    sfix_expect_good(&s);
    const uint8_t *naa = find_designator(s.in, 3);
    assert_non_null(naa);
    assert_int_equal(naa[0] & 0x0f, 1);
    assert_int_equal(naa[3], 16);
    assert_int_equal(naa[4] >> 4, 6);
    assert_int_equal(g64(naa + 12), SF_ID0);
    const uint8_t *t10 = find_designator(s.in, 1);
    assert_non_null(t10);
    assert_memory_equal(t10 + 4, "CAIRN   ", 8);
    const uint8_t *rtp = find_designator(s.in, 4);
    assert_non_null(rtp);
    assert_int_equal((rtp[1] >> 4) & 3, 1);
    assert_int_equal(g16(rtp + 6), 1);
    const uint8_t *tpg = find_designator(s.in, 5);
    assert_non_null(tpg);
    assert_int_equal(g16(tpg + 6), 1);
    /* LU 1 has another name */
    uint8_t naa0[16];
    memcpy(naa0, naa + 4, 16);
    SRUN(&s, 1, 1, NULL, 0, 255, 0x12, 1, 0x83, 0, 255, 0);
    sfix_expect_good(&s);
    assert_memory_not_equal(find_designator(s.in, 3) + 4, naa0, 16);

    /* 0x86 extended, 0xB0 limits, 0xB1 non-rotating, 0xB2 thin */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x86, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(g16(s.in + 2), 0x3c);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0xb0, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(g16(s.in + 2), 0x3c);
    assert_int_equal(s.in[5], 255);                       /* max CAW */
    assert_int_equal(g16(s.in + 6), SF_VBS / 512);        /* optimal granularity */
    assert_int_equal(g32(s.in + 8), 8 * SF_MIB / 512);    /* max transfer */
    /* optimal transfer: Linux limits every request to it, so not one volume block */
    assert_int_equal(g32(s.in + 12), SF_MIB / 512);
    assert_int_equal(g32(s.in + 12) % (SF_VBS / 512), 0);
    assert_int_equal(g32(s.in + 20), 1024 * 1024);
    assert_int_equal(g32(s.in + 24), 256);
    assert_int_equal(g32(s.in + 28), SF_VBS / 512);       /* unmap granularity */
    assert_int_equal(g64(s.in + 36), 65535);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0xb1, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(g16(s.in + 4), 1);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0xb2, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[5], 0xe4);
    assert_int_equal(s.in[6] & 7, 2);

    /* unknown page, page without EVPD */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x99, 0, 255, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    expect_field_pointer(&s, true, 2);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 0, 0x80, 0, 255, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    /* an unconfigured LUN: qualifier 011b; other commands: LU NOT SUPPORTED */
    SRUN(&s, 0, 7, NULL, 0, 255, 0x12, 0, 0, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[0], 0x7f);
    SRUN(&s, 0, 7, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x25, 0x00);
    /* the same LU through its SAM LUN field (peripheral addressing) */
    SRUN(&s, 0, 0x0001000000000000ull, NULL, 0, 255, 0x12, 1, 0x80, 0, 255, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in + 4, "99aabbccddeeff00", 16);
    sfix_done(&s);
}

static void test_report_luns_and_capacity(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_luns", 512, true);
    for (uint8_t sel = 0; sel <= 2; sel += 2) {
        SRUN(&s, 0, 0, NULL, 0, 256, 0xa0, 0, sel, 0, 0, 0, 0, 0, 1, 0, 0, 0);
        sfix_expect_good(&s);
        assert_int_equal(g32(s.in), 16);
        assert_int_equal(s.cmd.data_in_len, 24);
        assert_int_equal(g64(s.in + 8), 0);
        assert_int_equal(g64(s.in + 16), 0x0001000000000000ull);
    }
    SRUN(&s, 0, 0, NULL, 0, 256, 0xa0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 0);
    SRUN(&s, 0, 0, NULL, 0, 256, 0xa0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 256, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    /* works on an unconfigured LUN */
    SRUN(&s, 0, 9, NULL, 0, 256, 0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0);
    sfix_expect_good(&s);

    SRUN(&s, 0, 0, NULL, 0, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), NBLOCKS - 1);
    assert_int_equal(g32(s.in + 4), 512);
    SRUN(&s, 0, 0, NULL, 0, 8, 0x25, 0, 0, 0, 0, 1, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 32, 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 32);
    assert_int_equal(g64(s.in), NBLOCKS - 1);
    assert_int_equal(g32(s.in + 8), 512);
    assert_int_equal(s.in[13] & 0x0f, 0);   /* a physical block is a logical block */
    assert_int_equal(s.in[14], 0xc0);       /* LBPME, LBPRZ */
    SRUN(&s, 0, 0, NULL, 0, 32, 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 12);
    sfix_done(&s);
}

static void test_read_write(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_rw", 512, true);
    sfix_login_clear(&s);
    uint8_t *w = malloc(64 * 1024);
    zfill(w, 1, 0, 64 * 1024);

    /* WRITE(10) FUA 16 blocks at LBA 100, read back by every READ */
    SRUN(&s, 0, 0, w, 8192, 0, 0x2a, 0x08, 0, 0, 0, 100, 0, 0, 16, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 8192, 0x28, 0, 0, 0, 0, 100, 0, 0, 16, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 8192);
    assert_memory_equal(s.in, w, 8192);
    SRUN(&s, 0, 0, NULL, 0, 8192, 0xa8, 0x10, 0, 0, 0, 100, 0, 0, 0, 16, 0, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, w, 8192);
    SRUN(&s, 0, 0, NULL, 0, 8192, 0x88, 0x08, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 16, 0, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, w, 8192);
    SRUN(&s, 0, 0, NULL, 0, 1024, 0x08, 0, 0, 101, 2, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, w + 512, 1024);

    /* WRITE(6) with length 0 means 256 blocks; WRITE(16); WRITE AND VERIFY */
    SRUN(&s, 0, 0, w, 65536, 0, 0x0a, 0, 0x10, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);   /* Data-Out short of 256 blocks */
    uint8_t *big = malloc(256 * 512);
    zfill(big, 2, 0, 256 * 512);
    SRUN(&s, 0, 0, big, 256 * 512, 0, 0x0a, 0, 0x10, 0, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 256 * 512, 0x08, 0, 0x10, 0, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 256 * 512);
    assert_memory_equal(s.in, big, 256 * 512);
    SRUN(&s, 0, 0, w, 4096, 0, 0x8a, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 8, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, w + 4096, 4096, 0, 0x2e, 0x02, 0, 0, 0x30, 0, 0, 0, 8, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 4096, 0x28, 0, 0, 0, 0x30, 0, 0, 0, 8, 0);
    assert_memory_equal(s.in, w + 4096, 4096);

    /* zero-length transfers: fine up to the end, LBA OUT OF RANGE past it */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x28, 0, 0, 0x02, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);   /* LBA = NBLOCKS */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x28, 0, 0, 0x02, 0, 1, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x2a, 0, 0, 0x02, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);

    /* out of range: last block + 1, a huge LBA, a wrap */
    SRUN(&s, 0, 0, NULL, 0, 1024, 0x28, 0, 0, 0x01, 0xff, 0xff, 0, 0, 2, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0, 0, 0x01, 0xff, 0xff, 0, 0, 1, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, w, 1024, 0, 0x2a, 0, 0, 0x01, 0xff, 0xff, 0, 0, 2, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x88, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    SRUN(&s, 0, 0, w, 512, 0, 0x8a, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 512, 0xa8, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    /* beyond the maximum transfer length */
    SRUN(&s, 0, 0, NULL, 0, 0, 0xa8, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    /* RDPROTECT, NACA, a reserved bit: INVALID FIELD IN CDB with pointers */
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    expect_field_pointer(&s, true, 1);
    assert_int_equal(s.cmd.sense[15], 0xc8 | 5);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0x04);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    expect_field_pointer(&s, true, 9);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0x10, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    expect_field_pointer(&s, true, 4);

    /* SYNCHRONIZE CACHE 10/16, in and out of range */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x91, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x35, 0, 0, 0x02, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);

    /* PRE-FETCH 10/16 */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x34, 0x02, 0, 0x01, 0xff, 0xff, 0, 0, 1, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x34, 0, 0, 0x01, 0xff, 0xff, 0, 0, 2, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0);
    sfix_expect_good(&s);
    /* unknown opcode; known opcode with an unknown service action */
    SRUN(&s, 0, 0, NULL, 0, 0, 0xff, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x20, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 64, 0x9e, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    free(big);
    free(w);
    sfix_done(&s);
}

static void test_verify_and_caw(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_vfy", 512, true);
    sfix_login_clear(&s);
    uint8_t w[4096], x[8192];
    zfill(w, 3, 0, sizeof(w));
    SRUN(&s, 0, 0, w, 4096, 0, 0x2a, 0, 0, 0, 0, 8, 0, 0, 8, 0);
    sfix_expect_good(&s);

    SRUN(&s, 0, 0, NULL, 0, 0, 0x2f, 0, 0, 0, 0, 8, 0, 0, 8, 0);   /* BYTCHK 0 */
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, w, 4096, 0, 0x2f, 0x02, 0, 0, 0, 8, 0, 0, 8, 0);   /* BYTCHK 1 */
    sfix_expect_good(&s);
    memcpy(x, w, 4096);
    x[700] ^= 0x40;
    SRUN(&s, 0, 0, x, 4096, 0, 0x8f, 0x02, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0);
    sfix_expect_sense(&s, 0xe, 0x1d, 0x00);
    assert_true(s.cmd.sense[0] & 0x80);
    assert_int_equal(g32(s.cmd.sense + 3), 700);
    SRUN(&s, 0, 0, w, 4096, 0, 0x2f, 0x04, 0, 0, 0, 8, 0, 0, 8, 0);   /* BYTCHK 2 */
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x2f, 0, 0, 0x02, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    /* BYTCHK 3: one block against every block of the range */
    uint8_t same[512];
    memset(same, 0xa5, sizeof(same));
    SRUN(&s, 0, 0, same, 512, 0, 0x41, 0, 0, 0, 0, 64, 0, 0, 4, 0);   /* WRITE SAME(10) */
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, same, 512, 0, 0x2f, 0x06, 0, 0, 0, 64, 0, 0, 4, 0);
    sfix_expect_good(&s);
    same[3] = 0;
    SRUN(&s, 0, 0, same, 512, 0, 0x2f, 0x06, 0, 0, 0, 64, 0, 0, 4, 0);
    sfix_expect_sense(&s, 0xe, 0x1d, 0x00);
    assert_int_equal(g32(s.cmd.sense + 3), 3);

    /* COMPARE AND WRITE: match writes, mismatch reports the offset and writes nothing */
    memcpy(x, w, 1024);
    memset(x + 1024, 0x77, 1024);
    SRUN(&s, 0, 0, x, 2048, 0, 0x89, 0x08, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 1024, 0x28, 0, 0, 0, 0, 8, 0, 0, 2, 0);
    assert_memory_equal(s.in, x + 1024, 1024);
    memset(x + 1024, 0x11, 1024);   /* compare data is still the old w: miscompare at 0 */
    SRUN(&s, 0, 0, x, 2048, 0, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0);
    sfix_expect_sense(&s, 0xe, 0x1d, 0x00);
    assert_int_equal(g32(s.cmd.sense + 3), 0);
    memset(x, 0x77, 1024);
    x[517] = 0;
    SRUN(&s, 0, 0, x, 2048, 0, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 2, 0, 0);
    sfix_expect_sense(&s, 0xe, 0x1d, 0x00);
    assert_true(s.cmd.sense[0] & 0x80);
    assert_int_equal(g32(s.cmd.sense + 3), 517);
    SRUN(&s, 0, 0, NULL, 0, 1024, 0x28, 0, 0, 0, 0, 8, 0, 0, 2, 0);
    for (int i = 0; i < 1024; i++) assert_int_equal(s.in[i], 0x77);
    /* zero blocks: nothing; Data-Out of another size; out of range */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, x, 2048, 0, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, x, 1024, 0, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, x, 1024, 0, 0x89, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 1, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    sfix_done(&s);
}

static uint64_t used_after_flush(sfix_t *s, int lu)
{
    assert_int_equal(zvol_flush(s->zv[lu]), 0);
    /* space is counted as of the last txg sync; a flush only commits the intent log */
    assert_int_equal(spa_txg_wait_synced(s->f.spa, 0), 0);
    return zvol_used_bytes(s->zv[lu]);
}

static void expect_lba_status(sfix_t *s, uint64_t lba, uint64_t want_lba, bool mapped)
{
    uint8_t cdb[16] = {0x9e, 0x12};
    for (int i = 0; i < 8; i++) cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
    cdb[13] = 24;
    sfix_run(s, 0, 0, cdb, 16, NULL, 0, 24);
    sfix_expect_good(s);
    assert_int_equal(s->cmd.data_in_len, 24);
    assert_true(g32(s->in) >= 20);
    assert_int_equal(g64(s->in + 8), want_lba);
    assert_true(g32(s->in + 16) > 0);
    assert_int_equal(s->in[20], mapped ? 0 : 1);
}

static void test_unmap_write_same(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_unmap", 512, true);
    sfix_login_clear(&s);
    size_t len = 4 * SF_MIB;
    uint8_t *w = malloc(len);
    zfill(w, 4, 0, len);
    for (size_t off = 0; off < len; off += 1024 * 1024) {
        uint32_t lba = (uint32_t)(off / 512);
        SRUN(&s, 0, 0, w + off, 1024 * 1024, 0, 0x2a, 0, 0, 0, (uint8_t)(lba >> 8), (uint8_t)lba, 0,
             0x08, 0x00, 0);
        sfix_expect_good(&s);
    }
    uint64_t full = used_after_flush(&s, 0);
    assert_true(full >= len);
    expect_lba_status(&s, 0, 0, true);

    /* UNMAP the first 2 MiB in two descriptors */
    uint8_t p[8 + 32] = {0, 38, 0, 32};
    p[8 + 10] = 0x08;   /* 2048 blocks at LBA 0 */
    p[24 + 6] = 0x08;   /* LBA 2048 */
    p[24 + 10] = 0x08;  /* 2048 blocks */
    SRUN(&s, 0, 0, p, sizeof(p), 0, 0x42, 0, 0, 0, 0, 0, 0, 0, sizeof(p), 0);
    sfix_expect_good(&s);
    uint64_t after = used_after_flush(&s, 0);
    assert_true(after + 2 * SF_MIB - 64 * 1024 <= full);
    expect_lba_status(&s, 0, 0, false);
    expect_lba_status(&s, 4096, 4096, true);
    expect_lba_status(&s, 17, 17, false);   /* inside a record: starts where asked */
    expect_lba_status(&s, 4097, 4097, true);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    for (int i = 0; i < 512; i++) assert_int_equal(s.in[i], 0);

    /* WRITE SAME(16) UNMAP with a zero block frees the next 2 MiB */
    uint8_t zero[512] = {0};
    SRUN(&s, 0, 0, zero, 512, 0, 0x93, 0x08, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x10, 0, 0, 0);
    sfix_expect_good(&s);
    uint64_t after2 = used_after_flush(&s, 0);
    assert_true(after2 + 2 * SF_MIB - 64 * 1024 <= after);
    expect_lba_status(&s, 4096, 4096, false);
    /* NDOB + UNMAP needs no data */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x93, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0);
    sfix_expect_good(&s);

    /* WRITE SAME(10) of a pattern; zero length runs to the end of the medium */
    uint8_t pat[512];
    memset(pat, 0x5c, sizeof(pat));
    SRUN(&s, 0, 0, pat, 512, 0, 0x41, 0, 0, 0x01, 0xff, 0xf0, 0, 0, 0, 0);   /* last 16 blocks */
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 8192, 0x28, 0, 0, 0x01, 0xff, 0xf0, 0, 0, 16, 0);
    for (int i = 0; i < 8192; i++) assert_int_equal(s.in[i], 0x5c);
    SRUN(&s, 0, 0, pat, 512, 0, 0x41, 0, 0, 0x02, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    /* UNMAP=1 deallocates whatever the block holds */
    SRUN(&s, 0, 0, pat, 512, 0, 0x41, 0x08, 0, 0x01, 0xff, 0xf8, 0, 0, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 8192, 0x28, 0, 0, 0x01, 0xff, 0xf0, 0, 0, 16, 0);
    for (int i = 0; i < 4096; i++) assert_int_equal(s.in[i], 0x5c);
    for (int i = 4096; i < 8192; i++) assert_int_equal(s.in[i], 0);
    /* zero length to the end of a whole LUN exceeds MAXIMUM WRITE SAME LENGTH */
    SRUN(&s, 0, 0, pat, 512, 0, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, pat, 512, 0, 0x41, 0x10, 0, 0, 0, 0, 0, 0, 1, 0);   /* ANCHOR */
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    /* Data-Out must be exactly one block, except that UNMAP may send none */
    SRUN(&s, 0, 0, pat, 256, 0, 0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    uint8_t two[1024] = {0};
    SRUN(&s, 0, 0, two, 1024, 0, 0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x41, 0x08, 0, 0, 0, 0x11, 0, 0, 7, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x41, 0x00, 0, 0, 0, 0x11, 0, 0, 7, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    /* UNMAP refusals: short list, out of range, too many descriptors, too long */
    SRUN(&s, 0, 0, p, 4, 0, 0x42, 0, 0, 0, 0, 0, 0, 0, 4, 0);
    sfix_expect_sense(&s, 0x5, 0x1a, 0x00);
    uint8_t q[8 + 16] = {0, 22, 0, 16};
    q[8 + 4] = 0x01;   /* LBA 2^24 */
    q[8 + 11] = 1;
    SRUN(&s, 0, 0, q, sizeof(q), 0, 0x42, 0, 0, 0, 0, 0, 0, 0, sizeof(q), 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    size_t manylen = 8 + 16 * 257;
    uint8_t *many = calloc(1, manylen);
    many[2] = (uint8_t)((16 * 257) >> 8);
    many[3] = (uint8_t)(16 * 257);
    SRUN(&s, 0, 0, many, (uint32_t)manylen, 0, 0x42, 0, 0, 0, 0, 0, 0, (uint8_t)(manylen >> 8),
         (uint8_t)manylen, 0);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);
    free(many);
    /* zero parameter list: nothing to do */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    /* GET LBA STATUS past the end */
    SRUN(&s, 0, 0, NULL, 0, 24, 0x9e, 0x12, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 24, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x21, 0x00);
    /* one record unmapped between mapped ones: status inside the next record */
    {
        SRUN(&s, 0, 0, w, 16384, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0, 32, 0);   /* map LBAs 0-31 */
        sfix_expect_good(&s);
        uint8_t one[8 + 16] = {0, 22, 0, 16};
        one[8 + 11] = 16;   /* LBA 0, 16 blocks = one 8 KiB record */
        SRUN(&s, 0, 0, one, sizeof(one), 0, 0x42, 0, 0, 0, 0, 0, 0, 0, sizeof(one), 0);
        sfix_expect_good(&s);
        expect_lba_status(&s, 0, 0, false);
        expect_lba_status(&s, 17, 17, true);
        expect_lba_status(&s, 15, 15, false);
        assert_int_equal(g32(s.in + 16), 1);
        SRUN(&s, 0, 0, w, 8192, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0, 16, 0);   /* map it again */
        sfix_expect_good(&s);
        SRUN(&s, 0, 0, w, 8192, 0, 0x2a, 0, 0, 0, 0x40, 0, 0, 0, 16, 0);   /* LBA 16384 fresh */
        sfix_expect_good(&s);
        expect_lba_status(&s, 16384, 16384, true);   /* still in the open txg */
        /* the same within one open txg: fresh blocks written, then unmapped */
        SRUN(&s, 0, 0, w, 272 * 512, 0, 0x2a, 0, 0, 0, 0x20, 0, 0, 0x01, 0x10, 0);   /* LBA 8192 */
        sfix_expect_good(&s);
        one[8 + 6] = 0x20;
        SRUN(&s, 0, 0, one, sizeof(one), 0, 0x42, 0, 0, 0, 0, 0, 0, 0, sizeof(one), 0);
        sfix_expect_good(&s);
        expect_lba_status(&s, 8192, 8192, false);
        expect_lba_status(&s, 8192 + 17, 8192 + 17, true);
        /* one logical block unmapped inside a stored record: one descriptor
         * per run of blocks, the unmapped block on its own */
        one[8 + 7] = 20;
        one[8 + 11] = 1;
        SRUN(&s, 0, 0, one, sizeof(one), 0, 0x42, 0, 0, 0, 0, 0, 0, 0, sizeof(one), 0);
        sfix_expect_good(&s);
        SRUN(&s, 0, 0, NULL, 0, 56, 0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0x20, 19, 0, 0, 0, 56, 0, 0);
        sfix_expect_good(&s);
        assert_int_equal(g32(s.in), 4 + 3 * 16);
        assert_int_equal(g64(s.in + 8), 8192 + 19);
        assert_int_equal(g32(s.in + 16), 1);
        assert_int_equal(s.in[20], 0);
        assert_int_equal(g64(s.in + 24), 8192 + 20);
        assert_int_equal(g32(s.in + 32), 1);
        assert_int_equal(s.in[36], 1);
        assert_int_equal(g64(s.in + 40), 8192 + 21);
        assert_int_equal(s.in[52], 0);
    }
    free(w);
    sfix_done(&s);
}

static void test_thick_lu(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_thick", 4096, false);
    sfix_login_clear(&s);
    SRUN(&s, 0, 0, NULL, 0, 32, 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g64(s.in), SF_VOLSIZE / 4096 - 1);
    assert_int_equal(g32(s.in + 8), 4096);
    assert_int_equal(s.in[13] & 0x0f, 0);
    assert_int_equal(s.in[14], 0x40);   /* no LBPME */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0xb2, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[5], 0x04);
    assert_int_equal(s.in[6] & 7, 0);
    uint8_t p[24] = {0, 22, 0, 16};
    SRUN(&s, 0, 0, p, sizeof(p), 0, 0x42, 0, 0, 0, 0, 0, 0, 0, sizeof(p), 0);
    sfix_expect_sense(&s, 0x5, 0x20, 0x00);
    uint8_t w[4096];
    zfill(w, 9, 0, sizeof(w));
    SRUN(&s, 0, 0, w, 4096, 0, 0x2a, 0, 0, 0, 0, 3, 0, 0, 1, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 4096, 0x28, 0, 0, 0, 0, 3, 0, 0, 1, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, w, 4096);
    sfix_done(&s);
}

static void test_mode_pages(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_mode", 512, true);
    sfix_login_clear(&s);
    /* MODE SENSE(6) all pages, current */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0, 0x3f, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 4 + 8 + 20 + 12 + 12);
    assert_int_equal(s.in[0], s.cmd.data_in_len - 1);
    assert_int_equal(s.in[2], 0x10);   /* DPOFUA, not WP */
    assert_int_equal(s.in[3], 8);
    assert_int_equal(g32(s.in + 4), NBLOCKS);
    assert_int_equal(s.in[4 + 8 + 0], 0x08);
    assert_int_equal(s.in[4 + 8 + 1], 0x12);
    assert_true(s.in[4 + 8 + 2] & 0x04);   /* WCE */
    assert_int_equal(s.in[4 + 8 + 20], 0x0a);
    assert_int_equal(s.in[4 + 8 + 32], 0x1c);
    /* MODE SENSE(10) caching page, DBD, changeable: WCE */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x5a, 0x08, 0x48, 0, 0, 0, 0, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 8 + 20);
    assert_int_equal(g16(s.in + 6), 0);
    assert_int_equal(s.in[8 + 2], 0x04);
    for (int i = 3; i < 20; i++) assert_int_equal(s.in[8 + i], 0);
    /* LLBAA long descriptor */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x5a, 0x10, 0x0a, 0, 0, 0, 0, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[4] & 1, 1);
    assert_int_equal(g16(s.in + 6), 16);
    assert_int_equal(g64(s.in + 8), NBLOCKS);
    assert_int_equal(s.in[24], 0x0a);
    /* saved reads as default; unknown page; bad subpage */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0xc8, 0, 255, 0);
    sfix_expect_good(&s);
    assert_true(s.in[4 + 2] & 0x04);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0, 0x19, 0, 255, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0, 0x08, 0x01, 255, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    /* MODE SELECT(6): clear WCE; the other nexus sees MODE PARAMETERS CHANGED */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0x08, 0, 255, 0);
    uint8_t sel[4 + 20];
    memcpy(sel, s.in, sizeof(sel));
    sel[0] = 0;
    sel[4 + 2] &= (uint8_t)~0x04;
    SRUN(&s, 0, 0, sel, sizeof(sel), 0, 0x15, 0x10, 0, 0, sizeof(sel), 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0x08, 0, 255, 0);
    sfix_expect_good(&s);
    assert_false(s.in[4 + 2] & 0x04);
    SRUN(&s, 1, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x01);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    /* writes still work (now write-through) */
    uint8_t w[512];
    memset(w, 0x42, sizeof(w));
    SRUN(&s, 0, 0, w, 512, 0, 0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0);
    sfix_expect_good(&s);
    /* a non-changeable field: INVALID FIELD IN PARAMETER LIST pointing at it */
    sel[4 + 12] = 0x20;   /* DRA */
    SRUN(&s, 0, 0, sel, sizeof(sel), 0, 0x15, 0x10, 0, 0, sizeof(sel), 0);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);
    expect_field_pointer(&s, false, 16);
    sel[4 + 12] = 0;
    /* SP, PF=0, short list, wrong page length, wrong block length */
    SRUN(&s, 0, 0, sel, sizeof(sel), 0, 0x15, 0x11, 0, 0, sizeof(sel), 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, sel, sizeof(sel), 0, 0x15, 0x00, 0, 0, sizeof(sel), 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, sel, 10, 0, 0x15, 0x10, 0, 0, 10, 0);
    sfix_expect_sense(&s, 0x5, 0x1a, 0x00);
    sel[4 + 1] = 0x10;
    SRUN(&s, 0, 0, sel, sizeof(sel), 0, 0x15, 0x10, 0, 0, sizeof(sel), 0);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);
    uint8_t bd[4 + 8] = {0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x10, 0};   /* 4096-byte blocks */
    SRUN(&s, 0, 0, bd, sizeof(bd), 0, 0x15, 0x10, 0, 0, sizeof(bd), 0);
    sfix_expect_sense(&s, 0x5, 0x26, 0x00);
    bd[10] = 0x02;   /* 512: accepted, no pages */
    SRUN(&s, 0, 0, bd, sizeof(bd), 0, 0x15, 0x10, 0, 0, sizeof(bd), 0);
    sfix_expect_good(&s);
    /* SWP: set through the control page, writes refused, reads fine, cleared again */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0x0a, 0, 255, 0);
    uint8_t ctl[4 + 12];
    memcpy(ctl, s.in, sizeof(ctl));
    ctl[0] = 0;
    ctl[4 + 4] |= 0x08;
    SRUN(&s, 0, 0, ctl, sizeof(ctl), 0, 0x15, 0x10, 0, 0, sizeof(ctl), 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, w, 512, 0, 0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x7, 0x27, 0x02);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 9, 0, 0, 1, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0x0a, 0, 255, 0);
    assert_int_equal(s.in[2], 0x90);   /* WP */
    ctl[4 + 4] &= (uint8_t)~0x08;
    SRUN(&s, 0, 0, ctl, sizeof(ctl), 0, 0x15, 0x10, 0, 0, sizeof(ctl), 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, w, 512, 0, 0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0);
    sfix_expect_good(&s);
    /* MODE SELECT(10) back to WCE=1 */
    uint8_t sel10[8 + 20] = {0};
    sel10[8] = 0x08;
    sel10[9] = 0x12;
    sel10[10] = 0x04;
    SRUN(&s, 0, 0, sel10, sizeof(sel10), 0, 0x55, 0x10, 0, 0, 0, 0, 0, 0, sizeof(sel10), 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x1a, 0x08, 0x08, 0, 255, 0);
    assert_true(s.in[4 + 2] & 0x04);
    sfix_done(&s);
}

static void test_report_opcodes_tpgs_tmfs(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_rsoc", 512, true);
    sfix_login_clear(&s);
    /* all commands */
    SRUN(&s, 0, 0, NULL, 0, 4096, 0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0);
    sfix_expect_good(&s);
    uint32_t n = g32(s.in);
    assert_true(n >= 40 * 8 && n % 8 == 0);
    bool saw_caw = false, saw_rc16 = false;
    for (uint32_t off = 4; off < 4 + n; off += 8) {
        if (s.in[off] == 0x89) saw_caw = g16(s.in + off + 6) == 16;
        if (s.in[off] == 0x9e && g16(s.in + off + 2) == 0x10) saw_rc16 = s.in[off + 5] & 1;
    }
    assert_true(saw_caw && saw_rc16);
    /* with timeouts descriptors */
    SRUN(&s, 0, 0, NULL, 0, 8192, 0xa3, 0x0c, 0x80, 0, 0, 0, 0, 0, 0x20, 0, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in) % 20, 0);
    /* one command: READ(10) with its usage map */
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0c, 0x01, 0x28, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[1] & 7, 3);
    assert_int_equal(g16(s.in + 2), 10);
    assert_int_equal(s.in[4], 0x28);
    assert_int_equal(s.in[5], 0x1e);
    /* one command with a service action */
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0c, 0x02, 0x9e, 0, 0x10, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g16(s.in + 2), 16);
    assert_int_equal(s.in[5], 0x10);
    /* unsupported opcode; wrong reporting option for the opcode */
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0c, 0x01, 0xfe, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[1] & 7, 1);
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0c, 0x01, 0x9e, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0c, 0x02, 0x28, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    /* REPORT TARGET PORT GROUPS: one group, active/optimized, our port */
    s.nx[1].rel_port_id = 7;
    SRUN(&s, 1, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 12);
    assert_int_equal(s.in[4] & 0x0f, 0);
    assert_int_equal(g16(s.in + 6), 1);
    assert_int_equal(s.in[11], 1);
    assert_int_equal(g16(s.in + 14), 7);
    SRUN(&s, 1, 0, NULL, 0, 64, 0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[4], 0x10);
    assert_int_equal(g16(s.in + 18), 7);

    /* REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS */
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0d, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 4);
    assert_true(s.in[0] & 0x80);   /* ABORT TASK */
    assert_true(s.in[0] & 0x08);   /* LU RESET */
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0d, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);

    /* START STOP UNIT, PREVENT ALLOW MEDIUM REMOVAL */
    SRUN(&s, 0, 0, NULL, 0, 0, 0x1b, 0, 0, 0, 0x01, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x1b, 0, 0, 0, 0x50, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x1b, 0x01, 0, 0, 0x02, 0);   /* eject: not removable */
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x1b, 0, 0, 0, 0x00, 0);      /* stop */
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x1e, 0, 0, 0, 0x01, 0);
    sfix_expect_good(&s);
    sfix_done(&s);
}

/*
 * ALUA for an HA pair: this head's group (id 2, port 2) is active/optimized
 * and preferred, the partner's (id 1, port 1) standby; both descriptors in
 * either header format; VPD 0x83 names the configured group and the port the
 * nexus came in on; a short allocation length gets a truncated list whose
 * length field still counts every group; an LU whose pool is being exported
 * is transitioning and refuses media access with a retryable NOT READY.
 */
static void test_alua_groups(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_alua", 512, true);
    scsi_alua_t alua = {.local_group = 2, .local_port = 2, .partner_group = 1, .partner_port = 1};
    scsi_target_set_alua(s.tgt, &alua);
    s.nx[0].rel_port_id = 2;

    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 28);
    assert_int_equal(g32(s.in), 24);
    const uint8_t *local = s.in + 4, *partner = s.in + 16;
    assert_int_equal(local[0], 0x80 | 0x0);      /* PREF, active/optimized */
    assert_int_equal(local[1], 0x85);            /* T_SUP, S_SUP, AO_SUP */
    assert_int_equal(g16(local + 2), 2);
    assert_int_equal(local[7], 1);
    assert_int_equal(g16(local + 10), 2);
    assert_int_equal(partner[0], 0x2);           /* not preferred, standby */
    assert_int_equal(g16(partner + 2), 1);
    assert_int_equal(partner[7], 1);
    assert_int_equal(g16(partner + 10), 1);

    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 28);
    assert_int_equal(s.in[4], 0x10);
    assert_int_equal(g16(s.in + 8 + 2), 2);
    assert_int_equal(s.in[20] & 0x0f, 0x2);
    assert_int_equal(g16(s.in + 20 + 2), 1);

    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 10);
    assert_int_equal(g32(s.in), 24);

    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x83, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(g16(find_designator(s.in, 4) + 6), 2);
    assert_int_equal(g16(find_designator(s.in, 5) + 6), 2);
    assert_int_equal(g64(find_designator(s.in, 3) + 12), SF_ID0);   /* the LU's name is not the head's */

    /* an export drains LU 0: transitioning, media access refused (retryable), reports run */
    scsi_lu_set_transitioning(s.tgt, 0);
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[4], 0x80 | 0xf);   /* still preferred, transitioning */
    assert_true(s.in[5] & 0x80);             /* T_SUP */
    assert_int_equal(s.in[16] & 0x0f, 0x2);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0a);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0a);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 0, 0, 0, 255, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 1, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);   /* LU 1 stays */
    sfix_expect_good(&s);
    SRUN(&s, 0, 1, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    assert_int_equal(s.in[4], 0x80);

    /* without a partner: one group, as a lone head reports it */
    alua = (scsi_alua_t){.local_group = 5, .local_port = 5};
    scsi_target_set_alua(s.tgt, &alua);
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 12);
    assert_int_equal(g16(s.in + 6), 5);
    assert_int_equal(g16(s.in + 14), 5);
    sfix_done(&s);
}

/*
 * ALUA standby (an HA pair's partner path): LU 0's pool leaves this head, so
 * the LU stays by identity only. Every nexus gets ASYMMETRIC ACCESS STATE
 * CHANGED once; then REPORT TARGET PORT GROUPS says this group is standby and
 * the partner's active/optimized and preferred; INQUIRY (with the same serial
 * and NAA), REPORT LUNS and the block limits page answer; TEST UNIT READY,
 * READ, WRITE, PERSISTENT RESERVE IN and MODE SENSE get NOT READY, TARGET PORT
 * IN STANDBY STATE. LU 1 is untouched. When the pool comes back (the same LU
 * id) every nexus is told once again and media access works; an LU of another
 * id cannot take a standby LU's number. A standby LU added from nothing
 * reports itself like one that went standby.
 */
static void test_alua_standby(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_standby", 512, true);
    scsi_alua_t alua = {.local_group = 1, .local_port = 1, .partner_group = 2, .partner_port = 2};
    scsi_target_set_alua(s.tgt, &alua);
    for (int n = 0; n < 3; n++) {   /* every nexus known (INQUIRY takes no unit attention) */
        SRUN(&s, n, 0, NULL, 0, 36, 0x12, 0, 0, 0, 36, 0);
        sfix_expect_good(&s);
    }

    uint8_t serial[16];
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x80, 0, 255, 0);
    sfix_expect_good(&s);
    memcpy(serial, s.in + 4, 16);

    scsi_lu_set_transitioning(s.tgt, 0);
    assert_int_equal(scsi_lu_set_standby(s.tgt, 0), 0);
    assert_true(scsi_lu_is_standby(s.tgt, 0));
    assert_false(scsi_lu_is_standby(s.tgt, 1));
    assert_int_equal(scsi_lu_set_standby(s.tgt, 0), 0);   /* already: nothing happens */
    for (int n = 0; n < 3; n++) {
        SRUN(&s, n, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
        sfix_expect_sense(&s, 0x6, 0x2a, 0x06);            /* once per nexus... */
        SRUN(&s, n, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
        sfix_expect_sense(&s, 0x2, 0x04, 0x0b);            /* ...then standby */
    }
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 24);
    assert_int_equal(s.in[4], 0x2);                        /* local: standby, not preferred */
    assert_int_equal(g16(s.in + 4 + 2), 1);
    assert_int_equal(s.in[16], 0x80 | 0x0);                /* partner: preferred, active/optimized */
    assert_int_equal(g16(s.in + 16 + 2), 2);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x80, 0, 255, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in + 4, serial, 16);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0x83, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(g64(find_designator(s.in, 3) + 12), SF_ID0);
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 1, 0xb0, 0, 255, 0);
    sfix_expect_good(&s);
    assert_int_equal(g16(s.in + 6), SF_VBS / 512);         /* optimal granularity */
    SRUN(&s, 0, 0, NULL, 0, 255, 0x12, 0, 0, 0, 255, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);   /* REPORT LUNS */
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 16);
    SRUN(&s, 0, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0b);
    uint8_t block[512] = {0};
    SRUN(&s, 0, 0, block, 512, 0, 0x2a, 0x08, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0b);
    SRUN(&s, 0, 0, NULL, 0, 64, 0x5e, 0x00, 0, 0, 0, 0, 0, 0, 64, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0b);
    SRUN(&s, 0, 0, NULL, 0, 64, 0x1a, 0, 0x3f, 0, 64, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0b);
    SRUN(&s, 0, 1, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);   /* LU 1 stays active */
    sfix_expect_good(&s);

    /* an LU of another id may not take the number; the same LU comes back active */
    scsi_lu_opts_t other = {.id = SF_ID1 + 1, .thin = true};
    assert_int_equal(scsi_lu_add(s.tgt, 0, s.zv[0], &other, NULL), -EEXIST);
    scsi_lu_opts_t same = {.id = SF_ID0, .thin = true};
    assert_int_equal(scsi_lu_add(s.tgt, 0, s.zv[0], &same, NULL), 0);
    assert_false(scsi_lu_is_standby(s.tgt, 0));
    for (int n = 0; n < 3; n++) {
        SRUN(&s, n, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
        sfix_expect_sense(&s, 0x6, 0x2a, 0x06);
        SRUN(&s, n, 0, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
        sfix_expect_good(&s);
    }
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    assert_int_equal(s.in[4], 0x80 | 0x0);
    assert_int_equal(s.in[16], 0x2);

    /* a standby LU known only by its identity */
    assert_int_equal(scsi_lu_add_standby(s.tgt, 5, &other, 512, SF_VBS), 0);
    assert_int_equal(scsi_lu_add_standby(s.tgt, 5, &other, 512, SF_VBS), -EEXIST);
    assert_int_equal(scsi_lu_add_standby(s.tgt, 6, &other, 0, SF_VBS), -EINVAL);
    assert_true(scsi_lu_is_standby(s.tgt, 5));
    SRUN(&s, 0, 5, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x29, 0x00);   /* a new LU: POWER ON, as any */
    SRUN(&s, 0, 5, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x2, 0x04, 0x0b);
    SRUN(&s, 0, 5, NULL, 0, 64, 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[4], 0x2);
    assert_int_equal(scsi_lu_remove(s.tgt, 5), 0);
    sfix_done(&s);
}

static void xcopy_cscd(uint8_t *d, uint64_t id, uint32_t bs)
{
    memset(d, 0, 32);
    d[0] = 0xe4;
    d[4] = 0x01;
    d[5] = 0x03;
    d[7] = 16;
    uint64_t hi = (uint64_t)6 << 60 | (uint64_t)0x0c3a1e << 36 | 0xca12e0001ull;
    for (int i = 0; i < 8; i++) {
        d[8 + i] = (uint8_t)(hi >> (56 - 8 * i));
        d[16 + i] = (uint8_t)(id >> (56 - 8 * i));
    }
    d[29] = (uint8_t)(bs >> 16);
    d[30] = (uint8_t)(bs >> 8);
    d[31] = (uint8_t)bs;
}

static void xcopy_seg(uint8_t *d, uint16_t src, uint16_t dst, uint16_t nblk, uint64_t slba, uint64_t dlba)
{
    memset(d, 0, 28);
    d[0] = 0x02;
    d[3] = 0x18;
    d[5] = (uint8_t)src;
    d[7] = (uint8_t)dst;
    d[10] = (uint8_t)(nblk >> 8);
    d[11] = (uint8_t)nblk;
    for (int i = 0; i < 8; i++) {
        d[12 + i] = (uint8_t)(slba >> (56 - 8 * i));
        d[20 + i] = (uint8_t)(dlba >> (56 - 8 * i));
    }
}

static uint8_t run_xcopy(sfix_t *s, const uint8_t *list, uint32_t len)
{
    uint8_t cdb[16] = {0x83, 0x00};
    cdb[10] = (uint8_t)(len >> 24);
    cdb[11] = (uint8_t)(len >> 16);
    cdb[12] = (uint8_t)(len >> 8);
    cdb[13] = (uint8_t)len;
    return sfix_run(s, 0, 0, cdb, 16, list, len, 0);
}

static void test_xcopy(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_xcopy", 512, true);
    sfix_login_clear(&s);
    uint8_t *w = malloc(65536);
    zfill(w, 5, 0, 65536);
    SRUN(&s, 0, 0, w, 65536, 0, 0x2a, 0, 0, 0, 0x10, 0, 0, 0, 128, 0);
    sfix_expect_good(&s);

    uint8_t list[16 + 64 + 56] = {0};
    list[0] = 0x2a;   /* list id */
    list[3] = 64;
    list[11] = 56;
    xcopy_cscd(list + 16, SF_ID0, 512);
    xcopy_cscd(list + 48, SF_ID1, 512);
    xcopy_seg(list + 80, 0, 1, 64, 0x1000, 0x2000);
    xcopy_seg(list + 108, 0, 1, 64, 0x1040, 0x2040);
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_good(&s);
    SRUN(&s, 0, 1, NULL, 0, 65536, 0x28, 0, 0, 0, 0x20, 0, 0, 0, 128, 0);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, w, 65536);
    /* copy status of list 0x2a */
    SRUN(&s, 0, 0, NULL, 0, 64, 0x84, 0x00, 0x2a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[4], 0);
    assert_int_equal(g16(s.in + 5), 2);
    assert_int_equal(g32(s.in + 8), 65536);
    SRUN(&s, 0, 0, NULL, 0, 64, 0x84, 0x00, 0x2a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);   /* reported once */
    SRUN(&s, 0, 0, NULL, 0, 64, 0x84, 0x00, 0x2b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_sense(&s, 0x5, 0x24, 0x00);
    /* operating parameters */
    SRUN(&s, 0, 0, NULL, 0, 64, 0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 46);
    assert_int_equal(g32(s.in), 42);
    assert_int_equal(g16(s.in + 8), 8);
    assert_int_equal(s.in[43], 2);
    assert_int_equal(s.in[44], 0x02);
    assert_int_equal(s.in[45], 0xe4);

    /* out of range in the destination: COPY ABORTED */
    xcopy_seg(list + 108, 0, 1, 64, 0x1040, NBLOCKS - 10);
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_sense(&s, 0xa, 0x00, 0x00);
    /* a segment naming a CSCD that is not in the list */
    xcopy_seg(list + 108, 0, 2, 64, 0x1040, 0x2040);
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_sense(&s, 0xa, 0x0d, 0x02);
    /* LU ID TYPE is ignored (SPC-4) */
    list[48 + 1] = 0x40;
    xcopy_seg(list + 80, 0, 1, 8, 0x1000, 0x3000);
    xcopy_seg(list + 108, 0, 1, 8, 0x1008, 0x3008);
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_good(&s);
    SRUN(&s, 0, 1, NULL, 0, 8192, 0x28, 0, 0, 0, 0x30, 0, 0, 0, 16, 0);
    assert_memory_equal(s.in, w, 8192);
    list[48 + 1] = 0;
    xcopy_seg(list + 80, 0, 1, 64, 0x1000, 0x2000);
    /* unknown LU name */
    xcopy_seg(list + 108, 0, 1, 64, 0x1040, 0x2040);
    xcopy_cscd(list + 48, SF_ID1, 512);
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_good(&s);
    xcopy_cscd(list + 48, 0x4242, 512);
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_sense(&s, 0xa, 0x0d, 0x02);
    xcopy_cscd(list + 48, SF_ID1, 512);
    /* unsupported CSCD and segment types */
    list[48] = 0xe5;
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_sense(&s, 0x5, 0x26, 0x07);
    list[48] = 0xe4;
    list[108] = 0x01;
    run_xcopy(&s, list, sizeof(list));
    sfix_expect_sense(&s, 0x5, 0x26, 0x09);
    list[108] = 0x02;
    /* lists that do not add up */
    run_xcopy(&s, list, sizeof(list) - 1);
    sfix_expect_sense(&s, 0x5, 0x1a, 0x00);
    size_t biglen = 16 + 32 * 9;
    uint8_t *big = calloc(1, biglen);
    big[2] = (uint8_t)((32 * 9) >> 8);
    big[3] = (uint8_t)(32 * 9);
    for (int i = 0; i < 9; i++) xcopy_cscd(big + 16 + 32 * i, SF_ID0, 512);
    run_xcopy(&s, big, (uint32_t)biglen);
    sfix_expect_sense(&s, 0x5, 0x26, 0x06);
    free(big);
    /* an empty list does nothing */
    run_xcopy(&s, NULL, 0);
    sfix_expect_good(&s);
    free(w);
    sfix_done(&s);
}

static void test_unit_attentions_and_sense(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_ua", 512, true);
    scsi_nexus_login(s.tgt, &s.nx[0]);
    /* INQUIRY, REPORT LUNS do not report or clear the UA */
    SRUN(&s, 0, 0, NULL, 0, 96, 0x12, 0, 0, 0, 96, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 64, 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0);
    sfix_expect_good(&s);
    /* REQUEST SENSE returns it as data (and clears it) */
    SRUN(&s, 0, 0, NULL, 0, 252, 0x03, 0, 0, 0, 252, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 18);
    assert_int_equal(s.in[0], 0x70);
    assert_int_equal(s.in[2], 0x6);
    assert_int_equal(s.in[12], 0x29);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    SRUN(&s, 0, 0, NULL, 0, 252, 0x03, 1, 0, 0, 252, 0);   /* descriptor format, no sense */
    sfix_expect_good(&s);
    assert_int_equal(s.cmd.data_in_len, 8);
    assert_int_equal(s.in[0], 0x72);
    assert_int_equal(s.in[1], 0);
    /* LU 1 still has its own power-on UA */
    SRUN(&s, 0, 1, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x29, 0x00);

    SRUN(&s, 1, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);   /* B becomes known (no login: no UA) */
    sfix_expect_good(&s);
    /* capacity change: grow the volume, everyone hears about it once */
    char err[128];
    assert_int_equal(zvol_resize(s.zv[0], SF_VOLSIZE * 2, false, err, sizeof(err)), 0);
    scsi_lu_capacity_changed(s.tgt, 0);
    SRUN(&s, 0, 0, NULL, 0, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x09);
    SRUN(&s, 0, 0, NULL, 0, 8, 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(g32(s.in), 2 * NBLOCKS - 1);
    SRUN(&s, 1, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x2a, 0x09);
    /* the new space is usable */
    uint8_t w[512];
    memset(w, 0x61, sizeof(w));
    SRUN(&s, 0, 0, w, 512, 0, 0x2a, 0, 0, 0x03, 0, 0, 0, 0, 1, 0);
    sfix_expect_good(&s);

    /* LU reset: BUS DEVICE RESET for every nexus */
    scsi_reset(s.tgt, 0);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x29, 0x03);
    SRUN(&s, 1, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x29, 0x03);
    SRUN(&s, 1, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    /* REQUEST SENSE of an unconfigured LUN */
    SRUN(&s, 0, 5, NULL, 0, 252, 0x03, 0, 0, 0, 252, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[2], 0x5);
    assert_int_equal(s.in[12], 0x25);
    /* LU inventory changes: REPORTED LUNS DATA HAS CHANGED on the others */
    scsi_lu_opts_t lo = {.id = 3};
    assert_int_equal(scsi_lu_add(s.tgt, 2, s.zv[1], &lo, NULL), 0);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x3f, 0x0e);
    SRUN(&s, 0, 2, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x29, 0x00);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);
    assert_int_equal(scsi_lu_remove(s.tgt, 2), 0);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x3f, 0x0e);
    scsi_nexus_logout(s.tgt, &s.nx[0]);
    scsi_nexus_logout(s.tgt, &s.nx[1]);
    sfix_done(&s);
}

static void test_write_protected(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_ro", 512, true);
    scsi_lu_opts_t ro = {.id = 77, .readonly = true, .thin = true};
    assert_int_equal(scsi_lu_add(s.tgt, 2, s.zv[0], &ro, NULL), 0);
    assert_int_equal(scsi_lu_add(s.tgt, 2, s.zv[0], &ro, NULL), -EEXIST);
    SRUN(&s, 0, 2, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_good(&s);   /* never logged in: no power-on UA */
    uint8_t w[1024] = {0};
    SRUN(&s, 0, 2, w, 512, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x7, 0x27, 0x00);
    SRUN(&s, 0, 2, w, 512, 0, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_sense(&s, 0x7, 0x27, 0x00);
    SRUN(&s, 0, 2, w, 1024, 0, 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0);
    sfix_expect_sense(&s, 0x7, 0x27, 0x00);
    uint8_t p[24] = {0, 22, 0, 16};
    SRUN(&s, 0, 2, p, 24, 0, 0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0);
    sfix_expect_sense(&s, 0x7, 0x27, 0x00);
    SRUN(&s, 0, 2, NULL, 0, 64, 0x1a, 0, 0x3f, 0, 64, 0);
    sfix_expect_good(&s);
    assert_int_equal(s.in[2], 0x90);   /* WP */
    SRUN(&s, 0, 2, NULL, 0, 512, 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0);
    sfix_expect_good(&s);
    assert_int_equal(scsi_lu_remove(s.tgt, 2), 0);
    assert_int_equal(scsi_lu_remove(s.tgt, 2), -ENOENT);
    sfix_done(&s);
}

/* Like SRUN, memory_only: the way the iSCSI reader tries a command. */
static uint8_t run_memory(sfix_t *s, int nexus, const uint8_t *cdb, unsigned cdb_len, const void *out,
                          uint32_t out_len, uint32_t in_cap)
{
    free(s->in);
    s->in = in_cap ? calloc(1, in_cap) : NULL;
    memset(&s->cmd, 0, sizeof(s->cmd));
    s->cmd.nexus = &s->nx[nexus];
    memcpy(s->cmd.cdb, cdb, cdb_len);
    s->cmd.cdb_len = (uint8_t)cdb_len;
    s->cmd.data_out = out;
    s->cmd.data_out_len = out_len;
    s->cmd.data_in = s->in;
    s->cmd.data_in_cap = in_cap;
    s->cmd.memory_only = true;
    s->cmd.would_block = true; /* execute must say */
    scsi_execute(s->tgt, &s->cmd);
    return s->cmd.status;
}

/* memory_only: READs of data in memory and WRITEs that need neither a device
 * nor a wait complete; a READ that needs the disk, a WRITE that would read a
 * record it changes in part from the disk or must be durable (FUA), and every
 * other command come back would_block having changed nothing - not even a
 * pending unit attention, which the same command then reports when it runs
 * for real; a unit attention a READ or WRITE reports is a complete answer. */
static void test_memory_only(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_memonly", 512, true);
    scsi_nexus_login(s.tgt, &s.nx[0]);
    const uint8_t wr[] = {0x2a, 0, 0, 0, 0, 0, 0, 0, 8, 0};  /* WRITE(10) 4 KiB at 0 */
    const uint8_t rd[] = {0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0};  /* READ(10) 4 KiB at 0 */
    const uint8_t tur[] = {0x00, 0, 0, 0, 0, 0};
    uint8_t data[4096], other[4096], rec[8192];
    for (int i = 0; i < 4096; i++) data[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < 4096; i++) other[i] = (uint8_t)(i * 13 + 1);

    run_memory(&s, 0, tur, sizeof tur, NULL, 0, 0);
    assert_true(s.cmd.would_block);
    SRUN(&s, 0, 0, NULL, 0, 0, 0x00, 0, 0, 0, 0, 0);
    sfix_expect_sense(&s, 0x6, 0x29, 0x00);                 /* still pending: POWER ON */
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);
    assert_false(s.cmd.would_block);
    assert_int_equal(s.cmd.status, SCSI_STATUS_GOOD);       /* a hole: no disk needed */
    assert_int_equal(s.cmd.data_in_len, 4096);


    run_memory(&s, 0, wr, sizeof wr, data, sizeof data, 0); /* half a hole record: no disk */
    assert_false(s.cmd.would_block);
    sfix_expect_good(&s);
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);        /* dirty in memory */
    assert_false(s.cmd.would_block);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, data, 4096);
    const uint8_t wr_fua[] = {0x2a, 0x08, 0, 0, 0, 0, 0, 0, 8, 0};
    run_memory(&s, 0, wr_fua, sizeof wr_fua, other, sizeof other, 0);
    assert_true(s.cmd.would_block);                          /* durable: it waits */

    /* On disk and out of the ARC: half the record would be read first. */
    spa_txg_wait_synced(s.f.spa, 0);
    arc_purge_pool(spa_guid(s.f.spa));
    run_memory(&s, 0, wr, sizeof wr, other, sizeof other, 0);
    assert_true(s.cmd.would_block);
    /* ... and nothing changed (the read caches the record) */
    sfix_run(&s, 0, 0, rd, sizeof rd, NULL, 0, 4096);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, data, 4096);
    /* cached now: the same write runs */
    run_memory(&s, 0, wr, sizeof wr, other, sizeof other, 0);
    assert_false(s.cmd.would_block);
    sfix_expect_good(&s);
    sfix_run(&s, 0, 0, rd, sizeof rd, NULL, 0, 4096);
    assert_memory_equal(s.in, other, 4096);
    /* a whole record never needs its old content */
    spa_txg_wait_synced(s.f.spa, 0);
    arc_purge_pool(spa_guid(s.f.spa));
    const uint8_t wr8k[] = {0x2a, 0, 0, 0, 0, 0, 0, 0, 16, 0}; /* 8 KiB at 0: one record */
    for (int i = 0; i < 8192; i++) rec[i] = (uint8_t)(i * 5 + 9);
    run_memory(&s, 0, wr8k, sizeof wr8k, rec, sizeof rec, 0);
    assert_false(s.cmd.would_block);
    sfix_expect_good(&s);
    memcpy(data, rec, 4096);
    sfix_run(&s, 0, 0, rd, sizeof rd, NULL, 0, 4096);
    assert_memory_equal(s.in, data, 4096);

    spa_txg_wait_synced(s.f.spa, 0);
    arc_purge_pool(spa_guid(s.f.spa));
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);
    assert_true(s.cmd.would_block);
    sfix_run(&s, 0, 0, rd, sizeof rd, NULL, 0, 4096);       /* the worker's read caches it */
    sfix_expect_good(&s);
    assert_false(s.cmd.would_block);
    assert_memory_equal(s.in, data, 4096);
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);
    assert_false(s.cmd.would_block);
    sfix_expect_good(&s);
    assert_memory_equal(s.in, data, 4096);

    scsi_reset(s.tgt, 0);
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);
    assert_false(s.cmd.would_block);
    sfix_expect_sense(&s, 0x6, 0x29, 0x03);                 /* reported and cleared here */
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);
    sfix_expect_good(&s);
    scsi_reset(s.tgt, 0);                                   /* a WRITE reports one too ... */
    run_memory(&s, 0, wr, sizeof wr, other, sizeof other, 0);
    assert_false(s.cmd.would_block);
    sfix_expect_sense(&s, 0x6, 0x29, 0x03);
    run_memory(&s, 0, rd, sizeof rd, NULL, 0, 4096);        /* ... and writes nothing */
    sfix_expect_good(&s);
    assert_memory_equal(s.in, data, 4096);
    sfix_done(&s);
}

static void test_cdb_transfer(void **state)
{
    (void)state;
    sfix_t s;
    sfix_make(&s, "scsi_xfer", 4096, true);
    scsi_dir_t dir;
    uint32_t bytes;
    const uint8_t w10[10] = {0x2a, 0, 0, 0, 0, 0, 0, 0, 3, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, w10, 10, &dir, &bytes), 0);
    assert_int_equal(dir, SCSI_DIR_WRITE);
    assert_int_equal(bytes, 3 * 4096);
    const uint8_t r6[6] = {0x08, 0, 0, 0, 0, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, r6, 6, &dir, &bytes), 0);
    assert_int_equal(dir, SCSI_DIR_READ);
    assert_int_equal(bytes, 256 * 4096);
    const uint8_t caw[16] = {0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, caw, 16, &dir, &bytes), 0);
    assert_int_equal(bytes, 4 * 4096);
    const uint8_t ws16ndob[16] = {0x93, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, ws16ndob, 16, &dir, &bytes), 0);
    assert_int_equal(dir, SCSI_DIR_NONE);
    const uint8_t prout[10] = {0x5f, 0, 0, 0, 0, 0, 0, 0, 24, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, prout, 10, &dir, &bytes), 0);
    assert_int_equal(dir, SCSI_DIR_WRITE);
    assert_int_equal(bytes, 24);
    const uint8_t inq[6] = {0x12, 0, 0, 0x01, 0x00, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, inq, 6, &dir, &bytes), 0);
    assert_int_equal(dir, SCSI_DIR_READ);
    assert_int_equal(bytes, 256);
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, w10, 6, &dir, &bytes), -EINVAL);
    const uint8_t r16huge[16] = {0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0};
    assert_int_equal(scsi_cdb_transfer(s.tgt, 0, r16huge, 16, &dir, &bytes), -EINVAL);
    sfix_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inquiry),
        cmocka_unit_test(test_report_luns_and_capacity),
        cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_verify_and_caw),
        cmocka_unit_test(test_unmap_write_same),
        cmocka_unit_test(test_thick_lu),
        cmocka_unit_test(test_mode_pages),
        cmocka_unit_test(test_report_opcodes_tpgs_tmfs),
        cmocka_unit_test(test_alua_groups),
        cmocka_unit_test(test_xcopy),
        cmocka_unit_test(test_unit_attentions_and_sense),
        cmocka_unit_test(test_write_protected),
        cmocka_unit_test(test_cdb_transfer),
        cmocka_unit_test(test_memory_only),
        cmocka_unit_test(test_alua_standby),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
