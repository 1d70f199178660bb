#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/stats.h"

#include "log/log.h"
#include "flow/flow.h"
#include "flow/sniff.h"
#include "ip/ip.h"
#include "netstack/netstack_int.h"
#include "io/io.h"
#include "outbound/outbound.h"
#include "tun/tun.h"

/* One TUN TCP flow: the client's connection terminated in lwIP, relayed to
 * an upstream socket.
 *
 * The SYN is held until the upstream connects, then handed to lwIP, so a
 * refused or unreachable destination answers the client with a RST, as
 * sing-box and Surge do, and a connection lwIP accepts always has its
 * upstream.
 *
 * Back-pressure: client bytes leave lwIP's window (tcp_recved) only as the
 * upstream socket accepts them; upstream reads stop while lwIP's send
 * buffer is full and go on from the sent callback. Above the heap cap every
 * connection stops reading upstream and holds back window updates until the
 * heap drains (netstack_poll resumes them). */

/* A flow whose route() asked for the host it does not have takes the sniff
 * path instead: C_SNIFF_HS (lwIP answers the SYN, no upstream yet),
 * C_SNIFFING (accepted; the first client bytes are kept, unacknowledged,
 * until they name the host or FLOW_SNIFF_WAIT passes), then route() again with
 * flow.host set, and C_SNIFF_CONNECT while the upstream connects. */
enum cstate { C_CONNECTING, C_HANDSHAKE, C_OPEN, C_SNIFF_HS, C_SNIFFING, C_SNIFF_CONNECT };


#define SYN_MAX 128 /* IPv6 header + TCP header with every option */
#define IOV_MAX_PBUFS 32

struct conn {
    struct ip_tuple_node node; /* first: the tuple table's node is the conn */
    struct flow flow;
    enum cstate state;
    struct tcp_pcb *pcb;
    ev_timer hs_timer;     /* the handshake (or the sniff wait) is not done */
    struct outbound_open *oc;
    struct io_stream *us;  /* the upstream, once connected */
    struct pbuf *rx;       /* client bytes the upstream has not taken yet */
    uint32_t owed;         /* bytes taken upstream whose window update waits */
    char *stash;           /* upstream bytes lwIP could not queue */
    size_t stash_len;
    unsigned client_eof : 1, up_shut : 1, up_eof : 1, fin_sent : 1;
    unsigned paused_snd : 1, paused_mem : 1, wblocked : 1;
    double last;
    struct conn *prev, *next; /* every conn, for shutdown and memory resume */
    struct conn *dprev, *dnext; /* on the dirty list: client bytes to flush */
    uint16_t syn_len;
    uint8_t syn[SYN_MAX];
};

static struct conn all = {.prev = &all, .next = &all};
/* Conns that received client bytes during this batch: flushed upstream once
 * per batch, so a 64-packet batch costs one writev, not 64. */
static struct conn dirty = {.dprev = &dirty, .dnext = &dirty};
static uint8_t scratch[65536];

static const struct flow_env *
env(void)
{
    return netstack.env;
}

static double
now(void)
{
    return ev_now(env()->loop);
}

static void
detach_pcb(struct conn *c)
{
    if (c->pcb == NULL)
        return;
    tcp_arg(c->pcb, NULL);
    tcp_recv(c->pcb, NULL);
    tcp_sent(c->pcb, NULL);
    tcp_err(c->pcb, NULL);
    tcp_poll(c->pcb, NULL, 0);
}

/* What the relay steps return: the conn lives on, or was freed with its pcb
 * closed (lwIP goes on with it) or aborted (an lwIP callback must then
 * return ERR_ABRT). */
#define LIVE 0
#define FREED (-1)
#define ABORTED (-2)

static err_t
cb_result(int r)
{
    return r == ABORTED ? ERR_ABRT : ERR_OK;
}

/* Frees |c|. With |reset| the client gets a RST (tcp_abort) and the
 * upstream too; otherwise lwIP finishes sending what is queued and closes. */
static int
conn_free(struct conn *c, const char *reason, int reset)
{
    const struct flow_env *e = env();
    int rc = FREED;
    if (c->oc != NULL)
        outbound_open_cancel(c->oc);
    if (c->us != NULL)
        io_close(c->us, reset);
    if (c->pcb != NULL) {
        detach_pcb(c);
        if (reset || tcp_close(c->pcb) != ERR_OK) {
            tcp_abort(c->pcb);
            rc = ABORTED;
        }
    }
    ev_timer_stop(e->loop, &c->hs_timer);
    if (c->rx != NULL)
        pbuf_free(c->rx);
    free(c->stash);
    if (c->dnext != NULL) {
        c->dprev->dnext = c->dnext;
        c->dnext->dprev = c->dprev;
    }
    ip_tuple_remove(netstack.tuples, &c->node);
    flow_table_remove(e->flows, &c->flow, now(), reason);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    netstack.st.conns_active--;
    free(c);
    return rc;
}

static void
note_heap(void)
{
    if (!netstack.mem_high && lwip_stats.mem.used > NETSTACK_MEM_HIGH) {
        netstack.mem_high = 1;
        netstack.st.mem_pauses++;
    }
}

/* Reopens the client's window for bytes the upstream took, unless the heap
 * is over its cap: then the update waits, and so does the client. */
static void
ack_window(struct conn *c, size_t n)
{
    c->owed += (uint32_t)n;
    note_heap();
    if (netstack.mem_high) {
        c->paused_mem = 1;
        return;
    }
    while (c->owed > 0 && c->pcb != NULL) {
        u16_t k = c->owed > 0xFFFF ? 0xFFFF : (u16_t)c->owed;
        tcp_recved(c->pcb, k);
        c->owed -= k;
    }
}

static int maybe_close(struct conn *c);

/* An upstream error: an encrypted upstream that failed authentication (a
 * bad tag: wrong password, corrupted or forged bytes) is named and counted,
 * and both sides are reset. */
static int
conn_up_error(struct conn *c, const char *what)
{
    if (errno == EBADMSG) {
        outbound_count_auth_failure();
        return conn_free(c, "upstream authentication failed", 1);
    }
    return conn_free(c, what, 1);
}

/* Client -> upstream. */
static int
flush_rx(struct conn *c)
{
    while (c->rx != NULL) {
        struct iovec iov[IOV_MAX_PBUFS];
        int n = 0;
        for (struct pbuf *q = c->rx; q != NULL && n < IOV_MAX_PBUFS; q = q->next) {
            if (q->len == 0)
                continue;
            iov[n].iov_base = q->payload;
            iov[n].iov_len = q->len;
            n++;
        }
        ssize_t w = n ? io_writev(c->us, iov, n) : 0;
        if (w < 0 && errno == EAGAIN) {
            c->wblocked = 1; /* the stream calls on_drain */
            return LIVE;
        }
        if (w < 0)
            return conn_up_error(c, "upstream write failed");
        c->flow.bytes_up += (uint64_t)w;
        c->last = now();
        for (size_t left = (size_t)w; left > 0;) {
            u16_t k = left > 0xFFFF ? 0xFFFF : (u16_t)left;
            c->rx = pbuf_free_header(c->rx, k);
            left -= k;
        }
        ack_window(c, (size_t)w);
        if (n == 0)
            break;
    }
    c->wblocked = 0;
    if (c->client_eof && !c->up_shut) {
        io_shutdown(c->us);
        c->up_shut = 1;
    }
    return maybe_close(c);
}

/* Both directions have ended: lwIP sends what it still holds, then FIN. */
static int
maybe_close(struct conn *c)
{
    if (c->up_shut && c->fin_sent)
        return conn_free(c, "done", 0);
    return LIVE;
}

static int
queue_stash(struct conn *c)
{
    if (c->stash_len == 0)
        return 0;
    if (tcp_write(c->pcb, c->stash, (u16_t)c->stash_len, TCP_WRITE_FLAG_COPY) != ERR_OK)
        return -1;
    free(c->stash);
    c->stash = NULL;
    c->stash_len = 0;
    return 0;
}

/* Upstream -> client, as far as lwIP's send buffer and the heap allow. */
static int
pump_tx(struct conn *c)
{
    int wrote = 0;
    if (queue_stash(c) != 0)
        goto pause;
    while (!c->up_eof) {
        note_heap();
        if (netstack.mem_high) {
            c->paused_mem = 1;
            io_read_stop(c->us);
            break;
        }
        size_t space = tcp_sndbuf(c->pcb);
        if (tcp_sndqueuelen(c->pcb) + 4 >= TCP_SND_QUEUELEN || space == 0)
            goto pause;
        if (space > sizeof(scratch))
            space = sizeof(scratch);
        ssize_t n = io_read(c->us, scratch, space);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n < 0)
            return conn_up_error(c, "reset by upstream");
        if (n == 0) {
            c->up_eof = 1;
            io_read_stop(c->us);
            break;
        }
        c->last = now();
        wrote = 1;
        /* Counted as queued to the client, as the socket relays count bytes
         * handed to the kernel: a flow closed with bytes in flight still
         * shows what it carried. */
        c->flow.bytes_down += (uint64_t)n;
        if (tcp_write(c->pcb, scratch, (u16_t)n, TCP_WRITE_FLAG_COPY) != ERR_OK) {
            /* The queue is full rather than the buffer (lwip.md §6.2): keep
             * the bytes and go on from the sent callback. */
            c->stash = malloc((size_t)n);
            if (c->stash == NULL)
                return conn_free(c, "out of memory", 1);
            memcpy(c->stash, scratch, (size_t)n);
            c->stash_len = (size_t)n;
            goto pause;
        }
    }
    if (c->up_eof && c->stash_len == 0 && !c->fin_sent) {
        tcp_shutdown(c->pcb, 0, 1);
        c->fin_sent = 1;
    }
    if (wrote || c->fin_sent)
        tcp_output(c->pcb);
    return maybe_close(c);
pause:
    c->paused_snd = 1;
    io_read_stop(c->us);
    if (wrote)
        tcp_output(c->pcb);
    return LIVE;
}

static void
on_up_readable(void *arg)
{
    pump_tx(arg);
}

static int sniff_step(struct conn *c);

static err_t
on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
    struct conn *c = arg;
    if (c->state == C_SNIFFING || c->state == C_SNIFF_CONNECT) {
        if (p == NULL)
            c->client_eof = 1;
        else if (c->rx == NULL)
            c->rx = p;
        else
            pbuf_cat(c->rx, p);
        return c->state == C_SNIFFING ? cb_result(sniff_step(c)) : ERR_OK;
    }
    if (p == NULL) {
        c->client_eof = 1;
    } else if (c->rx == NULL) {
        c->rx = p;
    } else {
        pbuf_cat(c->rx, p);
    }
    if (c->dnext == NULL && !c->wblocked) { /* else the upstream is full: wait */
        c->dnext = &dirty;
        c->dprev = dirty.dprev;
        dirty.dprev->dnext = c;
        dirty.dprev = c;
    }
    return ERR_OK;
}

void
netstack_flush(void)
{
    while (dirty.dnext != &dirty) {
        struct conn *c = dirty.dnext;
        dirty.dnext = c->dnext;
        c->dnext->dprev = &dirty;
        c->dnext = c->dprev = NULL;
        flush_rx(c);
    }
}

static err_t
on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
    struct conn *c = arg;
    c->last = now();
    if (c->paused_snd && !c->paused_mem) {
        c->paused_snd = 0;
        if (!c->up_eof)
            io_read_start(c->us); /* bytes a stream holds come from the loop */
        if (c->stash_len > 0)
            return cb_result(pump_tx(c));
    }
    return ERR_OK;
}

static void
on_err(void *arg, err_t err)
{
    struct conn *c = arg;
    c->pcb = NULL; /* lwIP has freed it already */
    conn_free(c, err == ERR_RST ? "reset by client" : "aborted", 1);
}

static err_t
on_poll(void *arg, struct tcp_pcb *pcb)
{
    struct conn *c = arg;
    if (now() - c->last > env()->opts->idle_timeout)
        return cb_result(conn_free(c, "idle", 0));
    return ERR_OK;
}

void
netstack_conn_resume_all(void)
{
    for (struct conn *c = all.next, *next; c != &all; c = next) {
        next = c->next;
        if (!c->paused_mem || c->state != C_OPEN)
            continue;
        c->paused_mem = 0;
        ack_window(c, 0);
        if (netstack.mem_high)
            return;
        if (!c->paused_snd && !c->up_eof)
            io_read_start(c->us);
    }
}

void
netstack_conn_abort_all(void)
{
    while (all.next != &all)
        conn_free(all.next, "shutdown", 1);
}

/* With offload, lwIP may send 64 KiB segments: raise the SYN's MSS option
 * (when it is what the TUN's MTU gives: the client is local) so lwIP's
 * effective MSS becomes its netif's 65535 - headers. lwIP checks no input
 * checksum, so the option is changed in place. */
static void
raise_mss(struct conn *c, const struct ip_view *v)
{
    size_t thl = (size_t)(v->l4[12] >> 4) * 4;
    uint8_t *opt = c->syn + (v->l4 - c->syn) + 20, *end = c->syn + (v->l4 - c->syn) + thl;
    unsigned tun_mss = (unsigned)tun_mtu(netstack.tun) - (v->version == 4 ? 40 : 60);
    while (opt < end && *opt != 0) {
        if (*opt == 1) {
            opt++;
            continue;
        }
        if (opt + 1 >= end || opt[1] < 2 || opt + opt[1] > end)
            return;
        if (opt[0] == 2 && opt[1] == 4) {
            if ((unsigned)(opt[2] << 8 | opt[3]) >= tun_mss)
                opt[2] = opt[3] = 0xff;
            return;
        }
        opt += opt[1];
    }
}

/* A client may reuse a 4-tuple whose earlier connection lwIP still holds in
 * TIME_WAIT (the server closed first, so the client kept no TIME_WAIT of
 * its own and Linux hands the port out again). lwIP matches TIME_WAIT pcbs
 * before listeners and never accepts such a SYN; a new SYN means the old
 * connection is over, so it goes, as Linux's own TIME_WAIT reuse does. */
static void
drop_time_wait(const struct ip_view *v)
{
    for (struct tcp_pcb *p = tcp_tw_pcbs, *next; p != NULL; p = next) {
        next = p->next;
        if (p->local_port != v->dport || p->remote_port != v->sport ||
            IP_IS_V6(&p->local_ip) != (v->version == 6))
            continue;
        int same = v->version == 4
                       ? memcmp(&ip_2_ip4(&p->local_ip)->addr, v->dst, 4) == 0 &&
                             memcmp(&ip_2_ip4(&p->remote_ip)->addr, v->src, 4) == 0
                       : memcmp(ip_2_ip6(&p->local_ip)->addr, v->dst, 16) == 0 &&
                             memcmp(ip_2_ip6(&p->remote_ip)->addr, v->src, 16) == 0;
        if (same) {
            tcp_abort(p); /* a TIME_WAIT pcb is freed without a RST */
            netstack.st.tw_reused++;
        }
    }
}

static void
inject_syn(struct conn *c)
{
    struct ip_view v;
    if (ip_view_parse(&v, c->syn, c->syn_len) != IP_OK)
        return;
    drop_time_wait(&v);
    if (tun_offload(netstack.tun))
        raise_mss(c, &v);
    netstack_inject(c->syn, c->syn_len, &v);
}

static int sniff_decide(struct conn *c, const char *name);

static void
on_handshake_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct conn *c = w->data;
    if (c->state == C_SNIFFING)
        sniff_decide(c, NULL); /* no name in time: decide without one */
    else
        conn_free(c, "handshake timeout", 1);
}

static void
on_up_drain(void *arg)
{
    struct conn *c = arg;
    if (c->wblocked)
        flush_rx(c);
}

/* Takes the upstream the open delivered; 0, or -1 out of memory. */
static int
take_upstream(struct conn *c, const struct outbound_result *r)
{
    c->us = r->stream;
    io_set_callbacks(c->us, on_up_readable, on_up_drain, c);
    if (r->via != NULL && c->flow.policy >= FLOW_POLICY__BUILTIN)
        c->flow.via = r->via;
    if (r->extra_len > 0) { /* the destination spoke first, inside the proxy's reply */
        c->stash = malloc(r->extra_len);
        if (c->stash == NULL)
            return -1;
        memcpy(c->stash, r->extra, r->extra_len);
        c->stash_len = r->extra_len;
        c->flow.bytes_down += r->extra_len;
    }
    return 0;
}

static void
on_connected(void *arg, const struct outbound_result *r)
{
    struct conn *c = arg;
    c->oc = NULL;
    if (c->state == C_SNIFF_CONNECT) {
        if (r->err != 0) {
            flow_log_connect_failed(&c->flow, r->why);
            conn_free(c, "connect failed", 1); /* the client was accepted: it gets a RST */
            return;
        }
        if (take_upstream(c, r) != 0) {
            conn_free(c, "out of memory", 1);
            return;
        }
        c->state = C_OPEN;
        io_read_start(c->us);
        /* The bytes kept while sniffing go first; a proxy's early bytes follow. */
        if (flush_rx(c) == LIVE && c->stash_len > 0)
            pump_tx(c);
        return;
    }
    if (r->err != 0) {
        struct ip_view v;
        flow_log_connect_failed(&c->flow, r->why);
        if (ip_view_parse(&v, c->syn, c->syn_len) == IP_OK)
            netstack_send_rst(&v);
        conn_free(c, "connect failed", 0);
        return;
    }
    if (take_upstream(c, r) != 0) {
        conn_free(c, "out of memory", 0);
        return;
    }
    c->state = C_HANDSHAKE;
    ev_timer_set(&c->hs_timer, env()->opts->connect_timeout, 0);
    ev_timer_start(env()->loop, &c->hs_timer);
    inject_syn(c); /* lwIP answers SYN-ACK; accept follows the client's ACK */
}


/* Routes the sniffed flow again, now with its host (or without, if none
 * came), and connects upstream; REJECT resets the client. */
static int
sniff_decide(struct conn *c, const char *name)
{
    const struct flow_env *e = env();
    ev_timer_stop(e->loop, &c->hs_timer);
    if (name != NULL) {
        c->flow.sniffed = strdup(name);
        netstack.st.sniffed++;
    }
    c->flow._sniffable = 0;
    e->decide(e->ud, &c->flow);
    if (c->flow.policy == FLOW_POLICY_REJECT)
        return conn_free(c, "rejected", 1);
    c->state = C_SNIFF_CONNECT;
    c->oc = outbound_open(e->out, c->flow.policy, &c->flow.dst,
                          e->opts->connect_timeout, on_connected, c);
    if (c->oc == NULL)
        return conn_free(c, "out of memory", 1);
    return LIVE;
}

/* Looks for a name in what the client sent so far (kept in c->rx). */
static int
sniff_step(struct conn *c)
{
    static uint8_t buf[FLOW_SNIFF_MAX]; /* copied out of the pbuf chain for the step only */
    char name[256];
    size_t n = c->rx ? pbuf_copy_partial(c->rx, buf, FLOW_SNIFF_MAX, 0) : 0;
    if (!flow_sniff_step(buf, n, c->client_eof, name, sizeof(name)))
        return LIVE;
    return sniff_decide(c, name[0] ? name : NULL);
}

void
netstack_conn_syn(const struct ip_view *v, const struct ip_tuple *k, uint32_t hash,
                  struct ip_tuple_node *existing)
{
    const struct flow_env *e = env();
    if (existing != NULL) {
        struct conn *old = (struct conn *)existing;
        if (old->state == C_CONNECTING || old->state == C_SNIFF_CONNECT)
            netstack.st.syn_dups++; /* the client retries while we connect */
        else
            netstack_inject(v->pkt, v->pkt_len, v);
        return;
    }
    if (v->pkt_len > SYN_MAX) {
        netstack.st.syn_dropped++; /* a SYN carrying data (TFO): the client retries without it */
        return;
    }
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->node.key = *k;
    c->syn_len = v->pkt_len;
    memcpy(c->syn, v->pkt, v->pkt_len);
    ev_timer_init(&c->hs_timer, on_handshake_timeout, 0, 0);
    c->hs_timer.data = c;
    c->flow.network = FLOW_TCP;
    c->flow.inbound = FLOW_IN_TUN;
    flow_sockaddr_set(&c->flow.src, v->version, v->src, v->sport);
    flow_sockaddr_set(&c->flow.local, v->version, v->dst, v->dport);
    c->flow.dst.kind = v->version == 4 ? FLOW_ADDR_IP4 : FLOW_ADDR_IP6;
    c->flow.dst.port = v->dport;
    memcpy(c->flow.dst.ip, v->dst, 16);
    ip_tuple_insert(netstack.tuples, &c->node, hash);
    c->next = &all;
    c->prev = all.prev;
    all.prev->next = c;
    all.prev = c;
    netstack.st.conns_active++;
    netstack.st.conns_total++;
    c->last = now();
    flow_table_add(e->flows, &c->flow, c->last);
    if (e->dns_tcp(e->ud, &c->flow)) { /* TCP/53: chute's DNS server answers */
        c->oc = outbound_open(e->local, FLOW_POLICY_DIRECT, &c->flow.dst,
                              e->opts->connect_timeout, on_connected, c);
        if (c->oc == NULL)
            conn_free(c, "out of memory", 0);
        return;
    }
    if (e->name(e->ud, &c->flow) != 0) {
        /* A fake IP whose name is gone (recycled, or from before a restart
         * without state): the client must resolve again. */
        netstack_send_rst(v);
        conn_free(c, "fake IP without a name", 0);
        return;
    }
    c->flow._sniffable = c->flow.dst.kind != FLOW_ADDR_NAME;
    e->decide(e->ud, &c->flow);
    if (c->flow._reads & FLOW_READ_HOST) {
        /* The decision waits for the host the script asked for. */
        c->state = C_SNIFF_HS;
        ev_timer_set(&c->hs_timer, e->opts->connect_timeout, 0);
        ev_timer_start(e->loop, &c->hs_timer);
        inject_syn(c);
        return;
    }
    if (c->flow.policy == FLOW_POLICY_REJECT) {
        netstack_send_rst(v);
        conn_free(c, "rejected", 0);
        return;
    }
    c->oc = outbound_open(e->out, c->flow.policy, &c->flow.dst,
                          e->opts->connect_timeout, on_connected, c);
    if (c->oc == NULL)
        conn_free(c, "out of memory", 0);
}

err_t
netstack_conn_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
    if (err != ERR_OK || pcb == NULL)
        return ERR_VAL;
    struct ip_tuple k = {.proto = IPPROTO_TCP, .sport = pcb->remote_port, .dport = pcb->local_port};
    if (IP_IS_V6(&pcb->local_ip)) {
        k.version = 6;
        memcpy(k.src, ip_2_ip6(&pcb->remote_ip)->addr, 16);
        memcpy(k.dst, ip_2_ip6(&pcb->local_ip)->addr, 16);
    } else {
        k.version = 4;
        memcpy(k.src, &ip_2_ip4(&pcb->remote_ip)->addr, 4);
        memcpy(k.dst, &ip_2_ip4(&pcb->local_ip)->addr, 4);
    }
    struct conn *c = (struct conn *)ip_tuple_lookup(netstack.tuples, &k,
                                                      ip_tuple_hash(netstack.tuples, &k));
    if (c == NULL || (c->state != C_HANDSHAKE && c->state != C_SNIFF_HS) || c->pcb != NULL) {
        tcp_abort(pcb); /* no flow behind it: never leave a pcb without an owner */
        return ERR_ABRT;
    }
    c->pcb = pcb;
    ev_timer_stop(env()->loop, &c->hs_timer);
    if (c->state == C_SNIFF_HS) {
        c->state = C_SNIFFING;
        tcp_arg(pcb, c);
        tcp_recv(pcb, on_recv);
        tcp_sent(pcb, on_sent);
        tcp_err(pcb, on_err);
        tcp_poll(pcb, on_poll, 4);
        tcp_nagle_disable(pcb);
        ev_timer_set(&c->hs_timer, FLOW_SNIFF_WAIT, 0);
        ev_timer_start(env()->loop, &c->hs_timer);
        return ERR_OK;
    }
    c->state = C_OPEN;
    tcp_arg(pcb, c);
    tcp_recv(pcb, on_recv);
    tcp_sent(pcb, on_sent);
    tcp_err(pcb, on_err);
    tcp_poll(pcb, on_poll, 4); /* every 2 s: the idle check */
    tcp_nagle_disable(pcb);    /* upstream bytes go out as they come */
    io_read_start(c->us);      /* bytes a stream already holds come from the loop */
    if (c->stash_len > 0)
        return cb_result(pump_tx(c)); /* a proxy's early bytes: lwIP may send them now */
    return ERR_OK;
}
