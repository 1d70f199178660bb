#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "flow/flow.h"
#include "outbound/hs_wire.h"
#include "outbound/proxy.h"
#include "outbound/set_int.h"

typedef int (*parse_fn)(const uint8_t *p, size_t n);

static uint8_t last_u8;
static int last_status;

static int
method(const uint8_t *p, size_t n)
{
    return outbound_hs_socks5_parse_method(p, n, &last_u8);
}

static int
auth(const uint8_t *p, size_t n)
{
    return outbound_hs_socks5_parse_auth(p, n, &last_u8);
}

static int
reply(const uint8_t *p, size_t n)
{
    return outbound_hs_socks5_parse_reply(p, n, &last_u8);
}

static int
head(const uint8_t *p, size_t n)
{
    return outbound_hs_http_parse_head(p, n, &last_status);
}

static int
addr(const uint8_t *p, size_t n)
{
    struct flow_addr a;

    return outbound_addr_parse(p, n, &a);
}

/* A complete message: "need more" at every shorter length, its own length
 * when whole, and the same with bytes of the next message behind it. */
static void
check_split(parse_fn f, const void *msg, size_t len)
{
    uint8_t buf[OUTBOUND_HTTP_HEAD_MAX + 16];

    for (size_t k = 0; k < len; k++)
        assert_int_equal(f(msg, k), 0);
    assert_int_equal(f(msg, len), (int)len);
    memcpy(buf, msg, len);
    memcpy(buf + len, "\x05\x00XYZ", 5);
    assert_int_equal(f(buf, len + 5), (int)len);
}

static struct flow_addr
host(const char *h, uint16_t port)
{
    struct flow_addr a;

    assert_int_equal(flow_addr_from_host(&a, h, strlen(h), port), 0);
    return a;
}

static void
test_socks5_builders(void **state)
{
    uint8_t out[600];
    struct flow_addr a;

    assert_int_equal(outbound_hs_socks5_greeting(out, 0), 3);
    assert_memory_equal(out, "\x05\x01\x00", 3);
    assert_int_equal(outbound_hs_socks5_greeting(out, 1), 4);
    assert_memory_equal(out, "\x05\x02\x00\x02", 4);

    assert_int_equal(outbound_hs_socks5_auth(out, sizeof(out), "user", "pw"), 9);
    assert_memory_equal(out, "\x01\x04user\x02pw", 9);
    assert_int_equal(outbound_hs_socks5_auth(out, sizeof(out), "u", ""), 4);
    assert_memory_equal(out, "\x01\x01u\x00", 4);
    assert_int_equal(outbound_hs_socks5_auth(out, sizeof(out), "", "pw"), -1);
    assert_int_equal(outbound_hs_socks5_auth(out, 8, "user", "pw"), -1);
    char big[257];
    memset(big, 'x', 256);
    big[256] = '\0';
    assert_int_equal(outbound_hs_socks5_auth(out, sizeof(out), big, "pw"), -1);
    assert_int_equal(outbound_hs_socks5_auth(out, sizeof(out), "u", big), -1);
    big[255] = '\0';
    assert_int_equal(outbound_hs_socks5_auth(out, sizeof(out), big, big), 3 + 255 + 255);

    a = host("192.0.2.7", 443);
    assert_int_equal(outbound_hs_socks5_request(out, sizeof(out), &a), 10);
    assert_memory_equal(out, "\x05\x01\x00\x01\xc0\x00\x02\x07\x01\xbb", 10);
    a = host("2001:db8::1", 80);
    assert_int_equal(outbound_hs_socks5_request(out, sizeof(out), &a), 22);
    assert_memory_equal(out, "\x05\x01\x00\x04\x20\x01\x0d\xb8", 8);
    assert_memory_equal(out + 19, "\x01\x00\x50", 3);
    a = host("example.com", 8080);
    assert_int_equal(outbound_hs_socks5_request(out, sizeof(out), &a), 18);
    assert_memory_equal(out, "\x05\x01\x00\x03\x0b" "example.com\x1f\x90", 18);
    assert_int_equal(outbound_hs_socks5_request(out, 17, &a), -1);
    a.kind = FLOW_ADDR_NONE;
    assert_int_equal(outbound_hs_socks5_request(out, sizeof(out), &a), -1);
}

static void
test_http_builder(void **state)
{
    char out[OUTBOUND_HTTP_REQUEST_MAX];
    struct flow_addr a = host("example.com", 443);
    const char *plain = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";

    assert_int_equal(outbound_hs_http_request(out, sizeof(out), &a, "", "x"), (int)strlen(plain));
    assert_memory_equal(out, plain, strlen(plain));

    /* RFC 7617's example credentials. */
    const char *authd = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
                        "Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n";
    assert_int_equal(outbound_hs_http_request(out, sizeof(out), &a, "Aladdin", "open sesame"),
                     (int)strlen(authd));
    assert_memory_equal(out, authd, strlen(authd));
    /* Each padding length. */
    assert_true(outbound_hs_http_request(out, sizeof(out), &a, "a", "") > 0);
    assert_non_null(strstr(out, "Basic YTo=\r\n"));
    assert_true(outbound_hs_http_request(out, sizeof(out), &a, "ab", "") > 0);
    assert_non_null(strstr(out, "Basic YWI6\r\n"));
    assert_true(outbound_hs_http_request(out, sizeof(out), &a, "a", "bc") > 0);
    assert_non_null(strstr(out, "Basic YTpiYw==\r\n"));

    a = host("2001:db8::1", 8443);
    assert_true(outbound_hs_http_request(out, sizeof(out), &a, "", "") > 0);
    assert_non_null(strstr(out, "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n"));
    a = host("10.1.2.3", 22);
    assert_true(outbound_hs_http_request(out, sizeof(out), &a, "", "") > 0);
    assert_non_null(strstr(out, "CONNECT 10.1.2.3:22 HTTP/1.1\r\n"));

    /* Longest inputs fit the documented bound. */
    struct outbound_proxy p;
    memset(p.user, 'u', 255);
    p.user[255] = '\0';
    memset(p.pass, 'p', 255);
    p.pass[255] = '\0';
    memset(a.name, 'n', 255);
    a.name[255] = '\0';
    a.name_len = 255;
    a.kind = FLOW_ADDR_NAME;
    a.port = 65535;
    assert_true(outbound_hs_http_request(out, sizeof(out), &a, p.user, p.pass) > 0);
    assert_int_equal(outbound_hs_http_request(out, 100, &a, "", ""), -1);

    /* Names that would break the request line or inject a header. */
    const char *bad[] = {"evil.com\r\nX-Injected: 1", "a b", "tab\there", "del\x7f"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        a.kind = FLOW_ADDR_NAME;
        a.name_len = (uint8_t)strlen(bad[i]);
        memcpy(a.name, bad[i], a.name_len + 1);
        assert_int_equal(outbound_hs_http_request(out, sizeof(out), &a, "", ""), -1);
    }
    a.name_len = 0;
    assert_int_equal(outbound_hs_http_request(out, sizeof(out), &a, "", ""), -1);
}

static void
test_socks5_parsers(void **state)
{
    check_split(method, "\x05\x00", 2);
    assert_int_equal(last_u8, 0);
    check_split(method, "\x05\xff", 2);
    assert_int_equal(last_u8, 0xff);
    assert_true(method((const uint8_t *)"\x04\x00", 2) < 0);
    assert_true(method((const uint8_t *)"\x01", 1) < 0);

    check_split(auth, "\x01\x00", 2);
    assert_int_equal(last_u8, 0);
    check_split(auth, "\x01\x01", 2);
    assert_int_equal(last_u8, 1);
    check_split(auth, "\x05\x00", 2); /* the SOCKS version echoed: tolerated */
    assert_true(auth((const uint8_t *)"\x02\x00", 2) < 0);

    check_split(reply, "\x05\x00\x00\x01\x7f\x00\x00\x01\x04\x38", 10);
    assert_int_equal(last_u8, 0);
    check_split(reply, "\x05\x00\x00\x04" "0123456789abcdef\x00\x50", 22);
    check_split(reply, "\x05\x00\x00\x03\x04host\x00\x50", 11);
    check_split(reply, "\x05\x00\x00\x03\x00\x00\x50", 7); /* an empty BND name is skipped */
    check_split(reply, "\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00", 10);
    assert_int_equal(last_u8, 5);

    /* REP is known as soon as two bytes are in. */
    assert_int_equal(reply((const uint8_t *)"\x05", 1), 0);
    assert_int_equal(last_u8, 0xff);
    assert_int_equal(reply((const uint8_t *)"\x05\x02", 2), 0);
    assert_int_equal(last_u8, 2);

    assert_true(reply((const uint8_t *)"\x04", 1) < 0);
    assert_true(reply((const uint8_t *)"\x05\x00\x00\x02", 4) < 0);
    assert_true(reply((const uint8_t *)"\x05\x01\x00\x00", 4) < 0);
    assert_int_equal(last_u8, 1);
}

/* The health check's verdict: a status line's first 13 bytes, fed in any
 * pieces. Before, "HTTP/1.1 000" and "HTTP/1.1 2000" counted as a working
 * path and a line cut at 12 bytes passed; now the CONNECT reply's rule. */
static void
test_http_status(void **state)
{
    const uint8_t *ok = (const uint8_t *)"HTTP/1.1 204 No Content\r\n\r\n";
    for (size_t k = 0; k < OUTBOUND_HTTP_STATUS_LEN; k++)
        assert_int_equal(outbound_hs_http_status(ok, k), 0);
    assert_int_equal(outbound_hs_http_status(ok, 13), 204);
    assert_int_equal(outbound_hs_http_status(ok, 27), 204);
    assert_int_equal(outbound_hs_http_status((const uint8_t *)"HTTP/1.0 599\n", 13), 599);

    const char *bad[] = {"HTTP/1.1 000 x", "HTTP/1.1 2000", "HTTP/1.1 099 x", "HTTP/1.1 600 x",
                         "HTTP/1.1 20\n", "HTTP/2 200 x", "SSH-2.0-Open", "HTTP/1.1 200x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(outbound_hs_http_status((const uint8_t *)bad[i], strlen(bad[i])), -1);
    assert_int_equal(outbound_hs_http_status((const uint8_t *)"SSH", 3), -1); /* early */

    /* One byte at a time and in two pieces: the same verdict, at byte 13. */
    struct outbound_health_line l = {0};
    for (size_t k = 0; k < 12; k++)
        assert_int_equal(outbound_health_feed(&l, ok + k, 1), 0);
    assert_int_equal(outbound_health_feed(&l, ok + 12, 15), 204);
    assert_int_equal(l.got, OUTBOUND_HTTP_STATUS_LEN);
    l.got = 0;
    assert_int_equal(outbound_health_feed(&l, "HTTP/1.1 000 Zero\r\n", 19), -1);
    l.got = 0;
    assert_int_equal(outbound_health_feed(&l, "HTTP/1.1 200", 12), 0); /* then closed */
}

static void
test_http_head(void **state)
{
    const char *ok = "HTTP/1.1 200 Connection established\r\n\r\n";
    check_split(head, ok, strlen(ok));
    assert_int_equal(last_status, 200);

    const char *hdrs = "HTTP/1.0 407 Proxy Authentication Required\r\n"
                       "Proxy-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n"
                       " folded continuation\r\n\r\n";
    check_split(head, hdrs, strlen(hdrs));
    assert_int_equal(last_status, 407);

    check_split(head, "HTTP/1.1 204\n\n", 14); /* bare LF, no reason phrase */
    assert_int_equal(last_status, 204);
    check_split(head, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    assert_int_equal(last_status, 100);
    check_split(head, "HTTP/1.1 599 x\r\nA:\r\n\r\n", 22);
    assert_int_equal(last_status, 599);

    const char *bad[] = {
        "SSH-2.0-OpenSSH\r\n\r\n",
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 20x OK\r\n\r\n",
        "HTTP/1.1 600 Nope\r\n\r\n",
        "HTTP/1.1 099 Nope\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1  200 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\rX\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_true(head((const uint8_t *)bad[i], strlen(bad[i])) < 0);
    assert_true(head((const uint8_t *)"HTTP/1.1 200 O\0K\r\n\r\n", 20) < 0);
    /* Refused early, not after the blank line. */
    assert_true(head((const uint8_t *)"SSH", 3) < 0);
    assert_true(head((const uint8_t *)"HTTP/1.1 200 OK\r\nbad\r\n", 22) < 0);
}

static void
test_http_head_cap(void **state)
{
    static uint8_t buf[OUTBOUND_HTTP_HEAD_MAX + 64];
    const char *start = "HTTP/1.1 200 OK\r\nX-Pad: ";
    size_t s = strlen(start);

    /* A head of exactly the cap is accepted ... */
    memcpy(buf, start, s);
    memset(buf + s, 'a', OUTBOUND_HTTP_HEAD_MAX - s - 4);
    memcpy(buf + OUTBOUND_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
    assert_int_equal(head(buf, OUTBOUND_HTTP_HEAD_MAX), OUTBOUND_HTTP_HEAD_MAX);
    assert_int_equal(head(buf, OUTBOUND_HTTP_HEAD_MAX - 1), 0);
    /* ... one byte more is not, and neither is an endless one. */
    memset(buf + s, 'a', OUTBOUND_HTTP_HEAD_MAX - s - 3);
    memcpy(buf + OUTBOUND_HTTP_HEAD_MAX - 3, "\r\n\r\n", 4);
    assert_true(head(buf, OUTBOUND_HTTP_HEAD_MAX + 1) < 0);
    assert_true(head(buf, OUTBOUND_HTTP_HEAD_MAX) < 0);
    assert_int_equal(head(buf, OUTBOUND_HTTP_HEAD_MAX - 1), 0);
}

static void
test_addr_form(void **state)
{
    const char *hosts[] = {"198.51.100.9", "::ffff:1.2.3.4", "fe80::1", "a", "www.example.org"};
    uint8_t out[300];
    struct flow_addr a, b;

    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        a = host(hosts[i], (uint16_t)(1000 + i));
        int n = outbound_addr_write(out, sizeof(out), &a);
        assert_true(n > 0);
        check_split(addr, out, (size_t)n);
        assert_int_equal(outbound_addr_parse(out, (size_t)n, &b), n);
        assert_int_equal(b.kind, a.kind);
        assert_int_equal(b.port, a.port);
        if (a.kind == FLOW_ADDR_NAME)
            assert_string_equal(b.name, a.name);
        else
            assert_memory_equal(b.ip, a.ip, a.kind == FLOW_ADDR_IP4 ? 4 : 16);
        assert_int_equal(outbound_addr_write(out, (size_t)n - 1, &a), -1);
    }
    a = host("192.0.2.1", 0x1234);
    assert_int_equal(outbound_addr_write(out, sizeof(out), &a), 7);
    assert_memory_equal(out, "\x01\xc0\x00\x02\x01\x12\x34", 7);

    memset(a.name, 'z', 255);
    a.name[255] = '\0';
    a.name_len = 255;
    a.kind = FLOW_ADDR_NAME;
    assert_int_equal(outbound_addr_write(out, sizeof(out), &a), 259);
    check_split(addr, out, 259);

    assert_true(addr((const uint8_t *)"\x02", 1) < 0);
    assert_true(addr((const uint8_t *)"\x03\x00\x00\x50", 4) < 0);
    assert_true(addr((const uint8_t *)"\x03\x05" "ab\0", 5) < 0);
    assert_true(addr((const uint8_t *)"\x03\x05" "ab\0de\x00\x50", 9) < 0);
    a.kind = FLOW_ADDR_NONE;
    assert_int_equal(outbound_addr_write(out, sizeof(out), &a), -1);
    a.kind = FLOW_ADDR_NAME;
    a.name_len = 0;
    assert_int_equal(outbound_addr_write(out, sizeof(out), &a), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socks5_builders), cmocka_unit_test(test_http_builder),
        cmocka_unit_test(test_socks5_parsers),  cmocka_unit_test(test_http_head),
        cmocka_unit_test(test_http_head_cap),   cmocka_unit_test(test_addr_form),
        cmocka_unit_test(test_http_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
