/*
 * Vdev specifications on the client side: the layout words of `pool create`
 * and `pool add` parsed by the mgmt library (spa_vdev_spec_t) become the
 * request's VdevSpec message, with every leaf made a real path first.
 */
#include "cli.h"

#include <cairn/spa.h>
#include <cairn/util.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

Cairn__Mgmt__VdevSpec *spec_to_msg(const spa_vdev_spec_t *s)
{
    Cairn__Mgmt__VdevSpec *m = cairn_zalloc(sizeof *m);
    cairn__mgmt__vdev_spec__init(m);
    m->type = (Cairn__Mgmt__VdevSpec__Type)s->type;
    m->nparity = s->nparity;
    m->vclass = s->vclass;
    if (s->path) m->path = (char *)s->path;
    m->n_children = s->nchildren;
    if (s->nchildren) {
        m->children = cairn_zalloc(sizeof(*m->children) * s->nchildren);
        for (uint32_t i = 0; i < s->nchildren; i++) m->children[i] = spec_to_msg(&s->children[i]);
    }
    return m;
}

void spec_msg_free(Cairn__Mgmt__VdevSpec *m)
{
    for (size_t i = 0; i < m->n_children; i++) spec_msg_free(m->children[i]);
    free(m->children);
    free(m);
}

/* Replaces every leaf path by its real path, refusing missing files, things that are
 * neither files nor block devices, and one device named twice under two names. */
void resolve_leaves(spa_vdev_spec_t *s, char ***seen, char ***given, size_t *nseen)
{
    if (s->type == VDEV_TYPE_LEAF) {
        /* A test's fault-injecting leaf (include/cairn/vdev.h): "fault:" then the file. */
        size_t pre = strncmp(s->path, CLI_FAULT_PREFIX, strlen(CLI_FAULT_PREFIX)) ? 0
                                                                                   : strlen(CLI_FAULT_PREFIX);
        char buf[PATH_MAX + 16];
        memcpy(buf, s->path, pre);
        if (!realpath(s->path + pre, buf + pre)) fail("cannot open '%s': %s", s->path, strerror(errno));
        struct stat st;
        if (stat(buf + pre, &st)) fail("cannot open '%s': %s", s->path, strerror(errno));
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
            fail("'%s' is not a file or block device", s->path);
        for (size_t i = 0; i < *nseen; i++)
            if (!strcmp((*seen)[i], buf))
                fail("device '%s' is given more than once (also as '%s')", s->path, (*given)[i]);
        *seen = cairn_realloc(*seen, sizeof(char *) * (*nseen + 1));
        *given = cairn_realloc(*given, sizeof(char *) * (*nseen + 1));
        (*seen)[*nseen] = cairn_strdup(buf);
        (*given)[*nseen] = (char *)s->path; /* ownership moves to given[] */
        (*nseen)++;
        s->path = cairn_strdup(buf);
        return;
    }
    for (uint32_t i = 0; i < s->nchildren; i++) resolve_leaves(&s->children[i], seen, given, nseen);
}
