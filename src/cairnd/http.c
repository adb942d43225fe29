/*
 * The HTTPS server of cairnd: the REST API (http_api.c), its OpenAPI document,
 * /metrics (metrics.c) and the web UI's static files (http_ui.c) at / and /ui/,
 * on libmicrohttpd with GnuTLS.
 *
 * TLS: the certificate and key named by http_cert/http_key, or else a
 * self-signed pair (ECDSA P-256, ten years) made on the first start as
 * STATE_DIR/http-cert.pem and http-key.pem (0600) and kept, so clients can pin
 * it. Plain HTTP is never served.
 *
 * Authentication: every request but the web UI's files, the OpenAPI document, the log-in (POST
 * /api/v1/sessions) and /metrics with http_metrics_public=on carries
 * `Authorization: Bearer TOKEN`, an API token of `cairn token create`
 * (include/cairn/mgmt_token.h) or a session token of a user's log-in
 * (http_session.c), or the session cookie a log-in sets. A missing or wrong one is
 * answered 401 before anything is parsed further, so it changes nothing. Each
 * wrong credential (a refused log-in too) counts against the client's address (a
 * missing one guesses nothing, and the web UI asks who is logged in without one
 * on every load of its log-in page); an address with
 * AUTH_FAIL_LIMIT failures in AUTH_FAIL_WINDOW_S seconds gets 429 for every
 * request until that window ends (brute force then costs a window per
 * AUTH_FAIL_LIMIT guesses of a 256-bit secret).
 *
 * Threads: libmicrohttpd's own pool (HTTP_THREADS) calls handle() for each
 * request; bodies are gathered up to HTTP_BODY_MAX before the request runs.
 */
#include "cairnd.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUB "http"
#define HTTP_THREADS 2
#define HTTP_BODY_MAX (1u << 20)
#define AUTH_FAIL_LIMIT 10
#define AUTH_FAIL_WINDOW_S 60
#define AUTH_FAIL_SLOTS 256
/* TLS 1.2 and 1.3 only: everything that talks to an appliance API today has them. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static struct MHD_Daemon *g_mhd;
static char *g_cert_pem, *g_key_pem;
static bool g_metrics_public;

/* ------------------------------------------------------------ certificate */

static char *read_file(const char *path, char *err, size_t errlen, const char *key)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0;
    if (f) {
        FILE *m = open_memstream(&buf, &len);
        char chunk[4096];
        size_t n;
        while (m && (n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, m);
        if (m) fclose(m);
        fclose(f);
    }
    if (!buf || !len) {
        snprintf(err, errlen, "%s: cannot read %s: %s", key, path,
                 f ? "empty file" : strerror(errno));
        free(buf);
        return NULL;
    }
    return buf;
}

static int write_secret_file(const char *path, const gnutls_datum_t *d, mode_t mode)
{
    char tmp[MGMT_PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return -errno;
    int rc = 0;
    if (write(fd, d->data, d->size) != (ssize_t)d->size || fsync(fd)) rc = errno ? -errno : -EIO;
    if (close(fd) && !rc) rc = -errno;
    if (!rc && rename(tmp, path)) rc = -errno;
    if (rc) unlink(tmp);
    return rc;
}

/* A self-signed server certificate for this host: CN and a DNS name of the
 * host name, plus localhost and 127.0.0.1 for local tools. */
static int make_self_signed(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    gnutls_datum_t kd = {0}, cd = {0};
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    unsigned char serial[16];
    gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
    serial[0] &= 0x7f; /* a positive serial number */
    static const unsigned char loopback[4] = {127, 0, 0, 1};
    time_t now = time(NULL);
    int rc = gnutls_x509_privkey_init(&key);
    if (!rc)
        rc = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                          GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
    if (!rc) rc = gnutls_x509_crt_init(&crt);
    if (!rc) rc = gnutls_x509_crt_set_version(crt, 3);
    if (!rc) rc = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    if (!rc) rc = gnutls_x509_crt_set_activation_time(crt, now - 3600);
    if (!rc) rc = gnutls_x509_crt_set_expiration_time(crt, now + 10L * 365 * 86400);
    if (!rc)
        rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, host, strlen(host));
    if (!rc)
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, host, strlen(host),
                                                  GNUTLS_FSAN_SET);
    if (!rc)
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
                                                  GNUTLS_FSAN_APPEND);
    if (!rc)
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, loopback, 4,
                                                  GNUTLS_FSAN_APPEND);
    if (!rc) rc = gnutls_x509_crt_set_key(crt, key);
    if (!rc) rc = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
    if (!rc) rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
    if (!rc) rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
    if (!rc) rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    if (!rc) rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kd);
    if (!rc) rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cd);
    int io = 0;
    if (rc) snprintf(err, errlen, "cannot make a self-signed certificate: %s", gnutls_strerror(rc));
    else if ((io = write_secret_file(key_path, &kd, 0600)) ||
             (io = write_secret_file(cert_path, &cd, 0644)))
        snprintf(err, errlen, "cannot write the self-signed certificate in the state dir: %s",
                 strerror(-io));
    gnutls_free(kd.data);
    gnutls_free(cd.data);
    if (crt) gnutls_x509_crt_deinit(crt);
    if (key) gnutls_x509_privkey_deinit(key);
    return rc || io ? -EIO : 0;
}

static int load_tls(const cairnd_config_t *cfg, char *err, size_t errlen)
{
    char cert[MGMT_PATH_MAX + 32], key[MGMT_PATH_MAX + 32];
    const char *cert_key = "http_cert", *key_key = "http_key";
    if (cfg->http_cert[0]) {
        cairn_strlcpy(cert, cfg->http_cert, sizeof cert);
        cairn_strlcpy(key, cfg->http_key, sizeof key);
    } else {
        snprintf(cert, sizeof cert, "%s/http-cert.pem", cfg->state_dir);
        snprintf(key, sizeof key, "%s/http-key.pem", cfg->state_dir);
        cert_key = key_key = "the self-signed certificate (http_cert/http_key unset)";
        if (access(cert, F_OK) || access(key, F_OK)) {
            if (make_self_signed(cert, key, err, errlen)) return -EIO;
            log_info(SUB, "made a self-signed certificate %s (replace it with http_cert/http_key)",
                     cert);
        }
    }
    if (!(g_cert_pem = read_file(cert, err, errlen, cert_key))) return -EINVAL;
    if (!(g_key_pem = read_file(key, err, errlen, key_key))) return -EINVAL;
    /* libmicrohttpd only says "failed"; check the pair here to say what is wrong. */
    gnutls_certificate_credentials_t cred;
    gnutls_certificate_allocate_credentials(&cred);
    gnutls_datum_t cd = {(unsigned char *)g_cert_pem, (unsigned)strlen(g_cert_pem)};
    gnutls_datum_t kd = {(unsigned char *)g_key_pem, (unsigned)strlen(g_key_pem)};
    int rc = gnutls_certificate_set_x509_key_mem(cred, &cd, &kd, GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s and %s are not a PEM certificate and its key: %s",
                 cfg->http_cert[0] ? "http_cert/http_key" : cert_key, cert, key,
                 gnutls_strerror(rc));
        return -EINVAL;
    }
    return 0;
}

/* ------------------------------------------------------------ rate limit */

typedef struct auth_fail {
    char addr[INET6_ADDRSTRLEN];
    time_t window_start;
    unsigned count;
} auth_fail_t;

static pthread_mutex_t g_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static auth_fail_t g_fails[AUTH_FAIL_SLOTS];

/* The slot of addr, its count restarted when its window is over; NULL when addr
 * has none and !make, else a new one in place of the oldest window. Called with
 * g_fail_lock held. */
static auth_fail_t *fail_slot(const char *addr, bool make)
{
    CAIRN_ASSERT(cairn_mutex_held(&g_fail_lock));
    time_t now = time(NULL);
    auth_fail_t *oldest = &g_fails[0];
    for (size_t i = 0; i < AUTH_FAIL_SLOTS; i++) {
        auth_fail_t *s = &g_fails[i];
        if (!strcmp(s->addr, addr)) {
            if (now - s->window_start >= AUTH_FAIL_WINDOW_S) s->count = 0, s->window_start = now;
            return s;
        }
        if (s->window_start < oldest->window_start) oldest = s;
    }
    if (!make) return NULL;
    cairn_strlcpy(oldest->addr, addr, sizeof oldest->addr);
    oldest->window_start = now;
    oldest->count = 0;
    return oldest;
}

static bool rate_limited(const char *addr)
{
    pthread_mutex_lock(&g_fail_lock);
    auth_fail_t *s = fail_slot(addr, false);
    bool limited = s && s->count >= AUTH_FAIL_LIMIT;
    pthread_mutex_unlock(&g_fail_lock);
    return limited;
}

static void count_failure(const char *addr)
{
    pthread_mutex_lock(&g_fail_lock);
    auth_fail_t *s = fail_slot(addr, true);
    if (++s->count == AUTH_FAIL_LIMIT)
        log_warn(SUB,
                 "%s: %d failed authentications in %d s; refusing it for the rest of the window",
                 addr, AUTH_FAIL_LIMIT, AUTH_FAIL_WINDOW_S);
    pthread_mutex_unlock(&g_fail_lock);
}

/* ------------------------------------------------------------- requests */

typedef struct body {
    char *data;
    size_t len;
    bool too_large;
} body_t;

static void peer_addr(struct MHD_Connection *c, char *buf, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    cairn_strlcpy(buf, "?", len);
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
}

/* On every answer: the web UI's pages may load scripts, styles and data only from
 * this origin (no inline script), and nothing here may be framed or sniffed. */
#define CONTENT_SECURITY_POLICY                                                                   \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "             \
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

static void add_security_headers(struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "Content-Security-Policy", CONTENT_SECURITY_POLICY);
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

/* A web UI file, from the table built into the program (never copied or freed). */
static enum MHD_Result send_asset(struct MHD_Connection *c, const cairnd_ui_asset_t *a)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type);
    /* Revalidated on each load, so the pages of a new cairnd replace the old at once. */
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    add_security_headers(resp);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, http_reply_t *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type ? r->content_type : "application/json");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    add_security_headers(resp);
    if (r->set_cookie[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, r->set_cookie);
    if (r->location[0]) MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, r->location);
    if (r->status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"cairn\"");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* The credential of `Authorization: Bearer TOKEN`, else the session cookie, or NULL. */
static const char *request_secret(struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h && !strncasecmp(h, "Bearer ", 7)) {
        h += 7;
        while (*h == ' ') h++;
        return *h ? h : NULL;
    }
    h = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "cairn_session");
    return h && *h ? h : NULL;
}

/* RFC 7240: `Prefer: respond-async` (among other preferences). */
static bool prefers_async(struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Prefer");
    if (!h) return false;
    for (const char *p = strcasestr(h, "respond-async"); p; p = strcasestr(p + 1, "respond-async"))
        if ((p == h || strchr(" ,\t", p[-1])) && strchr(" ,;\t", p[13])) return true;
    return false;
}

/* 0 with who and via ("token" or "user") when secret is a live API token or session. */
static int authenticate(const char *secret, mgmt_token_info_t *who, const char **via)
{
    if (!secret) return -ENOENT;
    if (cairnd_is_session_secret(secret)) {
        *via = "user";
        return cairnd_session_verify(secret, who);
    }
    *via = "token";
    mgmt_token_store_t *store = cairnd_tokens();
    return store ? mgmt_token_verify(store, secret, who) : -EACCES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req_cls)
{
    (void)cls, (void)version;
    body_t *b = *req_cls;
    if (!b) { /* headers only so far */
        if (!(b = calloc(1, sizeof *b))) return MHD_NO;
        *req_cls = b;
        return MHD_YES;
    }
    if (*upload_size) {
        if (b->len + *upload_size > HTTP_BODY_MAX) {
            b->too_large = true;
        } else if (!b->too_large) {
            char *d = realloc(b->data, b->len + *upload_size + 1);
            if (!d) return MHD_NO;
            memcpy(d + b->len, upload, *upload_size);
            b->data = d;
            b->len += *upload_size;
            d[b->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    http_reply_t r = {0};
    if (cairnd_ui_is_asset_url(url)) { /* no data in them: no credential needed */
        const cairnd_ui_asset_t *a = cairnd_ui_find(method, url, &r);
        return a ? send_asset(c, a) : send_reply(c, &r);
    }
    char addr[INET6_ADDRSTRLEN];
    peer_addr(c, addr, sizeof addr);
    bool is_metrics = !strcmp(url, "/metrics");
    bool is_login = !strcmp(url, CAIRND_API_PREFIX "/sessions");
    bool open_doc = !strcmp(url, CAIRND_API_PREFIX "/openapi.json") ||
                    (is_metrics && g_metrics_public) || is_login;
    mgmt_token_info_t who = {.role = MGMT_ROLE_READ_ONLY};
    const char *via = "token", *secret = request_secret(c);
    if (rate_limited(addr)) {
        cairnd_http_error(&r, MHD_HTTP_TOO_MANY_REQUESTS,
                          "too many failed authentications from %s; try again later", addr);
        return send_reply(c, &r);
    }
    if (!open_doc && authenticate(secret, &who, &via)) {
        if (secret) count_failure(addr);
        log_info(SUB, "%s: %s %s: %s", addr, method, url, secret ? "wrong credential" : "no credential");
        cairnd_http_error(&r, MHD_HTTP_UNAUTHORIZED,
                          secret ? "the API token or session is not valid (or has expired)"
                                 : "an API token is needed (Authorization: Bearer TOKEN), or a "
                                   "session: log in with POST " CAIRND_API_PREFIX "/sessions");
        return send_reply(c, &r);
    }
    if (b->too_large) {
        cairnd_http_error(&r, MHD_HTTP_CONTENT_TOO_LARGE, "request body larger than %u bytes",
                          HTTP_BODY_MAX);
    } else if (is_metrics) {
        if (strcmp(method, "GET")) {
            cairnd_http_error(&r, MHD_HTTP_METHOD_NOT_ALLOWED, "/metrics only answers GET");
        } else {
            r.body = cairnd_metrics_render(&r.len);
            r.status = r.body ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR;
            r.content_type = "text/plain; version=0.0.4; charset=utf-8";
            if (!r.body) cairnd_http_error(&r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
    } else {
        cairnd_http_api_t req = {.conn = c,
                                 .method = method,
                                 .url = url,
                                 .body = b->data,
                                 .body_len = b->len,
                                 .who = &who,
                                 .via = via,
                                 .secret = secret,
                                 .addr = addr,
                                 .authenticated = !open_doc,
                                 .respond_async = prefers_async(c)};
        if (!strcmp(url, CAIRND_API_PREFIX "/counters")) {
            if (strcmp(method, "GET"))
                cairnd_http_error(&r, MHD_HTTP_METHOD_NOT_ALLOWED, "%s only answers GET", url);
            else cairnd_http_reply_json(&r, MHD_HTTP_OK, cairnd_counters_json());
        } else if (is_login || !strcmp(url, CAIRND_API_PREFIX "/sessions/current")) {
            cairnd_http_sessions(&req, &r);
            if (is_login && r.status == MHD_HTTP_UNAUTHORIZED) count_failure(addr);
        } else {
            cairnd_http_api(&req, &r);
        }
    }
    return send_reply(c, &r);
}

static void request_done(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    body_t *b = *req_cls;
    if (b) {
        free(b->data);
        free(b);
    }
    *req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = '\0';
    log_debug(SUB, "libmicrohttpd: %s", msg);
}

int cairnd_http_start(const cairnd_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg->http.host[0]) return 0;
    g_metrics_public = cfg->http_metrics_public;
    char where[300];
    mgmt_listen_format(&cfg->http, where, sizeof where);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", cfg->http.port);
    int grc = getaddrinfo(cfg->http.host, port, &hints, &ai);
    if (grc) {
        snprintf(err, errlen, "http_listen %s: %s", where, gai_strerror(grc));
        return -EINVAL;
    }
    if (load_tls(cfg, err, errlen)) {
        freeaddrinfo(ai);
        return -EINVAL;
    }
    unsigned flags = MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    g_mhd = MHD_start_daemon(
        flags, cfg->http.port, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_HTTPS_MEM_CERT, g_cert_pem, MHD_OPTION_HTTPS_MEM_KEY, g_key_pem,
        MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)HTTP_THREADS, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
    int e = errno;
    freeaddrinfo(ai);
    if (!g_mhd) {
        snprintf(err, errlen, "http_listen %s: cannot serve HTTPS there: %s", where,
                 e ? strerror(e) : "libmicrohttpd failed");
        return -EINVAL;
    }
    log_info(SUB, "serving HTTPS on %s (API %s, metrics /metrics%s)", where, CAIRND_API_PREFIX,
             g_metrics_public ? ", public" : "");
    return 0;
}

void cairnd_http_stop(void)
{
    if (g_mhd) MHD_stop_daemon(g_mhd);
    cairnd_jobs_stop(); /* before the pools close: a job may be using one */
    g_mhd = NULL;
    free(g_cert_pem);
    free(g_key_pem);
    g_cert_pem = g_key_pem = NULL;
}
