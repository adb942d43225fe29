/*
 * Jobs: long operations of the REST API with their progress.
 *
 * Two kinds, one list (GET /api/v1/jobs, GET /api/v1/jobs/{id}):
 *
 * - API jobs. Any request that changes something may ask to run in the
 *   background with `Prefer: respond-async` (RFC 7240): it is answered at once
 *   with 202 Accepted, a Location of /api/v1/jobs/job-N and the job, and runs on
 *   a thread of its own through the same code as a synchronous request (the
 *   route's protobuf Request, cairnd_handle_request). A destroy of a big
 *   dataset, an export, an import that replays logs then no longer hold a
 *   client's connection (or one of the HTTP server's two threads) for minutes.
 *   When it ends the job keeps the HTTP status and the JSON the request would
 *   have answered, result or one-line error. At most JOB_SLOTS are kept; a new
 *   job evicts the oldest finished one, and when every slot runs, 503.
 *
 * - Scans: each pool's scrub, resilver or sequential rebuild, as `pool status`
 *   reports it (scan-POOL, rebuild-POOL), with bytes examined of the total,
 *   the fraction done, and an ETA from this run's rate. They are read from the
 *   pools at each request, not stored: the pool is the truth, and a scan that
 *   outlives a restart still shows.
 *
 * Shutdown joins the running API jobs before the pools close, so a job never
 * touches a pool that is going away.
 */
#include "cairnd.h"

#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SUB "http"
#define JOB_SLOTS 64

typedef enum job_state { JOB_FREE, JOB_RUNNING, JOB_DONE } job_state_t;

typedef struct job {
    job_state_t state;
    uint64_t id;
    char operation[48], method[8], resource[MGMT_PATH_MAX + 64], who[MGMT_TOKEN_NAME_MAX + 8];
    time_t started, ended;
    pthread_t thread;
    bool joined;
    cairnd_job_fn fn;
    void *arg;
    void (*free_arg)(void *);
    http_reply_t reply; /* when done */
} job_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static job_t g_jobs[JOB_SLOTS];
static uint64_t g_next_id = 1;
static bool g_stopping;

static void *job_thread(void *p)
{
    job_t *j = p;
    http_reply_t reply = {0};
    j->fn(j->arg, &reply);
    if (j->free_arg) j->free_arg(j->arg);
    pthread_mutex_lock(&g_lock);
    j->reply = reply;
    j->ended = time(NULL);
    j->state = JOB_DONE;
    pthread_mutex_unlock(&g_lock);
    log_info(SUB, "job-%llu (%s %s) ended: %d", (unsigned long long)j->id, j->method, j->resource,
             reply.status);
    return NULL;
}

static json_t *job_json(const job_t *j)
{
    char id[32];
    snprintf(id, sizeof id, "job-%llu", (unsigned long long)j->id);
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "id", id, "kind", "api", "operation",
                          j->operation, "method", j->method, "resource", j->resource, "user",
                          j->who, "started", (json_int_t)j->started);
    if (j->state == JOB_RUNNING) {
        json_object_set_new(o, "state", json_string("running"));
        return o;
    }
    bool ok = j->reply.status >= 200 && j->reply.status < 300;
    json_object_set_new(o, "state", json_string(ok ? "succeeded" : "failed"));
    json_object_set_new(o, "ended", json_integer((json_int_t)j->ended));
    json_object_set_new(o, "status", json_integer(j->reply.status));
    json_t *answer = j->reply.body ? json_loadb(j->reply.body, j->reply.len, 0, NULL) : NULL;
    if (answer && !ok) {
        json_object_set(o, "error", json_object_get(answer, "error"));
        json_decref(answer);
    } else if (answer) {
        json_object_set_new(o, "result", answer);
    }
    return o;
}

static void free_slot(job_t *j)
{
    free(j->reply.body);
    memset(j, 0, sizeof *j);
}

/* A free slot, else the one finished longest ago (its thread joined); NULL when all run. */
static job_t *take_slot(void)
{
    job_t *oldest = NULL;
    for (size_t i = 0; i < JOB_SLOTS; i++) {
        job_t *j = &g_jobs[i];
        if (j->state == JOB_FREE) return j;
        if (j->state == JOB_DONE && (!oldest || j->ended < oldest->ended)) oldest = j;
    }
    if (oldest) {
        if (!oldest->joined) pthread_join(oldest->thread, NULL);
        free_slot(oldest);
    }
    return oldest;
}

void cairnd_job_start(const char *operation, const cairnd_http_api_t *req, cairnd_job_fn fn,
                      void *arg, void (*free_arg)(void *), http_reply_t *out)
{
    pthread_mutex_lock(&g_lock);
    job_t *j = g_stopping ? NULL : take_slot();
    if (!j) {
        pthread_mutex_unlock(&g_lock);
        if (free_arg) free_arg(arg);
        cairnd_http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "%d jobs are running; wait for one to end", JOB_SLOTS);
        return;
    }
    *j = (job_t){.state = JOB_RUNNING, .id = g_next_id++, .started = time(NULL), .fn = fn,
                 .arg = arg, .free_arg = free_arg};
    cairn_strlcpy(j->operation, operation, sizeof j->operation);
    cairn_strlcpy(j->method, req->method, sizeof j->method);
    cairn_strlcpy(j->resource, req->url, sizeof j->resource);
    snprintf(j->who, sizeof j->who, "%s %s", req->via, req->who->name);
    if (pthread_create(&j->thread, NULL, job_thread, j)) {
        free_slot(j);
        pthread_mutex_unlock(&g_lock);
        if (free_arg) free_arg(arg);
        cairnd_http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE, "cannot start a job thread");
        return;
    }
    json_t *body = job_json(j);
    snprintf(out->location, sizeof out->location, CAIRND_API_PREFIX "/jobs/job-%llu",
             (unsigned long long)j->id);
    pthread_mutex_unlock(&g_lock);
    log_info(SUB, "%s: job-%llu started: %s %s", req->addr, (unsigned long long)j->id,
             req->method, req->url);
    cairnd_http_reply_json(out, MHD_HTTP_ACCEPTED, body);
}

/* ------------------------------------------------------------------ scans */

static json_t *scan_json(const char *pool, const char *prefix, const Cairn__Mgmt__ScrubStatus *s)
{
    static const char *const ops[] = {"scrub", "resilver"};
    static const char *const states[] = {"none", "running", "succeeded", "canceled"};
    if (!s || s->state == CAIRN__MGMT__SCRUB_STATUS__STATE__NONE) return NULL;
    char id[MGMT_PATH_MAX + 16];
    snprintf(id, sizeof id, "%s-%s", prefix, pool);
    const char *op = !strcmp(prefix, "rebuild") ? "rebuild" : ops[s->func ? 1 : 0];
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I}", "id", id, "kind", "scan",
                          "operation", op, "resource", pool, "state", states[s->state & 3],
                          "started", (json_int_t)s->start_time, "examined",
                          (json_int_t)s->examined, "to_examine", (json_int_t)s->to_examine,
                          "repaired", (json_int_t)s->repaired);
    double done = s->to_examine ? (double)s->examined / (double)s->to_examine : 0;
    if (s->state != CAIRN__MGMT__SCRUB_STATUS__STATE__SCANNING) done = 1;
    json_object_set_new(o, "progress", json_real(done > 1 ? 1 : done));
    if (s->state != CAIRN__MGMT__SCRUB_STATUS__STATE__SCANNING) {
        json_object_set_new(o, "ended", json_integer((json_int_t)s->end_time));
    } else if (s->now > s->run_start && s->examined > s->run_examined &&
               s->to_examine > s->examined) {
        double rate = (double)(s->examined - s->run_examined) / (double)(s->now - s->run_start);
        json_object_set_new(o, "eta_seconds",
                            json_integer((json_int_t)((double)(s->to_examine - s->examined) / rate)));
    }
    return o;
}

/* Appends every pool's scan (and finished rebuild) to list. */
static void add_scans(json_t *list)
{
    Cairn__Mgmt__PoolStatus ps = CAIRN__MGMT__POOL_STATUS__INIT;
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_POOL_STATUS;
    req.pool_status = &ps;
    Cairn__Mgmt__Response resp = CAIRN__MGMT__RESPONSE__INIT;
    cairnd_arena_t arena = {0};
    cairnd_handle_request(&req, &resp, &arena);
    if (!resp.error && resp.result_case == CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS)
        for (size_t i = 0; i < resp.pool_status->n_pools; i++) {
            const Cairn__Mgmt__PoolStatusResult *p = resp.pool_status->pools[i];
            json_t *scan = scan_json(p->name, "scan", p->scrub);
            json_t *rebuild = scan_json(p->name, "rebuild", p->rebuild);
            if (scan) json_array_append_new(list, scan);
            if (rebuild) json_array_append_new(list, rebuild);
        }
    cairnd_arena_free(&arena);
}

void cairnd_jobs_get(const char *id, http_reply_t *out)
{
    json_t *list = json_array();
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < JOB_SLOTS; i++)
        if (g_jobs[i].state != JOB_FREE) json_array_append_new(list, job_json(&g_jobs[i]));
    pthread_mutex_unlock(&g_lock);
    add_scans(list);
    if (!id) {
        cairnd_http_reply_json(out, MHD_HTTP_OK, json_pack("{s:o}", "jobs", list));
        return;
    }
    size_t k;
    json_t *job;
    json_array_foreach(list, k, job)
    {
        if (strcmp(json_string_value(json_object_get(job, "id")), id)) continue;
        json_incref(job);
        json_decref(list);
        cairnd_http_reply_json(out, MHD_HTTP_OK, job);
        return;
    }
    json_decref(list);
    cairnd_http_error(out, MHD_HTTP_NOT_FOUND, "no job '%s'", id);
}

void cairnd_jobs_stop(void)
{
    pthread_mutex_lock(&g_lock);
    g_stopping = true;
    pthread_mutex_unlock(&g_lock);
    for (size_t i = 0; i < JOB_SLOTS; i++) { /* no new job starts now */
        job_t *j = &g_jobs[i];
        if (j->state != JOB_FREE && !j->joined) {
            pthread_join(j->thread, NULL);
            j->joined = true;
        }
        if (j->state != JOB_FREE) free_slot(j);
    }
}
