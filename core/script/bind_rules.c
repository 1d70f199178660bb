#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "flow/process.h"
#include "log/log.h"
#include "rules/list.h"
#include "rules/rules.h"
#include "script/geo.h"
#include "script/hint.h"
#include "script/script_int.h"

/* chute.rules { {TYPE, VALUE, POLICY [, option...]}, ..., {"FINAL", POLICY} }
 * compiles a Surge/Clash-style rule list into a route function. A rule's
 * TYPE, VALUE and options are read by the rule-list parser (rules/list.h:
 * rules_rule_parse), so a rule means what the same line means in a list.
 * Domain and CIDR rules are fused into one C set each, tagged with their
 * index, so one lookup gives the first of them that matches (the smallest
 * tag); the other rules (ports, sources, networks, processes, regexes,
 * wildcards, RULE-SET, AND/OR/NOT and Lua functions) are checked in order
 * only up to that index. First match wins, as in Surge and Clash. A named
 * flow that reaches an IP rule without no-resolve before any match is
 * resolved, then decided again (ip_rules.c). */

enum cond_type {
    C_DOMAIN, C_SUFFIX, C_KEYWORD, C_WILDCARD, C_REGEX, C_CIDR, C_SRC_CIDR, C_DST_PORT,
    C_SRC_PORT, C_IN_PORT, C_IN_TYPE, C_NETWORK, C_PROC_NAME, C_PROC_PATH, C_PROC_REGEX, C_SKIP,
    C_GEOIP, C_SRC_GEOIP, C_ASN, C_SRC_ASN, C_GEOSITE,
    C_RULESET, C_FUNC, C_AND, C_OR, C_NOT, C_FINAL,
};

#define MAX_RANGES 32

struct cond {
    enum cond_type type;
    char *text;              /* DOMAIN*, PROCESS-*, NETWORK: the value, lowercased for names */
    unsigned options;        /* RULES_OPT_* */
    int family;              /* CIDRs */
    uint8_t addr[16];
    unsigned prefix;
    uint16_t (*ranges)[2];   /* ports: inclusive ranges ("80/443/8000-9000") */
    size_t nranges;
    uint8_t in_types;        /* IN-TYPE: bit per script_in_type_of slot */
    struct rules_regexes *re;
    struct rules_wildcards *wild;
    int ref;                 /* RULE-SET, FUNC: a registry reference */
    char code[24];           /* GEOIP: the country code, upper-cased */
    uint32_t asn;            /* IP-ASN */
    struct script_geo_site *site; /* GEOSITE: owned by the script (geo.c) */
    struct cond *sub;        /* AND/OR/NOT */
    size_t nsub;
};

struct rule {
    struct cond c;
    int policy;              /* -1 for a Lua function: it names its own */
    char *desc;              /* "rule 3 DOMAIN-SUFFIX,example.com" for chute route and the log */
};

struct compiled {
    struct rule *rules;
    size_t n;
    struct rules_domains *domains;  /* DOMAIN, DOMAIN-SUFFIX, DOMAIN-KEYWORD rules, by index */
    struct rules_cidrs *cidrs;      /* IP-CIDR rules */
    struct rules_cidrs *cidrs_res;  /* those without no-resolve: for a named flow's addresses */
    size_t first_res;               /* the first of those, SIZE_MAX if none */
    uint8_t *linear;                /* rules not in the two sets: checked one by one */
};

static void
cond_fini(lua_State *L, struct cond *c)
{
    free(c->text);
    free(c->ranges);
    rules_regexes_free(c->re);
    rules_wildcards_free(c->wild);
    if (c->ref > 0)
        luaL_unref(L, LUA_REGISTRYINDEX, c->ref);
    for (size_t i = 0; i < c->nsub; i++)
        cond_fini(L, &c->sub[i]);
    free(c->sub);
}

static int
l_gc(lua_State *L)
{
    struct compiled *p = luaL_checkudata(L, 1, "chute.rules");
    for (size_t i = 0; i < p->n; i++) {
        cond_fini(L, &p->rules[i].c);
        free(p->rules[i].desc);
    }
    free(p->rules);
    free(p->linear);
    rules_domains_free(p->domains);
    rules_cidrs_free(p->cidrs);
    rules_cidrs_free(p->cidrs_res);
    memset(p, 0, sizeof(*p));
    return 0;
}

/* What parse_cond found that chute cannot evaluate: one warning a list. */
struct skips {
    size_t n;
    char first[128];
};

static void parse_cond(lua_State *L, struct cond *c, const char *where, int opt_from,
                       struct skips *sk);

static void
parse_subs(lua_State *L, struct cond *c, const char *where, struct skips *sk)
{
    if (!lua_istable(L, -1))
        luaL_error(L, "%s: expected a list of conditions", where);
    c->nsub = lua_rawlen(L, -1);
    if (c->nsub == 0 || (c->type == C_NOT && c->nsub != 1))
        luaL_error(L, "%s: %s takes %s", where, c->type == C_NOT ? "NOT" : "AND/OR",
                   c->type == C_NOT ? "exactly one condition" : "at least one condition");
    c->sub = calloc(c->nsub, sizeof(*c->sub));
    if (c->sub == NULL)
        luaL_error(L, "out of memory");
    for (size_t i = 0; i < c->nsub; i++) {
        char sw[192];
        snprintf(sw, sizeof(sw), "%.128s, condition %zu", where, i + 1);
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        parse_cond(L, &c->sub[i], sw, 3, sk);
        lua_pop(L, 1);
    }
}

static char *
dup_lower(struct mem_slice v, int lower)
{
    char *s = strndup(v.ptr, v.len);
    for (char *p = s; lower && p != NULL && *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    return s;
}

/* A {TYPE, VALUE, [POLICY,] option...} leaf, through the list parser. */
static void
parse_leaf(lua_State *L, struct cond *c, const char *where, const char *type, int opt_from,
           struct skips *sk)
{
    struct mem_slice opts[6], t = mem_slice(type, strlen(type)), v;
    struct rules_entry e[MAX_RANGES];
    char msg[200], err[200];
    size_t nopts = 0, len;
    lua_rawgeti(L, -1, 2);
    const char *val = lua_tolstring(L, -1, &len);
    if (val == NULL || len == 0)
        luaL_error(L, "%s: %s needs a value", where, type);
    v = mem_slice(val, len);
    lua_pop(L, 1);
    for (int i = opt_from; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
        const char *o = lua_tolstring(L, -1, &len);
        if (o == NULL || nopts == sizeof(opts) / sizeof(opts[0]))
            luaL_error(L, "%s: option %d must be a string (no-resolve, src, ...)", where,
                       i - opt_from + 1);
        opts[nopts++] = mem_slice(o, len); /* the table holds the strings */
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    int n = rules_rule_parse(t, v, opts, nopts, e, MAX_RANGES, msg, sizeof(msg));
    if (n < 0 && strncmp(msg, "unknown option", 14) == 0) { /* the list's hint is no help */
        static const char *const names[] = {"no-resolve", "src", "extended-matching"};
        msg[strcspn(msg, "(")] = '\0';
        char word[64] = "";
        sscanf(msg, "unknown option '%63[^']'", word);
        const char *near = script_suggest(word, names, 3);
        if (near != NULL)
            luaL_error(L, "%s: %s(no-resolve, src or extended-matching): did you mean %s?", where,
                       msg, near);
        luaL_error(L, "%s: %s(no-resolve, src or extended-matching)", where, msg);
    }
    if (n < 0 && strncmp(msg, "unknown rule type", 17) == 0) {
        const char *names[64];
        size_t k = 0;
        static const char *const own[] = {"FINAL", "MATCH", "RULE-SET", "AND", "OR", "NOT"};
        for (size_t i = 0; i < 6; i++)
            names[k++] = own[i];
        for (size_t i = 0; k < 64 && rules_type_known(i) != NULL; i++)
            names[k++] = rules_type_known(i);
        const char *near = script_suggest(type, names, k);
        if (near != NULL)
            luaL_error(L, "%s: %s: did you mean %s?", where, msg, near);
    }
    if (n < 0)
        luaL_error(L, "%s: %s", where, msg);
    c->options = e[0].options;
    switch (e[0].type) {
    case RULES_T_DOMAIN:
    case RULES_T_DOMAIN_SUFFIX:
    case RULES_T_DOMAIN_KEYWORD:
        c->type = e[0].type == RULES_T_DOMAIN          ? C_DOMAIN
                  : e[0].type == RULES_T_DOMAIN_SUFFIX ? C_SUFFIX
                                                       : C_KEYWORD;
        c->text = dup_lower(v, 1);
        break;
    case RULES_T_DOMAIN_WILDCARD:
        c->type = C_WILDCARD;
        c->wild = rules_wildcards_new();
        if (c->wild == NULL || rules_wildcards_add(c->wild, RULES_WILD_SURGE, v.ptr, v.len, 0))
            luaL_error(L, "%s: bad wildcard '%s'", where, val);
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_DOMAIN_REGEX:
    case RULES_T_PROCESS_NAME_REGEX:
        c->type = e[0].type == RULES_T_DOMAIN_REGEX ? C_REGEX : C_PROC_REGEX;
        c->text = dup_lower(v, 0);
        c->re = rules_regexes_new();
        if (c->text == NULL || c->re == NULL ||
            rules_regexes_add(c->re, c->text, 0, err, sizeof(err)) != 0)
            luaL_error(L, "%s: bad regex '%s': %s", where, val, err);
        break;
    case RULES_T_IP_CIDR:
    case RULES_T_SRC_IP_CIDR:
        c->type = e[0].type == RULES_T_IP_CIDR ? C_CIDR : C_SRC_CIDR;
        c->family = e[0].family;
        memcpy(c->addr, e[0].addr, 16);
        c->prefix = e[0].prefix;
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_DST_PORT:
    case RULES_T_SRC_PORT:
    case RULES_T_IN_PORT:
        c->type = e[0].type == RULES_T_DST_PORT   ? C_DST_PORT
                  : e[0].type == RULES_T_SRC_PORT ? C_SRC_PORT
                                                  : C_IN_PORT;
        c->ranges = calloc((size_t)n, sizeof(*c->ranges));
        if (c->ranges == NULL)
            luaL_error(L, "out of memory");
        for (int i = 0; i < n; i++) {
            c->ranges[i][0] = e[i].port_lo;
            c->ranges[i][1] = e[i].port_hi;
        }
        c->nranges = (size_t)n;
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_IN_TYPE:
        c->type = C_IN_TYPE;
        if (script_in_types(v, &c->in_types) != 0)
            luaL_error(L, "%s: unknown inbound type in '%s' (SOCKS5, HTTP, HTTPS, TUN, ...)",
                       where, val);
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_NETWORK:
        c->type = C_NETWORK;
        c->text = dup_lower(v, 1);
        break;
    case RULES_T_PROCESS_NAME:
    case RULES_T_PROCESS_PATH:
        c->type = e[0].type == RULES_T_PROCESS_NAME ? C_PROC_NAME : C_PROC_PATH;
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_GEOIP:
    case RULES_T_SRC_GEOIP:
        c->type = e[0].type == RULES_T_GEOIP ? C_GEOIP : C_SRC_GEOIP;
        for (size_t i = 0; i < v.len && i + 1 < sizeof(c->code); i++)
            c->code[i] = (char)(v.ptr[i] >= 'a' && v.ptr[i] <= 'z' ? v.ptr[i] - 32 : v.ptr[i]);
        if (strcmp(c->code, "LAN") != 0)
            script_geo_need(script_of(L), SCRIPT_GEO_MMDB, where);
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_IP_ASN:
    case RULES_T_SRC_IP_ASN:
        c->type = e[0].type == RULES_T_IP_ASN ? C_ASN : C_SRC_ASN;
        c->asn = (uint32_t)strtoul(val, NULL, 10);
        script_geo_need(script_of(L), SCRIPT_GEO_ASN, where);
        c->text = dup_lower(v, 0);
        break;
    case RULES_T_GEOSITE:
        c->type = C_GEOSITE;
        c->site = script_geo_site(script_of(L), v, where, err, sizeof(err));
        if (c->site == NULL)
            luaL_error(L, "%s: %s", where, err);
        c->text = dup_lower(v, 0);
        break;
    default: /* types chute cannot evaluate */
        c->type = C_SKIP;
        c->text = dup_lower(v, 0);
        if (sk->n++ == 0)
            snprintf(sk->first, sizeof(sk->first), "%.100s, %s", where, type);
        break;
    }
    if (c->text == NULL)
        luaL_error(L, "out of memory");
}

/* Parses the rule at the top of the stack ({TYPE, VALUE, ...} or a
 * function) into |c|; options start at index |opt_from| (after the policy
 * for a rule, after the value for a condition). Raises a Lua error naming
 * |where| (the rule's position) on bad input. */
static void
parse_cond(lua_State *L, struct cond *c, const char *where, int opt_from, struct skips *sk)
{
    if (lua_isfunction(L, -1)) {
        c->type = C_FUNC;
        lua_pushvalue(L, -1);
        c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
        return;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "%s: expected {TYPE, VALUE, POLICY} or a function", where);
    lua_rawgeti(L, -1, 1);
    const char *t = lua_tostring(L, -1);
    if (t == NULL)
        luaL_error(L, "%s: the rule type must be a string", where);
    char type[40];
    snprintf(type, sizeof(type), "%s", t);
    lua_pop(L, 1);
    if (strcasecmp(type, "FINAL") == 0 || strcasecmp(type, "MATCH") == 0) {
        c->type = C_FINAL;
        return;
    }
    int logic = strcasecmp(type, "AND") == 0 ? C_AND
                : strcasecmp(type, "OR") == 0 ? C_OR
                : strcasecmp(type, "NOT") == 0 ? C_NOT
                                               : -1;
    if (logic >= 0) {
        c->type = (enum cond_type)logic;
        lua_rawgeti(L, -1, 2);
        parse_subs(L, c, where, sk);
        lua_pop(L, 1);
        return;
    }
    if (strcasecmp(type, "RULE-SET") == 0) {
        c->type = C_RULESET;
        lua_rawgeti(L, -1, 2);
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *name = lua_tostring(L, -1);
            if (!script_ruleset_builtin(L, name))
                luaL_error(L, "%s: RULE-SET takes a chute.ruleset or Surge's LAN or SYSTEM, "
                              "not '%s'", where, name);
            lua_remove(L, -2);
        }
        luaL_checkudata(L, -1, "chute.ruleset");
        c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
        /* mihomo's RULE-SET,name,policy,no-resolve: its IP rules skip names. */
        for (int i = opt_from; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            const char *o = lua_tostring(L, -1);
            if (o == NULL || strcasecmp(o, "no-resolve") != 0)
                luaL_error(L, "%s: unknown option '%s' for RULE-SET (no-resolve)", where,
                           o ? o : "?");
            c->options |= RULES_OPT_NO_RESOLVE;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        return;
    }
    parse_leaf(L, c, where, type, opt_from, sk);
}

static int
cidr_match(const struct cond *c, int family, const uint8_t *a)
{
    if (family != c->family)
        return 0;
    unsigned bits = c->prefix, i = 0;
    for (; bits >= 8; bits -= 8, i++)
        if (a[i] != c->addr[i])
            return 0;
    return bits == 0 || ((a[i] ^ c->addr[i]) & (0xff << (8 - bits))) == 0;
}

/* An IP-CIDR condition: the destination IP, or a named flow's resolved
 * addresses (never with no-resolve; reaching it unresolved marks the flow). */
static int
dst_cidr_match(const struct cond *c, struct flow *f)
{
    if (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6)
        return cidr_match(c, f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6, f->dst.ip);
    if (f->dst.kind != FLOW_ADDR_NAME || (c->options & RULES_OPT_NO_RESOLVE))
        return 0;
    if (script_ip_rule_reached(f))
        return 0;
    for (unsigned i = 0; f->resolved.state == FLOW_RESOLVE_DONE && i < f->resolved.n; i++)
        if (cidr_match(c, f->resolved.v6 & (1u << i) ? AF_INET6 : AF_INET, f->resolved.ip[i]))
            return 1;
    return 0;
}

static int
sock_addr(const struct sockaddr_storage *ss, const uint8_t **a, uint16_t *port)
{
    if (ss->ss_family == AF_INET) {
        *a = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
        *port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        *a = (const uint8_t *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
        *port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    } else {
        return -1;
    }
    return 0;
}

static int
in_ranges(const struct cond *c, uint16_t port)
{
    for (size_t i = 0; i < c->nranges; i++)
        if (port >= c->ranges[i][0] && port <= c->ranges[i][1])
            return 1;
    return 0;
}

/* The host a domain condition sees: the name asked for, or a sniffed one. */
static const char *
host_of(struct flow *f, size_t *n)
{
    if (f->dst.kind == FLOW_ADDR_NAME) {
        *n = f->dst.name_len;
        return f->dst.name;
    }
    if (f->sniffed != NULL) {
        f->_reads |= FLOW_READ_UNCACHEABLE;
        *n = strlen(f->sniffed);
        return f->sniffed;
    }
    f->_reads |= FLOW_READ_HOST | FLOW_READ_UNCACHEABLE; /* worth sniffing on the TUN */
    return NULL;
}

static int
suffix_match(const char *host, size_t n, const char *suf)
{
    size_t m = strlen(suf);
    if (n > 0 && host[n - 1] == '.')
        n--;
    return n >= m && strncasecmp(host + n - m, suf, m) == 0 && (n == m || host[n - m - 1] == '.');
}

/* 1 if |c| matches |f|; for a function, its policy name is pushed. */
static int
cond_match(lua_State *L, const struct cond *c, struct flow *f, const char **fn_policy)
{
    const uint8_t *a;
    uint16_t port;
    size_t n;
    const char *h;
    uint32_t tag;
    const struct flow_process *p;
    switch (c->type) {
    case C_DOMAIN:
        h = host_of(f, &n);
        if (h != NULL && n > 0 && h[n - 1] == '.')
            n--;
        return h && strlen(c->text) == n && strncasecmp(h, c->text, n) == 0;
    case C_SUFFIX:
        h = host_of(f, &n);
        return h && suffix_match(h, n, c->text);
    case C_KEYWORD:
        h = host_of(f, &n);
        return h && strcasestr(h, c->text) != NULL;
    case C_WILDCARD:
        h = host_of(f, &n);
        return h && rules_wildcards_match(c->wild, h, n, &tag);
    case C_REGEX:
        h = host_of(f, &n);
        return h && rules_regexes_match(c->re, h, n, &tag);
    case C_CIDR:
        return dst_cidr_match(c, f);
    case C_SRC_CIDR:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        return sock_addr(&f->src, &a, &port) == 0 && cidr_match(c, f->src.ss_family, a);
    case C_DST_PORT:
        return in_ranges(c, f->dst.port);
    case C_SRC_PORT:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        return sock_addr(&f->src, &a, &port) == 0 && in_ranges(c, port);
    case C_IN_PORT: /* the listener's port; a TUN flow came in on none */
        f->_reads |= FLOW_READ_UNCACHEABLE;
        return f->inbound != FLOW_IN_TUN && sock_addr(&f->local, &a, &port) == 0 &&
               in_ranges(c, port);
    case C_IN_TYPE:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        return (c->in_types & (1u << script_in_type_of(f))) != 0;
    case C_NETWORK:
        return (f->network == FLOW_UDP) == (strcmp(c->text, "udp") == 0);
    case C_PROC_NAME:
    case C_PROC_PATH:
    case C_PROC_REGEX:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        p = script_flow_process(f);
        if (p == NULL || p->pid == 0)
            return 0;
        if (c->type == C_PROC_REGEX)
            return rules_regexes_match(c->re, p->name, strlen(p->name), &tag);
        /* Case-insensitive, as mihomo compares (strings.EqualFold). */
        return strcasecmp(c->type == C_PROC_NAME ? p->name : p->path, c->text) == 0;
    case C_SKIP:
        return 0;
    case C_GEOIP:
    case C_SRC_GEOIP:
        return script_geo_country(script_of(L), f, c->code, c->type == C_SRC_GEOIP,
                                  (c->options & RULES_OPT_NO_RESOLVE) != 0);
    case C_ASN:
    case C_SRC_ASN:
        return script_geo_asn(script_of(L), f, c->asn, c->type == C_SRC_ASN,
                              (c->options & RULES_OPT_NO_RESOLVE) != 0);
    case C_GEOSITE:
        h = host_of(f, &n);
        return h && script_geo_site_match(c->site, h, n);
    case C_RULESET: {
        /* no-resolve: the list sees the name as unresolvable, for this call. */
        int hide = (c->options & RULES_OPT_NO_RESOLVE) && f->resolved.state == FLOW_RESOLVE_NONE;
        if (hide)
            f->resolved.state = FLOW_RESOLVE_FAILED;
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
        n = (size_t)script_ruleset_match(L, lua_gettop(L), f, &tag);
        lua_pop(L, 1);
        if (hide)
            f->resolved.state = FLOW_RESOLVE_NONE;
        return (int)n;
    }
    case C_AND:
        for (size_t i = 0; i < c->nsub; i++)
            if (!cond_match(L, &c->sub[i], f, NULL))
                return 0;
        return 1;
    case C_OR:
        for (size_t i = 0; i < c->nsub; i++)
            if (cond_match(L, &c->sub[i], f, NULL))
                return 1;
        return 0;
    case C_NOT:
        return !cond_match(L, &c->sub[0], f, NULL);
    case C_FINAL:
        return 1;
    case C_FUNC:
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
        lua_pushvalue(L, 1); /* the flow userdata route() was called with */
        lua_call(L, 1, 1);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            return 0;
        }
        if (fn_policy != NULL)
            *fn_policy = lua_tostring(L, -1); /* left on the stack for the caller */
        else
            lua_pop(L, 1);
        return 1;
    }
    return 0;
}

/* The decision waits for the flow's addresses: route() gives a trial
 * (script/route.c) and the engine resolves, then decides again. */
static int
waits(const struct flow *f)
{
    return (f->_reads & FLOW_READ_RESOLVE) && f->_resolvable &&
           f->resolved.state == FLOW_RESOLVE_NONE;
}

/* The compiled route(flow): the policy name of the first rule that matches,
 * or nil (the bundle's fallback). */
static int
l_route(lua_State *L)
{
    struct compiled *p = lua_touserdata(L, lua_upvalueindex(1));
    struct flow *f = script_check_flow(L, 1);
    size_t n = 0;
    const char *h = rules_domains_count(p->domains) > 0 ? host_of(f, &n) : NULL;
    uint32_t first = UINT32_MAX, tag;
    if (h != NULL && rules_domains_match(p->domains, h, n, &tag))
        first = tag;
    if (script_cidrs_match_flow(p->cidrs, p->cidrs_res, f, &tag) && tag < first)
        first = tag;
    for (size_t i = 0; i < p->n && i < first; i++) {
        const char *fn_policy = NULL;
        /* An IP-CIDR rule reached before any match: the addresses decide. */
        if (i == p->first_res && script_ip_rule_reached(f) && waits(f))
            return 0;
        if (!p->linear[i])
            continue;
        int hit = cond_match(L, &p->rules[i].c, f, &fn_policy);
        if (waits(f)) {
            lua_settop(L, 1);
            return 0;
        }
        if (!hit)
            continue;
        if (p->rules[i].c.type == C_RULESET) {
            char line[sizeof(f->why)]; /* the list's own "file:line", from its match */
            memcpy(line, f->why, sizeof(line));
            /* "rule N file:line"; a very long list path is cut, the rule
             * number stays first. */
            char num[24];
            size_t k = (size_t)snprintf(num, sizeof(num), "rule %zu ", i + 1);
            size_t ll = strnlen(line, sizeof(f->why) - 1 - k);
            memcpy(f->why, num, k);
            memcpy(f->why + k, line, ll);
            f->why[k + ll] = '\0';
        } else {
            snprintf(f->why, sizeof(f->why), "%s", p->rules[i].desc);
        }
        if (fn_policy != NULL)
            return 1; /* the function's own answer */
        lua_pushstring(L, script_policy_name(script_of(L), p->rules[i].policy));
        return 1;
    }
    if (first == UINT32_MAX)
        return 0;
    snprintf(f->why, sizeof(f->why), "%s", p->rules[first].desc);
    lua_pushstring(L, script_policy_name(script_of(L), p->rules[first].policy));
    return 1;
}

/* Fuses rule |i| into the sets when it is a plain domain or CIDR rule. */
static int
fuse(struct compiled *p, size_t i)
{
    struct cond *c = &p->rules[i].c;
    uint32_t tag = (uint32_t)i;
    switch (c->type) {
    case C_DOMAIN:
        return rules_domains_add(p->domains, RULES_DOMAIN_EXACT, c->text, strlen(c->text), tag);
    case C_SUFFIX:
        return rules_domains_add(p->domains, RULES_DOMAIN_SUFFIX, c->text, strlen(c->text), tag);
    case C_KEYWORD:
        return rules_domains_add(p->domains, RULES_DOMAIN_KEYWORD, c->text, strlen(c->text), tag);
    case C_CIDR:
        if (rules_cidrs_add(p->cidrs, c->family, c->addr, c->prefix, tag) != 0)
            return -1;
        if (c->options & RULES_OPT_NO_RESOLVE)
            return 0;
        if (p->first_res == SIZE_MAX)
            p->first_res = i;
        return rules_cidrs_add(p->cidrs_res, c->family, c->addr, c->prefix, tag);
    default:
        p->linear[i] = 1;
        return 0;
    }
}

static int
rules_build(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t n = lua_rawlen(L, 1);
    struct compiled *p = lua_newuserdatauv(L, sizeof(*p), 0);
    struct skips sk = {0};
    memset(p, 0, sizeof(*p));
    luaL_setmetatable(L, "chute.rules");
    p->first_res = SIZE_MAX;
    p->rules = calloc(n ? n : 1, sizeof(*p->rules));
    p->linear = calloc(n ? n : 1, 1);
    p->domains = rules_domains_new();
    p->cidrs = rules_cidrs_new();
    p->cidrs_res = rules_cidrs_new();
    if (!p->rules || !p->linear || !p->domains || !p->cidrs || !p->cidrs_res)
        return luaL_error(L, "out of memory");
    for (size_t i = 0; i < n; i++) {
        struct rule *r = &p->rules[i];
        char where[128];
        snprintf(where, sizeof(where), "chute.rules: rule %zu", i + 1);
        lua_rawgeti(L, 1, (lua_Integer)i + 1);
        p->n = i + 1;
        parse_cond(L, &r->c, where, 4, &sk);
        if (r->c.type == C_FINAL && i + 1 != n)
            return luaL_error(L, "%s: FINAL must be the last rule", where);
        r->policy = -1;
        char desc[600];
        if (r->c.type != C_FUNC) {
            int final = r->c.type == C_FINAL;
            int pt = lua_rawgeti(L, -1, final ? 2 : 3);
            const char *pol = pt == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
            if (pt == LUA_TNIL)
                return luaL_error(L, "chute.rules: rule %d has no policy: %s", (int)i + 1,
                                  final ? "{\"FINAL\", POLICY}" : "{TYPE, VALUE, POLICY}");
            if (pol == NULL)
                return luaL_error(L, "%s: the policy must be a name (a string), got %s", where,
                                  script_got(L, -1));
            r->policy = script_policy_lookup(script_of(L), pol);
            if (r->policy < 0) {
                char hint[160];
                script_policy_hint(script_of(L), pol, hint, sizeof(hint));
                return luaL_error(L, "%s: unknown policy '%s'%s%s", where, pol,
                                  hint[0] ? ": " : "", hint);
            }
            lua_pop(L, 1);
            lua_rawgeti(L, -1, 1);
            snprintf(desc, sizeof(desc), "rule %zu %.64s%s%.500s", i + 1, lua_tostring(L, -1),
                     r->c.text ? "," : "", r->c.text ? r->c.text : "");
            lua_pop(L, 1);
        } else {
            snprintf(desc, sizeof(desc), "rule %zu function", i + 1);
        }
        r->desc = strdup(desc);
        lua_pop(L, 1);
        if (r->desc == NULL)
            return luaL_error(L, "out of memory");
        if (fuse(p, i) != 0)
            return luaL_error(L, "%s: '%s' is not a usable name", where, r->c.text);
    }
    if (rules_domains_build(p->domains) != 0 || rules_cidrs_build(p->cidrs) != 0 ||
        rules_cidrs_build(p->cidrs_res) != 0)
        return luaL_error(L, "out of memory");
    if (sk.n > 0)
        LOG_WARN("chute.rules: %zu rule%s of types chute cannot evaluate never match (the "
                 "first: %s)", sk.n, sk.n == 1 ? "" : "s", sk.first + strlen("chute.rules: "));
    lua_pushcclosure(L, l_route, 1);
    return 1;
}

/* chute.rules: rules_build, its errors placed at the line of the rule
 * they name ("chute.rules: rule 3 ...") when the source shows it, else at
 * the call's. rules_build's own luaL_error calls have no position (their
 * caller is this C function). */
int
script_l_rules(lua_State *L)
{
    int n = lua_gettop(L);
    lua_pushcfunction(L, rules_build);
    lua_insert(L, 1);
    if (lua_pcall(L, n, 1, 0) == LUA_OK)
        return 1;
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL || script_has_position(msg))
        return lua_error(L);
    char path[32] = "", where[512];
    unsigned rule = 0;
    if (sscanf(msg, "chute.rules: rule %u", &rule) == 1 && rule > 0)
        snprintf(path, sizeof(path), "#%u", rule);
    script_key_where(L, 1, "rules", NULL, path, where, sizeof(where));
    lua_pushstring(L, where);
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
}

void
script_rules_open(struct script *s)
{
    luaL_newmetatable(s->L, "chute.rules");
    lua_pushcfunction(s->L, l_gc);
    lua_setfield(s->L, -2, "__gc");
    lua_pushboolean(s->L, 0);
    lua_setfield(s->L, -2, "__metatable");
    lua_pop(s->L, 1);
}
