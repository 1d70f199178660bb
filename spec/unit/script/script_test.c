/* core/script through its door: script_load on inline sources, the config
 * read back, script_check_address, script_policy_lookup, and script_route
 * with its stats. script_int.h gives the state, to check that every call
 * leaves the Lua stack and the budget as it found them. */
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
#include <netinet/in.h>

#include "log/log.h"
#include "flow/flow.h"
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
load_fails(const char *src, const char *want)
{
    char err[1024] = "";
    struct script *s = script_load(NULL, src, err, sizeof(err));

    assert_null(s);
    assert_string_equal(err, want);
}

/* Routes a TCP flow from [::1]:5555 over SOCKS to |host| (a name or an IP
 * literal), port 443, and checks that the call left the state clean. */
static void
route(struct script *s, const char *host, struct flow *f)
{
    struct sockaddr_in6 *src = (struct sockaddr_in6 *)&f->src;

    memset(f, 0, sizeof(*f));
    f->id = 7;
    f->network = FLOW_TCP;
    f->inbound = FLOW_IN_SOCKS;
    assert_int_equal(flow_addr_from_host(&f->dst, host, strlen(host), 443), 0);
    src->sin6_family = AF_INET6;
    src->sin6_addr = in6addr_loopback;
    src->sin6_port = htons(5555);
    f->policy = -1;
    script_route(s, f);
    assert_int_equal(lua_gettop(s->L), 0);
    assert_int_equal(s->tripped, 0);
    assert_non_null(f->rule);
}

static void
expect_route(struct script *s, const char *host, int policy, const char *rule)
{
    struct flow f;

    route(s, host, &f);
    assert_string_equal(f.rule, rule);
    assert_int_equal(f.policy, policy);
}

static void
expect_stats(struct script *s, uint64_t calls, uint64_t errors)
{
    struct script_stats st;

    script_stats(s, &st);
    assert_int_equal(st.route_calls, calls);
    assert_int_equal(st.route_errors, errors);
}

/* Runs script_route with stderr going to a file and returns the first log
 * line without its timestamp ("2024-01-02 03:04:05.678 "). */
static void
route_logged(struct script *s, const char *host, char *line, size_t len)
{
    struct flow f;
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);

    assert_non_null(tmp);
    assert_true(saved >= 0);
    fflush(stderr);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    route(s, host, &f);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(tmp);
    line[0] = '\0';
    if (fgets(line, (int)len, tmp) != NULL && strlen(line) > 24)
        memmove(line, line + 24, strlen(line + 24) + 1);
    line[strcspn(line, "\n")] = '\0';
    fclose(tmp);
}

static void
test_config_defaults(void **state)
{
    static const char *const srcs[] = {
        "local chute = require 'chute'\n",
        "local chute = require 'chute'\nchute.config {}\n",
    };

    for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]); i++) {
        struct script *s = load_ok(srcs[i]);
        const struct script_config *c = script_config(s);

        assert_int_equal(c->log_level, -1);
        assert_int_equal(c->fallback, FLOW_POLICY_DIRECT);
        assert_true(c->connect_timeout == 10.0);
        assert_true(c->idle_timeout == 300.0);
        assert_int_equal(c->budget, 100000);
        assert_int_equal(c->lua_memory, (size_t)64 << 20);
        assert_int_equal(c->socks.enabled, 0);
        assert_int_equal(c->http.enabled, 0);
        assert_int_equal(c->socks.num_users, 0);
        expect_route(s, "example.com", FLOW_POLICY_DIRECT, "fallback: no route()");
        expect_stats(s, 1, 0);
        script_free(s);
    }
}

static void
test_config_values(void **state)
{
    struct script *s = load_ok("local chute = require 'chute'\n"
                               "chute.config {\n"
                               "  log_level = 'debug',\n"
                               "  fallback = 'REJECT',\n"
                               "  listen = {\n"
                               "    socks = { address = '127.0.0.1:1080',\n"
                               "              users = { alice = 'secret', bob = 'hunter2' } },\n"
                               "    http = '[::1]:8080',\n"
                               "  },\n"
                               "  timeouts = { connect = 2.5, idle = 60 },\n"
                               "  budget = 5000,\n"
                               "  lua_memory_mb = 16,\n"
                               "}\n");
    const struct script_config *c = script_config(s);
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&c->socks.addr;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&c->http.addr;
    int alice = -1;

    assert_int_equal(c->log_level, LOG_LEVEL_DEBUG);
    assert_int_equal(c->fallback, FLOW_POLICY_REJECT);
    assert_true(c->connect_timeout == 2.5);
    assert_true(c->idle_timeout == 60.0);
    assert_int_equal(c->budget, 5000);
    assert_int_equal(c->lua_memory, (size_t)16 << 20);

    assert_int_equal(c->socks.enabled, 1);
    assert_string_equal(c->socks.text, "127.0.0.1:1080");
    assert_int_equal(c->socks.addrlen, sizeof(struct sockaddr_in));
    assert_int_equal(v4->sin_family, AF_INET);
    assert_int_equal(ntohs(v4->sin_port), 1080);
    assert_int_equal(ntohl(v4->sin_addr.s_addr), 0x7f000001);
    /* Users come out of a Lua table: any order, each name with its password. */
    assert_int_equal(c->socks.num_users, 2);
    for (int i = 0; i < 2; i++) {
        if (strcmp(c->socks.users[2 * i], "alice") == 0)
            alice = i;
    }
    assert_true(alice >= 0);
    assert_string_equal(c->socks.users[2 * alice + 1], "secret");
    assert_string_equal(c->socks.users[2 * (1 - alice)], "bob");
    assert_string_equal(c->socks.users[2 * (1 - alice) + 1], "hunter2");

    assert_int_equal(c->http.enabled, 1);
    assert_string_equal(c->http.text, "[::1]:8080");
    assert_int_equal(c->http.addrlen, sizeof(struct sockaddr_in6));
    assert_int_equal(v6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(v6->sin6_port), 8080);
    assert_memory_equal(&v6->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback));
    assert_int_equal(c->http.num_users, 0);

    /* With no route() the bundle's fallback decides. */
    expect_route(s, "example.com", FLOW_POLICY_REJECT, "fallback: no route()");
    script_free(s);
}

/* Sources given to script_load are named "main.lua" in messages. */
static void
test_config_errors(void **state)
{
    char err[1024] = "";
    static const char unknown[] =
        "main.lua:2: chute.config: unknown key 'lsten': did you mean 'listen'? (known: ";

    assert_null(script_load(NULL, "local chute = require 'chute'\nchute.config { lsten = {} }\n",
                            err, sizeof(err)));
    assert_int_equal(strncmp(err, unknown, strlen(unknown)), 0);

    load_fails("local chute = require 'chute'\nchute.config { budget = 'x' }\n",
               "main.lua:2: chute.config: budget: expected integer, got string \"x\"");
    load_fails("local chute = require 'chute'\nchute.config { budget = 999 }\n",
               "main.lua:2: chute.config: budget: must be 1000..1000000000 instructions");
    load_fails("local chute = require 'chute'\nchute.config { budget = 1500.5 }\n",
               "main.lua:2: chute.config: budget: expected integer, got float 1500.5");
    load_fails("local chute = require 'chute'\nchute.config { lua_memory_mb = 0 }\n",
               "main.lua:2: chute.config: lua_memory_mb: must be 1..65536");
    load_fails("local chute = require 'chute'\nchute.config { timeouts = { connect = 0 } }\n",
               "main.lua:2: chute.config: timeouts.connect: must be > 0");
    load_fails("local chute = require 'chute'\nchute.config { listen = { socks = '::1:80' } }\n",
               "main.lua:2: chute.config: listen.socks.address: '::1:80' is not IP:PORT "
               "(\"127.0.0.1:1080\", \"[::1]:1080\")");
    load_fails("local chute = require 'chute'\n"
               "chute.config { listen = { socks = {\n"
               "  address = '127.0.0.1:1', users = { 'x' } } } }\n",
               "main.lua:3: chute.config: listen.socks.users: " /* the key's line */
               "expected { name = \"password\" } strings");
    load_fails("local chute = require 'chute'\nchute.config { fallback = 'NOPE' }\n",
               "main.lua:2: chute.config: fallback: unknown policy \"NOPE\"");
    load_fails("local chute = require 'chute'\nchute.config 'x'\n",
               "main.lua:2: chute.config: expected a table");
    load_fails("local chute = require 'chute'\nchute.config {}\nchute.config {}\n",
               "main.lua:3: chute.config: called twice");
    load_fails("local chute = require 'chute'\nfunction chute.rout() end\n",
               "main.lua:2: chute.rout: unknown hook: did you mean chute.route? (hooks: on_dns, route)");
    load_fails("local chute = require 'chute'\nchute.route = 1\n",
               "main.lua:2: chute.route: expected a function, got number");
    load_fails("local chute = require 'chute'\n\nlocal x = = 1\n",
               "main.lua:3: unexpected symbol near '='");
    load_fails("local chute = require 'chute'\nlocal t = nil\nt.x = 1\n",
               "main.lua:3: attempt to index a nil value (local 't')");
    /* Without a bundle folder there is nothing to require or open. */
    load_fails("local util = require 'lib.util'\n",
               "main.lua:1: module 'lib.util' not found: no file 'lib/util.lua' in the bundle and "
               "no library module 'lib.util'");
    load_fails("io.open('data.txt')\n", "main.lua:1: io.open: 'data.txt' is outside the bundle");
}

/* With a folder, a source given inline still requires from that folder. */
static void
test_inline_main_requires_from_dir(void **state)
{
    char dir[4096], err[1024] = "";
    const char *spec = strstr(__FILE__, "/unit/script/script_test.c");
    struct script *s;

    assert_non_null(spec);
    snprintf(dir, sizeof(dir), "%.*s/lua/bundles/require-ok", (int)(spec - __FILE__), __FILE__);
    s = script_load(dir,
                    "local chute = require 'chute'\n"
                    "local util = require 'lib.util'\n"
                    "chute.route = function(flow) return util.policy_for(flow.host) end\n",
                    err, sizeof(err));
    if (s == NULL)
        print_error("script_load(%s): %s\n", dir, err);
    assert_non_null(s);
    expect_route(s, "blocked.test", FLOW_POLICY_REJECT, "route");
    expect_route(s, "example.com", FLOW_POLICY_DIRECT, "route");
    script_free(s);
}

static void
test_check_address(void **state)
{
    static const char *const bad[] = {
        "::1:80",        "127.0.0.1",    "x:1",          "1.2.3.4:65536",
        "",              ":80",          "[::1]",        "[::1]:",
        "127.0.0.1:",    "127.0.0.1: 80", "127.0.0.1:+80", "1.2.3.4:-1",
        "[127.0.0.1]:80", "localhost:80", "[::1]:80x",    "1.2.3:80",
        "[::1:80",       "::1]:80",
    };
    struct sockaddr_storage ss;
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&ss;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&ss;
    struct in6_addr want6;
    socklen_t len;

    assert_int_equal(script_check_address("127.0.0.1:1080", &ss, &len), 0);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(v4->sin_family, AF_INET);
    assert_int_equal(ntohs(v4->sin_port), 1080);
    assert_int_equal(ntohl(v4->sin_addr.s_addr), 0x7f000001);

    assert_int_equal(script_check_address("[::1]:0", &ss, &len), 0);
    assert_int_equal(len, sizeof(struct sockaddr_in6));
    assert_int_equal(v6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(v6->sin6_port), 0);
    assert_memory_equal(&v6->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback));

    assert_int_equal(script_check_address("[2001:db8::7]:65535", &ss, &len), 0);
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::7", &want6), 1);
    assert_memory_equal(&v6->sin6_addr, &want6, sizeof(want6));
    assert_int_equal(ntohs(v6->sin6_port), 65535);

    assert_int_equal(script_check_address("0.0.0.0:1", &ss, &len), 0);
    assert_int_equal(v4->sin_addr.s_addr, 0);
    assert_int_equal(ntohs(v4->sin_port), 1);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (script_check_address(bad[i], &ss, &len) != -1)
            fail_msg("script_check_address accepted \"%s\"", bad[i]);
    }
}

static void
test_policy_lookup(void **state)
{
    assert_int_equal(script_policy_lookup(NULL, "DIRECT"), FLOW_POLICY_DIRECT);
    assert_int_equal(script_policy_lookup(NULL, "REJECT"), FLOW_POLICY_REJECT);
    assert_int_equal(script_policy_lookup(NULL, "direct"), -1);
    assert_int_equal(script_policy_lookup(NULL, "NOPE"), -1);
    assert_int_equal(script_policy_lookup(NULL, ""), -1);
    assert_int_equal(script_policy_lookup(NULL, "DIRECT "), -1);
}

static const char returns_src[] =
    "local chute = require 'chute'\n"
    "local answers = { ['direct.test'] = 'DIRECT', ['reject.test'] = 'REJECT',\n"
    "                  ['nope.test'] = 'NOPE' }\n"
    "function chute.route(flow)\n"                                   /* line 4 */
    "  if flow.host == 'error.test' then error('boom') end\n"        /* line 5 */
    "  if flow.host == 'loop.test' then while true do end end\n"     /* line 6 */
    "  return answers[flow.host]\n"
    "end\n";

/* route_calls counts every call; route_errors errors, overruns and unknown
 * names, not nil (a script may mean "use the fallback"). */
static void
test_route_decisions_and_stats(void **state)
{
    struct script *s = load_ok(returns_src);
    struct script_stats st;

    expect_stats(s, 0, 0);
    expect_route(s, "direct.test", FLOW_POLICY_DIRECT, "route");
    expect_stats(s, 1, 0);
    expect_route(s, "reject.test", FLOW_POLICY_REJECT, "route");
    expect_stats(s, 2, 0);
    expect_route(s, "nil.test", FLOW_POLICY_DIRECT, "fallback: route() returned nil");
    expect_stats(s, 3, 0);
    expect_route(s, "nope.test", FLOW_POLICY_DIRECT, "fallback: unknown policy");
    expect_stats(s, 4, 1);
    expect_route(s, "error.test", FLOW_POLICY_DIRECT, "fallback: error");
    expect_stats(s, 5, 2);
    expect_route(s, "loop.test", FLOW_POLICY_DIRECT, "fallback: budget");
    expect_stats(s, 6, 3);
    expect_route(s, "192.0.2.1", FLOW_POLICY_DIRECT, "fallback: route() returned nil");
    expect_route(s, "reject.test", FLOW_POLICY_REJECT, "route");
    expect_stats(s, 8, 3);
    script_stats(s, &st);
    assert_true(st.lua_bytes > 0);
    script_free(s);
}

static void
test_route_warnings(void **state)
{
    struct script *s = load_ok(returns_src);
    char line[2048];

    route_logged(s, "nope.test", line, sizeof(line));
    assert_string_equal(line, "warn  flow 7: main.lua:4: route() returned unknown policy 'NOPE'; "
                              "using DIRECT");
    route_logged(s, "error.test", line, sizeof(line));
    assert_string_equal(line, "warn  flow 7: route() failed: main.lua:5: boom; using DIRECT");
    route_logged(s, "loop.test", line, sizeof(line));
    assert_string_equal(line, "warn  flow 7: route() failed: main.lua:6: instruction budget "
                              "exceeded (100000 instructions); using DIRECT");
    route_logged(s, "reject.test", line, sizeof(line));
    assert_string_equal(line, "");
    script_free(s);
}

/* route() checks every field itself and names the first that differs. */
static void
test_route_fields(void **state)
{
    struct script *s = load_ok(
        "local chute = require 'chute'\n"
        "local want\n"
        "function chute.route(flow)\n"
        "  want = flow.host and\n"
        "    { network = 'tcp', src_ip = '::1', src_port = 5555, dst_ip = nil, dst_port = 443,\n"
        "      host = 'example.com', inbound = 'socks', id = 7 } or\n"
        "    { network = 'udp', src_ip = '10.1.2.3', src_port = 40000, dst_ip = '2001:db8::1',\n"
        "      dst_port = 53, host = nil, inbound = 'tun', id = 8 }\n"
        "  for _, k in ipairs { 'network', 'src_ip', 'src_port', 'dst_ip', 'dst_port', 'host',\n"
        "                       'inbound', 'id' } do\n"
        "    if flow[k] ~= want[k] or math.type(flow[k]) ~= math.type(want[k]) then\n"
        "      error(k .. ' is ' .. tostring(flow[k]))\n"
        "    end\n"
        "  end\n"
        "  return 'REJECT'\n"
        "end\n");
    struct flow f;
    struct sockaddr_in *src = (struct sockaddr_in *)&f.src;

    expect_route(s, "example.com", FLOW_POLICY_REJECT, "route");

    memset(&f, 0, sizeof(f));
    f.id = 8;
    f.network = FLOW_UDP;
    f.inbound = FLOW_IN_TUN;
    assert_int_equal(flow_addr_from_host(&f.dst, "2001:db8::1", 11, 53), 0);
    src->sin_family = AF_INET;
    src->sin_addr.s_addr = htonl(0x0a010203);
    src->sin_port = htons(40000);
    script_route(s, &f);
    assert_string_equal(f.rule, "route");
    assert_int_equal(f.policy, FLOW_POLICY_REJECT);
    expect_stats(s, 2, 0);
    script_free(s);
}

/* After an overrun (however the script wraps its loop) the budget is whole
 * again for the next call: a call using most of it completes. */
static void
test_budget_overrun_leaves_state_usable(void **state)
{
    static const char *const runaways[] = {"loop.test", "pcall.test", "coroutine.test",
                                           "loop.test"};
    struct script *s = load_ok(
        "local chute = require 'chute'\n"
        "chute.config { budget = 20000 }\n"
        "function chute.route(flow)\n"
        "  local h = flow.host\n"
        "  if h == 'loop.test' then while true do end end\n"
        "  if h == 'pcall.test' then pcall(function() while true do end end) end\n"
        "  if h == 'coroutine.test' then\n"
        "    coroutine.resume(coroutine.create(function() while true do end end))\n"
        "  end\n"
        "  local x = 0\n"
        "  for i = 1, 4000 do x = x + i end\n" /* about 12000 instructions */
        "  return 'REJECT'\n"
        "end\n");
    uint64_t calls = 0, errors = 0;

    for (size_t i = 0; i < sizeof(runaways) / sizeof(runaways[0]); i++) {
        expect_route(s, runaways[i], FLOW_POLICY_DIRECT, "fallback: budget");
        expect_stats(s, ++calls, ++errors);
        expect_route(s, "work.test", FLOW_POLICY_REJECT, "route");
        expect_route(s, "work.test", FLOW_POLICY_REJECT, "route");
        calls += 2;
        expect_stats(s, calls, errors);
    }
    script_free(s);
}

static void
test_memory_cap_then_usable(void **state)
{
    struct script *s = load_ok("local chute = require 'chute'\n"
                               "chute.config { lua_memory_mb = 8, budget = 100000000 }\n"
                               "function chute.route(flow)\n"
                               "  if flow.host == 'hog.test' then\n"
                               "    local t = {}\n"
                               "    for i = 1, 1e8 do t[i] = i end\n"
                               "  end\n"
                               "  local small = {}\n"
                               "  for i = 1, 1000 do small[i] = i end\n"
                               "  return 'REJECT'\n"
                               "end\n");
    struct script_stats st;
    char line[2048];

    route_logged(s, "hog.test", line, sizeof(line));
    assert_string_equal(line, "warn  flow 7: route() failed: main.lua:3: not enough memory; using DIRECT");
    expect_stats(s, 1, 1);
    script_stats(s, &st);
    assert_true(st.lua_bytes <= (size_t)8 << 20);
    expect_route(s, "hog.test", FLOW_POLICY_DIRECT, "fallback: error");
    expect_route(s, "small.test", FLOW_POLICY_REJECT, "route");
    expect_stats(s, 3, 2);
    script_free(s);
}

static void
test_globals_locked_after_load(void **state)
{
    struct script *s = load_ok("local chute = require 'chute'\n"
                               "answer = 'REJECT'\n"
                               "function chute.route(flow)\n"
                               "  if flow.host == 'write.test' then seen = flow.host end\n"
                               "  return answer\n"
                               "end\n");
    char line[2048];

    expect_route(s, "read.test", FLOW_POLICY_REJECT, "route");
    route_logged(s, "write.test", line, sizeof(line));
    assert_string_equal(line, "warn  flow 7: route() failed: main.lua:4: assignment to global "
                              "'seen' after the bundle loaded (use a local); using DIRECT");
    expect_route(s, "read.test", FLOW_POLICY_REJECT, "route");
    script_free(s);
}

/* A flow kept from one route() call and read in the next is an error ("flow
 * used outside route()"), never the next flow's fields. */
static void
test_flow_kept_across_calls(void **state)
{
    struct script *s = load_ok(
        "local chute = require 'chute'\n"
        "local kept\n"
        "function chute.route(flow)\n"
        "  if not kept then kept = flow; return 'DIRECT' end\n"
        "  local ok, v = pcall(function() return kept.host end)\n"
        "  if ok then return v == 'second.test' and 'REJECT' or 'NOPE' end\n"
        "  if v:find('flow used outside route()', 1, true) then return 'DIRECT' end\n"
        "  error(v)\n"
        "end\n");
    struct flow f;

    expect_route(s, "first.test", FLOW_POLICY_DIRECT, "route");
    route(s, "second.test", &f);
    script_free(s);
    assert_string_equal(f.rule, "route");
    assert_int_equal(f.policy, FLOW_POLICY_DIRECT);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_values),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_inline_main_requires_from_dir),
        cmocka_unit_test(test_check_address),
        cmocka_unit_test(test_policy_lookup),
        cmocka_unit_test(test_route_decisions_and_stats),
        cmocka_unit_test(test_route_warnings),
        cmocka_unit_test(test_route_fields),
        cmocka_unit_test(test_budget_overrun_leaves_state_usable),
        cmocka_unit_test(test_memory_cap_then_usable),
        cmocka_unit_test(test_globals_locked_after_load),
        cmocka_unit_test(test_flow_kept_across_calls),
    };

    log_threshold = LOG_LEVEL_WARN;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
