/*
 * iSCSI: the target transport (RFC 7143) in front of the SCSI layer
 * (src/iscsi/).
 *
 * An iscsi_server_t listens on one TCP address and serves the targets
 * configured in it. A target has an iSCSI name (iqn., eui. or naa.), logical
 * units (volumes, each wrapped in the SCSI layer's scsi_target_t), an optional
 * initiator access list (empty: every initiator may log in) and optional CHAP
 * secrets (one-way, or mutual when a target secret is also set). Everything
 * here is runtime state: the administrator layer (cairnd) stores the
 * configuration and replays it on start.
 *
 * Every function is thread-safe. Changing a target while sessions run on it
 * is allowed: ACL and CHAP changes apply to the next login; removing a LUN
 * waits for the commands running on it; destroying a target first closes
 * its sessions.
 */
#ifndef CAIRN_ISCSI_H
#define CAIRN_ISCSI_H

#include <cairn/frontend_defaults.h>
#include <cairn/stats.h>
#include <cairn/scsi.h>
#include <cairn/zvol.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct iscsi_server iscsi_server_t;

#define ISCSI_NAME_MAX 223           /* RFC 7143: iSCSI names are at most 223 bytes */
#define ISCSI_CHAP_SECRET_MIN 12     /* RFC 7143 asks for 96 bits at least */
#define ISCSI_CHAP_SECRET_MAX 255

/* What the target has done since it started, for /metrics (include/cairn/stats.h).
 * A SCSI command counts when its status is sent: by kind (the READ and WRITE
 * families of CDBs, everything else), with the bytes it moved (Data-In to the
 * initiator, Data-Out from it) and its time from arrival to status. */
enum { ISCSI_CMD_READ, ISCSI_CMD_WRITE, ISCSI_CMD_OTHER, ISCSI_CMD_KINDS };
typedef struct iscsi_stats {
    cairn_counter_t commands[ISCSI_CMD_KINDS];
    cairn_counter_t read_bytes, write_bytes;
    cairn_hist_t latency;
} iscsi_stats_t;
const iscsi_stats_t *iscsi_server_stats(const iscsi_server_t *srv);
/* The same counts per target (since it was created or loaded): a snapshot of up to
 * cap targets in list order; returns how many there are. */
typedef struct iscsi_target_stats {
    char name[ISCSI_NAME_MAX + 1];
    uint64_t commands[ISCSI_CMD_KINDS];
    uint64_t read_bytes, write_bytes;
} iscsi_target_stats_t;
size_t iscsi_server_target_stats(iscsi_server_t *srv, iscsi_target_stats_t *out, size_t cap);

typedef struct iscsi_server_opts {
    const char *host;                /* numeric address or name; "" = any */
    uint16_t port;                   /* 0: an ephemeral port (tests), see iscsi_server_port */
    uint32_t nop_interval_s;         /* idle seconds before a NOP-In ping; 0 = 30 */
    /* Connection caps (include/cairn/connlimit.h) and the seconds a new
     * connection has to complete its login; 0: the ISCSI_DEFAULT_* below. */
    unsigned max_conns;
    unsigned max_conns_per_client;
    uint32_t login_timeout_s;
    /* ALUA (scsi_alua_t): this head's target port group id (0: 1) and its HA
     * partner's (0: none). A head has one target port, whose relative id is
     * its group id, so the pair's two ports never share one. */
    uint16_t alua_group, alua_partner_group;
} iscsi_server_opts_t;

/* ISCSI_DEFAULT_*: <cairn/frontend_defaults.h>. */

int iscsi_server_start(const iscsi_server_opts_t *opts, iscsi_server_t **out);
/* Closes every connection, destroys every target (LUNs are removed; the
 * caller closes its volumes afterwards). */
void iscsi_server_stop(iscsi_server_t *srv);
uint16_t iscsi_server_port(const iscsi_server_t *srv);

/* iqn.YYYY-MM.reversed.domain[:anything], eui.<16 hex>, naa.<16 or 32 hex>;
 * lower case, at most 223 bytes. 0 or -EINVAL with err filled. */
int iscsi_name_check(const char *name, char *err, size_t errlen);

/* -EEXIST, -EINVAL (bad name). */
int iscsi_target_create(iscsi_server_t *srv, const char *iqn);
/* -ENOENT; -EBUSY when the target still has LUNs (remove them first). Closes
 * the target's sessions. */
int iscsi_target_destroy(iscsi_server_t *srv, const char *iqn);

/* Adds volume zv (kept open by the caller until iscsi_lun_remove returns) as
 * LUN lun. -ENOENT (no target), -EEXIST (LUN taken, other than by a standby
 * LU of the same id, which becomes active), -ERANGE (lun > 16383). */
int iscsi_lun_add(iscsi_server_t *srv, const char *iqn, uint64_t lun, zvol_t *zv,
                  const scsi_lu_opts_t *opts);
/* Waits for the commands running on it. -ENOENT. */
int iscsi_lun_remove(iscsi_server_t *srv, const char *iqn, uint64_t lun);
/* ALUA standby LUs (scsi_lu_add_standby, scsi_lu_set_standby): an LU of a pool
 * the HA partner serves, known by identity only; iscsi_lun_add of the same LU
 * id makes it active again. -ENOENT, -EEXIST, -ERANGE, -EINVAL. */
int iscsi_lun_add_standby(iscsi_server_t *srv, const char *iqn, uint64_t lun,
                          const scsi_lu_opts_t *opts, uint32_t block_size, uint32_t volblocksize);
/* Its pool leaves this head: the LU turns standby once its commands are done
 * (the caller closes the volume afterwards). -ENOENT. */
int iscsi_lun_standby(iscsi_server_t *srv, const char *iqn, uint64_t lun);
void iscsi_lun_capacity_changed(iscsi_server_t *srv, const char *iqn, uint64_t lun);
/* Its pool is being exported: ALUA transitioning until iscsi_lun_remove
 * (scsi_lu_set_transitioning). */
void iscsi_lun_transitioning(iscsi_server_t *srv, const char *iqn, uint64_t lun);

/* Initiator access list. -EEXIST / -ENOENT. */
int iscsi_acl_add(iscsi_server_t *srv, const char *iqn, const char *initiator);
int iscsi_acl_remove(iscsi_server_t *srv, const char *iqn, const char *initiator);

/* CHAP: the initiator must answer user/secret; with muser/msecret (both
 * non-NULL) the target also proves itself (mutual CHAP). NULL user clears. */
int iscsi_chap_set(iscsi_server_t *srv, const char *iqn, const char *user, const char *secret,
                   const char *muser, const char *msecret);

/* Sessions of a target in full feature phase (for `cairn iscsi list`). */
typedef struct iscsi_session_info {
    char initiator[ISCSI_NAME_MAX + 1];
    char peer[64];                   /* address:port */
    uint64_t isid;
    uint16_t tsih;
} iscsi_session_info_t;
/* Fills up to cap entries; returns how many sessions there are (or -ENOENT). */
int iscsi_target_sessions(iscsi_server_t *srv, const char *iqn, iscsi_session_info_t *out,
                          size_t cap);

#endif
