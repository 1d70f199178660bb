#include <string.h>

#include "script/script_int.h"

/* The library functions whose work grows with an argument, wrapped to
 * charge that work to the call's budget (script_budget_charge) before the
 * stock function does it: one such call runs entirely between two count
 * hooks. string.rep("", 1 << 50) loops 2^50 times producing nothing,
 * table.move({}, 1, 1 << 40, 2) and table.insert under a __len that lies
 * loop as long, and a long string scanned in a tight loop costs far more
 * than its instructions. A unit is about one VM instruction's time. */

typedef uint64_t (*cost_fn)(lua_State *L);

static uint64_t
clamp(lua_Integer n)
{
    return n > 0 ? (uint64_t)n : 0;
}

/* Bytes of every string argument, at ~64 a unit (a scan or a copy). */
static uint64_t
cost_bytes(lua_State *L)
{
    uint64_t bytes = 0;
    for (int i = 1, n = lua_gettop(L); i <= n; i++)
        if (lua_type(L, i) == LUA_TSTRING)
            bytes += lua_rawlen(L, i);
    return bytes / 64;
}

static uint64_t
cost_rep(lua_State *L)
{
    size_t l = lua_type(L, 1) == LUA_TSTRING ? lua_rawlen(L, 1) : 0;
    size_t sep = lua_type(L, 3) == LUA_TSTRING ? lua_rawlen(L, 3) : 0;
    uint64_t n = lua_isinteger(L, 2) ? clamp(lua_tointeger(L, 2)) : 0;
    double bytes = (double)n * (double)(l + sep);
    return n / 8 + (bytes / 64 > 1e18 ? (uint64_t)1e18 : (uint64_t)(bytes / 64));
}

/* Elements from |i| to |j| (the stock functions check the arguments). */
static uint64_t
span(lua_State *L, int i_arg, lua_Integer i_def, int j_arg, int j_from_len)
{
    lua_Integer i = lua_isinteger(L, i_arg) ? lua_tointeger(L, i_arg) : i_def;
    lua_Integer j;
    if (lua_isinteger(L, j_arg))
        j = lua_tointeger(L, j_arg);
    else if (j_from_len && lua_isnoneornil(L, j_arg))
        j = luaL_len(L, 1); /* may call __len: Lua code, under the hook */
    else
        return 0;
    if (j < i)
        return 0;
    return (uint64_t)j - (uint64_t)i + 1;
}

static uint64_t
cost_concat(lua_State *L)
{
    return span(L, 3, 1, 4, 1) + cost_bytes(L);
}

static uint64_t
cost_unpack(lua_State *L)
{
    return span(L, 2, 1, 3, 1);
}

static uint64_t
cost_move(lua_State *L)
{
    return span(L, 2, 1, 3, 0);
}

/* insert(t, pos, v) and remove(t, pos) shift the elements after pos;
 * the two-argument insert and one-argument remove touch one. */
static uint64_t
shift(lua_State *L, int nargs)
{
    if (lua_gettop(L) < nargs || !lua_istable(L, 1) || !lua_isinteger(L, 2))
        return 1;
    lua_Integer n = luaL_len(L, 1), pos = lua_tointeger(L, 2);
    return n >= pos ? clamp(n - pos) + 1 : 1;
}

static uint64_t
cost_insert(lua_State *L)
{
    return shift(L, 3);
}

static uint64_t
cost_remove(lua_State *L)
{
    return shift(L, 2);
}

static uint64_t
cost_sort(lua_State *L)
{
    return lua_istable(L, 1) ? clamp(luaL_len(L, 1)) : 0;
}

/* A full collection walks the whole heap. */
static uint64_t
cost_collect(lua_State *L)
{
    const char *opt = luaL_optstring(L, 1, "collect");
    if (strcmp(opt, "collect") != 0 && strcmp(opt, "step") != 0)
        return 0;
    return script_of(L)->mem_used / 1024;
}

static int
charged(lua_State *L)
{
    cost_fn cost = (cost_fn)lua_touserdata(L, lua_upvalueindex(2));
    script_budget_charge(L, cost(L));
    lua_CFunction stock = lua_tocfunction(L, lua_upvalueindex(1));
    return stock(L); /* the same frame: arguments, errors and names as before */
}

static int
rep(lua_State *L)
{
    /* Nothing to repeat: the stock loop would spin n times for "". */
    if (lua_type(L, 1) == LUA_TSTRING && lua_rawlen(L, 1) == 0 &&
        (lua_isnoneornil(L, 3) || (lua_type(L, 3) == LUA_TSTRING && lua_rawlen(L, 3) == 0)) &&
        lua_isinteger(L, 2)) {
        lua_pushliteral(L, "");
        return 1;
    }
    return charged(L);
}

static void
wrap(lua_State *L, int lib, const char *name, lua_CFunction via, cost_fn cost)
{
    if (lua_getfield(L, lib, name) != LUA_TFUNCTION || lua_tocfunction(L, -1) == NULL) {
        lua_pop(L, 1);
        return;
    }
    lua_pushlightuserdata(L, (void *)cost);
    lua_pushcclosure(L, via, 2);
    lua_setfield(L, lib, name);
}

void
script_bounded_open(lua_State *L)
{
    static const char *const string_scans[] = {"byte", "char", "format", "lower", "upper",
                                               "reverse", "sub", "pack", "unpack", NULL};
    static const char *const utf8_scans[] = {"char", "codepoint", "len", "offset", NULL};
    static const struct {
        const char *name;
        cost_fn cost;
    } table_fns[] = {
        {"concat", cost_concat}, {"unpack", cost_unpack}, {"move", cost_move},
        {"insert", cost_insert}, {"remove", cost_remove}, {"sort", cost_sort},
    };
    lua_getglobal(L, "string");
    int lib = lua_gettop(L);
    for (const char *const *n = string_scans; *n; n++)
        wrap(L, lib, *n, charged, cost_bytes);
    wrap(L, lib, "rep", rep, cost_rep);
    script_pattern_open(L, lib);
    lua_getglobal(L, "utf8");
    for (const char *const *n = utf8_scans; *n; n++)
        wrap(L, lib + 1, *n, charged, cost_bytes);
    lua_getglobal(L, "table");
    for (size_t i = 0; i < sizeof(table_fns) / sizeof(table_fns[0]); i++)
        wrap(L, lib + 2, table_fns[i].name, charged, table_fns[i].cost);
    lua_pushglobaltable(L);
    wrap(L, lib + 3, "collectgarbage", charged, cost_collect);
    lua_settop(L, lib - 1);
}
