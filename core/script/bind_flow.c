#include <string.h>

#include "flow/process.h"
#include "script/script_int.h"

/* route() gets the flow as a small userdata whose fields are produced only
 * when the script reads them (a fresh 5-field table costs ~280 ns a call, a
 * userdata ~70 ns: shared/notes/rules-protocols-lua.md §8). Each call gets
 * its own, emptied when the call returns, so a flow a script keeps reads as
 * an error instead of silently showing a later flow's fields. */

struct flow *
script_check_flow(lua_State *L, int idx)
{
    struct flow **fp = luaL_checkudata(L, idx, "chute.flow");
    if (*fp == NULL)
        luaL_error(L, "flow used outside route() (copy the fields you need)");
    return *fp;
}

static int
push_ip(lua_State *L, const struct sockaddr_storage *ss)
{
    char buf[64];
    struct flow_addr a = {0};
    if (ss->ss_family == AF_INET) {
        a.kind = FLOW_ADDR_IP4;
        memcpy(a.ip, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        a.kind = FLOW_ADDR_IP6;
        memcpy(a.ip, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    } else {
        lua_pushnil(L);
        return 1;
    }
    flow_addr_host(&a, buf, sizeof(buf));
    lua_pushstring(L, buf);
    return 1;
}

static int
src_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return 0;
}

/* The process behind the flow, looked up once per flow however many of its
 * fields the script reads (a /proc walk: paid only by scripts that ask). */
const struct flow_process *
script_flow_process(const struct flow *f)
{
    static struct flow_process cached;
    static const struct flow *cached_flow;
    static uint64_t cached_id;
    static int found;
    if (cached_flow != f || cached_id != f->id) {
        found = flow_process_lookup(f, &cached) == 0;
        cached_flow = f;
        cached_id = f->id;
    }
    return found ? &cached : NULL;
}

static int
push_process_field(lua_State *L, struct flow *f, char which)
{
    f->_reads |= FLOW_READ_UNCACHEABLE;
    const struct flow_process *p = script_flow_process(f);
    if (p == NULL || (which != 'u' && p->pid == 0))
        lua_pushnil(L);
    else if (which == 'n')
        lua_pushstring(L, p->name);
    else if (which == 'p')
        lua_pushstring(L, p->path);
    else
        lua_pushinteger(L, (lua_Integer)p->uid);
    return 1;
}

static int
flow_index(lua_State *L)
{
    struct flow *f = script_check_flow(L, 1);
    size_t n;
    const char *k = luaL_checklstring(L, 2, &n);
    char buf[64];

    if (n == 4 && memcmp(k, "host", 4) == 0) {
        if (f->dst.kind == FLOW_ADDR_NAME) {
            lua_pushlstring(L, f->dst.name, f->dst.name_len);
        } else if (f->sniffed != NULL) {
            f->_reads |= FLOW_READ_UNCACHEABLE; /* the cache is keyed by address */
            lua_pushstring(L, f->sniffed);
        } else {
            /* Nothing yet: a TUN flow may sniff its first bytes and ask again. */
            f->_reads |= FLOW_READ_HOST | FLOW_READ_UNCACHEABLE;
            lua_pushnil(L);
        }
    } else if (n == 8 && memcmp(k, "dst_port", 8) == 0) {
        lua_pushinteger(L, f->dst.port);
    } else if (n == 6 && memcmp(k, "dst_ip", 6) == 0) {
        if (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6) {
            flow_addr_host(&f->dst, buf, sizeof(buf));
            lua_pushstring(L, buf);
        } else {
            lua_pushnil(L);
        }
    } else if (n == 7 && memcmp(k, "network", 7) == 0) {
        lua_pushstring(L, flow_network_name(f->network));
    } else if (n == 7 && memcmp(k, "inbound", 7) == 0) {
        lua_pushstring(L, flow_inbound_name(f->inbound));
    } else if (n == 6 && memcmp(k, "src_ip", 6) == 0) {
        f->_reads |= FLOW_READ_UNCACHEABLE;
        push_ip(L, &f->src);
    } else if (n == 8 && memcmp(k, "src_port", 8) == 0) {
        f->_reads |= FLOW_READ_UNCACHEABLE;
        lua_pushinteger(L, src_port(&f->src));
    } else if (n == 2 && memcmp(k, "id", 2) == 0) {
        f->_reads |= FLOW_READ_UNCACHEABLE;
        lua_pushinteger(L, (lua_Integer)f->id);
    } else if (n == 12 && memcmp(k, "process_name", 12) == 0) {
        push_process_field(L, f, 'n');
    } else if (n == 12 && memcmp(k, "process_path", 12) == 0) {
        push_process_field(L, f, 'p');
    } else if (n == 3 && memcmp(k, "uid", 3) == 0) {
        push_process_field(L, f, 'u');
    } else {
        return luaL_error(L, "flow has no field '%s' (fields: network, src_ip, src_port, "
                             "dst_ip, dst_port, host, inbound, id, process_name, "
                             "process_path, uid)", k);
    }
    return 1;
}

static int
flow_newindex(lua_State *L)
{
    return luaL_error(L, "flow fields are read-only");
}

static int
flow_tostring(lua_State *L)
{
    struct flow **fp = luaL_checkudata(L, 1, "chute.flow");
    if (*fp == NULL) {
        lua_pushliteral(L, "flow (closed)");
        return 1;
    }
    char dst[300];
    flow_addr_format(&(*fp)->dst, dst, sizeof(dst));
    lua_pushfstring(L, "flow %I %s -> %s", (lua_Integer)(*fp)->id,
                    flow_network_name((*fp)->network), dst);
    return 1;
}

void
script_flow_open(struct script *s)
{
    lua_State *L = s->L;
    luaL_newmetatable(L, "chute.flow");
    lua_pushcfunction(L, flow_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, flow_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, flow_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    s->flow_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* the metatable, looked up once */
}

struct flow **
script_flow_push(struct script *s, struct flow *f)
{
    struct flow **fp = lua_newuserdatauv(s->L, sizeof(*fp), 0);
    *fp = f;
    lua_rawgeti(s->L, LUA_REGISTRYINDEX, s->flow_ref);
    lua_setmetatable(s->L, -2);
    return fp;
}
