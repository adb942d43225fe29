/*
 * The analytics history (include/cairn/analytics.h): three rings of samples,
 * seconds (an hour), minutes (a day) and hours (the retention), each sample a
 * sorted array of entries cut to the top AN_TOPN keys per dimension plus
 * "other" (histograms, latency and size, are kept whole: a heat map needs every
 * bucket). A minute is rolled up from its seconds when the first second of a
 * later minute arrives, and an hour from its minutes likewise, so a rollup
 * sees every sample it covers (after a restart too: the rings are saved and
 * loaded whole, and the first sample after the gap rolls up what came before).
 * The sum of a rollup's entries is exact for totals; per key it is exact for
 * keys that stayed in the top N of every sample and "other" takes the rest.
 *
 * Names are interned once (a sample's entry is 16 bytes, whatever the path
 * it names) and kept for the history's life: only names that reached a top N
 * get here, a few per second at most.
 */
#include <cairn/analytics.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct an_ring {
    an_sample_t *s;
    size_t cap, head, count; /* head: the oldest */
} an_ring_t;

struct an_history {
    an_ring_t ring[AN_NRES];
    char **names;
    size_t nnames, names_cap;
    uint32_t *index; /* open addressing: name id + 1; 0 free */
    size_t index_cap;
    int64_t last_t;  /* the newest second added; 0: none */
};

static const int64_t g_res_seconds[AN_NRES] = {1, 60, 3600};
static const size_t g_res_keep[AN_NRES] = {3600, 1440, 0};

int64_t an_res_seconds(int res) { return g_res_seconds[res]; }

size_t an_history_capacity(const an_history_t *h, int res) { return h->ring[res].cap; }

an_history_t *an_history_create(uint32_t hours)
{
    an_history_t *h = cairn_zalloc(sizeof *h);
    for (int r = 0; r < AN_NRES; r++) {
        h->ring[r].cap = r == AN_RES_HOUR ? (hours ? hours : 1) : g_res_keep[r];
        h->ring[r].s = cairn_zalloc(h->ring[r].cap * sizeof(an_sample_t));
    }
    an_history_intern(h, AN_OTHER); /* id 0: AN_NAME_OTHER */
    return h;
}

void an_history_free(an_history_t *h)
{
    if (!h) return;
    for (int r = 0; r < AN_NRES; r++) {
        for (size_t i = 0; i < h->ring[r].cap; i++) free(h->ring[r].s[i].e);
        free(h->ring[r].s);
    }
    for (size_t i = 0; i < h->nnames; i++) free(h->names[i]);
    free(h->names);
    free(h->index);
    free(h);
}

/* ---------------------------------------------------------------- names */

static void index_put(an_history_t *h, uint32_t id)
{
    size_t mask = h->index_cap - 1;
    size_t i = an_hash(h->names[id], strlen(h->names[id])) & mask;
    while (h->index[i]) i = (i + 1) & mask;
    h->index[i] = id + 1;
}

static void index_grow(an_history_t *h)
{
    free(h->index);
    h->index_cap = h->index_cap ? h->index_cap * 2 : 1024;
    h->index = cairn_zalloc(h->index_cap * sizeof *h->index);
    for (uint32_t id = 0; id < h->nnames; id++) index_put(h, id);
}

uint32_t an_history_intern(an_history_t *h, const char *name)
{
    if (h->index_cap) {
        size_t mask = h->index_cap - 1;
        for (size_t i = an_hash(name, strlen(name)) & mask; h->index[i]; i = (i + 1) & mask)
            if (!strcmp(h->names[h->index[i] - 1], name)) return h->index[i] - 1;
    }
    if (h->nnames == h->names_cap) {
        h->names_cap = h->names_cap ? h->names_cap * 2 : 256;
        h->names = cairn_realloc(h->names, h->names_cap * sizeof *h->names);
    }
    uint32_t id = (uint32_t)h->nnames++;
    h->names[id] = cairn_strdup(name);
    if (h->nnames * 2 > h->index_cap) index_grow(h);
    else index_put(h, id);
    return id;
}

const char *an_history_name(const an_history_t *h, uint32_t id)
{
    return id < h->nnames ? h->names[id] : "?";
}

size_t an_history_nnames(const an_history_t *h) { return h->nnames; }
int64_t an_history_last(const an_history_t *h) { return h->last_t; }

/* ---------------------------------------------------------------- merge */

static int by_key(const void *a, const void *b)
{
    const an_entry_t *x = a, *y = b;
    if (x->stat != y->stat) return x->stat < y->stat ? -1 : 1;
    if (x->dim != y->dim) return x->dim < y->dim ? -1 : 1;
    if (x->name != y->name) return x->name < y->name ? -1 : 1;
    return 0;
}

/* Within a (stat, dim): "other" last, the rest by value descending, then name. */
static int by_rank(const void *a, const void *b)
{
    const an_entry_t *x = a, *y = b;
    if ((x->name == AN_NAME_OTHER) != (y->name == AN_NAME_OTHER))
        return x->name == AN_NAME_OTHER ? 1 : -1;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

size_t an_merge_topn(const an_entry_t *in, size_t n, size_t topn, an_entry_t *out)
{
    an_entry_t *tmp = cairn_zalloc((n ? n : 1) * sizeof *tmp);
    if (n) memcpy(tmp, in, n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, by_key);
    size_t m = 0; /* same (stat, dim, name) summed */
    for (size_t i = 0; i < n; i++) {
        if (m && !by_key(&tmp[m - 1], &tmp[i])) tmp[m - 1].value += tmp[i].value;
        else tmp[m++] = tmp[i];
    }
    size_t w = 0;
    for (size_t g = 0; g < m;) {
        size_t end = g;
        while (end < m && tmp[end].stat == tmp[g].stat && tmp[end].dim == tmp[g].dim) end++;
        qsort(tmp + g, end - g, sizeof *tmp, by_rank);
        uint64_t other = 0;
        bool has_other = false;
        for (size_t i = g; i < end; i++) {
            bool keep = tmp[i].dim == AN_DIM_TOTAL || an_dim_is_histogram(tmp[i].dim) ||
                        (tmp[i].name != AN_NAME_OTHER && i - g < topn);
            if (keep) out[w++] = tmp[i];
            else {
                other += tmp[i].value;
                has_other = true;
            }
        }
        if (has_other) out[w++] = (an_entry_t){tmp[g].stat, tmp[g].dim, AN_NAME_OTHER, other};
        g = end;
    }
    free(tmp);
    return w;
}

/* ---------------------------------------------------------------- rings */

static an_sample_t *ring_at(const an_ring_t *r, size_t i) /* 0: the oldest */
{
    return &r->s[(r->head + i) % r->cap];
}

/* Takes e (malloc'd, or NULL when n is 0). */
static void ring_push(an_ring_t *r, int64_t t, an_entry_t *e, size_t n)
{
    an_sample_t *slot;
    if (r->count == r->cap) {
        slot = ring_at(r, 0);
        r->head = (r->head + 1) % r->cap;
    } else {
        slot = ring_at(r, r->count++);
    }
    free(slot->e);
    *slot = (an_sample_t){t, (uint32_t)n, e};
}

/* Merged top-N copy of entries (malloc'd; NULL when there are none). */
static an_entry_t *merged(const an_entry_t *e, size_t n, size_t *out_n)
{
    *out_n = 0;
    if (!n) return NULL;
    an_entry_t *out = cairn_zalloc(n * sizeof *out);
    *out_n = an_merge_topn(e, n, AN_TOPN, out);
    return out;
}

/* Rolls the samples of src in [start, start + span) into one sample of dst. */
static void roll_up(an_ring_t *src, an_ring_t *dst, int64_t start, int64_t span)
{
    size_t n = 0, cap = 0;
    an_entry_t *all = NULL;
    for (size_t i = 0; i < src->count; i++) {
        const an_sample_t *s = ring_at(src, i);
        if (s->t < start || s->t >= start + span) continue;
        if (n + s->n > cap) {
            cap = (n + s->n) * 2;
            all = cairn_realloc(all, cap * sizeof *all);
        }
        if (s->n) memcpy(all + n, s->e, s->n * sizeof *all);
        n += s->n;
    }
    size_t m;
    an_entry_t *e = merged(all, n, &m);
    free(all);
    ring_push(dst, start, e, m);
}

static int64_t floor_to(int64_t t, int64_t span) { return t - ((t % span) + span) % span; }

int an_history_add(an_history_t *h, int64_t t, const an_entry_t *e, size_t n)
{
    if (h->last_t && t <= h->last_t) return -EINVAL;
    if (h->last_t) {
        for (int r = AN_RES_MINUTE; r < AN_NRES; r++) {
            int64_t span = g_res_seconds[r];
            int64_t prev = floor_to(h->last_t, span);
            if (floor_to(t, span) == prev) break; /* and so is the coarser one */
            roll_up(&h->ring[r - 1], &h->ring[r], prev, span);
        }
    }
    size_t m;
    an_entry_t *copy = merged(e, n, &m);
    ring_push(&h->ring[AN_RES_SECOND], t, copy, m);
    h->last_t = t;
    return 0;
}

size_t an_history_walk(const an_history_t *h, int res, int64_t from, int64_t to,
                       void (*fn)(const an_sample_t *s, void *arg), void *arg)
{
    const an_ring_t *r = &h->ring[res];
    size_t k = 0;
    for (size_t i = 0; i < r->count; i++) {
        const an_sample_t *s = ring_at(r, i);
        if (s->t < from || s->t >= to) continue;
        if (fn) fn(s, arg);
        k++;
    }
    return k;
}

/* ---------------------------------------------------------- save & load */

#define AN_MAGIC "CAIRNAN1"
#define AN_FORMAT 1

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
} wbuf_t;

static void put(wbuf_t *b, const void *v, size_t n)
{
    if (!n) return; /* an empty sample's entries may be NULL: memcpy must not see it */
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = cairn_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

#define PUT(b, v) put((b), &(v), sizeof(v))

int an_history_save(const an_history_t *h, uint8_t **buf, size_t *len)
{
    wbuf_t b = {0};
    uint32_t u = AN_FORMAT, ns = AN_NSTATS, nn = (uint32_t)h->nnames;
    put(&b, AN_MAGIC, 8);
    PUT(&b, u);
    PUT(&b, ns);
    for (int s = 0; s < AN_NSTATS; s++) {
        uint8_t on = an_stat_enabled((an_stat_t)s);
        uint32_t mask = an_dims_mask((an_stat_t)s);
        PUT(&b, on);
        PUT(&b, mask);
    }
    PUT(&b, h->last_t);
    PUT(&b, nn);
    for (size_t i = 0; i < h->nnames; i++) {
        uint16_t l = (uint16_t)strlen(h->names[i]);
        PUT(&b, l);
        put(&b, h->names[i], l);
    }
    for (int r = 0; r < AN_NRES; r++) {
        uint32_t count = (uint32_t)h->ring[r].count;
        PUT(&b, count);
        for (size_t i = 0; i < count; i++) {
            const an_sample_t *s = ring_at(&h->ring[r], i);
            PUT(&b, s->t);
            PUT(&b, s->n);
            put(&b, s->e, s->n * sizeof *s->e);
        }
    }
    *buf = b.p;
    *len = b.len;
    return 0;
}

typedef struct rbuf {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} rcur_t;

static void get(rcur_t *c, void *v, size_t n)
{
    if (c->bad || c->len - c->pos < n) {
        c->bad = true;
        memset(v, 0, n);
        return;
    }
    memcpy(v, c->p + c->pos, n);
    c->pos += n;
}

#define GET(c, v) get((c), &(v), sizeof(v))

/* Reads one ring's samples into a fresh ring of cap (the newest that fit). */
static void load_ring(rcur_t *c, an_ring_t *r, uint32_t nnames)
{
    uint32_t count = 0;
    GET(c, count);
    for (uint32_t i = 0; i < count && !c->bad; i++) {
        int64_t t = 0;
        uint32_t n = 0;
        GET(c, t);
        GET(c, n);
        if (c->bad || n > (c->len - c->pos) / sizeof(an_entry_t)) {
            c->bad = true;
            return;
        }
        an_entry_t *e = n ? cairn_zalloc(n * sizeof *e) : NULL;
        get(c, e, n * sizeof *e);
        for (uint32_t k = 0; k < n; k++)
            if (e[k].stat >= AN_NSTATS || e[k].name >= nnames ||
                (e[k].dim >= AN_NDIMS && e[k].dim != AN_DIM_TOTAL))
                c->bad = true;
        ring_push(r, t, e, n);
    }
}

static void ring_clear(an_ring_t *r)
{
    for (size_t i = 0; i < r->cap; i++) {
        free(r->s[i].e);
        r->s[i] = (an_sample_t){0};
    }
    r->head = r->count = 0;
}

int an_history_load(an_history_t *h, const uint8_t *buf, size_t len, bool restore_switches)
{
    rcur_t c = {buf, len, 0, false};
    char magic[8];
    uint32_t format = 0, ns = 0, nn = 0;
    get(&c, magic, 8);
    GET(&c, format);
    GET(&c, ns);
    if (c.bad || memcmp(magic, AN_MAGIC, 8) || format != AN_FORMAT || ns != AN_NSTATS)
        return -EINVAL;
    uint8_t on[AN_NSTATS];
    uint32_t mask[AN_NSTATS];
    for (int s = 0; s < AN_NSTATS; s++) {
        GET(&c, on[s]);
        GET(&c, mask[s]);
    }
    int64_t last_t = 0;
    GET(&c, last_t);
    GET(&c, nn);
    /* Into a scratch history first: bad bytes change nothing. */
    an_history_t *tmp = an_history_create((uint32_t)h->ring[AN_RES_HOUR].cap);
    for (uint32_t i = 0; i < nn && !c.bad; i++) {
        uint16_t l = 0;
        char name[AN_NAME_MAX];
        GET(&c, l);
        if (l >= sizeof name) c.bad = true;
        get(&c, name, c.bad ? 0 : l);
        name[c.bad ? 0 : l] = '\0';
        if (!c.bad && an_history_intern(tmp, name) != i) c.bad = true; /* duplicates */
    }
    for (int r = 0; r < AN_NRES && !c.bad; r++) load_ring(&c, &tmp->ring[r], nn);
    if (c.bad || c.pos != len) {
        an_history_free(tmp);
        return -EINVAL;
    }
    for (int r = 0; r < AN_NRES; r++) {
        ring_clear(&h->ring[r]);
        an_ring_t swap = h->ring[r];
        h->ring[r] = tmp->ring[r];
        tmp->ring[r] = swap;
    }
    char **names = h->names;
    size_t nnames = h->nnames, names_cap = h->names_cap, index_cap = h->index_cap;
    uint32_t *index = h->index;
    h->names = tmp->names, h->nnames = tmp->nnames, h->names_cap = tmp->names_cap;
    h->index = tmp->index, h->index_cap = tmp->index_cap;
    tmp->names = names, tmp->nnames = nnames, tmp->names_cap = names_cap;
    tmp->index = index, tmp->index_cap = index_cap;
    h->last_t = last_t;
    an_history_free(tmp);
    if (restore_switches)
        for (int s = 0; s < AN_NSTATS; s++) {
            an_set_stat_enabled((an_stat_t)s, on[s]);
            an_set_dims_mask((an_stat_t)s, mask[s]);
        }
    return 0;
}
