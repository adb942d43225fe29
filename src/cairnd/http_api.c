/*
 * The REST API under /api/v1: one table of routes, each naming the protobuf
 * Request the CLI sends for the same verb (src/mgmt/cairn_mgmt.proto). A request
 * becomes JSON - the route's fixed fields, then the query arguments, then the
 * body, then the {name} of the path - which the generic bridge
 * (include/cairn/mgmt_json.h) turns into that Request; cairnd_handle_request()
 * answers it exactly as for the admin socket, and the Response's result goes
 * back as JSON. There is no code per verb, so the API and the CLI cannot drift
 * apart, and an error is the CLI's one-line message: {"error": "..."}, with an
 * HTTP status that fits its errno.
 *
 * The OpenAPI 3 document (/api/v1/openapi.json) is generated from the same
 * table and from the protobuf descriptors, so it describes what exists.
 *
 * Roles: routes that change something need an admin token (403 otherwise).
 * Every change is logged (who, from where, what, and the outcome) as the audit
 * trail, and one that succeeds goes into its pool's history as the CLI's do.
 */
#include "cairnd.h"

#include <cairn/log.h>
#include <cairn/mgmt_json.h>
#include <cairn/util.h>

#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB "http"

typedef enum body_kind {
    BODY_NONE,   /* no body; query arguments fill the request */
    BODY_FIELDS, /* a JSON object of the request message's fields */
    BODY_PROPS,  /* {"prop": "value", ...}: one request per property, in order */
} body_kind_t;

typedef struct route {
    const char *method;
    const char *path;       /* under /api/v1; "{name}" takes the rest up to the suffix */
    const char *request;    /* the Request's oneof member */
    const char *name_field; /* the member's field that receives {name} */
    const char *fixed;      /* a JSON object applied first (what the CLI's defaults are) */
    body_kind_t body;
    bool changes; /* admin tokens only */
    int ok_status;
    const char *result; /* the Response's oneof member it answers with (documentation) */
    const char *summary;
} route_t;

/* Routes with a suffix after {name} come before the bare {name} of the same prefix. */
static const route_t g_routes[] = {
    {"GET", "/pools", "pool_list", NULL, NULL, BODY_NONE, false, 200, "pool_list",
     "Pools with size, allocation and health (cairn pool list)."},
    {"POST", "/pools", "pool_create", NULL, NULL, BODY_FIELDS, true, 201, "pool",
     "Creates a pool: {\"name\": ..., \"root\": VdevSpec (type ROOT, children LEAF/MIRROR/RAIDZ "
     "with absolute paths)} (cairn pool create)."},
    {"POST", "/pools/import", "pool_import", NULL, NULL, BODY_FIELDS, true, 200, NULL,
     "Imports a pool: {\"name\": ..., \"dirs\": [...]}; without a name lists the candidates "
     "(cairn pool import)."},
    {"POST", "/pools/{name}/export", "pool_export", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Exports the pool (cairn pool export)."},
    {"GET", "/pools/{name}/iostat", "pool_iostat", "name", NULL, BODY_NONE, false, 200,
     "pool_iostat", "I/O counters of the pool and its vdevs since import (cairn pool iostat)."},
    {"GET", "/pools/{name}/properties", "pool_get", "name", "{\"props\":[\"all\"]}", BODY_NONE,
     false, 200, "props", "Properties of the pool (cairn pool get all POOL)."},
    {"POST", "/pools/{name}/scrub", "pool_scrub", "name", NULL, BODY_FIELDS, true, 200, "scrub",
     "Starts a scrub of the pool; {\"stop\": true} stops it (cairn pool scrub)."},
    {"POST", "/pools/{name}/clear", "pool_clear", "name", NULL, BODY_NONE, true, 200, NULL,
     "Clears the pool's error counters (cairn pool clear)."},
    {"PATCH", "/pools/{name}/properties", "pool_set", "name", NULL, BODY_PROPS, true, 200, NULL,
     "Sets pool properties: a JSON object of names and values (cairn pool set)."},
    {"POST", "/pools/{name}/vdevs", "pool_add", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Adds vdevs, log vdevs (\"root\": VdevSpec), spares (\"spares\": [...]) or cache devices "
     "(\"cache_devices\": [...]); \"dry_run\": true checks only (cairn pool add)."},
    {"POST", "/pools/{name}/remove", "pool_remove", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Removes a log vdev, cache device or spare: {\"device\": ...} (cairn pool remove)."},
    {"POST", "/pools/{name}/offline", "pool_offline", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Takes a disk offline: {\"device\": ..., \"temporary\": false} (cairn pool offline)."},
    {"POST", "/pools/{name}/online", "pool_online", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Brings a disk back, resilvering what it missed: {\"device\": ..., \"expand\": false} "
     "(cairn pool online)."},
    {"POST", "/pools/{name}/replace", "pool_replace", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Replaces a disk: {\"old_device\": ..., \"new_device\": ..., \"sequential\": false} "
     "(cairn pool replace)."},
    {"POST", "/pools/{name}/attach", "pool_attach", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Mirrors a disk onto a new one: {\"device\": ..., \"new_device\": ...} (cairn pool "
     "attach)."},
    {"POST", "/pools/{name}/detach", "pool_detach", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Detaches a disk from its mirror: {\"device\": ...} (cairn pool detach)."},
    {"GET", "/pools/{name}/events", "pool_events", "name", NULL, BODY_NONE, false, 200, "events",
     "The pool's events after sequence number ?after=N, waiting up to ?wait_ms (at most 5000) "
     "for one (cairn pool events)."},
    {"GET", "/pools/{name}/history", "pool_history", "name", NULL, BODY_NONE, false, 200,
     "pool_history", "The commands that changed the pool (cairn pool history)."},
    {"GET", "/pools/{name}", "pool_status", "name", "{\"verbose\":true}", BODY_NONE, false, 200,
     "pool_status", "Status of the pool: vdev tree, errors, scrub (cairn pool status -v)."},
    {"DELETE", "/pools/{name}", "pool_destroy", "name", NULL, BODY_NONE, true, 200, NULL,
     "Destroys the pool (cairn pool destroy)."},
    {"GET", "/datasets", "ds_list", NULL, "{\"recursive\":true}", BODY_NONE, false, 200, "datasets",
     "Filesystems and volumes (cairn list -r)."},
    {"POST", "/datasets", "ds_create", NULL, NULL, BODY_FIELDS, true, 201, NULL,
     "Creates a filesystem or volume (cairn create)."},
    {"POST", "/datasets/{name}/rename", "ds_rename", "old_name", NULL, BODY_FIELDS, true, 200, NULL,
     "Renames the dataset: {\"new_name\": ...} (cairn rename)."},
    {"POST", "/datasets/{name}/inherit", "ds_inherit", "name", NULL, BODY_FIELDS, true, 200, NULL,
     "Lets a property be inherited again: {\"prop\": ...} (cairn inherit)."},
    {"GET", "/datasets/{name}", "ds_get", "names", "{\"props\":[\"all\"]}", BODY_NONE, false, 200,
     "props", "Properties of the dataset (cairn get all DATASET)."},
    {"PATCH", "/datasets/{name}", "ds_set", "name", NULL, BODY_PROPS, true, 200, NULL,
     "Sets properties: a JSON object of property names and values (cairn set)."},
    {"DELETE", "/datasets/{name}", "ds_destroy", "name", NULL, BODY_NONE, true, 200, NULL,
     "Destroys the dataset; ?recursive=true for its children too (cairn destroy)."},
    {"GET", "/snapshots", "ds_list", NULL, "{\"recursive\":true,\"types\":8}", BODY_NONE, false,
     200, "datasets", "Snapshots (cairn list -t snapshot)."},
    {"POST", "/snapshots", "ds_snapshot", NULL, NULL, BODY_FIELDS, true, 201, NULL,
     "Takes a snapshot: {\"name\": \"POOL/FS@SNAP\", \"recursive\": false} (cairn snapshot)."},
    {"POST", "/snapshots/{name}/rollback", "ds_rollback", "name", NULL, BODY_FIELDS, true, 200,
     NULL,
     "Rolls its dataset back to the snapshot; {\"destroy_newer\": true} as -r (cairn rollback)."},
    {"POST", "/snapshots/{name}/clone", "ds_clone", "snapshot", NULL, BODY_FIELDS, true, 201, NULL,
     "Clones the snapshot: {\"name\": \"POOL/NEW\"} (cairn clone)."},
    {"DELETE", "/snapshots/{name}", "ds_destroy", "name", NULL, BODY_NONE, true, 200, NULL,
     "Destroys the snapshot (cairn destroy)."},
    {"GET", "/shares", "share_list", NULL, NULL, BODY_NONE, false, 200, "shares",
     "What the NFS server exports (cairn share list)."},
    {"GET", "/iscsi/targets", "iscsi_list", NULL, NULL, BODY_NONE, false, 200, "iscsi_targets",
     "iSCSI targets with their LUNs, ACLs and sessions (cairn iscsi list)."},
    {"POST", "/iscsi/targets", "iscsi_target_create", NULL, NULL, BODY_FIELDS, true, 201, NULL,
     "Creates a target: {\"name\": IQN} (cairn iscsi target create)."},
    {"POST", "/iscsi/targets/{name}/luns", "iscsi_lun_add", "target", NULL, BODY_FIELDS, true, 201,
     NULL, "Adds a LUN: {\"volume\": ..., \"lun\": N, \"lun_given\": true} (cairn iscsi lun add)."},
    {"DELETE", "/iscsi/targets/{name}/luns", "iscsi_lun_remove", "target", NULL, BODY_NONE, true,
     200, NULL, "Removes LUN ?lun=N from the target (cairn iscsi lun remove)."},
    {"POST", "/iscsi/targets/{name}/chap", "iscsi_chap", "target", NULL, BODY_FIELDS, true, 200,
     NULL,
     "Sets CHAP: {\"user\", \"secret\"} and for mutual CHAP {\"mutual_user\", "
     "\"mutual_secret\"}; {\"clear\": true} turns it off (cairn iscsi chap)."},
    {"POST", "/iscsi/targets/{name}/acl", "iscsi_acl", "target", NULL, BODY_FIELDS, true, 200, NULL,
     "Allows an initiator: {\"initiator\": IQN}; with \"remove\": true disallows it (cairn iscsi "
     "acl)."},
    {"GET", "/iscsi/targets/{name}", "iscsi_list", "name", NULL, BODY_NONE, false, 200,
     "iscsi_targets", "One iSCSI target (cairn iscsi list IQN)."},
    {"DELETE", "/iscsi/targets/{name}", "iscsi_target_destroy", "name", NULL, BODY_NONE, true, 200,
     NULL, "Destroys the target; ?force=true removes its LUNs first (cairn iscsi target destroy)."},
    {"GET", "/arc", "arc_stat", NULL, NULL, BODY_NONE, false, 200, "arc_stats",
     "ARC and L2ARC statistics (cairn arcstat)."},
    {"GET", "/analytics", "analytics_list", NULL, NULL, BODY_NONE, false, 200, "analytics_stats",
     "Statistics, their drill-downs and which are recording (cairn analytics list)."},
    {"POST", "/analytics/{name}/enable", "analytics_enable", "stat", NULL, BODY_FIELDS, true, 200,
     "analytics_stats",
     "Turns the statistic on, or with {\"by\": \"file\"} one of its drill-downs (cairn "
     "analytics enable)."},
    {"POST", "/analytics/{name}/disable", "analytics_disable", "stat", NULL, BODY_FIELDS, true,
     200, "analytics_stats",
     "Turns the statistic off, or with {\"by\": ...} one drill-down (cairn analytics disable)."},
    {"GET", "/analytics/{name}", "analytics_show", "stat", NULL, BODY_NONE, false, 200,
     "analytics",
     "The statistic over the last ?window= seconds (60), ?by= a drill-down, ?resolution= "
     "second|minute|hour, ?samples=true for each sample (cairn analytics show)."},
};

/* ------------------------------------------------------------- replies */

void cairnd_http_reply_json(http_reply_t *out, int status, json_t *j)
{
    out->status = status;
    out->body = json_dumps(j, JSON_COMPACT);
    out->len = out->body ? strlen(out->body) : 0;
    json_decref(j);
    if (!out->body) {
        out->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        out->body = strdup("{\"error\":\"out of memory\"}");
        out->len = out->body ? strlen(out->body) : 0;
    }
}

void cairnd_http_error(http_reply_t *out, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cairnd_http_reply_json(out, status, json_pack("{s:s}", "error", msg));
}

/* The HTTP status of a daemon error (a negative errno). */
static int errno_status(int rc)
{
    switch (-rc) {
    case ENOENT:
    case ENXIO:
    case ENODEV: return MHD_HTTP_NOT_FOUND;
    case EEXIST:
    case EBUSY:
    case ENOTEMPTY:
    case EROFS:
    case EALREADY: return MHD_HTTP_CONFLICT;
    case EINVAL:
    case ERANGE:
    case ENAMETOOLONG:
    case EDOM:
    case EBADMSG:
    case E2BIG: return MHD_HTTP_BAD_REQUEST;
    case EPERM:
    case EACCES: return MHD_HTTP_FORBIDDEN;
    case ENOSPC:
    case EDQUOT: return MHD_HTTP_INSUFFICIENT_STORAGE;
    case EOPNOTSUPP: return MHD_HTTP_NOT_IMPLEMENTED;
    case EAGAIN: return MHD_HTTP_SERVICE_UNAVAILABLE;
    default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

/* ------------------------------------------------------------- routing */

/* Whether url (under the prefix) matches r's path; name gets {name}. */
static bool path_matches(const route_t *r, const char *url, char *name, size_t namelen)
{
    const char *brace = strchr(r->path, '{');
    if (!brace) return !strcmp(url, r->path);
    size_t pre = (size_t)(brace - r->path);
    const char *suffix = strchr(brace, '}') + 1;
    size_t ulen = strlen(url), slen = strlen(suffix);
    if (strncmp(url, r->path, pre) || ulen <= pre + slen || strcmp(url + ulen - slen, suffix))
        return false;
    size_t n = ulen - pre - slen;
    if (n >= namelen) return false;
    memcpy(name, url + pre, n);
    name[n] = '\0';
    return true;
}

static const ProtobufCFieldDescriptor *request_field(const char *member)
{
    return protobuf_c_message_descriptor_get_field_by_name(&cairn__mgmt__request__descriptor,
                                                           member);
}

static const ProtobufCMessageDescriptor *request_message(const route_t *r)
{
    return request_field(r->request)->descriptor;
}

typedef struct query_ctx {
    json_t *obj;
    const ProtobufCMessageDescriptor *desc;
} query_ctx_t;

/* A query argument as JSON: a bool field takes true/false, anything else the
 * text (the bridge reads numbers from decimal strings). */
static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    query_ctx_t *q = cls;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(q->desc, key);
    if (f && f->type == PROTOBUF_C_TYPE_BOOL && value &&
        (!strcmp(value, "true") || !strcmp(value, "false")))
        json_object_set_new(q->obj, key, json_boolean(!strcmp(value, "true")));
    else json_object_set_new(q->obj, key, json_string(value ? value : ""));
    return MHD_YES;
}

/* The request's fields as JSON, from the route, query, body and path. */
static json_t *request_fields(const route_t *r, const cairnd_http_api_t *req, const char *name,
                              const json_t *body)
{
    const ProtobufCMessageDescriptor *desc = request_message(r);
    json_t *obj = r->fixed ? json_loads(r->fixed, 0, NULL) : json_object();
    query_ctx_t q = {obj, desc};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    if (body && r->body == BODY_FIELDS) json_object_update(obj, (json_t *)body);
    if (r->name_field) {
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(desc, r->name_field);
        json_t *v = json_string(name);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) v = json_pack("[o]", v);
        json_object_set_new(obj, r->name_field, v);
    }
    return obj;
}

/* Runs one Request given as the JSON of its member's fields. On success returns
 * the result's JSON (an object, {} without one) with a "warning" when the
 * daemon gave one; otherwise fills out with the error and returns NULL. A
 * change is recorded in its pool's history as the CLI's are: the method, the
 * resource (and the property a PATCH sets), and the token and address. */
static json_t *dispatch(const char *member, json_t *fields, const cairnd_http_api_t *req,
                        http_reply_t *out)
{
    json_t *wrapped = json_pack("{s:O}", member, fields);
    Cairn__Mgmt__Request *mreq = NULL;
    char err[512];
    int rc = mgmt_json_to_message(wrapped, &cairn__mgmt__request__descriptor,
                                  (ProtobufCMessage **)&mreq, err, sizeof err);
    json_decref(wrapped);
    if (rc) {
        cairnd_http_error(out, MHD_HTTP_BAD_REQUEST, "%s", err);
        return NULL;
    }
    Cairn__Mgmt__Response resp = CAIRN__MGMT__RESPONSE__INIT;
    cairnd_arena_t arena = {0};
    char line[1024], info[256];
    const char *prop = json_string_value(json_object_get(fields, "prop"));
    const char *value = json_string_value(json_object_get(fields, "value"));
    snprintf(line, sizeof line, "api: %s %s%s%s%s%s", req->method, req->url, prop ? " " : "",
             prop ? prop : "", prop ? "=" : "", prop && value ? value : "");
    snprintf(info, sizeof info, "%s %s from %s", req->via ? req->via : "token",
             req->who ? req->who->name : "-", req->addr ? req->addr : "-");
    char *had_line = mreq->history_line, *had_info = mreq->history_info;
    mreq->history_line = line;
    mreq->history_info = info;
    cairnd_handle_request(mreq, &resp, &arena);
    mreq->history_line = had_line; /* the message frees what it was given */
    mreq->history_info = had_info;
    json_t *result = NULL;
    if (resp.error) {
        cairnd_http_error(out, errno_status(resp.error), "%s",
                          resp.message && *resp.message ? resp.message : strerror(-resp.error));
    } else {
        json_t *all = mgmt_json_from_message(&resp.base);
        const char *key;
        json_t *v;
        json_object_foreach(all, key, v)
        {
            if (json_is_object(v)) {
                result = json_incref(v);
                break;
            }
        }
        if (!result) result = json_object();
        if (resp.warning && *resp.warning)
            json_object_set_new(result, "warning", json_string(resp.warning));
        json_decref(all);
    }
    cairnd_arena_free(&arena);
    protobuf_c_message_free_unpacked(&mreq->base, NULL);
    return result;
}

/* PATCH: each property of the body, as `cairn set PROP=VALUE NAME` would. */
static json_t *dispatch_props(const route_t *r, json_t *fields, const json_t *body,
                              const cairnd_http_api_t *req, http_reply_t *out)
{
    const char *prop;
    json_t *v;
    json_t *result = NULL;
    if (!json_object_size(body)) {
        cairnd_http_error(out, MHD_HTTP_BAD_REQUEST, "want a JSON object of properties to set");
        return NULL;
    }
    json_object_foreach((json_t *)body, prop, v)
    {
        json_t *value = json_is_string(v) ? json_incref(v)
                        : json_is_integer(v)
                            ? json_sprintf("%lld", (long long)json_integer_value(v))
                        : json_is_boolean(v) ? json_string(json_is_true(v) ? "on" : "off")
                                             : NULL;
        if (!value) {
            json_decref(result);
            cairnd_http_error(out, MHD_HTTP_BAD_REQUEST,
                              "property '%s': want a string, integer or boolean", prop);
            return NULL;
        }
        json_object_set_new(fields, "prop", json_string(prop));
        json_object_set_new(fields, "value", value);
        json_decref(result);
        if (!(result = dispatch(r->request, fields, req, out))) return NULL;
    }
    return result;
}

static json_t *openapi_document(void);

/* What a route needs to run away from its HTTP request (a job, http_jobs.c). */
typedef struct route_job {
    const route_t *route;
    json_t *fields, *body;
    mgmt_token_info_t who;
    char method[8], url[MGMT_PATH_MAX + 64], via[8], addr[64];
} route_job_t;

static void run_dispatch(const route_t *r, json_t *fields, const json_t *body,
                         const cairnd_http_api_t *req, http_reply_t *out)
{
    json_t *result = r->body == BODY_PROPS
                         ? dispatch_props(r, fields, body ? body : json_object(), req, out)
                         : dispatch(r->request, fields, req, out);
    if (result) cairnd_http_reply_json(out, r->ok_status, result);
}

static void route_job_run(void *arg, http_reply_t *out)
{
    route_job_t *j = arg;
    cairnd_http_api_t req = {.method = j->method, .url = j->url, .who = &j->who, .via = j->via,
                             .addr = j->addr, .authenticated = true};
    run_dispatch(j->route, j->fields, j->body, &req, out);
}

static void route_job_free(void *arg)
{
    route_job_t *j = arg;
    json_decref(j->fields);
    json_decref(j->body);
    free(j);
}

/* `Prefer: respond-async` on a change: the route runs as a job (202 now). */
static void start_route_job(const route_t *r, json_t *fields, json_t *body,
                            const cairnd_http_api_t *req, http_reply_t *out)
{
    route_job_t *j = calloc(1, sizeof *j);
    if (!j) {
        cairnd_http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return;
    }
    j->route = r;
    j->fields = json_incref(fields);
    j->body = json_incref(body);
    j->who = *req->who;
    cairn_strlcpy(j->method, req->method, sizeof j->method);
    cairn_strlcpy(j->url, req->url, sizeof j->url);
    cairn_strlcpy(j->via, req->via, sizeof j->via);
    cairn_strlcpy(j->addr, req->addr, sizeof j->addr);
    cairnd_job_start(r->request, req, route_job_run, j, route_job_free, out);
}

static void run_route(const route_t *r, const cairnd_http_api_t *req, const char *name,
                      http_reply_t *out)
{
    json_t *body = NULL;
    if (r->body != BODY_NONE && req->body_len) {
        json_error_t je;
        body = json_loadb(req->body, req->body_len, 0, &je);
        if (!json_is_object(body)) {
            json_decref(body);
            cairnd_http_error(out, MHD_HTTP_BAD_REQUEST, "request body is not a JSON object%s%s",
                              je.text[0] ? ": " : "", je.text);
            return;
        }
    } else if (req->body_len) {
        cairnd_http_error(out, MHD_HTTP_BAD_REQUEST, "%s %s takes no request body", r->method,
                          r->path);
        return;
    }
    json_t *fields = request_fields(r, req, name, body);
    if (r->changes && req->respond_async) start_route_job(r, fields, body, req, out);
    else run_dispatch(r, fields, body, req, out);
    json_decref(fields);
    json_decref(body);
}

void cairnd_http_api(const cairnd_http_api_t *req, http_reply_t *out)
{
    const char *url = req->url;
    size_t plen = strlen(CAIRND_API_PREFIX);
    if (strncmp(url, CAIRND_API_PREFIX, plen) || (url[plen] != '/' && url[plen])) {
        cairnd_http_error(out, MHD_HTTP_NOT_FOUND, "no such resource: %s (the API is under %s)",
                          url, CAIRND_API_PREFIX);
        return;
    }
    url += plen;
    if (!strcmp(url, "/openapi.json")) {
        if (strcmp(req->method, "GET"))
            cairnd_http_error(out, MHD_HTTP_METHOD_NOT_ALLOWED, "%s only answers GET", req->url);
        else cairnd_http_reply_json(out, MHD_HTTP_OK, openapi_document());
        return;
    }
    if (!strcmp(url, "/jobs") || !strncmp(url, "/jobs/", 6)) {
        if (strcmp(req->method, "GET"))
            cairnd_http_error(out, MHD_HTTP_METHOD_NOT_ALLOWED, "%s only answers GET", req->url);
        else cairnd_jobs_get(url[5] ? url + 6 : NULL, out);
        return;
    }
    char name[MGMT_PATH_MAX];
    const route_t *found = NULL;
    bool path_known = false;
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(g_routes) && !found; i++) {
        if (!path_matches(&g_routes[i], url, name, sizeof name)) continue;
        path_known = true;
        if (!strcmp(g_routes[i].method, req->method)) found = &g_routes[i];
    }
    if (!found) {
        if (path_known)
            cairnd_http_error(out, MHD_HTTP_METHOD_NOT_ALLOWED, "%s does not answer %s", req->url,
                              req->method);
        else cairnd_http_error(out, MHD_HTTP_NOT_FOUND, "no such resource: %s", req->url);
        return;
    }
    if (found->changes && req->who->role != MGMT_ROLE_ADMIN) {
        log_info(SUB, "%s: %s '%s' (read-only) refused %s %s", req->addr, req->via, req->who->name,
                 req->method, req->url);
        cairnd_http_error(out, MHD_HTTP_FORBIDDEN,
                          "%s '%s' is read-only; %s %s needs an admin role", req->via, req->who->name,
                          req->method, req->url);
        return;
    }
    run_route(found, req, name, out);
    if (found->changes) /* the audit trail */
        log_info(SUB, "%s: %s '%s' %s %s -> %d%s%.*s", req->addr, req->via, req->who->name, req->method,
                 req->url, out->status, out->status >= 300 ? " " : "",
                 out->status >= 300 ? (int)out->len : 0, out->body ? out->body : "");
}

/* ------------------------------------------------------------- OpenAPI */

static json_t *schema_ref(const char *name)
{
    char ref[256];
    snprintf(ref, sizeof ref, "#/components/schemas/%s", name);
    return json_pack("{s:s}", "$ref", ref);
}

static void add_schema(json_t *schemas, const ProtobufCMessageDescriptor *d);

static json_t *field_schema(json_t *schemas, const ProtobufCFieldDescriptor *f)
{
    json_t *s;
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL: s = json_pack("{s:s}", "type", "boolean"); break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES: s = json_pack("{s:s}", "type", "string"); break;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: s = json_pack("{s:s}", "type", "number"); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: /* above 2^63-1 as a decimal string (mgmt_json.h) */
        s = json_pack("{s:[{s:s,s:i},{s:s,s:s}]}", "oneOf", "type", "integer", "minimum", 0, "type",
                      "string", "pattern", "^[0-9]+$");
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        json_t *names = json_array();
        for (unsigned i = 0; i < ed->n_values; i++)
            json_array_append_new(names, json_string(ed->values[i].name));
        s = json_pack("{s:s,s:o}", "type", "string", "enum", names);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor *md = f->descriptor;
        add_schema(schemas, md);
        s = schema_ref(md->short_name);
        break;
    }
    default: s = json_pack("{s:s}", "type", "integer"); break;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        s = json_pack("{s:s,s:o}", "type", "array", "items", s);
    return s;
}

/* components/schemas/<Message>: an object of its fields, recursively. */
static void add_schema(json_t *schemas, const ProtobufCMessageDescriptor *d)
{
    if (json_object_get(schemas, d->short_name)) return;
    json_t *props = json_object();
    json_object_set_new(schemas, d->short_name,
                        json_pack("{s:s,s:o,s:b}", "type", "object", "properties", props,
                                  "additionalProperties", 0));
    for (unsigned i = 0; i < d->n_fields; i++)
        json_object_set_new(props, d->fields[i].name, field_schema(schemas, &d->fields[i]));
}

static json_t *response_schema(json_t *schemas, const route_t *r)
{
    if (!r->result) return json_pack("{s:s}", "type", "object");
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
        &cairn__mgmt__response__descriptor, r->result);
    return field_schema(schemas, f);
}

static json_t *operation(json_t *schemas, const route_t *r)
{
    const ProtobufCMessageDescriptor *md = request_message(r);
    json_t *params = json_array();
    if (r->name_field)
        json_array_append_new(params, json_pack("{s:s,s:s,s:b,s:{s:s}}", "name", "name", "in",
                                                "path", "required", 1, "schema", "type", "string"));
    if (r->body == BODY_NONE)
        for (unsigned i = 0; i < md->n_fields; i++) {
            const ProtobufCFieldDescriptor *f = &md->fields[i];
            if ((r->name_field && !strcmp(f->name, r->name_field)) ||
                f->type == PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED)
                continue;
            json_array_append_new(params,
                                  json_pack("{s:s,s:s,s:b,s:o}", "name", f->name, "in", "query",
                                            "required", 0, "schema", field_schema(schemas, f)));
        }
    char code[8];
    snprintf(code, sizeof code, "%d", r->ok_status);
    json_t *err = json_pack("{s:s,s:{s:{s:o}}}", "description", "the CLI's one-line error message",
                            "content", "application/json", "schema", schema_ref("Error"));
    json_t *responses = json_pack("{s:{s:s,s:{s:{s:o}}}}", code, "description", "done", "content",
                                  "application/json", "schema", response_schema(schemas, r));
    json_object_set(responses, "401", err);
    if (r->changes) json_object_set(responses, "403", err);
    json_object_set_new(responses, "default", err);
    json_t *op = json_pack("{s:s,s:s,s:o,s:o}", "operationId", r->request, "summary", r->summary,
                           "parameters", params, "responses", responses);
    if (r->body == BODY_FIELDS) {
        add_schema(schemas, md);
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b,s:{s:{s:o}}}", "required", 0, "content",
                                      "application/json", "schema", schema_ref(md->short_name)));
    } else if (r->body == BODY_PROPS) {
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b,s:{s:{s:{s:s,s:{s:s}}}}}", "required", 1, "content",
                                      "application/json", "schema", "type", "object",
                                      "additionalProperties", "type", "string"));
    }
    return op;
}

/* GET /jobs and /jobs/{id}: hand-written, as they answer from http_jobs.c. */
static json_t *jobs_openapi(void)
{
    json_t *job = json_pack(
        "{s:s,s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},"
        "s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s}}}",
        "type", "object", "properties", "id", "type", "string", "kind", "type", "string",
        "operation", "type", "string", "method", "type", "string", "resource", "type", "string",
        "user", "type", "string", "state", "type", "string", "started", "type", "integer",
        "ended", "type", "integer", "status", "type", "integer", "result", "type", "object",
        "error", "type", "string", "progress", "type", "number", "examined", "type", "integer",
        "to_examine", "type", "integer", "repaired", "type", "integer", "eta_seconds", "type",
        "integer");
    json_t *err = json_pack("{s:s,s:{s:{s:o}}}", "description", "a one-line error", "content",
                            "application/json", "schema", schema_ref("Error"));
    json_t *list = json_pack(
        "{s:{s:s,s:s,s:[],s:{s:{s:s,s:{s:{s:{s:s,s:{s:{s:s,s:O}}}}}},s:O}}}", "get",
        "operationId", "job_list", "summary",
        "API jobs (changes sent with Prefer: respond-async, answered 202 with the job) and each "
        "pool's scrub, resilver or rebuild, with progress.",
        "parameters", "responses", "200", "description", "the jobs", "content",
        "application/json", "schema", "type", "object", "properties", "jobs", "type", "array",
        "items", job, "default", err);
    json_t *one = json_pack(
        "{s:{s:s,s:s,s:[{s:s,s:s,s:b,s:{s:s}}],s:{s:{s:s,s:{s:{s:O}}},s:O}}}", "get",
        "operationId", "job_get", "summary", "One job: job-N or scan-POOL / rebuild-POOL.",
        "parameters", "name", "id", "in", "path", "required", 1, "schema", "type", "string",
        "responses", "200", "description", "the job", "content", "application/json", "schema",
        job, "default", err);
    json_decref(job);
    json_decref(err);
    return json_pack("{s:o,s:o}", "/jobs", list, "/jobs/{id}", one);
}

static json_t *openapi_document(void)
{
    json_t *schemas = json_object();
    json_object_set_new(schemas, "Error",
                        json_pack("{s:s,s:[s],s:{s:{s:s}}}", "type", "object", "required", "error",
                                  "properties", "error", "type", "string"));
    json_t *paths = cairnd_http_sessions_openapi();
    json_t *jobs = jobs_openapi();
    json_object_update(paths, jobs);
    json_decref(jobs);
    json_object_set_new(paths, "/counters", cairnd_counters_openapi());
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(g_routes); i++) {
        const route_t *r = &g_routes[i];
        json_t *item = json_object_get(paths, r->path);
        if (!item) json_object_set_new(paths, r->path, item = json_object());
        char method[16];
        size_t k = 0;
        for (; r->method[k] && k < sizeof method - 1; k++) method[k] = (char)(r->method[k] | 0x20);
        method[k] = '\0';
        json_object_set_new(item, method, operation(schemas, r));
    }
    return json_pack(
        "{s:s,s:{s:s,s:s,s:s},s:[{s:s}],s:[{s:[]}],s:o,s:{s:o,s:{s:{s:s,s:s}}}}", "openapi",
        "3.0.3", "info", "title", "Cairn management API", "version", CAIRN_VERSION, "description",
        "Each operation sends the Request the cairn CLI sends for the same "
        "verb. Authenticate with an API token (cairn token create) or a "
        "session token from POST /sessions (cairn user add): "
        "Authorization: Bearer TOKEN, or the cairn_session cookie a log-in sets. "
        "Prometheus metrics: GET /metrics.",
        "servers", "url", CAIRND_API_PREFIX, "security", "bearer", "paths", paths, "components",
        "schemas", schemas, "securitySchemes", "bearer", "type", "http", "scheme", "bearer");
}
