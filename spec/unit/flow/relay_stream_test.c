#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../heap.h"
#include "flow/relay.h"
#include "io/io.h"

/* The relay's stream mode between a client socket (io_fd_new) and a fake
 * buffering stream: XOR 0x5A over a socketpair, with a tiny send buffer
 * (EAGAIN + on_drain on every few KiB), reads that hand out a few KiB at a
 * time from a larger decoded buffer (so the stream's promise to call
 * on_readable for bytes it holds matters: the socket under it stays quiet
 * for them), and an optional EBADMSG after N bytes. The client and the
 * server behind the stream are threads doing their own I/O. */

#define KEY 0x5A
#define FAKE_OUT 4096
#define FAKE_IN (320 * 1024) /* more than the relay's buffer: bytes stay held */
#define MIB (1024 * 1024)

struct fake_log {
    int closed, reset;
    uint64_t eagains, drains;
    uint64_t kicks; /* on_readable calls for held bytes (the socket quiet) */
};

struct fake {
    struct io_stream s;
    int fd;
    ev_io rd, wr;
    struct io_soon kick; /* on_readable for bytes held in in[] */
    int reading;
    uint8_t out[FAKE_OUT];
    size_t out_len;
    uint8_t in[FAKE_IN];
    size_t in_off, in_len;
    size_t chunk;       /* most bytes one read() returns */
    uint64_t bad_after; /* EBADMSG once this many were read; 0: never */
    uint64_t read_total;
    int err, shut_req, shut_done, want_drain;
    struct fake_log *log;
};

/* Something a read() would return without touching the socket. */
static int
fake_holds(const struct fake *f)
{
    return f->in_off < f->in_len || f->err != 0 ||
           (f->bad_after > 0 && f->read_total >= f->bad_after);
}

static void
fake_flush(struct fake *f)
{
    while (f->out_len > 0 && f->err == 0) {
        ssize_t n = send(f->fd, f->out, f->out_len, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n < 0) {
            f->err = errno;
            break;
        }
        memmove(f->out, f->out + n, f->out_len - (size_t)n);
        f->out_len -= (size_t)n;
    }
    if (f->out_len > 0 && f->err == 0) {
        ev_io_start(f->s.loop, &f->wr);
        return;
    }
    ev_io_stop(f->s.loop, &f->wr);
    if (f->shut_req && !f->shut_done) {
        f->shut_done = 1;
        shutdown(f->fd, SHUT_WR);
    }
}

static void
fake_on_write(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fake *f = w->data;
    fake_flush(f);
    if (f->err != 0 || (f->want_drain && f->out_len < FAKE_OUT)) {
        f->want_drain = 0;
        f->log->drains++;
        if (f->err != 0 && f->reading)
            io_soon_arm(f->s.loop, &f->kick); /* the next read reports it */
        if (f->s.on_drain != NULL)
            f->s.on_drain(f->s.arg); /* last: the owner may close us */
    }
}

static void
fake_on_read(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fake *f = w->data;
    if (f->s.on_readable != NULL)
        f->s.on_readable(f->s.arg);
}

static void
fake_on_kick(void *arg)
{
    struct fake *f = arg;
    if (!f->reading || !fake_holds(f))
        return;
    f->log->kicks++;
    if (f->s.on_readable != NULL)
        f->s.on_readable(f->s.arg);
}

static ssize_t
fake_read_held(struct fake *f, void *buf, size_t len);

/* Like a decrypting stream: bytes it holds after a read come back through
 * on_readable from the loop (the owner may stop before EAGAIN), so the
 * kick is armed while anything is held and cancelled once all was read. */
static ssize_t
fake_read(struct io_stream *s, void *buf, size_t len)
{
    struct fake *f = (struct fake *)s;
    int saved;
    ssize_t n = fake_read_held(f, buf, len);
    saved = errno;
    if (f->reading && fake_holds(f))
        io_soon_arm(s->loop, &f->kick);
    else
        io_soon_cancel(s->loop, &f->kick);
    errno = saved;
    return n;
}

/* Decoded bytes held: >0, or what recv said (0, -1) when none. */
static ssize_t
fake_fill(struct fake *f)
{
    if (f->in_off < f->in_len)
        return 1;
    /* Greedy, like a stream that decrypts ahead: more than the relay
     * asks for ends up held. */
    f->in_off = f->in_len = 0;
    while (f->in_len < sizeof(f->in)) {
        ssize_t n = recv(f->fd, f->in + f->in_len, sizeof(f->in) - f->in_len, 0);
        if (n <= 0 && f->in_len == 0)
            return n;
        if (n <= 0)
            break; /* the EOF or error comes with the next read */
        for (ssize_t i = 0; i < n; i++)
            f->in[f->in_len + (size_t)i] ^= KEY;
        f->in_len += (size_t)n;
    }
    return 1;
}

/* How many held bytes one read (of at most |len|) hands out. */
static size_t
fake_hand(const struct fake *f, size_t len)
{
    size_t n = f->in_len - f->in_off;
    if (n > len)
        n = len;
    if (f->chunk > 0 && n > f->chunk)
        n = f->chunk;
    if (f->bad_after > 0 && n > f->bad_after - f->read_total)
        n = f->bad_after - f->read_total;
    return n;
}

static ssize_t
fake_read_held(struct fake *f, void *buf, size_t len)
{
    if (f->err != 0) {
        errno = f->err;
        return -1;
    }
    if (f->bad_after > 0 && f->read_total >= f->bad_after) {
        errno = EBADMSG;
        return -1;
    }
    ssize_t r = fake_fill(f);
    if (r <= 0)
        return r;
    size_t n = fake_hand(f, len);
    memcpy(buf, f->in + f->in_off, n);
    f->in_off += n;
    f->read_total += n;
    return (ssize_t)n;
}

static ssize_t
fake_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct fake *f = (struct fake *)s;
    if (f->err != 0 || f->shut_req) {
        errno = f->err != 0 ? f->err : EPIPE;
        return -1;
    }
    if (f->out_len == FAKE_OUT) {
        f->want_drain = 1;
        f->log->eagains++;
        errno = EAGAIN;
        return -1;
    }
    size_t took = 0;
    for (int i = 0; i < iovcnt && f->out_len < FAKE_OUT; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t n = iov[i].iov_len;
        if (n > FAKE_OUT - f->out_len)
            n = FAKE_OUT - f->out_len;
        for (size_t j = 0; j < n; j++)
            f->out[f->out_len + j] = p[j] ^ KEY;
        f->out_len += n;
        took += n;
    }
    fake_flush(f);
    return (ssize_t)took;
}

static int
fake_shutdown(struct io_stream *s)
{
    struct fake *f = (struct fake *)s;
    f->shut_req = 1;
    fake_flush(f);
    return 0;
}

static void
fake_read_start(struct io_stream *s)
{
    struct fake *f = (struct fake *)s;
    f->reading = 1;
    ev_io_start(s->loop, &f->rd);
    if (fake_holds(f))
        io_soon_arm(s->loop, &f->kick);
}

static void
fake_read_stop(struct io_stream *s)
{
    struct fake *f = (struct fake *)s;
    f->reading = 0;
    ev_io_stop(s->loop, &f->rd);
    io_soon_cancel(s->loop, &f->kick);
}

static void
fake_close(struct io_stream *s, int reset)
{
    struct fake *f = (struct fake *)s;
    ev_io_stop(s->loop, &f->wr);
    ev_io_stop(s->loop, &f->rd);
    io_soon_cancel(s->loop, &f->kick);
    if (!reset && f->err == 0 && f->out_len > 0) {
        /* A graceful close delivers what it holds (the peer thread reads). */
        fcntl(f->fd, F_SETFL, 0);
        fake_flush(f);
    }
    f->log->closed++;
    f->log->reset = reset;
    close(f->fd);
    free(f);
}

/* The held bytes where they lie, as Shadowsocks and TLS offer them: in
 * two iovecs when there are two or more, so the relay's writev gets
 * pieces; consume drops what the relay wrote on. */
static uint64_t fake_peeks;

static void
fake_rearm(struct fake *f)
{
    if (f->reading && fake_holds(f))
        io_soon_arm(f->s.loop, &f->kick);
    else
        io_soon_cancel(f->s.loop, &f->kick);
}

static int
fake_peek(struct io_stream *s, struct iovec *iov, int max)
{
    struct fake *f = (struct fake *)s;
    ssize_t r = -1;
    if (f->err != 0)
        errno = f->err;
    else if (f->bad_after > 0 && f->read_total >= f->bad_after)
        errno = EBADMSG;
    else
        r = fake_fill(f);
    int saved = errno;
    if (r > 0) {
        size_t n = fake_hand(f, SIZE_MAX), half = n / 2;
        fake_peeks++;
        r = max >= 2 && half > 0 ? 2 : 1;
        iov[0] = (struct iovec){f->in + f->in_off, r == 2 ? half : n};
        if (r == 2)
            iov[1] = (struct iovec){f->in + f->in_off + half, n - half};
    }
    fake_rearm(f);
    errno = saved;
    return (int)r;
}

static void
fake_consume(struct io_stream *s, size_t n)
{
    struct fake *f = (struct fake *)s;
    assert_true(n <= f->in_len - f->in_off);
    f->in_off += n;
    f->read_total += n;
    fake_rearm(f);
}

#define FAKE_OPS                                                                                   \
    .name = "fake", .read = fake_read, .writev = fake_writev, .shutdown = fake_shutdown,           \
    .read_start = fake_read_start, .read_stop = fake_read_stop, .close = fake_close

static const struct io_stream_ops fake_ops = {FAKE_OPS};
static const struct io_stream_ops fake_peek_ops = {FAKE_OPS, .peek = fake_peek,
                                                   .consume = fake_consume};
/* Set: new fakes offer peek + consume. */
static int fake_peekable;

static struct fake *
fake_new(struct ev_loop *loop, int fd, struct fake_log *log)
{
    struct fake *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->s.ops = fake_peekable ? &fake_peek_ops : &fake_ops;
    f->s.loop = loop;
    f->fd = fd;
    f->chunk = 3000;
    f->log = log;
    ev_io_init(&f->rd, fake_on_read, fd, EV_READ);
    ev_io_init(&f->wr, fake_on_write, fd, EV_WRITE);
    f->rd.data = f->wr.data = f;
    io_soon_init(&f->kick, fake_on_kick, f);
    return f;
}

/* A tap over the client's io_fd stream: passes everything through (an
 * |inner| stack of one) and counts the client side's back-pressure in a
 * fake_log of its own: eagains are the short or refused writes, drains the
 * on_drain calls that follow them. */
struct tap {
    struct io_stream s;
    struct fake_log *log;
};

static void
tap_on_readable(void *arg)
{
    struct tap *t = arg;
    if (t->s.on_readable != NULL)
        t->s.on_readable(t->s.arg);
}

static void
tap_on_drain(void *arg)
{
    struct tap *t = arg;
    t->log->drains++;
    if (t->s.on_drain != NULL)
        t->s.on_drain(t->s.arg);
}

static ssize_t
tap_read(struct io_stream *s, void *buf, size_t len)
{
    return io_read(s->inner, buf, len);
}

static ssize_t
tap_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct tap *t = (struct tap *)s;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    ssize_t n = io_writev(s->inner, iov, iovcnt);
    if ((n < 0 && errno == EAGAIN) || (n >= 0 && (size_t)n < total))
        t->log->eagains++;
    return n;
}

static int
tap_shutdown(struct io_stream *s)
{
    return io_shutdown(s->inner);
}

static void
tap_read_start(struct io_stream *s)
{
    io_read_start(s->inner);
}

static void
tap_read_stop(struct io_stream *s)
{
    io_read_stop(s->inner);
}

static void
tap_close(struct io_stream *s, int reset)
{
    struct tap *t = (struct tap *)s;
    t->log->closed++;
    t->log->reset = reset;
    io_close(s->inner, reset);
    free(t);
}

#define TAP_OPS                                                                             \
    .name = "tap", .read = tap_read, .writev = tap_writev, .shutdown = tap_shutdown,       \
    .read_start = tap_read_start, .read_stop = tap_read_stop, .close = tap_close
static const struct io_stream_ops tap_ops = {TAP_OPS};

/* A tap that tells its room, as an lwIP connection does: the relay then
 * reads straight into the client's writes, with no buffer of its own. */
static size_t
tap_write_room(struct io_stream *s)
{
    return 64 * 1024;
}

static const struct io_stream_ops tap_room_ops = {TAP_OPS, .write_room = tap_write_room};

static struct io_stream *
tap_new(struct io_stream *inner, struct fake_log *log, int room)
{
    struct tap *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    t->s = (struct io_stream){.ops = room ? &tap_room_ops : &tap_ops, .inner = inner,
                              .loop = inner->loop};
    t->log = log;
    io_set_callbacks(inner, tap_on_readable, tap_on_drain, t);
    return &t->s;
}

/* A peer thread: sends |send_len| generated bytes (encoded with |key|)
 * while reading until EOF, hashing both ways (FNV-1a 64). */
struct peer {
    int fd;
    uint8_t key;
    uint64_t send_len;
    uint32_t seed;
    int wait_eof;      /* read to EOF before sending anything */
    uint64_t expect;   /* shut down only once this many bytes came in */
    int shut_on_eof;   /* shut down only after the EOF */
    int hold;          /* never shut down: wait for the other side */
    int rst;           /* close at once with a RST */
    int delay_ms;      /* sleep before any I/O */
    _Atomic uint64_t sent;
    uint64_t sent_hash, got_hash, got;
    uint8_t head[64];
    int eof, err;
};

#define FNV_INIT 0xcbf29ce484222325ULL

static uint64_t
fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static uint8_t
gen(uint32_t seed, uint64_t pos)
{
    uint64_t x = (pos + seed) * 0x9E3779B97F4A7C15ULL;
    return (uint8_t)(x >> 56);
}

static void *
peer_run(void *arg)
{
    struct peer *p = arg;
    uint8_t buf[64 * 1024];
    int shut = 0;
    if (p->delay_ms > 0)
        usleep((useconds_t)p->delay_ms * 1000);
    if (p->rst) {
        struct linger lg = {1, 0};
        setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        close(p->fd);
        p->fd = -1;
        return NULL;
    }
    while (p->err == 0) {
        int may_send = !p->wait_eof || p->eof;
        uint64_t sent = p->sent;
        if (!shut && !p->hold && may_send && sent == p->send_len && p->got >= p->expect &&
            (!p->shut_on_eof || p->eof)) {
            shutdown(p->fd, SHUT_WR);
            shut = 1;
        }
        if (p->eof && (shut || p->hold))
            break;
        struct pollfd pfd = {p->fd, p->eof ? 0 : POLLIN, 0};
        if (may_send && sent < p->send_len)
            pfd.events |= POLLOUT;
        int rc = poll(&pfd, 1, 20000);
        if (rc == 0) {
            p->err = ETIMEDOUT;
            break;
        }
        if (!p->eof && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN) {
                p->err = errno;
                break;
            }
            if (n == 0)
                p->eof = 1;
            for (ssize_t i = 0; i < n; i++) {
                buf[i] ^= p->key;
                if (p->got + (uint64_t)i < sizeof(p->head))
                    p->head[p->got + (uint64_t)i] = buf[i];
            }
            if (n > 0) {
                p->got_hash = fnv(p->got_hash, buf, (size_t)n);
                p->got += (uint64_t)n;
            }
        }
        if (pfd.revents & POLLOUT) {
            size_t n = p->send_len - sent < sizeof(buf) ? p->send_len - sent : sizeof(buf);
            for (size_t i = 0; i < n; i++)
                buf[i] = gen(p->seed, sent + i) ^ p->key;
            ssize_t w = send(p->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN) {
                p->err = errno;
                break;
            }
            if (w > 0) {
                for (ssize_t i = 0; i < w; i++)
                    buf[i] ^= p->key;
                p->sent_hash = fnv(p->sent_hash, buf, (size_t)w);
                p->sent += (uint64_t)w;
            }
        }
    }
    return NULL;
}

struct rig {
    struct ev_loop *loop;
    struct flow_relay relay;
    struct fake *fake;
    struct fake_log log;
    struct peer client, server;
    pthread_t tc, ts;
    uint64_t up, down;
    int big_client;    /* default socket buffers on the client side, not 16 KiB */
    int server_first;  /* the server sends everything before the relay starts */
    int splice;        /* the upstream is a bare socket too (io_fd_new), not the fake */
    int tap;           /* the client's stream goes through a tap (2: one with write_room) */
    int no_fds;        /* no descriptor free while the relay starts (EMFILE) */
    struct fake_log tlog;
    int cfd, ufd;      /* the relay's ends of the two pairs */
    const char *reason;
    int calls;
    ev_timer watchdog;
};

static void
on_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct rig *g = arg;
    g->reason = reason;
    g->calls++;
    ev_break(g->loop, EVBREAK_ALL);
}

static void
on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
    ev_break(loop, EVBREAK_ALL);
}

static void
nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A loopback TCP pair, so a reset reaches the client as a RST. */
static void
tcp_pair(int *a, int *b, int small)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
    *a = socket(AF_INET, SOCK_STREAM, 0);
    /* A small window on the client: the relay often waits for the client
     * with decoded bytes still inside the stream. */
    if (small > 0)
        setsockopt(*a, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    assert_int_equal(connect(*a, (struct sockaddr *)&sa, sizeof(sa)), 0);
    *b = accept(l, NULL, NULL);
    assert_true(*b >= 0);
    close(l);
}

static void
rig_init(struct rig *g)
{
    memset(g, 0, sizeof(*g));
    g->loop = ev_loop_new(EVFLAG_AUTO);
    g->client.seed = 1;
    g->client.got_hash = g->client.sent_hash = FNV_INIT;
    g->server.seed = 2;
    g->server.key = KEY;
    g->server.got_hash = g->server.sent_hash = FNV_INIT;
}

/* Starts the peers and the relay; the relay's side of each pair is
 * non-blocking, the peers poll. */
static void
rig_start(struct rig *g, const void *pre_up, size_t pre_up_len, const void *pre_down,
          size_t pre_down_len, double idle, uint64_t bad_after)
{
    int c[2], s[2];
    int small = g->big_client ? 0 : 16 * 1024;
    tcp_pair(&c[0], &c[1], small);
    if (g->splice)
        tcp_pair(&s[0], &s[1], 0); /* a reset on the upstream is a RST too */
    else
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
    nonblock(c[1]);
    nonblock(s[1]);
    if (small > 0)
        setsockopt(c[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    /* The fake's socket small too: with the default ~208 KiB a server
     * thread that keeps up (a fast machine) took 32 MiB without one EAGAIN,
     * and the back-pressure checks failed 1 run in 5. */
    if (!g->splice)
        setsockopt(s[1], SOL_SOCKET, SO_SNDBUF, &(int){16 * 1024}, sizeof(int));
    int big = 1024 * 1024; /* capped by wmem_max: 2 x 208 KiB by default */
    setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    g->client.fd = c[0];
    g->server.fd = s[0];
    g->cfd = c[1];
    g->ufd = s[1];
    struct io_stream *upstream;
    if (g->splice) {
        g->server.key = 0; /* the bytes pass unchanged */
        upstream = io_fd_new(g->loop, s[1]);
        assert_non_null(upstream);
    } else {
        g->fake = fake_new(g->loop, s[1], &g->log);
        g->fake->bad_after = bad_after;
        upstream = &g->fake->s;
    }
    assert_int_equal(pthread_create(&g->tc, NULL, peer_run, &g->client), 0);
    assert_int_equal(pthread_create(&g->ts, NULL, peer_run, &g->server), 0);
    while (g->server_first && g->server.sent < g->server.send_len)
        usleep(1000);
    struct io_stream *client = io_fd_new(g->loop, c[1]);
    assert_non_null(client);
    assert_int_equal(io_splice_fd(client), c[1]);
    if (g->tap)
        client = tap_new(client, &g->tlog, g->tap == 2);
    struct flow_relay_args a = {
        .client = client,
        .upstream = upstream,
        .pre_up = pre_up,
        .pre_up_len = pre_up_len,
        .pre_down = pre_down,
        .pre_down_len = pre_down_len,
        .up_count = &g->up,
        .down_count = &g->down,
        .idle = idle,
        .cb = on_done,
        .arg = g,
    };
    struct rlimit saved;
    static int held[4096];
    int nheld = 0;
    if (g->no_fds) { /* the limit at the highest descriptor, the holes below filled */
        int top = 0;
        for (int fd = 0; fd < 4096; fd++)
            if (fcntl(fd, F_GETFD) >= 0)
                top = fd;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
        struct rlimit low = {.rlim_cur = (rlim_t)top + 1, .rlim_max = saved.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
        while (nheld < 4096 && (held[nheld] = dup(2)) >= 0)
            nheld++;
        assert_true(nheld < 4096);
        int p[2];
        assert_int_equal(pipe(p), -1);
        assert_int_equal(errno, EMFILE);
    }
    assert_int_equal(flow_relay_start(&g->relay, g->loop, &a), 0);
    if (g->no_fds) {
        for (int i = 0; i < nheld; i++)
            close(held[i]);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    }
    if (g->splice && !g->tap && !g->no_fds) {
        /* Both bare sockets: splice mode on the sockets themselves, the
         * wrappers freed (LeakSanitizer would name one left behind). */
        assert_null(g->relay._st);
        assert_int_equal(g->relay._up._src, c[1]);
        assert_int_equal(g->relay._up._dst, s[1]);
        assert_int_equal(g->relay._down._src, s[1]);
        assert_int_equal(g->relay._down._dst, c[1]);
    } else {
        assert_non_null(g->relay._st); /* a fake or a tap is no bare socket */
    }
    ev_timer_init(&g->watchdog, on_watchdog, 60, 0);
    ev_timer_start(g->loop, &g->watchdog);
}

static void
rig_run(struct rig *g)
{
    ev_run(g->loop, 0);
    ev_timer_stop(g->loop, &g->watchdog);
}

static void
rig_join(struct rig *g)
{
    pthread_join(g->tc, NULL);
    pthread_join(g->ts, NULL);
    if (g->client.fd >= 0)
        close(g->client.fd);
    if (g->server.fd >= 0)
        close(g->server.fd);
    ev_loop_destroy(g->loop);
}

static void
test_bulk_both_ways(void **state)
{
    struct rig g;
    rig_init(&g);
    /* The client shuts down once it got everything, the server only after
     * that: a relay or stream that forgets bytes held in the stream (the
     * socket quiet, no EV_READ coming) stalls here. */
    g.client.send_len = g.server.send_len = 32 * MIB;
    g.client.expect = 32 * MIB;
    g.server.shut_on_eof = 1;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_non_null(g.reason);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.client.err, 0);
    assert_int_equal(g.server.err, 0);
    assert_int_equal(g.server.got, 32 * MIB);
    assert_int_equal(g.client.got, 32 * MIB);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.up, 32 * MIB);
    assert_int_equal(g.down, 32 * MIB);
    assert_true(g.log.eagains > 0 && g.log.drains > 0); /* back-pressure was exercised */
    assert_int_equal(g.log.closed, 1);
    assert_int_equal(g.log.reset, 0);
}

/* The relay waits for a slow client while the stream holds decoded bytes
 * and its socket has nothing more: only the relay's own read after the
 * client drains, or the stream's on_readable once the relay reads again,
 * can move them (no EV_READ will come). */
static void
test_pending_after_client_drains(void **state)
{
    struct rig g;
    rig_init(&g);
    g.server.send_len = 300000;
    g.server.shut_on_eof = 1;
    g.server_first = 1;
    g.client.delay_ms = 100;
    g.client.expect = 300000;
    rig_start(&g, NULL, 0, NULL, 0, 5, 0); /* a stall ends as "idle" */
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.client.got, 300000);
    assert_true(g.client.got_hash == g.server.sent_hash);
}

/* A fast client: the relay moves its 256 KiB budget in one wake-up and
 * yields with decoded bytes still in the stream; the stream's on_readable
 * (it holds bytes after read_start) must bring it back. */
static void
test_budget_yields_then_resumes(void **state)
{
    struct rig g;
    rig_init(&g);
    g.big_client = 1;
    g.server.send_len = 300000;
    g.server.shut_on_eof = 1;
    g.server_first = 1;
    g.client.expect = 300000;
    rig_start(&g, NULL, 0, NULL, 0, 5, 0); /* a stall ends as "idle" */
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.client.got, 300000);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_true(g.log.kicks > 0); /* held bytes came back through on_readable */
}

static void
test_half_close_client_first(void **state)
{
    struct rig g;
    rig_init(&g);
    /* The client sends and ends; the server answers only after that EOF. */
    g.client.send_len = 100000;
    g.server.wait_eof = 1;
    g.server.send_len = 200000;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.server.got, 100000);
    assert_int_equal(g.client.got, 200000);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.client.err, 0);
    assert_int_equal(g.server.err, 0);
}

static void
test_half_close_stream_first(void **state)
{
    struct rig g;
    rig_init(&g);
    g.server.send_len = 300000;
    g.client.wait_eof = 1;
    g.client.send_len = 50000;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.client.got, 300000);
    assert_int_equal(g.server.got, 50000);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.up, 50000);
    assert_int_equal(g.down, 300000);
}

static void
test_auth_failure_resets_both(void **state)
{
    struct rig g;
    rig_init(&g);
    g.client.hold = 1;
    g.server.hold = 1;
    g.server.send_len = 1 * MIB;
    rig_start(&g, NULL, 0, NULL, 0, 30, 100000);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "auth failed");
    assert_int_equal(g.client.err, ECONNRESET);
    assert_true(g.client.got <= 100000);
    assert_int_equal(g.log.closed, 1);
    assert_int_equal(g.log.reset, 1);
}

static void
test_client_reset_resets_stream(void **state)
{
    struct rig g;
    rig_init(&g);
    g.client.rst = 1;
    g.server.hold = 1;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "reset");
    assert_int_equal(g.log.reset, 1);
}

static void
test_idle_timeout(void **state)
{
    struct rig g;
    rig_init(&g);
    g.client.hold = g.server.hold = 1;
    g.client.send_len = 1000; /* some traffic first, then silence */
    rig_start(&g, NULL, 0, NULL, 0, 0.2, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "idle");
    assert_int_equal(g.server.got, 1000);
    assert_int_equal(g.client.eof, 1);
    assert_int_equal(g.server.eof, 1);
    assert_int_equal(g.log.closed, 1);
    assert_int_equal(g.log.reset, 0);
}

static void
on_stop_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct rig *g = w->data;
    if (g->up < 4 * MIB || g->down < 4 * MIB)
        return;
    flow_relay_stop(&g->relay);
    flow_relay_stop(&g->relay); /* a no-op now */
    ev_timer_stop(loop, w);
    ev_break(loop, EVBREAK_ALL);
}

static void
test_stop_mid_flight(void **state)
{
    struct rig g;
    rig_init(&g);
    g.client.send_len = g.server.send_len = 256 * MIB;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    ev_timer tick;
    ev_timer_init(&tick, on_stop_tick, 0.002, 0.002);
    tick.data = &g;
    ev_timer_start(g.loop, &tick);
    rig_run(&g);
    ev_timer_stop(g.loop, &tick);
    /* Nothing of the relay is left to run: no callback ever comes. */
    ev_run(g.loop, EVRUN_NOWAIT);
    rig_join(&g);
    assert_null(g.reason);
    assert_int_equal(g.calls, 0);
    assert_int_equal(g.log.closed, 1);
    assert_int_equal(g.log.reset, 0);
    assert_true(g.client.err != 0 || g.client.eof); /* both peers saw the end */
    assert_true(g.server.err != 0 || g.server.eof);
}

static void
test_pre_bytes_first(void **state)
{
    static const char up[] = "PRE-UP: early client bytes|";
    static const char down[] = "PRE-DOWN: proxy reply|";
    struct rig g;
    rig_init(&g);
    g.client.send_len = 100000;
    g.server.send_len = 150000;
    g.server.expect = sizeof(up) - 1 + 100000;
    g.client.expect = sizeof(down) - 1 + 150000;
    /* The sender's hash starts with the pre bytes the relay adds. */
    g.client.sent_hash = fnv(FNV_INIT, (const uint8_t *)up, sizeof(up) - 1);
    g.server.sent_hash = fnv(FNV_INIT, (const uint8_t *)down, sizeof(down) - 1);
    rig_start(&g, up, sizeof(up) - 1, down, sizeof(down) - 1, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_memory_equal(g.server.head, up, sizeof(up) - 1);
    assert_memory_equal(g.client.head, down, sizeof(down) - 1);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.up, sizeof(up) - 1 + 100000); /* early client bytes count */
    assert_int_equal(g.down, 150000);                /* the reply does not */
}

/* An idle relay's heap, |pre| sent to the client first (NULL: none), once
 * the relay has written it (its first pump, from the loop; 50 ms of loop
 * passes). What the client got is read after the join. */
static size_t
idle_heap(const char *pre)
{
    size_t len = pre != NULL ? strlen(pre) : 0;
    struct rig g;
    rig_init(&g);
    g.client.hold = g.server.hold = 1; /* idle until the relay stops */
    g.tap = 2;
    rig_start(&g, NULL, 0, pre, len, 30, 0);
    for (int i = 0; i < 50; i++) {
        ev_run(g.loop, EVRUN_NOWAIT);
        usleep(1000);
    }
    size_t heap = heap_in_use();
    flow_relay_stop(&g.relay);
    rig_join(&g);
    assert_int_equal(g.client.got, len);
    if (len > 0)
        assert_memory_equal(g.client.head, pre, len);
    return heap;
}

/* A server's banner read before the relay started goes to the client
 * first, and its buffer goes once the client took it: an idle relay keeps
 * no 64 KiB buffer for it (5,000 idle flows to a server that speaks first
 * held 20 MiB more RSS). */
static void
test_pre_down_freed_once_taken(void **state)
{
    size_t without = idle_heap(NULL), with = idle_heap("220 a banner\r\n");
    if (with > without + 16 * 1024)
        fail_msg("an idle relay holds %zu bytes of heap after its banner was taken, "
                 "%zu without one", with, without);
}

/* Two io_fd streams: the relay takes their sockets and splices (no byte
 * in user space), with the pre bytes sent first and counted as in stream
 * mode. */
static void
test_splice_between_fd_streams(void **state)
{
    static const char up[] = "PRE-UP|";
    static const char down[] = "PRE-DOWN|";
    struct rig g;
    rig_init(&g);
    g.splice = 1;
    g.client.send_len = g.server.send_len = 8 * MIB;
    g.client.expect = sizeof(down) - 1 + 8 * MIB;
    g.server.shut_on_eof = 1;
    g.client.sent_hash = fnv(FNV_INIT, (const uint8_t *)up, sizeof(up) - 1);
    g.server.sent_hash = fnv(FNV_INIT, (const uint8_t *)down, sizeof(down) - 1);
    rig_start(&g, up, sizeof(up) - 1, down, sizeof(down) - 1, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.client.err, 0);
    assert_int_equal(g.server.err, 0);
    assert_memory_equal(g.server.head, up, sizeof(up) - 1);
    assert_memory_equal(g.client.head, down, sizeof(down) - 1);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.up, sizeof(up) - 1 + 8 * MIB);
    assert_int_equal(g.down, 8 * MIB);
}

/* Two bare sockets but no descriptor for the pipes (EMFILE): the relay
 * goes through buffers and every byte arrives. Before, it started in
 * splice mode and ended at the first byte as close=error with no cause,
 * after the client had been told the connection succeeded. */
static void
test_splice_without_pipes(void **state)
{
    struct rig g;
    rig_init(&g);
    g.splice = 1;
    g.no_fds = 1;
    g.client.send_len = g.server.send_len = 2 * MIB;
    g.client.expect = 2 * MIB;
    g.server.shut_on_eof = 1;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    assert_non_null(g.relay._st); /* stream mode */
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.client.err, 0);
    assert_int_equal(g.server.err, 0);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.up, 2 * MIB);
    assert_int_equal(g.down, 2 * MIB);
}

/* A reset in splice mode: the other side is reset too. */
static void
test_splice_client_reset(void **state)
{
    struct rig g;
    rig_init(&g);
    g.splice = 1;
    g.client.rst = 1;
    g.server.hold = 1;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "reset");
    assert_int_equal(g.server.err, ECONNRESET);
}

/* Two sockets, one behind a tap: not both bare, so stream mode, over an
 * io_fd upstream that buffers nothing. */
static void
test_stream_mode_over_two_sockets(void **state)
{
    struct rig g;
    rig_init(&g);
    g.splice = 1;
    g.tap = 1;
    g.client.send_len = g.server.send_len = 8 * MIB;
    g.client.expect = 8 * MIB;
    g.server.shut_on_eof = 1;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_int_equal(g.up, 8 * MIB);
    assert_int_equal(g.down, 8 * MIB);
    assert_int_equal(g.tlog.closed, 1);
    assert_int_equal(g.tlog.reset, 0);
}

/* Back-pressure both ways: the client's socket (small buffers, a client
 * that starts late) takes part of a write and calls on_drain later; the
 * fake refuses writes when its buffer is full and calls on_drain too. */
static void
test_back_pressure_both_ways(void **state)
{
    struct rig g;
    rig_init(&g);
    g.tap = 1;
    g.client.delay_ms = 50;
    g.client.send_len = g.server.send_len = 8 * MIB;
    g.client.expect = 8 * MIB;
    g.server.shut_on_eof = 1;
    rig_start(&g, NULL, 0, NULL, 0, 30, 0);
    rig_run(&g);
    rig_join(&g);
    assert_string_equal(g.reason, "done");
    assert_int_equal(g.client.got, 8 * MIB);
    assert_int_equal(g.server.got, 8 * MIB);
    assert_true(g.server.got_hash == g.client.sent_hash);
    assert_true(g.client.got_hash == g.server.sent_hash);
    assert_true(g.tlog.eagains > 0 && g.tlog.drains > 0); /* the client side */
    assert_true(g.log.eagains > 0 && g.log.drains > 0);       /* the stream side */
    assert_int_equal(g.tlog.closed, 1);
    assert_int_equal(g.log.closed, 1);
    assert_int_equal(g.log.reset, 0);
}

/* The same cases with a stream that can be peeked: the relay writes its
 * bytes on from where they lie, back-pressure and failures as before. */
static void
test_peekable_stream(void **state)
{
    fake_peekable = 1;
    fake_peeks = 0;
    test_bulk_both_ways(state);
    test_pending_after_client_drains(state);
    test_auth_failure_resets_both(state);
    test_back_pressure_both_ways(state);
    fake_peekable = 0;
    assert_true(fake_peeks > 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bulk_both_ways),
        cmocka_unit_test(test_pending_after_client_drains),
        cmocka_unit_test(test_budget_yields_then_resumes),
        cmocka_unit_test(test_half_close_client_first),
        cmocka_unit_test(test_half_close_stream_first),
        cmocka_unit_test(test_auth_failure_resets_both),
        cmocka_unit_test(test_client_reset_resets_stream),
        cmocka_unit_test(test_idle_timeout),
        cmocka_unit_test(test_stop_mid_flight),
        cmocka_unit_test(test_pre_bytes_first),
        cmocka_unit_test(test_pre_down_freed_once_taken),
        cmocka_unit_test(test_splice_between_fd_streams),
        cmocka_unit_test(test_splice_without_pipes),
        cmocka_unit_test(test_splice_client_reset),
        cmocka_unit_test(test_stream_mode_over_two_sockets),
        cmocka_unit_test(test_back_pressure_both_ways),
        cmocka_unit_test(test_peekable_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
