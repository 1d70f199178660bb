/* core/script/suggest.c and srcpos.c: the nearest known name, and the line
 * of a key inside a table constructor found again in the source text. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>

#include <cmocka.h>

#include "script/hint.h"

static const char *const keys[] = {"budget", "fallback", "listen", "log_level", "timeouts",
                                   "decision_cache", NULL};

static void
suggest_near_names(void **state)
{
    (void)state;
    assert_string_equal(script_suggest("lsten", keys, SIZE_MAX), "listen");
    assert_string_equal(script_suggest("Listen", keys, SIZE_MAX), "listen");
    assert_string_equal(script_suggest("log-level", keys, SIZE_MAX), "log_level");
    assert_string_equal(script_suggest("fallbakc", keys, SIZE_MAX), "fallback"); /* a swap */
    assert_string_equal(script_suggest("budgte", keys, SIZE_MAX), "budget");
    assert_string_equal(script_suggest("decison_cach", keys, SIZE_MAX), "decision_cache");
}

static void
suggest_refuses_far_and_exact(void **state)
{
    (void)state;
    assert_null(script_suggest("listen", keys, SIZE_MAX)); /* exact: nothing to suggest */
    assert_null(script_suggest("mtu", keys, SIZE_MAX));
    assert_null(script_suggest("frobnicate", keys, SIZE_MAX));
    assert_null(script_suggest("", keys, SIZE_MAX));
    static const char *const two[] = {"src", "no-resolve"};
    assert_null(script_suggest("dst", two, 2)); /* 3 edits */
    assert_null(script_suggest("x", two, 2));
    char long_word[200];
    memset(long_word, 'a', sizeof(long_word) - 1);
    long_word[sizeof(long_word) - 1] = '\0';
    assert_null(script_suggest(long_word, keys, SIZE_MAX));
}

#define LOCATE(src, line, fname, arg, path) \
    script_src_locate(src, strlen(src), line, fname, arg, path)

static const char big[] =
    "local chute = require \"chute\"\n"                  /* 1 */
    "chute.config {\n"                                   /* 2 */
    "  -- timeouts = { connect = 1 } in a comment\n"     /* 3 */
    "  log_level = \"info\", fallback = [[x\n"           /* 4 */
    "timeouts = ]],\n"                                   /* 5 */
    "  --[==[ a long\n comment ]==]\n"                   /* 6, 7 */
    "  [\"budget\"] = 5,\n"                              /* 8 */
    "  listen = { socks = \"a\", http = { address =\n"   /* 9 */
    "    \"b\" } },\n"                                   /* 10 */
    "  f = function(a, b) if a then return a, b end end,\n" /* 11 */
    "  timeouts = {\n"                                   /* 12 */
    "    idle = 3 == 3 and 1,\n"                         /* 13 */
    "    connect = \"5s\",\n"                            /* 14 */
    "  },\n"                                             /* 15 */
    "}\n";

static void
locate_keys(void **state)
{
    (void)state;
    assert_int_equal(LOCATE(big, 2, "config", NULL, "timeouts.connect"), 14);
    assert_int_equal(LOCATE(big, 2, "config", NULL, "timeouts.idle"), 13);
    assert_int_equal(LOCATE(big, 2, "config", NULL, "timeouts"), 12);
    assert_int_equal(LOCATE(big, 2, "config", NULL, "budget"), 8);
    assert_int_equal(LOCATE(big, 2, "config", NULL, "fallback"), 4);
    assert_int_equal(LOCATE(big, 2, "config", NULL, "listen.http.address"), 9);
    /* Past the deepest key found: that key's line. */
    assert_int_equal(LOCATE(big, 2, "config", NULL, "listen.socks.address"), 9);
    assert_int_equal(LOCATE(big, 2, "config", NULL, "timeouts.nope"), 12);
    /* Not there at all, or not a constructor: the call's line. */
    assert_int_equal(LOCATE(big, 2, "config", NULL, "nope"), 2);
    assert_int_equal(LOCATE(big, 2, "rules", NULL, "timeouts"), 2);
    assert_int_equal(LOCATE("chute.config(cfg)\n{ a = 1 }\n", 1, "config", NULL, "a"), 1);
}

static void
locate_positional_and_args(void **state)
{
    (void)state;
    static const char rules[] = "chute.route = chute.rules {\n"
                                "  {\"DOMAIN\", \"a\", \"DIRECT\"}, { \"X\",\n"
                                "   \"y\" };\n"
                                "  [7] = 1,\n"
                                "  function(f) return \"DIRECT\" end,\n"
                                "  {\"FINAL\"},\n"
                                "}\n";
    assert_int_equal(LOCATE(rules, 1, "rules", NULL, "#1"), 2);
    assert_int_equal(LOCATE(rules, 1, "rules", NULL, "#2"), 2);
    assert_int_equal(LOCATE(rules, 1, "rules", NULL, "#3"), 5);
    assert_int_equal(LOCATE(rules, 1, "rules", NULL, "#4"), 6);
    assert_int_equal(LOCATE(rules, 1, "rules", NULL, "#9"), 1);
    static const char proxies[] = "chute.proxy \"a\" { port = 1 } chute.proxy(\"b\")({\n"
                                  "  port = 2 })\n";
    assert_int_equal(LOCATE(proxies, 1, "proxy", "b", "port"), 2);
    assert_int_equal(LOCATE(proxies, 1, "proxy", "a", "port"), 1);
}

static void
locate_survives_broken_source(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "chute.config {", "chute.config { a = ", "chute.config { [", "chute.config { [[",
        "chute.config { a = \"", "chute.config { a = { b = { c", "chute.config { --[[", "",
        "chute.config { a = function() end end end }, b = 1 }",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(LOCATE(bad[i], 1, "config", NULL, "a.b.c"), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(suggest_near_names),
        cmocka_unit_test(suggest_refuses_far_and_exact),
        cmocka_unit_test(locate_keys),
        cmocka_unit_test(locate_positional_and_args),
        cmocka_unit_test(locate_survives_broken_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
