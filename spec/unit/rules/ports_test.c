#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rules/rules.h"

static long
match(const struct rules_ports *p, uint16_t port)
{
    uint32_t tag = 12345;
    if (!rules_ports_match(p, port, &tag))
        return -1;
    return tag;
}

static void
test_ports_and_ranges(void **state)
{
    (void)state;
    struct rules_ports *p = rules_ports_new();
    assert_int_equal(rules_ports_add(p, 443, 443, 1), 0);
    assert_int_equal(rules_ports_add(p, 8000, 9000, 2), 0);
    assert_int_equal(rules_ports_add(p, 0, 0, 3), 0);
    assert_int_equal(rules_ports_add(p, 65535, 65535, 4), 0);
    assert_int_equal(rules_ports_build(p), 0);
    assert_int_equal(match(p, 443), 1);
    assert_int_equal(match(p, 442), -1);
    assert_int_equal(match(p, 444), -1);
    assert_int_equal(match(p, 8000), 2);
    assert_int_equal(match(p, 8500), 2);
    assert_int_equal(match(p, 9000), 2);
    assert_int_equal(match(p, 7999), -1);
    assert_int_equal(match(p, 9001), -1);
    assert_int_equal(match(p, 0), 3);
    assert_int_equal(match(p, 1), -1);
    assert_int_equal(match(p, 65535), 4);
    assert_int_equal(match(p, 65534), -1);
    rules_ports_free(p);
}

static void
test_overlaps_smallest_tag(void **state)
{
    (void)state;
    struct rules_ports *p = rules_ports_new();
    assert_int_equal(rules_ports_add(p, 0, 65535, 9), 0);
    assert_int_equal(rules_ports_add(p, 1000, 2000, 5), 0);
    assert_int_equal(rules_ports_add(p, 1500, 2500, 3), 0);
    assert_int_equal(rules_ports_add(p, 1800, 1800, 7), 0);
    assert_int_equal(rules_ports_add(p, 80, 80, 1), 0);
    assert_int_equal(rules_ports_add(p, 80, 80, 0), 0);
    assert_int_equal(rules_ports_build(p), 0);
    assert_int_equal(match(p, 0), 9);
    assert_int_equal(match(p, 80), 0);
    assert_int_equal(match(p, 81), 9);
    assert_int_equal(match(p, 999), 9);
    assert_int_equal(match(p, 1000), 5);
    assert_int_equal(match(p, 1499), 5);
    assert_int_equal(match(p, 1500), 3);
    assert_int_equal(match(p, 1800), 3);
    assert_int_equal(match(p, 2500), 3);
    assert_int_equal(match(p, 2501), 9);
    assert_int_equal(match(p, 65535), 9);
    rules_ports_free(p);
}

static void
test_lifecycle(void **state)
{
    (void)state;
    struct rules_ports *p = rules_ports_new();
    assert_int_equal(rules_ports_add(p, 10, 9, 1), -1);
    assert_int_equal(rules_ports_add(p, 22, 22, 1), 0);
    assert_int_equal(match(p, 22), -1); /* not built */
    assert_int_equal(rules_ports_build(p), 0);
    assert_int_equal(rules_ports_build(p), -1);
    assert_int_equal(rules_ports_add(p, 23, 23, 1), -1);
    assert_int_equal(match(p, 23), -1);
    assert_int_equal(rules_ports_match(p, 22, NULL), 1);
    rules_ports_free(p);

    struct rules_ports *empty = rules_ports_new();
    assert_int_equal(rules_ports_build(empty), 0);
    assert_int_equal(match(empty, 0), -1);
    assert_int_equal(match(empty, 443), -1);
    rules_ports_free(empty);
    rules_ports_free(NULL);
}

static void
test_random_cross_check(void **state)
{
    (void)state;
    srand(77);
    for (int round = 0; round < 20; round++) {
        static long ref[65536];
        int n = 1 + rand() % 300;
        struct rules_ports *p = rules_ports_new();
        for (int i = 0; i < 65536; i++)
            ref[i] = -1;
        for (int i = 0; i < n; i++) {
            uint16_t lo = (uint16_t)(rand() % 65536), hi = lo;
            if (rand() % 2)
                hi = (uint16_t)(lo + rand() % (65536 - lo > 3000 ? 3000 : 65536 - lo));
            uint32_t tag = (uint32_t)(rand() % 1000);
            assert_int_equal(rules_ports_add(p, lo, hi, tag), 0);
            for (long port = lo; port <= hi; port++)
                if (ref[port] < 0 || tag < ref[port])
                    ref[port] = tag;
        }
        assert_int_equal(rules_ports_build(p), 0);
        for (long port = 0; port < 65536; port++)
            if (match(p, (uint16_t)port) != ref[port])
                fail_msg("round %d port %ld: want %ld, got %ld", round, port, ref[port],
                         match(p, (uint16_t)port));
        rules_ports_free(p);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ports_and_ranges),
        cmocka_unit_test(test_overlaps_smallest_tag),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_random_cross_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
