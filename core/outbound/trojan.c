#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbound/proxy.h"
#include "tls/crypto.h"

/* A server that sees a first record without a valid header forwards the
 * connection to its decoy site, so the header and the first payload go in
 * one write; a client that talks second still gets the header out soon. */
#define HEADER_DELAY 0.010
#define HASH_LEN 56
#define HEADER_MAX (HASH_LEN + 2 + 1 + 1 + 1 + FLOW_NAME_MAX + 2 + 2)
#define IOV_MAX_WRAP 64
#define CMD_CONNECT 1
#define CMD_UDP_ASSOCIATE 3

struct trojan {
    struct io_stream s; /* s.inner: the TLS stream */
    ev_timer delay;
    int err;        /* a header-only send failed in the background */
    int shut;       /* shutdown() waits for the rest of the header */
    size_t hdr_off, hdr_len;
    uint8_t hdr[HEADER_MAX];
};

static void
set_err(struct trojan *t, int err)
{
    if (t->err == 0)
        t->err = err;
}

/* Pushes the rest of the header with the caller's bytes behind it. Returns
 * how many of |iov|'s bytes the inner stream took (0 when it has only taken
 * header bytes so far), or -1 with errno. */
static ssize_t
push(struct trojan *t, const struct iovec *iov, int iovcnt)
{
    struct iovec v[IOV_MAX_WRAP];
    int n = iovcnt < IOV_MAX_WRAP - 1 ? iovcnt : IOV_MAX_WRAP - 1;

    while (t->hdr_off < t->hdr_len) {
        size_t rest = t->hdr_len - t->hdr_off;
        v[0] = (struct iovec){t->hdr + t->hdr_off, rest};
        if (n > 0)
            memcpy(v + 1, iov, (size_t)n * sizeof(*iov));
        ssize_t w = io_writev(t->s.inner, v, n + 1);
        if (w < 0)
            return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        /* A stream that takes only part loops here until it says EAGAIN,
         * which is what promises the on_drain the caller will wait for. */
        if ((size_t)w <= rest) {
            t->hdr_off += (size_t)w;
            continue;
        }
        t->hdr_off = t->hdr_len;
        ev_timer_stop(t->s.loop, &t->delay);
        return w - (ssize_t)rest;
    }
    ev_timer_stop(t->s.loop, &t->delay);
    return 0;
}

static void
header_only(struct trojan *t)
{
    if (push(t, NULL, 0) < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        set_err(t, errno);
    if (t->hdr_off == t->hdr_len && t->shut && t->err == 0 &&
        io_shutdown(t->s.inner) != 0)
        set_err(t, errno);
}

static void
on_delay(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct trojan *t = w->data;

    header_only(t);
    if (t->err != 0 && t->s.on_drain != NULL)
        t->s.on_drain(t->s.arg);
}

static void
on_inner_drain(void *arg)
{
    struct trojan *t = arg;

    /* While the delay runs the owner's next write carries the header;
     * after it (or a shutdown) nobody else will push the rest. */
    if (t->hdr_off < t->hdr_len && !ev_is_active(&t->delay))
        header_only(t);
    if (t->s.on_drain != NULL)
        t->s.on_drain(t->s.arg);
}

/* A background failure, kept for the next read or peek: -1 with errno. */
static int
failed(const struct trojan *t)
{
    if (t->err == 0)
        return 0;
    errno = t->err;
    return -1;
}

static ssize_t
trojan_read(struct io_stream *s, void *buf, size_t len)
{
    struct trojan *t = (struct trojan *)s;

    return failed(t) ? -1 : io_read(t->s.inner, buf, len);
}

/* The TLS stream's plaintext where it lies (see trojan_read); only over
 * an inner stream that can (trojan_peek_ops). */
static int
trojan_peek(struct io_stream *s, struct iovec *iov, int max)
{
    struct trojan *t = (struct trojan *)s;

    return failed(t) ? -1 : io_peek(t->s.inner, iov, max);
}

static void
trojan_consume(struct io_stream *s, size_t n)
{
    io_consume(s->inner, n);
}

static ssize_t
trojan_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct trojan *t = (struct trojan *)s;

    if (t->err != 0) {
        errno = t->err;
        return -1;
    }
    if (t->hdr_off < t->hdr_len) {
        ssize_t n = push(t, iov, iovcnt);
        if (n != 0 || t->hdr_off < t->hdr_len)
            return n;
        /* Exactly the header went out: the payload follows below. */
    }
    return io_writev(t->s.inner, iov, iovcnt);
}

static int
trojan_shutdown(struct io_stream *s)
{
    struct trojan *t = (struct trojan *)s;

    t->shut = 1;
    if (t->hdr_off < t->hdr_len) {
        ev_timer_stop(s->loop, &t->delay);
        header_only(t);
        return t->err != 0 ? (errno = t->err, -1) : 0;
    }
    return io_shutdown(t->s.inner);
}

/* Reading passes straight through: the TLS stream keeps the promise of
 * calling on_readable for what it holds. */
static void
on_inner_readable(void *arg)
{
    struct trojan *t = arg;

    if (t->s.on_readable != NULL)
        t->s.on_readable(t->s.arg);
}

static void
trojan_read_start(struct io_stream *s)
{
    io_read_start(s->inner);
}

static void
trojan_read_stop(struct io_stream *s)
{
    io_read_stop(s->inner);
}

static void
trojan_close(struct io_stream *s, int reset)
{
    struct trojan *t = (struct trojan *)s;

    ev_timer_stop(s->loop, &t->delay);
    io_close(t->s.inner, reset);
    free(t);
}

/* Peeking passes through too, over an inner stream that can. */
#define TROJAN_OPS                                                                                 \
    .name = "trojan", .read = trojan_read, .writev = trojan_writev, .shutdown = trojan_shutdown,   \
    .read_start = trojan_read_start, .read_stop = trojan_read_stop, .close = trojan_close

static const struct io_stream_ops trojan_ops = {TROJAN_OPS};
static const struct io_stream_ops trojan_peek_ops = {TROJAN_OPS, .peek = trojan_peek,
                                                     .consume = trojan_consume};

static struct io_stream *
make(struct io_stream *tls, const struct outbound_proxy *p, const struct flow_addr *dst,
     uint8_t cmd)
{
    struct trojan *t = malloc(sizeof(*t));
    size_t o = 0;
    int n;

    if (t == NULL)
        return NULL;
    memcpy(t->hdr, p->trojan_hash, HASH_LEN);
    o = HASH_LEN;
    t->hdr[o++] = '\r';
    t->hdr[o++] = '\n';
    t->hdr[o++] = cmd;
    n = outbound_addr_write(t->hdr + o, sizeof(t->hdr) - o, dst);
    if (n < 0) {
        free(t);
        return NULL;
    }
    o += (size_t)n;
    t->hdr[o++] = '\r';
    t->hdr[o++] = '\n';
    t->hdr_len = o;
    t->hdr_off = 0;
    t->err = t->shut = 0;
    t->s = (struct io_stream){.ops = io_can_peek(tls) ? &trojan_peek_ops : &trojan_ops,
                              .inner = tls,
                              .loop = tls->loop};
    io_set_callbacks(tls, on_inner_readable, on_inner_drain, t);
    ev_timer_init(&t->delay, on_delay, HEADER_DELAY, 0);
    t->delay.data = t;
    ev_timer_start(t->s.loop, &t->delay);
    return &t->s;
}

struct io_stream *
outbound_trojan_stream(struct io_stream *tls, const struct outbound_proxy *p,
                       const struct flow_addr *dst)
{
    return make(tls, p, dst, CMD_CONNECT);
}

struct io_stream *
outbound_trojan_udp_stream(struct io_stream *tls, const struct outbound_proxy *p,
                           const struct flow_addr *dst)
{
    return make(tls, p, dst, CMD_UDP_ASSOCIATE);
}

void
outbound_trojan_setup(struct outbound_proxy *p, const char *password)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t d[28];

    tls_sha224(password, strlen(password), d);
    for (size_t i = 0; i < sizeof(d); i++) {
        p->trojan_hash[2 * i] = hex[d[i] >> 4];
        p->trojan_hash[2 * i + 1] = hex[d[i] & 15];
    }
    p->trojan_hash[HASH_LEN] = '\0';
}
