/* The objects a MITM hook gets: req, resp and their headers. Small
 * userdata whose fields are produced when read (as the flow's are), each
 * stamped with the number of its message: once the message's hooks have
 * run, an object a script kept reads as an error, never as a later
 * message. Writes go to the message's hook_work (hooks.c applies it once
 * the hook returned) and are checked here, so a refused edit is an error
 * at the line that made it.
 *
 * headers: h["X-A"] is the first value (case-insensitive) or nil;
 * h["X-A"] = "v" replaces every X-A, = { "a", "b" } replaces them with
 * two, = nil deletes them; pairs(h) and h:each() walk name, value in
 * order (repeats included); h:all(name) is a list of the values;
 * h:get(name), h:add(name, value) for names that collide with these
 * methods ("all", "each", "get", "add"). Content-Length and
 * Transfer-Encoding cannot be edited (the body keeps its framing), Host
 * cannot be removed. */

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "script/hint.h"
#include "script/script_int.h"

enum { OBJ_REQ, OBJ_RESP, OBJ_REQ_HEADERS, OBJ_RESP_HEADERS };

struct obj {
    uint64_t serial;
    int kind;
};

#define OOM "out of memory in the request's arena"

static struct hook_msg *
live(lua_State *L, const struct obj *o)
{
    struct script *s = script_of(L);
    if (s->msg == NULL || o->serial != s->msg->serial)
        luaL_error(L, "%s used after its hook returned (copy the fields you need)",
                   o->kind == OBJ_REQ    ? "req"
                   : o->kind == OBJ_RESP ? "resp"
                                         : "headers");
    return s->msg;
}

/* Index 1 of a metamethod is one of ours (the metatable is hidden); a
 * method called as h.all(x) is checked. */
static struct obj *
check_headers(lua_State *L)
{
    struct script *s = script_of(L);
    struct obj *o = lua_touserdata(L, 1);
    int ok = o != NULL && lua_getmetatable(L, 1);
    if (ok) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, s->headers_mt_ref);
        ok = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    if (!ok)
        luaL_error(L, "expected headers (call it as req.headers:all(name))");
    return o;
}

static void
push_slice(lua_State *L, struct mem_slice v)
{
    lua_pushlstring(L, v.ptr ? v.ptr : "", v.len);
}

/* ---- headers ---------------------------------------------------------- */

static const struct http_fwd_fields *
fields_read(lua_State *L, struct obj *o)
{
    struct hook_msg *msg = live(L, o);
    if (o->kind == OBJ_REQ_HEADERS && msg->response)
        return &msg->m->req->fields;
    return &msg->w.fields;
}

/* The fields to edit: the running hook's own copy of them, made on its
 * first edit, so a hook that fails leaves the message's as they were. */
static struct http_fwd_fields *
fields_write(lua_State *L, struct obj *o)
{
    struct hook_msg *msg = live(L, o);
    if (o->kind == OBJ_REQ_HEADERS && msg->response)
        luaL_error(L, "req.headers are read-only in on_response (the request has gone)");
    struct http_fwd_fields *f = &msg->w.fields;
    if (f->v == NULL && msg->response)
        luaL_error(L, "resp.headers cannot be edited: the MITM did not keep the response's fields");
    if (!msg->w.cow) {
        size_t cap = f->_cap > f->n ? f->_cap : f->n;
        if (cap > 0) {
            struct http_header *v = mem_arena_alloc(msg->m->arena, cap * sizeof(*v));
            if (v == NULL)
                luaL_error(L, OOM);
            memcpy(v, f->v, f->n * sizeof(*v));
            f->v = v;
        }
        msg->w.cow = 1;
    }
    return f;
}

static struct mem_slice
check_name(lua_State *L, int idx)
{
    size_t n;
    const char *p = luaL_checklstring(L, idx, &n);
    if (!script_http_token_ok(p, n))
        luaL_error(L, "header name '%s' is not a token (letters, digits, !#$%%&'*+-.^_`|~)", p);
    if (strcasecmp(p, "content-length") == 0 || strcasecmp(p, "transfer-encoding") == 0)
        luaL_error(L, "header '%s' cannot be edited: the body keeps the framing it came with", p);
    return mem_slice(p, n);
}

static struct mem_slice
check_value(lua_State *L, int idx, struct mem_slice name)
{
    size_t n;
    if (lua_type(L, idx) != LUA_TSTRING && lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "header '%s': expected a string, a list of strings or nil, got %s",
                   name.ptr, script_got(L, idx));
    const char *p = lua_tolstring(L, idx, &n);
    if (!script_http_value_ok(p, n))
        luaL_error(L, "header '%s': a control character in the value (no header injection)",
                   name.ptr);
    return mem_slice(p, n);
}

static int
h_get(lua_State *L)
{
    struct obj *o = check_headers(L);
    const struct http_header *h = http_fwd_field_get(fields_read(L, o), luaL_checkstring(L, 2));
    if (h == NULL)
        lua_pushnil(L);
    else
        push_slice(L, h->value);
    return 1;
}

static int
h_all(lua_State *L)
{
    struct obj *o = check_headers(L);
    size_t n;
    const char *name = luaL_checklstring(L, 2, &n);
    const struct http_fwd_fields *f = fields_read(L, o);
    lua_newtable(L);
    lua_Integer k = 0;
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].name.len == n && strncasecmp(f->v[i].name.ptr, name, n) == 0) {
            push_slice(L, f->v[i].value);
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}

static int
h_add(lua_State *L)
{
    struct obj *o = check_headers(L);
    struct mem_slice name = check_name(L, 2);
    struct mem_slice value = check_value(L, 3, name);
    if (http_fwd_field_add(fields_write(L, o), name, value) != 0)
        return luaL_error(L, OOM);
    return 0;
}

static int
h_next(lua_State *L)
{
    struct obj *o = lua_touserdata(L, lua_upvalueindex(1));
    lua_Integer i = lua_tointeger(L, lua_upvalueindex(2));
    const struct http_fwd_fields *f = fields_read(L, o);
    if ((size_t)i >= f->n)
        return 0;
    lua_pushinteger(L, i + 1);
    lua_replace(L, lua_upvalueindex(2));
    push_slice(L, f->v[i].name);
    push_slice(L, f->v[i].value);
    return 2;
}

static int
h_each(lua_State *L)
{
    check_headers(L);
    lua_pushvalue(L, 1);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, h_next, 2);
    return 1;
}

static int
h_index(lua_State *L)
{
    size_t n;
    const char *k = luaL_checklstring(L, 2, &n);
    if (n == 3 && memcmp(k, "all", 3) == 0)
        lua_pushcfunction(L, h_all);
    else if (n == 4 && memcmp(k, "each", 4) == 0)
        lua_pushcfunction(L, h_each);
    else if (n == 3 && memcmp(k, "get", 3) == 0)
        lua_pushcfunction(L, h_get);
    else if (n == 3 && memcmp(k, "add", 3) == 0)
        lua_pushcfunction(L, h_add);
    else
        return h_get(L);
    return 1;
}

static int
h_newindex(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct mem_slice name = check_name(L, 2);
    int t = lua_type(L, 3);
    if (t == LUA_TNIL) {
        if (strcasecmp(name.ptr, "host") == 0)
            return luaL_error(L, "header 'Host' cannot be removed (set another value)");
        if (http_fwd_field_del(fields_write(L, o), name) < 0)
            return luaL_error(L, OOM);
        return 0;
    }
    if (t != LUA_TTABLE) {
        if (http_fwd_field_set(fields_write(L, o), name, check_value(L, 3, name)) != 0)
            return luaL_error(L, OOM);
        return 0;
    }
    /* A list: every value checked before the first edit. */
    lua_Integer n = 0;
    while (lua_rawgeti(L, 3, n + 1) != LUA_TNIL) {
        check_value(L, -1, name);
        lua_pop(L, 1);
        n++;
    }
    lua_pop(L, 1);
    if (n == 0 && strcasecmp(name.ptr, "host") == 0)
        return luaL_error(L, "header 'Host' cannot be removed (set another value)");
    struct http_fwd_fields *f = fields_write(L, o);
    if (n == 0)
        return http_fwd_field_del(f, name) < 0 ? luaL_error(L, OOM) : 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 3, i);
        struct mem_slice v = check_value(L, -1, name);
        if ((i == 1 ? http_fwd_field_set(f, name, v) : http_fwd_field_add(f, name, v)) != 0)
            return luaL_error(L, OOM);
        lua_pop(L, 1);
    }
    return 0;
}

static int
h_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)fields_read(L, lua_touserdata(L, 1))->n);
    return 1;
}

static int
h_tostring(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct script *s = script_of(L);
    if (s->msg == NULL || o->serial != s->msg->serial)
        lua_pushliteral(L, "headers (gone)");
    else
        lua_pushfstring(L, "headers (%d fields)", (int)fields_read(L, o)->n);
    return 1;
}

/* ---- req and resp ---------------------------------------------------- */

static void
push_obj(lua_State *L, int kind)
{
    struct script *s = script_of(L);
    int user_values = kind == OBJ_REQ || kind == OBJ_RESP;
    struct obj *o = lua_newuserdatauv(L, sizeof(*o), user_values);
    o->serial = s->msg->serial;
    o->kind = kind;
    lua_rawgeti(L, LUA_REGISTRYINDEX,
                kind == OBJ_REQ    ? s->req_mt_ref
                : kind == OBJ_RESP ? s->resp_mt_ref
                                   : s->headers_mt_ref);
    lua_setmetatable(L, -2);
}

void
script_push_msg_obj(lua_State *L, int kind)
{
    push_obj(L, kind == SCRIPT_OBJ_REQ ? OBJ_REQ : OBJ_RESP);
}

/* The object's headers, made once and kept in its user value. */
static void
push_headers(lua_State *L, int idx, int kind)
{
    if (lua_getiuservalue(L, idx, 1) != LUA_TNIL)
        return;
    lua_pop(L, 1);
    push_obj(L, kind);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, idx, 1);
}

/* The request's target as the hooks see it: the work's in on_request,
 * the message's (as forwarded) in on_response. */
static void
split_target(const struct hook_msg *msg, struct mem_slice *path, struct mem_slice *query,
             int *has_query)
{
    if (!msg->response) {
        *path = msg->w.path;
        *query = msg->w.query;
        *has_query = msg->w.has_query;
        return;
    }
    struct mem_slice t = msg->m->req->path;
    const char *q = t.len ? memchr(t.ptr, '?', t.len) : NULL;
    *has_query = q != NULL;
    *path = mem_slice(t.ptr, q ? (size_t)(q - t.ptr) : t.len);
    *query = q ? mem_slice(q + 1, t.len - (size_t)(q - t.ptr) - 1) : mem_slice(NULL, 0);
}

static int
req_index(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct hook_msg *msg = live(L, o);
    const struct mitm_request *m = msg->m;
    size_t n;
    const char *k = luaL_checklstring(L, 2, &n);
    struct mem_slice path, query;
    int has_query;

    if (strcmp(k, "headers") == 0) {
        push_headers(L, 1, OBJ_REQ_HEADERS);
    } else if (strcmp(k, "method") == 0) {
        push_slice(L, msg->response ? m->req->method : msg->w.method);
    } else if (strcmp(k, "path") == 0 || strcmp(k, "query") == 0) {
        split_target(msg, &path, &query, &has_query);
        if (k[0] == 'p')
            push_slice(L, path);
        else if (has_query)
            push_slice(L, query);
        else
            lua_pushnil(L);
    } else if (strcmp(k, "host") == 0) {
        push_slice(L, m->host);
    } else if (strcmp(k, "port") == 0) {
        lua_pushinteger(L, m->port);
    } else if (strcmp(k, "scheme") == 0) {
        lua_pushstring(L, m->scheme ? m->scheme : "https");
    } else if (strcmp(k, "url") == 0) {
        push_slice(L, m->url);
    } else if (strcmp(k, "body") == 0) {
        if (msg->response ? !m->body_set : msg->w.body == NULL)
            lua_pushnil(L);
        else if (msg->response)
            lua_pushlstring(L, m->body ? m->body : "", m->body_len);
        else
            lua_pushlstring(L, msg->w.body, msg->w.body_len);
    } else {
        return luaL_error(L, "req has no field '%s' (fields: body, headers, host, method, "
                             "path, port, query, scheme, url)", k);
    }
    return 1;
}

/* A target part: visible ASCII (percent-encode the rest), no '#', and for
 * the path no '?' (set req.query). */
static struct mem_slice
check_target_part(lua_State *L, const char *field, int path)
{
    size_t n;
    if (lua_type(L, 3) != LUA_TSTRING)
        luaL_error(L, "req.%s: expected a string, got %s", field, script_got(L, 3));
    const char *p = lua_tolstring(L, 3, &n);
    if (path && (n == 0 || (p[0] != '/' && !(n == 1 && p[0] == '*'))))
        luaL_error(L, "req.path: \"%s\" does not start with '/'", p);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= 0x20 || c >= 0x7f || c == '#' || (path && c == '?')) {
            char hex[8];
            snprintf(hex, sizeof(hex), "0x%02x", c);
            luaL_error(L, "req.%s: \"%s\": byte %d (%s) is not allowed in a request target "
                          "(percent-encode it%s)",
                       field, p, (int)i + 1, hex, path && c == '?' ? ", or set req.query" : "");
        }
    }
    return mem_slice(p, n);
}

static void
set_target(lua_State *L, struct hook_msg *msg)
{
    struct hook_work *w = &msg->w;
    size_t len = w->path.len + (w->has_query ? 1 + w->query.len : 0);
    char *t = mem_arena_alloc(msg->m->arena, len ? len : 1);
    if (t == NULL)
        luaL_error(L, OOM);
    memcpy(t, w->path.ptr, w->path.len);
    if (w->has_query) {
        t[w->path.len] = '?';
        memcpy(t + w->path.len + 1, w->query.ptr, w->query.len);
    }
    w->target = mem_slice(t, len);
    w->target_set = 1;
    /* path and query point into it from now on */
    w->path = mem_slice(t, w->path.len);
    if (w->has_query)
        w->query = mem_slice(t + w->path.len + 1, w->query.len);
}

static int
req_newindex(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct hook_msg *msg = live(L, o);
    const char *k = luaL_checkstring(L, 2);
    size_t n;

    if (msg->response)
        return luaL_error(L, "req is read-only in on_response (the request has gone)");
    if (strcmp(k, "method") == 0) {
        const char *p = lua_type(L, 3) == LUA_TSTRING ? lua_tolstring(L, 3, &n) : NULL;
        if (p == NULL || !script_http_token_ok(p, n) || n > 32)
            return luaL_error(L, "req.method: expected a method name (\"GET\", \"POST\")");
        char *c = mem_arena_memdup(msg->m->arena, p, n);
        if (c == NULL)
            return luaL_error(L, OOM);
        msg->w.method = mem_slice(c, n);
        msg->w.method_set = 1;
    } else if (strcmp(k, "path") == 0) {
        msg->w.path = check_target_part(L, "path", 1);
        set_target(L, msg);
    } else if (strcmp(k, "query") == 0) {
        if (lua_isnil(L, 3)) {
            msg->w.has_query = 0;
            msg->w.query = mem_slice(NULL, 0);
        } else {
            msg->w.query = check_target_part(L, "query", 0);
            msg->w.has_query = 1;
        }
        set_target(L, msg);
    } else if (strcmp(k, "body") == 0) {
        const char *p = lua_type(L, 3) == LUA_TSTRING ? lua_tolstring(L, 3, &n) : NULL;
        if (p == NULL)
            return luaL_error(L, "req.body: expected a string, got %s", script_got(L, 3));
        if (msg->w.body == NULL)
            return luaL_error(L, "req.body cannot be set: register the hook with { body = true } "
                                 "(a body over max_body streams through)");
        char *c = mem_arena_memdup(msg->m->arena, p, n);
        if (c == NULL)
            return luaL_error(L, OOM);
        msg->w.body = c;
        msg->w.body_len = n;
        msg->w.body_set = 1;
    } else if (strcmp(k, "headers") == 0) {
        return luaL_error(L, "req.headers cannot be replaced: set its fields "
                             "(req.headers[\"X-A\"] = \"1\")");
    } else if (strcmp(k, "host") == 0 || strcmp(k, "port") == 0 || strcmp(k, "scheme") == 0 ||
               strcmp(k, "url") == 0) {
        return luaL_error(L, "req.%s is read-only (the upstream is already connected; "
                             "req.headers.host sets the Host header)", k);
    } else {
        return luaL_error(L, "req has no field '%s' (settable: body, method, path, query, "
                             "and req.headers[...])", k);
    }
    return 0;
}

static int
resp_index(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct hook_msg *msg = live(L, o);
    const char *k = luaL_checkstring(L, 2);

    if (strcmp(k, "headers") == 0)
        push_headers(L, 1, OBJ_RESP_HEADERS);
    else if (strcmp(k, "status") == 0)
        lua_pushinteger(L, msg->resp->status);
    else if (strcmp(k, "reason") == 0)
        push_slice(L, msg->resp->reason);
    else if (strcmp(k, "body") == 0 && msg->w.body != NULL)
        lua_pushlstring(L, msg->w.body, msg->w.body_len);
    else if (strcmp(k, "body") == 0)
        lua_pushnil(L);
    else
        return luaL_error(L, "resp has no field '%s' (fields: body, headers, reason, status)", k);
    return 1;
}

static int
resp_newindex(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct hook_msg *msg = live(L, o);
    const char *k = luaL_checkstring(L, 2);
    size_t n;

    if (strcmp(k, "body") == 0) {
        const char *p = lua_type(L, 3) == LUA_TSTRING ? lua_tolstring(L, 3, &n) : NULL;
        if (p == NULL)
            return luaL_error(L, "resp.body: expected a string, got %s", script_got(L, 3));
        if (msg->w.body == NULL)
            return luaL_error(L, "resp.body cannot be set: register the hook with "
                                 "{ body = true } (a body over max_body streams through)");
        char *c = mem_arena_memdup(msg->m->arena, p, n);
        if (c == NULL)
            return luaL_error(L, OOM);
        msg->w.body = c;
        msg->w.body_len = n;
        msg->w.body_set = 1;
        return 0;
    }
    if (strcmp(k, "status") == 0 || strcmp(k, "reason") == 0)
        return luaL_error(L, "resp.%s is read-only (the body's framing follows the status; "
                             "answer from on_request with chute.respond instead)", k);
    if (strcmp(k, "headers") == 0)
        return luaL_error(L, "resp.headers cannot be replaced: set its fields "
                             "(resp.headers[\"X-A\"] = \"1\")");
    return luaL_error(L, "resp has no field '%s' (settable: body, and resp.headers[...])", k);
}

static int
obj_tostring(lua_State *L)
{
    struct obj *o = lua_touserdata(L, 1);
    struct script *s = script_of(L);
    if (s->msg == NULL || o->serial != s->msg->serial) {
        lua_pushstring(L, o->kind == OBJ_REQ ? "req (gone)" : "resp (gone)");
    } else if (o->kind == OBJ_REQ) {
        struct mem_slice u = s->msg->m->url;
        lua_pushliteral(L, "req ");
        lua_pushlstring(L, u.ptr ? u.ptr : "", u.len);
        lua_concat(L, 2);
    } else {
        lua_pushfstring(L, "resp %d", s->msg->resp->status);
    }
    return 1;
}

static int
make_mt(lua_State *L, const luaL_Reg *fns)
{
    lua_newtable(L);
    luaL_setfuncs(L, fns, 0);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

void
script_hooks_open(struct script *s)
{
    static const luaL_Reg req_fns[] = {
        {"__index", req_index}, {"__newindex", req_newindex}, {"__tostring", obj_tostring}, {NULL, NULL}};
    static const luaL_Reg resp_fns[] = {
        {"__index", resp_index}, {"__newindex", resp_newindex}, {"__tostring", obj_tostring}, {NULL, NULL}};
    static const luaL_Reg headers_fns[] = {
        {"__index", h_index}, {"__newindex", h_newindex}, {"__pairs", h_each},
        {"__len", h_len},     {"__tostring", h_tostring}, {NULL, NULL}};
    s->req_mt_ref = make_mt(s->L, req_fns);
    s->resp_mt_ref = make_mt(s->L, resp_fns);
    s->headers_mt_ref = make_mt(s->L, headers_fns);
}
