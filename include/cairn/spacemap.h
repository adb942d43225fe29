/*
 * Space map log records and their on-disk encoding (src/metaslab/spacemap.c;
 * the byte format is specified at the top of that file and in
 * docs/ondisk-format.md).
 *
 * The pool persists its allocated space as a log: in every txg it appends the
 * records of that txg's allocations and frees (one record per extent, all
 * top-level vdevs in one stream), and at import it replays the log, oldest
 * record first, into one metaslab allocator per top-level vdev. From time to
 * time it condenses: it writes a snapshot (every allocated extent as an ALLOC
 * record, then the frees still inside the defer window as FREE records with
 * their own txgs) and starts a new chain with it.
 *
 * This file only turns records into block-sized byte buffers and back; the
 * pool decides where the blocks go and how they are chained and checksummed.
 * A decoder never trusts its input: every malformed buffer is rejected with
 * -EINVAL, and no input can make it read outside the buffer.
 */
#ifndef CAIRN_SPACEMAP_H
#define CAIRN_SPACEMAP_H

#include <cairn/types.h>

typedef enum spacemap_rec_type {
    SPACEMAP_ALLOC = 1,
    SPACEMAP_FREE = 2,
} spacemap_rec_type_t;

typedef struct spacemap_record {
    uint64_t txg;       /* txg the allocation or free happened in; never 0 */
    uint64_t offset;    /* byte offset in the top-level vdev; multiple of 512 */
    uint64_t size;      /* bytes; multiple of 512, 1 .. SPACEMAP_MAX_EXTENT */
    uint32_t vdev;      /* top-level vdev id, < SPACEMAP_MAX_VDEVS */
    uint8_t type;       /* spacemap_rec_type_t */
} spacemap_record_t;

#define SPACEMAP_MAGIC 0x50414d5053524e43ULL   /* "CRNSPMAP" */
#define SPACEMAP_VERSION 1
#define SPACEMAP_HEADER_SIZE 32
#define SPACEMAP_ENTRY_SIZE 16
#define SPACEMAP_SECTOR_SHIFT 9
#define SPACEMAP_MAX_VDEVS (1U << 24)
#define SPACEMAP_MAX_EXTENT (1ULL << (36 + SPACEMAP_SECTOR_SHIFT))  /* 32 TiB */
/* Smallest buffer that can hold one record (header, txg entry, extent entry). */
#define SPACEMAP_MIN_BLOCK (SPACEMAP_HEADER_SIZE + 2 * SPACEMAP_ENTRY_SIZE)

/* Header flags. */
#define SPACEMAP_FLAG_SNAPSHOT 0x1u   /* block belongs to a condensed snapshot */

/* Checks a record's fields (type, txg, vdev, alignment, size, no wrap). */
bool spacemap_record_valid(const spacemap_record_t *rec);

/* ---- encoding ---- */

/* Fills one block-sized buffer. The header is written by finish. */
typedef struct spacemap_writer {
    uint8_t *buf;
    size_t len;
    uint64_t block_txg;     /* every record's txg must be <= block_txg */
    uint32_t flags;
    uint32_t nentries;      /* 16-byte entries written so far */
    uint64_t cur_txg;       /* txg of the last txg entry (0: none yet) */
} spacemap_writer_t;

/* buf must be at least SPACEMAP_MIN_BLOCK bytes (else -EINVAL). block_txg is
 * the txg the block is written in; flags are SPACEMAP_FLAG_*. */
int spacemap_writer_init(spacemap_writer_t *w, void *buf, size_t len, uint64_t block_txg,
                         uint32_t flags);
/* Appends one record: 0, -ENOSPC when it does not fit (the writer is left
 * unchanged; finish this block and start another), -EINVAL for a bad record or
 * one whose txg is above block_txg. */
int spacemap_writer_add(spacemap_writer_t *w, const spacemap_record_t *rec);
/* Writes the header and zeroes the unused tail. Returns the bytes used
 * (header + entries); the whole buffer is what goes to disk. */
size_t spacemap_writer_finish(spacemap_writer_t *w);
/* True if the writer holds no record yet. */
bool spacemap_writer_empty(const spacemap_writer_t *w);

/* One-shot form: encodes as many of recs[0..n) as fit into buf, finishing it.
 * Returns how many were consumed (>= 0) or -EINVAL (bad record or buffer).
 * Call again with the rest in a new buffer until all are consumed. */
long spacemap_encode(void *buf, size_t len, uint64_t block_txg, uint32_t flags,
                     const spacemap_record_t *recs, size_t n);
/* Entries available in a block of len bytes (each record takes one entry and
 * each change of txg one more). */
size_t spacemap_block_entries(size_t len);
/* Blocks of len bytes that spacemap_encode() fills for recs[0..n), in order. */
size_t spacemap_blocks_needed(size_t len, const spacemap_record_t *recs, size_t n);

/* ---- decoding ---- */

typedef struct spacemap_reader {
    const uint8_t *buf;
    uint32_t nentries;
    uint32_t next;
    uint64_t block_txg;
    uint32_t flags;
    uint64_t cur_txg;
} spacemap_reader_t;

/* Checks the header: -EINVAL if buf is not a valid space map block of len
 * bytes. Entries are checked one by one as they are read. */
int spacemap_reader_init(spacemap_reader_t *r, const void *buf, size_t len);
/* 1 and *rec filled; 0 at the end of the block; -EINVAL on a malformed entry
 * (the reader then stays failed). */
int spacemap_reader_next(spacemap_reader_t *r, spacemap_record_t *rec);

/* Decodes a whole block into a new array (caller free()s it; NULL when n is 0).
 * Nothing is returned unless the whole block is valid. Optional block_txg and
 * flags receive the header's fields. */
int spacemap_decode(const void *buf, size_t len, spacemap_record_t **recs, size_t *n,
                    uint64_t *block_txg, uint32_t *flags);

/* ---- replay into allocators ---- */

struct metaslab;

/* Validates the whole block, then applies its records in order to
 * ms[rec.vdev] with metaslab_replay_record() (see metaslab.h). -EINVAL when the
 * block is malformed, names a vdev >= nms (or a NULL slot), or a record
 * contradicts the allocator's state (the log is then corrupt). Blocks must be
 * replayed in the order they were written. */
int spacemap_replay(const void *buf, size_t len, struct metaslab *const *ms, size_t nms,
                    uint64_t last_synced_txg);
/* The same for already decoded records. */
int spacemap_replay_records(const spacemap_record_t *recs, size_t n, struct metaslab *const *ms,
                            size_t nms, uint64_t last_synced_txg);

#endif
