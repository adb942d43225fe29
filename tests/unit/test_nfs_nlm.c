/* NFSv3 locking rules that need no transport: NLM offsets and lengths (32-bit
 * in v1/v3, 64-bit in v4, length 0 = to the end), the statuses each version may
 * send, and NLM locks in the one lock table they share with NFSv4: conflicts
 * both ways, fcntl-style splitting and merging that keeps each range's kind. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../../src/nfs/nfs_srv.h"
#include "../../src/nfs/nlm_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int V4;   /* an NFSv4 lock owner (any pointer will do) */

static void test_wire_ranges(void **state)
{
    (void)state;
    uint64_t f, l, off, len;
    nlm_range_from_wire(10, 5, &f, &l);
    assert_true(f == 10 && l == 14);
    nlm_range_from_wire(1000, 0, &f, &l);               /* to the end of any file */
    assert_true(f == 1000 && l == UINT64_MAX);
    nlm_range_from_wire(UINT64_MAX - 1, 10, &f, &l);    /* past 2^64: to the end */
    assert_true(f == UINT64_MAX - 1 && l == UINT64_MAX);
    nlm_range_from_wire(UINT64_MAX, 1, &f, &l);
    assert_true(f == UINT64_MAX && l == UINT64_MAX);

    nlm_range_to_wire(4, 1000, UINT64_MAX, &off, &len);
    assert_true(off == 1000 && len == 0);
    nlm_range_to_wire(4, 1ull << 40, (1ull << 40) + 99, &off, &len);
    assert_true(off == 1ull << 40 && len == 100);
    /* v1/v3 holders: 32 bits; what does not fit reaches the end. */
    nlm_range_to_wire(3, 10, 19, &off, &len);
    assert_true(off == 10 && len == 10);
    nlm_range_to_wire(1, 1ull << 40, (1ull << 40) + 99, &off, &len);
    assert_true(off == UINT32_MAX && len == 0);
    nlm_range_to_wire(3, 4000000000ull, 4000000000ull + 500000000ull, &off, &len);
    assert_true(off == 4000000000ull && len == 0);
}

static void test_stats_per_version(void **state)
{
    (void)state;
    assert_int_equal(nlm_stat_for(4, NLM_STALE_FH), NLM_STALE_FH);
    assert_int_equal(nlm_stat_for(4, NLM_DENIED_GRACE_PERIOD), NLM_DENIED_GRACE_PERIOD);
    assert_int_equal(nlm_stat_for(3, NLM_DENIED_GRACE_PERIOD), NLM_DENIED_GRACE_PERIOD);
    assert_int_equal(nlm_stat_for(3, NLM_STALE_FH), NLM_DENIED_NOLOCKS);
    assert_int_equal(nlm_stat_for(1, NLM_FAILED), NLM_DENIED_NOLOCKS);
    assert_int_equal(nlm_stat_for(1, NLM_DEADLCK), NLM_DENIED);
    assert_int_equal(nlm_stat_for(1, NLM_BLOCKED), NLM_BLOCKED);
}

static void test_v3_v4_one_table(void **state)
{
    (void)state;
    nlm_owner_t *a = nlm_owner_alloc("hosta", 7, (const uint8_t *)"7@hosta", 7);
    nlm_owner_t *b = nlm_owner_alloc("hostb", 7, (const uint8_t *)"7@hostb", 7);
    assert_non_null(a);
    assert_non_null(b);
    char name[96];
    nlm_owner_name(a, name, sizeof name);
    assert_string_equal(name, "nlm:hosta:7");

    nfs4_range_list_t L = {0};
    uint64_t f, l;
    nlm_range_from_wire(0, 100, &f, &l);
    assert_int_equal(nfs4_range_set_tagged(&L, a, f, l, WRITE_LT, true), 0);
    /* v4 against an NLM lock, and the reverse. */
    long k = nfs4_range_conflict(&L, &V4, 50, 59, READ_LT);
    assert_int_equal(k, 0);
    assert_true(L.v[k].nlm && L.v[k].owner == a);
    assert_int_equal(nfs4_range_set(&L, &V4, 200, 299, WRITE_LT), 0);
    k = nfs4_range_conflict(&L, a, 250, 250, READ_LT);
    assert_true(k >= 0 && !L.v[k].nlm && L.v[k].owner == &V4);
    /* Same host, other process: another owner. */
    assert_true(nfs4_range_conflict(&L, b, 0, 0, READ_LT) >= 0);
    assert_int_equal(nfs4_range_conflict(&L, b, 100, 199, WRITE_LT), -1);

    /* An NLM unlock in the middle splits only its owner's range, both halves
     * still NLM's; v4's range is untouched. */
    assert_int_equal(nfs4_range_clear(&L, a, 40, 59), 0);
    assert_int_equal(L.n, 3);
    size_t nlm_ranges = 0;
    for (size_t i = 0; i < L.n; i++) {
        if (L.v[i].owner == a) {
            nlm_ranges++;
            assert_true(L.v[i].nlm);
            assert_true((L.v[i].first == 0 && L.v[i].last == 39) ||
                        (L.v[i].first == 60 && L.v[i].last == 99));
        } else {
            assert_false(L.v[i].nlm);
            assert_true(L.v[i].first == 200 && L.v[i].last == 299);
        }
    }
    assert_int_equal(nlm_ranges, 2);
    assert_int_equal(nfs4_range_conflict(&L, b, 40, 59, WRITE_LT), -1);
    /* Filling the hole merges the owner's ranges back into one; a read lock
     * there would not merge with write neighbours. */
    assert_int_equal(nfs4_range_set_tagged(&L, a, 40, 59, WRITE_LT, true), 0);
    assert_int_equal(L.n, 2);
    /* A lock to the end of the file covers any 64-bit offset. */
    nlm_range_from_wire(1000, 0, &f, &l);
    assert_int_equal(nfs4_range_set_tagged(&L, b, f, l, READ_LT, true), 0);
    assert_true(nfs4_range_conflict(&L, &V4, 1ull << 62, 1ull << 62, WRITE_LT) >= 0);
    assert_int_equal(nfs4_range_conflict(&L, &V4, 1ull << 62, 1ull << 62, READ_LT), -1);
    /* FREE_ALL of a host drops its owners' ranges, nobody else's. */
    nfs4_range_drop_owner(&L, a);
    assert_false(nfs4_range_owner_holds(&L, a));
    assert_true(nfs4_range_owner_holds(&L, b));
    assert_true(nfs4_range_owner_holds(&L, &V4));
    nfs4_range_free(&L);
    nlm_owner_free_one(a);
    nlm_owner_free_one(b);
}

/* "NAME@CALLED>SERVER/POOL;" per entry: the address to call, and what the
 * notification will name (the server address) for which pool. */
static void collect(const nsm_record_t *rec, const struct sockaddr_storage *addr, void *arg)
{
    char *out = arg, a[64];
    nfs_addr_string((const struct sockaddr *)addr, a, sizeof a);
    snprintf(out + strlen(out), 256 - strlen(out), "%s@%s>%s/%s;", rec->name, a, rec->server,
             rec->pool);
}

/* The lines of nlm-hosts and the pools' nlm.host records: the server address
 * and pool added after the client's address, older two-field lines still read. */
static void test_nsm_record(void **state)
{
    (void)state;
    nsm_record_t r = {.name = "client-a", .client = "10.0.0.7", .server = "192.0.2.101",
                      .pool = "tank"};
    char line[2048];
    assert_int_equal(nsm_record_format(&r, line, sizeof line), 34);
    assert_string_equal(line, "client-a 10.0.0.7 192.0.2.101 tank");
    nsm_record_t back;
    assert_int_equal(nsm_record_parse(line, &back), 0);
    assert_string_equal(back.name, "client-a");
    assert_string_equal(back.client, "10.0.0.7");
    assert_string_equal(back.server, "192.0.2.101");
    assert_string_equal(back.pool, "tank");

    /* Unknown fields are "-" on disk and "" in memory. */
    nsm_record_t bare = {.name = "h", .server = "2001:db8::1"};
    assert_true(nsm_record_format(&bare, line, sizeof line) > 0);
    assert_string_equal(line, "h - 2001:db8::1 -");
    assert_int_equal(nsm_record_parse(line, &back), 0);
    assert_string_equal(back.client, "");
    assert_string_equal(back.server, "2001:db8::1");
    assert_string_equal(back.pool, "");

    /* The old form (before server addresses were kept), as an older head wrote it. */
    assert_int_equal(nsm_record_parse("client-b 10.0.0.8\n", &back), 0);
    assert_string_equal(back.name, "client-b");
    assert_string_equal(back.client, "10.0.0.8");
    assert_string_equal(back.server, "");
    assert_string_equal(back.pool, "");
    assert_int_equal(nsm_record_parse("client-c -", &back), 0);
    assert_string_equal(back.client, "");
    /* An older reader takes the first two fields ("%s %s") and ignores the rest. */
    char name[64], addr[64];
    assert_int_equal(sscanf("client-a 10.0.0.7 192.0.2.101 tank", "%63s %63s", name, addr), 2);
    assert_string_equal(addr, "10.0.0.7");

    assert_int_equal(nsm_record_parse("", &back), -EINVAL);
    assert_int_equal(nsm_record_parse("lonely", &back), -EINVAL);
    char longaddr[200];
    memset(longaddr, '1', sizeof longaddr - 1);
    longaddr[sizeof longaddr - 1] = '\0';
    snprintf(line, sizeof line, "h 10.0.0.1 %s tank", longaddr);
    assert_int_equal(nsm_record_parse(line, &back), -EINVAL);
    nsm_record_t spaced = {.name = "a b", .client = "10.0.0.1"};
    assert_int_equal(nsm_record_format(&spaced, line, sizeof line), -1);
    assert_int_equal(nsm_record_format(&r, line, 10), -1);   /* does not fit */
}

/* Accepts one connection on the listening socket *arg points at and leaves the
 * caller's address, as text, in it for the test (what a statd's source check sees). */
static char accepted_from[64];
static void *accept_one(void *arg)
{
    int ls = *(int *)arg;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept(ls, (struct sockaddr *)&ss, &sl);
    if (fd >= 0) {
        nfs_addr_string((struct sockaddr *)&ss, accepted_from, sizeof accepted_from);
        close(fd);   /* no answer: the call ends at once */
    }
    return NULL;
}

/* SM_NOTIFY leaves from the recorded service address: the call binds it (an
 * IPv4 source for an IPv4-mapped peer too), and an address that is not this
 * host's (a service address not up yet) is EADDRNOTAVAIL, which makes the
 * notification wait rather than go out from another address. */
static void test_call_from_source(void **state)
{
    (void)state;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(ls >= 0);
    struct sockaddr_in at = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
    assert_int_equal(bind(ls, (struct sockaddr *)&at, sizeof at), 0);
    assert_int_equal(listen(ls, 4), 0);
    socklen_t al = sizeof at;
    assert_int_equal(getsockname(ls, (struct sockaddr *)&at, &al), 0);
    uint16_t port = ntohs(at.sin_port);

    struct sockaddr_storage peer = {0}, source = {0};
    memcpy(&peer, &at, sizeof at);
    struct sockaddr_in *src = (struct sockaddr_in *)&source;
    src->sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.2", &src->sin_addr);
    uint8_t *res = NULL;
    size_t rlen = 0;
    pthread_t t;
    accepted_from[0] = '\0';
    assert_int_equal(pthread_create(&t, NULL, accept_one, &ls), 0);
    int rc = nlm_rpc_call_from(&source, &peer, 0, port, NFS_PROG_NSM, 1, SM_NOTIFY, NULL, 0,
                               &res, &rlen);
    pthread_join(t, NULL);
    assert_true(rc < 0);                       /* nobody answered */
    assert_string_equal(accepted_from, "127.0.0.2");
    free(res);

    /* Without a source: whatever the kernel picks (127.0.0.1 on loopback). */
    accepted_from[0] = '\0';
    assert_int_equal(pthread_create(&t, NULL, accept_one, &ls), 0);
    nlm_rpc_call_from(NULL, &peer, 0, port, NFS_PROG_NSM, 1, SM_NOTIFY, NULL, 0, &res, &rlen);
    pthread_join(t, NULL);
    assert_string_equal(accepted_from, "127.0.0.1");
    close(ls);

    /* TEST-NET-1 is no address of this host (unless the host binds any address). */
    FILE *f = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "r");
    int nonlocal = 0;
    if (f) {
        if (fscanf(f, "%d", &nonlocal) != 1) nonlocal = 0;
        fclose(f);
    }
    if (!nonlocal) {
        inet_pton(AF_INET, "192.0.2.1", &src->sin_addr);
        assert_int_equal(nlm_rpc_call_from(&source, &peer, 0, port, NFS_PROG_NSM, 1, SM_NOTIFY,
                                           NULL, 0, &res, &rlen),
                         -EADDRNOTAVAIL);
    }
    /* An IPv6 source for an IPv4 peer cannot be. */
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&source;
    memset(&source, 0, sizeof source);
    s6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8::1", &s6->sin6_addr);
    assert_int_equal(nlm_rpc_call_from(&source, &peer, 0, port, NFS_PROG_NSM, 1, SM_NOTIFY, NULL,
                                       0, &res, &rlen),
                     -EADDRNOTAVAIL);
}

/* NSM's persisted state: an odd state number bumped at each start, the hosts
 * holding locks listed so the next start notifies them, kept through a stop. */
static void test_nsm_persistence(void **state)
{
    (void)state;
    const char *base = getenv("CAIRN_TEST_TMP");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/nsmXXXXXX", base && base[0] ? base : "/tmp");
    if (base) mkdir(base, 0700);
    assert_non_null(mkdtemp(dir));
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(700)};
    inet_pton(AF_INET, "127.0.0.7", &sin.sin_addr);
    /* Two service addresses of ours, as IPv4-mapped as a dual-stack listener sees them. */
    struct sockaddr_in6 svc1 = {.sin6_family = AF_INET6, .sin6_port = htons(2049)};
    inet_pton(AF_INET6, "::ffff:127.0.0.9", &svc1.sin6_addr);
    struct sockaddr_in svc2 = {.sin_family = AF_INET, .sin_port = htons(2049)};
    inet_pton(AF_INET, "127.0.0.10", &svc2.sin_addr);

    bool had = true;
    nsm_state_t *ns = nsm_open(dir, &had);
    assert_non_null(ns);
    assert_false(had);
    uint32_t s1 = nsm_state_number(ns);
    assert_true(s1 & 1);
    nsm_host_active(ns, "h1", (struct sockaddr *)&sin, (struct sockaddr *)&svc1, "tank");
    nsm_host_active(ns, "h1", (struct sockaddr *)&sin, (struct sockaddr *)&svc2, "tank2");
    nsm_host_active(ns, "h2", (struct sockaddr *)&sin, NULL, NULL);
    nsm_host_idle(ns, "h2");          /* let go: not monitored any more */
    assert_true(nsm_host_is(ns, "h1", (struct sockaddr *)&sin));
    assert_true(nsm_host_is(ns, "unknown", (struct sockaddr *)&sin));
    struct sockaddr_in other = sin;
    inet_pton(AF_INET, "127.0.0.8", &other.sin_addr);
    assert_false(nsm_host_is(ns, "h1", (struct sockaddr *)&other));
    nsm_close(ns);

    ns = nsm_open(dir, &had);          /* a restart (even a crash: written at once) */
    assert_true(had);
    assert_int_equal(nsm_state_number(ns), s1 + 2);
    char seen[256] = "";
    nsm_foreach_previous(ns, collect, seen);
    /* One entry per address of ours the host reached: its statd monitors each. */
    assert_int_equal(strlen(seen), strlen("h1@127.0.0.7>127.0.0.9/tank;h1@127.0.0.7>127.0.0.10/tank2;"));
    assert_non_null(strstr(seen, "h1@127.0.0.7>127.0.0.9/tank;"));
    assert_non_null(strstr(seen, "h1@127.0.0.7>127.0.0.10/tank2;"));
    nsm_host_active(ns, "h1", (struct sockaddr *)&sin, (struct sockaddr *)&svc1, "tank");   /* it reclaimed */
    nsm_freeze(ns);                    /* a stop releases everything: still listed */
    nsm_host_idle(ns, "h1");
    nsm_close(ns);

    ns = nsm_open(dir, &had);
    assert_true(had);
    assert_int_equal(nsm_state_number(ns), s1 + 4);
    nsm_prune_previous(ns);            /* grace over, h1 never came back */
    nsm_close(ns);
    ns = nsm_open(dir, &had);
    assert_false(had);
    nsm_close(ns);

    /* A host list written before server addresses were kept: read, nothing to bind. */
    char path[600];
    snprintf(path, sizeof path, "%s/nlm-hosts", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "h3 127.0.0.5\n");
    fclose(f);
    ns = nsm_open(dir, &had);
    assert_true(had);
    seen[0] = '\0';
    nsm_foreach_previous(ns, collect, seen);
    assert_string_equal(seen, "h3@127.0.0.5>/;");
    nsm_prune_previous(ns);
    nsm_close(ns);

    /* An even number on disk (written by someone else): the next odd one. */
    snprintf(path, sizeof path, "%s/nsm-state", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "10\n");
    fclose(f);
    ns = nsm_open(dir, &had);
    assert_int_equal(nsm_state_number(ns), 11);
    nsm_close(ns);
    snprintf(path, sizeof path, "%s/nsm-state", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/nlm-hosts", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_ranges),
        cmocka_unit_test(test_stats_per_version),
        cmocka_unit_test(test_v3_v4_one_table),
        cmocka_unit_test(test_nsm_record),
        cmocka_unit_test(test_call_from_source),
        cmocka_unit_test(test_nsm_persistence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
