/*
 * iscsi_client: drives a Cairn iSCSI LUN through libiscsi's synchronous API
 * for the integration tests.
 *
 *   iscsi_client [options] write  PORTAL TARGET SEED BLOCKS SESSIONS
 *       writes BLOCKS 4 KiB blocks (pattern from SEED and the LBA) spread over
 *       SESSIONS sessions (every other write with FUA), SYNCHRONIZE CACHE on
 *       each, then reads everything back through another session and checks.
 *   iscsi_client [options] verify PORTAL TARGET SEED BLOCKS
 *   iscsi_client [options] syncwrite PORTAL TARGET SEED
 *       writes 4 KiB blocks from LBA 0 on until the LUN is full or the client is
 *       killed: even blocks with FUA, odd ones plainly followed by SYNCHRONIZE
 *       CACHE; prints each block's index once the target acknowledged it durable.
 *   iscsi_client [options] ackwrite PORTAL TARGET SEED BLOCKS ACKFILE
 *       until killed: 4 KiB writes with FUA, the n-th to LBA block n % BLOCKS, each
 *       stamped with n; after each acknowledgement appends "BLOCK N" to ACKFILE and
 *       prints "ready" once on stdout after the first (crash tests).
 *   iscsi_client [options] hawrite PORTAL TARGET SEED BLOCKS
 *       a client of a clustered target: 4 KiB FUA writes to LBA block 0, 1, 2...
 *       (pattern as "write"; "verify SEED N" checks the first N) until killed or
 *       BLOCKS; a failed command is retried on a new session (same block) until it
 *       succeeds, so the target may move to the other head in between. Prints "N MS"
 *       per acknowledged block (MS: wall clock in ms), one "retry ..." line on stderr
 *       per new session (tests/integration/test_ha_cluster.sh).
 *   iscsi_client [options] ackverify PORTAL TARGET SEED BLOCKS ACKFILE
 *       every block holds the write last acknowledged for it in ACKFILE or a later
 *       one, whole (never older, never torn).
 *   iscsi_client [options] login  PORTAL TARGET      (exit 2: login refused)
 *   iscsi_client [options] naa    PORTAL TARGET      prints VPD 0x83's first NAA id
 *   iscsi_client [options] ids    PORTAL TARGET      LUN 0's identity as a multipath
 *       host sees it: "serial=" (VPD 0x80), "naa=", "relport=", "tpg=" (VPD 0x83),
 *       then a "group=ID state=S pref=P port=R" line per REPORT TARGET PORT GROUPS
 *       descriptor (state in hex: 0 active/optimized, 2 standby).
 *   iscsi_client [options] steps  PORTAL TARGET      one session; per line of stdin
 *       one command on LUN 0 (tur, read, write (FUA), inquiry, rtpg), one answer
 *       line each: "good" or "sense KEY ASC ASCQ" in hex; rtpg prints the group
 *       lines as "ids" does, then "end" (ALUA state changes, test_ha_alua.sh).
 *   iscsi_client [options] dump   PORTAL TARGET FILE copies all of LUN 0 into FILE
 *       (sparse: all-zero blocks become holes), so host tools can check what an
 *       initiator left on the LUN (e2fsck, debugfs).
 *   iscsi_client [options] pr PORTAL TARGET LUN OP [ARGS]
 *       one persistent reservation step on LUN (unit attentions cleared first):
 *         register KEY [aptpl]  REGISTER AND IGNORE EXISTING KEY (KEY 0: unregister)
 *         reserve KEY TYPE      RESERVE (TYPE 1 WE, 3 EA, 5/6 RO, 7/8 AR)
 *         keys                  prints the registered keys, one per line (hex)
 *         resv                  prints "KEY TYPE" of the reservation, or "none"
 *         caps                  prints "ptpl_c=N ptpl_a=N" (REPORT CAPABILITIES)
 *         write | read          one block at LBA 0 (exit 3: RESERVATION CONFLICT)
 * options: --initiator IQN  --isid N (a fixed ISID: the same I_T nexus across
 * logins)  --chap USER SECRET  --mutual USER SECRET  --digest
 * Exit 0 on success, 1 on a failure (message on stderr), 2 when login failed.
 */
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BS 4096

static const char *g_initiator = "iqn.2026-11.org.cairn.test:client";
static const char *g_user, *g_secret, *g_muser, *g_msecret;
static int g_digest;
static long long g_isid = -1;

static void pattern(uint8_t *buf, uint64_t seed, uint64_t lba)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (lba + 1) * 0xBF58476D1CE4E5B9ull;
    for (int i = 0; i < BS; i += 8) {
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        memcpy(buf + i, &x, 8);
    }
}

/* The LUN libiscsi's login tests with TEST UNIT READY (clearing unit
 * attentions), -1: none. A LUN behind a standby port answers NOT READY, which
 * fails such a login, so the commands that look at ALUA states log in without. */
static int g_connect_lun = 0;

static struct iscsi_context *session(const char *portal, const char *target, int quiet)
{
    struct iscsi_context *c = iscsi_create_context(g_initiator);
    if (!c) return NULL;
    iscsi_set_targetname(c, target);
    iscsi_set_session_type(c, ISCSI_SESSION_NORMAL);
    if (g_isid >= 0) iscsi_set_isid_random(c, (uint32_t)g_isid, 0);
    if (g_digest) iscsi_set_header_digest(c, ISCSI_HEADER_DIGEST_CRC32C);
    if (g_user) iscsi_set_initiator_username_pwd(c, g_user, g_secret);
    if (g_muser) iscsi_set_target_username_pwd(c, g_muser, g_msecret);
    if (iscsi_full_connect_sync(c, portal, g_connect_lun)) {
        if (!quiet) fprintf(stderr, "login to %s %s: %s\n", portal, target, iscsi_get_error(c));
        iscsi_destroy_context(c);
        return NULL;
    }
    return c;
}

static int check_task(struct iscsi_context *c, struct scsi_task *t, const char *what)
{
    if (!t || t->status != SCSI_STATUS_GOOD) {
        fprintf(stderr, "%s failed: %s\n", what, iscsi_get_error(c));
        if (t) scsi_free_scsi_task(t);
        return 1;
    }
    scsi_free_scsi_task(t);
    return 0;
}

static int verify(struct iscsi_context *c, uint64_t seed, uint64_t blocks)
{
    uint8_t want[BS];
    for (uint64_t lba = 0; lba < blocks; lba += 16) {
        uint32_t n = blocks - lba < 16 ? (uint32_t)(blocks - lba) : 16;
        struct scsi_task *t = iscsi_read16_sync(c, 0, lba * (BS / 512), n * BS, 512, 0, 0, 0, 0, 0);
        if (!t || t->status != SCSI_STATUS_GOOD || !t->datain.data || t->datain.size < (int)(n * BS)) {
            fprintf(stderr, "read at %llu failed: %s\n", (unsigned long long)lba, iscsi_get_error(c));
            if (t) scsi_free_scsi_task(t);
            return 1;
        }
        for (uint32_t k = 0; k < n; k++) {
            pattern(want, seed, lba + k);
            if (memcmp(t->datain.data + (size_t)k * BS, want, BS)) {
                fprintf(stderr, "block %llu differs\n", (unsigned long long)(lba + k));
                scsi_free_scsi_task(t);
                return 1;
            }
        }
        scsi_free_scsi_task(t);
    }
    return 0;
}

/* A block stamped with its write's number n: n and the block number up front,
 * then a pattern derived from both, so a torn or stale block is seen. */
static void stamped(uint8_t *buf, uint64_t seed, uint64_t blk, uint64_t n)
{
    pattern(buf, seed ^ (n * 0x2545F4914F6CDD1Dull), blk);
    memcpy(buf, &n, 8);
    memcpy(buf + 8, &blk, 8);
}

static int ackwrite(struct iscsi_context *c, uint64_t seed, uint64_t blocks, const char *ackpath)
{
    FILE *ack = fopen(ackpath, "a");
    if (!ack) {
        perror(ackpath);
        return 1;
    }
    uint8_t buf[BS];
    for (uint64_t n = 1;; n++) {
        uint64_t blk = n % blocks;
        stamped(buf, seed, blk, n);
        struct scsi_task *t = iscsi_write16_sync(c, 0, blk * (BS / 512), buf, BS, 512, 0, 0, 1, 0, 0);
        if (check_task(c, t, "write")) return 1;
        fprintf(ack, "%llu %llu\n", (unsigned long long)blk, (unsigned long long)n);
        fflush(ack);
        if (n == 1) {
            printf("ready\n");
            fflush(stdout);
        }
    }
}

static int ackverify(struct iscsi_context *c, uint64_t seed, uint64_t blocks, const char *ackpath)
{
    FILE *ack = fopen(ackpath, "r");
    if (!ack) {
        perror(ackpath);
        return 1;
    }
    uint64_t *want = calloc(blocks, sizeof *want);
    unsigned long long b, n;
    uint64_t nacks = 0;
    while (fscanf(ack, "%llu %llu", &b, &n) == 2)
        if (b < blocks && n > want[b]) {
            want[b] = n;
            nacks++;
        }
    fclose(ack);
    int rc = 0;
    uint8_t expect[BS];
    for (uint64_t blk = 0; blk < blocks && !rc; blk++) {
        if (!want[blk]) continue;
        struct scsi_task *t = iscsi_read16_sync(c, 0, blk * (BS / 512), BS, 512, 0, 0, 0, 0, 0);
        if (!t || t->status != SCSI_STATUS_GOOD || t->datain.size < BS) {
            fprintf(stderr, "read of block %llu failed: %s\n", (unsigned long long)blk, iscsi_get_error(c));
            rc = 1;
        } else {
            uint64_t got;
            memcpy(&got, t->datain.data, 8);
            stamped(expect, seed, blk, got);
            if (got < want[blk]) {
                fprintf(stderr, "block %llu: write %llu was acknowledged, found %llu\n",
                        (unsigned long long)blk, (unsigned long long)want[blk], (unsigned long long)got);
                rc = 1;
            } else if (memcmp(expect, t->datain.data, BS)) {
                fprintf(stderr, "block %llu: write %llu is torn\n", (unsigned long long)blk,
                        (unsigned long long)got);
                rc = 1;
            }
        }
        if (t) scsi_free_scsi_task(t);
    }
    if (!rc) printf("%llu acknowledged writes verified\n", (unsigned long long)nacks);
    free(want);
    return rc;
}

static int dump(struct iscsi_context *c, const char *path)
{
    struct scsi_task *t = iscsi_readcapacity16_sync(c, 0);
    struct scsi_readcapacity16 *cap = t && t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(t) : NULL;
    if (!cap || cap->block_length == 0 || 1024 * 1024 % cap->block_length) {
        fprintf(stderr, "read capacity 16 failed: %s\n", iscsi_get_error(c));
        if (t) scsi_free_scsi_task(t);
        return 1;
    }
    uint32_t bl = cap->block_length;
    uint64_t nblocks = cap->returned_lba + 1;
    scsi_free_scsi_task(t);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    static const uint8_t zero[BS];
    const uint32_t chunk = 1024 * 1024 / bl; /* 1 MiB per READ */
    int rc = 0;
    for (uint64_t lba = 0; lba < nblocks && !rc; lba += chunk) {
        uint32_t n = nblocks - lba < chunk ? (uint32_t)(nblocks - lba) : chunk;
        size_t len = (size_t)n * bl;
        t = iscsi_read16_sync(c, 0, lba, (uint32_t)len, (int)bl, 0, 0, 0, 0, 0);
        if (!t || t->status != SCSI_STATUS_GOOD || t->datain.size < (int)len) {
            fprintf(stderr, "read at LBA %llu failed: %s\n", (unsigned long long)lba, iscsi_get_error(c));
            rc = 1;
        }
        for (size_t off = 0; !rc && off < len; off += BS) {
            size_t m = len - off < BS ? len - off : BS;
            if (!memcmp(t->datain.data + off, zero, m)) continue;
            if (fseeko(f, (off_t)(lba * bl + off), SEEK_SET) || fwrite(t->datain.data + off, 1, m, f) != m) {
                perror(path);
                rc = 1;
            }
        }
        if (t) scsi_free_scsi_task(t);
    }
    if (!rc && (fflush(f) || ftruncate(fileno(f), (off_t)(nblocks * bl)))) {
        perror(path);
        rc = 1;
    }
    if (fclose(f)) rc = 1;
    return rc;
}

static int syncwrite(struct iscsi_context *c, uint64_t seed)
{
    struct scsi_task *t = iscsi_readcapacity16_sync(c, 0);
    struct scsi_readcapacity16 *cap = t && t->status == SCSI_STATUS_GOOD ? scsi_datain_unmarshall(t) : NULL;
    if (!cap || !cap->block_length || BS % cap->block_length) {
        fprintf(stderr, "read capacity 16 failed: %s\n", iscsi_get_error(c));
        if (t) scsi_free_scsi_task(t);
        return 1;
    }
    uint64_t blocks = (cap->returned_lba + 1) / (BS / cap->block_length);
    scsi_free_scsi_task(t);
    uint8_t buf[BS];
    for (uint64_t lba = 0; lba < blocks; lba++) {
        pattern(buf, seed, lba);
        int fua = !(lba & 1);
        if (check_task(c, iscsi_write16_sync(c, 0, lba * (BS / 512), buf, BS, 512, 0, 0, fua, 0, 0),
                       "write"))
            return 1;
        if (!fua && check_task(c, iscsi_synchronizecache10_sync(c, 0, 0, 0, 0, 0), "sync cache"))
            return 1;
        printf("%llu\n", (unsigned long long)lba);
        fflush(stdout);
    }
    return 0;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int settle(struct iscsi_context *c, int lun);

/* A session with our own reconnection rules: libiscsi's would retry forever in a
 * sync call, and a command to a head that died must time out instead. */
static struct iscsi_context *ha_session(const char *portal, const char *target)
{
    for (;;) {
        struct iscsi_context *c = session(portal, target, 1);
        if (c) {
            iscsi_set_noautoreconnect(c, 1);
            iscsi_set_timeout(c, 5);
            settle(c, 0); /* the LUN's unit attentions on the new nexus */
            return c;
        }
        usleep(200 * 1000);
    }
}

/* CAIRN_HAWRITE_PACE_MS: a pause after each acknowledged write, so a writer that
 * runs for minutes stays within its pool on a fast machine (0: none). */
static void hawrite_pace(void)
{
    const char *v = getenv("CAIRN_HAWRITE_PACE_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms > 0) usleep((useconds_t)ms * 1000);
}

static int hawrite(const char *portal, const char *target, uint64_t seed, uint64_t blocks)
{
    struct iscsi_context *c = ha_session(portal, target);
    uint8_t buf[BS];
    for (uint64_t lba = 0; lba < blocks; lba++) {
        pattern(buf, seed, lba);
        for (;;) {
            struct scsi_task *t = iscsi_write16_sync(c, 0, lba * (BS / 512), buf, BS, 512, 0, 0, 1, 0, 0);
            int good = t && t->status == SCSI_STATUS_GOOD;
            if (t) scsi_free_scsi_task(t);
            if (good) break;
            fprintf(stderr, "retry block %llu at %llu ms: %s\n", (unsigned long long)lba,
                    (unsigned long long)wall_ms(), iscsi_get_error(c));
            iscsi_destroy_context(c);
            c = ha_session(portal, target);
        }
        printf("%llu %llu\n", (unsigned long long)lba, (unsigned long long)wall_ms());
        fflush(stdout);
        hawrite_pace();
    }
    iscsi_destroy_context(c);
    return 0;
}

/* Runs TEST UNIT READY until no unit attention is left (a LUN that came back
 * has POWER ON pending for every nexus). */
static int settle(struct iscsi_context *c, int lun)
{
    for (int i = 0; i < 16; i++) {
        struct scsi_task *t = iscsi_testunitready_sync(c, lun);
        if (!t) break;
        int st = t->status, ua = st == SCSI_STATUS_CHECK_CONDITION &&
                                 t->sense.key == SCSI_SENSE_UNIT_ATTENTION;
        scsi_free_scsi_task(t);
        if (!ua) return 0;
    }
    fprintf(stderr, "TEST UNIT READY: %s\n", iscsi_get_error(c));
    return 1;
}

static int pr_step(struct iscsi_context *c, int lun, int argc, char **argv)
{
    const char *op = argv[0];
    if (settle(c, lun)) return 1;
    if (!strcmp(op, "register") || !strcmp(op, "reserve")) {
        if (argc < 2 || (!strcmp(op, "reserve") && argc < 3)) {
            fprintf(stderr, "%s needs arguments\n", op);
            return 1;
        }
        struct scsi_persistent_reserve_out_basic p = {0};
        int sa = SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY, type = 0;
        if (!strcmp(op, "register")) {
            p.service_action_reservation_key = strtoull(argv[1], NULL, 16);
            p.aptpl = argc > 2 && !strcmp(argv[2], "aptpl");
        } else {
            sa = SCSI_PERSISTENT_RESERVE_RESERVE;
            p.reservation_key = strtoull(argv[1], NULL, 16);
            type = atoi(argv[2]);
        }
        struct scsi_task *t = iscsi_persistent_reserve_out_sync(c, lun, sa, 0, type, &p);
        if (t && t->status == SCSI_STATUS_RESERVATION_CONFLICT) {
            scsi_free_scsi_task(t);
            return 3;
        }
        return check_task(c, t, op);
    }
    if (!strcmp(op, "write") || !strcmp(op, "read")) {
        uint8_t buf[512];
        memset(buf, 0x5a, sizeof buf);
        struct scsi_task *t = !strcmp(op, "write")
                                  ? iscsi_write10_sync(c, lun, 0, buf, 512, 512, 0, 0, 0, 0, 0)
                                  : iscsi_read10_sync(c, lun, 0, 512, 512, 0, 0, 0, 0, 0);
        if (t && t->status == SCSI_STATUS_RESERVATION_CONFLICT) {
            scsi_free_scsi_task(t);
            return 3;
        }
        return check_task(c, t, op);
    }
    int sa = !strcmp(op, "keys")   ? SCSI_PERSISTENT_RESERVE_READ_KEYS
             : !strcmp(op, "resv") ? SCSI_PERSISTENT_RESERVE_READ_RESERVATION
             : !strcmp(op, "caps") ? SCSI_PERSISTENT_RESERVE_REPORT_CAPABILITIES
                                   : -1;
    if (sa < 0) {
        fprintf(stderr, "unknown pr step %s\n", op);
        return 1;
    }
    struct scsi_task *t = iscsi_persistent_reserve_in_sync(c, lun, sa, 4096);
    if (!t || t->status != SCSI_STATUS_GOOD) return check_task(c, t, op);
    if (sa == SCSI_PERSISTENT_RESERVE_REPORT_CAPABILITIES) {
        /* read from the bytes: libiscsi 1.19 decodes PTPL_A wrongly */
        const uint8_t *b = t->datain.data;
        if (t->datain.size < 8) {
            fprintf(stderr, "caps: short answer\n");
            scsi_free_scsi_task(t);
            return 1;
        }
        printf("ptpl_c=%d ptpl_a=%d\n", b[2] & 1, b[3] & 1);
        scsi_free_scsi_task(t);
        return 0;
    }
    void *d = scsi_datain_unmarshall(t);
    if (!d) {
        fprintf(stderr, "%s: cannot decode the answer\n", op);
        scsi_free_scsi_task(t);
        return 1;
    }
    if (sa == SCSI_PERSISTENT_RESERVE_READ_KEYS) {
        struct scsi_persistent_reserve_in_read_keys *k = d;
        for (int i = 0; i < k->num_keys; i++) printf("%" PRIx64 "\n", k->keys[i]);
    } else {
        struct scsi_persistent_reserve_in_read_reservation *r = d;
        if (r->reserved) printf("%" PRIx64 " %d\n", r->reservation_key, r->pr_type);
        else printf("none\n");
    }
    scsi_free_scsi_task(t);
    return 0;
}

/* VPD page `page` of LUN 0 into buf (at most cap bytes); its length, or -1. */
static int vpd_page(struct iscsi_context *c, int page, uint8_t *buf, size_t cap)
{
    struct scsi_task *t = iscsi_inquiry_sync(c, 0, 1, page, 255);
    int len = -1;
    if (t && t->status == SCSI_STATUS_GOOD && t->datain.size >= 4) {
        len = 4 + (t->datain.data[2] << 8 | t->datain.data[3]);
        if (len > t->datain.size) len = t->datain.size;
        if ((size_t)len > cap) len = (int)cap;
        memcpy(buf, t->datain.data, (size_t)len);
    }
    if (t) scsi_free_scsi_task(t);
    return len;
}

static int print_rtpg(struct iscsi_context *c);

static int print_ids(struct iscsi_context *c)
{
    uint8_t d[256];
    int len = vpd_page(c, 0x80, d, sizeof d);
    if (len < 4) return 1;
    printf("serial=%.*s\n", len - 4, (const char *)d + 4);
    if ((len = vpd_page(c, 0x83, d, sizeof d)) < 4) return 1;
    for (int off = 4; off + 4 <= len && off + 4 + d[off + 3] <= len; off += 4 + d[off + 3]) {
        const uint8_t *p = d + off + 4;
        switch (d[off + 1] & 0x0f) {
        case 3:
            printf("naa=");
            for (int k = 0; k < d[off + 3]; k++) printf("%02x", p[k]);
            printf("\n");
            break;
        case 4: printf("relport=%d\n", p[2] << 8 | p[3]); break;
        case 5: printf("tpg=%d\n", p[2] << 8 | p[3]); break;
        }
    }
    return print_rtpg(c);
}

/* One "group=ID state=S pref=P port=R" line per REPORT TARGET PORT GROUPS
 * descriptor of LUN 0 (state in hex: 0 active/optimized, 2 standby). */
static int print_rtpg(struct iscsi_context *c)
{
    unsigned char cdb[12] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};   /* 256 bytes */
    struct scsi_task *t = scsi_create_task(12, cdb, SCSI_XFER_READ, 256);
    if (!t || !iscsi_scsi_command_sync(c, 0, t, NULL) || t->status != SCSI_STATUS_GOOD ||
        t->datain.size < 4) {
        fprintf(stderr, "REPORT TARGET PORT GROUPS failed: %s\n", iscsi_get_error(c));
        if (t) scsi_free_scsi_task(t);
        return 1;
    }
    const uint8_t *r = t->datain.data;
    int rlen = 4 + (int)((uint32_t)r[0] << 24 | r[1] << 16 | r[2] << 8 | r[3]);
    if (rlen > t->datain.size) rlen = t->datain.size;
    for (int off = 4; off + 8 <= rlen;) {
        int nports = r[off + 7];
        printf("group=%d state=%x pref=%d port=%d\n", r[off + 2] << 8 | r[off + 3], r[off] & 0x0f,
               r[off] >> 7, nports && off + 12 <= rlen ? r[off + 10] << 8 | r[off + 11] : 0);
        off += 8 + 4 * nports;
    }
    scsi_free_scsi_task(t);
    return 0;
}

/* "good", or "sense KEY ASC ASCQ" (hex) for a CHECK CONDITION. */
static int print_outcome(struct iscsi_context *c, struct scsi_task *t)
{
    int rc = 0;
    if (!t) {
        printf("failed %s\n", iscsi_get_error(c));
        rc = 1;
    } else if (t->status == SCSI_STATUS_GOOD) {
        printf("good\n");
    } else if (t->status == SCSI_STATUS_CHECK_CONDITION) {
        printf("sense %x %02x %02x\n", t->sense.key, t->sense.ascq >> 8, t->sense.ascq & 0xff);
    } else {
        printf("status %x\n", t->status);
    }
    if (t) scsi_free_scsi_task(t);
    return rc;
}

/* One session, one command per line of stdin on LUN 0, one answer line each
 * (print_outcome; rtpg: the descriptors, then "end"), flushed at once so a test
 * can interleave them with events on the target. */
static int steps(struct iscsi_context *c)
{
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!strcmp(line, "tur")) {
            print_outcome(c, iscsi_testunitready_sync(c, 0));
        } else if (!strcmp(line, "read")) {
            print_outcome(c, iscsi_read10_sync(c, 0, 0, 512, 512, 0, 0, 0, 0, 0));
        } else if (!strcmp(line, "write")) {
            uint8_t buf[512];
            memset(buf, 0xa5, sizeof buf);
            print_outcome(c, iscsi_write10_sync(c, 0, 0, buf, 512, 512, 0, 0, 1, 0, 0));
        } else if (!strcmp(line, "inquiry")) {
            print_outcome(c, iscsi_inquiry_sync(c, 0, 1, 0x80, 255));
        } else if (!strcmp(line, "rtpg")) {
            if (print_rtpg(c)) return 1;
            printf("end\n");
        } else {
            printf("unknown step %s\n", line);
        }
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        if (!strcmp(argv[i], "--initiator") && i + 1 < argc) g_initiator = argv[++i];
        else if (!strcmp(argv[i], "--chap") && i + 2 < argc) { g_user = argv[++i]; g_secret = argv[++i]; }
        else if (!strcmp(argv[i], "--mutual") && i + 2 < argc) { g_muser = argv[++i]; g_msecret = argv[++i]; }
        else if (!strcmp(argv[i], "--digest")) g_digest = 1;
        else if (!strcmp(argv[i], "--isid") && i + 1 < argc) g_isid = strtoll(argv[++i], NULL, 0);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 1; }
    }
    if (argc - i < 3) {
        fprintf(stderr, "usage: iscsi_client [opts] write|verify|login|naa|ids|dump PORTAL TARGET ...\n");
        return 1;
    }
    const char *cmd = argv[i], *portal = argv[i + 1], *target = argv[i + 2];
    if (!strcmp(cmd, "login")) {
        struct iscsi_context *c = session(portal, target, 1);
        if (!c) return 2;
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return 0;
    }
    if (!strcmp(cmd, "naa")) {
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        struct scsi_task *t = iscsi_inquiry_sync(c, 0, 1, 0x83, 255);
        int rc = 1;
        if (t && t->status == SCSI_STATUS_GOOD && t->datain.size > 4) {
            const uint8_t *d = t->datain.data;
            size_t len = 4 + ((size_t)d[2] << 8 | d[3]);
            if (len > (size_t)t->datain.size) len = (size_t)t->datain.size;
            for (size_t off = 4; off + 4 <= len;) {
                size_t dl = d[off + 3];
                if ((d[off + 1] & 0x0f) == 3 && off + 4 + dl <= len) { /* NAA designator */
                    for (size_t k = 0; k < dl; k++) printf("%02x", d[off + 4 + k]);
                    printf("\n");
                    rc = 0;
                    break;
                }
                off += 4 + dl;
            }
        }
        if (t) scsi_free_scsi_task(t);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (!strcmp(cmd, "ids") || !strcmp(cmd, "steps")) g_connect_lun = -1;
    if (!strcmp(cmd, "ids")) {
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        int rc = settle(c, 0) || print_ids(c);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (!strcmp(cmd, "steps")) {
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        int rc = steps(c);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (!strcmp(cmd, "pr")) {
        if (argc - i < 5) {
            fprintf(stderr, "pr needs LUN OP\n");
            return 1;
        }
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        int rc = pr_step(c, atoi(argv[i + 3]), argc - i - 4, argv + i + 4);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (!strcmp(cmd, "dump")) {
        if (argc - i < 4) {
            fprintf(stderr, "dump needs FILE\n");
            return 1;
        }
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        int rc = dump(c, argv[i + 3]);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (!strcmp(cmd, "syncwrite")) {
        if (argc - i < 4) {
            fprintf(stderr, "syncwrite needs SEED\n");
            return 1;
        }
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        return syncwrite(c, strtoull(argv[i + 3], NULL, 0));
    }
    if (argc - i < 5) {
        fprintf(stderr, "%s needs SEED BLOCKS\n", cmd);
        return 1;
    }
    uint64_t seed = strtoull(argv[i + 3], NULL, 0), blocks = strtoull(argv[i + 4], NULL, 0);
    if (!strcmp(cmd, "hawrite")) return hawrite(portal, target, seed, blocks);
    if (!strcmp(cmd, "ackwrite") || !strcmp(cmd, "ackverify")) {
        if (argc - i < 6 || !blocks) {
            fprintf(stderr, "%s needs SEED BLOCKS ACKFILE\n", cmd);
            return 1;
        }
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        int rc = !strcmp(cmd, "ackwrite") ? ackwrite(c, seed, blocks, argv[i + 5])
                                          : ackverify(c, seed, blocks, argv[i + 5]);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (!strcmp(cmd, "verify")) {
        struct iscsi_context *c = session(portal, target, 0);
        if (!c) return 2;
        int rc = verify(c, seed, blocks);
        iscsi_logout_sync(c);
        iscsi_destroy_context(c);
        return rc;
    }
    if (strcmp(cmd, "write") || argc - i < 6) {
        fprintf(stderr, "unknown command %s\n", cmd);
        return 1;
    }
    int nsess = atoi(argv[i + 5]);
    if (nsess < 1 || nsess > 16) nsess = 1;
    struct iscsi_context *s[16];
    for (int k = 0; k < nsess; k++)
        if (!(s[k] = session(portal, target, 0))) return 2;
    uint8_t buf[BS];
    int rc = 0;
    for (uint64_t lba = 0; lba < blocks && !rc; lba++) {
        struct iscsi_context *c = s[lba % (uint64_t)nsess];
        pattern(buf, seed, lba);
        rc = check_task(c, iscsi_write16_sync(c, 0, lba * (BS / 512), buf, BS, 512, 0, 0,
                                              (int)(lba & 1), 0, 0),
                        "write");
    }
    for (int k = 0; k < nsess && !rc; k++)
        rc = check_task(s[k], iscsi_synchronizecache10_sync(s[k], 0, 0, 0, 0, 0), "sync cache");
    if (!rc) {
        struct iscsi_context *c = session(portal, target, 0);
        rc = c ? verify(c, seed, blocks) : 1;
        if (c) {
            iscsi_logout_sync(c);
            iscsi_destroy_context(c);
        }
    }
    for (int k = 0; k < nsess; k++) {
        iscsi_logout_sync(s[k]);
        iscsi_destroy_context(s[k]);
    }
    return rc;
}
