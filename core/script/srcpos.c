/* The line of a key inside a table constructor. Lua reports an error in
 * chute.config { ... } at the call's line; the key path the error names
 * ("timeouts.connect") is found again in the source text: from the call's
 * line, the call to |fname|, then its constructor's entries, key by key.
 * A small tokenizer (names, strings, long brackets, comments, brackets,
 * block keywords), no Lua parser: when the source does not have the
 * expected shape (a table built elsewhere, a generated key), the call's
 * line stands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script/hint.h"
#include "script/script_int.h"

enum tok_type { T_EOF, T_NAME, T_STRING, T_PUNCT, T_OTHER };

struct tok {
    enum tok_type type;
    const char *p; /* names and strings: the text (a string's, unescaped as written) */
    size_t n;
    char c;        /* T_PUNCT: the character; '=' only for a single '=' */
    int line;
};

struct lex {
    const char *s, *end;
    int line;
    struct tok back[2]; /* read and pushed back, the next one last */
    int nback;
};

static int
is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "[[", "[==[": the level, or -1 when |p| opens no long bracket. */
static int
long_open(const char *p, const char *end)
{
    if (p >= end || *p != '[')
        return -1;
    int level = 0;
    for (p++; p < end && *p == '='; p++)
        level++;
    return p < end && *p == '[' ? level : -1;
}

/* Skips a long bracket of |level| starting at lx->s; counts lines. */
static void
skip_long(struct lex *lx, int level)
{
    lx->s += level + 2;
    while (lx->s < lx->end) {
        if (*lx->s == '\n')
            lx->line++;
        if (*lx->s == ']') {
            const char *q = lx->s + 1;
            int l = 0;
            while (q < lx->end && *q == '=')
                q++, l++;
            if (l == level && q < lx->end && *q == ']') {
                lx->s = q + 1;
                return;
            }
        }
        lx->s++;
    }
}

static struct tok
lex_read(struct lex *lx)
{
    struct tok t = {T_EOF, NULL, 0, 0, 0};
    for (;;) {
        while (lx->s < lx->end && (*lx->s == ' ' || *lx->s == '\t' || *lx->s == '\r' ||
                                   *lx->s == '\n' || *lx->s == '\f' || *lx->s == '\v')) {
            if (*lx->s == '\n')
                lx->line++;
            lx->s++;
        }
        if (lx->end - lx->s >= 2 && lx->s[0] == '-' && lx->s[1] == '-') {
            lx->s += 2;
            int level = long_open(lx->s, lx->end);
            if (level >= 0) {
                skip_long(lx, level);
            } else {
                while (lx->s < lx->end && *lx->s != '\n')
                    lx->s++;
            }
            continue;
        }
        break;
    }
    t.line = lx->line;
    if (lx->s >= lx->end)
        return t;
    char c = *lx->s;
    int level = long_open(lx->s, lx->end);
    if (level >= 0) {
        t.type = T_STRING;
        t.p = lx->s + level + 2;
        skip_long(lx, level);
        t.n = (size_t)(lx->s - t.p) >= (size_t)level + 2 ? (size_t)(lx->s - t.p) - level - 2 : 0;
        return t;
    }
    if (c == '"' || c == '\'') {
        t.type = T_STRING;
        t.p = ++lx->s;
        while (lx->s < lx->end && *lx->s != c && *lx->s != '\n') {
            if (*lx->s == '\\' && lx->s + 1 < lx->end) {
                if (lx->s[1] == '\n')
                    lx->line++;
                lx->s++;
            }
            lx->s++;
        }
        t.n = (size_t)(lx->s - t.p);
        if (lx->s < lx->end)
            lx->s++;
        return t;
    }
    if (is_name_char(c)) {
        t.type = c >= '0' && c <= '9' ? T_OTHER : T_NAME;
        t.p = lx->s;
        while (lx->s < lx->end && (is_name_char(*lx->s) || (t.type == T_OTHER && *lx->s == '.')))
            lx->s++;
        t.n = (size_t)(lx->s - t.p);
        return t;
    }
    t.type = T_PUNCT;
    t.c = c;
    lx->s++;
    /* "==", "<=", ">=", "~=" are not a key's '='. */
    if ((c == '=' || c == '<' || c == '>' || c == '~') && lx->s < lx->end && *lx->s == '=') {
        t.c = '?';
        lx->s++;
    }
    return t;
}

static struct tok
next(struct lex *lx)
{
    if (lx->nback > 0)
        return lx->back[--lx->nback];
    return lex_read(lx);
}

static struct tok
peek(struct lex *lx)
{
    if (lx->nback == 0)
        lx->back[lx->nback++] = lex_read(lx);
    return lx->back[lx->nback - 1];
}

static void
unread(struct lex *lx, struct tok t)
{
    if (lx->nback < 2)
        lx->back[lx->nback++] = t;
}

static int
tok_is(const struct tok *t, const char *word)
{
    return t->type == T_NAME && t->n == strlen(word) && memcmp(t->p, word, t->n) == 0;
}

static int
punct(const struct tok *t, char c)
{
    return t->type == T_PUNCT && t->c == c;
}

/* Skips one value of a constructor: up to the ',' ';' or '}' that ends it
 * (not consumed), over nested brackets and function bodies. */
static void
skip_value(struct lex *lx)
{
    int depth = 0, block = 0;
    for (;;) {
        struct tok t = peek(lx);
        if (t.type == T_EOF)
            return;
        if (depth == 0 && block == 0 && (punct(&t, ',') || punct(&t, ';') || punct(&t, '}')))
            return;
        next(lx);
        if (punct(&t, '{') || punct(&t, '(') || punct(&t, '['))
            depth++;
        else if (punct(&t, '}') || punct(&t, ')') || punct(&t, ']'))
            depth--;
        else if (tok_is(&t, "function") || tok_is(&t, "if") || tok_is(&t, "do") ||
                 tok_is(&t, "repeat"))
            block++;
        else if (tok_is(&t, "end") || tok_is(&t, "until"))
            block--;
        if (depth < 0)
            return;
    }
}

/* After the constructor's '{': the line of path element |el| (|el_n|
 * bytes), then of the rest of |path| inside its value; |found| otherwise. */
static int
walk(struct lex *lx, const char *path, int found)
{
    const char *dot = strchr(path, '.');
    size_t el_n = dot != NULL ? (size_t)(dot - path) : strlen(path);
    long want_pos = path[0] == '#' ? strtol(path + 1, NULL, 10) : 0;
    long pos = 0;
    for (;;) {
        struct tok t = next(lx);
        if (t.type == T_EOF || punct(&t, '}'))
            return found;
        if (punct(&t, ',') || punct(&t, ';'))
            continue;
        const char *key = NULL;
        size_t key_n = 0;
        int line = t.line;
        struct tok a = peek(lx);
        if (t.type == T_NAME && punct(&a, '=')) {
            next(lx);
            key = t.p, key_n = t.n;
        } else if (punct(&t, '[') && a.type == T_STRING) {
            next(lx);
            struct tok close = next(lx), eq = next(lx);
            if (!punct(&close, ']') || !punct(&eq, '='))
                return found;
            key = a.p, key_n = a.n;
        } else if (punct(&t, '[')) {
            /* [expr] = value: a key no path names. */
            int depth = 1;
            while (depth > 0) {
                struct tok u = next(lx);
                if (u.type == T_EOF)
                    return found;
                depth += punct(&u, '[') - punct(&u, ']');
            }
            struct tok eq = next(lx);
            if (!punct(&eq, '='))
                return found;
        } else {
            pos++;
            unread(lx, t); /* the value's first token: skipped or read again */
        }
        int hit = want_pos > 0 ? (key == NULL && pos == want_pos)
                               : (key != NULL && key_n == el_n && memcmp(key, path, el_n) == 0);
        if (!hit) {
            skip_value(lx);
            continue;
        }
        if (dot == NULL)
            return line;
        struct tok v = next(lx);
        if (!punct(&v, '{'))
            return line;
        return walk(lx, dot + 1, line);
    }
}

int
script_src_locate(const char *src, size_t len, int line, const char *fname, const char *arg,
                  const char *path)
{
    struct lex lx = {.s = src, .end = src + len, .line = 1};
    /* The call's line: Lua gives the line where the call's expression begins. */
    while (lx.s < lx.end && lx.line < line)
        if (*lx.s++ == '\n')
            lx.line++;
    struct tok prev = {T_EOF, NULL, 0, 0, 0};
    for (;;) {
        struct tok t = next(&lx);
        if (t.type == T_EOF || t.line > line)
            return line;
        int after_dot = punct(&prev, '.') || punct(&prev, ':');
        prev = t;
        if (!after_dot || !tok_is(&t, fname))
            continue;
        struct lex save = lx;
        struct tok u = next(&lx);
        if (punct(&u, '('))
            u = next(&lx);
        if (arg != NULL) {
            if (u.type != T_STRING || u.n != strlen(arg) || memcmp(u.p, arg, u.n) != 0) {
                lx = save;
                continue;
            }
            u = next(&lx);
            if (punct(&u, ')'))
                u = next(&lx);
            if (punct(&u, '('))
                u = next(&lx);
        }
        if (!punct(&u, '{')) {
            lx = save;
            continue;
        }
        return walk(&lx, path, line);
    }
}

void
script_key_where_at(struct script *s, const char *source, const char *short_src, int line,
                    const char *fname, const char *arg, const char *path, char *buf, size_t len)
{
    if (line <= 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    int at = line;
    if (path != NULL && path[0] != '\0') {
        char why[256];
        size_t n = 0, dl = s->dir != NULL ? strlen(s->dir) : 0;
        char *text = NULL;
        if (source[0] == '@' && dl > 0 && strncmp(source + 1, s->dir, dl) == 0 &&
            source[1 + dl] == '/')
            text = script_bundle_read(s, source + 2 + dl, SCRIPT_MAX_SOURCE, &n, why, sizeof(why));
        if (text != NULL) {
            at = script_src_locate(text, n, line, fname, arg, path);
            free(text);
        } else if (s->main_src != NULL && strcmp(source, "=main.lua") == 0) {
            at = script_src_locate(s->main_src, strlen(s->main_src), line, fname, arg, path);
        }
    }
    snprintf(buf, len, "%s:%d: ", short_src, at);
}

void
script_key_where(lua_State *L, int level, const char *fname, const char *arg, const char *path,
                 char *buf, size_t len)
{
    lua_Debug ar;
    if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "Sl", &ar)) {
        snprintf(buf, len, "%s", "");
        return;
    }
    script_key_where_at(script_of(L), ar.source, ar.short_src, ar.currentline, fname, arg, path,
                        buf, len);
}

/* core.key_where(path [, level]): for chute.config, called from
 * lua/chute.lua's M.config, whose caller (level 2 here) made the call. */
int
script_l_key_where(lua_State *L)
{
    const char *path = luaL_optstring(L, 1, "");
    int level = (int)luaL_optinteger(L, 2, 2);
    char buf[512];
    script_key_where(L, level, "config", NULL, path, buf, sizeof(buf));
    lua_pushstring(L, buf);
    return 1;
}

int
script_l_call_site(lua_State *L)
{
    lua_Debug ar;
    int level = (int)luaL_optinteger(L, 1, 2);
    if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "Sl", &ar))
        return 0;
    lua_pushstring(L, ar.source);
    lua_pushstring(L, ar.short_src);
    lua_pushinteger(L, ar.currentline);
    return 3;
}

void
script_config_site(struct script *s, int st)
{
    lua_State *L = s->L;
    lua_getfield(L, st, "config_source");
    lua_getfield(L, st, "config_short");
    lua_getfield(L, st, "config_line");
    if (lua_isstring(L, -3) && lua_isstring(L, -2) && lua_isinteger(L, -1)) {
        snprintf(s->cfg_source, sizeof(s->cfg_source), "%s", lua_tostring(L, -3));
        snprintf(s->cfg_short, sizeof(s->cfg_short), "%s", lua_tostring(L, -2));
        s->cfg_line = (int)lua_tointeger(L, -1);
    }
    lua_pop(L, 3);
}

void
script_config_key_where(struct script *s, const char *path, char *buf, size_t len)
{
    if (s->cfg_line <= 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    script_key_where_at(s, s->cfg_source, s->cfg_short, s->cfg_line, "config", NULL, path, buf,
                        len);
}
