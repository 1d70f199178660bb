#include <string.h>

#include <netinet/in.h>

#include "inbound/socks5.h"

#define SOCKS5_VERSION 5
#define USERPASS_VERSION 1

enum {
    ATYP_IP4 = 1,
    ATYP_NAME = 3,
    ATYP_IP6 = 4,
};

/* Each parser checks every field as soon as its byte arrives, so a client
 * that sends garbage is rejected at once instead of after a timeout, and it
 * never writes its outputs until the whole message is there: on NEED_MORE
 * the caller simply calls again with more bytes from the same start. */

int
inbound_socks5_parse_greeting(const uint8_t *p, size_t n, uint8_t methods[32])
{
    size_t need, i;

    if (n < 1)
        return SOCKS5_NEED_MORE;
    if (p[0] != SOCKS5_VERSION)
        return SOCKS5_ERR_VERSION;
    if (n < 2)
        return SOCKS5_NEED_MORE;
    if (p[1] == 0)
        return SOCKS5_ERR_BAD;
    need = 2 + (size_t)p[1];
    if (n < need)
        return SOCKS5_NEED_MORE;

    /* Cleared here so a caller can reuse one array across connections. */
    memset(methods, 0, 32);
    for (i = 2; i < need; i++)
        methods[p[i] >> 3] |= (uint8_t)(1u << (p[i] & 7));
    return (int)need;
}

int
inbound_socks5_parse_userpass(const uint8_t *p, size_t n, struct mem_slice *user,
                              struct mem_slice *pass)
{
    size_t ulen, plen;

    if (n < 1)
        return SOCKS5_NEED_MORE;
    if (p[0] != USERPASS_VERSION)
        return SOCKS5_ERR_VERSION;
    if (n < 2)
        return SOCKS5_NEED_MORE;
    ulen = p[1];
    if (ulen == 0)
        return SOCKS5_ERR_BAD;
    if (n < 3 + ulen)
        return SOCKS5_NEED_MORE;
    plen = p[2 + ulen];
    if (n < 3 + ulen + plen)
        return SOCKS5_NEED_MORE;

    *user = mem_slice(p + 2, ulen);
    *pass = mem_slice(p + 3 + ulen, plen);
    return (int)(3 + ulen + plen);
}

/* Length of DST.ADDR for |atyp| once its first byte (the name length) is
 * known, or 0 for an unknown type. */
static size_t
addr_len(uint8_t atyp, uint8_t first)
{
    switch (atyp) {
    case ATYP_IP4:
        return 4;
    case ATYP_IP6:
        return 16;
    case ATYP_NAME:
        return 1 + (size_t)first;
    default:
        return 0;
    }
}

static int
reject(uint8_t *rep, uint8_t code, int err)
{
    *rep = code;
    return err;
}

int
inbound_socks5_parse_request(const uint8_t *p, size_t n, uint8_t *cmd, struct flow_addr *dst,
                             uint8_t *rep)
{
    size_t alen, need;

    *rep = SOCKS5_REP_OK;
    if (n < 1)
        return SOCKS5_NEED_MORE;
    /* REP_FAILURE even for a wrong version: the contract gives every error
     * a reply code, and the caller may still choose to close silently. */
    if (p[0] != SOCKS5_VERSION)
        return reject(rep, SOCKS5_REP_FAILURE, SOCKS5_ERR_VERSION);
    /* CMD is not checked: answering an unknown one is the caller's job. */
    if (n < 3)
        return SOCKS5_NEED_MORE;
    if (p[2] != 0)
        return reject(rep, SOCKS5_REP_FAILURE, SOCKS5_ERR_BAD);
    if (n < 4)
        return SOCKS5_NEED_MORE;
    if (addr_len(p[3], 0) == 0)
        return reject(rep, SOCKS5_REP_ATYP_UNSUPPORTED, SOCKS5_ERR_BAD);
    if (n < 5)
        return SOCKS5_NEED_MORE;
    alen = addr_len(p[3], p[4]);
    if (p[3] == ATYP_NAME) {
        size_t got = n - 5 < alen - 1 ? n - 5 : alen - 1;

        /* With a NUL inside, code that reads name_len bytes and code that
         * reads a C string see different hosts: "evil.com\0.good.com"
         * could pass a rule for good.com and then resolve evil.com. */
        if (alen == 1 || memchr(p + 5, 0, got) != NULL)
            return reject(rep, SOCKS5_REP_FAILURE, SOCKS5_ERR_BAD);
    }
    need = 4 + alen + 2;
    if (n < need)
        return SOCKS5_NEED_MORE;

    memset(dst, 0, sizeof(*dst));
    switch (p[3]) {
    case ATYP_IP4:
        dst->kind = FLOW_ADDR_IP4;
        memcpy(dst->ip, p + 4, 4);
        break;
    case ATYP_IP6:
        dst->kind = FLOW_ADDR_IP6;
        memcpy(dst->ip, p + 4, 16);
        break;
    default:
        dst->kind = FLOW_ADDR_NAME;
        dst->name_len = p[4];
        memcpy(dst->name, p + 5, p[4]);
        break;
    }
    dst->port = (uint16_t)(p[need - 2] << 8 | p[need - 1]);
    *cmd = p[1];
    return (int)need;
}

size_t
inbound_socks5_write_reply(uint8_t out[22], uint8_t rep, const struct sockaddr *bnd)
{
    out[0] = SOCKS5_VERSION;
    out[1] = rep;
    out[2] = 0;

    /* Copied out rather than cast: |bnd| may point into a byte buffer with
     * only sockaddr's alignment, and sin6_addr needs more. */
    if (bnd != NULL && bnd->sa_family == AF_INET6) {
        struct sockaddr_in6 sin6;

        memcpy(&sin6, bnd, sizeof(sin6));
        out[3] = ATYP_IP6;
        memcpy(out + 4, &sin6.sin6_addr, 16);
        memcpy(out + 20, &sin6.sin6_port, 2);
        return 22;
    }
    out[3] = ATYP_IP4;
    if (bnd != NULL && bnd->sa_family == AF_INET) {
        struct sockaddr_in sin;

        memcpy(&sin, bnd, sizeof(sin));
        memcpy(out + 4, &sin.sin_addr, 4);
        memcpy(out + 8, &sin.sin_port, 2);
    } else {
        /* Any other family has no SOCKS5 encoding: answer 0.0.0.0:0. */
        memset(out + 4, 0, 6);
    }
    return 10;
}
