/*
 * `cairn token create|list|revoke`: the API tokens of the HTTPS server, kept in
 * STATE_DIR/http-tokens, and `cairn user add|passwd|remove|list`: the web UI's
 * users, kept in STATE_DIR/http-users (include/cairn/mgmt_token.h). Only the
 * admin socket manages them - whoever may use the socket owns the daemon
 * anyway - and the HTTP server only verifies them.
 */
#include "cairnd.h"

#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SUB "cairnd"

static mgmt_token_store_t *g_tokens, *g_users;

int cairnd_tokens_init(const char *state_dir, char *err, size_t errlen)
{
    char path[MGMT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/http-tokens", state_dir);
    int rc = mgmt_token_store_open(path, &g_tokens, err, errlen);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/http-users", state_dir);
    return mgmt_user_store_open(path, &g_users, err, errlen);
}

mgmt_token_store_t *cairnd_tokens(void) { return g_tokens; }
mgmt_token_store_t *cairnd_users(void) { return g_users; }

static Cairn__Mgmt__TokenRow *token_row(cairnd_arena_t *a, const mgmt_token_info_t *t)
{
    Cairn__Mgmt__TokenRow *r = cairnd_arena_alloc(a, sizeof *r);
    cairn__mgmt__token_row__init(r);
    r->name = cairnd_arena_strdup(a, t->name);
    r->role = (char *)mgmt_role_name(t->role);
    r->created = t->created;
    return r;
}

static Cairn__Mgmt__TokenRows *new_rows(cairnd_arena_t *a, Cairn__Mgmt__TokenRow **rows, size_t n)
{
    Cairn__Mgmt__TokenRows *tr = cairnd_arena_alloc(a, sizeof *tr);
    cairn__mgmt__token_rows__init(tr);
    tr->rows = rows;
    tr->n_rows = n;
    return tr;
}

static void set_rows(Cairn__Mgmt__Response *resp, cairnd_arena_t *a, Cairn__Mgmt__TokenRow **rows,
                     size_t n)
{
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_TOKENS;
    resp->tokens = new_rows(a, rows, n);
}

static void do_create(const Cairn__Mgmt__TokenCreate *req, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    char err[256], secret[MGMT_TOKEN_SECRET_LEN];
    mgmt_role_t role = req->read_only ? MGMT_ROLE_READ_ONLY : MGMT_ROLE_ADMIN;
    int rc = mgmt_token_create(g_tokens, req->name, role, secret, err, sizeof err);
    if (rc) {
        cairnd_set_error(resp, a, rc, "%s", err);
        return;
    }
    log_info(SUB, "API token '%s' (%s) created", req->name, mgmt_role_name(role));
    mgmt_token_info_t info = {.role = role, .created = (uint64_t)time(NULL)};
    cairn_strlcpy(info.name, req->name, sizeof info.name);
    Cairn__Mgmt__TokenRow **rows = cairnd_arena_alloc(a, sizeof *rows);
    rows[0] = token_row(a, &info);
    rows[0]->secret = cairnd_arena_strdup(a, secret);
    set_rows(resp, a, rows, 1);
}

static Cairn__Mgmt__TokenRows *list_rows(mgmt_token_store_t *store, cairnd_arena_t *a)
{
    size_t n = mgmt_token_list(store, NULL, 0);
    mgmt_token_info_t *v = cairnd_arena_alloc(a, (n ? n : 1) * sizeof *v);
    n = mgmt_token_list(store, v, n); /* may have shrunk meanwhile */
    Cairn__Mgmt__TokenRow **rows = cairnd_arena_alloc(a, (n ? n : 1) * sizeof *rows);
    size_t k = 0;
    for (; k < n; k++) rows[k] = token_row(a, &v[k]);
    return new_rows(a, rows, k);
}

static void do_list(Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_TOKENS;
    resp->tokens = list_rows(g_tokens, a);
}

/* user add|passwd|remove|list. A changed or removed user's web sessions end at
 * once: a password change is how an administrator throws someone out. */
static void do_user(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                    cairnd_arena_t *a)
{
    char err[256];
    int rc = 0;
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_USER_ADD: {
        const Cairn__Mgmt__UserAdd *u = req->user_add;
        mgmt_role_t role = u->read_only ? MGMT_ROLE_READ_ONLY : MGMT_ROLE_ADMIN;
        rc = mgmt_user_add(g_users, u->name, role, u->password, err, sizeof err);
        if (!rc) log_info(SUB, "user '%s' (%s) added", u->name, mgmt_role_name(role));
        break;
    }
    case CAIRN__MGMT__REQUEST__CMD_USER_PASSWD:
        rc = mgmt_user_passwd(g_users, req->user_passwd->name, req->user_passwd->password, err,
                              sizeof err);
        if (!rc) {
            cairnd_sessions_end_user(req->user_passwd->name);
            log_info(SUB, "user '%s': password changed", req->user_passwd->name);
        }
        break;
    case CAIRN__MGMT__REQUEST__CMD_USER_REMOVE:
        rc = mgmt_token_revoke(g_users, req->user_remove->name, err, sizeof err);
        if (!rc) {
            cairnd_sessions_end_user(req->user_remove->name);
            log_info(SUB, "user '%s' removed", req->user_remove->name);
        }
        break;
    default:
        resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_USERS;
        resp->users = list_rows(g_users, a);
    }
    if (rc) cairnd_set_error(resp, a, rc, "%s", err);
}

bool cairnd_handle_tokens(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                          cairnd_arena_t *a)
{
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_USER_ADD:
    case CAIRN__MGMT__REQUEST__CMD_USER_PASSWD:
    case CAIRN__MGMT__REQUEST__CMD_USER_REMOVE:
    case CAIRN__MGMT__REQUEST__CMD_USER_LIST:
        if (!g_users) cairnd_set_error(resp, a, -ENOTSUP, "the user store could not be opened (see the log)");
        else do_user(req, resp, a);
        return true;
    case CAIRN__MGMT__REQUEST__CMD_TOKEN_CREATE:
    case CAIRN__MGMT__REQUEST__CMD_TOKEN_LIST:
    case CAIRN__MGMT__REQUEST__CMD_TOKEN_REVOKE: break;
    default: return false;
    }
    if (!g_tokens) {
        cairnd_set_error(resp, a, -ENOTSUP, "the token store could not be opened (see the log)");
        return true;
    }
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_TOKEN_CREATE: do_create(req->token_create, resp, a); break;
    case CAIRN__MGMT__REQUEST__CMD_TOKEN_LIST: do_list(resp, a); break;
    default: {
        char err[256];
        int rc = mgmt_token_revoke(g_tokens, req->token_revoke->name, err, sizeof err);
        if (rc) cairnd_set_error(resp, a, rc, "%s", err);
        else log_info(SUB, "API token '%s' revoked", req->token_revoke->name);
    }
    }
    return true;
}
