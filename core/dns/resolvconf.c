#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/upstream.h"

/* "a.b.c.d" or "v6[%scope]" with port 53; 0 or -1. */
static int
parse_server(const char *s, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof(*out));
    struct sockaddr_in *s4 = (struct sockaddr_in *)out;
    if (inet_pton(AF_INET, s, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(53);
        return 0;
    }
    char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    char *scope = strchr(buf, '%');
    if (scope != NULL)
        *scope++ = '\0';
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET6, buf, &s6->sin6_addr) != 1)
        return -1;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(53);
    if (scope != NULL) {
        char *end;
        unsigned long id = strtoul(scope, &end, 10);
        s6->sin6_scope_id = *end == '\0' ? (uint32_t)id : if_nametoindex(scope);
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
