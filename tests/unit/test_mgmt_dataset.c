/* Dataset command words: names, sizes, -t types, -o columns, the SOURCE column. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(const char *name, unsigned allowed, char *err)
{
    err[0] = '\0';
    return mgmt_dataset_name_check(name, allowed, err, 512);
}

static void test_names_accepted(void **state)
{
    (void)state;
    char err[512];
    const char *ok[] = {"tank", "tank/a", "tank/a/b-c_d.e:f", "t/1/2/3", "tank/a.b"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(check(ok[i], MGMT_DSNAME_DATASET, err), 0);
        assert_int_equal(check(ok[i], MGMT_DSNAME_ANY, err), 0);
    }
    assert_int_equal(check("tank@s", MGMT_DSNAME_SNAPSHOT, err), 0);
    assert_int_equal(check("tank/a/b@monday-1.2", MGMT_DSNAME_ANY, err), 0);
    /* Exactly DSL_NAME_MAX characters is fine; one more is not. */
    char longname[DSL_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname);
    longname[0] = 't';
    longname[4] = '/';
    longname[DSL_NAME_MAX] = '\0';
    assert_int_equal(check(longname, MGMT_DSNAME_DATASET, err), 0);
    longname[DSL_NAME_MAX] = 'a';
    longname[DSL_NAME_MAX + 1] = '\0';
    assert_int_equal(check(longname, MGMT_DSNAME_DATASET, err), -EINVAL);
    assert_non_null(strstr(err, "too long"));
}

static void test_names_refused(void **state)
{
    (void)state;
    char err[512];
    static const struct {
        const char *name;
        unsigned allowed;
        const char *msg;
    } bad[] = {
        {"", MGMT_DSNAME_ANY, "missing dataset name"},
        {"tank/", MGMT_DSNAME_ANY, "empty component"},
        {"tank//a", MGMT_DSNAME_ANY, "empty component"},
        {"/tank", MGMT_DSNAME_ANY, "missing pool name"},
        {"tank/a b", MGMT_DSNAME_ANY, "character ' '"},
        {"tank/a%b", MGMT_DSNAME_ANY, "character '%'"},
        {"tank/..", MGMT_DSNAME_ANY, "'..' is not a valid component"},
        {"tank/./a", MGMT_DSNAME_ANY, "'.' is not a valid component"},
        {"1tank/a", MGMT_DSNAME_ANY, "must begin with a letter"},
        {"mirror/a", MGMT_DSNAME_ANY, "reserved"},
        {"tank@", MGMT_DSNAME_ANY, "empty snapshot name"},
        {"tank@a@b", MGMT_DSNAME_ANY, "more than one '@'"},
        {"tank@a/b", MGMT_DSNAME_ANY, "character '/'"},
        {"tank/a@s", MGMT_DSNAME_DATASET, "is a snapshot"},
        {"tank/a", MGMT_DSNAME_SNAPSHOT, "not a snapshot name"},
        {"@s", MGMT_DSNAME_ANY, "missing pool name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(check(bad[i].name, bad[i].allowed, err), -EINVAL);
        if (!strstr(err, bad[i].msg)) fail_msg("'%s': got '%s', want '%s'", bad[i].name, err, bad[i].msg);
        if (bad[i].name[0] && !strstr(bad[i].name, "@a@") && !strstr(err, bad[i].name))
            fail_msg("message for '%s' does not name it: %s", bad[i].name, err);
    }
}

static void test_pool_part(void **state)
{
    (void)state;
    char pool[64];
    mgmt_dataset_pool("tank/a/b", pool, sizeof pool);
    assert_string_equal(pool, "tank");
    mgmt_dataset_pool("tank@s", pool, sizeof pool);
    assert_string_equal(pool, "tank");
    mgmt_dataset_pool("p2", pool, sizeof pool);
    assert_string_equal(pool, "p2");
    mgmt_dataset_pool("abcdefgh/x", pool, 4);
    assert_string_equal(pool, "abc");
}

static void test_sizes(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0},
        {"4096", 4096},
        {"512B", 512},
        {"8K", 8192},
        {"8k", 8192},
        {"512M", 512ull << 20},
        {"1G", 1ull << 30},
        {"1GB", 1ull << 30},
        {"1GiB", 1ull << 30},
        {"1.5G", 3ull << 29},
        {"0.5K", 512},
        {"1.0001K", 1024},   /* fractions round down to whole bytes */
        {"2T", 2ull << 40},
        {"1P", 1ull << 50},
        {"15E", 15ull << 60},
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 12345;
        if (mgmt_parse_size(ok[i].s, &v)) fail_msg("'%s' refused", ok[i].s);
        if (v != ok[i].v) fail_msg("'%s' -> %llu, want %llu", ok[i].s, (unsigned long long)v,
                                   (unsigned long long)ok[i].v);
    }
    const char *junk[] = {"", "G", "-1G", "1X", "1GG", "1Gi", "1.G", ".5G", "nan", "inf",
                          "0x10", "1 G", "1e3", "none", " 1"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        uint64_t v = 7;
        if (mgmt_parse_size(junk[i], &v) != -EINVAL) fail_msg("'%s' accepted", junk[i]);
        assert_int_equal(v, 7);
    }
    uint64_t v;
    assert_int_equal(mgmt_parse_size("16E", &v), -ERANGE);
    assert_int_equal(mgmt_parse_size("18446744073709551616", &v), -ERANGE);
    assert_int_equal(mgmt_parse_size("17179869184G", &v), -ERANGE);
    assert_int_equal(mgmt_parse_size("15.9999999999E", &v), 0); /* below 16E */
}

static void test_types(void **state)
{
    (void)state;
    char err[256];
    unsigned m = 0;
    const unsigned fs = 1u << DSL_TYPE_FILESYSTEM, vol = 1u << DSL_TYPE_VOLUME,
                   snap = 1u << DSL_TYPE_SNAPSHOT;
    assert_int_equal(mgmt_parse_types("filesystem", &m, err, sizeof err), 0);
    assert_int_equal(m, fs);
    assert_int_equal(mgmt_parse_types("vol,snap", &m, err, sizeof err), 0);
    assert_int_equal(m, vol | snap);
    assert_int_equal(mgmt_parse_types("all", &m, err, sizeof err), 0);
    assert_int_equal(m, fs | vol | snap);
    assert_int_equal(MGMT_TYPES_DEFAULT, fs | vol);
    m = 99;
    assert_int_equal(mgmt_parse_types("filesystem,bogus", &m, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "'bogus'"));
    assert_int_equal(m, 99);
    assert_int_equal(mgmt_parse_types("fs,", &m, err, sizeof err), -EINVAL);
    assert_int_equal(mgmt_parse_types("", &m, err, sizeof err), -EINVAL);
    assert_string_equal(mgmt_type_name(DSL_TYPE_VOLUME), "volume");
    assert_string_equal(mgmt_type_name(DSL_TYPE_SNAPSHOT), "snapshot");
}

static void test_columns(void **state)
{
    (void)state;
    char err[256];
    mgmt_column_t *c = NULL;
    size_t n = 0;
    assert_int_equal(mgmt_parse_columns("name,avail,refer,ratio,compression,com.example:tag,used",
                                        &c, &n, err, sizeof err),
                     0);
    assert_int_equal(n, 7);
    assert_string_equal(c[0].prop, "name");
    assert_string_equal(c[0].header, "NAME");
    assert_string_equal(c[1].prop, "available");
    assert_string_equal(c[1].header, "AVAIL");
    assert_string_equal(c[2].prop, "referenced");
    assert_string_equal(c[2].header, "REFER");
    assert_string_equal(c[3].prop, "compressratio");
    assert_string_equal(c[3].header, "RATIO");
    assert_string_equal(c[4].prop, "compression");
    assert_string_equal(c[4].header, "COMPRESS");
    assert_string_equal(c[5].prop, "com.example:tag");
    assert_string_equal(c[5].header, "COM.EXAMPLE:TAG");
    assert_string_equal(c[6].header, "USED");
    free(c);
    c = NULL;
    assert_int_equal(mgmt_parse_columns("name,,used", &c, &n, err, sizeof err), -EINVAL);
    assert_null(c);
    assert_int_equal(mgmt_parse_columns("", &c, &n, err, sizeof err), -EINVAL);
    assert_string_equal(mgmt_prop_canonical("refreserv"), "refreservation");
    assert_string_equal(mgmt_prop_canonical("quota"), "quota");
}

static void test_source(void **state)
{
    (void)state;
    char b[300];
    mgmt_format_source(DSL_SRC_LOCAL, "", b, sizeof b);
    assert_string_equal(b, "local");
    mgmt_format_source(DSL_SRC_DEFAULT, "", b, sizeof b);
    assert_string_equal(b, "default");
    mgmt_format_source(DSL_SRC_INHERITED, "tank/a", b, sizeof b);
    assert_string_equal(b, "inherited from tank/a");
    mgmt_format_source(DSL_SRC_NONE, "", b, sizeof b);
    assert_string_equal(b, "-");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_accepted), cmocka_unit_test(test_names_refused),
        cmocka_unit_test(test_pool_part),      cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_types),          cmocka_unit_test(test_columns),
        cmocka_unit_test(test_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
