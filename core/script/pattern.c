#include <ctype.h>
#include <string.h>

#include "script/script_int.h"

/* string.find, match, gmatch and gsub with Lua 5.4's patterns (reference
 * manual §6.4.1), written for chute so that matching is charged to the
 * call's budget: the stock matcher backtracks inside one C call, where the
 * instruction hook never fires, and ("a"):rep(3000):find(".-.-.-.-b") runs
 * for hours. Here every matcher step counts, and script_budget_charge ends
 * the call once the budget or the wall clock runs out. The matcher holds
 * only C stack, so that raise leaks nothing. */

#define MAX_CAPTURES 32 /* LUA_MAXCAPTURES */
#define MAX_DEPTH 200   /* nested matcher calls, as Lua's MAXCCALLS */
#define CHARGE_EVERY 1024
#define CAP_UNFINISHED (-1)
#define CAP_POSITION (-2)
#define SPECIALS "^$*+?.([%-"

struct mstate {
    const char *src, *src_end, *pat_end;
    lua_State *L;
    int depth;      /* nested calls left */
    unsigned steps; /* not yet charged */
    int level;      /* captures opened */
    struct {
        const char *init;
        ptrdiff_t len;
    } cap[MAX_CAPTURES];
};

static void
step(struct mstate *ms)
{
    if (++ms->steps >= CHARGE_EVERY) {
        ms->steps = 0;
        script_budget_charge(ms->L, CHARGE_EVERY);
    }
}

static void
settle(struct mstate *ms)
{
    script_budget_charge(ms->L, ms->steps);
    ms->steps = 0;
}

static void
reset(struct mstate *ms)
{
    ms->level = 0;
    ms->depth = MAX_DEPTH;
}

static void
init_state(struct mstate *ms, lua_State *L, const char *s, size_t ls, const char *p, size_t lp)
{
    ms->L = L;
    ms->src = s;
    ms->src_end = s + ls;
    ms->pat_end = p + lp;
    ms->steps = 0;
    reset(ms);
}

/* The end of the single-character class at |p|. */
static const char *
class_end(struct mstate *ms, const char *p)
{
    char c = *p++;
    if (c == '%') {
        if (p >= ms->pat_end)
            luaL_error(ms->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c == '[') {
        if (p < ms->pat_end && *p == '^')
            p++;
        /* The first character of a set is itself even when it is ']'. */
        do {
            if (p >= ms->pat_end)
                luaL_error(ms->L, "malformed pattern (missing ']')");
            c = *p++;
            if (c == '%') {
                if (p >= ms->pat_end)
                    luaL_error(ms->L, "malformed pattern (missing ']')");
                p++;
            }
        } while (p >= ms->pat_end || *p != ']');
        return p + 1;
    }
    return p;
}

static int
class_match(int c, int cl)
{
    int r;
    switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'g': r = isgraph(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break; /* deprecated, still in Lua 5.4 */
    default: return cl == c;
    }
    r = r != 0;
    return isupper(cl) ? !r : r;
}

/* |p| at the '[', |ec| at the closing ']'. */
static int
set_match(int c, const char *p, const char *ec)
{
    int want = 1;
    p++;
    if (*p == '^') {
        want = 0;
        p++;
    }
    for (; p < ec; p++) {
        if (*p == '%') {
            p++;
            if (class_match(c, (unsigned char)*p))
                return want;
        } else if (p[1] == '-' && p + 2 < ec) {
            if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2])
                return want;
            p += 2;
        } else if ((unsigned char)*p == c) {
            return want;
        }
    }
    return !want;
}

static int
single_match(struct mstate *ms, const char *s, const char *p, const char *ep)
{
    if (s >= ms->src_end)
        return 0;
    int c = (unsigned char)*s;
    switch (*p) {
    case '.': return 1;
    case '%': return class_match(c, (unsigned char)p[1]);
    case '[': return set_match(c, p, ep - 1);
    default: return (unsigned char)*p == c;
    }
}

static const char *do_match(struct mstate *ms, const char *s, const char *p);

static const char *
max_expand(struct mstate *ms, const char *s, const char *p, const char *ep)
{
    ptrdiff_t i = 0;
    while (single_match(ms, s + i, p, ep)) {
        step(ms);
        i++;
    }
    for (; i >= 0; i--) {
        const char *r = do_match(ms, s + i, ep + 1);
        if (r != NULL)
            return r;
    }
    return NULL;
}

static const char *
min_expand(struct mstate *ms, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = do_match(ms, s, ep + 1);
        if (r != NULL)
            return r;
        if (!single_match(ms, s, p, ep))
            return NULL;
        s++;
    }
}

static const char *
start_capture(struct mstate *ms, const char *s, const char *p, ptrdiff_t what)
{
    if (ms->level >= MAX_CAPTURES)
        luaL_error(ms->L, "too many captures");
    ms->cap[ms->level].init = s;
    ms->cap[ms->level].len = what;
    ms->level++;
    const char *r = do_match(ms, s, p);
    if (r == NULL)
        ms->level--;
    return r;
}

static const char *
end_capture(struct mstate *ms, const char *s, const char *p)
{
    int l = ms->level - 1;
    while (l >= 0 && ms->cap[l].len != CAP_UNFINISHED)
        l--;
    if (l < 0)
        luaL_error(ms->L, "invalid pattern capture");
    ms->cap[l].len = s - ms->cap[l].init;
    const char *r = do_match(ms, s, p);
    if (r == NULL)
        ms->cap[l].len = CAP_UNFINISHED;
    return r;
}

static const char *
match_balance(struct mstate *ms, const char *s, const char *p)
{
    if (p + 1 >= ms->pat_end)
        luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= ms->src_end || *s != *p)
        return NULL;
    char open = p[0], close = p[1];
    int depth = 1;
    while (++s < ms->src_end) {
        step(ms);
        if (*s == close) {
            if (--depth == 0)
                return s + 1;
        } else if (*s == open) {
            depth++;
        }
    }
    return NULL;
}

static const char *
match_capture(struct mstate *ms, const char *s, int digit)
{
    int l = digit - '1';
    if (l < 0 || l >= ms->level || ms->cap[l].len == CAP_UNFINISHED)
        luaL_error(ms->L, "invalid capture index %%%d", l + 1);
    /* A position capture has no text: it never matches. */
    ptrdiff_t len = ms->cap[l].len;
    if (len >= 0 && ms->src_end - s >= len && memcmp(ms->cap[l].init, s, (size_t)len) == 0)
        return s + len;
    return NULL;
}

/* The end of the match of pattern |p| at |s|, or NULL. */
static const char *
do_match(struct mstate *ms, const char *s, const char *p)
{
    if (ms->depth-- == 0)
        luaL_error(ms->L, "pattern too complex");
    for (;;) {
        step(ms);
        if (p == ms->pat_end)
            break;
        if (*p == '(') {
            s = p + 1 < ms->pat_end && p[1] == ')' ? start_capture(ms, s, p + 2, CAP_POSITION)
                                                    : start_capture(ms, s, p + 1, CAP_UNFINISHED);
            break;
        }
        if (*p == ')') {
            s = end_capture(ms, s, p + 1);
            break;
        }
        if (*p == '$' && p + 1 == ms->pat_end) {
            s = s == ms->src_end ? s : NULL;
            break;
        }
        if (*p == '%' && p + 1 < ms->pat_end && p[1] == 'b') {
            s = match_balance(ms, s, p + 2);
            if (s == NULL)
                break;
            p += 4;
            continue;
        }
        if (*p == '%' && p + 1 < ms->pat_end && p[1] == 'f') {
            p += 2;
            if (p >= ms->pat_end || *p != '[')
                luaL_error(ms->L, "missing '[' after '%%f' in pattern");
            const char *ep = class_end(ms, p);
            int prev = s == ms->src ? 0 : (unsigned char)s[-1];
            int cur = s < ms->src_end ? (unsigned char)*s : 0;
            if (set_match(prev, p, ep - 1) || !set_match(cur, p, ep - 1)) {
                s = NULL;
                break;
            }
            p = ep;
            continue;
        }
        if (*p == '%' && p + 1 < ms->pat_end && isdigit((unsigned char)p[1])) {
            s = match_capture(ms, s, (unsigned char)p[1]);
            if (s == NULL)
                break;
            p += 2;
            continue;
        }
        const char *ep = class_end(ms, p);
        char q = ep < ms->pat_end ? *ep : '\0';
        if (!single_match(ms, s, p, ep)) {
            if (q == '*' || q == '?' || q == '-') {
                p = ep + 1; /* zero repetitions are fine */
                continue;
            }
            s = NULL;
            break;
        }
        if (q == '?') {
            const char *r = do_match(ms, s + 1, ep + 1);
            if (r != NULL) {
                s = r;
                break;
            }
            p = ep + 1;
            continue;
        }
        if (q == '+') {
            s = max_expand(ms, s + 1, p, ep);
            break;
        }
        if (q == '*') {
            s = max_expand(ms, s, p, ep);
            break;
        }
        if (q == '-') {
            s = min_expand(ms, s, p, ep);
            break;
        }
        s++;
        p = ep;
    }
    ms->depth++;
    return s;
}

/* Pushes capture |i| (or the whole match |s|..|e| when there are none). */
static void
push_capture(struct mstate *ms, int i, const char *s, const char *e)
{
    if (i >= ms->level) {
        if (i != 0)
            luaL_error(ms->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(ms->L, s, (size_t)(e - s));
        return;
    }
    ptrdiff_t len = ms->cap[i].len;
    if (len == CAP_UNFINISHED)
        luaL_error(ms->L, "unfinished capture");
    if (len == CAP_POSITION)
        lua_pushinteger(ms->L, (ms->cap[i].init - ms->src) + 1);
    else
        lua_pushlstring(ms->L, ms->cap[i].init, (size_t)len);
}

/* |s| NULL: the captures only (find's extra results). */
static int
push_captures(struct mstate *ms, const char *s, const char *e)
{
    int n = ms->level == 0 && s != NULL ? 1 : ms->level;
    luaL_checkstack(ms->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        push_capture(ms, i, s, e);
    return n;
}

/* Lua's string positions: negative from the end, clipped to 1. */
static size_t
start_of(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return len + (size_t)pos + 1;
}

static int
has_specials(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++)
        if (p[i] != '\0' && strchr(SPECIALS, p[i]) != NULL)
            return 1;
    return 0;
}

static int
find_or_match(lua_State *L, int find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = start_of(luaL_optinteger(L, 3, 1), ls) - 1;
    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
        script_budget_charge(L, (ls - init) / 64);
        const char *at = lp == 0 ? s + init : memmem(s + init, ls - init, p, lp);
        if (at == NULL) {
            luaL_pushfail(L);
            return 1;
        }
        lua_pushinteger(L, (at - s) + 1);
        lua_pushinteger(L, (at - s) + (lua_Integer)lp);
        return 2;
    }
    struct mstate ms;
    int anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    init_state(&ms, L, s, ls, p, lp);
    const char *from = s + init;
    do {
        reset(&ms);
        const char *e = do_match(&ms, from, p);
        if (e != NULL) {
            settle(&ms);
            if (!find)
                return push_captures(&ms, from, e);
            lua_pushinteger(L, (from - s) + 1);
            lua_pushinteger(L, e - s);
            return push_captures(&ms, NULL, NULL) + 2;
        }
    } while (from++ < ms.src_end && !anchor);
    settle(&ms);
    luaL_pushfail(L);
    return 1;
}

static int
l_find(lua_State *L)
{
    return find_or_match(L, 1);
}

static int
l_match(lua_State *L)
{
    return find_or_match(L, 0);
}

struct gmatch {
    const char *p;         /* the pattern (an upvalue keeps it alive) */
    const char *at;        /* where the next search starts */
    const char *last;      /* the end of the last match (no empty match there again) */
    struct mstate ms;
};

static int
gmatch_next(lua_State *L)
{
    struct gmatch *g = lua_touserdata(L, lua_upvalueindex(3));
    g->ms.L = L; /* the iterator may run in another coroutine */
    for (const char *from = g->at; from <= g->ms.src_end; from++) {
        reset(&g->ms);
        const char *e = do_match(&g->ms, from, g->p);
        if (e != NULL && e != g->last) {
            settle(&g->ms);
            g->at = g->last = e;
            return push_captures(&g->ms, from, e);
        }
    }
    settle(&g->ms);
    return 0;
}

static int
l_gmatch(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = start_of(luaL_optinteger(L, 3, 1), ls) - 1;
    if (init > ls)
        init = ls + 1; /* past the end: no match */
    lua_settop(L, 2); /* the strings stay alive as upvalues */
    struct gmatch *g = lua_newuserdatauv(L, sizeof(*g), 0);
    init_state(&g->ms, L, s, ls, p, lp);
    g->p = p;
    g->at = s + init;
    g->last = NULL;
    lua_pushcclosure(L, gmatch_next, 3);
    return 1;
}

/* Appends the replacement of the match |s|..|e| to |b|. */
static void
add_value(struct mstate *ms, luaL_Buffer *b, const char *s, const char *e, int tr)
{
    lua_State *L = ms->L;
    if (tr == LUA_TSTRING || tr == LUA_TNUMBER) {
        size_t l;
        const char *r = lua_tolstring(L, 3, &l);
        for (size_t i = 0; i < l; i++) {
            if (r[i] != '%') {
                luaL_addchar(b, r[i]);
            } else if (++i < l && r[i] == '%') {
                luaL_addchar(b, '%');
            } else if (i < l && isdigit((unsigned char)r[i])) {
                if (r[i] == '0')
                    luaL_addlstring(b, s, (size_t)(e - s));
                else {
                    push_capture(ms, r[i] - '1', s, e);
                    luaL_tolstring(L, -1, NULL);
                    lua_remove(L, -2);
                    luaL_addvalue(b);
                }
            } else {
                luaL_error(L, "invalid use of '%c' in replacement string", '%');
            }
        }
        return;
    }
    if (tr == LUA_TFUNCTION) {
        lua_pushvalue(L, 3);
        int n = push_captures(ms, s, e);
        lua_call(L, n, 1);
    } else {
        push_capture(ms, 0, s, e);
        lua_gettable(L, 3);
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s)); /* false or nil: keep the match */
    } else if (!lua_isstring(L, -1)) {
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    } else {
        luaL_addvalue(b);
    }
}

static int
l_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *src = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int tr = lua_type(L, 3);
    lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    luaL_argexpected(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION ||
                            tr == LUA_TTABLE,
                     3, "string/function/table");
    int anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    struct mstate ms;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    init_state(&ms, L, src, ls, p, lp);
    const char *last = NULL;
    lua_Integer n = 0;
    while (n < max) {
        reset(&ms);
        const char *e = do_match(&ms, src, p);
        if (e != NULL && e != last) {
            n++;
            add_value(&ms, &b, src, e, tr);
            src = last = e;
        } else if (src < ms.src_end) {
            luaL_addchar(&b, *src++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    settle(&ms);
    luaL_addlstring(&b, src, (size_t)(ms.src_end - src));
    luaL_pushresult(&b);
    lua_pushinteger(L, n);
    return 2;
}

void
script_pattern_open(lua_State *L, int string_lib)
{
    static const luaL_Reg fns[] = {
        {"find", l_find}, {"match", l_match}, {"gmatch", l_gmatch}, {"gsub", l_gsub}, {NULL, NULL},
    };
    for (const luaL_Reg *f = fns; f->name != NULL; f++) {
        lua_pushcfunction(L, f->func);
        lua_setfield(L, string_lib, f->name);
    }
}
