#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "outbound/hs_wire.h"
#include "outbound/proxy.h"

#define SOCKS5_VERSION 5
#define USERPASS_VERSION 1
#define CMD_CONNECT 1

size_t
outbound_hs_socks5_greeting(uint8_t out[4], int with_auth)
{
    out[0] = SOCKS5_VERSION;
    out[1] = with_auth ? 2 : 1;
    out[2] = OUTBOUND_SOCKS5_NOAUTH;
    if (!with_auth)
        return 3;
    out[3] = OUTBOUND_SOCKS5_USERPASS;
    return 4;
}

int
outbound_hs_socks5_auth(uint8_t *out, size_t cap, const char *user, const char *pass)
{
    size_t ulen = strlen(user), plen = strlen(pass);

    if (ulen == 0 || ulen > 255 || plen > 255 || cap < 3 + ulen + plen)
        return -1;
    out[0] = USERPASS_VERSION;
    out[1] = (uint8_t)ulen;
    memcpy(out + 2, user, ulen);
    out[2 + ulen] = (uint8_t)plen;
    memcpy(out + 3 + ulen, pass, plen);
    return (int)(3 + ulen + plen);
}

int
outbound_hs_socks5_request(uint8_t *out, size_t cap, const struct flow_addr *dst)
{
    if (cap < 3)
        return -1;
    int n = outbound_addr_write(out + 3, cap - 3, dst);
    if (n < 0)
        return -1;
    out[0] = SOCKS5_VERSION;
    out[1] = CMD_CONNECT;
    out[2] = 0;
    return 3 + n;
}

static size_t
base64(char *out, const uint8_t *in, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? tab[v & 63] : '=';
    }
    return o;
}

/* "host:port" as the request target and Host value. A name goes out as
 * received, so anything that could end the line or the target is refused:
 * a CR LF inside would let the destination inject headers. */
static int
authority(char *out, size_t cap, const struct flow_addr *dst)
{
    char ip[INET6_ADDRSTRLEN];
    int n;

    switch (dst->kind) {
    case FLOW_ADDR_IP4:
        inet_ntop(AF_INET, dst->ip, ip, sizeof(ip));
        n = snprintf(out, cap, "%s:%u", ip, dst->port);
        break;
    case FLOW_ADDR_IP6:
        inet_ntop(AF_INET6, dst->ip, ip, sizeof(ip));
        n = snprintf(out, cap, "[%s]:%u", ip, dst->port);
        break;
    case FLOW_ADDR_NAME:
        if (dst->name_len == 0)
            return -1;
        for (size_t i = 0; i < dst->name_len; i++) {
            uint8_t c = (uint8_t)dst->name[i];
            if (c <= ' ' || c == 0x7f)
                return -1;
        }
        n = snprintf(out, cap, "%.*s:%u", (int)dst->name_len, dst->name, dst->port);
        break;
    default:
        return -1;
    }
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int
outbound_hs_http_request(char *out, size_t cap, const struct flow_addr *dst, const char *user,
                         const char *pass)
{
    char host[FLOW_NAME_MAX + 8];
    char cred[512], b64[700];
    int n;

    if (authority(host, sizeof(host), dst) < 0)
        return -1;
    if (user[0] == '\0') {
        n = snprintf(out, cap, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", host, host);
    } else {
        int clen = snprintf(cred, sizeof(cred), "%s:%s", user, pass);
        if (clen < 0 || (size_t)clen >= sizeof(cred))
            return -1;
        size_t blen = base64(b64, (const uint8_t *)cred, (size_t)clen);
        n = snprintf(out, cap,
                     "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %.*s\r\n\r\n",
                     host, host, (int)blen, b64);
    }
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int
outbound_hs_socks5_parse_method(const uint8_t *p, size_t n, uint8_t *method)
{
    if (n < 1)
        return 0;
    if (p[0] != SOCKS5_VERSION)
        return -1;
    if (n < 2)
        return 0;
    *method = p[1];
    return 2;
}

int
outbound_hs_socks5_parse_auth(const uint8_t *p, size_t n, uint8_t *status)
{
    if (n < 1)
        return 0;
    /* RFC 1929 says 01; some servers echo the SOCKS version instead, and
     * the status byte means the same either way. */
    if (p[0] != USERPASS_VERSION && p[0] != SOCKS5_VERSION)
        return -1;
    if (n < 2)
        return 0;
    *status = p[1];
    return 2;
}

int
outbound_hs_socks5_parse_reply(const uint8_t *p, size_t n, uint8_t *rep)
{
    size_t alen;

    *rep = 0xff;
    if (n < 1)
        return 0;
    if (p[0] != SOCKS5_VERSION)
        return -1;
    if (n < 2)
        return 0;
    *rep = p[1];
    /* RSV is not checked: nothing depends on it and servers vary. */
    if (n < 4)
        return 0;
    switch (p[3]) {
    case 1:
        alen = 4;
        break;
    case 4:
        alen = 16;
        break;
    case 3:
        /* BND.ADDR is skipped, never used: an empty name is harmless. */
        if (n < 5)
            return 0;
        alen = 1 + (size_t)p[4];
        break;
    default:
        return -1;
    }
    size_t need = 4 + alen + 2;
    return n < need ? 0 : (int)need;
}

static int
is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

/* Checks what has arrived of "HTTP/1.x NNN" byte by byte, so garbage is
 * refused early, yet no prefix of a valid line is ever refused. */
static int
status_line_prefix_ok(const uint8_t *p, size_t n)
{
    static const char proto[] = "HTTP/1.";

    for (size_t i = 0; i < n && i < OUTBOUND_HTTP_STATUS_LEN; i++) {
        uint8_t c = p[i];
        int ok;
        if (i < 7)
            ok = c == (uint8_t)proto[i];
        else if (i == 7)
            ok = is_digit(c);
        else if (i == 8)
            ok = c == ' ';
        else if (i == 9)
            ok = c >= '1' && c <= '5';
        else if (i < 12)
            ok = is_digit(c);
        else
            ok = c == ' ' || c == '\r' || c == '\n';
        if (!ok)
            return 0;
    }
    return 1;
}

int
outbound_hs_http_status(const uint8_t *p, size_t n)
{
    if (!status_line_prefix_ok(p, n))
        return -1;
    if (n < OUTBOUND_HTTP_STATUS_LEN)
        return 0;
    return (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
}

int
outbound_hs_http_parse_head(const uint8_t *p, size_t n, int *status)
{
    size_t line = 0, i;

    if (!status_line_prefix_ok(p, n))
        return -1;
    for (i = 0; i < n && i < OUTBOUND_HTTP_HEAD_MAX; i++) {
        uint8_t c = p[i];
        /* A NUL or a CR that does not end a line: nothing a proxy should
         * send, and the kind of byte that splits parsers' views. */
        if (c == '\0' || (c == '\r' && i + 1 < n && p[i + 1] != '\n'))
            return -1;
        if (c != '\n')
            continue;
        size_t end = i > line && p[i - 1] == '\r' ? i - 1 : i;
        if (line == 0) {
            if (end < 12)
                return -1;
        } else if (end == line) {
            *status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
            return (int)(i + 1);
        } else if (p[line] != ' ' && p[line] != '\t' && memchr(p + line, ':', end - line) == NULL) {
            return -1; /* neither "name: value" nor a folded continuation */
        }
        line = i + 1;
    }
    return n >= OUTBOUND_HTTP_HEAD_MAX ? -1 : 0;
}
