/*
 * The NFS server's statistics (nfs_stats_t in include/cairn/nfs.h), read by
 * cairnd's /metrics.
 *
 * A call's figures are gathered in its nfs_call_t while it runs and added to
 * the server's counters once it is answered, so a call the I/O thread hands to
 * a worker half-way (would_block) is counted by the run that answers it, once.
 * Only the NFS program is counted (not MOUNT, NLM, NSM or the portmapper).
 *
 * The same moment records the call into analytics (include/cairn/analytics.h):
 * nfs3.ops / nfs4.ops by operation, share, client and file, latency and size
 * (per call: an NFSv4 COMPOUND's), the joint drill-downs op-latency, client-op
 * and client-file, and net.bytes by protocol and client. Client and file
 * are off by default; a name (an address printed, a file's path looked up) is
 * made once per key, when it first claims its slot.
 */
#include "nfs4_impl.h"
#include "nfs_impl.h"
#include "nfs_srv.h"

#include <cairn/analytics.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <stdio.h>

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

static void name_v4_op(const void *arg, uint64_t key, char *buf, size_t len);
static an_part_t client_part(const nfs_call_t *call);

const char *nfs4_op_name(uint32_t op) { return op < NFS_STATS_V4_OPS ? nfs4_op_names[op] : NULL; }

static unsigned v4_index(uint32_t op)
{
    return op < NFS_STATS_V4_OPS && nfs4_op_names[op] ? op : 0;
}

void nfs_stats_v4_op(nfs_call_t *call, uint32_t op)
{
    call->stat_v4_ops++;
    if (call->stat_nops < NFS_CALL_STAT_OPS)
        call->stat_ops[call->stat_nops++] = (uint8_t)v4_index(op);
    else {
        cairn_counter_add(&call->srv->stats.v4_ops[v4_index(op)], 1);
        an_add(AN_NFS4_OPS, AN_BY_OP, v4_index(op), 1, name_v4_op, NULL);
        if (an_dim_enabled(AN_NFS4_OPS, AN_BY_CLIENT_OP))
            an_add_pair(AN_NFS4_OPS, AN_BY_CLIENT_OP, client_part(call),
                        (an_part_t){v4_index(op), name_v4_op, NULL}, 1);
    }
}

/* ------------------------------------------------------------ analytics */

static void name_v3_proc(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    an_name_string(nfs3_proc_name((uint32_t)key), key, buf, len);
}

static void name_v4_op(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    an_name_string(key ? nfs4_op_name((uint32_t)key) : "other-op", key, buf, len);
}

/* The client's address without its port; an IPv4 client on a dual-stack socket
 * is named (and keyed) as IPv4. */
static const void *client_addr(const struct sockaddr_storage *ss, size_t *len, int *family)
{
    if (ss->ss_family == AF_INET) {
        *family = AF_INET;
        *len = 4;
        return &((const struct sockaddr_in *)ss)->sin_addr;
    }
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) {
        *family = AF_INET;
        *len = 4;
        return a6->s6_addr + 12;
    }
    *family = AF_INET6;
    *len = 16;
    return a6;
}

static void name_client(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)key;
    size_t alen;
    int family;
    const void *a = client_addr(arg, &alen, &family);
    if (!inet_ntop(family, a, buf, (socklen_t)len)) cairn_strlcpy(buf, "?", len);
}

/* The call's client as a key (never 0) and its name. */
static an_part_t client_part(const nfs_call_t *call)
{
    size_t alen;
    int family;
    const void *a = client_addr(&call->peer, &alen, &family);
    return (an_part_t){an_hash(a, alen) | 1, name_client, &call->peer};
}

typedef struct file_name {
    struct nfs_export *exp;
    zpl_node_t *node;
} file_name_t;

static void name_file(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)key;
    const file_name_t *f = arg;
    char path[AN_NAME_MAX];
    if (zpl_node_path(f->node, path, sizeof path))
        snprintf(path, sizeof path, "/#%llu", (unsigned long long)zpl_node_ino(f->node));
    snprintf(buf, len, "%s%s", nfs_export_path(f->exp), !strcmp(path, "/") ? "" : path);
}

static void name_net(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    snprintf(buf, len, "nfs%u %s", (unsigned)(key >> 1), key & 1 ? "write" : "read");
}

void nfs_stats_file(nfs_call_t *call, struct nfs_export *exp, zpl_node_t *n)
{
    an_stat_t st = call->vers == 3 ? AN_NFS3_OPS : AN_NFS4_OPS;
    if (!exp || !n || (!an_dim_enabled(st, AN_BY_FILE) && !an_dim_enabled(st, AN_BY_CLIENT_FILE)))
        return;
    if (call->stat_file && call->stat_file != n) return; /* a COMPOUND's first file */
    if (!call->stat_file) {
        zpl_node_hold(n);
        call->stat_file = n;
    }
    call->stat_file_ops++;
}

/* The share (and the file of the call's READs and WRITEs) ops count toward.
 * Calls on no share's file (NULL, EXCHANGE_ID, ...) count under "-", so the
 * shares add up to the total. Releases the file. */
static void record_share(nfs_call_t *call, struct nfs_export *exp, uint64_t ops)
{
    an_stat_t st = call->vers == 3 ? AN_NFS3_OPS : AN_NFS4_OPS;
    if (!exp) an_add(st, AN_BY_SHARE, 0, ops, an_name_string, "-");
    else {
        zpl_fs_t *fs = nfs_export_fs(exp);
        uint64_t guid = fs ? zpl_fs_guid(fs) : 0;
        an_add(st, AN_BY_SHARE, guid, ops, an_name_string, nfs_export_path(exp));
        if (call->stat_file) {
            file_name_t f = {exp, call->stat_file};
            uint64_t file_key = guid * 0x9e3779b97f4a7c15ull ^ zpl_node_ino(call->stat_file);
            an_add(st, AN_BY_FILE, file_key, call->stat_file_ops, name_file, &f);
            if (an_dim_enabled(st, AN_BY_CLIENT_FILE))
                an_add_pair(st, AN_BY_CLIENT_FILE, client_part(call),
                            (an_part_t){file_key, name_file, &f}, call->stat_file_ops);
        }
    }
    if (call->stat_file) zpl_node_rele(call->stat_file);
    call->stat_file = NULL;
    call->stat_file_ops = 0;
}

void nfs_stats_v4_answered(nfs_call_t *call, struct nfs_export *exp)
{
    if (exp) nfs_export_count(exp, call->stat_read_bytes, call->stat_write_bytes);
    if (an_stat_enabled(AN_NFS4_OPS)) record_share(call, exp, call->stat_v4_ops);
    call->stat_v4_shared = true;
}

/* The operation an NFSv4 COMPOUND's latency is charged to in op-latency: its
 * first that is not SEQUENCE or a PUT*FH (the work the rest sets up). */
static unsigned v4_work_op(const nfs_call_t *call)
{
    for (uint32_t i = 0; i < call->stat_nops; i++) {
        unsigned op = call->stat_ops[i];
        if (op != OP4_SEQUENCE && op != OP4_PUTFH && op != OP4_PUTPUBFH && op != OP4_PUTROOTFH)
            return op;
    }
    return call->stat_nops ? call->stat_ops[0] : 0;
}

/* Payload bytes of one direction, by protocol and (when on) by client. */
static void record_net(unsigned vers, bool write, uint64_t bytes, uint64_t client_key,
                       const struct sockaddr_storage *peer)
{
    if (!bytes) return;
    an_add_total(AN_NET_BYTES, bytes);
    an_add(AN_NET_BYTES, AN_BY_PROTOCOL, vers << 1 | write, bytes, name_net, NULL);
    if (client_key) an_add(AN_NET_BYTES, AN_BY_CLIENT, client_key, bytes, name_client, peer);
}

static void record_analytics(nfs_call_t *call, uint64_t ns)
{
    bool v3 = call->vers == 3;
    an_stat_t st = v3 ? AN_NFS3_OPS : AN_NFS4_OPS;
    if (!an_stat_enabled(st)) return;
    uint64_t ops = v3 ? 1 : call->stat_v4_ops;
    an_add_total(st, ops);
    if (v3) an_add(st, AN_BY_OP, call->proc, 1, name_v3_proc, NULL);
    else
        for (uint32_t i = 0; i < call->stat_nops; i++)
            an_add(st, AN_BY_OP, call->stat_ops[i], 1, name_v4_op, NULL);
    if (v3 || !call->stat_v4_shared) record_share(call, v3 ? call->stat_exp : NULL, ops);
    bool net_client = an_dim_enabled(AN_NET_BYTES, AN_BY_CLIENT) &&
                      (call->stat_read_bytes || call->stat_write_bytes);
    bool client_op = an_dim_enabled(st, AN_BY_CLIENT_OP);
    uint64_t client_key = 0;
    if (an_dim_enabled(st, AN_BY_CLIENT) || client_op || net_client) {
        an_part_t client = client_part(call);
        client_key = client.key;
        an_add(st, AN_BY_CLIENT, client_key, ops, name_client, &call->peer);
        if (client_op && v3)
            an_add_pair(st, AN_BY_CLIENT_OP, client, (an_part_t){call->proc, name_v3_proc, NULL},
                        1);
        else if (client_op)
            for (uint32_t i = 0; i < call->stat_nops; i++)
                an_add_pair(st, AN_BY_CLIENT_OP, client,
                            (an_part_t){call->stat_ops[i], name_v4_op, NULL}, 1);
    }
    an_add_latency(st, ns, 1);
    if (v3) an_add_op_latency(st, call->proc, ns, name_v3_proc, NULL);
    else an_add_op_latency(st, v4_work_op(call), ns, name_v4_op, NULL);
    an_add_size(st, call->stat_read_bytes + call->stat_write_bytes, 1);
    if (an_stat_enabled(AN_NET_BYTES)) {
        unsigned vers = v3 ? 3 : 4;
        record_net(vers, false, call->stat_read_bytes, net_client ? client_key : 0, &call->peer);
        record_net(vers, true, call->stat_write_bytes, net_client ? client_key : 0, &call->peer);
    }
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
    uint64_t ns = cairn_now_ns() - start_ns;
    cairn_hist_record(&s->latency[v], ns);
    record_analytics(call, ns);
    if (call->stat_exp)
        nfs_export_count(call->stat_exp, call->stat_read_bytes, call->stat_write_bytes);
    nfs_stats_call_retried(call); /* releases what was held */
}

void nfs_stats_keep_export(nfs_call_t *call, struct nfs_export *exp)
{
    if (call->stat_exp) nfs_export_rele(call->stat_exp);
    call->stat_exp = exp;
}

void nfs_stats_call_retried(nfs_call_t *call)
{
    if (call->stat_exp) nfs_export_rele(call->stat_exp);
    call->stat_exp = NULL;
    if (call->stat_file) zpl_node_rele(call->stat_file);
    call->stat_file = NULL;
    call->stat_file_ops = 0;
}

const nfs_stats_t *nfs_server_stats(const nfs_server_t *srv) { return &srv->stats; }
