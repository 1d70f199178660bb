#ifndef CHUTE_ENGINE_LOG_H
#define CHUTE_ENGINE_LOG_H

/* Levelled, timestamped logging to stderr. One process-wide level: the
 * engine runs one loop thread, and the level is set before it starts. */

enum engine_log_level {
    ENGINE_LOG_ERROR = 0,
    ENGINE_LOG_WARN,
    ENGINE_LOG_INFO,
    ENGINE_LOG_DEBUG,
};

extern enum engine_log_level engine_log_level;

/* Parses "error", "warn", "info" or "debug"; returns -1 for anything else. */
int engine_log_level_parse(const char *name);

void engine_log_write(enum engine_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define LOG_AT(lvl, ...)                                                                   \
    do {                                                                                   \
        if ((lvl) <= engine_log_level)                                                     \
            engine_log_write((lvl), __VA_ARGS__);                                          \
    } while (0)
#define LOG_ERROR(...) LOG_AT(ENGINE_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) LOG_AT(ENGINE_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) LOG_AT(ENGINE_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) LOG_AT(ENGINE_LOG_DEBUG, __VA_ARGS__)

#endif
