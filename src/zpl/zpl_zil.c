/*
 * The filesystem's records in the intent log (src/zil). A file write is
 * logged as object-level records, replayed by zil_replay_dmu(): the bytes,
 * copied when the write happens, and the file's whole attribute block (size,
 * times), so replay needs nothing of the ZPL.
 * Every other change is a barrier (op_end in zpl.c): committing it waits for
 * its txg - correct, and only as slow as before the log existed.
 *
 * Why the bytes are copied rather than read back from the DMU when the log is
 * written (as volumes do): truncates and removes are barriers, not records.
 * A write read back after a later truncate would log the zeros the truncate
 * left together with the size the write set; a crash after that log write and
 * before the truncate's txg synced replayed a file whose middle was a hole.
 * Volumes log every change, so replay in order fixes up what read-back saw.
 *
 * Large sync writes (zil_write_indirect: logbias=throughput, or no log device
 * and at least ZIL_INDIRECT_MIN bytes) write their whole records directly as
 * blocks (dmu_write_direct) and log each as ZIL_REC_WRITE_BLOCK, a pointer:
 * the data reaches the main vdevs once and the txg adopts those blocks. The
 * pieces that are not whole records are copied as above. A block's record
 * carries the block's txg (the data's), not the attribute transaction's.
 */
#include "zpl_impl.h"

#include <cairn/util.h>
#include <string.h>

/* logbias=throughput: a large write is not copied into the log (the data is
 * written once, by its txg); committing it waits for that txg instead. */
#define ZPL_ZIL_THROUGHPUT_MIN (32 * 1024)

/* Each record's data fits in one log block with room to spare. */
#define ZPL_ZIL_WRITE_PIECE (64 * 1024u)

int zpl_zil_write_direct(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf,
                         dmu_tx_t *tx, zpl_zil_direct_t *d)
{
    zpl_fs_t *fs = n->fs;
    memset(d, 0, sizeof *d);
    dmu_object_info_t info;
    int err = dmu_object_info(fs->os, n->obj, &info);
    if (err) return err;
    uint32_t rs = info.props.recordsize;
    if (!rs || len == 0) return dmu_write(fs->os, n->obj, off, len, buf, tx);
    d->rs = rs;
    d->first = off / rs;
    d->n = (size_t)((off + len - 1) / rs - d->first + 1);
    d->bps = cairn_zalloc(d->n * sizeof *d->bps);
    const uint8_t *src = buf;
    for (uint64_t pos = off; pos < off + len && !err;) {
        uint64_t blk = pos / rs;
        uint64_t end = CAIRN_MIN((blk + 1) * rs, off + len);
        if (pos % rs == 0 && end - pos == rs)
            err = dmu_write_direct(fs->os, n->obj, pos, rs, src + (pos - off), tx,
                                   &d->bps[blk - d->first]);
        else
            err = dmu_write(fs->os, n->obj, pos, end - pos, src + (pos - off), tx);
        pos = end;
    }
    return err; /* the commit flushes the blocks before logging pointers to them */
}

static void log_copied(zpl_node_t *n, uint64_t txg, uint64_t off, uint64_t len, const void *buf)
{
    for (uint64_t done = 0; done < len;) {
        uint32_t piece = (uint32_t)CAIRN_MIN((uint64_t)ZPL_ZIL_WRITE_PIECE, len - done);
        zil_log(n->fs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = n->obj,
                                         .off = off + done, .len = piece,
                                         .data = (const uint8_t *)buf + done, .dlen = piece});
        done += piece;
    }
}

void zpl_zil_log_write(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf, dmu_tx_t *tx,
                       bool throughput, const zpl_zil_direct_t *direct)
{
    zpl_fs_t *fs = n->fs;
    uint64_t txg = dmu_tx_txg(tx);
    if (direct && direct->n) {
        const uint8_t *src = buf;
        uint32_t rs = direct->rs;
        for (uint64_t pos = off; pos < off + len;) {
            uint64_t blk = pos / rs;
            uint64_t end = CAIRN_MIN((blk + 1) * rs, off + len);
            const cairn_blkptr_t *bp = &direct->bps[blk - direct->first];
            if (!cairn_bp_is_hole(bp))
                zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE_BLOCK, .txg = bp->birth_txg,
                                              .obj = n->obj, .off = pos, .len = rs, .data = bp,
                                              .dlen = sizeof *bp});
            else
                log_copied(n, txg, pos, end - pos, src + (pos - off));
            pos = end;
        }
    } else if (throughput && len >= ZPL_ZIL_THROUGHPUT_MIN) {
        zil_log_barrier(fs->zil, txg);
        return;
    } else {
        log_copied(n, txg, off, len, buf);
    }
    zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_SETATTR, .txg = txg, .obj = n->obj,
                                  .data = &n->phys,
                                  .dlen = (uint32_t)(ZPL_PHYS_HDR + n->phys.inline_len)});
}
