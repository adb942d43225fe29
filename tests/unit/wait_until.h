/*
 * WAIT_UNTIL for the unit tests that wait on another thread's progress (a held
 * flush, a queue reaching a depth): polls cond every millisecond; a minute
 * without it fails the test, as a hang, never as a pace. Needs cmocka.h first.
 */
#ifndef WAIT_UNTIL_H
#define WAIT_UNTIL_H

#include <unistd.h>

#define WAIT_UNTIL(cond, what)                                                        \
    do {                                                                              \
        int waited_ms_ = 0;                                                           \
        while (!(cond)) {                                                             \
            if (++waited_ms_ > 60000) fail_msg("never: %s", what);                    \
            usleep(1000);                                                             \
        }                                                                             \
    } while (0)

#endif
