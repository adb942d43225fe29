/*
 * ZPL: the POSIX filesystem layer over a filesystem dataset.
 *
 * How a front end uses it
 * -----------------------
 * Every call is synchronous and may be made from any number of threads at
 * once; the NFS server runs one call per request on a pool of worker threads.
 * A call returns when its change is applied to the open transaction group and
 * visible to every later call; no call waits for a txg to sync except
 * zpl_fsync()/zpl_commit(), writes with ZPL_IO_SYNC, and every change on a
 * dataset with sync=always. So a server answers UNSTABLE writes at once,
 * answers FILE_SYNC writes by passing ZPL_IO_SYNC, and answers COMMIT by
 * calling zpl_commit(). There are no callbacks: completion is the return.
 * Every change is also queued as an intent-log record (zpl_zil.c), so each of
 * those waits is one log write and flush, not a txg sync.
 *
 * On-disk layout
 * --------------
 * A filesystem's object set holds a master node (object 1, a ZAP: "ROOT" ->
 * root directory object, "VERSION" -> 1) and one object per file, directory,
 * symlink or special file. Its attributes (zpl_phys_t) fill the object's
 * 320-byte bonus buffer: mode, owner, link count, size, four nanosecond
 * timestamps, generation, parent, the NFSv4 change counter, flags, rdev,
 * an EXCLUSIVE-create verifier and, for short symlinks, the target inline
 * (longer targets live in the object's data). A directory is a ZAP object
 * mapping each name to (DT_* type << 60 | object number), so lookups and
 * inserts cost the same in a directory of a million entries as of ten, and
 * readdir cookies are the ZAP's stable hash cookies. A directory's size is
 * its entry count + 2; its link count 2 + subdirectories.
 *
 * A regular file is created with the dataset's recordsize. While it is one
 * record, that record is the power of two covering the file (a 3 KiB file
 * costs a 4 KiB record, not 128 KiB) and grows with it up to recordsize; a
 * file of several records keeps its record size for good (the DMU cannot
 * change it), so a recordsize change reaches new files and single-record
 * ones only, as in ZFS. Compression, checksum and copies changes reach the
 * next write of every file (fix_object_props).
 *
 * Generations: a new object's generation is its creation txg << 20 plus a
 * per-mount sequence number. txgs only grow across restarts, so a
 * (object, generation) pair never names two files: a handle whose object was
 * freed, or freed and reused, is stale (-ESTALE). Intent-log replay recreates
 * an object under its logged number and generation, and moves the pool's
 * txgs past every logged txg before anything new is created.
 *
 * Nodes and locks
 * ---------------
 * A zpl_node_t is the in-memory face of one object, found through a per-fs
 * hash table keyed by object number and kept while referenced. While it is
 * in the table its cached attributes are authoritative; every change writes
 * them through to the bonus buffer in the same transaction.
 *
 *   - n->lock (rwlock): readers of attributes, data and directory entries
 *     share it; changes take it exclusively. A large write holds only its
 *     own file's lock, so it never blocks a lookup elsewhere.
 *   - Directory operations lock the directory, then the child (parent before
 *     child, the tree order). Rename locks the directories and children with
 *     the first lock blocking and the rest by try-lock, dropping everything
 *     and retrying on contention, so no lock order can deadlock it; renames
 *     across directories also hold the per-fs rename mutex, which keeps every
 *     directory's parent pointer still while the "into its own subtree" check
 *     walks up from the target.
 *   - fs->table_lock guards the table and reference counts only (a leaf lock).
 *   - A transaction is always begun before any node lock is taken, so a
 *     thread waiting in the DMU's write throttle never holds a lock that
 *     another thread inside the same txg waits on. It joins a txg only at its
 *     first change, made under the node locks, so a node's changes reach
 *     txgs in the order they were made.
 *   - Each operation is exactly one transaction: a rename over an existing
 *     target, its removal and the two directory updates commit together.
 *
 * Removal: when the last link of a file nobody has open goes, the object is
 * freed in the same transaction, its node is marked dead and unhashed, and
 * every handle to it returns -ESTALE from then on. NFSv3 has no opens; NFSv4
 * does, and its server takes an open reference (zpl_open_hold) for as long as
 * a client holds state on the file. A file whose last link goes while it is
 * open is not freed: its number goes into the dataset's unlinked set (a ZAP
 * named by the master node's "DELETE_QUEUE", as ZFS's delete queue), its link
 * count is 0 and its node stays hashed, so the opener's handle keeps working
 * and the number cannot be reused by a new file that would then inherit the
 * old one's share reservations and locks. The last zpl_open_rele frees it and
 * takes it out of the set; a crash leaves it in the set, and the next mount
 * frees everything the set names (after the intent log is replayed: a logged
 * remove says the last link went, and replay frees the object). A link count
 * of 0 on disk also makes the object unfindable by number (phys_load).
 *
 * atime: with atime=off a read never dirties anything. With atime=on it is
 * updated relatime-style - only when it is not newer than mtime/ctime or is a
 * day old - in its own small transaction after the read, and does not bump
 * the change counter (NFSv4 clients would otherwise drop their caches on
 * every read). zpl_read_memory (for a connection thread) serves a read from
 * memory only and leaves a read with a due atime to zpl_read.
 *
 * Snapshots: a head's root has a virtual directory .cairn (hidden from
 * readdir, found by lookup) holding snapshot/, which lists the dataset's
 * snapshots. Looking up a name there mounts that snapshot read-only (cached
 * in the head until unmount or zpl_fs_release_snapshots; a cached mount is
 * checked against the snapshot's current name, so a rename shows at once) and
 * returns its root. Mounts are kept in a registry keyed by dataset guid, so one dataset
 * always has one zpl_fs_t (one node table) however many times it is mounted.
 */
#include "zpl_impl.h"

#include <cairn/assert.h>
#include <cairn/endian.h>
#include <cairn/log.h>
#include <cairn/util.h>

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(ZPL_MAX_FILE_SIZE <= DMU_MAX_OFFSET, "the DMU holds the largest file");

#define ZPL_CREATE_SPACE 4096       /* charged against quotas for a new node */
#define ZPL_RELATIME_NS (24ll * 3600 * 1000000000ll)

static pthread_mutex_t zpl_global_lock = PTHREAD_MUTEX_INITIALIZER;
static zpl_fs_t *zpl_mounts;

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Names a directory may hold: 1..255 bytes, no '/', not "." or "..". */
static int name_check(const char *name)
{
    size_t len = strnlen(name, ZPL_NAME_MAX + 1);
    if (len == 0) return -ENOENT;
    if (len > ZPL_NAME_MAX) return -ENAMETOOLONG;
    if (strchr(name, '/')) return -EINVAL;
    if (!strcmp(name, ".") || !strcmp(name, "..")) return -EINVAL;
    return 0;
}

static bool is_ctl_name(const zpl_node_t *dir, const char *name)
{
    return !dir->fs->snapshot && dir->kind == ZPL_NODE_REAL && dir->obj == dir->fs->root_obj &&
           !strcmp(name, ZPL_CTLDIR_NAME);
}

static void props_get(zpl_fs_t *fs, dsl_dataset_props_t *p)
{
    dsl_dataset_get_props(fs->ds, p);
}

/* ------------------------------------------------------------------ */
/* node table                                                         */

static size_t bucket_of(zpl_fs_t *fs, uint64_t obj)
{
    uint64_t h = obj * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (fs->nbuckets - 1);
}

static zpl_node_t *table_find(zpl_fs_t *fs, uint64_t obj)
{
    for (zpl_node_t *n = fs->buckets[bucket_of(fs, obj)]; n; n = n->hnext)
        if (n->obj == obj) return n;
    return NULL;
}

static void table_grow(zpl_fs_t *fs)
{
    size_t nb = fs->nbuckets * 2;
    zpl_node_t **old = fs->buckets;
    size_t ob = fs->nbuckets;
    fs->buckets = cairn_zalloc(nb * sizeof(*fs->buckets));
    fs->nbuckets = nb;
    for (size_t i = 0; i < ob; i++) {
        zpl_node_t *n = old[i];
        while (n) {
            zpl_node_t *next = n->hnext;
            size_t b = bucket_of(fs, n->obj);
            n->hnext = fs->buckets[b];
            fs->buckets[b] = n;
            n = next;
        }
    }
    free(old);
}

static void table_insert(zpl_fs_t *fs, zpl_node_t *n)
{
    if (fs->nnodes + 1 > fs->nbuckets) table_grow(fs);
    size_t b = bucket_of(fs, n->obj);
    n->hnext = fs->buckets[b];
    fs->buckets[b] = n;
    n->hashed = true;
    fs->nnodes++;
    fs->table_seq++;
}

static void table_remove(zpl_fs_t *fs, zpl_node_t *n)
{
    if (!n->hashed) return;
    zpl_node_t **pp = &fs->buckets[bucket_of(fs, n->obj)];
    while (*pp != n) pp = &(*pp)->hnext;
    *pp = n->hnext;
    n->hashed = false;
    fs->nnodes--;
    fs->table_seq++;
}

static zpl_node_t *node_alloc(zpl_fs_t *fs, uint64_t obj, zpl_node_kind_t kind)
{
    zpl_node_t *n = cairn_zalloc(sizeof(*n));
    n->fs = fs;
    n->obj = obj;
    n->kind = kind;
    n->refcnt = 1;
    pthread_rwlock_init(&n->lock, NULL);
    pthread_mutex_init(&n->data_lock, NULL);
    return n;
}

static void node_free(zpl_node_t *n)
{
    pthread_rwlock_destroy(&n->lock);
    pthread_mutex_destroy(&n->data_lock);
    free(n);
}

void zpl_node_hold(zpl_node_t *n)
{
    pthread_mutex_lock(&n->fs->table_lock);
    n->refcnt++;
    pthread_mutex_unlock(&n->fs->table_lock);
}

void zpl_node_rele(zpl_node_t *n)
{
    if (!n) return;
    zpl_fs_t *fs = n->fs;
    pthread_mutex_lock(&fs->table_lock);
    bool last = --n->refcnt == 0;
    if (last) table_remove(fs, n);
    pthread_mutex_unlock(&fs->table_lock);
    /* Virtual nodes keep the fs's own reference until unmount. */
    if (last) node_free(n);
}

static int phys_load(zpl_fs_t *fs, uint64_t obj, zpl_phys_t *p)
{
    uint32_t len = 0;
    memset(p, 0, sizeof(*p));
    int err = dmu_bonus_read(fs->os, obj, p, sizeof(*p), &len);
    if (err == -ENOENT || err == -EINVAL) return -ESTALE;
    if (err) return err;
    if (len < ZPL_PHYS_HDR || p->magic != ZPL_MAGIC || p->nlink == 0) return -ESTALE;
    if (p->inline_len > ZPL_INLINE_MAX) return -EIO;
    return 0;
}

/* The node of obj, with a reference: from the table, else loaded from its bonus. */
static int node_get(zpl_fs_t *fs, uint64_t obj, zpl_node_t **out)
{
    if (obj == ZPL_INO_CTLDIR || obj == ZPL_INO_SNAPDIR) {
        zpl_node_t *v = obj == ZPL_INO_CTLDIR ? fs->ctldir : fs->snapdir;
        if (!v) return -ESTALE;
        zpl_node_hold(v);
        *out = v;
        return 0;
    }
    if (obj == 0 || obj == ZPL_MASTER_OBJ) return -ESTALE;
    for (;;) {
        pthread_mutex_lock(&fs->table_lock);
        zpl_node_t *n = table_find(fs, obj);
        if (n) {
            n->refcnt++;
            pthread_mutex_unlock(&fs->table_lock);
            *out = n;
            return 0;
        }
        uint64_t seq = fs->table_seq;
        pthread_mutex_unlock(&fs->table_lock);

        zpl_phys_t p;
        int err = phys_load(fs, obj, &p);
        if (err) return err;

        pthread_mutex_lock(&fs->table_lock);
        n = table_find(fs, obj);
        if (n) {
            n->refcnt++;
        } else if (fs->table_seq == seq) {
            /* Nothing was hashed or unhashed meanwhile: what we read is current. */
            n = node_alloc(fs, obj, ZPL_NODE_REAL);
            n->phys = p;
            table_insert(fs, n);
        }
        pthread_mutex_unlock(&fs->table_lock);
        if (n) {
            *out = n;
            return 0;
        }
    }
}

/* Hashes a node made for a new object (its number was free, so nothing live is hashed under it). */
static zpl_node_t *node_new(zpl_fs_t *fs, uint64_t obj, const zpl_phys_t *p)
{
    zpl_node_t *n = node_alloc(fs, obj, ZPL_NODE_REAL);
    n->phys = *p;
    pthread_mutex_lock(&fs->table_lock);
    zpl_node_t *stale = table_find(fs, obj);
    if (stale) table_remove(fs, stale);   /* a dead node: its rele frees it */
    table_insert(fs, n);
    pthread_mutex_unlock(&fs->table_lock);
    return n;
}

static void node_kill(zpl_node_t *n)
{
    n->dead = true;
    pthread_mutex_lock(&n->fs->table_lock);
    table_remove(n->fs, n);
    pthread_mutex_unlock(&n->fs->table_lock);
}

static int phys_write(zpl_node_t *n, dmu_tx_t *tx)
{
    return dmu_bonus_write(n->fs->os, n->obj, &n->phys, ZPL_PHYS_HDR + n->phys.inline_len, tx);
}

static void touch(zpl_node_t *n, bool mtime, int64_t now)
{
    if (mtime) n->phys.mtime = now;
    n->phys.ctime = now;
    n->phys.change++;
}

/* ------------------------------------------------------------------ */
/* attributes                                                         */

static void virtual_attr(zpl_node_t *n, zpl_attr_t *a)
{
    zpl_fs_t *fs = n->fs;
    memset(a, 0, sizeof(*a));
    a->mode = S_IFDIR | 0555;
    a->nlink = 2;
    a->size = 2;
    a->blksize = 512;
    a->ino = n->obj;
    a->parent = n->kind == ZPL_NODE_CTLDIR ? fs->root_obj : ZPL_INO_CTLDIR;
    a->fsid = fs->guid;
    /* Times of the root, so the directory looks as old as the filesystem. */
    zpl_node_t *root;
    if (node_get(fs, fs->root_obj, &root) == 0) {
        pthread_rwlock_rdlock(&root->lock);
        a->atime_ns = a->mtime_ns = a->ctime_ns = a->crtime_ns = root->phys.crtime;
        pthread_rwlock_unlock(&root->lock);
        zpl_node_rele(root);
    }
    a->change = 1;
}

/* n->lock held (either way). */
static void attr_fill(zpl_node_t *n, zpl_attr_t *a)
{
    if (n->kind != ZPL_NODE_REAL) {
        virtual_attr(n, a);
        return;
    }
    const zpl_phys_t *p = &n->phys;
    memset(a, 0, sizeof(*a));
    a->mode = p->mode;
    a->uid = p->uid;
    a->gid = p->gid;
    a->nlink = p->nlink;
    a->size = p->size;
    a->rdev = p->rdev;
    a->atime_ns = p->atime;
    a->mtime_ns = p->mtime;
    a->ctime_ns = p->ctime;
    a->crtime_ns = p->crtime;
    a->ino = n->obj;
    a->parent = p->parent;
    a->generation = p->gen;
    a->change = p->change;
    a->fsid = n->fs->guid;
    dmu_object_info_t oi;
    if (dmu_object_info(n->fs->os, n->obj, &oi) == 0) {
        a->blksize = oi.props.recordsize;
        a->used = oi.used_bytes;
    }
}

static void wcc_pre(const zpl_node_t *n, zpl_wcc_t *w)
{
    if (!w) return;
    memset(w, 0, sizeof(*w));
    w->pre_size = n->phys.size;
    w->pre_mtime_ns = n->phys.mtime;
    w->pre_ctime_ns = n->phys.ctime;
    w->pre_change = n->phys.change;
}

static void wcc_post(zpl_node_t *n, zpl_wcc_t *w)
{
    if (w) attr_fill(n, &w->post);
}

int zpl_getattr(zpl_node_t *n, zpl_attr_t *out)
{
    if (n->kind != ZPL_NODE_REAL) {
        virtual_attr(n, out);
        return 0;
    }
    pthread_rwlock_rdlock(&n->lock);
    int err = n->dead ? -ESTALE : 0;
    if (!err) attr_fill(n, out);
    pthread_rwlock_unlock(&n->lock);
    return err;
}

int zpl_access(zpl_node_t *n, const zpl_cred_t *cred, uint32_t want, uint32_t *granted)
{
    zpl_attr_t a;
    int err = zpl_getattr(n, &a);
    if (err) return err;
    uint32_t perm;
    if (cred->uid == 0) {
        perm = ZPL_ACCESS_READ | ZPL_ACCESS_WRITE;
        if ((a.mode & 0111) || S_ISDIR(a.mode)) perm |= ZPL_ACCESS_EXEC;
    } else if (cred->uid == a.uid) {
        perm = (a.mode >> 6) & 7;
    } else {
        bool in_group = cred->gid == a.gid;
        for (uint32_t i = 0; !in_group && i < cred->ngroups && i < 16; i++)
            in_group = cred->groups[i] == a.gid;
        perm = in_group ? (a.mode >> 3) & 7 : a.mode & 7;
    }
    if (zpl_fs_readonly(n->fs)) perm &= ~(uint32_t)ZPL_ACCESS_WRITE;
    *granted = perm & want;
    return 0;
}

/* ------------------------------------------------------------------ */
/* transactions                                                       */

/* Begins the one transaction of a change: -EROFS on a read-only dataset,
 * -EDQUOT/-ENOSPC when `space` new bytes would not fit. Never call with a
 * node lock held (it may wait on the write throttle). The transaction joins a
 * txg only at its first change, made under the node locks, so changes to a
 * node land in txgs in the order they were made. */
static int op_begin(zpl_fs_t *fs, uint64_t space, dsl_dataset_props_t *props, dmu_tx_t **tx)
{
    if (fs->snapshot) return -EROFS;
    props_get(fs, props);
    if (props->readonly) return -EROFS;
    if (space) {
        int err = dsl_dataset_check_space(fs->ds, space);
        if (err) return err;
    }
    *tx = dmu_tx_begin(fs->os);
    int err = dmu_tx_suspended(*tx) ? -EIO : dmu_tx_readonly(*tx) ? -EROFS : 0;
    if (err) dmu_tx_commit(*tx);
    return err;
}

/* Commits; makes it durable when asked (FILE_SYNC) or when sync=always.
 * ZIL: an operation that logged no records of its own (logged == false) is a
 * barrier in the intent log: a later commit waits for its txg. */
static int op_end_logged(zpl_fs_t *fs, const dsl_dataset_props_t *props, dmu_tx_t *tx,
                         bool sync, int err, bool logged)
{
    uint64_t txg = dmu_tx_txg(tx);
    dmu_tx_commit(tx);
    if (!logged) zil_log_barrier(fs->zil, txg);
    if (err) return err;
    if (props->sync == DSL_SYNC_DISABLED) return 0;
    if (sync || props->sync == DSL_SYNC_ALWAYS) return zil_commit(fs->zil, 0);
    return 0;
}

/* Whether to write an operation's intent-log record. sync=disabled never
 * commits: its changes stay barriers, cheap to queue, which keeps a commit
 * after the property changes from replaying records that depend on them. */
static bool zil_wanted(const dsl_dataset_props_t *props)
{
    return props->sync != DSL_SYNC_DISABLED;
}

static uint64_t new_gen(zpl_fs_t *fs, dmu_tx_t *tx)
{
    uint64_t seq = atomic_fetch_add(&fs->gen_seq, 1) & 0xfffff;
    return (dmu_tx_txg(tx) << 20) | seq;
}

dmu_object_props_t zpl_object_props(const dsl_dataset_props_t *dp, uint32_t recordsize)
{
    dmu_object_props_t p = {
        .recordsize = recordsize ? recordsize : dp->recordsize,
        .compress = dp->compress,
        .checksum = dp->checksum,
        .copies = dp->copies ? dp->copies : 1,
    };
    if (p.recordsize < DMU_MIN_RECORDSIZE) p.recordsize = 128 * 1024;
    return p;
}

/* ------------------------------------------------------------------ */
/* mounting                                                           */

static int fs_setup_master(zpl_fs_t *fs)
{
    uint64_t root = 0;
    int err = zap_lookup_u64(fs->os, ZPL_MASTER_OBJ, "ROOT", &root);
    if (err == 0) {
        fs->root_obj = root;
        return 0;
    }
    dmu_object_info_t oi;
    if (dmu_object_info(fs->os, ZPL_MASTER_OBJ, &oi) != -ENOENT)
        return -EIO;   /* something else lives where the master node must */
    if (fs->snapshot) return -ENOENT;   /* a snapshot of a never-mounted filesystem */
    /* The filesystem's first structure is not a change of its contents: it is
     * made under readonly=on too (a dataset set read-only before it was ever
     * mounted must still be shareable), so not through op_begin; a read-only
     * pool still refuses it. */
    dmu_tx_t *tx = dmu_tx_begin(fs->os);
    if (dmu_tx_readonly(tx)) {
        dmu_tx_commit(tx);
        return -EROFS;
    }
    uint64_t master = 0;
    err = zap_create(fs->os, &master, tx);
    if (!err && master != ZPL_MASTER_OBJ) err = -EIO;
    if (!err) err = zap_create(fs->os, &root, tx);
    zpl_phys_t p;
    memset(&p, 0, sizeof(p));
    if (!err) {
        int64_t now = now_ns();
        p.magic = ZPL_MAGIC;
        p.version = ZPL_VERSION;
        p.mode = S_IFDIR | 0755;
        p.nlink = 2;
        p.size = 2;
        p.gen = new_gen(fs, tx);
        p.parent = root;
        p.change = 1;
        p.atime = p.mtime = p.ctime = p.crtime = now;
        err = dmu_bonus_write(fs->os, root, &p, ZPL_PHYS_HDR, tx);
    }
    if (!err) err = zap_add_u64(fs->os, master, "VERSION", ZPL_VERSION, tx);
    if (!err) err = zap_add_u64(fs->os, master, "ROOT", root, tx);
    dmu_tx_commit(tx);
    if (err) return err;
    fs->root_obj = root;
    return 0;
}

/* Frees every object the unlinked set names: nothing can hold them open across
 * a mount. A read-only dataset keeps them until it is next mounted writable. */
static int unlinked_drain(zpl_fs_t *fs)
{
    if (fs->snapshot || !fs->unlinked_obj) return 0;
    uint64_t *objs = NULL;
    size_t n = 0, cap = 0;
    zap_cursor_t zc;
    zap_entry_t e;
    int err;
    zap_cursor_init(&zc, fs->os, fs->unlinked_obj, 0);
    while ((err = zap_cursor_next(&zc, &e)) == 1) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            objs = cairn_realloc(objs, cap * sizeof(*objs));
        }
        objs[n++] = strtoull(e.name, NULL, 16);
    }
    if (err < 0 || n == 0) {
        free(objs);
        return err;
    }
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    err = op_begin(fs, 0, &props, &tx);
    if (err) {
        free(objs);
        return err == -EROFS ? 0 : err;
    }
    for (size_t i = 0; i < n && !err; i++) {
        char name[24];
        snprintf(name, sizeof(name), "%llx", (unsigned long long)objs[i]);
        err = zpl_xattr_free(fs->os, objs[i], tx);
        if (!err) err = dmu_object_free(fs->os, objs[i], tx);
        if (err == -ENOENT) err = 0;   /* freed by intent-log replay */
        if (!err) err = zap_remove(fs->os, fs->unlinked_obj, name, tx);
    }
    if (!err) log_info("zpl", "%s: freed %zu files unlinked while open", fs->name, n);
    free(objs);
    return op_end_logged(fs, &props, tx, false, err, false);
}

static int fs_open(dsl_pool_t *dp, const char *dsname, zpl_fs_t **out)
{
    dsl_dataset_t *ds;
    int err = dsl_dataset_hold(dp, dsname, &ds);
    if (err) return err;
    if (dsl_dataset_type(ds) == DSL_TYPE_VOLUME) {
        dsl_dataset_rele(ds);
        return -EINVAL;
    }
    zpl_fs_t *fs = cairn_zalloc(sizeof(*fs));
    fs->dp = dp;
    fs->ds = ds;
    fs->os = dsl_dataset_objset(ds);
    fs->guid = dsl_dataset_guid(ds);
    fs->snapshot = dsl_dataset_is_snapshot(ds);
    /* The object set may have been replaced while unmounted (rollback): drop any
     * ZAP blocks cached from its earlier contents. */
    zap_objset_evict(fs->os);
    cairn_strlcpy(fs->name, dsl_dataset_name(ds), sizeof(fs->name));
    pthread_mutex_init(&fs->table_lock, NULL);
    pthread_mutex_init(&fs->rename_lock, NULL);
    pthread_mutex_init(&fs->snap_lock, NULL);
    pthread_mutex_init(&fs->unlinked_lock, NULL);
    pthread_mutex_init(&fs->xattr_lock, NULL);
    fs->nbuckets = 256;
    fs->buckets = cairn_zalloc(fs->nbuckets * sizeof(*fs->buckets));
    atomic_store(&fs->link_max, ZPL_LINK_MAX_DEFAULT);
    fs->mount_refs = 1;
    err = fs_setup_master(fs);
    if (err) {
        free(fs->buckets);
        dsl_dataset_rele(ds);
        free(fs);
        return err;
    }
    if (zap_lookup_u64(fs->os, ZPL_MASTER_OBJ, "DELETE_QUEUE", &fs->unlinked_obj))
        fs->unlinked_obj = 0;
    /* ZIL: replays a log left by a crash before anyone can see the filesystem. */
    if (!err && !fs->snapshot) err = zil_open(fs->os, zpl_zil_replay, fs, &fs->zil);
    if (!err && !fs->snapshot) {
        /* Not fatal: what stays in the set is freed at a later mount. */
        int derr = unlinked_drain(fs);
        if (derr) log_warn("zpl", "%s: freeing the unlinked set: %s", fs->name, strerror(-derr));
    }
    if (err) {
        free(fs->buckets);
        dsl_dataset_rele(ds);
        free(fs);
        return err;
    }
    if (!fs->snapshot) {
        fs->ctldir = node_alloc(fs, ZPL_INO_CTLDIR, ZPL_NODE_CTLDIR);
        fs->snapdir = node_alloc(fs, ZPL_INO_SNAPDIR, ZPL_NODE_SNAPDIR);
    }
    *out = fs;
    return 0;
}

int zpl_mount(dsl_pool_t *dp, const char *dsname, zpl_fs_t **out)
{
    /* One zpl_fs_t per dataset: a second mount shares the first's node table. */
    dsl_dataset_t *ds;
    int err = dsl_dataset_hold(dp, dsname, &ds);
    if (err) return err;
    uint64_t guid = dsl_dataset_guid(ds);
    dsl_dataset_rele(ds);
    pthread_mutex_lock(&zpl_global_lock);
    for (zpl_fs_t *f = zpl_mounts; f; f = f->gnext) {
        if (f->dp == dp && f->guid == guid) {
            f->mount_refs++;
            *out = f;
            pthread_mutex_unlock(&zpl_global_lock);
            return 0;
        }
    }
    zpl_fs_t *fs;
    err = fs_open(dp, dsname, &fs);
    if (!err) {
        fs->gnext = zpl_mounts;
        zpl_mounts = fs;
        *out = fs;
    }
    pthread_mutex_unlock(&zpl_global_lock);
    return err;
}

static bool fs_busy(zpl_fs_t *fs)
{
    pthread_mutex_lock(&fs->table_lock);
    bool busy = fs->nnodes > 0 || (fs->ctldir && fs->ctldir->refcnt > 1) ||
                (fs->snapdir && fs->snapdir->refcnt > 1);
    pthread_mutex_unlock(&fs->table_lock);
    return busy;
}

static void fs_destroy(zpl_fs_t *fs)
{
    zil_close(fs->zil); /* ZIL */
    if (fs->ctldir) node_free(fs->ctldir);
    if (fs->snapdir) node_free(fs->snapdir);
    free(fs->buckets);
    free(fs->snaps);
    dsl_dataset_rele(fs->ds);
    pthread_mutex_destroy(&fs->table_lock);
    pthread_mutex_destroy(&fs->rename_lock);
    pthread_mutex_destroy(&fs->snap_lock);
    pthread_mutex_destroy(&fs->unlinked_lock);
    pthread_mutex_destroy(&fs->xattr_lock);
    free(fs);
}

/* zpl_global_lock held. Drops one mount reference; -EBUSY leaves it. */
static int fs_unmount_locked(zpl_fs_t *fs)
{
    CAIRN_ASSERT(cairn_mutex_held(&zpl_global_lock));
    if (fs->mount_refs > 1) {
        fs->mount_refs--;
        return 0;
    }
    if (fs_busy(fs)) return -EBUSY;
    pthread_mutex_lock(&fs->snap_lock);
    for (size_t i = 0; i < fs->nsnaps; i++)
        if (fs_busy(fs->snaps[i].fs) && fs->snaps[i].fs->mount_refs <= 1) {
            pthread_mutex_unlock(&fs->snap_lock);
            return -EBUSY;
        }
    for (size_t i = 0; i < fs->nsnaps; i++) (void)fs_unmount_locked(fs->snaps[i].fs);
    fs->nsnaps = 0;
    pthread_mutex_unlock(&fs->snap_lock);
    for (zpl_fs_t **pp = &zpl_mounts; *pp; pp = &(*pp)->gnext) {
        if (*pp == fs) {
            *pp = fs->gnext;
            break;
        }
    }
    fs_destroy(fs);
    return 0;
}

int zpl_unmount(zpl_fs_t *fs)
{
    pthread_mutex_lock(&zpl_global_lock);
    int err = fs_unmount_locked(fs);
    pthread_mutex_unlock(&zpl_global_lock);
    return err;
}

int zpl_fs_release_snapshots(zpl_fs_t *fs)
{
    pthread_mutex_lock(&zpl_global_lock);
    pthread_mutex_lock(&fs->snap_lock);
    size_t keep = 0;
    for (size_t i = 0; i < fs->nsnaps; i++) {
        zpl_fs_t *s = fs->snaps[i].fs;
        if (s->mount_refs <= 1 && fs_busy(s)) {
            fs->snaps[keep++] = fs->snaps[i];
            continue;
        }
        (void)fs_unmount_locked(s);
    }
    fs->nsnaps = keep;
    pthread_mutex_unlock(&fs->snap_lock);
    pthread_mutex_unlock(&zpl_global_lock);
    return (int)keep;
}

uint64_t zpl_fs_guid(zpl_fs_t *fs) { return fs->guid; }
dsl_dataset_t *zpl_fs_dataset(zpl_fs_t *fs) { return fs->ds; }
zpl_fs_t *zpl_fs_parent(zpl_fs_t *fs) { return fs->parent; }
void zpl_fs_set_link_max(zpl_fs_t *fs, uint64_t link_max) { atomic_store(&fs->link_max, link_max); }

bool zpl_fs_readonly(zpl_fs_t *fs)
{
    if (fs->snapshot) return true;
    dsl_dataset_props_t p;
    props_get(fs, &p);
    return p.readonly;
}

typedef struct statfs_arg {
    uint64_t used, avail;
    bool found;
} statfs_arg_t;

static void statfs_cb(const dsl_dataset_info_t *info, void *arg)
{
    statfs_arg_t *s = arg;
    s->used = info->used;
    s->avail = info->available;
    s->found = true;
}

int zpl_statfs(zpl_fs_t *fs, zpl_statfs_t *out)
{
    statfs_arg_t s = {0};
    char err[256], name[DSL_NAME_MAX + 1];
    dsl_dataset_get_name(fs->ds, name, sizeof(name));   /* renamed since the mount? */
    int e = dsl_dataset_list(fs->dp, name, false, 1u << dsl_dataset_type(fs->ds), statfs_cb,
                             &s, err, sizeof(err));
    if (e) return e;
    if (!s.found) return -ESTALE;
    dsl_dataset_props_t p;
    props_get(fs, &p);
    memset(out, 0, sizeof(*out));
    out->avail_bytes = fs->snapshot ? 0 : s.avail;
    out->free_bytes = out->avail_bytes;
    out->total_bytes = s.used + s.avail;
    out->free_files = out->avail_bytes / 512;
    out->total_files = out->total_bytes / 512;
    out->blocksize = p.recordsize ? p.recordsize : 128 * 1024;
    out->name_max = ZPL_NAME_MAX;
    out->fsid = fs->guid;
    return 0;
}

int zpl_root(zpl_fs_t *fs, zpl_node_t **out) { return node_get(fs, fs->root_obj, out); }

int zpl_iget(zpl_fs_t *fs, uint64_t ino, zpl_node_t **out) { return node_get(fs, ino, out); }

zpl_fs_t *zpl_node_fs(zpl_node_t *n) { return n->fs; }
uint64_t zpl_node_ino(zpl_node_t *n) { return n->obj; }
int zpl_node_path(zpl_node_t *n, char *buf, size_t len)
{
    return n->kind == ZPL_NODE_REAL ? zpl_obj_to_path(n->fs->os, n->obj, buf, len) : -ENOENT;
}
/* phys.gen never changes once the node exists: no lock needed. */
uint64_t zpl_node_gen(zpl_node_t *n) { return n->kind == ZPL_NODE_REAL ? n->phys.gen : 0; }

int zpl_open_hold(zpl_node_t *n)
{
    if (n->kind != ZPL_NODE_REAL || n->fs->snapshot) return 0;
    pthread_rwlock_wrlock(&n->lock);
    int err = n->dead ? -ESTALE : 0;
    if (!err) n->opens++;
    pthread_rwlock_unlock(&n->lock);
    return err;
}

static void unlinked_name(uint64_t obj, char name[24])
{
    snprintf(name, 24, "%llx", (unsigned long long)obj);
}

void zpl_open_rele(zpl_node_t *n)
{
    if (n->kind != ZPL_NODE_REAL || n->fs->snapshot) return;
    pthread_rwlock_wrlock(&n->lock);
    bool last = --n->opens == 0 && n->phys.nlink == 0 && !n->dead;
    pthread_rwlock_unlock(&n->lock);
    if (!last) return;
    /* The last opener of an unlinked file: free it now. On failure (read-only
     * meanwhile, I/O error) it stays in the unlinked set for the next mount. */
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    if (op_begin(fs, 0, &props, &tx)) return;
    int err = 0;
    pthread_rwlock_wrlock(&n->lock);
    if (n->opens == 0 && n->phys.nlink == 0 && !n->dead) {
        char name[24];
        unlinked_name(n->obj, name);
        err = zpl_xattr_free(fs->os, n->obj, tx);
        if (!err) err = dmu_object_free(fs->os, n->obj, tx);
        if (!err) err = zap_remove(fs->os, fs->unlinked_obj, name, tx);
        if (!err) node_kill(n);
    }
    pthread_rwlock_unlock(&n->lock);
    if (err) log_warn("zpl", "%s: freeing unlinked object %llu: %s", fs->name,
                      (unsigned long long)n->obj, strerror(-err));
    (void)op_end_logged(fs, &props, tx, false, err, false);
}

/* ------------------------------------------------------------------ */
/* snapshots (.cairn/snapshot)                                        */

/* Whether snapshot mount s of head (named head now) is still called snap: a
 * snapshot renamed since it was mounted answers to its new name only. */
static bool snap_named(zpl_fs_t *s, const char *head, const char *snap)
{
    char cur[DSL_NAME_MAX + 1];
    dsl_dataset_get_name(s->ds, cur, sizeof(cur));
    size_t hl = strlen(head);
    return !strncmp(cur, head, hl) && cur[hl] == '@' && !strcmp(cur + hl + 1, snap);
}

/* The snapshot `snap` of head fs, mounted through it (cached); a mount reference
 * stays with the head. */
static int snap_mount(zpl_fs_t *fs, const char *snap, zpl_fs_t **out)
{
    if (!*snap || strchr(snap, '/') || strchr(snap, '@') || strlen(snap) > ZPL_NAME_MAX)
        return -ENOENT;
    char head[DSL_NAME_MAX + 1];
    dsl_dataset_get_name(fs->ds, head, sizeof(head));
    pthread_mutex_lock(&fs->snap_lock);
    for (size_t i = 0; i < fs->nsnaps; i++) {
        if (!strcmp(fs->snaps[i].name, snap)) {
            bool named = snap_named(fs->snaps[i].fs, head, snap);
            if (spa_memory_only_refused()) { /* the names are not real: change nothing */
                pthread_mutex_unlock(&fs->snap_lock);
                return -EWOULDBLOCK;
            }
            if (!named) {
                fs->snaps[i].name[0] = 0;   /* renamed: found by its new name below */
                break;
            }
            *out = fs->snaps[i].fs;
            pthread_mutex_unlock(&fs->snap_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&fs->snap_lock);
    char full[2 * DSL_NAME_MAX + 2];
    snprintf(full, sizeof(full), "%s@%s", head, snap);
    if (strlen(full) > DSL_NAME_MAX) return -ENOENT;
    /* Mounting opens the snapshot's object set and takes the pool's locks as it
     * goes: never on a thread that must not wait (spa.h), however free they are. */
    int err = spa_memory_only_refuse();
    if (err) return err;
    zpl_fs_t *s;
    err = zpl_mount(fs->dp, full, &s);
    if (err) return err == -EINVAL ? -ENOENT : err;
    pthread_mutex_lock(&fs->snap_lock);
    for (size_t i = 0; i < fs->nsnaps; i++) {
        /* Lost a race, or mounted before under an older name (the registry gave
         * us the same mount): keep the first, under the name asked for. */
        if (!strcmp(fs->snaps[i].name, snap) || fs->snaps[i].fs == s) {
            cairn_strlcpy(fs->snaps[i].name, snap, sizeof(fs->snaps[0].name));
            *out = fs->snaps[i].fs;
            pthread_mutex_unlock(&fs->snap_lock);
            zpl_unmount(s);
            return 0;
        }
    }
    s->parent = fs;
    fs->snaps = cairn_realloc(fs->snaps, (fs->nsnaps + 1) * sizeof(*fs->snaps));
    cairn_strlcpy(fs->snaps[fs->nsnaps].name, snap, sizeof(fs->snaps[0].name));
    fs->snaps[fs->nsnaps].fs = s;
    fs->nsnaps++;
    pthread_mutex_unlock(&fs->snap_lock);
    *out = s;
    return 0;
}

typedef struct snaplist {
    char **names;
    uint64_t *cookies;
    size_t n, cap;
} snaplist_t;

static void snaplist_cb(const char *snap, void *arg)
{
    snaplist_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->names = cairn_realloc(l->names, l->cap * sizeof(*l->names));
        l->cookies = cairn_realloc(l->cookies, l->cap * sizeof(*l->cookies));
    }
    /* A cookie from the name (FNV-1a), so it stays put when other snapshots come and go. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = snap; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    l->names[l->n] = cairn_strdup(snap);
    l->cookies[l->n] = (h >> 2) | (1ull << 62);   /* never 0, 1 or 2 */
    l->n++;
}

static int snapdir_readdir(zpl_node_t *dir, uint64_t cookie, zpl_readdir_fn fn, void *arg,
                           bool *eof)
{
    zpl_fs_t *fs = dir->fs;
    snaplist_t l = {0};
    int err = dsl_dataset_list_snapshots(fs->ds, snaplist_cb, &l);
    /* cookie order */
    for (size_t i = 1; i < l.n; i++)
        for (size_t j = i; j > 0 && l.cookies[j - 1] > l.cookies[j]; j--) {
            uint64_t c = l.cookies[j];
            l.cookies[j] = l.cookies[j - 1];
            l.cookies[j - 1] = c;
            char *s = l.names[j];
            l.names[j] = l.names[j - 1];
            l.names[j - 1] = s;
        }
    bool done = true;
    if (!err) {
        for (size_t i = 0; i < l.n; i++) {
            if (l.cookies[i] <= cookie) continue;
            /* The inode number shown is the snapshot root's, as lookup returns it. */
            uint64_t ino = fs->root_obj;
            if (fn(arg, l.names[i], ino, DT_DIR, l.cookies[i])) {
                done = false;
                break;
            }
        }
    }
    for (size_t i = 0; i < l.n; i++) free(l.names[i]);
    free(l.names);
    free(l.cookies);
    if (eof) *eof = done;
    return err;
}

/* ------------------------------------------------------------------ */
/* lookup and readdir                                                 */

static int lookup_virtual(zpl_node_t *dir, const char *name, zpl_node_t **out)
{
    zpl_fs_t *fs = dir->fs;
    if (!strcmp(name, ".")) {
        zpl_node_hold(dir);
        *out = dir;
        return 0;
    }
    if (dir->kind == ZPL_NODE_CTLDIR) {
        if (!strcmp(name, "..")) return node_get(fs, fs->root_obj, out);
        if (!strcmp(name, "snapshot")) return node_get(fs, ZPL_INO_SNAPDIR, out);
        return -ENOENT;
    }
    if (!strcmp(name, "..")) return node_get(fs, ZPL_INO_CTLDIR, out);
    zpl_fs_t *s;
    int err = snap_mount(fs, name, &s);
    if (err) return err;
    return zpl_root(s, out);
}

int zpl_lookup(zpl_node_t *dir, const char *name, zpl_node_t **out)
{
    size_t len = strnlen(name, ZPL_NAME_MAX + 1);
    if (len == 0) return -ENOENT;
    if (len > ZPL_NAME_MAX) return -ENAMETOOLONG;
    if (dir->kind != ZPL_NODE_REAL) return lookup_virtual(dir, name, out);
    zpl_fs_t *fs = dir->fs;
    pthread_rwlock_rdlock(&dir->lock);
    int err = 0;
    if (dir->dead) err = -ESTALE;
    else if (!S_ISDIR(dir->phys.mode)) err = -ENOTDIR;
    if (err) goto out;
    if (!strcmp(name, ".")) {
        zpl_node_hold(dir);
        *out = dir;
    } else if (!strcmp(name, "..")) {
        if (dir->obj == fs->root_obj && fs->parent)
            err = node_get(fs->parent, ZPL_INO_SNAPDIR, out);
        else
            err = node_get(fs, dir->phys.parent, out);
    } else if (is_ctl_name(dir, name)) {
        err = node_get(fs, ZPL_INO_CTLDIR, out);
    } else {
        uint64_t v;
        err = zap_lookup_u64(fs->os, dir->obj, name, &v);
        /* Under the directory's lock the entry and its object agree. */
        if (!err) err = node_get(fs, dirent_obj(v), out);
        if (err == -ESTALE) err = -EIO;
    }
out:
    pthread_rwlock_unlock(&dir->lock);
    return err;
}

int zpl_readdir(zpl_node_t *dir, uint64_t cookie, zpl_readdir_fn fn, void *arg, bool *eof)
{
    if (eof) *eof = false;
    if (dir->kind == ZPL_NODE_CTLDIR) {
        if (cookie < 1 && fn(arg, ".", dir->obj, DT_DIR, 1)) return 0;
        if (cookie < 2 && fn(arg, "..", dir->fs->root_obj, DT_DIR, 2)) return 0;
        if (cookie < 3 && fn(arg, "snapshot", ZPL_INO_SNAPDIR, DT_DIR, 3)) return 0;
        if (eof) *eof = true;
        return 0;
    }
    if (dir->kind == ZPL_NODE_SNAPDIR) {
        if (cookie < 1 && fn(arg, ".", dir->obj, DT_DIR, 1)) return 0;
        if (cookie < 2 && fn(arg, "..", ZPL_INO_CTLDIR, DT_DIR, 2)) return 0;
        return snapdir_readdir(dir, cookie, fn, arg, eof);
    }
    zpl_fs_t *fs = dir->fs;
    pthread_rwlock_rdlock(&dir->lock);
    int err = 0;
    if (dir->dead) err = -ESTALE;
    else if (!S_ISDIR(dir->phys.mode)) err = -ENOTDIR;
    if (err) goto out;
    if (cookie < 1 && fn(arg, ".", dir->obj, DT_DIR, 1)) goto out;
    if (cookie < 2) {
        uint64_t parent = dir->phys.parent;
        if (dir->obj == fs->root_obj && fs->parent) parent = ZPL_INO_SNAPDIR;
        if (fn(arg, "..", parent, DT_DIR, 2)) goto out;
    }
    zap_cursor_t zc;
    zap_cursor_init(&zc, fs->os, dir->obj, cookie <= 2 ? 0 : cookie);
    zap_entry_t *e = malloc(sizeof(*e));
    if (!e) {
        err = -ENOMEM;
        goto out;
    }
    for (;;) {
        int r = zap_cursor_next(&zc, e);
        if (r < 0) {
            err = r;
            break;
        }
        if (r == 0) {
            if (eof) *eof = true;
            break;
        }
        uint64_t v = 0;
        memcpy(&v, e->value, CAIRN_MIN(e->value_len, (uint32_t)sizeof(v)));
        if (fn(arg, e->name, dirent_obj(v), dirent_dt(v), e->next_cookie)) break;
    }
    free(e);
out:
    pthread_rwlock_unlock(&dir->lock);
    return err;
}

/* ------------------------------------------------------------------ */
/* creating                                                           */

typedef struct create_spec {
    uint32_t mode;                /* with type bits */
    uint64_t rdev;
    const char *target;           /* symlinks */
    zpl_create_how_t how;
    const uint8_t *verf;
} create_spec_t;

static void owner_of(const zpl_cred_t *cred, const zpl_node_t *dir, uint32_t *uid, uint32_t *gid)
{
    *uid = cred ? cred->uid : 0;
    *gid = cred ? cred->gid : 0;
    /* setgid directories hand their group down, as in BSD and Linux. */
    if (dir->kind == ZPL_NODE_REAL && (dir->phys.mode & S_ISGID)) *gid = dir->phys.gid;
}

static int dir_writable_check(zpl_node_t *dir)
{
    if (dir->dead) return -ESTALE;
    if (!S_ISDIR(dir->phys.mode)) return -ENOTDIR;
    return 0;
}

static int do_create(zpl_node_t *dir, const char *name, const create_spec_t *cs,
                     const zpl_cred_t *cred, zpl_node_t **out, zpl_wcc_t *dir_wcc)
{
    if (out) *out = NULL;
    if (dir->kind != ZPL_NODE_REAL) return -EROFS;
    int err = name_check(name);
    if (err) return err == -ENOENT ? -EINVAL : err;
    zpl_fs_t *fs = dir->fs;
    uint32_t type = cs->mode & S_IFMT;
    size_t tlen = cs->target ? strlen(cs->target) : 0;
    if (type == S_IFLNK && (tlen == 0 || tlen > ZPL_SYMLINK_MAX))
        return tlen ? -ENAMETOOLONG : -EINVAL;
    if (is_ctl_name(dir, name)) return -EEXIST;

    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    err = op_begin(fs, ZPL_CREATE_SPACE + tlen, &props, &tx);
    if (err) return err;
    bool logged = false;
    pthread_rwlock_wrlock(&dir->lock);
    err = dir_writable_check(dir);
    if (err) goto out;
    wcc_pre(dir, dir_wcc);

    uint64_t v;
    err = zap_lookup_u64(fs->os, dir->obj, name, &v);
    if (err == 0) {
        err = -EEXIST;
        if (type == S_IFREG && cs->how != ZPL_CREATE_GUARDED) {
            zpl_node_t *old;
            int e2 = node_get(fs, dirent_obj(v), &old);
            if (e2) {
                err = e2 == -ESTALE ? -EIO : e2;
                goto out;
            }
            pthread_rwlock_rdlock(&old->lock);
            bool reg = S_ISREG(old->phys.mode);
            bool same = cs->how == ZPL_CREATE_EXCLUSIVE && (old->phys.flags & ZPL_ZF_EXCL) &&
                        !memcmp(old->phys.verf, cs->verf, ZPL_VERF_SIZE);
            pthread_rwlock_unlock(&old->lock);
            if (reg && (cs->how == ZPL_CREATE_UNCHECKED || same)) {
                err = 0;
                logged = true;   /* nothing changed */
                if (out) *out = old;
                else zpl_node_rele(old);
                wcc_post(dir, dir_wcc);
            } else {
                zpl_node_rele(old);
            }
        }
        goto out;
    }
    if (err != -ENOENT) goto out;
    if (type == S_IFDIR && dir->phys.nlink >= atomic_load(&fs->link_max)) {
        err = -EMLINK;
        goto out;
    }

    uint64_t obj = 0;
    uint32_t obj_rs = 0;
    if (type == S_IFDIR) {
        err = zap_create(fs->os, &obj, tx);
    } else {
        uint32_t rs = 0;
        if (type == S_IFLNK && tlen > ZPL_INLINE_MAX) {
            rs = DMU_MIN_RECORDSIZE;
            while (rs < tlen) rs <<= 1;
        }
        dmu_object_props_t op = zpl_object_props(&props, rs);
        obj_rs = op.recordsize;
        err = dmu_object_alloc(fs->os, &op, &obj, tx);
    }
    if (err) goto out;

    int64_t now = now_ns();
    zpl_phys_t p;
    memset(&p, 0, sizeof(p));
    p.magic = ZPL_MAGIC;
    p.version = ZPL_VERSION;
    p.mode = type | (cs->mode & 07777);
    owner_of(cred, dir, &p.uid, &p.gid);
    if (type == S_IFDIR && (dir->phys.mode & S_ISGID)) p.mode |= S_ISGID;
    p.nlink = type == S_IFDIR ? 2 : 1;
    p.size = type == S_IFDIR ? 2 : 0;
    p.gen = new_gen(fs, tx);
    p.parent = dir->obj;
    p.change = 1;
    p.rdev = (type == S_IFCHR || type == S_IFBLK) ? cs->rdev : 0;
    p.atime = p.mtime = p.ctime = p.crtime = now;
    if (type == S_IFREG && cs->how == ZPL_CREATE_EXCLUSIVE && cs->verf) {
        p.flags |= ZPL_ZF_EXCL;
        memcpy(p.verf, cs->verf, ZPL_VERF_SIZE);
    }
    if (type == S_IFLNK) {
        p.size = tlen;
        if (tlen <= ZPL_INLINE_MAX) {
            memcpy(p.inline_data, cs->target, tlen);
            p.inline_len = (uint16_t)tlen;
        } else {
            err = dmu_write(fs->os, obj, 0, tlen, cs->target, tx);
            p.flags |= ZPL_ZF_BLKSZ_FIXED;
        }
    }
    if (!err) err = dmu_bonus_write(fs->os, obj, &p, ZPL_PHYS_HDR + p.inline_len, tx);
    if (!err) err = zap_add_u64(fs->os, dir->obj, name, dirent_encode(mode_to_dt(type), obj), tx);
    if (err) {
        if (type == S_IFDIR) zap_destroy(fs->os, obj, tx);
        else dmu_object_free(fs->os, obj, tx);
        goto out;
    }
    dir->phys.size++;
    if (type == S_IFDIR) dir->phys.nlink++;
    touch(dir, true, now);
    err = phys_write(dir, tx);
    if (err) goto out;
    if (zil_wanted(&props)) {
        zpl_zil_log_create(dir, name, obj, &p, obj_rs,
                           type == S_IFLNK && !p.inline_len ? cs->target : NULL, tx);
        logged = true;
    }
    zpl_node_t *n = node_new(fs, obj, &p);
    if (out) *out = n;
    else zpl_node_rele(n);
    wcc_post(dir, dir_wcc);
out:
    pthread_rwlock_unlock(&dir->lock);
    return op_end_logged(fs, &props, tx, false, err, logged && !err);
}

int zpl_create(zpl_node_t *dir, const char *name, uint32_t mode, const zpl_cred_t *cred,
               zpl_create_how_t how, const uint8_t verf[ZPL_VERF_SIZE], zpl_node_t **out,
               zpl_wcc_t *dir_wcc)
{
    static const uint8_t zero_verf[ZPL_VERF_SIZE];
    if (how > ZPL_CREATE_EXCLUSIVE) return -EINVAL;
    create_spec_t cs = {.mode = S_IFREG | (mode & 07777), .how = how,
                        .verf = verf ? verf : zero_verf};
    return do_create(dir, name, &cs, cred, out, dir_wcc);
}

int zpl_mkdir(zpl_node_t *dir, const char *name, uint32_t mode, const zpl_cred_t *cred,
              zpl_node_t **out, zpl_wcc_t *dir_wcc)
{
    create_spec_t cs = {.mode = S_IFDIR | (mode & 07777), .how = ZPL_CREATE_GUARDED};
    return do_create(dir, name, &cs, cred, out, dir_wcc);
}

int zpl_symlink(zpl_node_t *dir, const char *name, const char *target, const zpl_cred_t *cred,
                zpl_node_t **out, zpl_wcc_t *dir_wcc)
{
    if (!target) return -EINVAL;
    create_spec_t cs = {.mode = S_IFLNK | 0777, .target = target, .how = ZPL_CREATE_GUARDED};
    return do_create(dir, name, &cs, cred, out, dir_wcc);
}

int zpl_mknod(zpl_node_t *dir, const char *name, uint32_t mode, uint64_t rdev,
              const zpl_cred_t *cred, zpl_node_t **out, zpl_wcc_t *dir_wcc)
{
    uint32_t t = mode & S_IFMT;
    if (t != S_IFIFO && t != S_IFSOCK && t != S_IFCHR && t != S_IFBLK) return -EINVAL;
    create_spec_t cs = {.mode = mode, .rdev = rdev, .how = ZPL_CREATE_GUARDED};
    return do_create(dir, name, &cs, cred, out, dir_wcc);
}

int zpl_readlink(zpl_node_t *n, char *buf, size_t cap, size_t *len)
{
    if (n->kind != ZPL_NODE_REAL) return -EINVAL;
    pthread_rwlock_rdlock(&n->lock);
    int err = 0;
    if (n->dead) err = -ESTALE;
    else if (!S_ISLNK(n->phys.mode)) err = -EINVAL;
    if (!err) {
        size_t tlen = n->phys.size;
        size_t c = CAIRN_MIN(tlen, cap);
        if (n->phys.inline_len) {
            memcpy(buf, n->phys.inline_data, c);
        } else if (c) {
            err = dmu_read(n->fs->os, n->obj, 0, c, buf);
        }
        if (!err && tlen < cap) buf[tlen] = '\0';
        *len = tlen;
    }
    pthread_rwlock_unlock(&n->lock);
    return err;
}

/* ------------------------------------------------------------------ */
/* link, remove, rmdir                                                */

int zpl_link(zpl_node_t *file, zpl_node_t *dir, const char *name, zpl_wcc_t *dir_wcc)
{
    if (file->fs != dir->fs) return -EXDEV;
    if (dir->kind != ZPL_NODE_REAL || file->kind != ZPL_NODE_REAL) return -EROFS;
    int err = name_check(name);
    if (err) return err == -ENOENT ? -EINVAL : err;
    if (is_ctl_name(dir, name)) return -EEXIST;
    zpl_fs_t *fs = dir->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    err = op_begin(fs, ZPL_CREATE_SPACE, &props, &tx);
    if (err) return err;
    bool logged = false;
    pthread_rwlock_wrlock(&dir->lock);
    bool same = dir == file;
    if (!same) pthread_rwlock_wrlock(&file->lock);
    err = dir_writable_check(dir);
    if (!err && file->dead) err = -ESTALE;
    if (!err && S_ISDIR(file->phys.mode)) err = -EPERM;
    if (!err && file->phys.nlink >= atomic_load(&fs->link_max)) err = -EMLINK;
    if (!err && file->phys.nlink == 0) err = -ENOENT;   /* unlinked, kept open */
    if (err) goto out;
    wcc_pre(dir, dir_wcc);
    uint64_t v;
    err = zap_lookup_u64(fs->os, dir->obj, name, &v);
    if (err == 0) err = -EEXIST;
    if (err != -ENOENT) goto out;
    err = zap_add_u64(fs->os, dir->obj, name,
                      dirent_encode(mode_to_dt(file->phys.mode), file->obj), tx);
    if (err) goto out;
    int64_t now = now_ns();
    file->phys.nlink++;
    touch(file, false, now);
    dir->phys.size++;
    touch(dir, true, now);
    err = phys_write(file, tx);
    if (!err) err = phys_write(dir, tx);
    if (!err && zil_wanted(&props)) {
        zpl_zil_log_link(dir, name, file, tx);
        logged = true;
    }
    wcc_post(dir, dir_wcc);
out:
    if (!same) pthread_rwlock_unlock(&file->lock);
    pthread_rwlock_unlock(&dir->lock);
    return op_end_logged(fs, &props, tx, false, err, logged && !err);
}

/* Puts n (locked, its last link going) into the unlinked set. */
static int unlinked_add(zpl_node_t *n, dmu_tx_t *tx)
{
    zpl_fs_t *fs = n->fs;
    int err = 0;
    pthread_mutex_lock(&fs->unlinked_lock);
    if (!fs->unlinked_obj) {
        uint64_t obj = 0;
        err = zap_create(fs->os, &obj, tx);
        if (!err) err = zap_add_u64(fs->os, ZPL_MASTER_OBJ, "DELETE_QUEUE", obj, tx);
        if (!err) fs->unlinked_obj = obj;
    }
    pthread_mutex_unlock(&fs->unlinked_lock);
    char name[24];
    unlinked_name(n->obj, name);
    if (!err) err = zap_add_u64(fs->os, fs->unlinked_obj, name, n->phys.gen, tx);
    return err;
}

/* Drops one link of n (locked) whose entry is already gone; at zero frees it,
 * or, while it is open, moves it to the unlinked set. */
static int drop_link(zpl_node_t *n, dmu_tx_t *tx, int64_t now)
{
    zpl_fs_t *fs = n->fs;
    bool dir = S_ISDIR(n->phys.mode);
    if (!dir && n->phys.nlink <= 1 && n->opens) {
        int err = unlinked_add(n, tx);
        if (err) return err;
        n->phys.nlink = 0;
        touch(n, false, now);
        return phys_write(n, tx);
    }
    if (dir || n->phys.nlink <= 1) {
        int err = zpl_xattr_free(fs->os, n->obj, tx);
        if (!err) err = dir ? zap_destroy(fs->os, n->obj, tx) : dmu_object_free(fs->os, n->obj, tx);
        if (err) return err;
        n->phys.nlink = 0;
        node_kill(n);
        return 0;
    }
    n->phys.nlink--;
    touch(n, false, now);
    return phys_write(n, tx);
}

static int do_remove(zpl_node_t *dir, const char *name, bool rmdir, zpl_wcc_t *dir_wcc)
{
    if (dir->kind != ZPL_NODE_REAL) return -EROFS;
    size_t len = strnlen(name, ZPL_NAME_MAX + 1);
    if (len == 0) return -ENOENT;
    if (len > ZPL_NAME_MAX) return -ENAMETOOLONG;
    if (!strcmp(name, ".")) return -EINVAL;
    if (!strcmp(name, "..")) return rmdir ? -ENOTEMPTY : -EISDIR;
    if (is_ctl_name(dir, name)) return -EROFS;
    zpl_fs_t *fs = dir->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    int err = op_begin(fs, 0, &props, &tx);
    if (err) return err;
    bool logged = false;
    zpl_node_t *child = NULL;
    pthread_rwlock_wrlock(&dir->lock);
    err = dir_writable_check(dir);
    if (err) goto out;
    wcc_pre(dir, dir_wcc);
    uint64_t v;
    err = zap_lookup_u64(fs->os, dir->obj, name, &v);
    if (err) goto out;
    err = node_get(fs, dirent_obj(v), &child);
    if (err) {
        child = NULL;
        if (err == -ESTALE) err = -EIO;
        goto out;
    }
    pthread_rwlock_wrlock(&child->lock);
    bool cdir = S_ISDIR(child->phys.mode);
    if (child->dead) err = -EIO;
    else if (rmdir && !cdir) err = -ENOTDIR;
    else if (!rmdir && cdir) err = -EISDIR;
    else if (cdir && child->phys.size > 2) err = -ENOTEMPTY;
    if (!err) err = zap_remove(fs->os, dir->obj, name, tx);
    int64_t now = now_ns();
    if (!err) err = drop_link(child, tx, now);
    if (!err) {
        dir->phys.size--;
        if (cdir) dir->phys.nlink--;
        touch(dir, true, now);
        err = phys_write(dir, tx);
    }
    /* Logged before the child is unlocked: a link made to it next must queue after. */
    if (!err && zil_wanted(&props)) {
        zpl_zil_log_remove(dir, name, child->obj, &child->phys, child->phys.nlink == 0, tx);
        logged = true;
    }
    pthread_rwlock_unlock(&child->lock);
    if (err) goto out;
    wcc_post(dir, dir_wcc);
out:
    pthread_rwlock_unlock(&dir->lock);
    zpl_node_rele(child);
    return op_end_logged(fs, &props, tx, false, err, logged && !err);
}

int zpl_remove(zpl_node_t *dir, const char *name, zpl_wcc_t *dir_wcc)
{
    return do_remove(dir, name, false, dir_wcc);
}

int zpl_rmdir(zpl_node_t *dir, const char *name, zpl_wcc_t *dir_wcc)
{
    return do_remove(dir, name, true, dir_wcc);
}

/* ------------------------------------------------------------------ */
/* rename                                                             */

/* Whether `anc` is tdir or one of its ancestors: walks parent pointers from the
 * bonus buffers (stable under fs->rename_lock, which the caller holds). */
static int is_ancestor(zpl_fs_t *fs, uint64_t anc, uint64_t obj, bool *yes)
{
    CAIRN_ASSERT(cairn_mutex_held(&fs->rename_lock));
    *yes = false;
    for (int depth = 0; depth < 100000; depth++) {
        if (obj == anc) {
            *yes = true;
            return 0;
        }
        if (obj == fs->root_obj) return 0;
        zpl_phys_t p;
        int err = phys_load(fs, obj, &p);
        if (err) return err == -ESTALE ? -ENOENT : err;
        obj = p.parent;
    }
    return -ELOOP;
}

static void unlock_all(zpl_node_t **locked, int n)
{
    for (int i = n - 1; i >= 0; i--) pthread_rwlock_unlock(&locked[i]->lock);
}

/* Locks the distinct nodes of v (up to 4): the first blocking, the rest by
 * try-lock; 0 on success, -EAGAIN when the caller must drop everything and retry. */
static int lock_set(zpl_node_t **v, int n, zpl_node_t **locked, int *nlocked)
{
    *nlocked = 0;
    for (int i = 0; i < n; i++) {
        if (!v[i]) continue;
        bool dup = false;
        for (int j = 0; j < *nlocked; j++) dup |= locked[j] == v[i];
        if (dup) continue;
        if (*nlocked == 0) {
            pthread_rwlock_wrlock(&v[i]->lock);
        } else if (pthread_rwlock_trywrlock(&v[i]->lock) != 0) {
            unlock_all(locked, *nlocked);
            *nlocked = 0;
            return -EAGAIN;
        }
        locked[(*nlocked)++] = v[i];
    }
    return 0;
}

int zpl_rename(zpl_node_t *sdir, const char *sname, zpl_node_t *tdir, const char *tname,
               zpl_wcc_t *sdir_wcc, zpl_wcc_t *tdir_wcc)
{
    if (sdir->fs != tdir->fs) return -EXDEV;
    if (sdir->kind != ZPL_NODE_REAL || tdir->kind != ZPL_NODE_REAL) return -EROFS;
    int err = name_check(sname);
    if (!err) err = name_check(tname);
    if (err) return err == -ENOENT ? -ENOENT : err;
    if (is_ctl_name(sdir, sname) || is_ctl_name(tdir, tname)) return -EROFS;
    zpl_fs_t *fs = sdir->fs;
    bool cross = sdir != tdir;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    err = op_begin(fs, ZPL_CREATE_SPACE, &props, &tx);
    if (err) return err;
    bool logged = false;
    if (cross) pthread_mutex_lock(&fs->rename_lock);

    zpl_node_t *snode = NULL, *tnode = NULL;
    zpl_node_t *locked[4];
    int nlocked = 0;
    for (unsigned attempt = 0;; attempt++) {
        zpl_node_rele(snode);
        zpl_node_rele(tnode);
        snode = tnode = NULL;
        if (attempt) {
            if (attempt > 3) usleep(CAIRN_MIN(attempt, 100u) * 10);
            else sched_yield();
        }
        zpl_node_t *dirs[2] = {sdir, tdir};
        if (lock_set(dirs, 2, locked, &nlocked)) continue;
        err = dir_writable_check(sdir);
        if (!err) err = dir_writable_check(tdir);
        if (err) break;
        uint64_t sv, tv;
        err = zap_lookup_u64(fs->os, sdir->obj, sname, &sv);
        if (err) break;
        err = node_get(fs, dirent_obj(sv), &snode);
        if (err) {
            snode = NULL;
            err = err == -ESTALE ? -EIO : err;
            break;
        }
        err = zap_lookup_u64(fs->os, tdir->obj, tname, &tv);
        if (err == 0) {
            err = node_get(fs, dirent_obj(tv), &tnode);
            if (err) {
                tnode = NULL;
                err = err == -ESTALE ? -EIO : err;
                break;
            }
        } else if (err != -ENOENT) {
            break;
        }
        err = 0;
        /* Children last, by try-lock (a target directory may be an ancestor of sdir). */
        zpl_node_t *all[4] = {sdir, tdir, snode, tnode};
        unlock_all(locked, nlocked);
        if (lock_set(all, 4, locked, &nlocked)) continue;
        /* Unlocked for a moment: check the entries still name the same objects. */
        uint64_t sv2, tv2 = 0;
        int e1 = zap_lookup_u64(fs->os, sdir->obj, sname, &sv2);
        int e2 = zap_lookup_u64(fs->os, tdir->obj, tname, &tv2);
        if (sdir->dead || tdir->dead || e1 || dirent_obj(sv2) != snode->obj ||
            (tnode ? (e2 || dirent_obj(tv2) != tnode->obj) : e2 != -ENOENT)) {
            unlock_all(locked, nlocked);
            nlocked = 0;
            continue;
        }
        break;
    }
    if (err) goto out;

    wcc_pre(sdir, sdir_wcc);
    wcc_pre(tdir, tdir_wcc);
    bool sisdir = S_ISDIR(snode->phys.mode);
    if (tnode == snode) {
        /* Two links to one file (or a name onto itself): nothing to do. */
        logged = true;
        wcc_post(sdir, sdir_wcc);
        wcc_post(tdir, tdir_wcc);
        goto out;
    }
    if (sisdir && cross) {
        bool inside = false;
        err = is_ancestor(fs, snode->obj, tdir->obj, &inside);
        if (!err && inside) err = -EINVAL;
        if (err) goto out;
    }
    if (tnode) {
        bool tisdir = S_ISDIR(tnode->phys.mode);
        if (sisdir && !tisdir) err = -ENOTDIR;
        else if (!sisdir && tisdir) err = -EISDIR;
        else if (tisdir && tnode->phys.size > 2) err = -ENOTEMPTY;
        if (err) goto out;
    } else if (sisdir && cross && tdir->phys.nlink >= atomic_load(&fs->link_max)) {
        err = -EMLINK;
        goto out;
    }

    int64_t now = now_ns();
    if (tnode) {
        bool tisdir = S_ISDIR(tnode->phys.mode);
        err = zap_remove(fs->os, tdir->obj, tname, tx);
        if (!err) err = drop_link(tnode, tx, now);
        if (err) goto out;
        tdir->phys.size--;
        if (tisdir) tdir->phys.nlink--;
    }
    err = zap_remove(fs->os, sdir->obj, sname, tx);
    if (!err)
        err = zap_add_u64(fs->os, tdir->obj, tname,
                          dirent_encode(mode_to_dt(snode->phys.mode), snode->obj), tx);
    if (err) goto out;
    sdir->phys.size--;
    tdir->phys.size++;
    if (sisdir && cross) {
        sdir->phys.nlink--;
        tdir->phys.nlink++;
    }
    snode->phys.parent = tdir->obj;
    touch(snode, false, now);
    touch(sdir, true, now);
    if (cross) touch(tdir, true, now);
    err = phys_write(snode, tx);
    if (!err) err = phys_write(sdir, tx);
    if (!err && cross) err = phys_write(tdir, tx);
    if (!err && zil_wanted(&props)) {
        zpl_zil_log_rename(sdir, sname, tdir, tname, snode, tnode, tnode && tnode->phys.nlink == 0,
                           tx);
        logged = true;
    }
    wcc_post(sdir, sdir_wcc);
    wcc_post(tdir, tdir_wcc);
out:
    unlock_all(locked, nlocked);
    if (cross) pthread_mutex_unlock(&fs->rename_lock);
    zpl_node_rele(snode);
    zpl_node_rele(tnode);
    return op_end_logged(fs, &props, tx, false, err, logged && !err);
}

/* ------------------------------------------------------------------ */
/* setattr                                                            */

/* Frees the data of n (locked, regular) beyond size. */
static int truncate_data(zpl_node_t *n, uint64_t size, dmu_tx_t *tx)
{
    dmu_object_info_t oi;
    int err = dmu_object_info(n->fs->os, n->obj, &oi);
    if (err) return err;
    uint64_t end = CAIRN_MAX(oi.max_offset, n->phys.size);
    if (end <= size) return 0;
    return dmu_free_range(n->fs->os, n->obj, size, end - size, tx);
}

int zpl_setattr(zpl_node_t *n, const zpl_setattr_t *sa, zpl_wcc_t *wcc)
{
    if (n->kind != ZPL_NODE_REAL) return -EROFS;
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    int err = op_begin(fs, 0, &props, &tx);
    if (err) return err;
    bool logged = false;
    pthread_mutex_lock(&n->data_lock);
    pthread_rwlock_wrlock(&n->lock);
    if (n->dead) {
        err = -ESTALE;
        goto out;
    }
    wcc_pre(n, wcc);
    if ((sa->mask & ZPL_SET_GUARD_CTIME) && n->phys.ctime != sa->guard_ctime_ns) {
        err = -EAGAIN;
        goto out;
    }
    if (sa->mask & ZPL_SET_SIZE) {
        if (S_ISDIR(n->phys.mode)) err = -EISDIR;
        else if (!S_ISREG(n->phys.mode)) err = -EINVAL;
        else if (sa->size > ZPL_MAX_FILE_SIZE) err = -EFBIG;
        if (err) goto out;
    }
    int64_t now = now_ns();
    bool size_changed = (sa->mask & ZPL_SET_SIZE) && sa->size != n->phys.size;
    if (size_changed) {
        if (sa->size < n->phys.size) err = truncate_data(n, sa->size, tx);
        if (err) goto out;
        n->phys.size = sa->size;
        n->phys.mtime = now;
    }
    if (sa->mask & ZPL_SET_MODE) n->phys.mode = (n->phys.mode & S_IFMT) | (sa->mode & 07777);
    if (sa->mask & ZPL_SET_UID) n->phys.uid = sa->uid;
    if (sa->mask & ZPL_SET_GID) n->phys.gid = sa->gid;
    if (sa->mask & ZPL_SET_ATIME_NOW) n->phys.atime = now;
    else if (sa->mask & ZPL_SET_ATIME) n->phys.atime = sa->atime_ns;
    if (sa->mask & ZPL_SET_MTIME_NOW) n->phys.mtime = now;
    else if (sa->mask & ZPL_SET_MTIME) n->phys.mtime = sa->mtime_ns;
    n->phys.ctime = (sa->mask & ZPL_SET_CTIME) ? sa->ctime_ns : now;
    n->phys.change++;
    /* The client set real attributes: the EXCLUSIVE verifier has served. */
    n->phys.flags &= ~(uint32_t)ZPL_ZF_EXCL;
    memset(n->phys.verf, 0, sizeof(n->phys.verf));
    err = phys_write(n, tx);
    if (!err && zil_wanted(&props)) {
        zpl_zil_log_setattr(n, size_changed, tx);
        logged = true;
    }
    wcc_post(n, wcc);
out:
    pthread_rwlock_unlock(&n->lock);
    pthread_mutex_unlock(&n->data_lock);
    return op_end_logged(fs, &props, tx, false, err, logged && !err);
}

/* ------------------------------------------------------------------ */
/* data                                                               */

static bool atime_due(const zpl_phys_t *p, int64_t now)
{
    return p->atime <= p->mtime || p->atime <= p->ctime || now - p->atime >= ZPL_RELATIME_NS;
}

/*
 * memory_only (zpl_read_memory): the read must not wait for a device or a
 * transaction, so it is served with dmu_read_memory, and a read whose atime
 * is due (and atime=on) stops with -EWOULDBLOCK before reading: updating it
 * needs a transaction (the write throttle may wait), and the caller's full
 * zpl_read on a thread that may block does the read and the update. With
 * atime=off a due atime stays due forever, hence the property check.
 */
static int read_impl(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof,
                     bool memory_only, cairn_spans_t *spans)
{
    *nread = 0;
    if (eof) *eof = false;
    if (n->kind != ZPL_NODE_REAL) return -EISDIR;
    zpl_fs_t *fs = n->fs;
    pthread_rwlock_rdlock(&n->lock);
    int err = 0;
    if (n->dead) err = -ESTALE;
    else if (S_ISDIR(n->phys.mode)) err = -EISDIR;
    else if (!S_ISREG(n->phys.mode)) err = -EINVAL;
    bool due = false;
    if (!err && memory_only && !fs->snapshot && atime_due(&n->phys, now_ns())) {
        dsl_dataset_props_t props;
        props_get(fs, &props);
        if (props.atime && !props.readonly) err = -EWOULDBLOCK;
    }
    if (!err) {
        uint64_t size = n->phys.size;
        uint64_t cnt = off >= size ? 0 : CAIRN_MIN((uint64_t)len, size - off);
        if (cnt)
            err = dmu_read_spans(fs->os, n->obj, off, cnt, buf, memory_only, spans);
        if (!err) {
            *nread = cnt;
            if (eof) *eof = off + cnt >= size;
        }
        due = !err && !memory_only && !fs->snapshot && atime_due(&n->phys, now_ns());
    }
    pthread_rwlock_unlock(&n->lock);
    if (err || !due) return err;

    dsl_dataset_props_t props;
    props_get(fs, &props);
    if (!props.atime || props.readonly) return 0;
    dmu_tx_t *tx;
    if (op_begin(fs, 0, &props, &tx)) return 0;   /* atime is best effort */
    /* A reader never waits for a writer of the file for its atime: a busy
     * node is left for the next read. */
    if (pthread_rwlock_trywrlock(&n->lock) == 0) {
        int64_t now = now_ns();
        if (!n->dead && atime_due(&n->phys, now)) {
            n->phys.atime = now;
            (void)phys_write(n, tx);
        }
        pthread_rwlock_unlock(&n->lock);
    }
    dmu_tx_commit(tx);
    return 0;
}

int zpl_read(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof)
{
    return read_impl(n, off, len, buf, nread, eof, false, NULL);
}

int zpl_read_memory(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof)
{
    return read_impl(n, off, len, buf, nread, eof, true, NULL);
}

int zpl_read_spans(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof,
                   bool memory_only, cairn_spans_t *spans)
{
    return read_impl(n, off, len, buf, nread, eof, memory_only, spans);
}

/*
 * A regular file's DMU properties (n locked exclusively), before a write
 * ending at end.
 *
 * Record size: a file smaller than the recordsize is one record of the
 * smallest power of two that holds it, grown (the DMU allows that while the
 * object has a single record) as writes extend it, so a file written in small
 * appends still ends with recordsize records. Once a write reaches the
 * recordsize it is fixed (ZPL_ZF_BLKSZ_FIXED); a file of several records
 * keeps its record size whatever recordsize becomes, as in ZFS, while a
 * single-record file still grows to a larger recordsize.
 *
 * Compression, checksum and copies: the dataset's current values, so a
 * change of those properties reaches the new writes of files that existed
 * before it (each block pointer names its own, so older blocks still read).
 *
 * Called only while the record size may change or when the dataset's
 * properties changed since this node last looked (props->gen), so a steady
 * writer pays neither a lookup nor a lock for it.
 */
static int fix_object_props(zpl_node_t *n, const dsl_dataset_props_t *props, uint64_t end,
                            dmu_tx_t *tx)
{
    const uint32_t ds_rs = props->recordsize ? props->recordsize : 128 * 1024;
    uint32_t rs = ds_rs;
    if (end < rs) {
        uint32_t small = DMU_MIN_RECORDSIZE;
        while (small < end) small <<= 1;
        rs = small;
    }
    dmu_object_info_t info;
    int err = dmu_object_info(n->fs->os, n->obj, &info);
    if (err) return err;
    const dmu_object_props_t cur = info.props;
    /* Nothing written yet: any size; else only growing a single record. */
    bool resize = !info.max_offset || (rs > cur.recordsize && info.max_offset <= cur.recordsize);
    dmu_object_props_t op = zpl_object_props(props, resize ? rs : cur.recordsize);
    if (op.recordsize != cur.recordsize || op.compress != cur.compress ||
        op.checksum != cur.checksum || op.copies != cur.copies) {
        err = dmu_object_set_props(n->fs->os, n->obj, &op, tx);
        if (err == -EINVAL && resize) { /* several records at another size: keep it */
            op.recordsize = cur.recordsize;
            err = dmu_object_set_props(n->fs->os, n->obj, &op, tx);
        }
        if (err) return err;
    }
    /* Final once it reached recordsize or has (or is about to have) several records. */
    if (op.recordsize >= ds_rs || info.max_offset > op.recordsize || end > op.recordsize)
        n->phys.flags |= ZPL_ZF_BLKSZ_FIXED;
    else
        n->phys.flags &= ~(uint32_t)ZPL_ZF_BLKSZ_FIXED;
    n->props_gen = props->gen;
    return 0;
}

int zpl_write(zpl_node_t *n, uint64_t off, size_t len, const void *buf, int flags,
              zpl_wcc_t *wcc)
{
    if (n->kind != ZPL_NODE_REAL) return -EISDIR;
    if (off > ZPL_MAX_FILE_SIZE || len > ZPL_MAX_FILE_SIZE - off) return -EFBIG;
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    int err = op_begin(fs, len ? len : 1, &props, &tx);
    if (err) return err;
    bool logged = false;
    /* The data is copied in under n->lock shared, so getattr, lookup and reads
     * of this file go on during a large write; n->data_lock keeps writers of
     * the file (and size changes) in order among themselves, so the record
     * size chosen first (exclusively, while it may still change) and the size
     * set last (exclusively) see no other writer in between. */
    pthread_mutex_lock(&n->data_lock);
    pthread_rwlock_wrlock(&n->lock);
    if (n->dead) err = -ESTALE;
    else if (S_ISDIR(n->phys.mode)) err = -EISDIR;
    else if (!S_ISREG(n->phys.mode)) err = -EINVAL;
    if (!err) wcc_pre(n, wcc);
    if (!err && len && (!(n->phys.flags & ZPL_ZF_BLKSZ_FIXED) || n->props_gen != props.gen))
        err = fix_object_props(n, &props, off + len, tx);
    uint64_t seen_change = n->phys.change;
    pthread_rwlock_unlock(&n->lock);
    /* ZIL: a large sync write goes to its blocks at once, the log points at them. */
    zpl_zil_direct_t direct = {0};
    bool sync_write = props.sync != DSL_SYNC_DISABLED &&
                      ((flags & ZPL_IO_SYNC) || props.sync == DSL_SYNC_ALWAYS);
    bool throughput = props.logbias == DSL_LOGBIAS_THROUGHPUT;
    bool indirect = sync_write && zil_write_indirect(fs->zil, throughput, len);
    /* A large asynchronous one is stamped, for its commit to write its records
     * as blocks then (zpl_zil_write_later). */
    bool later = !sync_write && zil_wanted(&props) && zpl_zil_write_later(fs, len, throughput);
    if (!err && len) {
        pthread_rwlock_rdlock(&n->lock);
        err = n->dead ? -ESTALE
              : indirect ? zpl_zil_write_direct(n, off, len, buf, tx, &direct)
              : later    ? zpl_zil_write_stamped(n, off, len, buf, tx, &direct)
                         : dmu_write(fs->os, n->obj, off, len, buf, tx);
        pthread_rwlock_unlock(&n->lock);
    }
    pthread_rwlock_wrlock(&n->lock);
    if (!err && n->dead) err = -ESTALE;
    if (err) goto out;
    if (n->phys.change != seen_change) {
        /* Another operation (link, rename...) changed the node meanwhile, maybe
         * in a newer txg than the data's: writing the attributes, theirs
         * included, into the data's txg could make its change durable before
         * its other half. The attributes go in a transaction of their own,
         * begun without n->lock held (the throttle may wait). */
        pthread_rwlock_unlock(&n->lock);
        dmu_tx_commit(tx);
        tx = dmu_tx_begin(fs->os);
        pthread_rwlock_wrlock(&n->lock);
        if (n->dead) {
            err = -ESTALE;
            goto out;
        }
    }
    if (len && off + len > n->phys.size) n->phys.size = off + len;
    touch(n, true, now_ns());
    err = phys_write(n, tx);
    wcc_post(n, wcc);
    /* ZIL: a copy of the bytes and the new attributes, under the node lock. */
    logged = !err && len && zil_wanted(&props);
    if (logged)
        zpl_zil_log_write(n, off, len, buf, tx, throughput, &direct);
out:
    pthread_rwlock_unlock(&n->lock);
    pthread_mutex_unlock(&n->data_lock);
    free(direct.bps);
    free(direct.stamps);
    return op_end_logged(fs, &props, tx, (flags & ZPL_IO_SYNC) != 0, err, logged);
}

/* ------------------------------------------------------------------ */
/* holes and space (NFSv4.2 SEEK, ALLOCATE, DEALLOCATE, COPY)          */

/* The checks every data operation makes on n (locked): -ESTALE, -EISDIR, -EINVAL. */
static int regular_file_check(const zpl_node_t *n)
{
    if (n->dead) return -ESTALE;
    if (S_ISDIR(n->phys.mode)) return -EISDIR;
    if (!S_ISREG(n->phys.mode)) return -EINVAL;
    return 0;
}

int zpl_seek(zpl_node_t *n, uint64_t off, bool hole, uint64_t *out)
{
    if (n->kind != ZPL_NODE_REAL) return -EISDIR;
    pthread_rwlock_rdlock(&n->lock);
    int err = regular_file_check(n);
    uint64_t size = n->phys.size;
    if (!err && off >= size) err = -ENXIO;
    uint64_t pos = off;
    if (!err) err = hole ? dmu_next_hole(n->fs->os, n->obj, &pos)
                         : dmu_next_data(n->fs->os, n->obj, &pos);
    pthread_rwlock_unlock(&n->lock);
    if (err) return err;
    /* Records extend past the size to their end, and the size may end in a
     * hole no record covers: the end of file is where the last hole begins. */
    if (hole) pos = CAIRN_MIN(pos, size);
    else if (pos >= size) return -ENXIO;
    *out = pos;
    return 0;
}

int zpl_deallocate(zpl_node_t *n, uint64_t off, uint64_t len, zpl_wcc_t *wcc)
{
    if (n->kind != ZPL_NODE_REAL) return -EISDIR;
    if (off > ZPL_MAX_FILE_SIZE || len > ZPL_MAX_FILE_SIZE - off) return -EFBIG;
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    int err = op_begin(fs, 0, &props, &tx);
    if (err) return err;
    bool logged = false;
    uint64_t end = 0;
    pthread_mutex_lock(&n->data_lock);
    pthread_rwlock_wrlock(&n->lock);
    err = regular_file_check(n);
    if (err) goto out;
    wcc_pre(n, wcc);
    /* Nothing lies past the size: the range is cut there. */
    end = CAIRN_MIN(off + len, n->phys.size);
    if (off < end) {
        err = dmu_free_range(fs->os, n->obj, off, end - off, tx);
        if (err) goto out;
        touch(n, true, now_ns());
        err = phys_write(n, tx);
        logged = !err && zil_wanted(&props);
        if (logged) {
            zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_FREE, .txg = dmu_tx_txg(tx),
                                          .obj = n->obj, .off = off, .len = end - off});
            zpl_zil_log_setattr(n, false, tx);
        }
    }
    wcc_post(n, wcc);
out:
    pthread_rwlock_unlock(&n->lock);
    pthread_mutex_unlock(&n->data_lock);
    bool freed = !err && off < end;
    /* Durable before the reply, like a setattr: a client never resends it. */
    err = op_end_logged(fs, &props, tx, true, err, logged);
    /* The file's used space drops only when its txg syncs, and the attributes
     * returned with the reply are what a client keeps (under an NFSv4
     * delegation, for as long as it holds it; du after fallocate -p): the
     * punch returns once its txg is written, so they show the space freed. */
    if (!err && freed) err = dmu_objset_sync(fs->os);
    return err;
}

int zpl_allocate(zpl_node_t *n, uint64_t off, uint64_t len, zpl_wcc_t *wcc)
{
    if (n->kind != ZPL_NODE_REAL) return -EISDIR;
    if (off > ZPL_MAX_FILE_SIZE || len > ZPL_MAX_FILE_SIZE - off) return -EFBIG;
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    /* Copy-on-write cannot set blocks aside for later writes: the space is
     * checked now (quota, reservation, pool) and nothing is reserved. */
    int err = op_begin(fs, len ? len : 1, &props, &tx);
    if (err) return err;
    bool logged = false;
    pthread_mutex_lock(&n->data_lock);
    pthread_rwlock_wrlock(&n->lock);
    err = regular_file_check(n);
    if (err) goto out;
    wcc_pre(n, wcc);
    if (off + len > n->phys.size) {
        n->phys.size = off + len;
        touch(n, true, now_ns());
        err = phys_write(n, tx);
        logged = !err && zil_wanted(&props);
        if (logged) zpl_zil_log_setattr(n, true, tx);
    }
    wcc_post(n, wcc);
out:
    pthread_rwlock_unlock(&n->lock);
    pthread_mutex_unlock(&n->data_lock);
    return op_end_logged(fs, &props, tx, true, err, logged);
}

/* Most bytes a copy moves through memory at once. */
#define ZPL_COPY_CHUNK (1024 * 1024u)

int zpl_copy_range(zpl_node_t *src, uint64_t soff, zpl_node_t *dst, uint64_t doff, uint64_t len,
                   uint64_t *copied)
{
    *copied = 0;
    if (src->kind != ZPL_NODE_REAL || dst->kind != ZPL_NODE_REAL) return -EISDIR;
    if (zpl_node_fs(src) != zpl_node_fs(dst) && zpl_fs_parent(zpl_node_fs(src)) != zpl_node_fs(dst))
        return -EXDEV;
    if (doff > ZPL_MAX_FILE_SIZE || len > ZPL_MAX_FILE_SIZE - doff) return -EFBIG;
    uint8_t *buf = malloc(CAIRN_MIN((uint64_t)ZPL_COPY_CHUNK, CAIRN_MAX(len, 1)));
    if (!buf) return -ENOMEM;
    int err = 0;
    while (*copied < len) {
        uint64_t pos = soff + *copied;
        size_t want = (size_t)CAIRN_MIN((uint64_t)ZPL_COPY_CHUNK, len - *copied), got = 0;
        bool eof = false;
        /* A hole of the source stays a hole: the DMU stores the zero records
         * written for it as holes, so only the read of it costs anything,
         * and that is skipped for a chunk wholly inside a hole. */
        uint64_t data = pos;
        err = zpl_seek(src, pos, false, &data);
        if (err == -ENXIO || (!err && data >= pos + want)) {
            zpl_attr_t sa;
            err = zpl_getattr(src, &sa);
            if (err) break;
            got = pos >= sa.size ? 0 : (size_t)CAIRN_MIN((uint64_t)want, sa.size - pos);
            memset(buf, 0, got);
        } else if (!err) {
            err = zpl_read(src, pos, want, buf, &got, &eof);
        }
        if (err || got == 0) break;
        err = zpl_write(dst, doff + *copied, got, buf, 0, NULL);
        if (err) break;
        *copied += got;
    }
    free(buf);
    if (!err && *copied) err = zpl_fsync(dst);
    return err;
}

uint32_t zpl_clone_blksize(zpl_node_t *n)
{
    if (n->kind != ZPL_NODE_REAL) return 0;
    dmu_object_info_t oi;
    return dmu_object_info(n->fs->os, n->obj, &oi) ? 0 : oi.props.recordsize;
}

/* Clones are not in the intent log (it has no record for them): each waits
 * for its txg to sync before it returns, like the other barriers. A source
 * record not yet synced makes the DMU ask for a sync first (-EAGAIN); a few
 * rounds of that and the caller copies instead. */
#define ZPL_CLONE_SYNC_ROUNDS 4

int zpl_clone_range(zpl_node_t *src, uint64_t soff, zpl_node_t *dst, uint64_t doff, uint64_t len,
                    uint64_t *cloned)
{
    *cloned = 0;
    if (src->kind != ZPL_NODE_REAL || dst->kind != ZPL_NODE_REAL) return -EISDIR;
    zpl_fs_t *fs = dst->fs;
    if (dmu_objset_spa(src->fs->os) != dmu_objset_spa(fs->os)) return -EXDEV;
    if (src == dst || (src->fs == fs && src->obj == dst->obj)) return -EINVAL;
    if (doff > ZPL_MAX_FILE_SIZE || len > ZPL_MAX_FILE_SIZE - doff) return -EFBIG;
    uint32_t rs = zpl_clone_blksize(src);
    if (!rs || rs != zpl_clone_blksize(dst)) return -EXDEV;
    if (soff % rs || doff % rs || len % rs) return -EINVAL;
    if (len == 0) return 0;
    spa_t *spa = dmu_objset_spa(fs->os);
    int err = 0;
    for (int round = 0; round < ZPL_CLONE_SYNC_ROUNDS; round++) {
        dsl_dataset_props_t props;
        dmu_tx_t *tx;
        /* Quota and reservation count every reference (the dataset's used
         * grows by len), though the pool allocates nothing for the data. */
        err = op_begin(fs, len, &props, &tx);
        if (err) return err;
        uint64_t n = 0;
        pthread_mutex_lock(&dst->data_lock);
        pthread_rwlock_wrlock(&dst->lock);
        err = regular_file_check(dst);
        if (!err) {
            pthread_rwlock_rdlock(&src->lock);
            err = regular_file_check(src);
            pthread_rwlock_unlock(&src->lock);
        }
        if (!err)
            err = dmu_clone_range(src->fs->os, src->obj, soff, fs->os, dst->obj, doff, len, tx,
                                  &n);
        /* After an -EAGAIN the records before the unsynced one hold the
         * source's data already: the size covers the range either way (the
         * rest of it reads as it did), and the next round does it all again. */
        if (!err || err == -EAGAIN) {
            if (doff + len > dst->phys.size) dst->phys.size = doff + len;
            touch(dst, true, now_ns());
            int e2 = phys_write(dst, tx);
            if (!err) err = e2;
        }
        pthread_rwlock_unlock(&dst->lock);
        pthread_mutex_unlock(&dst->data_lock);
        uint64_t txg = dmu_tx_txg(tx);
        int e3 = op_end_logged(fs, &props, tx, true, 0, false);
        int e4 = spa_txg_wait_synced(spa, txg);
        if (!err) {
            *cloned = len;
            return e3 ? e3 : e4;
        }
        if (err != -EAGAIN) return err;
        if (e4) return e4;
        (void)n;
    }
    return -EAGAIN;
}

int zpl_commit(zpl_fs_t *fs)
{
    if (fs->snapshot) return 0;
    dsl_dataset_props_t props;
    props_get(fs, &props);
    if (props.sync == DSL_SYNC_DISABLED) return 0;
    return zil_commit(fs->zil, 0); /* ZIL */
}

int zpl_fsync(zpl_node_t *n)
{
    if (n->kind == ZPL_NODE_REAL) {
        pthread_rwlock_rdlock(&n->lock);
        bool dead = n->dead;
        pthread_rwlock_unlock(&n->lock);
        if (dead) return -ESTALE;
    }
    return zpl_commit(n->fs);
}

/* ------------------------------------------------------------------ */
/* extended attributes                                                 */

/*
 * A node's extended attributes are a ZAP of its own (name -> value, values
 * up to ZAP_VALUE_MAX bytes), found through the dataset's xattr index: a ZAP
 * named XATTR_INDEX in the master node mapping object numbers (hex) to those
 * ZAPs. Both are made at the first set. Whoever frees a node frees its
 * attribute ZAP and index entry in the same transaction (zpl_xattr_free), so
 * a reused object number starts without attributes. Changes are not in the
 * intent log: each is a barrier whose txg syncs before it returns.
 */
#define XATTR_INDEX "XATTR_INDEX"

static void xattr_key(uint64_t obj, char key[24])
{
    snprintf(key, 24, "%llx", (unsigned long long)obj);
}

/* obj's attribute ZAP: 0, or -ENOENT when it has none. */
static int xattr_zap(objset_t *os, uint64_t obj, uint64_t *zobj, uint64_t *index)
{
    uint64_t idx;
    int err = zap_lookup_u64(os, ZPL_MASTER_OBJ, XATTR_INDEX, &idx);
    if (err) return err;
    if (index) *index = idx;
    char key[24];
    xattr_key(obj, key);
    return zap_lookup_u64(os, idx, key, zobj);
}

int zpl_xattr_free(objset_t *os, uint64_t obj, dmu_tx_t *tx)
{
    uint64_t zobj = 0, idx = 0;
    int err = xattr_zap(os, obj, &zobj, &idx);
    if (err == -ENOENT) return 0;
    char key[24];
    xattr_key(obj, key);
    if (!err) err = zap_destroy(os, zobj, tx);
    if (!err) err = zap_remove(os, idx, key, tx);
    return err;
}

/* n's attribute ZAP, made (with the index) if it has none yet. n locked. */
static int xattr_zap_create(zpl_node_t *n, uint64_t *zobj, dmu_tx_t *tx)
{
    zpl_fs_t *fs = n->fs;
    int err = xattr_zap(fs->os, n->obj, zobj, NULL);
    if (err != -ENOENT) return err;
    pthread_mutex_lock(&fs->xattr_lock);
    uint64_t idx = 0;
    err = zap_lookup_u64(fs->os, ZPL_MASTER_OBJ, XATTR_INDEX, &idx);
    if (err == -ENOENT) {
        err = zap_create(fs->os, &idx, tx);
        if (!err) err = zap_add_u64(fs->os, ZPL_MASTER_OBJ, XATTR_INDEX, idx, tx);
    }
    pthread_mutex_unlock(&fs->xattr_lock);
    char key[24];
    xattr_key(n->obj, key);
    if (!err) err = zap_create(fs->os, zobj, tx);
    if (!err) err = zap_add_u64(fs->os, idx, key, *zobj, tx);
    return err;
}

static int xattr_name_check(const char *name)
{
    size_t len = strnlen(name, ZAP_NAME_MAX + 1);
    if (len == 0) return -EINVAL;
    return len > ZAP_NAME_MAX ? -ENAMETOOLONG : 0;
}

int zpl_getxattr(zpl_node_t *n, const char *name, void *buf, size_t cap, size_t *len)
{
    int err = xattr_name_check(name);
    if (err) return err;
    if (n->kind != ZPL_NODE_REAL) return -ENODATA;
    pthread_rwlock_rdlock(&n->lock);
    uint64_t zobj;
    uint32_t vlen = 0;
    err = n->dead ? -ESTALE : xattr_zap(n->fs->os, n->obj, &zobj, NULL);
    if (!err) err = zap_lookup(n->fs->os, zobj, name, buf, (uint32_t)CAIRN_MIN(cap, ZAP_VALUE_MAX),
                               &vlen);
    pthread_rwlock_unlock(&n->lock);
    if (err == -ENOENT) return -ENODATA;
    if (err) return err;
    *len = vlen;
    return vlen > cap ? -ERANGE : 0;
}

int zpl_setxattr(zpl_node_t *n, const char *name, const void *val, size_t len,
                 zpl_xattr_how_t how, zpl_wcc_t *wcc)
{
    int err = xattr_name_check(name);
    if (err) return err;
    if (len > ZAP_VALUE_MAX) return -E2BIG;
    if (n->kind != ZPL_NODE_REAL) return -EROFS;
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    err = op_begin(fs, len + strlen(name) + 1, &props, &tx);
    if (err) return err;
    pthread_rwlock_wrlock(&n->lock);
    uint64_t zobj = 0;
    err = n->dead ? -ESTALE : xattr_zap_create(n, &zobj, tx);
    if (!err) {
        wcc_pre(n, wcc);
        uint8_t probe;
        uint32_t vlen;
        int found = zap_lookup(fs->os, zobj, name, &probe, 0, &vlen);
        if (found && found != -ENOENT) err = found;
        else if (how == ZPL_XATTR_CREATE && found == 0) err = -EEXIST;
        else if (how == ZPL_XATTR_REPLACE && found == -ENOENT) err = -ENODATA;
    }
    if (!err) err = zap_update(fs->os, zobj, name, val, (uint32_t)len, tx);
    if (!err) {
        touch(n, false, now_ns());
        err = phys_write(n, tx);
        wcc_post(n, wcc);
    }
    pthread_rwlock_unlock(&n->lock);
    return op_end_logged(fs, &props, tx, true, err, false);
}

int zpl_removexattr(zpl_node_t *n, const char *name, zpl_wcc_t *wcc)
{
    int err = xattr_name_check(name);
    if (err) return err;
    if (n->kind != ZPL_NODE_REAL) return -EROFS;
    zpl_fs_t *fs = n->fs;
    dsl_dataset_props_t props;
    dmu_tx_t *tx;
    err = op_begin(fs, 0, &props, &tx);
    if (err) return err;
    pthread_rwlock_wrlock(&n->lock);
    uint64_t zobj = 0;
    err = n->dead ? -ESTALE : xattr_zap(fs->os, n->obj, &zobj, NULL);
    if (!err) {
        wcc_pre(n, wcc);
        err = zap_remove(fs->os, zobj, name, tx);
    }
    if (err == -ENOENT) err = -ENODATA;
    if (!err) {
        touch(n, false, now_ns());
        err = phys_write(n, tx);
        wcc_post(n, wcc);
    }
    pthread_rwlock_unlock(&n->lock);
    return op_end_logged(fs, &props, tx, true, err, false);
}

int zpl_listxattr(zpl_node_t *n, uint64_t cookie, zpl_listxattr_fn fn, void *arg, bool *eof)
{
    *eof = true;
    if (n->kind != ZPL_NODE_REAL) return 0;
    pthread_rwlock_rdlock(&n->lock);
    uint64_t zobj;
    int err = n->dead ? -ESTALE : xattr_zap(n->fs->os, n->obj, &zobj, NULL);
    if (err == -ENOENT) err = 0;
    else if (!err) {
        zap_entry_t *e = malloc(sizeof *e);
        zap_cursor_t zc;
        zap_cursor_init(&zc, n->fs->os, zobj, cookie);
        while (e && (err = zap_cursor_next(&zc, e)) == 1) {
            if (fn(arg, e->name, e->next_cookie)) {
                *eof = false;
                break;
            }
        }
        if (err == 1) err = 0;
        if (!e) err = -ENOMEM;
        free(e);
    }
    pthread_rwlock_unlock(&n->lock);
    return err;
}

/* ------------------------------------------------------------------ */
/* file handles                                                       */

#define FH_MAGIC0 'C'
#define FH_MAGIC1 'Z'
#define FH_VERSION 1

/* Handles carry their numbers little-endian, whatever the host. */
#define put64 cairn_put_le64
#define get64 cairn_get_le64

int zpl_fh_encode(zpl_node_t *n, zpl_fh_t *fh)
{
    memset(fh, 0, sizeof(*fh));
    zpl_fs_t *fs = n->fs;
    uint64_t gen = 0;
    if (n->kind == ZPL_NODE_REAL) {
        pthread_rwlock_rdlock(&n->lock);
        bool dead = n->dead;
        gen = n->phys.gen;
        pthread_rwlock_unlock(&n->lock);
        if (dead) return -ESTALE;
    }
    fh->bytes[0] = FH_MAGIC0;
    fh->bytes[1] = FH_MAGIC1;
    fh->bytes[2] = FH_VERSION;
    fh->bytes[3] = (uint8_t)n->kind;
    put64(fh->bytes + 8, fs->parent ? fs->parent->guid : fs->guid);
    put64(fh->bytes + 16, fs->guid);
    put64(fh->bytes + 24, n->obj);
    put64(fh->bytes + 32, gen);
    return 0;
}

static int fh_parse(const void *buf, size_t len, const uint8_t **b)
{
    if (len != ZPL_FH_SIZE) return -EINVAL;
    const uint8_t *p = buf;
    if (p[0] != FH_MAGIC0 || p[1] != FH_MAGIC1 || p[2] != FH_VERSION || p[3] > ZPL_NODE_SNAPDIR)
        return -EINVAL;
    *b = p;
    return 0;
}

int zpl_fh_export_guid(const void *buf, size_t len, uint64_t *guid)
{
    const uint8_t *b;
    int err = fh_parse(buf, len, &b);
    if (err) return err;
    *guid = get64(b + 8);
    return 0;
}

/* The mounted snapshot of head fs whose guid is ds_guid (mounting it if needed). */
static int snap_by_guid(zpl_fs_t *fs, uint64_t ds_guid, zpl_fs_t **out)
{
    pthread_mutex_lock(&fs->snap_lock);
    for (size_t i = 0; i < fs->nsnaps; i++) {
        if (fs->snaps[i].fs->guid == ds_guid) {
            *out = fs->snaps[i].fs;
            pthread_mutex_unlock(&fs->snap_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&fs->snap_lock);
    dsl_dataset_t *ds;
    if (dsl_dataset_hold_by_guid(fs->dp, ds_guid, &ds)) return -ESTALE;
    char snap[DSL_NAME_MAX + 1] = "", name[DSL_NAME_MAX + 1], head[DSL_NAME_MAX + 1];
    dsl_dataset_get_name(ds, name, sizeof(name));
    dsl_dataset_get_name(fs->ds, head, sizeof(head));
    size_t hl = strlen(head);
    bool mine = dsl_dataset_is_snapshot(ds) && !strncmp(name, head, hl) && name[hl] == '@';
    if (mine) cairn_strlcpy(snap, name + hl + 1, sizeof(snap));
    dsl_dataset_rele(ds);
    if (!mine) return -ESTALE;
    int err = snap_mount(fs, snap, out);
    return err ? -ESTALE : 0;
}

int zpl_fh_to_inode(zpl_fs_t *fs, const void *buf, size_t len, zpl_node_t **out)
{
    const uint8_t *b;
    int err = fh_parse(buf, len, &b);
    if (err) return err;
    uint64_t export = get64(b + 8), ds_guid = get64(b + 16);
    uint64_t obj = get64(b + 24), gen = get64(b + 32);
    if (export != fs->guid || fs->snapshot) return -ESTALE;
    zpl_fs_t *target = fs;
    if (ds_guid != fs->guid) {
        err = snap_by_guid(fs, ds_guid, &target);
        if (err) return err;
    }
    if (b[3] != ZPL_NODE_REAL) {
        if (target != fs) return -ESTALE;
        return node_get(fs, b[3] == ZPL_NODE_CTLDIR ? ZPL_INO_CTLDIR : ZPL_INO_SNAPDIR, out);
    }
    if (obj == ZPL_INO_CTLDIR || obj == ZPL_INO_SNAPDIR) return -ESTALE;
    zpl_node_t *n;
    err = node_get(target, obj, &n);
    if (err) return err;
    pthread_rwlock_rdlock(&n->lock);
    bool ok = !n->dead && n->phys.gen == gen;
    pthread_rwlock_unlock(&n->lock);
    if (!ok) {
        zpl_node_rele(n);
        return -ESTALE;
    }
    *out = n;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Naming an object for the pool's error log (`pool status -v`). Files keep
 * their first parent's object number in their attributes; the name is the
 * entry of that directory that points at the object. Read from the object set
 * directly, without a mount, so a dataset nobody mounted can be named too. */

static int name_in_dir(objset_t *os, uint64_t dir, uint64_t obj, char *name, size_t len)
{
    zap_cursor_t zc;
    zap_cursor_init(&zc, os, dir, 0);
    zap_entry_t *e = malloc(sizeof(*e));
    if (!e) return -ENOMEM;
    int err = -ENOENT;
    for (;;) {
        int r = zap_cursor_next(&zc, e);
        if (r <= 0) {
            if (r < 0) err = r;
            break;
        }
        uint64_t v = 0;
        memcpy(&v, e->value, CAIRN_MIN(e->value_len, (uint32_t)sizeof(v)));
        if (dirent_obj(v) == obj) {
            cairn_strlcpy(name, e->name, len);
            err = 0;
            break;
        }
    }
    free(e);
    return err;
}

int zpl_obj_to_path(objset_t *os, uint64_t obj, char *buf, size_t len)
{
    uint64_t root = 0;
    int err = zap_lookup_u64(os, ZPL_MASTER_OBJ, "ROOT", &root);
    if (err) return err;
    if (len < 2) return -ENAMETOOLONG;
    /* Built from the end of buf towards its start. */
    size_t pos = len - 1;
    buf[pos] = 0;
    char name[ZPL_NAME_MAX + 1];
    zpl_phys_t *p = malloc(sizeof(*p));
    if (!p) return -ENOMEM;
    for (unsigned depth = 0; obj != root; depth++) {
        uint32_t plen = 0;
        if (depth > 4096) { err = -ELOOP; break; }
        err = dmu_bonus_read(os, obj, p, sizeof(*p), &plen);
        if (!err && (plen < ZPL_PHYS_HDR || p->magic != ZPL_MAGIC)) err = -EINVAL;
        if (!err) err = name_in_dir(os, p->parent, obj, name, sizeof name);
        if (err) break;
        size_t n = strlen(name);
        if (pos < n + 1) { err = -ENAMETOOLONG; break; }
        pos -= n;
        memcpy(buf + pos, name, n);
        buf[--pos] = '/';
        obj = p->parent;
    }
    free(p);
    if (err) return err;
    if (pos == len - 1) buf[--pos] = '/'; /* the root itself */
    memmove(buf, buf + pos, len - pos);
    return 0;
}

void zpl_memory_only_begin(void) { spa_memory_only_begin(); }
bool zpl_memory_only_end(void) { return spa_memory_only_end(); }
bool zpl_memory_only_refused(void) { return spa_memory_only_refused(); }
