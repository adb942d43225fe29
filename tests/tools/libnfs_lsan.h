/*
 * Included by each program built on libnfs (one definition per program):
 * libnfs 4.0 keeps the NFSv4 client name that nfs4_set_client_name copies
 * past nfs_destroy_context. Not ours to fix, and LeakSanitizer (the ASan
 * build) would fail the program for it.
 */
#ifndef CAIRN_TESTS_LIBNFS_LSAN_H
#define CAIRN_TESTS_LIBNFS_LSAN_H

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libnfs.so\n";
}

#endif
