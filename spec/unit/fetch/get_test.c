#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../loop.h"
#include "fetch/fetch.h"
#include "flow/addr.h"
#include "outbound/outbound.h"

/* One GET (fetch/get.c) against a small server in a child process that
 * answers by path: bodies by Content-Length, chunked and until-close, a
 * 304 for a request with If-None-Match, a redirect, and the bad answers:
 * over the size limit (declared or streamed), not HTTP, a head too large,
 * cut short. */

static struct ev_loop *loop;
static pid_t server;
static uint16_t port;

static void
reply(int c, const char *req)
{
    char big[20000];
    const char *r;
    if (strstr(req, "GET /ok "))
        r = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"v1\"\r\n"
            "Last-Modified: Tue, 01 Dec 2026 10:00:00 GMT\r\n\r\nhello";
    else if (strstr(req, "GET /chunked "))
        r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
    else if (strstr(req, "GET /close "))
        r = "HTTP/1.0 200 OK\r\n\r\nuntil the end";
    else if (strstr(req, "GET /cond ") && strstr(req, "If-None-Match: \"v1\"\r\n") &&
             strstr(req, "If-Modified-Since: Tue, 01 Dec 2026 10:00:00 GMT\r\n"))
        r = "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n";
    else if (strstr(req, "GET /cond "))
        r = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnew";
    else if (strstr(req, "GET /redirect ")) {
        snprintf(big, sizeof(big), "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%u/ok\r\n"
                 "Content-Length: 0\r\n\r\n", port);
        r = big;
    } else if (strstr(req, "GET /loop ")) {
        snprintf(big, sizeof(big), "HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:%u/loop\r\n"
                 "Content-Length: 0\r\n\r\n", port);
        r = big;
    } else if (strstr(req, "GET /big "))
        r = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n";
    else if (strstr(req, "GET /bigchunked ")) {
        int k = snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "1388\r\n");
        memset(big + k, 'x', 5000);
        memcpy(big + k + 5000, "\r\n0\r\n\r\n", 8);
        r = big;
    } else if (strstr(req, "GET /hugehead ")) {
        int k = snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nX-Pad: ");
        memset(big + k, 'p', 18000);
        big[k + 18000] = '\0';
        r = big;
    } else if (strstr(req, "GET /short "))
        r = "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly a part";
    else if (strstr(req, "GET /gzip "))
        r = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nxx";
    else if (strstr(req, "GET /missing "))
        r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    else
        r = "SSH-2.0-OpenSSH_9.2\r\n";
    size_t n = strlen(r), off = 0;
    while (off < n) {
        ssize_t w = write(c, r + off, n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

static void
serve(int ls)
{
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0)
            continue;
        char req[4096];
        size_t got = 0;
        while (got < sizeof(req) - 1 && (got < 4 || memcmp(req + got - 4, "\r\n\r\n", 4) != 0)) {
            ssize_t r = read(c, req + got, sizeof(req) - 1 - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        req[got] = '\0';
        reply(c, req);
        close(c);
    }
}

static int
setup(void **st)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t al = sizeof(a);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 16) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0)
        return -1;
    port = ntohs(a.sin_port);
    server = fork();
    if (server == 0) {
        serve(ls);
        _exit(0);
    }
    close(ls);
    loop = ev_loop_new(EVFLAG_AUTO);
    signal(SIGPIPE, SIG_IGN);
    return server > 0 && loop != NULL ? 0 : -1;
}

static int
teardown(void **st)
{
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    ev_loop_destroy(loop);
    return 0;
}

struct res {
    int done, status;
    char body[256];
    size_t len;
    char why[320], etag[256], lm[64];
};

static void
on_got(void *arg, struct fetch_resp *r)
{
    struct res *x = arg;
    x->done = 1;
    x->status = r->status;
    x->len = r->len;
    if (r->body != NULL)
        snprintf(x->body, sizeof(x->body), "%s", r->body);
    snprintf(x->why, sizeof(x->why), "%s", r->why ? r->why : "");
    snprintf(x->etag, sizeof(x->etag), "%s", r->etag);
    snprintf(x->lm, sizeof(x->lm), "%s", r->last_modified);
    free(r->body);
}

static struct res
get(const char *path, const char *etag, const char *lm)
{
    struct outbound_env env = {.loop = loop};
    struct fetch_url u;
    char url[128], err[100];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    assert_int_equal(0, fetch_url_parse(url, &u, err, sizeof(err)));
    struct fetch_get_opts o = {.policy = FLOW_POLICY_DIRECT, .max_bytes = 4096, .timeout = 5,
                               .etag = etag, .last_modified = lm};
    struct res x = {0};
    struct fetch_get *g = fetch_get_start(&env, &u, &o, on_got, &x);
    assert_non_null(g);
    assert_int_equal(0, x.done); /* never from inside the start */
    assert_true(loop_run_until(loop, &x.done, 10));
    return x;
}

static void
test_bodies(void **st)
{
    struct res x = get("/ok", NULL, NULL);
    assert_int_equal(200, x.status);
    assert_string_equal("hello", x.body);
    assert_string_equal("\"v1\"", x.etag);
    assert_string_equal("Tue, 01 Dec 2026 10:00:00 GMT", x.lm);
    x = get("/chunked", NULL, NULL);
    assert_int_equal(200, x.status);
    assert_string_equal("abcde", x.body);
    assert_int_equal(5, x.len);
    x = get("/close", NULL, NULL);
    assert_string_equal("until the end", x.body);
    x = get("/redirect", NULL, NULL);
    assert_string_equal("hello", x.body);
}

static void
test_conditional(void **st)
{
    struct res x = get("/cond", "\"v1\"", "Tue, 01 Dec 2026 10:00:00 GMT");
    assert_int_equal(304, x.status);
    x = get("/cond", NULL, NULL);
    assert_int_equal(200, x.status);
    assert_string_equal("new", x.body);
    x = get("/cond", "\"v1\"\r\nX-Evil: 1", NULL); /* no header injection */
    assert_int_equal(200, x.status);
}

static void
test_refused(void **st)
{
    static const struct {
        const char *path, *why;
    } cases[] = {
        {"/big", "100000 bytes, over the limit of 4096"},
        {"/bigchunked", "over the limit of 4096 bytes"},
        {"/hugehead", "a response head over 16 KiB"},
        {"/short", "before the body's end"},
        {"/gzip", "Content-Encoding gzip is not supported"},
        {"/missing", "HTTP 404 Not Found"},
        {"/loop", "more than 3 redirects"},
        {"/ssh", "not an HTTP/1.x response"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct res x = get(cases[i].path, NULL, NULL);
        assert_int_equal(0, x.status);
        if (strstr(x.why, cases[i].why) == NULL)
            fail_msg("%s: '%s' does not say '%s'", cases[i].path, x.why, cases[i].why);
    }
}

static void
test_connect_fails(void **st)
{
    struct outbound_env env = {.loop = loop};
    struct fetch_url u;
    char err[100];
    /* a port nobody listens on: the server's port + 1 is not ours to know,
     * so use the reserved 1 on loopback */
    assert_int_equal(0, fetch_url_parse("http://127.0.0.1:1/x", &u, err, sizeof(err)));
    struct fetch_get_opts o = {.policy = FLOW_POLICY_DIRECT, .max_bytes = 4096, .timeout = 5};
    struct res x = {0};
    assert_non_null(fetch_get_start(&env, &u, &o, on_got, &x));
    assert_true(loop_run_until(loop, &x.done, 10));
    assert_int_equal(0, x.status);
    assert_non_null(strstr(x.why, "connecting to 127.0.0.1:1 via DIRECT"));
    /* https with no trust store: said, not crashed */
    assert_int_equal(0, fetch_url_parse("https://127.0.0.1:1/x", &u, err, sizeof(err)));
    memset(&x, 0, sizeof(x));
    assert_non_null(fetch_get_start(&env, &u, &o, on_got, &x));
    assert_true(loop_run_until(loop, &x.done, 10));
    assert_non_null(strstr(x.why, "no trust store"));
    /* cancelled: no callback */
    memset(&x, 0, sizeof(x));
    fetch_get_cancel(fetch_get_start(&env, &u, &o, on_got, &x));
    loop_run_until(loop, NULL, 0.05);
    assert_int_equal(0, x.done);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_conditional),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_connect_fails),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
