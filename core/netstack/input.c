#include <netinet/in.h>
#include <string.h>

#include "lwip/prot/ip4.h"
#include "lwip/prot/ip6.h"
#include "lwip/priv/tcp_priv.h"

#include "log/log.h"
#include "ip/ip.h"
#include "netstack/netstack_int.h"

void
netstack_key_from_view(struct ip_tuple *k, const struct ip_view *v)
{
    memset(k, 0, sizeof(*k));
    k->proto = IPPROTO_TCP;
    k->version = v->version;
    k->sport = v->sport;
    k->dport = v->dport;
    memcpy(k->src, v->src, 16);
    memcpy(k->dst, v->dst, 16);
}

/* A listening pcb bound to ANY matches every destination address but only
 * its own port (tcp_input compares local_port), so each destination port in
 * use gets one, created on its first SYN and kept. */
int
netstack_listen(uint16_t port)
{
    if (netstack.listeners[port] != NULL)
        return 0;
    struct tcp_pcb *pcb = tcp_new_ip_type(IPADDR_TYPE_ANY);
    if (pcb == NULL)
        goto fail;
    ip_set_option(pcb, SOF_REUSEADDR);
    if (tcp_bind(pcb, IP_ANY_TYPE, port) != ERR_OK) {
        tcp_abort(pcb);
        goto fail;
    }
    struct tcp_pcb *l = tcp_listen_with_backlog(pcb, TCP_DEFAULT_LISTEN_BACKLOG);
    if (l == NULL) {
        tcp_abort(pcb);
        goto fail;
    }
    tcp_accept(l, netstack_conn_accepted);
    netstack.listeners[port] = l;
    netstack.st.listeners++;
    return 0;
fail:
    if (netstack.st.listener_fails++ == 0)
        LOG_WARN("netstack: no listener for port %u (pool of %d exhausted?)", port,
                 MEMP_NUM_TCP_PCB_LISTEN);
    return -1;
}

/* A SYN flood must not lock real flows out: with the pcb pool full, lwIP
 * makes room for a new connection only by aborting the oldest one of a
 * lower priority (tcp_alloc -> tcp_kill_prio), never a SYN_RCVD pcb of
 * its own. So the pcb a SYN just made (tcp_input put it at the head of
 * the active list) goes below the others until its handshake completes
 * (netstack_conn_accepted lifts it): a new SYN then displaces the oldest
 * half-open connection, not an established one. No patch to lwIP. */
static void
half_open_low(const struct ip_view *v)
{
    struct tcp_pcb *pcb = tcp_active_pcbs;
    if (pcb != NULL && pcb->state == SYN_RCVD && pcb->local_port == v->dport &&
        pcb->remote_port == v->sport && pcb->prio == TCP_PRIO_NORMAL)
        tcp_setprio(pcb, NETSTACK_PRIO_HALF_OPEN);
}

/* The heap is full: out-of-order segments are let go of first, as lwIP's
 * pbuf_free_ooseq does for its pool. A heap full of them (1,000 uploads
 * each with a hole) holds out the retransmissions that would fill the
 * holes and free them. Once per batch: a heap full of in-order data (slow
 * upstreams) would otherwise cost a walk of every pcb per packet. */
static int
free_ooseq_once(void)
{
    if (netstack.ooseq_walked)
        return 0;
    netstack.ooseq_walked = 1;
    uint64_t n = 0;
    for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb != NULL; pcb = pcb->next)
        if (pcb->ooseq != NULL) {
            tcp_free_ooseq(pcb);
            n++;
        }
    netstack.st.ooseq_freed += n;
    return n > 0;
}

/* lwIP 2.1.3's tcp_parseopt reads an option's length byte before it checks
 * that byte is inside the options: a SYN whose last option byte is a kind
 * reads one byte past the packet (ASan found it once the buffers came from
 * malloc; in lwIP's own heap it read the next block's header). The buffer
 * is allocated that much longer and trimmed to the packet: mem_trim keeps
 * a malloc'd block whole, so the byte is ours, and zero. */
#define PARSEOPT_SLACK 1

static struct pbuf *
alloc_segment(size_t len)
{
    /* A 64 KiB packet has no room for it in a u16, and needs none: it
     * carries data past its options, which the stray read lands in. */
    size_t slack = len + PARSEOPT_SLACK <= 0xffff ? PARSEOPT_SLACK : 0;
    struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)(len + slack), PBUF_RAM);
    if (p == NULL && free_ooseq_once())
        p = pbuf_alloc(PBUF_RAW, (u16_t)(len + slack), PBUF_RAM);
    if (p != NULL && slack > 0) {
        memset((uint8_t *)p->payload + len, 0, slack);
        pbuf_realloc(p, (u16_t)len);
    }
    return p;
}

void
netstack_inject(const uint8_t *pkt, size_t len, const struct ip_view *v)
{
    struct netif *nif = &netstack.nif;
    struct pbuf *p = netstack_rx_adopt(pkt, len, v);
    if (p == NULL) {
        if ((p = alloc_segment(len)) == NULL) {
            netstack.st.rx_drops++; /* heap full: the peer retransmits */
            return;
        }
        memcpy(p->payload, pkt, len);
    }
    if ((v->tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN && netstack_listen(v->dport) != 0) {
        pbuf_free(p);
        return;
    }
    /* Fill lwIP's current-packet globals as ip4_input/ip6_input would: the
     * engine is the IP layer. A stale v6 header pointer would make a v4
     * packet look like v6 (ip_current_is_v6 tests only that pointer). */
    ip_data.current_netif = nif;
    ip_data.current_input_netif = nif;
    if (v->version == 4) {
        const struct ip_hdr *h = p->payload;
        ip_data.current_ip4_header = h;
        ip_data.current_ip6_header = NULL;
        ip_addr_copy_from_ip4(ip_data.current_iphdr_src, h->src);
        ip_addr_copy_from_ip4(ip_data.current_iphdr_dest, h->dest);
    } else {
        struct ip6_hdr *h = p->payload;
        ip_data.current_ip4_header = NULL;
        ip_data.current_ip6_header = h;
        ip_addr_copy_from_ip6_packed(ip_data.current_iphdr_src, h->src);
        ip_addr_copy_from_ip6_packed(ip_data.current_iphdr_dest, h->dest);
    }
    ip_data.current_ip_header_tot_len = v->ip_hlen;
    pbuf_remove_header(p, v->ip_hlen);
    tcp_input(p, nif);
    if ((v->tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN)
        half_open_low(v);
    ip_data.current_netif = NULL;
    ip_data.current_input_netif = NULL;
    ip_data.current_ip4_header = NULL;
    ip_data.current_ip6_header = NULL;
    ip_data.current_ip_header_tot_len = 0;
    ip_addr_set_zero(&ip_data.current_iphdr_src);
    ip_addr_set_zero(&ip_data.current_iphdr_dest);
}

void
netstack_tcp_input(const struct ip_view *v)
{
    /* Only a SYN can start a flow; every other segment is the fast path:
     * straight to lwIP, which finds its pcb, without Lua or a lookup here. */
    if ((v->tcp_flags & (TCP_SYN | TCP_ACK | TCP_RST)) == TCP_SYN) {
        struct ip_tuple k;
        netstack_key_from_view(&k, v);
        uint32_t h = ip_tuple_hash(netstack.tuples, &k);
        netstack_conn_syn(v, &k, h, ip_tuple_lookup(netstack.tuples, &k, h));
        return;
    }
    netstack.st.fast_path++;
    netstack_inject(v->pkt, v->pkt_len, v);
}

void
netstack_flush(void)
{
    netstack.ooseq_walked = 0;
    netstack_tx_reap();
    netstack_conn_output();
    netstack_tw_trim();
}
