/* The HTTP/1 exchange driver over real sockets: socketpairs wrapped by
 * io_fd_new, the test playing the client and the origin on the other ends
 * with non-blocking I/O pumped between loop iterations. Each test states
 * the bytes each side must see. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/h1_conn.h"

#define S(lit) lit, sizeof(lit) - 1
#define MAX_UPS 8

/* Bytes one side of the test has received, or still has to send. */
struct acc {
    char *p;
    size_t len, cap, off; /* off: bytes of an outgoing queue already sent */
    int eof;
};

enum policy {
    FORWARD,   /* over the kept upstream when there is one, else a new one */
    FORWARD_NEW, /* always a new upstream */
    RESPOND,   /* answer locally with f->status/reason/extra/close */
    LATER,     /* decide from the test, after the hook returned */
    RELEASE,   /* hand the client back (CONNECT) */
};

struct fix {
    struct ev_loop *loop;
    struct http_h1_conn *c;
    int cli;                 /* the test's end of the client connection */
    int org[MAX_UPS];        /* the test's ends of the upstreams, in order */
    int nups;
    struct acc cli_in, cli_out, org_in[MAX_UPS], org_out;
    int cli_paused;          /* the client reads nothing (a slow reader) */
    uint64_t org_sent;       /* bytes the origin got into its socket */
    enum policy policy;
    int status, close;
    const char *reason, *extra;
    const char *early;       /* early bytes given with the next upstream */
    int edit_req, edit_resp;
    size_t collect_req, collect_resp;  /* ask for the bodies, with this max */
    const char *new_req_body, *new_resp_body;
    char seen_req_body[256], seen_resp_body[256];
    long seen_req_len, seen_resp_len;  /* -1: over the max */
    /* What the driver reported. */
    int heads, resp_heads, upstream_ends, done;
    const char *done_reason;
    char last_path[256];
    int last_refused, last_connect;
    struct io_stream *released;
    struct mem_slice rest;
    uint64_t up_count, down_count;
};

static struct fix F;

static void
acc_put(struct acc *a, const void *p, size_t n)
{
    if (a->len + n + 1 > a->cap) {
        a->cap = (a->len + n + 1) * 2;
        a->p = realloc(a->p, a->cap);
        assert_non_null(a->p);
    }
    memcpy(a->p + a->len, p, n);
    a->len += n;
    a->p[a->len] = '\0';
}

static void
acc_free(struct acc *a)
{
    free(a->p);
    memset(a, 0, sizeof(*a));
}

/* Moves what it can between the test's sockets and its buffers. */
static int
pump_fd(int fd, struct acc *in, struct acc *out, uint64_t *sent)
{
    char b[65536];
    int moved = 0;
    ssize_t n;

    if (fd < 0)
        return 0;
    while (out != NULL && out->off < out->len) {
        n = send(fd, out->p + out->off, out->len - out->off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        out->off += (size_t)n;
        if (sent != NULL)
            *sent += (uint64_t)n;
        moved = 1;
    }
    while (in != NULL && !in->eof) {
        n = recv(fd, b, sizeof(b), 0);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            in->eof = 1;
            break;
        }
        acc_put(in, b, (size_t)n);
        moved = 1;
    }
    return moved;
}

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
pump(void)
{
    int moved = 0;

    ev_run(F.loop, EVRUN_NOWAIT);
    moved |= pump_fd(F.cli, F.cli_paused ? NULL : &F.cli_in, &F.cli_out, NULL);
    if (F.nups > 0)
        moved |= pump_fd(F.org[F.nups - 1], &F.org_in[F.nups - 1], &F.org_out, &F.org_sent);
    return moved;
}

/* Runs the loop and both peers until |cond| holds (5 s at most; the
 * condition is asserted afterwards). */
#define UNTIL(cond)                                                                            \
    do {                                                                                       \
        double t0_ = now();                                                                    \
        while (!(cond) && now() - t0_ < 5)                                                     \
            if (!pump())                                                                       \
                usleep(200);                                                                   \
        assert_true(cond);                                                                     \
    } while (0)

/* Runs everything until nothing has moved for a while. */
static void
settle(void)
{
    double quiet = now();

    while (now() - quiet < 0.1) {
        if (pump())
            quiet = now();
        else
            usleep(200);
    }
}

static int
has(const struct acc *a, const char *s)
{
    return a->p != NULL && strstr(a->p, s) != NULL;
}

static void
say(struct acc *q, const char *s)
{
    acc_put(q, s, strlen(s));
}

/* Socket buffers of a known size, so back-pressure bounds are the test's
 * and not the machine's sysctls. */
#define SOCK_BUF 65536
#define IN_FLIGHT_MAX (2 * 4 * SOCK_BUF + HTTP_MAX_HEAD + 16384)

static void
pair(int *ours, int *theirs)
{
    int sv[2], sz = SOCK_BUF;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    for (int i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    }
    *ours = sv[0];
    *theirs = sv[1];
}

/* A stream over another that counts the reads and the on_readable calls
 * it passes on: a side stalled by back-pressure must see neither (no busy
 * polling), and the driver must work over a layered stream. */
struct shim {
    struct io_stream s;
    int reads, readables;
};

static struct shim *shims[2]; /* the client's, the first upstream's */

static void
shim_readable(void *arg)
{
    struct shim *sh = arg;

    sh->readables++;
    if (sh->s.on_readable != NULL)
        sh->s.on_readable(sh->s.arg);
}

static void
shim_drain(void *arg)
{
    struct shim *sh = arg;

    if (sh->s.on_drain != NULL)
        sh->s.on_drain(sh->s.arg);
}

static ssize_t
shim_read(struct io_stream *s, void *buf, size_t len)
{
    ((struct shim *)s)->reads++;
    return io_read(s->inner, buf, len);
}

static ssize_t
shim_writev(struct io_stream *s, const struct iovec *iov, int n)
{
    return io_writev(s->inner, iov, n);
}

static int
shim_shutdown(struct io_stream *s)
{
    return io_shutdown(s->inner);
}

static void
shim_read_start(struct io_stream *s)
{
    io_read_start(s->inner);
}

static void
shim_read_stop(struct io_stream *s)
{
    io_read_stop(s->inner);
}

static void
shim_close(struct io_stream *s, int reset)
{
    for (int i = 0; i < 2; i++)
        if (shims[i] == (struct shim *)s)
            shims[i] = NULL;
    io_close(s->inner, reset);
    free(s);
}

static const struct io_stream_ops shim_ops = {
    .name = "shim",
    .read = shim_read,
    .writev = shim_writev,
    .shutdown = shim_shutdown,
    .read_start = shim_read_start,
    .read_stop = shim_read_stop,
    .close = shim_close,
};

static struct io_stream *
shim_new(struct io_stream *inner, int slot)
{
    struct shim *sh = calloc(1, sizeof(*sh));

    assert_non_null(sh);
    sh->s = (struct io_stream){.ops = &shim_ops, .inner = inner, .loop = inner->loop};
    io_set_callbacks(inner, shim_readable, shim_drain, sh);
    shims[slot] = sh;
    return &sh->s;
}

static int use_shims;

static struct io_stream *
new_upstream(void)
{
    int d, t;
    struct io_stream *s;

    assert_true(F.nups < MAX_UPS);
    pair(&d, &t);
    s = io_fd_new(F.loop, d);
    assert_non_null(s);
    F.org[F.nups++] = t;
    return use_shims && F.nups == 1 ? shim_new(s, 1) : s;
}

static void
forward_new(struct http_h1_conn *c)
{
    struct http_h1_upstream up = {.stream = new_upstream(),
                                  .up_count = &F.up_count,
                                  .down_count = &F.down_count};

    if (F.early != NULL) {
        up.early = F.early;
        up.early_len = strlen(F.early);
    }
    assert_int_equal(http_h1_conn_forward(c, &up), 0);
}

static void
decide(struct http_h1_conn *c)
{
    switch (F.policy) {
    case FORWARD:
        if (http_h1_conn_has_upstream(c)) {
            assert_int_equal(http_h1_conn_forward(c, NULL), 0);
            break;
        }
        /* fall through */
    case FORWARD_NEW:
        forward_new(c);
        break;
    case RESPOND:
        assert_int_equal(http_h1_conn_respond(c, F.status, F.reason, F.extra, F.close), 0);
        break;
    case RELEASE:
        F.released = http_h1_conn_release_client(c, &F.rest);
        assert_non_null(F.released);
        break;
    case LATER:
        break;
    }
}

static void
on_request_head(void *arg, struct http_h1_conn *c, struct http_fwd_req *req)
{
    F.heads++;
    snprintf(F.last_path, sizeof(F.last_path), "%.*s", (int)req->path.len,
             req->path.ptr ? req->path.ptr : "");
    F.last_refused = req->refused;
    F.last_connect = req->connect;
    if (F.edit_req)
        assert_int_equal(
            http_fwd_field_add(&req->fields, MEM_SLICE_LIT("X-Hook"), MEM_SLICE_LIT("req")), 0);
    /* What the forward policy cannot do is answered as the proxy would. */
    if (F.policy != RESPOND && F.policy != RELEASE && (req->refused || req->connect)) {
        assert_int_equal(http_h1_conn_respond(c, 400, "Bad Request", NULL, 1), 0);
        return;
    }
    if (F.collect_req) {
        assert_int_equal(http_h1_conn_collect_request(c, F.collect_req), 0);
        return; /* decided in on_request_body */
    }
    decide(c);
}

static void
on_request_body(void *arg, struct http_h1_conn *c, struct http_fwd_req *req, const char *body,
                size_t len)
{
    F.seen_req_len = body != NULL ? (long)len : -1;
    if (body != NULL)
        snprintf(F.seen_req_body, sizeof(F.seen_req_body), "%s", body);
    if (F.new_req_body != NULL && body != NULL)
        assert_int_equal(
            http_h1_conn_set_request_body(c, F.new_req_body, strlen(F.new_req_body)), 0);
    decide(c);
}

static void
on_collect_resp_head(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp)
{
    F.resp_heads++;
    if (F.collect_resp)
        assert_int_equal(http_h1_conn_collect_response(c, F.collect_resp), 0);
}

static void
on_response_body(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp, const char *body,
                 size_t len)
{
    F.seen_resp_len = body != NULL ? (long)len : -1;
    if (body != NULL)
        snprintf(F.seen_resp_body, sizeof(F.seen_resp_body), "%s", body);
    if (F.new_resp_body != NULL && body != NULL)
        assert_int_equal(
            http_h1_conn_set_response_body(c, F.new_resp_body, strlen(F.new_resp_body)), 0);
}

static void
on_response_head(void *arg, struct http_h1_conn *c, struct http_fwd_resp *resp)
{
    F.resp_heads++;
    if (F.edit_resp) {
        assert_int_equal(http_fwd_field_del(&resp->fields, MEM_SLICE_LIT("Server")), 1);
        assert_int_equal(
            http_fwd_field_add(&resp->fields, MEM_SLICE_LIT("X-Hook"), MEM_SLICE_LIT("resp")), 0);
    }
}

static void
on_upstream_end(void *arg, struct http_h1_conn *c, const char *reason)
{
    assert_string_equal(reason, "done");
    F.upstream_ends++;
}

static void
on_done(void *arg, struct http_h1_conn *c, const char *reason)
{
    F.done++;
    F.done_reason = reason;
    http_h1_conn_free(c);
    F.c = NULL;
}

static const struct http_h1_conn_cbs cbs = {.on_request_head = on_request_head,
                                            .on_response_head = on_response_head,
                                            .on_upstream_end = on_upstream_end,
                                            .on_done = on_done};
static const struct http_h1_conn_cbs cbs_no_resp_hook = {.on_request_head = on_request_head,
                                                         .on_upstream_end = on_upstream_end,
                                                         .on_done = on_done};

static const struct http_h1_conn_cbs cbs_collect = {.on_request_head = on_request_head,
                                                    .on_response_head = on_collect_resp_head,
                                                    .on_upstream_end = on_upstream_end,
                                                    .on_request_body = on_request_body,
                                                    .on_response_body = on_response_body,
                                                    .on_done = on_done};

static void
start_with(const struct http_h1_conn_cbs *cb, double idle)
{
    struct http_h1_conn_opts o = {.fwd = {.form = HTTP_FWD_PROXY}, .idle_timeout = idle};
    int d;
    struct io_stream *s;

    pair(&d, &F.cli);
    s = io_fd_new(F.loop, d);
    assert_non_null(s);
    F.c = http_h1_conn_new(use_shims ? shim_new(s, 0) : s, &o, cb, NULL);
    assert_non_null(F.c);
}

static void
start(void)
{
    start_with(&cbs_no_resp_hook, 0);
}

static int
setup(void **state)
{
    memset(&F, 0, sizeof(F));
    use_shims = 0;
    shims[0] = shims[1] = NULL;
    F.loop = ev_loop_new(EVFLAG_AUTO);
    F.cli = -1;
    return 0;
}

static int
teardown(void **state)
{
    if (F.c != NULL)
        http_h1_conn_free(F.c);
    if (F.released != NULL)
        io_close(F.released, 0);
    ev_run(F.loop, EVRUN_NOWAIT);
    ev_loop_destroy(F.loop);
    if (F.cli >= 0)
        close(F.cli);
    for (int i = 0; i < F.nups; i++) {
        close(F.org[i]);
        acc_free(&F.org_in[i]);
    }
    acc_free(&F.cli_in);
    acc_free(&F.cli_out);
    acc_free(&F.org_out);
    return 0;
}

/* The origin answers: the bytes go out from the current upstream's end. */
static void
origin_says(const char *s)
{
    say(&F.org_out, s);
}

static void
test_get(void **state)
{
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: o\r\n\r\nhello";

    start();
    say(&F.cli_out, "GET http://o.test/a?b HTTP/1.1\r\nHost: o.test\r\nConnection: keep-alive\r\n"
                    "Proxy-Authorization: Basic dTpw\r\nAccept: */*\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    assert_string_equal(F.org_in[0].p, "GET /a?b HTTP/1.1\r\nHost: o.test\r\nAccept: */*\r\n\r\n");
    assert_string_equal(F.last_path, "/a?b");
    origin_says(resp);
    UNTIL(F.cli_in.len == sizeof(resp) - 1);
    assert_string_equal(F.cli_in.p, resp);
    settle();
    /* Keep-alive: nothing closed, the counts are the flow's. */
    assert_int_equal(F.done, 0);
    assert_false(F.cli_in.eof || F.org_in[0].eof);
    assert_int_equal(F.up_count, F.org_in[0].len);
    assert_int_equal(F.down_count, sizeof(resp) - 1);
    assert_true(http_h1_conn_has_upstream(F.c));
    /* The client leaves: "done". */
    close(F.cli);
    F.cli = -1;
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "done");
    UNTIL(F.org_in[0].eof);
}

/* |n| bytes of a pattern no window can line up with by chance. */
static char *
pattern(size_t n, unsigned seed)
{
    char *p = malloc(n);

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (char)(seed >> 16);
    }
    return p;
}

static void
test_post_length(void **state)
{
    const size_t n = 5000000;
    char *body = pattern(n, 1), head[128];
    int hl = snprintf(head, sizeof(head),
                      "POST http://o.test/up HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", n);
    static const char up_head[] = "POST /up HTTP/1.1\r\nContent-Length: 5000000\r\nHost: o.test\r\n\r\n";

    start();
    acc_put(&F.cli_out, head, (size_t)hl);
    acc_put(&F.cli_out, body, n);
    UNTIL(F.nups == 1 && F.org_in[0].len == sizeof(up_head) - 1 + n);
    assert_memory_equal(F.org_in[0].p, up_head, sizeof(up_head) - 1);
    assert_memory_equal(F.org_in[0].p + sizeof(up_head) - 1, body, n);
    origin_says("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
    UNTIL(has(&F.cli_in, "\r\n\r\n"));
    assert_string_equal(F.cli_in.p, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
    assert_int_equal(F.up_count, sizeof(up_head) - 1 + n);
    settle();
    assert_int_equal(F.done, 0);
    free(body);
}

/* A chunked body in pieces (extensions, a trailer), then the next request
 * in the same write: the body ends where its framing says. */
static void
test_post_chunked(void **state)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nyes\r\n0\r\n\r\n";

    start();
    say(&F.cli_out, "POST http://o.test/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                    "Host: o.test\r\n\r\n5;ext=\"a b\"\r\nhel");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "hel"));
    say(&F.cli_out, "lo\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n"
                    "GET http://o.test/next HTTP/1.1\r\n\r\n");
    UNTIL(has(&F.org_in[0], "X-Trailer: t\r\n\r\n"));
    assert_string_equal(F.org_in[0].p, "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                                       "Host: o.test\r\n\r\n5;ext=\"a b\"\r\nhello\r\n1A\r\n"
                                       "abcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\n");
    assert_int_equal(F.heads, 1); /* the next request waits for the response */
    origin_says(ok);
    UNTIL(has(&F.org_in[0], "GET /next"));
    assert_string_equal(F.cli_in.p, ok);
    assert_int_equal(F.heads, 2);
    assert_int_equal(F.nups, 1);
}

/* Bodies read whole for a hook: a chunked request body is seen decoded
 * and replaced (sent with Content-Length), the response's too; the
 * connection then goes on with the next request. */
static void
test_collect_and_replace_bodies(void **state)
{
    start_with(&cbs_collect, 0);
    F.collect_req = 1024;
    F.collect_resp = 1024;
    F.new_req_body = "REPLACED";
    F.new_resp_body = "new body!";
    say(&F.cli_out, "POST http://o.test/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                    "Host: o.test\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "REPLACED"));
    assert_string_equal(F.seen_req_body, "hello world");
    assert_int_equal(F.seen_req_len, 11);
    assert_string_equal(F.org_in[0].p, "POST /c HTTP/1.1\r\nHost: o.test\r\n"
                                       "Content-Length: 8\r\n\r\nREPLACED");
    origin_says("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nServer: o\r\n\r\nold");
    UNTIL(has(&F.cli_in, "new body!"));
    assert_string_equal(F.seen_resp_body, "old");
    assert_string_equal(F.cli_in.p,
                        "HTTP/1.1 200 OK\r\nServer: o\r\nContent-Length: 9\r\n\r\nnew body!");
    /* keep-alive: the next exchange, bodies untouched this time */
    F.new_req_body = F.new_resp_body = NULL;
    say(&F.cli_out, "POST http://o.test/d HTTP/1.1\r\nContent-Length: 2\r\n\r\nab");
    UNTIL(has(&F.org_in[0], "POST /d"));
    UNTIL(has(&F.org_in[0], "\r\n\r\nab"));
    origin_says("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n");
    UNTIL(has(&F.cli_in, "2\r\nok\r\n0\r\n\r\n"));
    assert_string_equal(F.seen_resp_body, "ok");
    assert_int_equal(F.nups, 1);
}

/* A body over the hook's max is never buffered whole: it passes as it came
 * and the hook hears it was too large. */
static void
test_collect_over_max_streams(void **state)
{
    start_with(&cbs_collect, 0);
    F.collect_req = 16;
    F.new_req_body = "never";
    char big[8193];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    say(&F.cli_out, "POST http://o.test/u HTTP/1.1\r\nContent-Length: 16384\r\n\r\n");
    say(&F.cli_out, big);
    UNTIL(F.seen_req_len == -1 && F.nups == 1);
    say(&F.cli_out, big);
    say(&F.cli_out, "x");
    UNTIL(F.org_in[0].len >= 16384);
    assert_false(has(&F.org_in[0], "never"));
    assert_true(has(&F.org_in[0], "Content-Length: 16384\r\n"));
    assert_true(has(&F.org_in[0], "\r\n\r\nxxxx"));
    assert_int_equal(F.org_in[0].len - (size_t)(strstr(F.org_in[0].p, "\r\n\r\n") + 4 -
                                                 F.org_in[0].p),
                     16384);
    origin_says("HTTP/1.1 204 No Content\r\n\r\n");
    UNTIL(has(&F.cli_in, "204"));
}

/* Three requests at once on one connection: one at a time upstream, each
 * after the response before it, all over the same upstream. */
static void
test_pipelined(void **state)
{
    static const char r1[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1";
    static const char r2[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n2\r\n0\r\n\r\n";
    static const char r3[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\n3";

    start();
    say(&F.cli_out, "GET http://o.test/1 HTTP/1.1\r\n\r\nGET http://o.test/2 HTTP/1.1\r\n\r\n"
                    "GET http://o.test/3 HTTP/1.1\r\nConnection: close\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    settle();
    assert_string_equal(F.org_in[0].p, "GET /1 HTTP/1.1\r\nHost: o.test\r\n\r\n");
    origin_says(r1);
    UNTIL(has(&F.org_in[0], "GET /2"));
    settle();
    assert_false(has(&F.org_in[0], "GET /3"));
    origin_says(r2);
    UNTIL(has(&F.org_in[0], "GET /3"));
    origin_says(r3);
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "done");
    UNTIL(F.cli_in.eof);
    {
        char want[256];

        /* The last request said close: its answer says so too. */
        snprintf(want, sizeof(want), "%s%s%s", r1, r2,
                 "HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\nConnection: close\r\n\r\n3");
        assert_string_equal(F.cli_in.p, want);
    }
    assert_int_equal(F.nups, 1);
    assert_int_equal(F.heads, 3);
}

/* HEAD, 204 and 304 have no body whatever their headers say, and the
 * connection goes on right after their heads. */
static void
test_no_body_responses(void **state)
{
    static const char *const reqs[] = {
        "HEAD http://o.test/h HTTP/1.1\r\n\r\n",
        "GET http://o.test/204 HTTP/1.1\r\n\r\n",
        "GET http://o.test/304 HTTP/1.1\r\nIf-None-Match: \"x\"\r\n\r\n",
    };
    static const char *const resps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 50\r\n\r\n",
    };
    size_t got = 0;

    start();
    for (int i = 0; i < 3; i++) {
        say(&F.cli_out, reqs[i]);
        UNTIL(F.heads == i + 1 && F.nups == 1 && has(&F.org_in[0], F.last_path));
        origin_says(resps[i]);
        got += strlen(resps[i]);
        UNTIL(F.cli_in.len == got);
        assert_string_equal(F.cli_in.p + got - strlen(resps[i]), resps[i]);
    }
    settle();
    assert_int_equal(F.done, 0);
    assert_int_equal(F.nups, 1);
}

/* A local answer that closes, byte for byte as the proxy's own; then a
 * keep-alive one (a hook's 204) whose request body is dropped. */
static void
test_local_answer(void **state)
{
    F.policy = RESPOND;
    F.status = 403;
    F.reason = "Forbidden";
    F.close = 1;
    start();
    say(&F.cli_out, "GET http://blocked.test/ HTTP/1.1\r\n\r\n");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
                                    "Content-Length: 10\r\nConnection: close\r\n\r\nForbidden\n");
    assert_int_equal(F.done, 1);
    assert_string_equal(F.done_reason, "Forbidden");
    assert_int_equal(F.nups, 0);
}

static void
test_local_keep_alive(void **state)
{
    F.policy = RESPOND;
    F.status = 204;
    F.reason = "No Content";
    start();
    say(&F.cli_out, "POST http://ads.test/x HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234");
    UNTIL(has(&F.cli_in, "\r\n\r\n"));
    assert_string_equal(F.cli_in.p, "HTTP/1.1 204 No Content\r\n\r\n");
    /* The rest of the body is dropped; the next request is read. */
    F.policy = FORWARD;
    say(&F.cli_out, "56789GET http://o.test/next HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    assert_string_equal(F.org_in[0].p, "GET /next HTTP/1.1\r\nHost: o.test\r\n\r\n");
    assert_int_equal(F.heads, 2);
    assert_int_equal(F.done, 0);
}

/* The owner sees a request the rules refuse and may answer first (the
 * proxy's 407 comes before its 400). */
static void
test_refused_answered_by_owner(void **state)
{
    F.policy = RESPOND;
    F.status = 407;
    F.reason = "Proxy Authentication Required";
    F.extra = "Proxy-Authenticate: Basic realm=\"chute\"\r\n";
    F.close = 1;
    start();
    say(&F.cli_out, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    UNTIL(F.cli_in.eof);
    assert_int_equal(F.last_refused, 400);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 407 Proxy Authentication Required\r\n"
                                    "Content-Type: text/plain\r\nContent-Length: 30\r\n"
                                    "Connection: close\r\nProxy-Authenticate: Basic realm=\"chute\"\r\n"
                                    "\r\nProxy Authentication Required\n");
    assert_string_equal(F.done_reason, "Proxy Authentication Required");
}

static void
test_bad_heads(void **state)
{
    static const char bad[] = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                              "Content-Length: 12\r\nConnection: close\r\n\r\nBad Request\n";
    char *big;

    start();
    say(&F.cli_out, "HELLO\r\n\r\n");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, bad);
    assert_string_equal(F.done_reason, "Bad Request");
    assert_int_equal(F.heads, 0);
    close(F.cli);
    acc_free(&F.cli_in);
    acc_free(&F.cli_out);

    /* A head over 64 KiB: 431. */
    start();
    say(&F.cli_out, "GET http://o.test/ HTTP/1.1\r\nX-Big: ");
    big = malloc(100000);
    memset(big, 'a', 100000);
    acc_put(&F.cli_out, big, 100000);
    free(big);
    say(&F.cli_out, "\r\n\r\n");
    UNTIL(F.done == 2);
    assert_string_equal(F.done_reason, "Request Header Fields Too Large");
    UNTIL(F.cli_in.eof || has(&F.cli_in, "Large\n"));
    assert_string_equal(F.cli_in.p, "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                    "Content-Type: text/plain\r\nContent-Length: 32\r\n"
                                    "Connection: close\r\n\r\nRequest Header Fields Too Large\n");
    close(F.cli);
    acc_free(&F.cli_in);
    acc_free(&F.cli_out);

    /* The proxy's own refusal of a target: 400 (the hook answers it). */
    start();
    say(&F.cli_out, "CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, bad);
    assert_int_equal(F.nups, 0);
}

/* A bad head after a whole exchange on a keep-alive connection is
 * answered too. */
static void
test_bad_head_after_exchange(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/1 HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1");
    UNTIL(has(&F.cli_in, "\r\n\r\n1"));
    say(&F.cli_out, "GET http://o.test/2 HTTP/1.1\r\nBad Header\r\n\r\n");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1"
                                    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n"
                                    "Content-Length: 12\r\nConnection: close\r\n\r\nBad Request\n");
    assert_string_equal(F.done_reason, "Bad Request");
    UNTIL(F.org_in[0].eof);
}

/* A head trickled in one byte per loop iteration still parses once. */
static void
test_trickled_head(void **state)
{
    static const char req[] = "GET http://o.test/slow HTTP/1.1\r\nHost: o.test\r\n\r\n";

    start();
    for (size_t i = 0; i < sizeof(req) - 1; i++) {
        acc_put(&F.cli_out, req + i, 1);
        pump();
        pump();
    }
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    assert_string_equal(F.org_in[0].p, "GET /slow HTTP/1.1\r\nHost: o.test\r\n\r\n");
    assert_int_equal(F.heads, 1);
}

static void
test_upstream_closes_mid_body(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/cut HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
    UNTIL(has(&F.cli_in, "0123456789"));
    shutdown(F.org[0], SHUT_WR);
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "upstream broke the response");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
}

static void
test_upstream_closes_before_response(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/none HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 200 O"); /* not even a whole head */
    settle();
    shutdown(F.org[0], SHUT_WR);
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
                                    "Content-Length: 12\r\nConnection: close\r\n\r\nBad Gateway\n");
    assert_string_equal(F.done_reason, "Bad Gateway");
}

/* A response with no framing runs until the origin closes, and so does
 * the client connection. */
static void
test_until_close(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/eof HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 200 OK\r\n\r\nall of it");
    UNTIL(has(&F.cli_in, "all of it"));
    assert_int_equal(F.done, 0);
    shutdown(F.org[0], SHUT_WR);
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 200 OK\r\n\r\nall of it");
    assert_string_equal(F.done_reason, "done");
}

/* Expect: 100-continue: the interim head reaches the client before the
 * body is sent; the final one follows. */
static void
test_interim(void **state)
{
    start();
    say(&F.cli_out, "PUT http://o.test/f HTTP/1.1\r\nContent-Length: 4\r\n"
                    "Expect: 100-continue\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 100 Continue\r\n\r\n");
    UNTIL(has(&F.cli_in, "100 Continue\r\n\r\n"));
    say(&F.cli_out, "data");
    UNTIL(has(&F.org_in[0], "\r\n\r\ndata"));
    origin_says("HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
    UNTIL(has(&F.cli_in, "201 Created"));
    assert_string_equal(F.cli_in.p, "HTTP/1.1 100 Continue\r\n\r\n"
                                    "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
    settle();
    assert_int_equal(F.done, 0);
}

/* The response ends before the request body did: the client connection
 * closes once the response is out. */
static void
test_response_before_body(void **state)
{
    start();
    say(&F.cli_out, "POST http://o.test/big HTTP/1.1\r\nContent-Length: 1000000\r\n\r\nabc");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "abc"));
    origin_says("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n");
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "done");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n");
}

/* An upstream that says more than its response, or closes while kept, is
 * dropped (on_upstream_end), and the next request gets a new one. */
static void
test_upstream_dropped(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/1 HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1EXTRA");
    UNTIL(F.upstream_ends == 1);
    assert_false(http_h1_conn_has_upstream(F.c));
    UNTIL(F.org_in[0].eof);
    say(&F.cli_out, "GET http://o.test/2 HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 2 && has(&F.org_in[1], "\r\n\r\n"));
    acc_free(&F.org_out);
    origin_says("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2");
    UNTIL(has(&F.cli_in, "\r\n\r\n2"));
    assert_string_equal(F.cli_in.p, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1"
                                    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2");
    /* Kept between requests, it closes: dropped before it is used. */
    settle();
    shutdown(F.org[1], SHUT_WR);
    UNTIL(F.upstream_ends == 2);
    assert_false(http_h1_conn_has_upstream(F.c));
    assert_int_equal(F.done, 0);
}

/* The client sends its request and half-closes: the whole response still
 * reaches it, then the connection ends. */
static void
test_client_half_close(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/h HTTP/1.1\r\n\r\n");
    UNTIL(F.cli_out.off == F.cli_out.len);
    shutdown(F.cli, SHUT_WR);
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    origin_says("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.cli_in.p, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
    assert_string_equal(F.done_reason, "done");
}

static void
test_client_closes_mid_request(void **state)
{
    start();
    say(&F.cli_out, "GET http://o.test/h HTTP/1.1\r\nHost:");
    UNTIL(F.cli_out.off == F.cli_out.len);
    settle();
    close(F.cli);
    F.cli = -1;
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "client closed mid-request");

    /* Mid-body: the proxy answers 502 as it always did. */
    start();
    say(&F.cli_out, "POST http://o.test/p HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "12345"));
    shutdown(F.cli, SHUT_WR);
    UNTIL(F.done == 2);
    assert_string_equal(F.done_reason, "Bad Gateway");
    UNTIL(F.cli_in.eof);
    assert_true(has(&F.cli_in, "HTTP/1.1 502 Bad Gateway\r\n"));
}

/* A body whose chunk framing breaks after the upstream was connected is
 * the client's fault: 400, not the 502 it used to get. */
static void
test_bad_chunked_body(void **state)
{
    start();
    say(&F.cli_out, "POST http://o.test/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "abc"));
    say(&F.cli_out, "zz\r\nnot a chunk\r\n");
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "Bad Request");
    UNTIL(F.cli_in.eof);
    assert_true(has(&F.cli_in, "HTTP/1.1 400 Bad Request\r\n"));
}

/* The decision taken later (an upstream still connecting), and early
 * bytes that came with the upstream go to the client first. */
static void
test_decide_later(void **state)
{
    struct http_h1_upstream up = {0};

    F.policy = LATER;
    start_with(&cbs_no_resp_hook, 0.2);
    say(&F.cli_out, "GET http://o.test/l HTTP/1.1\r\n\r\n");
    UNTIL(F.heads == 1);
    /* Waiting for the owner does not count as idle. */
    {
        double t0 = now();

        while (now() - t0 < 0.4)
            pump();
    }
    assert_int_equal(F.done, 0);
    assert_int_equal(F.nups, 0);
    up.stream = new_upstream();
    up.early = "HTTP/1.1 200 OK\r\n";
    up.early_len = strlen(up.early);
    assert_int_equal(http_h1_conn_forward(F.c, &up), 0);
    assert_int_equal(http_h1_conn_forward(F.c, &up), -1); /* decided already */
    assert_int_equal(http_h1_conn_respond(F.c, 500, "x", NULL, 1), -1);
    UNTIL(has(&F.org_in[0], "\r\n\r\n"));
    origin_says("Content-Length: 2\r\n\r\nok");
    UNTIL(has(&F.cli_in, "ok"));
    assert_string_equal(F.cli_in.p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    /* Then nothing moves: idle. */
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "idle");
}

/* A head trickled one byte at a time, each well inside the idle timeout:
 * the head deadline (the idle timeout here, 0.3 s) still ends it. */
static void
test_head_deadline(void **state)
{
    static const char head[] = "GET http://o.test/slow HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaa\r\n";
    double t0;

    start_with(&cbs_no_resp_hook, 0.3);
    t0 = now();
    for (size_t i = 0; i < sizeof(head) - 1 && F.done == 0; i++) {
        double t1 = now();

        acc_put(&F.cli_out, head + i, 1);
        while (now() - t1 < 0.1)
            pump();
    }
    UNTIL(F.done == 1);
    assert_string_equal(F.done_reason, "head timeout");
    assert_true(now() - t0 < 1.0);
    assert_int_equal(F.heads, 0);
}

/* Misuse is refused and changes nothing. */
static void
test_forward_refusals(void **state)
{
    struct http_h1_upstream none = {0};

    F.policy = LATER;
    start();
    assert_int_equal(http_h1_conn_forward(F.c, NULL), -1); /* no request yet */
    assert_int_equal(http_h1_conn_drop_upstream(F.c), -1);
    say(&F.cli_out, "GET http://o.test/ HTTP/1.1\r\n\r\n");
    UNTIL(F.heads == 1);
    assert_int_equal(http_h1_conn_forward(F.c, NULL), -1); /* nothing to keep */
    assert_int_equal(http_h1_conn_forward(F.c, &none), -1);
    assert_int_equal(http_h1_conn_drop_upstream(F.c), 0);
    assert_int_equal(http_h1_conn_respond(F.c, 502, "Bad Gateway", NULL, 1), 0);
    UNTIL(F.cli_in.eof);
    assert_string_equal(F.done_reason, "Bad Gateway");
}

/* CONNECT: the client stream comes back with what followed the head. */
static void
test_connect_release(void **state)
{
    char b[64];
    ssize_t n;

    F.policy = RELEASE;
    start();
    say(&F.cli_out, "CONNECT o.test:443 HTTP/1.1\r\nHost: o.test:443\r\n\r\n\x16\x03\x01");
    UNTIL(F.released != NULL);
    assert_true(F.last_connect);
    assert_int_equal(F.rest.len, 3);
    assert_memory_equal(F.rest.ptr, "\x16\x03\x01", 3);
    http_h1_conn_free(F.c);
    F.c = NULL;
    /* The stream is the owner's, and still open. */
    assert_int_equal(io_write(F.released, S("HTTP/1.1 200 Connection established\r\n\r\n")), 39);
    UNTIL(has(&F.cli_in, "established"));
    assert_false(F.cli_in.eof);
    n = io_read(F.released, b, sizeof(b));
    assert_int_equal(n, -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(F.done, 0);
}

/* Hooks edit both heads; the bodies are untouched. */
static void
test_hook_edits(void **state)
{
    F.edit_req = F.edit_resp = 1;
    start_with(&cbs, 0);
    say(&F.cli_out, "GET http://o.test/e HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    assert_string_equal(F.org_in[0].p, "GET /e HTTP/1.1\r\nHost: o.test\r\nX-Hook: req\r\n\r\n");
    origin_says("HTTP/1.1 200 OK\r\nServer: o\r\nContent-Length: 4\r\n\r\nbody");
    UNTIL(has(&F.cli_in, "body"));
    assert_string_equal(F.cli_in.p,
                        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Hook: resp\r\n\r\nbody");
    assert_int_equal(F.resp_heads, 1);
    assert_int_equal(F.down_count, F.cli_in.len);
}

/* A client that reads nothing while the origin sends 8 MB: the origin is
 * stopped by back-pressure, the driver's memory stays at its buffers, and
 * once the client reads, every byte arrives in order. */
static void
test_slow_reader(void **state)
{
    const size_t n = 8 << 20;
    char *body = pattern(n, 7), head[80];
    int hl = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
    uint64_t sent;
    size_t held;
    int reads;

    use_shims = 1;
    start();
    say(&F.cli_out, "GET http://o.test/big HTTP/1.1\r\n\r\n");
    UNTIL(F.nups == 1 && has(&F.org_in[0], "\r\n\r\n"));
    F.cli_paused = 1;
    acc_put(&F.org_out, head, (size_t)hl);
    acc_put(&F.org_out, body, n);
    settle();
    sent = F.org_sent;
    held = http_h1_conn_memory(F.c);
    /* What left the origin sits in two socket buffers and one of the
     * driver's (the kernel's own bookkeeping lets a unix socket hold up to
     * a few times SO_SNDBUF): far from the 8 MB sent. */
    assert_true(sent <= IN_FLIGHT_MAX);
    assert_true(held <= 2 * (HTTP_MAX_HEAD + 16384) + MEM_ARENA_CHUNK);
    reads = shims[1]->reads + shims[1]->readables;
    settle();
    assert_int_equal(F.org_sent, sent); /* stalled, not crawling */
    assert_int_equal(shims[1]->reads + shims[1]->readables, reads); /* and not polled */
    F.cli_paused = 0;
    UNTIL(F.cli_in.len == (size_t)hl + n);
    assert_memory_equal(F.cli_in.p, head, (size_t)hl);
    assert_memory_equal(F.cli_in.p + hl, body, n);
    assert_true(http_h1_conn_memory(F.c) <= held);
    free(body);
}

/* The same the other way: an upload to an origin that reads nothing. */
static void
test_slow_origin(void **state)
{
    const size_t n = 8 << 20;
    char *body = pattern(n, 9), head[96];
    int hl = snprintf(head, sizeof(head),
                      "PUT http://o.test/up HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", n);
    size_t before;
    int reads;

    use_shims = 1;
    start();
    acc_put(&F.cli_out, head, (size_t)hl);
    acc_put(&F.cli_out, body, n);
    UNTIL(F.nups == 1);
    /* The origin stops reading: its socket is out of the pump a while. */
    F.nups = 0;
    settle();
    before = F.cli_out.off;
    assert_true(before <= IN_FLIGHT_MAX);
    assert_true(http_h1_conn_memory(F.c) <= 2 * (HTTP_MAX_HEAD + 16384) + MEM_ARENA_CHUNK);
    reads = shims[0]->reads + shims[0]->readables;
    settle();
    assert_int_equal(F.cli_out.off, before); /* stalled */
    assert_int_equal(shims[0]->reads + shims[0]->readables, reads);
    F.nups = 1;
    UNTIL(F.org_in[0].len >= n);
    assert_memory_equal(F.org_in[0].p + F.org_in[0].len - n, body, n);
    free(body);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_chunked_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collect_and_replace_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collect_over_max_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_body_responses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_answered_by_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_head_after_exchange, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trickled_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_closes_mid_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_closes_before_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_until_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_before_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_half_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_closes_mid_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decide_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hook_edits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_origin, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
