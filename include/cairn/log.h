/*
 * Logging: one line per event on stderr, with a level, as the daemon's
 * interface promises. The level threshold comes from CAIRN_LOG (error, warn,
 * info, debug); libraries log sparingly and never for expected conditions.
 */
#ifndef CAIRN_LOG_H
#define CAIRN_LOG_H

#include <stdarg.h>

typedef enum cairn_log_level {
    CAIRN_LOG_ERROR = 0,
    CAIRN_LOG_WARN = 1,
    CAIRN_LOG_INFO = 2,
    CAIRN_LOG_DEBUG = 3,
} cairn_log_level_t;

void cairn_log_set_level(cairn_log_level_t level);
cairn_log_level_t cairn_log_get_level(void);
void cairn_log(cairn_log_level_t level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(sub, ...) cairn_log(CAIRN_LOG_ERROR, sub, __VA_ARGS__)
#define log_warn(sub, ...) cairn_log(CAIRN_LOG_WARN, sub, __VA_ARGS__)
#define log_info(sub, ...) cairn_log(CAIRN_LOG_INFO, sub, __VA_ARGS__)
#define log_debug(sub, ...) cairn_log(CAIRN_LOG_DEBUG, sub, __VA_ARGS__)

#endif
