/*
 * Range tree: a set of disjoint half-open extents [start, end) of a uint64
 * address space (src/metaslab/range_tree.c).
 *
 * Adjacent extents are merged on insert and split on removal, so the tree
 * always holds the minimal set of extents that covers its space. Every
 * operation that finds or changes one extent is O(log n); walks are O(n).
 * The tree keeps two indexes over the same extents: by start (for neighbours,
 * containment and next-fit searches from a cursor) and by (size, start) (for
 * best-fit and for the largest extent), so an allocator stays fast on a
 * fragmented space with hundreds of thousands of extents.
 *
 * A range tree is not thread-safe: its owner locks around it.
 */
#ifndef CAIRN_RANGE_TREE_H
#define CAIRN_RANGE_TREE_H

#include <cairn/types.h>

typedef struct range_tree range_tree_t;

/* Called for each extent of a walk; return nonzero to stop the walk early
 * (the walk then returns that value). */
typedef int (*range_tree_walk_fn)(void *arg, uint64_t start, uint64_t size);

range_tree_t *range_tree_create(void);          /* empty; aborts on OOM */
void range_tree_destroy(range_tree_t *rt);      /* NULL is fine */

/* Adds [start, start + size). -EINVAL if size is 0 or the range wraps past
 * UINT64_MAX; -EEXIST if any part of it is already in the tree (nothing is
 * changed then). Merges with the extents it touches. */
int range_tree_add(range_tree_t *rt, uint64_t start, uint64_t size);
/* Removes [start, start + size), which must lie entirely inside the tree
 * (else -ENOENT and nothing changes; -EINVAL for size 0 or wrap). Splits the
 * extent that held it when the range is in its middle. */
int range_tree_remove(range_tree_t *rt, uint64_t start, uint64_t size);
/* Removes whatever part of [start, start + size) is in the tree (possibly
 * nothing); returns the number of bytes removed. */
uint64_t range_tree_clear(range_tree_t *rt, uint64_t start, uint64_t size);
/* Removes every extent, calling fn (if not NULL) for each in address order. */
void range_tree_vacate(range_tree_t *rt, range_tree_walk_fn fn, void *arg);

/* True if every byte of [start, start + size) is in the tree (size > 0). */
bool range_tree_contains(const range_tree_t *rt, uint64_t start, uint64_t size);
/* True if any byte of [start, start + size) is in the tree. */
bool range_tree_overlaps(const range_tree_t *rt, uint64_t start, uint64_t size);
/* Bytes of [start, start + size) that are in the tree. O(log n + extents hit). */
uint64_t range_tree_overlap_space(const range_tree_t *rt, uint64_t start, uint64_t size);

uint64_t range_tree_space(const range_tree_t *rt);  /* total bytes held */
uint64_t range_tree_count(const range_tree_t *rt);  /* number of extents */
bool range_tree_is_empty(const range_tree_t *rt);

/* Size of the largest extent (0 when empty), O(1); its start in *start when
 * start is not NULL (O(log n)). */
uint64_t range_tree_largest(const range_tree_t *rt, uint64_t *start);

/* Next fit: the lowest offset >= cursor, a multiple of align (a power of two,
 * 1 for none), such that [offset, offset + size) lies within one extent.
 * Returns false if there is none (it does not wrap around to 0). */
bool range_tree_find_first(const range_tree_t *rt, uint64_t cursor, uint64_t size,
                           uint64_t align, uint64_t *offset);
/* Best fit: the start (rounded up to align) of the smallest extent that can
 * hold size aligned bytes; ties go to the lowest address. False if none. */
bool range_tree_find_best(const range_tree_t *rt, uint64_t size, uint64_t align,
                          uint64_t *offset);

/* Calls fn for every extent in address order. Returns 0 or fn's stop value. */
int range_tree_walk(const range_tree_t *rt, range_tree_walk_fn fn, void *arg);
/* Calls fn for every piece of the tree inside [start, start + size), clipped
 * to that window, in address order. */
int range_tree_walk_range(const range_tree_t *rt, uint64_t start, uint64_t size,
                          range_tree_walk_fn fn, void *arg);
/* Calls fn for every gap of the tree inside [start, start + size) (the
 * complement of the tree within the window), in address order. */
int range_tree_walk_gaps(const range_tree_t *rt, uint64_t start, uint64_t size,
                         range_tree_walk_fn fn, void *arg);

/* Adds every extent of src to dst. -EEXIST if they overlap (dst is then left
 * with the extents added before the overlap was found). */
int range_tree_add_tree(range_tree_t *dst, const range_tree_t *src);
/* True if both trees hold exactly the same bytes. */
bool range_tree_equal(const range_tree_t *a, const range_tree_t *b);

/* Self-check of the internal invariants (ordering, AVL balance, augmented
 * maxima, both indexes holding the same extents, merged neighbours, totals):
 * 0 or -EUCLEAN. O(n); for tests and debugging. */
int range_tree_verify(const range_tree_t *rt);

#endif
