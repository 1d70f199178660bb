#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "import/clash_int.h"

/* A Clash / mihomo config.yaml, read into a document by libyaml and walked
 * key by key. Each key chute has is mapped; each it has not gets a note. */

/* ---- rule providers and rules ---------------------------------------- */

static void
rule_providers(struct doc *d, yaml_node_t *map)
{
    static const char *const known[] = {"type", "behavior", "format", "url", "path", "interval",
                                        NULL};
    struct import_model *m = d->m;
    FOR_MAP(d, map, k, v) {
        const char *name = import_yscalar(k), *type = import_ygets(d, v, "type");
        const char *behavior = import_ygets(d, v, "behavior"), *format = import_ygets(d, v, "format");
        char what[200];
        snprintf(what, sizeof(what), "rule provider '%s'", name ? name : "?");
        if (name == NULL || type == NULL) {
            import_note(m, import_yline(k), "a rule provider without a name or a type: left out");
            continue;
        }
        const char *fmt = behavior == NULL || strcmp(behavior, "classical") == 0 ? "classical"
                          : strcmp(behavior, "domain") == 0                       ? "domain"
                          : strcmp(behavior, "ipcidr") == 0                       ? "ipcidr"
                                                                                  : NULL;
        if (fmt == NULL || (format != NULL && strcmp(format, "mrs") == 0) ||
            (strcmp(type, "file") != 0 && strcmp(type, "http") != 0)) {
            import_note(m, import_yline(k), "%s: %s %s is not a list chute reads: left out, and the "
                     "rules that name it", what, fmt == NULL ? "behavior" : format ? "format"
                     : "type", fmt == NULL ? behavior : format && strcmp(format, "mrs") == 0
                     ? "mrs (binary)" : type);
            continue;
        }
        const char *path = import_ygets(d, v, "path");
        if (strcmp(type, "file") == 0 && path == NULL) {
            import_note(m, import_yline(k), "%s: a file provider needs a path: left out", what);
            continue;
        }
        struct import_ruleset *r = import_push(m, &m->rulesets, &m->nrulesets, &m->rscap, sizeof(*r));
        r->name = import_strdup(m, name);
        r->line = import_yline(k);
        r->format = fmt;
        if (strcmp(type, "http") == 0) {
            r->remote = 1;
            import_kv_str(m, &r->f, "url", import_ygets(d, v, "url") ? import_ygets(d, v, "url") : "");
            import_kv_str(m, &r->f, "format", fmt);
            double iv;
            if (import_ygetn(d, v, "interval", &iv, what) == 1)
                import_kv_num(m, &r->f, "interval", iv);
            if (path != NULL)
                import_kv_str(m, &r->f, "path", path);
        } else if (m->o->chunk) {
            r->path = import_fmt(m, "%s%s", m->o->base ? m->o->base : "", path);
        } else {
            const char *dot = strrchr(path, '.');
            r->path = import_fmt(m, "rules/%s",
                              import_file_name(m, name, dot && !strchr(dot, '/') ? dot : ".list"));
            import_add_copy(m, path, r->path);
        }
        import_yunknown(d, v, known, what);
    }
}

static int
find_ruleset(struct import_model *m, const char *name)
{
    for (size_t i = 0; i < m->nrulesets; i++)
        if (strcmp(m->rulesets[i].name, name) == 0)
            return 1;
    return 0;
}

static void
rules(struct doc *d, yaml_node_t *seq)
{
    struct import_model *m = d->m;
    FOR_SEQ(d, seq, it) {
        const char *s = import_yscalar(it);
        if (s == NULL) {
            import_note(m, import_yline(it), "a rule that is not a string: left out");
            continue;
        }
        struct import_rule r;
        if (import_rule_parse(m, s, strlen(s), import_yline(it), &r, 0) != 0)
            continue;
        if (strcmp(r.c.type, "DOMAIN-SET") == 0 ||
            (r.c.ruleset != NULL && !find_ruleset(m, r.c.ruleset))) {
            import_note(m, r.line, "RULE-SET %s: no rule provider chute imported by that name: left "
                     "out", r.c.ruleset);
            continue;
        }
        *(struct import_rule *)import_push(m, &m->rules, &m->nrules, &m->rcap, sizeof(r)) = r;
    }
}

/* ---- the top level --------------------------------------------------- */

static const char *
listen_host(struct doc *d, yaml_node_t *root)
{
    if (!import_ygetb(d, root, "allow-lan"))
        return "127.0.0.1";
    const char *b = import_ygets(d, root, "bind-address");
    return b == NULL || strcmp(b, "*") == 0 ? "0.0.0.0" : b;
}

static void
ports(struct doc *d, yaml_node_t *root)
{
    static const char *const map[][2] = {
        {"mixed-port", "listen.mixed"}, {"socks-port", "listen.socks"}, {"port", "listen.http"}};
    struct import_model *m = d->m;
    const char *host = listen_host(d, root);
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        double p;
        if (import_ygetn(d, root, map[i][0], &p, "listen") != 1 || p == 0)
            continue;
        if (!(p >= 1 && p <= 65535) || p != (int)p) { /* NaN fails the first test */
            import_note(m, import_yline(import_yget(d, root, map[i][0])),
                        "listen: %s %g is not a port 1..65535: ignored", map[i][0], p);
            continue;
        }
        const char *addr = strchr(host, ':') ? import_fmt(m, "[%s]:%d", host, (int)p)
                                             : import_fmt(m, "%s:%d", host, (int)p);
        yaml_node_t *auth = import_yget(d, root, "authentication");
        if (auth == NULL) {
            import_kv_str(m, &m->config, map[i][1], addr);
            continue;
        }
        import_kv_str(m, &m->config, import_fmt(m, "%s.address", map[i][1]), addr);
        FOR_SEQ(d, auth, a) {
            const char *up = import_yscalar(a), *colon = up ? strchr(up, ':') : NULL;
            if (colon == NULL) {
                import_note(m, import_yline(a), "authentication: expected \"user:password\": ignored");
                continue;
            }
            import_kv_str(m, &m->config,
                       import_fmt(m, "%s.users.%.*s", map[i][1], (int)(colon - up), up), colon + 1);
        }
    }
}

static void
dns(struct doc *d, yaml_node_t *dn)
{
    static const char *const known[] = {"enable", "listen", "enhanced-mode", "fake-ip-range",
                                        "fake-ip-filter", "nameserver", NULL};
    struct import_model *m = d->m;
    if (dn == NULL || !import_ygetb(d, dn, "enable")) {
        if (dn != NULL)
            import_note(m, import_yline(dn), "dns: not enabled: chute's DNS settings are left at their "
                     "defaults");
        return;
    }
    const char *mode = import_ygets(d, dn, "enhanced-mode");
    if (mode != NULL && strcmp(mode, "fake-ip") == 0) {
        import_kv_str(m, &m->config, "dns.mode", "fake-ip");
    } else if (mode != NULL) {
        import_kv_str(m, &m->config, "dns.mode", "real-ip");
        import_note(m, import_yline(import_yget(d, dn, "enhanced-mode")), "dns: enhanced-mode %s: chute answers "
                 "with real addresses (real-ip)", mode);
    }
    if (import_ygets(d, dn, "fake-ip-range"))
        import_kv_str(m, &m->config, "dns.fake_ip_range", import_ygets(d, dn, "fake-ip-range"));
    const char *l = import_ygets(d, dn, "listen");
    if (l != NULL)
        import_kv_str(m, &m->config, "dns.listen", l[0] == ':' ? import_fmt(m, "0.0.0.0%s", l) : l);
    yaml_node_t *filter = import_yget(d, dn, "fake-ip-filter");
    if (filter != NULL && filter->type == YAML_SEQUENCE_NODE) {
        struct import_kv *kv = import_kv_add(m, &m->config, "dns.exclude");
        kv->kind = IMPORT_LIST;
        kv->list = import_alloc(m, (size_t)(filter->data.sequence.items.top -
                                         filter->data.sequence.items.start) * sizeof(char *));
        FOR_SEQ(d, filter, f)
            if (import_yscalar(f))
                kv->list[kv->nlist++] = import_strdup(m, import_yscalar(f));
    }
    yaml_node_t *ns = import_yget(d, dn, "nameserver");
    const char **ups = import_alloc(m, 8 * sizeof(char *));
    size_t nups = 0;
    FOR_SEQ(d, ns, s) {
        const char *v = import_yscalar(s);
        if (v == NULL)
            continue;
        if (strncmp(v, "udp://", 6) == 0)
            v += 6;
        int plain = strspn(v, "0123456789.:[]abcdefABCDEF") == strlen(v);
        if (!plain || nups == 8) {
            import_note(m, import_yline(s), "dns: nameserver %s: chute asks plain DNS servers (IP or "
                     "IP:PORT, up to 8): left out", v);
            continue;
        }
        ups[nups++] = import_strdup(m, v);
    }
    if (nups > 0) {
        struct import_kv *kv = import_kv_add(m, &m->config, "dns.upstream");
        kv->kind = IMPORT_LIST;
        kv->list = ups;
        kv->nlist = nups;
    }
    import_yunknown(d, dn, known, "dns");
}

static void
tun(struct doc *d, yaml_node_t *tn)
{
    static const char *const known[] = {"enable", "device", "auto-route", "mtu", "dns-hijack",
                                        "stack", "inet4-address", "route-exclude-address", NULL};
    struct import_model *m = d->m;
    if (tn == NULL || !import_ygetb(d, tn, "enable"))
        return; /* off: chute's default too */
    import_kv_bool(m, &m->config, "tun.auto_route", import_ygetb(d, tn, "auto-route"));
    if (import_ygets(d, tn, "device"))
        import_kv_str(m, &m->config, "tun.name", import_ygets(d, tn, "device"));
    double mtu;
    if (import_ygetn(d, tn, "mtu", &mtu, "tun") == 1)
        import_kv_num(m, &m->config, "tun.mtu", mtu);
    if (import_yget(d, tn, "dns-hijack") != NULL)
        import_kv_bool(m, &m->config, "dns.hijack", 1);
    if (import_ygets(d, tn, "stack"))
        import_note(m, import_yline(import_yget(d, tn, "stack")), "tun: stack %s: chute has one stack (lwIP): "
                 "ignored", import_ygets(d, tn, "stack"));
    static const char *const lists[][2] = {{"inet4-address", "tun.address"},
                                           {"route-exclude-address", "tun.exclude"}};
    for (size_t i = 0; i < 2; i++) {
        yaml_node_t *l = import_yget(d, tn, lists[i][0]);
        if (l == NULL || l->type != YAML_SEQUENCE_NODE)
            continue;
        struct import_kv *kv = import_kv_add(m, &m->config, lists[i][1]);
        kv->kind = IMPORT_LIST;
        kv->list = import_alloc(m, (size_t)(l->data.sequence.items.top -
                                         l->data.sequence.items.start) * sizeof(char *));
        FOR_SEQ(d, l, a)
            if (import_yscalar(a))
                kv->list[kv->nlist++] = import_strdup(m, import_yscalar(a));
    }
    import_yunknown(d, tn, known, "tun");
}

static void
general(struct doc *d, yaml_node_t *root)
{
    struct import_model *m = d->m;
    const char *lvl = import_ygets(d, root, "log-level");
    if (lvl != NULL) {
        const char *c = strcmp(lvl, "warning") == 0 ? "warn"
                        : strcmp(lvl, "silent") == 0 ? "error"
                                                     : lvl;
        if (strcmp(lvl, "silent") == 0)
            import_note(m, import_yline(import_yget(d, root, "log-level")), "log-level silent: chute logs errors "
                     "at least (error)");
        if (import_one_of(c, (const char *const[]){"error", "warn", "info", "debug", NULL}))
            import_kv_str(m, &m->config, "log_level", c);
    }
    const char *mode = import_ygets(d, root, "mode");
    if (mode != NULL && strcasecmp(mode, "rule") != 0)
        import_note(m, import_yline(import_yget(d, root, "mode")), "mode %s: chute routes by the rules (mode "
                 "rule)", mode);
    const char *ec = import_ygets(d, root, "external-controller");
    if (ec != NULL)
        import_kv_str(m, &m->config, "control.listen", ec[0] == ':' ? import_fmt(m, "0.0.0.0%s", ec) : ec);
    if (import_ygets(d, root, "secret") && *import_ygets(d, root, "secret"))
        import_kv_str(m, &m->config, "control.secret", import_ygets(d, root, "secret"));
    if (import_ygets(d, root, "interface-name"))
        import_kv_str(m, &m->config, "outbound.interface", import_ygets(d, root, "interface-name"));
    double mark;
    if (import_ygetn(d, root, "routing-mark", &mark, "routing-mark") == 1)
        import_kv_num(m, &m->config, "outbound.fwmark", mark);
}

int
import_clash(struct import_model *m, const char *text, size_t len, char *err, size_t errlen)
{
    static const char *const known[] = {
        "port", "socks-port", "mixed-port", "allow-lan", "bind-address", "authentication",
        "log-level", "mode", "external-controller", "secret", "interface-name", "routing-mark",
        "dns", "tun", "proxies", "proxy-providers", "proxy-groups", "rule-providers", "rules",
        NULL};
    struct doc d = {.m = m};
    if (import_yload(m, text, len, &d.d, err, errlen) != 0)
        return -1;
    yaml_node_t *root = yaml_document_get_root_node(&d.d);
    static const char *const seqs[] = {"proxies", "proxy-groups", "rules", NULL};
    for (size_t i = 0; seqs[i]; i++) {
        yaml_node_t *n = import_yget(&d, root, seqs[i]);
        if (n != NULL && n->type != YAML_SEQUENCE_NODE) {
            snprintf(err, errlen, "%s:%u: %s: expected a list (- ...)", m->file, import_yline(n),
                     seqs[i]);
            yaml_document_delete(&d.d);
            return -1;
        }
    }
    general(&d, root);
    ports(&d, root);
    dns(&d, import_yget(&d, root, "dns"));
    tun(&d, import_yget(&d, root, "tun"));
    FOR_SEQ(&d, import_yget(&d, root, "proxies"), p)
        import_clash_proxy(&d, p);
    import_clash_providers(&d, import_yget(&d, root, "proxy-providers"));
    FOR_SEQ(&d, import_yget(&d, root, "proxy-groups"), g)
        import_clash_group(&d, g);
    rule_providers(&d, import_yget(&d, root, "rule-providers"));
    rules(&d, import_yget(&d, root, "rules"));
    import_yunknown(&d, root, known, "config");
    yaml_document_delete(&d.d);
    return 0;
}
