#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "flow/dcache.h"

static struct flow
named(const char *host, uint16_t port, int policy)
{
    struct flow f = {.network = FLOW_TCP, .inbound = FLOW_IN_TUN, .policy = policy};
    assert_int_equal(flow_addr_from_host(&f.dst, host, strlen(host), port), 0);
    f.rule = "route";
    return f;
}

static void
test_hit_miss_and_key_fields(void **state)
{
    struct flow_dcache *c = flow_dcache_new(8);
    struct flow f = named("example.test", 443, FLOW_POLICY_REJECT);
    struct flow g = named("example.test", 443, FLOW_POLICY_DIRECT);
    assert_int_equal(flow_dcache_get(c, &g), 0);
    flow_dcache_put(c, &f);
    assert_int_equal(flow_dcache_get(c, &g), 1);
    assert_int_equal(g.policy, FLOW_POLICY_REJECT);
    assert_string_equal(g.rule, "route (cached)");

    /* Each key field tells flows apart. */
    struct flow other_port = named("example.test", 80, FLOW_POLICY_DIRECT);
    struct flow other_net = named("example.test", 443, FLOW_POLICY_DIRECT);
    struct flow other_in = named("example.test", 443, FLOW_POLICY_DIRECT);
    struct flow ip = named("192.0.2.1", 443, FLOW_POLICY_DIRECT);
    other_net.network = FLOW_UDP;
    other_in.inbound = FLOW_IN_SOCKS;
    assert_int_equal(flow_dcache_get(c, &other_port), 0);
    assert_int_equal(flow_dcache_get(c, &other_net), 0);
    assert_int_equal(flow_dcache_get(c, &other_in), 0);
    assert_int_equal(flow_dcache_get(c, &ip), 0);

    struct flow_dcache_stats st;
    flow_dcache_stats(c, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 5);
    assert_int_equal(st.size, 1);
    flow_dcache_free(c);
}

static void
test_lru_eviction(void **state)
{
    struct flow_dcache *c = flow_dcache_new(3);
    struct flow a = named("a.test", 1, 1), b = named("b.test", 1, 1), d = named("d.test", 1, 1);
    struct flow e = named("e.test", 1, 1), probe;
    flow_dcache_put(c, &a);
    flow_dcache_put(c, &b);
    flow_dcache_put(c, &d);
    probe = named("a.test", 1, 0);
    assert_int_equal(flow_dcache_get(c, &probe), 1); /* a is now the most recent */
    flow_dcache_put(c, &e);                           /* evicts b, the least recent */
    probe = named("b.test", 1, 0);
    assert_int_equal(flow_dcache_get(c, &probe), 0);
    probe = named("a.test", 1, 0);
    assert_int_equal(flow_dcache_get(c, &probe), 1);
    probe = named("d.test", 1, 0);
    assert_int_equal(flow_dcache_get(c, &probe), 1);
    probe = named("e.test", 1, 0);
    assert_int_equal(flow_dcache_get(c, &probe), 1);
    struct flow_dcache_stats st;
    flow_dcache_stats(c, &st);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.size, 3);
    flow_dcache_free(c);
}

static void
test_many_entries_and_clear(void **state)
{
    struct flow_dcache *c = flow_dcache_new(1000);
    char host[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(host, sizeof(host), "h%d.test", i);
        struct flow f = named(host, 443, i & 1);
        flow_dcache_put(c, &f);
    }
    /* The last 1000 are there with their own policies; the first ones went. */
    for (int i = 4000; i < 5000; i++) {
        snprintf(host, sizeof(host), "h%d.test", i);
        struct flow f = named(host, 443, 7);
        assert_int_equal(flow_dcache_get(c, &f), 1);
        assert_int_equal(f.policy, i & 1);
    }
    struct flow old = named("h0.test", 443, 7);
    assert_int_equal(flow_dcache_get(c, &old), 0);
    flow_dcache_clear(c);
    struct flow last = named("h4999.test", 443, 7);
    assert_int_equal(flow_dcache_get(c, &last), 0);
    flow_dcache_free(c);
}

static void
test_long_names_and_disabled(void **state)
{
    struct flow_dcache *c = flow_dcache_new(8);
    char host[100];
    memset(host, 'a', sizeof(host) - 6);
    strcpy(host + sizeof(host) - 6, ".test");
    struct flow f = named(host, 443, 1);
    flow_dcache_put(c, &f);
    assert_int_equal(flow_dcache_get(c, &f), 0); /* too long to keep: always asks Lua */
    flow_dcache_free(c);

    struct flow_dcache *off = flow_dcache_new(0);
    struct flow g = named("x.test", 443, 1);
    flow_dcache_put(off, &g);
    assert_int_equal(flow_dcache_get(off, &g), 0);
    flow_dcache_free(off);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_miss_and_key_fields),
        cmocka_unit_test(test_lru_eviction),
        cmocka_unit_test(test_many_entries_and_clear),
        cmocka_unit_test(test_long_names_and_disabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
