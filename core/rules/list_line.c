/* One line of a rule list, or one payload item, to entries: the
 * TYPE,VALUE[,option...] grammar of Surge and Clash classical lists, and the
 * one-token lines of DOMAIN-SET, Clash domain and Clash ipcidr lists.
 * list.c has already dropped comments, blank lines and YAML syntax. */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "rules/list.h"
#include "rules/list_int.h"


#define MAX_FIELDS 8
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define is_space(c) ((c) == ' ' || (c) == '\t')
#define is_digit(c) ((c) >= '0' && (c) <= '9')
#define is_alpha(c) (((c) | 0x20) >= 'a' && ((c) | 0x20) <= 'z')

enum {
    T_IP = 0x01,     /* takes no-resolve and src */
    T_DOMAIN = 0x02, /* takes extended-matching */
};

/* The first name of a type is the one rules_type_name gives. */
static const struct {
    const char *name;
    enum rules_type type;
    unsigned flags;
} types[] = {
    {"DOMAIN", RULES_T_DOMAIN, T_DOMAIN},
    {"DOMAIN-SUFFIX", RULES_T_DOMAIN_SUFFIX, T_DOMAIN},
    {"DOMAIN-KEYWORD", RULES_T_DOMAIN_KEYWORD, T_DOMAIN},
    {"DOMAIN-WILDCARD", RULES_T_DOMAIN_WILDCARD, T_DOMAIN},
    {"DOMAIN-REGEX", RULES_T_DOMAIN_REGEX, 0},
    {"IP-CIDR", RULES_T_IP_CIDR, T_IP},
    {"IP-CIDR6", RULES_T_IP_CIDR, T_IP},
    {"SRC-IP-CIDR", RULES_T_SRC_IP_CIDR, T_IP},
    {"SRC-IP", RULES_T_SRC_IP_CIDR, T_IP},
    {"DST-PORT", RULES_T_DST_PORT, 0},
    {"DEST-PORT", RULES_T_DST_PORT, 0},
    {"SRC-PORT", RULES_T_SRC_PORT, 0},
    {"PROCESS-NAME", RULES_T_PROCESS_NAME, 0},
    {"PROCESS-PATH", RULES_T_PROCESS_PATH, 0},
    {"NETWORK", RULES_T_NETWORK, 0},
    {"PROTOCOL", RULES_T_NETWORK, 0},
    {"GEOIP", RULES_T_GEOIP, T_IP},
    {"IP-ASN", RULES_T_IP_ASN, T_IP},
    {"IN-PORT", RULES_T_IN_PORT, 0},
    {"IN-TYPE", RULES_T_IN_TYPE, 0},
    {"PROCESS-NAME-REGEX", RULES_T_PROCESS_NAME_REGEX, 0},
    {"SRC-GEOIP", RULES_T_SRC_GEOIP, T_IP},
    {"SRC-IP-ASN", RULES_T_SRC_IP_ASN, T_IP},
    {"GEOSITE", RULES_T_GEOSITE, 0},
};

/* Rules that only make sense in a profile. */
static const char *const forbidden[] = {"MATCH", "FINAL", "RULE-SET"};

/* Real Surge or mihomo types chute does not match: named so that the error
 * says "unsupported" rather than "unknown". */
/* clang-format off */
static const char *const unsupported[] = {
    "AND", "OR", "NOT", "IP-SUFFIX", "SRC-IP-SUFFIX",
    "IN-USER", "IN-NAME", "PROCESS-PATH-REGEX",
    "PROCESS-NAME-WILDCARD", "PROCESS-PATH-WILDCARD", "UID", "DSCP", "SRC-MAC", "USER-AGENT",
    "URL-REGEX", "SUBNET", "SCRIPT", "CELLULAR-RADIO", "DEVICE-NAME", "SUB-RULE", "HOSTNAME-TYPE",
    "DEST-IP-CIDR", "PROTOCOL-SNIFF", "SRC-IP-SUFFIX", "DOMAIN-SET",
};
/* clang-format on */

const char *
rules_type_name(enum rules_type t)
{
    size_t i;

    /* Clash ".a.com" has no rule-type name of its own. */
    if (t == RULES_T_DOMAIN_SUBS)
        return "DOMAIN-SUBS";
    if (t == RULES_T_UNSUPPORTED)
        return "UNSUPPORTED";
    for (i = 0; i < COUNT(types); i++) {
        if (types[i].type == t)
            return types[i].name;
    }
    return "?";
}

const char *
rules_type_known(size_t i)
{
    return i < COUNT(types) ? types[i].name : NULL;
}

static int
one_of(struct mem_slice s, const char *const *names, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (mem_slice_ieq(s, names[i]))
            return 1;
    }
    return 0;
}

static struct mem_slice
rtrim(struct mem_slice s)
{
    while (s.len > 0 && is_space(s.ptr[s.len - 1]))
        s.len--;
    return s;
}

const char *
rules_list_shown(struct mem_slice v, char *buf)
{
    size_t i, n = v.len < 64 ? v.len : 64;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v.ptr[i];
        buf[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    memcpy(buf + n, v.len > n ? "..." : "", v.len > n ? 4 : 1);
    return buf;
}

/* Values in messages go through RULES_SHOWN(): messages end up in logs. */
static int __attribute__((format(printf, 3, 4)))
fail(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;

    if (msg == NULL)
        return -1;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The end of a regex field from |p|: the next comma outside (), [] and {}
 * and not after a backslash, so "^a\d{1,3}\.com$" stays one value as Surge
 * and mihomo read it. */
static const char *
regex_end(const char *p, const char *end)
{
    int depth = 0, in_class = 0;

    for (; p < end; p++) {
        if (*p == '\\') {
            p += p + 1 < end;
            continue;
        }
        if (in_class) {
            in_class = *p != ']';
            continue;
        }
        if (*p == '[')
            in_class = 1;
        else if (*p == '(' || *p == '{')
            depth++;
        else if ((*p == ')' || *p == '}') && depth > 0)
            depth--;
        else if (*p == ',' && depth == 0)
            break;
    }
    return p;
}

/* Splits "A, 'B,C' ,D" at commas. A field may be quoted so that it can hold
 * commas (Surge's rule for regexes); quotes neither nest nor escape. With
 * |regex|, the second field ends as regex_end says. */
static int
split_fields(struct mem_slice line, struct mem_slice *f, size_t *nf, int regex, char *msg,
             size_t msglen)
{
    const char *p = line.ptr, *end = line.ptr + line.len;

    *nf = 0;
    for (;;) {
        struct mem_slice v;

        while (p < end && is_space(*p))
            p++;
        if (p < end && (*p == '"' || *p == '\'')) {
            const char *q = memchr(p + 1, *p, (size_t)(end - p - 1));

            if (q == NULL)
                return fail(msg, msglen, "unterminated quote in '%s'", RULES_SHOWN(line));
            v = mem_slice(p + 1, (size_t)(q - p - 1));
            p = q + 1;
            while (p < end && is_space(*p))
                p++;
            if (p < end && *p != ',')
                return fail(msg, msglen, "text after a closing quote in '%s'", RULES_SHOWN(line));
        } else {
            const char *s = p;

            if (regex && *nf == 1)
                p = regex_end(p, end);
            while (p < end && *p != ',')
                p++;
            v = rtrim(mem_slice(s, (size_t)(p - s)));
        }
        if (*nf == MAX_FIELDS)
            return fail(msg, msglen, "too many fields in '%s'", RULES_SHOWN(line));
        f[(*nf)++] = v;
        if (p >= end || *p != ',')
            return 0;
        p++;
    }
}

/* Every byte is a letter, a digit or one of |extra| (so never a NUL). */
static int
word(struct mem_slice v, const char *extra)
{
    size_t i;

    for (i = 0; i < v.len; i++) {
        if (!is_alpha(v.ptr[i]) && !is_digit(v.ptr[i]) && !(v.ptr[i] && strchr(extra, v.ptr[i])))
            return 0;
    }
    return 1;
}

static int
printable(struct mem_slice v, int spaces)
{
    size_t i;

    for (i = 0; i < v.len; i++) {
        unsigned char c = (unsigned char)v.ptr[i];
        if (c < 0x20 || c == 0x7f || (!spaces && c == ' '))
            return 0;
    }
    return 1;
}

enum { NAME, WILD_SURGE, WILD_CLASH };

/* Host-name syntax as the domain matcher takes it (rules.h): labels of
 * 1..63 bytes, at most 253 bytes, an optional root dot. IDNs come as
 * punycode, but UTF-8 bytes pass for the matcher to judge. Surge wildcards
 * add * ? and [...]; a Clash * stands for a whole label. */
static int
domain_ok(struct mem_slice v, int mode)
{
    size_t i, label = 0, stars = 0;

    if (v.len > 0 && v.ptr[v.len - 1] == '.')
        v.len--;
    if (v.len == 0 || v.len > 253)
        return 0;
    for (i = 0; i <= v.len; i++) {
        unsigned char c = i < v.len ? (unsigned char)v.ptr[i] : '.';

        if (c == '.') {
            if (label == 0 || label > 63 || (stars > 0 && label > 1))
                return 0;
            label = stars = 0;
            continue;
        }
        label++;
        if (is_alpha(c) || is_digit(c) || c == '-' || c == '_' || c >= 0x80)
            continue;
        if (mode == WILD_SURGE && (c == '*' || c == '?' || c == '[' || c == ']'))
            continue;
        if (mode == WILD_CLASH && c == '*') {
            stars++;
            continue;
        }
        return 0;
    }
    return 1;
}

/* Plain decimal up to |max|: no sign, no blanks, at most ten digits. */
static int
decimal(const char *p, size_t n, unsigned long long max, unsigned long long *out)
{
    size_t i;

    *out = 0;
    if (n == 0 || n > 10)
        return -1;
    for (i = 0; i < n; i++) {
        if (!is_digit(p[i]))
            return -1;
        *out = *out * 10 + (unsigned)(p[i] - '0');
    }
    return *out <= max ? 0 : -1;
}

/* "addr" or "addr/prefix". The family follows the address, not the rule
 * name: Surge lists put IPv4 under IP-CIDR6 and back. */
static int
parse_cidr(struct mem_slice v, struct rules_entry *e)
{
    char a[INET6_ADDRSTRLEN];
    const char *slash = memchr(v.ptr, '/', v.len);
    size_t alen = slash ? (size_t)(slash - v.ptr) : v.len;
    unsigned long long prefix, max;

    /* inet_pton needs a C string: a NUL in the value must not cut it short. */
    if (alen == 0 || alen >= sizeof(a) || !word(mem_slice(v.ptr, alen), ".:"))
        return -1;
    memcpy(a, v.ptr, alen);
    a[alen] = '\0';
    memset(e->addr, 0, sizeof(e->addr));
    e->family = memchr(a, ':', alen) ? AF_INET6 : AF_INET;
    if (inet_pton(e->family, a, e->addr) != 1)
        return -1;
    max = e->family == AF_INET ? 32 : 128;
    if (slash == NULL) {
        e->prefix = (uint8_t)max;
        return 0;
    }
    alen++;
    if (decimal(v.ptr + alen, v.len - alen, max, &prefix) != 0 ||
        (v.ptr[alen] == '0' && v.len - alen > 1))
        return -1;
    e->prefix = (uint8_t)prefix;
    return 0;
}

/* "80", "8000-9000", and Surge's ">=1024" ">1023" "<=1023" "<1024". */
static int
port_range(struct mem_slice v, struct rules_entry *e)
{
    const char *p = v.ptr, *dash;
    size_t n = v.len;
    unsigned long long lo, hi;

    if (n >= 1 && (p[0] == '>' || p[0] == '<')) {
        size_t eq = n >= 2 && p[1] == '=';

        if (decimal(p + 1 + eq, n - 1 - eq, 65535, &lo) != 0)
            return -1;
        if (!eq && lo == (p[0] == '>' ? 65535 : 0))
            return -1;
        if (p[0] == '>') {
            lo += !eq;
            hi = 65535;
        } else {
            hi = lo - !eq;
            lo = 0;
        }
    } else if ((dash = memchr(p, '-', n)) != NULL) {
        if (decimal(p, (size_t)(dash - p), 65535, &lo) != 0 ||
            decimal(dash + 1, n - (size_t)(dash - p) - 1, 65535, &hi) != 0 || lo > hi)
            return -1;
    } else if (decimal(p, n, 65535, &lo) != 0) {
        return -1;
    } else {
        hi = lo;
    }
    e->port_lo = (uint16_t)lo;
    e->port_hi = (uint16_t)hi;
    return 0;
}

/* mihomo takes "80/443/8000-9000": one entry per range, all on one line.
 * Every range is checked before the caller sees any of them. */
static int
parse_ports(struct mem_slice v, struct rules_entry *out, size_t max, char *msg, size_t msglen)
{
    const char *p = v.ptr, *end = v.ptr + v.len;
    size_t n = 0;

    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        struct mem_slice item = mem_slice(p, (size_t)((slash ? slash : end) - p));

        if (n == max)
            return fail(msg, msglen, "too many port ranges in '%s'", RULES_SHOWN(v));
        out[n] = out[0];
        out[n].value = item;
        if (port_range(item, &out[n]) != 0)
            return fail(msg, msglen, "bad port '%s'", RULES_SHOWN(item));
        n++;
        if (slash == NULL)
            return (int)n;
        p = slash + 1;
    }
}

/* The value of a TYPE,VALUE rule, into out[0] (already typed). */
static int
rule_value(struct rules_entry *out, size_t max, char *msg, size_t msglen)
{
    struct mem_slice v = out[0].value;
    unsigned long long asn;

    switch (out[0].type) {
    case RULES_T_DOMAIN:
    case RULES_T_DOMAIN_SUFFIX:
        if (!domain_ok(v, NAME))
            return fail(msg, msglen, "bad domain '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_DOMAIN_WILDCARD:
        if (!domain_ok(v, WILD_SURGE))
            return fail(msg, msglen, "bad wildcard '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_DOMAIN_KEYWORD:
        if (!printable(v, 0))
            return fail(msg, msglen, "bad keyword '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_IP_CIDR:
    case RULES_T_SRC_IP_CIDR:
        if (parse_cidr(v, &out[0]) != 0)
            return fail(msg, msglen, "bad CIDR '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_DST_PORT:
    case RULES_T_SRC_PORT:
    case RULES_T_IN_PORT:
        return parse_ports(v, out, max, msg, msglen);
    case RULES_T_IN_TYPE:
        if (v.len > 64 || !word(v, "-_/"))
            return fail(msg, msglen, "bad inbound type '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_NETWORK:
        if (!mem_slice_ieq(v, "tcp") && !mem_slice_ieq(v, "udp"))
            return fail(msg, msglen, "bad network '%s' (tcp or udp; PROTOCOL also takes http, "
                        "https, quic, tls, doh, doh3, doq, stun)", RULES_SHOWN(v));
        return 1;
    case RULES_T_GEOIP:
    case RULES_T_SRC_GEOIP:
        /* Country codes, and mihomo's names such as "private" or "lan". */
        if (v.len > 23 || !word(v, "-_"))
            return fail(msg, msglen, "bad country '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_GEOSITE: /* "cn", "geolocation-!cn", "google@ads" */
        if (v.len > 128 || !word(v, "-_.!@"))
            return fail(msg, msglen, "bad GEOSITE name '%s'", RULES_SHOWN(v));
        return 1;
    case RULES_T_IP_ASN:
    case RULES_T_SRC_IP_ASN:
        if (decimal(v.ptr, v.len, 0xffffffffULL, &asn) != 0)
            return fail(msg, msglen, "bad ASN '%s'", RULES_SHOWN(v));
        return 1;
    default: /* regexes and process names: free text, compiled or compared later */
        if (!printable(v, 1))
            return fail(msg, msglen, "bad value '%s'", RULES_SHOWN(v));
        return 1;
    }
}

static int
rule_option(struct rules_entry *out, int n, unsigned flags, struct mem_slice o, char *msg,
            size_t msglen)
{
    const char *name = rules_type_name(out[0].type);
    int i;

    if (mem_slice_ieq(o, "no-resolve")) {
        if (!(flags & T_IP))
            return fail(msg, msglen, "option '%s' does not apply to %s", RULES_SHOWN(o), name);
        for (i = 0; i < n; i++)
            out[i].options |= RULES_OPT_NO_RESOLVE;
        return 0;
    }
    /* Surge: match the SNI and the Host header too. chute matches the
     * sniffed name anyway, and the entry has no bit for it. */
    if (mem_slice_ieq(o, "extended-matching")) {
        if (!(flags & T_DOMAIN))
            return fail(msg, msglen, "option '%s' does not apply to %s", RULES_SHOWN(o), name);
        return 0;
    }
    /* mihomo: "IP-CIDR,...,src" matches the source address. */
    if (mem_slice_ieq(o, "src")) {
        if (out[0].type != RULES_T_IP_CIDR && out[0].type != RULES_T_SRC_IP_CIDR)
            return fail(msg, msglen, "option '%s' does not apply to %s", RULES_SHOWN(o), name);
        out[0].type = RULES_T_SRC_IP_CIDR;
        return 0;
    }
    if (o.len == 0)
        return fail(msg, msglen, "empty option after %s", name);
    return fail(msg, msglen,
                "unknown option '%s' (a rule list has no policy; quote values with commas)",
                RULES_SHOWN(o));
}

/* Surge's PROTOCOL values beyond tcp and udp: what a flow carries, which
 * chute does not tell apart yet. */
static const char *const protocols[] = {"HTTP", "HTTPS", "QUIC", "TLS", "DOH", "DOH3", "DOQ",
                                        "STUN"};

/* TYPE, VALUE, option... as split fields (|nf| >= 1). */
static int
rule_fields(const struct mem_slice *f, size_t nf, struct rules_entry *out, size_t max, char *msg,
            size_t msglen)
{
    size_t t, i;
    int n;

    for (t = 0; t < COUNT(types) && !mem_slice_ieq(f[0], types[t].name); t++)
        ;
    if (one_of(f[0], forbidden, COUNT(forbidden)))
        return fail(msg, msglen, "'%s' cannot appear in a rule list", RULES_SHOWN(f[0]));
    if (t == COUNT(types) && nf == 1)
        return fail(msg, msglen, "expected TYPE,VALUE, got '%s'", RULES_SHOWN(f[0]));
    if (nf < 2 || f[1].len == 0)
        return fail(msg, msglen, "missing value after '%s'", RULES_SHOWN(f[0]));
    if (one_of(f[0], unsupported, COUNT(unsupported)) ||
        (mem_slice_ieq(f[0], "PROTOCOL") && one_of(f[1], protocols, COUNT(protocols)))) {
        out[0].type = RULES_T_UNSUPPORTED;
        out[0].value = f[0];
        return 1;
    }
    if (t == COUNT(types))
        return fail(msg, msglen, "unknown rule type '%s'", RULES_SHOWN(f[0]));
    out[0].type = types[t].type;
    out[0].value = f[1];
    n = rule_value(out, max, msg, msglen);
    for (i = 2; n > 0 && i < nf; i++) {
        if (rule_option(out, n, types[t].flags, f[i], msg, msglen) != 0)
            return -1;
    }
    return n;
}

static int
rule_line(struct mem_slice line, struct rules_entry *out, size_t max, char *msg, size_t msglen)
{
    struct mem_slice f[MAX_FIELDS];
    size_t nf;

    /* A type chute cannot evaluate is skipped whole: its value may be
     * anything (AND's nested lists hold commas), but it must have one. */
    const char *comma = memchr(line.ptr, ',', line.len);
    struct mem_slice type = rtrim(mem_slice(line.ptr, comma ? (size_t)(comma - line.ptr) : line.len));
    if (one_of(type, unsupported, COUNT(unsupported))) {
        if (comma == NULL || comma + 1 == line.ptr + line.len)
            return fail(msg, msglen, "missing value after '%s'", RULES_SHOWN(type));
        out[0].type = RULES_T_UNSUPPORTED;
        out[0].value = type;
        return 1;
    }
    int regex = mem_slice_ieq(type, "DOMAIN-REGEX") || mem_slice_ieq(type, "PROCESS-NAME-REGEX");
    if (split_fields(line, f, &nf, regex, msg, msglen) != 0)
        return -1;
    return rule_fields(f, nf, out, max, msg, msglen);
}

int
rules_rule_parse(struct mem_slice type, struct mem_slice value, const struct mem_slice *opts,
                 size_t nopts, struct rules_entry *out, size_t max, char *msg, size_t msglen)
{
    struct mem_slice f[MAX_FIELDS];

    memset(&out[0], 0, sizeof(out[0]));
    if (nopts > MAX_FIELDS - 2)
        return fail(msg, msglen, "too many options after %s", RULES_SHOWN(type));
    f[0] = type;
    f[1] = value;
    for (size_t i = 0; i < nopts; i++)
        f[2 + i] = opts[i];
    return rule_fields(f, 2 + nopts, out, max, msg, msglen);
}

/* Surge DOMAIN-SET: ".a.com" is a.com and below, anything else exact. */
static int
domain_set_line(struct mem_slice v, struct rules_entry *e, char *msg, size_t msglen)
{
    e->type = RULES_T_DOMAIN;
    if (v.len > 0 && v.ptr[0] == '.') {
        e->type = RULES_T_DOMAIN_SUFFIX;
        e->value = mem_slice(v.ptr + 1, v.len - 1);
    }
    if (domain_ok(e->value, NAME))
        return 1;
    if (memchr(v.ptr, ',', v.len))
        return fail(msg, msglen, "bad domain '%s' (a TYPE,VALUE line: a surge list?)",
                    RULES_SHOWN(v));
    if (memchr(v.ptr, '*', v.len) || (v.len > 1 && v.ptr[0] == '+'))
        return fail(msg, msglen, "bad domain '%s' (Clash syntax: a domain list?)", RULES_SHOWN(v));
    return fail(msg, msglen, "bad domain '%s'", RULES_SHOWN(v));
}

/* Clash domain behaviour, as mihomo's domain trie reads it: "+.a.com" is
 * a.com and below, ".a.com" only below, '*' one whole label. */
static int
clash_domain_line(struct mem_slice v, struct rules_entry *e, char *msg, size_t msglen)
{
    size_t skip = 0;

    e->type = RULES_T_DOMAIN;
    if (v.len >= 2 && v.ptr[0] == '+' && v.ptr[1] == '.') {
        e->type = RULES_T_DOMAIN_SUFFIX;
        skip = 2;
    } else if (v.len > 0 && v.ptr[0] == '.') {
        e->type = RULES_T_DOMAIN_SUBS;
        skip = 1;
    } else if (memchr(v.ptr, '*', v.len)) {
        e->type = RULES_T_DOMAIN_WILDCARD;
    }
    e->value = mem_slice(v.ptr + skip, v.len - skip);
    if (e->type == RULES_T_DOMAIN_WILDCARD ? domain_ok(e->value, WILD_CLASH)
                                         : domain_ok(e->value, NAME))
        return 1;
    if (skip > 0 && memchr(e->value.ptr, '*', e->value.len))
        return fail(msg, msglen, "unsupported pattern '%s' ('*' after '%s')", RULES_SHOWN(v),
                    skip == 2 ? "+." : ".");
    if (memchr(v.ptr, ',', v.len))
        return fail(msg, msglen, "bad domain '%s' (a TYPE,VALUE line: a classical list?)",
                    RULES_SHOWN(v));
    return fail(msg, msglen, "bad domain '%s'", RULES_SHOWN(v));
}

int
rules_list_line_parse(enum rules_format fmt, struct mem_slice text, struct rules_entry *out,
                      size_t max, char *msg, size_t msglen)
{
    memset(&out[0], 0, sizeof(out[0]));
    out[0].value = text;
    if (fmt == RULES_FORMAT_SURGE || fmt == RULES_FORMAT_CLASSICAL)
        return rule_line(text, out, max, msg, msglen);
    if (fmt == RULES_FORMAT_DOMAIN_SET)
        return domain_set_line(text, &out[0], msg, msglen);
    if (fmt == RULES_FORMAT_CLASH_DOMAIN)
        return clash_domain_line(text, &out[0], msg, msglen);
    out[0].type = RULES_T_IP_CIDR; /* RULES_FORMAT_CLASH_IPCIDR: list.c never passes AUTO */
    if (parse_cidr(text, &out[0]) != 0)
        return fail(msg, msglen, "bad CIDR '%s'", RULES_SHOWN(text));
    return 1;
}
