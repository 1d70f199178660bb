#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/log_int.h"

enum log_level log_threshold = LOG_LEVEL_INFO;
enum log_format log_format = LOG_FORMAT_TEXT;

/* Where lines go: stderr, or log_file's descriptor, which keeps its number
 * for the life of the process (a reopen dup2()s the new file onto it). */
static int out_fd = 2, file_fd = -1;
static char *file_path;

static log_tap_fn tap;
static void *tap_arg;
static int in_tap;

void
log_set_tap(log_tap_fn fn, void *arg)
{
    tap = fn;
    tap_arg = arg;
}

static const char *const names[] = {"error", "warn", "info", "debug"};

int
log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int
log_format_parse(const char *name)
{
    return strcmp(name, "text") == 0 ? LOG_FORMAT_TEXT : strcmp(name, "json") == 0 ? LOG_FORMAT_JSON : -1;
}

static int
open_path(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        snprintf(err, errlen, "log_file %s: %s%s", path, strerror(errno),
                 errno == ENOENT ? " (make the folder first)" : "");
    return fd;
}

int
log_file_open(const char *path, char *err, size_t errlen)
{
    if (path == NULL) {
        if (file_fd >= 0)
            dup2(2, file_fd); /* not closed: another thread may be writing to it */
        out_fd = 2;
        free(file_path);
        file_path = NULL;
        return 0;
    }
    if (file_path != NULL && strcmp(file_path, path) == 0 && out_fd == file_fd)
        return 0;
    char *copy = strdup(path);
    int fd = copy != NULL ? open_path(path, err, errlen) : -1;
    if (fd < 0) {
        if (copy == NULL)
            snprintf(err, errlen, "log_file: out of memory");
        free(copy);
        return -1;
    }
    if (file_fd < 0) {
        file_fd = fd;
    } else {
        dup2(fd, file_fd);
        close(fd);
    }
    out_fd = file_fd;
    free(file_path);
    file_path = copy;
    return 0;
}

int
log_file_reopen(char *err, size_t errlen)
{
    if (file_path == NULL || out_fd != file_fd)
        return 0;
    int fd = open_path(file_path, err, errlen);
    if (fd < 0)
        return -1;
    dup2(fd, file_fd);
    close(fd);
    return 0;
}

/* One write per line keeps lines whole when the output is shared. */
static void
emit(const char *line, size_t len)
{
    while (len > 0) {
        ssize_t n = write(out_fd, line, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        line += n;
        len -= (size_t)n;
    }
}

/* Lines carry names a client chose (a SOCKS5 host, a username, a DNS
 * name) and strings a script made: a control byte in one must not start
 * a forged line or move the terminal's cursor. Escapes them in place as
 * \n, \r or \xHH (tabs stay: they separate fields), cutting at |cap|.
 * Returns the new length. */
static size_t
escape(char *s, size_t len, size_t cap)
{
    size_t first = 0;
    while (first < len && !(((unsigned char)s[first] < 0x20 && s[first] != '\t') ||
                            s[first] == 0x7f))
        first++;
    if (first == len)
        return len; /* the common case: nothing to do */
    char tmp[2048];
    size_t o = 0;
    for (size_t i = 0; i < len && o < sizeof(tmp) - 4 && o < cap - 4; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n' || c == '\r') {
            tmp[o++] = '\\';
            tmp[o++] = c == '\n' ? 'n' : 'r';
        } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
            o += (size_t)snprintf(tmp + o, 5, "\\x%02x", c);
        } else {
            tmp[o++] = (char)c;
        }
    }
    memcpy(s, tmp, o);
    return o;
}

static void
tap_line(enum log_level level, const char *msg, size_t len)
{
    if (tap != NULL && !in_tap) {
        in_tap = 1;
        tap(tap_arg, level, msg, len);
        in_tap = 0;
    }
}

/* The message is cut at LINE_MAX_MSG bytes; a JSON line holds it escaped
 * (6 bytes a byte at most) and its fields. */
#define LINE_MAX_MSG 2048
#define JSON_LINE (8 * LINE_MAX_MSG)

static void
write_json(enum log_level level, const struct log_field *fields, size_t n, int kv,
           const struct timespec *ts, const char *fmt, va_list ap)
{
    char msg[LINE_MAX_MSG], line[JSON_LINE];
    size_t mlen;
    size_t len = log_json_format(line, sizeof(line), names[level], ts, fields, n, kv, msg,
                                 sizeof(msg), &mlen, fmt, ap);
    emit(line, len);
    tap_line(level, msg, escape(msg, mlen, sizeof(msg)));
}

/* "YYYY-MM-DD HH:MM:SS.mmm LEVEL " into |line|; returns its length. The
 * date part is formatted once a second per thread: localtime_r and the
 * snprintf were a third of a flow line's cost at 30k flows/s. */
static int
stamp(char *line, const struct timespec *ts, const char *level)
{
    static __thread time_t sec = -1;
    static __thread char date[64];
    if (ts->tv_sec != sec) {
        struct tm tm;
        localtime_r(&ts->tv_sec, &tm);
        snprintf(date, sizeof(date), "%04d-%02d-%02d %02d:%02d:%02d.", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        sec = ts->tv_sec;
    }
    size_t d = strlen(date), l = strlen(level);
    unsigned ms = (unsigned)(ts->tv_nsec / 1000000);
    memcpy(line, date, d);
    line[d] = (char)('0' + ms / 100);
    line[d + 1] = (char)('0' + ms / 10 % 10);
    line[d + 2] = (char)('0' + ms % 10);
    line[d + 3] = ' ';
    memcpy(line + d + 4, level, l);
    memset(line + d + 4 + l, ' ', 6 - l); /* "%-5s " */
    return (int)(d + 10);
}

static void __attribute__((format(printf, 5, 0)))
vwrite(enum log_level level, const struct log_field *fields, size_t nfields, int kv,
       const char *fmt, va_list ap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (log_format == LOG_FORMAT_JSON) {
        write_json(level, fields, nfields, kv, &ts, fmt, ap);
        return;
    }
    char line[LINE_MAX_MSG];
    int n = stamp(line, &ts, names[level]);
    int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    len = (size_t)n + escape(line + n, len - (size_t)n, sizeof(line) - 2 - (size_t)n);
    line[len++] = '\n';
    emit(line, len);
    tap_line(level, line + n, len - 1 - (size_t)n);
}

void
log_write(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(level, NULL, 0, 0, fmt, ap);
    va_end(ap);
}

void
log_write_fields(enum log_level level, const struct log_field *fields, size_t n,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(level, fields, n, 0, fmt, ap);
    va_end(ap);
}

void
log_write_kv(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(level, NULL, 0, 1, fmt, ap);
    va_end(ap);
}
