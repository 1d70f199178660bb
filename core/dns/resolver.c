#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/resolve_int.h"

const char dns_err_not_found[] = "name not found";
const char dns_err_timeout[] = "timeout";
const char dns_err_servfail[] = "server failure";
const char dns_err_nomem[] = "out of memory";

#define REVERSE_ENTRIES 65536
#define CACHE_MIN_TTL 1        /* a zero-TTL answer still serves a burst */
#define CACHE_MAX_TTL 86400
#define CACHE_NEG_TTL 30       /* negative answers without an SOA */

/* Which families the machine can reach, as AI_ADDRCONFIG decides:
 * loopback and IPv6 link-local addresses do not count. */
static unsigned
machine_families(const char *ifname)
{
    struct ifaddrs *list;
    unsigned f = 0;
    if (getifaddrs(&list) != 0)
        return DNS_FAMILY_V4 | DNS_FAMILY_V6;
    for (struct ifaddrs *i = list; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (ifname[0] != '\0' && strcmp(i->ifa_name, ifname) != 0))
            continue;
        if (i->ifa_addr->sa_family == AF_INET) {
            const uint8_t *a = (const uint8_t *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if (a[0] != 127)
                f |= DNS_FAMILY_V4;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct in6_addr *a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
            if (!IN6_IS_ADDR_LOOPBACK(a) && !IN6_IS_ADDR_LINKLOCAL(a))
                f |= DNS_FAMILY_V6;
        }
    }
    freeifaddrs(list);
    return f != 0 ? f : DNS_FAMILY_V4 | DNS_FAMILY_V6;
}

const char *
dns_resolver_name_of(struct dns_resolver *r, const uint8_t *ip, int version)
{
    return dns_revmap_get(r->rev, ip, version);
}

void
dns_resolver_stats(const struct dns_resolver *r, struct dns_resolver_stats *out)
{
    *out = r->st;
    out->sent = r->up.sent;
    out->timeouts = r->up.timeouts;
    out->failures = r->up.failures;
    out->truncated_tcp = r->up.truncated_tcp;
    if (r->cache != NULL) {
        struct dns_cache_stats cs;
        dns_cache_stats(r->cache, &cs);
        out->cache_entries = cs.entries;
    }
    out->reverse_entries = dns_revmap_count(r->rev);
}

const struct log_counter dns_resolver_counters[] = {
#define X(field, key) LOG_COUNTER(struct dns_resolver_stats, field, key)
    DNS_RESOLVER_STATS(X)
#undef X
    LOG_COUNTER_END};

void
dns_resolver_opts_default(struct dns_resolver_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->timeout = 2.0;
    o->attempts = 2;
    o->cache_entries = 4096;
}

/* Everything |o| sets, built before anything is replaced so a failed
 * reload leaves the resolver as it was. */
int
dns_resolver_configure(struct dns_resolver *r, const struct dns_resolver_opts *o, char *err,
                       size_t errlen)
{
    struct dns_upstream_conf *conf = dns_upstream_conf_new(o);
    struct dns_hosts *hosts = dns_hosts_load(o->hosts_file != NULL ? o->hosts_file : "/etc/hosts");
    int same_size = r->cache_size == o->cache_entries && r->up.conf != NULL;
    struct dns_cache *cache = NULL;
    if (!same_size && o->cache_entries > 0)
        cache = dns_cache_new(o->cache_entries, CACHE_MIN_TTL, CACHE_MAX_TTL, CACHE_NEG_TTL);
    int rc;
    if (conf == NULL || hosts == NULL || (!same_size && o->cache_entries > 0 && cache == NULL)) {
        snprintf(err, errlen, "dns: out of memory");
        goto fail;
    }
    if ((rc = dns_upstream_conf_probe(conf)) < 0) {
        snprintf(err, errlen, "dns: upstream socket (interface \"%s\", mark %u): %s",
                 conf->interface, (unsigned)conf->fwmark, strerror(-rc));
        goto fail;
    }
    if (r->up.conf == NULL) {
        dns_upstream_init(&r->up, r->loop, conf);
    } else {
        if (same_size && r->cache != NULL && !dns_upstream_conf_same_servers(r->up.conf, conf))
            dns_cache_clear(r->cache);
        dns_upstream_set_conf(&r->up, conf);
    }
    dns_upstream_conf_unref(conf);
    if (!same_size) {
        dns_cache_free(r->cache);
        r->cache = cache;
        r->cache_size = o->cache_entries;
    }
    dns_hosts_free(r->hosts);
    r->hosts = hosts;
    r->families = o->families & (DNS_FAMILY_V4 | DNS_FAMILY_V6);
    if (r->families == 0)
        r->families = machine_families(o->interface);
    return 0;
fail:
    dns_upstream_conf_unref(conf);
    dns_hosts_free(hosts);
    dns_cache_free(cache);
    return -1;
}

struct dns_resolver *
dns_resolver_new(struct ev_loop *loop, const struct dns_resolver_opts *o, char *err, size_t errlen)
{
    struct dns_resolver *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->rev = dns_revmap_new(REVERSE_ENTRIES)) == NULL) {
        snprintf(err, errlen, "dns: out of memory");
        free(r);
        return NULL;
    }
    r->loop = loop;
    if (dns_resolver_configure(r, o, err, errlen) != 0) {
        dns_revmap_free(r->rev);
        free(r);
        return NULL;
    }
    return r;
}

/* Inside a callback (depth > 0) the lookup being delivered still holds
 * the resolver: everything else goes now, the rest when it returns. */
void
dns_resolver_free(struct dns_resolver *r)
{
    if (r == NULL)
        return;
    r->dying = 1;
    dns_resolver_drop_all(r);
    if (r->depth > 0)
        return;
    dns_upstream_fini(&r->up);
    dns_cache_free(r->cache);
    dns_hosts_free(r->hosts);
    dns_revmap_free(r->rev);
    free(r);
}
