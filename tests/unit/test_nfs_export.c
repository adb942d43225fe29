/* Export options: parsing and its one-line errors, client matching (hosts, IPv4 and
 * IPv6 CIDRs, *, IPv4-mapped peers, the ro/rw precedence), squashing, an export's
 * authorization (versions, lists, read-only filesystems) on a real filesystem, and
 * suspending, resuming and renaming an export. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_srv.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop

#include <arpa/inet.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_storage addr(const char *s)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
    } else {
        assert_int_equal(inet_pton(AF_INET6, s, &a6->sin6_addr), 1);
        a6->sin6_family = AF_INET6;
    }
    return ss;
}

/* -1: refused, 0: read-only, 1: read-write */
static int access_of(const char *opts, const char *client)
{
    nfs_export_opts_t o;
    bool shared;
    char err[256];
    int rc = nfs_opts_parse(opts, &o, &shared, err, sizeof err);
    if (rc) fail_msg("parse %s: %s", opts, err);
    nfs_opts_resolve(&o);
    struct sockaddr_storage ss = addr(client);
    bool w = false;
    rc = nfs_opts_match(&o, (struct sockaddr *)&ss, &w);
    nfs_opts_free(&o);
    return rc ? -1 : w;
}

static void test_parse_ok(void **state)
{
    (void)state;
    const char *good[] = {
        "on", "off", "rw", "ro", "rw=*", "ro=@10.0.0.0/8", "rw=host.example:@192.168.0.0/16",
        "rw=@fd00::/64", "rw=[fd00::1]:10.1.2.3", "root_squash", "no_root_squash",
        "all_squash,anonuid=1000,anongid=100", "sec=sys", "vers=3", "vers=4", "vers=3:4",
        "rw=@10.0.0.0/8,ro=*,no_root_squash,vers=3", "rw=127.0.0.1", "ro=::1", "secure",
        "insecure,rw", "rw,secure,no_root_squash",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char err[256] = "";
        bool shared = false;
        int rc = nfs_sharenfs_check(good[i], &shared, err, sizeof err);
        if (rc) fail_msg("'%s' refused: %s", good[i], err);
        assert_int_equal(shared, strcmp(good[i], "off") != 0);
    }
}

static void test_parse_bad(void **state)
{
    (void)state;
    const struct { const char *v, *msg; } bad[] = {
        {"", "empty"}, {"bogus", "bogus"}, {"rw=", "empty client list"},
        {"rw=a::b:", "client"}, {"ro=@10.0.0.0/33", "10.0.0.0/33"}, {"ro=@::/129", "client"},
        {"rw=bad host", "bad host"}, {"secure=1", "secure"}, {"anonuid=", "anonuid"}, {"anonuid=-1", "anonuid"},
        {"anongid=99999999999", "anongid"}, {"sec=krb5", "sec=krb5"}, {"vers=2", "vers=2"},
        {"root_squash,no_root_squash", "more than one"}, {"rw,rw", "twice"},
        {"rw,,ro", "empty option"}, {",rw", "empty option"}, {"root_squash=1", "takes no value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        bool shared;
        int rc = nfs_sharenfs_check(bad[i].v, &shared, err, sizeof err);
        if (rc != -EINVAL) fail_msg("'%s' accepted", bad[i].v);
        if (!strstr(err, bad[i].msg)) fail_msg("'%s': message '%s' lacks '%s'", bad[i].v, err, bad[i].msg);
        assert_null(strchr(err, '\n'));
    }
}

static void test_match(void **state)
{
    (void)state;
    assert_int_equal(access_of("on", "10.1.1.1"), 1);
    assert_int_equal(access_of("ro", "10.1.1.1"), 0);
    assert_int_equal(access_of("rw=@10.0.0.0/8", "10.200.3.4"), 1);
    assert_int_equal(access_of("rw=@10.0.0.0/8", "11.0.0.1"), -1);
    assert_int_equal(access_of("rw=@10.0.0.0/8", "::ffff:10.0.0.1"), 1);   /* mapped */
    assert_int_equal(access_of("rw=@192.168.1.128/25", "192.168.1.127"), -1);
    assert_int_equal(access_of("rw=@192.168.1.128/25", "192.168.1.200"), 1);
    assert_int_equal(access_of("rw=@fd00::/64", "fd00::1234"), 1);
    assert_int_equal(access_of("rw=@fd00::/64", "fd00:0:0:1::1"), -1);
    assert_int_equal(access_of("rw=@fd00::/64:10.0.0.1", "10.0.0.1"), 1);
    assert_int_equal(access_of("rw=[fd00::1]:10.0.0.1", "fd00::1"), 1);
    assert_int_equal(access_of("rw=@0.0.0.0/0", "8.8.8.8"), 1);
    assert_int_equal(access_of("rw=localhost", "127.0.0.1"), 1);          /* resolved */
    assert_int_equal(access_of("rw=no-such-host.invalid", "127.0.0.1"), -1);
    /* precedence: explicit ro > explicit rw > wildcard ro > wildcard rw */
    assert_int_equal(access_of("rw=10.0.0.1,ro=@10.0.0.0/8", "10.0.0.1"), 0);
    assert_int_equal(access_of("rw=10.0.0.1,ro", "10.0.0.1"), 1);
    assert_int_equal(access_of("rw=10.0.0.1,ro", "10.0.0.2"), 0);
    assert_int_equal(access_of("rw,ro=10.0.0.2", "10.0.0.2"), 0);
    assert_int_equal(access_of("rw,ro=10.0.0.2", "10.0.0.3"), 1);
    assert_int_equal(access_of("ro=@10.0.0.0/8", "127.0.0.1"), -1);
    assert_int_equal(access_of("rw=*,ro=*", "1.2.3.4"), 0);
}

static void test_squash(void **state)
{
    (void)state;
    const zpl_cred_t root = {.uid = 0, .gid = 0, .ngroups = 1, .groups = {5}};
    const zpl_cred_t user = {.uid = 1000, .gid = 100, .ngroups = 1, .groups = {5}};
    struct { const char *opts; uint32_t flavor; const zpl_cred_t *in; uint32_t uid, gid, ng; } cases[] = {
        {"on", NFS_AUTH_SYS, &root, 65534, 65534, 0},
        {"on", NFS_AUTH_SYS, &user, 1000, 100, 1},
        {"no_root_squash", NFS_AUTH_SYS, &root, 0, 0, 1},
        {"all_squash,anonuid=7,anongid=8", NFS_AUTH_SYS, &user, 7, 8, 0},
        {"anonuid=7,anongid=8", NFS_AUTH_SYS, &root, 7, 8, 0},
        {"no_root_squash", NFS_AUTH_NONE, &root, 65534, 65534, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nfs_export_opts_t o;
        bool shared;
        assert_int_equal(nfs_opts_parse(cases[i].opts, &o, &shared, NULL, 0), 0);
        zpl_cred_t out;
        nfs_opts_squash(&o, cases[i].flavor, cases[i].in, &out);
        assert_int_equal(out.uid, cases[i].uid);
        assert_int_equal(out.gid, cases[i].gid);
        assert_int_equal(out.ngroups, cases[i].ng);
        nfs_opts_free(&o);
    }
}

static nfs_call_t call_from(const char *client, uint32_t vers, uint32_t uid)
{
    nfs_call_t c;
    memset(&c, 0, sizeof c);
    c.peer = addr(client);
    c.peer_len = sizeof c.peer;
    c.prog = 100003;
    c.vers = vers;
    c.flavor = NFS_AUTH_SYS;
    c.cred.uid = uid;
    c.cred.gid = uid;
    return c;
}

typedef struct suspend_arg {
    nfs_server_t *srv;
    dsl_pool_t *dp;
    const char *name;
    int rc;
} suspend_arg_t;

static void *suspend_thread(void *arg)
{
    suspend_arg_t *sa = arg;
    sa->rc = nfs_server_suspend(sa->srv, sa->dp, sa->name);
    return NULL;
}

static void test_authorize_and_unexport(void **state)
{
    (void)state;
    zfix_t f;
    zfix_make(&f, "nfsexp", 256ull << 20);
    zfix_unmount(&f); /* the server mounts what it exports */
    nfs_server_config_t cfg = {.workers = 2};
    nfs_server_t *srv = NULL;
    char err[256] = "";
    assert_int_equal(nfs_server_start(&cfg, &srv, err, sizeof err), 0);
    assert_int_equal(nfs_server_export(srv, f.dp, f.fsname, "/exp/a", "rw=@10.0.0.0/8,vers=3",
                                       err, sizeof err), 0);
    /* Same path for another dataset: refused. */
    assert_int_equal(nfs_server_export(srv, f.dp, "other/fs", "/exp/a", "on", err, sizeof err),
                     -EEXIST);
    nfs_export_t *e = nfs_export_find_path(srv, "/exp/a/");
    assert_non_null(e);
    assert_null(nfs_export_find_path(srv, "/exp"));
    zpl_cred_t eff;
    bool w;
    nfs_call_t c = call_from("10.1.2.3", 3, 0);
    assert_int_equal(nfs_export_authorize(e, &c, &eff, &w), 0);
    assert_true(w);
    assert_int_equal(eff.uid, 65534);
    c = call_from("10.1.2.3", 4, 1000);
    assert_int_equal(nfs_export_authorize(e, &c, &eff, &w), -EACCES);   /* vers=3 */
    c = call_from("127.0.0.1", 3, 1000);
    assert_int_equal(nfs_export_authorize(e, &c, &eff, &w), -EACCES);

    /* New options apply in place to the held export. */
    assert_int_equal(nfs_server_export(srv, f.dp, f.fsname, "/exp/a", "ro,no_root_squash", err,
                                       sizeof err), 0);
    c = call_from("127.0.0.1", 4, 0);
    assert_int_equal(nfs_export_authorize(e, &c, &eff, &w), 0);
    assert_false(w);
    assert_int_equal(eff.uid, 0);

    /* A handle finds its export; after unexport it finds nothing. */
    zpl_node_t *root;
    assert_int_equal(zpl_root(nfs_export_fs(e), &root), 0);
    zpl_fh_t fh;
    assert_int_equal(zpl_fh_encode(root, &fh), 0);
    zpl_node_rele(root);
    nfs_export_t *e2;
    assert_int_equal(nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e2), 0);
    assert_ptr_equal(e, e2);
    nfs_export_rele(e2);
    nfs_export_info_t info[4];
    assert_int_equal(nfs_server_list_exports(srv, info, 4), 1);
    assert_string_equal(info[0].path, "/exp/a");
    assert_string_equal(info[0].options, "ro,no_root_squash");
    assert_int_equal(info[0].versions, (1u << 3) | (1u << 4));
    nfs_export_rele(e);

    /* Suspended: still listed, its handles answer "later" (EAGAIN: JUKEBOX), never
     * STALE, and its dataset is unheld (a rollback goes through); resumed, the same
     * handle works again. */
    char snap[200], renamed[200];
    snprintf(snap, sizeof snap, "%s@s", f.fsname);
    snprintf(renamed, sizeof renamed, "%s/renamed", f.pool);
    assert_int_equal(dsl_snapshot(f.dp, snap, false, err, sizeof err), 0);
    assert_int_equal(dsl_rollback(f.dp, snap, false, err, sizeof err), -EBUSY);
    assert_int_equal(nfs_server_suspend(srv, f.dp, f.fsname), 1);
    assert_int_equal(nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e2), -EAGAIN);
    assert_null(e2);
    assert_int_equal(nfs_export_lookup_path(srv, "/exp/a", false, &e2), -EAGAIN);
    assert_int_equal(nfs_server_list_exports(srv, info, 4), 1);
    assert_int_equal(dsl_rollback(f.dp, snap, false, err, sizeof err), 0);
    nfs_server_resume(srv, f.dp, f.fsname);
    assert_int_equal(nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e2), 0);
    assert_int_equal(zpl_fh_to_inode(nfs_export_fs(e2), fh.bytes, sizeof fh.bytes, &root), 0);
    zpl_node_rele(root);
    nfs_export_rele(e2);
    /* A call in flight when the suspension starts: suspend waits for it, and the
     * call's end wakes it up. */
    assert_int_equal(nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e2), 0);
    suspend_arg_t sa = {.srv = srv, .dp = f.dp, .name = f.fsname};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, suspend_thread, &sa), 0);
    nfs_export_t *e3 = NULL;
    for (int i = 0; i < 3000; i++) {
        if (nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e3) == -EAGAIN) break;
        nfs_export_rele(e3);
        usleep(1000);
    }
    assert_null(e3);
    nfs_export_rele(e2);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    assert_int_equal(pthread_timedjoin_np(t, NULL, &until), 0);
    assert_int_equal(sa.rc, 1);
    nfs_server_resume(srv, f.dp, f.fsname);

    /* Renamed while exported: the export follows the new name, handles still work. */
    assert_int_equal(dsl_dataset_rename(f.dp, f.fsname, renamed, err, sizeof err), 0);
    nfs_server_rename(srv, f.dp, f.fsname, renamed);
    assert_int_equal(nfs_server_list_exports(srv, info, 4), 1);
    assert_string_equal(info[0].dataset, renamed);
    assert_int_equal(nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e2), 0);
    nfs_export_rele(e2);
    assert_int_equal(nfs_server_suspend(srv, f.dp, "nothing/here"), 0);

    assert_int_equal(nfs_server_unexport(srv, renamed), 0);
    assert_int_equal(nfs_server_unexport(srv, renamed), -ENOENT);
    assert_int_equal(nfs_export_lookup_fh(srv, fh.bytes, sizeof fh.bytes, &e2), -ESTALE);
    assert_int_equal(nfs_server_list_exports(srv, info, 4), 0);
    nfs_server_stop(srv);
    zfix_destroy(&f);
}

/* `cairn set` refuses a host name that does not resolve, with one line naming it;
 * syntax alone (nfs_sharenfs_check) does not resolve. */
static void test_check_names(void **state)
{
    (void)state;
    char err[256] = "";
    bool names = true;
    assert_int_equal(nfs_sharenfs_check_names("rw=@10.0.0.0/8,ro=127.0.0.1", &names, err, sizeof err), 0);
    assert_false(names);
    assert_int_equal(nfs_sharenfs_check_names("rw=localhost:@10.0.0.0/8", &names, err, sizeof err), 0);
    assert_true(names);
    assert_int_equal(nfs_sharenfs_check_names("rw=@10.0.0.0/8,ro=no-such-host.invalid", &names, err,
                                              sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no-such-host.invalid"));
    assert_non_null(strstr(err, "does not resolve"));
    assert_null(strchr(err, '\n'));
    assert_int_equal(nfs_sharenfs_check("rw=no-such-host.invalid", NULL, err, sizeof err), 0);
    assert_int_equal(nfs_sharenfs_check_names("rw=", NULL, err, sizeof err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_check_names),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_squash),
        cmocka_unit_test(test_authorize_and_unexport),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
