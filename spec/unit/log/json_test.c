#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "log/log_int.h"

/* log/json.c: the JSON line of a log call, its message text (which must be
 * what vsnprintf makes of the same call) and the fields it carries. */

static char line[16384], msg[2048];

/* Formats into line (the first |cap| bytes) and msg; returns the length. */
static size_t
vformat(size_t cap, const struct log_field *extra, size_t n, int kv, const char *fmt, va_list ap)
{
    struct timespec ts = {86400 + 3661, 5000000}; /* 1970-01-02T01:01:01.005Z */
    size_t mlen;
    size_t len = log_json_format(line, cap, "info", &ts, extra, n, kv, msg, sizeof(msg), &mlen,
                                 fmt, ap);
    assert_int_equal(mlen, strlen(msg));
    return len;
}

static const char *__attribute__((format(printf, 4, 5)))
fmt_line(const struct log_field *extra, size_t n, int kv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = vformat(sizeof(line), extra, n, kv, fmt, ap);
    va_end(ap);
    assert_true(len > 2 && len < sizeof(line));
    assert_int_equal(line[len - 1], '\n');
    line[len - 1] = '\0';
    return line;
}

static size_t __attribute__((format(printf, 2, 3)))
fmt_at_cap(size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t len = vformat(cap, NULL, 0, 0, fmt, ap);
    va_end(ap);
    return len;
}

static void
has(const char *field)
{
    if (strstr(line, field) == NULL)
        fail_msg("no %s in %s", field, line);
}

static void
lacks(const char *field)
{
    if (strstr(line, field) != NULL)
        fail_msg("%s in %s", field, line);
}

static void
test_message_is_printf(void **state)
{
    char want[256];
    fmt_line(NULL, 0, 0, "a %d %u %llu %zu %x %02x %5.2f %.*s %c %% %-4s| %ld", -3, 4u, 5ull,
             (size_t)6, 255u, 7u, 3.14159, 2, "xyz", 'q', "ab", -9L);
    snprintf(want, sizeof(want), "a %d %u %llu %zu %x %02x %5.2f %.*s %c %% %-4s| %ld", -3, 4u,
             5ull, (size_t)6, 255u, 7u, 3.14159, 2, "xyz", 'q', "ab", -9L);
    assert_string_equal(msg, want);
}

static void
test_head_and_event(void **state)
{
    fmt_line(NULL, 0, 0, "listening: %s on %s", "socks5", "127.0.0.1:1080");
    has("{\"time\":\"1970-01-02T01:01:01.005Z\",\"level\":\"info\",\"event\":\"listening\","
        "\"msg\":\"listening: socks5 on 127.0.0.1:1080\"}");
    /* A format that starts with a conversion: the first literal word. */
    fmt_line(NULL, 0, 0, "%s: proxy %s: skip", "main.lua:3", "hk");
    has("\"event\":\"proxy\"");
}

static void
test_fields_from_format(void **state)
{
    fmt_line(NULL, 0, 0, "flow %llu: connect %s: %s", 12ull, "a.example:443", "refused");
    has("\"event\":\"flow\"");
    has("\"flow\":12");
    fmt_line(NULL, 0, 0, "x policy=%s%s%s rule=\"%s%s%s\" up=%llu time=%.3fs close=%s", "hk",
             " via=", "ss", "route", " ", "rule 3", 42ull, 1.5, "done");
    has("\"policy\":\"hk via=ss\"");
    has("\"rule\":\"route rule 3\"");
    has("\"up\":42");
    has("\"duration\":1.500"); /* time= is the line's own: renamed, in seconds */
    has("\"reason\":\"done\"");
    lacks("\"via\"");
    fmt_line(NULL, 0, 0, "control: mode=%s log-level=%s", "rule", "debug");
    has("\"mode\":\"rule\"");
    has("\"log-level\":\"debug\"");
}

/* A client's string holds " key=value": it stays inside its own field's
 * value and the message; no field comes from it. */
static void
test_no_forged_fields(void **state)
{
    fmt_line(NULL, 0, 0, "socks5: authentication failed (user '%s')", "x policy=REJECT");
    lacks("\"policy\"");
    fmt_line(NULL, 0, 0, "flow %llu: connect %s: %s", 3ull, "a policy=REJECT reason=x", "no");
    lacks("\"policy\"");
    lacks("\"reason\"");
    /* "time", "level", "event", "msg" belong to the line. */
    fmt_line(NULL, 0, 0, "q level=%s msg=%s event=%s", "x", "y", "z");
    has("\"level\":\"info\"");
    has("\"event\":\"q\"");
    lacks("\"x\"");
}

static void
test_escapes(void **state)
{
    fmt_line(NULL, 0, 0, "dns %s: \"%s\"", "a\nb\r\x01\x7f\\", "q");
    has("\"msg\":\"dns a\\u000ab\\u000d\\u0001\\u007f\\\\: \\\"q\\\"\"");
    /* Invalid UTF-8 (a lone continuation, an overlong slash, a surrogate,
     * a cut sequence) becomes U+FFFD; valid sequences stay. */
    fmt_line(NULL, 0, 0, "u %s", "\x80 \xc0\xaf \xed\xa0\x80 \xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82");
    has("\"msg\":\"u \\ufffd \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \xc3\xa9 \xf0\x9f\x98\x80 "
        "\\ufffd\\ufffd\"");
}

static void
test_extra_and_kv(void **state)
{
    const struct log_field f[] = {
        LOG_FIELD_N("flow", 7), LOG_FIELD_S("dst", "a\"b"), LOG_FIELD_S("host", NULL),
        LOG_FIELD_T("duration", 0.25), LOG_FIELD_S("time", "forged"),
    };
    fmt_line(f, sizeof(f) / sizeof(f[0]), 0, "flow %s close=%s", "7 tcp ...", "done");
    has("\"flow\":7,\"dst\":\"a\\\"b\",\"duration\":0.250,\"reason\":\"done\"");
    lacks("\"host\"");
    lacks("forged\"");
    fmt_line(NULL, 0, 1, "stats%s", " flows=3 bytes_up=10 drops=1/2 name=x");
    has("\"flows\":3,\"bytes_up\":10,\"drops\":\"1/2\",\"name\":\"x\"");
    /* Without the vouching flag, the same text gives no fields. */
    fmt_line(NULL, 0, 0, "stats%s", " flows=3");
    lacks("\"flows\"");
}

/* The longest message, all control bytes: the object is still whole. */
static void
test_long_line_stays_whole(void **state)
{
    char big[3000];
    memset(big, 1, sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    fmt_line(NULL, 0, 0, "x a=%s b=%s", big, big);
    size_t n = strlen(line);
    assert_int_equal(line[n - 1], '}');
    assert_true(strlen(msg) == sizeof(msg) - 1);
}

/* A line that fills the buffer to within one byte still closes: the
 * fields that do not fit are dropped whole, and "}\n" always has room. */
static void
test_every_fill_parses(void **state)
{
    for (size_t cap = 160; cap < 512; cap++) { /* the message fits at 160 */
        size_t len = fmt_at_cap(cap, "x a=%s b=%s", "0123456789abcdef",
                                "\x01\x01\x01\x01\x01\x01\x01\x01");
        assert_true(len <= cap && line[len - 1] == '\n');
        json_error_t e;
        json_t *j = json_loadb(line, len - 1, 0, &e);
        if (j == NULL)
            fail_msg("cap %zu: %s: %.*s", cap, e.text, (int)len, line);
        assert_string_equal(json_string_value(json_object_get(j, "msg")), msg);
        json_decref(j);
    }
}

/* Random bytes as a client's string, in a message and a field: jansson
 * parses every line, and the message's value is the input with each byte
 * that is not valid UTF-8 replaced, never cut short or run on. */
static void
test_random_bytes_parse(void **state)
{
    uint32_t x = 2463534242u;
    for (int round = 0; round < 3000; round++) {
        char in[64];
        size_t n = 1 + round % (sizeof(in) - 1);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            /* Mostly the interesting bytes: controls, quotes, high bytes. */
            static const char pick[] = "\x00\x01\n\r\t\"\\\x7f\x80\xbf\xc2\xe2\x82\xac\xf0\x9f\xed\xa0" "a =";
            in[i] = (x & 1) ? pick[(x >> 1) % (sizeof(pick) - 1)] : (char)(x >> 8);
            if (in[i] == '\0')
                in[i] = '\x01';
        }
        in[n] = '\0';
        fmt_line(NULL, 0, 0, "flow %llu: connect %s: a=%s", 1ull, in, in);
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (j == NULL)
            fail_msg("round %d: %s: %s", round, e.text, line);
        const char *m = json_string_value(json_object_get(j, "msg"));
        assert_non_null(m);
        assert_string_equal(json_string_value(json_object_get(j, "event")), "flow");
        assert_int_equal(json_integer_value(json_object_get(j, "flow")), 1);
        assert_non_null(json_string_value(json_object_get(j, "a")));
        /* The message starts as written and keeps every valid byte. */
        assert_memory_equal(m, "flow 1: connect ", 16);
        assert_true(strlen(m) >= 16 + 2 * 1 + 4);
        assert_non_null(strstr(m, ": a="));
        json_decref(j);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message_is_printf), cmocka_unit_test(test_head_and_event),
        cmocka_unit_test(test_fields_from_format), cmocka_unit_test(test_no_forged_fields),
        cmocka_unit_test(test_escapes),          cmocka_unit_test(test_extra_and_kv),
        cmocka_unit_test(test_long_line_stays_whole), cmocka_unit_test(test_random_bytes_parse),
        cmocka_unit_test(test_every_fill_parses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
