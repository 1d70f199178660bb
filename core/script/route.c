#include <stdio.h>
#include <string.h>

#include "log/log.h"
#include "script/geo.h"
#include "script/hint.h"
#include "script/script_int.h"

/* Does |msg| start with a "chunk:line:" position? error("x", 0) and error
 * objects that are not strings carry none. */
int
script_has_position(const char *msg)
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
    f->mitm = 0;
    s->st.route_errors++;
}

/* route()'s second result: nil, or { mitm = true|false }. 0, or -1 with
 * |why| saying what is wrong. Reads with lua_next only: nothing here may
 * allocate more than the protected call allows. A flow whose route()
 * says something about the MITM is not stored in the decision cache (its
 * key holds no such flag), so the next flow to it asks route() again. */
static int
read_options(lua_State *L, int idx, struct flow *f, char *why, size_t len)
{
    if (lua_isnoneornil(L, idx))
        return 0;
    if (!lua_istable(L, idx)) {
        snprintf(why, len, "route()'s second result is a %s, not a table of options "
                           "({ mitm = false })", luaL_typename(L, idx));
        return -1;
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (k == NULL || strcmp(k, "mitm") != 0) {
            snprintf(why, len, "route() returned an unknown option '%s' (options: mitm)",
                     k ? k : luaL_typename(L, -2));
            lua_pop(L, 2);
            return -1;
        }
        if (!lua_isboolean(L, -1)) {
            snprintf(why, len, "route() option mitm: expected a boolean, got %s",
                     script_got(L, -1));
            lua_pop(L, 2);
            return -1;
        }
        f->mitm = lua_toboolean(L, -1) ? 1 : -1;
        f->_reads |= FLOW_READ_UNCACHEABLE;
        lua_pop(L, 1);
    }
    return 0;
}

/* The call and the reading of its results, run as a protected C function:
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
    int rc = lua_pcall(L, 1, 2, top + 1);
    int tripped = s->tripped;
    script_budget_disarm(s);
    *fp = NULL;
    if (((f->_reads & FLOW_READ_HOST) && f->_sniffable) ||
        ((f->_reads & FLOW_READ_RESOLVE) && f->_resolvable &&
         f->resolved.state == FLOW_RESOLVE_NONE)) {
        /* A trial: the flow will be held, named (or resolved for its IP
         * rules) and decided again; this call's outcome (and its warnings)
         * does not count. */
        s->st.route_calls--;
        lua_settop(L, top);
        return 0;
    }

    char where[128], why[160];
    if (rc == LUA_OK && read_options(L, top + 3, f, why, sizeof(why)) != 0) {
        route_where(s, where, sizeof(where));
        LOG_WARN("flow %llu: %s: %s; using %s", (unsigned long long)f->id, where, why,
                 script_policy_name(s, s->cfg.fallback));
        fallback(s, f, "fallback: bad options");
    } else if (rc != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        where[0] = '\0';
        if (!script_has_position(msg)) {
            route_where(s, where, sizeof(where) - 2);
            strcat(where, ": ");
        }
        LOG_WARN("flow %llu: route() failed: %s%s; using %s", (unsigned long long)f->id, where,
                 msg, script_policy_name(s, s->cfg.fallback));
        fallback(s, f, tripped ? "fallback: budget" : "fallback: error");
    } else if (lua_isnil(L, top + 2)) {
        f->policy = s->cfg.fallback;
        f->rule = "fallback: route() returned nil";
    } else {
        lua_settop(L, top + 2);
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        /* "DIRECT\0junk" is not DIRECT: the whole string must be the name. */
        int p = name && strlen(name) == lua_rawlen(L, -1) ? script_policy_lookup(s, name) : -1;
        if (p < 0) {
            route_where(s, where, sizeof(where));
            char hint[160];
            if (name != NULL)
                script_policy_hint(s, name, hint, sizeof(hint));
            if (name != NULL)
                LOG_WARN("flow %llu: %s: route() returned unknown policy '%s%s'%s%s%s; using %s",
                         (unsigned long long)f->id, where, name,
                         strlen(name) != lua_rawlen(L, -1) ? "\\0..." : "", hint[0] ? " (" : "",
                         hint, hint[0] ? ")" : "", script_policy_name(s, s->cfg.fallback));
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
    f->mitm = 0;
    if (s->route_ref == LUA_NOREF) {
        f->policy = s->cfg.fallback;
        f->rule = "fallback: no route()";
        return;
    }
    script_geo_prefetch(s, f);
    if (script_protected(s, route_protected, f) != LUA_OK) {
        LOG_WARN("flow %llu: route() could not run: %s; using %s", (unsigned long long)f->id,
                 s->protect_err, script_policy_name(s, s->cfg.fallback));
        fallback(s, f, "fallback: error");
    }
}
