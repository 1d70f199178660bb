/* Internet checksum: RFC 1071's worked example, headers with checksums a
 * real stack computed (a textbook IPv4 header, and TCP/UDP/ICMP from
 * packets Linux wrote to a TUN), odd lengths, chunked sums and unaligned
 * data against a byte-at-a-time reference. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ip/ip.h"

/* 10.0.0.1:36750 -> 10.0.0.2:80 SYN from Linux: IP checksum 0xbecb, TCP
 * checksum 0xa0d5. */
static const uint8_t tcp4_syn[60] = {
    0x45, 0x00, 0x00, 0x3c, 0x67, 0xee, 0x40, 0x00, 0x40, 0x06, 0xbe, 0xcb, 0x0a, 0x00, 0x00,
    0x01, 0x0a, 0x00, 0x00, 0x02, 0x8f, 0x8e, 0x00, 0x50, 0x10, 0x81, 0x87, 0x91, 0x00, 0x00,
    0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0xa0, 0xd5, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04,
    0x02, 0x08, 0x0a, 0x78, 0xea, 0xf7, 0x58, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x0a};

/* [fd00::1]:52763 -> [fd00::2]:53 DNS query from Linux: UDP checksum 0x55ad
 * over the v6 pseudo-header. */
static const uint8_t udp6_dns[77] = {
    0x60, 0x06, 0xea, 0x8e, 0x00, 0x25, 0x11, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xce, 0x1b, 0x00, 0x35, 0x00, 0x25, 0x55, 0xad,
    0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61,
    0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01};

/* The checksum as the number its two stored bytes spell in network order. */
static unsigned
wire(uint16_t c)
{
    uint8_t b[2];

    memcpy(b, &c, 2);
    return (unsigned)b[0] << 8 | b[1];
}

/* Reference: big-endian 16-bit words one at a time, the odd byte padded. */
static unsigned
ref_csum(const uint8_t *p, size_t n, uint32_t sum)
{
    for (size_t i = 0; i < n; i++)
        sum += i & 1 ? p[i] : (uint32_t)p[i] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return ~sum & 0xffff;
}

static void
test_rfc1071_example(void **state)
{
    /* RFC 1071 §3: these bytes sum to ddf2 (in the order written), so the
     * checksum is its complement, 220d. */
    static const uint8_t d[8] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    uint32_t sum = ip_csum_add(0, d, 8);

    (void)state;
    assert_int_equal(wire((uint16_t)~ip_csum_fold(sum)), 0xddf2);
    assert_int_equal(wire(ip_csum_fold(sum)), 0x220d);
    /* Odd lengths pad the last byte: 0102 + 0300 = 0402 -> fbfd, and from
     * an odd address 01f2 + 0300 = 04f2 -> fb0d. */
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, "\x01\x02\x03", 3))), 0xfbfd);
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, d + 1, 3))), 0xfb0d);
}

static void
test_ipv4_header(void **state)
{
    /* The usual textbook header (192.168.0.1 -> 192.168.0.199, UDP),
     * checksum b861. */
    uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                     0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    uint8_t t[20];

    (void)state;
    /* A header with its checksum in place sums to ffff, i.e. folds to 0. */
    assert_int_equal(ip_csum_fold(ip_csum_add(0, h, 20)), 0);
    h[10] = h[11] = 0;
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, h, 20))), 0xb861);

    memcpy(t, tcp4_syn, 20);
    assert_int_equal(ip_csum_fold(ip_csum_add(0, t, 20)), 0);
    t[10] = t[11] = 0;
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, t, 20))), 0xbecb);
}

/* L4 checksums over the pseudo-header, against what Linux put on the wire. */
static void
test_pseudo_header(void **state)
{
    uint8_t b[80];
    uint32_t s;

    (void)state;
    memcpy(b, tcp4_syn, 60);
    s = ip_csum_pseudo(4, b + 12, b + 16, 6, 40);
    assert_int_equal(ip_csum_fold(ip_csum_add(s, b + 20, 40)), 0);
    b[36] = b[37] = 0;
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(s, b + 20, 40))), 0xa0d5);

    memcpy(b, udp6_dns, 77);
    s = ip_csum_pseudo(6, b + 8, b + 24, 17, 37);
    assert_int_equal(ip_csum_fold(ip_csum_add(s, b + 40, 37)), 0);
    b[46] = b[47] = 0;
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(s, b + 40, 37))), 0x55ad);

    /* v6 lengths are 32 bits: the high half counts too. Summing the
     * pseudo-header laid out in memory must agree. */
    {
        uint8_t ph[40] = {0};

        memcpy(ph, udp6_dns + 8, 32);
        ph[32] = 0x00;
        ph[33] = 0x01;
        ph[34] = 0x00;
        ph[35] = 0x25;
        ph[39] = 17;
        assert_int_equal(wire(ip_csum_fold(ip_csum_pseudo(6, ph, ph + 16, 17, 0x10025))),
                         ref_csum(ph, 40, 0));
    }
}

static void
test_fold(void **state)
{
    (void)state;
    assert_int_equal(ip_csum_fold(0), 0xffff);
    assert_int_equal(ip_csum_fold(0xffff), 0);
    assert_int_equal(ip_csum_fold(0xffffffffu), 0);
    assert_int_equal(ip_csum_fold(0x1fffe), 0);
    assert_int_equal(ip_csum_fold(0x12345678), (uint16_t) ~(0x1234 + 0x5678));
    /* The sum handed in is carried along, whatever its size. */
    assert_int_equal(ip_csum_fold(ip_csum_add(0xffffffffu, "", 0)), 0);
    assert_int_equal(ip_csum_add(0, NULL, 0), 0);
}

/* Random data at every alignment and length up to 300, whole and in
 * even-sized pieces with an odd last one, against the reference. */
static void
test_against_reference(void **state)
{
    uint8_t *buf = malloc(310);
    unsigned seed = 12345;

    (void)state;
    assert_non_null(buf);
    for (size_t i = 0; i < 310; i++) {
        seed = seed * 1103515245 + 12345;
        buf[i] = (uint8_t)(seed >> 16);
    }
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n <= 300; n++) {
            const uint8_t *p = buf + off;
            unsigned want = ref_csum(p, n, 0);
            uint32_t s = 0;
            size_t done = 0, piece = 2;

            /* Folded to 16 bits: core/netstack/sys.c keeps only those. */
            assert_true(ip_csum_add(0xffffffffu, p, n) <= 0xffff);
            assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, p, n))), want);
            while (n - done > piece) {
                s = ip_csum_add(s, p + done, piece);
                done += piece;
                piece = 2 + (piece * 3 % 38 & ~(size_t)1);
            }
            s = ip_csum_add(s, p + done, n - done);
            assert_int_equal(wire(ip_csum_fold(s)), want);
        }
    }
    free(buf);
}

/* The largest packet: 65535 bytes of 0xff, then of 0x00 with one 0x01. */
static void
test_large(void **state)
{
    uint8_t *buf = malloc(65535);

    (void)state;
    assert_non_null(buf);
    memset(buf, 0xff, 65535);
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, buf, 65535))), ref_csum(buf, 65535, 0));
    memset(buf, 0, 65535);
    buf[65534] = 1;
    assert_int_equal(wire(ip_csum_fold(ip_csum_add(0, buf, 65535))), 0xfeff);
    free(buf);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc1071_example),   cmocka_unit_test(test_ipv4_header),
        cmocka_unit_test(test_pseudo_header),     cmocka_unit_test(test_fold),
        cmocka_unit_test(test_against_reference), cmocka_unit_test(test_large),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
