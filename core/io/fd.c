#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/io.h"

/* A socket as a stream: the two watchers are the only state, so a stream
 * per connection costs what the watchers cost and nothing is copied. */
struct fd_stream {
    struct io_stream s;
    int fd;
    ev_io rd, wr;
};

#define FD_OF(s) ((struct fd_stream *)(s))

static void
on_rd(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fd_stream *f = w->data;

    if (f->s.on_readable != NULL)
        f->s.on_readable(f->s.arg);
}

static void
on_wr(struct ev_loop *loop, ev_io *w, int revents)
{
    struct fd_stream *f = w->data;

    ev_io_stop(loop, w);
    if (f->s.on_drain != NULL)
        f->s.on_drain(f->s.arg);
}

static ssize_t
fd_read(struct io_stream *s, void *buf, size_t len)
{
    ssize_t n;

    do
        n = recv(FD_OF(s)->fd, buf, len, 0);
    while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t
fd_readv(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    ssize_t n;

    do
        n = readv(FD_OF(s)->fd, iov, iovcnt);
    while (n < 0 && errno == EINTR);
    return n;
}

static ssize_t
fd_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct fd_stream *f = FD_OF(s);
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
    size_t total = 0;
    ssize_t n;

    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total == 0)
        return 0;
    do
        n = sendmsg(f->fd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EWOULDBLOCK)
        errno = EAGAIN;
    if ((n < 0 && errno == EAGAIN) || (n >= 0 && (size_t)n < total))
        ev_io_start(s->loop, &f->wr); /* on_drain once the kernel takes more */
    return n;
}

static int
fd_shutdown(struct io_stream *s)
{
    return shutdown(FD_OF(s)->fd, SHUT_WR);
}

static void
fd_read_start(struct io_stream *s)
{
    ev_io_start(s->loop, &FD_OF(s)->rd);
}

static void
fd_read_stop(struct io_stream *s)
{
    ev_io_stop(s->loop, &FD_OF(s)->rd);
}

static void
fd_close(struct io_stream *s, int reset)
{
    int fd = io_fd_release(s);

    if (reset)
        io_close_reset(fd);
    else
        close(fd);
}

static int
fd_splice_fd(const struct io_stream *s)
{
    return FD_OF(s)->fd;
}

static const struct io_stream_ops fd_ops = {
    .name = "fd",
    .read = fd_read,
    .readv = fd_readv,
    .writev = fd_writev,
    .shutdown = fd_shutdown,
    .read_start = fd_read_start,
    .read_stop = fd_read_stop,
    .close = fd_close,
    .splice_fd = fd_splice_fd,
};

struct io_stream *
io_fd_new(struct ev_loop *loop, int fd)
{
    struct fd_stream *f = malloc(sizeof(*f));

    if (f == NULL)
        return NULL;
    f->s = (struct io_stream){.ops = &fd_ops, .loop = loop};
    f->fd = fd;
    ev_io_init(&f->rd, on_rd, fd, EV_READ);
    ev_io_init(&f->wr, on_wr, fd, EV_WRITE);
    f->rd.data = f->wr.data = f;
    return &f->s;
}

int
io_fd_release(struct io_stream *s)
{
    struct fd_stream *f = FD_OF(s);
    int fd = f->fd;

    ev_io_stop(s->loop, &f->rd);
    ev_io_stop(s->loop, &f->wr);
    free(f);
    return fd;
}

void
io_close_reset(int fd)
{
    struct linger lg = {1, 0};

    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}
