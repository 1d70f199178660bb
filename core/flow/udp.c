#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/io.h"
#include "log/log.h"
#include "outbound/outbound.h"
#include "flow/flow.h"
#include "ip/tuple.h"
#include "flow/udp.h"
#include "ip/ip.h"
#include "tun/tun.h"

/* Replies read per wake-up before other work gets a turn. */
#define READ_BURST 64
/* Datagrams kept while the upstream opens (a name resolving). */
#define PENDING_MAX 8

struct held {
    struct held *next;
    size_t len;
    uint8_t data[];
};

struct entry {
    struct ip_tuple_node node; /* first: the table's node is the entry */
    struct flow flow;
    struct flow_udp_table *t;
    struct outbound_udp *u;/* NULL: refused (REJECT, or the upstream could not open) */
    struct held *held;     /* while opening (or resolving) */
    void *rq;              /* the name resolving for IP rules (flow_env.resolve) */
    unsigned nheld, ready : 1;
    ev_timer idle;
    double last;
    struct entry *prev, *next;
};

struct flow_udp_table {
    const struct flow_env *env; /* the engine's, injected */
    struct tun *tun;
    struct ip_tuple_table *h;
    struct entry all; /* sentinel */
    struct flow_udp_stats st;
    size_t cap;  /* entries at most (entry_cap) */
    int capped;  /* the cap was logged */
    uint8_t buf[65536];
};

#define CONTAINER(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

/* Each mapping holds a socket: past this many (half the descriptor limit,
 * 64..16384) the least recently used one goes, so a flood of 5-tuples
 * cannot take every descriptor and fail the TCP flows with it. */
#define MIN_ENTRIES 64
#define MAX_ENTRIES 16384

static size_t
entry_cap(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return MAX_ENTRIES;
    size_t cap = (size_t)rl.rlim_cur / 2;
    return cap < MIN_ENTRIES ? MIN_ENTRIES : cap > MAX_ENTRIES ? MAX_ENTRIES : cap;
}

/* Activity moves an entry to the tail: the head is the least recently used. */
static void
touch(struct entry *x, double now)
{
    struct entry *all = &x->t->all;
    x->last = now;
    if (x->next == all)
        return;
    x->prev->next = x->next;
    x->next->prev = x->prev;
    x->next = all;
    x->prev = all->prev;
    all->prev->next = x;
    all->prev = x;
}

static void
entry_free(struct entry *x, const char *reason)
{
    struct flow_udp_table *t = x->t;
    struct ev_loop *loop = t->env->loop;
    ev_timer_stop(loop, &x->idle);
    if (x->rq != NULL)
        t->env->resolve_cancel(t->env->ud, x->rq);
    outbound_udp_close(x->u);
    while (x->held != NULL) {
        struct held *h = x->held;
        x->held = h->next;
        free(h);
    }
    ip_tuple_remove(t->h, &x->node);
    flow_table_remove(t->env->flows, &x->flow, io_mono_now(), reason);
    x->prev->next = x->next;
    x->next->prev = x->prev;
    t->st.active--;
    free(x);
}

/* The upstream answered a datagram with ICMP port unreachable (the kernel
 * reports it on the connected socket): tell the client the same way, so it
 * fails at once instead of waiting for a reply. The quoted datagram is
 * rebuilt from the 5-tuple. */
static void
refused_upstream(struct entry *x)
{
    const struct ip_tuple *k = &x->node.key;
    uint8_t orig[48] = {0};
    size_t ihl = k->version == 4 ? 20 : 40;
    if (k->version == 4) {
        orig[0] = 0x45;
        orig[3] = 28;
        orig[8] = 64;
        orig[9] = IPPROTO_UDP;
        memcpy(orig + 12, k->src, 4);
        memcpy(orig + 16, k->dst, 4);
    } else {
        orig[0] = 0x60;
        orig[5] = 8;
        orig[6] = IPPROTO_UDP;
        orig[7] = 64;
        memcpy(orig + 8, k->src, 16);
        memcpy(orig + 24, k->dst, 16);
    }
    orig[ihl] = (uint8_t)(k->sport >> 8);
    orig[ihl + 1] = (uint8_t)k->sport;
    orig[ihl + 2] = (uint8_t)(k->dport >> 8);
    orig[ihl + 3] = (uint8_t)k->dport;
    orig[ihl + 5] = 8;
    struct ip_view v;
    if (ip_view_parse(&v, orig, ihl + 8) != IP_OK)
        return;
    uint8_t *slot = tun_wq_reserve(x->t->tun, 128);
    size_t len = slot ? ip_build_unreach(slot, 128, &v, 3, 4) : 0;
    if (len > 0)
        tun_wq_commit(x->t->tun, len);
}

/* Upstream replies become IP packets from the original destination back to
 * the client's port, queued for the next write-queue flush. */
static void
on_reply(void *arg)
{
    struct entry *x = arg;
    struct flow_udp_table *t = x->t;
    struct tun *tun = t->tun;
    const struct ip_tuple *k = &x->node.key;
    size_t hdr = k->version == 4 ? 28 : 48;
    for (int i = 0; i < READ_BURST; i++) {
        size_t off;
        ssize_t n = outbound_udp_recv(x->u, t->buf, sizeof(t->buf), &off);
        if (n < 0 && errno == ECONNREFUSED)
            refused_upstream(x);
        if (n < 0 && errno == ECONNRESET) { /* a stream-borne association ended */
            entry_free(x, "upstream closed");
            return;
        }
        if (n < 0 && (errno == EBADMSG || errno == EPROTO)) {
            if (errno == EBADMSG)
                outbound_count_auth_failure(); /* forged or garbled: dropped, counted */
            t->st.dropped++;
            continue;
        }
        if (n < 0)
            break;
        touch(x, io_mono_now());
        uint8_t *slot = tun_wq_reserve(tun, hdr + (size_t)n);
        size_t len = slot ? ip_build_udp(slot, hdr + (size_t)n, k->version, k->dst, k->dport,
                                         k->src, k->sport, t->buf + off, (size_t)n)
                          : 0;
        if (len == 0) {
            t->st.dropped++; /* larger than the TUN's MTU */
            continue;
        }
        tun_wq_commit(tun, len);
        x->flow.bytes_down += (uint64_t)n;
    }
}

static void
on_idle(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct entry *x = w->data;
    double left = x->last + x->t->env->opts->udp_timeout - io_mono_now();
    if (left <= 0) {
        entry_free(x, "idle");
        return;
    }
    w->repeat = left;
    ev_timer_again(loop, w);
}

static int send_up(struct entry *x, const uint8_t *p, size_t len);

/* The upstream is open: what came meanwhile goes first. */
static void
on_ready(void *arg, struct outbound_udp *u, const char *why)
{
    struct entry *x = arg;
    if (u == NULL) {
        char dst[300];
        flow_addr_format(&x->flow.dst, dst, sizeof(dst));
        LOG_INFO("flow %llu: udp %s: %s", (unsigned long long)x->flow.id, dst, why);
        /* The open freed |u|. The entry goes too, so the flow's next
         * datagram tries again (a proxy that was down may be back); while an
         * open is pending, datagrams wait in it instead. */
        x->u = NULL;
        x->t->st.dropped += x->nheld;
        entry_free(x, "connect failed");
        return;
    } else {
        x->ready = 1;
        if (x->flow.policy >= FLOW_POLICY__BUILTIN)
            x->flow.via = outbound_udp_via(u);
        outbound_udp_watch(u, on_reply, x);
    }
    while (x->held != NULL) {
        struct held *h = x->held;
        x->held = h->next;
        x->nheld--;
        int gone = 0;
        if (x->ready)
            gone = send_up(x, h->data, h->len) < 0;
        else
            x->t->st.dropped++;
        free(h);
        if (gone)
            return;
    }
}

/* Keeps a datagram that came while the upstream opens. */
static void
hold(struct entry *x, const uint8_t *p, size_t len)
{
    struct held *h = x->nheld < PENDING_MAX ? malloc(sizeof(*h) + len) : NULL;
    if (h == NULL) {
        x->t->st.dropped++;
        return;
    }
    h->len = len;
    memcpy(h->data, p, len);
    struct held **tail = &x->held;
    while (*tail != NULL)
        tail = &(*tail)->next;
    h->next = NULL;
    *tail = h;
    x->nheld++;
}

/* Returns -1 when the entry was freed. */
static int
send_up(struct entry *x, const uint8_t *p, size_t len)
{
    ssize_t n = outbound_udp_send(x->u, p, len);
    if (n < 0 && errno == ECONNRESET) {
        /* The proxy ended the association: the caller may start a new one. */
        entry_free(x, "upstream closed");
        return -1;
    }
    if (n < 0) {
        x->t->st.dropped++; /* EAGAIN or an ICMP error on the socket: UDP may lose */
        return 0;
    }
    touch(x, io_mono_now());
    x->flow.bytes_up += (uint64_t)n;
    return 0;
}

/* The flow table's calls. */
static const char *
owner_state(const struct flow *f, void *arg)
{
    const struct entry *x = arg;
    return x->u == NULL ? "refused" : x->ready ? "relay" : "connecting";
}

static void
owner_close(struct flow *f, void *arg, const char *reason)
{
    entry_free(arg, reason);
}

static const struct flow_owner_ops owner = {.state = owner_state, .close = owner_close};

/* Opens the decided entry's upstream; a REJECT keeps the entry without
 * one, so the rest of its datagrams are refused at once. */
static void
open_up(struct entry *x)
{
    const struct flow_env *e = x->t->env;
    if (x->flow.policy != FLOW_POLICY_REJECT)
        x->u = outbound_udp_open(e->out, x->flow.policy, &x->flow.dst, on_ready, x);
    if (x->u != NULL)
        return;
    x->t->st.dropped += x->nheld;
    while (x->held != NULL) {
        struct held *h = x->held;
        x->held = h->next;
        free(h);
    }
    x->nheld = 0;
}

static void
on_resolved(void *arg)
{
    struct entry *x = arg;
    const struct flow_env *e = x->t->env;
    x->rq = NULL;
    e->decide(e->ud, &x->flow);
    open_up(x);
}

static struct entry *
entry_new(struct flow_udp_table *t, const struct ip_view *v, const struct ip_tuple *k,
          uint32_t hash)
{
    const struct flow_env *e = t->env;
    if (e->opts->udp_max != 0 && t->st.active >= e->opts->udp_max && t->st.active < t->cap) {
        flow_table_refused(e->flows, "UDP", e->opts->udp_max, io_mono_now());
        entry_free(t->all.next, "evicted");
    } else if (t->st.active >= t->cap) {
        if (!t->capped)
            LOG_WARN("udp: %zu mappings (the cap: half the descriptor limit); the least "
                     "recently used ones close for new ones", t->cap);
        t->capped = 1;
        entry_free(t->all.next, "evicted");
    }
    struct entry *x = calloc(1, sizeof(*x));
    if (x == NULL)
        return NULL;
    x->t = t;
    x->node.key = *k;
    x->flow.network = FLOW_UDP;
    x->flow.inbound = FLOW_IN_TUN;
    flow_sockaddr_set(&x->flow.src, v->version, v->src, v->sport);
    flow_sockaddr_set(&x->flow.local, v->version, v->dst, v->dport);
    x->flow.dst.kind = v->version == 4 ? FLOW_ADDR_IP4 : FLOW_ADDR_IP6;
    x->flow.dst.port = v->dport;
    memcpy(x->flow.dst.ip, v->dst, 16);
    ip_tuple_insert(t->h, &x->node, hash);
    x->next = &t->all;
    x->prev = t->all.prev;
    t->all.prev->next = x;
    t->all.prev = x;
    t->st.active++;
    t->st.total++;
    x->last = io_mono_now();
    flow_table_add(e->flows, &x->flow, x->last);
    flow_set_owner(&x->flow, &owner, x);
    ev_init(&x->idle, on_idle);
    x->idle.data = x;
    x->idle.repeat = e->opts->udp_timeout;
    ev_timer_again(e->loop, &x->idle);

    if (e->name(e->ud, &x->flow) != 0) {
        x->flow.policy = FLOW_POLICY_REJECT; /* a fake IP with no name behind it */
        x->flow.rule = "fake IP without a name";
        return x;
    }
    e->decide(e->ud, &x->flow);
    /* An IP rule needs the name's addresses: its datagrams wait (held) as
     * they do while the upstream opens, and it is decided again. */
    if ((x->flow._reads & FLOW_READ_RESOLVE) && x->flow._resolvable &&
        x->flow.resolved.state == FLOW_RESOLVE_NONE && e->resolve != NULL &&
        (x->rq = e->resolve(e->ud, &x->flow, on_resolved, x)) != NULL)
        return x;
    open_up(x);
    return x;
}

static void
refuse(struct flow_udp_table *t, const struct ip_view *v)
{
    size_t cap = v->version == 4 ? 576 : 1280;
    uint8_t *slot = tun_wq_reserve(t->tun, cap);
    size_t len = slot ? ip_build_unreach(slot, cap, v, 3, 4) : 0; /* port unreachable */
    if (len > 0)
        tun_wq_commit(t->tun, len);
    t->st.rejected++;
}

void
flow_udp_input(struct flow_udp_table *t, const struct ip_view *v)
{
    struct ip_tuple k = {.proto = IPPROTO_UDP, .version = v->version, .sport = v->sport,
                         .dport = v->dport};
    memcpy(k.src, v->src, 16);
    memcpy(k.dst, v->dst, 16);
    uint32_t hash = ip_tuple_hash(t->h, &k);
    /* A second round when the proxy ended the association: a new entry (and
     * association) carries this datagram. */
    for (int round = 0; round < 2; round++) {
        struct entry *x = (struct entry *)ip_tuple_lookup(t->h, &k, hash);
        if (x == NULL && (x = entry_new(t, v, &k, hash)) == NULL) {
            t->st.dropped++;
            return;
        }
        if (x->u == NULL && x->rq == NULL) {
            refuse(t, v);
            return;
        }
        if (!x->ready) {
            hold(x, v->payload, v->payload_len);
            return;
        }
        if (send_up(x, v->payload, v->payload_len) == 0)
            return;
    }
}

struct flow_udp_table *
flow_udp_new(const struct flow_env *env, struct tun *tun)
{
    struct flow_udp_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->h = ip_tuple_table_new();
    if (t->h == NULL) {
        free(t);
        return NULL;
    }
    t->env = env;
    t->tun = tun;
    t->cap = entry_cap();
    t->all.prev = t->all.next = &t->all;
    return t;
}

void
flow_udp_free(struct flow_udp_table *t)
{
    if (t == NULL)
        return;
    while (t->all.next != &t->all)
        entry_free(t->all.next, "shutdown");
    ip_tuple_table_free(t->h);
    free(t);
}

void
flow_udp_stats(const struct flow_udp_table *t, struct flow_udp_stats *out)
{
    *out = t->st;
}

const struct log_counter flow_udp_counters[] = {
#define X(field, key) LOG_COUNTER(struct flow_udp_stats, field, key)
    FLOW_UDP_STATS(X)
#undef X
    LOG_COUNTER_END};
