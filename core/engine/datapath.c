#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "log/log.h"
#include "flow/tcp.h"
#include "flow/udp.h"
#include "ip/ip.h"
#include "netstack/netstack.h"
#include "script/script.h"
#include "tun/tun.h"

/* The TUN path (DESIGN.md "The data path"): on readable, drain a batch of
 * packets, hand each to lwIP (TCP), the UDP NAT or the local ICMP echo,
 * run lwIP's timers, then flush the write queue once. Packets queued by
 * other events (upstream bytes, UDP replies) are flushed before the loop
 * sleeps, by the prepare watcher. */

static void
echo(struct engine *e, const struct ip_view *v)
{
    size_t cap = v->pkt_len;
    uint8_t *slot = tun_wq_reserve(e->tun, cap);
    size_t len = slot ? ip_build_echo_reply(slot, cap, v) : 0;
    if (len > 0) {
        tun_wq_commit(e->tun, len);
        e->dp.icmp_echo++;
    } else {
        e->dp.icmp_other++;
    }
}

/* Destinations no flow may have: unspecified, loopback, multicast and
 * broadcast. lwIP would answer from its own address, and a DIRECT socket
 * to 0.0.0.0 or :: reaches this host's own services. */
static int
bad_destination(const struct ip_view *v)
{
    static const uint8_t v6_any[16], v6_loop[16] = {[15] = 1};
    if (v->version == 4)
        return v->dst[0] == 0 || v->dst[0] == 127 || v->dst[0] >= 224;
    return v->dst[0] == 0xff || memcmp(v->dst, v6_any, 16) == 0 || memcmp(v->dst, v6_loop, 16) == 0;
}

static void
packet(struct engine *e, const uint8_t *p, size_t len)
{
    struct ip_view v;
    int rc = ip_view_parse(&v, p, len);
    if (rc != IP_OK) {
        e->dp.drops[-rc]++;
        return;
    }
    if ((v.proto == IPPROTO_TCP || v.proto == IPPROTO_UDP) && bad_destination(&v)) {
        e->dp.bad_dst++;
        return;
    }
    switch (v.proto) {
    case IPPROTO_TCP:
        netstack_tcp_input(&v);
        break;
    case IPPROTO_UDP:
        if (!engine_dns_udp(e, &v))
            flow_udp_input(e->udp, &v);
        break;
    default: /* ICMP, ICMPv6 */
        if ((v.version == 4 && v.icmp_type == 8) || (v.version == 6 && v.icmp_type == 128))
            echo(e, &v);
        else
            e->dp.icmp_other++;
    }
}

/* One batch from the device or the host's queue, whichever e->tun is. */
static int
batch(struct engine *e)
{
    struct tun_batch b;
    int n = tun_read_batch(e->tun, &b);
    for (int i = 0; i < n; i++)
        packet(e, b.data[i], b.len[i]);
    netstack_flush();
    netstack_poll();
    tun_wq_flush(e->tun);
    return n;
}

static void
on_tun(struct ev_loop *loop, ev_io *w, int revents)
{
    struct engine *e = w->data;
    if (batch(e) < 0) {
        LOG_ERROR("tun %s: read failed; stopping the TUN path", tun_name(e->tun));
        ev_io_stop(loop, w);
    }
}

/* The host's packets (host.c): its ev_async fired. One batch, as the
 * device's ev_io takes one per wakeup: the relays then write what it
 * brought before the next comes (a run of batches first grew each flow's
 * unsent chain to hundreds of pbufs: a third of the upload's CPU). What is
 * left wakes the loop again; from the loop thread that costs no syscall. */
void
engine_host_drain(struct engine *e)
{
    if (e->tun == NULL || e->tun != engine_host_tun(e))
        return; /* not running: the packets wait, the queue bounds them */
    batch(e);
    if (tun_push_pending(e->tun) > 0)
        ev_async_send(e->loop, &e->_host);
}

static void
on_prepare(struct ev_loop *loop, ev_prepare *w, int revents)
{
    struct engine *e = w->data;
    netstack_flush();
    if (tun_wq_pending(e->tun) > 0)
        tun_wq_flush(e->tun);
}

static void
on_lwip_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct engine *e = w->data;
    double next = netstack_poll();
    w->repeat = next < 0.01 ? 0.01 : next > 0.25 ? 0.25 : next;
    ev_timer_again(loop, w);
    if (tun_wq_pending(e->tun) > 0)
        tun_wq_flush(e->tun);
}

/* The bundle's tun = {...} as the device takes it, read once, when the TUN
 * opens (chute_engine_run). A reload (engine_load) does not come here: the
 * device, its addresses, MTU, batch, offload and routes stay as they opened
 * until the engine stops, and so does the fwmark the capture rule lets
 * through, even when the new bundle's outbound.fwmark differs. |o| points
 * into |cfg|, which only has to outlive tun_open. */
static void
device_opts(const struct script_config *cfg, struct tun_opts *o)
{
    const struct script_tun *t = &cfg->tun;
    *o = (struct tun_opts){
        .addrs = t->addrs,
        .num_addrs = t->num_addrs,
        .mtu = t->mtu,
        .batch = t->batch,
        .offload = t->offload,
        .auto_route = t->auto_route,
        .exclude = t->exclude,
        .num_exclude = t->num_exclude,
        .fwmark = cfg->out_fwmark,
    };
    snprintf(o->name, sizeof(o->name), "%s", t->name);
}

int
engine_tun_start(struct engine *e, char *err, size_t errlen)
{
    const struct script_config *cfg = script_config(e->script);
    if (e->host != NULL) {
        if (cfg->tun.enabled)
            LOG_INFO("tun: the host moves the packets (packets_out): no device opened");
        e->tun = engine_host_tun(e);
    } else if (!cfg->tun.enabled) {
        return 0;
    } else {
        struct tun_opts o;
        device_opts(cfg, &o);
        e->tun = tun_open(&o, err, errlen);
        if (e->tun == NULL)
            return -1;
    }
    engine_budget_netstack(e); /* lwIP's heap and pools within memory_limit */
    if ((e->tcp = flow_tcp_new(&e->fenv)) == NULL ||
        netstack_init(e->loop, flow_tcp_handler(e->tcp), e->tun, tun_mtu(e->tun), err, errlen) != 0 ||
        (e->udp = flow_udp_new(&e->fenv, e->tun)) == NULL) {
        if (e->udp == NULL && err[0] == '\0')
            snprintf(err, errlen, "out of memory");
        engine_tun_stop(e);
        return -1;
    }
    if (e->host == NULL) {
        ev_io_init(&e->_tun_io, on_tun, tun_fd(e->tun), EV_READ);
        e->_tun_io.data = e;
        ev_io_start(e->loop, &e->_tun_io);
    } else if (tun_push_pending(e->tun) > 0) {
        ev_async_send(e->loop, &e->_host); /* pushed before the run */
    }
    ev_prepare_init(&e->_flush, on_prepare);
    e->_flush.data = e;
    ev_prepare_start(e->loop, &e->_flush);
    ev_init(&e->_lwip, on_lwip_timer);
    e->_lwip.repeat = 0.25;
    e->_lwip.data = e;
    ev_timer_again(e->loop, &e->_lwip);
    return 0;
}

void
engine_tun_stop(struct engine *e)
{
    if (e->tun == NULL)
        return;
    ev_io_stop(e->loop, &e->_tun_io);
    ev_prepare_stop(e->loop, &e->_flush);
    ev_timer_stop(e->loop, &e->_lwip);
    flow_udp_free(e->udp);
    e->udp = NULL;
    flow_tcp_free(e->tcp); /* the flows first: netstack_fini takes what is left */
    e->tcp = NULL;
    netstack_fini();
    tun_wq_flush(e->tun); /* the RSTs of aborted connections */
    if (e->host == NULL)
        tun_close(e->tun); /* the host's endpoint lives until chute_engine_free */
    e->tun = NULL;
}
