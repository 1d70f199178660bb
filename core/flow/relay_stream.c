#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow/relay.h"
#include "io/io.h"
#include "outbound/outbound.h"

/* Stream mode of the relay, between any two io_streams (a socket, TLS,
 * Shadowsocks, Trojan, an lwIP connection): bytes cross user space once per
 * direction: client -> ubuf -> writev (an encrypting stream's copy is its
 * encryption), and read (a decrypting stream's copy is its decryption) ->
 * dbuf -> client. Streams that hold their bytes in memory are peeked
 * instead of read: an lwIP client's pbufs go to writev, a decrypting
 * stream's plaintext to the client's writev, with no relay buffer. */

#define BUF_SIZE (64 * 1024)
/* Bytes moved per direction per wake-up before yielding to other flows. */
#define BUDGET (256 * 1024)

struct flow_relay_stream {
    struct flow_relay *r;
    struct io_stream *s; /* the upstream */
    struct io_stream *c; /* the client */
    ev_idle kick;        /* "pump on the next loop pass" (the start) */
    int kick_up, kick_down;
    /* client -> stream: ubuf[uoff, ulen) is read but not yet taken */
    char *ubuf;
    size_t ucap, uoff, ulen;
    int ueof, ushut, uwait; /* uwait: writev said EAGAIN, on_drain follows */
    /* stream -> client: dbuf[doff, dlen) waits for the client; the first
     * dpre of those are |pre_down|, not counted */
    char *dbuf;
    size_t dcap, doff, dlen, dpre;
    int dleft; /* dbuf holds only what a direct write left: freed once written */
    int deof, dshut;
    uint64_t *up_count, *down_count;
};

static void
release(struct flow_relay_stream *t)
{
    struct ev_loop *loop = t->r->_loop;
    io_read_stop(t->c);
    io_read_stop(t->s);
    io_set_callbacks(t->c, NULL, NULL, NULL);
    io_set_callbacks(t->s, NULL, NULL, NULL);
    ev_idle_stop(loop, &t->kick);
    ev_timer_stop(loop, &t->r->_idle);
    t->r->_st = NULL;
    t->r->_running = 0;
    free(t->ubuf);
    free(t->dbuf);
    free(t);
}

static void
finish(struct flow_relay_stream *t, const char *reason, int reset)
{
    struct flow_relay *r = t->r;
    struct io_stream *s = t->s, *c = t->c;
    release(t);
    io_close(c, reset);
    io_close(s, reset);
    r->_cb(r, r->_arg, reason);
}

/* A failed stream op: EBADMSG is the peer failing authentication. */
static void
stream_failed(struct flow_relay_stream *t, int err)
{
    if (err == EBADMSG) {
        outbound_count_auth_failure();
        finish(t, "auth failed", 1);
    }
    else if (err == ENOMEM || err == ENOBUFS)
        finish(t, "error", 1);
    else
        finish(t, "reset", 1);
}

static char *
buf_get(char **buf, size_t *cap)
{
    if (*buf == NULL) {
        *buf = malloc(BUF_SIZE);
        *cap = BUF_SIZE;
    }
    return *buf;
}

/* Both directions ended: returns -1 after finishing. */
static int
check_done(struct flow_relay_stream *t)
{
    if (t->ushut && t->dshut) {
        finish(t, "done", 0);
        return -1;
    }
    return 0;
}

/* The client's data ended and the stream took all of it: the stream's
 * sending side ends too. Same return as pump_up. */
static int
up_ended(struct flow_relay_stream *t)
{
    io_read_stop(t->c);
    if (!t->ushut) {
        t->ushut = 1;
        if (io_shutdown(t->s) != 0) {
            stream_failed(t, errno);
            return -1;
        }
    }
    return check_done(t);
}

#define PEEK_IOV 32

/* client -> stream for a client that holds its bytes in memory (an lwIP
 * connection): they go to the stream straight from there, no copy. */
static int
pump_up_peek(struct flow_relay_stream *t)
{
    size_t budget = BUDGET;
    for (;;) {
        struct iovec iov[PEEK_IOV];
        int n = io_peek(t->c, iov, PEEK_IOV);
        if (n < 0 && errno == EAGAIN) {
            io_read_start(t->c);
            return 0;
        }
        if (n < 0) {
            finish(t, "reset", 1);
            return -1;
        }
        if (n == 0) {
            t->ueof = 1;
            return up_ended(t);
        }
        ssize_t w = io_writev(t->s, iov, n);
        if (w < 0 && errno != EAGAIN) {
            stream_failed(t, errno);
            return -1;
        }
        if (w > 0) {
            io_consume(t->c, (size_t)w);
            *t->up_count += (uint64_t)w;
            t->r->_last = io_mono_now();
        }
        /* A partial take goes round again: the next writev takes more or
         * says EAGAIN, which is what promises on_drain. */
        if (w < 0) {
            /* The stream is full: the client waits until on_drain. */
            t->uwait = 1;
            io_read_stop(t->c);
            return 0;
        }
        budget -= (size_t)w < budget ? (size_t)w : budget;
        if (budget == 0) {
            io_read_start(t->c); /* the client calls again for what is left */
            return 0;
        }
    }
}

/* client -> stream. Returns 0 to go on, -1 when the relay finished (and
 * |t| is gone). */
static int
pump_up(struct flow_relay_stream *t)
{
    size_t budget = BUDGET;
    int drained = 0;
    if (t->uwait)
        return 0;
    for (;;) {
        if (t->uoff < t->ulen) {
            struct iovec iov = {t->ubuf + t->uoff, t->ulen - t->uoff};
            ssize_t n = io_writev(t->s, &iov, 1);
            if (n < 0 && errno == EAGAIN) {
                /* The stream is full: the client waits until on_drain. */
                t->uwait = 1;
                io_read_stop(t->c);
                return 0;
            }
            if (n < 0) {
                stream_failed(t, errno);
                return -1;
            }
            t->uoff += (size_t)n;
            *t->up_count += (uint64_t)n;
            t->r->_last = io_mono_now();
            continue; /* a partial take: the next writev says EAGAIN or takes more */
        }
        t->uoff = t->ulen = 0;
        if (t->ueof)
            return up_ended(t);
        /* A short read emptied the client: waiting for on_readable saves
         * the read that would only say EAGAIN. Streams call on_readable
         * again for what is left when the budget ran out. */
        if (drained || budget == 0) {
            io_read_start(t->c);
            return 0;
        }
        if (io_can_peek(t->c))
            return pump_up_peek(t);
        if (buf_get(&t->ubuf, &t->ucap) == NULL) {
            finish(t, "error", 1);
            return -1;
        }
        size_t want = t->ucap < budget ? t->ucap : budget;
        ssize_t n = io_read(t->c, t->ubuf, want);
        if (n < 0 && errno == EAGAIN) {
            io_read_start(t->c);
            return 0;
        }
        if (n < 0 && errno == EBADMSG) {
            stream_failed(t, errno);
            return -1;
        }
        if (n < 0) {
            finish(t, "reset", 1); /* ECONNRESET: reset the stream too */
            return -1;
        }
        if (n == 0)
            t->ueof = 1;
        t->ulen = (size_t)n;
        budget -= (size_t)n;
        drained = (size_t)n < want;
    }
}

/* The stream's read or peek gave no bytes (|n| 0 or -1): 0 when the relay
 * waits, 1 at the end (the caller's loop passes it on), -1 when it
 * finished. */
static int
down_none(struct flow_relay_stream *t, ssize_t n)
{
    if (n < 0 && errno == EAGAIN) {
        io_read_start(t->s);
        return 0;
    }
    if (n < 0) {
        stream_failed(t, errno);
        return -1;
    }
    t->deof = 1;
    return 1;
}

/* Counts what the client's writev took (|w|): those bytes, or -1 when the
 * relay finished. */
static ssize_t
down_took(struct flow_relay_stream *t, ssize_t w)
{
    if (w < 0 && errno != EAGAIN) {
        finish(t, "reset", 1);
        return -1;
    }
    size_t took = w > 0 ? (size_t)w : 0;
    *t->down_count += took;
    t->r->_last = io_mono_now();
    return (ssize_t)took;
}

/* One read from the stream for a client that said how much it takes whole:
 * into the client's own memory where it offers some (an lwIP connection's
 * chunks, which its segments then point into: no copy), else into a buffer
 * all relays share (the client copies it into its send buffer): no buffer
 * per relay either way. Bytes moved (>0), 0 when the relay waits (the
 * stream is drained, or the client took less: the rest is kept in dbuf),
 * -1 when it finished. */
static int
pump_down_direct(struct flow_relay_stream *t, size_t room)
{
    static char scratch[BUF_SIZE];
    size_t want = room < sizeof(scratch) ? room : sizeof(scratch);
    char *in = io_write_buf(t->c, &want);
    if (in == NULL) {
        in = scratch;
        want = room < sizeof(scratch) ? room : sizeof(scratch);
    }
    ssize_t n = io_read(t->s, in, want);
    if (n <= 0) {
        if (in != scratch)
            (void)io_write_commit(t->c, 0); /* the space goes back */
        return down_none(t, n);
    }
    ssize_t w = down_took(t, in == scratch ? io_write(t->c, in, (size_t)n)
                                           : io_write_commit(t->c, (size_t)n));
    if (w < 0)
        return -1;
    size_t took = (size_t)w;
    if (took < (size_t)n) {
        /* Just the rest, freed once the client took it: a thousand
         * connections short of room must not each keep 64 KiB. */
        if (t->dbuf == NULL) {
            if ((t->dbuf = malloc((size_t)n - took)) == NULL) {
                finish(t, "error", 1);
                return -1;
            }
            t->dcap = (size_t)n - took;
            t->dleft = 1;
        }
        memcpy(t->dbuf, in + took, (size_t)n - took);
        t->doff = 0;
        t->dlen = (size_t)n - took;
        io_read_stop(t->s);
        return 0;
    }
    return (int)n;
}

/* One peek at the stream's decrypted bytes where they lie (Shadowsocks'
 * ring, TLS's record buffer) written to the client: no copy into a relay
 * buffer. At most |want| bytes. As pump_down_direct. */
static int
pump_down_peek(struct flow_relay_stream *t, size_t want)
{
    struct iovec iov[PEEK_IOV];
    int n = io_peek(t->s, iov, PEEK_IOV);
    if (n <= 0)
        return down_none(t, n);
    size_t offered = 0;
    int k = 0;
    for (; k < n && offered < want; k++) {
        if (iov[k].iov_len > want - offered)
            iov[k].iov_len = want - offered;
        offered += iov[k].iov_len;
    }
    ssize_t w = down_took(t, io_writev(t->c, iov, k));
    if (w < 0)
        return -1;
    size_t took = (size_t)w;
    if (took > 0)
        io_consume(t->s, took);
    if (took < offered) {
        io_read_stop(t->s); /* the client is full: its on_drain brings us back */
        return 0;
    }
    return (int)took;
}

/* stream -> client; same return as pump_up. */
static int
pump_down(struct flow_relay_stream *t)
{
    size_t budget = BUDGET;
    int drained = 0;
    for (;;) {
        if (t->doff < t->dlen) {
            ssize_t n = io_write(t->c, t->dbuf + t->doff, t->dlen - t->doff);
            if (n < 0 && errno != EAGAIN) {
                finish(t, "reset", 1); /* EPIPE/ECONNRESET: the client is gone */
                return -1;
            }
            if (n > 0) {
                size_t pre = t->dpre < (size_t)n ? t->dpre : (size_t)n;
                t->dpre -= pre;
                t->doff += (size_t)n;
                *t->down_count += (uint64_t)n - pre;
                t->r->_last = io_mono_now();
            }
            if (t->doff < t->dlen) {
                /* A short write means a full client: stop reading the
                 * stream until the client's on_drain. */
                io_read_stop(t->s);
                return 0;
            }
        }
        t->doff = t->dlen = 0;
        if (t->dleft) {
            free(t->dbuf);
            t->dbuf = NULL;
            t->dcap = 0;
            t->dleft = 0;
        }
        if (t->deof) {
            io_read_stop(t->s);
            if (!t->dshut) {
                t->dshut = 1;
                io_shutdown(t->c);
            }
            return check_done(t);
        }
        if (drained || budget == 0) {
            io_read_start(t->s);
            return 0;
        }
        size_t room = io_write_room(t->c);
        if (room == 0) {
            io_read_stop(t->s); /* the client's on_drain comes when it has room */
            return 0;
        }
        if (io_can_peek(t->s)) {
            int r = pump_down_peek(t, room < budget ? room : budget);
            if (r <= 0)
                return r;
            budget -= (size_t)r < budget ? (size_t)r : budget;
            continue;
        }
        if (room != (size_t)-1) {
            int r = pump_down_direct(t, room < budget ? room : budget);
            if (r <= 0)
                return r;
            budget -= (size_t)r < budget ? (size_t)r : budget;
            continue;
        }
        if (buf_get(&t->dbuf, &t->dcap) == NULL) {
            finish(t, "error", 1);
            return -1;
        }
        /* Fill the buffer from several stream reads (a TLS stream yields one
         * record per read) so the client gets fewer, larger sends. */
        size_t want = t->dcap < budget ? t->dcap : budget;
        while (t->dlen < want) {
            ssize_t n = io_read(t->s, t->dbuf + t->dlen, want - t->dlen);
            if (n > 0) {
                t->dlen += (size_t)n;
                continue;
            }
            if (n == 0) {
                t->deof = 1;
                break;
            }
            if (errno == EAGAIN) {
                drained = 1;
                break;
            }
            stream_failed(t, errno);
            return -1;
        }
        budget -= t->dlen;
    }
}

static void
on_client_readable(void *arg)
{
    pump_up(arg);
}

static void
on_client_drain(void *arg)
{
    struct flow_relay_stream *t = arg;
    /* A background failure on the client side shows on its next read. */
    if (pump_down(t) == 0 && t->doff == t->dlen && !t->ueof && !t->uwait)
        pump_up(t);
}

static void
on_stream_readable(void *arg)
{
    pump_down(arg);
}

static void
on_kick(struct ev_loop *loop, ev_idle *w, int revents)
{
    struct flow_relay_stream *t = w->data;
    int up = t->kick_up, down = t->kick_down;
    ev_idle_stop(loop, w);
    t->kick_up = t->kick_down = 0;
    if (up && pump_up(t) != 0)
        return;
    if (down)
        pump_down(t);
}

static void
on_drain(void *arg)
{
    struct flow_relay_stream *t = arg;
    int waited = t->uwait;
    t->uwait = 0;
    if (pump_up(t) != 0)
        return;
    /* Not a reply to EAGAIN: a background send failed, and only a read
     * reports it now (unless the client side is already blocking us). */
    if (!waited && t->doff == t->dlen && !t->deof)
        pump_down(t);
}

static void
on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct flow_relay *r = (struct flow_relay *)((char *)w - offsetof(struct flow_relay, _idle));
    double left = r->_last + r->_idle_timeout - io_mono_now();
    if (left <= 0) {
        finish(r->_st, "idle", 0);
        return;
    }
    w->repeat = left;
    ev_timer_again(loop, w);
}

/* |pre| into a new buffer of at least |min| bytes. */
static int
pre_copy(char **buf, size_t *cap, size_t *len, const void *pre, size_t pre_len, size_t min)
{
    if (pre_len == 0)
        return 0;
    *cap = pre_len > min ? pre_len : min;
    *buf = malloc(*cap);
    if (*buf == NULL)
        return -1;
    memcpy(*buf, pre, pre_len);
    *len = pre_len;
    return 0;
}

int
flow_relay_start_stream(struct flow_relay *r, struct ev_loop *loop,
                        const struct flow_relay_args *a)
{
    struct flow_relay_stream *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -1;
    /* |pre_down| (a proxy's reply, a server's banner) is held alone and
     * freed once the client took it, as a direct write's rest: 5,000 idle
     * connections to a server that speaks first kept 64 KiB buffers each,
     * 4 KiB of them touched (RSS 43 MiB instead of 23). */
    if (pre_copy(&t->ubuf, &t->ucap, &t->ulen, a->pre_up, a->pre_up_len, BUF_SIZE) != 0 ||
        pre_copy(&t->dbuf, &t->dcap, &t->dlen, a->pre_down, a->pre_down_len, 0) != 0) {
        free(t->ubuf);
        free(t);
        return -1;
    }
    t->dleft = a->pre_down_len > 0;
    memset(r, 0, sizeof(*r));
    r->_loop = loop;
    r->_cb = a->cb;
    r->_arg = a->arg;
    r->_st = t;
    r->_running = 1;
    r->_idle_timeout = a->idle;
    r->_last = io_mono_now();
    t->r = r;
    t->s = a->upstream;
    t->c = a->client;
    t->dpre = a->pre_down_len;
    t->up_count = a->up_count;
    t->down_count = a->down_count;
    ev_idle_init(&t->kick, on_kick);
    /* Highest priority: an idle watcher then runs on every loop pass after
     * the poll (which it makes non-blocking), not only when the loop is
     * otherwise idle, so a kicked flow waits one pass, never longer. */
    ev_set_priority(&t->kick, EV_MAXPRI);
    t->kick.data = t;
    io_set_callbacks(t->c, on_client_readable, on_client_drain, t);
    io_set_callbacks(t->s, on_stream_readable, on_drain, t);
    ev_timer_init(&r->_idle, on_idle, 0, a->idle);
    ev_timer_again(loop, &r->_idle);
    /* Everything starts from the loop, so |cb| never runs inside this call;
     * the first pass also reads bytes the stream decrypted already. */
    t->kick_up = t->kick_down = 1;
    ev_idle_start(loop, &t->kick);
    return 0;
}

/* see relay.h */
void
flow_relay_stream_stop(struct flow_relay *r, int reset)
{
    struct flow_relay_stream *t = r->_st;
    struct io_stream *s = t->s, *c = t->c;
    release(t);
    io_close(c, reset);
    io_close(s, reset);
}
