/*
 * An iSCSI connection: PDUs on its socket (a receive buffer, replies held
 * back while commands keep arriving), the reader loop of the full feature
 * phase, and the connection's life from login to teardown. The threads are
 * described in iscsi_srv.h.
 *
 * Ordering on the wire. All PDUs of a connection go out under its send lock,
 * which is also where StatSN is assigned, so StatSN increases in send order;
 * ExpCmdSN/MaxCmdSN are read under the session lock at the same moment.
 * MaxCmdSN = ExpCmdSN - 1 + depth - commands in flight, so an initiator never
 * has more than `depth` commands queued at the target.
 */
#include "iscsi_srv.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

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
 * replies may be held back (iscsi_send_pdu); NULL on workers and for PDUs whose
 * handling may wait (task management, logout). */
static __thread iconn_t *batching_conn;

/* Sends the held-back replies, then iov. send_lock held. A failed send kills
 * the connection. */
static int send_locked(iconn_t *c, const struct iovec *iov, int n)
{
    CAIRN_ASSERT(cairn_mutex_held(&c->send_lock));
    struct iovec all[6]; /* the held replies and a PDU's five parts (iscsi_send_pdu) */
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

/* Sends one PDU: fills StatSN (per sn) and ExpCmdSN/MaxCmdSN, adds digests. */
int iscsi_send_pdu(iconn_t *c, uint8_t *bhs, const void *data, uint32_t dlen, int sn)
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

void iscsi_rx_free(rx_pdu_t *p)
{
    free(p->ahs);
    free(p->data);
    p->ahs = p->data = NULL;
}

/* Reads one PDU. RX_TIMEOUT when nothing arrived for timeout_ms; -EPROTO for
 * a header that cannot be trusted (bad opcode decoded: *p->bhs is valid and
 * the caller rejects; -EBADMSG header digest; -EMSGSIZE too big: the caller
 * rejects and closes); other negatives: connection gone. */
int iscsi_recv_pdu(iconn_t *c, rx_pdu_t *p, int timeout_ms, uint32_t max_data)
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

void iscsi_send_reject(iconn_t *c, const uint8_t *bad_bhs, uint8_t reason)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_REJECT;
    bhs[1] = 0x80;
    bhs[2] = reason;
    iscsi_put32(bhs + 16, ISCSI_RSVD_TAG);
    uint8_t copy[ISCSI_BHS_LEN];
    memcpy(copy, bad_bhs, ISCSI_BHS_LEN);
    iscsi_send_pdu(c, bhs, copy, ISCSI_BHS_LEN, SN_ADV);
}

/* A non-command PDU's CmdSN through the session's window: false when the
 * window says drop it (a duplicate, or out of range). */
bool iscsi_take_cmdsn(iconn_t *c, const rx_pdu_t *p)
{
    pthread_mutex_lock(&c->lock);
    iscsi_cmdsn_verdict_t v = iscsi_window_check(&c->win, iscsi_get32(p->bhs + 24), p->info.immediate);
    pthread_mutex_unlock(&c->lock);
    return v != ISCSI_CMDSN_DROP;
}

/* The header of the single, final reply to request p (NOP-In, Text
 * Response): its LUN field and ITT echoed, no target transfer tag. */
static void reply_header(uint8_t *bhs, uint8_t opcode, const rx_pdu_t *p)
{
    memset(bhs, 0, ISCSI_BHS_LEN);
    bhs[0] = opcode;
    bhs[1] = 0x80;
    memcpy(bhs + 8, p->bhs + 8, 8);
    iscsi_put32(bhs + 16, p->info.itt);
    iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
}

/* A NOP-Out or text request with data: rejected when its data digest failed,
 * else its CmdSN taken; false when it goes no further. */
static bool take_request(iconn_t *c, rx_pdu_t *p)
{
    if (p->data_digest_bad) {
        iscsi_send_reject(c, p->bhs, ISCSI_REJECT_DATA_DIGEST);
        return false;
    }
    return iscsi_take_cmdsn(c, p);
}

static void on_nop_out(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    uint32_t ttt = iscsi_get32(b + 20);
    if (p->info.itt == ISCSI_RSVD_TAG) {
        if (ttt != ISCSI_RSVD_TAG && ttt == c->ping_ttt) c->ping_ttt = 0;
        /* a non-immediate NOP-Out still takes its CmdSN */
        if (!p->info.immediate) (void)iscsi_take_cmdsn(c, p);
        return;
    }
    if (!take_request(c, p)) return;
    uint8_t bhs[ISCSI_BHS_LEN];
    reply_header(bhs, ISCSI_OP_NOP_IN, p);
    uint32_t len = p->info.data_len;
    if (len > c->params.max_recv_dsl_initiator) len = c->params.max_recv_dsl_initiator;
    iscsi_send_pdu(c, bhs, p->data, len, SN_ADV);
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
    iscsi_send_pdu(c, bhs, NULL, 0, SN_CUR);
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
    if (!take_request(c, p)) return;
    iscsi_kv_out_t out = {0};
    iscsi_kv_iter_t it;
    if (b[1] & 0x40) { /* we never need multi-PDU text requests */
        iscsi_send_reject(c, b, ISCSI_REJECT_NOT_SUPPORTED);
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
            if (t->dying || !iscsi_acl_allows(t, c->initiator)) continue;
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
    uint8_t bhs[ISCSI_BHS_LEN];
    reply_header(bhs, ISCSI_OP_TEXT_RSP, p);
    iscsi_send_pdu(c, bhs, out.buf, len, SN_ADV);
    iscsi_kv_out_free(&out);
}

static void full_feature(iconn_t *c)
{
    c->digests_on = true;
    if (!c->discovery) {
        c->workers = taskq_create("iscsi-session", WORKERS_PER_SESSION);
        if (!c->workers) return;
        c->sender = taskq_create("iscsi-send", 1);
        if (!c->sender) return;
        iscsi_nexus_setup(c);
        iscsi_reinstate_old_sessions(c);
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
        int r = iscsi_recv_pdu(c, &p, idle_ms, c->params.max_recv_dsl_target);
        if (r == RX_TIMEOUT) {
            if (c->ping_ttt) {
                log_info(SUB, "%s (%s) answers no NOP-In: closing", c->peer, c->initiator);
                break;
            }
            send_ping(c);
            continue;
        }
        if (r == -EMSGSIZE || r == -EPROTO) {
            iscsi_send_reject(c, p.bhs, r == -EPROTO && !iscsi_opcode_known(p.bhs[0] & 0x3f)
                                      ? ISCSI_REJECT_NOT_SUPPORTED
                                      : ISCSI_REJECT_PROTOCOL);
            iscsi_rx_free(&p);
            if (r == -EMSGSIZE || (p.bhs[0] & 0x80)) break; /* stream position unknown */
            continue;
        }
        if (r < 0) {
            if (r == -EBADMSG) log_info(SUB, "%s: header digest error: closing", c->peer);
            iscsi_rx_free(&p);
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
        case ISCSI_OP_SCSI_CMD: rc = iscsi_on_scsi_cmd(c, &p); break;
        case ISCSI_OP_DATA_OUT:
            if (c->discovery) iscsi_send_reject(c, p.bhs, ISCSI_REJECT_PROTOCOL);
            else rc = iscsi_on_data_out(c, &p);
            break;
        case ISCSI_OP_NOP_OUT: on_nop_out(c, &p); break;
        case ISCSI_OP_TEXT_REQ: on_text(c, &p); break;
        case ISCSI_OP_TMF_REQ: iscsi_on_tmf(c, &p); break;
        case ISCSI_OP_LOGOUT_REQ: stop = iscsi_on_logout(c, &p); break;
        case ISCSI_OP_LOGIN_REQ: /* a login in full feature phase is a protocol error */
            iscsi_send_reject(c, p.bhs, ISCSI_REJECT_PROTOCOL);
            rc = -EPROTO;
            break;
        default: /* SNACK needs ERL 1 */
            iscsi_send_reject(c, p.bhs, ISCSI_REJECT_NOT_SUPPORTED);
            break;
        }
        batching_conn = NULL;
        iscsi_rx_free(&p);
        if (rc < 0 || stop) break;
        pthread_mutex_lock(&c->lock);
        bool dead = c->dead;
        pthread_mutex_unlock(&c->lock);
        if (dead) break;
    }
    tx_flush(c); /* a reject, say, made while replies were held */
}


void *iscsi_conn_thread(void *arg)
{
    iconn_t *c = arg;
    if (iscsi_login(c) == 0) full_feature(c);
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
            iscsi_task_free(t);
        } else {
            pp = &t->next;
        }
    }
    pthread_mutex_unlock(&c->lock);
    /* Queued tasks see dead and leave; running ones finish. Then the nexus
     * ends, before the (slower) join of the workers. */
    if (c->workers) iscsi_wait_idle_tasks(c, NULL, NULL);
    iscsi_end_nexus(c);
    if (c->srv->teardown_delay_ms) usleep(c->srv->teardown_delay_ms * 1000u);
    if (c->workers) taskq_destroy(c->workers);
    if (c->sender) taskq_destroy(c->sender);
    iscsi_server_t *srv = c->srv;
    pthread_mutex_lock(&srv->lock);
    iscsi_conn_unlink(srv, c);
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
