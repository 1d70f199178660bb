/* The HTTP/1 forwarding rules, one test per rule of the HTTP proxy's
 * forwarding (inbound/httpproxy.c before the driver): the upstream request
 * head, hop-by-hop fields, Host, keep-alive both ways, CONNECT, refusals,
 * body framing, the response head, local answers byte for byte, field
 * edits, the origin-form (MITM) view, and out of memory everywhere. The
 * arena is included so its mallocs can be made to fail. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../fail_malloc.h"

#define malloc(n) fm_malloc(n)
#include "../../../core/mem/arena.c"
#undef malloc

#include "http/h1_forward.h"

#define S(lit) lit, sizeof(lit) - 1

static struct mem_arena arena;
static struct http_fwd_req req;
static struct http_fwd_resp resp;
static const struct http_fwd_opts proxy = {.form = HTTP_FWD_PROXY};
static const struct http_fwd_opts origin = {
    .form = HTTP_FWD_ORIGIN, .default_host = MEM_SLICE_LIT("mitm.test"), .default_port = 443};

static int
setup(void **state)
{
    fm_reset();
    mem_arena_init(&arena);
    return 0;
}

static int
teardown(void **state)
{
    mem_arena_fini(&arena);
    return 0;
}

/* Parses |head| from a heap copy, takes it, then scribbles over the copy:
 * the request must not point into the caller's buffer. */
static void
take_with(const char *head, const struct http_fwd_opts *o)
{
    size_t len = strlen(head);
    char *buf = strdup(head);
    struct http_request p;

    assert_non_null(buf);
    assert_int_equal(http_h1_parse_request(buf, len, &p), (int)len);
    assert_int_equal(http_fwd_request_init(&req, &arena, o, buf, len, &p), 0);
    memset(buf, 'Z', len);
    free(buf);
}

static void
take(const char *head)
{
    take_with(head, &proxy);
}

/* The upstream head as a C string (in the arena). */
static const char *
upstream(void)
{
    struct mem_slice out;

    assert_int_equal(http_fwd_request_head(&req, &out), 0);
    return mem_arena_strndup(&arena, out.ptr, out.len);
}

static int
slice_is(struct mem_slice s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static void
test_origin_form(void **state)
{
    take("GET http://example.test/a/b?q=1 HTTP/1.1\r\nHost: example.test\r\n"
         "User-Agent: t\r\n\r\n");
    assert_int_equal(req.refused, 0);
    assert_false(req.connect);
    assert_true(slice_is(req.host, "example.test"));
    assert_int_equal(req.port, 80);
    assert_true(slice_is(req.path, "/a/b?q=1"));
    assert_true(slice_is(req.method, "GET"));
    assert_true(slice_is(req.target, "http://example.test/a/b?q=1"));
    assert_string_equal(upstream(),
                        "GET /a/b?q=1 HTTP/1.1\r\nHost: example.test\r\nUser-Agent: t\r\n\r\n");

    /* No path: "/". Any method goes as it came; the line is always 1.1. */
    take("PROPFIND http://example.test HTTP/1.0\r\nHost: example.test\r\n\r\n");
    assert_string_equal(upstream(), "PROPFIND / HTTP/1.1\r\nHost: example.test\r\n\r\n");
    /* The scheme is case-insensitive; the path's bytes are kept as sent. */
    take("GET HTTP://example.test:8080/%7Euser/\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_int_equal(req.port, 8080);
    assert_string_equal(upstream(),
                        "GET /%7Euser/\xc3\xa9 HTTP/1.1\r\nHost: example.test:8080\r\n\r\n");
}

static void
test_hop_by_hop(void **state)
{
    take("GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\nConnection: keep-alive\r\n"
         "Proxy-Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
         "Upgrade: websocket\r\nProxy-Authorization: Basic dTpw\r\nAccept:   */*  \r\n"
         "X-A: 1\r\nTrailer: X-T\r\nX-B: 2\r\n\r\n");
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: h.test\r\nAccept: */*\r\nX-A: 1\r\n"
                                    "Trailer: X-T\r\nX-B: 2\r\n\r\n");
    /* Names match case-insensitively. */
    take("GET http://h.test/ HTTP/1.1\r\nhost: h.test\r\nCONNECTION: close\r\nupgrade: h2c\r\n"
         "proxy-authorization: x\r\nte: trailers\r\n\r\n");
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nhost: h.test\r\n\r\n");
}

/* Proxy-Authorization never goes upstream, but the owner sees it (407). */
static void
test_proxy_authorization(void **state)
{
    const struct http_header *h;

    take("GET http://h.test/ HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\nHost: h.test\r\n\r\n");
    h = http_header_find(req.in, req.num_in, "proxy-authorization");
    assert_non_null(h);
    assert_true(slice_is(h->value, "Basic dTpw"));
    assert_null(http_fwd_field_get(&req.fields, "proxy-authorization"));
    assert_null(strstr(upstream(), "Basic"));
}

static void
test_connection_named(void **state)
{
    char head[512];

    take("GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\nConnection: X-Foo, close\r\n"
         "X-Foo: 1\r\nX-Foobar: 2\r\nx-bar: 3\r\nConnection:  X-BAR \r\nX-Keep: 4\r\n\r\n");
    /* Each listed field goes, matched whole: X-Foobar stays. */
    assert_string_equal(upstream(),
                        "GET / HTTP/1.1\r\nHost: h.test\r\nX-Foobar: 2\r\nX-Keep: 4\r\n\r\n");
    assert_true(req.close);
    /* A listed name longer than 64 bytes goes too. */
    snprintf(head, sizeof(head),
             "GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\nConnection: %s\r\n%s: v\r\n\r\n",
             "X-0123456789012345678901234567890123456789012345678901234567890123456789",
             "X-0123456789012345678901234567890123456789012345678901234567890123456789");
    take(head);
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: h.test\r\n\r\n");
}

/* A client naming the framing fields or Host in Connection does not get
 * them dropped: the body goes on with the framing the head announces. */
static void
test_connection_framing_kept(void **state)
{
    take("POST http://h.test/ HTTP/1.1\r\nHost: h.test\r\n"
         "Connection: Content-Length, Transfer-Encoding, Host, X-Gone\r\nX-Gone: 1\r\n"
         "Content-Length: 5\r\n\r\n");
    assert_int_equal(req.body.kind, HTTP_BODY_LENGTH);
    assert_string_equal(upstream(),
                        "POST / HTTP/1.1\r\nHost: h.test\r\nContent-Length: 5\r\n\r\n");
    take("POST http://h.test/ HTTP/1.1\r\nConnection: transfer-encoding\r\n"
         "Transfer-Encoding: chunked\r\n\r\n");
    assert_int_equal(req.body.kind, HTTP_BODY_CHUNKED);
    assert_string_equal(upstream(),
                        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: h.test\r\n\r\n");
}

static void
test_host(void **state)
{
    /* Replaced by the target's authority when it names another host
     * (RFC 9112 §3.2.2): the rules decided on the target, not on Host. */
    take("GET http://a.test/ HTTP/1.1\r\nHost: b.test:81\r\n\r\n");
    assert_true(slice_is(req.host, "a.test"));
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    /* Added last when missing, with the port unless it is 80. */
    take("GET http://a.test/x HTTP/1.1\r\nAccept: */*\r\n\r\n");
    assert_string_equal(upstream(), "GET /x HTTP/1.1\r\nAccept: */*\r\nHost: a.test\r\n\r\n");
    take("GET http://a.test:80/ HTTP/1.1\r\n\r\n");
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    take("GET http://a.test:8080/ HTTP/1.1\r\n\r\n");
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: a.test:8080\r\n\r\n");
    take("GET http://[2001:db8::1]:8080/ HTTP/1.1\r\n\r\n");
    assert_true(slice_is(req.host, "2001:db8::1"));
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n");
    take("GET http://[::1]/ HTTP/1.1\r\n\r\n");
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n");
    take("GET http://127.0.0.1:65535/ HTTP/1.1\r\n\r\n");
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: 127.0.0.1:65535\r\n\r\n");
}

static void
test_keep_alive_request(void **state)
{
    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    assert_false(req.close);
    take("GET http://h.test/ HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_true(req.close);
    take("GET http://h.test/ HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n");
    assert_true(req.close);
    take("GET http://h.test/ HTTP/1.1\r\nConnection: closed\r\n\r\n");
    assert_false(req.close);
    take("GET http://h.test/ HTTP/1.0\r\n\r\n");
    assert_true(req.close);
    take("GET http://h.test/ HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    assert_false(req.close);
    /* Only Connection counts, not Proxy-Connection. */
    take("GET http://h.test/ HTTP/1.1\r\nProxy-Connection: close\r\n\r\n");
    assert_false(req.close);
    take("GET http://h.test/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n");
    assert_true(req.close);
}

static void
test_connect(void **state)
{
    struct mem_slice out;

    take("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n");
    assert_int_equal(req.refused, 0);
    assert_true(req.connect);
    assert_true(slice_is(req.host, "a.test"));
    assert_int_equal(req.port, 443);
    assert_int_equal(req.body.kind, HTTP_BODY_NONE);
    assert_true(req.body.done);
    assert_int_equal(http_fwd_request_head(&req, &out), -1); /* never forwarded */
    take("connect [::1]:22 HTTP/1.1\r\n\r\n");
    assert_true(req.connect);
    assert_true(slice_is(req.host, "::1"));
    assert_int_equal(req.port, 22);
    /* A CONNECT's body framing is not looked at. */
    take("CONNECT a.test:443 HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_int_equal(req.refused, 0);
    assert_true(req.body.done);

    take("CONNECT a.test HTTP/1.1\r\n\r\n");
    assert_int_equal(req.refused, 400);
    assert_false(req.connect);
    take("CONNECT a.test: HTTP/1.1\r\n\r\n");
    assert_int_equal(req.refused, 400);
    take("CONNECT a.test:99999 HTTP/1.1\r\n\r\n");
    assert_int_equal(req.refused, 400);
    take("CONNECT a.test:0 HTTP/1.1\r\n\r\n");
    assert_int_equal(req.refused, 400);
    take("CONNECT http://a.test:443/ HTTP/1.1\r\n\r\n");
    assert_int_equal(req.refused, 400);
}

static void
test_refused(void **state)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "GET https://h.test/ HTTP/1.1\r\n\r\n",
        "GET http://user@h.test/ HTTP/1.1\r\n\r\n",
        "GET http://h.test?q HTTP/1.1\r\n\r\n",
        "GET http://h.test:0/ HTTP/1.1\r\n\r\n",
        "GET http://h.test:65536/ HTTP/1.1\r\n\r\n",
        "GET http:///x HTTP/1.1\r\n\r\n",
        "GET http://[::1/ HTTP/1.1\r\n\r\n",
        "POST http://h.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST http://h.test/ HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n",
        "POST http://h.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST http://h.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
    };
    struct mem_slice out;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        take(bad[i]);
        assert_int_equal(req.refused, 400);
        assert_int_equal(http_fwd_request_head(&req, &out), -1);
        /* What was received is still there, for the owner's own checks. */
        assert_true(req.method.len > 0);
        assert_true(req.target.len > 0);
    }
    take("GET / HTTP/1.1\r\nProxy-Authorization: Basic eA==\r\n\r\n");
    assert_non_null(http_header_find(req.in, req.num_in, "proxy-authorization"));
    /* A refused request still says whether the client wanted to close. */
    take("GET / HTTP/1.0\r\n\r\n");
    assert_true(req.close);
}

static void
test_request_body(void **state)
{
    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    assert_int_equal(req.body.kind, HTTP_BODY_NONE);
    assert_true(req.body.done);
    take("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
    assert_int_equal(req.body.kind, HTTP_BODY_LENGTH);
    assert_int_equal(req.body.remaining, 5);
    assert_false(req.body.done);
    take("POST http://h.test/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_true(req.body.done);
    take("POST http://h.test/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n");
    assert_int_equal(req.body.remaining, 5);
    take("PUT http://h.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    assert_int_equal(req.body.kind, HTTP_BODY_CHUNKED);
    /* The framing fields go upstream as received. */
    assert_string_equal(upstream(), "PUT / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n"
                                    "Host: h.test\r\n\r\n");
}

/* The response to the request taken last, from a heap copy of |head|;
 * returns the copy (freed by the caller) since without |copy| the
 * response points into it. */
static char *
response(const char *head, int copy, int want)
{
    size_t len = strlen(head);
    char *buf = strdup(head);
    struct http_response p;

    assert_non_null(buf);
    assert_int_equal(http_h1_parse_response(buf, len, &p), (int)len);
    assert_int_equal(http_fwd_response_init(&resp, &arena, &req, buf, len, &p, copy), want);
    return buf;
}

static void
response_kind(const char *head, enum http_body_kind kind, int close)
{
    free(response(head, 0, 0));
    assert_int_equal(resp.body.kind, kind);
    assert_int_equal(resp.close, close);
}

static void
test_response_framing(void **state)
{
    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    response_kind("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", HTTP_BODY_LENGTH, 0);
    assert_int_equal(resp.body.remaining, 3);
    response_kind("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP_BODY_CHUNKED, 0);
    response_kind("HTTP/1.1 200 OK\r\n\r\n", HTTP_BODY_CLOSE, 1);
    response_kind("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", HTTP_BODY_CLOSE, 1);
    response_kind("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", HTTP_BODY_NONE, 0);
    response_kind("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", HTTP_BODY_NONE, 0);
    assert_false(resp.interim);
    /* 1xx: passed on, the final response follows; close is not decided. */
    response_kind("HTTP/1.1 100 Continue\r\n\r\n", HTTP_BODY_NONE, 0);
    assert_true(resp.interim);
    response_kind("HTTP/1.1 103 Early Hints\r\nConnection: close\r\n\r\n", HTTP_BODY_NONE, 0);
    assert_true(resp.interim);
    free(response("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 0,
                  HTTP_ERR_BAD));
    free(response("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0,
                  HTTP_ERR_BAD));
    /* A HEAD request's response has no body, whatever it says. */
    take("HEAD http://h.test/ HTTP/1.1\r\n\r\n");
    response_kind("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", HTTP_BODY_NONE, 0);
    response_kind("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                  HTTP_BODY_NONE, 0);
}

static void
test_response_close(void **state)
{
    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    response_kind("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                  HTTP_BODY_LENGTH, 1);
    response_kind("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: Keep-Alive, CLOSE\r\n\r\n",
                  HTTP_BODY_LENGTH, 1);
    response_kind("HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
                  HTTP_BODY_LENGTH, 1);
    response_kind("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
                  HTTP_BODY_LENGTH, 0);
}

/* Unedited, the client gets the very bytes the upstream sent (copied or
 * not); edited, a new head with the same status line. */
static void
test_response_head(void **state)
{
    static const char head[] = "HTTP/1.1 200 Fine By Me\r\nServer: o\r\nContent-Length: 2\r\n"
                               "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nConnection: keep-alive\r\n\r\n";
    struct mem_slice out;
    char *buf;

    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    buf = response(head, 0, 0);
    assert_int_equal(resp.fields.n, 0);
    assert_int_equal(http_fwd_response_head(&resp, &out), 0);
    assert_ptr_equal(out.ptr, buf);
    assert_int_equal(out.len, sizeof(head) - 1);
    free(buf);

    free(response(head, 1, 0));
    assert_int_equal(resp.fields.n, 5);
    assert_true(slice_is(resp.reason, "Fine By Me"));
    assert_int_equal(http_fwd_response_head(&resp, &out), 0);
    assert_true(slice_is(out, head));
    assert_false(http_fwd_fields_edited(&resp.fields));

    assert_int_equal(http_fwd_field_del(&resp.fields, MEM_SLICE_LIT("server")), 1);
    assert_int_equal(http_fwd_field_add(&resp.fields, MEM_SLICE_LIT("X-Hook"), MEM_SLICE_LIT("1")),
                     0);
    assert_true(http_fwd_fields_edited(&resp.fields));
    assert_int_equal(http_fwd_response_head(&resp, &out), 0);
    assert_true(slice_is(out, "HTTP/1.1 200 Fine By Me\r\nContent-Length: 2\r\n"
                              "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nConnection: keep-alive\r\n"
                              "X-Hook: 1\r\n\r\n"));

    /* The version is kept, and an empty reason stays empty. */
    free(response("HTTP/1.0 404\r\nContent-Length: 0\r\n\r\n", 1, 0));
    assert_int_equal(http_fwd_field_set(&resp.fields, MEM_SLICE_LIT("X-A"), MEM_SLICE_LIT("b")), 0);
    assert_int_equal(http_fwd_response_head(&resp, &out), 0);
    assert_true(slice_is(out, "HTTP/1.0 404 \r\nContent-Length: 0\r\nX-A: b\r\n\r\n"));
}

/* The answers the HTTP proxy gives, byte for byte. */
static void
test_reply(void **state)
{
    struct mem_slice out;

    assert_int_equal(http_fwd_reply(&arena, NULL, 400, "Bad Request", NULL, 1, &out), 0);
    assert_true(slice_is(out, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                              "Content-Length: 12\r\nConnection: close\r\n\r\nBad Request\n"));
    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    assert_int_equal(http_fwd_reply(&arena, &req, 407, "Proxy Authentication Required",
                                    "Proxy-Authenticate: Basic realm=\"chute\"\r\n", 1, &out),
                     0);
    assert_true(slice_is(out, "HTTP/1.1 407 Proxy Authentication Required\r\n"
                              "Content-Type: text/plain\r\nContent-Length: 30\r\n"
                              "Connection: close\r\nProxy-Authenticate: Basic realm=\"chute\"\r\n"
                              "\r\nProxy Authentication Required\n"));
    assert_int_equal(http_fwd_reply(&arena, &req, 431, "Request Header Fields Too Large", NULL, 1,
                                    &out),
                     0);
    assert_true(slice_is(out, "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                              "Content-Type: text/plain\r\nContent-Length: 32\r\n"
                              "Connection: close\r\n\r\nRequest Header Fields Too Large\n"));
    /* Keep-alive answers, statuses without a body, HEAD. */
    assert_int_equal(http_fwd_reply(&arena, &req, 403, "Forbidden", NULL, 0, &out), 0);
    assert_true(slice_is(out, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
                              "Content-Length: 10\r\n\r\nForbidden\n"));
    assert_int_equal(http_fwd_reply(&arena, &req, 204, "No Content", NULL, 0, &out), 0);
    assert_true(slice_is(out, "HTTP/1.1 204 No Content\r\n\r\n"));
    assert_int_equal(http_fwd_reply(&arena, &req, 304, "Not Modified", "ETag: \"x\"\r\n", 1, &out),
                     0);
    assert_true(slice_is(out, "HTTP/1.1 304 Not Modified\r\nConnection: close\r\nETag: \"x\"\r\n\r\n"));
    take("HEAD http://h.test/ HTTP/1.1\r\n\r\n");
    assert_int_equal(http_fwd_reply(&arena, &req, 502, "Bad Gateway", NULL, 1, &out), 0);
    assert_true(slice_is(out, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
                              "Content-Length: 12\r\nConnection: close\r\n\r\n"));
}

static void
test_after(void **state)
{
    char *b;

    take("GET http://h.test/ HTTP/1.1\r\n\r\n");
    b = response("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0);
    assert_int_equal(http_fwd_after(&req, &resp, 1), HTTP_FWD_KEEP);
    assert_int_equal(http_fwd_after(&req, &resp, 0), HTTP_FWD_DROP_UPSTREAM);
    resp.close = 1;
    assert_int_equal(http_fwd_after(&req, &resp, 1), HTTP_FWD_CLOSE);
    free(b);
    take("GET http://h.test/ HTTP/1.1\r\nConnection: close\r\n\r\n");
    b = response("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 0, 0);
    assert_int_equal(http_fwd_after(&req, &resp, 1), HTTP_FWD_CLOSE);
    free(b);
    /* The response ended before the request body did: close. */
    take("POST http://h.test/ HTTP/1.1\r\nContent-Length: 10\r\n\r\n");
    b = response("HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n", 0, 0);
    assert_int_equal(http_fwd_after(&req, &resp, 1), HTTP_FWD_CLOSE);
    assert_int_equal(http_body_feed(&req.body, S("0123456789")), 10);
    assert_int_equal(http_fwd_after(&req, &resp, 1), HTTP_FWD_KEEP);
    free(b);
}

static void
test_fields(void **state)
{
    struct http_fwd_fields *f = &req.fields;
    const struct http_header *h;
    char name[16];

    take("GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\nX-A: 1\r\nCookie: a\r\nx-a: 2\r\n"
         "Content-Length: 0\r\n\r\n");
    assert_false(http_fwd_fields_edited(f));
    /* set: the first in place, the others gone. */
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("X-A"), MEM_SLICE_LIT("new")), 0);
    assert_true(http_fwd_fields_edited(f));
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: h.test\r\nX-A: new\r\nCookie: a\r\n"
                                    "Content-Length: 0\r\n\r\n");
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("Host"), MEM_SLICE_LIT("o.test")), 0);
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("X-New"), MEM_SLICE_LIT("")), 0);
    assert_int_equal(http_fwd_field_del(f, MEM_SLICE_LIT("cookie")), 1);
    assert_int_equal(http_fwd_field_del(f, MEM_SLICE_LIT("cookie")), 0);
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: o.test\r\nX-A: new\r\n"
                                    "Content-Length: 0\r\nX-New: \r\n\r\n");
    h = http_fwd_field_get(f, "x-a");
    assert_non_null(h);
    assert_true(slice_is(h->value, "new"));
    assert_null(http_fwd_field_get(f, "cookie"));
    /* Growing past the room left: the fields are moved, nothing lost. */
    for (int i = 0; i < 60; i++) {
        int n = snprintf(name, sizeof(name), "X-%d", i);

        assert_int_equal(http_fwd_field_add(f, mem_slice(name, (size_t)n), mem_slice(name, 2)),
                         0);
    }
    assert_int_equal(f->n, 64);
    assert_true(slice_is(f->v[0].name, "Host"));
    assert_true(slice_is(f->v[63].name, "X-59"));
    /* Values are copied: the caller's buffer may change. */
    memset(name, 0, sizeof(name));
    assert_true(slice_is(f->v[63].value, "X-"));
    /* No injection, no framing changes. */
    assert_int_equal(http_fwd_field_add(f, MEM_SLICE_LIT(""), MEM_SLICE_LIT("v")), -1);
    assert_int_equal(http_fwd_field_add(f, MEM_SLICE_LIT("A B"), MEM_SLICE_LIT("v")), -1);
    assert_int_equal(http_fwd_field_add(f, MEM_SLICE_LIT("A:"), MEM_SLICE_LIT("v")), -1);
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("X-A"), MEM_SLICE_LIT("a\r\nX-B: 1")), -1);
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("X-A"), mem_slice("a\0b", 3)), -1);
    assert_int_equal(http_fwd_field_add(f, MEM_SLICE_LIT("X-A"), MEM_SLICE_LIT("a\x7f")), -1);
    assert_int_equal(http_fwd_field_add(f, MEM_SLICE_LIT("X-A"), MEM_SLICE_LIT("a\tb \x80")), 0);
    /* Surrounding whitespace is not part of a value. */
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("X-T"), MEM_SLICE_LIT(" \t v w\t ")), 0);
    assert_true(slice_is(http_fwd_field_get(f, "x-t")->value, "v w"));
    assert_int_equal(http_fwd_field_set(f, MEM_SLICE_LIT("content-length"), MEM_SLICE_LIT("9")), -1);
    assert_int_equal(http_fwd_field_add(f, MEM_SLICE_LIT("Transfer-Encoding"),
                                        MEM_SLICE_LIT("chunked")),
                     -1);
    assert_int_equal(http_fwd_field_del(f, MEM_SLICE_LIT("Content-Length")), -1);
    assert_int_equal(http_fwd_field_del(f, MEM_SLICE_LIT("HOST")), -1);
    assert_non_null(http_fwd_field_get(f, "host"));
    assert_non_null(http_fwd_field_get(f, "content-length"));
}

/* The MITM's view: origin-form targets, the authority from Host. */
static void
test_origin_view(void **state)
{
    take_with("GET /x?y HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n", &origin);
    assert_int_equal(req.refused, 0);
    assert_true(slice_is(req.host, "a.test"));
    assert_int_equal(req.port, 443);
    assert_true(req.close);
    assert_string_equal(upstream(), "GET /x?y HTTP/1.1\r\nHost: a.test\r\n\r\n");
    take_with("GET / HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n", &origin);
    assert_true(slice_is(req.host, "::1"));
    assert_int_equal(req.port, 8443);
    take_with("OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", &origin);
    assert_string_equal(upstream(), "OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n");
    /* HTTP/1.0 without Host: the flow's name, added upstream. */
    take_with("GET / HTTP/1.0\r\n\r\n", &origin);
    assert_int_equal(req.refused, 0);
    assert_true(slice_is(req.host, "mitm.test"));
    assert_string_equal(upstream(), "GET / HTTP/1.1\r\nHost: mitm.test\r\n\r\n");

    take_with("GET / HTTP/1.1\r\n\r\n", &origin);
    assert_int_equal(req.refused, 400);
    take_with("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", &origin);
    assert_int_equal(req.refused, 400);
    take_with("GET / HTTP/1.1\r\nHost: u@a.test\r\n\r\n", &origin);
    assert_int_equal(req.refused, 400);
    take_with("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", &origin);
    assert_int_equal(req.refused, 400);
    take_with("GET * HTTP/1.1\r\nHost: a.test\r\n\r\n", &origin);
    assert_int_equal(req.refused, 400);
    take_with("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n", &origin);
    assert_int_equal(req.refused, 400);
    assert_false(req.connect);
}

/* Every allocation failing in turn: -1 (or a refusal) comes back, never a
 * crash or a half-made head, and with memory back all of it works. */
static void
test_out_of_memory(void **state)
{
    static const char rq[] = "POST http://h.test:81/p HTTP/1.1\r\nA: 1\r\nB: 2\r\n"
                             "Content-Length: 3\r\n\r\n";
    static const char rs[] = "HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 3\r\n\r\n";
    struct http_request pq;
    struct http_response ps;
    int k, all_ok = 0;

    assert_int_equal(http_h1_parse_request(rq, sizeof(rq) - 1, &pq), (int)sizeof(rq) - 1);
    assert_int_equal(http_h1_parse_response(rs, sizeof(rs) - 1, &ps), (int)sizeof(rs) - 1);
    for (k = 0; k < 20 && !all_ok; k++) {
        struct mem_slice out;
        int ok = 1;

        mem_arena_fini(&arena);
        fm_fail_after = k;
        ok &= http_fwd_request_init(&req, &arena, &proxy, rq, sizeof(rq) - 1, &pq) == 0;
        ok &= ok && http_fwd_field_add(&req.fields, MEM_SLICE_LIT("X"), MEM_SLICE_LIT("y")) == 0;
        ok &= ok && http_fwd_request_head(&req, &out) == 0;
        if (ok)
            assert_non_null(memmem(out.ptr, out.len, S("Host: h.test:81\r\nX: y\r\n")));
        ok &= ok && http_fwd_response_init(&resp, &arena, &req, rs, sizeof(rs) - 1, &ps, 1) == 0;
        ok &= ok && http_fwd_field_set(&resp.fields, MEM_SLICE_LIT("Server"), MEM_SLICE_LIT("c")) == 0;
        ok &= ok && http_fwd_response_head(&resp, &out) == 0;
        ok &= ok && http_fwd_reply(&arena, &req, 502, "Bad Gateway", NULL, 1, &out) == 0;
        all_ok = ok;
    }
    assert_true(all_ok);
    assert_true(k > 1);
    fm_fail_after = -1;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_origin_form, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hop_by_hop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_authorization, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_framing_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_framing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_origin_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_memory, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
