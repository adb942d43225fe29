/*
 * SCSI targets, logical units and command dispatch.
 *
 * Every command goes through one table (scsi_ops) that knows, per opcode and
 * service action: the CDB length, the CDB usage map (which doubles as the
 * reserved-bit check: a bit set outside the map is INVALID FIELD IN CDB, and
 * REPORT SUPPORTED OPERATION CODES returns the same map), its reservation
 * class and whether it runs with a unit attention pending. scsi_execute does
 * the checks SAM/SPC put before any command, in this order: LUN configured
 * (else LOGICAL UNIT NOT SUPPORTED, except INQUIRY/REPORT LUNS/REQUEST SENSE),
 * opcode and service action known, CDB long enough, reserved bits and the
 * control byte (NACA and LINK are not supported), pending unit attention,
 * reservation conflict; then the handler.
 *
 * memory_only commands (a transport's connection thread, see scsi_cmd_t) stop
 * with would_block before the unit attention check unless the opcode is
 * OPF_MEMORY: the READs, whose handler reads with zvol_read_memory, and the
 * WRITEs, whose handler writes with ZVOL_WRITE_NOWAIT (a write that needs no
 * device and no durability wait completes on the connection thread: it sits
 * in memory like every acknowledged non-FUA write). A would_block command has
 * changed nothing and is executed again elsewhere.
 *
 * Unit attentions are kept per (nexus, LUN) in the nexus registry. A nexus
 * becomes known at scsi_nexus_login (with POWER ON on every LU) or at its first
 * command (without). One condition is reported per command, in priority order.
 * Adding or removing an LU raises REPORTED LUNS DATA HAS CHANGED on the others
 * (and POWER ON on the new one) for every known nexus.
 *
 * LU lifetime: commands pin the LU (tgt->lock, active count); scsi_lu_remove
 * takes it out of the table, then waits for the count to drain. A change
 * between active and ALUA standby (include/cairn/scsi.h) puts a new LU object
 * with the same identity in the slot and drains the old one the same way, so a
 * command runs wholly on a volume or wholly without one.
 */
#include "scsi_impl.h"

#include <cairn/assert.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- sense */

void scsi_set_sense(scsi_cmd_t *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
    memset(cmd->sense, 0, 18);
    cmd->sense[0] = 0x70;
    cmd->sense[2] = key & 0x0f;
    cmd->sense[7] = 10;
    cmd->sense[12] = asc;
    cmd->sense[13] = ascq;
    cmd->sense_len = 18;
    cmd->status = SCSI_STATUS_CHECK_CONDITION;
}

void scsi_sense_field(scsi_cmd_t *cmd, uint8_t key, uint8_t asc, uint8_t ascq, bool in_cdb,
                      int field_byte, int bit)
{
    scsi_set_sense(cmd, key, asc, ascq);
    if (field_byte < 0 || field_byte > 0xffff) return;
    cmd->sense[15] = (uint8_t)(0x80 | (in_cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | (bit & 7) : 0));
    put16(cmd->sense + 16, (uint16_t)field_byte);
}

void scsi_sense_info(scsi_cmd_t *cmd, uint32_t info)
{
    cmd->sense[0] |= 0x80;
    put32(cmd->sense + 3, info);
}

void scsi_zvol_error(scsi_ctx_t *c, int err, bool write)
{
    switch (err) {
    case -ERANGE: lba_out_of_range(c); break;
    case -EROFS: scsi_set_sense(c->cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x00); break;
    case -ENOSPC:
    case -EDQUOT: scsi_set_sense(c->cmd, SCSI_SENSE_DATA_PROTECT, 0x27, 0x07); break;
    case -EILSEQ: scsi_set_sense(c->cmd, SCSI_SENSE_MISCOMPARE, 0x1d, 0x00); break;
    case -EIO:
    case -ECKSUM:
        /* WRITE ERROR for writes, UNRECOVERED READ ERROR otherwise */
        scsi_set_sense(c->cmd, SCSI_SENSE_MEDIUM_ERROR, write ? 0x0c : 0x11, 0x00);
        break;
    case -EINVAL: bad_cdb(c, -1, -1); break;
    case -ENOMEM: c->cmd->status = SCSI_STATUS_BUSY; c->cmd->sense_len = 0; break;
    default:
        /* INTERNAL TARGET FAILURE */
        scsi_set_sense(c->cmd, SCSI_SENSE_HARDWARE_ERROR, 0x44, 0x00);
        break;
    }
}

void scsi_respond(scsi_ctx_t *c, const void *buf, uint32_t len, uint32_t alloc)
{
    uint32_t n = len < alloc ? len : alloc;
    if (n > c->cmd->data_in_cap) n = c->cmd->data_in_cap;
    if (n && c->cmd->data_in) memcpy(c->cmd->data_in, buf, n);
    else n = 0;
    c->cmd->data_in_len = n;
    c->cmd->status = SCSI_STATUS_GOOD;
    c->cmd->sense_len = 0;
}

/* ------------------------------------------------------------ nexuses */

static char *dupstr(const char *s) { return strdup(s ? s : ""); }

static nexus_rec_t *nexus_get_locked(scsi_target_t *tgt, const scsi_nexus_t *nx, bool *created)
{
    CAIRN_ASSERT(cairn_mutex_held(&tgt->ua_lock));
    for (nexus_rec_t *n = tgt->nexuses; n; n = n->next)
        if (n->id == nx->nexus_id) return n;
    nexus_rec_t *n = calloc(1, sizeof(*n));
    if (!n) return NULL;
    n->id = nx->nexus_id;
    n->initiator = dupstr(nx->initiator);
    n->target_port = dupstr(nx->target_port);
    n->rel_port = nx->rel_port_id;
    if (!n->initiator || !n->target_port) {
        free(n->initiator);
        free(n->target_port);
        free(n);
        return NULL;
    }
    n->next = tgt->nexuses;
    tgt->nexuses = n;
    if (created) *created = true;
    return n;
}

static void nexus_free(nexus_rec_t *n)
{
    free(n->initiator);
    free(n->target_port);
    free(n->ua);
    free(n);
}

static void ua_add_locked(nexus_rec_t *n, uint64_t lun, uint32_t mask)
{
    for (size_t i = 0; i < n->nua; i++)
        if (n->ua[i].lun == lun) {
            n->ua[i].mask |= mask;
            return;
        }
    if (n->nua == n->capua) {
        size_t cap = n->capua ? n->capua * 2 : 4;
        ua_entry_t *u = realloc(n->ua, cap * sizeof(*u));
        if (!u) return;   /* a lost unit attention is the least harm here */
        n->ua = u;
        n->capua = cap;
    }
    n->ua[n->nua++] = (ua_entry_t){lun, mask};
}

static void ua_drop_lun_locked(nexus_rec_t *n, uint64_t lun)
{
    for (size_t i = 0; i < n->nua; i++)
        if (n->ua[i].lun == lun) {
            n->ua[i] = n->ua[--n->nua];
            return;
        }
}

void scsi_ua_raise_it(scsi_target_t *tgt, uint64_t lun, const char *initiator,
                      const char *target_port, uint64_t skip_nexus, uint32_t mask)
{
    pthread_mutex_lock(&tgt->ua_lock);
    for (nexus_rec_t *n = tgt->nexuses; n; n = n->next) {
        if (n->id == skip_nexus || strcmp(n->initiator, initiator) != 0) continue;
        if (target_port && strcmp(n->target_port, target_port) != 0) continue;
        ua_add_locked(n, lun, mask);
    }
    pthread_mutex_unlock(&tgt->ua_lock);
}

void scsi_ua_raise_all(scsi_target_t *tgt, uint64_t lun, uint32_t mask, uint64_t skip_nexus)
{
    pthread_mutex_lock(&tgt->ua_lock);
    for (nexus_rec_t *n = tgt->nexuses; n; n = n->next)
        if (n->id != skip_nexus) ua_add_locked(n, lun, mask);
    pthread_mutex_unlock(&tgt->ua_lock);
}

static const struct { uint32_t bit; uint8_t asc, ascq; } ua_codes[] = {
    {UA_POWER_ON, 0x29, 0x00},       {UA_BUS_DEVICE_RESET, 0x29, 0x03},
    {UA_RES_PREEMPTED, 0x2a, 0x03},  {UA_RES_RELEASED, 0x2a, 0x04},
    {UA_REG_PREEMPTED, 0x2a, 0x05},  {UA_MODE_CHANGED, 0x2a, 0x01},
    {UA_CAPACITY_CHANGED, 0x2a, 0x09}, {UA_LUNS_CHANGED, 0x3f, 0x0e},
    {UA_CMDS_CLEARED, 0x2f, 0x00},   {UA_ALUA_CHANGED, 0x2a, 0x06},
};

bool scsi_ua_take(scsi_target_t *tgt, uint64_t nexus_id, uint64_t lun, uint8_t *key, uint8_t *asc,
                  uint8_t *ascq)
{
    bool found = false;
    pthread_mutex_lock(&tgt->ua_lock);
    for (nexus_rec_t *n = tgt->nexuses; n && !found; n = n->next) {
        if (n->id != nexus_id) continue;
        for (size_t i = 0; i < n->nua; i++) {
            if (n->ua[i].lun != lun || !n->ua[i].mask) continue;
            for (size_t k = 0; k < sizeof(ua_codes) / sizeof(ua_codes[0]); k++) {
                if (!(n->ua[i].mask & ua_codes[k].bit)) continue;
                n->ua[i].mask &= ~ua_codes[k].bit;
                /* a power-on or reset subsumes the reset it reports */
                if (ua_codes[k].bit == UA_POWER_ON) n->ua[i].mask &= ~UA_BUS_DEVICE_RESET;
                *key = SCSI_SENSE_UNIT_ATTENTION;
                *asc = ua_codes[k].asc;
                *ascq = ua_codes[k].ascq;
                found = true;
                break;
            }
            break;
        }
    }
    pthread_mutex_unlock(&tgt->ua_lock);
    return found;
}

void scsi_nexus_login(scsi_target_t *tgt, const scsi_nexus_t *nexus)
{
    pthread_mutex_lock(&tgt->lock);
    pthread_mutex_lock(&tgt->ua_lock);
    nexus_rec_t *n = nexus_get_locked(tgt, nexus, NULL);
    if (n)
        for (size_t l = 0; l < SCSI_MAX_LUNS && tgt->nlus; l++)
            if (tgt->lus[l]) ua_add_locked(n, l, UA_POWER_ON);
    pthread_mutex_unlock(&tgt->ua_lock);
    pthread_mutex_unlock(&tgt->lock);
}

void scsi_nexus_logout(scsi_target_t *tgt, const scsi_nexus_t *nexus)
{
    pthread_mutex_lock(&tgt->lock);
    for (size_t l = 0; l < SCSI_MAX_LUNS && tgt->nlus; l++) {
        scsi_lu_t *lu = tgt->lus[l];
        if (!lu) continue;
        pthread_mutex_lock(&lu->lock);
        pr_nexus_gone(lu, nexus->nexus_id);
        pthread_mutex_unlock(&lu->lock);
    }
    pthread_mutex_lock(&tgt->ua_lock);
    for (nexus_rec_t **pp = &tgt->nexuses; *pp; pp = &(*pp)->next)
        if ((*pp)->id == nexus->nexus_id) {
            nexus_rec_t *n = *pp;
            *pp = n->next;
            nexus_free(n);
            break;
        }
    pthread_mutex_unlock(&tgt->ua_lock);
    pthread_mutex_unlock(&tgt->lock);
}

static uint64_t decode_lun(uint64_t lun);

void scsi_reset(scsi_target_t *tgt, uint64_t lun)
{
    if (lun != UINT64_MAX) {
        lun = decode_lun(lun);
        if (lun == UINT64_MAX) return;   /* names no LU */
    }
    pthread_mutex_lock(&tgt->lock);
    for (size_t l = 0; l < SCSI_MAX_LUNS && tgt->nlus; l++) {
        scsi_lu_t *lu = tgt->lus[l];
        if (!lu || (lun != UINT64_MAX && lu->lun != lun)) continue;
        pthread_mutex_lock(&lu->lock);
        pr_reset(lu);
        pthread_mutex_unlock(&lu->lock);
        scsi_ua_raise_all(tgt, lu->lun, UA_BUS_DEVICE_RESET, UINT64_MAX);
    }
    pthread_mutex_unlock(&tgt->lock);
}

void scsi_nexus_tasks_cleared(scsi_target_t *tgt, uint64_t nexus_id, uint64_t lun)
{
    lun = decode_lun(lun);
    if (lun == UINT64_MAX) return;
    pthread_mutex_lock(&tgt->ua_lock);
    for (nexus_rec_t *n = tgt->nexuses; n; n = n->next)
        if (n->id == nexus_id) ua_add_locked(n, lun, UA_CMDS_CLEARED);
    pthread_mutex_unlock(&tgt->ua_lock);
}

/* -------------------------------------------------------- targets, LUs */

scsi_target_t *scsi_target_create(const char *name)
{
    scsi_target_t *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    t->name = dupstr(name);
    t->lus = calloc(SCSI_MAX_LUNS, sizeof(*t->lus));
    if (!t->name || !t->lus) {
        free(t->name);
        free(t->lus);
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->ua_lock, NULL);
    pthread_cond_init(&t->idle, NULL);
    return t;
}

void scsi_target_set_alua(scsi_target_t *tgt, const scsi_alua_t *alua) { tgt->alua = *alua; }

void scsi_target_destroy(scsi_target_t *tgt)
{
    if (!tgt) return;
    while (tgt->nexuses) {
        nexus_rec_t *n = tgt->nexuses;
        tgt->nexuses = n->next;
        nexus_free(n);
    }
    pthread_mutex_destroy(&tgt->lock);
    pthread_mutex_destroy(&tgt->ua_lock);
    pthread_cond_destroy(&tgt->idle);
    free(tgt->lus);
    free(tgt->name);
    free(tgt);
}

static void copy_padded(char *dst, size_t cap, const char *src, const char *dflt)
{
    snprintf(dst, cap, "%s", src && *src ? src : dflt);
}

/* A fixed IEEE company id for Cairn's NAA names plus a fixed 36-bit vendor
 * specific id; the 64-bit extension is the LU id, so the name is stable. */
#define CAIRN_NAA_OUI 0x0c3a1eu
#define CAIRN_NAA_VSID 0xca12e0001ull

void scsi_naa_from_id(uint8_t naa[16], uint64_t id)
{
    uint64_t hi = (uint64_t)6 << 60 | (uint64_t)CAIRN_NAA_OUI << 36 | CAIRN_NAA_VSID;
    put64(naa, hi);
    put64(naa + 8, id);
}

/* A new LU, not yet in the table: identity from opts, the volume zv (NULL:
 * standby) and its geometry. */
static scsi_lu_t *lu_new(scsi_target_t *tgt, uint64_t lun, zvol_t *zv, const scsi_lu_opts_t *opts,
                         uint32_t block_size, uint32_t volblocksize)
{
    scsi_lu_t *lu = calloc(1, sizeof(*lu));
    if (!lu) return NULL;
    lu->tgt = tgt;
    lu->lun = lun;
    lu->zv = zv;
    lu->standby = !zv;
    lu->block_size = block_size;
    lu->volblocksize = volblocksize;
    lu->id = opts->id;
    lu->thin = opts->thin;
    lu->readonly = opts->readonly || (zv && zvol_is_readonly(zv));
    copy_padded(lu->vendor, sizeof(lu->vendor), opts->vendor, "CAIRN");
    copy_padded(lu->product, sizeof(lu->product), opts->product, "Cairn volume");
    copy_padded(lu->revision, sizeof(lu->revision), opts->revision, "0.1");
    snprintf(lu->serial, sizeof(lu->serial), "%016llx", (unsigned long long)opts->id);
    scsi_naa_from_id(lu->naa, opts->id);
    pthread_mutex_init(&lu->lock, NULL);
    spc_mode_init(lu);
    return lu;
}

static void lu_free(scsi_lu_t *lu)
{
    pr_free(lu);
    for (unsigned i = 0; i < COPY_RESULTS_KEPT; i++) free(lu->copies[i].initiator);
    pthread_mutex_destroy(&lu->lock);
    free(lu);
}

/* Puts nlu (NULL: nothing) in old's slot and waits until no command runs on
 * old, which the caller then frees. tgt->lock held (released while waiting). */
static void lu_replace_locked(scsi_target_t *tgt, scsi_lu_t *old, scsi_lu_t *nlu)
{
    CAIRN_ASSERT(cairn_mutex_held(&tgt->lock));
    tgt->lus[old->lun] = nlu;
    if (!nlu) tgt->nlus--;
    old->removing = true;
    while (old->active > 0) pthread_cond_wait(&tgt->idle, &tgt->lock);
}

/* The same LU in the other ALUA state: every nexus is told once. */
static void lu_swap_state_locked(scsi_target_t *tgt, scsi_lu_t *old, scsi_lu_t *nlu)
{
    lu_replace_locked(tgt, old, nlu);
    scsi_ua_raise_all(tgt, nlu->lun, UA_ALUA_CHANGED, UINT64_MAX);
}

int scsi_lu_add(scsi_target_t *tgt, uint64_t lun, zvol_t *zv, const scsi_lu_opts_t *opts,
                scsi_lu_t **out)
{
    if (lun >= SCSI_MAX_LUNS || !zv || !opts) return -EINVAL;
    scsi_lu_t *lu = lu_new(tgt, lun, zv, opts, zvol_block_size(zv), zvol_volblocksize(zv));
    if (!lu) return -ENOMEM;
    lu->pr_hook = opts->pr_hook;
    lu->pr_hook_arg = opts->pr_hook_arg;
    lu->pr_persist_all = opts->pr_persist_all;
    /* Restored before the LU is visible: no command may see it without the
     * registrations and reservation it had. */
    if (opts->pr_state) {
        int err = pr_load(lu, opts->pr_state, opts->pr_state_len);
        if (err) {
            lu_free(lu);
            return err;
        }
        lu->pr_stored = true;
    }

    pthread_mutex_lock(&tgt->lock);
    scsi_lu_t *standby = tgt->lus[lun];
    if (standby && (!standby->standby || standby->id != opts->id)) {
        pthread_mutex_unlock(&tgt->lock);
        lu_free(lu);
        return -EEXIST;
    }
    if (standby) {
        lu_swap_state_locked(tgt, standby, lu);
        pthread_mutex_unlock(&tgt->lock);
        lu_free(standby);
        if (out) *out = lu;
        return 0;
    }
    tgt->lus[lun] = lu;
    tgt->nlus++;
    scsi_ua_raise_all(tgt, lun, UA_POWER_ON, UINT64_MAX);
    for (size_t l = 0; l < SCSI_MAX_LUNS; l++)
        if (tgt->lus[l] && l != lun) scsi_ua_raise_all(tgt, l, UA_LUNS_CHANGED, UINT64_MAX);
    pthread_mutex_unlock(&tgt->lock);
    if (out) *out = lu;
    return 0;
}

int scsi_lu_add_standby(scsi_target_t *tgt, uint64_t lun, const scsi_lu_opts_t *opts,
                        uint32_t block_size, uint32_t volblocksize)
{
    if (lun >= SCSI_MAX_LUNS || !opts || !block_size || volblocksize < block_size) return -EINVAL;
    scsi_lu_t *lu = lu_new(tgt, lun, NULL, opts, block_size, volblocksize);
    if (!lu) return -ENOMEM;
    pthread_mutex_lock(&tgt->lock);
    if (tgt->lus[lun]) {
        pthread_mutex_unlock(&tgt->lock);
        lu_free(lu);
        return -EEXIST;
    }
    tgt->lus[lun] = lu;
    tgt->nlus++;
    scsi_ua_raise_all(tgt, lun, UA_POWER_ON, UINT64_MAX);
    for (size_t l = 0; l < SCSI_MAX_LUNS; l++)
        if (tgt->lus[l] && l != lun) scsi_ua_raise_all(tgt, l, UA_LUNS_CHANGED, UINT64_MAX);
    pthread_mutex_unlock(&tgt->lock);
    return 0;
}

int scsi_lu_set_standby(scsi_target_t *tgt, uint64_t lun)
{
    lun = decode_lun(lun);
    if (lun >= SCSI_MAX_LUNS) return -ENOENT;
    pthread_mutex_lock(&tgt->lock);
    scsi_lu_t *old = tgt->lus[lun];
    if (!old || old->standby) {
        pthread_mutex_unlock(&tgt->lock);
        return old ? 0 : -ENOENT;
    }
    scsi_lu_opts_t opts = {.id = old->id, .vendor = old->vendor, .product = old->product,
                           .revision = old->revision, .thin = old->thin, .readonly = old->readonly};
    scsi_lu_t *twin = lu_new(tgt, lun, NULL, &opts, old->block_size, old->volblocksize);
    if (!twin) {
        pthread_mutex_unlock(&tgt->lock);
        return -ENOMEM;
    }
    lu_swap_state_locked(tgt, old, twin);
    pthread_mutex_unlock(&tgt->lock);
    lu_free(old);
    return 0;
}

bool scsi_lu_is_standby(scsi_target_t *tgt, uint64_t lun)
{
    scsi_lu_t *lu = scsi_lu_pin(tgt, decode_lun(lun));
    if (!lu) return false;
    bool standby = lu->standby;
    scsi_lu_unpin(lu);
    return standby;
}

int scsi_lu_remove(scsi_target_t *tgt, uint64_t lun)
{
    if (lun >= SCSI_MAX_LUNS) return -ENOENT;
    pthread_mutex_lock(&tgt->lock);
    scsi_lu_t *lu = tgt->lus[lun];
    if (!lu) {
        pthread_mutex_unlock(&tgt->lock);
        return -ENOENT;
    }
    lu_replace_locked(tgt, lu, NULL);
    pthread_mutex_lock(&tgt->ua_lock);
    for (nexus_rec_t *n = tgt->nexuses; n; n = n->next) ua_drop_lun_locked(n, lun);
    pthread_mutex_unlock(&tgt->ua_lock);
    for (size_t l = 0; l < SCSI_MAX_LUNS && tgt->nlus; l++)
        if (tgt->lus[l]) scsi_ua_raise_all(tgt, l, UA_LUNS_CHANGED, UINT64_MAX);
    pthread_mutex_unlock(&tgt->lock);
    lu_free(lu);
    return 0;
}

void scsi_lu_capacity_changed(scsi_target_t *tgt, uint64_t lun)
{
    lun = decode_lun(lun);
    if (lun == UINT64_MAX) return;
    scsi_ua_raise_all(tgt, lun, UA_CAPACITY_CHANGED, UINT64_MAX);
}

scsi_lu_t *scsi_lu_pin(scsi_target_t *tgt, uint64_t lun)
{
    if (lun >= SCSI_MAX_LUNS) return NULL;
    pthread_mutex_lock(&tgt->lock);
    scsi_lu_t *lu = tgt->lus[lun];
    if (lu) lu->active++;
    pthread_mutex_unlock(&tgt->lock);
    return lu;
}

void scsi_lu_unpin(scsi_lu_t *lu)
{
    scsi_target_t *tgt = lu->tgt;
    pthread_mutex_lock(&tgt->lock);
    if (--lu->active == 0 && lu->removing) pthread_cond_broadcast(&tgt->idle);
    pthread_mutex_unlock(&tgt->lock);
}

scsi_lu_t *scsi_lu_find_naa(scsi_target_t *tgt, const uint8_t naa[16])
{
    scsi_lu_t *found = NULL;
    pthread_mutex_lock(&tgt->lock);
    for (size_t l = 0; l < SCSI_MAX_LUNS && tgt->nlus; l++) {
        scsi_lu_t *lu = tgt->lus[l];
        if (lu && !lu->standby && memcmp(lu->naa, naa, 16) == 0) {
            lu->active++;
            found = lu;
            break;
        }
    }
    pthread_mutex_unlock(&tgt->lock);
    return found;
}

/* Plain LUN numbers and SAM 8-byte LUN fields (peripheral and flat addressing). */
static uint64_t decode_lun(uint64_t lun)
{
    if (lun < SCSI_MAX_LUNS) return lun;
    if (lun & 0x0000ffffffffffffull) return UINT64_MAX;
    unsigned b0 = (unsigned)(lun >> 56), b1 = (unsigned)(lun >> 48) & 0xff;
    switch (b0 >> 6) {
    case 0: return b0 == 0 ? b1 : UINT64_MAX;
    case 1: return (uint64_t)(b0 & 0x3f) << 8 | b1;
    default: return UINT64_MAX;
    }
}

/* ------------------------------------------------------- opcode table */

#define U(...) {__VA_ARGS__}
const scsi_op_t scsi_ops[] = {
    {0x00, -1, 6, PRC_ALLOW, 0, U(0x00, 0, 0, 0, 0, 0), spc_test_unit_ready, "TEST UNIT READY"},
    {0x03, -1, 6, PRC_ALLOW, OPF_NO_UA | OPF_NO_LU | OPF_RES2_OK, U(0x03, 0x01, 0, 0, 0xff, 0),
     spc_request_sense, "REQUEST SENSE"},
    {0x08, -1, 6, PRC_READ, OPF_MEMORY, U(0x08, 0x1f, 0xff, 0xff, 0xff, 0), sbc_read, "READ(6)"},
    {0x0a, -1, 6, PRC_WRITE, OPF_MEMORY, U(0x0a, 0x1f, 0xff, 0xff, 0xff, 0), sbc_write, "WRITE(6)"},
    {0x12, -1, 6, PRC_ALLOW, OPF_NO_UA | OPF_NO_LU | OPF_RES2_OK, U(0x12, 0x01, 0xff, 0xff, 0xff, 0),
     spc_inquiry, "INQUIRY"},
    {0x15, -1, 6, PRC_WRITE, 0, U(0x15, 0x11, 0, 0, 0xff, 0), spc_mode_select, "MODE SELECT(6)"},
    {0x16, -1, 6, PRC_ALLOW, 0, U(0x16, 0, 0, 0, 0, 0), pr_reserve2, "RESERVE(6)"},
    {0x17, -1, 6, PRC_ALLOW, OPF_RES2_OK, U(0x17, 0, 0, 0, 0, 0), pr_release2, "RELEASE(6)"},
    {0x1a, -1, 6, PRC_READ, 0, U(0x1a, 0x08, 0xff, 0xff, 0xff, 0), spc_mode_sense, "MODE SENSE(6)"},
    {0x1b, -1, 6, PRC_WRITE, 0, U(0x1b, 0x01, 0, 0x0f, 0xf7, 0), spc_start_stop, "START STOP UNIT"},
    {0x1e, -1, 6, PRC_WRITE, 0, U(0x1e, 0, 0, 0, 0x03, 0), spc_prevent_allow, "PREVENT ALLOW MEDIUM REMOVAL"},
    {0x25, -1, 10, PRC_ALLOW, 0, U(0x25, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0), sbc_read_capacity10,
     "READ CAPACITY(10)"},
    {0x28, -1, 10, PRC_READ, OPF_MEMORY, U(0x28, 0x1e, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0), sbc_read,
     "READ(10)"},
    {0x2a, -1, 10, PRC_WRITE, OPF_MEMORY, U(0x2a, 0x1a, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0), sbc_write,
     "WRITE(10)"},
    {0x2e, -1, 10, PRC_WRITE, 0, U(0x2e, 0x16, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0), sbc_write,
     "WRITE AND VERIFY(10)"},
    {0x2f, -1, 10, PRC_READ, 0, U(0x2f, 0x16, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0), sbc_verify,
     "VERIFY(10)"},
    {0x34, -1, 10, PRC_READ, 0, U(0x34, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0), sbc_prefetch,
     "PRE-FETCH(10)"},
    {0x35, -1, 10, PRC_WRITE, 0, U(0x35, 0x06, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0),
     sbc_sync_cache, "SYNCHRONIZE CACHE(10)"},
    {0x37, -1, 10, PRC_READ, 0, U(0x37, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0), sbc_read_defect_data,
     "READ DEFECT DATA(10)"},
    {0x41, -1, 10, PRC_WRITE, 0, U(0x41, 0x08, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0),
     sbc_write_same, "WRITE SAME(10)"},
    {0x42, -1, 10, PRC_WRITE, 0, U(0x42, 0, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0), sbc_unmap, "UNMAP"},
    {0x55, -1, 10, PRC_WRITE, 0, U(0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0), spc_mode_select,
     "MODE SELECT(10)"},
    {0x56, -1, 10, PRC_ALLOW, 0, U(0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0), pr_reserve2, "RESERVE(10)"},
    {0x57, -1, 10, PRC_ALLOW, OPF_RES2_OK, U(0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0), pr_release2, "RELEASE(10)"},
    {0x5a, -1, 10, PRC_READ, 0, U(0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0), spc_mode_sense,
     "MODE SENSE(10)"},
    {0x5e, 0x00, 10, PRC_ALLOW, 0, U(0x5e, 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, 0), pr_in,
     "PERSISTENT RESERVE IN/READ KEYS"},
    {0x5e, 0x01, 10, PRC_ALLOW, 0, U(0x5e, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, 0), pr_in,
     "PERSISTENT RESERVE IN/READ RESERVATION"},
    {0x5e, 0x02, 10, PRC_ALLOW, 0, U(0x5e, 0x02, 0, 0, 0, 0, 0, 0xff, 0xff, 0), pr_in,
     "PERSISTENT RESERVE IN/REPORT CAPABILITIES"},
    {0x5e, 0x03, 10, PRC_ALLOW, 0, U(0x5e, 0x03, 0, 0, 0, 0, 0, 0xff, 0xff, 0), pr_in,
     "PERSISTENT RESERVE IN/READ FULL STATUS"},
#define PROUT(sa, nm) \
    {0x5f, sa, 10, PRC_ALLOW, 0, U(0x5f, sa, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0), pr_out, \
     "PERSISTENT RESERVE OUT/" nm}
    PROUT(0x00, "REGISTER"), PROUT(0x01, "RESERVE"), PROUT(0x02, "RELEASE"), PROUT(0x03, "CLEAR"),
    PROUT(0x04, "PREEMPT"), PROUT(0x05, "PREEMPT AND ABORT"), PROUT(0x06, "REGISTER AND IGNORE EXISTING KEY"),
#undef PROUT
    {0x83, 0x00, 16, PRC_WRITE, 0,
     U(0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0), sbc_xcopy,
     "EXTENDED COPY(LID1)"},
    {0x84, 0x00, 16, PRC_ALLOW, 0,
     U(0x84, 0x00, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0), sbc_receive_copy_results,
     "RECEIVE COPY RESULTS/COPY STATUS"},
    {0x84, 0x03, 16, PRC_ALLOW, 0,
     U(0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0), sbc_receive_copy_results,
     "RECEIVE COPY RESULTS/OPERATING PARAMETERS"},
    {0x88, -1, 16, PRC_READ, OPF_MEMORY,
     U(0x88, 0x1e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_read, "READ(16)"},
    {0x89, -1, 16, PRC_WRITE, 0,
     U(0x89, 0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x1f, 0),
     sbc_compare_and_write, "COMPARE AND WRITE"},
    {0x8a, -1, 16, PRC_WRITE, OPF_MEMORY,
     U(0x8a, 0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_write, "WRITE(16)"},
    {0x8b, -1, 16, PRC_WRITE, 0,
     U(0x8b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_or_write, "ORWRITE(16)"},
    {0x8e, -1, 16, PRC_WRITE, 0,
     U(0x8e, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_write, "WRITE AND VERIFY(16)"},
    {0x8f, -1, 16, PRC_READ, 0,
     U(0x8f, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_verify, "VERIFY(16)"},
    {0x90, -1, 16, PRC_READ, 0,
     U(0x90, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_prefetch, "PRE-FETCH(16)"},
    {0x91, -1, 16, PRC_WRITE, 0,
     U(0x91, 0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_sync_cache, "SYNCHRONIZE CACHE(16)"},
    {0x93, -1, 16, PRC_WRITE, 0,
     U(0x93, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_write_same, "WRITE SAME(16)"},
    {0x9e, 0x10, 16, PRC_ALLOW, 0,
     U(0x9e, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0),
     sbc_read_capacity16, "READ CAPACITY(16)"},
    {0x9e, 0x12, 16, PRC_READ, 0,
     U(0x9e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0),
     sbc_get_lba_status, "GET LBA STATUS"},
    {0xa0, -1, 12, PRC_ALLOW, OPF_NO_UA | OPF_NO_LU | OPF_RES2_OK,
     U(0xa0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0), spc_report_luns, "REPORT LUNS"},
    {0xa3, 0x0a, 12, PRC_ALLOW, OPF_RES2_OK, U(0xa3, 0xea, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0),
     spc_report_tpgs, "REPORT TARGET PORT GROUPS"},
    {0xa3, 0x0c, 12, PRC_ALLOW, OPF_RES2_OK,
     U(0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0), spc_report_opcodes,
     "REPORT SUPPORTED OPERATION CODES"},
    {0xa3, 0x0d, 12, PRC_ALLOW, OPF_RES2_OK, U(0xa3, 0x0d, 0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0),
     spc_report_tmfs, "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS"},
    {0xa8, -1, 12, PRC_READ, OPF_MEMORY, U(0xa8, 0x1e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_read, "READ(12)"},
    {0xaa, -1, 12, PRC_WRITE, OPF_MEMORY, U(0xaa, 0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_write, "WRITE(12)"},
    {0xae, -1, 12, PRC_WRITE, 0, U(0xae, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_write, "WRITE AND VERIFY(12)"},
    {0xaf, -1, 12, PRC_READ, 0, U(0xaf, 0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0),
     sbc_verify, "VERIFY(12)"},
    {0xb7, -1, 12, PRC_READ, 0, U(0xb7, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0),
     sbc_read_defect_data, "READ DEFECT DATA(12)"},
};
#undef U
const size_t scsi_nops = sizeof(scsi_ops) / sizeof(scsi_ops[0]);

/* Opcodes whose byte 1 carries a service action. */
const char *scsi_command_name(const uint8_t *cdb, uint64_t *key)
{
    int sa = scsi_op_sa(cdb);
    bool known;
    const scsi_op_t *op = scsi_op_find(cdb[0], sa, &known);
    *key = (uint64_t)cdb[0] | (uint64_t)(sa + 1) << 8;
    return op ? op->name : NULL;
}

int scsi_op_sa(const uint8_t *cdb)
{
    switch (cdb[0]) {
    case 0x5e: case 0x5f: case 0x83: case 0x84: case 0x9e: case 0xa3: return cdb[1] & 0x1f;
    default: return -1;
    }
}

const scsi_op_t *scsi_op_find(uint8_t opcode, int sa, bool *opcode_known)
{
    if (opcode_known) *opcode_known = false;
    for (size_t i = 0; i < scsi_nops; i++) {
        if (scsi_ops[i].opcode != opcode) continue;
        if (opcode_known) *opcode_known = true;
        if (scsi_ops[i].sa < 0 || scsi_ops[i].sa == sa) return &scsi_ops[i];
    }
    return NULL;
}

/* -------------------------------------------------------- data lengths */

static uint64_t xfer_blocks(const uint8_t *cdb)
{
    switch (cdb[0]) {
    case 0x08: case 0x0a: return cdb[4] ? cdb[4] : 256;
    case 0x28: case 0x2a: case 0x2e: case 0x2f: return be16(cdb + 7);
    case 0xa8: case 0xaa: case 0xae: case 0xaf: return be32(cdb + 6);
    case 0x88: case 0x8a: case 0x8b: case 0x8e: case 0x8f: return be32(cdb + 10);
    case 0x89: return cdb[13];
    default: return 0;
    }
}

static int cdb_transfer_bs(const uint8_t *cdb, uint8_t cdb_len, uint32_t bs, scsi_dir_t *dir,
                           uint32_t *bytes)
{
    *dir = SCSI_DIR_NONE;
    *bytes = 0;
    if (!cdb_len) return -EINVAL;
    bool known;
    const scsi_op_t *op = scsi_op_find(cdb[0], scsi_op_sa(cdb), &known);
    if (!op) return 0;
    if (cdb_len < op->cdb_len) return -EINVAL;
    uint64_t n = 0;
    scsi_dir_t d = SCSI_DIR_READ;
    switch (cdb[0]) {
    case 0x08: case 0x28: case 0xa8: case 0x88: n = xfer_blocks(cdb) * bs; break;
    case 0x0a: case 0x2a: case 0xaa: case 0x8a: case 0x8b: case 0x2e: case 0xae: case 0x8e:
        n = xfer_blocks(cdb) * bs;
        d = SCSI_DIR_WRITE;
        break;
    case 0x2f: case 0xaf: case 0x8f: {
        unsigned bytchk = (cdb[1] >> 1) & 3;
        n = bytchk == 1 ? xfer_blocks(cdb) * bs : bytchk == 3 ? bs : 0;
        d = SCSI_DIR_WRITE;
        break;
    }
    case 0x89: n = 2 * xfer_blocks(cdb) * bs; d = SCSI_DIR_WRITE; break;
    case 0x41: n = bs; d = SCSI_DIR_WRITE; break;
    case 0x93: n = (cdb[1] & 1) ? 0 : bs; d = SCSI_DIR_WRITE; break;
    case 0x42: case 0x55: n = be16(cdb + 7); d = SCSI_DIR_WRITE; break;
    case 0x15: n = cdb[4]; d = SCSI_DIR_WRITE; break;
    case 0x5f: n = be32(cdb + 5); d = SCSI_DIR_WRITE; break;
    case 0x83: n = be32(cdb + 10); d = SCSI_DIR_WRITE; break;
    case 0x03: case 0x12: n = cdb[0] == 0x12 ? be16(cdb + 3) : cdb[4]; break;
    case 0x1a: n = cdb[4]; break;
    case 0x37: case 0x5a: case 0x5e: n = be16(cdb + 7); break;
    case 0x25: n = 8; break;
    case 0x9e: case 0x84: n = be32(cdb + 10); break;
    case 0xa0: case 0xa3: case 0xb7: n = be32(cdb + 6); break;
    default: n = 0; break;
    }
    if (n == 0) d = SCSI_DIR_NONE;
    *dir = d;
    if (n > UINT32_MAX) return -EINVAL;
    *bytes = (uint32_t)n;
    return 0;
}

int scsi_cdb_transfer(scsi_target_t *tgt, uint64_t lun, const uint8_t *cdb, uint8_t cdb_len,
                      scsi_dir_t *dir, uint32_t *bytes)
{
    uint32_t bs = ZVOL_DEFAULT_BLOCK_SIZE;
    scsi_lu_t *lu = scsi_lu_pin(tgt, decode_lun(lun));
    if (lu) {
        bs = lu->block_size;
        scsi_lu_unpin(lu);
    }
    return cdb_transfer_bs(cdb, cdb_len, bs, dir, bytes);
}

/* ------------------------------------------------------------ execute */

/* Reserved bits, NACA and LINK: the byte and bit of the first offender. */
static bool cdb_fields_ok(scsi_ctx_t *c, const scsi_op_t *op)
{
    const uint8_t *cdb = c->cdb;
    unsigned last = op->cdb_len - 1u;
    for (unsigned i = 1; i < last; i++) {
        uint8_t allowed = op->usage[i];
        if (i == 1 && op->sa >= 0) allowed |= 0x1f;
        uint8_t bad = cdb[i] & (uint8_t)~allowed;
        if (bad) {
            int bit = 7;
            while (!(bad & (1u << bit))) bit--;
            bad_cdb(c, (int)i, bit);
            return false;
        }
    }
    if (cdb[last] & 0x05) {   /* NACA, LINK */
        bad_cdb(c, (int)last, (cdb[last] & 0x04) ? 2 : 0);
        return false;
    }
    return true;
}

/* What an LU in the transitioning ALUA state still runs (SPC-4 5.15.2.6):
 * INQUIRY, REPORT LUNS, REQUEST SENSE (the commands that ignore unit
 * attentions), REPORT TARGET PORT GROUPS and the other MAINTENANCE IN
 * reports, PERSISTENT RESERVE IN. */
static bool alua_transition_ok(const scsi_op_t *op)
{
    return (op->flags & OPF_NO_UA) || op->opcode == 0xa3 || op->opcode == 0x5e;
}

/* What a standby LU runs (SPC-4 5.15.2.4.4, less what needs the state the
 * partner holds, such as reservations): the commands that ignore unit
 * attentions and the MAINTENANCE IN reports. */
static bool alua_standby_ok(const scsi_op_t *op)
{
    return (op->flags & OPF_NO_UA) || op->opcode == 0xa3;
}

uint8_t scsi_lu_alua_state(scsi_lu_t *lu)
{
    if (lu->standby) return ALUA_STANDBY;
    return atomic_load(&lu->transitioning) ? ALUA_TRANSITIONING : ALUA_ACTIVE_OPTIMIZED;
}

void scsi_lu_set_transitioning(scsi_target_t *tgt, uint64_t lun)
{
    scsi_lu_t *lu = scsi_lu_pin(tgt, decode_lun(lun));
    if (!lu) return;
    atomic_store(&lu->transitioning, true);
    scsi_lu_unpin(lu);
}

void scsi_execute(scsi_target_t *tgt, scsi_cmd_t *cmd)
{
    static const scsi_nexus_t anonymous = {.initiator = "", .target_port = "", .rel_port_id = 1};
    cmd->status = SCSI_STATUS_GOOD;
    cmd->data_in_len = 0;
    cmd->sense_len = 0;
    cmd->would_block = false;
    scsi_ctx_t c = {.tgt = tgt, .cmd = cmd, .cdb = cmd->cdb,
                    .nexus = cmd->nexus ? cmd->nexus : &anonymous, .lun = decode_lun(cmd->lun)};
    if (cmd->cdb_len == 0 || cmd->cdb_len > SCSI_CDB_MAX) {
        bad_cdb(&c, 0, -1);
        return;
    }
    if (cmd->nexus) {
        pthread_mutex_lock(&tgt->ua_lock);
        (void)nexus_get_locked(tgt, cmd->nexus, NULL);
        pthread_mutex_unlock(&tgt->ua_lock);
    }
    c.lu = c.lun == UINT64_MAX ? NULL : scsi_lu_pin(tgt, c.lun);

    bool known;
    const scsi_op_t *op = scsi_op_find(cmd->cdb[0], scsi_op_sa(cmd->cdb), &known);
    if (!c.lu && !(op && (op->flags & OPF_NO_LU))) {
        scsi_set_sense(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        return;
    }
    if (!op) {
        if (known) bad_cdb(&c, 1, 4);
        else scsi_set_sense(cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
        goto out;
    }
    if (cmd->cdb_len < op->cdb_len) {
        bad_cdb(&c, 0, -1);
        goto out;
    }
    if (!cdb_fields_ok(&c, op)) goto out;
    if (cmd->memory_only && !(op->flags & OPF_MEMORY)) {
        cmd->would_block = true; /* before anything with an effect (a unit attention) */
        goto out;
    }
    if (c.lu && !(op->flags & OPF_NO_UA)) {
        uint8_t key, asc, ascq;
        if (scsi_ua_take(tgt, c.nexus->nexus_id, c.lu->lun, &key, &asc, &ascq)) {
            scsi_set_sense(cmd, key, asc, ascq);
            goto out;
        }
    }
    if (c.lu && c.lu->standby && !alua_standby_ok(op)) {
        scsi_set_sense(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x0b);
        goto out;
    }
    if (c.lu && atomic_load(&c.lu->transitioning) && !alua_transition_ok(op)) {
        scsi_set_sense(cmd, SCSI_SENSE_NOT_READY, 0x04, 0x0a);
        goto out;
    }
    if (c.lu) {
        pthread_mutex_lock(&c.lu->lock);
        uint8_t prc = op->pr_class;
        /* PREVENT=0 and START STOP UNIT with START=1 are allowed (SBC-3 4.17) */
        if ((op->opcode == 0x1e && !(c.cdb[4] & 3)) || (op->opcode == 0x1b && (c.cdb[4] & 1)))
            prc = PRC_ALLOW;
        bool ok = pr_allowed(c.lu, c.nexus, prc, op->flags);
        pthread_mutex_unlock(&c.lu->lock);
        if (!ok) {
            res_conflict(&c);
            goto out;
        }
    }
    op->fn(&c);
out:
    if (c.lu) scsi_lu_unpin(c.lu);
}
