/*
 * Duplicate request cache: the replies to recent NFSv3 calls that change
 * something (CREATE, MKDIR, REMOVE, RENAME...) and to NFSv4.0 COMPOUNDs, kept
 * so that a call retransmitted with the same XID - a client that lost the
 * reply with its connection and sends the call again on a new one - gets the
 * answer the first run gave instead of running again (a REMOVE that already
 * happened would say NOENT, a CREATE EXIST). NFSv4.1 needs none: its session
 * slots do this job (nfs4_ops_state.c).
 *
 * A call is known by its client's address (with port), XID, program, version,
 * procedure, its arguments' length and a hash of their first NFS_DRC_HASHED
 * bytes, so a reused XID with other arguments is not mistaken for a
 * retransmission. The cache is a fixed ring of
 * NFS_DRC_ENTRIES replies of at most NFS_DRC_MAX_REPLY bytes each (a READ's
 * data is never kept): the oldest entry gives way to the newest, and an entry
 * older than NFS_DRC_TTL_S seconds no longer answers. Only completed calls
 * are kept; a retransmission that arrives while the first run is still going
 * runs again, as it would without a cache.
 */
#include "nfs_srv.h"

#include <cairn/util.h>

#include <stdlib.h>
#include <string.h>

#define NFS_DRC_ENTRIES 512
#define NFS_DRC_MAX_REPLY 8192
#define NFS_DRC_TTL_S 120
#define NFS_DRC_HASHED 1024   /* bytes of the arguments hashed into the key */

typedef struct drc_entry {
    nfs_drc_key_t key;
    uint64_t stored_ns;
    uint8_t hdr[NFS_RPC_HDR_MAX];     /* the reply as sent: record mark and RPC header, */
    size_t hlen;
    uint8_t *body;                    /* then the procedure's results */
    size_t blen;
} drc_entry_t;

struct nfs_drc {
    pthread_mutex_t lock;
    drc_entry_t ring[NFS_DRC_ENTRIES];
    unsigned next;                    /* the slot the next reply takes */
};

nfs_drc_t *nfs_drc_create(void)
{
    nfs_drc_t *d = calloc(1, sizeof *d);
    if (d) pthread_mutex_init(&d->lock, NULL);
    return d;
}

void nfs_drc_destroy(nfs_drc_t *d)
{
    if (!d) return;
    for (unsigned i = 0; i < NFS_DRC_ENTRIES; i++) free(d->ring[i].body);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

void nfs_drc_key(nfs_drc_key_t *k, const nfs_call_t *call)
{
    memset(k, 0, sizeof *k);
    memcpy(&k->peer, &call->peer, call->peer_len);
    k->peer_len = call->peer_len;
    k->xid = call->xid;
    k->prog = call->prog;
    k->vers = call->vers;
    k->proc = call->proc;
    k->args_len = call->args.len;
    /* The hash only tells a reused XID from a retransmission, and every 4.0
     * COMPOUND comes here, READs and 1 MiB WRITEs too: the first bytes (the
     * tag, the operations, their stateids and offsets) and the length do that
     * job without a byte-wise pass over a write's data on every call. */
    size_t hashed = call->args.len < NFS_DRC_HASHED ? call->args.len : NFS_DRC_HASHED;
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < hashed; i++) {
        h ^= call->args.buf[i];
        h *= 1099511628211ull;
    }
    k->args_hash = h;
}

static bool key_equal(const nfs_drc_key_t *a, const nfs_drc_key_t *b)
{
    return a->xid == b->xid && a->prog == b->prog && a->vers == b->vers && a->proc == b->proc &&
           a->args_len == b->args_len && a->args_hash == b->args_hash &&
           a->peer_len == b->peer_len && !memcmp(&a->peer, &b->peer, a->peer_len);
}

static bool fresh(const drc_entry_t *e, uint64_t now)
{
    return e->body && now - e->stored_ns <= (uint64_t)NFS_DRC_TTL_S * 1000000000ull;
}

bool nfs_drc_answer(nfs_drc_t *d, const nfs_drc_key_t *k, uint8_t *hdr, size_t *hlen,
                    nfs_xdr_t *res)
{
    uint64_t now = cairn_now_ns();
    bool found = false;
    pthread_mutex_lock(&d->lock);
    for (unsigned i = 0; i < NFS_DRC_ENTRIES && !found; i++) {
        const drc_entry_t *e = &d->ring[i];
        if (!fresh(e, now) || !key_equal(&e->key, k)) continue;
        memcpy(hdr, e->hdr, e->hlen);
        *hlen = e->hlen;
        nfs_xdr_init_encode(res, e->blen);
        nfs_xdr_put_fixed(res, e->body, (uint32_t)e->blen);   /* XDR: a multiple of 4 */
        found = !res->err;
    }
    pthread_mutex_unlock(&d->lock);
    return found;
}

void nfs_drc_store(nfs_drc_t *d, const nfs_drc_key_t *k, const uint8_t *hdr, size_t hlen,
                   const nfs_xdr_t *body)
{
    if (hlen > NFS_RPC_HDR_MAX || body->len > NFS_DRC_MAX_REPLY) return;
    uint8_t *copy = malloc(body->len ? body->len : 1);
    if (!copy) return;
    nfs_xdr_copy_out(body, 0, body->len, copy);
    pthread_mutex_lock(&d->lock);
    drc_entry_t *e = &d->ring[d->next];
    d->next = (d->next + 1) % NFS_DRC_ENTRIES;
    free(e->body);
    e->key = *k;
    e->stored_ns = cairn_now_ns();
    memcpy(e->hdr, hdr, hlen);
    e->hlen = hlen;
    e->body = copy;
    e->blen = body->len;
    pthread_mutex_unlock(&d->lock);
}
