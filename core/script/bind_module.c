#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "mitm/rewrite.h"
#include "script/script_int.h"

/* chute.module "modules/x.sgmodule": a Surge module from the bundle, loaded
 * unchanged; chute.module { text = [[...]] [, name = "..."] }: the same
 * lines inline. Both add to the bundle's one set of rewrites
 * (script_rewrites), in call order. What chute cannot run is logged once
 * here as a warning; a malformed line fails the load with file:line. */

#define MAX_MODULE_BYTES (16u << 20)

/* Map Local data= files: paths inside the bundle. */
static int
read_bundle_file(void *ud, const char *rel, char **data, size_t *len)
{
    struct script *s = ud;
    char why[4200];
    /* A regular file inside the bundle, opened without blocking (file.c). */
    *data = script_bundle_read(s, rel, MAX_MODULE_BYTES, len, why, sizeof(why));
    if (*data != NULL)
        return 0;
    return s->file_errno == ENOENT ? ENOENT : EPERM; /* missing, or not the bundle's to read */
}

static void
warn(void *ud, const char *msg)
{
    (void)ud;
    LOG_WARN("chute.module: %s", msg);
}

int
script_l_module(lua_State *L)
{
    struct script *s = script_of(L);
    const char *name;
    char *buf = NULL;
    size_t len = 0;
    const char *text;
    if (lua_type(L, 1) == LUA_TSTRING) {
        char why[4200];
        name = lua_tostring(L, 1);
        if ((buf = script_bundle_read(s, name, MAX_MODULE_BYTES, &len, why, sizeof(why))) == NULL)
            return luaL_error(L, "chute.module: %s", why);
        text = buf;
    } else if (lua_type(L, 1) == LUA_TTABLE) {
        lua_getfield(L, 1, "text");
        lua_getfield(L, 1, "name");
        if (lua_type(L, -2) != LUA_TSTRING || (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING))
            return luaL_error(L, "chute.module: expected { text = \"[URL Rewrite] ...\" [, name "
                                 "= \"...\"] }");
        text = lua_tolstring(L, -2, &len);
        name = lua_isnil(L, -1) ? "(inline module)" : lua_tostring(L, -1);
    } else {
        return luaL_error(L, "chute.module: expected a module file of the bundle "
                             "(\"modules/x.sgmodule\") or { text = [[...]] }");
    }
    char err[600];
    int rc = -1;
    if (s->rewrites == NULL)
        s->rewrites = mitm_rewrites_new();
    if (s->rewrites != NULL)
        rc = mitm_rewrites_load(s->rewrites, text, len, name, read_bundle_file, warn, s, err,
                                sizeof(err));
    else
        snprintf(err, sizeof(err), "out of memory");
    free(buf);
    if (rc != 0)
        return luaL_error(L, "chute.module: %s", err);
    return 0;
}

struct mitm_rewrites *
script_rewrites(const struct script *s)
{
    const char *const *hosts;
    if (s->rewrites == NULL ||
        (mitm_rewrites_count(s->rewrites) == 0 && mitm_rewrites_hostnames(s->rewrites, &hosts) == 0))
        return NULL;
    return s->rewrites;
}
