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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_verify_reopen_revoke),
        cmocka_unit_test(test_damaged_file_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
