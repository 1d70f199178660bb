#include <string.h>

#include "flow/addr.h"
#include "outbound/set_int.h"

/* The read-only view of a set that the control API lists (GET /proxies):
 * names, Clash's type words, members and the last health results. */

#define REAL(s) ((s)->owner != NULL ? (s)->owner : (s))

size_t
outbound_set_count(const struct outbound_set *s)
{
    s = REAL(s);
    return FLOW_POLICY__BUILTIN + s->nproxies + s->ngroups;
}

static const char *
proxy_type(const struct outbound_proxy *p)
{
    switch (p->type) {
    case OUTBOUND_SOCKS5:
        return "Socks5";
    case OUTBOUND_HTTP:
        return "Http";
    case OUTBOUND_SHADOWSOCKS:
        return "Shadowsocks";
    case OUTBOUND_TROJAN:
        return "Trojan";
    }
    return "Unknown";
}

static const char *const group_types[] = {"Selector", "Fallback", "URLTest", "LoadBalance"};

/* A proxy's health as every group that checks it saw it: down if any
 * marked it down, the latency of the newest good check. */
static void
member_health(const struct outbound_set *s, int policy, struct outbound_set_entry *e)
{
    for (size_t g = 0; g < s->ngroups; g++)
        for (size_t m = 0; m < s->groups[g].cfg.nmembers; m++) {
            const struct member *x = &s->groups[g].m[m];
            if (x->policy != policy)
                continue;
            if (x->health == HEALTH_DOWN)
                e->alive = 0;
            if (x->latency >= 0)
                e->latency = x->latency;
        }
}

int
outbound_set_entry(const struct outbound_set *s, int policy, struct outbound_set_entry *out)
{
    s = REAL(s);
    if (policy < 0 || (size_t)policy >= outbound_set_count(s))
        return -1;
    memset(out, 0, sizeof(*out));
    out->name = outbound_set_name(s, policy);
    out->alive = 1;
    out->latency = -1;
    out->now = -1;
    if (policy < FLOW_POLICY__BUILTIN) {
        out->type = policy == FLOW_POLICY_DIRECT ? "Direct" : "Reject";
        out->udp = 1;
        member_health(s, policy, out);
        return 0;
    }
    size_t i = (size_t)policy - FLOW_POLICY__BUILTIN;
    if (i < s->nproxies) {
        out->type = proxy_type(&s->proxies[i]);
        out->udp = s->proxies[i].udp;
        out->silent = s->proxies[i].silent;
        member_health(s, policy, out);
        return 0;
    }
    const struct group *g = &s->groups[i - s->nproxies];
    out->type = group_types[g->cfg.type];
    out->is_group = 1;
    out->members = g->cfg.members;
    out->nmembers = g->cfg.nmembers;
    int k = g->cfg.type == OUTBOUND_GROUP_SELECT ? g->cfg.selected : g->cur;
    if (k >= 0 && (size_t)k < g->cfg.nmembers)
        out->now = g->cfg.members[k];
    return 0;
}
