#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns/fakeip.h"

static struct dns_fakeip *
pool(const char *v4, const char *v6, size_t max)
{
    char err[128] = "";
    struct dns_fakeip *f = dns_fakeip_new(v4, v6, max, err, sizeof(err));
    if (f == NULL)
        fail_msg("dns_fakeip_new: %s", err);
    return f;
}

static uint32_t
v4(struct dns_fakeip *f, const char *name)
{
    uint8_t a[4];
    assert_int_equal(dns_fakeip_addr(f, name, 4, a), 0);
    return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
}

static const char *
name4(struct dns_fakeip *f, uint32_t a)
{
    uint8_t ip[4] = {(uint8_t)(a >> 24), (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a};
    return dns_fakeip_name(f, ip, 4);
}

#define IP4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static void
test_first_address_and_both_directions(void **state)
{
    struct dns_fakeip *f = pool("198.18.0.0/15", NULL, 0);
    assert_int_equal(v4(f, "example.com"), IP4(198, 18, 0, 2));
    assert_int_equal(v4(f, "example.org"), IP4(198, 18, 0, 3));
    assert_int_equal(v4(f, "example.com"), IP4(198, 18, 0, 2)); /* stable */
    assert_string_equal(name4(f, IP4(198, 18, 0, 2)), "example.com");
    assert_string_equal(name4(f, IP4(198, 18, 0, 3)), "example.org");
    assert_null(name4(f, IP4(198, 18, 0, 4)));   /* in range, unmapped */
    assert_null(name4(f, IP4(198, 18, 0, 1)));   /* the gateway */
    assert_null(name4(f, IP4(10, 0, 0, 2)));     /* outside */

    /* A long name (past the inline buffer) works the same both ways. */
    const char *lng = "a-rather-long-label-that-goes-on.and-another-long-label.example.com";
    uint32_t a = v4(f, lng);
    assert_string_equal(name4(f, a), lng);
    assert_int_equal(v4(f, lng), a);

    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.capacity, 131069); /* .0.2 .. .255.254 of a /15 */
    assert_int_equal(st.allocated, 3);
    assert_int_equal(st.recycled, 0);
    assert_int_equal(st.hits, 5);

    /* Bad names are refused and use nothing. */
    uint8_t out[16];
    assert_int_equal(dns_fakeip_addr(f, "", 4, out), -1);
    assert_int_equal(dns_fakeip_addr(f, "example.com.", 4, out), -1);
    assert_int_equal(dns_fakeip_addr(f, "a..b", 4, out), -1);
    assert_int_equal(dns_fakeip_addr(f, "has space.com", 4, out), -1);
    assert_int_equal(dns_fakeip_addr(f, "x.com", 6, out), -1); /* no v6 range */
    assert_int_equal(dns_fakeip_addr(f, "x.com", 5, out), -1);
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 3);
    dns_fakeip_free(f);
}

static void
test_v4_and_v6_share_the_index(void **state)
{
    struct dns_fakeip *f = pool("198.18.0.0/15", "fc00::/18", 0);
    uint8_t a4[4], a6[16], b6[16];
    assert_int_equal(dns_fakeip_addr(f, "one.test", 6, a6), 0); /* v6 first */
    assert_int_equal(dns_fakeip_addr(f, "two.test", 4, a4), 0);
    assert_int_equal(dns_fakeip_addr(f, "two.test", 6, b6), 0);
    static const uint8_t fc02[16] = {0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    static const uint8_t fc03[16] = {0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
    assert_memory_equal(a6, fc02, 16);
    assert_memory_equal(b6, fc03, 16);
    assert_int_equal(v4(f, "one.test"), IP4(198, 18, 0, 2));
    assert_int_equal(v4(f, "two.test"), IP4(198, 18, 0, 3));
    assert_string_equal(dns_fakeip_name(f, fc02, 6), "one.test");
    assert_string_equal(dns_fakeip_name(f, fc03, 6), "two.test");
    uint8_t fc04[16];
    memcpy(fc04, fc03, 16);
    fc04[15] = 4;
    assert_null(dns_fakeip_name(f, fc04, 6));
    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 2); /* one entry per name, both families */

    /* Host bits in the ranges are ignored; the index carries across bytes. */
    struct dns_fakeip *g = pool("198.18.0.1/16", "fd00::1:2:3/64", 0);
    char n[32];
    for (int i = 0; i < 300; i++) {
        snprintf(n, sizeof(n), "h%d.test", i);
        assert_int_equal(dns_fakeip_addr(g, n, 6, a6), 0);
    }
    static const uint8_t last[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x2d};
    assert_memory_equal(a6, last, 16); /* fd00:: + 2 + 299 */
    assert_string_equal(dns_fakeip_name(g, last, 6), "h299.test");
    assert_int_equal(v4(g, "h299.test"), IP4(198, 18, 1, 45));
    dns_fakeip_free(g);
    dns_fakeip_free(f);
}

static void
test_contains(void **state)
{
    struct dns_fakeip *f = pool("198.18.0.0/15", "fc00::/18", 0);
    uint8_t a[4] = {198, 18, 0, 0}, b[4] = {198, 19, 255, 255}, c[4] = {198, 20, 0, 0};
    uint8_t d[4] = {198, 17, 255, 255};
    assert_true(dns_fakeip_contains(f, a, 4));
    assert_true(dns_fakeip_contains(f, b, 4));
    assert_false(dns_fakeip_contains(f, c, 4));
    assert_false(dns_fakeip_contains(f, d, 4));
    uint8_t x[16] = {0xfc, 0x00, 0x3f, 0xff, 0xff}, y[16] = {0xfc, 0x00, 0x40};
    uint8_t z[16] = {0xfd};
    assert_true(dns_fakeip_contains(f, x, 6));
    assert_false(dns_fakeip_contains(f, y, 6));
    assert_false(dns_fakeip_contains(f, z, 6));
    assert_false(dns_fakeip_contains(f, a, 5));
    dns_fakeip_free(f);

    struct dns_fakeip *g = pool("10.0.0.0/8", NULL, 0);
    assert_false(dns_fakeip_contains(g, x, 6));
    uint8_t e[4] = {10, 255, 1, 2};
    assert_true(dns_fakeip_contains(g, e, 4));
    dns_fakeip_free(g);
}

/* 100,000 names through a /24 (253 addresses): every live mapping agrees
 * both ways, and the live ones are the most recent. */
static void
test_recycling_keeps_consistency(void **state)
{
    struct dns_fakeip *f = pool("10.1.2.0/24", "fc00::/120", 0);
    enum { N = 100000, CAP = 253 };
    char n[96];
    for (int i = 0; i < N; i++) {
        /* every seventh name is long, to recycle heap-held names too */
        if (i % 7 == 0)
            snprintf(n, sizeof(n), "a-long-name-well-past-the-inline-buffer-%d.example.net", i);
        else
            snprintf(n, sizeof(n), "n%d.test", i);
        uint32_t a = v4(f, n);
        assert_true(a >= IP4(10, 1, 2, 2) && a <= IP4(10, 1, 2, 254));
        if (i % 4999 == 0 && i < N - CAP) { /* (refreshing reorders the survivors) */
            for (uint32_t ip = IP4(10, 1, 2, 2); ip <= IP4(10, 1, 2, 254); ip++) {
                const char *nm = name4(f, ip);
                if (nm != NULL) {
                    char copy[96];
                    strcpy(copy, nm);
                    assert_int_equal(v4(f, copy), ip);
                }
            }
        }
    }
    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, CAP);
    assert_int_equal(st.capacity, CAP);
    uint64_t allocated = st.allocated;
    assert_int_equal(st.recycled, allocated - CAP);

    /* The last CAP names are all there (asking allocates nothing). */
    for (int i = N - CAP; i < N; i++) {
        if (i % 7 == 0)
            snprintf(n, sizeof(n), "a-long-name-well-past-the-inline-buffer-%d.example.net", i);
        else
            snprintf(n, sizeof(n), "n%d.test", i);
        uint32_t a = v4(f, n);
        assert_string_equal(name4(f, a), n);
        uint8_t a6[16];
        assert_int_equal(dns_fakeip_addr(f, n, 6, a6), 0);
        assert_int_equal(a6[15], (a & 0xff)); /* same index: fc00::2 + i */
        assert_string_equal(dns_fakeip_name(f, a6, 6), n);
    }
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.allocated, allocated);
    /* and every address is mapped, both ways */
    for (uint32_t ip = IP4(10, 1, 2, 2); ip <= IP4(10, 1, 2, 254); ip++) {
        const char *nm = name4(f, ip);
        assert_non_null(nm);
        snprintf(n, sizeof(n), "%s", nm);
        assert_int_equal(v4(f, n), ip);
    }
    dns_fakeip_free(f);
}

static void
test_lru_refresh_by_either_lookup(void **state)
{
    struct dns_fakeip *f = pool("10.0.0.0/16", NULL, 3);
    uint32_t a = v4(f, "a.test"), b = v4(f, "b.test"), c = v4(f, "c.test");
    (void)c;
    v4(f, "a.test");                     /* a refreshed by name: b is the oldest */
    uint32_t d = v4(f, "d.test");        /* recycles b's address */
    assert_int_equal(d, b);
    assert_string_equal(name4(f, b), "d.test");
    assert_string_equal(name4(f, a), "a.test"); /* refresh a by address: c the oldest */
    uint32_t e = v4(f, "e.test");
    assert_int_equal(e, c);
    assert_string_equal(name4(f, a), "a.test");
    assert_string_equal(name4(f, d), "d.test");
    assert_string_equal(name4(f, e), "e.test");
    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 3);
    assert_int_equal(st.capacity, 3); /* the max_entries cap */
    assert_int_equal(st.recycled, 2);
    /* b and c now get new addresses, recycling again */
    uint32_t b2 = v4(f, "b.test");
    assert_true(b2 >= IP4(10, 0, 0, 2) && b2 <= IP4(10, 0, 0, 4));
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 3);
    dns_fakeip_free(f);
}

static void
test_max_entries_cap(void **state)
{
    struct dns_fakeip *f = pool("198.18.0.0/15", NULL, 100);
    char n[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(n, sizeof(n), "m%d.test", i);
        uint32_t a = v4(f, n);
        assert_true(a >= IP4(198, 18, 0, 2) && a < IP4(198, 18, 0, 102));
    }
    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 100);
    assert_int_equal(st.capacity, 100);
    assert_int_equal(st.recycled, 900);
    assert_null(name4(f, IP4(198, 18, 0, 102))); /* past the cap: never used */
    assert_string_equal(name4(f, v4(f, "m999.test")), "m999.test");
    assert_int_equal(v4(f, "m0.test"), IP4(198, 18, 0, 2) + 1000 % 100); /* recycled again */
    dns_fakeip_free(f);
}

static void
test_bad_ranges(void **state)
{
    static const char *bad4[] = {"198.18.0.0",   "198.18.0.0/7",  "198.18.0.0/31", "198.18.0.0/32",
                                 "1.2.3/24",     "198.18.0.0/15x", "198.18.0.0/",   "fc00::/18",
                                 "300.1.1.1/16", "198.18.0.0/-1", "/15",           "198.18.0.0/0015"};
    char err[128];
    for (size_t i = 0; i < sizeof(bad4) / sizeof(bad4[0]); i++) {
        err[0] = '\0';
        assert_null(dns_fakeip_new(bad4[i], NULL, 0, err, sizeof(err)));
        assert_true(strlen(err) > 0);
        assert_non_null(strstr(err, bad4[i]));
    }
    err[0] = '\0';
    assert_null(dns_fakeip_new(NULL, NULL, 0, err, sizeof(err)));
    assert_true(strlen(err) > 0);
    static const char *bad6[] = {"fc00::", "fc00::/7", "fc00::/127", "1.2.3.4/8", "fc00::/120x",
                                 "fc00::/120"}; /* /120 is too small for a /16's 65533 */
    for (size_t i = 0; i < sizeof(bad6) / sizeof(bad6[0]); i++) {
        err[0] = '\0';
        assert_null(dns_fakeip_new("10.0.0.0/16", bad6[i], 0, err, sizeof(err)));
        assert_non_null(strstr(err, bad6[i]));
    }
    /* ... but fine when max_entries fits it; NULL err is allowed */
    struct dns_fakeip *f = dns_fakeip_new("10.0.0.0/16", "fc00::/120", 200, NULL, 0);
    assert_non_null(f);
    dns_fakeip_free(f);
    /* A /30 left one address (.2) and mapped every name to it; a /29 five:
     * refused, with what they hold. A /28 (13) is the smallest. */
    err[0] = '\0';
    assert_null(dns_fakeip_new("10.0.0.0/30", NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "prefix must be 8..28 (a /30 has 1 usable"));
    assert_null(dns_fakeip_new("10.0.0.0/29", NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "a /29 has 5 usable"));
    f = dns_fakeip_new("10.0.0.0/28", NULL, 0, NULL, 0);
    assert_non_null(f);
    assert_int_equal(v4(f, "a.test"), IP4(10, 0, 0, 2));
    assert_int_equal(v4(f, "b.test"), IP4(10, 0, 0, 3));
    assert_null(name4(f, IP4(10, 0, 0, 15)));
    dns_fakeip_free(f);
}

static char tmpdir[64];

static int
setup_dir(void **state)
{
    strcpy(tmpdir, "/tmp/fakeip_test.XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
teardown_dir(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void
test_save_load_round_trip(void **state)
{
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/fakeip.state", tmpdir);
    struct dns_fakeip *f = pool("198.18.0.0/15", "fc00::/18", 5);
    char n[80];
    uint32_t addr[8];
    for (int i = 0; i < 8; i++) {
        snprintf(n, sizeof(n), i == 3 ? "long-%d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.test"
                                      : "s%d.test",
                 i);
        addr[i] = v4(f, n);
    }
    /* Live: s3..s7 (5 of them). Refresh s4 so the order is s3 s5 s6 s7 s4. */
    assert_string_equal(name4(f, addr[4]), "s4.test");
    assert_int_equal(dns_fakeip_save(f, path, err, sizeof(err)), 0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    dns_fakeip_free(f);

    struct dns_fakeip *g = pool("198.18.0.0/15", "fc00::/18", 5);
    size_t skipped = 99;
    assert_int_equal(dns_fakeip_load(g, path, &skipped, err, sizeof(err)), 0);
    assert_int_equal(skipped, 0);
    struct dns_fakeip_stats st;
    dns_fakeip_stats(g, &st);
    assert_int_equal(st.entries, 5);
    /* addresses preserved */
    snprintf(n, sizeof(n), "long-%d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx.test", 3);
    assert_string_equal(name4(g, addr[3]), n);
    for (int i = 4; i < 8; i++) {
        snprintf(n, sizeof(n), "s%d.test", i);
        assert_string_equal(name4(g, addr[i]), n);
    }
    dns_fakeip_free(g);

    g = pool("198.18.0.0/15", "fc00::/18", 5);
    assert_int_equal(dns_fakeip_load(g, path, &skipped, err, sizeof(err)), 0);
    /* recency preserved: the saved order is s3 s5 s6 s7 s4, so new names
     * recycle s3 and then s5 */
    uint32_t x = v4(g, "new1.test"), y = v4(g, "new2.test");
    assert_int_equal(x, addr[3]);
    assert_int_equal(y, addr[5]);
    assert_string_equal(name4(g, addr[4]), "s4.test");
    assert_string_equal(name4(g, addr[6]), "s6.test");
    /* the v6 side follows the index */
    uint8_t a6[16];
    assert_int_equal(dns_fakeip_addr(g, "s7.test", 6, a6), 0);
    assert_int_equal(a6[15], (uint8_t)(addr[7] - IP4(198, 18, 0, 0)));
    dns_fakeip_stats(g, &st);
    assert_int_equal(st.allocated, 2);
    dns_fakeip_free(g);

    /* saving over an existing file replaces it; no temp files remain */
    g = pool("198.18.0.0/15", NULL, 0);
    v4(g, "only.test");
    assert_int_equal(dns_fakeip_save(g, path, err, sizeof(err)), 0);
    FILE *fp = fopen(path, "r");
    char line[128];
    assert_non_null(fgets(line, sizeof(line), fp));
    assert_string_equal(line, "198.18.0.2 only.test\n");
    assert_null(fgets(line, sizeof(line), fp));
    fclose(fp);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test $(ls '%s' | wc -l) -eq 1", tmpdir);
    assert_int_equal(system(cmd), 0);
    /* an unwritable place is an error naming the path */
    assert_int_equal(dns_fakeip_save(g, "/nonexistent-dir/x/fakeip.state", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/nonexistent-dir/x/fakeip.state"));
    dns_fakeip_free(g);
}

static void
test_load_skips_bad_lines(void **state)
{
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/bad.state", tmpdir);
    FILE *fp = fopen(path, "w");
    char longline[700];
    memset(longline, 'x', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    fprintf(fp, "198.18.0.2 good.test\n"
                "\n"
                "198.18.0.3\n"                   /* no name */
                "198.18.0.4 two names.test\n"    /* three tokens */
                "198.18.0.5 bad..name\n"         /* bad name */
                "198.20.0.1 out.test\n"          /* outside the range */
                "198.18.0.1 gateway.test\n"      /* network + 1 */
                "not-an-ip x.test\n"
                "fc00::9 v6.test\n"              /* index 7 */
                "198.18.0.6 tab.test \r\n"       /* blanks tolerated */
                "198.18.0.2 good.test\n"         /* duplicate: same mapping */
                "198.18.0.7 moved.test\n"
                "198.18.0.8 moved.test\n"        /* later line wins: moved to .8 */
                "%s\n"
                "198.18.0.10 last.test",         /* no final newline */
            longline);
    fclose(fp);
    struct dns_fakeip *f = pool("198.18.0.0/15", "fc00::/18", 0);
    size_t skipped = 0;
    assert_int_equal(dns_fakeip_load(f, path, &skipped, err, sizeof(err)), 0);
    assert_int_equal(skipped, 7);
    assert_string_equal(name4(f, IP4(198, 18, 0, 2)), "good.test");
    assert_string_equal(name4(f, IP4(198, 18, 0, 9)), "v6.test");
    assert_string_equal(name4(f, IP4(198, 18, 0, 6)), "tab.test");
    assert_null(name4(f, IP4(198, 18, 0, 7)));
    assert_string_equal(name4(f, IP4(198, 18, 0, 8)), "moved.test");
    assert_string_equal(name4(f, IP4(198, 18, 0, 10)), "last.test");
    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 5);
    /* new names fill the holes the file left, in address order */
    assert_int_equal(v4(f, "fresh.test"), IP4(198, 18, 0, 3));
    assert_int_equal(v4(f, "fresh2.test"), IP4(198, 18, 0, 4));
    assert_int_equal(v4(f, "fresh3.test"), IP4(198, 18, 0, 5));
    assert_int_equal(v4(f, "fresh4.test"), IP4(198, 18, 0, 7));
    assert_int_equal(v4(f, "fresh5.test"), IP4(198, 18, 0, 11));

    /* a missing file is not an error */
    snprintf(path, sizeof(path), "%s/missing.state", tmpdir);
    skipped = 7;
    assert_int_equal(dns_fakeip_load(f, path, &skipped, err, sizeof(err)), 0);
    assert_int_equal(skipped, 0);
    /* a directory is */
    assert_int_equal(dns_fakeip_load(f, tmpdir, &skipped, err, sizeof(err)), -1);
    assert_non_null(strstr(err, tmpdir));
    dns_fakeip_free(f);
}

static void
test_memory_per_mapping(void **state)
{
    struct dns_fakeip *f = pool("198.18.0.0/15", "fc00::/18", 0);
    struct dns_fakeip_stats st;
    dns_fakeip_stats(f, &st);
    assert_true(st.bytes < 16 * 1024); /* an idle pool costs little */

    char n[96];
    for (int i = 0; i < 100000; i++) {
        /* mostly short names, one in ten past the inline buffer */
        if (i % 10 == 0)
            snprintf(n, sizeof(n), "cdn-%d.some-edge-network.static.example-content.com", i);
        else
            snprintf(n, sizeof(n), "host%d.example.com", i);
        v4(f, n);
    }
    dns_fakeip_stats(f, &st);
    assert_int_equal(st.entries, 100000);
    assert_int_equal(st.recycled, 0);
    print_message("fakeip: %zu bytes for %zu mappings: %.1f bytes each\n", st.bytes, st.entries,
                  (double)st.bytes / (double)st.entries);
    assert_true(st.bytes / st.entries <= 128);
    dns_fakeip_free(f);
}

/* A TUN address inside the range is never handed out, even when the pool
 * fills and recycles, and a mapping it already had (from a state file) goes. */
static void
test_reserved_address_never_handed_out(void **state)
{
    (void)state;
    struct dns_fakeip *f = pool("10.9.0.0/28", NULL, 0); /* .2 .. .14: 13 addresses */
    assert_int_equal(v4(f, "early.example"), IP4(10, 9, 0, 2));
    uint8_t tun[4] = {10, 9, 0, 2}, other[4] = {10, 9, 0, 5};
    assert_int_equal(dns_fakeip_reserve(f, tun, 4), 0);
    assert_null(name4(f, IP4(10, 9, 0, 2)));
    assert_int_equal(dns_fakeip_reserve(f, other, 4), 0);
    uint8_t outside[4] = {10, 9, 1, 1};
    assert_int_equal(dns_fakeip_reserve(f, outside, 4), -1);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "n%d.example", i);
        uint32_t a = v4(f, name);
        assert_true(a != IP4(10, 9, 0, 2) && a != IP4(10, 9, 0, 5));
        assert_string_equal(name4(f, a), name);
    }
    dns_fakeip_free(f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_address_and_both_directions),
        cmocka_unit_test(test_v4_and_v6_share_the_index),
        cmocka_unit_test(test_contains),
        cmocka_unit_test(test_recycling_keeps_consistency),
        cmocka_unit_test(test_lru_refresh_by_either_lookup),
        cmocka_unit_test(test_max_entries_cap),
        cmocka_unit_test(test_bad_ranges),
        cmocka_unit_test(test_save_load_round_trip),
        cmocka_unit_test(test_load_skips_bad_lines),
        cmocka_unit_test(test_memory_per_mapping),
        cmocka_unit_test(test_reserved_address_never_handed_out),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
