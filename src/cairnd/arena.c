/*
 * Per-request allocations (an arena freed at once after the response is sent)
 * and the error answer every request handler gives. Shared by the request
 * families (pools.c, datasets.c, arc.c, iscsi.c, ...) and the front doors
 * (the socket in main.c, the HTTP API).
 */
#include "cairnd.h"

#include <cairn/util.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *cairnd_arena_alloc(cairnd_arena_t *a, size_t size)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 32;
        a->ptrs = cairn_realloc(a->ptrs, sizeof(void *) * a->cap);
    }
    void *p = cairn_zalloc(size ? size : 1);
    a->ptrs[a->n++] = p;
    return p;
}

char *cairnd_arena_strdup(cairnd_arena_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = cairnd_arena_alloc(a, n);
    memcpy(p, s, n);
    return p;
}

void cairnd_arena_free(cairnd_arena_t *a)
{
    for (size_t i = 0; i < a->n; i++) free(a->ptrs[i]);
    free(a->ptrs);
    memset(a, 0, sizeof *a);
}

void cairnd_set_error(Cairn__Mgmt__Response *resp, cairnd_arena_t *a, int rc, const char *fmt,
                      ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    cairn_vformat_line(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp->error = rc < 0 ? rc : -EINVAL;
    resp->message = cairnd_arena_strdup(a, msg);
}

