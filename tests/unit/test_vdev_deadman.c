/*
 * The file leaf's deadman: an I/O that vanished before the kernel saw it (as
 * one did under heavy load) must not hang its caller forever. With shortened
 * thresholds, a write and a read that never reach the kernel are found by the
 * periodic scan, cancelled (the kernel does not know them), declared lost and
 * redone synchronously: the caller gets success and the bytes are on disk.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "leaf_file_fixture.h"

#include <cairn/util.h>
#include <cairn/vdev.h>
#include <cairn/vdev_fault.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_lost_io_is_redone(void **state)
{
    (void)state;
    alarm(60); /* without the deadman the lost I/O would hang the test: fail instead */
    test_leaf_file_t f;
    test_leaf_file_make(&f, "deadman", 64 * CAIRN_MIB);
    int fd = f.fd;

    vdev_file_test_deadman(50 * 1000000ULL, 200 * 1000000ULL);
    vdev_t *leaf = NULL;
    assert_int_equal(vdev_leaf_open(f.path, &leaf), 0);
    uint8_t *buf = cairn_alloc_aligned(65536);
    for (size_t i = 0; i < 65536; i++) buf[i] = (uint8_t)(i * 7 + 1);

    /* A write that never reaches the kernel still completes, and lands. */
    assert_int_equal(vdev_file_test_lose_next(leaf), 0);
    uint64_t t0 = cairn_now_ns();
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, 8 * CAIRN_MIB, buf, 65536), 0);
    assert_true(cairn_now_ns() - t0 >= 200 * 1000000ULL); /* it did go through the deadman */
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_FLUSH, 0, NULL, 0), 0);
    uint8_t *check = cairn_alloc_aligned(65536);
    assert_int_equal(pread(fd, check, 65536, 8 * CAIRN_MIB), 65536);
    assert_memory_equal(check, buf, 65536);

    /* So does a read. */
    memset(check, 0, 65536);
    assert_int_equal(vdev_file_test_lose_next(leaf), 0);
    assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_READ, 8 * CAIRN_MIB, check, 65536), 0);
    assert_memory_equal(check, buf, 65536);

    /* I/O that the kernel completes normally is untouched by the short thresholds. */
    for (int i = 0; i < 50; i++)
        assert_int_equal(vdev_leaf_io_sync(leaf, VDEV_IO_WRITE, 16 * CAIRN_MIB + i * 65536ULL, buf,
                                           65536), 0);

    vdev_free(leaf);
    vdev_file_test_deadman(30ULL * 1000000000ULL, 120ULL * 1000000000ULL);
    test_leaf_file_remove(&f);
    free(buf);
    free(check);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_lost_io_is_redone)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
