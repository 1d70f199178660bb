#ifndef CHUTE_DNS_REVMAP_H
#define CHUTE_DNS_REVMAP_H

/* Folder-private: address -> name, remembered from answers so a flow to
 * a real IP can still be routed by the name it was resolved from. Bounded
 * with least-recently-used eviction; each distinct name is stored once
 * (refcounted) however many addresses point to it. */

#include <stddef.h>
#include <stdint.h>

struct dns_revmap;

/* |cap| > 0 entries; memory grows with use up to that. NULL on OOM. */
struct dns_revmap *dns_revmap_new(size_t cap);
void dns_revmap_free(struct dns_revmap *m);
/* Maps |ip| (4 or 16 bytes per |version|) to |name|, replacing an older
 * name; evicts the least recently used entry when full. 0 or -1 (OOM). */
int dns_revmap_put(struct dns_revmap *m, const uint8_t *ip, int version, const char *name);
/* The name for |ip| (marks it recently used), or NULL. Valid until the
 * next put. */
const char *dns_revmap_get(struct dns_revmap *m, const uint8_t *ip, int version);
size_t dns_revmap_count(const struct dns_revmap *m);

#endif
