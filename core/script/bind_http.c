/* chute.on_request / chute.on_response: hooks on decrypted MITM traffic,
 * registered while main.lua loads, each with a URL pattern compiled here
 * (PCRE2, rules/re.h) so the MITM asks C, not Lua, whether a request is
 * wanted. And chute.respond / redirect / reject, whose results a request
 * hook returns to answer locally: a table with a private metatable that
 * holds the answer already checked and rendered, so a mistake is an error
 * at the line that made it, and hooks.c only copies it into the arena. */

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "rules/re.h"
#include "script/hint.h"
#include "script/script_int.h"

#define DEFAULT_MAX_BODY (128u << 10)
#define MAX_MAX_BODY (16u << 20)

/* RFC 9110 tchar. */
static int
is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int
script_http_token_ok(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)p[i]))
            return 0;
    return 1;
}

int
script_http_value_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

/* opts.method: "GET" or { "GET", "HEAD" }. */
static void
read_methods(lua_State *L, int opts, const char *fn, struct script_hook *h)
{
    int t = lua_getfield(L, opts, "method");
    size_t n = 0;
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (t == LUA_TSTRING) {
        lua_newtable(L);
        lua_insert(L, -2);
        lua_rawseti(L, -2, 1);
    } else if (t != LUA_TTABLE) {
        luaL_error(L, "%s: opts.method: expected a string or a list of strings, got %s", fn,
                   script_got(L, -1));
    }
    for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
        size_t len = 0;
        const char *m = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (m == NULL || !script_http_token_ok(m, len) || len >= sizeof(h->methods[0]))
            luaL_error(L, "%s: opts.method[%d]: expected a method name (\"GET\", \"POST\")", fn,
                       (int)i);
        if (n == SCRIPT_HOOK_METHODS)
            luaL_error(L, "%s: opts.method: at most %d methods", fn, SCRIPT_HOOK_METHODS);
        memcpy(h->methods[n++], m, len + 1);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
}

static void
read_opts(lua_State *L, int opts, const char *fn, struct script_hook *h)
{
    if (lua_isnoneornil(L, opts))
        return;
    luaL_checktype(L, opts, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, opts)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (k == NULL || (strcmp(k, "body") != 0 && strcmp(k, "max_body") != 0 &&
                          strcmp(k, "method") != 0))
            luaL_error(L, "%s: unknown option '%s' (options: body, max_body, method)", fn,
                       k ? k : luaL_typename(L, -2));
        lua_pop(L, 1);
    }
    int t = lua_getfield(L, opts, "body");
    if (t != LUA_TNIL && t != LUA_TBOOLEAN)
        luaL_error(L, "%s: opts.body: expected a boolean, got %s", fn, script_got(L, -1));
    h->body = lua_toboolean(L, -1);
    lua_pop(L, 1);
    t = lua_getfield(L, opts, "max_body");
    if (t != LUA_TNIL) {
        int isint;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || v < 1 || v > (lua_Integer)MAX_MAX_BODY)
            luaL_error(L, "%s: opts.max_body: expected an integer 1..%d (bytes)", fn,
                       (int)MAX_MAX_BODY);
        h->max_body = (size_t)v;
    }
    lua_pop(L, 1);
    read_methods(L, opts, fn, h);
}

/* chute.on_request(pattern, fn [, opts]) and on_response: the hook goes
 * on the list before its function is referenced, so whatever raises
 * after the compile leaves nothing to leak (script_hooks_free frees it). */
static int
register_hook(lua_State *L, int response)
{
    struct script *s = script_of(L);
    const char *fn = response ? "chute.on_response" : "chute.on_request";
    size_t plen;
    const char *pat = luaL_checklstring(L, 1, &plen);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    if (s->loaded)
        return luaL_error(L, "%s: hooks are registered while main.lua loads", fn);
    struct script_hook h = {0};
    h.fn_ref = LUA_NOREF;
    read_opts(L, 3, fn, &h);
    lua_Debug ar;
    lua_pushvalue(L, 2);
    lua_getinfo(L, ">S", &ar);
    snprintf(h.where, sizeof(h.where), "%s:%d", ar.short_src, ar.linedefined);

    struct script_hook **list = response ? &s->resp_hooks : &s->req_hooks;
    size_t *n = response ? &s->nresp_hooks : &s->nreq_hooks;
    struct script_hook *grown = realloc(*list, (*n + 1) * sizeof(**list));
    if (grown == NULL)
        return luaL_error(L, "%s: out of memory", fn);
    *list = grown;
    char err[160];
    h.re = rules_re_new(pat, plen, 0, err, sizeof(err));
    if (h.re == NULL)
        return luaL_error(L, "%s: bad pattern \"%s\": %s", fn, pat, err);
    grown[(*n)++] = h;
    lua_pushvalue(L, 2);
    grown[*n - 1].fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

int
script_l_on_request(lua_State *L)
{
    return register_hook(L, 0);
}

int
script_l_on_response(lua_State *L)
{
    return register_hook(L, 1);
}

/* ---- local answers --------------------------------------------------- */

static int
framing_name(const char *n)
{
    return strcasecmp(n, "content-length") == 0 || strcasecmp(n, "transfer-encoding") == 0 ||
           strcasecmp(n, "connection") == 0;
}

static int
cmp_names(const void *a, const void *b)
{
    return strcasecmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends "name: v\r\n" for the value at |vidx| to the string at |acc|. */
static void
add_line(lua_State *L, int acc, const char *fn, const char *name, int vidx)
{
    size_t len = 0;
    const char *v = lua_type(L, vidx) == LUA_TSTRING || lua_type(L, vidx) == LUA_TNUMBER
                        ? lua_tolstring(L, vidx, &len)
                        : NULL;
    if (v == NULL)
        luaL_error(L, "%s: header '%s': expected a string or a list of strings", fn, name);
    if (!script_http_value_ok(v, len))
        luaL_error(L, "%s: header '%s': a control character in the value", fn, name);
    lua_pushvalue(L, acc);
    lua_pushfstring(L, "%s: ", name);
    lua_pushvalue(L, vidx);
    lua_pushliteral(L, "\r\n");
    lua_concat(L, 4);
    lua_replace(L, acc);
}

/* The header table at |idx| (name = "v" or name = { "v1", "v2" }) as
 * "Name: v\r\n" lines, names in sorted order (a table has none of its
 * own; sorted, a reply is the same bytes every time). Pushes the string. */
static void
render_headers(lua_State *L, int idx, const char *fn)
{
    size_t n = 0;
    lua_pushliteral(L, "");
    int acc = lua_gettop(L);
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        n++;
        lua_pop(L, 1);
    }
    /* Userdata, not malloc: an error below must leak nothing. */
    const char **names = lua_newuserdatauv(L, (n ? n : 1) * sizeof(*names), 0);
    size_t i = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        size_t len;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &len) : NULL;
        if (k == NULL || !script_http_token_ok(k, len))
            luaL_error(L, "%s: header names must be tokens (\"X-Debug\"), got %s", fn,
                       k ? k : luaL_typename(L, -2));
        if (framing_name(k))
            luaL_error(L, "%s: header '%s' is chute's to write (it frames the body)", fn, k);
        names[i++] = k; /* the table keeps the string alive */
        lua_pop(L, 1);
    }
    qsort(names, n, sizeof(*names), cmp_names);
    for (i = 0; i < n; i++) {
        lua_getfield(L, idx, names[i]);
        if (lua_type(L, -1) == LUA_TTABLE) {
            for (lua_Integer j = 1; lua_rawgeti(L, -1, j) != LUA_TNIL; j++) {
                add_line(L, acc, fn, names[i], lua_gettop(L));
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        } else {
            add_line(L, acc, fn, names[i], lua_gettop(L));
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1); /* the names */
}

/* The marker: { status = n, extra = "lines", body = "..." | nil, reject = bool }. */
static int
push_reply(lua_State *L, int status, int extra_idx, int body_idx, int reject)
{
    struct script *s = script_of(L);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, status);
    lua_setfield(L, -2, "status");
    if (extra_idx != 0) {
        lua_pushvalue(L, extra_idx);
        lua_setfield(L, -2, "extra");
    }
    if (body_idx != 0) {
        lua_pushvalue(L, body_idx);
        lua_setfield(L, -2, "body");
    }
    lua_pushboolean(L, reject);
    lua_setfield(L, -2, "reject");
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->reply_mt_ref);
    lua_setmetatable(L, -2);
    return 1;
}

/* chute.respond(status [, headers [, body]]) */
int
script_l_respond(lua_State *L)
{
    lua_Integer status = luaL_checkinteger(L, 1);
    if (status < 100 || status > 599)
        return luaL_error(L, "chute.respond: status %d is not 100..599", (int)status);
    if (!lua_isnoneornil(L, 3))
        luaL_checkstring(L, 3);
    lua_settop(L, 3);
    render_headers(L, 2, "chute.respond");
    return push_reply(L, (int)status, 4, lua_isnil(L, 3) ? 0 : 3, 0);
}

/* chute.redirect(url [, status = 302]) */
int
script_l_redirect(lua_State *L)
{
    size_t len;
    const char *url = luaL_checklstring(L, 1, &len);
    lua_Integer status = luaL_optinteger(L, 2, 302);
    if (status != 301 && status != 302 && status != 303 && status != 307 && status != 308)
        return luaL_error(L, "chute.redirect: status %d is not 301, 302, 303, 307 or 308",
                          (int)status);
    if (len == 0 || !script_http_value_ok(url, len) || memchr(url, ' ', len) != NULL)
        return luaL_error(L, "chute.redirect: \"%s\" is not a URL", url);
    lua_pushfstring(L, "Location: %s\r\n", url);
    return push_reply(L, (int)status, lua_gettop(L), 0, 0);
}

/* chute.reject(): close the client's connection without an answer. */
int
script_l_reject(lua_State *L)
{
    return push_reply(L, 0, 0, 0, 1);
}

/* ---- the set the MITM gets ------------------------------------------- */

int
script_hook_wants(const struct script_hook *h, const struct mitm_request *m)
{
    if (h->methods[0][0] != '\0') {
        const struct mem_slice meth = m->req->method;
        int ok = 0;
        for (size_t i = 0; i < SCRIPT_HOOK_METHODS && h->methods[i][0] && !ok; i++)
            ok = strlen(h->methods[i]) == meth.len && memcmp(h->methods[i], meth.ptr, meth.len) == 0;
        if (!ok)
            return 0;
    }
    return rules_re_match(h->re, m->url.ptr, m->url.len, NULL, 0) >= 0;
}

static int
wants_any(const struct script_hook *h, size_t n, const struct mitm_request *m)
{
    for (size_t i = 0; i < n; i++)
        if (script_hook_wants(&h[i], m))
            return 1;
    return 0;
}

static size_t
body_wanted(const struct script_hook *h, size_t n, const struct mitm_request *m)
{
    size_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i].body && h[i].max_body > max && script_hook_wants(&h[i], m))
            max = h[i].max_body;
    return max;
}

static int
wants_request(void *ud, const struct mitm_request *m)
{
    struct script *s = ud;
    return wants_any(s->req_hooks, s->nreq_hooks, m);
}

static size_t
request_body(void *ud, const struct mitm_request *m)
{
    struct script *s = ud;
    return body_wanted(s->req_hooks, s->nreq_hooks, m);
}

static int
wants_response(void *ud, const struct mitm_request *m)
{
    struct script *s = ud;
    return wants_any(s->resp_hooks, s->nresp_hooks, m);
}

static size_t
response_body(void *ud, const struct mitm_request *m, const struct http_fwd_resp *resp)
{
    struct script *s = ud;
    return body_wanted(s->resp_hooks, s->nresp_hooks, m);
}

static int
any_body(const struct script_hook *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (h[i].body)
            return 1;
    return 0;
}

void
script_hooks_finish(struct script *s)
{
    size_t def = s->cfg.mitm.max_body ? s->cfg.mitm.max_body : DEFAULT_MAX_BODY;
    for (size_t i = 0; i < s->nreq_hooks; i++)
        if (s->req_hooks[i].max_body == 0)
            s->req_hooks[i].max_body = def;
    for (size_t i = 0; i < s->nresp_hooks; i++)
        if (s->resp_hooks[i].max_body == 0)
            s->resp_hooks[i].max_body = def;
    s->mitm_hooks = (struct mitm_hooks){
        .wants_request = wants_request,
        .request_body = any_body(s->req_hooks, s->nreq_hooks) ? request_body : NULL,
        .on_request = script_hooks_on_request,
        .wants_response = wants_response,
        .response_body = any_body(s->resp_hooks, s->nresp_hooks) ? response_body : NULL,
        .on_response = script_hooks_on_response,
        .ud = s,
    };
}

const struct mitm_hooks *
script_mitm_hooks(struct script *s)
{
    if (s == NULL || (s->nreq_hooks == 0 && s->nresp_hooks == 0))
        return NULL;
    return &s->mitm_hooks;
}

void
script_hooks_free(struct script *s)
{
    for (size_t i = 0; i < s->nreq_hooks; i++)
        rules_re_free(s->req_hooks[i].re);
    for (size_t i = 0; i < s->nresp_hooks; i++)
        rules_re_free(s->resp_hooks[i].re);
    free(s->req_hooks);
    free(s->resp_hooks);
    s->req_hooks = s->resp_hooks = NULL;
    s->nreq_hooks = s->nresp_hooks = 0;
}

void
script_http_open(struct script *s)
{
    lua_State *L = s->L;
    lua_newtable(L);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    s->reply_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    script_hooks_open(s);
}
