#ifndef CHUTE_RULES_RULES_H
#define CHUTE_RULES_RULES_H

/* C-speed matchers for routing rules: domain sets (exact, suffix, keyword),
 * IP CIDR sets (IPv4 and IPv6), port sets and compiled regular
 * expressions. Each entry carries a |tag| (the index of the rule it came
 * from); a match returns the smallest tag among the entries that match, so
 * many rules fused into one set keep first-match order
 * (shared/notes/rules-protocols-lua.md §1.2, meow-rs#287).
 *
 * Lifecycle: _new, any number of _add, one _build (compacts the set into
 * its read-only form), then _match as often as wanted; _add after _build
 * fails. Sets are immutable after _build, so a reload builds new ones. No
 * allocation in _match. Single-threaded use. */

#include <stddef.h>
#include <stdint.h>

enum rules_domain_kind {
    RULES_DOMAIN_EXACT,   /* DOMAIN: the name only */
    RULES_DOMAIN_SUFFIX,  /* DOMAIN-SUFFIX: the name and every subdomain, on label
                           * boundaries ("example.com" matches "a.example.com", not
                           * "badexample.com") */
    RULES_DOMAIN_KEYWORD, /* DOMAIN-KEYWORD: a substring anywhere in the name */
};

struct rules_domains;
struct rules_cidrs;
struct rules_ports;
struct rules_regexes;
struct rules_wildcards;

/* Domains. Names compare ASCII case-insensitively and a trailing root dot is
 * ignored, when added and when matched; IDNs are expected in punycode
 * (xn--...) and any other byte compares as itself. An empty name, a name
 * over 253 bytes, a label over 63 bytes or an empty label ("a..b") is
 * refused (-1). */
struct rules_domains *rules_domains_new(void);
void rules_domains_free(struct rules_domains *d);
int rules_domains_add(struct rules_domains *d, enum rules_domain_kind kind, const char *name,
                      size_t len, uint32_t tag);
int rules_domains_build(struct rules_domains *d);
/* 1 with *tag set to the smallest matching tag, or 0. */
int rules_domains_match(const struct rules_domains *d, const char *host, size_t len,
                        uint32_t *tag);
size_t rules_domains_count(const struct rules_domains *d);
size_t rules_domains_memory(const struct rules_domains *d); /* bytes held */

/* CIDRs. |family| AF_INET (4 address bytes) or AF_INET6 (16). Host bits
 * beyond the prefix are ignored. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) given to _match is matched against the IPv4 entries. */
struct rules_cidrs *rules_cidrs_new(void);
void rules_cidrs_free(struct rules_cidrs *c);
int rules_cidrs_add(struct rules_cidrs *c, int family, const uint8_t *addr, unsigned prefix,
                    uint32_t tag);
int rules_cidrs_build(struct rules_cidrs *c);
int rules_cidrs_match(const struct rules_cidrs *c, int family, const uint8_t *addr,
                      uint32_t *tag);
size_t rules_cidrs_count(const struct rules_cidrs *c);
size_t rules_cidrs_memory(const struct rules_cidrs *c);

/* Ports: single ports and inclusive ranges, 0..65535. */
struct rules_ports *rules_ports_new(void);
void rules_ports_free(struct rules_ports *p);
int rules_ports_add(struct rules_ports *p, uint16_t lo, uint16_t hi, uint32_t tag);
int rules_ports_build(struct rules_ports *p);
int rules_ports_match(const struct rules_ports *p, uint16_t port, uint32_t *tag);

/* Regular expressions over host names on PCRE2 (rules/re.h: Perl/ICU and
 * RE2 syntax, \d \w (?i) {m,n}; case-insensitive; JIT; match limits),
 * compiled once at _add: a bad pattern fails with PCRE2's message and
 * offset in |err|. Matched one after another: keep them few. A match the
 * limits cut counts as no match, and in _cut. */
struct rules_regexes *rules_regexes_new(void);
void rules_regexes_free(struct rules_regexes *r);
int rules_regexes_add(struct rules_regexes *r, const char *pattern, uint32_t tag, char *err,
                      size_t errlen);
int rules_regexes_match(const struct rules_regexes *r, const char *host, size_t len,
                        uint32_t *tag);
size_t rules_regexes_count(const struct rules_regexes *r);
uint64_t rules_regexes_cut(const struct rules_regexes *r);

/* Wildcard host patterns, case-insensitive, a trailing root dot ignored:
 *  RULES_WILD_GLOB   mihomo's DOMAIN-WILDCARD: '*' any run of characters
 *                    (dots too, or none), '?' exactly one character
 *  RULES_WILD_SURGE  Surge's DOMAIN-WILDCARD: the same, plus "[a-z]"
 *                    classes ("[!...]" or "[^...]" negated)
 *  RULES_WILD_LABEL  a Clash domain provider's "*.a.com": '*' is exactly
 *                    one whole non-empty label
 * Matched one after another: keep them few. */
enum rules_wild_kind { RULES_WILD_GLOB, RULES_WILD_SURGE, RULES_WILD_LABEL };
struct rules_wildcards *rules_wildcards_new(void);
void rules_wildcards_free(struct rules_wildcards *w);
int rules_wildcards_add(struct rules_wildcards *w, enum rules_wild_kind kind, const char *pat,
                        size_t len, uint32_t tag);
int rules_wildcards_match(const struct rules_wildcards *w, const char *host, size_t len,
                          uint32_t *tag);
size_t rules_wildcards_count(const struct rules_wildcards *w);

#endif
