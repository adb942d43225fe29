/*
 * A process-wide pool of page-aligned data buffers in fixed size classes
 * (src/util/bufpool.c), behind the ARC's and the read path's cairn_rbuf_t.
 *
 * Why: the read path allocates a buffer per block (the stored copy the ARC
 * keeps, the decompressed copy, the buffer a read-ahead reads into) on many
 * threads. glibc gives each thread its own arena, and a buffer freed by one
 * (an export's purge, an eviction) is only reused by threads of that arena, so
 * the read-ahead threads filling the ARC after an import took fresh pages for
 * every block: ~100,000 minor faults and 40% of cairnd's CPU in the kernel
 * zeroing pages per GiB read cold (docs/benchmarks.md). Freed buffers kept
 * here, per size class, serve the next buffer of that class on any thread.
 *
 * Bounded: chunks handed out plus chunks kept never exceed the limit (the ARC
 * sets it to its target, arc_max or less, plus an eighth for lent and in-flight
 * buffers) plus the reserve (the DMU's budget for dirty records); a chunk freed beyond it gives its
 * memory back to the kernel (keeping its address for a later chunk of its class).
 * cairn_bufpool_trim() gives back every kept chunk (and the heap's free pages)
 * under memory pressure.
 *
 * Memory: one reserved address range advised for transparent huge pages
 * (malloc's when that is refused): on a guest with shadow paging, the kernel's
 * first touch of a 4 KiB user page (the socket sending a just-written record)
 * costs ~5 us, and a huge page pays it once per 2 MiB (docs/benchmarks.md).
 *
 * Classes: every multiple of 4 KiB up to 256 KiB (a 128 KiB block plus the
 * page of its header wastes nothing), then eight per doubling up to
 * CAIRN_BUFPOOL_MAX; smaller and larger requests go straight to malloc.
 * Under AddressSanitizer a kept chunk is poisoned (all but the word linking it
 * to the next, which LeakSanitizer must be able to follow), and a handed-out
 * chunk's bytes past the size asked for stay poisoned, so a use after free or
 * an overflow into the class's slack is still reported.
 */
#ifndef CAIRN_BUFPOOL_H
#define CAIRN_BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CAIRN_BUFPOOL_MIN (4u * 1024)
#define CAIRN_BUFPOOL_MAX (16u * 1024 * 1024)

/* size bytes aligned to CAIRN_IO_ALIGN (never NULL: aborts when memory is out). */
void *cairn_bufpool_alloc(size_t size);
/* Gives back p, allocated by cairn_bufpool_alloc(size) with this same size (or, for
 * a size below CAIRN_BUFPOOL_MIN, by malloc). NULL is ignored. */
void cairn_bufpool_free(void *p, size_t size);
/* The bytes a request of size really takes (its class), or size when not pooled. */
size_t cairn_bufpool_class_size(size_t size);
/* Bound on chunks handed out plus chunks kept; lowering it gives back kept chunks over it. */
void cairn_bufpool_set_limit(uint64_t bytes);
/* Room on top of the limit for buffers a writer holds while they are in flight
 * (the DMU's large dirty records, which the ARC adopts once written): without
 * it, with the ARC full, every buffer it evicts went back to malloc and the
 * next record took fresh pages. */
void cairn_bufpool_set_reserve(uint64_t bytes);
/* Gives back every kept chunk, and the heap's free memory to the kernel. */
void cairn_bufpool_trim(void);
/* Whether new chunks come from the range in huge pages (the default) or from
 * malloc; set before the first chunk (cairnd.conf buffer_huge_pages). A host
 * where huge pages cost more than they save (they did on an earlier machine:
 * docs/benchmarks.md) turns them off. */
void cairn_bufpool_set_huge_pages(bool on);

typedef struct cairn_bufpool_stats {
    uint64_t limit;
    uint64_t reserve;    /* room on top of the limit (cairn_bufpool_set_reserve) */
    uint64_t in_use;     /* bytes of pooled chunks handed out */
    uint64_t kept;       /* bytes of free chunks kept for reuse */
    uint64_t reused;     /* allocations served from a kept chunk */
    uint64_t fresh;      /* allocations that took new memory */
    uint64_t released;   /* frees given back to malloc (over the limit, or trimmed) */
} cairn_bufpool_stats_t;
void cairn_bufpool_get_stats(cairn_bufpool_stats_t *out);

#endif
