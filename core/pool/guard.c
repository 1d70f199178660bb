#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool_int.h"

/* A warm hand-out, until the first byte comes back. An idle connection can
 * die between the last check and the flow's first bytes (the server's idle
 * timeout ran out just then, or it restarted): its first write fails, or
 * the answer is an end or a reset. Then the guard opens a fresh connection
 * (once), writes again what the flow had written (kept here, at most
 * POOL_REPLAY_MAX bytes; past that it gives up keeping them and the flow
 * sees a failure as it would have) and carries on; the flow above sees a
 * wait (EAGAIN), not the failure. The first byte read ends the guard's
 * work: from then on it only passes calls through. */

struct guard {
    struct io_stream s;       /* s.inner: the connection (NULL while a retry opens one) */
    struct pool *p;           /* referenced while a retry is possible, else NULL */
    void *h;                  /* the connector's handle while a retry opens */
    int err;                  /* the retry failed */
    int reading, shut, want_drain;
    int in_cb, closed;        /* close() from inside our own callbacks */
    size_t rec_len, replay_off;
    int replaying;
    struct io_soon kick;
    uint8_t *rec;             /* the bytes written so far, POOL_REPLAY_MAX */
};

static void on_inner_readable(void *arg);
static void on_inner_drain(void *arg);

/* No retry from now on: the first answer came, or the bytes outgrew the
 * record, or the one retry has been made. */
static void
commit(struct guard *g)
{
    free(g->rec);
    g->rec = NULL;
    g->rec_len = 0;
    if (g->p != NULL)
        pool_unref(g->p);
    g->p = NULL;
}

static int
failed(ssize_t n)
{
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void
guard_free(struct guard *g)
{
    io_soon_cancel(g->s.loop, &g->kick);
    commit(g);
    free(g);
}

/* Tells the owner to look again (from the loop): it saw EAGAIN meanwhile. */
static void
on_kick(void *arg)
{
    struct guard *g = arg;

    g->in_cb = 1;
    if (g->reading && g->s.on_readable != NULL && !g->closed)
        g->s.on_readable(g->s.arg);
    if (g->want_drain && g->s.on_drain != NULL && !g->closed) {
        g->want_drain = 0;
        g->s.on_drain(g->s.arg);
    }
    g->in_cb = 0;
    if (g->closed)
        guard_free(g);
}

static void
replay(struct guard *g)
{
    while (g->replay_off < g->rec_len) {
        ssize_t n = io_write(g->s.inner, g->rec + g->replay_off, g->rec_len - g->replay_off);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* on_inner_drain goes on */
        if (n <= 0) {
            g->err = n < 0 ? errno : EIO;
            break;
        }
        g->replay_off += (size_t)n;
    }
    g->replaying = 0;
    if (g->err == 0 && g->shut && io_shutdown(g->s.inner) != 0)
        g->err = errno;
    commit(g);
    g->want_drain = 1;
    io_soon_arm(g->s.loop, &g->kick);
}

static void
on_retry(void *arg, struct io_stream *s, int err, const char *why)
{
    struct guard *g = arg;

    g->h = NULL;
    if (s == NULL) {
        g->err = err ? err : ECONNRESET;
        commit(g);
        g->want_drain = 1;
        io_soon_arm(g->s.loop, &g->kick);
        return;
    }
    pool_count_handshake(g->p, s);
    g->s.inner = s;
    io_set_callbacks(s, on_inner_readable, on_inner_drain, g);
    if (g->reading)
        io_read_start(s);
    g->replaying = 1;
    g->replay_off = 0;
    replay(g);
}

/* 1 if a retry is on its way (the caller answers EAGAIN), 0 if the failure
 * stands. */
static int
retry(struct guard *g)
{
    struct pool *p = g->p;

    if (p == NULL || p->dead)
        return 0;
    p->st.retried++;
    io_close(g->s.inner, 1);
    g->s.inner = NULL;
    g->h = p->c->open(p->ud, on_retry, g);
    if (g->h == NULL) {
        g->err = ENOMEM;
        commit(g);
        g->want_drain = 1;
        io_soon_arm(g->s.loop, &g->kick);
    }
    return 1;
}

static int
busy(const struct guard *g)
{
    return g->s.inner == NULL || g->replaying;
}

static ssize_t answer(struct guard *g, ssize_t n);

/* 1 with errno set when a read or peek cannot reach the connection now:
 * the retry failed, or one is under way. */
static int
unreadable(const struct guard *g)
{
    errno = g->err != 0 ? g->err : EAGAIN;
    return g->err != 0 || busy(g);
}

static ssize_t
guard_read(struct io_stream *s, void *buf, size_t len)
{
    struct guard *g = (struct guard *)s;

    return unreadable(g) ? -1 : answer(g, io_read(s->inner, buf, len));
}

/* What the connection's read or peek said (|n|), as the flow sees it. */
static ssize_t
answer(struct guard *g, ssize_t n)
{
    /* A clean end after the flow ended its own side may be the answer (a
     * server that takes an upload and closes): not a dead connection. */
    if (n > 0 && g->p != NULL)
        commit(g);
    else if (g->p != NULL && failed(n) && !(n == 0 && g->shut) && retry(g)) {
        errno = EAGAIN;
        return -1;
    }
    return n;
}

/* A peek passes through as a read does (guard_peek_ops: over a
 * connection that can be peeked, a TLS one; a retry opens the same kind):
 * the relay writes a TLS record's plaintext on from where it lies. */
static int
guard_peek(struct io_stream *s, struct iovec *iov, int max)
{
    struct guard *g = (struct guard *)s;

    if (unreadable(g))
        return -1;
    if (!io_can_peek(s->inner)) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return (int)answer(g, io_peek(s->inner, iov, max));
}

static void
guard_consume(struct io_stream *s, size_t n)
{
    if (s->inner != NULL && io_can_peek(s->inner))
        io_consume(s->inner, n);
}

/* Keeps the first |n| bytes of |iov| for a replay. */
static void
record(struct guard *g, const struct iovec *iov, int iovcnt, size_t n)
{
    if (g->rec_len + n > POOL_REPLAY_MAX) {
        commit(g);
        return;
    }
    if (g->rec == NULL && (g->rec = malloc(POOL_REPLAY_MAX)) == NULL) {
        commit(g);
        return;
    }
    for (int i = 0; i < iovcnt && n > 0; i++) {
        size_t k = iov[i].iov_len < n ? iov[i].iov_len : n;
        memcpy(g->rec + g->rec_len, iov[i].iov_base, k);
        g->rec_len += k;
        n -= k;
    }
}

static ssize_t
guard_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct guard *g = (struct guard *)s;

    if (g->err != 0) {
        errno = g->err;
        return -1;
    }
    if (busy(g)) {
        g->want_drain = 1;
        errno = EAGAIN;
        return -1;
    }
    ssize_t n = io_writev(s->inner, iov, iovcnt);
    if (g->p == NULL)
        return n;
    if (n > 0) {
        record(g, iov, iovcnt, (size_t)n);
    } else if (n < 0 && failed(n) && retry(g)) {
        g->want_drain = 1;
        errno = EAGAIN;
        return -1;
    }
    return n;
}

static int
guard_shutdown(struct io_stream *s)
{
    struct guard *g = (struct guard *)s;

    if (g->err != 0) {
        errno = g->err;
        return -1;
    }
    g->shut = 1; /* a replay ends with it too */
    return busy(g) ? 0 : io_shutdown(s->inner);
}

static void
guard_read_start(struct io_stream *s)
{
    struct guard *g = (struct guard *)s;

    g->reading = 1;
    if (s->inner != NULL)
        io_read_start(s->inner);
    if (g->err != 0)
        io_soon_arm(s->loop, &g->kick); /* the owner reads the error */
}

static void
guard_read_stop(struct io_stream *s)
{
    struct guard *g = (struct guard *)s;

    g->reading = 0;
    if (s->inner != NULL)
        io_read_stop(s->inner);
}

static void
guard_close(struct io_stream *s, int reset)
{
    struct guard *g = (struct guard *)s;

    if (g->h != NULL)
        g->p->c->cancel(g->h);
    g->h = NULL;
    if (s->inner != NULL)
        io_close(s->inner, reset);
    s->inner = NULL;
    if (g->in_cb) {
        g->closed = 1;
        return;
    }
    guard_free(g);
}

/* No splice_fd: the relays release a spliced stream as a bare socket's
 * (io_fd_release), which this is not; pool_stream_settle hands them the
 * socket's own stream instead. */
#define GUARD_OPS                                                                                  \
    .name = "pooled", .read = guard_read, .writev = guard_writev, .shutdown = guard_shutdown,      \
    .read_start = guard_read_start, .read_stop = guard_read_stop, .close = guard_close

static const struct io_stream_ops guard_ops = {GUARD_OPS};
static const struct io_stream_ops guard_peek_ops = {GUARD_OPS, .peek = guard_peek,
                                                    .consume = guard_consume};

static void
on_inner_readable(void *arg)
{
    struct guard *g = arg;

    if (g->s.on_readable != NULL)
        g->s.on_readable(g->s.arg);
}

static void
on_inner_drain(void *arg)
{
    struct guard *g = arg;

    if (g->replaying) {
        replay(g);
        return;
    }
    if (g->s.on_drain != NULL)
        g->s.on_drain(g->s.arg);
}

struct io_stream *
pool_guard_new(struct pool *p, struct io_stream *inner)
{
    struct guard *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    g->s = (struct io_stream){.ops = io_can_peek(inner) ? &guard_peek_ops : &guard_ops,
                              .inner = inner,
                              .loop = inner->loop};
    g->p = p;
    pool_ref(p);
    io_soon_init(&g->kick, on_kick, g);
    io_set_callbacks(inner, on_inner_readable, on_inner_drain, g);
    return &g->s;
}

struct io_stream *
pool_stream_settle(struct io_stream *s)
{
    struct guard *g = (struct guard *)s;

    if ((s->ops != &guard_ops && s->ops != &guard_peek_ops) || g->p != NULL || busy(g) ||
        g->err != 0 || g->in_cb)
        return s;
    struct io_stream *inner = s->inner;
    io_set_callbacks(inner, NULL, NULL, NULL);
    if (g->reading)
        io_read_stop(inner);
    guard_free(g);
    return inner;
}
