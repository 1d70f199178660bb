/* Builders: every packet is checked with a checksum computed here byte by
 * byte over an explicitly laid out pseudo-header (the whole packet,
 * checksum included, must sum to ffff), then re-parsed. The same builders
 * were checked against Linux in a network namespace: it delivered the UDP
 * replies (including one with checksum ffff), the echo replies, and turned
 * the unreachables into ECONNREFUSED. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ip/ip.h"

/* 10.0.0.1:59898 -> 10.0.0.2:53 DNS query, from Linux. */
static const uint8_t udp4_dns[57] = {
    0x45, 0x00, 0x00, 0x39, 0xff, 0x1b, 0x40, 0x00, 0x40, 0x11, 0x27, 0x96, 0x0a, 0x00, 0x00,
    0x01, 0x0a, 0x00, 0x00, 0x02, 0xe9, 0xfa, 0x00, 0x35, 0x00, 0x25, 0x1f, 0xd0, 0x12, 0x34,
    0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d,
    0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01};
/* Echo request headers from Linux: v4 id 5f12 seq 1 checksum c0f8, v6 id
 * 5f13 seq 1 checksum 4e78; 56 data bytes 08..3f follow each. */
static const uint8_t echo4_head[28] = {0x45, 0x00, 0x00, 0x54, 0x6d, 0x09, 0x40, 0x00, 0x40, 0x01,
                                       0xb9, 0x9d, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
                                       0x08, 0x00, 0xc0, 0xf8, 0x5f, 0x12, 0x00, 0x01};
static const uint8_t echo6_head[48] = {
    0x60, 0x06, 0xa4, 0x33, 0x00, 0x40, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x4e, 0x78, 0x5f, 0x13, 0x00, 0x01};
static const uint8_t v4a[4] = {10, 0, 0, 1}, v4b[4] = {10, 0, 0, 2};
static const uint8_t v6a[16] = {0xfd, [15] = 1}, v6b[16] = {0xfd, [15] = 2};

static unsigned
be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static uint32_t
sum_bytes(uint32_t sum, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sum += i & 1 ? p[i] : (uint32_t)p[i] << 8;
    return sum;
}

static unsigned
folded(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return sum;
}

/* Checks the IP header checksum (v4) and the L4 checksum (with the
 * pseudo-header except for ICMPv4) of a packet with no v4 options or v6
 * extension headers; returns the L4 protocol. */
static int
check_sums(const uint8_t *p, size_t n)
{
    uint8_t ph[40] = {0};
    size_t hlen = p[0] >> 4 == 4 ? 20 : 40, l4 = n - hlen;
    int proto = hlen == 20 ? p[9] : p[6];

    assert_true(n >= hlen);
    if (hlen == 20) {
        assert_int_equal(be16(p + 2), n);
        assert_int_equal(folded(sum_bytes(0, p, 20)), 0xffff);
        memcpy(ph, p + 12, 8);
        ph[9] = (uint8_t)proto;
        ph[10] = (uint8_t)(l4 >> 8);
        ph[11] = (uint8_t)l4;
        assert_int_equal(folded(sum_bytes(proto == 1 ? 0 : sum_bytes(0, ph, 12), p + 20, l4)),
                         0xffff);
    } else {
        assert_int_equal(be16(p + 4), l4);
        memcpy(ph, p + 8, 32);
        ph[34] = (uint8_t)(l4 >> 8);
        ph[35] = (uint8_t)l4;
        ph[39] = (uint8_t)proto;
        assert_int_equal(folded(sum_bytes(sum_bytes(0, ph, 40), p + 40, l4)), 0xffff);
    }
    return proto;
}

/* A built packet: checksums right (check_sums), parses whole, TTL 64. */
static struct ip_view
check(const uint8_t *p, size_t n, int proto)
{
    struct ip_view v;

    assert_int_equal(check_sums(p, n), proto);
    assert_int_equal(ip_view_parse(&v, p, n), IP_OK);
    assert_int_equal(v.pkt_len, n);
    assert_int_equal(v.ttl, 64);
    return v;
}

/* The unreachable for |pkt| (which parses, or fails with IP_ERR_PROTO) in
 * |cap| bytes. A non-empty answer is checked: sums, type and code, the
 * addresses swapped, the quote a prefix of |pkt|, and no answer to it. */
static size_t
unreach(const uint8_t *pkt, size_t len, size_t cap)
{
    static uint8_t out[1600], again[1600];
    struct ip_view orig, v;
    int r = ip_view_parse(&orig, pkt, len);
    size_t n, h;

    assert_true(r == IP_OK || r == IP_ERR_PROTO);
    n = ip_build_unreach(out, cap, &orig, 3, 4);
    if (n == 0)
        return 0;
    h = orig.version == 4 ? 28 : 48;
    v = check(out, n, orig.version == 4 ? 1 : 58);
    assert_int_equal(v.icmp_type, orig.version == 4 ? 3 : 1);
    assert_int_equal(v.icmp_code, orig.version == 4 ? 3 : 4);
    assert_int_equal(be16(out + h - 4) | be16(out + h - 2), 0);
    assert_memory_equal(v.src, orig.dst, 16);
    assert_memory_equal(v.dst, orig.src, 16);
    assert_memory_equal(out + h, pkt, n - h);
    assert_int_equal(ip_build_unreach(again, sizeof(again), &v, 3, 4), 0);
    return n;
}

static void
test_udp(void **state)
{
    static const uint8_t data[5] = {'h', 'e', 'l', 'l', 'o'};
    uint8_t out[100];
    struct ip_view v;

    (void)state;
    assert_int_equal(ip_build_udp(out, sizeof(out), 4, v4b, 53, v4a, 59898, data, 5), 33);
    v = check(out, 33, 17);
    /* DF clear, id 0, no options. */
    assert_int_equal(out[0], 0x45);
    assert_int_equal(be16(out + 4) | be16(out + 6), 0);
    assert_memory_equal(v.src, v4b, 4);
    assert_memory_equal(v.dst, v4a, 4);
    assert_int_equal(v.sport, 53);
    assert_int_equal(v.dport, 59898);
    assert_int_equal(v.payload_len, 5);
    assert_memory_equal(v.payload, data, 5);

    assert_int_equal(ip_build_udp(out, sizeof(out), 6, v6b, 53, v6a, 52763, data, 5), 53);
    v = check(out, 53, 17);
    assert_int_equal(be16(out) | be16(out + 2), 0x6000);
    assert_memory_equal(v.src, v6b, 16);
    assert_int_equal(v.dport, 52763);
    assert_memory_equal(v.payload, data, 5);

    assert_int_equal(ip_build_udp(out, sizeof(out), 4, v4b, 1, v4a, 2, NULL, 0), 28);
    assert_int_equal(check(out, 28, 17).payload_len, 0);
}

/* A datagram whose checksum comes out 0 must carry ffff instead (0 would
 * mean "no checksum", which v6 forbids). Set the payload word to the
 * checksum of a zero payload: the sum then becomes ffff. */
static void
test_udp_zero_checksum(void **state)
{
    uint8_t out[100], pl[2] = {0, 0};

    (void)state;
    for (int version = 4; version <= 6; version += 2) {
        const uint8_t *s = version == 4 ? v4a : v6a, *d = version == 4 ? v4b : v6b;
        size_t h = version == 4 ? 20 : 40;

        assert_int_equal(ip_build_udp(out, sizeof(out), version, s, 7, d, 9, pl, 2), h + 10);
        memcpy(pl, out + h + 6, 2);
        assert_int_equal(ip_build_udp(out, sizeof(out), version, s, 7, d, 9, pl, 2), h + 10);
        assert_int_equal(be16(out + h + 6), 0xffff);
        check(out, h + 10, 17);
        pl[0] = pl[1] = 0;
    }
}

/* Room and size limits; the payload may already sit in place or overlap
 * the headers, and the addresses may point into |out|. */
static void
test_udp_limits(void **state)
{
    uint8_t *big = calloc(1, 65536), want[100], out[100];

    (void)state;
    assert_non_null(big);
    assert_int_equal(ip_build_udp(big, 32, 4, v4a, 1, v4b, 2, big, 5), 0);
    assert_int_equal(ip_build_udp(big, 33, 4, v4a, 1, v4b, 2, big + 40000, 5), 33);
    assert_int_equal(ip_build_udp(big, 52, 6, v6a, 1, v6b, 2, big + 40000, 5), 0);
    assert_int_equal(ip_build_udp(big, 5, 5, v6a, 1, v6b, 2, NULL, 0), 0);
    /* 65535 bytes at most in all, for either version. */
    assert_int_equal(ip_build_udp(big, 65536, 4, v4a, 1, v4b, 2, big + 28, 65507), 65535);
    check(big, 65535, 17);
    assert_int_equal(ip_build_udp(big, 65536, 4, v4a, 1, v4b, 2, big + 28, 65508), 0);
    assert_int_equal(ip_build_udp(big, 65536, 6, v6a, 1, v6b, 2, big + 48, 65487), 65535);
    check(big, 65535, 17);
    assert_int_equal(ip_build_udp(big, 65536, 6, v6a, 1, v6b, 2, big + 48, 65488), 0);
    free(big);

    assert_int_equal(ip_build_udp(want, 100, 4, v4b, 53, v4a, 59898, udp4_dns + 28, 29), 57);
    memcpy(out, udp4_dns, 57);
    assert_int_equal(ip_build_udp(out, 100, 4, out + 16, 53, out + 12, 59898, out + 28, 29), 57);
    assert_memory_equal(out, want, 57);
    memcpy(out, udp4_dns + 28, 29);
    memcpy(out + 60, v4a, 4);
    assert_int_equal(ip_build_udp(out, 100, 4, v4b, 53, out + 60, 59898, out, 29), 57);
    assert_memory_equal(out, want, 57);
}

/* How much is quoted: all of a small packet; of a big one, up to 576 bytes
 * in all (v4, RFC 1812) or 1280 (v6, RFC 4443), and within |cap| never
 * less than the IP headers and 8 bytes of L4. */
static void
test_unreach_quote(void **state)
{
    uint8_t *pkt = calloc(1, 2100);
    struct ip_view orig;

    (void)state;
    assert_non_null(pkt);
    assert_int_equal(unreach(udp4_dns, 57, 1600), 85);
    /* Built over the packet's own buffer, the answer is the same. */
    memcpy(pkt, udp4_dns, 57);
    assert_int_equal(ip_view_parse(&orig, pkt, 57), IP_OK);
    assert_int_equal(ip_build_unreach(pkt, 85, &orig, 3, 4), 85);
    assert_memory_equal(pkt + 28, udp4_dns, 57);
    assert_int_equal(check(pkt, 85, 1).icmp_type, 3);
    ip_build_udp(pkt, 1500, 6, v6a, 1000, v6b, 2000, pkt + 48, 1452);
    assert_int_equal(unreach(pkt, 1500, 1600), 1280);
    assert_int_equal(unreach(pkt, 1500, 96), 96);
    assert_int_equal(unreach(pkt, 1500, 95), 0);
    ip_build_udp(pkt, 1500, 4, v4a, 1000, v4b, 2000, pkt + 28, 1472);
    assert_int_equal(unreach(pkt, 1500, 1600), 576);
    assert_int_equal(unreach(pkt, 1500, 56), 56);
    assert_int_equal(unreach(pkt, 1500, 55), 0);

    /* A 4-byte ICMP timestamp request is shorter than IHL*4 + 8: all of
     * it, or nothing. */
    memcpy(pkt, udp4_dns, 20);
    pkt[3] = 24;
    pkt[9] = 1;
    memcpy(pkt + 20, "\x0d\0\0\0", 4);
    assert_int_equal(unreach(pkt, 24, 1600), 52);
    assert_int_equal(unreach(pkt, 24, 51), 0);

    /* v6 extension headers over 1232 bytes: the quote stops at 1280 in
     * all even though it misses the L4 header. */
    ip_build_udp(pkt, 48, 6, v6a, 1, v6b, 2, NULL, 0);
    memmove(pkt + 40 + 2048, pkt + 40, 8);
    memset(pkt + 40, 0, 2048);
    pkt[4] = (2048 + 8) >> 8;
    pkt[5] = (2048 + 8) & 0xff;
    pkt[6] = 0;
    pkt[40] = 17;
    pkt[41] = 255;
    assert_int_equal(unreach(pkt, 2096, 1600), 1280);
    assert_int_equal(unreach(pkt, 2096, 1279), 0);
    free(pkt);
}

/* Never about an ICMP error (v4: anything but the query types echo,
 * router, timestamp, info and mask; v6: types below 128, and redirects),
 * nor to or from an address that is not one host (RFC 1122 §3.2.2, RFC
 * 4443 §2.4(e)). Protocol unreachable works from an IP_ERR_PROTO view. */
static void
test_unreach_refusals(void **state)
{
    static const struct {
        uint8_t at, val;
        size_t want;
    } v4[] = {{16, 224, 0}, {16, 239, 0}, {16, 255, 0}, {12, 0, 0}, {12, 127, 0}, {9, 132, 85}};
    uint8_t pkt[100];

    (void)state;
    memcpy(pkt, udp4_dns, 57);
    pkt[9] = 1;
    for (int t = 0; t < 256; t++) {
        pkt[20] = (uint8_t)t;
        if ((t == 0 || (t >= 8 && t <= 10) || (t >= 13 && t <= 18)) != (unreach(pkt, 57, 200) != 0))
            fail_msg("ICMP type %d answered wrongly", t);
    }
    for (size_t i = 0; i < sizeof(v4) / sizeof(v4[0]); i++) {
        memcpy(pkt, udp4_dns, 57);
        pkt[v4[i].at] = v4[i].val;
        assert_int_equal(unreach(pkt, 57, 200), v4[i].want);
    }

    ip_build_udp(pkt, sizeof(pkt), 6, v6a, 1, v6b, 2, NULL, 0);
    pkt[6] = 58;
    pkt[40] = 137;
    assert_int_equal(unreach(pkt, 48, 200), 0);
    pkt[40] = 127;
    assert_int_equal(unreach(pkt, 48, 200), 0);
    pkt[40] = 128;
    assert_int_equal(unreach(pkt, 48, 200), 96);
    pkt[24] = 0xff;
    assert_int_equal(unreach(pkt, 48, 200), 0);
    pkt[24] = 0xfd;
    memset(pkt + 8, 0, 16);
    assert_int_equal(unreach(pkt, 48, 200), 0);
}

/* The echo requests Linux sent (see view_test.c), 56 data bytes 08..3f
 * each. A reply differs in the type alone (and the address swap, which
 * leaves the pseudo-header sum as it was), so RFC 1624 gives its checksum:
 * v4 c0f8 + 0800, v6 4e78 - 0100. */
static void
test_echo_reply(void **state)
{
    static const struct {
        const uint8_t *head;
        size_t h;
        int proto, type;
        unsigned id, sum;
    } c[2] = {{echo4_head, 20, 1, 0, 0x5f12, 0xc8f8}, {echo6_head, 40, 58, 129, 0x5f13, 0x4d78}};
    uint8_t req[112], out[200];
    struct ip_view r, v;

    (void)state;
    for (int i = 0; i < 2; i++) {
        size_t h = c[i].h, n = h + 64;

        memcpy(req, c[i].head, h + 8);
        for (size_t k = h + 8; k < n; k++)
            req[k] = (uint8_t)(k - h);
        assert_int_equal(ip_view_parse(&r, req, n), IP_OK);
        assert_int_equal(ip_build_echo_reply(out, sizeof(out), &r), n);
        v = check(out, n, c[i].proto);
        assert_int_equal(v.icmp_type, c[i].type);
        assert_int_equal(v.icmp_code, 0);
        assert_int_equal(v.sport, c[i].id);
        assert_memory_equal(v.src, r.dst, 16);
        assert_memory_equal(v.dst, r.src, 16);
        assert_int_equal(be16(out + h + 2), c[i].sum);
        assert_memory_equal(out + h + 4, req + h + 4, 60);
        /* No answer to the answer, none without room; over itself, the same. */
        assert_int_equal(ip_build_echo_reply(out + n, sizeof(out) - n, &v), 0);
        assert_int_equal(ip_build_echo_reply(req, n - 1, &r), 0);
        assert_int_equal(ip_build_echo_reply(req, n, &r), n);
        assert_memory_equal(req, out, n);
    }

    /* A v6 request with a hop-by-hop header, answered over itself: the
     * data moves 8 bytes down, and the answer has no extension header. */
    memcpy(req, echo6_head, 48);
    memset(req + 40, 0, 8);
    req[40] = 58;
    req[6] = 0;
    req[5] = 72;
    memcpy(req + 48, echo6_head + 40, 8);
    for (size_t k = 56; k < 112; k++)
        req[k] = (uint8_t)(k - 48);
    assert_int_equal(ip_view_parse(&r, req, 112), IP_OK);
    assert_int_equal(ip_build_echo_reply(req, sizeof(req), &r), 104);
    assert_memory_equal(req, out, 104);

    /* A ping to a group gets no answer: there is no source to give it. */
    memcpy(req, echo6_head, 48);
    req[24] = 0xff;
    assert_int_equal(ip_view_parse(&r, req, 104), IP_OK);
    assert_int_equal(ip_build_echo_reply(out, sizeof(out), &r), 0);
    /* Nor does anything but an echo request. */
    assert_int_equal(ip_view_parse(&r, udp4_dns, 57), IP_OK);
    assert_int_equal(ip_build_echo_reply(out, sizeof(out), &r), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_udp),
        cmocka_unit_test(test_udp_zero_checksum),
        cmocka_unit_test(test_udp_limits),
        cmocka_unit_test(test_unreach_quote),
        cmocka_unit_test(test_unreach_refusals),
        cmocka_unit_test(test_echo_reply),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
