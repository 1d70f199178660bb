/* Body framing: choosing the framing from the head (including the smuggling
 * cases that must be refused), and finding the end of a body fed whole or
 * in pieces down to single bytes, without eating the next message. */

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
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct msg {
    const char *p;
    size_t len;
};

static int
request_framing(const char *head, size_t len, struct http_body *body)
{
    struct http_request req;

    assert_int_equal(http_h1_parse_request(head, len, &req), (int)len);
    return http_body_init_request(body, &req);
}

static int
response_framing(const char *head, size_t len, const char *method, struct http_body *body)
{
    struct http_response res;

    assert_int_equal(http_h1_parse_response(head, len, &res), (int)len);
    return http_body_init_response(body, &res, mem_slice(method, strlen(method)));
}

/* Feeds |buf| in pieces of |step| bytes, each from its own heap block so
 * ASan catches a read past a piece. Returns the bytes taken, or the error. */
static ssize_t
feed_split(struct http_body body, const char *buf, size_t len, size_t step, int *done)
{
    size_t off = 0;

    while (off < len && !body.done) {
        size_t n = len - off < step ? len - off : step;
        char *piece = malloc(n);
        ssize_t r;

        assert_non_null(piece);
        memcpy(piece, buf + off, n);
        r = http_body_feed(&body, piece, n);
        free(piece);
        if (r < 0) {
            /* The error is sticky. */
            assert_int_equal(http_body_feed(&body, "0\r\n\r\n", 5), r);
            *done = body.done;
            return r;
        }
        assert_true((size_t)r <= n);
        if (!body.done)
            assert_int_equal((size_t)r, n);
        off += (size_t)r;
    }
    *done = body.done;
    return (ssize_t)off;
}

/* Whole, then in pieces of every small size: all must agree with |want|. */
static void
expect_feed(const struct http_body *body, const char *buf, size_t len, ssize_t want,
            int want_done)
{
    static const size_t steps[] = {1, 2, 3, 5, 7, 64};
    size_t i;
    int done;

    assert_int_equal(feed_split(*body, buf, len, len ? len : 1, &done), want);
    assert_int_equal(done, want_done);
    for (i = 0; i < COUNT(steps); i++) {
        assert_int_equal(feed_split(*body, buf, len, steps[i], &done), want);
        assert_int_equal(done, want_done);
    }
}

static void
test_request_none(void **state)
{
    struct http_body b;

    (void)state;
    assert_int_equal(request_framing(S("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_NONE);
    assert_true(b.done);
    expect_feed(&b, S("GET /next HTTP/1.1\r\n\r\n"), 0, 1);
}

static void
test_request_length(void **state)
{
    static const char body[] = "helloGET /next HTTP/1.1\r\n\r\n";
    struct http_body b;

    (void)state;
    assert_int_equal(request_framing(S("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"), &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_LENGTH);
    assert_false(b.done);
    expect_feed(&b, S(body), 5, 1);
    expect_feed(&b, S("hel"), 3, 0);

    assert_int_equal(request_framing(S("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_LENGTH);
    assert_true(b.done);
    expect_feed(&b, S(body), 0, 1);

    /* Equal values, in one list or repeated, are one value. */
    assert_int_equal(request_framing(S("POST / HTTP/1.1\r\nContent-Length: 5 , 5\r\n"
                                       "content-length: 005\r\n\r\n"), &b), 0);
    assert_int_equal(b.remaining, 5);

    assert_int_equal(request_framing(S("POST / HTTP/1.1\r\n"
                                       "Content-Length: 18446744073709551615\r\n\r\n"), &b), 0);
    assert_true(b.remaining == UINT64_MAX);
}

static void
test_request_framing_bad(void **state)
{
    static const struct msg bad[] = {
        /* CL + TE: the classic CL.TE / TE.CL desync */
        {S("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n")},
        /* duplicate, differing or malformed CL */
        {S("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: 5,\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: 5 5\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n")},
        /* TE not ending in chunked, or chunked twice */
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked,\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: , chunked\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked;x=1\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: \"chunked\"\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n")},
    };
    struct http_body b;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(bad); i++) {
        int r = request_framing(bad[i].p, bad[i].len, &b);

        if (r != HTTP_ERR_BAD)
            fail_msg("framing %zu gave %d", i, r);
    }
}

static void
test_request_chunked_ok(void **state)
{
    static const struct msg ok[] = {
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: CHUNKED\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: gzip;level=1 , chunked\r\n\r\n")},
        {S("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n")},
    };
    struct http_body b;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(ok); i++) {
        assert_int_equal(request_framing(ok[i].p, ok[i].len, &b), 0);
        assert_int_equal(b.kind, HTTP_BODY_CHUNKED);
        assert_false(b.done);
    }
}

static struct http_body
chunked(void)
{
    struct http_body b;

    assert_int_equal(request_framing(S("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
                                     &b), 0);
    return b;
}

static void
test_chunked_body(void **state)
{
    static const char plain[] = "5\r\nhello\r\n0\r\n\r\n";
    static const char fancy[] = "5;name=val;q=\"a b\"\r\nhello\r\n"
                                "A \t; x\r\n0123456789\r\n"
                                "000001f\r\n0123456789abcdef0123456789abcde\r\n"
                                "0;last\r\nX-Trailer: 1\r\nEmpty:\r\n\r\n";
    char buf[256];
    struct http_body b = chunked();

    (void)state;
    /* The next request right behind the body is left alone. */
    snprintf(buf, sizeof(buf), "%sGET / HTTP/1.1\r\n\r\n", plain);
    expect_feed(&b, buf, strlen(buf), sizeof(plain) - 1, 1);
    snprintf(buf, sizeof(buf), "%sPOST / HTTP/1.1\r\n\r\n", fancy);
    expect_feed(&b, buf, strlen(buf), sizeof(fancy) - 1, 1);
    expect_feed(&b, S("0\r\n\r\n"), 5, 1);

    /* Any strict prefix is taken whole and leaves the body open. */
    expect_feed(&b, fancy, sizeof(fancy) - 2, sizeof(fancy) - 2, 0);
    expect_feed(&b, S("5\r\nhel"), 6, 0);
}

static void
test_chunked_bad(void **state)
{
    static const struct msg bad[] = {
        {S("g\r\n")},
        {S("\r\n")},                    /* no size */
        {S(";x\r\n")},
        {S(" 5\r\n")},
        {S("-1\r\n")},
        {S("5\nhello\r\n0\r\n\r\n")},   /* bare LF ending the size line */
        {S("5\r\nhello\n0\r\n\r\n")},   /* bare LF after the data */
        {S("5\r\nhelloX\r\n0\r\n\r\n")}, /* data longer than its size */
        {S("5\r\nhell\r\n0\r\n\r\n")},  /* ...or shorter */
        {S("5\r\r\n")},
        {S("5 x\r\n")},
        {S("5 \r\n")},                  /* BWS only before ';' */
        {S("5;a\x01\r\n")},             /* control byte in an extension */
        {S("5;a\nhello\r\n")},
        {S("10000000000000000\r\n")},   /* 2^64 */
        {S("0\r\n\n")},
        {S("0\r\n\r\r")},
        {S("0\r\n folded: x\r\n\r\n")},  /* obs-fold in the trailer */
        {S("0\r\nX: a\r\n\tb\r\n\r\n")},
        {S("0\r\nNoColon\r\n\r\n")},
        {S("0\r\n: empty\r\n\r\n")},
        {S("0\r\nX : a\r\n\r\n")},
        {S("0\r\nX: a\nb\r\n\r\n")},
        {S("0\r\nX: a\0\r\n\r\n")},
    };
    struct http_body b = chunked();
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(bad); i++) {
        int done;
        ssize_t r = feed_split(b, bad[i].p, bad[i].len, bad[i].len, &done);

        if (r != HTTP_ERR_BAD)
            fail_msg("chunked %zu gave %zd", i, r);
        expect_feed(&b, bad[i].p, bad[i].len, HTTP_ERR_BAD, 0);
    }
}

static void
test_chunked_limits(void **state)
{
    struct http_body b = chunked(), c;
    char *buf = malloc(10000);
    size_t n;

    (void)state;
    assert_non_null(buf);
    /* The largest size fits, and leaves that many bytes to come. */
    c = b;
    assert_int_equal(http_body_feed(&c, S("ffffffffffffffff\r\nab")), 20);
    assert_false(c.done);
    assert_true(c.remaining == UINT64_MAX - 2);

    /* A chunk-size line of 4096 bytes is fine; 4097 is not. */
    n = (size_t)sprintf(buf, "1;");
    memset(buf + n, 'x', 4094);
    n += 4094;
    n += (size_t)sprintf(buf + n, "\r\na\r\n0\r\n\r\n");
    expect_feed(&b, buf, n, (ssize_t)n, 1);
    memmove(buf + 1, buf, n++);
    expect_feed(&b, buf, n, HTTP_ERR_BAD, 0);

    /* Leading zeros count against the line too. */
    memset(buf, '0', 4096);
    memcpy(buf + 4096, "\r\n\r\n", 4);
    expect_feed(&b, buf, 4100, 4100, 1);
    memset(buf, '0', 4097);
    memcpy(buf + 4097, "\r\n\r\n", 4);
    expect_feed(&b, buf, 4101, HTTP_ERR_BAD, 0);

    /* Same bound for a trailer line. */
    n = (size_t)sprintf(buf, "0\r\nX:");
    memset(buf + n, 'v', 4094);
    n += 4094;
    n += (size_t)sprintf(buf + n, "\r\n\r\n");
    expect_feed(&b, buf, n, (ssize_t)n, 1);
    memmove(buf + 4, buf + 3, n++ - 3);
    expect_feed(&b, buf, n, HTTP_ERR_BAD, 0);
    free(buf);
}

static void
test_response_no_body(void **state)
{
    static const struct {
        const char *head;
        size_t len;
        const char *method;
    } none[] = {
        {S("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"), "HEAD"},
        {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "HEAD"},
        {S("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"), "GET"},
        {S("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"), "GET"},
        {S("HTTP/1.1 100 Continue\r\n\r\n"), "POST"},
        {S("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"), "GET"},
        {S("HTTP/1.1 199 Whatever\r\nContent-Length: x\r\n\r\n"), "GET"},
        {S("HTTP/1.1 200 Connection established\r\n\r\n"), "CONNECT"},
        {S("HTTP/1.1 299 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "CONNECT"},
    };
    struct http_body b;
    size_t i;

    (void)state;
    for (i = 0; i < COUNT(none); i++) {
        assert_int_equal(response_framing(none[i].head, none[i].len, none[i].method, &b), 0);
        assert_int_equal(b.kind, HTTP_BODY_NONE);
        assert_true(b.done);
        expect_feed(&b, S("HTTP/1.1 200 OK\r\n\r\n"), 0, 1);
    }
}

static void
test_response_framing(void **state)
{
    static const char chunk[] = "3\r\nabc\r\n0\r\n\r\n";
    struct http_body b;

    (void)state;
    /* CONNECT refused: the 407 has a body like any other response. */
    assert_int_equal(response_framing(S("HTTP/1.1 407 Auth\r\nContent-Length: 3\r\n\r\n"),
                                      "CONNECT", &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_LENGTH);
    expect_feed(&b, S("abcHTTP/1.1"), 3, 1);

    assert_int_equal(response_framing(S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
                                      "GET", &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_CHUNKED);
    expect_feed(&b, S(chunk), sizeof(chunk) - 1, 1);

    /* No framing, or a coding other than chunked last: read until close. */
    assert_int_equal(response_framing(S("HTTP/1.0 200 OK\r\n\r\n"), "GET", &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_CLOSE);
    expect_feed(&b, S(chunk), sizeof(chunk) - 1, 0);
    assert_int_equal(response_framing(S("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
                                      "GET", &b), 0);
    assert_int_equal(b.kind, HTTP_BODY_CLOSE);
    assert_false(b.done);

    assert_int_equal(response_framing(S("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
                                        "Transfer-Encoding: chunked\r\n\r\n"), "GET", &b),
                     HTTP_ERR_BAD);
    assert_int_equal(response_framing(S("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n"
                                        "Content-Length: 2\r\n\r\n"), "GET", &b),
                     HTTP_ERR_BAD);
    assert_int_equal(response_framing(S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n"
                                        "\r\n"), "GET", &b),
                     HTTP_ERR_BAD);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_none),
        cmocka_unit_test(test_request_length),
        cmocka_unit_test(test_request_framing_bad),
        cmocka_unit_test(test_request_chunked_ok),
        cmocka_unit_test(test_chunked_body),
        cmocka_unit_test(test_chunked_bad),
        cmocka_unit_test(test_chunked_limits),
        cmocka_unit_test(test_response_no_body),
        cmocka_unit_test(test_response_framing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
