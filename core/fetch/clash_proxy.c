#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetch/sub.h"

/* One Clash/mihomo proxies: entry (its wiki's "Proxies" keys) as the
 * fields chute.proxy takes. Keys chute has no use for are left alone; a
 * key that changes the wire (a plugin, a transport, TLS on SOCKS5) makes
 * the entry unusable, said with the reason: connecting without it would
 * fail or, worse, go out differently than the user asked. */

static int
str(const struct fetch_yaml *y, fetch_yaml_node m, const char *key, char *out, size_t cap)
{
    size_t len;
    const char *v = fetch_yaml_scalar(y, fetch_yaml_get(y, m, key), &len);
    if (v == NULL)
        return 0;
    if (len >= cap || memchr(v, '\0', len) != NULL)
        return -1;
    memcpy(out, v, len);
    out[len] = '\0';
    return 1;
}

/* true/false as YAML 1.1 writes them; -1 when absent or another value. */
static int
flag(const struct fetch_yaml *y, fetch_yaml_node m, const char *key)
{
    char v[8];
    if (str(y, m, key, v, sizeof(v)) != 1)
        return -1;
    if (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 || strcmp(v, "1") == 0)
        return 1;
    if (strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 || strcmp(v, "0") == 0)
        return 0;
    return -1;
}

int
fetch_clash_proxy(const struct fetch_yaml *y, fetch_yaml_node n, struct outbound_uri *o,
                  char *why, size_t whylen)
{
    memset(o, 0, sizeof(*o));
    o->udp = -1;
    char type[32], port[8], tmp[64];
    if (!fetch_yaml_is_map(y, n)) {
        snprintf(why, whylen, "not a mapping (name: ..., type: ..., server: ...)");
        return -1;
    }
    if (str(y, n, "name", o->name, sizeof(o->name)) != 1 || o->name[0] == '\0') {
        snprintf(why, whylen, "needs a name (at most %zu bytes)", sizeof(o->name) - 1);
        return -1;
    }
    if (str(y, n, "type", type, sizeof(type)) != 1) {
        snprintf(why, whylen, "%s: needs a type", o->name);
        return -1;
    }
    if (strcmp(type, "ss") == 0)
        snprintf(o->type, sizeof(o->type), "shadowsocks");
    else if (strcmp(type, "trojan") == 0 || strcmp(type, "socks5") == 0)
        snprintf(o->type, sizeof(o->type), "%s", type[0] == 't' ? "trojan" : "socks5");
    else if (strcmp(type, "http") == 0)
        snprintf(o->type, sizeof(o->type), "%s", flag(y, n, "tls") == 1 ? "https" : "http");
    else {
        snprintf(why, whylen, "%s: type %s is not supported (chute speaks ss, trojan, socks5, "
                 "http)", o->name, type);
        return -1;
    }
    if (str(y, n, "server", o->server, sizeof(o->server)) != 1 || o->server[0] == '\0') {
        snprintf(why, whylen, "%s: needs a server", o->name);
        return -1;
    }
    char *end;
    long p = str(y, n, "port", port, sizeof(port)) == 1 ? strtol(port, &end, 10) : 0;
    if (p < 1 || p > 65535 || *end != '\0') {
        snprintf(why, whylen, "%s: needs a port 1..65535", o->name);
        return -1;
    }
    o->port = (uint16_t)p;
    o->udp = flag(y, n, "udp") == 1; /* Clash carries UDP only when told to */
    if (str(y, n, "password", o->pass, sizeof(o->pass)) < 0 ||
        str(y, n, "username", o->user, sizeof(o->user)) < 0 ||
        str(y, n, "cipher", o->cipher, sizeof(o->cipher)) < 0) {
        snprintf(why, whylen, "%s: a password, username or cipher is too long", o->name);
        return -1;
    }
    if (str(y, n, "sni", o->sni, sizeof(o->sni)) < 0 ||
        str(y, n, "servername", o->sni, sizeof(o->sni)) < 0) {
        snprintf(why, whylen, "%s: sni is too long", o->name);
        return -1;
    }
    o->skip_cert_verify = flag(y, n, "skip-cert-verify") == 1;
    if (strcmp(type, "ss") == 0 && str(y, n, "plugin", tmp, sizeof(tmp)) == 1) {
        snprintf(why, whylen, "%s: plugin %s is not supported (chute speaks plain Shadowsocks "
                 "AEAD)", o->name, tmp);
        return -1;
    }
    if (strcmp(type, "trojan") == 0 && str(y, n, "network", tmp, sizeof(tmp)) == 1 &&
        strcmp(tmp, "tcp") != 0) {
        snprintf(why, whylen, "%s: network %s is not supported (Trojan over TLS on TCP only)",
                 o->name, tmp);
        return -1;
    }
    if (strcmp(type, "socks5") == 0 && flag(y, n, "tls") == 1) {
        snprintf(why, whylen, "%s: SOCKS5 over TLS is not supported", o->name);
        return -1;
    }
    return 0;
}
