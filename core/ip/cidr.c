/* Address prefixes as configs write them (the TUN's addresses and
 * excludes, rule conditions, fake-IP ranges' checks). The address goes
 * through inet_pton, so it takes the spellings the system's tools take. */

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ip/ip.h"

int
ip_cidr_parse(const char *text, struct ip_cidr *out)
{
    char host[64];
    const char *slash = strchr(text, '/');
    size_t hl = slash ? (size_t)(slash - text) : strlen(text);
    if (hl == 0 || hl >= sizeof(host))
        return -1;
    memcpy(host, text, hl);
    host[hl] = '\0';
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, host, out->addr) == 1)
        out->family = AF_INET;
    else if (inet_pton(AF_INET6, host, out->addr) == 1)
        out->family = AF_INET6;
    else
        return -1;
    long max = out->family == AF_INET ? 32 : 128, prefix = max;
    if (slash != NULL) {
        char *end;
        prefix = strtol(slash + 1, &end, 10);
        if (slash[1] == '\0' || *end != '\0' || prefix < 0 || prefix > max)
            return -1;
    }
    out->prefix = (uint8_t)prefix;
    return 0;
}
