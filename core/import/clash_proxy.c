#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "import/clash_int.h"
#include "rules/re.h"

/* ---- proxies ----------------------------------------------------------- */

static const char *const ss_ciphers[] = {"aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305",
                                         "chacha20-poly1305", NULL};

/* A proxy from a `proxies:` list (the config's or a file provider's); 0
 * when added, -1 when left out (noted). */
int
import_clash_proxy(struct doc *d, yaml_node_t *p)
{
    static const char *const common[] = {"name", "type", "server", "port", "udp", NULL};
    static const char *const ss_keys[] = {"name", "type", "server", "port", "udp", "cipher",
                                          "password", NULL};
    static const char *const tj_keys[] = {"name", "type", "server", "port", "udp", "password",
                                          "sni", "skip-cert-verify", NULL};
    static const char *const s5_keys[] = {"name", "type", "server", "port", "udp", "username",
                                          "password", NULL};
    static const char *const http_keys[] = {"name", "type", "server", "port", "username",
                                            "password", "tls", "sni", "skip-cert-verify", NULL};
    struct import_model *m = d->m;
    unsigned line = import_yline(p);
    const char *name = import_ygets(d, p, "name"), *type = import_ygets(d, p, "type");
    const char *server = import_ygets(d, p, "server");
    double port = 0;
    if (p->type != YAML_MAPPING_NODE || name == NULL || type == NULL) {
        import_note(m, line, "a proxy without a name and a type: left out");
        return -1;
    }
    if (strcmp(type, "direct") == 0 || strcmp(type, "reject") == 0) {
        import_add_alias(m, name, type[0] == 'd' ? "DIRECT" : "REJECT", line);
        return 0;
    }
    if (server == NULL || import_ygetn(d, p, "port", &port, name) != 1 || port < 1 || port > 65535) {
        import_note(m, line, "proxy '%s': needs a server and a port 1..65535: left out", name);
        return -1;
    }
    for (size_t i = 0; i < m->nproxies; i++)
        if (strcmp(m->proxies[i].name, name) == 0) {
            import_note(m, line, "proxy '%s': the name is taken (line %u): left out", name,
                     m->proxies[i].line);
            return -1;
        }
    const char *const *known = common;
    const char *ctype = NULL;
    if (strcmp(type, "ss") == 0) {
        const char *cipher = import_ygets(d, p, "cipher");
        if (import_yget(d, p, "plugin") != NULL) {
            import_note(m, line, "proxy '%s': Shadowsocks plugin '%s' is not supported by chute: "
                     "left out", name, import_ygets(d, p, "plugin") ? import_ygets(d, p, "plugin") : "?");
            return -1;
        }
        if (!import_one_of(cipher, ss_ciphers)) {
            import_note(m, line, "proxy '%s': cipher '%s' is not one chute has (aes-128-gcm, "
                     "aes-256-gcm, chacha20-ietf-poly1305): left out", name, cipher ? cipher : "");
            return -1;
        }
        ctype = "shadowsocks", known = ss_keys;
    } else if (strcmp(type, "trojan") == 0) {
        const char *net = import_ygets(d, p, "network");
        if (net != NULL && strcmp(net, "tcp") != 0) {
            import_note(m, line, "proxy '%s': Trojan over %s is not supported by chute: left out",
                     name, net);
            return -1;
        }
        ctype = "trojan", known = tj_keys;
    } else if (strcmp(type, "socks5") == 0) {
        if (import_ygetb(d, p, "tls")) {
            import_note(m, line, "proxy '%s': SOCKS5 over TLS is not supported by chute: left out",
                     name);
            return -1;
        }
        ctype = "socks5", known = s5_keys;
    } else if (strcmp(type, "http") == 0) {
        ctype = import_ygetb(d, p, "tls") ? "https" : "http", known = http_keys;
    } else {
        import_note(m, line, "proxy '%s': chute has no %s protocol: left out", name, type);
        return -1;
    }
    struct import_proxy *ip = import_push(m, &m->proxies, &m->nproxies, &m->pcap, sizeof(*ip));
    ip->name = import_strdup(m, name);
    ip->line = line;
    import_kv_str(m, &ip->f, "type", ctype);
    import_kv_str(m, &ip->f, "server", server);
    import_kv_num(m, &ip->f, "port", port);
    static const char *const strs[][2] = {{"cipher", "cipher"}, {"username", "username"},
                                          {"password", "password"}, {"sni", "sni"}};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        const char *v = import_ygets(d, p, strs[i][0]);
        size_t k;
        for (k = 0; known[k] && strcmp(known[k], strs[i][0]) != 0; k++)
            ;
        if (v != NULL && known[k] != NULL)
            import_kv_str(m, &ip->f, strs[i][1], v);
    }
    if (strcmp(type, "http") == 0 && import_ygetb(d, p, "tls") && import_ygets(d, p, "servername") &&
        !import_ygets(d, p, "sni"))
        import_kv_str(m, &ip->f, "sni", import_ygets(d, p, "servername"));
    if (import_yget(d, p, "udp") != NULL && strcmp(type, "http") != 0)
        import_kv_bool(m, &ip->f, "udp", import_ygetb(d, p, "udp"));
    if (import_ygetb(d, p, "skip-cert-verify"))
        import_kv_bool(m, &ip->f, "skip_cert_verify", 1);
    char what[200];
    snprintf(what, sizeof(what), "proxy '%s'", name);
    static const char *const ok_http[] = {"name", "type", "server", "port", "username",
                                          "password", "tls", "sni", "skip-cert-verify",
                                          "servername", NULL};
    import_yunknown(d, p, strcmp(type, "http") == 0 ? ok_http : known, what);
    return 0;
}

/* ---- providers --------------------------------------------------------- */


/* A `type: file` proxy provider: its proxies are read now and declared as
 * chute.proxy, and the groups that use it list them. */
static void
file_provider(struct doc *d, const char *name, yaml_node_t *v)
{
    struct import_model *m = d->m;
    const char *path = import_ygets(d, v, "path");
    char *data = NULL, err[300];
    size_t len = 0;
    int e = path && m->o->read ? m->o->read(m->o->ud, path, &data, &len) : ENOENT;
    if (e != 0) {
        import_note(m, import_yline(v), "proxy provider '%s': cannot read '%s' (%s): left out", name,
                 path ? path : "(no path)", strerror(e));
        return;
    }
    static const char *const known[] = {"type", "path", "filter", "health-check", NULL};
    char what[200];
    snprintf(what, sizeof(what), "proxy provider '%s'", name);
    if (import_yget(d, v, "health-check") != NULL)
        import_note(m, import_yline(import_yget(d, v, "health-check")), "%s: health-check: chute checks through "
                 "the groups that list its proxies (their url and interval): ignored", what);
    if (import_ygets(d, v, "filter"))
        import_note(m, import_yline(import_yget(d, v, "filter")), "%s: filter: its proxies are declared "
                 "whatever their names; the groups' own filters apply", what);
    import_yunknown(d, v, known, what);
    struct doc pd = {.m = m};
    const char *file = m->file;
    m->file = import_strdup(m, path);
    if (import_yload(m, data, len, &pd.d, err, sizeof(err)) != 0) {
        m->file = file;
        import_note(m, import_yline(v), "proxy provider '%s': %s: left out", name, err);
        free(data);
        return;
    }
    size_t first = m->nproxies;
    yaml_node_t *root = yaml_document_get_root_node(&pd.d);
    yaml_node_t *list = import_yget(&pd, root, "proxies");
    if (list == NULL || list->type != YAML_SEQUENCE_NODE)
        import_note(m, import_yline(root), "no 'proxies:' list: provider '%s' left out", name);
    FOR_SEQ(&pd, list, p)
        import_clash_proxy(&pd, p);
    m->file = file;
    yaml_document_delete(&pd.d);
    free(data);
    struct file_provider *fp = import_push(m, &d->fps, &d->nfps, &d->fpcap, sizeof(*fp));
    *fp = (struct file_provider){import_strdup(m, name), first, m->nproxies - first};
}

void
import_clash_providers(struct doc *d, yaml_node_t *map)
{
    static const char *const known[] = {"type", "url", "path", "interval", "filter",
                                        "health-check", NULL};
    struct import_model *m = d->m;
    FOR_MAP(d, map, k, v) {
        const char *name = import_yscalar(k), *type = import_ygets(d, v, "type");
        char what[200];
        snprintf(what, sizeof(what), "proxy provider '%s'", name ? name : "?");
        if (name == NULL || type == NULL) {
            import_note(m, import_yline(k), "a proxy provider without a name or a type: left out");
            continue;
        }
        if (strcmp(type, "file") == 0) {
            file_provider(d, name, v);
            continue;
        }
        if (strcmp(type, "http") != 0 || import_ygets(d, v, "url") == NULL) {
            import_note(m, import_yline(k), "%s: type '%s' is not supported by chute: left out", what,
                     type);
            continue;
        }
        struct import_provider *p = import_push(m, &m->providers, &m->nproviders, &m->prcap,
                                          sizeof(*p));
        p->name = import_strdup(m, name);
        p->line = import_yline(k);
        import_kv_str(m, &p->f, "url", import_ygets(d, v, "url"));
        double iv;
        if (import_ygetn(d, v, "interval", &iv, what) == 1)
            import_kv_num(m, &p->f, "interval", iv);
        if (import_ygets(d, v, "path"))
            import_kv_str(m, &p->f, "path", import_ygets(d, v, "path"));
        if (import_ygets(d, v, "filter"))
            import_kv_str(m, &p->f, "filter", import_ygets(d, v, "filter"));
        if (import_yget(d, v, "health-check") != NULL)
            import_note(m, import_yline(import_yget(d, v, "health-check")), "%s: health-check: chute checks "
                     "through the groups that use it (their url and interval): ignored", what);
        import_yunknown(d, v, known, what);
    }
}

/* ---- groups ------------------------------------------------------------ */

static int
matches(struct rules_re *re, const char *s)
{
    return re == NULL || rules_re_match(re, s, strlen(s), NULL, 0) >= 0;
}

/* A file provider's proxies, through the group's filter / exclude-filter. */
static int
use_file(struct doc *d, struct import_group *g, const char *prov, yaml_node_t *gn, unsigned line)
{
    struct import_model *m = d->m;
    size_t i;
    for (i = 0; i < d->nfps && strcmp(d->fps[i].name, prov) != 0; i++)
        ;
    if (i == d->nfps)
        return 0;
    char why[200];
    const char *inc = import_ygets(d, gn, "filter"), *exc = import_ygets(d, gn, "exclude-filter");
    struct rules_re *ri = inc ? rules_re_new(inc, strlen(inc), 0, why, sizeof(why)) : NULL;
    struct rules_re *re = exc ? rules_re_new(exc, strlen(exc), 0, why, sizeof(why)) : NULL;
    if ((inc && !ri) || (exc && !re))
        import_note(m, line, "group '%s': filter: %s: the provider's proxies are all listed", g->name,
                 why);
    for (size_t k = d->fps[i].first; k < d->fps[i].first + d->fps[i].n; k++) {
        const char *n = m->proxies[k].name;
        if (matches(ri, n) && (re == NULL || !matches(re, n)))
            import_group_member(m, g, n, line);
    }
    rules_re_free(ri);
    rules_re_free(re);
    return 1;
}

static void
health_url(struct doc *d, struct import_group *g, yaml_node_t *gn)
{
    const char *url = import_ygets(d, gn, "url");
    if (url == NULL)
        return;
    if (strncasecmp(url, "https://", 8) == 0) {
        const char *u = import_fmt(d->m, "http://%s", url + 8);
        import_note(d->m, import_yline(import_yget(d, gn, "url")), "group '%s': chute's health checks speak "
                 "plain HTTP: url %s is checked as %s", g->name, url, u);
        url = u;
    }
    import_kv_str(d->m, &g->f, "url", url);
}

void
import_clash_group(struct doc *d, yaml_node_t *gn)
{
    static const char *const known[] = {
        "name", "type", "proxies", "use", "filter", "exclude-filter", "url", "interval",
        "tolerance", "timeout", "include-all", "include-all-proxies", "include-all-providers",
        "strategy", NULL};
    static const char *const types[] = {"select", "url-test", "fallback", "load-balance", NULL};
    struct import_model *m = d->m;
    const char *name = import_ygets(d, gn, "name"), *type = import_ygets(d, gn, "type");
    unsigned line = import_yline(gn);
    if (name == NULL || type == NULL) {
        import_note(m, line, "a proxy group without a name and a type: left out");
        return;
    }
    for (size_t i = 0; i < m->nproxies; i++)
        if (strcmp(m->proxies[i].name, name) == 0) {
            import_note(m, line, "group '%s': a proxy has the name (line %u): left out", name,
                     m->proxies[i].line);
            return;
        }
    for (size_t i = 0; i < m->ngroups; i++)
        if (strcmp(m->groups[i].name, name) == 0) {
            import_note(m, line, "group '%s': the name is taken (line %u): left out", name,
                     m->groups[i].line);
            return;
        }
    struct import_group *g = import_push(m, &m->groups, &m->ngroups, &m->gcap, sizeof(*g));
    g->name = import_strdup(m, name);
    g->line = line;
    g->type = import_strdup(m, type);
    if (!import_one_of(type, types)) {
        import_note(m, line, "group '%s': chute has no %s groups: left out", name, type);
        g->dropped = 1;
        return;
    }
    char what[200];
    snprintf(what, sizeof(what), "group '%s'", name);
    FOR_SEQ(d, import_yget(d, gn, "proxies"), it)
        if (import_yscalar(it))
            import_group_member(m, g, import_yscalar(it), import_yline(it));
        else
            import_note(m, import_yline(it), "group '%s': a member that is not a name: left out",
                        name);
    if (import_ygetb(d, gn, "include-all") || import_ygetb(d, gn, "include-all-proxies"))
        for (size_t i = 0; i < m->nproxies; i++)
            import_group_member(m, g, m->proxies[i].name, line);
    int all_prov = import_ygetb(d, gn, "include-all") || import_ygetb(d, gn, "include-all-providers");
    FOR_SEQ(d, import_yget(d, gn, "use"), it) {
        const char *u = import_yscalar(it);
        if (u != NULL && !use_file(d, g, u, gn, import_yline(it)))
            *(const char **)import_push(m, &g->use, &g->nuse, &g->ucap, sizeof(char *)) =
                import_strdup(m, u);
    }
    for (size_t i = 0; all_prov && i < d->nfps; i++)
        use_file(d, g, d->fps[i].name, gn, line);
    for (size_t i = 0; all_prov && i < m->nproviders; i++)
        *(const char **)import_push(m, &g->use, &g->nuse, &g->ucap, sizeof(char *)) =
            m->providers[i].name;
    if (g->nuse > 0 && import_ygets(d, gn, "filter"))
        import_kv_str(m, &g->f, "filter", import_ygets(d, gn, "filter"));
    if (g->nuse > 0 && import_ygets(d, gn, "exclude-filter"))
        import_note(m, import_yline(import_yget(d, gn, "exclude-filter")), "%s: exclude-filter over a remote "
                 "provider is not supported by chute: ignored", what);
    health_url(d, g, gn);
    double v;
    if (import_ygetn(d, gn, "interval", &v, what) == 1)
        import_kv_num(m, &g->f, "interval", v);
    if (import_ygetn(d, gn, "timeout", &v, what) == 1)
        import_kv_num(m, &g->f, "timeout", v / 1000); /* mihomo: ms; chute: s */
    if (import_ygetn(d, gn, "tolerance", &v, what) == 1)
        import_kv_num(m, &g->f, "tolerance", v);
    const char *strat = import_ygets(d, gn, "strategy");
    if (strat != NULL && strcmp(strat, "consistent-hashing") != 0)
        import_note(m, import_yline(import_yget(d, gn, "strategy")), "%s: strategy %s: chute's load-balance "
                 "hashes the destination (consistent-hashing)", what, strat);
    import_yunknown(d, gn, known, what);
}

