/*
 * The API token store and the user store (include/cairn/mgmt_token.h says what
 * and why). One store type serves both: a named, role-carrying credential kept
 * in a small file rewritten whole; only the verifier differs.
 *
 * Tokens are few (an administrator makes a handful), so the store is an array
 * scanned in full on every verification: every entry's salted hash is computed
 * and compared in constant time, so neither the answer's timing nor an early
 * exit tells which stored token a guess came close to. A token is 256 random
 * bits, so one fast hash is enough.
 *
 * Passwords are chosen by people and guessable, so they get a slow, salted
 * hash: crypt(3)'s yescrypt (libxcrypt, the hash Debian uses for /etc/shadow).
 * The hash runs outside the store's lock (it takes tens of milliseconds), and
 * an unknown user name costs the same hash against a dummy setting, so the
 * answer's timing does not tell which names exist.
 */
#include <cairn/mgmt_token.h>
#include <cairn/util.h>

#include <crypt.h>
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
    uint8_t salt[SALT_LEN];          /* tokens */
    uint8_t hash[HASH_LEN];          /* tokens */
    char crypted[CRYPT_OUTPUT_SIZE]; /* users: crypt(3) of the password */
} token_t;

struct mgmt_token_store {
    pthread_mutex_t lock;
    char *path;
    bool users; /* passwords (crypted) instead of token hashes */
    const char *what; /* "token" or "user", for messages */
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

/* One line: NAME ROLE CREATED, then the verifier: SALT_HEX HASH_HEX for a token,
 * the crypt(3) string for a user. */
static int parse_line(const mgmt_token_store_t *s, const char *line, token_t *t)
{
    char name[MGMT_TOKEN_NAME_MAX + 1], role[16], v1[CRYPT_OUTPUT_SIZE + 1], v2[2 * HASH_LEN + 2];
    unsigned long long created;
    char junk;
    int n = sscanf(line, "%64s %15s %llu %384s %65s %c", name, role, &created, v1, v2, &junk);
    if (n != (s->users ? 4 : 5)) return -EINVAL;
    char err[128];
    if (mgmt_token_name_check(name, err, sizeof err)) return -EINVAL;
    memset(t, 0, sizeof *t);
    cairn_strlcpy(t->info.name, name, sizeof t->info.name);
    if (!strcmp(role, "admin")) t->info.role = MGMT_ROLE_ADMIN;
    else if (!strcmp(role, "read-only")) t->info.role = MGMT_ROLE_READ_ONLY;
    else return -EINVAL;
    t->info.created = created;
    if (s->users) {
        if (v1[0] != '$' || strlen(v1) >= CRYPT_OUTPUT_SIZE) return -EINVAL;
        cairn_strlcpy(t->crypted, v1, sizeof t->crypted);
        return 0;
    }
    if (hex_decode(v1, t->salt, SALT_LEN) || hex_decode(v2, t->hash, HASH_LEN)) return -EINVAL;
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

static int store_open(const char *path, bool users, mgmt_token_store_t **out, char *err,
                      size_t errlen)
{
    mgmt_token_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->users = users;
    s->what = users ? "user" : "token";
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
        if (parse_line(s, line, &t)) {
            snprintf(err, errlen, "%s:%u: not a %s line", path, lineno, s->what);
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

int mgmt_token_store_open(const char *path, mgmt_token_store_t **out, char *err, size_t errlen)
{
    return store_open(path, false, out, err, errlen);
}

int mgmt_user_store_open(const char *path, mgmt_token_store_t **out, char *err, size_t errlen)
{
    return store_open(path, true, out, err, errlen);
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
        char verifier[2 * SALT_LEN + 2 * HASH_LEN + 2];
        hex_encode(t->salt, SALT_LEN, verifier);
        verifier[2 * SALT_LEN] = ' ';
        hex_encode(t->hash, HASH_LEN, verifier + 2 * SALT_LEN + 1);
        if (fprintf(f, "%s %s %llu %s\n", t->info.name, mgmt_role_name(t->info.role),
                    (unsigned long long)t->info.created, s->users ? t->crypted : verifier) < 0)
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

/* Adds t unless its name is taken; the file is rewritten before it counts. */
static int add_entry(mgmt_token_store_t *s, const token_t *t, char *err, size_t errlen)
{
    int rc;
    pthread_mutex_lock(&s->lock);
    if (find(s, t->info.name) >= 0) {
        snprintf(err, errlen, "%s '%s' already exists", s->what, t->info.name);
        rc = -EEXIST;
    } else if ((rc = push(s, t))) {
        snprintf(err, errlen, "out of memory");
    } else if ((rc = save(s, err, errlen))) {
        s->n--;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
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
    rc = add_entry(s, &t, err, errlen);
    if (rc) OPENSSL_cleanse(secret, MGMT_TOKEN_SECRET_LEN);
    return rc;
}

int mgmt_token_revoke(mgmt_token_store_t *s, const char *name, char *err, size_t errlen)
{
    pthread_mutex_lock(&s->lock);
    ssize_t i = find(s, name);
    int rc = 0;
    if (i < 0) {
        snprintf(err, errlen, "no %s named '%s'", s->what, name);
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

/* ------------------------------------------------------------ passwords */

static int password_check(const char *name, const char *password, char *err, size_t errlen)
{
    size_t len = strlen(password);
    if (len < MGMT_PASSWORD_MIN || len > MGMT_PASSWORD_MAX) {
        snprintf(err, errlen, "a password needs %d to %d characters", MGMT_PASSWORD_MIN,
                 MGMT_PASSWORD_MAX);
        return -EINVAL;
    }
    if (!strcmp(password, name)) {
        snprintf(err, errlen, "the password must not be the user name");
        return -EINVAL;
    }
    return 0;
}

/* crypt(3) of password with setting (a stored hash or a fresh salt) into out;
 * false when libxcrypt refuses. */
static bool crypt_into(const char *password, const char *setting, char out[CRYPT_OUTPUT_SIZE])
{
    struct crypt_data *cd = calloc(1, sizeof *cd);
    if (!cd) return false;
    const char *h = crypt_rn(password, setting, cd, sizeof *cd);
    bool ok = h && h[0] == '$' && strlen(h) < CRYPT_OUTPUT_SIZE;
    if (ok) cairn_strlcpy(out, h, CRYPT_OUTPUT_SIZE);
    OPENSSL_cleanse(cd, sizeof *cd);
    free(cd);
    return ok;
}

static int hash_password(const char *password, char out[CRYPT_OUTPUT_SIZE], char *err,
                         size_t errlen)
{
    char setting[CRYPT_GENSALT_OUTPUT_SIZE];
    /* yescrypt at libxcrypt's default cost, with salt from the kernel */
    if (!crypt_gensalt_rn("$y$", 0, NULL, 0, setting, sizeof setting) ||
        !crypt_into(password, setting, out)) {
        snprintf(err, errlen, "cannot hash the password: %s", strerror(errno ? errno : EIO));
        return -EIO;
    }
    return 0;
}

int mgmt_user_add(mgmt_token_store_t *s, const char *name, mgmt_role_t role, const char *password,
                  char *err, size_t errlen)
{
    int rc = mgmt_token_name_check(name, err, errlen);
    if (!rc) rc = password_check(name, password, err, errlen);
    if (rc) return rc;
    token_t *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->info.role = role;
    t->info.created = (uint64_t)time(NULL);
    cairn_strlcpy(t->info.name, name, sizeof t->info.name);
    rc = hash_password(password, t->crypted, err, errlen);
    if (!rc) rc = add_entry(s, t, err, errlen);
    free(t);
    return rc;
}

int mgmt_user_passwd(mgmt_token_store_t *s, const char *name, const char *password, char *err,
                     size_t errlen)
{
    char crypted[CRYPT_OUTPUT_SIZE], old[CRYPT_OUTPUT_SIZE];
    int rc = password_check(name, password, err, errlen);
    if (!rc) rc = hash_password(password, crypted, err, errlen);
    if (rc) return rc;
    pthread_mutex_lock(&s->lock);
    ssize_t i = find(s, name);
    if (i < 0) {
        snprintf(err, errlen, "no user named '%s'", name);
        rc = -ENOENT;
    } else {
        cairn_strlcpy(old, s->v[i].crypted, sizeof old);
        cairn_strlcpy(s->v[i].crypted, crypted, sizeof s->v[i].crypted);
        if ((rc = save(s, err, errlen))) cairn_strlcpy(s->v[i].crypted, old, sizeof old);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* A real yescrypt setting for names that do not exist, so they cost a full hash. */
static char g_dummy_setting[CRYPT_GENSALT_OUTPUT_SIZE];
static void make_dummy_setting(void)
{
    if (!crypt_gensalt_rn("$y$", 0, NULL, 0, g_dummy_setting, sizeof g_dummy_setting))
        g_dummy_setting[0] = '\0';
}

int mgmt_user_verify(mgmt_token_store_t *s, const char *name, const char *password,
                     mgmt_token_info_t *who)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_dummy_setting);
    char stored[CRYPT_OUTPUT_SIZE], got[CRYPT_OUTPUT_SIZE];
    mgmt_token_info_t info;
    pthread_mutex_lock(&s->lock);
    ssize_t i = find(s, name);
    if (i >= 0) {
        cairn_strlcpy(stored, s->v[i].crypted, sizeof stored);
        info = s->v[i].info;
    }
    pthread_mutex_unlock(&s->lock);
    if (i < 0) { /* the same work as for a user who exists, then no */
        if (g_dummy_setting[0]) crypt_into(password, g_dummy_setting, got);
        return -EACCES;
    }
    if (!crypt_into(password, stored, got)) return -EACCES;
    size_t len = strlen(stored);
    if (strlen(got) != len || CRYPTO_memcmp(got, stored, len)) return -EACCES;
    *who = info;
    return 0;
}
