/* core/script/pattern.c against Lua's own matcher: the same find, match,
 * gmatch and gsub calls in a stock state and in a script state (whose
 * string library carries the charged matcher) must give the same results
 * and the same errors, for hand-picked cases and 20,000 random patterns. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lualib.h>

#include "log/log.h"
#include "script/script.h"
#include "script/script_int.h"

static const char probe[] =
    "local function ser(...)\n"
    "  local t = table.pack(...)\n"
    "  for i = 1, t.n do t[i] = string.format('%q', tostring(t[i])) end\n"
    "  return table.concat(t, ',')\n"
    "end\n"
    "local repls = { '<%0>', '%1-%2', '%%', 'x%', 'y%9', { a = 'A', ['('] = 1 },\n"
    "  function(a, b) if a == 'b' then return false end return a and a:upper() end, 7 }\n"
    "return function(s, p, init, r)\n"
    "  local out = {}\n"
    "  out[#out + 1] = ser(pcall(string.find, s, p, init))\n"
    "  out[#out + 1] = ser(pcall(string.match, s, p, init))\n"
    "  out[#out + 1] = ser(pcall(string.gsub, s, p, repls[r]))\n"
    "  out[#out + 1] = ser(pcall(string.gsub, s, p, repls[r], 2))\n"
    "  local g, ok, it = {}, pcall(string.gmatch, s, p, init)\n"
    "  if ok then\n"
    "    local ok2, e = pcall(function()\n"
    "      for a, b in it do g[#g + 1] = ser(a, b); if #g > 40 then break end end\n"
    "    end)\n"
    "    if not ok2 then g[#g + 1] = e end\n"
    "  else g[1] = it end\n"
    "  out[#out + 1] = table.concat(g, ';')\n"
    "  return table.concat(out, ' | ')\n"
    "end\n";

static void
push_probe(lua_State *L)
{
    assert_int_equal(luaL_loadstring(L, probe), LUA_OK);
    assert_int_equal(lua_pcall(L, 0, 1, 0), LUA_OK);
}

static void
run(lua_State *L, const char *s, size_t ls, const char *p, size_t lp, int init, int r, char *out,
    size_t len)
{
    lua_pushvalue(L, 1);
    lua_pushlstring(L, s, ls);
    lua_pushlstring(L, p, lp);
    lua_pushinteger(L, init);
    lua_pushinteger(L, r);
    if (lua_pcall(L, 4, 1, 0) != LUA_OK)
        snprintf(out, len, "probe failed: %s", lua_tostring(L, -1));
    else
        snprintf(out, len, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
}

struct pair {
    lua_State *stock;
    struct script *s;
};

static void
same(struct pair *pr, const char *s, size_t ls, const char *p, size_t lp, int init, int r)
{
    char want[8192], got[8192];
    run(pr->stock, s, ls, p, lp, init, r, want, sizeof(want));
    run(pr->s->L, s, ls, p, lp, init, r, got, sizeof(got));
    if (strcmp(want, got) != 0) {
        print_error("subject '%.*s' pattern '%.*s' init %d repl %d\n stock: %s\n chute: %s\n",
                    (int)ls, s, (int)lp, p, init, r, want, got);
        fail();
    }
}

static struct pair
pair_new(void)
{
    char err[512];
    struct pair pr = {luaL_newstate(), script_load(NULL, "local chute = require 'chute'\n", err,
                                                   sizeof(err))};
    assert_non_null(pr.stock);
    assert_non_null(pr.s);
    luaL_openlibs(pr.stock);
    push_probe(pr.stock);
    push_probe(pr.s->L);
    return pr;
}

static void
pair_free(struct pair *pr)
{
    lua_close(pr->stock);
    lua_settop(pr->s->L, 0);
    script_free(pr->s);
}

static void
test_cases(void **state)
{
    static const char *const cases[][2] = {
        {"hello world", "o"},          {"hello world", "l+"},
        {"hello world", "(h)(e)"},     {"hello world", "()ll()"},
        {"key = value", "(%w+)%s*=%s*(%w+)"},
        {"THE (quick) fox", "%((%a+)%)"}, {"THE (quick) fox", "%b()"},
        {"f(a(b)c)d", "%b()"},         {"THE (quick) fox", "%f[%a]%a+"},
        {"abc", "^b"},                 {"abc", "c$"},
        {"a$b", "$b"},                 {"aaa", "a-b"},
        {"aaab", "a-b"},               {"abab", "(ab)%1"},
        {"a.b.c", "%."},               {"a.b.c", "[.]"},
        {"x]y", "[]]"},                {"x]y", "[^]]+"},
        {"a-b", "[a%-]+"},             {"a-z", "[a-]+"},
        {"abc", "[%a-z]"},             {"abc", "%"},
        {"abc", "[a"},                 {"abc", "[a%"},
        {"abc", "(a"},                 {"abc", "a)"},
        {"abc", "%1"},                 {"abc", "(a)%2"},
        {"abc", "%b"},                 {"abc", "%bx"},
        {"abc", "%f"},                 {"abc", "%fa"},
        {"", ""},                      {"abc", ""},
        {"abc", ".-"},                 {"abc", "a?b?c?d?"},
        {"aaa", "^a*$"},               {"192.168.1.10", "^(%d+)%.(%d+)%.(%d+)%.(%d+)$"},
        {"www.example.co.uk", "([^.]+)%.([^.]+)$"},
        {"x", "()"},                   {"abc", "(()a)"},
        {"\xff\x80z", "[\x80-\xff]+"}, {"a\0b", "%z"},
        {"ABC abc", "%u+"},            {"ABC abc", "%L+"},
    };
    struct pair pr = pair_new();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int init = -3; init <= 4; init++)
            for (int r = 1; r <= 9; r++)
                same(&pr, cases[i][0], strlen(cases[i][0]), cases[i][1], strlen(cases[i][1]),
                     init, r);
    same(&pr, "a\0b\0c", 5, "%z", 2, 1, 1);
    same(&pr, "a\0b\0c", 5, "\0", 1, 1, 1);
    same(&pr, "a\0b\0c", 5, "[\0]", 3, 1, 1);
    pair_free(&pr);
}

static void
test_random_patterns(void **state)
{
    static const char *const tokens[] = {
        ".", "%a", "%d", "%s", "%w", "%A", "%p", "[abc]", "[^a-c]", "[%d.]", "a", "b", "c",
        "-", "*", "+", "?", "(", ")", "()", "%1", "%2", "%b()", "%f[%w]", "^", "$", "%",
        "[", "]", "[]]", "[^]]", "%.", "%%", "x", " ", "1",
    };
    static const char alphabet[] = "abc(). 1x]";
    struct pair pr = pair_new();
    unsigned seed = 19;
    for (int n = 0; n < 20000; n++) {
        char p[64] = "", s[16];
        int nt = rand_r(&seed) % 6 + 1;
        for (int i = 0; i < nt; i++)
            strcat(p, tokens[rand_r(&seed) % (sizeof(tokens) / sizeof(tokens[0]))]);
        int ls = rand_r(&seed) % 12;
        for (int i = 0; i < ls; i++)
            s[i] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
        s[ls] = '\0';
        same(&pr, s, (size_t)ls, p, strlen(p), rand_r(&seed) % 5 - 1, rand_r(&seed) % 8 + 1);
    }
    pair_free(&pr);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_random_patterns),
    };
    log_threshold = LOG_LEVEL_WARN;
    alarm(300);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
