#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "../loop.h"
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../peer.h"
#include "flow/flow.h"
#include "outbound/proxy.h"
#include "io/io.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the loop and the handshake's result ---- */

static struct ev_loop *loop;

struct result {
    int done, err;
    const char *why;
    uint8_t extra[512];
    size_t extra_len;
};

static void
on_result(void *arg, int err, const char *why, const uint8_t *extra, size_t extra_len)
{
    struct result *r = arg;

    r->done++;
    r->err = err;
    r->why = why;
    assert_true(extra_len <= sizeof(r->extra));
    if (extra_len > 0)
        memcpy(r->extra, extra, extra_len);
    r->extra_len = extra_len;
}

/* Runs the loop until |*flag| is set, or |secs| pass. */
static void
run_until(int *flag, double secs)
{
    loop_run_until(loop, flag, secs);
}

static void
run_for(double secs)
{
    int never = 0;

    run_until(&never, secs);
}

static void
nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void
pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
}

static struct flow_addr
host(const char *h, uint16_t port)
{
    struct flow_addr a;

    assert_int_equal(flow_addr_from_host(&a, h, strlen(h), port), 0);
    return a;
}

static struct outbound_proxy
proxy(const char *user, const char *pass)
{
    struct outbound_proxy p;

    memset(&p, 0, sizeof(p));
    snprintf(p.user, sizeof(p.user), "%s", user);
    snprintf(p.pass, sizeof(p.pass), "%s", pass);
    return p;
}

/* ---- a scripted fake proxy on the other end of a socketpair ---- */

struct step {
    const char *expect; /* what the client must send next */
    size_t expect_len;
    const char *reply;  /* NULL: say nothing */
    size_t reply_len;
    int split;          /* send the reply in two parts, 5 ms apart */
};

#define STEP(e, r) {e, sizeof(e) - 1, r, sizeof(r) - 1, 0}
#define STEP_SPLIT(e, r) {e, sizeof(e) - 1, r, sizeof(r) - 1, 1}
#define STEP_QUIET(e) {e, sizeof(e) - 1, NULL, 0, 0}

struct fake {
    ev_io w;
    ev_timer rest;
    int fd;
    const struct step *steps;
    size_t nsteps, cur;
    int close_after;     /* close once the script is done */
    int mismatch, eof;
    const char *rest_ptr;
    size_t rest_len;
    uint8_t buf[4096];
    size_t len;
};

static void
fake_send(struct fake *f, const char *p, size_t n)
{
    assert_int_equal(send(f->fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void
fake_close(struct fake *f)
{
    ev_io_stop(loop, &f->w);
    ev_timer_stop(loop, &f->rest);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

static void
on_fake_rest(struct ev_loop *l, ev_timer *w, int revents)
{
    struct fake *f = w->data;

    fake_send(f, f->rest_ptr, f->rest_len);
    if (f->cur == f->nsteps && f->close_after)
        fake_close(f);
}

static void
on_fake(struct ev_loop *l, ev_io *w, int revents)
{
    struct fake *f = w->data;
    ssize_t n = recv(f->fd, f->buf + f->len, sizeof(f->buf) - f->len, 0);

    if (n <= 0) {
        if (n == 0) {
            f->eof = 1;
            ev_io_stop(loop, w);
        }
        return;
    }
    f->len += (size_t)n;
    while (f->cur < f->nsteps && f->len >= f->steps[f->cur].expect_len) {
        const struct step *s = &f->steps[f->cur++];
        if (memcmp(f->buf, s->expect, s->expect_len) != 0)
            f->mismatch = 1;
        memmove(f->buf, f->buf + s->expect_len, f->len - s->expect_len);
        f->len -= s->expect_len;
        if (s->reply == NULL)
            continue;
        if (s->split && s->reply_len > 1) {
            fake_send(f, s->reply, s->reply_len / 2);
            f->rest_ptr = s->reply + s->reply_len / 2;
            f->rest_len = s->reply_len - s->reply_len / 2;
            ev_timer_set(&f->rest, 0.005, 0);
            ev_timer_start(loop, &f->rest);
            return;
        }
        fake_send(f, s->reply, s->reply_len);
    }
    if (f->cur == f->nsteps && f->close_after)
        fake_close(f);
}

static void
fake_start(struct fake *f, int fd, const struct step *steps, size_t nsteps, int close_after)
{
    memset(f, 0, sizeof(*f));
    f->fd = fd;
    f->steps = steps;
    f->nsteps = nsteps;
    f->close_after = close_after;
    ev_io_init(&f->w, on_fake, fd, EV_READ);
    f->w.data = f;
    ev_timer_init(&f->rest, on_fake_rest, 0, 0);
    f->rest.data = f;
    ev_io_start(loop, &f->w);
}

enum proto { SOCKS5, HTTP };

/* One handshake against a script: returns the result, checks that the
 * client sent exactly what the script expected. */
static struct result
against(enum proto proto, const struct outbound_proxy *p, const struct flow_addr *dst,
        const struct step *steps, size_t nsteps, int close_after)
{
    struct result r = {0};
    struct fake f;
    int sv[2];

    pair(sv);
    fake_start(&f, sv[1], steps, nsteps, close_after);
    struct io_stream *s = io_fd_new(loop, sv[0]);
    struct outbound_hs *h = proto == SOCKS5 ? outbound_socks5_connect(s, p, dst, on_result, &r)
                                            : outbound_http_connect(s, p, dst, on_result, &r);
    assert_non_null(h);
    assert_int_equal(r.done, 0); /* never from inside the start call */
    run_until(&r.done, 2.0);
    assert_int_equal(r.done, 1);
    assert_int_equal(f.mismatch, 0);
    assert_null(s->on_drain); /* given back */
    run_for(0.01);            /* late events must not call back again */
    assert_int_equal(r.done, 1);
    io_close(s, 0);
    fake_close(&f);
    return r;
}

/* ---- SOCKS5 ---- */

#define GREET "\x05\x01\x00"
#define GREET_AUTH "\x05\x02\x00\x02"
#define REQ_NAME "\x05\x01\x00\x03\x0b" "example.com\x01\xbb"
#define REP_OK4 "\x05\x00\x00\x01\x0a\x00\x00\x01\x00\x50"

static void
test_socks5_ok_with_extra(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);
    const struct step steps[] = {STEP(GREET, "\x05\x00"), STEP(REQ_NAME, REP_OK4 "EARLY")};
    struct result r = against(SOCKS5, &p, &dst, steps, N(steps), 0);

    assert_int_equal(r.err, 0);
    assert_null(r.why);
    assert_int_equal(r.extra_len, 5);
    assert_memory_equal(r.extra, "EARLY", 5);
}

static void
test_socks5_auth_split_replies(void **state)
{
    struct outbound_proxy p = proxy("user", "pass");
    struct flow_addr dst = host("2001:db8::5", 8080);
    const struct step steps[] = {
        STEP_SPLIT(GREET_AUTH, "\x05\x02"),
        STEP_SPLIT("\x01\x04user\x04pass", "\x01\x00"),
        STEP_SPLIT("\x05\x01\x00\x04\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x05\x1f\x90",
                   "\x05\x00\x00\x03\x09proxy.lan\x12\x34"),
    };
    struct result r = against(SOCKS5, &p, &dst, steps, N(steps), 0);

    assert_int_equal(r.err, 0);
    assert_int_equal(r.extra_len, 0);
}

static void
test_socks5_auth_offered_not_needed(void **state)
{
    struct outbound_proxy p = proxy("user", "pass");
    struct flow_addr dst = host("example.com", 443);
    const struct step steps[] = {STEP(GREET_AUTH, "\x05\x00"), STEP(REQ_NAME, REP_OK4)};
    struct result r = against(SOCKS5, &p, &dst, steps, N(steps), 0);

    assert_int_equal(r.err, 0);
}

static void
test_socks5_rep_codes(void **state)
{
    static const struct {
        int err;
        const char *why;
    } want[] = {
        {ECONNABORTED, "socks5: general failure"},
        {EACCES, "socks5: not allowed by ruleset"},
        {ENETUNREACH, "socks5: network unreachable"},
        {EHOSTUNREACH, "socks5: host unreachable"},
        {ECONNREFUSED, "socks5: connection refused by proxy's target"},
        {ETIMEDOUT, "socks5: TTL expired"},
        {EPROTO, "socks5: command not supported"},
        {EPROTO, "socks5: address type not supported"},
    };
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);

    for (int rep = 1; rep <= 8; rep++) {
        char reply[] = "\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00";
        reply[1] = (char)rep;
        const struct step steps[] = {STEP(GREET, "\x05\x00"),
                                     {REQ_NAME, sizeof(REQ_NAME) - 1, reply, 10, 0}};
        struct result r = against(SOCKS5, &p, &dst, steps, N(steps), 0);
        assert_int_equal(r.err, want[rep - 1].err);
        assert_string_equal(r.why, want[rep - 1].why);

        /* A server that sends only "05 REP" and closes: still named. */
        const struct step short_steps[] = {STEP(GREET, "\x05\x00"),
                                           {REQ_NAME, sizeof(REQ_NAME) - 1, reply, 2, 0}};
        r = against(SOCKS5, &p, &dst, short_steps, N(short_steps), 1);
        assert_int_equal(r.err, want[rep - 1].err);
        assert_string_equal(r.why, want[rep - 1].why);
    }
    const struct step unknown[] = {STEP(GREET, "\x05\x00"),
                                   STEP(REQ_NAME, "\x05\x42\x00\x01\0\0\0\0\0\0")};
    struct result r = against(SOCKS5, &p, &dst, unknown, N(unknown), 0);
    assert_int_equal(r.err, EPROTO);
}

static void
test_socks5_refusals(void **state)
{
    struct outbound_proxy anon = proxy("", ""), auth = proxy("user", "bad");
    struct flow_addr dst = host("example.com", 443);
    struct result r;

    const struct step bad_pass[] = {STEP(GREET_AUTH, "\x05\x02"),
                                    STEP("\x01\x04user\x03" "bad", "\x01\x01")};
    r = against(SOCKS5, &auth, &dst, bad_pass, N(bad_pass), 0);
    assert_int_equal(r.err, EACCES);
    assert_string_equal(r.why, "socks5: authentication failed");

    const struct step no_method[] = {STEP(GREET, "\x05\xff")};
    r = against(SOCKS5, &anon, &dst, no_method, N(no_method), 0);
    assert_int_equal(r.err, EACCES);

    const struct step unoffered[] = {STEP(GREET, "\x05\x02")};
    r = against(SOCKS5, &anon, &dst, unoffered, N(unoffered), 0);
    assert_int_equal(r.err, EPROTO);

    const struct step not_socks[] = {STEP(GREET, "HTTP/1.1 400 Bad Request\r\n\r\n")};
    r = against(SOCKS5, &anon, &dst, not_socks, N(not_socks), 0);
    assert_int_equal(r.err, EPROTO);

    const struct step bad_reply[] = {STEP(GREET, "\x05\x00"), STEP(REQ_NAME, "\x05\x00\x00\x07")};
    r = against(SOCKS5, &anon, &dst, bad_reply, N(bad_reply), 0);
    assert_int_equal(r.err, EPROTO);

    const struct step eof[] = {STEP_QUIET(GREET)};
    r = against(SOCKS5, &anon, &dst, eof, N(eof), 1);
    assert_int_equal(r.err, ECONNRESET);
    assert_string_equal(r.why, "socks5: proxy closed the connection");
}

/* ---- HTTP CONNECT ---- */

#define CONNECT_REQ "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"

static struct result
http_reply(const char *reply)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);
    const struct step steps[] = {{CONNECT_REQ, sizeof(CONNECT_REQ) - 1, reply, strlen(reply), 1}};

    return against(HTTP, &p, &dst, steps, 1, 1);
}

static void
test_http_ok_with_extra(void **state)
{
    struct result r = http_reply("HTTP/1.1 200 Connection established\r\nProxy-agent: t\r\n\r\nEARLY");

    assert_int_equal(r.err, 0);
    assert_int_equal(r.extra_len, 5);
    assert_memory_equal(r.extra, "EARLY", 5);

    r = http_reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\n\n");
    assert_int_equal(r.err, 0);
    assert_int_equal(r.extra_len, 0);
}

static void
test_http_auth_request(void **state)
{
    struct outbound_proxy p = proxy("user", "pass");
    struct flow_addr dst = host("2001:db8::1", 443);
    const struct step steps[] = {
        STEP_SPLIT("CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n"
                   "Proxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n",
                   "HTTP/1.1 200 OK\r\n\r\n"),
    };
    struct result r = against(HTTP, &p, &dst, steps, N(steps), 0);

    assert_int_equal(r.err, 0);
}

static void
test_http_errors(void **state)
{
    struct result r = http_reply("HTTP/1.1 407 Proxy Authentication Required\r\n"
                                 "Proxy-Authenticate: Basic realm=\"x\"\r\n\r\n");
    assert_int_equal(r.err, EACCES);
    assert_string_equal(r.why, "http: 407 proxy authentication required");

    r = http_reply("HTTP/1.0 401 Unauthorized\r\n\r\n");
    assert_int_equal(r.err, EACCES);
    assert_string_equal(r.why, "http: 401 proxy authentication failed");
    r = http_reply("HTTP/1.1 403 Forbidden\r\n\r\n");
    assert_int_equal(r.err, ECONNREFUSED);
    assert_string_equal(r.why, "http: proxy answered 403");
    r = http_reply("HTTP/1.0 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad");
    assert_int_equal(r.err, ECONNREFUSED);
    assert_string_equal(r.why, "http: proxy answered 502");
    r = http_reply("HTTP/1.1 301 Moved\r\n\r\n");
    assert_int_equal(r.err, ECONNREFUSED);
    assert_string_equal(r.why, "http: proxy answered 301");

    r = http_reply("\x05\x00");
    assert_int_equal(r.err, EPROTO);
    r = http_reply("HTTP/1.1 200 OK\r\nno colon\r\n\r\n");
    assert_int_equal(r.err, EPROTO);

    r = http_reply("HTTP/1.1 200 OK\r\n"); /* closes before the blank line */
    assert_int_equal(r.err, ECONNRESET);
    assert_string_equal(r.why, "http: proxy closed the connection");
}

static void
test_http_unsendable_name(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("x", 80);
    struct result r = {0};
    int sv[2];

    memcpy(dst.name, "a\r\nb", 5);
    dst.name_len = 4;
    pair(sv);
    struct io_stream *s = io_fd_new(loop, sv[0]);
    assert_non_null(outbound_http_connect(s, &p, &dst, on_result, &r));
    assert_int_equal(r.done, 0);
    run_until(&r.done, 1.0);
    assert_int_equal(r.err, EINVAL);
    char buf[8];
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), -1); /* nothing sent */
    io_close(s, 0);
    close(sv[1]);
}

/* ---- start-time failures, cancel ---- */

static void
test_failure_at_start_is_deferred(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);
    struct result r = {0};
    int sv[2];

    pair(sv);
    close(sv[1]); /* the greeting's send fails with EPIPE */
    struct io_stream *s = io_fd_new(loop, sv[0]);
    assert_non_null(outbound_socks5_connect(s, &p, &dst, on_result, &r));
    assert_int_equal(r.done, 0);
    run_until(&r.done, 1.0);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.err, EPIPE);
    io_close(s, 0);

    /* Cancelled before the deferred delivery: never called. */
    memset(&r, 0, sizeof(r));
    pair(sv);
    close(sv[1]);
    s = io_fd_new(loop, sv[0]);
    dst.kind = FLOW_ADDR_NONE;
    struct outbound_hs *h = outbound_socks5_connect(s, &p, &dst, on_result, &r);
    outbound_hs_cancel(h);
    run_for(0.02);
    assert_int_equal(r.done, 0);
    io_close(s, 0);
}

static void
mark_drain(void *arg)
{
    (*(int *)arg)++;
}

/* How often |s| calls on_readable within |secs| of read_start: 0 when it
 * holds nothing and its socket is quiet (io.h's promise). Its callbacks
 * are put back afterwards. */
static int
readable_calls(struct io_stream *s, double secs)
{
    void (*on_readable)(void *) = s->on_readable, (*on_drain)(void *) = s->on_drain;
    void *arg = s->arg;
    int n = 0;

    io_set_callbacks(s, mark_drain, NULL, &n);
    io_read_start(s);
    run_for(secs);
    io_read_stop(s);
    io_set_callbacks(s, on_readable, on_drain, arg);
    return n;
}

static void
test_cancel_while_waiting(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);
    struct result r = {0};
    struct fake f;
    int sv[2], drained = 0;

    for (int proto = SOCKS5; proto <= HTTP; proto++) {
        const struct step steps[] = {{proto == SOCKS5 ? GREET : CONNECT_REQ,
                                      proto == SOCKS5 ? 3 : sizeof(CONNECT_REQ) - 1, NULL, 0, 0}};
        pair(sv);
        fake_start(&f, sv[1], steps, 1, 0);
        struct io_stream *s = io_fd_new(loop, sv[0]);
        s->on_drain = mark_drain;
        s->arg = &drained;
        struct outbound_hs *h = proto == SOCKS5 ? outbound_socks5_connect(s, &p, &dst, on_result, &r)
                                                : outbound_http_connect(s, &p, &dst, on_result, &r);
        while (f.cur < 1)
            ev_run(loop, EVRUN_ONCE);
        assert_ptr_not_equal(s->on_drain, mark_drain); /* the handshake's now */
        outbound_hs_cancel(h);
        /* Given back cleared (hs.h), reading stopped: the owner sets its own. */
        assert_null(s->on_drain);
        assert_null(s->on_readable);
        assert_null(s->arg);
        fake_send(&f, "\x05\x00", 2); /* a reply after the cancel is ignored */
        run_for(0.02);
        assert_int_equal(r.done, 0);
        /* The stream is intact and readable by its owner. */
        char buf[4];
        assert_int_equal(io_read(s, buf, sizeof(buf)), 2);
        io_close(s, 0);
        fake_close(&f);
    }
}

/* A loopback listener and a connected pair through it. */
static int
listener(uint16_t *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(fd, 16), 0);
    getsockname(fd, (struct sockaddr *)&sin, &len);
    *port = ntohs(sin.sin_port);
    return fd;
}

static int
connect_to(uint16_t port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        return -1;
    }
    nonblock(fd);
    return fd;
}

/* ---- Trojan ---- */

#define ABC_SHA224 "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"
#define TROJAN_HDR ABC_SHA224 "\r\n\x01\x03\x0b" "example.com\x01\xbb\r\n"

static void
test_trojan_header_with_first_write(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);
    uint8_t buf[512];
    int sv[2], drained = 0;

    outbound_trojan_setup(&p, "abc");
    assert_string_equal(p.trojan_hash, ABC_SHA224);

    pair(sv);
    struct io_stream *t = outbound_trojan_stream(io_fd_new(loop, sv[0]), &p, &dst);
    assert_non_null(t);
    assert_int_equal(io_base_fd(t), sv[0]);
    assert_int_equal(io_splice_fd(t), -1); /* no bare socket: the relay must not splice */
    t->on_drain = mark_drain;
    t->arg = &drained;
    struct iovec iov[2] = {{"GET / ", 6}, {"HTTP/1.1\r\n", 10}};
    assert_int_equal(io_writev(t, iov, 2), 16);
    /* Header and payload arrive as one send. */
    ssize_t n = recv(sv[1], buf, sizeof(buf), 0);
    assert_int_equal(n, sizeof(TROJAN_HDR) - 1 + 16);
    assert_memory_equal(buf, TROJAN_HDR "GET / HTTP/1.1\r\n", (size_t)n);

    /* Later writes are the payload alone; reads come from the inner. */
    assert_int_equal(io_write(t, "more", 4), 4);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), 4);
    run_for(0.03); /* the 10 ms timer must not send the header again */
    errno = 0;
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(send(sv[1], "resp", 4, 0), 4);
    assert_int_equal(io_read(t, buf, sizeof(buf)), 4);
    assert_memory_equal(buf, "resp", 4);
    assert_int_equal(readable_calls(t, 0.01), 0); /* nothing held */
    assert_int_equal(send(sv[1], "more", 4, 0), 4);
    assert_true(readable_calls(t, 0.01) > 0); /* the inner stream's readiness passes up */
    assert_int_equal(io_read(t, buf, sizeof(buf)), 4);
    assert_int_equal(t->ops->shutdown(t), 0);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), 0);
    io_close(t, 0);
    close(sv[1]);
}

static void
test_trojan_header_alone_after_delay(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("10.0.0.1", 80);
    uint8_t buf[512];
    int sv[2];
    const char want[] = ABC_SHA224 "\r\n\x01\x01\x0a\x00\x00\x01\x00\x50\r\n";

    outbound_trojan_setup(&p, "abc");
    pair(sv);
    ev_now_update(loop); /* the 10 ms count from now, not the last wakeup */
    struct io_stream *t = outbound_trojan_stream(io_fd_new(loop, sv[0]), &p, &dst);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), -1); /* not at once */
    run_for(0.03);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), sizeof(want) - 1);
    assert_memory_equal(buf, want, sizeof(want) - 1);
    assert_int_equal(io_write(t, "x", 1), 1);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), 1);
    io_close(t, 1);
    close(sv[1]);

    /* A shutdown before any write still sends the header first. */
    pair(sv);
    t = outbound_trojan_stream(io_fd_new(loop, sv[0]), &p, &dst);
    assert_int_equal(t->ops->shutdown(t), 0);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), sizeof(want) - 1);
    assert_int_equal(recv(sv[1], buf, sizeof(buf), 0), 0);
    io_close(t, 0);
    close(sv[1]);
}

/* ---- a stingy stream: back-pressure on every write ---- */

/* Takes at most 3 bytes per writev, then says EAGAIN until its on_drain
 * (from a zero timer) has run; |fail| makes the next writev fail with EPIPE.
 * Exercises the paths a TLS stream with a full buffer would take. */
struct drip {
    struct io_stream s;
    int fd;
    ev_io rd;
    ev_timer kick;
    int blocked, fail, writes;
};

static void
on_drip_kick(struct ev_loop *l, ev_timer *w, int revents)
{
    struct drip *d = w->data;

    d->blocked = 0;
    if (d->s.on_drain != NULL)
        d->s.on_drain(d->s.arg);
}

static void
on_drip_readable(struct ev_loop *l, ev_io *w, int revents)
{
    struct drip *d = w->data;

    if (d->s.on_readable != NULL)
        d->s.on_readable(d->s.arg);
}

static ssize_t
drip_read(struct io_stream *s, void *buf, size_t len)
{
    return recv(((struct drip *)s)->fd, buf, len, 0);
}

static ssize_t
drip_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct drip *d = (struct drip *)s;
    uint8_t buf[3];
    size_t n = 0;

    if (d->fail) {
        errno = EPIPE;
        return -1;
    }
    if (d->blocked) {
        errno = EAGAIN;
        return -1;
    }
    for (int i = 0; i < iovcnt && n < sizeof(buf); i++) {
        size_t k = iov[i].iov_len < sizeof(buf) - n ? iov[i].iov_len : sizeof(buf) - n;
        memcpy(buf + n, iov[i].iov_base, k);
        n += k;
    }
    if (n == 0)
        return 0;
    assert_int_equal(send(d->fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
    d->writes++;
    d->blocked = 1;
    ev_timer_set(&d->kick, 0, 0);
    ev_timer_start(loop, &d->kick);
    return (ssize_t)n;
}

static int
drip_shutdown(struct io_stream *s)
{
    return shutdown(((struct drip *)s)->fd, SHUT_WR);
}

static void
drip_read_start(struct io_stream *s)
{
    ev_io_start(loop, &((struct drip *)s)->rd);
}

static void
drip_read_stop(struct io_stream *s)
{
    ev_io_stop(loop, &((struct drip *)s)->rd);
}

static void
drip_close(struct io_stream *s, int reset)
{
    struct drip *d = (struct drip *)s;

    ev_timer_stop(loop, &d->kick);
    ev_io_stop(loop, &d->rd);
    close(d->fd);
    free(d);
}

static const struct io_stream_ops drip_ops = {
    .name = "drip",
    .read = drip_read,
    .writev = drip_writev,
    .shutdown = drip_shutdown,
    .read_start = drip_read_start,
    .read_stop = drip_read_stop,
    .close = drip_close,
};

static struct drip *
drip_new(int fd)
{
    struct drip *d = calloc(1, sizeof(*d));

    d->s = (struct io_stream){.ops = &drip_ops, .loop = loop};
    d->fd = fd;
    ev_io_init(&d->rd, on_drip_readable, fd, EV_READ);
    d->rd.data = d;
    ev_timer_init(&d->kick, on_drip_kick, 0, 0);
    d->kick.data = d;
    return d;
}

static void
test_handshake_over_stingy_stream(void **state)
{
    struct outbound_proxy p = proxy("user", "pass");
    struct flow_addr dst = host("example.com", 443);
    const struct step steps[] = {
        STEP(GREET_AUTH, "\x05\x02"),
        STEP("\x01\x04user\x04pass", "\x01\x00"),
        STEP(REQ_NAME, REP_OK4 "EARLY"),
    };
    struct result r = {0};
    struct fake f;
    int sv[2];

    pair(sv);
    fake_start(&f, sv[1], steps, N(steps), 0);
    struct drip *d = drip_new(sv[0]);
    assert_non_null(outbound_socks5_connect(&d->s, &p, &dst, on_result, &r));
    run_until(&r.done, 2.0);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.extra_len, 5);
    assert_int_equal(f.mismatch, 0);
    assert_true(d->writes > 10); /* it really went 3 bytes at a time */
    io_close(&d->s, 0);
    fake_close(&f);

    /* A send that fails in the background ends the handshake. */
    memset(&r, 0, sizeof(r));
    const struct step quiet[] = {STEP_QUIET("\x05")};
    pair(sv);
    fake_start(&f, sv[1], quiet, N(quiet), 0);
    d = drip_new(sv[0]);
    outbound_http_connect(&d->s, &p, &dst, on_result, &r);
    d->fail = 1;
    run_until(&r.done, 2.0);
    assert_int_equal(r.err, EPIPE);
    assert_string_equal(r.why, "http: connection to the proxy failed");
    io_close(&d->s, 0);
    fake_close(&f);
}

struct writer {
    struct io_stream *s;
    const char *p;
    size_t left;
};

static void
on_writer_drain(void *arg)
{
    struct writer *w = arg;

    while (w->left > 0) {
        ssize_t n = io_write(w->s, w->p, w->left);
        if (n < 0) {
            assert_int_equal(errno, EAGAIN);
            return;
        }
        w->p += n;
        w->left -= (size_t)n;
    }
}

static size_t
drain_peer(int fd, uint8_t *buf, size_t cap, size_t want)
{
    size_t got = 0;

    for (int i = 0; i < 200 && got < want; i++) {
        run_for(0.002);
        ssize_t n = recv(fd, buf + got, cap - got, 0);
        if (n > 0)
            got += (size_t)n;
    }
    return got;
}

static void
test_trojan_over_stingy_stream(void **state)
{
    struct outbound_proxy p = proxy("", "");
    struct flow_addr dst = host("example.com", 443);
    const char want[] = TROJAN_HDR "payload";
    uint8_t buf[512];
    int sv[2];

    outbound_trojan_setup(&p, "abc");
    pair(sv);
    struct drip *d = drip_new(sv[0]);
    struct io_stream *t = outbound_trojan_stream(&d->s, &p, &dst);
    struct writer w = {t, "payload", 7};
    t->on_drain = on_writer_drain;
    t->arg = &w;
    on_writer_drain(&w); /* header bytes first, then EAGAIN */
    assert_int_equal(w.left, 7);
    assert_int_equal(drain_peer(sv[1], buf, sizeof(buf), sizeof(want) - 1), sizeof(want) - 1);
    assert_memory_equal(buf, want, sizeof(want) - 1);
    assert_int_equal(w.left, 0);
    io_close(t, 0);
    close(sv[1]);

    /* Header-only after the delay, pushed through every drain. */
    pair(sv);
    d = drip_new(sv[0]);
    t = outbound_trojan_stream(&d->s, &p, &dst);
    assert_int_equal(drain_peer(sv[1], buf, sizeof(buf), sizeof(TROJAN_HDR) - 1),
                     sizeof(TROJAN_HDR) - 1);
    assert_memory_equal(buf, TROJAN_HDR, sizeof(TROJAN_HDR) - 1);
    io_close(t, 0);
    close(sv[1]);

    /* The header-only send fails: the error comes back on the next call. */
    int drained = 0;
    pair(sv);
    d = drip_new(sv[0]);
    d->fail = 1;
    ev_now_update(loop);
    t = outbound_trojan_stream(&d->s, &p, &dst);
    t->on_drain = mark_drain;
    t->arg = &drained;
    run_for(0.03);
    assert_int_equal(drained, 1);
    errno = 0;
    assert_int_equal(io_write(t, "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(io_read(t, buf, 1), -1);
    assert_int_equal(errno, EPIPE);
    io_close(t, 0);
    close(sv[1]);
}

/* ---- interop with real proxies ---- */

/* Connections live in a fixed table so echo_stop can close what the
 * proxies left open (no leaks for ASan to report). */
struct echo_conn {
    ev_io w;
    int fd;
};

static struct echo_conn echo_conns[32];
static ev_io echo_accept_w;

static void
echo_drop(struct echo_conn *c)
{
    ev_io_stop(loop, &c->w);
    close(c->fd);
    c->fd = -1;
}

static void
on_echo(struct ev_loop *l, ev_io *w, int revents)
{
    struct echo_conn *c = w->data;
    char buf[4096];
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

    if (n > 0)
        assert_int_equal(send(c->fd, buf, (size_t)n, MSG_NOSIGNAL), n);
    else if (n == 0 || errno != EAGAIN)
        echo_drop(c);
}

static void
on_echo_accept(struct ev_loop *l, ev_io *w, int revents)
{
    int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (fd < 0)
        return;
    for (size_t i = 0; i < N(echo_conns); i++) {
        struct echo_conn *c = &echo_conns[i];
        if (c->fd >= 0)
            continue;
        c->fd = fd;
        ev_io_init(&c->w, on_echo, fd, EV_READ);
        c->w.data = c;
        ev_io_start(loop, &c->w);
        return;
    }
    close(fd);
}

static uint16_t
echo_start(void)
{
    uint16_t port;
    int fd = listener(&port);

    nonblock(fd);
    for (size_t i = 0; i < N(echo_conns); i++)
        echo_conns[i].fd = -1;
    ev_io_init(&echo_accept_w, on_echo_accept, fd, EV_READ);
    ev_io_start(loop, &echo_accept_w);
    return port;
}

static void
echo_stop(void)
{
    ev_io_stop(loop, &echo_accept_w);
    close(echo_accept_w.fd);
    for (size_t i = 0; i < N(echo_conns); i++)
        if (echo_conns[i].fd >= 0)
            echo_drop(&echo_conns[i]);
}

static uint16_t
free_port(void)
{
    uint16_t port;
    int fd = listener(&port);

    close(fd);
    return port;
}

/* The proxy this test started, and the temp dir for its config: a failed
 * assertion jumps out of the test, so interop_teardown cleans up. */
static pid_t child = -1;
static char tmpdir[64];

static void
reap(void)
{
    if (child > 0) {
        kill(child, SIGTERM);
        waitpid(child, NULL, 0);
    }
    child = -1;
}

static void
spawn(char *const argv[], uint16_t port)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) { /* up to 3 s for it to listen */
        int fd = connect_to(port);
        if (fd >= 0) {
            close(fd);
            child = pid;
            return;
        }
        usleep(10000);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    fail_msg("%s did not start listening on %u", argv[0], port);
}

static int
interop_teardown(void **state)
{
    reap();
    if (ev_is_active(&echo_accept_w))
        echo_stop();
    if (tmpdir[0] != '\0') {
        char conf[128];
        snprintf(conf, sizeof(conf), "%s/tinyproxy.conf", tmpdir);
        unlink(conf);
        rmdir(tmpdir);
        tmpdir[0] = '\0';
    }
    return 0;
}

struct reader {
    struct io_stream *s;
    uint8_t buf[256];
    size_t len, want;
    int done;
};

static void
on_reader(void *arg)
{
    struct reader *r = arg;

    while (r->len < r->want) {
        ssize_t n = io_read(r->s, r->buf + r->len, sizeof(r->buf) - r->len);
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                r->done = 1;
            return;
        }
        r->len += (size_t)n;
    }
    r->done = 1;
}

/* Through the proxy at |port| to the echo server and back. Returns the
 * handshake's result; on success also checks the round trip. */
static struct result
through(enum proto proto, uint16_t port, const struct outbound_proxy *p, uint16_t echo_port)
{
    static const char msg[] = "ping through the proxy";
    struct flow_addr dst = host("127.0.0.1", echo_port);
    struct result res = {0};
    int fd = connect_to(port);

    assert_true(fd >= 0);
    struct io_stream *s = io_fd_new(loop, fd);
    if (proto == SOCKS5)
        outbound_socks5_connect(s, p, &dst, on_result, &res);
    else
        outbound_http_connect(s, p, &dst, on_result, &res);
    run_until(&res.done, 5.0);
    assert_int_equal(res.done, 1);
    if (res.err == 0) {
        struct reader r = {.s = s, .want = sizeof(msg) - 1};
        assert_int_equal(res.extra_len, 0);
        assert_int_equal(io_write(s, msg, sizeof(msg) - 1), sizeof(msg) - 1);
        io_set_callbacks(s, on_reader, NULL, &r);
        io_read_start(s);
        run_until(&r.done, 5.0);
        io_read_stop(s);
        assert_int_equal(r.len, sizeof(msg) - 1);
        assert_memory_equal(r.buf, msg, r.len);
    }
    io_close(s, 0);
    return res;
}

static void
test_interop_microsocks(void **state)
{
    const char *bin = peer_need("microsocks");
    uint16_t echo = echo_start(), port = free_port();
    char ps[8], path[4096];
    snprintf(ps, sizeof(ps), "%u", port);
    snprintf(path, sizeof(path), "%s", bin);

    char *open_argv[] = {path, "-i", "127.0.0.1", "-p", ps, NULL};
    spawn(open_argv, port);
    struct outbound_proxy anon = proxy("", "");
    struct result r = through(SOCKS5, port, &anon, echo);
    assert_int_equal(r.err, 0);
    reap();

    port = free_port();
    snprintf(ps, sizeof(ps), "%u", port);
    char *auth_argv[] = {path, "-i", "127.0.0.1", "-p", ps, "-u", "alice", "-P", "s3cret", NULL};
    spawn(auth_argv, port);
    struct outbound_proxy good = proxy("alice", "s3cret"), bad = proxy("alice", "wrong");
    r = through(SOCKS5, port, &good, echo);
    assert_int_equal(r.err, 0);
    r = through(SOCKS5, port, &bad, echo);
    assert_int_equal(r.err, EACCES);
    r = through(SOCKS5, port, &anon, echo);
    assert_int_equal(r.err, EACCES); /* no acceptable method */
    /* A closed destination port: the proxy's refusal is named. */
    r = through(SOCKS5, port, &good, free_port());
    assert_int_not_equal(r.err, 0);
    /* interop_teardown stops the proxy and the echo server. */
}

static void
tinyproxy(const char *bin, const char *dir, uint16_t port, uint16_t echo, int auth)
{
    char conf[256], path[4096];
    snprintf(conf, sizeof(conf), "%s/tinyproxy.conf", dir);
    FILE *f = fopen(conf, "w");
    assert_non_null(f);
    fprintf(f, "Port %u\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nConnectPort %u\n"
               "MaxClients 16\nLogLevel Critical\n%s",
            port, echo, auth ? "BasicAuth alice s3cret\n" : "");
    fclose(f);
    snprintf(path, sizeof(path), "%s", bin);
    char *argv[] = {path, "-d", "-c", conf, NULL};
    spawn(argv, port);
}

static void
test_interop_tinyproxy(void **state)
{
    const char *bin = peer_need("tinyproxy");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/chute-tinyproxy-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    const char *dir = tmpdir;
    uint16_t echo = echo_start(), port = free_port();
    struct outbound_proxy anon = proxy("", ""), good = proxy("alice", "s3cret"),
                          bad = proxy("alice", "nope");

    tinyproxy(bin, dir, port, echo, 0);
    struct result r = through(HTTP, port, &anon, echo);
    assert_int_equal(r.err, 0);
    /* ConnectPort refuses other ports: tinyproxy answers 403. */
    r = through(HTTP, port, &anon, (uint16_t)(echo == 65535 ? 1 : echo + 1));
    assert_int_equal(r.err, ECONNREFUSED);
    assert_string_equal(r.why, "http: proxy answered 403");
    reap();

    port = free_port();
    tinyproxy(bin, dir, port, echo, 1);
    r = through(HTTP, port, &good, echo);
    assert_int_equal(r.err, 0);
    r = through(HTTP, port, &bad, echo); /* tinyproxy: 401 for wrong ones */
    assert_int_equal(r.err, EACCES);
    assert_string_equal(r.why, "http: 401 proxy authentication failed");
    r = through(HTTP, port, &anon, echo);
    assert_int_equal(r.err, EACCES);
    assert_string_equal(r.why, "http: 407 proxy authentication required");
}

static int
setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    loop = ev_loop_new(EVFLAG_AUTO);
    return 0;
}

static int
teardown(void **state)
{
    ev_loop_destroy(loop);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socks5_ok_with_extra),
        cmocka_unit_test(test_socks5_auth_split_replies),
        cmocka_unit_test(test_socks5_auth_offered_not_needed),
        cmocka_unit_test(test_socks5_rep_codes),
        cmocka_unit_test(test_socks5_refusals),
        cmocka_unit_test(test_http_ok_with_extra),
        cmocka_unit_test(test_http_auth_request),
        cmocka_unit_test(test_http_errors),
        cmocka_unit_test(test_http_unsendable_name),
        cmocka_unit_test(test_failure_at_start_is_deferred),
        cmocka_unit_test(test_cancel_while_waiting),
        cmocka_unit_test(test_trojan_header_with_first_write),
        cmocka_unit_test(test_trojan_header_alone_after_delay),
        cmocka_unit_test(test_handshake_over_stingy_stream),
        cmocka_unit_test(test_trojan_over_stingy_stream),
        cmocka_unit_test_teardown(test_interop_microsocks, interop_teardown),
        cmocka_unit_test_teardown(test_interop_tinyproxy, interop_teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
