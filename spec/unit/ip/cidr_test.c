/* ip_cidr_parse: IPv4 and IPv6 prefixes as configs write them, the host
 * prefix when "/PREFIX" is left out, host bits kept, prefix lengths past
 * the family's width, and text that is no prefix at all. */

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "ip/ip.h"

struct good {
    const char *text;
    int family;
    const char *addr; /* what inet_pton makes of it */
    unsigned prefix;
};

/* Each |text| must parse to its family, prefix and all 16 address bytes
 * (v4: 4 bytes, the other 12 zero). */
static void
parses(const struct good *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct ip_cidr c;
        uint8_t a[16] = {0};

        assert_int_equal(inet_pton(g[i].family, g[i].addr, a), 1);
        memset(&c, 0xa5, sizeof(c));
        if (ip_cidr_parse(g[i].text, &c) != 0)
            fail_msg("\"%s\" did not parse", g[i].text);
        assert_int_equal(c.family, g[i].family);
        assert_int_equal(c.prefix, g[i].prefix);
        assert_memory_equal(c.addr, a, sizeof(a));
    }
}

static void
refused(const char *const *text, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct ip_cidr c;

        if (ip_cidr_parse(text[i], &c) != -1)
            fail_msg("\"%s\" parsed", text[i]);
    }
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
test_v4(void **state)
{
    static const struct good g[] = {
        {"198.18.0.1/30", AF_INET, "198.18.0.1", 30},
        {"10.0.0.0/8", AF_INET, "10.0.0.0", 8},
        {"0.0.0.0/0", AF_INET, "0.0.0.0", 0},
        {"255.255.255.255/32", AF_INET, "255.255.255.255", 32},
        /* No prefix: a host route. */
        {"192.0.2.7", AF_INET, "192.0.2.7", 32},
        /* A leading zero in the prefix is still decimal, not octal. */
        {"192.0.2.0/024", AF_INET, "192.0.2.0", 24},
    };

    parses(g, N(g));
}

static void
test_v6(void **state)
{
    static const struct good g[] = {
        {"fd00::1/126", AF_INET6, "fd00::1", 126},
        {"2001:db8::/32", AF_INET6, "2001:db8::", 32},
        {"::/0", AF_INET6, "::", 0},
        {"::1", AF_INET6, "::1", 128},
        {"2001:0db8:0000:0000:0000:0000:0000:0001/128", AF_INET6, "2001:db8::1", 128},
        /* A v4-mapped address is IPv6, with IPv6's widths. */
        {"::ffff:192.0.2.1/96", AF_INET6, "::ffff:192.0.2.1", 96},
        {"::ffff:192.0.2.1/120", AF_INET6, "::ffff:192.0.2.1", 120},
    };

    parses(g, N(g));
}

static void
test_host_bits(void **state)
{
    /* Kept as written: the TUN's own address is the point of "/30". */
    static const struct good g[] = {
        {"10.1.2.3/8", AF_INET, "10.1.2.3", 8},
        {"198.18.255.255/15", AF_INET, "198.18.255.255", 15},
        {"2001:db8::1/32", AF_INET6, "2001:db8::1", 32},
        {"fd00::ffff/0", AF_INET6, "fd00::ffff", 0},
    };

    parses(g, N(g));
}

static void
test_bad_prefix(void **state)
{
    static const char *const bad[] = {
        "192.0.2.0/33", "0.0.0.0/4294967296", "2001:db8::/129", "::/256",
        "192.0.2.0/-1", "::/-0x1", "192.0.2.0/", "::/", "192.0.2.0/24x",
        "192.0.2.0/2.4", "192.0.2.0/0x10", "192.0.2.0/24/24", "192.0.2.0/24 ",
        "192.0.2.0/ab",
        /* Past what a long holds. */
        "::/99999999999999999999999",
    };

    refused(bad, N(bad));
}

static void
test_junk(void **state)
{
    static const char *const bad[] = {
        "", "/24", "/", "example.com/24", "localhost", "192.0.2/24", "192.0.2.1.5/24",
        "192.0.2.256/24", " 192.0.2.1/24", "192.0.2.1 /24", "[2001:db8::1]/64",
        "2001:db8:::1/64", "fe80::1%eth0/64", "2001:db8::g/64",
        /* An address part too long for any address. */
        "0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000:0000/64",
    };

    refused(bad, N(bad));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4),         cmocka_unit_test(test_v6),
        cmocka_unit_test(test_host_bits),  cmocka_unit_test(test_bad_prefix),
        cmocka_unit_test(test_junk),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
