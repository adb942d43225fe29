/*
 * ZAP objects: extendible hashing of names to values inside one DMU object.
 *
 * DESIGN
 *
 * A ZAP is one DMU object with 16 KiB records (lz4, fletcher4). Every name is
 * hashed with XXH3-64 seeded by a random per-object salt; the top 48 bits are
 * the entry's hash (a hash of 0 is taken as 1, so no key is below 2^16). Each
 * entry also gets a 16-bit collision differentiator (cd), the lowest value not
 * used by another entry with the same hash, and (hash << 16 | cd) is its KEY:
 * unique within the object, fixed for the entry's lifetime (an update keeps
 * it), and the order of iteration.
 *
 * Two formats:
 *  - micro: everything lives in block 0, the header followed by one leaf
 *    region. A handful of directory entries or properties costs one record,
 *    which lz4 shrinks to a few hundred bytes on disk.
 *  - fat: when the micro leaf is full its entries move to leaf block 1 and
 *    block 0 keeps the header and the pointer table. The table has 2^gdepth
 *    slots (gdepth = global depth); slot i names the leaf holding the hashes
 *    whose top gdepth bits are i. A leaf has a local depth d <= gdepth and a
 *    prefix p: it holds exactly the hashes whose top d bits are p, and
 *    2^(gdepth-d) consecutive slots point at it. A full leaf splits on its
 *    next hash bit into itself (bit 0) and a new leaf (bit 1); if d equals
 *    gdepth the table doubles first. Lookups are one table index and one
 *    binary search in one leaf: constant time however big the ZAP is.
 *    The table lives inside block 0 up to gdepth 10 (8 KiB) and in its own
 *    run of blocks after that; each doubling writes the new table to fresh
 *    blocks at the end and frees the old run (a hole costs nothing).
 *    Block numbers are never reused and leaves never merge: a ZAP only gives
 *    space back when destroyed, as in most file systems' directories.
 *
 * All entries with the same hash are in one leaf (a leaf covers a hash
 * prefix of at most 48 bits), so the cd can be chosen locally. A leaf whose
 * entries all share the hash of the entry being added cannot be split: the
 * add fails with -ENOSPC (needs many hundreds of full 48-bit collisions). The
 * global depth is capped at ZAP_MAX_DEPTH (32) for the same reason.
 *
 * COOKIES. A cursor cookie c means "the first entry whose key is >= c". An
 * entry handed out carries next_cookie = key + 1. Keys are >= 2^16 and cd
 * never exceeds 0xFFFE, so produced cookies are in [2^16 + 1, 2^64 - 1]:
 * never 0, 1 or 2. Cookies 0, 1 and 2 all mean "from the start". Because a
 * key never changes while its entry exists, entries that survive between two
 * steps are neither skipped nor repeated, whatever is added or removed;
 * entries added behind the cursor are not seen. Each step finds the leaf of
 * the cookie's hash through the table and binary-searches it; an exhausted
 * leaf moves the cookie to the start of the next leaf's hash range.
 *
 * ON-DISK FORMAT (little-endian; the block size is 16384)
 *
 * Block 0, header (first 128 bytes):
 *    0 u64 magic 0x50415a4e52494143 ("CAIRNZAP")
 *    8 u32 version (1)
 *   12 u32 flags: bit 0 = fat
 *   16 u64 number of entries
 *   24 u64 salt (XXH3 seed)
 *   32 u32 global depth (fat)
 *   36 u32 pointer table blocks (fat; 0 = embedded in block 0)
 *   40 u64 first block of the pointer table (when not embedded)
 *   48 u64 next free block number (fat)
 *   56 u64 number of leaf blocks (fat)
 *   64 zero to 128
 * Block 0 from byte 128: micro: a leaf region of 16256 bytes; fat with an
 *   embedded table: 2^gdepth u64 leaf block numbers.
 * Pointer table blocks: the table as an array of u64 block numbers,
 *   2^gdepth * 8 bytes (a whole number of blocks, gdepth > 10).
 *
 * A leaf region (a whole leaf block, or block 0 from byte 128 when micro) is
 * a slotted page:
 *    0 u64 magic 0x464c5a4e52494143 ("CAIRNZLF")
 *    8 u64 prefix (the leaf's hash prefix, right-aligned; 0 when micro)
 *   16 u16 local depth (0 when micro)
 *   18 u16 nslots
 *   20 u16 heap_low: records occupy [heap_low, region size)
 *   22 u16 garbage: bytes of dead records inside the heap
 *   24 u64 0
 *   32 slots, sorted by key, 10 bytes each: u64 key, u16 record offset
 *  ... free space ...
 *  heap_low.. records: u8 name length (1..255), u8 0, u16 value length
 *   (0..8192), name bytes (no NUL), value bytes. Records are packed downward
 *   from the end; a removed record becomes garbage (or is given back at once
 *   when it is the lowest), and the heap is compacted when an insert needs
 *   the garbage. The largest entry (8461 bytes with its slot) fits any leaf.
 *
 * WRITING. Each change edits the cached block (zap_cache.c) and passes the
 * changed byte ranges to dmu_write. The first write of a block in a txg
 * writes the whole block, so the DMU never has to read a record to merge a
 * partial write; later writes in that txg pass only the changed ranges.
 *
 * LOCKING. Each ZAP object has a rwlock in its registry entry: readers share
 * it, writers are exclusive. Different objects share no lock on the hot path
 * (registry and block cache are sharded). A transaction joins its txg at its
 * first change (dmu.h), which for a ZAP happens under this lock (or a lock
 * the caller took first), so changes reach the ZAP's txgs in the order they
 * were made and an older txg never receives a newer state of a block.
 */
#include "zap_impl.h"

#include <cairn/endian.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ZAP format code assumes a little-endian host");

#define ZAP_MAGIC 0x50415a4e52494143ULL
#define ZAP_LEAF_MAGIC 0x464c5a4e52494143ULL
#define ZAP_VERSION 1
#define ZAP_FLAG_FAT 0x1u
#define ZAP_HDR_SIZE 128u
#define ZAP_EMBED_MAX_DEPTH 10
#define ZAP_HASH_BITS 48
#define ZAP_MAX_DEPTH 32
#define ZAP_CD_MAX 0xFFFEu

#define ZL_HDR 32u
#define ZL_SLOT 10u
#define ZL_REC_HDR 4u

static _Atomic unsigned zap_hash_bits_override;

void zap_test_set_hash_bits(unsigned bits)
{
    atomic_store(&zap_hash_bits_override, bits < ZAP_HASH_BITS ? bits : 0);
}

/* ---------------- little helpers ---------------- */

/* ZAP blocks are little-endian on disk (docs/ondisk-format.md). */
#define get16 cairn_get_le16
#define get32 cairn_get_le32
#define get64 cairn_get_le64
#define put16 cairn_put_le16
#define put32 cairn_put_le32
#define put64 cairn_put_le64

/* Byte ranges of one block to hand to dmu_write. */
typedef struct span {
    uint32_t lo[4], hi[4];
    int n;
} span_t;

static void span_add(span_t *s, uint32_t lo, uint32_t hi)
{
    if (lo >= hi) return;
    for (int i = 0; i < s->n; i++) {
        if (lo <= s->hi[i] + 64 && hi + 64 >= s->lo[i]) {
            if (lo < s->lo[i]) s->lo[i] = lo;
            if (hi > s->hi[i]) s->hi[i] = hi;
            return;
        }
    }
    if (s->n < 4) {
        s->lo[s->n] = lo;
        s->hi[s->n] = hi;
        s->n++;
        return;
    }
    if (lo < s->lo[3]) s->lo[3] = lo;
    if (hi > s->hi[3]) s->hi[3] = hi;
}

static int blk_flush(zap_obj_t *z, zap_blk_t *b, const span_t *s, dmu_tx_t *tx)
{
    uint64_t txg = dmu_tx_txg(tx);
    uint64_t base = b->blkid << ZAP_BLOCK_SHIFT;
    if (s->n == 0) return 0;
    zap_tls_stats.writes++;
    if (b->dirty_txg != txg) {
        int err = dmu_write(z->os, z->obj, base, ZAP_BLOCK_SIZE, b->data, tx);
        if (!err) b->dirty_txg = txg;
        return err;
    }
    for (int i = 0; i < s->n; i++) {
        int err = dmu_write(z->os, z->obj, base + s->lo[i], s->hi[i] - s->lo[i], b->data + s->lo[i], tx);
        if (err) return err;
    }
    return 0;
}

static int blk_flush_all(zap_obj_t *z, zap_blk_t *b, dmu_tx_t *tx)
{
    b->dirty_txg = 0;
    span_t s = {.lo = {0}, .hi = {ZAP_BLOCK_SIZE}, .n = 1};
    return blk_flush(z, b, &s, tx);
}

/* ---------------- leaf regions ---------------- */

typedef struct zleaf {
    uint8_t *r;       /* region start */
    uint32_t size;    /* region size */
    uint32_t base;    /* offset of the region in its block */
    span_t *span;     /* block ranges changed */
} zleaf_t;

static inline uint16_t zl_n(const zleaf_t *l) { return get16(l->r + 18); }
static inline uint32_t zl_heap(const zleaf_t *l) { return get16(l->r + 20); }
static inline uint32_t zl_garbage(const zleaf_t *l) { return get16(l->r + 22); }
static inline uint64_t zl_prefix(const zleaf_t *l) { return get64(l->r + 8); }
static inline uint32_t zl_depth(const zleaf_t *l) { return get16(l->r + 16); }
static inline uint64_t zl_key(const zleaf_t *l, uint32_t i) { return get64(l->r + ZL_HDR + i * ZL_SLOT); }
static inline uint32_t zl_off(const zleaf_t *l, uint32_t i) { return get16(l->r + ZL_HDR + i * ZL_SLOT + 8); }
static inline void zl_set_n(zleaf_t *l, uint32_t n) { put16(l->r + 18, (uint16_t)n); }
static inline void zl_set_heap(zleaf_t *l, uint32_t h) { put16(l->r + 20, (uint16_t)h); }
static inline void zl_set_garbage(zleaf_t *l, uint32_t g) { put16(l->r + 22, (uint16_t)g); }

static inline void zl_touch(zleaf_t *l, uint32_t lo, uint32_t hi)
{
    span_add(l->span, l->base + lo, l->base + hi);
}

static inline uint32_t rec_len(uint32_t nlen, uint32_t vlen) { return ZL_REC_HDR + nlen + vlen; }

static void zl_rec(const zleaf_t *l, uint32_t i, const uint8_t **name, uint32_t *nlen,
                   const uint8_t **val, uint32_t *vlen)
{
    const uint8_t *p = l->r + zl_off(l, i);
    *nlen = p[0];
    *vlen = get16(p + 2);
    *name = p + ZL_REC_HDR;
    *val = p + ZL_REC_HDR + *nlen;
}

static uint32_t zl_rec_len_at(const zleaf_t *l, uint32_t i)
{
    const uint8_t *p = l->r + zl_off(l, i);
    return rec_len(p[0], get16(p + 2));
}

static void zl_init(zleaf_t *l, uint64_t prefix, uint32_t depth)
{
    memset(l->r, 0, l->size);
    put64(l->r, ZAP_LEAF_MAGIC);
    put64(l->r + 8, prefix);
    put16(l->r + 16, (uint16_t)depth);
    zl_set_heap(l, l->size);
    zl_touch(l, 0, l->size);
}

static bool zl_valid(const zleaf_t *l)
{
    uint32_t n = zl_n(l), heap = zl_heap(l);
    return get64(l->r) == ZAP_LEAF_MAGIC && ZL_HDR + n * ZL_SLOT <= heap && heap <= l->size &&
           zl_depth(l) <= ZAP_MAX_DEPTH;
}

static uint32_t zl_contig_free(const zleaf_t *l) { return zl_heap(l) - (ZL_HDR + zl_n(l) * ZL_SLOT); }
static uint32_t zl_total_free(const zleaf_t *l) { return zl_contig_free(l) + zl_garbage(l); }

/* The first slot whose key is >= key. */
static uint32_t zl_lower_bound(const zleaf_t *l, uint64_t key)
{
    uint32_t lo = 0, hi = zl_n(l);
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (zl_key(l, mid) < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int zl_find(const zleaf_t *l, uint64_t hash, const char *name, uint32_t nlen)
{
    uint32_t n = zl_n(l);
    for (uint32_t i = zl_lower_bound(l, hash << 16); i < n && (zl_key(l, i) >> 16) == hash; i++) {
        const uint8_t *nm, *v;
        uint32_t nl, vl;
        zl_rec(l, i, &nm, &nl, &v, &vl);
        if (nl == nlen && memcmp(nm, name, nlen) == 0) return (int)i;
    }
    return -1;
}

/* The lowest cd not used by an entry with this hash (ZAP_CD_MAX + 1 if none). */
static uint32_t zl_next_cd(const zleaf_t *l, uint64_t hash)
{
    uint32_t n = zl_n(l), cd = 0;
    for (uint32_t i = zl_lower_bound(l, hash << 16); i < n && (zl_key(l, i) >> 16) == hash; i++) {
        if ((zl_key(l, i) & 0xFFFF) != cd) break;
        cd++;
    }
    return cd;
}

static void zl_compact(zleaf_t *l)
{
    uint32_t n = zl_n(l);
    uint8_t *tmp = malloc(l->size);
    if (!tmp) abort();
    memcpy(tmp, l->r, l->size);
    uint32_t heap = l->size;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off = get16(tmp + ZL_HDR + i * ZL_SLOT + 8);
        uint32_t len = rec_len(tmp[off], get16(tmp + off + 2));
        heap -= len;
        memcpy(l->r + heap, tmp + off, len);
        put16(l->r + ZL_HDR + i * ZL_SLOT + 8, (uint16_t)heap);
    }
    uint32_t slots_end = ZL_HDR + n * ZL_SLOT;
    memset(l->r + slots_end, 0, heap - slots_end);
    zl_set_heap(l, heap);
    zl_set_garbage(l, 0);
    free(tmp);
    zl_touch(l, 0, l->size);
}

/* Inserts an entry with a given key; the caller checked zl_total_free. */
static void zl_insert(zleaf_t *l, uint64_t key, const void *name, uint32_t nlen, const void *val,
                      uint32_t vlen)
{
    uint32_t len = rec_len(nlen, vlen);
    if (zl_contig_free(l) < len + ZL_SLOT) zl_compact(l);
    uint32_t n = zl_n(l);
    uint32_t heap = zl_heap(l) - len;
    uint8_t *p = l->r + heap;
    p[0] = (uint8_t)nlen;
    p[1] = 0;
    put16(p + 2, (uint16_t)vlen);
    memcpy(p + ZL_REC_HDR, name, nlen);
    if (vlen) memcpy(p + ZL_REC_HDR + nlen, val, vlen);
    uint32_t i = (n && zl_key(l, n - 1) < key) ? n : zl_lower_bound(l, key);
    uint8_t *s = l->r + ZL_HDR + i * ZL_SLOT;
    memmove(s + ZL_SLOT, s, (n - i) * ZL_SLOT);
    put64(s, key);
    put16(s + 8, (uint16_t)heap);
    zl_set_n(l, n + 1);
    zl_set_heap(l, heap);
    zl_touch(l, 0, 24);
    zl_touch(l, ZL_HDR + i * ZL_SLOT, ZL_HDR + (n + 1) * ZL_SLOT);
    zl_touch(l, heap, heap + len);
}

static void zl_remove(zleaf_t *l, uint32_t i)
{
    uint32_t n = zl_n(l);
    uint32_t off = zl_off(l, i), len = zl_rec_len_at(l, i);
    uint8_t *s = l->r + ZL_HDR + i * ZL_SLOT;
    memmove(s, s + ZL_SLOT, (n - 1 - i) * ZL_SLOT);
    memset(l->r + ZL_HDR + (n - 1) * ZL_SLOT, 0, ZL_SLOT);
    if (off == zl_heap(l)) {
        memset(l->r + off, 0, len);  /* keeps free space zero: compresses well */
        zl_set_heap(l, off + len);
        zl_touch(l, off, off + len);
    } else {
        zl_set_garbage(l, zl_garbage(l) + len);
    }
    zl_set_n(l, n - 1);
    zl_touch(l, 0, 24);
    zl_touch(l, ZL_HDR + i * ZL_SLOT, ZL_HDR + n * ZL_SLOT);
}

/* ---------------- header, loading and holding ---------------- */

static void hdr_store(zap_obj_t *z, zap_blk_t *b0, span_t *s)
{
    uint8_t *h = b0->data;
    put64(h, ZAP_MAGIC);
    put32(h + 8, ZAP_VERSION);
    put32(h + 12, z->flags);
    put64(h + 16, z->nentries);
    put64(h + 24, z->salt);
    put32(h + 32, z->gdepth);
    put32(h + 36, z->ptrtbl_nblks);
    put64(h + 40, z->ptrtbl_blk);
    put64(h + 48, z->next_free_blk);
    put64(h + 56, z->nleaves);
    span_add(s, 0, 64);
}

static int zap_load(zap_obj_t *z, const dmu_object_info_t *info)
{
    z->loaded = false;
    free(z->ptrtbl);
    z->ptrtbl = NULL;
    if (info->props.recordsize != ZAP_BLOCK_SIZE) return -EINVAL;
    z->inst = zap_new_instance();
    zap_blk_t *b0;
    int err = zap_blk_get(z->os, z->obj, z->inst, 0, &b0);
    if (err) return err;
    const uint8_t *h = b0->data;
    if (get64(h) != ZAP_MAGIC || get32(h + 8) != ZAP_VERSION) {
        zap_blk_rele(b0);
        return -EINVAL;
    }
    z->flags = get32(h + 12);
    z->nentries = get64(h + 16);
    z->salt = get64(h + 24);
    z->gdepth = get32(h + 32);
    z->ptrtbl_nblks = get32(h + 36);
    z->ptrtbl_blk = get64(h + 40);
    z->next_free_blk = get64(h + 48);
    z->nleaves = get64(h + 56);
    if (z->flags & ZAP_FLAG_FAT) {
        if (z->gdepth > ZAP_MAX_DEPTH ||
            (z->ptrtbl_nblks == 0) != (z->gdepth <= ZAP_EMBED_MAX_DEPTH) ||
            (z->ptrtbl_nblks && ((uint64_t)z->ptrtbl_nblks << ZAP_BLOCK_SHIFT) != (8ull << z->gdepth))) {
            zap_blk_rele(b0);
            return -EIO;
        }
        size_t bytes = 8ull << z->gdepth;
        z->ptrtbl = malloc(bytes < ZAP_BLOCK_SIZE ? ZAP_BLOCK_SIZE : bytes);
        if (!z->ptrtbl) abort();
        if (z->ptrtbl_nblks == 0)
            memcpy(z->ptrtbl, h + ZAP_HDR_SIZE, bytes);
        else {
            err = dmu_read(z->os, z->obj, z->ptrtbl_blk << ZAP_BLOCK_SHIFT, bytes, z->ptrtbl);
            zap_tls_stats.reads += z->ptrtbl_nblks;
        }
    }
    zap_blk_rele(b0);
    if (err) return err;
    z->generation = info->generation;
    z->loaded = true;
    return 0;
}

/* Holds the registry entry of (os, obj), loaded and current, with its lock
 * taken for reading or writing. */
static int zap_enter(objset_t *os, uint64_t obj, bool write, zap_obj_t **out)
{
    if (!os || obj == 0) return -EINVAL;
    zap_obj_t *z = zap_obj_hold(os, obj);
    for (;;) {
        if (write) {
            pthread_rwlock_wrlock(&z->lock);
            z->os = os;
        } else {
            pthread_rwlock_rdlock(&z->lock);
        }
        dmu_object_info_t info;
        int err = dmu_object_info(os, obj, &info);
        if (err) {
            pthread_rwlock_unlock(&z->lock);
            zap_obj_rele(z);
            return err;
        }
        if (z->loaded && z->generation == info.generation) {
            *out = z;
            return 0;
        }
        if (!write) {
            pthread_rwlock_unlock(&z->lock);
            pthread_rwlock_wrlock(&z->lock);
            z->os = os;
            err = dmu_object_info(os, obj, &info);
            if (!err && !(z->loaded && z->generation == info.generation)) err = zap_load(z, &info);
            pthread_rwlock_unlock(&z->lock);
        } else {
            err = zap_load(z, &info);
            if (!err) {
                *out = z;
                return 0;
            }
            pthread_rwlock_unlock(&z->lock);
        }
        if (err) {
            zap_obj_rele(z);
            return err;
        }
    }
}

static void zap_exit(zap_obj_t *z)
{
    pthread_rwlock_unlock(&z->lock);
    zap_obj_rele(z);
}

static uint64_t zap_hash(const zap_obj_t *z, const char *name, uint32_t nlen)
{
    uint64_t h = XXH3_64bits_withSeed(name, nlen, z->salt) >> (64 - ZAP_HASH_BITS);
    unsigned bits = atomic_load_explicit(&zap_hash_bits_override, memory_order_relaxed);
    if (bits) h &= ~((1ull << (ZAP_HASH_BITS - bits)) - 1);
    return h ? h : 1;
}

/* The leaf region holding hash; *bp is held. */
static int zap_leaf_for(zap_obj_t *z, objset_t *os, uint64_t hash, zap_blk_t **bp, zleaf_t *l,
                        span_t *span)
{
    uint64_t blk = 0;
    if (z->flags & ZAP_FLAG_FAT) blk = z->ptrtbl[z->gdepth ? hash >> (ZAP_HASH_BITS - z->gdepth) : 0];
    int err = zap_blk_get(os, z->obj, z->inst, blk, bp);
    if (err) return err;
    if (z->flags & ZAP_FLAG_FAT) *l = (zleaf_t){(*bp)->data, ZAP_BLOCK_SIZE, 0, span};
    else *l = (zleaf_t){(*bp)->data + ZAP_HDR_SIZE, ZAP_BLOCK_SIZE - ZAP_HDR_SIZE, ZAP_HDR_SIZE, span};
    if (!zl_valid(l)) {
        zap_blk_rele(*bp);
        log_error("zap", "object %llu block %llu is not a valid leaf", (unsigned long long)z->obj,
                  (unsigned long long)blk);
        return -EIO;
    }
    return 0;
}

static int check_name(const char *name, uint32_t *nlen)
{
    if (!name) return -EINVAL;
    size_t n = strnlen(name, ZAP_NAME_MAX + 1);
    if (n == 0) return -EINVAL;
    if (n > ZAP_NAME_MAX) return -ENAMETOOLONG;
    *nlen = (uint32_t)n;
    return 0;
}

/* ---------------- growth: upgrade, table doubling, split ---------------- */

/* Writes the slots [lo, hi) of the pointer table. */
static int ptrtbl_write(zap_obj_t *z, zap_blk_t *b0, span_t *s0, uint64_t lo, uint64_t hi, dmu_tx_t *tx)
{
    if (z->ptrtbl_nblks == 0) {
        memcpy(b0->data + ZAP_HDR_SIZE + lo * 8, &z->ptrtbl[lo], (hi - lo) * 8);
        span_add(s0, (uint32_t)(ZAP_HDR_SIZE + lo * 8), (uint32_t)(ZAP_HDR_SIZE + hi * 8));
        return 0;
    }
    uint64_t per = ZAP_BLOCK_SIZE / 8;
    for (uint64_t b = lo / per; b <= (hi - 1) / per; b++) {
        zap_tls_stats.writes++;
        int err = dmu_write(z->os, z->obj, (z->ptrtbl_blk + b) << ZAP_BLOCK_SHIFT, ZAP_BLOCK_SIZE,
                            &z->ptrtbl[b * per], tx);
        if (err) return err;
    }
    return 0;
}

static int ptrtbl_double(zap_obj_t *z, zap_blk_t *b0, span_t *s0, dmu_tx_t *tx)
{
    uint32_t ngd = z->gdepth + 1;
    uint64_t nsz = 1ull << ngd;
    uint64_t *t2 = malloc(nsz * 8 < ZAP_BLOCK_SIZE ? ZAP_BLOCK_SIZE : nsz * 8);
    if (!t2) abort();
    for (uint64_t i = 0; i < nsz; i++) t2[i] = z->ptrtbl[i >> 1];
    uint32_t old_nblks = z->ptrtbl_nblks;
    uint64_t old_blk = z->ptrtbl_blk;
    free(z->ptrtbl);
    z->ptrtbl = t2;
    z->gdepth = ngd;
    int err = 0;
    if (ngd <= ZAP_EMBED_MAX_DEPTH) {
        err = ptrtbl_write(z, b0, s0, 0, nsz, tx);
    } else {
        z->ptrtbl_blk = z->next_free_blk;
        z->ptrtbl_nblks = (uint32_t)((nsz * 8) >> ZAP_BLOCK_SHIFT);
        z->next_free_blk += z->ptrtbl_nblks;
        err = ptrtbl_write(z, b0, s0, 0, nsz, tx);
        if (!err && old_nblks)
            err = dmu_free_range(z->os, z->obj, old_blk << ZAP_BLOCK_SHIFT,
                                 (uint64_t)old_nblks << ZAP_BLOCK_SHIFT, tx);
        if (!old_nblks) {
            memset(b0->data + ZAP_HDR_SIZE, 0, ZAP_BLOCK_SIZE - ZAP_HDR_SIZE);
            span_add(s0, ZAP_HDR_SIZE, ZAP_BLOCK_SIZE);
        }
    }
    hdr_store(z, b0, s0);
    return err;
}

/* Copies every entry of src into the region dst (in key order). */
static void zl_copy_entries(const zleaf_t *src, zleaf_t *dst)
{
    uint32_t n = zl_n(src);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *nm, *v;
        uint32_t nl, vl;
        zl_rec(src, i, &nm, &nl, &v, &vl);
        zl_insert(dst, zl_key(src, i), nm, nl, v, vl);
    }
}

/* Micro -> fat: the entries of block 0 move to leaf block 1. */
static int zap_upgrade(zap_obj_t *z, zap_blk_t *b0, dmu_tx_t *tx)
{
    span_t s1 = {0}, s0 = {0};
    zleaf_t micro = {b0->data + ZAP_HDR_SIZE, ZAP_BLOCK_SIZE - ZAP_HDR_SIZE, ZAP_HDR_SIZE, &s0};
    zap_blk_t *b1 = zap_blk_new(z->inst, 1);
    zleaf_t leaf = {b1->data, ZAP_BLOCK_SIZE, 0, &s1};
    zl_init(&leaf, 0, 0);
    zl_copy_entries(&micro, &leaf);
    z->flags |= ZAP_FLAG_FAT;
    z->gdepth = 0;
    z->ptrtbl_nblks = 0;
    z->ptrtbl_blk = 0;
    z->next_free_blk = 2;
    z->nleaves = 1;
    free(z->ptrtbl);
    z->ptrtbl = malloc(ZAP_BLOCK_SIZE);
    if (!z->ptrtbl) abort();
    z->ptrtbl[0] = 1;
    memset(b0->data + ZAP_HDR_SIZE, 0, ZAP_BLOCK_SIZE - ZAP_HDR_SIZE);
    span_add(&s0, ZAP_HDR_SIZE, ZAP_BLOCK_SIZE);
    int err = ptrtbl_write(z, b0, &s0, 0, 1, tx);
    hdr_store(z, b0, &s0);
    if (!err) err = blk_flush_all(z, b1, tx);
    if (!err) err = blk_flush(z, b0, &s0, tx);
    zap_blk_rele(b1);
    return err;
}

/* Splits the full fat leaf lb (which holds hash) on its next hash bit. */
static int zap_split(zap_obj_t *z, zap_blk_t *b0, zap_blk_t *lb, uint64_t hash, dmu_tx_t *tx)
{
    span_t s0 = {0}, sl = {0}, sn = {0};
    zleaf_t l = {lb->data, ZAP_BLOCK_SIZE, 0, &sl};
    uint32_t ld = zl_depth(&l), n = zl_n(&l);
    uint64_t p = zl_prefix(&l);
    bool separable = false;
    for (uint32_t i = 0; i < n && !separable; i++) separable = (zl_key(&l, i) >> 16) != hash;
    if (!separable || ld >= ZAP_MAX_DEPTH) return -ENOSPC;
    int err = 0;
    if (ld == z->gdepth) err = ptrtbl_double(z, b0, &s0, tx);
    if (err) return err;

    uint64_t nblk = z->next_free_blk++;
    z->nleaves++;
    zap_blk_t *nb = zap_blk_new(z->inst, nblk);
    zleaf_t nl = {nb->data, ZAP_BLOCK_SIZE, 0, &sn};
    zl_init(&nl, (p << 1) | 1, ld + 1);
    uint8_t *tmp = malloc(ZAP_BLOCK_SIZE);
    if (!tmp) abort();
    memcpy(tmp, lb->data, ZAP_BLOCK_SIZE);
    span_t scratch = {0};
    zleaf_t old = {tmp, ZAP_BLOCK_SIZE, 0, &scratch};
    zl_init(&l, p << 1, ld + 1);
    unsigned shift = ZAP_HASH_BITS - 1 - ld;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *nm, *v;
        uint32_t nlen, vlen;
        uint64_t key = zl_key(&old, i);
        zl_rec(&old, i, &nm, &nlen, &v, &vlen);
        zl_insert(((key >> 16) >> shift) & 1 ? &nl : &l, key, nm, nlen, v, vlen);
    }
    free(tmp);
    unsigned tshift = z->gdepth - (ld + 1);
    uint64_t lo = ((p << 1) | 1) << tshift, hi = lo + (1ull << tshift);
    for (uint64_t i = lo; i < hi; i++) z->ptrtbl[i] = nblk;
    err = ptrtbl_write(z, b0, &s0, lo, hi, tx);
    hdr_store(z, b0, &s0);
    if (!err) err = blk_flush_all(z, nb, tx);
    if (!err) err = blk_flush_all(z, lb, tx);
    if (!err) err = blk_flush(z, b0, &s0, tx);
    zap_blk_rele(nb);
    return err;
}

/* ---------------- the API ---------------- */

static const dmu_object_props_t zap_object_props = {
    .recordsize = ZAP_BLOCK_SIZE, .compress = CAIRN_COMPRESS_LZ4,
    .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 1, .zap = true};

/* Makes the freshly allocated object o an empty ZAP (freed again on failure). */
static int zap_init_object(objset_t *os, uint64_t o, dmu_tx_t *tx)
{
    dmu_object_info_t info;
    int err = dmu_object_info(os, o, &info);
    if (err) return err;
    zap_obj_t *z = zap_obj_hold(os, o);
    pthread_rwlock_wrlock(&z->lock);
    z->os = os;
    free(z->ptrtbl);
    z->ptrtbl = NULL;
    z->inst = zap_new_instance();
    z->flags = 0;
    z->nentries = 0;
    z->salt = cairn_random_guid();
    z->gdepth = 0;
    z->ptrtbl_nblks = 0;
    z->ptrtbl_blk = 0;
    z->next_free_blk = 1;
    z->nleaves = 0;
    span_t s = {0};
    zap_blk_t *b0 = zap_blk_new(z->inst, 0);
    zleaf_t micro = {b0->data + ZAP_HDR_SIZE, ZAP_BLOCK_SIZE - ZAP_HDR_SIZE, ZAP_HDR_SIZE, &s};
    zl_init(&micro, 0, 0);
    hdr_store(z, b0, &s);
    err = blk_flush_all(z, b0, tx);
    zap_blk_rele(b0);
    z->generation = info.generation;
    z->loaded = err == 0;
    pthread_rwlock_unlock(&z->lock);
    zap_obj_rele(z);
    if (err) dmu_object_free(os, o, tx);
    return err;
}

int zap_create(objset_t *os, uint64_t *obj, dmu_tx_t *tx)
{
    if (!os || !obj || !tx) return -EINVAL;
    uint64_t o;
    int err = dmu_object_alloc(os, &zap_object_props, &o, tx);
    if (!err) err = zap_init_object(os, o, tx);
    if (!err) *obj = o;
    return err;
}

int zap_create_claim(objset_t *os, uint64_t obj, dmu_tx_t *tx)
{
    if (!os || !tx) return -EINVAL;
    int err = dmu_object_claim(os, obj, &zap_object_props, tx);
    if (!err) err = zap_init_object(os, obj, tx);
    return err;
}

int zap_destroy(objset_t *os, uint64_t obj, dmu_tx_t *tx)
{
    if (!tx) return -EINVAL;
    zap_obj_t *z;
    int err = zap_enter(os, obj, true, &z);
    if (err) return err;
    err = dmu_object_free(os, obj, tx);
    z->loaded = false;
    zap_obj_forget(z);
    zap_exit(z);
    return err;
}

enum { PUT_ADD, PUT_UPDATE };

static int zap_put(objset_t *os, uint64_t obj, const char *name, const void *val, uint32_t len,
                   int mode, dmu_tx_t *tx)
{
    uint32_t nlen;
    int err = check_name(name, &nlen);
    if (err) return err;
    if (len > ZAP_VALUE_MAX) return -E2BIG;
    if ((len && !val) || !tx) return -EINVAL;
    zap_obj_t *z;
    err = zap_enter(os, obj, true, &z);
    if (err) return err;
    uint64_t hash = zap_hash(z, name, nlen);
    uint32_t need = rec_len(nlen, len) + ZL_SLOT;
    bool broken = false;  /* a DMU write failed: the cache may be ahead of the DMU */
    for (;;) {
        span_t sl = {0}, s0 = {0};
        zap_blk_t *lb, *b0 = NULL;
        zleaf_t l;
        err = zap_leaf_for(z, os, hash, &lb, &l, &sl);
        if (err) break;
        bool fat = z->flags & ZAP_FLAG_FAT;
        if (fat) {
            err = zap_blk_get(os, obj, z->inst, 0, &b0);
            if (err) {
                zap_blk_rele(lb);
                break;
            }
        } else {
            b0 = lb;
        }
        int idx = zl_find(&l, hash, name, nlen);
        bool done = false;
        if (idx >= 0 && mode == PUT_ADD) {
            err = -EEXIST;
            done = true;
        } else if (idx >= 0 && zl_total_free(&l) + zl_rec_len_at(&l, (uint32_t)idx) + ZL_SLOT >= need) {
            uint64_t key = zl_key(&l, (uint32_t)idx);
            zl_remove(&l, (uint32_t)idx);
            zl_insert(&l, key, name, nlen, val, len);
            done = true;
        } else if (idx < 0 && zl_total_free(&l) >= need) {
            uint32_t cd = zl_next_cd(&l, hash);
            if (cd > ZAP_CD_MAX) {
                err = -ENOSPC;
            } else {
                zl_insert(&l, (hash << 16) | cd, name, nlen, val, len);
                z->nentries++;
                hdr_store(z, b0, fat ? &s0 : &sl);
            }
            done = true;
        }
        if (done) {
            if (!err) err = blk_flush(z, lb, &sl, tx);
            if (!err && fat) err = blk_flush(z, b0, &s0, tx);
            broken = err && err != -EEXIST && err != -ENOSPC;
        } else if (!fat) {
            err = zap_upgrade(z, b0, tx);
            broken = err != 0;
        } else {
            err = zap_split(z, b0, lb, hash, tx);
            broken = err && err != -ENOSPC;
        }
        if (fat) zap_blk_rele(b0);
        zap_blk_rele(lb);
        if (done || err) break;
    }
    if (broken) z->loaded = false;
    zap_exit(z);
    return err;
}

int zap_add(objset_t *os, uint64_t obj, const char *name, const void *val, uint32_t len,
            dmu_tx_t *tx)
{
    return zap_put(os, obj, name, val, len, PUT_ADD, tx);
}

int zap_update(objset_t *os, uint64_t obj, const char *name, const void *val, uint32_t len,
               dmu_tx_t *tx)
{
    return zap_put(os, obj, name, val, len, PUT_UPDATE, tx);
}

int zap_lookup(objset_t *os, uint64_t obj, const char *name, void *val, uint32_t cap,
               uint32_t *len)
{
    uint32_t nlen;
    int err = check_name(name, &nlen);
    if (err) return err;
    if (cap && !val) return -EINVAL;
    zap_obj_t *z;
    err = zap_enter(os, obj, false, &z);
    if (err) return err;
    span_t unused = {0};
    zap_blk_t *lb;
    zleaf_t l;
    uint64_t hash = zap_hash(z, name, nlen);
    err = zap_leaf_for(z, os, hash, &lb, &l, &unused);
    if (!err) {
        int idx = zl_find(&l, hash, name, nlen);
        if (idx < 0) {
            err = -ENOENT;
        } else {
            const uint8_t *nm, *v;
            uint32_t nl, vl;
            zl_rec(&l, (uint32_t)idx, &nm, &nl, &v, &vl);
            if (vl) memcpy(val, v, vl < cap ? vl : cap);
            if (len) *len = vl;
        }
        zap_blk_rele(lb);
    }
    zap_exit(z);
    return err;
}

int zap_remove(objset_t *os, uint64_t obj, const char *name, dmu_tx_t *tx)
{
    uint32_t nlen;
    int err = check_name(name, &nlen);
    if (err) return err;
    if (!tx) return -EINVAL;
    zap_obj_t *z;
    err = zap_enter(os, obj, true, &z);
    if (err) return err;
    span_t sl = {0}, s0 = {0};
    zap_blk_t *lb, *b0 = NULL;
    zleaf_t l;
    uint64_t hash = zap_hash(z, name, nlen);
    bool fat = z->flags & ZAP_FLAG_FAT;
    err = zap_leaf_for(z, os, hash, &lb, &l, &sl);
    if (err) goto out;
    if (fat) {
        err = zap_blk_get(os, obj, z->inst, 0, &b0);
        if (err) {
            zap_blk_rele(lb);
            goto out;
        }
    } else {
        b0 = lb;
    }
    int idx = zl_find(&l, hash, name, nlen);
    if (idx < 0) {
        err = -ENOENT;
    } else {
        zl_remove(&l, (uint32_t)idx);
        z->nentries--;
        hdr_store(z, b0, fat ? &s0 : &sl);
        err = blk_flush(z, lb, &sl, tx);
        if (!err && fat) err = blk_flush(z, b0, &s0, tx);
        if (err) z->loaded = false;
    }
    if (fat) zap_blk_rele(b0);
    zap_blk_rele(lb);
out:
    zap_exit(z);
    return err;
}

int zap_count(objset_t *os, uint64_t obj, uint64_t *count)
{
    if (!count) return -EINVAL;
    zap_obj_t *z;
    int err = zap_enter(os, obj, false, &z);
    if (err) return err;
    *count = z->nentries;
    zap_exit(z);
    return 0;
}

int zap_add_u64(objset_t *os, uint64_t obj, const char *name, uint64_t v, dmu_tx_t *tx)
{
    return zap_add(os, obj, name, &v, sizeof(v), tx);
}

int zap_update_u64(objset_t *os, uint64_t obj, const char *name, uint64_t v, dmu_tx_t *tx)
{
    return zap_update(os, obj, name, &v, sizeof(v), tx);
}

int zap_lookup_u64(objset_t *os, uint64_t obj, const char *name, uint64_t *v)
{
    uint64_t x = 0;
    uint32_t len = 0;
    int err = zap_lookup(os, obj, name, &x, sizeof(x), &len);
    if (err) return err;
    if (len != sizeof(x)) return -EINVAL;
    *v = x;
    return 0;
}

void zap_cursor_init(zap_cursor_t *zc, objset_t *os, uint64_t obj, uint64_t cookie)
{
    zc->os = os;
    zc->obj = obj;
    zc->cookie = cookie;
}

int zap_cursor_next(zap_cursor_t *zc, zap_entry_t *e)
{
    if (!zc || !e) return -EINVAL;
    zap_obj_t *z;
    int err = zap_enter(zc->os, zc->obj, false, &z);
    if (err) return err;
    uint64_t key = zc->cookie;
    int ret = 0;
    for (;;) {
        span_t unused = {0};
        zap_blk_t *lb;
        zleaf_t l;
        err = zap_leaf_for(z, zc->os, key >> 16, &lb, &l, &unused);
        if (err) {
            ret = err;
            break;
        }
        uint32_t i = zl_lower_bound(&l, key);
        if (i < zl_n(&l)) {
            const uint8_t *nm, *v;
            uint32_t nl, vl;
            zl_rec(&l, i, &nm, &nl, &v, &vl);
            memcpy(e->name, nm, nl);
            e->name[nl] = '\0';
            if (vl) memcpy(e->value, v, vl);
            e->value_len = vl;
            e->next_cookie = zl_key(&l, i) + 1;
            zc->cookie = e->next_cookie;
            zap_blk_rele(lb);
            ret = 1;
            break;
        }
        uint32_t ld = (z->flags & ZAP_FLAG_FAT) ? zl_depth(&l) : 0;
        uint64_t next = zl_prefix(&l) + 1;
        zap_blk_rele(lb);
        if (ld == 0 || next >> ld) break;
        key = (next << (ZAP_HASH_BITS - ld)) << 16;
    }
    zap_exit(z);
    return ret;
}
