/* core/tls's record pump (conn.c) with both ends chute's own: the client
 * against the server over loopback TCP, over an in-memory stream that
 * takes a few hundred bytes at a time, and TLS over TLS. */

#include <time.h> /* strptime, timegm: _GNU_SOURCE is on for every target */

#include "tls_test.h"

static struct {
    struct tls_ctx *ctx;         /* trusts ca.pem */
    struct tls_server_cfg *cfg;  /* dns.pem (localhost) */
} F;

static int
group_setup(void **state)
{
    int r = tt_setup();
    if (r > 0)
        return 0; /* no openssl, no certificates: every test skips */
    if (r < 0)
        return -1;
    char err[256];
    F.ctx = tt_ctx("ca.pem");
    F.cfg = tt_cfg("dns.pem", "dns.key", err, sizeof(err));
    if (F.cfg == NULL) {
        print_error("%s\n", err);
        return -1;
    }
    return 0;
}

static int
group_teardown(void **state)
{
    tls_ctx_free(F.ctx);
    tls_server_cfg_free(F.cfg);
    tt_teardown();
    return 0;
}

static const char *const h2_h1[] = {"http/1.1", "h2"}; /* the server's order wins */

struct pair {
    struct tt_hs c, s;
};

static int
both_done(const struct pair *p)
{
    return p->c.done && p->s.done;
}

/* Runs the loop until |a| and |b| are both set (or 20 s): 1 if they are. */
static int
run_until2(struct ev_loop *loop, const int *a, const int *b, double seconds)
{
    double end = tt_now_ms() + seconds * 1e3;
    while (!(*a && *b) && tt_now_ms() < end)
        tt_run_until(loop, a, 0.05), tt_run_until(loop, b, 0.05);
    return *a && *b;
}

/* Client over |ci|, server over |si|, both handshakes to their end. */
static void
handshake_pair(struct ev_loop *loop, struct tls_ctx *ctx, struct tls_server_cfg *cfg,
               struct io_stream *ci, struct io_stream *si, const struct tls_client_opts *o,
               struct pair *p)
{
    memset(p, 0, sizeof(*p));
    struct tls_handshake *ch = tt_client(ctx, ci, o, &p->c);
    struct tls_handshake *sh = tt_server(cfg, si, &p->s);
    int done = 0;
    double end = tt_now_ms() + 5000;
    while (!(done = both_done(p)) && tt_now_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    if (!done) {
        if (!p->c.done)
            tls_handshake_cancel(ch);
        if (!p->s.done)
            tls_handshake_cancel(sh);
        fail_msg("handshake timed out");
    }
}

static void
tcp_handshake(struct ev_loop *loop, const struct tls_client_opts *o, int bufsize, struct pair *p)
{
    int fds[2];
    tt_tcp_pair(fds, bufsize);
    handshake_pair(loop, F.ctx, F.cfg, io_fd_new(loop, fds[0]), io_fd_new(loop, fds[1]), o, p);
}

/* Sends |n| bytes each way at once and checks what arrived. */
static void
both_ways(struct ev_loop *loop, struct io_stream *a, struct io_stream *b, size_t n, int pause_b,
          struct tt_peer *pa, struct tt_peer *pb)
{
    char *oa = tt_pattern(n, 1), *ob = tt_pattern(n, 2), *ia = malloc(n), *ib = malloc(n);
    assert_non_null(ia);
    assert_non_null(ib);
    *pa = (struct tt_peer){.out = oa, .len = n, .in = ia, .want = n};
    *pb = (struct tt_peer){.out = ob, .len = n, .in = ib, .want = n, .paused = pause_b};
    tt_peer_start(pa, a);
    tt_peer_start(pb, b);
    if (pause_b) {
        /* |b| reads nothing until |a|'s writes have backed up to it. */
        double end = tt_now_ms() + 5000;
        while (pa->eagains + pa->partials == 0 && tt_now_ms() < end)
            ev_run(loop, EVRUN_ONCE);
        assert_true(pa->eagains + pa->partials > 0);
        tt_run_for(loop, 0.05);
        tt_peer_resume(pb);
    }
    assert_true(run_until2(loop, &pa->done, &pb->done, 30.0));
    assert_int_equal(pa->err, 0);
    assert_int_equal(pb->err, 0);
    assert_int_equal(pa->got, n);
    assert_int_equal(pb->got, n);
    assert_memory_equal(ia, ob, n);
    assert_memory_equal(ib, oa, n);
    io_read_stop(a);
    io_read_stop(b);
    io_set_callbacks(a, NULL, NULL, NULL);
    io_set_callbacks(b, NULL, NULL, NULL);
    free(oa);
    free(ob);
    free(ia);
    free(ib);
}

/* ---- tests ------------------------------------------------------------------ */

static void
test_handshake_alpn(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_server_stats st0, st;
    tls_server_cfg_stats(F.cfg, &st0);
    struct tls_client_opts o = {.host = "localhost", .port = 1, .alpn = h2_h1, .nalpn = 2};
    struct pair p;
    tcp_handshake(loop, &o, 0, &p);
    assert_int_equal(p.c.err, 0);
    assert_int_equal(p.s.err, 0);
    assert_string_equal(p.c.s->ops->name, "tls");
    assert_string_equal(p.s.s->ops->name, "tls");
    assert_string_equal(p.c.s->inner->ops->name, "fd");
    assert_string_equal(tls_stream_alpn(p.c.s), "h2");
    assert_string_equal(tls_stream_alpn(p.s.s), "h2");
    assert_null(tls_stream_alpn(p.c.s->inner)); /* not a TLS stream */
    struct tt_peer a, b;
    both_ways(loop, p.c.s, p.s.s, 1000, 0, &a, &b);
    io_close(p.c.s, 0);
    io_close(p.s.s, 0);

    /* Only http/1.1 offered: that one. No ALPN: none. */
    static const char *const h1[] = {"http/1.1"};
    struct tls_client_opts o1 = {.host = "localhost", .port = 1, .alpn = h1, .nalpn = 1};
    tcp_handshake(loop, &o1, 0, &p);
    assert_string_equal(tls_stream_alpn(p.s.s), "http/1.1");
    io_close(p.c.s, 0);
    io_close(p.s.s, 0);
    struct tls_client_opts o0 = {.host = "localhost", .port = 1};
    tcp_handshake(loop, &o0, 0, &p);
    assert_int_equal(p.s.err, 0);
    assert_null(tls_stream_alpn(p.s.s));
    assert_null(tls_stream_alpn(p.c.s));
    io_close(p.c.s, 1);
    io_close(p.s.s, 1);
    tls_server_cfg_stats(F.cfg, &st);
    assert_int_equal(st.handshakes - st0.handshakes, 3);
    assert_int_equal(st.failures - st0.failures, 0);
    ev_loop_destroy(loop);
}

/* 1 MiB each way over small socket buffers, the server not reading at
 * first: writes back up (EAGAIN or partial), on_drain resumes them. */
static void
test_bulk_both_ways(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_client_opts o = {.host = "localhost", .port = 1, .alpn = h2_h1, .nalpn = 2};
    struct pair p;
    tcp_handshake(loop, &o, 16384, &p);
    assert_int_equal(p.c.err, 0);
    struct tt_peer a, b;
    both_ways(loop, p.c.s, p.s.s, 1 << 20, 1, &a, &b);
    assert_true(a.drains > 0);
    print_message("client: %u drains, %u EAGAIN, %u partial; server: %u drains\n", a.drains,
                  a.eagains, a.partials, b.drains);
    io_close(p.c.s, 0);
    io_close(p.s.s, 0);
    ev_loop_destroy(loop);
}

/* The client's end of data: no close_notify until the server has been
 * quiet for 1.5 s, so the answer written after the shutdown arrives; then
 * the server reads a clean end, and its close_notify ends the client's. */
struct half {
    struct io_stream *s;
    struct tt_peer *srv;
    double pong_at;
    int sent;
};

static void
on_pong_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct half *h = w->data;
    assert_int_equal(io_write(h->s, "pong", 4), 4);
    h->pong_at = tt_now_ms();
    h->sent = 1;
}

static void
test_half_close_quiet_period(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_client_opts o = {.host = "localhost", .port = 1};
    struct pair p;
    tcp_handshake(loop, &o, 0, &p);
    char cin[8] = {0}, sin[8] = {0};
    struct tt_peer c = {.out = "ping", .len = 4, .in = cin, .want = 8, .shut_after = 1};
    struct tt_peer s = {.in = sin, .want = 8};
    tt_peer_start(&c, p.c.s);
    tt_peer_start(&s, p.s.s);
    assert_int_equal(io_write(p.c.s, "x", 1), -1); /* ended */
    assert_int_equal(errno, EPIPE);
    /* The server answers 0.3 s later, long after the client's shutdown. */
    struct half h = {.s = p.s.s};
    ev_timer pong;
    ev_timer_init(&pong, on_pong_timer, 0.3, 0);
    pong.data = &h;
    ev_timer_start(loop, &pong);
    assert_true(tt_run_until(loop, &s.eof, 5.0));
    double quiet = tt_now_ms() - h.pong_at;
    assert_int_equal(s.err, 0); /* a clean end: close_notify, not a bare FIN */
    assert_int_equal(s.got, 4);
    assert_memory_equal(sin, "ping", 4);
    assert_true(h.sent);
    assert_true(quiet >= 1400); /* the client waited for quiet */
    /* Reading the close_notify made the server answer with its own. */
    assert_true(tt_run_until(loop, &c.eof, 5.0));
    assert_int_equal(c.err, 0);
    assert_int_equal(c.got, 4);
    assert_memory_equal(cin, "pong", 4);
    print_message("close_notify %.0f ms after the last answer\n", quiet);
    io_close(p.c.s, 0);
    io_close(p.s.s, 0);
    ev_loop_destroy(loop);
}

/* close(s, 0): the last bytes, then close_notify: a clean end for the
 * peer. close(s, 1): a reset, an error for the peer. */
static void
test_close_notify_and_reset(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_client_opts o = {.host = "localhost", .port = 1};
    struct pair p;
    for (int reset = 0; reset < 2; reset++) {
        tcp_handshake(loop, &o, 0, &p);
        assert_int_equal(io_write(p.c.s, "bye", 3), 3);
        io_close(p.c.s, reset);
        char in[8];
        struct tt_peer s = {.in = in, .want = sizeof(in)};
        tt_peer_start(&s, p.s.s);
        assert_true(tt_run_until(loop, &s.done, 5.0));
        if (!reset) {
            assert_int_equal(s.err, 0);
            assert_int_equal(s.got, 3);
            assert_memory_equal(in, "bye", 3);
        } else {
            assert_int_equal(s.err, ECONNRESET);
        }
        /* The error stays. */
        char b;
        errno = 0;
        ssize_t n = io_read(p.s.s, &b, 1);
        assert_true(reset ? n == -1 && errno == ECONNRESET : n == 0);
        io_close(p.s.s, 0);
    }
    ev_loop_destroy(loop);
}

/* An owner that takes 100 bytes per callback and leaves the rest, and
 * now and then stops reading for a moment: the TLS stream holds decoded
 * bytes, so it must call on_readable again by itself, and again when
 * reading restarts (no socket event would come for those bytes). */
struct sipper {
    struct io_stream *s;
    char *in;
    size_t want, got;
    unsigned calls, stops;
    int done;
    ev_timer restart;
};

static void
sip_readable(void *arg)
{
    struct sipper *q = arg;
    ssize_t n = io_read(q->s, q->in + q->got, q->want - q->got < 100 ? q->want - q->got : 100);
    q->calls++;
    if (n > 0 && (q->got += (size_t)n) == q->want)
        q->done = 1;
    if (n <= 0 && !(n < 0 && errno == EAGAIN))
        q->done = -1;
    if (q->calls % 16 == 0 && !q->done) {
        io_read_stop(q->s);
        q->stops++;
        ev_timer_start(q->s->loop, &q->restart);
    }
}

static void
sip_restart(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct sipper *q = w->data;
    io_read_start(q->s);
}

static void
test_bytes_left_inside(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_client_opts o = {.host = "localhost", .port = 1};
    struct pair p;
    tcp_handshake(loop, &o, 0, &p);
    size_t n = 64 * 1024;
    char *out = tt_pattern(n, 4);
    struct sipper q = {.s = p.s.s, .in = malloc(n), .want = n};
    assert_non_null(q.in);
    ev_timer_init(&q.restart, sip_restart, 0.001, 0);
    q.restart.data = &q;
    struct tt_peer c = {.out = out, .len = n};
    tt_peer_start(&c, p.c.s);
    io_set_callbacks(p.s.s, sip_readable, NULL, &q);
    io_read_start(p.s.s);
    tt_run_until(loop, &q.done, 10.0);
    ev_timer_stop(loop, &q.restart);
    if (q.done != 1)
        print_error("got %zu/%zu in %u calls, %u stops; client sent %zu, waiting %d\n", q.got, n,
                    q.calls, q.stops, c.sent, c.waiting_drain);
    assert_int_equal(q.done, 1);
    assert_memory_equal(q.in, out, n);
    assert_true(q.calls >= n / 100 && q.stops > 0);
    io_close(p.c.s, 0);
    io_close(p.s.s, 0);
    free(q.in);
    free(out);
    ev_loop_destroy(loop);
}

/* A writer waiting for room learns of the peer's reset from on_drain: the
 * error found in the background comes back from the next writev. */
static void
test_reset_wakes_a_waiting_writer(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_client_opts o = {.host = "localhost", .port = 1};
    struct pair p;
    tcp_handshake(loop, &o, 16384, &p);
    size_t n = 4 << 20;
    char *out = tt_pattern(n, 3);
    struct tt_peer c = {.out = out, .len = n};
    tt_peer_start(&c, p.c.s);
    double end = tt_now_ms() + 5000;
    while (!c.waiting_drain && tt_now_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    assert_true(c.waiting_drain); /* the server reads nothing */
    unsigned drains = c.drains;
    io_close(p.s.s, 1);
    assert_true(tt_run_until(loop, &c.werr, 5.0));
    assert_true(c.drains > drains);
    assert_true(c.werr == ECONNRESET || c.werr == EPIPE);
    print_message("the writer's error: %s\n", strerror(c.werr));
    char b;
    assert_int_equal(io_read(p.c.s, &b, 1), -1); /* kept */
    assert_int_equal(errno, c.werr);
    io_close(p.c.s, 0);
    free(out);
    ev_loop_destroy(loop);
}

/* Over a transport that takes at most 700 bytes at a time: every record
 * goes out in pieces, on_drain after each. */
static void
test_over_memory_stream(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct io_stream *ends[2];
    tt_mem_pair(loop, 700, ends);
    int closes = tt_mem_closes;
    struct tls_client_opts o = {.host = "localhost", .port = 1, .alpn = h2_h1, .nalpn = 2};
    struct pair p;
    handshake_pair(loop, F.ctx, F.cfg, ends[0], ends[1], &o, &p);
    assert_int_equal(p.c.err, 0);
    assert_int_equal(p.s.err, 0);
    assert_string_equal(tls_stream_alpn(p.c.s), "h2");
    struct tt_peer a, b;
    both_ways(loop, p.c.s, p.s.s, 256 * 1024, 1, &a, &b);
    io_close(p.c.s, 0);
    io_close(p.s.s, 0);
    tt_run_for(loop, 0.1); /* lingering records */
    assert_int_equal(tt_mem_closes, closes + 2);
    ev_loop_destroy(loop);
}

/* TLS over TLS over TCP: the inner TLS streams buffer decoded bytes and
 * push readiness, the outer ones run over them as over a socket. */
static void
test_tls_over_tls(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_client_opts o = {.host = "localhost", .port = 1, .alpn = h2_h1, .nalpn = 2};
    static const char *const h1[] = {"http/1.1"};
    struct tls_client_opts o2 = {.host = "localhost", .port = 2, .alpn = h1, .nalpn = 1};
    struct pair inner, outer;
    tcp_handshake(loop, &o, 16384, &inner);
    assert_int_equal(inner.c.err, 0);
    handshake_pair(loop, F.ctx, F.cfg, inner.c.s, inner.s.s, &o2, &outer);
    assert_int_equal(outer.c.err, 0);
    assert_int_equal(outer.s.err, 0);
    assert_ptr_equal(outer.c.s->inner, inner.c.s);
    assert_ptr_equal(outer.s.s->inner, inner.s.s);
    assert_string_equal(outer.c.s->inner->inner->ops->name, "fd");
    assert_string_equal(tls_stream_alpn(outer.s.s), "http/1.1");
    assert_string_equal(tls_stream_alpn(inner.s.s), "h2");
    struct tt_peer a, b;
    both_ways(loop, outer.c.s, outer.s.s, 1 << 20, 1, &a, &b);

    /* A clean end through both layers. */
    io_close(outer.c.s, 0);
    char in[4];
    struct tt_peer s = {.in = in, .want = sizeof(in)};
    tt_peer_start(&s, outer.s.s);
    assert_true(tt_run_until(loop, &s.eof, 5.0));
    assert_int_equal(s.err, 0);
    io_close(outer.s.s, 0);
    tt_run_for(loop, 0.1);
    ev_loop_destroy(loop);
}

/* Failures on both sides, each with its reason; the inner streams are
 * closed. */
static void
test_handshake_failures(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct pair p;
    struct io_stream *ends[2];

    /* A client that does not trust our CA says so with an alert. */
    struct tls_ctx *other = tt_ctx("other.pem");
    int fds[2];
    tt_tcp_pair(fds, 0);
    struct tls_client_opts o = {.host = "localhost", .port = 1};
    handshake_pair(loop, other, F.cfg, io_fd_new(loop, fds[0]), io_fd_new(loop, fds[1]), &o, &p);
    assert_string_equal(p.c.why, "tls: certificate not trusted: unknown issuer (a private CA? "
                                 "give it with ca = \"file.pem\")");
    assert_null(p.s.s);
    print_message("server: %s\n", p.s.why);
    assert_non_null(strstr(p.s.why, "tls: "));
    tls_ctx_free(other);

    /* An expired leaf: the date it expired on (a day ago, openssl -days -1). */
    char err[256];
    struct tls_server_cfg *expired = tt_cfg("expired.pem", "expired.key", err, sizeof(err));
    assert_non_null(expired);
    tt_tcp_pair(fds, 0);
    handshake_pair(loop, F.ctx, expired, io_fd_new(loop, fds[0]), io_fd_new(loop, fds[1]), &o,
                   &p);
    print_message("client: %s\n", p.c.why);
    struct tm tm = {0};
    const char *rest = strptime(p.c.why, "tls: certificate expired on %Y-%m-%d %H:%M:%S UTC", &tm);
    assert_non_null(rest);
    assert_string_equal(rest, "");
    long long ago = (long long)time(NULL) - (long long)timegm(&tm);
    assert_true(ago > 86400 - 600 && ago < 86400 + 600);
    tls_server_cfg_free(expired);

    /* No protocol in common: alert 120 (RFC 7301 §3.2). */
    static const char *const foo[] = {"foo"};
    struct tls_client_opts of = {.host = "localhost", .port = 1, .alpn = foo, .nalpn = 1};
    tcp_handshake(loop, &of, 0, &p);
    assert_null(p.c.s);
    assert_null(p.s.s);
    assert_string_equal(p.s.why, "tls: client offers no protocol we speak (ALPN)");
    assert_int_equal(p.s.err, EPROTO);

    /* Not TLS at all, then the end. */
    tt_mem_pair(loop, 4096, ends);
    int closes = tt_mem_closes;
    struct tt_hs r = {0};
    tt_server(F.cfg, ends[1], &r);
    assert_int_equal(io_write(ends[0], "GET / HTTP/1.1\r\n\r\n", 18), 18);
    assert_true(tt_run_until(loop, &r.done, 5.0));
    assert_null(r.s);
    assert_string_equal(r.why, "tls: the client did not speak TLS (got bytes that are not a TLS "
                               "record: plain HTTP to a TLS port?)");
    assert_int_equal(tt_mem_closes, closes + 1);
    io_close(ends[0], 0);

    /* A client against a plain port: the answer is no TLS record. */
    tt_mem_pair(loop, 4096, ends);
    r = (struct tt_hs){0};
    struct tls_client_opts op = {.host = "localhost", .port = 1};
    tt_client(F.ctx, ends[0], &op, &r);
    assert_int_equal(io_write(ends[1], "HTTP/1.1 400 Bad Request\r\n\r\n", 28), 28);
    assert_true(tt_run_until(loop, &r.done, 5.0));
    assert_null(r.s);
    assert_string_equal(r.why, "tls: the server did not speak TLS (got bytes that are not a TLS "
                               "record: is this a plain port?)");
    io_close(ends[1], 0);

    tt_mem_pair(loop, 4096, ends);
    r = (struct tt_hs){0};
    tt_server(F.cfg, ends[1], &r);
    io_close(ends[0], 0);
    assert_true(tt_run_until(loop, &r.done, 5.0));
    assert_string_equal(r.why, "tls: connection closed during handshake");
    assert_int_equal(r.err, ECONNRESET);
    ev_loop_destroy(loop);
}

/* Our client resumes with our server; a resumption offering only "foo"
 * is the input that crashes BearSSL 0.6 (a cached session, no ALPN name in
 * common): it must become a full handshake that fails cleanly, and the
 * session must still serve a client that offers h2. */
static void
test_resumption_and_the_alpn_guard(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256];
    struct tls_server_cfg *cfg = tt_cfg("dns.pem", "dns.key", err, sizeof(err));
    assert_non_null(cfg);
    struct tls_ctx *ctx = tt_ctx("ca.pem");
    static const char *const h2[] = {"h2"}, *const foo[] = {"foo"}, *const foo_h2[] = {"foo", "h2"};
    struct tls_client_opts o = {.host = "localhost", .port = 7, .alpn = h2, .nalpn = 1};
    struct tls_client_opts of = {.host = "localhost", .port = 7, .alpn = foo, .nalpn = 1};
    struct tls_client_opts ofh = {.host = "localhost", .port = 7, .alpn = foo_h2, .nalpn = 2};
    struct pair p;
    int fds[2];
    /* The failed one makes the client forget its session: the next is a
     * full handshake again, then that session resumes. */
    const struct tls_client_opts *seq[] = {&o, &o, &of, &ofh, &o};
    int resumed[] = {0, 1, -1, 0, 1};
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        tt_tcp_pair(fds, 0);
        handshake_pair(loop, ctx, cfg, io_fd_new(loop, fds[0]), io_fd_new(loop, fds[1]), seq[i], &p);
        if (resumed[i] < 0) {
            assert_null(p.s.s);
            assert_null(p.c.s);
            assert_string_equal(p.s.why, "tls: client offers no protocol we speak (ALPN)");
            continue;
        }
        assert_int_equal(p.s.err, 0);
        assert_int_equal(tls_stream_resumed(p.c.s), resumed[i]);
        assert_int_equal(tls_stream_resumed(p.s.s), resumed[i]);
        assert_string_equal(tls_stream_alpn(p.s.s), "h2");
        io_close(p.c.s, 0);
        io_close(p.s.s, 0);
    }
    tt_expect_stats(cfg, 4, 2, 1, 1);
    tls_server_cfg_free(cfg);
    tls_ctx_free(ctx);
    ev_loop_destroy(loop);
}

/* A configuration freed while a stream uses it lives until the stream is
 * closed (ASan sees a use after free otherwise). */
static void
test_cfg_outlives_its_owner(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256];
    struct tls_server_cfg *cfg = tt_cfg("chain.pem", "dns.key", err, sizeof(err));
    assert_non_null(cfg);
    int fds[2];
    tt_tcp_pair(fds, 0);
    struct tt_hs r = {0};
    tt_server(cfg, io_fd_new(loop, fds[1]), &r);
    tls_server_cfg_free(cfg);
    struct pair p = {0};
    tt_client(F.ctx, io_fd_new(loop, fds[0]), &(struct tls_client_opts){.host = "localhost", .port = 1},
              &p.c);
    assert_true(run_until2(loop, &p.c.done, &r.done, 5.0));
    assert_int_equal(r.err, 0);
    assert_int_equal(p.c.err, 0);
    struct tt_peer a, b;
    both_ways(loop, p.c.s, r.s, 100, 0, &a, &b);
    io_close(p.c.s, 0);
    io_close(r.s, 0);
    ev_loop_destroy(loop);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_alpn),
        cmocka_unit_test(test_bulk_both_ways),
        cmocka_unit_test(test_half_close_quiet_period),
        cmocka_unit_test(test_close_notify_and_reset),
        cmocka_unit_test(test_reset_wakes_a_waiting_writer),
        cmocka_unit_test(test_bytes_left_inside),
        cmocka_unit_test(test_over_memory_stream),
        cmocka_unit_test(test_tls_over_tls),
        cmocka_unit_test(test_handshake_failures),
        cmocka_unit_test(test_resumption_and_the_alpn_guard),
        cmocka_unit_test(test_cfg_outlives_its_owner),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
