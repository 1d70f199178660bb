#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/mitm_int.h"

/* The exchanges of an intercepted flow (the driver's callbacks): each
 * request goes through the hook sets whose C filter wants it, is answered
 * locally or forwarded over the origin connection (a new one, through the
 * flow's policy, when the origin closed the last), and its response goes
 * through the response hooks. */

/* "https://host[:port]path": what URL patterns see. */
struct mem_slice
mitm_request_url(struct mitm_sess *s, struct mem_arena *a, const struct http_fwd_req *req)
{
    size_t cap = 16 + strlen(s->host) + 8 + req->path.len;
    char *p = mem_arena_alloc(a, cap);
    if (p == NULL)
        return mem_slice(NULL, 0);
    int n = s->port == 443 ? snprintf(p, cap, "https://%s", s->host)
                           : snprintf(p, cap, "https://%s:%u", s->host, s->port);
    memcpy(p + n, req->path.ptr, req->path.len);
    return mem_slice(p, (size_t)n + req->path.len);
}

/* A page the user can read in place of the origin's answer. */
static void
answer_failed(struct mitm_sess *s, struct http_h1_conn *h, const char *why)
{
    struct mem_arena *a = http_h1_conn_arena(h);
    char body[640];
    int n = snprintf(body, sizeof(body),
                     "chute could not reach https://%s:%u/ safely:\n  %s\n"
                     "(the request was not sent; see chute's log)\n",
                     s->host, s->port, why);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = (int)sizeof(body) - 1; /* a long name and reason: the page is cut, not overrun */
    struct mem_slice out;
    if (http_fwd_reply_body(a, s->mreq.req, 502,
                            "Content-Type: text/plain; charset=utf-8\r\n",
                            mem_slice(body, (size_t)n), 1, &out) != 0 ||
        http_h1_conn_respond_bytes(h, out, "Bad Gateway", 1) != 0)
        http_h1_conn_respond(h, 502, "Bad Gateway", NULL, 1);
}

static void
forward(struct mitm_sess *s, struct http_h1_conn *h, struct io_stream *up)
{
    struct http_h1_upstream u = {.stream = up, .up_count = &s->f->bytes_up,
                                 .down_count = &s->f->bytes_down};
    if (http_h1_conn_forward(h, up != NULL ? &u : NULL) != 0) {
        if (up != NULL)
            io_close(up, 1);
        answer_failed(s, h, "out of memory");
    }
}

static void
on_reopen_tls(void *arg, struct io_stream *tls, int err, const char *why)
{
    struct mitm_sess *s = arg;
    s->hs = NULL;
    s->state = M_HTTP;
    if (tls == NULL) {
        LOG_WARN("mitm: %s:%u: %s: the request gets 502", s->up_host, s->up_port,
                 why ? why : "tls: handshake failed");
        answer_failed(s, s->h, why ? why : "tls: handshake failed");
        return;
    }
    forward(s, s->h, tls);
}

static void
on_reopen(void *arg, const struct flow_upstream *u)
{
    struct mitm_sess *s = arg;
    s->oc = NULL;
    if (u->err != 0) {
        s->state = M_HTTP;
        answer_failed(s, s->h, u->why ? u->why : "connect failed");
        return;
    }
    if (s->up_plain) { /* a rewrite to http:// */
        s->state = M_HTTP;
        forward(s, s->h, u->stream);
        return;
    }
    s->hs = mitm_sess_upstream_tls(s, u->stream, s->up_host, s->up_port, on_reopen_tls);
    if (s->hs == NULL) {
        s->state = M_HTTP;
        answer_failed(s, s->h, "out of memory");
    }
}

/* A hook's answer, as the client gets it. */
static void
answer(struct mitm_sess *s, struct http_h1_conn *h, const struct mitm_reply *rep)
{
    struct mitm *m = s->m;
    struct mem_slice out;
    if (rep->reject) {
        m->st.rejected++;
        http_h1_conn_respond_bytes(h, mem_slice(NULL, 0), "rejected by a hook", 1);
        return;
    }
    m->st.answered++;
    if (http_fwd_reply_body(http_h1_conn_arena(h), s->mreq.req, rep->status, rep->extra,
                            rep->body, 0, &out) != 0) {
        http_h1_conn_respond(h, 500, "Internal Server Error", NULL, 1);
        return;
    }
    http_h1_conn_respond_bytes(h, out, "answered by a hook", 0);
}

/* The request goes to its origin: over the connection the handshake
 * opened, the one kept from the last request, or a new one. */
static void
send_request(struct mitm_sess *s, struct http_h1_conn *h)
{
    /* Where it goes: the flow's origin, unless a rewrite named another. */
    const struct http_fwd_req *req = s->mreq.req;
    const char *host = s->host;
    char buf[FLOW_NAME_MAX + 1];
    uint16_t port = s->port;
    int plain = s->mreq.scheme != NULL && strcmp(s->mreq.scheme, "http") == 0;
    if (req->host.len > 0 && req->host.len < sizeof(buf) &&
        (req->port != s->req_port || !mem_slice_eq(req->host, s->req_host))) {
        memcpy(buf, req->host.ptr, req->host.len);
        buf[req->host.len] = '\0';
        host = buf;
        port = req->port;
    }
    int same = strcasecmp(host, s->up_host) == 0 && port == s->up_port && plain == s->up_plain;
    if (s->up != NULL && same) {
        struct io_stream *up = s->up;
        s->up = NULL;
        forward(s, h, up);
        return;
    }
    if (http_h1_conn_has_upstream(h) && same) {
        forward(s, h, NULL);
        return;
    }
    if (s->up != NULL) { /* the handshake's connection is for another origin */
        io_close(s->up, 0);
        s->up = NULL;
    }
    if (http_h1_conn_has_upstream(h))
        http_h1_conn_drop_upstream(h);
    snprintf(s->up_host, sizeof(s->up_host), "%s", host);
    s->up_port = port;
    s->up_plain = plain;
    /* An idle one of the pool (the policy is the flow's for a rewrite's
     * origin too), else a new one, as the first, through the flow's
     * policy. */
    struct io_stream *pooled = mitm_h1_take(s->m, s->f, host, port, plain);
    if (pooled != NULL) {
        forward(s, h, pooled);
        return;
    }
    s->alt = *s->f;
    /* The flow's own origin opens as the flow did (its address, or its
     * fake IP's name); only a rewrite's host is looked up by name. */
    if (host != s->host &&
        flow_addr_from_host(&s->alt.dst, host, strlen(host), port) != 0) {
        answer_failed(s, h, "the rewritten URL names no usable host");
        return;
    }
    if (host != s->host)
        LOG_DEBUG("mitm: %s:%u: a rewrite sends %s to %s://%s:%u", s->host, s->port,
                  s->mreq.url.ptr, plain ? "http" : "https", host, port);
    s->state = M_REOPEN;
    s->oc = flow_open(s->m->env, &s->alt, 0, on_reopen, s);
    if (s->oc == NULL) {
        s->state = M_HTTP;
        answer_failed(s, h, "out of memory");
    }
}

/* Every set whose filter wants the request, in order; the first local
 * answer ends it. */
static void
run_request_hooks(struct mitm_sess *s, struct http_h1_conn *h)
{
    struct mitm *m = s->m;
    const char *body = s->mreq.body;
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        struct mitm_reply rep = {0};
        if (k->wants_request != NULL && k->wants_request(k->ud, &s->mreq) &&
            k->on_request(k->ud, &s->mreq, &rep) == 1) {
            answer(s, h, &rep);
            return;
        }
    }
    if (s->mreq.body_set && s->mreq.body != body &&
        http_h1_conn_set_request_body(h, s->mreq.body, s->mreq.body_len) != 0) {
        answer_failed(s, h, "out of memory");
        return;
    }
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        if (k->wants_response != NULL && k->wants_response(k->ud, &s->mreq))
            s->hooked_resp = 1;
    }
    send_request(s, h);
}

static void
on_request_head(void *arg, struct http_h1_conn *h, struct http_fwd_req *req)
{
    struct mitm_sess *s = arg;
    struct mitm *m = s->m;
    struct mem_arena *a = http_h1_conn_arena(h);
    s->requests++;
    m->st.requests++;
    s->hooked_resp = 0;
    s->mreq = (struct mitm_request){.req = req, .arena = a, .scheme = "https",
                                    .host = mem_slice(s->host, strlen(s->host)),
                                    .port = s->port, .flow = s->f};
    if (req->refused) {
        http_h1_conn_respond(h, req->refused, "Bad Request", NULL, 1);
        return;
    }
    if (s->fail != NULL) {
        answer_failed(s, h, s->fail);
        return;
    }
    s->mreq.url = mitm_request_url(s, a, req);
    s->req_host = req->host;
    s->req_port = req->port;
    if (s->requests == 1)
        mitm_host_served(m, s->host);
    size_t max = 0;
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        size_t want = k->request_body != NULL && k->wants_request != NULL &&
                              k->wants_request(k->ud, &s->mreq)
                          ? k->request_body(k->ud, &s->mreq)
                          : 0;
        max = want > max ? want : max;
    }
    if (max > 0 && http_h1_conn_collect_request(h, max) == 0)
        return; /* on_request_body runs the hooks */
    run_request_hooks(s, h);
}

static void
on_request_body(void *arg, struct http_h1_conn *h, struct http_fwd_req *req, const char *body,
                size_t len)
{
    struct mitm_sess *s = arg;
    if (body != NULL) {
        s->mreq.body = body;
        s->mreq.body_len = len;
        s->mreq.body_set = 1;
    } else {
        LOG_INFO("mitm: %.*s: request body over max_body (%zu bytes read): streamed, "
                 "the body hooks skip it",
                 (int)s->mreq.url.len, s->mreq.url.ptr, len);
    }
    run_request_hooks(s, h);
}

static void
run_response_hooks(struct mitm_sess *s, struct http_fwd_resp *resp, const char **body,
                   size_t *len)
{
    struct mitm *m = s->m;
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        if (k->wants_response != NULL && k->wants_response(k->ud, &s->mreq))
            k->on_response(k->ud, &s->mreq, resp, body, len);
    }
}

static void
on_response_head(void *arg, struct http_h1_conn *h, struct http_fwd_resp *resp)
{
    struct mitm_sess *s = arg;
    struct mitm *m = s->m;
    if (!s->hooked_resp)
        return;
    size_t max = 0;
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        size_t want = k->response_body != NULL && k->wants_response != NULL &&
                              k->wants_response(k->ud, &s->mreq)
                          ? k->response_body(k->ud, &s->mreq, resp)
                          : 0;
        max = want > max ? want : max;
    }
    if (max > 0 && http_h1_conn_collect_response(h, max) == 0)
        return; /* on_response_body runs the hooks */
    run_response_hooks(s, resp, NULL, NULL);
}

static void
on_response_body(void *arg, struct http_h1_conn *h, struct http_fwd_resp *resp, const char *body,
                 size_t len)
{
    struct mitm_sess *s = arg;
    if (body == NULL) {
        LOG_INFO("mitm: %.*s: response body over max_body: streamed, the body hooks skip it",
                 (int)s->mreq.url.len, s->mreq.url.ptr);
        run_response_hooks(s, resp, NULL, NULL);
        return;
    }
    const char *b = body;
    size_t n = len;
    run_response_hooks(s, resp, &b, &n);
    if (b != body || n != len)
        http_h1_conn_set_response_body(h, b, n);
}

static void
on_done(void *arg, struct http_h1_conn *h, const char *reason)
{
    struct mitm_sess *s = arg;
    struct mitm *m = s->m;
    s->h = NULL;
    http_h1_conn_free(h);
    if (s->requests == 0 && s->fail == NULL && strcmp(reason, "idle") != 0) {
        /* A handshake and no request: how pinned apps say no, but also a
         * browser's unused preconnect; only a run of them counts. */
        LOG_DEBUG("mitm: %s: the client closed after the handshake without a request",
                  s->host);
        if (mitm_host_silent(m, s->host)) {
            m->st.client_refused++;
            LOG_WARN("mitm: %d clients in a row closed right after the handshake for %s "
                     "without a request: a pinned app, or one that does not trust chute's CA%s",
                     MITM_SILENT_REFUSALS, s->host,
                     m->o.auto_bypass ? "" : " (auto_bypass = true passes it through)");
            if (m->o.auto_bypass)
                mitm_bypass_add(m, s->host);
        }
    }
    mitm_sess_end(s, reason);
}

/* The response is whole: the origin connection waits in the pool for
 * this client's next request or another's. */
static void
on_upstream_idle(void *arg, struct http_h1_conn *h, struct io_stream *up)
{
    struct mitm_sess *s = arg;
    mitm_h1_park(s->m, s->f, s->up_host, s->up_port, s->up_plain, up);
}

static void
on_tunnel_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct mitm_sess *s = arg;
    s->state = M_HANDSHAKE; /* the relay closed both streams */
    mitm_sess_end(s, reason);
}

/* A WebSocket (or any upgrade) got its 101: the decrypted streams are
 * relayed as they are, both ways, until either side ends. */
static void
on_upgrade(void *arg, struct http_h1_conn *h, struct io_stream *client, struct io_stream *up,
           struct mem_slice to_up, struct mem_slice to_client)
{
    struct mitm_sess *s = arg;
    const struct flow_env *e = s->m->env;
    struct flow_relay_args a = {
        .client = client,
        .upstream = up,
        .pre_up = to_up.ptr,
        .pre_up_len = to_up.len,
        .pre_down = to_client.ptr,
        .pre_down_len = to_client.len,
        .up_count = &s->f->bytes_up,
        .down_count = &s->f->bytes_down,
        .idle = e->opts->idle_timeout,
        .cb = on_tunnel_done,
        .arg = s,
    };
    int rc = flow_relay_start(&s->pass, e->loop, &a);
    s->h = NULL;
    http_h1_conn_free(h);
    if (rc != 0) {
        io_close(client, 1);
        io_close(up, 1);
        mitm_sess_end(s, "out of memory");
        return;
    }
    LOG_DEBUG("mitm: %s:%u: upgraded (101): tunnel", s->host, s->port);
    s->state = M_PASS;
}

const struct http_h1_conn_cbs mitm_exchange_cbs = {
    .on_request_head = on_request_head,
    .on_response_head = on_response_head,
    .on_request_body = on_request_body,
    .on_response_body = on_response_body,
    .on_upgrade = on_upgrade,
    .on_upstream_idle = on_upstream_idle,
    .on_done = on_done,
};
