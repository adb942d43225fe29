/*
 * Datasets, snapshots and clones: the dataset tree, its persistence in the
 * MOS, and exact space accounting by birth txg and dead lists.
 *
 * THE TREE. Every dataset - a head (filesystem or volume) or a snapshot - is
 * one MOS object whose bonus buffer holds its bookkeeping (dsl_ds_phys_t:
 * type, guid, creation txg/time, parent, previous/next snapshot, origin, dead
 * list, byte counters). A registry ZAP (its object number kept by the DMU as
 * the pool's "root object") maps "<object>" to the dataset's short name; the
 * tree is rebuilt from the parent pointers when the pool opens and is then
 * kept in memory (a pool has thousands of datasets, not millions). Keeping
 * the short name and a parent pointer makes rename O(1): moving a subtree
 * rewrites one entry, not the names of every descendant. Each dataset's data
 * lives in a DMU object set named "$ds<object>" (the name never changes).
 * Local properties are a ZAP per head ("name" -> "value").
 *
 * CHANGES HAPPEN IN SYNCING CONTEXT. Every change to the tree (create,
 * destroy, rename, snapshot, rollback, clone, property set) is a task queued
 * for the open txg; the caller waits for that txg to sync. The DMU calls our
 * pool-sync hook for each txg after every object set wrote out its data and
 * before the MOS is written: there the tasks run one after another (so they
 * see each other's results and may still refuse), and their MOS updates are
 * part of the same txg as the data they describe. This is what makes a
 * snapshot exact (it records the head's root as of the end of its txg) and
 * atomic across `-r` (one task snapshots every head in one txg), and what
 * keeps the on-disk tree consistent after a crash: a txg either committed
 * all of it or none.
 *
 * SNAPSHOTS WITHOUT REFERENCE COUNTS. A head's object set carries block
 * hooks (dmu.h). born() adds a block to the head's counters. kill() removes
 * it and then decides: a block born after the head's newest snapshot
 * (prev_snap_txg) is referenced by nothing else and is freed at once;
 * otherwise a snapshot still references it and it is appended to the head's
 * dead list. Taking a snapshot S of head H in txg T: S gets H's root and
 * counters as of the end of T and H's dead list; H starts an empty one and
 * prev_snap_txg = T. Destroying snapshot S (previous P at txg p, next N -
 * a newer snapshot or the head): the entries of N's dead list born after p
 * were referenced by S alone and are freed; the others (still referenced by
 * P) stay, and S's dead list joins N's. The cost is that of the dead lists,
 * not of the snapshot's size. A clone is a head whose first root is a
 * snapshot's and whose prev_snap_txg starts at the origin's txg: blocks up
 * to it belong to the origin (killing one puts it on the clone's dead list,
 * which is simply dropped when the clone goes). Rollback destroys the head's
 * object set freeing only blocks born after the snapshot, starts a new one at
 * the snapshot's root and drops the head's dead list (those blocks are the
 * snapshot's, now the head's again).
 *
 * SPACE. Sizes are allocated bytes (all copies, what the pool spends),
 * deflated as zfs(8) counts them: on raidz, parity and padding are left out
 * in the proportion a 128 KiB block pays (spa_bp_dsize), so a 100 MiB file
 * uses about 100 MiB and quotas hold the user's data, not parity; the pool's
 * free space is deflated alike (spa_space_t.dfree).
 *   referenced(X)      bytes reachable from X's root (born - killed).
 *   usedbysnapshots(H) bytes of H's dead lists (its own and its snapshots')
 *                      born after its origin: what destroying every snapshot
 *                      of H would free.
 *   usedbydataset(H)   bytes H references that are H's own, i.e. all of
 *                      referenced(H) but what a clone still shares with its
 *                      origin O: referenced(H) - (referenced(O) - killed),
 *                      killed being the dead-list bytes (H's and its
 *                      snapshots') born up to the origin's txg. Blocks H
 *                      shares with its own snapshots are H's (so a snapshot
 *                      leaves `used` as it was, as in ZFS).
 *   usedbychildren(H)  sum over children C of max(used(C), reservation(C)).
 *   usedbyrefreservation(H) = max(0, refreservation - usedbydataset).
 *   used(H) = the sum of those four; used(snapshot S) = entries of the next
 *   dataset's dead list born after S's previous snapshot (what destroying S
 *   frees), logicalused(S) their logical sizes; written(X) = referenced(X) -
 *   referenced(P) + dead(X), with P the newest snapshot before X (or the
 *   origin; 0 without either): what P shares with X is all of P except what
 *   X killed. A head's written is also what usedbyrefreservation weighs the
 *   refreservation against: what the head alone references.
 * A snapshot remembers how far it has summed the next dataset's dead list,
 * which only grows until it is replaced or moved (dead_gen changes), so
 * reading used again costs the entries killed since, not the whole list.
 * These are maintained in the txg that changes them, so they are exact and
 * survive export, import and crashes.
 *
 * LOCKING. dp->lock guards the tree, properties, holds and the task queue;
 * the sync thread takes it to run tasks. It is never held while waiting for
 * a txg. The block hooks (one call per block, on the sync thread) touch only
 * counters, under dp->stat_lock.
 */
#include "dsl_impl.h"

#include <cairn/assert.h>
#include <cairn/log.h>
#include <cairn/util.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static dsl_pool_t *pools;

/* A block's size as datasets count it: allocated, all copies, deflated
 * (spa_bp_dsize: raidz parity and padding are not the user's). */
static uint64_t bp_dsize(dsl_pool_t *dp, const cairn_blkptr_t *bp)
{
    return spa_bp_dsize(dp->spa, bp);
}

/* A record of a plain object (file or volume data), as opposed to metadata. */
static bool bp_is_data(const cairn_blkptr_t *bp)
{
    return bp->type == CAIRN_BT_DATA && bp->level == 0;
}

/* A record's stored bytes as compressratio weighs them: whole 512-byte
 * sectors, the least a block takes (a 5-byte file is no 30x compression). */
static uint64_t bp_stored(const cairn_blkptr_t *bp)
{
    return ((uint64_t)bp->psize + 511) & ~511ULL;
}

static void objset_name(uint64_t obj, char *buf, size_t len)
{
    snprintf(buf, len, "$ds%" PRIu64, obj);
}

/* ---------------- nodes ---------------- */

void dsl_node_fullname(const dsl_node_t *n, char *buf, size_t len)
{
    if (n->phys.type == DSL_TYPE_SNAPSHOT) {
        dsl_node_fullname(n->parent, buf, len);
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "@%s", n->name);
        return;
    }
    if (!n->parent) {
        cairn_strlcpy(buf, n->name, len);
        return;
    }
    dsl_node_fullname(n->parent, buf, len);
    size_t l = strlen(buf);
    snprintf(buf + l, len - l, "/%s", n->name);
}

/* Index in dp->all of the first node whose object is >= obj. */
static size_t all_lower_bound(const dsl_pool_t *dp, uint64_t obj)
{
    size_t lo = 0, hi = dp->nall;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (dp->all[mid]->obj < obj) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Space numbers follow prev_snap and origin pointers on every check, so this
 * is a binary search, not a scan. */
dsl_node_t *dsl_node_by_obj(dsl_pool_t *dp, uint64_t obj)
{
    size_t i = all_lower_bound(dp, obj);
    return i < dp->nall && dp->all[i]->obj == obj ? dp->all[i] : NULL;
}

void dsl_reservers_changed(dsl_pool_t *dp) { dp->reservers_stale = true; }

static bool component_ok(const char *s, size_t len)
{
    if (len == 0) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':' || c == ' '))
            return false;
    }
    return !(len == 1 && s[0] == '.') && !(len == 2 && s[0] == '.' && s[1] == '.');
}

/* Syntax of a full name: components separated by '/', at most one "@snap" at the end. */
static bool name_valid(const char *name, bool allow_snap)
{
    if (!name || !*name || strlen(name) > DSL_NAME_MAX) return false;
    const char *at = strchr(name, '@');
    if (at && (!allow_snap || strchr(at + 1, '@') || strchr(at + 1, '/'))) return false;
    const char *end = at ? at : name + strlen(name);
    const char *p = name;
    while (p <= end) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q) q = end;
        if (!component_ok(p, (size_t)(q - p))) return false;
        p = q + 1;
    }
    if (at && !component_ok(at + 1, strlen(at + 1))) return false;
    return true;
}

static dsl_node_t *child_named(dsl_node_t *n, const char *s, size_t len)
{
    for (size_t i = 0; i < n->nchildren; i++)
        if (strlen(n->children[i]->name) == len && !memcmp(n->children[i]->name, s, len))
            return n->children[i];
    return NULL;
}

static dsl_node_t *snap_named(dsl_node_t *n, const char *s)
{
    for (size_t i = 0; i < n->nsnaps; i++)
        if (!strcmp(n->snaps[i]->name, s)) return n->snaps[i];
    return NULL;
}

dsl_node_t *dsl_lookup(dsl_pool_t *dp, const char *name)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    if (!name_valid(name, true) || !dp->root) return NULL;
    const char *at = strchr(name, '@');
    const char *end = at ? at : name + strlen(name);
    const char *slash = memchr(name, '/', (size_t)(end - name));
    const char *first_end = slash ? slash : end;
    if ((size_t)(first_end - name) != strlen(dp->root->name) ||
        memcmp(name, dp->root->name, (size_t)(first_end - name)))
        return NULL;
    dsl_node_t *n = dp->root;
    const char *p = first_end;
    while (p < end) {
        p++; /* '/' */
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q) q = end;
        n = child_named(n, p, (size_t)(q - p));
        if (!n) return NULL;
        p = q;
    }
    if (at) n = snap_named(n, at + 1);
    return n;
}

static void ptr_append(dsl_node_t ***arr, size_t *n, dsl_node_t *x)
{
    *arr = cairn_realloc(*arr, (*n + 1) * sizeof(**arr));
    (*arr)[(*n)++] = x;
}

static void ptr_remove(dsl_node_t **arr, size_t *n, dsl_node_t *x)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i] == x) {
            memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof(*arr));
            (*n)--;
            return;
        }
}

static dsl_node_t *node_new(dsl_pool_t *dp, uint64_t obj)
{
    dsl_node_t *n = cairn_zalloc(sizeof(*n));
    n->obj = obj;
    n->dp = dp;
    n->dead_gen = ++dp->dead_gen_seq;
    if (dp->nall == dp->capall) {
        dp->capall = dp->capall ? dp->capall * 2 : 16;
        dp->all = cairn_realloc(dp->all, dp->capall * sizeof(*dp->all));
    }
    size_t at = all_lower_bound(dp, obj);
    memmove(&dp->all[at + 1], &dp->all[at], (dp->nall - at) * sizeof(*dp->all));
    dp->all[at] = n;
    dp->nall++;
    dp->reservers_stale = true;
    return n;
}

static void node_free(dsl_pool_t *dp, dsl_node_t *n)
{
    size_t at = all_lower_bound(dp, n->obj);
    if (at < dp->nall && dp->all[at] == n) {
        memmove(&dp->all[at], &dp->all[at + 1], (dp->nall - at - 1) * sizeof(*dp->all));
        dp->nall--;
    }
    dp->reservers_stale = true;
    if (n->os) dmu_objset_close(n->os);
    dsl_prop_free_all(n);
    free(n->children);
    free(n->snaps);
    free(n->pending);
    free(n);
}

/* ---------------- block hooks (sync thread) ---------------- */

static void hook_born(objset_t *os, const cairn_blkptr_t *bp, uint64_t txg, void *arg)
{
    (void)os;
    (void)txg;
    dsl_node_t *n = arg;
    pthread_mutex_lock(&n->dp->stat_lock);
    n->phys.referenced += bp_dsize(n->dp, bp);
    n->phys.comp += bp->psize;
    n->phys.uncomp += bp->lsize;
    if (bp_is_data(bp)) {
        n->phys.data_comp += bp_stored(bp);
        n->phys.data_uncomp += bp->lsize;
    }
    n->dirty = true;
    pthread_mutex_unlock(&n->dp->stat_lock);
}

static void hook_kill(objset_t *os, const cairn_blkptr_t *bp, uint64_t txg, void *arg)
{
    (void)os;
    dsl_node_t *n = arg;
    dsl_pool_t *dp = n->dp;
    uint64_t asize = bp_dsize(dp, bp);
    pthread_mutex_lock(&dp->stat_lock);
    n->phys.referenced -= CAIRN_MIN(n->phys.referenced, asize);
    n->phys.comp -= CAIRN_MIN(n->phys.comp, (uint64_t)bp->psize);
    n->phys.uncomp -= CAIRN_MIN(n->phys.uncomp, (uint64_t)bp->lsize);
    if (bp_is_data(bp)) {
        n->phys.data_comp -= CAIRN_MIN(n->phys.data_comp, bp_stored(bp));
        n->phys.data_uncomp -= CAIRN_MIN(n->phys.data_uncomp, (uint64_t)bp->lsize);
    }
    n->dirty = true;
    bool shared = bp->birth_txg <= n->phys.prev_snap_txg;
    if (shared) {
        if (n->npending == n->cappending) {
            n->cappending = n->cappending ? n->cappending * 2 : 64;
            n->pending = cairn_realloc(n->pending, n->cappending * sizeof(*n->pending));
        }
        n->pending[n->npending++] = *bp;
        n->phys.dead_bytes += asize;
        n->phys.dead_comp += bp->psize;
        n->phys.dead_uncomp += bp->lsize;
        if (bp->birth_txg > n->phys.origin_txg) {
            n->phys.snapused += asize;
            n->phys.snapused_uncomp += bp->lsize;
        }
    }
    pthread_mutex_unlock(&dp->stat_lock);
    if (!shared) spa_block_free(dp->spa, txg, bp);
}

/* A head's blocks born up to its newest snapshot (a clone's: up to its origin)
 * are held there too. */
static uint64_t hook_shared_upto(objset_t *os, void *arg)
{
    (void)os;
    dsl_node_t *n = arg;
    pthread_mutex_lock(&n->dp->stat_lock);
    uint64_t txg = n->phys.prev_snap_txg;
    pthread_mutex_unlock(&n->dp->stat_lock);
    return txg;
}

static const dmu_objset_hooks_t dsl_hooks = {.born = hook_born, .kill = hook_kill,
                                             .shared_upto = hook_shared_upto};

/* Opens a node's object set (heads with the hooks, snapshots read-only). */
static int node_open_os(dsl_pool_t *dp, dsl_node_t *n)
{
    if (n->os) return 0;
    char osn[64];
    objset_name(n->obj, osn, sizeof(osn));
    int err = dmu_objset_open(dp->spa, osn, &n->os);
    if (err) {
        n->os = NULL;
        return err;
    }
    if (n->phys.type == DSL_TYPE_SNAPSHOT) dmu_objset_set_readonly(n->os, true);
    else dmu_objset_set_hooks(n->os, &dsl_hooks, n);
    char full[DSL_NAME_MAX + 1];
    dsl_node_fullname(n, full, sizeof full);
    dmu_objset_set_label(n->os, full); /* log lines about its blocks name the dataset */
    return 0;
}

/* ---------------- persistence (syncing context) ---------------- */

static const dmu_object_props_t mos_obj_props = {
    .recordsize = 128 * 1024, .compress = CAIRN_COMPRESS_LZ4,
    .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 2};

static int node_write_phys(dsl_pool_t *dp, dsl_node_t *n, dmu_tx_t *tx)
{
    pthread_mutex_lock(&dp->stat_lock);
    dsl_ds_phys_t ph = n->phys;
    n->dirty = false;
    pthread_mutex_unlock(&dp->stat_lock);
    return dmu_bonus_write(dp->mos, n->obj, &ph, sizeof(ph), tx);
}

/* Appends the pending dead-list entries of n to its dead-list object. */
static int node_flush_dead(dsl_pool_t *dp, dsl_node_t *n, dmu_tx_t *tx)
{
    pthread_mutex_lock(&dp->stat_lock);
    cairn_blkptr_t *v = n->pending;
    size_t cnt = n->npending;
    n->pending = NULL;
    n->npending = n->cappending = 0;
    pthread_mutex_unlock(&dp->stat_lock);
    if (!cnt) {
        free(v);
        return 0;
    }
    int err = 0;
    if (!n->phys.deadlist_obj) err = dmu_object_alloc(dp->mos, &mos_obj_props, &n->phys.deadlist_obj, tx);
    if (!err)
        err = dmu_write(dp->mos, n->phys.deadlist_obj, n->phys.dead_count * sizeof(cairn_blkptr_t),
                        cnt * sizeof(cairn_blkptr_t), v, tx);
    if (!err) n->phys.dead_count += cnt;
    n->dirty = true;
    free(v);
    return err;
}

/* Reads n's whole (flushed) dead list. */
static int dead_read(dsl_pool_t *dp, const dsl_node_t *n, cairn_blkptr_t **out, size_t *cnt)
{
    *out = NULL;
    *cnt = 0;
    if (!n->phys.deadlist_obj || !n->phys.dead_count) return 0;
    size_t c = n->phys.dead_count;
    cairn_blkptr_t *v = cairn_alloc_aligned(c * sizeof(*v));
    int err = dmu_read(dp->mos, n->phys.deadlist_obj, 0, c * sizeof(*v), v);
    if (err) {
        free(v);
        return err;
    }
    *out = v;
    *cnt = c;
    return 0;
}

/* Replaces n's dead list by v (syncing context); recomputes its byte sums. */
static int dead_replace(dsl_pool_t *dp, dsl_node_t *n, const cairn_blkptr_t *v, size_t cnt,
                        dmu_tx_t *tx)
{
    int err = 0;
    if (n->phys.deadlist_obj) {
        err = dmu_object_free(dp->mos, n->phys.deadlist_obj, tx);
        n->phys.deadlist_obj = 0;
    }
    n->phys.dead_count = 0;
    n->phys.dead_bytes = n->phys.dead_comp = n->phys.dead_uncomp = 0;
    n->dead_gen = ++dp->dead_gen_seq;
    for (size_t i = 0; i < cnt; i++) {
        n->phys.dead_bytes += bp_dsize(dp, &v[i]);
        n->phys.dead_comp += v[i].psize;
        n->phys.dead_uncomp += v[i].lsize;
    }
    if (!err && cnt) {
        err = dmu_object_alloc(dp->mos, &mos_obj_props, &n->phys.deadlist_obj, tx);
        if (!err) err = dmu_write(dp->mos, n->phys.deadlist_obj, 0, cnt * sizeof(*v), v, tx);
        if (!err) n->phys.dead_count = cnt;
    }
    n->dirty = true;
    return err;
}

/* ---------------- tasks ---------------- */

static int run_task(dsl_pool_t *dp, int (*fn)(dsl_pool_t *, void *, uint64_t), void *arg,
                    bool keeps_datasets)
{
    if (spa_readonly(dp->spa)) return -EROFS;
    /* A dataset task never meets the defragmenter's hold or a half-done window. */
    if (!keeps_datasets) dsl_defrag_fence(dp);
    dsl_task_t t = {.fn = fn, .arg = arg, .keeps_datasets = keeps_datasets};
    uint64_t txg = spa_tx_hold(dp->spa);
    pthread_mutex_lock(&dp->lock);
    t.txg = txg;
    dsl_task_t **pp = &dp->tasks;
    while (*pp) pp = &(*pp)->next;
    *pp = &t;
    pthread_mutex_unlock(&dp->lock);
    spa_tx_rele(dp->spa, txg);
    int err = spa_txg_wait_synced(dp->spa, txg);
    pthread_mutex_lock(&dp->lock);
    while (!t.done && !err) pthread_cond_wait(&dp->task_cv, &dp->lock);
    if (!t.done) {
        /* The pool failed or closed before the txg synced: take the task back. */
        for (pp = &dp->tasks; *pp; pp = &(*pp)->next)
            if (*pp == &t) {
                *pp = t.next;
                break;
            }
    }
    pthread_mutex_unlock(&dp->lock);
    if (!keeps_datasets) dsl_defrag_unfence(dp);
    /* A task that ran in a txg that then failed to reach the disks (a suspended
     * pool) changed nothing durable: its caller hears the failure. */
    return err ? err : t.result;
}

int dsl_run_task(dsl_pool_t *dp, int (*fn)(dsl_pool_t *, void *, uint64_t), void *arg)
{
    return run_task(dp, fn, arg, false);
}

int dsl_run_pool_task(dsl_pool_t *dp, int (*fn)(dsl_pool_t *, void *, uint64_t), void *arg)
{
    return run_task(dp, fn, arg, true);
}

/* A task's validation run now under the pool lock, as the sync thread would run
 * it; the task (check_only set in its argument) returns before changing anything. */
static int run_check(dsl_pool_t *dp, int (*fn)(dsl_pool_t *, void *, uint64_t), void *arg)
{
    if (spa_readonly(dp->spa)) return -EROFS;
    int err = dsl_pool_lock(dp);
    if (err) return err;
    err = fn(dp, arg, 0);
    pthread_mutex_unlock(&dp->lock);
    return err;
}

static dsl_pool_t *pool_of(spa_t *spa)
{
    pthread_mutex_lock(&pools_lock);
    dsl_pool_t *dp = pools;
    while (dp && dp->spa != spa) dp = dp->next_pool;
    pthread_mutex_unlock(&pools_lock);
    return dp;
}

static int dsl_pool_sync_hook(spa_t *spa, uint64_t txg)
{
    dsl_pool_t *dp = pool_of(spa);
    if (!dp) return 0;
    int err = 0;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    pthread_mutex_lock(&dp->lock);
    /* Dead-list entries of the blocks killed in txg first: tasks read them. */
    for (size_t i = 0; i < dp->nall && !err; i++) err = node_flush_dead(dp, dp->all[i], tx);
    while (!err && dp->tasks && dp->tasks->txg <= txg) {
        dsl_task_t *t = dp->tasks;
        dp->tasks = t->next;
        t->result = t->fn(dp, t->arg, txg);
        t->done = true;
        /* After the change: see dsl_dataset_get_props. */
        if (!t->keeps_datasets) atomic_fetch_add(&dp->props_gen, 1);
    }
    for (size_t i = 0; i < dp->nall && !err; i++) {
        dsl_node_t *n = dp->all[i];
        pthread_mutex_lock(&dp->stat_lock);
        bool d = n->dirty;
        pthread_mutex_unlock(&dp->stat_lock);
        if (d) err = node_write_phys(dp, n, tx);
    }
    pthread_cond_broadcast(&dp->task_cv);
    pthread_mutex_unlock(&dp->lock);
    dmu_tx_commit(tx);
    if (err) log_error("dsl", "pool %s: writing the dataset tree in txg %" PRIu64 " failed: %d",
                       spa_name(spa), txg, err);
    return err;
}

static pthread_once_t dsl_once = PTHREAD_ONCE_INIT;
static void dsl_register(void)
{
    dmu_init();
    dmu_register_pool_sync_hook(dsl_pool_sync_hook);
}
void dsl_init(void) { pthread_once(&dsl_once, dsl_register); }

/* ---------------- creating nodes (syncing context) ---------------- */

static int registry_add(dsl_pool_t *dp, dsl_node_t *n, dmu_tx_t *tx)
{
    char key[32];
    snprintf(key, sizeof(key), "%" PRIu64, n->obj);
    return zap_update(dp->mos, dp->registry, key, n->name, (uint32_t)strlen(n->name), tx);
}

/* A new node with its MOS object and DMU object set (root: NULL = empty). */
static int node_create(dsl_pool_t *dp, dmu_tx_t *tx, uint64_t txg, dsl_type_t type,
                       dsl_node_t *parent, const char *shortname, const cairn_blkptr_t *root,
                       dsl_node_t **out)
{
    static const dmu_object_props_t ds_props = {.recordsize = 512, .compress = CAIRN_COMPRESS_LZ4,
                                                .checksum = CAIRN_CHECKSUM_FLETCHER4, .copies = 2};
    uint64_t obj;
    int err = dmu_object_alloc(dp->mos, &ds_props, &obj, tx);
    if (err) return err;
    dsl_node_t *n = node_new(dp, obj);
    cairn_strlcpy(n->name, shortname, sizeof(n->name));
    n->phys.magic = DSL_PHYS_MAGIC;
    n->phys.type = type;
    n->phys.guid = cairn_random_guid();
    n->phys.creation_txg = txg;
    n->phys.creation_time = cairn_wallclock_s();
    n->phys.parent = parent ? parent->obj : 0;
    n->parent = parent;
    n->dirty = true;
    if (parent) {
        if (type == DSL_TYPE_SNAPSHOT) ptr_append(&parent->snaps, &parent->nsnaps, n);
        else ptr_append(&parent->children, &parent->nchildren, n);
    }
    char osn[64];
    objset_name(obj, osn, sizeof(osn));
    err = registry_add(dp, n, tx);
    if (!err) err = dmu_objset_create_sync(dp->spa, txg, osn, root, NULL);
    if (!err && type != DSL_TYPE_SNAPSHOT) err = node_open_os(dp, n);
    *out = n;
    return err;
}

/* Removes a node: its object set (freeing blocks born after keep_upto), dead
 * list, properties and MOS object. */
static int node_destroy(dsl_pool_t *dp, dsl_node_t *n, dmu_tx_t *tx, uint64_t txg,
                        uint64_t keep_upto)
{
    char osn[64], key[32];
    objset_name(n->obj, osn, sizeof(osn));
    if (n->os) {
        dmu_objset_set_hooks(n->os, NULL, NULL);
        dmu_objset_close(n->os);
        n->os = NULL;
    }
    int err = dmu_objset_destroy_sync(dp->spa, txg, osn, keep_upto);
    if (!err && n->phys.deadlist_obj) err = dmu_object_free(dp->mos, n->phys.deadlist_obj, tx);
    if (!err && n->phys.props_zap) err = zap_destroy(dp->mos, n->phys.props_zap, tx);
    snprintf(key, sizeof(key), "%" PRIu64, n->obj);
    if (!err) err = zap_remove(dp->mos, dp->registry, key, tx);
    if (!err) err = dmu_object_free(dp->mos, n->obj, tx);
    if (err) return err;
    if (n->parent) {
        if (n->phys.type == DSL_TYPE_SNAPSHOT) ptr_remove(n->parent->snaps, &n->parent->nsnaps, n);
        else ptr_remove(n->parent->children, &n->parent->nchildren, n);
    }
    node_free(dp, n);
    return 0;
}

/* ---------------- pool open / close ---------------- */

typedef struct root_task {
    const char *name;
} root_task_t;

static int task_create_root(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    root_task_t *rt = arg;
    if (dp->root) return 0;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err = dp->registry ? 0 : zap_create(dp->mos, &dp->registry, tx);
    if (!err) err = dmu_pool_set_root_obj(dp->spa, dp->registry, tx);
    dsl_node_t *n = NULL;
    if (!err) err = node_create(dp, tx, txg, DSL_TYPE_FILESYSTEM, NULL, rt->name, NULL, &n);
    if (!err) dp->root = n;
    dmu_tx_commit(tx);
    return err;
}

static int cmp_snap_txg(const void *a, const void *b)
{
    const dsl_node_t *x = *(dsl_node_t *const *)a, *y = *(dsl_node_t *const *)b;
    return x->phys.creation_txg < y->phys.creation_txg ? -1 : x->phys.creation_txg > y->phys.creation_txg;
}

static int pool_load(dsl_pool_t *dp)
{
    dp->registry = dmu_pool_root_obj(dp->spa);
    if (!dp->registry) return 0;
    zap_cursor_t zc;
    zap_entry_t *e = cairn_zalloc(sizeof(*e));
    zap_cursor_init(&zc, dp->mos, dp->registry, 0);
    int r, err = 0;
    while ((r = zap_cursor_next(&zc, e)) == 1) {
        uint64_t obj = strtoull(e->name, NULL, 10);
        dsl_node_t *n = node_new(dp, obj);
        uint32_t nl = CAIRN_MIN(e->value_len, (uint32_t)DSL_NAME_MAX);
        memcpy(n->name, e->value, nl);
        n->name[nl] = 0;
        uint32_t len = 0;
        err = dmu_bonus_read(dp->mos, obj, &n->phys, sizeof(n->phys), &len);
        if (!err && (len < sizeof(n->phys) || n->phys.magic != DSL_PHYS_MAGIC)) err = -EIO;
        if (err) break;
    }
    free(e);
    if (r < 0 && !err) err = r;
    if (err) return err;
    for (size_t i = 0; i < dp->nall && !err; i++) {
        dsl_node_t *n = dp->all[i];
        if (n->phys.parent) {
            n->parent = dsl_node_by_obj(dp, n->phys.parent);
            if (!n->parent) {
                log_error("dsl", "pool %s: dataset object %" PRIu64 " has a missing parent",
                          spa_name(dp->spa), n->obj);
                return -EIO;
            }
            if (n->phys.type == DSL_TYPE_SNAPSHOT) ptr_append(&n->parent->snaps, &n->parent->nsnaps, n);
            else ptr_append(&n->parent->children, &n->parent->nchildren, n);
        } else {
            dp->root = n;
        }
        err = dsl_prop_load(dp, n);
        if (!err && n->phys.type != DSL_TYPE_SNAPSHOT) err = node_open_os(dp, n);
    }
    for (size_t i = 0; i < dp->nall; i++)
        if (dp->all[i]->nsnaps > 1)
            qsort(dp->all[i]->snaps, dp->all[i]->nsnaps, sizeof(dsl_node_t *), cmp_snap_txg);
    return err;
}

static void pool_free(dsl_pool_t *dp)
{
    while (dp->nall) node_free(dp, dp->all[dp->nall - 1]);
    free(dp->all);
    free(dp->reservers);
    pthread_mutex_destroy(&dp->lock);
    pthread_mutex_destroy(&dp->stat_lock);
    pthread_cond_destroy(&dp->task_cv);
    pthread_cond_destroy(&dp->defrag_cv);
    free(dp);
}

int dsl_pool_open(spa_t *spa, dsl_pool_t **out)
{
    dsl_init();
    pthread_mutex_lock(&pools_lock);
    for (dsl_pool_t *p = pools; p; p = p->next_pool)
        if (p->spa == spa) {
            p->refcount++;
            pthread_mutex_unlock(&pools_lock);
            *out = p;
            return 0;
        }
    dsl_pool_t *dp = cairn_zalloc(sizeof(*dp));
    dp->spa = spa;
    dp->mos = dmu_pool_mos(spa);
    dp->refcount = 1;
    pthread_mutex_init(&dp->lock, NULL);
    atomic_store(&dp->props_gen, 1);
    pthread_mutex_init(&dp->stat_lock, NULL);
    pthread_cond_init(&dp->task_cv, NULL);
    pthread_cond_init(&dp->defrag_cv, NULL);
    if (!dp->mos) {
        pthread_mutex_unlock(&pools_lock);
        pool_free(dp);
        return -ENXIO;
    }
    /* Loaded before it is published, so the sync hook never sees half a tree. */
    int err = pool_load(dp);
    if (!err) {
        dp->next_pool = pools;
        pools = dp;
    }
    pthread_mutex_unlock(&pools_lock);
    if (!err && !dp->root) {
        if (spa_readonly(spa)) {
            err = -EROFS;
        } else {
            root_task_t rt = {spa_name(spa)};
            err = dsl_run_task(dp, task_create_root, &rt);
        }
    }
    if (err) {
        log_error("dsl", "pool %s: cannot open the dataset tree: %d", spa_name(spa), err);
        dsl_pool_close(dp);
        return err;
    }
    dsl_defrag_start(dp);
    *out = dp;
    return 0;
}

void dsl_pool_close(dsl_pool_t *dp)
{
    if (!dp) return;
    pthread_mutex_lock(&pools_lock);
    bool last = --dp->refcount == 0;
    pthread_mutex_unlock(&pools_lock);
    if (!last) return;
    /* First: the defragmenter writes through the hooks too. */
    dsl_defrag_stop(dp);
    /* Everything written so far must go through the hooks before they go away. */
    if (!spa_readonly(dp->spa)) spa_txg_wait_synced(dp->spa, 0);
    pthread_mutex_lock(&pools_lock);
    for (dsl_pool_t **pp = &pools; *pp; pp = &(*pp)->next_pool)
        if (*pp == dp) {
            *pp = dp->next_pool;
            break;
        }
    pthread_mutex_unlock(&pools_lock);
    for (size_t i = 0; i < dp->nall; i++)
        if (dp->all[i]->os && dp->all[i]->phys.type != DSL_TYPE_SNAPSHOT)
            dmu_objset_set_hooks(dp->all[i]->os, NULL, NULL);
    pool_free(dp);
}

spa_t *dsl_pool_spa(dsl_pool_t *dp) { return dp->spa; }

/* ---------------- space ---------------- */

static uint64_t node_prev_referenced(dsl_pool_t *dp, const dsl_node_t *n)
{
    uint64_t po = n->phys.prev_snap ? n->phys.prev_snap : n->phys.origin;
    dsl_node_t *p = po ? dsl_node_by_obj(dp, po) : NULL;
    return p ? p->phys.referenced : 0;
}

static void unique_add(dsl_pool_t *dp, dsl_unique_cache_t *c, const cairn_blkptr_t *bp)
{
    if (bp->birth_txg > c->lo_txg && bp->birth_txg <= c->hi_txg) {
        c->bytes += bp_dsize(dp, bp);
        c->logical += bp->lsize;
    }
}

/* The entries of the next dataset's dead list born in (prev_snap_txg, txg]:
 * what destroying snapshot S frees (*logical: their sizes before compression).
 * dp->lock held, so the list is not flushed or replaced meanwhile; only
 * entries added since the last call are read. */
static uint64_t snap_unique(dsl_pool_t *dp, dsl_node_t *s, uint64_t *logical)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    dsl_node_t *next = s->phys.next_snap ? dsl_node_by_obj(dp, s->phys.next_snap) : s->parent;
    *logical = 0;
    if (!next) return 0;
    dsl_unique_cache_t *c = &s->unique;
    if (!c->valid || c->next_obj != next->obj || c->next_dead_gen != next->dead_gen ||
        c->lo_txg != s->phys.prev_snap_txg || c->hi_txg != s->phys.creation_txg) {
        *c = (dsl_unique_cache_t){.next_obj = next->obj, .next_dead_gen = next->dead_gen,
                                  .lo_txg = s->phys.prev_snap_txg,
                                  .hi_txg = s->phys.creation_txg};
    }
    uint64_t flushed = next->phys.dead_count;
    c->valid = true;
    if (c->counted < flushed && next->phys.deadlist_obj) {
        size_t cnt = (size_t)(flushed - c->counted);
        cairn_blkptr_t *v = cairn_alloc_aligned(cnt * sizeof(*v));
        if (dmu_read(dp->mos, next->phys.deadlist_obj, c->counted * sizeof(*v), cnt * sizeof(*v),
                     v) == 0) {
            for (size_t i = 0; i < cnt; i++) unique_add(dp, c, &v[i]);
            c->counted = flushed;
        } else {
            c->valid = false; /* read again next time; this answer is short */
        }
        free(v);
    }
    /* Entries killed in the txgs not yet flushed. */
    pthread_mutex_lock(&dp->stat_lock);
    if (c->valid)
        for (; c->counted < flushed + next->npending; c->counted++)
            unique_add(dp, c, &next->pending[c->counted - flushed]);
    pthread_mutex_unlock(&dp->stat_lock);
    *logical = c->logical;
    return c->bytes;
}

static uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* usedbydataset of head n: what it references less what a clone still shares
 * with its origin (dp->lock held; reads stat_lock). */
static uint64_t node_own_referenced(dsl_pool_t *dp, const dsl_node_t *n, uint64_t *logical)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    dsl_node_t *o = n->phys.origin ? dsl_node_by_obj(dp, n->phys.origin) : NULL;
    pthread_mutex_lock(&dp->stat_lock);
    uint64_t own = n->phys.referenced;
    *logical = n->phys.uncomp;
    if (o) {
        /* Every dead-list entry of the clone's chain born after the origin is
         * in snapused; the rest are origin blocks the clone no longer
         * references. */
        uint64_t dead = n->phys.dead_bytes, dead_uncomp = n->phys.dead_uncomp;
        for (size_t i = 0; i < n->nsnaps; i++) {
            dead += n->snaps[i]->phys.dead_bytes;
            dead_uncomp += n->snaps[i]->phys.dead_uncomp;
        }
        own = sub0(own + sub0(dead, n->phys.snapused), o->phys.referenced);
        *logical = sub0(*logical + sub0(dead_uncomp, n->phys.snapused_uncomp), o->phys.uncomp);
    }
    pthread_mutex_unlock(&dp->stat_lock);
    return own;
}

static void node_space_raw(dsl_pool_t *dp, dsl_node_t *n, dsl_space_t *o)
{
    memset(o, 0, sizeof(*o));
    pthread_mutex_lock(&dp->stat_lock);
    dsl_ds_phys_t ph = n->phys;
    pthread_mutex_unlock(&dp->stat_lock);
    uint64_t prevref = node_prev_referenced(dp, n);
    uint64_t unique = sub0(ph.referenced + ph.dead_bytes, prevref);
    o->referenced = ph.referenced;
    o->logicalreferenced = ph.uncomp;
    o->comp = o->refcomp = ph.data_comp;
    o->uncomp = o->refuncomp = ph.data_uncomp;
    o->written = unique;
    if (ph.type == DSL_TYPE_SNAPSHOT) {
        o->used = snap_unique(dp, n, &o->logicalused);
        return;
    }
    uint64_t logical;
    o->usedbydataset = node_own_referenced(dp, n, &logical);
    o->usedbysnapshots = ph.snapused;
    logical += ph.snapused_uncomp;
    for (size_t i = 0; i < n->nchildren; i++) {
        dsl_space_t c;
        node_space_raw(dp, n->children[i], &c);
        uint64_t resv = dsl_prop_num(dp, n->children[i], "reservation");
        o->usedbychildren += CAIRN_MAX(c.used, resv);
        logical += c.logicalused;
        o->comp += c.comp;
        o->uncomp += c.uncomp;
    }
    uint64_t refresv = dsl_prop_num(dp, n, "refreservation");
    o->usedbyrefreservation = sub0(refresv, unique);
    o->used = o->usedbydataset + o->usedbysnapshots + o->usedbychildren + o->usedbyrefreservation;
    o->logicalused = logical;
}

/* Space the txgs not yet synced will allocate in n's object set (estimated
 * from above by the DMU), and with `tree` in its descendants' too. */
static uint64_t node_pending(const dsl_node_t *n, bool tree)
{
    uint64_t p = n->os && n->phys.type != DSL_TYPE_SNAPSHOT ? dmu_objset_space_pending(n->os) : 0;
    for (size_t i = 0; tree && i < n->nchildren; i++) p += node_pending(n->children[i], true);
    return p;
}

/* Reserved but not allocated, over the whole pool: refreservations not yet
 * used by their datasets and reservations not yet used (with pending, space
 * the live txgs will allocate counts as used). Only heads with a local
 * (ref)reservation can contribute (neither property inherits), so the sum runs
 * over those, not over the tree: every write checks space. */
static uint64_t pool_unused_reservations(dsl_pool_t *dp, bool pending)
{
    if (dp->reservers_stale) {
        dp->nreservers = 0;
        dp->reservers = cairn_realloc(dp->reservers, (dp->nall + 1) * sizeof(*dp->reservers));
        for (size_t i = 0; i < dp->nall; i++) {
            dsl_node_t *n = dp->all[i];
            if (n->phys.type != DSL_TYPE_SNAPSHOT &&
                (dsl_prop_local(n, "reservation") || dsl_prop_local(n, "refreservation")))
                dp->reservers[dp->nreservers++] = n;
        }
        dp->reservers_stale = false;
    }
    uint64_t r = 0;
    for (size_t i = 0; i < dp->nreservers; i++) {
        dsl_node_t *n = dp->reservers[i];
        dsl_space_t s;
        node_space_raw(dp, n, &s);
        uint64_t self = pending ? node_pending(n, false) : 0;
        uint64_t tree = pending ? node_pending(n, true) : 0;
        r += sub0(s.usedbyrefreservation, self) +
             sub0(dsl_prop_num(dp, n, "reservation"), s.used + tree);
    }
    return r;
}

/* Available to n: the pool's free space less its slop and everyone's unused
 * reservations, plus those n may use itself (its own and its ancestors'),
 * capped by quotas. *quota_bound tells whether a quota is what limits it.
 * Ancestors' space is only summed where they have a reservation or quota: the
 * root's `used` covers the whole tree.
 *
 * With pending (the write checks), what the txgs not yet synced will allocate
 * counts as used already, the pool's and each dataset's: without it a quota
 * held only for synced data and writes ran ahead of a full pool until a sync
 * failed for want of space. The slop keeps room for what a sync allocates
 * beyond the estimates (dnode blocks, the MOS, the space map log) and for the
 * metadata a remove needs on a full pool; `available` as shown leaves pending
 * out (it describes what is on disk) but not the slop. */
static uint64_t node_available(dsl_pool_t *dp, dsl_node_t *n, bool *quota_bound, bool pending)
{
    if (n->phys.type == DSL_TYPE_SNAPSHOT) n = n->parent;
    spa_space_t ss;
    spa_get_space(dp->spa, &ss);
    uint64_t pool_pending = pending ? spa_space_pending(dp->spa) : 0;
    /* Deflated, as everything here: the slop in proportion. */
    uint64_t slop = ss.size ? (uint64_t)((unsigned __int128)spa_slop(dp->spa) * ss.dsize / ss.size) : 0;
    uint64_t avail = sub0(ss.dfree, slop + pool_pending + pool_unused_reservations(dp, pending));
    pthread_mutex_lock(&dp->stat_lock);
    uint64_t referenced = n->phys.referenced, dead = n->phys.dead_bytes;
    pthread_mutex_unlock(&dp->stat_lock);
    uint64_t self_pending = pending ? node_pending(n, false) : 0;
    referenced += self_pending;
    uint64_t refresv = dsl_prop_num(dp, n, "refreservation");
    if (refresv) avail += sub0(refresv, sub0(referenced + dead, node_prev_referenced(dp, n)));
    if (quota_bound) *quota_bound = false;
    uint64_t quota_left = UINT64_MAX;
    bool quota_seen = false;
    for (dsl_node_t *a = n; a; a = a->parent) {
        uint64_t resv = dsl_prop_num(dp, a, "reservation");
        uint64_t q = dsl_prop_num(dp, a, "quota");
        if (!resv && !q) continue;
        dsl_space_t as;
        node_space_raw(dp, a, &as);
        uint64_t used = as.used + (pending ? node_pending(a, true) : 0);
        avail += sub0(resv, used);
        if (q) {
            quota_left = CAIRN_MIN(quota_left, sub0(q, used));
            quota_seen = true;
        }
    }
    if (quota_seen && quota_left < avail) {
        avail = quota_left;
        if (quota_bound) *quota_bound = true;
    }
    uint64_t rq = dsl_prop_num(dp, n, "refquota");
    if (rq) {
        uint64_t left = sub0(rq, referenced);
        if (left < avail) {
            avail = left;
            if (quota_bound) *quota_bound = true;
        }
    }
    return avail;
}

void dsl_node_space(dsl_pool_t *dp, dsl_node_t *n, dsl_space_t *out)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    node_space_raw(dp, n, out);
    out->available = node_available(dp, n, NULL, false);
}

int dsl_space_check_limit(dsl_pool_t *dp, dsl_node_t *n, const char *prop, uint64_t v,
                          char *err, size_t errlen)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    char fn[DSL_NAME_MAX + 1], have[32], want[32];
    dsl_node_fullname(n, fn, sizeof(fn));
    cairn_format_size(v, want, sizeof(want));
    bool quota = !strcmp(prop, "quota"), refquota = !strcmp(prop, "refquota");
    bool resv = !strcmp(prop, "reservation"), refresv = !strcmp(prop, "refreservation");
    if (!v || !(quota || refquota || resv || refresv)) return 0;
    dsl_space_t s;
    node_space_raw(dp, n, &s);
    /* Pending writes count: a limit set under them would be crossed by the
     * next sync. */
    uint64_t pending = node_pending(n, quota || resv);
    if (quota || refquota) {
        uint64_t cur = (quota ? s.used : s.referenced) + pending;
        if (v < cur) {
            cairn_format_size(cur, have, sizeof(have));
            cairn_seterr(err, errlen, "%s=%s is less than what %s %s now (%s)", prop, want, fn,
                   quota ? "uses" : "references", have);
            return -EINVAL;
        }
        return 0;
    }
    /* A reservation takes from the pool what is not used yet: what it adds to
     * what the dataset already holds (used, or the head's own bytes for a
     * refreservation) or reserves must be available. */
    uint64_t old = dsl_prop_num(dp, n, prop);
    uint64_t held = resv ? s.used + pending : s.written + node_pending(n, false);
    uint64_t extra = sub0(v, CAIRN_MAX(held, old));
    /* n's available includes the unused part of its own (ref)reservation,
     * which is already set aside and cannot pay for more of it. */
    uint64_t avail = sub0(node_available(dp, n, NULL, true), sub0(old, held));
    if (extra > avail) {
        char more[32];
        cairn_format_size(avail, have, sizeof(have));
        cairn_format_size(extra, more, sizeof(more));
        cairn_seterr(err, errlen, "%s=%s needs %s more for %s and only %s is available", prop, want,
               more, fn, have);
        return -ENOSPC;
    }
    return 0;
}

/* ---------------- create ---------------- */

typedef struct create_task {
    char name[DSL_NAME_MAX + 1];
    dsl_type_t type;
    bool create_parents;
    dsl_prop_pair_t *props; /* normalised */
    size_t nprops;
    const char *clone_of;   /* clone: origin snapshot */
    char *err;
    size_t errlen;
} create_task_t;

/* Creates the head `name` (parents too with create_parents). */
static int task_create(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    create_task_t *ct = arg;
    if (dsl_lookup(dp, ct->name)) {
        cairn_seterr(ct->err, ct->errlen, "dataset already exists: %s", ct->name);
        return -EEXIST;
    }
    dsl_node_t *origin = NULL;
    if (ct->clone_of) {
        origin = dsl_lookup(dp, ct->clone_of);
        if (!origin || origin->phys.type != DSL_TYPE_SNAPSHOT) {
            cairn_seterr(ct->err, ct->errlen, "no such snapshot: %s", ct->clone_of);
            return -ENOENT;
        }
    }
    char *slash = strrchr(ct->name, '/');
    if (!slash) {
        cairn_seterr(ct->err, ct->errlen, "cannot create %s: the pool's root dataset exists already",
               ct->name);
        return -EEXIST;
    }
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err = 0;
    /* Find or make the parent chain. */
    char pname[DSL_NAME_MAX + 1];
    cairn_strlcpy(pname, ct->name, sizeof(pname));
    pname[slash - ct->name] = 0;
    dsl_node_t *parent = dsl_lookup(dp, pname);
    if (!parent) {
        if (!ct->create_parents) {
            cairn_seterr(ct->err, ct->errlen, "parent does not exist: %s (use -p)", pname);
            err = -ENOENT;
            goto out;
        }
        /* Walk down from the root, creating what is missing. */
        size_t rl = strlen(dp->root->name);
        if (strncmp(pname, dp->root->name, rl) || (pname[rl] && pname[rl] != '/')) {
            cairn_seterr(ct->err, ct->errlen, "no such pool: %s", pname);
            err = -ENOENT;
            goto out;
        }
        dsl_node_t *cur = dp->root;
        const char *p = pname + rl;
        while (*p && !err) {
            p++;
            const char *q = strchr(p, '/');
            size_t l = q ? (size_t)(q - p) : strlen(p);
            dsl_node_t *c = child_named(cur, p, l);
            if (!c) {
                char shortn[DSL_NAME_MAX + 1];
                memcpy(shortn, p, l);
                shortn[l] = 0;
                if (cur->phys.type != DSL_TYPE_FILESYSTEM) {
                    cairn_seterr(ct->err, ct->errlen, "parent is not a filesystem: %s", cur->name);
                    err = -ENOTDIR;
                    break;
                }
                err = node_create(dp, tx, txg, DSL_TYPE_FILESYSTEM, cur, shortn, NULL, &c);
            }
            cur = c;
            p += l;
        }
        parent = cur;
        if (err) goto out;
    }
    if (parent->phys.type != DSL_TYPE_FILESYSTEM) {
        cairn_seterr(ct->err, ct->errlen, "parent is not a filesystem: %s", pname);
        err = -ENOTDIR;
        goto out;
    }
    cairn_blkptr_t root;
    memset(&root, 0, sizeof(root));
    if (origin) {
        char osn[64];
        objset_name(origin->obj, osn, sizeof(osn));
        objset_t *oos;
        err = dmu_objset_open(dp->spa, osn, &oos);
        if (err) goto out;
        dmu_objset_root(oos, &root);
        dmu_objset_close(oos);
    }
    /* A thick volume (refreservation) or a reservation given at creation
     * must fit what the parent has available, or it would starve everyone. */
    for (size_t i = 0; i < ct->nprops && !err; i++) {
        bool rr = !strcmp(ct->props[i].name, "refreservation");
        if (!rr && strcmp(ct->props[i].name, "reservation")) continue;
        uint64_t want = strtoull(ct->props[i].value, NULL, 10);
        uint64_t avail = node_available(dp, parent, NULL, true);
        if (want > avail) {
            char a[32], w[32];
            cairn_format_size(avail, a, sizeof(a));
            cairn_format_size(want, w, sizeof(w));
            if (rr && ct->type == DSL_TYPE_VOLUME)
                cairn_seterr(ct->err, ct->errlen,
                       "a volume of %s reserves its size and only %s is available (-s makes a "
                       "sparse volume)",
                       w, a);
            else
                cairn_seterr(ct->err, ct->errlen, "%s=%s is more than the %s available",
                       ct->props[i].name, w, a);
            err = -ENOSPC;
        }
    }
    if (err) goto out;
    dsl_node_t *n;
    err = node_create(dp, tx, txg, ct->type, parent, slash + 1, origin ? &root : NULL, &n);
    if (err) goto out;
    if (origin) {
        n->phys.origin = origin->obj;
        n->phys.origin_txg = origin->phys.creation_txg;
        n->phys.prev_snap_txg = origin->phys.creation_txg;
        n->phys.referenced = origin->phys.referenced;
        n->phys.comp = origin->phys.comp;
        n->phys.uncomp = origin->phys.uncomp;
        n->phys.data_comp = origin->phys.data_comp;
        n->phys.data_uncomp = origin->phys.data_uncomp;
        origin->phys.num_clones++;
        origin->dirty = true;
        /* A volume's clone has its origin's size and block size (a clone
         * of size 0 would lose its data at the first resize, which frees
         * what lies beyond the old end); thin, as ZFS makes clones. */
        if (ct->type == DSL_TYPE_VOLUME) {
            char v[32];
            uint64_t vs = origin->phys.snap_volsize ? origin->phys.snap_volsize
                                                    : dsl_prop_num(dp, origin->parent, "volsize");
            snprintf(v, sizeof(v), "%" PRIu64, vs);
            err = dsl_prop_store(dp, n, "volsize", v, tx);
            snprintf(v, sizeof(v), "%" PRIu64, dsl_prop_num(dp, origin->parent, "volblocksize"));
            if (!err) err = dsl_prop_store(dp, n, "volblocksize", v, tx);
        }
    }
    for (size_t i = 0; i < ct->nprops && !err; i++)
        err = dsl_prop_store(dp, n, ct->props[i].name, ct->props[i].value, tx);
out:
    dmu_tx_commit(tx);
    return err;
}

static void free_pairs(dsl_prop_pair_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)v[i].name);
        free((char *)v[i].value);
    }
    free(v);
}

/* Validates -o properties into normalised copies. */
static int normalise_props(dsl_type_t type, const dsl_prop_pair_t *in, size_t n,
                           dsl_prop_pair_t **out, size_t *nout, char *err, size_t errlen)
{
    dsl_prop_pair_t *v = cairn_zalloc((n + 3) * sizeof(*v));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char norm[DSL_PROP_VALUE_MAX];
        int e = dsl_prop_validate(NULL, type, in[i].name, in[i].value, true, norm, sizeof(norm),
                                  err, errlen);
        if (e) {
            free_pairs(v, k);
            return e;
        }
        v[k].name = cairn_strdup(in[i].name);
        v[k].value = cairn_strdup(norm);
        k++;
    }
    *out = v;
    *nout = k;
    return 0;
}

int dsl_dataset_create(dsl_pool_t *dp, const char *name, const dsl_create_opts_t *opts,
                       char *err, size_t errlen)
{
    if (!name_valid(name, false)) {
        cairn_seterr(err, errlen, "invalid dataset name: %s", name ? name : "(null)");
        return -EINVAL;
    }
    if (!opts || (opts->type != DSL_TYPE_FILESYSTEM && opts->type != DSL_TYPE_VOLUME)) {
        cairn_seterr(err, errlen, "cannot create %s: type must be filesystem or volume", name);
        return -EINVAL;
    }
    create_task_t ct = {.type = opts->type, .create_parents = opts->create_parents,
                        .err = err, .errlen = errlen};
    cairn_strlcpy(ct.name, name, sizeof(ct.name));
    int e = normalise_props(opts->type, opts->props, opts->nprops, &ct.props, &ct.nprops, err,
                            errlen);
    if (e) return e;
    if (opts->type == DSL_TYPE_VOLUME) {
        uint32_t vbs = opts->volblocksize ? opts->volblocksize : 8192;
        char buf[32], norm[64];
        snprintf(buf, sizeof(buf), "%u", vbs);
        e = dsl_prop_validate(NULL, DSL_TYPE_VOLUME, "volblocksize", buf, true, norm, sizeof(norm),
                              err, errlen);
        if (!e && (opts->volsize == 0 || opts->volsize % vbs)) {
            cairn_seterr(err, errlen, "bad volsize %" PRIu64 ": must be a nonzero multiple of volblocksize (%u)",
                   opts->volsize, vbs);
            e = -EINVAL;
        }
        if (e) {
            free_pairs(ct.props, ct.nprops);
            return e;
        }
        ct.props[ct.nprops].name = cairn_strdup("volblocksize");
        ct.props[ct.nprops++].value = cairn_strdup(norm);
        snprintf(buf, sizeof(buf), "%" PRIu64, opts->volsize);
        ct.props[ct.nprops].name = cairn_strdup("volsize");
        ct.props[ct.nprops++].value = cairn_strdup(buf);
        bool has_refresv = false;
        for (size_t i = 0; i < opts->nprops; i++)
            if (!strcmp(opts->props[i].name, "refreservation")) has_refresv = true;
        if (!opts->sparse && !has_refresv) {
            ct.props[ct.nprops].name = cairn_strdup("refreservation");
            ct.props[ct.nprops++].value = cairn_strdup(buf);
        }
    }
    e = dsl_run_task(dp, task_create, &ct);
    free_pairs(ct.props, ct.nprops);
    return e;
}

int dsl_clone(dsl_pool_t *dp, const char *snapname, const char *clonename,
              const dsl_prop_pair_t *props, size_t nprops, char *err, size_t errlen)
{
    if (!name_valid(snapname, true) || !strchr(snapname, '@')) {
        cairn_seterr(err, errlen, "not a snapshot name: %s", snapname ? snapname : "(null)");
        return -EINVAL;
    }
    if (!name_valid(clonename, false)) {
        cairn_seterr(err, errlen, "invalid dataset name: %s", clonename ? clonename : "(null)");
        return -EINVAL;
    }
    pthread_mutex_lock(&dp->lock);
    dsl_node_t *s = dsl_lookup(dp, snapname);
    dsl_type_t type = s ? (dsl_type_t)s->parent->phys.type : DSL_TYPE_FILESYSTEM;
    pthread_mutex_unlock(&dp->lock);
    if (!s) {
        cairn_seterr(err, errlen, "no such snapshot: %s", snapname);
        return -ENOENT;
    }
    create_task_t ct = {.type = type, .clone_of = snapname, .err = err, .errlen = errlen};
    cairn_strlcpy(ct.name, clonename, sizeof(ct.name));
    int e = normalise_props(type, props, nprops, &ct.props, &ct.nprops, err, errlen);
    if (e) return e;
    e = dsl_run_task(dp, task_create, &ct);
    free_pairs(ct.props, ct.nprops);
    return e;
}

/* ---------------- snapshots ---------------- */

/* Snapshot of head h in txg (after h's object set synced in txg). */
static int snapshot_one(dsl_pool_t *dp, dsl_node_t *h, const char *snap, dmu_tx_t *tx, uint64_t txg)
{
    cairn_blkptr_t root;
    dmu_objset_root(h->os, &root);
    dsl_node_t *s;
    int err = node_create(dp, tx, txg, DSL_TYPE_SNAPSHOT, h, snap, &root, &s);
    if (err) return err;
    pthread_mutex_lock(&dp->stat_lock);
    s->phys.prev_snap = h->phys.prev_snap;
    s->phys.prev_snap_txg = h->phys.prev_snap_txg;
    s->phys.origin_txg = h->phys.origin_txg;
    s->phys.referenced = h->phys.referenced;
    s->phys.comp = h->phys.comp;
    s->phys.uncomp = h->phys.uncomp;
    s->phys.data_comp = h->phys.data_comp;
    s->phys.data_uncomp = h->phys.data_uncomp;
    if (h->phys.type == DSL_TYPE_VOLUME) s->phys.snap_volsize = dsl_prop_num(dp, h, "volsize");
    /* The head's dead list (flushed) becomes the snapshot's. */
    s->phys.deadlist_obj = h->phys.deadlist_obj;
    s->phys.dead_count = h->phys.dead_count;
    s->phys.dead_bytes = h->phys.dead_bytes;
    s->phys.dead_comp = h->phys.dead_comp;
    s->phys.dead_uncomp = h->phys.dead_uncomp;
    h->phys.deadlist_obj = h->phys.dead_count = 0;
    h->phys.dead_bytes = h->phys.dead_comp = h->phys.dead_uncomp = 0;
    h->dead_gen = ++dp->dead_gen_seq;
    if (h->phys.prev_snap) {
        dsl_node_t *p = dsl_node_by_obj(dp, h->phys.prev_snap);
        if (p) {
            p->phys.next_snap = s->obj;
            p->dirty = true;
        }
    }
    h->phys.prev_snap = s->obj;
    h->phys.prev_snap_txg = txg;
    h->dirty = true;
    pthread_mutex_unlock(&dp->stat_lock);
    return 0;
}

typedef struct snap_task {
    char fs[DSL_NAME_MAX + 1];
    char snap[DSL_NAME_MAX + 1];
    bool recursive;
    char *err;
    size_t errlen;
} snap_task_t;

static int snap_check(dsl_node_t *h, const char *snap, snap_task_t *st)
{
    if (snap_named(h, snap)) {
        char fn[DSL_NAME_MAX + 1];
        dsl_node_fullname(h, fn, sizeof(fn));
        cairn_seterr(st->err, st->errlen, "snapshot already exists: %s@%s", fn, snap);
        return -EEXIST;
    }
    char fn[DSL_NAME_MAX + 1];
    dsl_node_fullname(h, fn, sizeof(fn));
    if (strlen(fn) + 1 + strlen(snap) > DSL_NAME_MAX) {
        cairn_seterr(st->err, st->errlen, "snapshot name too long: %s@%s", fn, snap);
        return -ENAMETOOLONG;
    }
    return 0;
}

static int snap_collect(dsl_node_t *h, bool rec, dsl_node_t ***v, size_t *n)
{
    ptr_append(v, n, h);
    if (rec)
        for (size_t i = 0; i < h->nchildren; i++) snap_collect(h->children[i], rec, v, n);
    return 0;
}

static int task_snapshot(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    snap_task_t *st = arg;
    dsl_node_t *h = dsl_lookup(dp, st->fs);
    if (!h || h->phys.type == DSL_TYPE_SNAPSHOT) {
        cairn_seterr(st->err, st->errlen, "no such dataset: %s", st->fs);
        return -ENOENT;
    }
    dsl_node_t **v = NULL;
    size_t n = 0;
    snap_collect(h, st->recursive, &v, &n);
    int err = 0;
    /* Check everything before changing anything: all or nothing. */
    for (size_t i = 0; i < n && !err; i++) err = snap_check(v[i], st->snap, st);
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    for (size_t i = 0; i < n && !err; i++) err = snapshot_one(dp, v[i], st->snap, tx, txg);
    dmu_tx_commit(tx);
    free(v);
    return err;
}

int dsl_snapshot(dsl_pool_t *dp, const char *snapname, bool recursive, char *err, size_t errlen)
{
    const char *at = snapname ? strchr(snapname, '@') : NULL;
    if (!at || !name_valid(snapname, true)) {
        cairn_seterr(err, errlen, "invalid snapshot name: %s (expected DATASET@NAME)",
               snapname ? snapname : "(null)");
        return -EINVAL;
    }
    snap_task_t st = {.recursive = recursive, .err = err, .errlen = errlen};
    memcpy(st.fs, snapname, (size_t)(at - snapname));
    st.fs[at - snapname] = 0;
    cairn_strlcpy(st.snap, at + 1, sizeof(st.snap));
    return dsl_run_task(dp, task_snapshot, &st);
}

/* Destroys snapshot s (syncing context): frees what only it referenced. */
static int snapshot_destroy(dsl_pool_t *dp, dsl_node_t *s, dmu_tx_t *tx, uint64_t txg)
{
    dsl_node_t *h = s->parent;
    dsl_node_t *next = s->phys.next_snap ? dsl_node_by_obj(dp, s->phys.next_snap) : h;
    dsl_node_t *prev = s->phys.prev_snap ? dsl_node_by_obj(dp, s->phys.prev_snap) : NULL;
    uint64_t p = s->phys.prev_snap_txg;
    cairn_blkptr_t *nv = NULL, *sv = NULL;
    size_t nn = 0, sn = 0;
    int err = dead_read(dp, next, &nv, &nn);
    if (!err) err = dead_read(dp, s, &sv, &sn);
    if (err) {
        free(nv);
        free(sv);
        return err;
    }
    cairn_blkptr_t *merged = cairn_zalloc((nn + sn + 1) * sizeof(*merged));
    size_t k = 0;
    uint64_t freed = 0, freed_uncomp = 0;
    for (size_t i = 0; i < nn; i++) {
        if (nv[i].birth_txg > p) {
            freed += bp_dsize(dp, &nv[i]);
            freed_uncomp += nv[i].lsize;
            spa_block_free(dp->spa, txg, &nv[i]);
        } else {
            merged[k++] = nv[i];
        }
    }
    for (size_t i = 0; i < sn; i++) merged[k++] = sv[i];
    free(nv);
    free(sv);
    err = dead_replace(dp, next, merged, k, tx);
    free(merged);
    if (err) return err;
    pthread_mutex_lock(&dp->stat_lock);
    h->phys.snapused -= CAIRN_MIN(h->phys.snapused, freed);
    h->phys.snapused_uncomp -= CAIRN_MIN(h->phys.snapused_uncomp, freed_uncomp);
    h->dirty = true;
    next->phys.prev_snap = s->phys.prev_snap;
    next->phys.prev_snap_txg = p;
    next->dirty = true;
    if (prev) {
        prev->phys.next_snap = s->phys.next_snap;
        prev->dirty = true;
    }
    pthread_mutex_unlock(&dp->stat_lock);
    if (s->os) {
        dmu_objset_close(s->os);
        s->os = NULL;
    }
    return node_destroy(dp, s, tx, txg, UINT64_MAX);
}

/* Destroys head h, which has no snapshots or children (syncing context). */
static int head_destroy(dsl_pool_t *dp, dsl_node_t *h, dmu_tx_t *tx, uint64_t txg)
{
    if (h->phys.origin) {
        dsl_node_t *o = dsl_node_by_obj(dp, h->phys.origin);
        if (o) {
            o->phys.num_clones--;
            o->dirty = true;
        }
    }
    /* Blocks born after prev_snap_txg are its own; older ones are the origin's. */
    return node_destroy(dp, h, tx, txg, h->phys.prev_snap_txg);
}

/* ---------------- destroy ---------------- */

typedef struct destroy_task {
    char name[DSL_NAME_MAX + 1];
    bool recursive, force;
    bool check_only; /* dsl_dataset_destroy_check: holds aside, change nothing */
    char *err;
    size_t errlen;
} destroy_task_t;

/* Refuses what cannot go: held datasets, clone origins outside the subtree. */
static int destroy_check(dsl_pool_t *dp, dsl_node_t *n, dsl_node_t *top, destroy_task_t *dt)
{
    char fn[DSL_NAME_MAX + 1];
    dsl_node_fullname(n, fn, sizeof(fn));
    if (n->holds > 0 && !dt->check_only) {
        cairn_seterr(dt->err, dt->errlen,
               "dataset is busy: %s is in use (shared over NFS, a volume behind an iSCSI LUN, "
               "or a mounted snapshot); set sharenfs=off or remove the LUN first",
               fn);
        return -EBUSY;
    }
    if (n->phys.type == DSL_TYPE_SNAPSHOT && n->phys.num_clones) {
        /* Clones inside the subtree being destroyed go first; others block it. */
        for (size_t i = 0; i < dp->nall; i++) {
            dsl_node_t *c = dp->all[i];
            if (c->phys.origin != n->obj) continue;
            bool inside = false;
            for (dsl_node_t *a = c; a; a = a->parent)
                if (a == top) inside = true;
            if (!inside || !dt->recursive) {
                char cn[DSL_NAME_MAX + 1];
                dsl_node_fullname(c, cn, sizeof(cn));
                cairn_seterr(dt->err, dt->errlen, "snapshot %s has dependent clone %s", fn, cn);
                return -EBUSY;
            }
        }
    }
    for (size_t i = 0; i < n->nsnaps; i++) {
        int e = destroy_check(dp, n->snaps[i], top, dt);
        if (e) return e;
    }
    for (size_t i = 0; i < n->nchildren; i++) {
        int e = destroy_check(dp, n->children[i], top, dt);
        if (e) return e;
    }
    return 0;
}

static bool is_descendant(dsl_node_t *x, dsl_node_t *a)
{
    for (; x; x = x->parent)
        if (x == a) return true;
    return false;
}

/* Destroys the subtree of n (checked): clones of its snapshots first, then
 * children, then snapshots oldest first, then n. */
static int destroy_tree(dsl_pool_t *dp, dsl_node_t *n, dmu_tx_t *tx, uint64_t txg)
{
    int err = 0;
    while (!err && n->nchildren) err = destroy_tree(dp, n->children[n->nchildren - 1], tx, txg);
    while (!err && n->nsnaps) {
        dsl_node_t *s = n->snaps[0];
        while (!err && s->phys.num_clones) {
            dsl_node_t *clone = NULL;
            for (size_t i = 0; i < dp->nall && !clone; i++)
                if (dp->all[i]->phys.origin == s->obj) clone = dp->all[i];
            if (!clone) break;
            err = destroy_tree(dp, clone, tx, txg);
        }
        if (!err) err = snapshot_destroy(dp, s, tx, txg);
    }
    if (!err) err = head_destroy(dp, n, tx, txg);
    return err;
}

static int task_destroy(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    destroy_task_t *dt = arg;
    dsl_node_t *n = dsl_lookup(dp, dt->name);
    if (!n) {
        cairn_seterr(dt->err, dt->errlen, "no such dataset: %s", dt->name);
        return -ENOENT;
    }
    if (n == dp->root) {
        cairn_seterr(dt->err, dt->errlen, "cannot destroy %s: the pool's root dataset (destroy the pool)",
               dt->name);
        return -EBUSY;
    }
    int err = destroy_check(dp, n, n, dt);
    if (err) return err;
    if (n->phys.type != DSL_TYPE_SNAPSHOT && !dt->recursive && (n->nchildren || n->nsnaps)) {
        cairn_seterr(dt->err, dt->errlen, "%s has %s (use -r)", dt->name,
               n->nchildren ? "children" : "snapshots");
        return -EEXIST;
    }
    /* A clone whose origin lies inside the subtree would be orphaned. */
    for (size_t i = 0; i < dp->nall; i++) {
        dsl_node_t *c = dp->all[i];
        if (!c->phys.origin || is_descendant(c, n)) continue;
        dsl_node_t *o = dsl_node_by_obj(dp, c->phys.origin);
        if (o && is_descendant(o, n)) {
            char cn[DSL_NAME_MAX + 1];
            dsl_node_fullname(c, cn, sizeof(cn));
            cairn_seterr(dt->err, dt->errlen, "cannot destroy %s: clone %s depends on it", dt->name, cn);
            return -EBUSY;
        }
    }
    if (dt->check_only) return 0;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    if (n->phys.type == DSL_TYPE_SNAPSHOT) err = snapshot_destroy(dp, n, tx, txg);
    else err = destroy_tree(dp, n, tx, txg);
    dmu_tx_commit(tx);
    return err;
}

int dsl_dataset_destroy(dsl_pool_t *dp, const char *name, bool recursive, bool force, char *err,
                        size_t errlen)
{
    if (!name_valid(name, true)) {
        cairn_seterr(err, errlen, "invalid dataset name: %s", name ? name : "(null)");
        return -EINVAL;
    }
    destroy_task_t dt = {.recursive = recursive, .force = force, .err = err, .errlen = errlen};
    cairn_strlcpy(dt.name, name, sizeof(dt.name));
    return dsl_run_task(dp, task_destroy, &dt);
}

int dsl_dataset_destroy_check(dsl_pool_t *dp, const char *name, bool recursive, char *err,
                              size_t errlen)
{
    if (!name_valid(name, true)) {
        cairn_seterr(err, errlen, "invalid dataset name: %s", name ? name : "(null)");
        return -EINVAL;
    }
    destroy_task_t dt = {.recursive = recursive, .check_only = true, .err = err,
                         .errlen = errlen};
    cairn_strlcpy(dt.name, name, sizeof(dt.name));
    return run_check(dp, task_destroy, &dt);
}

/* ---------------- rename ---------------- */

typedef struct rename_task {
    char from[DSL_NAME_MAX + 1], to[DSL_NAME_MAX + 1];
    bool check_only; /* dsl_dataset_rename_check: change nothing */
    char *err;
    size_t errlen;
} rename_task_t;

static int task_rename(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    rename_task_t *rt = arg;
    dsl_node_t *n = dsl_lookup(dp, rt->from);
    if (!n) {
        cairn_seterr(rt->err, rt->errlen, "no such dataset: %s", rt->from);
        return -ENOENT;
    }
    if (dsl_lookup(dp, rt->to)) {
        cairn_seterr(rt->err, rt->errlen, "dataset already exists: %s", rt->to);
        return -EEXIST;
    }
    /* Every refusal before anything changes (dsl_dataset_rename_check stops there). */
    const char *slash = strrchr(rt->to, '/');
    dsl_node_t *np = NULL;
    if (n->phys.type == DSL_TYPE_SNAPSHOT) {
        const char *a1 = strchr(rt->from, '@'), *a2 = strchr(rt->to, '@');
        if (!a2 || a1 - rt->from != a2 - rt->to || strncmp(rt->from, rt->to, (size_t)(a1 - rt->from))) {
            cairn_seterr(rt->err, rt->errlen, "a snapshot can only be renamed to a snapshot of the same dataset");
            return -EINVAL;
        }
    } else {
        char pname[DSL_NAME_MAX + 1];
        if (strchr(rt->to, '@') || !slash || n == dp->root) {
            cairn_seterr(rt->err, rt->errlen, "cannot rename %s to %s", rt->from, rt->to);
            return -EINVAL;
        }
        cairn_strlcpy(pname, rt->to, sizeof(pname));
        pname[slash - rt->to] = 0;
        np = dsl_lookup(dp, pname);
        if (!np) {
            cairn_seterr(rt->err, rt->errlen, "no such parent (or another pool): %s", pname);
            return -ENOENT;
        }
        if (np->phys.type != DSL_TYPE_FILESYSTEM) {
            cairn_seterr(rt->err, rt->errlen, "parent is not a filesystem: %s", pname);
            return -ENOTDIR;
        }
        if (is_descendant(np, n)) {
            cairn_seterr(rt->err, rt->errlen, "cannot move %s below itself", rt->from);
            return -EINVAL;
        }
    }
    if (rt->check_only) return 0;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err;
    if (n->phys.type == DSL_TYPE_SNAPSHOT) {
        cairn_strlcpy(n->name, strchr(rt->to, '@') + 1, sizeof(n->name));
        err = registry_add(dp, n, tx);
    } else {
        ptr_remove(n->parent->children, &n->parent->nchildren, n);
        ptr_append(&np->children, &np->nchildren, n);
        n->parent = np;
        n->phys.parent = np->obj;
        n->dirty = true;
        cairn_strlcpy(n->name, slash + 1, sizeof(n->name));
        err = registry_add(dp, n, tx);
    }
    dmu_tx_commit(tx);
    /* The open object sets below (and of) the renamed node log under their new names. */
    for (size_t i = 0; !err && i < dp->nall; i++) {
        if (!dp->all[i]->os) continue;
        char full[DSL_NAME_MAX + 1];
        dsl_node_fullname(dp->all[i], full, sizeof full);
        dmu_objset_set_label(dp->all[i]->os, full);
    }
    return err;
}

int dsl_dataset_rename(dsl_pool_t *dp, const char *oldname, const char *newname, char *err,
                       size_t errlen)
{
    if (!name_valid(oldname, true) || !name_valid(newname, true)) {
        cairn_seterr(err, errlen, "invalid dataset name: %s", name_valid(oldname, true) ? newname : oldname);
        return -EINVAL;
    }
    size_t l1 = strcspn(oldname, "/@"), l2 = strcspn(newname, "/@");
    if (l1 != l2 || strncmp(oldname, newname, l1)) {
        cairn_seterr(err, errlen, "cannot rename across pools: %s -> %s", oldname, newname);
        return -EXDEV;
    }
    rename_task_t rt = {.err = err, .errlen = errlen};
    cairn_strlcpy(rt.from, oldname, sizeof(rt.from));
    cairn_strlcpy(rt.to, newname, sizeof(rt.to));
    return dsl_run_task(dp, task_rename, &rt);
}

int dsl_dataset_rename_check(dsl_pool_t *dp, const char *oldname, const char *newname,
                             char *err, size_t errlen)
{
    if (!name_valid(oldname, true) || !name_valid(newname, true)) {
        cairn_seterr(err, errlen, "invalid dataset name: %s", name_valid(oldname, true) ? newname : oldname);
        return -EINVAL;
    }
    size_t l1 = strcspn(oldname, "/@"), l2 = strcspn(newname, "/@");
    if (l1 != l2 || strncmp(oldname, newname, l1)) {
        cairn_seterr(err, errlen, "cannot rename across pools: %s -> %s", oldname, newname);
        return -EXDEV;
    }
    rename_task_t rt = {.check_only = true, .err = err, .errlen = errlen};
    cairn_strlcpy(rt.from, oldname, sizeof(rt.from));
    cairn_strlcpy(rt.to, newname, sizeof(rt.to));
    return run_check(dp, task_rename, &rt);
}

/* ---------------- rollback ---------------- */

typedef struct rollback_task {
    char name[DSL_NAME_MAX + 1];
    bool destroy_newer;
    bool check_only; /* dsl_rollback_check: holds aside, change nothing */
    char *err;
    size_t errlen;
} rollback_task_t;

static int task_rollback(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    rollback_task_t *rt = arg;
    dsl_node_t *s = dsl_lookup(dp, rt->name);
    if (!s || s->phys.type != DSL_TYPE_SNAPSHOT) {
        cairn_seterr(rt->err, rt->errlen, "no such snapshot: %s", rt->name);
        return -ENOENT;
    }
    dsl_node_t *h = s->parent;
    if (h->holds > 0 && !rt->check_only) {
        char hn[DSL_NAME_MAX + 1];
        dsl_node_fullname(h, hn, sizeof(hn));
        cairn_seterr(rt->err, rt->errlen,
               "dataset is busy: %s is in use (shared over NFS or a volume behind an iSCSI "
               "LUN) and cannot be rolled back under its clients; set sharenfs=off or remove "
               "the LUN, roll back, then share it again",
               hn);
        return -EBUSY;
    }
    size_t idx = 0;
    while (h->snaps[idx] != s) idx++;
    if (idx + 1 < h->nsnaps) {
        if (!rt->destroy_newer) {
            cairn_seterr(rt->err, rt->errlen, "%s is not the most recent snapshot (use -r to destroy newer ones)",
                   rt->name);
            return -EEXIST;
        }
        for (size_t i = idx + 1; i < h->nsnaps; i++) {
            dsl_node_t *x = h->snaps[i];
            if ((x->holds && !rt->check_only) || x->phys.num_clones) {
                char fn[DSL_NAME_MAX + 1];
                dsl_node_fullname(x, fn, sizeof(fn));
                cairn_seterr(rt->err, rt->errlen, "cannot destroy newer snapshot %s: %s", fn,
                       x->holds ? "busy" : "it has clones");
                return -EBUSY;
            }
        }
    }
    if (rt->check_only) return 0;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    int err = 0;
    while (!err && h->snaps[h->nsnaps - 1] != s) err = snapshot_destroy(dp, h->snaps[h->nsnaps - 1], tx, txg);
    if (err) goto out;
    /* The head's own blocks (born after s) go; its dead list is s's blocks again. */
    char osn[64];
    objset_name(h->obj, osn, sizeof(osn));
    cairn_blkptr_t root;
    {
        char sn[64];
        objset_name(s->obj, sn, sizeof(sn));
        objset_t *sos;
        err = dmu_objset_open(dp->spa, sn, &sos);
        if (err) goto out;
        dmu_objset_root(sos, &root);
        dmu_objset_close(sos);
    }
    dmu_objset_set_hooks(h->os, NULL, NULL);
    dmu_objset_close(h->os);
    h->os = NULL;
    err = dmu_objset_destroy_sync(dp->spa, txg, osn, s->phys.creation_txg);
    if (!err) err = dmu_objset_create_sync(dp->spa, txg, osn, &root, NULL);
    if (!err) err = node_open_os(dp, h);
    if (err) goto out;
    cairn_blkptr_t *dv;
    size_t dn;
    err = dead_read(dp, h, &dv, &dn);
    if (err) goto out;
    uint64_t back = 0, back_uncomp = 0;
    for (size_t i = 0; i < dn; i++)
        if (dv[i].birth_txg > h->phys.origin_txg) {
            back += bp_dsize(dp, &dv[i]);
            back_uncomp += dv[i].lsize;
        }
    free(dv);
    err = dead_replace(dp, h, NULL, 0, tx);
    pthread_mutex_lock(&dp->stat_lock);
    h->phys.snapused -= CAIRN_MIN(h->phys.snapused, back);
    h->phys.snapused_uncomp -= CAIRN_MIN(h->phys.snapused_uncomp, back_uncomp);
    h->phys.referenced = s->phys.referenced;
    h->phys.comp = s->phys.comp;
    h->phys.uncomp = s->phys.uncomp;
    h->phys.data_comp = s->phys.data_comp;
    h->phys.data_uncomp = s->phys.data_uncomp;
    h->dirty = true;
    pthread_mutex_unlock(&dp->stat_lock);
out:
    dmu_tx_commit(tx);
    return err;
}

int dsl_rollback(dsl_pool_t *dp, const char *snapname, bool destroy_newer, char *err,
                 size_t errlen)
{
    if (!snapname || !strchr(snapname, '@') || !name_valid(snapname, true)) {
        cairn_seterr(err, errlen, "not a snapshot name: %s", snapname ? snapname : "(null)");
        return -EINVAL;
    }
    rollback_task_t rt = {.destroy_newer = destroy_newer, .err = err, .errlen = errlen};
    cairn_strlcpy(rt.name, snapname, sizeof(rt.name));
    return dsl_run_task(dp, task_rollback, &rt);
}

int dsl_rollback_check(dsl_pool_t *dp, const char *snapname, bool destroy_newer, char *err,
                       size_t errlen)
{
    if (!snapname || !strchr(snapname, '@') || !name_valid(snapname, true)) {
        cairn_seterr(err, errlen, "not a snapshot name: %s", snapname ? snapname : "(null)");
        return -EINVAL;
    }
    rollback_task_t rt = {.destroy_newer = destroy_newer, .check_only = true, .err = err,
                          .errlen = errlen};
    cairn_strlcpy(rt.name, snapname, sizeof(rt.name));
    return run_check(dp, task_rollback, &rt);
}

/* ---------------- list ---------------- */

static void list_fill(dsl_pool_t *dp, dsl_node_t *n, dsl_dataset_info_t *info)
{
    memset(info, 0, sizeof(*info));
    dsl_node_fullname(n, info->name, sizeof(info->name));
    info->type = (dsl_type_t)n->phys.type;
    info->guid = n->phys.guid;
    info->creation_txg = n->phys.creation_txg;
    info->creation_time = n->phys.creation_time;
    dsl_space_t s;
    dsl_node_space(dp, n, &s);
    info->used = s.used;
    info->available = s.available;
    info->referenced = s.referenced;
}

static void list_collect(dsl_node_t *n, bool rec, unsigned types, dsl_node_t ***v, size_t *cnt)
{
    if (types & (1u << n->phys.type)) ptr_append(v, cnt, n);
    if (!rec || n->phys.type == DSL_TYPE_SNAPSHOT) return;
    for (size_t i = 0; i < n->nsnaps; i++) list_collect(n->snaps[i], rec, types, v, cnt);
    for (size_t i = 0; i < n->nchildren; i++) list_collect(n->children[i], rec, types, v, cnt);
}

static int cmp_info(const void *a, const void *b)
{
    const dsl_dataset_info_t *x = a, *y = b;
    /* zfs list order: a dataset, then its snapshots, then its children. */
    const char *p = x->name, *q = y->name;
    while (*p && *p == *q) {
        p++;
        q++;
    }
    int cp = *p == '@' ? 1 : *p == '/' ? 2 : (unsigned char)*p + 3;
    int cq = *q == '@' ? 1 : *q == '/' ? 2 : (unsigned char)*q + 3;
    if (!*p) cp = 0;
    if (!*q) cq = 0;
    return cp - cq;
}

int dsl_dataset_list(dsl_pool_t *dp, const char *name, bool recursive, unsigned types,
                     void (*fn)(const dsl_dataset_info_t *info, void *arg), void *arg,
                     char *err, size_t errlen)
{
    if (!types) types = ~0u;
    int locked = dsl_pool_lock(dp);
    if (locked) return locked;
    dsl_node_t *start = name ? dsl_lookup(dp, name) : dp->root;
    if (!start) {
        pthread_mutex_unlock(&dp->lock);
        cairn_seterr(err, errlen, "no such dataset: %s", name);
        return -ENOENT;
    }
    dsl_node_t **v = NULL;
    size_t cnt = 0;
    list_collect(start, recursive || !name, types, &v, &cnt);
    dsl_dataset_info_t *infos = cairn_zalloc((cnt + 1) * sizeof(*infos));
    for (size_t i = 0; i < cnt; i++) list_fill(dp, v[i], &infos[i]);
    pthread_mutex_unlock(&dp->lock);
    free(v);
    qsort(infos, cnt, sizeof(*infos), cmp_info);
    for (size_t i = 0; i < cnt; i++) fn(&infos[i], arg);
    free(infos);
    return 0;
}

/* ---------------- holds ---------------- */

static int hold_node(dsl_pool_t *dp, dsl_node_t *n, dsl_dataset_t **out)
{
    int err = node_open_os(dp, n);
    if (err) return err;
    dsl_dataset_t *ds = cairn_zalloc(sizeof(*ds));
    ds->dp = dp;
    ds->node = n;
    pthread_rwlock_init(&ds->props_lock, NULL);
    dsl_node_fullname(n, ds->name, sizeof(ds->name));
    n->holds++;
    *out = ds;
    return 0;
}

int dsl_dataset_hold(dsl_pool_t *dp, const char *name, dsl_dataset_t **out)
{
    int locked = dsl_pool_lock(dp);
    if (locked) return locked;
    dsl_node_t *n = dsl_lookup(dp, name);
    int err = n ? hold_node(dp, n, out) : -ENOENT;
    pthread_mutex_unlock(&dp->lock);
    return err;
}

int dsl_dataset_hold_by_guid(dsl_pool_t *dp, uint64_t guid, dsl_dataset_t **out)
{
    int locked = dsl_pool_lock(dp);
    if (locked) return locked;
    int err = -ENOENT;
    for (size_t i = 0; i < dp->nall; i++)
        if (dp->all[i]->phys.guid == guid) {
            err = hold_node(dp, dp->all[i], out);
            break;
        }
    pthread_mutex_unlock(&dp->lock);
    return err;
}

typedef struct find_os {
    uint64_t id;
    char name[DMU_OBJSET_NAME_MAX + 1];
} find_os_t;

static void find_os_cb(const char *name, uint64_t id, void *arg)
{
    find_os_t *f = arg;
    if (id == f->id) cairn_strlcpy(f->name, name, sizeof f->name);
}

int dsl_dataset_hold_by_objset_id(dsl_pool_t *dp, uint64_t os_id, dsl_dataset_t **out)
{
    find_os_t f = {.id = os_id};
    int err = dmu_objset_list(dp->spa, find_os_cb, &f);
    if (err) return err;
    uint64_t obj;
    char tail;
    if (sscanf(f.name, "$ds%" SCNu64 "%c", &obj, &tail) != 1) return -ENOENT;
    int locked = dsl_pool_lock(dp);
    if (locked) return locked;
    dsl_node_t *n = dsl_node_by_obj(dp, obj);
    err = n ? hold_node(dp, n, out) : -ENOENT;
    pthread_mutex_unlock(&dp->lock);
    return err;
}

void dsl_dataset_rele(dsl_dataset_t *ds)
{
    if (!ds) return;
    pthread_mutex_lock(&ds->dp->lock);
    ds->node->holds--;
    pthread_mutex_unlock(&ds->dp->lock);
    pthread_rwlock_destroy(&ds->props_lock);
    free(ds);
}

objset_t *dsl_dataset_objset(dsl_dataset_t *ds) { return ds->node->os; }
dsl_pool_t *dsl_dataset_pool(dsl_dataset_t *ds) { return ds->dp; }
const char *dsl_dataset_name(dsl_dataset_t *ds)
{
    /* A rename while held: refresh (the buffer lives as long as the hold). */
    pthread_mutex_lock(&ds->dp->lock);
    dsl_node_fullname(ds->node, ds->name, sizeof(ds->name));
    pthread_mutex_unlock(&ds->dp->lock);
    return ds->name;
}
void dsl_dataset_get_name(dsl_dataset_t *ds, char *buf, size_t len)
{
    if (dsl_pool_lock(ds->dp)) {
        if (len) buf[0] = '\0'; /* refused (dsl_pool_lock): the caller's answer is dropped */
        return;
    }
    dsl_node_fullname(ds->node, buf, len);
    pthread_mutex_unlock(&ds->dp->lock);
}
uint64_t dsl_dataset_guid(dsl_dataset_t *ds) { return ds->node->phys.guid; }
dsl_type_t dsl_dataset_type(dsl_dataset_t *ds) { return (dsl_type_t)ds->node->phys.type; }
bool dsl_dataset_is_snapshot(dsl_dataset_t *ds) { return ds->node->phys.type == DSL_TYPE_SNAPSHOT; }

/*
 * Space for `bytes` more, counting what the live txgs will allocate. When only
 * that estimate stands in the way (the bytes would fit what is on disk now),
 * the caller waits for the open txg to sync and asks again, a few times: the
 * estimate errs high, and counts the syncing txg's blocks twice while they are
 * being allocated, so near a limit a write waits for the truth instead of
 * failing on a guess. The caller holds no transaction and no lock a sync needs.
 *
 * The full answer takes the pool lock and walks properties, reservations and
 * the vdevs: too much for every 4 KiB write of every client. So the handle
 * keeps its last answer. While no task has changed the tree or a property
 * since (dp->props_gen) and the pool has claimed less than half the room the
 * answer found (spa_space_claimed counts every estimate and allocation, so by
 * at least what any dataset's used and pending grew), a write is let through
 * with a few atomic loads. Near a limit (under fast_min_room available, 1 GiB)
 * every write takes the full path, which is exact.
 */
static _Atomic uint64_t fast_min_room = 1ULL << 30;

void dsl_set_space_fast_min(uint64_t bytes) { atomic_store(&fast_min_room, bytes); }
#define DSL_FAST_WRITE_MARGIN(b) (4 * (b) + 4 * CAIRN_MIB) /* its own estimate, not claimed yet */

/* The handle's last answer if it is still good: 1 and *err set, else 0. */
static int fast_answer(dsl_dataset_t *ds, uint64_t bytes, int *err)
{
    uint64_t s1 = atomic_load_explicit(&ds->fp_seq, memory_order_acquire);
    if (s1 & 1) return 0;
    uint64_t gen = atomic_load_explicit(&ds->fp_gen, memory_order_relaxed);
    uint64_t claim = atomic_load_explicit(&ds->fp_claim, memory_order_relaxed);
    uint64_t room = atomic_load_explicit(&ds->fp_room, memory_order_relaxed);
    int rofs = atomic_load_explicit(&ds->fp_rofs, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&ds->fp_seq, memory_order_relaxed) != s1) return 0;
    if (!gen || gen != atomic_load(&ds->dp->props_gen)) return 0;
    if (rofs) {
        *err = rofs;
        return 1;
    }
    uint64_t claimed = spa_space_claimed(ds->dp->spa) - claim;
    if (claimed + DSL_FAST_WRITE_MARGIN(bytes) > room) return 0;
    *err = 0;
    return 1;
}

/* dp->lock held: remembers a full answer (avail: what node_available gave). */
static void fast_remember(dsl_dataset_t *ds, int rofs, uint64_t claim0, uint64_t avail)
{
    CAIRN_ASSERT(cairn_mutex_held(&ds->dp->lock));
    uint64_t s = atomic_load_explicit(&ds->fp_seq, memory_order_relaxed);
    atomic_store_explicit(&ds->fp_seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&ds->fp_gen, atomic_load(&ds->dp->props_gen), memory_order_relaxed);
    atomic_store_explicit(&ds->fp_claim, claim0, memory_order_relaxed);
    atomic_store_explicit(&ds->fp_room, avail >= atomic_load(&fast_min_room) ? avail / 2 : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&ds->fp_rofs, rofs, memory_order_relaxed);
    atomic_store_explicit(&ds->fp_seq, s + 2, memory_order_release);
}

static int check_space(dsl_dataset_t *ds, uint64_t bytes, bool nowait)
{
    dsl_pool_t *dp = ds->dp;
    int err;
    if (fast_answer(ds, bytes, &err)) return err;
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&dp->lock);
        /* Claimed before the answer is computed: whatever is claimed meanwhile
         * counts against the room, never falls between. */
        uint64_t claim0 = spa_space_claimed(dp->spa);
        dsl_node_t *n = ds->node;
        bool wait = false;
        err = 0;
        if (n->phys.type == DSL_TYPE_SNAPSHOT || dsl_prop_num(dp, n, "readonly")) {
            err = -EROFS;
            fast_remember(ds, err, claim0, 0);
        } else {
            bool quota = false;
            uint64_t avail = node_available(dp, n, &quota, true);
            if (bytes > avail) {
                err = quota ? -EDQUOT : -ENOSPC;
                /* Space being freed (a remove in a txg not yet synced, or
                 * the defer window) is usable a few syncs later: a write
                 * that fits once it is waits for them rather than fail. */
                uint64_t coming = quota ? 0 : spa_space_freeing(dp->spa);
                wait = attempt < SPA_DEFER_TXGS + 1 &&
                       bytes <= node_available(dp, n, NULL, false) + coming;
            }
            fast_remember(ds, 0, claim0, avail);
        }
        pthread_mutex_unlock(&dp->lock);
        if (wait && nowait) return -EWOULDBLOCK;
        if (!wait || spa_txg_wait_synced(dp->spa, 0) != 0) return err;
    }
}

int dsl_dataset_check_space(dsl_dataset_t *ds, uint64_t bytes) { return check_space(ds, bytes, false); }

int dsl_dataset_check_space_nowait(dsl_dataset_t *ds, uint64_t bytes)
{
    return check_space(ds, bytes, true);
}

bool dsl_dataset_readonly(dsl_dataset_t *ds)
{
    int err = 0;
    if (fast_answer(ds, 0, &err)) return err == -EROFS;
    /* Nothing remembered, or stale: ask for no space, which refreshes it. */
    return dsl_dataset_check_space(ds, 0) == -EROFS;
}

int dsl_dataset_list_snapshots(dsl_dataset_t *ds, void (*fn)(const char *snap, void *arg),
                               void *arg)
{
    dsl_pool_t *dp = ds->dp;
    pthread_mutex_lock(&dp->lock);
    dsl_node_t *h = ds->node->phys.type == DSL_TYPE_SNAPSHOT ? ds->node->parent : ds->node;
    size_t n = h->nsnaps;
    char **names = cairn_zalloc((n + 1) * sizeof(*names));
    for (size_t i = 0; i < n; i++) names[i] = cairn_strdup(h->snaps[i]->name);
    pthread_mutex_unlock(&dp->lock);
    for (size_t i = 0; i < n; i++) {
        fn(names[i], arg);
        free(names[i]);
    }
    free(names);
    return 0;
}
