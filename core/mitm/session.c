#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/io.h"
#include "log/log.h"
#include "mitm/h2_int.h"
#include "mitm/mitm_int.h"
#include "tls/tls.h"

/* One intercepted flow, from the two raw streams the flow handed over to
 * the exchange driver: the origin's TLS handshake first (so a failure
 * becomes a 502 the user can read, and a TLS 1.3-only origin a plain
 * relay), then the client's, with a leaf minted for the host. */

static const char *const alpn_h1[] = {"http/1.1"};
/* HTTP/2: offered to the origin first, and to the client when the origin
 * took it (h2_server.c then serves the client). */
static const char *const alpn_h2[] = {"h2", "http/1.1"};

static void
sess_free(struct mitm_sess *s, int reset)
{
    struct ev_loop *loop = s->m->env->loop;
    mitm_probe_forget(s);
    ev_timer_stop(loop, &s->timer);
    if (s->oc != NULL)
        flow_open_cancel(s->oc);
    if (s->hs != NULL)
        tls_handshake_cancel(s->hs);
    if (s->h != NULL)
        http_h1_conn_free(s->h);
    if (s->h2 != NULL)
        mitm_h2_server_free(s->h2);
    if (s->state == M_PASS)
        reset ? flow_relay_abort(&s->pass) : flow_relay_stop(&s->pass);
    if (s->client != NULL)
        io_close(s->client, reset);
    if (s->up != NULL)
        io_close(s->up, reset);
    s->m->st.active--;
    free(s->reply);
    free(s);
}

void
mitm_sess_end(struct mitm_sess *s, const char *reason)
{
    struct flow_relay *r = s->r;
    sess_free(s, 1);
    flow_relay_intercept_done(r, reason); /* frees the flow's owner: |s| is gone already */
}

void
mitm_sess_stop(void *state, int reset)
{
    sess_free(state, reset);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mitm_sess *s = w->data;
    LOG_INFO("mitm: %s:%u: TLS handshake timed out", s->host, s->port);
    mitm_sess_end(s, "mitm: handshake timeout");
}

struct tls_handshake *
mitm_upstream_tls(struct mitm *m, struct io_stream *inner, const char *host, uint16_t port,
                  const char *const *alpn, size_t nalpn,
                  void (*cb)(void *, struct io_stream *, int, const char *), void *arg)
{
    const struct mitm_opts *o = &m->o;
    struct tls_client_opts to = {
        .host = host,
        .port = port,
        .alpn = alpn,
        .nalpn = nalpn,
        .skip_verify = o->skip_verify != NULL &&
                       mitm_hosts_match(o->skip_verify, host, strlen(host), port),
    };
    return tls_client_start(o->trust, inner, &to, cb, arg);
}

struct tls_handshake *
mitm_sess_upstream_tls(struct mitm_sess *s, struct io_stream *inner, const char *host,
                       uint16_t port, void (*cb)(void *, struct io_stream *, int, const char *))
{
    return mitm_upstream_tls(s->m, inner, host, port, alpn_h1, 1, cb, s);
}

/* ---- the client side ----------------------------------------------------- */

static void
on_client_hs(void *arg, struct io_stream *tls, int err, const char *why)
{
    struct mitm_sess *s = arg;
    struct mitm *m = s->m;
    s->hs = NULL;
    if (tls == NULL) {
        if (why != NULL && strstr(why, "does not trust") != NULL) {
            m->st.client_refused++;
            LOG_WARN("mitm: the client refused chute's certificate for %s (%s): a pinned app, "
                     "or chute's CA is not trusted there (`chute ca export`)%s",
                     s->host, why, m->o.auto_bypass ? "" : "; auto_bypass = true passes such "
                                                          "hosts through");
            if (m->o.auto_bypass)
                mitm_bypass_add(m, s->host);
            mitm_sess_end(s, "mitm: client refused the certificate");
            return;
        }
        m->st.client_tls_failed++;
        if (err == EPROTONOSUPPORT)
            LOG_WARN("mitm: %s: the client offers only TLS 1.3, which BearSSL 0.6 cannot "
                     "speak; take the host off the MITM list to pass it through", s->host);
        else
            LOG_INFO("mitm: %s: client handshake failed: %s", s->host, why ? why : "?");
        mitm_sess_end(s, "mitm: client handshake failed");
        return;
    }
    ev_timer_stop(m->env->loop, &s->timer);
    const char *alpn = tls_stream_alpn(tls);
    if (alpn != NULL && strcmp(alpn, "h2") == 0) { /* HTTP/2: h2_server.c */
        if (s->up != NULL) { /* an h1 origin's: its first stream takes it */
            mitm_h1_park(m, s->f, s->up_host, s->up_port, 0, s->up);
            s->up = NULL;
        }
        if (mitm_h2_server_start(s, tls) != 0) {
            io_close(tls, 1);
            mitm_sess_end(s, "out of memory");
            return;
        }
        s->state = M_HTTP;
        return;
    }
    if (alpn != NULL)
        m->st.alpn_h1++;
    else
        m->st.alpn_none++;
    double idle = m->o.idle_timeout > 0 ? m->o.idle_timeout : m->env->opts->idle_timeout;
    struct http_h1_conn_opts ho = {
        .fwd = {.form = HTTP_FWD_ORIGIN, .default_host = mem_slice(s->host, strlen(s->host)),
                .default_port = s->port, .upgrade = 1},
        .idle_timeout = idle,
    };
    s->h = http_h1_conn_new(tls, &ho, &mitm_exchange_cbs, s);
    if (s->h == NULL) {
        io_close(tls, 1);
        mitm_sess_end(s, "out of memory");
        return;
    }
    s->state = M_HTTP;
    if (s->up != NULL) { /* the first request takes it back (or another's) */
        mitm_h1_park(m, s->f, s->up_host, s->up_port, 0, s->up);
        s->up = NULL;
    }
}

static void
client_tls(struct mitm_sess *s)
{
    char err[128];
    if (s->reply_off < s->reply_len) {
        s->tls_waits = 1; /* on_reply_drain comes back here */
        return;
    }
    struct tls_server_cfg *cfg = tls_mint_get(s->m->o.mint, s->host, (double)time(NULL), err,
                                              sizeof(err));
    if (cfg == NULL) {
        LOG_WARN("mitm: %s: no certificate: %s", s->host, err);
        mitm_sess_end(s, "mitm: no certificate");
        return;
    }
    struct io_stream *c = s->client;
    io_set_callbacks(c, NULL, NULL, NULL);
    s->client = NULL;
    /* h2 toward the client whatever the origin speaks: an HTTP/1.1-only
     * one is translated (h2_h1.c). */
    int h2 = s->fail == NULL;
    s->hs = tls_server_start_alpn(cfg, c, h2 ? alpn_h2 : alpn_h1, h2 ? 2 : 1, on_client_hs, s);
    tls_server_cfg_free(cfg); /* the handshake holds its own reference */
    if (s->hs == NULL)
        mitm_sess_end(s, "out of memory");
}

/* The inbound's own answer (SOCKS5's success, CONNECT's 200) goes out
 * before any TLS byte. */
static void
send_reply(void *arg)
{
    struct mitm_sess *s = arg;
    while (s->reply_off < s->reply_len) {
        ssize_t n = io_write(s->client, s->reply + s->reply_off, s->reply_len - s->reply_off);
        if (n < 0 && errno == EAGAIN)
            return; /* on_drain again */
        if (n <= 0) {
            mitm_sess_end(s, "client gone");
            return;
        }
        s->reply_off += (size_t)n;
    }
    io_set_callbacks(s->client, NULL, NULL, NULL);
    if (s->tls_waits) {
        s->tls_waits = 0;
        client_tls(s);
    }
}

static void
on_start_failed(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mitm_sess *s = w->data;
    ev_timer_init(&s->timer, on_timeout, s->m->env->opts->connect_timeout + 10.0, 0);
    ev_timer_start(loop, &s->timer);
    client_tls(s);
}

/* ---- the origin side ----------------------------------------------------- */

static void
on_pass_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct mitm_sess *s = arg;
    s->state = M_HANDSHAKE; /* the relay closed both streams */
    mitm_sess_end(s, reason);
}

static void
on_pass_open(void *arg, const struct flow_upstream *u)
{
    struct mitm_sess *s = arg;
    const struct flow_env *e = s->m->env;
    s->oc = NULL;
    if (u->err != 0) {
        mitm_sess_end(s, "connect failed");
        return;
    }
    struct flow_relay_args a = {
        .client = s->client,
        .upstream = u->stream,
        .pre_down = s->reply + s->reply_off,
        .pre_down_len = s->reply_len - s->reply_off,
        .up_count = &s->f->bytes_up,
        .down_count = &s->f->bytes_down,
        .idle = e->opts->idle_timeout,
        .cb = on_pass_done,
        .arg = s,
    };
    io_set_callbacks(s->client, NULL, NULL, NULL);
    if (flow_relay_start(&s->pass, e->loop, &a) != 0) {
        io_close(u->stream, 1);
        mitm_sess_end(s, "out of memory");
        return;
    }
    s->client = NULL;
    s->state = M_PASS;
}

static void
on_up_hs(void *arg, struct io_stream *tls, int err, const char *why)
{
    struct mitm_sess *s = arg;
    struct mitm *m = s->m;
    s->hs = NULL;
    if (tls != NULL) {
        const char *alpn = tls_stream_alpn(tls);
        if (alpn != NULL && strcmp(alpn, "h2") == 0) { /* shared from now on */
            mitm_h2_pool_adopt(m, s->f, s->host, s->port, tls);
            s->up_h2 = 1;
        } else {
            s->up = tls;
        }
        mitm_probe_done(s, !s->up_h2); /* flows that waited for this one go on */
        client_tls(s);
        return;
    }
    mitm_probe_done(s, 0);
    if (err == EPROTONOSUPPORT) {
        /* BearSSL cannot speak to it; the user still reaches it. */
        m->st.tls13_passed++;
        LOG_INFO("mitm: %s:%u speaks only TLS 1.3: passed through uninspected", s->host,
                 s->port);
        ev_timer_stop(m->env->loop, &s->timer);
        s->state = M_PASS_OPEN;
        s->oc = flow_open(m->env, s->f, 0, on_pass_open, s);
        if (s->oc == NULL)
            mitm_sess_end(s, "out of memory");
        return;
    }
    snprintf(s->failbuf, sizeof(s->failbuf), "%s", why != NULL ? why : "tls: handshake failed");
    s->fail = s->failbuf;
    if (why != NULL && (strstr(why, "certificate") != NULL))
        m->st.verify_failed++;
    else
        m->st.upstream_failed++;
    LOG_WARN("mitm: %s:%u: %s: requests get 502%s", s->host, s->port, s->fail,
             strstr(s->fail, "certificate") ? " (mitm.skip_verify_hosts opts out)" : "");
    client_tls(s);
}

/* The client's handshake starts from the loop, not from inside the call
 * that decided it. */
static void
client_tls_soon(struct mitm_sess *s)
{
    struct ev_loop *loop = s->m->env->loop;
    ev_timer_stop(loop, &s->timer);
    ev_timer_init(&s->timer, on_start_failed, 0, 0);
    ev_timer_start(loop, &s->timer);
}

static void upstream_handshake(struct mitm_sess *s, struct io_stream *raw);

void *
mitm_sess_start(void *ud, struct flow_relay *r, const struct flow_relay_args *a, struct flow *f)
{
    struct mitm *m = ud;
    char buf[64];
    struct mitm_sess *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    if (a->pre_down_len > 0 && (s->reply = malloc(a->pre_down_len)) == NULL) {
        free(s);
        return NULL;
    }
    struct io_stream *client = io_prefix_new(a->client, a->pre_up, a->pre_up_len);
    if (client == NULL) {
        free(s->reply);
        free(s);
        return NULL;
    }
    s->m = m;
    s->r = r;
    s->f = f;
    s->client = client;
    s->port = f->dst.port;
    snprintf(s->host, sizeof(s->host), "%s", mitm_flow_host(f, buf, sizeof(buf)));
    if (a->pre_down_len > 0)
        memcpy(s->reply, a->pre_down, a->pre_down_len);
    s->reply_len = a->pre_down_len;
    m->st.flows++;
    m->st.active++;
    ev_timer_init(&s->timer, on_timeout, m->env->opts->connect_timeout + 10.0, 0);
    s->timer.data = s;
    ev_timer_start(m->env->loop, &s->timer);
    LOG_DEBUG("mitm: flow %llu to %s:%u intercepted", (unsigned long long)f->id, s->host,
              s->port);
    if (s->reply_len > 0) {
        /* The client may start its handshake while the origin's runs. A
         * failed write is found again by the client's handshake. */
        ssize_t n = io_write(client, s->reply, s->reply_len);
        s->reply_off = n > 0 ? (size_t)n : n < 0 && errno == EAGAIN ? 0 : s->reply_len;
        if (s->reply_off < s->reply_len)
            io_set_callbacks(client, NULL, send_reply, s);
    }
    snprintf(s->up_host, sizeof(s->up_host), "%s", s->host);
    s->up_port = s->port;
    if (mitm_h2_pool_has(m, f, s->host, s->port)) {
        /* An h2 connection to the origin is open or opening: no second
         * handshake; this flow's own connection is not needed. */
        io_close(a->upstream, 0);
        s->up_h2 = 1;
        client_tls_soon(s);
        return s;
    }
    if ((s->up = mitm_h1_take(m, f, s->host, s->port, 0)) != NULL) {
        /* An idle HTTP/1 connection to the origin tells what a new one
         * would (reachable, verified, no h2): the client's handshake
         * starts at once, and the request goes over it. */
        io_close(a->upstream, 0);
        client_tls_soon(s);
        return s;
    }
    if (mitm_probe_wait(s, a->upstream))
        return s; /* mitm_sess_probed goes on */
    upstream_handshake(s, a->upstream);
    return s;
}

static void
upstream_handshake(struct mitm_sess *s, struct io_stream *raw)
{
    s->hs = mitm_upstream_tls(s->m, raw, s->host, s->port, alpn_h2, 2, on_up_hs, s);
    if (s->hs == NULL) { /* out of memory, the upstream closed: the client hears why soon */
        mitm_probe_done(s, 0);
        snprintf(s->failbuf, sizeof(s->failbuf), "out of memory");
        s->fail = s->failbuf;
        client_tls_soon(s);
    }
}

void
mitm_sess_probed(struct mitm_sess *s, struct io_stream *raw)
{
    struct mitm *m = s->m;
    if (mitm_h2_pool_has(m, s->f, s->host, s->port)) {
        io_close(raw, 0);
        s->up_h2 = 1;
        client_tls_soon(s);
        return;
    }
    if ((s->up = mitm_h1_take(m, s->f, s->host, s->port, 0)) != NULL) {
        io_close(raw, 0);
        client_tls_soon(s);
        return;
    }
    /* An h1 origin, or the probe failed: each its own handshake, at once. */
    upstream_handshake(s, raw);
}
