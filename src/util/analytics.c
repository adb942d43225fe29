/*
 * Analytics recording and sampling (design: include/cairn/analytics.h).
 *
 * Every table is allocated once, at the first use, and never freed: recorders
 * never hold a pointer that could go away. A slot's key word is the claim
 * (0 free, key + 1 taken); its name is written by the claimer and published
 * with `named` (release), so a sampler that sees named reads a whole name, and
 * events counted before it are kept (the sampler leaves their delta for the
 * next interval). Freeing an idle slot (the sampler) resets its value before
 * releasing the key; an event that looked the slot up before the free and adds
 * after it would count for the slot's next key - after AN_IDLE_FREE_S seconds
 * without a single event for its own key, which we accept. A key may end up
 * in two slots (its first slot freed and a probe chain re-claiming another);
 * the merge sums entries of the same name, so its counts stay whole.
 */
#include <cairn/analytics.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AN_PROBES 16 /* slots a key may look at before it counts as "other" */
#define AN_FREEING UINT64_MAX

typedef struct an_slot {
    _Atomic uint64_t key; /* key + 1; 0: free; AN_FREEING: being freed */
    _Atomic bool named;
    cairn_counter_t value;
    uint64_t seen;        /* sampler only: value at the last collect */
    uint32_t idle;        /* sampler only: collects without a change */
    char name[AN_NAME_MAX];
} an_slot_t;

typedef struct an_table {
    an_slot_t slot[AN_SLOTS];
    cairn_counter_t other;
    uint64_t other_seen;
} an_table_t;

typedef struct an_stat_def {
    const char *name, *description;
    uint32_t dims;         /* mask of 1 << an_dim_t */
    uint32_t default_off;  /* dimensions off until enabled */
} an_stat_def_t;

#define D(x) (1u << (x))
#define NFS_JOINT (D(AN_BY_OP_LATENCY) | D(AN_BY_CLIENT_OP) | D(AN_BY_CLIENT_FILE))
static const an_stat_def_t g_defs[AN_NSTATS] = {
    [AN_NFS3_OPS] = {"nfs3.ops", "NFSv3 calls per second",
                     D(AN_BY_OP) | D(AN_BY_CLIENT) | D(AN_BY_SHARE) | D(AN_BY_FILE) |
                         D(AN_BY_LATENCY) | D(AN_BY_SIZE) | NFS_JOINT,
                     D(AN_BY_CLIENT) | D(AN_BY_FILE) | NFS_JOINT},
    [AN_NFS4_OPS] = {"nfs4.ops", "NFSv4 operations per second (latency, size: per COMPOUND)",
                     D(AN_BY_OP) | D(AN_BY_CLIENT) | D(AN_BY_SHARE) | D(AN_BY_FILE) |
                         D(AN_BY_LATENCY) | D(AN_BY_SIZE) | NFS_JOINT,
                     D(AN_BY_CLIENT) | D(AN_BY_FILE) | NFS_JOINT},
    [AN_ISCSI_OPS] = {"iscsi.ops", "iSCSI SCSI commands per second",
                      D(AN_BY_OP) | D(AN_BY_INITIATOR) | D(AN_BY_TARGET) | D(AN_BY_LATENCY) |
                          D(AN_BY_SIZE) | D(AN_BY_OP_LATENCY) | D(AN_BY_INITIATOR_OP),
                      D(AN_BY_OP_LATENCY) | D(AN_BY_INITIATOR_OP)},
    [AN_ARC_ACCESSES] = {"arc.accesses", "ARC lookups per second",
                         D(AN_BY_RESULT) | D(AN_BY_DATASET), 0},
    [AN_DISK_IO] = {"disk.ops", "leaf vdev I/Os per second",
                    D(AN_BY_DISK) | D(AN_BY_OP) | D(AN_BY_LATENCY) | D(AN_BY_SIZE), 0},
    [AN_DISK_BUSY] = {"disk.busy", "microseconds per second a disk had I/O in flight",
                      D(AN_BY_DISK), 0},
    [AN_DISK_USECS] = {"disk.usecs",
                       "microseconds of leaf vdev I/O latency per second (/ disk.ops: the mean)",
                       D(AN_BY_DISK) | D(AN_BY_OP), 0},
    [AN_NET_BYTES] = {"net.bytes", "payload bytes per second moved by the front ends",
                      D(AN_BY_PROTOCOL) | D(AN_BY_CLIENT) | D(AN_BY_INITIATOR), D(AN_BY_CLIENT)},
    [AN_CPU] = {"cpu.usecs", "microseconds of CPU per second used by cairnd", D(AN_BY_MODE), 0},
};
#undef NFS_JOINT
#undef D

static const char *const g_dim_names[AN_NDIMS] = {
    [AN_BY_OP] = "op",
    [AN_BY_CLIENT] = "client",
    [AN_BY_SHARE] = "share",
    [AN_BY_FILE] = "file",
    [AN_BY_LATENCY] = "latency",
    [AN_BY_SIZE] = "size",
    [AN_BY_INITIATOR] = "initiator",
    [AN_BY_TARGET] = "target",
    [AN_BY_DATASET] = "dataset",
    [AN_BY_RESULT] = "result",
    [AN_BY_DISK] = "disk",
    [AN_BY_PROTOCOL] = "protocol",
    [AN_BY_MODE] = "mode",
    [AN_BY_OP_LATENCY] = "op-latency",
    [AN_BY_CLIENT_OP] = "client-op",
    [AN_BY_CLIENT_FILE] = "client-file",
    [AN_BY_INITIATOR_OP] = "initiator-op",
};

/* The switches and table pointers are read by every event and written almost
 * never; the total is written by every event: on a cache line of its own, so
 * adding to it does not make every other core miss on the switches. */
typedef struct an_live {
    _Atomic bool stat_on;
    _Atomic uint32_t dims_on;
    an_table_t *_Atomic table[AN_NDIMS];
    uint64_t total_seen; /* sampler only */
    cairn_counter_t total __attribute__((aligned(64)));
} __attribute__((aligned(64))) an_live_t;

static an_live_t g_live[AN_NSTATS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic bool g_ready;
static pthread_mutex_t g_alloc_lock = PTHREAD_MUTEX_INITIALIZER;

static void init_defaults(void)
{
    for (int s = 0; s < AN_NSTATS; s++) {
        atomic_store(&g_live[s].stat_on, true);
        atomic_store(&g_live[s].dims_on, g_defs[s].dims & ~g_defs[s].default_off);
    }
    atomic_store_explicit(&g_ready, true, memory_order_release);
}

static inline an_live_t *live(an_stat_t s)
{
    if (!atomic_load_explicit(&g_ready, memory_order_acquire)) pthread_once(&g_once, init_defaults);
    return &g_live[s];
}

const char *an_stat_name(an_stat_t s) { return s < AN_NSTATS ? g_defs[s].name : NULL; }
const char *an_stat_description(an_stat_t s) { return s < AN_NSTATS ? g_defs[s].description : NULL; }
const char *an_dim_name(an_dim_t d) { return d < AN_NDIMS ? g_dim_names[d] : NULL; }

int an_stat_lookup(const char *name)
{
    for (int s = 0; s < AN_NSTATS; s++)
        if (name && !strcmp(name, g_defs[s].name)) return s;
    return -1;
}

int an_dim_lookup(const char *name)
{
    for (int d = 0; d < AN_NDIMS; d++)
        if (name && !strcmp(name, g_dim_names[d])) return d;
    return -1;
}

bool an_stat_has_dim(an_stat_t s, an_dim_t d)
{
    return s < AN_NSTATS && d < AN_NDIMS && (g_defs[s].dims & (1u << d));
}

bool an_dim_default_on(an_stat_t s, an_dim_t d)
{
    return an_stat_has_dim(s, d) && !(g_defs[s].default_off & (1u << d));
}

bool an_stat_enabled(an_stat_t s)
{
    return atomic_load_explicit(&live(s)->stat_on, memory_order_relaxed);
}

bool an_dim_enabled(an_stat_t s, an_dim_t d)
{
    return an_stat_enabled(s) &&
           (atomic_load_explicit(&live(s)->dims_on, memory_order_relaxed) & (1u << d));
}

void an_set_stat_enabled(an_stat_t s, bool on) { atomic_store(&live(s)->stat_on, on); }

void an_set_dim_enabled(an_stat_t s, an_dim_t d, bool on)
{
    if (!an_stat_has_dim(s, d)) return;
    if (on) atomic_fetch_or(&live(s)->dims_on, 1u << d);
    else atomic_fetch_and(&live(s)->dims_on, ~(1u << d));
}

void an_set_all(bool on)
{
    for (int s = 0; s < AN_NSTATS; s++) {
        atomic_store(&live(s)->stat_on, on);
        atomic_store(&live(s)->dims_on, on ? g_defs[s].dims & ~g_defs[s].default_off : 0);
    }
}

uint32_t an_dims_mask(an_stat_t s) { return atomic_load(&live(s)->dims_on); }

void an_set_dims_mask(an_stat_t s, uint32_t mask)
{
    atomic_store(&live(s)->dims_on, mask & g_defs[s].dims);
}

/* ------------------------------------------------------------ recording */

uint64_t an_hash(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static _Thread_local const an_tag_t *t_tag;

const an_tag_t *an_thread_tag_set(const an_tag_t *tag)
{
    const an_tag_t *prev = t_tag;
    t_tag = tag;
    return prev;
}

const an_tag_t *an_thread_tag(void) { return t_tag; }

void an_name_string(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)key;
    cairn_strlcpy(buf, arg ? arg : "?", len);
}

static an_table_t *table(an_live_t *l, an_dim_t d)
{
    an_table_t *t = atomic_load_explicit(&l->table[d], memory_order_acquire);
    if (t) return t;
    pthread_mutex_lock(&g_alloc_lock); /* once per table for the process's life */
    t = atomic_load(&l->table[d]);
    if (!t) {
        t = cairn_zalloc(sizeof *t);
        atomic_store_explicit(&l->table[d], t, memory_order_release);
    }
    pthread_mutex_unlock(&g_alloc_lock);
    return t;
}

void an_add_total(an_stat_t s, uint64_t v)
{
    an_live_t *l = live(s);
    if (atomic_load_explicit(&l->stat_on, memory_order_relaxed))
        cairn_counter_add(&l->total, v);
}

static void slot_name(an_slot_t *sl, uint64_t key, an_name_fn name, const void *arg)
{
    if (name) name(arg, key, sl->name, sizeof sl->name);
    else snprintf(sl->name, sizeof sl->name, "%llu", (unsigned long long)key);
    if (!sl->name[0] || !strcmp(sl->name, AN_OTHER)) cairn_strlcpy(sl->name, "?", sizeof sl->name);
    atomic_store_explicit(&sl->named, true, memory_order_release);
}

static void table_add(an_table_t *t, uint64_t key, uint64_t v, an_name_fn name, const void *arg)
{
    uint64_t want = key + 1 == AN_FREEING || key + 1 == 0 ? 1 : key + 1;
    uint64_t mix = want * 0x9e3779b97f4a7c15ull;
    unsigned start = (unsigned)(mix >> 32);
    for (unsigned i = 0; i < AN_PROBES; i++) {
        an_slot_t *sl = &t->slot[(start + i) & (AN_SLOTS - 1)];
        uint64_t k = atomic_load_explicit(&sl->key, memory_order_acquire);
        if (k == want) {
            cairn_counter_add(&sl->value, v);
            return;
        }
        if (k) continue;
        uint64_t free_key = 0;
        if (atomic_compare_exchange_strong(&sl->key, &free_key, want)) {
            cairn_counter_add(&sl->value, v);
            slot_name(sl, key, name, arg);
            return;
        }
        if (free_key == want) { /* another thread claimed it for the same key */
            cairn_counter_add(&sl->value, v);
            return;
        }
    }
    cairn_counter_add(&t->other, v);
}

void an_add(an_stat_t s, an_dim_t d, uint64_t key, uint64_t v, an_name_fn name, const void *arg)
{
    an_live_t *l = live(s);
    if (!atomic_load_explicit(&l->stat_on, memory_order_relaxed) ||
        !(atomic_load_explicit(&l->dims_on, memory_order_relaxed) & (1u << d)))
        return;
    table_add(table(l, d), key, v, name, arg);
}

unsigned an_log2_bucket(uint64_t v)
{
    unsigned b = v ? 64 - (unsigned)__builtin_clzll(v) : 0; /* 0 -> 0, 1 -> 1, 2..3 -> 2 */
    return b < AN_LOG2_BUCKETS ? b : AN_LOG2_BUCKETS - 1;
}

/* Bucket b holds [2^(b-1), 2^b): named by its lower bound. */
void an_bucket_name(an_dim_t d, unsigned b, char *buf, size_t len)
{
    if (d == AN_BY_LATENCY || d == AN_BY_OP_LATENCY) {
        if (b == 0) cairn_strlcpy(buf, "<1us", len);
        else {
            uint64_t us = 1ull << (b - 1);
            if (us >= 1000000) snprintf(buf, len, "%llus", (unsigned long long)(us / 1000000));
            else if (us >= 1000) snprintf(buf, len, "%llums", (unsigned long long)(us / 1000));
            else snprintf(buf, len, "%lluus", (unsigned long long)us);
        }
        return;
    }
    if (b == 0) {
        cairn_strlcpy(buf, "0", len);
        return;
    }
    uint64_t bytes = 1ull << (b - 1);
    if (bytes >= (1ull << 30)) snprintf(buf, len, "%lluG", (unsigned long long)(bytes >> 30));
    else if (bytes >= (1ull << 20)) snprintf(buf, len, "%lluM", (unsigned long long)(bytes >> 20));
    else if (bytes >= 1024) snprintf(buf, len, "%lluK", (unsigned long long)(bytes >> 10));
    else snprintf(buf, len, "%llu", (unsigned long long)bytes);
}

bool an_dim_is_histogram(unsigned d)
{
    return d == AN_BY_LATENCY || d == AN_BY_SIZE || d == AN_BY_OP_LATENCY;
}

int an_bucket_of(an_dim_t d, const char *name)
{
    char b[32];
    if (d == AN_BY_OP_LATENCY) {
        const char *last = strrchr(name, ' ');
        name = last ? last + 1 : name;
    }
    for (unsigned i = 0; i < AN_LOG2_BUCKETS; i++) {
        an_bucket_name(d, i, b, sizeof b);
        if (!strcmp(b, name)) return (int)i;
    }
    return -1;
}

int an_histogram_cmp(an_dim_t d, const char *a, const char *b)
{
    if (d == AN_BY_OP_LATENCY) { /* the operation (all but the last word) first */
        const char *sa = strrchr(a, ' '), *sb = strrchr(b, ' ');
        size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
        int c = strncmp(a, b, la < lb ? la : lb);
        if (c || la != lb) return c ? c : (la < lb ? -1 : 1);
    }
    int ba = an_bucket_of(d, a), bb = an_bucket_of(d, b);
    return ba != bb ? (ba < bb ? -1 : 1) : 0;
}

static void name_latency(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    an_bucket_name(AN_BY_LATENCY, (unsigned)key, buf, len);
}

static void name_size(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)arg;
    an_bucket_name(AN_BY_SIZE, (unsigned)key, buf, len);
}

void an_add_latency(an_stat_t s, uint64_t ns, uint64_t v)
{
    an_add(s, AN_BY_LATENCY, an_log2_bucket(ns / 1000), v, name_latency, NULL);
}

void an_add_size(an_stat_t s, uint64_t bytes, uint64_t v)
{
    an_add(s, AN_BY_SIZE, an_log2_bucket(bytes), v, name_size, NULL);
}

typedef struct pair_name {
    const an_part_t *a, *b;
} pair_name_t;

static void name_part(const an_part_t *p, char *buf, size_t len)
{
    if (p->name) p->name(p->arg, p->key, buf, len);
    else snprintf(buf, len, "%llu", (unsigned long long)p->key);
    if (!buf[0]) cairn_strlcpy(buf, "?", len);
}

static void name_pair(const void *arg, uint64_t key, char *buf, size_t len)
{
    (void)key;
    const pair_name_t *p = arg;
    char a[AN_NAME_MAX], b[AN_NAME_MAX];
    name_part(p->a, a, sizeof a);
    name_part(p->b, b, sizeof b);
    snprintf(buf, len, "%s %s", a, b);
}

void an_add_pair(an_stat_t s, an_dim_t d, an_part_t a, an_part_t b, uint64_t v)
{
    if (!an_dim_enabled(s, d)) return; /* no key mixed, no name struct built */
    pair_name_t n = {&a, &b};
    an_add(s, d, a.key * 0x9e3779b97f4a7c15ull ^ b.key, v, name_pair, &n);
}

void an_add_op_latency(an_stat_t s, uint64_t op_key, uint64_t ns, an_name_fn op_name,
                       const void *arg)
{
    an_add_pair(s, AN_BY_OP_LATENCY, (an_part_t){op_key, op_name, arg},
                (an_part_t){an_log2_bucket(ns / 1000), name_latency, NULL}, 1);
}

/* ------------------------------------------------------------- sampling */

static void push(an_entry_t **out, size_t *n, size_t *cap, an_entry_t e)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *out = cairn_realloc(*out, *cap * sizeof **out);
    }
    (*out)[(*n)++] = e;
}

/* Frees a slot whose key has been idle: value reset before the key goes. */
static void slot_free(an_slot_t *sl)
{
    atomic_store(&sl->key, AN_FREEING);
    atomic_store(&sl->named, false);
    atomic_store(&sl->value, 0);
    sl->seen = 0;
    sl->idle = 0;
    atomic_store(&sl->key, 0);
}

typedef struct an_delta {
    uint64_t value;
    const an_slot_t *slot;
} an_delta_t;

static int by_delta_desc(const void *a, const void *b)
{
    const an_delta_t *x = a, *y = b;
    return x->value != y->value ? (x->value > y->value ? -1 : 1) : 0;
}

/* One table's deltas: the AN_TOPN largest keys by name, the rest in "other"
 * (only names that make a top N are interned, so the history's names stay few). */
static void collect_table(an_history_t *h, an_stat_t s, an_dim_t d, an_table_t *t,
                          an_entry_t **out, size_t *n, size_t *cap)
{
    an_delta_t deltas[AN_SLOTS];
    size_t nd = 0;
    for (unsigned i = 0; i < AN_SLOTS; i++) {
        an_slot_t *sl = &t->slot[i];
        uint64_t k = atomic_load_explicit(&sl->key, memory_order_acquire);
        if (!k || k == AN_FREEING || !atomic_load_explicit(&sl->named, memory_order_acquire))
            continue;
        uint64_t v = cairn_counter_get(&sl->value);
        if (v == sl->seen) {
            if (++sl->idle >= AN_IDLE_FREE_S) slot_free(sl);
            continue;
        }
        deltas[nd++] = (an_delta_t){v - sl->seen, sl};
        sl->seen = v;
        sl->idle = 0;
    }
    qsort(deltas, nd, sizeof *deltas, by_delta_desc);
    uint64_t o = cairn_counter_get(&t->other);
    uint64_t other = o - t->other_seen;
    t->other_seen = o;
    for (size_t i = 0; i < nd; i++) {
        if (i >= AN_TOPN && !an_dim_is_histogram(d)) {
            other += deltas[i].value;
            continue;
        }
        push(out, n, cap,
             (an_entry_t){(uint16_t)s, (uint16_t)d, an_history_intern(h, deltas[i].slot->name),
                          deltas[i].value});
    }
    if (other) push(out, n, cap, (an_entry_t){(uint16_t)s, (uint16_t)d, AN_NAME_OTHER, other});
}

void an_collect(an_history_t *h, an_entry_t **out, size_t *n, size_t *cap)
{
    for (int s = 0; s < AN_NSTATS; s++) {
        an_live_t *l = live((an_stat_t)s);
        uint64_t tot = cairn_counter_get(&l->total);
        if (tot != l->total_seen)
            push(out, n, cap, (an_entry_t){(uint16_t)s, AN_DIM_TOTAL, AN_NAME_OTHER, tot - l->total_seen});
        l->total_seen = tot;
        for (int d = 0; d < AN_NDIMS; d++) {
            an_table_t *t = atomic_load_explicit(&l->table[d], memory_order_acquire);
            if (t) collect_table(h, (an_stat_t)s, (an_dim_t)d, t, out, n, cap);
        }
    }
}
