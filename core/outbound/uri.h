#ifndef CHUTE_OUTBOUND_URI_H
#define CHUTE_OUTBOUND_URI_H

/* Proxy URIs as subscriptions and share links write them, parsed into the
 * fields chute.proxy takes (the loader checks them as it checks a
 * chute.proxy table: script/bind_proxy.c). Pure: no I/O, no allocation.
 *   ss://BASE64(method:password)@host:port[/][?plugin=...]#name   SIP002
 *   ss://method:password@host:port#name        SIP002, percent-encoded userinfo
 *   ss://BASE64(method:password@host:port)#name                  legacy
 *   trojan://password@host:port?sni=..&allowInsecure=1#name
 *   socks5://[user:pass@]host:port#name  (socks5h:// too)
 *   http://[user:pass@]host:port#name, https://...
 * A plugin= parameter (obfs, v2ray-plugin) and Trojan over another
 * transport (type=ws, grpc) are refused: chute cannot speak them. */

#include <stddef.h>
#include <stdint.h>

/* One proxy's fields; strings are NUL-terminated, "" when absent. The
 * Clash YAML reader (fetch/clash_proxy.c) fills the same struct. */
struct outbound_uri {
    char name[64];          /* the #fragment (decoded); "" none */
    char type[16];          /* chute.proxy's type: shadowsocks, trojan, socks5, http, https */
    char server[256];
    uint16_t port;
    char cipher[48];        /* shadowsocks */
    char user[256];         /* socks5 / http */
    char pass[256];         /* socks5 / http / shadowsocks / trojan */
    char sni[256];          /* trojan / https */
    int skip_cert_verify;   /* trojan / https */
    int udp;                /* -1: the type's default, else 0 or 1 */
};

/* Parses |uri| (|len| bytes). 0, or -1 with |err| naming the URI (escaped,
 * its secret masked: outbound_uri_mask) and the reason, e.g.
 * "ss: ***@198.51.100.7:8388#hk: plugin=obfs-local is not supported (chute
 * speaks plain Shadowsocks AEAD)". */
int outbound_uri_parse(const char *uri, size_t len, struct outbound_uri *out, char *err,
                       size_t errlen);

/* |uri| for a log line: the userinfo (passwords, ss's base64) as "***",
 * a legacy ss body as "***", bytes outside printable ASCII as \xNN, cut to
 * fit |outlen| with "...". */
void outbound_uri_mask(const char *uri, size_t len, char *out, size_t outlen);

/* Decodes base64, standard ("+" "/") or URL-safe ("-" "_"), with or without '='
 * padding; whitespace (CR, LF, space, tab) is skipped. Returns the decoded
 * length (at most len * 3 / 4 + 3 bytes go to |out|), or -1 when a byte is
 * not base64 or |cap| is too small. */
long outbound_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap);

#endif
