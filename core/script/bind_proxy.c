#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "outbound/set.h"
#include "pool/pool.h"
#include "tls/tls.h"
#include "script/hint.h"
#include "script/script_int.h"

/* chute.proxy "name" { ... } and chute.group "name" { ... }: each field is
 * checked here so a mistake is reported at the declaring line, and the
 * declarations become the bundle's outbound_set when main.lua has run.
 * Names resolve in declaration order: a group names proxies declared
 * above it, and route() / chute.rules may name any of them. */

#define MAX_POLICIES 4096

struct field {
    const char *name;
    int type; /* LUA_T* */
};

/* LUA_TNONE: a field of more than one type, checked by its reader. */
static const struct field common_fields[] = {
    {"type", LUA_TSTRING}, {"server", LUA_TSTRING}, {"port", LUA_TNUMBER}, {"udp", LUA_TBOOLEAN},
    {"pool", LUA_TNONE},
};
static const struct field socks_fields[] = {{"username", LUA_TSTRING}, {"password", LUA_TSTRING}};
static const struct field http_fields[] = {
    {"username", LUA_TSTRING}, {"password", LUA_TSTRING},         {"tls", LUA_TBOOLEAN},
    {"sni", LUA_TSTRING},      {"skip_cert_verify", LUA_TBOOLEAN}, {"ca", LUA_TSTRING}};
static const struct field ss_fields[] = {{"cipher", LUA_TSTRING}, {"password", LUA_TSTRING}};
static const struct field trojan_fields[] = {{"password", LUA_TSTRING},
                                             {"sni", LUA_TSTRING},
                                             {"skip_cert_verify", LUA_TBOOLEAN},
                                             {"ca", LUA_TSTRING}};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct field *
find_field(const struct field *f, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i].name, k) == 0)
            return &f[i];
    return NULL;
}

/* 0 when |name| is free; else -1 with why it is not pushed: a built-in, or
 * the proxy or group that has it, with the line that declared it. */
static int
name_taken(lua_State *L, struct script *s, const char *name)
{
    int id = script_policy_lookup(s, name);
    if (id < 0)
        return 0;
    if (id < FLOW_POLICY__BUILTIN) {
        lua_pushfstring(L, "the name is taken: %s is a built-in policy", name);
        return -1;
    }
    size_t i = (size_t)(id - FLOW_POLICY__BUILTIN);
    if (i < s->nproxies)
        lua_pushfstring(L, "the name is taken: a proxy of that name is declared at %s",
                        s->proxies[i].where);
    else
        lua_pushfstring(L, "the name is taken: a group of that name is declared at %s",
                        s->groups[i - s->nproxies].where);
    return -1;
}

/* A DNS name: letters, digits, '-', '_' in labels of 1..63 bytes. */
static int
host_name_ok(const char *s)
{
    size_t label = 0;
    for (; *s; s++) {
        if (*s == '.') {
            if (label == 0)
                return 0;
            label = 0;
        } else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                   *s == '-' || *s == '_') {
            if (++label > 63)
                return 0;
        } else {
            return 0;
        }
    }
    return 1;
}

/* luaL_error names the caller of the C function: here chute.lua's wrapper.
 * The user's line is one level further up. */
static int
fail_at(lua_State *L, const char *fmt, ...)
{
    va_list ap;
    luaL_where(L, 2);
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

/* A declaration's error at the line of the field it is about ("field
 * 'port'", "unknown field 'passwd'", "proxies[2]: ...", "pool.max_idle:
 * ..."), found in the source (srcpos.c), else at the call's line. */
static int
fail_decl(lua_State *L, const char *kind, const char *name, const char *e)
{
    char field[64] = "", where[512];
    if (sscanf(e, "unknown field '%63[^']'", field) != 1 &&
        sscanf(e, "field '%63[^']'", field) != 1) {
        size_t n = strspn(e, "abcdefghijklmnopqrstuvwxyz_.");
        if (n > 0 && n < sizeof(field) && (e[n] == ':' || e[n] == ' ' || e[n] == '['))
            snprintf(field, sizeof(field), "%.*s", (int)n, e);
    }
    script_key_where(L, 2, kind, name, field, where, sizeof(where));
    lua_pushfstring(L, "%schute.%s \"%s\": %s", where, kind, name, e);
    return lua_error(L);
}

/* Pushes "main.lua:12" for the line that declared the thing. */
static const char *
declared_at(lua_State *L, char *buf, size_t len)
{
    luaL_where(L, 2);
    snprintf(buf, len, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == ':'))
        buf[--n] = '\0';
    return buf;
}

static const char *
opt_string(lua_State *L, int t, const char *k)
{
    lua_getfield(L, t, k);
    const char *v = lua_tostring(L, -1);
    lua_pop(L, 1); /* the string stays referenced by the table */
    return v;
}

static int
opt_bool(lua_State *L, int t, const char *k)
{
    lua_getfield(L, t, k);
    int v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Returns an error message (pushed) or NULL. Checks every key against the
 * type's fields and their Lua types. */
static const char *
check_keys(lua_State *L, int t, const struct field *extra, size_t nextra, const char *type)
{
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        const struct field *f = k ? find_field(common_fields, N(common_fields), k) : NULL;
        if (f == NULL && k != NULL)
            f = find_field(extra, nextra, k);
        if (f == NULL) {
            const char *names[N(common_fields) + 8];
            size_t nn = 0;
            for (size_t i = 0; i < N(common_fields) + nextra && nn < N(names); i++)
                names[nn++] = i < N(common_fields) ? common_fields[i].name
                                                   : extra[i - N(common_fields)].name;
            const char *near = k != NULL ? script_suggest(k, names, nn) : NULL;
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            lua_pushfstring(L, "unknown field '%s' for type %s%s%s%s (fields: ", k ? k : "?", type,
                            near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "");
            luaL_addvalue(&b);
            for (size_t i = 0; i < nn; i++) {
                if (i > 0)
                    luaL_addstring(&b, ", ");
                luaL_addstring(&b, names[i]);
            }
            luaL_addstring(&b, ")");
            luaL_pushresult(&b);
            return lua_tostring(L, -1);
        }
        if (f->type != LUA_TNONE && lua_type(L, -1) != f->type) {
            lua_pushfstring(L, "field '%s'", k);
            return script_type_error(L, -2, lua_tostring(L, -1), lua_typename(L, f->type), NULL);
        }
        lua_pop(L, 1);
    }
    return NULL;
}

/* ca = "file.pem" (relative to the bundle): the anchors this proxy's
 * certificate is checked against instead of the system's. */
static const char *
read_ca(lua_State *L, struct script *s, int t, struct outbound_proxy *p)
{
    const char *ca = opt_string(L, t, "ca");
    if (ca == NULL)
        return NULL;
    char path[4096], err[256];
    if (ca[0] != '/' && script_bundle_path(s, ca, path, sizeof(path)) != 0)
        return lua_pushfstring(L, "ca: '%s' is not a path inside the bundle", ca);
    if (ca[0] == '/')
        snprintf(path, sizeof(path), "%s", ca);
    p->anchors = tls_ctx_new(path, err, sizeof(err));
    if (p->anchors == NULL)
        return lua_pushfstring(L, "ca: %s", err);
    return NULL;
}

/* pool = false | true | { max_idle = 8, idle_timeout = 30 }: warm
 * connections to the server (core/pool), on by default when the proxy
 * speaks TLS. */
static const char *
read_pool(lua_State *L, int t, struct outbound_proxy *p)
{
    p->pool = (struct pool_opts){.enabled = p->tls, .max_idle = POOL_MAX_IDLE,
                                 .idle_timeout = POOL_IDLE_TIMEOUT};
    lua_getfield(L, t, "pool");
    int type = lua_type(L, -1);
    if (type == LUA_TNIL || type == LUA_TBOOLEAN) {
        if (type == LUA_TBOOLEAN)
            p->pool.enabled = lua_toboolean(L, -1);
        lua_pop(L, 1);
        return NULL;
    }
    if (type != LUA_TTABLE)
        return lua_pushfstring(L, "pool: expected false, true or { max_idle = %d, idle_timeout = "
                                  "%d }, got %s", POOL_MAX_IDLE, (int)POOL_IDLE_TIMEOUT,
                               luaL_typename(L, -1));
    int tab = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, tab)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int isnum;
        if (strcmp(k, "max_idle") == 0) {
            lua_Integer n = lua_tointegerx(L, -1, &isnum);
            if (!isnum || n < 1 || n > POOL_MAX_IDLE_LIMIT)
                return lua_pushfstring(L, "pool.max_idle: expected an integer 1..%d, got %s",
                                       POOL_MAX_IDLE_LIMIT, luaL_tolstring(L, -1, NULL));
            p->pool.max_idle = (unsigned)n;
        } else if (strcmp(k, "idle_timeout") == 0) {
            lua_Number v = lua_tonumberx(L, -1, &isnum);
            if (!isnum || !(v >= 1 && v <= 3600))
                return lua_pushfstring(L, "pool.idle_timeout: expected seconds, 1..3600, got %s",
                                       luaL_tolstring(L, -1, NULL));
            p->pool.idle_timeout = (double)v;
        } else {
            return lua_pushfstring(L, "pool: unknown field '%s' (fields: max_idle, idle_timeout)",
                                   k);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    p->pool.enabled = 1;
    return NULL;
}

static const char *
read_proxy(lua_State *L, int t, const char *name, struct outbound_proxy *p)
{
    lua_getfield(L, t, "type");
    int tt = lua_type(L, -1);
    lua_pop(L, 1);
    const char *type = tt == LUA_TSTRING ? opt_string(L, t, "type") : NULL;
    if (type == NULL)
        return "needs a type (socks5, http, https, shadowsocks, trojan)";
    const struct field *extra;
    size_t nextra;
    if (strcmp(type, "socks5") == 0) {
        p->type = OUTBOUND_SOCKS5, extra = socks_fields, nextra = N(socks_fields);
    } else if (strcmp(type, "http") == 0 || strcmp(type, "https") == 0) {
        p->type = OUTBOUND_HTTP, extra = http_fields, nextra = N(http_fields);
        p->tls = type[4] == 's';
    } else if (strcmp(type, "shadowsocks") == 0 || strcmp(type, "ss") == 0) {
        p->type = OUTBOUND_SHADOWSOCKS, extra = ss_fields, nextra = N(ss_fields);
    } else if (strcmp(type, "trojan") == 0) {
        p->type = OUTBOUND_TROJAN, extra = trojan_fields, nextra = N(trojan_fields);
        p->tls = 1;
    } else {
    {
        static const char *const types[] = {"socks5", "http", "https", "shadowsocks", "ss", "trojan"};
        const char *near = script_suggest(type, types, N(types));
        return lua_pushfstring(L, "unknown type '%s'%s%s%s (socks5, http, https, shadowsocks, "
                                  "trojan)", type, near ? ": did you mean '" : "",
                               near ? near : "", near ? "'?" : "");
    }
    }
    const char *e = check_keys(L, t, extra, nextra, type);
    if (e != NULL)
        return e;
    snprintf(p->name, sizeof(p->name), "%s", name);
    const char *server = opt_string(L, t, "server");
    if (server == NULL)
        return "needs a server (a name or an IP address)";
    lua_getfield(L, t, "port");
    int isnum;
    lua_Integer port = lua_tointegerx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum || port < 1 || port > 65535)
        return lua_pushfstring(L, "port %s: expected an integer 1..65535",
                               isnum ? lua_pushfstring(L, "%I", port) : "missing or not a number");
    if (flow_addr_from_host(&p->server, server, strlen(server), (uint16_t)port) != 0 ||
        (p->server.kind == FLOW_ADDR_NAME && !host_name_ok(server)))
        return lua_pushfstring(L, "server '%s' is not a name or an IP address", server);
    p->udp = opt_bool(L, t, "udp");
    if (p->tls || p->type == OUTBOUND_HTTP)
        p->tls = p->tls || opt_bool(L, t, "tls");
    const char *pe = read_pool(L, t, p);
    if (pe != NULL)
        return pe;
    const char *user = opt_string(L, t, "username"), *pass = opt_string(L, t, "password");
    const char *sni = opt_string(L, t, "sni");
    if (sni != NULL)
        snprintf(p->sni, sizeof(p->sni), "%s", sni);
    p->skip_cert_verify = opt_bool(L, t, "skip_cert_verify");
    const char *cae = p->tls || p->type == OUTBOUND_TROJAN ? read_ca(L, script_of(L), t, p) : NULL;
    if (cae != NULL)
        return cae;
    if (pass != NULL && strlen(pass) > 255)
        return "password: at most 255 bytes";
    if (user != NULL && (strlen(user) == 0 || strlen(user) > 255))
        return "username: 1..255 bytes";
    switch (p->type) {
    case OUTBOUND_SOCKS5:
    case OUTBOUND_HTTP:
        if ((user == NULL) != (pass == NULL))
            return "username and password go together";
        if (user != NULL) {
            snprintf(p->user, sizeof(p->user), "%s", user);
            snprintf(p->pass, sizeof(p->pass), "%s", pass);
        }
        break;
    case OUTBOUND_SHADOWSOCKS: {
        const char *cipher = opt_string(L, t, "cipher");
        if (cipher == NULL || pass == NULL)
            return "needs a cipher and a password";
        if (outbound_ss_setup(p, cipher, pass) != 0)
        {
            static const char *const ciphers[] = {"aes-128-gcm", "aes-256-gcm",
                                                  "chacha20-ietf-poly1305"};
            const char *near = script_suggest(cipher, ciphers, N(ciphers));
            return lua_pushfstring(L, "unknown cipher '%s'%s%s%s (aes-128-gcm, aes-256-gcm, "
                                      "chacha20-ietf-poly1305)", cipher,
                                   near ? ": did you mean '" : "", near ? near : "",
                                   near ? "'?" : "");
        }
        snprintf(p->pass, sizeof(p->pass), "%s", pass);
        p->udp = 1; /* Shadowsocks carries UDP unless the bundle says no */
        lua_getfield(L, t, "udp");
        if (lua_type(L, -1) == LUA_TBOOLEAN)
            p->udp = lua_toboolean(L, -1);
        lua_pop(L, 1);
        break;
    }
    case OUTBOUND_TROJAN:
        if (pass == NULL)
            return "needs a password";
        outbound_trojan_setup(p, pass);
        p->udp = 1; /* Trojan carries UDP unless the bundle says no */
        lua_getfield(L, t, "udp");
        if (lua_type(L, -1) == LUA_TBOOLEAN)
            p->udp = lua_toboolean(L, -1);
        lua_pop(L, 1);
        break;
    }
    return NULL;
}

/* Declares proxy |name| from the table at |t|: NULL, or the reason
 * (pushed, or static). The caller says where (a chute.proxy line, a
 * provider's entry). */
static const char names_msg[] = "names are 1..63 bytes";

const char *
script_proxy_add(lua_State *L, int t, const char *name, int *field)
{
    struct script *s = script_of(L);
    *field = 0;
    if (*name == '\0' || strlen(name) >= sizeof(((struct outbound_proxy *)0)->name))
        return names_msg;
    script_provider_yield(s, name);
    if (name_taken(L, s, name) != 0)
        return lua_tostring(L, -1); /* stays on the stack for the caller */
    if (s->nproxies >= MAX_POLICIES)
        return lua_pushfstring(L, "more than %d proxies", MAX_POLICIES);
    if (s->ngroups > 0 && strcmp(s->late_member, name) == 0)
        return lua_pushfstring(L, "declare proxies before groups (group \"%s\" at %s names it)",
                               s->late_group, s->late_where);
    if (s->ngroups > 0)
        return "declare proxies before groups";
    struct outbound_proxy *np = realloc(s->proxies, (s->nproxies + 1) * sizeof(*np));
    if (np == NULL)
        return "out of memory";
    s->proxies = np;
    struct outbound_proxy *p = &np[s->nproxies];
    memset(p, 0, sizeof(*p));
    const char *e = read_proxy(L, t, name, p);
    if (e != NULL) {
        tls_ctx_free(p->anchors);
        *field = 1;
        return e;
    }
    declared_at(L, p->where, sizeof(p->where));
    s->nproxies++;
    if (p->skip_cert_verify)
        LOG_WARN("%s: proxy %s: skip_cert_verify: its certificate is not checked; anyone on the "
                 "path can read and change its traffic", p->where, name);
    return NULL;
}

static int
l_proxy(lua_State *L)
{
    struct script *s = script_of(L);
    const char *name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (s->set != NULL)
        return fail_at(L, "chute.proxy \"%s\": proxies are declared while main.lua loads", name);
    int field;
    const char *e = script_proxy_add(L, 2, name, &field);
    if (e != NULL && field)
        return fail_decl(L, "proxy", name, e); /* the field's own line */
    if (e != NULL)
        return fail_at(L, "chute.proxy%s%s%s: %s", e == names_msg ? "" : " \"",
                       e == names_msg ? "" : name, e == names_msg ? "" : "\"", e);
    return 0;
}

static const char *
read_group(lua_State *L, struct script *s, int t, const char *name, struct outbound_group_cfg *g)
{
    static const struct field fields[] = {
        {"type", LUA_TSTRING},     {"proxies", LUA_TTABLE},  {"url", LUA_TSTRING},
        {"interval", LUA_TNUMBER}, {"timeout", LUA_TNUMBER}, {"tolerance", LUA_TNUMBER},
        {"selected", LUA_TSTRING}, {"use", LUA_TTABLE},
    };
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        const struct field *f = find_field(fields, N(fields), k);
        if (f == NULL) {
            static const char *const names[] = {"type", "proxies", "use", "url", "interval",
                                                "timeout", "tolerance", "selected"};
            const char *near = script_suggest(k, names, N(names));
            return lua_pushfstring(L, "unknown field '%s'%s%s%s (fields: type, proxies, use, url, "
                                      "interval, timeout, tolerance, selected)", k,
                                   near ? ": did you mean '" : "", near ? near : "",
                                   near ? "'?" : "");
        }
        if (lua_type(L, -1) != f->type) {
            /* interval and timeout are seconds, tolerance milliseconds. */
            const char *unit = strcmp(k, "tolerance") == 0 ? "milliseconds"
                               : f->type == LUA_TNUMBER     ? "seconds"
                                                            : NULL;
            lua_pushfstring(L, "field '%s'", k);
            return script_type_error(L, -2, lua_tostring(L, -1), lua_typename(L, f->type), unit);
        }
        lua_pop(L, 1);
    }
    snprintf(g->name, sizeof(g->name), "%s", name);
    const char *type = opt_string(L, t, "type");
    static const char *const types[] = {"select", "fallback", "url-test", "load-balance"};
    size_t i;
    for (i = 0; type != NULL && i < N(types); i++)
        if (strcmp(type, types[i]) == 0)
            break;
    if (type == NULL || i == N(types)) {
        const char *near = type ? script_suggest(type, types, N(types)) : NULL;
        return lua_pushfstring(L, "type %s%s%s: expected select, fallback, url-test or "
                                  "load-balance%s%s%s", type ? "'" : "", type ? type : "missing",
                               type ? "'" : "", near ? " (did you mean '" : "", near ? near : "",
                               near ? "'?)" : "");
    }
    g->type = (enum outbound_group_type)i;
    lua_getfield(L, t, "proxies");
    size_t n = lua_rawlen(L, -1);
    /* use = { "provider", ... }: its proxies follow the group's own. */
    size_t nuse = 0;
    const char *ue = script_group_use(L, s, t, &nuse);
    if (ue != NULL)
        return ue;
    lua_getfield(L, t, "use");
    int has_use = lua_rawlen(L, -1) > 0;
    lua_pop(L, 1);
    if (n == 0 && !has_use) {
        lua_pop(L, 1);
        return "proxies: a list of one or more policy names (or use = { \"provider\" })";
    }
    g->members = calloc(n + nuse + 1, sizeof(int));
    if (g->members == NULL)
        return "out of memory";
    for (size_t k = 0; k < n; k++) {
        lua_rawgeti(L, -1, (lua_Integer)k + 1);
        const char *m = lua_tostring(L, -1);
        int id = m ? script_policy_lookup(s, m) : -1;
        if (id >= FLOW_POLICY__BUILTIN + (int)s->nproxies)
            return lua_pushfstring(L, "proxies[%d]: '%s' is a group (declared at %s): a group's "
                                      "members are proxies, DIRECT and REJECT, not other groups",
                                   (int)k + 1, m,
                                   s->groups[id - FLOW_POLICY__BUILTIN - (int)s->nproxies].where);
        if (id < 0 && m == NULL)
            return lua_pushfstring(L, "proxies[%d]: expected a policy name, got %s", (int)k + 1,
                                   luaL_typename(L, -1));
        if (id < 0 && s->late_member[0] == '\0') {
            /* Said once main.lua has run, when every name is known. */
            snprintf(s->late_member, sizeof(s->late_member), "%s", m);
            snprintf(s->late_group, sizeof(s->late_group), "%s", name);
            declared_at(L, s->late_where, sizeof(s->late_where));
            s->late_index = (int)k + 1;
        }
        if (id < 0)
            id = FLOW_POLICY_REJECT; /* the load fails at its end */
        g->members[g->nmembers++] = id;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    g->nmembers += script_group_use_fill(L, s, t, g->members + g->nmembers);
    if (g->nmembers == 0) {
        /* Providers with nothing fetched yet: refuse, never leak to DIRECT. */
        g->members[g->nmembers++] = FLOW_POLICY_REJECT;
        LOG_WARN("chute.group \"%s\": its providers have no proxies yet: it rejects until "
                 "they do", name);
    }
    const char *url = opt_string(L, t, "url");
    if (url != NULL) {
        char err[160];
        if (outbound_set_check_url(url, err, sizeof(err)) != 0)
            return lua_pushfstring(L, "url: %s", err);
        snprintf(g->url, sizeof(g->url), "%s", url);
    } else if (g->type == OUTBOUND_GROUP_URL_TEST) {
        return "url-test needs a url to time (\"http://host/path\")";
    }
    lua_getfield(L, t, "interval");
    g->interval = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : (url ? 300 : 0);
    lua_getfield(L, t, "timeout");
    g->timeout = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 5;
    lua_getfield(L, t, "tolerance");
    g->tolerance = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 50;
    lua_pop(L, 3);
    if (!(g->interval >= 0 && g->interval <= 86400) || (g->interval > 0 && g->interval < 0.1))
        return "interval: seconds, 0.1..86400 (0: no checks)";
    if (!(g->timeout > 0 && g->timeout <= 60))
        return "timeout: seconds, > 0 and at most 60";
    if (!(g->tolerance >= 0 && g->tolerance <= 60000))
        return "tolerance: milliseconds, 0..60000";
    const char *sel = opt_string(L, t, "selected");
    if (sel != NULL) {
        if (g->type != OUTBOUND_GROUP_SELECT)
            return "selected: only select groups have a chosen member";
        int id = script_policy_lookup(s, sel);
        for (i = 0; i < g->nmembers && g->members[i] != id; i++)
            ;
        if (i == g->nmembers)
            return lua_pushfstring(L, "selected: '%s' is not one of the group's proxies", sel);
        g->selected = (int)i;
    }
    return NULL;
}

static int
l_group(lua_State *L)
{
    struct script *s = script_of(L);
    const char *name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (s->set != NULL)
        return fail_at(L, "chute.group \"%s\": groups are declared while main.lua loads", name);
    if (*name == '\0' || strlen(name) >= sizeof(((struct outbound_group_cfg *)0)->name))
        return fail_at(L, "chute.group: names are 1..63 bytes");
    script_provider_yield(s, name);
    if (name_taken(L, s, name) != 0)
        return fail_at(L, "chute.group \"%s\": %s", name, lua_tostring(L, -1));
    if (s->ngroups >= MAX_POLICIES)
        return fail_at(L, "chute.group: more than %d groups", MAX_POLICIES);
    struct outbound_group_cfg *ng = realloc(s->groups, (s->ngroups + 1) * sizeof(*ng));
    if (ng == NULL)
        return fail_at(L, "out of memory");
    s->groups = ng;
    struct outbound_group_cfg *g = &ng[s->ngroups];
    memset(g, 0, sizeof(*g));
    const char *e = read_group(L, s, 2, name, g);
    if (e != NULL) {
        free(g->members);
        return fail_decl(L, "group", name, e);
    }
    declared_at(L, g->where, sizeof(g->where));
    s->ngroups++;
    return 0;
}

/* chute.select(group, member): at load it sets the default; afterwards it
 * switches the running set. */
static int
l_select(lua_State *L)
{
    struct script *s = script_of(L);
    const char *group = luaL_checkstring(L, 1), *member = luaL_checkstring(L, 2);
    char err[256];
    if (s->set != NULL) {
        if (outbound_set_select(s->set, group, member, err, sizeof(err)) != 0)
            return luaL_error(L, "chute.select: %s", err);
        return 0;
    }
    for (size_t i = 0; i < s->ngroups; i++) {
        struct outbound_group_cfg *g = &s->groups[i];
        if (strcmp(g->name, group) != 0)
            continue;
        if (g->type != OUTBOUND_GROUP_SELECT)
            return luaL_error(L, "chute.select: '%s' is not a select group", group);
        int id = script_policy_lookup(s, member);
        for (size_t k = 0; k < g->nmembers; k++)
            if (g->members[k] == id) {
                g->selected = (int)k;
                return 0;
            }
        return luaL_error(L, "chute.select: group '%s' has no member '%s'", group, member);
    }
    return luaL_error(L, "chute.select: no group '%s'", group);
}

int
script_policy_lookup(const struct script *s, const char *name)
{
    if (strcmp(name, "DIRECT") == 0)
        return FLOW_POLICY_DIRECT;
    /* Surge's REJECT family: chute has one refusal (a reset, a SOCKS or
     * HTTP error), the nearest to each: REJECT-DROP (no answer at all) and
     * REJECT-NO-DROP (REJECT that never turns into dropping) refuse as
     * REJECT does, and REJECT-TINYGIF (a 1x1 GIF to HTTP) too. */
    if (strcmp(name, "REJECT") == 0 || strcmp(name, "REJECT-DROP") == 0 ||
        strcmp(name, "REJECT-NO-DROP") == 0 || strcmp(name, "REJECT-TINYGIF") == 0)
        return FLOW_POLICY_REJECT;
    if (s == NULL)
        return -1;
    if (s->set != NULL)
        return outbound_set_lookup(s->set, name);
    for (size_t i = 0; i < s->nproxies; i++)
        if (strcmp(s->proxies[i].name, name) == 0)
            return FLOW_POLICY__BUILTIN + (int)i;
    for (size_t i = 0; i < s->ngroups; i++)
        if (strcmp(s->groups[i].name, name) == 0)
            return FLOW_POLICY__BUILTIN + (int)(s->nproxies + i);
    return -1;
}

const char *
script_policy_name(const struct script *s, int policy)
{
    if (s != NULL && s->set != NULL)
        return outbound_set_name(s->set, policy);
    return flow_policy_name(policy);
}

/* A group member that named nothing when its group was declared. */
static int
late_member(struct script *s, char *err, size_t errlen)
{
    int id = script_policy_lookup(s, s->late_member);
    int n = snprintf(err, errlen, "%s: chute.group \"%s\": proxies[%d]: '%s' ", s->late_where,
                     s->late_group, s->late_index, s->late_member);
    size_t off = n < 0 ? 0 : (size_t)n < errlen ? (size_t)n : errlen - 1;
    if (id >= FLOW_POLICY__BUILTIN + (int)s->nproxies) {
        snprintf(err + off, errlen - off, "is a group declared later (at %s): a group's members "
                 "are proxies, DIRECT and REJECT, not other groups",
                 s->groups[id - FLOW_POLICY__BUILTIN - (int)s->nproxies].where);
        return -1;
    }
    char hint[160];
    script_policy_hint(s, s->late_member, hint, sizeof(hint));
    snprintf(err + off, errlen - off, "is not DIRECT, REJECT or a proxy declared above%s%s",
             hint[0] ? ": " : "", hint);
    return -1;
}

int
script_proxies_finish(struct script *s, char *err, size_t errlen)
{
    if (s->late_member[0] != '\0')
        return late_member(s, err, errlen);
    if (script_check_self_loops(s, s->proxies, s->nproxies, err, errlen) != 0)
        return -1;
    /* The set owns the arrays from here, even when it fails. */
    s->set = outbound_set_new(s->proxies, s->nproxies, s->groups, s->ngroups);
    s->proxies = NULL;
    s->groups = NULL;
    if (s->set == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void
script_proxies_free(struct script *s)
{
    if (s->set != NULL)
        outbound_set_unref(s->set);
    s->set = NULL;
    for (size_t i = 0; s->groups != NULL && i < s->ngroups; i++)
        free(s->groups[i].members);
    for (size_t i = 0; s->proxies != NULL && i < s->nproxies; i++)
        tls_ctx_free(s->proxies[i].anchors);
    free(s->proxies);
    free(s->groups);
    s->proxies = NULL;
    s->groups = NULL;
}

struct outbound_set *
script_outbound_set(const struct script *s)
{
    return s->set;
}

void
script_proxy_open(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"proxy", l_proxy},
        {"group", l_group},
        {"select", l_select},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}
