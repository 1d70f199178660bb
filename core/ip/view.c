/* Packet views: one pass over the IP and L4 headers of a packet read from
 * the TUN, every read bounds-checked against the buffer first, nothing
 * copied but the addresses (the flow key needs them in a fixed layout).
 *
 * The error codes split by who is to blame, because they feed per-reason
 * drop counters:
 *   IP_ERR_TRUNCATED  the buffer holds less than the IP header or its
 *                     length fields claim (a short read, a buffer smaller
 *                     than the MTU);
 *   IP_ERR_LENGTH     the IP length fields contradict each other (IHL < 5,
 *                     total length < IHL, an extension header running past
 *                     the payload length, a v6 packet over 65535 bytes);
 *   IP_ERR_L4         the L4 header does not fit in, or disagrees with, the
 *                     bytes the IP header gives it.
 *
 * On success the view guarantees: pkt_len <= len; l4 == pkt + ip_hlen and
 * ip_hlen + l4_len == pkt_len (v4 and v6); payload lies in
 * [l4, l4 + l4_len] with payload_len <= l4_len; the TCP header, 8 UDP
 * bytes, 4 ICMP bytes (8 for echo) lie inside l4_len.
 *
 * On IP_ERR_PROTO the IP part of the view (pkt, pkt_len, version, proto,
 * ttl, ip_hlen, src, dst, l4, l4_len) is complete, so the caller can still
 * answer with ICMP protocol unreachable; after any other error the view is
 * partly written garbage. */

#include <string.h>

#include "ip/ip.h"

#define PROTO_ICMP 1
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ICMPV6 58

static inline uint16_t
be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static int
parse_v4(struct ip_view *v, const uint8_t *pkt, size_t len)
{
    size_t hlen, total;

    if (len < 20)
        return IP_ERR_TRUNCATED;
    hlen = (size_t)(pkt[0] & 0x0f) * 4;
    total = be16(pkt + 2);
    if (hlen < 20 || total < hlen)
        return IP_ERR_LENGTH;
    if (total > len)
        return IP_ERR_TRUNCATED;
    /* MF or a non-zero offset: chute does not reassemble (lwIP's is off). */
    if (be16(pkt + 6) & 0x3fff)
        return IP_ERR_FRAGMENT;
    v->proto = pkt[9];
    v->pkt_len = (uint16_t)total;
    v->ttl = pkt[8];
    v->ip_hlen = (uint16_t)hlen;
    memcpy(v->src, pkt + 12, 4);
    memset(v->src + 4, 0, 12);
    memcpy(v->dst, pkt + 16, 4);
    memset(v->dst + 4, 0, 12);
    return IP_OK;
}

static int
parse_v6(struct ip_view *v, const uint8_t *pkt, size_t len)
{
    size_t off = 40, end;
    uint8_t nh;

    if (len < 40)
        return IP_ERR_TRUNCATED;
    end = 40 + (size_t)be16(pkt + 4);
    if (end > len)
        return IP_ERR_TRUNCATED;
    /* The view's 16-bit lengths cannot hold more, and no TUN MTU allows it. */
    if (end > 0xffff)
        return IP_ERR_LENGTH;
    nh = pkt[6];
    /* Each extension header is at least 8 bytes, so this loop ends within
     * 8192 rounds whatever the bytes say. */
    while (nh == 0 || nh == 43 || nh == 60) {
        size_t ext;

        if (end - off < 2)
            return IP_ERR_LENGTH;
        ext = ((size_t)pkt[off + 1] + 1) * 8;
        if (end - off < ext)
            return IP_ERR_LENGTH;
        nh = pkt[off];
        off += ext;
    }
    if (nh == 44)
        return IP_ERR_FRAGMENT;
    v->proto = nh;
    v->pkt_len = (uint16_t)end;
    v->ttl = pkt[7];
    v->ip_hlen = (uint16_t)off;
    memcpy(v->src, pkt + 8, 16);
    memcpy(v->dst, pkt + 24, 16);
    return IP_OK;
}

static int
parse_l4(struct ip_view *v)
{
    const uint8_t *l4 = v->l4;
    size_t n = v->l4_len, hlen;

    v->sport = v->dport = 0;
    v->tcp_flags = v->icmp_type = v->icmp_code = 0;
    switch (v->proto) {
    case PROTO_TCP:
        if (n < 20)
            return IP_ERR_L4;
        hlen = (size_t)(l4[12] >> 4) * 4;
        if (hlen < 20 || hlen > n)
            return IP_ERR_L4;
        v->sport = be16(l4);
        v->dport = be16(l4 + 2);
        v->tcp_flags = l4[13];
        v->payload = l4 + hlen;
        v->payload_len = (uint16_t)(n - hlen);
        return IP_OK;
    case PROTO_UDP:
        if (n < 8)
            return IP_ERR_L4;
        /* The UDP length wins over the IP one: bytes past it are padding
         * and must not reach the application. 0 (a v6 jumbogram) fails. */
        hlen = be16(l4 + 4);
        if (hlen < 8 || hlen > n)
            return IP_ERR_L4;
        v->sport = be16(l4);
        v->dport = be16(l4 + 2);
        v->payload = l4 + 8;
        v->payload_len = (uint16_t)(hlen - 8);
        return IP_OK;
    case PROTO_ICMP:
    case PROTO_ICMPV6:
        if ((v->proto == PROTO_ICMP) != (v->version == 4))
            return IP_ERR_PROTO;
        if (n < 4)
            return IP_ERR_L4;
        v->icmp_type = l4[0];
        v->icmp_code = l4[1];
        v->payload = l4 + 4;
        v->payload_len = (uint16_t)(n - 4);
        if (v->proto == PROTO_ICMP ? (l4[0] == 8 || l4[0] == 0) : (l4[0] == 128 || l4[0] == 129)) {
            if (n < 8)
                return IP_ERR_L4;
            v->sport = v->dport = be16(l4 + 4);
        }
        return IP_OK;
    default:
        return IP_ERR_PROTO;
    }
}

int
ip_view_parse(struct ip_view *v, const uint8_t *pkt, size_t len)
{
    int r;

    if (len == 0)
        return IP_ERR_TRUNCATED;
    v->version = pkt[0] >> 4;
    if (v->version == 4)
        r = parse_v4(v, pkt, len);
    else if (v->version == 6)
        r = parse_v6(v, pkt, len);
    else
        return IP_ERR_VERSION;
    if (r != IP_OK)
        return r;
    v->pkt = pkt;
    v->l4 = pkt + v->ip_hlen;
    v->l4_len = (uint16_t)(v->pkt_len - v->ip_hlen);
    return parse_l4(v);
}
