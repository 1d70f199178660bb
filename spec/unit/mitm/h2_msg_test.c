/* h2 header blocks as the hooks see them (core/mitm/h2_msg.c): the
 * pseudo-fields become the request line and Host, a hook's edits go back
 * as lower-case h2 fields, connection-specific fields are refused on the
 * way in and dropped on the way out, te: trailers survives, CONNECT and
 * :protocol are refused, a response's :status and fields round-trip. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mitm/h2_int.h"

static struct mem_arena A;

static void
add(struct h2_fields *f, const char *n, const char *v)
{
    assert_int_equal(0, h2_fields_add(f, &A, (const uint8_t *)n, strlen(n), (const uint8_t *)v,
                                      strlen(v)));
}

static struct h2_fields
get(const char *path)
{
    struct h2_fields f = {0};
    add(&f, ":method", "GET");
    add(&f, ":scheme", "https");
    add(&f, ":authority", "api.example.com");
    add(&f, ":path", path);
    return f;
}

/* The value of |name| in |v|, or NULL. */
static const char *
nv(const nghttp2_nv *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].namelen == strlen(name) && memcmp(v[i].name, name, v[i].namelen) == 0)
            return mem_arena_strndup(&A, (const char *)v[i].value, v[i].valuelen);
    return NULL;
}

static void
test_request_as_h1(void **state)
{
    mem_arena_init(&A);
    struct h2_fields f = get("/v1/x?a=1");
    add(&f, "host", "ignored.example");
    add(&f, "te", "trailers");
    add(&f, "user-agent", "t");
    struct http_fwd_req req;
    assert_int_equal(0, h2_msg_request(&req, &A, &f, MEM_SLICE_LIT("api.example.com"), 443, 0));
    assert_int_equal(0, req.refused);
    assert_true(mem_slice_ieq(req.method, "GET"));
    assert_true(mem_slice_ieq(req.path, "/v1/x?a=1"));
    assert_true(mem_slice_ieq(req.host, "api.example.com")); /* :authority wins over host */
    assert_int_equal(443, req.port);
    /* A hook's edit, in any case, goes out in lower case. */
    assert_int_equal(0, http_fwd_field_set(&req.fields, MEM_SLICE_LIT("X-Chute"),
                                           MEM_SLICE_LIT("hooked")));
    nghttp2_nv *v;
    size_t n;
    assert_int_equal(0, h2_msg_request_nv(&req, &A, &v, &n));
    /* nv names carry their length, not a NUL */
    assert_int_equal(7, v[0].namelen);
    assert_memory_equal(":method", v[0].name, 7);
    assert_string_equal("api.example.com", nv(v, n, ":authority"));
    assert_string_equal("/v1/x?a=1", nv(v, n, ":path"));
    assert_string_equal("hooked", nv(v, n, "x-chute"));
    assert_string_equal("trailers", nv(v, n, "te"));
    assert_null(nv(v, n, "host"));
    mem_arena_fini(&A);
}

static void
test_refused(void **state)
{
    mem_arena_init(&A);
    struct http_fwd_req req;
    struct h2_fields f = get("/");
    add(&f, "connection", "close"); /* RFC 9113 §8.2.2: malformed */
    assert_int_equal(0, h2_msg_request(&req, &A, &f, MEM_SLICE_LIT("h"), 443, 0));
    assert_int_equal(400, req.refused);
    struct h2_fields c = {0};
    add(&c, ":method", "CONNECT");
    add(&c, ":authority", "h:443");
    assert_int_equal(0, h2_msg_request(&req, &A, &c, MEM_SLICE_LIT("h"), 443, 0));
    assert_int_equal(405, req.refused);
    struct h2_fields e = get("/chat");
    add(&e, ":protocol", "websocket"); /* extended CONNECT's field anywhere */
    assert_int_equal(0, h2_msg_request(&req, &A, &e, MEM_SLICE_LIT("h"), 443, 0));
    assert_int_equal(400, req.refused);
    struct h2_fields m = {0};
    add(&m, ":method", "GET");
    add(&m, ":path", "/"); /* no :scheme */
    assert_int_equal(0, h2_msg_request(&req, &A, &m, MEM_SLICE_LIT("h"), 443, 0));
    assert_int_equal(400, req.refused);
    mem_arena_fini(&A);
}

static void
test_response_round_trip(void **state)
{
    mem_arena_init(&A);
    struct h2_fields f = get("/");
    struct http_fwd_req req;
    assert_int_equal(0, h2_msg_request(&req, &A, &f, MEM_SLICE_LIT("h"), 443, 0));
    struct h2_fields r = {0};
    add(&r, ":status", "200");
    add(&r, "content-length", "5");
    add(&r, "set-cookie", "a=1");
    add(&r, "set-cookie", "b=2");
    add(&r, "keep-alive", "timeout=5");
    struct http_fwd_resp resp;
    assert_int_equal(0, h2_msg_response(&resp, &A, &req, &r));
    assert_int_equal(200, resp.status);
    assert_int_equal(0, resp.interim);
    assert_int_equal(0, http_fwd_field_add(&resp.fields, MEM_SLICE_LIT("X-Resp"),
                                           MEM_SLICE_LIT("seen")));
    nghttp2_nv *v;
    size_t n;
    assert_int_equal(0, h2_msg_response_nv(&resp, &A, &v, &n));
    assert_string_equal("200", nv(v, n, ":status"));
    assert_string_equal("5", nv(v, n, "content-length"));
    assert_string_equal("seen", nv(v, n, "x-resp"));
    assert_null(nv(v, n, "keep-alive"));
    assert_int_equal(5, n); /* :status, content-length, 2 set-cookie, x-resp */
    struct h2_fields bad = {0};
    add(&bad, ":status", "20");
    assert_int_equal(HTTP_ERR_BAD, h2_msg_response(&resp, &A, &req, &bad));
    struct h2_fields one = {0};
    add(&one, ":status", "103");
    assert_int_equal(0, h2_msg_response(&resp, &A, &req, &one));
    assert_int_equal(1, resp.interim);
    mem_arena_fini(&A);
}

static void
test_reply_and_limits(void **state)
{
    mem_arena_init(&A);
    nghttp2_nv *v;
    size_t n;
    assert_int_equal(0, h2_msg_reply_nv(&A, 302, "Location: https://x/\r\nConnection: close\r\n",
                                        0, &v, &n));
    assert_string_equal("302", nv(v, n, ":status"));
    assert_string_equal("https://x/", nv(v, n, "location"));
    assert_null(nv(v, n, "connection"));
    assert_string_equal("0", nv(v, n, "content-length"));
    struct h2_fields f = {0};
    int rc = 0;
    for (int i = 0; i < H2_MAX_FIELDS + 1 && rc == 0; i++)
        rc = h2_fields_add(&f, &A, (const uint8_t *)"x-a", 3, (const uint8_t *)"b", 1);
    assert_int_equal(-1, rc); /* a header flood stops at H2_MAX_FIELDS */
    assert_int_equal(H2_MAX_FIELDS, f.n);
    mem_arena_fini(&A);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_as_h1),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_response_round_trip),
        cmocka_unit_test(test_reply_and_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
