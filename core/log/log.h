#ifndef CHUTE_LOG_LOG_H
#define CHUTE_LOG_LOG_H

/* Levelled, timestamped logging to stderr: a leaf every folder may use. One process-wide level: the
 * engine runs one loop thread, and the level is set before it starts. */

enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN,
    LOG_LEVEL_INFO,
    LOG_LEVEL_DEBUG,
};

extern enum log_level log_threshold;

/* Parses "error", "warn", "info" or "debug"; returns -1 for anything else. */
int log_level_parse(const char *name);

void log_write(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One observer of the lines written (the control API's GET /logs): |fn|
 * gets each line without its timestamp and newline, after it went to
 * stderr. NULL removes it. A line logged from inside |fn| is not passed
 * to it again. */
typedef void (*log_tap_fn)(void *arg, enum log_level level, const char *msg, size_t len);
void log_set_tap(log_tap_fn fn, void *arg);

#define LOG_AT(lvl, ...)                                                                   \
    do {                                                                                   \
        if ((lvl) <= log_threshold)                                                        \
            log_write((lvl), __VA_ARGS__);                                                 \
    } while (0)
#define LOG_ERROR(...) LOG_AT(LOG_LEVEL_ERROR, __VA_ARGS__)
#define LOG_WARN(...) LOG_AT(LOG_LEVEL_WARN, __VA_ARGS__)
#define LOG_INFO(...) LOG_AT(LOG_LEVEL_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) LOG_AT(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
