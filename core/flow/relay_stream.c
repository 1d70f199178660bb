#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow/relay.h"
#include "outbound/outbound.h"
#include "outbound/stream.h"

/* Stream mode of the relay. The client side is a kernel socket, the
 * upstream an outbound_stream that encrypts into (and decrypts from) its own
 * buffers, so bytes cross user space once per direction: client -> ubuf ->
 * writev (the stream's copy is its encryption), and read (the stream's copy
 * is its decryption) -> dbuf -> client. */

#define BUF_SIZE (64 * 1024)
/* Bytes moved per direction per wake-up before yielding to other flows. */
#define BUDGET (256 * 1024)

struct flow_relay_stream {
    struct flow_relay *r;
    struct outbound_stream *s;
    int cfd;
    ev_io crd, cwr, srd; /* client readable, client writable, stream readable */
    ev_idle kick;        /* "pump on the next loop pass" (start, budget spent) */
    int kick_up, kick_down;
    /* client -> stream: ubuf[uoff, ulen) is read but not yet taken */
    char *ubuf;
    size_t ucap, uoff, ulen;
    int ueof, ushut, uwait; /* uwait: writev said EAGAIN, on_drain follows */
    /* stream -> client: dbuf[doff, dlen) waits for the client; the first
     * dpre of those are |pre_down|, not counted */
    char *dbuf;
    size_t dcap, doff, dlen, dpre;
    int deof, dshut;
    uint64_t *up_count, *down_count;
};

static void
release(struct flow_relay_stream *t)
{
    struct ev_loop *loop = t->r->_loop;
    ev_io_stop(loop, &t->crd);
    ev_io_stop(loop, &t->cwr);
    ev_io_stop(loop, &t->srd);
    ev_idle_stop(loop, &t->kick);
    ev_timer_stop(loop, &t->r->_idle);
    t->s->on_drain = NULL;
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
    struct outbound_stream *s = t->s;
    int cfd = t->cfd;
    release(t);
    if (reset)
        outbound_close_reset(cfd);
    else
        close(cfd);
    outbound_stream_close(s, reset);
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

/* client -> stream. Returns 0 to go on, -1 when the relay finished (and
 * |t| is gone). */
static int
pump_up(struct flow_relay_stream *t)
{
    struct ev_loop *loop = t->r->_loop;
    size_t budget = BUDGET;
    int drained = 0;
    if (t->uwait)
        return 0;
    for (;;) {
        if (t->uoff < t->ulen) {
            struct iovec iov = {t->ubuf + t->uoff, t->ulen - t->uoff};
            ssize_t n = outbound_stream_writev(t->s, &iov, 1);
            if (n < 0 && errno == EAGAIN) {
                /* The stream is full: the client waits until on_drain. */
                t->uwait = 1;
                ev_io_stop(loop, &t->crd);
                return 0;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                stream_failed(t, errno);
                return -1;
            }
            t->uoff += (size_t)n;
            *t->up_count += (uint64_t)n;
            t->r->_last = ev_now(loop);
            continue; /* a partial take: the next writev says EAGAIN or takes more */
        }
        t->uoff = t->ulen = 0;
        if (t->ueof) {
            ev_io_stop(loop, &t->crd);
            if (!t->ushut) {
                t->ushut = 1;
                if (t->s->ops->shutdown(t->s) != 0) {
                    stream_failed(t, errno);
                    return -1;
                }
            }
            return check_done(t);
        }
        /* A short read emptied the socket: waiting for EV_READ saves the
         * read that would only say EAGAIN. Level-triggered watchers also
         * bring us back when the budget ran out. */
        if (drained || budget == 0) {
            ev_io_start(loop, &t->crd);
            return 0;
        }
        if (buf_get(&t->ubuf, &t->ucap) == NULL) {
            finish(t, "error", 1);
            return -1;
        }
        size_t want = t->ucap < budget ? t->ucap : budget;
        ssize_t n = read(t->cfd, t->ubuf, want);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            ev_io_start(loop, &t->crd);
            return 0;
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

/* stream -> client; same return as pump_up. */
static int
pump_down(struct flow_relay_stream *t)
{
    struct ev_loop *loop = t->r->_loop;
    size_t budget = BUDGET;
    int drained = 0;
    for (;;) {
        if (t->doff < t->dlen) {
            ssize_t n = send(t->cfd, t->dbuf + t->doff, t->dlen - t->doff, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN && errno != EINTR) {
                finish(t, "reset", 1); /* EPIPE/ECONNRESET: the client is gone */
                return -1;
            }
            if (n > 0) {
                size_t pre = t->dpre < (size_t)n ? t->dpre : (size_t)n;
                t->dpre -= pre;
                t->doff += (size_t)n;
                *t->down_count += (uint64_t)n - pre;
                t->r->_last = ev_now(loop);
            }
            if (t->doff < t->dlen) {
                /* A short send means a full socket buffer: stop reading
                 * the stream until the client drains. */
                ev_io_stop(loop, &t->srd);
                ev_io_start(loop, &t->cwr);
                return 0;
            }
        }
        t->doff = t->dlen = 0;
        ev_io_stop(loop, &t->cwr);
        if (t->deof) {
            ev_io_stop(loop, &t->srd);
            if (!t->dshut) {
                t->dshut = 1;
                shutdown(t->cfd, SHUT_WR);
            }
            return check_done(t);
        }
        if (drained) {
            ev_io_start(loop, &t->srd);
            return 0;
        }
        if (budget == 0) {
            /* Decrypted bytes inside the stream make no EV_READ. */
            ev_io_start(loop, &t->srd);
            if (outbound_stream_pending(t->s) > 0) {
                t->kick_down = 1;
                ev_idle_start(loop, &t->kick);
            }
            return 0;
        }
        if (buf_get(&t->dbuf, &t->dcap) == NULL) {
            finish(t, "error", 1);
            return -1;
        }
        /* Fill the buffer from several stream reads (a TLS stream yields one
         * record per read) so the client gets fewer, larger sends. */
        size_t want = t->dcap < budget ? t->dcap : budget;
        while (t->dlen < want) {
            ssize_t n = outbound_stream_read(t->s, t->dbuf + t->dlen, want - t->dlen);
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
            if (errno != EINTR) {
                stream_failed(t, errno);
                return -1;
            }
        }
        budget -= t->dlen;
    }
}

static void
on_client_read(struct ev_loop *loop, ev_io *w, int revents)
{
    pump_up(w->data);
}

static void
on_client_write(struct ev_loop *loop, ev_io *w, int revents)
{
    pump_down(w->data);
}

static void
on_stream_read(struct ev_loop *loop, ev_io *w, int revents)
{
    pump_down(w->data);
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
    double left = r->_last + r->_idle_timeout - ev_now(loop);
    if (left <= 0) {
        finish(r->_st, "idle", 0);
        return;
    }
    w->repeat = left;
    ev_timer_again(loop, w);
}

static int
pre_copy(char **buf, size_t *cap, size_t *len, const void *pre, size_t pre_len)
{
    if (pre_len == 0)
        return 0;
    *cap = pre_len > BUF_SIZE ? pre_len : BUF_SIZE;
    *buf = malloc(*cap);
    if (*buf == NULL)
        return -1;
    memcpy(*buf, pre, pre_len);
    *len = pre_len;
    return 0;
}

int
flow_relay_start_stream(struct flow_relay *r, struct ev_loop *loop, int client_fd,
                        struct outbound_stream *up, const void *pre_up, size_t pre_up_len,
                        const void *pre_down, size_t pre_down_len, uint64_t *up_count,
                        uint64_t *down_count, double idle, flow_relay_done_cb cb, void *arg)
{
    struct flow_relay_stream *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -1;
    if (pre_copy(&t->ubuf, &t->ucap, &t->ulen, pre_up, pre_up_len) != 0 ||
        pre_copy(&t->dbuf, &t->dcap, &t->dlen, pre_down, pre_down_len) != 0) {
        free(t->ubuf);
        free(t);
        return -1;
    }
    memset(r, 0, sizeof(*r));
    r->_loop = loop;
    r->_cb = cb;
    r->_arg = arg;
    r->_st = t;
    r->_running = 1;
    r->_idle_timeout = idle;
    r->_last = ev_now(loop);
    t->r = r;
    t->s = up;
    t->cfd = client_fd;
    t->dpre = pre_down_len;
    t->up_count = up_count;
    t->down_count = down_count;
    ev_io_init(&t->crd, on_client_read, client_fd, EV_READ);
    ev_io_init(&t->cwr, on_client_write, client_fd, EV_WRITE);
    ev_io_init(&t->srd, on_stream_read, up->fd, EV_READ);
    ev_idle_init(&t->kick, on_kick);
    /* Highest priority: an idle watcher then runs on every loop pass after
     * the poll (which it makes non-blocking), not only when the loop is
     * otherwise idle, so a kicked flow waits one pass, never longer. */
    ev_set_priority(&t->kick, EV_MAXPRI);
    t->crd.data = t->cwr.data = t->srd.data = t->kick.data = t;
    up->on_drain = on_drain;
    up->drain_arg = t;
    ev_timer_init(&r->_idle, on_idle, 0, idle);
    ev_timer_again(loop, &r->_idle);
    /* Everything starts from the loop, so |cb| never runs inside this call;
     * the first pass also reads bytes the stream decrypted already. */
    t->kick_up = t->kick_down = 1;
    ev_idle_start(loop, &t->kick);
    return 0;
}

/* see relay.h */
void
flow_relay_stream_stop(struct flow_relay *r)
{
    struct flow_relay_stream *t = r->_st;
    struct outbound_stream *s = t->s;
    int cfd = t->cfd;
    release(t);
    close(cfd);
    outbound_stream_close(s, 0);
}
