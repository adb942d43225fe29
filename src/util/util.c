/* Small helpers; see include/cairn/util.h. */
#include <cairn/util.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static void oom(void)
{
    fputs("cairn: out of memory\n", stderr);
    abort();
}

void *cairn_alloc_aligned(size_t size)
{
    void *p = NULL;
    if (size == 0) size = CAIRN_IO_ALIGN;
    if (posix_memalign(&p, CAIRN_IO_ALIGN, CAIRN_P2ROUNDUP(size, (size_t)CAIRN_IO_ALIGN))) oom();
    memset(p, 0, size);
    return p;
}

void *cairn_zalloc(size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p) oom();
    return p;
}

void *cairn_realloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) oom();
    return q;
}

char *cairn_strdup(const char *s)
{
    char *d = strdup(s);
    if (!d) oom();
    return d;
}

uint64_t cairn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t cairn_wallclock_s(void) { return (uint64_t)time(NULL); }

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void cairn_rng_seed(cairn_rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t cairn_rng_next(cairn_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t cairn_rng_below(cairn_rng_t *r, uint64_t bound)
{
    if (bound == 0) return 0;
    return (uint64_t)(((unsigned __int128)cairn_rng_next(r) * bound) >> 64);
}

uint64_t cairn_random_guid(void)
{
    uint64_t g = 0;
    while (g == 0) {
        if (getrandom(&g, sizeof g, 0) != sizeof g) {
            uint64_t seed = cairn_now_ns() ^ (uint64_t)(uintptr_t)&g;
            g = splitmix64(&seed);
        }
    }
    return g;
}

void cairn_strlcpy(char *dst, const char *src, size_t size)
{
    if (!size) return;
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

void cairn_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "BKMGTPE";
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 6) { v /= 1024.0; u++; }
    if (u == 0) snprintf(buf, len, "%llu", (unsigned long long)bytes);
    else if (v < 10.0) snprintf(buf, len, "%.2f%c", v, units[u]);
    else if (v < 100.0) snprintf(buf, len, "%.1f%c", v, units[u]);
    else snprintf(buf, len, "%.0f%c", v, units[u]);
}

int cairn_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s) return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -EINVAL;
    uint64_t mult = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'B': mult = 1; break;
        case 'K': mult = CAIRN_KIB; break;
        case 'M': mult = CAIRN_MIB; break;
        case 'G': mult = CAIRN_GIB; break;
        case 'T': mult = CAIRN_GIB * 1024; break;
        case 'P': mult = CAIRN_GIB * 1024 * 1024; break;
        default: return -EINVAL;
        }
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return -EINVAL;
    }
    double r = v * (double)mult;
    if (r > 1.8e19) return -ERANGE;
    *out = (uint64_t)r;
    return 0;
}

#if defined(__SSE2__)
#include <emmintrin.h>
void cairn_copy_nontemporal(void *dst, const void *src, size_t n)
{
    if (((uintptr_t)dst & 15) || (n & 63)) {
        memcpy(dst, src, n);
        return;
    }
    __m128i *d = dst;
    const __m128i *s = src;
    for (size_t i = 0; i < n / 16; i += 4) {
        __m128i a = _mm_loadu_si128(s + i), b = _mm_loadu_si128(s + i + 1);
        __m128i c = _mm_loadu_si128(s + i + 2), e = _mm_loadu_si128(s + i + 3);
        _mm_stream_si128(d + i, a);
        _mm_stream_si128(d + i + 1, b);
        _mm_stream_si128(d + i + 2, c);
        _mm_stream_si128(d + i + 3, e);
    }
    _mm_sfence();
}
#else
void cairn_copy_nontemporal(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
#endif

void cairn_vformat_line(char *buf, size_t len, const char *fmt, va_list ap)
{
    vsnprintf(buf, len, fmt, ap);
    for (char *p = buf; *p; p++)
        if (*p == '\n') *p = ' ';
}

static int pio_all(int fd, uint8_t *p, size_t len, uint64_t off, bool write)
{
    while (len) {
        ssize_t n = write ? pwrite(fd, p, len, (off_t)off) : pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int cairn_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    return pio_all(fd, buf, len, off, false);
}

int cairn_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    return pio_all(fd, (uint8_t *)buf, len, off, true);
}

void cairn_vdie(const char *prog, const char *fmt, va_list ap)
{
    char msg[2048];
    cairn_vformat_line(msg, sizeof msg, fmt, ap);
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", prog, msg);
    exit(1);
}

void cairn_seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
