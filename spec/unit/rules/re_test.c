#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules/re.h"

static struct rules_re *
compile(const char *p, int flags)
{
    char err[160];
    struct rules_re *re = rules_re_new(p, strlen(p), flags, err, sizeof(err));
    if (re == NULL)
        fail_msg("%s: %s", p, err);
    return re;
}

static int
m(const struct rules_re *re, const char *s)
{
    return rules_re_match(re, s, strlen(s), NULL, 0);
}

/* The syntax real lists and modules use: \d, \w, (?i), {m,n}. */
static void
test_perl_syntax(void **state)
{
    (void)state;
    struct rules_re *re = compile("^ad\\d{1,3}\\.\\w+\\.com$", 0);
    assert_true(m(re, "ad12.example.com") > 0);
    assert_int_equal(m(re, "ad1234.example.com"), RULES_RE_NOMATCH);
    rules_re_free(re);
    re = compile("(?i)^https?://API\\.example\\.com/", 0);
    assert_true(m(re, "https://api.example.com/v1") > 0);
    rules_re_free(re);
    re = compile("^x\\.com$", RULES_RE_CASELESS);
    assert_true(m(re, "X.COM") > 0);
    rules_re_free(re);
}

static void
test_bad_pattern_says_where(void **state)
{
    (void)state;
    char err[160];
    assert_null(rules_re_new("(ab", 3, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "offset 3"));
}

/* A backtracking bomb on a subject the client chooses is cut, not run. */
static void
test_limit_cuts_catastrophic_pattern(void **state)
{
    (void)state;
    struct rules_re *re = compile("^(a+)+$", 0);
    char s[91];
    memset(s, 'a', 89);
    s[89] = '!';
    s[90] = 0;
    assert_int_equal(m(re, s), RULES_RE_LIMIT);
    rules_re_free(re);
}

static void
test_groups_and_expand(void **state)
{
    (void)state;
    struct rules_re *re = compile("^https://(\\w+)\\.example\\.com/(.*)$", 0);
    assert_int_equal(rules_re_groups(re), 2);
    const char *s = "https://www.example.com/a/b?c";
    size_t ov[6];
    assert_int_equal(rules_re_match(re, s, strlen(s), ov, 3), 3);
    char out[64];
    const char *t = "https://$1.example.net/x/$2 ${1}$$ $9";
    size_t n = rules_re_expand(t, strlen(t), s, ov, 3, out, sizeof(out));
    assert_int_equal(n, strlen("https://www.example.net/x/a/b?c www$ "));
    assert_memory_equal(out, "https://www.example.net/x/a/b?c www$ ", n);
    /* Too small a buffer: the length needed comes back, nothing overruns. */
    assert_int_equal(rules_re_expand(t, strlen(t), s, ov, 3, out, 4), n);
    rules_re_free(re);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perl_syntax),
        cmocka_unit_test(test_bad_pattern_says_where),
        cmocka_unit_test(test_limit_cuts_catastrophic_pattern),
        cmocka_unit_test(test_groups_and_expand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
