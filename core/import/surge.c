#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "import/import_int.h"

/* A Surge profile, line by line. [General], [Proxy], [Proxy Group] and
 * [Rule] are read here; the rewrite sections ([MITM], [URL Rewrite],
 * [Header Rewrite], [Map Local], [Body Rewrite], [Script]) are kept as a
 * module for chute.module, which reads them as it reads any Surge module
 * (mitm/rewrite.h). Other sections get a note each. */

enum { S_NONE, S_GENERAL, S_PROXY, S_GROUP, S_RULE, S_MODULE, S_OTHER };

struct tok {
    const char *p;
    size_t n;
};

static struct tok
trim(const char *p, size_t n)
{
    while (n > 0 && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
        n--;
    return (struct tok){p, n};
}

/* "a, b, key=value" into tokens at the commas. */
static size_t
fields(struct tok line, struct tok *out, size_t max)
{
    size_t n = 0;
    const char *s = line.p, *end = line.p + line.n;
    while (s <= end && n < max) {
        const char *c = memchr(s, ',', (size_t)(end - s));
        const char *e = c ? c : end;
        out[n++] = trim(s, (size_t)(e - s));
        s = e + 1;
        if (c == NULL)
            break;
    }
    return n;
}

static const char *
dup(struct import_model *m, struct tok t)
{
    return import_strndup(m, t.p, t.n);
}

static int
eq(struct tok t, const char *s)
{
    return t.n == strlen(s) && strncasecmp(t.p, s, t.n) == 0;
}

/* key=value: 1 with the parts. */
static int
kv(struct tok t, struct tok *k, struct tok *v)
{
    const char *e = memchr(t.p, '=', t.n);
    if (e == NULL)
        return 0;
    *k = trim(t.p, (size_t)(e - t.p));
    *v = trim(e + 1, t.n - (size_t)(e - t.p) - 1);
    if (v->n >= 2 && v->p[0] == '"' && v->p[v->n - 1] == '"')
        *v = (struct tok){v->p + 1, v->n - 2};
    return 1;
}

static int
truthy(struct tok v)
{
    return eq(v, "true") || eq(v, "1") || eq(v, "yes");
}

static void
listen_addr(struct import_model *m, const char *key, struct tok v)
{
    const char *s = dup(m, v);
    if (strchr(s, ':') == NULL)
        s = import_fmt(m, "127.0.0.1:%s", s);
    import_kv_str(m, &m->config, key, s);
}

static void
general(struct import_model *m, struct tok l, unsigned line)
{
    struct tok k, v, f[16];
    if (!kv(l, &k, &v)) {
        import_note(m, line, "[General] '%.*s' is not key = value: ignored", (int)l.n, l.p);
        return;
    }
    if (eq(k, "http-listen")) {
        listen_addr(m, "listen.http", v);
    } else if (eq(k, "socks5-listen")) {
        listen_addr(m, "listen.socks", v);
    } else if (eq(k, "loglevel")) {
        const char *c = eq(v, "verbose") ? "debug" : eq(v, "info") ? "info"
                        : eq(v, "notify") ? "info" : eq(v, "warning") ? "warn" : NULL;
        if (c != NULL)
            import_kv_str(m, &m->config, "log_level", c);
    } else if (eq(k, "dns-server")) {
        size_t n = fields(v, f, 16), nups = 0;
        const char **ups = import_alloc(m, 8 * sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            int plain = f[i].n > 0 && strspn(dup(m, f[i]), "0123456789.:[]abcdefABCDEF") == f[i].n;
            if (!plain || nups == 8)
                import_note(m, line, "dns-server %.*s: chute asks plain DNS servers (IP or IP:PORT, "
                         "up to 8; the system's by default): left out", (int)f[i].n, f[i].p);
            else
                ups[nups++] = dup(m, f[i]);
        }
        if (nups > 0) {
            struct import_kv *x = import_kv_add(m, &m->config, "dns.upstream");
            x->kind = IMPORT_LIST;
            x->list = ups;
            x->nlist = nups;
        }
    } else {
        import_note(m, line, "[General] %.*s is not supported by chute: ignored", (int)k.n, k.p);
    }
}

static void
proxy(struct import_model *m, struct tok l, unsigned line)
{
    struct tok name, rest, f[32];
    if (!kv(l, &name, &rest)) {
        import_note(m, line, "[Proxy] '%.*s' is not NAME = TYPE, ...: left out", (int)l.n, l.p);
        return;
    }
    size_t n = fields(rest, f, 32);
    const char *nm = dup(m, name), *type = dup(m, f[0]);
    const char *ctype = strcasecmp(type, "ss") == 0       ? "shadowsocks"
                        : strcasecmp(type, "trojan") == 0 ? "trojan"
                        : strcasecmp(type, "socks5") == 0 ? "socks5"
                        : strcasecmp(type, "http") == 0   ? "http"
                        : strcasecmp(type, "https") == 0  ? "https"
                                                          : NULL;
    if (strcasecmp(type, "direct") == 0 || strncasecmp(type, "reject", 6) == 0) {
        import_add_alias(m, nm, type[0] == 'd' || type[0] == 'D' ? "DIRECT" : "REJECT", line);
        return;
    }
    if (ctype == NULL) {
        import_note(m, line, "proxy '%s': chute has no %s protocol: left out", nm, type);
        return;
    }
    char *end;
    long port = n >= 3 ? strtol(dup(m, f[2]), &end, 10) : 0;
    if (n < 3 || f[1].n == 0 || port < 1 || port > 65535) {
        import_note(m, line, "proxy '%s': needs a server and a port 1..65535: left out", nm);
        return;
    }
    struct import_proxy p = {.name = nm, .line = line};
    import_kv_str(m, &p.f, "type", ctype);
    import_kv_str(m, &p.f, "server", dup(m, f[1]));
    import_kv_num(m, &p.f, "port", (double)port);
    size_t pos = 0;
    for (size_t i = 3; i < n; i++) {
        struct tok k, v;
        if (!kv(f[i], &k, &v)) {
            /* socks5 / http: user, password by position */
            if (pos < 2 && (ctype[0] == 's' && ctype[1] == 'o' ? 1 : ctype[0] == 'h'))
                import_kv_str(m, &p.f, pos++ == 0 ? "username" : "password", dup(m, f[i]));
            else
                import_note(m, line, "proxy '%s': '%.*s' is not understood: ignored", nm,
                         (int)f[i].n, f[i].p);
            continue;
        }
        if ((eq(k, "encrypt-method") && ctype[0] == 's' && ctype[1] == 'h')) {
            const char *c = dup(m, v);
            if (strcasecmp(c, "aes-128-gcm") && strcasecmp(c, "aes-256-gcm") &&
                strcasecmp(c, "chacha20-ietf-poly1305") && strcasecmp(c, "chacha20-poly1305")) {
                import_note(m, line, "proxy '%s': cipher '%s' is not one chute has (aes-128-gcm, "
                         "aes-256-gcm, chacha20-ietf-poly1305): left out", nm, c);
                return;
            }
            import_kv_str(m, &p.f, "cipher", c);
        } else if (eq(k, "password")) {
            import_kv_str(m, &p.f, "password", dup(m, v));
        } else if (eq(k, "username")) {
            import_kv_str(m, &p.f, "username", dup(m, v));
        } else if (eq(k, "sni")) {
            import_kv_str(m, &p.f, "sni", dup(m, v));
        } else if (eq(k, "skip-cert-verify")) {
            if (truthy(v))
                import_kv_bool(m, &p.f, "skip_cert_verify", 1);
        } else if (eq(k, "udp-relay") && strcmp(ctype, "http") && strcmp(ctype, "https")) {
            import_kv_bool(m, &p.f, "udp", truthy(v));
        } else if (eq(k, "obfs") || eq(k, "ws") || eq(k, "shadow-tls-password")) {
            import_note(m, line, "proxy '%s': %.*s is not supported by chute: left out", nm,
                     (int)k.n, k.p);
            return;
        } else {
            import_note(m, line, "proxy '%s': option %.*s is not supported by chute: ignored", nm,
                     (int)k.n, k.p);
        }
    }
    *(struct import_proxy *)import_push(m, &m->proxies, &m->nproxies, &m->pcap, sizeof(p)) = p;
}

static void
group(struct import_model *m, struct tok l, unsigned line)
{
    static const char *const types[] = {"select", "url-test", "fallback", "load-balance"};
    struct tok name, rest, f[256];
    if (!kv(l, &name, &rest)) {
        import_note(m, line, "[Proxy Group] '%.*s' is not NAME = TYPE, ...: left out", (int)l.n, l.p);
        return;
    }
    size_t n = fields(rest, f, 256);
    if (n == 256 && memchr(f[255].p, ',', rest.n - (size_t)(f[255].p - rest.p)) != NULL)
        import_note(m, line, "group '%.*s': more than 255 members and options: the rest are left "
                    "out", (int)name.n, name.p);
    struct import_group *g = import_push(m, &m->groups, &m->ngroups, &m->gcap, sizeof(*g));
    g->name = dup(m, name);
    g->line = line;
    g->type = dup(m, f[0]);
    size_t t;
    for (t = 0; t < 4 && !eq(f[0], types[t]); t++)
        ;
    if (t == 4) {
        import_note(m, line, "group '%s': chute has no %s groups: left out", g->name, g->type);
        g->dropped = 1;
        return;
    }
    for (size_t i = 1; i < n; i++) {
        struct tok k, v;
        if (!kv(f[i], &k, &v)) {
            if (f[i].n > 0)
                import_group_member(m, g, dup(m, f[i]), line);
            continue;
        }
        char *end;
        double x = strtod(dup(m, v), &end);
        if (eq(k, "url")) {
            const char *u = dup(m, v);
            if (strncasecmp(u, "https://", 8) == 0) {
                const char *h = import_fmt(m, "http://%s", u + 8);
                import_note(m, line, "group '%s': chute's health checks speak plain HTTP: url %s is "
                         "checked as %s", g->name, u, h);
                u = h;
            }
            import_kv_str(m, &g->f, "url", u);
        } else if ((eq(k, "interval") || eq(k, "timeout") || eq(k, "tolerance")) && *end == '\0') {
            import_kv_num(m, &g->f, dup(m, k), x);
        } else if (eq(k, "include-all-proxies") && truthy(v)) {
            for (size_t j = 0; j < m->nproxies; j++)
                import_group_member(m, g, m->proxies[j].name, line);
        } else if (eq(k, "policy-path")) {
            import_note(m, line, "group '%s': policy-path (a remote list of Surge proxy lines) is "
                     "not supported by chute: ignored", g->name);
        } else {
            import_note(m, line, "group '%s': option %.*s is not supported by chute: ignored",
                     g->name, (int)k.n, k.p);
        }
    }
}

static int
is_url(const char *s)
{
    return strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0;
}

/* RULE-SET,x / DOMAIN-SET,x: Surge's LAN and SYSTEM, a URL, or a file. */
static void
ruleset(struct import_model *m, struct import_rule *r)
{
    const char *v = r->c.ruleset;
    int domset = strcmp(r->c.type, "DOMAIN-SET") == 0;
    r->c.type = "RULE-SET";
    if (!domset && (strcmp(v, "LAN") == 0 || strcmp(v, "SYSTEM") == 0)) {
        r->c.builtin = 1;
        return;
    }
    for (size_t i = 0; i < m->nrulesets; i++)
        if (strcmp(m->rulesets[i].name, v) == 0)
            return;
    struct import_ruleset *rs = import_push(m, &m->rulesets, &m->nrulesets, &m->rscap, sizeof(*rs));
    rs->name = v;
    rs->line = r->line;
    rs->format = domset ? "domain-set" : "surge";
    if (is_url(v)) {
        rs->remote = 1;
        import_kv_str(m, &rs->f, "url", v);
        import_kv_str(m, &rs->f, "format", rs->format);
    } else if (m->o->chunk) {
        rs->path = import_fmt(m, "%s%s", m->o->base ? m->o->base : "", v);
    } else {
        const char *slash = strrchr(v, '/');
        rs->path = import_fmt(m, "rules/%s", import_file_name(m, slash ? slash + 1 : v, ""));
        import_add_copy(m, v, rs->path);
    }
}

static void
rule(struct import_model *m, struct tok l, unsigned line)
{
    /* A trailing "// comment" is Surge's. */
    for (size_t i = 0; i + 2 < l.n; i++)
        if (l.p[i] == ' ' && l.p[i + 1] == '/' && l.p[i + 2] == '/') {
            l = trim(l.p, i);
            break;
        }
    struct import_rule r;
    if (import_rule_parse(m, l.p, l.n, line, &r, 1) != 0)
        return;
    if (r.c.ruleset != NULL)
        ruleset(m, &r);
    *(struct import_rule *)import_push(m, &m->rules, &m->nrules, &m->rcap, sizeof(r)) = r;
}

static int
section(struct tok name)
{
    static const char *const mod[] = {"MITM", "URL Rewrite", "Header Rewrite", "Map Local",
                                      "Body Rewrite", "Script"};
    if (eq(name, "General"))
        return S_GENERAL;
    if (eq(name, "Proxy"))
        return S_PROXY;
    if (eq(name, "Proxy Group"))
        return S_GROUP;
    if (eq(name, "Rule"))
        return S_RULE;
    for (size_t i = 0; i < sizeof(mod) / sizeof(mod[0]); i++)
        if (eq(name, mod[i]))
            return S_MODULE;
    return S_OTHER;
}

int
import_surge(struct import_model *m, const char *text, size_t len, char *err, size_t errlen)
{
    /* The module: the profile's bytes with every line outside the rewrite
     * sections blanked, so its line numbers stay the profile's. */
    char *mod = import_alloc(m, len + 1);
    size_t modn = 0;
    int sec = S_NONE, any_module = 0;
    unsigned line = 0, sec_line = 0;
    size_t sec_lines = 0;
    struct tok sec_name = {"", 0};
    const char *s = text, *end = text + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        struct tok l = trim(s, (size_t)(le - s));
        size_t raw = (size_t)(le - s);
        line++;
        int is_header = l.n > 0 && l.p[0] == '[';
        int comment = l.n == 0 || l.p[0] == '#' || l.p[0] == ';' ||
                      (l.n >= 2 && l.p[0] == '/' && l.p[1] == '/');
        if (is_header) {
            if (l.p[l.n - 1] != ']') {
                snprintf(err, errlen, "%s:%u: a section header ends with ']' ([General], "
                         "[Proxy], [Rule], ...)", m->file, line);
                return -1;
            }
            if (sec == S_OTHER)
                import_note(m, sec_line, "section [%.*s] is not supported by chute: %zu line%s "
                         "left out", (int)sec_name.n, sec_name.p, sec_lines,
                         sec_lines == 1 ? "" : "s");
            sec_name = trim(l.p + 1, l.n - 2);
            sec = section(sec_name);
            sec_line = line;
            sec_lines = 0;
        }
        if (sec == S_MODULE) {
            memcpy(mod + modn, s, raw);
            modn += raw;
            any_module = 1;
        }
        if (nl != NULL)
            mod[modn++] = '\n';
        s = nl ? nl + 1 : end;
        if (is_header || comment)
            continue;
        switch (sec) {
        case S_GENERAL:
            general(m, l, line);
            break;
        case S_PROXY:
            proxy(m, l, line);
            break;
        case S_GROUP:
            group(m, l, line);
            break;
        case S_RULE:
            rule(m, l, line);
            break;
        case S_OTHER:
            sec_lines++;
            break;
        case S_NONE:
            snprintf(err, errlen, "%s:%u: '%.*s': a line before any section (a Surge profile "
                     "starts with [General], [Proxy], ...)", m->file, line,
                     (int)(l.n > 60 ? 60 : l.n), l.p);
            return -1;
        default:
            break;
        }
    }
    if (sec == S_OTHER)
        import_note(m, sec_line, "section [%.*s] is not supported by chute: %zu line%s left out",
                 (int)sec_name.n, sec_name.p, sec_lines, sec_lines == 1 ? "" : "s");
    if (any_module) {
        m->module = mod;
        m->module_len = modn;
    }
    return 0;
}
