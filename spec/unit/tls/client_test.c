/* core/tls against `openssl s_server`: certificates made with the openssl
 * CLI in a temp dir, three servers on 127.0.0.1 (a DNS-name leaf with
 * ALPN and a session context, an IP-address leaf, a TLS 1.3-only one). */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../peer.h"
#include "io/io.h"
#include "tls/tls.h"
/* trust.c with its statics: the SAN walker is tested on its own too. */
#include "../../../core/tls/trust.c"

struct server {
    pid_t pid;
    unsigned short port;
};

static struct {
    int ok; /* openssl present and everything set up */
    char dir[64];
    struct server dns, ip, tls13;
} E;

static int __attribute__((format(printf, 1, 2)))
sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

static unsigned short
free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Blocking connect, then non-blocking as tls_client_start wants it.
 * |bufsize| > 0 shrinks the socket buffers so that writes block soon. */
static int
dial_buf(unsigned short port, int bufsize)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (bufsize > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static int
dial(unsigned short port)
{
    return dial_buf(port, 0);
}

/* Starts s_server with |extra| arguments; 0 once its port accepts. */
static int
start_server_once(struct server *s, const char *cert, const char *const *extra)
{
    char accept_arg[32], certp[128], keyp[128], logp[128];
    const char *argv[32];
    int n = 0;
    s->port = free_port();
    if (s->port == 0)
        return -1;
    snprintf(accept_arg, sizeof(accept_arg), "127.0.0.1:%u", s->port);
    snprintf(certp, sizeof(certp), "%s/%s.pem", E.dir, cert);
    snprintf(keyp, sizeof(keyp), "%s/%s.key", E.dir, cert);
    snprintf(logp, sizeof(logp), "%s/%s-%u.log", E.dir, cert, s->port);
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
    /* Up to 10 s on a loaded machine; a server that exited lost its port to
     * a parallel test (free_port releases it before openssl binds it). */
    for (int i = 0; i < 200; i++) {
        int fd = dial(s->port);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return 1;
        }
        usleep(50 * 1000);
    }
    return -1;
}

static int
start_server(struct server *s, const char *cert, const char *const *extra)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        int rc = start_server_once(s, cert, extra);
        if (rc <= 0)
            return rc;
    }
    return -1;
}

static void
stop_server(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

static int
make_certs(void)
{
    const char *d = E.dir;
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    const char *ca_ext = "-addext basicConstraints=critical,CA:TRUE "
                         "-addext keyUsage=critical,keyCertSign,cRLSign";
    if (sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.pem -days 30 "
           "-subj '/CN=chute test CA' %s >>gen.log 2>&1", d, ec, ca_ext) != 0 ||
        sh("cd %s && openssl req -x509 %s -keyout other.key -out other.pem -days 30 "
           "-subj '/CN=chute other CA' %s >>gen.log 2>&1", d, ec, ca_ext) != 0)
        return -1;
    static const struct {
        const char *name, *cn, *san;
    } leaves[] = {
        {"dns", "localhost", "DNS:localhost"},
        {"ip", "chute ip test", "IP:127.0.0.1,IP:::1"},
    };
    for (size_t i = 0; i < 2; i++) {
        if (sh("cd %s && printf 'subjectAltName=%s\\nbasicConstraints=critical,CA:FALSE\\n"
               "keyUsage=critical,digitalSignature\\nextendedKeyUsage=serverAuth\\n' >%s.ext && "
               "openssl req %s -keyout %s.key -out %s.csr -subj '/CN=%s' >>gen.log 2>&1 && "
               "openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
               "-out %s.pem -days 30 -extfile %s.ext >>gen.log 2>&1",
               d, leaves[i].san, leaves[i].name, ec, leaves[i].name, leaves[i].name, leaves[i].cn,
               leaves[i].name, leaves[i].name, leaves[i].name) != 0)
            return -1;
    }
    /* The CA without its final newline, a file with no certificate, DER. */
    if (sh("cd %s && head -c -1 ca.pem >ca_nonl.pem && echo nothing >empty.pem && "
           "openssl x509 -in ip.pem -outform DER -out ip.der && "
           "openssl x509 -in dns.pem -outform DER -out dns.der", d) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state);

static int
group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    if (peer_find("openssl") == NULL)
        return 0; /* every test that needs it goes through peer_missing */
    strcpy(E.dir, "/tmp/chute-tls-XXXXXX");
    if (mkdtemp(E.dir) == NULL) {
        E.dir[0] = '\0';
        return -1;
    }
    if (make_certs() != 0) {
        group_teardown(state);
        return -1;
    }
    static const char *const main_args[] = {"-context", "x", "-alpn", "h2", NULL};
    static const char *const ip_args[] = {NULL};
    static const char *const tls13_args[] = {"-tls1_3", NULL};
    if (start_server(&E.dns, "dns", main_args) != 0 || start_server(&E.ip, "ip", ip_args) != 0 ||
        start_server(&E.tls13, "dns", tls13_args) != 0) {
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
    if (E.dir[0] != '\0')
        sh("rm -rf %s", E.dir);
    return 0;
}

#define NEED_OPENSSL()                                                                             \
    do {                                                                                           \
        if (!E.ok)                                                                                 \
            peer_missing("openssl", "is not on PATH");                                             \
    } while (0)

static struct tls_ctx *
ctx_for(const char *pem)
{
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/%s", E.dir, pem);
    struct tls_ctx *t = tls_ctx_new(path, err, sizeof(err));
    if (t == NULL)
        fail_msg("%s", err);
    return t;
}

/* ---- driving the loop ---------------------------------------------------- */

struct hs {
    int done, err;
    struct io_stream *s;
    char why[160];
    double ms;
};

static void
on_hs(void *arg, struct io_stream *s, int err, const char *why)
{
    struct hs *r = arg;
    r->done = 1;
    r->s = s;
    r->err = err;
    snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    *(int *)w->data = 1;
}

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int dial_bufsize; /* for the next handshake() */

static struct hs
handshake(struct ev_loop *loop, struct tls_ctx *t, unsigned short port,
          const struct tls_client_opts *o)
{
    struct hs r = {0};
    int fd = dial_buf(port, dial_bufsize), expired = 0;
    assert_true(fd >= 0);
    ev_timer tmo;
    ev_timer_init(&tmo, on_timeout, 5.0, 0);
    tmo.data = &expired;
    ev_timer_start(loop, &tmo);
    double t0 = now_ms();
    struct tls_handshake *h = tls_client_start(t, io_fd_new(loop, fd), o, on_hs, &r);
    assert_non_null(h);
    assert_false(r.done); /* never from inside the call */
    while (!r.done && !expired)
        ev_run(loop, EVRUN_ONCE);
    r.ms = now_ms() - t0;
    ev_timer_stop(loop, &tmo);
    if (!r.done) {
        tls_handshake_cancel(h);
        fail_msg("handshake timed out");
    }
    return r;
}

static void
noop_readable(void *arg)
{
}

static void
on_drain(void *arg)
{
    *(int *)arg = 1;
}

/* Writes |len| bytes of |out| (whatever the socket takes, on_drain for the
 * rest) while reading into |in| until |want| bytes came back; returns the
 * bytes read, or -1 after |timeout| seconds or an error. */
static int eagains; /* writes refused with EAGAIN, for the bulk test */

static ssize_t
exchange(struct ev_loop *loop, struct io_stream *s, const char *out, size_t len, char *in,
         size_t want, double timeout)
{
    size_t sent = 0, got = 0;
    int can_write = 1, expired = 0;
    ev_timer tmo;
    s->on_drain = on_drain;
    s->arg = &can_write;
    s->on_readable = noop_readable; /* wakes the loop: the test reads itself */
    io_read_start(s);
    ev_timer_init(&tmo, on_timeout, timeout, 0);
    tmo.data = &expired;
    ev_timer_start(loop, &tmo);
    while ((sent < len || got < want) && !expired) {
        while (can_write && sent < len) {
            ssize_t n = io_write(s, out + sent, len - sent);
            if (n > 0) {
                sent += (size_t)n;
            } else {
                assert_int_equal(n, -1);
                assert_int_equal(errno, EAGAIN);
                can_write = 0;
                eagains++;
            }
        }
        for (;;) {
            ssize_t n = io_read(s, in + got, want - got);
            if (n > 0) {
                got += (size_t)n;
                if (got == want)
                    break;
                continue;
            }
            if (n < 0 && errno == EAGAIN)
                break;
            print_error("read: %zd errno %d after %zu\n", n, n < 0 ? errno : 0, got);
            got = (size_t)-1;
            break;
        }
        if (got == (size_t)-1)
            break;
        if (sent < len || got < want)
            ev_run(loop, EVRUN_ONCE);
    }
    io_read_stop(s);
    ev_timer_stop(loop, &tmo);
    s->on_drain = NULL;
    if (got == (size_t)-1 || expired)
        return -1;
    return (ssize_t)got;
}

/* "hello\n" comes back from s_server -rev as "olleh\n". */
static void
assert_echo(struct ev_loop *loop, struct io_stream *s)
{
    char buf[16] = {0};
    assert_int_equal(exchange(loop, s, "hello\n", 6, buf, 6, 5.0), 6);
    assert_memory_equal(buf, "olleh\n", 6);
}

/* ---- tests ---------------------------------------------------------------- */

static void
test_trusted_echo_and_alpn(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("ca.pem");
    assert_int_equal(tls_ctx_anchor_count(t), 1);

    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    struct hs r = handshake(loop, t, E.dns.port, &o);
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
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    dial_bufsize = 16384;
    struct hs r = handshake(loop, t, E.dns.port, &o);
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
    eagains = 0;
    ssize_t got = exchange(loop, r.s, out, (size_t)LINE * LINES, in, (size_t)LINE * LINES, 20.0);
    io_close(r.s, 0); /* first: s_server serves one client at a time */
    assert_int_equal(got, (ssize_t)LINE * LINES);
    assert_true(eagains > 0); /* the EV_WRITE watcher and on_drain did run */
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
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    struct hs r = handshake(loop, t, E.dns.port, &o);
    assert_int_equal(r.err, 0);
    assert_int_equal(io_write(r.s, "hello\n", 6), 6);
    assert_int_equal(r.s->ops->shutdown(r.s), 0);
    assert_int_equal(io_write(r.s, "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    char buf[8] = {0};
    size_t got = 0;
    int expired = 0;
    ev_timer tmo;
    ev_timer_init(&tmo, on_timeout, 5.0, 0);
    tmo.data = &expired;
    ev_timer_start(loop, &tmo);
    r.s->on_readable = noop_readable;
    io_read_start(r.s);
    while (got < 6 && !expired) {
        ssize_t n = io_read(r.s, buf + got, 6 - got);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0 || errno != EAGAIN)
            break;
        else
            ev_run(loop, EVRUN_ONCE);
    }
    io_read_stop(r.s);
    ev_timer_stop(loop, &tmo);
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
    struct hs r = handshake(loop, t, port, o);
    assert_null(r.s);
    assert_int_not_equal(r.err, 0);
    assert_string_equal(r.why, why);
}

static void
test_names_and_addresses(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("ca.pem");
    const char *another = "tls: certificate is for another name";

    struct tls_client_opts wrong = {.host = "other.test", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &wrong, another);
    /* The SNI may differ from the name the certificate must carry. */
    struct tls_client_opts sni = {.host = "other.test", .sni = "localhost", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &sni, another);
    struct tls_client_opts sni_ok = {.host = "localhost", .sni = "x.test", .port = E.dns.port};
    struct hs r = handshake(loop, t, E.dns.port, &sni_ok);
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
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("other.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    expect_failure(loop, t, E.dns.port, &o, "tls: certificate not trusted");

    o.skip_verify = 1;
    struct hs r = handshake(loop, t, E.dns.port, &o);
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
    expect_failure(loop, t, E.dns.port, &o, "tls: certificate not trusted");
    tls_ctx_free(t);
    ev_loop_destroy(loop);
}

static void
test_tls13_only_server(void **state)
{
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.tls13.port};
    struct hs r = handshake(loop, t, E.tls13.port, &o);
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
    NEED_OPENSSL();
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct tls_ctx *t = ctx_for("ca.pem");
    struct tls_client_opts o = {.host = "localhost", .port = E.dns.port};
    double full = 0, resumed = 0;
    enum { ROUNDS = 5 };
    for (int i = 0; i < ROUNDS + 1; i++) {
        struct hs r = handshake(loop, t, E.dns.port, &o);
        assert_int_equal(r.err, 0);
        assert_int_equal(tls_stream_resumed(r.s), i > 0);
        assert_echo(loop, r.s);
        io_close(r.s, 0); /* close_notify: OpenSSL keeps the session */
        if (i == 0)
            full = r.ms;
        else
            resumed += r.ms / ROUNDS;
    }
    /* A session is per (host, port, SNI): another SNI starts afresh. */
    struct tls_client_opts o2 = {.host = "localhost", .sni = "localhost.", .port = E.dns.port};
    struct hs r = handshake(loop, t, E.dns.port, &o2);
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

/* A listener that never answers: the handshake waits for the server. */
static int
silent_listener(unsigned short *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void
test_cancel(void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    char err[256];
    struct tls_ctx *t = E.ok ? ctx_for("ca.pem") : tls_ctx_new(NULL, err, sizeof(err));
    if (t == NULL) /* no test CA without openssl, and no system trust store */
        peer_missing("openssl", "is not on PATH and the system trust store did not load");
    unsigned short port;
    int lfd = silent_listener(&port);
    struct tls_client_opts o = {.host = "localhost", .port = port};
    struct hs r = {0};

    /* Before the loop ran, and after the ClientHello went out. */
    for (int run = 0; run < 2; run++) {
        int fd = dial(port);
        assert_true(fd >= 0);
        struct tls_handshake *h = tls_client_start(t, io_fd_new(loop, fd), &o, on_hs, &r);
        assert_non_null(h);
        if (run)
            ev_run(loop, EVRUN_NOWAIT);
        assert_false(r.done);
        tls_handshake_cancel(h);
        ev_run(loop, EVRUN_NOWAIT);
        assert_false(r.done);
    }

    /* A bad option is reported from the loop too. */
    struct tls_client_opts bad = {.host = "", .port = 1};
    r = handshake(loop, t, port, &bad);
    assert_null(r.s);
    assert_int_equal(r.err, EINVAL);
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
    t = ctx_for("ca_nonl.pem"); /* no final newline: still one anchor */
    assert_int_equal(tls_ctx_anchor_count(t), 1);
    tls_ctx_free(t);
    char path[128];
    snprintf(path, sizeof(path), "%s/empty.pem", E.dir);
    assert_null(tls_ctx_new(path, err, sizeof(err)));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "no certificate"));
}

static size_t
read_der(const char *name, unsigned char *buf, size_t cap)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", E.dir, name);
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
    struct tls_ctx *t = E.ok ? ctx_for("ca.pem") : tls_ctx_new(NULL, err, sizeof(err));
    if (t == NULL) /* no test CA without openssl, and no system trust store */
        peer_missing("openssl", "is not on PATH and the system trust store did not load");
    unsigned short port;
    int lfd = silent_listener(&port);
    struct tls_client_opts o = {.host = "localhost", .port = port};
    struct hs r = {0};
    int fd = dial(port);
    assert_true(fd >= 0);
    int sfd = accept(lfd, NULL, NULL);
    assert_true(sfd >= 0);
    close(sfd);
    assert_non_null(tls_client_start(t, io_fd_new(loop, fd), &o, on_hs, &r));
    for (int i = 0; i < 100 && !r.done; i++)
        ev_run(loop, EVRUN_ONCE);
    assert_true(r.done);
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
