/*
 * iscsi_tmf: task management with commands outstanding, for the integration
 * tests. Two sessions (A and B, two initiators) on raw sockets log in with
 * InitialR2T=Yes and ImmediateData=No, so a WRITE stays in its data phase at
 * the target - outstanding for sure - until this program sends its Data-Out;
 * libiscsi's own queueing (immediate PDUs overtake commands, its TMF calls
 * cancel every local task) cannot hold a command there on purpose.
 *
 *   iscsi_tmf HOST PORT TARGET FUNC
 *   FUNC: abort-task | abort-task-set | clear-task-set | lun-reset | warm-reset
 *
 * On LUN 0 (512-byte blocks): A writes the "old" pattern to LBAs 0-47 and B
 * to LBAs 1024-1039. A then sends three WRITEs of the "new" pattern (LBAs 0,
 * 16, 32) and B one (LBA 1024), each answered by an R2T and left without
 * data. A sends the TMF (ABORT TASK names A's second write) and must get
 * FUNCTION COMPLETE with no status for an aborted write; A then sends the
 * Data-Out of all three (a late initiator's data for aborted tasks is
 * dropped silently), answers a ping, sees BUS DEVICE RESET after a reset and
 * reads back: aborted writes left the old pattern, the others the new one.
 * B's next command reports what happened to it (a reset's BUS DEVICE RESET,
 * CLEAR TASK SET's COMMANDS CLEARED BY ANOTHER INITIATOR, else nothing).
 * B then sends its data and logs out; the target answers the logout only once
 * B's write is done, so B's write status shows before it exactly when the
 * write ran: it must for ABORT TASK and ABORT TASK SET (they concern A's
 * nexus only) and must not for CLEAR TASK SET and the resets (every nexus).
 * Exit 0 when the target behaved, 1 otherwise (why on stderr), 2 on setup
 * failures.
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

#define BLK 512u
#define WBLOCKS 16u          /* every write: 16 blocks, one R2T, one Data-Out */
#define WBYTES (WBLOCKS * BLK)

typedef struct conn {
    const char *name;
    int fd;
    uint32_t cmdsn, statsn, itt;
} conn_t;

typedef struct pdu {
    uint8_t bhs[ISCSI_BHS_LEN];
    uint8_t data[65536];
    uint32_t len;
} pdu_t;

static int failed;

static void bad(const conn_t *c, const char *fmt, const char *what)
{
    fprintf(stderr, "%s: ", c->name);
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n");
    failed = 1;
}

static void pattern(uint8_t *buf, uint32_t lba, uint32_t nblocks, uint8_t gen)
{
    for (uint32_t i = 0; i < nblocks * BLK; i++)
        buf[i] = (uint8_t)((lba + i / BLK) * 7 + gen * 31 + (i % BLK));
}

static int send_pdu(conn_t *c, uint8_t *bhs, const void *data, uint32_t len)
{
    bhs[5] = (uint8_t)(len >> 16);
    bhs[6] = (uint8_t)(len >> 8);
    bhs[7] = (uint8_t)len;
    uint8_t out[ISCSI_BHS_LEN + WBYTES + 4];
    if (len > WBYTES) return -1;
    memcpy(out, bhs, ISCSI_BHS_LEN);
    if (len) memcpy(out + ISCSI_BHS_LEN, data, len);
    uint32_t pad = (4 - (len & 3)) & 3;
    memset(out + ISCSI_BHS_LEN + len, 0, pad);
    size_t n = ISCSI_BHS_LEN + len + pad;
    return send(c->fd, out, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int recv_all(conn_t *c, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        if (poll(&pfd, 1, 20000) <= 0) return -ETIMEDOUT;
        ssize_t r = recv(c->fd, p, len, 0);
        if (r == 0) return -ECONNRESET;
        if (r < 0) return -errno;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* One PDU (no digests, no AHS); its opcode, or -errno. */
static int recv_pdu(conn_t *c, pdu_t *p)
{
    int rc = recv_all(c, p->bhs, ISCSI_BHS_LEN);
    if (rc) return rc;
    p->len = (uint32_t)p->bhs[5] << 16 | p->bhs[6] << 8 | p->bhs[7];
    uint32_t padded = (p->len + 3) & ~3u;
    if (p->bhs[4] || padded > sizeof p->data) return -EPROTO;
    if ((rc = recv_all(c, p->data, padded))) return rc;
    int op = p->bhs[0] & 0x3f;
    if (op != ISCSI_OP_R2T && (op != ISCSI_OP_DATA_IN || (p->bhs[1] & 1)))
        c->statsn = iscsi_get32(p->bhs + 24) + 1;
    return op;
}

static int login(conn_t *c, const char *host, int port, const char *target, const char *ini,
                 uint8_t isid)
{
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa)) return -1;
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "InitiatorName=%s%cSessionType=Normal%cTargetName=%s%cHeaderDigest=None%c"
                     "DataDigest=None%cMaxRecvDataSegmentLength=65536%cImmediateData=No%c"
                     "InitialR2T=Yes%cMaxBurstLength=262144%cFirstBurstLength=65536%c",
                     ini, 0, 0, target, 0, 0, 0, 0, 0, 0, 0, 0);
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = 0x40 | ISCSI_OP_LOGIN_REQ;
    bhs[1] = 0x87; /* T, CSG 1, NSG 3 */
    bhs[8] = 0x80;
    bhs[13] = isid;
    c->cmdsn = 1;
    iscsi_put32(bhs + 24, c->cmdsn);
    if (send_pdu(c, bhs, text, (uint32_t)n)) return -1;
    pdu_t *r = malloc(sizeof *r);
    int op = recv_pdu(c, r);
    int ok = op == ISCSI_OP_LOGIN_RSP && !r->bhs[36] && !r->bhs[37] && (r->bhs[1] & 3) == 3;
    if (!ok) fprintf(stderr, "%s: login failed (op %d status %02x%02x)\n", c->name, op, r->bhs[36], r->bhs[37]);
    free(r);
    c->itt = 0x100;
    return ok ? 0 : -1;
}

/* Sends a WRITE(10) of WBLOCKS blocks at lba and waits for its R2T; *itt,
 * *ttt name it for the Data-Out. */
static int write_begin(conn_t *c, uint32_t lba, uint32_t *itt, uint32_t *ttt, uint32_t *cmdsn)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_SCSI_CMD;
    bhs[1] = 0x80 | 0x20 | 0x01; /* F, W, SIMPLE */
    *itt = c->itt++;
    *cmdsn = c->cmdsn++;
    iscsi_put32(bhs + 16, *itt);
    iscsi_put32(bhs + 20, WBYTES);
    iscsi_put32(bhs + 24, *cmdsn);
    iscsi_put32(bhs + 28, c->statsn);
    bhs[32] = 0x2a;
    iscsi_put32(bhs + 34, lba);
    bhs[39] = WBLOCKS;
    if (send_pdu(c, bhs, NULL, 0)) return -1;
    pdu_t *r = malloc(sizeof *r);
    int op = recv_pdu(c, r);
    int ok = op == ISCSI_OP_R2T && iscsi_get32(r->bhs + 16) == *itt &&
             iscsi_get32(r->bhs + 40) == 0 && iscsi_get32(r->bhs + 44) == WBYTES;
    if (ok) *ttt = iscsi_get32(r->bhs + 20);
    else fprintf(stderr, "%s: wanted the R2T of a write, got opcode 0x%02x\n", c->name, op);
    free(r);
    return ok ? 0 : -1;
}

static int data_out(conn_t *c, uint32_t itt, uint32_t ttt, uint32_t lba, uint8_t gen)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0}, buf[WBYTES];
    bhs[0] = ISCSI_OP_DATA_OUT;
    bhs[1] = 0x80;
    iscsi_put32(bhs + 16, itt);
    iscsi_put32(bhs + 20, ttt);
    iscsi_put32(bhs + 28, c->statsn);
    pattern(buf, lba, WBLOCKS, gen);
    return send_pdu(c, bhs, buf, WBYTES);
}

/* Receives until the SCSI Response of itt; its status, or -1. */
static int wait_status(conn_t *c, uint32_t itt, uint8_t *sense_key, uint8_t *asc)
{
    pdu_t *r = malloc(sizeof *r);
    int st = -1;
    for (int i = 0; i < 64; i++) {
        int op = recv_pdu(c, r);
        if (op < 0) break;
        if (op == ISCSI_OP_NOP_IN || op == ISCSI_OP_ASYNC) continue;
        if (op != ISCSI_OP_SCSI_RSP || iscsi_get32(r->bhs + 16) != itt) {
            fprintf(stderr, "%s: unexpected opcode 0x%02x (itt %u) waiting for itt %u\n", c->name,
                    op, iscsi_get32(r->bhs + 16), itt);
            break;
        }
        st = r->bhs[3];
        if (sense_key) *sense_key = r->len >= 2 + 13 ? r->data[2 + 2] & 0x0f : 0;
        if (asc) *asc = r->len >= 2 + 13 ? r->data[2 + 12] : 0;
        break;
    }
    free(r);
    return st;
}

static int write_sync(conn_t *c, uint32_t lba, uint8_t gen)
{
    uint32_t itt, ttt, sn;
    if (write_begin(c, lba, &itt, &ttt, &sn) || data_out(c, itt, ttt, lba, gen)) return -1;
    return wait_status(c, itt, NULL, NULL) == 0 ? 0 : -1;
}

/* TEST UNIT READY: its status; sense key and ASC of a CHECK CONDITION. */
static int tur(conn_t *c, uint8_t *key, uint8_t *asc)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_SCSI_CMD;
    bhs[1] = 0x80 | 0x01;
    uint32_t itt = c->itt++;
    iscsi_put32(bhs + 16, itt);
    iscsi_put32(bhs + 24, c->cmdsn++);
    iscsi_put32(bhs + 28, c->statsn);
    if (send_pdu(c, bhs, NULL, 0)) return -1;
    *key = *asc = 0;
    return wait_status(c, itt, key, asc);
}

/* Clears pending unit attentions; the first one's ASC in *first (0: none). */
static int settle(conn_t *c, uint8_t *first)
{
    *first = 0;
    for (int i = 0; i < 8; i++) {
        uint8_t key, asc;
        int st = tur(c, &key, &asc);
        if (st == 0) return 0;
        if (st != 2 || key != 6) return -1;
        if (!*first) *first = asc;
    }
    return -1;
}

/* Sends READ(10) of n blocks at lba; -1 or 0 with *itt its task tag. */
static int send_read(conn_t *c, uint32_t lba, uint32_t n, uint32_t *itt)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = ISCSI_OP_SCSI_CMD;
    bhs[1] = 0x80 | 0x40 | 0x01;
    *itt = c->itt++;
    iscsi_put32(bhs + 16, *itt);
    iscsi_put32(bhs + 20, n * BLK);
    iscsi_put32(bhs + 24, c->cmdsn++);
    iscsi_put32(bhs + 28, c->statsn);
    bhs[32] = 0x28;
    iscsi_put32(bhs + 34, lba);
    iscsi_put16(bhs + 39, (uint16_t)n);
    return send_pdu(c, bhs, NULL, 0);
}

/* READ(10) of n blocks at lba, compared with the pattern of generation gen. */
static int check_read(conn_t *c, uint32_t lba, uint32_t n, uint8_t gen, const char *what)
{
    uint32_t itt;
    if (send_read(c, lba, n, &itt)) return -1;
    uint8_t *got = calloc(n, BLK), *want = malloc(n * BLK);
    pattern(want, lba, n, gen);
    pdu_t *r = malloc(sizeof *r);
    int rc = -1;
    for (;;) {
        int op = recv_pdu(c, r);
        if (op == ISCSI_OP_DATA_IN && iscsi_get32(r->bhs + 16) == itt) {
            uint32_t off = iscsi_get32(r->bhs + 40);
            if (off + r->len <= n * BLK) memcpy(got + off, r->data, r->len);
            if (!(r->bhs[1] & 1)) continue;
            rc = r->bhs[3] == 0 ? 0 : -1;
        } else if (op == ISCSI_OP_SCSI_RSP && iscsi_get32(r->bhs + 16) == itt) {
            rc = r->bhs[3] == 0 ? 0 : -1;
        } else if (op == ISCSI_OP_NOP_IN) {
            continue;
        }
        break;
    }
    if (rc) {
        bad(c, "READ of %s failed", what);
    } else if (memcmp(got, want, n * BLK)) {
        bad(c, "%s: not what it should hold", what);
        rc = -1;
    }
    free(r);
    free(got);
    free(want);
    return rc;
}

static int tmf(conn_t *c, uint8_t fn, uint32_t rtt, uint32_t refcmdsn, pdu_t *r)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = 0x40 | ISCSI_OP_TMF_REQ;
    bhs[1] = 0x80 | fn;
    uint32_t itt = c->itt++;
    iscsi_put32(bhs + 16, itt);
    iscsi_put32(bhs + 20, rtt);
    iscsi_put32(bhs + 24, c->cmdsn);
    iscsi_put32(bhs + 28, c->statsn);
    iscsi_put32(bhs + 32, refcmdsn);
    if (send_pdu(c, bhs, NULL, 0)) return -1;
    /* Nothing may come before the answer: every write is still waiting for
     * its data, so none may have a status. */
    int op = recv_pdu(c, r);
    if (op != ISCSI_OP_TMF_RSP || iscsi_get32(r->bhs + 16) != itt) {
        fprintf(stderr, "%s: wanted the TMF response, got opcode 0x%02x (itt %u)\n", c->name, op,
                iscsi_get32(r->bhs + 16));
        return -1;
    }
    return r->bhs[2];
}

static int ping(conn_t *c)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = 0x40 | ISCSI_OP_NOP_OUT;
    bhs[1] = 0x80;
    uint32_t itt = c->itt++;
    iscsi_put32(bhs + 16, itt);
    iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
    iscsi_put32(bhs + 24, c->cmdsn);
    iscsi_put32(bhs + 28, c->statsn);
    if (send_pdu(c, bhs, "ping", 4)) return -1;
    pdu_t *r = malloc(sizeof *r);
    int op = recv_pdu(c, r);
    int ok = op == ISCSI_OP_NOP_IN && iscsi_get32(r->bhs + 16) == itt;
    free(r);
    return ok ? 0 : -1;
}

/* Logs out; *status_of = whether the SCSI Response of itt came first. */
static int logout(conn_t *c, uint32_t itt, int *status_of, int *status)
{
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    bhs[0] = 0x40 | ISCSI_OP_LOGOUT_REQ;
    bhs[1] = 0x80;
    uint32_t litt = c->itt++;
    iscsi_put32(bhs + 16, litt);
    iscsi_put32(bhs + 24, c->cmdsn);
    iscsi_put32(bhs + 28, c->statsn);
    if (send_pdu(c, bhs, NULL, 0)) return -1;
    pdu_t *r = malloc(sizeof *r);
    int rc = -1;
    *status_of = 0;
    for (int i = 0; i < 16; i++) {
        int op = recv_pdu(c, r);
        if (op == ISCSI_OP_SCSI_RSP && iscsi_get32(r->bhs + 16) == itt) {
            *status_of = 1;
            *status = r->bhs[3];
            continue;
        }
        if (op == ISCSI_OP_NOP_IN || op == ISCSI_OP_ASYNC) continue;
        if (op == ISCSI_OP_LOGOUT_RSP && iscsi_get32(r->bhs + 16) == litt && r->bhs[2] == 0) rc = 0;
        else fprintf(stderr, "%s: wanted the logout response, got opcode 0x%02x\n", c->name, op);
        break;
    }
    free(r);
    close(c->fd);
    return rc;
}

/* Large READs in flight, then a Logout or an ABORT TASK SET right behind
 * them. A cached READ of 64 KiB or more is answered by the session's sender
 * thread, not the reader that takes the next PDU: still, every READ that
 * answers must have all its data and its status out before the answer to
 * what came after it, and must hold what was written. */
static int reads_then(conn_t *c, bool use_logout)
{
    enum { NR = 48, RB = 256 }; /* 48 READs of 128 KiB (the window is 64) */
    const uint32_t base = 16384;
    const uint8_t gen = 3;
    for (uint32_t lba = base; lba < base + NR * RB; lba += WBLOCKS)
        if (write_sync(c, lba, gen)) return 2;
    uint32_t itt[NR];
    uint8_t *got[NR], *want = malloc(RB * BLK);
    int status[NR];
    for (int i = 0; i < NR; i++) {
        got[i] = calloc(RB, BLK);
        status[i] = -1;
        if (send_read(c, base + (uint32_t)i * RB, RB, &itt[i])) return 2;
    }
    uint8_t bhs[ISCSI_BHS_LEN] = {0};
    uint32_t aitt = c->itt++;
    bhs[0] = 0x40 | (use_logout ? ISCSI_OP_LOGOUT_REQ : ISCSI_OP_TMF_REQ);
    bhs[1] = (uint8_t)(0x80 | (use_logout ? 0 : 2)); /* close the session / ABORT TASK SET */
    iscsi_put32(bhs + 16, aitt);
    if (!use_logout) iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
    iscsi_put32(bhs + 24, c->cmdsn);
    iscsi_put32(bhs + 28, c->statsn);
    if (send_pdu(c, bhs, NULL, 0)) return 2;
    pdu_t *r = malloc(sizeof *r);
    bool answered = false;
    while (!answered) {
        int op = recv_pdu(c, r);
        if (op < 0) {
            bad(c, "%s", "the connection ended before the answer");
            break;
        }
        uint32_t t = iscsi_get32(r->bhs + 16);
        if (t == aitt && (op == ISCSI_OP_LOGOUT_RSP || op == ISCSI_OP_TMF_RSP)) {
            if (r->bhs[2] != 0) bad(c, "%s", "the answer is not a success");
            answered = true;
            continue;
        }
        int i = 0;
        while (i < NR && itt[i] != t) i++;
        if (i == NR || (op != ISCSI_OP_DATA_IN && op != ISCSI_OP_SCSI_RSP)) {
            if (op != ISCSI_OP_NOP_IN && op != ISCSI_OP_ASYNC) bad(c, "%s", "an unexpected PDU");
            continue;
        }
        if (status[i] >= 0) bad(c, "%s", "a PDU after its task's status");
        if (op == ISCSI_OP_DATA_IN) {
            uint32_t off = iscsi_get32(r->bhs + 40);
            if (off + r->len <= RB * BLK) memcpy(got[i] + off, r->data, r->len);
            if (r->bhs[1] & 1) status[i] = r->bhs[3];
        } else {
            status[i] = r->bhs[3];
        }
    }
    int answered_reads = 0;
    for (int i = 0; i < NR; i++) {
        if (status[i] < 0) {
            if (use_logout) bad(c, "%s", "a READ had no status before the logout response");
            continue;
        }
        answered_reads++;
        pattern(want, base + (uint32_t)i * RB, RB, gen);
        if (status[i] != 0) bad(c, "%s", "a READ failed");
        else if (memcmp(got[i], want, RB * BLK)) bad(c, "%s", "a READ returned the wrong data");
    }
    /* After ABORT TASK SET nothing more may come for those READs. */
    if (!use_logout && ping(c)) bad(c, "%s", "no answer to a ping after the abort");
    if (!failed)
        printf("ok: %d of %d READs of 128 KiB answered in full before the %s\n", answered_reads,
               NR, use_logout ? "logout" : "ABORT TASK SET");
    for (int i = 0; i < NR; i++) free(got[i]);
    free(want);
    free(r);
    if (use_logout) close(c->fd);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: iscsi_tmf HOST PORT TARGET FUNC\n");
        return 2;
    }
    const char *host = argv[1], *target = argv[3], *f = argv[4];
    int port = atoi(argv[2]);
    if (!strcmp(f, "reads-logout") || !strcmp(f, "reads-abort-task-set")) {
        conn_t c = {.name = "R"};
        uint8_t ua;
        if (login(&c, host, port, target, "iqn.2026-11.org.cairn.test:tmf-r", 0x33) ||
            settle(&c, &ua))
            return 2;
        return reads_then(&c, !strcmp(f, "reads-logout"));
    }
    uint8_t fn = !strcmp(f, "abort-task")       ? 1
                 : !strcmp(f, "abort-task-set") ? 2
                 : !strcmp(f, "clear-task-set") ? 4
                 : !strcmp(f, "lun-reset")      ? 5
                 : !strcmp(f, "warm-reset")     ? 6
                                                : 0;
    if (!fn) {
        fprintf(stderr, "unknown function %s\n", f);
        return 2;
    }
    bool reset = fn == 5 || fn == 6, b_aborted = fn >= 4;
    conn_t a = {.name = "A"}, b = {.name = "B"};
    uint8_t ua;
    if (login(&a, host, port, target, "iqn.2026-11.org.cairn.test:tmf-a", 0x11) ||
        login(&b, host, port, target, "iqn.2026-11.org.cairn.test:tmf-b", 0x22) ||
        settle(&a, &ua) || settle(&b, &ua))
        return 2;
    const uint8_t OLD = 1, NEW = 2;
    for (uint32_t lba = 0; lba < 3 * WBLOCKS; lba += WBLOCKS)
        if (write_sync(&a, lba, OLD)) return 2;
    if (write_sync(&b, 1024, OLD)) return 2;

    /* Outstanding: three writes of A, one of B, each waiting for its data. */
    uint32_t itt[3], ttt[3], sn[3], bitt, bttt, bsn;
    for (int i = 0; i < 3; i++)
        if (write_begin(&a, (uint32_t)i * WBLOCKS, &itt[i], &ttt[i], &sn[i])) return 2;
    if (write_begin(&b, 1024, &bitt, &bttt, &bsn)) return 2;

    pdu_t *r = malloc(sizeof *r);
    int resp = tmf(&a, fn, fn == 1 ? itt[1] : ISCSI_RSVD_TAG, fn == 1 ? sn[1] : 0, r);
    free(r);
    if (resp != 0) {
        fprintf(stderr, "A: %s answered %d, not FUNCTION COMPLETE\n", f, resp);
        return 1;
    }
    /* The data of every write: dropped for the aborted ones, taken for the rest. */
    for (int i = 0; i < 3; i++)
        if (data_out(&a, itt[i], ttt[i], (uint32_t)i * WBLOCKS, NEW)) return 1;
    if (fn == 1) {
        if (wait_status(&a, itt[0], NULL, NULL) != 0) bad(&a, "%s: the first write failed", f);
        if (wait_status(&a, itt[2], NULL, NULL) != 0) bad(&a, "%s: the third write failed", f);
    }
    if (ping(&a)) bad(&a, "%s: no answer to a ping afterwards", f);
    if (settle(&a, &ua)) bad(&a, "%s: TEST UNIT READY fails afterwards", f);
    if (reset && ua != 0x29) bad(&a, "%s: no BUS DEVICE RESET unit attention", f);
    if (!reset && ua) bad(&a, "%s: an unexpected unit attention", f);
    if (fn == 1) {
        check_read(&a, 0, WBLOCKS, NEW, "the first write (not aborted)");
        check_read(&a, WBLOCKS, WBLOCKS, OLD, "the aborted write's blocks");
        check_read(&a, 2 * WBLOCKS, WBLOCKS, NEW, "the third write (not aborted)");
    } else {
        check_read(&a, 0, 3 * WBLOCKS, OLD, "the aborted writes' blocks");
    }
    /* The session goes on: a write and a read. */
    if (write_sync(&a, 4096, NEW)) bad(&a, "%s: a write afterwards failed", f);
    check_read(&a, 4096, WBLOCKS, NEW, "a write made afterwards");

    /* B hears of it: BUS DEVICE RESET after a reset, COMMANDS CLEARED BY
     * ANOTHER INITIATOR after CLEAR TASK SET (TAS=0), nothing otherwise. */
    uint8_t bkey, basc, want_asc = fn == 4 ? 0x2f : reset ? 0x29 : 0;
    int bst0 = tur(&b, &bkey, &basc);
    if (want_asc ? bst0 != 2 || bkey != 6 || basc != want_asc : bst0 != 0) {
        fprintf(stderr, "B: %s: TEST UNIT READY status %d sense %x/%02x, wanted %s %02x\n", f,
                bst0, bkey, basc, want_asc ? "unit attention" : "none", want_asc);
        failed = 1;
    }
    /* B's write: aborted by what concerns every nexus, not by the rest. */
    if (data_out(&b, bitt, bttt, 1024, NEW)) return 1;
    int ran = 0, bst = -1;
    if (logout(&b, bitt, &ran, &bst)) bad(&b, "%s: logout failed", f);
    if (b_aborted && ran) bad(&b, "%s: another session's outstanding write still ran", f);
    if (!b_aborted && (!ran || bst != 0)) bad(&b, "%s: another session's write was lost", f);
    check_read(&a, 1024, WBLOCKS, b_aborted ? OLD : NEW, "the other session's write");
    int st = 0;
    if (logout(&a, ISCSI_RSVD_TAG, &ran, &st)) bad(&a, "%s: logout failed", f);
    if (!failed) printf("ok: %s with writes outstanding in two sessions\n", f);
    return failed;
}
