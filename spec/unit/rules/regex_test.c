#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules/rules.h"

static long
match(const struct rules_regexes *r, const char *host)
{
    uint32_t tag = 12345;
    if (!rules_regexes_match(r, host, strlen(host), &tag))
        return -1;
    return tag;
}

static void
test_match_and_case(void **state)
{
    (void)state;
    char err[128];
    struct rules_regexes *r = rules_regexes_new();
    assert_int_equal(rules_regexes_add(r, "^ad[0-9]+\\.", 3, err, sizeof(err)), 0);
    assert_int_equal(rules_regexes_add(r, "(^|\\.)google\\.(com|de)$", 5, err, sizeof(err)), 0);
    assert_int_equal(match(r, "ad12.example.com"), 3);
    assert_int_equal(match(r, "AD7.example.com"), 3);
    assert_int_equal(match(r, "ad.example.com"), -1);
    assert_int_equal(match(r, "www.google.com"), 5);
    assert_int_equal(match(r, "WWW.GOOGLE.DE"), 5);
    assert_int_equal(match(r, "google.com."), 5); /* root dot dropped */
    assert_int_equal(match(r, "notgoogle.com"), -1);
    assert_int_equal(match(r, "google.com.evil"), -1);
    /* The host is a byte view: only |len| bytes are matched. */
    assert_int_equal(rules_regexes_match(r, "google.comXYZ", 10, NULL), 1);
    rules_regexes_free(r);
}

static void
test_smallest_tag_whatever_the_order(void **state)
{
    (void)state;
    struct rules_regexes *r = rules_regexes_new();
    assert_int_equal(rules_regexes_add(r, "example", 9, NULL, 0), 0);
    assert_int_equal(rules_regexes_add(r, "\\.com$", 4, NULL, 0), 0);
    assert_int_equal(rules_regexes_add(r, "^www\\.", 6, NULL, 0), 0);
    assert_int_equal(rules_regexes_add(r, "exam", 1, NULL, 0), 0);
    assert_int_equal(match(r, "www.example.com"), 1);
    assert_int_equal(match(r, "www.exa.com"), 4);
    assert_int_equal(match(r, "www.exa.net"), 6);
    assert_int_equal(match(r, "nothing.net"), -1);
    rules_regexes_free(r);
}

static void
test_bad_pattern_and_limits(void **state)
{
    (void)state;
    char err[128] = "";
    char host[300];
    struct rules_regexes *r = rules_regexes_new();
    assert_int_equal(match(r, "a.test"), -1); /* empty set */
    assert_int_equal(rules_regexes_add(r, "a(b", 1, err, sizeof(err)), -1);
    assert_true(strlen(err) > 0);
    assert_int_equal(rules_regexes_add(r, "[z-a]", 1, err, 4), -1);
    assert_true(strlen(err) <= 3);
    assert_int_equal(rules_regexes_add(r, NULL, 1, err, sizeof(err)), -1);
    assert_int_equal(rules_regexes_add(r, "x", 1, NULL, 0), 0);
    /* 253 bytes fit the copy; longer is no host name. */
    memset(host, 'x', sizeof(host));
    assert_int_equal(rules_regexes_match(r, host, 253, NULL), 1);
    assert_int_equal(rules_regexes_match(r, host, 254, NULL), 0);
    assert_int_equal(rules_regexes_match(r, host, 0, NULL), 0);
    rules_regexes_free(r);
    rules_regexes_free(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_and_case),
        cmocka_unit_test(test_smallest_tag_whatever_the_order),
        cmocka_unit_test(test_bad_pattern_and_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
