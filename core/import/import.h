#ifndef CHUTE_IMPORT_IMPORT_H
#define CHUTE_IMPORT_IMPORT_H

/* Clash/mihomo YAML configs and Surge profiles as a bundle's Lua: proxies,
 * groups, rule sets and rules (chute.proxy / chute.group / chute.ruleset /
 * chute.rules), listeners, DNS and TUN (chute.config), and a Surge
 * profile's rewrite sections through the module reader (mitm/rewrite.h).
 * One converter, one output: the Lua text. `chute import` writes it as
 * main.lua; chute.clash / chute.surge run the same text in the bundle.
 *
 * Whatever the file has that chute cannot do (a protocol, a rule type, an
 * option) becomes one note "file:line: what: what was done instead"; the
 * Lua carries the notes as comments. Nothing is dropped without a note,
 * nothing the file did not say is added. Sans-I/O but for |read|, which
 * reads the files the config names (Clash file proxy providers, Surge Map
 * Local data). */

#include <stddef.h>

enum import_kind {
    IMPORT_AUTO = 0, /* by the name (.yaml/.yml, .conf) then the text */
    IMPORT_CLASH,
    IMPORT_SURGE,
};

/* Reads |path| (as the config wrote it: relative to the config's folder)
 * into a malloc'd buffer: 0, or an errno value. */
typedef int (*import_read_fn)(void *ud, const char *path, char **data, size_t *len);

struct import_opts {
    enum import_kind kind;
    /* 0: a bundle's main.lua (chute import). 1: a chunk for chute.clash /
     * chute.surge: it takes an options table as `...` ({ config = false |
     * {...}, route = false }), puts each statement on its source line where
     * the order allows (so errors name the config's own lines), and keeps
     * the rule lists and the module where the config has them. */
    int chunk;
    /* The folder the config's relative paths start from, as the bundle
     * sees it ("" for the bundle's top, "clash/" ...): prefixed to the
     * paths the chunk names. */
    const char *base;
    import_read_fn read;
    void *ud;
};

/* A file the bundle needs beside main.lua (chute import copies it). */
struct import_copy {
    char *from; /* as the config names it, relative to the config's folder */
    char *to;   /* inside the bundle: "rules/name.yaml" */
    int optional; /* a GEO database mihomo keeps beside its config: copied
                   * when it is there, else said (chute looks beside main.lua) */
};

struct import_result {
    char *lua;            /* NUL-terminated */
    size_t lua_len;
    char *module;         /* Surge: the rewrite sections as a module file, NULL if none */
    size_t module_len;
    char *module_name;    /* its name in the bundle ("profile.sgmodule") */
    char **notes;         /* "file:line: ..." */
    size_t nnotes;
    struct import_copy *copies;
    size_t ncopies;
};

/* Converts |text| (|len| bytes; |name| is the file's name in notes and
 * errors). 0 with |out| filled (free it with import_result_free), or -1
 * with |err| naming "name:line: why" when the file cannot be read as a
 * config at all (broken YAML, a line outside any section, ...). */
int import_convert(const char *text, size_t len, const char *name, const struct import_opts *o,
                   struct import_result *out, char *err, size_t errlen);
void import_result_free(struct import_result *r);

/* IMPORT_CLASH or IMPORT_SURGE for |name| and |text|. */
enum import_kind import_detect(const char *name, const char *text, size_t len);

#endif
