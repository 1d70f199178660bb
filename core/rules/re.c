#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/re.h"

struct rules_re {
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    int groups;
};

struct rules_re *
rules_re_new(const char *pattern, size_t len, int flags, char *err, size_t errlen)
{
    struct rules_re *re = calloc(1, sizeof(*re));
    if (re == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int ec;
    PCRE2_SIZE eoff;
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
    if (flags & RULES_RE_CASELESS)
        opts |= PCRE2_CASELESS;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &ec, &eoff, NULL);
    if (re->code == NULL) {
        char msg[160];
        pcre2_get_error_message(ec, (PCRE2_UCHAR *)msg, sizeof(msg));
        snprintf(err, errlen, "%s at offset %zu", msg, (size_t)eoff);
        free(re);
        return NULL;
    }
    /* JIT is an optimisation: where it is unavailable (no executable
     * memory) the interpreter runs the same pattern under the same limits. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    uint32_t cap = 0;
    pcre2_pattern_info(re->code, PCRE2_INFO_CAPTURECOUNT, &cap);
    re->groups = (int)cap;
    re->md = pcre2_match_data_create_from_pattern(re->code, NULL);
    re->mc = pcre2_match_context_create(NULL);
    if (re->md == NULL || re->mc == NULL) {
        rules_re_free(re);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pcre2_set_match_limit(re->mc, RULES_RE_MATCH_LIMIT);
    pcre2_set_depth_limit(re->mc, RULES_RE_DEPTH_LIMIT);
    return re;
}

void
rules_re_free(struct rules_re *re)
{
    if (re == NULL)
        return;
    pcre2_match_context_free(re->mc);
    pcre2_match_data_free(re->md);
    pcre2_code_free(re->code);
    free(re);
}

int
rules_re_groups(const struct rules_re *re)
{
    return re->groups;
}

int
rules_re_match(const struct rules_re *re, const char *subject, size_t n, size_t *ovec,
               int npairs)
{
    return rules_re_match_at(re, subject, n, 0, ovec, npairs);
}

int
rules_re_match_at(const struct rules_re *re, const char *subject, size_t n, size_t start,
                  size_t *ovec, int npairs)
{
    if (start > n)
        return RULES_RE_NOMATCH;
    int rc = pcre2_match(re->code, (PCRE2_SPTR)subject, n, start, 0, re->md, re->mc);
    if (rc == PCRE2_ERROR_NOMATCH || rc == PCRE2_ERROR_PARTIAL)
        return RULES_RE_NOMATCH;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT)
        return RULES_RE_LIMIT;
    if (rc < 0)
        return RULES_RE_NOMATCH; /* anything else (bad UTF is matched around) */
    if (rc == 0)
        rc = (int)pcre2_get_ovector_count(re->md);
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(re->md);
    for (int i = 0; ovec != NULL && i < npairs; i++) {
        int set = i < rc && ov[2 * i] != PCRE2_UNSET;
        ovec[2 * i] = set ? ov[2 * i] : (size_t)-1;
        ovec[2 * i + 1] = set ? ov[2 * i + 1] : (size_t)-1;
    }
    return rc;
}

static size_t
put(char *out, size_t cap, size_t at, const char *s, size_t n)
{
    if (at < cap)
        memcpy(out + at, s, n < cap - at ? n : cap - at);
    return at + n;
}

size_t
rules_re_expand(const char *tmpl, size_t tlen, const char *subject, const size_t *ovec,
                int pairs, char *out, size_t cap)
{
    size_t at = 0;
    for (size_t i = 0; i < tlen; i++) {
        if (tmpl[i] != '$' || i + 1 == tlen) {
            at = put(out, cap, at, tmpl + i, 1);
            continue;
        }
        char c = tmpl[i + 1];
        long g = -1;
        if (c == '$') {
            at = put(out, cap, at, "$", 1);
            i++;
            continue;
        }
        if (c == '&') {
            g = 0;
            i++;
        } else if (c >= '0' && c <= '9') {
            g = c - '0';
            i++;
        } else if (c == '{') {
            size_t j = i + 2;
            long v = 0;
            while (j < tlen && tmpl[j] >= '0' && tmpl[j] <= '9' && v < 1000)
                v = v * 10 + (tmpl[j++] - '0');
            if (j < tlen && tmpl[j] == '}' && j > i + 2) {
                g = v;
                i = j;
            }
        }
        if (g < 0) { /* not a reference: a literal dollar */
            at = put(out, cap, at, "$", 1);
            continue;
        }
        if (g < pairs && ovec[2 * g] != (size_t)-1)
            at = put(out, cap, at, subject + ovec[2 * g], ovec[2 * g + 1] - ovec[2 * g]);
    }
    return at;
}
