#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <sys/socket.h>

#include "rules/rules.h"

/* "10.0.0.0/8" or "2001:db8::/32". */
static int
add(struct rules_cidrs *c, const char *cidr, uint32_t tag)
{
    char s[64];
    uint8_t a[16];
    strcpy(s, cidr);
    char *slash = strchr(s, '/');
    assert_non_null(slash);
    *slash = '\0';
    int family = strchr(s, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, s, a), 1);
    return rules_cidrs_add(c, family, a, (unsigned)atoi(slash + 1), tag);
}

static long
match(const struct rules_cidrs *c, const char *ip)
{
    uint8_t a[16];
    int family = strchr(ip, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, ip, a), 1);
    uint32_t tag = 12345;
    if (!rules_cidrs_match(c, family, a, &tag))
        return -1;
    return tag;
}

static void
test_v4_and_v6(void **state)
{
    (void)state;
    struct rules_cidrs *c = rules_cidrs_new();
    assert_int_equal(add(c, "192.0.2.0/24", 1), 0);
    assert_int_equal(add(c, "198.51.100.7/32", 2), 0);
    assert_int_equal(add(c, "2001:db8::/32", 3), 0);
    assert_int_equal(add(c, "2001:db9::1/128", 4), 0);
    assert_int_equal(rules_cidrs_build(c), 0);
    assert_int_equal(match(c, "192.0.2.0"), 1);
    assert_int_equal(match(c, "192.0.2.255"), 1);
    assert_int_equal(match(c, "192.0.1.255"), -1);
    assert_int_equal(match(c, "192.0.3.0"), -1);
    assert_int_equal(match(c, "198.51.100.7"), 2);
    assert_int_equal(match(c, "198.51.100.8"), -1);
    assert_int_equal(match(c, "198.51.100.6"), -1);
    assert_int_equal(match(c, "2001:db8::"), 3);
    assert_int_equal(match(c, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"), 3);
    assert_int_equal(match(c, "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff"), -1);
    assert_int_equal(match(c, "2001:db9::1"), 4);
    assert_int_equal(match(c, "2001:db9::2"), -1);
    assert_int_equal(match(c, "2001:db9::"), -1);
    /* Families do not mix: 192.0.2.1 is no IPv6 address here. */
    assert_int_equal(match(c, "::c000:201"), -1);
    assert_int_equal(rules_cidrs_count(c), 4);
    assert_true(rules_cidrs_memory(c) > 0);
    rules_cidrs_free(c);
}

static void
test_nested_smallest_tag(void **state)
{
    (void)state;
    struct rules_cidrs *c = rules_cidrs_new();
    assert_int_equal(add(c, "10.0.0.0/8", 5), 0);
    assert_int_equal(add(c, "10.1.0.0/16", 2), 0);
    assert_int_equal(add(c, "10.1.2.0/24", 9), 0);
    assert_int_equal(add(c, "10.3.0.0/16", 1), 0);
    assert_int_equal(add(c, "10.3.4.0/24", 7), 0);
    assert_int_equal(add(c, "10.3.4.5/32", 0), 0);
    assert_int_equal(add(c, "fd00::/8", 8), 0);
    assert_int_equal(add(c, "fd00:1::/32", 3), 0);
    assert_int_equal(add(c, "fd00:1:2::/48", 6), 0);
    assert_int_equal(rules_cidrs_build(c), 0);
    assert_int_equal(match(c, "10.1.2.3"), 2);
    assert_int_equal(match(c, "10.2.0.1"), 5);
    assert_int_equal(match(c, "10.1.255.255"), 2);
    assert_int_equal(match(c, "10.0.255.255"), 5);
    assert_int_equal(match(c, "10.3.4.4"), 1);
    assert_int_equal(match(c, "10.3.4.5"), 0);
    assert_int_equal(match(c, "10.3.4.6"), 1);
    assert_int_equal(match(c, "10.4.0.0"), 5);
    assert_int_equal(match(c, "10.255.255.255"), 5);
    assert_int_equal(match(c, "11.0.0.0"), -1);
    assert_int_equal(match(c, "9.255.255.255"), -1);
    assert_int_equal(match(c, "fd00:1:2::1"), 3);
    assert_int_equal(match(c, "fd00:2::1"), 8);
    assert_int_equal(match(c, "fe00::"), -1);
    rules_cidrs_free(c);
}

static void
test_edges_and_host_bits(void **state)
{
    (void)state;
    struct rules_cidrs *c = rules_cidrs_new();
    assert_int_equal(add(c, "1.2.3.4/0", 50), 0); /* host bits ignored: everything */
    assert_int_equal(add(c, "255.255.255.255/32", 4), 0);
    assert_int_equal(add(c, "0.0.0.0/32", 3), 0);
    assert_int_equal(add(c, "172.16.99.99/12", 10), 0);
    assert_int_equal(add(c, "ffff::1/0", 60), 0);
    assert_int_equal(add(c, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", 7), 0);
    assert_int_equal(add(c, "::/128", 8), 0);
    assert_int_equal(add(c, "2001:db8:1234:5678:9abc::/33", 9), 0);
    assert_int_equal(rules_cidrs_build(c), 0);
    assert_int_equal(match(c, "0.0.0.0"), 3);
    assert_int_equal(match(c, "0.0.0.1"), 50);
    assert_int_equal(match(c, "255.255.255.255"), 4);
    assert_int_equal(match(c, "255.255.255.254"), 50);
    assert_int_equal(match(c, "172.16.0.0"), 10);
    assert_int_equal(match(c, "172.31.255.255"), 10);
    assert_int_equal(match(c, "172.32.0.0"), 50);
    assert_int_equal(match(c, "::"), 8);
    assert_int_equal(match(c, "::1"), 60);
    assert_int_equal(match(c, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), 7);
    assert_int_equal(match(c, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"), 60);
    assert_int_equal(match(c, "2001:db8::"), 9);
    assert_int_equal(match(c, "2001:db8:7fff::1"), 9);
    assert_int_equal(match(c, "2001:db8:8000::"), 60);
    rules_cidrs_free(c);
}

static void
test_v4_mapped(void **state)
{
    (void)state;
    struct rules_cidrs *c = rules_cidrs_new();
    assert_int_equal(add(c, "203.0.113.0/24", 1), 0);
    /* A mapped prefix is an IPv4 prefix: ::ffff:198.51.100.0/120 = /24. */
    assert_int_equal(add(c, "::ffff:198.51.100.0/120", 2), 0);
    assert_int_equal(add(c, "64:ff9b::/96", 3), 0); /* NAT64: not mapped */
    assert_int_equal(rules_cidrs_build(c), 0);
    assert_int_equal(match(c, "::ffff:203.0.113.9"), 1);
    assert_int_equal(match(c, "::ffff:203.0.114.9"), -1);
    assert_int_equal(match(c, "198.51.100.200"), 2);
    assert_int_equal(match(c, "::ffff:198.51.100.200"), 2);
    assert_int_equal(match(c, "64:ff9b::203.0.113.9"), 3);
    assert_int_equal(match(c, "::203.0.113.9"), -1); /* v4-compatible: not mapped */
    rules_cidrs_free(c);
}

static void
test_invalid_and_lifecycle(void **state)
{
    (void)state;
    uint8_t a[16] = {10};
    struct rules_cidrs *c = rules_cidrs_new();
    assert_int_equal(rules_cidrs_add(c, AF_INET, a, 33, 1), -1);
    assert_int_equal(rules_cidrs_add(c, AF_INET6, a, 129, 1), -1);
    assert_int_equal(rules_cidrs_add(c, AF_UNIX, a, 8, 1), -1);
    assert_int_equal(rules_cidrs_add(c, AF_INET, NULL, 8, 1), -1);
    assert_int_equal(rules_cidrs_add(c, AF_INET, a, 8, 1), 0);
    assert_int_equal(rules_cidrs_match(c, AF_INET, a, NULL), 0); /* not built */
    assert_int_equal(rules_cidrs_build(c), 0);
    assert_int_equal(rules_cidrs_build(c), -1);
    assert_int_equal(rules_cidrs_add(c, AF_INET, a, 16, 0), -1);
    assert_int_equal(rules_cidrs_match(c, AF_INET, a, NULL), 1);
    assert_int_equal(rules_cidrs_match(c, AF_UNIX, a, NULL), 0);
    assert_int_equal(rules_cidrs_count(c), 1);
    rules_cidrs_free(c);

    struct rules_cidrs *empty = rules_cidrs_new();
    assert_int_equal(rules_cidrs_build(empty), 0);
    assert_int_equal(match(empty, "10.0.0.1"), -1);
    assert_int_equal(match(empty, "::1"), -1);
    assert_int_equal(match(empty, "::ffff:10.0.0.1"), -1);
    rules_cidrs_free(empty);
    rules_cidrs_free(NULL);
}

/* The naive reference: every prefix against the address. */
struct ref {
    int family;
    uint8_t addr[16];
    unsigned prefix;
    uint32_t tag;
};

static int
in_prefix(const uint8_t *a, const uint8_t *p, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++) {
        unsigned m = 0x80u >> (i % 8);
        if ((a[i / 8] & m) != (p[i / 8] & m))
            return 0;
    }
    return 1;
}

static long
ref_match(const struct ref *r, size_t n, int family, const uint8_t *a)
{
    long best = -1;
    for (size_t i = 0; i < n; i++)
        if (r[i].family == family && in_prefix(a, r[i].addr, r[i].prefix) &&
            (best < 0 || r[i].tag < best))
            best = r[i].tag;
    return best;
}

/* Addresses drawn near a few bases, so prefixes nest, overlap at edges and
 * leave gaps; each byte is a base byte, random, 0x00 or 0xff. */
static void
random_addr(uint8_t *a, int len, const uint8_t bases[4][16])
{
    const uint8_t *b = bases[rand() % 4];
    for (int i = 0; i < len; i++) {
        int k = rand() % 10;
        a[i] = k < 6 ? b[i] : k < 8 ? (uint8_t)rand() : k < 9 ? 0 : 0xff;
    }
}

static void
cross_check(int family, int nentries, int nqueries)
{
    int len = family == AF_INET ? 4 : 16, bits = len * 8;
    uint8_t bases[4][16];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++)
            bases[i][j] = (uint8_t)rand();
    struct ref *r = calloc(nentries, sizeof(*r));
    struct rules_cidrs *c = rules_cidrs_new();
    for (int i = 0; i < nentries; i++) {
        r[i].family = family;
        random_addr(r[i].addr, len, bases);
        /* Long prefixes are common, shorter ones rarer; none shorter than a
         * quarter of the bits, or a few of them would cover everything. */
        r[i].prefix = (unsigned)(rand() % 4 ? bits - rand() % (bits / 2) : bits / 4 + rand() % (bits / 4));
        r[i].tag = (uint32_t)(rand() % (2 * nentries));
        assert_int_equal(rules_cidrs_add(c, family, r[i].addr, r[i].prefix, r[i].tag), 0);
    }
    assert_int_equal(rules_cidrs_build(c), 0);
    int hits = 0;
    for (int q = 0; q < nqueries; q++) {
        uint8_t a[16];
        if (q % 2 == 0) { /* a neighbour of an entry's first or last address */
            const struct ref *e = &r[rand() % nentries];
            memcpy(a, e->addr, 16);
            for (int i = (int)e->prefix; i < bits; i++)
                a[i / 8] = (uint8_t)(q % 4 ? a[i / 8] | 0x80u >> (i % 8) : a[i / 8] & ~(0x80u >> (i % 8)));
            int carry = rand() % 3 - 1; /* -1, 0 or +1 */
            for (int i = len - 1; i >= 0 && carry != 0; i--) {
                int v = a[i] + carry;
                a[i] = (uint8_t)v;
                carry = v < 0 ? -1 : v > 255 ? 1 : 0;
            }
        } else {
            random_addr(a, len, bases);
        }
        uint32_t tag = 0;
        long want = ref_match(r, nentries, family, a);
        long got = rules_cidrs_match(c, family, a, &tag) ? (long)tag : -1;
        if (want != got)
            fail_msg("query %d: want %ld, got %ld", q, want, got);
        hits += got >= 0;
    }
    assert_true(hits > nqueries / 20 && hits < nqueries - nqueries / 20);
    rules_cidrs_free(c);
    free(r);
}

static void
test_random_cross_check(void **state)
{
    (void)state;
    srand(4242);
    for (int round = 0; round < 5; round++) {
        cross_check(AF_INET, 50, 5000);
        cross_check(AF_INET, 2000, 10000);
        cross_check(AF_INET6, 50, 5000);
        cross_check(AF_INET6, 2000, 10000);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4_and_v6),
        cmocka_unit_test(test_nested_smallest_tag),
        cmocka_unit_test(test_edges_and_host_bits),
        cmocka_unit_test(test_v4_mapped),
        cmocka_unit_test(test_invalid_and_lifecycle),
        cmocka_unit_test(test_random_cross_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
