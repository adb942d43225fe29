/*
 * SCSI: the SCSI block-device command set (SPC-4 / SBC-3) over volumes
 * (src/scsi/), the layer the iSCSI target hands its commands to.
 *
 * This layer knows nothing of any transport. A transport (iSCSI today, maybe
 * FC or vhost later) owns I_T nexuses and task tags; it builds a scsi_cmd_t per
 * command with the CDB, the data the initiator sent (Data-Out, already fully
 * received) and a buffer for the data to return (Data-In), then calls
 * scsi_execute() from one of its worker threads. The call is synchronous:
 * when it returns, status, sense and the Data-In length are final and the
 * transport sends them. A transport may first try a command with memory_only
 * on a thread that must not block (its connection reader): cached READs
 * complete there, everything else comes back would_block for the workers. Many commands of many nexuses run at once on one
 * logical unit; the layer takes its own locks (reservations, mode pages) and
 * leaves data-path concurrency to the volume layer.
 *
 * A target's logical units live in a scsi_target_t, which answers REPORT LUNS
 * and the commands addressed to a LUN nobody configured (LOGICAL UNIT NOT
 * SUPPORTED, with INQUIRY answering peripheral qualifier 011b), and keeps the
 * per-target state that SPC puts there (reservation keys are per I_T nexus,
 * which the transport names with a stable string: initiator port name and
 * target port name).
 *
 * Identity: every LU has a 64-bit id chosen by the administrator layer and
 * stable across restarts (stored with the LUN configuration); VPD 0x80 serial
 * and 0x83 NAA (IEEE registered extended, type 6) are derived from it, so a
 * host's multipath and VMFS signatures survive a daemon restart.
 */
#ifndef CAIRN_SCSI_H
#define CAIRN_SCSI_H

#include <cairn/types.h>
#include <cairn/zvol.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct scsi_target scsi_target_t;
typedef struct scsi_lu scsi_lu_t;

/* SAM status codes. */
enum {
    SCSI_STATUS_GOOD = 0x00,
    SCSI_STATUS_CHECK_CONDITION = 0x02,
    SCSI_STATUS_CONDITION_MET = 0x04,
    SCSI_STATUS_BUSY = 0x08,
    SCSI_STATUS_RESERVATION_CONFLICT = 0x18,
    SCSI_STATUS_TASK_SET_FULL = 0x28,
    SCSI_STATUS_TASK_ABORTED = 0x40,
};

#define SCSI_SENSE_MAX 252        /* fixed or descriptor format sense bytes */
#define SCSI_CDB_MAX 32

/* Data direction the CDB implies, for the transport to check against the
 * initiator's R/W bits and expected lengths before execution. */
typedef enum scsi_dir { SCSI_DIR_NONE, SCSI_DIR_READ, SCSI_DIR_WRITE } scsi_dir_t;

/* The identity of the I_T nexus a command came in on. */
typedef struct scsi_nexus {
    const char *initiator;   /* initiator port name, e.g. "iqn.1998-01.com.vmware:esx1,i,0x00023d000001" */
    const char *target_port; /* target port name, e.g. "iqn.2026-11.org.cairn:tgt,t,0x0001" */
    uint16_t rel_port_id;    /* relative target port identifier (1..) */
    uint64_t nexus_id;       /* unique while the nexus exists (the session id) */
} scsi_nexus_t;

typedef struct scsi_cmd {
    /* in */
    const scsi_nexus_t *nexus;
    uint64_t lun;             /* the 64-bit LUN as addressed (SAM flat/peripheral: lun & 0x3fff) */
    uint8_t cdb[SCSI_CDB_MAX];
    uint8_t cdb_len;
    const uint8_t *data_out;  /* what the initiator sent (NULL when nothing) */
    uint32_t data_out_len;
    uint8_t *data_in;         /* buffer for returned data, data_in_cap bytes */
    uint32_t data_in_cap;     /* = the initiator's expected transfer length */
    bool memory_only;         /* the caller must not wait for a device: only
                                 READs whose data is in memory and WRITEs that
                                 need neither a device nor a durability wait
                                 run; anything else comes back would_block,
                                 unchanged */
    /* out */
    bool would_block;         /* memory_only and not done: execute it again
                                 without memory_only (status, sense and data
                                 are meaningless; no state has changed) */
    uint8_t status;           /* SCSI_STATUS_* */
    uint32_t data_in_len;     /* bytes of data_in filled (<= data_in_cap; the
                                 transport reports residuals against the CDB's
                                 own allocation/transfer length) */
    uint8_t sense[SCSI_SENSE_MAX];
    uint32_t sense_len;
} scsi_cmd_t;

/* What a transport must know before it receives the data of a command: the
 * direction and how many bytes the CDB transfers (for WRITE: blocks x block
 * size; for parameter lists: the parameter list length). -EINVAL for a CDB
 * too short for its opcode (the transport then still calls execute, which
 * answers with the right sense). */
int scsi_cdb_transfer(scsi_target_t *tgt, uint64_t lun, const uint8_t *cdb, uint8_t cdb_len,
                      scsi_dir_t *dir, uint32_t *bytes);

/* ---- targets and logical units ---- */
scsi_target_t *scsi_target_create(const char *name);

/*
 * ALUA (SPC-4 5.15): every head of an HA pair is one target port group. A
 * logical unit is served only by the head that has its pool imported, so the
 * local group is active/optimized for every LU this target has, and the
 * partner's group (when there is one) is standby: its ports lead to the same
 * SCSI target device but cannot reach the LU until the pool moves there.
 * Without a call the target is one group, id 1, whose port is the nexus's.
 */
typedef struct scsi_alua {
    uint16_t local_group;     /* this head's target port group id; 0 = 1 */
    uint16_t local_port;      /* its relative target port id; 0 = the nexus's */
    uint16_t partner_group;   /* the other head's group id; 0 = no partner */
    uint16_t partner_port;    /* the other head's relative target port id */
} scsi_alua_t;
void scsi_target_set_alua(scsi_target_t *tgt, const scsi_alua_t *alua);
/* The LU's pool is being exported (it will be removed): the local group is
 * transitioning for it, and commands that need the medium get NOT READY,
 * ASYMMETRIC ACCESS STATE TRANSITION (retried by initiators) until removal. */
void scsi_lu_set_transitioning(scsi_target_t *tgt, uint64_t lun);

/* Every LU must have been removed. */
void scsi_target_destroy(scsi_target_t *tgt);

/* Persistent reservations survive power loss only when the initiator asks
 * (APTPL=1 in its last REGISTER, SPC-4): the administrator layer stores them
 * through a hook, called with the LU's lock held (it must not call back into
 * this layer) after each change while APTPL is active, with the whole state
 * serialized in a self-describing byte string, and once with (NULL, 0) when
 * a registration turns APTPL off: the store must then forget what it holds.
 * The hook stores durably before it returns; a nonzero return (-errno: -E2BIG
 * for a state too large to keep) fails the command and puts the state back as
 * it was. With a hook PERSIST THROUGH POWER LOSS CAPABLE is reported and
 * APTPL=1 accepted; without one APTPL=1 is refused (INVALID FIELD IN PARAMETER
 * LIST). A string the hook received is given back at LU add (pr_state).
 *
 * pr_persist_all (an HA pair, docs/ha.md): the hook gets the state after every
 * change, with or without APTPL, because an LU that moves to the partner head
 * has not lost power and its reservations must move with it. The string says
 * whether APTPL was active (scsi_pr_state_aptpl), so the store can still drop
 * the rest when the LU really restarts. */
typedef int (*scsi_pr_hook_fn)(void *arg, uint64_t lun, const void *state, size_t len);

typedef struct scsi_lu_opts {
    uint64_t id;              /* stable identity: serial and NAA come from it */
    const char *vendor;       /* INQUIRY, 8 chars max; NULL: "CAIRN" */
    const char *product;      /* 16 chars max; NULL: "Cairn volume" */
    const char *revision;     /* 4 chars max; NULL: CAIRN_VERSION's first 4 */
    bool thin;                /* report LBPME (sparse volume) */
    bool readonly;            /* WRITE PROTECTED to every write */
    scsi_pr_hook_fn pr_hook;  /* NULL: reservations are never persisted */
    void *pr_hook_arg;
    const void *pr_state;     /* reservation state to start with (what the hook
                                 stored), or NULL */
    size_t pr_state_len;
    bool pr_persist_all;      /* store the state after every change, APTPL or not */
} scsi_lu_opts_t;

/* Adds volume zv as LUN `lun` (0..16383); the LU takes no ownership of zv (the
 * caller closes it after scsi_lu_remove). -EEXIST when the LUN is taken (a
 * standby LU with the same id is not: it becomes active, see below),
 * -EINVAL for a malformed pr_state (nothing added). */
int scsi_lu_add(scsi_target_t *tgt, uint64_t lun, zvol_t *zv, const scsi_lu_opts_t *opts,
                scsi_lu_t **out);
/* Waits until no command runs on the LU, then removes it. */
int scsi_lu_remove(scsi_target_t *tgt, uint64_t lun);

/*
 * Standby LUs (SPC-4 5.15.2.4.4): with a partner group, a head keeps the LUs of
 * the pools the partner serves, by identity only (no volume), so both heads'
 * ports answer for every LU of the pair. Through a standby LU's port REPORT
 * TARGET PORT GROUPS says this group is standby and the partner's
 * active/optimized; INQUIRY, REPORT LUNS, REQUEST SENSE and the MAINTENANCE IN
 * reports answer, every other command (TEST UNIT READY, media access,
 * reservations, whose state is with the partner) gets NOT READY, LOGICAL UNIT
 * NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE (02h 04h/0Bh).
 *
 * A change between standby and active (the LU keeps its id) establishes
 * ASYMMETRIC ACCESS STATE CHANGED (06h 2Ah/06h) for every nexus, reported once
 * each, instead of the POWER ON and REPORTED LUNS DATA HAS CHANGED of an LU
 * that comes or goes.
 */
/* Adds a standby LU: opts gives its identity (id, vendor, product, revision,
 * thin, readonly; reservations are ignored) and geometry. -EEXIST, -EINVAL. */
int scsi_lu_add_standby(scsi_target_t *tgt, uint64_t lun, const scsi_lu_opts_t *opts,
                        uint32_t block_size, uint32_t volblocksize);
/* The active LU becomes standby (its pool is leaving this head): it waits for
 * the commands running on it, then drops the volume (the caller closes it
 * afterwards) and its reservations. -ENOENT; 0 when it already is standby. */
int scsi_lu_set_standby(scsi_target_t *tgt, uint64_t lun);
/* Whether the LUN is a standby LU (false for none or an active one). */
bool scsi_lu_is_standby(scsi_target_t *tgt, uint64_t lun);
/* Tells the LU its capacity changed (volsize set): raises CAPACITY DATA HAS
 * CHANGED unit attention on every nexus. */
void scsi_lu_capacity_changed(scsi_target_t *tgt, uint64_t lun);

/* The same hook and state for an LU already added (tests, tools): */
void scsi_lu_set_pr_hook(scsi_target_t *tgt, uint64_t lun, scsi_pr_hook_fn fn, void *arg);
/* -EINVAL for a malformed string, -ENOENT for no such LU. */
int scsi_lu_pr_restore(scsi_target_t *tgt, uint64_t lun, const void *state, size_t len);
/* Whether a state string the hook received was stored with APTPL active
 * (false also for a malformed one). */
bool scsi_pr_state_aptpl(const void *state, size_t len);

/* LUN numbers: cmd->lun (and the lun of scsi_cdb_transfer, scsi_reset,
 * scsi_lu_capacity_changed) may be either the plain LUN number (0..16383) or
 * the 8-byte SAM LUN field read big-endian (peripheral addressing 0x00nn...,
 * flat space 0x4nnn...); both name the same LU.
 *
 * Data-Out: data_out_len is what the initiator actually sent (at most its
 * expected transfer length). Block writes need at least what
 * scsi_cdb_transfer() reported; WRITE SAME needs exactly one block (or none
 * with UNMAP=1); parameter lists are parsed as far as they go. */

/* Executes one command. Always fills status (and sense for CHECK CONDITION). */
void scsi_execute(scsi_target_t *tgt, scsi_cmd_t *cmd);

/* ---- nexus events the transport reports (SAM task management) ---- */
/* A new I_T nexus logged in: it gets POWER ON/RESET unit attention once. */
void scsi_nexus_login(scsi_target_t *tgt, const scsi_nexus_t *nexus);
/* The nexus is gone (logout or connection loss): releases its RESERVE(6/10)
 * reservation; persistent reservations stay (that is their point). */
void scsi_nexus_logout(scsi_target_t *tgt, const scsi_nexus_t *nexus);
/* LUN RESET / TARGET WARM RESET (lun = UINT64_MAX): clears RESERVE
 * reservations and raises BUS DEVICE RESET unit attention for every nexus. The
 * transport aborts its own tasks first. */
void scsi_reset(scsi_target_t *tgt, uint64_t lun);

/* CLEAR TASK SET from another nexus aborted tasks of this one on lun: with
 * TAS=0 (our control page) SAM-5 tells it by COMMANDS CLEARED BY ANOTHER
 * INITIATOR unit attention, which this raises. */
void scsi_nexus_tasks_cleared(scsi_target_t *tgt, uint64_t nexus_id, uint64_t lun);

/* Fills fixed-format sense (response code 0x70) into cmd and sets CHECK
 * CONDITION: for transports that reject a command themselves. */
void scsi_set_sense(scsi_cmd_t *cmd, uint8_t key, uint8_t asc, uint8_t ascq);

/* Sense keys and the additional sense codes the layer uses. */
enum {
    SCSI_SENSE_NO_SENSE = 0x0,
    SCSI_SENSE_NOT_READY = 0x2,
    SCSI_SENSE_MEDIUM_ERROR = 0x3,
    SCSI_SENSE_HARDWARE_ERROR = 0x4,
    SCSI_SENSE_ILLEGAL_REQUEST = 0x5,
    SCSI_SENSE_UNIT_ATTENTION = 0x6,
    SCSI_SENSE_DATA_PROTECT = 0x7,
    SCSI_SENSE_ABORTED_COMMAND = 0xb,
    SCSI_SENSE_MISCOMPARE = 0xe,
};

/* The command a CDB carries ("WRITE(10)"), NULL for one the target does not know;
 * *key gets a number that tells commands apart (opcode and service action). */
const char *scsi_command_name(const uint8_t *cdb, uint64_t *key);

#endif
