/*
 * The iSCSI target (RFC 7143, ErrorRecoveryLevel 0, one connection per
 * session): the types and calls its files share. The work is split as SPDK's
 * lib/iscsi splits it:
 *
 *   iscsi_portal.c    the listener: accepting, the connection caps, the login
 *                     deadline, starting and stopping the server
 *   iscsi_conn.c      a connection: PDUs on its socket, the reader loop of
 *                     the full feature phase, its life from login to teardown
 *   iscsi_login.c     the login phase: stages, keys, CHAP, reinstatement
 *   iscsi_tgt_node.c  the target registry: targets, LUNs, ACLs, CHAP secrets
 *   iscsi_task.c      SCSI commands as tasks: Data-Out, R2T, the workers
 *   iscsi_tmf.c       task management and logout: aborts, the session's end
 *   iscsi_proto.c     PDU and text-key codecs, digests (iscsi_impl.h)
 *
 * Threads. One thread per connection reads PDUs and does everything that
 * must happen in arrival order: login, CmdSN ordering, Data-Out reassembly,
 * R2T issue, task management. Each normal session has its own small pool of
 * worker threads (a taskq) that run scsi_execute() and send Data-In and
 * status, so many commands are in flight per session. A READ is first tried
 * on the reader with memory_only: when its data is in memory (dirty or in the
 * ARC) it completes there, which spares the hand-off (a futex wake and two
 * context switches each way, most of what a cached 4 KiB read cost); a READ
 * that needs the disk, and every other command, goes to the workers, so the
 * reader never waits for a device (only, rarely, for metadata to load). The
 * reader reads through a per-connection buffer: one recv() for all the PDUs
 * that arrived together. We chose threads over
 * an event loop because the layers beneath (SCSI, zvol) are synchronous
 * calls that block on the disk; an event loop would need a worker pool
 * anyway, and per-connection threads make isolation simple: a hostile or
 * stalled initiator can only block its own reader and workers (sends have a
 * timeout, reads a poll with the idle timer), never another session. Hosts
 * open a handful of sessions, not thousands; what bounds the threads against
 * one that opens thousands are the connection caps (per initiator address
 * and in total, admit_conn) and the login deadline (expire_logins).
 */
#ifndef CAIRN_ISCSI_SRV_H
#define CAIRN_ISCSI_SRV_H

#include "iscsi_impl.h"

#include <cairn/connlimit.h>
#include <cairn/taskq.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define SUB "iscsi"
#define QUEUE_DEPTH 64
#define WORKERS_PER_SESSION 16
/* A READ done on the reader whose data is at least this large is sent by the
 * session's sender thread, so the reader goes on to the next command. */
#define SEND_OFFLOAD_MIN (64u * 1024)
#define MAX_EDTL (16u * 1024 * 1024)     /* one command's buffer at most */
#define LOGIN_MAX_DATA 65536             /* text of one login PDU (8192 is the rule) */
#define LOGIN_TEXT_MAX (64u * 1024)      /* accumulated over C-bit continuations */
#define IO_TIMEOUT_S 20                  /* a send or the rest of a PDU */
#define MAX_R2T 16
#define RX_BUF 65536                     /* receive buffer of a connection */
#define TX_BUF 65536                     /* replies the reader holds back, see send_pdu */
/* Replies held back while large data segments keep arriving: the
 * initiator's window moves only with them, so it must not run dry. */
#define TX_HOLD_DIRECT 16

typedef struct itarget itarget_t;
typedef struct iconn iconn_t;

struct itarget {
    char name[ISCSI_NAME_MAX + 1];
    scsi_target_t *scsi;
    char **acl;
    size_t nacl;
    char chap_user[256], chap_secret[256], mchap_user[256], mchap_secret[256];
    uint64_t *luns;
    size_t nluns;
    int refs;                 /* connections using it */
    bool dying;
    /* Statistics (iscsi_target_stats_t): relaxed atomics, added by the
     * connections holding a reference. */
    cairn_counter_t commands[ISCSI_CMD_KINDS];
    cairn_counter_t read_bytes, write_bytes;
    itarget_t *next;
};

enum task_state { T_DATA, T_QUEUED, T_RUNNING };

typedef struct r2t_slot {
    bool active;
    uint32_t ttt, off, end, next;
    uint32_t datasn;          /* expected DataSN of the next Data-Out of the burst */
} r2t_slot_t;

typedef struct itask {
    iconn_t *c;
    uint32_t itt, cmdsn;
    uint8_t lunraw[8];
    bool read, write;
    uint32_t edtl;
    uint32_t xfer;            /* what the CDB transfers */
    bool xfer_known;
    uint8_t *buf;
    uint32_t received;
    uint32_t unsol_next, unsol_end, unsol_datasn;
    uint32_t r2t_next;        /* next offset to solicit */
    uint32_t r2tsn;
    r2t_slot_t r2t[MAX_R2T];
    enum task_state state;
    bool aborted, digest_failed, prefailed, seq_failed;
    bool responding;          /* its status is going out: too late to abort */
    uint64_t start_ns;        /* arrival, for the latency statistics */
    scsi_cmd_t cmd;
    struct itask *next;
} itask_t;

struct iconn {
    iscsi_server_t *srv;
    int fd;
    char peer[64];
    /* srv->lock: the caps count this connection under addr until it is
     * evicted (then shut down, its thread on the way out). */
    conn_addr_t addr;
    bool counted, evicted;
    uint64_t login_deadline_ns;   /* the accept thread closes a login still running then */
    _Atomic uint64_t last_rx_ns;  /* the last PDU: which idle session to evict */
    struct sockaddr_storage local;
    pthread_mutex_t send_lock;
    pthread_mutex_t lock;     /* sequence numbers, tasks */
    pthread_cond_t cond;
    bool login_done, discovery, dead;
    itarget_t *tgt;
    char initiator[ISCSI_NAME_MAX + 1];
    _Atomic uint64_t an_initiator_key, an_target_key; /* analytics: name hashes, 0 until made */
    uint64_t isid;
    uint16_t tsih, cid;
    scsi_nexus_t nexus;
    char iport[ISCSI_NAME_MAX + 32], tport[ISCSI_NAME_MAX + 32];
    bool nexus_live;
    iscsi_params_t params;
    bool digests_on;
    uint32_t stat_sn;
    iscsi_cmdsn_window_t win;
    itask_t *tasks;
    taskq_t *workers;
    taskq_t *sender;          /* one thread: large cached READs' Data-In (run_on_reader) */
    uint32_t next_ttt;
    uint32_t ping_ttt;        /* outstanding target ping, 0 none */
    unsigned drops;
    /* What one recv() brought beyond the PDU being read: with many commands
     * in flight several PDUs arrive together, and one recv serves them all. */
    uint8_t rx[RX_BUF];
    uint32_t rx_pos, rx_end;
    bool rx_direct;           /* the last read from the socket went straight into place */
    /* Replies the reader made while more commands waited in rx: they go out
     * together, in one writev, before anything else is sent or the reader
     * blocks (send_lock). */
    uint8_t tx[TX_BUF];
    uint32_t tx_len;          /* send_lock: a worker's send empties it too */
    uint32_t tx_held_n;       /* send_lock: replies in tx */
    bool tx_held;             /* reader only: it held replies since its last flush */
    iconn_t *next;
};

struct iscsi_server {
    int lfd;
    int stop_pipe[2];
    pthread_t accept_thread;
    uint16_t port;
    uint32_t nop_interval_s;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    itarget_t *targets;
    iconn_t *conns;
    size_t nconns;                /* with those evicted but not gone yet */
    conn_limits_t limits;         /* lock: connections per initiator address */
    uint32_t login_timeout_s;
    scsi_alua_t alua;             /* every target's port groups (this head's and its partner's) */
    uint16_t next_tsih;
    bool stopping;
    unsigned teardown_delay_ms; /* fault injection: a connection slow to tear down */
    iscsi_stats_t stats;
};

/* How a sent PDU treats StatSN. */
enum { SN_NONE, SN_CUR, SN_ADV };

/* A PDU as received. */
typedef struct rx_pdu {
    uint8_t bhs[ISCSI_BHS_LEN];
    iscsi_bhs_info_t info;
    uint8_t *ahs;
    uint8_t *data;
    bool data_digest_bad;
} rx_pdu_t;

enum { RX_OK = 0, RX_TIMEOUT = 1 };

/* iscsi_conn.c */
int iscsi_send_pdu(iconn_t *c, uint8_t *bhs, const void *data, uint32_t dlen, int sn);
void iscsi_rx_free(rx_pdu_t *p);
int iscsi_recv_pdu(iconn_t *c, rx_pdu_t *p, int timeout_ms, uint32_t max_data);
void iscsi_send_reject(iconn_t *c, const uint8_t *bad_bhs, uint8_t reason);
void *iscsi_conn_thread(void *arg);
bool iscsi_take_cmdsn(iconn_t *c, const rx_pdu_t *p);

/* iscsi_tgt_node.c */
itarget_t *iscsi_find_target(iscsi_server_t *srv, const char *name);
bool iscsi_target_has_lun(itarget_t *t, uint64_t lun);
void iscsi_free_target(itarget_t *t);
bool iscsi_acl_allows(itarget_t *t, const char *initiator);

/* iscsi_login.c */
void iscsi_nexus_setup(iconn_t *c);
void iscsi_reinstate_old_sessions(iconn_t *c);
int iscsi_login(iconn_t *c);

/* iscsi_task.c */
void iscsi_task_free(itask_t *t);
itask_t *iscsi_task_find(iconn_t *c, uint32_t itt);
int iscsi_on_scsi_cmd(iconn_t *c, rx_pdu_t *p);
int iscsi_on_data_out(iconn_t *c, rx_pdu_t *p);

/* iscsi_portal.c */
void iscsi_conn_unlink(iscsi_server_t *srv, iconn_t *c);

/* iscsi_tmf.c */
void iscsi_wait_idle_tasks(iconn_t *c, bool (*match)(itask_t *, void *), void *arg);
void iscsi_on_tmf(iconn_t *c, rx_pdu_t *p);
void iscsi_end_nexus(iconn_t *c);
bool iscsi_on_logout(iconn_t *c, rx_pdu_t *p);

#endif
