/*
 * One line per event: "<time> <LEVEL> <subsystem>: message". A single
 * fprintf per line keeps lines whole when several threads log at once.
 */
#include <cairn/log.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int g_level = -1;

static int level_from_env(void)
{
    const char *e = getenv("CAIRN_LOG");
    if (!e) return CAIRN_LOG_INFO;
    if (!strcasecmp(e, "error")) return CAIRN_LOG_ERROR;
    if (!strcasecmp(e, "warn")) return CAIRN_LOG_WARN;
    if (!strcasecmp(e, "debug")) return CAIRN_LOG_DEBUG;
    return CAIRN_LOG_INFO;
}

void cairn_log_set_level(cairn_log_level_t level) { g_level = (int)level; }

cairn_log_level_t cairn_log_get_level(void)
{
    if (g_level < 0) g_level = level_from_env();
    return (cairn_log_level_t)g_level;
}

void cairn_log(cairn_log_level_t level, const char *subsystem, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    if ((int)level > (int)cairn_log_get_level()) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
            names[level], subsystem, msg);
}
