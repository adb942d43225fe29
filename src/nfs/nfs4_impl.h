/*
 * Internals of the NFSv4 server (nfs4*.c): protocol numbers (RFC 7530, RFC
 * 8881), the byte-range lock list, and the state tables (clients, sessions,
 * open/lock owners, stateids) with the rules that decide stateid and seqid
 * validity. Everything here is protected by nfs4_server_t.lock; the COMPOUND
 * code takes it around each state lookup or change and never holds it across
 * a ZPL call that may wait for the disk, except where noted.
 */
#ifndef CAIRN_NFS4_IMPL_H
#define CAIRN_NFS4_IMPL_H

#include "nfs_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* ---------------------------------------------------------------- protocol */

enum nfs4_op {
    OP4_ACCESS = 3, OP4_CLOSE = 4, OP4_COMMIT = 5, OP4_CREATE = 6, OP4_DELEGPURGE = 7,
    OP4_DELEGRETURN = 8, OP4_GETATTR = 9, OP4_GETFH = 10, OP4_LINK = 11, OP4_LOCK = 12,
    OP4_LOCKT = 13, OP4_LOCKU = 14, OP4_LOOKUP = 15, OP4_LOOKUPP = 16, OP4_NVERIFY = 17,
    OP4_OPEN = 18, OP4_OPENATTR = 19, OP4_OPEN_CONFIRM = 20, OP4_OPEN_DOWNGRADE = 21,
    OP4_PUTFH = 22, OP4_PUTPUBFH = 23, OP4_PUTROOTFH = 24, OP4_READ = 25, OP4_READDIR = 26,
    OP4_READLINK = 27, OP4_REMOVE = 28, OP4_RENAME = 29, OP4_RENEW = 30, OP4_RESTOREFH = 31,
    OP4_SAVEFH = 32, OP4_SECINFO = 33, OP4_SETATTR = 34, OP4_SETCLIENTID = 35,
    OP4_SETCLIENTID_CONFIRM = 36, OP4_VERIFY = 37, OP4_WRITE = 38, OP4_RELEASE_LOCKOWNER = 39,
    /* 4.1 */
    OP4_BACKCHANNEL_CTL = 40, OP4_BIND_CONN_TO_SESSION = 41, OP4_EXCHANGE_ID = 42,
    OP4_CREATE_SESSION = 43, OP4_DESTROY_SESSION = 44, OP4_FREE_STATEID = 45,
    OP4_GET_DIR_DELEGATION = 46, OP4_GETDEVICEINFO = 47, OP4_GETDEVICELIST = 48,
    OP4_LAYOUTCOMMIT = 49, OP4_LAYOUTGET = 50, OP4_LAYOUTRETURN = 51, OP4_SECINFO_NO_NAME = 52,
    OP4_SEQUENCE = 53, OP4_SET_SSV = 54, OP4_TEST_STATEID = 55, OP4_WANT_DELEGATION = 56,
    OP4_DESTROY_CLIENTID = 57, OP4_RECLAIM_COMPLETE = 58,
    OP4_LAST_42 = 75,                 /* 4.2's optional operations (with RFC 8276's
                                       * xattr ones) end here */
    OP4_ILLEGAL = 10044,
};

/* The operations that change nothing on the server, which a COMPOUND made
 * only of them (after a 4.1 SEQUENCE) may run on the transport's I/O thread
 * (nfs4.c): handle and name lookups, attributes, ACCESS, READLINK and READ
 * (whose atime update stops it, and whose stateid only renews its client's
 * lease), and GET_DIR_DELEGATION (which only says none is available). */
static inline bool nfs4_op_reads_only(uint32_t op)
{
    switch (op) {
    case OP4_PUTFH: case OP4_PUTROOTFH: case OP4_PUTPUBFH: case OP4_LOOKUP: case OP4_LOOKUPP:
    case OP4_GETATTR: case OP4_GETFH: case OP4_ACCESS: case OP4_READLINK: case OP4_SAVEFH:
    case OP4_RESTOREFH: case OP4_READ: case OP4_GET_DIR_DELEGATION:
        return true;
    default:
        return false;
    }
}

enum nfs4_status {
    NFS4_OK = 0, NFS4ERR_PERM = 1, NFS4ERR_NOENT = 2, NFS4ERR_IO = 5, NFS4ERR_NXIO = 6,
    NFS4ERR_ACCESS = 13, NFS4ERR_EXIST = 17, NFS4ERR_XDEV = 18, NFS4ERR_NOTDIR = 20,
    NFS4ERR_ISDIR = 21, NFS4ERR_INVAL = 22, NFS4ERR_FBIG = 27, NFS4ERR_NOSPC = 28,
    NFS4ERR_ROFS = 30, NFS4ERR_MLINK = 31, NFS4ERR_NAMETOOLONG = 63, NFS4ERR_NOTEMPTY = 66,
    NFS4ERR_DQUOT = 69, NFS4ERR_STALE = 70, NFS4ERR_BADHANDLE = 10001,
    NFS4ERR_BAD_COOKIE = 10003, NFS4ERR_NOTSUPP = 10004, NFS4ERR_TOOSMALL = 10005,
    NFS4ERR_SERVERFAULT = 10006, NFS4ERR_BADTYPE = 10007, NFS4ERR_DELAY = 10008,
    NFS4ERR_SAME = 10009, NFS4ERR_DENIED = 10010, NFS4ERR_EXPIRED = 10011,
    NFS4ERR_LOCKED = 10012, NFS4ERR_GRACE = 10013, NFS4ERR_FHEXPIRED = 10014,
    NFS4ERR_SHARE_DENIED = 10015, NFS4ERR_WRONGSEC = 10016, NFS4ERR_CLID_INUSE = 10017,
    NFS4ERR_RESOURCE = 10018, NFS4ERR_MOVED = 10019, NFS4ERR_NOFILEHANDLE = 10020,
    NFS4ERR_MINOR_VERS_MISMATCH = 10021, NFS4ERR_STALE_CLIENTID = 10022,
    NFS4ERR_STALE_STATEID = 10023, NFS4ERR_OLD_STATEID = 10024, NFS4ERR_BAD_STATEID = 10025,
    NFS4ERR_BAD_SEQID = 10026, NFS4ERR_NOT_SAME = 10027, NFS4ERR_LOCK_RANGE = 10028,
    NFS4ERR_SYMLINK = 10029, NFS4ERR_RESTOREFH = 10030, NFS4ERR_ATTRNOTSUPP = 10032,
    NFS4ERR_NO_GRACE = 10033, NFS4ERR_RECLAIM_BAD = 10034, NFS4ERR_RECLAIM_CONFLICT = 10035,
    NFS4ERR_BADXDR = 10036, NFS4ERR_LOCKS_HELD = 10037, NFS4ERR_OPENMODE = 10038,
    NFS4ERR_BADOWNER = 10039, NFS4ERR_BADCHAR = 10040, NFS4ERR_BADNAME = 10041,
    NFS4ERR_BAD_RANGE = 10042, NFS4ERR_LOCK_NOTSUPP = 10043, NFS4ERR_OP_ILLEGAL = 10044,
    NFS4ERR_DEADLOCK = 10045, NFS4ERR_FILE_OPEN = 10046, NFS4ERR_ADMIN_REVOKED = 10047,
    NFS4ERR_CB_PATH_DOWN = 10048,
    /* 4.1 */
    NFS4ERR_BADSESSION = 10052, NFS4ERR_BADSLOT = 10053, NFS4ERR_COMPLETE_ALREADY = 10054,
    NFS4ERR_CONN_NOT_BOUND_TO_SESSION = 10055, NFS4ERR_SEQ_MISORDERED = 10063,
    NFS4ERR_SEQUENCE_POS = 10064, NFS4ERR_REQ_TOO_BIG = 10065, NFS4ERR_REP_TOO_BIG = 10066,
    NFS4ERR_REP_TOO_BIG_TO_CACHE = 10067, NFS4ERR_RETRY_UNCACHED_REP = 10068,
    NFS4ERR_TOO_MANY_OPS = 10070, NFS4ERR_OP_NOT_IN_SESSION = 10071,
    NFS4ERR_CLIENTID_BUSY = 10074, NFS4ERR_SEQ_FALSE_RETRY = 10076,
    NFS4ERR_BAD_HIGH_SLOT = 10077, NFS4ERR_DEADSESSION = 10078, NFS4ERR_NOT_ONLY_OP = 10081,
    NFS4ERR_WRONG_CRED = 10082, NFS4ERR_WRONG_TYPE = 10083, NFS4ERR_DELEG_REVOKED = 10087,
};

enum { NF4REG = 1, NF4DIR = 2, NF4BLK = 3, NF4CHR = 4, NF4LNK = 5, NF4SOCK = 6, NF4FIFO = 7 };

enum { READ_LT = 1, WRITE_LT = 2, READW_LT = 3, WRITEW_LT = 4 };

enum {
    OPEN4_SHARE_ACCESS_READ = 1, OPEN4_SHARE_ACCESS_WRITE = 2, OPEN4_SHARE_ACCESS_BOTH = 3,
    OPEN4_SHARE_DENY_NONE = 0, OPEN4_SHARE_DENY_READ = 1, OPEN4_SHARE_DENY_WRITE = 2,
    OPEN4_SHARE_DENY_BOTH = 3,
};

#define NFS4_FHSIZE 128
#define NFS4_OPAQUE_LIMIT 1024
#define NFS4_VERIFIER_SIZE 8
#define NFS4_SESSIONID_SIZE 16
#define NFS4_MAX_IO (1024u * 1024u)

/* ---------------------------------------------------------------- byte ranges */

/* POSIX byte-range locks of one file: inclusive [first, last], type READ_LT or
 * WRITE_LT, owned by an opaque owner pointer. One owner's ranges never overlap
 * each other (a new lock replaces what the owner held there, as fcntl does). */
typedef struct nfs4_range {
    uint64_t first, last;
    uint32_t type;
    const void *owner;
    bool nlm;                         /* owner is an NLM owner (nlm.c), not an nfs4_owner_t */
} nfs4_range_t;

typedef struct nfs4_range_list {
    nfs4_range_t *v;
    size_t n, cap;
} nfs4_range_list_t;

/* NFSv4 offset/length to an inclusive range: length 0 or a range that runs past
 * 2^64 (other than length = all ones, "to the end") is NFS4ERR_INVAL. */
uint32_t nfs4_range_from_wire(uint64_t offset, uint64_t length, uint64_t *first, uint64_t *last);
/* Index of a range of another owner that conflicts with (first,last,type), or -1. */
long nfs4_range_conflict(const nfs4_range_list_t *l, const void *owner, uint64_t first,
                         uint64_t last, uint32_t type);
/* Sets owner's lock on [first,last] (replacing, splitting, merging). -ENOMEM. */
int nfs4_range_set(nfs4_range_list_t *l, const void *owner, uint64_t first, uint64_t last,
                   uint32_t type);
/* The same for an NLM owner (the range is tagged so NFSv4 never reads it as its own). */
int nfs4_range_set_tagged(nfs4_range_list_t *l, const void *owner, uint64_t first,
                          uint64_t last, uint32_t type, bool nlm);
/* Releases owner's locks on [first,last] (splitting). -ENOMEM. */
int nfs4_range_clear(nfs4_range_list_t *l, const void *owner, uint64_t first, uint64_t last);
bool nfs4_range_owner_holds(const nfs4_range_list_t *l, const void *owner);
void nfs4_range_drop_owner(nfs4_range_list_t *l, const void *owner);
void nfs4_range_free(nfs4_range_list_t *l);
/* "host:svid" of an NLM owner (nlm.c), for a v4 LOCK denied by an NFSv3 lock. */
void nlm_owner_name(const void *owner, char *buf, size_t len);

/* ---------------------------------------------------------------- seqids */

/* NFSv4.0 open/lock-owner sequencing (RFC 7530 9.1.7): the next seqid is
 * processed, the last one is a retransmission answered from the cached reply,
 * anything else is NFS4ERR_BAD_SEQID. Seqids wrap around like any u32. */
typedef enum { NFS4_SEQ_NEW, NFS4_SEQ_REPLAY, NFS4_SEQ_BAD } nfs4_seq_verdict_t;
nfs4_seq_verdict_t nfs4_seqid_check(bool have_last, uint32_t last, uint32_t seqid);
/* Whether an error consumes the seqid (every status but those listed in RFC
 * 7530 9.1.7). */
bool nfs4_status_bumps_seqid(uint32_t status);

/* ---------------------------------------------------------------- stateids */

typedef struct nfs4_stateid {
    uint32_t seqid;
    uint8_t other[12];
} nfs4_stateid_t;

/* Stateid seqid rules: 0 in 4.1 means "the current one"; older: OLD_STATEID;
 * newer than issued: BAD_STATEID. */
uint32_t nfs4_stateid_seqid_check(uint32_t minor, uint32_t presented, uint32_t current);

bool nfs4_stateid_is_anon(const nfs4_stateid_t *s);      /* all zeros */
bool nfs4_stateid_is_bypass(const nfs4_stateid_t *s);    /* all ones (READ bypass) */
bool nfs4_stateid_is_current(const nfs4_stateid_t *s);   /* 4.1: seqid 1, other 0 */

/* ---------------------------------------------------------------- attributes */

/* Attribute numbers (RFC 7530 5.8, RFC 8881 5.8). */
enum {
    FATTR4_SUPPORTED_ATTRS = 0, FATTR4_TYPE = 1, FATTR4_FH_EXPIRE_TYPE = 2, FATTR4_CHANGE = 3,
    FATTR4_SIZE = 4, FATTR4_LINK_SUPPORT = 5, FATTR4_SYMLINK_SUPPORT = 6,
    FATTR4_NAMED_ATTR = 7, FATTR4_FSID = 8, FATTR4_UNIQUE_HANDLES = 9,
    FATTR4_LEASE_TIME = 10, FATTR4_RDATTR_ERROR = 11, FATTR4_ACL = 12,
    FATTR4_ACLSUPPORT = 13, FATTR4_ARCHIVE = 14, FATTR4_CANSETTIME = 15,
    FATTR4_CASE_INSENSITIVE = 16, FATTR4_CASE_PRESERVING = 17, FATTR4_CHOWN_RESTRICTED = 18,
    FATTR4_FILEHANDLE = 19, FATTR4_FILEID = 20, FATTR4_FILES_AVAIL = 21,
    FATTR4_FILES_FREE = 22, FATTR4_FILES_TOTAL = 23, FATTR4_FS_LOCATIONS = 24,
    FATTR4_HIDDEN = 25, FATTR4_HOMOGENEOUS = 26, FATTR4_MAXFILESIZE = 27,
    FATTR4_MAXLINK = 28, FATTR4_MAXNAME = 29, FATTR4_MAXREAD = 30, FATTR4_MAXWRITE = 31,
    FATTR4_MIMETYPE = 32, FATTR4_MODE = 33, FATTR4_NO_TRUNC = 34, FATTR4_NUMLINKS = 35,
    FATTR4_OWNER = 36, FATTR4_OWNER_GROUP = 37, FATTR4_QUOTA_AVAIL_HARD = 38,
    FATTR4_QUOTA_AVAIL_SOFT = 39, FATTR4_QUOTA_USED = 40, FATTR4_RAWDEV = 41,
    FATTR4_SPACE_AVAIL = 42, FATTR4_SPACE_FREE = 43, FATTR4_SPACE_TOTAL = 44,
    FATTR4_SPACE_USED = 45, FATTR4_SYSTEM = 46, FATTR4_TIME_ACCESS = 47,
    FATTR4_TIME_ACCESS_SET = 48, FATTR4_TIME_BACKUP = 49, FATTR4_TIME_CREATE = 50,
    FATTR4_TIME_DELTA = 51, FATTR4_TIME_METADATA = 52, FATTR4_TIME_MODIFY = 53,
    FATTR4_TIME_MODIFY_SET = 54, FATTR4_MOUNTED_ON_FILEID = 55,
    FATTR4_SUPPATTR_EXCLCREAT = 75,
    /* 4.2 (RFC 7862 12.2) */
    FATTR4_CLONE_BLKSIZE = 77, FATTR4_SPACE_FREED = 78, FATTR4_CHANGE_ATTR_TYPE = 79, FATTR4_XATTR_SUPPORT = 82,
    /* RFC 9754 (4.2) */
    FATTR4_OPEN_ARGUMENTS = 86,
};

#define NFS4_BITMAP_WORDS 3
typedef struct nfs4_bitmap {
    uint32_t w[NFS4_BITMAP_WORDS];
} nfs4_bitmap_t;

static inline bool nfs4_bm_isset(const nfs4_bitmap_t *b, unsigned bit)
{
    return bit < 32 * NFS4_BITMAP_WORDS && (b->w[bit / 32] >> (bit % 32)) & 1;
}
static inline void nfs4_bm_set(nfs4_bitmap_t *b, unsigned bit)
{
    if (bit < 32 * NFS4_BITMAP_WORDS) b->w[bit / 32] |= 1u << (bit % 32);
}
/* Decodes a bitmap4; words beyond the ones we know must be zero for the
 * attributes to be supported, so they are remembered in *extra. */
void nfs4_bitmap_get(nfs_xdr_t *x, nfs4_bitmap_t *b, bool *extra);
/* Encodes with trailing zero words trimmed. */
void nfs4_bitmap_put(nfs_xdr_t *x, const nfs4_bitmap_t *b);
/* The attributes this server supports for minor version minor. */
void nfs4_supported_attrs(uint32_t minor, nfs4_bitmap_t *out);
/* The attributes settable at EXCLUSIVE4_1 create. */
void nfs4_exclcreat_attrs(nfs4_bitmap_t *out);

/* What an attribute encoder needs about one object. */
typedef struct nfs4_attr_src {
    uint32_t minor;
    zpl_attr_t a;
    bool have_statfs;
    zpl_statfs_t sfs;
    uint64_t fsid_major, fsid_minor;
    uint64_t mounted_on_fileid;
    uint32_t lease_time;
    const uint8_t *fh;
    uint32_t fh_len;
    uint32_t rdattr_error;
} nfs4_attr_src_t;

/* Encodes fattr4 (bitmap + attrlist) for the requested attributes (those
 * unsupported are left out, as the RFC requires). */
void nfs4_fattr_encode(nfs_xdr_t *x, const nfs4_attr_src_t *src, const nfs4_bitmap_t *req);
/* Encodes just the attrlist values (for VERIFY/NVERIFY comparison); sets *done
 * to the attributes encoded. */
void nfs4_attrlist_encode(nfs_xdr_t *x, const nfs4_attr_src_t *src, const nfs4_bitmap_t *req,
                          nfs4_bitmap_t *done);

/* Settable attributes decoded from a fattr4 (SETATTR, OPEN/CREATE createattrs). */
typedef struct nfs4_sattr {
    nfs4_bitmap_t set;     /* which attributes the client sent */
    zpl_setattr_t sa;      /* mapped onto the ZPL */
} nfs4_sattr_t;
/* Decodes a fattr4 of settable attributes: NFS4_OK, ATTRNOTSUPP, INVAL,
 * BADOWNER, BADXDR. */
uint32_t nfs4_sattr_decode(nfs_xdr_t *x, nfs4_sattr_t *out);
/* "1000" / "root@domain" / "nobody@..." to an id. */
bool nfs4_parse_owner(const uint8_t *s, uint32_t len, uint32_t *id);

uint32_t nfs4_errno_to_status(int err);
/* nfs4_open.c: the open_arguments attribute (RFC 9754), what OPEN takes. */
void nfs4_open_arguments_put(nfs_xdr_t *x, uint32_t minor);

#endif

/* ---------------------------------------------------------------- state */

typedef struct nfs4_client nfs4_client_t;
typedef struct nfs4_owner nfs4_owner_t;
typedef struct nfs4_file nfs4_file_t;
typedef struct nfs4_stid nfs4_stid_t;
typedef struct nfs4_session nfs4_session_t;

/* An open-owner or lock-owner: (client, opaque id). 4.0 sequences its
 * operations with seqids and keeps its last reply for retransmissions. */
struct nfs4_owner {
    nfs4_owner_t *next;               /* the client's owners */
    nfs4_client_t *client;
    bool is_lock;
    uint8_t *id;
    uint32_t id_len;
    bool have_seqid;
    uint32_t seqid;                   /* last seqid processed */
    bool confirmed;                   /* 4.0 open-owners: OPEN_CONFIRM done */
    uint64_t request_hash;            /* of the last request's arguments */
    uint32_t reply_status;            /* last reply (status + body) for replays */
    uint8_t *reply;
    uint32_t reply_len;
    uint32_t closed_key;              /* 4.0: state key of the open its last CLOSE freed */
};

/* A file that carries state; holds a ZPL node reference and an open
 * reference (zpl_open_hold: removing it keeps it alive) while it does. Keyed
 * by generation too: a freed file's number may be reused by a new file, which
 * must not inherit its state. */
struct nfs4_file {
    nfs4_file_t *next;                /* hash chain */
    uint64_t fsid, ino, gen;
    nfs_export_t *exp;                /* not held: nfs4_export_removed drops us first */
    zpl_node_t *node;
    nfs4_range_list_t locks;
    unsigned nstates;
    unsigned ndelegs;                 /* delegations held (not revoked) */
};

enum { NFS4_STID_OPEN = 1, NFS4_STID_LOCK = 2, NFS4_STID_DELEG = 3 };

struct nfs4_stid {
    nfs4_stid_t *hnext;               /* hash chain by key */
    nfs4_stid_t *cnext;               /* the client's stateids */
    uint32_t type;
    uint32_t key;
    uint32_t seqid;
    nfs4_client_t *client;
    nfs4_owner_t *owner;
    nfs4_file_t *file;
    uint32_t access, deny;            /* OPEN: share access/deny held; DELEG: READ
                                         (read delegation) or BOTH (write) */
    uint8_t access_modes, deny_modes; /* OPEN: each access/deny value an OPEN asked
                                         for (bit 1 << value): what OPEN_DOWNGRADE
                                         may go back to */
    nfs4_stid_t *open;                /* LOCK: the open state it was made from */
    time_t recalled;                  /* DELEG: when CB_RECALL was queued (0: not) */
    /* Write DELEG: what CB_GETATTR learned (nfs4_deleg_getattr): the holder's
     * last change attribute, how many new ones it reported (each moves ours
     * one past the file's), and when it first reported the latest. */
    uint64_t cb_change;
    uint64_t cb_bumps;
    int64_t cb_mtime_ns;
    bool cb_asking;                   /* a CB_GETATTR is out: other GETATTRs wait (DELAY) */
    bool revoked;                     /* DELEG: revoked, kept to answer DELEG_REVOKED */
};

typedef struct nfs4_slot {
    uint32_t seqid;
    bool busy;
    bool cached;
    uint8_t *reply;                   /* the whole COMPOUND reply */
    uint32_t reply_len;
} nfs4_slot_t;

typedef struct nfs4_chan_attrs {
    uint32_t headerpad, maxreq, maxresp, maxresp_cached, maxops, maxreqs;
} nfs4_chan_attrs_t;

/* The security a client asked its callbacks to carry (CREATE_SESSION,
 * BACKCHANNEL_CTL): AUTH_SYS with the parameters it gave, or AUTH_NONE. */
typedef struct nfs4_cb_sec {
    uint32_t flavor;
    uint32_t len;
    uint8_t body[400];                /* AUTH_SYS: the encoded authsys_parms */
} nfs4_cb_sec_t;

struct nfs4_session {
    nfs4_session_t *next;             /* the client's sessions */
    uint8_t id[NFS4_SESSIONID_SIZE];
    nfs4_client_t *client;
    nfs4_chan_attrs_t fore, back;
    nfs4_slot_t *slots;
    /* Back channel (nfs4_callback.c): the fore-channel connection bound to
     * carry callbacks (held), the callback program and security, and the
     * sequence id of back-channel slot 0, the only one used. */
    nfs_conn_t *back_conn;
    bool back_wanted;                 /* the client asked for one (path down if lost) */
    uint32_t cb_prog;
    nfs4_cb_sec_t cb_sec;
    uint32_t cb_seqid;
    uint32_t cb_minor;                /* the minor version the client speaks (CB_COMPOUND's) */
};

struct nfs4_client {
    nfs4_client_t *next;
    uint64_t clientid;
    uint8_t verifier[NFS4_VERIFIER_SIZE];
    uint8_t *owner;
    uint32_t owner_len;
    uint32_t minor;
    bool confirmed;
    uint8_t confirm[NFS4_VERIFIER_SIZE];   /* 4.0 SETCLIENTID_CONFIRM verifier */
    time_t renewed;
    uint32_t princ_flavor, princ_uid; /* who made the record (EXCHANGE_ID principal) */
    uint32_t cs_seqid;                /* 4.1: next CREATE_SESSION sequence id */
    uint8_t *cs_reply;                /* its last reply, for a retransmission */
    uint32_t cs_reply_len;
    bool reclaim_complete;
    bool may_reclaim;                 /* held state before the restart */
    /* In the records (nfs4_client_record): it took state worth reclaiming.
     * record_ticket: the records change that added it (nfs4_records_wait). */
    bool recorded;
    uint64_t record_ticket;
    nfs4_owner_t *owners;
    nfs4_stid_t *stids;
    nfs4_session_t *sessions;
    unsigned nrevoked;                /* revoked delegations not yet freed */
    /* 4.0 callback path (SETCLIENTID): the client's callback address,
     * program and ident, and whether a CB_NULL probe answered. */
    struct sockaddr_storage cb_addr;
    socklen_t cb_addr_len;
    uint32_t cb_prog, cb_ident;
    bool cb_up;
};

#define NFS4_STID_HASH 4096
#define NFS4_FILE_HASH 1024
#define NFS4_EXPIRED_RING 64

typedef struct nfs4_server {
    nfs_server_t *srv;
    pthread_mutex_t lock;
    uint32_t epoch;                   /* boot instance, in clientids and stateids */
    uint32_t next_client, next_key;
    nfs4_client_t *clients;
    nfs4_stid_t *stids[NFS4_STID_HASH];
    nfs4_file_t *files[NFS4_FILE_HASH];
    uint32_t lease, grace;
    time_t grace_end;                 /* 0: no grace period */
    time_t nlm_grace_end;             /* NLM clients of the previous run reclaim until then */
    char **reclaimable;               /* client owners (hex) of the previous run */
    size_t nreclaimable;
    uint32_t expired[NFS4_EXPIRED_RING];
    unsigned nexpired;
    time_t last_reap;
    char *record_path;                /* NULL: no state dir */
    /* Pools that keep the client records too (nfs4_records_pool_*), so the
     * head that imports one after a takeover knows who may reclaim. Taken
     * by the record writer without lock, never under it. */
    pthread_mutex_t pools_lock;
    nfs_pool_list_t record_pools;
    /* The record writer (nfs4_state.c): changes of the recorded set are
     * counted under lock (records_asked); the writer writes the whole set
     * once for all the changes made since its last write and then says how
     * far it got (records_durable), signalling records_done. */
    pthread_t records_thread;
    bool records_thread_started, records_stop;
    pthread_cond_t records_work, records_done;
    uint64_t records_asked, records_durable;
    /* Nodes of files that lost their last state, to release once the lock is
     * dropped: the last release of a removed file frees it, a transaction
     * that may wait on the pool. */
    zpl_node_t **released;
    size_t nreleased, released_cap;
    bool delegations;                 /* grant delegations (nfs_delegations) */
    atomic_uint ndelegs;              /* delegations held: NFSv3 skips the lock at 0 */
    struct nfs4_cb *cb;               /* the callback thread (nfs4_callback.c) */
} nfs4_server_t;

time_t nfs4_now(void);
/* Table operations; the caller holds st->lock. */
nfs4_server_t *nfs4_server_new(nfs_server_t *srv, const char *state_dir, uint32_t lease,
                               uint32_t grace);
void nfs4_server_free(nfs4_server_t *st);
bool nfs4_in_grace(nfs4_server_t *st);
/* Unlocks st->lock, then releases the files that lost their last state. */
void nfs4_unlock(nfs4_server_t *st);
nfs4_client_t *nfs4_client_by_id(nfs4_server_t *st, uint64_t clientid, uint32_t *status);
nfs4_client_t *nfs4_client_by_owner(nfs4_server_t *st, const uint8_t *owner, uint32_t len);
nfs4_client_t *nfs4_client_new(nfs4_server_t *st, const uint8_t *owner, uint32_t len,
                               const uint8_t verifier[8], uint32_t minor);
/* Confirms c (4.0 SETCLIENTID_CONFIRM, 4.1 first CREATE_SESSION): drops any other
 * record of the same owner with its state. The client is not recorded for grace
 * until it takes state (nfs4_client_record). */
void nfs4_client_confirm(nfs4_server_t *st, nfs4_client_t *c);
/* c takes state worth reclaiming (an open, a lock, a delegation): adds it to the
 * records if it is not there yet. Returns the records change that added it, for
 * nfs4_records_wait before the reply grants the state (at once if on disk). */
uint64_t nfs4_client_record(nfs4_server_t *st, nfs4_client_t *c);
/* Without st->lock: waits until the records change `ticket` is on disk (in the
 * state directory and every pool), or the server stops. */
void nfs4_records_wait(nfs4_server_t *st, uint64_t ticket);
void nfs4_client_destroy(nfs4_server_t *st, nfs4_client_t *c, bool expired);
/* Drops clients silent for NFS4_COURTESY_MAX (at most once a second). */
void nfs4_reap(nfs4_server_t *st);
/* Seconds a client whose lease ran out keeps its state while nothing conflicts with it. */
#define NFS4_COURTESY_MAX (24 * 3600)
/* If c's lease ran out, revokes all its state (its clientid and stateids
 * answer EXPIRED from now on) and says so: the caller that met c's state in
 * its way looks again. */
bool nfs4_revoke_courtesy(nfs4_server_t *st, nfs4_client_t *c);
/* The client of a lock owner found in a range list (NULL: not a v4 owner). */
nfs4_client_t *nfs4_owner_client(nfs4_server_t *st, const void *owner);
/* nfs4_range_conflict on f's locks, revoking the state of expired NFSv4
 * clients in the way first (v4 LOCK/LOCKT and NLM alike). The caller holds a
 * state count on f (revoking drops other clients' states on it). */
long nfs4_lock_conflict(nfs4_server_t *st, nfs4_file_t *f, const void *owner, uint64_t first,
                        uint64_t last, uint32_t type);
/* The open-owner whose last CLOSE freed the open stateid sid names (NULL: none),
 * so that a retransmitted CLOSE finds the owner's cached reply. */
nfs4_owner_t *nfs4_closed_owner(nfs4_server_t *st, const nfs4_stateid_t *sid);
void nfs4_grace_check_done(nfs4_server_t *st);

nfs4_owner_t *nfs4_owner_find(nfs4_client_t *c, bool is_lock, const uint8_t *id, uint32_t len);
nfs4_owner_t *nfs4_owner_new(nfs4_client_t *c, bool is_lock, const uint8_t *id, uint32_t len);
void nfs4_owner_cache_reply(nfs4_owner_t *o, uint32_t status, const uint8_t *body,
                            uint32_t len);
/* Frees a lock owner and its stateids (RELEASE_LOCKOWNER). */
void nfs4_owner_release(nfs4_server_t *st, nfs4_owner_t *o);

/* NULL: out of memory, or node was freed meanwhile. */
nfs4_file_t *nfs4_file_get(nfs4_server_t *st, nfs_export_t *exp, zpl_node_t *node);
nfs4_file_t *nfs4_file_find(nfs4_server_t *st, zpl_node_t *node);
nfs4_file_t *nfs4_file_find_id(nfs4_server_t *st, uint64_t fsid, uint64_t ino, uint64_t gen);
/* Whether f is node's file (same dataset, object and generation). */
bool nfs4_file_is(const nfs4_file_t *f, zpl_node_t *node);
/* Frees f if no stateid refers to it (after nfs4_file_get found no taker). */
void nfs4_file_drop_unused(nfs4_server_t *st, nfs4_file_t *f);
/* Drops one reference counted in f->nstates (NLM takes them too). */
void nfs4_file_put(nfs4_server_t *st, nfs4_file_t *f);

nfs4_stid_t *nfs4_stid_new(nfs4_server_t *st, uint32_t type, nfs4_client_t *c,
                           nfs4_owner_t *o, nfs4_file_t *f);
void nfs4_stid_free(nfs4_server_t *st, nfs4_stid_t *s);
/* Looks a stateid up: NFS4_OK, or STALE_STATEID (earlier boot), EXPIRED (its
 * client's lease ran out), BAD_STATEID; then checks its seqid. A revoked
 * delegation answers DELEG_REVOKED (4.1) or EXPIRED (4.0) with *out set. */
uint32_t nfs4_stid_find(nfs4_server_t *st, uint32_t minor, const nfs4_stateid_t *sid,
                        nfs4_stid_t **out);
void nfs4_stid_to_wire(nfs4_server_t *st, const nfs4_stid_t *s, nfs4_stateid_t *out);

nfs4_session_t *nfs4_session_new(nfs4_server_t *st, nfs4_client_t *c,
                                 const nfs4_chan_attrs_t *fore, const nfs4_chan_attrs_t *back);
nfs4_session_t *nfs4_session_find(nfs4_server_t *st, const uint8_t id[16]);
void nfs4_session_destroy(nfs4_server_t *st, nfs4_session_t *s);

/* Drops every state on files of exp. */
void nfs4_drop_export(nfs4_server_t *st, nfs_export_t *exp);

/* ---------------------------------------------------------------- delegations */

/* nfs4_deleg.c. Lock held. Whether a delegation of a client other than
 * requester (NULL: an NFSv3 or NLM caller) stands in the way of an access to f
 * (write: every delegation does; read: write delegations): those not yet
 * recalled are recalled, those recalled a lease ago (or whose client's lease
 * ran out) are revoked. true: the caller answers "try again later". The caller
 * holds a state count on f. */
bool nfs4_deleg_conflict(nfs4_server_t *st, nfs4_file_t *f, const nfs4_client_t *requester,
                         bool write);
/* The same for a node, taking the lock, for the client numbered requester (0:
 * unknown, as an NFSv4.0 REMOVE's). */
bool nfs4_deleg_conflict_node(nfs4_server_t *st, zpl_node_t *node, uint64_t requester,
                              bool write);
bool nfs4_deleg_conflict_node_locked(nfs4_server_t *st, zpl_node_t *node, uint64_t requester,
                                     bool write);
/* OPEN's grant: a delegation for client c's open s, or NULL (lock held). */
nfs4_stid_t *nfs4_deleg_grant(nfs4_server_t *st, nfs4_client_t *c, nfs4_stid_t *open,
                              bool want_none);
/* A CLAIM_PREVIOUS OPEN's reclaim of the delegation (read, or write) client c
 * held before the restart, for its open s, or NULL (lock held). *recall: the
 * client is to return it at once (it cannot be called back). */
nfs4_stid_t *nfs4_deleg_reclaim(nfs4_server_t *st, nfs4_client_t *c, nfs4_stid_t *open,
                                bool write, bool *recall);
/* Bookkeeping when a delegation stateid is freed (nfs4_stid_free). */
void nfs4_deleg_forget(nfs4_server_t *st, nfs4_stid_t *s);

/* nfs4_callback.c: the callback thread, CB_NULL/CB_RECALL over the 4.1 back
 * channel or the 4.0 callback address. */
int nfs4_cb_start(nfs4_server_t *st);
void nfs4_cb_stop(nfs4_server_t *st);
/* Queues a CB_RECALL of delegation s (lock held). */
void nfs4_cb_recall(nfs4_server_t *st, nfs4_stid_t *s);
/* Queues a CB_NULL probe of c's 4.0 callback address (lock held). */
void nfs4_cb_probe(nfs4_server_t *st, nfs4_client_t *c);
/* The attributes a write delegation's holder reports in CB_GETATTR. */
typedef struct nfs4_cb_attrs {
    uint64_t change, size;
} nfs4_cb_attrs_t;
/* CB_GETATTR of change and size of the file with handle fh to client clientid
 * (lock not held): waits for the answer, a few seconds at most. NFS4_OK with
 * *out, or the status that went wrong (SERVERFAULT: no answer). */
uint32_t nfs4_cb_getattr(nfs4_server_t *st, uint64_t clientid, const uint8_t fh[ZPL_FH_SIZE],
                         nfs4_cb_attrs_t *out);
/* Whether c can be called back now (lock held). */
bool nfs4_cb_path_up(nfs4_client_t *c);
/* Decodes callback_sec_parms4<> (CREATE_SESSION, BACKCHANNEL_CTL): keeps the
 * first AUTH_SYS, else AUTH_NONE. NFS4_OK or BADXDR. */
uint32_t nfs4_cb_sec_decode(nfs_xdr_t *a, nfs4_cb_sec_t *out);
/* Binds conn as s's back channel (lock held); conn NULL unbinds. */
void nfs4_cb_bind(nfs4_session_t *s, nfs_conn_t *conn);
/* Parses a 4.0 callback address (netid "tcp"/"tcp6", universal address). */
bool nfs4_cb_parse_addr(const uint8_t *netid, uint32_t nlen, const uint8_t *uaddr,
                        uint32_t ulen, struct sockaddr_storage *ss, socklen_t *sl);
