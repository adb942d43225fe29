/*
 * SCSI commands as tasks.
 *
 * Task life: a SCSI command becomes a task in the session's list. A write
 * stays with the reader (state DATA) until its immediate, unsolicited and
 * R2T-solicited data are complete and in order (DataPDUInOrder=Yes is all we
 * accept; anything else is a protocol error that closes the connection, so
 * no byte of the buffer is ever sent to the volume unwritten). Then it is
 * QUEUED to the workers, RUNNING, and leaves the list once its status is
 * sent. Task management (iscsi_tmf.c) may abort it on the way.
 */
#include "iscsi_srv.h"

#include <cairn/analytics.h>

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void iscsi_task_free(itask_t *t)
{
    free(t->buf);
    free(t);
}

/* With c->lock held. */
static void task_unlink(iconn_t *c, itask_t *t)
{
    CAIRN_ASSERT(cairn_mutex_held(&c->lock));
    for (itask_t **pp = &c->tasks; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    if (c->win.in_flight) c->win.in_flight--;
    pthread_cond_broadcast(&c->cond);
}

itask_t *iscsi_task_find(iconn_t *c, uint32_t itt)
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
        if (iscsi_send_pdu(c, bhs, cmd->data_in + off, len, sn)) return;
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
    iscsi_send_pdu(c, bhs, sense, slen, SN_ADV);
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
 * target and LUN, latency (also per command: op-latency), initiator and command
 * (initiator-op) and size; net.bytes by protocol and initiator. The names' hashes are made once
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
    an_name_fn name_fn = name ? an_name_string : name_command;
    an_add(AN_ISCSI_OPS, AN_BY_OP, key, 1, name_fn, name);
    uint64_t initiator = memo_hash(&c->an_initiator_key, c->initiator);
    an_add(AN_ISCSI_OPS, AN_BY_INITIATOR, initiator, 1, an_name_string, c->initiator);
    an_add_pair(AN_ISCSI_OPS, AN_BY_INITIATOR_OP,
                (an_part_t){initiator, an_name_string, c->initiator},
                (an_part_t){key, name_fn, name}, 1);
    if (c->tgt) {
        lun_name_t ln = {c->tgt->name, t->cmd.lun};
        an_add(AN_ISCSI_OPS, AN_BY_TARGET,
               memo_hash(&c->an_target_key, c->tgt->name) ^ t->cmd.lun * 0x9e3779b97f4a7c15ull, 1,
               name_target_lun, &ln);
    }
    an_add_latency(AN_ISCSI_OPS, ns, 1);
    an_add_op_latency(AN_ISCSI_OPS, key, ns, name_fn, name);
    an_add_size(AN_ISCSI_OPS, t->cmd.data_in_len + t->cmd.data_out_len, 1);
    if (t->cmd.data_in_len) {
        an_add_total(AN_NET_BYTES, t->cmd.data_in_len);
        an_add(AN_NET_BYTES, AN_BY_PROTOCOL, 0, t->cmd.data_in_len, name_net, NULL);
        an_add(AN_NET_BYTES, AN_BY_INITIATOR, initiator, t->cmd.data_in_len, an_name_string,
               c->initiator);
    }
    if (t->cmd.data_out_len) {
        an_add_total(AN_NET_BYTES, t->cmd.data_out_len);
        an_add(AN_NET_BYTES, AN_BY_PROTOCOL, 1, t->cmd.data_out_len, name_net, NULL);
        an_add(AN_NET_BYTES, AN_BY_INITIATOR, initiator, t->cmd.data_out_len, an_name_string,
               c->initiator);
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
    CAIRN_ASSERT(!t->responding || t->state == T_RUNNING);
    if (t->responding) {
        send_status(c, t);
        count_command(c, t);
    }
    pthread_mutex_lock(&c->lock);
    task_unlink(c, t);
    pthread_mutex_unlock(&c->lock);
    iscsi_task_free(t);
}

static void run_task(void *arg)
{
    itask_t *t = arg;
    iconn_t *c = t->c;
    pthread_mutex_lock(&c->lock);
    CAIRN_ASSERT(t->state == T_QUEUED);
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
    CAIRN_ASSERT(t->state == T_DATA);
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
    /* From the reader: complete (DATA), or back from run_on_reader. Queued
     * twice, it would run twice. */
    CAIRN_ASSERT(t->state == T_DATA || t->state == T_RUNNING);
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
        int rc = iscsi_send_pdu(c, bhs, NULL, 0, SN_CUR);
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
int iscsi_on_scsi_cmd(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    if (c->discovery) {
        iscsi_send_reject(c, b, ISCSI_REJECT_PROTOCOL);
        return 0;
    }
    if (p->data_digest_bad) { /* discarded; the initiator may retry with the same CmdSN */
        iscsi_send_reject(c, b, ISCSI_REJECT_DATA_DIGEST);
        return 0;
    }
    uint32_t cmdsn = iscsi_get32(b + 24);
    pthread_mutex_lock(&c->lock);
    iscsi_cmdsn_verdict_t v = iscsi_window_check(&c->win, cmdsn, p->info.immediate);
    bool dup = v != ISCSI_CMDSN_DROP && iscsi_task_find(c, p->info.itt);
    if (v != ISCSI_CMDSN_DROP && !dup) c->win.in_flight++;
    pthread_mutex_unlock(&c->lock);
    if (v == ISCSI_CMDSN_DROP) {
        log_debug(SUB, "%s: CmdSN %u outside the window: ignored", c->peer, cmdsn);
        return ++c->drops > 1000 ? -EPROTO : 0;
    }
    if (dup) {
        iscsi_send_reject(c, b, ISCSI_REJECT_TASK_IN_PROGRESS);
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
        iscsi_task_free(t);
        iscsi_send_reject(c, b, ISCSI_REJECT_PROTOCOL);
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

int iscsi_on_data_out(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    uint32_t ttt = iscsi_get32(b + 20), off = iscsi_get32(b + 40), len = p->info.data_len;
    pthread_mutex_lock(&c->lock);
    itask_t *t = iscsi_task_find(c, p->info.itt);
    bool ours = t && t->state == T_DATA; /* only this thread frees tasks in T_DATA */
    if (ours && t->aborted) {
        /* Aborted by another session's CLEAR TASK SET or reset while it
         * waited for this data: it ends here, and its data goes nowhere. */
        task_unlink(c, t);
        pthread_mutex_unlock(&c->lock);
        iscsi_task_free(t);
        return 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (!ours) return 0; /* an aborted or unknown task: data dropped */
    if (p->data_digest_bad) {
        iscsi_send_reject(c, b, ISCSI_REJECT_DATA_DIGEST);
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
            iscsi_send_reject(c, b, ISCSI_REJECT_INVALID_FIELD);
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
        iscsi_send_reject(c, b, ISCSI_REJECT_PROTOCOL);
        return -EPROTO;
    }
    if (len) memcpy(t->buf + off, p->data, len);
    *next += len;
    (*datasn)++;
    t->received += len;
    if (p->info.final) {
        if (*next != end) {
            iscsi_send_reject(c, b, ISCSI_REJECT_PROTOCOL);
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
