#include <string.h>

#include "engine/log.h"
#include "script/script_int.h"

int
script_policy_lookup(const char *name)
{
    if (strcmp(name, "DIRECT") == 0)
        return FLOW_POLICY_DIRECT;
    if (strcmp(name, "REJECT") == 0)
        return FLOW_POLICY_REJECT;
    return -1;
}

static void
fallback(struct script *s, struct flow *f, const char *rule)
{
    f->policy = s->cfg.fallback;
    f->rule = rule;
    s->st.route_errors++;
}

void
script_route(struct script *s, struct flow *f)
{
    lua_State *L = s->L;
    s->st.route_calls++;
    if (s->route_ref == LUA_NOREF) {
        f->policy = s->cfg.fallback;
        f->rule = "fallback: no route()";
        return;
    }
    int top = lua_gettop(L);
    lua_pushcfunction(L, script_msgh);
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->route_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->flow_ref);
    *(struct flow **)lua_touserdata(L, -1) = f;
    script_budget_arm(s, s->cfg.budget);
    int rc = lua_pcall(L, 1, 1, top + 1);
    int tripped = s->tripped;
    script_budget_disarm(s);
    script_flow_set(s, NULL);

    if (rc != LUA_OK) {
        LOG_WARN("flow %llu: route() failed: %s; using %s", (unsigned long long)f->id,
                 lua_tostring(L, -1), flow_policy_name(s->cfg.fallback));
        fallback(s, f, tripped ? "fallback: budget" : "fallback: error");
    } else if (lua_isnil(L, -1)) {
        f->policy = s->cfg.fallback;
        f->rule = "fallback: route() returned nil";
    } else {
        const char *name = lua_tostring(L, -1);
        int p = name ? script_policy_lookup(name) : -1;
        if (p < 0) {
            lua_Debug ar;
            lua_rawgeti(L, LUA_REGISTRYINDEX, s->route_ref);
            lua_getinfo(L, ">S", &ar);
            LOG_WARN("flow %llu: %s:%d: route() returned unknown policy '%s'; using %s",
                     (unsigned long long)f->id, ar.short_src, ar.linedefined,
                     name ? name : luaL_typename(L, -1), flow_policy_name(s->cfg.fallback));
            fallback(s, f, "fallback: unknown policy");
        } else {
            f->policy = p;
            f->rule = "route";
        }
    }
    lua_settop(L, top);
}
