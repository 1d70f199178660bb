/* Surge module rewrites: one module with every section parsed, then applied
 * to requests and responses built as the MITM builds them
 * (http_h1_parse_request + http_fwd_request_init in an arena): redirects
 * with $1, header-mode URL rewrites, Map Local, the reject family, Header
 * Rewrite both ways (header-replace-regex too), Body Rewrite; the [MITM]
 * host list; warnings listed once; errors naming file:line. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/http.h"
#include "mitm/rewrite.h"
#include "rules/re.h"

static struct mem_arena arena;
static struct http_fwd_req req;
static struct http_fwd_resp resp;
static struct mitm_request mr;
static char warnings[4096];
static int nwarnings;

static void
on_warn(void *ud, const char *msg)
{
    (void)ud;
    size_t n = strlen(warnings);
    snprintf(warnings + n, sizeof(warnings) - n, "%s\n", msg);
    nwarnings++;
}

/* The bundle: one file, data/ok.json. */
static int
read_file(void *ud, const char *path, char **data, size_t *len)
{
    (void)ud;
    if (strcmp(path, "data/ok.json") != 0)
        return ENOENT;
    *data = strdup("{\"ok\":true}");
    *len = strlen(*data);
    return 0;
}

static const char module[] =
    "#!name=Everything\n"
    "#!desc=Every section chute runs\n"
    "# a comment\n"
    "; another\n"
    "// and another\n"
    "\n"
    "[URL Rewrite]\n"
    "^https://old\\.example\\.com/(.*) https://new.example.com/$1 302\n"
    "^https://tmp\\.example\\.com/(\\w+) https://new.example.com/t/$1 307\n"
    "^https://api\\.example\\.com/v1/(.*) https://api.example.com/v2/$1 header\n"
    "^https://api\\.example\\.com/move/(.*) https://other.example.net:8443/$1\n"
    "^https://ads\\.example\\.com/ _ reject\n"
    "^https://ads\\.example\\.com/gif _ reject-img\n"
    "^https://ads2\\.example\\.com/ _ reject-img\n"
    "^https://ads3\\.example\\.com/ _ reject-dict\n"
    "^https://ads4\\.example\\.com/ _ reject-drop\n"
    "\n"
    "[Header Rewrite]\n"
    "^https://api\\.example\\.com/ header-add X-Old-Form yes\n"
    "http-request ^https://api\\.example\\.com/ header-del Cookie\n"
    "http-request ^https://api\\.example\\.com/ header-replace User-Agent Mozilla/5.0 (X11; chute)\n"
    "http-request ^https://api\\.example\\.com/ header-replace Missing never-added\n"
    "http-request ^https://api\\.example\\.com/ header-replace-regex Accept-Language "
    "en-(\\w+) fr-$1\n"
    "http-response ^https://api\\.example\\.com/ header-replace-regex Date 2022 2023\n"
    "http-response ^https://api\\.example\\.com/ header-add X-Rewritten \"by chute\"\n"
    "http-response ^https://api\\.example\\.com/ header-del Server\n"
    "\n"
    "[Map Local]\n"
    "^https://mock\\.example\\.com/json data-type=text data=\"{}\" status-code=500\n"
    "^https://mock\\.example\\.com/gif data-type=tiny-gif status-code=200\n"
    "^https://mock\\.example\\.com/file data-type=file data=\"data/ok.json\" "
    "header=\"a:b|foo:bar baz\"\n"
    "^https://mock\\.example\\.com/b64 data=\"dGVzdA==\" data-type=base64 speed=fast\n"
    "^https://mock\\.example\\.com/old data=\"data/ok.json\"\n"
    "\n"
    "[Body Rewrite]\n"
    "http-response ^https://api\\.example\\.com/ cat dog ^line (start) \"two words\" \"x y\"\n"
    "http-request ^https://api\\.example\\.com/post secret=(\\w+) secret=<$1>\n"
    "http-response-jq ^https://api\\.example\\.com/ '.a = 1'\n"
    "\n"
    "[Script]\n"
    "fix = type=http-response,pattern=^https://api\\.example\\.com/,script-path=fix.js\n"
    "\n"
    "[Rule]\n"
    "DOMAIN,ads.example.com,REJECT\n"
    "DOMAIN,ads2.example.com,REJECT\n"
    "\n"
    "[MITM]\n"
    "hostname = %APPEND% *.example.com, -pinned.example.com,api.example.net:8443\n"
    "h2 = true\n";

static struct mitm_rewrites *rw;
static const struct mitm_hooks *hk;

static void
load_module(void)
{
    char err[512];
    warnings[0] = '\0';
    nwarnings = 0;
    rw = mitm_rewrites_new();
    assert_non_null(rw);
    if (mitm_rewrites_load(rw, module, sizeof(module) - 1, "modules/all.sgmodule", read_file,
                           on_warn, NULL, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    hk = mitm_rewrites_hooks(rw);
}

static int
setup(void **state)
{
    (void)state;
    mem_arena_init(&arena);
    load_module();
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    mitm_rewrites_free(rw);
    mem_arena_fini(&arena);
    return 0;
}

/* A request for |url| (https, port 443) with the fields in |fields|. */
static void
request(const char *method, const char *url, const char *fields)
{
    static const struct http_fwd_opts origin = {
        .form = HTTP_FWD_ORIGIN, .default_host = MEM_SLICE_LIT("x.test"), .default_port = 443};
    const char *host = url + strlen("https://");
    const char *slash = strchr(host, '/');
    char head[2048];
    struct http_request p;
    int n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: %.*s\r\n%s\r\n", method, slash,
                     (int)(slash - host), host, fields);
    mem_arena_reset(&arena);
    assert_int_equal(http_h1_parse_request(head, (size_t)n, &p), n);
    assert_int_equal(http_fwd_request_init(&req, &arena, &origin, head, (size_t)n, &p), 0);
    assert_int_equal(req.refused, 0);
    memset(&mr, 0, sizeof(mr));
    mr.req = &req;
    mr.arena = &arena;
    mr.scheme = "https";
    mr.host = req.host;
    mr.port = 443;
    mr.url = mem_arena_slice(&arena, mem_slice(url, strlen(url)));
}

static const char *
field(const struct http_fwd_fields *f, const char *name)
{
    const struct http_header *h = http_fwd_field_get(f, name);
    return h ? mem_arena_strndup(&arena, h->value.ptr, h->value.len) : NULL;
}

static const char *
upstream_head(void)
{
    struct mem_slice out;
    assert_int_equal(http_fwd_request_head(&req, &out), 0);
    return mem_arena_strndup(&arena, out.ptr, out.len);
}

static struct mitm_reply
answer(int want)
{
    struct mitm_reply r;
    memset(&r, 0x5a, sizeof(r));
    assert_int_equal(hk->on_request(hk->ud, &mr, &r), want);
    return r;
}

static void
test_parse(void **state)
{
    (void)state;
    assert_int_equal(mitm_rewrites_count(rw), 9 + 8 + 5 + 2);
    /* Listed once each, with file:line. */
    assert_string_equal(
        warnings,
        "modules/all.sgmodule:32: [Map Local] option 'speed' is not supported: ignored\n"
        "modules/all.sgmodule:38: [Body Rewrite] http-response-jq (a jq expression) is not "
        "supported by chute: left out\n"
        "modules/all.sgmodule:41: [Script] 'fix' is JavaScript, which chute does not run: left "
        "out (write it as a chute.on_request/on_response hook)\n"
        "modules/all.sgmodule:43: section [Rule] is not supported by chute: 2 lines left out\n"
        "modules/all.sgmodule:49: [MITM] h2 is ignored: chute picks the protocol from the "
        "origin's ALPN\n");
    const char *const *hosts;
    assert_int_equal(mitm_rewrites_hostnames(rw, &hosts), 3);
    assert_string_equal(hosts[0], "*.example.com");
    assert_string_equal(hosts[1], "-pinned.example.com");
    assert_string_equal(hosts[2], "api.example.net:8443");
}

static void
test_redirects(void **state)
{
    (void)state;
    request("GET", "https://old.example.com/a/b?c=1", "");
    assert_true(hk->wants_request(hk->ud, &mr));
    struct mitm_reply r = answer(1);
    assert_int_equal(r.status, 302);
    assert_string_equal(r.extra, "Location: https://new.example.com/a/b?c=1\r\n");
    assert_int_equal(r.body.len, 0);
    assert_int_equal(r.reject, 0);

    request("POST", "https://tmp.example.com/abc/def", "");
    r = answer(1);
    assert_int_equal(r.status, 307);
    assert_string_equal(r.extra, "Location: https://new.example.com/t/abc\r\n");

    request("GET", "https://unrelated.example.org/", "");
    assert_false(hk->wants_request(hk->ud, &mr));
    assert_false(hk->wants_response(hk->ud, &mr));
    answer(0);
    struct mitm_rewrite_stats st;
    mitm_rewrites_stats(rw, &st);
    assert_int_equal(st.url_redirect, 2);
}

static void
test_url_header_mode(void **state)
{
    (void)state;
    request("GET", "https://api.example.com/v1/users?id=3", "Accept: */*\r\n");
    answer(0);
    assert_string_equal(upstream_head(), "GET /v2/users?id=3 HTTP/1.1\r\n"
                                         "Host: api.example.com\r\n"
                                         "Accept: */*\r\n"
                                         "X-Old-Form: yes\r\n"
                                         "\r\n");
    assert_string_equal(mr.scheme, "https");

    /* Another host: Host, req->host and req->port follow (the owner reroutes). */
    request("GET", "https://api.example.com/move/x?y", "");
    answer(0);
    assert_string_equal(upstream_head(), "GET /x?y HTTP/1.1\r\n"
                                         "Host: other.example.net:8443\r\n"
                                         "X-Old-Form: yes\r\n"
                                         "\r\n");
    assert_true(mem_slice_eq(req.host, MEM_SLICE_LIT("other.example.net")));
    assert_int_equal(req.port, 8443);
    assert_true(mem_slice_eq(mr.host, MEM_SLICE_LIT("api.example.com"))); /* as the flow names it */

    /* http://, a query without a path, a fragment: what goes upstream. */
    static const char m4[] = "[URL Rewrite]\n"
                             "^https://q\\.test/a(.*) http://q.test?x$1#frag header\n"
                             "^https://q\\.test/b(.*) \"https://q.test/a b\" header\n";
    char err[300];
    struct mitm_rewrites *r4 = mitm_rewrites_new();
    assert_int_equal(mitm_rewrites_load(r4, m4, sizeof(m4) - 1, "m4", NULL, NULL, NULL, err,
                                        sizeof(err)),
                     0);
    const struct mitm_hooks *h4 = mitm_rewrites_hooks(r4);
    struct mitm_reply r;
    request("GET", "https://q.test/a=1", "");
    assert_int_equal(h4->on_request(h4->ud, &mr, &r), 0);
    assert_string_equal(upstream_head(), "GET /?x=1 HTTP/1.1\r\nHost: q.test\r\n\r\n");
    assert_string_equal(mr.scheme, "http");
    assert_int_equal(req.port, 80); /* the owner connects to port 80, in clear */
    request("GET", "https://q.test/b", ""); /* a space cannot go in a request line */
    assert_int_equal(h4->on_request(h4->ud, &mr, &r), 0);
    assert_string_equal(upstream_head(), "GET /b HTTP/1.1\r\nHost: q.test\r\n\r\n");
    struct mitm_rewrite_stats st;
    mitm_rewrites_stats(r4, &st);
    assert_int_equal(st.url_header, 1);
    assert_int_equal(st.failures, 1);
    mitm_rewrites_free(r4);
}

static void
test_rejects(void **state)
{
    (void)state;
    request("GET", "https://ads.example.com/gif", "");
    struct mitm_reply r = answer(1); /* the first matching line decides: reject */
    assert_int_equal(r.status, 403);
    assert_int_equal(r.body.len, 0);
    assert_int_equal(r.reject, 0);

    request("GET", "https://ads2.example.com/pixel", "");
    r = answer(1);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.extra, "Content-Type: image/gif\r\n");
    assert_int_equal(r.body.len, 43);
    assert_memory_equal(r.body.ptr, "GIF89a", 6);

    request("GET", "https://ads3.example.com/", "");
    r = answer(1);
    assert_int_equal(r.status, 200);
    assert_true(mem_slice_eq(r.body, MEM_SLICE_LIT("{}")));

    request("GET", "https://ads4.example.com/", "");
    r = answer(1);
    assert_int_equal(r.reject, 1);
}

static void
test_map_local(void **state)
{
    (void)state;
    request("GET", "https://mock.example.com/json", "");
    struct mitm_reply r = answer(1);
    assert_int_equal(r.status, 500);
    assert_string_equal(r.extra, "Content-Type: text/plain; charset=utf-8\r\n");
    assert_true(mem_slice_eq(r.body, MEM_SLICE_LIT("{}")));

    request("GET", "https://mock.example.com/file?q", "");
    r = answer(1);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.extra, "Content-Type: application/json\r\na: b\r\nfoo: bar baz\r\n");
    assert_true(mem_slice_eq(r.body, MEM_SLICE_LIT("{\"ok\":true}")));

    request("GET", "https://mock.example.com/b64", "");
    r = answer(1);
    assert_string_equal(r.extra, "Content-Type: application/octet-stream\r\n");
    assert_true(mem_slice_eq(r.body, MEM_SLICE_LIT("test")));

    request("GET", "https://mock.example.com/gif", "");
    r = answer(1);
    assert_int_equal(r.body.len, 43);

    request("GET", "https://mock.example.com/old", ""); /* data= alone: a file */
    r = answer(1);
    assert_true(mem_slice_eq(r.body, MEM_SLICE_LIT("{\"ok\":true}")));
    struct mitm_rewrite_stats st;
    mitm_rewrites_stats(rw, &st);
    assert_int_equal(st.map_local, 5);
}

static void
test_request_headers(void **state)
{
    (void)state;
    request("GET", "https://api.example.com/page",
            "User-Agent: curl/8\r\nCookie: a=1\r\nAccept-Language: en-US, en-GB;q=0.5\r\n"
            "Cookie: b=2\r\n");
    answer(0);
    assert_string_equal(upstream_head(), "GET /page HTTP/1.1\r\n"
                                         "Host: api.example.com\r\n"
                                         "User-Agent: Mozilla/5.0 (X11; chute)\r\n"
                                         "Accept-Language: fr-US, fr-GB;q=0.5\r\n"
                                         "X-Old-Form: yes\r\n"
                                         "\r\n");
    assert_null(field(&req.fields, "Missing")); /* header-replace only replaces */
    struct mitm_rewrite_stats st;
    mitm_rewrites_stats(rw, &st);
    assert_int_equal(st.header_request, 4);
}

static void
test_request_body(void **state)
{
    (void)state;
    request("POST", "https://api.example.com/post", "Content-Length: 20\r\n");
    assert_int_equal(hk->request_body(hk->ud, &mr), MITM_REWRITE_MAX_BODY);
    mr.body = "user=a&secret=hunter";
    mr.body_len = strlen(mr.body);
    mr.body_set = 1;
    answer(0);
    assert_int_equal(mr.body_len, strlen("user=a&secret=<hunter>"));
    assert_memory_equal(mr.body, "user=a&secret=<hunter>", mr.body_len);

    request("GET", "https://api.example.com/get", "");
    assert_int_equal(hk->request_body(hk->ud, &mr), 0);
    mitm_rewrites_set_max_body(rw, 1000);
    request("POST", "https://api.example.com/post", "");
    assert_int_equal(hk->request_body(hk->ud, &mr), 1000);
}

static void
response(const char *head)
{
    struct http_response p;
    size_t n = strlen(head);
    char *copy = mem_arena_strdup(&arena, head);
    assert_int_equal(http_h1_parse_response(copy, n, &p), (int)n);
    assert_int_equal(http_fwd_response_init(&resp, &arena, &req, copy, n, &p, 1), 0);
}

static void
test_response(void **state)
{
    (void)state;
    request("GET", "https://api.example.com/page", "");
    answer(0);
    assert_true(hk->wants_response(hk->ud, &mr));
    response("HTTP/1.1 200 OK\r\nDate: Mon, 2 Jan 2022 10:00:00 GMT\r\nServer: nginx\r\n"
             "Content-Length: 40\r\n\r\n");
    assert_int_equal(hk->response_body(hk->ud, &mr, &resp), MITM_REWRITE_MAX_BODY);
    const char *in = "a cat\nline one\nthe cat line\ntwo words";
    const char *body = in;
    size_t len = strlen(in);
    hk->on_response(hk->ud, &mr, &resp, &body, &len);
    struct mem_slice head;
    assert_int_equal(http_fwd_response_head(&resp, &head), 0);
    assert_string_equal(mem_arena_strndup(&arena, head.ptr, head.len),
                        "HTTP/1.1 200 OK\r\n"
                        "Date: Mon, 2 Jan 2023 10:00:00 GMT\r\n"
                        "Content-Length: 40\r\n"
                        "X-Rewritten: by chute\r\n"
                        "\r\n");
    /* Every match, in order of the pairs; ^ at each line of the body. */
    const char *want = "a dog\n(start) one\nthe dog line\nx y";
    assert_int_equal(len, strlen(want));
    assert_memory_equal(body, want, len);
    assert_ptr_not_equal(body, in);

    /* Headers only: no body asked, none given. */
    hk->on_response(hk->ud, &mr, &resp, NULL, NULL);
    struct mitm_rewrite_stats st;
    mitm_rewrites_stats(rw, &st);
    assert_int_equal(st.body_response, 1);
    assert_int_equal(st.header_response, 3 + 1); /* the second time: the add only */
}

/* One Body Rewrite |line| with max_body 16 (a budget of 128) on the
 * response body |*body|; its stats in |st|. */
static void
on_budget(const char *line, const char **body, size_t *len, struct mitm_rewrite_stats *st)
{
    char text[300], err[300];
    int n = snprintf(text, sizeof(text), "[Body Rewrite]\n%s\n", line);
    assert_true(n > 0 && (size_t)n < sizeof(text)); /* a cut line would test another module */
    struct mitm_rewrites *r = mitm_rewrites_new();
    assert_int_equal(mitm_rewrites_load(r, text, (size_t)n, "budget", NULL, NULL, NULL, err,
                                        sizeof(err)),
                     0);
    mitm_rewrites_set_max_body(r, 16);
    const struct mitm_hooks *h = mitm_rewrites_hooks(r);
    h->on_response(h->ud, &mr, &resp, body, len);
    mitm_rewrites_stats(r, st);
    mitm_rewrites_free(r);
}

/* Empty matches advance: "^$"-style patterns make new content, and
 * patterns that match nothing leave the body's pointer alone. */
static void
test_body_edges(void **state)
{
    (void)state;
    static const char m2[] = "[Body Rewrite]\n"
                             "http-response ^https://e\\.test/empty ^$ {\"made\":1}\n"
                             "http-response ^https://e\\.test/every x? -\n"
                             "http-response ^https://e\\.test/none zzz yyy\n";
    char err[300];
    struct mitm_rewrites *r2 = mitm_rewrites_new();
    assert_int_equal(mitm_rewrites_load(r2, m2, sizeof(m2) - 1, "m2", NULL, NULL, NULL, err,
                                        sizeof(err)),
                     0);
    const struct mitm_hooks *h2 = mitm_rewrites_hooks(r2);
    request("GET", "https://e.test/empty", "");
    const char *body = "";
    size_t len = 0;
    h2->on_response(h2->ud, &mr, &resp, &body, &len);
    assert_int_equal(len, 10);
    assert_memory_equal(body, "{\"made\":1}", 10);

    request("GET", "https://e.test/every", "");
    body = "axb\xc3\xa9";
    len = strlen(body);
    h2->on_response(h2->ud, &mr, &resp, &body, &len);
    assert_int_equal(len, strlen("-a--b-\xc3\xa9-"));
    assert_memory_equal(body, "-a--b-\xc3\xa9-", len);

    request("GET", "https://e.test/none", "");
    const char *in = "abc";
    body = in;
    len = 3;
    h2->on_response(h2->ud, &mr, &resp, &body, &len);
    assert_ptr_equal(body, in);
    mitm_rewrites_free(r2);

    /* Pairs that double the body: together they may spend 8 x max_body. */
    struct mitm_rewrite_stats st;
    body = "0123456789";
    len = 10;
    on_budget("http-response . (?s).+ $0$0 (?s).+ $0$0 (?s).+ $0$0 (?s).+ $0$0", &body, &len,
              &st);
    assert_int_equal(len, 40); /* 20 + 1 and 40 + 1 spent; 80 + 1 more is over 128 */
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.body_response, 1);

    /* Matches cost too: eight passes that each copy 10 bytes by 10 matches
     * would write 80 bytes, but spend 160; the seventh is over 128. */
    body = "0123456789";
    len = 10;
    on_budget("http-response . (?s). $0 (?s). $0 (?s). $0 (?s). $0 (?s). $0 (?s). $0 (?s). $0 "
              "(?s). $0",
              &body, &len, &st);
    assert_int_equal(len, 10);
    assert_memory_equal(body, "0123456789", 10);
    assert_int_equal(st.failures, 1);
}

/* Loads one module: 0 or -1 with the message in |err|. */
static int
load(const char *text, char *err, size_t errlen)
{
    struct mitm_rewrites *r = mitm_rewrites_new();
    int rc = mitm_rewrites_load(r, text, strlen(text), "bad.sgmodule", read_file, on_warn, NULL,
                                err, errlen);
    mitm_rewrites_free(r);
    return rc;
}

static void
bad(const char *text, const char *want)
{
    char err[600] = "";
    assert_int_equal(load(text, err, sizeof(err)), -1);
    if (strcmp(err, want) != 0)
        fail_msg("got  '%s'\nwant '%s'", err, want);
}

static void
test_errors(void **state)
{
    (void)state;
    bad("[URL Rewrite]\n# fine\n^a\n",
        "bad.sgmodule:3: [URL Rewrite] '^a': a replacement is missing (syntax: REGEX "
        "REPLACEMENT [header|302|307|reject|reject-200|reject-img|reject-dict|reject-array|"
        "reject-drop])");
    bad("[URL Rewrite]\n^a b 301\n",
        "bad.sgmodule:2: [URL Rewrite] '^a b 301': unknown type '301' (syntax: REGEX "
        "REPLACEMENT [header|302|307|reject|reject-200|reject-img|reject-dict|reject-array|"
        "reject-drop])");
    bad("[URL Rewrite]\n^(a b 302\n",
        "bad.sgmodule:2: [URL Rewrite] '^(a b 302': regex '^(a': missing closing parenthesis "
        "at offset 3");
    bad("\n[Header Rewrite]\nhttp-request ^a header-set X 1\n",
        "bad.sgmodule:3: [Header Rewrite] 'http-request ^a header-set X 1': unknown action "
        "'header-set' (syntax: [http-request|http-response] REGEX header-add NAME VALUE | "
        "header-del NAME | header-replace NAME VALUE | header-replace-regex NAME REGEX "
        "REPLACEMENT)");
    bad("[Header Rewrite]\n^a header-add Bad:Name 1\n",
        "bad.sgmodule:2: [Header Rewrite] '^a header-add Bad:Name 1': 'Bad:Name' is not a header "
        "name");
    bad("[Map Local]\n^a data=\"x.json\n",
        "bad.sgmodule:2: [Map Local] '^a data=\"x.json': a quote is not closed (quote values "
        "with spaces: data=\"a b\")");
    bad("[Map Local]\n^a data=\"missing.json\"\n",
        "bad.sgmodule:2: [Map Local] '^a data=\"missing.json\"': data=\"missing.json\": No such "
        "file or directory (a path inside the bundle)");
    bad("[Map Local]\n^a data-type=text data=x status-code=99\n",
        "bad.sgmodule:2: [Map Local] '^a data-type=text data=x status-code=99': status-code '99' "
        "is not 100..599");
    bad("[Map Local]\n^a data-type=base64 data=@@@\n",
        "bad.sgmodule:2: [Map Local] '^a data-type=base64 data=@@@': data is not base64");
    bad("[Body Rewrite]\nhttp-response ^a x\n",
        "bad.sgmodule:2: [Body Rewrite] 'http-response ^a x': regex 'x' has no replacement "
        "(syntax: http-request|http-response REGEX RE1 REPLACEMENT1 [RE2 REPLACEMENT2 ...])");
    bad("[Body Rewrite]\n^a x y\n",
        "bad.sgmodule:2: [Body Rewrite] '^a x y': '^a' is neither http-request nor "
        "http-response (syntax: http-request|http-response REGEX RE1 REPLACEMENT1 [RE2 "
        "REPLACEMENT2 ...])");
    bad("[MITM]\nhostname = %APPEND% a.test, b test\n",
        "bad.sgmodule:2: [MITM] 'hostname = %APPEND% a.test, b test': host pattern 'b test' "
        "has a space, comma or control byte (one host per entry: \"*.example.com\", "
        "\"-a.example.com\", \"b.example:8443\")");
    bad("[MITM]\nhostname\n",
        "bad.sgmodule:2: [MITM] 'hostname': expected 'key = value' (hostname = %APPEND% "
        "*.example.com, -pinned.example.com)");
    bad("^a b 302\n",
        "bad.sgmodule:1: [no section] '^a b 302': a line before any section (start with "
        "[URL Rewrite], [Header Rewrite], [Map Local], [Body Rewrite] or [MITM])");
    bad("[URL Rewrite\n",
        "bad.sgmodule:1: [no section] '[URL Rewrite': a section header ends with ']' "
        "([URL Rewrite], [MITM], ...)");
}

/* Surge's module arguments are not filled in: said once per module. */
static void
test_arguments_warned(void **state)
{
    (void)state;
    static const char m6[] = "#!arguments=host:a.test\n[URL Rewrite]\n"
                             "^https://{{{host}}}/ https://b.test/ 302\n"
                             "^https://{{{host}}}/x https://b.test/ 302\n";
    char err[300];
    struct mitm_rewrites *r6 = mitm_rewrites_new();
    warnings[0] = '\0';
    assert_int_equal(mitm_rewrites_load(r6, m6, sizeof(m6) - 1, "m6", NULL, on_warn, NULL, err,
                                        sizeof(err)),
                     0);
    assert_string_equal(warnings, "m6:3: module arguments ({{{name}}}) are not filled in by "
                                  "chute: the lines keep them as written\n");
    mitm_rewrites_free(r6);
}

/* A failed load adds nothing; loads add up; hostname lines append,
 * insert, or replace the list. */
static void
test_loads_add_up(void **state)
{
    (void)state;
    char err[300];
    size_t before = mitm_rewrites_count(rw);
    static const char broken[] = "[URL Rewrite]\n^x y 302\n^z\n[MITM]\nhostname = q.test\n";
    assert_int_equal(mitm_rewrites_load(rw, broken, sizeof(broken) - 1, "b", NULL, NULL, NULL,
                                        err, sizeof(err)),
                     -1);
    assert_int_equal(mitm_rewrites_count(rw), before);
    const char *const *hosts;
    assert_int_equal(mitm_rewrites_hostnames(rw, &hosts), 3);

    static const char more[] = "[URL Rewrite]\n^https://late\\.test/ https://x.test/ 302\n"
                               "[MITM]\nhostname = %INSERT% -first.example.com\n";
    assert_int_equal(mitm_rewrites_load(rw, more, sizeof(more) - 1, "more", NULL, NULL, NULL, err,
                                        sizeof(err)),
                     0);
    assert_int_equal(mitm_rewrites_count(rw), before + 1);
    assert_int_equal(mitm_rewrites_hostnames(rw, &hosts), 4);
    assert_string_equal(hosts[0], "-first.example.com");
    assert_string_equal(hosts[1], "*.example.com");
    request("GET", "https://late.test/", "");
    assert_int_equal(answer(1).status, 302);

    static const char set[] = "[MITM]\nhostname = only.test\n";
    assert_int_equal(mitm_rewrites_load(rw, set, sizeof(set) - 1, "set", NULL, NULL, NULL, err,
                                        sizeof(err)),
                     0);
    assert_int_equal(mitm_rewrites_hostnames(rw, &hosts), 1);
    assert_string_equal(hosts[0], "only.test");
}

/* Edits http_fwd_field_* refuses are counted and the request goes on. */
static void
test_refused_edits(void **state)
{
    (void)state;
    static const char m3[] = "[Header Rewrite]\n"
                             "^https://f\\.test/ header-del Host\n"
                             "^https://f\\.test/ header-add X-Ok 1\n"
                             "[URL Rewrite]\n"
                             "^https://f\\.test/(.*) $1 header\n";
    char err[300];
    struct mitm_rewrites *r3 = mitm_rewrites_new();
    assert_int_equal(mitm_rewrites_load(r3, m3, sizeof(m3) - 1, "m3", NULL, NULL, NULL, err,
                                        sizeof(err)),
                     0);
    const struct mitm_hooks *h3 = mitm_rewrites_hooks(r3);
    request("GET", "https://f.test/p", "");
    struct mitm_reply r;
    assert_int_equal(h3->on_request(h3->ud, &mr, &r), 0);
    assert_string_equal(upstream_head(), "GET /p HTTP/1.1\r\nHost: f.test\r\nX-Ok: 1\r\n\r\n");
    struct mitm_rewrite_stats st;
    mitm_rewrites_stats(r3, &st);
    assert_int_equal(st.failures, 2); /* the URL "p" and the Host removal */
    assert_int_equal(st.header_request, 1);
    mitm_rewrites_free(r3);
}

/* The URL prefilter never changes an answer: every pattern against every
 * URL, as a one-line module, agrees with the regex run alone. */
static void
test_prefilter_agrees(void **state)
{
    (void)state;
    static const char *const pats[] = {
        "^https?://a\\.test/x?",     "^https://b\\.test/a+b",  "^https://c\\.test|^https://d\\.test",
        "^http://e\\.test",          "^https?:\\/\\/f\\.test/", "^http(s)?://g\\.test:8443/",
        "^https://h\\.tes{0}t",      "^https://(www\\.)?i\\.test", "^https://j\\.test/a*",
        "^https://k\\.test/(?i)ABC", "^HTTPS://l\\.test",      "https://m\\.test",
        "^https://n-o_p\\.test/q:r", "^https://s\\.test\\d",   "^https?://",
        "^https://t\\.test/(a|b)",  "^https://u\\.test/[|]|^https://v", "^https://w\\Q|\\E|^https://y",
        "^https://z\\.test(?x)|^https://m", "^https://q\\.test(?#)|^https://m",
    };
    static const char *const urls[] = {
        "https://a.test/",     "https://a.test/x",     "http://a.test/y",     "https://b.test/ab",
        "https://b.test/aaab", "https://b.test/b",     "https://d.test/",     "https://c.test",
        "http://e.test/",      "https://e.test/",      "https://f.test/",     "http://f.test/z",
        "https://g.test:8443/", "http://g.test/",      "https://h.tet",       "https://h.test",
        "https://www.i.test",  "https://i.test",       "https://j.test/",     "https://k.test/abc",
        "https://l.test",      "https://x/https://m.test", "https://n-o_p.test/q:r", "https://s.test1",
        "https://s.test",      "ftp://x",              "",                    "https://t.test/b",
        "https://u.test/|",    "https://v",            "https://w|",          "https://y",
        "https://z.test",      "https://m",            "https://q.test",
    };
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
        char text[300], err[300];
        snprintf(text, sizeof(text), "[Header Rewrite]\n%s header-add X 1\n", pats[i]);
        struct mitm_rewrites *r = mitm_rewrites_new();
        assert_int_equal(mitm_rewrites_load(r, text, strlen(text), "p", NULL, NULL, NULL, err,
                                            sizeof(err)),
                         0);
        struct rules_re *re = rules_re_new(pats[i], strlen(pats[i]), 0, err, sizeof(err));
        assert_non_null(re);
        const struct mitm_hooks *h = mitm_rewrites_hooks(r);
        for (size_t k = 0; k < sizeof(urls) / sizeof(urls[0]); k++) {
            struct mitm_request q = {.url = mem_slice(urls[k], strlen(urls[k]))};
            int want = rules_re_match(re, urls[k], strlen(urls[k]), NULL, 0) > 0;
            if (h->wants_request(h->ud, &q) != want)
                fail_msg("'%s' on '%s': want %d", pats[i], urls[k], want);
        }
        rules_re_free(re);
        mitm_rewrites_free(r);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redirects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_url_header_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_map_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_edges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loads_add_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_edits, setup, teardown),
        cmocka_unit_test(test_prefilter_agrees),
        cmocka_unit_test(test_arguments_warned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
