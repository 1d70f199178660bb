#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import_int.h"
#include "log/log.h"

/* The model as Lua: main.lua for chute import, or the chunk chute.clash /
 * chute.surge runs (opts.chunk), in the order chute's loader wants:
 * config, proxies, providers, groups, rule lists, the module, the rules. */

struct out {
    char *b;
    size_t n, cap;
    unsigned line; /* the line being written, from 1 */
    int align;
};

static void
put(struct out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap : 4096;
        while (nc < o->n + n + 1)
            nc *= 2;
        char *nb = realloc(o->b, nc);
        if (nb == NULL) {
            LOG_ERROR("import: out of memory");
            abort();
        }
        o->b = nb;
        o->cap = nc;
    }
    memcpy(o->b + o->n, s, n);
    o->n += n;
    o->b[o->n] = '\0';
    for (size_t i = 0; i < n; i++)
        o->line += s[i] == '\n';
}

static void
puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3)))
putf(struct out *o, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(buf)) {
        char *big = malloc((size_t)n + 1);
        if (big == NULL)
            abort();
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        put(o, big, (size_t)n);
        free(big);
        return;
    }
    put(o, buf, (size_t)n);
}

/* In a chunk, the next statement starts on |line| of the config if that
 * is still ahead: an error in it then names the config's own line. */
static void
align(struct out *o, unsigned line)
{
    while (o->align && o->line < line)
        puts_(o, "\n");
}

static void
nl(struct out *o)
{
    if (!o->align)
        puts_(o, "\n");
    else
        puts_(o, " ");
}

static void
str(struct out *o, const char *s)
{
    puts_(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            putf(o, "\\%c", *p);
        else if (*p == '\n')
            puts_(o, "\\n");
        else if (*p < 0x20 || *p == 0x7f)
            putf(o, "\\%03u", *p);
        else
            put(o, (const char *)p, 1);
    }
    puts_(o, "\"");
}

static int
ident(const char *s)
{
    static const char *const words[] = {"and", "break", "do", "else", "elseif", "end", "false",
                                        "for", "function", "goto", "if", "in", "local", "nil",
                                        "not", "or", "repeat", "return", "then", "true", "until",
                                        "while"};
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
              (*p >= '0' && *p <= '9')))
            return 0;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcmp(s, words[i]) == 0)
            return 0;
    return 1;
}

static void
key(struct out *o, const char *k)
{
    if (ident(k)) {
        putf(o, "%s = ", k);
    } else {
        puts_(o, "[");
        str(o, k);
        puts_(o, "] = ");
    }
}

static void
value(struct out *o, const struct import_kv *kv)
{
    switch (kv->kind) {
    case IMPORT_STR:
        str(o, kv->s);
        break;
    case IMPORT_NUM:
        if (kv->n == floor(kv->n) && fabs(kv->n) < 1e15)
            putf(o, "%lld", (long long)kv->n);
        else
            putf(o, "%.17g", kv->n);
        break;
    case IMPORT_BOOL:
        puts_(o, kv->b ? "true" : "false");
        break;
    case IMPORT_LIST:
        puts_(o, "{ ");
        for (size_t i = 0; i < kv->nlist; i++) {
            if (i > 0)
                puts_(o, ", ");
            str(o, kv->list[i]);
        }
        puts_(o, " }");
        break;
    }
}

static void
fields(struct out *o, const struct import_kvs *f, const char *skip)
{
    for (size_t i = 0; i < f->n; i++) {
        if (skip != NULL && strcmp(f->v[i].key, skip) == 0)
            continue;
        key(o, f->v[i].key);
        value(o, &f->v[i]);
        if (i + 1 < f->n)
            puts_(o, ", ");
    }
}

/* chute.config: the dotted keys nested ("listen.socks.address"), each
 * table once, in the order the file first names it. */
static void
config(struct out *o, const struct import_kvs *c, const char *prefix, int top)
{
    size_t plen = strlen(prefix);
    int first = 1;
    for (size_t i = 0; i < c->n; i++) {
        const char *k = c->v[i].key;
        if (strncmp(k, prefix, plen) != 0)
            continue;
        const char *rest = k + plen, *dot = strchr(rest, '.');
        size_t clen = dot ? (size_t)(dot - rest) : strlen(rest);
        size_t j;
        for (j = 0; j < i; j++) {
            const char *kj = c->v[j].key;
            if (strncmp(kj, prefix, plen) == 0 && strncmp(kj + plen, rest, clen) == 0 &&
                (kj[plen + clen] == '.' || kj[plen + clen] == '\0'))
                break;
        }
        if (j < i)
            continue; /* written with its first sibling */
        if (!top && !first)
            puts_(o, ", ");
        first = 0;
        if (top)
            puts_(o, o->align ? "" : "  ");
        char comp[128];
        snprintf(comp, sizeof(comp), "%.*s", (int)(clen < 127 ? clen : 127), rest);
        key(o, comp);
        if (dot == NULL) {
            value(o, &c->v[i]);
        } else {
            char sub[512];
            snprintf(sub, sizeof(sub), "%s%s.", prefix, comp);
            puts_(o, "{ ");
            config(o, c, sub, 0);
            puts_(o, " }");
        }
        if (top) {
            puts_(o, ",");
            nl(o);
        }
    }
}

static void
cond(struct out *o, const struct import_cond *c)
{
    puts_(o, "{ ");
    str(o, c->type);
    if (c->nsub > 0) {
        puts_(o, ", { ");
        for (size_t i = 0; i < c->nsub; i++) {
            if (i > 0)
                puts_(o, ", ");
            cond(o, &c->sub[i]);
            for (size_t k = 0; k < c->sub[i].nopts; k++) {
                puts_(o, ", ");
                str(o, c->sub[i].opts[k]);
            }
            puts_(o, " }");
        }
        puts_(o, " }");
    } else if (c->ruleset != NULL && c->builtin) {
        puts_(o, ", ");
        str(o, c->ruleset);
    } else if (c->ruleset != NULL) {
        puts_(o, ", rs[");
        str(o, c->ruleset);
        puts_(o, "]");
    } else if (c->value != NULL) {
        puts_(o, ", ");
        str(o, c->value);
    }
}

static void
rule(struct out *o, const struct import_rule *r)
{
    if (strcmp(r->c.type, "FINAL") == 0) {
        puts_(o, "{ \"FINAL\", ");
        str(o, r->policy);
        puts_(o, " }");
        return;
    }
    cond(o, &r->c);
    puts_(o, ", ");
    str(o, r->policy);
    for (size_t i = 0; i < r->c.nopts; i++) {
        puts_(o, ", ");
        str(o, r->c.opts[i]);
    }
    puts_(o, " }");
}

static void
header(struct out *o, struct import_model *m)
{
    const struct import_result *r = m->out;
    if (o->align) {
        puts_(o, "local chute = require \"chute\" local opts = ... or {} local rs = {} ");
        return;
    }
    putf(o, "-- Imported by `chute import` from %s.\n", m->file);
    if (r->nnotes > 0) {
        puts_(o, "-- What chute cannot do as the file says, and what was done instead:\n");
        for (size_t i = 0; i < r->nnotes; i++) {
            puts_(o, "--   ");
            for (const char *p = r->notes[i]; *p; p++)
                put(o, (unsigned char)*p < 0x20 ? " " : p, 1); /* one comment line */
            puts_(o, "\n");
        }
    }
    puts_(o, "local chute = require \"chute\"\n");
}

int
import_emit(struct import_model *m, char *err, size_t errlen)
{
    struct out o = {.line = 1, .align = m->o->chunk};
    header(&o, m);
    if (m->config.n > 0) {
        if (!o.align) {
            puts_(&o, "\nchute.config {\n");
            config(&o, &m->config, "", 1);
            puts_(&o, "}\n");
        } else {
            puts_(&o, "local config = { ");
            config(&o, &m->config, "", 1);
            puts_(&o, "} if opts.config ~= false then if type(opts.config) == \"table\" then "
                      "for k, v in pairs(opts.config) do config[k] = v end end "
                      "chute.config(config) end ");
        }
    }
    if (m->nproxies > 0 && !o.align)
        puts_(&o, "\n");
    for (size_t i = 0; i < m->nproxies; i++) {
        const struct import_proxy *p = &m->proxies[i];
        align(&o, p->line);
        puts_(&o, "chute.proxy ");
        str(&o, p->name);
        puts_(&o, " { ");
        fields(&o, &p->f, NULL);
        puts_(&o, " }");
        nl(&o);
    }
    if (m->nproviders > 0 && !o.align)
        puts_(&o, "\n");
    for (size_t i = 0; i < m->nproviders; i++) {
        const struct import_provider *p = &m->providers[i];
        align(&o, p->line);
        puts_(&o, "chute.provider ");
        str(&o, p->name);
        puts_(&o, " { ");
        fields(&o, &p->f, NULL);
        puts_(&o, " }");
        nl(&o);
    }
    if (m->ngroups > 0 && !o.align)
        puts_(&o, "\n");
    for (size_t i = 0; i < m->ngroups; i++) {
        const struct import_group *g = &m->groups[i];
        if (g->dropped)
            continue;
        align(&o, g->line);
        puts_(&o, "chute.group ");
        str(&o, g->name);
        puts_(&o, " { type = ");
        str(&o, g->type);
        if (g->nmembers > 0) {
            puts_(&o, ", proxies = { ");
            for (size_t k = 0; k < g->nmembers; k++) {
                if (k > 0)
                    puts_(&o, ", ");
                str(&o, g->members[k].name);
            }
            puts_(&o, " }");
        }
        if (g->nuse > 0) {
            puts_(&o, ", use = { ");
            for (size_t k = 0; k < g->nuse; k++) {
                if (k > 0)
                    puts_(&o, ", ");
                str(&o, g->use[k]);
            }
            puts_(&o, " }");
        }
        if (g->f.n > 0)
            puts_(&o, ", ");
        fields(&o, &g->f, NULL);
        puts_(&o, " }");
        nl(&o);
    }
    if (!o.align && m->nrulesets > 0)
        puts_(&o, "\nlocal rs = {}\n");
    for (size_t i = 0; i < m->nrulesets; i++) {
        const struct import_ruleset *r = &m->rulesets[i];
        align(&o, r->line);
        puts_(&o, "rs[");
        str(&o, r->name);
        puts_(&o, "] = chute.ruleset");
        if (r->remote) {
            puts_(&o, " { ");
            fields(&o, &r->f, NULL);
            puts_(&o, " }");
        } else {
            puts_(&o, "(");
            str(&o, r->path);
            puts_(&o, ", { format = ");
            str(&o, r->format);
            puts_(&o, " })");
        }
        nl(&o);
    }
    if (m->module != NULL) {
        if (!o.align) {
            puts_(&o, "\nchute.module ");
            str(&o, m->out->module_name);
            puts_(&o, "\n");
        } else {
            /* The text keeps the profile's line numbers: its other lines
             * are blank. */
            puts_(&o, "chute.module { name = ");
            str(&o, m->file);
            puts_(&o, ", text = ");
            str(&o, m->module);
            puts_(&o, " } ");
        }
    }
    if (m->nrules > 0) {
        puts_(&o, o.align ? "local route = chute.rules { " : "\nchute.route = chute.rules {\n");
        for (size_t i = 0; i < m->nrules; i++) {
            align(&o, m->rules[i].line);
            if (!o.align)
                puts_(&o, "  ");
            rule(&o, &m->rules[i]);
            puts_(&o, ",");
            nl(&o);
        }
        puts_(&o, o.align ? "} if opts.route ~= false then chute.route = route end return route\n"
                          : "}\n");
    } else if (o.align) {
        puts_(&o, "\n");
    }
    if (o.b == NULL) {
        snprintf(err, errlen, "%s: out of memory", m->file);
        return -1;
    }
    m->out->lua = o.b;
    m->out->lua_len = o.n;
    return 0;
}
