/*
 * The daemon's configuration file: `key = value` lines, `#` comments.
 *
 * The format is deliberately tiny (no sections, no quoting beyond trimming
 * blanks) because every setting is a path, an address or a number. Anything
 * the parser does not understand is an error that names the file and line:
 * a typo in a config file silently ignored is how a daemon ends up listening
 * somewhere nobody expected. Command-line options are applied after the file,
 * through the same mgmt_config_set(), so both are validated alike.
 */
#include <cairn/dsl.h>
#include <cairn/frontend_defaults.h>
#include <cairn/log.h>
#include <cairn/mgmt.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void mgmt_config_defaults(cairnd_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cairn_strlcpy(cfg->state_dir, CAIRN_DEFAULT_STATE_DIR, sizeof cfg->state_dir);
    cfg->socket[0] = '\0';
    mgmt_parse_listen(CAIRN_DEFAULT_NFS_LISTEN, &cfg->nfs);
    mgmt_parse_listen(CAIRN_DEFAULT_MOUNT_LISTEN, &cfg->mount);
    mgmt_parse_listen(CAIRN_DEFAULT_PORTMAP_LISTEN, &cfg->portmap);
    mgmt_parse_listen(CAIRN_DEFAULT_ISCSI_LISTEN, &cfg->iscsi);
    cfg->log_level = CAIRN_LOG_INFO;
    cfg->txg_timeout = CAIRN_DEFAULT_TXG_TIMEOUT;
    cfg->arc_max = 0; /* from the machine (cairnd_arc_init) */
    cfg->nfs_max_conns = NFS_DEFAULT_MAX_CONNS;
    cfg->nfs_max_conns_per_client = NFS_DEFAULT_MAX_CONNS_PER_CLIENT;
    cfg->nfs_idle_timeout = NFS_DEFAULT_IDLE_TIMEOUT_S;
    cfg->nfs_lease_time = NFS_DEFAULT_LEASE_S;
    cfg->nfs_delegations = 1;   /* see conf/cairnd.conf */
    cfg->iscsi_max_conns = ISCSI_DEFAULT_MAX_CONNS;
    cfg->iscsi_max_conns_per_client = ISCSI_DEFAULT_MAX_CONNS_PER_CLIENT;
    cfg->iscsi_login_timeout = ISCSI_DEFAULT_LOGIN_TIMEOUT_S;
    cfg->alua_tpg_id = 1;
    cfg->fault_errors = 10; /* zed's checksum and io SERD defaults: 10 in 10 minutes */
    cfg->fault_window = 600;
    cfg->vdev_probe_interval_ms = SPA_PROBE_INTERVAL_MS_DEFAULT;
    cfg->scan_idle_ms = SPA_SCAN_IDLE_MS_DEFAULT;
    cfg->resilver_delay_ms = SPA_RESILVER_DELAY_MS_DEFAULT;
    cfg->scrub_delay_ms = SPA_SCRUB_DELAY_MS_DEFAULT;
    cfg->defrag_idle_ms = DSL_DEFRAG_IDLE_MS_DEFAULT;
    cfg->buffer_huge_pages = 1;
    cfg->mmp_interval_ms = SPA_MMP_INTERVAL_MS_DEFAULT;
    cfg->mmp_fail_intervals = SPA_MMP_FAIL_INTERVALS_DEFAULT;
    cfg->device_lock = true;
    cfg->analytics = 1;
    cfg->analytics_retention_days = 30;
}

int mgmt_parse_hostid(const char *s, uint32_t *out)
{
    if (!strncmp(s, "0x", 2) || !strncmp(s, "0X", 2)) s += 2;
    if (!*s || strlen(s) > 8) return -EINVAL;
    for (const char *p = s; *p; p++)
        if (!isxdigit((unsigned char)*p)) return -EINVAL;
    uint32_t v = (uint32_t)strtoul(s, NULL, 16);
    if (!v) return -EINVAL;
    *out = v;
    return 0;
}

static int parse_port(const char *s, uint16_t *out)
{
    if (!*s) return -EINVAL;
    unsigned long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) return -EINVAL;
        v = v * 10 + (unsigned long)(*p - '0');
        if (v > 65535) return -EINVAL;
    }
    *out = (uint16_t)v;
    return 0;
}

int mgmt_parse_listen(const char *s, mgmt_listen_t *out)
{
    mgmt_listen_t l;
    memset(&l, 0, sizeof l);
    if (!s || !*s) return -EINVAL;
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':' || close == s + 1) return -EINVAL;
        size_t hl = (size_t)(close - s - 1);
        if (hl >= sizeof l.host) return -EINVAL;
        memcpy(l.host, s + 1, hl);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) {
            /* A bare port: any address. */
            cairn_strlcpy(l.host, "0.0.0.0", sizeof l.host);
            if (parse_port(s, &l.port)) return -EINVAL;
            *out = l;
            return 0;
        }
        size_t hl = (size_t)(colon - s);
        if (hl >= sizeof l.host) return -EINVAL;
        if (memchr(s, ':', hl)) return -EINVAL; /* unbracketed IPv6 is ambiguous */
        memcpy(l.host, s, hl);
        if (hl == 0) cairn_strlcpy(l.host, "0.0.0.0", sizeof l.host);
    }
    for (const char *p = l.host; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-:_%", *p)) return -EINVAL;
    if (parse_port(colon + 1, &l.port)) return -EINVAL;
    *out = l;
    return 0;
}

void mgmt_listen_format(const mgmt_listen_t *l, char *buf, size_t len)
{
    if (strchr(l->host, ':')) snprintf(buf, len, "[%s]:%u", l->host, l->port);
    else snprintf(buf, len, "%s:%u", l->host, l->port);
}

static int set_path(char *dst, size_t cap, const char *key, const char *value, char *err,
                    size_t errlen)
{
    if (!*value) {
        snprintf(err, errlen, "%s needs a path", key);
        return -EINVAL;
    }
    /* sun_path holds 108 bytes including the terminator. */
    size_t limit = strcmp(key, "socket") == 0 ? 107 : cap - 1;
    if (strlen(value) > limit) {
        snprintf(err, errlen, "%s path too long (at most %zu bytes)", key, limit);
        return -EINVAL;
    }
    cairn_strlcpy(dst, value, cap);
    return 0;
}

static int set_on_off(bool *dst, const char *key, const char *value, char *err, size_t errlen)
{
    if (strcasecmp(value, "on") && strcasecmp(value, "off")) {
        snprintf(err, errlen, "bad %s '%s' (want on or off)", key, value);
        return -EINVAL;
    }
    *dst = !strcasecmp(value, "on");
    return 0;
}

/* The numeric settings: key, where, bounds, unit for the message. */
typedef struct num_setting {
    const char *key;
    size_t off;
    uint32_t min, max;
    const char *what;
} num_setting_t;

static const num_setting_t num_settings[] = {
    {"txg_timeout", offsetof(cairnd_config_t, txg_timeout), 1, 3600, "seconds"},
    {"nfs_max_connections", offsetof(cairnd_config_t, nfs_max_conns), 1, 1u << 20,
     "connections"},
    {"nfs_max_connections_per_client", offsetof(cairnd_config_t, nfs_max_conns_per_client), 1,
     1u << 20, "connections"},
    {"nfs_idle_timeout", offsetof(cairnd_config_t, nfs_idle_timeout), 1, 86400, "seconds"},
    /* A client renews within a lease; below a few seconds that is a request storm. */
    {"nfs_lease_time", offsetof(cairnd_config_t, nfs_lease_time), 5, 3600, "seconds"},
    {"nfs_delegations", offsetof(cairnd_config_t, nfs_delegations), 0, 1, "a switch"},
    {"nfs_grace_time", offsetof(cairnd_config_t, nfs_grace_time), 1, 3600, "seconds"},
    {"nlm_client_portmap_port", offsetof(cairnd_config_t, nlm_client_portmap), 1, 65535, "port"},
    {"iscsi_max_connections", offsetof(cairnd_config_t, iscsi_max_conns), 1, 65536,
     "connections"},
    {"iscsi_max_connections_per_client", offsetof(cairnd_config_t, iscsi_max_conns_per_client),
     1, 65536, "connections"},
    {"iscsi_login_timeout", offsetof(cairnd_config_t, iscsi_login_timeout), 1, 3600, "seconds"},
    /* ALUA target port group ids (SPC-4: 16 bits); the partner's 0 means none. */
    {"alua_tpg_id", offsetof(cairnd_config_t, alua_tpg_id), 1, 65535, "a group id"},
    {"alua_partner_tpg_id", offsetof(cairnd_config_t, alua_partner_tpg_id), 0, 65535,
     "a group id"},
    /* The error window remembers VDEV_ERRWIN_MAX - 1 errors at most. */
    {"fault_errors", offsetof(cairnd_config_t, fault_errors), 1, 63, "errors"},
    {"fault_window", offsetof(cairnd_config_t, fault_window), 1, 86400, "seconds"},
    /* 0: a missing disk comes back only by `pool online`; at most an hour apart. */
    {"vdev_probe_interval_ms", offsetof(cairnd_config_t, vdev_probe_interval_ms), 0, 3600000,
     "milliseconds"},
    /* Scans yielding to clients: 0 turns the pause off. */
    {"scan_idle_ms", offsetof(cairnd_config_t, scan_idle_ms), 0, 60000, "milliseconds"},
    {"resilver_delay_ms", offsetof(cairnd_config_t, resilver_delay_ms), 0, 1000, "milliseconds"},
    {"scrub_delay_ms", offsetof(cairnd_config_t, scrub_delay_ms), 0, 1000, "milliseconds"},
    /* The defragmenter: 0 turns it off; at most a day of quiet. */
    {"defrag_idle_ms", offsetof(cairnd_config_t, defrag_idle_ms), 0, 86400000, "milliseconds"},
    {"buffer_huge_pages", offsetof(cairnd_config_t, buffer_huge_pages), 0, 1, "a switch"},
    {"mmp_interval", offsetof(cairnd_config_t, mmp_interval_ms), SPA_MMP_INTERVAL_MS_MIN,
     SPA_MMP_INTERVAL_MS_MAX, "milliseconds"},
    {"mmp_fail_intervals", offsetof(cairnd_config_t, mmp_fail_intervals), SPA_MMP_FAIL_INTERVALS_MIN,
     SPA_MMP_FAIL_INTERVALS_MAX, "intervals"},
    {"analytics", offsetof(cairnd_config_t, analytics), 0, 1, "a switch"},
    /* Hourly rollups: 24 bytes and a few entries each, a year at most. */
    {"analytics_retention_days", offsetof(cairnd_config_t, analytics_retention_days), 1, 365,
     "days"},
};

int mgmt_config_check(const cairnd_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->nfs_max_conns_per_client > cfg->nfs_max_conns) {
        snprintf(err, errlen, "nfs_max_connections_per_client (%u) exceeds nfs_max_connections (%u)",
                 cfg->nfs_max_conns_per_client, cfg->nfs_max_conns);
        return -EINVAL;
    }
    if (cfg->iscsi_max_conns_per_client > cfg->iscsi_max_conns) {
        snprintf(err, errlen,
                 "iscsi_max_connections_per_client (%u) exceeds iscsi_max_connections (%u)",
                 cfg->iscsi_max_conns_per_client, cfg->iscsi_max_conns);
        return -EINVAL;
    }
    if (cfg->alua_partner_tpg_id == cfg->alua_tpg_id) {
        snprintf(err, errlen, "alua_partner_tpg_id (%u) equals alua_tpg_id: each head needs "
                 "its own target port group", cfg->alua_partner_tpg_id);
        return -EINVAL;
    }
    if (!cfg->http_cert[0] != !cfg->http_key[0]) {
        snprintf(err, errlen, "%s is set without %s (give both or neither)",
                 cfg->http_cert[0] ? "http_cert" : "http_key",
                 cfg->http_cert[0] ? "http_key" : "http_cert");
        return -EINVAL;
    }
    if (cfg->http.host[0] && cfg->http.port == 0) {
        snprintf(err, errlen, "http_listen needs a port other than 0 (the default is %d)",
                 CAIRN_DEFAULT_HTTP_PORT);
        return -EINVAL;
    }
    return 0;
}

int mgmt_config_set(cairnd_config_t *cfg, const char *key, const char *value, char *err,
                    size_t errlen)
{
    mgmt_listen_t *l = NULL;
    if (!strcmp(key, "state_dir"))
        return set_path(cfg->state_dir, sizeof cfg->state_dir, key, value, err, errlen);
    if (!strcmp(key, "socket"))
        return set_path(cfg->socket, sizeof cfg->socket, key, value, err, errlen);
    if (!strcmp(key, "nfs_listen")) l = &cfg->nfs;
    else if (!strcmp(key, "mount_listen")) l = &cfg->mount;
    else if (!strcmp(key, "portmap_listen")) l = &cfg->portmap;
    else if (!strcmp(key, "iscsi_listen")) l = &cfg->iscsi;
    else if (!strcmp(key, "http_listen")) l = &cfg->http;
    if (l) {
        if (mgmt_parse_listen(value, l)) {
            snprintf(err, errlen, "bad %s '%s' (want ADDR:PORT, port 0..65535)", key, value);
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(key, "http_cert"))
        return set_path(cfg->http_cert, sizeof cfg->http_cert, key, value, err, errlen);
    if (!strcmp(key, "http_key"))
        return set_path(cfg->http_key, sizeof cfg->http_key, key, value, err, errlen);
    if (!strcmp(key, "http_metrics_public"))
        return set_on_off(&cfg->http_metrics_public, key, value, err, errlen);
    if (!strcmp(key, "log_syslog")) return set_on_off(&cfg->log_syslog, key, value, err, errlen);
    if (!strcmp(key, "log_file"))
        return set_path(cfg->log_file, sizeof cfg->log_file, key, value, err, errlen);
    if (!strcmp(key, "device_lock")) return set_on_off(&cfg->device_lock, key, value, err, errlen);
    if (!strcmp(key, "hostid")) {
        if (mgmt_parse_hostid(value, &cfg->hostid)) {
            snprintf(err, errlen, "bad hostid '%s' (want 1 to 8 hex digits, not zero)", value);
            return -EINVAL;
        }
        return 0;
    }
    if (!strcmp(key, "log_level")) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++)
            if (!strcasecmp(value, names[i])) {
                cfg->log_level = i;
                return 0;
            }
        snprintf(err, errlen, "bad log_level '%s' (want error, warn, info or debug)", value);
        return -EINVAL;
    }
    for (size_t i = 0; i < sizeof num_settings / sizeof num_settings[0]; i++) {
        const num_setting_t *n = &num_settings[i];
        if (strcmp(key, n->key)) continue;
        char *end;
        errno = 0;
        unsigned long v = strtoul(value, &end, 10);
        if (!isdigit((unsigned char)value[0]) || *end || errno || v < n->min || v > n->max) {
            snprintf(err, errlen, "bad %s '%s' (want %s, %u..%u)", key, value, n->what, n->min,
                     n->max);
            return -EINVAL;
        }
        *(uint32_t *)((char *)cfg + n->off) = (uint32_t)v;
        return 0;
    }
    if (!strcmp(key, "arc_max")) {
        uint64_t v;
        if (cairn_parse_size(value, &v) || v < CAIRN_MIB) {
            snprintf(err, errlen, "bad arc_max '%s' (want a size of at least 1M, e.g. 2G)", value);
            return -EINVAL;
        }
        cfg->arc_max = v;
        return 0;
    }
    snprintf(err, errlen, "unknown setting '%s'", key);
    return -EINVAL;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

int mgmt_config_apply_line(cairnd_config_t *cfg, const char *line, char *err, size_t errlen)
{
    char buf[MGMT_PATH_MAX + 256];
    if (strlen(line) >= sizeof buf) {
        snprintf(err, errlen, "line too long");
        return -EINVAL;
    }
    cairn_strlcpy(buf, line, sizeof buf);
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *s = trim(buf);
    if (!*s) return 0;
    char *eq = strchr(s, '=');
    if (!eq) {
        snprintf(err, errlen, "expected 'key = value', got '%s'", s);
        return -EINVAL;
    }
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    if (!*key) {
        snprintf(err, errlen, "missing key before '='");
        return -EINVAL;
    }
    if (!*value) {
        snprintf(err, errlen, "missing value for '%s'", key);
        return -EINVAL;
    }
    return mgmt_config_set(cfg, key, value, err, errlen);
}

int mgmt_config_load(cairnd_config_t *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        char msg[512];
        if (mgmt_config_apply_line(cfg, line, msg, sizeof msg)) {
            snprintf(err, errlen, "%s:%u: %s", path, lineno, msg);
            rc = -EINVAL;
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}
