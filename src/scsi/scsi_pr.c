/*
 * Reservations: SPC-4 persistent reservations (PERSISTENT RESERVE IN/OUT) and
 * the SPC-2 RESERVE/RELEASE(6/10) that ESXi falls back to.
 *
 * A registration belongs to an I_T nexus, named by its initiator port and
 * target port strings (not by the session: a registration outlives the
 * session that made it, which is the point of persistence). ALL_TG_PT
 * registers the initiator port through every target port (target_port NULL).
 * The reservation is a pointer to the holder's registration; for the
 * all-registrants types every registrant holds it and the pointer only says
 * that a reservation exists.
 *
 * Access checks (pr_allowed) follow SPC-4 5.12.1: a command's class says
 * whether it reads (conflicts only under the exclusive-access types) or writes
 * (conflicts under all types); under the registrants-only and all-registrants
 * types every registered nexus has the holder's access.
 *
 * RESERVE(6/10) is per nexus (session): it is released when the nexus goes
 * away and by a reset. With compatible reservation handling (CRH=1, SPC-4
 * 5.7.3) RESERVE and RELEASE from a persistent reservation holder succeed and
 * do nothing; from anyone else while a persistent reservation exists they
 * conflict.
 *
 * State is in memory, per LU, under lu->lock. Persistence follows APTPL
 * (SPC-4): the APTPL bit of the last REGISTER / REGISTER AND IGNORE EXISTING
 * KEY decides for the whole LU. While it is set, the hook (scsi.h) receives
 * the whole state, serialized, after every change, and the command completes
 * only once it is stored (the hook is called under lu->lock, so changes reach
 * the store in the order they were made; a refused store puts the old state
 * back, which is why the unit attentions a change leaves for other nexuses
 * are raised only once it stands); when a registration clears it, the hook is told once to forget
 * the stored state; without it nothing is written. An LU added with
 * pr_persist_all (an HA pair: the LU may move to the partner head without a
 * power loss) hands every change to the hook, APTPL or not; the flags byte
 * tells the store which states a power loss must drop. The string:
 *   "CPR2" | u8 flags (bit 0: APTPL) | u32 generation | u8 type |
 *   u32 holder index+1 (0: none) | u32 n |
 *   n x (u64 key | u16 rel_port | u8 all_tg_pt | u16 len | initiator |
 *        u16 len | target_port)                          (big endian)
 * Registrations are restored with the I_T nexus names they were made with
 * (initiator name with its ISID, target port), so an initiator that comes back
 * with the same ISID is the same registrant.
 */
#include "scsi_impl.h"

#include <cairn/assert.h>
#include <errno.h>
#include <stdlib.h>

static bool reg_matches(const pr_reg_t *r, const scsi_nexus_t *nx)
{
    const char *ini = nx->initiator ? nx->initiator : "";
    const char *tp = nx->target_port ? nx->target_port : "";
    return strcmp(r->initiator, ini) == 0 && (!r->target_port || strcmp(r->target_port, tp) == 0);
}

static pr_reg_t *reg_find(scsi_lu_t *lu, const scsi_nexus_t *nx)
{
    for (pr_reg_t *r = lu->regs; r; r = r->next)
        if (reg_matches(r, nx)) return r;
    return NULL;
}

static bool type_all_regs(uint8_t t) { return t == PR_WE_AR || t == PR_EA_AR; }
static bool type_regs_access(uint8_t t) { return t == PR_WE_RO || t == PR_EA_RO || type_all_regs(t); }
static bool type_valid(uint8_t t)
{
    return t == PR_WE || t == PR_EA || t == PR_WE_RO || t == PR_EA_RO || t == PR_WE_AR || t == PR_EA_AR;
}
static bool type_exclusive_access(uint8_t t) { return t == PR_EA || t == PR_EA_RO || t == PR_EA_AR; }

static bool is_holder(scsi_lu_t *lu, pr_reg_t *r)
{
    if (!lu->holder || !r) return false;
    return type_all_regs(lu->pr_type) || lu->holder == r;
}

bool pr_allowed(scsi_lu_t *lu, const scsi_nexus_t *nx, uint8_t prc, uint8_t opflags)
{
    if (lu->res2 && lu->res2_nexus != nx->nexus_id && !(opflags & OPF_RES2_OK)) return false;
    if (prc == PRC_ALLOW || !lu->holder) return true;
    pr_reg_t *r = reg_find(lu, nx);
    if (is_holder(lu, r)) return true;
    if (r && type_regs_access(lu->pr_type)) return true;
    if (prc == PRC_READ && !type_exclusive_access(lu->pr_type)) return true;
    return false;
}

/* ------------------------------------------------------- persistence */

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    bool fail;
} wbuf_t;

static void wput(wbuf_t *w, const void *src, size_t n)
{
    if (w->fail) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        while (cap < w->len + n) cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->fail = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void wput_n(wbuf_t *w, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    wput(w, b, (size_t)bytes);
}

static void wput_str(wbuf_t *w, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > 0xffff) n = 0xffff;
    wput_n(w, n, 2);
    if (n) wput(w, s, n);
}

static void pr_serialize(scsi_lu_t *lu, wbuf_t *w)
{
    wput(w, "CPR2", 4);
    wput_n(w, lu->pr_aptpl ? 1 : 0, 1);
    wput_n(w, lu->pr_generation, 4);
    wput_n(w, lu->pr_type, 1);
    uint32_t n = 0, holder = 0;
    for (pr_reg_t *r = lu->regs; r; r = r->next) {
        n++;
        if (r == lu->holder) holder = n;
    }
    wput_n(w, holder, 4);
    wput_n(w, n, 4);
    for (pr_reg_t *r = lu->regs; r; r = r->next) {
        wput_n(w, r->key, 8);
        wput_n(w, r->rel_port, 2);
        wput_n(w, r->target_port ? 0 : 1, 1);
        wput_str(w, r->initiator);
        wput_str(w, r->target_port);
    }
}

static void reg_free(pr_reg_t *r)
{
    free(r->initiator);
    free(r->target_port);
    free(r);
}

static void regs_free(pr_reg_t *head)
{
    while (head) {
        pr_reg_t *r = head;
        head = r->next;
        reg_free(r);
    }
}

void pr_free(scsi_lu_t *lu)
{
    regs_free(lu->regs);
    lu->regs = NULL;
    lu->holder = NULL;
}

typedef struct rbuf {
    const uint8_t *p;
    size_t len, off;
    bool fail;
} rbuf_t;

static uint64_t rget(rbuf_t *r, int bytes)
{
    if (r->fail || r->len - r->off < (size_t)bytes) {
        r->fail = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | r->p[r->off++];
    return v;
}

static char *rget_str(rbuf_t *r)
{
    size_t n = (size_t)rget(r, 2);
    if (r->fail || r->len - r->off < n) {
        r->fail = true;
        return NULL;
    }
    char *s = strndup((const char *)r->p + r->off, n);
    r->off += n;
    if (!s) r->fail = true;
    return s;
}

/* The state a serialized string describes, parsed before anything is replaced. */
typedef struct pr_state {
    bool aptpl;
    uint32_t generation;
    uint8_t type;
    pr_reg_t *regs, *holder;
} pr_state_t;

static int pr_parse(const void *state, size_t len, pr_state_t *st)
{
    memset(st, 0, sizeof(*st));
    if (!state || len < 4 || memcmp(state, "CPR2", 4) != 0) return -EINVAL;
    rbuf_t rb = {.p = state, .len = len, .off = 4};
    uint8_t flags = (uint8_t)rget(&rb, 1);
    st->aptpl = flags & 1;
    st->generation = (uint32_t)rget(&rb, 4);
    st->type = (uint8_t)rget(&rb, 1);
    uint32_t holder = (uint32_t)rget(&rb, 4);
    uint32_t n = (uint32_t)rget(&rb, 4);
    pr_reg_t **tail = &st->regs;
    for (uint32_t i = 0; i < n && !rb.fail; i++) {
        pr_reg_t *r = calloc(1, sizeof(*r));
        if (!r) {
            rb.fail = true;
            break;
        }
        *tail = r;
        tail = &r->next;
        r->key = rget(&rb, 8);
        r->rel_port = (uint16_t)rget(&rb, 2);
        bool atp = rget(&rb, 1) != 0;
        r->initiator = rget_str(&rb);
        r->target_port = rget_str(&rb);
        if (atp) {
            free(r->target_port);
            r->target_port = NULL;
        }
        if (i + 1 == holder) st->holder = r;
    }
    if (rb.fail || rb.off != len || (flags & ~1u) ||
        (holder && (!st->holder || !type_valid(st->type)))) {
        regs_free(st->regs);
        memset(st, 0, sizeof(*st));
        return -EINVAL;
    }
    if (!st->holder) st->type = 0;
    return 0;
}

/* Replaces lu's state with st (which it takes); under lu->lock, or before
 * lu is published (pr_load at its creation), so no lock check here. */
static void pr_install(scsi_lu_t *lu, pr_state_t *st)
{
    pr_free(lu);
    lu->regs = st->regs;
    lu->holder = st->holder;
    lu->pr_type = st->type;
    lu->pr_generation = st->generation;
    lu->pr_aptpl = st->aptpl;
}

int pr_load(scsi_lu_t *lu, const void *state, size_t len)
{
    pr_state_t st;
    int err = pr_parse(state, len, &st);
    if (err) return err;
    pr_install(lu, &st);
    return 0;
}

bool scsi_pr_state_aptpl(const void *state, size_t len)
{
    pr_state_t st;
    if (pr_parse(state, len, &st)) return false;
    regs_free(st.regs);
    return st.aptpl;
}

/*
 * After a change: with APTPL active (or pr_persist_all) the store gets the
 * whole state; when APTPL was just turned off it is told to forget what it
 * holds, so a restart finds nothing. Otherwise nothing is written at all.
 */
static int pr_persist(scsi_lu_t *lu)
{
    if (!lu->pr_hook) return 0;
    if (!lu->pr_aptpl && !lu->pr_persist_all) {
        if (!lu->pr_stored) return 0;
        int err = lu->pr_hook(lu->pr_hook_arg, lu->lun, NULL, 0);
        if (!err) lu->pr_stored = false;
        return err;
    }
    wbuf_t w = {0};
    pr_serialize(lu, &w);
    int err = w.fail ? -ENOMEM : lu->pr_hook(lu->pr_hook_arg, lu->lun, w.p, w.len);
    free(w.p);
    if (!err) lu->pr_stored = true;
    return err;
}

void scsi_lu_set_pr_hook(scsi_target_t *tgt, uint64_t lun, scsi_pr_hook_fn fn, void *arg)
{
    scsi_lu_t *lu = scsi_lu_pin(tgt, lun);
    if (!lu) return;
    pthread_mutex_lock(&lu->lock);
    lu->pr_hook = fn;
    lu->pr_hook_arg = arg;
    pthread_mutex_unlock(&lu->lock);
    scsi_lu_unpin(lu);
}

int scsi_lu_pr_restore(scsi_target_t *tgt, uint64_t lun, const void *state, size_t len)
{
    pr_state_t st;
    int err = pr_parse(state, len, &st);
    if (err) return err;
    scsi_lu_t *lu = scsi_lu_pin(tgt, lun);
    if (!lu) {
        regs_free(st.regs);
        return -ENOENT;
    }
    pthread_mutex_lock(&lu->lock);
    pr_install(lu, &st);
    lu->pr_stored = true;
    pthread_mutex_unlock(&lu->lock);
    scsi_lu_unpin(lu);
    return 0;
}

/* ------------------------------------------------ nexus loss, resets */

void pr_nexus_gone(scsi_lu_t *lu, uint64_t nexus_id)
{
    if (lu->res2 && lu->res2_nexus == nexus_id) lu->res2 = false;
}

void pr_reset(scsi_lu_t *lu) { lu->res2 = false; }

/* ------------------------------------------------------ RESERVE(6/10) */

/* Under lu->lock: with a persistent reservation held, RESERVE and RELEASE(6/10)
 * succeed for its holder and conflict for anyone else; then true, the command
 * answered and the lock dropped. */
static bool answered_by_pr_holder(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    if (!lu->holder) return false;
    bool mine = is_holder(lu, reg_find(lu, c->nexus));
    pthread_mutex_unlock(&lu->lock);
    if (mine) scsi_respond(c, NULL, 0, 0);
    else res_conflict(c);
    return true;
}

void pr_reserve2(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    pthread_mutex_lock(&lu->lock);
    if (answered_by_pr_holder(c)) return;
    if (lu->res2 && lu->res2_nexus != c->nexus->nexus_id) {
        pthread_mutex_unlock(&lu->lock);
        res_conflict(c);
        return;
    }
    lu->res2 = true;
    lu->res2_nexus = c->nexus->nexus_id;
    pthread_mutex_unlock(&lu->lock);
    scsi_respond(c, NULL, 0, 0);
}

void pr_release2(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    pthread_mutex_lock(&lu->lock);
    if (answered_by_pr_holder(c)) return;
    /* releasing someone else's reservation (or none) succeeds and does nothing */
    if (lu->res2 && lu->res2_nexus == c->nexus->nexus_id) lu->res2 = false;
    pthread_mutex_unlock(&lu->lock);
    scsi_respond(c, NULL, 0, 0);
}

/* ------------------------------------------------- PERSISTENT RESERVE IN */

/* An iSCSI TransportID (SPC-4 7.6.4.6): format 01b when the name carries
 * ",i,0x<ISID>", else 00b; NUL-terminated, padded to a multiple of 4. */
static size_t transport_id(const char *initiator, uint8_t *out, size_t cap)
{
    size_t n = strlen(initiator) + 1;
    size_t padded = (n + 3) & ~(size_t)3;
    if (padded < 20) padded = 20;
    if (4 + padded > cap) return 0;
    memset(out, 0, 4 + padded);
    out[0] = (uint8_t)((strstr(initiator, ",i,0x") ? 0x40 : 0x00) | 0x05);
    put16(out + 2, (uint16_t)padded);
    memcpy(out + 4, initiator, n);
    return 4 + padded;
}

void pr_in(scsi_ctx_t *c)
{
    scsi_lu_t *lu = c->lu;
    uint32_t alloc = be16(c->cdb + 7);
    uint8_t sa = c->cdb[1] & 0x1f;
    pthread_mutex_lock(&lu->lock);
    size_t cap = 8 + 16;
    for (pr_reg_t *r = lu->regs; r; r = r->next) cap += 24 + 4 + strlen(r->initiator) + 24;
    uint8_t *buf = calloc(1, cap);
    if (!buf) {
        pthread_mutex_unlock(&lu->lock);
        scsi_zvol_error(c, -ENOMEM, false);
        return;
    }
    size_t len = 8;
    put32(buf, lu->pr_generation);
    switch (sa) {
    case 0x00:   /* READ KEYS */
        for (pr_reg_t *r = lu->regs; r; r = r->next, len += 8) put64(buf + len, r->key);
        put32(buf + 4, (uint32_t)(len - 8));
        break;
    case 0x01:   /* READ RESERVATION */
        if (lu->holder) {
            put64(buf + 8, type_all_regs(lu->pr_type) ? 0 : lu->holder->key);
            buf[21] = lu->pr_type & 0x0f;   /* scope LU_SCOPE (0) */
            len = 24;
        }
        put32(buf + 4, (uint32_t)(len - 8));
        break;
    case 0x02:   /* REPORT CAPABILITIES */
        memset(buf, 0, 8);
        put16(buf, 8);
        buf[2] = 0x10 | 0x04 | (lu->pr_hook ? 0x01 : 0);   /* CRH, ATP_C, PTPL_C */
        buf[3] = 0x80 | 0x10 | (lu->pr_aptpl ? 0x01 : 0);   /* TMV, ALLOW COMMANDS 001b, PTPL_A */
        buf[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;   /* WR_EX_AR EX_AC_RO WR_EX_RO EX_AC WR_EX */
        buf[5] = 0x01;   /* EX_AC_AR */
        break;
    case 0x03:   /* READ FULL STATUS */
        for (pr_reg_t *r = lu->regs; r; r = r->next) {
            uint8_t *d = buf + len;
            put64(d, r->key);
            d[12] = (uint8_t)((r->target_port ? 0 : 0x02) | (is_holder(lu, r) ? 0x01 : 0));
            if (is_holder(lu, r)) d[13] = lu->pr_type & 0x0f;
            put16(d + 18, r->rel_port);
            size_t tl = transport_id(r->initiator, d + 24, cap - len - 24);
            put32(d + 20, (uint32_t)tl);
            len += 24 + tl;
        }
        put32(buf + 4, (uint32_t)(len - 8));
        break;
    }
    pthread_mutex_unlock(&lu->lock);
    scsi_respond(c, buf, (uint32_t)len, alloc);
    free(buf);
}

/* ------------------------------------------------ PERSISTENT RESERVE OUT */

static pr_reg_t *reg_new(const scsi_nexus_t *nx, uint64_t key, bool all_tg_pt)
{
    pr_reg_t *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    r->initiator = strdup(nx->initiator ? nx->initiator : "");
    r->target_port = all_tg_pt ? NULL : strdup(nx->target_port ? nx->target_port : "");
    r->rel_port = nx->rel_port_id;
    r->key = key;
    if (!r->initiator || (!all_tg_pt && !r->target_port)) {
        reg_free(r);
        return NULL;
    }
    return r;
}

/* Unit attentions a PERSISTENT RESERVE OUT leaves for other nexuses, raised
 * only once the change stands (it may still be refused by the store). */
typedef struct ua_note {
    char *initiator, *target_port;
    uint32_t mask;
} ua_note_t;

typedef struct ua_notes {
    ua_note_t *v;
    size_t n, cap;
} ua_notes_t;

static void ua_reg(ua_notes_t *un, const pr_reg_t *r, uint32_t mask)
{
    if (un->n == un->cap) {
        size_t cap = un->cap ? un->cap * 2 : 8;
        ua_note_t *v = realloc(un->v, cap * sizeof(*v));
        if (!v) return;   /* out of memory: the UA is lost, the change is not */
        un->v = v;
        un->cap = cap;
    }
    ua_note_t *n = &un->v[un->n];
    n->initiator = strdup(r->initiator);
    n->target_port = r->target_port ? strdup(r->target_port) : NULL;
    n->mask = mask;
    if (!n->initiator || (r->target_port && !n->target_port)) {
        free(n->initiator);
        free(n->target_port);
        return;
    }
    un->n++;
}

static void ua_notes_done(scsi_ctx_t *c, ua_notes_t *un, bool raise)
{
    for (size_t i = 0; i < un->n; i++) {
        ua_note_t *n = &un->v[i];
        if (raise)
            scsi_ua_raise_it(c->tgt, c->lu->lun, n->initiator, n->target_port,
                             c->nexus->nexus_id, n->mask);
        free(n->initiator);
        free(n->target_port);
    }
    free(un->v);
}

/* Removes r; a holder's removal releases the reservation (for the
 * all-registrants types only when the last registrant goes). */
static void reg_remove(scsi_ctx_t *c, ua_notes_t *un, pr_reg_t *r, bool ua_released)
{
    scsi_lu_t *lu = c->lu;
    for (pr_reg_t **pp = &lu->regs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    if (lu->holder) {
        bool release = type_all_regs(lu->pr_type) ? lu->regs == NULL : lu->holder == r;
        if (type_all_regs(lu->pr_type) && lu->holder == r && lu->regs) lu->holder = lu->regs;
        if (release) {
            if (ua_released && (lu->pr_type == PR_WE_RO || lu->pr_type == PR_EA_RO))
                for (pr_reg_t *o = lu->regs; o; o = o->next) ua_reg(un, o, UA_RES_RELEASED);
            lu->holder = NULL;
            lu->pr_type = 0;
        }
    }
    reg_free(r);
}

/* The parameter list and CDB fields of a PERSISTENT RESERVE OUT. */
typedef struct pr_out_args {
    uint8_t sa, scope, type;
    uint64_t key, sa_key;       /* RESERVATION KEY, SERVICE ACTION RESERVATION KEY */
    bool all_tg_pt, aptpl;
    bool registering;           /* REGISTER or REGISTER AND IGNORE EXISTING KEY */
} pr_out_args_t;

/* What a service action did to the state, or which error ends the command.
 * The actions change nothing before they know they will succeed. */
typedef enum pr_outcome {
    PR_UNCHANGED,
    PR_CHANGED,               /* stored (when persistent) before it stands */
    PR_CONFLICT,              /* RESERVATION CONFLICT */
    PR_BAD_SCOPE,
    PR_BAD_TYPE,
    PR_BAD_SA_KEY,            /* PREEMPT of nobody with key 0 */
    PR_BAD_ACTION,            /* an unknown service action */
    PR_INVALID_RELEASE,
    PR_NOMEM,
} pr_outcome_t;

/* Decodes the CDB and the 24-byte parameter list; false after answering with
 * the sense that says what is wrong with them. */
static bool pr_out_decode(scsi_ctx_t *c, pr_out_args_t *a)
{
    const uint8_t *cdb = c->cdb;
    a->sa = cdb[1] & 0x1f;
    a->scope = cdb[2] >> 4;
    a->type = cdb[2] & 0x0f;
    uint32_t declared = be32(cdb + 5);
    if (declared != 24 || param_len(c, declared) < 24) {
        param_len_error(c);
        return false;
    }
    const uint8_t *p = c->cmd->data_out;
    a->key = be64(p);
    a->sa_key = be64(p + 8);
    bool spec_i_pt = p[20] & 0x08;
    a->all_tg_pt = p[20] & 0x04;
    a->aptpl = p[20] & 0x01;
    a->registering = a->sa == 0x00 || a->sa == 0x06;
    if (spec_i_pt) {
        bad_param(c, 20, 3);
        return false;
    }
    if (a->all_tg_pt && !a->registering) {
        bad_param(c, 20, 2);
        return false;
    }
    return true;
}

/* REGISTER, REGISTER AND IGNORE EXISTING KEY. */
static pr_outcome_t pr_register(scsi_ctx_t *c, const pr_out_args_t *a, pr_reg_t *me,
                                ua_notes_t *un)
{
    scsi_lu_t *lu = c->lu;
    if (a->sa == 0x00 && (me ? me->key != a->key : a->key != 0)) return PR_CONFLICT;
    if (!me) {
        if (a->sa_key == 0) return PR_UNCHANGED;   /* nothing to do, APTPL included */
        pr_reg_t *r = reg_new(c->nexus, a->sa_key, a->all_tg_pt);
        if (!r) return PR_NOMEM;
        r->next = lu->regs;
        lu->regs = r;
    } else if (a->sa_key == 0) {
        reg_remove(c, un, me, true);
    } else {
        me->key = a->sa_key;
    }
    /* SPC-4: the APTPL of the last registration decides for the whole LU
     * (ignored by every other service action). */
    lu->pr_aptpl = a->aptpl;
    lu->pr_generation++;
    return PR_CHANGED;
}

static pr_outcome_t pr_reserve(scsi_lu_t *lu, const pr_out_args_t *a, pr_reg_t *me)
{
    if (!me || me->key != a->key) return PR_CONFLICT;
    if (a->scope != 0) return PR_BAD_SCOPE;
    if (!type_valid(a->type)) return PR_BAD_TYPE;
    if (lu->holder) return is_holder(lu, me) && lu->pr_type == a->type ? PR_UNCHANGED : PR_CONFLICT;
    lu->holder = me;
    lu->pr_type = a->type;
    return PR_CHANGED;
}

static pr_outcome_t pr_release(scsi_lu_t *lu, const pr_out_args_t *a, pr_reg_t *me,
                               ua_notes_t *un)
{
    if (!me || me->key != a->key) return PR_CONFLICT;
    if (!lu->holder || !is_holder(lu, me)) return PR_UNCHANGED;
    if (a->scope != 0 || lu->pr_type != a->type) return PR_INVALID_RELEASE;
    if (lu->pr_type != PR_WE && lu->pr_type != PR_EA)
        for (pr_reg_t *o = lu->regs; o; o = o->next)
            if (o != me) ua_reg(un, o, UA_RES_RELEASED);
    lu->holder = NULL;
    lu->pr_type = 0;
    return PR_CHANGED;
}

static pr_outcome_t pr_clear(scsi_lu_t *lu, const pr_out_args_t *a, pr_reg_t *me, ua_notes_t *un)
{
    if (!me || me->key != a->key) return PR_CONFLICT;
    while (lu->regs) {
        pr_reg_t *r = lu->regs;
        lu->regs = r->next;
        if (r != me) ua_reg(un, r, UA_RES_PREEMPTED);
        reg_free(r);
    }
    lu->holder = NULL;
    lu->pr_type = 0;
    lu->pr_generation++;
    return PR_CHANGED;
}

/* PREEMPT, and PREEMPT AND ABORT (the transport aborts nothing for us, so it
 * is PREEMPT): removes the registrations of sa_key and, when they held the
 * reservation, takes it. */
static pr_outcome_t pr_preempt(scsi_lu_t *lu, const pr_out_args_t *a, pr_reg_t *me,
                               ua_notes_t *un)
{
    if (!me || me->key != a->key) return PR_CONFLICT;
    bool all_regs = lu->holder && type_all_regs(lu->pr_type);
    bool takes_reservation =
        lu->holder && (all_regs ? a->sa_key == 0 : lu->holder->key == a->sa_key);
    if (takes_reservation) {
        if (a->scope != 0) return PR_BAD_SCOPE;
        if (!type_valid(a->type)) return PR_BAD_TYPE;
    } else if (a->sa_key == 0) {
        return PR_BAD_SA_KEY;
    }
    unsigned removed = 0;
    for (pr_reg_t **pp = &lu->regs; *pp;) {
        pr_reg_t *r = *pp;
        bool victim = r != me && (all_regs && a->sa_key == 0 ? true : r->key == a->sa_key);
        if (!victim) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        ua_reg(un, r, UA_REG_PREEMPTED);
        if (lu->holder == r) lu->holder = NULL;
        reg_free(r);
        removed++;
    }
    if (takes_reservation) {
        lu->holder = me;
        lu->pr_type = a->type;
    } else {
        /* Nobody had the key: nothing was removed, so nothing changed either. */
        if (!removed) return PR_CONFLICT;
        if (all_regs && !lu->holder) lu->holder = me;   /* still held by the rest */
    }
    lu->pr_generation++;
    return PR_CHANGED;
}

static pr_outcome_t pr_service_action(scsi_ctx_t *c, const pr_out_args_t *a, ua_notes_t *un)
{
    scsi_lu_t *lu = c->lu;
    CAIRN_ASSERT(cairn_mutex_held(&lu->lock));
    pr_reg_t *me = reg_find(lu, c->nexus);
    switch (a->sa) {
    case 0x00:   /* REGISTER */
    case 0x06:   /* REGISTER AND IGNORE EXISTING KEY */
        return pr_register(c, a, me, un);
    case 0x01: return pr_reserve(lu, a, me);
    case 0x02: return pr_release(lu, a, me, un);
    case 0x03: return pr_clear(lu, a, me, un);
    case 0x04:   /* PREEMPT */
    case 0x05:   /* PREEMPT AND ABORT */
        return pr_preempt(lu, a, me, un);
    default: return PR_BAD_ACTION;
    }
}

/* The answer to a command that changed nothing: success or the error's sense. */
static void pr_out_answer(scsi_ctx_t *c, pr_outcome_t outcome)
{
    switch (outcome) {
    case PR_UNCHANGED:
    case PR_CHANGED: scsi_respond(c, NULL, 0, 0); break;
    case PR_CONFLICT: res_conflict(c); break;
    case PR_BAD_SCOPE: bad_cdb(c, 2, 7); break;
    case PR_BAD_TYPE: bad_cdb(c, 2, 3); break;
    case PR_BAD_SA_KEY: bad_param(c, 8, -1); break;
    case PR_BAD_ACTION: bad_cdb(c, 1, 4); break;
    case PR_INVALID_RELEASE:   /* INVALID RELEASE OF PERSISTENT RESERVATION */
        scsi_set_sense(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x04);
        break;
    case PR_NOMEM: scsi_zvol_error(c, -ENOMEM, false); break;
    }
}

/* A change the store refused is not done: the command fails, the state went
 * back to what it was, and nobody hears of a change. */
static void pr_store_refused(scsi_ctx_t *c, const pr_out_args_t *a, int err)
{
    if (err == -E2BIG && a->registering)   /* INSUFFICIENT REGISTRATION RESOURCES */
        scsi_set_sense(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x55, 0x04);
    else
        scsi_zvol_error(c, err, true);
}

void pr_out(scsi_ctx_t *c)
{
    pr_out_args_t a;
    if (!pr_out_decode(c, &a)) return;
    scsi_lu_t *lu = c->lu;
    pthread_mutex_lock(&lu->lock);
    if (a.aptpl && a.registering && !lu->pr_hook) {
        pthread_mutex_unlock(&lu->lock);
        bad_param(c, 20, 0);
        return;
    }
    /* What the state was, to go back to when the store refuses the new one. */
    wbuf_t before = {0};
    ua_notes_t un = {0};
    pr_outcome_t outcome = PR_NOMEM;
    if (lu->pr_hook) pr_serialize(lu, &before);
    if (!before.fail) outcome = pr_service_action(c, &a, &un);
    int err = outcome == PR_CHANGED ? pr_persist(lu) : 0;
    if (err) pr_load(lu, before.p, before.len);
    /* The unit attentions are raised under the lock, once the change stands. */
    ua_notes_done(c, &un, !err && (outcome == PR_CHANGED || outcome == PR_UNCHANGED));
    pthread_mutex_unlock(&lu->lock);
    free(before.p);
    if (err) pr_store_refused(c, &a, err);
    else pr_out_answer(c, outcome);
}
