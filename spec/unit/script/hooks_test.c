/* core/script's MITM hooks through the mitm_hooks set script_mitm_hooks
 * gives: bundles loaded from strings, requests parsed by core/http into an
 * arena as the MITM does, and what goes upstream read back as bytes
 * (http_fwd_request_head / http_fwd_response_head). Also route()'s
 * { mitm = ... } option and the mitm = {...} config. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/h1_forward.h"
#include "http/http.h"
#include "mitm/mitm.h"
#include "script/script.h"
#include "script/script_int.h"

#define PRELUDE "local chute = require 'chute'\n"

static struct script *
load_ok(const char *src)
{
    char err[1024] = "";
    struct script *s = script_load(NULL, src, err, sizeof(err));
    if (s == NULL)
        print_error("script_load: %s\n", err);
    assert_non_null(s);
    return s;
}

static void
load_fails(const char *src, const char *want)
{
    char err[1024] = "";
    struct script *s = script_load(NULL, src, err, sizeof(err));
    assert_null(s);
    assert_string_equal(err, want);
}

/* One request as the MITM holds it. */
struct msg {
    struct mem_arena a;
    struct http_request parsed;
    struct http_fwd_req req;
    struct mitm_request m;
    struct http_response rparsed;
    struct http_fwd_resp resp;
    struct mitm_reply reply;
    char url[512];
};

static void
msg_init(struct msg *x, const char *head, const char *body)
{
    memset(x, 0, sizeof(*x));
    mem_arena_init(&x->a);
    int n = http_h1_parse_request(head, strlen(head), &x->parsed);
    assert_true(n > 0);
    struct http_fwd_opts o = {.form = HTTP_FWD_ORIGIN, .default_host = MEM_SLICE_LIT("example.com"), .default_port = 443};
    assert_int_equal(http_fwd_request_init(&x->req, &x->a, &o, head, (size_t)n, &x->parsed), 0);
    assert_int_equal(x->req.refused, 0);
    snprintf(x->url, sizeof(x->url), "https://example.com%.*s", (int)x->req.path.len,
             x->req.path.ptr);
    x->m.req = &x->req;
    x->m.arena = &x->a;
    x->m.scheme = "https";
    x->m.host = MEM_SLICE_LIT("example.com");
    x->m.port = 443;
    x->m.url = mem_slice(x->url, strlen(x->url));
    if (body != NULL) {
        x->m.body = body;
        x->m.body_len = strlen(body);
        x->m.body_set = 1;
    }
}

static void
msg_fini(struct msg *x)
{
    mem_arena_fini(&x->a);
}

/* The upstream request head as a C string (in the arena). */
static const char *
upstream(struct msg *x)
{
    struct mem_slice out;
    assert_int_equal(http_fwd_request_head(&x->req, &out), 0);
    return mem_arena_strndup(&x->a, out.ptr, out.len);
}

/* Runs the request hooks, checking the state is left clean; returns what
 * on_request returned. */
static int
run_request(struct script *s, struct msg *x)
{
    const struct mitm_hooks *h = script_mitm_hooks(s);
    assert_non_null(h);
    int rc = 0;
    if (h->wants_request(h->ud, &x->m))
        rc = h->on_request(h->ud, &x->m, &x->reply);
    assert_int_equal(lua_gettop(s->L), 0);
    assert_int_equal(s->tripped, 0);
    assert_null(s->msg);
    return rc;
}

/* Runs it with stderr in a file; the first log line without its timestamp. */
static int
run_logged(struct script *s, struct msg *x, char *line, size_t len)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    assert_non_null(tmp);
    fflush(stderr);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    int rc = run_request(s, x);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    line[0] = '\0';
    if (fgets(line, (int)len, tmp) != NULL && strlen(line) > 24)
        memmove(line, line + 24, strlen(line + 24) + 1);
    line[strcspn(line, "\n")] = '\0';
    fclose(tmp);
    return rc;
}

static void
expect_stats(struct script *s, uint64_t calls, uint64_t errors, uint64_t cuts)
{
    struct script_stats st;
    script_stats(s, &st);
    assert_int_equal(st.hook_calls, calls);
    assert_int_equal(st.hook_errors, errors);
    assert_int_equal(st.hook_budget_cuts, cuts);
}

static const char GET[] = "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                          "X-Multi: one\r\nx-multi: two\r\nCookie: c=1\r\n\r\n";
static const char GET_UP[] = "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                             "X-Multi: one\r\nx-multi: two\r\nCookie: c=1\r\n\r\n";

static void
test_no_hooks_no_set(void **state)
{
    struct script *s = load_ok(PRELUDE);
    assert_null(script_mitm_hooks(s));
    script_free(s);
}

static void
test_header_edits(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.on_request([[^https://example\\.com/a/]], function(req)\n"
                                       "  req.headers['X-Added'] = 'yes'\n"
                                       "  req.headers.accept = 'text/html'\n"
                                       "  req.headers['cookie'] = nil\n"
                                       "  req.headers['X-Multi'] = { 'three', 'four' }\n"
                                       "  req.headers:add('X-Added', 'again')\n"
                                       "end)\n");
    struct msg x;
    msg_init(&x, GET, NULL);
    assert_int_equal(run_request(s, &x), 0);
    assert_string_equal(upstream(&x),
                        "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nAccept: text/html\r\n"
                        "X-Multi: three\r\nX-Added: yes\r\nX-Multi: four\r\nX-Added: again\r\n\r\n");
    expect_stats(s, 1, 0, 0);
    msg_fini(&x);
    script_free(s);
}

/* What a hook reads: the fields, case-insensitive, ordered, repeats kept. */
static void
test_reads(void **state)
{
    struct script *s = load_ok(
        PRELUDE "chute.on_request('', function(req)\n"
                "  local h = req.headers\n"
                "  local seen = {}\n"
                "  for k, v in pairs(h) do seen[#seen + 1] = k .. '=' .. v end\n"
                "  local each = {}\n"
                "  for k, v in h:each() do each[#each + 1] = k end\n"
                "  local all = h:all('X-MULTI')\n"
                "  req.headers['X-Report'] = table.concat({ req.method, req.scheme, req.host,\n"
                "    tostring(req.port), req.path, req.query, req.url, tostring(req.body),\n"
                "    h['x-multi'], h:get('ACCEPT'), #all, all[2], #h, table.concat(seen, ','),\n"
                "    table.concat(each, ',') }, '|')\n"
                "end)\n");
    struct msg x;
    msg_init(&x, GET, NULL);
    assert_int_equal(run_request(s, &x), 0);
    const struct http_header *r = http_fwd_field_get(&x.req.fields, "x-report");
    assert_non_null(r);
    assert_memory_equal(r->value.ptr,
                        "GET|https|example.com|443|/a/b|x=1&y=2|https://example.com/a/b?x=1&y=2|"
                        "nil|one|*/*|2|two|5|Host=example.com,Accept=*/*,X-Multi=one,"
                        "x-multi=two,Cookie=c=1|Host,Accept,X-Multi,x-multi,Cookie",
                        r->value.len);
    msg_fini(&x);
    script_free(s);
}

static void
test_path_query_method(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.on_request('/old', function(req)\n"
                                       "  req.path = '/new' .. req.path\n"
                                       "  req.query = 'q=' .. (req.query or '')\n"
                                       "  req.method = 'POST'\n"
                                       "end)\n"
                                       "chute.on_request('/drop', function(req)\n"
                                       "  req.query = nil\n"
                                       "end)\n");
    struct msg x;
    msg_init(&x, "GET /old?a=1 HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_request(s, &x);
    assert_string_equal(upstream(&x), "POST /new/old?q=a=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    msg_fini(&x);
    msg_init(&x, "GET /drop?a=1 HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_request(s, &x);
    assert_string_equal(upstream(&x), "GET /drop HTTP/1.1\r\nHost: example.com\r\n\r\n");
    msg_fini(&x);
    script_free(s);
}

static void
test_replies(void **state)
{
    struct script *s = load_ok(
        PRELUDE "chute.on_request('/respond', function(req)\n"
                "  return chute.respond(200, { ['X-B'] = '2', ['x-a'] = { '1', '1b' },\n"
                "    ['Content-Type'] = 'text/plain' }, 'hello')\n"
                "end)\n"
                "chute.on_request('/redirect', function(req)\n"
                "  return chute.redirect('https://example.net/x', 307)\n"
                "end)\n"
                "chute.on_request('/reject', function() return chute.reject() end)\n"
                "chute.on_request('/empty', function() return chute.respond(204) end)\n"
                "chute.on_request('', function(req) req.headers['X-Late'] = '1' end)\n");
    struct msg x;

    msg_init(&x, "GET /respond HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    assert_int_equal(run_request(s, &x), 1);
    assert_int_equal(x.reply.status, 200);
    assert_int_equal(x.reply.reject, 0);
    assert_string_equal(x.reply.extra, "Content-Type: text/plain\r\nx-a: 1\r\nx-a: 1b\r\nX-B: 2\r\n");
    assert_int_equal(x.reply.body.len, 5);
    assert_memory_equal(x.reply.body.ptr, "hello", 5);
    msg_fini(&x);

    msg_init(&x, "GET /redirect HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    assert_int_equal(run_request(s, &x), 1);
    assert_int_equal(x.reply.status, 307);
    assert_string_equal(x.reply.extra, "Location: https://example.net/x\r\n");
    assert_int_equal(x.reply.body.len, 0);
    msg_fini(&x);

    msg_init(&x, "GET /reject HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    assert_int_equal(run_request(s, &x), 1);
    assert_int_equal(x.reply.reject, 1);
    msg_fini(&x);

    msg_init(&x, "GET /empty HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    assert_int_equal(run_request(s, &x), 1);
    assert_int_equal(x.reply.status, 204);
    assert_null(x.reply.extra);
    assert_null(x.reply.body.ptr);
    msg_fini(&x);
    /* An answer stops the hooks after it: the catch-all ran only for
     * requests nobody answered (none here). */
    expect_stats(s, 4, 0, 0);
    script_free(s);
}

static void
test_reply_errors(void **state)
{
    load_fails(PRELUDE "chute.respond(200, { ['Content-Length'] = '3' })\n",
               "main.lua:2: chute.respond: header 'Content-Length' is chute's to write (it frames "
               "the body)");
    load_fails(PRELUDE "chute.respond(200, { ['X-A'] = 'a\\r\\nX-B: b' })\n",
               "main.lua:2: chute.respond: header 'X-A': a control character in the value");
    load_fails(PRELUDE "chute.respond(42)\n", "main.lua:2: chute.respond: status 42 is not 100..599");
    load_fails(PRELUDE "chute.redirect('/x', 200)\n",
               "main.lua:2: chute.redirect: status 200 is not 301, 302, 303, 307 or 308");
}

static void
test_registration_errors(void **state)
{
    load_fails(PRELUDE "\nchute.on_request('^https://(x', function() end)\n",
               "main.lua:3: chute.on_request: bad pattern \"^https://(x\": missing closing "
               "parenthesis at offset 11");
    load_fails(PRELUDE "chute.on_response('x', function() end, { bdy = true })\n",
               "main.lua:2: chute.on_response: unknown option 'bdy' (options: body, max_body, "
               "method)");
    load_fails(PRELUDE "chute.on_request('x', function() end, { max_body = 0 })\n",
               "main.lua:2: chute.on_request: opts.max_body: expected an integer 1..16777216 "
               "(bytes)");
    load_fails(PRELUDE "chute.on_request('x', 'f')\n",
               "main.lua:2: bad argument #2 to 'on_request' (function expected, got string)");
    load_fails(PRELUDE "chute.on_request = function() end\n",
               "main.lua:2: chute.on_request is called, not assigned: chute.on_request(pattern, "
               "function(req) ... end [, opts])");
    /* Registering from a hook, after the load: an error of that hook. */
    struct script *s = load_ok(PRELUDE "chute.on_request('', function(req)\n"
                                       "  chute.on_request('', function() end)\n"
                                       "end)\n");
    struct msg x;
    char line[1024];
    msg_init(&x, GET, NULL);
    run_logged(s, &x, line, sizeof(line));
    assert_string_equal(line, "warn  on_request hook main.lua:2 failed on "
                              "https://example.com/a/b?x=1&y=2: main.lua:3: chute.on_request: "
                              "hooks are registered while main.lua loads; the request goes on "
                              "without its edits");
    msg_fini(&x);
    script_free(s);
}

/* A request no pattern (or method) wants never enters Lua. */
static void
test_unmatched_never_enters_lua(void **state)
{
    struct script *s = load_ok(PRELUDE "local n = 0\n"
                                       "chute.on_request('^https://example\\\\.com/count', "
                                       "function() n = n + 1 end)\n"
                                       "chute.on_request('/post', function() n = n + 1 end, "
                                       "{ method = { 'POST', 'PUT' } })\n"
                                       "chute.on_request('/report', function(req)\n"
                                       "  req.headers['X-N'] = tostring(n)\n"
                                       "end)\n");
    const struct mitm_hooks *h = script_mitm_hooks(s);
    struct msg x;
    size_t used;

    msg_init(&x, "GET /other HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    assert_int_equal(h->wants_request(h->ud, &x.m), 0);
    used = s->mem_used;
    assert_int_equal(h->on_request(h->ud, &x.m, &x.reply), 0); /* called anyway: still nothing */
    assert_int_equal(s->mem_used, used);
    msg_fini(&x);
    msg_init(&x, "GET /post HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    assert_int_equal(h->wants_request(h->ud, &x.m), 0); /* the method filter */
    msg_fini(&x);
    msg_init(&x, "GET /count HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_request(s, &x);
    msg_fini(&x);
    expect_stats(s, 1, 0, 0);
    msg_init(&x, "GET /report HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_request(s, &x);
    assert_string_equal(upstream(&x), "GET /report HTTP/1.1\r\nHost: example.com\r\nX-N: 1\r\n\r\n");
    msg_fini(&x);
    expect_stats(s, 2, 0, 0);
    assert_null(h->request_body); /* no hook asked for a body */
    script_free(s);
}

/* A hook that fails leaves the request as the hooks before it left it. */
static void
test_error_passes_unmodified(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.on_request('', function(req)\n"
                                       "  req.headers['X-First'] = '1'\n"
                                       "end)\n"
                                       "chute.on_request('/a/', function(req)\n"
                                       "  req.headers['X-Second'] = '2'\n"
                                       "  req.path = '/elsewhere'\n"
                                       "  req.headers.cookie = nil\n"
                                       "  error('boom')\n"
                                       "end)\n"
                                       "chute.on_request('/a/', function() return 42 end)\n"
                                       "chute.on_request('/a/', function(req)\n"
                                       "  req.headers['Content-Length'] = '9'\n"
                                       "end)\n"
                                       "chute.on_request('/a/', function(req)\n"
                                       "  req.headers['X-Inject'] = 'a\\r\\nEvil: 1'\n"
                                       "end)\n");
    struct msg x;
    char line[1024];
    msg_init(&x, GET, NULL);
    assert_int_equal(run_logged(s, &x, line, sizeof(line)), 0);
    assert_string_equal(line, "warn  on_request hook main.lua:5 failed on "
                              "https://example.com/a/b?x=1&y=2: main.lua:9: boom; the request "
                              "goes on without its edits");
    assert_string_equal(upstream(&x),
                        "GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                        "X-Multi: one\r\nx-multi: two\r\nCookie: c=1\r\nX-First: 1\r\n\r\n");
    expect_stats(s, 5, 4, 0);
    msg_fini(&x);
    script_free(s);
}

static void
test_bad_returns_and_edits_logged(void **state)
{
    static const struct {
        const char *src, *line;
    } cases[] = {
        {"chute.on_request('', function() return 42 end)\n",
         "main.lua:2: the hook returned number; expected nothing, or chute.respond(), "
         "chute.redirect(), chute.reject()"},
        {"chute.on_request('', function(req) req.headers['Transfer-Encoding'] = 'x' end)\n",
         "main.lua:2: header 'Transfer-Encoding' cannot be edited: the body keeps the framing it "
         "came with"},
        {"chute.on_request('', function(req) req.headers.host = nil end)\n",
         "main.lua:2: header 'Host' cannot be removed (set another value)"},
        {"chute.on_request('', function(req) req.path = '/a b' end)\n",
         "main.lua:2: req.path: \"/a b\": byte 3 (0x20) is not allowed in a request target "
         "(percent-encode it)"},
        {"chute.on_request('', function(req) req.host = 'x' end)\n",
         "main.lua:2: req.host is read-only (the upstream is already connected; "
         "req.headers.host sets the Host header)"},
        {"chute.on_request('', function(req) req.body = 'x' end)\n",
         "main.lua:2: req.body cannot be set: register the hook with { body = true } (a body "
         "over max_body streams through)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char src[512], line[1024], want[1024];
        snprintf(src, sizeof(src), PRELUDE "%s", cases[i].src);
        struct script *s = load_ok(src);
        struct msg x;
        msg_init(&x, GET, NULL);
        assert_int_equal(run_logged(s, &x, line, sizeof(line)), 0);
        snprintf(want, sizeof(want), "warn  on_request hook main.lua:2 failed on "
                 "https://example.com/a/b?x=1&y=2: %s; the request goes on without its edits",
                 cases[i].line);
        assert_string_equal(line, want);
        assert_string_equal(upstream(&x), GET_UP);
        expect_stats(s, 1, 1, 0);
        msg_fini(&x);
        script_free(s);
    }
}

/* A runaway hook is cut, logged, counted; the next request is served. */
static void
test_runaway_cut_by_budget(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.config { budget = 20000 }\n"
                                       "chute.on_request('/loop', function(req)\n"
                                       "  req.headers['X-Partial'] = '1'\n"
                                       "  while true do end\n"
                                       "end)\n"
                                       "chute.on_request('/loop', function(req)\n"
                                       "  pcall(function() while true do end end)\n"
                                       "end)\n"
                                       "chute.on_request('', function(req)\n"
                                       "  local x = 0\n"
                                       "  for i = 1, 4000 do x = x + i end\n"
                                       "  req.headers['X-Done'] = tostring(x)\n"
                                       "end)\n");
    struct msg x;
    char line[1024];
    msg_init(&x, "GET /loop HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_logged(s, &x, line, sizeof(line));
    assert_string_equal(line, "warn  on_request hook main.lua:3 failed on https://example.com/loop: "
                              "main.lua:5: instruction budget exceeded (20000 instructions); the "
                              "request goes on without its edits");
    /* each hook has its own budget: the third one completes */
    assert_string_equal(upstream(&x),
                        "GET /loop HTTP/1.1\r\nHost: example.com\r\nX-Done: 8002000\r\n\r\n");
    expect_stats(s, 3, 2, 2);
    msg_fini(&x);
    msg_init(&x, "GET /fine HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_request(s, &x);
    assert_string_equal(upstream(&x),
                        "GET /fine HTTP/1.1\r\nHost: example.com\r\nX-Done: 8002000\r\n\r\n");
    msg_fini(&x);
    expect_stats(s, 4, 2, 2);
    script_free(s);
}

static void
test_memory_cap(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.config { lua_memory_mb = 4, budget = 100000000 }\n"
                                       "chute.on_request('/hog', function(req)\n"
                                       "  req.headers['X-Hog'] = '1'\n"
                                       "  local t = {}\n"
                                       "  for i = 1, 1e8 do t[i] = i end\n"
                                       "end)\n"
                                       "chute.on_request('', function(req)\n"
                                       "  req.headers['X-Ok'] = string.rep('a', 10)\n"
                                       "end)\n");
    struct msg x;
    char line[1024];
    msg_init(&x, "GET /hog HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
    run_logged(s, &x, line, sizeof(line));
    assert_string_equal(line, "warn  on_request hook main.lua:3 failed on https://example.com/hog: "
                              "main.lua:3: not enough memory (the script's memory cap: "
                              "lua_memory_mb); the request goes on without its edits");
    assert_string_equal(upstream(&x),
                        "GET /hog HTTP/1.1\r\nHost: example.com\r\nX-Ok: aaaaaaaaaa\r\n\r\n");
    expect_stats(s, 2, 1, 0);
    assert_true(s->mem_used <= (size_t)4 << 20);
    msg_fini(&x);
    script_free(s);
}

/* With the state full, even making req fails: the hook is an error, the
 * request passes, nothing crashes. */
static void
test_memory_full_before_hook(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.on_request('', function(req)\n"
                                       "  req.headers['X-A'] = '1'\n"
                                       "end)\n");
    struct msg x;
    char line[1024];
    lua_gc(s->L, LUA_GCCOLLECT);
    s->mem_limit = s->mem_used; /* nothing more */
    msg_init(&x, GET, NULL);
    run_logged(s, &x, line, sizeof(line));
    assert_non_null(strstr(line, "not enough memory"));
    assert_string_equal(upstream(&x), GET_UP);
    expect_stats(s, 1, 1, 0);
    s->mem_limit = (size_t)64 << 20;
    msg_fini(&x);
    msg_init(&x, GET, NULL);
    run_request(s, &x);
    assert_non_null(http_fwd_field_get(&x.req.fields, "x-a"));
    msg_fini(&x);
    script_free(s);
}

static void
test_request_body(void **state)
{
    struct script *s = load_ok(PRELUDE "chute.on_request('/up', function(req)\n"
                                       "  req.body = req.body:upper()\n"
                                       "end, { body = true, max_body = 16 })\n"
                                       "chute.on_request('/up', function(req)\n"
                                       "  req.headers['X-Len'] = tostring(req.body and #req.body)\n"
                                       "end)\n");
    const struct mitm_hooks *h = script_mitm_hooks(s);
    static const char head[] = "POST /up HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\n";
    struct msg x;
    msg_init(&x, head, "hello");
    assert_non_null(h->request_body);
    assert_int_equal(h->request_body(h->ud, &x.m), 16);
    run_request(s, &x);
    assert_int_equal(x.m.body_len, 5);
    assert_memory_equal(x.m.body, "HELLO", 5);
    assert_memory_equal(http_fwd_field_get(&x.req.fields, "x-len")->value.ptr, "5", 1);
    msg_fini(&x);

    /* Over max_body (the MITM streamed it): the body hook is skipped. */
    static const char big[] = "POST /up HTTP/1.1\r\nHost: example.com\r\nContent-Length: 99\r\n\r\n";
    msg_init(&x, big, NULL);
    run_request(s, &x);
    assert_int_equal(x.m.body_set, 0);
    struct script_stats st;
    script_stats(s, &st);
    assert_int_equal(st.hook_body_skips, 1);
    assert_int_equal(st.hook_calls, 3);
    msg_fini(&x);
    script_free(s);
}

static void
response_init(struct msg *x, const char *head)
{
    int n = http_h1_parse_response(head, strlen(head), &x->rparsed);
    assert_true(n > 0);
    assert_int_equal(
        http_fwd_response_init(&x->resp, &x->a, &x->req, head, (size_t)n, &x->rparsed, 1), 0);
}

static void
test_response_hook(void **state)
{
    struct script *s = load_ok(
        PRELUDE "chute.on_response('/a/', function(resp, req)\n"
                "  resp.headers['X-Seen'] = req.method .. ' ' .. req.path .. ' ' .. resp.status\n"
                "  resp.headers.server = nil\n"
                "  resp.body = resp.body .. '!'\n"
                "end, { body = true })\n"
                "chute.on_response('/a/', function(resp, req)\n"
                "  req.headers['X-Late'] = '1'\n"
                "end)\n"
                "chute.on_response('/a/', function(resp)\n"
                "  resp.status = 500\n"
                "end)\n");
    const struct mitm_hooks *h = script_mitm_hooks(s);
    static const char rhead[] = "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 2\r\n\r\n";
    struct msg x;
    struct mem_slice out;
    const char *body = "hi";
    size_t blen = 2;

    msg_init(&x, GET, NULL);
    response_init(&x, rhead);
    assert_int_equal(h->wants_response(h->ud, &x.m), 1);
    assert_int_equal(h->response_body(h->ud, &x.m, &x.resp), 128 << 10);
    h->on_response(h->ud, &x.m, &x.resp, &body, &blen);
    assert_int_equal(lua_gettop(s->L), 0);
    assert_int_equal(http_fwd_response_head(&x.resp, &out), 0);
    assert_int_equal(out.len, strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                     "X-Seen: GET /a/b 200\r\n\r\n"));
    assert_memory_equal(out.ptr, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Seen: GET /a/b 200\r\n\r\n",
                        out.len);
    assert_int_equal(blen, 3);
    assert_memory_equal(body, "hi!", 3);
    expect_stats(s, 3, 2, 0); /* req is read-only, status too */
    msg_fini(&x);
    script_free(s);
}

/* An object kept past its hook is an error in the next, never a view of
 * the next request. */
static void
test_kept_objects(void **state)
{
    struct script *s = load_ok(PRELUDE "local kept, hk\n"
                                       "chute.on_request('', function(req)\n"
                                       "  if not kept then kept = req; hk = req.headers; return end\n"
                                       "  local ok1, e1 = pcall(function() return kept.path end)\n"
                                       "  local ok2, e2 = pcall(function() return hk.host end)\n"
                                       "  req.headers['X-R'] = tostring(ok1) .. tostring(ok2) ..\n"
                                       "    (e1:match('req used after its hook returned') or '?')\n"
                                       "end)\n");
    struct msg x;
    msg_init(&x, GET, NULL);
    run_request(s, &x);
    msg_fini(&x);
    msg_init(&x, GET, NULL);
    run_request(s, &x);
    const struct http_header *r = http_fwd_field_get(&x.req.fields, "x-r");
    assert_non_null(r);
    assert_memory_equal(r->value.ptr, "falsefalsereq used after its hook returned", r->value.len);
    msg_fini(&x);
    script_free(s);
}

static void
test_config(void **state)
{
    struct script *s = load_ok(PRELUDE);
    const struct script_mitm *m = &script_config(s)->mitm;
    assert_int_equal(m->enabled, 0);
    assert_int_equal(m->block_quic, 1);
    assert_int_equal(m->max_body, 128 << 10);
    script_free(s);

    s = load_ok(PRELUDE "chute.config { mitm = {\n"
                        "  hosts = { '*.example.com', 'api.example.net:8443', '-pinned.example.com',\n"
                        "            '[2001:db8::1]:443' },\n"
                        "  skip_verify_hosts = 'self-signed.test',\n"
                        "  auto_bypass = true, bypass_seconds = 60, block_quic = false,\n"
                        "  max_body = 1024 } }\n"
                        "chute.on_request('', function() end)\n");
    m = &script_config(s)->mitm;
    assert_int_equal(m->enabled, 1);
    assert_int_equal(m->nhosts, 4);
    assert_string_equal(m->hosts[0], "*.example.com");
    assert_string_equal(m->hosts[2], "-pinned.example.com");
    assert_string_equal(m->hosts[3], "[2001:db8::1]:443");
    assert_int_equal(m->nskip, 1);
    assert_string_equal(m->skip_verify[0], "self-signed.test");
    assert_int_equal(m->auto_bypass, 1);
    assert_true(m->bypass_seconds == 60.0);
    assert_int_equal(m->block_quic, 0);
    assert_int_equal(m->max_body, 1024);
    assert_null(m->ca);
    assert_int_equal(s->req_hooks[0].max_body, 1024); /* the hooks' default */
    script_free(s);

    load_fails(PRELUDE "chute.config { mitm = { hosts = { 'a.test', 'b.test:0' } } }\n",
               "main.lua:2: chute.config: mitm.hosts: [2]: \"b.test:0\": the port must be "
               "1..65535 (\"host:8443\")");
    load_fails(PRELUDE "chute.config { mitm = { hosts = { 'a b' } } }\n",
               "main.lua:2: chute.config: mitm.hosts: [1]: \"a b\": no spaces or control "
               "characters");
    load_fails(PRELUDE "chute.config { mitm = { hosts = { '-' } } }\n",
               "main.lua:2: chute.config: mitm.hosts: [1]: empty host pattern");
    load_fails(PRELUDE "chute.config { mitm = { ca = '/nonexistent/ca.pem' } }\n",
               "main.lua:2: chute.config: mitm.ca: cannot read /nonexistent/ca.pem (No such "
               "file or directory)");
    load_fails(PRELUDE "chute.config { mitm = { ca_key = 'x.key' } }\n",
               "main.lua:2: chute.config: mitm.ca_key needs mitm.ca (the certificate)");
    char err[1024] = "";
    assert_null(script_load(NULL, PRELUDE "chute.config { mitm = { hsts = {} } }\n", err,
                            sizeof(err)));
    assert_non_null(strstr(err, "main.lua:2: chute.config: unknown key 'mitm.hsts': did you mean 'hosts'? (known: "));
}

static void
route_flow(struct script *s, struct flow *f, const char *host)
{
    memset(f, 0, sizeof(*f));
    f->id = 9;
    f->network = FLOW_TCP;
    f->inbound = FLOW_IN_SOCKS;
    assert_int_equal(flow_addr_from_host(&f->dst, host, strlen(host), 443), 0);
    f->mitm = 5; /* route() sets it whatever was there */
    script_route(s, f);
    assert_int_equal(lua_gettop(s->L), 0);
}

static void
test_route_mitm_option(void **state)
{
    struct script *s = load_ok(PRELUDE "function chute.route(flow)\n"
                                       "  if flow.host == 'off.test' then return 'DIRECT', { mitm = false } end\n"
                                       "  if flow.host == 'on.test' then return 'REJECT', { mitm = true } end\n"
                                       "  if flow.host == 'bad.test' then return 'REJECT', { mitn = true } end\n"
                                       "  if flow.host == 'type.test' then return 'REJECT', { mitm = 1 } end\n"
                                       "  return 'REJECT'\n"
                                       "end\n");
    struct flow f;
    route_flow(s, &f, "off.test");
    assert_int_equal(f.mitm, -1);
    assert_int_equal(f.policy, FLOW_POLICY_DIRECT);
    assert_true(f._reads & FLOW_READ_UNCACHEABLE);
    route_flow(s, &f, "on.test");
    assert_int_equal(f.mitm, 1);
    assert_int_equal(f.policy, FLOW_POLICY_REJECT);
    assert_string_equal(f.rule, "route");
    route_flow(s, &f, "plain.test");
    assert_int_equal(f.mitm, 0);
    assert_false(f._reads & FLOW_READ_UNCACHEABLE);
    route_flow(s, &f, "bad.test");
    assert_int_equal(f.mitm, 0);
    assert_int_equal(f.policy, FLOW_POLICY_DIRECT);
    assert_string_equal(f.rule, "fallback: bad options");
    route_flow(s, &f, "type.test");
    assert_string_equal(f.rule, "fallback: bad options");
    struct script_stats st;
    script_stats(s, &st);
    assert_int_equal(st.route_errors, 2);
    script_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_hooks_no_set),
        cmocka_unit_test(test_header_edits),
        cmocka_unit_test(test_reads),
        cmocka_unit_test(test_path_query_method),
        cmocka_unit_test(test_replies),
        cmocka_unit_test(test_reply_errors),
        cmocka_unit_test(test_registration_errors),
        cmocka_unit_test(test_unmatched_never_enters_lua),
        cmocka_unit_test(test_error_passes_unmodified),
        cmocka_unit_test(test_bad_returns_and_edits_logged),
        cmocka_unit_test(test_runaway_cut_by_budget),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_memory_full_before_hook),
        cmocka_unit_test(test_request_body),
        cmocka_unit_test(test_response_hook),
        cmocka_unit_test(test_kept_objects),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_route_mitm_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
