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

/* The keys of one login request that the login itself handles; the
 * operational ones are negotiated as they are read (iscsi_param_negotiate).
 * The values point into the request's text. */
typedef struct login_keys {
    const char *initiator, *target, *session_type;
    const char *auth_methods, *chap_a, *chap_n, *chap_r, *chap_i, *chap_c;
} login_keys_t;

static uint16_t keys_collect(iconn_t *c, iscsi_kv_iter_t *it, login_keys_t *k, iscsi_kv_out_t *out)
{
    const char *key, *v;
    int r;
    while ((r = iscsi_kv_next(it, &key, &v)) > 0) {
        if (!strcmp(key, "InitiatorName")) k->initiator = v;
        else if (!strcmp(key, "TargetName")) k->target = v;
        else if (!strcmp(key, "SessionType")) k->session_type = v;
        else if (!strcmp(key, "InitiatorAlias") || !strcmp(key, "TargetAlias")) continue;
        else if (!strcmp(key, "AuthMethod")) k->auth_methods = v;
        else if (!strcmp(key, "CHAP_A")) k->chap_a = v;
        else if (!strcmp(key, "CHAP_N")) k->chap_n = v;
        else if (!strcmp(key, "CHAP_R")) k->chap_r = v;
        else if (!strcmp(key, "CHAP_I")) k->chap_i = v;
        else if (!strcmp(key, "CHAP_C")) k->chap_c = v;
        else {
            int nr = iscsi_param_negotiate(&c->params, key, v, out);
            if (nr < 0) return ISCSI_LOGIN_INITIATOR_ERROR;
            if (nr > 0) iscsi_kv_add(out, key, "NotUnderstood");
        }
    }
    return r < 0 ? ISCSI_LOGIN_INITIATOR_ERROR : 0;
}

/* A normal session's target, if it exists and admits the initiator: the
 * connection holds it, and the login keeps its CHAP secrets. */
static uint16_t attach_target(iconn_t *c, login_state_t *ls, const char *target)
{
    iscsi_server_t *srv = c->srv;
    uint16_t status = 0;
    pthread_mutex_lock(&srv->lock);
    itarget_t *t = iscsi_find_target(srv, target);
    if (!t) {
        status = ISCSI_LOGIN_NOT_FOUND;
    } else if (!iscsi_acl_allows(t, c->initiator)) {
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
    return status;
}

/* The first request of the login: who logs in, to what kind of session and
 * which target. */
static uint16_t login_start(iconn_t *c, login_state_t *ls, const login_keys_t *k,
                            iscsi_kv_out_t *out)
{
    ls->started = true;
    if (!k->initiator || !*k->initiator) return ISCSI_LOGIN_MISSING_PARAMETER;
    if (strlen(k->initiator) > ISCSI_NAME_MAX) return ISCSI_LOGIN_INITIATOR_ERROR;
    cairn_strlcpy(c->initiator, k->initiator, sizeof c->initiator);
    if (k->session_type && !strcmp(k->session_type, "Discovery")) c->discovery = true;
    else if (k->session_type && strcmp(k->session_type, "Normal"))
        return ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED;
    if (!c->discovery) {
        if (!k->target) return ISCSI_LOGIN_MISSING_PARAMETER;
        uint16_t status = attach_target(c, ls, k->target);
        if (status) return status;
    }
    if (!ls->need_chap) ls->auth_done = true;
    if (!c->discovery && !ls->sent_tpgt) {
        iscsi_kv_add(out, "TargetPortalGroupTag", "1");
        ls->sent_tpgt = true;
    }
    return 0;
}

/* Whether the comma-separated list holds word. */
static bool list_has(const char *list, const char *word)
{
    char copy[256];
    cairn_strlcpy(copy, list, sizeof copy);
    char *save = NULL;
    for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save))
        if (!strcmp(m, word)) return true;
    return false;
}

/* AuthMethod: CHAP when the target has a secret, else None. */
static uint16_t choose_auth_method(login_state_t *ls, const char *methods, iscsi_kv_out_t *out)
{
    if (ls->need_chap) {
        if (!list_has(methods, "CHAP")) {
            iscsi_kv_add(out, "AuthMethod", "Reject");
            return ISCSI_LOGIN_AUTH_FAILED;
        }
        ls->chap_chosen = true;
        iscsi_kv_add(out, "AuthMethod", "CHAP");
    } else if (list_has(methods, "None")) {
        iscsi_kv_add(out, "AuthMethod", "None");
        ls->auth_done = true;
    } else {
        iscsi_kv_add(out, "AuthMethod", "Reject");
        return ISCSI_LOGIN_AUTH_FAILED;
    }
    return 0;
}

/* CHAP_A: MD5 (5) is the one algorithm; the answer is our challenge. */
static uint16_t chap_challenge(login_state_t *ls, const char *algorithms, iscsi_kv_out_t *out)
{
    if (!ls->chap_chosen) return ISCSI_LOGIN_INITIATOR_ERROR;
    if (!list_has(algorithms, "5")) {
        iscsi_kv_add(out, "CHAP_A", "Reject");
        return ISCSI_LOGIN_AUTH_FAILED;
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
    return 0;
}

/* Mutual CHAP: the initiator's challenge (CHAP_I, CHAP_C) answered with the
 * target's own secret; our own challenge sent back is refused (a reflection). */
static uint16_t chap_answer_initiator(login_state_t *ls, const char *chap_i, const char *chap_c,
                                      iscsi_kv_out_t *out)
{
    uint8_t ichal[1024];
    int clen = chap_c ? iscsi_chap_decode(chap_c, ichal, sizeof ichal) : -1;
    char *end = NULL;
    unsigned long id = chap_i ? strtoul(chap_i, &end, 0) : 256;
    if (!ls->mchap_user[0] || clen <= 0 || !end || *end || id > 255 ||
        ((size_t)clen == sizeof ls->chap_challenge &&
         !memcmp(ichal, ls->chap_challenge, (size_t)clen)))
        return ISCSI_LOGIN_AUTH_FAILED;
    uint8_t resp[16];
    char rbuf[40];
    iscsi_chap_response((uint8_t)id, ls->mchap_secret, ichal, (size_t)clen, resp);
    iscsi_chap_encode_hex(resp, sizeof resp, rbuf, sizeof rbuf);
    iscsi_kv_add(out, "CHAP_N", ls->mchap_user);
    iscsi_kv_add(out, "CHAP_R", rbuf);
    return 0;
}

/* CHAP_N, CHAP_R: the initiator's answer to our challenge. */
static uint16_t chap_verify(iconn_t *c, login_state_t *ls, const login_keys_t *k,
                            iscsi_kv_out_t *out)
{
    if (!ls->chap_challenged || !k->chap_n || !k->chap_r) return ISCSI_LOGIN_AUTH_FAILED;
    uint8_t got[64], want[16];
    int glen = iscsi_chap_decode(k->chap_r, got, sizeof got);
    iscsi_chap_response(ls->chap_id, ls->chap_secret, ls->chap_challenge,
                        sizeof ls->chap_challenge, want);
    if (strcmp(k->chap_n, ls->chap_user) || glen != 16 || memcmp(got, want, 16)) {
        log_info(SUB, "CHAP authentication of %s (%s) failed", c->initiator, c->peer);
        return ISCSI_LOGIN_AUTH_FAILED;
    }
    if (k->chap_i || k->chap_c) {
        uint16_t status = chap_answer_initiator(ls, k->chap_i, k->chap_c, out);
        if (status) return status;
    }
    ls->auth_done = true;
    return 0;
}

static uint16_t security_stage(iconn_t *c, login_state_t *ls, const login_keys_t *k,
                               iscsi_kv_out_t *out)
{
    uint16_t status = 0;
    if (k->auth_methods) status = choose_auth_method(ls, k->auth_methods, out);
    if (!status && k->chap_a) status = chap_challenge(ls, k->chap_a, out);
    if (!status && (k->chap_n || k->chap_r)) status = chap_verify(c, ls, k, out);
    return status;
}

static uint16_t operational_stage(iconn_t *c, login_state_t *ls, const login_keys_t *k,
                                  iscsi_kv_out_t *out)
{
    if (k->auth_methods || k->chap_a || k->chap_n || k->chap_r) return ISCSI_LOGIN_INITIATOR_ERROR;
    if (!ls->declared_mrdsl) {
        char buf[16];
        snprintf(buf, sizeof buf, "%" PRIu32, c->params.max_recv_dsl_target);
        iscsi_kv_add(out, "MaxRecvDataSegmentLength", buf);
        ls->declared_mrdsl = true;
    }
    return 0;
}

/* The T bit: whether the login moves on to stage nsg (*transit). */
static uint16_t stage_transit(const login_state_t *ls, const login_keys_t *k, bool t_bit, int nsg,
                              bool *transit)
{
    *transit = false;
    if (!t_bit) return 0;
    if (nsg <= ls->csg || nsg == 2) return ISCSI_LOGIN_INITIATOR_ERROR;
    if (ls->csg == 0 && !ls->auth_done) {
        /* CHAP still in progress: stay in the security stage. */
        if (!ls->chap_chosen || (!ls->chap_challenged && !k->chap_a && !k->auth_methods))
            return ISCSI_LOGIN_AUTH_FAILED;
        return 0;
    }
    *transit = true;
    return 0;
}

/* Handles the keys of a complete login request (all continuations joined).
 * Returns a login status; *transit says whether we move on to stage nsg. */
static uint16_t login_keys(iconn_t *c, login_state_t *ls, bool t_bit, int nsg,
                           iscsi_kv_out_t *out, bool *transit)
{
    iscsi_kv_iter_t it;
    if (iscsi_kv_iter_init(&it, ls->text, ls->text_len)) return ISCSI_LOGIN_OUT_OF_RESOURCES;
    login_keys_t k = {0};
    uint16_t status = keys_collect(c, &it, &k, out);
    if (!status && !ls->started) status = login_start(c, ls, &k, out);
    if (!status && ls->csg == 0) status = security_stage(c, ls, &k, out);
    else if (!status && ls->csg == 1) status = operational_stage(c, ls, &k, out);
    if (!status) status = stage_transit(ls, &k, t_bit, nsg, transit);
    iscsi_kv_iter_fini(&it);
    return status;
}

void iscsi_nexus_setup(iconn_t *c)
{
    snprintf(c->iport, sizeof c->iport, "%s,i,0x%012" PRIx64, c->initiator, c->isid);
    snprintf(c->tport, sizeof c->tport, "%s,t,0x0001", c->tgt->name);
    /* The portal group tag stays 1 on both heads of an HA pair, so an
     * initiator that reconnects to the partner is the same I_T nexus and keeps
     * its reservations; the relative port id tells the heads apart (ALUA). */
    c->nexus = (scsi_nexus_t){.initiator = c->iport, .target_port = c->tport,
                              .rel_port_id = c->srv->alua.local_port,
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
