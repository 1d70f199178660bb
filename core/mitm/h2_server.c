#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"

/* The client's side of HTTP/2 through the MITM: one nghttp2 server session
 * per client TLS connection that chose h2. Each stream's request goes
 * through the same hook sets as an HTTP/1.1 one (h2_msg.c makes it look
 * like one), is answered locally or sent as a stream of a shared upstream
 * connection (h2_upstream.c), and its response comes back through the
 * response hooks. Body bytes move between the two sessions through the
 * exchange's buffers, windows reopening only as the other side reads. */

struct h2_srv {
    struct h2_io io;
    struct mitm_sess *s;
    struct h2x *xs; /* live exchanges with a client stream */
    ev_timer idle;  /* no stream and no frame for the flow's idle timeout: GOAWAY */
    double idle_s, last;
};

/* Exchanges are linked on their client session through next_wait's
 * sibling fields kept in a tiny side list; a session has few enough
 * streams (H2_MAX_STREAMS) that a walk is cheap. */
struct xlink {
    struct h2x x;
    struct xlink *prev, *next;
};

static struct xlink *
xl(struct h2x *x)
{
    return (struct xlink *)x;
}

static void
x_free(struct h2x *x)
{
    h2_buf_free(&x->reqb);
    h2_buf_free(&x->respb);
    h2_mem_streams(x->reqb.mem, -1);
    mem_arena_fini(&x->arena);
    free(xl(x));
}

static void
x_unlink(struct h2_srv *srv, struct h2x *x)
{
    struct xlink *l = xl(x);
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        srv->xs = l->next != NULL ? &l->next->x : NULL;
    if (l->next != NULL)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

/* The client stream is over: the exchange lives on only while the
 * upstream stream does. */
static void
x_client_gone(struct h2_srv *srv, struct h2x *x, int cancel)
{
    x_unlink(srv, x);
    x->srv = NULL;
    if ((x->up != NULL || x->h1 != NULL) && cancel)
        mitm_h2_up_cancel(x, NGHTTP2_CANCEL);
    if (x->up == NULL && x->h1 == NULL)
        x_free(x);
}

static ssize_t
read_response(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
              nghttp2_data_source *src, void *ud)
{
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, id);
    if (x == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (x->local) {
        size_t n = x->local_len < len ? x->local_len : len;
        memcpy(buf, x->local_body, n);
        x->local_body += n;
        x->local_len -= n;
        if (x->local_len == 0)
            *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    size_t n = h2_buf_take(&x->respb, buf, len);
    size_t due = h2_consume_due(n, &x->resp_early, x->resp_early_all);
    if (due > 0)
        mitm_h2_up_consumed(x, due);
    if (x->respb.len == x->respb.off && x->resp_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (x->trailf.n > 0 &&
            nghttp2_submit_trailer(ng, id, x->trailf.v, x->trailf.n) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        return (ssize_t)n;
    }
    if (n == 0) {
        x->resp_deferred = 1;
        x->srv->s->m->st.h2_stalls++;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

static void
submit(struct h2_srv *srv, struct h2x *x, nghttp2_nv *nv, size_t n, int body)
{
    nghttp2_data_provider prd = {.source.ptr = x, .read_callback = read_response};
    x->resp_started = 1;
    if (nghttp2_submit_response(srv->io.ng, x->cid, nv, n, body ? &prd : NULL) != 0)
        nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NGHTTP2_INTERNAL_ERROR);
    h2_io_kick(&srv->io);
}

/* A local answer: a hook's, or chute's own error page. */
static void
reply(struct h2_srv *srv, struct h2x *x, int status, const char *extra, const char *body,
      size_t len)
{
    nghttp2_nv *nv;
    size_t n;
    x->local = 1;
    x->local_body = body;
    x->local_len = x->head ? 0 : len;
    if (h2_msg_reply_nv(&x->arena, status, extra, len, &nv, &n) != 0) {
        nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NGHTTP2_INTERNAL_ERROR);
        h2_io_kick(&srv->io);
        return;
    }
    submit(srv, x, nv, n, x->local_len > 0);
}

/* chute's own page in place of the origin's answer. */
static void
reply_failed(struct h2_srv *srv, struct h2x *x, const char *why)
{
    int status = 502;
    char *body = mem_arena_alloc(&x->arena, 400);
    int n = body != NULL ? snprintf(body, 400,
                                    "chute could not reach https://%s:%u/ safely:\n  %s\n"
                                    "(the request was not sent; see chute's log)\n",
                                    srv->s->host, srv->s->port, why)
                         : 0;
    reply(srv, x, status, "content-type: text/plain; charset=utf-8\r\n", body,
          n > 0 ? (size_t)(n < 400 ? n : 399) : 0);
}

static void run_request_hooks(struct h2_srv *srv, struct h2x *x);

static void
request_ready(struct h2_srv *srv, struct h2x *x, int has_body)
{
    struct mitm_sess *s = srv->s;
    struct mitm *m = s->m;
    struct mem_slice host = mem_slice(s->host, strlen(s->host));
    m->st.requests++;
    s->requests++;
    if (h2_msg_request(&x->req, &x->arena, &x->reqf, host, s->port, has_body) != 0) {
        nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    x->head = mem_slice_ieq(x->req.method, "HEAD");
    if (x->req.refused) {
        reply(srv, x, x->req.refused, NULL, NULL, 0);
        return;
    }
    if (s->fail != NULL) {
        reply_failed(srv, x, s->fail);
        return;
    }
    if (s->requests == 1)
        mitm_host_served(m, s->host);
    x->mreq = (struct mitm_request){.req = &x->req, .arena = &x->arena, .scheme = "https",
                                    .host = host, .port = s->port, .flow = s->f};
    x->mreq.url = mitm_request_url(s, &x->arena, &x->req);
    x->req_host = x->req.host;
    x->req_port = x->req.port;
    size_t max = 0;
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        size_t want = k->request_body != NULL && k->wants_request != NULL &&
                              k->wants_request(k->ud, &x->mreq)
                          ? k->request_body(k->ud, &x->mreq)
                          : 0;
        max = want > max ? want : max;
    }
    if (max > 0 && has_body) { /* h2_body.c keeps it; the hooks run at its end */
        x->req_collect = 1;
        x->req_max = max;
        return;
    }
    if (max > 0) { /* the headers ended the stream: the body is empty */
        x->mreq.body = "";
        x->mreq.body_set = 1;
    }
    run_request_hooks(srv, x);
}

/* Every set whose filter wants the request, in order (the first local
 * answer ends it); then the request goes upstream. */
static void
run_request_hooks(struct h2_srv *srv, struct h2x *x)
{
    struct mitm_sess *s = srv->s;
    struct mitm *m = s->m;
    const char *body = x->mreq.body;
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        if (k->wants_request == NULL || !k->wants_request(k->ud, &x->mreq))
            continue;
        struct mitm_reply rep = {0};
        if (k->on_request(k->ud, &x->mreq, &rep) == 1) {
            if (rep.reject) {
                m->st.rejected++;
                /* CANCEL, not REFUSED_STREAM: a client retries that one */
                nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NGHTTP2_CANCEL);
                h2_io_kick(&srv->io);
                return;
            }
            m->st.answered++;
            reply(srv, x, rep.status, rep.extra, rep.body.ptr, rep.body.len);
            return;
        }
    }
    if (x->mreq.body_set && x->mreq.body != body &&
        h2_body_request_replace(x, x->mreq.body, x->mreq.body_len) != 0) {
        reply_failed(srv, x, "out of memory");
        return;
    }
    for (size_t i = 0; i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        if (k->wants_response != NULL && k->wants_response(k->ud, &x->mreq))
            x->hooked_resp = 1;
    }
    /* Where it goes: the flow's origin, unless a rewrite named another. */
    char buf[FLOW_NAME_MAX + 1];
    const char *to = s->host;
    uint16_t port = s->port;
    if (x->req.host.len > 0 && x->req.host.len < sizeof(buf) &&
        (x->req.port != x->req_port || !mem_slice_eq(x->req.host, x->req_host))) {
        memcpy(buf, x->req.host.ptr, x->req.host.len);
        buf[x->req.host.len] = '\0';
        to = buf;
        port = x->req.port;
    }
    /* The flow's origin as its handshake found it (one speaking only
     * HTTP/1.1 is translated: h2_h1.c); another as mitm_h2_route finds it. */
    int plain = x->mreq.scheme != NULL && strcmp(x->mreq.scheme, "http") == 0;
    int rc = to != s->host || plain ? mitm_h2_route(m, s->f, to, port, plain, x)
             : s->up_h2             ? mitm_h2_up_submit(m, s->f, to, port, x)
                                    : mitm_h2h1_submit(m, s->f, to, port, 0, x);
    if (rc != 0)
        reply_failed(srv, x, "out of memory");
}

/* ---- from the upstream side ---------------------------------------------- */

static void respond(struct h2_srv *srv, struct h2x *x, const char *body, size_t len);

void
mitm_h2_server_response(struct h2x *x)
{
    struct h2_srv *srv = x->srv;
    struct mitm *m = srv->s->m;
    nghttp2_nv *nv;
    size_t n;
    int rc = x->resp_h1 ? 0 : h2_msg_response(&x->resp, &x->arena, &x->req, &x->respf);
    if (rc != 0) {
        LOG_INFO("mitm: %.*s: the origin's h2 response is malformed: 502",
                 (int)x->mreq.url.len, x->mreq.url.ptr);
        mitm_h2_up_cancel(x, NGHTTP2_PROTOCOL_ERROR);
        reply_failed(srv, x, "malformed response");
        return;
    }
    if (x->resp.interim) {
        x->respf.n = 0;
        if (x->resp.status == 101)
            return;
        if (h2_msg_response_nv(&x->resp, &x->arena, &nv, &n) == 0)
            nghttp2_submit_headers(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NULL, nv, n, NULL);
        h2_io_kick(&srv->io);
        return;
    }
    size_t max = 0;
    for (size_t i = 0; x->hooked_resp && !x->head && i < m->o.nhooks; i++) {
        const struct mitm_hooks *k = m->o.hooks[i];
        size_t want = k->response_body != NULL && k->wants_response != NULL &&
                              k->wants_response(k->ud, &x->mreq)
                          ? k->response_body(k->ud, &x->mreq, &x->resp)
                          : 0;
        max = want > max ? want : max;
    }
    if (max > 0) { /* h2_body.c keeps the body; mitm_h2_server_data goes on */
        x->resp_collect = 1;
        x->resp_max = max;
        mitm_h2_server_data(x);
        return;
    }
    respond(srv, x, NULL, 0);
}

/* The response hooks (with the body when they asked for it and it fit),
 * then the head goes to the client and the body follows. */
static void
respond(struct h2_srv *srv, struct h2x *x, const char *body, size_t len)
{
    struct mitm *m = srv->s->m;
    nghttp2_nv *nv;
    size_t n;
    const char *b = body;
    size_t blen = len;
    if (x->hooked_resp)
        for (size_t i = 0; i < m->o.nhooks; i++) {
            const struct mitm_hooks *k = m->o.hooks[i];
            if (k->wants_response != NULL && k->wants_response(k->ud, &x->mreq))
                k->on_response(k->ud, &x->mreq, &x->resp, body != NULL ? &b : NULL,
                               body != NULL ? &blen : NULL);
        }
    if (body != NULL && (b != body || blen != len) && h2_body_response_replace(x, b, blen) != 0) {
        mitm_h2_up_cancel(x, NGHTTP2_INTERNAL_ERROR);
        nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NGHTTP2_INTERNAL_ERROR);
        h2_io_kick(&srv->io);
        return;
    }
    if (h2_msg_response_nv(&x->resp, &x->arena, &nv, &n) != 0) {
        mitm_h2_up_cancel(x, NGHTTP2_INTERNAL_ERROR);
        nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid, NGHTTP2_INTERNAL_ERROR);
        h2_io_kick(&srv->io);
        return;
    }
    int more = !x->head && !(x->resp_eof && x->respb.len == x->respb.off && x->trailf.n == 0);
    submit(srv, x, nv, n, more);
}

void
mitm_h2_server_data(struct h2x *x)
{
    struct h2_srv *srv = x->srv;
    if (x->resp_collect) {
        const char *body;
        size_t len;
        if (h2_body_response_step(x, &body, &len))
            respond(srv, x, body, len);
        return;
    }
    if (x->resp_deferred && x->resp_started) {
        x->resp_deferred = 0;
        nghttp2_session_resume_data(srv->io.ng, x->cid);
        h2_io_kick(&srv->io);
    }
}

void
mitm_h2_server_upstream_closed(struct h2x *x, int err, const char *why)
{
    struct h2_srv *srv = x->srv;
    if (srv == NULL) {
        x_free(x);
        return;
    }
    if (!x->resp_started) {
        if (why == NULL)
            why = err > 0 ? nghttp2_http2_strerror((uint32_t)err) : "the origin closed";
        LOG_INFO("mitm: %.*s: no h2 response from the origin (%s): 502", (int)x->mreq.url.len,
                 x->mreq.url.ptr, why);
        reply_failed(srv, x, why);
        return;
    }
    if (err != 0 || !x->resp_eof) {
        nghttp2_submit_rst_stream(srv->io.ng, NGHTTP2_FLAG_NONE, x->cid,
                                  err > 0 ? (uint32_t)err : NGHTTP2_INTERNAL_ERROR);
        h2_io_kick(&srv->io);
        return;
    }
    mitm_h2_server_data(x);
}

void
mitm_h2_server_consumed(struct h2x *x, size_t n)
{
    if (x->srv == NULL)
        return;
    nghttp2_session_consume(x->srv->io.ng, x->cid, n);
    h2_io_kick(&x->srv->io);
}

/* ---- nghttp2's callbacks ------------------------------------------------- */

static int
on_begin_headers(nghttp2_session *ng, const nghttp2_frame *fr, void *ud)
{
    struct h2_srv *srv = ud;
    if (fr->hd.type != NGHTTP2_HEADERS || fr->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct xlink *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    struct h2x *x = &l->x;
    mem_arena_init(&x->arena);
    h2_x_mem_init(x, &srv->s->m->h2mem);
    h2_mem_streams(x->reqb.mem, 1);
    x->srv = srv;
    x->cid = fr->hd.stream_id;
    l->next = srv->xs != NULL ? xl(srv->xs) : NULL;
    if (l->next != NULL)
        l->next->prev = l;
    srv->xs = x;
    srv->s->m->st.h2_streams++;
    nghttp2_session_set_stream_user_data(ng, x->cid, x);
    return 0;
}

static int
on_header(nghttp2_session *ng, const nghttp2_frame *fr, const uint8_t *name, size_t nlen,
          const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, fr->hd.stream_id);
    if (x == NULL)
        return 0;
    if (fr->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* request trailers: not forwarded (the body ends there) */
    if (h2_fields_add(&x->reqf, &x->arena, name, nlen, value, vlen) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* this stream gets a reset */
    return 0;
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *fr, void *ud)
{
    struct h2_srv *srv = ud;
    srv->last = io_mono_now();
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, fr->hd.stream_id);
    if (x == NULL)
        return 0;
    int end = (fr->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (fr->hd.type == NGHTTP2_HEADERS && fr->headers.cat == NGHTTP2_HCAT_REQUEST) {
        x->req_eof = end;
        request_ready(srv, x, !end);
        return 0;
    }
    if ((fr->hd.type == NGHTTP2_DATA || fr->hd.type == NGHTTP2_HEADERS) && end) {
        x->req_eof = 1;
        if (x->req_collect) {
            if (h2_body_request_step(x, 1))
                run_request_hooks(srv, x);
            return 0;
        }
        if (x->up != NULL || x->h1 != NULL)
            mitm_h2_up_data(x);
    }
    return 0;
}

static int
on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
        void *ud)
{
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, id);
    if (x == NULL || x->local) {
        nghttp2_session_consume(ng, id, len); /* nobody wants it */
        return 0;
    }
    if (h2_buf_put(&x->reqb, data, len, H2_BUF_CAP(x->req_collect ? x->req_max : 0)) != 0) {
        nghttp2_session_consume(ng, id, len);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_FLOW_CONTROL_ERROR);
        return 0;
    }
    if (x->req_collect) { /* kept for the hooks: bounded by their max */
        nghttp2_session_consume(ng, id, len);
        x->req_early += len;
        if (h2_body_request_step(x, 0))
            run_request_hooks(ud, x);
        return 0;
    }
    if (x->up != NULL || x->h1 != NULL)
        mitm_h2_up_data(x);
    return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    struct h2_srv *srv = ud;
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, id);
    if (x == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (code != NGHTTP2_NO_ERROR) {
        srv->s->m->st.h2_client_rst++;
        LOG_DEBUG("mitm: %s: h2 stream %d closed by %s", srv->s->host, id,
                  nghttp2_http2_strerror(code));
    }
    size_t left = h2_consume_due(x->reqb.len - x->reqb.off, &x->req_early, x->req_early_all);
    if (left > 0)
        nghttp2_session_consume(ng, id, left);
    x_client_gone(srv, x, 1);
    return 0;
}

static void
on_dead(struct h2_io *io, const char *why)
{
    struct h2_srv *srv = (struct h2_srv *)io;
    struct mitm_sess *s = srv->s;
    s->h2 = NULL;
    mitm_h2_server_free(srv);
    mitm_sess_end(s, why);
}

static void
on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct h2_srv *srv = w->data;
    if (srv->xs != NULL || io_mono_now() - srv->last < srv->idle_s)
        return;
    nghttp2_session_terminate_session(srv->io.ng, NGHTTP2_NO_ERROR);
    h2_io_fail(&srv->io, "idle");
}

void
mitm_h2_server_free(struct h2_srv *srv)
{
    if (srv->io.loop != NULL)
        ev_timer_stop(srv->io.loop, &srv->idle);
    while (srv->xs != NULL)
        x_client_gone(srv, srv->xs, 1);
    h2_io_fini(&srv->io, 0);
    free(srv);
}

int
mitm_h2_server_start(struct mitm_sess *s, struct io_stream *tls)
{
    static nghttp2_session_callbacks *cbs;
    if (cbs == NULL) {
        if (nghttp2_session_callbacks_new(&cbs) != 0)
            return -1;
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    }
    struct h2_srv *srv = calloc(1, sizeof(*srv));
    nghttp2_option *opt = h2_io_options(1);
    if (srv == NULL || opt == NULL ||
        nghttp2_session_server_new3(&srv->io.ng, cbs, srv, opt, h2_alloc()) != 0) {
        free(srv);
        if (opt != NULL)
            nghttp2_option_del(opt);
        return -1;
    }
    nghttp2_option_del(opt);
    srv->s = s;
    nghttp2_settings_entry set[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_MAX_HEADER_LIST},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    if (nghttp2_submit_settings(srv->io.ng, NGHTTP2_FLAG_NONE, set, 4) != 0 ||
        nghttp2_session_set_local_window_size(srv->io.ng, NGHTTP2_FLAG_NONE, 0,
                                              H2_CONN_WINDOW) != 0) {
        nghttp2_session_del(srv->io.ng);
        free(srv);
        return -1;
    }
    s->m->st.h2_clients++;
    s->h2 = srv;
    h2_io_init(&srv->io, s->m->env->loop, tls, on_dead);
    h2_io_track(&srv->io, &s->m->h2mem);
    srv->idle_s = s->m->o.idle_timeout > 0 ? s->m->o.idle_timeout : s->m->env->opts->idle_timeout;
    srv->last = io_mono_now();
    if (srv->idle_s > 0) {
        ev_timer_init(&srv->idle, on_idle, srv->idle_s / 4, srv->idle_s / 4);
        srv->idle.data = srv;
        ev_timer_start(srv->io.loop, &srv->idle);
    }
    h2_io_flush(&srv->io);
    return 0;
}
