#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "import/import_int.h"
#include "rules/re.h"

/* A Clash / mihomo config.yaml, read into a document by libyaml and walked
 * key by key. Each key chute has is mapped; each it has not gets a note. */

struct file_provider {
    const char *name;
    size_t first, n; /* its proxies in m->proxies */
};

struct doc {
    yaml_document_t d;
    struct imp_model *m;
    struct file_provider *fps; /* the config's file providers read so far */
    size_t nfps, fpcap;
};

static yaml_node_t *
node(struct doc *d, int id)
{
    return id ? yaml_document_get_node(&d->d, id) : NULL;
}

static unsigned
line_of(const yaml_node_t *n)
{
    return n ? (unsigned)n->start_mark.line + 1 : 0;
}

static const char *
scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get_depth(struct doc *d, yaml_node_t *map, const char *key, int depth);

/* "<<: *anchor" (or a list of them): the keys of the merged maps count
 * when the map does not have them itself (YAML 1.1 merge keys, which
 * Clash configs use for shared group settings). */
static yaml_node_t *
merged(struct doc *d, yaml_node_t *v, const char *key, int depth)
{
    if (v != NULL && v->type == YAML_MAPPING_NODE)
        return get_depth(d, v, key, depth + 1);
    if (v == NULL || v->type != YAML_SEQUENCE_NODE)
        return NULL;
    for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
        yaml_node_t *n = get_depth(d, node(d, *i), key, depth + 1);
        if (n != NULL)
            return n;
    }
    return NULL;
}

static yaml_node_t *
get_depth(struct doc *d, yaml_node_t *map, const char *key, int depth)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE || depth > 8)
        return NULL;
    yaml_node_t *merge = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(d, p->key));
        if (k != NULL && strcmp(k, key) == 0)
            return node(d, p->value);
        if (k != NULL && strcmp(k, "<<") == 0)
            merge = node(d, p->value);
    }
    return merged(d, merge, key, depth);
}

static yaml_node_t *
get(struct doc *d, yaml_node_t *map, const char *key)
{
    return get_depth(d, map, key, 0);
}

static const char *
gets(struct doc *d, yaml_node_t *map, const char *key)
{
    return scalar(get(d, map, key));
}

static int
is_true(const char *v)
{
    return v != NULL && (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                         strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0);
}

static int
getb(struct doc *d, yaml_node_t *map, const char *key)
{
    return is_true(gets(d, map, key));
}

/* An integer key: 1 with |*v|, 0 when absent, -1 (noted) when not a number. */
static int
getn(struct doc *d, yaml_node_t *map, const char *key, double *v, const char *what)
{
    yaml_node_t *n = get(d, map, key);
    const char *s = scalar(n);
    if (n == NULL)
        return 0;
    char *end;
    errno = 0;
    *v = s ? strtod(s, &end) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0) {
        imp_note(d->m, line_of(n), "%s: %s '%s' is not a number: ignored", what, key, s ? s : "");
        return -1;
    }
    return 1;
}

#define FOR_SEQ(d, seq, it)                                                                        \
    for (yaml_node_item_t *it##_i = (seq) && (seq)->type == YAML_SEQUENCE_NODE                     \
                                        ? (seq)->data.sequence.items.start : NULL;                 \
         it##_i != NULL && it##_i < (seq)->data.sequence.items.top; it##_i++)                      \
        for (yaml_node_t *it = node(d, *it##_i); it != NULL; it = NULL)

#define FOR_MAP(d, map, k, v)                                                                      \
    for (yaml_node_pair_t *k##_p = (map) && (map)->type == YAML_MAPPING_NODE                       \
                                       ? (map)->data.mapping.pairs.start : NULL;                   \
         k##_p != NULL && k##_p < (map)->data.mapping.pairs.top; k##_p++)                          \
        for (yaml_node_t *k = node(d, k##_p->key), *v = node(d, k##_p->value); k != NULL;          \
             k = NULL)

/* Keys a section knows: anything else in the map gets one note. */
static void
unknown_keys(struct doc *d, yaml_node_t *map, const char *const *known, const char *what)
{
    FOR_MAP(d, map, k, v) {
        const char *ks = scalar(k);
        size_t i;
        for (i = 0; ks != NULL && known[i] != NULL && strcmp(known[i], ks) != 0; i++)
            ;
        if (ks != NULL && strcmp(ks, "<<") == 0 && v != NULL && v->type == YAML_MAPPING_NODE)
            unknown_keys(d, v, known, what);
        else if (ks != NULL && strcmp(ks, "<<") == 0)
            FOR_SEQ(d, v, mv)
                unknown_keys(d, mv, known, what);
        else if (ks != NULL && known[i] == NULL)
            imp_note(d->m, line_of(k), "%s: '%s' is not supported by chute: ignored", what, ks);
    }
}

/* ---- proxies ----------------------------------------------------------- */

static const char *const ss_ciphers[] = {"aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305",
                                         "chacha20-poly1305", NULL};

static int
one_of(const char *v, const char *const *list)
{
    for (size_t i = 0; v != NULL && list[i] != NULL; i++)
        if (strcasecmp(v, list[i]) == 0)
            return 1;
    return 0;
}

/* A proxy from a `proxies:` list (the config's or a file provider's); 0
 * when added, -1 when left out (noted). */
static int
proxy(struct doc *d, yaml_node_t *p)
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
    struct imp_model *m = d->m;
    unsigned line = line_of(p);
    const char *name = gets(d, p, "name"), *type = gets(d, p, "type");
    const char *server = gets(d, p, "server");
    double port = 0;
    if (p->type != YAML_MAPPING_NODE || name == NULL || type == NULL) {
        imp_note(m, line, "a proxy without a name and a type: left out");
        return -1;
    }
    if (strcmp(type, "direct") == 0 || strcmp(type, "reject") == 0) {
        imp_alias(m, name, type[0] == 'd' ? "DIRECT" : "REJECT", line);
        return 0;
    }
    if (server == NULL || getn(d, p, "port", &port, name) != 1 || port < 1 || port > 65535) {
        imp_note(m, line, "proxy '%s': needs a server and a port 1..65535: left out", name);
        return -1;
    }
    for (size_t i = 0; i < m->nproxies; i++)
        if (strcmp(m->proxies[i].name, name) == 0) {
            imp_note(m, line, "proxy '%s': the name is taken (line %u): left out", name,
                     m->proxies[i].line);
            return -1;
        }
    const char *const *known = common;
    const char *ctype = NULL;
    if (strcmp(type, "ss") == 0) {
        const char *cipher = gets(d, p, "cipher");
        if (get(d, p, "plugin") != NULL) {
            imp_note(m, line, "proxy '%s': Shadowsocks plugin '%s' is not supported by chute: "
                     "left out", name, gets(d, p, "plugin") ? gets(d, p, "plugin") : "?");
            return -1;
        }
        if (!one_of(cipher, ss_ciphers)) {
            imp_note(m, line, "proxy '%s': cipher '%s' is not one chute has (aes-128-gcm, "
                     "aes-256-gcm, chacha20-ietf-poly1305): left out", name, cipher ? cipher : "");
            return -1;
        }
        ctype = "shadowsocks", known = ss_keys;
    } else if (strcmp(type, "trojan") == 0) {
        const char *net = gets(d, p, "network");
        if (net != NULL && strcmp(net, "tcp") != 0) {
            imp_note(m, line, "proxy '%s': Trojan over %s is not supported by chute: left out",
                     name, net);
            return -1;
        }
        ctype = "trojan", known = tj_keys;
    } else if (strcmp(type, "socks5") == 0) {
        if (getb(d, p, "tls")) {
            imp_note(m, line, "proxy '%s': SOCKS5 over TLS is not supported by chute: left out",
                     name);
            return -1;
        }
        ctype = "socks5", known = s5_keys;
    } else if (strcmp(type, "http") == 0) {
        ctype = getb(d, p, "tls") ? "https" : "http", known = http_keys;
    } else {
        imp_note(m, line, "proxy '%s': chute has no %s protocol: left out", name, type);
        return -1;
    }
    struct imp_proxy *ip = imp_push(m, &m->proxies, &m->nproxies, &m->pcap, sizeof(*ip));
    ip->name = imp_strdup(m, name);
    ip->line = line;
    imp_kv_str(m, &ip->f, "type", ctype);
    imp_kv_str(m, &ip->f, "server", server);
    imp_kv_num(m, &ip->f, "port", port);
    static const char *const strs[][2] = {{"cipher", "cipher"}, {"username", "username"},
                                          {"password", "password"}, {"sni", "sni"}};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        const char *v = gets(d, p, strs[i][0]);
        size_t k;
        for (k = 0; known[k] && strcmp(known[k], strs[i][0]) != 0; k++)
            ;
        if (v != NULL && known[k] != NULL)
            imp_kv_str(m, &ip->f, strs[i][1], v);
    }
    if (strcmp(type, "http") == 0 && getb(d, p, "tls") && gets(d, p, "servername") &&
        !gets(d, p, "sni"))
        imp_kv_str(m, &ip->f, "sni", gets(d, p, "servername"));
    if (get(d, p, "udp") != NULL && strcmp(type, "http") != 0)
        imp_kv_bool(m, &ip->f, "udp", getb(d, p, "udp"));
    if (getb(d, p, "skip-cert-verify"))
        imp_kv_bool(m, &ip->f, "skip_cert_verify", 1);
    char what[200];
    snprintf(what, sizeof(what), "proxy '%s'", name);
    static const char *const ok_http[] = {"name", "type", "server", "port", "username",
                                          "password", "tls", "sni", "skip-cert-verify",
                                          "servername", NULL};
    unknown_keys(d, p, strcmp(type, "http") == 0 ? ok_http : known, what);
    return 0;
}

/* ---- providers --------------------------------------------------------- */


static int load_yaml(struct imp_model *m, const char *text, size_t len, yaml_document_t *doc,
                     char *err, size_t errlen);

/* A `type: file` proxy provider: its proxies are read now and declared as
 * chute.proxy, and the groups that use it list them. */
static void
file_provider(struct doc *d, const char *name, yaml_node_t *v)
{
    struct imp_model *m = d->m;
    const char *path = gets(d, v, "path");
    char *data = NULL, err[300];
    size_t len = 0;
    int e = path && m->o->read ? m->o->read(m->o->ud, path, &data, &len) : ENOENT;
    if (e != 0) {
        imp_note(m, line_of(v), "proxy provider '%s': cannot read '%s' (%s): left out", name,
                 path ? path : "(no path)", strerror(e));
        return;
    }
    static const char *const known[] = {"type", "path", "filter", "health-check", NULL};
    char what[200];
    snprintf(what, sizeof(what), "proxy provider '%s'", name);
    if (get(d, v, "health-check") != NULL)
        imp_note(m, line_of(get(d, v, "health-check")), "%s: health-check: chute checks through "
                 "the groups that list its proxies (their url and interval): ignored", what);
    if (gets(d, v, "filter"))
        imp_note(m, line_of(get(d, v, "filter")), "%s: filter: its proxies are declared "
                 "whatever their names; the groups' own filters apply", what);
    unknown_keys(d, v, known, what);
    struct doc pd = {.m = m};
    const char *file = m->file;
    m->file = imp_strdup(m, path);
    if (load_yaml(m, data, len, &pd.d, err, sizeof(err)) != 0) {
        m->file = file;
        imp_note(m, line_of(v), "proxy provider '%s': %s: left out", name, err);
        free(data);
        return;
    }
    size_t first = m->nproxies;
    yaml_node_t *root = yaml_document_get_root_node(&pd.d);
    yaml_node_t *list = get(&pd, root, "proxies");
    if (list == NULL || list->type != YAML_SEQUENCE_NODE)
        imp_note(m, line_of(root), "no 'proxies:' list: provider '%s' left out", name);
    FOR_SEQ(&pd, list, p)
        proxy(&pd, p);
    m->file = file;
    yaml_document_delete(&pd.d);
    free(data);
    struct file_provider *fp = imp_push(m, &d->fps, &d->nfps, &d->fpcap, sizeof(*fp));
    *fp = (struct file_provider){imp_strdup(m, name), first, m->nproxies - first};
}

static void
proxy_providers(struct doc *d, yaml_node_t *map)
{
    static const char *const known[] = {"type", "url", "path", "interval", "filter",
                                        "health-check", NULL};
    struct imp_model *m = d->m;
    FOR_MAP(d, map, k, v) {
        const char *name = scalar(k), *type = gets(d, v, "type");
        char what[200];
        snprintf(what, sizeof(what), "proxy provider '%s'", name ? name : "?");
        if (name == NULL || type == NULL) {
            imp_note(m, line_of(k), "a proxy provider without a name or a type: left out");
            continue;
        }
        if (strcmp(type, "file") == 0) {
            file_provider(d, name, v);
            continue;
        }
        if (strcmp(type, "http") != 0 || gets(d, v, "url") == NULL) {
            imp_note(m, line_of(k), "%s: type '%s' is not supported by chute: left out", what,
                     type);
            continue;
        }
        struct imp_provider *p = imp_push(m, &m->providers, &m->nproviders, &m->prcap,
                                          sizeof(*p));
        p->name = imp_strdup(m, name);
        p->line = line_of(k);
        imp_kv_str(m, &p->f, "url", gets(d, v, "url"));
        double iv;
        if (getn(d, v, "interval", &iv, what) == 1)
            imp_kv_num(m, &p->f, "interval", iv);
        if (gets(d, v, "path"))
            imp_kv_str(m, &p->f, "path", gets(d, v, "path"));
        if (gets(d, v, "filter"))
            imp_kv_str(m, &p->f, "filter", gets(d, v, "filter"));
        if (get(d, v, "health-check") != NULL)
            imp_note(m, line_of(get(d, v, "health-check")), "%s: health-check: chute checks "
                     "through the groups that use it (their url and interval): ignored", what);
        unknown_keys(d, v, known, what);
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
use_file(struct doc *d, struct imp_group *g, const char *prov, yaml_node_t *gn, unsigned line)
{
    struct imp_model *m = d->m;
    size_t i;
    for (i = 0; i < d->nfps && strcmp(d->fps[i].name, prov) != 0; i++)
        ;
    if (i == d->nfps)
        return 0;
    char why[200];
    const char *inc = gets(d, gn, "filter"), *exc = gets(d, gn, "exclude-filter");
    struct rules_re *ri = inc ? rules_re_new(inc, strlen(inc), 0, why, sizeof(why)) : NULL;
    struct rules_re *re = exc ? rules_re_new(exc, strlen(exc), 0, why, sizeof(why)) : NULL;
    if ((inc && !ri) || (exc && !re))
        imp_note(m, line, "group '%s': filter: %s: the provider's proxies are all listed", g->name,
                 why);
    for (size_t k = d->fps[i].first; k < d->fps[i].first + d->fps[i].n; k++) {
        const char *n = m->proxies[k].name;
        if (matches(ri, n) && (re == NULL || !matches(re, n)))
            imp_group_member(m, g, n, line);
    }
    rules_re_free(ri);
    rules_re_free(re);
    return 1;
}

static void
health_url(struct doc *d, struct imp_group *g, yaml_node_t *gn)
{
    const char *url = gets(d, gn, "url");
    if (url == NULL)
        return;
    if (strncasecmp(url, "https://", 8) == 0) {
        const char *u = imp_fmt(d->m, "http://%s", url + 8);
        imp_note(d->m, line_of(get(d, gn, "url")), "group '%s': chute's health checks speak "
                 "plain HTTP: url %s is checked as %s", g->name, url, u);
        url = u;
    }
    imp_kv_str(d->m, &g->f, "url", url);
}

static void
group(struct doc *d, yaml_node_t *gn)
{
    static const char *const known[] = {
        "name", "type", "proxies", "use", "filter", "exclude-filter", "url", "interval",
        "tolerance", "timeout", "include-all", "include-all-proxies", "include-all-providers",
        "strategy", NULL};
    static const char *const types[] = {"select", "url-test", "fallback", "load-balance", NULL};
    struct imp_model *m = d->m;
    const char *name = gets(d, gn, "name"), *type = gets(d, gn, "type");
    unsigned line = line_of(gn);
    if (name == NULL || type == NULL) {
        imp_note(m, line, "a proxy group without a name and a type: left out");
        return;
    }
    for (size_t i = 0; i < m->nproxies; i++)
        if (strcmp(m->proxies[i].name, name) == 0) {
            imp_note(m, line, "group '%s': a proxy has the name (line %u): left out", name,
                     m->proxies[i].line);
            return;
        }
    for (size_t i = 0; i < m->ngroups; i++)
        if (strcmp(m->groups[i].name, name) == 0) {
            imp_note(m, line, "group '%s': the name is taken (line %u): left out", name,
                     m->groups[i].line);
            return;
        }
    struct imp_group *g = imp_push(m, &m->groups, &m->ngroups, &m->gcap, sizeof(*g));
    g->name = imp_strdup(m, name);
    g->line = line;
    g->type = imp_strdup(m, type);
    if (!one_of(type, types)) {
        imp_note(m, line, "group '%s': chute has no %s groups: left out", name, type);
        g->dropped = 1;
        return;
    }
    char what[200];
    snprintf(what, sizeof(what), "group '%s'", name);
    FOR_SEQ(d, get(d, gn, "proxies"), it)
        if (scalar(it))
            imp_group_member(m, g, scalar(it), line_of(it));
    if (getb(d, gn, "include-all") || getb(d, gn, "include-all-proxies"))
        for (size_t i = 0; i < m->nproxies; i++)
            imp_group_member(m, g, m->proxies[i].name, line);
    int all_prov = getb(d, gn, "include-all") || getb(d, gn, "include-all-providers");
    FOR_SEQ(d, get(d, gn, "use"), it) {
        const char *u = scalar(it);
        if (u != NULL && !use_file(d, g, u, gn, line_of(it)))
            *(const char **)imp_push(m, &g->use, &g->nuse, &g->ucap, sizeof(char *)) =
                imp_strdup(m, u);
    }
    for (size_t i = 0; all_prov && i < d->nfps; i++)
        use_file(d, g, d->fps[i].name, gn, line);
    for (size_t i = 0; all_prov && i < m->nproviders; i++)
        *(const char **)imp_push(m, &g->use, &g->nuse, &g->ucap, sizeof(char *)) =
            m->providers[i].name;
    if (g->nuse > 0 && gets(d, gn, "filter"))
        imp_kv_str(m, &g->f, "filter", gets(d, gn, "filter"));
    if (g->nuse > 0 && gets(d, gn, "exclude-filter"))
        imp_note(m, line_of(get(d, gn, "exclude-filter")), "%s: exclude-filter over a remote "
                 "provider is not supported by chute: ignored", what);
    health_url(d, g, gn);
    double v;
    if (getn(d, gn, "interval", &v, what) == 1)
        imp_kv_num(m, &g->f, "interval", v);
    if (getn(d, gn, "timeout", &v, what) == 1)
        imp_kv_num(m, &g->f, "timeout", v / 1000); /* mihomo: ms; chute: s */
    if (getn(d, gn, "tolerance", &v, what) == 1)
        imp_kv_num(m, &g->f, "tolerance", v);
    const char *strat = gets(d, gn, "strategy");
    if (strat != NULL && strcmp(strat, "consistent-hashing") != 0)
        imp_note(m, line_of(get(d, gn, "strategy")), "%s: strategy %s: chute's load-balance "
                 "hashes the destination (consistent-hashing)", what, strat);
    unknown_keys(d, gn, known, what);
}

/* ---- rule providers and rules ---------------------------------------- */

static void
rule_providers(struct doc *d, yaml_node_t *map)
{
    static const char *const known[] = {"type", "behavior", "format", "url", "path", "interval",
                                        NULL};
    struct imp_model *m = d->m;
    FOR_MAP(d, map, k, v) {
        const char *name = scalar(k), *type = gets(d, v, "type");
        const char *behavior = gets(d, v, "behavior"), *format = gets(d, v, "format");
        char what[200];
        snprintf(what, sizeof(what), "rule provider '%s'", name ? name : "?");
        if (name == NULL || type == NULL) {
            imp_note(m, line_of(k), "a rule provider without a name or a type: left out");
            continue;
        }
        const char *fmt = behavior == NULL || strcmp(behavior, "classical") == 0 ? "classical"
                          : strcmp(behavior, "domain") == 0                       ? "domain"
                          : strcmp(behavior, "ipcidr") == 0                       ? "ipcidr"
                                                                                  : NULL;
        if (fmt == NULL || (format != NULL && strcmp(format, "mrs") == 0) ||
            (strcmp(type, "file") != 0 && strcmp(type, "http") != 0)) {
            imp_note(m, line_of(k), "%s: %s %s is not a list chute reads: left out, and the "
                     "rules that name it", what, fmt == NULL ? "behavior" : format ? "format"
                     : "type", fmt == NULL ? behavior : format && strcmp(format, "mrs") == 0
                     ? "mrs (binary)" : type);
            continue;
        }
        const char *path = gets(d, v, "path");
        if (strcmp(type, "file") == 0 && path == NULL) {
            imp_note(m, line_of(k), "%s: a file provider needs a path: left out", what);
            continue;
        }
        struct imp_ruleset *r = imp_push(m, &m->rulesets, &m->nrulesets, &m->rscap, sizeof(*r));
        r->name = imp_strdup(m, name);
        r->line = line_of(k);
        r->format = fmt;
        if (strcmp(type, "http") == 0) {
            r->remote = 1;
            imp_kv_str(m, &r->f, "url", gets(d, v, "url") ? gets(d, v, "url") : "");
            imp_kv_str(m, &r->f, "format", fmt);
            double iv;
            if (getn(d, v, "interval", &iv, what) == 1)
                imp_kv_num(m, &r->f, "interval", iv);
            if (path != NULL)
                imp_kv_str(m, &r->f, "path", path);
        } else if (m->o->chunk) {
            r->path = imp_fmt(m, "%s%s", m->o->base ? m->o->base : "", path);
        } else {
            const char *dot = strrchr(path, '.');
            r->path = imp_fmt(m, "rules/%s",
                              imp_file_name(m, name, dot && !strchr(dot, '/') ? dot : ".list"));
            imp_copy(m, path, r->path);
        }
        unknown_keys(d, v, known, what);
    }
}

static int
find_ruleset(struct imp_model *m, const char *name)
{
    for (size_t i = 0; i < m->nrulesets; i++)
        if (strcmp(m->rulesets[i].name, name) == 0)
            return 1;
    return 0;
}

static void
rules(struct doc *d, yaml_node_t *seq)
{
    struct imp_model *m = d->m;
    FOR_SEQ(d, seq, it) {
        const char *s = scalar(it);
        if (s == NULL) {
            imp_note(m, line_of(it), "a rule that is not a string: left out");
            continue;
        }
        struct imp_rule r;
        if (imp_rule_parse(m, s, strlen(s), line_of(it), &r, 0) != 0)
            continue;
        if (strcmp(r.c.type, "DOMAIN-SET") == 0 ||
            (r.c.ruleset != NULL && !find_ruleset(m, r.c.ruleset))) {
            imp_note(m, r.line, "RULE-SET %s: no rule provider chute imported by that name: left "
                     "out", r.c.ruleset);
            continue;
        }
        *(struct imp_rule *)imp_push(m, &m->rules, &m->nrules, &m->rcap, sizeof(r)) = r;
    }
}

/* ---- the top level --------------------------------------------------- */

static const char *
listen_host(struct doc *d, yaml_node_t *root)
{
    if (!getb(d, root, "allow-lan"))
        return "127.0.0.1";
    const char *b = gets(d, root, "bind-address");
    return b == NULL || strcmp(b, "*") == 0 ? "0.0.0.0" : b;
}

static void
ports(struct doc *d, yaml_node_t *root)
{
    static const char *const map[][2] = {
        {"mixed-port", "listen.mixed"}, {"socks-port", "listen.socks"}, {"port", "listen.http"}};
    struct imp_model *m = d->m;
    const char *host = listen_host(d, root);
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        double p;
        if (getn(d, root, map[i][0], &p, "listen") != 1 || p == 0)
            continue;
        const char *addr = strchr(host, ':') ? imp_fmt(m, "[%s]:%d", host, (int)p)
                                             : imp_fmt(m, "%s:%d", host, (int)p);
        yaml_node_t *auth = get(d, root, "authentication");
        if (auth == NULL) {
            imp_kv_str(m, &m->config, map[i][1], addr);
            continue;
        }
        imp_kv_str(m, &m->config, imp_fmt(m, "%s.address", map[i][1]), addr);
        FOR_SEQ(d, auth, a) {
            const char *up = scalar(a), *colon = up ? strchr(up, ':') : NULL;
            if (colon == NULL) {
                imp_note(m, line_of(a), "authentication: expected \"user:password\": ignored");
                continue;
            }
            imp_kv_str(m, &m->config,
                       imp_fmt(m, "%s.users.%.*s", map[i][1], (int)(colon - up), up), colon + 1);
        }
    }
}

static void
dns(struct doc *d, yaml_node_t *dn)
{
    static const char *const known[] = {"enable", "listen", "enhanced-mode", "fake-ip-range",
                                        "fake-ip-filter", "nameserver", NULL};
    struct imp_model *m = d->m;
    if (dn == NULL || !getb(d, dn, "enable")) {
        if (dn != NULL)
            imp_note(m, line_of(dn), "dns: not enabled: chute's DNS settings are left at their "
                     "defaults");
        return;
    }
    const char *mode = gets(d, dn, "enhanced-mode");
    if (mode != NULL && strcmp(mode, "fake-ip") == 0) {
        imp_kv_str(m, &m->config, "dns.mode", "fake-ip");
    } else if (mode != NULL) {
        imp_kv_str(m, &m->config, "dns.mode", "real-ip");
        imp_note(m, line_of(get(d, dn, "enhanced-mode")), "dns: enhanced-mode %s: chute answers "
                 "with real addresses (real-ip)", mode);
    }
    if (gets(d, dn, "fake-ip-range"))
        imp_kv_str(m, &m->config, "dns.fake_ip_range", gets(d, dn, "fake-ip-range"));
    const char *l = gets(d, dn, "listen");
    if (l != NULL)
        imp_kv_str(m, &m->config, "dns.listen", l[0] == ':' ? imp_fmt(m, "0.0.0.0%s", l) : l);
    yaml_node_t *filter = get(d, dn, "fake-ip-filter");
    if (filter != NULL && filter->type == YAML_SEQUENCE_NODE) {
        struct imp_kv *kv = imp_kv_add(m, &m->config, "dns.exclude");
        kv->kind = IMP_LIST;
        kv->list = imp_alloc(m, (size_t)(filter->data.sequence.items.top -
                                         filter->data.sequence.items.start) * sizeof(char *));
        FOR_SEQ(d, filter, f)
            if (scalar(f))
                kv->list[kv->nlist++] = imp_strdup(m, scalar(f));
    }
    yaml_node_t *ns = get(d, dn, "nameserver");
    const char **ups = imp_alloc(m, 8 * sizeof(char *));
    size_t nups = 0;
    FOR_SEQ(d, ns, s) {
        const char *v = scalar(s);
        if (v == NULL)
            continue;
        if (strncmp(v, "udp://", 6) == 0)
            v += 6;
        int plain = strspn(v, "0123456789.:[]abcdefABCDEF") == strlen(v);
        if (!plain || nups == 8) {
            imp_note(m, line_of(s), "dns: nameserver %s: chute asks plain DNS servers (IP or "
                     "IP:PORT, up to 8): left out", v);
            continue;
        }
        ups[nups++] = imp_strdup(m, v);
    }
    if (nups > 0) {
        struct imp_kv *kv = imp_kv_add(m, &m->config, "dns.upstream");
        kv->kind = IMP_LIST;
        kv->list = ups;
        kv->nlist = nups;
    }
    unknown_keys(d, dn, known, "dns");
}

static void
tun(struct doc *d, yaml_node_t *tn)
{
    static const char *const known[] = {"enable", "device", "auto-route", "mtu", "dns-hijack",
                                        "stack", "inet4-address", "route-exclude-address", NULL};
    struct imp_model *m = d->m;
    if (tn == NULL || !getb(d, tn, "enable"))
        return; /* off: chute's default too */
    imp_kv_bool(m, &m->config, "tun.auto_route", getb(d, tn, "auto-route"));
    if (gets(d, tn, "device"))
        imp_kv_str(m, &m->config, "tun.name", gets(d, tn, "device"));
    double mtu;
    if (getn(d, tn, "mtu", &mtu, "tun") == 1)
        imp_kv_num(m, &m->config, "tun.mtu", mtu);
    if (get(d, tn, "dns-hijack") != NULL)
        imp_kv_bool(m, &m->config, "dns.hijack", 1);
    if (gets(d, tn, "stack"))
        imp_note(m, line_of(get(d, tn, "stack")), "tun: stack %s: chute has one stack (lwIP): "
                 "ignored", gets(d, tn, "stack"));
    static const char *const lists[][2] = {{"inet4-address", "tun.address"},
                                           {"route-exclude-address", "tun.exclude"}};
    for (size_t i = 0; i < 2; i++) {
        yaml_node_t *l = get(d, tn, lists[i][0]);
        if (l == NULL || l->type != YAML_SEQUENCE_NODE)
            continue;
        struct imp_kv *kv = imp_kv_add(m, &m->config, lists[i][1]);
        kv->kind = IMP_LIST;
        kv->list = imp_alloc(m, (size_t)(l->data.sequence.items.top -
                                         l->data.sequence.items.start) * sizeof(char *));
        FOR_SEQ(d, l, a)
            if (scalar(a))
                kv->list[kv->nlist++] = imp_strdup(m, scalar(a));
    }
    unknown_keys(d, tn, known, "tun");
}

static void
general(struct doc *d, yaml_node_t *root)
{
    struct imp_model *m = d->m;
    const char *lvl = gets(d, root, "log-level");
    if (lvl != NULL) {
        const char *c = strcmp(lvl, "warning") == 0 ? "warn"
                        : strcmp(lvl, "silent") == 0 ? "error"
                                                     : lvl;
        if (strcmp(lvl, "silent") == 0)
            imp_note(m, line_of(get(d, root, "log-level")), "log-level silent: chute logs errors "
                     "at least (error)");
        if (one_of(c, (const char *const[]){"error", "warn", "info", "debug", NULL}))
            imp_kv_str(m, &m->config, "log_level", c);
    }
    const char *mode = gets(d, root, "mode");
    if (mode != NULL && strcasecmp(mode, "rule") != 0)
        imp_note(m, line_of(get(d, root, "mode")), "mode %s: chute routes by the rules (mode "
                 "rule)", mode);
    const char *ec = gets(d, root, "external-controller");
    if (ec != NULL)
        imp_kv_str(m, &m->config, "control.listen", ec[0] == ':' ? imp_fmt(m, "0.0.0.0%s", ec) : ec);
    if (gets(d, root, "secret") && *gets(d, root, "secret"))
        imp_kv_str(m, &m->config, "control.secret", gets(d, root, "secret"));
    if (gets(d, root, "interface-name"))
        imp_kv_str(m, &m->config, "outbound.interface", gets(d, root, "interface-name"));
    double mark;
    if (getn(d, root, "routing-mark", &mark, "routing-mark") == 1)
        imp_kv_num(m, &m->config, "outbound.fwmark", mark);
}

static int
load_yaml(struct imp_model *m, const char *text, size_t len, yaml_document_t *doc, char *err,
          size_t errlen)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        snprintf(err, errlen, "%s: out of memory", m->file);
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&p, doc);
    if (!ok) {
        /* libyaml's marks are 0-based. */
        char ctx[160] = "";
        if (p.context != NULL)
            snprintf(ctx, sizeof(ctx), " (%s from line %zu)", p.context, p.context_mark.line + 1);
        snprintf(err, errlen, "%s:%zu:%zu: %s%s", m->file, p.problem_mark.line + 1,
                 p.problem_mark.column + 1, p.problem ? p.problem : "not YAML", ctx);
    } else if (yaml_document_get_root_node(doc) == NULL ||
               yaml_document_get_root_node(doc)->type != YAML_MAPPING_NODE) {
        snprintf(err, errlen, "%s:%u: not a config: expected a map of keys (proxies:, rules:, ...)",
                 m->file, line_of(yaml_document_get_root_node(doc)));
        yaml_document_delete(doc);
        ok = 0;
    }
    yaml_parser_delete(&p);
    return ok ? 0 : -1;
}

int
imp_clash(struct imp_model *m, const char *text, size_t len, char *err, size_t errlen)
{
    static const char *const known[] = {
        "port", "socks-port", "mixed-port", "allow-lan", "bind-address", "authentication",
        "log-level", "mode", "external-controller", "secret", "interface-name", "routing-mark",
        "dns", "tun", "proxies", "proxy-providers", "proxy-groups", "rule-providers", "rules",
        NULL};
    struct doc d = {.m = m};
    if (load_yaml(m, text, len, &d.d, err, errlen) != 0)
        return -1;
    yaml_node_t *root = yaml_document_get_root_node(&d.d);
    static const char *const seqs[] = {"proxies", "proxy-groups", "rules", NULL};
    for (size_t i = 0; seqs[i]; i++) {
        yaml_node_t *n = get(&d, root, seqs[i]);
        if (n != NULL && n->type != YAML_SEQUENCE_NODE) {
            snprintf(err, errlen, "%s:%u: %s: expected a list (- ...)", m->file, line_of(n),
                     seqs[i]);
            yaml_document_delete(&d.d);
            return -1;
        }
    }
    general(&d, root);
    ports(&d, root);
    dns(&d, get(&d, root, "dns"));
    tun(&d, get(&d, root, "tun"));
    FOR_SEQ(&d, get(&d, root, "proxies"), p)
        proxy(&d, p);
    proxy_providers(&d, get(&d, root, "proxy-providers"));
    FOR_SEQ(&d, get(&d, root, "proxy-groups"), g)
        group(&d, g);
    rule_providers(&d, get(&d, root, "rule-providers"));
    rules(&d, get(&d, root, "rules"));
    unknown_keys(&d, root, known, "config");
    yaml_document_delete(&d.d);
    return 0;
}
