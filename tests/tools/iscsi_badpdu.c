/*
 * iscsi_badpdu: a hostile initiator on a raw socket, for the bad-input
 * integration test. It logs in by hand (so it can negotiate digests libiscsi
 * lacks) and then misbehaves in one of these ways:
 *
 *   garbage   random bytes instead of a login          -> connection closed
 *   badopcode an unassigned opcode                     -> Reject 0x05, session lives
 *   oversize  a data segment beyond MaxRecvDSL         -> Reject / connection closed
 *   cmdsn     a command far beyond the CmdSN window    -> ignored, session lives
 *   hdigest   a wrong header digest                    -> connection closed
 *   ddigest   a wrong data digest on a NOP-Out         -> Reject 0x02, session lives
 *   baddata   Data-Out at the wrong offset             -> Reject, connection closed
 *
 * usage: iscsi_badpdu HOST PORT TARGET CASE. Exit 0 when the target behaved.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/iscsi/iscsi_impl.h"

static int g_fd;
static int g_hd, g_dd;
static uint32_t g_cmdsn = 1, g_statsn;

static int send_pdu(uint8_t *bhs, const void *data, uint32_t len, int corrupt_hd, int corrupt_dd)
{
    bhs[5] = (uint8_t)(len >> 16);
    bhs[6] = (uint8_t)(len >> 8);
    bhs[7] = (uint8_t)len;
    uint8_t out[48 + 4 + 8192 + 8];
    size_t n = 0;
    memcpy(out, bhs, 48);
    n = 48;
    if (g_hd) {
        uint32_t c = iscsi_crc32c(0, bhs, 48) ^ (corrupt_hd ? 1u : 0u);
        memcpy(out + n, &c, 4);
        n += 4;
    }
    if (len) {
        if (len > 8192) return -1;
        memcpy(out + n, data, len);
        uint32_t pad = (4 - (len & 3)) & 3;
        memset(out + n + len, 0, pad);
        uint32_t c = iscsi_crc32c(0, out + n, len + pad) ^ (corrupt_dd ? 1u : 0u);
        n += len + pad;
        if (g_dd) {
            memcpy(out + n, &c, 4);
            n += 4;
        }
    }
    return send(g_fd, out, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int recv_all(void *buf, size_t len, int timeout_ms)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pfd = {.fd = g_fd, .events = POLLIN};
        if (poll(&pfd, 1, timeout_ms) <= 0) return -ETIMEDOUT;
        ssize_t r = recv(g_fd, p, len, 0);
        if (r == 0) return -ECONNRESET;
        if (r < 0) return -errno;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Receives one PDU; returns its opcode, -ECONNRESET when closed. */
static int recv_pdu(uint8_t bhs[48], uint8_t *data, size_t cap, uint32_t *dlen)
{
    int rc = recv_all(bhs, 48, 10000);
    if (rc) return rc;
    uint32_t len = (uint32_t)bhs[5] << 16 | bhs[6] << 8 | bhs[7];
    uint32_t total = bhs[4] * 4u + (g_hd ? 4 : 0) + ((len + 3) & ~3u) + (g_dd && len ? 4 : 0);
    uint8_t *tmp = malloc(total + 1);
    rc = recv_all(tmp, total, 10000);
    if (!rc && data) {
        size_t off = bhs[4] * 4u + (g_hd ? 4 : 0);
        memcpy(data, tmp + off, len < cap ? len : cap);
    }
    free(tmp);
    if (rc) return rc;
    if (dlen) *dlen = len;
    if ((bhs[0] & 0x3f) != 0x25 && (bhs[0] & 0x3f) != 0x31) g_statsn = iscsi_get32(bhs + 24) + 1;
    return bhs[0] & 0x3f;
}

static int wait_closed(void)
{
    uint8_t bhs[48];
    for (int i = 0; i < 20; i++) {
        int rc = recv_pdu(bhs, NULL, 0, NULL);
        if (rc == -ECONNRESET) return 0;
        if (rc < 0) return rc == -ETIMEDOUT ? 1 : 0;
    }
    return 1;
}

static int connect_to(const char *host, int port)
{
    g_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    return connect(g_fd, (struct sockaddr *)&sa, sizeof sa);
}

static int login(const char *target, int hd, int dd)
{
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "InitiatorName=iqn.2026-11.org.cairn.test:hostile%cSessionType=Normal%c"
                     "TargetName=%s%cHeaderDigest=%s%cDataDigest=%s%cMaxRecvDataSegmentLength=65536%c"
                     "ImmediateData=Yes%cInitialR2T=Yes%c",
                     0, 0, target, 0, hd ? "CRC32C" : "None", 0, dd ? "CRC32C" : "None", 0, 0, 0, 0);
    uint8_t bhs[48] = {0};
    bhs[0] = 0x43;
    bhs[1] = 0x87; /* T, CSG 1, NSG 3 */
    bhs[8] = 0x80;
    bhs[13] = 0x42; /* ISID */
    iscsi_put32(bhs + 24, g_cmdsn);
    if (send_pdu(bhs, text, (uint32_t)n, 0, 0)) return -1;
    uint8_t r[48];
    int op = recv_pdu(r, NULL, 0, NULL);
    if (op != 0x23 || r[36] || r[37] || !(r[1] & 0x80) || (r[1] & 3) != 3) {
        fprintf(stderr, "login failed: op %d status %02x%02x\n", op, r[36], r[37]);
        return -1;
    }
    g_hd = hd;
    g_dd = dd;
    return 0;
}

/* A NOP-Out ping must come back: the session is alive. */
static int ping(uint32_t itt, const void *data, uint32_t len, int corrupt_dd)
{
    uint8_t bhs[48] = {0};
    bhs[0] = 0x40; /* immediate NOP-Out */
    bhs[1] = 0x80;
    iscsi_put32(bhs + 16, itt);
    iscsi_put32(bhs + 20, 0xffffffff);
    iscsi_put32(bhs + 24, g_cmdsn);
    iscsi_put32(bhs + 28, g_statsn);
    return send_pdu(bhs, data, len, 0, corrupt_dd);
}

static int expect_nop_in(uint32_t itt)
{
    uint8_t r[48];
    for (int i = 0; i < 10; i++) {
        int op = recv_pdu(r, NULL, 0, NULL);
        if (op < 0) return 1;
        if (op == 0x20 && iscsi_get32(r + 16) == itt) return 0;
    }
    return 1;
}

static int expect_reject(uint8_t reason)
{
    uint8_t r[48];
    int op = recv_pdu(r, NULL, 0, NULL);
    if (op != 0x3f || r[2] != reason) {
        fprintf(stderr, "wanted Reject 0x%02x, got opcode 0x%02x reason 0x%02x\n", reason, op, r[2]);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: iscsi_badpdu HOST PORT TARGET CASE\n");
        return 2;
    }
    const char *host = argv[1], *target = argv[3], *c = argv[4];
    if (connect_to(host, atoi(argv[2]))) {
        perror("connect");
        return 2;
    }
    if (!strcmp(c, "garbage")) {
        uint8_t junk[4096];
        srand(99);
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rand();
        if (send(g_fd, junk, sizeof junk, MSG_NOSIGNAL) < 0) return 0; /* already closed */
        return wait_closed();
    }
    if (login(target, !strcmp(c, "hdigest") || !strcmp(c, "ddigest"), !strcmp(c, "ddigest")))
        return 1;
    uint8_t bhs[48] = {0};
    if (!strcmp(c, "badopcode")) {
        bhs[0] = 0x40 | 0x1c;
        bhs[1] = 0x80;
        iscsi_put32(bhs + 16, 7);
        send_pdu(bhs, NULL, 0, 0, 0);
        if (expect_reject(0x05)) return 1;
        ping(8, "abcd", 4, 0);
        return expect_nop_in(8);
    }
    if (!strcmp(c, "oversize")) {
        bhs[0] = 0x40;
        bhs[1] = 0x80;
        bhs[5] = bhs[6] = bhs[7] = 0xff;
        if (send(g_fd, bhs, 48, MSG_NOSIGNAL) != 48) return 1;
        return wait_closed();
    }
    if (!strcmp(c, "cmdsn")) {
        bhs[0] = 0x01; /* TEST UNIT READY, far beyond the window */
        bhs[1] = 0x80;
        iscsi_put32(bhs + 16, 9);
        iscsi_put32(bhs + 24, g_cmdsn + 100000);
        send_pdu(bhs, NULL, 0, 0, 0);
        ping(10, NULL, 0, 0);
        uint8_t r[48];
        int op = recv_pdu(r, NULL, 0, NULL);
        if (op != 0x20 || iscsi_get32(r + 16) != 10) {
            fprintf(stderr, "the out-of-window command was answered (op 0x%02x)\n", op);
            return 1;
        }
        if (iscsi_get32(r + 28) != g_cmdsn) {
            fprintf(stderr, "ExpCmdSN moved to %u\n", iscsi_get32(r + 28));
            return 1;
        }
        /* The same command in order is answered. */
        iscsi_put32(bhs + 24, g_cmdsn);
        send_pdu(bhs, NULL, 0, 0, 0);
        op = recv_pdu(r, NULL, 0, NULL);
        return op == 0x21 && iscsi_get32(r + 16) == 9 ? 0 : 1;
    }
    if (!strcmp(c, "hdigest")) {
        bhs[0] = 0x40;
        bhs[1] = 0x80;
        iscsi_put32(bhs + 16, 11);
        iscsi_put32(bhs + 20, 0xffffffff);
        send_pdu(bhs, NULL, 0, 1, 0);
        return wait_closed();
    }
    if (!strcmp(c, "ddigest")) {
        ping(12, "pingdata", 8, 1);
        if (expect_reject(0x02)) return 1;
        ping(13, "pingdata", 8, 0);
        return expect_nop_in(13);
    }
    if (!strcmp(c, "baddata")) {
        /* WRITE(10) of one 512-byte block with no immediate data: R2T, then
         * Data-Out at offset 256 instead of 0. */
        bhs[0] = 0x01;
        bhs[1] = 0x80 | 0x20;
        iscsi_put32(bhs + 16, 14);
        iscsi_put32(bhs + 20, 512);
        iscsi_put32(bhs + 24, g_cmdsn++);
        bhs[32] = 0x2a;
        bhs[39] = 1;
        send_pdu(bhs, NULL, 0, 0, 0);
        uint8_t r[48];
        int op = recv_pdu(r, NULL, 0, NULL);
        if (op != 0x31) {
            fprintf(stderr, "wanted R2T, got 0x%02x\n", op);
            return 1;
        }
        uint8_t d[48] = {0}, block[512] = {0};
        d[0] = 0x05;
        d[1] = 0x80;
        iscsi_put32(d + 16, 14);
        memcpy(d + 20, r + 20, 4);
        iscsi_put32(d + 40, 256);
        send_pdu(d, block, 256, 0, 0);
        if (expect_reject(0x04)) return 1;
        return wait_closed();
    }
    fprintf(stderr, "unknown case %s\n", c);
    return 2;
}
