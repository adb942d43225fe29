/*
 * The `spare DEV...` section of `pool create` and `pool add`: hot spares are
 * no part of the vdev grammar (they hold nothing until they step in), so the
 * section is taken out of the words before the grammar sees the rest, as the
 * `cache` section is, and travels to the daemon as a list of device paths.
 */
#include "cli.h"

#include <cairn/util.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void cli_spare_section(int *argc, char **argv, char ***spares, size_t *nspares, const char *what)
{
    char **devs;
    size_t n;
    char err[256];
    if (mgmt_section_split("spare", argc, argv, &devs, &n, err, sizeof err)) fail("%s: %s", what, err);
    *spares = NULL;
    *nspares = 0;
    if (!n) return;
    *spares = cairn_zalloc(n * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        char buf[PATH_MAX + 64];
        (*spares)[i] = cairn_strdup(leaf_arg(devs[i], buf, sizeof buf, what));
    }
    *nspares = n;
    free(devs);
}

void cli_spare_section_free(char **spares, size_t n)
{
    for (size_t i = 0; i < n; i++) free(spares[i]);
    free(spares);
}
