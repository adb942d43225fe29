/*
 * The `cache DEV...` section of `pool create` (L2ARC devices), and the same
 * split for `spare DEV...` (hot spares, kept by the pool outside its tree).
 *
 * Cache devices are not part of the pool's vdev tree: they hold only copies of
 * blocks, verified on every read, and the pool works without them. So the
 * section is taken out of the word list before the vdev grammar
 * (mgmt_vdevspec.c) sees the rest, and travels to the daemon as a plain list.
 * The section runs from `cache` to the next section keyword or the end.
 */
#include <cairn/mgmt.h>
#include <cairn/util.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_section(const char *w)
{
    return !strcmp(w, "log") || !strcmp(w, "spare") || !strcmp(w, "special") ||
           !strcmp(w, "dedup") || !strcmp(w, "cache");
}

int mgmt_cache_section_split(int *argc, char **argv, char ***cache, size_t *ncache, char *err,
                             size_t errlen)
{
    return mgmt_section_split("cache", argc, argv, cache, ncache, err, errlen);
}

int mgmt_section_split(const char *keyword, int *argc, char **argv, char ***cache, size_t *ncache,
                       char *err, size_t errlen)
{
    *cache = NULL;
    *ncache = 0;
    int out = 0;
    for (int i = 0; i < *argc;) {
        if (strcmp(argv[i], keyword) != 0) {
            argv[out++] = argv[i++];
            continue;
        }
        int j = i + 1;
        while (j < *argc && !ends_section(argv[j])) j++;
        if (j == i + 1) {
            snprintf(err, errlen, "'%s' needs at least one device", keyword);
            free(*cache);
            *cache = NULL;
            *ncache = 0;
            return -EINVAL;
        }
        for (int k = i + 1; k < j; k++) {
            for (size_t m = 0; m < *ncache; m++)
                if (!strcmp((*cache)[m], argv[k])) {
                    snprintf(err, errlen, "device '%s' is given more than once", argv[k]);
                    free(*cache);
                    *cache = NULL;
                    *ncache = 0;
                    return -EINVAL;
                }
            *cache = cairn_realloc(*cache, (*ncache + 1) * sizeof(char *));
            (*cache)[(*ncache)++] = argv[k];
        }
        i = j;
    }
    *argc = out;
    return 0;
}
