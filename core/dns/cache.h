#ifndef CHUTE_DNS_CACHE_H
#define CHUTE_DNS_CACHE_H

/* Answer cache: whole upstream responses keyed by (name, type), kept for
 * their smallest TTL (negative answers for the SOA minimum, RFC 2308),
 * served with the TTLs aged and the asker's ID. Bounded by entry count with
 * least-recently-used eviction. One per resolver; loop thread only. */

#include <stddef.h>
#include <stdint.h>

struct dns_cache;

struct dns_cache_stats {
    uint64_t hits, misses, inserts, evictions, expired;
    size_t entries, bytes;
};

/* |max_entries| > 0; |min_ttl| / |max_ttl| clamp what responses say (a
 * zero-TTL answer is still kept |min_ttl| seconds so a burst shares it);
 * |neg_ttl| is used for negative answers without an SOA. */
struct dns_cache *dns_cache_new(size_t max_entries, uint32_t min_ttl, uint32_t max_ttl,
                                uint32_t neg_ttl);
void dns_cache_free(struct dns_cache *c);

/* Stores response |msg| (a parsed, NOERROR or NXDOMAIN, non-truncated
 * answer to |name|/|type|; anything else is ignored) at time |now|
 * (seconds, monotonic). Replaces an older entry. */
void dns_cache_put(struct dns_cache *c, const char *name, uint16_t type, const uint8_t *msg,
                   size_t len, double now);

/* If a live entry exists, copies it into |out| with |id| and the TTLs aged
 * to |now| and returns its length; 0 on a miss (or an expired entry, which
 * is dropped); -1 when |cap| is too small. */
int dns_cache_get(struct dns_cache *c, const char *name, uint16_t type, double now, uint16_t id,
                  uint8_t *out, size_t cap);

/* The cached response for (name, type) without copying, if live: for the
 * resolver, which reads addresses out of it. NULL on a miss. Valid until
 * the next call into the cache. */
const uint8_t *dns_cache_peek(struct dns_cache *c, const char *name, uint16_t type, double now,
                              size_t *len);

void dns_cache_clear(struct dns_cache *c);
void dns_cache_stats(const struct dns_cache *c, struct dns_cache_stats *out);

#endif
