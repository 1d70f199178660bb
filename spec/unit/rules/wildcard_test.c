/* Wildcard host patterns, pinned to the originals' documented semantics:
 * mihomo's DOMAIN-WILDCARD (component/wildcard: '*' zero or more of any
 * character, '?' exactly one), Surge's (manual, Domain Rules: '*' crosses
 * dots, '?' one character, [...] classes, case-insensitive) and a Clash
 * domain provider's "*.a.com" (exactly one label). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"

static int
m(enum rules_wild_kind kind, const char *pat, const char *host)
{
    struct rules_wildcards *w = rules_wildcards_new();
    uint32_t tag = 0;
    assert_int_equal(rules_wildcards_add(w, kind, pat, strlen(pat), 7), 0);
    int hit = rules_wildcards_match(w, host, strlen(host), &tag);
    if (hit)
        assert_int_equal(tag, 7);
    rules_wildcards_free(w);
    return hit;
}

static void
test_glob_mihomo(void **state)
{
    (void)state;
    assert_true(m(RULES_WILD_GLOB, "*.google.com", "www.google.com"));
    assert_true(m(RULES_WILD_GLOB, "*.google.com", "a.b.google.com")); /* '*' crosses dots */
    assert_false(m(RULES_WILD_GLOB, "*.google.com", "google.com"));
    assert_true(m(RULES_WILD_GLOB, "*google.com", "google.com"));      /* '*' may be empty */
    assert_true(m(RULES_WILD_GLOB, "api-*.example.com", "api-eu.example.com"));
    assert_false(m(RULES_WILD_GLOB, "api-*.example.com", "api.example.com"));
    assert_true(m(RULES_WILD_GLOB, "?.a.com", "x.a.com"));
    assert_false(m(RULES_WILD_GLOB, "?.a.com", "xy.a.com"));
    assert_false(m(RULES_WILD_GLOB, "?.a.com", ".a.com"));
    assert_true(m(RULES_WILD_GLOB, "*", "anything.at.all"));
    assert_true(m(RULES_WILD_GLOB, "a*b*c", "axxbyyc"));
    assert_false(m(RULES_WILD_GLOB, "a*b*c", "axxbyy"));
    assert_true(m(RULES_WILD_GLOB, "WWW.*.Com", "www.Example.COM")); /* case-insensitive */
    assert_true(m(RULES_WILD_GLOB, "*.a.com", "x.a.com."));          /* root dot ignored */
    /* mihomo has no classes: '[' is itself, and no host holds it. */
    assert_false(m(RULES_WILD_GLOB, "[ab].a.com", "a.a.com"));
}

static void
test_surge_classes(void **state)
{
    (void)state;
    assert_true(m(RULES_WILD_SURGE, "*.example.com", "a.b.example.com"));
    assert_true(m(RULES_WILD_SURGE, "cdn[0-9].a.com", "cdn7.a.com"));
    assert_false(m(RULES_WILD_SURGE, "cdn[0-9].a.com", "cdnx.a.com"));
    assert_true(m(RULES_WILD_SURGE, "[!w]*.a.com", "x.a.com"));
    assert_false(m(RULES_WILD_SURGE, "[!w]*.a.com", "www.a.com"));
    assert_true(m(RULES_WILD_SURGE, "[ab]?.a.com", "bz.a.com"));
    assert_true(m(RULES_WILD_SURGE, "*[0-9]", "host9"));
    assert_false(m(RULES_WILD_SURGE, "*[0-9]", "host"));
}

static void
test_clash_label(void **state)
{
    (void)state;
    assert_true(m(RULES_WILD_LABEL, "*.a.com", "x.a.com"));
    assert_false(m(RULES_WILD_LABEL, "*.a.com", "x.y.a.com")); /* one label, not two */
    assert_false(m(RULES_WILD_LABEL, "*.a.com", "a.com"));
    assert_true(m(RULES_WILD_LABEL, "www.*.com", "www.Example.com"));
    assert_false(m(RULES_WILD_LABEL, "www.*.com", "www.a.b.com"));
    assert_true(m(RULES_WILD_LABEL, "*.*.a.com", "x.y.a.com"));
    assert_false(m(RULES_WILD_LABEL, "a.?.com", "a.b.com")); /* '?' is no wildcard here */
}

static void
test_tags_and_bad_input(void **state)
{
    (void)state;
    uint32_t tag = 0;
    struct rules_wildcards *w = rules_wildcards_new();
    assert_int_equal(rules_wildcards_add(w, RULES_WILD_GLOB, "*.com", 5, 9), 0);
    assert_int_equal(rules_wildcards_add(w, RULES_WILD_GLOB, "*.a.com", 7, 3), 0);
    assert_int_equal(rules_wildcards_add(w, RULES_WILD_GLOB, "", 0, 1), -1);
    assert_int_equal(rules_wildcards_count(w), 2);
    assert_int_equal(rules_wildcards_match(w, "x.a.com", 7, &tag), 1);
    assert_int_equal(tag, 3);
    assert_int_equal(rules_wildcards_match(w, "x.b.com", 7, &tag), 1);
    assert_int_equal(tag, 9);
    assert_int_equal(rules_wildcards_match(w, "x.b.net", 7, &tag), 0);
    assert_int_equal(rules_wildcards_match(w, "", 0, &tag), 0);
    rules_wildcards_free(w);
    rules_wildcards_free(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glob_mihomo),
        cmocka_unit_test(test_surge_classes),
        cmocka_unit_test(test_clash_label),
        cmocka_unit_test(test_tags_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
