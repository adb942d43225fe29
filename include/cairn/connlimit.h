/*
 * Connection caps per server and per client address, shared by the NFS server
 * and the iSCSI target (each holds one conn_limits_t under its own lock).
 *
 * A server counts its live connections by peer address. A new connection is
 * refused when its address already holds max_per_client; when the server holds
 * max_total, it gets in only by taking the place of a connection of the address
 * holding the most - provided that address holds at least two more than the
 * newcomer's, so that a client with few connections always beats one with
 * many, and equals never take turns evicting each other. Which connection goes
 * (an idle one) is the server's choice; with none to spare it refuses.
 *
 * Reaching a cap is logged, at most one line per cap per CONN_LOG_INTERVAL_S.
 */
#ifndef CAIRN_CONNLIMIT_H
#define CAIRN_CONNLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CONN_LOG_INTERVAL_S 10

/* A peer's address without the port; IPv4 as IPv4-mapped IPv6, so a client
 * reaching a dual-stack listener counts once. */
typedef struct conn_addr {
    uint8_t b[16];
} conn_addr_t;

void conn_addr_from(const struct sockaddr *sa, conn_addr_t *out);
bool conn_addr_equal(const conn_addr_t *a, const conn_addr_t *b);
/* "192.0.2.1", "2001:db8::1". */
void conn_addr_string(const conn_addr_t *a, char *buf, size_t len);

typedef struct conn_peer conn_peer_t;

/* The log lines rate-limited: the two caps, and accept() failing for want of
 * descriptors or memory. */
enum { CONN_LOG_TOTAL, CONN_LOG_CLIENT, CONN_LOG_ACCEPT, CONN_LOG_KINDS };

typedef struct conn_limits {
    unsigned max_total, max_per_client;
    conn_peer_t **buckets;
    size_t total;                       /* connections counted */
    uint64_t log_next_ns[CONN_LOG_KINDS];
    uint64_t log_suppressed[CONN_LOG_KINDS];
} conn_limits_t;

/* -ENOMEM; caps of 0 become 1. */
int conn_limits_init(conn_limits_t *l, unsigned max_total, unsigned max_per_client);
void conn_limits_fini(conn_limits_t *l);

/* Connections counted for address a. */
unsigned conn_limits_count(const conn_limits_t *l, const conn_addr_t *a);
/* Counts one more connection of a: -ENOMEM (nothing counted). */
int conn_limits_add(conn_limits_t *l, const conn_addr_t *a);
/* Counts one fewer (a no-op for an address not counted). */
void conn_limits_del(conn_limits_t *l, const conn_addr_t *a);

typedef enum conn_verdict {
    CONN_ADMIT,          /* under both caps */
    CONN_ADMIT_EVICT,    /* at max_total: admit once a connection of *victim is closed */
    CONN_REFUSE_CLIENT,  /* a already holds max_per_client */
    CONN_REFUSE_FULL,    /* at max_total and nobody holds two more than a */
} conn_verdict_t;

/* What to do with a new connection from a (not counted yet). For
 * CONN_ADMIT_EVICT, *victim is the address holding the most and *victim_count
 * its connections. */
conn_verdict_t conn_limits_admit(const conn_limits_t *l, const conn_addr_t *a,
                                 conn_addr_t *victim, unsigned *victim_count);

/* Rate limit of the log line of a kind (CONN_LOG_*):
 * true when a line may go out now, with *suppressed the lines held back since
 * the last one; false counts one more held back. */
bool conn_limits_log_ok(conn_limits_t *l, int kind, uint64_t *suppressed);
/* The line of a failed accept() (err: out of descriptors or memory) that
 * conn_limits_log_ok let out: n connections open, suppressed held back since
 * the last one, and cap, the setting that would lower n. sub: the log's. */
void conn_limits_warn_accept(const char *sub, size_t n, int err, uint64_t suppressed,
                             const char *cap);

#endif
