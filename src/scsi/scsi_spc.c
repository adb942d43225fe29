/*
 * Primary commands (SPC-4): INQUIRY and its VPD pages, REPORT LUNS, REQUEST
 * SENSE, TEST UNIT READY, MODE SENSE/SELECT, REPORT TARGET PORT GROUPS,
 * REPORT SUPPORTED OPERATION CODES / TASK MANAGEMENT FUNCTIONS, and the
 * no-op medium commands (START STOP UNIT, PREVENT ALLOW MEDIUM REMOVAL).
 *
 * Mode pages: caching (0x08), control (0x0A) and informational exceptions
 * (0x1C), shared by all nexuses of an LU. WCE and SWP are changeable; SWP=1
 * (software write protect) refuses writes with WRITE PROTECTED. WCE=1 is the
 * truth by default (a write is acknowledged from the open txg, in memory); an
 * initiator that clears it gets what SBC promises for WCE=0: every write
 * becomes FUA. Nothing is savable: saved values read as the defaults and
 * MODE SELECT with SP=1 is refused. A change raises MODE PARAMETERS CHANGED on
 * the other nexuses.
 *
 * ALUA: implicit (TPGS=01). For an LU this head serves (its pool imported
 * here) this head's target port group (scsi_alua_t; id 1 when none is
 * configured) is active/optimized and preferred, an HA partner's group
 * standby. For a standby LU (its pool is on the partner, scsi_lu_add_standby)
 * it is the other way round: this group standby, the partner's
 * active/optimized and preferred. VPD 0x83 names the nexus's relative port
 * and the local group. While an export drains (scsi_lu_set_transitioning)
 * the local group is transitioning: only the commands SPC-4 5.15.2.6 lets
 * through run, the others get NOT READY, ASYMMETRIC ACCESS STATE TRANSITION,
 * which initiators retry. The standby gate is in scsi.c (scsi_execute).
 */
#include "scsi_impl.h"

#include <errno.h>
#include <stdlib.h>

void spc_test_unit_ready(scsi_ctx_t *c) { scsi_respond(c, NULL, 0, 0); }

void spc_start_stop(scsi_ctx_t *c)
{
    static const bool valid_pc[16] = {[0] = 1, [1] = 1, [2] = 1, [3] = 1, [7] = 1, [0xa] = 1, [0xb] = 1};
    if (!valid_pc[c->cdb[4] >> 4]) {
        bad_cdb(c, 4, 7);
        return;
    }
    /* LOEJ: the medium of a volume cannot be ejected or loaded */
    if ((c->cdb[4] >> 4) == 0 && (c->cdb[4] & 0x02)) {
        bad_cdb(c, 4, 1);
        return;
    }
    scsi_respond(c, NULL, 0, 0);
}

void spc_prevent_allow(scsi_ctx_t *c) { scsi_respond(c, NULL, 0, 0); }

/* ------------------------------------------------------- REQUEST SENSE */

void spc_request_sense(scsi_ctx_t *c)
{
    bool desc = c->cdb[1] & 1;
    uint8_t key = SCSI_SENSE_NO_SENSE, asc = 0, ascq = 0;
    if (!c->lu) {
        key = SCSI_SENSE_ILLEGAL_REQUEST;
        asc = 0x25;
    } else {
        (void)scsi_ua_take(c->tgt, c->nexus->nexus_id, c->lu->lun, &key, &asc, &ascq);
    }
    uint8_t buf[18] = {0};
    uint32_t len;
    if (desc) {
        buf[0] = 0x72;
        buf[1] = key;
        buf[2] = asc;
        buf[3] = ascq;
        len = 8;
    } else {
        buf[0] = 0x70;
        buf[2] = key;
        buf[7] = 10;
        buf[12] = asc;
        buf[13] = ascq;
        len = 18;
    }
    scsi_respond(c, buf, len, c->cdb[4]);
}

/* ------------------------------------------------------------ INQUIRY */

static void pad_ascii(uint8_t *dst, const char *s, size_t n)
{
    memset(dst, ' ', n);
    size_t l = strlen(s);
    memcpy(dst, s, l < n ? l : n);
}

static uint16_t local_group(const scsi_alua_t *a) { return a->local_group ? a->local_group : 1; }

static uint32_t vpd_devid(scsi_ctx_t *c, uint8_t *b)
{
    scsi_lu_t *lu = c->lu;
    uint32_t n = 4;
    /* NAA IEEE registered extended, LU association */
    b[n] = 0x01;
    b[n + 1] = 0x03;
    b[n + 3] = 16;
    memcpy(b + n + 4, lu->naa, 16);
    n += 20;
    /* T10 vendor id: vendor + serial */
    b[n] = 0x02;
    b[n + 1] = 0x01;
    b[n + 3] = 8 + 16;
    pad_ascii(b + n + 4, lu->vendor, 8);
    memcpy(b + n + 12, lu->serial, 16);
    n += 4 + 24;
    /* relative target port, target port association, iSCSI, PIV */
    b[n] = 0x51;
    b[n + 1] = 0x94;
    b[n + 3] = 4;
    put16(b + n + 6, c->nexus->rel_port_id ? c->nexus->rel_port_id : 1);
    n += 8;
    /* target port group */
    b[n] = 0x51;
    b[n + 1] = 0x95;
    b[n + 3] = 4;
    put16(b + n + 6, local_group(&c->tgt->alua));
    n += 8;
    return n;
}

static void inquiry_vpd(scsi_ctx_t *c, uint8_t page, uint32_t alloc)
{
    scsi_lu_t *lu = c->lu;
    uint8_t b[256] = {0};
    uint32_t len;
    uint32_t bs = lu->block_size;
    uint32_t gran = lu->volblocksize / bs;
    if (!gran) gran = 1;
    b[1] = page;
    switch (page) {
    case 0x00: {
        static const uint8_t pages[] = {0x00, 0x80, 0x83, 0x86, 0xb0, 0xb1, 0xb2};
        memcpy(b + 4, pages, sizeof(pages));
        len = 4 + sizeof(pages);
        break;
    }
    case 0x80:
        memcpy(b + 4, lu->serial, 16);
        len = 4 + 16;
        break;
    case 0x83: len = vpd_devid(c, b); break;
    case 0x86:
        len = 64;
        b[5] = 0x01;   /* SIMPSUP */
        b[6] = 0x01;   /* V_SUP: a volatile cache exists */
        break;
    case 0xb0:
        len = 64;
        b[5] = (uint8_t)SBC_MAX_CAW_BLOCKS;
        put16(b + 6, (uint16_t)(gran > 0xffff ? 0xffff : gran));
        put32(b + 8, SBC_MAX_TRANSFER_BYTES / bs);
        uint32_t optimal = SBC_OPTIMAL_TRANSFER_BYTES / bs / gran * gran;
        put32(b + 12, optimal ? optimal : gran);
        if (lu->thin) {
            put32(b + 20, SBC_MAX_UNMAP_BLOCKS);
            put32(b + 24, SBC_MAX_UNMAP_DESCRIPTORS);
            put32(b + 28, gran);
            b[32] = 0x80;   /* UGAVALID, alignment 0 */
        }
        put64(b + 36, SBC_MAX_WRITE_SAME_BLOCKS);
        break;
    case 0xb1:
        len = 64;
        put16(b + 4, 0x0001);   /* non-rotating medium */
        break;
    case 0xb2:
        len = 8;
        if (lu->thin) {
            b[5] = 0x80 | 0x40 | 0x20 | 0x04;   /* LBPU LBPWS LBPWS10 LBPRZ */
            b[6] = 0x02;                        /* thin provisioned */
        } else {
            b[5] = 0x04;                        /* LBPRZ */
        }
        break;
    default:
        bad_cdb(c, 2, -1);
        return;
    }
    put16(b + 2, (uint16_t)(len - 4));
    scsi_respond(c, b, len, alloc);
}

void spc_inquiry(scsi_ctx_t *c)
{
    bool evpd = c->cdb[1] & 1;
    uint8_t page = c->cdb[2];
    uint32_t alloc = be16(c->cdb + 3);
    if (!evpd && page) {
        bad_cdb(c, 2, -1);
        return;
    }
    if (!c->lu) {
        if (evpd) {
            scsi_set_sense(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
            return;
        }
        uint8_t b[36] = {0x7f, 0, 0x06, 0x12, 31};
        scsi_respond(c, b, sizeof(b), alloc);
        return;
    }
    if (evpd) {
        inquiry_vpd(c, page, alloc);
        return;
    }
    uint8_t b[66] = {0};
    b[0] = 0x00;          /* connected, direct access block device */
    b[2] = 0x06;          /* SPC-4 */
    b[3] = 0x12;          /* HISUP, response data format 2 */
    b[4] = sizeof(b) - 5;
    b[5] = 0x10 | 0x08;   /* TPGS=01 implicit ALUA, 3PC (EXTENDED COPY) */
    b[7] = 0x02;          /* CMDQUE */
    pad_ascii(b + 8, c->lu->vendor, 8);
    pad_ascii(b + 16, c->lu->product, 16);
    pad_ascii(b + 32, c->lu->revision, 4);
    static const uint16_t versions[] = {0x00a0 /* SAM-5 */, 0x0960 /* iSCSI */,
                                        0x0460 /* SPC-4 */, 0x04c0 /* SBC-3 */};
    for (size_t i = 0; i < 4; i++) put16(b + 58 + 2 * i, versions[i]);
    scsi_respond(c, b, sizeof(b), alloc);
}

/* -------------------------------------------------------- REPORT LUNS */

void spc_report_luns(scsi_ctx_t *c)
{
    uint8_t select = c->cdb[2];
    uint32_t alloc = be32(c->cdb + 6);
    if (alloc < 16) {
        bad_cdb(c, 6, -1);
        return;
    }
    bool all;
    switch (select) {
    case 0x00: case 0x02: case 0x11: all = true; break;
    case 0x01: case 0x10: case 0x12: all = false; break;
    default: bad_cdb(c, 2, -1); return;
    }
    scsi_target_t *tgt = c->tgt;
    pthread_mutex_lock(&tgt->lock);
    size_t n = all ? tgt->nlus : 0;
    uint8_t *b = calloc(1, 8 + 8 * n);
    if (!b) {
        pthread_mutex_unlock(&tgt->lock);
        scsi_zvol_error(c, -ENOMEM, false);
        return;
    }
    size_t k = 0;
    for (size_t l = 0; all && l < SCSI_MAX_LUNS && k < n; l++) {
        if (!tgt->lus[l]) continue;
        uint8_t *e = b + 8 + 8 * k++;
        if (l < 256) e[1] = (uint8_t)l;
        else put16(e, (uint16_t)(0x4000 | l));
    }
    pthread_mutex_unlock(&tgt->lock);
    put32(b, (uint32_t)(8 * k));
    scsi_respond(c, b, (uint32_t)(8 + 8 * k), alloc);
    free(b);
}

/* ------------------------------------------------------------- modes */

enum { MP_CACHING, MP_CONTROL, MP_IE };
static const uint8_t mode_codes[MODE_PAGES] = {0x08, 0x0a, 0x1c};
static const uint8_t mode_lens[MODE_PAGES] = {20, 12, 12};
static const uint8_t mode_changeable[MODE_PAGES][20] = {
    [MP_CACHING] = {0x08, 0x12, 0x04},
    [MP_CONTROL] = {0x0a, 0x0a, 0, 0, 0x08},   /* SWP */
    [MP_IE] = {0x1c, 0x0a},
};

static void mode_defaults(scsi_lu_t *lu, uint8_t page[MODE_PAGES][20])
{
    memset(page, 0, MODE_PAGES * 20);
    page[MP_CACHING][0] = 0x08;
    page[MP_CACHING][1] = 0x12;
    page[MP_CACHING][2] = 0x04;   /* WCE */
    page[MP_CONTROL][0] = 0x0a;
    page[MP_CONTROL][1] = 0x0a;
    page[MP_CONTROL][3] = 0x10;   /* unrestricted reordering, QERR 0 */
    page[MP_CONTROL][4] = lu->readonly ? 0x08 : 0;   /* SWP */
    put16(&page[MP_CONTROL][8], 0xffff);   /* busy timeout: unlimited */
    page[MP_IE][0] = 0x1c;
    page[MP_IE][1] = 0x0a;
    page[MP_IE][2] = 0x08;        /* DEXCPT: no informational exceptions */
}

static void mode_bits_publish(scsi_lu_t *lu);

void spc_mode_init(scsi_lu_t *lu)
{
    mode_defaults(lu, lu->page);
    mode_bits_publish(lu);
}

static void mode_bits_publish(scsi_lu_t *lu)
{
    __atomic_store_n(&lu->wce, (lu->page[MP_CACHING][2] & 0x04) != 0, __ATOMIC_RELEASE);
    __atomic_store_n(&lu->swp, (lu->page[MP_CONTROL][4] & 0x08) != 0, __ATOMIC_RELEASE);
}

bool spc_swp(scsi_lu_t *lu) { return __atomic_load_n(&lu->swp, __ATOMIC_ACQUIRE); }
bool spc_wce(scsi_lu_t *lu) { return __atomic_load_n(&lu->wce, __ATOMIC_ACQUIRE); }

void spc_mode_sense(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    const uint8_t *cdb = c->cdb;
    bool ten = cdb[0] == 0x5a;
    bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
    unsigned pc = cdb[2] >> 6, code = cdb[2] & 0x3f, sub = cdb[3];
    uint32_t alloc = ten ? be16(cdb + 7) : cdb[4];
    int want = -1;   /* -1: all */
    if (code != 0x3f) {
        for (int i = 0; i < MODE_PAGES; i++)
            if (mode_codes[i] == code) want = i;
        if (want < 0) {
            bad_cdb(c, 2, 5);
            return;
        }
    }
    if (sub != 0 && sub != 0xff) {
        bad_cdb(c, 3, -1);
        return;
    }
    uint8_t pages[MODE_PAGES][20];
    if (pc == 1) memcpy(pages, mode_changeable, sizeof(pages));
    else if (pc == 0) {
        pthread_mutex_lock(&lu->lock);
        memcpy(pages, lu->page, sizeof(pages));
        pthread_mutex_unlock(&lu->lock);
    } else {
        mode_defaults(lu, pages);   /* default; saved values are the defaults */
    }

    uint8_t b[128] = {0};
    uint32_t hdr = ten ? 8 : 4, n = hdr;
    uint32_t bs = zvol_block_size(lu->zv);
    uint64_t blocks = zvol_size(lu->zv) / bs;
    if (!dbd) {
        if (llbaa) {
            put64(b + n, blocks);
            put32(b + n + 12, bs);
            n += 16;
        } else {
            put32(b + n, blocks > 0xffffffffu ? 0xffffffffu : (uint32_t)blocks);
            put24(b + n + 5, bs);
            n += 8;
        }
    }
    uint32_t bdlen = n - hdr;
    for (int i = 0; i < MODE_PAGES; i++) {
        if (want >= 0 && i != want) continue;
        memcpy(b + n, pages[i], mode_lens[i]);
        n += mode_lens[i];
    }
    bool wp = lu->readonly || (pages[MP_CONTROL][4] & 0x08 && pc != 1);
    uint8_t dev = (uint8_t)((wp ? 0x80 : 0) | 0x10);   /* WP, DPOFUA */
    if (ten) {
        put16(b, (uint16_t)(n - 2));
        b[3] = dev;
        b[4] = llbaa && !dbd ? 1 : 0;
        put16(b + 6, (uint16_t)bdlen);
    } else {
        b[0] = (uint8_t)(n - 1);
        b[2] = dev;
        b[3] = (uint8_t)bdlen;
    }
    scsi_respond(c, b, n, alloc);
}

void spc_mode_select(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    const uint8_t *cdb = c->cdb;
    bool ten = cdb[0] == 0x55;
    uint32_t declared = ten ? be16(cdb + 7) : cdb[4];
    if (cdb[1] & 0x01) {   /* SP: nothing is savable */
        bad_cdb(c, 1, 0);
        return;
    }
    if (declared == 0) {
        scsi_respond(c, NULL, 0, 0);
        return;
    }
    if (!(cdb[1] & 0x10)) {   /* PF=0: vendor-specific format */
        bad_cdb(c, 1, 4);
        return;
    }
    uint32_t len = param_len(c, declared);
    const uint8_t *p = c->cmd->data_out;
    uint32_t hdr = ten ? 8 : 4;
    if (len < hdr || len < declared) {
        param_len_error(c);
        return;
    }
    uint32_t bdlen = ten ? be16(p + 6) : p[3];
    bool longlba = ten && (p[4] & 1);
    if (hdr + bdlen > len) {
        param_len_error(c);
        return;
    }
    uint32_t bs = zvol_block_size(lu->zv);
    uint64_t blocks = zvol_size(lu->zv) / bs;
    if (bdlen) {
        const uint8_t *bd = p + hdr;
        if (bdlen != (longlba ? 16u : 8u)) {
            bad_param(c, ten ? 6 : 3, -1);
            return;
        }
        uint64_t nb = longlba ? be64(bd) : be32(bd);
        uint32_t bl = longlba ? be32(bd + 12) : be24(bd + 5);
        uint64_t cur = longlba ? blocks : (blocks > 0xffffffffu ? 0xffffffffu : blocks);
        if (nb != 0 && nb != cur) {
            bad_param(c, (int)hdr, -1);
            return;
        }
        if (bl != bs) {
            bad_param(c, (int)hdr + (longlba ? 12 : 5), -1);
            return;
        }
    }
    pthread_mutex_lock(&lu->lock);
    uint8_t next[MODE_PAGES][20];
    memcpy(next, lu->page, sizeof(next));
    uint32_t off = hdr + bdlen;
    while (off < len) {
        if (len - off < 2) goto len_error;
        const uint8_t *pg = p + off;
        if (pg[0] & 0x40) {   /* SPF: no subpages here */
            pthread_mutex_unlock(&lu->lock);
            bad_param(c, (int)off, 6);
            return;
        }
        int idx = -1;
        for (int i = 0; i < MODE_PAGES; i++)
            if (mode_codes[i] == (pg[0] & 0x3f)) idx = i;
        if (idx < 0) {
            pthread_mutex_unlock(&lu->lock);
            bad_param(c, (int)off, 5);
            return;
        }
        if (pg[1] != mode_lens[idx] - 2) {
            pthread_mutex_unlock(&lu->lock);
            bad_param(c, (int)off + 1, -1);
            return;
        }
        if (len - off < mode_lens[idx]) goto len_error;
        for (unsigned i = 2; i < mode_lens[idx]; i++) {
            uint8_t diff = (pg[i] ^ lu->page[idx][i]) & (uint8_t)~mode_changeable[idx][i];
            if (diff) {
                pthread_mutex_unlock(&lu->lock);
                int bit = 7;
                while (!(diff & (1u << bit))) bit--;
                bad_param(c, (int)(off + i), bit);
                return;
            }
            next[idx][i] = pg[i];
        }
        off += mode_lens[idx];
    }
    bool changed = memcmp(next, lu->page, sizeof(next)) != 0;
    memcpy(lu->page, next, sizeof(next));
    mode_bits_publish(lu);
    pthread_mutex_unlock(&lu->lock);
    if (changed) scsi_ua_raise_all(c->tgt, lu->lun, UA_MODE_CHANGED, c->nexus->nexus_id);
    scsi_respond(c, NULL, 0, 0);
    return;
len_error:
    pthread_mutex_unlock(&lu->lock);
    param_len_error(c);
}

/* ------------------------------------------ REPORT TARGET PORT GROUPS */

/* One target port group descriptor with a single port (SPC-4 6.37); 12 bytes. */
static void put_tpg_desc(uint8_t *d, uint8_t state, bool preferred, uint16_t group,
                         uint16_t port)
{
    memset(d, 0, 12);
    d[0] = (uint8_t)((preferred ? 0x80 : 0) | state);
    d[1] = 0x80 | 0x04 | 0x01;   /* supported: T_SUP, S_SUP, AO_SUP (the states we report) */
    put16(d + 2, group);
    d[7] = 1;             /* target port count */
    put16(d + 10, port);
}

uint32_t spc_rtpg_encode(const scsi_alua_t *alua, uint8_t local_state, uint16_t rel_port,
                         bool extended, uint8_t *buf, uint32_t cap)
{
    uint8_t b[8 + 2 * 12] = {0};
    uint32_t n = extended ? 8 : 4;
    if (extended) {
        b[4] = 0x10;   /* format type: extended header */
        b[5] = 0;      /* implicit transition time: not specified */
    }
    /* The preferred path is the head that serves the LU now. */
    bool local_serves = local_state != ALUA_STANDBY;
    uint16_t port = alua->local_port ? alua->local_port : rel_port;
    put_tpg_desc(b + n, local_state, local_serves, local_group(alua), port ? port : 1);
    n += 12;
    if (alua->partner_group) {
        put_tpg_desc(b + n, local_serves ? ALUA_STANDBY : ALUA_ACTIVE_OPTIMIZED, !local_serves,
                     alua->partner_group, alua->partner_port);
        n += 12;
    }
    put32(b, n - 4);
    memcpy(buf, b, n < cap ? n : cap);
    return n;
}

void spc_report_tpgs(scsi_ctx_t *c)
{
    unsigned fmt = c->cdb[1] >> 5;
    uint32_t alloc = be32(c->cdb + 6);
    if (fmt > 1) {
        bad_cdb(c, 1, 7);
        return;
    }
    uint8_t b[8 + 2 * 12];
    uint32_t n = spc_rtpg_encode(&c->tgt->alua, scsi_lu_alua_state(c->lu),
                                 c->nexus->rel_port_id, fmt == 1, b, sizeof b);
    scsi_respond(c, b, n, alloc);
}

/* ---------------------------- REPORT SUPPORTED OPERATION CODES / TMFs */

static uint32_t put_timeouts(uint8_t *d)
{
    put16(d, 0x0a);
    put32(d + 4, 0);    /* nominal: not specified */
    put32(d + 8, 30);   /* recommended, seconds */
    return 12;
}

void spc_report_opcodes(scsi_ctx_t *c)
{
    const uint8_t *cdb = c->cdb;
    bool rctd = cdb[2] & 0x80;
    unsigned opt = cdb[2] & 7;
    uint8_t opcode = cdb[3];
    uint16_t sa = be16(cdb + 4);
    uint32_t alloc = be32(cdb + 6);
    if (opt == 0) {
        uint32_t each = 8 + (rctd ? 12 : 0);
        uint8_t *b = calloc(1, 4 + each * scsi_nops);
        if (!b) {
            scsi_zvol_error(c, -ENOMEM, false);
            return;
        }
        uint32_t n = 4;
        for (size_t i = 0; i < scsi_nops; i++) {
            const scsi_op_t *op = &scsi_ops[i];
            uint8_t *d = b + n;
            d[0] = op->opcode;
            if (op->sa >= 0) {
                put16(d + 2, (uint16_t)op->sa);
                d[5] |= 0x01;
            }
            put16(d + 6, op->cdb_len);
            if (rctd) {
                d[5] |= 0x02;
                put_timeouts(d + 8);
            }
            n += each;
        }
        put32(b, n - 4);
        scsi_respond(c, b, n, alloc);
        free(b);
        return;
    }
    if (opt > 3) {
        bad_cdb(c, 2, 2);
        return;
    }
    bool has_sa = false, known = false;
    for (size_t i = 0; i < scsi_nops; i++)
        if (scsi_ops[i].opcode == opcode) {
            known = true;
            has_sa = scsi_ops[i].sa >= 0;
        }
    if (known && opt == 1 && has_sa) {
        bad_cdb(c, 2, 2);
        return;
    }
    if (known && opt == 2 && !has_sa) {
        bad_cdb(c, 2, 2);
        return;
    }
    const scsi_op_t *op = NULL;
    for (size_t i = 0; i < scsi_nops; i++)
        if (scsi_ops[i].opcode == opcode && (scsi_ops[i].sa < 0 || scsi_ops[i].sa == sa)) op = &scsi_ops[i];
    uint8_t b[4 + 16 + 12] = {0};
    uint32_t n = 4;
    if (!op) {
        b[1] = 0x01;   /* not supported */
    } else {
        b[1] = 0x03;   /* supported, standard */
        put16(b + 2, op->cdb_len);
        memcpy(b + 4, op->usage, op->cdb_len);
        n += op->cdb_len;
        if (rctd) {
            b[1] |= 0x80;
            n += put_timeouts(b + n);
        }
    }
    scsi_respond(c, b, n, alloc);
}

void spc_report_tmfs(scsi_ctx_t *c)
{
    bool repd = c->cdb[2] & 0x80;
    uint32_t alloc = be32(c->cdb + 6);
    if (alloc < 4) {
        bad_cdb(c, 6, -1);
        return;
    }
    uint8_t b[16] = {0};
    /* ABORT TASK, ABORT TASK SET, CLEAR TASK SET, LU RESET, TARGET RESET */
    b[0] = 0x80 | 0x40 | 0x10 | 0x08 | 0x02;
    uint32_t n = 4;
    if (repd) {
        b[3] = 0x0c;
        n = 16;
    }
    scsi_respond(c, b, n, alloc);
}
