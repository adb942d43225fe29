/*
 * The data buffer pool (src/util/bufpool.c) and the rbufs built on it.
 * Proves: size classes (every page up to 256 KiB, eight per doubling above,
 * nothing outside the pooled range); chunks are page-aligned and a freed chunk
 * serves the next request of its class, from any thread; the bound (handed out
 * plus kept) holds, lowering it and trimming give kept chunks back, and a
 * chunk whose memory went back serves again whole; concurrent
 * users never get a chunk someone else holds; rbufs of every kind give their
 * memory back to the pool.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/bufpool.h>
#include <cairn/rbuf.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024u
#define MIB (1024u * 1024u)

static cairn_bufpool_stats_t stats(void)
{
    cairn_bufpool_stats_t st;
    cairn_bufpool_get_stats(&st);
    return st;
}

static void test_size_classes(void **state)
{
    (void)state;
    assert_int_equal(cairn_bufpool_class_size(100), 100); /* below the pool: as asked */
    assert_int_equal(cairn_bufpool_class_size(4 * KIB), 4 * KIB);
    assert_int_equal(cairn_bufpool_class_size(4 * KIB + 1), 8 * KIB);
    /* A 128 KiB block with its page of header: no slack at all. */
    assert_int_equal(cairn_bufpool_class_size(132 * KIB), 132 * KIB);
    assert_int_equal(cairn_bufpool_class_size(128 * KIB + 16), 132 * KIB);
    assert_int_equal(cairn_bufpool_class_size(256 * KIB), 256 * KIB);
    assert_int_equal(cairn_bufpool_class_size(256 * KIB + 1), 288 * KIB);
    assert_int_equal(cairn_bufpool_class_size(1 * MIB + 4 * KIB), 1 * MIB + 128 * KIB);
    assert_int_equal(cairn_bufpool_class_size(16 * MIB), 16 * MIB);
    assert_int_equal(cairn_bufpool_class_size(16 * MIB + 1), 16 * MIB + 1); /* above: as asked */
    /* Every pooled size fits its class, with at most an eighth of slack above 256 KiB. */
    for (size_t s = 4 * KIB; s <= 16 * MIB; s = s * 9 / 8 + 777) {
        size_t c = cairn_bufpool_class_size(s);
        assert_true(c >= s);
        assert_true(c - s < (s <= 256 * KIB ? 4 * KIB : s / 8 + 1));
        assert_int_equal(c % (4 * KIB), 0);
    }
}

static void test_reuse_and_alignment(void **state)
{
    (void)state;
    cairn_bufpool_set_limit(64 * MIB);
    cairn_bufpool_trim();
    cairn_bufpool_stats_t s0 = stats();
    uint8_t *a = cairn_bufpool_alloc(130 * KIB);
    assert_int_equal((uintptr_t)a % CAIRN_IO_ALIGN, 0);
    memset(a, 0xa5, 130 * KIB);
    assert_int_equal(stats().in_use - s0.in_use, 132 * KIB);
    cairn_bufpool_free(a, 130 * KIB);
    assert_int_equal(stats().kept, 132 * KIB);
    /* Another size of the same class gets the same chunk back. */
    uint8_t *b = cairn_bufpool_alloc(129 * KIB);
    assert_ptr_equal(a, b);
    assert_int_equal(stats().reused - s0.reused, 1);
    assert_int_equal(stats().kept, 0);
    /* Another class does not. */
    uint8_t *c = cairn_bufpool_alloc(64 * KIB);
    assert_ptr_not_equal(c, b);
    assert_int_equal((uintptr_t)c % CAIRN_IO_ALIGN, 0);
    cairn_bufpool_free(b, 129 * KIB);
    cairn_bufpool_free(c, 64 * KIB);
    assert_int_equal(stats().in_use, s0.in_use);
    /* Outside the pooled range: plain memory, never kept. */
    void *small = cairn_bufpool_alloc(100), *huge = cairn_bufpool_alloc(17 * MIB);
    assert_int_equal((uintptr_t)huge % CAIRN_IO_ALIGN, 0);
    cairn_bufpool_free(small, 100);
    cairn_bufpool_free(huge, 17 * MIB);
    assert_int_equal(stats().kept, 132 * KIB + 64 * KIB);
    cairn_bufpool_free(NULL, 64 * KIB);
    cairn_bufpool_trim();
    assert_int_equal(stats().kept, 0);
}

static void test_bound(void **state)
{
    (void)state;
    cairn_bufpool_trim();
    cairn_bufpool_set_limit(1 * MIB);
    enum { N = 16 };
    void *p[N];
    for (int i = 0; i < N; i++) p[i] = cairn_bufpool_alloc(128 * KIB); /* 2 MiB handed out */
    cairn_bufpool_stats_t s0 = stats();
    for (int i = 0; i < N; i++) {
        cairn_bufpool_free(p[i], 128 * KIB);
        cairn_bufpool_stats_t s = stats();
        assert_true(s.in_use + s.kept <= 1 * MIB || s.kept == 0);
    }
    assert_int_equal(stats().kept, 8 * 128 * KIB); /* exactly what fits */
    assert_int_equal(stats().released - s0.released, N - 8);
    /* Lowering the bound gives back what no longer fits. */
    cairn_bufpool_set_limit(300 * KIB);
    assert_int_equal(stats().kept, 2 * 128 * KIB);
    cairn_bufpool_trim();
    assert_int_equal(stats().kept, 0);
    cairn_bufpool_set_limit(64 * MIB);
}

/* The reserve widens the bound by its size (a writer's buffers in flight), and
 * taking it away gives back what then no longer fits. */
static void test_reserve(void **state)
{
    (void)state;
    cairn_bufpool_trim();
    cairn_bufpool_set_limit(1 * MIB);
    cairn_bufpool_set_reserve(512 * KIB);
    enum { N = 16 };
    void *p[N];
    for (int i = 0; i < N; i++) p[i] = cairn_bufpool_alloc(128 * KIB);
    for (int i = 0; i < N; i++) cairn_bufpool_free(p[i], 128 * KIB);
    assert_int_equal(stats().kept, 12 * 128 * KIB); /* 1 MiB and the 512 KiB reserve */
    cairn_bufpool_set_reserve(0);
    assert_int_equal(stats().kept, 8 * 128 * KIB);
    cairn_bufpool_trim();
    cairn_bufpool_set_limit(64 * MIB);
}

#if !defined(__SANITIZE_ADDRESS__)
/* The size of the mapping of this process that holds p (/proc/self/maps). */
static uint64_t mapping_bytes(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[512];
    uint64_t found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi)
            found = hi - lo;
    }
    fclose(f);
    return found;
}

/* buffer_huge_pages: off, new chunks come from malloc; on, from the pool's
 * reserved range (tens of GiB of address space, advised for huge pages). Runs
 * first: the range is made by the first chunk taken while it is on. */
static void test_huge_pages_switch(void **state)
{
    (void)state;
    cairn_bufpool_set_huge_pages(false);
    void *a = cairn_bufpool_alloc(256 * KIB);
    uint64_t where_a = mapping_bytes(a);
    cairn_bufpool_set_huge_pages(true);
    void *b = cairn_bufpool_alloc(512 * KIB);
    uint64_t where_b = mapping_bytes(b);
    cairn_bufpool_free(a, 256 * KIB);
    cairn_bufpool_free(b, 512 * KIB);
    assert_true(where_a > 0 && where_a < (16ull << 30));
    assert_true(where_b >= (16ull << 30));
}

/* A chunk given back keeps its address for the next chunk of its class (the
 * pool's address range is not used up by chunks coming and going), and that
 * chunk reads what is written to it, not what its predecessor held. */
static void test_given_back_address_serves_again(void **state)
{
    (void)state;
    cairn_bufpool_trim();
    cairn_bufpool_set_limit(0);
    uint8_t *a = cairn_bufpool_alloc(136 * KIB);
    memset(a, 0x5a, 136 * KIB);
    cairn_bufpool_free(a, 136 * KIB);
    uint8_t *b = cairn_bufpool_alloc(136 * KIB);
    assert_ptr_equal(a, b);
    memset(b, 0x21, 136 * KIB);
    for (size_t o = 0; o < 136 * KIB; o += 512) assert_int_equal(b[o], 0x21);
    cairn_bufpool_free(b, 136 * KIB);
    cairn_bufpool_set_limit(64 * MIB);
}
#endif

/* A chunk whose memory went back (freed over the limit) serves again, whole and writable. */
static void test_released_chunks_serve_again(void **state)
{
    (void)state;
    cairn_bufpool_trim();
    cairn_bufpool_set_limit(0);
    enum { N = 8 };
    uint8_t *p[N];
    for (int round = 0; round < 3; round++) {
        cairn_bufpool_stats_t s0 = stats();
        for (int i = 0; i < N; i++) {
            p[i] = cairn_bufpool_alloc(200 * KIB);
            memset(p[i], 0x40 + i, 200 * KIB);
        }
        for (int i = 0; i < N; i++)
            for (size_t o = 0; o < 200 * KIB; o += 4096) assert_int_equal(p[i][o], 0x40 + i);
        for (int i = 0; i < N; i++) cairn_bufpool_free(p[i], 200 * KIB);
        cairn_bufpool_stats_t s = stats();
        assert_int_equal(s.kept, 0);
        assert_int_equal(s.released - s0.released, N);
        assert_int_equal(s.fresh - s0.fresh, N);
    }
    cairn_bufpool_set_limit(64 * MIB);
}

#define THREADS 4
#define ROUNDS 4000

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    enum { HELD = 8 };
    uint8_t *held[HELD] = {0};
    size_t size[HELD] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        int i = (int)(rand_r(&seed) % HELD);
        if (held[i]) {
            /* Nobody else wrote into it while we held it. */
            uint8_t tag = (uint8_t)((uintptr_t)held[i] >> 12);
            if (held[i][0] != tag || held[i][size[i] - 1] != tag) return (void *)1;
            cairn_bufpool_free(held[i], size[i]);
        }
        size[i] = 4 * KIB + rand_r(&seed) % (300 * KIB);
        held[i] = cairn_bufpool_alloc(size[i]);
        uint8_t tag = (uint8_t)((uintptr_t)held[i] >> 12);
        memset(held[i], tag, size[i]);
    }
    for (int i = 0; i < HELD; i++) cairn_bufpool_free(held[i], size[i]);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    cairn_bufpool_set_limit(16 * MIB);
    cairn_bufpool_stats_t s0 = stats();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
    for (int i = 0; i < THREADS; i++) {
        void *ret = (void *)2;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    cairn_bufpool_stats_t s = stats();
    assert_int_equal(s.in_use, s0.in_use);
    assert_true(s.kept <= 16 * MIB);
    assert_true(s.reused > s0.reused); /* chunks went round between threads and rounds */
    cairn_bufpool_trim();
}

static void test_rbufs_use_the_pool(void **state)
{
    (void)state;
    cairn_bufpool_set_limit(64 * MIB);
    cairn_bufpool_trim();
    cairn_bufpool_stats_t s0 = stats();
    cairn_rbuf_t *a = cairn_rbuf_new_aligned(128 * KIB, 128 * KIB);
    assert_int_equal((uintptr_t)a->data % CAIRN_IO_ALIGN, 0);
    cairn_rbuf_t *b = cairn_rbuf_new(NULL, 128 * KIB);
    cairn_rbuf_t *small = cairn_rbuf_new("abc", 3);
    assert_memory_equal(small->data, "abc", 3);
    /* A 4 KiB block with its header would take two pages of the pool: malloc's. */
    cairn_rbuf_t *page = cairn_rbuf_new(NULL, 4096);
    memset(page->data, 1, 4096);
    cairn_rbuf_t *small_aligned = cairn_rbuf_new_aligned(4096, 8192); /* pooled: 12 KiB */
    assert_int_equal((uintptr_t)small_aligned->data % CAIRN_IO_ALIGN, 0);
    assert_int_equal(stats().in_use - s0.in_use, 2 * 132 * KIB + 12 * KIB);
    cairn_rbuf_rele(page);
    cairn_rbuf_rele(small_aligned);
    assert_int_equal(stats().kept, 12 * KIB);
    cairn_bufpool_trim();
    cairn_rbuf_hold(a);
    cairn_rbuf_rele(a);
    assert_int_equal(stats().in_use - s0.in_use, 2 * 132 * KIB); /* still held */
    cairn_rbuf_rele(a);
    cairn_rbuf_rele(b);
    cairn_rbuf_rele(small);
    assert_int_equal(stats().in_use, s0.in_use);
    assert_int_equal(stats().kept, 2 * 132 * KIB); /* both in the 132 KiB class */
    /* The next buffer of that class, either kind, reuses one. */
    cairn_rbuf_t *c = cairn_rbuf_new_aligned(100 * KIB, 128 * KIB);
    assert_int_equal(stats().reused - s0.reused, 1);
    cairn_rbuf_rele(c);
    cairn_bufpool_trim();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#if !defined(__SANITIZE_ADDRESS__)
        cmocka_unit_test(test_huge_pages_switch),
#endif
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_reuse_and_alignment),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_released_chunks_serve_again),
#if !defined(__SANITIZE_ADDRESS__)
        cmocka_unit_test(test_given_back_address_serves_again),
#endif
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_rbufs_use_the_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
