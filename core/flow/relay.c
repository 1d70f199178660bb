#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flow/flow.h"
#include "flow/relay.h"
#include "io/io.h"

#define PIPE_CHUNK (64 * 1024)
/* Moves per wake-up before yielding to other flows. */
#define PUMP_ROUNDS 16

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void
dir_close(struct ev_loop *loop, struct flow_relay_dir *d)
{
    ev_io_stop(loop, &d->_rd);
    ev_io_stop(loop, &d->_wr);
    if (d->_pipe[0] >= 0) {
        close(d->_pipe[0]);
        close(d->_pipe[1]);
        d->_pipe[0] = d->_pipe[1] = -1;
    }
    free(d->_pre);
    d->_pre = NULL;
}

static void
finish(struct flow_relay *r, const char *reason, int reset)
{
    struct ev_loop *loop = r->_loop;
    int cfd = r->_up._src, ufd = r->_up._dst;
    dir_close(loop, &r->_up);
    dir_close(loop, &r->_down);
    ev_timer_stop(loop, &r->_idle);
    r->_running = 0;
    if (reset) {
        io_close_reset(cfd);
        io_close_reset(ufd);
    } else {
        close(cfd);
        close(ufd);
    }
    r->_cb(r, r->_arg, reason);
}

static void
want(struct flow_relay *r, struct flow_relay_dir *d, int rd, int wr)
{
    if (rd)
        ev_io_start(r->_loop, &d->_rd);
    else
        ev_io_stop(r->_loop, &d->_rd);
    if (wr)
        ev_io_start(r->_loop, &d->_wr);
    else
        ev_io_stop(r->_loop, &d->_wr);
}

/* Moves what it can in one direction. Returns 0 to go on, -1 when the relay
 * finished (and |r| must not be touched). */
static int
pump(struct flow_relay *r, struct flow_relay_dir *d)
{
    for (int round = 0; round < PUMP_ROUNDS; round++) {
        if (d->_pre_off < d->_pre_len) {
            ssize_t n = send(d->_dst, d->_pre + d->_pre_off, d->_pre_len - d->_pre_off,
                             MSG_NOSIGNAL);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                want(r, d, 0, 1);
                return 0;
            }
            if (n < 0) {
                finish(r, "reset", 1);
                return -1;
            }
            d->_pre_off += (size_t)n;
            /* Early client bytes are payload; a reply to the client is not. */
            if (d == &r->_up)
                *d->_count += (uint64_t)n;
            continue;
        }
        if (d->_in_pipe > 0) {
            ssize_t n = splice(d->_pipe[0], NULL, d->_dst, NULL, d->_in_pipe,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                want(r, d, 0, 1);
                return 0;
            }
            if (n <= 0) {
                finish(r, "reset", 1); /* EPIPE/ECONNRESET: the receiver is gone */
                return -1;
            }
            d->_in_pipe -= (size_t)n;
            *d->_count += (uint64_t)n;
            r->_last = io_mono_now();
            continue;
        }
        if (d->_eof) {
            want(r, d, 0, 0);
            if (!d->_shut) {
                d->_shut = 1;
                shutdown(d->_dst, SHUT_WR);
            }
            struct flow_relay_dir *o = d == &r->_up ? &r->_down : &r->_up;
            if (o->_shut) {
                finish(r, "done", 0);
                return -1;
            }
            return 0;
        }
        if (d->_pipe[0] < 0 && pipe2(d->_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
            d->_pipe[0] = d->_pipe[1] = -1;
            finish(r, "error", 1);
            return -1;
        }
        ssize_t n = splice(d->_src, NULL, d->_pipe[1], NULL, PIPE_CHUNK,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            want(r, d, 1, 0);
            return 0;
        }
        if (n < 0) {
            finish(r, "reset", 1); /* ECONNRESET from the sender: reset the other side */
            return -1;
        }
        if (n == 0)
            d->_eof = 1;
        d->_in_pipe += (size_t)n;
        r->_last = io_mono_now();
    }
    /* Still busy: come back on the next loop pass, after other flows. */
    want(r, d, d->_in_pipe == 0 && !d->_eof, d->_in_pipe > 0 || d->_pre_off < d->_pre_len);
    return 0;
}

static void
on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    struct flow_relay_dir *d = w->data;
    pump(d->_r, d);
}

static void
on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct flow_relay *r = CONTAINER(w, struct flow_relay, _idle);
    double left = r->_last + r->_idle_timeout - io_mono_now();
    if (left <= 0) {
        finish(r, "idle", 0);
        return;
    }
    w->repeat = left;
    ev_timer_again(loop, w);
}

static int
dir_init(struct flow_relay *r, struct flow_relay_dir *d, int src, int dst, const void *pre,
         size_t len, uint64_t *count)
{
    memset(d, 0, sizeof(*d));
    d->_r = r;
    d->_src = src;
    d->_dst = dst;
    d->_pipe[0] = d->_pipe[1] = -1;
    d->_count = count;
    if (len > 0) {
        d->_pre = malloc(len);
        if (d->_pre == NULL)
            return -1;
        memcpy(d->_pre, pre, len);
        d->_pre_len = len;
    }
    ev_io_init(&d->_rd, on_io, src, EV_READ);
    ev_io_init(&d->_wr, on_io, dst, EV_WRITE);
    d->_rd.data = d->_wr.data = d;
    return 0;
}

#define SPLICE_NO_PIPES (-2)

/* Splice mode: the sockets under two bare-socket streams. */
static int
splice_start(struct flow_relay *r, struct ev_loop *loop, int client_fd, int up_fd,
             const struct flow_relay_args *a)
{
    memset(r, 0, sizeof(*r));
    r->_loop = loop;
    r->_cb = a->cb;
    r->_arg = a->arg;
    if (dir_init(r, &r->_up, client_fd, up_fd, a->pre_up, a->pre_up_len, a->up_count) != 0 ||
        dir_init(r, &r->_down, up_fd, client_fd, a->pre_down, a->pre_down_len,
                 a->down_count) != 0) {
        free(r->_up._pre);
        free(r->_down._pre);
        return -1;
    }
    /* Both pipes now, not at the first byte: out of descriptors (EMFILE)
     * the flow still relays, through buffers, instead of ending as a bare
     * "error" after the client was told the connection succeeded. */
    if (pipe2(r->_up._pipe, O_NONBLOCK | O_CLOEXEC) != 0 ||
        pipe2(r->_down._pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        dir_close(loop, &r->_up);
        dir_close(loop, &r->_down);
        return SPLICE_NO_PIPES;
    }
    r->_running = 1;
    r->_idle_timeout = a->idle;
    r->_last = io_mono_now();
    ev_timer_init(&r->_idle, on_idle, 0, a->idle);
    ev_timer_again(loop, &r->_idle);
    /* Everything starts from the loop, so |cb| never runs inside this call. */
    want(r, &r->_up, a->pre_up_len == 0, a->pre_up_len > 0);
    want(r, &r->_down, a->pre_down_len == 0, a->pre_down_len > 0);
    return 0;
}

int
flow_relay_start(struct flow_relay *r, struct ev_loop *loop, const struct flow_relay_args *a)
{
    int cfd = io_splice_fd(a->client), ufd = io_splice_fd(a->upstream);

    if (cfd < 0 || ufd < 0)
        return flow_relay_start_stream(r, loop, a);
    int rc = splice_start(r, loop, cfd, ufd, a);
    if (rc == SPLICE_NO_PIPES)
        return flow_relay_start_stream(r, loop, a);
    if (rc != 0)
        return -1;
    /* The relay owns the sockets now; the wrappers go. */
    io_fd_release(a->client);
    io_fd_release(a->upstream);
    return 0;
}

static void
stop(struct flow_relay *r, int reset)
{
    if (!r->_running)
        return;
    if (r->_icpt != NULL) {
        r->_running = 0;
        r->_icpt->stop(r->_icpt_state, reset);
        r->_icpt = NULL;
        return;
    }
    if (r->_st != NULL) {
        flow_relay_stream_stop(r, reset);
        return;
    }
    r->_running = 0;
    dir_close(r->_loop, &r->_up);
    dir_close(r->_loop, &r->_down);
    ev_timer_stop(r->_loop, &r->_idle);
    if (reset) {
        io_close_reset(r->_up._src);
        io_close_reset(r->_up._dst);
    } else {
        close(r->_up._src);
        close(r->_up._dst);
    }
}

void
flow_relay_stop(struct flow_relay *r)
{
    stop(r, 0);
}

void
flow_relay_intercept_done(struct flow_relay *r, const char *reason)
{
    r->_running = 0;
    r->_icpt = NULL;
    r->_cb(r, r->_arg, reason);
}

void
flow_relay_abort(struct flow_relay *r)
{
    stop(r, 1);
}
