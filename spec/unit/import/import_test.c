/* core/import: the Lua it writes (quoting, nesting, both modes), where a
 * chunk puts each statement (on the config's own line), groups of groups
 * flattened and cycles cut, rules naming what was left out, AND/OR/NOT
 * payloads, Surge sections and notes, errors naming file:line. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "import/import.h"

static struct import_result r;
static char err[1024];

static int
conv(const char *text, enum import_kind kind, int chunk)
{
    struct import_opts o = {.kind = kind, .chunk = chunk, .base = ""};
    import_result_free(&r);
    return import_convert(text, strlen(text), kind == IMPORT_SURGE ? "p.conf" : "c.yaml", &o, &r,
                          err, sizeof(err));
}

static int
has_note(const char *s)
{
    for (size_t i = 0; i < r.nnotes; i++)
        if (strstr(r.notes[i], s) != NULL)
            return 1;
    return 0;
}

/* The 1-based line of |needle| in the Lua. */
static int
lua_line(const char *needle)
{
    const char *p = strstr(r.lua, needle);
    if (p == NULL)
        return -1;
    int line = 1;
    for (const char *q = r.lua; q < p; q++)
        line += *q == '\n';
    return line;
}

static void
test_quoting(void **st)
{
    (void)st;
    assert_int_equal(conv("proxies:\n  - {name: \"a\\\"b\\\\c\", type: socks5, server: 192.0.2.1,"
                          " port: 1, username: \"u\\n\", password: \"p\\u0001\"}\n"
                          "rules:\n  - MATCH,DIRECT\n", IMPORT_CLASH, 0), 0);
    assert_non_null(strstr(r.lua, "chute.proxy \"a\\\"b\\\\c\" { type = \"socks5\""));
    assert_non_null(strstr(r.lua, "username = \"u\\n\", password = \"p\\001\""));
}

static void
test_chunk_lines(void **st)
{
    (void)st;
    assert_int_equal(conv("socks-port: 1080\n\n\nproxies:\n  - name: a\n    type: socks5\n"
                          "    server: 192.0.2.1\n    port: 1\nrules:\n  - DOMAIN,x.example,a\n"
                          "\n  - MATCH,DIRECT\n", IMPORT_CLASH, 1), 0);
    assert_int_equal(lua_line("chute.proxy \"a\""), 5);
    assert_int_equal(lua_line("{ \"DOMAIN\", \"x.example\", \"a\" }"), 10);
    assert_int_equal(lua_line("{ \"FINAL\", \"DIRECT\" }"), 12);
    assert_non_null(strstr(r.lua, "local opts = ... or {}"));
    assert_non_null(strstr(r.lua, "if opts.route ~= false then chute.route = route end"));
}

/* A listen port out of int's range was cast to int (UB: fuzz/import). */
static void
test_listen_port_range(void **st)
{
    (void)st;
    assert_int_equal(conv("mixed-port: 7890\nsocks-port: 785555555555555555555555555555555555\n"
                          "port: 1.5\nrules:\n  - MATCH,DIRECT\n", IMPORT_CLASH, 0), 0);
    assert_non_null(strstr(r.lua, "127.0.0.1:7890"));
    assert_true(has_note("c.yaml:2: listen: socks-port 7.85556e+35 is not a port 1..65535: ignored"));
    assert_true(has_note("c.yaml:3: listen: port 1.5 is not a port 1..65535: ignored"));
}

static void
test_groups(void **st)
{
    (void)st;
    assert_int_equal(conv("proxies:\n  - {name: p, type: socks5, server: 192.0.2.1, port: 1}\n"
                          "  - {name: v, type: vmess, server: 192.0.2.1, port: 1}\n"
                          "proxy-groups:\n"
                          "  - {name: A, type: select, proxies: [B, p, DIRECT]}\n"
                          "  - {name: B, type: fallback, proxies: [p, v, A]}\n"
                          "  - {name: C, type: select, proxies: [v]}\n"
                          "rules:\n  - DOMAIN,c.example,C\n  - DOMAIN,v.example,v\n"
                          "  - MATCH,A\n", IMPORT_CLASH, 0), 0);
    assert_non_null(strstr(r.lua, "chute.group \"A\" { type = \"select\", proxies = { \"p\", "
                                  "\"DIRECT\" } }"));
    assert_true(has_note("c.yaml:5: group 'A': member 'B' is a group, and chute's groups hold "
                         "proxies only: its 1 member is listed in its place"));
    assert_true(has_note("group 'B': member 'A' leads back to this group: left out"));
    assert_true(has_note("c.yaml:7: group 'C' has no member chute can use"));
    assert_true(has_note("c.yaml:9: 1 rule names policy 'C'"));
    assert_true(has_note("c.yaml:10: 1 rule names policy 'v'"));
    assert_null(strstr(r.lua, "c.example"));
    assert_null(strstr(r.lua, "chute.group \"C\""));
}

static void
test_logic_rules(void **st)
{
    (void)st;
    assert_int_equal(conv("rules:\n  - AND,((DOMAIN,a.example),(NOT,((DST-PORT,80)))),REJECT\n"
                          "  - OR,((DOMAIN,b.example),(SRC-IP-CIDR,10.0.0.0/8)),DIRECT\n"
                          "  - AND,((DOMAIN,a.example),DIRECT\n"
                          "  - FOO,bar,DIRECT\n  - IP-SUFFIX,8.8.8.8/24,DIRECT\n"
                          "  - GEOSITE,cn,DIRECT\n  - MATCH,DIRECT\n", IMPORT_CLASH, 0), 0);
    assert_non_null(strstr(r.lua, "{ \"AND\", { { \"DOMAIN\", \"a.example\" }, { \"NOT\", { { "
                                  "\"DST-PORT\", \"80\" } } } }, \"REJECT\" }"));
    assert_non_null(strstr(r.lua, "{ \"OR\", { { \"DOMAIN\", \"b.example\" }, { \"SRC-IP-CIDR\","
                                  " \"10.0.0.0/8\" } }, \"DIRECT\" }"));
    assert_true(has_note("c.yaml:4: "));
    assert_true(has_note("c.yaml:5: rule FOO,bar: "));
    assert_true(has_note("c.yaml:6: chute cannot evaluate IP-SUFFIX rules"));
    assert_non_null(strstr(r.lua, "{ \"GEOSITE\", \"cn\", \"DIRECT\" }"));
}

static void
test_surge(void **st)
{
    (void)st;
    const char *p = "[General]\nsocks5-listen = 1080\n[Proxy]\nA = socks5, 192.0.2.1, 1080\n"
                    "[Rule]\nRULE-SET,https://x.example/l.list,A\nRULE-SET,LAN,DIRECT\n"
                    "FINAL,A\n[MITM]\nhostname = a.example\n[WireGuard x]\nk = v\n";
    assert_int_equal(conv(p, IMPORT_SURGE, 1), 0);
    assert_non_null(strstr(r.lua, "listen = { socks = \"127.0.0.1:1080\" }"));
    assert_non_null(strstr(r.lua, "rs[\"https://x.example/l.list\"] = chute.ruleset { url = "
                                  "\"https://x.example/l.list\", format = \"surge\" }"));
    assert_non_null(strstr(r.lua, "{ \"RULE-SET\", \"LAN\", \"DIRECT\" }"));
    /* the module keeps the profile's lines: 9 blank, then [MITM] */
    assert_non_null(strstr(r.lua, "text = \"\\n\\n\\n\\n\\n\\n\\n\\n[MITM]\\nhostname = "
                                  "a.example\\n\\n\\n\" }"));
    assert_true(has_note("p.conf:11: section [WireGuard x] is not supported by chute: 1 line"));
    assert_int_equal(conv(p, IMPORT_SURGE, 0), 0);
    assert_string_equal(r.module, "#!name=p.conf\n[MITM]\nhostname = a.example\n");
    assert_string_equal(r.module_name, "p.sgmodule");
}

static void
test_aliases(void **st)
{
    (void)st;
    assert_int_equal(conv("[Proxy]\nOn = direct\nNo = reject-tinygif\n[Proxy Group]\n"
                          "G = select, On, No\n[Rule]\nDOMAIN,a.example,No\nFINAL,On\n",
                          IMPORT_SURGE, 0), 0);
    assert_non_null(strstr(r.lua, "chute.group \"G\" { type = \"select\", proxies = { "
                                  "\"DIRECT\", \"REJECT\" } }"));
    assert_non_null(strstr(r.lua, "{ \"DOMAIN\", \"a.example\", \"REJECT\" },"));
    assert_non_null(strstr(r.lua, "{ \"FINAL\", \"DIRECT\" }"));
    assert_true(has_note("p.conf:2: proxy 'On' is DIRECT by another name"));
    assert_int_equal(conv("proxies:\n  - {name: d, type: direct}\nrules:\n  - MATCH,d\n",
                          IMPORT_CLASH, 0), 0);
    assert_non_null(strstr(r.lua, "{ \"FINAL\", \"DIRECT\" }"));
}

static void
test_errors(void **st)
{
    (void)st;
    assert_int_equal(conv("a: [1, 2\n", IMPORT_CLASH, 0), -1);
    assert_non_null(strstr(err, "c.yaml:2:1: "));
    assert_int_equal(conv("- a\n- b\n", IMPORT_CLASH, 0), -1);
    assert_string_equal(err, "c.yaml:1: not a config: expected a map of keys (proxies:, rules:, ...)");
    assert_int_equal(conv("rules: {a: 1}\n", IMPORT_CLASH, 0), -1);
    assert_string_equal(err, "c.yaml:1: rules: expected a list (- ...)");
    assert_int_equal(conv("[Rule\n", IMPORT_SURGE, 0), -1);
    assert_non_null(strstr(err, "p.conf:1: a section header ends with ']'"));
    assert_int_equal(import_detect("x.yml", "", 0), IMPORT_CLASH);
    assert_int_equal(import_detect("x", "# c\n[General]\n", 12), IMPORT_SURGE);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quoting),  cmocka_unit_test(test_chunk_lines),
        cmocka_unit_test(test_groups),   cmocka_unit_test(test_logic_rules),
        cmocka_unit_test(test_listen_port_range),
        cmocka_unit_test(test_surge),    cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    import_result_free(&r);
    return rc;
}
