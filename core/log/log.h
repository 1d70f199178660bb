#ifndef CHUTE_LOG_LOG_H
#define CHUTE_LOG_LOG_H

/* Levelled, timestamped logging to stderr or a file, as text or JSON: a
 * leaf every folder may use. One process-wide level and format: the
 * engine runs one loop thread, and they are set before it starts. */

#include <stddef.h>
#include <stdint.h>

enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN,
    LOG_LEVEL_INFO,
    LOG_LEVEL_DEBUG,
};

extern enum log_level log_threshold;

/* Parses "error", "warn", "info" or "debug"; returns -1 for anything else. */
int log_level_parse(const char *name);

/* LOG_FORMAT_TEXT: "TIME LEVEL message"; LOG_FORMAT_JSON: one object per
 * line (log/json.c). */
enum log_format {
    LOG_FORMAT_TEXT = 0,
    LOG_FORMAT_JSON,
};
extern enum log_format log_format;
/* Parses "text" or "json"; -1 for anything else. */
int log_format_parse(const char *name);

void log_write(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fields a JSON line carries besides those its format names (log/json.c:
 * "key=%s" in a format is a field already). For values the text line
 * holds inside a preformatted %s (the flow close line). */
enum log_field_type {
    LOG_FIELD_STR, /* |str|; NULL: left out */
    LOG_FIELD_U64, /* |u| */
    LOG_FIELD_SEC, /* |d| seconds, written with milliseconds */
};
struct log_field {
    const char *key;
    enum log_field_type type;
    const char *str;
    uint64_t u;
    double d;
};
#define LOG_FIELD_S(k, v) {(k), LOG_FIELD_STR, (v), 0, 0}
#define LOG_FIELD_N(k, v) {(k), LOG_FIELD_U64, NULL, (v), 0}
#define LOG_FIELD_T(k, v) {(k), LOG_FIELD_SEC, NULL, 0, (v)}
/* log_write with |n| extra |fields| (read during the call). */
void log_write_fields(enum log_level level, const struct log_field *fields, size_t n,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* log_write for a message made only of chute's own names and numbers
 * ("stats flows=3 ..."): its JSON line takes every key=value token of the
 * formatted message, not only those the format names. Never for a line
 * that carries a client's or a remote's string. */
void log_write_kv(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* log_file: lines go to |path| (opened O_APPEND, created 0640) instead of
 * stderr; NULL goes back to stderr. Returns 0, or -1 with |err| naming the
 * path and the reason (the output is unchanged then). log_file_reopen
 * opens the same path again, for logrotate's SIGUSR2 after it moved the
 * file; 0 when there is no file. Writers on other threads are safe: the
 * new file takes the old one's descriptor number (dup2). */
int log_file_open(const char *path, char *err, size_t errlen);
int log_file_reopen(char *err, size_t errlen);

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
#define LOG_KV(lvl, ...)                                                                   \
    do {                                                                                   \
        if ((lvl) <= log_threshold)                                                        \
            log_write_kv((lvl), __VA_ARGS__);                                              \
    } while (0)

#endif
