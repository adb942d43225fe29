/*
 * cairnd as a systemd service (conf/cairnd.service, Type=notify).
 *
 * systemd learns three things from us through sd_notify(3): READY=1 once the
 * cached pools are imported and every front end serves (so units ordered
 * after cairnd, and `systemctl start` itself, wait for the shares and LUNs,
 * not merely for a process); STATUS= lines saying what a long start is doing
 * (importing pools can take a while after a crash); STOPPING=1 when a clean
 * shutdown begins, so a slow export is not taken for a hang.
 *
 * The watchdog. With WatchdogSec= set, systemd restarts the service when no
 * WATCHDOG=1 arrives in time. The ping comes from the main thread's loop, the
 * one that accepts admin connections and takes signals, so a daemon whose
 * main loop is wedged (a deadlock on the pool table, say) is restarted, and a
 * kill -9 style restart is safe because every acknowledged write is on disk
 * or in the intent log. A pool whose disks stall is deliberately not a reason
 * to stop pinging: a restart cannot cure a disk, and it would cut every other
 * pool's clients; a stalled pool is reported by `pool status` and /metrics.
 *
 * Outside systemd (NOTIFY_SOCKET unset) every call here does nothing.
 */
#include "cairnd.h"

#include <cairn/log.h>

#include <stdarg.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#define SUB "service"

static uint64_t g_watchdog_usec;
static uint64_t g_next_ping_usec;

static uint64_t monotonic_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void cairnd_service_init(void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        g_watchdog_usec = usec;
        log_info(SUB, "systemd watchdog: %llu ms, pinged every %llu ms",
                 (unsigned long long)(usec / 1000), (unsigned long long)(usec / 2000));
    }
}

void cairnd_service_status(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sd_notifyf(0, "STATUS=%s", msg);
}

void cairnd_service_ready(void)
{
    sd_notify(0, "READY=1\nSTATUS=serving");
    g_next_ping_usec = 0;
    cairnd_service_watchdog();
}

void cairnd_service_stopping(void) { sd_notify(0, "STOPPING=1\nSTATUS=exporting pools"); }

int cairnd_service_poll_timeout_ms(void)
{
    if (!g_watchdog_usec) return -1;
    uint64_t now = monotonic_usec();
    if (now >= g_next_ping_usec) return 0;
    return (int)((g_next_ping_usec - now + 999) / 1000);
}

void cairnd_service_watchdog(void)
{
    if (!g_watchdog_usec) return;
    uint64_t now = monotonic_usec();
    if (now < g_next_ping_usec) return;
    sd_notify(0, "WATCHDOG=1");
    /* Twice per period, as sd_watchdog_enabled(3) advises: one late ping is no restart. */
    g_next_ping_usec = now + g_watchdog_usec / 2;
}
