#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "flow/process.h"
#include "rules/rules.h"
#include "script/script_int.h"

/* chute.rules { {TYPE, VALUE, POLICY [, "no-resolve"]}, ..., {"FINAL", POLICY} }
 * compiles a Surge/Clash-style rule list into a route function. Domain and
 * CIDR rules are fused into one C set each, tagged with their index, so one
 * lookup gives the first of them that matches (the smallest tag); the other
 * rules (ports, sources, networks, processes, regexes, RULE-SET, AND/OR/NOT
 * and Lua functions) are checked in order only up to that index. First
 * match wins, as in Surge and Clash. */

enum cond_type {
    C_DOMAIN, C_SUFFIX, C_KEYWORD, C_CIDR, C_SRC_CIDR, C_DST_PORT, C_SRC_PORT, C_NETWORK,
    C_PROC_NAME, C_PROC_PATH, C_REGEX, C_RULESET, C_FUNC, C_AND, C_OR, C_NOT, C_FINAL,
};

struct cond {
    enum cond_type type;
    char *text;              /* DOMAIN*, PROCESS-*, NETWORK: the value, lowercased for names */
    int family;              /* CIDRs */
    uint8_t addr[16];
    unsigned prefix;
    uint16_t lo, hi;         /* ports */
    struct rules_regexes *re;
    int ref;                 /* RULE-SET, FUNC: a registry reference */
    struct cond *sub;        /* AND/OR/NOT */
    size_t nsub;
};

struct rule {
    struct cond c;
    int policy;              /* -1 for a Lua function: it names its own */
    char desc[48];           /* "3 DOMAIN-SUFFIX,example.com" for chute route and the log */
};

struct compiled {
    struct rule *rules;
    size_t n;
    struct rules_domains *domains;  /* DOMAIN, DOMAIN-SUFFIX, DOMAIN-KEYWORD rules, by index */
    struct rules_cidrs *cidrs;      /* IP-CIDR rules */
    uint8_t *linear;                /* rules not in the two sets: checked one by one */
};

static const struct {
    const char *name;
    enum cond_type type;
} types[] = {
    {"DOMAIN", C_DOMAIN},        {"DOMAIN-SUFFIX", C_SUFFIX},   {"DOMAIN-KEYWORD", C_KEYWORD},
    {"IP-CIDR", C_CIDR},         {"IP-CIDR6", C_CIDR},          {"SRC-IP", C_SRC_CIDR},
    {"SRC-IP-CIDR", C_SRC_CIDR}, {"DST-PORT", C_DST_PORT},      {"DEST-PORT", C_DST_PORT},
    {"SRC-PORT", C_SRC_PORT},    {"NETWORK", C_NETWORK},        {"PROTOCOL", C_NETWORK},
    {"PROCESS-NAME", C_PROC_NAME}, {"PROCESS-PATH", C_PROC_PATH}, {"DOMAIN-REGEX", C_REGEX},
    {"RULE-SET", C_RULESET},     {"AND", C_AND},                {"OR", C_OR},
    {"NOT", C_NOT},              {"FINAL", C_FINAL},            {"MATCH", C_FINAL},
};

static void
cond_fini(lua_State *L, struct cond *c)
{
    free(c->text);
    rules_regexes_free(c->re);
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
    for (size_t i = 0; i < p->n; i++)
        cond_fini(L, &p->rules[i].c);
    free(p->rules);
    free(p->linear);
    rules_domains_free(p->domains);
    rules_cidrs_free(p->cidrs);
    memset(p, 0, sizeof(*p));
    return 0;
}

static int
parse_port(const char *s, uint16_t *lo, uint16_t *hi)
{
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (end == s)
        return -1;
    if (*end == '-') {
        const char *t = end + 1;
        b = strtol(t, &end, 10);
        if (end == t)
            return -1;
    }
    if (*end != '\0' || a < 0 || b > 65535 || a > b)
        return -1;
    *lo = (uint16_t)a;
    *hi = (uint16_t)b;
    return 0;
}

/* Parses the rule at the top of the stack ({TYPE, VALUE, ...} or a
 * function) into |c|. |want_policy|: the policy index within the table.
 * Raises a Lua error naming |where| (the rule's position) on bad input. */
static void parse_cond(lua_State *L, struct cond *c, const char *where);

static void
parse_subs(lua_State *L, struct cond *c, const char *where)
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
        parse_cond(L, &c->sub[i], sw);
        lua_pop(L, 1);
    }
}

static void
parse_cond(lua_State *L, struct cond *c, const char *where)
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
    size_t k = 0;
    while (k < sizeof(types) / sizeof(types[0]) && strcasecmp(types[k].name, t) != 0)
        k++;
    if (k == sizeof(types) / sizeof(types[0]))
        luaL_error(L, "%s: unknown rule type '%s'", where, t);
    c->type = types[k].type;
    lua_pop(L, 1);
    if (c->type == C_FINAL)
        return;
    lua_rawgeti(L, -1, 2);
    if (c->type == C_AND || c->type == C_OR || c->type == C_NOT) {
        parse_subs(L, c, where);
    } else if (c->type == C_RULESET) {
        luaL_checkudata(L, -1, "chute.ruleset");
        lua_pushvalue(L, -1);
        c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    } else {
        const char *v = lua_tostring(L, -1);
        struct ip_cidr cidr;
        char err[160];
        if (v == NULL || *v == '\0')
            luaL_error(L, "%s: %s needs a value", where, types[k].name);
        c->text = strdup(v);
        if (c->text == NULL)
            luaL_error(L, "out of memory");
        switch (c->type) {
        case C_DOMAIN:
        case C_SUFFIX:
        case C_KEYWORD:
            for (char *p = c->text; *p; p++)
                *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
            break;
        case C_CIDR:
        case C_SRC_CIDR:
            if (ip_cidr_parse(v, &cidr) != 0)
                luaL_error(L, "%s: '%s' is not IP/PREFIX", where, v);
            c->family = cidr.family;
            memcpy(c->addr, cidr.addr, 16);
            c->prefix = cidr.prefix;
            break;
        case C_DST_PORT:
        case C_SRC_PORT:
            if (parse_port(v, &c->lo, &c->hi) != 0)
                luaL_error(L, "%s: '%s' is not a port or a range (\"443\", \"8000-9000\")", where, v);
            break;
        case C_NETWORK:
            if (strcasecmp(v, "tcp") != 0 && strcasecmp(v, "udp") != 0)
                luaL_error(L, "%s: NETWORK is tcp or udp, not '%s'", where, v);
            break;
        case C_REGEX:
            c->re = rules_regexes_new();
            if (c->re == NULL || rules_regexes_add(c->re, v, 0, err, sizeof(err)) != 0)
                luaL_error(L, "%s: bad regex '%s': %s", where, v, err);
            break;
        default:
            break;
        }
    }
    lua_pop(L, 1);
}

static int
suffix_match(const char *host, size_t n, const char *suf)
{
    size_t m = strlen(suf);
    return n >= m && strncasecmp(host + n - m, suf, m) == 0 && (n == m || host[n - m - 1] == '.');
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

static int
src_addr(const struct flow *f, const uint8_t **a, uint16_t *port)
{
    if (f->src.ss_family == AF_INET) {
        *a = (const uint8_t *)&((const struct sockaddr_in *)&f->src)->sin_addr;
        *port = ntohs(((const struct sockaddr_in *)&f->src)->sin_port);
    } else if (f->src.ss_family == AF_INET6) {
        *a = (const uint8_t *)&((const struct sockaddr_in6 *)&f->src)->sin6_addr;
        *port = ntohs(((const struct sockaddr_in6 *)&f->src)->sin6_port);
    } else {
        return -1;
    }
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
        return h && strlen(c->text) == n && strncasecmp(h, c->text, n) == 0;
    case C_SUFFIX:
        h = host_of(f, &n);
        return h && suffix_match(h, n, c->text);
    case C_KEYWORD:
        h = host_of(f, &n);
        return h && strcasestr(h, c->text) != NULL;
    case C_REGEX:
        h = host_of(f, &n);
        return h && rules_regexes_match(c->re, h, n, &tag);
    case C_CIDR:
        return (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6) &&
               cidr_match(c, f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6, f->dst.ip);
    case C_SRC_CIDR:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        return src_addr(f, &a, &port) == 0 && cidr_match(c, f->src.ss_family, a);
    case C_DST_PORT:
        return f->dst.port >= c->lo && f->dst.port <= c->hi;
    case C_SRC_PORT:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        return src_addr(f, &a, &port) == 0 && port >= c->lo && port <= c->hi;
    case C_NETWORK:
        return (f->network == FLOW_UDP) == (strcasecmp(c->text, "udp") == 0);
    case C_PROC_NAME:
    case C_PROC_PATH:
        f->_reads |= FLOW_READ_UNCACHEABLE;
        p = script_flow_process(f);
        return p && p->pid && strcmp(c->type == C_PROC_NAME ? p->name : p->path, c->text) == 0;
    case C_RULESET:
        lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
        n = (size_t)script_ruleset_match(L, lua_gettop(L), f, &tag);
        lua_pop(L, 1);
        return (int)n;
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
    if ((f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6) &&
        rules_cidrs_match(p->cidrs, f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6, f->dst.ip,
                          &tag) && tag < first)
        first = tag;
    for (size_t i = 0; i < p->n && i < first; i++) {
        const char *fn_policy = NULL;
        if (!p->linear[i] || !cond_match(L, &p->rules[i].c, f, &fn_policy))
            continue;
        if (p->rules[i].c.type == C_RULESET) {
            char line[sizeof(f->why)]; /* the list's own "file:line", from its match */
            memcpy(line, f->why, sizeof(line));
            snprintf(f->why, sizeof(f->why), "rule %u %.36s", (unsigned)(i + 1) & 0xffff, line);
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

int
script_l_rules(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t n = lua_rawlen(L, 1);
    struct compiled *p = lua_newuserdatauv(L, sizeof(*p), 0);
    memset(p, 0, sizeof(*p));
    luaL_setmetatable(L, "chute.rules");
    p->rules = calloc(n ? n : 1, sizeof(*p->rules));
    p->linear = calloc(n ? n : 1, 1);
    p->domains = rules_domains_new();
    p->cidrs = rules_cidrs_new();
    if (!p->rules || !p->linear || !p->domains || !p->cidrs)
        return luaL_error(L, "out of memory");
    for (size_t i = 0; i < n; i++) {
        struct rule *r = &p->rules[i];
        char where[128];
        snprintf(where, sizeof(where), "chute.rules: rule %zu", i + 1);
        lua_rawgeti(L, 1, (lua_Integer)i + 1);
        parse_cond(L, &r->c, where);
        p->n = i + 1;
        if (r->c.type == C_FINAL && i + 1 != n)
            return luaL_error(L, "%s: FINAL must be the last rule", where);
        r->policy = -1;
        if (r->c.type != C_FUNC) {
            lua_rawgeti(L, -1, r->c.type == C_FINAL ? 2 : 3);
            const char *pol = lua_tostring(L, -1);
            r->policy = pol ? script_policy_lookup(script_of(L), pol) : -1;
            if (r->policy < 0)
                return luaL_error(L, "%s: unknown policy '%s'", where, pol ? pol : "(none)");
            lua_pop(L, 1);
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            snprintf(r->desc, sizeof(r->desc), "rule %zu %s%s%s", i + 1, lua_tostring(L, -2),
                     r->c.text ? "," : "", r->c.text ? r->c.text : "");
            lua_pop(L, 2);
        } else {
            snprintf(r->desc, sizeof(r->desc), "rule %zu function", i + 1);
        }
        lua_pop(L, 1);
        uint32_t tag = (uint32_t)i;
        int rc = 0;
        if (r->c.type == C_DOMAIN)
            rc = rules_domains_add(p->domains, RULES_DOMAIN_EXACT, r->c.text, strlen(r->c.text), tag);
        else if (r->c.type == C_SUFFIX)
            rc = rules_domains_add(p->domains, RULES_DOMAIN_SUFFIX, r->c.text, strlen(r->c.text), tag);
        else if (r->c.type == C_KEYWORD)
            rc = rules_domains_add(p->domains, RULES_DOMAIN_KEYWORD, r->c.text, strlen(r->c.text), tag);
        else if (r->c.type == C_CIDR)
            rc = rules_cidrs_add(p->cidrs, r->c.family, r->c.addr, r->c.prefix, tag);
        else
            p->linear[i] = 1;
        if (rc != 0)
            return luaL_error(L, "%s: '%s' is not a usable name", where, r->c.text);
    }
    if (rules_domains_build(p->domains) != 0 || rules_cidrs_build(p->cidrs) != 0)
        return luaL_error(L, "out of memory");
    lua_pushcclosure(L, l_route, 1);
    return 1;
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
