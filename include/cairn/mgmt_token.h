/*
 * API tokens of the HTTPS management plane (src/mgmt/mgmt_token.c).
 *
 * A token is a random secret shown once, at creation ("cairn_" + 64 hex
 * digits). The store keeps only its salted SHA-256 (salt || secret), so a
 * copy of the state dir does not hand out working tokens. Each token has a
 * unique name (what `cairn token list` shows and `revoke` takes) and a role:
 * read-only tokens may only read, admin tokens may also change things.
 *
 * The store is a small text file in the state dir, rewritten whole (temp file +
 * rename, mode 0600) on every change; one line per token:
 *   NAME ROLE CREATED_UNIX SALT_HEX HASH_HEX
 * It is thread-safe: the HTTP threads verify while the admin socket creates and
 * revokes.
 *
 * Users (`cairn user add|passwd|remove|list`) are the same kind of store in
 * their own file, for people logging in to the web UI: the line keeps a
 * crypt(3) yescrypt hash of the password instead of the token hash:
 *   NAME ROLE CREATED_UNIX CRYPTED
 * A log-in (POST /api/v1/sessions) verifies name and password and opens a
 * session; the store's remove and list serve users as they serve tokens.
 */
#ifndef CAIRN_MGMT_TOKEN_H
#define CAIRN_MGMT_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mgmt_role {
    MGMT_ROLE_READ_ONLY = 0,
    MGMT_ROLE_ADMIN = 1,
} mgmt_role_t;

#define MGMT_TOKEN_NAME_MAX 64   /* bytes including the terminator */
#define MGMT_TOKEN_SECRET_LEN 71 /* "cairn_" + 64 hex digits + the terminator */
#define MGMT_PASSWORD_MIN 8
#define MGMT_PASSWORD_MAX 256

typedef struct mgmt_token_info {
    char name[MGMT_TOKEN_NAME_MAX];
    mgmt_role_t role;
    uint64_t created; /* wall clock seconds */
} mgmt_token_info_t;

typedef struct mgmt_token_store mgmt_token_store_t;

/* Opens (or starts empty when absent) the store at path. -errno with err on a
 * file that cannot be read or a line that does not parse. */
int mgmt_token_store_open(const char *path, mgmt_token_store_t **out, char *err, size_t errlen);
void mgmt_token_store_close(mgmt_token_store_t *s);
/* Creates a token: secret receives the only copy of its secret. -EINVAL for a bad
 * name, -EEXIST for a name in use, -errno when the file cannot be written (nothing
 * changes then). */
int mgmt_token_create(mgmt_token_store_t *s, const char *name, mgmt_role_t role,
                      char secret[MGMT_TOKEN_SECRET_LEN], char *err, size_t errlen);
/* -ENOENT when there is no token of that name. */
int mgmt_token_revoke(mgmt_token_store_t *s, const char *name, char *err, size_t errlen);
/* 0 with the token's name and role when secret is a live token, -EACCES otherwise
 * (compared in constant time). */
int mgmt_token_verify(mgmt_token_store_t *s, const char *secret, mgmt_token_info_t *who);
/* Up to cap tokens in creation order; returns how many there are. */
size_t mgmt_token_list(mgmt_token_store_t *s, mgmt_token_info_t *out, size_t cap);
/* Names: 1..63 letters, digits, '_', '-', '.'. */
int mgmt_token_name_check(const char *name, char *err, size_t errlen);
const char *mgmt_role_name(mgmt_role_t r);

/* The user store: as the token store (close, revoke = remove, list), for users. */
int mgmt_user_store_open(const char *path, mgmt_token_store_t **out, char *err, size_t errlen);
/* -EINVAL for a bad name or a password of fewer than MGMT_PASSWORD_MIN (or more
 * than MGMT_PASSWORD_MAX) bytes or equal to the name; -EEXIST for a name in use. */
int mgmt_user_add(mgmt_token_store_t *s, const char *name, mgmt_role_t role, const char *password,
                  char *err, size_t errlen);
/* -ENOENT for no such user; the same password rules as add. */
int mgmt_user_passwd(mgmt_token_store_t *s, const char *name, const char *password, char *err,
                     size_t errlen);
/* 0 with the user's name and role when the password is the user's, -EACCES
 * otherwise (an unknown name takes as long as a wrong password). */
int mgmt_user_verify(mgmt_token_store_t *s, const char *name, const char *password,
                     mgmt_token_info_t *who);

#endif
