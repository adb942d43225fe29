/*
 * Exports: which filesystems the server serves, to whom, and how.
 *
 * An export is one mounted head filesystem (zpl_fs_t) under a path, with the
 * options parsed from its `sharenfs` value. The server keeps them in an array
 * sorted by path under exports_lock; calls find an export by path (MOUNT) or
 * by the export guid inside a file handle, and hold a reference for the
 * duration of the call. Removing an export takes it out of the array first
 * (so new calls find nothing and answer STALE), then waits on exports_cv for
 * the running calls to drop their references, tells NFSv4 to forget its
 * state, and unmounts.
 *
 * Suspending an export (nfs_server_suspend) keeps it listed but answers its
 * handles with -EAGAIN (NFS3ERR_JUKEBOX, NFS4ERR_DELAY: "try again later"),
 * waits for the running calls and unmounts it, so that the daemon can destroy
 * or roll back its dataset; resuming mounts it again. If the operation fails,
 * clients saw a pause, never a stale handle; if it succeeds, a destroyed
 * dataset is unexported (now STALE is the truth) and a rolled back one serves
 * again under the same handles. MOUNT waits for the resume. A rename needs no
 * unmount: the exports just take the new name (nfs_server_rename).
 *
 * Options changes (a new sharenfs value on an exported dataset) swap the
 * parsed options under the export's lock without unmounting, so clients keep
 * their handles; a changed path re-exports (the file handles stay valid,
 * since they carry the dataset guid, not the path).
 *
 * Access: a client is matched against the option lists with the precedence
 * explicit ro entry > explicit rw entry > ro for everyone > rw for everyone
 * (a bare `ro`/`rw` or `*`). Host names are resolved when the export is made
 * and at each share refresh (a name that does not resolve then matches nothing
 * and is logged; `cairn set` refuses it up front: nfs_sharenfs_check_names). IPv4-mapped
 * IPv6 peers match IPv4 entries.
 */
#include "nfs_srv.h"
#include "nlm_impl.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SUB "nfs"

struct nfs_export {
    nfs_server_t *srv;
    char dataset[256];
    char path[1024];
    char options[1024];
    dsl_pool_t *dp;
    zpl_fs_t *fs;                     /* NULL while suspended (changed under lock too) */
    uint64_t guid;
    atomic_int refs;
    bool suspended;                   /* under exports_lock: see nfs_server_suspend */
    pthread_mutex_t lock;             /* opts, fs */
    nfs_export_opts_t opts;
    /* Statistics since it was exported (nfs_export_info_t): relaxed atomics. */
    cairn_counter_t calls, read_bytes, write_bytes;
};

/* ------------------------------------------------------------ option parsing */

static bool parse_u32(const char *s, uint32_t *out)
{
    if (!*s) return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) return false;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT32_MAX) return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool valid_hostname(const char *s)
{
    if (!*s || strlen(s) > 253) return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_') return false;
    return true;
}

/* Parses an address or CIDR ("10.0.0.0/8", "fd00::/64", "[::1]"); the '@' is
 * already stripped. */
static bool parse_cidr(const char *s, nfs_client_match_t *m)
{
    char buf[128];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n + 1);
    char *addr = buf;
    char *slash = strrchr(buf, '/');
    long prefix = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        if (!slash[1]) return false;
        prefix = strtol(slash + 1, &end, 10);
        if (*end || prefix < 0) return false;
    }
    size_t al = strlen(addr);
    if (al >= 2 && addr[0] == '[' && addr[al - 1] == ']') {
        addr[al - 1] = '\0';
        addr++;
    }
    memset(m, 0, sizeof *m);
    m->kind = NFS_CLIENT_CIDR;
    if (inet_pton(AF_INET, addr, m->addr) == 1) {
        m->family = AF_INET;
        if (prefix > 32) return false;
        m->prefix = prefix < 0 ? 32 : (unsigned)prefix;
        return true;
    }
    if (inet_pton(AF_INET6, addr, m->addr) == 1) {
        m->family = AF_INET6;
        if (prefix > 128) return false;
        m->prefix = prefix < 0 ? 128 : (unsigned)prefix;
        return true;
    }
    return false;
}

static bool parse_client(const char *s, nfs_client_match_t *m)
{
    if (!strcmp(s, "*")) {
        memset(m, 0, sizeof *m);
        m->kind = NFS_CLIENT_ANY;
        return true;
    }
    if (s[0] == '@') return parse_cidr(s + 1, m);
    if (parse_cidr(s, m)) return true;
    if (!valid_hostname(s)) return false;
    memset(m, 0, sizeof *m);
    m->kind = NFS_CLIENT_HOST;
    snprintf(m->host, sizeof m->host, "%s", s);
    return true;
}

/* Splits a colon-separated client list. IPv6 addresses contain colons: at each
 * position the longest run up to a colon (or the end) that reads as an IPv6
 * address or CIDR is taken whole; brackets ([fd00::1]) make it explicit. */
static int parse_client_list(const char *list, nfs_client_match_t **out, size_t *nout, char *err,
                             size_t errlen, const char *optname)
{
    size_t len = strlen(list);
    if (len == 0) {
        cairn_seterr(err, errlen, "bad sharenfs option '%s=': empty client list", optname);
        return -EINVAL;
    }
    nfs_client_match_t *v = NULL;
    size_t n = 0;
    size_t pos = 0;
    while (pos <= len) {
        size_t best = 0;
        nfs_client_match_t m;
        const char *start = list + pos;
        if (*start == '[' || (start[0] == '@' && start[1] == '[')) {
            const char *rb = strchr(start, ']');
            if (rb) {
                const char *colon = strchr(rb, ':');
                size_t l = colon ? (size_t)(colon - start) : strlen(start);
                char tmp[160];
                if (l < sizeof tmp) {
                    memcpy(tmp, start, l);
                    tmp[l] = '\0';
                    if (parse_client(tmp, &m)) best = l;
                }
            }
        } else {
            for (size_t l = 1; pos + l <= len; l++) {
                if (start[l] != ':' && start[l] != '\0') continue;
                char tmp[160];
                if (l >= sizeof tmp) break;
                memcpy(tmp, start, l);
                tmp[l] = '\0';
                const char *a = tmp[0] == '@' ? tmp + 1 : tmp;
                nfs_client_match_t mm;
                if (strchr(a, ':') && parse_cidr(a, &mm) && mm.family == AF_INET6) {
                    best = l;
                    m = mm;
                }
            }
            if (!best) {
                const char *colon = strchr(start, ':');
                size_t l = colon ? (size_t)(colon - start) : strlen(start);
                char tmp[300];
                if (l > 0 && l < sizeof tmp) {
                    memcpy(tmp, start, l);
                    tmp[l] = '\0';
                    if (parse_client(tmp, &m)) best = l;
                }
            }
        }
        if (!best) {
            const char *colon = strchr(start, ':');
            int l = colon ? (int)(colon - start) : (int)strlen(start);
            cairn_seterr(err, errlen, "bad sharenfs client '%.*s' in '%s=': expected a host name, address, @CIDR or *",
                   l, start, optname);
            free(v);
            return -EINVAL;
        }
        nfs_client_match_t *nv = realloc(v, (n + 1) * sizeof *nv);
        if (!nv) {
            free(v);
            return -ENOMEM;
        }
        v = nv;
        v[n++] = m;
        pos += best;
        if (pos == len) break;
        pos++; /* the colon */
        if (pos == len) {
            cairn_seterr(err, errlen, "bad sharenfs option '%s=%s': empty client name", optname, list);
            free(v);
            return -EINVAL;
        }
    }
    *out = v;
    *nout = n;
    return 0;
}

void nfs_opts_free(nfs_export_opts_t *opts)
{
    for (size_t i = 0; i < opts->nrw; i++) free(opts->rw[i].resolved);
    for (size_t i = 0; i < opts->nro; i++) free(opts->ro[i].resolved);
    free(opts->rw);
    free(opts->ro);
    memset(opts, 0, sizeof *opts);
}

int nfs_opts_parse(const char *value, nfs_export_opts_t *opts, bool *shared, char *err,
                   size_t errlen)
{
    memset(opts, 0, sizeof *opts);
    opts->anonuid = opts->anongid = 65534;
    opts->versions = 1u << 3 | 1u << 4;
    opts->squash = NFS_SQUASH_ROOT;
    *shared = true;
    if (!value || !*value) {
        cairn_seterr(err, errlen, "bad sharenfs value: empty (use on, off or options)");
        return -EINVAL;
    }
    if (!strcmp(value, "off")) {
        *shared = false;
        return 0;
    }
    if (!strcmp(value, "on")) return 0;
    if (strlen(value) > 1023) {
        cairn_seterr(err, errlen, "bad sharenfs value: longer than 1023 bytes");
        return -EINVAL;
    }
    char *copy = strdup(value);
    if (!copy) return -ENOMEM;
    int rc = 0;
    bool squash_set = false;
    char *save = NULL;
    /* Empty options ("rw,,ro") are an error: strtok would hide them. */
    if (value[0] == ',' || value[strlen(value) - 1] == ',' || strstr(value, ",,")) {
        cairn_seterr(err, errlen, "bad sharenfs value '%s': empty option", value);
        rc = -EINVAL;
        goto out;
    }
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        char *val = NULL;
        if (eq) {
            *eq = '\0';
            val = eq + 1;
        }
        if (!strcmp(tok, "rw") || !strcmp(tok, "ro")) {
            bool rw = tok[1] == 'w';
            if (rw ? opts->rw_given : opts->ro_given) {
                cairn_seterr(err, errlen, "bad sharenfs value: '%s' given twice", tok);
                rc = -EINVAL;
                goto out;
            }
            if (rw) opts->rw_given = true;
            else opts->ro_given = true;
            if (val) {
                rc = parse_client_list(val, rw ? &opts->rw : &opts->ro, rw ? &opts->nrw : &opts->nro,
                                       err, errlen, tok);
                if (rc) goto out;
            }
        } else if (!strcmp(tok, "root_squash") || !strcmp(tok, "no_root_squash") ||
                   !strcmp(tok, "all_squash")) {
            if (val) {
                cairn_seterr(err, errlen, "bad sharenfs option '%s=%s': takes no value", tok, val);
                rc = -EINVAL;
                goto out;
            }
            if (squash_set) {
                cairn_seterr(err, errlen, "bad sharenfs value: more than one of root_squash, no_root_squash, all_squash");
                rc = -EINVAL;
                goto out;
            }
            squash_set = true;
            opts->squash = tok[0] == 'r' ? NFS_SQUASH_ROOT
                         : tok[0] == 'n' ? NFS_SQUASH_NONE : NFS_SQUASH_ALL;
        } else if (!strcmp(tok, "secure") || !strcmp(tok, "insecure")) {
            if (val) {
                cairn_seterr(err, errlen, "bad sharenfs option '%s=%s': takes no value", tok, val);
                rc = -EINVAL;
                goto out;
            }
            opts->secure = tok[0] == 's';
        } else if (!strcmp(tok, "anonuid") || !strcmp(tok, "anongid")) {
            uint32_t v;
            if (!val || !parse_u32(val, &v)) {
                cairn_seterr(err, errlen, "bad sharenfs option '%s%s%s': expected %s=NUMBER", tok,
                       val ? "=" : "", val ? val : "", tok);
                rc = -EINVAL;
                goto out;
            }
            if (tok[4] == 'u') opts->anonuid = v;
            else opts->anongid = v;
        } else if (!strcmp(tok, "sec")) {
            if (!val || strcmp(val, "sys")) {
                cairn_seterr(err, errlen, "bad sharenfs option 'sec=%s': only sec=sys is supported",
                       val ? val : "");
                rc = -EINVAL;
                goto out;
            }
        } else if (!strcmp(tok, "vers")) {
            if (val && !strcmp(val, "3")) opts->versions = 1u << 3;
            else if (val && !strcmp(val, "4")) opts->versions = 1u << 4;
            else if (val && (!strcmp(val, "3:4") || !strcmp(val, "4:3")))
                opts->versions = 1u << 3 | 1u << 4;
            else {
                cairn_seterr(err, errlen, "bad sharenfs option 'vers=%s': expected vers=3, vers=4 or vers=3:4",
                       val ? val : "");
                rc = -EINVAL;
                goto out;
            }
        } else {
            cairn_seterr(err, errlen, "bad sharenfs option '%s': expected rw, ro, root_squash, no_root_squash, all_squash, anonuid, anongid, secure, insecure, sec or vers",
                   tok);
            rc = -EINVAL;
            goto out;
        }
    }
out:
    free(copy);
    if (rc) nfs_opts_free(opts);
    return rc;
}

int nfs_sharenfs_check(const char *value, bool *shared, char *err, size_t errlen)
{
    nfs_export_opts_t o;
    bool sh = false;
    int rc = nfs_opts_parse(value, &o, &sh, err, errlen);
    if (rc == 0) nfs_opts_free(&o);
    if (shared) *shared = sh;
    return rc;
}

static int check_names(const nfs_client_match_t *v, size_t n, const char *optname,
                       bool *has, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != NFS_CLIENT_HOST) continue;
        *has = true;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        int g = getaddrinfo(v[i].host, NULL, &hints, &ai);
        if (g) {
            cairn_seterr(err, errlen, "bad sharenfs client '%s' in '%s=': host name does not resolve (%s)",
                   v[i].host, optname, gai_strerror(g));
            return -EINVAL;
        }
        freeaddrinfo(ai);
    }
    return 0;
}

int nfs_sharenfs_check_names(const char *value, bool *has_names, char *err, size_t errlen)
{
    nfs_export_opts_t o;
    bool sh = false, has = false;
    int rc = nfs_opts_parse(value, &o, &sh, err, errlen);
    if (rc) return rc;
    rc = check_names(o.rw, o.nrw, "rw", &has, err, errlen);
    if (!rc) rc = check_names(o.ro, o.nro, "ro", &has, err, errlen);
    nfs_opts_free(&o);
    if (has_names) *has_names = has;
    return rc;
}

static void resolve_list(nfs_client_match_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != NFS_CLIENT_HOST) continue;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(v[i].host, NULL, &hints, &ai) != 0) {
            log_warn(SUB, "export client '%s' does not resolve: it matches nothing", v[i].host);
            continue;
        }
        size_t k = 0;
        for (struct addrinfo *p = ai; p; p = p->ai_next) k++;
        v[i].resolved = calloc(k, sizeof *v[i].resolved);
        if (v[i].resolved) {
            for (struct addrinfo *p = ai; p; p = p->ai_next)
                memcpy(&v[i].resolved[v[i].nresolved++], p->ai_addr, p->ai_addrlen);
        }
        freeaddrinfo(ai);
    }
}

void nfs_opts_resolve(nfs_export_opts_t *opts)
{
    resolve_list(opts->rw, opts->nrw);
    resolve_list(opts->ro, opts->nro);
}

/* The peer as a family + 16 bytes (IPv4-mapped IPv6 becomes IPv4). */
static int peer_bytes(const struct sockaddr *sa, uint8_t out[16])
{
    if (sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return AF_INET;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            memcpy(out, &a->s6_addr[12], 4);
            return AF_INET;
        }
        memcpy(out, a->s6_addr, 16);
        return AF_INET6;
    }
    return 0;
}

static unsigned peer_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return 65535; /* no port to trust */
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, full)) return false;
    if (!rest) return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

/* 2: explicit match, 1: wildcard match, 0: none. */
static int list_match(const nfs_client_match_t *v, size_t n, int fam, const uint8_t *pb)
{
    int best = 0;
    for (size_t i = 0; i < n; i++) {
        const nfs_client_match_t *m = &v[i];
        if (m->kind == NFS_CLIENT_ANY) {
            if (best < 1) best = 1;
        } else if (m->kind == NFS_CLIENT_CIDR) {
            if (m->family == fam && prefix_match(m->addr, pb, m->prefix)) return 2;
        } else {
            for (size_t k = 0; k < m->nresolved; k++) {
                uint8_t rb[16];
                int rf = peer_bytes((const struct sockaddr *)&m->resolved[k], rb);
                if (rf == fam && !memcmp(rb, pb, fam == AF_INET ? 4 : 16)) return 2;
            }
        }
    }
    return best;
}

int nfs_opts_match(const nfs_export_opts_t *opts, const struct sockaddr *addr, bool *writable)
{
    uint8_t pb[16];
    int fam = peer_bytes(addr, pb);
    if (!opts->rw_given && !opts->ro_given) {
        *writable = true;
        return 0;
    }
    int ro = 0, rw = 0;
    if (opts->ro_given) ro = opts->nro ? (fam ? list_match(opts->ro, opts->nro, fam, pb) : 0) : 1;
    if (opts->rw_given) rw = opts->nrw ? (fam ? list_match(opts->rw, opts->nrw, fam, pb) : 0) : 1;
    if (ro == 2) *writable = false;
    else if (rw == 2) *writable = true;
    else if (ro == 1) *writable = false;
    else if (rw == 1) *writable = true;
    else return -EACCES;
    return 0;
}

void nfs_opts_squash(const nfs_export_opts_t *opts, uint32_t flavor, const zpl_cred_t *in,
                     zpl_cred_t *out)
{
    *out = *in;
    bool anon = flavor != NFS_AUTH_SYS || opts->squash == NFS_SQUASH_ALL ||
                (opts->squash == NFS_SQUASH_ROOT && in->uid == 0);
    if (anon) {
        out->uid = opts->anonuid;
        out->gid = opts->anongid;
        out->ngroups = 0;
        return;
    }
    if (opts->squash == NFS_SQUASH_ROOT && in->gid == 0) out->gid = opts->anongid;
}

/* ------------------------------------------------------------ the export list */

void nfs_exports_init(nfs_server_t *srv)
{
    pthread_mutex_init(&srv->exports_lock, NULL);
    pthread_cond_init(&srv->exports_cv, NULL);
    pthread_mutex_init(&srv->mounts_lock, NULL);
}

void nfs_export_count(nfs_export_t *exp, uint64_t read_bytes, uint64_t write_bytes)
{
    cairn_counter_add(&exp->calls, 1);
    if (read_bytes) cairn_counter_add(&exp->read_bytes, read_bytes);
    if (write_bytes) cairn_counter_add(&exp->write_bytes, write_bytes);
}

nfs_export_t *nfs_export_hold(nfs_export_t *exp)
{
    atomic_fetch_add(&exp->refs, 1);
    return exp;
}

void nfs_export_rele(nfs_export_t *exp)
{
    if (!exp) return;
    nfs_server_t *srv = exp->srv;
    pthread_mutex_lock(&srv->exports_lock);
    int left = atomic_fetch_sub(&exp->refs, 1) - 1;
    /* Waiters: an unexport (for 1 left: the list's) and a suspend (2: its own too). */
    if (left <= 2) pthread_cond_broadcast(&srv->exports_cv);
    pthread_mutex_unlock(&srv->exports_lock);
}

zpl_fs_t *nfs_export_fs(nfs_export_t *exp) { return exp->fs; }
const char *nfs_export_path(nfs_export_t *exp) { return exp->path; }
const char *nfs_export_dataset(nfs_export_t *exp) { return exp->dataset; }

void nfs_export_options(nfs_export_t *exp, char *buf, size_t len)
{
    pthread_mutex_lock(&exp->lock);
    snprintf(buf, len, "%s", exp->options);
    pthread_mutex_unlock(&exp->lock);
}

uint32_t nfs_export_versions(nfs_export_t *exp)
{
    pthread_mutex_lock(&exp->lock);
    uint32_t v = exp->opts.versions;
    pthread_mutex_unlock(&exp->lock);
    return v;
}

bool nfs_export_sync_disabled(nfs_export_t *exp)
{
    dsl_dataset_props_t p;
    dsl_dataset_get_props(zpl_fs_dataset(exp->fs), &p);
    return p.sync == DSL_SYNC_DISABLED;
}

/* Trailing slashes do not count ("/tank/fs/" is "/tank/fs"). */
static size_t path_len(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    return n;
}

int nfs_export_lookup_path(nfs_server_t *srv, const char *path, bool wait, nfs_export_t **out)
{
    size_t n = path_len(path);
    *out = NULL;
    pthread_mutex_lock(&srv->exports_lock);
    for (;;) {
        nfs_export_t *found = NULL;
        for (size_t i = 0; i < srv->nexports && !found; i++) {
            nfs_export_t *e = srv->exports[i];
            if (strlen(e->path) == n && !strncmp(e->path, path, n)) found = e;
        }
        if (found && found->suspended && wait) {
            pthread_cond_wait(&srv->exports_cv, &srv->exports_lock);
            continue; /* it may be gone or elsewhere by now: look again */
        }
        int rc = !found ? -ENOENT : found->suspended ? -EAGAIN : 0;
        if (!rc) *out = nfs_export_hold(found);
        pthread_mutex_unlock(&srv->exports_lock);
        return rc;
    }
}

nfs_export_t *nfs_export_find_path(nfs_server_t *srv, const char *path)
{
    nfs_export_t *exp;
    nfs_export_lookup_path(srv, path, true, &exp);
    return exp;
}

/* Whether export path ep covers path p: equal, or ep then '/' then more. */
static size_t covers(const char *ep, const char *p)
{
    size_t n = path_len(ep);
    if (n == 1 && ep[0] == '/') return 1; /* the export "/" covers everything */
    if (strncmp(ep, p, n) || (p[n] != '\0' && p[n] != '/')) return 0;
    return p[n] == '/' ? n + 1 : n;
}

nfs_export_t *nfs_export_find_covering(nfs_server_t *srv, const char *path, const char **rest)
{
    *rest = NULL;
    pthread_mutex_lock(&srv->exports_lock);
    for (;;) {
        nfs_export_t *found = NULL;
        size_t best = 0;
        for (size_t i = 0; i < srv->nexports; i++) {
            nfs_export_t *e = srv->exports[i];
            size_t c = covers(e->path, path);
            if (c && (!found || path_len(e->path) > path_len(found->path))) {
                found = e;
                best = c;
            }
        }
        if (found && found->suspended) {
            pthread_cond_wait(&srv->exports_cv, &srv->exports_lock);
            continue;
        }
        if (found) {
            nfs_export_hold(found);
            *rest = path + best;
        }
        pthread_mutex_unlock(&srv->exports_lock);
        return found;
    }
}

int nfs_export_lookup_fh(nfs_server_t *srv, const void *fh, size_t len, nfs_export_t **out)
{
    uint64_t guid;
    *out = NULL;
    if (zpl_fh_export_guid(fh, len, &guid) < 0) return -EBADF;
    int rc = -ESTALE;
    pthread_mutex_lock(&srv->exports_lock);
    for (size_t i = 0; i < srv->nexports; i++) {
        if (srv->exports[i]->guid == guid) {
            if (srv->exports[i]->suspended) {
                rc = -EAGAIN;
                continue; /* a second export of the same dataset may be serving */
            }
            *out = nfs_export_hold(srv->exports[i]);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&srv->exports_lock);
    return rc;
}

int nfs_export_foreach(nfs_server_t *srv, int (*fn)(nfs_export_t *exp, void *arg), void *arg)
{
    pthread_mutex_lock(&srv->exports_lock);
    size_t n = srv->nexports;
    nfs_export_t **v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        pthread_mutex_unlock(&srv->exports_lock);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) v[i] = nfs_export_hold(srv->exports[i]);
    pthread_mutex_unlock(&srv->exports_lock);
    int rc = 0;
    size_t i = 0;
    for (; i < n && rc == 0; i++) rc = fn(v[i], arg);
    for (size_t k = 0; k < n; k++) nfs_export_rele(v[k]);
    free(v);
    return rc;
}

int nfs_export_authorize(nfs_export_t *exp, const nfs_call_t *call, zpl_cred_t *eff,
                         bool *writable)
{
    uint32_t vbit = call->prog == NFS_PROG_NFS ? 1u << call->vers : 1u << 3;
    pthread_mutex_lock(&exp->lock);
    int rc = 0;
    if (!(exp->opts.versions & vbit)) rc = -EACCES;
    if (!rc) rc = nfs_opts_match(&exp->opts, (const struct sockaddr *)&call->peer, writable);
    /* As Linux nfsd: a client the lists admit, calling from a port any user may
     * bind, is refused with PERM (the lists' refusal stays ACCES). */
    if (!rc && exp->opts.secure && peer_port((const struct sockaddr *)&call->peer) >= 1024)
        rc = -EPERM;
    if (!rc) nfs_opts_squash(&exp->opts, call->flavor, &call->cred, eff);
    /* fs under the lock: a suspended export (only listed by nfs_export_foreach) has none. */
    if (!rc && exp->fs && zpl_fs_readonly(exp->fs)) *writable = false;
    pthread_mutex_unlock(&exp->lock);
    return rc;
}

/* With exports_lock held. */
static void list_insert(nfs_server_t *srv, nfs_export_t *e)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->exports_lock));
    size_t i = 0;
    while (i < srv->nexports && strcmp(srv->exports[i]->path, e->path) < 0) i++;
    memmove(&srv->exports[i + 1], &srv->exports[i], (srv->nexports - i) * sizeof e);
    srv->exports[i] = e;
    srv->nexports++;
}

static void list_remove(nfs_server_t *srv, nfs_export_t *e)
{
    for (size_t i = 0; i < srv->nexports; i++) {
        if (srv->exports[i] == e) {
            memmove(&srv->exports[i], &srv->exports[i + 1],
                    (srv->nexports - i - 1) * sizeof e);
            srv->nexports--;
            return;
        }
    }
}

/* Waits for running calls, drops NFSv4 state, unmounts, frees. The export is
 * already out of the list. */
static void export_destroy(nfs_server_t *srv, nfs_export_t *e, bool unmount)
{
    pthread_mutex_lock(&srv->exports_lock);
    while (atomic_load(&e->refs) > 1) pthread_cond_wait(&srv->exports_cv, &srv->exports_lock);
    pthread_mutex_unlock(&srv->exports_lock);
    if (srv->nfs4_state) nfs4_export_removed(srv->nfs4_state, e);
    if (srv->nlm_state) nlm_export_removed(srv->nlm_state, e);
    if (unmount && e->fs) {
        int rc = zpl_unmount(e->fs);
        for (int i = 0; rc == -EBUSY && i < 100; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            rc = zpl_unmount(e->fs);
        }
        if (rc < 0) log_error(SUB, "unmounting %s after unexport: %s", e->dataset, strerror(-rc));
    }
    nfs_opts_free(&e->opts);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

int nfs_server_export(nfs_server_t *srv, dsl_pool_t *dp, const char *dsname, const char *path,
                      const char *options, char *err, size_t errlen)
{
    if (!path || path[0] != '/' || strlen(path) >= sizeof(((nfs_export_t *)0)->path)) {
        cairn_seterr(err, errlen, "bad export path '%s': must be absolute", path ? path : "");
        return -EINVAL;
    }
    if (strlen(dsname) >= 256) {
        cairn_seterr(err, errlen, "dataset name too long");
        return -EINVAL;
    }
    nfs_export_opts_t opts;
    bool shared;
    int rc = nfs_opts_parse(options, &opts, &shared, err, errlen);
    if (rc) return rc;
    if (!shared) {
        cairn_seterr(err, errlen, "sharenfs is off for %s", dsname);
        return -EINVAL;
    }
    nfs_opts_resolve(&opts);

    pthread_mutex_lock(&srv->exports_lock);
    nfs_export_t *old = NULL;
    for (size_t i = 0; i < srv->nexports; i++)
        if (!strcmp(srv->exports[i]->dataset, dsname) && srv->exports[i]->dp == dp)
            old = srv->exports[i];
    for (size_t i = 0; i < srv->nexports; i++) {
        nfs_export_t *e = srv->exports[i];
        if (e != old && path_len(e->path) == path_len(path) &&
            !strncmp(e->path, path, path_len(path))) {
            pthread_mutex_unlock(&srv->exports_lock);
            cairn_seterr(err, errlen, "path %s is already exported by %s", path, e->dataset);
            nfs_opts_free(&opts);
            return -EEXIST;
        }
    }
    if (old && !strcmp(old->path, path)) {
        /* Options only: swap them in place. */
        pthread_mutex_lock(&old->lock);
        nfs_export_opts_t prev = old->opts;
        old->opts = opts;
        snprintf(old->options, sizeof old->options, "%s", options);
        pthread_mutex_unlock(&old->lock);
        pthread_mutex_unlock(&srv->exports_lock);
        nfs_opts_free(&prev);
        return 0;
    }
    /* A new path re-exports. The new export mounts first (the same filesystem, one
     * more mount reference) and takes the old one's place in one step, so a handle
     * (it carries the guid, not the path) never meets a moment with neither; then
     * the old one drains and unmounts. */
    if (old) nfs_export_hold(old);
    pthread_mutex_unlock(&srv->exports_lock);
    zpl_fs_t *fs = NULL;
    rc = zpl_mount(dp, dsname, &fs);
    if (rc < 0) {
        cairn_seterr(err, errlen, "cannot mount %s: %s", dsname, strerror(-rc));
        nfs_opts_free(&opts);
        nfs_export_rele(old);
        return rc;
    }
    nfs_export_t *e = calloc(1, sizeof *e);
    nfs_export_t **nv = NULL;
    if (e) {
        pthread_mutex_lock(&srv->exports_lock);
        nv = realloc(srv->exports, (srv->nexports + 1) * sizeof *nv);
        if (nv) srv->exports = nv;
        pthread_mutex_unlock(&srv->exports_lock);
    }
    if (!e || !nv) {
        free(e);
        zpl_unmount(fs);
        nfs_opts_free(&opts);
        nfs_export_rele(old);
        return -ENOMEM;
    }
    e->srv = srv;
    snprintf(e->dataset, sizeof e->dataset, "%s", dsname);
    snprintf(e->path, sizeof e->path, "%.*s", (int)path_len(path), path);
    snprintf(e->options, sizeof e->options, "%s", options);
    e->dp = dp;
    e->fs = fs;
    e->guid = zpl_fs_guid(fs);
    /* Before any client can reach it: a reclaim must find its grace period. */
    if (srv->nfs4_state) nfs4_records_pool_add(srv->nfs4_state, dp);
    if (srv->nlm_state) nlm_records_pool_add(srv->nlm_state, dp);
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    e->opts = opts;
    pthread_mutex_lock(&srv->exports_lock);
    bool took_old = false;
    for (size_t i = 0; old && i < srv->nexports && !took_old; i++) took_old = srv->exports[i] == old;
    if (took_old) list_remove(srv, old); /* else someone unexported it meanwhile */
    list_insert(srv, e);
    pthread_mutex_unlock(&srv->exports_lock);
    nfs_export_rele(old);
    if (took_old) export_destroy(srv, old, true);
    log_info(SUB, "exported %s at %s (%s)", dsname, e->path, options);
    return 0;
}

int nfs_server_unexport(nfs_server_t *srv, const char *dsname)
{
    pthread_mutex_lock(&srv->exports_lock);
    nfs_export_t *e = NULL;
    for (size_t i = 0; i < srv->nexports; i++)
        if (!strcmp(srv->exports[i]->dataset, dsname)) e = srv->exports[i];
    if (e) list_remove(srv, e);
    pthread_mutex_unlock(&srv->exports_lock);
    if (!e) return -ENOENT;
    log_info(SUB, "unexporting %s at %s", e->dataset, e->path);
    export_destroy(srv, e, true);
    return 0;
}

/* Whether export e (exports_lock held) is dataset name of dp or below it. */
static bool in_tree(const nfs_export_t *e, dsl_pool_t *dp, const char *name)
{
    size_t n = strlen(name);
    return e->dp == dp && !strncmp(e->dataset, name, n) &&
           (e->dataset[n] == '\0' || e->dataset[n] == '/');
}

/* The exports of the tree (exports_lock held) with suspended == want, held, in a
 * new array (*n of them); NULL when there are none or no memory. */
static nfs_export_t **hold_tree(nfs_server_t *srv, dsl_pool_t *dp, const char *name, bool want,
                                size_t *n)
{
    CAIRN_ASSERT(cairn_mutex_held(&srv->exports_lock));
    *n = 0;
    nfs_export_t **v = calloc(srv->nexports ? srv->nexports : 1, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < srv->nexports; i++)
        if (in_tree(srv->exports[i], dp, name) && srv->exports[i]->suspended == want)
            v[(*n)++] = nfs_export_hold(srv->exports[i]);
    return v;
}

int nfs_server_suspend(nfs_server_t *srv, dsl_pool_t *dp, const char *name)
{
    size_t n;
    pthread_mutex_lock(&srv->exports_lock);
    nfs_export_t **v = hold_tree(srv, dp, name, false, &n);
    for (size_t i = 0; v && i < n; i++) v[i]->suspended = true;
    pthread_mutex_unlock(&srv->exports_lock);
    if (!v) return -ENOMEM;
    /* Our reference keeps each listed or at least alive (an unexport waits for it);
     * the calls that found it before it was suspended finish first. */
    for (size_t i = 0; i < n; i++) {
        nfs_export_t *e = v[i];
        pthread_mutex_lock(&srv->exports_lock);
        while (atomic_load(&e->refs) > 2) pthread_cond_wait(&srv->exports_cv, &srv->exports_lock);
        pthread_mutex_unlock(&srv->exports_lock);
        pthread_mutex_lock(&e->lock);
        zpl_fs_t *fs = e->fs;
        e->fs = NULL;
        pthread_mutex_unlock(&e->lock);
        if (!fs) continue;
        if (srv->nfs4_state) nfs4_export_removed(srv->nfs4_state, e);
        if (srv->nlm_state) nlm_export_removed(srv->nlm_state, e);
        int rc = zpl_unmount(fs);
        for (int k = 0; rc == -EBUSY && k < 100; k++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            rc = zpl_unmount(fs);
        }
        if (rc < 0) {
            /* Still mounted: the operation finds the dataset busy, and resume serves it. */
            log_error(SUB, "unmounting %s to suspend it: %s", e->dataset, strerror(-rc));
            pthread_mutex_lock(&e->lock);
            e->fs = fs;
            pthread_mutex_unlock(&e->lock);
        }
    }
    for (size_t i = 0; i < n; i++) nfs_export_rele(v[i]);
    free(v);
    if (n) log_info(SUB, "suspended %zu export(s) of %s", n, name);
    return (int)n;
}

void nfs_server_rename(nfs_server_t *srv, dsl_pool_t *dp, const char *name, const char *new_name)
{
    size_t ol = strlen(name);
    pthread_mutex_lock(&srv->exports_lock);
    for (size_t i = 0; i < srv->nexports; i++) {
        nfs_export_t *e = srv->exports[i];
        char nn[sizeof e->dataset];
        if (!in_tree(e, dp, name) ||
            snprintf(nn, sizeof nn, "%s%s", new_name, e->dataset + ol) >= (int)sizeof nn)
            continue;
        memcpy(e->dataset, nn, sizeof nn);
    }
    pthread_mutex_unlock(&srv->exports_lock);
}

void nfs_server_resume(nfs_server_t *srv, dsl_pool_t *dp, const char *name)
{
    size_t n;
    pthread_mutex_lock(&srv->exports_lock);
    nfs_export_t **v = hold_tree(srv, dp, name, true, &n);
    pthread_mutex_unlock(&srv->exports_lock);
    if (!v) return; /* no memory: they stay suspended (JUKEBOX) rather than go stale */
    for (size_t i = 0; i < n; i++) {
        nfs_export_t *e = v[i];
        int rc = 0;
        if (!e->fs) { /* only we change it while suspended */
            zpl_fs_t *fs = NULL;
            rc = zpl_mount(dp, e->dataset, &fs);
            pthread_mutex_lock(&e->lock);
            if (!rc) e->fs = fs;
            pthread_mutex_unlock(&e->lock);
        }
        pthread_mutex_lock(&srv->exports_lock);
        bool listed = false;
        for (size_t k = 0; k < srv->nexports && !listed; k++) listed = srv->exports[k] == e;
        if (rc && listed) list_remove(srv, e);
        e->suspended = false;
        pthread_cond_broadcast(&srv->exports_cv);
        pthread_mutex_unlock(&srv->exports_lock);
        if (rc) log_error(SUB, "cannot mount %s again: %s; unexported", e->dataset, strerror(-rc));
        nfs_export_rele(e);
        if (rc && listed) export_destroy(srv, e, false);
    }
    free(v);
}

void nfs_server_unexport_pool(nfs_server_t *srv, dsl_pool_t *dp)
{
    for (;;) {
        pthread_mutex_lock(&srv->exports_lock);
        nfs_export_t *e = NULL;
        for (size_t i = 0; i < srv->nexports && !e; i++)
            if (!dp || srv->exports[i]->dp == dp) e = srv->exports[i];
        if (e) list_remove(srv, e);
        pthread_mutex_unlock(&srv->exports_lock);
        if (!e) break;
        export_destroy(srv, e, true);
    }
    if (srv->nfs4_state) nfs4_records_pool_remove(srv->nfs4_state, dp);
    if (srv->nlm_state) nlm_records_pool_remove(srv->nlm_state, dp);
}

void nfs_exports_fini(nfs_server_t *srv)
{
    nfs_server_unexport_pool(srv, NULL);
    free(srv->exports);
    srv->exports = NULL;
    for (nfs_mount_entry_t *m = srv->mounts, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    srv->mounts = NULL;
}

size_t nfs_server_list_exports(nfs_server_t *srv, nfs_export_info_t *out, size_t cap)
{
    pthread_mutex_lock(&srv->exports_lock);
    size_t n = srv->nexports;
    for (size_t i = 0; i < n && i < cap; i++) {
        nfs_export_t *e = srv->exports[i];
        nfs_export_info_t *o = &out[i];
        memset(o, 0, sizeof *o);
        snprintf(o->dataset, sizeof o->dataset, "%s", e->dataset);
        snprintf(o->path, sizeof o->path, "%s", e->path);
        pthread_mutex_lock(&e->lock);
        snprintf(o->options, sizeof o->options, "%s", e->options);
        o->versions = e->opts.versions;
        pthread_mutex_unlock(&e->lock);
        o->calls = cairn_counter_get(&e->calls);
        o->read_bytes = cairn_counter_get(&e->read_bytes);
        o->write_bytes = cairn_counter_get(&e->write_bytes);
        pthread_mutex_lock(&srv->mounts_lock);
        /* A mount of a directory below the export counts for it, unless a
         * longer export covers that directory. */
        for (nfs_mount_entry_t *m = srv->mounts; m; m = m->next) {
            if (!covers(e->path, m->path)) continue;
            bool deeper = false;
            for (size_t k = 0; k < n && !deeper; k++)
                deeper = path_len(srv->exports[k]->path) > path_len(e->path) &&
                         covers(srv->exports[k]->path, m->path);
            if (!deeper) o->clients++;
        }
        pthread_mutex_unlock(&srv->mounts_lock);
    }
    pthread_mutex_unlock(&srv->exports_lock);
    return n;
}
