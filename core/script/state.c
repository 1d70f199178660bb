#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lualib.h>

#include "log/log.h"
#include "mitm/rewrite.h"
#include "script/geo.h"
#include "script/hint.h"
#include "script/script_int.h"

#define DEFAULT_LUA_MEMORY (64u << 20)

extern const struct {
    const char *name;
    const char *src;
    size_t len;
} script_lualib[];

/* A capped allocator (HAProxy's hlua_alloc): past the limit Lua gets NULL
 * and raises "not enough memory" inside the script, never in the engine. */
static void *
lalloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct script *s = ud;
    if (ptr == NULL)
        osize = 0;
    if (nsize == 0) {
        free(ptr);
        s->mem_used -= osize;
        return NULL;
    }
    if (nsize > osize && s->mem_used + (nsize - osize) > s->mem_limit)
        return NULL;
    void *p = realloc(ptr, nsize);
    if (p != NULL)
        s->mem_used += nsize - osize;
    return p;
}

static int
l_log(lua_State *L)
{
    const char *lvl = luaL_checkstring(L, 1);
    const char *msg = luaL_checkstring(L, 2);
    int level = log_level_parse(lvl);
    if (level < 0)
        return luaL_error(L, "chute.log: unknown level '%s'", lvl);
    luaL_where(L, 1);
    LOG_AT((enum log_level)level, "script: %s%s", lua_tostring(L, -1), msg);
    return 0;
}

static int
l_is_policy(lua_State *L)
{
    lua_pushboolean(L, script_policy_lookup(script_of(L), luaL_checkstring(L, 1)) >= 0);
    return 1;
}

static int
l_check_address(lua_State *L)
{
    struct sockaddr_storage ss;
    socklen_t len;
    const char *text = luaL_checkstring(L, 1);
    if (script_check_address(text, &ss, &len) != 0) {
        lua_pushfstring(L, "'%s' is not IP:PORT (\"127.0.0.1:1080\", \"[::1]:1080\")", text);
        return 1;
    }
    return 0;
}

static int
l_check_cidr(lua_State *L)
{
    struct ip_cidr c;
    const char *text = luaL_checkstring(L, 1);
    if (ip_cidr_parse(text, &c) != 0) {
        lua_pushfstring(L, "'%s' is not IP/PREFIX (\"198.18.0.1/30\", \"fd00::1/126\")", text);
        return 1;
    }
    return 0;
}

static const luaL_Reg core_funcs[] = {
    {"check_cidr", l_check_cidr},
    {"ruleset", script_l_ruleset},
    {"provider", script_l_provider},
    {"module", script_l_module},
    {"rules", script_l_rules},
    {"clash", script_l_clash},
    {"surge", script_l_surge},
    {"log", l_log},
    {"is_policy", l_is_policy},
    {"check_address", l_check_address},
    {"check_upstream", script_l_check_upstream},
    {"check_range", script_l_check_range},
    {"check_size", script_l_check_size},
    {"on_request", script_l_on_request},
    {"on_response", script_l_on_response},
    {"respond", script_l_respond},
    {"redirect", script_l_redirect},
    {"reject", script_l_reject},
    {"suggest", script_l_suggest},
    {"type_error", script_l_type_error},
    {"key_where", script_l_key_where},
    {"call_site", script_l_call_site},
    {NULL, NULL},
};

/* Runs lua/chute.lua with the C functions as `...`, keeps its state table
 * and registers the module it returns as "chute". */
static int
open_chute_module(struct script *s)
{
    lua_State *L = s->L;
    int i = 0;
    while (script_lualib[i].name != NULL && strcmp(script_lualib[i].name, "chute") != 0)
        i++;
    if (script_lualib[i].name == NULL) {
        lua_pushstring(L, "lua/chute.lua is not embedded in this binary");
        return -1;
    }
    lua_pushcfunction(L, script_msgh);
    if (luaL_loadbufferx(L, script_lualib[i].src, script_lualib[i].len, "@lua/chute.lua", "t")) {
        lua_remove(L, -2);
        return -1;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
    lua_setupvalue(L, -2, 1);
    luaL_newlib(L, core_funcs);
    script_proxy_open(L);
    lua_pushliteral(L, CHUTE_VERSION);
    lua_setfield(L, -2, "version");
    if (lua_pcall(L, 1, 2, -3) != LUA_OK) {
        lua_remove(L, -2);
        return -1;
    }
    s->state_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, LUA_REGISTRYINDEX, "chute.loaded");
    lua_insert(L, -2);
    lua_setfield(L, -2, "chute");
    lua_pop(L, 2);
    return 0;
}

/* After main.lua: writing a global is an error (state belongs in locals). */
static int
l_global_newindex(lua_State *L)
{
    return luaL_error(L, "assignment to global '%s' after the bundle loaded (use a local)",
                      luaL_tolstring(L, 2, NULL));
}

static void
lock_globals(struct script *s)
{
    lua_State *L = s->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
    lua_newtable(L);
    lua_pushcfunction(L, l_global_newindex);
    lua_setfield(L, -2, "__newindex");
    script_removed_index(L, NULL);
    /* Hidden, or getmetatable(_G).__newindex = nil would undo the lock. */
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
}

struct load {
    struct script *s;
    const char *main_src;
    char *err;
    size_t errlen;
    int failed; /* err holds the message */
};

/* Everything from the libraries to the locked globals, as a protected C
 * function (see protect.c): a bundle that runs out of memory at any step
 * is an error, never an abort. */
static int
load_protected(lua_State *L)
{
    struct load *ld = lua_touserdata(L, 1);
    struct script *s = ld->s;
    lua_settop(L, 0);
    script_sandbox_open(s, ld->err, ld->errlen);
    script_flow_open(s);
    script_ruleset_open(s);
    script_rules_open(s);
    script_http_open(s);
    if (open_chute_module(s) != 0)
        return lua_error(L);

    lua_pushcfunction(L, script_msgh);
    int rc;
    if (ld->main_src != NULL) {
        rc = luaL_loadbufferx(L, ld->main_src, strlen(ld->main_src), "=main.lua", "t");
        if (rc == LUA_OK) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
            lua_setupvalue(L, -2, 1);
        }
    } else {
        rc = script_load_file(s, "main.lua");
    }
    if (rc != LUA_OK)
        return lua_error(L);
    script_budget_arm(s, SCRIPT_LOAD_BUDGET);
    rc = lua_pcall(L, 0, 0, -2);
    script_budget_disarm(s);
    if (rc != LUA_OK)
        return lua_error(L);
    lua_pop(L, 1);
    if (script_config_read(s, ld->err, ld->errlen) != 0 ||
        script_geo_finish(s, ld->err, ld->errlen) != 0 ||
        script_proxies_finish(s, ld->err, ld->errlen) != 0 ||
        script_remotes_finish(s, ld->err, ld->errlen) != 0) {
        ld->failed = 1;
        return 0;
    }
    s->loaded = 1;
    script_hooks_finish(s);
    lock_globals(s);
    /* No finalizer can be script code (sandbox.c refuses __gc), so this
     * collection runs only the engine's own. */
    lua_gc(L, LUA_GCCOLLECT);
    if (s->mem_used > s->cfg.lua_memory) {
        snprintf(ld->err, ld->errlen, "%s%smain.lua: the bundle holds %.1f MiB after loading, "
                 "over lua_memory_mb = %zu (raise it, or keep less in memory)",
                 s->dir ? s->dir : "", s->dir ? "/" : "", (double)s->mem_used / (1 << 20),
                 s->cfg.lua_memory >> 20);
        ld->failed = 1;
        return 0;
    }
    s->mem_limit = s->cfg.lua_memory;
    return 0;
}

struct script *
script_load(const char *dir, const char *main_src, char *err, size_t errlen)
{
    struct script *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->mem_limit = DEFAULT_LUA_MEMORY;
    s->route_ref = s->flow_ref = s->env_ref = s->state_ref = s->on_dns_ref = LUA_NOREF;
    s->reply_mt_ref = s->req_mt_ref = s->resp_mt_ref = s->headers_mt_ref = LUA_NOREF;
    if (dir != NULL) {
        struct stat st;
        char main_path[4096];
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "%s: no such bundle folder", dir);
            goto fail;
        }
        snprintf(main_path, sizeof(main_path), "%s/main.lua", dir);
        if (main_src == NULL && lstat(main_path, &st) != 0) {
            snprintf(err, errlen, "%s: bundle has no main.lua", dir);
            goto fail;
        }
        s->dir = strdup(dir);
    }
    s->L = lua_newstate(lalloc, s);
    if (s->L == NULL) {
        snprintf(err, errlen, "cannot create a Lua state");
        goto fail;
    }
    *(struct script **)lua_getextraspace(s->L) = s;
    script_protect_init(s->L);
    lua_gc(s->L, LUA_GCGEN, 0, 0);
    struct load ld = {s, main_src, err, errlen, 0};
    s->main_src = main_src; /* for the lines of keys in load errors (srcpos.c) */
    int prc = script_protected(s, load_protected, &ld);
    s->main_src = NULL;
    if (prc != LUA_OK) {
        snprintf(err, errlen, "%s", s->protect_err);
        goto fail;
    }
    if (ld.failed)
        goto fail;
    /* Loading rule lists frees megabytes of file buffers and build space
     * that glibc would otherwise keep resident (scripts/bench/rules: 10.1
     * MiB of RSS for 5.1 MiB in use with 100k domains and 10k CIDRs). */
    malloc_trim(0);
    return s;

fail:
    script_free(s);
    return NULL;
}

void
script_free(struct script *s)
{
    if (s == NULL)
        return;
    if (s->L != NULL) {
        /* lua_close runs the pending finalizers: only the engine's own
         * (rule sets, file handles), as sandbox.c refuses __gc in bundles
         * and Lua turns hooks off inside them. The budget still bounds a
         * __close a script left pending. */
        script_budget_arm(s, s->cfg.budget ? s->cfg.budget : SCRIPT_LOAD_BUDGET);
        lua_close(s->L);
    }
    script_geo_free(s);
    script_config_free(&s->cfg);
    script_proxies_free(s);
    script_remotes_free(s);
    script_hooks_free(s);
    mitm_rewrites_free(s->rewrites);
    free(s->dir);
    free(s);
}

const struct script_config *
script_config(const struct script *s)
{
    return &s->cfg;
}

size_t
script_rules_memory(const struct script *s)
{
    return s->rules_bytes;
}

int
script_memory_cap(struct script *s, size_t cap, size_t limit, char *err, size_t errlen)
{
    if (cap == 0 || cap >= s->mem_limit)
        return 0;
    if (s->mem_used > cap) {
        snprintf(err, errlen, "%s%smain.lua: the bundle holds %.1f MiB of Lua after loading, over "
                 "its share of memory_limit = %.1f MiB (%.1f MiB): raise memory_limit, or keep "
                 "less in memory", s->dir ? s->dir : "", s->dir ? "/" : "",
                 (double)s->mem_used / (1 << 20), (double)limit / (1 << 20),
                 (double)cap / (1 << 20));
        return -1;
    }
    s->mem_limit = cap;
    return 0;
}

void
script_stats(const struct script *s, struct script_stats *out)
{
    *out = s->st;
    out->lua_bytes = s->mem_used;
}

const struct log_counter script_counters[] = {
#define X(field, key) LOG_COUNTER(struct script_stats, field, key)
    SCRIPT_STATS(X)
#undef X
    LOG_COUNTER_END};
