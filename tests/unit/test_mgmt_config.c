/* cairnd's configuration parser: good lines, bad lines (with file:line), listen addresses. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/dsl.h>
#include <cairn/log.h>
#include <cairn/mgmt.h>
#include <cairn/spa.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[512];

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", base);
    if (system(cmd)) return -1;
    snprintf(g_dir, sizeof g_dir, "%s/test_mgmt_config.XXXXXX", base);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) ? -1 : 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_defaults(void **state)
{
    (void)state;
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_string_equal(c.state_dir, CAIRN_DEFAULT_STATE_DIR);
    assert_int_equal(c.nfs.port, 2049);
    assert_int_equal(c.mount.port, 20048);
    assert_int_equal(c.portmap.port, 111);
    assert_int_equal(c.iscsi.port, 3260);
    assert_int_equal(c.txg_timeout, 5);
    assert_int_equal(c.log_level, CAIRN_LOG_INFO);
}

static void test_good_file(void **state)
{
    (void)state;
    char path[600], err[1024];
    snprintf(path, sizeof path, "%s/good.conf", g_dir);
    write_file(path, "# comment\n\n  state_dir = /srv/cairn  # trailing comment\n"
                     "socket=/run/c.sock\nnfs_listen = 127.0.0.1:12049\n"
                     "mount_listen = [::1]:1234\nportmap_listen = :1111\n"
                     "iscsi_listen = 3261\nlog_level = DEBUG\ntxg_timeout = 17\n"
                     "nfs_lease_time = 15\nnfs_grace_time = 20\n");
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), 0);
    assert_string_equal(c.state_dir, "/srv/cairn");
    assert_string_equal(c.socket, "/run/c.sock");
    assert_string_equal(c.nfs.host, "127.0.0.1");
    assert_int_equal(c.nfs.port, 12049);
    assert_string_equal(c.mount.host, "::1");
    assert_int_equal(c.mount.port, 1234);
    assert_string_equal(c.portmap.host, "0.0.0.0");
    assert_int_equal(c.portmap.port, 1111);
    assert_int_equal(c.iscsi.port, 3261);
    assert_int_equal(c.log_level, CAIRN_LOG_DEBUG);
    assert_int_equal(c.txg_timeout, 17);
    assert_int_equal(c.nfs_lease_time, 15);
    assert_int_equal(c.nfs_grace_time, 20);
    char buf[300];
    mgmt_listen_format(&c.mount, buf, sizeof buf);
    assert_string_equal(buf, "[::1]:1234");
}

/* The shipped conf/cairnd.conf must parse and say what the built-in defaults say. */
static void test_shipped_conf(void **state)
{
    (void)state;
    /* The build compiles us by absolute path: the tree is three levels up. */
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *cut = strstr(path, "tests/unit/");
    assert_non_null(cut);
    snprintf(cut, sizeof path - (size_t)(cut - path), "conf/cairnd.conf");
    assert_int_equal(access(path, R_OK), 0);
    cairnd_config_t c, d;
    mgmt_config_defaults(&c);
    mgmt_config_defaults(&d);
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), 0);
    assert_string_equal(c.state_dir, d.state_dir);
    assert_string_equal(c.socket, CAIRN_DEFAULT_SOCKET);
    assert_memory_equal(&c.nfs, &d.nfs, sizeof c.nfs);
    assert_memory_equal(&c.iscsi, &d.iscsi, sizeof c.iscsi);
    assert_int_equal(c.txg_timeout, d.txg_timeout);
    assert_int_equal(c.arc_max, d.arc_max);
    assert_int_equal(c.nfs_max_conns, d.nfs_max_conns);
    assert_int_equal(c.nfs_max_conns_per_client, d.nfs_max_conns_per_client);
    assert_int_equal(c.nfs_idle_timeout, d.nfs_idle_timeout);
    assert_int_equal(c.nfs_lease_time, d.nfs_lease_time);
    assert_int_equal(c.nfs_grace_time, d.nfs_grace_time);
    assert_int_equal(c.iscsi_max_conns, d.iscsi_max_conns);
    assert_int_equal(c.iscsi_max_conns_per_client, d.iscsi_max_conns_per_client);
    assert_int_equal(c.iscsi_login_timeout, d.iscsi_login_timeout);
    assert_int_equal(c.scan_idle_ms, d.scan_idle_ms);
    assert_int_equal(c.resilver_delay_ms, d.resilver_delay_ms);
    assert_int_equal(c.scrub_delay_ms, d.scrub_delay_ms);
    assert_int_equal(c.defrag_idle_ms, d.defrag_idle_ms);
    assert_string_equal(c.http.host, ""); /* HTTPS stays off unless asked for */
    assert_false(c.http_metrics_public);
    assert_false(c.log_syslog);
    assert_string_equal(c.log_file, "");
    assert_int_equal(c.hostid, 0);        /* the shipped file leaves the id to the state dir */
    assert_int_equal(c.mmp_interval_ms, d.mmp_interval_ms);
    assert_int_equal(c.mmp_fail_intervals, d.mmp_fail_intervals);
    assert_true(c.device_lock);
}

/* Multihost settings: defaults, values taken, bad ones refused with the key named. */
static void test_multihost_settings(void **state)
{
    (void)state;
    char path[600], err[1024] = "";
    snprintf(path, sizeof path, "%s/mmp.conf", g_dir);
    write_file(path, "hostid = 0x1A2b3C4d\nmmp_interval = 250\nmmp_fail_intervals = 4\n"
                     "device_lock = off\n");
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_int_equal(c.hostid, 0);
    assert_int_equal(c.mmp_interval_ms, SPA_MMP_INTERVAL_MS_DEFAULT);
    assert_int_equal(c.mmp_fail_intervals, SPA_MMP_FAIL_INTERVALS_DEFAULT);
    assert_true(c.device_lock);
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), 0);
    assert_int_equal(c.hostid, 0x1a2b3c4d);
    assert_int_equal(c.mmp_interval_ms, 250);
    assert_int_equal(c.mmp_fail_intervals, 4);
    assert_false(c.device_lock);
    static const char *const bad[][2] = {
        {"hostid", "0"}, {"hostid", "123456789"}, {"hostid", "xyz"}, {"hostid", ""},
        {"mmp_interval", "99"}, {"mmp_interval", "10001"}, {"mmp_fail_intervals", "1"},
        {"mmp_fail_intervals", "61"}, {"device_lock", "maybe"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cairnd_config_t before = c;
        err[0] = '\0';
        assert_int_equal(mgmt_config_set(&c, bad[i][0], bad[i][1], err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, bad[i][0]));
        assert_memory_equal(&before, &c, sizeof c);
    }
}

/* The scan throttle and the probe of missing disks: defaults, values taken, 0 allowed
 * (no pause; never probed), bounds refused. */
static void test_scan_throttle_settings(void **state)
{
    (void)state;
    char path[600], err[1024] = "";
    snprintf(path, sizeof path, "%s/scan.conf", g_dir);
    write_file(path, "scan_idle_ms = 200\nresilver_delay_ms = 0\nscrub_delay_ms = 10\n"
                     "vdev_probe_interval_ms = 0\ndefrag_idle_ms = 0\n");
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_int_equal(c.vdev_probe_interval_ms, SPA_PROBE_INTERVAL_MS_DEFAULT);
    assert_int_equal(c.scan_idle_ms, SPA_SCAN_IDLE_MS_DEFAULT);
    assert_int_equal(c.resilver_delay_ms, SPA_RESILVER_DELAY_MS_DEFAULT);
    assert_int_equal(c.scrub_delay_ms, SPA_SCRUB_DELAY_MS_DEFAULT);
    assert_int_equal(c.defrag_idle_ms, DSL_DEFRAG_IDLE_MS_DEFAULT);
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), 0);
    assert_int_equal(c.scan_idle_ms, 200);
    assert_int_equal(c.resilver_delay_ms, 0);
    assert_int_equal(c.scrub_delay_ms, 10);
    assert_int_equal(c.vdev_probe_interval_ms, 0); /* missing disks never probed */
    assert_int_equal(c.defrag_idle_ms, 0);           /* the defragmenter off */
}

/* The connection settings: parsed, bounded, and a per-client cap never above its
 * server's cap (whatever order they come in). */
static void test_connection_settings(void **state)
{
    (void)state;
    char path[600], err[1024] = "";
    snprintf(path, sizeof path, "%s/conns.conf", g_dir);
    write_file(path, "nfs_max_connections_per_client = 300\nnfs_max_connections = 300\n"
                     "nfs_idle_timeout = 60\niscsi_max_connections = 16\n"
                     "iscsi_max_connections_per_client = 2\niscsi_login_timeout = 5\n");
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_int_equal(c.nfs_max_conns, 4096);
    assert_int_equal(c.nfs_idle_timeout, 360);
    assert_int_equal(c.iscsi_max_conns, 1024);
    assert_int_equal(c.iscsi_login_timeout, 15);
    assert_true(c.nfs_max_conns_per_client < c.nfs_max_conns);
    assert_true(c.iscsi_max_conns_per_client < c.iscsi_max_conns);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), 0);
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), 0);
    assert_int_equal(c.nfs_max_conns, 300);
    assert_int_equal(c.nfs_max_conns_per_client, 300);
    assert_int_equal(c.nfs_idle_timeout, 60);
    assert_int_equal(c.iscsi_max_conns, 16);
    assert_int_equal(c.iscsi_max_conns_per_client, 2);
    assert_int_equal(c.iscsi_login_timeout, 5);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), 0);
    assert_int_equal(mgmt_config_set(&c, "iscsi_max_connections", "1", err, sizeof err), 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "iscsi_max_connections_per_client (2) exceeds "
                                "iscsi_max_connections (1)"));
    mgmt_config_defaults(&c);
    assert_int_equal(mgmt_config_set(&c, "nfs_max_connections_per_client", "5000", err,
                                     sizeof err), 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "nfs_max_connections_per_client"));
}

static void expect_bad(const char *text, const char *where, const char *needle)
{
    char path[600], err[1024] = "";
    snprintf(path, sizeof path, "%s/bad.conf", g_dir);
    write_file(path, text);
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_true(mgmt_config_load(&c, path, err, sizeof err) < 0);
    char loc[700];
    snprintf(loc, sizeof loc, "%s:%s: ", path, where);
    if (strncmp(err, loc, strlen(loc))) fail_msg("error '%s' does not start with '%s'", err, loc);
    if (!strstr(err, needle)) fail_msg("error '%s' lacks '%s'", err, needle);
    assert_null(strchr(err, '\n'));
}

static void test_bad_lines(void **state)
{
    (void)state;
    expect_bad("state_dir = /x\nbogus = 1\n", "2", "unknown setting 'bogus'");
    expect_bad("# c\n\nnfs_listen = 1.2.3.4:99999\n", "3", "nfs_listen");
    expect_bad("iscsi_listen = host:\n", "1", "iscsi_listen");
    expect_bad("mount_listen = ::1:80\n", "1", "mount_listen");
    expect_bad("log_level = loud\n", "1", "log_level");
    expect_bad("txg_timeout = 0\n", "1", "txg_timeout");
    expect_bad("txg_timeout = 5s\n", "1", "txg_timeout");
    expect_bad("txg_timeout = -3\n", "1", "txg_timeout");
    expect_bad("nfs_lease_time = 2\n", "1", "nfs_lease_time");
    expect_bad("nfs_grace_time = 0\n", "1", "nfs_grace_time");
    expect_bad("nfs_max_connections = 0\n", "1", "bad nfs_max_connections '0'");
    expect_bad("nfs_idle_timeout = 5m\n", "1", "nfs_idle_timeout");
    expect_bad("nfs_max_connections_per_client = lots\n", "1", "nfs_max_connections_per_client");
    expect_bad("iscsi_max_connections = 99999999999\n", "1", "iscsi_max_connections");
    expect_bad("iscsi_max_connections_per_client = 0\n", "1",
               "iscsi_max_connections_per_client");
    expect_bad("iscsi_login_timeout = 3601\n", "1", "iscsi_login_timeout '3601' (want seconds");
    expect_bad("resilver_delay_ms = 1001\n", "1", "bad resilver_delay_ms '1001' (want milliseconds");
    expect_bad("scrub_delay_ms = 2ms\n", "1", "bad scrub_delay_ms '2ms'");
    expect_bad("scan_idle_ms = -1\n", "1", "bad scan_idle_ms '-1'");
    expect_bad("defrag_idle_ms = 86400001\n", "1", "bad defrag_idle_ms");
    expect_bad("vdev_probe_interval_ms = 3600001\n", "1",
               "bad vdev_probe_interval_ms '3600001' (want milliseconds");
    expect_bad("just words\n", "1", "key = value");
    expect_bad("state_dir =\n", "1", "missing value");
    expect_bad(" = /x\n", "1", "missing key");
    expect_bad("http_listen = 0.0.0.0:84433\n", "1", "http_listen");
    expect_bad("http_metrics_public = yes\n", "1", "http_metrics_public 'yes' (want on or off)");
    expect_bad("log_syslog = 1\n", "1", "bad log_syslog '1' (want on or off)");
    expect_bad("log_file =\n", "1", "missing value");
}

/* ALUA: a lone head is group 1 with no partner; a pair names both groups, and
 * the partner's may not be this head's own (or out of 16 bits). */
static void test_alua_settings(void **state)
{
    (void)state;
    char path[600], err[1024] = "";
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_int_equal(c.alua_tpg_id, 1);
    assert_int_equal(c.alua_partner_tpg_id, 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/alua.conf", g_dir);
    write_file(path, "alua_tpg_id = 2\nalua_partner_tpg_id = 1\n");
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), 0);
    assert_int_equal(c.alua_tpg_id, 2);
    assert_int_equal(c.alua_partner_tpg_id, 1);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), 0);
    assert_int_equal(mgmt_config_set(&c, "alua_partner_tpg_id", "2", err, sizeof err), 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "alua_partner_tpg_id (2) equals alua_tpg_id"));
    expect_bad("alua_tpg_id = 0\n", "1", "bad alua_tpg_id '0'");
    expect_bad("alua_partner_tpg_id = 65536\n", "1", "bad alua_partner_tpg_id '65536'");
}

/* HTTPS: off by default (also in the shipped file), on with an address; a
 * certificate needs its key; port 0 is refused by name. */
static void test_http_settings(void **state)
{
    (void)state;
    char err[1024] = "";
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_string_equal(c.http.host, "");
    assert_false(c.http_metrics_public);
    assert_int_equal(mgmt_config_set(&c, "http_listen", "127.0.0.1:8443", err, sizeof err), 0);
    assert_int_equal(c.http.port, CAIRN_DEFAULT_HTTP_PORT);
    assert_int_equal(mgmt_config_set(&c, "http_metrics_public", "on", err, sizeof err), 0);
    assert_true(c.http_metrics_public);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), 0);
    assert_int_equal(mgmt_config_set(&c, "http_cert", "/etc/cairn/c.pem", err, sizeof err), 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "http_cert is set without http_key"));
    assert_int_equal(mgmt_config_set(&c, "http_key", "/etc/cairn/k.pem", err, sizeof err), 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), 0);
    assert_int_equal(mgmt_config_set(&c, "http_listen", "127.0.0.1:0", err, sizeof err), 0);
    assert_int_equal(mgmt_config_check(&c, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "http_listen"));
}

static void test_missing_file(void **state)
{
    (void)state;
    char path[600], err[1024] = "";
    snprintf(path, sizeof path, "%s/nope.conf", g_dir);
    cairnd_config_t c;
    mgmt_config_defaults(&c);
    assert_int_equal(mgmt_config_load(&c, path, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "nope.conf"));
}

static void test_listen_parse(void **state)
{
    (void)state;
    mgmt_listen_t l;
    assert_int_equal(mgmt_parse_listen("10.0.0.1:0", &l), 0);
    assert_int_equal(l.port, 0);
    assert_int_equal(mgmt_parse_listen("localhost:65535", &l), 0);
    assert_string_equal(l.host, "localhost");
    assert_int_equal(l.port, 65535);
    assert_true(mgmt_parse_listen("", &l) < 0);
    assert_true(mgmt_parse_listen("1.2.3.4", &l) < 0);
    assert_true(mgmt_parse_listen("1.2.3.4:65536", &l) < 0);
    assert_true(mgmt_parse_listen("1.2.3.4:8x", &l) < 0);
    assert_true(mgmt_parse_listen("[::1:80", &l) < 0);
    assert_true(mgmt_parse_listen("[]:80", &l) < 0);
    assert_true(mgmt_parse_listen("a b:80", &l) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_shipped_conf),
        cmocka_unit_test(test_bad_lines),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_listen_parse),
        cmocka_unit_test(test_connection_settings),
        cmocka_unit_test(test_scan_throttle_settings),
        cmocka_unit_test(test_multihost_settings),
        cmocka_unit_test(test_http_settings),
        cmocka_unit_test(test_alua_settings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
