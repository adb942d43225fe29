/*
 * Labels: how a device says which pool it belongs to, and where the pool's
 * newest state is.
 *
 * Every leaf carries four 256 KiB labels (vdev_label_offset(): two at the
 * front, two at the end, so a device overwritten at either end still
 * identifies itself). A label is laid out as
 *
 *     0 ..  12 KiB   reserved, zero (room for boot blocks / partition tables)
 *    12 ..  16 KiB   multihost heartbeat record (spa_mmp.c), apart from the ring
 *    16 .. 128 KiB   config: spa_config_phys_t, sealed with sha256
 *   128 .. 256 KiB   uberblock ring: slots of spa_ub_slot_size() bytes
 *
 * The config names the pool (name, guid, state, properties, the host that has
 * it imported), the leaf the label sits on, and the whole vdev tree in
 * pre-order, so any single surviving
 * leaf is enough to learn the pool's shape. A removed log vdev that was not
 * the last stays in the tree as a hole entry, so every top-level vdev keeps
 * the id block pointers know it by. It changes rarely (create, export,
 * property change, add) and is written in two rounds, front labels then back
 * labels, with a flush between: a crash can tear at most one round, and the
 * config with the highest config_txg that verifies wins. Leaves that join the
 * pool (pool add) get all four labels first, so a config naming them is never
 * durable before they carry it.
 *
 * The uberblock of txg T goes to slot T % nslots of every label of every leaf,
 * after all the blocks of T are flushed; it is itself sealed with sha256. At
 * import the newest uberblock that verifies (and whose tree reads back) is the
 * pool's state; the older slots keep the previous txgs as fall-backs.
 */
#include "spa_impl.h"

#include <cairn/assert.h>
#include <cairn/raidz.h>

#include <stdlib.h>
#include <string.h>

uint32_t spa_ub_slot_size(uint32_t ashift)
{
    uint32_t s = 1U << (ashift > 12 ? ashift : 12);
    return s > SPA_LABEL_RING_SIZE / 4 ? (uint32_t)(SPA_LABEL_RING_SIZE / 4) : s;
}

size_t spa_config_size(uint32_t nvdevs)
{
    return sizeof(spa_config_phys_t) + (size_t)nvdevs * sizeof(spa_vdev_phys_t);
}

static size_t config_size_ext(uint32_t nvdevs)
{
    return spa_config_size(nvdevs) + (size_t)nvdevs * sizeof(spa_vdev_ext_phys_t);
}

static spa_vdev_ext_phys_t *config_ext(const spa_config_phys_t *cfg)
{
    if (cfg->reserved[0] != SPA_CONFIG_EXT_MAGIC) return NULL;
    return (spa_vdev_ext_phys_t *)((uint8_t *)cfg + spa_config_size(cfg->nvdevs));
}

static void config_checksum(const spa_config_phys_t *cfg, uint8_t out[CAIRN_CHECKSUM_LEN])
{
    const uint8_t *start = (const uint8_t *)&cfg->length;
    size_t len = cfg->length - offsetof(spa_config_phys_t, length);
    cairn_checksum(CAIRN_CHECKSUM_SHA256, start, len, out);
}

static void count_vdevs(const vdev_t *vd, uint32_t *n)
{
    (*n)++;
    for (uint32_t i = 0; i < vd->nchildren; i++) count_vdevs(vd->children[i], n);
}

static void fill_vdevs(const vdev_t *vd, int32_t parent, spa_vdev_phys_t *out,
                       spa_vdev_ext_phys_t *ext, uint32_t *idx)
{
    uint32_t me = (*idx)++;
    spa_vdev_phys_t *p = &out[me];
    memset(p, 0, sizeof *p);
    spa_vdev_ext_phys_t *x = &ext[me];
    memset(x, 0, sizeof *x);
    if (vd->type == VDEV_TYPE_LEAF) {
        if (atomic_load(&vd->state) == VDEV_STATE_OFFLINE && vd->offline_persist)
            x->flags |= SPA_VDEV_EXT_OFFLINE;
        if (atomic_load(&vd->state) == VDEV_STATE_FAULTED && vd->fault_persist)
            x->flags |= SPA_VDEV_EXT_FAULTED;
        if (atomic_load(&vd->state) == VDEV_STATE_DEGRADED && vd->fault_persist)
            x->flags |= SPA_VDEV_EXT_DEGRADED;
        x->ndtl = vd->ndtl;
        memcpy(x->dtl, vd->dtl, vd->ndtl * sizeof vd->dtl[0]);
    }
    if (vd->type == VDEV_TYPE_REPLACING && vd->is_spare) x->flags |= SPA_VDEV_EXT_SPARE;
    /* Bits 16.. of type: a top-level vdev's allocation class (docs/ondisk-format.md). */
    p->type = (uint32_t)vd->type | (vd->alloc_class << 16);
    p->id = vd->id;
    p->parent = parent;
    p->nchildren = vd->nchildren;
    p->nparity = vd->nparity;
    p->ashift = vd->ashift;
    p->guid = vd->guid;
    p->asize = vd->asize;
    if (vd->path) cairn_strlcpy(p->path, vd->path, sizeof p->path);
    for (uint32_t i = 0; i < vd->nchildren; i++)
        fill_vdevs(vd->children[i], (int32_t)me, out, ext, idx);
}

void *spa_config_tail(const spa_config_phys_t *cfg)
{
    return (uint8_t *)cfg + config_size_ext(cfg->nvdevs);
}

/* The host record, after the spares (SPA_CONFIG_FLAG_HOSTREC). */
static void *config_host(const spa_config_phys_t *cfg)
{
    return (uint8_t *)spa_config_tail(cfg) +
           spa_spares_size((uint32_t)cfg->reserved[SPA_CONFIG_SPARES_WORD]);
}

spa_config_phys_t *spa_config_build(spa_t *spa, spa_pool_state_t state, uint64_t txg)
{
    uint32_t n = 0;
    count_vdevs(spa->root, &n);
    size_t size = config_size_ext(n) + spa_spares_size(spa->nspares) + sizeof(spa_host_phys_t);
    spa_config_phys_t *cfg = cairn_alloc_aligned(CAIRN_P2ROUNDUP(size, (size_t)4096));
    memset(cfg, 0, size);
    cfg->reserved[0] = SPA_CONFIG_EXT_MAGIC;
    cfg->reserved[1] = spa->resilver_since;
    cfg->reserved[SPA_CONFIG_FLAGS_WORD] = (spa->autoexpand ? SPA_CONFIG_FLAG_AUTOEXPAND : 0) |
                                           (spa->multihost ? SPA_CONFIG_FLAG_MULTIHOST : 0) |
                                           SPA_CONFIG_FLAG_HOSTREC;
    memcpy(&cfg->reserved[SPA_CONFIG_SCAN_WORD], &spa->scan_saved, sizeof spa->scan_saved);
    cfg->magic = SPA_CONFIG_MAGIC;
    cfg->version = spa->brt_feature ? SPA_VERSION_BRT : SPA_VERSION;
    cfg->length = size;
    cfg->pool_guid = spa->guid;
    cfg->config_txg = txg;
    cfg->state = state;
    cfg->nvdevs = n;
    cairn_strlcpy(cfg->name, spa->name, sizeof cfg->name);
    cairn_strlcpy(cfg->comment, spa->comment, sizeof cfg->comment);
    cfg->txg_timeout_ms = spa->txg_timeout_ms;
    cfg->dirty_max = spa->dirty_max_set ? spa->dirty_max : 0; /* 0: the default */
    uint32_t idx = 0;
    fill_vdevs(spa->root, -1, cfg->vdevs, config_ext(cfg), &idx);
    spa_spares_to_config(spa, cfg);
    /* The host holding the pool; an exported or destroyed pool is nobody's. */
    spa_host_phys_t host = {0};
    if (state == SPA_STATE_ACTIVE) spa_host_record(&host);
    memcpy(config_host(cfg), &host, sizeof host);
    return cfg;
}

bool spa_config_host(const spa_config_phys_t *cfg, spa_host_phys_t *out)
{
    memset(out, 0, sizeof *out);
    if (cfg->reserved[0] != SPA_CONFIG_EXT_MAGIC ||
        !(cfg->reserved[SPA_CONFIG_FLAGS_WORD] & SPA_CONFIG_FLAG_HOSTREC))
        return false;
    memcpy(out, config_host(cfg), sizeof *out);
    out->hostname[SPA_HOSTNAME_MAX - 1] = '\0';
    return true;
}

int spa_config_verify(const spa_config_phys_t *cfg, size_t bufsize)
{
    if (cfg->magic != SPA_CONFIG_MAGIC || cfg->version < SPA_VERSION ||
        cfg->version > SPA_VERSION_BRT)
        return -EINVAL;
    if (cfg->length < sizeof *cfg || cfg->length > bufsize ||
        cfg->nvdevs == 0 || cfg->nvdevs > 4096 ||
        cfg->reserved[SPA_CONFIG_SPARES_WORD] > SPA_MAX_SPARES ||
        (cfg->reserved[0] == SPA_CONFIG_EXT_MAGIC
             ? config_size_ext(cfg->nvdevs) + spa_spares_size((uint32_t)cfg->reserved[SPA_CONFIG_SPARES_WORD]) +
                   ((cfg->reserved[SPA_CONFIG_FLAGS_WORD] & SPA_CONFIG_FLAG_HOSTREC) ? sizeof(spa_host_phys_t) : 0)
             : spa_config_size(cfg->nvdevs)) != cfg->length)
        return -EINVAL;
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    config_checksum(cfg, ck);
    if (memcmp(ck, cfg->cksum, sizeof ck)) return -ECKSUM;
    if (!memchr(cfg->name, 0, sizeof cfg->name)) return -EINVAL;
    /* The tree must be well formed: parents precede children, leaves have paths. */
    uint32_t ntop = 0;
    for (uint32_t i = 0; i < cfg->nvdevs; i++) {
        const spa_vdev_phys_t *v = &cfg->vdevs[i];
        if ((i == 0) != (v->parent < 0)) return -EINVAL;
        if (v->parent >= (int32_t)i) return -EINVAL;
        if ((v->type & 0xffff) > VDEV_TYPE_REPLACING || (v->type >> 16) > VDEV_CLASS_LOG)
            return -EINVAL;
        /* A replacement: OLD and NEW leaves, under a mirror or raidz. */
        if ((v->type & 0xffff) == VDEV_TYPE_REPLACING &&
            (v->nchildren != 2 || v->parent <= 0 ||
             ((cfg->vdevs[v->parent].type & 0xffff) != VDEV_TYPE_MIRROR &&
              (cfg->vdevs[v->parent].type & 0xffff) != VDEV_TYPE_RAIDZ)))
            return -EINVAL;
        /* A hole is an empty place among the top-level vdevs, nothing else. */
        if ((v->type & 0xffff) == VDEV_TYPE_HOLE && (v->parent != 0 || v->nchildren || v->type >> 16))
            return -EINVAL;
        if (v->parent > 0 && (cfg->vdevs[v->parent].type & 0xffff) == VDEV_TYPE_HOLE) return -EINVAL;
        /* Top-level ids are DVA vdev numbers and index the tree: 0, 1, 2... in order. */
        if (v->parent == 0 && v->id != ntop++) return -EINVAL;
        if (!memchr(v->path, 0, sizeof v->path)) return -EINVAL;
    }
    if (cfg->vdevs[0].type != VDEV_TYPE_ROOT) return -EINVAL;
    return 0;
}

static int write_config_to_leaf(vdev_t *leaf, spa_config_phys_t *cfg, int first, int step)
{
    cfg->leaf_guid = leaf->guid;
    config_checksum(cfg, cfg->cksum);
    size_t len = CAIRN_P2ROUNDUP((size_t)cfg->length, (size_t)4096);
    int err = 0;
    for (int l = first; l < VDEV_LABELS; l += step) {
        uint64_t off = vdev_label_offset(leaf->psize, l) + SPA_LABEL_CONFIG_OFFSET;
        int e = vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, off, cfg, len);
        if (e && !err) err = e;
    }
    return err;
}

typedef struct cfg_write_ctx {
    spa_config_phys_t *cfg;
    int labels[2];
    int nok, nfail;
} cfg_write_ctx_t;

static void cfg_write_leaf(vdev_t *leaf, void *arg)
{
    cfg_write_ctx_t *c = arg;
    /* Not an offline leaf (no I/O at all), nor a replaced one (closed). */
    if (!vdev_leaf_usable(leaf) || !leaf->psize) return;
    int e = 0;
    for (int i = 0; i < 2; i++) {
        int l = c->labels[i];
        int r = write_config_to_leaf(leaf, c->cfg, l, VDEV_LABELS);
        if (r) e = r;
    }
    if (e) c->nfail++; else c->nok++;
}

int spa_config_write_all(spa_t *spa, spa_pool_state_t state)
{
    pthread_mutex_lock(&spa->config_lock);
    int e = spa_config_write_all_locked(spa, state);
    pthread_mutex_unlock(&spa->config_lock);
    return e;
}

int spa_label_clear(vdev_t *leaf)
{
    if (!leaf->psize) return -ENXIO;
    void *zero = cairn_alloc_aligned(SPA_LABEL_CONFIG_SIZE);
    memset(zero, 0, SPA_LABEL_CONFIG_SIZE);
    int err = 0;
    for (int l = 0; l < VDEV_LABELS; l++) {
        uint64_t off = vdev_label_offset(leaf->psize, l) + SPA_LABEL_CONFIG_OFFSET;
        int e = vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, off, zero, SPA_LABEL_CONFIG_SIZE);
        if (e && !err) err = e;
    }
    free(zero);
    if (!err) err = vdev_leaf_io_sync(leaf, VDEV_IO_FLUSH, 0, NULL, 0);
    return err;
}

int spa_config_write_all_locked(spa_t *spa, spa_pool_state_t state)
{
    return spa_config_write_new_first_locked(spa, state, NULL);
}

/* All four labels of the leaves of the new top-level vdevs, flushed. */
static int write_new_leaves(spa_config_phys_t *cfg, vdev_t *const *first)
{
    int err = 0;
    for (; first && *first; first++) {
        cfg_write_ctx_t c = {.cfg = cfg, .labels = {0, 1}};
        vdev_foreach_leaf(*first, cfg_write_leaf, &c);
        c.labels[0] = 2;
        c.labels[1] = 3;
        vdev_foreach_leaf(*first, cfg_write_leaf, &c);
        int e = vdev_flush(*first);
        if (c.nfail) err = -EIO;
        else if (e && !err) err = e;
    }
    return err;
}

int spa_config_write_new_first_locked(spa_t *spa, spa_pool_state_t state, vdev_t *const *first)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    spa->config_txg++;
    spa_config_phys_t *cfg = spa_config_build(spa, state, spa->config_txg);
    int enew = write_new_leaves(cfg, first);
    if (enew) {
        free(cfg);
        return enew;
    }
    cfg_write_ctx_t c = {.cfg = cfg, .labels = {0, 1}};
    vdev_foreach_leaf(spa->root, cfg_write_leaf, &c); /* front labels */
    int err = vdev_flush(spa->root);
    c.labels[0] = 2;
    c.labels[1] = 3;
    vdev_foreach_leaf(spa->root, cfg_write_leaf, &c); /* back labels */
    int err2 = vdev_flush(spa->root);
    free(cfg);
    if (c.nok == 0) return -EIO;
    return err ? err : err2;
}

int spa_label_read_config(vdev_t *leaf, spa_config_phys_t **out)
{
    *out = NULL;
    if (!leaf->psize || leaf->psize < VDEV_MIN_LEAF_SIZE / 2) return -ENOENT;
    void *buf = cairn_alloc_aligned(SPA_LABEL_CONFIG_SIZE);
    spa_config_phys_t *best = NULL;
    for (int l = 0; l < VDEV_LABELS; l++) {
        uint64_t off = vdev_label_offset(leaf->psize, l) + SPA_LABEL_CONFIG_OFFSET;
        if (vdev_leaf_io_sync(leaf, VDEV_IO_READ, off, buf, SPA_LABEL_CONFIG_SIZE)) continue;
        spa_config_phys_t *c = buf;
        if (spa_config_verify(c, SPA_LABEL_CONFIG_SIZE)) continue;
        if (best && best->config_txg >= c->config_txg) continue;
        free(best);
        best = cairn_zalloc(c->length);
        memcpy(best, c, c->length);
    }
    free(buf);
    if (!best) return -ENOENT;
    *out = best;
    return 0;
}

void spa_uberblock_seal(spa_uberblock_phys_t *ub)
{
    cairn_checksum(CAIRN_CHECKSUM_SHA256, ub, offsetof(spa_uberblock_phys_t, cksum), ub->cksum);
    if (ub->version >= SPA_VERSION_BRT)
        cairn_checksum(CAIRN_CHECKSUM_SHA256, ub, offsetof(spa_uberblock_phys_t, cksum2), ub->cksum2);
}

bool spa_uberblock_valid(const spa_uberblock_phys_t *ub, uint64_t pool_guid)
{
    if (ub->magic != SPA_UBERBLOCK_MAGIC || ub->version < SPA_VERSION ||
        ub->version > SPA_VERSION_BRT)
        return false;
    if (pool_guid && ub->pool_guid != pool_guid) return false;
    uint8_t ck[CAIRN_CHECKSUM_LEN];
    cairn_checksum(CAIRN_CHECKSUM_SHA256, ub, offsetof(spa_uberblock_phys_t, cksum), ck);
    if (memcmp(ck, ub->cksum, sizeof ck) != 0) return false;
    if (ub->version < SPA_VERSION_BRT) return true;
    cairn_checksum(CAIRN_CHECKSUM_SHA256, ub, offsetof(spa_uberblock_phys_t, cksum2), ck);
    return memcmp(ck, ub->cksum2, sizeof ck) == 0;
}

typedef struct ub_write_ctx {
    void *buf;
    uint64_t slot_off;
    size_t len;
    int nok, nfail;
} ub_write_ctx_t;

static void ub_write_leaf(vdev_t *leaf, void *arg)
{
    ub_write_ctx_t *c = arg;
    if (!vdev_leaf_usable(leaf) || !leaf->psize) return;
    int ok = 0;
    for (int l = 0; l < VDEV_LABELS; l++) {
        uint64_t off = vdev_label_offset(leaf->psize, l) + SPA_LABEL_RING_OFFSET + c->slot_off;
        if (vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, off, c->buf, c->len) == 0) ok++;
    }
    if (ok) c->nok++; else c->nfail++;
}

int spa_uberblock_write_all(spa_t *spa, const spa_uberblock_phys_t *ub)
{
    uint32_t nslots = SPA_LABEL_RING_SIZE / spa->ub_slot_size;
    ub_write_ctx_t c = {
        .buf = cairn_alloc_aligned(spa->ub_slot_size),
        .slot_off = (ub->txg % nslots) * spa->ub_slot_size,
        .len = spa->ub_slot_size,
    };
    memcpy(c.buf, ub, sizeof *ub);
    vdev_foreach_leaf(spa->root, ub_write_leaf, &c);
    free(c.buf);
    if (c.nok == 0) return -EIO;
    return vdev_flush(spa->root);
}

void spa_uberblock_collect(vdev_t *leaf, uint64_t pool_guid, uint32_t slot_size,
                           spa_uberblock_phys_t **list, size_t *n)
{
    if (!leaf->psize) return;
    void *ring = cairn_alloc_aligned(SPA_LABEL_RING_SIZE);
    for (int l = 0; l < VDEV_LABELS; l++) {
        uint64_t off = vdev_label_offset(leaf->psize, l) + SPA_LABEL_RING_OFFSET;
        if (vdev_leaf_io_sync(leaf, VDEV_IO_READ, off, ring, SPA_LABEL_RING_SIZE)) continue;
        for (uint32_t s = 0; s < SPA_LABEL_RING_SIZE / slot_size; s++) {
            const spa_uberblock_phys_t *ub =
                (const spa_uberblock_phys_t *)((const uint8_t *)ring + (size_t)s * slot_size);
            if (!spa_uberblock_valid(ub, pool_guid)) continue;
            bool dup = false;
            for (size_t i = 0; i < *n; i++)
                if ((*list)[i].txg == ub->txg) { dup = true; break; }
            if (dup) continue;
            *list = cairn_realloc(*list, (*n + 1) * sizeof **list);
            (*list)[(*n)++] = *ub;
            if (ub->version < SPA_VERSION_BRT) { /* the slot's bytes past a version-1 uberblock */
                memset(&(*list)[*n - 1].brt_root, 0, sizeof ub->brt_root);
                memset((*list)[*n - 1].cksum2, 0, sizeof ub->cksum2);
            }
        }
    }
    free(ring);
}

vdev_t *spa_vdev_tree_from_config(const spa_config_phys_t *cfg, vdev_t **found, size_t nfound)
{
    vdev_t **built = cairn_zalloc(sizeof(vdev_t *) * cfg->nvdevs);
    const spa_vdev_ext_phys_t *ext = config_ext(cfg);
    for (uint32_t i = 0; i < cfg->nvdevs; i++) {
        const spa_vdev_phys_t *p = &cfg->vdevs[i];
        vdev_t *vd = NULL;
        if ((p->type & 0xffff) == VDEV_TYPE_LEAF) {
            for (size_t k = 0; k < nfound; k++) {
                if (found[k] && found[k]->guid == p->guid) {
                    vd = found[k];
                    found[k] = NULL; /* ownership moves into the tree */
                    break;
                }
            }
            if (!vd) {
                /* Not among the scanned devices: try the recorded path. */
                vdev_t *opened = NULL;
                int e = vdev_leaf_open(p->path, &opened);
                if (e == 0 && opened) {
                    spa_config_phys_t *c = NULL;
                    if (spa_label_read_config(opened, &c) == 0 && c->leaf_guid == p->guid &&
                        c->pool_guid == cfg->pool_guid) {
                        vd = opened;
                    } else {
                        vdev_free(opened);
                        opened = NULL;
                    }
                    free(c);
                } else if (opened) {
                    vdev_free(opened);
                }
                if (!vd) {
                    vd = vdev_alloc(VDEV_TYPE_LEAF, p->guid);
                    vd->path = cairn_strdup(p->path);
                    atomic_store(&vd->state, VDEV_STATE_UNAVAIL);
                }
            }
            vd->guid = p->guid;
        } else {
            vd = vdev_alloc((vdev_type_t)(p->type & 0xffff), p->guid);
        }
        vd->alloc_class = p->type >> 16;
        vd->nparity = p->nparity;
        vd->ashift = p->ashift;
        vd->asize = p->asize;
        built[i] = vd;
        if (p->parent >= 0) {
            vdev_add_child(built[p->parent], vd);
            vd->id = p->id;
        }
        if (ext && vd->type == VDEV_TYPE_REPLACING) vd->is_spare = ext[i].flags & SPA_VDEV_EXT_SPARE;
        if (ext && vd->type == VDEV_TYPE_LEAF) {
            const spa_vdev_ext_phys_t *x = &ext[i];
            for (uint32_t r = 0; r < x->ndtl && r < VDEV_DTL_MAX; r++)
                vdev_dtl_add(vd, x->dtl[r][0], x->dtl[r][1]);
            if ((x->flags & SPA_VDEV_EXT_OFFLINE) && atomic_load(&vd->state) == VDEV_STATE_ONLINE) {
                vd->offline_persist = true;
                atomic_store(&vd->state, VDEV_STATE_OFFLINE);
            }
            /* Faulted by errors: out of service until clear, online or replace. */
            if ((x->flags & (SPA_VDEV_EXT_FAULTED | SPA_VDEV_EXT_DEGRADED)) &&
                atomic_load(&vd->state) == VDEV_STATE_ONLINE) {
                vd->fault_persist = vd->fault_announced = true;
                atomic_store(&vd->state, (x->flags & SPA_VDEV_EXT_FAULTED) ? VDEV_STATE_FAULTED
                                                                            : VDEV_STATE_DEGRADED);
            }
            /* Never read what it may lack, from the first read of the import on. */
            if (vd->ndtl) atomic_store(&vd->stale, true);
        }
    }
    vdev_t *root = built[0];
    free(built);
    vdev_state_refresh(root);
    return root;
}
