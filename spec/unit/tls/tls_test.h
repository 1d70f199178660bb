#ifndef CHUTE_SPEC_UNIT_TLS_TLS_TEST_H
#define CHUTE_SPEC_UNIT_TLS_TLS_TEST_H

/* What the core/tls tests share: certificates made with the openssl CLI in
 * a temp dir, sockets, the loop, a stream owner that records what the
 * stream did, and an in-memory stream pair (a transport that is no socket
 * and takes a few hundred bytes at a time). Included by each test file;
 * everything is static. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/io.h"
#include "tls/tls.h"

#define TT_UNUSED __attribute__((unused))

static struct {
    int ok; /* openssl present and the certificates made */
    char dir[64];
} TT;

static TT_UNUSED __attribute__((format(printf, 1, 2))) int
tt_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

static TT_UNUSED void
tt_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", TT.dir, name);
}

/* The whole file |name| in TT.dir, NUL-terminated (free it). */
static TT_UNUSED char *
tt_read(const char *name, size_t *len)
{
    char path[128];
    tt_path(path, sizeof(path), name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(65536);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

static TT_UNUSED unsigned short
tt_free_port(void)
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

/* Non-blocking, and no Nagle, as chute's callers set their sockets: the
 * engine hands out one record per write, so a flight is several writes. */
static TT_UNUSED void
tt_nonblock(int fd)
{
    int one = 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static TT_UNUSED void
tt_bufsize(int fd, int bufsize)
{
    if (bufsize > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
    }
}

/* Blocking connect to 127.0.0.1:|port|, then non-blocking. |bufsize| > 0
 * shrinks the socket buffers so that writes block soon. */
static TT_UNUSED int
tt_dial(unsigned short port, int bufsize)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    tt_bufsize(fd, bufsize);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    tt_nonblock(fd);
    return fd;
}

/* A listener on 127.0.0.1 (blocking); its port in |*port|. */
static TT_UNUSED int
tt_listen(unsigned short *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Two connected non-blocking TCP sockets over loopback (a reset is a real
 * RST there, unlike a socketpair). */
static TT_UNUSED void
tt_tcp_pair(int fds[2], int bufsize)
{
    unsigned short port;
    int lfd = tt_listen(&port);
    if (bufsize > 0)
        tt_bufsize(lfd, bufsize); /* inherited by the accepted socket */
    fds[0] = tt_dial(port, bufsize);
    assert_true(fds[0] >= 0);
    fds[1] = accept(lfd, NULL, NULL);
    assert_true(fds[1] >= 0);
    tt_nonblock(fds[1]);
    close(lfd);
}

/* Certificates: two P-256 CAs ("ca", "other"); leaves signed by ca: "dns"
 * (localhost), "ip" (127.0.0.1, ::1), "p384" (localhost, P-384 key) and
 * "rsa" (localhost, RSA key); "dns_ec.key" is dns.key as "EC PRIVATE
 * KEY", "dns_param.key" the same after an "EC PARAMETERS" block, and
 * "chain.pem" is dns.pem then ca.pem. */
static TT_UNUSED int
tt_make_certs(void)
{
    const char *d = TT.dir;
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    const char *ca_ext = "-addext basicConstraints=critical,CA:TRUE "
                         "-addext keyUsage=critical,keyCertSign,cRLSign";
    if (tt_sh("cd %s && openssl req -x509 %s -keyout ca.key -out ca.pem -days 30 "
              "-subj '/CN=chute test CA' %s >>gen.log 2>&1", d, ec, ca_ext) != 0 ||
        tt_sh("cd %s && openssl req -x509 %s -keyout other.key -out other.pem -days 30 "
              "-subj '/CN=chute other CA' %s >>gen.log 2>&1", d, ec, ca_ext) != 0)
        return -1;
    static const struct {
        const char *name, *cn, *san, *key;
    } leaves[] = {
        {"dns", "localhost", "DNS:localhost", "ec -pkeyopt ec_paramgen_curve:P-256"},
        {"ip", "chute ip test", "IP:127.0.0.1,IP:::1", "ec -pkeyopt ec_paramgen_curve:P-256"},
        {"p384", "localhost", "DNS:localhost", "ec -pkeyopt ec_paramgen_curve:P-384"},
        {"rsa", "localhost", "DNS:localhost", "rsa:2048"},
    };
    for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
        if (tt_sh("cd %s && printf 'subjectAltName=%s\\nbasicConstraints=critical,CA:FALSE\\n"
                  "keyUsage=critical,digitalSignature\\nextendedKeyUsage=serverAuth\\n' >%s.ext && "
                  "openssl req -newkey %s -nodes -keyout %s.key -out %s.csr -subj '/CN=%s' "
                  ">>gen.log 2>&1 && "
                  "openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
                  "-out %s.pem -days 30 -extfile %s.ext >>gen.log 2>&1",
                  d, leaves[i].san, leaves[i].name, leaves[i].key, leaves[i].name,
                  leaves[i].name, leaves[i].cn, leaves[i].name, leaves[i].name,
                  leaves[i].name) != 0)
            return -1;
    }
    /* "expired": dns's twin whose notAfter passed a day ago. */
    if (tt_sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
              "-keyout expired.key -out expired.csr -subj /CN=localhost >>gen.log 2>&1 && "
              "openssl x509 -req -in expired.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
              "-out expired.pem -days -1 -extfile dns.ext >>gen.log 2>&1", d) != 0)
        return -1;
    /* The CA without its final newline, a file with no certificate, DER,
     * the key in its other encodings, a chain. */
    if (tt_sh("cd %s && head -c -1 ca.pem >ca_nonl.pem && echo nothing >empty.pem && "
              "openssl x509 -in ip.pem -outform DER -out ip.der && "
              "openssl x509 -in dns.pem -outform DER -out dns.der && "
              "openssl ec -in dns.key -out dns_ec.key >>gen.log 2>&1 && "
              "{ openssl ecparam -name prime256v1; cat dns_ec.key; } >dns_param.key && "
              "cat dns.pem ca.pem >chain.pem", d) != 0)
        return -1;
    return 0;
}

/* Makes the temp dir and the certificates: 0, or 1 when openssl is
 * missing (the tests that need it skip), -1 on failure. */
static TT_UNUSED int
tt_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (tt_sh("openssl version >/dev/null 2>&1") != 0)
        return 1;
    strcpy(TT.dir, "/tmp/chute-tls-XXXXXX");
    if (mkdtemp(TT.dir) == NULL) {
        TT.dir[0] = '\0';
        return -1;
    }
    if (tt_make_certs() != 0)
        return -1;
    TT.ok = 1;
    return 0;
}

static TT_UNUSED void
tt_teardown(void)
{
    if (TT.dir[0] != '\0')
        tt_sh("rm -rf %s", TT.dir);
    TT.dir[0] = '\0';
}

/* A test that needs openssl and cannot run leaves through here: a skip,
 * or, with spec/unit/peer.h (a failure under CI=true), peer_missing. */
#if __has_include("../peer.h")
#include "../peer.h"
#define TT_PEER_MISSING(why) peer_missing("openssl", why)
#else
#define TT_PEER_MISSING(why) skip()
#endif

#define NEED_OPENSSL()                                                                             \
    do {                                                                                           \
        if (!TT.ok)                                                                                \
            TT_PEER_MISSING("is not on PATH");                                                     \
    } while (0)

static TT_UNUSED struct tls_ctx *
tt_ctx(const char *pem)
{
    char path[128], err[256];
    tt_path(path, sizeof(path), pem);
    struct tls_ctx *t = tls_ctx_new(path, err, sizeof(err));
    if (t == NULL)
        fail_msg("%s", err);
    return t;
}

/* A server configuration from TT.dir's |cert|.pem and |key|; NULL with
 * the reason in |err|. */
static TT_UNUSED struct tls_server_cfg *
tt_cfg(const char *cert, const char *key, char *err, size_t errlen)
{
    char *c = tt_read(cert, NULL), *k = tt_read(key, NULL);
    struct tls_server_cfg *cfg = tls_server_cfg_new_pem(c, k, err, errlen);
    free(c);
    free(k);
    return cfg;
}

static TT_UNUSED void
tt_expect_stats(const struct tls_server_cfg *cfg, unsigned long long handshakes,
                unsigned long long resumed, unsigned long long failures,
                unsigned long long resume_refused)
{
    struct tls_server_stats st;
    tls_server_cfg_stats(cfg, &st);
    assert_int_equal(st.handshakes, handshakes);
    assert_int_equal(st.resumed, resumed);
    assert_int_equal(st.failures, failures);
    assert_int_equal(st.resume_refused, resume_refused);
}

static TT_UNUSED double
tt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
tt_on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    *(int *)w->data = 1;
}

/* Runs the loop until *|flag| or |seconds| passed: 1 if the flag came. */
static TT_UNUSED int
tt_run_until(struct ev_loop *loop, const int *flag, double seconds)
{
    int expired = 0;
    ev_timer tmo;
    ev_timer_init(&tmo, tt_on_timeout, seconds, 0);
    tmo.data = &expired;
    ev_timer_start(loop, &tmo);
    while (!*flag && !expired)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tmo);
    return *flag;
}

static TT_UNUSED void
tt_run_for(struct ev_loop *loop, double seconds)
{
    int never = 0;
    tt_run_until(loop, &never, seconds);
}

/* ---- the handshake's result ------------------------------------------- */

/* Set while a test is inside a call into a stream or tls_*_start: a
 * callback that fires then breaks the contract. */
static int tt_in_call;

struct tt_hs {
    int done, err;
    struct io_stream *s;
    char why[160];
};

static TT_UNUSED void
tt_on_hs(void *arg, struct io_stream *s, int err, const char *why)
{
    struct tt_hs *r = arg;
    assert_false(tt_in_call);
    assert_false(r->done); /* exactly once */
    r->done = 1;
    r->s = s;
    r->err = err;
    snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

static TT_UNUSED struct tls_handshake *
tt_client(struct tls_ctx *t, struct io_stream *inner, const struct tls_client_opts *o,
          struct tt_hs *r)
{
    tt_in_call = 1;
    struct tls_handshake *h = tls_client_start(t, inner, o, tt_on_hs, r);
    tt_in_call = 0;
    assert_non_null(h);
    assert_false(r->done); /* never from inside the call */
    return h;
}

static TT_UNUSED struct tls_handshake *
tt_server(struct tls_server_cfg *cfg, struct io_stream *inner, struct tt_hs *r)
{
    tt_in_call = 1;
    struct tls_handshake *h = tls_server_start(cfg, inner, tt_on_hs, r);
    tt_in_call = 0;
    assert_non_null(h);
    assert_false(r->done);
    return h;
}

/* ---- an owner that moves bytes through a stream from its callbacks ----- */

/* Writes |out| as the stream takes it (waiting for on_drain after a
 * partial write or EAGAIN) and reads into |in| until |want| bytes or the
 * end; with |paused| it does not read until tt_peer_resume. */
struct tt_peer {
    struct io_stream *s;
    const char *out;
    size_t len, sent;
    char *in;
    size_t want, got;
    int waiting_drain, paused, shut_after; /* shut_after: shutdown once all is sent */
    int eof, err;                          /* read() gave 0, or failed with err */
    int werr;                              /* writev() failed with werr */
    int done_writing, done;                /* done: all sent and |want| read (or eof) */
    unsigned drains, eagains, partials, readables;
};

static TT_UNUSED void
tt_peer_check(struct tt_peer *p)
{
    p->done = p->done_writing && (p->got >= p->want || p->eof || p->err);
}

static void
tt_peer_write(struct tt_peer *p)
{
    while (!p->waiting_drain && p->sent < p->len) {
        tt_in_call = 1;
        ssize_t n = io_write(p->s, p->out + p->sent, p->len - p->sent);
        tt_in_call = 0;
        if (n > 0) {
            p->sent += (size_t)n;
            if (p->sent < p->len) {
                p->partials++;
                p->waiting_drain = 1;
            }
        } else if (n < 0 && errno == EAGAIN) {
            p->eagains++;
            p->waiting_drain = 1;
        } else {
            assert_int_equal(n, -1);
            p->werr = errno;
            return;
        }
    }
    if (p->sent == p->len && !p->done_writing) {
        p->done_writing = 1;
        if (p->shut_after) {
            tt_in_call = 1;
            assert_int_equal(io_shutdown(p->s), 0);
            tt_in_call = 0;
        }
    }
    tt_peer_check(p);
}

static void
tt_peer_readable(void *arg)
{
    struct tt_peer *p = arg;
    assert_false(tt_in_call);
    p->readables++;
    for (;;) {
        char scratch[1];
        char *dst = p->got < p->want ? p->in + p->got : scratch;
        size_t cap = p->got < p->want ? p->want - p->got : sizeof(scratch);
        if (cap > 16384)
            cap = 16384;
        tt_in_call = 1;
        ssize_t n = io_read(p->s, dst, cap);
        tt_in_call = 0;
        if (n > 0) {
            assert_true(p->got < p->want); /* nothing beyond what was expected */
            p->got += (size_t)n;
            continue;
        }
        if (n == 0) {
            p->eof = 1;
            io_read_stop(p->s);
        } else if (errno != EAGAIN) {
            p->err = errno;
            io_read_stop(p->s);
        }
        break;
    }
    tt_peer_check(p);
}

static void
tt_peer_drain(void *arg)
{
    struct tt_peer *p = arg;
    assert_false(tt_in_call);
    p->drains++;
    p->waiting_drain = 0;
    tt_peer_write(p);
}

static TT_UNUSED void
tt_peer_start(struct tt_peer *p, struct io_stream *s)
{
    p->s = s;
    io_set_callbacks(s, tt_peer_readable, tt_peer_drain, p);
    if (!p->paused) {
        tt_in_call = 1;
        io_read_start(s);
        tt_in_call = 0;
    }
    tt_peer_write(p);
}

static TT_UNUSED void
tt_peer_resume(struct tt_peer *p)
{
    p->paused = 0;
    io_read_start(p->s);
}

/* |n| bytes of a pattern that shows misplaced data. */
static TT_UNUSED char *
tt_pattern(size_t n, unsigned seed)
{
    char *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (char)((i * 131 + seed * 7 + i / 4096) & 0xff);
    return b;
}

/* ---- a server against openssl s_client ---------------------------------- */

/* One server on a listener, serving each connection: the handshake, then
 * reading until the client's end. */
struct tt_srv {
    struct ev_loop *loop;
    struct tls_server_cfg *cfg;
    int lfd;
    unsigned short port;
    ev_io acc;
    struct tt_srv_conn {
        struct tt_hs r;
        struct tt_peer p;
        char in[256];
        char alpn[16]; /* what the stream said, kept past its close */
        int resumed, reading, closed;
    } c[8];
    int n;
};

static TT_UNUSED void
tt_on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
    struct tt_srv *S = w->data;
    int fd = accept(S->lfd, NULL, NULL);
    if (fd < 0)
        return;
    assert_true(S->n < 8);
    tt_nonblock(fd);
    struct tt_srv_conn *c = &S->c[S->n++];
    memset(c, 0, sizeof(*c));
    tt_server(S->cfg, io_fd_new(loop, fd), &c->r);
}

/* Moves each connection on: reading once the handshake is done, closed
 * once the client ended. 1 when every connection is over. */
static TT_UNUSED int
tt_serve(struct tt_srv *S)
{
    int over = 1;
    for (int i = 0; i < S->n; i++) {
        struct tt_srv_conn *c = &S->c[i];
        if (c->r.done && c->r.s != NULL && !c->reading) {
            c->reading = 1;
            snprintf(c->alpn, sizeof(c->alpn), "%s",
                     tls_stream_alpn(c->r.s) ? tls_stream_alpn(c->r.s) : "");
            c->resumed = tls_stream_resumed(c->r.s);
            c->p = (struct tt_peer){.in = c->in, .want = sizeof(c->in)};
            tt_peer_start(&c->p, c->r.s);
        }
        if (c->reading && !c->closed && c->p.done) {
            io_close(c->r.s, 0);
            c->closed = 1;
        }
        over &= c->r.done && (c->r.s == NULL || c->closed);
    }
    return over;
}

static TT_UNUSED void
tt_srv_start(struct tt_srv *S, struct ev_loop *loop, struct tls_server_cfg *cfg)
{
    memset(S, 0, sizeof(*S));
    S->loop = loop;
    S->cfg = cfg;
    S->lfd = tt_listen(&S->port);
    tt_nonblock(S->lfd);
    ev_io_init(&S->acc, tt_on_accept, S->lfd, EV_READ);
    S->acc.data = S;
    ev_io_start(loop, &S->acc);
}

/* Stops |S| and frees its configuration and loop. */
static TT_UNUSED void
tt_srv_end(struct tt_srv *S)
{
    ev_io_stop(S->loop, &S->acc);
    close(S->lfd);
    tls_server_cfg_free(S->cfg);
    ev_loop_destroy(S->loop);
}

/* Runs |cmd| under /bin/sh in a child that dies with us. */
static TT_UNUSED pid_t
tt_spawn_sh(const char *cmd)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs `openssl s_client -connect ... <extra>` (stdin empty, so it ends
 * right after the handshake) against |S| until both are done; its exit
 * status, its output in |log|. */
static TT_UNUSED int
tt_s_client(struct tt_srv *S, const char *extra, char *log, size_t loglen)
{
    char cmd[1400], logp[128];
    static int runs;
    snprintf(logp, sizeof(logp), "%s/s_client-%d.log", TT.dir, runs++);
    snprintf(cmd, sizeof(cmd),
             "exec openssl s_client -connect 127.0.0.1:%u %s </dev/null >%s 2>&1", S->port,
             extra, logp);
    int first = S->n;
    pid_t pid = tt_spawn_sh(cmd);
    int status = -1, exited = 0;
    double end = tt_now_ms() + 10000;
    while (tt_now_ms() < end) {
        if (!exited && waitpid(pid, &status, WNOHANG) == pid)
            exited = 1;
        if (exited && S->n > first && tt_serve(S))
            break;
        if (exited && S->n == first && tt_now_ms() > end - 9000)
            break; /* it never connected */
        tt_run_for(S->loop, 0.01);
        tt_serve(S);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("s_client %s: timed out", extra);
    }
    FILE *f = fopen(logp, "r");
    assert_non_null(f);
    size_t n = fread(log, 1, loglen - 1, f);
    log[n] = '\0';
    fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- an in-memory stream pair -------------------------------------------- */

/* Each end holds what the other wrote, |cap| bytes at most, so writes are
 * partial and on_drain runs all the time; callbacks come from the loop
 * (io_soon), as the contract says. tt_mem_closes counts close() calls. */
struct tt_mem {
    struct io_stream s;
    struct tt_mem *peer; /* NULL once the peer closed */
    unsigned char *buf;  /* bytes for us to read */
    size_t len, cap;
    int reading, want_drain, shut, peer_shut, peer_reset;
    struct io_soon rk, dk;
};

static int tt_mem_closes;

static int
tt_mem_readable(const struct tt_mem *m)
{
    return m->len > 0 || m->peer_shut || m->peer_reset || m->peer == NULL;
}

static void
tt_mem_rk(void *arg)
{
    struct tt_mem *m = arg;
    if (m->reading && tt_mem_readable(m) && m->s.on_readable != NULL) {
        io_soon_arm(m->s.loop, &m->rk);
        m->s.on_readable(m->s.arg);
    }
}

static void
tt_mem_dk(void *arg)
{
    struct tt_mem *m = arg;
    if (m->want_drain && m->s.on_drain != NULL) {
        m->want_drain = 0;
        m->s.on_drain(m->s.arg);
    }
}

static ssize_t
tt_mem_read(struct io_stream *s, void *out, size_t cap)
{
    struct tt_mem *m = (struct tt_mem *)s;
    if (m->len == 0) {
        io_soon_cancel(s->loop, &m->rk);
        if (m->peer_reset) {
            errno = ECONNRESET;
            return -1;
        }
        if (m->peer_shut || m->peer == NULL)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    size_t n = m->len < cap ? m->len : cap;
    memcpy(out, m->buf, n);
    memmove(m->buf, m->buf + n, m->len - n);
    m->len -= n;
    if (m->peer != NULL && m->peer->want_drain)
        io_soon_arm(s->loop, &m->peer->dk);
    return (ssize_t)n;
}

static ssize_t
tt_mem_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct tt_mem *m = (struct tt_mem *)s, *p = m->peer;
    size_t total = 0, want = 0;
    if (m->shut || p == NULL) {
        errno = EPIPE;
        return -1;
    }
    for (int i = 0; i < iovcnt; i++) {
        size_t k = iov[i].iov_len;
        want += k;
        if (k > p->cap - p->len)
            k = p->cap - p->len;
        memcpy(p->buf + p->len, iov[i].iov_base, k);
        p->len += k;
        total += k;
    }
    if (total > 0 && p->reading)
        io_soon_arm(s->loop, &p->rk);
    if (total < want)
        m->want_drain = 1;
    if (total == 0 && want > 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)total;
}

static int
tt_mem_shutdown(struct io_stream *s)
{
    struct tt_mem *m = (struct tt_mem *)s;
    m->shut = 1;
    if (m->peer != NULL) {
        m->peer->peer_shut = 1;
        if (m->peer->reading)
            io_soon_arm(s->loop, &m->peer->rk);
    }
    return 0;
}

static void
tt_mem_read_start(struct io_stream *s)
{
    struct tt_mem *m = (struct tt_mem *)s;
    m->reading = 1;
    if (tt_mem_readable(m))
        io_soon_arm(s->loop, &m->rk);
}

static void
tt_mem_read_stop(struct io_stream *s)
{
    struct tt_mem *m = (struct tt_mem *)s;
    m->reading = 0;
    io_soon_cancel(s->loop, &m->rk);
}

static void
tt_mem_close(struct io_stream *s, int reset)
{
    struct tt_mem *m = (struct tt_mem *)s;
    tt_mem_closes++;
    if (m->peer != NULL) {
        m->peer->peer = NULL;
        m->peer->peer_reset = reset;
        if (m->peer->reading)
            io_soon_arm(s->loop, &m->peer->rk);
        if (m->peer->want_drain)
            io_soon_arm(s->loop, &m->peer->dk);
    }
    io_soon_cancel(s->loop, &m->rk);
    io_soon_cancel(s->loop, &m->dk);
    free(m->buf);
    free(m);
}

static const struct io_stream_ops tt_mem_ops = {
    .name = "mem",
    .read = tt_mem_read,
    .writev = tt_mem_writev,
    .shutdown = tt_mem_shutdown,
    .read_start = tt_mem_read_start,
    .read_stop = tt_mem_read_stop,
    .close = tt_mem_close,
};

static TT_UNUSED void
tt_mem_pair(struct ev_loop *loop, size_t cap, struct io_stream *ends[2])
{
    struct tt_mem *m[2];
    for (int i = 0; i < 2; i++) {
        m[i] = calloc(1, sizeof(*m[i]));
        assert_non_null(m[i]);
        m[i]->buf = malloc(cap);
        assert_non_null(m[i]->buf);
        m[i]->cap = cap;
        m[i]->s = (struct io_stream){.ops = &tt_mem_ops, .loop = loop};
        io_soon_init(&m[i]->rk, tt_mem_rk, m[i]);
        io_soon_init(&m[i]->dk, tt_mem_dk, m[i]);
        ends[i] = &m[i]->s;
    }
    m[0]->peer = m[1];
    m[1]->peer = m[0];
}

#endif
