/* Running the bundle's MITM hooks on one message (script_mitm_hooks): the
 * mitm_hooks callbacks that enter Lua.
 *
 * Each matching hook is one protected call under route()'s instruction
 * budget and the state's memory cap; everything that may allocate in Lua
 * (the req/resp objects, the reply's fields) happens inside a protected
 * call, so the cap can only fail a hook, never the engine. A hook edits a
 * hook_work, not the message: before it runs the work is saved, and if it
 * fails (error, budget, a return value that is not an answer) the saved
 * work comes back, so its half-done edits vanish while those of the hooks
 * before it stay; the message gets the work when the last hook is done.
 * Failures are logged with the hook's file:line (the first of each hook,
 * then at most one line per LOG_EVERY seconds with the count in between,
 * so a broken hook on a busy host does not flood the log). */

#include <stdio.h>
#include <string.h>

#include "io/io.h"
#include "log/log.h"
#include "script/script_int.h"

#define LOG_EVERY 10.0
#define URL_IN_LOG 200

static void
failed(struct script *s, struct script_hook *h, const struct hook_msg *msg, int rc,
       const char *why, int tripped)
{
    s->st.hook_errors++;
    if (tripped)
        s->st.hook_budget_cuts++;
    double now = io_mono_now();
    if (h->failures++ > 0 && now - h->logged_at < LOG_EVERY) {
        h->unlogged++;
        return;
    }
    char flow[32] = "", where[80] = "", more[80] = "";
    const struct mitm_request *m = msg->m;
    if (m->flow != NULL)
        snprintf(flow, sizeof(flow), "flow %llu: ", (unsigned long long)m->flow->id);
    if (why == NULL)
        why = "(no message)";
    if (!script_has_position(why))
        snprintf(where, sizeof(where), "%s: ", h->where);
    if (h->unlogged > 0)
        snprintf(more, sizeof(more), " (%llu more failures of this hook since the last line)",
                 (unsigned long long)h->unlogged);
    int ulen = m->url.len > URL_IN_LOG ? URL_IN_LOG : (int)m->url.len;
    LOG_WARN("%s%s hook %s failed on %.*s%s: %s%s%s; the %s goes on without its edits%s", flow,
             msg->response ? "on_response" : "on_request", h->where, ulen,
             m->url.ptr ? m->url.ptr : "", (size_t)ulen < m->url.len ? "..." : "", where, why,
             rc == LUA_ERRMEM ? " (the script's memory cap: lua_memory_mb)" : "",
             msg->response ? "response" : "request", more);
    h->logged_at = now;
    h->unlogged = 0;
}

/* A body hook whose message has a body it cannot see (over its max_body,
 * or over every hook's, so the MITM streamed it) is skipped: logged once
 * per hook, counted each time. */
static int
skip_for_body(struct script *s, struct script_hook *h, const struct hook_msg *msg, int framed,
              size_t len, int present)
{
    if (!h->body || (present ? len <= h->max_body : !framed))
        return 0;
    s->st.hook_body_skips++;
    if (!h->skip_logged) {
        h->skip_logged = 1;
        LOG_INFO("%s hook %s skipped for %.*s: the %s body is over its max_body (%zu bytes) and "
                 "streams through (logged once per hook)",
                 msg->response ? "on_response" : "on_request", h->where,
                 (int)(msg->m->url.len > URL_IN_LOG ? URL_IN_LOG : msg->m->url.len),
                 msg->m->url.ptr ? msg->m->url.ptr : "", msg->response ? "response" : "request",
                 h->max_body);
    }
    return 1;
}

/* (msg) -> req, nil | resp, req */
static int
push_objects(lua_State *L)
{
    struct hook_msg *msg = lua_touserdata(L, 1);
    if (msg->response) {
        script_push_msg_obj(L, SCRIPT_OBJ_RESP);
        script_push_msg_obj(L, SCRIPT_OBJ_REQ);
    } else {
        script_push_msg_obj(L, SCRIPT_OBJ_REQ);
        lua_pushnil(L);
    }
    return 2;
}

static const char *
arena_str(lua_State *L, struct mem_arena *a, int t, const char *k, size_t *len)
{
    size_t n = 0;
    const char *v = NULL;
    if (lua_getfield(L, t, k) == LUA_TSTRING) {
        const char *p = lua_tolstring(L, -1, &n);
        if ((v = mem_arena_strndup(a, p, n)) == NULL)
            luaL_error(L, "out of memory in the request's arena");
    }
    lua_pop(L, 1);
    if (len != NULL)
        *len = n;
    return v;
}

/* The hook's result at the top: nothing, or (on_request) an answer made
 * by chute.respond/redirect/reject. */
static void
take_result(lua_State *L, struct hook_msg *msg)
{
    struct script *s = script_of(L);
    int t = lua_gettop(L), reply = 0;
    if (lua_isnil(L, t))
        return;
    if (lua_getmetatable(L, t)) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, s->reply_mt_ref);
        reply = lua_rawequal(L, -1, -2);
        lua_pop(L, 2);
    }
    if (reply && !msg->response) {
        struct mitm_reply *r = &msg->reply;
        size_t n;
        memset(r, 0, sizeof(*r));
        lua_getfield(L, t, "reject");
        r->reject = lua_toboolean(L, -1);
        lua_getfield(L, t, "status");
        r->status = (int)lua_tointeger(L, -1);
        lua_pop(L, 2);
        r->extra = arena_str(L, msg->m->arena, t, "extra", NULL);
        if (r->extra != NULL && r->extra[0] == '\0')
            r->extra = NULL;
        const char *body = arena_str(L, msg->m->arena, t, "body", &n);
        r->body = mem_slice(body, body ? n : 0);
        msg->replied = 1;
        return;
    }
    lua_pushfstring(L, "%s: the hook returned %s; expected nothing%s", msg->h->where,
                    reply ? "an answer" : luaL_typename(L, t),
                    msg->response ? " (answers are for on_request: edit resp instead)"
                                  : ", or chute.respond(), chute.redirect(), chute.reject()");
    lua_error(L);
}

/* (first, second, msg): fn(req) or fn(resp, req) */
static int
call_hook(lua_State *L)
{
    struct hook_msg *msg = lua_touserdata(L, 3);
    lua_rawgeti(L, LUA_REGISTRYINDEX, msg->h->fn_ref);
    lua_pushvalue(L, 1);
    if (msg->response)
        lua_pushvalue(L, 2);
    lua_call(L, msg->response ? 2 : 1, 1);
    take_result(L, msg);
    return 0;
}

/* Runs every hook of |hooks| that wants the message. */
static void
run(struct script *s, struct script_hook *hooks, size_t n, struct hook_msg *msg)
{
    lua_State *L = s->L;
    int top = lua_gettop(L), made = 0, rc;

    msg->serial = ++s->msg_serial;
    s->msg = msg;
    lua_pushcfunction(L, script_msgh);
    for (size_t i = 0; i < n && !msg->replied; i++) {
        struct script_hook *h = &hooks[i];
        if (!script_hook_wants(h, msg->m))
            continue;
        int framed = (msg->response ? msg->resp->body.kind : msg->m->req->body.kind) !=
                     HTTP_BODY_NONE;
        if (skip_for_body(s, h, msg, framed, msg->w.body_len, msg->w.body != NULL))
            continue;
        s->st.hook_calls++;
        msg->h = h;
        /* Finalizers may run in any allocation: script code, budgeted. */
        script_budget_arm(s, s->cfg.budget);
        if (!made) {
            lua_pushcfunction(L, push_objects);
            lua_pushlightuserdata(L, msg);
            rc = lua_pcall(L, 1, 2, top + 1);
            if (rc != LUA_OK) {
                int tripped = s->tripped;
                script_budget_disarm(s);
                failed(s, h, msg, rc, lua_tostring(L, -1), tripped);
                break;
            }
            made = 1;
        }
        msg->saved = msg->w;
        msg->w.cow = 0;
        lua_pushcfunction(L, call_hook);
        lua_pushvalue(L, top + 2);
        lua_pushvalue(L, top + 3);
        lua_pushlightuserdata(L, msg);
        rc = lua_pcall(L, 3, 0, top + 1);
        int tripped = s->tripped;
        script_budget_disarm(s);
        if (rc != LUA_OK) {
            failed(s, h, msg, rc, lua_tostring(L, -1), tripped);
            msg->w = msg->saved;
            msg->replied = 0;
        } else if (msg->w.cow) {
            msg->fields_edited = 1;
        }
        lua_settop(L, top + 3);
    }
    s->msg = NULL;
    lua_settop(L, top);
}

static void
work_init(struct hook_work *w, const struct http_fwd_fields *f)
{
    memset(w, 0, sizeof(*w));
    w->fields = *f;
}

int
script_hooks_on_request(void *ud, struct mitm_request *m, struct mitm_reply *out)
{
    struct script *s = ud;
    struct hook_msg msg;
    struct http_fwd_req *req = m->req;

    memset(&msg, 0, sizeof(msg));
    msg.m = m;
    work_init(&msg.w, &req->fields);
    msg.w.method = req->method;
    msg.w.target = req->path;
    const char *q = req->path.len ? memchr(req->path.ptr, '?', req->path.len) : NULL;
    msg.w.path = mem_slice(req->path.ptr, q ? (size_t)(q - req->path.ptr) : req->path.len);
    if (q != NULL) {
        msg.w.has_query = 1;
        msg.w.query = mem_slice(q + 1, req->path.len - msg.w.path.len - 1);
    }
    if (m->body_set) {
        msg.w.body = m->body ? m->body : "";
        msg.w.body_len = m->body_len;
    }
    msg.saved = msg.w;
    run(s, s->req_hooks, s->nreq_hooks, &msg);
    if (msg.replied) {
        *out = msg.reply;
        return 1;
    }
    if (msg.fields_edited)
        req->fields = msg.w.fields;
    if (msg.w.method_set)
        req->method = msg.w.method;
    if (msg.w.target_set)
        req->path = msg.w.target;
    if (msg.w.body_set) {
        m->body = msg.w.body;
        m->body_len = msg.w.body_len;
    }
    return 0;
}

void
script_hooks_on_response(void *ud, struct mitm_request *m, struct http_fwd_resp *resp,
                         const char **body, size_t *body_len)
{
    struct script *s = ud;
    struct hook_msg msg;

    memset(&msg, 0, sizeof(msg));
    msg.m = m;
    msg.response = 1;
    msg.resp = resp;
    work_init(&msg.w, &resp->fields);
    if (body != NULL && *body != NULL) {
        msg.w.body = *body;
        msg.w.body_len = body_len ? *body_len : 0;
    }
    msg.saved = msg.w;
    run(s, s->resp_hooks, s->nresp_hooks, &msg);
    if (msg.fields_edited)
        resp->fields = msg.w.fields;
    if (msg.w.body_set && body != NULL && body_len != NULL) {
        *body = msg.w.body;
        *body_len = msg.w.body_len;
    }
}
