#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lualib.h>

#include "log/log.h"
#include "script/hint.h"
#include "script/script_int.h"

/* The bundle's environment is built from an allow-list (Redis
 * src/script_lua.c): what is not named here does not exist for scripts. */
static const char *const base_allow[] = {
    "assert", "error",    "getmetatable", "ipairs",   "next",   "pairs",  "pcall",
    "rawequal", "rawget", "rawlen",       "select",   "tonumber", "tostring", "type",
    "_VERSION", "collectgarbage",
    NULL,
};
static const char *const libs_allow[] = {"string", "table", "math", "utf8", "coroutine", NULL};
static const char *const os_allow[] = {"clock", "date", "difftime", "time", NULL};

extern const struct {
    const char *name;
    const char *src;
    size_t len;
} script_lualib[];

/* Bundle paths are relative, without "..": scripts read only their bundle. */
int
script_bundle_path(struct script *s, const char *rel, char *out, size_t len)
{
    if (rel[0] == '/' || rel[0] == '\0' || strstr(rel, "..") != NULL || s->dir == NULL)
        return -1;
    int n = snprintf(out, len, "%s/%s", s->dir, rel);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

char *
script_config_path(struct script *s, const char *p)
{
    if (p[0] == '/' || s->dir == NULL)
        return strdup(p);
    size_t n = strlen(s->dir) + strlen(p) + 2;
    char *out = malloc(n);
    if (out != NULL)
        snprintf(out, n, "%s/%s", s->dir, p);
    return out;
}

int
script_load_file(struct script *s, const char *rel)
{
    lua_State *L = s->L;
    char why[4200], chunk[4200];
    size_t len = 0;
    char *buf = script_bundle_read(s, rel, SCRIPT_MAX_SOURCE, &len, why, sizeof(why));
    if (buf == NULL) {
        lua_pushstring(L, why);
        return LUA_ERRFILE;
    }
    /* As luaL_loadfile: a first line starting with '#' is skipped, its
     * newline kept so line numbers stay right. */
    size_t skip = 0;
    if (buf[0] == '#')
        while (skip < len && buf[skip] != '\n')
            skip++;
    snprintf(chunk, sizeof(chunk), "@%s/%s", s->dir, rel);
    /* lua_load is protected: it cannot raise past the free below. */
    int rc = luaL_loadbufferx(L, buf + skip, len - skip, chunk, "t");
    free(buf);
    if (rc != LUA_OK)
        return rc;
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
    lua_setupvalue(L, -2, 1);
    return LUA_OK;
}

/* rawset and setmetatable, except on the sandbox's _ENV: its metatable is
 * what keeps globals from being written once the bundle has loaded. */
static int
is_env(lua_State *L, int idx)
{
    struct script *s = script_of(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
    int same = lua_rawequal(L, idx, -1);
    lua_pop(L, 1);
    return same;
}

static int
l_rawset(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (is_env(L, 1))
        return luaL_error(L, "rawset on _G is not allowed (keep state in locals)");
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

/* Lua runs __gc with hooks off, so a finalizer would escape the budget
 * (one that loops hangs the engine, or the reload that closes the state).
 * An object is marked for finalization only when setmetatable finds __gc in
 * the metatable, so refusing it here keeps every finalizer out. */
static int
l_setmetatable(lua_State *L)
{
    if (is_env(L, 1))
        return luaL_error(L, "setmetatable on _G is not allowed");
    if (lua_type(L, 2) == LUA_TTABLE) {
        int gc = lua_getfield(L, 2, "__gc") != LUA_TNIL;
        lua_pop(L, 1);
        if (gc)
            return luaL_error(L, "setmetatable: __gc is not allowed in bundles (finalizers run "
                                 "outside the instruction budget; use __close)");
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "chute.setmetatable");
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int
file_close(lua_State *L)
{
    luaL_Stream *p = luaL_checkudata(L, 1, LUA_FILEHANDLE);
    script_of(L)->nfiles--;
    return luaL_fileresult(L, fclose(p->f) == 0, NULL);
}

/* io.open(path [, "r"|"rb"]) confined to the bundle (file.c), read-only,
 * at most SCRIPT_MAX_FILES at a time: handles are descriptors, and a
 * script holding thousands would starve the engine's sockets. */
static int
l_io_open(lua_State *L)
{
    struct script *s = script_of(L);
    const char *rel = luaL_checkstring(L, 1);
    const char *mode = luaL_optstring(L, 2, "r");
    char path[4096], why[4200];
    if (strcmp(mode, "r") != 0 && strcmp(mode, "rb") != 0)
        return luaL_error(L, "io.open: mode '%s' not allowed (bundles are read-only)", mode);
    if (script_bundle_path(s, rel, path, sizeof(path)) != 0)
        return luaL_error(L, "io.open: '%s' is outside the bundle", rel);
    if (s->nfiles >= SCRIPT_MAX_FILES) {
        luaL_pushfail(L);
        lua_pushfstring(L, "%s: %d files already open in this bundle (close the ones read)",
                        path, SCRIPT_MAX_FILES);
        return 2;
    }
    /* The handle first: it may raise, and then no descriptor is open yet. */
    luaL_Stream *p = lua_newuserdatauv(L, sizeof(*p), 0);
    p->f = NULL;
    p->closef = NULL; /* "closed" until the file is open */
    luaL_setmetatable(L, LUA_FILEHANDLE);
    int fd = script_bundle_open(s, rel, why, sizeof(why));
    if (fd < 0) {
        luaL_pushfail(L);
        lua_pushstring(L, why);
        lua_pushinteger(L, s->file_errno);
        return 3;
    }
    p->f = fdopen(fd, "r");
    if (p->f == NULL) {
        close(fd);
        return luaL_fileresult(L, 0, path);
    }
    p->closef = file_close;
    s->nfiles++;
    return 1;
}

/* xpcall(f, msgh, ...): Lua calls a message handler from inside the error,
 * where hooks are off when the error came from the budget's hook, so
 * xpcall(loop, loop) would run forever. Here the handler runs once the
 * error has unwound, under the budget like any code; it sees the same error
 * value (there is no debug library for a traceback to differ). */
static int
xpcall_done(lua_State *L, int status, lua_KContext ctx)
{
    (void)ctx;
    if (status == LUA_OK || status == LUA_YIELD) {
        lua_pushboolean(L, 1);
        lua_insert(L, 2);
        return lua_gettop(L) - 1; /* true and f's results; the handler stays at 1 */
    }
    lua_pushvalue(L, 1);
    lua_insert(L, -2);
    lua_pcall(L, 1, 1, 0); /* the handler's value, or its own error */
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
}

static int
l_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_remove(L, 2);
    lua_insert(L, 1); /* handler, f, args... */
    int status = lua_pcallk(L, n - 2, LUA_MULTRET, 0, 0, xpcall_done);
    return xpcall_done(L, status, 0);
}

static int
l_print(lua_State *L)
{
    luaL_Buffer b;
    int n = lua_gettop(L);
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    LOG_INFO("script: %s", lua_tostring(L, -1));
    return 0;
}

/* load(chunk [, name [, "t" [, env]]]): text only, the sandbox by default. */
static int
l_load(lua_State *L)
{
    struct script *s = script_of(L);
    size_t len;
    const char *src = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "=(load)");
    if (luaL_loadbufferx(L, src, len, name, "t") != LUA_OK) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    if (!lua_isnoneornil(L, 4))
        lua_pushvalue(L, 4);
    else
        lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
    lua_setupvalue(L, -2, 1);
    return 1;
}

/* require: the bundle's own modules first (a.b -> a/b.lua), then the Lua
 * library embedded from lua/. Results are cached per state. */
static int
l_require(lua_State *L)
{
    struct script *s = script_of(L);
    const char *name = luaL_checkstring(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, "chute.loaded");
    int t = lua_getfield(L, -1, name);
    if (t == LUA_TLIGHTUSERDATA)
        return luaL_error(L, "require cycle: '%s' is still loading", name);
    if (t != LUA_TNIL)
        return 1;
    lua_pop(L, 1);
    /* Marks the module as loading, so a cycle is an error, not a C stack
     * overflow. */
    lua_pushlightuserdata(L, (void *)l_require);
    lua_setfield(L, -2, name);

    char rel[512];
    size_t n = strlen(name);
    if (n == 0 || n + 5 > sizeof(rel) || strchr(name, '/') != NULL)
        return luaL_error(L, "require: bad module name '%s'", name);
    for (size_t i = 0; i < n; i++)
        rel[i] = name[i] == '.' ? '/' : name[i];
    memcpy(rel + n, ".lua", 5);

    char path[4096];
    int rc = LUA_ERRFILE;
    s->file_errno = ENOENT;
    if (script_bundle_path(s, rel, path, sizeof(path)) == 0)
        rc = script_load_file(s, rel);
    if (rc != LUA_OK && !(rc == LUA_ERRFILE && s->file_errno == ENOENT))
        return lua_error(L); /* there, but a link, a FIFO, unreadable or broken */
    if (rc != LUA_OK) {
        lua_settop(L, 2); /* the "missing" message, if any */
        int i = 0;
        while (script_lualib[i].name != NULL && strcmp(script_lualib[i].name, name) != 0)
            i++;
        if (script_lualib[i].name == NULL || strcmp(name, "chute") == 0)
            return luaL_error(L, "module '%s' not found: no file '%s' in the bundle and no "
                                 "library module '%s'", name, rel, name);
        char chunk[300];
        snprintf(chunk, sizeof(chunk), "@lua/%s.lua", name);
        if (luaL_loadbufferx(L, script_lualib[i].src, script_lualib[i].len, chunk, "t") != LUA_OK)
            return lua_error(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
        lua_setupvalue(L, -2, 1);
    }
    lua_pushstring(L, name);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        lua_pushnil(L);
        lua_setfield(L, -3, name); /* not loading any more: a retry may work */
        return lua_error(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

static void
copy_fields(lua_State *L, int from, const char *const *names)
{
    for (; *names; names++) {
        lua_getfield(L, from, *names);
        lua_setfield(L, -2, *names);
    }
}

int
script_sandbox_open(struct script *s, char *err, size_t errlen)
{
    lua_State *L = s->L;
    luaL_openlibs(L); /* into the registry's globals, which scripts never see */
    script_bounded_open(L);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "chute.loaded");
    /* File handles share one metatable: locked, or a script could give it
     * a __gc that runs outside the budget. */
    luaL_getmetatable(L, LUA_FILEHANDLE);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);

    lua_pushglobaltable(L);
    int g = lua_gettop(L);
    lua_newtable(L); /* the sandbox _ENV */
    copy_fields(L, g, base_allow);
    copy_fields(L, g, libs_allow);
    lua_getglobal(L, "os");
    int os = lua_gettop(L);
    lua_newtable(L);
    copy_fields(L, os, os_allow);
    lua_remove(L, os);
    script_removed_guard(L, "os");
    lua_setfield(L, -2, "os");
    lua_newtable(L);
    lua_pushcfunction(L, l_io_open);
    lua_setfield(L, -2, "open");
    script_removed_guard(L, "io");
    lua_setfield(L, -2, "io");
    lua_pushcfunction(L, l_print);
    lua_setfield(L, -2, "print");
    lua_getglobal(L, "setmetatable");
    lua_setfield(L, LUA_REGISTRYINDEX, "chute.setmetatable");
    lua_pushcfunction(L, l_setmetatable);
    lua_setfield(L, -2, "setmetatable");
    lua_pushcfunction(L, l_rawset);
    lua_setfield(L, -2, "rawset");
    lua_pushcfunction(L, l_xpcall);
    lua_setfield(L, -2, "xpcall");
    lua_pushcfunction(L, l_load);
    lua_setfield(L, -2, "load");
    lua_pushcfunction(L, l_require);
    lua_setfield(L, -2, "require");
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "_G");
    /* Not hidden yet: state.c's lock_globals replaces it after main.lua. */
    lua_newtable(L);
    script_removed_index(L, NULL);
    lua_setmetatable(L, -2);
    s->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
    (void)err;
    (void)errlen;
    return 0;
}
