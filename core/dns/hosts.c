#include <arpa/inet.h>
#include <ctype.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/hosts.h"
#include "dns/msg.h"

/* One (name, address) pair; names live in one string arena so a large
 * block-list hosts file costs two allocations, not one per line. */
struct entry {
    uint32_t name;  /* offset into |names| */
    uint32_t seq;   /* file order, kept among equal names */
    struct dns_addr addr;
};

struct dns_hosts {
    struct entry *e;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
};

int
dns_addr_parse(const char *s, struct dns_addr *out)
{
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, s, out->ip) == 1) {
        out->version = 4;
        return 0;
    }
    char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    char *scope = strchr(buf, '%');
    if (scope != NULL)
        *scope++ = '\0';
    if (inet_pton(AF_INET6, buf, out->ip) != 1)
        return -1;
    out->version = 6;
    if (scope != NULL) {
        char *end;
        unsigned long id = strtoul(scope, &end, 10);
        out->scope = *end == '\0' ? (uint32_t)id : if_nametoindex(scope);
        if (out->scope == 0)
            return -1;
    }
    return 0;
}

static int
add(struct dns_hosts *h, const char *name, const struct dns_addr *a)
{
    size_t len = strlen(name);
    while (len > 0 && name[len - 1] == '.')
        len--;
    if (len == 0 || len > DNS_NAME_MAX)
        return 0;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 32;
        struct entry *e = realloc(h->e, cap * sizeof(*e));
        if (e == NULL)
            return -1;
        h->e = e, h->cap = cap;
    }
    if (h->names_len + len + 1 > h->names_cap) {
        size_t cap = h->names_cap ? h->names_cap * 2 : 1024;
        while (cap < h->names_len + len + 1)
            cap *= 2;
        char *p = realloc(h->names, cap);
        if (p == NULL)
            return -1;
        h->names = p, h->names_cap = cap;
    }
    char *dst = h->names + h->names_len;
    for (size_t i = 0; i < len; i++)
        dst[i] = (char)tolower((unsigned char)name[i]);
    dst[len] = '\0';
    h->e[h->n] = (struct entry){.name = (uint32_t)h->names_len, .seq = (uint32_t)h->n, .addr = *a};
    h->n++;
    h->names_len += len + 1;
    return 0;
}

static int
cmp_entry(const void *a, const void *b, void *arg)
{
    const struct entry *x = a, *y = b;
    const char *names = arg;
    int c = strcmp(names + x->name, names + y->name);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int
parse_line(struct dns_hosts *h, char *line)
{
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';
    char *save, *tok = strtok_r(line, " \t\r\n", &save);
    struct dns_addr a;
    if (tok == NULL || dns_addr_parse(tok, &a) != 0)
        return 0;
    while ((tok = strtok_r(NULL, " \t\r\n", &save)) != NULL)
        if (add(h, tok, &a) != 0)
            return -1;
    return 0;
}

struct dns_hosts *
dns_hosts_load(const char *path)
{
    struct dns_hosts *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    FILE *f = path[0] != '\0' ? fopen(path, "re") : NULL;
    if (f == NULL)
        return h;
    char line[4096];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL)
        rc = parse_line(h, line);
    fclose(f);
    if (rc != 0) {
        dns_hosts_free(h);
        return NULL;
    }
    qsort_r(h->e, h->n, sizeof(*h->e), cmp_entry, h->names);
    return h;
}

void
dns_hosts_free(struct dns_hosts *h)
{
    if (h == NULL)
        return;
    free(h->e);
    free(h->names);
    free(h);
}

size_t
dns_hosts_count(const struct dns_hosts *h)
{
    return h->n;
}

static int
is_localhost(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "localhost") == 0 ||
           (n > 10 && strcmp(name + n - 10, ".localhost") == 0);
}

size_t
dns_hosts_lookup(const struct dns_hosts *h, const char *name, struct dns_addr *out, size_t max)
{
    size_t lo = 0, hi = h->n, n = 0;
    while (lo < hi) { /* first entry not below |name| */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(h->names + h->e[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < h->n && n < max && strcmp(h->names + h->e[i].name, name) == 0; i++)
        out[n++] = h->e[i].addr;
    if (n == 0 && max >= 2 && is_localhost(name)) {
        out[0] = (struct dns_addr){.version = 6};
        out[0].ip[15] = 1;
        out[1] = (struct dns_addr){.version = 4, .ip = {127, 0, 0, 1}};
        n = 2;
    }
    return n;
}
