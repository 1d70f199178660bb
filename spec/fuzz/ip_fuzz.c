/* libFuzzer target for core/ip. The input is parsed from a heap copy of
 * exactly its size; a successful view is checked against the packet bytes,
 * and the answers chute would build to it (unreachable, echo reply, a UDP
 * reply) must parse again, carry valid checksums and come out the same
 * when built over the packet's own buffer. The input is also checksummed
 * whole, in pieces and against a byte-at-a-time reference. Invariants are
 * checked with abort() so they hold in every build, NDEBUG or not. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ip/ip.h"
#include "fuzz.h"

static unsigned
be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static unsigned
ref_csum(uint32_t sum, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sum += i & 1 ? p[i] : (uint32_t)p[i] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return ~sum & 0xffff;
}

static unsigned
wire(uint16_t c)
{
    uint8_t b[2];

    memcpy(b, &c, 2);
    return (unsigned)b[0] << 8 | b[1];
}

/* What ip_view_parse guarantees on success (core/ip/view.c). */
static void
check_view(const struct ip_view *v, const uint8_t *p, size_t len)
{
    static const uint8_t zero[12];
    const uint8_t *end = v->l4 + v->l4_len;

    CHECK(v->pkt == p && v->pkt_len <= len);
    CHECK(v->version == p[0] >> 4);
    CHECK(v->l4 == p + v->ip_hlen && v->ip_hlen + v->l4_len == v->pkt_len);
    CHECK(v->payload >= v->l4 && v->payload_len <= v->l4_len && v->payload + v->payload_len <= end);
    if (v->version == 4) {
        CHECK(v->ip_hlen == (p[0] & 15) * 4 && v->pkt_len == be16(p + 2));
        CHECK((be16(p + 6) & 0x3fff) == 0 && v->proto == p[9] && v->ttl == p[8]);
        CHECK(memcmp(v->src, p + 12, 4) == 0 && memcmp(v->dst, p + 16, 4) == 0);
        CHECK(memcmp(v->src + 4, zero, 12) == 0 && memcmp(v->dst + 4, zero, 12) == 0);
        CHECK(v->proto == 6 || v->proto == 17 || v->proto == 1);
    } else {
        CHECK(v->version == 6 && v->ip_hlen >= 40 && (v->ip_hlen & 7) == 0);
        CHECK(v->pkt_len == 40 + be16(p + 4) && v->ttl == p[7]);
        CHECK(memcmp(v->src, p + 8, 16) == 0 && memcmp(v->dst, p + 24, 16) == 0);
        CHECK(v->proto == 6 || v->proto == 17 || v->proto == 58);
    }
    switch (v->proto) {
    case 6:
        CHECK(v->payload == v->l4 + (v->l4[12] >> 4) * 4 && v->payload >= v->l4 + 20);
        CHECK(v->payload + v->payload_len == end && v->tcp_flags == v->l4[13]);
        CHECK(v->sport == be16(v->l4) && v->dport == be16(v->l4 + 2));
        break;
    case 17:
        CHECK(v->payload == v->l4 + 8 && v->payload_len + 8u == be16(v->l4 + 4));
        CHECK(v->sport == be16(v->l4) && v->dport == be16(v->l4 + 2));
        break;
    default:
        CHECK(v->payload == v->l4 + 4 && v->payload == end - v->payload_len);
        CHECK(v->icmp_type == v->l4[0] && v->icmp_code == v->l4[1]);
        if (v->version == 4 ? v->icmp_type == 0 || v->icmp_type == 8
                            : v->icmp_type == 128 || v->icmp_type == 129)
            CHECK(v->l4_len >= 8 && v->sport == be16(v->l4 + 4) && v->dport == v->sport);
        else
            CHECK(v->sport == 0 && v->dport == 0);
    }
}

/* A packet we built: parses, checksums verify (v4 header; L4 with the
 * pseudo-header except ICMPv4), and it comes from orig's destination. */
static void
check_built(const uint8_t *out, size_t n, const struct ip_view *orig, struct ip_view *v)
{
    uint32_t s = 0;

    CHECK(n > 0 && n <= 65535);
    CHECK(ip_view_parse(v, out, n) == IP_OK && v->pkt_len == n);
    check_view(v, out, n);
    CHECK(v->version == orig->version && v->ttl == 64);
    CHECK(memcmp(v->src, orig->dst, 16) == 0 && memcmp(v->dst, orig->src, 16) == 0);
    if (v->version == 4)
        CHECK(ip_csum_fold(ip_csum_add(0, out, 20)) == 0 && v->ip_hlen == 20);
    else
        CHECK(v->ip_hlen == 40);
    if (v->proto != 1)
        s = ip_csum_pseudo(v->version, v->src, v->dst, v->proto, v->l4_len);
    CHECK(ip_csum_fold(ip_csum_add(s, v->l4, v->l4_len)) == 0);
}

/* RFC 1122 §3.2.2 / RFC 4443 §2.4(e): addresses an ICMP answer may use. */
static int
is_host(int version, const uint8_t *a)
{
    static const uint8_t zero[16];

    if (version == 4)
        return a[0] != 0 && a[0] != 127 && a[0] < 224;
    return a[0] != 0xff && memcmp(a, zero, 16) != 0;
}

static void
check_answers(const struct ip_view *orig, uint8_t *own)
{
    static uint8_t out[65536], again[65536];
    struct ip_view v, in_place;
    size_t n;

    n = ip_build_unreach(out, 1500, orig, 3, 4);
    if (n != 0) {
        size_t q = n - (orig->version == 4 ? 28 : 48);

        check_built(out, n, orig, &v);
        CHECK(v.icmp_type == (orig->version == 4 ? 3 : 1));
        CHECK(n <= (orig->version == 4 ? 576u : 1280u));
        CHECK(memcmp(out + n - q, orig->pkt, q) == 0);
        /* All of it, or the IP headers and 8 bytes of L4 at least, unless
         * v6 extension headers alone fill the 1280 bytes. */
        CHECK(q == orig->pkt_len || q >= orig->ip_hlen + 8u || n == 1280);
    } else {
        /* With 1500 bytes of room only ICMP (errors) or odd addresses
         * stop it. */
        CHECK(orig->proto == 1 || orig->proto == 58 || !is_host(orig->version, orig->src) ||
              !is_host(orig->version, orig->dst));
    }
    if (orig->proto == 17) {
        n = ip_build_udp(out, sizeof(out), orig->version, orig->dst, orig->dport, orig->src,
                         orig->sport, orig->payload, orig->payload_len);
        check_built(out, n, orig, &v);
        CHECK(v.sport == orig->dport && v.dport == orig->sport);
        CHECK(v.payload_len == orig->payload_len);
        CHECK(memcmp(v.payload, orig->payload, v.payload_len) == 0);
    }
    n = ip_build_echo_reply(out, sizeof(out), orig);
    if (n != 0) {
        check_built(out, n, orig, &v);
        CHECK(orig->icmp_type == (orig->version == 4 ? 8 : 128));
        CHECK(v.icmp_type == (orig->version == 4 ? 0 : 129) && v.sport == orig->sport);
        CHECK(v.l4_len == orig->l4_len && memcmp(v.l4 + 4, orig->l4 + 4, v.l4_len - 4) == 0);
        /* Over the request itself (|own| has room for 65536 bytes). */
        memcpy(again, out, n);
        CHECK(ip_build_echo_reply(own, 65536, orig) == n);
        CHECK(memcmp(own, again, n) == 0);
        CHECK(ip_view_parse(&in_place, own, n) == IP_OK);
    }
}

static void
check_csum(const uint8_t *data, size_t size)
{
    unsigned want = ref_csum(0, data, size);
    uint32_t s = 0;
    size_t done = 0, piece;

    CHECK(wire(ip_csum_fold(ip_csum_add(0, data, size))) == want);
    /* Even pieces whose sizes come from the data, then the rest. */
    while (size - done > 2) {
        piece = (size_t)(data[done] & 0x3e);
        if (piece == 0 || piece >= size - done)
            break;
        s = ip_csum_add(s, data + done, piece);
        done += piece;
    }
    s = ip_csum_add(s, data + done, size - done);
    CHECK(wire(ip_csum_fold(s)) == want);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ip_view v;
    uint8_t *copy, *own;
    int r;

    if (size > 70000)
        return 0;
    copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    memcpy(copy, data, size);
    r = ip_view_parse(&v, copy, size);
    CHECK(r <= 0 && r > -IP_ERR_COUNT);
    if (r == IP_OK) {
        check_view(&v, copy, size);
        /* Padding past the IP length changes nothing. */
        {
            struct ip_view w;

            CHECK(ip_view_parse(&w, copy, v.pkt_len) == IP_OK && w.l4_len == v.l4_len);
            CHECK(w.payload == v.payload && w.payload_len == v.payload_len);
        }
        own = malloc(size > 65536 ? size : 65536);
        CHECK(own != NULL);
        memcpy(own, copy, size);
        CHECK(ip_view_parse(&v, own, size) == IP_OK);
        check_answers(&v, own);
        free(own);
    } else if (r == IP_ERR_PROTO) {
        /* The IP part is complete: protocol unreachable must work. */
        uint8_t out[1500];
        struct ip_view u;
        size_t n = ip_build_unreach(out, sizeof(out), &v, 2, 0);

        CHECK(v.pkt == copy && v.ip_hlen + v.l4_len == v.pkt_len && v.pkt_len <= size);
        if (n != 0)
            check_built(out, n, &v, &u);
    }
    check_csum(copy, size);
    free(copy);
    return 0;
}
