/* libFuzzer target for core/log/json.c: a client's bytes (a SOCKS5 host, a
 * DNS name, a header) as the string arguments of log lines and as an extra
 * field, in the text log's formats.
 *
 * Invariants, checked with CHECK():
 *  - the line ends in one newline and holds no other byte below 0x20;
 *  - jansson parses it as one object with string time, level, event, msg;
 *  - event and the flow id come from the format, whatever the input says;
 *  - the message is what vsnprintf makes of the same call, up to the
 *    2048-byte message cap. */

#include <jansson.h>
#include <stdarg.h>
#include <string.h>

#include "fuzz.h"
#include "log/log_int.h"

static char line[16384], msg[2048], want[2048];

static size_t __attribute__((format(printf, 4, 5)))
run(const struct log_field *f, size_t nf, int kv, const char *fmt, ...)
{
    struct timespec ts = {1700000000, 123456789};
    size_t mlen;
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    size_t len = log_json_format(line, sizeof(line), "warn", &ts, f, nf, kv, msg, sizeof(msg),
                                 &mlen, fmt, ap);
    vsnprintf(want, sizeof(want), fmt, aq);
    va_end(aq);
    va_end(ap);
    CHECK(len >= 2 && len <= sizeof(line) && line[len - 1] == '\n');
    CHECK(strcmp(msg, want) == 0 && mlen == strlen(msg));
    for (size_t i = 0; i + 1 < len; i++)
        CHECK((unsigned char)line[i] >= 0x20);
    return len;
}

static void
parses(size_t len, const char *event, long long id)
{
    json_error_t e;
    json_t *j = json_loadb(line, len - 1, 0, &e);
    if (j == NULL)
        fprintf(stderr, "not JSON (%s): %.*s\n", e.text, (int)len, line);
    CHECK(j != NULL && json_is_object(j));
    static const char *const k[] = {"time", "level", "event", "msg"};
    for (size_t i = 0; i < 4; i++)
        CHECK(json_is_string(json_object_get(j, k[i])));
    CHECK(strcmp(json_string_value(json_object_get(j, "event")), event) == 0);
    if (id >= 0)
        CHECK(json_integer_value(json_object_get(j, "flow")) == id);
    json_decref(j);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[3000];
    size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    /* The bytes after the first NUL are a second string. */
    const char *t = s + strlen(s) + (strlen(s) < n ? 1 : 0);
    parses(run(NULL, 0, 0, "flow %llu: connect %s: %s", 7ull, s, t), "flow", 7);
    parses(run(NULL, 0, 0, "socks5: authentication failed (user '%.*s')", (int)strlen(t), t),
           "socks5", -1);
    parses(run(NULL, 0, 0, "x policy=%s rule=\"%s\" up=%llu time=%.3fs close=%s", s, t, 1ull, 0.5,
               s),
           "x", -1);
    const struct log_field f[] = {LOG_FIELD_N("flow", 3), LOG_FIELD_S("dst", s),
                                  LOG_FIELD_S("host", t), LOG_FIELD_S(t, s)};
    parses(run(f, 4, 0, "flow %s close=%s", s, t), "flow", 3);
    parses(run(NULL, 0, 1, "stats %s", "a=1 b=x"), "stats", -1);
    return 0;
}
