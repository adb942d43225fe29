/* Listing output: aligned tables, -H tab-separated, --json, size formatting. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render(const mgmt_table_t *t, mgmt_out_mode_t mode)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mgmt_table_print(t, f, mode, "pools");
    fclose(f);
    return buf;
}

static mgmt_table_t *sample(void)
{
    static const char *const hdr[] = {"NAME", "SIZE", "HEALTH"};
    mgmt_table_t *t = mgmt_table_new(3, hdr, 0x2);
    const char *r1[] = {"tank", "1073741824", "ONLINE"};
    const char *r2[] = {"b", "5", "DEG\"RA\\DED\n"};
    mgmt_table_add_row(t, r1);
    mgmt_table_add_row(t, r2);
    return t;
}

static void test_human(void **state)
{
    (void)state;
    mgmt_table_t *t = sample();
    char *s = render(t, MGMT_OUT_HUMAN);
    /* NAME left-aligned to the widest cell, SIZE right-aligned, last column unpadded. */
    const char *want = "NAME        SIZE  HEALTH\n"
                       "tank  1073741824  ONLINE\n"
                       "b              5  DEG\"RA\\DED\n\n";
    assert_string_equal(s, want);
    free(s);
    mgmt_table_free(t);
}

static void test_tabs(void **state)
{
    (void)state;
    mgmt_table_t *t = sample();
    char *s = render(t, MGMT_OUT_TABS);
    assert_string_equal(s, "tank\t1073741824\tONLINE\nb\t5\tDEG\"RA\\DED\n\n");
    free(s);
    mgmt_table_free(t);
}

static void test_json(void **state)
{
    (void)state;
    mgmt_table_t *t = sample();
    char *s = render(t, MGMT_OUT_JSON);
    assert_string_equal(s, "{\"pools\": [\n"
                           "  {\"name\": \"tank\", \"size\": 1073741824, \"health\": \"ONLINE\"},\n"
                           "  {\"name\": \"b\", \"size\": 5, \"health\": \"DEG\\\"RA\\\\DED\\n\"}\n"
                           "]}\n");
    free(s);
    mgmt_table_free(t);
    /* A human size in a numeric column stays a string; empty tables are valid JSON. */
    static const char *const hdr[] = {"SIZE"};
    t = mgmt_table_new(1, hdr, 0x1);
    const char *r[] = {"1.5G"};
    mgmt_table_add_row(t, r);
    const char *r2[] = {"007"};
    mgmt_table_add_row(t, r2);
    s = render(t, MGMT_OUT_JSON);
    assert_string_equal(s, "{\"pools\": [\n  {\"size\": \"1.5G\"},\n  {\"size\": \"007\"}\n]}\n");
    free(s);
    mgmt_table_free(t);
    t = mgmt_table_new(1, hdr, 0x1);
    s = render(t, MGMT_OUT_JSON);
    assert_string_equal(s, "{\"pools\": []}\n");
    free(s);
    mgmt_table_free(t);
}

static void test_json_control_chars(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    mgmt_json_string(f, "a\x01\tb");
    fclose(f);
    assert_string_equal(buf, "\"a\\u0001\\tb\"");
    free(buf);
}

static void test_sizes(void **state)
{
    (void)state;
    char b[32];
    mgmt_format_size(1536ULL * 1024 * 1024, true, b, sizeof b);
    assert_string_equal(b, "1610612736");
    mgmt_format_size(1536ULL * 1024 * 1024, false, b, sizeof b);
    assert_string_equal(b, "1.50G");
    mgmt_format_size(0, false, b, sizeof b);
    assert_string_equal(b, "0");
    mgmt_format_size(1023, false, b, sizeof b);
    assert_string_equal(b, "1023");
    mgmt_format_size(200ULL * 1024 * 1024, false, b, sizeof b);
    assert_string_equal(b, "200M");
    mgmt_format_size(UINT64_MAX, true, b, sizeof b);
    assert_string_equal(b, "18446744073709551615");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_human),
        cmocka_unit_test(test_tabs),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_control_chars),
        cmocka_unit_test(test_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
