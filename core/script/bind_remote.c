#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/fetch.h"
#include "fetch/sub.h"
#include "log/log.h"
#include "outbound/proxy.h"
#include "outbound/set.h"
#include "rules/list.h"
#include "rules/re.h"
#include "script/geo.h"
#include "script/script_int.h"

/* chute.provider "name" { url = ... } and chute.ruleset { url = ... }:
 * remote lists the engine fetches in the background (core/fetch). At
 * load they come from their cache in chute's state folder, never from
 * the network: a first start has none yet and says so; the provider's
 * proxies (named as the subscription names them) join the bundle's, and
 * groups take them with use = { "name" }. */

#define MAX_SKIPS_LOGGED 10

struct script_provider {
    char name[64];
    size_t first, n; /* its proxies: s->proxies[first .. first + n) */
};

static const char *const remote_keys[] = {"url", "interval", "via", "path", "max_size"};

/* Reads the keys every remote has into |c|; |extra| are the caller's own
 * (checked by it). NULL, or the reason (pushed or static). */
static const char *
read_remote(lua_State *L, int t, int level, const char *const *extra, size_t nextra,
            struct fetch_item_cfg *c, const char **path)
{
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int remote = 0, known = 0;
        for (size_t i = 0; i < sizeof(remote_keys) / sizeof(remote_keys[0]); i++)
            remote |= strcmp(k, remote_keys[i]) == 0;
        for (size_t i = 0; i < nextra; i++)
            known |= strcmp(k, extra[i]) == 0;
        if (!remote && !known) {
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            lua_pushfstring(L, "unknown field '%s' (fields: url, interval, via, path, max_size", k);
            luaL_addvalue(&b);
            for (size_t i = 0; i < nextra; i++) {
                luaL_addstring(&b, ", ");
                luaL_addstring(&b, extra[i]);
            }
            luaL_addstring(&b, ")");
            luaL_pushresult(&b);
            return lua_tostring(L, -1);
        }
        /* the caller checks its own keys' types */
        int want = strcmp(k, "interval") == 0 || strcmp(k, "max_size") == 0 ? LUA_TNUMBER
                                                                            : LUA_TSTRING;
        if (remote && lua_type(L, -1) != want)
            return lua_pushfstring(L, "field '%s': expected %s, got %s", k, lua_typename(L, want),
                                   luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    lua_getfield(L, t, "url");
    const char *url = lua_tostring(L, -1);
    lua_pop(L, 1);
    char err[200];
    struct fetch_url u;
    if (url == NULL)
        return "needs a url (\"https://host/list\")";
    if (fetch_url_parse(url, &u, err, sizeof(err)) != 0)
        return lua_pushfstring(L, "%s", err);
    if (strlen(url) >= sizeof(c->url))
        return "url: too long";
    snprintf(c->url, sizeof(c->url), "%s", url);
    lua_getfield(L, t, "interval");
    if (!lua_isnil(L, -1)) {
        lua_Number v = lua_tonumber(L, -1);
        if (!(v >= 1 && v <= 30 * 86400))
            return "interval: seconds, 1..2592000";
        c->interval = (double)v;
    }
    lua_getfield(L, t, "max_size");
    if (!lua_isnil(L, -1)) {
        int isint;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || v < 1024 || v > (lua_Integer)(256u << 20))
            return "max_size: bytes, an integer 1024..268435456";
        c->max_bytes = (size_t)v;
    }
    lua_getfield(L, t, "via");
    snprintf(c->via, sizeof(c->via), "%s", lua_isnil(L, -1) ? "DIRECT" : lua_tostring(L, -1));
    lua_getfield(L, t, "path");
    *path = lua_tostring(L, -1); /* referenced by the table */
    lua_pop(L, 4);
    luaL_where(L, level);
    snprintf(c->where, sizeof(c->where), "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    size_t n = strlen(c->where);
    while (n > 0 && (c->where[n - 1] == ' ' || c->where[n - 1] == ':'))
        c->where[--n] = '\0';
    return NULL;
}

static void
remote_add(lua_State *L, struct script *s, const struct fetch_item_cfg *c)
{
    for (size_t i = 0; i < s->nremotes; i++)
        if (strcmp(s->remotes[i].path, c->path) == 0) {
            lua_pushfstring(L, "%s: cache %s is also %s's (declared at %s): give one a path = ...",
                            c->where, c->path, s->remotes[i].name, s->remotes[i].where);
            lua_error(L);
        }
    struct fetch_item_cfg *n = realloc(s->remotes, (s->nremotes + 1) * sizeof(*n));
    if (n == NULL)
        luaL_error(L, "out of memory");
    s->remotes = n;
    s->remotes[s->nremotes++] = *c;
}

/* The cache at load: NULL (and a warning) when there is none or it cannot
 * be read; the caller frees it. */
static char *
read_cache(const struct fetch_item_cfg *c, const char *what, size_t *len)
{
    char why[4300];
    char *buf = fetch_cache_read(c->path, c->max_bytes, len, why, sizeof(why));
    if (buf == NULL && errno == ENOENT)
        LOG_WARN("%s: %s %s: no cache yet (%s): %s until the first fetch", c->where, what,
                 c->name, c->path, strcmp(what, "provider") == 0 ? "no proxies" : "empty");
    else if (buf == NULL)
        LOG_WARN("%s: %s %s: cache unreadable: %s; %s until the next fetch", c->where, what,
                 c->name, why, strcmp(what, "provider") == 0 ? "no proxies" : "empty");
    return buf;
}

unsigned long long
script_url_hash(const char *s)
{
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* chute.ruleset { url = ..., format = ..., interval = 86400, via = "DIRECT",
 * path = ..., max_size = ..., skip_invalid = ..., strict = ... } */
int
script_l_ruleset_remote(lua_State *L)
{
    static const char *const extra[] = {"format", "skip_invalid", "strict"};
    struct script *s = script_of(L);
    struct fetch_item_cfg c = {.kind = FETCH_RULESET, .interval = 86400,
                               .max_bytes = FETCH_DEFAULT_MAX_BYTES};
    const char *path = NULL, *fmt_name = "auto";
    if (s->loaded)
        return luaL_error(L, "chute.ruleset { url = ... }: remote rule sets are declared while "
                             "main.lua loads");
    const char *e = read_remote(L, 1, 1, extra, 3, &c, &path);
    if (e != NULL)
        return luaL_error(L, "chute.ruleset { url = ... }: %s", e);
    lua_getfield(L, 1, "format");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "chute.ruleset: field 'format': expected string");
    if (lua_type(L, -1) == LUA_TSTRING)
        fmt_name = lua_tostring(L, -1);
    lua_getfield(L, 1, "skip_invalid");
    c.skip_invalid = lua_toboolean(L, -1);
    lua_getfield(L, 1, "strict");
    c.strict = lua_toboolean(L, -1);
    lua_pop(L, 2); /* format stays on the stack: fmt_name points into it */
    c.format = rules_format_parse(fmt_name);
    if (c.format < 0)
        return luaL_error(L, "chute.ruleset: unknown format '%s'", fmt_name);
    if (path != NULL)
        snprintf(c.name, sizeof(c.name), "%s", path);
    else
        fetch_url_shown(c.url, c.name, sizeof(c.name));
    char id[32], err[300];
    snprintf(id, sizeof(id), "%016llx", script_url_hash(c.url));
    if (fetch_cache_path(path, "ruleset", id, c.path, sizeof(c.path), err, sizeof(err)) != 0)
        return luaL_error(L, "chute.ruleset { url = ... }: %s", err);
    remote_add(L, s, &c);
    size_t len = 0;
    char *buf = read_cache(&c, "ruleset", &len);
    int rc = script_ruleset_push_text(L, c.name, buf, len, c.format, c.skip_invalid, c.strict,
                                      err, sizeof(err));
    free(buf);
    s->remotes[s->nremotes - 1].count = (size_t)luaL_len(L, -1);
    if (rc != 0)
        LOG_WARN("%s: ruleset %s: its cache does not parse (%s): empty until the next fetch",
                 c.where, c.name, err);
    return 1;
}

/* ---- providers ------------------------------------------------------------ */

struct collect {
    struct outbound_uri *v;
    size_t n, cap;
    size_t skipped;
    const struct fetch_item_cfg *c;
};

static void
on_proxy(void *arg, const struct outbound_uri *p, unsigned line)
{
    struct collect *k = arg;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        struct outbound_uri *nv = cap <= 65536 ? realloc(k->v, cap * sizeof(*nv)) : NULL;
        if (nv == NULL) {
            k->skipped++;
            return;
        }
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = *p;
}

static void
on_skip(void *arg, unsigned line, const char *why)
{
    struct collect *k = arg;
    if (k->c != NULL && k->skipped < MAX_SKIPS_LOGGED)
        LOG_WARN("%s: provider %s: line %u: %s; left out", k->c->where, k->c->name, line, why);
    k->skipped++;
}

/* "name", "name 2", "name 3", ... until one is free. */
static void
unique_name(struct script *s, const struct outbound_uri *u, char *out, size_t n)
{
    char base[64];
    if (u->name[0] != '\0')
        snprintf(base, sizeof(base), "%s", u->name);
    else
        snprintf(base, sizeof(base), "%.48s:%u", u->server, u->port);
    snprintf(out, n, "%s", base);
    for (int i = 2; script_policy_lookup(s, out) >= 0 && i < 10000; i++) {
        size_t keep = strlen(base);
        if (keep > n - 8)
            keep = n - 8;
        while (keep > 0 && ((unsigned char)base[keep] & 0xc0) == 0x80)
            keep--; /* no UTF-8 sequence cut in two */
        snprintf(out, n, "%.*s %d", (int)keep, base, i);
    }
}

static void
set_str(lua_State *L, const char *k, const char *v)
{
    if (v[0] == '\0')
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

/* The proxy's fields as the table chute.proxy takes. */
static void
push_fields(lua_State *L, const struct outbound_uri *u)
{
    int tls_kind = strcmp(u->type, "trojan") == 0 || strcmp(u->type, "https") == 0;
    lua_createtable(L, 0, 10);
    set_str(L, "type", u->type);
    set_str(L, "server", u->server);
    lua_pushinteger(L, u->port);
    lua_setfield(L, -2, "port");
    if (strcmp(u->type, "shadowsocks") == 0)
        set_str(L, "cipher", u->cipher);
    set_str(L, "password", u->pass);
    if (strcmp(u->type, "socks5") == 0 || strncmp(u->type, "http", 4) == 0)
        set_str(L, "username", u->user);
    if (tls_kind) {
        set_str(L, "sni", u->sni);
        if (u->skip_cert_verify) {
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, "skip_cert_verify");
        }
    }
    if (u->udp >= 0) {
        lua_pushboolean(L, u->udp);
        lua_setfield(L, -2, "udp");
    }
}

/* Decodes |buf| and keeps the entries |filter| (may be NULL) matches, in a
 * userdata on the stack (so a Lua error frees them): their count. */
static size_t
decode_kept(lua_State *L, const struct fetch_item_cfg *c, const char *buf, size_t len,
            const char *filter, struct outbound_uri **out)
{
    struct collect k = {.c = c};
    struct fetch_sub_ops ops = {on_proxy, on_skip};
    char err[400], rerr[200];
    enum fetch_sub_format fmt = FETCH_SUB_LINES;
    long got = buf ? fetch_sub_decode(buf, len, &ops, &k, &fmt, err, sizeof(err)) : 0;
    if (got < 0)
        LOG_WARN("%s: provider %s: its cache does not decode (%s): no proxies until the next "
                 "fetch", c->where, c->name, err);
    struct rules_re *re = filter ? rules_re_new(filter, strlen(filter), 0, rerr, sizeof(rerr))
                                 : NULL;
    size_t kept = 0, dropped = 0;
    for (size_t i = 0; i < k.n; i++) {
        if (re != NULL && rules_re_match(re, k.v[i].name, strlen(k.v[i].name), NULL, 0) < 0) {
            dropped++;
            continue;
        }
        k.v[kept++] = k.v[i];
    }
    rules_re_free(re);
    struct outbound_uri *ud = lua_newuserdatauv(L, (kept ? kept : 1) * sizeof(*ud), 0);
    if (kept > 0)
        memcpy(ud, k.v, kept * sizeof(*ud));
    free(k.v);
    if (k.skipped > MAX_SKIPS_LOGGED)
        LOG_WARN("%s: provider %s: %zu entries left out in all (the first %d are above)",
                 c->where, c->name, k.skipped, MAX_SKIPS_LOGGED);
    if (got >= 0 && buf != NULL && dropped > 0)
        LOG_INFO("%s: provider %s: %zu proxies from its cache (%s), %zu left out by its filter",
                 c->where, c->name, kept, fetch_sub_format_name(fmt), dropped);
    else if (got >= 0 && buf != NULL)
        LOG_INFO("%s: provider %s: %zu proxies from its cache (%s)", c->where, c->name, kept,
                 fetch_sub_format_name(fmt));
    *out = ud;
    return kept;
}

/* An error at the user's line: chute.provider is called through a Lua
 * wrapper (lua/chute.lua), one level further up than luaL_error looks. */
static int __attribute__((format(printf, 2, 3)))
fail2(lua_State *L, const char *fmt, ...)
{
    va_list ap;
    luaL_where(L, 2);
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}

int
script_l_provider(lua_State *L)
{
    static const char *const extra[] = {"filter"};
    struct script *s = script_of(L);
    const char *name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    struct fetch_item_cfg c = {.kind = FETCH_PROVIDER, .interval = 3600,
                               .max_bytes = FETCH_DEFAULT_MAX_BYTES};
    const char *path = NULL;
    if (s->set != NULL || s->loaded)
        return fail2(L, "chute.provider \"%s\": providers are declared while main.lua "
                             "loads", name);
    if (*name == '\0' || strlen(name) >= sizeof(((struct script_provider *)0)->name))
        return fail2(L, "chute.provider: names are 1..63 bytes");
    for (size_t i = 0; i < s->nproviders; i++)
        if (strcmp(s->providers[i].name, name) == 0)
            return fail2(L, "chute.provider \"%s\": the name is taken", name);
    if (s->ngroups > 0)
        return fail2(L, "chute.provider \"%s\": declare providers before groups", name);
    const char *e = read_remote(L, 2, 2, extra, 1, &c, &path);
    if (e != NULL)
        return fail2(L, "chute.provider \"%s\": %s", name, e);
    lua_getfield(L, 2, "filter");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
        return fail2(L, "chute.provider \"%s\": field 'filter': expected a regular "
                             "expression string", name);
    const char *filter = lua_tostring(L, -1);
    char err[300];
    if (filter != NULL) {
        struct rules_re *re = rules_re_new(filter, strlen(filter), 0, err, sizeof(err));
        if (re == NULL)
            return fail2(L, "chute.provider \"%s\": filter: %s", name, err);
        rules_re_free(re);
    }
    snprintf(c.name, sizeof(c.name), "%s", name);
    if (fetch_cache_path(path, "provider", name, c.path, sizeof(c.path), err, sizeof(err)) != 0)
        return fail2(L, "chute.provider \"%s\": %s", name, err);
    struct script_provider *np = realloc(s->providers, (s->nproviders + 1) * sizeof(*np));
    if (np == NULL)
        return fail2(L, "out of memory");
    s->providers = np;
    remote_add(L, s, &c);
    struct script_provider *p = &s->providers[s->nproviders++];
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->first = s->nproxies;
    p->n = 0;
    size_t len = 0;
    char *buf = read_cache(&c, "provider", &len);
    struct outbound_uri *v;
    size_t n = decode_kept(L, &c, buf, len, filter, &v);
    free(buf);
    int at = lua_gettop(L); /* the userdata holding v */
    for (size_t i = 0; i < n; i++) {
        char pname[64];
        unique_name(s, &v[i], pname, sizeof(pname));
        if (strcmp(pname, v[i].name) != 0 && v[i].name[0] != '\0')
            LOG_INFO("%s: provider %s: '%s' is taken: this one is '%s'", c.where, name, v[i].name,
                     pname);
        push_fields(L, &v[i]);
        int field;
        const char *pe = script_proxy_add(L, lua_gettop(L), pname, &field);
        if (pe != NULL)
            LOG_WARN("%s: provider %s: proxy '%s': %s; left out", c.where, name, pname, pe);
        lua_settop(L, at);
    }
    p->n = s->nproxies - p->first;
    for (size_t i = 0; i < s->nremotes; i++)
        if (s->remotes[i].kind == FETCH_PROVIDER && strcmp(s->remotes[i].name, name) == 0)
            s->remotes[i].count = p->n;
    return 0;
}

const char *
script_provider_proxy(const struct script *s, const char *provider, size_t k)
{
    for (size_t i = 0; i < s->nproviders; i++)
        if (strcmp(s->providers[i].name, provider) == 0)
        {
            if (k >= s->providers[i].n)
                return NULL;
            size_t at = s->providers[i].first + k;
            /* After the load the set owns the proxies, in declaration order. */
            return s->set != NULL ? outbound_set_name(s->set, FLOW_POLICY__BUILTIN + (int)at)
                                  : s->proxies[at].name;
        }
    return NULL;
}

/* The bundle declares |name| (a proxy or a group) after a provider gave
 * one of its proxies that name: the provider's proxy, whose name is
 * chute's choice, moves aside ("name 2"), so a subscription that grows a
 * node named like the bundle's own group never breaks the bundle. */
void
script_provider_yield(struct script *s, const char *name)
{
    for (size_t i = 0; i < s->nproviders; i++) {
        const struct script_provider *p = &s->providers[i];
        for (size_t k = p->first; k < p->first + p->n; k++) {
            struct outbound_proxy *x = &s->proxies[k];
            if (strcmp(x->name, name) != 0)
                continue;
            struct outbound_uri u = {0};
            char moved[64];
            snprintf(u.name, sizeof(u.name), "%s", name);
            unique_name(s, &u, moved, sizeof(moved));
            LOG_INFO("%s: provider %s: its proxy '%s' is now '%s': the bundle declares '%s'",
                     x->where, p->name, name, moved, name);
            snprintf(x->name, sizeof(x->name), "%s", moved);
            return;
        }
    }
}

/* ---- groups' use = { ... } -------------------------------------------- */

static const struct script_provider *
provider(const struct script *s, const char *name)
{
    for (size_t i = 0; i < s->nproviders; i++)
        if (strcmp(s->providers[i].name, name) == 0)
            return &s->providers[i];
    return NULL;
}

const char *
script_group_use(lua_State *L, struct script *s, int t, size_t *count)
{
    *count = 0;
    lua_getfield(L, t, "use");
    int u = lua_gettop(L);
    size_t n = lua_istable(L, u) ? lua_rawlen(L, u) : 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, u, (lua_Integer)i);
        const char *name = lua_tostring(L, -1);
        const struct script_provider *p = name ? provider(s, name) : NULL;
        if (p == NULL)
            return lua_pushfstring(L, "use[%d]: '%s' is not a provider declared above",
                                   (int)i, name ? name : luaL_typename(L, -1));
        *count += p->n;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return NULL;
}

size_t
script_group_use_fill(lua_State *L, struct script *s, int t, int *out)
{
    size_t k = 0;
    lua_getfield(L, t, "use");
    size_t n = lua_istable(L, -1) ? lua_rawlen(L, -1) : 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        const struct script_provider *p = provider(s, lua_tostring(L, -1));
        for (size_t j = 0; p != NULL && j < p->n; j++)
            out[k++] = FLOW_POLICY__BUILTIN + (int)(p->first + j);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return k;
}

/* ---- after the load, and for the engine ----------------------------------- */

int
script_remotes_finish(struct script *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->nremotes; i++)
        if (script_policy_lookup(s, s->remotes[i].via) < 0) {
            snprintf(err, errlen, "%s: %s %s: via '%s' is not a policy of the bundle (DIRECT, "
                     "a proxy or a group)", s->remotes[i].where,
                     s->remotes[i].kind == FETCH_RULESET ? "ruleset"
                     : s->remotes[i].kind == FETCH_GEO   ? "chute.config"
                                                         : "provider",
                     s->remotes[i].name, s->remotes[i].via);
            return -1;
        }
    return 0;
}

void
script_remotes_free(struct script *s)
{
    free(s->remotes);
    free(s->providers);
    s->remotes = NULL;
    s->providers = NULL;
    s->nremotes = s->nproviders = 0;
}

const struct fetch_item_cfg *
script_remotes(const struct script *s, size_t *n)
{
    *n = s->nremotes;
    return s->remotes;
}

static void
count_proxy(void *arg, const struct outbound_uri *p, unsigned line)
{
}

static void
count_skip(void *arg, unsigned line, const char *why)
{
    ++*(size_t *)arg;
}

int
script_remote_validate(const struct fetch_item_cfg *c, const char *buf, size_t len, char *note,
                       size_t notelen)
{
    if (c->kind == FETCH_GEO)
        return script_geo_validate(c, buf, len, note, notelen);
    if (c->kind == FETCH_RULESET) {
        size_t count = 0;
        char err[300];
        if (script_ruleset_check(c->name, buf, len, c->format, c->skip_invalid, c->strict,
                                 &count, err, sizeof(err)) != 0) {
            snprintf(note, notelen, "the list does not parse: %s", err);
            return -1;
        }
        snprintf(note, notelen, "%zu rules", count);
        return 0;
    }
    size_t skipped = 0;
    struct fetch_sub_ops ops = {count_proxy, count_skip};
    enum fetch_sub_format fmt;
    char err[300];
    long n = fetch_sub_decode(buf, len, &ops, &skipped, &fmt, err, sizeof(err));
    if (n < 0) {
        snprintf(note, notelen, "%s", err);
        return -1;
    }
    if (skipped > 0)
        snprintf(note, notelen, "%ld proxies (%s), %zu entries chute cannot use", n,
                 fetch_sub_format_name(fmt), skipped);
    else
        snprintf(note, notelen, "%ld proxies (%s)", n, fetch_sub_format_name(fmt));
    return 0;
}
