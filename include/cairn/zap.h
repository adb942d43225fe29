/*
 * ZAP: hashed name -> value objects (src/zap/), the "attribute processor"
 * that directories, the dataset hierarchy and properties are built on.
 *
 * A ZAP is one DMU object. Names are byte strings of 1..ZAP_NAME_MAX bytes
 * (not necessarily NUL-terminated in storage; the API takes C strings), values
 * are byte strings of 0..ZAP_VALUE_MAX bytes. Lookups, inserts and removes take
 * near-constant time however many entries the object holds (a million-entry
 * directory is the yardstick): entries are placed by a 64-bit hash of the name
 * into leaf blocks found through an extendible-hashing pointer table, leaves
 * split when full and the table doubles when needed.
 *
 * Iteration order is hash order. A cursor's position is a 64-bit cookie
 * built from the entry's hash and a collision differentiator, so a cookie
 * stays valid (neither skipping nor repeating surviving entries) while other
 * entries are added or removed: what NFS READDIR cookies need. Cookies 0 and 1,
 * 2 are never produced (0 means "start"; 1 and 2 are left for "." and "..").
 *
 * Changes are made under a DMU transaction (dmu_tx_t) and are visible to
 * readers at once. Every function is thread-safe; operations on one ZAP
 * object are serialised by a per-object lock (readers share it), operations
 * on different objects run in parallel.
 */
#ifndef CAIRN_ZAP_H
#define CAIRN_ZAP_H

#include <cairn/dmu.h>
#include <cairn/types.h>

#define ZAP_NAME_MAX 255
#define ZAP_VALUE_MAX 8192

/* Creates an empty ZAP as a new object of os (record size chosen by the ZAP). */
int zap_create(objset_t *os, uint64_t *obj, dmu_tx_t *tx);
/* The same under a given object number (dmu_object_claim: -EEXIST, -EBUSY). */
int zap_create_claim(objset_t *os, uint64_t obj, dmu_tx_t *tx);
/* Frees the object and everything in it. */
int zap_destroy(objset_t *os, uint64_t obj, dmu_tx_t *tx);

/* -EEXIST if present, -ENAMETOOLONG / -E2BIG for oversize name / value. */
int zap_add(objset_t *os, uint64_t obj, const char *name, const void *val, uint32_t len,
            dmu_tx_t *tx);
/* Adds or replaces. */
int zap_update(objset_t *os, uint64_t obj, const char *name, const void *val, uint32_t len,
               dmu_tx_t *tx);
/* -ENOENT if absent. Copies min(len, cap) bytes into val; the full length goes to *len. */
int zap_lookup(objset_t *os, uint64_t obj, const char *name, void *val, uint32_t cap,
               uint32_t *len);
int zap_remove(objset_t *os, uint64_t obj, const char *name, dmu_tx_t *tx); /* -ENOENT */
int zap_count(objset_t *os, uint64_t obj, uint64_t *count);

/* Convenience for the common 8-byte value. */
int zap_add_u64(objset_t *os, uint64_t obj, const char *name, uint64_t v, dmu_tx_t *tx);
int zap_update_u64(objset_t *os, uint64_t obj, const char *name, uint64_t v, dmu_tx_t *tx);
int zap_lookup_u64(objset_t *os, uint64_t obj, const char *name, uint64_t *v);

/* Iteration. An entry handed out by zap_cursor_next() carries the cookie of the
 * position after it; starting a cursor at that cookie resumes behind it. */
typedef struct zap_entry {
    char name[ZAP_NAME_MAX + 1];
    uint8_t value[ZAP_VALUE_MAX];
    uint32_t value_len;
    uint64_t next_cookie;
} zap_entry_t;

typedef struct zap_cursor {
    objset_t *os;
    uint64_t obj;
    uint64_t cookie;
} zap_cursor_t;

void zap_cursor_init(zap_cursor_t *zc, objset_t *os, uint64_t obj, uint64_t cookie);
/* 1 and *e filled, 0 at the end, or a negative errno. */
int zap_cursor_next(zap_cursor_t *zc, zap_entry_t *e);

/* ---- the ZAP layer's cache (additions by the zap layer) ----
 * Decoded headers, pointer tables and a bounded LRU of ZAP blocks are kept in
 * memory, write-through (see src/zap/zap_cache.c). */
void zap_cache_set_limit(uint64_t bytes);   /* bound on cached blocks; default 64 MiB */
typedef struct zap_cache_stats {
    uint64_t limit, bytes, blocks, hits, misses, evictions;
} zap_cache_stats_t;
void zap_cache_get_stats(zap_cache_stats_t *out);
/* Forgets everything cached for os. Call before the last dmu_objset_close() of
 * an objset, and after its contents were replaced underneath (rollback). */
void zap_objset_evict(objset_t *os);

/* What this thread's ZAP calls have cost so far, in blocks, so a test can show
 * that an operation costs the same in a ZAP of ten thousand or a million
 * entries (take the difference around the call). Thread-local: other threads'
 * ZAP work never counts. */
typedef struct zap_op_stats {
    uint64_t blocks;   /* ZAP blocks looked at, cached or not (leaves, header, new blocks) */
    uint64_t reads;    /* blocks read through the DMU (cache misses, pointer-table loads) */
    uint64_t writes;   /* blocks handed to the DMU to write (one block's ranges count once) */
} zap_op_stats_t;
void zap_thread_stats(zap_op_stats_t *out);

/* Test hook: 0 (default) uses the full 48-bit hash; 1..47 keeps only that many
 * leading hash bits, forcing collisions (the cd then tells entries apart).
 * Only for tests: ZAPs written under one setting must be read under it. */
void zap_test_set_hash_bits(unsigned bits);

#endif
