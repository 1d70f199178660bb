#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "flow/relay.h"
#include "flow/session.h"
#include "http/h1_conn.h"
#include "inbound/inbound.h"
#include "io/io.h"
#include "log/log.h"

/* One HTTP proxy client, an adapter over the HTTP/1 exchange driver
 * (http/h1_conn.h, which the MITM shares): this file decides each request
 * (auth, the route, the upstream) and the driver moves the bytes. An
 * absolute-form request ("GET http://host/path") is forwarded in origin
 * form over an upstream that later requests to the same host:port reuse;
 * one upstream connection is one flow. CONNECT hands the client socket to
 * the relay, spliced when the upstream is a bare socket; so does an upgrade
 * (a WebSocket's "GET ws://...", forwarded) once its 101 is out. */

struct conn {
    struct inbound_conn base;
    struct http_h1_conn *h;  /* NULL once a CONNECT tunnel took the client */
    struct flow flow;
    int flow_added, tunnel;
    struct flow_open *oc;
    struct flow_relay relay;
    char *rest;              /* CONNECT: what the client sent after its head */
};

static const struct flow_env *
env_of(struct conn *c)
{
    return inbound_env(c->base._l);
}

static void
end_flow(struct conn *c, const char *reason)
{
    const struct flow_env *e = env_of(c);
    if (c->flow_added) {
        flow_table_remove(e->flows, &c->flow, io_mono_now(), reason);
        c->flow_added = 0;
    }
}

static void
conn_free(struct conn *c, const char *reason)
{
    if (c->oc != NULL)
        flow_open_cancel(c->oc);
    if (c->tunnel)
        flow_relay_stop(&c->relay); /* a no-op once the relay has closed */
    if (c->h != NULL)
        http_h1_conn_free(c->h);
    end_flow(c, reason);
    inbound_conn_unlink(&c->base);
    free(c->rest);
    free(c);
}

/* The flow table's calls: a flow is one upstream connection of |c|. */
static const char *
owner_state(const struct flow *f, void *arg)
{
    const struct conn *c = arg;
    return c->tunnel ? "relay" : c->oc != NULL ? "connecting" : "exchange";
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
authorized(struct conn *c, const struct http_fwd_req *req)
{
    if (!inbound_auth_required(c->base._l))
        return 1;
    const struct http_header *h = http_header_find(req->in, req->num_in, "proxy-authorization");
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
    return inbound_auth_check(&c->base, dec, (size_t)(colon - dec), colon + 1,
                              n - (size_t)(colon - dec) - 1);
}

static void
on_relay_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct conn *c = arg;
    c->tunnel = 0; /* the relay closed both sides */
    conn_free(c, reason);
}

/* CONNECT: the client stream goes to the relay, after our 200. */
static void
tunnel(struct conn *c, const struct flow_upstream *u)
{
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    struct mem_slice rest;
    struct io_stream *client = http_h1_conn_release_client(c->h, &rest);
    if (client == NULL || (rest.len > 0 && (c->rest = malloc(rest.len)) == NULL)) {
        io_close(u->stream, 1);
        http_h1_conn_respond(c->h, 502, "Bad Gateway", NULL, 1);
        return;
    }
    if (rest.len > 0)
        memcpy(c->rest, rest.ptr, rest.len);
    http_h1_conn_free(c->h); /* the client stream is ours now */
    c->h = NULL;
    if (flow_relay_upstream(&c->relay, env_of(c), client, u, c->rest, rest.len, ok,
                            sizeof(ok) - 1, &c->flow, on_relay_done, c) != 0) {
        io_close(u->stream, 1);
        io_close(client, 1);
        conn_free(c, "out of memory");
        return;
    }
    c->tunnel = 1;
}

/* The upstream could not be reached: the client hears why. */
static int
open_failed(struct conn *c, const struct flow_upstream *u)
{
    c->oc = NULL;
    if (u->err == 0)
        return 0;
    end_flow(c, u->err == ECANCELED ? "rejected" : "connect failed"); /* as the other inbounds */
    if (u->err == ECANCELED) /* REJECTed once the name resolved (flow/session.h) */
        http_h1_conn_respond(c->h, 403, "Forbidden", NULL, 1);
    else if (u->err == ETIMEDOUT)
        http_h1_conn_respond(c->h, 504, "Gateway Timeout", NULL, 1);
    else
        http_h1_conn_respond(c->h, 502, "Bad Gateway", NULL, 1);
    return 1;
}

static void
on_tunnel(void *arg, const struct flow_upstream *u)
{
    struct conn *c = arg;
    if (!open_failed(c, u))
        tunnel(c, u);
}

static void
on_connected(void *arg, const struct flow_upstream *u)
{
    struct conn *c = arg;
    if (open_failed(c, u))
        return;
    struct http_h1_upstream up = {.stream = u->stream, .early = u->extra,
                                  .early_len = u->extra_len, .up_count = &c->flow.bytes_up,
                                  .down_count = &c->flow.bytes_down};
    if (http_h1_conn_forward(c->h, &up) != 0) {
        io_close(u->stream, 1);
        http_h1_conn_respond(c->h, 502, "Bad Gateway", NULL, 1);
    }
}

static int
same_dst(const struct flow_addr *a, const struct flow_addr *b)
{
    return a->kind == b->kind && a->port == b->port && memcmp(a->ip, b->ip, 16) == 0 &&
           strcmp(a->name, b->name) == 0;
}

static void
on_request_head(void *arg, struct http_h1_conn *h, struct http_fwd_req *req)
{
    struct conn *c = arg;
    const struct flow_env *e = env_of(c);
    struct flow_addr dst;
    inbound_conn_ready(&c->base); /* a whole head: the handshake caps are done with it */
    if (!authorized(c, req)) {
        LOG_INFO("http proxy: authentication failed");
        http_h1_conn_respond(h, 407, "Proxy Authentication Required",
                             "Proxy-Authenticate: Basic realm=\"chute\"\r\n", 1);
        return;
    }
    if (req->refused || req->port == 0 ||
        flow_addr_from_host(&dst, req->host.ptr, req->host.len, req->port) != 0) {
        http_h1_conn_respond(h, 400, "Bad Request", NULL, 1);
        return;
    }
    /* Same upstream as the last request: keep using it (and its flow). */
    if (!req->connect && http_h1_conn_has_upstream(h) && c->flow_added &&
        same_dst(&c->flow.dst, &dst) && http_h1_conn_forward(h, NULL) == 0)
        return;
    if (http_h1_conn_has_upstream(h))
        http_h1_conn_drop_upstream(h);
    end_flow(c, "done");
    struct sockaddr_storage src = c->flow.src, local = c->flow.local;
    memset(&c->flow, 0, sizeof(c->flow));
    c->flow.network = FLOW_TCP;
    c->flow.inbound = FLOW_IN_HTTP;
    c->flow.http_plain = !req->connect;
    c->flow.src = src;
    c->flow.local = local;
    c->flow.dst = dst;
    flow_table_add(e->flows, &c->flow, io_mono_now());
    flow_set_owner(&c->flow, &owner, c);
    c->flow_added = 1;
    if (e->name(e->ud, &c->flow) != 0) { /* a fake IP whose name is gone */
        http_h1_conn_respond(h, 502, "Bad Gateway", NULL, 1);
        return;
    }
    e->decide(e->ud, &c->flow);
    if (c->flow.policy == FLOW_POLICY_REJECT) {
        http_h1_conn_respond(h, 403, "Forbidden", NULL, 1);
        return;
    }
    c->oc = flow_open(e, &c->flow, 0, req->connect ? on_tunnel : on_connected, c);
    if (c->oc == NULL)
        http_h1_conn_respond(h, 502, "Bad Gateway", NULL, 1);
}

/* A forwarded request's upgrade (a WebSocket) got its 101: both streams
 * are relayed as they are, the flow going on, until either side ends. */
static void
on_upgrade(void *arg, struct http_h1_conn *h, struct io_stream *client, struct io_stream *up,
           struct mem_slice to_up, struct mem_slice to_client)
{
    struct conn *c = arg;
    const struct flow_env *e = env_of(c);
    struct flow_relay_args a = {
        .client = client,
        .upstream = up,
        .pre_up = to_up.ptr,
        .pre_up_len = to_up.len,
        .pre_down = to_client.ptr,
        .pre_down_len = to_client.len,
        .up_count = &c->flow.bytes_up,
        .down_count = &c->flow.bytes_down,
        .idle = e->opts->idle_timeout,
        .cb = on_relay_done,
        .arg = c,
    };
    int rc = flow_relay_start(&c->relay, e->loop, &a);
    c->h = NULL;
    http_h1_conn_free(h); /* from inside its callback, as it allows */
    if (rc != 0) {
        io_close(client, 1);
        io_close(up, 1);
        conn_free(c, "out of memory");
        return;
    }
    c->tunnel = 1;
}

static void
on_upstream_end(void *arg, struct http_h1_conn *h, const char *reason)
{
    end_flow(arg, reason);
}

static void
on_done(void *arg, struct http_h1_conn *h, const char *reason)
{
    struct conn *c = arg;
    c->h = NULL; /* freed below, from inside its own callback, as it allows */
    http_h1_conn_free(h);
    conn_free(c, reason);
}

static const struct http_h1_conn_cbs cbs = {
    .on_request_head = on_request_head,
    .on_upstream_end = on_upstream_end,
    .on_upgrade = on_upgrade,
    .on_done = on_done,
};

void
inbound_http_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer)
{
    const struct flow_env *e = inbound_env(l);
    struct conn *c = calloc(1, sizeof(*c));
    struct io_stream *client = c != NULL ? io_fd_new(e->loop, fd) : NULL;
    struct http_h1_conn_opts o = {.fwd = {.form = HTTP_FWD_PROXY, .upgrade = 1},
                                  .idle_timeout = e->opts->idle_timeout};
    if (client == NULL || (c->h = http_h1_conn_new(client, &o, &cbs, c)) == NULL) {
        if (client != NULL)
            io_fd_release(client);
        close(fd);
        free(c);
        return;
    }
    c->base._close = close_conn;
    c->flow.src = *peer;
    socklen_t llen = sizeof(c->flow.local);
    getsockname(fd, (struct sockaddr *)&c->flow.local, &llen);
    inbound_conn_link(l, &c->base, peer);
}
