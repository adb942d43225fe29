/*
 * The API token store (include/cairn/mgmt_token.h says what and why).
 *
 * Tokens are few (an administrator makes a handful), so the store is an array
 * scanned in full on every verification: every entry's salted hash is computed
 * and compared in constant time, so neither the answer's timing nor an early
 * exit tells which stored token a guess came close to.
 */
#include <cairn/mgmt_token.h>
#include <cairn/util.h>

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SALT_LEN 16
#define HASH_LEN 32
#define SECRET_RANDOM 32
#define SECRET_PREFIX "cairn_"

typedef struct token {
    mgmt_token_info_t info;
    uint8_t salt[SALT_LEN];
    uint8_t hash[HASH_LEN];
} token_t;

struct mgmt_token_store {
    pthread_mutex_t lock;
    char *path;
    token_t *v;
    size_t n, cap;
};

const char *mgmt_role_name(mgmt_role_t r) { return r == MGMT_ROLE_ADMIN ? "admin" : "read-only"; }

int mgmt_token_name_check(const char *name, char *err, size_t errlen)
{
    size_t len = strlen(name);
    if (len == 0 || len >= MGMT_TOKEN_NAME_MAX) {
        snprintf(err, errlen, "token name must have 1 to %d characters", MGMT_TOKEN_NAME_MAX - 1);
        return -EINVAL;
    }
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_-.", *p)) {
            snprintf(err, errlen, "bad token name '%s' (letters, digits, '_', '-', '.')", name);
            return -EINVAL;
        }
    return 0;
}

static void hex_encode(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_decode(const char *in, uint8_t *out, size_t n)
{
    if (strlen(in) != 2 * n) return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(in + 2 * i, "%2x", &v) != 1 || !isxdigit((unsigned char)in[2 * i + 1]))
            return -EINVAL;
        out[i] = (uint8_t)v;
    }
    return 0;
}

static void salted_hash(const uint8_t salt[SALT_LEN], const char *secret, uint8_t out[HASH_LEN])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned len = HASH_LEN;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(ctx, salt, SALT_LEN) || !EVP_DigestUpdate(ctx, secret, strlen(secret)) ||
        !EVP_DigestFinal_ex(ctx, out, &len))
        memset(out, 0, HASH_LEN); /* matches no secret: a zero salt+hash is never stored */
    EVP_MD_CTX_free(ctx);
}

static int parse_line(char *line, token_t *t)
{
    char name[MGMT_TOKEN_NAME_MAX + 1], role[16], salt[2 * SALT_LEN + 2], hash[2 * HASH_LEN + 2];
    unsigned long long created;
    char junk;
    if (sscanf(line, "%64s %15s %llu %33s %65s %c", name, role, &created, salt, hash, &junk) != 5)
        return -EINVAL;
    char err[128];
    if (mgmt_token_name_check(name, err, sizeof err)) return -EINVAL;
    memset(t, 0, sizeof *t);
    cairn_strlcpy(t->info.name, name, sizeof t->info.name);
    if (!strcmp(role, "admin")) t->info.role = MGMT_ROLE_ADMIN;
    else if (!strcmp(role, "read-only")) t->info.role = MGMT_ROLE_READ_ONLY;
    else return -EINVAL;
    t->info.created = created;
    if (hex_decode(salt, t->salt, SALT_LEN) || hex_decode(hash, t->hash, HASH_LEN)) return -EINVAL;
    return 0;
}

static int push(mgmt_token_store_t *s, const token_t *t)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        token_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *t;
    return 0;
}

int mgmt_token_store_open(const char *path, mgmt_token_store_t **out, char *err, size_t errlen)
{
    mgmt_token_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    FILE *f = fopen(path, "r");
    if (!f && errno != ENOENT) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        mgmt_token_store_close(s);
        return -e;
    }
    int rc = 0;
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    while (f && getline(&line, &cap, f) >= 0) {
        lineno++;
        token_t t;
        if (parse_line(line, &t)) {
            snprintf(err, errlen, "%s:%u: not a token line", path, lineno);
            rc = -EINVAL;
            break;
        }
        if ((rc = push(s, &t))) {
            snprintf(err, errlen, "out of memory");
            break;
        }
    }
    free(line);
    if (f) fclose(f);
    if (rc) {
        mgmt_token_store_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void mgmt_token_store_close(mgmt_token_store_t *s)
{
    if (!s) return;
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s->v);
    free(s);
}

/* Rewrites the file from the array: the new file replaces the old only once
 * complete and on disk. */
static int save(mgmt_token_store_t *s, char *err, size_t errlen)
{
    size_t plen = strlen(s->path) + 8;
    char *tmp = malloc(plen);
    if (!tmp) return -ENOMEM;
    snprintf(tmp, plen, "%s.tmp", s->path);
    mode_t old = umask(0077);
    FILE *f = fopen(tmp, "w");
    umask(old);
    int rc = f ? 0 : -errno;
    for (size_t i = 0; f && !rc && i < s->n; i++) {
        const token_t *t = &s->v[i];
        char salt[2 * SALT_LEN + 1], hash[2 * HASH_LEN + 1];
        hex_encode(t->salt, SALT_LEN, salt);
        hex_encode(t->hash, HASH_LEN, hash);
        if (fprintf(f, "%s %s %llu %s %s\n", t->info.name, mgmt_role_name(t->info.role),
                    (unsigned long long)t->info.created, salt, hash) < 0)
            rc = -EIO;
    }
    if (f && !rc && (fflush(f) || fsync(fileno(f)))) rc = -errno;
    if (f && fclose(f) && !rc) rc = -errno;
    if (!rc && rename(tmp, s->path)) rc = -errno;
    if (rc) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", s->path, strerror(-rc));
    }
    free(tmp);
    return rc;
}

static ssize_t find(const mgmt_token_store_t *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].info.name, name)) return (ssize_t)i;
    return -1;
}

int mgmt_token_create(mgmt_token_store_t *s, const char *name, mgmt_role_t role,
                      char secret[MGMT_TOKEN_SECRET_LEN], char *err, size_t errlen)
{
    int rc = mgmt_token_name_check(name, err, errlen);
    if (rc) return rc;
    token_t t = {.info.role = role, .info.created = (uint64_t)time(NULL)};
    cairn_strlcpy(t.info.name, name, sizeof t.info.name);
    uint8_t rnd[SECRET_RANDOM];
    if (RAND_bytes(rnd, sizeof rnd) != 1 || RAND_bytes(t.salt, SALT_LEN) != 1) {
        snprintf(err, errlen, "no random bytes for a token");
        return -EIO;
    }
    memcpy(secret, SECRET_PREFIX, sizeof SECRET_PREFIX - 1);
    hex_encode(rnd, sizeof rnd, secret + sizeof SECRET_PREFIX - 1);
    OPENSSL_cleanse(rnd, sizeof rnd);
    salted_hash(t.salt, secret, t.hash);
    pthread_mutex_lock(&s->lock);
    if (find(s, name) >= 0) {
        snprintf(err, errlen, "token '%s' already exists", name);
        rc = -EEXIST;
    } else if ((rc = push(s, &t))) {
        snprintf(err, errlen, "out of memory");
    } else if ((rc = save(s, err, errlen))) {
        s->n--;
    }
    pthread_mutex_unlock(&s->lock);
    if (rc) OPENSSL_cleanse(secret, MGMT_TOKEN_SECRET_LEN);
    return rc;
}

int mgmt_token_revoke(mgmt_token_store_t *s, const char *name, char *err, size_t errlen)
{
    pthread_mutex_lock(&s->lock);
    ssize_t i = find(s, name);
    int rc = 0;
    if (i < 0) {
        snprintf(err, errlen, "no token named '%s'", name);
        rc = -ENOENT;
    } else {
        token_t gone = s->v[i];
        memmove(&s->v[i], &s->v[i + 1], (s->n - (size_t)i - 1) * sizeof *s->v);
        s->n--;
        if ((rc = save(s, err, errlen))) { /* put it back where it was */
            memmove(&s->v[i + 1], &s->v[i], (s->n - (size_t)i) * sizeof *s->v);
            s->v[i] = gone;
            s->n++;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int mgmt_token_verify(mgmt_token_store_t *s, const char *secret, mgmt_token_info_t *who)
{
    int rc = -EACCES;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n; i++) {
        uint8_t h[HASH_LEN];
        salted_hash(s->v[i].salt, secret, h);
        if (CRYPTO_memcmp(h, s->v[i].hash, HASH_LEN) == 0 && rc) {
            *who = s->v[i].info;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

size_t mgmt_token_list(mgmt_token_store_t *s, mgmt_token_info_t *out, size_t cap)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->n;
    for (size_t i = 0; i < n && i < cap; i++) out[i] = s->v[i].info;
    pthread_mutex_unlock(&s->lock);
    return n;
}
