/* Out of memory anywhere in a module's load: the load fails with "out of
 * memory" (or succeeds), the set keeps what it had, and nothing crashes.
 * The parser's files are included so their allocations can be made to
 * fail (nghttp2's failmalloc sweep). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../fail_malloc.h"

static void *
fm_realloc(void *p, size_t n)
{
    if (fm_fail_after == 0)
        return NULL;
    if (fm_fail_after > 0)
        fm_fail_after--;
    return realloc(p, n);
}

static void *
fm_calloc(size_t a, size_t b)
{
    void *p = fm_malloc(a * b);
    if (p != NULL)
        memset(p, 0, a * b);
    return p;
}

#define malloc(n) fm_malloc(n)
#define realloc(p, n) fm_realloc(p, n)
#define calloc(a, b) fm_calloc(a, b)
#include "../../../core/mitm/hosts.c"
#include "../../../core/mitm/module.c"
#include "../../../core/mitm/module_lines.c"
#undef malloc
#undef realloc
#undef calloc

static int
read_file(void *ud, const char *path, char **data, size_t *len)
{
    (void)ud;
    (void)path;
    if ((*data = fm_malloc(4)) == NULL)
        return 12; /* ENOMEM */
    memcpy(*data, "{}\n", 4);
    *len = 3;
    return 0;
}

static const char text[] = "[URL Rewrite]\n"
                           "^https://a\\.test/(.*) https://b.test/$1 302\n"
                           "^https://c\\.test/ _ reject\n"
                           "[Header Rewrite]\n"
                           "http-request ^https://a\\.test/ header-add X 1\n"
                           "http-response ^https://a\\.test/ header-replace-regex D a b\n"
                           "[Map Local]\n"
                           "^https://m\\.test/ data=\"d.json\" header=\"a:b|c:d\"\n"
                           "^https://n\\.test/ data-type=base64 data=dGVzdA==\n"
                           "[Body Rewrite]\n"
                           "http-response ^https://a\\.test/ a b c d e f\n"
                           "[Script]\n"
                           "x = type=http-request\n"
                           "[MITM]\n"
                           "hostname = %APPEND% a.test, -b.test, *.c.test:0\n"
                           "hostname = %INSERT% first.test\n";

static void
test_out_of_memory_sweep(void **state)
{
    (void)state;
    char err[600];
    int k;
    for (k = 0; k < 10000; k++) {
        fm_reset();
        struct mitm_rewrites *rw = mitm_rewrites_new();
        if (rw == NULL)
            continue;
        /* A set with something in it already, to see it kept whole. */
        static const char before[] = "[MITM]\nhostname = kept.test\n[URL Rewrite]\n^x y 302\n";
        assert_int_equal(mitm_rewrites_load(rw, before, sizeof(before) - 1, "b", NULL, NULL, NULL,
                                            err, sizeof(err)),
                         0);
        fm_fail_after = k;
        int rc = mitm_rewrites_load(rw, text, sizeof(text) - 1, "m", read_file, NULL, NULL, err,
                                    sizeof(err));
        fm_fail_after = -1;
        const char *const *hosts;
        size_t nh = mitm_rewrites_hostnames(rw, &hosts);
        if (rc == 0) {
            assert_int_equal(mitm_rewrites_count(rw), 1 + 7);
            assert_int_equal(nh, 5);
            assert_string_equal(hosts[0], "first.test");
            mitm_rewrites_free(rw);
            break;
        }
        if (strstr(err, "out of memory") == NULL && strstr(err, "Cannot allocate") == NULL)
            fail_msg("k=%d: %s", k, err);
        /* Failed before the merge: the set is as it was (a failure inside
         * the merge may have moved part of the load, never broken it). */
        assert_true(mitm_rewrites_count(rw) >= 1);
        assert_true(nh >= 1);
        for (size_t i = 0; i < nh; i++)
            assert_non_null(hosts[i]);
        mitm_rewrites_free(rw);
    }
    assert_true(k > 20);
    assert_true(k < 10000);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_memory_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
