#include <stdio.h>

#include "log/log.h"
#include "script/script_int.h"

/* Every entry from the engine into the state goes through here. Pushing a
 * value can raise "not enough memory" once the state is at its cap, and a
 * raise outside any pcall ends in lua_atpanic and abort(). So the entry
 * pushes only a light C function and a light userdata (no allocation) and
 * does all the rest inside lua_pcall. */
int
script_protected(struct script *s, lua_CFunction fn, void *ud)
{
    lua_State *L = s->L;
    int top = lua_gettop(L);
    s->protect_err[0] = '\0';
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, ud);
    int rc = lua_pcall(L, 1, 0, 0);
    if (rc != LUA_OK) {
        /* A memory error's message is preallocated; others are strings
         * from script_msgh or lua_error in fn. */
        const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
        snprintf(s->protect_err, sizeof(s->protect_err), "%s", msg);
        script_budget_disarm(s);
    }
    lua_settop(L, top);
    return rc;
}

/* Reached only if an error escapes every pcall: say so before Lua aborts. */
static int
panic(lua_State *L)
{
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)";
    LOG_ERROR("script: unprotected Lua error, aborting: %s", msg);
    return 0;
}

void
script_protect_init(lua_State *L)
{
    lua_atpanic(L, panic);
}
