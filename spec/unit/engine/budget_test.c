#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/budget.h"
#include "netstack/netstack.h"

#define MIB ((size_t)1 << 20)

/* What the parts are counted at, together. */
static size_t
sum(const struct engine_budget *b)
{
    return b->fixed + b->lwip_heap + b->lwip_pools + b->flow_bytes + b->rules + b->lua +
           b->dns_bytes;
}

static void
test_zero_is_the_defaults(void **state)
{
    struct engine_budget b;
    memset(&b, 0xAB, sizeof(b));
    assert_int_equal(engine_budget_size(0, &b), 0);
    const struct engine_budget zero = {0};
    assert_memory_equal(&b, &zero, sizeof(b)); /* every part keeps its own default */
}

static void
test_below_the_floor_is_refused(void **state)
{
    struct engine_budget b;
    assert_int_equal(engine_budget_size(ENGINE_BUDGET_MIN - 1, &b), -1);
    assert_int_equal(engine_budget_size(1, &b), -1);
    assert_int_equal(engine_budget_size(ENGINE_BUDGET_MIN, &b), 0);
}

/* From the floor to 4 GiB, in odd steps: the parts fit in the limit, each
 * part has at least its floor and at most what lwIP was built with, and a
 * larger limit never gives any part less. */
static void
test_shares_fit_and_grow(void **state)
{
    struct engine_budget prev = {0};
    for (size_t limit = ENGINE_BUDGET_MIN; limit <= ((size_t)4 << 30); limit += limit / 7 + 12345) {
        struct engine_budget b;
        assert_int_equal(engine_budget_size(limit, &b), 0);
        assert_int_equal(b.limit, limit);
        if (sum(&b) > limit)
            fail_msg("limit %zu: the parts add up to %zu", limit, sum(&b));
        assert_true(b.lwip_heap >= (size_t)512 << 10);
        assert_true(b.lwip_heap <= NETSTACK_HEAP_MAX);
        assert_true(b.rules >= MIB);
        assert_true(b.lua >= (size_t)512 << 10);
        assert_true(b.tcp_flows >= 64 && b.udp_flows >= 16);
        assert_true(b.pcbs > b.tcp_flows && b.pcbs <= NETSTACK_PCBS_MAX);
        assert_true(b.listeners >= 64 && b.listeners <= NETSTACK_LISTENERS_MAX);
        assert_true(b.segs > 0 && b.segs <= NETSTACK_SEGS_MAX);
        assert_true(b.pbufs > 0 && b.pbufs <= NETSTACK_PBUFS_MAX);
        assert_true(b.dns_cache > 0 && b.fake_ips > 0);
        assert_true(b.queue > 0 && b.queue <= 1024 && b.wq > 0);
        if (prev.limit != 0) {
            assert_true(b.rules >= prev.rules);
            assert_true(b.lwip_heap >= prev.lwip_heap);
            assert_true(b.tcp_flows >= prev.tcp_flows);
            assert_true(b.lua >= prev.lua);
            assert_true(b.fake_ips >= prev.fake_ips);
        }
        prev = b;
    }
}

/* The figures README's "Memory limit" gives (and scripts/bench/embed
 * measures): 15 MiB holds 1,000 TCP flows beside 100,000 DOMAIN-SUFFIX
 * rules (~5.4 MiB as the rule sets count them). */
static void
test_15_mib_holds_the_target(void **state)
{
    struct engine_budget b;
    assert_int_equal(engine_budget_size(15 * MIB, &b), 0);
    assert_true(b.tcp_flows >= 1000);
    assert_true(b.rules >= 5 * MIB + MIB / 2);
    assert_true(b.lwip_heap < 16 * MIB);
    for (size_t m = 15; m <= 50; m += 35) { /* README's table */
        assert_int_equal(engine_budget_size(m * MIB, &b), 0);
        print_message("%zu MiB: fixed %zu K, heap %zu K, pools %zu K (%zu pcbs %zu listeners %zu "
                      "segs %zu pbufs), flows %zu K (%zu TCP %zu UDP), rules %zu K, lua %zu K, dns "
                      "%zu K (%zu cache %zu fake), queue %zu, wq %zu K\n",
                      m, b.fixed >> 10, b.lwip_heap >> 10, b.lwip_pools >> 10, b.pcbs, b.listeners,
                      b.segs, b.pbufs, b.flow_bytes >> 10, b.tcp_flows, b.udp_flows, b.rules >> 10,
                      b.lua >> 10, b.dns_bytes >> 10, b.dns_cache, b.fake_ips, b.queue, b.wq >> 10);
    }
}

static void
test_cap(void **state)
{
    assert_int_equal(engine_budget_cap(100, 0), 100); /* no limit: the bundle's */
    assert_int_equal(engine_budget_cap(0, 50), 50);   /* the part's default: the cap */
    assert_int_equal(engine_budget_cap(100, 50), 50);
    assert_int_equal(engine_budget_cap(20, 50), 20);
}

static void
test_fmt(void **state)
{
    char buf[32];
    assert_string_equal(engine_budget_fmt(15 * MIB, buf, sizeof(buf)), "15 MiB");
    assert_string_equal(engine_budget_fmt(3 * MIB / 2, buf, sizeof(buf)), "1.5 MiB");
    assert_string_equal(engine_budget_fmt(512 << 10, buf, sizeof(buf)), "512 KiB");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_is_the_defaults),
        cmocka_unit_test(test_below_the_floor_is_refused),
        cmocka_unit_test(test_shares_fit_and_grow),
        cmocka_unit_test(test_15_mib_holds_the_target),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_fmt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
