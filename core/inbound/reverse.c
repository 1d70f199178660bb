#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flow/relay.h"
#include "flow/session.h"
#include "inbound/inbound.h"
#include "io/io.h"
#include "log/log.h"

/* A reverse-proxy listener: every connection is a flow to one fixed
 * origin, decided by route() like any other, and always intercepted: the
 * MITM terminates its TLS with a leaf for the origin's name and applies the
 * hooks (flow.mitm = 1; the intercept seam does the rest). */

struct conn {
    struct inbound_conn base;
    int fd;
    int relaying;
    struct flow flow;
    struct flow_open *oc;
    struct flow_relay relay;
};

static void
conn_free(struct conn *c, const char *reason)
{
    const struct flow_env *e = inbound_env(c->base._l);
    if (c->oc != NULL)
        flow_open_cancel(c->oc);
    if (c->relaying)
        flow_relay_abort(&c->relay);
    else if (c->fd >= 0)
        io_close_reset(c->fd);
    flow_table_remove(e->flows, &c->flow, io_mono_now(), reason);
    inbound_conn_unlink(&c->base);
    free(c);
}

static const char *
owner_state(const struct flow *f, void *arg)
{
    return ((const struct conn *)arg)->relaying ? "exchange" : "connecting";
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

static void
on_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct conn *c = arg;
    c->relaying = 0;
    c->fd = -1; /* closed by the relay (or the MITM) */
    conn_free(c, reason);
}

static void
on_connected(void *arg, const struct flow_upstream *u)
{
    struct conn *c = arg;
    const struct flow_env *e = inbound_env(c->base._l);
    c->oc = NULL;
    if (u->err != 0) {
        conn_free(c, "connect failed");
        return;
    }
    if (e->intercept == NULL)
        LOG_WARN("reverse %s: no MITM is configured (mitm = {...}): passed through as TCP",
                 c->flow.dst.name);
    if (inbound_relay_upstream(&c->relay, e, c->fd, u, NULL, 0, NULL, 0, &c->flow, on_done, c) !=
        0) {
        io_close(u->stream, 1);
        conn_free(c, "out of memory");
        return;
    }
    c->relaying = 1;
}

void
inbound_reverse_accept(struct inbound_listener *l, int fd, const struct sockaddr_storage *peer)
{
    const struct flow_env *e = inbound_env(l);
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->base._close = close_conn;
    inbound_flow_init(&c->flow, FLOW_IN_REVERSE, fd, peer);
    c->flow.dst = *inbound_target(l);
    inbound_conn_link(l, &c->base, peer);
    inbound_conn_ready(&c->base); /* no handshake of its own: TLS is the MITM's */
    flow_table_add(e->flows, &c->flow, io_mono_now());
    flow_set_owner(&c->flow, &owner, c);
    e->decide(e->ud, &c->flow);
    if (c->flow.policy == FLOW_POLICY_REJECT) {
        conn_free(c, "rejected");
        return;
    }
    c->flow.mitm = 1; /* whatever route() said: this listener exists to intercept */
    c->oc = flow_open(e, &c->flow, 0, on_connected, c);
    if (c->oc == NULL)
        conn_free(c, "out of memory");
}
