#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dns/dns.h"
#include "engine/engine.h"
#include "flow/dcache.h"
#include "flow/flow.h"
#include "flow/udp.h"
#include "log/counter.h"
#include "netstack/netstack.h"
#include "outbound/set.h"
#include "script/script.h"
#include "tls/tls.h"
#include "tun/tun.h"

/* A module's list, as a module's header would declare it. */
#define DEMO_STATS(X) X(sent, sent) X(lost_bytes, lost) X(peak, peak)
struct demo_stats {
#define X(field, key) uint64_t field;
    DEMO_STATS(X)
#undef X
};
static const struct log_counter demo_counters[] = {
#define X(field, key) LOG_COUNTER(struct demo_stats, field, key)
    DEMO_STATS(X)
#undef X
    LOG_COUNTER_END};

static void
test_demo_table(void **state)
{
    assert_string_equal(demo_counters[0].key, "sent");
    assert_int_equal(demo_counters[0].offset, offsetof(struct demo_stats, sent));
    assert_string_equal(demo_counters[1].key, "lost"); /* the key, not the field */
    assert_int_equal(demo_counters[1].offset, offsetof(struct demo_stats, lost_bytes));
    assert_string_equal(demo_counters[2].key, "peak");
    assert_int_equal(demo_counters[2].offset, offsetof(struct demo_stats, peak));
    assert_null(demo_counters[3].key);
    struct demo_stats d = {.sent = 1, .lost_bytes = 2, .peak = UINT64_MAX};
    assert_int_equal(log_counter_value(&demo_counters[1], &d), 2);
    assert_true(log_counter_value(&demo_counters[2], &d) == UINT64_MAX);
}

static void
test_format(void **state)
{
    struct demo_stats a = {.sent = 1, .lost_bytes = 20, .peak = UINT64_MAX};
    struct demo_stats b = {.sent = 7};
    const struct log_counter_group g[] = {{"", demo_counters, &a, NULL}, {"b_", demo_counters, &b, NULL}};
    char buf[256] = "stats";
    size_t n = log_counters_format(buf, sizeof(buf), g, 2);
    assert_string_equal(buf, "stats sent=1 lost=20 peak=18446744073709551615 b_sent=7 b_lost=0 "
                             "b_peak=0");
    assert_int_equal(n, strlen(buf));

    /* Cut short when full: still a string, and its length is returned. */
    char small[16] = "x";
    n = log_counters_format(small, sizeof(small), g, 2);
    assert_string_equal(small, "x sent=1 lost=2");
    assert_int_equal(n, sizeof(small) - 1);
    n = log_counters_format(small, sizeof(small), g, 2);
    assert_int_equal(n, sizeof(small) - 1);
}

/* Every module's table against its struct: one entry per uint64_t member
 * (|extra| bytes of members outside the list), offsets inside the struct
 * and distinct, keys distinct and made of [a-z0-9_]. */
struct module {
    const char *name;
    const struct log_counter *table;
    size_t size, extra;
};
static const struct module modules[] = {
    {"netstack", netstack_counters, sizeof(struct netstack_stats), 0},
    {"tun", tun_counters, sizeof(struct tun_stats), 0},
    {"flow_table", flow_table_counters, sizeof(struct flow_table_stats), 0},
    {"flow_dcache", flow_dcache_counters, sizeof(struct flow_dcache_stats), 0},
    {"flow_udp", flow_udp_counters, sizeof(struct flow_udp_stats), 0},
    {"dns_server", dns_server_counters, sizeof(struct dns_server_stats), 0},
    {"dns_resolver", dns_resolver_counters, sizeof(struct dns_resolver_stats), 0},
    {"outbound_set", outbound_set_counters, sizeof(struct outbound_set_stats), 0},
    {"tls", tls_counters, sizeof(struct tls_stats), 0},
    {"script", script_counters, sizeof(struct script_stats), 0},
    {"engine_dp", engine_dp_counters, sizeof(struct engine_dp_stats),
     sizeof(((struct engine_dp_stats *)0)->drops)},
};

static void
test_module_tables(void **state)
{
    for (size_t m = 0; m < sizeof(modules) / sizeof(modules[0]); m++) {
        const struct module *mod = &modules[m];
        size_t n = 0;
        for (const struct log_counter *c = mod->table; c->key != NULL; c++, n++) {
            assert_true(c->key[0] != '\0');
            assert_int_equal(strspn(c->key, "abcdefghijklmnopqrstuvwxyz0123456789_"),
                             strlen(c->key));
            assert_int_equal(c->offset % sizeof(uint64_t), 0);
            assert_true(c->offset + sizeof(uint64_t) <= mod->size);
            for (const struct log_counter *o = mod->table; o != c; o++) {
                assert_true(o->offset != c->offset);
                if (strcmp(o->key, c->key) == 0)
                    fail_msg("%s: key %s twice", mod->name, c->key);
            }
        }
        if (n * sizeof(uint64_t) + mod->extra != mod->size)
            fail_msg("%s: %zu counters in a struct of %zu bytes", mod->name, n, mod->size);
    }
}

/* The keys the stats line and its readers (spec/e2e, scripts/bench) know
 * by a name other than the field's. */
static const struct {
    const struct log_counter *table;
    const char *key;
    size_t offset;
} renamed[] = {
    {netstack_counters, "tcp_active", offsetof(struct netstack_stats, conns_active)},
    {netstack_counters, "tcp_total", offsetof(struct netstack_stats, conns_total)},
    {flow_table_counters, "flows_active", offsetof(struct flow_table_stats, active)},
    {flow_table_counters, "flows_total", offsetof(struct flow_table_stats, total)},
    {dns_server_counters, "fake", offsetof(struct dns_server_stats, fake_answers)},
    {dns_server_counters, "hook", offsetof(struct dns_server_stats, hook_answers)},
    {dns_resolver_counters, "tcp", offsetof(struct dns_resolver_stats, truncated_tcp)},
    {outbound_set_counters, "health_checks", offsetof(struct outbound_set_stats, checks)},
    {outbound_set_counters, "health_failures",
     offsetof(struct outbound_set_stats, check_failures)},
    {outbound_set_counters, "group_switches", offsetof(struct outbound_set_stats, switches)},
};

static const struct log_counter *
find(const struct log_counter *t, const char *key)
{
    for (; t->key != NULL; t++)
        if (strcmp(t->key, key) == 0)
            return t;
    return NULL;
}

static void
test_renamed_keys(void **state)
{
    for (size_t i = 0; i < sizeof(renamed) / sizeof(renamed[0]); i++) {
        const struct log_counter *c = find(renamed[i].table, renamed[i].key);
        if (c == NULL)
            fail_msg("no key %s", renamed[i].key);
        assert_int_equal(c->offset, renamed[i].offset);
    }
}

/* What the control API will do: render any module's counters, here as JSON
 * and as Prometheus text, knowing nothing of the struct but its table. */
static size_t
json(char *buf, size_t len, const struct log_counter *t, const void *stats)
{
    size_t off = (size_t)snprintf(buf, len, "{");
    for (const struct log_counter *c = t; c->key != NULL; c++)
        off += (size_t)snprintf(buf + off, len - off, "%s\"%s\":%llu", c == t ? "" : ",", c->key,
                                (unsigned long long)log_counter_value(c, stats));
    return off + (size_t)snprintf(buf + off, len - off, "}");
}

static size_t
prometheus(char *buf, size_t len, const char *module, const struct log_counter *t,
           const void *stats)
{
    size_t off = 0;
    for (const struct log_counter *c = t; c->key != NULL; c++) {
        off += (size_t)snprintf(buf + off, len - off, "chute_%s_%s %llu\n", module, c->key,
                                (unsigned long long)log_counter_value(c, stats));
        if (off >= len)
            fail_msg("%s: %zu bytes of counters, past the buffer's %zu", module, off, len);
    }
    return off;
}

static void
test_json_and_prometheus(void **state)
{
    struct outbound_set_stats os = {.checks = 12, .check_failures = 3, .switches = 1};
    char buf[2048];
    json(buf, sizeof(buf), outbound_set_counters, &os);
    assert_string_equal(buf, "{\"health_checks\":12,\"health_failures\":3,\"group_switches\":1,"
                             "\"proxy_silent\":0}");

    struct netstack_stats ns = {0};
    ns.conns_active = 5;
    ns.heap_max = 1u << 20;
    prometheus(buf, sizeof(buf), "netstack", netstack_counters, &ns);
    assert_non_null(strstr(buf, "chute_netstack_tcp_active 5\n"));
    assert_non_null(strstr(buf, "chute_netstack_heap_max 1048576\n"));
    assert_non_null(strstr(buf, "chute_netstack_rst_sent 0\n"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_table),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_module_tables),
        cmocka_unit_test(test_renamed_keys),
        cmocka_unit_test(test_json_and_prometheus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
