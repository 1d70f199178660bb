#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "ip/ip.h"
#include "netstack/netstack_int.h"
#include "tun/tun.h"

static uint32_t
get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

static void
put16(uint8_t *p, uint16_t v)
{
    v = htons(v);
    memcpy(p, &v, 2);
}

static void
put32(uint8_t *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

/* RFC 9293 §3.10.7.1: a segment with ACK is answered by a RST whose sequence
 * number is that ACK; one without, by RST|ACK acknowledging all it carried. */
void
netstack_send_rst(const struct ip_view *v)
{
    if (v->tcp_flags & TCP_RST)
        return;
    size_t ihl = v->version == 4 ? 20 : 40, len = ihl + 20;
    uint8_t *p = tun_wq_reserve(netstack.tun, len);
    if (p == NULL)
        return;
    memset(p, 0, len);
    uint8_t *t = p + ihl;
    const uint8_t *src = v->dst, *dst = v->src;
    if (v->version == 4) {
        p[0] = 0x45;
        put16(p + 2, (uint16_t)len);
        p[8] = 64;
        p[9] = IPPROTO_TCP;
        memcpy(p + 12, src, 4);
        memcpy(p + 16, dst, 4);
        put16(p + 10, 0);
        uint16_t c = ip_csum_fold(ip_csum_add(0, p, 20));
        memcpy(p + 10, &c, 2);
    } else {
        p[0] = 0x60;
        put16(p + 4, 20);
        p[6] = IPPROTO_TCP;
        p[7] = 64;
        memcpy(p + 8, src, 16);
        memcpy(p + 24, dst, 16);
    }
    put16(t, v->dport);
    put16(t + 2, v->sport);
    if (v->tcp_flags & TCP_ACK) {
        put32(t + 4, get32(v->l4 + 8));
        t[13] = TCP_RST;
    } else {
        uint32_t seg = v->payload_len + !!(v->tcp_flags & TCP_SYN) + !!(v->tcp_flags & TCP_FIN);
        put32(t + 8, get32(v->l4 + 4) + seg);
        t[13] = TCP_RST | TCP_ACK;
    }
    t[12] = 5 << 4;
    uint32_t sum = ip_csum_pseudo(v->version, src, dst, IPPROTO_TCP, 20);
    uint16_t c = ip_csum_fold(ip_csum_add(sum, t, 20));
    memcpy(t + 16, &c, 2);
    tun_wq_commit(netstack.tun, len);
    netstack.st.rst_sent++;
}
