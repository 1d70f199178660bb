/* ip_view_parse on packets Linux wrote to a TUN (captured in a network
 * namespace, checksums by the kernel) and on hand-made variants: every
 * truncation, each broken length field, fragments, extension headers and
 * unsupported protocols. Every parse runs on a heap copy of exactly the
 * given size, so a read past the end trips ASan. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ip/ip.h"

/* 10.0.0.1:36750 -> 10.0.0.2:80 SYN: MSS, SACK-permitted, timestamps, WS. */
static const uint8_t tcp4_syn[60] = {
    0x45, 0x00, 0x00, 0x3c, 0x67, 0xee, 0x40, 0x00, 0x40, 0x06, 0xbe, 0xcb, 0x0a, 0x00, 0x00,
    0x01, 0x0a, 0x00, 0x00, 0x02, 0x8f, 0x8e, 0x00, 0x50, 0x10, 0x81, 0x87, 0x91, 0x00, 0x00,
    0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0xa0, 0xd5, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04,
    0x02, 0x08, 0x0a, 0x78, 0xea, 0xf7, 0x58, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a};

/* [fd00::1]:45550 -> [fd00::2]:80 SYN with the same options. */
static const uint8_t tcp6_syn[80] = {
    0x60, 0x0c, 0xcf, 0x5b, 0x00, 0x28, 0x06, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xb1, 0xee,
    0x00, 0x50, 0x81, 0x00, 0xdf, 0x52, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfd, 0x20,
    0x1e, 0xcf, 0x00, 0x00, 0x02, 0x04, 0x05, 0xa0, 0x04, 0x02, 0x08, 0x0a, 0x21, 0x7c,
    0xfe, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a};

/* 10.0.0.1:59898 -> 10.0.0.2:53, DNS query for example.com A. */
static const uint8_t udp4_dns[57] = {
    0x45, 0x00, 0x00, 0x39, 0xff, 0x1b, 0x40, 0x00, 0x40, 0x11, 0x27, 0x96, 0x0a, 0x00, 0x00,
    0x01, 0x0a, 0x00, 0x00, 0x02, 0xe9, 0xfa, 0x00, 0x35, 0x00, 0x25, 0x1f, 0xd0, 0x12, 0x34,
    0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d,
    0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01};

/* Echo request id 0x5f12 seq 1, 56 data bytes 0x08..0x3f; the v6 one has
 * id 0x5f13 and the same data. */
static const uint8_t icmp4_echo[84] = {
    0x45, 0x00, 0x00, 0x54, 0x6d, 0x09, 0x40, 0x00, 0x40, 0x01, 0xb9, 0x9d, 0x0a, 0x00,
    0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0xc0, 0xf8, 0x5f, 0x12, 0x00, 0x01,
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15,
    0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23,
    0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31,
    0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f};

static const uint8_t icmp6_echo_head[48] = {
    0x60, 0x06, 0xa4, 0x33, 0x00, 0x40, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00,
    0x4e, 0x78, 0x5f, 0x13, 0x00, 0x01};

/* MLDv2 report joining ff05::1234: a hop-by-hop header (router alert, PadN)
 * before ICMPv6 type 143. */
static const uint8_t mld_hbh[76] = {
    0x60, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x92, 0x79, 0xf7, 0xb1, 0x0b, 0x56, 0x40, 0x7b, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x3a, 0x00, 0x05, 0x02, 0x00,
    0x00, 0x01, 0x00, 0x8f, 0x00, 0x87, 0xd7, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00,
    0xff, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12,
    0x34};

static uint8_t icmp6_echo[104];

static void
put16(uint8_t *p, unsigned x)
{
    p[0] = (uint8_t)(x >> 8);
    p[1] = (uint8_t)x;
}

/* Parses a heap copy of exactly |len| bytes; |keep| receives the copy so a
 * successful view stays valid (the caller frees it). */
static int
parse_copy(struct ip_view *v, const uint8_t *pkt, size_t len, uint8_t **keep)
{
    uint8_t *copy = malloc(len);
    int r;

    assert_non_null(copy);
    memcpy(copy, pkt, len);
    r = ip_view_parse(v, copy, len);
    if (keep != NULL)
        *keep = copy;
    else
        free(copy);
    return r;
}

static int
parse_err(const uint8_t *pkt, size_t len)
{
    struct ip_view v;

    return parse_copy(&v, pkt, len, NULL);
}

/* The invariants the view promises on success (see view.c). */
static void
check_view(const struct ip_view *v, const uint8_t *pkt, size_t len)
{
    assert_ptr_equal(v->pkt, pkt);
    assert_true(v->pkt_len <= len);
    assert_ptr_equal(v->l4, pkt + v->ip_hlen);
    assert_int_equal(v->ip_hlen + v->l4_len, v->pkt_len);
    assert_true(v->payload >= v->l4 && v->payload_len <= v->l4_len);
    assert_true(v->payload + v->payload_len <= v->l4 + v->l4_len);
}

static int
setup(void **state)
{
    (void)state;
    memcpy(icmp6_echo, icmp6_echo_head, 48);
    for (int i = 48; i < 104; i++)
        icmp6_echo[i] = (uint8_t)(i - 40);
    return 0;
}

static void
test_tcp_syn(void **state)
{
    static const uint8_t a4[16] = {10, 0, 0, 1}, b4[16] = {10, 0, 0, 2};
    static const uint8_t a6[16] = {0xfd, [15] = 1}, b6[16] = {0xfd, [15] = 2};
    struct ip_view v;
    uint8_t *p;

    (void)state;
    assert_int_equal(parse_copy(&v, tcp4_syn, 60, &p), IP_OK);
    check_view(&v, p, 60);
    assert_int_equal(v.version, 4);
    assert_int_equal(v.proto, 6);
    assert_int_equal(v.ttl, 64);
    assert_int_equal(v.pkt_len, 60);
    assert_int_equal(v.ip_hlen, 20);
    assert_int_equal(v.l4_len, 40);
    assert_memory_equal(v.src, a4, 16);
    assert_memory_equal(v.dst, b4, 16);
    assert_int_equal(v.sport, 36750);
    assert_int_equal(v.dport, 80);
    assert_int_equal(v.tcp_flags, 0x02);
    assert_ptr_equal(v.payload, p + 60);
    assert_int_equal(v.payload_len, 0);
    free(p);

    assert_int_equal(parse_copy(&v, tcp6_syn, 80, &p), IP_OK);
    check_view(&v, p, 80);
    assert_int_equal(v.version, 6);
    assert_int_equal(v.proto, 6);
    assert_int_equal(v.ttl, 64);
    assert_int_equal(v.ip_hlen, 40);
    assert_int_equal(v.l4_len, 40);
    assert_memory_equal(v.src, a6, 16);
    assert_memory_equal(v.dst, b6, 16);
    assert_int_equal(v.sport, 45550);
    assert_int_equal(v.dport, 80);
    assert_int_equal(v.tcp_flags, 0x02);
    assert_int_equal(v.payload_len, 0);
    free(p);
}

static void
test_udp(void **state)
{
    uint8_t buf[80], *p;
    struct ip_view v;

    (void)state;
    assert_int_equal(parse_copy(&v, udp4_dns, 57, &p), IP_OK);
    check_view(&v, p, 57);
    assert_int_equal(v.proto, 17);
    assert_int_equal(v.sport, 59898);
    assert_int_equal(v.dport, 53);
    assert_ptr_equal(v.payload, p + 28);
    assert_int_equal(v.payload_len, 29);
    assert_int_equal(v.tcp_flags, 0);
    free(p);

    /* Link padding after the total length is ignored. */
    memcpy(buf, udp4_dns, 57);
    memset(buf + 57, 0xee, sizeof(buf) - 57);
    assert_int_equal(parse_copy(&v, buf, sizeof(buf), &p), IP_OK);
    assert_int_equal(v.pkt_len, 57);
    assert_int_equal(v.l4_len, 37);
    free(p);

    /* A UDP length short of the IP one: the payload ends where UDP says. */
    put16(buf + 24, 20);
    assert_int_equal(parse_copy(&v, buf, 57, &p), IP_OK);
    assert_int_equal(v.l4_len, 37);
    assert_int_equal(v.payload_len, 12);
    free(p);
}

static void
test_icmp_echo(void **state)
{
    struct ip_view v;
    uint8_t *p;

    (void)state;
    assert_int_equal(parse_copy(&v, icmp4_echo, 84, &p), IP_OK);
    check_view(&v, p, 84);
    assert_int_equal(v.proto, 1);
    assert_int_equal(v.icmp_type, 8);
    assert_int_equal(v.icmp_code, 0);
    assert_int_equal(v.sport, 0x5f12);
    assert_int_equal(v.dport, 0x5f12);
    assert_ptr_equal(v.payload, p + 24);
    assert_int_equal(v.payload_len, 60);
    free(p);

    assert_int_equal(parse_copy(&v, icmp6_echo, 104, &p), IP_OK);
    check_view(&v, p, 104);
    assert_int_equal(v.proto, 58);
    assert_int_equal(v.icmp_type, 128);
    assert_int_equal(v.sport, 0x5f13);
    assert_int_equal(v.dport, 0x5f13);
    assert_int_equal(v.payload_len, 60);
    free(p);
}

/* v4 options count in ip_hlen; v6 hop-by-hop, destination options and
 * routing headers are skipped, and ip_hlen covers them. */
static void
test_headers_skipped(void **state)
{
    uint8_t buf[120], *p;
    struct ip_view v;

    (void)state;
    assert_int_equal(parse_copy(&v, mld_hbh, 76, &p), IP_OK);
    check_view(&v, p, 76);
    assert_int_equal(v.ip_hlen, 48);
    assert_int_equal(v.proto, 58);
    assert_int_equal(v.icmp_type, 143);
    assert_int_equal(v.ttl, 1);
    assert_int_equal(v.l4_len, 28);
    assert_int_equal(v.sport, 0);
    free(p);

    /* IPv4 header with 4 bytes of options (NOPs), then the DNS query. */
    buf[0] = 0x46;
    memcpy(buf + 1, udp4_dns + 1, 19);
    put16(buf + 2, 61);
    memset(buf + 20, 1, 4);
    memcpy(buf + 24, udp4_dns + 20, 37);
    assert_int_equal(parse_copy(&v, buf, 61, &p), IP_OK);
    assert_int_equal(v.ip_hlen, 24);
    assert_int_equal(v.dport, 53);
    assert_int_equal(v.payload_len, 29);
    free(p);

    /* fd00::1 -> fd00::2: hop-by-hop (8) -> destination options (16) ->
     * routing (8) -> the UDP datagram of udp4_dns. */
    memcpy(buf, tcp6_syn, 40);
    buf[6] = 0;
    put16(buf + 4, 32 + 37);
    memset(buf + 40, 0, 32);
    buf[40] = 60;
    buf[48] = 43;
    buf[49] = 1;
    buf[64] = 17;
    memcpy(buf + 72, udp4_dns + 20, 37);
    assert_int_equal(parse_copy(&v, buf, 109, &p), IP_OK);
    check_view(&v, p, 109);
    assert_int_equal(v.ip_hlen, 72);
    assert_int_equal(v.proto, 17);
    assert_int_equal(v.dport, 53);
    assert_int_equal(v.payload_len, 29);
    free(p);

    /* A routing header of 56 bytes where 45 remain. */
    buf[65] = 6;
    assert_int_equal(parse_err(buf, 109), IP_ERR_LENGTH);
    buf[65] = 0;
    /* After the routing header one byte is left for the next extension
     * header: not even its length byte. */
    put16(buf + 4, 32 + 1);
    buf[64] = 60;
    assert_int_equal(parse_err(buf, 73), IP_ERR_LENGTH);
}

/* Every strict prefix of a valid packet is refused as truncated. */
static void
test_truncations(void **state)
{
    const struct {
        const uint8_t *p;
        size_t len;
    } pkts[] = {
        {tcp4_syn, 60}, {tcp6_syn, 80}, {udp4_dns, 57}, {icmp4_echo, 84}, {icmp6_echo, 104},
        {mld_hbh, 76},
    };
    struct ip_view v;

    (void)state;
    for (size_t i = 0; i < sizeof(pkts) / sizeof(pkts[0]); i++) {
        assert_int_equal(parse_err(pkts[i].p, pkts[i].len), IP_OK);
        for (size_t n = 0; n < pkts[i].len; n++)
            if (parse_err(pkts[i].p, n) != IP_ERR_TRUNCATED)
                fail_msg("packet %zu cut to %zu bytes not refused as truncated", i, n);
    }
    assert_int_equal(ip_view_parse(&v, NULL, 0), IP_ERR_TRUNCATED);
}

static void
test_bad_ip_lengths(void **state)
{
    uint8_t b[104];

    (void)state;
    memcpy(b, tcp4_syn, 60);
    b[0] = 0x55;
    assert_int_equal(parse_err(b, 60), IP_ERR_VERSION);
    b[0] = 0x05;
    assert_int_equal(parse_err(b, 60), IP_ERR_VERSION);
    b[0] = 0x44; /* IHL 4 */
    assert_int_equal(parse_err(b, 60), IP_ERR_LENGTH);
    b[0] = 0x4f; /* IHL 15: the options eat the whole TCP header */
    assert_int_equal(parse_err(b, 60), IP_ERR_L4);
    b[0] = 0x45;
    put16(b + 2, 19); /* total length below the header */
    assert_int_equal(parse_err(b, 60), IP_ERR_LENGTH);
    put16(b + 2, 61); /* total length past the buffer */
    assert_int_equal(parse_err(b, 60), IP_ERR_TRUNCATED);

    memcpy(b, icmp6_echo, 104);
    put16(b + 4, 65); /* payload length past the buffer */
    assert_int_equal(parse_err(b, 104), IP_ERR_TRUNCATED);
    put16(b + 4, 63); /* shorter: a valid echo with 55 data bytes */
    assert_int_equal(parse_err(b, 104), IP_OK);
    b[0] = 0x70;
    assert_int_equal(parse_err(b, 104), IP_ERR_VERSION);

    /* A v6 packet over 65535 bytes does not fit the view's lengths. */
    {
        uint8_t *big = calloc(1, 40 + 65535);

        assert_non_null(big);
        memcpy(big, icmp6_echo, 48);
        put16(big + 4, 65535 - 40);
        assert_int_equal(parse_err(big, 65535), IP_OK);
        put16(big + 4, 65535 - 39);
        assert_int_equal(parse_err(big, 65536), IP_ERR_LENGTH);
        put16(big + 4, 65535);
        assert_int_equal(parse_err(big, 40 + 65535), IP_ERR_LENGTH);
        free(big);
    }
}

static void
test_fragments(void **state)
{
    uint8_t b[120];

    (void)state;
    memcpy(b, udp4_dns, 57);
    b[6] = 0x20; /* MF */
    b[7] = 0;
    assert_int_equal(parse_err(b, 57), IP_ERR_FRAGMENT);
    b[6] = 0x00; /* offset 8, last fragment */
    b[7] = 0x01;
    assert_int_equal(parse_err(b, 57), IP_ERR_FRAGMENT);
    b[6] = 0x5f; /* DF with the top offset bits: still a fragment */
    b[7] = 0xff;
    assert_int_equal(parse_err(b, 57), IP_ERR_FRAGMENT);
    b[6] = 0x40; /* DF alone is fine */
    b[7] = 0x00;
    assert_int_equal(parse_err(b, 57), IP_OK);

    /* v6 fragment header (first fragment, M set), directly and after a
     * hop-by-hop header. */
    memcpy(b, tcp6_syn, 40);
    b[6] = 44;
    put16(b + 4, 16);
    memset(b + 40, 0, 16);
    b[40] = 17;
    b[43] = 1;
    assert_int_equal(parse_err(b, 56), IP_ERR_FRAGMENT);
    b[6] = 0;
    memmove(b + 48, b + 40, 8);
    memset(b + 40, 0, 8);
    b[40] = 44;
    assert_int_equal(parse_err(b, 56), IP_ERR_FRAGMENT);
}

static void
test_unsupported_proto(void **state)
{
    uint8_t b[104];
    struct ip_view v;
    uint8_t *p;

    (void)state;
    memcpy(b, udp4_dns, 57);
    b[9] = 47; /* GRE */
    /* The IP part of the view is still filled (protocol unreachable). */
    assert_int_equal(parse_copy(&v, b, 57, &p), IP_ERR_PROTO);
    assert_int_equal(v.proto, 47);
    assert_int_equal(v.pkt_len, 57);
    assert_int_equal(v.ip_hlen, 20);
    assert_ptr_equal(v.pkt, p);
    free(p);
    b[9] = 58; /* ICMPv6 in IPv4 */
    assert_int_equal(parse_err(b, 57), IP_ERR_PROTO);

    memcpy(b, icmp6_echo, 104);
    b[6] = 1; /* ICMPv4 in IPv6 */
    assert_int_equal(parse_err(b, 104), IP_ERR_PROTO);
    b[6] = 59; /* no next header */
    assert_int_equal(parse_err(b, 104), IP_ERR_PROTO);
    b[6] = 0; /* hop-by-hop, then ESP */
    b[40] = 50;
    b[41] = 0;
    assert_int_equal(parse_err(b, 104), IP_ERR_PROTO);
}

static void
test_bad_l4(void **state)
{
    uint8_t b[104];

    (void)state;
    memcpy(b, tcp4_syn, 60);
    b[32] = 0xb0; /* data offset 44 > the 40 bytes there */
    assert_int_equal(parse_err(b, 60), IP_ERR_L4);
    b[32] = 0x40; /* data offset 16 < 20 */
    assert_int_equal(parse_err(b, 60), IP_ERR_L4);
    b[32] = 0x50; /* 20: the options become 20 bytes of payload */
    assert_int_equal(parse_err(b, 60), IP_OK);
    put16(b + 2, 39); /* 19 TCP bytes */
    assert_int_equal(parse_err(b, 39), IP_ERR_L4);

    memcpy(b, udp4_dns, 57);
    put16(b + 24, 7);
    assert_int_equal(parse_err(b, 57), IP_ERR_L4);
    put16(b + 24, 0);
    assert_int_equal(parse_err(b, 57), IP_ERR_L4);
    put16(b + 24, 38);
    assert_int_equal(parse_err(b, 57), IP_ERR_L4);
    put16(b + 24, 8);
    assert_int_equal(parse_err(b, 57), IP_OK);
    put16(b + 2, 27); /* 7 UDP bytes */
    assert_int_equal(parse_err(b, 27), IP_ERR_L4);

    /* ICMP: 4 bytes are enough for a non-echo message, not for an echo. */
    memcpy(b, icmp4_echo, 84);
    put16(b + 2, 24);
    assert_int_equal(parse_err(b, 24), IP_ERR_L4);
    put16(b + 2, 27);
    assert_int_equal(parse_err(b, 27), IP_ERR_L4);
    put16(b + 2, 28);
    assert_int_equal(parse_err(b, 28), IP_OK);
    b[20] = 3;
    put16(b + 2, 23);
    assert_int_equal(parse_err(b, 23), IP_ERR_L4);
    put16(b + 2, 24);
    assert_int_equal(parse_err(b, 24), IP_OK);
    memcpy(b, icmp6_echo, 104);
    put16(b + 4, 7);
    assert_int_equal(parse_err(b, 47), IP_ERR_L4);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_syn),        cmocka_unit_test(test_udp),
        cmocka_unit_test(test_icmp_echo),      cmocka_unit_test(test_headers_skipped),
        cmocka_unit_test(test_truncations),    cmocka_unit_test(test_bad_ip_lengths),
        cmocka_unit_test(test_fragments),      cmocka_unit_test(test_unsupported_proto),
        cmocka_unit_test(test_bad_l4),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
