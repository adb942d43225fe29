/*
 * How big the ARC may be on this machine, and how it gives way (issue 27, goal 5).
 *
 * A fixed default (256 MiB) left a 24 GiB machine's memory unused for caching
 * while a 512 MiB container could be squeezed by it. Like OpenZFS, arc_max
 * defaults to half of the memory the process may use: the machine's MemTotal,
 * or its cgroup's memory.max when that is lower (a container sees the host's
 * MemTotal). A configured arc_max still overrides.
 *
 * Memory pressure: the daemon samples MemAvailable (and the cgroup's headroom)
 * every second. When less than a reserve (1/32 of the memory, at least 64 MiB)
 * is available, the ARC's target drops by the shortfall - at least 1/32 a step,
 * so a slowly growing neighbour still moves it - and the ARC evicts down to it;
 * when twice the reserve is available again it grows back toward arc_max by at
 * most 1/32 of arc_max a second, so it neither oscillates nor lets one quiet
 * second undo a squeeze. Everything here but arc_memory_read() is a pure
 * function of the figures read, so the policy is tested with made-up machines.
 */
#include "arc_impl.h"

#include <cairn/util.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* "Key:   123 kB" lines of meminfo, in bytes; false when the key is absent. */
static bool meminfo_field(FILE *f, const char *key, uint64_t *out)
{
    char line[256];
    size_t kl = strlen(key);
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        uint64_t kib;
        if (!strncmp(line, key, kl) && line[kl] == ':' && sscanf(line + kl + 1, "%" SCNu64, &kib) == 1) {
            *out = kib * 1024;
            return true;
        }
    }
    return false;
}

/* A cgroup file holding a byte count, or "max"; false when missing, *out 0 for "max". */
static bool cgroup_bytes(const char *dir, const char *name, uint64_t *out)
{
    char path[512], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    *out = 0;
    if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0) sscanf(buf, "%" SCNu64, out);
    fclose(f);
    return true;
}

int arc_memory_read(const char *meminfo, const char *cgroup_dir, arc_memory_t *out)
{
    *out = (arc_memory_t){0};
    FILE *f = fopen(meminfo, "r");
    if (!f) return -errno;
    bool ok = meminfo_field(f, "MemTotal", &out->total);
    if (!meminfo_field(f, "MemAvailable", &out->available)) out->available = out->total;
    fclose(f);
    if (!ok || !out->total) return -EINVAL;
    if (cgroup_dir && !cgroup_bytes(cgroup_dir, "memory.max", &out->cg_limit)) {
        /* cgroup v1's names; "no limit" is a huge number there, which the
         * comparisons with MemTotal treat as none. */
        cgroup_bytes(cgroup_dir, "memory.limit_in_bytes", &out->cg_limit);
        cgroup_bytes(cgroup_dir, "memory.usage_in_bytes", &out->cg_usage);
    } else if (cgroup_dir) {
        cgroup_bytes(cgroup_dir, "memory.current", &out->cg_usage);
    }
    return 0;
}

/* The memory the process may use at most. */
static uint64_t usable_memory(const arc_memory_t *m)
{
    return m->cg_limit && m->cg_limit < m->total ? m->cg_limit : m->total;
}

uint64_t arc_default_max(const arc_memory_t *m)
{
    return CAIRN_MAX(usable_memory(m) / 2, (uint64_t)ARC_MAX_FLOOR);
}

uint64_t arc_memory_reserve(const arc_memory_t *m)
{
    return CAIRN_MAX(usable_memory(m) / 32, (uint64_t)(64 * CAIRN_MIB));
}

uint64_t arc_memory_available(const arc_memory_t *m)
{
    uint64_t avail = m->available;
    if (m->cg_limit) {
        uint64_t headroom = m->cg_limit > m->cg_usage ? m->cg_limit - m->cg_usage : 0;
        avail = CAIRN_MIN(avail, headroom);
    }
    return avail;
}

uint64_t arc_pressure_target(uint64_t c, uint64_t c_max, const arc_memory_t *m)
{
    uint64_t reserve = arc_memory_reserve(m), avail = arc_memory_available(m);
    uint64_t floor = CAIRN_MIN(c_max, (uint64_t)ARC_MAX_FLOOR);
    if (avail < reserve) {
        uint64_t cut = CAIRN_MAX(reserve - avail, c / 32);
        return c > floor + cut ? c - cut : CAIRN_MIN(c, floor);
    }
    if (avail >= 2 * reserve && c < c_max) {
        uint64_t step = CAIRN_MIN(avail - 2 * reserve, CAIRN_MAX(c_max / 32, (uint64_t)1));
        return CAIRN_MIN(c_max, c + step);
    }
    return c;
}
