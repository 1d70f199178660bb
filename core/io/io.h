#ifndef CHUTE_IO_IO_H
#define CHUTE_IO_IO_H

/* Byte streams below every other folder: a connected socket, an lwIP
 * connection (netstack), TLS over any stream (tls), a proxy protocol over
 * any stream (outbound). A stream may sit on an |inner| one, as lwIP's
 * altcp and HAProxy's xprt layers do; the relays and protocol drivers see
 * only this interface.
 *
 * Reading is push-style. After read_start() the stream calls on_readable
 * from the loop while bytes (or the end of data, or an error) are there to
 * read; the owner calls read() until it returns -1/EAGAIN, or stops early
 * with read_stop() (back-pressure). A stream that buffers decoded bytes
 * inside (TLS, Shadowsocks) calls on_readable again by itself, from the
 * loop, for bytes left after a callback or when reading starts again: the
 * owner never polls and never watches a file descriptor.
 *
 * Writing: writev() returns the bytes it took (a stream with a buffer of
 * its own may take them all and send them in the background), or -1 with
 * errno. When it took fewer than offered, or failed with EAGAIN, on_drain
 * is called from the loop once it can take more. Errors found in the
 * background are kept and returned by the next read() or writev()
 * (on_drain and on_readable are called so the owner looks).
 *
 * errno values with a meaning of their own: EAGAIN (wait for the
 * callback), EBADMSG (authentication failed: a bad AEAD tag or TLS
 * record), EPROTO (the peer broke the protocol), ECONNRESET, EPIPE.
 *
 * Re-entrancy: the owner may close the stream from inside on_readable and
 * on_drain; streams touch nothing of theirs after calling either. No
 * callback fires from inside a call the owner made (read, writev,
 * shutdown, read_start, read_stop). */

#include <ev.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

struct io_stream;

struct io_stream_ops {
    const char *name; /* "fd", "tls", "shadowsocks", "trojan", "lwip" */
    /* >0 bytes, 0 at a clean end of the peer's data (and at every read
     * after it), or -1 with errno. */
    ssize_t (*read)(struct io_stream *s, void *buf, size_t len);
    ssize_t (*writev)(struct io_stream *s, const struct iovec *iov, int iovcnt);
    /* Ends the sending direction once the bytes taken are out (FIN;
     * close_notify for TLS). 0, or -1 with errno. */
    int (*shutdown)(struct io_stream *s);
    void (*read_start)(struct io_stream *s);
    void (*read_stop)(struct io_stream *s);
    /* Frees the stream and its inner ones; with |reset| the peer sees a
     * reset, else bytes already taken are still sent (in the background
     * when need be) before the end. No callback fires afterwards. */
    void (*close)(struct io_stream *s, int reset);
    /* The socket when the stream is a bare one with nothing buffered
     * (the relays may then splice it), else -1. NULL means -1. */
    int (*splice_fd)(const struct io_stream *s);
    /* Optional, for streams whose received bytes already sit in memory (an
     * lwIP connection's pbufs): read without a copy. peek fills up to |max|
     * iovecs over the bytes held and returns how many (>0), 0 at the end of
     * data, or -1 with errno (EAGAIN, ...); the bytes stay until consume
     * drops the first |n| of them. An owner that only looks (a sniffer:
     * peek, no consume) hears on_readable again when more bytes come, not
     * for the ones it has seen. NULL: use read. */
    int (*peek)(struct io_stream *s, struct iovec *iov, int max);
    void (*consume)(struct io_stream *s, size_t n);
    /* Optional: read into several buffers at once, as readv(2) (a TLS
     * pump reads a record's body and the next header in one call). NULL:
     * read into the first one. */
    ssize_t (*readv)(struct io_stream *s, const struct iovec *iov, int iovcnt);
    /* Optional: how many bytes writev takes now, all of them (an lwIP
     * connection's send buffer), so a relay reads no more than that from
     * the other side into a shared buffer; 0 means on_drain comes first.
     * NULL: unknown. */
    size_t (*write_room)(struct io_stream *s);
    /* Optional, for streams that keep what they take until the peer
     * acknowledges it (an lwIP connection): a writer reads straight into
     * the stream's own memory. write_buf returns where up to *len bytes
     * may go (*len lowered to the space there), or NULL (none now: use
     * writev); write_commit then takes the first |n| bytes put there,
     * as writev would take them from a buffer (all, none: -1 with errno,
     * EAGAIN when full); bytes not taken stay readable there until the
     * next call on the stream. A commit of 0 (the read found nothing)
     * gives the space back. NULL: writev only. */
    void *(*write_buf)(struct io_stream *s, size_t *len);
    ssize_t (*write_commit)(struct io_stream *s, size_t n);
};

struct io_stream {
    const struct io_stream_ops *ops;
    struct io_stream *inner; /* the stream this one runs over, or NULL */
    struct ev_loop *loop;
    /* The owner's callbacks (NULL: none) and their argument. */
    void (*on_readable)(void *arg);
    void (*on_drain)(void *arg);
    void *arg;
};

static inline ssize_t
io_read(struct io_stream *s, void *buf, size_t len)
{
    return s->ops->read(s, buf, len);
}

static inline ssize_t
io_readv(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    if (s->ops->readv != NULL)
        return s->ops->readv(s, iov, iovcnt);
    return s->ops->read(s, iov[0].iov_base, iov[0].iov_len);
}

static inline ssize_t
io_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    return s->ops->writev(s, iov, iovcnt);
}

static inline ssize_t
io_write(struct io_stream *s, const void *buf, size_t len)
{
    struct iovec iov = {(void *)buf, len};
    return s->ops->writev(s, &iov, 1);
}

static inline int
io_shutdown(struct io_stream *s)
{
    return s->ops->shutdown(s);
}

static inline void
io_read_start(struct io_stream *s)
{
    s->ops->read_start(s);
}

static inline void
io_read_stop(struct io_stream *s)
{
    s->ops->read_stop(s);
}

static inline void
io_close(struct io_stream *s, int reset)
{
    s->ops->close(s, reset);
}

static inline int
io_splice_fd(const struct io_stream *s)
{
    return s->ops->splice_fd != NULL ? s->ops->splice_fd(s) : -1;
}

static inline int
io_can_peek(const struct io_stream *s)
{
    return s->ops->peek != NULL;
}

static inline int
io_peek(struct io_stream *s, struct iovec *iov, int max)
{
    return s->ops->peek(s, iov, max);
}

static inline void
io_consume(struct io_stream *s, size_t n)
{
    s->ops->consume(s, n);
}

/* SIZE_MAX when the stream does not say. */
static inline size_t
io_write_room(struct io_stream *s)
{
    return s->ops->write_room != NULL ? s->ops->write_room(s) : (size_t)-1;
}

/* NULL when the stream has no memory of its own to offer (see write_buf). */
static inline void *
io_write_buf(struct io_stream *s, size_t *len)
{
    return s->ops->write_buf != NULL ? s->ops->write_buf(s, len) : NULL;
}

static inline ssize_t
io_write_commit(struct io_stream *s, size_t n)
{
    return s->ops->write_commit(s, n);
}

/* The socket at the bottom of a stack of streams (for getsockname and the
 * like, never for I/O), or -1 when there is none (an lwIP connection). */
static inline int
io_base_fd(const struct io_stream *s)
{
    while (s->inner != NULL)
        s = s->inner;
    return io_splice_fd(s);
}

/* Sets the owner's callbacks. */
static inline void
io_set_callbacks(struct io_stream *s, void (*on_readable)(void *), void (*on_drain)(void *),
                 void *arg)
{
    s->on_readable = on_readable;
    s->on_drain = on_drain;
    s->arg = arg;
}

/* fd.c: a connected non-blocking socket as a stream. It buffers nothing:
 * writev() takes what the kernel takes. NULL when out of memory (the
 * socket is then still the caller's). */
struct io_stream *io_fd_new(struct ev_loop *loop, int fd);
/* Frees the wrapper and gives the socket back (for splicing). */
int io_fd_release(struct io_stream *s);

/* A close that the peer sees as a reset (RST), not a FIN. */
void io_close_reset(int fd);

/* prefix.c: a stream over |inner| (owned from now on) whose first reads
 * return a copy of |bytes|: what a peer sent before this owner existed.
 * |inner| itself when |len| is 0; NULL when out of memory (|inner| is then
 * still the caller's). Not spliceable. */
struct io_stream *io_prefix_new(struct io_stream *inner, const void *bytes, size_t len);

/* soon.c: calls fn(arg) once from the loop's next iteration, for streams
 * that must call on_readable for bytes they already hold. */
struct io_soon {
    ev_timer _t;
    void (*_fn)(void *arg);
    void *_arg;
};
void io_soon_init(struct io_soon *d, void (*fn)(void *), void *arg);
void io_soon_arm(struct ev_loop *loop, struct io_soon *d);
void io_soon_cancel(struct ev_loop *loop, struct io_soon *d);

/* Seconds on the monotonic clock, for deadlines and measured delays that
 * must not move with the wall clock: ev_now() and ev_time() follow it, so a
 * step of the system time (NTP, a VM's time sync) would fire every pending
 * deadline at once. Fresh, not the loop's cached time (vDSO, ~20 ns). */
static inline double
io_mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
