/*
 * One line per event: "<time> <LEVEL> <subsystem>: message". A single
 * fprintf per line keeps lines whole when several threads log at once.
 *
 * Sinks. stderr always gets the line: in the foreground it is the terminal,
 * daemonized it is STATE_DIR/cairnd.log, and under systemd it is the journal.
 * The journal stamps and orders lines itself and wants the priority as a
 * "<N>" prefix (sd-daemon(3)), so when stderr is the stream systemd handed us
 * (JOURNAL_STREAM names its device and inode) the line carries that prefix
 * instead of our timestamp; an administrator then filters with
 * `journalctl -p warning` as with any other service. Two optional sinks sit
 * beside it, for sites that collect logs elsewhere: syslog(3) (facility
 * daemon) and an extra file, so "the journal or syslog as well as a file"
 * holds whichever way the daemon was started.
 */
#include <cairn/log.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static int g_level = -1;
static bool g_stderr_is_journal;
static bool g_syslog;
static FILE *g_file;

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

bool cairn_log_detect_journal(void)
{
    const char *stream = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    g_stderr_is_journal = stream && sscanf(stream, "%llu:%llu", &dev, &ino) == 2 &&
                          fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
                          (unsigned long long)st.st_ino == ino;
    return g_stderr_is_journal;
}

void cairn_log_enable_syslog(const char *ident)
{
    openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
    g_syslog = true;
}

int cairn_log_open_file(const char *path)
{
    FILE *f = fopen(path, "ae");
    if (!f) return -errno;
    setvbuf(f, NULL, _IOLBF, 0);
    g_file = f;
    return 0;
}

void cairn_log(cairn_log_level_t level, const char *subsystem, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    /* syslog(3) priorities; the journal's "<N>" prefix uses the same numbers. */
    static const int priorities[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
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
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    if (g_stderr_is_journal)
        fprintf(stderr, "<%d>%s: %s\n", priorities[level], subsystem, msg);
    else
        fprintf(stderr, "%s %s %s: %s\n", stamp, names[level], subsystem, msg);
    if (g_file) fprintf(g_file, "%s %s %s: %s\n", stamp, names[level], subsystem, msg);
    if (g_syslog) syslog(priorities[level], "%s: %s", subsystem, msg);
}
