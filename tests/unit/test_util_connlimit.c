/* Per-address connection counts and the admission rule the NFS server and the
 * iSCSI target share (include/cairn/connlimit.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/connlimit.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static conn_addr_t v4(const char *s)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(1234)};
    assert_int_equal(inet_pton(AF_INET, s, &sin.sin_addr), 1);
    conn_addr_t a;
    conn_addr_from((struct sockaddr *)&sin, &a);
    return a;
}

static conn_addr_t v6(const char *s)
{
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(99)};
    assert_int_equal(inet_pton(AF_INET6, s, &sin6.sin6_addr), 1);
    conn_addr_t a;
    conn_addr_from((struct sockaddr *)&sin6, &a);
    return a;
}

/* The port does not count, and an IPv4 client on a dual-stack socket is the
 * same client as on an IPv4 one. */
static void test_addresses(void **state)
{
    (void)state;
    conn_addr_t a = v4("192.0.2.7"), b = v6("::ffff:192.0.2.7"), c = v6("2001:db8::1");
    assert_true(conn_addr_equal(&a, &b));
    assert_false(conn_addr_equal(&a, &c));
    char buf[64];
    conn_addr_string(&b, buf, sizeof buf);
    assert_string_equal(buf, "192.0.2.7");
    conn_addr_string(&c, buf, sizeof buf);
    assert_string_equal(buf, "2001:db8::1");
}

static void test_counts(void **state)
{
    (void)state;
    conn_limits_t l;
    assert_int_equal(conn_limits_init(&l, 100, 10), 0);
    conn_addr_t a = v4("10.0.0.1"), b = v4("10.0.0.2");
    for (int i = 0; i < 3; i++) assert_int_equal(conn_limits_add(&l, &a), 0);
    assert_int_equal(conn_limits_add(&l, &b), 0);
    assert_int_equal(conn_limits_count(&l, &a), 3);
    assert_int_equal(conn_limits_count(&l, &b), 1);
    assert_int_equal(l.total, 4);
    conn_limits_del(&l, &b);
    conn_limits_del(&l, &b); /* not counted any more: nothing happens */
    assert_int_equal(conn_limits_count(&l, &b), 0);
    assert_int_equal(l.total, 3);
    /* Many addresses, some sharing buckets. */
    for (unsigned i = 0; i < 5000; i++) {
        char s[32];
        snprintf(s, sizeof s, "10.1.%u.%u", i / 256, i % 256);
        conn_addr_t x = v4(s);
        assert_int_equal(conn_limits_add(&l, &x), 0);
    }
    assert_int_equal(l.total, 5003);
    for (unsigned i = 0; i < 5000; i++) {
        char s[32];
        snprintf(s, sizeof s, "10.1.%u.%u", i / 256, i % 256);
        conn_addr_t x = v4(s);
        assert_int_equal(conn_limits_count(&l, &x), 1);
        conn_limits_del(&l, &x);
    }
    assert_int_equal(l.total, 3);
    assert_int_equal(conn_limits_count(&l, &a), 3);
    conn_limits_fini(&l);
}

static conn_verdict_t admit(conn_limits_t *l, const char *who, conn_addr_t *victim)
{
    conn_addr_t a = v4(who);
    unsigned n = 0;
    return conn_limits_admit(l, &a, victim, &n);
}

/* Total 8, 4 per client: the per-client cap first; when full, a newcomer
 * displaces the biggest holder only if that one holds two more than it. */
static void test_admission(void **state)
{
    (void)state;
    conn_limits_t l;
    assert_int_equal(conn_limits_init(&l, 8, 4), 0);
    conn_addr_t victim, a = v4("10.0.0.2"), b = v4("10.0.0.3"), c = v4("10.0.0.4");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(admit(&l, "10.0.0.2", &victim), CONN_ADMIT);
        conn_limits_add(&l, &a);
    }
    assert_int_equal(admit(&l, "10.0.0.2", &victim), CONN_REFUSE_CLIENT);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(admit(&l, "10.0.0.3", &victim), CONN_ADMIT);
        conn_limits_add(&l, &b);
    }
    /* Full: a newcomer takes the place of one of a biggest holder's. */
    assert_int_equal(admit(&l, "10.0.0.4", &victim), CONN_ADMIT_EVICT);
    assert_true(conn_addr_equal(&victim, &a) || conn_addr_equal(&victim, &b));
    conn_limits_del(&l, &victim);
    conn_limits_add(&l, &c);
    assert_int_equal(admit(&l, "10.0.0.4", &victim), CONN_ADMIT_EVICT);
    conn_limits_del(&l, &victim);
    conn_limits_add(&l, &c);
    /* 3, 3, 2: nobody holds two more than 10.0.0.4, nor than 10.0.0.2. */
    assert_int_equal(conn_limits_count(&l, &c), 2);
    assert_int_equal(admit(&l, "10.0.0.4", &victim), CONN_REFUSE_FULL);
    assert_int_equal(admit(&l, "10.0.0.2", &victim), CONN_REFUSE_FULL);
    /* A new client still gets in. */
    assert_int_equal(admit(&l, "10.0.0.9", &victim), CONN_ADMIT_EVICT);
    assert_false(conn_addr_equal(&victim, &c));
    /* Room again: plain admission. */
    conn_limits_del(&l, &a);
    assert_int_equal(admit(&l, "10.0.0.4", &victim), CONN_ADMIT);
    conn_limits_fini(&l);
}

static void test_log_rate(void **state)
{
    (void)state;
    conn_limits_t l;
    assert_int_equal(conn_limits_init(&l, 1, 1), 0);
    uint64_t held = 99;
    assert_true(conn_limits_log_ok(&l, CONN_LOG_TOTAL, &held));
    assert_int_equal(held, 0);
    for (int i = 0; i < 5; i++) assert_false(conn_limits_log_ok(&l, CONN_LOG_TOTAL, &held));
    /* Each cap has its own budget. */
    assert_true(conn_limits_log_ok(&l, CONN_LOG_CLIENT, &held));
    /* Once the interval is over, the next line tells how many were held back. */
    l.log_next_ns[CONN_LOG_TOTAL] = 0;
    assert_true(conn_limits_log_ok(&l, CONN_LOG_TOTAL, &held));
    assert_int_equal(held, 5);
    conn_limits_fini(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_log_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
