/*
 * `cairn pool history`: which requests are history, and reading it back.
 *
 * Every request carries the CLI's command line (Request.history_line) and who
 * ran it where (history_info). After a request is handled, with the pool table
 * still locked, cairnd_history_record() stores the line in the pool it
 * changed (dsl_history.c) when it worked. History is what changed the pool or
 * its datasets: create, import, set, add, remove, scrub, clear, offline,
 * online, replace, attach, detach, and the dataset commands that change
 * something. Reads (list, get, status, iostat, history) are not; neither is a
 * dry run (`pool add -n`), nor export and destroy, after which the pool is no
 * longer open to write to. A failure to record is logged and the command still
 * counts as done: the change itself is on disk.
 */
#include "cairnd.h"

#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <string.h>

#define SUB "cairnd"

/* The pool a request changed ("" when it is not history); buf holds a dataset's pool. */
static const char *changed_pool(const Cairn__Mgmt__Request *req, const Cairn__Mgmt__Response *resp,
                                char *buf, size_t len)
{
    const char *ds = NULL;
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_POOL_CREATE: return req->pool_create->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_IMPORT:
        return resp->result_case == CAIRN__MGMT__RESPONSE__RESULT_POOL && resp->pool ? resp->pool->name : "";
    case CAIRN__MGMT__REQUEST__CMD_POOL_SCRUB: return req->pool_scrub->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_CLEAR: return req->pool_clear->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_SET: return req->pool_set->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ADD: return req->pool_add->dry_run ? "" : req->pool_add->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_REMOVE: return req->pool_remove->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_OFFLINE: return req->pool_offline->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ONLINE: return req->pool_online->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_REPLACE: return req->pool_replace->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_ATTACH: return req->pool_attach->name;
    case CAIRN__MGMT__REQUEST__CMD_POOL_DETACH: return req->pool_detach->name;
    case CAIRN__MGMT__REQUEST__CMD_DS_CREATE: ds = req->ds_create->name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_DESTROY: ds = req->ds_destroy->name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_RENAME: ds = req->ds_rename->old_name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_SET: ds = req->ds_set->name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_INHERIT: ds = req->ds_inherit->name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_SNAPSHOT: ds = req->ds_snapshot->name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_ROLLBACK: ds = req->ds_rollback->name; break;
    case CAIRN__MGMT__REQUEST__CMD_DS_CLONE: ds = req->ds_clone->name; break;
    default: return "";
    }
    cairn_strlcpy(buf, ds ? ds : "", len);
    buf[strcspn(buf, "/@")] = 0; /* the pool is the first component */
    return buf;
}

void cairnd_history_record(const Cairn__Mgmt__Request *req, const Cairn__Mgmt__Response *resp)
{
    if (resp->error || !req->history_line || !req->history_line[0]) return;
    char buf[MGMT_PATH_MAX];
    const char *pool = changed_pool(req, resp, buf, sizeof buf);
    if (!pool || !pool[0]) return;
    dsl_pool_t *dp = cairnd_pool_dsl(pool);
    if (!dp) return;
    int e = dsl_history_log(dp, cairn_wallclock_s(), req->history_line,
                            req->history_info ? req->history_info : "");
    if (e) log_warn(SUB, "pool '%s': cannot record '%s' in its history: %s", pool,
                    req->history_line, strerror(-e));
}

typedef struct history_collect {
    cairnd_arena_t *a;
    Cairn__Mgmt__PoolHistoryResult *r;
    size_t cap;
} history_collect_t;

static void collect(uint64_t when, const char *line, const char *info, void *arg)
{
    history_collect_t *c = arg;
    if (c->r->n_entries == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        Cairn__Mgmt__HistoryEntry **v = cairnd_arena_alloc(c->a, cap * sizeof *v);
        if (c->r->n_entries) memcpy(v, c->r->entries, c->r->n_entries * sizeof *v);
        c->r->entries = v;
        c->cap = cap;
    }
    Cairn__Mgmt__HistoryEntry *e = cairnd_arena_alloc(c->a, sizeof *e);
    cairn__mgmt__history_entry__init(e);
    e->time = when;
    e->line = cairnd_arena_strdup(c->a, line);
    e->info = cairnd_arena_strdup(c->a, info);
    c->r->entries[c->r->n_entries++] = e;
}

bool cairnd_handle_history(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a)
{
    if (req->cmd_case != CAIRN__MGMT__REQUEST__CMD_POOL_HISTORY) return false;
    const char *name = req->pool_history->name;
    dsl_pool_t *dp = cairnd_pool_dsl(name);
    if (!dp) {
        cairnd_set_error(resp, a, -ENOENT, "no such pool '%s'", name);
        return true;
    }
    Cairn__Mgmt__PoolHistoryResult *r = cairnd_arena_alloc(a, sizeof *r);
    cairn__mgmt__pool_history_result__init(r);
    r->name = cairnd_arena_strdup(a, name);
    history_collect_t c = {.a = a, .r = r};
    int e = dsl_history_walk(dp, collect, &c, &r->dropped);
    if (e) {
        cairnd_set_error(resp, a, e, "cannot read the history of pool '%s': %s", name, strerror(-e));
        return true;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_HISTORY;
    resp->pool_history = r;
    return true;
}
