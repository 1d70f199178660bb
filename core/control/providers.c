#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "control/control_int.h"
#include "outbound/set.h"

/* Clash's /providers routes over the bundle's chute.provider and remote
 * chute.ruleset items, in mihomo's shapes (dashboards list and refresh
 * them there):
 *   GET /providers/proxies          {"providers": {name: provider}}
 *   GET /providers/proxies/:name    provider: {name, type "Proxy",
 *                                   vehicleType "HTTP", proxies [...],
 *                                   updatedAt, testUrl}
 *   PUT /providers/proxies/:name    fetch it now: 204 (the result comes
 *                                   later, as a reload, like a timed fetch)
 *   GET /providers/rules            {"providers": {name: {name, type "Rule",
 *                                   vehicleType "HTTP", behavior, format
 *                                   "text", ruleCount, updatedAt}}}
 *   PUT /providers/rules/:name      fetch it now: 204
 * mihomo's "default" provider (every proxy, vehicleType "Compatible") is
 * left out: dashboards hide it. */

#define MAX_PROVIDERS 256

/* RFC 3339 UTC of |age| seconds ago; Go's zero time for none (mihomo's). */
static void
updated_at(double age, char *out, size_t n)
{
    time_t t = time(NULL) - (time_t)age;
    struct tm tm;
    if (age < 0 || gmtime_r(&t, &tm) == NULL)
        snprintf(out, n, "0001-01-01T00:00:00Z");
    else
        strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *
provider_json(struct control *c, const struct control_provider *p)
{
    char at[40];
    updated_at(p->age, at, sizeof(at));
    if (p->rules)
        return json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:s}", "name", p->name, "type", "Rule",
                         "vehicleType", "HTTP", "behavior", p->behavior, "format", "text",
                         "ruleCount", (json_int_t)p->count, "updatedAt", at);
    json_t *all = json_array();
    struct outbound_set *s = c->env.set != NULL ? c->env.set(c->env.ud) : NULL;
    for (size_t k = 0; s != NULL && c->env.provider_proxy != NULL; k++) {
        const char *name = c->env.provider_proxy(c->env.ud, p->name, k);
        if (name == NULL)
            break;
        int id = outbound_set_lookup(s, name);
        json_t *j = id >= 0 ? control_proxy_json(s, id) : NULL;
        if (j != NULL)
            json_array_append_new(all, j);
    }
    return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s}", "name", p->name, "type", "Proxy", "vehicleType",
                     "HTTP", "proxies", all, "updatedAt", at, "testUrl", "");
}

/* The remotes now: the rule sets (|rules|) or the providers of proxies. */
static size_t
list(struct control *c, struct control_provider *v, int rules)
{
    size_t n = c->env.providers != NULL ? c->env.providers(c->env.ud, v, MAX_PROVIDERS) : 0;
    size_t k = 0;
    for (size_t i = 0; i < n && i < MAX_PROVIDERS; i++)
        if (v[i].rules == rules)
            v[k++] = v[i];
    return k;
}

int
control_providers(struct control_client *cl, const struct http_request *req,
                  const struct control_target *t)
{
    int get = METHOD_IS(req, "GET"), put = METHOD_IS(req, "PUT");
    if (t->nsegs < 2 || t->nsegs > 3 || (!get && !put) ||
        (strcmp(t->segs[1], "proxies") != 0 && strcmp(t->segs[1], "rules") != 0))
        return 0;
    int rules = strcmp(t->segs[1], "rules") == 0;
    if (t->nsegs == 2 && !get)
        return 0;
    static struct control_provider v[MAX_PROVIDERS]; /* loop thread only */
    size_t n = list(cl->c, v, rules);
    if (t->nsegs == 2) {
        json_t *m = json_object();
        for (size_t i = 0; i < n; i++)
            json_object_set_new(m, v[i].name, provider_json(cl->c, &v[i]));
        control_reply_json(cl, 200, json_pack("{s:o}", "providers", m));
        return 1;
    }
    const char *name = t->segs[2];
    size_t i = 0;
    while (i < n && strcmp(v[i].name, name) != 0)
        i++;
    if (i == n) {
        control_reply_error(cl, 404, "resource not found");
        return 1;
    }
    if (get) {
        control_reply_json(cl, 200, provider_json(cl->c, &v[i]));
    } else if (cl->c->env.provider_refresh == NULL ||
               cl->c->env.provider_refresh(cl->c->env.ud, rules, name) < 0) {
        control_reply_error(cl, 404, "resource not found");
    } else {
        control_reply(cl, 204, NULL, NULL, 0);
    }
    return 1;
}
