#ifndef CHUTE_IP_IP_H
#define CHUTE_IP_IP_H

/* Packet views for the TUN path: parse an IPv4/IPv6 packet with its TCP,
 * UDP or ICMP header into a view that points into the packet (no copy),
 * checksum helpers, builders for the packets chute writes itself (UDP
 * replies, ICMP unreachable, echo replies), and address prefixes (CIDR).
 * Sans-I/O, no allocation. */

#include <stddef.h>
#include <stdint.h>

enum ip_err {
    IP_OK = 0,
    IP_ERR_TRUNCATED = -1, /* shorter than its headers say */
    IP_ERR_VERSION = -2,   /* not 4 or 6 */
    IP_ERR_LENGTH = -3,    /* bad IHL / total length / payload length / L4 length */
    IP_ERR_FRAGMENT = -4,  /* a fragment (v4 MF or offset, v6 fragment header): dropped */
    IP_ERR_PROTO = -5,     /* a protocol chute does not handle (after v6 extension headers) */
    IP_ERR_L4 = -6,        /* bad TCP data offset, UDP length, ... */
};
#define IP_ERR_COUNT 7 /* for per-reason drop counters: index -err */

struct ip_view {
    const uint8_t *pkt;      /* the IP header */
    uint16_t pkt_len;        /* IP total length (may be < the buffer: padding ignored) */
    uint8_t version;         /* 4 or 6 */
    uint8_t proto;           /* IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP, IPPROTO_ICMPV6 */
    uint8_t ttl;             /* TTL / hop limit */
    uint16_t ip_hlen;        /* bytes before the L4 header (v6: with extension headers) */
    uint8_t src[16], dst[16];/* v4: first 4 bytes; rest zero */
    const uint8_t *l4;       /* the L4 header */
    uint16_t l4_len;         /* L4 header + payload */
    uint16_t sport, dport;   /* host order; ICMP echo: sport = dport = identifier */
    uint8_t tcp_flags;       /* TCP: FIN 0x01 SYN 0x02 RST 0x04 PSH 0x08 ACK 0x10 */
    uint8_t icmp_type, icmp_code;
    const uint8_t *payload;  /* L4 payload (TCP data, UDP data, ICMP body after 4 bytes) */
    uint16_t payload_len;
};

/* Parses |len| bytes at |pkt|. On IP_OK fills |v| with views into |pkt|.
 * v6 extension headers hop-by-hop, routing and destination options are
 * skipped; a fragment header gives IP_ERR_FRAGMENT. Does not verify
 * checksums (the local kernel made the packet). */
int ip_view_parse(struct ip_view *v, const uint8_t *pkt, size_t len);

/* Ones'-complement sum helpers (RFC 1071). ip_csum_fold returns the final
 * 16-bit checksum in network byte order, ready to store. */
uint32_t ip_csum_add(uint32_t sum, const void *data, size_t len);
uint16_t ip_csum_fold(uint32_t sum);
/* The pseudo-header sum for |proto| over |l4_len| bytes (v4: 4-byte
 * addresses, v6: 16). */
uint32_t ip_csum_pseudo(int version, const uint8_t *src, const uint8_t *dst, uint8_t proto,
                        uint32_t l4_len);

/* Builds an IPv|version| UDP packet src:sport -> dst:dport carrying
 * |payload| into |out| (|cap| bytes), checksums filled. Returns its length,
 * or 0 if it does not fit (or would exceed 65535 bytes). */
size_t ip_build_udp(uint8_t *out, size_t cap, int version, const uint8_t *src, uint16_t sport,
                    const uint8_t *dst, uint16_t dport, const uint8_t *payload, size_t len);

/* Builds the ICMP "destination unreachable" answer to |orig| (v4: type 3
 * with |code4|; v6: type 1 with |code6|) from orig's destination back to its
 * source, quoting as much of |orig| as RFC 792 / RFC 4443 allow within
 * |cap| (v4: header + 8 bytes at least, v6: up to 1280 bytes in all).
 * Returns the length or 0. */
size_t ip_build_unreach(uint8_t *out, size_t cap, const struct ip_view *orig, uint8_t code4,
                        uint8_t code6);

/* Builds the echo reply to an ICMP / ICMPv6 echo request |req| (same id,
 * sequence and data, addresses swapped). Returns the length, or 0 if |req|
 * is not an echo request or does not fit. */
size_t ip_build_echo_reply(uint8_t *out, size_t cap, const struct ip_view *req);

/* An address with a prefix length: an interface address with its network
 * ("198.18.0.1/30") or a network ("10.0.0.0/8"), as configs spell them. */
struct ip_cidr {
    int family;       /* AF_INET or AF_INET6 */
    uint8_t addr[16]; /* network order; v4: the first 4 bytes, the rest zero */
    uint8_t prefix;   /* 0..32 (v4) or 0..128 (v6) */
};

/* Parses "IP/PREFIX" into |out|: an IPv4 dotted quad or an IPv6 address in
 * the forms inet_pton takes, then a decimal prefix length up to 32 or 128.
 * Without "/PREFIX" it is a host prefix (/32, /128). Host bits are kept as
 * written ("198.18.0.1/30" stays .1): the TUN needs its own address, and
 * matchers mask for themselves. Returns 0, or -1 when |text| is not such a
 * prefix (|out| then holds nothing useful). */
int ip_cidr_parse(const char *text, struct ip_cidr *out);

#endif
