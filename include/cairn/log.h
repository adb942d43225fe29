/*
 * Logging: one line per event on stderr, with a level, as the daemon's
 * interface promises. The level threshold comes from CAIRN_LOG (error, warn,
 * info, debug); libraries log sparingly and never for expected conditions.
 * The daemon may add sinks (the journal's priority prefix, syslog, a file);
 * see src/util/log.c.
 */
#ifndef CAIRN_LOG_H
#define CAIRN_LOG_H

#include <stdarg.h>
#include <stdbool.h>

typedef enum cairn_log_level {
    CAIRN_LOG_ERROR = 0,
    CAIRN_LOG_WARN = 1,
    CAIRN_LOG_INFO = 2,
    CAIRN_LOG_DEBUG = 3,
} cairn_log_level_t;

void cairn_log_set_level(cairn_log_level_t level);
cairn_log_level_t cairn_log_get_level(void);
/* Call once stderr is final: true (and "<N>" prefixes from then on) when
 * stderr is the journal stream systemd gave us. */
bool cairn_log_detect_journal(void);
/* Copy every line to syslog(3), facility daemon. */
void cairn_log_enable_syslog(const char *ident);
/* Copy every line to the file at path (appended); -errno if it cannot open. */
int cairn_log_open_file(const char *path);
void cairn_log(cairn_log_level_t level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(sub, ...) cairn_log(CAIRN_LOG_ERROR, sub, __VA_ARGS__)
#define log_warn(sub, ...) cairn_log(CAIRN_LOG_WARN, sub, __VA_ARGS__)
#define log_info(sub, ...) cairn_log(CAIRN_LOG_INFO, sub, __VA_ARGS__)
#define log_debug(sub, ...) cairn_log(CAIRN_LOG_DEBUG, sub, __VA_ARGS__)

#endif
