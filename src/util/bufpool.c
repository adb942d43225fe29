/*
 * The data buffer pool; the why is in include/cairn/bufpool.h.
 *
 * Each class keeps a LIFO stack of free chunks, linked through their first
 * bytes: the chunk freed last is the one whose pages are most likely still
 * in the CPU's cache. One mutex guards everything; it is taken once per
 * block-sized buffer (thousands a second at most), not per byte.
 *
 * New chunks come from one reserved address range in huge pages (see
 * region_chunk_locked for why); a chunk given back over the limit returns
 * its memory to the kernel and keeps its address for its class. When the
 * range is refused or used up they come from posix_memalign (the heap:
 * dmu_tune_malloc keeps buffers of these sizes out of mmap), as before.
 */
#include <cairn/assert.h>
#include <cairn/bufpool.h>
#include <cairn/util.h>

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define PAGE_CLASSES 64u                   /* 4 KiB .. 256 KiB, one per page */
#define PAGE_CLASS_MAX (PAGE_CLASSES * 4096u)
#define STEPS_PER_DOUBLING 8u
#define DOUBLINGS 6u                       /* 256 KiB .. 16 MiB */
#define NCLASSES (PAGE_CLASSES + DOUBLINGS * STEPS_PER_DOUBLING)
#define DEFAULT_LIMIT (288ull * 1024 * 1024) /* the default arc_max and an eighth */

_Static_assert(CAIRN_BUFPOOL_MAX == PAGE_CLASS_MAX << DOUBLINGS, "classes reach the maximum");

typedef struct free_chunk {
    struct free_chunk *next;
    size_t bytes; /* set on the way out (shed_locked) */
} free_chunk_t;

static struct {
    pthread_mutex_t lock;
    free_chunk_t *free[NCLASSES];
    free_chunk_t *bare[NCLASSES]; /* given back: address kept, memory returned */
    cairn_bufpool_stats_t st;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .st = {.limit = DEFAULT_LIMIT}};

static bool pooled(size_t size) { return size >= CAIRN_BUFPOOL_MIN && size <= CAIRN_BUFPOOL_MAX; }

/* The bytes the chunks of class c hold. */
static size_t class_bytes(unsigned c)
{
    if (c < PAGE_CLASSES) return (c + 1) * (size_t)4096;
    unsigned e = 18 + (c - PAGE_CLASSES) / STEPS_PER_DOUBLING; /* 2^18 = 256 KiB */
    size_t k = (c - PAGE_CLASSES) % STEPS_PER_DOUBLING + 1;
    return ((size_t)1 << e) + k * (((size_t)1 << e) / STEPS_PER_DOUBLING);
}

/* The class of a pooled size: its index and the bytes its chunks hold. */
static unsigned class_of(size_t size, size_t *class_size)
{
    unsigned c;
    if (size <= PAGE_CLASS_MAX) {
        c = (unsigned)((size + 4095) / 4096) - 1;
    } else {
        unsigned e = 63u - (unsigned)__builtin_clzll(size - 1); /* 2^e < size <= 2^(e+1) */
        size_t base = (size_t)1 << e, step = base / STEPS_PER_DOUBLING;
        size_t k = (size - base + step - 1) / step; /* 1..8 */
        c = PAGE_CLASSES + (e - 18) * STEPS_PER_DOUBLING + (unsigned)(k - 1);
    }
    *class_size = class_bytes(c);
    return c;
}

size_t cairn_bufpool_class_size(size_t size)
{
    size_t cs = size;
    if (pooled(size)) class_of(size, &cs);
    return cs;
}

/*
 * Where pooled chunks come from: one address range reserved at the first
 * chunk, 2 MiB aligned and advised for transparent huge pages, carved in
 * order. Why: on a guest whose MMU is shadowed by the hypervisor (PVM here),
 * the first time the kernel touches a user page it never touched before (the
 * socket copying a just-written ARC buffer out) costs ~5 us per 4 KiB page,
 * 1.3 CPU-s per GiB sent, and a first user touch faults per 4 KiB page; a
 * huge page pays both once per 2 MiB (docs/benchmarks.md). malloc's heap
 * cannot be advised reliably (its headers touch each 2 MiB before we see the
 * chunk). A chunk given back has its memory returned to the kernel and its
 * address kept (bare) for the next chunk of its class. A host without THP
 * ignores the advice; a reservation refused or used up falls back to malloc.
 */
#define HUGE_PAGE ((size_t)2 << 20)
#define REGION_BYTES ((size_t)64 << 30)

static uint8_t *region, *region_next, *region_end;
static bool huge_pages_off; /* under P.lock */

void cairn_bufpool_set_huge_pages(bool on)
{
    pthread_mutex_lock(&P.lock);
    huge_pages_off = !on;
    pthread_mutex_unlock(&P.lock);
}

/* Under P.lock. */
static bool in_region(const void *p)
{
    return region && (const uint8_t *)p >= region && (const uint8_t *)p < region_end;
}

/* Under P.lock: a chunk's address from the region, or NULL. */
static void *region_chunk_locked(unsigned c, size_t bytes)
{
    if (P.bare[c]) {
        free_chunk_t *f = P.bare[c];
        P.bare[c] = f->next;
        return f;
    }
    if (!region) {
        static bool refused;
        if (huge_pages_off) return NULL;
#if defined(__SANITIZE_ADDRESS__)
        refused = true; /* LeakSanitizer watches malloc's chunks, not ours */
#endif
        if (refused) return NULL;
        void *m = mmap(NULL, REGION_BYTES + HUGE_PAGE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            refused = true;
            return NULL;
        }
        region = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
        region_next = region;
        region_end = region + REGION_BYTES;
#ifdef MADV_HUGEPAGE
        (void)madvise(region, REGION_BYTES, MADV_HUGEPAGE);
#endif
    }
    if ((size_t)(region_end - region_next) < bytes) return NULL;
    void *p = region_next;
    region_next += bytes;
    return p;
}

static void *fresh_chunk(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, CAIRN_IO_ALIGN, bytes)) abort();
    return p;
}

/* Gives a pooled chunk of class c (cs bytes) back: to the kernel when it is
 * the region's (all but the page holding the link), else to malloc. */
static void give_back(void *p, unsigned c, size_t cs)
{
    pthread_mutex_lock(&P.lock); /* the region is set under it */
    bool ours = in_region(p);
    pthread_mutex_unlock(&P.lock);
    if (!ours) {
        free(p);
        return;
    }
    (void)madvise((uint8_t *)p + 4096, cs - 4096, MADV_DONTNEED);
    free_chunk_t *f = p;
    pthread_mutex_lock(&P.lock);
    f->next = P.bare[c];
    P.bare[c] = f;
    pthread_mutex_unlock(&P.lock);
}

void *cairn_bufpool_alloc(size_t size)
{
    if (!pooled(size)) return fresh_chunk(size ? size : 1);
    size_t cs;
    unsigned c = class_of(size, &cs);
    pthread_mutex_lock(&P.lock);
    free_chunk_t *f = P.free[c];
    if (f) {
        UNPOISON(f, sizeof *f);
        P.free[c] = f->next;
        P.st.kept -= cs;
        P.st.reused++;
    } else {
        P.st.fresh++;
        f = region_chunk_locked(c, cs);
    }
    P.st.in_use += cs;
    pthread_mutex_unlock(&P.lock);
    void *p = f ? (void *)f : fresh_chunk(cs);
    UNPOISON(p, size);
    POISON((uint8_t *)p + size, cs - size); /* the class's slack is nobody's */
    return p;
}

/* Under P.lock: whether a free chunk of cs bytes may be kept. */
static bool room_to_keep(size_t cs)
{
    return P.st.in_use + P.st.kept + cs <= P.st.limit + P.st.reserve;
}

void cairn_bufpool_free(void *p, size_t size)
{
    if (!p) return;
    if (!pooled(size)) {
        free(p);
        return;
    }
    size_t cs;
    unsigned c = class_of(size, &cs);
    pthread_mutex_lock(&P.lock);
    P.st.in_use -= cs;
    bool keep = room_to_keep(cs);
    if (keep) {
        free_chunk_t *f = p;
        UNPOISON(f, sizeof *f);
        f->next = P.free[c];
        P.free[c] = f;
        P.st.kept += cs;
        /* All but the link: LeakSanitizer does not look for pointers in poisoned
         * memory, and would call every chunk behind the first one leaked. */
        POISON((uint8_t *)p + sizeof *f, cs - sizeof *f);
    } else {
        P.st.released++;
    }
    pthread_mutex_unlock(&P.lock);
    if (!keep) {
        UNPOISON(p, cs);
        give_back(p, c, cs);
    }
}

/* Under P.lock: unlinks kept chunks, largest classes first, until at most
 * target bytes are kept; returns the list of what goes (freed outside the lock). */
static free_chunk_t *shed_locked(uint64_t target)
{
    CAIRN_ASSERT(cairn_mutex_held(&P.lock));
    free_chunk_t *out = NULL;
    for (unsigned c = NCLASSES; c-- > 0 && P.st.kept > target;) {
        size_t cs = class_bytes(c);
        while (P.free[c] && P.st.kept > target) {
            free_chunk_t *f = P.free[c];
            UNPOISON(f, cs);
            P.free[c] = f->next;
            P.st.kept -= cs;
            P.st.released++;
            f->bytes = cs;
            f->next = out;
            out = f;
        }
    }
    return out;
}

static void free_list(free_chunk_t *f)
{
    while (f) {
        free_chunk_t *n = f->next;
        size_t cs;
        unsigned c = class_of(f->bytes, &cs);
        give_back(f, c, cs);
        f = n;
    }
}

/* Under P.lock: sheds kept chunks over the bound after the limit or the reserve moved. */
static free_chunk_t *bound_changed_locked(void)
{
    uint64_t bound = P.st.limit + P.st.reserve;
    return shed_locked(bound > P.st.in_use ? bound - P.st.in_use : 0);
}

void cairn_bufpool_set_limit(uint64_t bytes)
{
    pthread_mutex_lock(&P.lock);
    P.st.limit = bytes;
    free_chunk_t *gone = bound_changed_locked();
    pthread_mutex_unlock(&P.lock);
    free_list(gone);
}

void cairn_bufpool_set_reserve(uint64_t bytes)
{
    pthread_mutex_lock(&P.lock);
    P.st.reserve = bytes;
    free_chunk_t *gone = bound_changed_locked();
    pthread_mutex_unlock(&P.lock);
    free_list(gone);
}

void cairn_bufpool_trim(void)
{
    pthread_mutex_lock(&P.lock);
    free_chunk_t *gone = shed_locked(0);
    pthread_mutex_unlock(&P.lock);
    free_list(gone);
    malloc_trim(0);
}

void cairn_bufpool_get_stats(cairn_bufpool_stats_t *out)
{
    pthread_mutex_lock(&P.lock);
    *out = P.st;
    pthread_mutex_unlock(&P.lock);
}
