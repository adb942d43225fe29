/*
 * ZPL: the POSIX filesystem layer over a filesystem dataset (src/zpl/), the
 * library the NFS server calls.
 *
 * A mounted filesystem (zpl_fs_t) is one dataset: a head (read-write unless
 * readonly=on) or a snapshot (always read-only). Files, directories, symlinks
 * and special files are nodes (zpl_node_t): reference-counted in-memory
 * handles for one object of the dataset, like a kernel's vnodes. Every
 * function that hands out a node gives the caller a reference, which the
 * caller drops with zpl_node_rele(); a node whose object was removed stays
 * valid memory but every operation on it returns -ESTALE.
 *
 * Calls are synchronous and thread-safe: a front end calls them from as many
 * worker threads as it likes. When a call returns, its change is visible to
 * every other caller and belongs to the open txg; it is durable once that txg
 * syncs (within a few seconds) or after zpl_fsync()/zpl_commit() returns, or
 * at once for writes made with ZPL_IO_SYNC (honouring the dataset's `sync`
 * property: sync=always makes every change durable before returning,
 * sync=disabled makes fsync a no-op).
 *
 * Permissions are the caller's business: operations do not check mode bits
 * (the NFS server applies export rules and calls zpl_access()). Owners of new
 * nodes come from the zpl_cred_t passed in.
 *
 * Errors are negative errnos a front end maps one to one onto NFS status
 * codes: -ENOENT, -EEXIST, -ENOTDIR, -EISDIR, -ENOTEMPTY, -EINVAL,
 * -ENAMETOOLONG, -EXDEV, -EROFS, -EDQUOT, -ENOSPC, -ESTALE, -EFBIG, -EMLINK,
 * -EIO.
 *
 * At the root of every head filesystem a virtual read-only directory
 * `.cairn/snapshot/` lists the dataset's snapshots; each entry is the root
 * of that snapshot, mounted read-only on first lookup. Nodes inside a
 * snapshot belong to the snapshot's zpl_fs_t (zpl_node_fs()).
 */
#ifndef CAIRN_ZPL_H
#define CAIRN_ZPL_H

#include <cairn/dsl.h>
#include <cairn/types.h>

typedef struct zpl_fs zpl_fs_t;
typedef struct zpl_node zpl_node_t;

#define ZPL_NAME_MAX 255
#define ZPL_SYMLINK_MAX 4095             /* bytes of a symlink target */
#define ZPL_MAX_FILE_SIZE ((uint64_t)INT64_MAX)
#define ZPL_LINK_MAX_DEFAULT 65535u
#define ZPL_CTLDIR_NAME ".cairn"
/* Inode numbers of the virtual directories (no real object has them). */
#define ZPL_INO_CTLDIR 0x0000ffffffffff01ull
#define ZPL_INO_SNAPDIR 0x0000ffffffffff02ull

/* ---- mounting ---- */
/* Mounts dataset dsname ("pool/fs" or "pool/fs@snap"). The first mount of an
 * empty writable filesystem creates its master node and root directory.
 * -ENOENT: no such dataset; -EINVAL: a volume. */
int zpl_mount(dsl_pool_t *dp, const char *dsname, zpl_fs_t **out);
/* Unmounts (and the snapshots mounted through it). -EBUSY while nodes are held. */
int zpl_unmount(zpl_fs_t *fs);
/* The path of object obj from the root of the filesystem whose object set is
 * os ("/dir/file"), by its parent pointers and directory entries, without a
 * mount (the pool's error log names files so). -ENOENT when the object or an
 * entry leading to it is gone. */
int zpl_obj_to_path(objset_t *os, uint64_t obj, char *buf, size_t len);
uint64_t zpl_fs_guid(zpl_fs_t *fs);       /* the dataset's guid (NFS fsid) */
dsl_dataset_t *zpl_fs_dataset(zpl_fs_t *fs);
bool zpl_fs_readonly(zpl_fs_t *fs);       /* snapshot or readonly=on, now */
/* The head this snapshot was mounted through (NULL for a head). */
zpl_fs_t *zpl_fs_parent(zpl_fs_t *fs);
/* Most hard links a node may have (-EMLINK beyond); tests lower it. */
void zpl_fs_set_link_max(zpl_fs_t *fs, uint64_t link_max);
/* Unmounts the idle snapshots mounted through .cairn/snapshot of this head (they
 * hold their datasets; call before destroying snapshots). Returns how many stay
 * mounted because nodes in them are held. A snapshot renamed while mounted is
 * found by its new name only. */
int zpl_fs_release_snapshots(zpl_fs_t *fs);

typedef struct zpl_statfs {
    uint64_t total_bytes;     /* used + available */
    uint64_t free_bytes;
    uint64_t avail_bytes;
    uint64_t total_files;     /* objects in use + what the free space could hold */
    uint64_t free_files;
    uint32_t blocksize;       /* recordsize */
    uint32_t name_max;        /* 255 */
    uint64_t fsid;            /* dataset guid */
} zpl_statfs_t;
int zpl_statfs(zpl_fs_t *fs, zpl_statfs_t *out);

/* ---- nodes ---- */
int zpl_root(zpl_fs_t *fs, zpl_node_t **out);
/* The node of object ino (no generation check; for READDIRPLUS): -ESTALE if free. */
int zpl_iget(zpl_fs_t *fs, uint64_t ino, zpl_node_t **out);
void zpl_node_hold(zpl_node_t *n);
void zpl_node_rele(zpl_node_t *n);
zpl_fs_t *zpl_node_fs(zpl_node_t *n);
uint64_t zpl_node_ino(zpl_node_t *n);
/* The node's path in its filesystem ("/dir/file", zpl_obj_to_path): for names
 * shown to people (analytics), looked up once per file, not per operation. */
int zpl_node_path(zpl_node_t *n, char *buf, size_t len);
/* The object's generation: (ino, generation) names one file for the life of
 * the dataset, while an ino alone is reused once its file is freed. */
uint64_t zpl_node_gen(zpl_node_t *n);

/* Open references (NFSv4 opens and locks; NFSv3 has none): while one is held a
 * removed file stays alive (see zpl_remove). zpl_open_hold fails with -ESTALE
 * on a freed node; the caller keeps a node reference too. Both are no-ops for
 * the virtual directories and on snapshots. */
int zpl_open_hold(zpl_node_t *n);
void zpl_open_rele(zpl_node_t *n);

/* ---- file handles: (export guid, dataset guid, object, generation) ---- */
#define ZPL_FH_SIZE 40
typedef struct zpl_fh {
    uint8_t bytes[ZPL_FH_SIZE];
} zpl_fh_t;
int zpl_fh_encode(zpl_node_t *n, zpl_fh_t *fh);
/* The guid of the head filesystem (export) a handle was issued under, so the
 * server can find which zpl_fs_t to pass to zpl_fh_to_inode(). -EINVAL if the
 * bytes are not a Cairn handle. */
int zpl_fh_export_guid(const void *buf, size_t len, uint64_t *guid);
/* Resolves a handle against the export it was issued under (fs is a head);
 * snapshot handles mount their snapshot. -ESTALE when the object is gone or its
 * number was reused, or the snapshot is destroyed; -EINVAL for garbage. */
int zpl_fh_to_inode(zpl_fs_t *fs, const void *buf, size_t len, zpl_node_t **out);

/* ---- attributes ---- */
typedef struct zpl_attr {
    uint32_t mode;            /* S_IFMT type bits | permission bits */
    uint32_t uid, gid;
    uint32_t blksize;         /* the object's record size */
    uint64_t nlink;
    uint64_t size;            /* directories: entries + 2 */
    uint64_t used;            /* bytes allocated as of the last sync, plus an estimate for unsynced writes */
    uint64_t rdev;            /* makedev() value for devices */
    int64_t atime_ns, mtime_ns, ctime_ns, crtime_ns;  /* since the epoch */
    uint64_t ino;             /* fileid */
    uint64_t parent;          /* directory's parent object (files: first parent) */
    uint64_t generation;
    uint64_t change;          /* NFSv4 change attribute: grows on every change */
    uint64_t fsid;            /* guid of the dataset (snapshot guid inside one) */
} zpl_attr_t;

/* Weak cache consistency (NFSv3 wcc_data): a directory's or file's attributes
 * just before and after an operation, taken atomically with it. */
typedef struct zpl_wcc {
    uint64_t pre_size;
    int64_t pre_mtime_ns, pre_ctime_ns;
    uint64_t pre_change;
    zpl_attr_t post;
} zpl_wcc_t;

enum {
    ZPL_SET_MODE = 1 << 0,
    ZPL_SET_UID = 1 << 1,
    ZPL_SET_GID = 1 << 2,
    ZPL_SET_SIZE = 1 << 3,
    ZPL_SET_ATIME = 1 << 4,       /* to atime_ns */
    ZPL_SET_MTIME = 1 << 5,       /* to mtime_ns */
    ZPL_SET_ATIME_NOW = 1 << 6,
    ZPL_SET_MTIME_NOW = 1 << 7,
    ZPL_SET_CTIME = 1 << 8,       /* to ctime_ns (restores; otherwise ctime = now) */
    ZPL_SET_GUARD_CTIME = 1 << 9, /* NFSv3 guard: -EAGAIN unless ctime == guard_ctime_ns */
};
typedef struct zpl_setattr {
    uint32_t mask;
    uint32_t mode;                /* permission bits only (07777) */
    uint32_t uid, gid;
    uint64_t size;
    int64_t atime_ns, mtime_ns, ctime_ns;
    int64_t guard_ctime_ns;
} zpl_setattr_t;

int zpl_getattr(zpl_node_t *n, zpl_attr_t *out);
/* Setting the size of a directory: -EISDIR; of a symlink or special file: -EINVAL. */
int zpl_setattr(zpl_node_t *n, const zpl_setattr_t *sa, zpl_wcc_t *wcc);

typedef struct zpl_cred {
    uint32_t uid, gid;
    uint32_t ngroups;
    uint32_t groups[16];
} zpl_cred_t;
enum { ZPL_ACCESS_READ = 4, ZPL_ACCESS_WRITE = 2, ZPL_ACCESS_EXEC = 1 };
/* Which of the wanted access bits mode, owner and group grant to cred
 * (uid 0 gets read/write always, exec when any x bit is set). */
int zpl_access(zpl_node_t *n, const zpl_cred_t *cred, uint32_t want, uint32_t *granted);

/* ---- names ---- */
/* "." and ".." work; ".." of the root is the root. */
int zpl_lookup(zpl_node_t *dir, const char *name, zpl_node_t **out);

typedef enum zpl_create_how {
    ZPL_CREATE_UNCHECKED = 0,     /* an existing regular file is returned as is */
    ZPL_CREATE_GUARDED = 1,       /* -EEXIST if the name exists */
    ZPL_CREATE_EXCLUSIVE = 2,     /* -EEXIST unless it exists with this verifier */
} zpl_create_how_t;
#define ZPL_VERF_SIZE 8

/* A regular file. EXCLUSIVE keeps verf in the node until the first setattr,
 * so a retransmitted create finds its own file; out may be NULL. */
int zpl_create(zpl_node_t *dir, const char *name, uint32_t mode, const zpl_cred_t *cred,
               zpl_create_how_t how, const uint8_t verf[ZPL_VERF_SIZE], zpl_node_t **out,
               zpl_wcc_t *dir_wcc);
int zpl_mkdir(zpl_node_t *dir, const char *name, uint32_t mode, const zpl_cred_t *cred,
              zpl_node_t **out, zpl_wcc_t *dir_wcc);
int zpl_symlink(zpl_node_t *dir, const char *name, const char *target, const zpl_cred_t *cred,
                zpl_node_t **out, zpl_wcc_t *dir_wcc);
/* mode carries the type: S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK (with rdev). */
int zpl_mknod(zpl_node_t *dir, const char *name, uint32_t mode, uint64_t rdev,
              const zpl_cred_t *cred, zpl_node_t **out, zpl_wcc_t *dir_wcc);
/* Copies the target (NUL-terminated when it fits) and sets *len to its length. */
int zpl_readlink(zpl_node_t *n, char *buf, size_t cap, size_t *len);
/* A hard link to a non-directory (-EPERM for a directory); -EMLINK, -EXDEV. */
int zpl_link(zpl_node_t *file, zpl_node_t *dir, const char *name, zpl_wcc_t *dir_wcc);
/* Removes a non-directory (-EISDIR for a directory). When the last link goes
 * the object is freed at once, and handles to it become stale, unless the file
 * is open (zpl_open_hold): then it joins the dataset's unlinked set, keeps its
 * number, data and handles (nlink 0) and is freed at its last zpl_open_rele,
 * or when the filesystem is next mounted after a crash. A rename over an open
 * target is a remove of that target. */
int zpl_remove(zpl_node_t *dir, const char *name, zpl_wcc_t *dir_wcc);
int zpl_rmdir(zpl_node_t *dir, const char *name, zpl_wcc_t *dir_wcc);
/* Atomic (one transaction). Replaces an existing target of a compatible type
 * (a directory only when empty); renaming a directory into its own subtree is
 * -EINVAL; "." and ".." as either name are -EINVAL; across filesystems -EXDEV. */
int zpl_rename(zpl_node_t *sdir, const char *sname, zpl_node_t *tdir, const char *tname,
               zpl_wcc_t *sdir_wcc, zpl_wcc_t *tdir_wcc);

/* Entries from after `cookie` (0 = start). "." has cookie 1 and ".." 2; other
 * cookies stay valid while entries come and go (no survivor skipped or
 * repeated). fn returns non-zero to stop before taking the entry; resume from
 * the last taken entry's cookie. type is a DT_* value. *eof (optional) tells
 * whether the end was reached. */
typedef int (*zpl_readdir_fn)(void *arg, const char *name, uint64_t ino, uint32_t type,
                              uint64_t cookie);
int zpl_readdir(zpl_node_t *dir, uint64_t cookie, zpl_readdir_fn fn, void *arg, bool *eof);

/* ---- extended attributes ----
 * Names of 1..255 bytes, values of up to 8 KiB (-E2BIG beyond), kept in the
 * dataset with the node (snapshots keep them as they were). A set or remove
 * changes ctime and the change counter and is durable when it returns. */
typedef enum zpl_xattr_how {
    ZPL_XATTR_EITHER = 0,         /* create or replace */
    ZPL_XATTR_CREATE = 1,         /* -EEXIST if it exists */
    ZPL_XATTR_REPLACE = 2,        /* -ENODATA unless it exists */
} zpl_xattr_how_t;
/* The value of name: -ENODATA when absent; -ERANGE (and *len) when longer than cap. */
int zpl_getxattr(zpl_node_t *n, const char *name, void *buf, size_t cap, size_t *len);
int zpl_setxattr(zpl_node_t *n, const char *name, const void *val, size_t len,
                 zpl_xattr_how_t how, zpl_wcc_t *wcc);
int zpl_removexattr(zpl_node_t *n, const char *name, zpl_wcc_t *wcc); /* -ENODATA */
/* Names from after cookie (0: the start); fn returns non-zero to stop before
 * taking the name, and the listing resumes from the last taken name's cookie. */
typedef int (*zpl_listxattr_fn)(void *arg, const char *name, uint64_t cookie);
int zpl_listxattr(zpl_node_t *n, uint64_t cookie, zpl_listxattr_fn fn, void *arg, bool *eof);

/* ---- data ---- */
enum { ZPL_IO_SYNC = 1 << 0 };    /* write: durable before returning (FILE_SYNC) */
/* Reads up to len bytes; holes read as zeros; *eof when the end of file is reached. */
int zpl_read(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof);
/* zpl_read for a thread that must not wait for a device (a connection's I/O
 * thread): served from dirty records and the ARC, else -EWOULDBLOCK having
 * changed nothing (also when the read would have to update the atime), and
 * the caller repeats it with zpl_read elsewhere. */
int zpl_read_memory(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof);
/* zpl_read (memory_only: zpl_read_memory) that may lend ARC buffers as spans
 * over buf instead of copying them into it (dmu_read_spans): the caller sends
 * buf with the spans laid over it and then releases them. On error no span is
 * added. */
int zpl_read_spans(zpl_node_t *n, uint64_t off, size_t len, void *buf, size_t *nread, bool *eof,
                   bool memory_only, cairn_spans_t *spans);
/* Writes all of buf or nothing; -EFBIG past ZPL_MAX_FILE_SIZE. */
int zpl_write(zpl_node_t *n, uint64_t off, size_t len, const void *buf, int flags,
              zpl_wcc_t *wcc);
/* Where data (hole false) or a hole (hole true) begins at or after off, as
 * lseek SEEK_DATA / SEEK_HOLE: at record granularity (a small hole inside a
 * record reads as zeros but counts as data); the end of file is a hole.
 * -ENXIO when off is at or past the end of file, or no data follows it. */
int zpl_seek(zpl_node_t *n, uint64_t off, bool hole, uint64_t *out);
/* Punches a hole (fallocate PUNCH_HOLE|KEEP_SIZE): [off, off + len) reads as
 * zeros and the records wholly inside it are freed; the size does not change
 * and the range is cut at the end of file. Logged and durable before it
 * returns, and its txg synced, so the file's and the dataset's used space
 * already show what it freed. */
int zpl_deallocate(zpl_node_t *n, uint64_t off, uint64_t len, zpl_wcc_t *wcc);
/* fallocate mode 0 as copy-on-write can honour it: checks that len bytes
 * would fit now (-ENOSPC, -EDQUOT) and extends the size to off + len if it
 * is smaller. Nothing is reserved: every later write allocates new blocks
 * anyway, and can still fail for space. Durable before it returns. */
int zpl_allocate(zpl_node_t *n, uint64_t off, uint64_t len, zpl_wcc_t *wcc);
/* Copies up to len bytes of src from soff to dst at doff inside the daemon
 * (the data is read and written again - zpl_clone_range shares the blocks
 * instead where the pool can; holes of the source stay holes and are not read). Stops short at the
 * end of src; *copied says how far it got, also on error. dst is durable when
 * it returns. -EXDEV across filesystems. Overlapping ranges of one file are
 * the caller's to refuse (NFS: INVAL). */
int zpl_copy_range(zpl_node_t *src, uint64_t soff, zpl_node_t *dst, uint64_t doff, uint64_t len,
                   uint64_t *copied);
/* Block cloning: [doff, doff + len) of dst becomes [soff, soff + len) of src
 * by sharing its blocks (dmu_clone_range): both files in one pool with the
 * same record size (else -EXDEV), offsets and len multiples of it (else
 * -EINVAL). dst grows to doff + len if shorter. Durable when it returns (the
 * intent log has no clone record: its txg is synced). -EAGAIN when the source
 * kept changing; -EOPNOTSUPP when a block cannot be shared: copy instead.
 * *cloned: bytes done (all of len on success). */
int zpl_clone_range(zpl_node_t *src, uint64_t soff, zpl_node_t *dst, uint64_t doff, uint64_t len,
                    uint64_t *cloned);
/* The unit of zpl_clone_range for n: its record size (0: none). */
uint32_t zpl_clone_blksize(zpl_node_t *n);
/* Makes everything written to the filesystem so far durable (NFS COMMIT). */
int zpl_fsync(zpl_node_t *n);
int zpl_commit(zpl_fs_t *fs);

/* Memory-only mode of the calling thread, for a front end's I/O thread that runs
 * cheap calls itself and must never wait for a device (include/cairn/spa.h,
 * spa_memory_only_begin, says how): begin, end (true when a read was refused,
 * so the call must be dropped and run where it may wait), and refused (asked
 * before the mode ends). The front ends reach the pool only through the ZPL. */
void zpl_memory_only_begin(void);
bool zpl_memory_only_end(void);
bool zpl_memory_only_refused(void);

#endif
