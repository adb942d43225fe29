/*
 * The filesystem's records in the intent log (src/zil). Every change a ZPL
 * operation makes is logged, so a sync operation (NFS's creates, removes,
 * renames, setattrs and COMMIT, FILE_SYNC writes, sync=always) waits for one
 * log write and flush, not for its txg:
 *
 *   WRITE + SETATTR  a file write: the bytes, copied when the write happens,
 *                    and the file's whole attribute block
 *   SETATTR          mode, owner, times: the whole attribute block
 *   TRUNCATE         a size change: the new size (off) and attribute block
 *   FREE + SETATTR   a punched hole (zpl_deallocate): the range, then the
 *                    attribute block
 *   CREATE           obj = directory, arg[0] = the new object, arg[1] = its mode,
 *                    arg[2] = its record size (0: a directory), name, name2 = a
 *                    symlink target too long to live in the attribute block
 *   REMOVE           obj = directory, arg[0] = the node, arg[1] = 1 when its last
 *                    link went (the object is freed), name
 *   LINK             obj = directory, arg[0] = the node, name
 *   RENAME           obj = source directory, arg[0] = target directory,
 *                    arg[1] = the node, arg[2] = the node replaced (0: none),
 *                    arg[3] = 1 when that was freed, name -> name2
 *
 * Namespace records carry, as their data, the attribute block of every node
 * the operation changed, as it was after the change ((obj, length, bytes)
 * entries): replay sets them as they were, so link counts, sizes, times, the
 * change counter, the generation and an EXCLUSIVE create's verifier come back
 * exactly. Replay (zpl_zil_replay, at mount, before anyone sees the
 * filesystem) works on objects and ZAPs directly: a create claims the SAME
 * object number and sets the logged generation, so file handles handed out
 * before a crash resolve after it.
 *
 * Exactly once. The log replays records newer than the last durable txg, each
 * in a transaction that also records it as applied, in the order they were
 * queued. Every record is queued under the locks of every node its operation
 * changed, so records of dependent operations are in the order the operations
 * happened, and an operation in an unsynced txg never depends on one whose
 * record is skipped (locks order a node's changes into txgs too). Replay
 * starts from exactly the state before the first unsynced change; it still
 * checks each entry it adds or removes: found already done it does nothing
 * more than set the attributes, and an entry naming another object than the
 * record's stops replay with -EIO rather than guess.
 *
 * Object numbers are reused only after the txg that freed them synced (the
 * DMU's rule), so a create never claims a number whose REMOVE is still to be
 * replayed; during replay a REMOVE and a CREATE of one number may meet within
 * a txg, and the claim then waits for a sync.
 *
 * Why a write's bytes are copied rather than read back from the DMU when the
 * log is written (as volumes do): read back after a later truncate, the log
 * would hold the truncate's zeros under the size the write set. Replayed in
 * order with the TRUNCATE record that is right, but a log cut between the two
 * records (a crash in a multi-block log write) would replay a state that never
 * existed. A copy is what the write wrote.
 *
 * Large sync writes (zil_write_indirect: logbias=throughput, or no log device
 * and at least ZIL_INDIRECT_MIN bytes) write their whole records directly as
 * blocks (dmu_write_direct) and log each as ZIL_REC_WRITE_BLOCK, a pointer:
 * the data reaches the main vdevs once and the txg adopts those blocks. The
 * pieces that are not whole records are copied as above. A block's record
 * carries the block's txg (the data's), not the attribute transaction's.
 *
 * Large asynchronous writes (NFS UNSTABLE, committed later by COMMIT or
 * fsync), wherever a sync write of that size would have been written directly
 * (logbias=throughput, or no log device and at least ZIL_INDIRECT_MIN bytes),
 * are written with dmu_write_stamped and queued as zil_log_write_later (plus
 * their SETATTR): nothing is copied. Their commit writes each record the write
 * touched (whole, partial ones too: the dirty record holds all of its bytes)
 * as a block the txg adopts and logs pointers to them, so the data reaches
 * the disks once and the commit waits for one log write and flush, not for
 * the txg. Only a record still carrying the stamp of this write's change is
 * written so: its bytes are then exactly what the write made of it, as a copy
 * would be. A record changed since (a later write, truncate or punch), or a
 * txg already closing, makes the commit wait for the txg instead (2.23 bytes
 * on the leaves per byte of NFS data at a COMMIT per MiB, waiting for a txg
 * each time, each with its ~230 KiB of metadata). Copied into the log (as
 * before the barrier), a COMMIT wrote the bytes twice: 2.87 GiB on a mirror
 * for 1 GiB of NFS writes.
 *
 * Operations not logged are barriers (op_end in zpl.c): committing one waits
 * for its txg. That is every change under sync=disabled (nothing is committed
 * there, but a later commit after the property changes must not replay records
 * that depend on an unlogged change).
 */
#include "zpl_impl.h"

#include <cairn/log.h>
#include <cairn/util.h>

#include <string.h>

/* logbias=throughput: a large write is not copied into the log (the data is
 * written once, by its txg); committing it waits for that txg instead. */
#define ZPL_ZIL_THROUGHPUT_MIN (32 * 1024)

/* Each record's data fits in one log block with room to spare. */
#define ZPL_ZIL_WRITE_PIECE (64 * 1024u)

/* The records [off, off + len) spans, into d (rs, first, n); *plain when the
 * object has no record size yet or the write is empty (a plain dmu_write). */
static int record_span(zpl_node_t *n, uint64_t off, uint64_t len, zpl_zil_direct_t *d,
                       bool *plain)
{
    memset(d, 0, sizeof *d);
    dmu_object_info_t info;
    int err = dmu_object_info(n->fs->os, n->obj, &info);
    if (err) return err;
    uint32_t rs = info.props.recordsize;
    *plain = !rs || len == 0;
    if (*plain) return 0;
    d->rs = rs;
    d->first = off / rs;
    d->n = (size_t)((off + len - 1) / rs - d->first + 1);
    return 0;
}

int zpl_zil_write_direct(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf,
                         dmu_tx_t *tx, zpl_zil_direct_t *d)
{
    zpl_fs_t *fs = n->fs;
    bool plain;
    int err = record_span(n, off, len, d, &plain);
    if (err) return err;
    if (plain) return dmu_write(fs->os, n->obj, off, len, buf, tx);
    uint32_t rs = d->rs;
    d->bps = cairn_zalloc(d->n * sizeof *d->bps);
    const uint8_t *src = buf;
    for (uint64_t pos = off; pos < off + len && !err;) {
        uint64_t blk = pos / rs;
        uint64_t end = CAIRN_MIN((blk + 1) * rs, off + len);
        if (pos % rs == 0 && end - pos == rs)
            err = dmu_write_direct(fs->os, n->obj, pos, rs, src + (pos - off), tx,
                                   &d->bps[blk - d->first]);
        else
            err = dmu_write(fs->os, n->obj, pos, end - pos, src + (pos - off), tx);
        pos = end;
    }
    return err; /* the commit flushes the blocks before logging pointers to them */
}

bool zpl_zil_write_later(zpl_fs_t *fs, uint64_t len, bool throughput)
{
    return len >= ZPL_ZIL_THROUGHPUT_MIN && (throughput || zil_write_indirect(fs->zil, false, len));
}

int zpl_zil_write_stamped(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf,
                          dmu_tx_t *tx, zpl_zil_direct_t *d)
{
    zpl_fs_t *fs = n->fs;
    bool plain;
    int err = record_span(n, off, len, d, &plain);
    if (err) return err;
    if (plain) return dmu_write(fs->os, n->obj, off, len, buf, tx);
    d->txg = dmu_tx_txg(tx);
    d->stamps = cairn_zalloc(d->n * sizeof *d->stamps);
    return dmu_write_stamped(fs->os, n->obj, off, len, buf, tx, d->stamps, d->n);
}

static void log_copied(zpl_node_t *n, uint64_t txg, uint64_t off, uint64_t len, const void *buf)
{
    for (uint64_t done = 0; done < len;) {
        uint32_t piece = (uint32_t)CAIRN_MIN((uint64_t)ZPL_ZIL_WRITE_PIECE, len - done);
        zil_log(n->fs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE, .txg = txg, .obj = n->obj,
                                         .off = off + done, .len = piece,
                                         .data = (const uint8_t *)buf + done, .dlen = piece});
        done += piece;
    }
}

void zpl_zil_log_write(zpl_node_t *n, uint64_t off, uint64_t len, const void *buf, dmu_tx_t *tx,
                       bool throughput, const zpl_zil_direct_t *direct)
{
    zpl_fs_t *fs = n->fs;
    uint64_t txg = dmu_tx_txg(tx);
    if (direct && direct->bps) {
        const uint8_t *src = buf;
        uint32_t rs = direct->rs;
        for (uint64_t pos = off; pos < off + len;) {
            uint64_t blk = pos / rs;
            uint64_t end = CAIRN_MIN((blk + 1) * rs, off + len);
            const cairn_blkptr_t *bp = &direct->bps[blk - direct->first];
            if (!cairn_bp_is_hole(bp))
                zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_WRITE_BLOCK, .txg = bp->birth_txg,
                                              .obj = n->obj, .off = pos, .len = rs, .data = bp,
                                              .dlen = sizeof *bp});
            else
                log_copied(n, txg, pos, end - pos, src + (pos - off));
            pos = end;
        }
    } else if (direct && direct->stamps) {
        /* An asynchronous write: its commit writes the records as blocks. */
        zil_log_write_later(fs->zil, direct->txg, n->obj, direct->first, direct->rs, direct->n,
                            direct->stamps);
    } else if (zpl_zil_write_later(fs, len, throughput)) {
        /* A large asynchronous write not stamped (the log was off when it
         * was written): its commit waits for the txg, which writes it once. */
        zil_log_barrier(fs->zil, txg);
        return;
    } else {
        log_copied(n, txg, off, len, buf);
    }
    zil_log(fs->zil, &(zil_rec_t){.type = ZIL_REC_SETATTR, .txg = txg, .obj = n->obj,
                                  .data = &n->phys,
                                  .dlen = (uint32_t)(ZPL_PHYS_HDR + n->phys.inline_len)});
}

/* ---------------- attribute lists ---------------- */

#define ATTR_ENTRY_HDR 16u
#define ATTRS_MAX 4

typedef struct attr_list {
    uint8_t buf[ATTRS_MAX * (ATTR_ENTRY_HDR + DMU_BONUS_MAX)];
    uint32_t len;
} attr_list_t;

static uint32_t phys_len(const zpl_phys_t *p) { return (uint32_t)(ZPL_PHYS_HDR + p->inline_len); }

static void attrs_add(attr_list_t *l, uint64_t obj, const zpl_phys_t *p)
{
    uint32_t len = phys_len(p), pad = (uint32_t)CAIRN_P2ROUNDUP((size_t)len, (size_t)8);
    uint8_t *e = l->buf + l->len;
    memset(e, 0, ATTR_ENTRY_HDR + pad);
    memcpy(e, &obj, 8);
    memcpy(e + 8, &len, 4);
    memcpy(e + ATTR_ENTRY_HDR, p, len);
    l->len += ATTR_ENTRY_HDR + pad;
}

/* Sets every attribute block of a record's list; -EINVAL for a malformed list. */
static int attrs_apply(objset_t *os, const zil_rec_t *rec, dmu_tx_t *tx)
{
    const uint8_t *d = rec->data;
    for (uint32_t o = 0; o < rec->dlen;) {
        uint64_t obj;
        uint32_t len;
        if (rec->dlen - o < ATTR_ENTRY_HDR) return -EINVAL;
        memcpy(&obj, d + o, 8);
        memcpy(&len, d + o + 8, 4);
        uint32_t pad = (uint32_t)CAIRN_P2ROUNDUP((size_t)len, (size_t)8);
        if (len < ZPL_PHYS_HDR || len > DMU_BONUS_MAX || rec->dlen - o - ATTR_ENTRY_HDR < pad)
            return -EINVAL;
        int err = dmu_bonus_write(os, obj, d + o + ATTR_ENTRY_HDR, len, tx);
        if (err) return err;
        o += ATTR_ENTRY_HDR + pad;
    }
    return 0;
}

/* ---------------- logging ---------------- */

static void log_ns(zpl_fs_t *fs, zil_rec_t *rec, const attr_list_t *l, dmu_tx_t *tx)
{
    rec->txg = dmu_tx_txg(tx);
    rec->data = l->buf;
    rec->dlen = l->len;
    zil_log(fs->zil, rec);
}

void zpl_zil_log_create(zpl_node_t *dir, const char *name, uint64_t obj, const zpl_phys_t *p,
                        uint32_t recordsize, const char *target, dmu_tx_t *tx)
{
    attr_list_t l = {.len = 0};
    attrs_add(&l, obj, p);
    attrs_add(&l, dir->obj, &dir->phys);
    zil_rec_t rec = {.type = ZIL_REC_CREATE, .obj = dir->obj, .arg = {obj, p->mode, recordsize},
                     .name = name, .name2 = target};
    log_ns(dir->fs, &rec, &l, tx);
}

void zpl_zil_log_remove(zpl_node_t *dir, const char *name, uint64_t obj, const zpl_phys_t *p,
                        bool freed, dmu_tx_t *tx)
{
    attr_list_t l = {.len = 0};
    attrs_add(&l, dir->obj, &dir->phys);
    if (!freed) attrs_add(&l, obj, p);
    zil_rec_t rec = {.type = ZIL_REC_REMOVE, .obj = dir->obj, .arg = {obj, freed}, .name = name};
    log_ns(dir->fs, &rec, &l, tx);
}

void zpl_zil_log_link(zpl_node_t *dir, const char *name, zpl_node_t *file, dmu_tx_t *tx)
{
    attr_list_t l = {.len = 0};
    attrs_add(&l, file->obj, &file->phys);
    attrs_add(&l, dir->obj, &dir->phys);
    zil_rec_t rec = {.type = ZIL_REC_LINK, .obj = dir->obj, .arg = {file->obj}, .name = name};
    log_ns(dir->fs, &rec, &l, tx);
}

void zpl_zil_log_rename(zpl_node_t *sdir, const char *sname, zpl_node_t *tdir, const char *tname,
                        zpl_node_t *snode, zpl_node_t *tnode, bool tnode_freed, dmu_tx_t *tx)
{
    attr_list_t l = {.len = 0};
    attrs_add(&l, snode->obj, &snode->phys);
    attrs_add(&l, sdir->obj, &sdir->phys);
    if (tdir != sdir) attrs_add(&l, tdir->obj, &tdir->phys);
    if (tnode && !tnode_freed) attrs_add(&l, tnode->obj, &tnode->phys);
    zil_rec_t rec = {.type = ZIL_REC_RENAME, .obj = sdir->obj,
                     .arg = {tdir->obj, snode->obj, tnode ? tnode->obj : 0, tnode_freed},
                     .name = sname, .name2 = tname};
    log_ns(sdir->fs, &rec, &l, tx);
}

void zpl_zil_log_setattr(zpl_node_t *n, bool size_changed, dmu_tx_t *tx)
{
    zil_log(n->fs->zil, &(zil_rec_t){.type = size_changed ? ZIL_REC_TRUNCATE : ZIL_REC_SETATTR,
                                     .txg = dmu_tx_txg(tx), .obj = n->obj, .off = n->phys.size,
                                     .data = &n->phys, .dlen = phys_len(&n->phys)});
}

/* ---------------- replay ---------------- */

static int replay_conflict(const zil_rec_t *rec, const char *what)
{
    log_error("zpl", "replay of record %llu (type %u, directory %llu, \"%s\"): %s",
              (unsigned long long)rec->seq, rec->type, (unsigned long long)rec->obj,
              rec->name ? rec->name : "", what);
    return -EIO;
}

/* The directory entry value of name in dir: 0, or -ENOENT. */
static int entry_get(objset_t *os, uint64_t dir, const char *name, uint64_t *value)
{
    return zap_lookup_u64(os, dir, name, value);
}

/* Frees a node whose last link went (mode: its type bits; a directory is a ZAP). */
static int free_node(objset_t *os, uint64_t obj, uint32_t mode, dmu_tx_t *tx)
{
    int err = zpl_xattr_free(os, obj, tx);
    if (err) return err;
    return S_ISDIR(mode) ? zap_destroy(os, obj, tx) : dmu_object_free(os, obj, tx);
}

static int replay_create(zpl_fs_t *fs, const zil_rec_t *rec, dmu_tx_t *tx)
{
    objset_t *os = fs->os;
    uint64_t obj = rec->arg[0];
    uint32_t mode = (uint32_t)rec->arg[1];
    uint64_t v;
    int err = entry_get(os, rec->obj, rec->name, &v);
    if (err == 0) {
        if (dirent_obj(v) != obj) return replay_conflict(rec, "the name is taken by another object");
        return attrs_apply(os, rec, tx);   /* already there */
    }
    if (err != -ENOENT) return err;
    if (S_ISDIR(mode)) {
        err = zap_create_claim(os, obj, tx);
    } else {
        dsl_dataset_props_t props;
        dsl_dataset_get_props(fs->ds, &props);
        dmu_object_props_t op = zpl_object_props(&props, (uint32_t)rec->arg[2]);
        err = dmu_object_claim(os, obj, &op, tx);
    }
    if (err == -EEXIST) return replay_conflict(rec, "the object number is in use");
    if (err) return err;
    if (rec->name2) err = dmu_write(os, obj, 0, strlen(rec->name2), rec->name2, tx);
    if (!err) err = zap_add_u64(os, rec->obj, rec->name, dirent_encode(mode_to_dt(mode), obj), tx);
    if (!err) err = attrs_apply(os, rec, tx);
    return err;
}

/* The type bits of obj from its attribute block (0 when it has none). */
static uint32_t node_mode(objset_t *os, uint64_t obj)
{
    zpl_phys_t p;
    uint32_t len = 0;
    memset(&p, 0, sizeof p);
    if (dmu_bonus_read(os, obj, &p, sizeof p, &len) || len < ZPL_PHYS_HDR) return 0;
    return p.mode;
}

static int replay_remove(zpl_fs_t *fs, const zil_rec_t *rec, dmu_tx_t *tx)
{
    objset_t *os = fs->os;
    uint64_t v;
    int err = entry_get(os, rec->obj, rec->name, &v);
    if (err == -ENOENT) return attrs_apply(os, rec, tx);   /* already gone */
    if (err) return err;
    if (dirent_obj(v) != rec->arg[0]) return replay_conflict(rec, "the name names another object");
    err = zap_remove(os, rec->obj, rec->name, tx);
    if (!err && rec->arg[1]) err = free_node(os, rec->arg[0], node_mode(os, rec->arg[0]), tx);
    if (!err) err = attrs_apply(os, rec, tx);
    return err;
}

static int replay_link(zpl_fs_t *fs, const zil_rec_t *rec, dmu_tx_t *tx)
{
    objset_t *os = fs->os;
    uint64_t v;
    int err = entry_get(os, rec->obj, rec->name, &v);
    if (err == 0 && dirent_obj(v) != rec->arg[0])
        return replay_conflict(rec, "the name is taken by another object");
    if (err == -ENOENT) {
        uint32_t mode = node_mode(os, rec->arg[0]);
        if (!mode) return replay_conflict(rec, "the linked object does not exist");
        err = zap_add_u64(os, rec->obj, rec->name, dirent_encode(mode_to_dt(mode), rec->arg[0]), tx);
    }
    if (!err) err = attrs_apply(os, rec, tx);
    return err;
}

static int replay_rename(zpl_fs_t *fs, const zil_rec_t *rec, dmu_tx_t *tx)
{
    objset_t *os = fs->os;
    uint64_t sdir = rec->obj, tdir = rec->arg[0], snode = rec->arg[1], tnode = rec->arg[2];
    uint64_t sv, tv;
    int err = entry_get(os, sdir, rec->name, &sv);
    int terr = entry_get(os, tdir, rec->name2, &tv);
    if (terr && terr != -ENOENT) return terr;
    if (err == -ENOENT) {
        if (terr == 0 && dirent_obj(tv) == snode) return attrs_apply(os, rec, tx); /* done */
        return replay_conflict(rec, "neither name names the renamed object");
    }
    if (err) return err;
    if (dirent_obj(sv) != snode) return replay_conflict(rec, "the source names another object");
    if (tnode) {
        if (terr || dirent_obj(tv) != tnode)
            return replay_conflict(rec, "the target does not name the replaced object");
        uint32_t tmode = node_mode(os, tnode);
        err = zap_remove(os, tdir, rec->name2, tx);
        if (!err && rec->arg[3]) err = free_node(os, tnode, tmode, tx);
    } else if (terr == 0) {
        return replay_conflict(rec, "the target name is taken");
    }
    if (!err) err = zap_remove(os, sdir, rec->name, tx);
    if (!err) err = zap_add_u64(os, tdir, rec->name2, sv, tx);
    if (!err) err = attrs_apply(os, rec, tx);
    return err;
}

static int replay_truncate(zpl_fs_t *fs, const zil_rec_t *rec, dmu_tx_t *tx)
{
    objset_t *os = fs->os;
    dmu_object_info_t oi;
    int err = dmu_object_info(os, rec->obj, &oi);
    if (err == -ENOENT) {
        /* As for writes (zil_replay_dmu): freed by a later, durable change. */
        log_warn("zpl", "replay: object %llu no longer exists; truncate %llu skipped",
                 (unsigned long long)rec->obj, (unsigned long long)rec->seq);
        return 0;
    }
    if (err) return err;
    if (oi.max_offset > rec->off)
        err = dmu_free_range(os, rec->obj, rec->off, oi.max_offset - rec->off, tx);
    if (!err) err = rec->dlen <= DMU_BONUS_MAX ? dmu_bonus_write(os, rec->obj, rec->data, rec->dlen, tx)
                                              : -EINVAL;
    return err;
}

int zpl_zil_replay(void *arg, zilog_t *zl, const zil_rec_t *rec)
{
    zpl_fs_t *fs = arg;
    switch (rec->type) {
    case ZIL_REC_WRITE:
    case ZIL_REC_WRITE_BLOCK:
    case ZIL_REC_FREE:
    case ZIL_REC_SETATTR:
        return zil_replay_dmu(fs->os, zl, rec);
    case ZIL_REC_CREATE:
    case ZIL_REC_REMOVE:
    case ZIL_REC_LINK:
        if (!rec->name) return -EINVAL;
        break;
    case ZIL_REC_RENAME:
        if (!rec->name || !rec->name2) return -EINVAL;
        break;
    case ZIL_REC_TRUNCATE:
        break;
    default:
        return -ENOTSUP;
    }
    for (;;) {
        dmu_tx_t *tx = dmu_tx_begin(fs->os);
        int err;
        switch (rec->type) {
        case ZIL_REC_CREATE: err = replay_create(fs, rec, tx); break;
        case ZIL_REC_REMOVE: err = replay_remove(fs, rec, tx); break;
        case ZIL_REC_LINK: err = replay_link(fs, rec, tx); break;
        case ZIL_REC_RENAME: err = replay_rename(fs, rec, tx); break;
        default: err = replay_truncate(fs, rec, tx); break;
        }
        if (!err) zil_replay_mark(zl, tx);
        dmu_tx_commit(tx);
        /* The number was freed by a record replayed in this same txg. A claim
         * fails before anything changed, so the record is simply tried again. */
        if (err == -EBUSY) {
            err = dmu_objset_sync(fs->os);
            if (!err) continue;
        }
        return err;
    }
}
