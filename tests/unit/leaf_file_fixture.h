/*
 * A sparse file to open as a leaf, in its own directory under $CAIRN_TEST_TMP,
 * for the tests of the vdev layer that drive a real file leaf.
 */
#ifndef LEAF_FILE_FIXTURE_H
#define LEAF_FILE_FIXTURE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct test_leaf_file {
    char dir[512];
    char path[600];
    int fd; /* open on path, for checking what reached the file */
} test_leaf_file_t;

static inline void test_leaf_file_make(test_leaf_file_t *f, const char *tag, uint64_t size)
{
    const char *base = getenv("CAIRN_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0755);
    snprintf(f->dir, sizeof f->dir, "%s/%s.XXXXXX", base, tag);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/leaf0", f->dir);
    f->fd = open(f->path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    assert_true(f->fd >= 0);
    assert_int_equal(ftruncate(f->fd, (off_t)size), 0);
}

static inline void test_leaf_file_remove(test_leaf_file_t *f)
{
    close(f->fd);
    unlink(f->path);
    rmdir(f->dir);
}

#endif
