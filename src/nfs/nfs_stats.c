/*
 * The NFS server's statistics (nfs_stats_t in include/cairn/nfs.h), read by
 * cairnd's /metrics.
 *
 * A call's figures are gathered in its nfs_call_t while it runs and added to
 * the server's counters once it is answered, so a call the I/O thread hands to
 * a worker half-way (would_block) is counted by the run that answers it, once.
 * Only the NFS program is counted (not MOUNT, NLM, NSM or the portmapper).
 */
#include "nfs_impl.h"
#include "nfs_srv.h"

#include <cairn/util.h>

/* RFC 5661's operation numbers (RFC 7530's are the same up to 39). */
static const char *const nfs4_op_names[NFS_STATS_V4_OPS] = {
    [3] = "ACCESS",
    [4] = "CLOSE",
    [5] = "COMMIT",
    [6] = "CREATE",
    [7] = "DELEGPURGE",
    [8] = "DELEGRETURN",
    [9] = "GETATTR",
    [10] = "GETFH",
    [11] = "LINK",
    [12] = "LOCK",
    [13] = "LOCKT",
    [14] = "LOCKU",
    [15] = "LOOKUP",
    [16] = "LOOKUPP",
    [17] = "NVERIFY",
    [18] = "OPEN",
    [19] = "OPENATTR",
    [20] = "OPEN_CONFIRM",
    [21] = "OPEN_DOWNGRADE",
    [22] = "PUTFH",
    [23] = "PUTPUBFH",
    [24] = "PUTROOTFH",
    [25] = "READ",
    [26] = "READDIR",
    [27] = "READLINK",
    [28] = "REMOVE",
    [29] = "RENAME",
    [30] = "RENEW",
    [31] = "RESTOREFH",
    [32] = "SAVEFH",
    [33] = "SECINFO",
    [34] = "SETATTR",
    [35] = "SETCLIENTID",
    [36] = "SETCLIENTID_CONFIRM",
    [37] = "VERIFY",
    [38] = "WRITE",
    [39] = "RELEASE_LOCKOWNER",
    [40] = "BACKCHANNEL_CTL",
    [41] = "BIND_CONN_TO_SESSION",
    [42] = "EXCHANGE_ID",
    [43] = "CREATE_SESSION",
    [44] = "DESTROY_SESSION",
    [45] = "FREE_STATEID",
    [46] = "GET_DIR_DELEGATION",
    [47] = "GETDEVICEINFO",
    [48] = "GETDEVICELIST",
    [49] = "LAYOUTCOMMIT",
    [50] = "LAYOUTGET",
    [51] = "LAYOUTRETURN",
    [52] = "SECINFO_NO_NAME",
    [53] = "SEQUENCE",
    [54] = "SET_SSV",
    [55] = "TEST_STATEID",
    [56] = "WANT_DELEGATION",
    [57] = "DESTROY_CLIENTID",
    [58] = "RECLAIM_COMPLETE",
};

const char *nfs4_op_name(uint32_t op) { return op < NFS_STATS_V4_OPS ? nfs4_op_names[op] : NULL; }

static unsigned v4_index(uint32_t op)
{
    return op < NFS_STATS_V4_OPS && nfs4_op_names[op] ? op : 0;
}

void nfs_stats_v4_op(nfs_call_t *call, uint32_t op)
{
    if (call->stat_nops < NFS_CALL_STAT_OPS)
        call->stat_ops[call->stat_nops++] = (uint8_t)v4_index(op);
    else cairn_counter_add(&call->srv->stats.v4_ops[v4_index(op)], 1);
}

void nfs_stats_call_done(nfs_call_t *call, uint64_t start_ns)
{
    if (call->prog != NFS_PROG_NFS || (call->vers != 3 && call->vers != 4)) return;
    nfs_stats_t *s = &call->srv->stats;
    unsigned v = call->vers == 3 ? NFS_STATS_V3 : NFS_STATS_V4;
    if (v == NFS_STATS_V3 && call->proc < NFS_STATS_V3_PROCS)
        cairn_counter_add(&s->v3_calls[call->proc], 1);
    for (uint32_t i = 0; i < call->stat_nops; i++)
        cairn_counter_add(&s->v4_ops[call->stat_ops[i]], 1);
    if (call->stat_read_bytes) cairn_counter_add(&s->read_bytes[v], call->stat_read_bytes);
    if (call->stat_write_bytes) cairn_counter_add(&s->write_bytes[v], call->stat_write_bytes);
    cairn_hist_record(&s->latency[v], cairn_now_ns() - start_ns);
    if (call->stat_exp) {
        nfs_export_count(call->stat_exp, call->stat_read_bytes, call->stat_write_bytes);
        nfs_stats_call_retried(call); /* releases it */
    }
}

void nfs_stats_keep_export(nfs_call_t *call, struct nfs_export *exp)
{
    nfs_stats_call_retried(call);
    call->stat_exp = exp;
}

void nfs_stats_call_retried(nfs_call_t *call)
{
    if (call->stat_exp) nfs_export_rele(call->stat_exp);
    call->stat_exp = NULL;
}

const nfs_stats_t *nfs_server_stats(const nfs_server_t *srv) { return &srv->stats; }
