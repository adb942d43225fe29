/*
 * What recording one NFSv3 call into analytics costs, on its own: the calls
 * nfs_stats.c makes per answered call (total, op, share, latency, size, and
 * net.bytes for a WRITE), in T threads at once over a few keys, as a server's
 * workers do; then with the client and file drill-downs on too (the file's name
 * made once, as there); then op-latency on as well; then with the statistic off (one relaxed load).
 * Reports CPU-ns per call, the figure to set against the tens of microseconds of
 * CPU a call costs the server (docs/benchmarks.md, "Issue 28: analytics").
 *
 *   bench_util_analytics [THREADS [CALLS_PER_THREAD]]     (defaults 2, 2000000)
 */
#include <cairn/analytics.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static unsigned long g_calls = 2000000;

static void name_op(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    snprintf(buf, len, "proc%llu", (unsigned long long)key);
}

static void *one_thread(void *arg)
{
    uint64_t seed = (uintptr_t)arg;
    for (unsigned long i = 0; i < g_calls; i++) {
        uint64_t k = (i + seed) % 8;
        an_add_total(AN_NFS3_OPS, 1);
        an_add(AN_NFS3_OPS, AN_BY_OP, 7, 1, name_op, NULL);
        an_add(AN_NFS3_OPS, AN_BY_SHARE, 1234 + (k & 1), 1, an_name_string, "/tank/share");
        if (an_dim_enabled(AN_NFS3_OPS, AN_BY_CLIENT))
            an_add(AN_NFS3_OPS, AN_BY_CLIENT, an_hash(&k, 4), 1, an_name_string, "192.0.2.1");
        an_add(AN_NFS3_OPS, AN_BY_FILE, k * 977, 1, an_name_string, "/tank/share/f");
        an_add_latency(AN_NFS3_OPS, 40000 + k * 3000, 1);
        an_add_op_latency(AN_NFS3_OPS, 7, 40000 + k * 3000, name_op, NULL);
        an_add_size(AN_NFS3_OPS, 65536, 1);
        an_add_total(AN_NET_BYTES, 65536);
        an_add(AN_NET_BYTES, AN_BY_PROTOCOL, 7, 65536, an_name_string, "nfs3 write");
    }
    return NULL;
}

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/* CPU time (not wall: the machine is shared) per call, over every thread. */
static double run(unsigned threads)
{
    pthread_t t[64];
    uint64_t c0 = cpu_ns();
    for (unsigned i = 0; i < threads; i++) pthread_create(&t[i], NULL, one_thread, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return (double)(cpu_ns() - c0) / ((double)g_calls * threads);
}

int main(int argc, char **argv)
{
    unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
    if (argc > 2) g_calls = strtoul(argv[2], NULL, 10);
    if (threads < 1 || threads > 64) threads = 2;
    printf("defaults (op, share, latency, size, net): %.1f CPU-ns per call\n", run(threads));
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_CLIENT, true);
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_FILE, true);
    printf("with client and file:                     %.1f CPU-ns per call\n", run(threads));
    an_set_dim_enabled(AN_NFS3_OPS, AN_BY_OP_LATENCY, true);
    printf("with client, file and op-latency:         %.1f CPU-ns per call\n", run(threads));
    an_set_all(false);
    printf("analytics off:                            %.1f CPU-ns per call\n", run(threads));
    return 0;
}
