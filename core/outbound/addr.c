#include <string.h>

#include "outbound/proxy.h"

/* RFC 1928 §5 address types. */
enum { ATYP_IP4 = 1, ATYP_NAME = 3, ATYP_IP6 = 4 };

int
outbound_addr_write(uint8_t *out, size_t cap, const struct flow_addr *a)
{
    size_t alen;
    uint8_t atyp;
    const void *src;

    switch (a->kind) {
    case FLOW_ADDR_IP4:
        atyp = ATYP_IP4, alen = 4, src = a->ip;
        break;
    case FLOW_ADDR_IP6:
        atyp = ATYP_IP6, alen = 16, src = a->ip;
        break;
    case FLOW_ADDR_NAME:
        if (a->name_len == 0)
            return -1;
        atyp = ATYP_NAME, alen = a->name_len, src = a->name;
        break;
    default:
        return -1;
    }
    size_t need = 1 + (atyp == ATYP_NAME) + alen + 2;
    if (cap < need)
        return -1;
    uint8_t *p = out;
    *p++ = atyp;
    if (atyp == ATYP_NAME)
        *p++ = (uint8_t)alen;
    memcpy(p, src, alen);
    p += alen;
    *p++ = (uint8_t)(a->port >> 8);
    *p = (uint8_t)a->port;
    return (int)need;
}

int
outbound_addr_parse(const uint8_t *in, size_t len, struct flow_addr *a)
{
    size_t alen, head = 1;

    if (len < 1)
        return 0;
    switch (in[0]) {
    case ATYP_IP4:
        alen = 4;
        break;
    case ATYP_IP6:
        alen = 16;
        break;
    case ATYP_NAME:
        if (len < 2)
            return 0;
        alen = in[1];
        head = 2;
        /* An empty name, or a NUL inside one, would make name_len and the
         * C string disagree about the host (same rule as the inbound). */
        if (alen == 0 || memchr(in + 2, 0, len - 2 < alen ? len - 2 : alen) != NULL)
            return -1;
        break;
    default:
        return -1;
    }
    size_t need = head + alen + 2;
    if (len < need)
        return 0;
    memset(a, 0, sizeof(*a));
    if (in[0] == ATYP_NAME) {
        a->kind = FLOW_ADDR_NAME;
        a->name_len = (uint8_t)alen;
        memcpy(a->name, in + 2, alen);
    } else {
        a->kind = in[0] == ATYP_IP4 ? FLOW_ADDR_IP4 : FLOW_ADDR_IP6;
        memcpy(a->ip, in + 1, alen);
    }
    a->port = (uint16_t)(in[need - 2] << 8 | in[need - 1]);
    return (int)need;
}
