/*
 * The iSCSI target: listener, connections, login, full feature phase, and
 * the target registry (RFC 7143, ErrorRecoveryLevel 0, one connection per
 * session).
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
 *
 * Ordering on the wire. All PDUs of a connection go out under its send lock,
 * which is also where StatSN is assigned, so StatSN increases in send order;
 * ExpCmdSN/MaxCmdSN are read under the session lock at the same moment.
 * MaxCmdSN = ExpCmdSN - 1 + depth - commands in flight, so an initiator never
 * has more than `depth` commands queued at the target.
 *
 * Task life: a SCSI command becomes a task in the session's list. A write
 * stays with the reader (state DATA) until its immediate, unsolicited and
 * R2T-solicited data are complete and in order (DataPDUInOrder=Yes is all we
 * accept; anything else is a protocol error that closes the connection, so
 * no byte of the buffer is ever sent to the volume unwritten). Then it is
 * QUEUED to the workers, RUNNING, and leaves the list once its status is
 * sent. Task management runs on the reader: it marks tasks aborted, drops
 * those still collecting data, and waits until the queued and running ones
 * have left the list (their status is never sent) before answering.
 *
 * Session end. The I_T nexus ends (scsi_nexus_logout: reservation, unit
 * attentions) once the session's tasks are idle and before the Logout
 * Response goes out - an initiator may act on the response at once - or, for
 * a dropped connection, before the workers are joined.
 */
#include "iscsi_impl.h"

#include <cairn/analytics.h>
#include <cairn/connlimit.h>
#include <cairn/log.h>
#include <cairn/taskq.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

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
    uint16_t next_tsih;
    bool stopping;
    unsigned teardown_delay_ms; /* fault injection: a connection slow to tear down */
    iscsi_stats_t stats;
};

/* ================================================================= sockets */

static int send_iov(int fd, struct iovec *iov, int iovcnt)
{
    while (iovcnt) {
        ssize_t n = writev(fd, iov, iovcnt);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        while (iovcnt && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt) {
            iov->iov_base = (uint8_t *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

static int tx_flush(iconn_t *c);

/* One recv() that blocks only after the replies held back are sent: the
 * initiator may wait for them before it sends more. What the socket already
 * holds is taken without sending them, so replies to commands that arrive
 * back to back leave together. Returns the bytes received (> 0) or -errno. */
static ssize_t rx_recv(iconn_t *c, void *buf, size_t len)
{
    int flags = MSG_DONTWAIT;
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, flags);
        if (n > 0) return n;
        if (n == 0) return -ECONNRESET;
        if (errno == EINTR) continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || !flags) return -errno;
        int rc = tx_flush(c);
        if (rc) return rc;
        flags = 0;
    }
}

/* len bytes of the stream: first what the receive buffer holds, then from
 * the socket - big data segments straight into place, the rest through the
 * buffer, which keeps whatever else the same recv() returned. */
static int rx_read(iconn_t *c, void *dst, size_t len)
{
    uint8_t *d = dst;
    size_t have = c->rx_end - c->rx_pos;
    if (have) {
        size_t n = have < len ? have : len;
        memcpy(d, c->rx + c->rx_pos, n);
        c->rx_pos += (uint32_t)n;
        d += n;
        len -= n;
    }
    if (!len) return 0;
    c->rx_pos = c->rx_end = 0;
    c->rx_direct = len >= RX_BUF / 2;
    if (c->rx_direct) {
        while (len) {
            ssize_t n = rx_recv(c, d, len);
            if (n < 0) return (int)n;
            d += n;
            len -= (size_t)n;
        }
        return 0;
    }
    /* Through the buffer: the replies held so far leave first, as the
     * buffer is refilled - a batch of small commands is answered as a batch,
     * and the initiator is never left waiting for all of its window. */
    int rc = tx_flush(c);
    if (rc) return rc;
    while (len) {
        ssize_t n = rx_recv(c, c->rx, RX_BUF);
        if (n < 0) return (int)n;
        size_t take = (size_t)n < len ? (size_t)n : len;
        memcpy(d, c->rx, take);
        d += take;
        len -= take;
        c->rx_pos = (uint32_t)take;
        c->rx_end = (uint32_t)n;
    }
    return 0;
}

/* The connection whose reader is handling a command on this thread, so its
 * replies may be held back (send_pdu); NULL on workers and for PDUs whose
 * handling may wait (task management, logout). */
static __thread iconn_t *batching_conn;

/* Sends the held-back replies, then iov. send_lock held. A failed send kills
 * the connection. */
static int send_locked(iconn_t *c, const struct iovec *iov, int n)
{
    struct iovec all[6]; /* the held replies and a PDU's five parts (send_pdu) */
    int k = 0;
    if (c->tx_len) all[k++] = (struct iovec){c->tx, c->tx_len};
    for (int i = 0; i < n; i++) all[k++] = iov[i];
    int rc = k ? send_iov(c->fd, all, k) : 0;
    c->tx_len = 0;
    c->tx_held_n = 0;
    if (rc) {
        pthread_mutex_lock(&c->lock);
        c->dead = true;
        pthread_mutex_unlock(&c->lock);
        shutdown(c->fd, SHUT_RDWR);
    }
    return rc;
}

/* How a sent PDU treats StatSN. */
enum { SN_NONE, SN_CUR, SN_ADV };

/* Sends one PDU: fills StatSN (per sn) and ExpCmdSN/MaxCmdSN, adds digests. */
static int send_pdu(iconn_t *c, uint8_t *bhs, const void *data, uint32_t dlen, int sn)
{
    uint8_t pad[4] = {0}, hd[4], dd[4];
    bhs[5] = (uint8_t)(dlen >> 16);
    bhs[6] = (uint8_t)(dlen >> 8);
    bhs[7] = (uint8_t)dlen;
    pthread_mutex_lock(&c->send_lock);
    pthread_mutex_lock(&c->lock);
    if (sn != SN_NONE) iscsi_put32(bhs + 24, c->stat_sn);
    if (sn == SN_ADV) c->stat_sn++;
    iscsi_put32(bhs + 28, c->win.exp_cmdsn);
    iscsi_put32(bhs + 32, iscsi_window_max(&c->win));
    bool dead = c->dead;
    pthread_mutex_unlock(&c->lock);
    if (dead) {
        pthread_mutex_unlock(&c->send_lock);
        return -EPIPE;
    }
    struct iovec iov[5];
    int n = 0;
    iov[n++] = (struct iovec){bhs, ISCSI_BHS_LEN};
    bool digests = c->digests_on;
    if (digests && c->params.header_digest) {
        uint32_t crc = iscsi_crc32c(0, bhs, ISCSI_BHS_LEN);
        memcpy(hd, &crc, 4); /* little-endian on the wire, as RFC 3720 B.4 shows */
        iov[n++] = (struct iovec){hd, 4};
    }
    if (dlen) {
        iov[n++] = (struct iovec){(void *)data, dlen};
        uint32_t padlen = (4 - (dlen & 3)) & 3;
        if (padlen) iov[n++] = (struct iovec){pad, padlen};
        if (digests && c->params.data_digest) {
            uint32_t crc = iscsi_crc32c(0, data, dlen);
            if (padlen) crc = iscsi_crc32c(crc, pad, padlen);
            memcpy(dd, &crc, 4);
            iov[n++] = (struct iovec){dd, 4};
        }
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    /* rx and rx_direct are the reader's: only it (batching_conn) looks. */
    bool room = batching_conn == c && total <= TX_BUF - c->tx_len &&
                (!c->rx_direct || c->tx_held_n < TX_HOLD_DIRECT);
    if (room && c->rx_direct && c->rx_pos == c->rx_end) {
        /* After a large data segment, read straight into place, nothing is
         * buffered: look whether the next PDU is there. Its header is read
         * now rather than later (only the header, so that a large segment
         * after it too goes straight into place), and the reply may wait. */
        ssize_t got = recv(c->fd, c->rx, ISCSI_BHS_LEN, MSG_DONTWAIT);
        if (got > 0) {
            c->rx_pos = 0;
            c->rx_end = (uint32_t)got;
        }
    }
    if (room && c->rx_pos < c->rx_end) {
        /* The reader answers a command while more have arrived: hold the
         * reply, so one writev (and one wakeup of the initiator) carries the
         * replies to everything that arrived together. */
        for (int i = 0; i < n; i++) {
            memcpy(c->tx + c->tx_len, iov[i].iov_base, iov[i].iov_len);
            c->tx_len += (uint32_t)iov[i].iov_len;
        }
        c->tx_held = true;
        c->tx_held_n++;
        pthread_mutex_unlock(&c->send_lock);
        return 0;
    }
    int rc = send_locked(c, iov, n);
    pthread_mutex_unlock(&c->send_lock);
    return rc;
}

/* Sends what the reader held back; the reader calls it before it can block. */
static int tx_flush(iconn_t *c)
{
    /* The reader's own flag, not tx_len, which a worker may be emptying: the
     * send lock is taken only when there may be something to send. */
    if (!c->tx_held) return 0;
    c->tx_held = false;
    pthread_mutex_lock(&c->send_lock);
    int rc = send_locked(c, NULL, 0);
    pthread_mutex_unlock(&c->send_lock);
    return rc;
}

/* A PDU as received. */
typedef struct rx_pdu {
    uint8_t bhs[ISCSI_BHS_LEN];
    iscsi_bhs_info_t info;
    uint8_t *ahs;
    uint8_t *data;
    bool data_digest_bad;
} rx_pdu_t;

static void rx_free(rx_pdu_t *p)
{
    free(p->ahs);
    free(p->data);
    p->ahs = p->data = NULL;
}

enum { RX_OK = 0, RX_TIMEOUT = 1 };

/* Reads one PDU. RX_TIMEOUT when nothing arrived for timeout_ms; -EPROTO for
 * a header that cannot be trusted (bad opcode decoded: *p->bhs is valid and
 * the caller rejects; -EBADMSG header digest; -EMSGSIZE too big: the caller
 * rejects and closes); other negatives: connection gone. */
static int recv_pdu(iconn_t *c, rx_pdu_t *p, int timeout_ms, uint32_t max_data)
{
    memset(p, 0, sizeof *p);
    if (c->rx_pos == c->rx_end) { /* idle timer only when nothing is buffered */
        int frc = tx_flush(c);
        if (frc) return frc;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int pr;
        do pr = poll(&pfd, 1, timeout_ms);
        while (pr < 0 && errno == EINTR);
        if (pr < 0) return -errno;
        if (pr == 0) return RX_TIMEOUT;
    }
    int rc = rx_read(c, p->bhs, ISCSI_BHS_LEN);
    if (rc) return rc;
    int prc = iscsi_bhs_parse(p->bhs, max_data, &p->info);
    if (prc == -EMSGSIZE) return -EMSGSIZE;
    /* Before login completes nothing is worth reading on: the login fails. */
    if (prc == -EPROTO && !c->login_done) return -EPROTO;
    bool hdig = c->digests_on && c->params.header_digest;
    bool ddig = c->digests_on && c->params.data_digest;
    if (p->info.ahs_bytes) {
        p->ahs = malloc(p->info.ahs_bytes);
        if (!p->ahs) return -ENOMEM;
        if ((rc = rx_read(c, p->ahs, p->info.ahs_bytes))) return rc;
    }
    if (hdig) {
        uint32_t got, want = iscsi_crc32c(0, p->bhs, ISCSI_BHS_LEN);
        if (p->info.ahs_bytes) want = iscsi_crc32c(want, p->ahs, p->info.ahs_bytes);
        if ((rc = rx_read(c, &got, 4))) return rc;
        if (got != want) return -EBADMSG;
    }
    if (p->info.data_len) {
        p->data = malloc(p->info.data_padded);
        if (!p->data) return -ENOMEM;
        if ((rc = rx_read(c, p->data, p->info.data_padded))) return rc;
        if (ddig) {
            uint32_t got, want = iscsi_crc32c(0, p->data, p->info.data_padded);
            if ((rc = rx_read(c, &got, 4))) return rc;
            p->data_digest_bad = got != want;
        }
    }
    return prc; /* 0, or -EPROTO with the PDU consumed */
}

static void send_reject(iconn_t *c, const uint8_t *bad_bhs, uint8_t reason)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_REJECT;
    bhs[1] = 0x80;
    bhs[2] = reason;
    iscsi_put32(bhs + 16, ISCSI_RSVD_TAG);
    uint8_t copy[ISCSI_BHS_LEN];
    memcpy(copy, bad_bhs, ISCSI_BHS_LEN);
    send_pdu(c, bhs, copy, ISCSI_BHS_LEN, SN_ADV);
}

/* ================================================================ targets */

static itarget_t *find_target(iscsi_server_t *srv, const char *name)
{
    for (itarget_t *t = srv->targets; t; t = t->next)
        if (!t->dying && !strcmp(t->name, name)) return t;
    return NULL;
}

static bool target_has_lun(itarget_t *t, uint64_t lun)
{
    for (size_t i = 0; i < t->nluns; i++)
        if (t->luns[i] == lun) return true;
    return false;
}

int iscsi_target_create(iscsi_server_t *srv, const char *iqn)
{
    char err[512];
    if (iscsi_name_check(iqn, err, sizeof err)) return -EINVAL;
    itarget_t *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    cairn_strlcpy(t->name, iqn, sizeof t->name);
    t->scsi = scsi_target_create(iqn);
    if (!t->scsi) {
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_lock(&srv->lock);
    if (find_target(srv, iqn)) {
        pthread_mutex_unlock(&srv->lock);
        scsi_target_destroy(t->scsi);
        free(t);
        return -EEXIST;
    }
    t->next = srv->targets;
    srv->targets = t;
    pthread_mutex_unlock(&srv->lock);
    return 0;
}

static void free_target(itarget_t *t)
{
    for (size_t i = 0; i < t->nacl; i++) free(t->acl[i]);
    free(t->acl);
    free(t->luns);
    scsi_target_destroy(t->scsi);
    free(t);
}

/* With srv->lock held: closes the target's connections and waits for them to
 * let go of it, then unlinks it. */
static void target_kill_locked(iscsi_server_t *srv, itarget_t *t)
{
    t->dying = true;
    for (iconn_t *c = srv->conns; c; c = c->next)
        if (c->tgt == t) shutdown(c->fd, SHUT_RDWR);
    while (t->refs) pthread_cond_wait(&srv->cond, &srv->lock);
    for (itarget_t **pp = &srv->targets; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
}

int iscsi_target_destroy(iscsi_server_t *srv, const char *iqn)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    if (!t) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    if (t->nluns) {
        pthread_mutex_unlock(&srv->lock);
        return -EBUSY;
    }
    target_kill_locked(srv, t);
    pthread_mutex_unlock(&srv->lock);
    free_target(t);
    return 0;
}

int iscsi_lun_add(iscsi_server_t *srv, const char *iqn, uint64_t lun, zvol_t *zv,
                  const scsi_lu_opts_t *opts)
{
    if (lun > 16383) return -ERANGE;
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    int rc = 0;
    if (!t) rc = -ENOENT;
    else if (target_has_lun(t, lun)) rc = -EEXIST;
    uint64_t *l = rc ? NULL : realloc(t->luns, (t->nluns + 1) * sizeof *l);
    if (!rc && !l) rc = -ENOMEM;
    if (!rc) {
        t->luns = l;
        rc = scsi_lu_add(t->scsi, lun, zv, opts, NULL);
        if (!rc) t->luns[t->nluns++] = lun;
    }
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_lun_remove(iscsi_server_t *srv, const char *iqn, uint64_t lun)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    if (!t || !target_has_lun(t, lun)) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    for (size_t i = 0; i < t->nluns; i++)
        if (t->luns[i] == lun) {
            t->luns[i] = t->luns[--t->nluns];
            break;
        }
    t->refs++; /* keeps the target while we wait unlocked */
    pthread_mutex_unlock(&srv->lock);
    int rc = scsi_lu_remove(t->scsi, lun);
    pthread_mutex_lock(&srv->lock);
    t->refs--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    return rc == -ENOENT ? 0 : rc;
}

void iscsi_lun_capacity_changed(iscsi_server_t *srv, const char *iqn, uint64_t lun)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    if (t && target_has_lun(t, lun)) scsi_lu_capacity_changed(t->scsi, lun);
    pthread_mutex_unlock(&srv->lock);
}

int iscsi_acl_add(iscsi_server_t *srv, const char *iqn, const char *initiator)
{
    char err[512];
    if (iscsi_name_check(initiator, err, sizeof err)) return -EINVAL;
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    int rc = 0;
    if (!t) rc = -ENOENT;
    for (size_t i = 0; !rc && i < t->nacl; i++)
        if (!strcmp(t->acl[i], initiator)) rc = -EEXIST;
    if (!rc) {
        char **a = realloc(t->acl, (t->nacl + 1) * sizeof *a);
        char *s = strdup(initiator);
        if (a) t->acl = a;
        if (!a || !s) {
            free(s);
            rc = -ENOMEM;
        } else {
            t->acl[t->nacl++] = s;
        }
    }
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_acl_remove(iscsi_server_t *srv, const char *iqn, const char *initiator)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    int rc = -ENOENT;
    for (size_t i = 0; t && i < t->nacl; i++)
        if (!strcmp(t->acl[i], initiator)) {
            free(t->acl[i]);
            t->acl[i] = t->acl[--t->nacl];
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&srv->lock);
    return rc;
}

int iscsi_chap_set(iscsi_server_t *srv, const char *iqn, const char *user, const char *secret,
                   const char *muser, const char *msecret)
{
    if (user && (!secret || strlen(user) >= 256 || strlen(secret) >= 256 || !*user)) return -EINVAL;
    if (muser && (!user || !msecret || strlen(muser) >= 256 || strlen(msecret) >= 256 || !*muser))
        return -EINVAL;
    if (muser && secret && !strcmp(secret, msecret)) return -EINVAL; /* RFC 7143 12.1.3 */
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    if (!t) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    cairn_strlcpy(t->chap_user, user ? user : "", sizeof t->chap_user);
    cairn_strlcpy(t->chap_secret, user ? secret : "", sizeof t->chap_secret);
    cairn_strlcpy(t->mchap_user, muser ? muser : "", sizeof t->mchap_user);
    cairn_strlcpy(t->mchap_secret, muser ? msecret : "", sizeof t->mchap_secret);
    pthread_mutex_unlock(&srv->lock);
    return 0;
}

int iscsi_target_sessions(iscsi_server_t *srv, const char *iqn, iscsi_session_info_t *out,
                          size_t cap)
{
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = find_target(srv, iqn);
    if (!t) {
        pthread_mutex_unlock(&srv->lock);
        return -ENOENT;
    }
    int n = 0;
    for (iconn_t *c = srv->conns; c; c = c->next) {
        if (c->tgt != t || !c->login_done || c->discovery) continue;
        if ((size_t)n < cap) {
            cairn_strlcpy(out[n].initiator, c->initiator, sizeof out[n].initiator);
            cairn_strlcpy(out[n].peer, c->peer, sizeof out[n].peer);
            out[n].isid = c->isid;
            out[n].tsih = c->tsih;
        }
        n++;
    }
    pthread_mutex_unlock(&srv->lock);
    return n;
}

/* ================================================================== login */

typedef struct login_state {
    bool started;
    int csg;                   /* current stage */
    bool auth_done;            /* security stage passed (or not needed) */
    bool chap_chosen;
    bool chap_challenged;
    uint8_t chap_id;
    uint8_t chap_challenge[ISCSI_CHAP_CHALLENGE_LEN];
    bool declared_mrdsl, sent_tpgt;
    uint8_t *text;             /* accumulated across C-bit PDUs */
    size_t text_len;
    char target_name[ISCSI_NAME_MAX + 1];
    char chap_user[256], chap_secret[256], mchap_user[256], mchap_secret[256];
    bool need_chap;
} login_state_t;

static void random_bytes(uint8_t *p, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    if (fd >= 0) {
        while (got < n) {
            ssize_t r = read(fd, p + got, n - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        close(fd);
    }
    for (; got < n; got++) p[got] = (uint8_t)(rand() ^ (int)got); /* never reached in practice */
}

static bool acl_allows(itarget_t *t, const char *initiator)
{
    if (!t->nacl) return true;
    for (size_t i = 0; i < t->nacl; i++)
        if (!strcmp(t->acl[i], initiator)) return true;
    return false;
}

static void send_login_rsp(iconn_t *c, const uint8_t *req, bool transit, int csg, int nsg,
                           uint16_t status, const iscsi_kv_out_t *kv)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_LOGIN_RSP;
    bhs[1] = (uint8_t)((transit ? 0x80 : 0) | (csg & 3) << 2 | (transit ? (nsg & 3) : 0));
    bhs[2] = 0; /* version max */
    bhs[3] = 0; /* version active */
    memcpy(bhs + 8, req + 8, 6);                /* ISID */
    iscsi_put16(bhs + 14, status ? 0 : c->tsih);
    memcpy(bhs + 16, req + 16, 4);              /* ITT */
    bhs[36] = (uint8_t)(status >> 8);
    bhs[37] = (uint8_t)status;
    send_pdu(c, bhs, kv ? kv->buf : NULL, kv ? (uint32_t)kv->len : 0, SN_ADV);
}

/* Handles the keys of a complete login request (all continuations joined).
 * Returns a login status; *transit says whether we move on to stage nsg. */
static uint16_t login_keys(iconn_t *c, login_state_t *ls, bool t_bit, int nsg,
                           iscsi_kv_out_t *out, bool *transit)
{
    iscsi_server_t *srv = c->srv;
    iscsi_kv_iter_t it;
    if (iscsi_kv_iter_init(&it, ls->text, ls->text_len)) return ISCSI_LOGIN_OUT_OF_RESOURCES;
    const char *k, *v;
    int r;
    uint16_t status = 0;
    const char *auth_methods = NULL, *chap_a = NULL, *chap_n = NULL, *chap_r = NULL;
    const char *chap_i = NULL, *chap_c = NULL;
    const char *initiator = NULL, *target = NULL, *session_type = NULL;
    while ((r = iscsi_kv_next(&it, &k, &v)) > 0) {
        if (!strcmp(k, "InitiatorName")) initiator = v;
        else if (!strcmp(k, "TargetName")) target = v;
        else if (!strcmp(k, "SessionType")) session_type = v;
        else if (!strcmp(k, "InitiatorAlias") || !strcmp(k, "TargetAlias")) continue;
        else if (!strcmp(k, "AuthMethod")) auth_methods = v;
        else if (!strcmp(k, "CHAP_A")) chap_a = v;
        else if (!strcmp(k, "CHAP_N")) chap_n = v;
        else if (!strcmp(k, "CHAP_R")) chap_r = v;
        else if (!strcmp(k, "CHAP_I")) chap_i = v;
        else if (!strcmp(k, "CHAP_C")) chap_c = v;
        else {
            int nr = iscsi_param_negotiate(&c->params, k, v, out);
            if (nr < 0) {
                status = ISCSI_LOGIN_INITIATOR_ERROR;
                goto done;
            }
            if (nr > 0) iscsi_kv_add(out, k, "NotUnderstood");
        }
    }
    if (r < 0) {
        status = ISCSI_LOGIN_INITIATOR_ERROR;
        goto done;
    }

    if (!ls->started) {
        ls->started = true;
        if (!initiator || !*initiator) { status = ISCSI_LOGIN_MISSING_PARAMETER; goto done; }
        char err[512];
        if (strlen(initiator) > ISCSI_NAME_MAX) { status = ISCSI_LOGIN_INITIATOR_ERROR; goto done; }
        (void)err;
        cairn_strlcpy(c->initiator, initiator, sizeof c->initiator);
        if (session_type && !strcmp(session_type, "Discovery")) {
            c->discovery = true;
        } else if (session_type && strcmp(session_type, "Normal")) {
            status = ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED;
            goto done;
        }
        if (!c->discovery) {
            if (!target) { status = ISCSI_LOGIN_MISSING_PARAMETER; goto done; }
            pthread_mutex_lock(&srv->lock);
            itarget_t *t = find_target(srv, target);
            if (!t) {
                status = ISCSI_LOGIN_NOT_FOUND;
            } else if (!acl_allows(t, initiator)) {
                status = ISCSI_LOGIN_FORBIDDEN;
            } else {
                t->refs++;
                c->tgt = t;
                cairn_strlcpy(ls->target_name, t->name, sizeof ls->target_name);
                cairn_strlcpy(ls->chap_user, t->chap_user, sizeof ls->chap_user);
                cairn_strlcpy(ls->chap_secret, t->chap_secret, sizeof ls->chap_secret);
                cairn_strlcpy(ls->mchap_user, t->mchap_user, sizeof ls->mchap_user);
                cairn_strlcpy(ls->mchap_secret, t->mchap_secret, sizeof ls->mchap_secret);
                ls->need_chap = t->chap_user[0] != '\0';
            }
            pthread_mutex_unlock(&srv->lock);
            if (status) goto done;
        }
        if (!ls->need_chap) ls->auth_done = true;
        if (!c->discovery && !ls->sent_tpgt) {
            iscsi_kv_add(out, "TargetPortalGroupTag", "1");
            ls->sent_tpgt = true;
        }
    }

    if (ls->csg == 0) {
        if (auth_methods) {
            bool has_chap = false, has_none = false;
            char list[256];
            cairn_strlcpy(list, auth_methods, sizeof list);
            char *save = NULL;
            for (char *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
                if (!strcmp(m, "CHAP")) has_chap = true;
                if (!strcmp(m, "None")) has_none = true;
            }
            if (ls->need_chap) {
                if (!has_chap) {
                    iscsi_kv_add(out, "AuthMethod", "Reject");
                    status = ISCSI_LOGIN_AUTH_FAILED;
                    goto done;
                }
                ls->chap_chosen = true;
                iscsi_kv_add(out, "AuthMethod", "CHAP");
            } else if (has_none) {
                iscsi_kv_add(out, "AuthMethod", "None");
                ls->auth_done = true;
            } else {
                iscsi_kv_add(out, "AuthMethod", "Reject");
                status = ISCSI_LOGIN_AUTH_FAILED;
                goto done;
            }
        }
        if (chap_a) {
            if (!ls->chap_chosen) { status = ISCSI_LOGIN_INITIATOR_ERROR; goto done; }
            bool md5 = false;
            char list[256];
            cairn_strlcpy(list, chap_a, sizeof list);
            char *save = NULL;
            for (char *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save))
                if (!strcmp(m, "5")) md5 = true;
            if (!md5) {
                iscsi_kv_add(out, "CHAP_A", "Reject");
                status = ISCSI_LOGIN_AUTH_FAILED;
                goto done;
            }
            random_bytes(&ls->chap_id, 1);
            random_bytes(ls->chap_challenge, sizeof ls->chap_challenge);
            char idbuf[8], cbuf[2 * ISCSI_CHAP_CHALLENGE_LEN + 3];
            snprintf(idbuf, sizeof idbuf, "%u", ls->chap_id);
            iscsi_chap_encode_hex(ls->chap_challenge, sizeof ls->chap_challenge, cbuf, sizeof cbuf);
            iscsi_kv_add(out, "CHAP_A", "5");
            iscsi_kv_add(out, "CHAP_I", idbuf);
            iscsi_kv_add(out, "CHAP_C", cbuf);
            ls->chap_challenged = true;
        }
        if (chap_n || chap_r) {
            if (!ls->chap_challenged || !chap_n || !chap_r) {
                status = ISCSI_LOGIN_AUTH_FAILED;
                goto done;
            }
            uint8_t got[64], want[16];
            int glen = iscsi_chap_decode(chap_r, got, sizeof got);
            iscsi_chap_response(ls->chap_id, ls->chap_secret, ls->chap_challenge,
                                sizeof ls->chap_challenge, want);
            if (strcmp(chap_n, ls->chap_user) || glen != 16 || memcmp(got, want, 16)) {
                log_info(SUB, "CHAP authentication of %s (%s) failed", c->initiator, c->peer);
                status = ISCSI_LOGIN_AUTH_FAILED;
                goto done;
            }
            if (chap_i || chap_c) { /* mutual: the initiator challenges us */
                uint8_t ichal[1024];
                int clen = chap_c ? iscsi_chap_decode(chap_c, ichal, sizeof ichal) : -1;
                char *end = NULL;
                unsigned long id = chap_i ? strtoul(chap_i, &end, 0) : 256;
                if (!ls->mchap_user[0] || clen <= 0 || !end || *end || id > 255 ||
                    ((size_t)clen == sizeof ls->chap_challenge &&
                     !memcmp(ichal, ls->chap_challenge, (size_t)clen))) {
                    status = ISCSI_LOGIN_AUTH_FAILED;
                    goto done;
                }
                uint8_t resp[16];
                char rbuf[40];
                iscsi_chap_response((uint8_t)id, ls->mchap_secret, ichal, (size_t)clen, resp);
                iscsi_chap_encode_hex(resp, sizeof resp, rbuf, sizeof rbuf);
                iscsi_kv_add(out, "CHAP_N", ls->mchap_user);
                iscsi_kv_add(out, "CHAP_R", rbuf);
            }
            ls->auth_done = true;
        }
    } else if (ls->csg == 1) {
        if (auth_methods || chap_a || chap_n || chap_r) {
            status = ISCSI_LOGIN_INITIATOR_ERROR;
            goto done;
        }
        if (!ls->declared_mrdsl) {
            char buf[16];
            snprintf(buf, sizeof buf, "%" PRIu32, c->params.max_recv_dsl_target);
            iscsi_kv_add(out, "MaxRecvDataSegmentLength", buf);
            ls->declared_mrdsl = true;
        }
    }

    *transit = false;
    if (t_bit) {
        if (nsg <= ls->csg || nsg == 2) {
            status = ISCSI_LOGIN_INITIATOR_ERROR;
            goto done;
        }
        if (ls->csg == 0 && !ls->auth_done) {
            /* CHAP still in progress: stay in the security stage. */
            if (!ls->chap_chosen || (!ls->chap_challenged && !chap_a && !auth_methods)) {
                status = ISCSI_LOGIN_AUTH_FAILED;
                goto done;
            }
        } else {
            *transit = true;
        }
    }
done:
    iscsi_kv_iter_fini(&it);
    return status;
}

static void nexus_setup(iconn_t *c)
{
    snprintf(c->iport, sizeof c->iport, "%s,i,0x%012" PRIx64, c->initiator, c->isid);
    snprintf(c->tport, sizeof c->tport, "%s,t,0x0001", c->tgt->name);
    c->nexus = (scsi_nexus_t){.initiator = c->iport, .target_port = c->tport, .rel_port_id = 1,
                              .nexus_id = (uint64_t)c->tsih << 48 | c->isid};
}

/* Session reinstatement (RFC 7143 6.3.5): a leading login with an ISID an
 * existing session of this initiator and target uses replaces that session. */
static void reinstate_old_sessions(iconn_t *c)
{
    iscsi_server_t *srv = c->srv;
    pthread_mutex_lock(&srv->lock);
    for (iconn_t *o = srv->conns; o; o = o->next)
        if (o != c && o->login_done && !o->discovery && o->tgt == c->tgt && o->isid == c->isid &&
            !strcmp(o->initiator, c->initiator))
            shutdown(o->fd, SHUT_RDWR);
    pthread_mutex_unlock(&srv->lock);
}

/* Runs the login phase. 0 when the connection is in full feature phase. */
static int do_login(iconn_t *c)
{
    login_state_t ls = {.csg = -1};
    iscsi_params_defaults(&c->params);
    int rc = -EPROTO;
    for (;;) {
        rx_pdu_t p;
        int r = recv_pdu(c, &p, IO_TIMEOUT_S * 1000, LOGIN_MAX_DATA);
        if (r == RX_TIMEOUT || (r < 0 && r != -EPROTO)) {
            rx_free(&p);
            break;
        }
        if (r == -EPROTO || p.info.opcode != ISCSI_OP_LOGIN_REQ) {
            /* Anything but a login request during login ends it (RFC 7143 6.x). */
            uint8_t fake[ISCSI_BHS_LEN] = {0};
            memcpy(fake, p.bhs, ISCSI_BHS_LEN);
            send_login_rsp(c, fake, false, 0, 0, ISCSI_LOGIN_INVALID_DURING_LOGIN, NULL);
            rx_free(&p);
            break;
        }
        const uint8_t *b = p.bhs;
        bool t_bit = b[1] & 0x80, c_bit = b[1] & 0x40;
        int csg = (b[1] >> 2) & 3, nsg = b[1] & 3;
        uint16_t status = 0;
        iscsi_kv_out_t out = {0};
        bool transit = false;
        if (ls.csg < 0) { /* leading PDU */
            c->isid = iscsi_get64(b + 8) >> 16;
            c->tsih = iscsi_get16(b + 14);
            c->cid = iscsi_get16(b + 20);
            c->stat_sn = iscsi_get32(b + 28);
            c->win.exp_cmdsn = iscsi_get32(b + 24);
            c->win.depth = QUEUE_DEPTH;
            if (b[3] > 0 || b[2] < b[3]) status = ISCSI_LOGIN_UNSUPPORTED_VERSION;
            else if (csg != 0 && csg != 1) status = ISCSI_LOGIN_INITIATOR_ERROR;
            else if (c->tsih != 0) {
                /* MaxConnections=1: no connection joins an existing session. */
                pthread_mutex_lock(&c->srv->lock);
                bool exists = false;
                for (iconn_t *o = c->srv->conns; o; o = o->next)
                    if (o != c && o->tsih == c->tsih && o->login_done) exists = true;
                pthread_mutex_unlock(&c->srv->lock);
                status = exists ? ISCSI_LOGIN_TOO_MANY_CONNECTIONS
                                : ISCSI_LOGIN_SESSION_DOES_NOT_EXIST;
            }
            ls.csg = csg;
        } else if (csg != ls.csg || (t_bit && c_bit)) {
            status = ISCSI_LOGIN_INITIATOR_ERROR;
        }
        if (!status && p.info.data_len) {
            if (ls.text_len + p.info.data_len > LOGIN_TEXT_MAX) {
                status = ISCSI_LOGIN_OUT_OF_RESOURCES;
            } else {
                uint8_t *nt = realloc(ls.text, ls.text_len + p.info.data_len);
                if (!nt) status = ISCSI_LOGIN_OUT_OF_RESOURCES;
                else {
                    memcpy(nt + ls.text_len, p.data, p.info.data_len);
                    ls.text = nt;
                    ls.text_len += p.info.data_len;
                }
            }
        }
        if (!status && c_bit) { /* more text follows: acknowledge with an empty response */
            send_login_rsp(c, b, false, ls.csg, 0, 0, NULL);
            rx_free(&p);
            continue;
        }
        if (!status) {
            if (csg == 1 && !ls.auth_done && ls.need_chap) status = ISCSI_LOGIN_AUTH_FAILED;
            else {
                bool first = !ls.started;
                status = login_keys(c, &ls, t_bit, nsg, &out, &transit);
                if (first && !status && csg == 1 && ls.need_chap) status = ISCSI_LOGIN_AUTH_FAILED;
                if (first && !status && csg == 1) ls.auth_done = true;
            }
        }
        free(ls.text);
        ls.text = NULL;
        ls.text_len = 0;
        if (status) {
            log_info(SUB, "login of %s from %s refused: status 0x%04x", c->initiator[0] ? c->initiator : "?",
                     c->peer, status);
            send_login_rsp(c, b, false, ls.csg, 0, status, NULL);
            iscsi_kv_out_free(&out);
            rx_free(&p);
            break;
        }
        if (transit && nsg == 3) {
            if (c->params.first_burst > c->params.max_burst) c->params.first_burst = c->params.max_burst;
            pthread_mutex_lock(&c->srv->lock);
            if (++c->srv->next_tsih == 0) c->srv->next_tsih = 1;
            c->tsih = c->srv->next_tsih;
            pthread_mutex_unlock(&c->srv->lock);
            send_login_rsp(c, b, true, ls.csg, nsg, 0, &out);
            iscsi_kv_out_free(&out);
            rx_free(&p);
            rc = 0;
            break;
        }
        send_login_rsp(c, b, transit, ls.csg, nsg, 0, &out);
        if (transit) ls.csg = nsg;
        iscsi_kv_out_free(&out);
        rx_free(&p);
    }
    free(ls.text);
    return rc;
}

/* ============================================================ full feature */

static void task_free(itask_t *t)
{
    free(t->buf);
    free(t);
}

/* With c->lock held. */
static void task_unlink(iconn_t *c, itask_t *t)
{
    for (itask_t **pp = &c->tasks; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    if (c->win.in_flight) c->win.in_flight--;
    pthread_cond_broadcast(&c->cond);
}

static itask_t *task_find(iconn_t *c, uint32_t itt)
{
    for (itask_t *t = c->tasks; t; t = t->next)
        if (t->itt == itt) return t;
    return NULL;
}

static void send_status(iconn_t *c, itask_t *t)
{
    scsi_cmd_t *cmd = &t->cmd;
    uint32_t sent = 0;
    uint8_t flags = 0;
    uint32_t residual = 0;
    bool good = cmd->status == SCSI_STATUS_GOOD || cmd->status == SCSI_STATUS_CONDITION_MET;
    if (t->read && good) sent = cmd->data_in_len;
    /* Residuals against what the initiator expected (RFC 7143 11.4.5). */
    if (t->read) {
        if (t->xfer_known && t->xfer > t->edtl) {
            flags |= 0x04;
            residual = t->xfer - t->edtl;
        } else if (good && sent < t->edtl) {
            flags |= 0x02;
            residual = t->edtl - sent;
        }
    } else if (t->write || t->edtl) {
        uint32_t want = t->xfer_known ? t->xfer : t->edtl;
        if (want > t->edtl) {
            flags |= 0x04;
            residual = want - t->edtl;
        } else if (want < t->edtl) {
            flags |= 0x02;
            residual = t->edtl - want;
        }
    } else if (t->xfer_known && t->xfer) {
        flags |= 0x04;
        residual = t->xfer;
    }
    uint32_t mrdsl = c->params.max_recv_dsl_initiator;
    uint32_t burst = c->params.max_burst;
    bool status_in_data = sent > 0 && cmd->sense_len == 0;
    uint32_t datasn = 0;
    for (uint32_t off = 0; off < sent;) {
        uint32_t len = sent - off;
        uint32_t burst_left = burst - (off % burst);
        if (len > mrdsl) len = mrdsl;
        if (len > burst_left) len = burst_left;
        bool last = off + len == sent;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = ISCSI_OP_DATA_IN;
        bhs[1] = (uint8_t)((last || len == burst_left) ? 0x80 : 0);
        iscsi_put32(bhs + 16, t->itt);
        iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
        iscsi_put32(bhs + 36, datasn++);
        iscsi_put32(bhs + 40, off);
        int sn = SN_NONE;
        if (last && status_in_data) {
            bhs[1] |= 0x01 | flags;
            bhs[3] = cmd->status;
            iscsi_put32(bhs + 44, residual);
            sn = SN_ADV;
        } else {
            memcpy(bhs + 8, t->lunraw, 8);
        }
        if (send_pdu(c, bhs, cmd->data_in + off, len, sn)) return;
        off += len;
    }
    if (status_in_data) return;
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_SCSI_RSP;
    bhs[1] = 0x80 | flags;
    bhs[2] = 0;
    bhs[3] = cmd->status;
    iscsi_put32(bhs + 16, t->itt);
    iscsi_put32(bhs + 36, datasn);
    iscsi_put32(bhs + 44, residual);
    uint8_t sense[2 + SCSI_SENSE_MAX];
    uint32_t slen = 0;
    if (cmd->sense_len) {
        uint32_t n = cmd->sense_len > SCSI_SENSE_MAX ? SCSI_SENSE_MAX : cmd->sense_len;
        iscsi_put16(sense, (uint16_t)n);
        memcpy(sense + 2, cmd->sense, n);
        slen = n + 2;
    }
    send_pdu(c, bhs, sense, slen, SN_ADV);
}

/* Statistics (iscsi_stats_t): a command counts once its status is sent. */
static unsigned command_kind(uint8_t opcode)
{
    switch (opcode) {
    case 0x08: case 0x28: case 0xa8: case 0x88: return ISCSI_CMD_READ;
    case 0x0a: case 0x2a: case 0xaa: case 0x8a:
    case 0x2e: case 0xae: case 0x8e: return ISCSI_CMD_WRITE;
    default: return ISCSI_CMD_OTHER;
    }
}

/* Adds n to c unless it is 0 (an atomic add of nothing still takes the line). */
static void add_nonzero(cairn_counter_t *c, uint64_t n)
{
    if (n) cairn_counter_add(c, n);
}

/* Analytics (include/cairn/analytics.h): iscsi.ops by command, initiator,
 * target and LUN, latency and size; net.bytes. The names' hashes are made once
 * per connection. */
typedef struct lun_name {
    const char *target;
    uint64_t lun;
} lun_name_t;

static void name_target_lun(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)key;
    const lun_name_t *l = arg;
    snprintf(buf, len, "%s lun %llu", l->target, (unsigned long long)l->lun);
}

static void name_command(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    snprintf(buf, len, "opcode 0x%02x", (unsigned)(key & 0xff));
}

static void name_net(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    cairn_strlcpy(buf, key ? "iscsi write" : "iscsi read", len);
}

static uint64_t memo_hash(_Atomic uint64_t *memo, const char *s)
{
    uint64_t h = atomic_load_explicit(memo, memory_order_relaxed);
    if (!h) {
        h = an_hash(s, strlen(s)) | 1;
        atomic_store_explicit(memo, h, memory_order_relaxed);
    }
    return h;
}

static void record_analytics(iconn_t *c, const itask_t *t, uint64_t ns)
{
    if (!an_stat_enabled(AN_ISCSI_OPS)) return;
    an_add_total(AN_ISCSI_OPS, 1);
    uint64_t key;
    const char *name = scsi_command_name(t->cmd.cdb, &key);
    an_add(AN_ISCSI_OPS, AN_BY_OP, key, 1, name ? an_name_string : name_command, name);
    an_add(AN_ISCSI_OPS, AN_BY_INITIATOR, memo_hash(&c->an_initiator_key, c->initiator), 1,
           an_name_string, c->initiator);
    if (c->tgt) {
        lun_name_t ln = {c->tgt->name, t->cmd.lun};
        an_add(AN_ISCSI_OPS, AN_BY_TARGET,
               memo_hash(&c->an_target_key, c->tgt->name) ^ t->cmd.lun * 0x9e3779b97f4a7c15ull, 1,
               name_target_lun, &ln);
    }
    an_add_latency(AN_ISCSI_OPS, ns, 1);
    an_add_size(AN_ISCSI_OPS, t->cmd.data_in_len + t->cmd.data_out_len, 1);
    if (t->cmd.data_in_len) {
        an_add_total(AN_NET_BYTES, t->cmd.data_in_len);
        an_add(AN_NET_BYTES, AN_BY_PROTOCOL, 0, t->cmd.data_in_len, name_net, NULL);
    }
    if (t->cmd.data_out_len) {
        an_add_total(AN_NET_BYTES, t->cmd.data_out_len);
        an_add(AN_NET_BYTES, AN_BY_PROTOCOL, 1, t->cmd.data_out_len, name_net, NULL);
    }
}

static void count_command(iconn_t *c, const itask_t *t)
{
    iscsi_stats_t *s = &c->srv->stats;
    itarget_t *tgt = c->tgt;
    unsigned kind = command_kind(t->cmd.cdb[0]);
    uint64_t ns = cairn_now_ns() - t->start_ns;
    cairn_counter_add(&s->commands[kind], 1);
    add_nonzero(&s->read_bytes, t->cmd.data_in_len);
    add_nonzero(&s->write_bytes, t->cmd.data_out_len);
    cairn_hist_record(&s->latency, ns);
    record_analytics(c, t, ns);
    if (!tgt) return;
    cairn_counter_add(&tgt->commands[kind], 1);
    add_nonzero(&tgt->read_bytes, t->cmd.data_in_len);
    add_nonzero(&tgt->write_bytes, t->cmd.data_out_len);
}

size_t iscsi_server_target_stats(iscsi_server_t *srv, iscsi_target_stats_t *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&srv->lock);
    for (itarget_t *t = srv->targets; t; t = t->next, n++) {
        if (n >= cap) continue;
        iscsi_target_stats_t *o = &out[n];
        cairn_strlcpy(o->name, t->name, sizeof o->name);
        for (unsigned k = 0; k < ISCSI_CMD_KINDS; k++)
            o->commands[k] = cairn_counter_get(&t->commands[k]);
        o->read_bytes = cairn_counter_get(&t->read_bytes);
        o->write_bytes = cairn_counter_get(&t->write_bytes);
    }
    pthread_mutex_unlock(&srv->lock);
    return n;
}

const iscsi_stats_t *iscsi_server_stats(const iscsi_server_t *srv)
{
    return &srv->stats;
}

/* The end of every task that reached a thread: its status when responding
 * (decided by the caller under the session lock, so an abort either stopped
 * it or finds it answering), then it goes. */
static void respond_and_free(iconn_t *c, itask_t *t)
{
    if (t->responding) {
        send_status(c, t);
        count_command(c, t);
    }
    pthread_mutex_lock(&c->lock);
    task_unlink(c, t);
    pthread_mutex_unlock(&c->lock);
    task_free(t);
}

static void run_task(void *arg)
{
    itask_t *t = arg;
    iconn_t *c = t->c;
    pthread_mutex_lock(&c->lock);
    bool skip = t->aborted || c->dead;
    if (!skip) t->state = T_RUNNING;
    pthread_mutex_unlock(&c->lock);
    if (!skip) {
        if (t->digest_failed) { /* PROTOCOL SERVICE CRC ERROR */
            scsi_set_sense(&t->cmd, SCSI_SENSE_ABORTED_COMMAND, 0x47, 0x05);
        } else if (t->seq_failed) { /* DATA PHASE ERROR */
            scsi_set_sense(&t->cmd, SCSI_SENSE_ABORTED_COMMAND, 0x4b, 0x00);
        } else if (!t->prefailed) {
            scsi_execute(c->tgt->scsi, &t->cmd);
        }
        pthread_mutex_lock(&c->lock);
        t->responding = !t->aborted;
        pthread_mutex_unlock(&c->lock);
    }
    respond_and_free(c, t);
}

static void send_task(void *arg)
{
    itask_t *t = arg;
    respond_and_free(t->c, t);
}

/* A READ or WRITE tried on the reader thread itself: done here when it needs
 * no device and no wait (data in memory; a write without FUA whose partial
 * records are in memory), with no hand-off and no wakeup; false when it would
 * wait (nothing has happened) and goes to the workers. TMFs of this
 * connection run on this same thread, so only another session's reset or
 * CLEAR TASK SET can abort it: checked as the workers do, before it runs.
 *
 * A large READ's Data-In is sent by the session's sender thread instead: the
 * send (the socket's copy and, over loopback, the receiving side's TCP work
 * too) is most of a cached 128 KiB read, and with it on the reader a session's
 * reads ran on one vCPU. The task stays linked and running until it is sent,
 * so an abort, a logout and the connection's end wait for it as for a worker's
 * task; its status is decided (responding) before the hand-off. */
static bool run_on_reader(iconn_t *c, itask_t *t)
{
    pthread_mutex_lock(&c->lock);
    bool aborted = t->aborted;
    t->state = T_RUNNING;
    pthread_mutex_unlock(&c->lock);
    if (aborted) {
        respond_and_free(c, t); /* not responding: nothing is sent */
        return true;
    }
    t->cmd.memory_only = true;
    scsi_execute(c->tgt->scsi, &t->cmd);
    t->cmd.memory_only = false;
    if (t->cmd.would_block) return false;
    pthread_mutex_lock(&c->lock);
    t->responding = !t->aborted;
    pthread_mutex_unlock(&c->lock);
    if (t->responding && t->read && c->sender && t->cmd.data_in_len >= SEND_OFFLOAD_MIN) {
        taskq_dispatch(c->sender, send_task, t, NULL);
        return true;
    }
    respond_and_free(c, t);
    return true;
}

static void dispatch(iconn_t *c, itask_t *t)
{
    pthread_mutex_lock(&c->lock);
    t->state = T_QUEUED;
    pthread_mutex_unlock(&c->lock);
    if (t->write) {
        t->cmd.data_out = t->buf;
        /* Everything the initiator sent: the SCSI layer judges a length that
         * does not fit the CDB (WRITE SAME with two blocks, say). */
        t->cmd.data_out_len = t->edtl;
    }
    taskq_dispatch(c->workers, run_task, t, NULL);
}

/* A write whose data is all here: on the reader when it needs no device and
 * no wait, else on the workers (which also answer digest and sequence errors). */
static void dispatch_write(iconn_t *c, itask_t *t)
{
    if (!t->digest_failed && !t->seq_failed && !t->prefailed) {
        t->cmd.data_out = t->buf;
        t->cmd.data_out_len = t->edtl;
        if (run_on_reader(c, t)) return;
    }
    dispatch(c, t);
}

/* Sends R2Ts while slots are free and data is still to be solicited. */
static int issue_r2ts(iconn_t *c, itask_t *t)
{
    uint32_t maxr2t = c->params.max_outstanding_r2t;
    if (maxr2t > MAX_R2T) maxr2t = MAX_R2T;
    for (uint32_t i = 0; i < maxr2t && t->r2t_next < t->edtl; i++) {
        r2t_slot_t *s = &t->r2t[i];
        if (s->active) continue;
        uint32_t len = t->edtl - t->r2t_next;
        if (len > c->params.max_burst) len = c->params.max_burst;
        if (++c->next_ttt == ISCSI_RSVD_TAG) c->next_ttt = 1;
        *s = (r2t_slot_t){.active = true, .ttt = c->next_ttt, .off = t->r2t_next,
                          .end = t->r2t_next + len, .next = t->r2t_next};
        t->r2t_next += len;
        uint8_t bhs[ISCSI_BHS_LEN] = {0};
        bhs[0] = ISCSI_OP_R2T;
        bhs[1] = 0x80;
        memcpy(bhs + 8, t->lunraw, 8);
        iscsi_put32(bhs + 16, t->itt);
        iscsi_put32(bhs + 20, s->ttt);
        iscsi_put32(bhs + 36, t->r2tsn++);
        iscsi_put32(bhs + 40, s->off);
        iscsi_put32(bhs + 44, len);
        int rc = send_pdu(c, bhs, NULL, 0, SN_CUR);
        if (rc) return rc;
    }
    return 0;
}

static bool task_data_complete(itask_t *t)
{
    if (t->received < t->edtl) return false;
    for (int i = 0; i < MAX_R2T; i++)
        if (t->r2t[i].active) return false;
    return true;
}

/* Where the transfer length (in blocks) of a WRITE-family CDB is. */
static bool write_len_field(const uint8_t *cdb, unsigned *pos, unsigned *width)
{
    switch (cdb[0]) {
    case 0x0a: *pos = 4; *width = 1; return true;                        /* WRITE(6) */
    case 0x2a: case 0x2e: *pos = 7; *width = 2; return true;             /* WRITE/WRITE AND VERIFY(10) */
    case 0xaa: case 0xae: *pos = 6; *width = 4; return true;             /* (12) */
    case 0x8a: case 0x8e: *pos = 10; *width = 4; return true;            /* (16) */
    default: return false;
    }
}

/* A write whose CDB asks for more than the initiator will send (EDTL):
 * only the whole blocks that arrive are written (RFC 7143 11.4.5.2 leaves
 * the choice to the target; this is what initiators' test suites expect),
 * and the status carries the overflow residual. Part of a block cannot be
 * written: INVALID FIELD IN INFORMATION UNIT. */
static void clamp_write(itask_t *t)
{
    unsigned pos, width;
    if (!write_len_field(t->cmd.cdb, &pos, &width)) return;
    uint32_t blocks = 0;
    for (unsigned i = 0; i < width; i++) blocks = blocks << 8 | t->cmd.cdb[pos + i];
    if (width == 1 && blocks == 0) blocks = 256;
    if (!blocks || t->xfer % blocks) return;
    uint32_t bs = t->xfer / blocks;
    if (t->edtl % bs) {
        t->prefailed = true;
        scsi_set_sense(&t->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x0e, 0x03);
        return;
    }
    uint32_t nb = t->edtl / bs;
    if (nb == 0) { /* nothing to write: done, with the whole transfer as overflow */
        t->prefailed = true;
        t->cmd.status = SCSI_STATUS_GOOD;
        return;
    }
    for (unsigned i = 0; i < width; i++) t->cmd.cdb[pos + i] = (uint8_t)(nb >> (8 * (width - 1 - i)));
}

/* SCSI Command. Returns <0 to close the connection. */
static int on_scsi_cmd(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    if (c->discovery) {
        send_reject(c, b, ISCSI_REJECT_PROTOCOL);
        return 0;
    }
    if (p->data_digest_bad) { /* discarded; the initiator may retry with the same CmdSN */
        send_reject(c, b, ISCSI_REJECT_DATA_DIGEST);
        return 0;
    }
    uint32_t cmdsn = iscsi_get32(b + 24);
    pthread_mutex_lock(&c->lock);
    iscsi_cmdsn_verdict_t v = iscsi_window_check(&c->win, cmdsn, p->info.immediate);
    bool dup = v != ISCSI_CMDSN_DROP && task_find(c, p->info.itt);
    if (v != ISCSI_CMDSN_DROP && !dup) c->win.in_flight++;
    pthread_mutex_unlock(&c->lock);
    if (v == ISCSI_CMDSN_DROP) {
        log_debug(SUB, "%s: CmdSN %u outside the window: ignored", c->peer, cmdsn);
        return ++c->drops > 1000 ? -EPROTO : 0;
    }
    if (dup) {
        send_reject(c, b, ISCSI_REJECT_TASK_IN_PROGRESS);
        return 0;
    }
    itask_t *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->start_ns = cairn_now_ns();
    t->c = c;
    t->itt = p->info.itt;
    t->cmdsn = cmdsn;
    memcpy(t->lunraw, b + 8, 8);
    t->read = b[1] & 0x40;
    t->write = b[1] & 0x20;
    t->edtl = iscsi_get32(b + 20);
    t->state = T_DATA;
    t->cmd.nexus = &c->nexus;
    t->cmd.lun = iscsi_lun_decode(b + 8);
    memcpy(t->cmd.cdb, b + 32, 16);
    t->cmd.cdb_len = 16;
    bool bad = false;
    /* Extended CDB AHS (type 1) carries the bytes beyond 16. */
    for (uint32_t off = 0; off + 4 <= p->info.ahs_bytes;) {
        uint16_t alen = iscsi_get16(p->ahs + off);
        uint8_t type = p->ahs[off + 2];
        if (off + 4 + alen > p->info.ahs_bytes + 3u) { bad = true; break; }
        if (type == 1) {
            if (alen < 1 || 16 + alen - 1u > SCSI_CDB_MAX || off + 3u + alen > p->info.ahs_bytes) {
                bad = true;
                break;
            }
            memcpy(t->cmd.cdb + 16, p->ahs + off + 4, alen - 1u);
            t->cmd.cdb_len = (uint8_t)(16 + alen - 1);
        }
        off += (4 + alen + 3u) & ~3u;
    }
    pthread_mutex_lock(&c->lock);
    t->next = c->tasks;
    c->tasks = t;
    pthread_mutex_unlock(&c->lock);
    if (bad || (t->read && t->write)) { /* bidirectional commands are not in SBC's set */
        t->prefailed = true;
        scsi_set_sense(&t->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
        t->read = t->write = false;
        t->edtl = 0;
        dispatch(c, t);
        return 0;
    }
    scsi_dir_t dir;
    uint32_t bytes;
    if (scsi_cdb_transfer(c->tgt->scsi, t->cmd.lun, t->cmd.cdb, t->cmd.cdb_len, &dir, &bytes) == 0) {
        t->xfer = bytes;
        t->xfer_known = true;
    }
    if (t->write && t->xfer_known && t->xfer > t->edtl) clamp_write(t);
    uint32_t imm = p->info.data_len;
    if (imm > t->edtl || (imm && (!t->write || !c->params.immediate_data)) ||
        imm > c->params.first_burst) {
        pthread_mutex_lock(&c->lock);
        task_unlink(c, t);
        pthread_mutex_unlock(&c->lock);
        task_free(t);
        send_reject(c, b, ISCSI_REJECT_PROTOCOL);
        return -EPROTO;
    }
    if (t->edtl > MAX_EDTL) { /* beyond any transfer length our LUs advertise */
        t->prefailed = true;
        scsi_set_sense(&t->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
        t->write = t->read = false;
        dispatch(c, t);
        return 0;
    }
    if (t->read) {
        t->buf = malloc(t->edtl ? t->edtl : 1);
        if (!t->buf) return -ENOMEM;
        t->cmd.data_in = t->buf;
        t->cmd.data_in_cap = t->edtl;
        if (!run_on_reader(c, t)) dispatch(c, t);
        return 0;
    }
    if (!t->write || t->edtl == 0) {
        t->write = false;
        dispatch(c, t);
        return 0;
    }
    if (imm == t->edtl) { /* all of it came as immediate data: take the buffer */
        t->buf = p->data;
        p->data = NULL;
    } else {
        t->buf = malloc(t->edtl);
        if (!t->buf) return -ENOMEM;
        if (imm) memcpy(t->buf, p->data, imm);
    }
    t->received = imm;
    t->unsol_next = imm;
    uint32_t unsol_limit = t->edtl < c->params.first_burst ? t->edtl : c->params.first_burst;
    t->unsol_end = (p->info.final || c->params.initial_r2t) ? imm : unsol_limit;
    t->r2t_next = t->unsol_end;
    if (task_data_complete(t)) {
        dispatch_write(c, t);
        return 0;
    }
    return issue_r2ts(c, t);
}

static int on_data_out(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    uint32_t ttt = iscsi_get32(b + 20), off = iscsi_get32(b + 40), len = p->info.data_len;
    pthread_mutex_lock(&c->lock);
    itask_t *t = task_find(c, p->info.itt);
    bool ours = t && t->state == T_DATA; /* only this thread frees tasks in T_DATA */
    if (ours && t->aborted) {
        /* Aborted by another session's CLEAR TASK SET or reset while it
         * waited for this data: it ends here, and its data goes nowhere. */
        task_unlink(c, t);
        pthread_mutex_unlock(&c->lock);
        task_free(t);
        return 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (!ours) return 0; /* an aborted or unknown task: data dropped */
    if (p->data_digest_bad) {
        send_reject(c, b, ISCSI_REJECT_DATA_DIGEST);
        t->digest_failed = true; /* the data still counts, so the sequence completes */
    }
    uint32_t *next, end, *datasn;
    r2t_slot_t *slot = NULL;
    if (ttt == ISCSI_RSVD_TAG) {
        next = &t->unsol_next;
        end = t->unsol_end;
        datasn = &t->unsol_datasn;
    } else {
        for (int i = 0; i < MAX_R2T; i++)
            if (t->r2t[i].active && t->r2t[i].ttt == ttt) slot = &t->r2t[i];
        if (!slot) {
            send_reject(c, b, ISCSI_REJECT_INVALID_FIELD);
            return -EPROTO;
        }
        next = &slot->next;
        end = slot->end;
        datasn = &slot->datasn;
    }
    /* A wrong DataSN with the right offset leaves the buffer whole: the
     * command fails, the connection goes on. */
    if (iscsi_get32(b + 36) != *datasn) t->seq_failed = true;
    /* DataPDUInOrder=Yes: each PDU continues its sequence exactly. */
    if (off != *next || len > end - off) {
        send_reject(c, b, ISCSI_REJECT_PROTOCOL);
        return -EPROTO;
    }
    if (len) memcpy(t->buf + off, p->data, len);
    *next += len;
    (*datasn)++;
    t->received += len;
    if (p->info.final) {
        if (*next != end) {
            send_reject(c, b, ISCSI_REJECT_PROTOCOL);
            return -EPROTO;
        }
        if (slot) slot->active = false;
    }
    if (task_data_complete(t)) {
        dispatch_write(c, t);
        return 0;
    }
    return issue_r2ts(c, t);
}

static void on_nop_out(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    uint32_t ttt = iscsi_get32(b + 20);
    if (p->info.itt == ISCSI_RSVD_TAG) {
        if (ttt != ISCSI_RSVD_TAG && ttt == c->ping_ttt) c->ping_ttt = 0;
        if (!p->info.immediate) { /* a non-immediate NOP-Out still takes its CmdSN */
            pthread_mutex_lock(&c->lock);
            iscsi_window_check(&c->win, iscsi_get32(b + 24), false);
            pthread_mutex_unlock(&c->lock);
        }
        return;
    }
    if (p->data_digest_bad) {
        send_reject(c, b, ISCSI_REJECT_DATA_DIGEST);
        return;
    }
    pthread_mutex_lock(&c->lock);
    iscsi_cmdsn_verdict_t v = iscsi_window_check(&c->win, iscsi_get32(b + 24), p->info.immediate);
    pthread_mutex_unlock(&c->lock);
    if (v == ISCSI_CMDSN_DROP) return;
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_NOP_IN;
    bhs[1] = 0x80;
    memcpy(bhs + 8, b + 8, 8);
    iscsi_put32(bhs + 16, p->info.itt);
    iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
    uint32_t len = p->info.data_len;
    if (len > c->params.max_recv_dsl_initiator) len = c->params.max_recv_dsl_initiator;
    send_pdu(c, bhs, p->data, len, SN_ADV);
}

static void send_ping(iconn_t *c)
{
    if (++c->next_ttt == ISCSI_RSVD_TAG) c->next_ttt = 1;
    c->ping_ttt = c->next_ttt;
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_NOP_IN;
    bhs[1] = 0x80;
    iscsi_put32(bhs + 16, ISCSI_RSVD_TAG);
    iscsi_put32(bhs + 20, c->ping_ttt);
    send_pdu(c, bhs, NULL, 0, SN_CUR);
}

static void format_portal(iconn_t *c, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "0.0.0.0";
    if (c->local.ss_family == AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&c->local;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u,1", host, ntohs(s->sin6_port));
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&c->local;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u,1", host, ntohs(s->sin_port));
    }
}

static void on_text(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    if (p->data_digest_bad) {
        send_reject(c, b, ISCSI_REJECT_DATA_DIGEST);
        return;
    }
    pthread_mutex_lock(&c->lock);
    iscsi_cmdsn_verdict_t v = iscsi_window_check(&c->win, iscsi_get32(b + 24), p->info.immediate);
    pthread_mutex_unlock(&c->lock);
    if (v == ISCSI_CMDSN_DROP) return;
    iscsi_kv_out_t out = {0};
    iscsi_kv_iter_t it;
    if (b[1] & 0x40) { /* we never need multi-PDU text requests */
        send_reject(c, b, ISCSI_REJECT_NOT_SUPPORTED);
        return;
    }
    if (iscsi_kv_iter_init(&it, p->data, p->info.data_len)) return;
    const char *k, *val;
    char portal[INET6_ADDRSTRLEN + 16];
    format_portal(c, portal, sizeof portal);
    while (iscsi_kv_next(&it, &k, &val) > 0) {
        if (strcmp(k, "SendTargets")) {
            iscsi_kv_add(&out, k, "NotUnderstood");
            continue;
        }
        pthread_mutex_lock(&c->srv->lock);
        for (itarget_t *t = c->srv->targets; t; t = t->next) {
            if (t->dying || !acl_allows(t, c->initiator)) continue;
            if (!c->discovery && strcmp(val, "All") && t != c->tgt) continue;
            if (!c->discovery && !strcmp(val, "") && t != c->tgt) continue;
            if (strcmp(val, "All") && val[0] && strcmp(val, t->name)) continue;
            iscsi_kv_add(&out, "TargetName", t->name);
            iscsi_kv_add(&out, "TargetAddress", portal);
        }
        pthread_mutex_unlock(&c->srv->lock);
    }
    iscsi_kv_iter_fini(&it);
    uint32_t len = (uint32_t)out.len;
    if (len > c->params.max_recv_dsl_initiator) {
        /* Cut at a pair boundary rather than continuing (C bit): discovery
         * lists beyond one PDU are not something our appliances produce. */
        len = c->params.max_recv_dsl_initiator;
        while (len && out.buf[len - 1] != '\0') len--;
    }
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_TEXT_RSP;
    bhs[1] = 0x80;
    memcpy(bhs + 8, b + 8, 8);
    iscsi_put32(bhs + 16, p->info.itt);
    iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
    send_pdu(c, bhs, out.buf, len, SN_ADV);
    iscsi_kv_out_free(&out);
}

/* Waits (reader thread) until no task of c is queued or running. */
static void wait_idle_tasks(iconn_t *c, bool (*match)(itask_t *, void *), void *arg)
{
    pthread_mutex_lock(&c->lock);
    for (;;) {
        bool busy = false;
        for (itask_t *t = c->tasks; t; t = t->next)
            if (t->state != T_DATA && (!match || match(t, arg))) busy = true;
        if (!busy) break;
        pthread_cond_wait(&c->cond, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
}

typedef struct abort_match {
    uint32_t itt;
    bool by_itt;
    uint64_t lun;
    bool by_lun;
} abort_match_t;

static bool abort_matches(itask_t *t, void *arg)
{
    abort_match_t *m = arg;
    if (m->by_itt && t->itt != m->itt) return false;
    if (m->by_lun && t->cmd.lun != m->lun) return false;
    return true;
}

/* Aborts the matching tasks of c and waits until none runs. Returns how many. */
static int abort_tasks(iconn_t *c, abort_match_t *m)
{
    int n = 0;
    pthread_mutex_lock(&c->lock);
    for (itask_t **pp = &c->tasks; *pp;) {
        itask_t *t = *pp;
        if (!abort_matches(t, m) || t->responding) { /* responding: completes normally */
            pp = &t->next;
            continue;
        }
        n++;
        t->aborted = true;
        if (t->state == T_DATA) { /* still ours: drop it now */
            *pp = t->next;
            if (c->win.in_flight) c->win.in_flight--;
            task_free(t);
            continue;
        }
        pp = &t->next;
    }
    pthread_mutex_unlock(&c->lock);
    wait_idle_tasks(c, abort_matches, m);
    return n;
}

/* Other sessions' tasks on the same target and LUN: aborted without waiting
 * (their readers and workers drop them); SAM's unit attention tells those
 * initiators. A task still waiting for its data is aborted too: its reader
 * drops it when the data comes (on_data_out), so it never runs - the write
 * of another initiator must not land after a reset or CLEAR TASK SET. */
static void abort_other_sessions(iconn_t *c, abort_match_t *m, bool clear_task_set)
{
    pthread_mutex_lock(&c->srv->lock);
    for (iconn_t *o = c->srv->conns; o; o = o->next) {
        if (o == c || o->tgt != c->tgt || !o->login_done) continue;
        bool any = false;
        pthread_mutex_lock(&o->lock);
        for (itask_t *t = o->tasks; t; t = t->next)
            if (abort_matches(t, m) && !t->aborted) t->aborted = any = true;
        pthread_mutex_unlock(&o->lock);
        /* Resets tell every nexus by their own unit attention. */
        if (any && clear_task_set) scsi_nexus_tasks_cleared(c->tgt->scsi, o->nexus.nexus_id, m->lun);
    }
    pthread_mutex_unlock(&c->srv->lock);
}

static void on_tmf(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    pthread_mutex_lock(&c->lock);
    iscsi_cmdsn_verdict_t v = iscsi_window_check(&c->win, iscsi_get32(b + 24), p->info.immediate);
    pthread_mutex_unlock(&c->lock);
    if (v == ISCSI_CMDSN_DROP) return;
    uint8_t fn = b[1] & 0x7f;
    uint64_t lun = iscsi_lun_decode(b + 8);
    uint8_t response = 0;
    bool lun_ok;
    pthread_mutex_lock(&c->srv->lock);
    lun_ok = c->tgt && target_has_lun(c->tgt, lun);
    pthread_mutex_unlock(&c->srv->lock);
    if (c->discovery) {
        response = 255;
    } else {
        abort_match_t m = {0};
        switch (fn) {
        case 1: { /* ABORT TASK */
            m.by_itt = true;
            m.itt = iscsi_get32(b + 20);
            pthread_mutex_lock(&c->lock);
            bool found = task_find(c, m.itt) != NULL;
            pthread_mutex_unlock(&c->lock);
            if (found) {
                /* A task whose status is already on its way (not aborted,
                 * decided under the session lock) completed: its status goes
                 * out first, then TASK DOES NOT EXIST. */
                response = abort_tasks(c, &m) ? 0 : 1;
            } else {
                /* Received already (CmdSN below ExpCmdSN: one connection
                 * delivers in order) means it completed: TASK DOES NOT EXIST.
                 * Never received means it never will run (RFC 7143 11.5.1):
                 * FUNCTION COMPLETE. */
                uint32_t ref = iscsi_get32(b + 32);
                pthread_mutex_lock(&c->lock);
                response = iscsi_sn_lt(ref, c->win.exp_cmdsn) ? 1 : 0;
                pthread_mutex_unlock(&c->lock);
            }
            break;
        }
        case 2: /* ABORT TASK SET */
        case 4: /* CLEAR TASK SET */
            if (!lun_ok) { response = 2; break; }
            m.by_lun = true;
            m.lun = lun;
            abort_tasks(c, &m);
            if (fn == 4) abort_other_sessions(c, &m, true);
            break;
        case 5: /* LOGICAL UNIT RESET */
            if (!lun_ok) { response = 2; break; }
            m.by_lun = true;
            m.lun = lun;
            abort_tasks(c, &m);
            abort_other_sessions(c, &m, false);
            scsi_reset(c->tgt->scsi, lun);
            break;
        case 6: /* TARGET WARM RESET */
            abort_tasks(c, &m);
            abort_other_sessions(c, &m, false);
            scsi_reset(c->tgt->scsi, UINT64_MAX);
            break;
        case 8: response = 4; break; /* TASK REASSIGN: needs ERL 2 */
        default: response = 5; break;
        }
    }
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_TMF_RSP;
    bhs[1] = 0x80;
    bhs[2] = response;
    iscsi_put32(bhs + 16, p->info.itt);
    send_pdu(c, bhs, NULL, 0, SN_ADV);
}

/* I_T nexus loss (SAM-5): the SCSI layer drops the session's SPC-2
 * reservation and unit attentions. Only once no task of the session can run
 * again, or a late command would bring the nexus back. */
static void end_nexus(iconn_t *c)
{
    if (!c->nexus_live) return;
    scsi_nexus_logout(c->tgt->scsi, &c->nexus);
    c->nexus_live = false;
}

/* Returns true when the connection should close after the response. */
static bool on_logout(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    pthread_mutex_lock(&c->lock);
    iscsi_window_check(&c->win, iscsi_get32(b + 24), p->info.immediate);
    pthread_mutex_unlock(&c->lock);
    uint8_t reason = b[1] & 0x7f, response = 0;
    bool close_now = true;
    if (reason == 2) {
        response = 2; /* connection recovery needs ERL 2 */
        close_now = false;
    } else if (reason == 1 && iscsi_get16(b + 20) != c->cid) {
        response = 1;
        close_now = false;
    } else if (reason > 2) {
        send_reject(c, b, ISCSI_REJECT_INVALID_FIELD);
        return false;
    }
    if (close_now) {
        wait_idle_tasks(c, NULL, NULL); /* every status goes out before the logout */
        /* The initiator may act on the response at once (log in again, or
         * RESERVE from another session): the nexus is gone before it leaves. */
        end_nexus(c);
    }
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_LOGOUT_RSP;
    bhs[1] = 0x80;
    bhs[2] = response;
    iscsi_put32(bhs + 16, p->info.itt);
    iscsi_put16(bhs + 40, (uint16_t)c->params.default_time2wait);
    iscsi_put16(bhs + 42, (uint16_t)c->params.default_time2retain);
    send_pdu(c, bhs, NULL, 0, SN_ADV);
    return close_now;
}

static void full_feature(iconn_t *c)
{
    c->digests_on = true;
    if (!c->discovery) {
        c->workers = taskq_create("iscsi-session", WORKERS_PER_SESSION);
        if (!c->workers) return;
        c->sender = taskq_create("iscsi-send", 1);
        if (!c->sender) return;
        nexus_setup(c);
        reinstate_old_sessions(c);
        scsi_nexus_login(c->tgt->scsi, &c->nexus);
        c->nexus_live = true;
    }
    atomic_store_explicit(&c->last_rx_ns, cairn_now_ns(), memory_order_relaxed);
    pthread_mutex_lock(&c->srv->lock);
    c->login_done = true;
    pthread_mutex_unlock(&c->srv->lock);
    log_info(SUB, "%s session of %s from %s%s%s (tsih %u)", c->discovery ? "discovery" : "normal",
             c->initiator, c->peer, c->tgt ? " to " : "", c->tgt ? c->tgt->name : "", c->tsih);
    int idle_ms = (int)(c->srv->nop_interval_s * 1000);
    for (;;) {
        rx_pdu_t p;
        int r = recv_pdu(c, &p, idle_ms, c->params.max_recv_dsl_target);
        if (r == RX_TIMEOUT) {
            if (c->ping_ttt) {
                log_info(SUB, "%s (%s) answers no NOP-In: closing", c->peer, c->initiator);
                break;
            }
            send_ping(c);
            continue;
        }
        if (r == -EMSGSIZE || r == -EPROTO) {
            send_reject(c, p.bhs, r == -EPROTO && !iscsi_opcode_known(p.bhs[0] & 0x3f)
                                      ? ISCSI_REJECT_NOT_SUPPORTED
                                      : ISCSI_REJECT_PROTOCOL);
            rx_free(&p);
            if (r == -EMSGSIZE || (p.bhs[0] & 0x80)) break; /* stream position unknown */
            continue;
        }
        if (r < 0) {
            if (r == -EBADMSG) log_info(SUB, "%s: header digest error: closing", c->peer);
            rx_free(&p);
            break;
        }
        c->ping_ttt = 0; /* any PDU proves the initiator alive */
        atomic_store_explicit(&c->last_rx_ns, cairn_now_ns(), memory_order_relaxed);
        int rc = 0;
        bool stop = false;
        /* Commands and their data never wait for the initiator: their replies
         * may be held back; anything else first sends what is held. */
        if (p.info.opcode == ISCSI_OP_SCSI_CMD || p.info.opcode == ISCSI_OP_DATA_OUT)
            batching_conn = c;
        else if (tx_flush(c))
            break;
        switch (p.info.opcode) {
        case ISCSI_OP_SCSI_CMD: rc = on_scsi_cmd(c, &p); break;
        case ISCSI_OP_DATA_OUT:
            if (c->discovery) send_reject(c, p.bhs, ISCSI_REJECT_PROTOCOL);
            else rc = on_data_out(c, &p);
            break;
        case ISCSI_OP_NOP_OUT: on_nop_out(c, &p); break;
        case ISCSI_OP_TEXT_REQ: on_text(c, &p); break;
        case ISCSI_OP_TMF_REQ: on_tmf(c, &p); break;
        case ISCSI_OP_LOGOUT_REQ: stop = on_logout(c, &p); break;
        case ISCSI_OP_LOGIN_REQ: /* a login in full feature phase is a protocol error */
            send_reject(c, p.bhs, ISCSI_REJECT_PROTOCOL);
            rc = -EPROTO;
            break;
        default: /* SNACK needs ERL 1 */
            send_reject(c, p.bhs, ISCSI_REJECT_NOT_SUPPORTED);
            break;
        }
        batching_conn = NULL;
        rx_free(&p);
        if (rc < 0 || stop) break;
        pthread_mutex_lock(&c->lock);
        bool dead = c->dead;
        pthread_mutex_unlock(&c->lock);
        if (dead) break;
    }
    tx_flush(c); /* a reject, say, made while replies were held */
}

/* ============================================================ connections */

static void *conn_thread(void *arg)
{
    iconn_t *c = arg;
    if (do_login(c) == 0) full_feature(c);
    pthread_mutex_lock(&c->lock);
    c->dead = true;
    pthread_mutex_unlock(&c->lock);
    shutdown(c->fd, SHUT_RDWR);
    /* Tasks still collecting data are ours to free; queued ones see dead. */
    pthread_mutex_lock(&c->lock);
    for (itask_t **pp = &c->tasks; *pp;) {
        itask_t *t = *pp;
        if (t->state == T_DATA) {
            *pp = t->next;
            task_free(t);
        } else {
            pp = &t->next;
        }
    }
    pthread_mutex_unlock(&c->lock);
    /* Queued tasks see dead and leave; running ones finish. Then the nexus
     * ends, before the (slower) join of the workers. */
    if (c->workers) wait_idle_tasks(c, NULL, NULL);
    end_nexus(c);
    if (c->srv->teardown_delay_ms) usleep(c->srv->teardown_delay_ms * 1000u);
    if (c->workers) taskq_destroy(c->workers);
    if (c->sender) taskq_destroy(c->sender);
    iscsi_server_t *srv = c->srv;
    pthread_mutex_lock(&srv->lock);
    for (iconn_t **pp = &srv->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    srv->nconns--;
    if (c->counted) conn_limits_del(&srv->limits, &c->addr);
    if (c->tgt) c->tgt->refs--;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
    close(c->fd);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
    return NULL;
}

/* With srv->lock held: the connection of address a to give up for a
 * newcomer: a login still running before a discovery session before a normal
 * session without commands, the longest idle first. NULL when every one of
 * them has commands in flight. */
static iconn_t *pick_victim(iscsi_server_t *srv, const conn_addr_t *a)
{
    iconn_t *best = NULL;
    int best_rank = 3;
    uint64_t best_t = 0;
    for (iconn_t *c = srv->conns; c; c = c->next) {
        if (!c->counted || !conn_addr_equal(&c->addr, a)) continue;
        int rank;
        uint64_t t;
        if (!c->login_done) {
            rank = 0;
            t = c->login_deadline_ns;
        } else {
            pthread_mutex_lock(&c->lock);
            bool busy = c->tasks != NULL || c->dead;
            pthread_mutex_unlock(&c->lock);
            if (busy) continue;
            rank = c->discovery ? 1 : 2;
            t = atomic_load_explicit(&c->last_rx_ns, memory_order_relaxed);
        }
        if (rank < best_rank || (rank == best_rank && t < best_t)) {
            best = c;
            best_rank = rank;
            best_t = t;
        }
    }
    return best;
}

/* With srv->lock held: whether a new connection from a gets in, shutting
 * down a connection of the initiator holding the most when the target is
 * full (its thread leaves on its own; it no longer counts). Reaching a cap
 * is logged, rate-limited. */
static bool admit_conn(iscsi_server_t *srv, const conn_addr_t *a)
{
    conn_limits_t *l = &srv->limits;
    conn_addr_t victim;
    unsigned vcount = 0;
    conn_verdict_t v = conn_limits_admit(l, a, &victim, &vcount);
    if (v == CONN_ADMIT) return true;
    iconn_t *evict = NULL;
    if (v == CONN_ADMIT_EVICT) {
        evict = pick_victim(srv, &victim);
        if (!evict) v = CONN_REFUSE_FULL;
    }
    int kind = v == CONN_REFUSE_CLIENT ? CONN_LOG_CLIENT : CONN_LOG_TOTAL;
    uint64_t held;
    if (conn_limits_log_ok(l, kind, &held)) {
        char who[INET6_ADDRSTRLEN], more[64] = "";
        conn_addr_string(a, who, sizeof who);
        if (held) snprintf(more, sizeof more, " (%" PRIu64 " more since the last line)", held);
        if (v == CONN_REFUSE_CLIENT) {
            log_warn(SUB, "connection from %s refused: it holds %u, the cap "
                     "(iscsi_max_connections_per_client)%s", who, l->max_per_client, more);
        } else if (v == CONN_ADMIT_EVICT) {
            log_warn(SUB, "%u connections, the cap (iscsi_max_connections): %s (%s, which holds "
                     "%u) closed to let %s in%s", l->max_total, evict->peer,
                     !evict->login_done ? "in login" : evict->discovery ? "discovery" : "idle",
                     vcount, who, more);
        } else {
            log_warn(SUB, "%u connections, the cap (iscsi_max_connections): connection from %s "
                     "refused, no initiator holds more%s", l->max_total, who, more);
        }
    }
    if (v != CONN_ADMIT_EVICT) return false;
    evict->evicted = true;
    evict->counted = false;
    conn_limits_del(l, &evict->addr);
    shutdown(evict->fd, SHUT_RDWR);
    return true;
}

static void start_conn(iscsi_server_t *srv, int fd, struct sockaddr_storage *ss)
{
    conn_addr_t addr;
    conn_addr_from((struct sockaddr *)ss, &addr);
    pthread_mutex_lock(&srv->lock);
    bool in = admit_conn(srv, &addr) && conn_limits_add(&srv->limits, &addr) == 0;
    pthread_mutex_unlock(&srv->lock);
    if (!in) {
        close(fd);
        return;
    }
    iconn_t *c = calloc(1, sizeof *c);
    if (!c) {
        pthread_mutex_lock(&srv->lock);
        conn_limits_del(&srv->limits, &addr);
        pthread_mutex_unlock(&srv->lock);
        close(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd;
    c->addr = addr;
    c->counted = true;
    c->login_deadline_ns = cairn_now_ns() + (uint64_t)srv->login_timeout_s * 1000000000ull;
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (ss->ss_family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
        port = ntohs(s->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
        port = ntohs(s->sin6_port);
    }
    snprintf(c->peer, sizeof c->peer, "%s:%u", host, port);
    socklen_t sl = sizeof c->local;
    getsockname(fd, (struct sockaddr *)&c->local, &sl);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    pthread_mutex_lock(&srv->lock);
    c->next = srv->conns;
    srv->conns = c;
    srv->nconns++;
    pthread_mutex_unlock(&srv->lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &attr, conn_thread, c)) {
        pthread_mutex_lock(&srv->lock);
        for (iconn_t **pp = &srv->conns; *pp; pp = &(*pp)->next)
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        srv->nconns--;
        if (c->counted) conn_limits_del(&srv->limits, &c->addr);
        pthread_mutex_unlock(&srv->lock);
        close(fd);
        free(c);
    }
    pthread_attr_destroy(&attr);
}

/* Accept thread, about once a second: shuts down the connections whose login
 * is not complete by their deadline. The reader's own timeouts are per PDU
 * (and per recv() within one), so an initiator dribbling a login - a byte, or
 * an empty continuation, now and then - would otherwise hold its connection
 * and thread for good. */
static void expire_logins(iscsi_server_t *srv)
{
    uint64_t now = cairn_now_ns();
    pthread_mutex_lock(&srv->lock);
    for (iconn_t *c = srv->conns; c; c = c->next) {
        if (c->login_done || c->evicted || now < c->login_deadline_ns) continue;
        log_debug(SUB, "%s: no login within %u s (iscsi_login_timeout): closing", c->peer,
                  srv->login_timeout_s);
        c->evicted = true;
        shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&srv->lock);
}

/* accept() failed for want of descriptors or memory: the connection stays in
 * the backlog and the listener readable, so polling it would spin. A second
 * later connections may have gone. */
static void accept_pause(iscsi_server_t *srv, int err)
{
    pthread_mutex_lock(&srv->lock);
    uint64_t held;
    bool log = conn_limits_log_ok(&srv->limits, CONN_LOG_ACCEPT, &held);
    size_t n = srv->nconns;
    pthread_mutex_unlock(&srv->lock);
    if (log) {
        char more[64] = "";
        if (held) snprintf(more, sizeof more, " (%" PRIu64 " more since the last line)", held);
        log_warn(SUB, "cannot accept connections (%zu open): %s; raise `ulimit -n` or lower "
                 "iscsi_max_connections%s", n, strerror(err), more);
    }
    struct pollfd stop = {.fd = srv->stop_pipe[0], .events = POLLIN};
    while (poll(&stop, 1, 1000) < 0 && errno == EINTR) {
    }
}

static void *accept_thread(void *arg)
{
    iscsi_server_t *srv = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = srv->lfd, .events = POLLIN},
                                {.fd = srv->stop_pipe[0], .events = POLLIN}};
        int pr = poll(pfd, 2, 1000);
        if (pr < 0) {
            if (errno == EINTR) continue;
            break;
        }
        expire_logins(srv);
        if (pfd[1].revents) break;
        if (!(pfd[0].revents & POLLIN)) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_pause(srv, errno);
            continue;
        }
        start_conn(srv, fd, &ss);
    }
    return NULL;
}

int iscsi_server_start(const iscsi_server_opts_t *opts, iscsi_server_t **out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", opts->port);
    const char *host = opts->host && *opts->host ? opts->host : NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc) return -EADDRNOTAVAIL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        freeaddrinfo(ai);
        return rc;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
        rc = -errno;
        close(fd);
        freeaddrinfo(ai);
        return rc;
    }
    freeaddrinfo(ai);
    iscsi_server_t *srv = calloc(1, sizeof *srv);
    if (!srv || pipe2(srv->stop_pipe, O_CLOEXEC)) {
        free(srv);
        close(fd);
        return -ENOMEM;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    srv->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    srv->lfd = fd;
    srv->nop_interval_s = opts->nop_interval_s ? opts->nop_interval_s : 30;
    srv->login_timeout_s = opts->login_timeout_s ? opts->login_timeout_s
                                                 : ISCSI_DEFAULT_LOGIN_TIMEOUT_S;
    if (conn_limits_init(&srv->limits,
                         opts->max_conns ? opts->max_conns : ISCSI_DEFAULT_MAX_CONNS,
                         opts->max_conns_per_client ? opts->max_conns_per_client
                                                    : ISCSI_DEFAULT_MAX_CONNS_PER_CLIENT)) {
        close(srv->stop_pipe[0]);
        close(srv->stop_pipe[1]);
        close(fd);
        free(srv);
        return -ENOMEM;
    }
    const char *delay = getenv("CAIRN_ISCSI_TEARDOWN_DELAY_MS");
    if (delay) srv->teardown_delay_ms = (unsigned)strtoul(delay, NULL, 10);
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    if (pthread_create(&srv->accept_thread, NULL, accept_thread, srv)) {
        close(fd);
        conn_limits_fini(&srv->limits);
        free(srv);
        return -EAGAIN;
    }
    *out = srv;
    return 0;
}

uint16_t iscsi_server_port(const iscsi_server_t *srv) { return srv->port; }

void iscsi_server_stop(iscsi_server_t *srv)
{
    if (!srv) return;
    if (write(srv->stop_pipe[1], "x", 1) != 1) { /* the accept thread also ends on close */
    }
    pthread_join(srv->accept_thread, NULL);
    close(srv->lfd);
    pthread_mutex_lock(&srv->lock);
    srv->stopping = true;
    for (iconn_t *c = srv->conns; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
    while (srv->nconns) pthread_cond_wait(&srv->cond, &srv->lock);
    itarget_t *list = srv->targets;
    srv->targets = NULL;
    pthread_mutex_unlock(&srv->lock);
    while (list) {
        itarget_t *t = list;
        list = t->next;
        for (size_t i = 0; i < t->nluns; i++) scsi_lu_remove(t->scsi, t->luns[i]);
        t->nluns = 0;
        free_target(t);
    }
    close(srv->stop_pipe[0]);
    close(srv->stop_pipe[1]);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    conn_limits_fini(&srv->limits);
    free(srv);
}
