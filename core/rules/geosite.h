#ifndef CHUTE_RULES_GEOSITE_H
#define CHUTE_RULES_GEOSITE_H

/* GEOSITE: the named sites of a v2ray/Xray/mihomo `geosite.dat`, a
 * protobuf GeoSiteList { repeated GeoSite entry = 1 }, GeoSite { string
 * country_code = 1; repeated Domain domain = 2 }, Domain { Type type = 1;
 * string value = 2; repeated Attribute attribute = 3 }, Attribute { string
 * key = 1; ... }. Decoded here without a protobuf library: bounded (no
 * recursion, every length checked against what is left), sans-I/O, and
 * only the sites asked for are walked domain by domain; the others are
 * skipped by their length. Unknown fields are skipped as protobuf says. */

#include <stddef.h>

#include "mem/slice.h"

enum rules_geosite_kind {
    RULES_GEOSITE_PLAIN = 0,  /* a keyword: a substring anywhere in the name */
    RULES_GEOSITE_REGEX = 1,  /* a regular expression over the name */
    RULES_GEOSITE_DOMAIN = 2, /* the name and its subdomains (v2ray's RootDomain) */
    RULES_GEOSITE_FULL = 3,   /* the name only */
};

#define RULES_GEOSITE_MAX_ATTRS 4   /* "@a@b" conditions of one wanted site */
#define RULES_GEOSITE_DOMAIN_ATTRS 16 /* attributes one domain may carry */

/* One site asked for: "cn", or "google@ads" (the domains that carry every
 * attribute named after an '@', as v2ray reads it). Codes and attribute
 * keys compare ASCII case-insensitively. */
struct rules_geosite_want {
    struct mem_slice code;
    struct mem_slice attrs[RULES_GEOSITE_MAX_ATTRS];
    size_t nattrs;
    size_t sites;   /* out: GeoSite entries with this code */
    size_t domains; /* out: domains passed to the callback */
    size_t empty;   /* out: domains with an empty value, left out */
};

/* Splits "name@attr@attr" into |w| (its slices point into |name|). -1
 * with |msg| for an empty code or attribute, a byte outside [A-Za-z0-9!._-]
 * or more than RULES_GEOSITE_MAX_ATTRS attributes. */
int rules_geosite_want_parse(struct mem_slice name, struct rules_geosite_want *w, char *msg,
                             size_t msglen);

/* One domain of wanted site |want| (an index into the wants); |value|
 * points into the buffer and is never empty. Returns 0 to go on, or a
 * positive value to stop the read (returned by rules_geosite_read). */
typedef int (*rules_geosite_cb)(void *arg, size_t want, enum rules_geosite_kind kind,
                                struct mem_slice value);

struct rules_geosite_error {
    size_t offset;  /* of the bad byte in the buffer */
    char msg[160];
};

#define RULES_GEOSITE_ERR_FORMAT (-1)

/* Reads |buf| (|len| bytes) and calls |cb| for every domain of every
 * wanted site, in file order. |total| (may be NULL) gets the number of
 * sites in the file. Returns 0, a callback's value, or
 * RULES_GEOSITE_ERR_FORMAT with |err| naming the offset and the reason
 * ("truncated varint", "length 4000 past the end", "unknown domain type
 * 7"); a file that is not protobuf is refused before any callback only
 * when its first field already shows it. */
int rules_geosite_read(const void *buf, size_t len, struct rules_geosite_want *wants,
                       size_t nwants, rules_geosite_cb cb, void *arg, size_t *total,
                       struct rules_geosite_error *err);

#endif
