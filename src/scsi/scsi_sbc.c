/*
 * Block commands (SBC-3) over a volume, and EXTENDED COPY (SPC-4, LID1).
 *
 * Every command checks, in order: write protection (for writers), the LBA
 * range (LBA OUT OF RANGE, including a zero-length transfer that starts past
 * the end), the limits of VPD page 0xB0 (INVALID FIELD IN CDB), then the data
 * the initiator sent. Transfer length 0 means "nothing" except for READ(6)/
 * WRITE(6) (256 blocks), WRITE SAME (to the end of the medium: WSNZ=0) and
 * SYNCHRONIZE CACHE (to the end). DPO is ignored; FUA, and every write while
 * the caching page's WCE is 0, is ZVOL_WRITE_FUA. WRITE AND VERIFY writes
 * with FUA: once on stable storage the verification has nothing left to find.
 *
 * EXTENDED COPY runs synchronously, so RECEIVE COPY RESULTS (COPY STATUS)
 * always finds the copy finished; its result is kept per (initiator, list id)
 * among the last COPY_RESULTS_KEPT copies and reported once.
 *
 * Data-Out: the transport delivers the bytes scsi_cdb_transfer() asked for;
 * a block write with fewer is refused (INVALID FIELD IN CDB), a parameter
 * list is read as far as it goes.
 */
#include "scsi_impl.h"

#include <errno.h>
#include <stdlib.h>

static uint32_t lu_bs(scsi_lu_t *lu) { return zvol_block_size(lu->zv); }
static uint64_t lu_blocks(scsi_lu_t *lu) { return zvol_size(lu->zv) / lu_bs(lu); }

static bool range_ok(scsi_lu_t *lu, uint64_t lba, uint64_t n)
{
    uint64_t nb = lu_blocks(lu);
    return lba <= nb && n <= nb - lba;
}

/* LBA, block count and the CDB byte of the transfer length, by CDB size. */
static void rw_fields(const uint8_t *cdb, uint64_t *lba, uint64_t *n, int *len_byte)
{
    switch (cdb[0] >> 5) {
    case 0:   /* 6-byte */
        *lba = be24(cdb + 1) & 0x1fffff;
        *n = cdb[4] ? cdb[4] : 256;
        *len_byte = 4;
        break;
    case 1:   /* 10-byte */
        *lba = be32(cdb + 2);
        *n = be16(cdb + 7);
        *len_byte = 7;
        break;
    case 5:   /* 12-byte */
        *lba = be32(cdb + 2);
        *n = be32(cdb + 6);
        *len_byte = 6;
        break;
    default:  /* 16-byte */
        *lba = be64(cdb + 2);
        *n = be32(cdb + 10);
        *len_byte = 10;
        break;
    }
}

static int write_flags(scsi_lu_t *lu, bool fua) { return (fua || !spc_wce(lu)) ? ZVOL_WRITE_FUA : 0; }

static bool write_protected(scsi_ctx_t *c)
{
    if (c->lu->readonly || zvol_is_readonly(c->lu->zv)) {
        scsi_set_sense(c->cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x00);
        return true;
    }
    if (spc_swp(c->lu)) {   /* SOFTWARE WRITE PROTECTED */
        scsi_set_sense(c->cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x02);
        return true;
    }
    return false;
}

static bool data_out_ok(scsi_ctx_t *c, uint64_t need, int len_byte)
{
    if (need == 0 || (c->cmd->data_out && c->cmd->data_out_len >= need)) return true;
    bad_cdb(c, len_byte, -1);
    return false;
}

void sbc_read(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    uint64_t lba, n;
    int lb;
    rw_fields(c->cdb, &lba, &n, &lb);
    if (!range_ok(lu, lba, n)) {
        lba_out_of_range(c);
        return;
    }
    uint32_t bs = lu_bs(lu);
    if (n * bs > SBC_MAX_TRANSFER_BYTES) {
        bad_cdb(c, lb, -1);
        return;
    }
    uint32_t bytes = (uint32_t)(n * bs);
    if (!bytes) {
        scsi_respond(c, NULL, 0, 0);
        return;
    }
    uint8_t *dst = c->cmd->data_in;
    bool direct = dst && c->cmd->data_in_cap >= bytes;
    if (!direct && !(dst = malloc(bytes))) {
        scsi_zvol_error(c, -ENOMEM, false);
        return;
    }
    int e = c->cmd->memory_only ? zvol_read_memory(lu->zv, lba * bs, bytes, dst)
                                : zvol_read(lu->zv, lba * bs, bytes, dst);
    if (e == -EWOULDBLOCK) c->cmd->would_block = true;
    else if (e) scsi_zvol_error(c, e, false);
    else if (direct) {
        c->cmd->status = SCSI_STATUS_GOOD;
        c->cmd->data_in_len = bytes;
    } else {
        scsi_respond(c, dst, bytes, bytes);
    }
    if (!direct) free(dst);
}

/* The checks every command that writes its Data-Out to [lba, lba+n) makes, in
 * SBC's order: write protection, the range, the transfer size, the Data-Out
 * itself. False when one failed and the sense is set. */
static bool write_checks(scsi_ctx_t *c, uint64_t *off, uint32_t *bytes)
{
    scsi_lu_t *lu = c->lu;
    uint64_t lba, n;
    int lb;
    rw_fields(c->cdb, &lba, &n, &lb);
    if (write_protected(c)) return false;
    if (!range_ok(lu, lba, n)) {
        lba_out_of_range(c);
        return false;
    }
    uint32_t bs = lu_bs(lu);
    if (n * bs > SBC_MAX_TRANSFER_BYTES) {
        bad_cdb(c, lb, -1);
        return false;
    }
    *off = lba * bs;
    *bytes = (uint32_t)(n * bs);
    return data_out_ok(c, *bytes, lb);
}

void sbc_write(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    uint64_t off;
    uint32_t bytes;
    if (!write_checks(c, &off, &bytes)) return;
    if (bytes) {
        uint8_t op = c->cdb[0];
        bool verify = op == 0x2e || op == 0xae || op == 0x8e;
        bool fua = verify || (op != 0x0a && (c->cdb[1] & 0x08));
        int flags = write_flags(lu, fua) | (c->cmd->memory_only ? ZVOL_WRITE_NOWAIT : 0);
        int e = zvol_write(lu->zv, off, bytes, c->cmd->data_out, flags);
        if (e == -EWOULDBLOCK && c->cmd->memory_only) {
            c->cmd->would_block = true; /* nothing changed: the workers run it */
            return;
        }
        if (e) {
            scsi_zvol_error(c, e, true);
            return;
        }
    }
    scsi_respond(c, NULL, 0, 0);
}

/* MISCOMPARE with the Data-Out offset of the first differing byte. */
static void miscompare(scsi_ctx_t *c, uint64_t off)
{
    scsi_set_sense(c->cmd, SCSI_SENSE_MISCOMPARE, 0x1d, 0x00);
    scsi_sense_info(c->cmd, (uint32_t)off);
}

void sbc_verify(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    uint64_t lba, n;
    int lb;
    rw_fields(c->cdb, &lba, &n, &lb);
    unsigned bytchk = (c->cdb[1] >> 1) & 3;
    if (bytchk == 2) {
        bad_cdb(c, 1, 2);
        return;
    }
    if (!range_ok(lu, lba, n)) {
        lba_out_of_range(c);
        return;
    }
    uint32_t bs = lu_bs(lu);
    if (n * bs > SBC_MAX_TRANSFER_BYTES) {   /* also bounds the work of BYTCHK=0 */
        bad_cdb(c, lb, -1);
        return;
    }
    if (n && !data_out_ok(c, bytchk == 1 ? n * bs : bytchk == 3 ? bs : 0, lb)) return;
    const uint32_t chunk = 1024 * 1024;
    uint8_t *buf = n ? malloc(chunk) : NULL;
    if (n && !buf) {
        scsi_zvol_error(c, -ENOMEM, false);
        return;
    }
    uint64_t total = n * bs;
    for (uint64_t done = 0; done < total;) {
        uint32_t len = total - done < chunk ? (uint32_t)(total - done) : chunk;
        int e = zvol_read(lu->zv, lba * bs + done, len, buf);
        if (e) {
            free(buf);
            scsi_zvol_error(c, e, false);
            return;
        }
        for (uint32_t i = 0; bytchk && i < len; i++) {
            uint8_t want = bytchk == 1 ? c->cmd->data_out[done + i] : c->cmd->data_out[(done + i) % bs];
            if (buf[i] != want) {
                free(buf);
                miscompare(c, bytchk == 1 ? done + i : (done + i) % bs);
                return;
            }
        }
        done += len;
    }
    free(buf);
    scsi_respond(c, NULL, 0, 0);
}

void sbc_sync_cache(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    bool sixteen = c->cdb[0] == 0x91;
    uint64_t lba = sixteen ? be64(c->cdb + 2) : be32(c->cdb + 2);
    uint64_t n = sixteen ? be32(c->cdb + 10) : be16(c->cdb + 7);
    if (!range_ok(lu, lba, n)) {
        lba_out_of_range(c);
        return;
    }
    int e = zvol_flush(lu->zv);
    if (e) scsi_zvol_error(c, e, true);
    else scsi_respond(c, NULL, 0, 0);
}

/* PRE-FETCH: nothing to warm that a read would not find anyway; GOOD (not
 * CONDITION MET) is what SBC-3 asks when no blocks were made to stay cached. */
void sbc_prefetch(scsi_ctx_t *c)
{
    bool sixteen = c->cdb[0] == 0x90;
    uint64_t lba = sixteen ? be64(c->cdb + 2) : be32(c->cdb + 2);
    uint64_t n = sixteen ? be32(c->cdb + 10) : be16(c->cdb + 7);
    if (!range_ok(c->lu, lba, n)) {
        lba_out_of_range(c);
        return;
    }
    scsi_respond(c, NULL, 0, 0);
}

void sbc_read_capacity10(scsi_ctx_t *c)
{
    if (!(c->cdb[8] & 1) && be32(c->cdb + 2)) {
        bad_cdb(c, 2, -1);
        return;
    }
    uint64_t last = lu_blocks(c->lu) - 1;
    uint8_t b[8];
    put32(b, last > 0xffffffffu ? 0xffffffffu : (uint32_t)last);
    put32(b + 4, lu_bs(c->lu));
    scsi_respond(c, b, 8, 8);
}

void sbc_read_capacity16(scsi_ctx_t *c)
{
    if (!(c->cdb[14] & 1) && be64(c->cdb + 2)) {
        bad_cdb(c, 2, -1);
        return;
    }
    scsi_lu_t *lu = c->lu;
    uint8_t b[32] = {0};
    uint32_t bs = lu_bs(lu);
    put64(b, lu_blocks(lu) - 1);
    put32(b + 8, bs);
    /* LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT stays 0: every logical block
     * is mapped, unmapped and reported by GET LBA STATUS on its own, and the
     * record size reaches initiators as the optimal transfer and unmap
     * granularities of VPD page 0xB0. A record-sized physical block (512 B
     * logical on 8 KiB) is a format ESXi does not know (only 512n, 512e and
     * 4Kn), and initiators that take it literally expect provisioning per
     * physical block. */
    b[14] = (uint8_t)((lu->thin ? 0x80 : 0) | 0x40);   /* LBPME, LBPRZ */
    scsi_respond(c, b, sizeof(b), be32(c->cdb + 10));
}

void sbc_get_lba_status(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    uint64_t lba = be64(c->cdb + 2);
    uint32_t alloc = be32(c->cdb + 10);
    uint64_t nb = lu_blocks(lu);
    if (lba >= nb) {
        lba_out_of_range(c);
        return;
    }
    uint32_t bs = lu_bs(lu);
    uint32_t want = alloc > 8 ? (alloc - 8) / 16 : 0;
    if (want < 1) want = 1;
    if (want > 128) want = 128;
    uint8_t *b = calloc(1, 8 + 16 * (size_t)want);
    if (!b) {
        scsi_zvol_error(c, -ENOMEM, false);
        return;
    }
    uint32_t k = 0;
    uint64_t off = lba * bs, end = nb * bs;
    while (k < want && off < end) {
        zvol_lba_status_t st;
        int e = zvol_get_lba_status(lu->zv, off, &st);
        if (e) {
            free(b);
            scsi_zvol_error(c, e, false);
            return;
        }
        /* the first descriptor must start at the LBA asked for, whatever
         * extent the volume reports around it */
        uint64_t ext_end = st.off + st.len;
        if (st.len == 0 || ext_end <= off) break;
        uint8_t *d = b + 8 + 16 * k++;
        put64(d, off / bs);
        put32(d + 8, (uint32_t)((ext_end - off) / bs));
        d[12] = st.mapped ? 0 : 1;
        off = ext_end;
    }
    put32(b, 4 + 16 * k);
    scsi_respond(c, b, 8 + 16 * k, alloc);
    free(b);
}

void sbc_unmap(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    if (!lu->thin) {
        scsi_set_sense(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
        return;
    }
    if (write_protected(c)) return;
    uint32_t declared = be16(c->cdb + 7);
    if (declared == 0) {
        scsi_respond(c, NULL, 0, 0);
        return;
    }
    uint32_t len = param_len(c, declared);
    if (len < 8) {
        param_len_error(c);
        return;
    }
    const uint8_t *p = c->cmd->data_out;
    uint32_t bdlen = be16(p + 2);
    if (bdlen > len - 8) bdlen = (len - 8) & ~15u;
    uint32_t nd = bdlen / 16;   /* a trailing partial descriptor is ignored */
    if (nd > SBC_MAX_UNMAP_DESCRIPTORS) {
        bad_param(c, 2, -1);
        return;
    }
    uint32_t bs = lu_bs(lu);
    for (uint32_t i = 0; i < nd; i++) {
        const uint8_t *d = p + 8 + 16 * i;
        uint64_t lba = be64(d), n = be32(d + 8);
        if (!range_ok(lu, lba, n)) {
            lba_out_of_range(c);
            return;
        }
        if (n > SBC_MAX_UNMAP_BLOCKS) {
            bad_param(c, (int)(8 + 16 * i + 8), -1);
            return;
        }
    }
    int flags = write_flags(lu, false);
    for (uint32_t i = 0; i < nd; i++) {
        const uint8_t *d = p + 8 + 16 * i;
        uint64_t lba = be64(d), n = be32(d + 8);
        if (!n) continue;
        int e = zvol_unmap(lu->zv, lba * bs, n * bs, flags);
        if (e) {
            scsi_zvol_error(c, e, true);
            return;
        }
    }
    scsi_respond(c, NULL, 0, 0);
}

void sbc_write_same(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    bool sixteen = c->cdb[0] == 0x93;
    uint64_t lba = sixteen ? be64(c->cdb + 2) : be32(c->cdb + 2);
    uint64_t n = sixteen ? be32(c->cdb + 10) : be16(c->cdb + 7);
    int lb = sixteen ? 10 : 7;
    bool unmap = c->cdb[1] & 0x08, ndob = sixteen && (c->cdb[1] & 0x01);
    if (write_protected(c)) return;
    uint64_t nb = lu_blocks(lu);
    if (lba > nb) {
        lba_out_of_range(c);
        return;
    }
    if (n == 0) n = nb - lba;   /* WSNZ=0: to the end of the medium */
    if (!range_ok(lu, lba, n)) {
        lba_out_of_range(c);
        return;
    }
    uint32_t bs = lu_bs(lu);
    if (n > SBC_MAX_WRITE_SAME_BLOCKS) {
        bad_cdb(c, lb, -1);
        return;
    }
    /* An UNMAP request sent without any block (some initiators do) unmaps;
     * otherwise exactly one block must come (libiscsi checks both ways). */
    uint32_t got = c->cmd->data_out ? c->cmd->data_out_len : 0;
    if (!ndob && unmap && lu->thin && got == 0) ndob = true;
    if (!ndob && got != bs) {
        bad_cdb(c, lb, -1);
        return;
    }
    /* UNMAP=1 on a thin LU deallocates whatever the block holds: reads then
     * return zeros (LBPRZ), which is what initiators check for */
    if (unmap && lu->thin) ndob = true;
    if (n == 0) {
        scsi_respond(c, NULL, 0, 0);
        return;
    }
    uint8_t *zero = NULL;
    const void *block = c->cmd->data_out;
    if (ndob) {
        if (!(zero = calloc(1, bs))) {
            scsi_zvol_error(c, -ENOMEM, false);
            return;
        }
        block = zero;
    }
    int flags = write_flags(lu, false) | (unmap && lu->thin ? ZVOL_WRITE_UNMAP : 0);
    int e = zvol_write_same(lu->zv, lba * bs, n, block, flags);
    free(zero);
    if (e) scsi_zvol_error(c, e, true);
    else scsi_respond(c, NULL, 0, 0);
}

void sbc_compare_and_write(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    uint64_t lba = be64(c->cdb + 2), n = c->cdb[13];
    if (write_protected(c)) return;
    if (!range_ok(lu, lba, n)) {
        lba_out_of_range(c);
        return;
    }
    if (n > SBC_MAX_CAW_BLOCKS) {
        bad_cdb(c, 13, -1);
        return;
    }
    uint32_t bs = lu_bs(lu);
    uint64_t len = n * bs;
    /* the Data-Out must be exactly the compare and the write data */
    if ((c->cmd->data_out ? c->cmd->data_out_len : 0) != 2 * len) {
        bad_cdb(c, 13, -1);
        return;
    }
    if (n == 0) {
        scsi_respond(c, NULL, 0, 0);
        return;
    }
    uint64_t mis = 0;
    const uint8_t *d = c->cmd->data_out;
    int e = zvol_compare_and_write(lu->zv, lba * bs, len, d, d + len,
                                   write_flags(lu, c->cdb[1] & 0x08), &mis);
    if (e == -EILSEQ) miscompare(c, mis);
    else if (e) scsi_zvol_error(c, e, true);
    else scsi_respond(c, NULL, 0, 0);
}

/* ORWRITE(16): the Data-Out is ORed into the range, atomically (SBC-4 5.8;
 * no ORWgeneration processing, so ORPROTECT must be 0 and BMOP/PREVIOUS
 * GENERATION fields of ORWRITE(32) never arrive). */
void sbc_or_write(scsi_ctx_t *c)
{
    uint64_t off;
    uint32_t bytes;
    if (!write_checks(c, &off, &bytes)) return;
    int e = bytes ? zvol_or_write(c->lu->zv, off, bytes, c->cmd->data_out,
                                  write_flags(c->lu, c->cdb[1] & 0x08))
                  : 0;
    if (e) scsi_zvol_error(c, e, true);
    else scsi_respond(c, NULL, 0, 0);
}

/* READ DEFECT DATA(10)/(12): a volume has no medium of its own, so it has
 * neither a primary nor a grown defect list. The header says so (PLISTV and
 * GLISTV zero, an empty list) in whatever format was asked for. */
void sbc_read_defect_data(scsi_ctx_t *c)
{
    uint8_t b[8] = {0};
    bool ten = c->cdb[0] == 0x37;
    uint8_t format = (ten ? c->cdb[2] : c->cdb[1]) & 0x07;
    b[1] = format;
    uint32_t alloc = ten ? be16(c->cdb + 7) : be32(c->cdb + 6);
    scsi_respond(c, b, ten ? 4 : 8, alloc);
}

/* ------------------------------------------------------ EXTENDED COPY */

static void copy_sense(scsi_ctx_t *c, uint8_t key, uint8_t asc, uint8_t ascq)
{
    scsi_set_sense(c->cmd, key, asc, ascq);
}

/* The LU an identification descriptor names by NAA (the descriptor holds at
 * most 16 designator bytes, so the NAA is the only one of ours that fits). */
static scsi_lu_t *cscd_lookup(scsi_target_t *tgt, const uint8_t *d)
{
    unsigned codeset = d[4] & 0x0f, assoc = (d[5] >> 4) & 3, type = d[5] & 0x0f, len = d[7];
    if (assoc != 0 || type != 3 || codeset != 1 || len != 16) return NULL;
    return scsi_lu_find_naa(tgt, d + 8);
}

static void copy_record(scsi_ctx_t *c, uint8_t list_id, uint8_t status, uint16_t segs, uint64_t bytes)
{
    scsi_lu_t *lu = c->lu;
    const char *ini = c->nexus->initiator ? c->nexus->initiator : "";
    pthread_mutex_lock(&lu->lock);
    copy_result_t *slot = NULL;
    for (unsigned i = 0; i < COPY_RESULTS_KEPT; i++) {
        copy_result_t *r = &lu->copies[i];
        if (r->initiator && r->list_id == list_id && strcmp(r->initiator, ini) == 0) slot = r;
    }
    if (!slot) {
        slot = &lu->copies[lu->copies_next++ % COPY_RESULTS_KEPT];
        free(slot->initiator);
        slot->initiator = strdup(ini);
    }
    slot->list_id = list_id;
    slot->status = status;
    slot->segments = segs;
    slot->bytes = bytes;
    pthread_mutex_unlock(&lu->lock);
}

/* The segment descriptors of an EXTENDED COPY parameter list (seg_len bytes at
 * segs, at byte seg_at of the list): each block to block (28 bytes) between
 * target descriptors below ncscd; *nseg of them. False: answered. */
static bool xcopy_check_segments(scsi_ctx_t *c, const uint8_t *segs, uint32_t seg_len,
                                 uint32_t seg_at, uint32_t ncscd, uint32_t *nseg)
{
    *nseg = 0;
    for (uint32_t off = 0; off < seg_len; (*nseg)++) {
        const uint8_t *d = segs + off;
        if (seg_len - off < 4) {
            param_len_error(c);
            return false;
        }
        if (d[0] != 0x02) {
            copy_sense(c, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x09);   /* UNSUPPORTED SEGMENT DESCRIPTOR */
            return false;
        }
        uint32_t dl = be16(d + 2) + 4u;
        if (dl != 28 || seg_len - off < dl) {
            bad_param(c, (int)(seg_at + off + 2), -1);
            return false;
        }
        if (be16(d + 4) >= ncscd || be16(d + 6) >= ncscd) {
            copy_sense(c, 0x0a, 0x0d, 0x02);   /* COPY ABORTED, COPY TARGET DEVICE NOT REACHABLE */
            return false;
        }
        off += dl;
    }
    return true;
}

/* The LUs the list's ncscd target descriptors name (identification descriptors
 * of block devices whose block size they state), pinned into lus. False:
 * answered; what was pinned is in lus for the caller to unpin. */
static bool xcopy_pin_targets(scsi_ctx_t *c, const uint8_t *p, uint32_t ncscd, scsi_lu_t **lus)
{
    for (uint32_t i = 0; i < ncscd; i++) {
        const uint8_t *d = p + 16 + 32 * i;
        int at = (int)(16 + 32 * i);
        if (d[0] != 0xe4) {
            copy_sense(c, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x07);   /* UNSUPPORTED TARGET DESCRIPTOR */
            return false;
        }
        /* LU ID TYPE and NUL are ignored (SPC-4); block devices only */
        if ((d[1] & 0x1f) != 0) {
            bad_param(c, at + 1, 4);
            return false;
        }
        lus[i] = cscd_lookup(c->tgt, d);
        if (!lus[i]) {
            copy_sense(c, 0x0a, 0x0d, 0x02);   /* COPY ABORTED, COPY TARGET DEVICE NOT REACHABLE */
            return false;
        }
        uint32_t dbl = be24(d + 29);
        if (dbl != lu_bs(lus[i])) {
            bad_param(c, at + 29, -1);
            return false;
        }
    }
    return true;
}

/* One checked block-to-block segment descriptor d (at byte `at` of the list),
 * after `done` completed ones: copied, *bytes of it. False: answered. */
static bool xcopy_segment(scsi_ctx_t *c, const uint8_t *d, int at, scsi_lu_t **lus, uint16_t done,
                          uint64_t *bytes_out)
{
    scsi_lu_t *src = lus[be16(d + 4)], *dst = lus[be16(d + 6)];
    bool dc = d[1] & 0x02;
    uint64_t nblk = be16(d + 10), slba = be64(d + 12), dlba = be64(d + 20);
    uint32_t sbs = lu_bs(src), dbs = lu_bs(dst);
    uint64_t bytes = nblk * (dc ? dbs : sbs);
    pthread_mutex_lock(&src->lock);
    bool ok = pr_allowed(src, c->nexus, PRC_READ, 0);
    pthread_mutex_unlock(&src->lock);
    pthread_mutex_lock(&dst->lock);
    ok = ok && pr_allowed(dst, c->nexus, PRC_WRITE, 0);
    pthread_mutex_unlock(&dst->lock);
    if (!ok) {
        res_conflict(c);
        return false;
    }
    if (dst->readonly || zvol_is_readonly(dst->zv) || spc_swp(dst)) {
        copy_sense(c, SCSI_SENSE_DATA_PROTECT, 0x27, 0x00);
        return false;
    }
    if (bytes % sbs || bytes % dbs || bytes > XCOPY_MAX_SEGMENT_BYTES) {
        bad_param(c, at + 10, -1);
        return false;
    }
    if (!range_ok(src, slba, bytes / sbs) || !range_ok(dst, dlba, bytes / dbs)) {
        /* COPY ABORTED; initiators (libiscsi's suite among them) expect no
         * additional sense code here rather than LBA OUT OF RANGE */
        copy_sense(c, 0x0a, 0x00, 0x00);
        scsi_sense_info(c->cmd, done);   /* segments completed */
        return false;
    }
    if (bytes) {
        int e = zvol_copy(src->zv, slba * sbs, dst->zv, dlba * dbs, bytes, write_flags(dst, false));
        if (e) {
            scsi_zvol_error(c, e, true);
            if (c->cmd->sense_len) c->cmd->sense[2] = 0x0a;   /* COPY ABORTED */
            return false;
        }
    }
    *bytes_out = bytes;
    return true;
}

void sbc_xcopy(scsi_ctx_t *c)
{
    uint32_t declared = be32(c->cdb + 10);
    if (declared == 0) {
        scsi_respond(c, NULL, 0, 0);
        return;
    }
    if (declared > XCOPY_MAX_LIST_BYTES) {
        param_len_error(c);
        return;
    }
    uint32_t len = param_len(c, declared);
    const uint8_t *p = c->cmd->data_out;
    if (len < 16 || len < declared) {
        param_len_error(c);
        return;
    }
    uint8_t list_id = p[0];
    unsigned usage = (p[1] >> 3) & 3;
    uint32_t cscd_len = be16(p + 2), seg_len = be32(p + 8), inline_len = be32(p + 12);
    if ((uint64_t)16 + cscd_len + seg_len + inline_len > len) {
        param_len_error(c);
        return;
    }
    if (cscd_len % 32) {
        bad_param(c, 2, -1);
        return;
    }
    uint32_t ncscd = cscd_len / 32;
    if (ncscd > XCOPY_MAX_CSCD) {
        copy_sense(c, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x06);   /* TOO MANY TARGET DESCRIPTORS */
        return;
    }
    /* count and check the segment descriptors before touching anything */
    uint32_t nseg;
    if (!xcopy_check_segments(c, p + 16 + cscd_len, seg_len, 16 + cscd_len, ncscd, &nseg)) return;
    if (nseg > XCOPY_MAX_SEGMENTS) {
        copy_sense(c, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x08);   /* TOO MANY SEGMENT DESCRIPTORS */
        return;
    }
    scsi_lu_t *lus[XCOPY_MAX_CSCD] = {0};
    if (!xcopy_pin_targets(c, p, ncscd, lus)) goto out;
    uint16_t done = 0;
    uint64_t bytes_done = 0;
    for (uint32_t off = 0; off < seg_len; off += 28) {
        uint64_t bytes;
        if (!xcopy_segment(c, p + 16 + cscd_len + off, (int)(16 + cscd_len + off), lus, done, &bytes))
            goto failed;
        done++;
        bytes_done += bytes;
    }
    if (usage != 3) copy_record(c, list_id, 0x00, done, bytes_done);
    scsi_respond(c, NULL, 0, 0);
    goto out;
failed:
    if (usage != 3) copy_record(c, list_id, 0x01, done, bytes_done);
out:
    for (uint32_t k = 0; k < ncscd; k++)
        if (lus[k]) scsi_lu_unpin(lus[k]);
}

void sbc_receive_copy_results(scsi_ctx_t *c)
{
    uint8_t sa = c->cdb[1] & 0x1f;
    uint32_t alloc = be32(c->cdb + 10);
    uint8_t b[48] = {0};
    if (sa == 0x03) {
        put32(b, 46 - 4);
        b[4] = 0x01;   /* SNLID */
        put16(b + 8, XCOPY_MAX_CSCD);
        put16(b + 10, XCOPY_MAX_SEGMENTS);
        put32(b + 12, XCOPY_MAX_LIST_BYTES);
        put32(b + 16, XCOPY_MAX_SEGMENT_BYTES);
        put16(b + 36, 1);
        b[38] = 1;
        unsigned g = 0;
        while ((1u << g) < lu_bs(c->lu)) g++;
        b[39] = (uint8_t)g;
        b[43] = 2;
        b[44] = 0x02;
        b[45] = 0xe4;
        scsi_respond(c, b, 46, alloc);
        return;
    }
    /* COPY STATUS */
    uint8_t list_id = c->cdb[2];
    scsi_lu_t *lu = c->lu;
    const char *ini = c->nexus->initiator ? c->nexus->initiator : "";
    bool found = false;
    pthread_mutex_lock(&lu->lock);
    for (unsigned i = 0; i < COPY_RESULTS_KEPT; i++) {
        copy_result_t *r = &lu->copies[i];
        if (!r->initiator || r->list_id != list_id || strcmp(r->initiator, ini) != 0) continue;
        found = true;
        put32(b, 8);
        b[4] = r->status;
        put16(b + 5, r->segments);
        uint64_t count = r->bytes;
        uint8_t units = 0x00;   /* bytes */
        while (count > 0xffffffffu) {
            count >>= 10;
            units = units ? (uint8_t)(units + 1) : 0xf1;   /* KiB, MiB, ... */
        }
        b[7] = units;
        put32(b + 8, (uint32_t)count);
        /* reported once: afterwards the list id names no copy again */
        free(r->initiator);
        r->initiator = NULL;
        break;
    }
    pthread_mutex_unlock(&lu->lock);
    if (!found) {
        bad_cdb(c, 2, -1);
        return;
    }
    scsi_respond(c, b, 12, alloc);
}
