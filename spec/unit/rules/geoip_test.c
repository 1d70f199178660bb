/* GEOIP and IP-ASN lookups (rules/geoip.h) on the small files in
 * spec/fixtures/geo (made by its mkmmdb.py; README there says how). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <sys/socket.h>

#include <maxminddb.h>

#include "rules/geoip.h"
#include "rules/geoip_int.h"

static char path[4096];

static const char *
fixture(const char *name)
{
    if (name[0] == '/') { /* a file the test made */
        snprintf(path, sizeof(path), "%s", name);
        return path;
    }
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(path, sizeof(path), "%.*s/../../fixtures/geo/%s", dir, slash ? __FILE__ : ".", name);
    return path;
}

static struct rules_geoip *
open_fixture(const char *name)
{
    char err[512] = "";
    struct rules_geoip *g = rules_geoip_open(fixture(name), err, sizeof(err));
    if (g == NULL)
        fail_msg("%s", err);
    return g;
}

/* The codes of |ip| joined by '+', or "" for none. */
static const char *
codes(struct rules_geoip *g, const char *ip)
{
    static char out[128];
    uint8_t a[16];
    const char *c[RULES_GEOIP_MAX_CODES];
    int family = strchr(ip, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, ip, a), 1);
    int n = rules_geoip_codes(g, family, a, c);
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? "+" : "", c[i]);
    return out;
}

static void
test_country(void **state)
{
    (void)state;
    struct rules_geoip *g = open_fixture("country.mmdb");
    assert_string_equal(rules_geoip_type(g), "GeoLite2-Country");
    assert_true(rules_geoip_built(g) > 0);
    assert_string_equal(codes(g, "114.114.114.114"), "CN");
    assert_string_equal(codes(g, "114.114.0.0"), "CN");
    assert_string_equal(codes(g, "114.115.0.0"), "");
    assert_string_equal(codes(g, "8.8.8.8"), "US");
    assert_string_equal(codes(g, "1.0.0.1"), "AU"); /* upper-cased */
    assert_string_equal(codes(g, "2001:db8::1"), "JP");
    assert_string_equal(codes(g, "2001:db9::1"), "");
    assert_string_equal(codes(g, "::ffff:114.114.1.1"), "CN"); /* as IPv4 */
    for (int i = 0; i < 3; i++) /* the second time from the remembered record */
        assert_string_equal(codes(g, "8.8.8.200"), "US");
    uint32_t asn = 7;
    uint8_t a[4] = {8, 8, 8, 8};
    assert_int_equal(rules_geoip_asn(g, AF_INET, a, &asn), 0); /* no ASN in a country file */
    assert_int_equal(asn, 7);
    rules_geoip_free(g);
}

static void
test_asn(void **state)
{
    (void)state;
    struct rules_geoip *g = open_fixture("asn.mmdb");
    uint8_t a[16];
    uint32_t asn = 0;
    inet_pton(AF_INET, "1.1.1.1", a);
    assert_int_equal(rules_geoip_asn(g, AF_INET, a, &asn), 1);
    assert_int_equal(asn, 13335);
    inet_pton(AF_INET6, "2606:4700::1111", a);
    asn = 0;
    assert_int_equal(rules_geoip_asn(g, AF_INET6, a, &asn), 1);
    assert_int_equal(asn, 13335);
    inet_pton(AF_INET, "1.1.2.1", a);
    assert_int_equal(rules_geoip_asn(g, AF_INET, a, &asn), 0);
    assert_string_equal(codes(g, "1.1.1.1"), "");
    rules_geoip_free(g);
}

static void
test_meta_ipv4_only(void **state)
{
    (void)state;
    struct rules_geoip *g = open_fixture("meta4.mmdb");
    assert_string_equal(rules_geoip_type(g), "Meta-geoip0");
    assert_string_equal(codes(g, "10.9.8.7"), "CN+PRIVATE");
    assert_string_equal(codes(g, "11.0.0.1"), "");
    assert_string_equal(codes(g, "2001:db8::1"), ""); /* IPv6 in an IPv4 file: none */
    assert_string_equal(codes(g, "::ffff:10.0.0.1"), "CN+PRIVATE");
    rules_geoip_free(g);
}

static void
test_bad_files(void **state)
{
    (void)state;
    char err[512], want[4200];
    assert_null(rules_geoip_open(fixture("no-such.mmdb"), err, sizeof(err)));
    snprintf(want, sizeof(want), "%s: No such file or directory", path);
    assert_string_equal(err, want);
    /* A file that is not an mmdb: libmaxminddb's reason. */
    assert_null(rules_geoip_open(fixture("README"), err, sizeof(err)));
    snprintf(want, sizeof(want), "%s: The MaxMind DB file contains invalid metadata", path);
    assert_string_equal(err, want);
    assert_null(rules_geoip_open(fixture(""), err, sizeof(err))); /* a folder */
    assert_non_null(strstr(err, path));
}

/* chute's own tree walk against libmaxminddb's lookup, address by
 * address, on random files of each record size. */
static void
same_as_libmaxminddb(const char *name)
{
    struct rules_geoip *g = open_fixture(name);
    MMDB_s db;
    assert_int_equal(MMDB_open(path, MMDB_MODE_MMAP, &db), MMDB_SUCCESS);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t hits = 0;
    for (int i = 0; i < 200000; i++) {
        uint8_t a[16];
        for (int k = 0; k < 16; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            a[k] = (uint8_t)x;
        }
        int v6 = i % 4 == 3 && db.metadata.ip_version == 6;
        struct sockaddr_storage ss = {0};
        if (v6) {
            a[0] = (uint8_t)(0x20 | (a[0] & 0x1f)); /* where the random IPv6 networks are */
            ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
            memcpy(&((struct sockaddr_in6 *)&ss)->sin6_addr, a, 16);
        } else {
            ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
            memcpy(&((struct sockaddr_in *)&ss)->sin_addr, a, 4);
        }
        int mmerr;
        MMDB_lookup_result_s r = MMDB_lookup_sockaddr(&db, (struct sockaddr *)&ss, &mmerr);
        assert_int_equal(mmerr, MMDB_SUCCESS);
        char want[8] = "";
        MMDB_entry_data_s d;
        if (r.found_entry && MMDB_get_value(&r.entry, &d, "country", "iso_code", NULL) == 0 &&
            d.has_data)
            snprintf(want, sizeof(want), "%.*s", (int)d.data_size, d.utf8_string);
        const char *c[RULES_GEOIP_MAX_CODES];
        int n = rules_geoip_codes(g, v6 ? AF_INET6 : AF_INET, a, c);
        if (strcmp(n > 0 ? c[0] : "", want) != 0)
            fail_msg("%s: address %d: chute says '%s', libmaxminddb '%s'", name, i,
                     n > 0 ? c[0] : "", want);
        hits += want[0] != '\0';
    }
    assert_true(hits > 1000); /* the comparison saw data, not only misses */
    MMDB_close(&db);
    rules_geoip_free(g);
}

static void
each_file(void)
{
    same_as_libmaxminddb("random24.mmdb");
    same_as_libmaxminddb("random28.mmdb");
    same_as_libmaxminddb("random32v4.mmdb");
}

static void
test_walk_matches_libmaxminddb(void **state)
{
    (void)state;
    each_file(); /* small trees: walked from 12-bit tables */
    rules_geoip_index_limit = 1; /* as big files whose index is refused: 20- and 16-bit tables */
    each_file();
    rules_geoip_index_limit = 0;
}

/* The flattened index (geoip_index.c), as big files get it: the same
 * answers as libmaxminddb's, and as the walk's. */
static void
test_index_matches_libmaxminddb(void **state)
{
    (void)state;
    rules_geoip_index_limit = SIZE_MAX;
    each_file();
    struct rules_geoip *g = open_fixture("country.mmdb");
    assert_string_equal(codes(g, "114.114.114.114"), "CN");
    assert_string_equal(codes(g, "114.115.0.0"), "");
    assert_string_equal(codes(g, "2001:db8::1"), "JP");
    assert_string_equal(codes(g, "2001:db8:ffff:ffff:ffff::1"), "JP");
    assert_string_equal(codes(g, "2001:db9::1"), "");
    assert_string_equal(codes(g, "::ffff:114.114.1.1"), "CN");
    assert_string_equal(codes(g, "::114.114.1.1"), "CN"); /* under ::/64: walked from there */
    rules_geoip_free(g);
    g = open_fixture("meta4.mmdb");
    assert_string_equal(codes(g, "10.9.8.7"), "CN+PRIVATE");
    assert_string_equal(codes(g, "2001:db8::1"), "");
    rules_geoip_free(g);
    g = open_fixture("asn.mmdb");
    uint8_t a[16];
    uint32_t asn = 0;
    inet_pton(AF_INET6, "2606:4700::1111", a);
    assert_int_equal(rules_geoip_asn(g, AF_INET6, a, &asn), 1);
    assert_int_equal(asn, 13335);
    rules_geoip_free(g);
    rules_geoip_index_limit = 0;
}

static int
lan(const char *ip)
{
    uint8_t a[16];
    int family = strchr(ip, ':') ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(family, ip, a), 1);
    return rules_geoip_is_lan(family, a);
}

static void
test_lan(void **state)
{
    (void)state;
    const char *yes[] = {"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "127.0.0.1",
                         "169.254.1.1", "224.0.0.251", "239.255.255.250", "0.0.0.0", "fc00::1",
                         "fd12::1", "fe80::1", "ff02::1", "::1", "::", "::ffff:192.168.0.1"};
    const char *no[] = {"172.32.0.1", "172.15.255.255", "192.169.0.1", "8.8.8.8", "100.64.0.1",
                        "198.18.0.1", "0.0.0.1", "2001:db8::1", "fec0::1", "::2",
                        "::ffff:8.8.8.8"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!lan(yes[i]))
            fail_msg("%s should be LAN", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (lan(no[i]))
            fail_msg("%s should not be LAN", no[i]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_country),
        cmocka_unit_test(test_asn),
        cmocka_unit_test(test_meta_ipv4_only),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_walk_matches_libmaxminddb),
        cmocka_unit_test(test_index_matches_libmaxminddb),
        cmocka_unit_test(test_lan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
