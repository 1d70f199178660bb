#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/import_int.h"
#include "log/log.h"

/* The model's memory. A config is read once, at load: running out of
 * memory here ends the process with a message (STYLE.md §8 allows it only
 * at configuration time). */

static void *
must(void *p)
{
    if (p == NULL) {
        LOG_ERROR("import: out of memory");
        abort();
    }
    return p;
}

static void
own(struct import_model *m, void *p)
{
    if (m->nowned == m->ocap) {
        m->ocap = m->ocap ? m->ocap * 2 : 64;
        m->owned = must(realloc(m->owned, m->ocap * sizeof(*m->owned)));
    }
    m->owned[m->nowned++] = p;
}

void *
import_alloc(struct import_model *m, size_t n)
{
    void *p = must(calloc(1, n ? n : 1));
    own(m, p);
    return p;
}

const char *
import_strndup(struct import_model *m, const char *s, size_t n)
{
    char *p = import_alloc(m, n + 1);
    memcpy(p, s, n);
    return p;
}

const char *
import_strdup(struct import_model *m, const char *s)
{
    return s ? import_strndup(m, s, strlen(s)) : NULL;
}

const char *
import_fmt(struct import_model *m, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        must(NULL);
    own(m, s);
    return s;
}

/* Arrays grow in place; the old block is the model's no more (realloc may
 * move it), so arrays are freed by their owner's slot: they are kept in
 * |owned| only through the last pointer, updated here. */
void *
import_push(struct import_model *m, void *v, size_t *n, size_t *cap, size_t size)
{
    char *a;
    memcpy(&a, v, sizeof(a));
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        char *na = must(realloc(a, nc * size));
        for (size_t i = 0; a != NULL && i < m->nowned; i++)
            if (m->owned[i] == a) {
                m->owned[i] = na;
                break;
            }
        if (a == NULL)
            own(m, na);
        a = na;
        *cap = nc;
        memcpy(v, &a, sizeof(a));
    }
    void *slot = a + *n * size;
    memset(slot, 0, size);
    (*n)++;
    return slot;
}

void
import_note(struct import_model *m, unsigned line, const char *fmt, ...)
{
    struct import_result *r = m->out;
    char what[600], *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (line > 0 ? asprintf(&s, "%s:%u: %s", m->file, line, what) < 0
                 : asprintf(&s, "%s: %s", m->file, what) < 0)
        must(NULL);
    for (char *p = s; *p; p++) /* a note is one line, with nothing a terminal acts on */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    for (size_t i = 0; i < r->nnotes; i++)
        if (strcmp(r->notes[i], s) == 0) { /* listed once */
            free(s);
            return;
        }
    r->notes = must(realloc(r->notes, (r->nnotes + 1) * sizeof(*r->notes)));
    r->notes[r->nnotes++] = s;
}

struct import_kv *
import_kv_add(struct import_model *m, struct import_kvs *k, const char *key)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i].key, key) == 0) {
            memset(&k->v[i], 0, sizeof(k->v[i]));
            k->v[i].key = import_strdup(m, key);
            return &k->v[i];
        }
    struct import_kv *kv = import_push(m, &k->v, &k->n, &k->cap, sizeof(*kv));
    kv->key = import_strdup(m, key);
    return kv;
}

void
import_kv_str(struct import_model *m, struct import_kvs *k, const char *key, const char *v)
{
    struct import_kv *kv = import_kv_add(m, k, key);
    kv->kind = IMPORT_STR;
    kv->s = import_strdup(m, v);
}

void
import_kv_num(struct import_model *m, struct import_kvs *k, const char *key, double v)
{
    struct import_kv *kv = import_kv_add(m, k, key);
    kv->kind = IMPORT_NUM;
    kv->n = v;
}

void
import_kv_bool(struct import_model *m, struct import_kvs *k, const char *key, int v)
{
    struct import_kv *kv = import_kv_add(m, k, key);
    kv->kind = IMPORT_BOOL;
    kv->b = v;
}

const struct import_kv *
import_kv_get(const struct import_kvs *k, const char *key)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i].key, key) == 0)
            return &k->v[i];
    return NULL;
}

void
import_add_copy(struct import_model *m, const char *from, const char *to)
{
    struct import_result *r = m->out;
    r->copies = must(realloc(r->copies, (r->ncopies + 1) * sizeof(*r->copies)));
    r->copies[r->ncopies].from = must(strdup(from));
    r->copies[r->ncopies].to = must(strdup(to));
    r->copies[r->ncopies].optional = 0;
    r->ncopies++;
}

void
import_add_geo(struct import_model *m, const char *type)
{
    const char *db = strstr(type, "ASN") != NULL ? "GeoLite2-ASN.mmdb"
                     : strstr(type, "GEOSITE") != NULL ? "GeoSite.dat"
                                                       : "Country.mmdb";
    struct import_result *r = m->out;
    for (size_t i = 0; i < r->ncopies; i++)
        if (strcmp(r->copies[i].to, db) == 0)
            return;
    import_add_copy(m, db, db);
    r->copies[r->ncopies - 1].optional = 1;
}

void
import_add_alias(struct import_model *m, const char *name, const char *to, unsigned line)
{
    struct import_alias *a = import_push(m, &m->aliases, &m->naliases, &m->acap, sizeof(*a));
    a->name = import_strdup(m, name);
    a->to = to;
    import_note(m, line, "proxy '%s' is %s by another name: groups and rules naming it use %s",
             name, to, to);
}

static const char *
unalias(const struct import_model *m, const char *n)
{
    for (size_t i = 0; i < m->naliases; i++)
        if (strcmp(m->aliases[i].name, n) == 0)
            return m->aliases[i].to;
    return n;
}

void
import_group_member(struct import_model *m, struct import_group *g, const char *name, unsigned line)
{
    for (size_t i = 0; i < g->nmembers; i++)
        if (strcmp(g->members[i].name, name) == 0)
            return;
    struct import_member *slot = import_push(m, &g->members, &g->nmembers, &g->mcap, sizeof(*slot));
    slot->name = import_strdup(m, name);
    slot->line = line;
}

const char *
import_file_name(struct import_model *m, const char *name, const char *ext)
{
    char *s = (char *)import_fmt(m, "%s%s", name, ext);
    for (char *p = s; *p && p < s + strlen(name); p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            *p = '_';
    return s;
}

/* ---- the checks ------------------------------------------------------------ */

static int
builtin_policy(const char *n)
{
    return strcmp(n, "DIRECT") == 0 || strcmp(n, "REJECT") == 0 || strcmp(n, "REJECT-DROP") == 0 ||
           strcmp(n, "REJECT-NO-DROP") == 0 || strcmp(n, "REJECT-TINYGIF") == 0;
}

static struct import_group *
find_group(struct import_model *m, const char *n)
{
    for (size_t i = 0; i < m->ngroups; i++)
        if (strcmp(m->groups[i].name, n) == 0)
            return &m->groups[i];
    return NULL;
}

static int
is_proxy(const struct import_model *m, const char *n)
{
    for (size_t i = 0; i < m->nproxies; i++)
        if (strcmp(m->proxies[i].name, n) == 0)
            return 1;
    return 0;
}

static int
is_provider(const struct import_model *m, const char *n)
{
    for (size_t i = 0; i < m->nproviders; i++)
        if (strcmp(m->providers[i].name, n) == 0)
            return 1;
    return 0;
}

/* chute's groups hold proxies, DIRECT and REJECT: a member that is a group
 * gives its own members in its place (the nearest chute has). */
static void
flatten(struct import_model *m, struct import_group *g, unsigned char *state)
{
    size_t gi = (size_t)(g - m->groups);
    if (state[gi] == 2)
        return;
    if (g->dropped) { /* a type chute lacks: noted by its reader */
        state[gi] = 2;
        return;
    }
    state[gi] = 1;
    struct import_member *old = g->members;
    size_t n = g->nmembers;
    g->members = NULL;
    g->nmembers = g->mcap = 0;
    for (size_t i = 0; i < n; i++) {
        struct import_group *sub = find_group(m, old[i].name);
        if (builtin_policy(old[i].name) || is_proxy(m, old[i].name)) {
            import_group_member(m, g, old[i].name, old[i].line);
        } else if (sub != NULL && state[sub - m->groups] == 1) {
            import_note(m, old[i].line, "group '%s': member '%s' leads back to this group: left out",
                     g->name, old[i].name);
        } else if (sub != NULL) {
            flatten(m, sub, state);
            if (sub->dropped) {
                import_note(m, old[i].line, "group '%s': member '%s' was left out (see its note): "
                         "left out here too", g->name, old[i].name);
                continue;
            }
            import_note(m, old[i].line, "group '%s': member '%s' is a group, and chute's groups hold "
                     "proxies only: its %zu member%s%s %s listed in its place", g->name,
                     old[i].name, sub->nmembers, sub->nmembers == 1 ? "" : "s",
                     sub->nuse ? " and its providers" : "",
                     sub->nmembers == 1 && !sub->nuse ? "is" : "are");
            for (size_t k = 0; k < sub->nmembers; k++)
                import_group_member(m, g, sub->members[k].name, old[i].line);
            for (size_t k = 0; k < sub->nuse; k++) {
                size_t j;
                for (j = 0; j < g->nuse && strcmp(g->use[j], sub->use[k]) != 0; j++)
                    ;
                if (j == g->nuse)
                    *(const char **)import_push(m, &g->use, &g->nuse, &g->ucap, sizeof(char *)) =
                        sub->use[k];
            }
        } else {
            import_note(m, old[i].line, "group '%s': member '%s' is not a proxy chute imported: left out",
                     g->name, old[i].name);
        }
    }
    for (size_t k = 0; k < g->nuse; k++)
        if (!is_provider(m, g->use[k]))
            import_note(m, g->line, "group '%s': provider '%s' is not one chute imported: left out",
                     g->name, g->use[k]);
    size_t keep = 0;
    for (size_t k = 0; k < g->nuse; k++)
        if (is_provider(m, g->use[k]))
            g->use[keep++] = g->use[k];
    g->nuse = keep;
    if (g->nmembers == 0 && g->nuse == 0) {
        g->dropped = 1;
        import_note(m, g->line, "group '%s' has no member chute can use: left out, and the rules "
                 "that name it", g->name);
    }
    state[gi] = 2;
}

static int
policy_ok(struct import_model *m, const char *p)
{
    if (builtin_policy(p) || is_proxy(m, p))
        return 1;
    struct import_group *g = find_group(m, p);
    return g != NULL && !g->dropped;
}

/* What chute.proxy would refuse for want of a field: noted here, with the
 * proxy's line, and left out (the groups then note the member). */
static void
check_proxies(struct import_model *m)
{
    size_t keep = 0;
    for (size_t i = 0; i < m->nproxies; i++) {
        struct import_proxy *p = &m->proxies[i];
        const char *type = import_kv_get(&p->f, "type")->s;
        int user = import_kv_get(&p->f, "username") != NULL;
        int pass = import_kv_get(&p->f, "password") != NULL;
        const char *why = NULL;
        if (strcmp(type, "shadowsocks") == 0 && (!pass || !import_kv_get(&p->f, "cipher")))
            why = "needs a cipher and a password";
        else if (strcmp(type, "trojan") == 0 && !pass)
            why = "needs a password";
        else if (strcmp(type, "trojan") != 0 && strcmp(type, "shadowsocks") != 0 && user != pass)
            why = "a username and a password go together";
        if (why != NULL) {
            import_note(m, p->line, "proxy '%s' (%s): %s: left out", p->name, type, why);
            continue;
        }
        m->proxies[keep++] = *p;
    }
    m->nproxies = keep;
}

void
import_model_check(struct import_model *m)
{
    check_proxies(m);
    for (size_t i = 0; m->naliases > 0 && i < m->ngroups; i++)
        for (size_t k = 0; k < m->groups[i].nmembers; k++)
            m->groups[i].members[k].name = unalias(m, m->groups[i].members[k].name);
    for (size_t i = 0; m->naliases > 0 && i < m->nrules; i++)
        m->rules[i].policy = unalias(m, m->rules[i].policy);
    unsigned char *state = import_alloc(m, m->ngroups);
    for (size_t i = 0; i < m->ngroups; i++)
        flatten(m, &m->groups[i], state);
    /* Rules naming a policy chute does not have: left out, one note per
     * policy with the count and the first line. */
    size_t keep = 0;
    const char *seen[64];
    size_t nseen = 0;
    for (size_t i = 0; i < m->nrules; i++) {
        struct import_rule *r = &m->rules[i];
        if (policy_ok(m, r->policy)) {
            m->rules[keep++] = *r;
            continue;
        }
        size_t count = 0, k;
        for (k = 0; k < nseen && strcmp(seen[k], r->policy) != 0; k++)
            ;
        if (k < nseen)
            continue;
        for (size_t j = i; j < m->nrules; j++)
            count += strcmp(m->rules[j].policy, r->policy) == 0;
        if (nseen < 64)
            seen[nseen++] = r->policy;
        import_note(m, r->line, "%zu rule%s name%s policy '%s', which chute does not have: left out "
                 "(flows go on to the rules below)", count, count == 1 ? "" : "s",
                 count == 1 ? "s" : "", r->policy);
    }
    m->nrules = keep;
}
