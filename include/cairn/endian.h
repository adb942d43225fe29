/*
 * Byte order of the bytes Cairn reads and writes, in one place.
 *
 * On-disk structures are little-endian (docs/ondisk-format.md) and wire
 * protocols (SCSI CDBs and parameter data, iSCSI PDUs) big-endian. The helpers
 * name the order they read or write, so a reader of a decoder sees the format
 * and not the host: cairn_get_le64 is correct on any host, and on the
 * little-endian hosts Cairn builds for (types.h asserts it) it compiles to one
 * unaligned load. All of them take unaligned pointers.
 */
#ifndef CAIRN_ENDIAN_H
#define CAIRN_ENDIAN_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t cairn_get_le16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static inline uint32_t cairn_get_le32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static inline uint64_t cairn_get_le64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}
static inline void cairn_put_le16(void *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static inline void cairn_put_le32(void *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static inline void cairn_put_le64(void *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static inline uint16_t cairn_get_be16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return be16toh(v);
}
static inline uint32_t cairn_get_be24(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
}
static inline uint32_t cairn_get_be32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return be32toh(v);
}
static inline uint64_t cairn_get_be64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return be64toh(v);
}
static inline void cairn_put_be16(void *p, uint16_t v)
{
    v = htobe16(v);
    memcpy(p, &v, 2);
}
static inline void cairn_put_be24(void *p, uint32_t v)
{
    uint8_t *b = p;
    b[0] = (uint8_t)(v >> 16);
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)v;
}
static inline void cairn_put_be32(void *p, uint32_t v)
{
    v = htobe32(v);
    memcpy(p, &v, 4);
}
static inline void cairn_put_be64(void *p, uint64_t v)
{
    v = htobe64(v);
    memcpy(p, &v, 8);
}

#endif
