/*
 * Hot spares (API in include/cairn/spa.h): devices a pool holds in reserve
 * and takes, by itself, in place of a leaf that fault management FAULTED.
 *
 * THE LIST. A spare is a path and a guid in the pool's config (the section
 * after the per-vdev extension, docs/ondisk-format.md 1.2), so spares survive
 * export, import and restarts. An available spare is not opened: its device
 * stays free (a leaf file is locked while open) until it is needed. It is
 * checked when added - it opens, it is big enough, it is no member of this
 * pool or, without -f, of another - and again when it is taken.
 *
 * IN USE. A spare in use is a leaf of the tree: a `spare-N` vdev stands where
 * the failed leaf was, holding the failed leaf and the spare (a replacing
 * vdev marked as a spare: writes go to both, reads to whichever serves, and
 * the resilver writes the spare). Unlike a replacement, the spare-N vdev stays
 * when the resilver ends: the failed disk is still the one to replace. Then
 *  - `replace POOL FAILED NEW`: the failed leaf leaves at once, the spare
 *    becomes the OLD side of a replacement by NEW, and when NEW is whole the
 *    spare leaves the tree and is available again;
 *  - `detach POOL SPARE`: the spare leaves, the failed leaf stays where it was;
 *  - `detach POOL FAILED`: the spare takes its place for good and leaves the list.
 *  - the failed leaf comes back (`clear`/`online` of it once it answers):
 *    when the resilver has made it whole again, the spare steps back out
 *    by itself and is available again, as in ZFS.
 * A spare whose leaf left the tree stays open (a reader may hold it) until
 * the pool closes; taken again, its new leaf takes that open device over
 * (spa_resilver.c, take_retired_device).
 *
 * WHEN. A spare steps in for a leaf fault management just FAULTED, and for
 * every leaf found FAULTED or missing at import or when a spare is added
 * (spa_spare_activate_all): a pool that lost a disk while down, or before it
 * had a spare, gets its redundancy back without the administrator.
 */
#include "spa_impl.h"

#include <cairn/assert.h>
#include <cairn/raidz.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t spa_spares_size(uint32_t nspares) { return (size_t)nspares * sizeof(spa_spare_phys_t); }

void spa_spares_to_config(const spa_t *spa, spa_config_phys_t *cfg)
{
    cfg->reserved[SPA_CONFIG_SPARES_WORD] = spa->nspares;
    memcpy(spa_config_tail(cfg), spa->spares, spa_spares_size(spa->nspares));
}

void spa_spares_from_config(spa_t *spa, const spa_config_phys_t *cfg)
{
    spa->nspares = 0;
    if (cfg->reserved[0] != SPA_CONFIG_EXT_MAGIC || cfg->reserved[SPA_CONFIG_SPARES_WORD] > SPA_MAX_SPARES) return;
    spa->nspares = (uint32_t)cfg->reserved[SPA_CONFIG_SPARES_WORD];
    memcpy(spa->spares, spa_config_tail(cfg), spa_spares_size(spa->nspares));
    for (uint32_t i = 0; i < spa->nspares; i++) spa->spares[i].path[SPA_PATH_MAX - 1] = '\0';
}

static int spare_index(const spa_t *spa, const char *path)
{
    for (uint32_t i = 0; i < spa->nspares; i++)
        if (!strcmp(spa->spares[i].path, path)) return (int)i;
    return -1;
}

/* Under config_lock: whether path may become a spare of spa. */
static int spare_check(spa_t *spa, const char *path, bool force, char *err, size_t errlen)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    if (strlen(path) >= SPA_PATH_MAX) {
        cairn_seterr(err, errlen, "device path too long: '%s'", path);
        return -ENAMETOOLONG;
    }
    if (spa_tree_leaf(spa, path)) {
        cairn_seterr(err, errlen, "'%s' is already a device of pool '%s'", path, spa->name);
        return -EEXIST;
    }
    if (spare_index(spa, path) >= 0) {
        cairn_seterr(err, errlen, "'%s' is already a spare of pool '%s'", path, spa->name);
        return -EEXIST;
    }
    vdev_t *leaf = NULL;
    int e = vdev_leaf_open(path, &leaf);
    if (e) {
        cairn_seterr(err, errlen, "cannot open '%s': %s", path, strerror(-e));
        if (leaf) vdev_free(leaf);
        return e;
    }
    spa_config_phys_t *cfg = NULL;
    if (leaf->psize < VDEV_MIN_LEAF_SIZE) {
        cairn_seterr(err, errlen, "'%s' is too small (%llu bytes; at least %llu)", path,
                     (unsigned long long)leaf->psize, (unsigned long long)VDEV_MIN_LEAF_SIZE);
        e = -EINVAL;
    } else if (spa_label_read_config(leaf, &cfg) == 0 && cfg->state != SPA_STATE_DESTROYED &&
               (cfg->pool_guid == spa->guid || !force)) {
        cairn_seterr(err, errlen, "'%s' belongs to pool '%s'%s", path, cfg->name,
                     cfg->pool_guid == spa->guid ? "" : " (use -f to take it)");
        e = -EBUSY;
    }
    free(cfg);
    vdev_free(leaf);
    return e;
}

/* Under config_lock: whether every one of paths may become a spare of spa. */
static int spares_check(spa_t *spa, const char *const *paths, size_t n, bool force, char *err,
                        size_t errlen)
{
    if (spa->nspares + n > SPA_MAX_SPARES) {
        cairn_seterr(err, errlen, "a pool has at most %d spares", SPA_MAX_SPARES);
        return -E2BIG;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++)
            if (!strcmp(paths[i], paths[j])) {
                cairn_seterr(err, errlen, "'%s' is given more than once", paths[i]);
                return -EINVAL;
            }
        int e = spare_check(spa, paths[i], force, err, errlen);
        if (e) return e;
    }
    return 0;
}

int spa_spare_add_dry_run(spa_t *spa, const char *const *paths, size_t n, bool force, char *err,
                          size_t errlen)
{
    pthread_mutex_lock(&spa->config_lock);
    int e = spares_check(spa, paths, n, force, err, errlen);
    pthread_mutex_unlock(&spa->config_lock);
    return e;
}

int spa_spare_add(spa_t *spa, const char *const *paths, size_t n, bool force, char *err,
                  size_t errlen)
{
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        return -EROFS;
    }
    pthread_mutex_lock(&spa->config_lock);
    uint32_t before = spa->nspares;
    int e = spares_check(spa, paths, n, force, err, errlen);
    for (size_t i = 0; i < n && !e; i++) {
        spa_spare_phys_t *s = &spa->spares[spa->nspares++];
        memset(s, 0, sizeof *s);
        s->guid = cairn_random_guid();
        cairn_strlcpy(s->path, paths[i], sizeof s->path);
    }
    if (!e) {
        e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        if (e) cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
    }
    if (e) {
        spa->nspares = before; /* nothing changes */
    } else {
        for (size_t i = 0; i < n; i++) {
            log_info("spa", "pool %s: %s added as a spare", spa->name, paths[i]);
            spa_event_post(spa->name, "sysevent.fs.cairn.vdev_add", "vdev=%s spare=1", paths[i]);
        }
    }
    pthread_mutex_unlock(&spa->config_lock);
    if (!e) spa_spare_activate_all(spa); /* a leaf that failed before there was a spare */
    return e;
}

/* Under config_lock: spare i leaves the list. */
static void spare_drop(spa_t *spa, uint32_t i)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    memmove(&spa->spares[i], &spa->spares[i + 1], (spa->nspares - i - 1) * sizeof spa->spares[0]);
    spa->nspares--;
}

int spa_spare_remove(spa_t *spa, const char *path, char *err, size_t errlen)
{
    pthread_mutex_lock(&spa->config_lock);
    int e = 0;
    int i = spare_index(spa, path);
    if (i < 0) {
        cairn_seterr(err, errlen, "'%s' is not a spare of pool '%s'", path, spa->name);
        e = -ENOENT;
    } else if (spa_tree_leaf(spa, path)) {
        cairn_seterr(err, errlen, "cannot remove '%s': the spare is in use (detach it first)", path);
        e = -EBUSY;
    } else {
        spa_spare_phys_t saved = spa->spares[i];
        spare_drop(spa, (uint32_t)i);
        e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
        if (e) {
            cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
            memmove(&spa->spares[i + 1], &spa->spares[i], (spa->nspares - (uint32_t)i) * sizeof saved);
            spa->spares[i] = saved;
            spa->nspares++;
        } else {
            log_info("spa", "pool %s: spare %s removed", spa->name, path);
            spa_event_post(spa->name, "sysevent.fs.cairn.vdev_remove", "vdev=%s spare=1", path);
        }
    }
    pthread_mutex_unlock(&spa->config_lock);
    return e;
}

bool spa_is_spare(spa_t *spa, const char *path)
{
    pthread_mutex_lock(&spa->config_lock);
    bool is = spare_index(spa, path) >= 0;
    pthread_mutex_unlock(&spa->config_lock);
    return is;
}

size_t spa_spares_get(spa_t *spa, spa_spare_info_t *out, size_t max)
{
    pthread_mutex_lock(&spa->config_lock);
    size_t n = 0;
    for (uint32_t i = 0; i < spa->nspares && n < max; i++, n++) {
        cairn_strlcpy(out[n].path, spa->spares[i].path, sizeof out[n].path);
        out[n].in_use = spa_tree_leaf(spa, spa->spares[i].path) != NULL;
    }
    pthread_mutex_unlock(&spa->config_lock);
    return n;
}

bool spa_spare_listed(const spa_t *spa, const char *path) { return spare_index(spa, path) >= 0; }

/* Under config_lock: `stay`, a child of spare vdev sp, takes sp's place in the
 * tree; sp keeps only `leave` and is freed with the pool (a reader may hold
 * it), as is `leave`, whose I/O stops. */
static void spare_collapse(spa_t *spa, vdev_t *sp, vdev_t *stay, vdev_t *leave)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    vdev_t *parent = sp->parent;
    stay->parent = parent;
    stay->id = sp->id;
    __atomic_store_n(&parent->children[sp->id], stay, __ATOMIC_RELEASE);
    sp->children[0] = leave;
    sp->nchildren = 1;
    spa_vdev_retire(spa, sp);
    /* No more I/O from readers that still hold it; a FAULTED leaf stays FAULTED. */
    if (atomic_load(&leave->state) != VDEV_STATE_FAULTED)
        atomic_store(&leave->state, VDEV_STATE_UNAVAIL);
    atomic_store(&leave->stale, false);
}

vdev_t *spa_spare_step_aside(spa_t *spa, vdev_t *sp)
{
    vdev_t *failed = sp->children[0], *spare = sp->children[1];
    spare_collapse(spa, sp, spare, failed);
    log_info("spa", "pool %s: %s leaves; spare %s stands in until its replacement is whole",
             spa->name, failed->path ? failed->path : "?", spare->path ? spare->path : "?");
    return spare;
}

int spa_spare_detach_locked(spa_t *spa, vdev_t *leaf, char *err, size_t errlen)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    vdev_t *sp = leaf->parent, *failed = sp->children[0], *spare = sp->children[1];
    const char *path = leaf->path ? leaf->path : "?";
    if (leaf == spare && !spa_vdev_survives_without(vdev_top(sp), spare)) {
        cairn_seterr(err, errlen, "cannot detach '%s': no valid replicas", path);
        return -EBUSY;
    }
    if (leaf == spare) {
        /* The spare goes back to the list; the failed leaf stays where it was. */
        spare_collapse(spa, sp, failed, spare);
    } else {
        /* The failed leaf leaves: the spare is a member for good. */
        spare_collapse(spa, sp, spare, failed);
        int i = spare_index(spa, spare->path);
        if (i >= 0) spare_drop(spa, (uint32_t)i);
    }
    vdev_state_refresh(spa->root);
    int e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) {
        cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
        return e;
    }
    /* A returned spare carries no label, as an available one never does (the
     * others' configs no longer name it; a failing disk's labels are left). */
    if (leaf == spare && leaf->ops && leaf->ops != &vdev_gone_ops) {
        int ce = spa_label_clear(leaf);
        if (ce) log_warn("spa", "pool %s: cannot clear the labels of spare %s: %s", spa->name, path,
                         strerror(-ce));
    }
    log_info("spa", "pool %s: %s detached%s", spa->name, path,
             leaf == spare ? " (the spare is available again)" : "; its spare stays for good");
    spa_event_post(spa->name, "sysevent.fs.cairn.vdev_remove", "vdev=%s%s", path,
                   leaf == spare ? " spare=1" : "");
    return 0;
}

/* A data leaf out of service - FAULTED, or missing (UNAVAIL: not found at
 * import) - that no spare or replacement covers yet. */
static bool wants_spare(const vdev_t *leaf)
{
    int st = atomic_load(&leaf->state);
    const vdev_t *top = vdev_top((vdev_t *)leaf);
    return (st == VDEV_STATE_FAULTED || st == VDEV_STATE_UNAVAIL) && leaf->parent &&
           leaf->parent->type != VDEV_TYPE_REPLACING && top && top != leaf &&
           top->alloc_class != VDEV_CLASS_LOG;
}

void spa_spare_activate(spa_t *spa, const char *faulted_path)
{
    char cand[SPA_MAX_SPARES][SPA_PATH_MAX];
    uint32_t n = 0;
    pthread_mutex_lock(&spa->config_lock);
    vdev_t *leaf = spa_leaf_by_path(spa, faulted_path);
    bool wanted = leaf && wants_spare(leaf);
    for (uint32_t i = 0; wanted && i < spa->nspares; i++)
        if (!spa_tree_leaf(spa, spa->spares[i].path)) cairn_strlcpy(cand[n++], spa->spares[i].path, SPA_PATH_MAX);
    pthread_mutex_unlock(&spa->config_lock);
    for (uint32_t i = 0; i < n; i++) {
        char err[512] = "";
        /* Forced: the administrator accepted the device when adding it. */
        int e = spa_vdev_replace(spa, faulted_path, cand[i], true, false, err, sizeof err);
        if (!e) {
            log_warn("spa", "pool %s: spare %s steps in for %s", spa->name, cand[i], faulted_path);
            spa_event_post(spa->name, "sysevent.fs.cairn.vdev_spare", "vdev=%s spare=%s",
                           faulted_path, cand[i]);
            return;
        }
        log_warn("spa", "pool %s: spare %s cannot stand in for %s: %s", spa->name, cand[i],
                 faulted_path, err);
    }
}

typedef struct uncovered {
    char paths[SPA_MAX_SPARES][SPA_PATH_MAX];
    uint32_t n;
} uncovered_t;

static void note_uncovered(vdev_t *leaf, void *arg)
{
    uncovered_t *u = arg;
    if (u->n < SPA_MAX_SPARES && leaf->path && wants_spare(leaf))
        cairn_strlcpy(u->paths[u->n++], leaf->path, SPA_PATH_MAX);
}

void spa_spare_activate_all(spa_t *spa)
{
    if (spa->readonly) return;
    uncovered_t *u = cairn_zalloc(sizeof *u);
    pthread_mutex_lock(&spa->config_lock);
    if (spa->nspares) vdev_foreach_leaf(spa->root, note_uncovered, u);
    pthread_mutex_unlock(&spa->config_lock);
    for (uint32_t i = 0; i < u->n; i++) spa_spare_activate(spa, u->paths[i]);
    free(u);
}

void spa_spare_return_if_whole(spa_t *spa, vdev_t *leaf)
{
    vdev_t *sp = leaf->parent;
    if (!sp || sp->type != VDEV_TYPE_REPLACING || !sp->is_spare || sp->nchildren != 2 ||
        leaf != sp->children[0] || !vdev_leaf_readable(leaf) || leaf->ndtl ||
        atomic_load(&leaf->state) != VDEV_STATE_ONLINE)
        return;
    vdev_t *spare = sp->children[1];
    char err[512] = "";
    /* The original holds every block again: as in ZFS, the spare goes back to the list. */
    int e = spa_spare_detach_locked(spa, spare, err, sizeof err);
    if (e) log_warn("spa", "pool %s: spare %s stays in use: %s", spa->name,
                    spare->path ? spare->path : "?", err);
}
