/*
 * /metrics: everything cairnd counts, in the Prometheus text exposition format
 * (version 0.0.4) with node_exporter's conventions: a unit in every name
 * (_bytes, _seconds), counters end in _total, each family once with its HELP
 * and TYPE lines and all of its samples together.
 *
 * The pool figures come from the very requests the CLI sends (pool status and
 * iostat through cairnd_handle_request), so /metrics, `cairn pool status` and
 * the REST API cannot disagree; the front ends' counters are read from the NFS
 * and iSCSI layers' statistics structs (include/cairn/stats.h), the intent
 * logs' per dataset from the ZIL's list of open logs (zil_stats_list).
 *
 * cairnd_counters_json() gives the front ends' totals as JSON as well
 * (GET /api/v1/counters), with the time they were read, for the web UI's live
 * charts: a page turns two readings into rates without a Prometheus parser.
 */
#include "cairnd.h"

#include <cairn/stats.h>
#include <cairn/zil.h>

#include <inttypes.h>
#include <stddef.h>
#include <jansson.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A label value as the format wants it: backslash, quote and newline escaped. */
static void put_label(FILE *f, const char *name, const char *value)
{
    fprintf(f, "%s=\"", name);
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"') fputc('\\', f);
        if (*p == '\n') fputs("\\n", f);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ------------------------------------------------------------------ pools */

typedef struct snapshot {
    Cairn__Mgmt__Response status, iostat;
    cairnd_arena_t arena;
} snapshot_t;

static void ask(Cairn__Mgmt__Request__CmdCase what, Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    Cairn__Mgmt__Request req = CAIRN__MGMT__REQUEST__INIT;
    Cairn__Mgmt__PoolStatus st = CAIRN__MGMT__POOL_STATUS__INIT;
    Cairn__Mgmt__PoolIostat io = CAIRN__MGMT__POOL_IOSTAT__INIT;
    req.cmd_case = what;
    if (what == CAIRN__MGMT__REQUEST__CMD_POOL_STATUS) req.pool_status = &st;
    else req.pool_iostat = &io;
    cairn__mgmt__response__init(resp);
    cairnd_handle_request(&req, resp, a);
}

static void pool_labels(FILE *f, const char *pool, const char *vdev)
{
    fputc('{', f);
    put_label(f, "pool", pool);
    if (vdev) {
        fputc(',', f);
        put_label(f, "vdev", vdev);
    }
    fputc('}', f);
}

typedef uint64_t (*iostat_field_fn)(const Cairn__Mgmt__VdevIostat *v);
static uint64_t io_reads(const Cairn__Mgmt__VdevIostat *v) { return v->reads; }
static uint64_t io_writes(const Cairn__Mgmt__VdevIostat *v) { return v->writes; }
static uint64_t io_read_bytes(const Cairn__Mgmt__VdevIostat *v) { return v->read_bytes; }
static uint64_t io_write_bytes(const Cairn__Mgmt__VdevIostat *v) { return v->write_bytes; }

/* Every vdev below the pool's root (the root itself is the pool's sum). */
static void iostat_tree(FILE *f, const char *metric, const char *pool,
                        const Cairn__Mgmt__VdevIostat *v, iostat_field_fn get, bool root)
{
    if (!root) {
        fputs(metric, f);
        pool_labels(f, pool, v->name);
        fprintf(f, " %" PRIu64 "\n", get(v));
    }
    for (size_t i = 0; i < v->n_children; i++)
        iostat_tree(f, metric, pool, v->children[i], get, false);
}

typedef uint64_t (*status_field_fn)(const Cairn__Mgmt__VdevStatus *v);
static uint64_t st_read_errors(const Cairn__Mgmt__VdevStatus *v) { return v->read_errors; }
static uint64_t st_write_errors(const Cairn__Mgmt__VdevStatus *v) { return v->write_errors; }
static uint64_t st_cksum_errors(const Cairn__Mgmt__VdevStatus *v) { return v->checksum_errors; }

static void status_tree(FILE *f, const char *metric, const char *pool,
                        const Cairn__Mgmt__VdevStatus *v, status_field_fn get, bool root)
{
    if (!v) return;
    if (!root) {
        fputs(metric, f);
        pool_labels(f, pool, v->name);
        fprintf(f, " %" PRIu64 "\n", get(v));
    }
    for (size_t i = 0; i < v->n_children; i++)
        status_tree(f, metric, pool, v->children[i], get, false);
}

static const Cairn__Mgmt__PoolIostats *iostats(const snapshot_t *s)
{
    return s->iostat.error == 0 &&
                   s->iostat.result_case == CAIRN__MGMT__RESPONSE__RESULT_POOL_IOSTAT
               ? s->iostat.pool_iostat
               : NULL;
}

static const Cairn__Mgmt__PoolStatuses *statuses(const snapshot_t *s)
{
    return s->status.error == 0 &&
                   s->status.result_case == CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS
               ? s->status.pool_status
               : NULL;
}

static void render_capacity(FILE *f, const Cairn__Mgmt__PoolIostats *io)
{
    static const struct {
        const char *name, *help;
        int which;
    } caps[] = {
        {"cairn_pool_size_bytes", "Allocatable bytes of the pool.", 0},
        {"cairn_pool_allocated_bytes", "Allocated bytes of the pool.", 1},
        {"cairn_pool_free_bytes", "Free bytes of the pool.", 2},
    };
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(caps); k++) {
        family(f, caps[k].name, "gauge", caps[k].help);
        for (size_t i = 0; io && i < io->n_pools; i++) {
            const Cairn__Mgmt__VdevIostat *r = io->pools[i]->root;
            if (!r) continue;
            uint64_t v = caps[k].which == 0   ? r->size
                         : caps[k].which == 1 ? r->alloc
                                              : r->size - r->alloc;
            fputs(caps[k].name, f);
            pool_labels(f, r->name, NULL);
            fprintf(f, " %" PRIu64 "\n", v);
        }
    }
    static const struct {
        const char *name, *help;
        iostat_field_fn get;
    } ios[] = {
        {"cairn_vdev_reads_total", "Read operations of the vdev since the pool was imported.",
         io_reads},
        {"cairn_vdev_writes_total", "Write operations of the vdev since the pool was imported.",
         io_writes},
        {"cairn_vdev_read_bytes_total", "Bytes read from the vdev since the pool was imported.",
         io_read_bytes},
        {"cairn_vdev_written_bytes_total", "Bytes written to the vdev since the pool was imported.",
         io_write_bytes},
    };
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(ios); k++) {
        family(f, ios[k].name, "counter", ios[k].help);
        for (size_t i = 0; io && i < io->n_pools; i++)
            if (io->pools[i]->root)
                iostat_tree(f, ios[k].name, io->pools[i]->root->name, io->pools[i]->root,
                            ios[k].get, true);
    }
}

static const char *const health_states[] = {"ONLINE",  "DEGRADED", "FAULTED",
                                            "UNAVAIL", "OFFLINE",  "SUSPENDED"};

static void health_sample(FILE *f, const char *pool, const char *state, int value)
{
    fprintf(f, "cairn_pool_health{");
    put_label(f, "pool", pool);
    fputc(',', f);
    put_label(f, "state", state);
    fprintf(f, "} %d\n", value);
}

static void render_health(FILE *f, const Cairn__Mgmt__PoolStatuses *st)
{
    family(f, "cairn_pool_health", "gauge",
           "1 for the pool's health state (ONLINE, DEGRADED, ...), 0 for the others.");
    for (size_t i = 0; st && i < st->n_pools; i++) {
        const Cairn__Mgmt__PoolStatusResult *p = st->pools[i];
        bool known = false;
        for (size_t k = 0; k < CAIRN_ARRAY_SIZE(health_states); k++) {
            bool is = !strcmp(p->state, health_states[k]);
            known |= is;
            health_sample(f, p->name, health_states[k], is);
        }
        if (!known) health_sample(f, p->name, p->state, 1); /* a state newer than the list */
    }
    static const struct {
        const char *name, *help;
        status_field_fn get;
    } errs[] = {
        {"cairn_vdev_read_errors_total", "Read errors of the vdev (cleared by pool clear).",
         st_read_errors},
        {"cairn_vdev_write_errors_total", "Write errors of the vdev (cleared by pool clear).",
         st_write_errors},
        {"cairn_vdev_checksum_errors_total", "Checksum errors of the vdev (cleared by pool clear).",
         st_cksum_errors},
    };
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(errs); k++) {
        family(f, errs[k].name, "counter", errs[k].help);
        for (size_t i = 0; st && i < st->n_pools; i++)
            status_tree(f, errs[k].name, st->pools[i]->name, st->pools[i]->root, errs[k].get, true);
    }
}

static void render_scan(FILE *f, const Cairn__Mgmt__PoolStatuses *st)
{
    static const struct {
        const char *name, *type, *help;
        int which;
    } scans[] = {
        {"cairn_pool_scan_active", "gauge", "1 while a scrub or resilver of the pool runs.", 0},
        {"cairn_pool_scan_to_examine_bytes", "gauge",
         "Bytes the current or last scan has to examine.", 1},
        {"cairn_pool_scan_examined_bytes", "gauge", "Bytes the current or last scan has examined.",
         2},
        {"cairn_pool_scan_repaired_bytes", "gauge", "Bytes the current or last scan has repaired.",
         3},
        {"cairn_pool_scan_errors", "gauge", "Errors the current or last scan has found.", 4},
    };
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(scans); k++) {
        family(f, scans[k].name, scans[k].type, scans[k].help);
        for (size_t i = 0; st && i < st->n_pools; i++) {
            const Cairn__Mgmt__ScrubStatus *s = st->pools[i]->scrub;
            if (!s) continue;
            uint64_t v = scans[k].which == 0
                             ? s->state == CAIRN__MGMT__SCRUB_STATUS__STATE__SCANNING
                         : scans[k].which == 1 ? s->to_examine
                         : scans[k].which == 2 ? s->examined
                         : scans[k].which == 3 ? s->repaired
                                               : s->errors;
            fprintf(f, "%s{", scans[k].name);
            put_label(f, "pool", st->pools[i]->name);
            fputc(',', f);
            put_label(f, "kind", s->func ? "resilver" : "scrub");
            fprintf(f, "} %" PRIu64 "\n", v);
        }
    }
}

static void render_arc(FILE *f, const Cairn__Mgmt__ArcStats *a)
{
    if (!a) return;
    family(f, "cairn_arc_size_bytes", "gauge", "Bytes the ARC holds.");
    fprintf(f, "cairn_arc_size_bytes %" PRIu64 "\n", a->size);
    family(f, "cairn_arc_target_size_bytes", "gauge", "The ARC's target size (c).");
    fprintf(f, "cairn_arc_target_size_bytes %" PRIu64 "\n", a->c);
    family(f, "cairn_arc_max_size_bytes", "gauge", "The ARC's size limit (arc_max).");
    fprintf(f, "cairn_arc_max_size_bytes %" PRIu64 "\n", a->c_max);
    family(f, "cairn_arc_hits_total", "counter", "Block reads the ARC answered.");
    fprintf(f, "cairn_arc_hits_total %" PRIu64 "\n", a->hits);
    family(f, "cairn_arc_misses_total", "counter", "Block reads the ARC could not answer.");
    fprintf(f, "cairn_arc_misses_total %" PRIu64 "\n", a->misses);
    family(f, "cairn_arc_evictions_total", "counter", "Blocks evicted from the ARC.");
    fprintf(f, "cairn_arc_evictions_total %" PRIu64 "\n", a->evictions);
    family(f, "cairn_l2arc_hits_total", "counter", "ARC misses the cache devices answered.");
    fprintf(f, "cairn_l2arc_hits_total %" PRIu64 "\n", a->l2_hits);
    family(f, "cairn_l2arc_misses_total", "counter",
           "ARC misses the cache devices could not answer.");
    fprintf(f, "cairn_l2arc_misses_total %" PRIu64 "\n", a->l2_misses);
    family(f, "cairn_l2arc_size_bytes", "gauge", "Bytes the cache devices hold.");
    fprintf(f, "cairn_l2arc_size_bytes %" PRIu64 "\n", a->l2_size);
}

/* ------------------------------------------------------------ front ends */

/* One histogram series: cumulative buckets, +Inf, _sum in seconds and _count. */
static void histogram(FILE *f, const char *name, const char *label, const char *value,
                      const cairn_hist_t *h)
{
    uint64_t cum = 0;
    for (unsigned i = 0; i < CAIRN_HIST_BUCKETS; i++) {
        cum += cairn_counter_get(&h->bucket[i]);
        fprintf(f, "%s_bucket{", name);
        if (label) {
            put_label(f, label, value);
            fputc(',', f);
        }
        if (i < CAIRN_HIST_BUCKETS - 1)
            fprintf(f, "le=\"%g\"} %" PRIu64 "\n", (double)cairn_hist_bound_ns[i] / 1e9, cum);
        else fprintf(f, "le=\"+Inf\"} %" PRIu64 "\n", cum);
    }
    const char *open = label ? "{" : "", *close = label ? "}" : "";
    fprintf(f, "%s_sum%s", name, open);
    if (label) put_label(f, label, value);
    fprintf(f, "%s %.9f\n", close, (double)cairn_counter_get(&h->sum_ns) / 1e9);
    fprintf(f, "%s_count%s", name, open);
    if (label) put_label(f, label, value);
    fprintf(f, "%s %" PRIu64 "\n", close, cum);
}

static void render_nfs(FILE *f, const nfs_stats_t *s)
{
    static const char *const versions[NFS_STATS_VERSIONS] = {"3", "4"};
    family(f, "cairn_nfs_operations_total", "counter",
           "NFS operations served: NFSv3 calls by procedure, NFSv4 COMPOUND operations.");
    for (uint32_t p = 0; s && p < NFS_STATS_V3_PROCS; p++)
        fprintf(f, "cairn_nfs_operations_total{version=\"3\",op=\"%s\"} %" PRIu64 "\n",
                nfs3_proc_name(p), cairn_counter_get(&s->v3_calls[p]));
    for (uint32_t op = 0; s && op < NFS_STATS_V4_OPS; op++) {
        const char *name = op ? nfs4_op_name(op) : "OTHER";
        if (name)
            fprintf(f, "cairn_nfs_operations_total{version=\"4\",op=\"%s\"} %" PRIu64 "\n", name,
                    cairn_counter_get(&s->v4_ops[op]));
    }
    family(f, "cairn_nfs_read_bytes_total", "counter", "File bytes NFS READs returned.");
    for (unsigned v = 0; s && v < NFS_STATS_VERSIONS; v++)
        fprintf(f, "cairn_nfs_read_bytes_total{version=\"%s\"} %" PRIu64 "\n", versions[v],
                cairn_counter_get(&s->read_bytes[v]));
    family(f, "cairn_nfs_written_bytes_total", "counter", "File bytes NFS WRITEs stored.");
    for (unsigned v = 0; s && v < NFS_STATS_VERSIONS; v++)
        fprintf(f, "cairn_nfs_written_bytes_total{version=\"%s\"} %" PRIu64 "\n", versions[v],
                cairn_counter_get(&s->write_bytes[v]));
    family(f, "cairn_nfs_request_duration_seconds", "histogram",
           "Time from an NFS call's arrival to its answer (NFSv4: per COMPOUND).");
    for (unsigned v = 0; s && v < NFS_STATS_VERSIONS; v++)
        histogram(f, "cairn_nfs_request_duration_seconds", "version", versions[v], &s->latency[v]);
}

/* Per share: the export list (a snapshot under its lock) with each export's counts. */
static void render_nfs_shares(FILE *f)
{
    size_t n = cairnd_shares_exports(NULL, 0);
    nfs_export_info_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return;
    size_t now = cairnd_shares_exports(v, n); /* shares may have gone meanwhile */
    if (now < n) n = now;
    static const struct {
        const char *name, *help;
        int which;
    } fams[] = {
        {"cairn_nfs_share_requests_total",
         "NFSv3 calls and NFSv4 COMPOUNDs on the share's files since it was exported.", 0},
        {"cairn_nfs_share_read_bytes_total", "File bytes read from the share over NFS.", 1},
        {"cairn_nfs_share_written_bytes_total", "File bytes written to the share over NFS.", 2},
    };
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(fams); k++) {
        family(f, fams[k].name, "counter", fams[k].help);
        for (size_t i = 0; i < n; i++) {
            uint64_t val = fams[k].which == 0   ? v[i].calls
                           : fams[k].which == 1 ? v[i].read_bytes
                                                : v[i].write_bytes;
            fprintf(f, "%s{", fams[k].name);
            put_label(f, "dataset", v[i].dataset);
            fputc(',', f);
            put_label(f, "share", v[i].path);
            fprintf(f, "} %" PRIu64 "\n", val);
        }
    }
    free(v);
}

static void render_iscsi(FILE *f, const iscsi_stats_t *s)
{
    static const char *const kinds[ISCSI_CMD_KINDS] = {"read", "write", "other"};
    family(f, "cairn_iscsi_commands_total", "counter",
           "SCSI commands the iSCSI target answered, by kind (READ and WRITE families, other).");
    for (unsigned k = 0; s && k < ISCSI_CMD_KINDS; k++)
        fprintf(f, "cairn_iscsi_commands_total{kind=\"%s\"} %" PRIu64 "\n", kinds[k],
                cairn_counter_get(&s->commands[k]));
    family(f, "cairn_iscsi_read_bytes_total", "counter", "Bytes of Data-In sent to initiators.");
    if (s)
        fprintf(f, "cairn_iscsi_read_bytes_total %" PRIu64 "\n", cairn_counter_get(&s->read_bytes));
    family(f, "cairn_iscsi_written_bytes_total", "counter",
           "Bytes of Data-Out received from initiators.");
    if (s)
        fprintf(f, "cairn_iscsi_written_bytes_total %" PRIu64 "\n",
                cairn_counter_get(&s->write_bytes));
    family(f, "cairn_iscsi_command_duration_seconds", "histogram",
           "Time from a SCSI command's arrival to its status.");
    if (s) histogram(f, "cairn_iscsi_command_duration_seconds", NULL, NULL, &s->latency);
}

/* Per target: a snapshot taken under the target list's lock, rendered after it. */
static void render_iscsi_targets(FILE *f)
{
    static const char *const kinds[ISCSI_CMD_KINDS] = {"read", "write", "other"};
    size_t n = cairnd_iscsi_target_stats(NULL, 0);
    iscsi_target_stats_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return;
    size_t now = cairnd_iscsi_target_stats(v, n); /* targets may have gone meanwhile */
    if (now < n) n = now;
    family(f, "cairn_iscsi_target_commands_total", "counter",
           "SCSI commands answered per iSCSI target, by kind.");
    for (size_t i = 0; i < n; i++)
        for (unsigned k = 0; k < ISCSI_CMD_KINDS; k++) {
            fputs("cairn_iscsi_target_commands_total{", f);
            put_label(f, "target", v[i].name);
            fprintf(f, ",kind=\"%s\"} %" PRIu64 "\n", kinds[k], v[i].commands[k]);
        }
    family(f, "cairn_iscsi_target_read_bytes_total", "counter",
           "Bytes of Data-In sent per iSCSI target.");
    for (size_t i = 0; i < n; i++) {
        fputs("cairn_iscsi_target_read_bytes_total{", f);
        put_label(f, "target", v[i].name);
        fprintf(f, "} %" PRIu64 "\n", v[i].read_bytes);
    }
    family(f, "cairn_iscsi_target_written_bytes_total", "counter",
           "Bytes of Data-Out received per iSCSI target.");
    for (size_t i = 0; i < n; i++) {
        fputs("cairn_iscsi_target_written_bytes_total{", f);
        put_label(f, "target", v[i].name);
        fprintf(f, "} %" PRIu64 "\n", v[i].write_bytes);
    }
    free(v);
}

/* Per dataset with an open intent log: how its sync operations were made durable
 * (how many commits shared a log write and a flush, how many fell back to a txg). */
static void render_zil(FILE *f)
{
    size_t n = zil_stats_list(NULL, 0);
    zil_log_stats_t *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return;
    size_t now = zil_stats_list(v, n); /* logs may have opened or closed meanwhile */
    if (now < n) n = now;
    static const struct {
        const char *name, *help;
        size_t field;
    } fams[] = {
        {"cairn_zil_commits_total", "Commits (sync operations, COMMIT, fsync) that had "
         "something to make durable.", offsetof(zil_stats_t, commits)},
        {"cairn_zil_log_writes_total", "Rounds of log block writes; concurrent commits share one.",
         offsetof(zil_stats_t, log_writes)},
        {"cairn_zil_blocks_written_total", "Log blocks written.", offsetof(zil_stats_t, blocks)},
        {"cairn_zil_records_written_total", "Log records written.", offsetof(zil_stats_t, records)},
        {"cairn_zil_block_records_total", "Large writes logged as pointers to blocks written "
         "in place.", offsetof(zil_stats_t, block_records)},
        {"cairn_zil_flushes_requested_total", "Log flushes the log's batches needed.",
         offsetof(zil_stats_t, flushes)},
        {"cairn_zil_flushes_total", "Log flushes issued (the rest were covered by a flush "
         "another batch issued).", offsetof(zil_stats_t, flushes_issued)},
        {"cairn_zil_txg_waits_total", "Commits that waited for a txg to sync instead of the "
         "log.", offsetof(zil_stats_t, txg_waits)},
        {"cairn_zil_later_blocks_total", "Records of asynchronous writes (NFS UNSTABLE) their "
         "commit wrote as blocks the txg adopts.", offsetof(zil_stats_t, later_blocks)},
        {"cairn_zil_later_waits_total", "Asynchronous writes whose commit waited for their txg "
         "instead (the record changed since, the txg was closing).",
         offsetof(zil_stats_t, later_waits)},
        {"cairn_zil_region_full_total", "Batches that found the log space full and waited for "
         "txgs.", offsetof(zil_stats_t, region_full)},
    };
    for (size_t k = 0; k < CAIRN_ARRAY_SIZE(fams); k++) {
        family(f, fams[k].name, "counter", fams[k].help);
        for (size_t i = 0; i < n; i++) {
            uint64_t val;
            memcpy(&val, (const char *)&v[i].st + fams[k].field, sizeof val);
            fprintf(f, "%s{", fams[k].name);
            put_label(f, "dataset", v[i].dataset);
            fprintf(f, "} %" PRIu64 "\n", val);
        }
    }
    free(v);
}

char *cairnd_metrics_render(size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    snapshot_t s = {0};
    ask(CAIRN__MGMT__REQUEST__CMD_POOL_STATUS, &s.status, &s.arena);
    ask(CAIRN__MGMT__REQUEST__CMD_POOL_IOSTAT, &s.iostat, &s.arena);
    render_capacity(f, iostats(&s));
    render_health(f, statuses(&s));
    render_scan(f, statuses(&s));
    render_arc(f, iostats(&s) ? iostats(&s)->arc : NULL);
    render_nfs(f, cairnd_shares_stats());
    render_nfs_shares(f);
    render_iscsi(f, cairnd_iscsi_stats());
    render_iscsi_targets(f);
    render_zil(f);
    cairnd_arena_free(&s.arena);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ------------------------------------------------------------ as JSON */

static uint64_t sum_counters(const cairn_counter_t *c, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += cairn_counter_get(&c[i]);
    return sum;
}

static json_t *nfs_totals(const nfs_stats_t *s)
{
    if (!s) return json_pack("{s:i,s:i,s:i}", "operations", 0, "read_bytes", 0, "written_bytes", 0);
    uint64_t ops = sum_counters(s->v3_calls, NFS_STATS_V3_PROCS) +
                   sum_counters(s->v4_ops, NFS_STATS_V4_OPS);
    return json_pack("{s:I,s:I,s:I}", "operations", (json_int_t)ops, "read_bytes",
                     (json_int_t)sum_counters(s->read_bytes, NFS_STATS_VERSIONS), "written_bytes",
                     (json_int_t)sum_counters(s->write_bytes, NFS_STATS_VERSIONS));
}

static json_t *iscsi_totals(const iscsi_stats_t *s)
{
    if (!s) return json_pack("{s:i,s:i,s:i}", "commands", 0, "read_bytes", 0, "written_bytes", 0);
    return json_pack("{s:I,s:I,s:I}", "commands",
                     (json_int_t)sum_counters(s->commands, ISCSI_CMD_KINDS), "read_bytes",
                     (json_int_t)cairn_counter_get(&s->read_bytes), "written_bytes",
                     (json_int_t)cairn_counter_get(&s->write_bytes));
}

json_t *cairnd_counters_json(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return json_pack("{s:f,s:o,s:o}", "time", (double)now.tv_sec + (double)now.tv_nsec / 1e9,
                     "nfs", nfs_totals(cairnd_shares_stats()), "iscsi",
                     iscsi_totals(cairnd_iscsi_stats()));
}

json_t *cairnd_counters_openapi(void)
{
    json_t *totals = json_pack("{s:s,s:{s:s}}", "type", "object", "additionalProperties",
                               "type", "integer");
    return json_pack(
        "{s:{s:s,s:s,s:{s:{s:s,s:{s:{s:{s:s,s:{s:{s:s},s:O,s:o}}}}},s:{s:s,s:{s:{s:{s:s}}}}}}}",
        "get",
        "operationId", "counters", "summary",
        "Running totals of the front ends (NFS operations, iSCSI commands, bytes read and "
        "written) and the server time (s) they were read at; two readings give rates.",
        "responses", "200", "description", "the totals", "content", "application/json",
        "schema", "type", "object", "properties", "time", "type", "number", "nfs", totals,
        "iscsi", totals, "401", "description", "no or a wrong credential", "content",
        "application/json", "schema", "$ref", "#/components/schemas/Error");
}
