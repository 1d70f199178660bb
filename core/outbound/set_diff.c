#include <stdio.h>
#include <string.h>

#include "log/log.h"
#include "outbound/set_int.h"

/* What a reload changed in the proxies and groups, in one line:
 *   reload: proxies +jp -hk ~sg; groups +auto ~fb
 * (+ added, - removed, ~ changed settings or members). */

#define REAL(s) ((s)->owner != NULL ? (s)->owner : (s))

struct line {
    char buf[900];
    size_t off;
    int any;
};

static void
add(struct line *l, char mark, const char *name)
{
    int n = l->off < sizeof(l->buf) ? snprintf(l->buf + l->off, sizeof(l->buf) - l->off, " %c%s",
                                               mark, name)
                                     : 0;
    if (n > 0)
        l->off = l->off + (size_t)n < sizeof(l->buf) ? l->off + (size_t)n : sizeof(l->buf);
    l->any = 1;
}

static int
proxy_changed(const struct outbound_proxy *a, const struct outbound_proxy *b)
{
    /* A CA file of its own counts as the same if its name did not change. */
    struct outbound_proxy x = *a, y = *b;
    x.anchors = y.anchors = NULL;
    return !outbound_set_same_proxy(&x, &y) || x.udp != y.udp;
}

static int
group_changed(const struct outbound_set *was, const struct group *a, const struct outbound_set *now,
              const struct group *b)
{
    if (a->cfg.type != b->cfg.type || a->cfg.nmembers != b->cfg.nmembers ||
        strcmp(a->cfg.url, b->cfg.url) != 0 || a->cfg.interval != b->cfg.interval)
        return 1;
    for (size_t i = 0; i < a->cfg.nmembers; i++)
        if (strcmp(outbound_set_name(was, a->cfg.members[i]),
                   outbound_set_name(now, b->cfg.members[i])) != 0)
            return 1;
    return 0;
}

static void
proxies(struct line *l, const struct outbound_set *was, const struct outbound_set *now)
{
    for (size_t i = 0; i < now->nproxies; i++) {
        const struct outbound_proxy *p = &now->proxies[i];
        const struct outbound_proxy *q = outbound_set_proxy(was, outbound_set_lookup(was, p->name));
        if (q == NULL)
            add(l, '+', p->name);
        else if (proxy_changed(q, p))
            add(l, '~', p->name);
    }
    for (size_t i = 0; i < was->nproxies; i++)
        if (outbound_set_proxy(now, outbound_set_lookup(now, was->proxies[i].name)) == NULL)
            add(l, '-', was->proxies[i].name);
}

static const struct group *
group_named(const struct outbound_set *s, const char *name)
{
    for (size_t i = 0; i < s->ngroups; i++)
        if (strcmp(s->groups[i].cfg.name, name) == 0)
            return &s->groups[i];
    return NULL;
}

static void
groups(struct line *l, const struct outbound_set *was, const struct outbound_set *now)
{
    for (size_t i = 0; i < now->ngroups; i++) {
        const struct group *g = &now->groups[i];
        const struct group *h = group_named(was, g->cfg.name);
        if (h == NULL)
            add(l, '+', g->cfg.name);
        else if (group_changed(was, h, now, g))
            add(l, '~', g->cfg.name);
    }
    for (size_t i = 0; i < was->ngroups; i++)
        if (group_named(now, was->groups[i].cfg.name) == NULL)
            add(l, '-', was->groups[i].cfg.name);
}

void
outbound_set_log_diff(const struct outbound_set *was, const struct outbound_set *now)
{
    struct line p = {.off = 0}, g = {.off = 0};
    if (was == NULL || now == NULL)
        return;
    was = REAL(was);
    now = REAL(now);
    proxies(&p, was, now);
    groups(&g, was, now);
    if (!p.any && !g.any) {
        LOG_DEBUG("reload: proxies and groups unchanged (%zu proxies, %zu groups)", now->nproxies,
                  now->ngroups);
        return;
    }
    LOG_INFO("reload:%s%s%s%s%s", p.any ? " proxies" : "", p.any ? p.buf : "",
             p.any && g.any ? ";" : "", g.any ? " groups" : "", g.any ? g.buf : "");
}
