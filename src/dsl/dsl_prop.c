/*
 * Dataset properties: ZFS names, value syntax, inheritance and statistics.
 *
 * A table describes every native property: its kind (size, number, one of a
 * list, free text), whether it inherits, its default, which dataset types it
 * applies to and whether it can change after creation. Local values are kept
 * per head in a MOS ZAP ("name" -> normalised text) and cached in memory; the
 * effective value is the local one, else (for inheritable properties) the
 * nearest ancestor's, else the default - and the SOURCE says which. A
 * snapshot shows its head's values. Statistics are computed from the space
 * counters of dsl_dataset.c on every get.
 *
 * A value is validated and normalised before it is stored ("on" stays "on",
 * sizes become exact byte counts), so what is on disk is always valid. A
 * property the engine does not implement (dedup) is refused, never stored and
 * ignored. User properties ("module:name") are free text and always inherit.
 */
#include "dsl_impl.h"

#include <cairn/arc.h>

#include <cairn/assert.h>
#include <cairn/util.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pkind { PK_SIZE, PK_NUM, PK_INDEX, PK_TEXT, PK_STAT };
#define T_FS (1u << DSL_TYPE_FILESYSTEM)
#define T_VOL (1u << DSL_TYPE_VOLUME)
#define T_SNAP (1u << DSL_TYPE_SNAPSHOT)
#define T_ALL (T_FS | T_VOL | T_SNAP)

typedef struct prop_desc {
    const char *name;
    enum pkind kind;
    bool inherit;
    const char *def;          /* default as text; NULL: computed */
    unsigned types;
    bool createonly;
    const char *values;       /* PK_INDEX: "a|b|c" */
} prop_desc_t;

static const prop_desc_t props[] = {
    {"type", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"creation", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"used", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"available", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"referenced", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"compressratio", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"refcompressratio", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"logicalused", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"logicalreferenced", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"usedbysnapshots", PK_STAT, false, NULL, T_FS | T_VOL, false, NULL},
    {"usedbydataset", PK_STAT, false, NULL, T_FS | T_VOL, false, NULL},
    {"usedbychildren", PK_STAT, false, NULL, T_FS | T_VOL, false, NULL},
    {"usedbyrefreservation", PK_STAT, false, NULL, T_FS | T_VOL, false, NULL},
    {"written", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"guid", PK_STAT, false, NULL, T_ALL, false, NULL},
    {"origin", PK_STAT, false, NULL, T_FS | T_VOL, false, NULL},
    {"mountpoint", PK_TEXT, true, NULL, T_FS, false, NULL},
    {"sharenfs", PK_TEXT, true, "off", T_FS, false, NULL},
    {"recordsize", PK_SIZE, true, "131072", T_FS, false, NULL},
    {"volsize", PK_SIZE, false, "0", T_VOL, false, NULL},
    {"volblocksize", PK_SIZE, false, "8192", T_VOL, true, NULL},
    {"compression", PK_INDEX, true, "lz4", T_FS | T_VOL, false,
     "off|on|lzjb|lz4|gzip|gzip-1|gzip-2|gzip-3|gzip-4|gzip-5|gzip-6|gzip-7|gzip-8|gzip-9|zle"},
    {"checksum", PK_INDEX, true, "on", T_FS | T_VOL, false, "on|fletcher4|xxhash|sha256"},
    {"copies", PK_NUM, true, "1", T_FS | T_VOL, false, NULL},
    {"atime", PK_INDEX, true, "on", T_FS, false, "on|off"},
    {"readonly", PK_INDEX, true, "off", T_FS | T_VOL, false, "on|off"},
    {"sync", PK_INDEX, true, "standard", T_FS | T_VOL, false, "standard|always|disabled"},
    {"logbias", PK_INDEX, true, "latency", T_FS | T_VOL, false, "latency|throughput"},
    {"primarycache", PK_INDEX, true, "all", T_ALL, false, "all|metadata|none"},
    {"secondarycache", PK_INDEX, true, "all", T_ALL, false, "all|metadata|none"},
    {"quota", PK_SIZE, false, "0", T_FS, false, NULL},
    {"refquota", PK_SIZE, false, "0", T_FS | T_VOL, false, NULL},
    {"reservation", PK_SIZE, false, "0", T_FS | T_VOL, false, NULL},
    {"refreservation", PK_SIZE, false, "0", T_FS | T_VOL, false, NULL},
};

static const char *const prop_name_list[] = {
    "type", "creation", "used", "available", "referenced", "compressratio", "refcompressratio",
    "logicalused",
    "logicalreferenced", "usedbysnapshots", "usedbydataset", "usedbychildren",
    "usedbyrefreservation", "written", "guid", "origin", "mountpoint", "sharenfs", "recordsize",
    "volsize", "volblocksize", "compression", "checksum", "copies", "atime", "readonly", "sync",
    "logbias", "primarycache", "secondarycache", "quota", "refquota", "reservation",
    "refreservation", NULL};
_Static_assert(CAIRN_ARRAY_SIZE(prop_name_list) == CAIRN_ARRAY_SIZE(props) + 1, "name list matches");

const char *const *dsl_prop_names(void) { return prop_name_list; }

/* Known to ZFS, not implemented here: refused with this message. */
static const char *const unimplemented[] = {"dedup", "encryption", "keyformat", "keylocation",
                                            "casesensitivity", "normalization", "utf8only",
                                            "snapdir", "aclmode", "aclinherit", "xattr",
                                            "canmount", "exec", "setuid", "devices", "zoned",
                                            "sharesmb", "snapshot_limit", "filesystem_limit",
                                            "redundant_metadata", "special_small_blocks",
                                            "dnodesize", NULL};

static const prop_desc_t *prop_find(const char *name)
{
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(props); i++)
        if (!strcmp(props[i].name, name)) return &props[i];
    return NULL;
}

static bool is_user_prop(const char *name) { return name && strchr(name, ':') != NULL; }

/* ---------------- local values in memory ---------------- */

const char *dsl_prop_local(const dsl_node_t *n, const char *name)
{
    for (size_t i = 0; i < n->nprops; i++)
        if (!strcmp(n->props[i].name, name)) return n->props[i].value;
    return NULL;
}

static void local_set(dsl_node_t *n, const char *name, const char *value)
{
    if (!strcmp(name, "reservation") || !strcmp(name, "refreservation"))
        dsl_reservers_changed(n->dp);
    for (size_t i = 0; i < n->nprops; i++)
        if (!strcmp(n->props[i].name, name)) {
            if (value) {
                free(n->props[i].value);
                n->props[i].value = cairn_strdup(value);
            } else {
                free(n->props[i].name);
                free(n->props[i].value);
                n->props[i] = n->props[--n->nprops];
            }
            return;
        }
    if (!value) return;
    n->props = cairn_realloc(n->props, (n->nprops + 1) * sizeof(*n->props));
    n->props[n->nprops].name = cairn_strdup(name);
    n->props[n->nprops].value = cairn_strdup(value);
    n->nprops++;
}

void dsl_prop_free_all(dsl_node_t *n)
{
    for (size_t i = 0; i < n->nprops; i++) {
        free(n->props[i].name);
        free(n->props[i].value);
    }
    free(n->props);
    n->props = NULL;
    n->nprops = 0;
}

int dsl_prop_load(dsl_pool_t *dp, dsl_node_t *n)
{
    if (!n->phys.props_zap) return 0;
    zap_cursor_t zc;
    zap_entry_t *e = cairn_zalloc(sizeof(*e));
    zap_cursor_init(&zc, dp->mos, n->phys.props_zap, 0);
    int r;
    while ((r = zap_cursor_next(&zc, e)) == 1) {
        char *v = cairn_zalloc(e->value_len + 1);
        memcpy(v, e->value, e->value_len);
        local_set(n, e->name, v);
        free(v);
    }
    free(e);
    return r < 0 ? r : 0;
}

int dsl_prop_store(dsl_pool_t *dp, dsl_node_t *n, const char *name, const char *value,
                   dmu_tx_t *tx)
{
    int err = 0;
    if (value) {
        if (!n->phys.props_zap) {
            err = zap_create(dp->mos, &n->phys.props_zap, tx);
            n->dirty = true;
        }
        if (!err) err = zap_update(dp->mos, n->phys.props_zap, name, value, (uint32_t)strlen(value), tx);
    } else if (n->phys.props_zap && dsl_prop_local(n, name)) {
        err = zap_remove(dp->mos, n->phys.props_zap, name, tx);
    }
    if (!err) local_set(n, name, value);
    return err;
}

/* ---------------- validation ---------------- */

static bool index_has(const char *values, const char *v)
{
    size_t l = strlen(v);
    const char *p = values;
    while (p && *p) {
        const char *q = strchr(p, '|');
        size_t pl = q ? (size_t)(q - p) : strlen(p);
        if (pl == l && !strncmp(p, v, l)) return true;
        p = q ? q + 1 : NULL;
    }
    return false;
}

static bool is_p2(uint64_t v) { return v && !(v & (v - 1)); }

int dsl_prop_validate(dsl_node_t *n, dsl_type_t type, const char *name, const char *value,
                      bool create, char *norm, size_t normlen, char *err, size_t errlen)
{
    if (!name || !*name || !value) {
        cairn_seterr(err, errlen, "missing property name or value");
        return -EINVAL;
    }
    if (is_user_prop(name)) {
        bool ok = strlen(name) <= ZAP_NAME_MAX && name[0] != ':';
        for (const char *p = name; *p && ok; p++)
            ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
                 *p == '.' || *p == ':';
        if (!ok) {
            cairn_seterr(err, errlen, "invalid user property name '%s': use module:name with lowercase letters, digits, '_', '-', '.', ':'",
                   name);
            return -EINVAL;
        }
        if (strlen(value) >= DSL_PROP_VALUE_MAX) {
            cairn_seterr(err, errlen, "value of %s is too long (at most %d bytes)", name, DSL_PROP_VALUE_MAX - 1);
            return -E2BIG;
        }
        cairn_strlcpy(norm, value, normlen);
        return 0;
    }
    for (size_t i = 0; unimplemented[i]; i++)
        if (!strcmp(unimplemented[i], name)) {
            cairn_seterr(err, errlen, "property %s is not implemented yet", name);
            return -ENOTSUP;
        }
    const prop_desc_t *d = prop_find(name);
    if (!d) {
        cairn_seterr(err, errlen, "unknown property: %s", name);
        return -EINVAL;
    }
    if (d->kind == PK_STAT) {
        cairn_seterr(err, errlen, "property %s is read-only", name);
        return -EINVAL;
    }
    if (type == DSL_TYPE_SNAPSHOT) {
        cairn_seterr(err, errlen, "property %s cannot be set on a snapshot", name);
        return -EINVAL;
    }
    if (!(d->types & (1u << type))) {
        cairn_seterr(err, errlen, "property %s does not apply to %s", name,
               type == DSL_TYPE_VOLUME ? "volumes" : "filesystems");
        return -EINVAL;
    }
    if (d->createonly && !create) {
        cairn_seterr(err, errlen, "property %s can only be set when the dataset is created", name);
        return -EINVAL;
    }
    uint64_t v = 0;
    switch (d->kind) {
    case PK_SIZE:
        if (!strcmp(value, "none") && (!strcmp(name, "quota") || !strcmp(name, "refquota") ||
                                       !strcmp(name, "reservation") || !strcmp(name, "refreservation"))) {
            v = 0;
        } else if (cairn_parse_size(value, &v) != 0) {
            cairn_seterr(err, errlen, "bad %s value '%s': expected a size like 128K, 10G%s", name, value,
                   strstr(name, "quota") || strstr(name, "reserv") ? " or none" : "");
            return -EINVAL;
        }
        if (!strcmp(name, "recordsize") && (!is_p2(v) || v < 512 || v > 1024 * 1024)) {
            cairn_seterr(err, errlen, "bad recordsize '%s': must be a power of two from 512 to 1M", value);
            return -EINVAL;
        }
        if (!strcmp(name, "volblocksize") && (!is_p2(v) || v < 512 || v > 128 * 1024)) {
            cairn_seterr(err, errlen, "bad volblocksize '%s': must be a power of two from 512 to 128K", value);
            return -EINVAL;
        }
        if (!strcmp(name, "volsize")) {
            uint64_t vbs = 8192;
            const char *lv = n ? dsl_prop_local(n, "volblocksize") : NULL;
            if (lv) vbs = strtoull(lv, NULL, 10);
            if (v == 0 || (n && v % vbs)) {
                cairn_seterr(err, errlen, "bad volsize '%s': must be a nonzero multiple of volblocksize (%" PRIu64 ")",
                       value, vbs);
                return -EINVAL;
            }
        }
        snprintf(norm, normlen, "%" PRIu64, v);
        return 0;
    case PK_NUM: {
        char *end;
        unsigned long long x = strtoull(value, &end, 10);
        if (*end || end == value || x < 1 || x > 3) {
            cairn_seterr(err, errlen, "bad copies value '%s': must be 1, 2 or 3", value);
            return -EINVAL;
        }
        snprintf(norm, normlen, "%llu", x);
        return 0;
    }
    case PK_INDEX:
        if (!index_has(d->values, value)) {
            char allowed[256];
            cairn_strlcpy(allowed, d->values, sizeof(allowed));
            if (!strcmp(name, "compression")) cairn_strlcpy(allowed, "off|on|lzjb|lz4|gzip|gzip-1..9|zle", sizeof(allowed));
            cairn_seterr(err, errlen, "bad %s value '%s': allowed are %s", name, value, allowed);
            return -EINVAL;
        }
        cairn_strlcpy(norm, value, normlen);
        return 0;
    case PK_TEXT:
        if (!strcmp(name, "mountpoint")) {
            if (strcmp(value, "none") && strcmp(value, "legacy") && value[0] != '/') {
                cairn_seterr(err, errlen, "bad mountpoint '%s': must be an absolute path, none or legacy", value);
                return -EINVAL;
            }
            if (strlen(value) > DSL_NAME_MAX) {
                cairn_seterr(err, errlen, "bad mountpoint: longer than %d bytes", DSL_NAME_MAX);
                return -EINVAL;
            }
            /* No trailing slash, so inherited paths join cleanly. */
            cairn_strlcpy(norm, value, normlen);
            size_t l = strlen(norm);
            while (l > 1 && norm[l - 1] == '/') norm[--l] = 0;
            return 0;
        }
        /* sharenfs: off, on or an option string. */
        if (strlen(value) >= 1024 || strchr(value, '\n') || !*value) {
            cairn_seterr(err, errlen, "bad sharenfs value: off, on or an option string of at most 1023 bytes");
            return -EINVAL;
        }
        cairn_strlcpy(norm, value, normlen);
        return 0;
    default: break;
    }
    cairn_seterr(err, errlen, "property %s cannot be set", name);
    return -EINVAL;
}

/* ---------------- effective values ---------------- */

static dsl_node_t *head_of(dsl_node_t *n)
{
    return n->phys.type == DSL_TYPE_SNAPSHOT ? n->parent : n;
}

int dsl_prop_effective(dsl_pool_t *dp, dsl_node_t *n, const char *name, char *val, size_t len,
                       uint64_t *num, dsl_prop_source_t *src, char *from, size_t fromlen)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    (void)dp;
    const prop_desc_t *d = prop_find(name);
    bool user = is_user_prop(name);
    if (!d && !user) return -ENOENT;
    dsl_node_t *h = head_of(n);
    if (from && fromlen) from[0] = 0;
    *num = 0;
    const char *v = dsl_prop_local(h, name);
    *src = DSL_SRC_LOCAL;
    dsl_node_t *setter = h;
    if (!v && (user || d->inherit)) {
        for (dsl_node_t *a = h->parent; a && !v; a = a->parent)
            if ((v = dsl_prop_local(a, name))) setter = a;
        if (v) {
            *src = DSL_SRC_INHERITED;
            if (from) dsl_node_fullname(setter, from, fromlen);
        }
    }
    if (d && !strcmp(name, "mountpoint")) {
        char full[DSL_NAME_MAX + 1];
        dsl_node_fullname(h, full, sizeof(full));
        if (!v) {
            snprintf(val, len, "/%s", full);
            *src = DSL_SRC_DEFAULT;
        } else if (setter == h || !strcmp(v, "none") || !strcmp(v, "legacy")) {
            cairn_strlcpy(val, v, len);
        } else {
            char sfull[DSL_NAME_MAX + 1];
            dsl_node_fullname(setter, sfull, sizeof(sfull));
            snprintf(val, len, "%s%s%s", strcmp(v, "/") ? v : "", "", full + strlen(sfull));
            if (!val[0]) cairn_strlcpy(val, "/", len);
        }
        return 0;
    }
    if (!v) {
        if (user) return -ENOENT;
        v = d->def;
        *src = DSL_SRC_DEFAULT;
    }
    if (d && d->kind == PK_SIZE) {
        *num = strtoull(v, NULL, 10);
        bool none_ok = strstr(name, "quota") || strstr(name, "reserv");
        if (*num == 0 && none_ok) cairn_strlcpy(val, "none", len);
        else cairn_format_size(*num, val, len);
    } else if (d && d->kind == PK_NUM) {
        *num = strtoull(v, NULL, 10);
        cairn_strlcpy(val, v, len);
    } else {
        cairn_strlcpy(val, v, len);
    }
    return 0;
}

uint64_t dsl_prop_num(dsl_pool_t *dp, dsl_node_t *n, const char *name)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    char val[64];
    uint64_t num = 0;
    dsl_prop_source_t src;
    if (!strcmp(name, "readonly") || !strcmp(name, "atime")) {
        if (dsl_prop_effective(dp, n, name, val, sizeof(val), &num, &src, NULL, 0)) return 0;
        return !strcmp(val, "on");
    }
    if (dsl_prop_effective(dp, n, name, val, sizeof(val), &num, &src, NULL, 0)) return 0;
    return num;
}

static void fmt_size(uint64_t v, char *buf, size_t len) { cairn_format_size(v, buf, len); }

/* Fills p for a native or user property (dp->lock held). */
static int prop_fill(dsl_pool_t *dp, dsl_node_t *n, const char *name, dsl_prop_t *p)
{
    CAIRN_ASSERT(cairn_mutex_held(&dp->lock));
    memset(p, 0, sizeof(*p));
    cairn_strlcpy(p->name, name, sizeof(p->name));
    const prop_desc_t *d = prop_find(name);
    if (d && !(d->types & (1u << n->phys.type))) return -ENOENT;
    if (d && d->kind == PK_STAT) {
        p->source = DSL_SRC_NONE;
        p->is_numeric = true;
        dsl_space_t s;
        dsl_node_space(dp, n, &s);
        uint64_t v = 0;
        bool size = true;
        if (!strcmp(name, "type")) {
            p->is_numeric = false;
            cairn_strlcpy(p->value,
                          n->phys.type == DSL_TYPE_FILESYSTEM ? "filesystem"
                          : n->phys.type == DSL_TYPE_VOLUME   ? "volume"
                                                               : "snapshot",
                          sizeof(p->value));
            return 0;
        } else if (!strcmp(name, "creation")) {
            v = n->phys.creation_time;
            size = false;
        } else if (!strcmp(name, "used")) v = s.used;
        else if (!strcmp(name, "available")) v = s.available;
        else if (!strcmp(name, "referenced")) v = s.referenced;
        else if (!strcmp(name, "logicalused")) v = s.logicalused;
        else if (!strcmp(name, "logicalreferenced")) v = s.logicalreferenced;
        else if (!strcmp(name, "usedbysnapshots")) v = s.usedbysnapshots;
        else if (!strcmp(name, "usedbydataset")) v = s.usedbydataset;
        else if (!strcmp(name, "usedbychildren")) v = s.usedbychildren;
        else if (!strcmp(name, "usedbyrefreservation")) v = s.usedbyrefreservation;
        else if (!strcmp(name, "written")) v = s.written;
        else if (!strcmp(name, "guid")) {
            v = n->phys.guid;
            size = false;
        } else if (!strcmp(name, "compressratio") || !strcmp(name, "refcompressratio")) {
            /* Logical over stored bytes of data records (copies and parity
             * aside, as in ZFS; metadata left out, so an empty dataset reads
             * 1.00x): of the dataset and its descendants, or (ref) of what its
             * root references. */
            bool ref = name[0] == 'r';
            uint64_t comp = ref ? s.refcomp : s.comp, uncomp = ref ? s.refuncomp : s.uncomp;
            uint64_t r = comp ? uncomp * 100 / comp : 100;
            if (r < 100) r = 100;
            p->numeric = r;
            snprintf(p->value, sizeof(p->value), "%" PRIu64 ".%02" PRIu64 "x", r / 100, r % 100);
            return 0;
        } else if (!strcmp(name, "origin")) {
            p->is_numeric = false;
            dsl_node_t *o = n->phys.origin ? dsl_node_by_obj(dp, n->phys.origin) : NULL;
            if (o) dsl_node_fullname(o, p->value, sizeof(p->value));
            else cairn_strlcpy(p->value, "-", sizeof(p->value));
            return 0;
        }
        p->numeric = v;
        if (size) fmt_size(v, p->value, sizeof(p->value));
        else snprintf(p->value, sizeof(p->value), "%" PRIu64, v);
        return 0;
    }
    uint64_t num = 0;
    int e = dsl_prop_effective(dp, n, name, p->value, sizeof(p->value), &num, &p->source,
                               p->inherited_from, sizeof(p->inherited_from));
    if (e) return e;
    p->numeric = num;
    p->is_numeric = d && (d->kind == PK_SIZE || d->kind == PK_NUM);
    return 0;
}

int dsl_prop_get(dsl_pool_t *dp, const char *dsname, const char *prop, dsl_prop_t *out,
                 char *err, size_t errlen)
{
    if (!prop || (!prop_find(prop) && !is_user_prop(prop))) {
        for (size_t i = 0; prop && unimplemented[i]; i++)
            if (!strcmp(unimplemented[i], prop)) {
                cairn_seterr(err, errlen, "property %s is not implemented yet", prop);
                return -ENOTSUP;
            }
        cairn_seterr(err, errlen, "unknown property: %s", prop ? prop : "(null)");
        return -EINVAL;
    }
    pthread_mutex_lock(&dp->lock);
    dsl_node_t *n = dsl_lookup(dp, dsname);
    int e;
    if (!n) {
        cairn_seterr(err, errlen, "no such dataset: %s", dsname);
        e = -ENOENT;
    } else {
        e = prop_fill(dp, n, prop, out);
        if (e == -ENOENT && is_user_prop(prop)) {
            /* An unset user property reads as "-", like ZFS. */
            memset(out, 0, sizeof(*out));
            cairn_strlcpy(out->name, prop, sizeof(out->name));
            cairn_strlcpy(out->value, "-", sizeof(out->value));
            out->source = DSL_SRC_NONE;
            e = 0;
        } else if (e == -ENOENT) {
            cairn_seterr(err, errlen, "property %s does not apply to %s", prop, dsname);
            e = -EINVAL;
        }
    }
    pthread_mutex_unlock(&dp->lock);
    return e;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int dsl_prop_get_all(dsl_pool_t *dp, const char *dsname,
                     void (*fn)(const dsl_prop_t *p, void *arg), void *arg, char *err,
                     size_t errlen)
{
    pthread_mutex_lock(&dp->lock);
    dsl_node_t *n = dsl_lookup(dp, dsname);
    if (!n) {
        pthread_mutex_unlock(&dp->lock);
        cairn_seterr(err, errlen, "no such dataset: %s", dsname);
        return -ENOENT;
    }
    size_t cap = CAIRN_ARRAY_SIZE(props) + 8, cnt = 0;
    dsl_prop_t *v = cairn_zalloc(cap * sizeof(*v));
    for (size_t i = 0; i < CAIRN_ARRAY_SIZE(props); i++)
        if (prop_fill(dp, n, props[i].name, &v[cnt]) == 0) cnt++;
    /* User properties set here or on an ancestor. */
    char **names = NULL;
    size_t nn = 0;
    for (dsl_node_t *a = head_of(n); a; a = a->parent)
        for (size_t i = 0; i < a->nprops; i++) {
            if (!is_user_prop(a->props[i].name)) continue;
            bool dup = false;
            for (size_t j = 0; j < nn && !dup; j++) dup = !strcmp(names[j], a->props[i].name);
            if (dup) continue;
            names = cairn_realloc(names, (nn + 1) * sizeof(*names));
            names[nn++] = a->props[i].name;
        }
    if (nn) qsort(names, nn, sizeof(*names), cmp_str); /* names is NULL when nn is 0 */
    for (size_t i = 0; i < nn; i++) {
        if (cnt == cap) {
            cap *= 2;
            v = cairn_realloc(v, cap * sizeof(*v));
        }
        if (prop_fill(dp, n, names[i], &v[cnt]) == 0) cnt++;
    }
    free(names);
    pthread_mutex_unlock(&dp->lock);
    for (size_t i = 0; i < cnt; i++) fn(&v[i], arg);
    free(v);
    return 0;
}

/* ---------------- set / inherit ---------------- */

typedef struct set_task {
    char ds[DSL_NAME_MAX + 1];
    const char *prop;
    char *value; /* normalised; NULL = inherit */
    bool volsize_may_shrink;
    char *err;
    size_t errlen;
} set_task_t;

static int task_set(dsl_pool_t *dp, void *arg, uint64_t txg)
{
    set_task_t *st = arg;
    dsl_node_t *n = dsl_lookup(dp, st->ds);
    if (!n) {
        cairn_seterr(st->err, st->errlen, "no such dataset: %s", st->ds);
        return -ENOENT;
    }
    /* A smaller volsize alone would hide the blocks beyond the new end, still
     * allocated, and a later grow would show them again: only zvol_resize,
     * which frees them, may shrink. Checked here, against the size of record. */
    if (st->value && !strcmp(st->prop, "volsize") && !st->volsize_may_shrink) {
        const char *old = dsl_prop_local(n, "volsize");
        uint64_t oldv = old ? strtoull(old, NULL, 10) : 0, newv = strtoull(st->value, NULL, 10);
        if (newv < oldv) {
            cairn_seterr(st->err, st->errlen,
                   "shrinking volsize from %" PRIu64 " to %" PRIu64 " destroys the data beyond "
                   "the new end and needs force",
                   oldv, newv);
            return -EPERM;
        }
    }
    /* Limits are checked here, in syncing context, against exact numbers:
     * nothing is stored when they are refused. */
    int err = st->value ? dsl_space_check_limit(dp, n, st->prop, strtoull(st->value, NULL, 10),
                                                st->err, st->errlen)
                        : 0;
    bool drag = false;
    if (!err && st->value && !strcmp(st->prop, "volsize")) {
        const char *old = dsl_prop_local(n, "volsize");
        const char *rr = dsl_prop_local(n, "refreservation");
        drag = old && rr && !strcmp(old, rr);
        if (drag)
            err = dsl_space_check_limit(dp, n, "refreservation", strtoull(st->value, NULL, 10),
                                        st->err, st->errlen);
    }
    if (err) return err;
    dmu_tx_t *tx = dmu_tx_create_sync(dp->mos, txg);
    /* A volume's volsize drags a refreservation that matched it along. */
    if (drag) err = dsl_prop_store(dp, n, "refreservation", st->value, tx);
    if (!err) err = dsl_prop_store(dp, n, st->prop, st->value, tx);
    dmu_tx_commit(tx);
    return err;
}

static int prop_set(dsl_pool_t *dp, const char *dsname, const char *prop, const char *value,
                    bool volsize_may_shrink, char *err, size_t errlen)
{
    pthread_mutex_lock(&dp->lock);
    dsl_node_t *n = dsname ? dsl_lookup(dp, dsname) : NULL;
    char *norm = cairn_zalloc(DSL_PROP_VALUE_MAX);
    int e;
    if (!n) {
        cairn_seterr(err, errlen, "no such dataset: %s", dsname ? dsname : "(null)");
        e = -ENOENT;
    } else {
        e = dsl_prop_validate(n, (dsl_type_t)n->phys.type, prop, value, false, norm,
                              DSL_PROP_VALUE_MAX, err, errlen);
    }
    pthread_mutex_unlock(&dp->lock);
    if (e) {
        free(norm);
        return e;
    }
    set_task_t st = {.prop = prop, .value = norm, .volsize_may_shrink = volsize_may_shrink,
                     .err = err, .errlen = errlen};
    cairn_strlcpy(st.ds, dsname, sizeof(st.ds));
    e = dsl_run_task(dp, task_set, &st);
    free(norm);
    return e;
}

int dsl_prop_set(dsl_pool_t *dp, const char *dsname, const char *prop, const char *value,
                 char *err, size_t errlen)
{
    return prop_set(dp, dsname, prop, value, false, err, errlen);
}

int dsl_volsize_set(dsl_pool_t *dp, const char *dsname, uint64_t volsize, bool shrink, char *err,
                    size_t errlen)
{
    char val[32];
    snprintf(val, sizeof(val), "%" PRIu64, volsize);
    return prop_set(dp, dsname, "volsize", val, shrink, err, errlen);
}

int dsl_prop_inherit(dsl_pool_t *dp, const char *dsname, const char *prop, char *err,
                     size_t errlen)
{
    if (!prop || (!is_user_prop(prop) && !prop_find(prop))) {
        cairn_seterr(err, errlen, "unknown property: %s", prop ? prop : "(null)");
        return -EINVAL;
    }
    const prop_desc_t *d = prop_find(prop);
    if (d && d->kind == PK_STAT) {
        cairn_seterr(err, errlen, "property %s is read-only", prop);
        return -EINVAL;
    }
    if (d && d->createonly) {
        cairn_seterr(err, errlen, "property %s can only be set when the dataset is created", prop);
        return -EINVAL;
    }
    if (d && !strcmp(prop, "volsize")) {
        cairn_seterr(err, errlen, "property volsize cannot be inherited");
        return -EINVAL;
    }
    pthread_mutex_lock(&dp->lock);
    dsl_node_t *n = dsname ? dsl_lookup(dp, dsname) : NULL;
    bool snap = n && n->phys.type == DSL_TYPE_SNAPSHOT;
    pthread_mutex_unlock(&dp->lock);
    if (!n) {
        cairn_seterr(err, errlen, "no such dataset: %s", dsname ? dsname : "(null)");
        return -ENOENT;
    }
    if (snap) {
        cairn_seterr(err, errlen, "property %s cannot be changed on a snapshot", prop);
        return -EINVAL;
    }
    set_task_t st = {.prop = prop, .value = NULL, .err = err, .errlen = errlen};
    cairn_strlcpy(st.ds, dsname, sizeof(st.ds));
    return dsl_run_task(dp, task_set, &st);
}

/* ---------------- for the data path ---------------- */

static int index_of(const char *values, const char *v)
{
    int i = 0;
    const char *p = values;
    size_t l = strlen(v);
    while (p && *p) {
        const char *q = strchr(p, '|');
        size_t pl = q ? (size_t)(q - p) : strlen(p);
        if (pl == l && !strncmp(p, v, l)) return i;
        i++;
        p = q ? q + 1 : NULL;
    }
    return 0;
}

static cairn_compress_t compress_of(const char *v)
{
    if (!strcmp(v, "off")) return CAIRN_COMPRESS_OFF;
    if (!strcmp(v, "on") || !strcmp(v, "lz4")) return CAIRN_COMPRESS_LZ4;
    if (!strcmp(v, "lzjb")) return CAIRN_COMPRESS_LZJB;
    if (!strcmp(v, "zle")) return CAIRN_COMPRESS_ZLE;
    if (!strcmp(v, "gzip")) return CAIRN_COMPRESS_GZIP(6);
    if (!strncmp(v, "gzip-", 5)) return CAIRN_COMPRESS_GZIP(v[5] - '0');
    return CAIRN_COMPRESS_LZ4;
}

static cairn_checksum_t checksum_of(const char *v)
{
    if (!strcmp(v, "xxhash")) return CAIRN_CHECKSUM_XXHASH;
    if (!strcmp(v, "sha256")) return CAIRN_CHECKSUM_SHA256;
    return CAIRN_CHECKSUM_FLETCHER4;
}

/* Looks every property up (caller holds dp->lock): ancestors' local values, names
 * compared. */
static void props_lookup_locked(dsl_dataset_t *ds, dsl_dataset_props_t *out)
{
    CAIRN_ASSERT(cairn_mutex_held(&ds->dp->lock));
    dsl_pool_t *dp = ds->dp;
    dsl_node_t *n = ds->node;
    char v[1024];
    uint64_t num;
    dsl_prop_source_t src;
    memset(out, 0, sizeof(*out));
    bool fs = head_of(n)->phys.type == DSL_TYPE_FILESYSTEM;
    out->recordsize = fs ? (uint32_t)dsl_prop_num(dp, n, "recordsize") : 0;
    out->volblocksize = fs ? 0 : (uint32_t)dsl_prop_num(dp, n, "volblocksize");
    out->volsize = fs ? 0 : dsl_prop_num(dp, n, "volsize");
    dsl_prop_effective(dp, n, "compression", v, sizeof(v), &num, &src, NULL, 0);
    out->compress = compress_of(v);
    dsl_prop_effective(dp, n, "checksum", v, sizeof(v), &num, &src, NULL, 0);
    out->checksum = checksum_of(v);
    out->copies = (uint8_t)dsl_prop_num(dp, n, "copies");
    out->atime = fs && dsl_prop_num(dp, n, "atime");
    out->readonly = n->phys.type == DSL_TYPE_SNAPSHOT || dsl_prop_num(dp, n, "readonly");
    dsl_prop_effective(dp, n, "sync", v, sizeof(v), &num, &src, NULL, 0);
    out->sync = index_of("standard|always|disabled", v);
    dsl_prop_effective(dp, n, "logbias", v, sizeof(v), &num, &src, NULL, 0);
    out->logbias = index_of("latency|throughput", v);
    dsl_prop_effective(dp, n, "primarycache", v, sizeof(v), &num, &src, NULL, 0);
    out->primarycache = index_of("all|metadata|none", v);
    dsl_prop_effective(dp, n, "secondarycache", v, sizeof(v), &num, &src, NULL, 0);
    out->secondarycache = index_of("all|metadata|none", v);
    if (fs) {
        dsl_prop_effective(dp, n, "sharenfs", out->sharenfs, sizeof(out->sharenfs), &num, &src,
                           NULL, 0);
        dsl_prop_effective(dp, n, "mountpoint", out->mountpoint, sizeof(out->mountpoint), &num,
                           &src, NULL, 0);
    } else {
        cairn_strlcpy(out->sharenfs, "off", sizeof(out->sharenfs));
    }
}

/* props_lookup_locked under dp->lock. A thread that must not wait (the NFS I/O
 * thread's memory-only mode) only tries the lock, which a txg sync holds: when
 * it is taken, false, and the refusal makes the caller drop the call and run it
 * on a worker. */
static bool props_lookup(dsl_dataset_t *ds, dsl_dataset_props_t *out)
{
    dsl_pool_t *dp = ds->dp;
    if (spa_memory_only_active()) {
        if (pthread_mutex_trylock(&dp->lock) != 0) {
            spa_memory_only_refuse();
            return false;
        }
    } else {
        pthread_mutex_lock(&dp->lock);
    }
    props_lookup_locked(ds, out);
    pthread_mutex_unlock(&dp->lock);
    return true;
}

/*
 * The data path calls this on every operation, so the answer is kept per hold
 * and looked up again only when dp->props_gen says a task ran since. The
 * generation is read before the lookup: a task running meanwhile bumps it
 * after its change (under dp->lock), so a copy that may miss that change is
 * stored under the older number and looked up again by the next caller.
 */
void dsl_dataset_get_props(dsl_dataset_t *ds, dsl_dataset_props_t *out)
{
    uint64_t gen = atomic_load(&ds->dp->props_gen);
    pthread_rwlock_rdlock(&ds->props_lock);
    bool hit = ds->props.gen == gen;
    if (hit) *out = ds->props;
    pthread_rwlock_unlock(&ds->props_lock);
    if (hit) return;
    if (!props_lookup(ds, out)) {
        /* Refused (memory-only): the stale copy is never used for an answer. */
        pthread_rwlock_rdlock(&ds->props_lock);
        *out = ds->props;
        pthread_rwlock_unlock(&ds->props_lock);
        return;
    }
    out->gen = gen;
    /* ARC: the object set's cache policy follows primarycache/secondarycache
     * (inherited ones too) from here, at the first call after any change. */
    objset_t *os = dsl_dataset_objset(ds);
    if (os) dmu_objset_set_cache_policy(os, ARC_POLICY(out->primarycache, out->secondarycache));
    pthread_rwlock_wrlock(&ds->props_lock);
    if (gen >= ds->props.gen) ds->props = *out;
    pthread_rwlock_unlock(&ds->props_lock);
}
