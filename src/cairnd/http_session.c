/*
 * Web sessions: what a person gets for logging in with a user name and
 * password (POST /api/v1/sessions), so the browser does not send the password
 * with every request and a stolen session ends on its own.
 *
 * A session is a 256-bit random secret ("csess_" + 64 hex digits, the length of
 * an API token) handed to the browser once, both in the reply body (for scripts,
 * as `Authorization: Bearer`) and as an HttpOnly, Secure, SameSite=Strict cookie
 * (for the web UI: page scripts cannot read it and other sites cannot send it).
 * The table keeps only its SHA-256, so a core dump does not hand out sessions.
 *
 * Lifetime: SESSION_IDLE_S without a request, or SESSION_MAX_S after the log-in,
 * whichever comes first; log-out ends it at once, and so does `cairn user passwd`
 * or `user remove` for every session of that user. Sessions live in memory only:
 * a restart logs everyone out, which is the safe direction.
 *
 * At most SESSION_SLOTS sessions; a log-in when all are live replaces the one
 * idle longest. Verification compares against every slot in constant time, as
 * tokens are compared.
 */
#include "cairnd.h"

#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SUB "http"

#define SESSION_SLOTS 256
#define SESSION_IDLE_S (30 * 60)
#define SESSION_MAX_S (12 * 3600)
#define SESSION_PREFIX "csess_"
#define SECRET_RANDOM 32
#define DIGEST_LEN 32

typedef struct session {
    bool live;
    uint8_t digest[DIGEST_LEN];
    mgmt_token_info_t who;
    time_t opened, last_used;
} session_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static session_t g_sessions[SESSION_SLOTS];

static time_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void digest(const char *secret, uint8_t out[DIGEST_LEN])
{
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, secret, strlen(secret), out))
        memset(out, 0xff, DIGEST_LEN); /* matches no live slot's real digest */
}

static bool expired(const session_t *s, time_t now)
{
    return now - s->last_used >= SESSION_IDLE_S || now - s->opened >= SESSION_MAX_S;
}

bool cairnd_is_session_secret(const char *secret)
{
    return !strncmp(secret, SESSION_PREFIX, sizeof SESSION_PREFIX - 1);
}

int cairnd_session_open(const mgmt_token_info_t *who, char *secret)
{
    uint8_t rnd[SECRET_RANDOM];
    if (gnutls_rnd(GNUTLS_RND_KEY, rnd, sizeof rnd)) return -EIO;
    static const char hex[] = "0123456789abcdef";
    char *p = secret + sizeof SESSION_PREFIX - 1;
    memcpy(secret, SESSION_PREFIX, sizeof SESSION_PREFIX - 1);
    for (size_t i = 0; i < sizeof rnd; i++) {
        *p++ = hex[rnd[i] >> 4];
        *p++ = hex[rnd[i] & 15];
    }
    *p = '\0';
    gnutls_memset(rnd, 0, sizeof rnd);
    time_t now = now_s();
    pthread_mutex_lock(&g_lock);
    session_t *slot = &g_sessions[0];
    for (size_t i = 0; i < SESSION_SLOTS; i++) {
        session_t *s = &g_sessions[i];
        if (!s->live || expired(s, now)) {
            slot = s;
            break;
        }
        if (s->last_used < slot->last_used) slot = s;
    }
    *slot = (session_t){.live = true, .who = *who, .opened = now, .last_used = now};
    digest(secret, slot->digest);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int cairnd_session_verify(const char *secret, mgmt_token_info_t *who)
{
    uint8_t d[DIGEST_LEN];
    digest(secret, d);
    time_t now = now_s();
    int rc = -EACCES;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < SESSION_SLOTS; i++) {
        session_t *s = &g_sessions[i];
        bool same = gnutls_memcmp(s->digest, d, DIGEST_LEN) == 0;
        if (!same || !s->live) continue;
        if (expired(s, now)) {
            s->live = false;
            continue;
        }
        s->last_used = now;
        *who = s->who;
        rc = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void cairnd_session_close(const char *secret)
{
    uint8_t d[DIGEST_LEN];
    digest(secret, d);
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < SESSION_SLOTS; i++)
        if (gnutls_memcmp(g_sessions[i].digest, d, DIGEST_LEN) == 0) g_sessions[i].live = false;
    pthread_mutex_unlock(&g_lock);
}

void cairnd_sessions_end_user(const char *name)
{
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < SESSION_SLOTS; i++)
        if (g_sessions[i].live && !strcmp(g_sessions[i].who.name, name))
            g_sessions[i].live = false;
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------- endpoints */

static void log_in(const cairnd_http_api_t *req, http_reply_t *out)
{
    json_error_t je;
    json_t *body = req->body_len ? json_loadb(req->body, req->body_len, 0, &je) : NULL;
    const char *user = NULL, *password = NULL;
    if (json_unpack(body, "{s:s,s:s}", "user", &user, "password", &password)) {
        json_decref(body);
        cairnd_http_error(out, MHD_HTTP_BAD_REQUEST,
                          "log in with a JSON body {\"user\": NAME, \"password\": PASSWORD}");
        return;
    }
    mgmt_token_store_t *users = cairnd_users();
    mgmt_token_info_t who;
    char secret[MGMT_TOKEN_SECRET_LEN];
    if (!users || mgmt_user_verify(users, user, password, &who)) {
        log_info(SUB, "%s: log-in as '%s' refused", req->addr, user);
        cairnd_http_error(out, MHD_HTTP_UNAUTHORIZED, "wrong user name or password");
    } else if (cairnd_session_open(&who, secret)) {
        cairnd_http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "no random bytes for a session");
    } else {
        log_info(SUB, "%s: user '%s' (%s) logged in", req->addr, who.name,
                 mgmt_role_name(who.role));
        snprintf(out->set_cookie, sizeof out->set_cookie,
                 "cairn_session=%s; Path=/; Max-Age=%d; Secure; HttpOnly; SameSite=Strict", secret,
                 SESSION_MAX_S);
        cairnd_http_reply_json(out, MHD_HTTP_CREATED,
                               json_pack("{s:s,s:s,s:s,s:i,s:i}", "user", who.name, "role",
                                         mgmt_role_name(who.role), "token", secret,
                                         "idle_timeout", SESSION_IDLE_S, "max_age", SESSION_MAX_S));
        gnutls_memset(secret, 0, sizeof secret);
    }
    json_decref(body);
}

void cairnd_http_sessions(const cairnd_http_api_t *req, http_reply_t *out)
{
    bool current = !strcmp(req->url, CAIRND_API_PREFIX "/sessions/current");
    if (!current) {
        if (strcmp(req->method, "POST"))
            cairnd_http_error(out, MHD_HTTP_METHOD_NOT_ALLOWED, "%s only answers POST", req->url);
        else log_in(req, out);
        return;
    }
    if (!strcmp(req->method, "GET")) {
        cairnd_http_reply_json(out, MHD_HTTP_OK,
                               json_pack("{s:s,s:s,s:s}", "user", req->who->name, "role",
                                         mgmt_role_name(req->who->role), "via", req->via));
    } else if (!strcmp(req->method, "DELETE")) {
        if (!cairnd_is_session_secret(req->secret)) {
            cairnd_http_error(out, MHD_HTTP_BAD_REQUEST,
                              "an API token is not a session (revoke it with cairn token revoke)");
            return;
        }
        cairnd_session_close(req->secret);
        log_info(SUB, "%s: user '%s' logged out", req->addr, req->who->name);
        snprintf(out->set_cookie, sizeof out->set_cookie,
                 "cairn_session=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict");
        cairnd_http_reply_json(out, MHD_HTTP_OK, json_object());
    } else {
        cairnd_http_error(out, MHD_HTTP_METHOD_NOT_ALLOWED, "%s answers GET and DELETE", req->url);
    }
}

json_t *cairnd_http_sessions_openapi(void)
{
    json_t *err = json_pack("{s:s,s:{s:{s:{s:s}}}}", "description", "a one-line error",
                            "content", "application/json", "schema", "$ref",
                            "#/components/schemas/Error");
    json_t *session = json_pack(
        "{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s}}}", "type", "object", "properties",
        "user", "type", "string", "role", "type", "string", "token", "type", "string",
        "idle_timeout", "type", "integer", "max_age", "type", "integer");
    json_t *whoami = json_pack("{s:s,s:{s:{s:s},s:{s:s},s:{s:s}}}", "type", "object",
                               "properties", "user", "type", "string", "role", "type", "string",
                               "via", "type", "string");
    json_t *login = json_pack(
        "{s:s,s:s,s:[],s:{s:b,s:{s:{s:{s:s,s:[s,s],s:{s:{s:s},s:{s:s}}}}}},"
        "s:{s:{s:s,s:{s:{s:o}}},s:O,s:O}}",
        "operationId", "session_open", "summary",
        "Logs a user in (cairn user add): returns a session token, also set as the HttpOnly "
        "cookie cairn_session; sessions end after 30 idle minutes or 12 hours.",
        "security", "requestBody", "required", 1, "content", "application/json", "schema",
        "type", "object", "required", "user", "password", "properties", "user", "type",
        "string", "password", "type", "string", "responses", "201", "description",
        "logged in", "content", "application/json", "schema", session, "401", err, "default",
        err);
    json_t *current = json_pack(
        "{s:{s:s,s:s,s:{s:{s:s,s:{s:{s:o}}},s:O}},s:{s:s,s:s,s:{s:{s:s},s:O}}}", "get",
        "operationId", "session_current", "summary",
        "Who the request authenticates as: user (a session) or token.", "responses", "200",
        "description", "the caller", "content", "application/json", "schema", whoami, "401",
        err, "delete", "operationId", "session_close", "summary",
        "Logs the session out (its token and cookie stop working).", "responses", "200",
        "description", "logged out", "default", err);
    json_t *paths = json_pack("{s:{s:o},s:o}", "/sessions", "post", login, "/sessions/current",
                              current);
    json_decref(err);
    return paths;
}
