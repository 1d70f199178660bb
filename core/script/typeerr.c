/* Type errors that show the value: "budget: expected integer, got string
 * \"x\"", and for a duration written as a string ("5s") the number to
 * write instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script/hint.h"
#include "script/script_int.h"

#define SHOWN_MAX 40

/* Pushes the value at |idx| as shown in a message: a string quoted with
 * control bytes escaped and cut at SHOWN_MAX bytes, a number, a boolean;
 * other types push "". */
static void
push_shown(lua_State *L, int idx)
{
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER || t == LUA_TBOOLEAN) {
        luaL_tolstring(L, idx, NULL);
        return;
    }
    if (t != LUA_TSTRING) {
        lua_pushliteral(L, "");
        return;
    }
    size_t n;
    const char *v = lua_tolstring(L, idx, &n);
    char out[SHOWN_MAX * 4 + 8];
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n && i < SHOWN_MAX; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, sizeof(out) - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, sizeof(out) - o, "\\%u", c);
        else
            out[o++] = (char)c;
    }
    if (n > SHOWN_MAX)
        o += (size_t)snprintf(out + o, sizeof(out) - o, "...");
    out[o++] = '"';
    lua_pushlstring(L, out, o);
}

/* "5s", "1.5 min", "500ms", "2h" in |unit| ("seconds" or "milliseconds"):
 * the number, or -1 when |v| is no duration. */
static double
duration_in(const char *v, const char *unit)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || !(x >= 0))
        return -1;
    while (*end == ' ')
        end++;
    static const struct {
        const char *suffix;
        double seconds;
    } units[] = {{"", -1},     {"ms", 0.001}, {"s", 1},       {"sec", 1},   {"secs", 1},
                 {"seconds", 1}, {"m", 60},   {"min", 60},    {"mins", 60}, {"minutes", 60},
                 {"h", 3600},  {"hours", 3600}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) != 0)
            continue;
        if (units[i].seconds < 0)
            return x; /* "5": a number in a string */
        double s = x * units[i].seconds;
        return strcmp(unit, "milliseconds") == 0 ? s * 1000 : s;
    }
    return -1;
}

const char *
script_got(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    const char *type = lua_type(L, idx) != LUA_TNUMBER ? luaL_typename(L, idx)
                       : lua_isinteger(L, idx)         ? "integer"
                                                       : "float";
    push_shown(L, idx);
    const char *shown = lua_tostring(L, -1);
    lua_pushfstring(L, "%s%s%s", type, *shown ? " " : "", shown);
    lua_remove(L, -2);
    return lua_tostring(L, -1);
}

const char *
script_type_error(lua_State *L, int idx, const char *path, const char *want, const char *unit)
{
    idx = lua_absindex(L, idx);
    /* The key as the user writes it: "connect" of "timeouts.connect",
     * "interval" of "field 'interval'". */
    char keybuf[64];
    const char *key = strrchr(path, '.'), *q = strchr(path, '\'');
    key = key != NULL ? key + 1 : path;
    if (q != NULL && strchr(q + 1, '\'') != NULL) {
        snprintf(keybuf, sizeof(keybuf), "%.*s", (int)(strchr(q + 1, '\'') - q - 1), q + 1);
        key = keybuf;
    }
    push_shown(L, idx);
    const char *shown = lua_tostring(L, -1);
    /* As math.type names numbers: "expected integer, got float 2.5". */
    const char *got = lua_type(L, idx) != LUA_TNUMBER ? luaL_typename(L, idx)
                      : lua_isinteger(L, idx)         ? "integer"
                                                      : "float";
    char msg[512], tail[200] = "";
    if (unit != NULL && lua_type(L, idx) == LUA_TSTRING) {
        double n = duration_in(lua_tostring(L, idx), unit);
        if (n >= 0)
            snprintf(tail, sizeof(tail), " (a plain number, not a string: %.60s = %.15g)", key, n);
        else
            snprintf(tail, sizeof(tail), " (%.60s takes a plain number of %s)", key, unit);
    }
    if (unit != NULL)
        snprintf(msg, sizeof(msg), "%.200s: expected a number of %s, got %s%s%s%s", path, unit,
                 got, *shown ? " " : "", shown, tail);
    else
        snprintf(msg, sizeof(msg), "%.200s: expected %s, got %s%s%s", path, want, got,
                 *shown ? " " : "", shown);
    lua_pop(L, 1);
    lua_pushstring(L, msg);
    return lua_tostring(L, -1);
}

int
script_l_type_error(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    const char *want = luaL_checkstring(L, 3);
    const char *unit = luaL_optstring(L, 4, NULL);
    luaL_checkany(L, 2);
    script_type_error(L, 2, path, want, unit);
    return 1;
}
