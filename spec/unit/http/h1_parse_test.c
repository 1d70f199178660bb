/* HTTP/1.x head parser: valid and malformed heads, smuggling-prone forms,
 * limits, and the promise that feeding a head a byte at a time ends in the
 * same answer as feeding it whole. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/http.h"

#define S(lit) lit, sizeof(lit) - 1

static int
slice_is(struct mem_slice s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* Parses every prefix of |msg| from a heap copy of exactly that size (so
 * ASan sees any read past it) and checks that the answers are INCOMPLETE
 * until the first definite one, which then never changes. Returns that
 * answer, which must equal the all-at-once one. */
static int
request_bytewise(const char *msg, size_t len)
{
    struct http_request req;
    int first = HTTP_ERR_INCOMPLETE, whole;
    size_t k;

    for (k = 0; k <= len; k++) {
        char *copy = malloc(k ? k : 1);
        int r;

        assert_non_null(copy);
        memcpy(copy, msg, k);
        r = http_h1_parse_request(copy, k, &req);
        free(copy);
        if (first != HTTP_ERR_INCOMPLETE)
            assert_int_equal(r, first);
        first = r;
        if (r > 0)
            assert_true((size_t)r <= k);
    }
    whole = http_h1_parse_request(msg, len, &req);
    assert_int_equal(whole, first);
    return whole;
}

static int
response_bytewise(const char *msg, size_t len)
{
    struct http_response res;
    int first = HTTP_ERR_INCOMPLETE, whole;
    size_t k;

    for (k = 0; k <= len; k++) {
        char *copy = malloc(k ? k : 1);
        int r;

        assert_non_null(copy);
        memcpy(copy, msg, k);
        r = http_h1_parse_response(copy, k, &res);
        free(copy);
        if (first != HTTP_ERR_INCOMPLETE)
            assert_int_equal(r, first);
        first = r;
    }
    whole = http_h1_parse_response(msg, len, &res);
    assert_int_equal(whole, first);
    return whole;
}

static void
test_request_simple(void **state)
{
    static const char msg[] = "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\n"
                              "X-Pad:   spaced  value \t\r\nEmpty:\r\n\r\n";
    struct http_request req;

    (void)state;
    assert_int_equal(http_h1_parse_request(S(msg), &req), (int)sizeof(msg) - 1);
    assert_true(slice_is(req.method, "GET"));
    assert_true(slice_is(req.target, "/a?b=c"));
    assert_int_equal(req.minor_version, 1);
    assert_int_equal(req.num_headers, 3);
    assert_true(slice_is(req.headers[0].name, "Host"));
    assert_true(slice_is(req.headers[0].value, "example.com"));
    assert_true(slice_is(req.headers[1].value, "spaced  value"));
    assert_true(slice_is(req.headers[2].name, "Empty"));
    assert_int_equal(req.headers[2].value.len, 0);
    assert_int_equal(request_bytewise(S(msg)), (int)sizeof(msg) - 1);
}

static void
test_request_forms(void **state)
{
    static const char lf[] = "GET / HTTP/1.0\nHost: a\n\n";
    static const char lead[] = "\r\n\nPOST /x HTTP/1.1\r\n\r\n";
    static const char absolute[] = "GET http://[2001:db8::1]:8080/x HTTP/1.1\r\n\r\n";
    static const char connect[] = "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n";
    static const char utf8[] = "GET /caf\xc3\xa9 HTTP/1.1\r\nX: \xff\r\n\r\n";
    struct http_request req;

    (void)state;
    assert_int_equal(request_bytewise(S(lf)), (int)sizeof(lf) - 1);
    http_h1_parse_request(S(lf), &req);
    assert_int_equal(req.minor_version, 0);
    assert_true(slice_is(req.headers[0].value, "a"));

    /* Empty lines before the request-line are skipped but counted. */
    assert_int_equal(request_bytewise(S(lead)), (int)sizeof(lead) - 1);
    http_h1_parse_request(S(lead), &req);
    assert_true(slice_is(req.method, "POST"));
    assert_int_equal(req.num_headers, 0);

    assert_int_equal(request_bytewise(S(absolute)), (int)sizeof(absolute) - 1);
    http_h1_parse_request(S(absolute), &req);
    assert_true(slice_is(req.target, "http://[2001:db8::1]:8080/x"));

    assert_int_equal(request_bytewise(S(connect)), (int)sizeof(connect) - 1);
    http_h1_parse_request(S(connect), &req);
    assert_true(slice_is(req.method, "CONNECT"));
    assert_true(slice_is(req.target, "[::1]:443"));

    assert_int_equal(request_bytewise(S(utf8)), (int)sizeof(utf8) - 1);
}

static void
test_request_pipelined(void **state)
{
    static const char two[] = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\n\r\n";
    const int first_len = (int)sizeof("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n") - 1;
    struct http_request req;
    int n;

    (void)state;
    n = request_bytewise(S(two));
    assert_int_equal(n, first_len);
    assert_int_equal(http_h1_parse_request(two + n, sizeof(two) - 1 - n, &req),
                     (int)sizeof(two) - 1 - n);
    assert_true(slice_is(req.target, "/2"));
}

static void
test_request_bad(void **state)
{
    static const struct {
        const char *msg;
        size_t len;
    } bad[] = {
        {S("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n")},    /* obs-fold */
        {S("GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n")},   /* obs-fold, tab */
        {S("GET / HTTP/1.1\r\n X: a\r\n\r\n")},         /* space before first field */
        {S("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n")},       /* NUL in a value */
        {S("GET /a\0b HTTP/1.1\r\n\r\n")},              /* NUL in the target */
        {S("GET\0/ HTTP/1.1\r\n\r\n")},                 /* NUL in the method */
        {S("GET / HTTP/1.1\r\nX\0: a\r\n\r\n")},        /* NUL in a name */
        {S("GET /\t HTTP/1.1\r\n\r\n")},                /* control byte in target */
        {S("GET /\x7f HTTP/1.1\r\n\r\n")},              /* DEL in target */
        {S("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n")},      /* control byte in value */
        {S("GET / HTTP/2.0\r\n\r\n")},                  /* bad versions */
        {S("GET / HTTP/1.2\r\n\r\n")},
        {S("GET / HTTP/0.9\r\n\r\n")},
        {S("GET / http/1.1\r\n\r\n")},
        {S("GET / HTTP/1.10\r\n\r\n")},
        {S("GET / HTTP/1.1 \r\n\r\n")},
        {S("GET /\r\n\r\n")},                           /* HTTP/0.9 */
        {S(" / HTTP/1.1\r\n\r\n")},                     /* empty method */
        {S("GET  / HTTP/1.1\r\n\r\n")},                 /* empty target */
        {S("GET / \r\n\r\n")},                          /* no version */
        {S("G(T / HTTP/1.1\r\n\r\n")},                  /* method not a token */
        {S("GET / HTTP/1.1\r\nX : a\r\n\r\n")},         /* space before colon */
        {S("GET / HTTP/1.1\r\nX\t: a\r\n\r\n")},
        {S("GET / HTTP/1.1\r\nX(y): a\r\n\r\n")},       /* name not a token */
        {S("GET / HTTP/1.1\r\n: a\r\n\r\n")},           /* empty name */
        {S("GET / HTTP/1.1\r\nNoColon\r\n\r\n")},
        {S("GET / HTTP/1.1\rX: a\r\n\r\n")},            /* bare CR */
        {S("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n")},
        {S("GET / HTTP/1.1\r\n\r\r\n")},
        {S("\r\rGET / HTTP/1.1\r\n\r\n")},
    };
    struct http_request req;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = http_h1_parse_request(bad[i].msg, bad[i].len, &req);

        if (r != HTTP_ERR_BAD)
            fail_msg("bad request %zu gave %d", i, r);
        assert_int_equal(request_bytewise(bad[i].msg, bad[i].len), HTTP_ERR_BAD);
    }
}

static void
test_request_untouched_on_error(void **state)
{
    struct http_request req, saved;

    (void)state;
    memset(&req, 0xa5, sizeof(req));
    saved = req;
    assert_int_equal(http_h1_parse_request(S("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n"), &req),
                     HTTP_ERR_BAD);
    assert_memory_equal(&req, &saved, sizeof(req));
    assert_int_equal(http_h1_parse_request(S("GET / HTTP/1.1\r\nA: b\r\n"), &req),
                     HTTP_ERR_INCOMPLETE);
    assert_memory_equal(&req, &saved, sizeof(req));
}

/* A head with |n| one-letter fields. */
static size_t
many_headers(char *buf, size_t n)
{
    size_t len = 0, i;

    len += (size_t)sprintf(buf, "GET / HTTP/1.1\r\n");
    for (i = 0; i < n; i++)
        len += (size_t)sprintf(buf + len, "H%zu: v\r\n", i);
    len += (size_t)sprintf(buf + len, "\r\n");
    return len;
}

static void
test_request_header_count(void **state)
{
    static char buf[4096];
    struct http_request req;
    size_t len;

    (void)state;
    len = many_headers(buf, HTTP_MAX_HEADERS);
    assert_int_equal(http_h1_parse_request(buf, len, &req), (int)len);
    assert_int_equal(req.num_headers, HTTP_MAX_HEADERS);
    assert_true(slice_is(req.headers[HTTP_MAX_HEADERS - 1].name, "H99"));

    len = many_headers(buf, HTTP_MAX_HEADERS + 1);
    assert_int_equal(http_h1_parse_request(buf, len, &req), HTTP_ERR_TOO_LARGE);
    assert_int_equal(request_bytewise(buf, len), HTTP_ERR_TOO_LARGE);
}

static void
test_request_head_size(void **state)
{
    static const char prefix[] = "GET / HTTP/1.1\r\nX: ";
    size_t fill = HTTP_MAX_HEAD - (sizeof(prefix) - 1) - 4;
    char *buf = malloc(HTTP_MAX_HEAD + 64);
    struct http_request req;

    (void)state;
    assert_non_null(buf);
    memcpy(buf, prefix, sizeof(prefix) - 1);
    memset(buf + sizeof(prefix) - 1, 'a', fill + 1);
    memcpy(buf + sizeof(prefix) - 1 + fill, "\r\n\r\n", 4);
    /* Exactly HTTP_MAX_HEAD bytes is allowed, with more bytes behind it. */
    assert_int_equal(http_h1_parse_request(buf, HTTP_MAX_HEAD, &req), HTTP_MAX_HEAD);
    assert_int_equal(http_h1_parse_request(buf, HTTP_MAX_HEAD + 64, &req), HTTP_MAX_HEAD);
    assert_int_equal(req.headers[0].value.len, fill);

    /* One byte more and the head cannot end in time. */
    memset(buf + sizeof(prefix) - 1, 'a', fill + 1);
    memcpy(buf + sizeof(prefix) - 1 + fill + 1, "\r\n\r\n", 4);
    assert_int_equal(http_h1_parse_request(buf, HTTP_MAX_HEAD, &req), HTTP_ERR_INCOMPLETE);
    assert_int_equal(http_h1_parse_request(buf, HTTP_MAX_HEAD + 1, &req), HTTP_ERR_TOO_LARGE);
    assert_int_equal(http_h1_parse_request(buf, HTTP_MAX_HEAD + 5, &req), HTTP_ERR_TOO_LARGE);
    free(buf);
}

static void
test_response_simple(void **state)
{
    static const char msg[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\nnext";
    static const char bare[] = "HTTP/1.0 200\nServer: x\n\n";
    static const char empty[] = "HTTP/1.1 999 \r\n\r\n";
    struct http_response res;

    (void)state;
    assert_int_equal(response_bytewise(S(msg)), (int)sizeof(msg) - 5);
    http_h1_parse_response(S(msg), &res);
    assert_int_equal(res.status, 404);
    assert_int_equal(res.minor_version, 1);
    assert_true(slice_is(res.reason, "Not Found"));
    assert_int_equal(res.num_headers, 1);
    assert_true(slice_is(res.headers[0].value, "0"));

    assert_int_equal(response_bytewise(S(bare)), (int)sizeof(bare) - 1);
    http_h1_parse_response(S(bare), &res);
    assert_int_equal(res.status, 200);
    assert_int_equal(res.minor_version, 0);
    assert_int_equal(res.reason.len, 0);

    assert_int_equal(response_bytewise(S(empty)), (int)sizeof(empty) - 1);
    http_h1_parse_response(S(empty), &res);
    assert_int_equal(res.status, 999);
    assert_int_equal(res.reason.len, 0);

    assert_int_equal(response_bytewise(S("HTTP/1.1 100 Continue\r\n\r\n")), 25);
}

static void
test_response_bad(void **state)
{
    static const struct {
        const char *msg;
        size_t len;
    } bad[] = {
        {S("HTTP/1.1 099 Low\r\n\r\n")},
        {S("HTTP/1.1 1000 High\r\n\r\n")},
        {S("HTTP/1.1 20 Short\r\n\r\n")},
        {S("HTTP/1.1 2x0 Hex\r\n\r\n")},
        {S("HTTP/1.1  200 OK\r\n\r\n")},
        {S("HTTP/1.1 200 O\0K\r\n\r\n")},
        {S("HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n")},
        {S("HTTP/2 200 OK\r\n\r\n")},
        {S("HTTP/1.1\r\n\r\n")},
        {S("ICY 200 OK\r\n\r\n")},
        {S("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n")},
    };
    struct http_response res;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = http_h1_parse_response(bad[i].msg, bad[i].len, &res);

        if (r != HTTP_ERR_BAD)
            fail_msg("bad response %zu gave %d", i, r);
        assert_int_equal(response_bytewise(bad[i].msg, bad[i].len), HTTP_ERR_BAD);
    }
}

static void
test_header_find(void **state)
{
    static const char msg[] = "GET / HTTP/1.1\r\nhost: a\r\nHOST: b\r\nX: 1\r\n\r\n";
    struct http_request req;
    const struct http_header *h;

    (void)state;
    assert_true(http_h1_parse_request(S(msg), &req) > 0);
    h = http_header_find(req.headers, req.num_headers, "Host");
    assert_non_null(h);
    assert_true(slice_is(h->value, "a"));
    assert_null(http_header_find(req.headers, req.num_headers, "Hos"));
    assert_null(http_header_find(req.headers, req.num_headers, "Hosts"));
    assert_null(http_header_find(req.headers, 0, "Host"));
}

static void
test_connection_has(void **state)
{
    static const char msg[] = "GET / HTTP/1.1\r\nConnection: keep-alive ,\tUpgrade\r\n"
                              "X: close\r\nconnection: ,TE,\r\n\r\n";
    struct http_request req;

    (void)state;
    assert_true(http_h1_parse_request(S(msg), &req) > 0);
    assert_true(http_connection_has(req.headers, req.num_headers, "upgrade"));
    assert_true(http_connection_has(req.headers, req.num_headers, "Keep-Alive"));
    assert_true(http_connection_has(req.headers, req.num_headers, "te"));
    assert_false(http_connection_has(req.headers, req.num_headers, "close"));
    assert_false(http_connection_has(req.headers, req.num_headers, "upgraded"));
    assert_false(http_connection_has(req.headers, req.num_headers, "keep"));
    assert_false(http_connection_has(req.headers, 0, "upgrade"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_simple),
        cmocka_unit_test(test_request_forms),
        cmocka_unit_test(test_request_pipelined),
        cmocka_unit_test(test_request_bad),
        cmocka_unit_test(test_request_untouched_on_error),
        cmocka_unit_test(test_request_header_count),
        cmocka_unit_test(test_request_head_size),
        cmocka_unit_test(test_response_simple),
        cmocka_unit_test(test_response_bad),
        cmocka_unit_test(test_header_find),
        cmocka_unit_test(test_connection_has),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
