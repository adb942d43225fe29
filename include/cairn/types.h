/*
 * Common definitions shared by every layer of Cairn.
 *
 * Errors: functions return 0 on success and a negative errno on failure
 * (-EIO, -ENOSPC, -ECKSUM ...), so a caller can pass them up unchanged and the
 * management layer can turn them into one clear message.
 *
 * On-disk structures are little-endian. Cairn runs only on little-endian hosts
 * today; the static assertion below makes a port to a big-endian host fail at
 * build time rather than silently write foreign-endian pools.
 */
#ifndef CAIRN_TYPES_H
#define CAIRN_TYPES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "Cairn's on-disk format is little-endian; add byte swapping before porting");

/* Data read back did not match its checksum (no errno fits; EBADMSG is closest). */
#define ECKSUM EBADMSG

#define CAIRN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CAIRN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CAIRN_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CAIRN_DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))
/* Round x up / down to a multiple of the power of two `align`. */
#define CAIRN_P2ROUNDUP(x, align) ((((x) - 1) | ((__typeof__(x))(align) - 1)) + 1)
#define CAIRN_P2ALIGN(x, align) ((x) & -(__typeof__(x))(align))
#define CAIRN_IS_P2ALIGNED(x, align) ((((x) & ((__typeof__(x))(align) - 1))) == 0)

#define CAIRN_KIB (1024ULL)
#define CAIRN_MIB (1024ULL * 1024)
#define CAIRN_GIB (1024ULL * 1024 * 1024)

#define cairn_likely(x) __builtin_expect(!!(x), 1)
#define cairn_unlikely(x) __builtin_expect(!!(x), 0)

#endif
