/*
 * The listener (the portal): accepts connections and gives each its thread
 * (iscsi_conn.c), admits them under the caps per initiator address and in
 * total (admit_conn: when the target is full, a connection of the initiator
 * holding the most gives way, a login or an idle session first), closes the
 * logins that overrun their deadline (expire_logins), and starts and stops
 * the server.
 */
#include "iscsi_srv.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* With srv->lock held: the connection of address a to give up for a
 * newcomer: a login still running before a discovery session before a normal
 * session without commands, the longest idle first. NULL when every one of
 * them has commands in flight. */
static iconn_t *pick_victim(iscsi_server_t *srv, const conn_addr_t *a)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->lock));
    iconn_t *best = NULL;
    int best_rank = 3;
    uint64_t best_t = 0;
    for (iconn_t *c = srv->conns; c; c = c->next) {
        if (!c->counted || !conn_addr_equal(&c->addr, a)) continue;
        int rank;
        uint64_t t;
        if (!c->login_done) {
            rank = 0;
            t = c->login_deadline_ns;
        } else {
            pthread_mutex_lock(&c->lock);
            bool busy = c->tasks != NULL || c->dead;
            pthread_mutex_unlock(&c->lock);
            if (busy) continue;
            rank = c->discovery ? 1 : 2;
            t = atomic_load_explicit(&c->last_rx_ns, memory_order_relaxed);
        }
        if (rank < best_rank || (rank == best_rank && t < best_t)) {
            best = c;
            best_rank = rank;
            best_t = t;
        }
    }
    return best;
}

/* With srv->lock held: whether a new connection from a gets in, shutting
 * down a connection of the initiator holding the most when the target is
 * full (its thread leaves on its own; it no longer counts). Reaching a cap
 * is logged, rate-limited. */
static bool admit_conn(iscsi_server_t *srv, const conn_addr_t *a)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->lock));
    conn_limits_t *l = &srv->limits;
    conn_addr_t victim;
    unsigned vcount = 0;
    conn_verdict_t v = conn_limits_admit(l, a, &victim, &vcount);
    if (v == CONN_ADMIT) return true;
    iconn_t *evict = NULL;
    if (v == CONN_ADMIT_EVICT) {
        evict = pick_victim(srv, &victim);
        if (!evict) v = CONN_REFUSE_FULL;
    }
    int kind = v == CONN_REFUSE_CLIENT ? CONN_LOG_CLIENT : CONN_LOG_TOTAL;
    uint64_t held;
    if (conn_limits_log_ok(l, kind, &held)) {
        char who[INET6_ADDRSTRLEN], more[64] = "";
        conn_addr_string(a, who, sizeof who);
        if (held) snprintf(more, sizeof more, " (%" PRIu64 " more since the last line)", held);
        if (v == CONN_REFUSE_CLIENT) {
            log_warn(SUB, "connection from %s refused: it holds %u, the cap "
                     "(iscsi_max_connections_per_client)%s", who, l->max_per_client, more);
        } else if (v == CONN_ADMIT_EVICT) {
            log_warn(SUB, "%u connections, the cap (iscsi_max_connections): %s (%s, which holds "
                     "%u) closed to let %s in%s", l->max_total, evict->peer,
                     !evict->login_done ? "in login" : evict->discovery ? "discovery" : "idle",
                     vcount, who, more);
        } else {
            log_warn(SUB, "%u connections, the cap (iscsi_max_connections): connection from %s "
                     "refused, no initiator holds more%s", l->max_total, who, more);
        }
    }
    if (v != CONN_ADMIT_EVICT) return false;
    evict->evicted = true;
    evict->counted = false;
    conn_limits_del(l, &evict->addr);
    shutdown(evict->fd, SHUT_RDWR);
    return true;
}

/* With srv->lock held: c leaves the server's list and no longer counts
 * against the caps. */
void iscsi_conn_unlink(iscsi_server_t *srv, iconn_t *c)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->lock));
    for (iconn_t **pp = &srv->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    srv->nconns--;
    if (c->counted) conn_limits_del(&srv->limits, &c->addr);
}

static void start_conn(iscsi_server_t *srv, int fd, struct sockaddr_storage *ss)
{
    conn_addr_t addr;
    conn_addr_from((struct sockaddr *)ss, &addr);
    pthread_mutex_lock(&srv->lock);
    bool in = admit_conn(srv, &addr) && conn_limits_add(&srv->limits, &addr) == 0;
    pthread_mutex_unlock(&srv->lock);
    if (!in) {
        close(fd);
        return;
    }
    iconn_t *c = calloc(1, sizeof *c);
    if (!c) {
        pthread_mutex_lock(&srv->lock);
        conn_limits_del(&srv->limits, &addr);
        pthread_mutex_unlock(&srv->lock);
        close(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd;
    c->addr = addr;
    c->counted = true;
    c->login_deadline_ns = cairn_now_ns() + (uint64_t)srv->login_timeout_s * 1000000000ull;
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (ss->ss_family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
        port = ntohs(s->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
        port = ntohs(s->sin6_port);
    }
    snprintf(c->peer, sizeof c->peer, "%s:%u", host, port);
    socklen_t sl = sizeof c->local;
    getsockname(fd, (struct sockaddr *)&c->local, &sl);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    pthread_mutex_lock(&srv->lock);
    c->next = srv->conns;
    srv->conns = c;
    srv->nconns++;
    pthread_mutex_unlock(&srv->lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &attr, iscsi_conn_thread, c)) {
        pthread_mutex_lock(&srv->lock);
        iscsi_conn_unlink(srv, c);
        pthread_mutex_unlock(&srv->lock);
        close(fd);
        free(c);
    }
    pthread_attr_destroy(&attr);
}

/* Accept thread, about once a second: shuts down the connections whose login
 * is not complete by their deadline. The reader's own timeouts are per PDU
 * (and per recv() within one), so an initiator dribbling a login - a byte, or
 * an empty continuation, now and then - would otherwise hold its connection
 * and thread for good. */
static void expire_logins(iscsi_server_t *srv)
{
    uint64_t now = cairn_now_ns();
    pthread_mutex_lock(&srv->lock);
    for (iconn_t *c = srv->conns; c; c = c->next) {
        if (c->login_done || c->evicted || now < c->login_deadline_ns) continue;
        log_debug(SUB, "%s: no login within %u s (iscsi_login_timeout): closing", c->peer,
                  srv->login_timeout_s);
        c->evicted = true;
        shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&srv->lock);
}

/* accept() failed for want of descriptors or memory: the connection stays in
 * the backlog and the listener readable, so polling it would spin. A second
 * later connections may have gone. */
static void accept_pause(iscsi_server_t *srv, int err)
{
    pthread_mutex_lock(&srv->lock);
    uint64_t held;
    bool log = conn_limits_log_ok(&srv->limits, CONN_LOG_ACCEPT, &held);
    size_t n = srv->nconns;
    pthread_mutex_unlock(&srv->lock);
    if (log) conn_limits_warn_accept(SUB, n, err, held, "iscsi_max_connections");
    struct pollfd stop = {.fd = srv->stop_pipe[0], .events = POLLIN};
    while (poll(&stop, 1, 1000) < 0 && errno == EINTR) {
    }
}

static void *accept_thread(void *arg)
{
    iscsi_server_t *srv = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = srv->lfd, .events = POLLIN},
                                {.fd = srv->stop_pipe[0], .events = POLLIN}};
        int pr = poll(pfd, 2, 1000);
        if (pr < 0) {
            if (errno == EINTR) continue;
            break;
        }
        expire_logins(srv);
        if (pfd[1].revents) break;
        if (!(pfd[0].revents & POLLIN)) continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_pause(srv, errno);
            continue;
        }
        start_conn(srv, fd, &ss);
    }
    return NULL;
}

int iscsi_server_start(const iscsi_server_opts_t *opts, iscsi_server_t **out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", opts->port);
    const char *host = opts->host && *opts->host ? opts->host : NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc) return -EADDRNOTAVAIL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        freeaddrinfo(ai);
        return rc;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
        rc = -errno;
        close(fd);
        freeaddrinfo(ai);
        return rc;
    }
    freeaddrinfo(ai);
    iscsi_server_t *srv = calloc(1, sizeof *srv);
    if (!srv || pipe2(srv->stop_pipe, O_CLOEXEC)) {
        free(srv);
        close(fd);
        return -ENOMEM;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    srv->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    srv->lfd = fd;
    srv->nop_interval_s = opts->nop_interval_s ? opts->nop_interval_s : 30;
    uint16_t group = opts->alua_group ? opts->alua_group : 1;
    srv->alua = (scsi_alua_t){.local_group = group, .local_port = group,
                              .partner_group = opts->alua_partner_group,
                              .partner_port = opts->alua_partner_group};
    srv->login_timeout_s = opts->login_timeout_s ? opts->login_timeout_s
                                                 : ISCSI_DEFAULT_LOGIN_TIMEOUT_S;
    if (conn_limits_init(&srv->limits,
                         opts->max_conns ? opts->max_conns : ISCSI_DEFAULT_MAX_CONNS,
                         opts->max_conns_per_client ? opts->max_conns_per_client
                                                    : ISCSI_DEFAULT_MAX_CONNS_PER_CLIENT)) {
        close(srv->stop_pipe[0]);
        close(srv->stop_pipe[1]);
        close(fd);
        free(srv);
        return -ENOMEM;
    }
    const char *delay = getenv("CAIRN_ISCSI_TEARDOWN_DELAY_MS");
    if (delay) srv->teardown_delay_ms = (unsigned)strtoul(delay, NULL, 10);
    pthread_mutex_init(&srv->lock, NULL);
    pthread_cond_init(&srv->cond, NULL);
    if (pthread_create(&srv->accept_thread, NULL, accept_thread, srv)) {
        close(fd);
        conn_limits_fini(&srv->limits);
        free(srv);
        return -EAGAIN;
    }
    *out = srv;
    return 0;
}

uint16_t iscsi_server_port(const iscsi_server_t *srv) { return srv->port; }

void iscsi_server_stop(iscsi_server_t *srv)
{
    if (!srv) return;
    if (write(srv->stop_pipe[1], "x", 1) != 1) { /* the accept thread also ends on close */
    }
    pthread_join(srv->accept_thread, NULL);
    close(srv->lfd);
    pthread_mutex_lock(&srv->lock);
    srv->stopping = true;
    for (iconn_t *c = srv->conns; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
    while (srv->nconns) pthread_cond_wait(&srv->cond, &srv->lock);
    itarget_t *list = srv->targets;
    srv->targets = NULL;
    pthread_mutex_unlock(&srv->lock);
    while (list) {
        itarget_t *t = list;
        list = t->next;
        for (size_t i = 0; i < t->nluns; i++) scsi_lu_remove(t->scsi, t->luns[i]);
        t->nluns = 0;
        iscsi_free_target(t);
    }
    close(srv->stop_pipe[0]);
    close(srv->stop_pipe[1]);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    conn_limits_fini(&srv->limits);
    free(srv);
}
