#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flow/flow.h"
#include "flow/relay.h"
#include "flow/session.h"
#include "flow/sniff.h"
#include "flow/tcp.h"
#include "io/io.h"
#include "ip/ip.h"
#include "log/log.h"
#include "netstack/netstack.h"

/* The states of one TUN TCP flow:
 *   T_OPENING       the SYN is held, the upstream opens
 *   T_HANDSHAKE     the upstream is open; lwIP answered the SYN
 *   T_SNIFF_HS      route() asked for the host: lwIP answered first
 *   T_SNIFFING      the first client bytes are looked at, unacknowledged
 *   T_SNIFF_OPENING decided again with the host; the upstream opens
 *   T_RELAY         the relay owns both streams */
enum tstate { T_OPENING, T_HANDSHAKE, T_SNIFF_HS, T_SNIFFING, T_SNIFF_OPENING, T_RELAY };

struct tcp_flow {
    struct flow flow;
    struct flow_tcp_table *t;
    enum tstate state;
    struct netstack_conn *nc;   /* until established (or gone) */
    struct io_stream *client;   /* once established */
    struct io_stream *up;       /* once open, until the relay takes it */
    struct flow_open *oc;
    uint8_t *extra;             /* the upstream's early bytes, for the client */
    size_t extra_len;
    ev_timer sniff_timer;
    struct flow_relay relay;
    struct tcp_flow *prev, *next;
};

struct flow_tcp_table {
    const struct flow_env *env;
    struct netstack_handler h;
    struct tcp_flow all; /* sentinel */
    size_t n;            /* flows in |all| */
};

/* Ends the flow: everything it still holds is closed (a reset when
 * |reset|), and its close line is logged with |reason|. */
static void
finish(struct tcp_flow *x, const char *reason, int reset)
{
    const struct flow_env *e = x->t->env;
    ev_timer_stop(e->loop, &x->sniff_timer);
    if (x->oc != NULL)
        flow_open_cancel(x->oc);
    if (x->state == T_RELAY && reset)
        flow_relay_abort(&x->relay); /* a no-op once the relay has closed */
    else if (x->state == T_RELAY)
        flow_relay_stop(&x->relay);
    if (x->nc != NULL)
        netstack_conn_refuse(x->nc, reset);
    if (x->client != NULL)
        io_close(x->client, reset);
    if (x->up != NULL)
        io_close(x->up, reset);
    free(x->extra);
    flow_table_remove(e->flows, &x->flow, io_mono_now(), reason);
    x->prev->next = x->next;
    x->next->prev = x->prev;
    x->t->n--;
    free(x);
}

static void
on_relay_done(struct flow_relay *r, void *arg, const char *reason)
{
    struct tcp_flow *x = arg;
    x->client = x->up = NULL; /* the relay closed both (it is not running now) */
    finish(x, reason, 0);
}

/* Both streams exist: the relay takes them. */
static void
relay(struct tcp_flow *x)
{
    struct flow_upstream u = {.stream = x->up, .extra = x->extra, .extra_len = x->extra_len};
    if (flow_relay_upstream(&x->relay, x->t->env, x->client, &u, NULL, 0, NULL, 0, &x->flow,
                            on_relay_done, x) != 0) {
        finish(x, "out of memory", 1);
        return;
    }
    free(x->extra);
    x->extra = NULL;
    x->client = x->up = NULL;
    x->state = T_RELAY;
}

/* What a server that speaks first sends before the client's handshake is
 * done waits in x->extra, up to this much (a banner's size: a SYN flood
 * toward such a server must not hold more per flow); the rest stays in
 * the socket. */
#define EARLY_MAX 2048

/* The upstream is read from the moment it opens, so its read watcher takes
 * the connect's epoll registration over (one change) instead of that being
 * dropped after a wasted wake-up and added again when the relay starts. */
static void
on_up_early(void *arg)
{
    struct tcp_flow *x = arg;
    uint8_t buf[EARLY_MAX];
    size_t room = x->extra_len < EARLY_MAX ? EARLY_MAX - x->extra_len : 0;
    ssize_t n = room > 0 ? io_read(x->up, buf, room) : 0;
    if (n < 0 && errno == EAGAIN)
        return;
    if (n < 0) {
        finish(x, "reset", 1);
        return;
    }
    if (n == 0) {
        io_read_stop(x->up); /* full, or the end: the relay reads it again */
        return;
    }
    uint8_t *p = realloc(x->extra, x->extra_len + (size_t)n);
    if (p == NULL) {
        finish(x, "out of memory", 1);
        return;
    }
    memcpy(p + x->extra_len, buf, (size_t)n);
    x->extra = p;
    x->extra_len += (size_t)n;
    LOG_DEBUG("flow %llu: the upstream spoke first: %zd bytes before the client's handshake "
              "ended (%zu held)", (unsigned long long)x->flow.id, n, x->extra_len);
}

static void
on_open(void *arg, const struct flow_upstream *r)
{
    struct tcp_flow *x = arg;
    const struct flow_env *e = x->t->env;
    x->oc = NULL;
    if (r->err != 0) {
        /* The held SYN, or the accepted client, gets a RST; ECANCELED is a
         * REJECT decided once the name resolved (session.h). */
        finish(x, r->err == ECANCELED ? "rejected" : "connect failed", 1);
        return;
    }
    x->up = r->stream;
    if (r->extra_len > 0) { /* the destination spoke first, inside the proxy's reply */
        if ((x->extra = malloc(r->extra_len)) == NULL) {
            finish(x, "out of memory", 1);
            return;
        }
        memcpy(x->extra, r->extra, r->extra_len);
        x->extra_len = r->extra_len;
    }
    if (x->state == T_SNIFF_OPENING) {
        relay(x); /* the bytes kept while sniffing go first */
        return;
    }
    x->state = T_HANDSHAKE;
    io_set_callbacks(x->up, on_up_early, NULL, x);
    io_read_start(x->up);
    netstack_conn_accept(x->nc, e->opts->connect_timeout);
}

static void
open_upstream(struct tcp_flow *x, int local)
{
    x->oc = flow_open(x->t->env, &x->flow, local, on_open, x);
    if (x->oc == NULL)
        finish(x, "out of memory", 1);
}

/* Decides the sniffed flow again, with its host (or without, if none
 * came), and opens the upstream; REJECT resets the client. */
static void
sniff_decide(struct tcp_flow *x, const char *name)
{
    const struct flow_env *e = x->t->env;
    ev_timer_stop(e->loop, &x->sniff_timer);
    io_read_stop(x->client);
    io_set_callbacks(x->client, NULL, NULL, NULL);
    if (name != NULL) {
        x->flow.sniffed = strdup(name);
        netstack_count_sniffed();
    }
    x->flow._sniffable = 0;
    e->decide(e->ud, &x->flow);
    if (x->flow.policy == FLOW_POLICY_REJECT) {
        finish(x, "rejected", 1);
        return;
    }
    x->state = T_SNIFF_OPENING;
    open_upstream(x, 0);
}

/* Looks for a name in what the client sent so far; the bytes stay in the
 * connection, unacknowledged, for the relay. */
static void
on_sniff_readable(void *arg)
{
    struct tcp_flow *x = arg;
    static uint8_t buf[FLOW_SNIFF_MAX]; /* copied out of the pbufs for the step only */
    struct iovec iov[32];
    char name[256];
    size_t n = 0;
    int k = io_peek(x->client, iov, 32), eof = k == 0;
    if (k < 0 && errno != EAGAIN) {
        finish(x, "reset by client", 1);
        return;
    }
    for (int i = 0; i < k && n < sizeof(buf); i++) {
        size_t l = iov[i].iov_len < sizeof(buf) - n ? iov[i].iov_len : sizeof(buf) - n;
        memcpy(buf + n, iov[i].iov_base, l);
        n += l;
    }
    if (flow_sniff_step(buf, n, eof, name, sizeof(name))) {
        flow_sniff_log(&x->flow, name[0] ? name : NULL, n, 0);
        sniff_decide(x, name[0] ? name : NULL);
    }
}

static void
on_sniff_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct tcp_flow *x = w->data;
    struct iovec iov[32];
    size_t n = 0;
    int k = log_threshold >= LOG_LEVEL_DEBUG ? io_peek(x->client, iov, 32) : 0;
    for (int i = 0; i < k; i++)
        n += iov[i].iov_len;
    flow_sniff_log(&x->flow, NULL, n, 1);
    sniff_decide(x, NULL); /* no name in time: decide without one */
}

/* ---- the flow table's calls --------------------------------------------- */

static const char *
owner_state(const struct flow *f, void *arg)
{
    static const char *const names[] = {"connecting", "handshake", "handshake", "sniffing",
                                        "connecting", "relay"};
    return names[((const struct tcp_flow *)arg)->state];
}

static void
owner_close(struct flow *f, void *arg, const char *reason)
{
    finish(arg, reason, 1);
}

static const struct flow_owner_ops owner = {.state = owner_state, .close = owner_close};

/* ---- netstack's calls --------------------------------------------------- */

static void
on_established(void *arg, struct io_stream *s)
{
    struct tcp_flow *x = arg;
    x->nc = NULL; /* the stream is the connection now */
    x->client = s;
    if (x->state == T_HANDSHAKE) {
        relay(x);
        return;
    }
    x->state = T_SNIFFING;
    io_set_callbacks(s, on_sniff_readable, NULL, x);
    io_read_start(s);
    ev_timer_set(&x->sniff_timer, FLOW_SNIFF_WAIT, 0);
    ev_timer_start(x->t->env->loop, &x->sniff_timer);
}

static void
on_gone(void *arg, const char *why)
{
    struct tcp_flow *x = arg;
    x->nc = NULL;
    finish(x, why, 1);
}

static void
on_syn(void *ud, struct netstack_conn *nc, const struct ip_view *v)
{
    struct flow_tcp_table *t = ud;
    const struct flow_env *e = t->env;
    if (e->opts->tcp_max != 0 && t->n >= e->opts->tcp_max) {
        netstack_conn_refuse(nc, 1); /* memory_limit: a RST, at once */
        flow_table_refused(e->flows, "TCP", e->opts->tcp_max, io_mono_now());
        return;
    }
    struct tcp_flow *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        netstack_conn_refuse(nc, 0); /* the client retries */
        return;
    }
    t->n++;
    x->t = t;
    x->nc = nc;
    netstack_conn_set_arg(nc, x);
    ev_timer_init(&x->sniff_timer, on_sniff_timeout, 0, 0);
    x->sniff_timer.data = x;
    x->flow.network = FLOW_TCP;
    x->flow.inbound = FLOW_IN_TUN;
    flow_sockaddr_set(&x->flow.src, v->version, v->src, v->sport);
    flow_sockaddr_set(&x->flow.local, v->version, v->dst, v->dport);
    x->flow.dst.kind = v->version == 4 ? FLOW_ADDR_IP4 : FLOW_ADDR_IP6;
    x->flow.dst.port = v->dport;
    memcpy(x->flow.dst.ip, v->dst, 16);
    x->next = &t->all;
    x->prev = t->all.prev;
    t->all.prev->next = x;
    t->all.prev = x;
    flow_table_add(e->flows, &x->flow, io_mono_now());
    flow_set_owner(&x->flow, &owner, x);
    if (e->dns_tcp(e->ud, &x->flow)) { /* TCP/53: chute's DNS server answers */
        open_upstream(x, 1);
        return;
    }
    if (e->name(e->ud, &x->flow) != 0) {
        /* A fake IP whose name is gone (recycled, or from before a restart
         * without state): the client must resolve again. */
        finish(x, "fake IP without a name", 1);
        return;
    }
    x->flow._sniffable = x->flow.dst.kind != FLOW_ADDR_NAME;
    e->decide(e->ud, &x->flow);
    if (x->flow._reads & FLOW_READ_HOST) {
        x->state = T_SNIFF_HS; /* the decision waits for the host the script asked for */
        netstack_conn_accept(nc, e->opts->connect_timeout);
        return;
    }
    if (x->flow.policy == FLOW_POLICY_REJECT) {
        finish(x, "rejected", 1);
        return;
    }
    open_upstream(x, 0);
}

struct flow_tcp_table *
flow_tcp_new(const struct flow_env *env)
{
    struct flow_tcp_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->env = env;
    t->h = (struct netstack_handler){.syn = on_syn, .established = on_established,
                                     .gone = on_gone, .ud = t};
    t->all.prev = t->all.next = &t->all;
    return t;
}

void
flow_tcp_free(struct flow_tcp_table *t)
{
    if (t == NULL)
        return;
    while (t->all.next != &t->all)
        finish(t->all.next, "shutdown", 1);
    free(t);
}

const struct netstack_handler *
flow_tcp_handler(const struct flow_tcp_table *t)
{
    return &t->h;
}
