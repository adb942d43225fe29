/*
 * Private to the NFS server's transport, exports, portmapper, MOUNT and NFSv3
 * (not part of the contract with nfs4_*.c, which uses nfs_impl.h only): the
 * server structure, the parsed export options, and the program entry points.
 */
#ifndef CAIRN_NFS_SRV_H
#define CAIRN_NFS_SRV_H

#include "nfs_impl.h"

#include <cairn/connlimit.h>
#include <cairn/taskq.h>

#include <pthread.h>
#include <stdatomic.h>

#define NFS_PROG_PORTMAP 100000u
#define NFS_PROG_NFS 100003u
#define NFS_PROG_MOUNT 100005u

/* Largest record accepted: a 1 MiB WRITE plus headers. Bigger: the connection closes. */
#define NFS_RECORD_MAX ((size_t)(1u << 20) + 65536u)
/* Calls one connection may have queued or running before it stops being read. */
#define NFS_CONN_INFLIGHT_MAX 64u
/* Largest READ/WRITE transfer (FSINFO rtmax/wtmax). */
#define NFS_IO_MAX ((uint32_t)1u << 20)

/* ---- export options (nfs_export.c) ---- */
typedef enum nfs_client_kind { NFS_CLIENT_ANY, NFS_CLIENT_CIDR, NFS_CLIENT_HOST } nfs_client_kind_t;

typedef struct nfs_client_match {
    nfs_client_kind_t kind;
    int family;                       /* CIDR: AF_INET or AF_INET6 */
    uint8_t addr[16];
    unsigned prefix;                  /* bits */
    char host[256];                   /* HOST: the name as written */
    struct sockaddr_storage *resolved;/* HOST: addresses at export time */
    size_t nresolved;
} nfs_client_match_t;

typedef enum nfs_squash { NFS_SQUASH_ROOT = 0, NFS_SQUASH_NONE = 1, NFS_SQUASH_ALL = 2 } nfs_squash_t;

struct nfs_export_opts {
    nfs_client_match_t *rw, *ro;
    size_t nrw, nro;
    bool rw_given, ro_given;          /* the option appeared (with or without a list) */
    nfs_squash_t squash;
    uint32_t anonuid, anongid;
    uint32_t versions;                /* bit 3 and/or bit 4 */
    bool secure;                      /* only privileged source ports (< 1024) */
};

/* Parses a sharenfs value into opts (without resolving host names). */
int nfs_opts_parse(const char *value, nfs_export_opts_t *opts, bool *shared, char *err,
                   size_t errlen);
/* Resolves host-name entries (getaddrinfo); unresolvable names match nothing. */
void nfs_opts_resolve(nfs_export_opts_t *opts);
void nfs_opts_free(nfs_export_opts_t *opts);
/* The client at addr: 0 and *writable, or -EACCES. Applies the precedence
 * explicit ro > explicit rw > bare/wildcard ro > bare/wildcard rw. */
int nfs_opts_match(const nfs_export_opts_t *opts, const struct sockaddr *addr, bool *writable);
/* The credential a call runs with after squashing. */
void nfs_opts_squash(const nfs_export_opts_t *opts, uint32_t flavor, const zpl_cred_t *in,
                     zpl_cred_t *out);

/* ---- the server ---- */
typedef struct nfs_mount_entry {
    struct nfs_mount_entry *next;
    char host[64];
    char path[1025];                  /* MNTPATHLEN + 1 */
} nfs_mount_entry_t;

/* nfs_drc.c: replies to recent non-idempotent calls, for retransmissions. */
typedef struct nfs_drc nfs_drc_t;
typedef struct nfs_drc_key {
    struct sockaddr_storage peer;
    socklen_t peer_len;
    uint32_t xid, prog, vers, proc;
    size_t args_len;
    uint64_t args_hash;
} nfs_drc_key_t;
nfs_drc_t *nfs_drc_create(void);
void nfs_drc_destroy(nfs_drc_t *d);
/* The key of a call whose args are positioned at its procedure's arguments. */
void nfs_drc_key(nfs_drc_key_t *k, const nfs_call_t *call);
/* The reply kept for k into hdr (NFS_RPC_HDR_MAX bytes)/hlen (record mark
 * and RPC header) and res (initialised here): false when there is none. */
bool nfs_drc_answer(nfs_drc_t *d, const nfs_drc_key_t *k, uint8_t *hdr, size_t *hlen,
                    nfs_xdr_t *res);
/* Keeps the reply (hdr, then body) for k, unless it is large. */
void nfs_drc_store(nfs_drc_t *d, const nfs_drc_key_t *k, const uint8_t *hdr, size_t hlen,
                   const nfs_xdr_t *body);

struct nfs_server {
    nfs_server_config_t cfg;
    int epfd;
    int wake_fd;                      /* eventfd: stop */
    int listen_fd[6];                 /* nfs v4/v6 ..; -1 unused */
    int nlisten;
    bool serving;                     /* defer_accept: nfs_server_serve was called */
    uint16_t port_nfs, port_mount, port_portmap;
    pthread_t io_thread;
    bool io_started;
    atomic_bool stopping;
    atomic_bool dead_pending;         /* a worker closed a connection */
    taskq_t *workers;
    uint64_t write_verifier;
    atomic_uint_fast64_t next_conn_id;
    nfs_stats_t stats;                /* nfs_stats.c: counters for /metrics */

    pthread_mutex_t conns_lock;       /* the live connections (for stop), limits */
    nfs_conn_t *conns;
    size_t nconns;
    conn_limits_t limits;             /* connections per client address */
    uint64_t next_sweep_ns;           /* I/O thread: next look for idle connections */
    bool accept_paused;               /* I/O thread: listeners out of the epoll set */

    pthread_mutex_t calls_lock;       /* running calls, for stop */
    pthread_cond_t calls_cv;
    uint64_t calls_running;

    pthread_mutex_t exports_lock;     /* the export list, sorted by path */
    pthread_cond_t exports_cv;        /* an export's reference count fell */
    nfs_export_t **exports;
    size_t nexports;
    pthread_mutex_t mounts_lock;      /* MOUNT's list of (client, path) */
    nfs_mount_entry_t *mounts;

    void *nfs4_state;
    nfs_drc_t *drc;                   /* nfs_drc.c */
    void *nlm_state;                  /* nlm.c: NFSv3 locking (and NSM) */
    int udp_fd[2];                    /* rpc_udp.c: portmapper and NSM over UDP */
    uint16_t udp_port[2];
    int nudp;
    uint16_t port_nfs_udp, port_pmap_udp; /* UDP on the NFS port (NLM, NSM) and the
                                             portmapper's; 0: none */
    pthread_t udp_thread;
    bool udp_started;
};

/* Programs (run on a worker). */
nfs_accept_t nfs_portmap_program(nfs_call_t *call);
nfs_accept_t nfs_mount_program(nfs_call_t *call);
nfs_accept_t nfs3_program(nfs_call_t *call);

/* Exports (nfs_export.c). */
void nfs_exports_init(nfs_server_t *srv);
void nfs_exports_fini(nfs_server_t *srv);     /* unexports all */
nfs_export_t *nfs_export_hold(nfs_export_t *exp);
uint32_t nfs_export_versions(nfs_export_t *exp);
const char *nfs_export_dataset(nfs_export_t *exp);
bool nfs_export_sync_disabled(nfs_export_t *exp);
/* The sharenfs value the export was made with. */
void nfs_export_options(nfs_export_t *exp, char *buf, size_t len);

/* Decodes one RPC record and runs the call. 1: a reply is ready (hdr[0..*hlen)
 * with the record mark, then res->buf[0..res->len)); 0: nothing to send; -1:
 * close the connection. res must be freed (nfs_xdr_free) in every case. */
#define NFS_RPC_HDR_MAX 40
int nfs_rpc_execute(nfs_conn_t *c, const uint8_t *rec, size_t len, uint8_t hdr[NFS_RPC_HDR_MAX],
                    size_t *hlen, nfs_xdr_t *res);
/* nfs_rpc_execute on a thread that must not block (the I/O thread): the
 * handler runs with memory_only and NFS_RPC_WOULD_BLOCK says it changed
 * nothing and the call must be run with nfs_rpc_execute elsewhere. */
#define NFS_RPC_WOULD_BLOCK 2
int nfs_rpc_execute_memory(nfs_conn_t *c, const uint8_t *rec, size_t len,
                           uint8_t hdr[NFS_RPC_HDR_MAX], size_t *hlen, nfs_xdr_t *res);
/* A connection without a socket, for running calls directly (unit tests, fuzzing). */
nfs_conn_t *nfs_conn_detached(nfs_server_t *srv, const struct sockaddr *peer, socklen_t plen);
void nfs_conn_detached_free(nfs_conn_t *c);

/* UDP for the portmapper and NSM (rpc_udp.c): started after the TCP listeners. */
void nfs_udp_start(nfs_server_t *srv);
void nfs_udp_stop(nfs_server_t *srv);
/* Sets the local address of a detached connection (a UDP datagram's destination). */
void nfs_conn_set_local(nfs_conn_t *c, const struct sockaddr *addr, socklen_t len);

/* The local address of a connection (where the client reached us). */
int nfs_conn_local(const nfs_conn_t *c, struct sockaddr_storage *ss, socklen_t *sl);

/* Formats addr as text without port ("127.0.0.1", "::1"). */
void nfs_addr_string(const struct sockaddr *addr, char *buf, size_t len);

#endif
