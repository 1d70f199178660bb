/* What `run` refuses about a bundle's listeners, for `check` too: none at
 * all (nothing would reach the engine), and two of them on one port (the
 * second bind fails). A port another program holds is only known by
 * binding it, which check does not do. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "log/log.h"
#include "script/hint.h"
#include "script/script_int.h"

/* The listeners of struct script_config that are a struct script_listener,
 * by their key under listen = {...}. A new kind is one line here. */
static const struct {
    const char *key;
    size_t off;
} kinds[] = {
    {"socks", offsetof(struct script_config, socks)},
    {"http", offsetof(struct script_config, http)},
    {"mixed", offsetof(struct script_config, mixed)},
};

#define MAX_REFS 64

struct ref {
    char key[48];                       /* "listen.socks", "dns.listen" */
    const struct sockaddr_storage *addr;
    int tcp, udp;
};

static int
port_of(const struct sockaddr_storage *a)
{
    return a->ss_family == AF_INET ? ntohs(((const struct sockaddr_in *)a)->sin_port)
                                    : ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
}

static int
any_addr(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

/* Linux refuses the second bind when both are on one port and the
 * addresses are equal, or one is the wildcard of the other's family, or
 * one is [::] (dual-stack: it takes IPv4 too). Port 0 is any free port. */
static int
clash(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (port_of(a) == 0 || port_of(a) != port_of(b))
        return 0;
    if (a->ss_family != b->ss_family)
        return (a->ss_family == AF_INET6 && any_addr(a)) || (b->ss_family == AF_INET6 && any_addr(b));
    if (any_addr(a) || any_addr(b))
        return 1;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

static void
shown(const struct sockaddr_storage *a, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (a->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, port_of(a));
    } else {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, port_of(a));
    }
}

static size_t
collect(const struct script_config *c, struct ref *r)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const struct script_listener *l =
            (const struct script_listener *)((const char *)c + kinds[i].off);
        if (!l->enabled)
            continue;
        snprintf(r[n].key, sizeof(r[n].key), "listen.%s", kinds[i].key);
        r[n].addr = &l->addr, r[n].tcp = 1, r[n].udp = 0;
        n++;
    }
    for (size_t i = 0; i < c->nreverse && n < MAX_REFS - 2; i++) {
        snprintf(r[n].key, sizeof(r[n].key), "listen.reverse.#%zu", i + 1);
        r[n].addr = &c->reverse[i].addr, r[n].tcp = 1, r[n].udp = 0;
        n++;
    }
    if (c->dns.has_listen) {
        snprintf(r[n].key, sizeof(r[n].key), "dns.listen");
        r[n].addr = &c->dns.listen, r[n].tcp = 1, r[n].udp = 1;
        n++;
    }
    if (c->control.enabled) {
        snprintf(r[n].key, sizeof(r[n].key), "control.listen");
        r[n].addr = &c->control.addr, r[n].tcp = 1, r[n].udp = 0;
        n++;
    }
    return n;
}

/* "listen.reverse.#2" as the message shows it: "listen.reverse[2]". */
static void
key_shown(const char *key, char *buf, size_t len)
{
    const char *h = strstr(key, ".#");
    if (h == NULL)
        snprintf(buf, len, "%s", key);
    else
        snprintf(buf, len, "%.*s[%s]", (int)(h - key), key, h + 2);
}

int
script_listeners_check(struct script *s, int need_one, char *err, size_t errlen)
{
    const struct script_config *c = &s->cfg;
    struct ref r[MAX_REFS];
    size_t n = collect(c, r);
    char where[512];
    for (size_t j = 1; j < n; j++) {
        for (size_t i = 0; i < j; i++) {
            if (!((r[i].tcp && r[j].tcp) || (r[i].udp && r[j].udp)) ||
                !clash(r[i].addr, r[j].addr))
                continue;
            char a[64], b[64], ka[64], kb[64];
            shown(r[i].addr, a, sizeof(a));
            shown(r[j].addr, b, sizeof(b));
            key_shown(r[i].key, ka, sizeof(ka));
            key_shown(r[j].key, kb, sizeof(kb));
            script_config_key_where(s, r[j].key, where, sizeof(where));
            snprintf(err, errlen, "%schute.config: %s %s and %s %s are on the same port: give "
                     "each listener a port of its own", where, ka, a, kb, b);
            return -1;
        }
    }
    if (!need_one)
        return 0;
    size_t takes = 0;
    for (size_t i = 0; i < n; i++)
        takes += strcmp(r[i].key, "control.listen") != 0;
    if (takes > 0 || c->tun.enabled)
        return 0;
    if (s->cfg_line > 0)
        snprintf(where, sizeof(where), "%s:%d: ", s->cfg_short, s->cfg_line);
    else if (s->dir != NULL)
        snprintf(where, sizeof(where), "%s/main.lua: ", s->dir);
    else
        where[0] = '\0';
    snprintf(err, errlen, "%sthe bundle takes no traffic: give chute.config a listen = {...}, "
             "a tun = {...} or a dns = { listen = ... }", where);
    return -1;
}

void
script_warn_defaults(const struct script *s)
{
    if (s->route_ref != LUA_NOREF)
        return;
    LOG_WARN("%s%sno chute.route: every flow gets the fallback policy, %s (define "
             "function chute.route(flow), or chute.route = chute.rules {...})",
             s->cfg_line > 0 ? s->cfg_short : s->dir ? s->dir : "",
             s->cfg_line > 0 ? ": " : s->dir ? "/main.lua: " : "",
             script_policy_name(s, s->cfg.fallback));
}
