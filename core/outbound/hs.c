#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "outbound/hs.h"

static void
stop(struct outbound_hs *h)
{
    io_read_stop(h->s);
    ev_timer_stop(h->s->loop, &h->later);
    io_set_callbacks(h->s, NULL, NULL, NULL);
}

/* The callback runs before the free: |extra| points into h->in. It must not
 * touch the stream afterwards, as the owner may close it in the callback. */
static void
finish(struct outbound_hs *h, int err, const char *why, const uint8_t *extra, size_t extra_len)
{
    stop(h);
    h->cb(h->arg, err, why, extra, extra_len);
    free(h);
}

void
outbound_hs_fail(struct outbound_hs *h, int err, const char *why)
{
    if (!h->starting) {
        finish(h, err, why, NULL, 0);
        return;
    }
    if (h->err == 0) {
        h->err = err;
        h->why = why;
    }
    io_read_stop(h->s);
    ev_timer_start(h->s->loop, &h->later); /* a no-op if already started */
}

void
outbound_hs_done(struct outbound_hs *h, size_t consumed)
{
    finish(h, 0, NULL, h->in + consumed, h->in_len - consumed);
}

void
outbound_hs_consume(struct outbound_hs *h, size_t n)
{
    memmove(h->in, h->in + n, h->in_len - n);
    h->in_len -= n;
}

/* Writes the queue out. 0 when it is empty or waits for on_drain, -1 when
 * the handshake failed. */
static int
flush(struct outbound_hs *h)
{
    while (h->out_off < h->out_len) {
        ssize_t n = io_write(h->s, h->out + h->out_off, h->out_len - h->out_off);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            outbound_hs_fail(h, n < 0 ? errno : EIO, h->proto->io_why);
            return -1;
        }
        h->out_off += (size_t)n;
    }
    h->out_off = h->out_len = 0;
    return 0;
}

int
outbound_hs_send(struct outbound_hs *h, const void *buf, size_t len)
{
    if (h->out_off > 0) {
        memmove(h->out, h->out + h->out_off, h->out_len - h->out_off);
        h->out_len -= h->out_off;
        h->out_off = 0;
    }
    if (len > sizeof(h->out) - h->out_len) {
        outbound_hs_fail(h, ENOBUFS, h->proto->io_why);
        return -1;
    }
    memcpy(h->out + h->out_len, buf, len);
    h->out_len += len;
    return flush(h);
}

static void
on_drain(void *arg)
{
    struct outbound_hs *h = arg;

    if (h->err == 0)
        flush(h);
}

static void
on_readable(void *arg)
{
    struct outbound_hs *h = arg;

    for (;;) {
        if (h->in_len == h->in_cap) {
            /* The parsers refuse before this; kept as a backstop. */
            outbound_hs_fail(h, EPROTO, h->proto->io_why);
            return;
        }
        ssize_t n = io_read(h->s, h->in + h->in_len, h->in_cap - h->in_len);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            outbound_hs_fail(h, errno, h->proto->io_why);
            return;
        }
        if (n == 0) {
            outbound_hs_fail(h, h->eof_err, h->eof_why);
            return;
        }
        h->in_len += (size_t)n;
        if (h->proto->step(h))
            return;
    }
}

/* A failure found inside the start call. */
static void
on_later(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct outbound_hs *h = w->data;

    finish(h, h->err, h->why, NULL, 0);
}

struct outbound_hs *
outbound_hs_new(struct io_stream *s, size_t size, const struct outbound_hs_proto *proto,
                size_t in_off, size_t in_cap, outbound_hs_cb cb, void *arg)
{
    struct outbound_hs *h = calloc(1, size);

    if (h == NULL)
        return NULL;
    h->proto = proto;
    h->s = s;
    h->cb = cb;
    h->arg = arg;
    h->eof_err = ECONNRESET;
    h->eof_why = proto->eof_why;
    h->starting = 1;
    h->in = (uint8_t *)h + in_off;
    h->in_cap = in_cap;
    io_set_callbacks(s, on_readable, on_drain, h);
    ev_timer_init(&h->later, on_later, 0, 0);
    h->later.data = h;
    io_read_start(s); /* bytes a stream already holds come from the loop too */
    return h;
}

void
outbound_hs_cancel(struct outbound_hs *h)
{
    stop(h);
    free(h);
}

struct outbound_hs *
outbound_hs_started(struct outbound_hs *h)
{
    h->starting = 0;
    return h;
}
