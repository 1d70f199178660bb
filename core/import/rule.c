#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "import/import_int.h"
#include "rules/list.h"

/* One rule line as Clash and Surge write it: TYPE,VALUE,POLICY[,option...],
 * MATCH|FINAL,POLICY, and AND|OR|NOT,((TYPE,VALUE),(...)),POLICY. */

#define MAX_FIELDS 16

struct span {
    const char *p;
    size_t n;
};

static struct span
trim(struct span s)
{
    while (s.n > 0 && (s.p[0] == ' ' || s.p[0] == '\t'))
        s.p++, s.n--;
    while (s.n > 0 && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t' || s.p[s.n - 1] == '\r'))
        s.n--;
    if (s.n >= 2 && s.p[0] == '"' && s.p[s.n - 1] == '"')
        s.p++, s.n -= 2;
    return s;
}

/* Splits at the commas outside parentheses: the count, -1 when they do
 * not balance or there are too many fields. */
static int
split(struct span s, struct span *out, int max)
{
    int n = 0, depth = 0;
    const char *start = s.p;
    for (size_t i = 0; i <= s.n; i++) {
        char c = i < s.n ? s.p[i] : ',';
        if (c == '(')
            depth++;
        else if (c == ')' && --depth < 0)
            return -1;
        if (c != ',' || depth > 0)
            continue;
        if (n == max)
            return -1;
        out[n++] = trim((struct span){start, (size_t)(s.p + i - start)});
        start = s.p + i + 1;
    }
    return depth == 0 ? n : -1;
}

static int
is_type(struct span t, const char *name)
{
    return t.n == strlen(name) && strncasecmp(t.p, name, t.n) == 0;
}

static const char *
upper(struct import_model *m, struct span t)
{
    char *s = (char *)import_strndup(m, t.p, t.n);
    for (char *p = s; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 32);
    return s;
}

static int parse_cond(struct import_model *m, struct span *f, int nf, unsigned line,
                      struct import_cond *c, int depth);

/* "((A,B),(C,D))": the conditions inside the outer parentheses. */
static int
parse_subs(struct import_model *m, struct span v, unsigned line, struct import_cond *c, int depth)
{
    struct span items[MAX_FIELDS];
    if (v.n < 2 || v.p[0] != '(' || v.p[v.n - 1] != ')' || depth > 8) {
        import_note(m, line, "%s: expected ((TYPE,VALUE),(TYPE,VALUE)): left out", c->type);
        return -1;
    }
    int n = split((struct span){v.p + 1, v.n - 2}, items, MAX_FIELDS);
    if (n <= 0 || (strcmp(c->type, "NOT") == 0 && n != 1)) {
        import_note(m, line, "%s: %s: left out", c->type,
                 n <= 0 ? "unbalanced parentheses" : "NOT takes one condition");
        return -1;
    }
    c->sub = import_alloc(m, (size_t)n * sizeof(*c->sub));
    c->nsub = (size_t)n;
    for (int i = 0; i < n; i++) {
        struct span it = items[i], f[MAX_FIELDS];
        if (it.n < 2 || it.p[0] != '(' || it.p[it.n - 1] != ')') {
            import_note(m, line, "%s: condition %d is not (TYPE,VALUE): left out", c->type, i + 1);
            return -1;
        }
        int nf = split((struct span){it.p + 1, it.n - 2}, f, MAX_FIELDS);
        if (nf < 2 || parse_cond(m, f, nf, line, &c->sub[i], depth + 1) != 0) {
            if (nf < 2)
                import_note(m, line, "%s: condition %d has no value: left out", c->type, i + 1);
            return -1;
        }
    }
    return 0;
}

/* f[0] TYPE, f[1] VALUE, f[2..] options (the policy is the caller's). */
static int
parse_cond(struct import_model *m, struct span *f, int nf, unsigned line, struct import_cond *c,
           int depth)
{
    c->type = upper(m, f[0]);
    if (is_type(f[0], "AND") || is_type(f[0], "OR") || is_type(f[0], "NOT"))
        return parse_subs(m, f[1], line, c, depth);
    c->value = import_strndup(m, f[1].p, f[1].n);
    if (nf > 2) {
        c->opts = import_alloc(m, (size_t)(nf - 2) * sizeof(char *));
        for (int i = 2; i < nf; i++)
            c->opts[c->nopts++] = import_strndup(m, f[i].p, f[i].n);
    }
    if (strcmp(c->type, "RULE-SET") == 0 || strcmp(c->type, "DOMAIN-SET") == 0) {
        c->ruleset = c->value;
        return 0;
    }
    return import_cond_check(m, c, line);
}

/* Types another part of chute evaluates (GEOIP/GEOSITE databases): kept as
 * the file has them; chute.rules says at load whether it can match them. */
static int
passed_through(const char *t)
{
    static const char *const geo[] = {"GEOIP", "GEOSITE", "SRC-GEOIP", "IP-ASN", "SRC-IP-ASN"};
    for (size_t i = 0; i < sizeof(geo) / sizeof(geo[0]); i++)
        if (strcmp(t, geo[i]) == 0)
            return 1;
    return 0;
}

int
import_cond_check(struct import_model *m, const struct import_cond *c, unsigned line)
{
    if (passed_through(c->type)) {
        import_add_geo(m, c->type);
        return 0;
    }
    struct mem_slice opts[8];
    struct rules_entry e[32];
    char msg[200];
    size_t n = 0;
    for (size_t i = 0; i < c->nopts && n < 8; i++)
        opts[n++] = mem_slice(c->opts[i], strlen(c->opts[i]));
    int rc = rules_rule_parse(mem_slice(c->type, strlen(c->type)),
                              mem_slice(c->value, strlen(c->value)), opts, n, e, 32, msg,
                              sizeof(msg));
    if (rc < 0) {
        import_note(m, line, "rule %s,%s: %s: left out", c->type, c->value, msg);
        return -1;
    }
    if (e[0].type == RULES_T_UNSUPPORTED) {
        import_note(m, line, "chute cannot evaluate %s rules (%s,%s): left out", c->type, c->type,
                 c->value);
        return -1;
    }
    return 0;
}

int
import_rule_parse(struct import_model *m, const char *text, size_t len, unsigned line,
               struct import_rule *r, int surge)
{
    struct span f[MAX_FIELDS];
    int nf = split(trim((struct span){text, len}), f, MAX_FIELDS);
    memset(r, 0, sizeof(*r));
    r->line = line;
    if (nf < 2) {
        import_note(m, line, "rule '%.*s': expected TYPE,VALUE,POLICY: left out", (int)len, text);
        return -1;
    }
    if (is_type(f[0], "MATCH") || is_type(f[0], "FINAL")) {
        r->c.type = "FINAL";
        r->policy = import_strndup(m, f[1].p, f[1].n);
        for (int i = 2; i < nf; i++)
            import_note(m, line, "%.*s option '%.*s' is not supported by chute: ignored",
                     (int)f[0].n, f[0].p, (int)f[i].n, f[i].p);
        return 0;
    }
    if (nf < 3) {
        import_note(m, line, "rule '%.*s': no policy: left out", (int)len, text);
        return -1;
    }
    /* Options chute has no use for: Surge's extended-matching is kept
     * (chute reads it), pre-matching and update-interval= are not. */
    int keep = 3;
    struct span opts[MAX_FIELDS];
    int nopt = 0;
    for (int i = 3; i < nf; i++) {
        if (surge && (is_type(f[i], "pre-matching") ||
                      (f[i].n > 16 && strncasecmp(f[i].p, "update-interval=", 16) == 0))) {
            import_note(m, line, "rule option '%.*s' is not supported by chute: ignored", (int)f[i].n,
                     f[i].p);
            continue;
        }
        opts[nopt++] = f[i];
    }
    struct span cf[MAX_FIELDS];
    cf[0] = f[0];
    cf[1] = f[1];
    for (int i = 0; i < nopt; i++)
        cf[2 + i] = opts[i];
    (void)keep;
    r->policy = import_strndup(m, f[2].p, f[2].n);
    return parse_cond(m, cf, 2 + nopt, line, &r->c, 0);
}
