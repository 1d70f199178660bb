#include <sys/socket.h>

#include "rules/rules.h"
#include "script/script_int.h"

/* IP rules on a named flow (Surge and mihomo): without no-resolve, an
 * IP-CIDR rule matches the addresses the name resolves to; the name is
 * resolved lazily, once, only when such a rule is reached before any rule
 * matched. Reaching one with no addresses yet marks the flow
 * FLOW_READ_RESOLVE: the engine then resolves and decides again
 * (flow/session.c: flow_open), and this time the addresses are there. */

int
script_ip_rule_reached(struct flow *f)
{
    if (f->dst.kind != FLOW_ADDR_NAME || f->resolved.state != FLOW_RESOLVE_NONE)
        return 0;
    f->_reads |= FLOW_READ_RESOLVE;
    return 1;
}

int
script_cidrs_match_flow(const struct rules_cidrs *all, const struct rules_cidrs *resolving,
                        const struct flow *f, uint32_t *tag)
{
    uint32_t best = UINT32_MAX, t;
    if (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6)
        return rules_cidrs_match(all, f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6,
                                 f->dst.ip, tag);
    if (f->dst.kind != FLOW_ADDR_NAME || f->resolved.state != FLOW_RESOLVE_DONE)
        return 0;
    for (unsigned i = 0; i < f->resolved.n; i++) {
        int fam = f->resolved.v6 & (1u << i) ? AF_INET6 : AF_INET;
        if (rules_cidrs_match(resolving, fam, f->resolved.ip[i], &t) && t < best)
            best = t;
    }
    if (best == UINT32_MAX)
        return 0;
    *tag = best;
    return 1;
}
