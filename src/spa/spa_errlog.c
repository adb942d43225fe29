/*
 * The pool's persistent error log: blocks of which no copy could be read, by
 * bookmark (object set, object, level, block id), so that `pool status -v`
 * can name the files and volumes that lost data.
 *
 * Why bookmarks and why here. The pool detects the failure (no mirror side
 * verifies, too many raidz columns are bad) but knows only the block pointer;
 * the DMU knows which object and record it was reading. So the DMU reports its
 * failed reads with their bookmark (spa_errlog_add), and the scrub gets the
 * bookmark of every block from the DMU's walk (spa_bp_visitor_t). The lists
 * live here, next to the scrub that decides when an entry goes away; the DMU
 * stores `last` in an object of its meta object set, because the pool itself
 * keeps no objects (spa_errlog_sync_take / spa_errlog_load).
 *
 * Two lists as in ZFS: `last` holds what is known bad (stored); `scrub` what
 * the scrub in progress found so far (kept in memory: a scrub does not survive
 * an export). Any error is added to `last`, and to `scrub` too while a scrub
 * runs; a finished scrub makes its list the new `last`, so an entry that was
 * healed, rewritten or freed disappears; a canceled one changes nothing.
 *
 * Stored form: a header (magic, version, count) and count bookmarks of four
 * little-endian u64 each, sorted.
 */
#include "spa_impl.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ERRLOG_MAGIC 0x5252454e52494143ULL /* "CAIRNERR" */
#define ERRLOG_VERSION 1

typedef struct errlog_hdr {
    uint64_t magic, version, count, reserved;
} errlog_hdr_t;

static int bm_cmp(const spa_bookmark_t *a, const spa_bookmark_t *b)
{
    if (a->objset != b->objset) return a->objset < b->objset ? -1 : 1;
    if (a->object != b->object) return a->object < b->object ? -1 : 1;
    if (a->level != b->level) return a->level < b->level ? -1 : 1;
    if (a->blkid != b->blkid) return a->blkid < b->blkid ? -1 : 1;
    return 0;
}

static int bm_qcmp(const void *a, const void *b) { return bm_cmp(a, b); }

/* Inserts into a sorted list; true when it was not there. */
static bool list_insert(spa_errlist_t *l, const spa_bookmark_t *bm)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = bm_cmp(&l->v[mid], bm);
        if (c == 0) return false;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    if (l->n >= SPA_ERRLOG_MAX) return false;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = cairn_realloc(l->v, l->cap * sizeof *l->v);
    }
    memmove(&l->v[lo + 1], &l->v[lo], (l->n - lo) * sizeof *l->v);
    l->v[lo] = *bm;
    l->n++;
    return true;
}

static void list_clear(spa_errlist_t *l)
{
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Marks the open txg as changed, so the sync that stores `last` comes on the
 * timer even when nothing else is written. */
static void touch_txg(spa_t *spa)
{
    if (spa->readonly || !spa->tx.thread_running) return;
    spa_tx_rele(spa, spa_tx_hold_nowait(spa));
}

bool spa_errlog_add(spa_t *spa, const spa_bookmark_t *bm)
{
    pthread_mutex_lock(&spa->errlog_lock);
    bool fresh = list_insert(&spa->errlog_last, bm);
    if (spa->errlog_scrubbing && list_insert(&spa->errlog_scrub, bm)) fresh = true;
    if (fresh) spa->errlog_dirty = true;
    pthread_mutex_unlock(&spa->errlog_lock);
    if (fresh) touch_txg(spa);
    return fresh;
}

size_t spa_errlog_list(spa_t *spa, spa_bookmark_t **out)
{
    pthread_mutex_lock(&spa->errlog_lock);
    size_t n = spa->errlog_last.n + spa->errlog_scrub.n;
    spa_bookmark_t *v = cairn_zalloc((n ? n : 1) * sizeof *v);
    if (spa->errlog_last.n) memcpy(v, spa->errlog_last.v, spa->errlog_last.n * sizeof *v);
    if (spa->errlog_scrub.n)
        memcpy(v + spa->errlog_last.n, spa->errlog_scrub.v, spa->errlog_scrub.n * sizeof *v);
    pthread_mutex_unlock(&spa->errlog_lock);
    qsort(v, n, sizeof *v, bm_qcmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || bm_cmp(&v[k - 1], &v[i])) v[k++] = v[i];
    *out = v;
    return k;
}

bool spa_errlog_sync_take(spa_t *spa, void **buf, size_t *len)
{
    pthread_mutex_lock(&spa->errlog_lock);
    if (!spa->errlog_dirty) {
        pthread_mutex_unlock(&spa->errlog_lock);
        return false;
    }
    spa->errlog_dirty = false;
    size_t n = spa->errlog_last.n;
    *len = sizeof(errlog_hdr_t) + n * 4 * sizeof(uint64_t);
    uint8_t *b = cairn_zalloc(*len);
    errlog_hdr_t h = {htole64(ERRLOG_MAGIC), htole64(ERRLOG_VERSION), htole64(n), 0};
    memcpy(b, &h, sizeof h);
    uint64_t *e = (uint64_t *)(b + sizeof h);
    for (size_t i = 0; i < n; i++) {
        const spa_bookmark_t *bm = &spa->errlog_last.v[i];
        e[4 * i] = htole64(bm->objset);
        e[4 * i + 1] = htole64(bm->object);
        e[4 * i + 2] = htole64((uint64_t)bm->level);
        e[4 * i + 3] = htole64(bm->blkid);
    }
    pthread_mutex_unlock(&spa->errlog_lock);
    *buf = b;
    return true;
}

int spa_errlog_load(spa_t *spa, const void *buf, size_t len)
{
    errlog_hdr_t h;
    if (len < sizeof h) return -EINVAL;
    memcpy(&h, buf, sizeof h);
    uint64_t n = le64toh(h.count);
    if (le64toh(h.magic) != ERRLOG_MAGIC || le64toh(h.version) != ERRLOG_VERSION ||
        n > SPA_ERRLOG_MAX || len < sizeof h + n * 4 * sizeof(uint64_t))
        return -EINVAL;
    const uint8_t *e = (const uint8_t *)buf + sizeof h;
    pthread_mutex_lock(&spa->errlog_lock);
    list_clear(&spa->errlog_last);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t w[4];
        memcpy(w, e + i * sizeof w, sizeof w);
        spa_bookmark_t bm = {le64toh(w[0]), le64toh(w[1]),
                             (int64_t)le64toh(w[2]), le64toh(w[3])};
        list_insert(&spa->errlog_last, &bm);
    }
    spa->errlog_dirty = false;
    pthread_mutex_unlock(&spa->errlog_lock);
    return 0;
}

void spa_errlog_scrub_begin(spa_t *spa, bool resumed)
{
    pthread_mutex_lock(&spa->errlog_lock);
    list_clear(&spa->errlog_scrub);
    /* What the interrupted run found is in `last` only: kept (an entry healed
     * since stays until the next scrub that runs whole). */
    for (size_t i = 0; resumed && i < spa->errlog_last.n; i++)
        list_insert(&spa->errlog_scrub, &spa->errlog_last.v[i]);
    spa->errlog_scrubbing = true;
    pthread_mutex_unlock(&spa->errlog_lock);
}

void spa_errlog_scrub_end(spa_t *spa, bool finished)
{
    pthread_mutex_lock(&spa->errlog_lock);
    spa->errlog_scrubbing = false;
    bool changed = false;
    if (finished) {
        changed = spa->errlog_last.n != spa->errlog_scrub.n ||
                  (spa->errlog_last.n &&
                   memcmp(spa->errlog_last.v, spa->errlog_scrub.v,
                          spa->errlog_last.n * sizeof *spa->errlog_last.v));
        list_clear(&spa->errlog_last);
        spa->errlog_last = spa->errlog_scrub;
        memset(&spa->errlog_scrub, 0, sizeof spa->errlog_scrub);
        if (changed) spa->errlog_dirty = true;
    } else {
        list_clear(&spa->errlog_scrub);
    }
    pthread_mutex_unlock(&spa->errlog_lock);
    if (changed) touch_txg(spa);
}

void spa_errlog_fini(spa_t *spa)
{
    list_clear(&spa->errlog_last);
    list_clear(&spa->errlog_scrub);
}
