#ifndef CHUTE_RULES_GEOIP_H
#define CHUTE_RULES_GEOIP_H

/* GEOIP and IP-ASN: MaxMind DB (.mmdb) files as users already have them,
 * read through Debian's libmaxminddb, mapped (MMDB_MODE_MMAP) at open.
 * Schemas understood, as mihomo reads them (component/mmdb):
 *   MaxMind GeoIP2/GeoLite2-Country  { country: { iso_code: "CN" } }
 *   ip-location-db                   { country_code: "CN" }
 *   sing-geoip                       "cn"  (the record is the code)
 *   Meta-geoip0                      ["cn", "private", ...]
 *   GeoLite2-ASN                     { autonomous_system_number: 13335 }
 * A record's codes are decoded once per data record and kept (a country
 * database has a few hundred records for millions of addresses). A file
 * whose tree is 256 KiB or more is flattened at open into an index
 * (geoip_index.c): an IPv4 lookup reads one cache line, started early by
 * rules_geoip_prefetch; 4.5 MiB plus 16 bytes per IPv6 interval (7 MiB for
 * 300,000 random networks; built in ~100-200 ms for those). An index over
 * max(16 MiB, half the file) or with more than 65,536 distinct records (an
 * ASN or City file) is not built: those walk the tree from 4.25 MiB of
 * start tables. A smaller tree is walked from 32 KiB of them. Plus ~170
 * KiB of decoded records. Single-threaded use. */

#include <stddef.h>
#include <stdint.h>

struct rules_geoip;

#define RULES_GEOIP_MAX_CODES 4 /* codes one address may carry (Meta-geoip0) */
#define RULES_GEOIP_CODE_MAX 24 /* bytes of one code, NUL included; longer ones are cut */

/* Opens |path|. NULL with |err| "<path>: <reason>" (libmaxminddb's
 * words: "Error opening the specified MaxMind DB file", "The MaxMind DB
 * file's search tree is corrupt", ...). The file stays mapped until
 * rules_geoip_free: a new file goes through a new object. */
struct rules_geoip *rules_geoip_open(const char *path, char *err, size_t errlen);
void rules_geoip_free(struct rules_geoip *g);

/* The database's own name for its schema ("GeoLite2-Country",
 * "sing-geoip", ...) and its build time (Unix seconds). */
const char *rules_geoip_type(const struct rules_geoip *g);
uint64_t rules_geoip_built(const struct rules_geoip *g);

/* The country codes (or category names) of |addr| (|family| AF_INET: 4
 * bytes, AF_INET6: 16; an IPv4-mapped IPv6 address is looked up as IPv4),
 * upper-cased, into |codes| (pointers that live as long as |g|; a file
 * with more than 1,024 distinct codes has the rest left out). Returns how
 * many (0: none, or not in the file). */
int rules_geoip_codes(struct rules_geoip *g, int family, const uint8_t *addr,
                      const char *codes[RULES_GEOIP_MAX_CODES]);

/* Starts loading the first cache line a lookup of |addr| reads, so that
 * its miss overlaps other work (the engine's, before route() reaches a
 * GEOIP rule): a hint, it changes nothing else. */
void rules_geoip_prefetch(const struct rules_geoip *g, int family, const uint8_t *addr);

/* The autonomous system of |addr|: 1 with *asn, or 0. */
int rules_geoip_asn(struct rules_geoip *g, int family, const uint8_t *addr, uint32_t *asn);

/* mihomo's GEOIP,LAN, which needs no database: RFC 1918 and fc00::/7,
 * loopback, link-local unicast, multicast and the unspecified address (Go's
 * netip IsPrivate, IsLoopback, IsLinkLocalUnicast, IsMulticast,
 * IsUnspecified). */
int rules_geoip_is_lan(int family, const uint8_t *addr);

#endif
