#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow/flow.h"
#include "outbound/outbound.h"
#include "outbound/proxy.h"
#include "outbound/set.h"
#include "outbound/stream.h"
#include "tls/tls.h"

/* outbound_open: a group picks its member, then DIRECT connects, or the
 * proxy's server is connected and its protocol spoken on top:
 *   socks5, http    handshake on a plain stream, then the bare socket back
 *   https proxy     TLS, then the CONNECT handshake inside it: a stream
 *   shadowsocks     a stream at once (the header rides the first bytes)
 *   trojan          TLS, then a stream that sends the header first
 * One timer bounds the whole open, the proxy's handshakes included. */

enum ostate { O_CONNECT, O_TLS, O_HANDSHAKE, O_DELIVER };

struct outbound_open {
    const struct outbound_env *env;
    struct outbound_set *set;      /* a reference while the open lasts */
    int policy;                    /* the concrete one: DIRECT, REJECT or a proxy */
    const struct outbound_proxy *p;
    struct flow_addr dst;
    enum ostate state;
    struct outbound_connect *oc;
    struct tls_handshake *th;
    struct outbound_hs *hs;
    struct outbound_stream *s;
    ev_timer timer;
    ev_idle later;                 /* results known inside outbound_open() */
    struct outbound_result res;
    int udp;                       /* Trojan: UDP ASSOCIATE instead of CONNECT */
    outbound_open_cb cb;
    void *arg;
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
    if (o->th != NULL)
        tls_handshake_cancel(o->th);
    if (o->hs != NULL)
        outbound_hs_cancel(o->hs);
    if (o->s != NULL)
        outbound_stream_close(o->s, 1);
}

static void
release(struct outbound_open *o)
{
    stop(o);
    if (o->set != NULL)
        outbound_set_unref(o->set);
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

static void
deliver(struct outbound_open *o)
{
    struct outbound_result r = o->res;
    outbound_open_cb cb = o->cb;
    void *arg = o->arg;
    struct outbound_set *set = o->set;
    if (set != NULL && o->p != NULL)
        outbound_set_report(set, o->policy, proxy_fault(o, r.err));
    /* What was handed over is no longer in |o|; the rest is cancelled. The
     * set outlives the callback: r.via points into it. */
    o->set = NULL;
    release(o);
    cb(arg, &r);
    if (set != NULL)
        outbound_set_unref(set);
}

static void
fail(struct outbound_open *o, int err, const char *why)
{
    o->res.fd = -1;
    o->res.stream = NULL;
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
    fail(o, ETIMEDOUT, o->state == O_CONNECT ? (o->p != NULL ? "proxy server: connect timeout"
                                                             : "connect timeout")
                       : o->state == O_TLS   ? "tls handshake timeout"
                                             : "proxy handshake timeout");
}

/* The handshake is over: a plain stream gives its socket back. */
static void
on_hs(void *arg, int err, const char *why, const uint8_t *extra, size_t extra_len)
{
    struct outbound_open *o = arg;
    o->hs = NULL;
    if (err != 0) {
        fail(o, err, why);
        return;
    }
    static uint8_t keep[16384]; /* extra is valid until deliver() returns */
    if (extra_len > sizeof(keep))
        extra_len = sizeof(keep);
    memcpy(keep, extra, extra_len);
    o->res.extra = keep;
    o->res.extra_len = extra_len;
    if (strcmp(o->s->ops->name, "plain") == 0) {
        int fd = outbound_plain_release(o->s);
        if (fd < 0) {
            fail(o, EIO, "proxy handshake left bytes unsent");
            return;
        }
        o->s = NULL;
        o->res.fd = fd;
        o->res.stream = NULL;
    } else {
        o->res.fd = -1;
        o->res.stream = o->s;
        o->s = NULL;
    }
    o->res.err = 0;
    deliver(o);
}

static void
start_hs(struct outbound_open *o)
{
    o->state = O_HANDSHAKE;
    if (o->p->type == OUTBOUND_SOCKS5)
        o->hs = outbound_socks5_connect(o->s, o->p, &o->dst, on_hs, o);
    else
        o->hs = outbound_http_connect(o->s, o->p, &o->dst, on_hs, o);
    if (o->hs == NULL)
        fail(o, ENOMEM, "out of memory");
}

static void
on_tls(void *arg, struct outbound_stream *s, int err, const char *why)
{
    struct outbound_open *o = arg;
    o->th = NULL;
    if (s == NULL) {
        fail(o, err, why);
        return;
    }
    if (o->p->type == OUTBOUND_TROJAN) {
        struct outbound_stream *t = o->udp ? outbound_trojan_udp_stream(s, o->p, &o->dst)
                                           : outbound_trojan_stream(s, o->p, &o->dst);
        if (t == NULL) {
            outbound_stream_close(s, 1);
            fail(o, ENOMEM, "out of memory");
            return;
        }
        o->res.fd = -1;
        o->res.stream = t;
        o->res.err = 0;
        deliver(o);
        return;
    }
    o->s = s; /* an https proxy: CONNECT inside the TLS stream */
    start_hs(o);
}

static void
start_tls(struct outbound_open *o, int fd)
{
    char host[FLOW_NAME_MAX + 1];
    flow_addr_host(&o->p->server, host, sizeof(host));
    static const char *const h1[] = {"http/1.1"};
    struct tls_client_opts to = {
        .host = host,
        .sni = o->p->sni[0] ? o->p->sni : NULL,
        .port = o->p->server.port,
        .alpn = o->p->type == OUTBOUND_HTTP ? h1 : NULL,
        .nalpn = o->p->type == OUTBOUND_HTTP ? 1 : 0,
        .skip_verify = o->p->skip_cert_verify,
    };
    struct tls_ctx *anchors = o->p->anchors ? o->p->anchors : o->env->tls;
    if (anchors == NULL) {
        close(fd);
        fail(o, EPROTO, "tls: no trust store loaded");
        return;
    }
    o->state = O_TLS;
    o->th = tls_client_start(anchors, o->env->loop, fd, &to, on_tls, o);
    if (o->th == NULL)
        fail(o, ENOMEM, "out of memory");
}

/* A failed connection to a proxy's server: say so, or the log reads as if
 * the destination had refused ("connect example.com:443: Connection
 * refused" when it was the proxy). Static texts, as |why| must be. */
static const char *
proxy_connect_why(int err, const char *why)
{
    switch (err) {
    case ECONNREFUSED:
        return "proxy server refused the connection";
    case ETIMEDOUT:
        return "proxy server: connect timeout";
    case EHOSTUNREACH:
    case ENETUNREACH:
        return "proxy server unreachable";
    case ECONNRESET:
        return "proxy server reset the connection";
    default:
        return why != NULL && strstr(why, "name") != NULL ? "proxy server: name not resolved"
                                                         : "connection to the proxy server failed";
    }
}

static void
on_connected(void *arg, int fd, int err, const char *why)
{
    struct outbound_open *o = arg;
    o->oc = NULL;
    if (fd < 0) {
        fail(o, err, o->p != NULL ? proxy_connect_why(err, why) : why);
        return;
    }
    if (o->p == NULL) { /* DIRECT */
        o->res.fd = fd;
        o->res.err = 0;
        deliver(o);
        return;
    }
    switch (o->p->type) {
    case OUTBOUND_SHADOWSOCKS:
        o->res.stream = outbound_ss_stream(o->env->loop, fd, o->p, &o->dst);
        o->res.fd = -1;
        if (o->res.stream == NULL) {
            fail(o, ENOMEM, "out of memory");
            return;
        }
        o->res.err = 0;
        deliver(o);
        return;
    case OUTBOUND_TROJAN:
        start_tls(o, fd);
        return;
    case OUTBOUND_HTTP:
        if (o->p->tls) {
            start_tls(o, fd);
            return;
        }
        /* fall through */
    case OUTBOUND_SOCKS5:
        o->s = outbound_plain_new(o->env->loop, fd);
        if (o->s == NULL) {
            close(fd);
            fail(o, ENOMEM, "out of memory");
            return;
        }
        start_hs(o);
        return;
    }
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
    o->res.fd = -1;
    ev_timer_init(&o->timer, on_timeout, timeout, 0);
    ev_idle_init(&o->later, on_later);
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
    o->oc = outbound_direct_connect(env, o->p ? &o->p->server : dst, timeout, on_connected, o);
    if (o->oc == NULL) {
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
        o->udp = 1; /* read when the TLS handshake ends, later than this */
    return o;
}

void
outbound_result_close(const struct outbound_result *r, int reset)
{
    if (r->stream != NULL)
        outbound_stream_close(r->stream, reset);
    else if (r->fd >= 0 && reset)
        outbound_close_reset(r->fd);
    else if (r->fd >= 0)
        close(r->fd);
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
