/*
 * Top-level vdev block I/O (single leaf, mirror, raidz1/2/3) over in-memory
 * fake leaves: round trips, the documented raidz layout, self-healing of
 * corrupted copies and columns, missing and failing children, scrub, sizes
 * and states.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/raidz.h>
#include <cairn/taskq.h>
#include <cairn/util.h>
#include <cairn/vdev.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- fake leaves ---- */

#define LEAF_SIZE (16 * CAIRN_MIB + 3 * 4096) /* not a label multiple on purpose */

typedef struct fake_leaf {
    uint8_t *mem;
    size_t size;
    _Atomic bool fail_reads, fail_writes;
    taskq_t *tq; /* completions from another thread when set */
    _Atomic unsigned reads, writes, misaligned;
    _Atomic unsigned now_reads; /* reads done through io_now */
} fake_leaf_t;

typedef struct fake_io {
    fake_leaf_t *fl;
    vdev_io_op_t op;
    uint64_t offset;
    void *buf;
    size_t len;
    vdev_io_done_t done;
    void *arg;
} fake_io_t;

static void fake_do(void *arg)
{
    fake_io_t *io = arg;
    fake_leaf_t *fl = io->fl;
    int err = 0;
    if (io->op == VDEV_IO_READ) {
        fl->reads++;
        if (fl->fail_reads) err = -EIO;
        else memcpy(io->buf, fl->mem + io->offset, io->len);
    } else if (io->op == VDEV_IO_WRITE) {
        fl->writes++;
        if (fl->fail_writes) err = -EIO;
        else memcpy(fl->mem + io->offset, io->buf, io->len);
    }
    vdev_io_done_t done = io->done;
    void *darg = io->arg;
    free(io);
    done(darg, err);
}

static int fake_submit(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len,
                       vdev_io_done_t done, void *arg)
{
    fake_leaf_t *fl = leaf->leaf_priv;
    if (((uintptr_t)buf & (CAIRN_IO_ALIGN - 1)) || (offset | len) % 512) fl->misaligned++;
    if (op != VDEV_IO_FLUSH && (offset > fl->size || len > fl->size - offset)) return -EINVAL;
    if (op != VDEV_IO_FLUSH && offset < VDEV_DATA_START) return -EINVAL; /* labels: not ours */
    fake_io_t *io = malloc(sizeof *io);
    *io = (fake_io_t){fl, op, offset, buf, len, done, arg};
    if (fl->tq) taskq_dispatch(fl->tq, fake_do, io, NULL);
    else fake_do(io);
    return 0;
}

static void fake_close(vdev_t *leaf)
{
    fake_leaf_t *fl = leaf->leaf_priv;
    free(fl->mem);
    free(fl);
    leaf->leaf_priv = NULL;
}

static const vdev_leaf_ops_t fake_ops = {.submit = fake_submit, .close = fake_close};

/* io_now: the same I/O in the caller's thread (a leaf like a file's). */
static int fake_io_now(vdev_t *leaf, vdev_io_op_t op, uint64_t offset, void *buf, size_t len)
{
    fake_leaf_t *fl = leaf->leaf_priv;
    if (op != VDEV_IO_FLUSH && (offset > fl->size || len > fl->size - offset)) return -EINVAL;
    if (op == VDEV_IO_READ) {
        fl->now_reads++;
        fl->reads++;
        if (fl->fail_reads) return -EIO;
        memcpy(buf, fl->mem + offset, len);
    } else if (op == VDEV_IO_WRITE) {
        fl->writes++;
        if (fl->fail_writes) return -EIO;
        memcpy(fl->mem + offset, buf, len);
    }
    return 0;
}

static const vdev_leaf_ops_t fake_ops_now = {.submit = fake_submit, .close = fake_close,
                                             .io_now = fake_io_now};

static taskq_t *g_tq;

static vdev_t *fake_leaf_new(size_t size, bool async)
{
    vdev_t *leaf = vdev_alloc(VDEV_TYPE_LEAF, cairn_random_guid());
    fake_leaf_t *fl = cairn_zalloc(sizeof *fl);
    fl->mem = cairn_zalloc(size);
    fl->size = size;
    fl->tq = async ? g_tq : NULL;
    leaf->leaf_priv = fl;
    leaf->ops = &fake_ops;
    leaf->psize = size;
    leaf->path = cairn_strdup("fake");
    return leaf;
}

static fake_leaf_t *FL(vdev_t *leaf) { return leaf->leaf_priv; }

static vdev_t *make_top(vdev_type_t type, unsigned n, unsigned p, unsigned ashift, bool async)
{
    vdev_t *top;
    if (type == VDEV_TYPE_LEAF) {
        top = fake_leaf_new(LEAF_SIZE, async);
    } else {
        top = vdev_alloc(type, cairn_random_guid());
        top->nparity = p;
        for (unsigned i = 0; i < n; i++) vdev_add_child(top, fake_leaf_new(LEAF_SIZE, async));
    }
    top->ashift = ashift;
    vdev_compute_asize(top);
    return top;
}

static unsigned total_misaligned(vdev_t *top)
{
    if (top->type == VDEV_TYPE_LEAF) return FL(top)->misaligned;
    unsigned t = 0;
    for (unsigned i = 0; i < top->nchildren; i++) t += FL(top->children[i])->misaligned;
    return t;
}

/* ---- verification by a checksum the test keeps ---- */

static uint64_t hash_block(const uint8_t *p, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static bool verify_hash(const void *buf, uint64_t psize, void *arg)
{
    return hash_block(buf, psize) == *(uint64_t *)arg;
}

typedef struct blk {
    uint64_t offset, psize, hash;
    uint8_t *data;
} blk_t;

static uint8_t *rand_block(cairn_rng_t *rng, uint64_t psize, unsigned ashift)
{
    uint8_t *b = cairn_alloc_aligned(CAIRN_P2ROUNDUP(psize, 1ULL << ashift));
    for (uint64_t i = 0; i < psize; i++) b[i] = (uint8_t)cairn_rng_next(rng);
    return b;
}

/* Writes blocks back to back (each at the previous one's end per its asize). */
static unsigned write_blocks(vdev_t *top, cairn_rng_t *rng, const uint64_t *psizes, unsigned n,
                             blk_t *out, uint64_t *next_off)
{
    for (unsigned i = 0; i < n; i++) {
        blk_t *b = &out[i];
        b->psize = psizes[i];
        b->offset = *next_off;
        b->data = rand_block(rng, b->psize, top->ashift);
        b->hash = hash_block(b->data, b->psize);
        assert_int_equal(vdev_write_block(top, b->offset, b->data, b->psize), 0);
        *next_off += vdev_psize_to_asize(top, b->psize);
    }
    return n;
}

static void read_check(vdev_t *top, blk_t *b, int flags, vdev_read_result_t *res)
{
    uint64_t len = CAIRN_P2ROUNDUP(b->psize, 1ULL << top->ashift);
    uint8_t *buf = cairn_alloc_aligned(len);
    int rc = vdev_read_block(top, b->offset, buf, b->psize, verify_hash, &b->hash, flags, res);
    assert_int_equal(rc, 0);
    assert_memory_equal(buf, b->data, b->psize);
    free(buf);
}

static int read_rc(vdev_t *top, blk_t *b, int flags, vdev_read_result_t *res)
{
    uint8_t *buf = cairn_alloc_aligned(CAIRN_P2ROUNDUP(b->psize, 1ULL << top->ashift));
    int rc = vdev_read_block(top, b->offset, buf, b->psize, verify_hash, &b->hash, flags, res);
    free(buf);
    return rc;
}

static void free_blocks(blk_t *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++) free(b[i].data);
}

/* ---- the documented raidz layout, derived independently ---- */

typedef struct tcol {
    unsigned child;
    uint64_t dev_off, len, data_off;
} tcol_t;

static unsigned layout(const vdev_t *top, uint64_t offset, uint64_t psize, tcol_t *cols)
{
    uint64_t n = top->nchildren, p = top->nparity, S = 1ULL << top->ashift;
    uint64_t s = offset / S, q = (psize + S - 1) / S, d = n - p;
    uint64_t rows = (q + d - 1) / d;
    uint64_t ncols = q + p < n ? q + p : n;
    uint64_t big = q % d == 0 ? ncols : p + q % d;
    uint64_t doff = 0;
    for (uint64_t c = 0; c < ncols; c++) {
        cols[c].child = (unsigned)((s + c) % n);
        cols[c].dev_off = VDEV_DATA_START + (s + c) / n * S;
        cols[c].len = (c < big ? rows : rows - 1) * S;
        cols[c].data_off = c >= p ? doff : 0;
        if (c >= p) doff += cols[c].len;
    }
    assert_int_equal(doff, q * S);
    return (unsigned)ncols;
}

static uint8_t *col_mem(vdev_t *top, const tcol_t *c)
{
    return FL(top->children[c->child])->mem + c->dev_off;
}

/* ---- tests ---- */

static int setup(void **state)
{
    (void)state;
    g_tq = taskq_create("fakeleaf", 2);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    taskq_destroy(g_tq);
    return 0;
}

static void test_sizes(void **state)
{
    (void)state;
    uint64_t data = CAIRN_P2ALIGN((uint64_t)LEAF_SIZE, VDEV_LABEL_SIZE) - VDEV_DATA_START -
                    VDEV_END_RESERVE; /* 16 MiB - 4.5 MiB */
    assert_int_equal(data, 16 * CAIRN_MIB - 4 * CAIRN_MIB - 512 * CAIRN_KIB);

    vdev_t *single = make_top(VDEV_TYPE_LEAF, 1, 0, 12, false);
    assert_int_equal(single->asize, data);
    assert_int_equal(vdev_psize_to_asize(single, 5000), 8192);
    assert_int_equal(vdev_psize_to_asize(single, 4096), 4096);
    vdev_free(single);

    /* The smallest side governs a mirror. */
    vdev_t *m = vdev_alloc(VDEV_TYPE_MIRROR, 1);
    vdev_add_child(m, fake_leaf_new(LEAF_SIZE, false));
    vdev_add_child(m, fake_leaf_new(LEAF_SIZE - 300 * CAIRN_KIB, false)); /* loses a label unit */
    m->ashift = 12;
    vdev_compute_asize(m);
    assert_int_equal(m->asize, data - 2 * VDEV_LABEL_SIZE);
    assert_int_equal(m->children[1]->id, 1);
    assert_ptr_equal(m->children[1]->parent, m);
    vdev_free(m);

    vdev_t *rz = make_top(VDEV_TYPE_RAIDZ, 5, 1, 12, false);
    assert_int_equal(rz->asize, 5 * data);
    vdev_free(rz);

    struct { unsigned n, p, a; uint64_t psize, asize; } cases[] = {
        /* q=1, rows=1: 1 data + 1 parity = 2 sectors (already a multiple of 2) */
        {3, 1, 12, 4096, 2 * 4096},
        /* q=3 over 2 data columns: rows=2, 3 + 2 = 5 -> 6 sectors */
        {3, 1, 12, 12288, 6 * 4096},
        {3, 1, 12, 12000, 6 * 4096},
        /* raidz2 n=6: q=1 -> 1 + 2 = 3 sectors (multiple of 3) */
        {6, 2, 12, 4096, 3 * 4096},
        /* q=5, d=4, rows=2: 5 + 4 = 9 -> 9 sectors */
        {6, 2, 12, 20480, 9 * 4096},
        /* q=4, d=4, rows=1: 4 + 2 = 6 sectors */
        {6, 2, 12, 16384, 6 * 4096},
        /* raidz3 n=8, q=5, d=5: 5 + 3 = 8 sectors */
        {8, 3, 12, 20480, 8 * 4096},
        /* q=6, d=5, rows=2: 6 + 6 = 12 sectors */
        {8, 3, 12, 24576, 12 * 4096},
        /* ashift 9, raidz1 n=4, q=7, d=3, rows=3: 7 + 3 = 10 sectors */
        {4, 1, 9, 3500, 10 * 512},
        /* q=32, d=2, rows=16: 32 + 16 = 48 sectors */
        {3, 1, 12, 128 * 1024, 48 * 4096},
        /* raidz3 n=5 d=2, q=3 rows=2: 3 + 6 = 9 -> 12 sectors */
        {5, 3, 12, 12288, 12 * 4096},
    };
    for (unsigned i = 0; i < CAIRN_ARRAY_SIZE(cases); i++) {
        vdev_t *t = vdev_alloc(VDEV_TYPE_RAIDZ, 1);
        t->nchildren = cases[i].n, t->nparity = cases[i].p, t->ashift = cases[i].a;
        assert_int_equal(vdev_psize_to_asize(t, cases[i].psize), cases[i].asize);
        t->nchildren = 0;
        vdev_free(t);
    }
}

struct config {
    vdev_type_t type;
    unsigned n, p, ashift;
    bool async;
};

static const struct config configs[] = {
    {VDEV_TYPE_LEAF, 1, 0, 12, false},  {VDEV_TYPE_MIRROR, 2, 0, 12, true},
    {VDEV_TYPE_MIRROR, 3, 0, 12, false}, {VDEV_TYPE_MIRROR, 2, 0, 9, false},
    {VDEV_TYPE_RAIDZ, 2, 1, 12, false}, {VDEV_TYPE_RAIDZ, 3, 1, 12, true},
    {VDEV_TYPE_RAIDZ, 5, 1, 12, false}, {VDEV_TYPE_RAIDZ, 4, 1, 9, false},
    {VDEV_TYPE_RAIDZ, 4, 2, 12, false}, {VDEV_TYPE_RAIDZ, 6, 2, 12, true},
    {VDEV_TYPE_RAIDZ, 7, 2, 9, false},  {VDEV_TYPE_RAIDZ, 5, 3, 12, false},
    {VDEV_TYPE_RAIDZ, 8, 3, 12, false}, {VDEV_TYPE_RAIDZ, 11, 3, 12, true},
};

static const uint64_t roundtrip_sizes[] = {512,   4096,   5000,  12288,        65536,
                                           100000, 131072 + 512, 1048576, 3 * 4096 + 17, 777};

static void test_roundtrip(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 1);
    for (unsigned ci = 0; ci < CAIRN_ARRAY_SIZE(configs); ci++) {
        const struct config *c = &configs[ci];
        vdev_t *top = make_top(c->type, c->n, c->p, c->ashift, c->async);
        unsigned nb = CAIRN_ARRAY_SIZE(roundtrip_sizes);
        blk_t b[CAIRN_ARRAY_SIZE(roundtrip_sizes)];
        uint64_t off = 3ULL << c->ashift; /* not stripe-aligned */
        write_blocks(top, &rng, roundtrip_sizes, nb, b, &off);
        /* Reading back after all writes also proves blocks do not overlap. */
        for (unsigned i = 0; i < nb; i++) {
            vdev_read_result_t res;
            read_check(top, &b[i], 0, &res);
            assert_int_equal(res.errors_found, 0);
            assert_int_equal(res.repaired_bytes, 0);
            read_check(top, &b[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
        }
        /* A caller buffer that is not I/O-aligned goes through bounce buffers. */
        uint8_t *raw = cairn_alloc_aligned(2 * CAIRN_MIB);
        uint8_t *odd = raw + 8;
        memcpy(odd, b[2].data, b[2].psize);
        assert_int_equal(vdev_write_block(top, b[2].offset, odd, b[2].psize), 0);
        memset(odd, 0, 2 * CAIRN_MIB - 8);
        assert_int_equal(vdev_read_block(top, b[2].offset, odd, b[2].psize, verify_hash, &b[2].hash,
                                         0, NULL),
                         0);
        assert_memory_equal(odd, b[2].data, b[2].psize);
        free(raw);
        assert_int_equal(total_misaligned(top), 0);
        /* Out of range and misaligned requests are refused. */
        assert_int_equal(vdev_write_block(top, top->asize, b[0].data, 512), -EINVAL);
        assert_int_equal(vdev_write_block(top, 100, b[0].data, 512), -EINVAL);
        free_blocks(b, nb);
        vdev_free(top);
    }
}

/* The bytes on the children are where the layout comment says they are. */
static void test_raidz_layout(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 2);
    const struct { unsigned n, p, a; uint64_t off_sectors, psize; } cases[] = {
        {5, 2, 12, 7, 9 * 4096 + 100}, {3, 1, 12, 1, 4096}, {8, 3, 9, 13, 20 * 512},
        {6, 1, 12, 4, 64 * 1024}, {4, 3, 12, 2, 3 * 4096},
    };
    for (unsigned k = 0; k < CAIRN_ARRAY_SIZE(cases); k++) {
        vdev_t *top = make_top(VDEV_TYPE_RAIDZ, cases[k].n, cases[k].p, cases[k].a, false);
        uint64_t S = 1ULL << cases[k].a, psize = cases[k].psize;
        blk_t b;
        uint64_t off = cases[k].off_sectors * S;
        write_blocks(top, &rng, &psize, 1, &b, &off);
        tcol_t cols[VDEV_MAX_CHILDREN];
        unsigned ncols = layout(top, b.offset, psize, cols), p = cases[k].p;
        uint64_t rows = cols[0].len / S;
        uint8_t *expect_par[3];
        for (unsigned j = 0; j < p; j++) expect_par[j] = cairn_zalloc(rows * S);
        for (unsigned c = p; c < ncols; c++) {
            uint8_t *mem = col_mem(top, &cols[c]);
            assert_memory_equal(mem, b.data + cols[c].data_off,
                                CAIRN_MIN(cols[c].len, psize - CAIRN_MIN(psize, cols[c].data_off)));
            /* Parity by definition: P = sum D_i, Q = sum 2^i D_i, R = sum 4^i D_i. */
            for (unsigned j = 0; j < p; j++) {
                uint8_t coef = raidz_gf_exp2((c - p) * j);
                raidz_gf_mul_xor(expect_par[j], mem, cols[c].len, coef);
            }
        }
        for (unsigned j = 0; j < p; j++) {
            assert_memory_equal(col_mem(top, &cols[j]), expect_par[j], rows * S);
            free(expect_par[j]);
        }
        free_blocks(&b, 1);
        vdev_free(top);
    }
}

static void test_mirror_self_heal(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 3);
    for (unsigned n = 2; n <= 3; n++) {
        vdev_t *top = make_top(VDEV_TYPE_MIRROR, n, 0, 12, n == 2);
        uint64_t sizes[] = {5000, 131072, 4096 * 300};
        blk_t b[3];
        uint64_t off = 0;
        write_blocks(top, &rng, sizes, 3, b, &off);
        uint64_t len1 = CAIRN_P2ROUNDUP(b[1].psize, 4096);
        uint32_t normal_found = 0;
        for (unsigned good = 0; good < n; good++) {
            /* Every side but one lies: a read must find it and heal the others. */
            for (unsigned s = 0; s < n; s++)
                if (s != good) FL(top->children[s])->mem[VDEV_DATA_START + b[1].offset + 10] ^= 0x40;
            uint64_t ck[3];
            for (unsigned s = 0; s < n; s++) ck[s] = top->children[s]->stats.checksum_errors;
            /* A normal read heals the sides it tried before a good one (which ones
             * depends on where it starts); a scrub then heals the rest. */
            vdev_read_result_t res, res2;
            read_check(top, &b[1], 0, &res);
            read_check(top, &b[1], VDEV_READ_SCRUB, &res2);
            normal_found += res.errors_found;
            assert_int_equal(res.errors_found + res2.errors_found, n - 1);
            assert_int_equal(res.repaired_bytes + res2.repaired_bytes, (n - 1) * len1);
            read_check(top, &b[1], VDEV_READ_SCRUB, &res2);
            assert_int_equal(res2.errors_found, 0);
            for (unsigned s = 0; s < n; s++) {
                assert_int_equal(top->children[s]->stats.checksum_errors, ck[s] + (s != good));
                assert_memory_equal(FL(top->children[s])->mem + VDEV_DATA_START + b[1].offset,
                                    b[1].data, b[1].psize);
            }
        }
        /* Whatever side reads start at, for some choice of good side it was bad. */
        assert_true(normal_found > 0);

        /* Scrub finds a bad side that a normal read might never look at. */
        uint8_t *side1 = FL(top->children[n - 1])->mem + VDEV_DATA_START + b[2].offset;
        side1[4096 * 299] ^= 1;
        vdev_read_result_t res;
        read_check(top, &b[2], VDEV_READ_SCRUB, &res);
        assert_int_equal(res.errors_found, 1);
        assert_int_equal(side1[4096 * 299], b[2].data[4096 * 299]);

        /* NOREPAIR: good data, nothing written. */
        side1[0] ^= 1;
        read_check(top, &b[2], VDEV_READ_SCRUB | VDEV_READ_NOREPAIR, &res);
        assert_int_equal(res.errors_found, 1);
        assert_int_equal(res.repaired_bytes, 0);
        assert_int_not_equal(side1[0], b[2].data[0]);
        side1[0] ^= 1;

        /* A side that fails reads: the other copy serves, and it is rewritten. */
        FL(top->children[0])->fail_reads = true;
        unsigned w0 = FL(top->children[0])->writes;
        for (unsigned i = 0; i < 3; i++) read_check(top, &b[i], VDEV_READ_SCRUB, &res);
        assert_int_equal(res.errors_found, 1);
        assert_int_equal(FL(top->children[0])->writes, w0 + 3);
        FL(top->children[0])->fail_reads = false;

        /* Every side bad: checksum error; every side failing: EIO. */
        for (unsigned s = 0; s < n; s++) FL(top->children[s])->mem[VDEV_DATA_START + b[0].offset] ^= 1;
        assert_int_equal(read_rc(top, &b[0], 0, &res), -ECKSUM);
        assert_int_equal(res.repaired_bytes, 0);
        for (unsigned s = 0; s < n; s++) FL(top->children[s])->fail_reads = true;
        assert_int_equal(read_rc(top, &b[1], 0, NULL), -EIO);
        for (unsigned s = 0; s < n; s++) FL(top->children[s])->fail_reads = false;

        /* Writes succeed while one side takes them; not when none does. */
        top->children[0]->state = VDEV_STATE_UNAVAIL;
        assert_int_equal(vdev_write_block(top, b[1].offset, b[1].data, b[1].psize), 0);
        read_check(top, &b[1], 0, NULL);
        for (unsigned s = 1; s < n; s++) FL(top->children[s])->fail_writes = true;
        assert_int_equal(vdev_write_block(top, b[1].offset, b[1].data, b[1].psize), -EIO);
        for (unsigned s = 1; s < n; s++) FL(top->children[s])->fail_writes = false;
        top->children[0]->state = VDEV_STATE_ONLINE;
        free_blocks(b, 3);
        vdev_free(top);
    }

    /* A single leaf has nothing to heal from. */
    vdev_t *leaf = make_top(VDEV_TYPE_LEAF, 1, 0, 12, false);
    uint64_t sz = 8192;
    blk_t b;
    uint64_t off = 4096;
    write_blocks(leaf, &rng, &sz, 1, &b, &off);
    read_check(leaf, &b, 0, NULL);
    FL(leaf)->mem[VDEV_DATA_START + 4096 + 5] ^= 1;
    assert_int_equal(read_rc(leaf, &b, 0, NULL), -ECKSUM);
    assert_int_equal(leaf->stats.checksum_errors, 1);
    FL(leaf)->fail_reads = true;
    assert_int_equal(read_rc(leaf, &b, 0, NULL), -EIO);
    free_blocks(&b, 1);
    vdev_free(leaf);
}

/* Corrupts the first bytes of a column (always within psize: see sizes used). */
static void corrupt_col(vdev_t *top, const tcol_t *c, uint8_t pattern)
{
    uint8_t *m = col_mem(top, c);
    for (int i = 0; i < 8; i++) m[i] ^= pattern;
}

static bool next_subset(unsigned *idx, unsigned k, unsigned n)
{
    int i = (int)k - 1;
    while (i >= 0 && idx[i] == n - k + (unsigned)i) i--;
    if (i < 0) return false;
    idx[i]++;
    for (unsigned j = (unsigned)i + 1; j < k; j++) idx[j] = idx[j - 1] + 1;
    return true;
}


/* VDEV_READ_NOW (read-ahead): each side is read in the caller's thread through
 * the leaf's io_now, never submitted; a lying side is still skipped, counted
 * and healed; without the flag, or on a leaf without io_now, reads are
 * submitted as before. */
static void test_mirror_read_now(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 11);
    vdev_t *top = make_top(VDEV_TYPE_MIRROR, 2, 0, 12, true);
    top->children[0]->ops = &fake_ops_now;
    top->children[1]->ops = &fake_ops_now;
    uint64_t sizes[] = {131072, 8192};
    blk_t b[2];
    uint64_t off = 0;
    write_blocks(top, &rng, sizes, 2, b, &off);
    unsigned r0 = FL(top->children[0])->reads + FL(top->children[1])->reads;
    vdev_read_result_t res;
    read_check(top, &b[0], VDEV_READ_NOW, &res);
    read_check(top, &b[1], VDEV_READ_NOW, &res);
    unsigned now = FL(top->children[0])->now_reads + FL(top->children[1])->now_reads;
    assert_int_equal(now, 2);
    assert_int_equal(FL(top->children[0])->reads + FL(top->children[1])->reads, r0 + 2);
    /* Both sides lie in turn: the read finds the good one, heals the other. */
    for (unsigned bad = 0; bad < 2; bad++) {
        FL(top->children[bad])->mem[VDEV_DATA_START + b[0].offset + 77] ^= 0x10;
        uint64_t ck = top->children[bad]->stats.checksum_errors;
        unsigned n0 = FL(top->children[0])->now_reads + FL(top->children[1])->now_reads;
        read_check(top, &b[0], VDEV_READ_NOW, &res);
        read_check(top, &b[0], VDEV_READ_SCRUB, &res); /* heals it if the read never looked */
        assert_int_equal(FL(top->children[bad])->mem[VDEV_DATA_START + b[0].offset + 77],
                         b[0].data[77]);
        assert_true(top->children[bad]->stats.checksum_errors == ck + 1);
        assert_true(FL(top->children[0])->now_reads + FL(top->children[1])->now_reads > n0);
    }
    /* Without the flag: submitted. */
    now = FL(top->children[0])->now_reads + FL(top->children[1])->now_reads;
    read_check(top, &b[1], 0, &res);
    assert_int_equal(FL(top->children[0])->now_reads + FL(top->children[1])->now_reads, now);
    free_blocks(b, 2);
    vdev_free(top);
}

static void test_raidz_self_heal(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 4);
    const struct config rz[] = {
        {VDEV_TYPE_RAIDZ, 3, 1, 12, false}, {VDEV_TYPE_RAIDZ, 5, 1, 9, true},
        {VDEV_TYPE_RAIDZ, 4, 2, 12, false}, {VDEV_TYPE_RAIDZ, 7, 2, 12, true},
        {VDEV_TYPE_RAIDZ, 5, 3, 12, false}, {VDEV_TYPE_RAIDZ, 8, 3, 9, false},
    };
    for (unsigned ci = 0; ci < CAIRN_ARRAY_SIZE(rz); ci++) {
        vdev_t *top = make_top(rz[ci].type, rz[ci].n, rz[ci].p, rz[ci].ashift, rz[ci].async);
        unsigned p = rz[ci].p;
        uint64_t sizes[] = {5000, 41000, 100000};
        blk_t b[3];
        uint64_t off = 1ULL << rz[ci].ashift;
        write_blocks(top, &rng, sizes, 3, b, &off);
        for (unsigned bi = 0; bi < 3; bi++) {
            tcol_t cols[VDEV_MAX_CHILDREN];
            unsigned ncols = layout(top, b[bi].offset, b[bi].psize, cols);
            for (unsigned k = 1; k <= p; k++) {
                unsigned idx[3] = {0, 1, 2};
                do {
                    bool has_data = false;
                    uint64_t ck[VDEV_MAX_CHILDREN], bytes = 0;
                    for (unsigned c = 0; c < top->nchildren; c++)
                        ck[c] = top->children[c]->stats.checksum_errors;
                    for (unsigned t = 0; t < k; t++) {
                        corrupt_col(top, &cols[idx[t]], (uint8_t)(0x11 * (t + 1)));
                        has_data |= idx[t] >= p;
                        bytes += cols[idx[t]].len;
                    }
                    vdev_read_result_t res;
                    read_check(top, &b[bi], 0, &res);
                    if (!has_data) {
                        /* Bad parity alone is invisible to a normal read... */
                        assert_int_equal(res.errors_found, 0);
                        read_check(top, &b[bi], VDEV_READ_SCRUB, &res); /* ...not to scrub */
                    }
                    assert_int_equal(res.errors_found, k);
                    assert_int_equal(res.repaired_bytes, bytes);
                    for (unsigned t = 0; t < k; t++) {
                        unsigned child = cols[idx[t]].child;
                        assert_int_equal(top->children[child]->stats.checksum_errors, ck[child] + 1);
                    }
                    /* Healed: a scrub now finds nothing. */
                    read_check(top, &b[bi], VDEV_READ_SCRUB, &res);
                    assert_int_equal(res.errors_found, 0);
                } while (next_subset(idx, k, ncols));
            }
            /* p + 1 bad data columns cannot be fixed, and nothing gets "repaired". */
            if (ncols - p >= p + 1) {
                unsigned w = 0;
                for (unsigned c = 0; c < top->nchildren; c++) w += FL(top->children[c])->writes;
                for (unsigned t = 0; t <= p; t++) corrupt_col(top, &cols[p + t], 0x80);
                vdev_read_result_t res;
                assert_int_equal(read_rc(top, &b[bi], VDEV_READ_SCRUB, &res), -ECKSUM);
                assert_int_equal(res.repaired_bytes, 0);
                unsigned w2 = 0;
                for (unsigned c = 0; c < top->nchildren; c++) w2 += FL(top->children[c])->writes;
                assert_int_equal(w, w2);
                for (unsigned t = 0; t <= p; t++) corrupt_col(top, &cols[p + t], 0x80);
                read_check(top, &b[bi], 0, NULL);
            }
        }
        /* NOREPAIR: correct data, disks untouched. */
        tcol_t cols[VDEV_MAX_CHILDREN];
        layout(top, b[2].offset, b[2].psize, cols);
        corrupt_col(top, &cols[p], 0x3c);
        vdev_read_result_t res;
        read_check(top, &b[2], VDEV_READ_NOREPAIR, &res);
        assert_int_equal(res.errors_found, 1);
        assert_int_equal(res.repaired_bytes, 0);
        assert_int_not_equal(col_mem(top, &cols[p])[0], b[2].data[cols[p].data_off]);
        read_check(top, &b[2], 0, &res);
        assert_int_equal(res.errors_found, 1);
        assert_int_equal(col_mem(top, &cols[p])[0], b[2].data[cols[p].data_off]);
        assert_int_equal(total_misaligned(top), 0);
        free_blocks(b, 3);
        vdev_free(top);
    }
}

static void test_raidz_missing_children(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 5);
    for (unsigned p = 1; p <= 3; p++) {
        unsigned n = p + 3;
        vdev_t *top = make_top(VDEV_TYPE_RAIDZ, n, p, 12, p == 2);
        uint64_t sizes[] = {4096, 30000, 262144, 9000};
        blk_t before[4], during[4];
        uint64_t off = 0;
        write_blocks(top, &rng, sizes, 4, before, &off);

        /* Up to p children gone: reads reconstruct, writes still succeed. */
        for (unsigned k = 1; k <= p; k++) top->children[k]->state = VDEV_STATE_UNAVAIL;
        vdev_state_refresh(top);
        assert_int_equal(top->state, VDEV_STATE_DEGRADED);
        for (unsigned i = 0; i < 4; i++) read_check(top, &before[i], 0, NULL);
        write_blocks(top, &rng, sizes, 4, during, &off);
        for (unsigned i = 0; i < 4; i++) read_check(top, &during[i], 0, NULL);

        /* One more is too many. */
        top->children[p + 1]->state = VDEV_STATE_FAULTED;
        vdev_state_refresh(top);
        assert_int_equal(top->state, VDEV_STATE_FAULTED);
        assert_int_equal(read_rc(top, &before[2], 0, NULL), -EIO);
        assert_int_equal(vdev_write_block(top, off, before[2].data, before[2].psize), -EIO);
        top->children[p + 1]->state = VDEV_STATE_ONLINE;

        /* The children come back stale: reads detect and heal the blocks written
         * meanwhile; a scrub afterwards finds everything consistent. */
        for (unsigned k = 1; k <= p; k++) top->children[k]->state = VDEV_STATE_ONLINE;
        vdev_state_refresh(top);
        assert_int_equal(top->state, VDEV_STATE_ONLINE);
        for (unsigned i = 0; i < 4; i++) read_check(top, &during[i], VDEV_READ_SCRUB, NULL);
        for (unsigned i = 0; i < 4; i++) {
            vdev_read_result_t res;
            read_check(top, &during[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
            read_check(top, &before[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
        }

        /* Children failing reads (EIO) under p data columns: still readable, and
         * the columns are rewritten. One more failure is too many. */
        tcol_t cols[VDEV_MAX_CHILDREN];
        layout(top, before[2].offset, before[2].psize, cols); /* every child has a column */
        for (unsigned k = 0; k < p; k++) FL(top->children[cols[p + k].child])->fail_reads = true;
        unsigned w0 = FL(top->children[cols[p].child])->writes;
        vdev_read_result_t res;
        read_check(top, &before[2], 0, &res);
        assert_int_equal(res.errors_found, p);
        assert_int_equal(FL(top->children[cols[p].child])->writes, w0 + 1);
        FL(top->children[cols[0].child])->fail_reads = true;
        assert_int_equal(read_rc(top, &before[2], 0, NULL), -EIO);
        for (unsigned k = 0; k < n; k++) FL(top->children[k])->fail_reads = false;

        /* Writes tolerate up to p failing children. */
        for (unsigned k = 0; k < p; k++) FL(top->children[k])->fail_writes = true;
        assert_int_equal(vdev_write_block(top, before[1].offset, before[1].data, before[1].psize), 0);
        FL(top->children[p])->fail_writes = true;
        assert_int_equal(vdev_write_block(top, before[1].offset, before[1].data, before[1].psize),
                         -EIO);
        for (unsigned k = 0; k <= p; k++) FL(top->children[k])->fail_writes = false;
        free_blocks(before, 4);
        free_blocks(during, 4);
        vdev_free(top);
    }
}

/* Offline leaves miss writes; back in service but stale they serve no read (a
 * normal read never touches them, counts no error, writes nothing to them); a
 * resilver read writes exactly their copies/columns, after which a scrub finds
 * every copy and column good. Mirror 3-way with two sides out, raidz2 with two
 * children out (the missed blocks rebuilt from parity). */
static void test_stale_resilver(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 11);
    vdev_t *tops[] = {make_top(VDEV_TYPE_MIRROR, 3, 0, 12, false),
                      make_top(VDEV_TYPE_RAIDZ, 5, 2, 12, true)};
    for (unsigned t = 0; t < 2; t++) {
        vdev_t *top = tops[t];
        uint64_t sizes[] = {4096, 30000, 262144, 9000, 131072};
        blk_t before[5], during[5];
        uint64_t off = 0;
        write_blocks(top, &rng, sizes, 5, before, &off);
        vdev_t *out[2] = {top->children[1], top->children[2]};
        for (unsigned k = 0; k < 2; k++) out[k]->state = VDEV_STATE_OFFLINE;
        vdev_state_refresh(top);
        assert_int_equal(top->state, VDEV_STATE_DEGRADED);
        unsigned w0 = FL(out[0])->writes;
        write_blocks(top, &rng, sizes, 5, during, &off);
        assert_int_equal(FL(out[0])->writes, w0); /* offline: no I/O */

        for (unsigned k = 0; k < 2; k++) {
            atomic_store(&out[k]->stale, true);
            out[k]->state = VDEV_STATE_ONLINE;
        }
        unsigned r0 = FL(out[0])->reads + FL(out[1])->reads;
        w0 = FL(out[0])->writes + FL(out[1])->writes;
        for (unsigned i = 0; i < 5; i++) {
            vdev_read_result_t res;
            read_check(top, &during[i], 0, &res);
            assert_int_equal(res.errors_found, 0);
            assert_int_equal(res.repaired_bytes, 0);
            read_check(top, &before[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
        }
        assert_int_equal(FL(out[0])->reads + FL(out[1])->reads, r0);
        assert_int_equal(FL(out[0])->writes + FL(out[1])->writes, w0);

        /* Resilver the blocks written while they were out: only the stale leaves
         * are written. */
        unsigned w_good = FL(top->children[0])->writes;
        for (unsigned i = 0; i < 5; i++) {
            vdev_read_result_t res;
            read_check(top, &during[i], VDEV_READ_RESILVER, &res);
            assert_int_equal(res.errors_found, 0);
            assert_true(res.repaired_bytes > 0);
        }
        assert_int_equal(FL(top->children[0])->writes, w_good);
        assert_true(FL(out[0])->writes + FL(out[1])->writes > w0);

        for (unsigned k = 0; k < 2; k++) atomic_store(&out[k]->stale, false);
        for (unsigned i = 0; i < 5; i++) {
            vdev_read_result_t res;
            read_check(top, &during[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
            read_check(top, &before[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
        }
        free_blocks(before, 5);
        free_blocks(during, 5);
        vdev_free(top);
    }
}

/* A replacing vdev (OLD, NEW) in a raidz child's and in a mirror side's place:
 * writes go to both, reads never to NEW while it is stale, a resilver read
 * writes NEW's column or copy (from OLD or by reconstruction), after which NEW
 * alone, with OLD gone, holds every block. */
static void test_replacing_child(void **state)
{
    (void)state;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, 12);
    vdev_t *tops[] = {make_top(VDEV_TYPE_RAIDZ, 4, 1, 12, false),
                      make_top(VDEV_TYPE_MIRROR, 2, 0, 12, true)};
    for (unsigned t = 0; t < 2; t++) {
        vdev_t *top = tops[t];
        uint64_t sizes[] = {262144, 8192, 65536, 4096};
        blk_t before[4], during[4];
        uint64_t off = 0;
        write_blocks(top, &rng, sizes, 4, before, &off);
        unsigned idx = top->nchildren - 1;
        vdev_t *old = top->children[idx];
        vdev_t *rep = vdev_alloc(VDEV_TYPE_REPLACING, cairn_random_guid());
        vdev_t *nl = fake_leaf_new(LEAF_SIZE, false);
        vdev_add_child(rep, old);
        vdev_add_child(rep, nl);
        rep->parent = top;
        rep->id = idx;
        top->children[idx] = rep;
        atomic_store(&nl->stale, true);
        vdev_state_refresh(top);
        assert_int_equal(top->state, VDEV_STATE_ONLINE); /* OLD still serves */

        unsigned ow = FL(old)->writes;
        write_blocks(top, &rng, sizes, 4, during, &off);
        assert_true(FL(old)->writes > ow);
        assert_true(FL(nl)->writes > 0);
        unsigned nr = FL(nl)->reads;
        for (unsigned i = 0; i < 4; i++) {
            vdev_read_result_t res;
            read_check(top, &before[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
            read_check(top, &during[i], 0, NULL);
        }
        assert_int_equal(FL(nl)->reads, nr);

        unsigned nw = FL(nl)->writes;
        for (unsigned i = 0; i < 4; i++) read_check(top, &before[i], VDEV_READ_RESILVER, NULL);
        assert_true(FL(nl)->writes > nw);

        /* NEW is whole; OLD goes away: everything verifies from NEW and the rest. */
        atomic_store(&nl->stale, false);
        old->state = VDEV_STATE_OFFLINE;
        for (unsigned i = 0; i < 4; i++) {
            vdev_read_result_t res;
            read_check(top, &before[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
            read_check(top, &during[i], VDEV_READ_SCRUB, &res);
            assert_int_equal(res.errors_found, 0);
        }
        free_blocks(before, 4);
        free_blocks(during, 4);
        vdev_free(top);
    }
}

/* A speculative read that finds no valid copy (an intent-log chain's end)
 * charges no checksum error; an ordinary one charges every side. */
static bool verify_never(const void *buf, uint64_t psize, void *arg)
{
    (void)buf, (void)psize, (void)arg;
    return false;
}

static void test_speculative_read(void **state)
{
    (void)state;
    vdev_t *top = make_top(VDEV_TYPE_MIRROR, 2, 0, 12, false);
    uint8_t *buf = cairn_alloc_aligned(4096);
    assert_int_equal(vdev_read_block(top, 0, buf, 4096, verify_never, NULL,
                                     VDEV_READ_SPECULATIVE | VDEV_READ_NOREPAIR, NULL), -ECKSUM);
    for (unsigned i = 0; i < 2; i++) assert_int_equal(top->children[i]->stats.checksum_errors, 0);
    assert_int_equal(vdev_read_block(top, 0, buf, 4096, verify_never, NULL, VDEV_READ_NOREPAIR, NULL),
                     -ECKSUM);
    for (unsigned i = 0; i < 2; i++) assert_int_equal(top->children[i]->stats.checksum_errors, 1);
    free(buf);
    vdev_free(top);
}

/* Dirty time logs: ranges merge when they touch, the log only ever covers more. */
static void test_dtl(void **state)
{
    (void)state;
    vdev_t *l = vdev_alloc(VDEV_TYPE_LEAF, 1);
    assert_true(vdev_dtl_empty(l));
    vdev_dtl_add(l, 10, 20);
    vdev_dtl_add(l, 21, 25); /* adjacent: one range */
    assert_int_equal(l->ndtl, 1);
    assert_true(vdev_dtl_contains(l, 10) && vdev_dtl_contains(l, 25));
    assert_false(vdev_dtl_contains(l, 9) || vdev_dtl_contains(l, 26));
    vdev_dtl_add(l, 40, 50);
    vdev_dtl_add(l, 5, 7);
    assert_int_equal(l->ndtl, 3);
    assert_int_equal(l->dtl[0][0], 5);
    vdev_dtl_add(l, 60, 61);
    vdev_dtl_add(l, 100, UINT64_MAX);
    /* Past VDEV_DTL_MAX the closest ranges merge: 5-7 and 10-25 (gap 2). */
    assert_int_equal(l->ndtl, VDEV_DTL_MAX);
    for (uint64_t txg = 5; txg <= 25; txg++) assert_true(vdev_dtl_contains(l, txg));
    assert_true(vdev_dtl_contains(l, 45) && vdev_dtl_contains(l, UINT64_MAX - 1));
    assert_false(vdev_dtl_contains(l, 30) || vdev_dtl_contains(l, 70));
    vdev_dtl_add(l, 0, UINT64_MAX);
    assert_int_equal(l->ndtl, 1);
    vdev_free(l);
}

static void count_leaf(vdev_t *leaf, void *arg)
{
    (void)leaf;
    (*(unsigned *)arg)++;
}

static void test_tree_and_states(void **state)
{
    (void)state;
    vdev_t *root = vdev_alloc(VDEV_TYPE_ROOT, 1);
    vdev_t *m = make_top(VDEV_TYPE_MIRROR, 2, 0, 12, false);
    vdev_t *rz = make_top(VDEV_TYPE_RAIDZ, 5, 2, 12, false);
    vdev_t *single = make_top(VDEV_TYPE_LEAF, 1, 0, 12, false);
    vdev_add_child(root, m);
    vdev_add_child(root, rz);
    vdev_add_child(root, single);
    assert_string_equal(vdev_type_name(root), "root");
    assert_string_equal(vdev_type_name(m), "mirror");
    assert_string_equal(vdev_type_name(rz), "raidz2");
    assert_string_equal(vdev_type_name(single), "file");
    free(single->path);
    single->path = cairn_strdup("/dev/sdb");
    assert_string_equal(vdev_type_name(single), "disk");
    assert_string_equal(vdev_state_name(VDEV_STATE_DEGRADED), "DEGRADED");
    assert_string_equal(vdev_state_name(VDEV_STATE_UNAVAIL), "UNAVAIL");
    assert_ptr_equal(vdev_top(rz->children[3]), rz);
    assert_ptr_equal(vdev_top(single), single);
    assert_ptr_equal(vdev_top(rz), rz);
    assert_int_equal(rz->id, 1);
    assert_true(vdev_is_leaf(single));
    assert_false(vdev_is_leaf(m));
    unsigned leaves = 0;
    vdev_foreach_leaf(root, count_leaf, &leaves);
    assert_int_equal(leaves, 2 + 5 + 1);

    vdev_state_refresh(root);
    assert_int_equal(root->state, VDEV_STATE_ONLINE);
    m->children[0]->state = VDEV_STATE_UNAVAIL;
    vdev_state_refresh(root);
    assert_int_equal(m->state, VDEV_STATE_DEGRADED);
    assert_int_equal(root->state, VDEV_STATE_DEGRADED);
    m->children[1]->state = VDEV_STATE_FAULTED;
    vdev_state_refresh(root);
    assert_int_equal(m->state, VDEV_STATE_FAULTED);
    assert_int_equal(root->state, VDEV_STATE_FAULTED);
    m->children[0]->state = m->children[1]->state = VDEV_STATE_ONLINE;
    rz->children[0]->state = VDEV_STATE_UNAVAIL;
    rz->children[4]->state = VDEV_STATE_UNAVAIL;
    vdev_state_refresh(root);
    assert_int_equal(rz->state, VDEV_STATE_DEGRADED);
    assert_int_equal(m->state, VDEV_STATE_ONLINE);
    rz->children[2]->state = VDEV_STATE_FAULTED;
    vdev_state_refresh(root);
    assert_int_equal(rz->state, VDEV_STATE_FAULTED);
    rz->children[0]->state = rz->children[2]->state = rz->children[4]->state = VDEV_STATE_ONLINE;
    single->state = VDEV_STATE_UNAVAIL;
    vdev_state_refresh(root);
    assert_int_equal(root->state, VDEV_STATE_FAULTED);
    single->state = VDEV_STATE_ONLINE;
    vdev_state_refresh(root);
    assert_int_equal(root->state, VDEV_STATE_ONLINE);

    /* Root asize is the sum of its top-level vdevs. */
    vdev_compute_asize(root);
    assert_int_equal(root->asize, m->asize + rz->asize + single->asize);
    vdev_free(root);
}

/* Several threads doing block I/O on one raidz and one mirror at once. */
typedef struct worker {
    vdev_t *top;
    uint64_t base, max_psize;
    uint64_t seed;
    int failures;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    cairn_rng_t rng;
    cairn_rng_seed(&rng, w->seed);
    uint64_t off = w->base;
    for (int i = 0; i < 40; i++) {
        uint64_t psize = 512 + cairn_rng_below(&rng, w->max_psize);
        uint8_t *d = rand_block(&rng, psize, w->top->ashift);
        uint64_t h = hash_block(d, psize);
        if (vdev_write_block(w->top, off, d, psize) != 0) w->failures++;
        uint8_t *r = cairn_alloc_aligned(CAIRN_P2ROUNDUP(psize, 4096));
        if (vdev_read_block(w->top, off, r, psize, verify_hash, &h, 0, NULL) != 0 ||
            memcmp(r, d, psize) != 0)
            w->failures++;
        off += vdev_psize_to_asize(w->top, psize);
        free(d);
        free(r);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    vdev_t *tops[2] = {make_top(VDEV_TYPE_RAIDZ, 6, 2, 12, true),
                       make_top(VDEV_TYPE_MIRROR, 2, 0, 12, true)};
    for (int t = 0; t < 2; t++) {
        pthread_t th[4];
        worker_t w[4];
        for (int i = 0; i < 4; i++) {
            /* Disjoint regions. raidz2 of 6 (69 MiB): 40 blocks of < 200 KB take
             * < 13 MiB; mirror (11.5 MiB): 40 blocks of < 45 KB take < 2 MiB. */
            w[i] = t ? (worker_t){tops[t], (uint64_t)i * 2 * CAIRN_MIB, 44000, 100 + i, 0}
                     : (worker_t){tops[t], (uint64_t)i * 16 * CAIRN_MIB, 200000, 100 + i, 0};
            pthread_create(&th[i], NULL, worker_main, &w[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            assert_int_equal(w[i].failures, 0);
        }
        vdev_free(tops[t]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_raidz_layout),
        cmocka_unit_test(test_mirror_self_heal),
        cmocka_unit_test(test_mirror_read_now),
        cmocka_unit_test(test_raidz_self_heal),
        cmocka_unit_test(test_raidz_missing_children),
        cmocka_unit_test(test_tree_and_states),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_stale_resilver),
        cmocka_unit_test(test_replacing_child),
        cmocka_unit_test(test_dtl),
        cmocka_unit_test(test_speculative_read),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
