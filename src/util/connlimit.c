/*
 * Per-address connection counts (include/cairn/connlimit.h): a small chained
 * hash table, so the per-client check at accept costs the same with one
 * connection or thousands. Only a full server scans every address, to find
 * the one holding the most.
 */
#include <cairn/connlimit.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024u

struct conn_peer {
    conn_addr_t addr;
    unsigned count;
    conn_peer_t *next;
};

void conn_addr_from(const struct sockaddr *sa, conn_addr_t *out)
{
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET) {
        out->b[10] = out->b[11] = 0xff;
        memcpy(&out->b[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(out->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

bool conn_addr_equal(const conn_addr_t *a, const conn_addr_t *b)
{
    return memcmp(a->b, b->b, sizeof a->b) == 0;
}

void conn_addr_string(const conn_addr_t *a, char *buf, size_t len)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(a->b, v4mapped, 12)) inet_ntop(AF_INET, &a->b[12], buf, (socklen_t)len);
    else inet_ntop(AF_INET6, a->b, buf, (socklen_t)len);
}

static size_t bucket_of(const conn_addr_t *a)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof a->b; i++) h = (h ^ a->b[i]) * 1099511628211ull;
    return (size_t)(h % NBUCKETS);
}

int conn_limits_init(conn_limits_t *l, unsigned max_total, unsigned max_per_client)
{
    memset(l, 0, sizeof *l);
    l->buckets = calloc(NBUCKETS, sizeof *l->buckets);
    if (!l->buckets) return -ENOMEM;
    l->max_total = max_total ? max_total : 1;
    l->max_per_client = max_per_client ? max_per_client : 1;
    return 0;
}

void conn_limits_fini(conn_limits_t *l)
{
    if (!l->buckets) return;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (conn_peer_t *p = l->buckets[i], *n; p; p = n) {
            n = p->next;
            free(p);
        }
    free(l->buckets);
    l->buckets = NULL;
}

static conn_peer_t *find(const conn_limits_t *l, const conn_addr_t *a)
{
    for (conn_peer_t *p = l->buckets[bucket_of(a)]; p; p = p->next)
        if (conn_addr_equal(&p->addr, a)) return p;
    return NULL;
}

unsigned conn_limits_count(const conn_limits_t *l, const conn_addr_t *a)
{
    const conn_peer_t *p = find(l, a);
    return p ? p->count : 0;
}

int conn_limits_add(conn_limits_t *l, const conn_addr_t *a)
{
    conn_peer_t *p = find(l, a);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return -ENOMEM;
        p->addr = *a;
        size_t b = bucket_of(a);
        p->next = l->buckets[b];
        l->buckets[b] = p;
    }
    p->count++;
    l->total++;
    return 0;
}

void conn_limits_del(conn_limits_t *l, const conn_addr_t *a)
{
    for (conn_peer_t **pp = &l->buckets[bucket_of(a)]; *pp; pp = &(*pp)->next) {
        conn_peer_t *p = *pp;
        if (!conn_addr_equal(&p->addr, a)) continue;
        l->total--;
        if (--p->count == 0) {
            *pp = p->next;
            free(p);
        }
        return;
    }
}

conn_verdict_t conn_limits_admit(const conn_limits_t *l, const conn_addr_t *a,
                                 conn_addr_t *victim, unsigned *victim_count)
{
    unsigned mine = conn_limits_count(l, a);
    if (mine >= l->max_per_client) return CONN_REFUSE_CLIENT;
    if (l->total < l->max_total) return CONN_ADMIT;
    const conn_peer_t *most = NULL;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const conn_peer_t *p = l->buckets[i]; p; p = p->next)
            if (!most || p->count > most->count) most = p;
    if (!most || most->count < mine + 2) return CONN_REFUSE_FULL;
    *victim = most->addr;
    *victim_count = most->count;
    return CONN_ADMIT_EVICT;
}

bool conn_limits_log_ok(conn_limits_t *l, int kind, uint64_t *suppressed)
{
    uint64_t now = cairn_now_ns();
    if (now < l->log_next_ns[kind]) {
        l->log_suppressed[kind]++;
        return false;
    }
    l->log_next_ns[kind] = now + (uint64_t)CONN_LOG_INTERVAL_S * 1000000000ull;
    *suppressed = l->log_suppressed[kind];
    l->log_suppressed[kind] = 0;
    return true;
}

void conn_limits_warn_accept(const char *sub, size_t n, int err, uint64_t suppressed,
                             const char *cap)
{
    char more[64] = "";
    if (suppressed)
        snprintf(more, sizeof more, " (%" PRIu64 " more since the last line)", suppressed);
    log_warn(sub, "cannot accept connections (%zu open): %s; raise `ulimit -n` or lower %s%s", n,
             strerror(err), cap, more);
}
