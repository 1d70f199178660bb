#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/addr.h"
#include "fetch/fetch.h"
#include "http/http.h"
#include "io/io.h"
#include "outbound/outbound.h"
#include "tls/tls.h"

/* One GET: outbound_open through the policy, TLS over it for https, the
 * request, then the response head (chute's h1 parser) and its body
 * (framing by http_body_feed) into a buffer that never grows past the
 * limit. A redirect (301, 302, 303, 307, 308) to an http(s) URL is
 * followed, three at most. */

#define HEAD_MAX 16384
#define MAX_REDIRECTS 3

struct fetch_get {
    /* The engine's, which outlives every GET: outbound_open still reads it
     * after its callback returns, when a failure has freed |g|. */
    const struct outbound_env *env;
    struct fetch_url u;
    struct fetch_get_opts o;
    char etag_in[256], lm_in[64];
    fetch_get_cb cb;
    void *arg;
    ev_timer limit, later;
    struct outbound_open *open;
    struct tls_handshake *hs;
    struct io_stream *s;
    char req[3072];
    size_t req_len, sent;
    char head[HEAD_MAX];
    size_t head_len;
    int have_head, redirects;
    struct http_response res;
    struct http_body body;
    struct fetch_resp out;
    char *buf;
    size_t len, cap, raw_max;
    const char *why;
    char whybuf[320];
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void
release(struct fetch_get *g)
{
    struct ev_loop *loop = g->env->loop;
    ev_timer_stop(loop, &g->limit);
    ev_timer_stop(loop, &g->later);
    if (g->open != NULL)
        outbound_open_cancel(g->open);
    if (g->hs != NULL)
        tls_handshake_cancel(g->hs);
    if (g->s != NULL)
        io_close(g->s, 0);
    g->open = NULL;
    g->hs = NULL;
    g->s = NULL;
}

static void
finish(struct fetch_get *g, const char *why)
{
    release(g);
    if (why != NULL) {
        free(g->buf);
        g->buf = NULL;
        g->out.status = 0;
        g->out.why = why;
    }
    g->out.body = g->buf;
    g->out.len = g->len;
    g->buf = NULL;
    fetch_get_cb cb = g->cb;
    void *arg = g->arg;
    struct fetch_resp r = g->out;
    char why_copy[sizeof(g->whybuf)];
    if (r.why != NULL) { /* it may point into g */
        snprintf(why_copy, sizeof(why_copy), "%s", r.why);
        r.why = why_copy;
    }
    free(g);
    cb(arg, &r);
}

static void __attribute__((format(printf, 2, 3)))
failf(struct fetch_get *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->whybuf, sizeof(g->whybuf), fmt, ap);
    va_end(ap);
    finish(g, g->whybuf);
}

static void
on_later(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct fetch_get *g = CONTAINER(w, struct fetch_get, later);
    finish(g, g->why);
}

/* Fails from the loop's next turn (the start call must return first). */
static void
fail_later(struct fetch_get *g, const char *why)
{
    g->why = why;
    ev_timer_set(&g->later, 0, 0);
    ev_timer_start(g->env->loop, &g->later);
}

static void
on_limit(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct fetch_get *g = CONTAINER(w, struct fetch_get, limit);
    failf(g, "timeout after %.0f s%s", g->o.timeout,
          g->open ? " (connecting)" : g->hs ? " (TLS handshake)" : "");
}

static void begin(struct fetch_get *g);

static void
copy_header(const struct http_response *r, const char *name, char *out, size_t cap)
{
    const struct http_header *h = http_header_find(r->headers, r->num_headers, name);
    out[0] = '\0';
    if (h != NULL && h->value.len < cap) {
        memcpy(out, h->value.ptr, h->value.len);
        out[h->value.len] = '\0';
    }
}

/* A redirect: 1 when the GET starts again at its Location. */
static int
redirect(struct fetch_get *g)
{
    int st = g->res.status;
    if (st != 301 && st != 302 && st != 303 && st != 307 && st != 308)
        return 0;
    char loc[2048], err[160];
    copy_header(&g->res, "location", loc, sizeof(loc));
    struct fetch_url nu;
    if (loc[0] == '\0' || fetch_url_parse(loc, &nu, err, sizeof(err)) != 0) {
        failf(g, "HTTP %d: a redirect chute cannot follow (Location: %.100s)", st,
              loc[0] ? loc : "none; only absolute http(s) URLs are followed");
        return 1;
    }
    if (++g->redirects > MAX_REDIRECTS) {
        failf(g, "more than %d redirects", MAX_REDIRECTS);
        return 1;
    }
    release(g);
    g->u = nu;
    g->head_len = 0;
    g->have_head = 0;
    g->len = 0;
    begin(g);
    return 1;
}

/* The head is complete: 1 when the GET is over (finished or restarted). */
static int
on_head(struct fetch_get *g)
{
    if (redirect(g))
        return 1;
    copy_header(&g->res, "etag", g->out.etag, sizeof(g->out.etag));
    copy_header(&g->res, "last-modified", g->out.last_modified, sizeof(g->out.last_modified));
    if (g->res.status == 304) {
        g->out.status = 304;
        finish(g, NULL);
        return 1;
    }
    if (g->res.status != 200) {
        failf(g, "HTTP %d %.*s", g->res.status, (int)(g->res.reason.len > 60 ? 60
                                                                               : g->res.reason.len),
              g->res.reason.ptr);
        return 1;
    }
    const struct http_header *ce =
        http_header_find(g->res.headers, g->res.num_headers, "content-encoding");
    if (ce != NULL && !mem_slice_ieq(ce->value, "identity")) {
        failf(g, "Content-Encoding %.*s is not supported (chute asks for none)",
              (int)(ce->value.len > 20 ? 20 : ce->value.len), ce->value.ptr);
        return 1;
    }
    if (http_body_init_response(&g->body, &g->res, mem_slice("GET", 3)) != 0) {
        failf(g, "a malformed response (Content-Length / Transfer-Encoding)");
        return 1;
    }
    if (g->body.kind == HTTP_BODY_LENGTH && g->body.remaining > g->o.max_bytes) {
        failf(g, "%llu bytes, over the limit of %zu (max_size): refused",
              (unsigned long long)g->body.remaining, g->o.max_bytes);
        return 1;
    }
    g->out.status = 200;
    /* chunked framing costs bytes of its own: some room for it */
    g->raw_max = g->o.max_bytes + g->o.max_bytes / 8 + 65536;
    return 0;
}

static int
body_done(struct fetch_get *g)
{
    if (g->body.kind == HTTP_BODY_CHUNKED) {
        ssize_t n = http_body_dechunk(g->buf ? g->buf : "", g->len, g->buf ? g->buf : (char *)"");
        if (n < 0) {
            failf(g, "a malformed chunked body");
            return 1;
        }
        g->len = (size_t)n;
    }
    if (g->len > g->o.max_bytes) {
        failf(g, "over the limit of %zu bytes (max_size): refused", g->o.max_bytes);
        return 1;
    }
    if (g->buf == NULL && (g->buf = malloc(1)) == NULL) {
        failf(g, "out of memory");
        return 1;
    }
    g->buf[g->len] = '\0';
    finish(g, NULL);
    return 1;
}

/* Body bytes: 1 when the GET is over. */
static int
on_body(struct fetch_get *g, const char *p, size_t n)
{
    while (n > 0 && !g->body.done) {
        ssize_t take = http_body_feed(&g->body, p, n);
        if (take < 0) {
            failf(g, "a malformed chunked body");
            return 1;
        }
        if (g->len + (size_t)take > g->raw_max) {
            failf(g, "over the limit of %zu bytes (max_size): refused", g->o.max_bytes);
            return 1;
        }
        if (g->len + (size_t)take + 1 > g->cap) {
            size_t cap = g->cap ? g->cap : 65536;
            while (cap < g->len + (size_t)take + 1)
                cap *= 2;
            char *nb = realloc(g->buf, cap);
            if (nb == NULL) {
                failf(g, "out of memory");
                return 1;
            }
            g->buf = nb;
            g->cap = cap;
        }
        memcpy(g->buf + g->len, p, (size_t)take);
        g->len += (size_t)take;
        p += take;
        n -= (size_t)take;
        if (take == 0)
            break;
    }
    return g->body.done ? body_done(g) : 0;
}

/* Response bytes: 1 when the GET is over. */
static int
feed(struct fetch_get *g, const char *p, size_t n)
{
    if (g->have_head)
        return on_body(g, p, n);
    size_t room = HEAD_MAX - g->head_len, take = n < room ? n : room;
    memcpy(g->head + g->head_len, p, take);
    g->head_len += take;
    int h = http_h1_parse_response(g->head, g->head_len, &g->res);
    if (h == HTTP_ERR_INCOMPLETE && g->head_len < HEAD_MAX)
        return 0;
    if (h < 0) {
        failf(g, h == HTTP_ERR_INCOMPLETE ? "a response head over 16 KiB"
                                          : "not an HTTP/1.x response");
        return 1;
    }
    g->have_head = 1;
    if (on_head(g))
        return 1;
    /* What followed the head in this read: the body's first bytes. */
    size_t extra = g->head_len - (size_t)h;
    if (g->body.kind == HTTP_BODY_NONE)
        return body_done(g);
    if (extra > 0 && on_body(g, g->head + h, extra))
        return 1;
    return take < n ? on_body(g, p + take, n - take) : 0;
}

static void
read_more(struct fetch_get *g)
{
    char buf[16384];
    for (;;) {
        ssize_t n = io_read(g->s, buf, sizeof(buf));
        if (n > 0) {
            if (feed(g, buf, (size_t)n))
                return;
            continue;
        }
        if (n == 0) {
            if (g->have_head && g->body.kind == HTTP_BODY_CLOSE) {
                body_done(g);
                return;
            }
            failf(g, "the server closed the connection %s",
                  g->have_head ? "before the body's end" : "before answering");
            return;
        }
        if (errno != EAGAIN)
            failf(g, "%s", strerror(errno));
        return;
    }
}

/* 1 when the GET ended (on an error). */
static int
send_more(struct fetch_get *g)
{
    while (g->sent < g->req_len) {
        ssize_t w = io_write(g->s, g->req + g->sent, g->req_len - g->sent);
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w < 0) {
            failf(g, "sending the request: %s", strerror(errno));
            return 1;
        }
        g->sent += (size_t)w;
    }
    return 0;
}

static void
on_readable(void *arg)
{
    read_more(arg);
}

static void
on_drain(void *arg)
{
    struct fetch_get *g = arg;
    if (!send_more(g))
        read_more(g);
}

static void
ready(struct fetch_get *g, struct io_stream *s, const uint8_t *extra, size_t extra_len)
{
    g->s = s;
    io_set_callbacks(s, on_readable, on_drain, g);
    io_read_start(s);
    if (extra_len > 0 && feed(g, (const char *)extra, extra_len))
        return;
    g->sent = 0;
    send_more(g);
}

static void
on_tls(void *arg, struct io_stream *s, int err, const char *why)
{
    struct fetch_get *g = arg;
    g->hs = NULL;
    if (s == NULL) {
        failf(g, "https://%s: %s", g->u.authority, why ? why : strerror(err));
        return;
    }
    ready(g, s, NULL, 0);
}

static void
on_open(void *arg, const struct outbound_result *r)
{
    struct fetch_get *g = arg;
    g->open = NULL;
    if (r->err != 0) {
        failf(g, "connecting to %s via %s: %s", g->u.authority, r->via ? r->via : "?",
              r->why ? r->why : strerror(r->err));
        return;
    }
    if (!g->u.https) {
        ready(g, r->stream, r->extra, r->extra_len);
        return;
    }
    if (r->extra_len > 0) {
        io_close(r->stream, 1);
        failf(g, "the proxy sent bytes before the TLS handshake");
        return;
    }
    struct tls_client_opts to = {.host = g->u.host, .port = g->u.port};
    static const char *const alpn[] = {"http/1.1"};
    to.alpn = alpn;
    to.nalpn = 1;
    g->hs = tls_client_start(g->env->tls, r->stream, &to, on_tls, g);
    if (g->hs == NULL)
        failf(g, "out of memory");
}

static void
begin(struct fetch_get *g)
{
    struct flow_addr dst;
    if (g->u.https && g->env->tls == NULL) {
        fail_later(g, "https: no trust store loaded");
        return;
    }
    if (flow_addr_from_host(&dst, g->u.host, strlen(g->u.host), g->u.port) != 0) {
        fail_later(g, "bad host");
        return;
    }
    int k = snprintf(g->req, sizeof(g->req),
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: chute/%s\r\nAccept: */*\r\n"
                     "Connection: close\r\n%s%s%s%s%s%s\r\n",
                     g->u.path, g->u.authority, CHUTE_VERSION,
                     g->etag_in[0] ? "If-None-Match: " : "", g->etag_in,
                     g->etag_in[0] ? "\r\n" : "", g->lm_in[0] ? "If-Modified-Since: " : "",
                     g->lm_in, g->lm_in[0] ? "\r\n" : "");
    if (k < 0 || (size_t)k >= sizeof(g->req)) {
        fail_later(g, "the request is too long (a URL over 2 KiB?)");
        return;
    }
    g->req_len = (size_t)k;
    ev_timer_set(&g->limit, g->o.timeout, 0);
    ev_timer_start(g->env->loop, &g->limit);
    g->open = outbound_open(g->env, g->o.policy, &dst, g->o.timeout, on_open, g);
    if (g->open == NULL)
        fail_later(g, "out of memory");
}

struct fetch_get *
fetch_get_start(const struct outbound_env *env, const struct fetch_url *u,
                const struct fetch_get_opts *o, fetch_get_cb cb, void *arg)
{
    struct fetch_get *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    g->env = env;
    g->u = *u;
    g->o = *o;
    if (g->o.timeout <= 0)
        g->o.timeout = FETCH_TIMEOUT;
    snprintf(g->etag_in, sizeof(g->etag_in), "%s", o->etag ? o->etag : "");
    snprintf(g->lm_in, sizeof(g->lm_in), "%s", o->last_modified ? o->last_modified : "");
    /* header injection: validators come from the server, but are checked */
    if (strpbrk(g->etag_in, "\r\n") || strpbrk(g->lm_in, "\r\n"))
        g->etag_in[0] = g->lm_in[0] = '\0';
    g->cb = cb;
    g->arg = arg;
    ev_init(&g->limit, on_limit);
    ev_init(&g->later, on_later);
    begin(g);
    return g;
}

void
fetch_get_cancel(struct fetch_get *g)
{
    if (g == NULL)
        return;
    release(g);
    free(g->buf);
    free(g);
}
