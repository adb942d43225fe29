/*
 * A toy upper layer for testing the pool layer without the DMU.
 *
 * Its "MOS" is one root block holding a table of slots; each slot names one
 * data block whose contents are derived from (seed, slot, txg) so any block
 * that comes back from the wrong place or the wrong txg is caught. Tests
 * queue slot writes under a tx hold; the sync callback writes them, frees the
 * blocks they replace, and rewrites the root.
 */
#ifndef SPA_TOY_UPPER_H
#define SPA_TOY_UPPER_H

#include <cairn/spa.h>
#include <cairn/util.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TOY_SLOTS 96
#define TOY_MAGIC 0x544f59524f4f5431ULL

typedef struct toy_slot_phys {
    cairn_blkptr_t bp;
    uint64_t seed;
    uint64_t txg;        /* txg that wrote it: stamped into the data too */
    uint64_t size;
    uint64_t reserved;
} toy_slot_phys_t;

typedef struct toy_root_phys {
    uint64_t magic;
    uint64_t last_txg;   /* the txg of the newest change */
    toy_slot_phys_t slot[TOY_SLOTS];
} toy_root_phys_t;

typedef struct toy_pending {
    bool set;
    uint64_t seed, size;
    uint8_t compress, checksum, copies;
} toy_pending_t;

typedef struct toy_state {
    pthread_mutex_t lock;
    cairn_blkptr_t root_bp;
    toy_root_phys_t root;         /* as of the last sync */
    toy_pending_t pending[4][TOY_SLOTS]; /* by txg & 3 */
} toy_state_t;

static inline void toy_fill(uint8_t *buf, uint64_t size, uint64_t seed, uint64_t slot, uint64_t txg)
{
    cairn_rng_t r;
    cairn_rng_seed(&r, seed * 1000003 + slot);
    /* Half random, half runs: compressible but not trivially so. */
    for (uint64_t i = 0; i < size; i += 8) {
        uint64_t v = (i / 8) % 4 < 2 ? cairn_rng_next(&r) : (seed & 0xff) * 0x0101010101010101ULL;
        memcpy(buf + i, &v, size - i < 8 ? size - i : 8);
    }
    if (size >= 24) {
        memcpy(buf, &txg, 8);
        memcpy(buf + 8, &slot, 8);
        memcpy(buf + 16, &seed, 8);
    }
}

static int toy_create(spa_t *spa, uint64_t txg)
{
    (void)txg;
    toy_state_t *t = cairn_zalloc(sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->root.magic = TOY_MAGIC;
    spa_set_upper_private(spa, t);
    return 0;
}

static int toy_open(spa_t *spa, const cairn_blkptr_t *mos_root)
{
    toy_state_t *t = cairn_zalloc(sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->root.magic = TOY_MAGIC;
    if (!cairn_bp_is_hole(mos_root)) {
        if (mos_root->lsize != sizeof(toy_root_phys_t)) { free(t); return -EINVAL; }
        int e = spa_block_read(spa, mos_root, &t->root);
        if (e) { free(t); return e; }
        if (t->root.magic != TOY_MAGIC) { free(t); return -EINVAL; }
        t->root_bp = *mos_root;
    }
    spa_set_upper_private(spa, t);
    return 0;
}

/* Writes slots [first, end) of the batch (same write properties) as the
 * engine's upper layers do, with one spa_block_write_many: the blocks lie end
 * to end, so their device writes merge - on fault leaves too, where the power
 * cuts of test_spa_pool then strike merged writes. */
static int toy_write_batch(spa_t *spa, uint64_t txg, toy_state_t *t, const int *slots, int n)
{
    if (!n) return 0;
    toy_pending_t *p0 = &t->pending[txg & 3][slots[0]];
    spa_write_props_t props = {.type = CAIRN_BT_DATA, .checksum = p0->checksum,
                               .compress = p0->compress, .copies = p0->copies};
    const void *datas[TOY_SLOTS] = {0};
    uint32_t sizes[TOY_SLOTS] = {0};
    cairn_blkptr_t bps[TOY_SLOTS];
    for (int i = 0; i < n; i++) {
        toy_pending_t *p = &t->pending[txg & 3][slots[i]];
        uint8_t *buf = cairn_alloc_aligned(p->size);
        toy_fill(buf, p->size, p->seed, (uint64_t)slots[i], txg);
        datas[i] = buf;
        sizes[i] = (uint32_t)p->size;
    }
    int e = spa_block_write_many(spa, txg, (size_t)n, datas, sizes, &props, bps);
    for (int i = 0; i < n; i++) free((void *)datas[i]);
    if (e) return e;
    for (int i = 0; i < n; i++) {
        toy_pending_t *p = &t->pending[txg & 3][slots[i]];
        toy_slot_phys_t *slot = &t->root.slot[slots[i]];
        spa_block_free(spa, txg, &slot->bp);
        slot->bp = bps[i];
        slot->seed = p->seed;
        slot->txg = txg;
        slot->size = p->size;
    }
    return 0;
}

static int toy_sync(spa_t *spa, uint64_t txg, cairn_blkptr_t *mos_root)
{
    toy_state_t *t = spa_get_upper_private(spa);
    bool changed = false;
    int batch[TOY_SLOTS], n = 0;
    for (int s = 0; s < TOY_SLOTS; s++) {
        toy_pending_t *p = &t->pending[txg & 3][s];
        if (!p->set) continue;
        p->set = false;
        changed = true;
        const toy_pending_t *b = n ? &t->pending[txg & 3][batch[0]] : NULL;
        if (b && (b->checksum != p->checksum || b->compress != p->compress ||
                  b->copies != p->copies)) {
            int e = toy_write_batch(spa, txg, t, batch, n);
            if (e) return e;
            n = 0;
        }
        batch[n++] = s;
    }
    int e = toy_write_batch(spa, txg, t, batch, n);
    if (e) return e;
    if (!changed) return 0;
    t->root.last_txg = txg;
    spa_write_props_t props = {.type = CAIRN_BT_OBJSET, .checksum = CAIRN_CHECKSUM_SHA256,
                               .compress = CAIRN_COMPRESS_LZ4, .copies = 2};
    cairn_blkptr_t bp;
    e = spa_block_write(spa, txg, &t->root, sizeof t->root, &props, &bp);
    if (e) return e;
    spa_block_free(spa, txg, &t->root_bp);
    t->root_bp = bp;
    *mos_root = bp;
    return 0;
}

/* Walks everything, from or not: revisiting blocks is harmless to a scan. */
static int toy_traverse(spa_t *spa, const cairn_blkptr_t *mos_root, const spa_bookmark_t *from,
                        spa_bp_visitor_t visit, void *arg)
{
    (void)from;
    if (cairn_bp_is_hole(mos_root)) return 0;
    int e = visit(spa, mos_root, NULL, arg);
    if (e) return e;
    toy_root_phys_t *root = cairn_zalloc(sizeof *root);
    if (spa_block_read(spa, mos_root, root) == 0 && root->magic == TOY_MAGIC) {
        for (int s = 0; s < TOY_SLOTS && !e; s++)
            if (!cairn_bp_is_hole(&root->slot[s].bp)) e = visit(spa, &root->slot[s].bp, NULL, arg);
    }
    free(root);
    return e;
}

static void toy_close(spa_t *spa)
{
    toy_state_t *t = spa_get_upper_private(spa);
    if (t) {
        pthread_mutex_destroy(&t->lock);
        free(t);
    }
    spa_set_upper_private(spa, NULL);
}

static const spa_upper_ops_t toy_ops = {
    .create = toy_create, .open = toy_open, .sync = toy_sync,
    .traverse = toy_traverse, .close = toy_close,
};

/* Queue a write of slot in the open txg; returns that txg. */
static inline uint64_t toy_write(spa_t *spa, int slot, uint64_t seed, uint64_t size,
                                 cairn_compress_t comp, cairn_checksum_t ck, int copies)
{
    toy_state_t *t = spa_get_upper_private(spa);
    uint64_t txg = spa_tx_hold(spa);
    pthread_mutex_lock(&t->lock);
    t->pending[txg & 3][slot] = (toy_pending_t){true, seed, size, (uint8_t)comp, (uint8_t)ck,
                                                (uint8_t)copies};
    pthread_mutex_unlock(&t->lock);
    spa_dirty_add(spa, txg, (int64_t)size, spa_space_estimate(spa, size, copies));
    spa_tx_rele(spa, txg);
    return txg;
}

/* Reads every slot of the durable root and checks its data; returns the number of bad slots. */
static inline int toy_verify(spa_t *spa, const toy_root_phys_t *expect)
{
    toy_state_t *t = spa_get_upper_private(spa);
    int bad = 0;
    for (int s = 0; s < TOY_SLOTS; s++) {
        const toy_slot_phys_t *slot = &t->root.slot[s];
        if (expect && (slot->seed != expect->slot[s].seed || slot->txg != expect->slot[s].txg)) {
            bad++;
            continue;
        }
        if (cairn_bp_is_hole(&slot->bp)) continue;
        uint8_t *want = cairn_alloc_aligned(slot->size);
        uint8_t *got = cairn_alloc_aligned(slot->size);
        toy_fill(want, slot->size, slot->seed, (uint64_t)s, slot->txg);
        if (spa_block_read(spa, &slot->bp, got) || memcmp(want, got, slot->size)) bad++;
        free(want);
        free(got);
    }
    return bad;
}

#endif
