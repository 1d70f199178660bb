#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "outbound/outbound.h"
#include "outbound/stream.h"

/* Only what the socket did not take of one write: handshake messages and a
 * first payload fit, so a caller's write never has to wait. */
#define PLAIN_BUF 16384

struct plain {
    struct outbound_stream s;
    ev_io wr;
    int err;       /* a background send failed: returned by read/writev */
    int shut;      /* shutdown() asked while bytes were still buffered */
    size_t off, len;
    uint8_t buf[PLAIN_BUF];
};

static ssize_t
send_iov(int fd, const struct iovec *iov, int iovcnt)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    ssize_t n;

    do
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
}

/* Copies what fits of |iov| past its first |skip| bytes into the buffer. */
static size_t
stash(struct plain *p, const struct iovec *iov, int iovcnt, size_t skip)
{
    size_t took = 0;

    if (p->off > 0) {
        memmove(p->buf, p->buf + p->off, p->len - p->off);
        p->len -= p->off;
        p->off = 0;
    }
    for (int i = 0; i < iovcnt && p->len < PLAIN_BUF; i++) {
        size_t l = iov[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        size_t k = l - skip;
        if (k > PLAIN_BUF - p->len)
            k = PLAIN_BUF - p->len;
        memcpy(p->buf + p->len, (const uint8_t *)iov[i].iov_base + skip, k);
        p->len += k;
        took += k;
        skip = 0;
    }
    return took;
}

static void
on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
    struct plain *p = w->data;

    while (p->off < p->len) {
        struct iovec iov = {p->buf + p->off, p->len - p->off};
        ssize_t n = send_iov(p->s.fd, &iov, 1);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            p->err = errno;
            p->off = p->len = 0;
            break;
        }
        p->off += (size_t)n;
    }
    p->off = p->len = 0;
    ev_io_stop(loop, w);
    if (p->shut && p->err == 0 && shutdown(p->s.fd, SHUT_WR) != 0)
        p->err = errno;
    /* Called whenever the buffer empties, not only after an EAGAIN: a
     * caller waiting to release the socket needs the signal too. */
    if (p->s.on_drain != NULL)
        p->s.on_drain(p->s.drain_arg);
}

static ssize_t
plain_read(struct outbound_stream *s, void *buf, size_t len)
{
    struct plain *p = (struct plain *)s;
    ssize_t n;

    if (p->err != 0) {
        errno = p->err;
        return -1;
    }
    do
        n = recv(s->fd, buf, len, 0);
    while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t
plain_writev(struct outbound_stream *s, const struct iovec *iov, int iovcnt)
{
    struct plain *p = (struct plain *)s;
    size_t total = 0;
    ssize_t n = 0;

    if (p->err != 0) {
        errno = p->err;
        return -1;
    }
    if (p->shut) {
        errno = EPIPE;
        return -1;
    }
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total == 0)
        return 0;
    /* Bytes already waiting go first: queue behind them. */
    if (p->off < p->len) {
        size_t took = stash(p, iov, iovcnt, 0);
        if (took == 0) {
            errno = EAGAIN;
            return -1;
        }
        return (ssize_t)took;
    }
    n = send_iov(s->fd, iov, iovcnt);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        n = 0;
    }
    if ((size_t)n == total)
        return n;
    n += (ssize_t)stash(p, iov, iovcnt, (size_t)n);
    ev_io_start(s->loop, &p->wr);
    return n;
}

static int
plain_shutdown(struct outbound_stream *s)
{
    struct plain *p = (struct plain *)s;

    if (p->off < p->len) {
        p->shut = 1;
        return 0;
    }
    p->shut = 1;
    return shutdown(s->fd, SHUT_WR);
}

static size_t
plain_pending(const struct outbound_stream *s)
{
    return 0;
}

static void
plain_close(struct outbound_stream *s, int reset)
{
    struct plain *p = (struct plain *)s;

    ev_io_stop(s->loop, &p->wr);
    if (reset)
        outbound_close_reset(s->fd);
    else
        close(s->fd);
    free(p);
}

static const struct outbound_stream_ops plain_ops = {
    .name = "plain",
    .read = plain_read,
    .writev = plain_writev,
    .shutdown = plain_shutdown,
    .pending = plain_pending,
    .close = plain_close,
};

struct outbound_stream *
outbound_plain_new(struct ev_loop *loop, int fd)
{
    struct plain *p = malloc(sizeof(*p));

    if (p == NULL)
        return NULL;
    p->s = (struct outbound_stream){.ops = &plain_ops, .fd = fd, .loop = loop};
    p->err = p->shut = 0;
    p->off = p->len = 0;
    ev_io_init(&p->wr, on_writable, fd, EV_WRITE);
    p->wr.data = p;
    return &p->s;
}

int
outbound_plain_release(struct outbound_stream *s)
{
    struct plain *p = (struct plain *)s;
    int fd = s->fd;

    if (p->off < p->len)
        return -1;
    ev_io_stop(s->loop, &p->wr);
    free(p);
    return fd;
}
