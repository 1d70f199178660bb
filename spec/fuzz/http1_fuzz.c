/* libFuzzer target for core/http: the input is parsed as a request head and
 * as a response head, what follows a head (or the whole input) is framed as
 * a body of each kind, and request targets are split. Invariants are checked
 * with abort() so they hold in every build, NDEBUG or not. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "fuzz.h"

static int
inside(struct mem_slice s, const void *base, size_t len)
{
    uintptr_t b = (uintptr_t)base, p = (uintptr_t)s.ptr;

    return p >= b && p <= b + len && s.len <= b + len - p;
}

/* A parsed field: a non-empty name with no separator in it, and a trimmed
 * value free of the bytes that end lines. */
static void
check_headers(const struct http_header *h, size_t n, const uint8_t *data, size_t len)
{
    size_t i, k;

    CHECK(n <= HTTP_MAX_HEADERS);
    for (i = 0; i < n; i++) {
        struct mem_slice v = h[i].value;

        CHECK(inside(h[i].name, data, len) && inside(v, data, len));
        CHECK(h[i].name.len > 0);
        for (k = 0; k < h[i].name.len; k++)
            CHECK(h[i].name.ptr[k] > ' ' && h[i].name.ptr[k] != ':');
        for (k = 0; k < v.len; k++)
            CHECK(v.ptr[k] != '\r' && v.ptr[k] != '\n' && v.ptr[k] != '\0');
        if (v.len > 0) {
            CHECK(v.ptr[0] != ' ' && v.ptr[0] != '\t');
            CHECK(v.ptr[v.len - 1] != ' ' && v.ptr[v.len - 1] != '\t');
        }
    }
}

/* A prefix of length |k| must give INCOMPLETE or the answer |whole| gives,
 * and a successful head length is reached exactly when k covers it. */
static void
check_prefix(int r, int whole, size_t k)
{
    if (whole > 0)
        CHECK(k >= (size_t)whole ? r == whole : r == HTTP_ERR_INCOMPLETE);
    else
        CHECK(r == HTTP_ERR_INCOMPLETE || r == whole);
}

/* Lookups return one of the headers, and only a Connection header lists. */
static void
check_lookups(const struct http_header *h, size_t n)
{
    const struct http_header *found = http_header_find(h, n, "connection");

    CHECK(found == NULL || (found >= h && found < h + n));
    CHECK(found == NULL || mem_slice_ieq(found->name, "connection"));
    if (http_connection_has(h, n, "close") || http_connection_has(h, n, "keep-alive"))
        CHECK(found != NULL);
}

static void
check_result(int r, size_t size)
{
    CHECK(r == HTTP_ERR_INCOMPLETE || r == HTTP_ERR_BAD || r == HTTP_ERR_TOO_LARGE ||
          (r > 0 && (size_t)r <= size && r <= HTTP_MAX_HEAD));
    if (r == HTTP_ERR_INCOMPLETE)
        CHECK(size <= HTTP_MAX_HEAD);
}

/* Feeds the body whole and in |step|-byte pieces; both must agree, never
 * take more than offered, and take everything offered until done. */
static void
check_feed(const struct http_body *init, const uint8_t *p, size_t len, size_t step)
{
    struct http_body whole = *init, parts = *init;
    ssize_t r = http_body_feed(&whole, (const char *)p, len);
    size_t off = 0;

    CHECK(r == HTTP_ERR_BAD || (r >= 0 && (size_t)r <= len));
    if (r >= 0 && !whole.done)
        CHECK((size_t)r == len);
    if (whole.kind == HTTP_BODY_CLOSE)
        CHECK((size_t)r == len && !whole.done);
    if (whole.kind == HTTP_BODY_NONE)
        CHECK(r == 0 && whole.done);
    if (r == HTTP_ERR_BAD)
        CHECK(whole.kind == HTTP_BODY_CHUNKED &&
              http_body_feed(&whole, (const char *)p, len) == HTTP_ERR_BAD);
    if (whole.done)
        CHECK(http_body_feed(&whole, (const char *)p, len) == 0);

    while (off < len && !parts.done) {
        size_t n = len - off < step ? len - off : step;
        ssize_t q = http_body_feed(&parts, (const char *)p + off, n);

        if (q < 0) {
            CHECK(q == HTTP_ERR_BAD && r == HTTP_ERR_BAD);
            return;
        }
        CHECK((size_t)q <= n);
        if (!parts.done)
            CHECK((size_t)q == n);
        off += (size_t)q;
    }
    CHECK(r >= 0 && (size_t)r == off && parts.done == whole.done);
}

static void
check_bodies(const struct http_body *framed, const uint8_t *p, size_t len, size_t step)
{
    static const char chunked[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    static const char eof[] = "HTTP/1.1 200 OK\r\n\r\n";
    struct http_request req;
    struct http_response res;
    struct http_body b;
    char head[64];
    int n;

    if (framed != NULL) {
        check_feed(framed, p, len, 1);
        check_feed(framed, p, len, step);
    }
    CHECK(http_h1_parse_request(chunked, sizeof(chunked) - 1, &req) > 0);
    CHECK(http_body_init_request(&b, &req) == 0 && b.kind == HTTP_BODY_CHUNKED);
    check_feed(&b, p, len, 1);
    check_feed(&b, p, len, step);

    n = snprintf(head, sizeof(head), "POST / HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", len / 2);
    CHECK(http_h1_parse_request(head, (size_t)n, &req) == n);
    CHECK(http_body_init_request(&b, &req) == 0 && b.kind == HTTP_BODY_LENGTH);
    check_feed(&b, p, len, step);

    CHECK(http_h1_parse_response(eof, sizeof(eof) - 1, &res) > 0);
    CHECK(http_body_init_response(&b, &res, MEM_SLICE_LIT("GET")) == 0);
    CHECK(b.kind == HTTP_BODY_CLOSE);
    check_feed(&b, p, len, step);
}

static void
check_split(struct mem_slice target, int authority_form)
{
    struct mem_slice host, path;
    uint16_t port;

    if (http_target_split(target, authority_form, &host, &port, &path) != 0)
        return;
    CHECK(host.len > 0 && inside(host, target.ptr, target.len));
    CHECK(inside(path, target.ptr, target.len) || (path.len == 1 && path.ptr[0] == '/'));
    CHECK(authority_form ? path.len == 0 : (path.len > 0 && path.ptr[0] == '/'));
    CHECK(authority_form || port != 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct mem_slice methods[] = {
        MEM_SLICE_LIT("GET"), MEM_SLICE_LIT("HEAD"), MEM_SLICE_LIT("CONNECT"),
        MEM_SLICE_LIT("POST"),
    };
    const char *buf = (const char *)data;
    size_t step = size ? 1 + data[size - 1] % 13 : 1;
    struct http_request req, again;
    struct http_response res, res2;
    struct http_body body;
    int r;

    r = http_h1_parse_request(buf, size, &req);
    check_result(r, size);
    check_prefix(http_h1_parse_request(buf, size / 2, &again), r, size / 2);
    if (size > 0)
        check_prefix(http_h1_parse_request(buf, size - 1, &again), r, size - 1);
    if (r > 0) {
        CHECK(req.minor_version == 0 || req.minor_version == 1);
        CHECK(req.method.len > 0 && inside(req.method, data, size));
        CHECK(req.target.len > 0 && inside(req.target, data, size));
        check_headers(req.headers, req.num_headers, data, size);
        check_lookups(req.headers, req.num_headers);
        CHECK(http_h1_parse_request(buf, (size_t)r, &again) == r);
        check_prefix(http_h1_parse_request(buf, (size_t)r - 1, &again), r, (size_t)r - 1);
        check_split(req.target, mem_slice_eq(req.method, MEM_SLICE_LIT("CONNECT")));
        check_split(req.target, !mem_slice_eq(req.method, MEM_SLICE_LIT("CONNECT")));
        if (http_body_init_request(&body, &req) == 0)
            check_bodies(&body, data + r, size - (size_t)r, step);
        else
            check_bodies(NULL, data + r, size - (size_t)r, step);
    }

    r = http_h1_parse_response(buf, size, &res);
    check_result(r, size);
    check_prefix(http_h1_parse_response(buf, size / 2, &res2), r, size / 2);
    if (size > 0)
        check_prefix(http_h1_parse_response(buf, size - 1, &res2), r, size - 1);
    if (r > 0) {
        CHECK(res.status >= 100 && res.status <= 999);
        CHECK(res.minor_version == 0 || res.minor_version == 1);
        CHECK(inside(res.reason, data, size));
        check_headers(res.headers, res.num_headers, data, size);
        check_lookups(res.headers, res.num_headers);
        check_prefix(http_h1_parse_response(buf, (size_t)r - 1, &res2), r, (size_t)r - 1);
        if (http_body_init_response(&body, &res, methods[size % 4]) == 0)
            check_bodies(&body, data + r, size - (size_t)r, step);
    }

    /* Raw input as a body of each kind, and as a target of each form. */
    check_bodies(NULL, data, size, step);
    check_split(mem_slice(data, size), 0);
    check_split(mem_slice(data, size), 1);
    return 0;
}
