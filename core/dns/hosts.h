#ifndef CHUTE_DNS_HOSTS_H
#define CHUTE_DNS_HOSTS_H

/* Folder-private: a hosts file (hosts(5)) read once into a sorted table,
 * looked up by name. Names match case-insensitively; a name listed on
 * several lines gets all its addresses in file order. */

#include <stddef.h>
#include <stdint.h>

struct dns_addr {
    uint8_t version;  /* 4 or 6 */
    uint32_t scope;   /* IPv6 zone (link-local), else 0 */
    uint8_t ip[16];
};

struct dns_hosts;

/* Reads |path| ("" for no file). A missing or unreadable file gives an
 * empty table; NULL only when out of memory. Blocks on the file: call at
 * setup or reload, not per query. */
struct dns_hosts *dns_hosts_load(const char *path);
void dns_hosts_free(struct dns_hosts *h);

/* Up to |max| addresses of |name| (lower-case, no final dot) into |out|;
 * returns how many. "localhost" and names under ".localhost" (RFC 6761)
 * give ::1 and 127.0.0.1 when the file says nothing of them. */
size_t dns_hosts_lookup(const struct dns_hosts *h, const char *name, struct dns_addr *out,
                        size_t max);
size_t dns_hosts_count(const struct dns_hosts *h);

/* Parses an IP literal ("192.0.2.1", "2001:db8::1", "fe80::1%eth0"). */
int dns_addr_parse(const char *s, struct dns_addr *out);

#endif
