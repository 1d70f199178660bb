#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/log.h"
#include "flow/relay.h"
#include "flow/session.h"
#include "io/io.h"
#include "http/http.h"
#include "inbound/inbound.h"

/* One HTTP proxy client. CONNECT becomes a spliced tunnel. An absolute-form
 * request ("GET http://host/path") is forwarded in origin form over an
 * upstream connection that later requests to the same host:port reuse;
 * request and response bodies are framed (http_body_*) so keep-alive works
 * both ways, and bytes are forwarded as they come, never whole bodies. One
 * upstream connection is one flow. */

enum state {
    HEAD,       /* reading the next request head */
    CONNECTING, /* waiting for the upstream */
    EXCHANGE,   /* forwarding one request and its response */
    TUNNEL,     /* CONNECT: the relay owns both sockets */
};

#define BUF_START 16384
#define BUF_MAX (HTTP_MAX_HEAD + 16384)

struct buf {
    char *p;
    size_t len, cap;
    size_t fwd;  /* bytes at the front that are ready to send on */
    size_t scan; /* bytes known not to hold a complete head */
};

/* A head can only complete on a new line feed: parsing again only then
 * keeps a head sent one byte at a time from costing O(n^2). */
static int
head_may_be_complete(struct buf *b)
{
    int maybe = memchr(b->p + b->scan, '\n', b->len - b->scan) != NULL;
    b->scan = b->len;
    return maybe;
}

struct conn {
    struct inbound_conn base;
    enum state state;
    int fd, up;                  /* client; up >= 0 while there is an upstream */
    struct io_stream *us;        /* the upstream while forwarding */
    ev_io crd, cwr;
    ev_timer timer;              /* idle (and head) deadline */
    double last;
    struct flow flow;
    int flow_added;
    struct flow_open *oc;
    struct flow_relay relay;
    struct buf cin, uin;         /* from the client, from the upstream */
    char *head;                  /* rewritten request head for the upstream */
    size_t head_len, head_off;
    struct http_body req_body, resp_body;
    int req_done, resp_parsed, resp_done, up_eof, resp_sent_any;
    int close_after;             /* the client or the response wants close */
    char method[16];
    int want_crd, want_cwr, want_urd, want_uwr;
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static const struct flow_env *
env_of(struct conn *c)
{
    return inbound_env(c->base._l);
}

static void
end_flow(struct conn *c, const char *reason)
{
    const struct flow_env *e = env_of(c);
    if (c->up >= 0) {
        io_close(c->us, 0);
        c->us = NULL;
        c->up = -1;
    }
    if (c->flow_added) {
        flow_table_remove(e->flows, &c->flow, ev_now(e->loop), reason);
        c->flow_added = 0;
    }
}

static void
conn_free(struct conn *c, const char *reason)
{
    const struct flow_env *e = env_of(c);
    ev_io_stop(e->loop, &c->crd);
    ev_io_stop(e->loop, &c->cwr);
    ev_timer_stop(e->loop, &c->timer);
    if (c->oc != NULL)
        flow_open_cancel(c->oc);
    if (c->state == TUNNEL)
        flow_relay_stop(&c->relay); /* a no-op once the relay has closed */
    else if (c->fd >= 0)
        close(c->fd);
    if (c->state == TUNNEL)
        c->up = -1; /* the relay owned it */
    end_flow(c, reason);
    inbound_conn_unlink(&c->base);
    free(c->cin.p);
    free(c->uin.p);
    free(c->head);
    free(c);
}

/* The flow table's calls: a flow is one upstream connection of |c|. */
static const char *
owner_state(const struct flow *f, void *arg)
{
    static const char *const names[] = {"idle", "connecting", "exchange", "relay"};
    return names[((const struct conn *)arg)->state];
}

static void
owner_close(struct flow *f, void *arg, const char *reason)
{
    conn_free(arg, reason);
}

static const struct flow_owner_ops owner = {.state = owner_state, .close = owner_close};

static void
close_conn(struct inbound_conn *base)
{
    conn_free((struct conn *)base, "shutdown");
}

/* Error replies are short and end the connection. */
static void
fail(struct conn *c, int status, const char *text, const char *extra)
{
    char out[512];
    int n = snprintf(out, sizeof(out),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n%s\r\n%s\n",
                     status, text, strlen(text) + 1, extra ? extra : "", text);
    if (!c->resp_sent_any)
        (void)!send(c->fd, out, (size_t)n, MSG_NOSIGNAL);
    conn_free(c, text);
}

static int
buf_reserve(struct buf *b)
{
    if (b->p == NULL) {
        b->p = malloc(BUF_START);
        b->cap = b->p ? BUF_START : 0;
    } else if (b->len == b->cap && b->cap < BUF_MAX) {
        size_t cap = b->cap * 2 > BUF_MAX ? BUF_MAX : b->cap * 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    return b->p == NULL ? -1 : 0;
}

static void
buf_consume(struct buf *b, size_t n)
{
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->fwd -= n;
    b->scan = 0;
}

/* Reads what is there. Returns >0 bytes, 0 EOF, -1 would block (or full),
 * -2 error. */
static ssize_t
fill(int fd, struct buf *b)
{
    if (buf_reserve(b) != 0 || b->len == b->cap)
        return -1;
    ssize_t n = recv(fd, b->p + b->len, b->cap - b->len, 0);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -1 : -2;
    b->len += (size_t)n;
    return n;
}

/* Sends the forwardable front of |b|. Returns 1 progress, 0 blocked, -1 error. */
static int
drain(int fd, struct buf *b, uint64_t *count)
{
    if (b->fwd == 0)
        return 0;
    ssize_t n = send(fd, b->p, b->fwd, MSG_NOSIGNAL);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    buf_consume(b, (size_t)n);
    *count += (uint64_t)n;
    return 1;
}

/* The same two for the upstream stream. */
static ssize_t
fill_up(struct conn *c, struct buf *b)
{
    if (buf_reserve(b) != 0 || b->len == b->cap)
        return -1;
    ssize_t n = io_read(c->us, b->p + b->len, b->cap - b->len);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -1 : -2;
    b->len += (size_t)n;
    return n;
}

static int
drain_up(struct conn *c, struct buf *b, uint64_t *count)
{
    if (b->fwd == 0)
        return 0;
    ssize_t n = io_write(c->us, b->p, b->fwd);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1; /* on_drain wakes us */
    buf_consume(b, (size_t)n);
    *count += (uint64_t)n;
    return 1;
}

static int
hop_by_hop(struct mem_slice name)
{
    return mem_slice_ieq(name, "connection") || mem_slice_ieq(name, "proxy-connection") ||
           mem_slice_ieq(name, "keep-alive") || mem_slice_ieq(name, "proxy-authorization") ||
           mem_slice_ieq(name, "te") || mem_slice_ieq(name, "upgrade");
}

/* Headers that Connection lists are hop-by-hop too (RFC 9110 §7.6.1). */
static int
named_in_connection(const struct http_request *req, struct mem_slice name)
{
    char tok[64];
    if (name.len >= sizeof(tok))
        return 0;
    memcpy(tok, name.ptr, name.len);
    tok[name.len] = '\0';
    return http_connection_has(req->headers, req->num_headers, tok);
}

/* "METHOD /path HTTP/1.1", the end-to-end headers, Host if missing. */
static int
build_head(struct conn *c, const struct http_request *req, struct mem_slice path,
           struct mem_slice host, uint16_t port)
{
    size_t cap = req->method.len + path.len + 64 + host.len;
    for (size_t i = 0; i < req->num_headers; i++)
        cap += req->headers[i].name.len + req->headers[i].value.len + 4;
    char *h = malloc(cap);
    if (h == NULL)
        return -1;
    size_t n = (size_t)sprintf(h, "%.*s %.*s HTTP/1.1\r\n", (int)req->method.len,
                               req->method.ptr, (int)path.len, path.ptr);
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct http_header *hd = &req->headers[i];
        if (hop_by_hop(hd->name) || named_in_connection(req, hd->name))
            continue;
        n += (size_t)sprintf(h + n, "%.*s: %.*s\r\n", (int)hd->name.len, hd->name.ptr,
                             (int)hd->value.len, hd->value.ptr);
    }
    if (http_header_find(req->headers, req->num_headers, "host") == NULL) {
        int v6 = memchr(host.ptr, ':', host.len) != NULL;
        n += (size_t)sprintf(h + n, v6 ? "Host: [%.*s]" : "Host: %.*s", (int)host.len, host.ptr);
        n += (size_t)(port != 80 ? sprintf(h + n, ":%u\r\n", port) : sprintf(h + n, "\r\n"));
    }
    n += (size_t)sprintf(h + n, "\r\n");
    free(c->head);
    c->head = h;
    c->head_len = n;
    c->head_off = 0;
    return 0;
}

static int
b64val(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* Proxy-Authorization: Basic base64(user:pass), checked against the
 * listener's users. */
static int
authorized(struct conn *c, const struct http_request *req)
{
    if (!inbound_auth_required(c->base._l))
        return 1;
    const struct http_header *h =
        http_header_find(req->headers, req->num_headers, "proxy-authorization");
    if (h == NULL || h->value.len < 6 || strncasecmp(h->value.ptr, "basic ", 6) != 0)
        return 0;
    char dec[600];
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 6; i < h->value.len && n < sizeof(dec); i++) {
        int v = b64val((unsigned char)h->value.ptr[i]);
        if (v < 0)
            break;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            dec[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    char *colon = memchr(dec, ':', n);
    if (colon == NULL)
        return 0;
    return inbound_auth_check(c->base._l, dec, (size_t)(colon - dec), colon + 1,
                              n - (size_t)(colon - dec) - 1);
}

static int step(struct conn *c);

static void
on_relay_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct conn *c = arg;
    c->fd = c->up = -1;
    conn_free(c, reason);
}

static void
on_up_drain(void *arg)
{
    step(arg);
}

static void
on_connected(void *arg, const struct flow_upstream *r)
{
    struct conn *c = arg;
    const struct flow_env *e = env_of(c);
    c->oc = NULL;
    if (r->err != 0) {
        if (r->err == ETIMEDOUT)
            fail(c, 504, "Gateway Timeout", NULL);
        else
            fail(c, 502, "Bad Gateway", NULL);
        return;
    }
    if (c->head == NULL) { /* CONNECT */
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        ev_io_stop(e->loop, &c->crd);
        ev_timer_stop(e->loop, &c->timer);
        c->state = TUNNEL;
        if (inbound_relay_upstream(&c->relay, e, c->fd, r, c->cin.p, c->cin.len, ok,
                                   sizeof(ok) - 1, &c->flow, on_relay_done, c) != 0) {
            c->state = CONNECTING;
            io_close(r->stream, 1);
            fail(c, 502, "Bad Gateway", NULL);
        }
        return;
    }
    c->us = r->stream;
    io_set_callbacks(c->us, on_up_drain, on_up_drain, c);
    c->up = 0;
    if (r->extra_len > 0 && (buf_reserve(&c->uin) != 0 || c->uin.cap - c->uin.len < r->extra_len)) {
        fail(c, 502, "Bad Gateway", NULL);
        return;
    }
    if (r->extra_len > 0) {
        memcpy(c->uin.p + c->uin.len, r->extra, r->extra_len);
        c->uin.len += r->extra_len;
    }
    c->state = EXCHANGE;
    step(c);
}

/* A complete request head of |n| bytes is at the front of cin. */
static int
on_request(struct conn *c, const struct http_request *req, size_t n)
{
    const struct flow_env *e = env_of(c);
    int connect = mem_slice_ieq(req->method, "CONNECT");
    struct mem_slice host, path;
    uint16_t port;
    if (!authorized(c, req)) {
        LOG_INFO("http proxy: authentication failed");
        fail(c, 407, "Proxy Authentication Required",
             "Proxy-Authenticate: Basic realm=\"chute\"\r\n");
        return -1;
    }
    if (http_target_split(req->target, connect, &host, &port, &path) != 0 || port == 0) {
        fail(c, 400, "Bad Request", NULL);
        return -1;
    }
    struct flow_addr dst;
    if (flow_addr_from_host(&dst, host.ptr, host.len, port) != 0) {
        fail(c, 400, "Bad Request", NULL);
        return -1;
    }
    int conn_close = http_connection_has(req->headers, req->num_headers, "close");
    c->close_after = conn_close || (req->minor_version == 0 &&
                                    !http_connection_has(req->headers, req->num_headers,
                                                         "keep-alive"));
    if (!connect) {
        if (http_body_init_request(&c->req_body, req) != 0 ||
            build_head(c, req, path, host, port) != 0) {
            fail(c, 400, "Bad Request", NULL);
            return -1;
        }
        snprintf(c->method, sizeof(c->method), "%.*s", (int)req->method.len, req->method.ptr);
    }
    c->cin.fwd = n;
    buf_consume(&c->cin, n);
    c->req_done = c->resp_parsed = c->resp_done = c->up_eof = 0;
    c->resp_sent_any = 0;
    memset(&c->resp_body, 0, sizeof(c->resp_body));
    c->req_done = connect || c->req_body.done;

    /* Same upstream as the last request: keep using it (and its flow). */
    if (!connect && c->up >= 0 && c->flow.dst.kind == dst.kind && c->flow.dst.port == dst.port &&
        memcmp(c->flow.dst.ip, dst.ip, 16) == 0 && strcmp(c->flow.dst.name, dst.name) == 0) {
        c->state = EXCHANGE;
        return 1;
    }
    end_flow(c, "done");
    struct sockaddr_storage src = c->flow.src, local = c->flow.local;
    memset(&c->flow, 0, sizeof(c->flow));
    c->flow.network = FLOW_TCP;
    c->flow.inbound = FLOW_IN_HTTP;
    c->flow.src = src;
    c->flow.local = local;
    c->flow.dst = dst;
    flow_table_add(e->flows, &c->flow, ev_now(e->loop));
    flow_set_owner(&c->flow, &owner, c);
    c->flow_added = 1;
    if (e->name(e->ud, &c->flow) != 0) { /* a fake IP whose name is gone */
        fail(c, 502, "Bad Gateway", NULL);
        return -1;
    }
    dst = c->flow.dst;
    e->decide(e->ud, &c->flow);
    if (c->flow.policy == FLOW_POLICY_REJECT) {
        fail(c, 403, "Forbidden", NULL);
        return -1;
    }
    if (connect) {
        free(c->head);
        c->head = NULL;
    }
    c->state = CONNECTING;
    c->oc = flow_open(e, &c->flow, 0, on_connected, c);
    if (c->oc == NULL) {
        fail(c, 502, "Bad Gateway", NULL);
        return -1;
    }
    return 0;
}

/* HEAD state: parse what is buffered, read more if needed. */
static int
head_step(struct conn *c)
{
    struct http_request req;
    int n = c->cin.len && head_may_be_complete(&c->cin)
                ? http_h1_parse_request(c->cin.p, c->cin.len, &req)
                : HTTP_ERR_INCOMPLETE;
    if (n > 0)
        return on_request(c, &req, (size_t)n) < 0 ? -1 : 1;
    if (n == HTTP_ERR_TOO_LARGE || (n == HTTP_ERR_INCOMPLETE && c->cin.len >= HTTP_MAX_HEAD)) {
        fail(c, 431, "Request Header Fields Too Large", NULL);
        return -1;
    }
    if (n != HTTP_ERR_INCOMPLETE) {
        fail(c, 400, "Bad Request", NULL);
        return -1;
    }
    ssize_t r = fill(c->fd, &c->cin);
    if (r == 0 || r == -2) {
        conn_free(c, c->cin.len ? "client closed mid-request" : "done");
        return -1;
    }
    if (r < 0) {
        c->want_crd = 1;
        return 0;
    }
    return 1;
}

/* Client -> upstream: the rewritten head, then body bytes as framed. */
static int
req_step(struct conn *c)
{
    if (c->head_off < c->head_len) {
        ssize_t n = io_write(c->us, c->head + c->head_off, c->head_len - c->head_off);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (n < 0)
            return 0; /* the stream's on_drain calls step() */
        c->head_off += (size_t)n;
        c->flow.bytes_up += (uint64_t)n; /* the origin-form head is the origin's payload */
        return 1;
    }
    if (c->cin.fwd > 0) {
        return drain_up(c, &c->cin, &c->flow.bytes_up);
    }
    if (c->req_done)
        return 0;
    if (c->cin.len > 0) {
        ssize_t k = http_body_feed(&c->req_body, c->cin.p, c->cin.len);
        if (k < 0)
            return -1;
        c->cin.fwd = (size_t)k;
        c->req_done = c->req_body.done;
        return k > 0 || c->req_done;
    }
    ssize_t r = fill(c->fd, &c->cin);
    if (r == 0 || r == -2)
        return -1;
    if (r < 0)
        c->want_crd = 1;
    return r > 0;
}

/* Upstream -> client: the response head as is, then body bytes as framed. */
static int
resp_step(struct conn *c)
{
    if (c->uin.fwd > 0) {
        int r = drain(c->fd, &c->uin, &c->flow.bytes_down);
        if (r == 0)
            c->want_cwr = 1;
        if (r > 0)
            c->resp_sent_any = 1;
        return r < 0 ? -2 : r;
    }
    if (c->resp_done)
        return 0;
    if (c->uin.len > 0 && !c->resp_parsed) {
        struct http_response res;
        int n = head_may_be_complete(&c->uin)
                    ? http_h1_parse_response(c->uin.p, c->uin.len, &res)
                    : HTTP_ERR_INCOMPLETE;
        if (n > 0) {
            c->uin.fwd = (size_t)n;
            if (res.status >= 100 && res.status < 200)
                return 1; /* an interim response: the real one follows */
            if (http_body_init_response(&c->resp_body, &res, mem_slice(c->method, strlen(c->method))) != 0)
                return -1;
            c->resp_parsed = 1;
            if (http_connection_has(res.headers, res.num_headers, "close") ||
                c->resp_body.kind == HTTP_BODY_CLOSE || res.minor_version == 0)
                c->close_after = 1;
            c->resp_done = c->resp_body.done;
            return 1;
        }
        if (n != HTTP_ERR_INCOMPLETE || c->uin.len >= HTTP_MAX_HEAD)
            return -1;
    } else if (c->uin.len > c->uin.fwd && c->resp_parsed) {
        ssize_t k = http_body_feed(&c->resp_body, c->uin.p + c->uin.fwd, c->uin.len - c->uin.fwd);
        if (k < 0)
            return -1;
        c->uin.fwd += (size_t)k;
        c->resp_done = c->resp_body.done;
        if (k > 0 || c->resp_done)
            return 1;
    }
    if (c->up_eof)
        return 0;
    ssize_t r = fill_up(c, &c->uin);
    if (r == -2 || r == 0) {
        c->up_eof = 1;
        if (c->resp_parsed && c->resp_body.kind == HTTP_BODY_CLOSE) {
            c->resp_done = 1;
            return 1;
        }
        return -1;
    }
    if (r < 0)
        c->want_urd = 1;
    return r > 0;
}

static void
apply_watchers(struct conn *c)
{
    struct ev_loop *loop = env_of(c)->loop;
    ev_io *ws[2] = {&c->crd, &c->cwr};
    int want[2] = {c->want_crd, c->want_cwr};
    for (int i = 0; i < 2; i++) {
        if (want[i] && !ev_is_active(ws[i]))
            ev_io_start(loop, ws[i]);
        else if (!want[i] && ev_is_active(ws[i]))
            ev_io_stop(loop, ws[i]);
    }
    /* The upstream stream calls on_drain by itself after a blocked write. */
    if (c->up >= 0 && c->want_urd)
        io_read_start(c->us);
    else if (c->up >= 0)
        io_read_stop(c->us);
}

/* Moves everything that can move; returns -1 if |c| was freed. */
static int
step(struct conn *c)
{
    c->last = ev_now(env_of(c)->loop);
    for (int round = 0; round < 64; round++) {
        c->want_crd = c->want_cwr = c->want_urd = c->want_uwr = 0;
        int moved;
        if (c->state == HEAD) {
            moved = head_step(c);
            if (moved < 0)
                return -1;
        } else if (c->state == EXCHANGE) {
            int a = req_step(c);
            if (a < 0) {
                fail(c, 502, "Bad Gateway", NULL);
                return -1;
            }
            int b = resp_step(c);
            if (b < 0) {
                if (b == -2 || c->resp_sent_any)
                    conn_free(c, b == -2 ? "client gone" : "upstream broke the response");
                else
                    fail(c, 502, "Bad Gateway", NULL);
                return -1;
            }
            moved = a | b;
            if (c->resp_done && c->uin.fwd == 0) {
                if (c->close_after || !c->req_done) {
                    conn_free(c, "done");
                    return -1;
                }
                if (c->uin.len > 0 || c->up_eof)
                    end_flow(c, "done"); /* stray bytes after the response */
                c->uin.len = c->uin.fwd = c->uin.scan = 0;
                c->state = HEAD;
                moved = 1;
            }
        } else {
            moved = 0;
        }
        if (!moved) {
            apply_watchers(c);
            return 0;
        }
    }
    /* Busy: let other connections run, then come back even if no socket
     * event would wake this one (say, its peers went quiet with bytes still
     * queued here). conn_free's ev_io_stop clears a fed event. */
    apply_watchers(c);
    ev_feed_event(env_of(c)->loop, &c->crd, EV_READ);
    return 0;
}

static void
on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    step(w->data);
}

static void
on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct conn *c = CONTAINER(w, struct conn, timer);
    double idle = env_of(c)->opts->idle_timeout;
    double left = c->last + idle - ev_now(loop);
    if (c->state == TUNNEL || c->state == CONNECTING)
        left = idle;
    if (left <= 0) {
        conn_free(c, "idle");
        return;
    }
    w->repeat = left;
    ev_timer_again(loop, w);
}

void
inbound_http_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer)
{
    const struct flow_env *e = inbound_env(l);
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->up = -1;
    c->base._close = close_conn;
    c->flow.src = *peer;
    socklen_t llen = sizeof(c->flow.local);
    getsockname(fd, (struct sockaddr *)&c->flow.local, &llen);
    inbound_conn_link(l, &c->base);
    ev_io_init(&c->crd, on_io, fd, EV_READ);
    ev_io_init(&c->cwr, on_io, fd, EV_WRITE);
    c->crd.data = c->cwr.data = c;
    c->last = ev_now(e->loop);
    ev_timer_init(&c->timer, on_timer, 0, e->opts->idle_timeout);
    ev_timer_again(e->loop, &c->timer);
    ev_io_start(e->loop, &c->crd);
}
