/*
 * cairnd's dataset commands: create, destroy, rename, list, get, set, inherit,
 * snapshot, rollback and clone, each a thin shell over the DSL (dsl.h).
 *
 * The division of labour: the daemon re-checks names (a client is not trusted)
 * and finds the pool a name belongs to; the DSL decides everything else and
 * explains refusals in one line, which we prefix zfs-style ("cannot create
 * 'tank/a': ..."), so the administrator sees the command, the name and the
 * reason. A refused command changes nothing: the DSL validates before it
 * dirties anything, and the few checks that are ours (same pool for clone and
 * rename, the pool's root dataset) come before any DSL call. Destroy and
 * rollback need the dataset unheld, which means suspending its NFS shares
 * (clients hear JUKEBOX meanwhile, shares.c) and, forced, removing LUNs; so
 * destroy, rename and rollback ask the DSL first whether it would refuse
 * (dsl_dataset_destroy_check and friends, holds aside) and touch shares and
 * LUNs only for an operation that goes ahead: concurrent NFS clients never
 * notice a refused command. A rename leaves the shares mounted (they take the
 * new names).
 *
 * These handlers run with the pool table read-locked (cairnd_handle_request),
 * so a pool cannot be exported under them, while the DSL's own locks let
 * commands on different datasets proceed side by side.
 *
 * A volsize change goes through the volume layer (zvol_resize) under the
 * volume's range locks, so an iSCSI LUN on the same volume never writes past
 * its end: a forced shrink frees what lies beyond the new end, a grow frees
 * whatever lay beyond the old one. The property alone never shrinks
 * (dsl_prop_set refuses it).
 *
 * Listing collects the names first and reads the properties afterwards, never
 * calling back into the DSL from inside its iteration callback, so no DSL lock
 * is held across our property reads.
 */
#include "cairnd.h"

#include <cairn/nfs.h>
#include <cairn/zvol.h>

#include <cairn/log.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB "cairnd"
#define ERRLEN 1024

#define ALL_TYPES                                                                              \
    ((1u << DSL_TYPE_FILESYSTEM) | (1u << DSL_TYPE_VOLUME) | (1u << DSL_TYPE_SNAPSHOT))

/* Checks name and finds its pool; on failure fills resp ("cannot VERB 'name': ..."). */
static dsl_pool_t *pool_of(const char *name, unsigned allowed, const char *verb,
                           Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    char err[512];
    if (mgmt_dataset_name_check(name, allowed, err, sizeof err)) {
        cairnd_set_error(resp, a, -EINVAL, "%s", err);
        return NULL;
    }
    char pool[SPA_NAME_MAX + 1];
    mgmt_dataset_pool(name, pool, sizeof pool);
    dsl_pool_t *dp = cairnd_pool_dsl(pool);
    if (!dp) cairnd_set_error(resp, a, -ENOENT, "cannot %s '%s': no such pool '%s'", verb, name, pool);
    return dp;
}

static void dsl_error(Cairn__Mgmt__Response *resp, cairnd_arena_t *a, int rc, const char *what,
                      const char *err)
{
    cairnd_set_error(resp, a, rc, "%s: %s", what, err[0] ? err : strerror(-rc));
}

static bool same_pool(const char *x, const char *y)
{
    char px[SPA_NAME_MAX + 1], py[SPA_NAME_MAX + 1];
    mgmt_dataset_pool(x, px, sizeof px);
    mgmt_dataset_pool(y, py, sizeof py);
    return !strcmp(px, py);
}

static dsl_prop_pair_t *pairs_from(const Cairn__Mgmt__Property *const *props, size_t n,
                                   cairnd_arena_t *a)
{
    dsl_prop_pair_t *p = cairnd_arena_alloc(a, sizeof *p * (n + 1));
    for (size_t i = 0; i < n; i++) {
        p[i].name = props[i]->name;
        p[i].value = props[i]->value;
    }
    return p;
}

/* ---------------------------------------------------------------- property names */

static bool native_prop(const char *name)
{
    for (const char *const *p = dsl_prop_names(); *p; p++)
        if (!strcmp(*p, name)) return true;
    return false;
}

/* What we can answer from dsl_dataset_info_t when the DSL has no such property. */
static bool info_prop(const char *name)
{
    return !strcmp(name, "name") || !strcmp(name, "type") || !strcmp(name, "creation") ||
           !strcmp(name, "guid");
}

static bool known_prop(const char *name)
{
    return native_prop(name) || info_prop(name) || strchr(name, ':') != NULL;
}

/* Refuses prop (not a property we can show) with the DSL's own words when it has some
 * ("property dedup is not implemented yet", "unknown property: x"). */
static void bad_prop(Cairn__Mgmt__Response *resp, cairnd_arena_t *a, dsl_pool_t *dp,
                     const char *dsname, const char *prop)
{
    char err[ERRLEN] = "";
    dsl_prop_t *scratch = cairn_zalloc(sizeof *scratch);
    if (dp && dsname) dsl_prop_get(dp, dsname, prop, scratch, err, sizeof err);
    free(scratch);
    if (err[0] && strstr(err, prop)) cairnd_set_error(resp, a, -EINVAL, "%s", err);
    else cairnd_set_error(resp, a, -EINVAL, "unknown property: %s", prop);
}

/* ---------------------------------------------------------------- create etc. */

static void do_create(const Cairn__Mgmt__DatasetCreate *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_DATASET, "create", resp, a);
    if (!dp) return;
    if (!strchr(m->name, '/')) {
        cairnd_set_error(resp, a, -EEXIST,
                         "cannot create '%s': the pool's root dataset exists with the pool",
                         m->name);
        return;
    }
    dsl_create_opts_t o = {
        .type = m->volume ? DSL_TYPE_VOLUME : DSL_TYPE_FILESYSTEM,
        .volsize = m->volsize,
        .volblocksize = m->volblocksize,
        .sparse = m->sparse,
        .create_parents = m->parents,
        .props = pairs_from((const Cairn__Mgmt__Property *const *)m->props, m->n_props, a),
        .nprops = m->n_props,
    };
    char err[ERRLEN] = "", what[DSL_NAME_MAX + 32];
    int rc = dsl_dataset_create(dp, m->name, &o, err, sizeof err);
    snprintf(what, sizeof what, "cannot create '%s'", m->name);
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "created %s '%s'", m->volume ? "volume" : "filesystem", m->name);
}

static void do_destroy(const Cairn__Mgmt__DatasetDestroy *m, Cairn__Mgmt__Response *resp,
                       cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_ANY, "destroy", resp, a);
    if (!dp) return;
    if (!strpbrk(m->name, "/@")) {
        cairnd_set_error(resp, a, -EINVAL,
                         "cannot destroy '%s': it is the pool's root dataset (use 'cairn pool "
                         "destroy %s')",
                         m->name, m->name);
        return;
    }
    char err[ERRLEN] = "", what[DSL_NAME_MAX + 32];
    snprintf(what, sizeof what, "cannot destroy '%s'", m->name);
    int rc = dsl_dataset_destroy_check(dp, m->name, m->recursive, err, sizeof err);
    if (rc) {
        dsl_error(resp, a, rc, what, err);
        return;
    }
    bool snap = strchr(m->name, '@') != NULL;
    if (!snap && cairnd_iscsi_volume_busy(m->name, m->recursive, m->force, resp, a, "destroy"))
        return;
    /* A snapshot is only held when a client opened it under .cairn/snapshot: try
     * first, and take its filesystem's share down only when the snapshot is busy. */
    rc = snap && !m->recursive ? dsl_dataset_destroy(dp, m->name, false, m->force, err, sizeof err)
                               : -EBUSY;
    if (rc == -EBUSY) {
        cairnd_shares_suspend(m->name);
        err[0] = '\0';
        rc = dsl_dataset_destroy(dp, m->name, m->recursive, m->force, err, sizeof err);
        cairnd_shares_resume(m->name, !rc && !snap);
    }
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "destroyed '%s'%s", m->name, m->recursive ? " and its descendants" : "");
}

static void do_rename(const Cairn__Mgmt__DatasetRename *m, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->old_name, MGMT_DSNAME_ANY, "rename", resp, a);
    if (!dp) return;
    bool snap = strchr(m->old_name, '@') != NULL;
    char err[ERRLEN] = "";
    if (mgmt_dataset_name_check(m->new_name, snap ? MGMT_DSNAME_SNAPSHOT : MGMT_DSNAME_DATASET,
                                err, sizeof err)) {
        cairnd_set_error(resp, a, -EINVAL, "cannot rename '%s': %s", m->old_name, err);
        return;
    }
    if (!strpbrk(m->old_name, "/@") || !strpbrk(m->new_name, "/@")) {
        cairnd_set_error(resp, a, -EINVAL,
                         "cannot rename '%s' to '%s': a pool's root dataset keeps the pool's name",
                         m->old_name, m->new_name);
        return;
    }
    if (!same_pool(m->old_name, m->new_name)) {
        cairnd_set_error(resp, a, -EXDEV, "cannot rename '%s' to '%s': datasets cannot move "
                                          "between pools", m->old_name, m->new_name);
        return;
    }
    if (snap) {
        size_t n = (size_t)(strchr(m->old_name, '@') - m->old_name);
        if (strncmp(m->old_name, m->new_name, n + 1)) {
            cairnd_set_error(resp, a, -EINVAL,
                             "cannot rename '%s' to '%s': a snapshot keeps its dataset",
                             m->old_name, m->new_name);
            return;
        }
    }
    char what[2 * DSL_NAME_MAX + 32];
    snprintf(what, sizeof what, "cannot rename '%s' to '%s'", m->old_name, m->new_name);
    int rc = dsl_dataset_rename_check(dp, m->old_name, m->new_name, err, sizeof err);
    if (rc) {
        dsl_error(resp, a, rc, what, err);
        return;
    }
    if (!snap && cairnd_iscsi_volume_busy(m->old_name, true, false, resp, a, "rename")) return;
    /* The DSL renames held datasets: the shares stay mounted and take the new names
     * (a new inherited mountpoint then moves them in the refresh). A snapshot's new
     * name is found under .cairn/snapshot of the mounted share. */
    rc = dsl_dataset_rename(dp, m->old_name, m->new_name, err, sizeof err);
    if (!rc && !snap) cairnd_shares_renamed(m->old_name, m->new_name);
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "renamed '%s' to '%s'", m->old_name, m->new_name);
}

static void do_snapshot(const Cairn__Mgmt__DatasetSnapshot *m, Cairn__Mgmt__Response *resp,
                        cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_SNAPSHOT, "create snapshot", resp, a);
    if (!dp) return;
    char err[ERRLEN] = "", what[DSL_NAME_MAX + 40];
    int rc = dsl_snapshot(dp, m->name, m->recursive, err, sizeof err);
    snprintf(what, sizeof what, "cannot create snapshot '%s'", m->name);
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "snapshot '%s'%s", m->name, m->recursive ? " (recursive)" : "");
}

static void do_rollback(const Cairn__Mgmt__DatasetRollback *m, Cairn__Mgmt__Response *resp,
                        cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_SNAPSHOT, "rollback to", resp, a);
    if (!dp) return;
    char err[ERRLEN] = "", what[DSL_NAME_MAX + 40];
    snprintf(what, sizeof what, "cannot rollback to '%s'", m->name);
    int rc = dsl_rollback_check(dp, m->name, m->destroy_newer, err, sizeof err);
    if (rc) {
        dsl_error(resp, a, rc, what, err);
        return;
    }
    /* A LUN's initiators would see their disk change under them: name the LUN. */
    char head[DSL_NAME_MAX + 1];
    cairn_strlcpy(head, m->name, sizeof head);
    head[strcspn(head, "@")] = '\0';
    if (cairnd_iscsi_volume_busy(head, false, false, resp, a, "roll back")) return;
    cairnd_shares_suspend(m->name);
    rc = dsl_rollback(dp, m->name, m->destroy_newer, err, sizeof err);
    cairnd_shares_resume(m->name, false);
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "rolled back to '%s'", m->name);
}

static void do_clone(const Cairn__Mgmt__DatasetClone *m, Cairn__Mgmt__Response *resp,
                     cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->snapshot, MGMT_DSNAME_SNAPSHOT, "clone", resp, a);
    if (!dp) return;
    char err[ERRLEN] = "";
    if (mgmt_dataset_name_check(m->name, MGMT_DSNAME_DATASET, err, sizeof err)) {
        cairnd_set_error(resp, a, -EINVAL, "%s", err);
        return;
    }
    if (!same_pool(m->snapshot, m->name)) {
        cairnd_set_error(resp, a, -EXDEV,
                         "cannot create '%s': a clone must be in the same pool as '%s'", m->name,
                         m->snapshot);
        return;
    }
    if (!strchr(m->name, '/')) {
        cairnd_set_error(resp, a, -EEXIST, "cannot create '%s': it is the pool's root dataset",
                         m->name);
        return;
    }
    int rc = dsl_clone(dp, m->snapshot, m->name,
                       pairs_from((const Cairn__Mgmt__Property *const *)m->props, m->n_props, a),
                       m->n_props, err, sizeof err);
    char what[DSL_NAME_MAX + 32];
    snprintf(what, sizeof what, "cannot create '%s'", m->name);
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "cloned '%s' as '%s'", m->snapshot, m->name);
}

static void do_set(const Cairn__Mgmt__DatasetSet *m, Cairn__Mgmt__Response *resp,
                   cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_ANY, "set property for", resp, a);
    if (!dp) return;
    char err[ERRLEN] = "", what[DSL_NAME_MAX + 40];
    bool volsize = !strcmp(m->prop, "volsize");
    int rc;
    uint64_t size;
    zvol_t *zv = NULL;
    /* Anything but an open volume and a size (a filesystem, a snapshot, a bad
     * value) falls through to the DSL, which says what is wrong. */
    if (volsize && cairn_parse_size(m->value, &size) == 0 && zvol_open(dp, m->name, &zv) == 0) {
        rc = zvol_resize(zv, size, m->force, err, sizeof err);
        zvol_close(zv);
    } else {
        rc = dsl_prop_set(dp, m->name, m->prop, m->value, err, sizeof err);
    }
    snprintf(what, sizeof what, "cannot set property for '%s'", m->name);
    if (rc == -EPERM && volsize)
        cairnd_set_error(resp, a, rc,
                         "%s: shrinking a volume destroys the data beyond its new end; "
                         "use 'cairn set -f volsize=%s %s'",
                         what, m->value, m->name);
    else if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "set %s=%s on '%s'", m->prop, m->value, m->name);
    if (!rc && !strcmp(m->prop, "volsize")) cairnd_iscsi_volsize_changed(m->name);
}

static void do_inherit(const Cairn__Mgmt__DatasetInherit *m, Cairn__Mgmt__Response *resp,
                       cairnd_arena_t *a)
{
    dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_ANY, "inherit", resp, a);
    if (!dp) return;
    char err[ERRLEN] = "", what[DSL_NAME_MAX + 300];
    int rc = dsl_prop_inherit(dp, m->name, m->prop, err, sizeof err);
    snprintf(what, sizeof what, "cannot inherit '%s' for '%s'", m->prop, m->name);
    if (rc) dsl_error(resp, a, rc, what, err);
    else log_info(SUB, "inherit %s on '%s'", m->prop, m->name);
}

/* ---------------------------------------------------------------- list and get */

typedef struct info_vec {
    dsl_dataset_info_t *v;
    size_t n, cap;
} info_vec_t;

static void collect_info(const dsl_dataset_info_t *info, void *arg)
{
    info_vec_t *iv = arg;
    if (iv->n == iv->cap) {
        iv->cap = iv->cap ? iv->cap * 2 : 16;
        iv->v = cairn_realloc(iv->v, sizeof *iv->v * iv->cap);
    }
    iv->v[iv->n++] = *info;
}

/* One property of one dataset as a message. A property the dataset does not have
 * (volsize of a filesystem, an unset user property) reads as "-". */
static Cairn__Mgmt__Property *prop_msg(cairnd_arena_t *a, const char *target,
                                       const char *name, const dsl_prop_t *p, bool have)
{
    Cairn__Mgmt__Property *m = cairnd_arena_alloc(a, sizeof *m);
    cairn__mgmt__property__init(m);
    m->target = cairnd_arena_strdup(a, target);
    m->name = cairnd_arena_strdup(a, name);
    if (!have) {
        m->value = cairnd_arena_strdup(a, "-");
        m->source = cairnd_arena_strdup(a, "-");
        return m;
    }
    char src[DSL_NAME_MAX + 32];
    mgmt_format_source(p->source, p->inherited_from, src, sizeof src);
    m->value = cairnd_arena_strdup(a, p->value[0] ? p->value : "-");
    m->source = cairnd_arena_strdup(a, src);
    m->numeric = p->numeric;
    m->is_numeric = p->is_numeric;
    return m;
}

/* Reads name's property prop into a message; info answers what the DSL does not. */
static Cairn__Mgmt__Property *read_prop(dsl_pool_t *dp, cairnd_arena_t *a,
                                        const dsl_dataset_info_t *info, const char *prop,
                                        dsl_prop_t *scratch)
{
    char err[ERRLEN];
    memset(scratch, 0, sizeof *scratch);
    if (strcmp(prop, "name") && dsl_prop_get(dp, info->name, prop, scratch, err, sizeof err) == 0)
        return prop_msg(a, info->name, prop, scratch, true);
    /* Identity properties straight from the listing. */
    memset(scratch, 0, sizeof *scratch);
    scratch->source = DSL_SRC_NONE;
    if (!strcmp(prop, "name")) {
        cairn_strlcpy(scratch->value, info->name, sizeof scratch->value);
    } else if (!strcmp(prop, "type")) {
        cairn_strlcpy(scratch->value, mgmt_type_name(info->type), sizeof scratch->value);
    } else if (!strcmp(prop, "creation") || !strcmp(prop, "guid")) {
        scratch->numeric = !strcmp(prop, "guid") ? info->guid : info->creation_time;
        scratch->is_numeric = true;
        snprintf(scratch->value, sizeof scratch->value, "%llu",
                 (unsigned long long)scratch->numeric);
    } else {
        return prop_msg(a, info->name, prop, scratch, false);
    }
    return prop_msg(a, info->name, prop, scratch, true);
}

/* The dataset (or snapshot) `name` itself, through the listing (so it exists). */
static int lookup_info(dsl_pool_t *dp, const char *name, bool recursive, unsigned types,
                       info_vec_t *iv, char *err, size_t errlen)
{
    size_t before = iv->n;
    int rc = dsl_dataset_list(dp, name, recursive, types, collect_info, iv, err, errlen);
    if (rc) return rc;
    if (iv->n == before && !recursive) {
        snprintf(err, errlen, "dataset does not exist");
        return -ENOENT;
    }
    return 0;
}

static void do_list(const Cairn__Mgmt__DatasetList *m, Cairn__Mgmt__Response *resp,
                    cairnd_arena_t *a)
{
    unsigned types = m->types ? m->types : MGMT_TYPES_DEFAULT;
    for (size_t i = 0; i < m->n_props; i++)
        if (!known_prop(m->props[i])) {
            /* Ask the DSL about it on some dataset, for its exact words. */
            char pool[SPA_NAME_MAX + 1];
            mgmt_dataset_pool(m->name, pool, sizeof pool);
            dsl_pool_t *dp = m->name[0] ? cairnd_pool_dsl(pool) : NULL;
            if (!m->name[0] && cairnd_pool_dsls(&dp, 1) == 0) dp = NULL;
            bad_prop(resp, a, dp, dp ? spa_name(dsl_pool_spa(dp)) : NULL, m->props[i]);
            return;
        }
    info_vec_t iv = {0};
    char err[ERRLEN] = "";
    if (m->name[0]) {
        dsl_pool_t *dp = pool_of(m->name, MGMT_DSNAME_ANY, "open", resp, a);
        if (!dp) return;
        /* zfs habit: `list -t snapshot FS` means FS's snapshots, so the dataset itself
         * is looked up with every type and filtered afterwards. */
        int rc = lookup_info(dp, m->name, m->recursive, ALL_TYPES, &iv, err, sizeof err);
        if (rc) {
            char what[DSL_NAME_MAX + 32];
            snprintf(what, sizeof what, "cannot open '%s'", m->name);
            dsl_error(resp, a, rc, what, err);
            free(iv.v);
            return;
        }
        if (!m->recursive && types == (1u << DSL_TYPE_SNAPSHOT) &&
            iv.n == 1 && iv.v[0].type != DSL_TYPE_SNAPSHOT) {
            iv.n = 0;
            rc = dsl_dataset_list(dp, m->name, true, 1u << DSL_TYPE_SNAPSHOT, collect_info, &iv,
                                  err, sizeof err);
            /* Only its own snapshots, not its descendants'. */
            size_t k = 0, len = strlen(m->name);
            for (size_t i = 0; i < iv.n; i++)
                if (!strncmp(iv.v[i].name, m->name, len) && iv.v[i].name[len] == '@')
                    iv.v[k++] = iv.v[i];
            iv.n = k;
        }
    } else {
        size_t n = cairnd_pool_dsls(NULL, 0);
        dsl_pool_t **dps = cairnd_arena_alloc(a, sizeof *dps * (n + 1));
        cairnd_pool_dsls(dps, n);
        for (size_t i = 0; i < n; i++) {
            int rc = dsl_dataset_list(dps[i], NULL, true, types, collect_info, &iv, err,
                                      sizeof err);
            if (rc) log_warn(SUB, "listing datasets: %s", err[0] ? err : strerror(-rc));
        }
    }
    Cairn__Mgmt__DatasetRows *rows = cairnd_arena_alloc(a, sizeof *rows);
    cairn__mgmt__dataset_rows__init(rows);
    rows->rows = cairnd_arena_alloc(a, sizeof *rows->rows * (iv.n + 1));
    dsl_prop_t *scratch = cairn_zalloc(sizeof *scratch);
    dsl_pool_t *dp = NULL;
    char curpool[SPA_NAME_MAX + 1] = "";
    for (size_t i = 0; i < iv.n; i++) {
        const dsl_dataset_info_t *info = &iv.v[i];
        if (!(types & (1u << info->type))) continue;
        char pool[SPA_NAME_MAX + 1];
        mgmt_dataset_pool(info->name, pool, sizeof pool);
        if (strcmp(pool, curpool)) {
            dp = cairnd_pool_dsl(pool);
            cairn_strlcpy(curpool, pool, sizeof curpool);
        }
        if (!dp) continue;
        Cairn__Mgmt__DatasetRow *r = cairnd_arena_alloc(a, sizeof *r);
        cairn__mgmt__dataset_row__init(r);
        r->name = cairnd_arena_strdup(a, info->name);
        r->type = cairnd_arena_strdup(a, mgmt_type_name(info->type));
        r->props = cairnd_arena_alloc(a, sizeof *r->props * (m->n_props + 1));
        for (size_t j = 0; j < m->n_props; j++)
            r->props[r->n_props++] = read_prop(dp, a, info, m->props[j], scratch);
        rows->rows[rows->n_rows++] = r;
    }
    free(scratch);
    free(iv.v);
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_DATASETS;
    resp->datasets = rows;
}

typedef struct all_props {
    cairnd_arena_t *a;
    const char *target;
    Cairn__Mgmt__Property **v;
    size_t n, cap;
} all_props_t;

static void push_prop(all_props_t *ap, Cairn__Mgmt__Property *p)
{
    if (ap->n == ap->cap) {
        ap->cap = ap->cap ? ap->cap * 2 : 64;
        Cairn__Mgmt__Property **nv = cairnd_arena_alloc(ap->a, sizeof *nv * ap->cap);
        if (ap->n) memcpy(nv, ap->v, sizeof *nv * ap->n);
        ap->v = nv;
    }
    ap->v[ap->n++] = p;
}

static void collect_all(const dsl_prop_t *p, void *arg)
{
    all_props_t *ap = arg;
    push_prop(ap, prop_msg(ap->a, ap->target, p->name, p, true));
}

static void do_get(const Cairn__Mgmt__DatasetGet *m, Cairn__Mgmt__Response *resp,
                   cairnd_arena_t *a)
{
    bool all = false;
    for (size_t i = 0; i < m->n_props; i++) {
        if (!strcmp(m->props[i], "all")) all = true;
        else if (!known_prop(m->props[i])) {
            char pool[SPA_NAME_MAX + 1] = "";
            if (m->n_names) mgmt_dataset_pool(m->names[0], pool, sizeof pool);
            bad_prop(resp, a, pool[0] ? cairnd_pool_dsl(pool) : NULL,
                     m->n_names ? m->names[0] : NULL, m->props[i]);
            return;
        }
    }
    if (m->n_props == 0) all = true;
    if (m->n_names == 0) {
        cairnd_set_error(resp, a, -EINVAL, "get: missing dataset name");
        return;
    }
    info_vec_t iv = {0};
    char err[ERRLEN] = "";
    for (size_t i = 0; i < m->n_names; i++) {
        dsl_pool_t *dp = pool_of(m->names[i], MGMT_DSNAME_ANY, "open", resp, a);
        if (!dp) {
            free(iv.v);
            return;
        }
        int rc = lookup_info(dp, m->names[i], m->recursive, ALL_TYPES, &iv, err, sizeof err);
        if (rc) {
            char what[DSL_NAME_MAX + 32];
            snprintf(what, sizeof what, "cannot open '%s'", m->names[i]);
            dsl_error(resp, a, rc, what, err);
            free(iv.v);
            return;
        }
    }
    all_props_t ap = {.a = a};
    dsl_prop_t *scratch = cairn_zalloc(sizeof *scratch);
    for (size_t i = 0; i < iv.n; i++) {
        char pool[SPA_NAME_MAX + 1];
        mgmt_dataset_pool(iv.v[i].name, pool, sizeof pool);
        dsl_pool_t *dp = cairnd_pool_dsl(pool);
        if (!dp) continue;
        if (all) {
            ap.target = iv.v[i].name;
            size_t before = ap.n;
            /* name and type lead, as zfs shows them, unless the DSL lists them itself. */
            int rc = dsl_prop_get_all(dp, iv.v[i].name, collect_all, &ap, err, sizeof err);
            if (rc) {
                char what[DSL_NAME_MAX + 32];
                snprintf(what, sizeof what, "cannot get properties of '%s'", iv.v[i].name);
                dsl_error(resp, a, rc, what, err);
                free(scratch);
                free(iv.v);
                return;
            }
            bool has_type = false;
            for (size_t k = before; k < ap.n; k++)
                if (!strcmp(ap.v[k]->name, "type")) has_type = true;
            if (!has_type) {
                push_prop(&ap, read_prop(dp, a, &iv.v[i], "type", scratch));
                /* move it to the front of this dataset's block */
                Cairn__Mgmt__Property *t = ap.v[ap.n - 1];
                memmove(&ap.v[before + 1], &ap.v[before], sizeof *ap.v * (ap.n - 1 - before));
                ap.v[before] = t;
            }
        }
        for (size_t j = 0; j < m->n_props; j++) {
            if (!strcmp(m->props[j], "all")) continue;
            push_prop(&ap, read_prop(dp, a, &iv.v[i], m->props[j], scratch));
        }
    }
    free(scratch);
    free(iv.v);
    Cairn__Mgmt__PropertyList *pl = cairnd_arena_alloc(a, sizeof *pl);
    cairn__mgmt__property_list__init(pl);
    pl->props = ap.v;
    pl->n_props = ap.n;
    resp->result_case = CAIRN__MGMT__RESPONSE__RESULT_PROPS;
    resp->props = pl;
}

/* ---------------------------------------------------------------- dispatch */

static bool handle_dataset(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a);

/* Exports the filesystem name just made, if its sharenfs asks for it. One that
 * should be shared and cannot be (its path is another share's, it cannot be
 * mounted) is destroyed again and the command fails: `create -o sharenfs=on`
 * that answers success must mean clients can mount it. */
static void share_new(const char *name, const char *verb, Cairn__Mgmt__Response *resp,
                      cairnd_arena_t *a)
{
    char why[ERRLEN] = "";
    int rc = cairnd_shares_refresh_report(name, why, sizeof why);
    if (!rc) return;
    char pool[SPA_NAME_MAX + 1], err[ERRLEN] = "";
    mgmt_dataset_pool(name, pool, sizeof pool);
    dsl_pool_t *dp = cairnd_pool_dsl(pool);
    int drc = dp ? dsl_dataset_destroy(dp, name, false, false, err, sizeof err) : -ENOENT;
    if (drc) {
        log_error(SUB, "'%s' cannot be shared and stays unshared: destroying it failed: %s", name,
                  err[0] ? err : strerror(-drc));
        cairnd_set_error(resp, a, rc,
                         "'%s' was created but cannot be shared over NFS (%s), and removing it "
                         "failed (%s): it exists, unshared",
                         name, why, err[0] ? err : strerror(-drc));
        return;
    }
    log_info(SUB, "destroyed '%s' again: it cannot be shared: %s", name, why);
    cairnd_set_error(resp, a, rc, "cannot %s '%s': cannot share it over NFS: %s", verb, name, why);
}

/* A set of sharenfs or mountpoint that leaves the dataset wanting a share it
 * cannot have (its path is another share's, it cannot be mounted) is taken
 * back and the command fails, as a create does: success must mean clients can
 * mount it. old/old_local: the property before the set. */
static void share_set(const Cairn__Mgmt__DatasetSet *m, const char *old, bool old_local,
                      Cairn__Mgmt__Response *resp, cairnd_arena_t *a)
{
    char why[ERRLEN] = "";
    int rc = cairnd_shares_refresh_report(m->name, why, sizeof why);
    if (!rc) return;
    char pool[SPA_NAME_MAX + 1], err[ERRLEN] = "";
    mgmt_dataset_pool(m->name, pool, sizeof pool);
    dsl_pool_t *dp = cairnd_pool_dsl(pool);
    int back = !dp ? -ENOENT
               : old_local ? dsl_prop_set(dp, m->name, m->prop, old, err, sizeof err)
                           : dsl_prop_inherit(dp, m->name, m->prop, err, sizeof err);
    cairnd_shares_refresh();
    if (back) {
        cairnd_set_error(resp, a, rc,
                         "cannot set property for '%s': cannot share it over NFS (%s), and "
                         "restoring %s failed (%s)",
                         m->name, why, m->prop, err[0] ? err : strerror(-back));
        return;
    }
    log_info(SUB, "set %s=%s on '%s' taken back: cannot share it: %s", m->prop, m->value,
             m->name, why);
    cairnd_set_error(resp, a, rc, "cannot set property for '%s': cannot share it over NFS: %s",
                     m->name, why);
}

/* Shares follow the datasets: the exports are brought up to date after every
 * change. Destroy and rollback suspend the dataset's shares themselves (rename
 * renames them) - only after the DSL's check (dsl_*_check) and ours have passed:
 * a refused command never touches what clients see. */
bool cairnd_handle_dataset(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a)
{
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_DS_SET && !strcmp(req->ds_set->prop, "sharenfs")) {
        char err[ERRLEN] = "";
        if (nfs_sharenfs_check_names(req->ds_set->value, NULL, err, sizeof err)) {
            cairnd_set_error(resp, a, -EINVAL, "cannot set property for '%s': %s", req->ds_set->name, err);
            return true;
        }
    }
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_DS_CREATE) {
        for (size_t i = 0; i < req->ds_create->n_props; i++) {
            char err[ERRLEN] = "";
            const Cairn__Mgmt__Property *p = req->ds_create->props[i];
            if (!strcmp(p->name, "sharenfs") && nfs_sharenfs_check_names(p->value, NULL, err, sizeof err)) {
                cairnd_set_error(resp, a, -EINVAL, "cannot create '%s': %s", req->ds_create->name, err);
                return true;
            }
        }
    }
    /* What a share-changing set replaces, to take it back (share_set). */
    char old[DSL_PROP_VALUE_MAX] = "";
    bool old_local = false, share_prop = false;
    if (req->cmd_case == CAIRN__MGMT__REQUEST__CMD_DS_SET &&
        (!strcmp(req->ds_set->prop, "sharenfs") || !strcmp(req->ds_set->prop, "mountpoint"))) {
        char pool[SPA_NAME_MAX + 1], err[ERRLEN];
        mgmt_dataset_pool(req->ds_set->name, pool, sizeof pool);
        dsl_pool_t *dp = cairnd_pool_dsl(pool);
        dsl_prop_t *p = cairnd_arena_alloc(a, sizeof *p);
        if (dp && dsl_prop_get(dp, req->ds_set->name, req->ds_set->prop, p, err, sizeof err) == 0) {
            share_prop = true;
            old_local = p->source == DSL_SRC_LOCAL;
            cairn_strlcpy(old, p->value, sizeof old);
        }
    }
    bool handled = handle_dataset(req, resp, a);
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_DS_LIST:
    case CAIRN__MGMT__REQUEST__CMD_DS_GET:
    case CAIRN__MGMT__REQUEST__CMD_DS_SNAPSHOT: break;
    case CAIRN__MGMT__REQUEST__CMD_DS_CREATE:
        if (!resp->error && !req->ds_create->volume) {
            share_new(req->ds_create->name, "create", resp, a);
            break;
        }
        cairnd_shares_refresh();
        break;
    case CAIRN__MGMT__REQUEST__CMD_DS_CLONE:
        if (!resp->error) {
            share_new(req->ds_clone->name, "create", resp, a);
            break;
        }
        cairnd_shares_refresh();
        break;
    case CAIRN__MGMT__REQUEST__CMD_DS_SET:
        if (!resp->error && share_prop) {
            share_set(req->ds_set, old, old_local, resp, a);
            break;
        }
        cairnd_shares_refresh();
        break;
    default:
        if (handled) cairnd_shares_refresh();
    }
    return handled;
}

static bool handle_dataset(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *a)
{
    switch (req->cmd_case) {
    case CAIRN__MGMT__REQUEST__CMD_DS_CREATE: do_create(req->ds_create, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_DESTROY: do_destroy(req->ds_destroy, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_RENAME: do_rename(req->ds_rename, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_LIST: do_list(req->ds_list, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_GET: do_get(req->ds_get, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_SET: do_set(req->ds_set, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_INHERIT: do_inherit(req->ds_inherit, resp, a); return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_SNAPSHOT:
        do_snapshot(req->ds_snapshot, resp, a);
        return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_ROLLBACK:
        do_rollback(req->ds_rollback, resp, a);
        return true;
    case CAIRN__MGMT__REQUEST__CMD_DS_CLONE: do_clone(req->ds_clone, resp, a); return true;
    default: return false;
    }
}
