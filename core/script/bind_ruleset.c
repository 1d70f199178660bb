#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flow/process.h"
#include "rules/list.h"
#include "rules/rules.h"
#include "log/log.h"
#include "script/script_int.h"

/* chute.ruleset(path [, {format = ..., skip_invalid = bool}]): a rule list
 * from the bundle, parsed and compiled into C matchers once, at load.
 * rs:match(flow) tells whether any of its entries matches the flow, and on
 * which line. Each entry's tag is its line, so the first line wins. */

#define MAX_LIST_BYTES (256u << 20)

struct ruleset {
    struct rules_domains *domains; /* DOMAIN, DOMAIN-SUFFIX, DOMAIN-KEYWORD */
    struct rules_domains *subs;    /* Clash ".a.com": matched on the host minus its first label */
    struct rules_cidrs *dst, *src;
    struct rules_ports *dport, *sport;
    struct rules_regexes *regexes; /* DOMAIN-REGEX and wildcards */
    uint32_t network_tag[2];       /* NETWORK,tcp / udp: the line, 0 if none */
    char **procs;                  /* PROCESS-NAME / -PATH values, with their lines */
    uint32_t *proc_tags;
    uint8_t *proc_is_path;
    size_t nprocs;
    size_t nsrc;                   /* SRC-IP / SRC-PORT entries: matching reads the source */
    size_t nnames;                 /* entries matched against a host name */
    size_t count;
    char *name;                    /* the path as the bundle gave it */
    const char *err;               /* set by the entry callback on failure */
    char errbuf[200];
};

static void
ruleset_fini(struct ruleset *rs)
{
    rules_domains_free(rs->domains);
    rules_domains_free(rs->subs);
    rules_cidrs_free(rs->dst);
    rules_cidrs_free(rs->src);
    rules_ports_free(rs->dport);
    rules_ports_free(rs->sport);
    rules_regexes_free(rs->regexes);
    for (size_t i = 0; i < rs->nprocs; i++)
        free(rs->procs[i]);
    free(rs->procs);
    free(rs->proc_tags);
    free(rs->proc_is_path);
    free(rs->name);
    memset(rs, 0, sizeof(*rs));
}

/* A wildcard as a POSIX ERE: Clash's '*' is one label, Surge's crosses dots;
 * '?' is one character. */
static int
wildcard_regex(struct mem_slice v, int clash, char *out, size_t len)
{
    size_t n = 0;
    if (len < 3)
        return -1;
    out[n++] = '^';
    for (size_t i = 0; i < v.len; i++) {
        const char *add;
        char one[3] = {0};
        if (v.ptr[i] == '*')
            add = clash ? "[^.]+" : ".*";
        else if (v.ptr[i] == '?')
            add = ".";
        else if (strchr(".+()[]{}|^$\\", v.ptr[i]) != NULL)
            add = (one[0] = '\\', one[1] = v.ptr[i], one);
        else
            add = (one[0] = v.ptr[i], one);
        size_t k = strlen(add);
        if (n + k + 2 > len)
            return -1;
        memcpy(out + n, add, k);
        n += k;
    }
    out[n++] = '$';
    out[n] = '\0';
    return 0;
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
    struct ruleset *rs;
    int clash;
    int skip;           /* skip_invalid: leave out what cannot be matched */
    size_t unsupported; /* entries left out that way */
    unsigned first_line;
};

static int
on_entry(void *arg, const struct rules_entry *e)
{
    struct load_ctx *ctx = arg;
    struct ruleset *rs = ctx->rs;
    uint32_t tag = e->line;
    char re[1024];
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
    case RULES_T_DOMAIN_WILDCARD:
        if (e->type == RULES_T_DOMAIN_REGEX)
            snprintf(re, sizeof(re), "%.*s", (int)e->value.len, e->value.ptr);
        else if (wildcard_regex(e->value, ctx->clash, re, sizeof(re)) != 0)
            rc = -1;
        if (rc == 0)
            rc = rules_regexes_add(rs->regexes, re, tag, rs->errbuf, sizeof(rs->errbuf));
        break;
    case RULES_T_IP_CIDR:
        rc = rules_cidrs_add(rs->dst, e->family, e->addr, e->prefix, tag);
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
    default: /* GEOIP, IP-ASN: no database yet */
        if (ctx->skip) {
            if (ctx->unsupported++ == 0)
                ctx->first_line = e->line;
            return 0;
        }
        snprintf(rs->errbuf, sizeof(rs->errbuf), "line %u: %s rules need data chute does not "
                 "have yet (use skip_invalid = true to leave them out)", e->line,
                 rules_type_name(e->type));
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
    return 0;
}

int
script_l_ruleset(lua_State *L)
{
    struct script *s = script_of(L);
    const char *rel = luaL_checkstring(L, 1);
    const char *fmt_name = "auto";
    int skip = 0;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(k, "format") == 0 && lua_type(L, -1) == LUA_TSTRING)
                fmt_name = lua_tostring(L, -1);
            else if (strcmp(k, "skip_invalid") == 0 && lua_type(L, -1) == LUA_TBOOLEAN)
                skip = lua_toboolean(L, -1);
            else
                return luaL_error(L, "chute.ruleset: unknown or mistyped option '%s' "
                                     "(format = \"auto\"|\"surge\"|\"domain-set\"|\"classical\"|"
                                     "\"domain\"|\"ipcidr\", skip_invalid = boolean)", k);
            lua_pop(L, 1);
        }
    }
    int fmt = rules_format_parse(fmt_name);
    if (fmt < 0)
        return luaL_error(L, "chute.ruleset: unknown format '%s'", fmt_name);
    char path[4096];
    if (script_bundle_path(s, rel, path, sizeof(path)) != 0)
        return luaL_error(L, "chute.ruleset: '%s' is not a path inside the bundle", rel);

    struct ruleset *rs = lua_newuserdatauv(L, sizeof(*rs), 0);
    memset(rs, 0, sizeof(*rs));
    luaL_setmetatable(L, "chute.ruleset");
    rs->name = strdup(rel);
    rs->domains = rules_domains_new();
    rs->subs = rules_domains_new();
    rs->dst = rules_cidrs_new();
    rs->src = rules_cidrs_new();
    rs->dport = rules_ports_new();
    rs->sport = rules_ports_new();
    rs->regexes = rules_regexes_new();
    if (!rs->name || !rs->domains || !rs->subs || !rs->dst || !rs->src || !rs->dport ||
        !rs->sport || !rs->regexes)
        return luaL_error(L, "chute.ruleset: out of memory");

    size_t len = 0;
    char why[4200];
    char *buf = script_bundle_read(s, rel, MAX_LIST_BYTES, &len, why, sizeof(why));
    if (buf == NULL)
        return luaL_error(L, "chute.ruleset: %s", why);
    if (fmt == RULES_FORMAT_AUTO)
        fmt = rules_list_detect(buf, len);
    struct load_ctx ctx = {rs, fmt == RULES_FORMAT_CLASH_DOMAIN || fmt == RULES_FORMAT_CLASSICAL,
                           skip, 0, 0};
    struct rules_list_error err = {0};
    size_t skipped = 0;
    int rc = rules_list_parse(buf, len, (enum rules_format)fmt, skip, on_entry, &ctx, &skipped,
                              &err);
    free(buf);
    if (rc == RULES_LIST_ERR_FORMAT)
        return luaL_error(L, "chute.ruleset: %s: cannot tell the format (give format = ...)", rel);
    if (rc < 0)
        return luaL_error(L, "chute.ruleset: %s:%d: %s", rel, (int)err.line, err.msg);
    if (rc > 0)
        return luaL_error(L, "chute.ruleset: %s: %s", rel, rs->err);
    if (rules_domains_build(rs->domains) || rules_domains_build(rs->subs) ||
        rules_cidrs_build(rs->dst) || rules_cidrs_build(rs->src) || rules_ports_build(rs->dport) ||
        rules_ports_build(rs->sport))
        return luaL_error(L, "chute.ruleset: %s: out of memory", rel);
    if (skipped > 0)
        LOG_WARN("chute.ruleset: %s: %zu invalid lines left out (the first: line %u: %s)", rel,
                 skipped, err.line, err.msg);
    if (ctx.unsupported > 0)
        LOG_WARN("chute.ruleset: %s: %zu GEOIP/IP-ASN lines left out (no database yet; the "
                 "first: line %u)", rel, ctx.unsupported, ctx.first_line);
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
    }
    if (f->dst.kind == FLOW_ADDR_IP4 || f->dst.kind == FLOW_ADDR_IP6) {
        int fam = f->dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6;
        better(rules_cidrs_match(rs->dst, fam, f->dst.ip, &tag), &tag, &best);
    }
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
    better(rules_ports_match(rs->dport, f->dst.port, &tag), &tag, &best);
    uint32_t nt = rs->network_tag[f->network == FLOW_UDP];
    better(nt != 0, &nt, &best);
    if (rs->nprocs > 0) {
        f->_reads |= FLOW_READ_UNCACHEABLE;
        const struct flow_process *p = script_flow_process(f);
        for (size_t i = 0; p != NULL && p->pid != 0 && i < rs->nprocs; i++) {
            const char *have = rs->proc_is_path[i] ? p->path : p->name;
            better(strcmp(have, rs->procs[i]) == 0, &rs->proc_tags[i], &best);
        }
    }
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
