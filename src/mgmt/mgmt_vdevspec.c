/*
 * The zpool vdev grammar: the words after the pool name in `pool create`.
 *
 *   VDEV     := PATH | mirror PATH PATH... | raidz[1|2|3] PATH...
 *   sections := log VDEV... | cache PATH... | spare PATH...
 *   (cache and spare are taken out of the words before: mgmt_cachespec.c)
 *
 * A keyword starts a new top-level vdev and every path that follows belongs to
 * it until the next keyword; a path outside any group is a top-level vdev of
 * its own. A word that is neither a keyword nor plausibly a path (no '/' and
 * no such file in the current directory) is reported as an unknown vdev type:
 * "raidz4" or "mirorr" should not turn into "cannot open raidz4".
 *
 * raidzP asks for at least P+2 devices: with P+1 every stripe is one data
 * column plus parity, i.e. a mirror with extra work, which is nearly always a
 * typo for a wider group.
 *
 * The parser checks only what the words say. Whether the paths exist and are
 * distinct after resolving links is the CLI's cheap pre-check (it resolves them
 * before calling us, so a duplicate here is a duplicate by real path), and
 * whether the devices are big enough and unused is spa_create()'s to decide.
 */
#include <cairn/mgmt.h>
#include <cairn/spa.h>
#include <cairn/util.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_section(const char *w)
{
    return !strcmp(w, "log") || !strcmp(w, "cache") || !strcmp(w, "spare") ||
           !strcmp(w, "special") || !strcmp(w, "dedup");
}

/* 0: not a group keyword; else fills type/nparity. */
static bool group_keyword(const char *w, vdev_type_t *type, uint32_t *nparity)
{
    if (!strcmp(w, "mirror")) {
        *type = VDEV_TYPE_MIRROR;
        *nparity = 0;
        return true;
    }
    if (!strcmp(w, "raidz") || !strcmp(w, "raidz1")) *nparity = 1;
    else if (!strcmp(w, "raidz2")) *nparity = 2;
    else if (!strcmp(w, "raidz3")) *nparity = 3;
    else return false;
    *type = VDEV_TYPE_RAIDZ;
    return true;
}

static bool looks_like_path(const char *w)
{
    return strchr(w, '/') != NULL || access(w, F_OK) == 0;
}

void mgmt_vdev_spec_free(spa_vdev_spec_t *root)
{
    if (!root) return;
    for (uint32_t i = 0; i < root->nchildren; i++) {
        spa_vdev_spec_t *top = &root->children[i];
        for (uint32_t j = 0; j < top->nchildren; j++) free((char *)top->children[j].path);
        free(top->children);
        free((char *)top->path);
    }
    free(root->children);
    free(root);
}

static spa_vdev_spec_t *add_child(spa_vdev_spec_t *parent)
{
    parent->children =
        cairn_realloc(parent->children, sizeof(*parent->children) * (parent->nchildren + 1));
    spa_vdev_spec_t *c = &parent->children[parent->nchildren++];
    memset(c, 0, sizeof *c);
    return c;
}

static int check_group(const spa_vdev_spec_t *g, char *err, size_t errlen)
{
    if (g->type == VDEV_TYPE_MIRROR && g->nchildren < 2) {
        snprintf(err, errlen, "mirror needs at least 2 devices, got %u", g->nchildren);
        return -EINVAL;
    }
    if (g->type == VDEV_TYPE_RAIDZ && g->nchildren < g->nparity + 2) {
        snprintf(err, errlen, "raidz%u needs at least %u devices (parity + 2), got %u",
                 g->nparity, g->nparity + 2, g->nchildren);
        return -EINVAL;
    }
    if (g->nchildren > VDEV_MAX_CHILDREN) {
        snprintf(err, errlen, "too many devices in one group (at most %d)", VDEV_MAX_CHILDREN);
        return -EINVAL;
    }
    return 0;
}

int mgmt_vdev_spec_parse(int argc, char *const argv[], spa_vdev_spec_t **rootp, char *err,
                         size_t errlen)
{
    *rootp = NULL;
    if (argc <= 0) {
        snprintf(err, errlen, "no vdevs given");
        return -EINVAL;
    }
    spa_vdev_spec_t *root = cairn_zalloc(sizeof *root);
    root->type = VDEV_TYPE_ROOT;
    spa_vdev_spec_t *group = NULL; /* the mirror/raidz being filled, if any */
    uint32_t vclass = VDEV_CLASS_NORMAL; /* the section: top-level vdevs after "log" are log */
    uint32_t in_section = 0;             /* top-level vdevs in the current log section */
    int rc = 0;
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *w = argv[i];
        vdev_type_t type;
        uint32_t np;
        if (!*w) {
            snprintf(err, errlen, "empty device name");
            rc = -EINVAL;
        } else if (!strcmp(w, "log") && vclass == VDEV_CLASS_LOG) {
            snprintf(err, errlen, "'log' given twice");
            rc = -EINVAL;
        } else if (!strcmp(w, "log")) {
            if (group) rc = check_group(group, err, errlen);
            group = NULL;
            vclass = VDEV_CLASS_LOG;
            in_section = 0;
        } else if (is_section(w) && !strchr(w, '/')) {
            snprintf(err, errlen, "'%s' vdevs are not supported yet", w);
            rc = -ENOTSUP;
        } else if (group_keyword(w, &type, &np) && !strchr(w, '/')) {
            if (group) rc = check_group(group, err, errlen);
            if (rc == 0 && vclass == VDEV_CLASS_LOG && type == VDEV_TYPE_RAIDZ) {
                snprintf(err, errlen, "a log vdev is a device or a mirror, not %s", w);
                rc = -EINVAL;
            }
            if (rc == 0) {
                group = add_child(root);
                group->type = type;
                group->nparity = np;
                group->vclass = vclass;
                in_section++;
            }
        } else if (!looks_like_path(w)) {
            snprintf(err, errlen,
                     "unknown vdev type or missing device '%s' (types: mirror, raidz1, "
                     "raidz2, raidz3)",
                     w);
            rc = -EINVAL;
        } else {
            for (int j = 0; j < i; j++)
                if (!strcmp(argv[j], w)) {
                    snprintf(err, errlen, "device '%s' is given more than once", w);
                    rc = -EINVAL;
                }
            if (rc) break;
            if (strlen(w) >= MGMT_PATH_MAX || strchr(w, '\n')) {
                snprintf(err, errlen, "bad device path '%.64s'", w);
                rc = -EINVAL;
                break;
            }
            spa_vdev_spec_t *leaf;
            if (group) {
                leaf = add_child(group);
            } else {
                leaf = add_child(root);
                leaf->vclass = vclass;
                in_section++;
            }
            leaf->type = VDEV_TYPE_LEAF;
            leaf->path = cairn_strdup(w);
        }
    }
    if (rc == 0 && group) rc = check_group(group, err, errlen);
    if (rc == 0 && vclass == VDEV_CLASS_LOG && !in_section) {
        snprintf(err, errlen, "'log' must be followed by a device or a mirror");
        rc = -EINVAL;
    }
    if (rc == 0 && root->nchildren > VDEV_MAX_CHILDREN) {
        snprintf(err, errlen, "too many top-level vdevs (at most %d)", VDEV_MAX_CHILDREN);
        rc = -EINVAL;
    }
    if (rc) {
        mgmt_vdev_spec_free(root);
        return rc;
    }
    *rootp = root;
    return 0;
}

static size_t collect(const spa_vdev_spec_t *s, const char **paths, size_t cap, size_t n)
{
    if (s->type == VDEV_TYPE_LEAF) {
        if (n < cap) paths[n] = s->path;
        return n + 1;
    }
    for (uint32_t i = 0; i < s->nchildren; i++) n = collect(&s->children[i], paths, cap, n);
    return n;
}

size_t mgmt_vdev_spec_leaves(const spa_vdev_spec_t *spec, const char **paths, size_t cap)
{
    return collect(spec, paths, cap, 0);
}

int mgmt_pool_name_check(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (n == 0) {
        snprintf(err, errlen, "missing pool name");
        return -EINVAL;
    }
    if (n >= SPA_NAME_MAX) {
        snprintf(err, errlen, "pool name too long (at most %d characters)", SPA_NAME_MAX - 1);
        return -EINVAL;
    }
    if (!isalpha((unsigned char)name[0])) {
        snprintf(err, errlen, "invalid pool name '%s': must begin with a letter", name);
        return -EINVAL;
    }
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_-.:", *p)) {
            snprintf(err, errlen, "invalid pool name '%s': character '%c' not allowed", name,
                     *p);
            return -EINVAL;
        }
    vdev_type_t t;
    uint32_t np;
    if (group_keyword(name, &t, &np) || is_section(name) || !strncmp(name, "mirror", 6) ||
        !strncmp(name, "raidz", 5)) {
        snprintf(err, errlen, "invalid pool name '%s': reserved word", name);
        return -EINVAL;
    }
    return 0;
}
