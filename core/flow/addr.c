#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow/addr.h"

/* Policy names and addresses: what core/outbound shares with the flows. */

const char *
flow_policy_intern(const char *name)
{
    /* Few distinct names ever exist (the proxies and groups of the bundles
     * loaded): a list is enough, and entries are never freed. */
    static struct interned {
        struct interned *next;
        char name[];
    } *head;
    for (struct interned *i = head; i != NULL; i = i->next)
        if (strcmp(i->name, name) == 0)
            return i->name;
    size_t n = strlen(name) + 1;
    struct interned *i = malloc(sizeof(*i) + n);
    if (i == NULL)
        return "?";
    memcpy(i->name, name, n);
    i->next = head;
    head = i;
    return i->name;
}

const char *
flow_policy_name(int policy)
{
    switch (policy) {
    case FLOW_POLICY_DIRECT:
        return "DIRECT";
    case FLOW_POLICY_REJECT:
        return "REJECT";
    default:
        return "?";
    }
}

void
flow_addr_host(const struct flow_addr *a, char *buf, size_t len)
{
    switch (a->kind) {
    case FLOW_ADDR_IP4:
        inet_ntop(AF_INET, a->ip, buf, len);
        break;
    case FLOW_ADDR_IP6:
        inet_ntop(AF_INET6, a->ip, buf, len);
        break;
    case FLOW_ADDR_NAME:
        snprintf(buf, len, "%s", a->name);
        break;
    default:
        snprintf(buf, len, "-");
    }
}

void
flow_addr_format(const struct flow_addr *a, char *buf, size_t len)
{
    char host[FLOW_NAME_MAX + 1];
    flow_addr_host(a, host, sizeof(host));
    snprintf(buf, len, a->kind == FLOW_ADDR_IP6 ? "[%s]:%u" : "%s:%u", host, a->port);
}

void
flow_sockaddr_format(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)ss;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const void *)ss;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
    } else {
        snprintf(buf, len, "-");
    }
}

void
flow_sockaddr_set(struct sockaddr_storage *ss, int version, const uint8_t *ip, uint16_t port)
{
    memset(ss, 0, sizeof(*ss));
    if (version == 4) {
        struct sockaddr_in *s = (struct sockaddr_in *)ss;
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        memcpy(&s->sin_addr, ip, 4);
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(port);
        memcpy(&s->sin6_addr, ip, 16);
    }
}

void
flow_sockaddr_key(uint8_t key[16], const struct sockaddr_storage *ss)
{
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    } else if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    }
}

int
flow_addr_from_ip(struct flow_addr *a, const char *ip, size_t len, uint16_t port)
{
    char tmp[INET6_ADDRSTRLEN];
    if (len == 0 || len >= sizeof(tmp))
        return -1;
    memcpy(tmp, ip, len);
    tmp[len] = '\0';
    memset(a, 0, sizeof(*a) - sizeof(a->name));
    a->name[0] = '\0';
    a->port = port;
    if (inet_pton(AF_INET, tmp, a->ip) == 1) {
        a->kind = FLOW_ADDR_IP4;
        return 0;
    }
    if (inet_pton(AF_INET6, tmp, a->ip) == 1) {
        a->kind = FLOW_ADDR_IP6;
        return 0;
    }
    return -1;
}

int
flow_addr_from_host(struct flow_addr *a, const char *host, size_t len, uint16_t port)
{
    if (flow_addr_from_ip(a, host, len, port) == 0)
        return 0;
    if (len == 0 || len > FLOW_NAME_MAX || memchr(host, '\0', len) != NULL)
        return -1;
    a->kind = FLOW_ADDR_NAME;
    a->port = port;
    a->name_len = (uint8_t)len;
    memcpy(a->name, host, len);
    a->name[len] = '\0';
    return 0;
}
