#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/init.h"
#include "lwip/stats.h"
#include "lwip/timeouts.h"

#include <netinet/in.h>

#include "log/log.h"
#include "ip/ip.h"
#include "netstack/netstack_int.h"
#include "tun/tun.h"

struct netstack netstack;

/* With offload, lwIP sends segments of up to 64 KiB (its netif MTU is
 * 65535 and the client's SYN said so, see conn.c): one larger than the
 * client's real MSS leaves as a segmentation-offload packet, which the
 * kernel takes whole instead of as ~44 writes at MTU 1500. Every TCP
 * packet leaves with CHECKSUM_PARTIAL (its checksum field holding the
 * pseudo-header sum): lwIP sums none of them (nif_init), the kernel sums
 * what it must, and a download's bytes are not summed twice.
 *
 * tcp_partial fills |g| for the TCP packet whose headers start at |pkt| (|len| bytes
 * in all, |avail| of them here) and puts the pseudo-header sum in its
 * checksum field. 0 when it is not a whole TCP header. */
static int
tcp_partial(uint8_t *pkt, size_t avail, size_t len, struct tun_gso *g)
{
    int v6 = (pkt[0] >> 4) == 6;
    size_t ihl = v6 ? 40 : (size_t)(pkt[0] & 0x0f) * 4;
    if (avail < ihl + 20 || (v6 ? pkt[6] : pkt[9]) != IPPROTO_TCP)
        return 0;
    size_t thl = (size_t)(pkt[ihl + 12] >> 4) * 4;
    if (avail < ihl + thl || (size_t)tun_mtu(netstack.tun) <= ihl + thl)
        return 0;
    /* Each segment carries the headers with their options (timestamps). */
    size_t mss = (size_t)tun_mtu(netstack.tun) - ihl - thl;
    const uint8_t *src = v6 ? pkt + 8 : pkt + 12, *dst = v6 ? pkt + 24 : pkt + 16;
    uint16_t c = (uint16_t)~ip_csum_fold(ip_csum_pseudo(v6 ? 6 : 4, src, dst, IPPROTO_TCP,
                                                         (uint32_t)(len - ihl)));
    memcpy(pkt + ihl + 16, &c, 2);
    *g = (struct tun_gso){.version = v6 ? 6 : 4, .hdr_len = (uint16_t)(ihl + thl),
                          .gso_size = len - ihl - thl > mss ? (uint16_t)mss : 0,
                          .csum_start = (uint16_t)ihl};
    return 1;
}

static void
release_pbuf(void *p)
{
    pbuf_free(p);
}

/* A device takes the segment straight from lwIP's pbufs (its unacked
 * queue keeps them; one more reference holds them until the flush): only
 * the headers are copied. */
static int
emit_ref(struct pbuf *p)
{
    struct tun *t = netstack.tun;
    uint8_t hdr[128];
    struct iovec iov[TUN_REF_IOV];
    struct tun_gso g;
    size_t hlen = p->len < sizeof(hdr) ? p->len : sizeof(hdr);
    memcpy(hdr, p->payload, hlen);
    /* The headers end where the TCP header says: the rest is payload. */
    int v6 = (hdr[0] >> 4) == 6;
    size_t ihl = v6 ? 40 : (size_t)(hdr[0] & 0x0f) * 4;
    if (hlen < ihl + 20 || (v6 ? hdr[6] : hdr[9]) != IPPROTO_TCP)
        return -1;
    size_t h = ihl + (size_t)(hdr[ihl + 12] >> 4) * 4;
    if (h > hlen)
        return -1;
    int n = 0;
    if (p->len > h)
        iov[n++] = (struct iovec){(uint8_t *)p->payload + h, p->len - h};
    for (struct pbuf *q = p->next; q != NULL; q = q->next) {
        if (q->len == 0)
            continue;
        if (n == TUN_REF_IOV)
            return -1;
        iov[n++] = (struct iovec){q->payload, q->len};
    }
    int gso = tun_offload(t) && tcp_partial(hdr, h, p->tot_len, &g);
    pbuf_ref(p);
    if (tun_wq_ref(t, hdr, h, iov, n, gso ? &g : NULL, release_pbuf, p) != 0) {
        pbuf_free(p);
        return -1;
    }
    return 0;
}

/* lwIP hands a segment chain whose data stays referenced by its unacked
 * queue: a device writes it from there; the host endpoint's batches are
 * whole packets, so for it the chain is copied into the write queue. Both
 * leave at the engine's flush, once per batch. */
static err_t
emit(struct pbuf *p)
{
    if (tun_wq_ref_ok(netstack.tun) && emit_ref(p) == 0)
        return ERR_OK;
    uint8_t *slot = tun_wq_reserve(netstack.tun, p->tot_len);
    if (slot == NULL)
        return ERR_OK; /* larger than the device takes: TCP retransmits smaller */
    pbuf_copy_partial(p, slot, p->tot_len, 0);
    struct tun_gso g;
    if (tun_offload(netstack.tun) && tcp_partial(slot, p->tot_len, p->tot_len, &g))
        tun_wq_commit_gso(netstack.tun, p->tot_len, &g);
    else
        tun_wq_commit(netstack.tun, p->tot_len);
    return ERR_OK;
}

static err_t
out4(struct netif *n, struct pbuf *p, const ip4_addr_t *dst)
{
    return emit(p);
}

static err_t
out6(struct netif *n, struct pbuf *p, const ip6_addr_t *dst)
{
    return emit(p);
}

static int init_mtu, init_offload;

static err_t
nif_init(struct netif *n)
{
    n->name[0] = 'c';
    n->name[1] = 'h';
    n->output = out4;
    n->output_ip6 = out6;
    n->mtu = (u16_t)init_mtu;
    n->flags = 0; /* no broadcast: tcp_input would drop the subnet's broadcast address */
    if (init_offload)
        NETIF_SET_CHECKSUM_CTRL(n, NETIF_CHECKSUM_ENABLE_ALL & ~NETIF_CHECKSUM_GEN_TCP);
    return ERR_OK;
}

int
netstack_init(struct ev_loop *loop, const struct netstack_handler *h, struct tun *tun, int mtu,
              char *err, size_t errlen)
{
    static int lwip_started;
    if (netstack.h != NULL) {
        snprintf(err, errlen, "the netstack is in use by another engine in this process");
        return -1;
    }
    memset(&netstack, 0, sizeof(netstack));
    netstack.listeners = calloc(65536, sizeof(*netstack.listeners));
    netstack.tuples = ip_tuple_table_new();
    if (netstack.listeners == NULL || netstack.tuples == NULL) {
        free(netstack.listeners);
        ip_tuple_table_free(netstack.tuples);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    netstack.h = h;
    netstack.loop = loop;
    netstack.tun = tun;
    if (!lwip_started) {
        lwip_init();
        lwip_started = 1;
    }
    netstack_limits_apply();
    /* tcp_input needs a netif that is up, link-up and has some IPv4 address
     * for ip4_route to let SYN-ACKs out; the address is never compared with
     * a destination. */
    ip4_addr_t addr, mask, gw;
    IP4_ADDR(&addr, 10, 77, 0, 2);
    IP4_ADDR(&mask, 255, 255, 255, 255);
    ip4_addr_set_zero(&gw);
    init_mtu = tun_offload(tun) || mtu > 0xFFFF ? 0xFFFF : mtu;
    init_offload = tun_offload(tun);
    if (netif_add(&netstack.nif, &addr, &mask, &gw, NULL, nif_init, ip_input) == NULL) {
        snprintf(err, errlen, "lwIP refused the netif");
        return -1;
    }
    ip6_addr_t a6;
    IP6_ADDR(&a6, PP_HTONL(0xfd000000), 0, 0, PP_HTONL(2));
    netif_ip6_addr_set(&netstack.nif, 0, &a6);
    netif_ip6_addr_set_state(&netstack.nif, 0, IP6_ADDR_PREFERRED);
    netif_set_default(&netstack.nif);
    netif_set_up(&netstack.nif);
    netif_set_link_up(&netstack.nif);
    netstack.st.heap_size = netstack_heap_cap();
    size_t cap = netstack_heap_cap(), mib = cap % (1u << 20) == 0; /* a limit: KiB */
    LOG_INFO("netstack: lwIP %s, window %d, heap %zu %s, mss follows mtu %d%s",
             LWIP_VERSION_STRING, TCP_WND, mib ? cap >> 20 : cap >> 10, mib ? "MiB" : "KiB", mtu,
             tun_offload(tun) ? ", 64 KiB segments with offload" : "");
    return 0;
}

void
netstack_fini(void)
{
    if (netstack.h == NULL)
        return;
    netstack_conn_abort_all();
    for (int i = 0; i < 65536; i++)
        if (netstack.listeners[i] != NULL)
            tcp_close(netstack.listeners[i]);
    /* What lwIP queued (the RSTs above) leaves now, and the segments the
     * queue references go back to lwIP before it is let go. */
    tun_wq_flush(netstack.tun);
    netstack_tx_reap();
    netif_remove(&netstack.nif);
    free(netstack.listeners);
    ip_tuple_table_free(netstack.tuples);
    memset(&netstack, 0, sizeof(netstack));
}

double
netstack_poll(void)
{
    sys_check_timeouts();
    if (netstack.mem_high && netstack_heap_used() < NETSTACK_MEM_LOW) {
        netstack.mem_high = 0;
        netstack_conn_resume_all();
    }
    netstack_conn_output();
    u32_t ms = sys_timeouts_sleeptime();
    return ms == SYS_TIMEOUTS_SLEEPTIME_INFINITE ? 1.0 : ms / 1000.0;
}

void
netstack_stats(struct netstack_stats *out)
{
    *out = netstack.st;
    out->heap_used = netstack_heap_used();
    out->heap_max = netstack_heap_max();
    out->heap_errors = lwip_stats.mem.err;
}

const struct log_counter netstack_counters[] = {
#define X(field, key) LOG_COUNTER(struct netstack_stats, field, key)
    NETSTACK_STATS(X)
#undef X
    LOG_COUNTER_END};
