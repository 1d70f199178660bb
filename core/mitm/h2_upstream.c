#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"
#include "tls/tls.h"

/* The origins' side of HTTP/2 through the MITM: nghttp2 client sessions
 * shared by every client connection, one pool per engine, keyed by
 * (origin host, port, policy, SNI = host). A new stream goes on an open
 * connection of its key while that has a free slot under the origin's
 * SETTINGS_MAX_CONCURRENT_STREAMS and has not said GOAWAY; else a new
 * connection opens through the flow's policy, and streams wait on it.
 * A GOAWAY drains a connection (its streams finish; a stream it refused
 * is sent again on another); an unused one closes after H2_UP_IDLE. */

enum up_state { UP_OPENING, UP_READY, UP_DRAINING };

struct h2_up {
    struct h2_io io;
    struct h2_pool *pool;
    struct h2_up *prev, *next;
    enum up_state state;
    char host[FLOW_NAME_MAX + 1];
    uint16_t port;
    int policy;
    const char *policy_name;
    struct flow f;              /* what new connections of the key open through */
    struct flow_open *oc;
    struct tls_handshake *hs;
    struct h2x *xs;             /* its exchanges, waiting ones (uid 0) included */
    unsigned nstreams, nwait;
    uint64_t served;
    ev_timer idle;
};

struct h2_pool {
    struct mitm *m;
    struct h2_up *ups;
};

static const char *const alpn_h2[] = {"h2", "http/1.1"};

struct h2_pool *
mitm_h2_pool_new(struct mitm *m)
{
    struct h2_pool *p = calloc(1, sizeof(*p));
    if (p != NULL)
        p->m = m;
    return p;
}

static struct h2_pool *
pool_of(struct mitm *m)
{
    if (m->h2pool == NULL)
        m->h2pool = mitm_h2_pool_new(m);
    return m->h2pool;
}

static int
key_is(const struct h2_up *u, const struct flow *f, const char *host, uint16_t port)
{
    return u->port == port && u->policy == f->policy && u->policy_name == f->policy_name &&
           strcasecmp(u->host, host) == 0;
}

static void
x_link(struct h2_up *u, struct h2x *x)
{
    x->up = u;
    x->u_prev = NULL;
    x->u_next = u->xs;
    if (u->xs != NULL)
        u->xs->u_prev = x;
    u->xs = x;
}

static void
x_unlink(struct h2_up *u, struct h2x *x)
{
    if (x->u_prev != NULL)
        x->u_prev->u_next = x->u_next;
    else
        u->xs = x->u_next;
    if (x->u_next != NULL)
        x->u_next->u_prev = x->u_prev;
    x->u_prev = x->u_next = NULL;
    x->up = NULL;
}

static void
up_free(struct h2_up *u, const char *why)
{
    struct h2_pool *p = u->pool;
    ev_timer_stop(p->m->env->loop, &u->idle);
    if (u->oc != NULL)
        flow_open_cancel(u->oc);
    if (u->hs != NULL)
        tls_handshake_cancel(u->hs);
    while (u->xs != NULL) {
        struct h2x *x = u->xs;
        x_unlink(u, x);
        mitm_h2_server_upstream_closed(x, -1, why);
    }
    if (u->prev != NULL)
        u->prev->next = u->next;
    else
        p->ups = u->next;
    if (u->next != NULL)
        u->next->prev = u->prev;
    h2_io_fini(&u->io, 0);
    free(u);
}

void
mitm_h2_pool_free(struct h2_pool *p)
{
    if (p == NULL)
        return;
    while (p->ups != NULL)
        up_free(p->ups, "shutting down");
    free(p);
}

static void
on_dead(struct h2_io *io, const char *why)
{
    struct h2_up *u = (struct h2_up *)io;
    LOG_DEBUG("mitm: h2 upstream %s:%u closed: %s", u->host, u->port, why);
    up_free(u, why);
}

static void
on_idle_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct h2_up *u = w->data;
    if (u->nstreams == 0 && u->nwait == 0) {
        nghttp2_session_terminate_session(u->io.ng, NGHTTP2_NO_ERROR);
        h2_io_fail(&u->io, "idle");
    }
}

static void
maybe_idle(struct h2_up *u)
{
    if (u->nstreams > 0 || u->nwait > 0)
        return;
    if (u->state == UP_DRAINING) {
        h2_io_fail(&u->io, "drained after GOAWAY");
        return;
    }
    ev_timer_stop(u->pool->m->env->loop, &u->idle);
    ev_timer_set(&u->idle, H2_UP_IDLE, 0);
    ev_timer_start(u->pool->m->env->loop, &u->idle);
}

/* ---- streams ------------------------------------------------------------- */

static ssize_t
read_request(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
             nghttp2_data_source *src, void *ud)
{
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, id);
    if (x == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    size_t n = h2_buf_take(&x->reqb, buf, len);
    x->req_sent += n;
    size_t due = h2_consume_due(n, &x->req_early, x->req_early_all);
    if (due > 0)
        mitm_h2_server_consumed(x, due);
    if (x->reqb.len == x->reqb.off && x->req_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    if (n == 0) {
        x->req_deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

/* Sends |x| as a stream of |u| (open). 0, or -1. */
static int
stream_start(struct h2_up *u, struct h2x *x)
{
    nghttp2_nv *nv;
    size_t n;
    if (h2_msg_request_nv(&x->req, &x->arena, &nv, &n) != 0)
        return -1;
    nghttp2_data_provider prd = {.source.ptr = x, .read_callback = read_request};
    int body = !(x->req_eof && x->reqb.len == x->reqb.off);
    int32_t id = nghttp2_submit_request(u->io.ng, NULL, nv, n, body ? &prd : NULL, x);
    if (id < 0)
        return -1;
    struct mitm *m = u->pool->m;
    m->st.h2_up_streams++;
    if (u->served++ > 0)
        m->st.h2_up_reused++;
    x->uid = id;
    u->nstreams++;
    ev_timer_stop(m->env->loop, &u->idle);
    h2_io_kick(&u->io);
    return 0;
}

static int
has_room(struct h2_up *u)
{
    if (u->state != UP_READY || !nghttp2_session_check_request_allowed(u->io.ng))
        return 0;
    return u->nstreams < nghttp2_session_get_remote_settings(
                             u->io.ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

static void
ready(struct h2_up *u)
{
    /* The streams that waited, as far as the origin's limit lets them. */
    for (struct h2x *x = u->xs, *next; x != NULL; x = next) {
        next = x->u_next;
        if (x->uid != 0)
            continue;
        if (!has_room(u))
            break;
        u->nwait--;
        if (stream_start(u, x) != 0) {
            x_unlink(u, x);
            mitm_h2_server_upstream_closed(x, -1, "out of memory");
        }
    }
}

/* ---- nghttp2's callbacks ------------------------------------------------- */

static int
on_header(nghttp2_session *ng, const nghttp2_frame *fr, const uint8_t *name, size_t nlen,
          const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, fr->hd.stream_id);
    if (x == NULL || fr->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct h2_fields *f = x->got_final ? &x->trailf : &x->respf;
    if (h2_fields_add(f, &x->arena, name, nlen, value, vlen) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

static int
interim(const struct h2_fields *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].namelen == 7 && memcmp(f->v[i].name, ":status", 7) == 0)
            return f->v[i].valuelen == 3 && f->v[i].value[0] == '1';
    return 0;
}

static int
on_frame_recv(nghttp2_session *ng, const nghttp2_frame *fr, void *ud)
{
    struct h2_up *u = ud;
    struct mitm *m = u->pool->m;
    if (fr->hd.type == NGHTTP2_GOAWAY) {
        m->st.h2_goaway++;
        LOG_INFO("mitm: h2 upstream %s:%u said GOAWAY (%s, last stream %d): draining", u->host,
                 u->port, nghttp2_http2_strerror(fr->goaway.error_code),
                 fr->goaway.last_stream_id);
        u->state = UP_DRAINING;
        return 0;
    }
    if (fr->hd.type == NGHTTP2_SETTINGS && u->state == UP_READY) {
        ready(u);
        return 0;
    }
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, fr->hd.stream_id);
    if (x == NULL || x->srv == NULL)
        return 0;
    int end = (fr->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (fr->hd.type == NGHTTP2_HEADERS) {
        if (!x->got_final) {
            if (interim(&x->respf)) {
                mitm_h2_server_response(x); /* passes the 1xx on, clears respf */
                return 0;
            }
            x->got_final = 1;
            x->resp_eof = end;
            mitm_h2_server_response(x);
            return 0;
        }
        x->resp_eof = 1; /* trailers */
        mitm_h2_server_data(x);
    } else if (fr->hd.type == NGHTTP2_DATA && end) {
        x->resp_eof = 1;
        mitm_h2_server_data(x);
    }
    return 0;
}

static int
on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
        void *ud)
{
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, id);
    if (x == NULL || x->srv == NULL || x->local) {
        nghttp2_session_consume(ng, id, len);
        return 0;
    }
    if (h2_buf_put(&x->respb, data, len, H2_BUF_CAP(x->resp_collect ? x->resp_max : 0)) != 0) {
        nghttp2_session_consume(ng, id, len);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_FLOW_CONTROL_ERROR);
        return 0;
    }
    if (x->resp_collect) { /* kept for the hooks (h2_body.c): bounded by their max */
        nghttp2_session_consume(ng, id, len);
        x->resp_early += len;
    }
    mitm_h2_server_data(x);
    return 0;
}

static int
on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    struct h2_up *u = ud;
    struct mitm *m = u->pool->m;
    struct h2x *x = nghttp2_session_get_stream_user_data(ng, id);
    if (x == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    u->nstreams--;
    /* What the client has not read yet no longer counts on this connection. */
    size_t left = h2_consume_due(x->respb.len - x->respb.off, &x->resp_early, x->resp_early_all);
    if (left > 0)
        nghttp2_session_consume(ng, id, left);
    x_unlink(u, x);
    x->uid = 0;
    if (code == NGHTTP2_REFUSED_STREAM && !x->resp_started && x->req_sent == 0 && !x->retried &&
        x->srv != NULL) {
        /* Never processed (a GOAWAY, a limit): safe to send again. */
        x->retried = 1;
        if (mitm_h2_up_submit(m, &u->f, u->host, u->port, x) == 0) {
            maybe_idle(u);
            return 0;
        }
    }
    if (code != NGHTTP2_NO_ERROR)
        m->st.h2_up_rst++;
    mitm_h2_server_upstream_closed(x, (int)code, NULL);
    maybe_idle(u);
    if (u->state == UP_READY)
        ready(u);
    return 0;
}

static nghttp2_session_callbacks *
callbacks(void)
{
    static nghttp2_session_callbacks *cbs;
    if (cbs == NULL && nghttp2_session_callbacks_new(&cbs) == 0) {
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    }
    return cbs;
}

/* The session over a connection that chose h2. 0, or -1 (|tls| closed). */
static int
up_session(struct h2_up *u, struct io_stream *tls)
{
    nghttp2_session_callbacks *cbs = callbacks();
    nghttp2_option *opt = h2_io_options(0);
    int rc = cbs != NULL && opt != NULL ? nghttp2_session_client_new3(&u->io.ng, cbs, u, opt, h2_alloc())
                                                : -1;
    if (opt != NULL)
        nghttp2_option_del(opt);
    nghttp2_settings_entry set[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, H2_MAX_HEADER_LIST},
    };
    if (rc != 0 || nghttp2_submit_settings(u->io.ng, NGHTTP2_FLAG_NONE, set, 3) != 0 ||
        nghttp2_session_set_local_window_size(u->io.ng, NGHTTP2_FLAG_NONE, 0,
                                              2 * H2_CONN_WINDOW) != 0) {
        if (rc == 0)
            nghttp2_session_del(u->io.ng);
        u->io.ng = NULL;
        io_close(tls, 1);
        return -1;
    }
    h2_io_init(&u->io, u->pool->m->env->loop, tls, on_dead);
    h2_io_track(&u->io, &u->pool->m->h2mem);
    u->state = UP_READY;
    ready(u);
    h2_io_flush(&u->io);
    return 0;
}

static struct h2_up *
up_new(struct mitm *m, const struct flow *f, const char *host, uint16_t port)
{
    struct h2_pool *p = pool_of(m);
    struct h2_up *u = p != NULL ? calloc(1, sizeof(*u)) : NULL;
    if (u == NULL)
        return NULL;
    u->pool = p;
    snprintf(u->host, sizeof(u->host), "%s", host);
    u->port = port;
    u->policy = f->policy;
    u->policy_name = f->policy_name;
    if (mitm_flow_to(&u->f, f, host, port) != 0) {
        free(u);
        return NULL;
    }
    ev_timer_init(&u->idle, on_idle_timer, H2_UP_IDLE, 0);
    u->idle.data = u;
    u->next = p->ups;
    if (p->ups != NULL)
        p->ups->prev = u;
    p->ups = u;
    m->st.h2_up_opened++;
    return u;
}

void
mitm_h2_pool_adopt(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                   struct io_stream *tls)
{
    struct h2_up *u = up_new(m, f, host, port);
    if (u == NULL) {
        io_close(tls, 0);
        return;
    }
    if (up_session(u, tls) != 0)
        up_free(u, "out of memory");
    else
        maybe_idle(u);
}

int
mitm_h2_pool_has(struct mitm *m, const struct flow *f, const char *host, uint16_t port)
{
    struct h2_pool *p = m->h2pool;
    for (struct h2_up *u = p != NULL ? p->ups : NULL; u != NULL; u = u->next)
        if (u->state != UP_DRAINING && key_is(u, f, host, port))
            return 1;
    return 0;
}

/* The origin chose HTTP/1.1: remembered, and every stream that waited on
 * this connection is translated (h2_h1.c) instead, the first over this
 * very connection (through the h1 pool), the others on new ones. */
static void
h1_fallback(struct h2_up *u, struct io_stream *tls, const char *alpn)
{
    struct mitm *m = u->pool->m;
    LOG_INFO("mitm: %s:%u speaks HTTP/1.1 (ALPN %s): its streams are translated (%u waited)",
             u->host, u->port, alpn ? alpn : "none", u->nwait);
    mitm_h1_known_add(m, u->host, u->port);
    mitm_h1_park(m, &u->f, u->host, u->port, 0, tls);
    while (u->xs != NULL) {
        struct h2x *x = u->xs;
        x_unlink(u, x);
        u->nwait--;
        if (mitm_h2h1_submit(m, &u->f, u->host, u->port, 0, x) != 0)
            mitm_h2_server_upstream_closed(x, -1, "out of memory");
    }
    up_free(u, "the origin speaks HTTP/1.1");
}

static void
on_up_tls(void *arg, struct io_stream *tls, int err, const char *why)
{
    struct h2_up *u = arg;
    u->hs = NULL;
    if (tls == NULL) {
        LOG_WARN("mitm: h2 upstream %s:%u: %s", u->host, u->port, why ? why : "tls failed");
        up_free(u, why ? why : "tls: handshake failed");
        return;
    }
    const char *alpn = tls_stream_alpn(tls);
    if (alpn == NULL || strcmp(alpn, "h2") != 0) {
        h1_fallback(u, tls, alpn);
        return;
    }
    if (up_session(u, tls) != 0)
        up_free(u, "out of memory");
}

static void
on_up_open(void *arg, const struct flow_upstream *r)
{
    struct h2_up *u = arg;
    u->oc = NULL;
    if (r->err != 0) {
        up_free(u, r->why != NULL ? r->why : "connect failed");
        return;
    }
    u->hs = mitm_upstream_tls(u->pool->m, r->stream, u->host, u->port, alpn_h2, 2, on_up_tls, u);
    if (u->hs == NULL)
        up_free(u, "out of memory");
}

int
mitm_h2_up_submit(struct mitm *m, const struct flow *f, const char *host, uint16_t port,
                  struct h2x *x)
{
    struct h2_pool *p = pool_of(m);
    if (p == NULL)
        return -1;
    struct h2_up *opening = NULL;
    for (struct h2_up *u = p->ups; u != NULL; u = u->next) {
        if (!key_is(u, f, host, port))
            continue;
        if (has_room(u)) {
            x_link(u, x);
            if (stream_start(u, x) != 0) {
                x_unlink(u, x);
                return -1;
            }
            return 0;
        }
        if (u->state == UP_OPENING && u->nwait < H2_MAX_STREAMS)
            opening = u;
    }
    if (opening == NULL) {
        opening = up_new(m, f, host, port);
        if (opening == NULL)
            return -1;
        opening->oc = flow_open(m->env, &opening->f, 0, on_up_open, opening);
        if (opening->oc == NULL) {
            up_free(opening, "out of memory");
            return -1;
        }
    }
    x_link(opening, x);
    x->uid = 0;
    opening->nwait++;
    return 0;
}

int
mitm_h2_route(struct mitm *m, const struct flow *f, const char *host, uint16_t port, int plain,
              struct h2x *x)
{
    if (plain || (!mitm_h2_pool_has(m, f, host, port) &&
                  (mitm_h1_known(m, host, port) || mitm_h1_has(m, f, host, port, 0))))
        return mitm_h2h1_submit(m, f, host, port, plain, x);
    return mitm_h2_up_submit(m, f, host, port, x);
}

void
mitm_h2_up_consumed(struct h2x *x, size_t n)
{
    if (x->h1 != NULL) {
        mitm_h2h1_consumed(x);
        return;
    }
    if (x->up == NULL || x->uid == 0)
        return;
    nghttp2_session_consume(x->up->io.ng, x->uid, n);
    h2_io_kick(&x->up->io);
}

void
mitm_h2_up_data(struct h2x *x)
{
    if (x->h1 != NULL) {
        mitm_h2h1_data(x);
        return;
    }
    if (x->up == NULL || x->uid == 0 || !x->req_deferred)
        return;
    x->req_deferred = 0;
    nghttp2_session_resume_data(x->up->io.ng, x->uid);
    h2_io_kick(&x->up->io);
}

void
mitm_h2_up_cancel(struct h2x *x, uint32_t code)
{
    if (x->h1 != NULL) {
        mitm_h2h1_cancel(x);
        return;
    }
    struct h2_up *u = x->up;
    if (u == NULL)
        return;
    if (x->uid != 0) {
        nghttp2_session_set_stream_user_data(u->io.ng, x->uid, NULL);
        size_t left = h2_consume_due(x->respb.len - x->respb.off, &x->resp_early,
                                     x->resp_early_all);
        if (left > 0)
            nghttp2_session_consume(u->io.ng, x->uid, left);
        nghttp2_submit_rst_stream(u->io.ng, NGHTTP2_FLAG_NONE, x->uid, code);
        u->nstreams--;
        h2_io_kick(&u->io);
    } else {
        u->nwait--;
    }
    x_unlink(u, x);
    x->uid = 0;
    maybe_idle(u);
}
