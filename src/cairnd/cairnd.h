/* Internal interfaces between the parts of cairnd (not a library contract). */
#ifndef CAIRND_H
#define CAIRND_H

#include <cairn/mgmt.h>
#include <cairn_mgmt.pb-c.h>

/* Per-request allocations, freed at once after the response is sent. */
typedef struct cairnd_arena {
    void **ptrs;
    size_t n, cap;
} cairnd_arena_t;
void *cairnd_arena_alloc(cairnd_arena_t *a, size_t size);
char *cairnd_arena_strdup(cairnd_arena_t *a, const char *s);
void cairnd_arena_free(cairnd_arena_t *a);

/* Pool table (pools.c). */
int cairnd_pools_init(const char *state_dir);
/* Imports every pool listed in the cache file; failures are logged and kept. */
void cairnd_pools_import_cached(void);
/* Closes every pool cleanly (daemon shutdown). */
void cairnd_pools_shutdown(void);
/* Fills resp for req; everything resp points to lives in arena. */
void cairnd_handle_request(const Cairn__Mgmt__Request *req, Cairn__Mgmt__Response *resp,
                           cairnd_arena_t *arena);

#endif
