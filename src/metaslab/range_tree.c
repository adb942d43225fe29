/*
 * Range tree: a set of disjoint [start, end) extents.
 *
 * Design. Each extent is one node that lives in two AVL trees at once:
 *
 *   - by start: the address-ordered index. Neighbour lookups (for merging on
 *     add and locating the extent that holds a range on remove) are floor
 *     searches in it. Every node also carries the largest extent length in its
 *     subtree ("subtree_max"), which is what makes a next-fit search from a
 *     cursor O(log n): a subtree whose subtree_max is too small is skipped
 *     without being entered, so the search never walks a run of small
 *     fragments one by one. The root's subtree_max is the largest extent, so
 *     an allocator can refuse an impossible request in O(1).
 *
 *   - by (size, start): the size-ordered index, for best fit (the smallest
 *     extent that is big enough, lowest address among equals) and for finding
 *     where the largest extent is.
 *
 * AVL rather than a red-black tree or a B-tree: the recursive AVL insert and
 * delete rebalance on the way back up the search path, which is exactly where
 * the augmented subtree_max must be recomputed, so the augmentation costs no
 * extra pass. The height stays below 1.45 log2(n), i.e. under 45 levels for a
 * billion extents, so recursion depth is no concern.
 *
 * When an extent grows or shrinks in place (merge on add, trim on remove) its
 * start-order position never changes (the tree holds disjoint extents, so no
 * other extent can lie between the old and the new start), so the node stays
 * put in the start tree and only the subtree_max values on its search path are
 * refreshed; in the size tree it is removed and reinserted, as its key changed.
 *
 * Sizes are uint64 and an extent may not wrap past UINT64_MAX, so end never
 * overflows; every public entry point checks that first.
 */
#include <cairn/range_tree.h>
#include <cairn/util.h>

#include <stdlib.h>

typedef struct rt_link {
    struct rt_link *left, *right;
    int32_t height;
} rt_link_t;

typedef struct rt_seg {
    rt_link_t by_start;
    rt_link_t by_size;
    uint64_t start, end;
    uint64_t subtree_max;   /* largest end - start in this node's by_start subtree */
} rt_seg_t;

struct range_tree {
    rt_link_t *root_start;
    rt_link_t *root_size;
    uint64_t space;
    uint64_t count;
};

#define SEG_OF_START(l) ((rt_seg_t *)((char *)(l) - offsetof(rt_seg_t, by_start)))
#define SEG_OF_SIZE(l) ((rt_seg_t *)((char *)(l) - offsetof(rt_seg_t, by_size)))

static inline uint64_t seg_len(const rt_seg_t *s) { return s->end - s->start; }

/* ---- a generic recursive AVL over rt_link_t, parameterised by order and augmentation ---- */

typedef struct avl_ops {
    int (*cmp)(const rt_link_t *a, const rt_link_t *b);
    void (*augment)(rt_link_t *n);   /* may be NULL */
} avl_ops_t;

static inline int32_t avl_h(const rt_link_t *n) { return n ? n->height : 0; }

static inline void avl_update(const avl_ops_t *ops, rt_link_t *n)
{
    int32_t hl = avl_h(n->left), hr = avl_h(n->right);
    n->height = 1 + (hl > hr ? hl : hr);
    if (ops->augment)
        ops->augment(n);
}

static rt_link_t *avl_rotate_right(const avl_ops_t *ops, rt_link_t *n)
{
    rt_link_t *l = n->left;
    n->left = l->right;
    l->right = n;
    avl_update(ops, n);
    avl_update(ops, l);
    return l;
}

static rt_link_t *avl_rotate_left(const avl_ops_t *ops, rt_link_t *n)
{
    rt_link_t *r = n->right;
    n->right = r->left;
    r->left = n;
    avl_update(ops, n);
    avl_update(ops, r);
    return r;
}

static rt_link_t *avl_balance(const avl_ops_t *ops, rt_link_t *n)
{
    avl_update(ops, n);
    int32_t bf = avl_h(n->left) - avl_h(n->right);
    if (bf > 1) {
        if (avl_h(n->left->left) < avl_h(n->left->right))
            n->left = avl_rotate_left(ops, n->left);
        return avl_rotate_right(ops, n);
    }
    if (bf < -1) {
        if (avl_h(n->right->right) < avl_h(n->right->left))
            n->right = avl_rotate_right(ops, n->right);
        return avl_rotate_left(ops, n);
    }
    return n;
}

/* After a child subtree was modified: when the child is the same node with
 * the same height, this node's balance and height are unchanged, so only its
 * augmentation needs refreshing and no rotation can be needed. Checking this
 * stops a modification from touching the siblings all the way up the path. */
static inline bool avl_settled(const avl_ops_t *ops, rt_link_t *root, const rt_link_t *old,
                               const rt_link_t *now, int32_t old_h)
{
    if (now != old || avl_h(now) != old_h)
        return false;
    if (ops->augment)
        ops->augment(root);
    return true;
}

static rt_link_t *avl_insert(const avl_ops_t *ops, rt_link_t *root, rt_link_t *n)
{
    if (!root) {
        n->left = n->right = NULL;
        avl_update(ops, n);
        return n;
    }
    if (ops->cmp(n, root) < 0) {
        rt_link_t *c = root->left;
        int32_t h = avl_h(c);
        root->left = avl_insert(ops, c, n);
        if (avl_settled(ops, root, c, root->left, h))
            return root;
    } else {
        rt_link_t *c = root->right;
        int32_t h = avl_h(c);
        root->right = avl_insert(ops, c, n);
        if (avl_settled(ops, root, c, root->right, h))
            return root;
    }
    return avl_balance(ops, root);
}

static rt_link_t *avl_remove_min(const avl_ops_t *ops, rt_link_t *root, rt_link_t **min)
{
    if (!root->left) {
        *min = root;
        return root->right;
    }
    rt_link_t *c = root->left;
    int32_t h = avl_h(c);
    root->left = avl_remove_min(ops, c, min);
    if (avl_settled(ops, root, c, root->left, h))
        return root;
    return avl_balance(ops, root);
}

/* n must be in the tree: keys are unique, so the search lands on n itself. */
static rt_link_t *avl_remove(const avl_ops_t *ops, rt_link_t *root, rt_link_t *n)
{
    int c = ops->cmp(n, root);
    if (c < 0) {
        rt_link_t *ch = root->left;
        int32_t h = avl_h(ch);
        root->left = avl_remove(ops, ch, n);
        if (avl_settled(ops, root, ch, root->left, h))
            return root;
    } else if (c > 0) {
        rt_link_t *ch = root->right;
        int32_t h = avl_h(ch);
        root->right = avl_remove(ops, ch, n);
        if (avl_settled(ops, root, ch, root->right, h))
            return root;
    } else {
        if (!root->left)
            return root->right;
        if (!root->right)
            return root->left;
        rt_link_t *m;
        rt_link_t *right = avl_remove_min(ops, root->right, &m);
        m->left = root->left;
        m->right = right;
        root = m;
    }
    return avl_balance(ops, root);
}

/* n's key changed without changing its order: refresh augmentation on its path. */
static void avl_refresh_path(const avl_ops_t *ops, rt_link_t *root, rt_link_t *n)
{
    if (root != n) {
        if (ops->cmp(n, root) < 0)
            avl_refresh_path(ops, root->left, n);
        else
            avl_refresh_path(ops, root->right, n);
    }
    avl_update(ops, root);
}

/* ---- the two orders ---- */

static int cmp_start(const rt_link_t *a, const rt_link_t *b)
{
    uint64_t x = SEG_OF_START(a)->start, y = SEG_OF_START(b)->start;
    return x < y ? -1 : x > y;
}

static void augment_start(rt_link_t *n)
{
    rt_seg_t *s = SEG_OF_START(n);
    uint64_t m = seg_len(s);
    if (n->left && SEG_OF_START(n->left)->subtree_max > m)
        m = SEG_OF_START(n->left)->subtree_max;
    if (n->right && SEG_OF_START(n->right)->subtree_max > m)
        m = SEG_OF_START(n->right)->subtree_max;
    s->subtree_max = m;
}

static int cmp_size(const rt_link_t *a, const rt_link_t *b)
{
    const rt_seg_t *x = SEG_OF_SIZE(a), *y = SEG_OF_SIZE(b);
    uint64_t lx = seg_len(x), ly = seg_len(y);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static const avl_ops_t start_ops = {cmp_start, augment_start};
static const avl_ops_t size_ops = {cmp_size, NULL};

/* ---- node-level helpers ---- */

static void seg_insert(range_tree_t *rt, rt_seg_t *s)
{
    rt->root_start = avl_insert(&start_ops, rt->root_start, &s->by_start);
    rt->root_size = avl_insert(&size_ops, rt->root_size, &s->by_size);
    rt->count++;
}

static void seg_delete(range_tree_t *rt, rt_seg_t *s)
{
    rt->root_start = avl_remove(&start_ops, rt->root_start, &s->by_start);
    rt->root_size = avl_remove(&size_ops, rt->root_size, &s->by_size);
    rt->count--;
    free(s);
}

/* Changes s's bounds in place; the new bounds must keep its start order. */
static void seg_resize(range_tree_t *rt, rt_seg_t *s, uint64_t start, uint64_t end)
{
    rt->root_size = avl_remove(&size_ops, rt->root_size, &s->by_size);
    s->start = start;
    s->end = end;
    avl_refresh_path(&start_ops, rt->root_start, &s->by_start);
    rt->root_size = avl_insert(&size_ops, rt->root_size, &s->by_size);
}

static rt_seg_t *seg_new(uint64_t start, uint64_t end)
{
    rt_seg_t *s = cairn_zalloc(sizeof(*s));
    s->start = start;
    s->end = end;
    return s;
}

/* Last extent with start <= x. */
static rt_seg_t *seg_floor(const range_tree_t *rt, uint64_t x)
{
    rt_seg_t *best = NULL;
    for (rt_link_t *n = rt->root_start; n;) {
        rt_seg_t *s = SEG_OF_START(n);
        if (s->start <= x) {
            best = s;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best;
}

/* First extent with start >= x. */
static rt_seg_t *seg_ceil(const range_tree_t *rt, uint64_t x)
{
    rt_seg_t *best = NULL;
    for (rt_link_t *n = rt->root_start; n;) {
        rt_seg_t *s = SEG_OF_START(n);
        if (s->start >= x) {
            best = s;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

/* First extent in (size, start) order at or after (len, start). */
static rt_seg_t *seg_size_ceil(const range_tree_t *rt, uint64_t len, uint64_t start)
{
    rt_seg_t *best = NULL;
    for (rt_link_t *n = rt->root_size; n;) {
        rt_seg_t *s = SEG_OF_SIZE(n);
        uint64_t l = seg_len(s);
        if (l > len || (l == len && s->start >= start)) {
            best = s;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    return best;
}

static inline bool range_ok(uint64_t start, uint64_t size)
{
    return size != 0 && size <= UINT64_MAX - start;
}

/* Aligned placement of size bytes inside s, if it fits. */
static inline bool seg_fit(const rt_seg_t *s, uint64_t lo, uint64_t size, uint64_t align,
                           uint64_t *off)
{
    uint64_t from = s->start > lo ? s->start : lo;
    uint64_t o = CAIRN_P2ROUNDUP(from, align);
    if (o < from || o > s->end || s->end - o < size)
        return false;
    *off = o;
    return true;
}

/* ---- public API ---- */

range_tree_t *range_tree_create(void)
{
    return cairn_zalloc(sizeof(range_tree_t));
}

void range_tree_destroy(range_tree_t *rt)
{
    if (!rt)
        return;
    range_tree_vacate(rt, NULL, NULL);
    free(rt);
}

int range_tree_add(range_tree_t *rt, uint64_t start, uint64_t size)
{
    if (!range_ok(start, size))
        return -EINVAL;
    uint64_t end = start + size;
    rt_seg_t *f = seg_floor(rt, end - 1);
    if (f && f->end > start)
        return -EEXIST;

    /* f, if any, ends at or before start: it is the left neighbour. */
    rt_seg_t *prev = (f && f->end == start) ? f : NULL;
    rt_seg_t *next = seg_ceil(rt, end);
    if (next && next->start != end)
        next = NULL;

    if (prev && next) {
        uint64_t new_end = next->end;
        seg_delete(rt, next);
        seg_resize(rt, prev, prev->start, new_end);
    } else if (prev) {
        seg_resize(rt, prev, prev->start, end);
    } else if (next) {
        seg_resize(rt, next, start, next->end);
    } else {
        seg_insert(rt, seg_new(start, end));
    }
    rt->space += size;
    return 0;
}

int range_tree_remove(range_tree_t *rt, uint64_t start, uint64_t size)
{
    if (!range_ok(start, size))
        return -EINVAL;
    uint64_t end = start + size;
    rt_seg_t *f = seg_floor(rt, start);
    if (!f || f->end < end)
        return -ENOENT;

    if (f->start == start && f->end == end) {
        seg_delete(rt, f);
    } else if (f->start == start) {
        seg_resize(rt, f, end, f->end);
    } else if (f->end == end) {
        seg_resize(rt, f, f->start, start);
    } else {
        uint64_t old_end = f->end;
        seg_resize(rt, f, f->start, start);
        seg_insert(rt, seg_new(end, old_end));
    }
    rt->space -= size;
    return 0;
}

uint64_t range_tree_clear(range_tree_t *rt, uint64_t start, uint64_t size)
{
    if (size == 0)
        return 0;
    uint64_t end = size > UINT64_MAX - start ? UINT64_MAX : start + size;
    uint64_t removed = 0, hi = end;
    while (hi > start) {
        rt_seg_t *f = seg_floor(rt, hi - 1);
        if (!f || f->end <= start)
            break;
        uint64_t lo = f->start > start ? f->start : start;
        uint64_t top = f->end < hi ? f->end : hi;
        int rc = range_tree_remove(rt, lo, top - lo);
        (void)rc;   /* cannot fail: [lo, top) lies inside f */
        removed += top - lo;
        hi = lo;
    }
    return removed;
}

static void vacate_node(rt_link_t *n, range_tree_walk_fn fn, void *arg)
{
    if (!n)
        return;
    vacate_node(n->left, fn, arg);
    rt_seg_t *s = SEG_OF_START(n);
    if (fn)
        fn(arg, s->start, seg_len(s));
    vacate_node(n->right, fn, arg);
    free(s);
}

void range_tree_vacate(range_tree_t *rt, range_tree_walk_fn fn, void *arg)
{
    rt_link_t *root = rt->root_start;
    rt->root_start = rt->root_size = NULL;
    rt->space = rt->count = 0;
    vacate_node(root, fn, arg);
}

bool range_tree_contains(const range_tree_t *rt, uint64_t start, uint64_t size)
{
    if (!range_ok(start, size))
        return false;
    const rt_seg_t *f = seg_floor(rt, start);
    return f && f->end >= start + size;
}

bool range_tree_overlaps(const range_tree_t *rt, uint64_t start, uint64_t size)
{
    if (size == 0)
        return false;
    uint64_t last = size - 1 > UINT64_MAX - start ? UINT64_MAX : start + size - 1;
    const rt_seg_t *f = seg_floor(rt, last);
    return f && f->end > start;
}

uint64_t range_tree_space(const range_tree_t *rt) { return rt->space; }
uint64_t range_tree_count(const range_tree_t *rt) { return rt->count; }
bool range_tree_is_empty(const range_tree_t *rt) { return rt->count == 0; }

uint64_t range_tree_largest(const range_tree_t *rt, uint64_t *start)
{
    if (!rt->root_start)
        return 0;
    if (start) {
        rt_link_t *n = rt->root_size;
        while (n->right)
            n = n->right;
        *start = SEG_OF_SIZE(n)->start;
    }
    return SEG_OF_START(rt->root_start)->subtree_max;
}

/* Leftmost extent with start > cursor that fits, skipping subtrees too small. */
static const rt_seg_t *find_first_after(const rt_link_t *n, uint64_t cursor, uint64_t size,
                                        uint64_t align, uint64_t *off)
{
    if (!n || SEG_OF_START(n)->subtree_max < size)
        return NULL;
    const rt_seg_t *s = SEG_OF_START(n);
    if (s->start > cursor) {
        const rt_seg_t *r = find_first_after(n->left, cursor, size, align, off);
        if (r)
            return r;
        if (seg_fit(s, s->start, size, align, off))
            return s;
    }
    return find_first_after(n->right, cursor, size, align, off);
}

bool range_tree_find_first(const range_tree_t *rt, uint64_t cursor, uint64_t size,
                           uint64_t align, uint64_t *offset)
{
    if (size == 0 || align == 0 || (align & (align - 1)))
        return false;
    if (!rt->root_start || SEG_OF_START(rt->root_start)->subtree_max < size)
        return false;
    /* The extent holding the cursor can serve from the cursor on... */
    const rt_seg_t *f = seg_floor(rt, cursor);
    if (f && f->end > cursor && seg_fit(f, cursor, size, align, offset))
        return true;
    /* ...otherwise the first later extent big enough. */
    return find_first_after(rt->root_start, cursor, size, align, offset) != NULL;
}

/* The extent after s in (size, start) order. */
static const rt_seg_t *seg_start_next_in_size(const range_tree_t *rt, const rt_seg_t *s)
{
    return seg_size_ceil(rt, seg_len(s), s->start + 1);
}

/* Past this many too-small-once-aligned candidates, best fit jumps to extents
 * that fit whatever their alignment, keeping the search O(log n). */
#define RT_BEST_FIT_PROBES 32

bool range_tree_find_best(const range_tree_t *rt, uint64_t size, uint64_t align,
                          uint64_t *offset)
{
    if (size == 0 || align == 0 || (align & (align - 1)))
        return false;
    if (!rt->root_start || SEG_OF_START(rt->root_start)->subtree_max < size)
        return false;
    const rt_seg_t *s = seg_size_ceil(rt, size, 0);
    for (int probes = 0; s && probes < RT_BEST_FIT_PROBES; probes++) {
        if (seg_fit(s, s->start, size, align, offset))
            return true;
        s = seg_start_next_in_size(rt, s);
    }
    if (align - 1 > UINT64_MAX - size)
        return false;
    for (s = seg_size_ceil(rt, size + align - 1, 0); s; s = seg_start_next_in_size(rt, s))
        if (seg_fit(s, s->start, size, align, offset))
            return true;
    return false;
}

static int walk_node(const rt_link_t *n, range_tree_walk_fn fn, void *arg)
{
    if (!n)
        return 0;
    int rc = walk_node(n->left, fn, arg);
    if (rc)
        return rc;
    const rt_seg_t *s = SEG_OF_START(n);
    rc = fn(arg, s->start, seg_len(s));
    if (rc)
        return rc;
    return walk_node(n->right, fn, arg);
}

int range_tree_walk(const range_tree_t *rt, range_tree_walk_fn fn, void *arg)
{
    return walk_node(rt->root_start, fn, arg);
}

/* Visits the pieces of the tree inside [start, end) and, when gaps is set, the
 * holes between them instead. */
static int walk_window(const range_tree_t *rt, uint64_t start, uint64_t end, bool gaps,
                       range_tree_walk_fn fn, void *arg)
{
    uint64_t pos = start;
    const rt_seg_t *s = seg_floor(rt, start);
    if (!s || s->end <= start)
        s = seg_ceil(rt, start);
    while (s && s->start < end) {
        uint64_t lo = s->start > start ? s->start : start;
        uint64_t hi = s->end < end ? s->end : end;
        int rc = 0;
        if (gaps) {
            if (lo > pos)
                rc = fn(arg, pos, lo - pos);
        } else {
            rc = fn(arg, lo, hi - lo);
        }
        if (rc)
            return rc;
        pos = hi;
        s = seg_ceil(rt, s->start + 1);
    }
    if (gaps && pos < end)
        return fn(arg, pos, end - pos);
    return 0;
}

int range_tree_walk_range(const range_tree_t *rt, uint64_t start, uint64_t size,
                          range_tree_walk_fn fn, void *arg)
{
    if (size == 0)
        return 0;
    uint64_t end = size > UINT64_MAX - start ? UINT64_MAX : start + size;
    return walk_window(rt, start, end, false, fn, arg);
}

int range_tree_walk_gaps(const range_tree_t *rt, uint64_t start, uint64_t size,
                         range_tree_walk_fn fn, void *arg)
{
    if (size == 0)
        return 0;
    uint64_t end = size > UINT64_MAX - start ? UINT64_MAX : start + size;
    return walk_window(rt, start, end, true, fn, arg);
}

static int sum_cb(void *arg, uint64_t start, uint64_t size)
{
    (void)start;
    *(uint64_t *)arg += size;
    return 0;
}

uint64_t range_tree_overlap_space(const range_tree_t *rt, uint64_t start, uint64_t size)
{
    uint64_t total = 0;
    range_tree_walk_range(rt, start, size, sum_cb, &total);
    return total;
}

static int add_cb(void *arg, uint64_t start, uint64_t size)
{
    return range_tree_add(arg, start, size);
}

int range_tree_add_tree(range_tree_t *dst, const range_tree_t *src)
{
    return range_tree_walk(src, add_cb, dst);
}

static int same_cb(void *arg, uint64_t start, uint64_t size)
{
    const rt_seg_t *f = seg_floor(arg, start);
    return !(f && f->start == start && f->end == start + size);
}

bool range_tree_equal(const range_tree_t *a, const range_tree_t *b)
{
    /* Both trees keep extents merged, so equal sets have identical extent lists. */
    if (a->space != b->space || a->count != b->count)
        return false;
    return range_tree_walk(a, same_cb, (void *)b) == 0;
}

/* ---- self-check ---- */

typedef struct rt_verify {
    const avl_ops_t *ops;
    uint64_t nodes, space;
    bool ok;
} rt_verify_t;

/* Checks order, heights, balance and (start tree) subtree maxima; returns height. */
static int32_t verify_node(rt_verify_t *v, const rt_link_t *n, const rt_link_t *lo,
                           const rt_link_t *hi)
{
    if (!n)
        return 0;
    if ((lo && v->ops->cmp(lo, n) >= 0) || (hi && v->ops->cmp(n, hi) >= 0))
        v->ok = false;
    int32_t hl = verify_node(v, n->left, lo, n);
    int32_t hr = verify_node(v, n->right, n, hi);
    int32_t h = 1 + (hl > hr ? hl : hr);
    if (n->height != h || hl - hr > 1 || hr - hl > 1)
        v->ok = false;
    v->nodes++;
    if (v->ops == &start_ops) {
        const rt_seg_t *s = SEG_OF_START(n);
        uint64_t m = seg_len(s);
        if (n->left && SEG_OF_START(n->left)->subtree_max > m)
            m = SEG_OF_START(n->left)->subtree_max;
        if (n->right && SEG_OF_START(n->right)->subtree_max > m)
            m = SEG_OF_START(n->right)->subtree_max;
        if (s->end <= s->start || s->subtree_max != m)
            v->ok = false;
        v->space += seg_len(s);
    }
    return h;
}

static int verify_disjoint_cb(void *arg, uint64_t start, uint64_t size)
{
    uint64_t *prev_end = arg;
    /* Extents must be apart: touching ones should have been merged. */
    if (*prev_end != UINT64_MAX && start <= *prev_end)
        return 1;
    *prev_end = start + size;
    return 0;
}

int range_tree_verify(const range_tree_t *rt)
{
    rt_verify_t vs = {.ops = &start_ops, .ok = true};
    verify_node(&vs, rt->root_start, NULL, NULL);
    rt_verify_t vz = {.ops = &size_ops, .ok = true};
    verify_node(&vz, rt->root_size, NULL, NULL);
    uint64_t prev_end = UINT64_MAX;
    bool disjoint = range_tree_walk(rt, verify_disjoint_cb, &prev_end) == 0;
    if (!vs.ok || !vz.ok || !disjoint || vs.nodes != rt->count || vz.nodes != rt->count ||
        vs.space != rt->space)
        return -EUCLEAN;
    return 0;
}
