#ifndef CHUTE_SCRIPT_HINT_H
#define CHUTE_SCRIPT_HINT_H

/* Private to core/script: the hints load-time errors carry (a misspelt
 * name, a value of the wrong type, the line of a key inside a big table). */

#include <stddef.h>

#include <lua.h>

struct script;

/* suggest.c */
/* The name of |names| (|n| of them, or up to a NULL when |n| is SIZE_MAX)
 * nearest to |word| by edit distance (letters swapped, added, dropped or
 * changed; case counts half), when it is near enough to be the intended
 * one; NULL otherwise, or when |word| is one of them exactly. */
const char *script_suggest(const char *word, const char *const *names, size_t n);
/* Writes to |buf| the hint for a policy name the bundle does not have:
 * "policy names are case-sensitive: did you mean DIRECT?", "did you mean
 * 'auto'?", or "" when no name is near. */
void script_policy_hint(const struct script *s, const char *name, char *buf, size_t len);
/* core.suggest(word, {names}) for lua/chute.lua: the nearest name or nil. */
int script_l_suggest(lua_State *L);

/* typeerr.c */
/* Pushes "PATH: expected WANT, got TYPE VALUE" for the value at |idx|,
 * the value shown when it is a string, number or boolean; |unit| (NULL:
 * none) names what a number means ("seconds"), and a string such as "5s"
 * then gets the number to write instead. Returns the pushed string. */
const char *script_type_error(lua_State *L, int idx, const char *path, const char *want,
                              const char *unit);
/* Pushes and returns what a message shows of the value at |idx|: its type
 * and, for a string, number or boolean, the value ("string \"5s\"",
 * "float 2.5", "table"). */
const char *script_got(lua_State *L, int idx);
/* core.type_error(path, value, want [, unit]) for lua/chute.lua. */
int script_l_type_error(lua_State *L);

/* srcpos.c */
/* Where a key of a table constructor passed to a call is written: the call
 * is at |line| of |src| (|len| bytes), to function |fname| (the name after
 * its last '.'), optionally with string argument |arg| first (chute.proxy
 * "hk" {...}); |path| is "a.b.c" (a name, or "#3" for the third positional
 * entry). Returns the line of the deepest key of |path| found, or |line|. */
int script_src_locate(const char *src, size_t len, int line, const char *fname, const char *arg,
                      const char *path);
/* "file:line: " of the key |path| in the table argument of the call that
 * the Lua function at stack level |level| is making (1: the caller of the
 * running C function), or of the call itself when its source cannot be
 * read. |fname|, |arg|: as script_src_locate. */
void script_key_where(lua_State *L, int level, const char *fname, const char *arg,
                      const char *path, char *buf, size_t len);
/* The same for a call recorded earlier: |source| is the chunk's source
 * ("@dir/main.lua"), |short_src| its shown name. */
void script_key_where_at(struct script *s, const char *source, const char *short_src, int line,
                         const char *fname, const char *arg, const char *path, char *buf,
                         size_t len);
/* core.key_where(path) for lua/chute.lua's chute.config: "file:line: ". */
int script_l_key_where(lua_State *L);
/* core.call_site(level): the source, shown name and line of the call the
 * function at |level| makes (chute.lua's M.config records chute.config's). */
int script_l_call_site(lua_State *L);
/* Copies chute.config's call site from chute.lua's state table at |st|
 * into |s| (config.c, while the bundle loads). */
void script_config_site(struct script *s, int st);
/* "file:line: " of key |path| of the bundle's chute.config table, or ""
 * when the bundle has no chute.config. */
void script_config_key_where(struct script *s, const char *path, char *buf, size_t len);

/* removed.c: os.execute, io.popen and the other names the sandbox leaves
 * out raise a message saying so when read from the table at the top of
 * the stack (|lib|: "os", "io" or NULL for the globals): guard gives it a
 * hidden metatable; index sets __index in the metatable at the top. */
void script_removed_guard(lua_State *L, const char *lib);
void script_removed_index(lua_State *L, const char *lib);


#endif
