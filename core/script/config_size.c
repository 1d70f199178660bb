#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "script/script_int.h"

/* chute.config { memory_limit = "15M" }: a size, as an integer of bytes or
 * a string "15M", "15 MiB", "512K", "1.5G" (K, M, G are 1024-based, with
 * or without "iB"/"B"). engine/budget.c refuses less than it can size;
 * the floor is repeated here so the key's own line names it. */

#define SIZE_MIN ((double)(8u << 20))
#define SIZE_MAX_BYTES ((double)(1ull << 40))

/* 0 with |*out| bytes, or -1 when |text| is not a size. */
static int
parse_size(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v) || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mul = 1;
    if (*end != '\0') {
        const char *u = "KMGT";
        const char *p = strchr(u, toupper((unsigned char)*end));
        if (p == NULL)
            return -1;
        mul = (double)(1ull << (10 * (p - u + 1)));
        end++;
        if (strcasecmp(end, "ib") != 0 && strcasecmp(end, "b") != 0 && *end != '\0')
            return -1;
    }
    *out = v * mul;
    return 0;
}

static const char *
check(lua_State *L, int idx, double *bytes)
{
    if (lua_isinteger(L, idx))
        *bytes = (double)lua_tointeger(L, idx);
    else if (lua_type(L, idx) != LUA_TSTRING || parse_size(lua_tostring(L, idx), bytes) != 0)
        return "expected a size: bytes, or a string such as \"15M\", \"15 MiB\", \"1.5G\"";
    if (*bytes < SIZE_MIN || *bytes > SIZE_MAX_BYTES)
        return "must be at least 8 MiB (\"8M\") and at most 1 TiB";
    return NULL;
}

int
script_l_check_size(lua_State *L)
{
    double b;
    const char *e = check(L, 1, &b);
    if (e == NULL)
        return 0;
    lua_pushstring(L, e);
    return 1;
}

size_t
script_config_size(lua_State *L, int t, const char *key)
{
    double b = 0;
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1) || check(L, -1, &b) != NULL)
        b = 0; /* absent, or refused by chute.config already */
    lua_pop(L, 1);
    return (size_t)b;
}
