#include <string.h>

#include "log/log.h"
#include "mitm/h2_int.h"

/* Bodies the hooks asked for, on HTTP/2 (HTTP/1.1's are h1_collect.c's):
 * a stream's DATA is kept whole, up to the largest max_body of the hooks
 * that want it, before they run. While it is kept, its bytes are consumed
 * on the sending session as they come, so the peer's window does not close
 * on a body larger than it; the hooks' max bounds the memory instead. A
 * body over the max is not given to the hooks: it streams on as it came,
 * its kept bytes first. */

size_t
h2_consume_due(size_t n, size_t *early, int all)
{
    if (all)
        return 0;
    size_t k = n < *early ? n : *early;
    *early -= k;
    return n - k;
}

/* The kept bytes as one NUL-terminated string in the exchange's arena. */
static const char *
body_copy(struct h2x *x, const struct h2_buf *b, size_t *len)
{
    size_t n = b->len - b->off;
    char *p = mem_arena_alloc(&x->arena, n + 1);
    if (p == NULL)
        return NULL;
    if (n > 0)
        memcpy(p, b->p + b->off, n);
    p[n] = '\0';
    *len = n;
    return p;
}

/* The body of |b| becomes |body|: the new bytes replace the kept ones. */
static int
body_set(struct h2_buf *b, const char *body, size_t len)
{
    h2_buf_free(b);
    return h2_buf_put(b, (const uint8_t *)body, len, len);
}

int
h2_body_request_step(struct h2x *x, int eof)
{
    size_t held = x->reqb.len - x->reqb.off;
    if (held > x->req_max) {
        LOG_INFO("mitm: %.*s: request body over max_body (%zu bytes read): streamed, "
                 "the body hooks skip it",
                 (int)x->mreq.url.len, x->mreq.url.ptr, held);
        x->req_collect = 0;
        return 1;
    }
    if (!eof)
        return 0;
    x->req_collect = 0;
    x->req_early_all = 1; /* the client sent all of it, and all was consumed */
    const char *body = body_copy(x, &x->reqb, &x->mreq.body_len);
    if (body == NULL)
        return 1; /* out of memory: the hooks run without it */
    x->mreq.body = body;
    x->mreq.body_set = 1;
    return 1;
}

int
h2_body_request_replace(struct h2x *x, const char *body, size_t len)
{
    if (body_set(&x->reqb, body, len) != 0 || http_fwd_fields_reframe(&x->req.fields, len) != 0)
        return -1;
    return 0;
}

int
h2_body_response_step(struct h2x *x, const char **body, size_t *len)
{
    size_t held = x->respb.len - x->respb.off;
    *body = NULL;
    *len = 0;
    if (held > x->resp_max) {
        LOG_INFO("mitm: %.*s: response body over max_body: streamed, the body hooks skip it",
                 (int)x->mreq.url.len, x->mreq.url.ptr);
        x->resp_collect = 0;
        return 1;
    }
    if (!x->resp_eof)
        return 0;
    x->resp_collect = 0;
    x->resp_early_all = 1;
    *body = body_copy(x, &x->respb, len);
    return 1;
}

int
h2_body_response_replace(struct h2x *x, const char *body, size_t len)
{
    if (body_set(&x->respb, body, len) != 0 ||
        http_fwd_fields_reframe(&x->resp.fields, len) != 0)
        return -1;
    return 0;
}
