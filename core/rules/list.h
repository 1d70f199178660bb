#ifndef CHUTE_RULES_LIST_H
#define CHUTE_RULES_LIST_H

/* Parsers of the rule-list formats users already have: Surge/Loon `.list`
 * (RULE-SET) and DOMAIN-SET, and Clash/mihomo rule-provider payloads
 * `classical`, `domain` and `ipcidr`, each as a YAML `payload:` list or as
 * plain text (shared/notes/rules-protocols-lua.md §1.1). Sans-I/O: the
 * caller reads the file and gets one callback per entry. */

#include <stddef.h>
#include <stdint.h>

#include "mem/slice.h"

enum rules_format {
    RULES_FORMAT_AUTO = 0,      /* detect: see rules_list_detect */
    RULES_FORMAT_SURGE,         /* "TYPE,VALUE[,no-resolve]" per line (Surge/Loon RULE-SET) */
    RULES_FORMAT_DOMAIN_SET,    /* Surge DOMAIN-SET: a domain per line, ".a.com" = a.com and below */
    RULES_FORMAT_CLASSICAL,     /* Clash classical: like SURGE, in YAML payload or text */
    RULES_FORMAT_CLASH_DOMAIN,  /* Clash domain: "a.com", "+.a.com", ".a.com", "*.a.com" */
    RULES_FORMAT_CLASH_IPCIDR,  /* Clash ipcidr: "1.2.3.0/24", "2001:db8::/32" */
};

enum rules_type {
    RULES_T_DOMAIN,          /* exact name */
    RULES_T_DOMAIN_SUFFIX,   /* the name and its subdomains */
    RULES_T_DOMAIN_KEYWORD,
    RULES_T_DOMAIN_REGEX,
    RULES_T_DOMAIN_WILDCARD, /* Clash "*.a.com" (exactly one label) and other '*' '?' patterns */
    RULES_T_DOMAIN_SUBS,     /* Clash ".a.com": subdomains only, not a.com itself */
    RULES_T_IP_CIDR,         /* IPv4 or IPv6 prefix (IP-CIDR, IP-CIDR6) */
    RULES_T_SRC_IP_CIDR,     /* SRC-IP, SRC-IP-CIDR */
    RULES_T_DST_PORT,        /* DST-PORT / DEST-PORT: "80", "8000-9000" */
    RULES_T_SRC_PORT,
    RULES_T_PROCESS_NAME,
    RULES_T_PROCESS_PATH,
    RULES_T_NETWORK,         /* NETWORK / PROTOCOL: tcp or udp */
    RULES_T_GEOIP,           /* GEOIP,CC (country code, or mihomo's LAN) */
    RULES_T_IP_ASN,          /* IP-ASN,13335 */
    RULES_T_IN_PORT,         /* IN-PORT: the port of the listener the flow came in on */
    RULES_T_IN_TYPE,         /* IN-TYPE: SOCKS5, HTTP, HTTPS, TUN (value checked by the user) */
    RULES_T_PROCESS_NAME_REGEX,
    RULES_T_SRC_GEOIP,       /* SRC-GEOIP,CC: the source address's country */
    RULES_T_SRC_IP_ASN,
    RULES_T_GEOSITE,         /* GEOSITE,name[@attr...]: a site of a geosite.dat */
    RULES_T_UNSUPPORTED,     /* a real Surge/mihomo type chute cannot evaluate: |value| is
                              * the type's name; the caller skips it (one warning a list) */
    RULES_T_TYPE_COUNT,
};

#define RULES_OPT_NO_RESOLVE 0x01

/* One entry. |value| points into the caller's buffer (for CIDRs and ports
 * it is also parsed into the fields below); valid during the callback. */
struct rules_entry {
    enum rules_type type;
    struct mem_slice value;
    unsigned line;       /* 1-based line in the file */
    unsigned options;    /* RULES_OPT_* */
    /* IP_CIDR / SRC_IP_CIDR */
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    uint8_t prefix;
    /* DST_PORT / SRC_PORT */
    uint16_t port_lo, port_hi;
};

/* Returns 0 to go on, or a positive value to stop the parse (that value is
 * returned; negative values are the parser's own errors). */
typedef int (*rules_entry_cb)(void *arg, const struct rules_entry *e);

struct rules_list_error {
    unsigned line;       /* 1-based; 0 when the whole file is at fault */
    char msg[200];       /* "unknown rule type 'FOO'", "bad CIDR '1.2.3/99'", ... */
};

/* Parses |buf| as |fmt| (RULES_FORMAT_AUTO detects it). Comments (#, //, ;)
 * and blank lines are skipped, as are a UTF-8 BOM and CRLF line ends. An
 * invalid line stops the parse with RULES_LIST_ERR_LINE and |err| naming the
 * line and the value, unless |skip_invalid| is set: then the line is
 * counted in |*skipped| and the parse goes on. Returns 0, a callback's
 * non-zero value, or a negative RULES_LIST_ERR_*. Entries that a format
 * cannot hold (a MATCH/FINAL or RULE-SET line in a rule list, a policy
 * field) are errors too. */
#define RULES_LIST_ERR_LINE (-1)
#define RULES_LIST_ERR_FORMAT (-2) /* AUTO could not tell the format */
#define RULES_LIST_ERR_AMBIGUOUS (-3) /* AUTO: a text domain list with ".a.com" lines, which
                                        * Surge and Clash read differently */
/* |cb|, |skipped| and |err| may be NULL; with |skip_invalid|, |err| keeps the
 * first line skipped. */
int rules_list_parse(const char *buf, size_t len, enum rules_format fmt, int skip_invalid,
                     rules_entry_cb cb, void *arg, size_t *skipped, struct rules_list_error *err);

/* Detects the format of |buf|: a YAML "payload:" key or a plain list; lines
 * "TYPE,VALUE" give SURGE/CLASSICAL, CIDRs give CLASH_IPCIDR, Clash domain
 * wildcards (+. *.) or a YAML payload give CLASH_DOMAIN, bare names
 * DOMAIN_SET. Detection never changes what a line means: a text list of
 * names with ".a.com" lines and no Clash-only pattern is ambiguous
 * (rules_list_ambiguous) and gives AUTO, as does a list nothing reads. */
enum rules_format rules_list_detect(const char *buf, size_t len);
int rules_list_ambiguous(const char *buf, size_t len);

/* One rule given as fields, as chute.rules has it ({TYPE, VALUE, POLICY,
 * option...} without the policy): the same types, values and options as a
 * Surge or classical list line, into |out| (up to |max| entries: a port
 * list gives one a range). Returns the count, or -1 with |msg| (may be
 * NULL) saying why. MATCH/FINAL/RULE-SET are the caller's. */
int rules_rule_parse(struct mem_slice type, struct mem_slice value, const struct mem_slice *opts,
                     size_t nopts, struct rules_entry *out, size_t max, char *msg, size_t msglen);

/* "surge", "domain-set", "classical", "domain", "ipcidr" -> the format;
 * RULES_FORMAT_AUTO for "auto"; -1 for anything else. */
int rules_format_parse(const char *name);
const char *rules_type_name(enum rules_type t);
/* The |i|th rule type name a list line may start with (aliases too), or
 * NULL past the last: for did-you-mean hints. */
const char *rules_type_known(size_t i);

#endif
