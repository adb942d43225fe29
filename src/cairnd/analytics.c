/*
 * Analytics in cairnd: the sampler, the kept history and `cairn analytics`.
 *
 * The layers record into include/cairn/analytics.h's counters; cairnd owns
 * time. A sampler thread wakes at every wall-clock second, adds the CPU the
 * process used (getrusage) as cpu.usecs, collects the second's deltas and adds
 * them to the history (an hour of seconds, a day of minutes, and hours for
 * analytics_retention_days). The history lives in STATE_DIR/analytics.dat,
 * rewritten atomically every AN_SAVE_EVERY_S seconds, when a switch changes
 * and at shutdown, and loaded at start: so `show` after a restart still has
 * the past (less at most the last minute when the daemon was killed).
 *
 * Why the state directory and not a pool: the statistics are the system's,
 * not a pool's (they exist with no pool imported, and span pools), and writing
 * them into a pool would make txgs of their own on an idle pool and tie them
 * to that pool's import. The state directory already keeps what the daemon
 * must remember across restarts (the pool cache, tokens, cache devices).
 *
 * The requests (list, enable, disable, show) need no pool and never take the
 * pool table's lock: cairnd_handle_request answers them first.
 */
#include "cairnd.h"

#include <cairn/analytics.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUB "analytics"
#define AN_SAVE_EVERY_S 60

static struct {
    pthread_mutex_t lock; /* the history */
    an_history_t *h;
    char path[MGMT_PATH_MAX + 32];
    uint32_t retention_hours;
    pthread_t thread;
    bool running;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    bool stop;
    struct rusage ru; /* at the last sample */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .stop_lock = PTHREAD_MUTEX_INITIALIZER,
       .stop_cond = PTHREAD_COND_INITIALIZER};

/* -------------------------------------------------------------- storage */

static int save(void)
{
    uint8_t *buf;
    size_t len;
    pthread_mutex_lock(&g.lock);
    int rc = an_history_save(g.h, &buf, &len);
    pthread_mutex_unlock(&g.lock);
    if (rc) return rc;
    char tmp[sizeof g.path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", g.path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    rc = fd < 0 ? -errno : 0;
    for (size_t off = 0; !rc && off < len;) {
        ssize_t n = write(fd, buf + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) rc = n < 0 ? -errno : -EIO;
        else off += (size_t)n;
    }
    if (!rc && fsync(fd)) rc = -errno;
    if (fd >= 0) close(fd);
    if (!rc && rename(tmp, g.path)) rc = -errno;
    if (rc) {
        log_warn(SUB, "cannot save %s: %s", g.path, strerror(-rc));
        unlink(tmp);
    }
    free(buf);
    return rc;
}

static void load(void)
{
    FILE *f = fopen(g.path, "rb");
    if (!f) {
        if (errno != ENOENT) log_warn(SUB, "cannot read %s: %s", g.path, strerror(errno));
        return;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) buf = cairn_realloc(buf, cap = cap ? cap * 2 : 1 << 20);
        size_t n = fread(buf + len, 1, cap - len, f);
        if (!n) break;
        len += n;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed || an_history_load(g.h, buf, len, true)) {
        char bad[sizeof g.path + 8];
        snprintf(bad, sizeof bad, "%s.bad", g.path);
        log_warn(SUB, "%s is not a saved history: moved to %s, starting afresh", g.path, bad);
        rename(g.path, bad);
    } else {
        log_info(SUB, "history loaded from %s", g.path);
    }
    free(buf);
}

/* -------------------------------------------------------------- sampler */

static uint64_t tv_us(struct timeval tv) { return (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec; }

static void record_cpu(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return;
    uint64_t user = tv_us(ru.ru_utime) - tv_us(g.ru.ru_utime);
    uint64_t sys = tv_us(ru.ru_stime) - tv_us(g.ru.ru_stime);
    g.ru = ru;
    if (!an_stat_enabled(AN_CPU)) return;
    an_add_total(AN_CPU, user + sys);
    an_add(AN_CPU, AN_BY_MODE, 0, user, an_name_string, "user");
    an_add(AN_CPU, AN_BY_MODE, 1, sys, an_name_string, "system");
}

/* Sleeps until the next wall-clock second; false when asked to stop. */
static bool wait_next_second(int64_t *second)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct timespec until = {now.tv_sec + 1, 0};
    pthread_mutex_lock(&g.stop_lock);
    while (!g.stop) {
        int rc = pthread_cond_timedwait(&g.stop_cond, &g.stop_lock, &until);
        if (rc == ETIMEDOUT) break;
    }
    bool stop = g.stop;
    pthread_mutex_unlock(&g.stop_lock);
    *second = now.tv_sec; /* the second that just ended */
    return !stop;
}

/* Adds the second that began at t. */
static void sample(int64_t t)
{
    record_cpu();
    an_entry_t *e = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&g.lock);
    an_collect(g.h, &e, &n, &cap);
    if (an_history_add(g.h, t, e, n))
        log_debug(SUB, "second %lld dropped (the clock went back)", (long long)t);
    pthread_mutex_unlock(&g.lock);
    free(e);
}

static void *sampler(void *arg)
{
    (void)arg;
    getrusage(RUSAGE_SELF, &g.ru);
    int64_t t, last_save = 0;
    while (wait_next_second(&t)) {
        sample(t);
        if (t - last_save >= AN_SAVE_EVERY_S) {
            save();
            last_save = t;
        }
    }
    return NULL;
}

void cairnd_analytics_start(const cairnd_config_t *cfg)
{
    snprintf(g.path, sizeof g.path, "%s/analytics.dat", cfg->state_dir);
    g.retention_hours = cfg->analytics_retention_days * 24;
    g.h = an_history_create(g.retention_hours);
    an_entry_t *e = NULL; /* counters from before now (an import's reads) are not this second's */
    size_t n = 0, cap = 0;
    an_collect(g.h, &e, &n, &cap);
    free(e);
    load();
    if (!cfg->analytics) an_set_all(false);
    g.stop = false;
    g.running = !pthread_create(&g.thread, NULL, sampler, NULL);
    if (!g.running) log_warn(SUB, "no sampler thread: analytics keep no history");
}

void cairnd_analytics_stop(void)
{
    if (!g.h) return;
    if (g.running) {
        pthread_mutex_lock(&g.stop_lock);
        g.stop = true;
        pthread_cond_signal(&g.stop_cond);
        pthread_mutex_unlock(&g.stop_lock);
        pthread_join(g.thread, NULL);
        g.running = false;
    }
    save();
    an_history_free(g.h);
    g.h = NULL;
}

/* ------------------------------------------------------------- requests */

/* "op, client, share" for what s has, into buf. */
static void dims_of(an_stat_t s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < AN_NDIMS; d++)
        if (an_stat_has_dim(s, (an_dim_t)d) && used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                     an_dim_name((an_dim_t)d));
}

static void stat_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int s = 0; s < AN_NSTATS && used < len; s++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                 an_stat_name((an_stat_t)s));
}

/* Checks STAT and --by; -1 for dim when by is empty. Fills resp when bad. */
static bool parse_target(const char *stat, const char *by, int *s, int *d,
                         Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    char list[512];
    *s = an_stat_lookup(stat);
    if (*s < 0) {
        stat_names(list, sizeof list);
        cairnd_set_error(resp, a, -EINVAL, "no statistic named '%s' (there are: %s)",
                         stat ? stat : "", list);
        return false;
    }
    *d = -1;
    if (!by || !*by) return true;
    *d = an_dim_lookup(by);
    if (*d < 0 || !an_stat_has_dim((an_stat_t)*s, (an_dim_t)*d)) {
        dims_of((an_stat_t)*s, list, sizeof list);
        cairnd_set_error(resp, a, -EINVAL, "%s has no drill-down by '%s' (it has: %s)", stat, by,
                         list);
        return false;
    }
    return true;
}

static void do_list(Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    Cairn__Mgmt__AnalyticsStats *l = cairnd_arena_alloc(a, sizeof *l);
    cairn__mgmt__analytics_stats__init(l);
    l->stats = cairnd_arena_alloc(a, AN_NSTATS * sizeof *l->stats);
    l->retention_hours = g.retention_hours;
    for (int s = 0; s < AN_NSTATS; s++) {
        Cairn__Mgmt__AnalyticsStatRow *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__analytics_stat_row__init(r);
        r->name = (char *)an_stat_name((an_stat_t)s);
        r->description = (char *)an_stat_description((an_stat_t)s);
        r->enabled = an_stat_enabled((an_stat_t)s);
        r->dims = cairnd_arena_alloc(a, AN_NDIMS * sizeof *r->dims);
        r->dims_enabled = cairnd_arena_alloc(a, AN_NDIMS * sizeof *r->dims_enabled);
        for (int d = 0; d < AN_NDIMS; d++) {
            if (!an_stat_has_dim((an_stat_t)s, (an_dim_t)d)) continue;
            r->dims[r->n_dims++] = (char *)an_dim_name((an_dim_t)d);
            if (an_dims_mask((an_stat_t)s) & (1u << d))
                r->dims_enabled[r->n_dims_enabled++] = (char *)an_dim_name((an_dim_t)d);
        }
        l->stats[l->n_stats++] = r;
    }
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_ANALYTICS_STATS;
    resp->analytics_stats = l;
}

static void do_switch(const char *stat, const char *by, bool on, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    int s, d;
    if (!parse_target(stat, by, &s, &d, resp, a)) return;
    if (d < 0) an_set_stat_enabled((an_stat_t)s, on);
    else {
        if (on) an_set_stat_enabled((an_stat_t)s, true); /* a drill-down of nothing shows nothing */
        an_set_dim_enabled((an_stat_t)s, (an_dim_t)d, on);
    }
    log_info(SUB, "%s%s%s %s", stat, d < 0 ? "" : " by ", d < 0 ? "" : by,
             on ? "enabled" : "disabled");
    save(); /* the switches survive a restart */
    do_list(resp, a);
}

typedef struct show_ctx {
    an_stat_t stat;
    int dim;
    cairnd_arena_t *a;
    const an_history_t *h;
    int64_t seconds;
    bool want_samples;
    uint64_t total;
    /* summed per name id */
    uint64_t *by_name;
    size_t nnames;
    Cairn__Mgmt__AnalyticsSample **samples;
    size_t nsamples, samples_cap;
} show_ctx_t;

static Cairn__Mgmt__AnalyticsValue *value_row(cairnd_arena_t *a, const char *name, uint64_t v)
{
    Cairn__Mgmt__AnalyticsValue *r = cairnd_arena_alloc(a, sizeof *r);
    cairn__mgmt__analytics_value__init(r);
    r->name = cairnd_arena_strdup(a, name);
    r->value = v;
    return r;
}

static void show_sample(const an_sample_t *s, void *arg)
{
    show_ctx_t *c = arg;
    Cairn__Mgmt__AnalyticsSample *row = NULL;
    if (c->want_samples) {
        row = cairnd_arena_alloc(c->a, sizeof *row);
        cairn__mgmt__analytics_sample__init(row);
        row->time = s->t;
        row->seconds = (uint32_t)c->seconds;
        row->values = cairnd_arena_alloc(c->a, (s->n ? s->n : 1) * sizeof *row->values);
        if (c->nsamples == c->samples_cap) {
            c->samples_cap = c->samples_cap ? c->samples_cap * 2 : 64;
            Cairn__Mgmt__AnalyticsSample **grown =
                cairnd_arena_alloc(c->a, c->samples_cap * sizeof *grown);
            if (c->nsamples) memcpy(grown, c->samples, c->nsamples * sizeof *grown);
            c->samples = grown;
        }
        c->samples[c->nsamples++] = row;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        const an_entry_t *e = &s->e[i];
        if (e->stat != c->stat) continue;
        if (e->dim == AN_DIM_TOTAL) {
            c->total += e->value;
            if (row) row->total += e->value;
        }
        if (c->dim < 0 || e->dim != c->dim) continue;
        if (e->name < c->nnames) c->by_name[e->name] += e->value;
        if (row)
            row->values[row->n_values++] =
                value_row(c->a, an_history_name(c->h, e->name), e->value);
    }
}

static int by_value_desc(const void *x, const void *y)
{
    const Cairn__Mgmt__AnalyticsValue *const *a = x, *const *b = y;
    bool ao = !strcmp((*a)->name, AN_OTHER), bo = !strcmp((*b)->name, AN_OTHER);
    if (ao != bo) return ao ? 1 : -1;
    if ((*a)->value != (*b)->value) return (*a)->value > (*b)->value ? -1 : 1;
    return strcmp((*a)->name, (*b)->name);
}

/* Histograms in bucket order, the way a heat map's column reads. */
static int by_bucket(const void *x, const void *y, void *dim)
{
    const Cairn__Mgmt__AnalyticsValue *const *a = x, *const *b = y;
    return an_histogram_cmp(*(const an_dim_t *)dim, (*a)->name, (*b)->name);
}

static const char *const g_res_names[AN_NRES] = {"second", "minute", "hour"};

static void do_show(const Cairn__Mgmt__AnalyticsShow *m, Cairn__Mgmt__Response *resp,
                    cairnd_arena_t *a)
{
    int s, d;
    if (!parse_target(m->stat, m->by, &s, &d, resp, a)) return;
    int64_t window = m->window ? m->window : 60;
    int res = -1;
    for (int r = 0; r < AN_NRES; r++)
        if (m->resolution && !strcmp(m->resolution, g_res_names[r])) res = r;
    if (m->resolution && *m->resolution && res < 0) {
        cairnd_set_error(resp, a, -EINVAL, "no resolution '%s' (second, minute or hour)",
                         m->resolution);
        return;
    }
    if (res < 0) res = window <= 3600 ? AN_RES_SECOND : window <= 86400 ? AN_RES_MINUTE : AN_RES_HOUR;
    /* Up to the newest second filed (the sampler files a second just after it
     * ends), so a window of the last N seconds holds N samples. */
    pthread_mutex_lock(&g.lock);
    int64_t last = an_history_last(g.h);
    pthread_mutex_unlock(&g.lock);
    int64_t now = (int64_t)cairn_wallclock_s();
    int64_t to = last && last < now && now - last <= 2 ? last + 1 : now;
    int64_t from = to - window;
    Cairn__Mgmt__AnalyticsResult *r = cairnd_arena_alloc(a, sizeof *r);
    cairn__mgmt__analytics_result__init(r);
    r->stat = (char *)an_stat_name((an_stat_t)s);
    r->by = d < 0 ? "" : (char *)an_dim_name((an_dim_t)d);
    r->resolution = (char *)g_res_names[res];
    r->from = from;
    r->to = to;
    r->by_enabled = d < 0 ? an_stat_enabled((an_stat_t)s) : an_dim_enabled((an_stat_t)s, (an_dim_t)d);
    pthread_mutex_lock(&g.lock);
    show_ctx_t c = {.stat = (an_stat_t)s, .dim = d, .a = a, .h = g.h,
                    .seconds = an_res_seconds(res), .want_samples = m->samples};
    c.nnames = an_history_nnames(g.h);
    c.by_name = calloc(c.nnames ? c.nnames : 1, sizeof *c.by_name);
    an_history_walk(g.h, res, from, to, show_sample, &c);
    size_t nv = 0;
    for (size_t i = 0; i < c.nnames; i++) nv += c.by_name[i] != 0;
    r->values = cairnd_arena_alloc(a, (nv ? nv : 1) * sizeof *r->values);
    for (size_t i = 0; i < c.nnames; i++)
        if (c.by_name[i])
            r->values[r->n_values++] =
                value_row(a, an_history_name(g.h, (uint32_t)i), c.by_name[i]);
    pthread_mutex_unlock(&g.lock);
    free(c.by_name);
    if (d >= 0 && an_dim_is_histogram((unsigned)d)) {
        an_dim_t dim = (an_dim_t)d;
        qsort_r(r->values, r->n_values, sizeof *r->values, by_bucket, &dim);
    } else {
        qsort(r->values, r->n_values, sizeof *r->values, by_value_desc);
    }
    r->total = c.total;
    r->samples = c.samples;
    r->n_samples = c.nsamples;
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_ANALYTICS;
    resp->analytics = r;
}

bool cairnd_handle_analytics(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                             cairnd_arena_t *a)
{
    if (!g.h && req->cmd_case >= CAIRN__MGMT__REQUEST__CMD_ANALYTICS_LIST &&
        req->cmd_case <= CAIRN__MGMT__REQUEST__CMD_ANALYTICS_SHOW) {
        cairnd_set_error(resp, a, -EAGAIN, "analytics are not running yet");
        return true;
    }
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_ANALYTICS_LIST: do_list(resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_ANALYTICS_ENABLE:
        do_switch(req->analytics_enable->stat, req->analytics_enable->by, true, resp, a);
        return true;
    case CAIRN__MGMT__REQUEST__CMD_ANALYTICS_DISABLE:
        do_switch(req->analytics_disable->stat, req->analytics_disable->by, false, resp, a);
        return true;
    case CAIRN__MGMT__REQUEST__CMD_ANALYTICS_SHOW: do_show(req->analytics_show, resp, a); return true;
    default: return false;
    }
}
