/*
 * `pool status`'s scan lines, as zpool prints them (mgmt_scan_format): while a
 * scrub runs, how much its walk reached and how much it verified, each with its
 * rate over the scrub so far, what it repaired, how much of the allocated space
 * is done and the time left at the rate verified so far; once it finished, what
 * it repaired, how long it took and how many blocks had no good copy.
 */
#include <cairn/mgmt.h>
#include <cairn/util.h>

#include <stdio.h>
#include <time.h>

static void fmt_time(uint64_t t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(buf, len, "%a %b %e %H:%M:%S %Y", &tm);
}

static void fmt_hms(uint64_t secs, char *buf, size_t len)
{
    snprintf(buf, len, "%02llu:%02llu:%02llu", (unsigned long long)(secs / 3600),
             (unsigned long long)(secs / 60 % 60), (unsigned long long)(secs % 60));
}

void mgmt_scan_format(const mgmt_scan_t *s, char *buf, size_t len)
{
    char when[64], a[32], b[32], rep[32], hms[32];
    if (s->state == MGMT_SCAN_NONE) {
        snprintf(buf, len, "  scan: none requested\n");
        return;
    }
    cairn_format_size(s->repaired, rep, sizeof rep);
    if (s->state == MGMT_SCAN_SCANNING) {
        fmt_time(s->start_time, when, sizeof when);
        /* Rates and the time left come from this run of the scan: after a
         * restart, what earlier runs did took a time unknown here. */
        uint64_t run_start = s->run_start ? s->run_start : s->start_time;
        uint64_t elapsed = s->now > run_start ? s->now - run_start : 0;
        uint64_t secs = elapsed ? elapsed : 1;
        uint64_t run_scanned = s->scanned - CAIRN_MIN(s->run_scanned, s->scanned);
        uint64_t run_examined = s->examined - CAIRN_MIN(s->run_examined, s->examined);
        uint64_t run_issued = s->issued - CAIRN_MIN(s->run_issued, s->issued);
        char srate[32], irate[32], total[32], eta[48];
        cairn_format_size(s->scanned, a, sizeof a);
        cairn_format_size(run_scanned / secs, srate, sizeof srate);
        cairn_format_size(s->examined, b, sizeof b);
        cairn_format_size(run_examined / secs, irate, sizeof irate);
        cairn_format_size(s->to_examine, total, sizeof total);
        double pct = s->to_examine ? 100.0 * (double)s->examined / (double)s->to_examine : 0;
        if (pct > 100) pct = 100;
        uint64_t left = s->to_examine > s->examined ? s->to_examine - s->examined : 0;
        if (elapsed && run_examined) {
            /* What is left at the rate verified in this run. */
            fmt_hms((uint64_t)((double)left * (double)elapsed / (double)run_examined), hms,
                    sizeof hms);
            snprintf(eta, sizeof eta, "%s to go", hms);
        } else {
            snprintf(eta, sizeof eta, "no estimated completion time");
        }
        if (s->func == 1) {
            /* A resilver reads only the blocks it rewrites: issued is those. */
            cairn_format_size(s->issued, b, sizeof b);
            cairn_format_size(run_issued / secs, irate, sizeof irate);
        }
        snprintf(buf, len,
                 "  scan: %s in progress since %s\n"
                 "\t%s scanned at %s/s, %s issued at %s/s, %s total\n"
                 "\t%s %s, %.2f%% done, %s\n",
                 s->func != 1 ? "scrub" : s->sequential ? "resilver (sequential)" : "resilver",
                 when, a, srate, b, irate, total, rep,
                 s->func == 1 ? "resilvered" : "repaired", pct, eta);
        return;
    }
    if (s->func == 1) {
        fmt_time(s->end_time, when, sizeof when);
        fmt_hms(s->end_time > s->start_time ? s->end_time - s->start_time : 0, hms, sizeof hms);
        if (s->state == MGMT_SCAN_FINISHED)
            snprintf(buf, len, "  scan: resilvered %s%s in %s with %llu errors on %s\n", rep,
                     s->sequential ? " (sequential)" : "", hms, (unsigned long long)s->errors,
                     when);
        else
            snprintf(buf, len, "  scan: resilver canceled on %s (%s resilvered)\n", when, rep);
        return;
    }
    fmt_time(s->end_time, when, sizeof when);
    cairn_format_size(s->examined, a, sizeof a);
    if (s->state == MGMT_SCAN_FINISHED) {
        fmt_hms(s->end_time > s->start_time ? s->end_time - s->start_time : 0, hms, sizeof hms);
        snprintf(buf, len, "  scan: scrub repaired %s in %s with %llu errors on %s\n\t%s examined\n",
                 rep, hms, (unsigned long long)s->errors, when, a);
        return;
    }
    snprintf(buf, len, "  scan: scrub canceled on %s (%s examined, %s repaired)\n", when, a, rep);
}
