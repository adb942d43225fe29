/*
 * iscsi_writeperf: the write half iscsi-perf lacks, for tools/bench/iscsi-perf.sh.
 * Keeps QD WRITE(16)s of BLOCKS 512-byte blocks in flight for SECONDS with
 * libiscsi's asynchronous API, sequential or random (-r), and prints
 * "iops N mbps M bytes B".
 *
 *   iscsi_writeperf [-r] PORTAL TARGET LUN BLOCKS QD SECONDS
 */
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct iscsi_context *g_c;
static int g_lun, g_random, g_inflight, g_failed;
static uint32_t g_blocks;
static uint64_t g_nblocks_lun, g_next, g_done;
static unsigned char *g_buf;
static double g_end;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void issue(void);

static void done_cb(struct iscsi_context *c, int status, void *data, void *priv)
{
    (void)c;
    (void)priv;
    struct scsi_task *t = data;
    if (status != SCSI_STATUS_GOOD) g_failed = 1;
    scsi_free_scsi_task(t);
    g_inflight--;
    g_done++;
    if (now() < g_end && !g_failed) issue();
}

static void issue(void)
{
    uint64_t lba;
    uint64_t slots = g_nblocks_lun / g_blocks;
    if (g_random) lba = ((uint64_t)rand() * 65536u + (uint64_t)rand()) % slots * g_blocks;
    else {
        lba = g_next;
        g_next += g_blocks;
        if (g_next + g_blocks > g_nblocks_lun) g_next = 0;
    }
    if (iscsi_write16_task(g_c, g_lun, lba, g_buf, g_blocks * 512, 512, 0, 0, 0, 0, 0, done_cb,
                           NULL) == NULL) {
        g_failed = 1;
        return;
    }
    g_inflight++;
}

int main(int argc, char **argv)
{
    int i = 1;
    if (argc > 1 && !strcmp(argv[1], "-r")) {
        g_random = 1;
        i++;
    }
    if (argc - i != 6) {
        fprintf(stderr, "usage: iscsi_writeperf [-r] PORTAL TARGET LUN BLOCKS QD SECONDS\n");
        return 1;
    }
    const char *portal = argv[i], *target = argv[i + 1];
    g_lun = atoi(argv[i + 2]);
    g_blocks = (uint32_t)atoi(argv[i + 3]);
    int qd = atoi(argv[i + 4]);
    double secs = atof(argv[i + 5]);
    g_c = iscsi_create_context("iqn.2026-11.org.cairn.test:writeperf");
    iscsi_set_targetname(g_c, target);
    iscsi_set_session_type(g_c, ISCSI_SESSION_NORMAL);
    if (iscsi_full_connect_sync(g_c, portal, g_lun)) {
        fprintf(stderr, "login: %s\n", iscsi_get_error(g_c));
        return 1;
    }
    struct scsi_task *t = iscsi_readcapacity16_sync(g_c, g_lun);
    struct scsi_readcapacity16 *rc16 = t ? scsi_datain_unmarshall(t) : NULL;
    if (!rc16) {
        fprintf(stderr, "readcapacity16 failed\n");
        return 1;
    }
    g_nblocks_lun = (rc16->returned_lba + 1) * (rc16->block_length / 512);
    scsi_free_scsi_task(t);
    g_buf = malloc(g_blocks * 512);
    for (uint32_t k = 0; k < g_blocks * 512; k++) g_buf[k] = (unsigned char)(k * 31 + 7);
    srand(1);
    double start = now();
    g_end = start + secs;
    for (int k = 0; k < qd; k++) issue();
    while (g_inflight > 0) {
        struct pollfd pfd = {.fd = iscsi_get_fd(g_c), .events = iscsi_which_events(g_c)};
        if (poll(&pfd, 1, 1000) < 0) break;
        if (iscsi_service(g_c, pfd.revents) < 0) {
            fprintf(stderr, "service: %s\n", iscsi_get_error(g_c));
            return 1;
        }
    }
    double el = now() - start;
    uint64_t bytes = g_done * g_blocks * 512ull;
    printf("iops %.0f mbps %.1f bytes %llu\n", g_done / el, bytes / el / 1e6, (unsigned long long)bytes);
    iscsi_logout_sync(g_c);
    iscsi_destroy_context(g_c);
    return g_failed;
}
