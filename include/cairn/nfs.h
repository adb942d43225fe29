/*
 * NFS: the NFS server (src/nfs/): ONC RPC over TCP, a built-in portmapper,
 * MOUNT v3, NFSv3 with NLM/NSM locking, and NFSv4.0/4.1, serving filesystems (the ZPL) to clients.
 *
 * The daemon starts one server with its listen addresses, then tells it which
 * filesystems to export as shares come and go (pool import/export, dataset
 * create/destroy/rename, `sharenfs` and `mountpoint` changes). The server
 * mounts what it exports (zpl_mount) and unmounts it when the export goes;
 * removing an export waits for the calls running on it, and later calls with
 * its file handles get a stale-handle error.
 */
#ifndef CAIRN_NFS_H
#define CAIRN_NFS_H

#include <cairn/stats.h>
#include <cairn/dsl.h>
#include <cairn/frontend_defaults.h>
#include <cairn/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nfs_server nfs_server_t;

typedef struct nfs_listen_addr {
    char host[256];           /* numeric address; "" or "0.0.0.0": any */
    uint16_t port;            /* 0: do not listen */
} nfs_listen_addr_t;

typedef struct nfs_server_config {
    nfs_listen_addr_t nfs;      /* NFSv3 + NFSv4 (and MOUNT too, as many servers do) */
    nfs_listen_addr_t mount;    /* MOUNT v3 */
    nfs_listen_addr_t portmap;  /* built-in portmapper; skipped with a log line
                                   when the port is taken (a system rpcbind runs) */
    unsigned workers;           /* worker threads; 0: a default from the core count */
    const char *state_dir;      /* NFSv4 client records for grace; NULL: none */
    uint32_t lease_seconds;     /* NFSv4 lease; 0: NFS_DEFAULT_LEASE_S */
    uint32_t grace_seconds;     /* 0: the lease time (NFSv4 and NLM) */
    bool no_delegations;        /* NFSv4 OPEN never grants a delegation */
    uint16_t nlm_client_portmap;/* the portmapper port on client hosts, where NLM
                                   finds their lock manager (GRANTED callbacks) and
                                   statd (SM_NOTIFY); 0: 111 */
    /* Connection caps (NFS, MOUNT and portmap connections together; see
     * include/cairn/connlimit.h) and the seconds after which a connection
     * without a request is closed; 0: the NFS_DEFAULT_* below. */
    unsigned max_conns;
    unsigned max_conns_per_client;
    uint32_t idle_timeout_s;
    bool defer_accept;          /* bind and listen, but accept nothing before
                                   nfs_server_serve(): see below */
} nfs_server_config_t;

/* NFS_DEFAULT_*: <cairn/frontend_defaults.h>. */

/* Binds every listener (errors name the address), starts the workers. */
int nfs_server_start(const nfs_server_config_t *cfg, nfs_server_t **out, char *err,
                     size_t errlen);
/* With defer_accept, starts accepting connections. A daemon exports its shares
 * between nfs_server_start and this call: a client that connects meanwhile (one
 * reconnecting right after a restart) waits in the listen backlog and its first
 * call finds every export in place, instead of a stale-handle error for an
 * export not registered yet. Without defer_accept it does nothing. */
void nfs_server_serve(nfs_server_t *srv);
/* Closes listeners and connections, waits for running calls, unexports all. */
void nfs_server_stop(nfs_server_t *srv);
/* The ports actually bound (useful with port 0 in tests): NFS, MOUNT, portmap. */
void nfs_server_ports(nfs_server_t *srv, uint16_t *nfs, uint16_t *mount, uint16_t *portmap);

/* ---- export options: the value of the `sharenfs` property ----
 * "on" (= rw for everyone, root_squash), "off", or a comma-separated list:
 *   rw[=CLIENTS] ro[=CLIENTS]   CLIENTS: colon-separated host names, addresses,
 *                               @CIDR (IPv4/IPv6) or *; names are resolved when
 *                               the share is made and again at every refresh of
 *                               the shares (any dataset change); a client matching a ro
 *                               list is read-only, one matching rw may write,
 *                               one matching neither is refused; with no list
 *                               at all, rw applies to everyone
 *   root_squash (default) | no_root_squash | all_squash
 *   anonuid=N anongid=N         (default 65534)
 *   secure | insecure           secure: only clients calling from a privileged
 *                               port (< 1024) are served (MOUNT: MNT3ERR_ACCES,
 *                               NFS calls: NFS3ERR_PERM / NFS4ERR_PERM, as Linux
 *                               nfsd); insecure (the default, unlike Linux, so
 *                               that unprivileged userspace clients work) any port
 *   sec=sys                     (the only flavour; AUTH_NONE maps to anon)
 *   vers=3 | vers=4 | vers=3:4  which NFS versions serve this share (default both) */
typedef struct nfs_export_opts nfs_export_opts_t;
/* Parses and validates a sharenfs value: 0, or -EINVAL with a one-line message
 * naming the offending option. *shared is false for "off". */
int nfs_sharenfs_check(const char *value, bool *shared, char *err, size_t errlen);
/* nfs_sharenfs_check, and every host name in the client lists must resolve now
 * (getaddrinfo): for `cairn set`/`create`, so a typo is refused with one line
 * instead of silently matching nobody. An export already made keeps working when
 * a name stops resolving later (it just matches nothing). *has_names (may be
 * NULL) tells whether the value lists host names at all. */
int nfs_sharenfs_check_names(const char *value, bool *has_names, char *err, size_t errlen);

/* Exports dataset dsname of pool dp at path (its mountpoint) with options (a
 * sharenfs value other than "off"). Replaces an existing export of the same
 * dataset (new path or options) without unmounting it. */
int nfs_server_export(nfs_server_t *srv, dsl_pool_t *dp, const char *dsname, const char *path,
                      const char *options, char *err, size_t errlen);
/* Removes the export of dsname (waits for its running calls, unmounts).
 * -ENOENT when it is not exported. */
int nfs_server_unexport(nfs_server_t *srv, const char *dsname);
/* Suspends the exports of dataset name of pool dp and of its descendants for an
 * operation that needs them unmounted (destroy, rollback): they stay
 * listed, but calls with their handles are answered "try again later"
 * (NFS3ERR_JUKEBOX, NFS4ERR_DELAY) and MOUNT waits; returns once their running
 * calls are done and they are unmounted (one still busy stays mounted and is
 * logged). Returns how many were suspended. The caller serializes overlapping
 * suspend/resume pairs and resumes every suspension. */
int nfs_server_suspend(nfs_server_t *srv, dsl_pool_t *dp, const char *name);
/* Mounts the suspended exports of the tree again and serves them. One that cannot
 * be mounted is unexported. After a destroy, unexport them instead. */
void nfs_server_resume(nfs_server_t *srv, dsl_pool_t *dp, const char *name);
/* The dataset tree name of dp was renamed to new_name: its exports follow (same
 * mounts, same handles, same paths; a new mountpoint is the next export's business). */
void nfs_server_rename(nfs_server_t *srv, dsl_pool_t *dp, const char *name, const char *new_name);
/* Removes every export of pool dp (before the pool is exported or closed). */
void nfs_server_unexport_pool(nfs_server_t *srv, dsl_pool_t *dp);

typedef struct nfs_export_info {
    char dataset[256];
    char path[1024];
    char options[1024];       /* as given */
    uint32_t versions;        /* bit 3: NFSv3, bit 4: NFSv4 */
    uint64_t clients;         /* clients that mounted (MOUNT) or hold NFSv4 state */
    /* Since it was exported: NFSv3 calls and NFSv4 COMPOUNDs on its files (a
     * COMPOUND counts toward the share of its last current file handle), and
     * the file bytes they read and wrote. */
    uint64_t calls, read_bytes, write_bytes;
} nfs_export_info_t;
/* Fills up to cap entries in path order; returns the number of exports. */
size_t nfs_server_list_exports(nfs_server_t *srv, nfs_export_info_t *out, size_t cap);

/* What the server has done since it started, for /metrics (include/cairn/stats.h:
 * relaxed atomics, read one by one). Calls are counted once they are answered (a
 * call retried off the I/O thread counts once); NFSv4 counts the operations of
 * each COMPOUND, and index 0 of v4_ops counts operations without a name below. */
#define NFS_STATS_V3_PROCS 22
#define NFS_STATS_V4_OPS 59          /* RFC 5661's operations 3..58; 0: any other */
enum { NFS_STATS_V3, NFS_STATS_V4, NFS_STATS_VERSIONS };
typedef struct nfs_stats {
    cairn_counter_t v3_calls[NFS_STATS_V3_PROCS];
    cairn_counter_t v4_ops[NFS_STATS_V4_OPS];
    cairn_counter_t read_bytes[NFS_STATS_VERSIONS], write_bytes[NFS_STATS_VERSIONS];
    cairn_hist_t latency[NFS_STATS_VERSIONS]; /* per call (v4: per COMPOUND) */
} nfs_stats_t;
const nfs_stats_t *nfs_server_stats(const nfs_server_t *srv);
/* "WRITE", "GETATTR", ...; NULL for a number without a name. */
const char *nfs3_proc_name(uint32_t proc);
const char *nfs4_op_name(uint32_t op);

#endif
