/*
 * Task management and logout.
 *
 * Task management runs on the reader: it marks tasks aborted, drops those
 * still collecting data, and waits until the queued and running ones have
 * left the list (their status is never sent) before answering.
 *
 * Session end. The I_T nexus ends (scsi_nexus_logout: reservation, unit
 * attentions) once the session's tasks are idle and before the Logout
 * Response goes out - an initiator may act on the response at once - or, for
 * a dropped connection, before the workers are joined.
 */
#include "iscsi_srv.h"

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

/* Waits (reader thread) until no task of c is queued or running. */
void iscsi_wait_idle_tasks(iconn_t *c, bool (*match)(itask_t *, void *), void *arg)
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
            iscsi_task_free(t);
            continue;
        }
        pp = &t->next;
    }
    pthread_mutex_unlock(&c->lock);
    iscsi_wait_idle_tasks(c, abort_matches, m);
    return n;
}

/* Other sessions' tasks on the same target and LUN: aborted without waiting
 * (their readers and workers drop them); SAM's unit attention tells those
 * initiators. A task still waiting for its data is aborted too: its reader
 * drops it when the data comes (iscsi_on_data_out), so it never runs - the write
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

void iscsi_on_tmf(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    if (!iscsi_take_cmdsn(c, p)) return;
    uint8_t fn = b[1] & 0x7f;
    uint64_t lun = iscsi_lun_decode(b + 8);
    uint8_t response = 0;
    bool lun_ok;
    pthread_mutex_lock(&c->srv->lock);
    lun_ok = c->tgt && iscsi_target_has_lun(c->tgt, lun);
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
            bool found = iscsi_task_find(c, m.itt) != NULL;
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
    iscsi_send_pdu(c, bhs, NULL, 0, SN_ADV);
}

/* I_T nexus loss (SAM-5): the SCSI layer drops the session's SPC-2
 * reservation and unit attentions. Only once no task of the session can run
 * again, or a late command would bring the nexus back. */
void iscsi_end_nexus(iconn_t *c)
{
    if (!c->nexus_live) return;
    scsi_nexus_logout(c->tgt->scsi, &c->nexus);
    c->nexus_live = false;
}

/* Returns true when the connection should close after the response. */
bool iscsi_on_logout(iconn_t *c, rx_pdu_t *p)
{
    const uint8_t *b = p->bhs;
    (void)iscsi_take_cmdsn(c, p); /* a logout is answered even out of the window */
    uint8_t reason = b[1] & 0x7f, response = 0;
    bool close_now = true;
    if (reason == 2) {
        response = 2; /* connection recovery needs ERL 2 */
        close_now = false;
    } else if (reason == 1 && iscsi_get16(b + 20) != c->cid) {
        response = 1;
        close_now = false;
    } else if (reason > 2) {
        iscsi_send_reject(c, b, ISCSI_REJECT_INVALID_FIELD);
        return false;
    }
    if (close_now) {
        iscsi_wait_idle_tasks(c, NULL, NULL); /* every status goes out before the logout */
        /* The initiator may act on the response at once (log in again, or
         * RESERVE from another session): the nexus is gone before it leaves. */
        iscsi_end_nexus(c);
    }
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_LOGOUT_RSP;
    bhs[1] = 0x80;
    bhs[2] = response;
    iscsi_put32(bhs + 16, p->info.itt);
    iscsi_put16(bhs + 40, (uint16_t)c->params.default_time2wait);
    iscsi_put16(bhs + 42, (uint16_t)c->params.default_time2retain);
    iscsi_send_pdu(c, bhs, NULL, 0, SN_ADV);
    return close_now;
}
