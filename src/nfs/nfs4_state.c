/*
 * NFSv4 state tables: clients, sessions and their slots, open/lock owners,
 * files carrying state and stateids, plus the client records that make a
 * grace period possible after a restart.
 *
 * Identity: a clientid is (boot epoch << 32 | client number) and a stateid's
 * "other" is (epoch, client number, state key), so a stateid from an earlier
 * run is recognised as stale, one whose client's lease ran out as expired (a
 * small ring remembers recently expired client numbers), and anything else
 * unknown as bad, without keeping dead state around.
 *
 * Leases are courteous: a client that has not renewed within the lease keeps
 * its opens and locks while nobody wants them (it may come back and renew,
 * as after a network partition), but the first request that conflicts with
 * them (a share reservation or a lock) revokes all of that client's state
 * and proceeds (nfs4_revoke_courtesy); its clientid and stateids answer
 * NFS4ERR_EXPIRED from then on. Every COMPOUND reaps, at most once a second,
 * the clients silent for NFS4_COURTESY_MAX, so an abandoned client's state
 * (and any removed file it held open) does not stay for ever.
 *
 * Grace: the clients that hold state worth reclaiming are recorded (owner id
 * in hex, one a line) in `nfs4-clients` in the server's state directory,
 * atomically (temporary file, fsync, rename). At start, if the file names any
 * client, the server is in grace for `grace` seconds: only those clients may
 * reclaim, and new opens and locks wait with NFS4ERR_GRACE. The file keeps the
 * previous run's clients until grace ends, so a second restart during grace
 * loses nobody.
 *
 * Who is recorded (RFC 7530 9.6.3, RFC 8881 8.4.3): a confirmed client when it
 * first takes an open, a lock or a delegation (a reclaim in grace too), not at
 * SETCLIENTID_CONFIRM or CREATE_SESSION: a client that never opened anything
 * has nothing to reclaim and gets no grace period after the next start (a
 * client retrying during grace as a new client each time no longer piles up
 * records). The reply that grants the first state waits until the record is
 * on disk (nfs4_records_wait), so a client told it holds state can always
 * reclaim it. The record goes when the client does (DESTROY_CLIENTID, a new
 * incarnation, revocation of a courtesy client, the reaper), and when a client
 * without state lets its lease run out; a client that closed everything but
 * still renews keeps it (the RFCs allow that), so a client opening and closing
 * files costs no record churn.
 *
 * Writing: changes of the recorded set are counted under the lock, and one
 * writer thread per server writes the whole set (the file, then each pool)
 * once for all the changes made since its previous write: 200 clients opening
 * at once cost a few writes, each one DSL task and so one txg per pool, not
 * one each. Nobody holds st->lock while a write runs.
 *
 * The same records live in every pool with exported filesystems, one
 * configuration entry per client (`nfs4.client:<hash>` = owner in hex): the
 * head that imports a pool after a takeover adds the pool's clients to those
 * that may reclaim and starts a grace period if any of them is new to it
 * (docs/ha.md). A pool imported back by the head that already knew all its
 * clients changes nothing. The file stays (the pools it mirrors may be gone),
 * and a pool that predates this gets the file's records when it is first
 * exported, before the export is announced.
 *
 * Every function here runs with st->lock held, except nfs4_records_pool_add
 * and _remove (called by the exports code) and nfs4_records_wait, which take
 * it themselves.
 */
#include "nfs4_impl.h"

#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

time_t nfs4_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static char *hex_of(const uint8_t *p, uint32_t len)
{
    char *s = malloc((size_t)len * 2 + 1);
    if (!s) return NULL;
    for (uint32_t i = 0; i < len; i++) sprintf(s + 2 * i, "%02x", p[i]);
    s[2 * (size_t)len] = 0;
    return s;
}

/* The owners (hex) the records hold: the previous run's still reclaimable,
 * then every recorded client, no duplicates; NULL entries where memory ran out. */
static char **records_collect(nfs4_server_t *st, size_t *n)
{
    size_t cap = st->nreclaimable;
    for (nfs4_client_t *c = st->clients; c; c = c->next) cap += c->recorded;
    char **v = calloc(cap ? cap : 1, sizeof *v);
    *n = 0;
    if (!v) return NULL;
    for (size_t i = 0; i < st->nreclaimable; i++) v[(*n)++] = strdup(st->reclaimable[i]);
    for (nfs4_client_t *c = st->clients; c; c = c->next) {
        if (!c->recorded) continue;
        char *h = hex_of(c->owner, c->owner_len);
        bool dup = false;
        for (size_t i = 0; h && i < st->nreclaimable && !dup; i++)
            dup = strcmp(st->reclaimable[i], h) == 0;
        if (dup) free(h);
        else v[(*n)++] = h;
    }
    return v;
}

static void records_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void records_write_file(nfs4_server_t *st, char **v, size_t n)
{
    if (!st->record_path) return;
    size_t plen = strlen(st->record_path);
    char *tmp = malloc(plen + 8);
    if (!tmp) return;
    snprintf(tmp, plen + 8, "%s.tmp", st->record_path);
    FILE *f = fopen(tmp, "w");
    if (!f) { free(tmp); return; }
    for (size_t i = 0; i < n; i++)
        if (v[i]) fprintf(f, "%s\n", v[i]);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp, st->record_path) == 0;
    if (!ok) unlink(tmp);
    free(tmp);
}

/* Adds owner (hex) to those that may reclaim: 1 if it is new, 0 if it was
 * there, -ENOMEM. */
static int reclaimable_add(nfs4_server_t *st, const char *owner)
{
    for (size_t i = 0; i < st->nreclaimable; i++)
        if (!strcmp(st->reclaimable[i], owner)) return 0;
    char **v = realloc(st->reclaimable, (st->nreclaimable + 1) * sizeof *v);
    if (!v) return -ENOMEM;
    st->reclaimable = v;
    if (!(v[st->nreclaimable] = strdup(owner))) return -ENOMEM;
    st->nreclaimable++;
    return 1;
}

static void records_load(nfs4_server_t *st)
{
    if (!st->record_path) return;
    FILE *f = fopen(st->record_path, "r");
    if (!f) return;
    char line[2 * NFS4_OPAQUE_LIMIT + 8];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        if (n && reclaimable_add(st, line) < 0) break;
    }
    fclose(f);
}

/* ------------------------------------------------- the record writer */

#define POOL_RECORD_PREFIX "nfs4.client:"

/* The recorded set changed: the writer writes it again. Never waits, so the
 * reaper and the I/O thread's COMPOUNDs may call it. Returns the change's number. */
static uint64_t records_changed(nfs4_server_t *st)
{
    uint64_t ticket = ++st->records_asked;
    pthread_cond_signal(&st->records_work);
    return ticket;
}

/* One write of the whole set, without st->lock: the file, then every pool. */
static void records_write(nfs4_server_t *st, char **v, size_t n)
{
    records_write_file(st, v, n);
    pthread_mutex_lock(&st->pools_lock);
    for (size_t i = 0; i < st->record_pools.n; i++) {
        int rc = nfs_pool_records_store(st->record_pools.v[i], POOL_RECORD_PREFIX, v, n);
        if (rc)
            log_warn("nfs4", "cannot keep the NFSv4 client records in a pool: %s", strerror(-rc));
    }
    pthread_mutex_unlock(&st->pools_lock);
}

/* Changes come in bursts (clients opening after a mount storm, a takeover,
 * a grace period's end): once one is there, the writer waits while more keep
 * coming, RECORDS_GATHER_QUIET_MS apart at most, for RECORDS_GATHER_MAX_MS in
 * all, so the OPENs the workers are running go into the same write. A first
 * OPEN waits that much longer, once per client. */
#define RECORDS_GATHER_QUIET_MS 2
#define RECORDS_GATHER_MAX_MS 10

static struct timespec mono_in_ms(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

static bool mono_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void records_gather(nfs4_server_t *st)
{
    struct timespec end = mono_in_ms(RECORDS_GATHER_MAX_MS);
    uint64_t seen;
    do {
        seen = st->records_asked;
        struct timespec quiet = mono_in_ms(RECORDS_GATHER_QUIET_MS);
        if (!mono_before(&quiet, &end)) quiet = end;
        pthread_cond_timedwait(&st->records_work, &st->lock, &quiet);
        struct timespec now = mono_in_ms(0);
        if (!mono_before(&now, &end)) break;
    } while (st->records_asked != seen && !st->records_stop);
}

static void *records_writer(void *arg)
{
    nfs4_server_t *st = arg;
    pthread_mutex_lock(&st->lock);
    while (!st->records_stop) {
        if (st->records_durable == st->records_asked) {
            pthread_cond_wait(&st->records_work, &st->lock);
            continue;
        }
        records_gather(st);
        uint64_t upto = st->records_asked;   /* every change made so far */
        size_t n = 0;
        char **v = records_collect(st, &n);
        /* No file of ours is released here: a plain unlock (see nfs4_unlock). */
        pthread_mutex_unlock(&st->lock);
        if (v) records_write(st, v, n);
        records_free(v, n);
        pthread_mutex_lock(&st->lock);
        /* Out of memory the changes are not written; their waiters go on
         * (as when a pool refuses the write): grace is a promise kept where we can. */
        st->records_durable = upto;
        pthread_cond_broadcast(&st->records_done);
    }
    pthread_cond_broadcast(&st->records_done);
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

uint64_t nfs4_client_record(nfs4_server_t *st, nfs4_client_t *c)
{
    if (!c->recorded) {
        c->recorded = true;
        c->record_ticket = records_changed(st);
    }
    return c->record_ticket;
}

/* c's record goes (it holds nothing worth reclaiming any more). */
static void client_unrecord(nfs4_server_t *st, nfs4_client_t *c)
{
    if (!c->recorded) return;
    c->recorded = false;
    records_changed(st);
}

void nfs4_records_wait(nfs4_server_t *st, uint64_t ticket)
{
    pthread_mutex_lock(&st->lock);
    while (st->records_durable < ticket && !st->records_stop && st->records_thread_started)
        pthread_cond_wait(&st->records_done, &st->lock);
    pthread_mutex_unlock(&st->lock);
}

static void records_writer_start(nfs4_server_t *st)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->records_work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&st->records_done, NULL);
    st->records_thread_started =
        pthread_create(&st->records_thread, NULL, records_writer, st) == 0;
    if (!st->records_thread_started)
        log_warn("nfs4", "cannot start the client record writer: clients get no grace period");
}

static void records_writer_stop(nfs4_server_t *st)
{
    pthread_mutex_lock(&st->lock);
    st->records_stop = true;
    pthread_cond_signal(&st->records_work);
    pthread_mutex_unlock(&st->lock);
    if (st->records_thread_started) pthread_join(st->records_thread, NULL);
    st->records_thread_started = false;
}

/* ------------------------------------------------- records kept in pools */

void nfs4_records_pool_add(void *state, dsl_pool_t *dp)
{
    nfs4_server_t *st = state;
    nfs_pool_records_t stored = {0};
    pthread_mutex_lock(&st->pools_lock);
    bool added_pool = nfs_pool_list_add(&st->record_pools, dp);
    if (added_pool) nfs_pool_records_load(dp, POOL_RECORD_PREFIX, &stored);
    pthread_mutex_unlock(&st->pools_lock);
    if (!added_pool) return;
    pthread_mutex_lock(&st->lock);
    size_t added = 0;
    for (size_t i = 0; i < stored.n; i++) {
        if (reclaimable_add(st, stored.v[i]) <= 0) continue;
        added++;
        /* A client already here (other pools) may reclaim this pool's state. */
        for (nfs4_client_t *c = st->clients; c; c = c->next) {
            char *h = c->confirmed ? hex_of(c->owner, c->owner_len) : NULL;
            if (h && !strcmp(h, stored.v[i])) {
                c->may_reclaim = true;
                c->reclaim_complete = false;
            }
            free(h);
        }
    }
    if (added) {
        time_t end = nfs4_now() + st->grace;
        if (st->grace_end < end) st->grace_end = end;
        log_info("nfs4", "a pool came with %zu clients of another head: grace period of %u s "
                 "for their reclaims", added, st->grace);
    }
    /* The pool gets this head's recorded clients too, before it is exported:
     * one of them may open a file in it at once, and its record must be there. */
    uint64_t ticket = records_changed(st);
    nfs4_unlock(st);
    nfs_pool_records_free(&stored);
    nfs4_records_wait(st, ticket);
}

void nfs4_records_pool_remove(void *state, dsl_pool_t *dp)
{
    nfs4_server_t *st = state;
    pthread_mutex_lock(&st->pools_lock);
    nfs_pool_list_remove(&st->record_pools, dp);
    pthread_mutex_unlock(&st->pools_lock);
}

nfs4_server_t *nfs4_server_new(nfs_server_t *srv, const char *state_dir, uint32_t lease,
                               uint32_t grace)
{
    nfs4_server_t *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->srv = srv;
    pthread_mutex_init(&st->lock, NULL);
    pthread_mutex_init(&st->pools_lock, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* Never 0, so no real stateid is mistaken for the anonymous one. */
    st->epoch = (uint32_t)ts.tv_sec ^ ((uint32_t)ts.tv_nsec << 12) ^ (uint32_t)getpid();
    if (st->epoch == 0 || st->epoch == UINT32_MAX) st->epoch = 1;
    st->next_client = 1;
    st->next_key = 1;
    st->lease = lease;
    st->grace = grace;
    if (state_dir) {
        mkdir(state_dir, 0700);   /* may exist; a failure shows up when saving */
        size_t n = strlen(state_dir) + 32;
        st->record_path = malloc(n);
        if (st->record_path) snprintf(st->record_path, n, "%s/nfs4-clients", state_dir);
    }
    records_load(st);
    if (st->nreclaimable) st->grace_end = nfs4_now() + grace;
    records_writer_start(st);
    return st;
}

static void release_files(zpl_node_t **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        zpl_open_rele(v[i]);   /* frees the file if it was removed meanwhile */
        zpl_node_rele(v[i]);
    }
}

void nfs4_unlock(nfs4_server_t *st)
{
    zpl_node_t **v = st->released;
    size_t n = st->nreleased;
    if (n) {
        st->released = NULL;
        st->nreleased = st->released_cap = 0;
    }
    pthread_mutex_unlock(&st->lock);
    release_files(v, n);
    free(n ? v : NULL);
}

void nfs4_server_free(nfs4_server_t *st)
{
    /* Keep the records: the clients may reclaim after the next start. */
    records_writer_stop(st);
    while (st->clients) nfs4_client_destroy(st, st->clients, false);
    for (size_t i = 0; i < st->nreclaimable; i++) free(st->reclaimable[i]);
    free(st->reclaimable);
    free(st->record_path);
    nfs_pool_list_free(&st->record_pools);
    pthread_mutex_destroy(&st->pools_lock);
    pthread_cond_destroy(&st->records_work);
    pthread_cond_destroy(&st->records_done);
    release_files(st->released, st->nreleased);
    free(st->released);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

bool nfs4_in_grace(nfs4_server_t *st)
{
    /* One grace period for NFSv4 and NLM: a v4 client must not take a lock
     * an NLM client of the previous run is about to reclaim, nor the reverse. */
    bool nlm = st->nlm_grace_end && nfs4_now() < st->nlm_grace_end;
    if (!st->grace_end) return nlm;
    if (nfs4_now() < st->grace_end) return true;
    st->grace_end = 0;
    for (size_t i = 0; i < st->nreclaimable; i++) free(st->reclaimable[i]);
    free(st->reclaimable);
    st->reclaimable = NULL;
    st->nreclaimable = 0;
    records_changed(st);
    return nlm;
}

/* Ends grace early when every client of the previous run has said
 * RECLAIM_COMPLETE (4.1). */
void nfs4_grace_check_done(nfs4_server_t *st)
{
    if (!nfs4_in_grace(st)) return;
    for (size_t i = 0; i < st->nreclaimable; i++) {
        bool done = false;
        for (nfs4_client_t *c = st->clients; c && !done; c = c->next) {
            if (!c->confirmed || !c->reclaim_complete) continue;
            char *h = hex_of(c->owner, c->owner_len);
            done = h && strcmp(h, st->reclaimable[i]) == 0;
            free(h);
        }
        if (!done) return;
    }
    st->grace_end = 1;   /* in the past: the next check ends it */
    nfs4_in_grace(st);
}

static bool was_expired(nfs4_server_t *st, uint32_t num)
{
    unsigned n = st->nexpired < NFS4_EXPIRED_RING ? st->nexpired : NFS4_EXPIRED_RING;
    for (unsigned i = 0; i < n; i++)
        if (st->expired[i] == num) return true;
    return false;
}

nfs4_client_t *nfs4_client_by_id(nfs4_server_t *st, uint64_t clientid, uint32_t *status)
{
    for (nfs4_client_t *c = st->clients; c; c = c->next)
        if (c->clientid == clientid) { *status = NFS4_OK; return c; }
    if ((uint32_t)(clientid >> 32) == st->epoch && was_expired(st, (uint32_t)clientid))
        *status = NFS4ERR_EXPIRED;
    else
        *status = NFS4ERR_STALE_CLIENTID;
    return NULL;
}

nfs4_client_t *nfs4_client_by_owner(nfs4_server_t *st, const uint8_t *owner, uint32_t len)
{
    /* Confirmed records first: an unconfirmed one of the same owner is a
     * client that restarted and has not confirmed yet. */
    nfs4_client_t *unconf = NULL;
    for (nfs4_client_t *c = st->clients; c; c = c->next) {
        if (c->owner_len != len || memcmp(c->owner, owner, len)) continue;
        if (c->confirmed) return c;
        unconf = c;
    }
    return unconf;
}

nfs4_client_t *nfs4_client_new(nfs4_server_t *st, const uint8_t *owner, uint32_t len,
                               const uint8_t verifier[8], uint32_t minor)
{
    nfs4_client_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->owner = malloc(len ? len : 1);
    if (!c->owner) { free(c); return NULL; }
    memcpy(c->owner, owner, len);
    c->owner_len = len;
    memcpy(c->verifier, verifier, 8);
    c->minor = minor;
    c->clientid = (uint64_t)st->epoch << 32 | st->next_client++;
    if (st->next_client == 0) st->next_client = 1;
    c->renewed = nfs4_now();
    c->cs_seqid = 1;
    for (int i = 0; i < 8; i++) c->confirm[i] = (uint8_t)(rand() ^ (int)(c->clientid >> (i * 4)));
    char *h = hex_of(owner, len);
    for (size_t i = 0; h && i < st->nreclaimable; i++)
        if (strcmp(h, st->reclaimable[i]) == 0) c->may_reclaim = true;
    free(h);
    c->next = st->clients;
    st->clients = c;
    return c;
}

void nfs4_client_confirm(nfs4_server_t *st, nfs4_client_t *c)
{
    for (nfs4_client_t *o = st->clients, *next; o; o = next) {
        next = o->next;
        /* The previous incarnation's state is gone: its stateids say EXPIRED. */
        if (o != c && o->owner_len == c->owner_len && !memcmp(o->owner, c->owner, c->owner_len))
            nfs4_client_destroy(st, o, o->confirmed);
    }
    c->confirmed = true;
    c->renewed = nfs4_now();
}

void nfs4_file_put(nfs4_server_t *st, nfs4_file_t *f)
{
    if (--f->nstates) return;
    nfs4_file_t **pp = &st->files[f->ino % NFS4_FILE_HASH];
    while (*pp != f) pp = &(*pp)->next;
    *pp = f->next;
    nfs4_range_free(&f->locks);
    if (st->nreleased == st->released_cap) {
        st->released_cap = st->released_cap ? st->released_cap * 2 : 16;
        st->released = cairn_realloc(st->released, st->released_cap * sizeof *st->released);
    }
    st->released[st->nreleased++] = f->node;   /* see nfs4_unlock */
    free(f);
}

void nfs4_file_drop_unused(nfs4_server_t *st, nfs4_file_t *f)
{
    if (f->nstates) return;
    f->nstates = 1;
    nfs4_file_put(st, f);
}

void nfs4_stid_free(nfs4_server_t *st, nfs4_stid_t *s)
{
    nfs4_stid_t **pp = &st->stids[s->key % NFS4_STID_HASH];
    while (*pp != s) pp = &(*pp)->hnext;
    *pp = s->hnext;
    pp = &s->client->stids;
    while (*pp != s) pp = &(*pp)->cnext;
    *pp = s->cnext;
    if (s->type == NFS4_STID_LOCK) nfs4_range_drop_owner(&s->file->locks, s->owner);
    if (s->type == NFS4_STID_DELEG) nfs4_deleg_forget(st, s);
    /* Lock states made from this open lose their parent. */
    for (nfs4_stid_t *o = s->client->stids; o; o = o->cnext)
        if (o->open == s) o->open = NULL;
    nfs4_file_put(st, s->file);
    free(s);
}

static void owner_free(nfs4_owner_t *o)
{
    free(o->id);
    free(o->reply);
    free(o);
}

void nfs4_client_destroy(nfs4_server_t *st, nfs4_client_t *c, bool expired)
{
    client_unrecord(st, c);
    while (c->sessions) nfs4_session_destroy(st, c->sessions);
    while (c->stids) nfs4_stid_free(st, c->stids);
    while (c->owners) {
        nfs4_owner_t *o = c->owners;
        c->owners = o->next;
        owner_free(o);
    }
    nfs4_client_t **pp = &st->clients;
    while (*pp != c) pp = &(*pp)->next;
    *pp = c->next;
    if (expired) st->expired[st->nexpired++ % NFS4_EXPIRED_RING] = (uint32_t)c->clientid;
    free(c->owner);
    free(c->cs_reply);
    free(c);
}

/* A request of c is running on one of its session slots (it renews when done). */
static bool client_busy(const nfs4_client_t *c)
{
    for (nfs4_session_t *s = c->sessions; s; s = s->next)
        for (uint32_t i = 0; i < s->fore.maxreqs; i++)
            if (s->slots[i].busy) return true;
    return false;
}

void nfs4_reap(nfs4_server_t *st)
{
    time_t now = nfs4_now();
    if (now == st->last_reap) return;
    st->last_reap = now;
    for (nfs4_client_t *c = st->clients, *next; c; c = next) {
        next = c->next;
        /* An unconfirmed record lives one lease (RFC 8881 18.35.4). */
        time_t keep = c->confirmed ? NFS4_COURTESY_MAX : (time_t)st->lease;
        bool lapsed = now - c->renewed > (time_t)st->lease;
        /* Nothing to reclaim and no longer renewing: no grace for it. */
        if (lapsed && !c->stids) client_unrecord(st, c);
        if (now - c->renewed <= keep || client_busy(c)) continue;
        nfs4_client_destroy(st, c, c->confirmed);
    }
}

bool nfs4_revoke_courtesy(nfs4_server_t *st, nfs4_client_t *c)
{
    /* A whole second past the lease: the renewal clock counts in seconds. */
    if (!c || nfs4_now() - c->renewed <= (time_t)st->lease || client_busy(c)) return false;
    log_info("nfs4", "client %016llx: lease expired %lld s ago; its state yields to a "
             "conflicting request", (unsigned long long)c->clientid,
             (long long)(nfs4_now() - c->renewed - (time_t)st->lease));
    nfs4_client_destroy(st, c, true);
    return true;
}

nfs4_client_t *nfs4_owner_client(nfs4_server_t *st, const void *owner)
{
    for (nfs4_client_t *c = st->clients; c; c = c->next)
        for (nfs4_owner_t *o = c->owners; o; o = o->next)
            if (o == owner) return c;
    return NULL;
}

nfs4_owner_t *nfs4_owner_find(nfs4_client_t *c, bool is_lock, const uint8_t *id, uint32_t len)
{
    for (nfs4_owner_t *o = c->owners; o; o = o->next)
        if (o->is_lock == is_lock && o->id_len == len && !memcmp(o->id, id, len)) return o;
    return NULL;
}

nfs4_owner_t *nfs4_owner_new(nfs4_client_t *c, bool is_lock, const uint8_t *id, uint32_t len)
{
    nfs4_owner_t *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->id = malloc(len ? len : 1);
    if (!o->id) { free(o); return NULL; }
    memcpy(o->id, id, len);
    o->id_len = len;
    o->is_lock = is_lock;
    o->client = c;
    o->next = c->owners;
    c->owners = o;
    return o;
}

void nfs4_owner_cache_reply(nfs4_owner_t *o, uint32_t status, const uint8_t *body, uint32_t len)
{
    free(o->reply);
    o->reply = NULL;
    o->reply_len = 0;
    o->reply_status = status;
    if (len && (o->reply = malloc(len))) {
        memcpy(o->reply, body, len);
        o->reply_len = len;
    }
}

void nfs4_owner_release(nfs4_server_t *st, nfs4_owner_t *o)
{
    nfs4_client_t *c = o->client;
    for (nfs4_stid_t *s = c->stids, *next; s; s = next) {
        next = s->cnext;
        if (s->owner == o) nfs4_stid_free(st, s);
    }
    nfs4_owner_t **pp = &c->owners;
    while (*pp != o) pp = &(*pp)->next;
    *pp = o->next;
    owner_free(o);
}

bool nfs4_file_is(const nfs4_file_t *f, zpl_node_t *node)
{
    return f->ino == zpl_node_ino(node) && f->gen == zpl_node_gen(node) &&
           f->fsid == zpl_fs_guid(zpl_node_fs(node));
}

nfs4_file_t *nfs4_file_find_id(nfs4_server_t *st, uint64_t fsid, uint64_t ino, uint64_t gen)
{
    for (nfs4_file_t *f = st->files[ino % NFS4_FILE_HASH]; f; f = f->next)
        if (f->ino == ino && f->gen == gen && f->fsid == fsid) return f;
    return NULL;
}

nfs4_file_t *nfs4_file_find(nfs4_server_t *st, zpl_node_t *node)
{
    return nfs4_file_find_id(st, zpl_fs_guid(zpl_node_fs(node)), zpl_node_ino(node),
                             zpl_node_gen(node));
}

nfs4_file_t *nfs4_file_get(nfs4_server_t *st, nfs_export_t *exp, zpl_node_t *node)
{
    nfs4_file_t *f = nfs4_file_find(st, node);
    if (f) return f;
    f = calloc(1, sizeof *f);
    if (!f) return NULL;
    if (zpl_open_hold(node)) {
        free(f);
        return NULL;
    }
    uint64_t ino = zpl_node_ino(node);
    f->fsid = zpl_fs_guid(zpl_node_fs(node));
    f->ino = ino;
    f->gen = zpl_node_gen(node);
    f->exp = exp;
    f->node = node;
    zpl_node_hold(node);
    f->next = st->files[ino % NFS4_FILE_HASH];
    st->files[ino % NFS4_FILE_HASH] = f;
    return f;
}

nfs4_stid_t *nfs4_stid_new(nfs4_server_t *st, uint32_t type, nfs4_client_t *c,
                           nfs4_owner_t *o, nfs4_file_t *f)
{
    nfs4_stid_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->type = type;
    s->key = st->next_key++;
    if (st->next_key == 0) st->next_key = 1;
    s->seqid = 1;
    s->client = c;
    s->owner = o;
    s->file = f;
    f->nstates++;
    s->hnext = st->stids[s->key % NFS4_STID_HASH];
    st->stids[s->key % NFS4_STID_HASH] = s;
    s->cnext = c->stids;
    c->stids = s;
    nfs4_client_record(st, c);
    return s;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void nfs4_stid_to_wire(nfs4_server_t *st, const nfs4_stid_t *s, nfs4_stateid_t *out)
{
    out->seqid = s->seqid;
    put_be32(out->other, st->epoch);
    put_be32(out->other + 4, (uint32_t)s->client->clientid);
    put_be32(out->other + 8, s->key);
}

uint32_t nfs4_stid_find(nfs4_server_t *st, uint32_t minor, const nfs4_stateid_t *sid,
                        nfs4_stid_t **out)
{
    *out = NULL;
    /* The special stateids name no state: where state is wanted (CLOSE,
     * LOCK, OPEN_CONFIRM...) they are BAD, not of an earlier instance. */
    if (nfs4_stateid_is_anon(sid) || nfs4_stateid_is_bypass(sid)) return NFS4ERR_BAD_STATEID;
    if (get_be32(sid->other) != st->epoch) return NFS4ERR_STALE_STATEID;
    uint32_t cnum = get_be32(sid->other + 4), key = get_be32(sid->other + 8);
    for (nfs4_stid_t *s = st->stids[key % NFS4_STID_HASH]; s; s = s->hnext) {
        if (s->key != key || (uint32_t)s->client->clientid != cnum) continue;
        uint32_t rc = nfs4_stateid_seqid_check(minor, sid->seqid, s->seqid);
        if (rc == NFS4_OK) *out = s;
        if (rc == NFS4_OK && s->revoked) rc = minor >= 1 ? NFS4ERR_DELEG_REVOKED : NFS4ERR_EXPIRED;
        return rc;
    }
    return was_expired(st, cnum) ? NFS4ERR_EXPIRED : NFS4ERR_BAD_STATEID;
}

long nfs4_lock_conflict(nfs4_server_t *st, nfs4_file_t *f, const void *owner, uint64_t first,
                        uint64_t last, uint32_t type)
{
    long k;
    while ((k = nfs4_range_conflict(&f->locks, owner, first, last, type)) >= 0 &&
           nfs4_revoke_courtesy(st, nfs4_owner_client(st, f->locks.v[k].owner))) {
    }
    return k;
}

nfs4_owner_t *nfs4_closed_owner(nfs4_server_t *st, const nfs4_stateid_t *sid)
{
    if (get_be32(sid->other) != st->epoch) return NULL;
    uint32_t cnum = get_be32(sid->other + 4), key = get_be32(sid->other + 8);
    for (nfs4_client_t *c = st->clients; c; c = c->next) {
        if ((uint32_t)c->clientid != cnum) continue;
        for (nfs4_owner_t *o = c->owners; o; o = o->next)
            if (!o->is_lock && o->closed_key == key) return o;
    }
    return NULL;
}

nfs4_session_t *nfs4_session_new(nfs4_server_t *st, nfs4_client_t *c,
                                 const nfs4_chan_attrs_t *fore, const nfs4_chan_attrs_t *back)
{
    nfs4_session_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->slots = calloc(fore->maxreqs, sizeof *s->slots);
    if (!s->slots) { free(s); return NULL; }
    s->fore = *fore;
    s->back = *back;
    s->client = c;
    static uint32_t counter;
    put_be32(s->id, st->epoch);
    put_be32(s->id + 4, (uint32_t)c->clientid);
    put_be32(s->id + 8, ++counter);
    put_be32(s->id + 12, (uint32_t)rand());
    s->next = c->sessions;
    c->sessions = s;
    return s;
}

nfs4_session_t *nfs4_session_find(nfs4_server_t *st, const uint8_t id[16])
{
    for (nfs4_client_t *c = st->clients; c; c = c->next)
        for (nfs4_session_t *s = c->sessions; s; s = s->next)
            if (!memcmp(s->id, id, NFS4_SESSIONID_SIZE)) return s;
    return NULL;
}

void nfs4_session_destroy(nfs4_server_t *st, nfs4_session_t *s)
{
    (void)st;
    nfs4_cb_bind(s, NULL);
    nfs4_session_t **pp = &s->client->sessions;
    while (*pp != s) pp = &(*pp)->next;
    *pp = s->next;
    for (uint32_t i = 0; i < s->fore.maxreqs; i++) free(s->slots[i].reply);
    free(s->slots);
    free(s);
}

void nfs4_drop_export(nfs4_server_t *st, nfs_export_t *exp)
{
    for (nfs4_client_t *c = st->clients; c; c = c->next) {
        /* Lock states first: they point at open states of the same file. */
        for (int pass = 0; pass < 2; pass++) {
            for (nfs4_stid_t *s = c->stids, *next; s; s = next) {
                next = s->cnext;
                if (s->file->exp == exp && (pass == 1 || s->type == NFS4_STID_LOCK))
                    nfs4_stid_free(st, s);
            }
        }
    }
}
