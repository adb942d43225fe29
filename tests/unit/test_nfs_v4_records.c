/*
 * The NFSv4 client records that give clients a grace period after a restart
 * or a takeover (nfs4_state.c, docs/ha.md), end to end in one process: a real
 * server exporting a fixture pool, driven by libnfs NFSv4.0 clients.
 *
 *  - A client that mounts (SETCLIENTID, SETCLIENTID_CONFIRM) but never opens
 *    anything is not recorded, in the pool or in the state directory.
 *  - 200 clients opening a file at once are all recorded, with far fewer
 *    configuration store writes (each one DSL task, one txg) than clients,
 *    and none for their confirmations: the writes are counted and printed.
 *  - The records survive the server: a new server with an empty state
 *    directory (a partner head) exports the pool, starts in grace, and of the
 *    clients that come back only the recorded ones may reclaim.
 *  - A client that closed everything loses its record once its lease runs
 *    out; one that goes silent with a file open keeps it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_srv.h"
#include "../../src/nfs/nfs4_impl.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_zpl_fixture.h"
#pragma GCC diagnostic pop

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <nfsc/libnfs.h>

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libnfs.so\n";
}

#define NCLIENTS 200
#define RECORD_PREFIX "nfs4.client:"

static zfix_t fix;
static nfs_server_t *srv;
static uint16_t port;

static void start_server_leased(const char *state_dir, uint32_t lease, uint32_t grace)
{
    nfs_server_config_t cfg = { 0 };
    strcpy(cfg.nfs.host, "127.0.0.1");
    cfg.nfs.port = port;
    cfg.max_conns_per_client = 4 * NCLIENTS;
    cfg.state_dir = state_dir;
    cfg.lease_seconds = lease;
    cfg.grace_seconds = grace;
    char err[256];
    int rc = -1;
    for (int i = 0; i < 50 && rc; i++) {
        if (!port) cfg.nfs.port = (uint16_t)(30000 + (getpid() * 13 + i * 131) % 30000);
        rc = nfs_server_start(&cfg, &srv, err, sizeof err);
        if (rc && port) usleep(100000);
    }
    if (rc) fail_msg("nfs_server_start: %s", err);
    assert_int_equal(nfs_server_export(srv, fix.dp, fix.fsname, "/tank/share",
                                       "rw,no_root_squash", err, sizeof err), 0);
    uint16_t m, p;
    nfs_server_ports(srv, &port, &m, &p);
}

static void start_server(const char *state_dir) { start_server_leased(state_dir, 30, 30); }

static void state_dir(char *buf, size_t cap, const char *head)
{
    snprintf(buf, cap, "%s/nfs4state-%s", fix.dir, head);
}

static int setup(void **state)
{
    (void)state;
    zfix_make(&fix, "nfs4rec", 512ull << 20);
    zfix_unmount(&fix);
    char dir[700];
    state_dir(dir, sizeof dir, "a");
    start_server(dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nfs_server_stop(srv);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/nfs4state-*", fix.dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of the state dirs failed\n");
    zfix_destroy(&fix);
    return 0;
}

/* A mounted NFSv4.0 client named `name`; NULL (with the reason in err) on failure,
 * so it may run on any thread. */
static struct nfs_context *client_try(const char *name, char *err, size_t cap)
{
    struct nfs_context *nfs = nfs_init_context();
    if (!nfs) {
        snprintf(err, cap, "nfs_init_context");
        return NULL;
    }
    nfs4_set_client_name(nfs, name);
    char url[512];
    snprintf(url, sizeof url, "nfs://127.0.0.1/tank/share?version=4&nfsport=%u", (unsigned)port);
    struct nfs_url *u = nfs_parse_url_dir(nfs, url);
    int rc = u ? nfs_mount(nfs, u->server, u->path) : -EINVAL;
    if (rc) {
        snprintf(err, cap, "mount as %s: %d %s", name, rc, nfs_get_error(nfs));
        nfs_destroy_context(nfs);
        nfs = NULL;
    }
    if (u) nfs_destroy_url(u);
    return nfs;
}

static struct nfs_context *client(const char *name)
{
    char err[512];
    struct nfs_context *nfs = client_try(name, err, sizeof err);
    if (!nfs) fail_msg("%s", err);
    return nfs;
}

static void client_name(char *buf, size_t cap, int i)
{
    snprintf(buf, cap, "cairn-records-%d-%d", (int)getpid(), i);
}

static char *hex_of(const uint8_t *p, uint32_t len)
{
    char *s = malloc((size_t)len * 2 + 1);
    assert_non_null(s);
    for (uint32_t i = 0; i < len; i++) sprintf(s + 2 * i, "%02x", p[i]);
    s[2 * (size_t)len] = 0;
    return s;
}

/* The owner (hex, as the records keep it) of the client that confirmed last,
 * and whether it may reclaim. */
static char *newest_owner(bool *may_reclaim)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    nfs4_client_t *c = st->clients;
    assert_non_null(c);
    char *h = hex_of(c->owner, c->owner_len);
    if (may_reclaim) *may_reclaim = c->may_reclaim;
    pthread_mutex_unlock(&st->lock);
    return h;
}

static bool holds(const nfs_pool_records_t *r, const char *s)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i], s)) return true;
    return false;
}

/* Lines of the state directory's record file, and whether one is `owner`. */
static size_t file_records(const char *dir, const char *owner, bool *found)
{
    char path[800], line[4200];
    snprintf(path, sizeof path, "%s/nfs4-clients", dir);
    *found = false;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        n++;
        if (!strcmp(line, owner)) *found = true;
    }
    fclose(f);
    return n;
}

typedef struct opener {
    pthread_t thread;
    int index;
    pthread_barrier_t *mounted, *opened;
    struct nfs_context *nfs;
    struct nfsfh *fh;
    char err[512];
} opener_t;

/* Mounts, waits for every other client to have mounted, opens its own file,
 * and says so; the context stays (and its open with it) for the checks. */
static void *opener_run(void *arg)
{
    opener_t *o = arg;
    char name[64];
    client_name(name, sizeof name, o->index);
    o->nfs = client_try(name, o->err, sizeof o->err);
    pthread_barrier_wait(o->mounted);
    if (o->nfs) {
        char path[32];
        snprintf(path, sizeof path, "/f%d", o->index);
        int rc = nfs_open2(o->nfs, path, O_CREAT | O_RDWR, 0644, &o->fh);
        if (rc) snprintf(o->err, sizeof o->err, "open %s: %d %s", path, rc, nfs_get_error(o->nfs));
    }
    pthread_barrier_wait(o->opened);
    return NULL;
}

static opener_t openers[NCLIENTS];
static char *idle_owner;
static char *opener_owner;

static void test_records_for_state_only_and_batched(void **state)
{
    (void)state;
    uint64_t w0 = dsl_pool_config_writes(fix.dp);

    char name[64];
    client_name(name, sizeof name, -1);
    struct nfs_context *idle = client(name);
    idle_owner = newest_owner(NULL);
    struct nfs_stat_64 sb;
    assert_int_equal(nfs_stat64(idle, "/", &sb), 0);

    pthread_barrier_t mounted, opened;
    pthread_barrier_init(&mounted, NULL, NCLIENTS + 1);
    pthread_barrier_init(&opened, NULL, NCLIENTS + 1);
    for (int i = 0; i < NCLIENTS; i++) {
        openers[i] = (opener_t){ .index = i, .mounted = &mounted, .opened = &opened };
        assert_int_equal(pthread_create(&openers[i].thread, NULL, opener_run, &openers[i]), 0);
    }
    pthread_barrier_wait(&mounted);
    uint64_t w_mounted = dsl_pool_config_writes(fix.dp);
    pthread_barrier_wait(&opened);
    uint64_t w_opened = dsl_pool_config_writes(fix.dp);
    for (int i = 0; i < NCLIENTS; i++) {
        pthread_join(openers[i].thread, NULL);
        if (openers[i].err[0]) fail_msg("client %d: %s", i, openers[i].err);
    }
    pthread_barrier_destroy(&mounted);
    pthread_barrier_destroy(&opened);
    printf("%d clients: %llu configuration store writes for their confirmations, "
           "%llu for their first opens\n", NCLIENTS, (unsigned long long)(w_mounted - w0),
           (unsigned long long)(w_opened - w_mounted));

    /* Confirming costs nothing; the opens are written in batches. */
    assert_int_equal(w_mounted, w0);
    assert_true(w_opened > w_mounted);
    assert_true(w_opened - w_mounted <= NCLIENTS / 4);

    nfs_pool_records_t r;
    nfs_pool_records_load(fix.dp, RECORD_PREFIX, &r);
    assert_int_equal(r.n, NCLIENTS);
    assert_false(holds(&r, idle_owner));
    nfs_pool_records_free(&r);
    char dir[700];
    state_dir(dir, sizeof dir, "a");
    bool found;
    assert_int_equal(file_records(dir, idle_owner, &found), NCLIENTS);
    assert_false(found);

    /* The owner of one opener, as recorded: the client that reclaims below. */
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    for (nfs4_client_t *c = st->clients; c && !opener_owner; c = c->next)
        if (c->recorded) opener_owner = hex_of(c->owner, c->owner_len);
    pthread_mutex_unlock(&st->lock);
    assert_non_null(opener_owner);
    nfs_pool_records_load(fix.dp, RECORD_PREFIX, &r);
    assert_true(holds(&r, opener_owner));
    nfs_pool_records_free(&r);
    nfs_destroy_context(idle);
}

static bool in_grace(void)
{
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    bool g = nfs4_in_grace(st);
    pthread_mutex_unlock(&st->lock);
    return g;
}

static void test_records_survive_and_gate_reclaim(void **state)
{
    (void)state;
    assert_non_null(idle_owner);
    /* Head a goes away with its clients' state; head b knows nothing but the
     * pool (an empty state directory of its own). */
    for (int i = 0; i < NCLIENTS; i++) nfs_destroy_context(openers[i].nfs);
    nfs_server_stop(srv);
    srv = NULL;
    char dir[700];
    state_dir(dir, sizeof dir, "b");
    start_server(dir);
    assert_true(in_grace());
    nfs4_server_t *st = nfs_server_nfs4_state(srv);
    pthread_mutex_lock(&st->lock);
    size_t reclaimable = st->nreclaimable;
    pthread_mutex_unlock(&st->lock);
    assert_int_equal(reclaimable, NCLIENTS);

    /* The idle client comes back: it may not reclaim. */
    char name[64];
    client_name(name, sizeof name, -1);
    struct nfs_context *idle = client(name);
    bool may_reclaim = true;
    char *owner = newest_owner(&may_reclaim);
    assert_string_equal(owner, idle_owner);
    assert_false(may_reclaim);
    free(owner);

    /* Openers that come back may. */
    for (int i = 0; i < 5; i++) {
        client_name(name, sizeof name, i);
        struct nfs_context *c = client(name);
        may_reclaim = false;
        free(newest_owner(&may_reclaim));
        assert_true(may_reclaim);
        nfs_destroy_context(c);
    }
    nfs_destroy_context(idle);

    /* b's own records now hold the pool's clients (until grace ends), still
     * not the idle one. */
    nfs_pool_records_t r;
    nfs_pool_records_load(fix.dp, RECORD_PREFIX, &r);
    assert_true(holds(&r, opener_owner));
    assert_false(holds(&r, idle_owner));
    nfs_pool_records_free(&r);
    free(idle_owner);
    free(opener_owner);
    idle_owner = opener_owner = NULL;
}

static bool pool_holds(const char *owner)
{
    nfs_pool_records_t r;
    nfs_pool_records_load(fix.dp, RECORD_PREFIX, &r);
    bool h = holds(&r, owner);
    nfs_pool_records_free(&r);
    return h;
}

static void test_record_goes_with_the_state(void **state)
{
    (void)state;
    nfs_server_stop(srv);
    srv = NULL;
    char dir[700];
    state_dir(dir, sizeof dir, "c");
    start_server_leased(dir, 2, 2);
    /* The pool's clients of the runs before never come back: grace runs out. */
    for (int i = 0; i < 100 && in_grace(); i++) usleep(100000);
    assert_false(in_grace());

    char name[64];
    client_name(name, sizeof name, 1000);
    struct nfs_context *keeper = client(name);
    char *keeper_owner = newest_owner(NULL);
    struct nfsfh *kf;
    assert_int_equal(nfs_open2(keeper, "/kept", O_CREAT | O_RDWR, 0644, &kf), 0);
    client_name(name, sizeof name, 1001);
    struct nfs_context *closer = client(name);
    char *closer_owner = newest_owner(NULL);
    struct nfsfh *cf;
    assert_int_equal(nfs_open2(closer, "/closed", O_CREAT | O_RDWR, 0644, &cf), 0);
    /* Both replies came after their records were on disk. */
    assert_true(pool_holds(keeper_owner));
    assert_true(pool_holds(closer_owner));
    assert_int_equal(nfs_close(closer, cf), 0);

    /* Both go silent; a third client's requests run the reaper meanwhile. */
    client_name(name, sizeof name, 1002);
    struct nfs_context *watcher = client(name);
    char *watcher_owner = newest_owner(NULL);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        struct nfs_stat_64 sb;
        assert_int_equal(nfs_stat64(watcher, "/", &sb), 0);
        gone = !pool_holds(closer_owner);
        if (!gone) usleep(100000);
    }
    assert_true(gone);
    assert_true(pool_holds(keeper_owner));
    assert_false(pool_holds(watcher_owner));
    nfs_destroy_context(watcher);
    nfs_destroy_context(closer);
    nfs_destroy_context(keeper);
    free(keeper_owner);
    free(closer_owner);
    free(watcher_owner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_for_state_only_and_batched),
        cmocka_unit_test(test_records_survive_and_gate_reclaim),
        cmocka_unit_test(test_record_goes_with_the_state),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
