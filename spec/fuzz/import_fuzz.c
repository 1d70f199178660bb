/* libFuzzer target for the config importer (core/import): the input is a
 * Clash YAML or a Surge profile (the first byte picks which, and bundle
 * or chunk Lua). Whatever it holds, a conversion that succeeds gives Lua
 * that parses (luaL_loadbuffer), every note names the file, and a failed
 * one says where. File providers and Map Local files read as a small
 * proxies list. */

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "import/import.h"

static int
rd(void *ud, const char *path, char **data, size_t *len)
{
    (void)ud;
    (void)path;
    static const char list[] = "proxies:\n  - {name: p1, type: ss, server: 192.0.2.1, port: 1,"
                               " cipher: aes-128-gcm, password: x}\n";
    *data = strdup(list);
    *len = sizeof(list) - 1;
    return *data ? 0 : 12;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct import_opts o = {.kind = data[0] & 1 ? IMPORT_SURGE : IMPORT_CLASH,
                            .chunk = (data[0] >> 1) & 1, .base = "", .read = rd};
    struct import_result r;
    char err[1024];
    const char *name = o.kind == IMPORT_SURGE ? "p.conf" : "c.yaml";
    if (import_convert((const char *)data + 1, size - 1, name, &o, &r, err, sizeof(err)) != 0) {
        CHECK(strncmp(err, name, strlen(name)) == 0);
        return 0;
    }
    CHECK(r.lua != NULL && strlen(r.lua) == r.lua_len);
    for (size_t i = 0; i < r.nnotes; i++)
        CHECK(strchr(r.notes[i], ':') != NULL);
    lua_State *L = luaL_newstate();
    CHECK(L != NULL);
    int rc = luaL_loadbufferx(L, r.lua, r.lua_len, "=import", "t");
    if (rc != LUA_OK)
        fprintf(stderr, "%s\n---\n%s\n", lua_tostring(L, -1), r.lua);
    CHECK(rc == LUA_OK);
    lua_close(L);
    import_result_free(&r);
    return 0;
}
