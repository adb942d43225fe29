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
 */
#include "zpl_impl.h"

/* logbias=throughput: a large write is not copied into the log (the data is
 * written once, by its txg); committing it waits for that txg instead. */
#define ZPL_ZIL_THROUGHPUT_MIN (32 * 1024)

/* Each record's data fits in one log block with room to spare. */
#define ZPL_ZIL_WRITE_PIECE (64 * 1024u)

void zpl_zil_log_write(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf, dmu_tx_t *tx,
                       bool throughput)
{
    zpl_fs_t *fs = n->fs;
    uint64_t txg = dmu_tx_txg(tx);
    if (throughput && len >= ZPL_ZIL_THROUGHPUT_MIN) {
        zil_log_barrier(fs->zil, txg);
        return;
    }
    for (uint64_t done = 0; done < len;) {
        uint32_t piece = (uint32_t)CAIRN_MIN((uint64_t)ZPL_ZIL_WRITE_PIECE, len - done);
        zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = n->obj,
                                      .off = off + done, .len = piece,
                                      .data = (const uint8_t *)buf + done, .dlen = piece});
        done += piece;
    }
    zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_SETATTR, .txg = txg, .obj = n->obj,
                                  .data = &n->phys,
                                  .dlen = (uint32_t)(ZPL_PHYS_HDR + n->phys.inline_len)});
}
