#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow/addr.h"
#include "io/io.h"
#include "log/log.h"
#include "outbound/outbound.h"
#include "outbound/proxy.h"
#include "outbound/set.h"
#include "outbound/set_int.h"
#include "outbound/transport.h"

/* outbound_open: a group picks its member, then DIRECT connects, or the
 * transport to the proxy's server is opened (transport.c: TCP, TLS for
 * Trojan and https proxies) and the proxy's protocol for this destination
 * is spoken over it (the table below):
 *   socks5, http    a handshake, then the transport itself is the path
 *                   (a pooled SOCKS5 connection is greeted already: only
 *                   the CONNECT request is left, set_pool.c)
 *   shadowsocks     a stream at once (the header rides the first bytes)
 *   trojan          a stream that sends the header first
 * What is delivered is always a stream; a bare socket's is spliced by the
 * relays. One timer bounds the whole open, the proxy's handshakes
 * included. */

enum ostate { O_CONNECT, O_TRANSPORT, O_HANDSHAKE };

struct outbound_open {
    const struct outbound_env *env;
    struct outbound_set *set;      /* a reference while the open lasts */
    int policy;                    /* the concrete one: DIRECT, REJECT or a proxy */
    const struct outbound_proxy *p;
    const struct outbound_proto_ops *proto;
    struct flow_addr dst;
    enum ostate state;
    struct outbound_connect *oc;
    struct outbound_transport *tr;
    struct outbound_hs *hs;
    struct io_stream *s;           /* the transport while a handshake runs on it */
    ev_timer timer;
    ev_idle later;                 /* results known inside outbound_open() */
    struct outbound_result res;
    uint8_t *extra;                /* the proxy's early bytes, until delivered */
    int udp;                       /* Trojan: UDP ASSOCIATE instead of CONNECT */
    int pooled;                    /* the transport came from a pool (SOCKS5: greeted) */
    double t0, t_transport;        /* io_mono_now() at the start; when the transport was up (0: not) */
    outbound_open_cb cb;
    void *arg;
};

/* How each protocol runs over its transport. |start| returns 0 with the
 * open going on (a handshake), or delivers or fails through |o| itself. */
struct outbound_proto_ops {
    int (*tls)(const struct outbound_proxy *p);
    const char *const *alpn;
    size_t nalpn;
    void (*start)(struct outbound_open *o, struct io_stream *transport);
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

static void
stop(struct outbound_open *o)
{
    struct ev_loop *loop = o->env->loop;
    ev_timer_stop(loop, &o->timer);
    ev_idle_stop(loop, &o->later);
    if (o->oc != NULL)
        outbound_connect_cancel(o->oc);
    if (o->tr != NULL)
        outbound_transport_cancel(o->tr);
    if (o->hs != NULL)
        outbound_hs_cancel(o->hs);
    if (o->s != NULL)
        io_close(o->s, 1);
    o->oc = NULL;
    o->tr = NULL;
    o->hs = NULL;
    o->s = NULL;
}

static void
release(struct outbound_open *o)
{
    stop(o);
    if (o->set != NULL)
        outbound_set_unref(o->set);
    free(o->extra);
    free(o);
}

/* Whether a failure is the proxy's (it goes down in its groups) or the
 * destination's, which the proxy only reported: a refused or unreachable
 * target, or a slow one, says nothing of the proxy's health. */
static int
proxy_fault(const struct outbound_open *o, int err)
{
    if (err == 0 || o->state != O_HANDSHAKE)
        return err != 0;
    return err != ECONNREFUSED && err != EHOSTUNREACH && err != ENETUNREACH && err != ETIMEDOUT;
}

static const char *const proto_names[] = {
    [OUTBOUND_SOCKS5] = "socks5",
    [OUTBOUND_HTTP] = "http",
    [OUTBOUND_SHADOWSOCKS] = "shadowsocks",
    [OUTBOUND_TROJAN] = "trojan",
};

/* A proxy's part of the open, at debug level: how long its server took
 * to connect (TLS included) and its handshake to answer. */
static void
log_open(const struct outbound_open *o)
{
    char dst[300];
    double now = io_mono_now();
    flow_addr_format(&o->dst, dst, sizeof(dst));
    const char *what = "the proxy replied: open";
    if (o->res.err != 0)
        what = o->res.why;
    else if (o->p->type == OUTBOUND_SHADOWSOCKS)
        what = "ready (the request rides the first bytes)";
    else if (o->p->type == OUTBOUND_TROJAN)
        what = "ready (the header goes with the first bytes)";
    if (o->t_transport > 0)
        LOG_DEBUG("proxy '%s' (%s) to %s: %s after %.0f ms (%s server up in %.0f ms)", o->res.via,
                  proto_names[o->p->type], dst, what ? what : "?", (now - o->t0) * 1000,
                  o->pooled ? "pooled" : "its", (o->t_transport - o->t0) * 1000);
    else
        LOG_DEBUG("proxy '%s' (%s) to %s: %s after %.0f ms", o->res.via, proto_names[o->p->type],
                  dst, what ? what : "?", (now - o->t0) * 1000);
}

/* The callback runs with |o| stopped but not yet freed: r.extra points into
 * it. The set outlives the callback too: r.via points into it. */
static void
deliver(struct outbound_open *o)
{
    if (o->p != NULL && log_threshold >= LOG_LEVEL_DEBUG)
        log_open(o);
    /* A Shadowsocks stream works once the server answers (ss.c's watch
     * reports it): a wrong key looks like success here. */
    int failed = proxy_fault(o, o->res.err);
    if (o->set != NULL && o->p != NULL && (failed || o->p->type != OUTBOUND_SHADOWSOCKS))
        outbound_set_report(o->set, o->policy, failed);
    stop(o);
    o->cb(o->arg, &o->res);
    release(o);
}

static void
deliver_stream(struct outbound_open *o, struct io_stream *s)
{
    o->res.stream = s;
    o->res.err = 0;
    deliver(o);
}

static void
fail(struct outbound_open *o, int err, const char *why)
{
    o->res.stream = NULL;
    o->res.extra_len = 0;
    o->res.err = err ? err : EPROTO;
    o->res.why = why;
    deliver(o);
}

static void
on_later(struct ev_loop *loop, ev_idle *w, int revents)
{
    struct outbound_open *o = CONTAINER(w, struct outbound_open, later);
    ev_idle_stop(loop, w);
    deliver(o);
}

static void
on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct outbound_open *o = CONTAINER(w, struct outbound_open, timer);
    const char *why = o->state == O_HANDSHAKE ? "proxy handshake timeout"
                      : o->tr != NULL         ? outbound_transport_timeout_why(o->tr)
                      : o->p != NULL          ? "proxy server: connect timeout"
                                              : "connect timeout";
    fail(o, ETIMEDOUT, why);
}

/* ---- the protocols ------------------------------------------------------ */

/* The handshake is over: the transport carries the destination's bytes. */
static void
on_hs(void *arg, int err, const char *why, const uint8_t *extra, size_t extra_len)
{
    struct outbound_open *o = arg;
    struct io_stream *s = o->s;

    o->hs = NULL;
    if (err != 0) {
        fail(o, err, why);
        return;
    }
    if (extra_len > 0) {
        if ((o->extra = malloc(extra_len)) == NULL) {
            fail(o, ENOMEM, "out of memory");
            return;
        }
        memcpy(o->extra, extra, extra_len);
        o->res.extra = o->extra;
        o->res.extra_len = extra_len;
    }
    o->s = NULL;
    /* A pooled connection's retry is over once the proxy answered: the
     * bare socket under it goes on, and the relays can splice it. */
    deliver_stream(o, pool_stream_settle(s));
}

static void
start_socks5(struct outbound_open *o, struct io_stream *transport)
{
    o->s = transport;
    o->hs = o->pooled ? outbound_socks5_request(transport, o->p, &o->dst, on_hs, o)
                      : outbound_socks5_connect(transport, o->p, &o->dst, on_hs, o);
    if (o->hs == NULL)
        fail(o, ENOMEM, "out of memory");
}

static void
start_http(struct outbound_open *o, struct io_stream *transport)
{
    o->s = transport;
    o->hs = outbound_http_connect(transport, o->p, &o->dst, on_hs, o);
    if (o->hs == NULL)
        fail(o, ENOMEM, "out of memory");
}

static void
start_ss(struct outbound_open *o, struct io_stream *transport)
{
    struct io_stream *s = outbound_ss_stream(transport, o->p, &o->dst);

    if (s == NULL) {
        fail(o, ENOMEM, "out of memory");
        return;
    }
    outbound_ss_watch(s, o->env, o->res.via, OUTBOUND_SILENT_DEADLINE);
    deliver_stream(o, s);
}

static void
start_trojan(struct outbound_open *o, struct io_stream *transport)
{
    struct io_stream *s = o->udp ? outbound_trojan_udp_stream(transport, o->p, &o->dst)
                                 : outbound_trojan_stream(transport, o->p, &o->dst);

    if (s == NULL) {
        io_close(transport, 1);
        fail(o, ENOMEM, "out of memory");
        return;
    }
    deliver_stream(o, s);
}

static int
never(const struct outbound_proxy *p)
{
    return 0;
}

static int
always(const struct outbound_proxy *p)
{
    return 1;
}

static int
proxy_tls(const struct outbound_proxy *p)
{
    return p->tls;
}

static const char *const h1_alpn[] = {"http/1.1"};

static const struct outbound_proto_ops protos[] = {
    [OUTBOUND_SOCKS5] = {.tls = never, .start = start_socks5},
    [OUTBOUND_HTTP] = {.tls = proxy_tls, .alpn = h1_alpn, .nalpn = 1, .start = start_http},
    [OUTBOUND_SHADOWSOCKS] = {.tls = never, .start = start_ss},
    [OUTBOUND_TROJAN] = {.tls = always, .start = start_trojan},
};

void
outbound_transport_kind(const struct outbound_proxy *p, int *tls, const char *const **alpn,
                        size_t *nalpn)
{
    const struct outbound_proto_ops *proto = &protos[p->type];

    *tls = proto->tls(p);
    *alpn = proto->alpn;
    *nalpn = proto->nalpn;
}

/* ---- connecting --------------------------------------------------------- */

static void
on_transport(void *arg, struct io_stream *s, int err, const char *why)
{
    struct outbound_open *o = arg;

    o->tr = NULL;
    if (s == NULL) {
        fail(o, err, why);
        return;
    }
    o->t_transport = io_mono_now();
    o->state = O_HANDSHAKE;
    o->proto->start(o, s);
}

static void
on_direct(void *arg, int fd, int err, const char *why)
{
    struct outbound_open *o = arg;
    struct io_stream *s;

    o->oc = NULL;
    if (fd < 0) {
        fail(o, err, why);
        return;
    }
    if ((s = io_fd_new(o->env->loop, fd)) == NULL) {
        close(fd);
        fail(o, ENOMEM, "out of memory");
        return;
    }
    deliver_stream(o, s);
}

struct outbound_open *
outbound_open(const struct outbound_env *env, int policy, const struct flow_addr *dst,
              double timeout, outbound_open_cb cb, void *arg)
{
    struct outbound_open *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    o->env = env;
    o->cb = cb;
    o->arg = arg;
    o->dst = *dst;
    ev_timer_init(&o->timer, on_timeout, timeout, 0);
    ev_idle_init(&o->later, on_later);
    o->t0 = io_mono_now();
    o->policy = policy;
    if (env->set != NULL) {
        o->set = outbound_set_ref(env->set);
        o->policy = outbound_set_pick(o->set, policy, dst);
        o->p = outbound_set_proxy(o->set, o->policy);
        o->res.via = outbound_set_name(o->set, o->policy);
    } else {
        o->res.via = flow_policy_name(policy);
    }
    if (o->policy == FLOW_POLICY_REJECT || (o->policy >= FLOW_POLICY__BUILTIN && o->p == NULL)) {
        o->res.err = ECONNREFUSED;
        o->res.why = o->policy == FLOW_POLICY_REJECT ? "rejected by the group's choice"
                                                     : "no such proxy";
        ev_idle_start(env->loop, &o->later);
        return o;
    }
    ev_timer_start(env->loop, &o->timer);
    /* DIRECT bounds its own connect too; the proxy's handshakes share ours. */
    if (o->p == NULL) {
        o->oc = outbound_direct_connect(env, dst, timeout, on_direct, o);
    } else {
        o->proto = &protos[o->p->type];
        o->state = O_TRANSPORT;
        struct pool *pool = o->set != NULL ? outbound_set_pool(o->set, o->policy) : NULL;
        o->pooled = pool != NULL;
        o->tr = outbound_transport_open(env, o->p, pool, o->proto->tls(o->p), o->proto->alpn,
                                        o->proto->nalpn, timeout, on_transport, o);
    }
    if (o->oc == NULL && o->tr == NULL) {
        release(o);
        return NULL;
    }
    return o;
}

void
outbound_open_cancel(struct outbound_open *o)
{
    release(o);
}

struct outbound_open *
outbound_open_trojan_udp(const struct outbound_env *env, int policy, const struct flow_addr *dst,
                         double timeout, outbound_open_cb cb, void *arg)
{
    struct outbound_open *o = outbound_open(env, policy, dst, timeout, cb, arg);
    if (o != NULL)
        o->udp = 1; /* read when the transport is up, later than this */
    return o;
}

static uint64_t auth_failures; /* the loop thread's */

void
outbound_count_auth_failure(void)
{
    auth_failures++;
}

uint64_t
outbound_auth_failures(void)
{
    return auth_failures;
}
