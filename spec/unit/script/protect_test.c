/* core/script at its limits, called as the engine calls it: a state at its
 * memory cap fails the call, never aborts the process (protect.c); the
 * engine's entries leave the stack as they found it. Each test runs under
 * alarm() so a hang fails instead of stalling ctest. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "dns/dns.h"
#include "flow/flow.h"
#include "log/log.h"
#include "script/script.h"
#include "script/script_int.h"

static struct script *
load_ok(const char *src)
{
    char err[1024] = "";
    struct script *s = script_load(NULL, src, err, sizeof(err));
    if (s == NULL)
        print_error("script_load: %s\n", err);
    assert_non_null(s);
    return s;
}

static void
route(struct script *s, const char *host, struct flow *f)
{
    struct sockaddr_in *src = (struct sockaddr_in *)&f->src;
    memset(f, 0, sizeof(*f));
    f->id = 1;
    f->network = FLOW_TCP;
    f->inbound = FLOW_IN_SOCKS;
    assert_int_equal(flow_addr_from_host(&f->dst, host, strlen(host), 443), 0);
    src->sin_family = AF_INET;
    src->sin_addr.s_addr = htonl(0x7f000001);
    f->policy = -1;
    script_route(s, f);
    assert_int_equal(lua_gettop(s->L), 0);
    assert_int_equal(s->tripped, 0);
}

/* Leaves the state no room at all: every allocation from now on fails. */
static void
fill_to_cap(struct script *s)
{
    lua_gc(s->L, LUA_GCCOLLECT);
    s->mem_limit = s->mem_used;
}

static const char *const routes_reject =
    "local chute = require 'chute'\n"
    "function chute.route(flow) return flow.host == 'x.test' and 'REJECT' or 'DIRECT' end\n"
    "function chute.on_dns(q) return '192.0.2.1' end\n";

/* Pushing the flow userdata is the first allocation of a route() call: at
 * the cap it fails, and the flow gets the fallback. */
static void
test_route_at_cap_falls_back(void **state)
{
    struct script *s = load_ok(routes_reject);
    struct flow f;
    fill_to_cap(s);
    route(s, "x.test", &f);
    assert_int_equal(f.policy, FLOW_POLICY_DIRECT);
    assert_string_equal(f.rule, "fallback: error");
    /* Room again: the next flow is routed as usual. */
    s->mem_limit = s->cfg.lua_memory;
    route(s, "x.test", &f);
    assert_int_equal(f.policy, FLOW_POLICY_REJECT);
    assert_string_equal(f.rule, "route");
    script_free(s);
}

static void
test_on_dns_at_cap_answers_as_usual(void **state)
{
    struct script *s = load_ok(routes_reject);
    struct dns_hook_result r;
    script_on_dns(s, "a.test", 1, &r);
    assert_int_equal(r.action, DNS_HOOK_ADDRS);
    fill_to_cap(s);
    script_on_dns(s, "a.test", 1, &r);
    assert_int_equal(r.action, DNS_HOOK_NONE);
    assert_int_equal(lua_gettop(s->L), 0);
    script_free(s);
}

/* An on_dns that records every name runs into a 4 MiB cap after some ten
 * thousand names; each call past it fails alone and the state goes on. */
static void
test_on_dns_recording_names_hits_cap(void **state)
{
    struct script *s = load_ok("local chute = require 'chute'\n"
                               "chute.config { lua_memory_mb = 4 }\n"
                               "local seen = {}\n"
                               "function chute.on_dns(q) seen[q.name] = true; return '192.0.2.1' end\n");
    char name[64];
    int past = 0;
    for (int i = 0; i < 200000 && past < 200; i++) {
        struct dns_hook_result r;
        snprintf(name, sizeof(name), "name-%08d.example.com", i);
        script_on_dns(s, name, 1, &r);
        assert_int_equal(lua_gettop(s->L), 0);
        if (r.action == DNS_HOOK_NONE)
            past++;
    }
    assert_int_equal(past, 200); /* it did reach the cap */
    assert_true(s->mem_used <= s->mem_limit);
    script_free(s);
}

/* A bundle that already holds more than its cap once main.lua ran is
 * refused with its size, instead of aborting in the next push. */
static void
test_over_cap_bundle_refused(void **state)
{
    char err[1024] = "";
    struct script *s = script_load(NULL,
                                   "local chute = require 'chute'\n"
                                   "chute.config { lua_memory_mb = 4 }\n"
                                   "local hold = {}\n"
                                   "for i = 1, 300000 do hold[i] = {} end\n"
                                   "function chute.route() return hold and 'DIRECT' end\n",
                                   err, sizeof(err));
    assert_null(s);
    assert_non_null(strstr(err, "main.lua: the bundle holds "));
    assert_non_null(strstr(err, " MiB after loading, over lua_memory_mb = 4 (raise it"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_at_cap_falls_back),
        cmocka_unit_test(test_on_dns_at_cap_answers_as_usual),
        cmocka_unit_test(test_on_dns_recording_names_hits_cap),
        cmocka_unit_test(test_over_cap_bundle_refused),
    };
    log_threshold = LOG_LEVEL_ERROR;
    alarm(120);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
