/*
 * Small helpers used across layers: aligned buffers for direct I/O, time,
 * deterministic pseudo-random numbers for tests and placement, and strings.
 */
#ifndef CAIRN_UTIL_H
#define CAIRN_UTIL_H

#include <cairn/types.h>

#include <stdarg.h>

/* Buffers handed to leaf vdevs are aligned for O_DIRECT. */
#define CAIRN_IO_ALIGN 4096
void *cairn_alloc_aligned(size_t size);   /* zero-filled; aborts on OOM */
void *cairn_zalloc(size_t size);          /* calloc that aborts on OOM */
void *cairn_realloc(void *p, size_t size);/* realloc that aborts on OOM */
char *cairn_strdup(const char *s);        /* strdup that aborts on OOM */

uint64_t cairn_now_ns(void);              /* CLOCK_MONOTONIC */
uint64_t cairn_wallclock_s(void);         /* CLOCK_REALTIME seconds */

/* splitmix64-seeded xoshiro256**: fast, reproducible from a 64-bit seed. */
typedef struct cairn_rng { uint64_t s[4]; } cairn_rng_t;
void cairn_rng_seed(cairn_rng_t *r, uint64_t seed);
uint64_t cairn_rng_next(cairn_rng_t *r);
uint64_t cairn_rng_below(cairn_rng_t *r, uint64_t bound); /* uniform in [0, bound) */

/* A random 64-bit identifier from the OS entropy pool (never 0). */
uint64_t cairn_random_guid(void);

/* snprintf into a fixed buffer; always terminates. */
void cairn_strlcpy(char *dst, const char *src, size_t size);
/* Formats one line into err (err NULL or errlen 0: nothing), for the functions
 * that take char *err, size_t errlen and fill it when they fail. */
void cairn_seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* vsnprintf into buf with newlines made spaces: a message that must stay one line. */
void cairn_vformat_line(char *buf, size_t len, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* A command-line program's failure: "PROG: MESSAGE" as one line on stderr (after
 * what stdout holds), then exit status 1. */
void cairn_vdie(const char *prog, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0), noreturn));

/* pread/pwrite of all len bytes at off, through EINTR and short transfers: 0, or
 * -errno (-EIO where the file ends first). */
int cairn_pread_all(int fd, void *buf, size_t len, uint64_t off);
int cairn_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* "1.5G"-style human size (base 1024) into buf. */
void cairn_format_size(uint64_t bytes, char *buf, size_t len);
/* Parse "128K", "4M", "10G", "512" into bytes; -EINVAL on junk. */
int cairn_parse_size(const char *s, uint64_t *out);

/* memcpy for a destination that will not be read soon (a record written now,
 * compressed by the txg sync seconds later): streaming stores, which skip
 * reading each destination line before writing it. dst 16-byte aligned and n
 * a multiple of 64, else plain memcpy. Ordered before the next lock release. */
void cairn_copy_nontemporal(void *dst, const void *src, size_t n);

/* ThreadSanitizer cannot see the ordering a kernel ring gives: what a thread
 * wrote into a request before queueing it to io_uring is visible to the thread
 * that reaps its completion. These two tell it so, on the request's address;
 * in every other build they are nothing. */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define CAIRN_TSAN_RELEASE(p) __tsan_release((void *)(p))
#define CAIRN_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#else
#define CAIRN_TSAN_RELEASE(p) ((void)(p))
#define CAIRN_TSAN_ACQUIRE(p) ((void)(p))
#endif

#endif
