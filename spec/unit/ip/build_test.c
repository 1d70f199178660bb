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
static const uint8_t echo4_head[28] = {
    0x45, 0x00, 0x00, 0x54, 0x6d, 0x09, 0x40, 0x00, 0x40, 0x01, 0xb9, 0x9d, 0x0a, 0x00,
    0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xc0, 0xf8, 0x5f, 0x12, 0x00, 0x01};
static const uint8_t echo6_head[48] = {
    0x60, 0x06, 0xa4, 0x33, 0x00, 0x40, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00,
    0x4e, 0x78, 0x5f, 0x13, 0x00, 0x01};
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

static void
parse_ok(struct ip_view *v, const uint8_t *p, size_t n)
{
    assert_int_equal(ip_view_parse(v, p, n), IP_OK);
    assert_int_equal(v->pkt_len, n);
}

static void
test_udp(void **state)
{
    static const uint8_t data[5] = "hello";
    uint8_t out[100];
    struct ip_view v;
    size_t n;

    (void)state;
    n = ip_build_udp(out, sizeof(out), 4, v4b, 53, v4a, 59898, data, 5);
    assert_int_equal(n, 33);
    assert_int_equal(check_sums(out, n), 17);
    /* DF clear, id 0, TTL 64, no options. */
    assert_int_equal(out[0], 0x45);
    assert_int_equal(be16(out + 4), 0);
    assert_int_equal(be16(out + 6), 0);
    assert_int_equal(out[8], 64);
    parse_ok(&v, out, n);
    assert_memory_equal(v.src, v4b, 4);
    assert_memory_equal(v.dst, v4a, 4);
    assert_int_equal(v.sport, 53);
    assert_int_equal(v.dport, 59898);
    assert_int_equal(v.payload_len, 5);
    assert_memory_equal(v.payload, data, 5);

    n = ip_build_udp(out, sizeof(out), 6, v6b, 53, v6a, 52763, data, 5);
    assert_int_equal(n, 53);
    assert_int_equal(check_sums(out, n), 17);
    assert_int_equal(be16(out), 0x6000);
    assert_int_equal(be16(out + 2), 0);
    assert_int_equal(out[7], 64);
    parse_ok(&v, out, n);
    assert_memory_equal(v.src, v6b, 16);
    assert_int_equal(v.dport, 52763);
    assert_memory_equal(v.payload, data, 5);

    /* Empty datagrams. */
    n = ip_build_udp(out, sizeof(out), 4, v4b, 1, v4a, 2, NULL, 0);
    assert_int_equal(n, 28);
    check_sums(out, n);
    parse_ok(&v, out, n);
    assert_int_equal(v.payload_len, 0);
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
        check_sums(out, h + 10);
        pl[0] = pl[1] = 0;
    }
}

static void
test_udp_limits(void **state)
{
    uint8_t *big = calloc(1, 65536);

    (void)state;
    assert_non_null(big);
    assert_int_equal(ip_build_udp(big, 32, 4, v4a, 1, v4b, 2, big, 5), 0);
    assert_int_equal(ip_build_udp(big, 33, 4, v4a, 1, v4b, 2, big + 40000, 5), 33);
    assert_int_equal(ip_build_udp(big, 52, 6, v6a, 1, v6b, 2, big + 40000, 5), 0);
    assert_int_equal(ip_build_udp(big, 5, 5, v6a, 1, v6b, 2, NULL, 0), 0);
    /* 65535 bytes at most in all, for either version. */
    assert_int_equal(ip_build_udp(big, 65536, 4, v4a, 1, v4b, 2, big + 28, 65507), 65535);
    check_sums(big, 65535);
    assert_int_equal(ip_build_udp(big, 65536, 4, v4a, 1, v4b, 2, big + 28, 65508), 0);
    assert_int_equal(ip_build_udp(big, 65536, 6, v6a, 1, v6b, 2, big + 48, 65487), 65535);
    check_sums(big, 65535);
    assert_int_equal(ip_build_udp(big, 65536, 6, v6a, 1, v6b, 2, big + 48, 65488), 0);
    free(big);
}

/* The payload may already sit in place, or overlap the headers, and the
 * addresses may point into |out|: the result is the same. */
static void
test_udp_in_place(void **state)
{
    uint8_t want[100], out[100];
    size_t n;

    (void)state;
    n = ip_build_udp(want, sizeof(want), 4, v4b, 53, v4a, 59898, udp4_dns + 28, 29);
    memcpy(out, udp4_dns, 57);
    assert_int_equal(ip_build_udp(out, sizeof(out), 4, out + 16, 53, out + 12, 59898, out + 28, 29),
                     n);
    assert_memory_equal(out, want, n);
    memcpy(out, udp4_dns + 28, 29);
    memcpy(out + 60, v4a, 4);
    assert_int_equal(ip_build_udp(out, sizeof(out), 4, v4b, 53, out + 60, 59898, out, 29), n);
    assert_memory_equal(out, want, n);
}

static void
test_unreach(void **state)
{
    uint8_t out[1600], pkt[1500];
    struct ip_view orig, v;
    size_t n;

    (void)state;
    parse_ok(&orig, udp4_dns, 57);
    n = ip_build_unreach(out, sizeof(out), &orig, 3, 4);
    assert_int_equal(n, 28 + 57);
    assert_int_equal(check_sums(out, n), 1);
    parse_ok(&v, out, n);
    assert_int_equal(v.icmp_type, 3);
    assert_int_equal(v.icmp_code, 3);
    assert_memory_equal(v.src, v4b, 4);
    assert_memory_equal(v.dst, v4a, 4);
    assert_int_equal(be16(out + 24) | be16(out + 26), 0);
    assert_memory_equal(out + 28, udp4_dns, 57);
    /* Never an answer to the answer. */
    assert_int_equal(ip_build_unreach(out + 100, 1000, &v, 3, 4), 0);

    /* v6, from a 1500-byte datagram: the answer stops at 1280 bytes. */
    memset(pkt, 0x5a, sizeof(pkt));
    ip_build_udp(pkt, sizeof(pkt), 6, v6a, 1000, v6b, 2000, pkt + 48, 1452);
    parse_ok(&orig, pkt, 1500);
    n = ip_build_unreach(out, sizeof(out), &orig, 3, 4);
    assert_int_equal(n, 1280);
    assert_int_equal(check_sums(out, n), 58);
    parse_ok(&v, out, n);
    assert_int_equal(v.icmp_type, 1);
    assert_int_equal(v.icmp_code, 4);
    assert_memory_equal(v.src, v6b, 16);
    assert_memory_equal(out + 48, pkt, 1232);
    assert_int_equal(ip_build_unreach(out + 100, 1400, &v, 3, 4), 0);
    /* Down to the IP header and 8 bytes of UDP, no less. */
    assert_int_equal(ip_build_unreach(out, 48 + 48, &orig, 3, 4), 96);
    check_sums(out, 96);
    assert_int_equal(ip_build_unreach(out, 48 + 47, &orig, 3, 4), 0);

    /* v4 from 1500 bytes: 576 in all (RFC 1812). */
    ip_build_udp(pkt, sizeof(pkt), 4, v4a, 1000, v4b, 2000, pkt + 28, 1472);
    parse_ok(&orig, pkt, 1500);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 1, 4), 576);
    assert_int_equal(check_sums(out, 576), 1);
    assert_int_equal(ip_build_unreach(out, 56, &orig, 1, 4), 56);
    assert_int_equal(ip_build_unreach(out, 55, &orig, 1, 4), 0);

    /* Shorter than IP header + 8 (a 4-byte ICMP timestamp request): all
     * of it is quoted, and nothing less. */
    memcpy(pkt, udp4_dns, 24);
    pkt[9] = 1;
    pkt[20] = 13;
    pkt[3] = 24;
    parse_ok(&orig, pkt, 24);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 1, 4), 52);
    check_sums(out, 52);
    assert_int_equal(ip_build_unreach(out, 51, &orig, 1, 4), 0);
}

/* v6 extension headers longer than 1232 bytes: the quote stops at 1280
 * bytes in all even though it misses the L4 header. */
static void
test_unreach_long_headers(void **state)
{
    uint8_t *pkt = calloc(1, 40 + 2048 + 8), out[1500];
    struct ip_view orig;

    (void)state;
    assert_non_null(pkt);
    ip_build_udp(pkt, 48, 6, v6a, 1, v6b, 2, NULL, 0);
    memmove(pkt + 40 + 2048, pkt + 40, 8);
    memset(pkt + 40, 0, 2048);
    pkt[4] = (2048 + 8) >> 8;
    pkt[5] = (2048 + 8) & 0xff;
    pkt[6] = 0;
    pkt[40] = 17;
    pkt[41] = 255;
    parse_ok(&orig, pkt, 40 + 2048 + 8);
    assert_int_equal(orig.ip_hlen, 40 + 2048);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 1280);
    check_sums(out, 1280);
    assert_int_equal(ip_build_unreach(out, 1279, &orig, 3, 4), 0);
    free(pkt);
}

static void
test_unreach_refusals(void **state)
{
    uint8_t out[200], pkt[100];
    struct ip_view orig;

    (void)state;
    /* v4 answers only the query types (echo, router, timestamp, info,
     * mask); errors and unknown types get nothing. Nor does a v6 redirect. */
    memcpy(pkt, udp4_dns, 57);
    pkt[9] = 1;
    for (int t = 0; t < 256; t++) {
        size_t n;

        pkt[20] = (uint8_t)t;
        parse_ok(&orig, pkt, 57);
        n = ip_build_unreach(out, sizeof(out), &orig, 3, 4);
        if ((t == 0 || (t >= 8 && t <= 10) || (t >= 13 && t <= 18)) != (n != 0))
            fail_msg("ICMP type %d answered wrongly", t);
    }
    ip_build_udp(pkt, sizeof(pkt), 6, v6a, 1, v6b, 2, NULL, 0);
    pkt[6] = 58;
    pkt[40] = 137;
    parse_ok(&orig, pkt, 48);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 0);
    pkt[40] = 128;
    parse_ok(&orig, pkt, 48);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 96);

    /* To a group or from no single host (RFC 1122 §3.2.2). */
    memcpy(pkt, udp4_dns, 57);
    pkt[16] = 224;
    parse_ok(&orig, pkt, 57);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 0);
    pkt[16] = 255;
    parse_ok(&orig, pkt, 57);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 0);
    pkt[16] = 10;
    pkt[12] = 0;
    parse_ok(&orig, pkt, 57);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 0);
    ip_build_udp(pkt, sizeof(pkt), 6, v6a, 1, v6b, 2, NULL, 0);
    pkt[24] = 0xff;
    parse_ok(&orig, pkt, 48);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 3, 4), 0);

    /* Protocol unreachable: an IP_ERR_PROTO view still carries the IP part. */
    memcpy(pkt, udp4_dns, 57);
    pkt[9] = 132;
    assert_int_equal(ip_view_parse(&orig, pkt, 57), IP_ERR_PROTO);
    assert_int_equal(ip_build_unreach(out, sizeof(out), &orig, 2, 0), 85);
    assert_int_equal(check_sums(out, 85), 1);
    assert_int_equal(out[21], 2);
}

/* Built over the request's own buffer, the answer is the same. */
static void
test_unreach_in_place(void **state)
{
    uint8_t want[200], buf[200];
    struct ip_view orig;
    size_t n;

    (void)state;
    parse_ok(&orig, udp4_dns, 57);
    n = ip_build_unreach(want, sizeof(want), &orig, 3, 4);
    memcpy(buf, udp4_dns, 57);
    parse_ok(&orig, buf, 57);
    assert_int_equal(ip_build_unreach(buf, sizeof(buf), &orig, 3, 4), n);
    assert_memory_equal(buf, want, n);
}

static void
test_echo_reply(void **state)
{
    static const uint8_t v4sum[2] = {0xc8, 0xf8}, v6sum[2] = {0x4d, 0x78};
    uint8_t req[112], out[200];
    struct ip_view r, v;
    size_t n;

    (void)state;
    /* The echo requests Linux sent (see view_test.c), 56 data bytes 08..3f
     * each. The reply differs in the type alone (and the address swap,
     * which leaves the pseudo-header sum as it was), so RFC 1624 gives its
     * checksum: v4 c0f8 + 0800, v6 4e78 - 0100. */
    memcpy(req, echo4_head, 28);
    for (int i = 28; i < 84; i++)
        req[i] = (uint8_t)(i - 20);
    parse_ok(&r, req, 84);
    n = ip_build_echo_reply(out, sizeof(out), &r);
    assert_int_equal(n, 84);
    assert_int_equal(check_sums(out, n), 1);
    parse_ok(&v, out, n);
    assert_int_equal(v.icmp_type, 0);
    assert_int_equal(v.icmp_code, 0);
    assert_int_equal(v.sport, 0x5f12);
    assert_memory_equal(v.src, v4b, 4);
    assert_memory_equal(v.dst, v4a, 4);
    assert_memory_equal(out + 22, v4sum, 2);
    assert_memory_equal(out + 24, req + 24, 60);
    assert_int_equal(ip_build_echo_reply(out + 100, 100, &v), 0);
    assert_int_equal(ip_build_echo_reply(out + 100, 83, &r), 0);
    /* In place. */
    assert_int_equal(ip_build_echo_reply(req, sizeof(req), &r), 84);
    assert_memory_equal(req, out, 84);

    memcpy(req, echo6_head, 48);
    for (int i = 48; i < 104; i++)
        req[i] = (uint8_t)(i - 40);
    parse_ok(&r, req, 104);
    n = ip_build_echo_reply(out, sizeof(out), &r);
    assert_int_equal(n, 104);
    assert_int_equal(check_sums(out, n), 58);
    parse_ok(&v, out, n);
    assert_int_equal(v.icmp_type, 129);
    assert_int_equal(v.sport, 0x5f13);
    assert_memory_equal(v.src, v6b, 16);
    assert_memory_equal(out + 42, v6sum, 2);
    assert_memory_equal(out + 44, req + 44, 60);
    assert_int_equal(ip_build_echo_reply(out + 104, 96, &v), 0);

    /* A request with a hop-by-hop header, answered over itself: the data
     * moves 8 bytes down, and the answer has no extension header. */
    memmove(req + 48, req + 40, 64);
    memset(req + 40, 0, 8);
    req[40] = 58;
    req[6] = 0;
    req[5] = 72;
    parse_ok(&r, req, 112);
    assert_int_equal(ip_build_echo_reply(req, sizeof(req), &r), 104);
    assert_memory_equal(req, out, 104);

    /* A ping to a group gets no answer: there is no source to give it. */
    memcpy(req, echo6_head, 48);
    req[24] = 0xff;
    parse_ok(&r, req, 104);
    assert_int_equal(ip_build_echo_reply(out, sizeof(out), &r), 0);
    /* Nor does anything but an echo request. */
    parse_ok(&r, udp4_dns, 57);
    assert_int_equal(ip_build_echo_reply(out, sizeof(out), &r), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_udp),          cmocka_unit_test(test_udp_zero_checksum),
        cmocka_unit_test(test_udp_limits),   cmocka_unit_test(test_udp_in_place),
        cmocka_unit_test(test_unreach),      cmocka_unit_test(test_unreach_refusals),
        cmocka_unit_test(test_unreach_in_place), cmocka_unit_test(test_unreach_long_headers),
        cmocka_unit_test(test_echo_reply),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
