/* Framing on the admin socket: round trips, partial and oversized headers, garbage,
 * streams cut mid-frame, and protobuf messages surviving the trip. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cairn/mgmt.h>
#include <cairn_mgmt.pb-c.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_header_little_endian(void **state)
{
    (void)state;
    uint8_t h[4];
    mgmt_frame_header(0x01020304, h);
    assert_int_equal(h[0], 0x04);
    assert_int_equal(h[1], 0x03);
    assert_int_equal(h[2], 0x02);
    assert_int_equal(h[3], 0x01);
}

static void test_parse(void **state)
{
    (void)state;
    uint8_t buf[16] = {0};
    uint32_t len = 99;
    assert_int_equal(mgmt_frame_parse(buf, 0, &len), -EAGAIN);
    assert_int_equal(mgmt_frame_parse(buf, 3, &len), -EAGAIN);
    mgmt_frame_header(5, buf);
    assert_int_equal(mgmt_frame_parse(buf, 8, &len), -EAGAIN);
    assert_int_equal(mgmt_frame_parse(buf, 9, &len), 0);
    assert_int_equal(len, 5);
    mgmt_frame_header(0, buf);
    assert_int_equal(mgmt_frame_parse(buf, 4, &len), 0);
    assert_int_equal(len, 0);
    mgmt_frame_header(MGMT_FRAME_MAX, buf);
    assert_int_equal(mgmt_frame_parse(buf, 4, &len), -EAGAIN);
    mgmt_frame_header(MGMT_FRAME_MAX + 1, buf);
    assert_int_equal(mgmt_frame_parse(buf, 4, &len), -EMSGSIZE);
    memset(buf, 0xff, 4); /* garbage header */
    assert_int_equal(mgmt_frame_parse(buf, 16, &len), -EMSGSIZE);
}

static void sockpair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void test_roundtrip_stream(void **state)
{
    (void)state;
    int sv[2];
    sockpair(sv);
    const char *a = "hello", *b = "";
    assert_int_equal(mgmt_frame_send(sv[0], a, 5), 0);
    assert_int_equal(mgmt_frame_send(sv[0], b, 0), 0);
    close(sv[0]);
    uint8_t *p;
    size_t n;
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(p, "hello", 5);
    free(p);
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), 0);
    assert_int_equal(n, 0);
    free(p);
    /* Clean end between frames. */
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), -ENOTCONN);
    assert_null(p);
    close(sv[1]);
}

static void test_truncated_and_oversized(void **state)
{
    (void)state;
    int sv[2];
    uint8_t *p;
    size_t n;
    /* Header cut short. */
    sockpair(sv);
    assert_int_equal(write(sv[0], "\x05\x00", 2), 2);
    close(sv[0]);
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), -EPROTO);
    close(sv[1]);
    /* Payload cut short. */
    sockpair(sv);
    uint8_t h[4];
    mgmt_frame_header(10, h);
    assert_int_equal(write(sv[0], h, 4), 4);
    assert_int_equal(write(sv[0], "abc", 3), 3);
    close(sv[0]);
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), -EPROTO);
    assert_null(p);
    close(sv[1]);
    /* Oversized: refused from the header alone, nothing allocated or read beyond. */
    sockpair(sv);
    mgmt_frame_header(MGMT_FRAME_MAX + 1, h);
    assert_int_equal(write(sv[0], h, 4), 4);
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), -EMSGSIZE);
    close(sv[0]);
    close(sv[1]);
    /* And the sender refuses to produce one. */
    sockpair(sv);
    assert_int_equal(mgmt_frame_send(sv[0], "", (size_t)MGMT_FRAME_MAX + 1), -EMSGSIZE);
    close(sv[0]);
    close(sv[1]);
}

static void test_protobuf_roundtrip_and_garbage(void **state)
{
    (void)state;
    Cairn__Mgmt__PoolScrub sc;
    cairn__mgmt__pool_scrub__init(&sc);
    sc.name = "tank";
    sc.stop = true;
    Cairn__Mgmt__Request req;
    cairn__mgmt__request__init(&req);
    req.cmd_case = CAIRN__MGMT__REQUEST__CMD_POOL_SCRUB;
    req.pool_scrub = &sc;
    size_t len = cairn__mgmt__request__get_packed_size(&req);
    uint8_t *buf = malloc(len);
    cairn__mgmt__request__pack(&req, buf);
    int sv[2];
    sockpair(sv);
    assert_int_equal(mgmt_frame_send(sv[0], buf, len), 0);
    uint8_t *p;
    size_t n;
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), 0);
    Cairn__Mgmt__Request *back = cairn__mgmt__request__unpack(NULL, n, p);
    assert_non_null(back);
    assert_int_equal(back->cmd_case, CAIRN__MGMT__REQUEST__CMD_POOL_SCRUB);
    assert_string_equal(back->pool_scrub->name, "tank");
    assert_true(back->pool_scrub->stop);
    cairn__mgmt__request__free_unpacked(back, NULL);
    free(p);
    /* A frame whose payload is not a Request: framing holds, decoding fails. */
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x52, 0x01};
    assert_int_equal(mgmt_frame_send(sv[0], junk, sizeof junk), 0);
    assert_int_equal(mgmt_frame_send(sv[0], buf, len), 0);
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), 0);
    assert_int_equal(n, sizeof junk);
    assert_null(cairn__mgmt__request__unpack(NULL, n, p));
    free(p);
    /* The next frame on the same stream is intact. */
    assert_int_equal(mgmt_frame_recv(sv[1], &p, &n), 0);
    back = cairn__mgmt__request__unpack(NULL, n, p);
    assert_non_null(back);
    assert_string_equal(back->pool_scrub->name, "tank");
    cairn__mgmt__request__free_unpacked(back, NULL);
    free(p);
    free(buf);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_little_endian),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_roundtrip_stream),
        cmocka_unit_test(test_truncated_and_oversized),
        cmocka_unit_test(test_protobuf_roundtrip_and_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
