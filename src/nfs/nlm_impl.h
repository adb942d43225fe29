/*
 * NFSv3 locking (src/nfs/nlm.c, nsm.c): the Network Lock Manager (NLM,
 * program 100021, versions 1, 3 and 4) and the Network Status Monitor (NSM,
 * program 100024), served on the NFS port and registered with the built-in
 * portmapper. NLM locks live in the NFSv4 server's lock lists (nfs4_file_t
 * locks, under nfs4_server_t.lock), so v3 and v4 locks on one file conflict
 * as one table decides; the pure rules below are what the unit tests drive.
 */
#ifndef CAIRN_NLM_IMPL_H
#define CAIRN_NLM_IMPL_H

#include "nfs4_impl.h"

#define NFS_PROG_NLM 100021u
#define NFS_PROG_NSM 100024u

enum nlm_proc {
    NLMPROC_NULL = 0, NLMPROC_TEST = 1, NLMPROC_LOCK = 2, NLMPROC_CANCEL = 3,
    NLMPROC_UNLOCK = 4, NLMPROC_GRANTED = 5, NLMPROC_TEST_MSG = 6, NLMPROC_LOCK_MSG = 7,
    NLMPROC_CANCEL_MSG = 8, NLMPROC_UNLOCK_MSG = 9, NLMPROC_GRANTED_MSG = 10,
    NLMPROC_TEST_RES = 11, NLMPROC_LOCK_RES = 12, NLMPROC_CANCEL_RES = 13,
    NLMPROC_UNLOCK_RES = 14, NLMPROC_GRANTED_RES = 15, NLMPROC_SHARE = 20,
    NLMPROC_UNSHARE = 21, NLMPROC_NM_LOCK = 22, NLMPROC_FREE_ALL = 23,
};

enum nlm_stat {
    NLM_GRANTED = 0, NLM_DENIED = 1, NLM_DENIED_NOLOCKS = 2, NLM_BLOCKED = 3,
    NLM_DENIED_GRACE_PERIOD = 4, NLM_DEADLCK = 5, NLM_ROFS = 6, NLM_STALE_FH = 7,
    NLM_FBIG = 8, NLM_FAILED = 9,
};

enum nsm_proc {
    SM_NULL = 0, SM_STAT = 1, SM_MON = 2, SM_UNMON = 3, SM_UNMON_ALL = 4, SM_SIMU_CRASH = 5,
    SM_NOTIFY = 6,
};

#define NLM_MAXSTR 1024u          /* LM_MAXSTRLEN */
#define NLM_MAXOBJ 1024u          /* netobj (file handles, owner handles, cookies) */

/* An NLM lock's offset and length (32-bit in v1/v3, 64-bit in v4) to an
 * inclusive range; length 0, and a v4 range running past 2^64, reach to the
 * end of any file, as fcntl's l_len 0 does. */
void nlm_range_from_wire(uint64_t offset, uint64_t length, uint64_t *first, uint64_t *last);
/* The reverse for a holder in a TEST reply; v1/v3 clamp to 32 bits. */
void nlm_range_to_wire(uint32_t vers, uint64_t first, uint64_t last, uint64_t *offset,
                       uint64_t *length);
/* The status a version may send: v1/v3 know GRANTED..DENIED_GRACE_PERIOD only. */
uint32_t nlm_stat_for(uint32_t vers, uint32_t stat);

/* An NLM lock owner: one process (svid) with owner handle oh on one host. */
typedef struct nlm_owner nlm_owner_t;
/* Owners outside a server, for the unit tests (and nlm.c's own). */
nlm_owner_t *nlm_owner_alloc(const char *caller, uint32_t svid, const uint8_t *oh,
                             uint32_t ohlen);
void nlm_owner_free_one(nlm_owner_t *o);

/* ---- the server side (nlm.c / nsm.c); the transport calls these ---- */
typedef struct nlm_state nlm_state_t;
typedef struct nsm_state nsm_state_t;
int nlm_init(nfs_server_t *srv, void **state);
void nlm_fini(void *state);
/* The server is stopping: what is released from now on stays monitored on disk. */
void nlm_stopping(void *state);
nfs_accept_t nlm_program(nfs_call_t *call);
nfs_accept_t nsm_program(nfs_call_t *call);
void nlm_export_removed(void *state, nfs_export_t *exp);
/* Like nfs4_records_pool_add for NLM: the pool's lock hosts that are new here
 * are sent SM_NOTIFY and the server is in grace for their reclaims. */
void nlm_records_pool_add(void *state, dsl_pool_t *dp);
void nlm_records_pool_remove(void *state, dsl_pool_t *dp);
nsm_state_t *nlm_server_nsm(nfs_server_t *srv);

/* nsm.c, used by nlm.c; every nsm_* call takes the NLM state's lock itself. */
nsm_state_t *nsm_open(const char *state_dir, bool *had_hosts);
void nsm_close(nsm_state_t *ns);
/* From now on the monitored list on disk stays as it is (server stop). */
void nsm_freeze(nsm_state_t *ns);
uint32_t nsm_state_number(nsm_state_t *ns);
/* dp keeps the host list from now on; the hosts it listed join the previous
 * run's (to be notified, in grace): how many were not there already. A pool
 * already known changes nothing (0). */
size_t nsm_pool_add(nsm_state_t *ns, dsl_pool_t *dp);
void nsm_pool_remove(nsm_state_t *ns, dsl_pool_t *dp);   /* dp NULL: all */
/* One monitored host as it is kept (state dir file, pool records): its name,
 * the address it called from, the server address it reached us on (the local
 * address of its connection or datagram: a pool's service address) and the
 * pool its latest lock is in. "" for what is not known (records written before
 * the server address and pool were kept; SM_MON). */
#define NSM_ADDR_MAX 64u
#define NSM_POOL_MAX 256u
typedef struct nsm_record {
    char name[NLM_MAXSTR + 1];
    char client[NSM_ADDR_MAX];
    char server[NSM_ADDR_MAX];
    char pool[NSM_POOL_MAX];
} nsm_record_t;
/* "NAME CLIENT SERVER POOL", "-" for a field not known: the length (as
 * snprintf), or -1 when a field holds a space or does not fit. */
int nsm_record_format(const nsm_record_t *r, char *buf, size_t len);
/* A line of that form, or of the older "NAME CLIENT" (server and pool ""): 0,
 * or -EINVAL. */
int nsm_record_parse(const char *line, nsm_record_t *r);
/* The user property, set on a pool (its root dataset), naming the server in the
 * SM_NOTIFY sent to the hosts that locked files in the pool. */
#define NSM_NOTIFY_NAME_PROP "cairn:nfs_notify_name"

/* The host holds NLM state now: monitored (persisted) with the address it
 * calls from, the server address it reached (local, NULL: not known) and the
 * pool of the file (NULL: not known). One entry per host and server address. */
void nsm_host_active(nsm_state_t *ns, const char *name, const struct sockaddr *addr,
                     const struct sockaddr *local, const char *pool);
/* The host holds nothing any more: no longer monitored. */
void nsm_host_idle(nsm_state_t *ns, const char *name);
/* After grace: forget the previous run's hosts that did not come back. */
void nsm_prune_previous(nsm_state_t *ns);
/* Calls fn for each host entry of the previous run (for SM_NOTIFY after a
 * restart): rec as kept, addr the address to call (rec->client, or the name
 * resolved). */
void nsm_foreach_previous(nsm_state_t *ns, void (*fn)(const nsm_record_t *rec,
                          const struct sockaddr_storage *addr, void *arg), void *arg);
/* For SM_NOTIFY to the hosts that locked files in pool: whether the pool is
 * served here now (true for pool ""), and its NSM_NOTIFY_NAME_PROP into name
 * ("" when unset or not served). */
bool nsm_pool_notify_name(nsm_state_t *ns, const char *pool, char *name, size_t len);
/* Adds/removes a monitor requested over SM_MON / SM_UNMON. */
void nsm_monitor(nsm_state_t *ns, const char *name, bool on);
void nsm_unmonitor_all(nsm_state_t *ns);

/* Whether a call from peer may speak for host name: its recorded address is
 * peer's (ports aside), or none is recorded. */
bool nsm_host_is(nsm_state_t *ns, const char *name, const struct sockaddr *peer);

/* nlm.c, used by nsm.c: host name, calling from peer, rebooted (SM_NOTIFY) or
 * sent FREE_ALL: drop its locks. Ignored (logged) from another address. */
void nlm_host_rebooted(nfs_server_t *srv, const char *name, const struct sockaddr *peer);

/* A synchronous ONC RPC call over TCP (AUTH_SYS), for callbacks: the port is
 * looked up in the peer's portmapper at pmap_port when port is 0. 0 and the
 * reply's result bytes in *res (caller frees), or -errno. */
int nlm_rpc_call(const struct sockaddr_storage *peer, uint16_t pmap_port, uint16_t port,
                 uint32_t prog, uint32_t vers, uint32_t proc, const uint8_t *args,
                 size_t alen, uint8_t **res, size_t *rlen);
/* The same from the local address source (NULL: any): -EADDRNOTAVAIL when
 * source is not an address of this host (a service address not up yet). */
int nlm_rpc_call_from(const struct sockaddr_storage *source,
                      const struct sockaddr_storage *peer, uint16_t pmap_port, uint16_t port,
                      uint32_t prog, uint32_t vers, uint32_t proc, const uint8_t *args,
                      size_t alen, uint8_t **res, size_t *rlen);

#endif
