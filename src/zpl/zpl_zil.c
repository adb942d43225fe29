/*
 * The filesystem's records in the intent log (src/zil). A file write is
 * logged as two object-level records, replayed by zil_replay_dmu(): the
 * bytes (read back from the DMU when the log is written) and the file's
 * whole attribute block (size, times), so replay needs nothing of the ZPL.
 * Every other change is a barrier (op_end in zpl.c): committing it waits for
 * its txg - correct, and only as slow as before the log existed.
 */
#include "zpl_impl.h"

/* logbias=throughput: a large write is not copied into the log (the data is
 * written once, by its txg); committing it waits for that txg instead. */
#define ZPL_ZIL_THROUGHPUT_MIN (32 * 1024)

void zpl_zil_log_write(zpl_node_t *n, uint64_t off, uint64_t len, dmu_tx_t *tx, bool throughput)
{
    zpl_fs_t *fs = n->fs;
    uint64_t txg = dmu_tx_txg(tx);
    if (throughput && len >= ZPL_ZIL_THROUGHPUT_MIN) {
        zil_log_barrier(fs->zil, txg);
        return;
    }
    zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = n->obj, .off = off,
                                  .len = len});
    zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_SETATTR, .txg = txg, .obj = n->obj,
                                  .data = &n->phys,
                                  .dlen = (uint32_t)(ZPL_PHYS_HDR + n->phys.inline_len)});
}
