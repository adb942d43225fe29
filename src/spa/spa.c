/*
 * Pools: creation, import, export and destruction, and the pool's
 * properties.
 *
 * Creating a pool validates everything before writing anything: the name, the
 * layout (mirror >= 2 devices, raidzP >= P+2), each device (exists, big
 * enough, not listed twice, not part of another live or exported pool unless
 * forced). Only then are labels written and txg 1 synced, so a refused create
 * leaves every device as it was.
 *
 * Import reads the labels of the candidate devices, groups them by pool guid,
 * refuses a pool another host left active unless forced and runs the multihost
 * activity check and claim of a multihost=on pool (spa_mmp.c, forced or not),
 * rebuilds the vdev tree from the newest config, opens the leaves it can find
 * (by leaf guid among the scanned devices, else by the recorded path), marks
 * the others UNAVAIL, and refuses when the redundancy cannot cover what is
 * missing. It then picks the newest uberblock that verifies and whose MOS root
 * and space map log read back, replays the space map log into the allocators,
 * and hands the MOS root to the upper layer.
 */
#include "spa_impl.h"

#include <cairn/arc.h>

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const spa_upper_ops_t *spa_upper;

#define SPA_DEFAULT_TXG_TIMEOUT_MS 5000

/*
 * The default dirty_max: a tenth of memory, from 256 MiB to 4 GiB (the txg
 * closes at a quarter of it). Why that much: every txg rewrites each indirect
 * block above the records it changed, and random writes over a volume touch
 * nearly all of them in any txg, so small txgs spend as much on indirect blocks
 * as on data. Measured (iSCSI 4 KiB random writes, 2 GiB LUN, 24 GiB RAM): 256
 * MiB gave 65k writes/s at 21 CPU-us each, 2.4 GiB 93k at 14.5 us, the final
 * sync counted (docs/benchmarks.md, session 7). A pool keeps its own value
 * in its labels only when an administrator set one (0 there: this default).
 */
#define SPA_DIRTY_MAX_FLOOR (256 * CAIRN_MIB)
#define SPA_DIRTY_MAX_CEILING (4 * CAIRN_GIB)

uint64_t spa_default_dirty_max(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    uint64_t v = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 10 : 0;
    return CAIRN_MIN(CAIRN_MAX(v, SPA_DIRTY_MAX_FLOOR), SPA_DIRTY_MAX_CEILING);
}

void spa_register_upper(const spa_upper_ops_t *ops) { spa_upper = ops; }
void spa_set_upper_private(spa_t *spa, void *priv) { spa->upper_priv = priv; }
void *spa_get_upper_private(spa_t *spa) { return spa->upper_priv; }
const char *spa_name(const spa_t *spa) { return spa->name; }
uint64_t spa_guid(const spa_t *spa) { return spa->guid; }
vdev_t *spa_root_vdev(spa_t *spa) { return spa->root; }
bool spa_readonly(const spa_t *spa) { return spa->readonly; }

vdev_state_t spa_health(spa_t *spa)
{
    vdev_state_refresh(spa->root);
    return (vdev_state_t)atomic_load(&spa->root->state);
}

const char *spa_health_name(spa_t *spa)
{
    return spa_suspended(spa) ? "SUSPENDED" : vdev_state_name(spa_health(spa));
}

static spa_t *spa_alloc(const char *name)
{
    spa_t *spa = cairn_zalloc(sizeof *spa);
    cairn_strlcpy(spa->name, name, sizeof spa->name);
    spa->txg_timeout_ms = SPA_DEFAULT_TXG_TIMEOUT_MS;
    spa->dirty_max = spa_default_dirty_max();
    pthread_mutex_init(&spa->rotor_lock, NULL);
    pthread_mutex_init(&spa->batch_alloc_lock, NULL);
    pthread_mutex_init(&spa->config_lock, NULL);
    spa->pending_remove = -1;
    spa->removing = -1;
    pthread_mutex_init(&spa->scrub_lock, NULL);
    pthread_cond_init(&spa->scrub_cv, NULL);
    pthread_mutex_init(&spa->errlog_lock, NULL);
    spa_fault_init(spa);
    return spa;
}

static void spa_free(spa_t *spa)
{
    if (!spa) return;
    spa_mmp_stop(spa);
    spa_fault_stop(spa);
    spa_metaslabs_fini(spa);
    spa_log_fini(spa);
    spa_brt_fini(spa);
    if (spa->root) vdev_free(spa->root);
    spa_vdev_fini(spa);
    pthread_mutex_destroy(&spa->rotor_lock);
    pthread_mutex_destroy(&spa->batch_alloc_lock);
    pthread_mutex_destroy(&spa->config_lock);
    pthread_mutex_destroy(&spa->scrub_lock);
    pthread_cond_destroy(&spa->scrub_cv);
    spa_errlog_fini(spa);
    pthread_mutex_destroy(&spa->errlog_lock);
    spa_fault_fini(spa);
    free(spa);
}

static bool spa_name_valid(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (n == 0 || n >= SPA_NAME_MAX) {
        cairn_seterr(err, errlen, "pool name must be 1 to %d characters", SPA_NAME_MAX - 1);
        return false;
    }
    if (!isalpha((unsigned char)name[0])) {
        cairn_seterr(err, errlen, "pool name '%s' must begin with a letter", name);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!isalnum(c) && c != '_' && c != '-' && c != '.' && c != ':') {
            cairn_seterr(err, errlen, "pool name '%s' has an invalid character '%c'", name, c);
            return false;
        }
    }
    static const char *reserved[] = {"mirror", "raidz", "log", "cache", "spare", "draid"};
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(reserved); i++) {
        if (!strncmp(name, reserved[i], strlen(reserved[i]))) {
            cairn_seterr(err, errlen, "pool name '%s' is reserved (begins with '%s')", name, reserved[i]);
            return false;
        }
    }
    return true;
}

/* ---------------- creation ---------------- */

typedef struct leaf_check {
    const char *path;
    dev_t dev;
    ino_t ino;
} leaf_check_t;

static int validate_spec(const spa_vdev_spec_t *s, int depth, leaf_check_t **leaves, size_t *n,
                         char *err, size_t errlen)
{
    switch (s->type) {
    case VDEV_TYPE_ROOT:
        if (depth != 0 || s->nchildren == 0) {
            cairn_seterr(err, errlen, "a pool needs at least one device");
            return -EINVAL;
        }
        break;
    case VDEV_TYPE_MIRROR:
        if (depth != 1) { cairn_seterr(err, errlen, "mirror can only be a top-level vdev"); return -EINVAL; }
        if (s->nchildren < 2) {
            cairn_seterr(err, errlen, "mirror needs at least 2 devices, got %u", s->nchildren);
            return -EINVAL;
        }
        break;
    case VDEV_TYPE_RAIDZ:
        if (depth != 1) { cairn_seterr(err, errlen, "raidz can only be a top-level vdev"); return -EINVAL; }
        if (s->nparity < 1 || s->nparity > VDEV_MAX_NPARITY) {
            cairn_seterr(err, errlen, "raidz parity must be 1, 2 or 3, got %u", s->nparity);
            return -EINVAL;
        }
        if (s->nchildren < s->nparity + 2) {
            cairn_seterr(err, errlen, "raidz%u needs at least %u devices, got %u", s->nparity,
                   s->nparity + 2, s->nchildren);
            return -EINVAL;
        }
        break;
    case VDEV_TYPE_LEAF: {
        if (depth < 1 || depth > 2 || !s->path || !*s->path) {
            cairn_seterr(err, errlen, "invalid device in vdev specification");
            return -EINVAL;
        }
        if (strlen(s->path) >= SPA_PATH_MAX) {
            cairn_seterr(err, errlen, "device path too long: %.40s...", s->path);
            return -ENAMETOOLONG;
        }
        const char *real = !strncmp(s->path, "fault:", 6) ? s->path + 6 : s->path;
        struct stat st;
        if (stat(real, &st)) {
            cairn_seterr(err, errlen, "cannot open '%s': %s", s->path, strerror(errno));
            return -errno;
        }
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
            cairn_seterr(err, errlen, "'%s' is not a file or block device", s->path);
            return -EINVAL;
        }
        for (size_t i = 0; i < *n; i++) {
            if ((*leaves)[i].dev == st.st_dev && (*leaves)[i].ino == st.st_ino) {
                cairn_seterr(err, errlen, "device '%s' is listed more than once", s->path);
                return -EINVAL;
            }
        }
        *leaves = cairn_realloc(*leaves, (*n + 1) * sizeof **leaves);
        (*leaves)[(*n)++] = (leaf_check_t){s->path, st.st_dev, st.st_ino};
        return 0;
    }
    default:
        cairn_seterr(err, errlen, "unknown vdev type %d", (int)s->type);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < s->nchildren; i++) {
        const spa_vdev_spec_t *c = &s->children[i];
        if (s->type != VDEV_TYPE_ROOT && c->type != VDEV_TYPE_LEAF) {
            cairn_seterr(err, errlen, "%s vdevs can only contain devices",
                   s->type == VDEV_TYPE_MIRROR ? "mirror" : "raidz");
            return -EINVAL;
        }
        int e = validate_spec(c, depth + 1, leaves, n, err, errlen);
        if (e) return e;
    }
    return 0;
}

vdev_t *spa_build_tree(const spa_vdev_spec_t *s, uint32_t ashift, int *errp, char *err,
                          size_t errlen)
{
    vdev_t *vd;
    if (s->type == VDEV_TYPE_LEAF) {
        vd = NULL;
        int e = vdev_leaf_open(s->path, &vd);
        if (e) {
            cairn_seterr(err, errlen, "cannot open '%s': %s", s->path,
                   e == -EBUSY ? "device is in use by another pool or process" : strerror(-e));
            *errp = e;
            if (vd) vdev_free(vd);
            return NULL;
        }
        vd->guid = cairn_random_guid();
    } else {
        vd = vdev_alloc(s->type, cairn_random_guid());
        vd->nparity = s->nparity;
    }
    vd->ashift = ashift;
    vd->alloc_class = s->vclass;
    for (uint32_t i = 0; i < s->nchildren; i++) {
        vdev_t *c = spa_build_tree(&s->children[i], ashift, errp, err, errlen);
        if (!c) {
            vdev_free(vd);
            return NULL;
        }
        vdev_add_child(vd, c);
    }
    return vd;
}

void spa_check_new_leaf(vdev_t *leaf, void *arg)
{
    leaf_scan_ctx_t *c = arg;
    if (c->error) return;
    if (leaf->psize < VDEV_MIN_LEAF_SIZE) {
        char sz[32];
        cairn_format_size(VDEV_MIN_LEAF_SIZE, sz, sizeof sz);
        cairn_seterr(c->err, c->errlen, "device '%s' is too small (minimum %s)", leaf->path, sz);
        c->error = -EINVAL;
        return;
    }
    spa_config_phys_t *cfg = NULL;
    if (spa_label_read_config(leaf, &cfg) == 0) {
        if (cfg->state != SPA_STATE_DESTROYED && !c->force) {
            cairn_seterr(c->err, c->errlen, "device '%s' is part of %s pool '%s'; use -f to override",
                   leaf->path, cfg->state == SPA_STATE_EXPORTED ? "exported" : "active", cfg->name);
            c->error = -EEXIST;
        }
        free(cfg);
    }
}

void spa_leaf_set_ashift(vdev_t *leaf, void *arg) { leaf->ashift = *(uint32_t *)arg; }

int spa_validate_spec(const spa_vdev_spec_t *root, char *err, size_t errlen)
{
    leaf_check_t *leaves = NULL;
    size_t nleaves = 0;
    int e = validate_spec(root, 0, &leaves, &nleaves, err, errlen);
    free(leaves);
    return e;
}

int spa_create(const char *name, const spa_vdev_spec_t *root, const spa_create_opts_t *opts,
               spa_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!spa_upper) {
        cairn_seterr(err, errlen, "internal error: no upper layer registered");
        return -EINVAL;
    }
    if (!spa_name_valid(name, err, errlen)) return -EINVAL;
    uint32_t ashift = opts && opts->ashift ? opts->ashift : VDEV_DEFAULT_ASHIFT;
    if (ashift < 9 || ashift > 16) {
        cairn_seterr(err, errlen, "ashift must be between 9 and 16, got %u", ashift);
        return -EINVAL;
    }
    leaf_check_t *leaves = NULL;
    size_t nleaves = 0;
    int e = validate_spec(root, 0, &leaves, &nleaves, err, errlen);
    free(leaves);
    if (e) return e;
    uint32_t nnormal = 0;
    for (uint32_t i = 0; i < root->nchildren; i++) {
        const spa_vdev_spec_t *c = &root->children[i];
        if (c->vclass == VDEV_CLASS_NORMAL) nnormal++;
        else if (c->vclass != VDEV_CLASS_LOG || c->type == VDEV_TYPE_RAIDZ) {
            cairn_seterr(err, errlen, "a log vdev is a device or a mirror");
            return -EINVAL;
        }
    }
    if (!nnormal) {
        cairn_seterr(err, errlen, "a pool needs at least one vdev besides its log devices");
        return -EINVAL;
    }
    if (root->nchildren > 32) {
        cairn_seterr(err, errlen, "a pool can have at most 32 top-level vdevs");
        return -EINVAL;
    }

    spa_t *spa = spa_alloc(name);
    spa->ashift = ashift;
    spa->guid = cairn_random_guid();
    int berr = 0;
    spa->root = spa_build_tree(root, ashift, &berr, err, errlen);
    if (!spa->root) {
        spa_free(spa);
        return berr ? berr : -EIO;
    }
    vdev_foreach_leaf(spa->root, spa_leaf_set_ashift, &ashift);
    leaf_scan_ctx_t lc = {.force = opts && opts->force, .err = err, .errlen = errlen};
    vdev_foreach_leaf(spa->root, spa_check_new_leaf, &lc);
    if (lc.error) {
        spa_free(spa);
        return lc.error;
    }
    spa->ntop = spa->root->nchildren;
    spa_vdev_reserve(spa);
    spa_space_estimate_init(spa);
    for (uint32_t i = 0; i < spa->ntop; i++) vdev_compute_asize(spa->root->children[i]);
    vdev_state_refresh(spa->root);
    spa->ub_slot_size = spa_ub_slot_size(ashift);
    spa_metaslabs_init(spa);
    spa_log_init(spa);
    spa_brt_init(spa);

    /* Everything checked: from here on devices are written. */
    e = spa_config_write_all(spa, SPA_STATE_ACTIVE);
    if (e) {
        cairn_seterr(err, errlen, "cannot write labels: %s", strerror(-e));
        spa_free(spa);
        return e;
    }
    memset(&spa->ub, 0, sizeof spa->ub);
    spa_txg_init(spa, 1);
    e = spa_upper->create(spa, 1);
    if (!e) {
        spa->upper_open = true;
        spa_txg_start(spa);
        spa_fault_start(spa);
        e = spa_txg_wait_synced(spa, 1);
    }
    if (e) {
        cairn_seterr(err, errlen, "cannot initialise pool: %s", strerror(-e));
        spa_abandon(spa);
        return e;
    }
    log_info("spa", "created pool %s (guid %016llx)", spa->name, (unsigned long long)spa->guid);
    *out = spa;
    return 0;
}

/* ---------------- import ---------------- */

typedef struct scanned {
    vdev_t **leaves;
    spa_config_phys_t **cfgs;
    size_t n;
    size_t nbusy;            /* devices held open by another process */
    char busy_path[SPA_PATH_MAX];
} scanned_t;

/* Whether the label of a device another process holds names pool want (a
 * name or a guid in hex); true when it cannot be read (it may be). */
static bool busy_leaf_may_be(const char *path, const char *want)
{
    vdev_t *peek = NULL;
    spa_config_phys_t *cfg = NULL;
    bool may = true;
    if (vdev_leaf_open_how(path, VDEV_OPEN_PEEK, &peek) == 0 &&
        spa_label_read_config(peek, &cfg) == 0) {
        char hex[32];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)cfg->pool_guid);
        may = !strcmp(cfg->name, want) || !strcmp(hex, want);
    }
    free(cfg);
    if (peek) vdev_free(peek);
    return may;
}

/* Opens path and reads its label. A device held by another process costs the
 * open's grace wait (a just-killed owner's lock lingers) only when it may
 * belong to the pool wanted (NULL: any): in an active/active pair the
 * partner's pools are held all along, and waiting on each of their devices
 * would add seconds to every takeover. */
static void scan_add(scanned_t *s, const char *path, const char *want)
{
    vdev_t *leaf = NULL;
    int e = vdev_leaf_open_how(path, VDEV_OPEN_LOCK_NOWAIT, &leaf);
    if (e == -EBUSY && (!want || busy_leaf_may_be(path, want))) {
        vdev_free(leaf);
        leaf = NULL;
        e = vdev_leaf_open(path, &leaf);
    }
    if (e != 0) {
        if (leaf) vdev_free(leaf);
        if (e == -EBUSY && s->nbusy++ == 0) cairn_strlcpy(s->busy_path, path, sizeof s->busy_path);
        return;
    }
    spa_config_phys_t *cfg = NULL;
    if (spa_label_read_config(leaf, &cfg) != 0) {
        vdev_free(leaf);
        return;
    }
    leaf->guid = cfg->leaf_guid;
    s->leaves = cairn_realloc(s->leaves, (s->n + 1) * sizeof *s->leaves);
    s->cfgs = cairn_realloc(s->cfgs, (s->n + 1) * sizeof *s->cfgs);
    s->leaves[s->n] = leaf;
    s->cfgs[s->n] = cfg;
    s->n++;
}

static void scan_paths(scanned_t *s, const char *const *paths, size_t npaths, const char *want)
{
    for (size_t i = 0; i < npaths; i++) {
        const char *p = paths[i];
        const char *real = !strncmp(p, "fault:", 6) ? p + 6 : p;
        struct stat st;
        if (stat(real, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(real);
            if (!d) continue;
            struct dirent *de;
            while ((de = readdir(d))) {
                if (de->d_name[0] == '.') continue;
                char full[4096];
                snprintf(full, sizeof full, "%s/%s", real, de->d_name);
                struct stat fst;
                if (stat(full, &fst) || !(S_ISREG(fst.st_mode) || S_ISBLK(fst.st_mode))) continue;
                if (fst.st_size && (uint64_t)fst.st_size < VDEV_MIN_LEAF_SIZE / 2) continue;
                scan_add(s, full, want);
            }
            closedir(d);
        } else {
            scan_add(s, p, want);
        }
    }
}

static void scan_free(scanned_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->leaves[i]) vdev_free(s->leaves[i]);
        free(s->cfgs[i]);
    }
    free(s->leaves);
    free(s->cfgs);
}

int spa_import_scan(const char *const *paths, size_t npaths, spa_import_candidate_t **out,
                    size_t *n)
{
    scanned_t s = {0};
    scan_paths(&s, paths, npaths, NULL);
    spa_import_candidate_t *c = NULL;
    size_t nc = 0;
    for (size_t i = 0; i < s.n; i++) {
        spa_config_phys_t *cfg = s.cfgs[i];
        if (cfg->state == SPA_STATE_DESTROYED) continue;
        size_t k;
        for (k = 0; k < nc; k++) if (c[k].guid == cfg->pool_guid) break;
        if (k == nc) {
            c = cairn_realloc(c, (nc + 1) * sizeof *c);
            memset(&c[nc], 0, sizeof c[nc]);
            cairn_strlcpy(c[nc].name, cfg->name, sizeof c[nc].name);
            c[nc].guid = cfg->pool_guid;
            c[nc].state = (int)cfg->state;
            c[nc].txg = cfg->config_txg;
            nc++;
        }
        c[k].nleaves_found++;
        if (cfg->config_txg > c[k].txg) {
            c[k].txg = cfg->config_txg;
            c[k].state = (int)cfg->state;
            cairn_strlcpy(c[k].name, cfg->name, sizeof c[k].name);
        }
    }
    scan_free(&s);
    *out = c;
    *n = nc;
    return 0;
}

static int cmp_ub_desc(const void *a, const void *b)
{
    const spa_uberblock_phys_t *x = a, *y = b;
    return x->txg < y->txg ? 1 : x->txg > y->txg ? -1 : 0;
}

typedef struct ub_gather {
    spa_t *spa;
    spa_uberblock_phys_t *list;
    size_t n;
} ub_gather_t;

static void gather_ub(vdev_t *leaf, void *arg)
{
    ub_gather_t *g = arg;
    if (atomic_load(&leaf->state) == VDEV_STATE_UNAVAIL) return;
    spa_uberblock_collect(leaf, g->spa->guid, g->spa->ub_slot_size, &g->list, &g->n);
}

/* An uberblock is usable when the roots it names read back and verify. */
static bool ub_usable(spa_t *spa, const spa_uberblock_phys_t *ub)
{
    const cairn_blkptr_t *roots[3] = {&ub->mos_root, &ub->sm_head, &ub->brt_root};
    for (int i = 0; i < 3; i++) {
        if (cairn_bp_is_hole(roots[i])) continue;
        void *buf = cairn_zalloc(roots[i]->lsize ? roots[i]->lsize : 1);
        int e = spa_block_read_flags(spa, roots[i], buf, VDEV_READ_NOREPAIR, NULL);
        free(buf);
        if (e) return false;
    }
    return true;
}

static int spa_open_from_config(spa_t *spa, const spa_config_phys_t *cfg, scanned_t *s,
                                int flags, uint64_t mmp_claim_ns, char *err, size_t errlen)
{
    spa->guid = cfg->pool_guid;
    spa->config_txg = cfg->config_txg;
    cairn_strlcpy(spa->comment, cfg->comment, sizeof spa->comment);
    if (cfg->txg_timeout_ms) spa->txg_timeout_ms = cfg->txg_timeout_ms;
    if (cfg->dirty_max) {
        spa->dirty_max = cfg->dirty_max;
        spa->dirty_max_set = true;
    }
    spa->readonly = flags & SPA_IMPORT_READONLY;
    if (cfg->reserved[0] == SPA_CONFIG_EXT_MAGIC) {
        spa->resilver_since = cfg->reserved[1];
        memcpy(&spa->scan_saved, &cfg->reserved[SPA_CONFIG_SCAN_WORD], sizeof spa->scan_saved);
    }
    spa->autoexpand = cfg->reserved[SPA_CONFIG_FLAGS_WORD] & SPA_CONFIG_FLAG_AUTOEXPAND;
    spa->multihost = cfg->reserved[SPA_CONFIG_FLAGS_WORD] & SPA_CONFIG_FLAG_MULTIHOST;
    spa->brt_feature = cfg->version >= SPA_VERSION_BRT;
    spa_config_host(cfg, &spa->last_host);
    spa_spares_from_config(spa, cfg);
    spa->root = spa_vdev_tree_from_config(cfg, s->leaves, s->n);
    spa->ntop = spa->root->nchildren;
    spa_vdev_reserve(spa);   /* moves the top-level array: before the heartbeat walks it */
    /* Claimed (spa_mmp_import_check): heartbeats from now on, before the long
     * reads below, so the import itself looks alive to another host. */
    if (mmp_claim_ns) spa_mmp_start(spa, mmp_claim_ns);
    spa_space_estimate_init(spa);
    spa->ashift = VDEV_DEFAULT_ASHIFT;
    for (uint32_t i = spa->ntop; i-- > 0;)
        if (spa->root->children[i]->type != VDEV_TYPE_HOLE) spa->ashift = spa->root->children[i]->ashift;
    spa->ub_slot_size = spa_ub_slot_size(spa->ashift);
    vdev_state_refresh(spa->root);
    if (atomic_load(&spa->root->state) == VDEV_STATE_FAULTED) {
        cairn_seterr(err, errlen, "pool '%s' cannot be imported: too many devices are missing",
               spa->name);
        return -ENXIO;
    }
    /* A missing log device may hold acknowledged synchronous writes: importing
     * without it loses them, so only when asked to (-m). */
    for (uint32_t i = 0; i < spa->ntop; i++) {
        vdev_t *top = spa->root->children[i];
        int st = atomic_load(&top->state);
        if (top->alloc_class != VDEV_CLASS_LOG ||
            (st != VDEV_STATE_FAULTED && st != VDEV_STATE_UNAVAIL))
            continue;
        const char *path = top->path;
        for (uint32_t k = 0; !path && k < top->nchildren; k++) path = top->children[k]->path;
        if (!(flags & (SPA_IMPORT_MISSING_LOG | SPA_IMPORT_READONLY))) {
            cairn_seterr(err, errlen, "pool '%s' cannot be imported: log device '%s' is missing; "
                   "import with -m to drop the records only it holds", spa->name,
                   path ? path : "?");
            return -ENXIO;
        }
        if (!spa->readonly)
            log_warn("spa", "pool %s: importing without log device '%s' (-m): synchronous "
                     "writes acknowledged from its log and not yet in a txg are dropped",
                     spa->name, path ? path : "?");
    }
    ub_gather_t g = {.spa = spa};
    vdev_foreach_leaf(spa->root, gather_ub, &g);
    qsort(g.list, g.n, sizeof *g.list, cmp_ub_desc);
    spa_metaslabs_init(spa);
    spa_log_init(spa);
    spa_brt_init(spa);
    int found = -1;
    for (size_t i = 0; i < g.n; i++) {
        if (ub_usable(spa, &g.list[i])) { found = (int)i; break; }
        log_warn("spa", "pool %s: uberblock of txg %llu does not verify; trying an older one",
                 spa->name, (unsigned long long)g.list[i].txg);
    }
    if (found < 0) {
        free(g.list);
        cairn_seterr(err, errlen, "pool '%s' cannot be imported: no valid uberblock found", spa->name);
        return -ECKSUM;
    }
    spa->ub = g.list[found];
    free(g.list);
    int e = spa_spacemap_load(spa);
    if (e) {
        cairn_seterr(err, errlen, "pool '%s' cannot be imported: space map log unreadable (%s)",
               spa->name, strerror(-e));
        return e;
    }
    e = spa_brt_load(spa);
    if (e) {
        cairn_seterr(err, errlen, "pool '%s' cannot be imported: block reference table unreadable (%s)",
               spa->name, strerror(-e));
        return e;
    }
    e = spa_log_load(spa);
    if (e) {
        cairn_seterr(err, errlen, "pool '%s' cannot be imported: intent-log directory unreadable (%s)",
               spa->name, strerror(-e));
        return e;
    }
    spa_txg_init(spa, spa->ub.txg + 1);
    spa_dtl_open_fixup(spa->root, spa->ub.txg + 1);
    e = spa_upper->open(spa, &spa->ub.mos_root);
    if (e) {
        cairn_seterr(err, errlen, "pool '%s' cannot be imported: meta object set unreadable (%s)",
               spa->name, strerror(-e));
        return e;
    }
    spa->upper_open = true;
    return 0;
}

/* Whether this host may import the pool whose newest config is best: a pool
 * left active by another host only with -f, a multihost pool only after the
 * activity check and claim (which -f does not skip); *claim_ns: when claimed. */
static int import_allowed(const spa_config_phys_t *best, scanned_t *s, int flags,
                          uint64_t *claim_ns, char *err, size_t errlen)
{
    if (flags & SPA_IMPORT_READONLY) return 0; /* writes nothing: no claim to make */
    /* The daemon's own exports leave its cache; a cached pool found exported was
     * exported by someone else since (a partner host that took it over): it is
     * theirs to give, not ours to take back at start-up. */
    if ((flags & SPA_IMPORT_CACHED) && best->state == SPA_STATE_EXPORTED) {
        cairn_seterr(err, errlen, "pool '%s' was exported elsewhere since this daemon had it; "
                     "import it by hand if it is to come back here", best->name);
        return -EBUSY;
    }
    spa_host_phys_t last;
    spa_config_host(best, &last);
    bool ours = last.hostid && last.hostid == spa_hostid();
    bool legacy_own = !last.hostid && (flags & SPA_IMPORT_CACHED);
    if (best->state == SPA_STATE_ACTIVE && !ours && !legacy_own && !(flags & SPA_IMPORT_FORCE)) {
        if (last.hostid)
            cairn_seterr(err, errlen, "pool '%s' was last imported by host %s (hostid %08llx) and "
                         "not exported; use -f to import it anyway", best->name,
                         last.hostname[0] ? last.hostname : "?", (unsigned long long)last.hostid);
        else
            cairn_seterr(err, errlen, "pool '%s' was not exported and may be in use by another "
                         "daemon; use -f to import it anyway", best->name);
        return -EBUSY;
    }
    if (!(best->reserved[SPA_CONFIG_FLAGS_WORD] & SPA_CONFIG_FLAG_MULTIHOST)) return 0;
    if (!spa_hostid()) {
        cairn_seterr(err, errlen, "pool '%s' has multihost=on and this process has no host id",
                     best->name);
        return -EINVAL;
    }
    vdev_t **leaves = cairn_zalloc((s->n + 1) * sizeof *leaves);
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->leaves[i] && s->cfgs[i] && s->cfgs[i]->pool_guid == best->pool_guid)
            leaves[n++] = s->leaves[i];
    int e = spa_mmp_import_check(best->name, best->pool_guid, leaves, n, claim_ns, err, errlen);
    free(leaves);
    return e;
}

int spa_import(const char *name, const char *const *paths, size_t npaths, int flags,
               spa_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!spa_upper) {
        cairn_seterr(err, errlen, "internal error: no upper layer registered");
        return -EINVAL;
    }
    scanned_t s = {0};
    scan_paths(&s, paths, npaths, name);
    /* Choose the pool: by name (or guid in hex), or the only one present. */
    uint64_t guid = 0;
    const spa_config_phys_t *best = NULL;
    for (size_t i = 0; i < s.n; i++) {
        const spa_config_phys_t *c = s.cfgs[i];
        if (c->state == SPA_STATE_DESTROYED) continue;
        if (name) {
            char hex[32];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)c->pool_guid);
            if (strcmp(c->name, name) && strcmp(hex, name)) continue;
        }
        if (guid && c->pool_guid != guid) {
            if (!name || !best || strcmp(best->name, c->name) == 0) {
                cairn_seterr(err, errlen, "more than one pool %s%s found; name it by guid",
                       name ? "named " : "", name ? name : "");
                scan_free(&s);
                return -EEXIST;
            }
            continue;
        }
        guid = c->pool_guid;
        if (!best || c->config_txg > best->config_txg) best = c;
    }
    if (!best) {
        if (s.nbusy)
            cairn_seterr(err, errlen, "no %s%s%s found; %zu device(s) are in use by another process "
                   "(e.g. '%s'): is the pool imported elsewhere?", name ? "pool named '" : "pool",
                   name ? name : "", name ? "'" : "", s.nbusy, s.busy_path);
        else
            cairn_seterr(err, errlen, name ? "no pool named '%s' found" : "no pool found%s", name ? name : "");
        scan_free(&s);
        return -ENOENT;
    }
    uint64_t mmp_claim_ns = 0;
    int e = import_allowed(best, &s, flags, &mmp_claim_ns, err, errlen);
    if (e) {
        scan_free(&s);
        return e;
    }
    spa_t *spa = spa_alloc(best->name);
    spa_config_phys_t *cfg = cairn_zalloc(best->length);
    memcpy(cfg, best, best->length);
    e = spa_open_from_config(spa, cfg, &s, flags, mmp_claim_ns, err, errlen);
    if (e == -ENXIO && s.nbusy && err)
        snprintf(err + strlen(err), errlen - strlen(err),
                 " (%zu device(s) are in use by another process, e.g. '%s')", s.nbusy, s.busy_path);
    free(cfg);
    scan_free(&s);
    if (e) {
        if (spa->upper_open && spa_upper) spa_upper->close(spa);
        spa_free(spa);
        return e;
    }
    if (!spa->readonly) {
        e = spa_config_write_all(spa, SPA_STATE_ACTIVE);
        if (e) log_warn("spa", "pool %s: cannot rewrite labels: %s", spa->name, strerror(-e));
        spa_txg_start(spa);
        spa_fault_start(spa);
        spa_resilver_check(spa); /* one the last run of the pool left unfinished */
        spa_scan_resume_saved(spa);
        spa_spare_activate_all(spa); /* a disk lost while the pool was down */
    }
    if (spa_health(spa) != VDEV_STATE_ONLINE)
        log_warn("spa", "pool %s imported %s", spa->name, vdev_state_name(spa_health(spa)));
    else
        log_info("spa", "imported pool %s at txg %llu", spa->name, (unsigned long long)spa->ub.txg);
    *out = spa;
    return 0;
}

/* ---------------- closing ---------------- */

static int spa_shutdown(spa_t *spa, int state)
{
    /* First: what it decided reaches the labels before the last write, and a
     * resilver it starts is one the scrub's end below stops. */
    spa_fault_stop(spa);
    spa_scrub_fini(spa, !spa->readonly);
    int err = 0;
    if (!spa->readonly) {
        err = spa_txg_wait_synced(spa, 0);
        spa_txg_stop(spa);
        if (spa->tx.failed) err = -EIO;
        if (state >= 0 && !err) err = spa_config_write_all(spa, (spa_pool_state_t)state);
    }
    if (spa->upper_open && spa_upper) spa_upper->close(spa);
    spa->upper_open = false;
    arc_purge_pool(spa->guid); /* ARC: forget its blocks, close its cache devices */
    log_info("spa", "closed pool %s", spa->name);
    spa_free(spa);
    return err;
}

int spa_export(spa_t *spa) { return spa_shutdown(spa, SPA_STATE_EXPORTED); }
int spa_destroy(spa_t *spa) { return spa_shutdown(spa, SPA_STATE_DESTROYED); }
int spa_close(spa_t *spa) { return spa_shutdown(spa, -1); }

void spa_abandon(spa_t *spa)
{
    spa_fault_stop(spa); /* before the scrub's end: it may start a resilver */
    spa_scrub_fini(spa, false);
    pthread_mutex_lock(&spa->tx.lock);
    spa->tx.failed = true; /* the sync thread writes nothing more */
    pthread_mutex_unlock(&spa->tx.lock);
    spa_txg_stop(spa);
    if (spa->upper_open && spa_upper) spa_upper->close(spa);
    spa->upper_open = false;
    arc_purge_pool(spa->guid); /* ARC: forget its blocks, close its cache devices */
    spa_free(spa);
}

/* ---------------- space and properties ---------------- */

void spa_deflate_init_top(spa_t *spa, uint32_t id, vdev_t *top)
{
    if (id >= SPA_DEFLATE_VDEVS) return;
    uint64_t a = top->type == VDEV_TYPE_HOLE ? 0 : vdev_psize_to_asize(top, 128 * 1024);
    atomic_store(&spa->deflate[id], a ? (uint32_t)((128 * 1024 << 9) / a) : 512);
}

/* The worst ratio of allocated to logical bytes over the top-level vdevs, per
 * block size class: raidz parity and padding, sector rounding. Estimates of
 * what dirty data will allocate use it, so they are never low. */
void spa_space_estimate_init(spa_t *spa)
{
    /* Deflation follows ZFS: a vdev's ratio is that of a 128 KiB block, the
     * common record; smaller blocks pay their padding in full. */
    for (uint32_t i = 0; i < spa->ntop; i++) spa_deflate_init_top(spa, i, spa->root->children[i]);
    /* Estimates are of deflated bytes (what the dataset layer counts), from
     * above: the worst vdev for each size. */
    for (uint32_t c = 0; c < CAIRN_ARRAY_SIZE(spa->asize_ratio); c++) {
        uint64_t lsize = 512ULL << c, worst = lsize;
        for (uint32_t i = 0; i < spa->ntop; i++) {
            if (spa->root->children[i]->type == VDEV_TYPE_HOLE || spa_top_is_log(spa, i)) continue;
            uint64_t a = spa_asize_deflate(spa, i, vdev_psize_to_asize(spa->root->children[i], lsize));
            if (a > worst) worst = a;
        }
        __atomic_store_n(&spa->asize_ratio[c], (uint32_t)((worst * 1024 + lsize - 1) / lsize),
                         __ATOMIC_RELAXED);
    }
}

uint64_t spa_asize_deflate(spa_t *spa, uint32_t vdev, uint64_t asize)
{
    if (vdev >= SPA_DEFLATE_VDEVS) return asize;
    uint32_t d = atomic_load(&spa->deflate[vdev]);
    return d ? (asize >> 9) * d : asize;
}

uint64_t spa_bp_dsize(spa_t *spa, const cairn_blkptr_t *bp)
{
    uint64_t s = 0;
    for (int i = 0; i < bp->ncopies && i < CAIRN_MAX_COPIES; i++)
        s += spa_asize_deflate(spa, bp->dva[i].vdev, cairn_dva_asize(&bp->dva[i]));
    return s;
}

uint64_t spa_space_estimate(spa_t *spa, uint64_t lsize, int copies)
{
    uint32_t c = 0;
    while (c + 1 < CAIRN_ARRAY_SIZE(spa->asize_ratio) && (512ULL << c) < lsize) c++;
    if (copies < 1) copies = 1;
    return (lsize * __atomic_load_n(&spa->asize_ratio[c], __ATOMIC_RELAXED) + 1023) / 1024 *
           (uint64_t)copies;
}

uint64_t spa_slop(spa_t *spa)
{
    spa_space_t ss;
    spa_get_space(spa, &ss);
    uint64_t slop = CAIRN_MAX(ss.size / 32, CAIRN_MIN(ss.size / 8, 32 * CAIRN_MIB));
    return CAIRN_MIN(slop, 128ULL << 30);
}

void spa_get_space(spa_t *spa, spa_space_t *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < spa->ntop; i++) {
        if (spa_top_is_log(spa, i)) continue; /* log devices hold no data */
        metaslab_t *ms = spa->ms[i];
        if (!ms) continue;                    /* nor do holes */
        out->size += spa->root->children[i]->asize;
        metaslab_stats_t st;
        metaslab_get_stats(ms, &st);
        out->alloc += st.allocated + st.deferred;
        out->dsize += spa_asize_deflate(spa, i, spa->root->children[i]->asize);
        out->dfree += spa_asize_deflate(spa, i, st.free);
    }
    out->free = out->size - out->alloc;
}

void spa_top_space(spa_t *spa, uint32_t top, spa_space_t *out)
{
    memset(out, 0, sizeof *out);
    if (!spa_top_vdev(spa, top)) return;
    out->size = spa->root->children[top]->asize;
    metaslab_t *ms = spa->ms[top];
    if (spa_top_is_log(spa, top)) {
        /* All of it is the log region: what counts is the live log blocks. */
        out->alloc = spa_log_vdev_used(spa, top);
    } else if (ms) {
        metaslab_stats_t st;
        metaslab_get_stats(ms, &st);
        out->alloc = st.allocated + st.deferred;
    }
    out->free = out->size > out->alloc ? out->size - out->alloc : 0;
}

typedef struct leaf_paths_ctx {
    char **paths;
    size_t n;
} leaf_paths_ctx_t;

static void collect_path(vdev_t *leaf, void *arg)
{
    leaf_paths_ctx_t *c = arg;
    c->paths = cairn_realloc(c->paths, (c->n + 1) * sizeof *c->paths);
    c->paths[c->n++] = cairn_strdup(leaf->path ? leaf->path : "");
}

int spa_leaf_paths(spa_t *spa, char ***paths, size_t *n)
{
    leaf_paths_ctx_t c = {0};
    vdev_foreach_leaf(spa->root, collect_path, &c);
    *paths = c.paths;
    *n = c.n;
    return 0;
}

static const char *const spa_props[] = {
    "size", "alloc", "free", "capacity", "health", "guid", "ashift",
    "comment", "txg_timeout", "dirty_max", "txg", "readonly", "logregion", "logused",
    "autoexpand", "expandsize", "multihost", "bcloneused", "bclonesaved", "bcloneratio", NULL,
};

const char *const *spa_prop_names(void) { return spa_props; }

int spa_prop_get(spa_t *spa, const char *prop, char *buf, size_t len)
{
    spa_space_t sp;
    spa_get_space(spa, &sp);
    if (!strcmp(prop, "size")) snprintf(buf, len, "%llu", (unsigned long long)sp.size);
    else if (!strcmp(prop, "alloc")) snprintf(buf, len, "%llu", (unsigned long long)sp.alloc);
    else if (!strcmp(prop, "free")) snprintf(buf, len, "%llu", (unsigned long long)sp.free);
    else if (!strcmp(prop, "capacity"))
        snprintf(buf, len, "%llu", (unsigned long long)(sp.size ? sp.alloc * 100 / sp.size : 0));
    else if (!strcmp(prop, "health"))
        snprintf(buf, len, "%s", spa_health_name(spa));
    else if (!strcmp(prop, "multihost")) snprintf(buf, len, "%s", spa->multihost ? "on" : "off");
    else if (!strcmp(prop, "guid")) snprintf(buf, len, "%llu", (unsigned long long)spa->guid);
    else if (!strcmp(prop, "ashift")) snprintf(buf, len, "%u", spa->ashift);
    else if (!strcmp(prop, "comment")) {
        pthread_mutex_lock(&spa->config_lock);
        snprintf(buf, len, "%s", spa->comment[0] ? spa->comment : "-");
        pthread_mutex_unlock(&spa->config_lock);
    }
    else if (!strcmp(prop, "txg_timeout"))
        snprintf(buf, len, "%llu", (unsigned long long)(spa->txg_timeout_ms / 1000));
    else if (!strcmp(prop, "dirty_max")) snprintf(buf, len, "%llu", (unsigned long long)spa->dirty_max);
    else if (!strcmp(prop, "txg")) snprintf(buf, len, "%llu", (unsigned long long)spa->ub.txg);
    else if (!strcmp(prop, "readonly")) snprintf(buf, len, "%s", spa->readonly ? "on" : "off");
    else if (!strcmp(prop, "autoexpand")) snprintf(buf, len, "%s", spa->autoexpand ? "on" : "off");
    else if (!strncmp(prop, "bclone", 6) &&
             (!strcmp(prop + 6, "used") || !strcmp(prop + 6, "saved") || !strcmp(prop + 6, "ratio"))) {
        /* Block cloning (spa_brt.c): the allocated bytes of shared blocks, the
         * bytes their extra references would take as copies, and the ratio
         * of all references to the blocks, as OpenZFS names them. */
        spa_brt_stats_t bs;
        spa_brt_stats(spa, &bs);
        if (prop[6] == 'u') snprintf(buf, len, "%llu", (unsigned long long)bs.used);
        else if (prop[6] == 's') snprintf(buf, len, "%llu", (unsigned long long)bs.saved);
        else snprintf(buf, len, "%.2fx", bs.used ? (double)(bs.used + bs.saved) / (double)bs.used : 1.0);
    }
    else if (!strcmp(prop, "expandsize"))
        snprintf(buf, len, "%llu", (unsigned long long)spa_expandsize(spa));
    else if (!strcmp(prop, "logregion") || !strcmp(prop, "logused")) {
        /* The intent log's share: logregion is the part of alloc that the
         * normal vdevs set aside for it (given back when the log idles),
         * logused the bytes of live log blocks anywhere (log devices too). */
        spa_log_stats_t ls;
        spa_log_get_stats(spa, &ls);
        uint64_t v = prop[3] == 'r' ? ls.region_normal_bytes
                                    : (ls.region_bytes > ls.region_free ? ls.region_bytes - ls.region_free : 0);
        snprintf(buf, len, "%llu", (unsigned long long)v);
    } else return -ENOENT;
    return 0;
}

bool spa_prop_is_default(spa_t *spa, const char *prop)
{
    if (!strcmp(prop, "comment") || !strcmp(prop, "dirty_max")) {
        pthread_mutex_lock(&spa->config_lock);   /* spa_prop_set changes them under it */
        bool dflt = prop[0] == 'c' ? !spa->comment[0] : !spa->dirty_max_set;
        pthread_mutex_unlock(&spa->config_lock);
        return dflt;
    }
    if (!strcmp(prop, "txg_timeout")) return spa->txg_timeout_ms == SPA_DEFAULT_TXG_TIMEOUT_MS;
    if (!strcmp(prop, "autoexpand")) return !spa->autoexpand;
    if (!strcmp(prop, "multihost")) return !spa->multihost;
    return false;
}

/* multihost=on: the labels say so first, then the heartbeats start; off: they
 * stop first. A pool that gave way to another host is not ours to change. */
static int set_multihost(spa_t *spa, const char *value, char *err, size_t errlen)
{
    if (strcmp(value, "on") && strcmp(value, "off")) {
        cairn_seterr(err, errlen, "multihost must be 'on' or 'off'");
        return -EINVAL;
    }
    bool on = !strcmp(value, "on");
    if (on && !spa_hostid()) {
        cairn_seterr(err, errlen, "multihost=on needs a host id (cairnd.conf hostid)");
        return -EINVAL;
    }
    if (spa_suspended(spa)) {
        cairn_seterr(err, errlen, "pool '%s' is suspended", spa->name);
        return -EIO;
    }
    if (!on) spa_mmp_stop(spa);
    pthread_mutex_lock(&spa->config_lock);
    spa->multihost = on;
    int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    pthread_mutex_unlock(&spa->config_lock);
    if (e) {
        cairn_seterr(err, errlen, "cannot write labels: %s", strerror(-e));
        return e;
    }
    if (on) spa_mmp_start(spa, cairn_now_ns());
    return 0;
}

int spa_prop_set(spa_t *spa, const char *prop, const char *value, char *err, size_t errlen)
{
    bool known = false;
    for (const char *const *p = spa_props; *p; p++) if (!strcmp(*p, prop)) known = true;
    if (!known) {
        cairn_seterr(err, errlen, "unknown pool property '%s'", prop);
        return -ENOENT;
    }
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        return -EROFS;
    }
    if (!strcmp(prop, "comment")) {
        if (strlen(value) >= SPA_COMMENT_MAX) {
            cairn_seterr(err, errlen, "comment is too long (at most %d characters)", SPA_COMMENT_MAX - 1);
            return -EINVAL;
        }
        for (const char *c = value; *c; c++) {
            if (!isprint((unsigned char)*c)) {
                cairn_seterr(err, errlen, "comment must be printable text");
                return -EINVAL;
            }
        }
        pthread_mutex_lock(&spa->config_lock);
        cairn_strlcpy(spa->comment, value, sizeof spa->comment);
        pthread_mutex_unlock(&spa->config_lock);
    } else if (!strcmp(prop, "txg_timeout")) {
        char *end;
        unsigned long v = strtoul(value, &end, 10);
        if (*end || !*value || v < 1 || v > 300) {
            cairn_seterr(err, errlen, "txg_timeout must be a number of seconds from 1 to 300");
            return -EINVAL;
        }
        spa->txg_timeout_ms = v * 1000;
    } else if (!strcmp(prop, "dirty_max")) {
        uint64_t v;
        if (cairn_parse_size(value, &v) || v < 16 * CAIRN_MIB || v > 64 * CAIRN_GIB) {
            cairn_seterr(err, errlen, "dirty_max must be a size from 16M to 64G");
            return -EINVAL;
        }
        pthread_mutex_lock(&spa->config_lock);
        spa->dirty_max = v;
        spa->dirty_max_set = true;
        pthread_mutex_unlock(&spa->config_lock);
    } else if (!strcmp(prop, "autoexpand")) {
        if (strcmp(value, "on") && strcmp(value, "off")) {
            cairn_seterr(err, errlen, "autoexpand must be 'on' or 'off'");
            return -EINVAL;
        }
        /* Under the config lock: the sync thread reads it there (spa_expand.c). */
        pthread_mutex_lock(&spa->config_lock);
        spa->autoexpand = !strcmp(value, "on");
        pthread_mutex_unlock(&spa->config_lock);
    } else if (!strcmp(prop, "multihost")) {
        return set_multihost(spa, value, err, errlen);
    } else {
        cairn_seterr(err, errlen, "pool property '%s' is read-only", prop);
        return -EROFS;
    }
    int e = spa_config_write_all(spa, SPA_STATE_ACTIVE);
    if (e) cairn_seterr(err, errlen, "cannot write labels: %s", strerror(-e));
    return e;
}
