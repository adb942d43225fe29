/*
 * Framing on the admin socket.
 *
 * Protobuf messages are not self-delimiting, so each one travels behind a
 * 4-byte little-endian length. The receiver checks the length against
 * MGMT_FRAME_MAX before allocating anything: a confused or hostile client can
 * make the daemon read at most 4 bytes before being told off, never make it
 * allocate gigabytes. A stream that ends between frames is a normal goodbye
 * (-ENOTCONN); one that ends inside a frame is a broken client (-EPROTO).
 */
#include <cairn/mgmt.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void mgmt_frame_header(uint32_t len, uint8_t hdr[MGMT_FRAME_HDR])
{
    hdr[0] = (uint8_t)len;
    hdr[1] = (uint8_t)(len >> 8);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 24);
}

static uint32_t frame_len(const uint8_t *hdr)
{
    return (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
           (uint32_t)hdr[3] << 24;
}

int mgmt_frame_parse(const uint8_t *buf, size_t avail, uint32_t *payload_len)
{
    if (avail < MGMT_FRAME_HDR) return -EAGAIN;
    uint32_t len = frame_len(buf);
    if (len > MGMT_FRAME_MAX) return -EMSGSIZE;
    if (avail - MGMT_FRAME_HDR < len) return -EAGAIN;
    *payload_len = len;
    return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK) n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes; returns the number read before end of stream, or -errno. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int mgmt_frame_send(int fd, const void *payload, size_t len)
{
    if (len > MGMT_FRAME_MAX) return -EMSGSIZE;
    uint8_t hdr[MGMT_FRAME_HDR];
    mgmt_frame_header((uint32_t)len, hdr);
    int rc = write_all(fd, hdr, sizeof hdr);
    if (rc == 0 && len > 0) rc = write_all(fd, payload, len);
    return rc;
}

int mgmt_frame_recv(int fd, uint8_t **payload, size_t *len)
{
    uint8_t hdr[MGMT_FRAME_HDR];
    *payload = NULL;
    *len = 0;
    ssize_t n = read_full(fd, hdr, sizeof hdr);
    if (n < 0) return (int)n;
    if (n == 0) return -ENOTCONN;
    if (n < (ssize_t)sizeof hdr) return -EPROTO;
    uint32_t plen = frame_len(hdr);
    if (plen > MGMT_FRAME_MAX) return -EMSGSIZE;
    uint8_t *buf = malloc(plen ? plen : 1);
    if (!buf) return -ENOMEM;
    n = read_full(fd, buf, plen);
    if (n < 0 || (size_t)n < plen) {
        free(buf);
        return n < 0 ? (int)n : -EPROTO;
    }
    *payload = buf;
    *len = plen;
    return 0;
}
