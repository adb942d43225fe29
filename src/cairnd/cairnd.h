/* Internal interfaces between the parts of cairnd (not a library contract). */
#ifndef CAIRND_H
#define CAIRND_H

#include <cairn/dsl.h>
#include <cairn/mgmt.h>
#include <cairn/mgmt_token.h>
#include <cairn/iscsi.h>
#include <cairn/nfs.h>
#include <cairn_mgmt.pb-c.h>

/* Per-request allocations, freed at once after the response is sent (arena.c). */
typedef struct cairnd_arena {
    void **ptrs;
    size_t n, cap;
} cairnd_arena_t;
void *cairnd_arena_alloc(cairnd_arena_t *a, size_t size);
char *cairnd_arena_strdup(cairnd_arena_t *a, const char *s);
void cairnd_arena_free(cairnd_arena_t *a);

/* hostid.c: this daemon's host id (cairnd.conf hostid, else STATE_DIR/hostid,
 * drawn on the first start) and name, handed to the pool layer. */
int cairnd_hostid_init(const char *state_dir, uint32_t configured, char *err, size_t errlen);
const char *cairnd_hostname(void);

/* systemd integration (service.c): READY/STATUS/STOPPING and the watchdog ping from
 * the main loop; no-ops outside systemd. poll_timeout_ms: how long the main loop may
 * sleep before the next ping is due (-1: no watchdog). */
void cairnd_service_init(void);
void cairnd_service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cairnd_service_ready(void);
void cairnd_service_stopping(void);
int cairnd_service_poll_timeout_ms(void);
void cairnd_service_watchdog(void);

/* Pool table (pool_table.c): pools by name and the cache file of those to import at
 * start. cairnd_pools_init reads the cache file; everything else with the table
 * locked (cairnd_table_lock; writing where it changes). */
int cairnd_pools_init(const char *state_dir);
typedef struct cairnd_pool_entry {
    char name[SPA_NAME_MAX];
    char **paths;
    size_t npaths;
    spa_t *spa; /* NULL when the import at start failed */
    dsl_pool_t *dp; /* its dataset layer, open whenever spa is */
    uint64_t opened_ns; /* CLOCK_MONOTONIC at import: `pool iostat`'s first interval */
} cairnd_pool_entry_t;
void cairnd_table_lock(bool writer);
void cairnd_table_unlock(void);
size_t cairnd_table_count(void);
cairnd_pool_entry_t *cairnd_table_at(size_t i);
cairnd_pool_entry_t *cairnd_table_find(const char *name);
spa_t *cairnd_table_find_spa(const char *name); /* NULL: unknown or not imported */
void cairnd_table_add(spa_t *spa, dsl_pool_t *dp);
void cairnd_table_remove(cairnd_pool_entry_t *e);
void cairnd_table_entry_free_paths(cairnd_pool_entry_t *e);
int cairnd_table_write_cache(void);
void cairnd_table_clear(void);

/* Pool commands (pools.c). */
/* Imports every pool listed in the cache file; failures are logged and kept. */
void cairnd_pools_import_cached(void);
/* Closes every pool cleanly (daemon shutdown). */
void cairnd_pools_shutdown(void);
/* False when req is not a pool command; with the table locked (dispatch.c). */
bool cairnd_handle_pool(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                        cairnd_arena_t *a);
/* `pool events`: without the table lock, it may wait for the next event. */
void cairnd_handle_pool_events(const Cairn__Mgmt__PoolEvents *m, Cairn__Mgmt__Response *resp,
                               cairnd_arena_t *a);

/* Fills resp for req; everything resp points to lives in arena (dispatch.c). */
void cairnd_handle_request(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *arena);

/* Fills resp with error rc (negative errno) and a one-line message. */
void cairnd_set_error(Cairn__Mgmt__Response *resp, cairnd_arena_t *a, int rc, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));

/* For dataset requests, called with the pool table read-locked (pool_table.c). The
 * dataset layer of an imported pool, or NULL. */
dsl_pool_t *cairnd_pool_dsl(const char *pool);
/* Up to cap open dataset layers in pool-table order; returns how many there are. */
size_t cairnd_pool_dsls(dsl_pool_t **out, size_t cap);

/* Dataset commands (datasets.c): false when req is not one of them. Runs with the pool
 * table read-locked. */
bool cairnd_handle_dataset(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a);

/* The ARC (arc.c): arc_max (0: sized from the machine) and its shrinking under memory
 * pressure, the remembered cache devices (STATE_DIR/l2arc.cache);
 * cache devices of a new pool (formats them; -errno with err on failure); re-attach
 * a pool's remembered devices when it opens; forget them when it is destroyed;
 * the arcstat request (false when req is not one). */
void cairnd_arc_init(const char *state_dir, uint64_t arc_max);
int cairnd_arc_add_devices(spa_t *spa, char *const *paths, size_t n, char *err, size_t errlen);
void cairnd_arc_pool_opened(spa_t *spa);
void cairnd_arc_pool_destroyed(uint64_t guid);
/* `pool remove POOL DEV` of a cache device: detached (its L2ARC headers dropped) and
 * forgotten. -ENOENT when DEV is not one of the pool's cache devices. */
int cairnd_arc_remove_device(spa_t *spa, const char *path);
bool cairnd_arc_is_device(spa_t *spa, const char *path);
/* `pool status`: the pool's remembered cache devices with their state. */
size_t cairnd_arc_cache_status(spa_t *spa, cairnd_arena_t *a, Cairn__Mgmt__VdevStatus ***out);
/* The ARC's counters as a message (`arcstat`, and `pool iostat`'s ARC section). */
Cairn__Mgmt__ArcStats *cairnd_arc_stats_msg(cairnd_arena_t *a);
bool cairnd_handle_arc(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                       cairnd_arena_t *a);
/* iSCSI (iscsi.c): the listener and `cairn iscsi` commands; the hooks keep LUNs in
 * step with pools and volumes. All run with the pool table locked (start: alone). */
int cairnd_iscsi_start(const cairnd_config_t *cfg, char *err, size_t errlen);
void cairnd_iscsi_stop(void);
bool cairnd_handle_iscsi(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                         cairnd_arena_t *a);
void cairnd_iscsi_pool_opened(dsl_pool_t *dp);
/* An export starts: the pool's LUs report ALUA transitioning until closing removes them. */
void cairnd_iscsi_pool_exporting(dsl_pool_t *dp);
void cairnd_iscsi_pool_closing(dsl_pool_t *dp);
/* A volume (or, recursive, a descendant) serving as a LUN: without force, fills resp
 * and returns true; with force, removes those LUNs and returns false. */
bool cairnd_iscsi_volume_busy(const char *name, bool recursive, bool force,
                              Cairn__Mgmt__Response *resp, cairnd_arena_t *a, const char *verb);
void cairnd_iscsi_volsize_changed(const char *name);
/* NFS shares (shares.c). The server starts once pools are imported; the rest
 * runs with the pool table locked, like the request handlers. */
int cairnd_shares_start(const cairnd_config_t *cfg, char *err, size_t errlen);
/* Clients are served from here on: call once the cached pools' shares are exported.
 * Until then connections wait in the listen backlog (nfs_server_serve). */
void cairnd_shares_serve(void);
void cairnd_shares_stop(void);
/* Exports every shared filesystem, unexports the rest, at their mountpoints. */
void cairnd_shares_refresh(void);
/* The same; -errno and why (one line) when dataset name should be exported and
 * could not be (a path another share has, a filesystem that cannot be mounted). */
int cairnd_shares_refresh_report(const char *name, char *why, size_t whylen);
/* Around an operation that needs name (a snapshot name means its filesystem) and
 * its descendants unheld: suspend their exports (JUKEBOX, nfs_server_suspend), then
 * resume them, or unexport them when gone (destroyed). Always paired; one pair at
 * a time. */
void cairnd_shares_suspend(const char *name);
void cairnd_shares_resume(const char *name, bool gone);
/* After a rename of the tree name: its exports take the new names, mounted all along. */
void cairnd_shares_renamed(const char *name, const char *new_name);
/* Unexports name (a snapshot name means its filesystem) and its descendants. */
void cairnd_shares_unexport_tree(const char *name);
void cairnd_shares_pool_closing(dsl_pool_t *dp);
void cairnd_handle_share_list(Cairn__Mgmt__Response *resp, cairnd_arena_t *a);
/* The pool's command history (history.c), with the pool table locked: record req's
 * command line in the pool it changed when it worked; the `pool history` request
 * (false when req is not one). */
void cairnd_history_record(const Cairn__Mgmt__Request *req, const Cairn__Mgmt__Response *resp);
bool cairnd_handle_history(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a);
/* Pool table read-locked around cairnd_shares_refresh (pools.c). */
void cairnd_pools_refresh_shares(void);

/* API tokens (tokens.c): the store in STATE_DIR/http-tokens and `cairn token ...`. */
int cairnd_tokens_init(const char *state_dir, char *err, size_t errlen);
mgmt_token_store_t *cairnd_tokens(void);
mgmt_token_store_t *cairnd_users(void);
/* Web sessions (http_session.c): opened by a user's log-in, carried as a bearer
 * token or the cairn_session cookie, ended by log-out, idleness, age, or a change
 * of the user (passwd, remove). secret: MGMT_TOKEN_SECRET_LEN bytes. */
int cairnd_session_open(const mgmt_token_info_t *who, char *secret);
int cairnd_session_verify(const char *secret, mgmt_token_info_t *who);
void cairnd_session_close(const char *secret);
void cairnd_sessions_end_user(const char *name);
bool cairnd_is_session_secret(const char *secret);
bool cairnd_handle_tokens(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                          cairnd_arena_t *a);
/* Analytics (analytics.c): the sampler and its history in STATE_DIR/analytics.dat
 * (start after the config is read, stop after the front ends), and the `cairn
 * analytics` requests (false when req is not one; no pool lock needed). */
void cairnd_analytics_start(const cairnd_config_t *cfg);
void cairnd_analytics_stop(void);
bool cairnd_handle_analytics(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                             cairnd_arena_t *a);
/* The front ends' statistics for /metrics (NULL while a server is not running). */
const nfs_stats_t *cairnd_shares_stats(void);
/* nfs_server_list_exports of the running server (0 without one). */
size_t cairnd_shares_exports(nfs_export_info_t *out, size_t cap);
const iscsi_stats_t *cairnd_iscsi_stats(void);
size_t cairnd_iscsi_target_stats(iscsi_target_stats_t *out, size_t cap);
/* The HTTPS server (http.c): REST API, OpenAPI document and /metrics. Off when
 * cfg->http has no address. */
int cairnd_http_start(const cairnd_config_t *cfg, char *err, size_t errlen);
void cairnd_http_stop(void);
/* The Prometheus text exposition of everything (metrics.c); malloc'd. */
char *cairnd_metrics_render(size_t *len);
/* The REST API (http_api.c), reached through http.c once the request is
 * authenticated (or is the OpenAPI document, which needs no token). */
#define CAIRND_API_PREFIX "/api/v1"
typedef struct http_reply {
    int status;
    char *body; /* malloc'd */
    size_t len;
    const char *content_type; /* NULL: application/json */
    char set_cookie[160];     /* "" or a Set-Cookie header's value */
    char location[96];        /* "" or a Location header's value */
} http_reply_t;
struct MHD_Connection;
typedef struct cairnd_http_api {
    struct MHD_Connection *conn; /* for the query arguments */
    const char *method, *url, *body;
    size_t body_len;
    const mgmt_token_info_t *who;
    const char *via;    /* "token" or "user" (a web session): for messages and the audit */
    const char *secret; /* the credential the request came with */
    const char *addr;
    bool authenticated;
    bool respond_async; /* `Prefer: respond-async`: a change runs as a job */
} cairnd_http_api_t;
void cairnd_http_api(const cairnd_http_api_t *req, http_reply_t *out);
/* out = j (taken) as JSON with status. */
typedef struct json_t json_t;
void cairnd_http_reply_json(http_reply_t *out, int status, json_t *j);
/* POST /sessions (log-in, before any authentication), GET and DELETE
 * /sessions/current (who am I, log-out) - http_session.c. */
void cairnd_http_sessions(const cairnd_http_api_t *req, http_reply_t *out);
/* The OpenAPI paths of the above, for the document (http_session.c). */
json_t *cairnd_http_sessions_openapi(void);
/* API jobs and scans (http_jobs.c). cairnd_job_start runs fn(arg, reply) on a
 * thread of its own and answers 202 with the job (free_arg(arg) after fn); GET
 * /jobs (id NULL) and /jobs/{id}; stop joins running jobs (before pools close). */
typedef void (*cairnd_job_fn)(void *arg, http_reply_t *out);
void cairnd_job_start(const char *operation, const cairnd_http_api_t *req, cairnd_job_fn fn,
                      void *arg, void (*free_arg)(void *), http_reply_t *out);
void cairnd_jobs_get(const char *id, http_reply_t *out);
void cairnd_jobs_stop(void);
/* The web UI's static files (http_ui.c; the table is generated from web/ by the
 * build): served without authentication, looked up by exact URL only. */
typedef struct cairnd_ui_asset {
    const char *path, *content_type;
    const unsigned char *data;
    size_t len;
} cairnd_ui_asset_t;
extern const cairnd_ui_asset_t cairnd_ui_assets[];
extern const size_t cairnd_ui_asset_count;
bool cairnd_ui_is_asset_url(const char *url);
/* The asset of url, or NULL with err filled (404, or 405 for a method but GET/HEAD). */
const cairnd_ui_asset_t *cairnd_ui_find(const char *method, const char *url, http_reply_t *err);
/* GET /api/v1/counters: the front ends' running totals as JSON (metrics.c), for
 * pages that chart rates without parsing /metrics. */
json_t *cairnd_counters_json(void);
/* Its OpenAPI path item, for the document (http_api.c). */
json_t *cairnd_counters_openapi(void);
/* out = {"error": "<message>"} with status. */
void cairnd_http_error(http_reply_t *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
