#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import.h"
#include "log/log.h"
#include "script/script_int.h"

/* chute.clash "config.yaml" [, opts] / chute.surge "profile.conf" [, opts]:
 * the config, converted by core/import into the same Lua `chute import`
 * writes, run here in the bundle's sandbox. The chunk is named after the
 * config and keeps its statements on the config's lines, so an error names
 * the config's file:line. opts: { config = false | { key = value, ... }
 * (false: the bundle calls chute.config itself; a table: its keys replace
 * the config's), route = false (chute.route is left to the bundle) }.
 * Returns the rules' route function. */

#define MAX_CONFIG_BYTES (64u << 20)

struct reader {
    struct script *s;
    char base[1024];
};

/* The files the config names, relative to its folder, inside the bundle. */
static int
read_rel(void *ud, const char *path, char **data, size_t *len)
{
    struct reader *r = ud;
    char rel[2048], why[4200];
    snprintf(rel, sizeof(rel), "%s%s", r->base, path);
    *data = script_bundle_read(r->s, rel, MAX_CONFIG_BYTES, len, why, sizeof(why));
    return *data != NULL ? 0 : r->s->file_errno ? r->s->file_errno : 1;
}

static int
load(lua_State *L, enum import_kind kind, const char *fn)
{
    struct script *s = script_of(L);
    const char *rel = luaL_checkstring(L, 1);
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    else
        lua_newtable(L);
    lua_settop(L, 2); /* the options table, {} when none */
    char why[4200], err[1024];
    size_t len = 0;
    char *buf = script_bundle_read(s, rel, MAX_CONFIG_BYTES, &len, why, sizeof(why));
    if (buf == NULL)
        return luaL_error(L, "%s: %s", fn, why);
    struct reader rd = {.s = s};
    const char *slash = strrchr(rel, '/');
    snprintf(rd.base, sizeof(rd.base), "%.*s", slash ? (int)(slash - rel + 1) : 0, rel);
    struct import_opts o = {.kind = kind, .chunk = 1, .base = rd.base, .read = read_rel, .ud = &rd};
    struct import_result res;
    int rc = import_convert(buf, len, rel, &o, &res, err, sizeof(err));
    free(buf);
    if (rc != 0)
        return luaL_error(L, "%s: %s", fn, err);
    for (size_t i = 0; i < res.nnotes; i++)
        LOG_WARN("%s: %s", fn, res.notes[i]);
    char chunk[4200];
    snprintf(chunk, sizeof(chunk), "@%s/%s", s->dir, rel);
    rc = luaL_loadbufferx(L, res.lua, res.lua_len, chunk, "t");
    import_result_free(&res);
    if (rc != LUA_OK)
        return luaL_error(L, "%s: the converted config does not load (a chute bug): %s", fn,
                          lua_tostring(L, -1));
    lua_rawgeti(L, LUA_REGISTRYINDEX, s->env_ref);
    lua_setupvalue(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_call(L, 1, 1);
    return 1;
}

int
script_l_clash(lua_State *L)
{
    return load(L, IMPORT_CLASH, "chute.clash");
}

int
script_l_surge(lua_State *L)
{
    return load(L, IMPORT_SURGE, "chute.surge");
}
