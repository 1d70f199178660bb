#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow/addr.h"
#include "outbound/transport.h"
#include "pool/pool.h"
#include "tls/tls.h"

/* A connection to a proxy's server, as a stream: TCP, then TLS when the
 * protocol runs inside it (Trojan, https proxies). What goes over it for a
 * destination is the protocol's business (open.c). With a pool the
 * connection comes from it (warm, or opened by it through this file's
 * plain path, set_pool.c). */

enum tstate { T_CONNECT, T_TLS, T_POOL };

struct outbound_transport {
    const struct outbound_env *env;
    const struct outbound_proxy *p;
    enum tstate state;
    int tls;
    const char *const *alpn;
    size_t nalpn;
    struct outbound_connect *oc;
    struct tls_handshake *th;
    struct pool_req *pr;
    outbound_transport_cb cb;
    void *arg;
};

static void
finish(struct outbound_transport *t, struct io_stream *s, int err, const char *why)
{
    outbound_transport_cb cb = t->cb;
    void *arg = t->arg;

    free(t);
    cb(arg, s, err, why);
}

static void
on_pooled(void *arg, struct io_stream *s, int err, const char *why)
{
    struct outbound_transport *t = arg;

    t->pr = NULL;
    finish(t, s, err, why);
}

static void
on_tls(void *arg, struct io_stream *s, int err, const char *why)
{
    struct outbound_transport *t = arg;

    t->th = NULL;
    finish(t, s, err, why);
}

/* A failed connection to a proxy's server: say so, or the log reads as if
 * the destination had refused ("connect example.com:443: Connection
 * refused" when it was the proxy). Static texts, as |why| must be. */
static const char *
connect_why(int err, const char *why)
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
start_tls(struct outbound_transport *t, struct io_stream *tcp)
{
    char host[FLOW_NAME_MAX + 1];
    const struct outbound_proxy *p = t->p;
    struct tls_ctx *anchors = p->anchors ? p->anchors : t->env->tls;

    if (anchors == NULL) {
        io_close(tcp, 0);
        finish(t, NULL, EPROTO, "tls: no trust store loaded");
        return;
    }
    flow_addr_host(&p->server, host, sizeof(host));
    struct tls_client_opts to = {
        .host = host,
        .sni = p->sni[0] ? p->sni : NULL,
        .port = p->server.port,
        .alpn = t->alpn,
        .nalpn = t->nalpn,
        .skip_verify = p->skip_cert_verify,
    };
    t->state = T_TLS;
    t->th = tls_client_start(anchors, tcp, &to, on_tls, t);
    if (t->th == NULL)
        finish(t, NULL, ENOMEM, "out of memory");
}

static void
on_connected(void *arg, int fd, int err, const char *why)
{
    struct outbound_transport *t = arg;
    struct io_stream *tcp;

    t->oc = NULL;
    if (fd < 0) {
        finish(t, NULL, err, connect_why(err, why));
        return;
    }
    if ((tcp = io_fd_new(t->env->loop, fd)) == NULL) {
        close(fd);
        finish(t, NULL, ENOMEM, "out of memory");
        return;
    }
    if (t->tls)
        start_tls(t, tcp);
    else
        finish(t, tcp, 0, NULL);
}

struct outbound_transport *
outbound_transport_open(const struct outbound_env *env, const struct outbound_proxy *p,
                        struct pool *pool, int tls, const char *const *alpn, size_t nalpn,
                        double timeout, outbound_transport_cb cb, void *arg)
{
    struct outbound_transport *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    *t = (struct outbound_transport){.env = env, .p = p, .state = T_CONNECT, .tls = tls,
                                     .alpn = alpn, .nalpn = nalpn, .cb = cb, .arg = arg};
    if (pool != NULL) {
        t->state = T_POOL;
        t->pr = pool_acquire(pool, on_pooled, t);
        if (t->pr == NULL) {
            free(t);
            return NULL;
        }
        return t;
    }
    t->oc = outbound_direct_connect(env, &p->server, timeout, on_connected, t);
    if (t->oc == NULL) {
        free(t);
        return NULL;
    }
    return t;
}

void
outbound_transport_cancel(struct outbound_transport *t)
{
    if (t->oc != NULL)
        outbound_connect_cancel(t->oc);
    if (t->th != NULL)
        tls_handshake_cancel(t->th);
    if (t->pr != NULL)
        pool_acquire_cancel(t->pr);
    free(t);
}

const char *
outbound_transport_timeout_why(const struct outbound_transport *t)
{
    if (t->state == T_POOL)
        return t->tls ? "proxy server: connect or tls handshake timeout"
                      : "proxy server: connect timeout";
    return t->state == T_CONNECT ? "proxy server: connect timeout" : "tls handshake timeout";
}
