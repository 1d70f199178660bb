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
    0x60, 0x0c, 0xcf, 0x5b, 0x00, 0x28, 0x06, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xb1, 0xee, 0x00, 0x50, 0x81, 0x00, 0xdf, 0x52,
    0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfd, 0x20, 0x1e, 0xcf, 0x00, 0x00, 0x02, 0x04, 0x05, 0xa0,
    0x04, 0x02, 0x08, 0x0a, 0x21, 0x7c, 0xfe, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a};

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
    0x60, 0x06, 0xa4, 0x33, 0x00, 0x40, 0x3a, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x4e, 0x78, 0x5f, 0x13, 0x00, 0x01};

/* MLDv2 report joining ff05::1234: a hop-by-hop header (router alert, PadN)
 * before ICMPv6 type 143. */
static const uint8_t mld_hbh[76] = {
    0x60, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x92, 0x79, 0xf7, 0xb1, 0x0b, 0x56, 0x40, 0x7b, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00,
    0x8f, 0x00, 0x87, 0xd7, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xff, 0x05, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34};

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

/* A successful parse, pointers turned into offsets from the packet so the
 * copy can go; the invariants view.c promises are checked on the way. */
struct got {
    unsigned version, proto, ttl, pkt_len, ip_hlen, l4_len, sport, dport, tcp_flags, icmp_type,
        icmp_code, payload, payload_len;
};

static struct got
parse_ok(const uint8_t *pkt, size_t len, uint8_t src[16], uint8_t dst[16])
{
    struct ip_view v;
    struct got g;
    uint8_t *p;

    assert_int_equal(parse_copy(&v, pkt, len, &p), IP_OK);
    assert_ptr_equal(v.pkt, p);
    assert_true(v.pkt_len <= len);
    assert_ptr_equal(v.l4, p + v.ip_hlen);
    assert_int_equal(v.ip_hlen + v.l4_len, v.pkt_len);
    assert_true(v.payload >= v.l4 && v.payload_len <= v.l4_len);
    assert_true(v.payload + v.payload_len <= v.l4 + v.l4_len);
    g = (struct got){v.version,    v.proto,     v.ttl,       v.pkt_len,
                     v.ip_hlen,    v.l4_len,    v.sport,     v.dport,
                     v.tcp_flags,  v.icmp_type, v.icmp_code, (unsigned)(v.payload - p),
                     v.payload_len};
    if (src != NULL) {
        memcpy(src, v.src, 16);
        memcpy(dst, v.dst, 16);
    }
    free(p);
    return g;
}

/* Hand-made from the captures: the DNS query behind a v4 header with 4
 * bytes of options (NOPs), and behind a v6 chain hop-by-hop (8 bytes) ->
 * destination options (16) -> routing (8). */
static uint8_t v4_opts[61], v6_ext[109];

static int
setup(void **state)
{
    (void)state;
    memcpy(icmp6_echo, icmp6_echo_head, 48);
    for (int i = 48; i < 104; i++)
        icmp6_echo[i] = (uint8_t)(i - 40);

    memcpy(v4_opts, udp4_dns, 20);
    v4_opts[0] = 0x46;
    put16(v4_opts + 2, 61);
    memset(v4_opts + 20, 1, 4);
    memcpy(v4_opts + 24, udp4_dns + 20, 37);

    memcpy(v6_ext, tcp6_syn, 40);
    v6_ext[6] = 0;
    put16(v6_ext + 4, 32 + 37);
    v6_ext[40] = 60;
    v6_ext[48] = 43;
    v6_ext[49] = 1;
    v6_ext[64] = 17;
    memcpy(v6_ext + 72, udp4_dns + 20, 37);
    return 0;
}

static void
test_packets(void **state)
{
    static const struct {
        const uint8_t *p;
        size_t len;
        struct got want;
    } cases[] = {
        {tcp4_syn, 60, {4, 6, 64, 60, 20, 40, 36750, 80, 0x02, 0, 0, 60, 0}},
        {tcp6_syn, 80, {6, 6, 64, 80, 40, 40, 45550, 80, 0x02, 0, 0, 80, 0}},
        {udp4_dns, 57, {4, 17, 64, 57, 20, 37, 59898, 53, 0, 0, 0, 28, 29}},
        {icmp4_echo, 84, {4, 1, 64, 84, 20, 64, 0x5f12, 0x5f12, 0, 8, 0, 24, 60}},
        {icmp6_echo, 104, {6, 58, 64, 104, 40, 64, 0x5f13, 0x5f13, 0, 128, 0, 44, 60}},
        /* v4 options and v6 extension headers count in ip_hlen. */
        {mld_hbh, 76, {6, 58, 1, 76, 48, 28, 0, 0, 0, 143, 0, 52, 24}},
        {v4_opts, 61, {4, 17, 64, 61, 24, 37, 59898, 53, 0, 0, 0, 32, 29}},
        {v6_ext, 109, {6, 17, 64, 109, 72, 37, 59898, 53, 0, 0, 0, 80, 29}},
    };
    static const uint8_t a4[16] = {10, 0, 0, 1}, b4[16] = {10, 0, 0, 2};
    static const uint8_t a6[16] = {0xfd, [15] = 1}, b6[16] = {0xfd, [15] = 2};
    uint8_t src[16], dst[16], buf[80];
    struct got g;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        g = parse_ok(cases[i].p, cases[i].len, NULL, NULL);
        if (memcmp(&g, &cases[i].want, sizeof(g)) != 0)
            fail_msg("packet %zu: fields differ", i);
    }
    /* v4 addresses take the first 4 bytes, the rest is zero. */
    parse_ok(tcp4_syn, 60, src, dst);
    assert_memory_equal(src, a4, 16);
    assert_memory_equal(dst, b4, 16);
    parse_ok(tcp6_syn, 80, src, dst);
    assert_memory_equal(src, a6, 16);
    assert_memory_equal(dst, b6, 16);

    /* Link padding after the total length is ignored. */
    memcpy(buf, udp4_dns, 57);
    memset(buf + 57, 0xee, sizeof(buf) - 57);
    g = parse_ok(buf, sizeof(buf), NULL, NULL);
    assert_int_equal(g.pkt_len, 57);
    assert_int_equal(g.l4_len, 37);
    /* A UDP length short of the IP one: the payload ends where UDP says. */
    put16(buf + 24, 20);
    assert_int_equal(parse_ok(buf, 57, NULL, NULL).payload_len, 12);
}

/* Every strict prefix of a valid packet is refused as truncated. */
static void
test_truncations(void **state)
{
    const struct {
        const uint8_t *p;
        size_t len;
    } pkts[] = {
        {tcp4_syn, 60},    {tcp6_syn, 80}, {udp4_dns, 57}, {icmp4_echo, 84},
        {icmp6_echo, 104}, {mld_hbh, 76},  {v4_opts, 61},  {v6_ext, 109},
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

/* One broken field at a time: a copy of |base| with up to three edits
 * (|w| 1 or 2 bytes, big-endian), parsed over |len| bytes. */
struct edit_case {
    const uint8_t *base;
    size_t len;
    struct {
        uint16_t at, w, val;
    } e[3];
    int want;
};

static void
test_edits(void **state)
{
    static const struct edit_case cases[] = {
        /* IPv4 version, IHL and total length. */
        {tcp4_syn, 60, {{0, 1, 0x55}}, IP_ERR_VERSION},
        {tcp4_syn, 60, {{0, 1, 0x05}}, IP_ERR_VERSION},
        {tcp4_syn, 60, {{0, 1, 0x44}}, IP_ERR_LENGTH},
        {tcp4_syn, 60, {{0, 1, 0x4f}}, IP_ERR_L4}, /* options eat the TCP header */
        {tcp4_syn, 60, {{2, 2, 19}}, IP_ERR_LENGTH},
        {tcp4_syn, 60, {{2, 2, 61}}, IP_ERR_TRUNCATED},
        /* TCP data offset: past the segment, under 5, exactly 5. */
        {tcp4_syn, 60, {{32, 1, 0xb0}}, IP_ERR_L4},
        {tcp4_syn, 60, {{32, 1, 0x40}}, IP_ERR_L4},
        {tcp4_syn, 60, {{32, 1, 0x50}}, IP_OK},
        {tcp4_syn, 39, {{32, 1, 0x50}, {2, 2, 39}}, IP_ERR_L4},
        /* IPv4 fragments: MF, an offset, both under DF; DF alone is fine. */
        {udp4_dns, 57, {{6, 2, 0x2000}}, IP_ERR_FRAGMENT},
        {udp4_dns, 57, {{6, 2, 0x0001}}, IP_ERR_FRAGMENT},
        {udp4_dns, 57, {{6, 2, 0x5fff}}, IP_ERR_FRAGMENT},
        {udp4_dns, 57, {{6, 2, 0x4000}}, IP_OK},
        /* Protocols: GRE, and ICMPv6 in IPv4. */
        {udp4_dns, 57, {{9, 1, 47}}, IP_ERR_PROTO},
        {udp4_dns, 57, {{9, 1, 58}}, IP_ERR_PROTO},
        /* UDP length: under 8, 0 (v6 jumbogram), past the IP length. */
        {udp4_dns, 57, {{24, 2, 7}}, IP_ERR_L4},
        {udp4_dns, 57, {{24, 2, 0}}, IP_ERR_L4},
        {udp4_dns, 57, {{24, 2, 38}}, IP_ERR_L4},
        {udp4_dns, 57, {{24, 2, 8}}, IP_OK},
        {udp4_dns, 27, {{2, 2, 27}}, IP_ERR_L4},
        /* ICMP: 8 bytes for an echo, 4 for anything else. */
        {icmp4_echo, 24, {{2, 2, 24}}, IP_ERR_L4},
        {icmp4_echo, 27, {{2, 2, 27}}, IP_ERR_L4},
        {icmp4_echo, 28, {{2, 2, 28}}, IP_OK},
        {icmp4_echo, 23, {{2, 2, 23}, {20, 1, 3}}, IP_ERR_L4},
        {icmp4_echo, 24, {{2, 2, 24}, {20, 1, 3}}, IP_OK},
        {icmp6_echo, 47, {{4, 2, 7}}, IP_ERR_L4},
        /* IPv6 version and payload length. */
        {icmp6_echo, 104, {{0, 1, 0x70}}, IP_ERR_VERSION},
        {icmp6_echo, 104, {{4, 2, 65}}, IP_ERR_TRUNCATED},
        {icmp6_echo, 104, {{4, 2, 63}}, IP_OK},
        /* IPv6 protocols: ICMPv4, no next header, ESP after hop-by-hop. */
        {icmp6_echo, 104, {{6, 1, 1}}, IP_ERR_PROTO},
        {icmp6_echo, 104, {{6, 1, 59}}, IP_ERR_PROTO},
        {icmp6_echo, 104, {{6, 1, 0}, {40, 2, 50 << 8}}, IP_ERR_PROTO},
        /* v6 fragment header: first, after hop-by-hop, after routing. */
        {tcp6_syn, 80, {{6, 1, 44}}, IP_ERR_FRAGMENT},
        {v6_ext, 109, {{40, 1, 44}}, IP_ERR_FRAGMENT},
        {v6_ext, 109, {{64, 1, 44}}, IP_ERR_FRAGMENT},
        /* A routing header of 56 bytes where 45 remain; one byte left
         * after it for another header, not even its length byte. */
        {v6_ext, 109, {{65, 1, 6}}, IP_ERR_LENGTH},
        {v6_ext, 73, {{4, 2, 33}, {64, 1, 60}}, IP_ERR_LENGTH},
    };
    uint8_t b[109];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct edit_case *c = &cases[i];
        int r;

        memcpy(b, c->base, c->len);
        for (int k = 0; k < 3 && c->e[k].w; k++) {
            if (c->e[k].w == 2)
                put16(b + c->e[k].at, c->e[k].val);
            else
                b[c->e[k].at] = (uint8_t)c->e[k].val;
        }
        r = parse_err(b, c->len);
        if (r != c->want)
            fail_msg("case %zu: got %d, want %d", i, r, c->want);
    }
}

static void
test_limits(void **state)
{
    uint8_t b[57], *big = calloc(1, 40 + 65535);
    struct ip_view v;
    uint8_t *p;

    (void)state;
    /* A v6 packet over 65535 bytes does not fit the view's lengths. */
    assert_non_null(big);
    memcpy(big, icmp6_echo, 48);
    put16(big + 4, 65535 - 40);
    assert_int_equal(parse_err(big, 65535), IP_OK);
    put16(big + 4, 65535 - 39);
    assert_int_equal(parse_err(big, 65536), IP_ERR_LENGTH);
    free(big);

    /* After IP_ERR_PROTO the IP part of the view is filled, so chute can
     * still answer "protocol unreachable". */
    memcpy(b, udp4_dns, 57);
    b[9] = 47;
    assert_int_equal(parse_copy(&v, b, 57, &p), IP_ERR_PROTO);
    assert_int_equal(v.proto, 47);
    assert_int_equal(v.pkt_len, 57);
    assert_int_equal(v.ip_hlen, 20);
    assert_ptr_equal(v.pkt, p);
    free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packets),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_edits),
        cmocka_unit_test(test_limits),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
