/* Latency histograms of include/cairn/stats.h. */
#include <cairn/stats.h>

const uint64_t cairn_hist_bound_ns[CAIRN_HIST_BUCKETS - 1] = {
    50000,     100000,     250000,     500000,     1000000,     2500000,
    5000000,   10000000,   25000000,   50000000,   100000000,   250000000,
    500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

void cairn_hist_record(cairn_hist_t *h, uint64_t ns)
{
    unsigned i = 0;
    while (i < CAIRN_HIST_BUCKETS - 1 && ns > cairn_hist_bound_ns[i]) i++;
    cairn_counter_add(&h->bucket[i], 1);
    cairn_counter_add(&h->sum_ns, ns);
}
