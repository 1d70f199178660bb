/* Bodies read whole before they move on, for hooks that asked to see them
 * (h1_conn.h: http_h1_conn_collect_*). A body is kept as framed, at most
 * |max| bytes plus one read; past that it passes through as it came (what
 * was read first, then the rest streamed), so memory stays bounded by the
 * hook's max_body whatever the peer sends. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1_conn_int.h"
#include "http/http.h"

void
http_h1_collect_reset(struct http_h1_conn *c)
{
    free(c->creq.raw);
    free(c->cresp.raw);
    memset(&c->creq, 0, sizeof(c->creq));
    memset(&c->cresp, 0, sizeof(c->cresp));
}

/* Appends the first |n| bytes of |b| (all body) to |k|: -1 out of memory. */
static int
take(struct http_collect *k, struct http_buf *b, size_t n)
{
    if (k->len + n > k->cap) {
        size_t cap = k->cap ? k->cap : 16384;
        while (cap < k->len + n)
            cap *= 2;
        char *p = realloc(k->raw, cap);
        if (p == NULL)
            return -1;
        k->raw = p;
        k->cap = cap;
    }
    memcpy(k->raw + k->len, b->p, n);
    k->len += n;
    b->fwd = n;
    http_buf_consume(b, n);
    if (k->len > k->max)
        k->over = 1;
    return 0;
}

/* The decoded body in the arena, for the owner. */
static int
decode(struct http_h1_conn *c, struct http_collect *k, const struct http_body *framing)
{
    char *p = mem_arena_alloc(&c->arena, k->len + 1);
    if (p == NULL)
        return -1;
    ssize_t n = (ssize_t)k->len;
    if (k->len > 0)
        memcpy(p, k->raw, k->len);
    if (framing->kind == HTTP_BODY_CHUNKED && (n = http_body_dechunk(p, k->len, p)) < 0)
        return -1;
    p[n] = '\0';
    k->body = mem_slice(p, (size_t)n);
    return 0;
}

int
http_h1_collect_req_step(struct http_h1_conn *c)
{
    struct http_collect *k = &c->creq;
    if (!c->req_done && !k->over && c->cin.len > 0) {
        ssize_t n = http_body_feed(&c->req.body, c->cin.p, c->cin.len);
        if (n < 0)
            return http_h1_end(c, "Bad Request");
        if (take(k, &c->cin, (size_t)n) != 0)
            return http_h1_fail(c, 500, "Internal Server Error");
        c->req_done = c->req.body.done;
        return 1;
    }
    if (c->req_done || k->over) {
        c->state = DECIDE;
        if (!k->over && decode(c, k, &c->req.body) != 0)
            return http_h1_end(c, "Bad Request");
        c->cbs.on_request_body(c->arg, c, &c->req, k->over ? NULL : k->body.ptr,
                               k->over ? k->len : k->body.len);
        return 1;
    }
    ssize_t r = http_buf_fill(c->client, &c->cin);
    if (r == 0 || r == -2)
        return http_h1_end(c, "client closed mid-request");
    if (r < 0)
        c->want_client = 1;
    return r > 0;
}

int
http_h1_collected_req_out(struct http_h1_conn *c, struct mem_slice head, struct mem_slice *out)
{
    struct http_collect *k = &c->creq;
    /* Unchanged (or over its max): as framed, under the head's own framing. */
    struct mem_slice body = k->replaced ? k->body : mem_slice(k->raw, k->len);
    char *p = mem_arena_alloc(&c->arena, head.len + body.len);
    if (p == NULL)
        return -1;
    memcpy(p, head.ptr, head.len);
    if (body.len > 0)
        memcpy(p + head.len, body.ptr, body.len);
    *out = mem_slice(p, head.len + body.len);
    return 0;
}

/* The response: read into the collector until whole (or over), then the
 * owner sees it, then head and body go to the client as one. */
int
http_h1_collect_resp_step(struct http_h1_conn *c)
{
    struct http_collect *k = &c->cresp;
    if (!c->resp_done && !k->over && c->uin.len > 0) {
        ssize_t n = http_body_feed(&c->resp.body, c->uin.p, c->uin.len);
        if (n < 0)
            return -1;
        if (take(k, &c->uin, (size_t)n) != 0)
            return -1;
        c->resp_done = c->resp.body.done;
        if (!c->resp_done && !k->over)
            return 1;
    }
    if (!c->resp_done && !k->over) {
        ssize_t r = c->up_eof ? 0 : http_buf_fill(c->up, &c->uin);
        if (r == 0 || r == -2) {
            c->up_eof = 1;
            if (c->resp.body.kind != HTTP_BODY_CLOSE)
                return -1;
            c->resp_done = 1;
        } else {
            if (r < 0)
                c->want_up = 1;
            return r > 0;
        }
    }
    k->active = 0;
    if (!k->over && decode(c, k, &c->resp.body) != 0)
        return -1;
    c->cbs.on_response_body(c->arg, c, &c->resp, k->over ? NULL : k->body.ptr,
                            k->over ? k->len : k->body.len);
    struct mem_slice head, body = mem_slice(k->raw, k->len);
    if (k->replaced) {
        body = k->body;
        if (http_fwd_fields_reframe(&c->resp.fields, body.len) != 0)
            return -1;
    }
    if (http_fwd_response_head(&c->resp, &head) != 0)
        return -1;
    char *p = mem_arena_alloc(&c->arena, head.len + body.len);
    if (p == NULL)
        return -1;
    memcpy(p, head.ptr, head.len);
    if (body.len > 0)
        memcpy(p + head.len, body.ptr, body.len);
    c->down = mem_slice(p, head.len + body.len);
    c->down_off = 0;
    return 1;
}

int
http_h1_conn_collect_request(struct http_h1_conn *c, size_t max)
{
    if (c->state != DECIDE || c->req.refused || c->req.connect || c->creq.active)
        return -1;
    c->creq.active = 1;
    c->creq.max = max;
    c->state = COLLECT;
    http_h1_kick(c);
    return 0;
}

int
http_h1_conn_set_request_body(struct http_h1_conn *c, const char *body, size_t len)
{
    struct http_collect *k = &c->creq;
    if (c->state != DECIDE || !k->active || k->over)
        return -1;
    char *p = mem_arena_memdup(&c->arena, body, len ? len : 1);
    if (p == NULL || http_fwd_fields_reframe(&c->req.fields, len) != 0)
        return -1;
    k->body = mem_slice(p, len);
    k->replaced = 1;
    return 0;
}

int
http_h1_conn_collect_response(struct http_h1_conn *c, size_t max)
{
    if (c->state != EXCHANGE || c->cresp.active)
        return -1;
    c->cresp.active = 1;
    c->cresp.max = max;
    return 0;
}

int
http_h1_conn_set_response_body(struct http_h1_conn *c, const char *body, size_t len)
{
    struct http_collect *k = &c->cresp;
    if (k->over)
        return -1;
    char *p = mem_arena_memdup(&c->arena, body, len ? len : 1);
    if (p == NULL)
        return -1;
    k->body = mem_slice(p, len);
    k->replaced = 1;
    return 0;
}
