#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log/log.h"

enum log_level log_threshold = LOG_LEVEL_INFO;

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

void
log_write(enum log_level level, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02d %02d:%02d:%02d.%03ld %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    len = (size_t)n + escape(line + n, len - (size_t)n, sizeof(line) - 2 - (size_t)n);
    line[len++] = '\n';
    /* One write per line keeps lines whole when stderr is shared. */
    fwrite(line, 1, len, stderr);
    if (tap != NULL && !in_tap) {
        in_tap = 1;
        tap(tap_arg, level, line + n, len - 1 - (size_t)n);
        in_tap = 0;
    }
}
