#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "chute/chute.h"
#include "engine/engine.h"
#include "flow/flow.h"
#include "flow/udp.h"
#include "tun/tun.h"

/* An engine with no bundle, no DNS server, no groups: only what the stats
 * read. */
static struct engine *
bare_engine(void)
{
    struct engine *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    e->flows = flow_table_new();
    assert_non_null(e->flows);
    return e;
}

static void
free_engine(struct engine *e)
{
    flow_table_free(e->flows);
    free(e);
}

static void
test_publish_and_read(void **state)
{
    struct engine *e = bare_engine();
    e->rule_version = 3;
    e->reloads = 2;
    e->route_calls_before = 5;
    e->route_errors_before = 1;
    e->dcache_hits_before = 4;
    struct chute_stats out;
    memset(&out, 0xff, sizeof(out));
    engine_stats_read(e, &out); /* nothing published yet */
    assert_int_equal(out.flows_total, 0);
    assert_int_equal(out.rule_version, 0);
    engine_stats_publish(e);
    engine_stats_read(e, &out);
    assert_int_equal(out.flows_active, 0);
    assert_int_equal(out.route_calls, 5); /* carried over from replaced scripts */
    assert_int_equal(out.route_errors, 1);
    assert_int_equal(out.dcache_hits, 4);
    assert_int_equal(out.reloads, 2);
    assert_int_equal(out.lua_bytes, 0);
    assert_int_equal(out.rule_version, 3);
    free_engine(e);
}

/* The lines engine_stats_log() writes to stderr. */
static char *
log_lines(struct engine *e)
{
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    engine_stats_log(e);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    static char buf[8192];
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof(buf) - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    return buf;
}

/* |key|=|value| is a whole word of |line|. */
static int
has(const char *line, const char *key, const char *value)
{
    char want[128];
    snprintf(want, sizeof(want), " %s=%s", key, value ? value : "");
    const char *p = strstr(line, want);
    return p != NULL && (value == NULL || p[strlen(want)] == ' ' || p[strlen(want)] == '\n');
}

/* Every key the two lines had when they were written by hand; spec/e2e and
 * scripts/bench read them by name. */
static const char *const line1_keys[] = {
    "flows_active", "flows_total", "bytes_up", "bytes_down", "route_calls", "route_errors",
    "dcache_hits", "dcache_misses", "dcache_size", "rule_version", "lua_bytes", "dns_queries",
    "dns_fake", "dns_forwarded", "dns_hook", "dns_blocked", "dns_formerr", "dns_servfail",
    "dns_fake_misses", "dns_fake_entries", "dns_fake_bytes", "resolver_queries", "resolver_sent",
    "resolver_cache_hits", "resolver_cache_misses", "resolver_timeouts", "resolver_tcp",
    "proxy_auth_failures", "health_checks", "health_failures", "group_switches",
};
static const char *const line2_keys[] = {
    "pkts_in", "pkts_out", "bytes_in", "bytes_out", "gso_in", "gso_out", "batches",
    "batch_mean", "wq_drops", "drops", "bad_dst", "icmp_echo", "fast_path", "tcp_active",
    "tcp_total", "syn_dups", "syn_dropped", "tw_reused", "sniffed", "rst_sent", "heap_used",
    "heap_max", "heap_errors", "rx_drops", "mem_pauses", "listeners", "udp_active", "udp_total",
    "udp_dropped",
};

static void
test_log_lines(void **state)
{
    struct engine *e = bare_engine();
    e->rule_version = 7;
    e->route_calls_before = 12;
    char *out = log_lines(e);
    char *line1 = strstr(out, " stats flows_active=0 flows_total=0 ");
    assert_non_null(line1);
    assert_null(strstr(out, " stats tun ")); /* no TUN, no second line */
    for (size_t i = 0; i < sizeof(line1_keys) / sizeof(line1_keys[0]); i++)
        if (!has(line1, line1_keys[i], NULL))
            fail_msg("no %s= in: %s", line1_keys[i], line1);
    assert_true(has(line1, "route_calls", "12"));
    assert_true(has(line1, "rule_version", "7"));

    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    e->tun = tun_attach_fd(sv[0], 1500, 8);
    e->udp = flow_udp_new(&e->fenv, e->tun);
    assert_non_null(e->tun);
    assert_non_null(e->udp);
    e->dp.drops[1] = 3;
    e->dp.drops[6] = 9;
    e->dp.bad_dst = 2;
    out = log_lines(e);
    char *line2 = strstr(out, " stats tun pkts_in=0 ");
    assert_non_null(line2);
    for (size_t i = 0; i < sizeof(line2_keys) / sizeof(line2_keys[0]); i++)
        if (!has(line2, line2_keys[i], NULL))
            fail_msg("no %s= in: %s", line2_keys[i], line2);
    assert_true(has(line2, "drops", "3/0/0/0/0/9"));
    assert_true(has(line2, "batch_mean", "0.0"));
    assert_true(has(line2, "bad_dst", "2"));
    flow_udp_free(e->udp);
    tun_close(e->tun);
    close(sv[0]);
    close(sv[1]);
    free_engine(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publish_and_read),
        cmocka_unit_test(test_log_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
