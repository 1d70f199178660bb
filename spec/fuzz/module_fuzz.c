/* libFuzzer target for the Surge module parser (core/mitm/module.c,
 * module_lines.c) and the rewrites it builds (core/mitm/rewrite.c): the
 * input is module text; when it parses, its rules run on a fixed request,
 * body and response. Whatever the rules, the upstream head must parse back
 * with its framing unchanged, a local answer's extra lines must be whole
 * header lines, and every [MITM] host name must be one mitm_hosts takes.
 * max_body is small so that an input's cost (at most 8 x max_body bytes
 * written plus matches per body) stays far inside -timeout: the rules'
 * logic is the same at any size. */

#include <string.h>

#include "fuzz.h"
#include "http/http.h"
#include "mitm/rewrite.h"

#define MAX_BODY 4096

static int
file(void *ud, const char *path, char **data, size_t *len)
{
    (void)ud;
    (void)path;
    *data = strdup("{\"file\":1}");
    *len = 10;
    return *data ? 0 : 12;
}

/* Whole "Name: value\r\n" lines, nothing else. */
static void
check_extra(const char *x)
{
    while (x != NULL && *x) {
        const char *crlf = strstr(x, "\r\n");
        CHECK(crlf != NULL);
        const char *colon = memchr(x, ':', (size_t)(crlf - x));
        CHECK(colon != NULL && colon > x);
        for (const char *p = x; p < crlf; p++)
            CHECK(*p != '\r' && *p != '\n');
        x = crlf + 2;
    }
}

static void
run(const struct mitm_hooks *hk, const char *url)
{
    static const char head[] = "POST /x/y?z=1 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: u/1\r\n"
                               "Content-Length: 11\r\nCookie: c=1\r\n\r\n";
    static const char rhead[] = "HTTP/1.1 200 OK\r\nDate: 2022\r\nContent-Length: 5\r\n\r\n";
    static const struct http_fwd_opts origin = {
        .form = HTTP_FWD_ORIGIN, .default_host = MEM_SLICE_LIT("a.test"), .default_port = 443};
    struct mem_arena a;
    struct http_request p;
    struct http_fwd_req req;
    mem_arena_init(&a);
    CHECK(http_h1_parse_request(head, sizeof(head) - 1, &p) == (int)sizeof(head) - 1);
    CHECK(http_fwd_request_init(&req, &a, &origin, head, sizeof(head) - 1, &p) == 0);
    struct mitm_request m = {.req = &req, .arena = &a, .scheme = "https", .host = req.host,
                             .port = 443, .url = mem_slice(url, strlen(url))};
    hk->wants_request(hk->ud, &m);
    if (hk->request_body(hk->ud, &m) > 0) {
        m.body = "hello world";
        m.body_len = 11;
        m.body_set = 1;
    }
    struct mitm_reply r;
    memset(&r, 0, sizeof(r));
    if (hk->on_request(hk->ud, &m, &r)) {
        CHECK(r.reject || (r.status >= 100 && r.status <= 599));
        check_extra(r.extra);
        CHECK(r.body.len == 0 || r.body.ptr != NULL);
        mem_arena_fini(&a);
        return;
    }
    CHECK(m.body_set == 0 || m.body != NULL || m.body_len == 0);
    struct mem_slice up;
    CHECK(http_fwd_request_head(&req, &up) == 0);
    struct http_request back;
    CHECK(http_h1_parse_request(up.ptr, up.len, &back) == (int)up.len);
    const struct http_header *cl = http_header_find(back.headers, back.num_headers,
                                                    "content-length");
    CHECK(cl != NULL && mem_slice_eq(cl->value, MEM_SLICE_LIT("11")));
    CHECK(http_header_find(back.headers, back.num_headers, "host") != NULL);

    if (hk->wants_response(hk->ud, &m)) {
        struct http_response rp;
        struct http_fwd_resp resp;
        CHECK(http_h1_parse_response(rhead, sizeof(rhead) - 1, &rp) == (int)sizeof(rhead) - 1);
        CHECK(http_fwd_response_init(&resp, &a, &req, rhead, sizeof(rhead) - 1, &rp, 1) == 0);
        const char *body = "a\nb\nc";
        size_t len = 5;
        hk->response_body(hk->ud, &m, &resp);
        hk->on_response(hk->ud, &m, &resp, &body, &len);
        CHECK(len <= 8 * MAX_BODY);
        struct mem_slice rh;
        CHECK(http_fwd_response_head(&resp, &rh) == 0);
        struct http_response rback;
        CHECK(http_h1_parse_response(rh.ptr, rh.len, &rback) == (int)rh.len);
    }
    mem_arena_fini(&a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[600];
    struct mitm_rewrites *rw = mitm_rewrites_new();
    if (rw == NULL)
        return 0;
    mitm_rewrites_set_max_body(rw, MAX_BODY);
    if (mitm_rewrites_load(rw, (const char *)data, size, "fuzz", file, NULL, NULL, err,
                           sizeof(err)) == 0) {
        const char *const *hosts;
        size_t n = mitm_rewrites_hostnames(rw, &hosts);
        struct mitm_hosts *h = mitm_hosts_new();
        for (size_t i = 0; h != NULL && i < n; i++)
            CHECK(mitm_hosts_add(h, hosts[i], strlen(hosts[i]), err, sizeof(err)) == 0);
        mitm_hosts_free(h);
        run(mitm_rewrites_hooks(rw), "https://a.test/x/y?z=1");
        run(mitm_rewrites_hooks(rw), "https://b.example.com/");
    } else {
        CHECK(strncmp(err, "fuzz:", 5) == 0);
    }
    mitm_rewrites_free(rw);
    return 0;
}
