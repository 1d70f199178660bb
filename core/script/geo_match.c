#include <string.h>
#include <sys/socket.h>

#include "flow/flow.h"
#include "rules/geoip.h"
#include "script/geo.h"
#include "script/geo_int.h"
#include "script/script_int.h"

/* GEOIP and IP-ASN rules against a flow's addresses (geo.h has the
 * contract): each address looked up once per flow however many rules ask. */

/* The memo entry for (kind, address) of |f|, looked up now if new. */
static const struct memo_entry *
memo(struct script_geo *g, struct flow *f, int kind, int family, const uint8_t *addr)
{
    if (g->memo_flow != f || g->memo_id != f->id) {
        g->memo_flow = f;
        g->memo_id = f->id;
        g->nmemo = 0;
    }
    size_t alen = family == AF_INET ? 4 : 16;
    for (unsigned i = 0; i < g->nmemo; i++) {
        struct memo_entry *e = &g->memo[i];
        if (e->kind == kind && e->family == family && memcmp(e->addr, addr, alen) == 0)
            return e;
    }
    static struct memo_entry spare;
    struct memo_entry *e = g->nmemo < SCRIPT_GEO_MEMO ? &g->memo[g->nmemo++] : &spare;
    e->kind = (uint8_t)kind;
    e->family = (uint8_t)family;
    memcpy(e->addr, addr, alen);
    e->n = 0;
    if (kind == 0 && g->db[0] != NULL) {
        e->n = (uint8_t)rules_geoip_codes(g->db[0], family, addr, e->codes);
    } else if (kind == 1 && g->db[1] != NULL) {
        e->n = (uint8_t)rules_geoip_asn(g->db[1], family, addr, &e->asn);
    }
    return e;
}

struct want {
    int kind;
    const char *code;
    uint32_t asn;
};

static int
addr_matches(struct script_geo *g, struct flow *f, const struct want *w, int family,
             const uint8_t *addr)
{
    if (w->kind == 0 && strcmp(w->code, "LAN") == 0)
        return rules_geoip_is_lan(family, addr);
    if (g == NULL)
        return 0;
    const struct memo_entry *e = memo(g, f, w->kind, family, addr);
    if (w->kind == 1)
        return e->n > 0 && e->asn == w->asn;
    for (unsigned i = 0; i < e->n; i++)
        if (strcmp(e->codes[i], w->code) == 0)
            return 1;
    return 0;
}

static int
flow_matches(struct script *s, struct flow *f, const struct want *w, int src, int no_resolve)
{
    struct script_geo *g = s->geo; /* NULL: no geo rule but GEOIP,LAN */
    if (src) {
        f->_reads |= FLOW_READ_UNCACHEABLE;
        if (f->src.ss_family == AF_INET)
            return addr_matches(g, f, w, AF_INET,
                                (const uint8_t *)&((const struct sockaddr_in *)&f->src)->sin_addr);
        if (f->src.ss_family == AF_INET6)
            return addr_matches(g, f, w, AF_INET6,
                                (const uint8_t *)&((const struct sockaddr_in6 *)&f->src)->sin6_addr);
        return 0;
    }
    if (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6)
        return addr_matches(g, f, w, f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6, f->dst.ip);
    if (f->dst.kind != FLOW_ADDR_NAME || no_resolve || script_ip_rule_reached(f))
        return 0;
    for (unsigned i = 0; f->resolved.state == FLOW_RESOLVE_DONE && i < f->resolved.n; i++)
        if (addr_matches(g, f, w, f->resolved.v6 & (1u << i) ? AF_INET6 : AF_INET,
                         f->resolved.ip[i]))
            return 1;
    return 0;
}

int
script_geo_country(struct script *s, struct flow *f, const char *code, int src, int no_resolve)
{
    struct want w = {0, code, 0};
    return flow_matches(s, f, &w, src, no_resolve);
}

int
script_geo_asn(struct script *s, struct flow *f, uint32_t asn, int src, int no_resolve)
{
    struct want w = {1, NULL, asn};
    return flow_matches(s, f, &w, src, no_resolve);
}

void
script_geo_prefetch(struct script *s, const struct flow *f)
{
    struct script_geo *g = s->geo;
    if (g == NULL || (f->dst.kind != FLOW_ADDR_IP4 && f->dst.kind != FLOW_ADDR_IP6))
        return;
    int family = f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6;
    for (int i = 0; i < 2; i++) /* only for a bundle whose rules look there */
        if (g->db[i] != NULL && g->need[i] > 0)
            rules_geoip_prefetch(g->db[i], family, f->dst.ip);
}
