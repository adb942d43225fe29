/*
 * NSM (the Network Status Monitor, program 100024 version 1) for the NLM
 * server, and the calls NLM makes to clients.
 *
 * State number: `nsm-state` in the server's state directory holds the last
 * one used; each start takes the next odd number (odd while up, as statd's
 * protocol has it) and writes it back before serving, so clients can tell a
 * restart from a retransmission.
 *
 * Monitored hosts: every host holding an NLM lock or share (and every name
 * given with SM_MON) is written to `nlm-hosts` (one "NAME CLIENT SERVER POOL"
 * a line, nsm_record_format; replaced atomically: temporary file, fsync,
 * rename): the address it called from, the address of ours it reached (the
 * local address of its connection or datagram) and the pool of its latest
 * lock. A host has one entry per server address it reached us on: a client of
 * two pools, each with its own service address, is two entries, as its statd
 * monitors two names. After a restart the entries listed are the previous
 * run's: each is sent SM_NOTIFY (through the portmapper on its host) so its
 * lock manager reclaims, and the server is in grace. The previous run's hosts
 * stay listed until grace ends, so a second restart during grace loses none.
 *
 * The server address is what the notification names (nlm.c): a client's statd
 * matches SM_NOTIFY's mon_name, and the address it came from, against the
 * server it monitors, which is the address the client mounted (a pool's
 * service address, on whichever head serves the pool). Lines of the older
 * "NAME CLIENT" form are read as entries without server and pool; an older
 * reader ignores the fields it does not know.
 *
 * The same lines are kept in every pool with exported filesystems (entries
 * `nlm.host:<hash>`, nfs_pool_records.c), so the head that imports a pool
 * after a takeover lists the hosts that held locks on it as previous ones,
 * notifies them and is in grace for them (nlm_records_pool_add). The pools
 * keep the state number too (`nlm.state`, decimal): a head that takes a pool
 * whose number is not below its own moves past it, so the SM_NOTIFY its
 * clients get says a higher number than the head they knew.
 *
 * SM_NOTIFY from a client's statd (the client restarted) releases every lock
 * its host held here; SM_STAT, SM_MON, SM_UNMON and SM_UNMON_ALL do what
 * statd does for its local lock manager.
 */
#include "nfs_srv.h"
#include "nlm_impl.h"

#include <cairn/log.h>
#include <cairn/spa.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#define SUB "nlm"

typedef struct nsm_host {
    struct nsm_host *next;
    char *name;
    char server[NSM_ADDR_MAX];       /* "": not known */
    char pool[NSM_POOL_MAX];         /* "": not known */
    struct sockaddr_storage addr;
    bool has_addr;
    bool previous;                   /* listed by the previous run */
    bool active;                     /* holds NLM state now */
    bool monitored;                  /* SM_MON */
} nsm_host_t;

struct nsm_state {
    pthread_mutex_t lock;
    char *state_path, *hosts_path;   /* NULL: no state dir, nothing persisted */
    uint32_t state;
    bool frozen;
    nsm_host_t *hosts;
    nfs_pool_list_t pools;           /* pools keeping the host list too */
};

#define POOL_RECORD_PREFIX "nlm.host:"
#define POOL_STATE_KEY "nlm.state"

/* ------------------------------------------------------------ records */

static bool field_ok(const char *f) { return !strpbrk(f, " \t\n\r"); }

int nsm_record_format(const nsm_record_t *r, char *buf, size_t len)
{
    if (!r->name[0] || !field_ok(r->name) || !field_ok(r->client) || !field_ok(r->server) ||
        !field_ok(r->pool))
        return -1;
    int n = snprintf(buf, len, "%s %s %s %s", r->name, r->client[0] ? r->client : "-",
                     r->server[0] ? r->server : "-", r->pool[0] ? r->pool : "-");
    return n < 0 || (size_t)n >= len ? -1 : n;
}

/* The next field of *p into out (cap bytes with the NUL), "-" read as "". */
static bool take_field(const char **p, char *out, size_t cap)
{
    const char *s = *p + strspn(*p, " \t\r\n");
    size_t n = strcspn(s, " \t\r\n");
    out[0] = '\0';
    *p = s + n;
    if (!n) return false;
    if (n >= cap) return false;
    if (!(n == 1 && s[0] == '-')) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return true;
}

int nsm_record_parse(const char *line, nsm_record_t *r)
{
    memset(r, 0, sizeof *r);
    const char *p = line;
    if (!take_field(&p, r->name, sizeof r->name) || !r->name[0] ||
        !take_field(&p, r->client, sizeof r->client))
        return -EINVAL;
    /* Older records end here. */
    const char *rest = p + strspn(p, " \t\r\n");
    if (*rest && !take_field(&p, r->server, sizeof r->server)) return -EINVAL;
    rest = p + strspn(p, " \t\r\n");
    if (*rest && !take_field(&p, r->pool, sizeof r->pool)) return -EINVAL;
    return 0;
}

/* ------------------------------------------------------------ the host list */

static nsm_host_t *host_find(nsm_state_t *ns, const char *name, const char *server)
{
    for (nsm_host_t *h = ns->hosts; h; h = h->next)
        if (!strcmp(h->name, name) && !strcmp(h->server, server)) return h;
    return NULL;
}

static nsm_host_t *host_get(nsm_state_t *ns, const char *name, const char *server)
{
    nsm_host_t *h = host_find(ns, name, server);
    if (h) return h;
    if (strlen(server) >= sizeof h->server) return NULL;
    if (!(h = calloc(1, sizeof *h)) || !(h->name = strdup(name))) {
        free(h);
        return NULL;
    }
    snprintf(h->server, sizeof h->server, "%s", server);
    h->next = ns->hosts;
    ns->hosts = h;
    return h;
}

static void host_record(const nsm_host_t *h, nsm_record_t *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", h->name);
    if (h->has_addr) nfs_addr_string((const struct sockaddr *)&h->addr, r->client, sizeof r->client);
    snprintf(r->server, sizeof r->server, "%s", h->server);
    snprintf(r->pool, sizeof r->pool, "%s", h->pool);
}

static bool write_file(const char *path, const char *data, size_t len)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    bool ok = write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
    close(fd);
    if (ok && rename(tmp, path) == 0) return true;
    unlink(tmp);
    return false;
}

/* With ns->lock: the lines (nsm_record_format) of the hosts to keep. */
static char **host_lines(nsm_state_t *ns, size_t *n)
{
    size_t cap = 0;
    for (nsm_host_t *h = ns->hosts; h; h = h->next) cap++;
    char **v = calloc(cap ? cap : 1, sizeof *v);
    *n = 0;
    if (!v) return NULL;
    for (nsm_host_t *h = ns->hosts; h; h = h->next) {
        if (!h->previous && !h->active && !h->monitored) continue;
        nsm_record_t r;
        host_record(h, &r);
        size_t len = strlen(r.name) + sizeof r.client + sizeof r.server + sizeof r.pool + 4;
        if ((v[*n] = malloc(len)) && nsm_record_format(&r, v[*n], len) > 0) (*n)++;
        else free(v[*n]);
    }
    return v;
}

/* With ns->lock. */
static void hosts_save(nsm_state_t *ns)
{
    if (ns->frozen) return;
    size_t n = 0;
    char **v = host_lines(ns, &n);
    if (!v) return;
    if (ns->hosts_path) {
        size_t cap = 1, len = 0;
        for (size_t i = 0; i < n; i++) cap += strlen(v[i]) + 1;
        char *buf = malloc(cap);
        for (size_t i = 0; buf && i < n; i++) len += (size_t)snprintf(buf + len, cap - len, "%s\n", v[i]);
        if (!buf || !write_file(ns->hosts_path, buf, len))
            log_warn(SUB, "cannot write %s: %s (monitored hosts may not be told after a restart)",
                     ns->hosts_path, strerror(errno));
        free(buf);
    }
    for (size_t i = 0; i < ns->pools.n; i++) {
        int rc = nfs_pool_records_store(ns->pools.v[i], POOL_RECORD_PREFIX, v, n);
        if (rc) log_warn(SUB, "cannot keep the lock hosts in a pool: %s", strerror(-rc));
    }
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void host_set_addr(nsm_host_t *h, const char *text)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST}, *ai;
    if (getaddrinfo(text, NULL, &hints, &ai) != 0) return;
    memcpy(&h->addr, ai->ai_addr, ai->ai_addrlen);
    h->has_addr = true;
    freeaddrinfo(ai);
}

/* Lists the host entry of a line (nsm_record_parse) as one of the previous
 * run's: 1 if it was not listed as such already, 0 if it was, -1 for a bad
 * line. */
static int host_from_line(nsm_state_t *ns, const char *line)
{
    nsm_record_t *r = malloc(sizeof *r);
    if (!r || nsm_record_parse(line, r)) {
        free(r);
        return -1;
    }
    nsm_host_t *h = host_get(ns, r->name, r->server);
    int fresh = -1;
    if (h) {
        fresh = !h->previous;
        h->previous = true;
        if (r->client[0]) host_set_addr(h, r->client);
        if (r->pool[0]) snprintf(h->pool, sizeof h->pool, "%s", r->pool);
    }
    free(r);
    return fresh;
}

/* With ns->lock: the state number, to the file and every pool. */
static void state_save(nsm_state_t *ns)
{
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%u\n", ns->state);
    if (ns->state_path && !write_file(ns->state_path, buf, (size_t)len))
        log_warn(SUB, "cannot write %s: %s", ns->state_path, strerror(errno));
    for (size_t i = 0; i < ns->pools.n; i++) {
        int rc = dsl_pool_config_set(ns->pools.v[i], POOL_STATE_KEY, buf, (uint32_t)len);
        if (rc) log_warn(SUB, "cannot keep the NSM state number in a pool: %s", strerror(-rc));
    }
}

nsm_state_t *nsm_open(const char *state_dir, bool *had_hosts)
{
    *had_hosts = false;
    nsm_state_t *ns = calloc(1, sizeof *ns);
    if (!ns) return NULL;
    pthread_mutex_init(&ns->lock, NULL);
    uint32_t last = 0;
    if (state_dir) {
        size_t n = strlen(state_dir) + 32;
        ns->state_path = malloc(n);
        ns->hosts_path = malloc(n);
        if (ns->state_path) snprintf(ns->state_path, n, "%s/nsm-state", state_dir);
        if (ns->hosts_path) snprintf(ns->hosts_path, n, "%s/nlm-hosts", state_dir);
        FILE *f = ns->state_path ? fopen(ns->state_path, "r") : NULL;
        if (f) {
            if (fscanf(f, "%u", &last) != 1) last = 0;
            fclose(f);
        }
        f = ns->hosts_path ? fopen(ns->hosts_path, "r") : NULL;
        char line[NLM_MAXSTR + 2 * NSM_ADDR_MAX + NSM_POOL_MAX + 16];
        while (f && fgets(line, sizeof line, f))
            if (host_from_line(ns, line) >= 0) *had_hosts = true;
        if (f) fclose(f);
    }
    if (!last && !state_dir) {
        /* Nothing persisted: a random odd start still differs across restarts. */
        if (getrandom(&last, sizeof last, 0) != sizeof last) last = (uint32_t)getpid();
        last &= 0x3fffffff;
    }
    ns->state = (last | 1u) + ((last & 1u) ? 2u : 0u);
    state_save(ns);
    return ns;
}

void nsm_freeze(nsm_state_t *ns)
{
    pthread_mutex_lock(&ns->lock);
    ns->frozen = true;
    pthread_mutex_unlock(&ns->lock);
}

void nsm_close(nsm_state_t *ns)
{
    if (!ns) return;
    while (ns->hosts) {
        nsm_host_t *h = ns->hosts;
        ns->hosts = h->next;
        free(h->name);
        free(h);
    }
    free(ns->state_path);
    free(ns->hosts_path);
    nfs_pool_list_free(&ns->pools);
    pthread_mutex_destroy(&ns->lock);
    free(ns);
}

uint32_t nsm_state_number(nsm_state_t *ns) { return ns->state; }

/* With ns->lock: moves past the state number dp carries, if ours is not above it. */
static void state_pass(nsm_state_t *ns, dsl_pool_t *dp)
{
    char buf[32];
    uint32_t len = 0;
    if (dsl_pool_config_get(dp, POOL_STATE_KEY, buf, sizeof buf - 1, &len)) return;
    buf[len] = '\0';
    unsigned long theirs = strtoul(buf, NULL, 10);
    if (theirs < ns->state || theirs >= UINT32_MAX - 4) return;
    ns->state = ((uint32_t)theirs | 1u) + 2u;
    log_info(SUB, "NSM state %u: past the %lu of the head that had a pool before", ns->state,
             theirs);
}

size_t nsm_pool_add(nsm_state_t *ns, dsl_pool_t *dp)
{
    size_t fresh = 0;
    pthread_mutex_lock(&ns->lock);
    if (nfs_pool_list_add(&ns->pools, dp)) {
        state_pass(ns, dp);
        state_save(ns);
        nfs_pool_records_t r;
        nfs_pool_records_load(dp, POOL_RECORD_PREFIX, &r);
        for (size_t i = 0; i < r.n; i++) fresh += host_from_line(ns, r.v[i]) > 0;
        nfs_pool_records_free(&r);
        hosts_save(ns);   /* the pool gets this head's hosts too */
    }
    pthread_mutex_unlock(&ns->lock);
    return fresh;
}

void nsm_pool_remove(nsm_state_t *ns, dsl_pool_t *dp)
{
    pthread_mutex_lock(&ns->lock);
    nfs_pool_list_remove(&ns->pools, dp);
    pthread_mutex_unlock(&ns->lock);
}

void nsm_host_active(nsm_state_t *ns, const char *name, const struct sockaddr *addr,
                     const struct sockaddr *local, const char *pool)
{
    char server[NSM_ADDR_MAX] = "";
    if (local) nfs_addr_string(local, server, sizeof server);
    pthread_mutex_lock(&ns->lock);
    nsm_host_t *h = host_get(ns, name, server);
    if (h) {
        bool changed = !h->active || !h->has_addr;
        if (pool && pool[0] && strcmp(h->pool, pool)) {
            snprintf(h->pool, sizeof h->pool, "%s", pool);
            changed = true;
        }
        if (addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
            size_t sl = addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                   : sizeof(struct sockaddr_in6);
            if (!h->has_addr || memcmp(&h->addr, addr, sl)) changed = true;
            memset(&h->addr, 0, sizeof h->addr);
            memcpy(&h->addr, addr, sl);
            h->has_addr = true;
        }
        h->active = true;
        if (changed) hosts_save(ns);
    }
    pthread_mutex_unlock(&ns->lock);
}

void nsm_host_idle(nsm_state_t *ns, const char *name)
{
    pthread_mutex_lock(&ns->lock);
    bool changed = false;
    for (nsm_host_t *h = ns->hosts; h; h = h->next) {
        if (!h->active || strcmp(h->name, name)) continue;
        h->active = false;
        h->previous = false;     /* it came back and let go */
        changed = true;
    }
    if (changed) hosts_save(ns);
    pthread_mutex_unlock(&ns->lock);
}

void nsm_prune_previous(nsm_state_t *ns)
{
    pthread_mutex_lock(&ns->lock);
    bool changed = false;
    for (nsm_host_t *h = ns->hosts; h; h = h->next) {
        if (h->previous) changed = true;
        h->previous = false;
    }
    if (changed) hosts_save(ns);
    pthread_mutex_unlock(&ns->lock);
}

void nsm_foreach_previous(nsm_state_t *ns, void (*fn)(const nsm_record_t *rec,
                          const struct sockaddr_storage *addr, void *arg), void *arg)
{
    nsm_record_t *r = malloc(sizeof *r);
    if (!r) return;
    pthread_mutex_lock(&ns->lock);
    for (nsm_host_t *h = ns->hosts; h; h = h->next) {
        if (!h->previous) continue;
        if (!h->has_addr) {
            /* Listed by name only (SM_MON): resolve it now. */
            struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
            if (getaddrinfo(h->name, NULL, &hints, &ai) != 0) continue;
            memcpy(&h->addr, ai->ai_addr, ai->ai_addrlen);
            h->has_addr = true;
            freeaddrinfo(ai);
        }
        host_record(h, r);
        fn(r, &h->addr, arg);
    }
    pthread_mutex_unlock(&ns->lock);
    free(r);
}

bool nsm_pool_notify_name(nsm_state_t *ns, const char *pool, char *name, size_t len)
{
    name[0] = '\0';
    if (!pool[0]) return true;
    bool served = false;
    pthread_mutex_lock(&ns->lock);
    for (size_t i = 0; i < ns->pools.n && !served; i++) {
        dsl_pool_t *dp = ns->pools.v[i];
        if (strcmp(spa_name(dsl_pool_spa(dp)), pool)) continue;
        served = true;
        /* Read at each notification: the pool (and its setting) is the one
         * served now, and dp stays valid while ns->lock keeps it listed. */
        dsl_prop_t p;
        char err[128];
        if (dsl_prop_get(dp, pool, NSM_NOTIFY_NAME_PROP, &p, err, sizeof err) == 0 &&
            p.source != DSL_SRC_NONE && p.value[0] && strcmp(p.value, "-"))
            snprintf(name, len, "%s", p.value);
    }
    pthread_mutex_unlock(&ns->lock);
    return served;
}

bool nsm_host_is(nsm_state_t *ns, const char *name, const struct sockaddr *peer)
{
    char a[64], b[64];
    nfs_addr_string(peer, a, sizeof a);
    pthread_mutex_lock(&ns->lock);
    bool any = false, match = false;
    for (nsm_host_t *h = ns->hosts; h && !match; h = h->next) {
        if (strcmp(h->name, name) || !h->has_addr) continue;
        any = true;
        nfs_addr_string((struct sockaddr *)&h->addr, b, sizeof b);
        match = !strcmp(a, b);
    }
    pthread_mutex_unlock(&ns->lock);
    return !any || match;
}

void nsm_monitor(nsm_state_t *ns, const char *name, bool on)
{
    pthread_mutex_lock(&ns->lock);
    bool changed = false;
    if (on) {
        nsm_host_t *h = host_get(ns, name, "");
        if (h && !h->monitored) h->monitored = changed = true;
    } else {
        for (nsm_host_t *h = ns->hosts; h; h = h->next)
            if (h->monitored && !strcmp(h->name, name)) {
                h->monitored = false;
                changed = true;
            }
    }
    if (changed) hosts_save(ns);
    pthread_mutex_unlock(&ns->lock);
}

void nsm_unmonitor_all(nsm_state_t *ns)
{
    pthread_mutex_lock(&ns->lock);
    for (nsm_host_t *h = ns->hosts; h; h = h->next) h->monitored = false;
    hosts_save(ns);
    pthread_mutex_unlock(&ns->lock);
}

/* ------------------------------------------------------------ program 100024 */

static void get_name(nfs_xdr_t *a, char *out)
{
    uint32_t n;
    const uint8_t *p = nfs_xdr_get_opaque(a, &n, NLM_MAXSTR);
    out[0] = '\0';
    if (!p) return;
    memcpy(out, p, n);
    out[n] = '\0';
    if (strlen(out) != n || !n || strchr(out, ' ') || strchr(out, '\n')) a->err = true;
}

static void get_my_id(nfs_xdr_t *a)
{
    char my_name[NLM_MAXSTR + 1];
    get_name(a, my_name);
    nfs_xdr_get_u32(a);
    nfs_xdr_get_u32(a);
    nfs_xdr_get_u32(a);
}

nfs_accept_t nsm_program(nfs_call_t *call)
{
    nsm_state_t *ns = nlm_server_nsm(call->srv);
    if (!ns) return NFS_ACCEPT_PROG_UNAVAIL;
    nfs_xdr_t *a = &call->args, *r = call->res;
    char name[NLM_MAXSTR + 1];
    switch (call->proc) {
    case SM_NULL: return NFS_ACCEPT_SUCCESS;
    case SM_STAT:
        get_name(a, name);
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nfs_xdr_put_u32(r, 0); /* STAT_SUCC */
        nfs_xdr_put_u32(r, ns->state);
        return NFS_ACCEPT_SUCCESS;
    case SM_MON:
        get_name(a, name);
        get_my_id(a);
        nfs_xdr_get_fixed(a, 16); /* priv */
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nsm_monitor(ns, name, true);
        nfs_xdr_put_u32(r, 0);
        nfs_xdr_put_u32(r, ns->state);
        return NFS_ACCEPT_SUCCESS;
    case SM_UNMON:
        get_name(a, name);
        get_my_id(a);
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nsm_monitor(ns, name, false);
        nfs_xdr_put_u32(r, ns->state);
        return NFS_ACCEPT_SUCCESS;
    case SM_UNMON_ALL:
        get_my_id(a);
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nsm_unmonitor_all(ns);
        nfs_xdr_put_u32(r, ns->state);
        return NFS_ACCEPT_SUCCESS;
    case SM_NOTIFY:
        get_name(a, name);
        nfs_xdr_get_u32(a); /* its new state */
        if (a->err) return NFS_ACCEPT_GARBAGE_ARGS;
        nlm_host_rebooted(call->srv, name, (struct sockaddr *)&call->peer);
        return NFS_ACCEPT_SUCCESS;
    default: return NFS_ACCEPT_PROC_UNAVAIL;
    }
}

/* ------------------------------------------------------------ calls to clients */

static int wait_fd(int fd, short ev, int ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int n = poll(&p, 1, ms);
    if (n < 0) return -errno;
    return n == 0 ? -ETIMEDOUT : 0;
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        int rc = wait_fd(fd, POLLOUT, 5000);
        if (rc) return rc;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -errno;
        }
        p += w, n -= (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, uint8_t *p, size_t n)
{
    while (n) {
        int rc = wait_fd(fd, POLLIN, 5000);
        if (rc) return rc;
        ssize_t g = recv(fd, p, n, 0);
        if (g == 0) return -ECONNRESET;
        if (g < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -errno;
        }
        p += g, n -= (size_t)g;
    }
    return 0;
}

/* source as an address of dest's family (an IPv4 address as IPv4-mapped for
 * an IPv6 peer), port 0: its length, or 0 when it cannot be. */
static socklen_t source_like(const struct sockaddr_storage *source, int family,
                             struct sockaddr_storage *out)
{
    memset(out, 0, sizeof *out);
    if (source->ss_family == family) {
        *out = *source;
        if (family == AF_INET) {
            ((struct sockaddr_in *)out)->sin_port = 0;
            return sizeof(struct sockaddr_in);
        }
        ((struct sockaddr_in6 *)out)->sin6_port = 0;
        return sizeof(struct sockaddr_in6);
    }
    if (source->ss_family == AF_INET && family == AF_INET6) {
        struct sockaddr_in6 *o = (struct sockaddr_in6 *)out;
        o->sin6_family = AF_INET6;
        o->sin6_addr.s6_addr[10] = o->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&o->sin6_addr.s6_addr[12], &((const struct sockaddr_in *)source)->sin_addr, 4);
        return sizeof *o;
    }
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)source;
    if (source->ss_family == AF_INET6 && family == AF_INET &&
        IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
        struct sockaddr_in *o = (struct sockaddr_in *)out;
        o->sin_family = AF_INET;
        memcpy(&o->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
        return sizeof *o;
    }
    return 0;
}

static int call_once(const struct sockaddr_storage *source, const struct sockaddr_storage *peer,
                     uint16_t port, uint32_t prog, uint32_t vers, uint32_t proc,
                     const uint8_t *args, size_t alen, uint8_t **res, size_t *rlen)
{
    struct sockaddr_storage ss = *peer;
    socklen_t sl;
    if (ss.ss_family == AF_INET) {
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        sl = sizeof(struct sockaddr_in);
    } else if (ss.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
        sl = sizeof(struct sockaddr_in6);
    } else {
        return -EAFNOSUPPORT;
    }
    struct sockaddr_storage from;
    socklen_t fl = source ? source_like(source, ss.ss_family, &from) : 0;
    if (source && !fl) return -EADDRNOTAVAIL;   /* an IPv6 source for an IPv4 peer */
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int rc = 0;
    if (fl && bind(fd, (struct sockaddr *)&from, fl) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
        if (errno != EINPROGRESS) rc = -errno;
        else if (!(rc = wait_fd(fd, POLLOUT, 5000))) {
            int e = 0;
            socklen_t el = sizeof e;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
            rc = -e;
        }
    }
    uint32_t xid = 0;
    if (getrandom(&xid, sizeof xid, 0) != sizeof xid) xid = (uint32_t)getpid();
    nfs_xdr_t x;
    nfs_xdr_init_encode(&x, 128 + alen);
    nfs_xdr_put_u32(&x, 0); /* record mark, set below */
    nfs_xdr_put_u32(&x, xid);
    nfs_xdr_put_u32(&x, 0); /* CALL */
    nfs_xdr_put_u32(&x, 2);
    nfs_xdr_put_u32(&x, prog);
    nfs_xdr_put_u32(&x, vers);
    nfs_xdr_put_u32(&x, proc);
    /* AUTH_SYS as root of this host: what lock managers expect of a peer. */
    nfs_xdr_t cred;
    nfs_xdr_init_encode(&cred, 64);
    nfs_xdr_put_u32(&cred, (uint32_t)time(NULL));
    nfs_xdr_put_string(&cred, "cairnd");
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_u32(&cred, 0);
    nfs_xdr_put_u32(&x, NFS_AUTH_SYS);
    nfs_xdr_put_opaque(&x, cred.buf, (uint32_t)cred.len);
    nfs_xdr_free(&cred);
    nfs_xdr_put_u32(&x, NFS_AUTH_NONE);
    nfs_xdr_put_u32(&x, 0);
    if (alen) nfs_xdr_put_fixed(&x, args, (uint32_t)alen);
    if (x.err) rc = rc ? rc : -ENOMEM;
    if (!rc) {
        uint32_t mark = 0x80000000u | (uint32_t)(x.len - 4);
        x.buf[0] = (uint8_t)(mark >> 24), x.buf[1] = (uint8_t)(mark >> 16);
        x.buf[2] = (uint8_t)(mark >> 8), x.buf[3] = (uint8_t)mark;
        rc = send_all(fd, x.buf, x.len);
    }
    nfs_xdr_free(&x);
    uint8_t *rec = NULL;
    size_t len = 0;
    for (bool last = false; !rc && !last;) {
        uint8_t h[4];
        if ((rc = recv_all(fd, h, 4))) break;
        uint32_t v = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        last = v & 0x80000000u;
        size_t n = v & 0x7fffffffu;
        if (len + n > 65536) {
            rc = -EMSGSIZE;
            break;
        }
        uint8_t *nr = realloc(rec, len + n + 1);
        if (!nr) {
            rc = -ENOMEM;
            break;
        }
        rec = nr;
        rc = recv_all(fd, rec + len, n);
        len += n;
    }
    close(fd);
    if (rc) {
        free(rec);
        return rc;
    }
    nfs_xdr_t d;
    nfs_xdr_init_decode(&d, rec, len);
    uint32_t rxid = nfs_xdr_get_u32(&d), mtype = nfs_xdr_get_u32(&d);
    uint32_t rstat = nfs_xdr_get_u32(&d);
    nfs_xdr_get_u32(&d);
    uint32_t vl;
    nfs_xdr_get_opaque(&d, &vl, 400);
    uint32_t astat = nfs_xdr_get_u32(&d);
    if (d.err || rxid != xid || mtype != 1 || rstat != 0 || astat != 0) {
        free(rec);
        return -EPROTO;
    }
    *rlen = len - d.pos;
    memmove(rec, rec + d.pos, *rlen);
    *res = rec;
    return 0;
}

int nlm_rpc_call(const struct sockaddr_storage *peer, uint16_t pmap_port, uint16_t port,
                 uint32_t prog, uint32_t vers, uint32_t proc, const uint8_t *args,
                 size_t alen, uint8_t **res, size_t *rlen)
{
    return nlm_rpc_call_from(NULL, peer, pmap_port, port, prog, vers, proc, args, alen, res,
                             rlen);
}

int nlm_rpc_call_from(const struct sockaddr_storage *source,
                      const struct sockaddr_storage *peer, uint16_t pmap_port, uint16_t port,
                      uint32_t prog, uint32_t vers, uint32_t proc, const uint8_t *args,
                      size_t alen, uint8_t **res, size_t *rlen)
{
    *res = NULL;
    *rlen = 0;
    if (!port) {
        uint8_t q[16], *pr = NULL;
        size_t pl = 0;
        uint32_t v[4] = {prog, vers, 6 /* TCP */, 0};
        for (int i = 0; i < 4; i++)
            q[4 * i] = (uint8_t)(v[i] >> 24), q[4 * i + 1] = (uint8_t)(v[i] >> 16),
            q[4 * i + 2] = (uint8_t)(v[i] >> 8), q[4 * i + 3] = (uint8_t)v[i];
        int rc = call_once(source, peer, pmap_port, 100000, 2, 3, q, sizeof q, &pr, &pl);
        if (rc) return rc;
        uint32_t p = pl >= 4 ? ((uint32_t)pr[0] << 24 | (uint32_t)pr[1] << 16 |
                                (uint32_t)pr[2] << 8 | pr[3]) : 0;
        free(pr);
        if (!p || p > 65535) return -ECONNREFUSED;   /* not registered there */
        port = (uint16_t)p;
    }
    return call_once(source, peer, port, prog, vers, proc, args, alen, res, rlen);
}
