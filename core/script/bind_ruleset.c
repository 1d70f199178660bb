#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "flow/process.h"
#include "rules/list.h"
#include "rules/rules.h"
#include "log/log.h"
#include "script/geo.h"
#include "script/script_int.h"

/* chute.ruleset(path [, {format = ..., skip_invalid = bool, strict = bool}]): a rule list
 * from the bundle, parsed and compiled into C matchers once, at load.
 * rs:match(flow) tells whether any of its entries matches the flow, and on
 * which line. Each entry's tag is its line, so the first line wins. */

#define MAX_LIST_BYTES (256u << 20)

struct ruleset {
    struct rules_domains *domains; /* DOMAIN, DOMAIN-SUFFIX, DOMAIN-KEYWORD */
    struct rules_domains *subs;    /* Clash ".a.com": matched on the host minus its first label */
    struct rules_cidrs *dst, *src;
    struct rules_cidrs *dst_res;   /* the IP-CIDR lines without no-resolve: a named flow's
                                    * resolved addresses are matched against these */
    size_t nres;                   /* their count: a named flow needs resolving */
    struct rules_ports *dport, *sport;
    struct rules_regexes *regexes; /* DOMAIN-REGEX */
    struct rules_wildcards *wild;  /* DOMAIN-WILDCARD, Clash "*.a.com" */
    struct rules_regexes *proc_re; /* PROCESS-NAME-REGEX */
    struct rules_ports *inport;    /* IN-PORT */
    uint32_t in_type_tag[SCRIPT_IN_SLOTS]; /* IN-TYPE, by script_in_type_of: the line, 0 if none */
    int has_in_type;
    uint32_t network_tag[2];       /* NETWORK,tcp / udp: the line, 0 if none */
    char **procs;                  /* PROCESS-NAME / -PATH values, with their lines */
    uint32_t *proc_tags;
    uint8_t *proc_is_path;
    size_t nprocs;
    size_t nprocs_re;
    size_t nsrc;                   /* SRC-IP / SRC-PORT entries: matching reads the source */
    size_t nnames;                 /* entries matched against a host name */
    struct geo_entry *geo;         /* GEOIP, SRC-GEOIP, IP-ASN, SRC-IP-ASN, GEOSITE lines */
    size_t ngeo;
    size_t count;
    char *name;                    /* the path as the bundle gave it */
    const char *err;               /* set by the entry callback on failure */
    char errbuf[200];
};

/* A geo line of a list (script/geo.c matches it). */
struct geo_entry {
    enum rules_type type;
    uint32_t tag;
    int no_resolve;
    char code[24];                 /* GEOIP: upper-cased */
    uint32_t asn;
    struct script_geo_site *site;  /* GEOSITE: the script's */
};

static void
ruleset_fini(struct ruleset *rs)
{
    rules_domains_free(rs->domains);
    rules_domains_free(rs->subs);
    rules_cidrs_free(rs->dst);
    rules_cidrs_free(rs->dst_res);
    rules_cidrs_free(rs->src);
    rules_ports_free(rs->dport);
    rules_ports_free(rs->sport);
    rules_regexes_free(rs->regexes);
    rules_wildcards_free(rs->wild);
    rules_regexes_free(rs->proc_re);
    rules_ports_free(rs->inport);
    for (size_t i = 0; i < rs->nprocs; i++)
        free(rs->procs[i]);
    free(rs->procs);
    free(rs->proc_tags);
    free(rs->proc_is_path);
    free(rs->geo);
    free(rs->name);
    memset(rs, 0, sizeof(*rs));
}

static int
add_proc(struct ruleset *rs, struct mem_slice v, uint32_t tag, int is_path)
{
    char **p = realloc(rs->procs, (rs->nprocs + 1) * sizeof(*p));
    if (p != NULL)
        rs->procs = p;
    uint32_t *t = realloc(rs->proc_tags, (rs->nprocs + 1) * sizeof(*t));
    if (t != NULL)
        rs->proc_tags = t;
    uint8_t *ip = realloc(rs->proc_is_path, rs->nprocs + 1);
    if (ip != NULL)
        rs->proc_is_path = ip;
    char *s = strndup(v.ptr, v.len);
    if (p == NULL || t == NULL || ip == NULL || s == NULL) {
        free(s);
        return -1;
    }
    rs->procs[rs->nprocs] = s;
    rs->proc_tags[rs->nprocs] = tag;
    rs->proc_is_path[rs->nprocs++] = (uint8_t)is_path;
    return 0;
}

struct load_ctx {
    struct script *s;
    struct ruleset *rs;
    enum rules_format fmt;
    int surge;          /* a Surge list: its DOMAIN-WILDCARD takes [...] classes */
    int strict;         /* strict = true: a type chute cannot evaluate is an error */
    size_t unsupported; /* entries of such types left out */
    unsigned first_line;
    char first_type[64];
};

/* IN-TYPE names as mihomo spells them (its C.Type), to chute's inbounds.
 * mihomo's HTTP listener makes a CONNECT an HTTPS inbound and a plain
 * forwarded request an HTTP one (listener/http/proxy.go: inbound.NewHTTPS for
 * CONNECT, inbound.NewHTTP otherwise), and so does chute's. The types
 * chute has no listener for are valid and never match. */
int
script_in_type_of(const struct flow *f)
{
    if (f->inbound == FLOW_IN_HTTP && f->http_plain)
        return SCRIPT_IN_HTTP_PLAIN;
    return (int)f->inbound;
}

int
script_in_types(struct mem_slice v, uint8_t *mask)
{
    static const char *const never[] = {"SOCKS4", "SHADOWSOCKS", "VMESS", "VLESS", "REDIR",
                                        "TPROXY", "TROJAN", "TUNNEL", "TUIC", "HYSTERIA2",
                                        "ANYTLS", "INNER", "MIXED"};
    const char *p = v.ptr, *end = v.ptr + v.len;
    *mask = 0;
    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        struct mem_slice t = mem_slice(p, (size_t)((slash ? slash : end) - p));
        int in = -1, known = 0;
        if (mem_slice_ieq(t, "SOCKS") || mem_slice_ieq(t, "SOCKS5"))
            in = FLOW_IN_SOCKS;
        else if (mem_slice_ieq(t, "HTTPS"))
            in = FLOW_IN_HTTP;
        else if (mem_slice_ieq(t, "HTTP"))
            in = SCRIPT_IN_HTTP_PLAIN;
        else if (mem_slice_ieq(t, "TUN"))
            in = FLOW_IN_TUN;
        for (size_t i = 0; in < 0 && i < sizeof(never) / sizeof(never[0]); i++)
            known |= mem_slice_ieq(t, never[i]);
        if (in < 0 && !known)
            return -1;
        if (in >= 0)
            *mask |= (uint8_t)(1u << in);
        if (slash == NULL)
            return 0;
        p = slash + 1;
    }
}

/* A geo line is matched when its file is there (GEOIP,LAN needs none). */
static int
geo_usable(struct script *s, const struct rules_entry *e)
{
    if ((e->type == RULES_T_GEOIP || e->type == RULES_T_SRC_GEOIP) && e->value.len == 3 &&
        strncasecmp(e->value.ptr, "LAN", 3) == 0)
        return 1;
    return script_geo_available(s, e->type == RULES_T_GEOSITE     ? SCRIPT_GEO_SITE
                                   : e->type == RULES_T_GEOIP ||
                                           e->type == RULES_T_SRC_GEOIP
                                       ? SCRIPT_GEO_MMDB
                                       : SCRIPT_GEO_ASN);
}

static const char *
geo_file_hint(enum rules_type t)
{
    switch (t) {
    case RULES_T_GEOIP:
    case RULES_T_SRC_GEOIP:
        return " without geo.mmdb";
    case RULES_T_IP_ASN:
    case RULES_T_SRC_IP_ASN:
        return " without geo.asn";
    case RULES_T_GEOSITE:
        return " without geo.geosite";
    default:
        return "";
    }
}

static int
add_geo(struct load_ctx *ctx, const struct rules_entry *e)
{
    struct ruleset *rs = ctx->rs;
    struct geo_entry *v = realloc(rs->geo, (rs->ngeo + 1) * sizeof(*v));
    if (v == NULL)
        return -1;
    rs->geo = v;
    struct geo_entry *g = &v[rs->ngeo];
    memset(g, 0, sizeof(*g));
    g->type = e->type;
    g->tag = e->line;
    g->no_resolve = (e->options & RULES_OPT_NO_RESOLVE) != 0;
    char where[160];
    snprintf(where, sizeof(where), "%.120s:%u", rs->name, e->line);
    if (e->type == RULES_T_GEOSITE) {
        g->site = script_geo_site(ctx->s, e->value, where, rs->errbuf, sizeof(rs->errbuf));
        if (g->site == NULL)
            return -1;
        rs->nnames++;
    } else if (e->type == RULES_T_GEOIP || e->type == RULES_T_SRC_GEOIP) {
        for (size_t i = 0; i < e->value.len && i + 1 < sizeof(g->code); i++)
            g->code[i] = (char)(e->value.ptr[i] >= 'a' && e->value.ptr[i] <= 'z'
                                    ? e->value.ptr[i] - 32
                                    : e->value.ptr[i]);
        if (strcmp(g->code, "LAN") != 0)
            script_geo_need(ctx->s, SCRIPT_GEO_MMDB, where);
    } else {
        for (size_t i = 0; i < e->value.len; i++) /* digits only: the parser checked */
            g->asn = g->asn * 10 + (uint32_t)(e->value.ptr[i] - '0');
        script_geo_need(ctx->s, SCRIPT_GEO_ASN, where);
    }
    if (e->type == RULES_T_SRC_GEOIP || e->type == RULES_T_SRC_IP_ASN)
        rs->nsrc++;
    else if (e->type != RULES_T_GEOSITE && !g->no_resolve)
        rs->nres++;
    rs->ngeo++;
    return 0;
}

/* The geo lines before |*best| that match |f|; with |resolving|, the
 * destination lines that resolve a name (asked only when nothing else
 * matched, as for IP-CIDR lines). */
static void
match_geo(lua_State *L, struct ruleset *rs, struct flow *f, const char *h, size_t n,
          int resolving, uint32_t *best)
{
    struct script *s = script_of(L);
    for (size_t i = 0; i < rs->ngeo; i++) {
        struct geo_entry *g = &rs->geo[i];
        int src = g->type == RULES_T_SRC_GEOIP || g->type == RULES_T_SRC_IP_ASN, hit;
        if (g->tag >= *best || (resolving && (src || g->no_resolve || g->site != NULL)))
            continue;
        if (g->site != NULL)
            hit = h != NULL && script_geo_site_match(g->site, h, n);
        else if (g->type == RULES_T_GEOIP || g->type == RULES_T_SRC_GEOIP)
            hit = script_geo_country(s, f, g->code, src, !resolving);
        else
            hit = script_geo_asn(s, f, g->asn, src, !resolving);
        if (hit)
            *best = g->tag;
    }
}

static int
on_entry(void *arg, const struct rules_entry *e)
{
    struct load_ctx *ctx = arg;
    struct ruleset *rs = ctx->rs;
    uint32_t tag = e->line;
    char re[1024];
    uint8_t mask;
    int rc = 0;
    switch (e->type) {
    case RULES_T_DOMAIN:
        rc = rules_domains_add(rs->domains, RULES_DOMAIN_EXACT, e->value.ptr, e->value.len, tag);
        break;
    case RULES_T_DOMAIN_SUFFIX:
        rc = rules_domains_add(rs->domains, RULES_DOMAIN_SUFFIX, e->value.ptr, e->value.len, tag);
        break;
    case RULES_T_DOMAIN_KEYWORD:
        rc = rules_domains_add(rs->domains, RULES_DOMAIN_KEYWORD, e->value.ptr, e->value.len, tag);
        break;
    case RULES_T_DOMAIN_SUBS:
        rc = rules_domains_add(rs->subs, RULES_DOMAIN_SUFFIX, e->value.ptr, e->value.len, tag);
        break;
    case RULES_T_DOMAIN_REGEX:
        snprintf(re, sizeof(re), "%.*s", (int)e->value.len, e->value.ptr);
        rc = rules_regexes_add(rs->regexes, re, tag, rs->errbuf, sizeof(rs->errbuf));
        break;
    case RULES_T_PROCESS_NAME_REGEX:
        snprintf(re, sizeof(re), "%.*s", (int)e->value.len, e->value.ptr);
        rc = rules_regexes_add(rs->proc_re, re, tag, rs->errbuf, sizeof(rs->errbuf));
        break;
    case RULES_T_DOMAIN_WILDCARD:
        /* A Clash domain list's "*.a.com" is one label; a DOMAIN-WILDCARD
         * rule's '*' crosses dots, in Surge and in mihomo alike. */
        rc = rules_wildcards_add(rs->wild,
                                 ctx->fmt == RULES_FORMAT_CLASH_DOMAIN ? RULES_WILD_LABEL
                                 : ctx->surge                          ? RULES_WILD_SURGE
                                                                       : RULES_WILD_GLOB,
                                 e->value.ptr, e->value.len, tag);
        break;
    case RULES_T_IN_PORT:
        rc = rules_ports_add(rs->inport, e->port_lo, e->port_hi, tag);
        rs->nsrc++; /* read from the flow's local address: not for the cache */
        break;
    case RULES_T_IN_TYPE:
        if (script_in_types(e->value, &mask) != 0) {
            snprintf(rs->errbuf, sizeof(rs->errbuf),
                     "unknown inbound type '%.*s' (SOCKS5, HTTP, HTTPS, TUN, ...)",
                     (int)(e->value.len > 64 ? 64 : e->value.len), e->value.ptr);
            rc = -1;
        }
        for (int i = 0; i < SCRIPT_IN_SLOTS; i++)
            if ((mask & (1u << i)) && rs->in_type_tag[i] == 0)
                rs->in_type_tag[i] = tag;
        rs->has_in_type = 1;
        break;
    case RULES_T_IP_CIDR:
        rc = rules_cidrs_add(rs->dst, e->family, e->addr, e->prefix, tag);
        if (rc == 0 && !(e->options & RULES_OPT_NO_RESOLVE)) {
            rc = rules_cidrs_add(rs->dst_res, e->family, e->addr, e->prefix, tag);
            rs->nres++;
        }
        break;
    case RULES_T_SRC_IP_CIDR:
        rc = rules_cidrs_add(rs->src, e->family, e->addr, e->prefix, tag);
        rs->nsrc++;
        break;
    case RULES_T_DST_PORT:
        rc = rules_ports_add(rs->dport, e->port_lo, e->port_hi, tag);
        break;
    case RULES_T_SRC_PORT:
        rc = rules_ports_add(rs->sport, e->port_lo, e->port_hi, tag);
        rs->nsrc++;
        break;
    case RULES_T_NETWORK: {
        int udp = e->value.len == 3 && strncasecmp(e->value.ptr, "udp", 3) == 0;
        if (rs->network_tag[udp] == 0)
            rs->network_tag[udp] = tag;
        break;
    }
    case RULES_T_PROCESS_NAME:
    case RULES_T_PROCESS_PATH:
        rc = add_proc(rs, e->value, tag, e->type == RULES_T_PROCESS_PATH);
        break;
    case RULES_T_GEOIP:
    case RULES_T_SRC_GEOIP:
    case RULES_T_IP_ASN:
    case RULES_T_SRC_IP_ASN:
    case RULES_T_GEOSITE:
        if (ctx->s == NULL) /* a fetched list checked off the loop: the load decides */
            break;
        if (geo_usable(ctx->s, e)) {
            rc = add_geo(ctx, e);
            break;
        }
        __attribute__((fallthrough)); /* no file for it: left out as below */
    default: /* types chute cannot evaluate */
        if (!ctx->strict) {
            if (ctx->unsupported++ == 0) {
                struct mem_slice t = e->type == RULES_T_UNSUPPORTED
                                         ? e->value
                                         : mem_slice(rules_type_name(e->type),
                                                     strlen(rules_type_name(e->type)));
                ctx->first_line = e->line;
                snprintf(ctx->first_type, sizeof(ctx->first_type), "%.*s%s",
                         (int)(t.len < 31 ? t.len : 31), t.ptr, geo_file_hint(e->type));
            }
            return 0;
        }
        snprintf(rs->errbuf, sizeof(rs->errbuf), "line %u: chute cannot evaluate %s rules "
                 "(strict = true; without it they are left out with a warning)", e->line,
                 e->type == RULES_T_UNSUPPORTED ? "these" : rules_type_name(e->type));
        rs->err = rs->errbuf;
        return 1;
    }
    if (rc != 0) {
        if (rs->errbuf[0] == '\0')
            snprintf(rs->errbuf, sizeof(rs->errbuf), "line %u: %s '%.*s' cannot be used",
                     e->line, rules_type_name(e->type), (int)e->value.len, e->value.ptr);
        else {
            char tmp[sizeof(rs->errbuf) + 16];
            snprintf(tmp, sizeof(tmp), "line %u: %s", e->line, rs->errbuf);
            snprintf(rs->errbuf, sizeof(rs->errbuf), "%.*s", (int)sizeof(rs->errbuf) - 1, tmp);
        }
        rs->err = rs->errbuf;
        return 1;
    }
    rs->count++;
    if (e->type <= RULES_T_DOMAIN_SUBS)
        rs->nnames++;
    if (e->type == RULES_T_PROCESS_NAME_REGEX)
        rs->nprocs_re++;
    return 0;
}

/* Makes |rs| an empty ruleset named |name|: 0, or -1 when out of memory
 * (ruleset_fini frees what was made). */
static int
ruleset_init(struct ruleset *rs, const char *name)
{
    memset(rs, 0, sizeof(*rs));
    rs->name = strdup(name);
    rs->domains = rules_domains_new();
    rs->subs = rules_domains_new();
    rs->dst = rules_cidrs_new();
    rs->dst_res = rules_cidrs_new();
    rs->src = rules_cidrs_new();
    rs->dport = rules_ports_new();
    rs->sport = rules_ports_new();
    rs->regexes = rules_regexes_new();
    rs->wild = rules_wildcards_new();
    rs->proc_re = rules_regexes_new();
    rs->inport = rules_ports_new();
    if (!rs->name || !rs->domains || !rs->subs || !rs->dst || !rs->dst_res || !rs->src ||
        !rs->dport || !rs->sport || !rs->regexes || !rs->wild || !rs->proc_re || !rs->inport)
        return -1;
    return 0;
}

/* A new empty ruleset userdata named |name| on the stack (raises when out
 * of memory: nothing is held then). */
static struct ruleset *
ruleset_push(lua_State *L, const char *name)
{
    struct ruleset *rs = lua_newuserdatauv(L, sizeof(*rs), 0);
    memset(rs, 0, sizeof(*rs));
    luaL_setmetatable(L, "chute.ruleset");
    if (ruleset_init(rs, name) != 0)
        luaL_error(L, "chute.ruleset: out of memory");
    return rs;
}

/* Parses |buf| as |fmt| into |rs| and builds its sets; logs what was left
 * out. Never raises (the caller holds |buf|): -1 with |err| naming the
 * list and the line. */
static int
ruleset_fill(struct script *s, struct ruleset *rs, const char *buf, size_t len, int fmt, int skip,
             int strict, char *err, size_t errlen)
{
    const char *name = rs->name;
    if (fmt == RULES_FORMAT_AUTO && rules_list_ambiguous(buf, len)) {
        snprintf(err, errlen, "%s: a domain list with '.name' lines: Surge's DOMAIN-SET reads "
                 "'.a.com' as a.com and below, a Clash domain list as below a.com only; say "
                 "which with format = \"domain-set\" or \"domain\"", name);
        return -1;
    }
    if (fmt == RULES_FORMAT_AUTO)
        fmt = rules_list_detect(buf, len);
    struct load_ctx ctx = {.s = s, .rs = rs, .fmt = (enum rules_format)fmt,
                           .surge = fmt == RULES_FORMAT_SURGE, .strict = strict};
    struct rules_list_error le = {0};
    size_t skipped = 0;
    int rc = rules_list_parse(buf, len, (enum rules_format)fmt, skip, on_entry, &ctx, &skipped,
                              &le);
    if (rc == RULES_LIST_ERR_FORMAT) {
        snprintf(err, errlen, "%s: cannot tell the format (give format = ...)", name);
        return -1;
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s:%d: %s", name, (int)le.line, le.msg);
        return -1;
    }
    if (rc > 0) {
        snprintf(err, errlen, "%s: %s", name, rs->err);
        return -1;
    }
    if (rules_domains_build(rs->domains) || rules_domains_build(rs->subs) ||
        rules_cidrs_build(rs->dst) || rules_cidrs_build(rs->dst_res) ||
        rules_cidrs_build(rs->src) || rules_ports_build(rs->dport) ||
        rules_ports_build(rs->sport) || rules_ports_build(rs->inport)) {
        snprintf(err, errlen, "%s: out of memory", name);
        return -1;
    }
    if (s != NULL) /* for memory_limit's check of the rule sets' share */
        s->rules_bytes += rules_domains_memory(rs->domains) + rules_domains_memory(rs->subs) +
                          rules_cidrs_memory(rs->dst) + rules_cidrs_memory(rs->dst_res) +
                          rules_cidrs_memory(rs->src);
    if (skipped > 0)
        LOG_WARN("chute.ruleset: %s: %zu invalid lines left out (the first: line %u: %s)", name,
                 skipped, le.line, le.msg);
    if (ctx.unsupported > 0)
        LOG_WARN("chute.ruleset: %s: %zu rule%s of types chute cannot evaluate left out (the "
                 "first: %s:%u, %s; strict = true makes this an error)", name, ctx.unsupported,
                 ctx.unsupported == 1 ? "" : "s", name, ctx.first_line, ctx.first_type);
    return 0;
}

int
script_l_ruleset(lua_State *L)
{
    struct script *s = script_of(L);
    if (lua_type(L, 1) == LUA_TTABLE)
        return script_l_ruleset_remote(L); /* chute.ruleset { url = ... } (bind_remote.c) */
    const char *rel = luaL_checkstring(L, 1);
    const char *fmt_name = "auto";
    int skip = 0, strict = 0;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(k, "format") == 0 && lua_type(L, -1) == LUA_TSTRING)
                fmt_name = lua_tostring(L, -1);
            else if (strcmp(k, "skip_invalid") == 0 && lua_type(L, -1) == LUA_TBOOLEAN)
                skip = lua_toboolean(L, -1);
            else if (strcmp(k, "strict") == 0 && lua_type(L, -1) == LUA_TBOOLEAN)
                strict = lua_toboolean(L, -1);
            else
                return luaL_error(L, "chute.ruleset: unknown or mistyped option '%s' "
                                     "(format = \"auto\"|\"surge\"|\"domain-set\"|\"classical\"|"
                                     "\"domain\"|\"ipcidr\", skip_invalid = boolean, "
                                     "strict = boolean)", k);
            lua_pop(L, 1);
        }
    }
    int fmt = rules_format_parse(fmt_name);
    if (fmt < 0)
        return luaL_error(L, "chute.ruleset: unknown format '%s'", fmt_name);
    struct ruleset *rs = ruleset_push(L, rel);
    size_t len = 0;
    char why[4200];
    /* A regular file inside the bundle, opened without blocking (file.c). */
    char *buf = script_bundle_read(s, rel, MAX_LIST_BYTES, &len, why, sizeof(why));
    if (buf == NULL)
        return luaL_error(L, "chute.ruleset: %s", why);
    char err[300];
    int rc = ruleset_fill(s, rs, buf, len, fmt, skip, strict, err, sizeof(err));
    free(buf); /* before an error unwinds */
    if (rc != 0)
        return luaL_error(L, "chute.ruleset: %s", err);
    return 1;
}

int
script_ruleset_push_text(lua_State *L, const char *name, const char *buf, size_t len, int fmt,
                         int skip, int strict, char *err, size_t errlen)
{
    struct ruleset *rs = ruleset_push(L, name);
    if (buf == NULL)
        return 0;
    if (ruleset_fill(script_of(L), rs, buf, len, fmt, skip, strict, err, errlen) == 0)
        return 0;
    ruleset_fini(rs);
    if (ruleset_init(rs, name) != 0)
        luaL_error(L, "chute.ruleset: out of memory");
    return -1;
}

int
script_ruleset_check(const char *name, const char *buf, size_t len, int fmt, int skip, int strict,
                     size_t *count, char *err, size_t errlen)
{
    struct ruleset rs;
    int rc = ruleset_init(&rs, name);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    else
        rc = ruleset_fill(NULL, &rs, buf, len, fmt, skip, strict, err, errlen);
    *count = rs.count;
    ruleset_fini(&rs);
    return rc;
}

/* Surge's internal rule sets (manual, Rule Set: "Internal Rule Sets"), as
 * lists: LAN resolves a name for its CIDRs, as Surge says it does; SYSTEM
 * is Apple's own services, whose USER-AGENT lines chute cannot match. */
static const char lan_list[] = "DOMAIN-SUFFIX,local\n"
                               "IP-CIDR,192.168.0.0/16\n"
                               "IP-CIDR,10.0.0.0/8\n"
                               "IP-CIDR,172.16.0.0/12\n"
                               "IP-CIDR,127.0.0.0/8\n"
                               "IP-CIDR,100.64.0.0/10\n"
                               "IP-CIDR6,fe80::/10\n";
static const char system_list[] = "DOMAIN,api.smoot.apple.com\n"
                                  "DOMAIN,captive.apple.com\n"
                                  "DOMAIN,configuration.apple.com\n"
                                  "DOMAIN,guzzoni.apple.com\n"
                                  "DOMAIN,smp-device-content.apple.com\n"
                                  "DOMAIN,xp.apple.com\n"
                                  "DOMAIN-SUFFIX,ess.apple.com\n"
                                  "DOMAIN-SUFFIX,push-apple.com.akadns.net\n"
                                  "DOMAIN-SUFFIX,push.apple.com\n"
                                  "DOMAIN,aod.itunes.apple.com\n"
                                  "DOMAIN,mesu.apple.com\n"
                                  "DOMAIN,api.smoot.apple.cn\n"
                                  "DOMAIN,gs-loc.apple.com\n"
                                  "DOMAIN,mvod.itunes.apple.com\n"
                                  "DOMAIN,streamingaudio.itunes.apple.com\n"
                                  "DOMAIN-SUFFIX,lcdn-locator.apple.com\n"
                                  "DOMAIN-SUFFIX,lcdn-registration.apple.com\n"
                                  "DOMAIN-SUFFIX,ls.apple.com\n"
                                  "PROCESS-NAME,trustd\n";

int
script_ruleset_builtin(lua_State *L, const char *name)
{
    const char *text = strcmp(name, "LAN") == 0      ? lan_list
                       : strcmp(name, "SYSTEM") == 0 ? system_list
                                                     : NULL;
    char err[300];
    if (text == NULL)
        return 0;
    struct ruleset *rs = ruleset_push(L, name);
    if (ruleset_fill(script_of(L), rs, text, strlen(text), RULES_FORMAT_SURGE, 0, 0, err, sizeof(err)) != 0)
        return luaL_error(L, "RULE-SET,%s: %s", name, err);
    return 1;
}

/* Keeps the smaller line. |tag| is read here, after the match call that
 * filled it has run (argument evaluation order is unspecified). */
static void
better(int found, const uint32_t *tag, uint32_t *best)
{
    if (found && *tag < *best)
        *best = *tag;
}

/* Whether |f| matches the ruleset at stack index |idx|; the smallest
 * matching line in |*line|. Notes the line in f->why. */
int
script_ruleset_match(lua_State *L, int idx, struct flow *f, uint32_t *line)
{
    struct ruleset *rs = luaL_checkudata(L, idx, "chute.ruleset");
    uint32_t best = UINT32_MAX, tag;
    const char *h = NULL;
    size_t n = 0;
    if (f->dst.kind == FLOW_ADDR_NAME) {
        h = f->dst.name;
        n = f->dst.name_len;
    } else if (f->sniffed != NULL) {
        h = f->sniffed;
        n = strlen(h);
        f->_reads |= FLOW_READ_UNCACHEABLE;
    } else if (rs->nnames > 0) {
        f->_reads |= FLOW_READ_HOST | FLOW_READ_UNCACHEABLE; /* a TUN flow may sniff one */
    }
    if (h != NULL) {
        better(rules_domains_match(rs->domains, h, n, &tag), &tag, &best);
        const char *dot = memchr(h, '.', n);
        if (dot != NULL)
            better(rules_domains_match(rs->subs, dot + 1, n - (size_t)(dot + 1 - h), &tag), &tag,
                   &best);
        better(rules_regexes_match(rs->regexes, h, n, &tag), &tag, &best);
        better(rules_wildcards_match(rs->wild, h, n, &tag), &tag, &best);
    }
    better(script_cidrs_match_flow(rs->dst, rs->dst_res, f, &tag), &tag, &best);
    if (rs->nsrc > 0 && (f->src.ss_family == AF_INET || f->src.ss_family == AF_INET6)) {
        /* The decision now depends on the source: not for the cache. */
        f->_reads |= FLOW_READ_UNCACHEABLE;
        const void *a = f->src.ss_family == AF_INET
                            ? (const void *)&((const struct sockaddr_in *)&f->src)->sin_addr
                            : (const void *)&((const struct sockaddr_in6 *)&f->src)->sin6_addr;
        uint16_t sp = ntohs(f->src.ss_family == AF_INET
                                ? ((const struct sockaddr_in *)&f->src)->sin_port
                                : ((const struct sockaddr_in6 *)&f->src)->sin6_port);
        better(rules_cidrs_match(rs->src, f->src.ss_family, a, &tag), &tag, &best);
        better(rules_ports_match(rs->sport, sp, &tag), &tag, &best);
    }
    /* IN-PORT: the listener's port; a TUN flow came in on no listener. */
    if (rs->nsrc > 0 && f->inbound != FLOW_IN_TUN &&
        (f->local.ss_family == AF_INET || f->local.ss_family == AF_INET6)) {
        uint16_t lp = ntohs(f->local.ss_family == AF_INET
                                ? ((const struct sockaddr_in *)&f->local)->sin_port
                                : ((const struct sockaddr_in6 *)&f->local)->sin6_port);
        f->_reads |= FLOW_READ_UNCACHEABLE;
        better(rules_ports_match(rs->inport, lp, &tag), &tag, &best);
    }
    if (rs->has_in_type && f->inbound != FLOW_IN_REVERSE) {
        uint32_t it = rs->in_type_tag[script_in_type_of(f)];
        f->_reads |= FLOW_READ_UNCACHEABLE; /* the cache's key has no inbound */
        better(it != 0, &it, &best);
    }
    better(rules_ports_match(rs->dport, f->dst.port, &tag), &tag, &best);
    uint32_t nt = rs->network_tag[f->network == FLOW_UDP];
    better(nt != 0, &nt, &best);
    if (rs->nprocs > 0 || rs->nprocs_re > 0) {
        /* mihomo compares process names and paths case-insensitively
         * (strings.EqualFold), and so does Surge on macOS's file system. */
        f->_reads |= FLOW_READ_UNCACHEABLE;
        const struct flow_process *p = script_flow_process(f);
        for (size_t i = 0; p != NULL && p->pid != 0 && i < rs->nprocs; i++) {
            const char *have = rs->proc_is_path[i] ? p->path : p->name;
            better(strcasecmp(have, rs->procs[i]) == 0, &rs->proc_tags[i], &best);
        }
        if (p != NULL && p->pid != 0)
            better(rules_regexes_match(rs->proc_re, p->name, strlen(p->name), &tag), &tag,
                   &best);
    }
    if (rs->ngeo > 0)
        match_geo(L, rs, f, h, n, 0, &best);
    if (rs->ngeo > 0 && best == UINT32_MAX)
        match_geo(L, rs, f, h, n, 1, &best);
    /* Nothing else matched, and the list has IP-CIDR lines that resolve:
     * the flow's addresses decide (a trial until they are known). */
    if (best == UINT32_MAX && rs->nres > 0)
        script_ip_rule_reached(f);
    if (best == UINT32_MAX)
        return 0;
    snprintf(f->why, sizeof(f->why), "%s:%u", rs->name, best);
    *line = best;
    return 1;
}

/* rs:match(flow) -> true, line | false */
static int
l_match(lua_State *L)
{
    uint32_t line;
    if (!script_ruleset_match(L, 1, script_check_flow(L, 2), &line)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lua_pushboolean(L, 1);
    lua_pushinteger(L, line);
    return 2;
}

static int
l_gc(lua_State *L)
{
    ruleset_fini(luaL_checkudata(L, 1, "chute.ruleset"));
    return 0;
}

static int
l_tostring(lua_State *L)
{
    struct ruleset *rs = luaL_checkudata(L, 1, "chute.ruleset");
    lua_pushfstring(L, "ruleset %s (%d entries)", rs->name ? rs->name : "?", (int)rs->count);
    return 1;
}

static int
l_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)((struct ruleset *)luaL_checkudata(L, 1, "chute.ruleset"))->count);
    return 1;
}

void
script_ruleset_open(struct script *s)
{
    lua_State *L = s->L;
    luaL_newmetatable(L, "chute.ruleset");
    lua_newtable(L);
    lua_pushcfunction(L, l_match);
    lua_setfield(L, -2, "match");
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushcfunction(L, l_len);
    lua_setfield(L, -2, "__len");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}
