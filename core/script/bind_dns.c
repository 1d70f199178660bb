#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dns/dns.h"
#include "dns/msg.h"
#include "log/log.h"
#include "script/script_int.h"

/* dns = { ... } read into struct script_dns, and chute.on_dns(q). */

/* Names that keep real answers in fake-ip mode unless the bundle gives its
 * own list: local names, reverse zones, time servers and the connectivity
 * probes of the common systems (they must see the real network). */
static const char *const default_exclude[] = {
    "+.lan", "+.local", "+.localdomain", "+.home.arpa", "+.internal", "+.in-addr.arpa",
    "+.ip6.arpa", "+.ntp.org", "time.apple.com", "time.windows.com", "time.google.com",
    "+.time.edu.cn", "captive.apple.com", "connectivitycheck.gstatic.com",
    "connectivitycheck.android.com", "www.msftconnecttest.com", "www.msftncsi.com",
    "detectportal.firefox.com", "nmcheck.gnome.org", "network-test.debian.org",
    "+.stun.l.google.com",
};

/* "IP" (port 53) or "IP:PORT" / "[IPv6]:PORT". */
static int
parse_upstream(const char *text, struct sockaddr_storage *ss)
{
    socklen_t len;
    if (script_check_address(text, ss, &len) == 0)
        return 0;
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(53);
        return 0;
    }
    if (inet_pton(AF_INET6, text, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(53);
        return 0;
    }
    return -1;
}

int
script_l_check_upstream(lua_State *L)
{
    struct sockaddr_storage ss;
    const char *text = luaL_checkstring(L, 1);
    if (parse_upstream(text, &ss) != 0) {
        lua_pushfstring(L, "'%s' is not an IP or IP:PORT (\"192.0.2.53\", \"[2001:db8::53]:53\")",
                        text);
        return 1;
    }
    return 0;
}

int
script_l_check_range(lua_State *L)
{
    struct ip_cidr c;
    const char *text = luaL_checkstring(L, 1);
    int want = (int)luaL_checkinteger(L, 2);
    int max = want == 4 ? 30 : 126, min = want == 4 ? 8 : 8;
    if (ip_cidr_parse(text, &c) != 0 || c.family != (want == 4 ? AF_INET : AF_INET6) ||
        c.prefix < min || c.prefix > max || strchr(text, '/') == NULL) {
        lua_pushfstring(L, "'%s' is not an IPv%d network with a /%d../%d prefix", text, want, min,
                        max);
        return 1;
    }
    return 0;
}

/* The default state file: one per bundle folder, under the user's state
 * directory (root: /var/lib/chute), so two bundles never share one. */
static char *
default_state_file(const struct script *s)
{
    char dir[4096], path[4200];
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (geteuid() == 0)
        snprintf(dir, sizeof(dir), "/var/lib/chute");
    else if (xdg != NULL && xdg[0] == '/')
        snprintf(dir, sizeof(dir), "%s/chute", xdg);
    else if (home != NULL && home[0] == '/')
        snprintf(dir, sizeof(dir), "%s/.local/state/chute", home);
    else
        return NULL;
    char real[4096];
    const char *key = s->dir && realpath(s->dir, real) ? real : "-";
    uint32_t h = 2166136261u;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    /* mkdir -p of the last two levels; a failure shows when saving. */
    char parent[4096];
    snprintf(parent, sizeof(parent), "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
        *slash = '\0';
        mkdir(parent, 0700);
    }
    mkdir(dir, 0700);
    snprintf(path, sizeof(path), "%s/fakeip-%08x.txt", dir, h);
    return strdup(path);
}

static void
read_strings(lua_State *L, int t, const char *k, char ***out, size_t *n)
{
    if (lua_getfield(L, t, k) == LUA_TTABLE) {
        size_t len = lua_rawlen(L, -1);
        *out = calloc(len ? len : 1, sizeof(char *));
        for (size_t i = 0; *out != NULL && i < len; i++) {
            /* Checked at chute.config(), but the table may have changed since. */
            if (lua_rawgeti(L, -1, (lua_Integer)i + 1) == LUA_TSTRING) {
                char *v = strdup(lua_tostring(L, -1));
                if (v != NULL)
                    (*out)[(*n)++] = v;
            }
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

int
script_dns_read(struct script *s, int t, char *err, size_t errlen)
{
    lua_State *L = s->L;
    struct script_dns *d = &s->cfg.dns;
    d->mode = DNS_MODE_FAKE_IP;
    snprintf(d->range4, sizeof(d->range4), "198.18.0.0/15");
    d->fake_ttl = 1;
    d->timeout = 2.0;
    d->cache = 4096;
    d->hijack = 1;
    if (lua_getfield(L, t, "dns") != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int k = lua_gettop(L);
    d->enabled = 1;
    const char *v;
    if (lua_getfield(L, k, "mode") == LUA_TSTRING)
        d->mode = strcmp(lua_tostring(L, -1), "real-ip") == 0 ? DNS_MODE_REAL_IP : DNS_MODE_FAKE_IP;
    if (lua_getfield(L, k, "fake_ip_range") == LUA_TSTRING)
        snprintf(d->range4, sizeof(d->range4), "%s", lua_tostring(L, -1));
    if (lua_getfield(L, k, "fake_ip_range6") == LUA_TSTRING)
        snprintf(d->range6, sizeof(d->range6), "%s", lua_tostring(L, -1));
    if (lua_getfield(L, k, "fake_ip_ttl") == LUA_TNUMBER)
        d->fake_ttl = (uint32_t)lua_tointeger(L, -1);
    if (lua_getfield(L, k, "fake_ip_size") == LUA_TNUMBER)
        d->fake_max = (size_t)lua_tointeger(L, -1);
    if (lua_getfield(L, k, "timeout") == LUA_TNUMBER)
        d->timeout = lua_tonumber(L, -1);
    if (lua_getfield(L, k, "cache") == LUA_TNUMBER)
        d->cache = (size_t)lua_tointeger(L, -1);
    if (lua_getfield(L, k, "hijack") == LUA_TBOOLEAN)
        d->hijack = lua_toboolean(L, -1);
    lua_pop(L, 8);
    int persist = lua_getfield(L, k, "persist") != LUA_TBOOLEAN || lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, k, "state_file") == LUA_TSTRING) {
        v = lua_tostring(L, -1);
        char path[4200];
        if (v[0] != '/' && s->dir != NULL)
            snprintf(path, sizeof(path), "%s/%s", s->dir, v); /* relative to the bundle */
        else
            snprintf(path, sizeof(path), "%s", v);
        d->state_file = persist ? strdup(path) : NULL;
    } else if (persist && d->mode == DNS_MODE_FAKE_IP) {
        d->state_file = default_state_file(s);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, k, "listen") == LUA_TSTRING) {
        socklen_t len;
        d->has_listen = script_check_address(lua_tostring(L, -1), &d->listen, &len) == 0;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, k, "upstream") == LUA_TTABLE) {
        size_t n = lua_rawlen(L, -1);
        for (size_t i = 0; i < n && d->nupstream < SCRIPT_DNS_MAX_UPSTREAMS; i++) {
            if (lua_rawgeti(L, -1, (lua_Integer)i + 1) == LUA_TSTRING &&
                parse_upstream(lua_tostring(L, -1), &d->upstream[d->nupstream]) == 0)
                d->nupstream++;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    read_strings(L, k, "exclude", &d->exclude, &d->nexclude);
    if (d->exclude == NULL) {
        size_t n = sizeof(default_exclude) / sizeof(default_exclude[0]);
        d->exclude = calloc(n, sizeof(char *));
        for (size_t i = 0; d->exclude != NULL && i < n; i++)
            d->exclude[d->nexclude++] = strdup(default_exclude[i]);
    }
    lua_pop(L, 1);
    (void)err, (void)errlen;
    return 0;
}

void
script_dns_free(struct script_dns *d)
{
    for (size_t i = 0; i < d->nexclude; i++)
        free(d->exclude[i]);
    free(d->exclude);
    free(d->state_file);
    d->exclude = NULL;
    d->state_file = NULL;
    d->nexclude = 0;
}

/* ---- chute.on_dns ---- */

int
script_has_on_dns(const struct script *s)
{
    return s->on_dns_ref != LUA_NOREF && s->on_dns_ref != LUA_REFNIL;
}

static int
add_addr(struct dns_hook_result *out, const char *text)
{
    uint8_t ip[16];
    if (inet_pton(AF_INET, text, ip) == 1) {
        if (out->n4 < DNS_HOOK_MAX_ADDRS)
            memcpy(out->v4[out->n4++], ip, 4);
        return 0;
    }
    if (inet_pton(AF_INET6, text, ip) == 1) {
        if (out->n6 < DNS_HOOK_MAX_ADDRS)
            memcpy(out->v6[out->n6++], ip, 16);
        return 0;
    }
    return -1;
}

/* Reads the hook's answer at the top of the stack. Returns an error text
 * or NULL. */
static const char *
read_answer(lua_State *L, struct dns_hook_result *out)
{
    int t = lua_type(L, -1);
    if (t == LUA_TNIL)
        return NULL;
    if (t == LUA_TBOOLEAN) {
        if (!lua_toboolean(L, -1))
            out->action = DNS_HOOK_BLOCK;
        return NULL;
    }
    if (t == LUA_TSTRING) {
        const char *v = lua_tostring(L, -1);
        if (strcmp(v, "nxdomain") == 0 || strcmp(v, "NXDOMAIN") == 0 || strcmp(v, "block") == 0) {
            out->action = DNS_HOOK_BLOCK;
            return NULL;
        }
        if (strcmp(v, "real") == 0 || strcmp(v, "real-ip") == 0) {
            out->action = DNS_HOOK_REAL;
            return NULL;
        }
        out->action = DNS_HOOK_ADDRS;
        return add_addr(out, v) == 0 ? NULL
                                     : "expected nil, false, \"nxdomain\", \"real\", an address or "
                                       "a list of addresses";
    }
    if (t == LUA_TTABLE) {
        out->action = DNS_HOOK_ADDRS;
        size_t n = lua_rawlen(L, -1);
        for (size_t i = 0; i < n; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            const char *v = lua_tostring(L, -1);
            int bad = v == NULL || add_addr(out, v) != 0;
            lua_pop(L, 1);
            if (bad)
                return "a list of IP address strings expected";
        }
        return NULL;
    }
    return "expected nil, false, \"nxdomain\", \"real\", an address or a list of addresses";
}

struct dns_call {
    const char *name;
    uint16_t qtype;
    struct dns_hook_result *out;
};

/* Runs under script_protected: the pushes below may raise at the cap. */
static int
on_dns_protected(lua_State *L)
{
    struct script *s = script_of(L);
    struct dns_call *c = lua_touserdata(L, 1);
    const char *name = c->name;
    uint16_t qtype = c->qtype;
    struct dns_hook_result *out = c->out;
    int top = lua_gettop(L);
    char tbuf[16];
    lua_pushcfunction(L, script_msgh);
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->on_dns_ref);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, dns_type_name(qtype, tbuf, sizeof(tbuf)));
    lua_setfield(L, -2, "type");
    script_budget_arm(s, s->cfg.budget);
    int rc = lua_pcall(L, 1, 1, top + 1);
    script_budget_disarm(s);
    const char *e = rc == LUA_OK ? read_answer(L, out) : lua_tostring(L, -1);
    if (e != NULL) {
        memset(out, 0, sizeof(*out));
        if (rc == LUA_OK) {
            lua_Debug ar;
            const char *got = luaL_typename(L, -1);
            lua_rawgeti(L, LUA_REGISTRYINDEX, s->on_dns_ref);
            lua_getinfo(L, ">S", &ar);
            LOG_WARN("dns %s: %s:%d: on_dns returned a %s: %s; answering as usual", name,
                     ar.short_src, ar.linedefined, got, e);
        } else {
            LOG_WARN("dns %s: on_dns failed: %s; answering as usual", name, e);
        }
    }
    lua_settop(L, top);
    return 0;
}

void
script_on_dns(struct script *s, const char *name, uint16_t qtype, struct dns_hook_result *out)
{
    memset(out, 0, sizeof(*out));
    if (!script_has_on_dns(s))
        return;
    struct dns_call c = {name, qtype, out};
    if (script_protected(s, on_dns_protected, &c) != LUA_OK) {
        memset(out, 0, sizeof(*out));
        LOG_WARN("dns %s: on_dns could not run: %s; answering as usual", name, s->protect_err);
    }
}
