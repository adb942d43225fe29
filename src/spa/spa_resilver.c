/*
 * Taking leaves out of a live pool and making them whole again: offline,
 * online, replace, attach, detach (API in include/cairn/spa.h).
 *
 * DIRTY TIME LOGS. Every leaf has a dirty time log (vdev_t.dtl): the txgs
 * whose blocks it may lack. A leaf going offline gets [synced + 1, inf): the
 * txg syncing and the open one may already have skipped it (a block of the
 * open txg can be written early, by the intent log), and every later one
 * will. Online closes the range at the txg open then, after the leaf takes
 * writes again, so every txg whose writes may have skipped it is named and
 * none after. A replacement leaf gets [1, open txg]: it holds nothing.
 *
 * STALE LEAVES. A leaf with a log and back in service is stale: it takes
 * every write but serves no read (vdev_leaf_readable), so a block it missed is
 * never read from it. The resilver (a scan of spa_scrub.c restricted to the
 * blocks born in the union of the stale leaves' logs) reads each such block
 * from the other children and writes the stale leaves' copies or raidz
 * columns (VDEV_READ_RESILVER); once a pass has walked every block and a
 * leaf's log did not grow meanwhile, its log is emptied and it serves reads.
 * Blocks born after the log's end go to the leaf by the normal writes.
 *
 * REPLACE. `replace OLD NEW` puts a replacing vdev in OLD's place holding OLD
 * and NEW, a mirror of the two: writes go to both, reads to OLD while NEW is
 * stale, and the resilver copies NEW's copies or columns from OLD when it
 * reads, else rebuilds them from the other children. A new disk at OLD's path
 * (`replace OLD`) means OLD is gone: it is taken out of service at once. When
 * NEW's resilver ends, NEW takes the replacing vdev's place and OLD's labels
 * are cleared (if it is another device). A leaf is never closed while the pool
 * runs (readers hold leaves without locks): OLD's device stays open until the
 * pool closes. Only a leaf of a mirror or raidz can be replaced or taken offline:
 * a lone disk has no other copy to rebuild from (attach a disk to it, then
 * detach the old one).
 *
 * ATTACH, DETACH. A new mirror side is a stale leaf with the log [1, open txg];
 * a disk becomes a 2-way mirror in its place, and a 2-way mirror that loses a
 * side becomes a disk again. Children arrays change under lock-free readers:
 * set_children publishes the new array before the count.
 *
 * SEQUENTIAL REBUILD. replace -s and attach -s ask (rebuild_asked) that the
 * resilver they start copy the mirror's allocated space in offset order
 * (spa_rebuild.c) rather than walk block pointers; the scan thread runs a
 * scrub after it. A raidz column cannot be copied from a sibling: refused.
 *
 * PERSISTENCE. Offline (without -t), the logs and the replacing vdev are in
 * the labels (the config's per-vdev extension, spa_label.c and
 * docs/ondisk-format.md; read back in spa_vdev_tree_from_config), written at every
 * change under the config lock. A pool opened with a stale leaf starts a
 * resilver from the beginning; a log left open-ended by a crash or a
 * temporary offline is closed at the first open txg.
 */
#include "spa_impl.h"

#include <cairn/assert.h>
#include <cairn/raidz.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct leaf_find {
    const char *path;
    bool named_only; /* skip the OLD side of a replacement */
    vdev_t *found;
} leaf_find_t;

static void find_leaf(vdev_t *leaf, void *arg)
{
    leaf_find_t *f = arg;
    /* The OLD side of a replacement is not named: it leaves with the replacement
     * (and at a reused path the name means NEW). */
    if (f->named_only && leaf->parent && leaf->parent->type == VDEV_TYPE_REPLACING &&
        !leaf->parent->is_spare && leaf != vdev_io_child(leaf->parent))
        return;
    if (!f->found && leaf->path && !strcmp(leaf->path, f->path)) f->found = leaf;
}

vdev_t *spa_tree_leaf(spa_t *spa, const char *path)
{
    leaf_find_t f = {.path = path, .named_only = false};
    vdev_foreach_leaf(spa->root, find_leaf, &f);
    return f.found;
}

vdev_t *spa_leaf_by_path(spa_t *spa, const char *path)
{
    leaf_find_t f = {.path = path, .named_only = true};
    vdev_foreach_leaf(spa->root, find_leaf, &f);
    return f.found;
}

/* Whether child c of a mirror or raidz serves reads once leaf `extra` no longer
 * does (a replacing vdev: while either side does). */
static bool child_readable_without(const vdev_t *c, const vdev_t *extra)
{
    if (c == extra) return false;
    if (c->type != VDEV_TYPE_REPLACING) return vdev_leaf_readable(c);
    for (uint32_t j = 0; j < c->nchildren; j++)
        if (c->children[j] != extra && vdev_leaf_readable(c->children[j])) return true;
    return false;
}

/* Children of top that cannot serve a read once `extra` does not. */
static uint32_t unreadable_children(vdev_t *top, vdev_t *extra)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < top->nchildren; i++) n += !child_readable_without(top->children[i], extra);
    return n;
}

/* Whether top still has a good copy of every block without leaf. */
bool spa_vdev_survives_without(vdev_t *top, vdev_t *leaf)
{
    if (top->type == VDEV_TYPE_MIRROR) return unreadable_children(top, leaf) < top->nchildren;
    if (top->type == VDEV_TYPE_RAIDZ) return unreadable_children(top, leaf) <= top->nparity;
    return false;
}

static int leaf_checks(spa_t *spa, const char *path, vdev_t **leafp, char *err, size_t errlen)
{
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        return -EROFS;
    }
    vdev_t *leaf = spa_leaf_by_path(spa, path);
    if (!leaf) {
        cairn_seterr(err, errlen, "no such device '%s' in pool '%s'", path, spa->name);
        return -ENOENT;
    }
    vdev_t *top = vdev_top(leaf);
    if (!top || top == leaf) {
        cairn_seterr(err, errlen, "'%s' is a single-device vdev: there is no other copy of its data "
               "(attach a new disk to it, then detach it)", path);
        return -ENOTSUP;
    }
    *leafp = leaf;
    return 0;
}

int spa_vdev_offline(spa_t *spa, const char *path, bool temporary, char *err, size_t errlen)
{
    pthread_mutex_lock(&spa->config_lock);
    vdev_t *leaf = NULL;
    int e = leaf_checks(spa, path, &leaf, err, errlen);
    if (e) goto out;
    if (atomic_load(&leaf->state) == VDEV_STATE_OFFLINE) {
        if (leaf->offline_persist == !temporary) goto out; /* nothing to change */
        leaf->offline_persist = !temporary;
    } else {
        if (!spa_vdev_survives_without(vdev_top(leaf), leaf)) {
            cairn_seterr(err, errlen, "cannot offline '%s': no valid replicas", path);
            e = -EBUSY;
            goto out;
        }
        uint64_t from = spa_last_synced_txg(spa) + 1;
        vdev_dtl_add(leaf, from, UINT64_MAX);
        leaf->offline_persist = !temporary;
        atomic_store(&leaf->state, VDEV_STATE_OFFLINE);
        vdev_state_refresh(spa->root);
    }
    e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
    else log_info("spa", "pool %s: %s offline%s", spa->name, path, temporary ? " (temporary)" : "");
    if (!e) spa_event_post(spa->name, "resource.fs.cairn.statechange", "vdev=%s state=OFFLINE", path);
out:
    pthread_mutex_unlock(&spa->config_lock);
    return e;
}

/* Under config_lock: a leaf turned stale; the resilver it needs dates from
 * now unless one is pending already. */
void spa_resilver_asked(spa_t *spa)
{
    CAIRN_ASSERT(cairn_mutex_held(&spa->config_lock));
    if (!spa->resilver_since) spa->resilver_since = cairn_wallclock_s();
}

/* A leaf's open-ended log ends at txg. */
void spa_dtl_close(vdev_t *leaf, uint64_t txg)
{
    for (uint32_t i = 0; i < leaf->ndtl; i++)
        if (leaf->dtl[i][1] == UINT64_MAX) leaf->dtl[i][1] = CAIRN_MAX(txg, leaf->dtl[i][0]);
}

int spa_vdev_online(spa_t *spa, const char *path, char *err, size_t errlen)
{
    pthread_mutex_lock(&spa->config_lock);
    vdev_t *leaf = NULL;
    int e = leaf_checks(spa, path, &leaf, err, errlen);
    if (e) goto out;
    int st = atomic_load(&leaf->state);
    if (st == VDEV_STATE_FAULTED || st == VDEV_STATE_DEGRADED) {
        e = spa_fault_reopen(spa, leaf, err, errlen); /* failed: back if it answers */
        if (e) goto out;
        goto back_in_service;
    }
    if (st == VDEV_STATE_UNAVAIL) {
        e = spa_probe_leaf_locked(spa, leaf, err, errlen); /* missing: back if it is there */
        if (e) goto out;
        goto back_in_service;
    }
    if (st != VDEV_STATE_OFFLINE) {
        if (st == VDEV_STATE_ONLINE) goto out;
        cairn_seterr(err, errlen, "cannot online '%s': the device is %s; replace it", path,
               vdev_state_name((vdev_state_t)st));
        e = -ENXIO;
        goto out;
    }
    leaf->offline_persist = false;
    if (leaf->ndtl) atomic_store(&leaf->stale, true); /* before it takes reads */
    atomic_store(&leaf->state, VDEV_STATE_ONLINE);
    /* Writes reach it from here on: the txg open now is the last it may have missed. */
    spa_dtl_close(leaf, spa_open_txg(spa));
    if (leaf->ndtl) spa_resilver_asked(spa);
back_in_service:
    vdev_state_refresh(spa->root);
    e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
    else log_info("spa", "pool %s: %s online", spa->name, path);
    if (!e) spa_event_post(spa->name, "resource.fs.cairn.statechange", "vdev=%s state=ONLINE", path);
out:
    pthread_mutex_unlock(&spa->config_lock);
    if (!e) spa_resilver_check(spa);
    return e;
}

/* OLD leaves service: no more I/O (its state says so to every path that
 * checks), but its device stays open - a reader may hold it this very moment -
 * until the pool closes. A healthy OLD shows OFFLINE, a failed one its state. */
static void old_out_of_service(vdev_t *old)
{
    if (atomic_load(&old->state) == VDEV_STATE_ONLINE) atomic_store(&old->state, VDEV_STATE_OFFLINE);
    atomic_store(&old->stale, false);
    old->offline_persist = false;
}

typedef struct retired_find {
    const char *path;
    vdev_t *found;
} retired_find_t;

static void find_retired_holder(vdev_t *leaf, void *arg)
{
    retired_find_t *f = arg;
    if (!f->found && leaf->path && !strcmp(leaf->path, f->path) && leaf->ops != &vdev_gone_ops &&
        vdev_leaf_holds_path(leaf))
        f->found = leaf;
}

/* A leaf that left the tree (a spare that stepped back out, a detached or
 * replaced disk) keeps its device open until the pool closes, since a reader
 * may hold it: NEW at its path, refused by that device's lock, takes the
 * device over (into *nl, *lent the retired leaf, to give it back should NEW be
 * refused). -EBUSY when no retired leaf holds what is at path. */
static int take_retired_device(spa_t *spa, const char *path, vdev_t **nl, vdev_t **lent)
{
    retired_find_t f = {.path = path};
    for (size_t i = 0; i < spa->nretired && !f.found; i++)
        vdev_foreach_leaf(spa->retired[i], find_retired_holder, &f);
    if (!f.found) return -EBUSY;
    vdev_free(*nl);
    *nl = vdev_alloc(VDEV_TYPE_LEAF, 0);
    (*nl)->path = cairn_strdup(path);
    atomic_store(&(*nl)->state, VDEV_STATE_ONLINE);
    vdev_leaf_take_device(*nl, f.found);
    *lent = f.found;
    return 0;
}

/* The leaf opened for NEW. When NEW is the very file OLD has open (rewritten in
 * place: its lock refuses a second open), NEW takes over OLD's open device and
 * OLD is left with ops that fail every I/O; *took tells the caller. */
static int open_new_leaf(spa_t *spa, vdev_t *old, const char *path, bool force, vdev_t **out,
                         bool *took, char *err, size_t errlen)
{
    bool same = old->path && !strcmp(old->path, path);
    *took = false;
    vdev_t *nl = NULL;
    int e = vdev_leaf_open(path, &nl);
    if (e == -EBUSY && same && old->ops && old->ops != &vdev_gone_ops && old->psize) {
        vdev_free(nl);
        nl = vdev_alloc(VDEV_TYPE_LEAF, 0);
        nl->path = cairn_strdup(path);
        nl->psize = old->psize;
        nl->leaf_priv = old->leaf_priv;
        nl->ops = old->ops;
        atomic_store(&nl->state, VDEV_STATE_ONLINE);
        *took = true;
        e = 0;
    }
    vdev_t *lent = NULL;
    if (e == -EBUSY) e = take_retired_device(spa, path, &nl, &lent);
    if (e) {
        cairn_seterr(err, errlen, "cannot open '%s': %s", path,
               e == -EBUSY ? "device is in use by another pool or process" : strerror(-e));
        if (nl) vdev_free(nl);
        return e;
    }
    nl->guid = cairn_random_guid();
    nl->ashift = old->ashift;
    if (!spa_leaf_fits(vdev_top(old), nl->psize)) {
        cairn_seterr(err, errlen, "device '%s' is too small", path);
        e = -EOVERFLOW;
    }
    if (!e) {
        leaf_scan_ctx_t lc = {.force = force, .err = err, .errlen = errlen};
        spa_check_new_leaf(nl, &lc);
        if (lc.error) {
            spa_config_phys_t *cfg = NULL;
            /* A label of this very pool (the old disk put back) is no foreign label. */
            bool ours = spa_label_read_config(nl, &cfg) == 0 && cfg->pool_guid == spa->guid;
            free(cfg);
            if (ours && err) err[0] = 0;
            else e = lc.error;
        }
    }
    if (e) {
        if (*took) { /* the device stays OLD's */
            nl->ops = NULL;
            nl->leaf_priv = NULL;
            *took = false;
        }
        if (lent) vdev_leaf_take_device(lent, nl); /* back where it was */
        vdev_free(nl);
        return e;
    }
    *out = nl;
    return 0;
}

bool spa_leaf_fits(const vdev_t *top, uint64_t psize)
{
    uint64_t need = top->type == VDEV_TYPE_RAIDZ ? top->asize / top->nchildren : top->asize;
    uint64_t have = CAIRN_P2ALIGN(vdev_leaf_data_size(psize), 1ULL << top->ashift);
    return psize >= VDEV_MIN_LEAF_SIZE && have >= need;
}

/* Refuses -s while a resilver runs (its own pass would take the new leaf). */
static int sequential_checks(spa_t *spa, bool sequential, char *err, size_t errlen)
{
    if (!sequential) return 0;
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    if (st.state == SPA_SCRUB_SCANNING && st.func == SPA_SCAN_RESILVER) {
        cairn_seterr(err, errlen, "cannot use -s while a resilver runs: wait for it or omit -s");
        return -EBUSY;
    }
    return 0;
}

int spa_vdev_replace(spa_t *spa, const char *old_path, const char *new_path, bool force,
                     bool sequential, char *err, size_t errlen)
{
    int se = sequential_checks(spa, sequential, err, errlen);
    if (se) return se;
    if (!new_path) new_path = old_path;
    if (strlen(new_path) >= SPA_PATH_MAX) {
        cairn_seterr(err, errlen, "device path too long");
        return -ENAMETOOLONG;
    }
    pthread_mutex_lock(&spa->config_lock);
    vdev_t *old = NULL, *nl = NULL;
    int e = leaf_checks(spa, old_path, &old, err, errlen);
    if (e) goto out;
    /* The failed side of a spare-N: the spare will be what NEW replaces. */
    vdev_t *spare_of = old->parent->is_spare && old == old->parent->children[0] ? old->parent : NULL;
    if (!spare_of && old->parent->type == VDEV_TYPE_REPLACING) {
        cairn_seterr(err, errlen, "'%s' is already being replaced", old_path);
        e = -EBUSY;
        goto out;
    }
    if (strcmp(new_path, old_path) && spa_leaf_by_path(spa, new_path)) {
        cairn_seterr(err, errlen, "device '%s' is already in pool '%s'", new_path, spa->name);
        e = -EEXIST;
        goto out;
    }
    vdev_t *top = vdev_top(old);
    if (sequential && top->type != VDEV_TYPE_MIRROR) {
        cairn_seterr(err, errlen, "cannot replace '%s' with -s: a sequential rebuild needs a mirror, "
                     "and '%s' is in a %s", old_path, old_path, vdev_type_name(top));
        e = -ENOTSUP;
        goto out;
    }
    /* A new disk at OLD's path means OLD is gone; otherwise OLD serves (reads
     * and writes) until NEW is whole, as a side of a mirror would. */
    bool same = !strcmp(new_path, old_path);
    if ((same || !vdev_leaf_readable(old)) && !spa_vdev_survives_without(top, old)) {
        cairn_seterr(err, errlen, "cannot replace '%s': no valid replicas", old_path);
        e = -EBUSY;
        goto out;
    }
    bool took = false;
    e = open_new_leaf(spa, old, new_path, force, &nl, &took, err, errlen);
    if (e) goto out;
    if (same) old_out_of_service(old);
    if (took) {
        /* Its device is NEW's now. leaf_priv stays: a reader that loaded the
         * old ops just before still finds the device open. */
        atomic_store(&old->state, VDEV_STATE_UNAVAIL);
        __atomic_store_n(&old->ops, &vdev_gone_ops, __ATOMIC_RELEASE);
    }
    if (spare_of) old = spa_spare_step_aside(spa, spare_of);
    vdev_t *parent = old->parent;
    uint32_t idx = old->id;
    vdev_t *rep = vdev_alloc(VDEV_TYPE_REPLACING, cairn_random_guid());
    rep->ashift = old->ashift;
    rep->parent = parent;
    rep->id = idx;
    rep->children = cairn_zalloc(2 * sizeof(vdev_t *));
    rep->children[0] = old;
    old->parent = rep;
    old->id = 0;
    rep->children[1] = nl;
    nl->parent = rep;
    nl->id = 1;
    rep->nchildren = 2;
    rep->is_spare = spa_spare_listed(spa, new_path); /* a spare taken in: spare-N, it stays */
    vdev_dtl_add(nl, 1, UINT64_MAX);
    atomic_store(&nl->stale, true);
    __atomic_store_n(&parent->children[idx], rep, __ATOMIC_RELEASE);
    /* Writes reach NEW from here on (the txg open now is the last it missed). */
    spa_dtl_close(nl, spa_open_txg(spa));
    spa_resilver_asked(spa);
    spa->rebuild_asked = sequential;
    vdev_state_refresh(spa->root);
    e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
    else log_info("spa", "pool %s: replacing %s with %s%s", spa->name, old_path, new_path,
                  sequential ? " (sequential rebuild)" : "");
    if (!e) spa_event_post(spa->name, "sysevent.fs.cairn.vdev_attach", "vdev=%s replacing=%s", new_path, old_path);
out:
    pthread_mutex_unlock(&spa->config_lock);
    if (!e) spa_resilver_check(spa);
    return e;
}

static void retire_mem(spa_t *spa, void *p)
{
    spa->retired_mem = cairn_realloc(spa->retired_mem, (spa->nretired_mem + 1) * sizeof(void *));
    spa->retired_mem[spa->nretired_mem++] = p;
}

/* A new children array for vd, published under readers that take
 * vd->children and vd->nchildren without a lock: the array first, with a
 * spare slot repeating a child so that a reader pairing it with the old, larger
 * count sees a side twice (harmless) rather than past the end; then the count.
 * The old array stays allocated until the pool closes. */
static void set_children(spa_t *spa, vdev_t *vd, vdev_t **kids, uint32_t n)
{
    uint32_t cap = CAIRN_MAX(n, vd->nchildren);
    vdev_t **arr = cairn_zalloc((cap + 1) * sizeof *arr);
    for (uint32_t i = 0; i <= cap; i++) arr[i] = kids[i < n ? i : n - 1];
    for (uint32_t i = 0; i < n; i++) {
        kids[i]->parent = vd;
        kids[i]->id = i;
    }
    vdev_t **old = vd->children;
    __atomic_store_n(&vd->children, arr, __ATOMIC_RELEASE);
    __atomic_store_n(&vd->nchildren, n, __ATOMIC_RELEASE);
    retire_mem(spa, old);
}

int spa_vdev_attach(spa_t *spa, const char *existing, const char *new_path, bool force,
                    bool sequential, char *err, size_t errlen)
{
    int se = sequential_checks(spa, sequential, err, errlen);
    if (se) return se;
    if (strlen(new_path) >= SPA_PATH_MAX) {
        cairn_seterr(err, errlen, "device path too long");
        return -ENAMETOOLONG;
    }
    pthread_mutex_lock(&spa->config_lock);
    int e = 0;
    vdev_t *leaf = NULL, *nl = NULL;
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        e = -EROFS;
        goto out;
    }
    leaf = spa_leaf_by_path(spa, existing);
    if (!leaf) {
        cairn_seterr(err, errlen, "no such device '%s' in pool '%s'", existing, spa->name);
        e = -ENOENT;
        goto out;
    }
    vdev_t *parent = leaf->parent;
    if (parent->type != VDEV_TYPE_ROOT && parent->type != VDEV_TYPE_MIRROR) {
        cairn_seterr(err, errlen, "can only attach to mirrors and top-level disks");
        e = -ENOTSUP;
        goto out;
    }
    if (spa_leaf_by_path(spa, new_path)) {
        cairn_seterr(err, errlen, "device '%s' is already in pool '%s'", new_path, spa->name);
        e = -EEXIST;
        goto out;
    }
    if (parent->type == VDEV_TYPE_MIRROR && parent->nchildren >= VDEV_MAX_CHILDREN) {
        cairn_seterr(err, errlen, "a mirror has at most %d sides", VDEV_MAX_CHILDREN);
        e = -EINVAL;
        goto out;
    }
    bool took = false;
    e = open_new_leaf(spa, leaf, new_path, force, &nl, &took, err, errlen);
    if (e) goto out;
    vdev_dtl_add(nl, 1, UINT64_MAX);
    atomic_store(&nl->stale, true);
    if (parent->type == VDEV_TYPE_ROOT) {
        /* A disk becomes a 2-way mirror in its place, with its id and space. */
        vdev_t *m = vdev_alloc(VDEV_TYPE_MIRROR, cairn_random_guid());
        m->ashift = leaf->ashift;
        m->asize = leaf->asize;
        m->alloc_class = leaf->alloc_class;
        m->id = leaf->id;
        m->parent = parent;
        m->children = cairn_zalloc(2 * sizeof(vdev_t *));
        m->children[0] = leaf;
        m->children[1] = nl;
        m->nchildren = 2;
        leaf->parent = m;
        leaf->id = 0;
        nl->parent = m;
        nl->id = 1;
        __atomic_store_n(&parent->children[m->id], m, __ATOMIC_RELEASE);
    } else {
        vdev_t **kids = cairn_zalloc((parent->nchildren + 1) * sizeof *kids);
        memcpy(kids, parent->children, parent->nchildren * sizeof *kids);
        kids[parent->nchildren] = nl;
        set_children(spa, parent, kids, parent->nchildren + 1);
        free(kids);
    }
    spa_dtl_close(nl, spa_open_txg(spa)); /* writes reach it from here on */
    spa_resilver_asked(spa);
    spa->rebuild_asked = sequential;
    vdev_state_refresh(spa->root);
    e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
    else log_info("spa", "pool %s: %s attached to %s%s", spa->name, new_path, existing,
                  sequential ? " (sequential rebuild)" : "");
    if (!e) spa_event_post(spa->name, "sysevent.fs.cairn.vdev_attach", "vdev=%s to=%s", new_path, existing);
out:
    pthread_mutex_unlock(&spa->config_lock);
    if (!e) spa_resilver_check(spa);
    return e;
}

int spa_vdev_detach(spa_t *spa, const char *path, char *err, size_t errlen)
{
    pthread_mutex_lock(&spa->config_lock);
    int e = 0;
    vdev_t *leaf = NULL;
    if (spa->readonly) {
        cairn_seterr(err, errlen, "pool '%s' is imported read-only", spa->name);
        e = -EROFS;
        goto out;
    }
    leaf = spa_leaf_by_path(spa, path);
    if (!leaf) {
        cairn_seterr(err, errlen, "no such device '%s' in pool '%s'", path, spa->name);
        e = -ENOENT;
        goto out;
    }
    vdev_t *m = leaf->parent;
    if (m->is_spare) {
        e = spa_spare_detach_locked(spa, leaf, err, errlen);
        goto out;
    }
    if (m->type == VDEV_TYPE_REPLACING) {
        cairn_seterr(err, errlen, "cannot detach '%s': it is being replaced", path);
        e = -EBUSY;
        goto out;
    }
    if (m->type != VDEV_TYPE_MIRROR) {
        cairn_seterr(err, errlen, "only a mirror's side can be detached");
        e = -ENOTSUP;
        goto out;
    }
    if (!spa_vdev_survives_without(m, leaf)) {
        cairn_seterr(err, errlen, "cannot detach '%s': no valid replicas", path);
        e = -EBUSY;
        goto out;
    }
    if (m->nchildren == 2) {
        vdev_t *other = m->children[leaf->id == 0 ? 1 : 0];
        if (other->type != VDEV_TYPE_LEAF) {
            cairn_seterr(err, errlen, "cannot detach '%s': its other side is being replaced", path);
            e = -EBUSY;
            goto out;
        }
        /* The remaining disk takes the mirror's place, id and space. */
        other->parent = m->parent;
        other->id = m->id;
        other->alloc_class = m->alloc_class;
        other->asize = m->asize;
        other->ashift = m->ashift;
        __atomic_store_n(&m->parent->children[m->id], other, __ATOMIC_RELEASE);
        m->children[0] = leaf; /* the mirror keeps only the detached side */
        m->nchildren = 1;
        spa_vdev_retire(spa, m);
    } else {
        vdev_t **kids = cairn_zalloc(m->nchildren * sizeof *kids);
        uint32_t n = 0;
        for (uint32_t i = 0; i < m->nchildren; i++)
            if (m->children[i] != leaf) kids[n++] = m->children[i];
        set_children(spa, m, kids, n);
        free(kids);
        spa_vdev_retire(spa, leaf);
    }
    atomic_store(&leaf->stale, false);
    vdev_state_refresh(spa->root);
    e = spa_config_write_all_locked(spa, SPA_STATE_ACTIVE);
    if (e) {
        cairn_seterr(err, errlen, "cannot write the labels of pool '%s': %s", spa->name, strerror(-e));
        goto out;
    }
    /* After the others carry a config without it, as removal does. */
    if (vdev_leaf_usable(leaf)) {
        int ce = spa_label_clear(leaf);
        if (ce) log_warn("spa", "pool %s: cannot clear the labels of detached %s: %s", spa->name,
                         path, strerror(-ce));
    }
    atomic_store(&leaf->state, VDEV_STATE_UNAVAIL); /* no more I/O from readers that hold it */
    log_info("spa", "pool %s: %s detached", spa->name, path);
    spa_event_post(spa->name, "sysevent.fs.cairn.vdev_remove", "vdev=%s", path);
out:
    pthread_mutex_unlock(&spa->config_lock);
    return e;
}

void spa_vdev_replace_done(spa_t *spa, vdev_t *leaf)
{
    vdev_t *rep = leaf->parent;
    if (!rep || rep->type != VDEV_TYPE_REPLACING || leaf != vdev_io_child(rep)) return;
    if (rep->is_spare) return; /* a spare stays until the failed leaf is replaced or detached */
    vdev_t *parent = rep->parent, *old = rep->children[0];
    old_out_of_service(old); /* no new I/O; readers that hold it still find it open */
    leaf->parent = parent;
    leaf->id = rep->id;
    __atomic_store_n(&parent->children[rep->id], leaf, __ATOMIC_RELEASE);
    rep->nchildren = 1; /* OLD only: freed with the pool (a reader may hold rep) */
    spa_vdev_retire(spa, rep);
    /* OLD, when it is another device that still says it is ours, is free now:
     * its labels are cleared through the handle the pool still has (it closes
     * with the pool) or, after an import, a fresh one. */
    if (old->path && leaf->path && strcmp(old->path, leaf->path)) {
        vdev_t *o = NULL;
        bool own = old->ops && old->ops != &vdev_gone_ops && old->psize;
        if (own) o = old;
        else if (vdev_leaf_open(old->path, &o) != 0 && o) {
            vdev_free(o);
            o = NULL;
        }
        if (o) {
            spa_config_phys_t *cfg = NULL;
            if (spa_label_read_config(o, &cfg) == 0 && cfg->pool_guid == spa->guid &&
                cfg->leaf_guid == old->guid)
                spa_label_clear(o);
            free(cfg);
            if (!own) vdev_free(o);
        }
    }
    log_info("spa", "pool %s: %s replaced by %s", spa->name, old->path ? old->path : "?",
             leaf->path ? leaf->path : "?");
    spa_event_post(spa->name, "sysevent.fs.cairn.vdev_remove", "vdev=%s replaced_by=%s",
                   old->path ? old->path : "?", leaf->path ? leaf->path : "?");
}

static void any_stale(vdev_t *leaf, void *arg)
{
    if (atomic_load(&leaf->stale) && vdev_leaf_usable(leaf)) *(bool *)arg = true;
}

static void open_fixup(vdev_t *leaf, void *arg)
{
    uint64_t txg = *(uint64_t *)arg;
    int st = atomic_load(&leaf->state);
    if (st == VDEV_STATE_OFFLINE || st == VDEV_STATE_FAULTED || !leaf->ndtl) return;
    spa_dtl_close(leaf, txg);
    atomic_store(&leaf->stale, true);
}

void spa_dtl_open_fixup(vdev_t *root, uint64_t open_txg)
{
    vdev_foreach_leaf(root, open_fixup, &open_txg);
}

void spa_resilver_check(spa_t *spa)
{
    if (spa->readonly) return;
    bool need = false;
    pthread_mutex_lock(&spa->config_lock);
    vdev_foreach_leaf(spa->root, any_stale, &need);
    pthread_mutex_unlock(&spa->config_lock);
    if (!need) return;
    spa_scrub_stat_t st;
    spa_scrub_get(spa, &st);
    /* A running resilver takes new stale leaves in its next pass; a scrub
     * gives way, as in ZFS. */
    pthread_mutex_lock(&spa->scrub_lock);
    bool running = spa->scrub.state == SPA_SCRUB_SCANNING && spa->scrub.func == SPA_SCAN_RESILVER;
    if (running) spa->resilver_again = true;
    pthread_mutex_unlock(&spa->scrub_lock);
    if (running) return;
    if (st.state == SPA_SCRUB_SCANNING) spa_scrub_stop(spa);
    int e = spa_scan_start(spa, SPA_SCAN_RESILVER);
    if (e && e != -EBUSY)
        log_warn("spa", "pool %s: cannot start a resilver: %s", spa->name, strerror(-e));
}

/* Hook points of the resilver's life, called by the scan thread (spa_scrub.c)
 * without locks: as it begins (resumed: going on from a saved position after a
 * restart or an import) and as it ends (finished: every stale leaf it served is
 * whole; else stopped by the pool's close). Leaves made whole pass through
 * spa_vdev_replace_done first. Events and spares hang here. */
void spa_resilver_began(spa_t *spa, bool resumed, bool sequential)
{
    (void)spa, (void)resumed, (void)sequential;
}

void spa_resilver_ended(spa_t *spa, bool finished, const spa_scrub_stat_t *st)
{
    (void)spa, (void)finished, (void)st;
}
