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

/* What real Surge (PCRE/ICU) and mihomo (RE2-style) lists write, which
 * POSIX ERE refused or read otherwise. */
static void
test_perl_syntax(void **state)
{
    (void)state;
    char err[160] = "";
    struct rules_regexes *r = rules_regexes_new();
    assert_int_equal(rules_regexes_add(r, "^ad\\d{1,3}\\.example\\.com$", 1, err, sizeof(err)), 0);
    assert_int_equal(rules_regexes_add(r, "^\\w+-cdn\\.test$", 2, err, sizeof(err)), 0);
    assert_int_equal(rules_regexes_add(r, "(?i)^TRACK(?:er)?\\.", 3, err, sizeof(err)), 0);
    assert_int_equal(rules_regexes_add(r, "^(?!www\\.)[a-z]{2,4}\\.neg\\.test$", 4, err,
                                       sizeof(err)), 0);
    assert_int_equal(match(r, "ad7.example.com"), 1);
    assert_int_equal(match(r, "ad123.example.com"), 1);
    assert_int_equal(match(r, "ad1234.example.com"), -1);
    assert_int_equal(match(r, "adx.example.com"), -1);
    assert_int_equal(match(r, "img_1-cdn.test"), 2);
    assert_int_equal(match(r, "a.b-cdn.test"), -1);
    assert_int_equal(match(r, "tracker.example"), 3);
    assert_int_equal(match(r, "abc.neg.test"), 4);
    assert_int_equal(match(r, "www.neg.test"), -1);
    /* PCRE2's message names the offset. */
    assert_int_equal(rules_regexes_add(r, "^a{2,1}$", 5, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "offset"));
    assert_int_equal(rules_regexes_count(r), 4);
    rules_regexes_free(r);
}

/* A pattern that backtracks exponentially is cut by the match limit: no
 * match, counted, and the next pattern still runs. */
static void
test_match_limit(void **state)
{
    (void)state;
    char host[91];
    struct rules_regexes *r = rules_regexes_new();
    assert_int_equal(rules_regexes_add(r, "^(a+)+$", 1, NULL, 0), 0);
    assert_int_equal(rules_regexes_add(r, "!$", 2, NULL, 0), 0);
    memset(host, 'a', 89);
    host[89] = '!';
    uint32_t tag = 0;
    assert_int_equal(rules_regexes_match(r, host, 90, &tag), 1);
    assert_int_equal(tag, 2);
    assert_true(rules_regexes_cut(r) >= 1);
    rules_regexes_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_and_case),
        cmocka_unit_test(test_smallest_tag_whatever_the_order),
        cmocka_unit_test(test_bad_pattern_and_limits),
        cmocka_unit_test(test_perl_syntax),
        cmocka_unit_test(test_match_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
