#ifndef CHUTE_DNS_FAKEIP_H
#define CHUTE_DNS_FAKEIP_H

/* The fake-IP pool: each name asked for gets an address from a reserved
 * range (198.18.0.0/15 by default, and an IPv6 range), kept both ways
 * (name -> address, address -> name). When the range is used up the least
 * recently used mapping is recycled. A mapping costs at most 128 bytes.
 * The pool can be saved to and loaded from a small state file so clients
 * that kept an address across a restart still reach their name. */

#include <stddef.h>
#include <stdint.h>

struct dns_fakeip;

struct dns_fakeip_stats {
    size_t entries;      /* live mappings */
    size_t capacity;     /* addresses in the v4 range (capped: see new) */
    uint64_t allocated, recycled, hits;
    size_t bytes;        /* memory held by the pool */
};

/* |v4| "198.18.0.0/15" style (prefix 8..30), |v6| "fc00::/18" style or NULL
 * for none. The first usable address is network + 2 (network + 1 is left
 * for a gateway), the last is broadcast - 1. |max_entries| caps the live
 * mappings (0: the v4 range's size); both families share the entries. NULL
 * with |err| on a bad range. */
struct dns_fakeip *dns_fakeip_new(const char *v4, const char *v6, size_t max_entries, char *err,
                                  size_t errlen);
void dns_fakeip_free(struct dns_fakeip *f);

/* The address for |name| (lower-case, no final dot) in family |version|
 * (4 or 6) into |out| (4 or 16 bytes): the existing mapping (refreshed as
 * most recently used) or a new one. 0, or -1 (no v6 range, bad name). */
int dns_fakeip_addr(struct dns_fakeip *f, const char *name, int version, uint8_t *out);

/* Never hands out |ip| (an address chute's TUN has: packets to it never
 * enter the TUN); a mapping it had is dropped. Up to 8. 0, or -1 (outside
 * the pool, or no room). */
int dns_fakeip_reserve(struct dns_fakeip *f, const uint8_t *ip, int version);

/* The name mapped to |ip| (refreshed as most recently used), or NULL.
 * Valid until the next call that may recycle. */
const char *dns_fakeip_name(struct dns_fakeip *f, const uint8_t *ip, int version);

/* True if |ip| lies in one of the pool's ranges (mapped or not). */
int dns_fakeip_contains(const struct dns_fakeip *f, const uint8_t *ip, int version);

/* Writes every mapping to |path| atomically (a temp file renamed over it),
 * one "address name" line each, least recently used first. 0, or -1 with
 * |err| (naming the path and errno). */
int dns_fakeip_save(const struct dns_fakeip *f, const char *path, char *err, size_t errlen);
/* Loads mappings saved by dns_fakeip_save(); lines outside the ranges or
 * malformed are skipped and counted in |*skipped|. A missing file is not
 * an error (returns 0, nothing loaded). -1 with |err| for I/O errors. */
int dns_fakeip_load(struct dns_fakeip *f, const char *path, size_t *skipped, char *err,
                    size_t errlen);

void dns_fakeip_stats(const struct dns_fakeip *f, struct dns_fakeip_stats *out);

#endif
