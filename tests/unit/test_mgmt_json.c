/* The JSON <-> protobuf bridge of the REST API (include/cairn/mgmt_json.h): JSON
 * requests become the same messages the CLI packs (checked byte for byte after a
 * pack), every type of field round-trips, big uint64s travel as strings, oneofs
 * carry only the member set, and bad input is refused naming the field. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt_json.h>
#include <cairn_mgmt.pb-c.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static ProtobufCMessage *from_text(const char *text, const ProtobufCMessageDescriptor *d, int *rc,
                                   char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    assert_non_null(j);
    ProtobufCMessage *m = NULL;
    *rc = mgmt_json_to_message(j, d, &m, err, errlen);
    json_decref(j);
    return m;
}

/* The JSON a CLI would send equals, once packed, what the CLI itself packs. */
static void test_request_equals_cli_message(void **state)
{
    (void)state;
    Cairn__Mgmt__Property p = CAIRN__MGMT__PROPERTY__INIT;
    p.name = (char *)"compression";
    p.value = (char *)"lz4";
    Cairn__Mgmt__Property *pp[] = {&p};
    Cairn__Mgmt__DatasetCreate dc = CAIRN__MGMT__DATASET_CREATE__INIT;
    dc.name = (char *)"tank/a";
    dc.parents = true;
    dc.volsize = 1ull << 40;
    dc.props = pp;
    dc.n_props = 1;
    Cairn__Mgmt__Request want = CAIRN__MGMT__REQUEST__INIT;
    want.cmd_case = CAIRN__MGMT__REQUEST__CMD_DS_CREATE;
    want.ds_create = &dc;
    int rc;
    char err[256];
    ProtobufCMessage *got = from_text(
        "{\"ds_create\":{\"name\":\"tank/a\",\"parents\":true,\"volsize\":\"1099511627776\","
        "\"props\":[{\"name\":\"compression\",\"value\":\"lz4\"}]}}",
        &cairn__mgmt__request__descriptor, &rc, err, sizeof err);
    assert_int_equal(rc, 0);
    size_t n1 = cairn__mgmt__request__get_packed_size(&want),
           n2 = protobuf_c_message_get_packed_size(got);
    assert_int_equal(n1, n2);
    uint8_t *b1 = malloc(n1), *b2 = malloc(n2);
    cairn__mgmt__request__pack(&want, b1);
    protobuf_c_message_pack(got, b2);
    assert_memory_equal(b1, b2, n1);
    free(b1);
    free(b2);
    protobuf_c_message_free_unpacked(got, NULL);
}

/* Message -> JSON -> message: the same bytes; enums by name, big uint64 as strings. */
static void test_response_round_trip(void **state)
{
    (void)state;
    Cairn__Mgmt__VdevStatus leaf = CAIRN__MGMT__VDEV_STATUS__INIT;
    leaf.name = (char *)"/dev/a";
    leaf.read_errors = 3;
    leaf.resilvering = true;
    Cairn__Mgmt__VdevStatus *kids[] = {&leaf};
    Cairn__Mgmt__VdevStatus root = CAIRN__MGMT__VDEV_STATUS__INIT;
    root.name = (char *)"tank";
    root.children = kids;
    root.n_children = 1;
    Cairn__Mgmt__ScrubStatus scrub = CAIRN__MGMT__SCRUB_STATUS__INIT;
    scrub.state = CAIRN__MGMT__SCRUB_STATUS__STATE__SCANNING;
    Cairn__Mgmt__PoolStatusResult ps = CAIRN__MGMT__POOL_STATUS_RESULT__INIT;
    ps.name = (char *)"tank";
    ps.guid = 0xfedcba9876543210ull;
    ps.root = &root;
    ps.scrub = &scrub;
    Cairn__Mgmt__PoolStatusResult *pss[] = {&ps};
    Cairn__Mgmt__PoolStatuses st = CAIRN__MGMT__POOL_STATUSES__INIT;
    st.pools = pss;
    st.n_pools = 1;
    Cairn__Mgmt__Response resp = CAIRN__MGMT__RESPONSE__INIT;
    resp.result_case = CAIRN__MGMT__RESPONSE__RESULT_POOL_STATUS;
    resp.pool_status = &st;

    json_t *j = mgmt_json_from_message(&resp.base);
    assert_non_null(j);
    json_t *pool = json_array_get(json_object_get(json_object_get(j, "pool_status"), "pools"), 0);
    assert_string_equal(json_string_value(json_object_get(pool, "guid")), "18364758544493064720");
    assert_string_equal(json_string_value(json_object_get(json_object_get(pool, "scrub"), "state")),
                        "SCANNING");
    assert_null(json_object_get(j, "pong")); /* only the oneof member that is set */
    ProtobufCMessage *back = NULL;
    char err[256];
    assert_int_equal(
        mgmt_json_to_message(j, &cairn__mgmt__response__descriptor, &back, err, sizeof err), 0);
    json_decref(j);
    size_t n1 = cairn__mgmt__response__get_packed_size(&resp),
           n2 = protobuf_c_message_get_packed_size(back);
    assert_int_equal(n1, n2);
    uint8_t *b1 = malloc(n1), *b2 = malloc(n2);
    cairn__mgmt__response__pack(&resp, b1);
    protobuf_c_message_pack(back, b2);
    assert_memory_equal(b1, b2, n1);
    free(b1);
    free(b2);
    protobuf_c_message_free_unpacked(back, NULL);
}

static void expect_refused(const char *text, const char *what)
{
    int rc;
    char err[256] = "";
    ProtobufCMessage *m = from_text(text, &cairn__mgmt__request__descriptor, &rc, err, sizeof err);
    assert_int_equal(rc, -EINVAL);
    assert_null(m);
    if (!strstr(err, what)) fail_msg("error '%s' does not name '%s'", err, what);
}

static void test_bad_input_names_the_field(void **state)
{
    (void)state;
    expect_refused("{\"ds_create\":{\"nmae\":\"x\"}}", "DatasetCreate: unknown field 'nmae'");
    expect_refused("{\"ds_create\":{\"volsize\":-1}}", "DatasetCreate.volsize");
    expect_refused("{\"ds_create\":{\"volsize\":\"12abc\"}}", "DatasetCreate.volsize");
    expect_refused("{\"ds_create\":{\"volblocksize\":4294967296}}", "DatasetCreate.volblocksize");
    expect_refused("{\"ds_create\":{\"parents\":\"yes\"}}", "DatasetCreate.parents");
    expect_refused("{\"ds_create\":{\"name\":7}}", "DatasetCreate.name");
    expect_refused("{\"ds_create\":{\"props\":{}}}", "DatasetCreate.props");
    /* A failure after strings and arrays were made frees them (ASan/LSan builds). */
    expect_refused("{\"ds_create\":{\"name\":\"a\",\"props\":[{\"name\":\"x\"},{\"value\":1}]}}",
                   "Property.value");
    expect_refused("{\"ds_create\":{},\"ds_destroy\":{}}", "oneof");
    expect_refused("[1]", "want a JSON object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_equals_cli_message),
        cmocka_unit_test(test_response_round_trip),
        cmocka_unit_test(test_bad_input_names_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
