/*
 * Counters and latency histograms of the front ends' hot paths, read by the
 * management plane (/metrics in cairnd).
 *
 * Every update is a relaxed atomic add: no lock, no ordering, one instruction
 * on x86-64. Readers take each value on its own, so a scrape may see one
 * counter a request ahead of another; each counter alone only grows, which is
 * all Prometheus asks. (Per-thread counters summed on read would avoid sharing
 * the cache line between workers; measured on two busy vCPUs the atomics cost
 * nothing visible above the noise: docs/benchmarks.md, "Issue 28".)
 */
#ifndef CAIRN_STATS_H
#define CAIRN_STATS_H

#include <stdatomic.h>
#include <stdint.h>

typedef _Atomic uint64_t cairn_counter_t;

static inline void cairn_counter_add(cairn_counter_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t cairn_counter_get(const cairn_counter_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* Latency buckets: upper bounds 50 us .. 10 s (roughly 1-2.5-5 per decade), then +Inf. */
#define CAIRN_HIST_BUCKETS 18
extern const uint64_t cairn_hist_bound_ns[CAIRN_HIST_BUCKETS - 1];

typedef struct cairn_hist {
    cairn_counter_t bucket[CAIRN_HIST_BUCKETS]; /* not cumulative: each its own range */
    cairn_counter_t sum_ns;
} cairn_hist_t;

void cairn_hist_record(cairn_hist_t *h, uint64_t ns);

#endif
