/* Did-you-mean: the known name nearest to a misspelt one, by optimal
 * string alignment distance (Levenshtein plus swapped neighbours), over
 * names folded to lower case with '-' and '_' alike, so "Listen",
 * "skip-cert-verify" and "DOMAIN-SUFIX" all find theirs. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "outbound/set.h"
#include "script/hint.h"
#include "script/script_int.h"

#define MAX_WORD 64

static char
fold(char c)
{
    if (c >= 'A' && c <= 'Z')
        return (char)(c + 32);
    return c == '-' ? '_' : c;
}

/* The distance of |a| and |b| (both at most MAX_WORD bytes). */
static size_t
distance(const char *a, size_t n, const char *b, size_t m)
{
    size_t d[MAX_WORD + 1][MAX_WORD + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = fold(a[i - 1]) != fold(b[j - 1]);
            size_t v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) &&
                fold(a[i - 2]) == fold(b[j - 1]) && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[n][m];
}

const char *
script_suggest(const char *word, const char *const *names, size_t n)
{
    size_t wl = strlen(word), best_d = SIZE_MAX;
    const char *best = NULL;
    if (wl == 0 || wl > MAX_WORD)
        return NULL;
    /* Short names are near everything: allow fewer edits for them. */
    size_t limit = wl <= 3 ? 1 : wl <= 8 ? 2 : 3;
    for (size_t i = 0; i < n && names[i] != NULL; i++) {
        size_t nl = strlen(names[i]);
        if (strcmp(word, names[i]) == 0)
            return NULL;
        if (nl > MAX_WORD || (nl > wl ? nl - wl : wl - nl) > limit)
            continue;
        size_t d = distance(word, wl, names[i], nl);
        if (d <= limit && d < best_d && d < nl) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}

void
script_policy_hint(const struct script *s, const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    static const char *const builtin[] = {"DIRECT", "REJECT", "REJECT-DROP", "REJECT-NO-DROP",
                                          "REJECT-TINYGIF"};
    const char *best = script_suggest(name, builtin, sizeof(builtin) / sizeof(builtin[0]));
    size_t np = 0;
    if (best == NULL && s != NULL) {
        /* Declared names: from the set once built, else the declarations. */
        const char *names[64];
        if (s->set != NULL) {
            size_t total = outbound_set_count(s->set);
            for (size_t id = FLOW_POLICY__BUILTIN; id < total && np < 64; id++)
                names[np++] = outbound_set_name(s->set, (int)id);
        } else {
            for (size_t i = 0; i < s->nproxies && np < 64; i++)
                names[np++] = s->proxies[i].name;
            for (size_t i = 0; i < s->ngroups && np < 64; i++)
                names[np++] = s->groups[i].name;
        }
        best = script_suggest(name, names, np);
        /* Past 64 names, a case-only match still counts. */
        for (size_t i = 64; best == NULL && s->set == NULL && i < s->nproxies + s->ngroups; i++) {
            const char *c = i < s->nproxies ? s->proxies[i].name : s->groups[i - s->nproxies].name;
            if (strcasecmp(c, name) == 0)
                best = c;
        }
    }
    if (best == NULL)
        snprintf(buf, len, "%s", "");
    else if (strcasecmp(best, name) == 0)
        snprintf(buf, len, "policy names are case-sensitive: did you mean %s%s%s?",
                 best[0] >= 'A' && best[0] <= 'Z' && script_policy_lookup(NULL, best) >= 0 ? ""
                                                                                          : "'",
                 best, script_policy_lookup(NULL, best) >= 0 ? "" : "'");
    else
        snprintf(buf, len, "did you mean '%s'?", best);
}

int
script_l_suggest(lua_State *L)
{
    const char *word = luaL_checkstring(L, 1);
    const char *names[256];
    size_t n = 0;
    luaL_checktype(L, 2, LUA_TTABLE);
    for (lua_Integer i = 1; n < 256 && lua_rawgeti(L, 2, i) == LUA_TSTRING; i++) {
        names[n++] = lua_tostring(L, -1); /* the table keeps them alive */
        lua_pop(L, 1);
    }
    const char *best = script_suggest(word, names, n);
    if (best == NULL)
        return 0;
    lua_pushstring(L, best);
    return 1;
}
