#include <stdio.h>

#include "script/script_int.h"

/* The count hook fires every BUDGET_STEP instructions. Once the budget is
 * spent it re-arms on every instruction, so a pcall inside the script cannot
 * swallow the error: each handler it runs trips again (Redis'
 * luaMaskCountHook does the same). */
#define BUDGET_STEP 1000

static void
hook(lua_State *L, lua_Debug *ar)
{
    struct script *s = script_of(L);
    if (!s->tripped) {
        s->used += BUDGET_STEP;
        if (s->used < s->budget)
            return;
        s->tripped = 1;
        /* Level 0 in a hook is the running Lua function: its line is the
         * culprit, and every re-raise below names it, not the line of the
         * pcall that caught the first one. */
        luaL_where(L, 0);
        snprintf(s->trip_where, sizeof(s->trip_where), "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        lua_sethook(L, hook, LUA_MASKCOUNT, 1);
        lua_sethook(s->L, hook, LUA_MASKCOUNT, 1); /* so coroutine.resume cannot swallow it */
    }
    lua_pushfstring(L, "%sinstruction budget exceeded (%d instructions)", s->trip_where,
                    (int)s->budget);
    lua_error(L);
}

void
script_budget_arm(struct script *s, uint32_t budget)
{
    s->budget = budget;
    s->used = 0;
    s->tripped = 0;
    lua_sethook(s->L, hook, LUA_MASKCOUNT, BUDGET_STEP);
}

void
script_budget_disarm(struct script *s)
{
    lua_sethook(s->L, NULL, 0, 0);
    s->tripped = 0;
}

int
script_msgh(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING) {
        const char *t = luaL_typename(L, 1);
        lua_pushfstring(L, "(error object is a %s value)", t);
    }
    return 1;
}
