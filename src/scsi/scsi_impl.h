/*
 * Internals of the SCSI layer shared by its files: scsi.c (targets, LUs,
 * nexuses, unit attentions, the opcode table and dispatch), scsi_spc.c
 * (primary commands), scsi_sbc.c (block commands, EXTENDED COPY) and
 * scsi_pr.c (persistent and SPC-2 reservations).
 *
 * Locks, outermost first: tgt->lock (the LU table), lu->lock (reservations,
 * mode pages, copy results), tgt->ua_lock (the nexus registry and its pending
 * unit attentions; nothing is called while it is held).
 */
#ifndef SCSI_IMPL_H
#define SCSI_IMPL_H

#include <cairn/endian.h>
#include <cairn/scsi.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#define SCSI_MAX_LUNS 16384u

/* Unit attention conditions, in the order they are reported (lowest bit first). */
enum {
    UA_POWER_ON = 1u << 0,          /* 29/00 */
    UA_BUS_DEVICE_RESET = 1u << 1,  /* 29/03 */
    UA_RES_PREEMPTED = 1u << 2,     /* 2A/03 */
    UA_RES_RELEASED = 1u << 3,      /* 2A/04 */
    UA_REG_PREEMPTED = 1u << 4,     /* 2A/05 */
    UA_MODE_CHANGED = 1u << 5,      /* 2A/01 */
    UA_CAPACITY_CHANGED = 1u << 6,  /* 2A/09 */
    UA_LUNS_CHANGED = 1u << 7,      /* 3F/0E */
    UA_CMDS_CLEARED = 1u << 8,      /* 2F/00 */
    UA_ALUA_CHANGED = 1u << 9,      /* 2A/06 ASYMMETRIC ACCESS STATE CHANGED */
};

typedef struct ua_entry {
    uint64_t lun;
    uint32_t mask;
} ua_entry_t;

typedef struct nexus_rec {
    uint64_t id;
    char *initiator, *target_port;
    uint16_t rel_port;
    ua_entry_t *ua;
    size_t nua, capua;
    struct nexus_rec *next;
} nexus_rec_t;

/* One persistent reservation registration (an I_T nexus and its key). */
typedef struct pr_reg {
    char *initiator;
    char *target_port;   /* NULL: registered through every target port (ALL_TG_PT) */
    uint16_t rel_port;
    uint64_t key;
    struct pr_reg *next;
} pr_reg_t;

enum {
    PR_WE = 1, PR_EA = 3, PR_WE_RO = 5, PR_EA_RO = 6, PR_WE_AR = 7, PR_EA_AR = 8,
};

typedef struct copy_result {
    char *initiator;
    uint8_t list_id;
    uint8_t status;     /* COPY MANAGER STATUS */
    uint16_t segments;  /* segments processed */
    uint64_t bytes;
} copy_result_t;

#define COPY_RESULTS_KEPT 16

/* Caching, control and informational exceptions pages: current values. */
#define MODE_PAGES 3

struct scsi_lu {
    scsi_target_t *tgt;
    uint64_t lun;
    zvol_t *zv;
    uint64_t id;
    char vendor[9], product[17], revision[5];
    char serial[17];
    uint8_t naa[16];
    bool thin, readonly;

    int active;          /* commands running (under tgt->lock) */
    bool removing;
    atomic_bool transitioning;   /* ALUA: its pool is being exported (scsi_lu_set_transitioning) */
    bool standby;        /* ALUA standby: identity only, zv is NULL (scsi_lu_add_standby) */
    uint32_t block_size, volblocksize;   /* the geometry INQUIRY reports, also when standby */

    pthread_mutex_t lock;
    /* mode pages, current values (full pages with header bytes) */
    uint8_t page[MODE_PAGES][20];
    bool wce, swp;       /* copies of two page bits read on every write (atomics) */
    /* SPC-2 RESERVE(6/10) */
    bool res2;
    uint64_t res2_nexus;
    /* persistent reservations */
    pr_reg_t *regs;
    uint32_t pr_generation;
    pr_reg_t *holder;    /* NULL: no reservation; any registrant for the AR types */
    uint8_t pr_type;
    bool pr_aptpl;       /* the last registration asked to persist through power loss */
    bool pr_stored;      /* the hook holds a state (so turning APTPL off must erase it) */
    bool pr_persist_all; /* the hook gets every change, APTPL or not (HA) */
    scsi_pr_hook_fn pr_hook;
    void *pr_hook_arg;
    copy_result_t copies[COPY_RESULTS_KEPT];
    unsigned copies_next;
};

struct scsi_target {
    char *name;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    scsi_lu_t **lus;     /* SCSI_MAX_LUNS slots */
    size_t nlus;
    pthread_mutex_t ua_lock;
    nexus_rec_t *nexuses;
    scsi_alua_t alua;    /* set before the first command (scsi_target_set_alua) */
};

/* What a command handler sees. */
typedef struct scsi_ctx {
    scsi_target_t *tgt;
    scsi_lu_t *lu;        /* NULL for an unconfigured LUN */
    scsi_cmd_t *cmd;
    const uint8_t *cdb;
    const scsi_nexus_t *nexus;
    uint64_t lun;         /* decoded LUN number, or UINT64_MAX when not decodable */
} scsi_ctx_t;

typedef void (*scsi_handler_fn)(scsi_ctx_t *c);

/* Reservation classes of a command (SPC-4 5.12.1, SBC-3 4.17). */
enum {
    PRC_ALLOW = 0,  /* allowed under any reservation */
    PRC_READ,       /* conflicts under the exclusive-access types only */
    PRC_WRITE,      /* conflicts under every type */
};

enum {
    OPF_NO_UA = 1 << 0,     /* runs (and does not clear) with a unit attention pending */
    OPF_NO_LU = 1 << 1,     /* answered for an unconfigured LUN too */
    OPF_RES2_OK = 1 << 2,   /* allowed while another nexus holds RESERVE(6/10) */
    OPF_MEMORY = 1 << 3,    /* can run memory_only (see scsi_cmd_t) */
};

typedef struct scsi_op {
    uint8_t opcode;
    int16_t sa;           /* service action, -1 when the opcode has none */
    uint8_t cdb_len;
    uint8_t pr_class;
    uint8_t flags;
    uint8_t usage[16];    /* CDB usage map (byte 0: opcode, SA bits: the SA) */
    scsi_handler_fn fn;
    const char *name;
} scsi_op_t;

extern const scsi_op_t scsi_ops[];
extern const size_t scsi_nops;
const scsi_op_t *scsi_op_find(uint8_t opcode, int sa, bool *opcode_known);
int scsi_op_sa(const uint8_t *cdb);   /* the SA the opcode carries, -1 for none */

/* ---- helpers ---- */
/* SCSI is big-endian throughout. */
#define be16 cairn_get_be16
#define be24 cairn_get_be24
#define be32 cairn_get_be32
#define be64 cairn_get_be64
#define put16 cairn_put_be16
#define put24 cairn_put_be24
#define put32 cairn_put_be32
#define put64 cairn_put_be64

/* Sense shorthands. field_byte < 0: no sense-key-specific field pointer;
 * bit < 0: no bit pointer. */
void scsi_sense_field(scsi_cmd_t *cmd, uint8_t key, uint8_t asc, uint8_t ascq, bool in_cdb,
                      int field_byte, int bit);
static inline void bad_cdb(scsi_ctx_t *c, int byte, int bit)
{
    scsi_sense_field(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x24, 0x00, true, byte, bit);
}
static inline void bad_param(scsi_ctx_t *c, int byte, int bit)
{
    scsi_sense_field(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x26, 0x00, false, byte, bit);
}
static inline void param_len_error(scsi_ctx_t *c)
{
    scsi_set_sense(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a, 0x00);
}
static inline void lba_out_of_range(scsi_ctx_t *c)
{
    scsi_set_sense(c->cmd, SCSI_SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
}
static inline void res_conflict(scsi_ctx_t *c)
{
    c->cmd->status = SCSI_STATUS_RESERVATION_CONFLICT;
    c->cmd->sense_len = 0;
}
/* Sets the INFORMATION field (VALID bit) of the fixed sense already in cmd. */
void scsi_sense_info(scsi_cmd_t *cmd, uint32_t info);
/* Maps a zvol errno to sense; write says whether the command wrote. */
void scsi_zvol_error(scsi_ctx_t *c, int err, bool write);
/* Returns parameter/response data: copies min(len, alloc, data_in_cap). */
void scsi_respond(scsi_ctx_t *c, const void *buf, uint32_t len, uint32_t alloc);
/* The parameter list the initiator sent: at most `declared` bytes. */
static inline uint32_t param_len(scsi_ctx_t *c, uint32_t declared)
{
    uint32_t n = c->cmd->data_out ? c->cmd->data_out_len : 0;
    return n < declared ? n : declared;
}

/* Unit attentions: raise for every nexus matching (initiator, target_port);
 * target_port NULL matches any port; skip_nexus is left out. */
void scsi_ua_raise_it(scsi_target_t *tgt, uint64_t lun, const char *initiator,
                      const char *target_port, uint64_t skip_nexus, uint32_t mask);
void scsi_ua_raise_all(scsi_target_t *tgt, uint64_t lun, uint32_t mask, uint64_t skip_nexus);
/* Takes the highest-priority pending UA of (nexus, lun), fills sense; false when none. */
bool scsi_ua_take(scsi_target_t *tgt, uint64_t nexus_id, uint64_t lun, uint8_t *key, uint8_t *asc,
                  uint8_t *ascq);
scsi_lu_t *scsi_lu_find_naa(scsi_target_t *tgt, const uint8_t naa[16]);
void scsi_naa_from_id(uint8_t naa[16], uint64_t id);
/* Looks up and pins an LU (unpinned with scsi_lu_unpin); NULL when none. */
scsi_lu_t *scsi_lu_pin(scsi_target_t *tgt, uint64_t lun);
void scsi_lu_unpin(scsi_lu_t *lu);

/* ---- primary commands (scsi_spc.c) ---- */
void spc_test_unit_ready(scsi_ctx_t *c);
void spc_request_sense(scsi_ctx_t *c);
void spc_inquiry(scsi_ctx_t *c);
void spc_report_luns(scsi_ctx_t *c);
void spc_mode_sense(scsi_ctx_t *c);
void spc_mode_select(scsi_ctx_t *c);
void spc_report_tpgs(scsi_ctx_t *c);
/* The REPORT TARGET PORT GROUPS parameter data for alua seen through a port
 * of the local group with relative id rel_port (extended: the format 1
 * header), the local group in local_state (ALUA_*; the partner's group is
 * active/optimized while the local one is standby, standby otherwise); at
 * most cap bytes are written, the full length is returned. */
uint32_t spc_rtpg_encode(const scsi_alua_t *alua, uint8_t local_state, uint16_t rel_port,
                         bool extended, uint8_t *buf, uint32_t cap);
/* Asymmetric access states (SPC-4 table 166) Cairn reports. */
enum { ALUA_ACTIVE_OPTIMIZED = 0x0, ALUA_STANDBY = 0x2, ALUA_TRANSITIONING = 0xf };
/* The state of this head's group for lu (pinned). */
uint8_t scsi_lu_alua_state(scsi_lu_t *lu);
void spc_report_opcodes(scsi_ctx_t *c);
void spc_report_tmfs(scsi_ctx_t *c);
void spc_start_stop(scsi_ctx_t *c);
void spc_prevent_allow(scsi_ctx_t *c);
void spc_mode_init(scsi_lu_t *lu);
bool spc_wce(scsi_lu_t *lu);
bool spc_swp(scsi_lu_t *lu);

/* ---- block commands (scsi_sbc.c) ---- */
void sbc_read(scsi_ctx_t *c);
void sbc_write(scsi_ctx_t *c);
void sbc_verify(scsi_ctx_t *c);
void sbc_sync_cache(scsi_ctx_t *c);
void sbc_prefetch(scsi_ctx_t *c);
void sbc_read_capacity10(scsi_ctx_t *c);
void sbc_read_capacity16(scsi_ctx_t *c);
void sbc_get_lba_status(scsi_ctx_t *c);
void sbc_unmap(scsi_ctx_t *c);
void sbc_write_same(scsi_ctx_t *c);
void sbc_compare_and_write(scsi_ctx_t *c);
void sbc_or_write(scsi_ctx_t *c);
void sbc_read_defect_data(scsi_ctx_t *c);
void sbc_xcopy(scsi_ctx_t *c);
void sbc_receive_copy_results(scsi_ctx_t *c);
/* Limits reported in VPD 0xB0 and enforced by the commands. */
#define SBC_MAX_TRANSFER_BYTES (8u * 1024 * 1024)
/* OPTIMAL TRANSFER LENGTH: Linux's sd caps every request at this size (max_sectors_kb),
 * so it must not be the volume block size (8 KiB requests crawled); 1 MiB is large
 * enough to stream and a multiple of every volblocksize. */
#define SBC_OPTIMAL_TRANSFER_BYTES (1024u * 1024)
#define SBC_MAX_CAW_BLOCKS 255u
#define SBC_MAX_UNMAP_DESCRIPTORS 256u
#define SBC_MAX_UNMAP_BLOCKS (1024u * 1024)   /* per descriptor; initiators distrust more */
/* Below 65536 on purpose: libiscsi then does not insist on 32 MiB transfers. */
#define SBC_MAX_WRITE_SAME_BLOCKS 65535u
#define XCOPY_MAX_CSCD 8u
#define XCOPY_MAX_SEGMENTS 64u
#define XCOPY_MAX_SEGMENT_BYTES (64u * 1024 * 1024)
#define XCOPY_MAX_LIST_BYTES (32u + XCOPY_MAX_CSCD * 32u + XCOPY_MAX_SEGMENTS * 28u)

/* ---- reservations (scsi_pr.c) ---- */
void pr_in(scsi_ctx_t *c);
void pr_out(scsi_ctx_t *c);
void pr_reserve2(scsi_ctx_t *c);
void pr_release2(scsi_ctx_t *c);
/* True when the nexus may run a command of class prc on lu (SPC-4 5.12.1). */
bool pr_allowed(scsi_lu_t *lu, const scsi_nexus_t *nx, uint8_t prc, uint8_t opflags);
void pr_nexus_gone(scsi_lu_t *lu, uint64_t nexus_id);
void pr_reset(scsi_lu_t *lu);
void pr_free(scsi_lu_t *lu);
/* Replaces lu's reservation state with a serialized one (under lu->lock, or
 * before lu is published); -EINVAL for a malformed string, nothing changed. */
int pr_load(scsi_lu_t *lu, const void *state, size_t len);

#endif
