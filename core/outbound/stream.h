#ifndef CHUTE_OUTBOUND_STREAM_H
#define CHUTE_OUTBOUND_STREAM_H

/* An upstream byte stream that is not a bare socket: the encrypted
 * transports (Shadowsocks, TLS for Trojan and https proxies) and, during a
 * proxy handshake, a plain socket wrapped the same way. The relays splice
 * bare sockets and go through these operations only for streams.
 *
 * Reading: call read() while the socket is readable and, after any pause,
 * while pending() is non-zero (decrypted bytes are buffered inside, so the
 * socket may not become readable again for them).
 *
 * Writing: writev() takes plaintext, encrypts it into the stream's own
 * buffer and sends what the socket takes. It returns -1/EAGAIN only when
 * that buffer is full; the stream then writes the rest from its own
 * EV_WRITE watcher and calls on_drain once it can take bytes again. The
 * caller never watches EV_WRITE on the stream's socket.
 *
 * Errors found while sending in the background are kept and returned by
 * the next read() or writev() (on_drain is called so the owner looks).
 * Authentication failures (a bad tag, a bad TLS record) are EBADMSG. */

#include <ev.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct outbound_stream;

struct outbound_stream_ops {
    const char *name; /* "shadowsocks", "tls", "plain" */
    /* >0 plaintext bytes, 0 at a clean end of the peer's data, or -1 with
     * errno: EAGAIN (wait for EV_READ on fd), EBADMSG, ECONNRESET, ... */
    ssize_t (*read)(struct outbound_stream *s, void *buf, size_t len);
    /* Bytes taken (all of them, or as many as fit), or -1 with errno:
     * EAGAIN (on_drain follows), EPIPE, EBADMSG, ... */
    ssize_t (*writev)(struct outbound_stream *s, const struct iovec *iov, int iovcnt);
    /* Ends the sending direction once the buffered bytes are out (FIN;
     * close_notify for TLS). 0, or -1 with errno. */
    int (*shutdown)(struct outbound_stream *s);
    /* Plaintext bytes decrypted and waiting inside. */
    size_t (*pending)(const struct outbound_stream *s);
    /* Stops the stream's watchers, closes the socket (a RST when |reset|)
     * and frees the stream. */
    void (*close)(struct outbound_stream *s, int reset);
};

struct outbound_stream {
    const struct outbound_stream_ops *ops;
    int fd;                  /* the socket; the owner watches EV_READ on it */
    struct ev_loop *loop;
    /* Set by the owner: called (from the loop) when a writev() that failed
     * with EAGAIN can be retried, or when a background send failed. */
    void (*on_drain)(void *arg);
    void *drain_arg;
};

static inline ssize_t
outbound_stream_read(struct outbound_stream *s, void *buf, size_t len)
{
    return s->ops->read(s, buf, len);
}

static inline ssize_t
outbound_stream_writev(struct outbound_stream *s, const struct iovec *iov, int iovcnt)
{
    return s->ops->writev(s, iov, iovcnt);
}

static inline ssize_t
outbound_stream_write(struct outbound_stream *s, const void *buf, size_t len)
{
    struct iovec iov = {(void *)buf, len};
    return s->ops->writev(s, &iov, 1);
}

static inline size_t
outbound_stream_pending(const struct outbound_stream *s)
{
    return s->ops->pending(s);
}

static inline void
outbound_stream_close(struct outbound_stream *s, int reset)
{
    s->ops->close(s, reset);
}

/* plain.c: a connected non-blocking socket as a stream (for proxy
 * handshakes before the relay takes the bare socket back). */
struct outbound_stream *outbound_plain_new(struct ev_loop *loop, int fd);
/* Gives the socket back and frees the wrapper; -1 if bytes are still
 * buffered for sending (the caller must wait for on_drain). */
int outbound_plain_release(struct outbound_stream *s);

#endif
