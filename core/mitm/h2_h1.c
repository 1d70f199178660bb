#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"
#include "tls/tls.h"

/* An h2 client's stream to an origin that speaks only HTTP/1.1: the
 * stream becomes one HTTP/1.1 exchange on a connection of the h1 pool
 * (h1_pool.c), or a new one through the flow's policy, given back to the
 * pool when the response ended cleanly. The request goes out as the
 * hooks left it (chunked when the h2 body has no length); the response
 * head becomes the stream's (h2_server.c sends it), its body is decoded
 * out of its framing into the exchange's buffer, read from the origin only
 * while that holds less than a stream window (the client's pace). */

#define H2H1_IN (HTTP_MAX_HEAD + 16384)

static const char *const alpn_h1[] = {"http/1.1"};

struct h2h1 {
    struct mitm *m;
    struct h2x *x;
    struct flow f; /* the key of the pool, and what a new connection opens through */
    char host[FLOW_NAME_MAX + 1];
    uint16_t port;
    int plain; /* http:// (a rewrite's): no TLS */
    struct flow_open *oc;
    struct tls_handshake *hs;
    struct io_stream *up;
    /* request: the head, then the body (as chunks when |chunked|) */
    struct mem_slice head;
    size_t head_off;
    int chunked, req_out;
    char frame[24]; /* a chunk's size line, its CRLF, or the last chunk */
    size_t frame_len, frame_off, chunk_left;
    int last_frame;
    /* response */
    char *in;
    size_t in_len;
    int head_seen, reading;
    struct http_body body;
    struct io_soon soon; /* the client read: parse what is held, read on */
};

static void
h_free(struct h2h1 *h, int reset)
{
    io_soon_cancel(h->m->env->loop, &h->soon);
    if (h->oc != NULL)
        flow_open_cancel(h->oc);
    if (h->hs != NULL)
        tls_handshake_cancel(h->hs);
    if (h->up != NULL)
        io_close(h->up, reset);
    free(h->in);
    free(h);
}

/* The exchange is over on this side: |err| as mitm_h2_server_upstream_closed
 * takes it. */
static void
h_end(struct h2h1 *h, int err, const char *why)
{
    struct h2x *x = h->x;
    x->h1 = NULL;
    h_free(h, err != 0);
    mitm_h2_server_upstream_closed(x, err, why);
}

static void
h_fail(struct h2h1 *h, const char *why)
{
    LOG_INFO("mitm: %.*s: HTTP/1.1 origin: %s", (int)h->x->mreq.url.len, h->x->mreq.url.ptr,
             why);
    h_end(h, h->head_seen ? NGHTTP2_INTERNAL_ERROR : -1, why);
}

static void
consumed(struct h2x *x, size_t n)
{
    size_t due = h2_consume_due(n, &x->req_early, x->req_early_all);
    if (due > 0)
        mitm_h2_server_consumed(x, due);
}

/* Writes what it can of |p|; -1 on an error (failed), else what went. */
static ssize_t
put(struct h2h1 *h, const void *p, size_t n)
{
    ssize_t w = io_write(h->up, p, n);
    if (w < 0 && errno == EAGAIN)
        return 0; /* on_drain comes back */
    if (w <= 0) {
        h_fail(h, "writing the request failed");
        return -1;
    }
    return w;
}

static void
frame_set(struct h2h1 *h, const char *s, size_t n)
{
    memcpy(h->frame, s, n);
    h->frame_len = n;
    h->frame_off = 0;
}

/* The request out, as far as the origin takes it and the client sent it.
 * 0, or -1 when |h| ended. */
static int
pump(struct h2h1 *h)
{
    struct h2x *x = h->x;
    struct h2_buf *b = &x->reqb;
    while (!h->req_out) {
        ssize_t n;
        size_t held = b->len - b->off;
        if (h->head_off < h->head.len) {
            if ((n = put(h, h->head.ptr + h->head_off, h->head.len - h->head_off)) <= 0)
                return (int)n;
            h->head_off += (size_t)n;
        } else if (h->frame_off < h->frame_len) {
            if ((n = put(h, h->frame + h->frame_off, h->frame_len - h->frame_off)) <= 0)
                return (int)n;
            h->frame_off += (size_t)n;
            if (h->frame_off == h->frame_len && h->last_frame)
                h->req_out = 1;
        } else if (held > 0 && (!h->chunked || h->chunk_left > 0)) {
            size_t want = h->chunked && h->chunk_left < held ? h->chunk_left : held;
            if ((n = put(h, b->p + b->off, want)) <= 0)
                return (int)n;
            b->off += (size_t)n;
            if (b->off == b->len)
                b->off = b->len = 0;
            consumed(x, (size_t)n);
            if (h->chunked && (h->chunk_left -= (size_t)n) == 0)
                frame_set(h, "\r\n", 2);
        } else if (held > 0) { /* chunked: the next chunk's size line */
            h->chunk_left = held < 65536 ? held : 65536;
            h->frame_len = (size_t)snprintf(h->frame, sizeof(h->frame), "%zx\r\n", h->chunk_left);
            h->frame_off = 0;
        } else if (x->req_eof && h->chunked) {
            frame_set(h, "0\r\n\r\n", 5);
            h->last_frame = 1;
        } else if (x->req_eof) {
            h->req_out = 1;
        } else {
            x->req_deferred = 1; /* mitm_h2h1_data comes back */
            return 0;
        }
    }
    return 0;
}

/* The final head is the first |n| bytes of |h->in|. 0, or -1 (ended). */
static int
on_head(struct h2h1 *h, const struct http_response *res, size_t n)
{
    struct h2x *x = h->x;
    if (http_fwd_response_init(&x->resp, &x->arena, &x->req, h->in, n, res, 1) != 0) {
        h_fail(h, "a response head chute cannot forward");
        return -1;
    }
    h->head_seen = 1;
    h->body = x->resp.body;
    x->resp_h1 = 1;
    x->got_final = 1;
    x->resp_eof = h->body.done;
    mitm_h2_server_response(x);
    return x->h1 == h ? 0 : -1; /* the response side may have cancelled |h| */
}

/* Parses what |h->in| holds: heads (1xx dropped), then body data into the
 * exchange's buffer. 1 to read on, 0 to wait for the client, -1 ended. */
static int
parse(struct h2h1 *h)
{
    struct h2x *x = h->x;
    size_t used = 0;
    int rc = 1;
    while (used < h->in_len) {
        if (!h->head_seen) {
            struct http_response res;
            int n = http_h1_parse_response(h->in + used, h->in_len - used, &res);
            if (n == HTTP_ERR_INCOMPLETE)
                break;
            if (n <= 0) {
                h_fail(h, "a malformed response head");
                return -1;
            }
            if (res.status >= 100 && res.status < 200) {
                /* Interim (100 Continue and the like): dropped, and what
                 * follows moves up, so the final head is parsed where
                 * on_head reads it (|res| points into the buffer). */
                memmove(h->in, h->in + n, h->in_len - (size_t)n);
                h->in_len -= (size_t)n;
                continue;
            }
            if (on_head(h, &res, (size_t)n) != 0)
                return -1;
            used = (size_t)n;
            continue;
        }
        size_t limit = x->resp_collect ? H2_BUF_CAP(x->resp_max) - 16384
                                       : h2_mem_h1_limit(x->respb.mem);
        if (x->respb.len - x->respb.off >= limit) {
            rc = 0; /* the client reads first */
            break;
        }
        size_t off, dlen;
        ssize_t k = http_body_next_data(&h->body, h->in + used, h->in_len - used, &off, &dlen);
        if (k < 0) {
            h_fail(h, "bad body framing");
            return -1;
        }
        if (dlen > 0 &&
            h2_buf_put(&x->respb, (const uint8_t *)h->in + used + off, dlen, SIZE_MAX) != 0) {
            h_fail(h, "out of memory");
            return -1;
        }
        used += (size_t)k;
        if (h->body.done || k == 0)
            break;
    }
    if (used > 0) {
        memmove(h->in, h->in + used, h->in_len - used);
        h->in_len -= used;
    }
    if (h->head_seen && (x->respb.len > x->respb.off || h->body.done)) {
        if (h->body.done)
            x->resp_eof = 1;
        mitm_h2_server_data(x);
        if (x->h1 != h)
            return -1;
    }
    return rc;
}

/* The response ended: the connection goes back to the pool when nothing
 * is left on it, else it closes. */
static void
finish(struct h2h1 *h)
{
    struct h2x *x = h->x;
    if (h->req_out && h->in_len == 0 && !x->resp.close && h->body.kind != HTTP_BODY_CLOSE) {
        io_read_stop(h->up);
        io_set_callbacks(h->up, NULL, NULL, NULL);
        mitm_h1_park(h->m, &h->f, h->host, h->port, h->plain, h->up);
        h->up = NULL;
    }
    h_end(h, 0, NULL);
}

static void
on_readable(void *arg)
{
    struct h2h1 *h = arg;
    for (;;) {
        int rc = parse(h);
        if (rc < 0)
            return;
        if (h->head_seen && h->body.done) {
            finish(h);
            return;
        }
        if (rc == 0) {
            io_read_stop(h->up);
            h->reading = 0;
            return;
        }
        if (h->in_len == H2H1_IN) {
            h_fail(h, "a response head over 64 KiB");
            return;
        }
        ssize_t n = io_read(h->up, h->in + h->in_len, H2H1_IN - h->in_len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            if (h->head_seen && h->body.kind == HTTP_BODY_CLOSE) {
                struct h2x *x = h->x;
                h->body.done = 1;
                x->resp_eof = 1;
                mitm_h2_server_data(x);
                if (x->h1 != h)
                    return;
                h->in_len = 1; /* not reusable */
                finish(h);
                return;
            }
            h_fail(h, n == 0 ? "the origin closed the connection" : "reading failed");
            return;
        }
        h->in_len += (size_t)n;
    }
}

static void
on_drain(void *arg)
{
    pump(arg);
}

static void
start(struct h2h1 *h, struct io_stream *up)
{
    h->up = up;
    io_set_callbacks(up, on_readable, on_drain, h);
    io_read_start(up);
    h->reading = 1;
    pump(h);
}

static void
on_tls(void *arg, struct io_stream *tls, int err, const char *why)
{
    struct h2h1 *h = arg;
    h->hs = NULL;
    if (tls == NULL) {
        h_fail(h, why != NULL ? why : "tls: handshake failed");
        return;
    }
    start(h, tls);
}

static void
on_open(void *arg, const struct flow_upstream *r)
{
    struct h2h1 *h = arg;
    h->oc = NULL;
    if (r->err != 0) {
        h_fail(h, r->why != NULL ? r->why : "connect failed");
        return;
    }
    if (h->plain) {
        start(h, r->stream);
        return;
    }
    h->hs = mitm_upstream_tls(h->m, r->stream, h->host, h->port, alpn_h1, 1, on_tls, h);
    if (h->hs == NULL)
        h_fail(h, "out of memory");
}

/* The head as the origin gets it: chunked framing added when the body's
 * length is unknown (an h2 request needs no Content-Length). */
static int
request_head(struct h2h1 *h)
{
    struct h2x *x = h->x;
    struct mem_slice head;
    /* "te: trailers" is the h2 client's; an HTTP/1.1 origin would take it
     * as hop-by-hop without Connection: TE, and its trailers are dropped
     * here anyway. */
    if (http_fwd_field_get(&x->req.fields, "te") != NULL &&
        http_fwd_field_del(&x->req.fields, MEM_SLICE_LIT("te")) < 0)
        return -1;
    if (http_fwd_request_head(&x->req, &head) != 0)
        return -1;
    int body = !x->req_eof || x->reqb.len > x->reqb.off;
    h->chunked = body && http_fwd_field_get(&x->req.fields, "content-length") == NULL;
    if (!h->chunked) {
        h->head = head;
        return 0;
    }
    static const char te[] = "Transfer-Encoding: chunked\r\n\r\n";
    char *p = mem_arena_alloc(&x->arena, head.len + sizeof(te));
    if (p == NULL || head.len < 2)
        return -1;
    memcpy(p, head.ptr, head.len - 2); /* without the empty line */
    memcpy(p + head.len - 2, te, sizeof(te) - 1);
    h->head = mem_slice(p, head.len - 2 + sizeof(te) - 1);
    return 0;
}

int
mitm_h2h1_submit(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                 int plain, struct h2x *x)
{
    struct h2h1 *h = calloc(1, sizeof(*h));
    if (h == NULL || (h->in = malloc(H2H1_IN)) == NULL) {
        free(h);
        return -1;
    }
    h->m = m;
    h->x = x;
    io_soon_init(&h->soon, on_readable, h);
    snprintf(h->host, sizeof(h->host), "%s", host);
    h->port = port;
    h->plain = plain;
    if (mitm_flow_to(&h->f, f, host, port) != 0 || request_head(h) != 0) {
        h_free(h, 1);
        return -1;
    }
    x->h1 = h;
    struct io_stream *up = mitm_h1_take(m, f, host, port, plain);
    if (up != NULL) {
        start(h, up);
        return 0;
    }
    h->oc = flow_open(m->env, &h->f, 0, on_open, h);
    if (h->oc == NULL) {
        x->h1 = NULL;
        h_free(h, 1);
        return -1;
    }
    return 0;
}

void
mitm_h2h1_consumed(struct h2x *x)
{
    struct h2h1 *h = x->h1;
    if (h->up != NULL && !h->reading && h->head_seen) {
        h->reading = 1;
        io_read_start(h->up);
        io_soon_arm(h->m->env->loop, &h->soon); /* what is held first, from the loop */
    }
}

void
mitm_h2h1_data(struct h2x *x)
{
    struct h2h1 *h = x->h1;
    x->req_deferred = 0;
    if (h->up != NULL)
        pump(h);
}

void
mitm_h2h1_cancel(struct h2x *x)
{
    struct h2h1 *h = x->h1;
    x->h1 = NULL;
    h_free(h, 1);
}
