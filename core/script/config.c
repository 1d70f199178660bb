#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/log.h"
#include "script/script_int.h"

/* Defaults a bundle gets for what it leaves out. */
#define DEFAULT_CONNECT_TIMEOUT 10.0
#define DEFAULT_IDLE_TIMEOUT 300.0
#define DEFAULT_BUDGET 100000u
#define DEFAULT_LUA_MEMORY_MB 64

int
script_check_address(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text)
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] == '\0' || port < 0 || port > 65535)
        return -1;
    char host[64];
    const char *h = text;
    size_t hl = (size_t)(colon - text);
    if (h[0] == '[') {
        if (hl < 2 || h[hl - 1] != ']')
            return -1;
        h++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (text[0] != '[' && inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *len = sizeof(*s4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*s6);
        return 0;
    }
    return -1;
}

static double
opt_number(lua_State *L, int t, const char *k, double def)
{
    double v = def;
    if (lua_getfield(L, t, k) == LUA_TNUMBER)
        v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static int
read_listener(lua_State *L, int listen, const char *k, struct script_listener *out, char *err,
              size_t errlen)
{
    if (lua_getfield(L, listen, k) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int t = lua_gettop(L);
    if (lua_getfield(L, t, "address") != LUA_TSTRING) {
        snprintf(err, errlen, "chute.config: listen.%s needs an address", k);
        lua_pop(L, 2);
        return -1;
    }
    snprintf(out->text, sizeof(out->text), "%s", lua_tostring(L, -1));
    script_check_address(out->text, &out->addr, &out->addrlen);
    out->enabled = 1;
    lua_pop(L, 1);
    if (lua_getfield(L, t, "users") == LUA_TTABLE) {
        size_t n = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            n++;
            lua_pop(L, 1);
        }
        out->users = calloc(2 * n + 1, sizeof(char *));
        lua_pushnil(L);
        while (out->users != NULL && lua_next(L, -2)) {
            out->users[2 * out->num_users] = strdup(lua_tostring(L, -2));
            out->users[2 * out->num_users + 1] = strdup(lua_tostring(L, -1));
            out->num_users++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 2);
    return 0;
}

int
script_config_read(struct script *s, char *err, size_t errlen)
{
    lua_State *L = s->L;
    struct script_config *c = &s->cfg;
    c->log_level = -1;
    c->fallback = FLOW_POLICY_DIRECT;
    c->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
    c->idle_timeout = DEFAULT_IDLE_TIMEOUT;
    c->budget = DEFAULT_BUDGET;
    c->lua_memory = (size_t)DEFAULT_LUA_MEMORY_MB << 20;

    lua_rawgeti(L, LUA_REGISTRYINDEX, s->state_ref);
    int st = lua_gettop(L);
    lua_getfield(L, st, "hooks");
    if (lua_getfield(L, -1, "route") == LUA_TFUNCTION)
        s->route_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else
        lua_pop(L, 1);
    lua_pop(L, 1);

    lua_getfield(L, st, "config");
    int t = lua_gettop(L);
    int rc = 0;
    if (lua_getfield(L, t, "log_level") == LUA_TSTRING)
        c->log_level = engine_log_level_parse(lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, t, "fallback") == LUA_TSTRING)
        c->fallback = script_policy_lookup(lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, t, "timeouts") == LUA_TTABLE) {
        c->connect_timeout = opt_number(L, -1, "connect", c->connect_timeout);
        c->idle_timeout = opt_number(L, -1, "idle", c->idle_timeout);
    }
    lua_pop(L, 1);
    c->budget = (uint32_t)opt_number(L, t, "budget", c->budget);
    c->lua_memory = (size_t)opt_number(L, t, "lua_memory_mb", DEFAULT_LUA_MEMORY_MB) << 20;
    if (lua_getfield(L, t, "listen") == LUA_TTABLE) {
        int l = lua_gettop(L);
        rc = read_listener(L, l, "socks", &c->socks, err, errlen);
        if (rc == 0)
            rc = read_listener(L, l, "http", &c->http, err, errlen);
    }
    lua_settop(L, st - 1);
    return rc;
}

static void
free_listener(struct script_listener *l)
{
    for (size_t i = 0; i < 2 * l->num_users; i++)
        free(l->users[i]);
    free(l->users);
    l->users = NULL;
    l->num_users = 0;
}

void
script_config_free(struct script_config *cfg)
{
    free_listener(&cfg->socks);
    free_listener(&cfg->http);
}
