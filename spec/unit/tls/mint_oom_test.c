/* core/tls/mint.c when malloc fails: every allocation of tls_mint_new and
 * tls_mint_get made to fail in turn; each call fails cleanly (NULL and a
 * reason) or works, and the mint frees all it took. mint.c is included
 * with its malloc/calloc/free counted (spec/unit/fail_malloc.h). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../fail_malloc.h"

static inline void *
fm_calloc(size_t n, size_t size)
{
    void *p = fm_malloc(n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

#define malloc fm_malloc
#define calloc fm_calloc
#define free fm_free
#include "../../../core/tls/mint.c"
#undef malloc
#undef calloc
#undef free

static struct tls_ca *ca;
static char dir[] = "/tmp/chute-mint-oom-XXXXXX";

static int
setup(void **state)
{
    char cert[64], key[64], err[256];
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(cert, sizeof(cert), "%s/ca.pem", dir);
    snprintf(key, sizeof(key), "%s/ca.key", dir);
    if (tls_ca_create(cert, key, err, sizeof(err)) != 0 ||
        (ca = tls_ca_load(cert, key, err, sizeof(err))) == NULL) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    unlink(cert);
    unlink(key);
    rmdir(dir);
    return 0;
}

static int
teardown(void **state)
{
    tls_ca_free(ca);
    return 0;
}

static void
test_sweep(void **state)
{
    char err[256];
    double now = 1.8e9;
    int failed_new = 0, uncached = 0;
    for (int k = 0; k < 40; k++) {
        fm_reset();
        fm_fail_after = k;
        err[0] = '\0';
        struct tls_mint *m = tls_mint_new(ca, 1, err, sizeof(err));
        if (m == NULL) {
            assert_string_equal(err, "tls: out of memory");
            assert_int_equal(fm_mallocs, fm_frees);
            failed_new++;
            continue;
        }
        /* A mint, a cached get, an eviction: a leaf whose LRU entry could
         * not be had is served all the same, uncached. */
        const char *hosts[] = {"a.test", "a.test", "b.test"};
        struct tls_mint_stats st;
        for (int i = 0; i < 3; i++) {
            struct tls_server_cfg *cfg = tls_mint_get(m, hosts[i], now, err, sizeof(err));
            if (cfg == NULL)
                fail_msg("tls_mint_get %s: %s", hosts[i], err);
            tls_server_cfg_free(cfg);
            tls_mint_stats(m, &st);
            if (i == 0 && st.held == 0)
                uncached++;
        }
        assert_true(st.held <= 1);
        tls_mint_free(m);
        assert_int_equal(fm_mallocs, fm_frees);
    }
    print_message("tls_mint_new failed %d times; a leaf went uncached %d times\n", failed_new,
                  uncached);
    assert_true(failed_new >= 2 && uncached >= 1); /* the sweep reached every allocation */
    fm_reset();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sweep)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
