/*
 * Internal contract between the parts of the NFS server (src/nfs/): the RPC
 * transport and exports (rpc_*.c, nfs_export.c, portmap, MOUNT, NFSv3) and the
 * NFSv4 server (nfs4_*.c). Not visible outside src/nfs.
 *
 * Flow of one request: the transport reassembles a record (RFC 5531 record
 * marking) on a connection, decodes the RPC call header (xid, program,
 * version, procedure, credential), and queues the call on the server's worker
 * pool, so one connection may have many calls running at once and one slow
 * call never holds up the socket. A worker runs the program's handler with
 * `args` positioned at the procedure arguments and an empty `res` buffer; the
 * handler decodes, calls the ZPL synchronously, encodes its results into
 * `res` and returns an accept status. The transport then frames the reply
 * (same xid) and sends it under the connection's send lock; replies may leave
 * in a different order than the calls came in, as RPC allows. An NFSv3 call
 * that only reads (nfs3_proc_reads_only) is first run on the I/O thread
 * itself with `memory_only` (see rpc_server.c); it goes to a worker only when
 * it sets `would_block` or reads a block that is not in memory.
 */
#ifndef CAIRN_NFS_IMPL_H
#define CAIRN_NFS_IMPL_H

#include <cairn/nfs.h>
#include <cairn/zap.h>
#include <cairn/zpl.h>

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

/* ---------------------------------------------------------------- XDR */

/* A cursor over XDR bytes: decoding reads buf[pos..len); encoding appends at
 * pos (growing buf when `growable`). Any overrun sets `err` and every later get
 * returns zeros, so a handler may decode a whole structure and check err once.
 *
 * An encoded reply may carry spans laid over its buffer (a READ's data lent
 * by the ARC, nfs_xdr_lend): the reply's bytes are buf[0..len) except where a
 * span covers them, and those come from the span's held buffer. The transport
 * sends them as iovecs (nfs_xdr_iov); whoever needs the bytes in one place
 * copies them out (nfs_xdr_copy_out, nfs_xdr_flatten). */
typedef struct nfs_xdr {
    uint8_t *buf;
    size_t len;      /* decode: bytes available; encode: bytes written (== pos) */
    size_t pos;
    size_t cap;      /* encode: allocated size */
    bool err;
    bool growable;   /* encode: realloc when full */
    cairn_spans_t lent; /* encode: spans over buf, increasing pos (v malloc'd) */
} nfs_xdr_t;

/* Encoding buffer management (nfs_xdr.c). */
void nfs_xdr_init_encode(nfs_xdr_t *x, size_t initial_cap);
void nfs_xdr_init_decode(nfs_xdr_t *x, const void *buf, size_t len);
void nfs_xdr_free(nfs_xdr_t *x);
/* Reserves n bytes at pos and returns a pointer to them (NULL and err on failure). */
uint8_t *nfs_xdr_reserve(nfs_xdr_t *x, size_t n);
/* Lays spans (positions relative to base, already reserved in buf) over the
 * reply, taking over their references; spans->n becomes 0. Without memory
 * for them their bytes are copied into buf instead. */
void nfs_xdr_lend(nfs_xdr_t *x, size_t base, cairn_spans_t *spans);
/* Cuts the encoding back to pos (pos = len = pos), dropping spans past it. */
void nfs_xdr_truncate(nfs_xdr_t *x, size_t pos);
/* Copies every span's bytes into buf and releases them. */
void nfs_xdr_flatten(nfs_xdr_t *x);
/* Copies the reply's bytes [start, start + n) (buffer and spans) to dst. */
void nfs_xdr_copy_out(const nfs_xdr_t *x, size_t start, size_t n, uint8_t *dst);
/* Spans one READ may lend (1 MiB in DMU_LEND_MIN pieces, and the edges);
 * past that the DMU copies. */
#define NFS_READ_SPANS 72
/* Up to max iovecs describing the reply's bytes from skip to len; returns how
 * many were filled (0 when nothing is left). */
struct iovec;
size_t nfs_xdr_iov(const nfs_xdr_t *x, size_t skip, struct iovec *iov, size_t max);

uint32_t nfs_xdr_get_u32(nfs_xdr_t *x);
uint64_t nfs_xdr_get_u64(nfs_xdr_t *x);
/* Variable-length opaque/string: points *data into the buffer (no copy);
 * fails (err) when longer than max. */
const uint8_t *nfs_xdr_get_opaque(nfs_xdr_t *x, uint32_t *len, uint32_t max);
/* Fixed-length opaque of n bytes (plus padding). */
const uint8_t *nfs_xdr_get_fixed(nfs_xdr_t *x, uint32_t n);

void nfs_xdr_put_u32(nfs_xdr_t *x, uint32_t v);
void nfs_xdr_put_u64(nfs_xdr_t *x, uint64_t v);
void nfs_xdr_put_opaque(nfs_xdr_t *x, const void *data, uint32_t len);   /* length + data + pad */
void nfs_xdr_put_fixed(nfs_xdr_t *x, const void *data, uint32_t len);    /* data + pad */
void nfs_xdr_put_string(nfs_xdr_t *x, const char *s);


/* ---------------------------------------------------------------- calls */

enum { NFS_AUTH_NONE = 0, NFS_AUTH_SYS = 1 };

/* RPC accept_stat values a handler returns; NFS_ACCEPT_DROP sends nothing
 * (duplicate or abandoned call), NFS_ACCEPT_CLOSE closes the connection. */
typedef enum nfs_accept {
    NFS_ACCEPT_SUCCESS = 0,
    NFS_ACCEPT_PROG_UNAVAIL = 1,
    NFS_ACCEPT_PROG_MISMATCH = 2,
    NFS_ACCEPT_PROC_UNAVAIL = 3,
    NFS_ACCEPT_GARBAGE_ARGS = 4,
    NFS_ACCEPT_SYSTEM_ERR = 5,
    NFS_ACCEPT_DROP = -1,
    NFS_ACCEPT_CLOSE = -2,
} nfs_accept_t;

typedef struct nfs_conn nfs_conn_t;

typedef struct nfs_call {
    nfs_server_t *srv;
    nfs_conn_t *conn;                 /* the connection (for NFSv4.1 session binding) */
    struct sockaddr_storage peer;     /* the client's address (export ACLs) */
    socklen_t peer_len;
    uint32_t xid, prog, vers, proc;
    uint32_t flavor;                  /* NFS_AUTH_NONE or NFS_AUTH_SYS */
    zpl_cred_t cred;                  /* AUTH_SYS uid/gid/groups; AUTH_NONE: 65534 */
    const char *machine_name;         /* AUTH_SYS machinename ("" otherwise) */
    nfs_xdr_t args;                   /* positioned at the procedure's arguments */
    nfs_xdr_t *res;                   /* append the procedure's results here */
    /* Set by the transport when the call runs on the I/O thread: the handler
     * must not wait for a device or a transaction. A handler that would sets
     * would_block before changing anything and the call is run again on a
     * worker without memory_only (its results so far are discarded). */
    bool memory_only;
    bool would_block;
    /* For the server's statistics (nfs_stats_t), added up once the call is
     * answered: bytes a READ/WRITE moved, and the NFSv4 operations run (past
     * NFS_CALL_STAT_OPS, a COMPOUND's operations count as they run). */
    uint64_t stat_read_bytes, stat_write_bytes;
    struct nfs_export *stat_exp;      /* NFSv3: the share counted, held until counted */
#define NFS_CALL_STAT_OPS 32
    uint8_t stat_ops[NFS_CALL_STAT_OPS];
    uint32_t stat_nops;
    uint32_t stat_v4_ops;             /* every operation of the COMPOUND */
    bool stat_v4_shared;              /* its share counted (nfs_stats_v4_answered) */
    /* Analytics' file drill-down (only while it is on): the file a READ or
     * WRITE used, held until counted, and how many such operations. */
    struct zpl_node *stat_file;
    uint32_t stat_file_ops;
} nfs_call_t;

typedef nfs_accept_t (*nfs_program_fn)(nfs_call_t *call);

/* RFC 1813's procedure numbers. */
enum nfs3_procnum {
    NFSPROC3_NULL, NFSPROC3_GETATTR, NFSPROC3_SETATTR, NFSPROC3_LOOKUP, NFSPROC3_ACCESS,
    NFSPROC3_READLINK, NFSPROC3_READ, NFSPROC3_WRITE, NFSPROC3_CREATE, NFSPROC3_MKDIR,
    NFSPROC3_SYMLINK, NFSPROC3_MKNOD, NFSPROC3_REMOVE, NFSPROC3_RMDIR, NFSPROC3_RENAME,
    NFSPROC3_LINK, NFSPROC3_READDIR, NFSPROC3_READDIRPLUS, NFSPROC3_FSSTAT, NFSPROC3_FSINFO,
    NFSPROC3_PATHCONF, NFSPROC3_COMMIT
};

/* NFSv3 procedures that change nothing on the server and are cheap, the ones
 * worth running on the I/O thread: NULL, GETATTR, LOOKUP, ACCESS, READLINK,
 * READ (whose atime update is the one change, and it stops for it); the
 * table in nfs3.c says which. */
bool nfs3_proc_reads_only(uint32_t proc);

/* A stable id of the connection while it lives (for session/connection binding). */
uint64_t nfs_conn_id(const nfs_conn_t *conn);
/* NFSv4.1 back channel (nfs4_callback.c): a reference that keeps the
 * connection's memory (not the socket) alive; whether it was closed; sending a
 * whole RPC call (body: the call header onward) as one record from any
 * thread. The reply arrives on the connection's reader, which gives records
 * that are replies to nfs4_cb_reply. */
void nfs_conn_hold(nfs_conn_t *conn);
void nfs_conn_put(nfs_conn_t *conn);
bool nfs_conn_closed(nfs_conn_t *conn);
int nfs_conn_send_call(nfs_conn_t *conn, nfs_xdr_t *body);

/* ---------------------------------------------------------------- exports */

typedef struct nfs_export nfs_export_t;

/* Held references (drop with nfs_export_rele); NULL when there is none. Waits
 * while the export is suspended (not on the I/O thread). */
nfs_export_t *nfs_export_find_path(nfs_server_t *srv, const char *path);
/* The same: 0 and *out held, -ENOENT, or -EAGAIN for a suspended export when not
 * waiting (the caller answers "try again later"). */
int nfs_export_lookup_path(nfs_server_t *srv, const char *path, bool wait, nfs_export_t **out);
/* The export whose path is the longest prefix of path ending at a component
 * boundary (MOUNT of a directory below an export), waiting while it is
 * suspended; *rest points into path after the export's part and its slash ("" for
 * the export itself). path is canonical: absolute, no "." or ".." or empty
 * components, no trailing slash. NULL when no export covers it. */
nfs_export_t *nfs_export_find_covering(nfs_server_t *srv, const char *path, const char **rest);
/* By the export guid in a Cairn file handle (zpl_fh_export_guid): 0 and *out held;
 * -EBADF: not a Cairn handle; -ESTALE: no such export; -EAGAIN: its export is
 * suspended for a moment (nfs_server_suspend): NFS3ERR_JUKEBOX / NFS4ERR_DELAY. */
int nfs_export_lookup_fh(nfs_server_t *srv, const void *fh, size_t len, nfs_export_t **out);
void nfs_export_rele(nfs_export_t *exp);
zpl_fs_t *nfs_export_fs(nfs_export_t *exp);          /* the mounted head filesystem */
const char *nfs_export_path(nfs_export_t *exp);      /* "/tank/share" */
/* Calls fn for each export (held during the call) in path order; stops when fn
 * returns non-zero and returns that. */
int nfs_export_foreach(nfs_server_t *srv, int (*fn)(nfs_export_t *exp, void *arg), void *arg);

/* Decides whether this call's client may use the export over this NFS
 * version: 0 and the effective credential (after root_squash / all_squash
 * and anonuid/anongid) and whether it may write; -EACCES when the client is not
 * on the export's lists or the version is not served (the caller answers
 * NFS3ERR_ACCES / NFS4ERR_ACCESS; MOUNT answers MNT3ERR_ACCES). */
int nfs_export_authorize(nfs_export_t *exp, const nfs_call_t *call, zpl_cred_t *eff,
                         bool *writable);

/* ---------------------------------------------------------------- server */

/* The write verifier (NFSv3 WRITE/COMMIT, NFSv4 WRITE/COMMIT): chosen at
 * server start, different after every restart. */
uint64_t nfs_server_write_verifier(nfs_server_t *srv);
/* Statistics (nfs_stats.c): an NFSv4 operation a COMPOUND ran; a call answered
 * (not one handed to a worker), started at start_ns. */
void nfs_stats_v4_op(nfs_call_t *call, uint32_t op);
void nfs_stats_call_done(nfs_call_t *call, uint64_t start_ns);
/* NFSv3: the call counts toward exp's share; takes over the reference. Dropped
 * uncounted when the call goes to a worker (nfs_stats_call_retried). */
void nfs_stats_keep_export(nfs_call_t *call, struct nfs_export *exp);
void nfs_stats_call_retried(nfs_call_t *call);
/* An NFSv4 COMPOUND answered: counted toward the share of its last current file
 * handle, exp (NULL: none), while that is still valid (no reference is kept). */
void nfs_stats_v4_answered(nfs_call_t *call, struct nfs_export *exp);
/* A READ or WRITE on node n of share exp (the analytics' file drill-down). */
void nfs_stats_file(nfs_call_t *call, struct nfs_export *exp, struct zpl_node *n);
/* Per share (nfs_export.c): one call (NFSv4: COMPOUND) and its bytes. */
void nfs_export_count(struct nfs_export *exp, uint64_t read_bytes, uint64_t write_bytes);
/* Directory for persistent server state (NFSv4 client records for the grace
 * period), NULL when none was configured. */
const char *nfs_server_state_dir(nfs_server_t *srv);

/* ---------------------------------------------------------------- NFSv4 */

/* Implemented in nfs4_*.c. The transport calls nfs4_init at start (after the
 * exports exist, before listening), routes program 100003 version 4 to
 * nfs4_program (NULL = 0, COMPOUND = 1; minor versions 0 and 1 are told apart
 * inside COMPOUND), and calls nfs4_fini at stop. nfs4_export_removed is called
 * when an export goes away, after its last call returned: drop every state
 * (opens, locks) that refers to it. */
int nfs4_init(nfs_server_t *srv, void **state);
void nfs4_fini(void *state);
nfs_accept_t nfs4_program(nfs_call_t *call);
void nfs4_export_removed(void *state, nfs_export_t *exp);
/* Sets of strings kept in pools (nfs_pool_records.c): the client records a
 * partner head needs after a takeover. */
typedef struct nfs_pool_records {
    char **v;
    size_t n;
} nfs_pool_records_t;
void nfs_pool_records_load(dsl_pool_t *dp, const char *prefix, nfs_pool_records_t *out);
void nfs_pool_records_free(nfs_pool_records_t *r);
/* Makes dp's set under prefix the strings in v (NULL entries skipped); 0 or
 * the last -errno of a write the pool refused. */
int nfs_pool_records_store(dsl_pool_t *dp, const char *prefix, char *const *v, size_t n);
/* The pools a set is kept in (the owner's lock protects it). */
typedef struct nfs_pool_list {
    dsl_pool_t **v;
    size_t n;
} nfs_pool_list_t;
/* true when dp was not in the list and now is. */
bool nfs_pool_list_add(nfs_pool_list_t *l, dsl_pool_t *dp);
void nfs_pool_list_remove(nfs_pool_list_t *l, dsl_pool_t *dp);   /* dp NULL: all */
void nfs_pool_list_free(nfs_pool_list_t *l);

/* A pool whose filesystems are about to be exported (before clients can see
 * them): its NFSv4 client records join those that may reclaim, with a grace
 * period if any of them is new here (a takeover, docs/ha.md), and it keeps the
 * records from now on. A pool already known is left alone. */
void nfs4_records_pool_add(void *state, dsl_pool_t *dp);
/* The pool is going away (dp NULL: all of them): nothing is written to it any more. */
void nfs4_records_pool_remove(void *state, dsl_pool_t *dp);
/* The NFSv4 state of a server (as returned by nfs4_init). */
void *nfs_server_nfs4_state(nfs_server_t *srv);
/* An RPC reply record that came in on conn (the I/O thread): a callback's
 * answer, matched by xid (nfs4_callback.c). */
void nfs4_cb_reply(nfs_server_t *srv, nfs_conn_t *conn, const uint8_t *rec, size_t len);
/* For NFSv3 (and NLM callers without the state lock): 0, or -EAGAIN while an
 * NFSv4 delegation on node that conflicts with this access (write: any
 * delegation; read: write delegations) is being recalled (JUKEBOX). */
int nfs4_deleg_yield(nfs_server_t *srv, zpl_node_t *node, bool write);
/* The same for the file dir/name (REMOVE, RENAME); 0 when there is none. */
int nfs4_deleg_yield_name(nfs_server_t *srv, zpl_node_t *dir, const char *name);

#endif
