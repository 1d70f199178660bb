/* The HTTP/1 exchange driver (h1_conn.h). It is the HTTP proxy's
 * forwarding loop moved onto io streams: every wake-up runs step(), which
 * moves whatever can move in rounds until nothing does, then reads only
 * the sides whose bytes have somewhere to go. The rules themselves are
 * h1_forward.c's; this file only moves bytes and keeps state. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1_buf.h"
#include "http/h1_conn.h"
#include "http/h1_conn_int.h"
#include "io/io.h"

/* A head must be whole this long after its first byte: the idle timer
 * alone restarts on every byte, so one byte a minute would hold a
 * connection (and its descriptor) forever. nginx's client_header_timeout. */
#define HEAD_DEADLINE 30.0

static double
head_deadline(const struct http_h1_conn *c)
{
    return c->o.idle_timeout < HEAD_DEADLINE ? c->o.idle_timeout : HEAD_DEADLINE;
}

static void
close_upstream(struct http_h1_conn *c)
{
    if (c->up != NULL)
        io_close(c->up, 0);
    c->up = NULL;
    c->reading_up = 0;
    http_buf_clear(&c->uin);
}

static void
stop(struct http_h1_conn *c)
{
    ev_timer_stop(c->loop, &c->idle);
    io_soon_cancel(c->loop, &c->soon);
}

/* Ends the connection: closes both streams, then tells the owner. */
static int
finish(struct http_h1_conn *c, const char *reason)
{
    stop(c);
    if (c->client != NULL)
        io_close(c->client, 0);
    c->client = NULL;
    close_upstream(c);
    c->state = DONE;
    c->cbs.on_done(c->arg, c, reason);
    return -1;
}

/* Out of memory, the answer is empty and the connection closes: from
 * local_step, so that respond() never ends the connection by itself. */
static int
local(struct http_h1_conn *c, int status, const char *reason, const char *extra, int close)
{
    if (http_fwd_reply(&c->arena, c->have_req ? &c->req : NULL, status, reason, extra, close,
                       &c->out) != 0) {
        c->out = mem_slice(NULL, 0);
        close = 1;
    }
    c->out_off = 0;
    /* A refused request's body has no known end: only a close is safe. */
    c->local_close = close || !c->have_req || c->req.close || c->req.refused;
    c->local_reason = reason;
    c->state = LOCAL;
    return 1;
}

/* An error answer, and close; only while the client has had no byte of a
 * response, else just the close. The upstream goes at once. */
static int
fail(struct http_h1_conn *c, int status, const char *reason)
{
    close_upstream(c);
    if (c->resp_sent_any)
        return finish(c, reason);
    return local(c, status, reason, NULL, 1);
}

static int
on_head(struct http_h1_conn *c, const struct http_request *parsed, size_t n)
{
    http_h1_collect_reset(c);
    mem_arena_reset(&c->arena);
    memset(&c->resp, 0, sizeof(c->resp));
    c->have_req = 0;
    if (http_fwd_request_init(&c->req, &c->arena, &c->o.fwd, c->cin.p, n, parsed) != 0)
        return fail(c, 400, "Bad Request");
    c->have_req = 1;
    c->cin.fwd = n;
    http_buf_consume(&c->cin, n);
    c->req_done = c->req.body.done;
    c->resp_parsed = c->resp_done = c->up_eof = c->resp_sent_any = c->upgraded = 0;
    c->out = c->down = mem_slice(NULL, 0);
    c->out_off = c->down_off = 0;
    c->state = DECIDE;
    c->cbs.on_request_head(c->arg, c, &c->req);
    return 1;
}

/* A kept upstream says something between requests: it closed, or it is
 * out of turn. Either way it cannot carry the next request. */
static void
watch_kept(struct http_h1_conn *c)
{
    char b[512];
    ssize_t n;

    if (c->up == NULL)
        return;
    n = io_read(c->up, b, sizeof(b));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        c->want_up = 1;
        return;
    }
    close_upstream(c);
    if (c->cbs.on_upstream_end != NULL)
        c->cbs.on_upstream_end(c->arg, c, "done");
}

static int
head_step(struct http_h1_conn *c)
{
    struct http_request req;
    int n = c->cin.len && http_buf_head_may_end(&c->cin)
                ? http_h1_parse_request(c->cin.p, c->cin.len, &req)
                : HTTP_ERR_INCOMPLETE;
    ssize_t r;

    if (n > 0)
        return on_head(c, &req, (size_t)n);
    c->have_req = 0;
    if (n == HTTP_ERR_TOO_LARGE || (n == HTTP_ERR_INCOMPLETE && c->cin.len >= HTTP_MAX_HEAD))
        return fail(c, 431, "Request Header Fields Too Large");
    if (n != HTTP_ERR_INCOMPLETE)
        return fail(c, 400, "Bad Request");
    watch_kept(c);
    r = http_buf_fill(c->client, &c->cin);
    if (r == 0 || r == -2)
        return finish(c, c->cin.len ? "client closed mid-request" : "done");
    if (r < 0) {
        c->want_client = 1;
        if (c->cin.len == 0) { /* idle between requests: hold no memory */
            http_buf_release(&c->cin);
            http_h1_collect_reset(c);
            mem_arena_fini(&c->arena);
            mem_arena_init(&c->arena);
        }
        return 0;
    }
    return 1;
}

/* Client -> upstream: the upstream head, then body bytes as framed. */
/* req_step's result for a body whose framing is broken (a bad chunk size):
 * the client's fault, a 400, where other failures are the upstream's. */
#define REQ_BAD_BODY (-3)

static int
req_step(struct http_h1_conn *c)
{
    ssize_t r;

    if (c->out_off < c->out.len || c->cin.fwd > 0) {
        r = http_buf_send(c->up, c->out, &c->out_off, &c->cin);
        if (r > 0)
            *c->up_count += (uint64_t)r;
        return r < 0 ? -1 : r > 0;
    }
    if (c->req_done)
        return 0;
    if (c->cin.len > 0) {
        ssize_t k = http_body_feed(&c->req.body, c->cin.p, c->cin.len);

        if (k < 0)
            return REQ_BAD_BODY;
        c->cin.fwd = (size_t)k;
        c->req_done = c->req.body.done;
        return k > 0 || c->req_done;
    }
    r = http_buf_fill(c->client, &c->cin);
    if (r == 0 || r == -2)
        return -1;
    if (r < 0)
        c->want_client = 1;
    return r > 0;
}

/* The final head is in the first |n| bytes of uin. */
static int
final_head(struct http_h1_conn *c, const struct http_response *res, size_t n)
{
    /* A client that asked to close must hear that we will: the origin's
     * own Connection field says keep-alive, since it never saw the close. */
    int closing = c->req.close && !http_connection_has(res->headers, res->num_headers, "close");
    int copy = c->cbs.on_response_head != NULL || closing;

    if (http_fwd_response_init(&c->resp, &c->arena, &c->req, c->uin.p, n, res, copy) != 0)
        return -1;
    c->resp_parsed = 1;
    c->resp_done = c->resp.body.done;
    c->uin.fwd = n;
    if (!copy)
        return 1;
    if (c->cbs.on_response_head != NULL)
        c->cbs.on_response_head(c->arg, c, &c->resp);
    if (closing &&
        http_fwd_field_set(&c->resp.fields, MEM_SLICE_LIT("Connection"), MEM_SLICE_LIT("close")) != 0)
        return -1;
    if (c->cresp.active) { /* the owner wants the body whole first */
        http_buf_consume(&c->uin, n);
        return 1;
    }
    if (!http_fwd_fields_edited(&c->resp.fields))
        return 1;
    if (http_fwd_response_head(&c->resp, &c->down) != 0)
        return -1;
    c->down_off = 0;
    http_buf_consume(&c->uin, n); /* the client gets the new head instead */
    return 1;
}

/* Upstream -> client: the response head, then body bytes as framed.
 * -1 upstream trouble, -2 the client failed. */
static int
resp_step(struct http_h1_conn *c)
{
    ssize_t r;

    if (c->cresp.active)
        return http_h1_collect_resp_step(c);
    if (c->down_off < c->down.len || c->uin.fwd > 0) {
        r = http_buf_send(c->client, c->down, &c->down_off, &c->uin);
        if (r > 0) {
            *c->down_count += (uint64_t)r;
            c->resp_sent_any = 1;
        }
        return r < 0 ? -2 : r > 0;
    }
    if (c->resp_done)
        return 0;
    if (c->uin.len > 0 && !c->resp_parsed) {
        struct http_response res;
        int n = http_buf_head_may_end(&c->uin)
                    ? http_h1_parse_response(c->uin.p, c->uin.len, &res)
                    : HTTP_ERR_INCOMPLETE;

        if (n > 0 && res.status == 101 && c->req.upgrade) {
            c->uin.fwd = (size_t)n; /* the head goes out, then the tunnel */
            c->upgraded = 1;
            return 1;
        }
        if (n > 0 && res.status >= 100 && res.status < 200) {
            c->uin.fwd = (size_t)n; /* an interim response: the real one follows */
            return 1;
        }
        if (n > 0)
            return final_head(c, &res, (size_t)n);
        if (n != HTTP_ERR_INCOMPLETE || c->uin.len >= HTTP_MAX_HEAD)
            return -1;
    } else if (c->uin.len > c->uin.fwd && c->resp_parsed) {
        ssize_t k = http_body_feed(&c->resp.body, c->uin.p + c->uin.fwd, c->uin.len - c->uin.fwd);

        if (k < 0)
            return -1;
        c->uin.fwd += (size_t)k;
        c->resp_done = c->resp.body.done;
        if (k > 0 || c->resp_done)
            return 1;
    }
    if (c->up_eof)
        return 0;
    r = http_buf_fill(c->up, &c->uin);
    if (r == -2 || r == 0) {
        c->up_eof = 1;
        if (c->resp_parsed && c->resp.body.kind == HTTP_BODY_CLOSE) {
            c->resp_done = 1;
            return 1;
        }
        return -1;
    }
    if (r < 0)
        c->want_up = 1;
    return r > 0;
}

/* The response before was whole: a bad next head gets its answer. */
static void
next_request(struct http_h1_conn *c)
{
    http_buf_release(&c->cin); /* unless pipelined bytes wait in it */
    http_buf_release(&c->uin);
    c->state = HEAD;
    c->resp_sent_any = 0;
    c->out = c->down = mem_slice(NULL, 0);
    c->out_off = c->down_off = 0;
}

static void set_reading(struct io_stream *s, int want, int *reading);

/* The 101 is out: both streams go to the owner, with what is buffered. */
static int
tunnel(struct http_h1_conn *c)
{
    struct io_stream *client = c->client, *up = c->up;
    if (c->cbs.on_upgrade == NULL)
        return finish(c, "upgrade refused");
    stop(c);
    set_reading(client, 0, &c->reading_client);
    set_reading(up, 0, &c->reading_up);
    io_set_callbacks(client, NULL, NULL, NULL);
    io_set_callbacks(up, NULL, NULL, NULL);
    c->client = c->up = NULL;
    c->state = RELEASED;
    c->cbs.on_upgrade(c->arg, c, client, up, mem_slice(c->cin.p, c->cin.len),
                      mem_slice(c->uin.p, c->uin.len));
    return -1; /* the owner freed |c| */
}

static int
exchange_step(struct http_h1_conn *c)
{
    int a = req_step(c), b;

    if (a == REQ_BAD_BODY)
        return fail(c, 400, "Bad Request");
    if (a < 0)
        return fail(c, 502, "Bad Gateway");
    b = resp_step(c);
    if (b == -2)
        return finish(c, "client gone");
    if (c->upgraded && b >= 0 && c->uin.fwd == 0 && c->down_off >= c->down.len)
        return tunnel(c);
    if (b < 0)
        return c->resp_sent_any ? finish(c, "upstream broke the response")
                                : fail(c, 502, "Bad Gateway");
    if (!c->resp_done || c->cresp.active || c->uin.fwd > 0 || c->down_off < c->down.len)
        return a | b;
    switch (http_fwd_after(&c->req, &c->resp, c->uin.len == 0 && !c->up_eof)) {
    case HTTP_FWD_CLOSE:
        return finish(c, "done");
    case HTTP_FWD_DROP_UPSTREAM: /* stray bytes after the response, or it closed */
        close_upstream(c);
        if (c->cbs.on_upstream_end != NULL)
            c->cbs.on_upstream_end(c->arg, c, "done");
        break;
    case HTTP_FWD_KEEP:
        if (c->cbs.on_upstream_idle != NULL) { /* the owner pools it */
            struct io_stream *up = c->up;
            set_reading(up, 0, &c->reading_up);
            io_set_callbacks(up, NULL, NULL, NULL);
            c->up = NULL;
            c->cbs.on_upstream_idle(c->arg, c, up);
        }
        break;
    }
    http_buf_clear(&c->uin);
    next_request(c);
    return 1;
}

/* The answer, then the request body read and dropped (keep-alive). */
static int
local_step(struct http_h1_conn *c)
{
    ssize_t r;

    if (c->out_off < c->out.len) {
        r = io_write(c->client, c->out.ptr + c->out_off, c->out.len - c->out_off);
        if (r < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : finish(c, "client gone");
        c->out_off += (size_t)r;
        return r > 0;
    }
    if (c->local_close)
        return finish(c, c->local_reason);
    if (!c->req_done && c->cin.len > 0) {
        ssize_t k = http_body_feed(&c->req.body, c->cin.p, c->cin.len);

        if (k < 0)
            return finish(c, "Bad Request");
        c->cin.fwd = (size_t)k;
        http_buf_consume(&c->cin, (size_t)k);
        c->req_done = c->req.body.done;
        return 1;
    }
    if (!c->req_done) {
        r = http_buf_fill(c->client, &c->cin);
        if (r == 0 || r == -2)
            return finish(c, "client closed mid-request");
        if (r < 0)
            c->want_client = 1;
        return r > 0;
    }
    next_request(c);
    return 1;
}

static void
set_reading(struct io_stream *s, int want, int *reading)
{
    if (s == NULL || want == *reading)
        return;
    if (want)
        io_read_start(s);
    else
        io_read_stop(s);
    *reading = want;
}

static void
apply_reads(struct http_h1_conn *c)
{
    set_reading(c->client, c->want_client, &c->reading_client);
    set_reading(c->up, c->want_up, &c->reading_up);
}

/* Moves everything that can move; -1 once the connection is done. */
static int
step(struct http_h1_conn *c)
{
    int moved = 1, round;

    if (c->state == DONE || c->state == RELEASED)
        return -1;
    c->last = io_mono_now();
    c->in_step = 1;
    for (round = 0; round < ROUNDS && moved; round++) {
        c->want_client = c->want_up = 0;
        switch (c->state) {
        case HEAD:
            moved = head_step(c);
            break;
        case EXCHANGE:
            moved = exchange_step(c);
            break;
        case LOCAL:
            moved = local_step(c);
            break;
        case COLLECT:
            moved = http_h1_collect_req_step(c);
            break;
        default:
            moved = 0;
            break;
        }
        if (moved < 0)
            return -1;
    }
    c->in_step = 0;
    if (c->state != HEAD || c->cin.len == 0) {
        c->head_since = 0;
    } else if (c->head_since == 0 && c->o.idle_timeout > 0) {
        c->head_since = c->last;
        if (ev_timer_remaining(c->loop, &c->idle) > head_deadline(c)) {
            c->idle.repeat = head_deadline(c);
            ev_timer_again(c->loop, &c->idle);
        }
    }
    /* Still busy: let other connections run, and come back next iteration
     * even if no stream would wake this one. */
    if (moved)
        io_soon_arm(c->loop, &c->soon);
    apply_reads(c);
    return 0;
}

static void
wake(void *arg)
{
    step(arg);
}

static void
kick(struct http_h1_conn *c)
{
    if (!c->in_step)
        io_soon_arm(c->loop, &c->soon);
}

static void
on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct http_h1_conn *c = w->data;
    double left = c->last + c->o.idle_timeout - io_mono_now();

    if (c->state == DECIDE)
        left = c->o.idle_timeout;
    if (c->state == HEAD && c->head_since > 0) {
        double head_left = c->head_since + head_deadline(c) - io_mono_now();
        if (head_left <= 0) {
            finish(c, "head timeout");
            return;
        }
        if (head_left < left)
            left = head_left;
    }
    if (left <= 0) {
        finish(c, "idle");
        return;
    }
    w->repeat = left;
    ev_timer_again(loop, w);
}

struct http_h1_conn *
http_h1_conn_new(struct io_stream *client, const struct http_h1_conn_opts *o,
                 const struct http_h1_conn_cbs *cbs, void *arg)
{
    struct http_h1_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->loop = client->loop;
    c->client = client;
    c->o = *o;
    c->cbs = *cbs;
    c->arg = arg;
    c->state = HEAD;
    c->up_count = &c->spare_up;
    c->down_count = &c->spare_down;
    mem_arena_init(&c->arena);
    io_soon_init(&c->soon, wake, c);
    ev_timer_init(&c->idle, on_idle, 0., o->idle_timeout);
    c->idle.data = c;
    c->last = io_mono_now();
    if (o->idle_timeout > 0)
        ev_timer_again(c->loop, &c->idle);
    io_set_callbacks(client, wake, wake, c);
    kick(c);
    return c;
}

int
http_h1_conn_forward(struct http_h1_conn *c, const struct http_h1_upstream *up)
{
    struct mem_slice head;

    if (c->state != DECIDE || c->req.refused || c->req.connect)
        return -1;
    if ((up == NULL && c->up == NULL) || (up != NULL && up->stream == NULL))
        return -1;
    if (up != NULL && up->stream == c->up)
        up = NULL; /* the one it keeps, given again */
    if (up != NULL && up->early_len > HTTP_BUF_MAX)
        return -1;
    if (up != NULL && up->early_len > 0 && http_buf_room(&c->uin, up->early_len) != 0)
        return -1;
    if (http_fwd_request_head(&c->req, &head) != 0)
        return -1;
    if (up != NULL) {
        close_upstream(c);
        if (up->early_len > 0)
            memcpy(c->uin.p, up->early, up->early_len);
        c->uin.len = up->early_len;
        c->up = up->stream;
        io_set_callbacks(c->up, wake, wake, c);
        c->up_count = up->up_count != NULL ? up->up_count : &c->spare_up;
        c->down_count = up->down_count != NULL ? up->down_count : &c->spare_down;
    }
    if (c->creq.active && http_h1_collected_req_out(c, head, &head) != 0)
        return -1;
    c->out = head;
    c->out_off = 0;
    c->state = EXCHANGE;
    kick(c);
    return 0;
}

int
http_h1_conn_respond(struct http_h1_conn *c, int status, const char *reason, const char *extra,
                     int close)
{
    if (c->state != DECIDE)
        return -1;
    local(c, status, reason, extra, close);
    kick(c);
    return 0;
}

int
http_h1_conn_respond_bytes(struct http_h1_conn *c, struct mem_slice bytes, const char *reason,
                           int close)
{
    if (c->state != DECIDE)
        return -1;
    c->out = bytes;
    c->out_off = 0;
    c->local_close = close || !c->have_req || c->req.close || c->req.refused;
    c->local_reason = reason;
    c->state = LOCAL;
    kick(c);
    return 0;
}

struct mem_arena *
http_h1_conn_arena(struct http_h1_conn *c)
{
    return &c->arena;
}

int
http_h1_conn_drop_upstream(struct http_h1_conn *c)
{
    if (c->state != DECIDE)
        return -1;
    close_upstream(c);
    return 0;
}

int
http_h1_conn_has_upstream(const struct http_h1_conn *c)
{
    return c->up != NULL;
}

struct io_stream *
http_h1_conn_release_client(struct http_h1_conn *c, struct mem_slice *rest)
{
    struct io_stream *s = c->client;

    if (c->state != DECIDE)
        return NULL;
    stop(c);
    set_reading(s, 0, &c->reading_client);
    set_reading(c->up, 0, &c->reading_up);
    io_set_callbacks(s, NULL, NULL, NULL);
    c->client = NULL;
    c->state = RELEASED;
    *rest = mem_slice(c->cin.p, c->cin.len);
    return s;
}

void
http_h1_conn_free(struct http_h1_conn *c)
{
    stop(c);
    if (c->client != NULL)
        io_close(c->client, 0);
    close_upstream(c);
    http_h1_collect_reset(c);
    mem_arena_fini(&c->arena);
    free(c->cin.p);
    free(c->uin.p);
    free(c);
}

size_t
http_h1_conn_memory(const struct http_h1_conn *c)
{
    return c->cin.cap + c->uin.cap + c->creq.cap + c->cresp.cap + mem_arena_bytes(&c->arena);
}

int
http_h1_end(struct http_h1_conn *c, const char *reason)
{
    return finish(c, reason);
}

int
http_h1_fail(struct http_h1_conn *c, int status, const char *reason)
{
    return fail(c, status, reason);
}

void
http_h1_kick(struct http_h1_conn *c)
{
    kick(c);
}
