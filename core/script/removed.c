/* Names a bundle ported from plain Lua reaches for that the sandbox leaves
 * out: reading one raises a message saying so (and what to use), rather
 * than "attempt to call a nil value" a line later. Other missing names
 * stay nil, so `if jit then` and the like keep working. */
#include <string.h>

#include "script/hint.h"
#include "script/script_int.h"

struct removed {
    const char *lib; /* "os", "io", or "" for a global */
    const char *name;
    const char *why;
};

static const char run[] = "bundles cannot run programs";
static const char ro[] = "bundles are read-only";
static const char mod[] = "require \"name\" loads the bundle's name.lua";

static const struct removed removed[] = {
    {"os", "execute", run},
    {"os", "exit", "a bundle cannot stop the engine"},
    {"os", "getenv", "the engine's environment is not the bundle's (put settings in main.lua)"},
    {"os", "remove", ro},
    {"os", "rename", ro},
    {"os", "tmpname", ro},
    {"os", "setlocale", "the locale is the engine's"},
    {"io", "popen", run},
    {"io", "lines", "read a bundle file with io.open(path):lines()"},
    {"io", "read", "read a bundle file with io.open(path):read()"},
    {"io", "input", "read a bundle file with io.open(path)"},
    {"io", "write", "log with print or chute.log"},
    {"io", "output", ro},
    {"io", "tmpfile", ro},
    {"io", "stdout", "log with print or chute.log"},
    {"io", "stderr", "log with print or chute.log"},
    {"io", "stdin", "the engine's standard input is not the bundle's"},
    {"", "dofile", mod},
    {"", "loadfile", mod},
    {"", "package", "require finds the bundle's modules (require \"a.b\" loads a/b.lua)"},
    {"", "debug", "no debug library in bundles"},
    {"", "loadstring", "Lua 5.4 has load"},
    {"", "unpack", "Lua 5.4 has table.unpack"},
    {"", "setfenv", "Lua 5.4 has load's env argument"},
    {"", "getfenv", "Lua 5.4 has _ENV"},
    {"", "module", "return a table from the module"},
};

static int
l_removed_index(lua_State *L)
{
    const char *lib = lua_tostring(L, lua_upvalueindex(1));
    const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    for (size_t i = 0; k != NULL && i < sizeof(removed) / sizeof(removed[0]); i++) {
        if (strcmp(removed[i].lib, lib) != 0 || strcmp(removed[i].name, k) != 0)
            continue;
        return luaL_error(L, "%s%s%s is not available in the sandbox: %s", lib, *lib ? "." : "",
                          k, removed[i].why);
    }
    return 0;
}

void
script_removed_index(lua_State *L, const char *lib)
{
    lua_pushstring(L, lib != NULL ? lib : "");
    lua_pushcclosure(L, l_removed_index, 1);
    lua_setfield(L, -2, "__index");
}

void
script_removed_guard(lua_State *L, const char *lib)
{
    lua_newtable(L);
    script_removed_index(L, lib);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
}
