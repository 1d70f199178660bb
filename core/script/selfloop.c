#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "flow/addr.h"
#include "outbound/proxy.h"
#include "script/script_int.h"

/* A proxy whose server is chute's own listener of the same protocol sends
 * every flow back into chute, which routes it to the same proxy again,
 * until descriptors run out. Caught at load for the addresses that are
 * surely this machine: the listener's own, loopback, or any address when
 * the listener is bound to the wildcard. (A name that resolves here, or
 * another local address, can still loop; the proxies fail then, and the
 * flows with them, without taking more than the flows' descriptors.) */

static int
is_local(const struct flow_addr *a)
{
    static const uint8_t v6_loop[16] = {[15] = 1};
    if (a->kind == FLOW_ADDR_IP4)
        return a->ip[0] == 127 || memcmp(a->ip, "\0\0\0\0", 4) == 0;
    if (a->kind == FLOW_ADDR_IP6)
        return memcmp(a->ip, v6_loop, 16) == 0 || memcmp(a->ip, in6addr_any.s6_addr, 16) == 0;
    return a->kind == FLOW_ADDR_NAME && strcasecmp(a->name, "localhost") == 0;
}

static int
points_at(const struct flow_addr *a, const struct script_listener *l)
{
    if (!l->enabled)
        return 0;
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)&l->addr;
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&l->addr;
    uint16_t port = ntohs(l->addr.ss_family == AF_INET6 ? s6->sin6_port : s4->sin_port);
    if (a->port != port)
        return 0;
    if (l->addr.ss_family == AF_INET) {
        if (s4->sin_addr.s_addr == htonl(INADDR_ANY))
            return is_local(a);
        return (a->kind == FLOW_ADDR_IP4 && memcmp(a->ip, &s4->sin_addr, 4) == 0) ||
               ((ntohl(s4->sin_addr.s_addr) >> 24) == 127 && is_local(a));
    }
    if (memcmp(&s6->sin6_addr, &in6addr_any, 16) == 0)
        return is_local(a);
    return (a->kind == FLOW_ADDR_IP6 && memcmp(a->ip, &s6->sin6_addr, 16) == 0) ||
           (memcmp(&s6->sin6_addr, &in6addr_loopback, 16) == 0 && is_local(a));
}

int
script_check_self_loops(struct script *s, const struct outbound_proxy *p, size_t n, char *err,
                        size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const struct script_listener *l = p[i].type == OUTBOUND_SOCKS5 ? &s->cfg.socks
                                          : p[i].type == OUTBOUND_HTTP && !p[i].tls ? &s->cfg.http
                                                                                    : NULL;
        if (l == NULL || !points_at(&p[i].server, l))
            continue;
        char addr[300];
        flow_addr_format(&p[i].server, addr, sizeof(addr));
        snprintf(err, errlen, "%s: proxy '%s': %s is chute's own %s listener (%s); every flow "
                 "through it would come back into chute (point it at another server)",
                 p[i].where, p[i].name, addr, l == &s->cfg.socks ? "socks" : "http", l->text);
        return -1;
    }
    return 0;
}
