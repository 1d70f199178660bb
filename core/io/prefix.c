#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

/* Bytes a peer sent before the stream's new owner existed (what a client
 * sent after its CONNECT head, a proxy's early bytes) read back first, as
 * if they were still in the inner stream. Once they are read the wrapper
 * only forwards calls; the copy is freed. */
struct prefix_stream {
    struct io_stream s;
    char *buf;
    size_t len, off;
    int reading;
    struct io_soon soon;
};

#define PX(s) ((struct prefix_stream *)(s))

static void
inner_readable(void *arg)
{
    struct prefix_stream *p = arg;
    if (p->s.on_readable != NULL)
        p->s.on_readable(p->s.arg);
}

static void
inner_drain(void *arg)
{
    struct prefix_stream *p = arg;
    if (p->s.on_drain != NULL)
        p->s.on_drain(p->s.arg);
}

static void
held_readable(void *arg)
{
    struct prefix_stream *p = arg;
    if (p->reading && p->off < p->len)
        inner_readable(p);
}

static ssize_t
px_read(struct io_stream *s, void *buf, size_t len)
{
    struct prefix_stream *p = PX(s);
    if (p->off < p->len) {
        size_t n = p->len - p->off < len ? p->len - p->off : len;
        memcpy(buf, p->buf + p->off, n);
        p->off += n;
        if (p->off == p->len) {
            free(p->buf);
            p->buf = NULL;
            if (p->reading)
                io_read_start(s->inner); /* the rest comes from the inner stream */
        } else if (p->reading) {
            io_soon_arm(s->loop, &p->soon);
        }
        return (ssize_t)n;
    }
    return io_read(s->inner, buf, len);
}

static ssize_t
px_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    return io_writev(s->inner, iov, iovcnt);
}

static int
px_shutdown(struct io_stream *s)
{
    return io_shutdown(s->inner);
}

static void
px_read_start(struct io_stream *s)
{
    struct prefix_stream *p = PX(s);
    p->reading = 1;
    if (p->off < p->len)
        io_soon_arm(s->loop, &p->soon);
    else
        io_read_start(s->inner);
}

static void
px_read_stop(struct io_stream *s)
{
    struct prefix_stream *p = PX(s);
    p->reading = 0;
    io_soon_cancel(s->loop, &p->soon);
    io_read_stop(s->inner);
}

static void
px_close(struct io_stream *s, int reset)
{
    struct prefix_stream *p = PX(s);
    io_soon_cancel(s->loop, &p->soon);
    io_close(s->inner, reset);
    free(p->buf);
    free(p);
}

static size_t
px_write_room(struct io_stream *s)
{
    return io_write_room(s->inner);
}

static void *
px_write_buf(struct io_stream *s, size_t *len)
{
    return io_write_buf(s->inner, len);
}

static ssize_t
px_write_commit(struct io_stream *s, size_t n)
{
    return io_write_commit(s->inner, n);
}

static const struct io_stream_ops prefix_ops = {
    .name = "prefix",
    .read = px_read,
    .writev = px_writev,
    .shutdown = px_shutdown,
    .read_start = px_read_start,
    .read_stop = px_read_stop,
    .close = px_close,
    .write_room = px_write_room,
    .write_buf = px_write_buf,
    .write_commit = px_write_commit,
};

struct io_stream *
io_prefix_new(struct io_stream *inner, const void *bytes, size_t len)
{
    if (len == 0)
        return inner;
    struct prefix_stream *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->buf = malloc(len)) == NULL) {
        free(p);
        return NULL;
    }
    memcpy(p->buf, bytes, len);
    p->len = len;
    p->s.ops = &prefix_ops;
    p->s.inner = inner;
    p->s.loop = inner->loop;
    io_soon_init(&p->soon, held_readable, p);
    io_read_stop(inner);
    io_set_callbacks(inner, inner_readable, inner_drain, p);
    return &p->s;
}
