/* The API token store (include/cairn/mgmt_token.h): a created token verifies with
 * its role and nothing else does, the file holds no secret, tokens survive a
 * reopen, revoke works once, names are checked, and a damaged file is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt_token.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512], g_path[600];

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0700);
    snprintf(g_dir, sizeof g_dir, "%s/test_mgmt_token.XXXXXX", base);
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/http-tokens", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_path);
    return rmdir(g_dir);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_create_verify_reopen_revoke(void **state)
{
    (void)state;
    mgmt_token_store_t *s;
    char err[256], admin[MGMT_TOKEN_SECRET_LEN], ro[MGMT_TOKEN_SECRET_LEN];
    assert_int_equal(mgmt_token_store_open(g_path, &s, err, sizeof err), 0);
    assert_int_equal(mgmt_token_create(s, "ops", MGMT_ROLE_ADMIN, admin, err, sizeof err), 0);
    assert_int_equal(mgmt_token_create(s, "grafana", MGMT_ROLE_READ_ONLY, ro, err, sizeof err), 0);
    assert_int_equal(strlen(admin), MGMT_TOKEN_SECRET_LEN - 1);
    assert_string_not_equal(admin, ro);
    char scratch[MGMT_TOKEN_SECRET_LEN];
    assert_int_equal(mgmt_token_create(s, "ops", MGMT_ROLE_ADMIN, scratch, err, sizeof err),
                     -EEXIST);
    assert_int_equal(mgmt_token_create(s, "a b", MGMT_ROLE_ADMIN, scratch, err, sizeof err),
                     -EINVAL);
    mgmt_token_store_close(s);

    /* The file: mode 0600, no secret in it. */
    struct stat st;
    assert_int_equal(stat(g_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *text = slurp(g_path);
    assert_null(strstr(text, admin + 6));

    assert_int_equal(mgmt_token_store_open(g_path, &s, err, sizeof err), 0);
    mgmt_token_info_t who;
    assert_int_equal(mgmt_token_verify(s, admin, &who), 0);
    assert_string_equal(who.name, "ops");
    assert_int_equal(who.role, MGMT_ROLE_ADMIN);
    assert_int_equal(mgmt_token_verify(s, ro, &who), 0);
    assert_int_equal(who.role, MGMT_ROLE_READ_ONLY);
    char wrong[MGMT_TOKEN_SECRET_LEN];
    memcpy(wrong, admin, sizeof wrong);
    wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
    assert_int_equal(mgmt_token_verify(s, wrong, &who), -EACCES);
    assert_int_equal(mgmt_token_verify(s, "", &who), -EACCES);
    mgmt_token_info_t list[4];
    assert_int_equal(mgmt_token_list(s, list, 4), 2);
    assert_string_equal(list[0].name, "ops");
    assert_string_equal(list[1].name, "grafana");

    assert_int_equal(mgmt_token_revoke(s, "ops", err, sizeof err), 0);
    assert_int_equal(mgmt_token_revoke(s, "ops", err, sizeof err), -ENOENT);
    assert_int_equal(mgmt_token_verify(s, admin, &who), -EACCES);
    mgmt_token_store_close(s);
    assert_int_equal(mgmt_token_store_open(g_path, &s, err, sizeof err), 0);
    assert_int_equal(mgmt_token_verify(s, admin, &who), -EACCES);
    assert_int_equal(mgmt_token_verify(s, ro, &who), 0);
    mgmt_token_store_close(s);
}

static void test_damaged_file_refused(void **state)
{
    (void)state;
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    fputs("ops admin 1 00zz 11\n", f);
    fclose(f);
    mgmt_token_store_t *s = NULL;
    char err[256];
    assert_int_equal(mgmt_token_store_open(g_path, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ":1: not a token line"));
}

/* Users: a password verifies (and only it), survives a reopen, is stored only
 * as a yescrypt hash; passwd changes it, remove ends it; bad input changes nothing. */
static void test_users(void **state)
{
    (void)state;
    char upath[700], err[256];
    snprintf(upath, sizeof upath, "%s/http-users", g_dir);
    mgmt_token_store_t *s;
    assert_int_equal(mgmt_user_store_open(upath, &s, err, sizeof err), 0);
    assert_int_equal(mgmt_user_add(s, "ann", MGMT_ROLE_ADMIN, "correct horse", err, sizeof err), 0);
    assert_int_equal(mgmt_user_add(s, "bob", MGMT_ROLE_READ_ONLY, "battery staple", err, sizeof err),
                     0);
    assert_int_equal(mgmt_user_add(s, "ann", MGMT_ROLE_ADMIN, "another one", err, sizeof err),
                     -EEXIST);
    assert_string_equal(err, "user 'ann' already exists");
    assert_int_equal(mgmt_user_add(s, "cy", MGMT_ROLE_ADMIN, "short", err, sizeof err), -EINVAL);
    assert_string_equal(err, "a password needs 8 to 256 characters");
    assert_int_equal(mgmt_user_add(s, "dandelion", MGMT_ROLE_ADMIN, "dandelion", err, sizeof err),
                     -EINVAL);
    assert_int_equal(mgmt_user_add(s, "no spaces", MGMT_ROLE_ADMIN, "long enough", err, sizeof err),
                     -EINVAL);
    mgmt_token_info_t who;
    assert_int_equal(mgmt_user_verify(s, "ann", "correct horse", &who), 0);
    assert_string_equal(who.name, "ann");
    assert_int_equal(who.role, MGMT_ROLE_ADMIN);
    assert_int_equal(mgmt_user_verify(s, "ann", "correct horsE", &who), -EACCES);
    assert_int_equal(mgmt_user_verify(s, "ann", "battery staple", &who), -EACCES);
    assert_int_equal(mgmt_user_verify(s, "nobody", "correct horse", &who), -EACCES);
    /* only hashes on disk */
    const char *file = slurp(upath);
    assert_null(strstr(file, "correct horse"));
    assert_non_null(strstr(file, "ann admin "));
    assert_non_null(strstr(file, " $y$"));
    struct stat st;
    assert_int_equal(stat(upath, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    mgmt_token_store_close(s);

    assert_int_equal(mgmt_user_store_open(upath, &s, err, sizeof err), 0);
    assert_int_equal(mgmt_user_verify(s, "bob", "battery staple", &who), 0);
    assert_int_equal(who.role, MGMT_ROLE_READ_ONLY);
    assert_int_equal(mgmt_user_passwd(s, "bob", "new password", err, sizeof err), 0);
    assert_int_equal(mgmt_user_verify(s, "bob", "battery staple", &who), -EACCES);
    assert_int_equal(mgmt_user_verify(s, "bob", "new password", &who), 0);
    assert_int_equal(mgmt_user_passwd(s, "bob", "tiny", err, sizeof err), -EINVAL);
    assert_int_equal(mgmt_user_verify(s, "bob", "new password", &who), 0);
    assert_int_equal(mgmt_user_passwd(s, "zed", "new password", err, sizeof err), -ENOENT);
    assert_string_equal(err, "no user named 'zed'");
    mgmt_token_info_t list[4];
    assert_int_equal(mgmt_token_list(s, list, 4), 2);
    assert_int_equal(mgmt_token_revoke(s, "ann", err, sizeof err), 0);
    assert_int_equal(mgmt_user_verify(s, "ann", "correct horse", &who), -EACCES);
    assert_int_equal(mgmt_token_revoke(s, "ann", err, sizeof err), -ENOENT);
    assert_string_equal(err, "no user named 'ann'");
    mgmt_token_store_close(s);
    /* a token file is not a user file */
    FILE *f = fopen(upath, "w");
    assert_non_null(f);
    fputs("ops admin 1 00112233445566778899aabbccddeeff "
          "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", f);
    fclose(f);
    assert_int_equal(mgmt_user_store_open(upath, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, ":1: not a user line"));
    unlink(upath);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_verify_reopen_revoke),
        cmocka_unit_test(test_damaged_file_refused),
        cmocka_unit_test(test_users),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
