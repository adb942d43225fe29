/*
 * The words of the zfs-style dataset commands that can be checked without a
 * pool: dataset and snapshot names, sizes, `list -t` type lists, `list -o`
 * column lists with their aliases, and the SOURCE column.
 *
 * The CLI checks names here before it connects, so a typo is reported the same
 * way whether or not a daemon runs, and the daemon checks them again (a client
 * is not trusted). Whether a property exists or a value is acceptable is not
 * decided here: the dataset layer owns that, so the message for "compression=foo"
 * comes from the one place that knows the legal values.
 *
 * Names use the pool name's alphabet ("_-.:" plus letters and digits) for every
 * component. ZFS also allows spaces; we do not, because names become NFS export
 * paths and cells of tab-separated listings that scripts split on whitespace.
 *
 * Sizes are parsed with integers only (no strtod): "1.5G" is 1.5 * 2^30 exactly,
 * "nan", "inf" and hex floats are junk, and overflow is an error rather than a
 * wrapped or saturated number.
 */
#include <cairn/mgmt.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool name_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == ':';
}

/* Checks one component [s, s+n); fills err on failure. `what` says which kind. */
static int component_check(const char *name, const char *s, size_t n, const char *what,
                           char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen, "invalid dataset name '%s': empty %s", name, what);
        return -EINVAL;
    }
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) {
        snprintf(err, errlen, "invalid dataset name '%s': '%.*s' is not a valid %s", name,
                 (int)n, s, what);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (!name_char_ok(s[i])) {
            snprintf(err, errlen, "invalid dataset name '%s': character '%c' not allowed", name,
                     s[i]);
            return -EINVAL;
        }
    return 0;
}

int mgmt_dataset_name_check(const char *name, unsigned allowed, char *err, size_t errlen)
{
    size_t len = strlen(name);
    if (len == 0) {
        snprintf(err, errlen, "missing dataset name");
        return -EINVAL;
    }
    if (len > DSL_NAME_MAX) {
        snprintf(err, errlen, "dataset name too long (at most %d characters)", DSL_NAME_MAX);
        return -EINVAL;
    }
    const char *at = strchr(name, '@');
    if (at && strchr(at + 1, '@')) {
        snprintf(err, errlen, "invalid dataset name '%s': more than one '@'", name);
        return -EINVAL;
    }
    if (at && !(allowed & MGMT_DSNAME_SNAPSHOT)) {
        snprintf(err, errlen, "'%s' is a snapshot; a filesystem or volume is expected here",
                 name);
        return -EINVAL;
    }
    if (!at && !(allowed & MGMT_DSNAME_DATASET)) {
        snprintf(err, errlen, "'%s' is not a snapshot name (want DATASET@NAME)", name);
        return -EINVAL;
    }
    size_t dslen = at ? (size_t)(at - name) : len;
    /* The pool component follows the pool rules (letter first, no reserved words). */
    size_t plen = strcspn(name, "/@");
    char pool[SPA_NAME_MAX + 1];
    if (plen == 0) {
        snprintf(err, errlen, "invalid dataset name '%s': missing pool name", name);
        return -EINVAL;
    }
    if (plen >= sizeof pool) {
        snprintf(err, errlen, "invalid dataset name '%s': pool name too long", name);
        return -EINVAL;
    }
    memcpy(pool, name, plen);
    pool[plen] = '\0';
    char perr[256];
    if (mgmt_pool_name_check(pool, perr, sizeof perr)) {
        snprintf(err, errlen, "invalid dataset name '%s': %s", name, perr);
        return -EINVAL;
    }
    const char *p = name + plen;
    while (p < name + dslen) { /* p points at a '/' */
        const char *s = p + 1;
        const char *e = s;
        while (e < name + dslen && *e != '/') e++;
        int rc = component_check(name, s, (size_t)(e - s), "component", err, errlen);
        if (rc) return rc;
        p = e;
    }
    if (at) return component_check(name, at + 1, strlen(at + 1), "snapshot name", err, errlen);
    return 0;
}

void mgmt_dataset_pool(const char *name, char *pool, size_t len)
{
    size_t n = strcspn(name, "/@");
    if (len == 0) return;
    if (n >= len) n = len - 1;
    memcpy(pool, name, n);
    pool[n] = '\0';
}

int mgmt_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s)) return -EINVAL;
    const char *p = s;
    uint64_t whole = 0;
    bool overflow = false;
    while (isdigit((unsigned char)*p)) {
        unsigned d = (unsigned)(*p++ - '0');
        if (whole > (UINT64_MAX - d) / 10) overflow = true;
        else whole = whole * 10 + d;
    }
    /* Fraction as num/den, at most 9 digits (finer than a byte for every unit). */
    uint64_t num = 0, den = 1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return -EINVAL;
        while (isdigit((unsigned char)*p)) {
            if (den < 1000000000ull) {
                num = num * 10 + (uint64_t)(*p - '0');
                den *= 10;
            }
            p++;
        }
    }
    unsigned shift = 0;
    if (*p) {
        static const char units[] = "BKMGTPE";
        const char *u = strchr(units, toupper((unsigned char)*p));
        if (!u) return -EINVAL;
        shift = (unsigned)(u - units) * 10;
        bool bare_b = *p == 'b' || *p == 'B';
        p++;
        if (!bare_b) {
            if (*p == 'i' || *p == 'I') {
                p++;
                if (*p != 'b' && *p != 'B') return -EINVAL; /* "1Gi" */
            }
            if (*p == 'b' || *p == 'B') p++;
        }
        if (*p) return -EINVAL;
    }
    if (overflow) return -ERANGE;
    if (shift && whole > (UINT64_MAX >> shift)) return -ERANGE;
    uint64_t bytes = whole << shift;
    /* num/den * 2^shift, rounded down; num < den <= 1e9 and 2^shift <= 2^60 would
     * overflow, so scale in two steps. */
    if (num) {
        unsigned __int128 frac = ((unsigned __int128)num << shift) / den;
        if (frac > UINT64_MAX - bytes) return -ERANGE;
        bytes += (uint64_t)frac;
    }
    *out = bytes;
    return 0;
}

int mgmt_parse_types(const char *s, unsigned *mask, char *err, size_t errlen)
{
    unsigned m = 0;
    const char *p = s;
    if (!*s) {
        snprintf(err, errlen, "missing type (filesystem, volume, snapshot or all)");
        return -EINVAL;
    }
    for (;;) {
        size_t n = strcspn(p, ",");
        char word[32];
        if (n == 0 || n >= sizeof word) {
            snprintf(err, errlen, "invalid type '%.*s' (want filesystem, volume, snapshot or all)",
                     (int)(n < 64 ? n : 64), p);
            return -EINVAL;
        }
        memcpy(word, p, n);
        word[n] = '\0';
        if (!strcmp(word, "filesystem") || !strcmp(word, "fs")) m |= 1u << DSL_TYPE_FILESYSTEM;
        else if (!strcmp(word, "volume") || !strcmp(word, "vol")) m |= 1u << DSL_TYPE_VOLUME;
        else if (!strcmp(word, "snapshot") || !strcmp(word, "snap")) m |= 1u << DSL_TYPE_SNAPSHOT;
        else if (!strcmp(word, "all"))
            m |= (1u << DSL_TYPE_FILESYSTEM) | (1u << DSL_TYPE_VOLUME) | (1u << DSL_TYPE_SNAPSHOT);
        else {
            snprintf(err, errlen, "invalid type '%s' (want filesystem, volume, snapshot or all)",
                     word);
            return -EINVAL;
        }
        if (!p[n]) break;
        p += n + 1;
    }
    *mask = m;
    return 0;
}

const char *mgmt_type_name(dsl_type_t t)
{
    switch (t) {
    case DSL_TYPE_FILESYSTEM: return "filesystem";
    case DSL_TYPE_VOLUME: return "volume";
    case DSL_TYPE_SNAPSHOT: return "snapshot";
    default: return "-";
    }
}

/* zfs's short column titles; the first word is the canonical property name. */
static const struct {
    const char *prop, *alias, *header;
} g_aliases[] = {
    {"available", "avail", "AVAIL"},
    {"referenced", "refer", "REFER"},
    {"compressratio", "ratio", "RATIO"},
    {"refcompressratio", "refratio", "REFRATIO"},
    {"compression", "compress", "COMPRESS"},
    {"recordsize", "recsize", "RECSIZE"},
    {"volblocksize", "volblock", "VOLBLOCK"},
    {"reservation", "reserv", "RESERV"},
    {"refreservation", "refreserv", "REFRESERV"},
    {"logicalused", "lused", "LUSED"},
    {"logicalreferenced", "lrefer", "LREFER"},
    {"usedbysnapshots", "usedsnap", "USEDSNAP"},
    {"usedbydataset", "usedds", "USEDDS"},
    {"usedbychildren", "usedchild", "USEDCHILD"},
    {"usedbyrefreservation", "usedrefreserv", "USEDREFRESERV"},
    {"primarycache", NULL, "PRIMARYCACHE"},
    {"secondarycache", NULL, "SECONDARYCACHE"},
    {"mountpoint", NULL, "MOUNTPOINT"},
    {"readonly", "rdonly", "RDONLY"},
};

const char *mgmt_prop_canonical(const char *word)
{
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(g_aliases); i++)
        if (g_aliases[i].alias && !strcmp(word, g_aliases[i].alias)) return g_aliases[i].prop;
    return word;
}

int mgmt_parse_columns(const char *list, mgmt_column_t **cols, size_t *ncols, char *err,
                       size_t errlen)
{
    mgmt_column_t *c = NULL;
    size_t n = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof c->prop) {
            snprintf(err, errlen, len ? "column name too long" : "empty column name in '%s'",
                     list);
            free(c);
            return -EINVAL;
        }
        c = cairn_realloc(c, sizeof *c * (n + 1));
        mgmt_column_t *col = &c[n++];
        char word[256];
        memcpy(word, p, len);
        word[len] = '\0';
        cairn_strlcpy(col->prop, mgmt_prop_canonical(word), sizeof col->prop);
        col->header[0] = '\0';
        for (size_t i = 0; i < CAIRN_ARRAY_SIZE(g_aliases); i++)
            if (!strcmp(col->prop, g_aliases[i].prop))
                cairn_strlcpy(col->header, g_aliases[i].header, sizeof col->header);
        if (!col->header[0]) {
            size_t j = 0;
            for (; col->prop[j] && j + 1 < sizeof col->header; j++)
                col->header[j] = (char)toupper((unsigned char)col->prop[j]);
            col->header[j] = '\0';
        }
        if (!p[len]) break;
        p += len + 1;
    }
    *cols = c;
    *ncols = n;
    return 0;
}

void mgmt_format_source(dsl_prop_source_t src, const char *inherited_from, char *buf,
                        size_t len)
{
    switch (src) {
    case DSL_SRC_DEFAULT: snprintf(buf, len, "default"); break;
    case DSL_SRC_LOCAL: snprintf(buf, len, "local"); break;
    case DSL_SRC_INHERITED:
        snprintf(buf, len, "inherited from %s", inherited_from ? inherited_from : "?");
        break;
    default: snprintf(buf, len, "-"); break;
    }
}
