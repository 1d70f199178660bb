#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"
#include "engine/engine.h"
#include "log/log.h"
#include "flow/flow.h"
#include "ip/ip.h"
#include "script/script.h"
#include "tun/tun.h"

/* The engine's side of DNS: the resolver and the server follow the bundle,
 * the TUN's port 53 goes to the server, and a flow's destination learns
 * its name from the fake-IP pool (or, in real-ip mode, from the answers). */

static void
on_dns_hook(void *arg, const char *name, uint16_t qtype, struct dns_hook_result *out)
{
    struct engine *e = arg;
    script_on_dns(e->script, name, qtype, out);
}

/* Two configs that would build the same server: the running one stays. */
static int
same_server(const struct script_dns *a, const struct script_dns *b)
{
    if (a->mode != b->mode || strcmp(a->range4, b->range4) || strcmp(a->range6, b->range6) ||
        a->fake_ttl != b->fake_ttl || a->fake_max != b->fake_max ||
        a->has_listen != b->has_listen || a->nexclude != b->nexclude ||
        (a->has_listen && memcmp(&a->listen, &b->listen, sizeof(a->listen))) ||
        (a->state_file == NULL) != (b->state_file == NULL) ||
        (a->state_file && strcmp(a->state_file, b->state_file)))
        return 0;
    for (size_t i = 0; i < a->nexclude; i++)
        if (strcmp(a->exclude[i], b->exclude[i]) != 0)
            return 0;
    return 1;
}

void
engine_resolver_opts(const struct script_config *cfg, struct dns_resolver_opts *ro)
{
    dns_resolver_opts_default(ro);
    memcpy(ro->upstream, cfg->dns.upstream, sizeof(ro->upstream));
    ro->nupstream = cfg->dns.nupstream;
    snprintf(ro->interface, sizeof(ro->interface), "%s", cfg->out_interface);
    ro->fwmark = cfg->out_fwmark;
    ro->timeout = cfg->dns.timeout;
    ro->cache_entries = cfg->dns.cache;
}

/* The same, with the host's socket protection (the embedding API). */
static void
resolver_opts(const struct engine *e, const struct script_config *cfg,
              struct dns_resolver_opts *ro)
{
    engine_resolver_opts(cfg, ro);
    if (e->budget.dns_cache != 0 && ro->cache_entries > e->budget.dns_cache)
        ro->cache_entries = e->budget.dns_cache; /* 0 stays off */
    ro->protect = e->out.protect;
    ro->protect_arg = e->out.protect_arg;
}

static struct dns_server *
server_new(struct engine *e, const struct script_config *cfg, char *err, size_t errlen)
{
    const struct script_dns *d = &cfg->dns;
    struct dns_server_opts so = {
        .mode = (enum dns_mode)d->mode,
        .fake_ttl = d->fake_ttl,
        .fake_max = engine_budget_cap(d->fake_max, e->budget.fake_ips),
        .state_file = d->state_file,
        .exclude = (const char *const *)d->exclude,
        .nexclude = d->nexclude,
        .listen = d->has_listen ? &d->listen : NULL,
    };
    snprintf(so.range4, sizeof(so.range4), "%s", d->range4);
    snprintf(so.range6, sizeof(so.range6), "%s", d->range6);
    struct dns_server *s = dns_server_new(e->loop, e->dns, &so, err, errlen);
    /* The TUN's own addresses never reach the TUN: never hand them out. */
    for (size_t i = 0; s != NULL && cfg->tun.enabled && i < cfg->tun.num_addrs; i++)
        dns_server_reserve(s, cfg->tun.addrs[i].addr,
                           cfg->tun.addrs[i].family == AF_INET ? 4 : 6);
    return s;
}

int
engine_dns_load(struct engine *e, const struct script_config *old, const struct script_config *cfg,
                char *err, size_t errlen)
{
    struct dns_resolver_opts ro;
    resolver_opts(e, cfg, &ro);
    if (dns_resolver_configure(e->dns, &ro, err, errlen) != 0)
        return -1;
    if (!cfg->dns.enabled) {
        dns_server_free(e->dnss);
        e->dnss = NULL;
        return 0;
    }
    if (e->dnss == NULL || old == NULL || !same_server(&old->dns, &cfg->dns)) {
        /* The old server saves its mappings (and frees its listener's
         * port) before the new one reads them (and binds it). */
        dns_server_free(e->dnss);
        e->dnss = server_new(e, cfg, err, errlen);
        if (e->dnss == NULL) {
            /* The reload fails and the running bundle stays: so do its
             * resolver settings and its DNS server, rebuilt from its state. */
            if (old != NULL) {
                char ignored[256];
                resolver_opts(e, old, &ro);
                dns_resolver_configure(e->dns, &ro, ignored, sizeof(ignored));
                if (old->dns.enabled) {
                    e->dnss = server_new(e, old, ignored, sizeof(ignored));
                    engine_dns_hook(e); /* e->script is still the running one */
                }
            }
            return -1;
        }
    }
    return 0;
}

void
engine_dns_hook(struct engine *e)
{
    if (e->dnss != NULL)
        dns_server_set_hook(e->dnss, script_has_on_dns(e->script) ? on_dns_hook : NULL, e);
}

/* ---- the TUN's UDP/53 ---- */

struct tun_ctx {
    struct engine *e;
    uint8_t version;
    uint16_t sport, dport;
    uint8_t src[16], dst[16];
};

static void
on_tun_answer(const void *ctx, const uint8_t *msg, size_t len)
{
    const struct tun_ctx *c = ctx;
    struct tun *tun = c->e->tun;
    if (tun == NULL)
        return; /* the TUN closed while the upstream answered */
    size_t hdr = c->version == 4 ? 28 : 48;
    uint8_t *slot = tun_wq_reserve(tun, hdr + len);
    size_t n = slot ? ip_build_udp(slot, hdr + len, c->version, c->dst, c->dport, c->src, c->sport,
                                   msg, len)
                    : 0;
    if (n > 0)
        tun_wq_commit(tun, n);
}

int
engine_dns_udp(struct engine *e, const struct ip_view *v)
{
    if (e->dnss == NULL || v->dport != 53 || !script_config(e->script)->dns.hijack)
        return 0;
    struct tun_ctx c = {.e = e, .version = v->version, .sport = v->sport, .dport = v->dport};
    memcpy(c.src, v->src, v->version == 4 ? 4 : 16);
    memcpy(c.dst, v->dst, v->version == 4 ? 4 : 16);
    /* Answers must fit the TUN's MTU (no fragments here): larger ones are
     * truncated and the client asks again over TCP. */
    size_t hdr = v->version == 4 ? 28 : 48, mtu = (size_t)tun_mtu(e->tun);
    dns_server_query(e->dnss, v->payload, v->payload_len, mtu > hdr + 512 ? mtu - hdr : 512, 1,
                     on_tun_answer, &c, sizeof(c));
    return 1;
}

int
engine_dns_tcp(struct engine *e, struct flow *f)
{
    if (e->dnss == NULL || f->dst.port != 53 || !script_config(e->script)->dns.hijack)
        return 0;
    const struct sockaddr_storage *ss = dns_server_tcp_addr(e->dnss);
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        f->dst.kind = FLOW_ADDR_IP6;
        memcpy(f->dst.ip, &in6->sin6_addr, 16);
        f->dst.port = ntohs(in6->sin6_port);
    } else {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        f->dst.kind = FLOW_ADDR_IP4;
        memcpy(f->dst.ip, &in->sin_addr, 4);
        f->dst.port = ntohs(in->sin_port);
    }
    f->policy = FLOW_POLICY_DIRECT;
    f->rule = "dns";
    return 1;
}

int
engine_flow_name(struct engine *e, struct flow *f)
{
    if (e->dnss == NULL || (f->dst.kind != FLOW_ADDR_IP4 && f->dst.kind != FLOW_ADDR_IP6))
        return 0;
    int version = f->dst.kind == FLOW_ADDR_IP4 ? 4 : 6;
    if (dns_server_is_fake(e->dnss, f->dst.ip, version)) {
        const char *name = dns_server_fake_name(e->dnss, f->dst.ip, version);
        if (name == NULL) {
            dns_server_count_fake_miss(e->dnss);
            return -1;
        }
        flow_addr_from_host(&f->dst, name, strlen(name), f->dst.port);
        return 0;
    }
    if (script_config(e->script)->dns.mode == DNS_MODE_REAL_IP && f->sniffed == NULL) {
        const char *name = dns_resolver_name_of(e->dns, f->dst.ip, version);
        if (name != NULL)
            f->sniffed = strdup(name);
    }
    return 0;
}
