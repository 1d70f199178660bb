#include <stdio.h>
#include <string.h>

#include "log/log.h"
#include "script/script_int.h"

/* Does |msg| start with a "chunk:line:" position? error("x", 0) and error
 * objects that are not strings carry none. */
static int
has_position(const char *msg)
{
    const char *c = strchr(msg, ':');
    if (c == NULL || c[1] < '0' || c[1] > '9')
        return 0;
    for (c++; *c >= '0' && *c <= '9'; c++)
        ;
    return *c == ':';
}

/* "main.lua:12", where route() is defined, for messages that lack a place. */
static void
route_where(struct script *s, char *buf, size_t len)
{
    lua_Debug ar;
    lua_rawgeti(s->L, LUA_REGISTRYINDEX, s->route_ref);
    lua_getinfo(s->L, ">S", &ar);
    snprintf(buf, len, "%s:%d", ar.short_src, ar.linedefined);
}

static void
fallback(struct script *s, struct flow *f, const char *rule)
{
    f->policy = s->cfg.fallback;
    f->rule = rule;
    s->st.route_errors++;
}

/* The call and the reading of its result, run as a protected C function:
 * every push may raise "not enough memory" once the state is at its cap. */
static int
route_protected(lua_State *L)
{
    struct script *s = script_of(L);
    struct flow *f = lua_touserdata(L, 1);
    int top = lua_gettop(L);
    lua_pushcfunction(L, script_msgh);
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->route_ref);
    struct flow **fp = script_flow_push(s, f);
    script_budget_arm(s, s->cfg.budget);
    int rc = lua_pcall(L, 1, 1, top + 1);
    int tripped = s->tripped;
    script_budget_disarm(s);
    *fp = NULL;
    if ((f->_reads & FLOW_READ_HOST) && f->_sniffable) {
        /* A trial: the flow will be held, named and decided again; this
         * call's outcome (and its warnings) does not count. */
        s->st.route_calls--;
        lua_settop(L, top);
        return 0;
    }

    char where[128];
    if (rc != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        where[0] = '\0';
        if (!has_position(msg)) {
            route_where(s, where, sizeof(where) - 2);
            strcat(where, ": ");
        }
        LOG_WARN("flow %llu: route() failed: %s%s; using %s", (unsigned long long)f->id, where,
                 msg, script_policy_name(s, s->cfg.fallback));
        fallback(s, f, tripped ? "fallback: budget" : "fallback: error");
    } else if (lua_isnil(L, -1)) {
        f->policy = s->cfg.fallback;
        f->rule = "fallback: route() returned nil";
    } else {
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        /* "DIRECT\0junk" is not DIRECT: the whole string must be the name. */
        int p = name && strlen(name) == lua_rawlen(L, -1) ? script_policy_lookup(s, name) : -1;
        if (p < 0) {
            route_where(s, where, sizeof(where));
            if (name != NULL)
                LOG_WARN("flow %llu: %s: route() returned unknown policy '%s%s'; using %s",
                         (unsigned long long)f->id, where, name,
                         strlen(name) != lua_rawlen(L, -1) ? "\\0..." : "",
                         script_policy_name(s, s->cfg.fallback));
            else
                LOG_WARN("flow %llu: %s: route() returned a %s, not a policy name; using %s",
                         (unsigned long long)f->id, where, luaL_typename(L, -1),
                         script_policy_name(s, s->cfg.fallback));
            fallback(s, f, "fallback: unknown policy");
        } else {
            f->policy = p;
            f->rule = "route";
        }
    }
    lua_settop(L, top);
    return 0;
}

void
script_route(struct script *s, struct flow *f)
{
    s->st.route_calls++;
    if (s->route_ref == LUA_NOREF) {
        f->policy = s->cfg.fallback;
        f->rule = "fallback: no route()";
        return;
    }
    if (script_protected(s, route_protected, f) != LUA_OK) {
        LOG_WARN("flow %llu: route() could not run: %s; using %s", (unsigned long long)f->id,
                 s->protect_err, script_policy_name(s, s->cfg.fallback));
        fallback(s, f, "fallback: error");
    }
}
