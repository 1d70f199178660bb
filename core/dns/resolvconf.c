#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/hosts.h"
#include "dns/upstream.h"

/* An IP literal ("v6%scope" too, read by the hosts file's parser) with
 * port 53; 0 or -1. */
static int
parse_server(const char *s, struct sockaddr_storage *out)
{
    struct dns_addr a;
    if (dns_addr_parse(s, &a) != 0)
        return -1;
    memset(out, 0, sizeof(*out));
    if (a.version == 4) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)out;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(53);
        memcpy(&s4->sin_addr, a.ip, 4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(53);
        memcpy(&s6->sin6_addr, a.ip, 16);
        s6->sin6_scope_id = a.scope;
    }
    return 0;
}

size_t
dns_resolvconf_read(const char *path, struct sockaddr_storage *out, size_t max)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t n = 0;
    char line[512];
    while (n < max && fgets(line, sizeof(line), f) != NULL) {
        char *save, *key = strtok_r(line, " \t\r\n", &save);
        if (key == NULL || strcmp(key, "nameserver") != 0)
            continue;
        char *val = strtok_r(NULL, " \t\r\n", &save);
        if (val != NULL && parse_server(val, &out[n]) == 0)
            n++;
    }
    fclose(f);
    return n;
}
