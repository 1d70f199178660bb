/* Builders for the packets chute writes to the TUN itself: UDP replies from
 * the NAT, ICMP unreachable, echo replies. Each writes the body first and
 * the headers last, from values copied out beforehand, so the body may
 * already sit in |out| or overlap it: a UDP reply can be received straight
 * into out + 28 (v4) / out + 48 (v6), and an echo or unreach answer can be
 * built over the request's own buffer. v4 headers carry no options and v6
 * ones no extension headers. */

#include <string.h>

#include "ip/ip.h"

#define TTL 64
#define PROTO_ICMP 1
#define PROTO_UDP 17
#define PROTO_ICMPV6 58

static inline void
put16(uint8_t *p, uint16_t x)
{
    p[0] = (uint8_t)(x >> 8);
    p[1] = (uint8_t)x;
}

/* RFC 1122 §3.2.2 and RFC 4443 §2.4(e): no ICMP answer to or from an
 * address that is not one host. For v4 that rules out 0/8, loopback and
 * 224/3 (multicast, class E, broadcast); for v6 the unspecified address and
 * multicast. */
static int
is_host(int version, const uint8_t *a)
{
    static const uint8_t zero[16];

    if (version == 4)
        return a[0] != 0 && a[0] != 127 && a[0] < 224;
    return a[0] != 0xff && memcmp(a, zero, 16) != 0;
}

/* ICMP errors must never answer ICMP errors (RFC 1122 §3.2.2, RFC 4443
 * §2.4(e)). v6 marks errors by type < 128 (and redirects are excluded too);
 * v4 has no such rule, so only the known query types count as safe and an
 * unknown type is taken for an error. */
static int
is_icmp_error(const struct ip_view *v)
{
    const uint32_t v4_queries = 1u << 0 | 1u << 8 | 1u << 9 | 1u << 10 | 0x3fu << 13;

    if (v->version == 4 && v->proto == PROTO_ICMP)
        return v->icmp_type >= 32 || !(v4_queries >> v->icmp_type & 1);
    if (v->version == 6 && v->proto == PROTO_ICMPV6)
        return v->icmp_type < 128 || v->icmp_type == 137;
    return 0;
}

/* Writes the 20- or 40-byte IP header for |l4_len| bytes of |proto|.
 * v4: DF clear, id 0, TTL 64; v6: hop limit 64, no flow label. */
static void
put_header(uint8_t *out, int version, const uint8_t *src, const uint8_t *dst, uint8_t proto,
           size_t l4_len)
{
    if (version == 4) {
        uint16_t c;

        out[0] = 0x45;
        out[1] = 0;
        put16(out + 2, (uint16_t)(20 + l4_len));
        memset(out + 4, 0, 8);
        out[8] = TTL;
        out[9] = proto;
        memcpy(out + 12, src, 4);
        memcpy(out + 16, dst, 4);
        c = ip_csum_fold(ip_csum_add(0, out, 20));
        memcpy(out + 10, &c, 2);
        return;
    }
    out[0] = 0x60;
    out[1] = out[2] = out[3] = 0;
    put16(out + 4, (uint16_t)l4_len);
    out[6] = proto;
    out[7] = TTL;
    memcpy(out + 8, src, 16);
    memcpy(out + 24, dst, 16);
}

/* Fills the checksum at |l4| + |at| over the |n| L4 bytes. ICMPv4 has no
 * pseudo-header; UDP and ICMPv6 do. A UDP sum of 0 means "none" on the
 * wire, so a computed 0 goes out as its other form, 0xFFFF (RFC 768). */
static void
put_l4_csum(uint8_t *l4, size_t n, size_t at, int version, const uint8_t *src, const uint8_t *dst,
            uint8_t proto)
{
    uint32_t sum = 0;
    uint16_t c;

    if (proto != PROTO_ICMP)
        sum = ip_csum_pseudo(version, src, dst, proto, (uint32_t)n);
    l4[at] = l4[at + 1] = 0;
    c = ip_csum_fold(ip_csum_add(sum, l4, n));
    if (c == 0 && proto == PROTO_UDP)
        c = 0xffff;
    memcpy(l4 + at, &c, 2);
}

size_t
ip_build_udp(uint8_t *out, size_t cap, int version, const uint8_t *src, uint16_t sport,
             const uint8_t *dst, uint16_t dport, const uint8_t *payload, size_t len)
{
    size_t hlen = version == 6 ? 40 : 20, alen = version == 6 ? 16 : 4;
    uint8_t s[16], d[16], *udp;

    if ((version != 4 && version != 6) || len > 0xffff - hlen - 8 || hlen + 8 + len > cap)
        return 0;
    udp = out + hlen;
    /* Copies first: the addresses may point into |out| (a view of the
     * request being overwritten), swapped. */
    memcpy(s, src, alen);
    memcpy(d, dst, alen);
    if (len > 0 && payload != udp + 8)
        memmove(udp + 8, payload, len);
    put_header(out, version, s, d, PROTO_UDP, 8 + len);
    put16(udp, sport);
    put16(udp + 2, dport);
    put16(udp + 4, (uint16_t)(8 + len));
    put_l4_csum(udp, 8 + len, 6, version, s, d, PROTO_UDP);
    return hlen + 8 + len;
}

/* Quotes as much of |orig| as fits in 576 bytes (v4, RFC 1812 §4.3.2.3) or
 * 1280 (v6, RFC 4443 §2.4(c)) and in |cap|, but never less than the IP
 * headers and 8 bytes of L4 (RFC 792): the sender needs the ports to find
 * the socket, so a shorter quote is not worth sending. The one exception is
 * a v6 packet whose extension headers alone fill the 1280 bytes. */
size_t
ip_build_unreach(uint8_t *out, size_t cap, const struct ip_view *orig, uint8_t code4, uint8_t code6)
{
    int version = orig->version;
    size_t hlen = version == 6 ? 40 : 20, room = (version == 6 ? 1280 : 576) - hlen - 8;
    size_t q = orig->pkt_len, least = (size_t)orig->ip_hlen + 8;
    uint8_t s[16], d[16], proto = version == 6 ? PROTO_ICMPV6 : PROTO_ICMP, *icmp;

    if ((version != 4 && version != 6) || is_icmp_error(orig) || !is_host(version, orig->src) ||
        !is_host(version, orig->dst) || cap < hlen + 8)
        return 0;
    if (least > q)
        least = q;
    if (least > room)
        least = room;
    if (q > room)
        q = room;
    if (q > cap - hlen - 8)
        q = cap - hlen - 8;
    if (q < least)
        return 0;
    /* The answer goes from the original destination back to its source. */
    icmp = out + hlen;
    memcpy(s, orig->dst, 16);
    memcpy(d, orig->src, 16);
    memmove(icmp + 8, orig->pkt, q);
    put_header(out, version, s, d, proto, 8 + q);
    icmp[0] = version == 6 ? 1 : 3;
    icmp[1] = version == 6 ? code6 : code4;
    memset(icmp + 4, 0, 4);
    put_l4_csum(icmp, 8 + q, 2, version, s, d, proto);
    return hlen + 8 + q;
}

size_t
ip_build_echo_reply(uint8_t *out, size_t cap, const struct ip_view *req)
{
    int version = req->version;
    size_t hlen = version == 6 ? 40 : 20, n = req->l4_len;
    uint8_t s[16], d[16], proto = version == 6 ? PROTO_ICMPV6 : PROTO_ICMP, *icmp;

    if (!(version == 4 && req->proto == PROTO_ICMP && req->icmp_type == 8) &&
        !(version == 6 && req->proto == PROTO_ICMPV6 && req->icmp_type == 128))
        return 0;
    /* A ping to a group or broadcast would need a unicast source of ours
     * (RFC 4443 §4.2), which a view cannot supply. */
    if (!is_host(version, req->src) || !is_host(version, req->dst) || n < 8 || hlen + n > cap)
        return 0;
    icmp = out + hlen;
    memcpy(s, req->dst, 16);
    memcpy(d, req->src, 16);
    /* Identifier, sequence number and data, byte for byte. */
    memmove(icmp + 4, req->l4 + 4, n - 4);
    put_header(out, version, s, d, proto, n);
    icmp[0] = version == 6 ? 129 : 0;
    icmp[1] = 0;
    put_l4_csum(icmp, n, 2, version, s, d, proto);
    return hlen + n;
}
