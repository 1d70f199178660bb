/* core/tls's client against `openssl s_server`: three servers on
 * 127.0.0.1 (a DNS-name leaf with ALPN and a session context, an
 * IP-address leaf, a TLS 1.3-only one), reached through sockets wrapped as
 * io streams. */

#include "tls_test.h"
/* trust.c with its statics: the SAN walker is tested on its own too. */
#include "../../../core/tls/trust.c"

struct server {
    pid_t pid;
    unsigned short port;
};

static struct {
    int ok; /* the servers run */
    struct server dns, ip, tls13;
} E;

static void
stop_server(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* Starts s_server with |extra| arguments on a free port; 0 once the port
 * accepts, -1 if it exited (the port was taken meanwhile) or never
 * listened. */
static int
try_server(struct server *s, const char *cert, const char *const *extra)
{
    char accept_arg[32], certp[128], keyp[128], logp[128];
    const char *argv[32];
    int n = 0;
    s->port = tt_free_port();
    if (s->port == 0)
        return -1;
    snprintf(accept_arg, sizeof(accept_arg), "127.0.0.1:%u", s->port);
    snprintf(certp, sizeof(certp), "%s/%s.pem", TT.dir, cert);
    snprintf(keyp, sizeof(keyp), "%s/%s.key", TT.dir, cert);
    snprintf(logp, sizeof(logp), "%s/%s-%u.log", TT.dir, cert, s->port);
    argv[n++] = "openssl";
    argv[n++] = "s_server";
    argv[n++] = "-accept";
    argv[n++] = accept_arg;
    argv[n++] = "-cert";
    argv[n++] = certp;
    argv[n++] = "-key";
    argv[n++] = keyp;
    argv[n++] = "-rev"; /* echoes each line reversed */
    while (*extra != NULL)
        argv[n++] = *extra++;
    argv[n] = NULL;
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* no server outlives a crashed test */
        int in = open("/dev/null", O_RDONLY), out = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execvp("openssl", (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        int fd = tt_dial(s->port, 0);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0; /* it exited: reaped */
            break;
        }
        usleep(50 * 1000);
    }
    stop_server(s);
    return -1;
}

/* Another program may take the free port before s_server binds it. */
static int
start_server(struct server *s, const char *cert, const char *const *extra)
{
    for (int i = 0; i < 5; i++)
        if (try_server(s, cert, extra) == 0)
            return 0;
    return -1;
}

static int group_teardown(void **state);

static int
group_setup(void **state)
{
    int r = tt_setup();
    if (r > 0)
        return 0; /* no openssl: every test skips */
    if (r < 0) {
        print_error("certificates: see %s/gen.log\n", TT.dir);
        tt_sh("cat %s/gen.log >&2", TT.dir);
        group_teardown(state);
        return -1;
    }
    static const char *const main_args[] = {"-context", "x", "-alpn", "h2", NULL};
    static const char *const ip_args[] = {NULL};
    static const char *const tls13_args[] = {"-tls1_3", NULL};
    if (start_server(&E.dns, "dns", main_args) != 0 || start_server(&E.ip, "ip", ip_args) != 0 ||
        start_server(&E.tls13, "dns", tls13_args) != 0) {
        print_error("openssl s_server did not start (logs in %s)\n", TT.dir);
        tt_sh("cat %s/*.log >&2", TT.dir);
        group_teardown(state);
        return -1;
    }
    E.ok = 1;
    return 0;
}

static int
group_teardown(void **state)
{
    stop_server(&E.dns);
    stop_server(&E.ip);
    stop_server(&E.tls13);
    tt_teardown();
    return 0;
}

/* ---- driving the loop ---------------------------------------------------- */

static int dial_bufsize; /* for the next handshake() */

static double last_ms; /* the last handshake() took */

static struct tt_hs
handshake(struct ev_loop *loop, struct tls_ctx *t, unsigned short port,
          const struct tls_client_opts *o)
{
    struct tt_hs r = {0};
    int fd = tt_dial(port, dial_bufsize);
    assert_true(fd >= 0);
    struct io_stream *inner = io_fd_new(loop, fd);
    assert_non_null(inner);
    double t0 = tt_now_ms();
    struct tls_handshake *th = tt_client(t, inner, o, &r);
    if (!tt_run_until(loop, &r.done, 5.0)) {
        tls_handshake_cancel(th);
        fail_msg("handshake timed out");
    }
    last_ms = tt_now_ms() - t0;
    if (r.s != NULL)
        assert_ptr_equal(r.s->inner, inner);
    return r;
}

/* Writes |len| bytes of |out| while reading until |want| bytes came back;
 * the bytes read, or -1 after |timeout| seconds or an error. */
static struct tt_peer last; /* what exchange() saw, for the bulk test */

static ssize_t
exchange(struct ev_loop *loop, struct io_stream *s, const char *out, size_t len, char *in,
         size_t want, double timeout)
{
    last = (struct tt_peer){.out = out, .len = len, .in = in, .want = want};
    tt_peer_start(&last, s);
    tt_run_until(loop, &last.done, timeout);
    io_read_stop(s);
    io_set_callbacks(s, NULL, NULL, NULL);
    if (!last.done || last.err || last.got != want) {
        print_error("exchange: sent %zu/%zu got %zu/%zu err %d eof %d\n", last.sent, len,
                    last.got, want, last.err, last.eof);
        return -1;
    }
    return (ssize_t)last.got;
}

/* "hello\n" comes back from s_server -rev as "olleh\n". */
static void
assert_echo(struct ev_loop *loop, struct io_stream *s)
{
    char buf[16] = {0};
    assert_int_equal(exchange(loop, s, "hello\n", 6, buf, 6, 5.0), 6);
    assert_memory_equal(buf, "olleh\n", 6);
}

#define NEED_SERVERS()                                                                             \
    do {                                                                                           \
        if (!E.ok)                                                                                 \
            TT_PEER_MISSING("is not on PATH");                                                     \
    } while (0)

/* ---- tests ---------------------------------------------------------------- */

static void
test_trusted_echo_and_alpn(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("ca.pem");
    assert_int_equal(tls_ctx_anchor_count(t), 1);

    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    struct tt_hs r = handshake(loop, t, E.dns.port, &o);
    assert_int_equal(r.err, 0);
    assert_non_null(r.s);
    assert_string_equal(r.s->ops->name, "tls");
    assert_null(tls_stream_alpn(r.s));
    assert_echo(loop, r.s);
    io_close(r.s, 0);

    static const char *const alpn[] = {"h2", "http/1.1"};
    struct tls_client_opts oa = {.host = "localhost", .port = E.dns.port, .alpn = alpn, .nalpn = 2};
    r = handshake(loop, t, E.dns.port, &oa);
    assert_int_equal(r.err, 0);
    assert_string_equal(tls_stream_alpn(r.s), "h2");
    assert_echo(loop, r.s);
    io_close(r.s, 1);

    struct tls_stats st;
    tls_ctx_stats(t, &st);
    assert_int_equal(st.handshakes, 2);
    assert_int_equal(st.failures, 0);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

/* Bulk both ways: writes outrun the socket (EAGAIN, then on_drain). */
static void
test_bulk_backpressure(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    dial_bufsize = 16384;
    struct tt_hs r = handshake(loop, t, E.dns.port, &o);
    dial_bufsize = 0;
    assert_int_equal(r.err, 0);

    enum { LINE = 1024, LINES = 4096 };
    char *out = malloc((size_t)LINE * LINES), *in = malloc((size_t)LINE * LINES);
    assert_non_null(out);
    assert_non_null(in);
    for (size_t i = 0; i < LINES; i++) {
        for (size_t j = 0; j < LINE - 1; j++)
            out[i * LINE + j] = (char)('a' + (i * 7 + j) % 26);
        out[i * LINE + LINE - 1] = '\n';
    }
    ssize_t got = exchange(loop, r.s, out, (size_t)LINE * LINES, in, (size_t)LINE * LINES, 20.0);
    io_close(r.s, 0); /* first: s_server serves one client at a time */
    assert_int_equal(got, (ssize_t)LINE * LINES);
    /* Writes outran the socket; on_drain resumed them. */
    assert_true(last.eagains + last.partials > 0);
    assert_true(last.drains > 0);
    size_t bad = 0;
    for (size_t i = 0; i < LINES; i++)
        for (size_t j = 0; j < LINE - 1; j++)
            bad += in[i * LINE + j] != out[i * LINE + LINE - 2 - j];
    free(out);
    free(in);
    assert_int_equal(bad, 0);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

/* shutdown() ends our writes but sends no close_notify yet: BearSSL 0.6
 * would drop what the server still sends. The answer to bytes written
 * just before the shutdown must arrive whole. */
static void
test_shutdown_keeps_the_answer(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    struct tt_hs r = handshake(loop, t, E.dns.port, &o);
    assert_int_equal(r.err, 0);
    assert_int_equal(io_write(r.s, "hello\n", 6), 6);
    assert_int_equal(io_shutdown(r.s), 0);
    assert_int_equal(io_write(r.s, "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    char buf[8] = {0};
    struct tt_peer p = {.in = buf, .want = 6};
    tt_peer_start(&p, r.s);
    tt_run_until(loop, &p.done, 5.0);
    size_t got = p.got;
    io_close(r.s, 0);
    assert_int_equal(got, 6);
    assert_memory_equal(buf, "olleh\n", 6);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

static void
expect_failure(struct ev_loop *loop, struct tls_ctx *t, unsigned short port,
               const struct tls_client_opts *o, const char *why)
{
    struct tt_hs r = handshake(loop, t, port, o);
    assert_null(r.s);
    assert_int_not_equal(r.err, 0);
    /* A prefix: some reasons go on with the host ("... (it is not for 'x')"). */
    if (strncmp(r.why, why, strlen(why)) != 0)
        fail_msg("got '%s', want '%s...'", r.why, why);
}

static void
test_names_and_addresses(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("ca.pem");
    const char *another = "tls: host name does not match the certificate";

    struct tls_client_opts wrong = {.host = "other.test", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &wrong,
                   "tls: host name does not match the certificate (it is not for 'other.test')");
    /* The SNI may differ from the name the certificate must carry. */
    struct tls_client_opts sni = {.host = "other.test", .sni = "localhost", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &sni, another);
    struct tls_client_opts sni_ok = {.host = "localhost", .sni = "x.test", .port = E.dns.port};
    struct tt_hs r = handshake(loop, t, E.dns.port, &sni_ok);
    assert_int_equal(r.err, 0);
    io_close(r.s, 0);

    /* IP literals: checked against iPAddress SANs by chute itself. */
    struct tls_client_opts ip = {.host = "127.0.0.1", .port = E.ip.port};
    r = handshake(loop, t, E.ip.port, &ip);
    assert_int_equal(r.err, 0);
    assert_echo(loop, r.s);
    io_close(r.s, 0);
    struct tls_client_opts ip6 = {.host = "[::1]", .port = E.ip.port};
    r = handshake(loop, t, E.ip.port, &ip6);
    assert_int_equal(r.err, 0);
    io_close(r.s, 0);
    struct tls_client_opts ip_other = {.host = "127.0.0.2", .port = E.ip.port};
    expect_failure(loop, t, E.ip.port, &ip_other, another);
    struct tls_client_opts ip_vs_dns = {.host = "127.0.0.1", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &ip_vs_dns, another);
    /* A name never matches the IP certificate (its CN is no name either). */
    struct tls_client_opts name_vs_ip = {.host = "localhost", .port = E.ip.port};
    expect_failure(loop, t, E.ip.port, &name_vs_ip, another);

    struct tls_stats st;
    tls_ctx_stats(t, &st);
    assert_int_equal(st.failures, 5);
    assert_int_equal(st.handshakes, 3);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

static void
test_untrusted_and_skip_verify(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("other.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &o, "tls: certificate not trusted: unknown issuer");

    o.skip_verify = 1;
    struct tt_hs r = handshake(loop, t, E.dns.port, &o);
    assert_int_equal(r.err, 0);
    assert_echo(loop, r.s); /* the key was extracted: ECDHE verified with it */
    io_close(r.s, 0);
    /* No check at all: another name, or an IP, are fine too. */
    struct tls_client_opts ip = {.host = "127.0.0.9", .port = E.dns.port, .skip_verify = 1};
    r = handshake(loop, t, E.dns.port, &ip);
    assert_int_equal(r.err, 0);
    io_close(r.s, 0);
    /* A session from an unchecked handshake never serves a checked one. */
    o.skip_verify = 0;
    expect_failure(loop, t, E.dns.port, &o, "tls: certificate not trusted: unknown issuer");
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

static void
test_tls13_only_server(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.tls13.port};
    struct tt_hs r = handshake(loop, t, E.tls13.port, &o);
    assert_null(r.s);
    assert_int_equal(r.err, EPROTONOSUPPORT);
    assert_string_equal(r.why, "tls: server requires TLS 1.3 (BearSSL 0.6 speaks TLS 1.2 only)");
    struct tls_stats st;
    tls_ctx_stats(t, &st);
    assert_int_equal(st.tls13_only, 1);
    assert_int_equal(st.failures, 1);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

static void
test_resumption(void **state)
{
    NEED_SERVERS();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = tt_ctx("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    double full = 0, resumed = 0;
    enum { ROUNDS = 5 };
    for (int i = 0; i < ROUNDS + 1; i++) {
        struct tt_hs r = handshake(loop, t, E.dns.port, &o);
        assert_int_equal(r.err, 0);
        assert_int_equal(tls_stream_resumed(r.s), i > 0);
        assert_echo(loop, r.s);
        io_close(r.s, 0); /* close_notify: OpenSSL keeps the session */
        if (i == 0)
            full = last_ms;
        else
            resumed += last_ms / ROUNDS;
    }
    /* A session is per (host, port, SNI): another SNI starts afresh. */
    struct tls_client_opts o2 = {.host = "localhost", .sni = "localhost.", .port = E.dns.port};
    struct tt_hs r = handshake(loop, t, E.dns.port, &o2);
    assert_int_equal(r.err, 0);
    assert_int_equal(tls_stream_resumed(r.s), 0);
    io_close(r.s, 0);
    struct tls_stats st;
    tls_ctx_stats(t, &st);
    assert_int_equal(st.resumed, ROUNDS);
    print_message("handshake (loopback, incl. callback): full %.2f ms, resumed %.2f ms\n", full,
                  resumed);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

/* A listener that never answers: the handshake waits for the server.
 * Cancelling closes the inner stream (the in-memory one counts). */
static void
test_cancel(void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256];
    struct tls_ctx *t = TT.ok ? tt_ctx("ca.pem") : tls_ctx_new(NULL, err, sizeof(err));
    if (t == NULL) /* no test CA without openssl, and no system trust store */
        TT_PEER_MISSING("is not on PATH and the system trust store did not load");
    unsigned short port;
    int lfd = tt_listen(&port);
    struct tls_client_opts o = {.host = "localhost", .port = port};
    struct tt_hs r = {0};

    /* Before the loop ran, and after the ClientHello went out. */
    for (int run = 0; run < 2; run++) {
        int fd = tt_dial(port, 0);
        assert_true(fd >= 0);
        struct tls_handshake *h = tt_client(t, io_fd_new(loop, fd), &o, &r);
        if (run)
            ev_run(loop, EVRUN_NOWAIT);
        assert_false(r.done);
        tls_handshake_cancel(h);
        ev_run(loop, EVRUN_NOWAIT);
        assert_false(r.done);
    }
    struct io_stream *ends[2];
    tt_mem_pair(loop, 4096, ends);
    int closes = tt_mem_closes;
    struct tls_handshake *h = tt_client(t, ends[0], &o, &r);
    tt_run_for(loop, 0.05);
    assert_false(r.done);
    tls_handshake_cancel(h);
    assert_int_equal(tt_mem_closes, closes + 1);
    io_close(ends[1], 0);

    /* A bad option is reported from the loop too. */
    struct tls_client_opts bad = {.host = "", .port = 1};
    r = handshake(loop, t, port, &bad);
    assert_null(r.s);
    assert_int_equal(r.err, EINVAL);
    assert_string_equal(r.why, "tls: bad host or SNI");
    close(lfd);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

static void
test_trust_store_loading(void **state)
{
    char err[256];
    struct tls_ctx *t = tls_ctx_new("/nonexistent/ca.pem", err, sizeof(err));
    assert_null(t);
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));
    if (access(SYSTEM_BUNDLE, R_OK) == 0) {
        t = tls_ctx_new(NULL, err, sizeof(err));
        assert_non_null(t);
        assert_true(tls_ctx_anchor_count(t) > 50);
        tls_ctx_free(t);
    }
    NEED_OPENSSL();
    t = tt_ctx("ca_nonl.pem"); /* no final newline: still one anchor */
    assert_int_equal(tls_ctx_anchor_count(t), 1);
    tls_ctx_free(t);
    char path[128];
    snprintf(path, sizeof(path), "%s/empty.pem", TT.dir);
    assert_null(tls_ctx_new(path, err, sizeof(err)));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "no certificate"));
}

static size_t
read_der(const char *name, unsigned char *buf, size_t cap)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", TT.dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    assert_true(n > 0 && n < cap);
    return n;
}

/* The iPAddress SAN walk: exact matches only, and no read past the end
 * of any truncated or corrupted certificate (ASan watches). */
static void
test_ip_san_walk(void **state)
{
    NEED_OPENSSL();
    static const unsigned char v4[4] = {127, 0, 0, 1}, v4b[4] = {127, 0, 0, 2};
    static const unsigned char v6[16] = {[15] = 1};
    unsigned char der[4096], dns[4096];
    size_t n = read_der("ip.der", der, sizeof(der)), m = read_der("dns.der", dns, sizeof(dns));
    assert_int_equal(tls_der_san_has_ip(der, n, v4, 4), 1);
    assert_int_equal(tls_der_san_has_ip(der, n, v6, 16), 1);
    assert_int_equal(tls_der_san_has_ip(der, n, v4b, 4), 0);
    assert_int_equal(tls_der_san_has_ip(der, n, v6, 4), 0);
    assert_int_equal(tls_der_san_has_ip(dns, m, v4, 4), 0);
    for (size_t len = 0; len < n; len++) {
        unsigned char *cut = malloc(len ? len : 1); /* exact size: overreads trip ASan */
        memcpy(cut, der, len);
        assert_int_equal(tls_der_san_has_ip(cut, len, v4, 4), 0);
        free(cut);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char *bad = malloc(n);
        memcpy(bad, der, n);
        bad[i] ^= 0xa5;
        (void)tls_der_san_has_ip(bad, n, v4, 4);
        free(bad);
    }
    static const unsigned char huge[] = {0x30, 0x84, 0xff, 0xff, 0xff, 0xff, 0x30, 0x00};
    static const unsigned char longtag[] = {0x1f, 0x81, 0x01, 0x00};
    assert_int_equal(tls_der_san_has_ip(huge, sizeof(huge), v4, 4), 0);
    assert_int_equal(tls_der_san_has_ip(longtag, sizeof(longtag), v4, 4), 0);
}

/* The server accepts and closes before answering. */
static void
test_eof_during_handshake(void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256];
    struct tls_ctx *t = TT.ok ? tt_ctx("ca.pem") : tls_ctx_new(NULL, err, sizeof(err));
    if (t == NULL) /* no test CA without openssl, and no system trust store */
        TT_PEER_MISSING("is not on PATH and the system trust store did not load");
    unsigned short port;
    int lfd = tt_listen(&port);
    struct tls_client_opts o = {.host = "localhost", .port = port};
    struct tt_hs r = {0};
    int fd = tt_dial(port, 0);
    assert_true(fd >= 0);
    int sfd = accept(lfd, NULL, NULL);
    assert_true(sfd >= 0);
    close(sfd);
    tt_client(t, io_fd_new(loop, fd), &o, &r);
    assert_true(tt_run_until(loop, &r.done, 5.0));
    assert_null(r.s);
    assert_string_equal(r.why, "tls: connection closed during handshake");
    close(lfd);
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trust_store_loading),
        cmocka_unit_test(test_trusted_echo_and_alpn),
        cmocka_unit_test(test_bulk_backpressure),
        cmocka_unit_test(test_shutdown_keeps_the_answer),
        cmocka_unit_test(test_names_and_addresses),
        cmocka_unit_test(test_untrusted_and_skip_verify),
        cmocka_unit_test(test_tls13_only_server),
        cmocka_unit_test(test_resumption),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_eof_during_handshake),
        cmocka_unit_test(test_ip_san_walk),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
