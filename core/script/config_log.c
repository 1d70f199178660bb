#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "script/script_int.h"

/* log_format and log_file (types checked by lua/chute.lua). The file opens
 * when the bundle is installed (engine/), not here: `chute check` and
 * `chute route` write nowhere. */
void
script_log_read(struct script *s, int t)
{
    lua_State *L = s->L;
    struct script_config *c = &s->cfg;
    c->log_format = -1;
    if (lua_getfield(L, t, "log_format") == LUA_TSTRING)
        c->log_format = log_format_parse(lua_tostring(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, t, "log_file") == LUA_TSTRING) {
        const char *v = lua_tostring(L, -1);
        char path[4200];
        if (v[0] != '/' && s->dir != NULL)
            snprintf(path, sizeof(path), "%s/%s", s->dir, v); /* relative to the bundle */
        else
            snprintf(path, sizeof(path), "%s", v);
        c->log_file = strdup(path);
    }
    lua_pop(L, 1);
}
