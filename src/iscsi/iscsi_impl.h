/* Internals of the iSCSI target shared by its files and its unit tests. */
#ifndef CAIRN_ISCSI_IMPL_H
#define CAIRN_ISCSI_IMPL_H

#include <cairn/endian.h>
#include <cairn/iscsi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- CRC32C (Castagnoli), the iSCSI digest ---- */
/* Continues crc (start with 0, result is the finished digest). */
uint32_t iscsi_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t iscsi_crc32c_table(uint32_t crc, const void *buf, size_t len); /* portable path */
bool iscsi_crc32c_hw(void);  /* the SSE4.2 instruction is in use */

/* ---- PDUs ---- */
#define ISCSI_BHS_LEN 48
#define ISCSI_RSVD_TAG 0xffffffffu

enum {
    /* initiator opcodes */
    ISCSI_OP_NOP_OUT = 0x00,
    ISCSI_OP_SCSI_CMD = 0x01,
    ISCSI_OP_TMF_REQ = 0x02,
    ISCSI_OP_LOGIN_REQ = 0x03,
    ISCSI_OP_TEXT_REQ = 0x04,
    ISCSI_OP_DATA_OUT = 0x05,
    ISCSI_OP_LOGOUT_REQ = 0x06,
    ISCSI_OP_SNACK = 0x10,
    /* target opcodes */
    ISCSI_OP_NOP_IN = 0x20,
    ISCSI_OP_SCSI_RSP = 0x21,
    ISCSI_OP_TMF_RSP = 0x22,
    ISCSI_OP_LOGIN_RSP = 0x23,
    ISCSI_OP_TEXT_RSP = 0x24,
    ISCSI_OP_DATA_IN = 0x25,
    ISCSI_OP_LOGOUT_RSP = 0x26,
    ISCSI_OP_R2T = 0x31,
    ISCSI_OP_ASYNC = 0x32,
    ISCSI_OP_REJECT = 0x3f,
};

enum {
    ISCSI_REJECT_DATA_DIGEST = 0x02,
    ISCSI_REJECT_SNACK = 0x03,
    ISCSI_REJECT_PROTOCOL = 0x04,
    ISCSI_REJECT_NOT_SUPPORTED = 0x05,
    ISCSI_REJECT_IMMEDIATE = 0x06,
    ISCSI_REJECT_TASK_IN_PROGRESS = 0x07,
    ISCSI_REJECT_INVALID_FIELD = 0x09,
    ISCSI_REJECT_OUT_OF_RESOURCES = 0x0a,
};

/* Login status class << 8 | detail (RFC 7143 11.13.5). */
enum {
    ISCSI_LOGIN_OK = 0x0000,
    ISCSI_LOGIN_INITIATOR_ERROR = 0x0200,
    ISCSI_LOGIN_AUTH_FAILED = 0x0201,
    ISCSI_LOGIN_FORBIDDEN = 0x0202,
    ISCSI_LOGIN_NOT_FOUND = 0x0203,
    ISCSI_LOGIN_REMOVED = 0x0204,
    ISCSI_LOGIN_UNSUPPORTED_VERSION = 0x0205,
    ISCSI_LOGIN_TOO_MANY_CONNECTIONS = 0x0206,
    ISCSI_LOGIN_MISSING_PARAMETER = 0x0207,
    ISCSI_LOGIN_CANT_INCLUDE_IN_SESSION = 0x0208,
    ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED = 0x0209,
    ISCSI_LOGIN_SESSION_DOES_NOT_EXIST = 0x020a,
    ISCSI_LOGIN_INVALID_DURING_LOGIN = 0x020b,
    ISCSI_LOGIN_TARGET_ERROR = 0x0300,
    ISCSI_LOGIN_SERVICE_UNAVAILABLE = 0x0301,
    ISCSI_LOGIN_OUT_OF_RESOURCES = 0x0302,
};

/* The fields of a Basic Header Segment every opcode shares. */
typedef struct iscsi_bhs_info {
    uint8_t opcode;
    bool immediate;
    bool final;
    uint8_t ahs_words;        /* TotalAHSLength in 4-byte words */
    uint32_t data_len;        /* DataSegmentLength */
    uint32_t itt;
    /* bytes on the wire after the BHS, given the digests in use */
    uint32_t ahs_bytes, data_padded;
} iscsi_bhs_info_t;

/* PDUs are big-endian (RFC 7143). */
#define iscsi_get16 cairn_get_be16
#define iscsi_get32 cairn_get_be32
#define iscsi_get64 cairn_get_be64
#define iscsi_put16 cairn_put_be16
#define iscsi_put32 cairn_put_be32
#define iscsi_put64 cairn_put_be64

/* Decodes the common BHS fields. -EPROTO for an opcode an initiator never
 * sends (a target opcode or an unassigned one is still decoded: the caller
 * rejects it), -EMSGSIZE when the data segment exceeds max_data. */
int iscsi_bhs_parse(const uint8_t bhs[ISCSI_BHS_LEN], uint32_t max_data, iscsi_bhs_info_t *out);
bool iscsi_opcode_known(uint8_t opcode); /* an initiator opcode we implement or reject by name */

/* SAM LUN encoding in the BHS (single level, peripheral or flat addressing). */
uint64_t iscsi_lun_decode(const uint8_t lun[8]);
void iscsi_lun_encode(uint64_t lun, uint8_t out[8]);

/* Serial number arithmetic (RFC 1982, 32 bits). */
static inline bool iscsi_sn_lt(uint32_t a, uint32_t b) { return a != b && (int32_t)(a - b) < 0; }
static inline bool iscsi_sn_le(uint32_t a, uint32_t b) { return a == b || iscsi_sn_lt(a, b); }

/* The command window of a session. exp is the next CmdSN expected; the
 * target advertises max = exp - 1 + depth - in_flight (received,
 * unfinished commands count against the depth). */
typedef struct iscsi_cmdsn_window {
    uint32_t exp_cmdsn;
    uint32_t depth;
    uint32_t in_flight;
} iscsi_cmdsn_window_t;
uint32_t iscsi_window_max(const iscsi_cmdsn_window_t *w);
/* What to do with a command of sequence number cmdsn: */
typedef enum iscsi_cmdsn_verdict {
    ISCSI_CMDSN_ACCEPT,     /* in order; exp_cmdsn advanced (non-immediate) */
    ISCSI_CMDSN_IMMEDIATE,  /* immediate: delivered at once, exp_cmdsn unchanged */
    ISCSI_CMDSN_DROP,       /* outside the window or a duplicate: silently ignored */
} iscsi_cmdsn_verdict_t;
iscsi_cmdsn_verdict_t iscsi_window_check(iscsi_cmdsn_window_t *w, uint32_t cmdsn, bool immediate);

/* ---- text keys (login and Text) ---- */
/* Iterates "key=value\0" pairs. Returns 1 with key/value pointing into a
 * private copy, 0 at the end, -EINVAL on a malformed pair. */
typedef struct iscsi_kv_iter {
    char *buf;
    size_t len, pos;
} iscsi_kv_iter_t;
int iscsi_kv_iter_init(iscsi_kv_iter_t *it, const uint8_t *data, size_t len);
int iscsi_kv_next(iscsi_kv_iter_t *it, const char **key, const char **value);
void iscsi_kv_iter_fini(iscsi_kv_iter_t *it);

/* Growable output of key=value pairs. */
typedef struct iscsi_kv_out {
    uint8_t *buf;
    size_t len, cap;
} iscsi_kv_out_t;
int iscsi_kv_add(iscsi_kv_out_t *o, const char *key, const char *value);
void iscsi_kv_out_free(iscsi_kv_out_t *o);

/* Operational parameters of a session (RFC 7143 13). */
typedef struct iscsi_params {
    bool header_digest, data_digest;
    bool initial_r2t, immediate_data;
    uint32_t max_recv_dsl_initiator;  /* what we may send in one PDU */
    uint32_t max_recv_dsl_target;     /* what we declared we accept */
    uint32_t max_burst, first_burst;
    uint32_t default_time2wait, default_time2retain;
    uint32_t max_outstanding_r2t;
    bool data_pdu_in_order, data_sequence_in_order;
    uint32_t error_recovery_level;
} iscsi_params_t;
void iscsi_params_defaults(iscsi_params_t *p);

/* Negotiates one operational key the initiator offered. Appends our answer
 * to out and updates p. Returns 0, 1 when the key is not operational (the
 * caller handles it), or -EINVAL when the value is illegal (out stays
 * untouched: the login fails with INITIATOR_ERROR). */
int iscsi_param_negotiate(iscsi_params_t *p, const char *key, const char *value,
                          iscsi_kv_out_t *out);

/* ---- CHAP (RFC 1994 with MD5, as RFC 7143 12.1.3 uses it) ---- */
#define ISCSI_CHAP_CHALLENGE_LEN 16
/* response = MD5(id || secret || challenge). */
void iscsi_chap_response(uint8_t id, const char *secret, const uint8_t *challenge,
                         size_t challenge_len, uint8_t out[16]);
/* Decodes "0x<hex>" or "0b<base64>"; returns the length or -EINVAL. */
int iscsi_chap_decode(const char *text, uint8_t *out, size_t cap);
/* "0x" + lower-case hex. */
void iscsi_chap_encode_hex(const uint8_t *bin, size_t len, char *out, size_t cap);

#endif
