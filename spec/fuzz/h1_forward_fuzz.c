/* libFuzzer target for core/http/h1_forward.c. The first byte picks the
 * options (proxy or origin form, copying the response, which edits to
 * make); the rest is a request head, then a response head, then bytes
 * for field edits and bodies. Whatever the input and the edits, the heads
 * the rules write must parse back to exactly what they hold: the request
 * line in origin form, no hop-by-hop field, the framing unchanged, no
 * field a hook smuggled in through a value. Invariants are checked with
 * abort() so they hold in every build. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/h1_forward.h"

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
same(struct mem_slice a, struct mem_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static int
hop_by_hop(struct mem_slice n)
{
    static const char *const names[] = {"connection", "proxy-connection", "keep-alive",
                                        "proxy-authorization", "te", "upgrade"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (mem_slice_ieq(n, names[i]))
            return 1;
    return 0;
}

static void
same_framing(const struct http_body *a, const struct http_body *b)
{
    CHECK(a->kind == b->kind && a->remaining == b->remaining && a->done == b->done);
}

/* The parsed fields are exactly |f|, in order. */
static void
same_fields(const struct http_header *h, size_t n, const struct http_fwd_fields *f)
{
    CHECK(n == f->n);
    for (size_t i = 0; i < n; i++)
        CHECK(same(h[i].name, f->v[i].name) && same(h[i].value, f->v[i].value));
}

/* Edits from the input: each valid one must be taken, each invalid one
 * refused; the head written afterwards is checked by the caller. */
static void
edit(struct http_fwd_fields *f, unsigned ops, const uint8_t *p, size_t len)
{
    size_t nl = len < 6 ? len : 6, vl = len - nl < 24 ? len - nl : 24;
    struct mem_slice name = mem_slice(p, nl), value = mem_slice(p + nl, vl);
    size_t before = f->n;
    int r;

    if (ops & 1) {
        r = http_fwd_field_add(f, name, value);
        CHECK(r == 0 ? f->n == before + 1 : f->n == before);
    }
    if (ops & 2) {
        r = http_fwd_field_set(f, MEM_SLICE_LIT("X-Fuzz"), value);
        CHECK(r == 0 ? http_fwd_field_get(f, "x-fuzz") != NULL : r == -1);
    }
    if (ops & 4) {
        r = http_fwd_field_del(f, name);
        CHECK(r >= -1);
        for (size_t i = 0; r >= 0 && i < f->n; i++)
            CHECK(f->v[i].name.len != name.len ||
                  strncasecmp(f->v[i].name.ptr, name.ptr, name.len) != 0);
    }
    for (size_t i = 0; i < f->n; i++)
        CHECK(f->v[i].name.len > 0);
}

static void
check_request(const struct http_fwd_req *req, const struct http_request *orig,
              const struct http_fwd_opts *o)
{
    struct http_request up;
    struct http_body b;
    struct mem_slice out;
    int r;

    CHECK(req->num_in == orig->num_headers);
    CHECK(same(req->method, orig->method) && same(req->target, orig->target));
    if (req->refused) {
        CHECK(req->refused == 400 && !req->connect);
        CHECK(http_fwd_request_head(req, &out) == -1);
        return;
    }
    CHECK(req->host.len > 0);
    if (req->connect) {
        CHECK(o->form == HTTP_FWD_PROXY && req->port != 0 && req->body.done);
        return;
    }
    if (http_fwd_request_head(req, &out) != 0)
        return; /* out of memory */
    r = http_h1_parse_request(out.ptr, out.len, &up);
    /* Host or a hook's field may take a head past what our own parser
     * takes (it is the origin's to judge): only the rest is checked. */
    if (out.len > HTTP_MAX_HEAD || req->fields.n > HTTP_MAX_HEADERS) {
        CHECK(r == HTTP_ERR_TOO_LARGE);
        return;
    }
    CHECK(r == (int)out.len);
    CHECK(up.minor_version == 1);
    CHECK(same(up.method, req->method) && same(up.target, req->path));
    CHECK(o->form == HTTP_FWD_ORIGIN || up.target.ptr[0] == '/');
    same_fields(up.headers, up.num_headers, &req->fields);
    CHECK(http_header_find(up.headers, up.num_headers, "host") != NULL);
    for (size_t i = 0; i < up.num_headers; i++)
        CHECK(http_fwd_fields_edited(&req->fields) || !hop_by_hop(up.headers[i].name));
    /* The framing upstream is the framing the body arrives with. */
    CHECK(http_body_init_request(&b, &up) == 0);
    same_framing(&b, &req->body);
}

static void
check_response(const struct http_fwd_resp *resp, const struct http_fwd_req *req,
               const uint8_t *raw, size_t raw_len, int copied)
{
    struct http_response back;
    struct http_body b;
    struct mem_slice out;
    int r;

    if (http_fwd_response_head(resp, &out) != 0)
        return;
    if (!http_fwd_fields_edited(&resp->fields)) {
        CHECK(out.len == raw_len && memcmp(out.ptr, raw, raw_len) == 0);
        CHECK(copied || out.ptr == (const char *)raw);
        return;
    }
    r = http_h1_parse_response(out.ptr, out.len, &back);
    if (out.len > HTTP_MAX_HEAD || resp->fields.n > HTTP_MAX_HEADERS) {
        CHECK(r == HTTP_ERR_TOO_LARGE);
        return;
    }
    CHECK(r == (int)out.len);
    CHECK(back.status == resp->status && back.minor_version == resp->minor_version);
    CHECK(same(back.reason, resp->reason));
    same_fields(back.headers, back.num_headers, &resp->fields);
    CHECK(http_body_init_response(&b, &back, req->method) == 0);
    same_framing(&b, &resp->body);
}

/* A local answer parses as one whole response whose body is what follows. */
static void
check_reply(struct mem_arena *a, const struct http_fwd_req *req, int status, int close)
{
    struct http_response res;
    struct http_body b;
    struct mem_slice out;
    int r;

    if (http_fwd_reply(a, req, status, "Fuzz Reason", NULL, close, &out) != 0)
        return;
    r = http_h1_parse_response(out.ptr, out.len, &res);
    CHECK(r > 0 && res.status == status);
    CHECK(http_connection_has(res.headers, res.num_headers, "close") == close);
    CHECK(http_body_init_response(&b, &res, req ? req->method : MEM_SLICE_LIT("GET")) == 0);
    CHECK(b.kind == HTTP_BODY_NONE || b.kind == HTTP_BODY_LENGTH);
    CHECK(b.kind == HTTP_BODY_NONE ? (size_t)r == out.len : b.remaining == out.len - (size_t)r);
}

static void
run(struct mem_arena *a, unsigned flags, const uint8_t *data, size_t size)
{
    static const struct http_fwd_opts forms[] = {
        {.form = HTTP_FWD_PROXY},
        {.form = HTTP_FWD_ORIGIN, .default_host = MEM_SLICE_LIT("d.test"), .default_port = 443},
    };
    const struct http_fwd_opts *o = &forms[flags & 1];
    struct http_request parsed;
    struct http_response pres;
    struct http_fwd_req req;
    struct http_fwd_resp resp;
    int n, m, copy = (flags >> 1) & 1;

    check_reply(a, NULL, 100 + (int)(size % 900), (flags >> 2) & 1);
    n = http_h1_parse_request((const char *)data, size, &parsed);
    if (n <= 0)
        return;
    if (http_fwd_request_init(&req, a, o, (const char *)data, (size_t)n, &parsed) != 0)
        return;
    check_request(&req, &parsed, o);
    check_reply(a, &req, 100 + (int)(size % 900), (flags >> 2) & 1);
    if (req.refused || req.connect)
        return;
    edit(&req.fields, flags >> 3, data + n, size - (size_t)n);
    check_request(&req, &parsed, o);

    m = http_h1_parse_response((const char *)data + n, size - (size_t)n, &pres);
    if (m <= 0)
        return;
    if (http_fwd_response_init(&resp, a, &req, (const char *)data + n, (size_t)m, &pres, copy) != 0)
        return;
    CHECK(resp.interim == (pres.status < 200));
    CHECK(!resp.close || !resp.interim);
    if (copy)
        edit(&resp.fields, flags >> 5, data + n + m, size - (size_t)n - (size_t)m);
    check_response(&resp, &req, data + n, (size_t)m, copy);
    if (!resp.interim) {
        enum http_fwd_next next = http_fwd_after(&req, &resp, flags & 0x80);

        CHECK(next == HTTP_FWD_CLOSE || (!req.close && !resp.close && req.body.done));
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mem_arena a;

    if (size < 1)
        return 0;
    mem_arena_init(&a);
    run(&a, data[0], data + 1, size - 1);
    /* Once more in the same arena after a reset: the arena is reused. */
    mem_arena_reset(&a);
    run(&a, data[0] ^ 1, data + 1, size - 1);
    mem_arena_fini(&a);
    return 0;
}
