/*
 * The per-COMPOUND context shared by the NFSv4 operation handlers
 * (nfs4.c: dispatch, file handles, pseudo-root and filesystem operations;
 * nfs4_ops_state.c: clients, sessions, opens and locks).
 */
#ifndef CAIRN_NFS4_COMPOUND_H
#define CAIRN_NFS4_COMPOUND_H

#include "nfs4_impl.h"

typedef enum { NFS4_FH_NONE, NFS4_FH_PSEUDO, NFS4_FH_REAL } nfs4_fh_kind_t;

#define NFS4_PSEUDO_PATH_MAX 1024

/* The current or saved file handle of a COMPOUND. */
typedef struct nfs4_cfh {
    nfs4_fh_kind_t kind;
    char path[NFS4_PSEUDO_PATH_MAX];  /* PSEUDO: the directory's path ("/", "/tank") */
    nfs_export_t *exp;                /* REAL: held */
    zpl_node_t *node;                 /* REAL: held */
    zpl_cred_t cred;                  /* REAL: the effective credential for exp */
    bool writable;
} nfs4_cfh_t;

typedef struct nfs4_cx {
    nfs4_server_t *st;
    nfs_call_t *call;
    nfs_xdr_t *a;                     /* arguments */
    nfs_xdr_t *r;                     /* results */
    uint32_t minor;
    nfs4_cfh_t cur, saved;
    /* 4.1: the session of this COMPOUND (after SEQUENCE) */
    bool have_session;
    uint8_t sessionid[NFS4_SESSIONID_SIZE];
    uint32_t slot;
    uint64_t clientid;
    uint64_t client40;                /* 4.0: the client an op of this COMPOUND named
                                         (nfs4_client_of), 0 if none */
    bool cachethis;
    uint32_t reply_limit;             /* the reply's size limit (reply_size_status) */
    bool replayed;                    /* the whole reply came from the slot cache */
    /* On the I/O thread (memory_only) SEQUENCE takes its slot tentatively:
     * what the slot held before, put back by nfs4_slot_undo when the
     * COMPOUND goes to a worker instead, freed by nfs4_slot_done. */
    uint32_t prev_seqid;
    bool prev_cached;
    uint8_t *prev_reply;
    uint32_t prev_reply_len;
    /* 4.1 current stateid */
    bool have_cur_sid;
    nfs4_stateid_t cur_sid;
    bool have_saved_sid;              /* SAVEFH's copy, back with RESTOREFH */
    nfs4_stateid_t saved_sid;
    uint32_t opidx, numops;
    size_t start;                     /* where the COMPOUND reply starts in r */
    size_t args;                      /* where this op's arguments start in a */
    size_t body;                      /* where this op's result body starts */
    bool keep_body;                   /* an error result that still has a body */
    /* The client's record (nfs4_client_record) this COMPOUND granted state
     * under: the reply waits until it is on disk (0: nothing to wait for). */
    uint64_t record_wait;
} nfs4_cx_t;

/* nfs4.c helpers used by the state operations */
uint32_t nfs4_need_real_file(nfs4_cx_t *cx);          /* current fh is a regular file */
uint32_t nfs4_name_get(nfs4_cx_t *cx, char *name);    /* component4 into name[256] */
void nfs4_cfh_clear(nfs4_cfh_t *f);
void nfs4_cfh_set_real(nfs4_cfh_t *f, nfs_export_t *exp, zpl_node_t *node,
                       const zpl_cred_t *cred, bool writable);
uint32_t nfs4_perm(nfs4_cfh_t *f, zpl_node_t *n, uint32_t want);
uint32_t nfs4_durable(nfs4_cfh_t *f);
/* NFS4ERR_ROFS unless f is a writable export's real file. */
uint32_t nfs4_need_writable(nfs4_cfh_t *f);
/* Mode bits for I/O without an open stateid (the owner always passes). */
uint32_t nfs4_owner_perm(nfs4_cfh_t *f, uint32_t want);
void nfs4_put_stateid(nfs_xdr_t *x, const nfs4_stateid_t *s);
void nfs4_get_stateid(nfs_xdr_t *x, nfs4_stateid_t *s);
void nfs4_put_cinfo(nfs_xdr_t *x, const zpl_wcc_t *wcc);
/* Resolves the 4.1 "current stateid" special value. */
uint32_t nfs4_resolve_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid);
/* An operation's stateid argument, read (NFS4ERR_BADXDR) and resolved; the _file
 * form also wants the current filehandle a real file (nfs4_need_real_file). */
uint32_t nfs4_arg_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid);
uint32_t nfs4_arg_file_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid);
void nfs4_set_cur_stateid(nfs4_cx_t *cx, const nfs4_stateid_t *sid);

/* nfs4_ops_state.c: helpers shared with OPEN (nfs4_open.c), all under st->lock */
/* The client this COMPOUND acts for: 4.1 the session's, 4.0 the confirmed
 * one named by clientid. Renews its lease. */
uint32_t nfs4_client_of(nfs4_cx_t *cx, uint64_t clientid, nfs4_client_t **out);
/* 4.0 sequencing verdict for owner o: NFS4_OK to run; otherwise the status
 * to return (*replayed when it is a cached reply, already in cx->r). */
uint32_t nfs4_seq_check(nfs4_cx_t *cx, nfs4_owner_t *o, uint32_t seqid, bool *replayed);
/* Records a 4.0 seqid and the reply now in cx->r. */
void nfs4_seq_finish(nfs4_cx_t *cx, nfs4_owner_t *o, uint32_t seqid, uint32_t status);
/* Puts s's stateid in the reply and makes it the current stateid. */
void nfs4_put_stid(nfs4_cx_t *cx, const nfs4_stid_t *s);
/* Calls fn on every open state of file f; stops on non-zero. */
uint32_t nfs4_each_open(nfs4_server_t *st, nfs4_file_t *f,
                        uint32_t (*fn)(nfs4_stid_t *s, void *arg), void *arg);
/* A 4.1 client that has not said RECLAIM_COMPLETE takes no new state. */
bool nfs4_awaiting_reclaim_complete(const nfs4_cx_t *cx, const nfs4_client_t *c);

/* nfs4_ops_state.c */
uint32_t nfs4_op_setclientid(nfs4_cx_t *cx);
uint32_t nfs4_op_setclientid_confirm(nfs4_cx_t *cx);
uint32_t nfs4_op_renew(nfs4_cx_t *cx);
uint32_t nfs4_op_exchange_id(nfs4_cx_t *cx);
uint32_t nfs4_op_create_session(nfs4_cx_t *cx);
uint32_t nfs4_op_destroy_session(nfs4_cx_t *cx);
uint32_t nfs4_op_destroy_clientid(nfs4_cx_t *cx);
uint32_t nfs4_op_sequence(nfs4_cx_t *cx);
uint32_t nfs4_op_reclaim_complete(nfs4_cx_t *cx);
uint32_t nfs4_op_bind_conn(nfs4_cx_t *cx);
uint32_t nfs4_op_test_stateid(nfs4_cx_t *cx);
uint32_t nfs4_op_free_stateid(nfs4_cx_t *cx);
uint32_t nfs4_op_open_confirm(nfs4_cx_t *cx);
uint32_t nfs4_op_open_downgrade(nfs4_cx_t *cx);
uint32_t nfs4_op_close(nfs4_cx_t *cx);
uint32_t nfs4_op_lock(nfs4_cx_t *cx);
uint32_t nfs4_op_lockt(nfs4_cx_t *cx);
uint32_t nfs4_op_locku(nfs4_cx_t *cx);
uint32_t nfs4_op_release_lockowner(nfs4_cx_t *cx);
/* nfs4_open.c */
uint32_t nfs4_op_open(nfs4_cx_t *cx);
/* nfs4_deleg.c */
uint32_t nfs4_op_delegreturn(nfs4_cx_t *cx);
uint32_t nfs4_op_delegpurge(nfs4_cx_t *cx);
uint32_t nfs4_op_backchannel_ctl(nfs4_cx_t *cx);
/* NFS4ERR_DELAY while another client's delegation on node (or dir/name) is
 * recalled ahead of a change to it (REMOVE, RENAME, LINK, SETATTR); sid names the
 * requester in 4.0 (may be NULL). */
uint32_t nfs4_deleg_check(nfs4_cx_t *cx, zpl_node_t *node, const nfs4_stateid_t *sid);
uint32_t nfs4_deleg_check_name(nfs4_cx_t *cx, zpl_node_t *dir, const char *name);
/* GETATTR, VERIFY or NVERIFY of change or size (req) on the current file while
 * another client holds a write delegation on it: asks the holder (CB_GETATTR)
 * and puts its values in *a (RFC 8881 10.4.3); NFS4ERR_DELAY while the
 * delegation is being recalled (also when the holder does not answer, which
 * recalls it). */
uint32_t nfs4_deleg_getattr(nfs4_cx_t *cx, const nfs4_bitmap_t *req, zpl_attr_t *a);
/* The stateid of a READ, WRITE or SETATTR(size) on the current file. */
uint32_t nfs4_check_io_stateid(nfs4_cx_t *cx, nfs4_stateid_t *sid, bool write, bool *via_open);
/* Stores the reply of a 4.1 COMPOUND in its slot and frees the slot. */
void nfs4_slot_done(nfs4_cx_t *cx, const nfs_xdr_t *r, size_t start, size_t len);
/* Gives back a slot SEQUENCE took on the I/O thread as it was before, for a
 * COMPOUND that goes to a worker, whose SEQUENCE then takes it for real. */
void nfs4_slot_undo(nfs4_cx_t *cx);

/* nfs42.c: the NFSv4.2 operations (minor version 2 only). */
uint32_t nfs42_dispatch(nfs4_cx_t *cx, uint32_t op);

#endif
