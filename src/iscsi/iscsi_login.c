/*
 * The login phase (RFC 7143 section 6): the leading PDU's checks (version;
 * MaxConnections is 1, so a login naming an existing session's TSIH is
 * refused), text accumulated across C-bit continuations (LOGIN_TEXT_MAX),
 * the security stage with CHAP (one-way or mutual), the operational keys
 * (login_keys), the TSIH given on the move to full feature phase, and the
 * setup of the session's I_T nexus with reinstatement of a session the same
 * initiator opened with the same ISID.
 */
#include "iscsi_srv.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    iscsi_send_pdu(c, bhs, kv ? kv->buf : NULL, kv ? (uint32_t)kv->len : 0, SN_ADV);
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
            itarget_t *t = iscsi_find_target(srv, target);
            if (!t) {
                status = ISCSI_LOGIN_NOT_FOUND;
            } else if (!iscsi_acl_allows(t, initiator)) {
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

void iscsi_nexus_setup(iconn_t *c)
{
    snprintf(c->iport, sizeof c->iport, "%s,i,0x%012" PRIx64, c->initiator, c->isid);
    snprintf(c->tport, sizeof c->tport, "%s,t,0x0001", c->tgt->name);
    c->nexus = (scsi_nexus_t){.initiator = c->iport, .target_port = c->tport, .rel_port_id = 1,
                              .nexus_id = (uint64_t)c->tsih << 48 | c->isid};
}

/* Session reinstatement (RFC 7143 6.3.5): a leading login with an ISID an
 * existing session of this initiator and target uses replaces that session. */
void iscsi_reinstate_old_sessions(iconn_t *c)
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
int iscsi_login(iconn_t *c)
{
    login_state_t ls = {.csg = -1};
    iscsi_params_defaults(&c->params);
    int rc = -EPROTO;
    for (;;) {
        rx_pdu_t p;
        int r = iscsi_recv_pdu(c, &p, IO_TIMEOUT_S * 1000, LOGIN_MAX_DATA);
        if (r == RX_TIMEOUT || (r < 0 && r != -EPROTO)) {
            iscsi_rx_free(&p);
            break;
        }
        if (r == -EPROTO || p.info.opcode != ISCSI_OP_LOGIN_REQ) {
            /* Anything but a login request during login ends it (RFC 7143 6.x). */
            uint8_t fake[ISCSI_BHS_LEN] = {0};
            memcpy(fake, p.bhs, ISCSI_BHS_LEN);
            send_login_rsp(c, fake, false, 0, 0, ISCSI_LOGIN_INVALID_DURING_LOGIN, NULL);
            iscsi_rx_free(&p);
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
            iscsi_rx_free(&p);
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
            iscsi_rx_free(&p);
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
            iscsi_rx_free(&p);
            rc = 0;
            break;
        }
        send_login_rsp(c, b, transit, ls.csg, nsg, 0, &out);
        if (transit) ls.csg = nsg;
        iscsi_kv_out_free(&out);
        iscsi_rx_free(&p);
    }
    free(ls.text);
    return rc;
}
