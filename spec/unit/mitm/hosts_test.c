/* The MITM host list, Surge's Host List semantics pinned one rule at a
 * time: wildcards, exclusions and their order, the default port 443, ":0"
 * for every port, IP literals compared as addresses, Surge's classes, case
 * and trailing dots, and the errors bad patterns give. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mitm/mitm.h"

static struct mitm_hosts *
list(const char *const *pats)
{
    char err[300];
    struct mitm_hosts *h = mitm_hosts_new();
    assert_non_null(h);
    for (; *pats; pats++)
        if (mitm_hosts_add(h, *pats, strlen(*pats), err, sizeof(err)) != 0)
            fail_msg("%s: %s", *pats, err);
    return h;
}

static int
m(const struct mitm_hosts *h, const char *host, uint16_t port)
{
    return mitm_hosts_match(h, host, strlen(host), port);
}

static void
test_wildcards(void **state)
{
    (void)state;
    const char *const pats[] = {"*.example.com", "api?.example.net", "exact.test", NULL};
    struct mitm_hosts *h = list(pats);
    assert_int_equal(mitm_hosts_count(h), 3);
    assert_true(m(h, "www.example.com", 443));
    assert_true(m(h, "a.b.example.com", 443));       /* '*' crosses dots */
    assert_false(m(h, "example.com", 443));          /* "*." needs something before */
    assert_false(m(h, "www.example.com.evil", 443)); /* anchored at both ends */
    assert_true(m(h, "api1.example.net", 443));
    assert_false(m(h, "api.example.net", 443)); /* '?' is exactly one */
    assert_false(m(h, "api12.example.net", 443));
    assert_true(m(h, "exact.test", 443));
    assert_false(m(h, "www.exact.test", 443));
    assert_true(m(h, "EXACT.Test", 443)); /* case-insensitive */
    assert_true(m(h, "exact.test.", 443)); /* a trailing dot is the same name */
    assert_false(m(h, "other.test", 443));
    mitm_hosts_free(h);

    const char *const star[] = {"*", NULL};
    h = list(star);
    assert_true(m(h, "anything.at.all", 443));
    assert_true(m(h, "10.0.0.1", 443));
    assert_false(m(h, "anything", 8443));
    mitm_hosts_free(h);

    const char *const stars[] = {"*a*b*c", NULL};
    h = list(stars);
    assert_true(m(h, "xxaxxbxxc", 443));
    assert_false(m(h, "xxaxxbxxcx", 443));
    assert_true(m(h, "abc", 443));
    mitm_hosts_free(h);
}

/* First match wins: an exclusion only works in front of what it carves out. */
static void
test_exclusions_in_order(void **state)
{
    (void)state;
    const char *const pats[] = {"-pinned.example.com", "*.example.com", "-late.example.com",
                                NULL};
    struct mitm_hosts *h = list(pats);
    assert_false(m(h, "pinned.example.com", 443));
    assert_true(m(h, "www.example.com", 443));
    assert_true(m(h, "late.example.com", 443)); /* the include came first */
    mitm_hosts_free(h);

    const char *const only_excl[] = {"-*.apple.com", NULL};
    h = list(only_excl);
    assert_false(m(h, "www.apple.com", 443));
    assert_false(m(h, "www.example.com", 443)); /* no include at all */
    mitm_hosts_free(h);
}

static void
test_ports(void **state)
{
    (void)state;
    const char *const pats[] = {"a.test", "b.test:8443", "c.test:0", "*:9443", "-d.test:0",
                                "d.test", NULL};
    struct mitm_hosts *h = list(pats);
    assert_true(m(h, "a.test", 443));
    assert_false(m(h, "a.test", 8443)); /* a bare host is port 443 only */
    assert_false(m(h, "a.test", 80));
    assert_true(m(h, "b.test", 8443));
    assert_false(m(h, "b.test", 443));
    assert_true(m(h, "c.test", 443));
    assert_true(m(h, "c.test", 1));
    assert_true(m(h, "anything.test", 9443));
    assert_false(m(h, "anything.test", 443));
    assert_false(m(h, "d.test", 443)); /* excluded on every port */
    mitm_hosts_free(h);
}

static void
test_ip_literals(void **state)
{
    (void)state;
    const char *const pats[] = {"192.0.2.7", "2001:db8::1", "[2001:db8::2]:8443", "198.51.100.*",
                                NULL};
    struct mitm_hosts *h = list(pats);
    assert_true(m(h, "192.0.2.7", 443));
    assert_false(m(h, "192.0.2.70", 443));
    assert_true(m(h, "2001:db8::1", 443));
    assert_true(m(h, "2001:DB8:0:0::1", 443)); /* compared as an address */
    assert_true(m(h, "[2001:db8::1]", 443));   /* brackets as in a Host field */
    assert_true(m(h, "2001:db8::2", 8443));
    assert_false(m(h, "2001:db8::2", 443));
    assert_true(m(h, "198.51.100.20", 443)); /* a wildcard over the text */
    mitm_hosts_free(h);
}

static void
test_classes(void **state)
{
    (void)state;
    const char *const pats[] = {"-<ipv6-address>", "<ip-address>", "<simple-hostname>", NULL};
    struct mitm_hosts *h = list(pats);
    assert_true(m(h, "10.1.2.3", 443));
    assert_false(m(h, "::1", 443));
    assert_true(m(h, "intranet", 443));
    assert_false(m(h, "intranet.example", 443));
    mitm_hosts_free(h);

    const char *const v4[] = {"<IPv4-Address>:0", NULL};
    h = list(v4);
    assert_true(m(h, "10.1.2.3", 8080));
    assert_false(m(h, "fe80::1", 443));
    assert_false(m(h, "a.example", 443));
    mitm_hosts_free(h);
}

static void
bad(const char *pat, const char *want)
{
    char err[300] = "";
    struct mitm_hosts *h = mitm_hosts_new();
    assert_int_equal(mitm_hosts_add(h, pat, strlen(pat), err, sizeof(err)), -1);
    if (strstr(err, want) == NULL)
        fail_msg("'%s': got '%s', want '%s'", pat, err, want);
    assert_int_equal(mitm_hosts_count(h), 0);
    mitm_hosts_free(h);
}

static void
test_errors(void **state)
{
    (void)state;
    bad("", "empty host pattern");
    bad("-", "empty host pattern");
    bad("a.test b.test", "has a space");
    bad("a.test,b.test", "has a space, comma");
    bad("a.test:99999", "bad port '99999'");
    bad("a.test:", "bad port ''");
    bad("a.test:x1", "bad port 'x1'");
    bad("a/b.test", "is not a host name");
    bad("[2001:db8::1", "is not a host name");
    bad("[nope]:443", "is not a host name");
    bad(":443", "is not a host name");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wildcards),   cmocka_unit_test(test_exclusions_in_order),
        cmocka_unit_test(test_ports),       cmocka_unit_test(test_ip_literals),
        cmocka_unit_test(test_classes),     cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
