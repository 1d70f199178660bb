/* Cost of one route() decision with big rule lists loaded, through the
 * script host as the engine calls it (script_route on a new flow: the Lua
 * call plus the matching), for chute's C matchers (chute.ruleset) and for
 * the same rules written in pure Lua; and of a decision-cache hit.
 *
 *   rules_route [--quick] [--seed N] [--only none|c|lua] DIR
 *
 * Writes three bundles under DIR (which must exist), all from a fixed seed:
 *   DIR/c     suffix.list: 100,000 DOMAIN-SUFFIX lines (Surge .list), names
 *             of 2-3 labels: 1-2 labels of 4-12 letters under a common TLD
 *             (com, net, co.uk, ...); cidr.txt: 10,000 CIDRs (Clash ipcidr
 *             text), 70% IPv4 /11-/32 (mostly /16-/24), 30% IPv6 /16-/64
 *             and /128 in 2000::/7; main.lua: two chute.ruleset()s and a
 *             route() that asks one then the other
 *   DIR/lua   the same two files; main.lua reads them itself (io.open, a
 *             suffix table, CIDR tables by prefix length) and decides the
 *             same way in pure Lua
 *   DIR/none  no lists, route() returns "DIRECT": the cost of the call alone
 *             and the load time and memory subtracted from the other two
 * Queries: 1,000,000 (--quick: 100,000), drawn one after another: 30% a host
 * 1-2 labels below a list entry, 10% an address inside a listed CIDR, 48% a
 * fresh random name and 12% a random address (70% v4) that match nothing
 * (checked against the C matchers, redrawn otherwise). Each becomes a new,
 * zeroed struct flow (TCP, SOCKS, port 443, dst via flow_addr_from_host)
 * and is decided by script_route, as engine_route does on a cache miss.
 *
 * Each bundle is measured in a child process of its own (so RSS growth is
 * its alone): load time (median of 5 script_load calls, 3 with --quick),
 * over the first load the growth of RSS, of malloc'd bytes in use
 * (mallinfo2: C matchers and Lua heap, no allocator slack) and of RSS once
 * malloc_trim(0) has returned free pages, and the Lua state's bytes
 * (script_stats);
 * then a warm-up of 50,000 decisions, then every query once in batches of
 * 1,000 timed with clock_gettime (batch ns / 1000 = per-decision ns; the
 * median and p99 of the batches, and the decision rate = queries / sum of
 * batch times, flow preparation excluded), then every query once timed
 * alone with the TSC (x86; else clock_gettime) minus an empty timing.
 * Every decision is checked against the query's expected policy.
 * In the C child, also: the decision cache (flow_dcache) filled with the
 * decisions of the first 4,096 (the default size) and 65,536 queries, then
 * 1,000,000 random hits in batches of 1,000 (median per hit) and timed
 * alone; and the matchers alone (rules.h sets built from the same entries,
 * the domain set then the CIDR set, as route() asks them) on the same
 * queries.
 *
 * --only MODE runs one bundle in this process and prints its row, and
 * --decisions-only leaves out the matchers-alone and cache runs (both for
 * perf record). Machine-readable lines start with "row"; notes with "#". */

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include <ev.h>
#include <arpa/inet.h>

#include "dns/dns.h"
#include "flow/dcache.h"
#include "flow/flow.h"
#include "rules/rules.h"
#include "script/script.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define NSUFFIX 100000
#define NCIDR 10000
#define BATCH 1000
#define WARMUP 50000
#define DC_GETS 1000000

static size_t nq = 1000000;
static int nloads = 5;
static int decisions_only; /* --decisions-only: no matchers-alone or cache runs (for perf) */


static int
cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The TSC where there is one: clock_gettime's steps are too coarse for one
 * 50 ns cache hit. */
#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t
tick(void)
{
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}
#else
#define tick now_ns
#endif

static double tick_ns = 1;  /* ns per tick() */
static uint64_t timer_cost; /* ticks of an empty timing */
static double clock_res_ns, clock_call_ns;

static void
calibrate(void)
{
    uint64_t n0 = now_ns(), t0 = tick();
    while (now_ns() - n0 < 50000000)
        ;
    tick_ns = (double)(now_ns() - n0) / (double)(tick() - t0);
    uint32_t t[1001];
    for (int i = 0; i < 1001; i++) {
        uint64_t a = tick();
        t[i] = (uint32_t)(tick() - a);
    }
    qsort(t, 1001, sizeof(*t), cmp_u32);
    timer_cost = t[500];
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    clock_res_ns = (double)res.tv_sec * 1e9 + (double)res.tv_nsec;
    uint64_t c0 = now_ns();
    for (int i = 0; i < 100000; i++)
        (void)now_ns();
    clock_call_ns = (double)(now_ns() - c0) / 100000.0;
}

/* ---- names and queries ---- */

static char *names;
static size_t nnames, capnames;

static uint32_t
put(const char *s, size_t n)
{
    if (nnames + n + 1 > capnames) {
        capnames = capnames ? capnames * 2 : 1 << 22;
        names = realloc(names, capnames);
        if (names == NULL)
            exit(1);
    }
    memcpy(names + nnames, s, n);
    names[nnames + n] = '\0';
    nnames += n + 1;
    return (uint32_t)(nnames - n - 1);
}

static int
label(char *out, unsigned lo, unsigned hi)
{
    int n = (int)(lo + below(hi - lo + 1));
    for (int i = 0; i < n; i++)
        out[i] = (char)('a' + below(26));
    return n;
}

/* 1-2 labels of 4-12 letters under a common TLD: 2-3 labels in all
 * (co.uk and com.cn add one). */
static int
random_domain(char *out)
{
    static const char *tld[] = {"com", "com", "com", "com", "net", "net", "org", "io", "cn",
                                "de", "co.uk", "jp", "ru", "com.cn", "info", "xyz", "app"};
    int n = label(out, 4, 12);
    if (below(2) == 0) {
        out[n++] = '.';
        n += label(out + n, 4, 12);
    }
    return n + sprintf(out + n, ".%s", tld[below(sizeof(tld) / sizeof(tld[0]))]);
}

/* 1-2 labels in front of |base|: common ones or random. */
static int
subdomain(char *out, const char *base, int blen)
{
    static const char *common[] = {"www", "api", "cdn", "img", "m", "static", "mail"};
    int n = 0, labels = 1 + (below(3) == 0);
    for (int l = 0; l < labels; l++) {
        n += below(2) ? sprintf(out + n, "%s", common[below(7)]) : label(out + n, 3, 8);
        out[n++] = '.';
    }
    memcpy(out + n, base, (size_t)blen);
    return n + blen;
}

static void
mask_cidr(struct cidr *c)
{
    unsigned bytes = c->family == AF_INET ? 4 : 16;
    for (unsigned b = c->prefix; b < bytes * 8; b++)
        c->addr[b / 8] &= (uint8_t)~(0x80u >> (b % 8));
    if (c->family == AF_INET)
        memset(c->addr + 4, 0, 12);
}

enum qkind { Q_NAME_HIT, Q_IP_HIT, Q_NAME_MISS, Q_IP_MISS };

struct query {
    uint32_t off;  /* host text in names[] */
    uint8_t len;
    uint8_t kind;  /* enum qkind */
};

static struct query *qs;
static uint32_t *eoff; /* list entries in names[] */
static uint8_t *elen;
static struct cidr *cidrs;
static struct rules_domains *ref_dom; /* the same entries, for checks and "matchers only" */
static struct rules_cidrs *ref_cidr;

static int
is_hit(const char *host, size_t len)
{
    struct flow_addr a;
    uint32_t tag;
    if (flow_addr_from_host(&a, host, len, 443) != 0)
        return -1;
    if (a.kind == FLOW_ADDR_NAME)
        return rules_domains_match(ref_dom, a.name, a.name_len, &tag);
    return rules_cidrs_match(ref_cidr, a.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6, a.ip, &tag);
}

static void
write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "rules_route: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static const char main_c[] =
    "local chute = require \"chute\"\n"
    "local ads = chute.ruleset \"suffix.list\"\n"
    "local ips = chute.ruleset(\"cidr.txt\", {format=\"ipcidr\"})\n"
    "function chute.route(flow)\n"
    "  if ads:match(flow) then return \"REJECT\" end\n"
    "  if ips:match(flow) then return \"REJECT\" end\n"
    "  return \"DIRECT\"\n"
    "end\n";

static const char main_none[] =
    "local chute = require \"chute\"\n"
    "function chute.route(flow) return \"DIRECT\" end\n";

/* The same rules in pure Lua: what a script would do without
 * chute.ruleset. Straightforward, not naive: locals for the library
 * functions, one table lookup per label suffix, one per prefix length. */
static const char main_lua[] =
    "local chute = require \"chute\"\n"
    "local find, sub, lower = string.find, string.sub, string.lower\n"
    "local match, gmatch = string.match, string.gmatch\n"
    "local tonumber = tonumber\n"
    "\n"
    "-- DOMAIN-SUFFIX lines of a Surge .list: a set of lower-case names.\n"
    "local suffix = {}\n"
    "local fh = assert(io.open(\"suffix.list\"))\n"
    "for line in fh:lines() do\n"
    "  local v = match(line, \"^DOMAIN%-SUFFIX,([^,%s]+)\")\n"
    "  if v then suffix[lower(v)] = true end\n"
    "end\n"
    "fh:close()\n"
    "\n"
    "local function parse4(s)\n"
    "  local a, b, c, d = match(s, \"^(%d+)%.(%d+)%.(%d+)%.(%d+)$\")\n"
    "  if not a then return nil end\n"
    "  return ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c)) * 256 + tonumber(d)\n"
    "end\n"
    "\n"
    "-- \"2001:db8::1\" -> the two 64-bit halves (Lua 5.4 integers).\n"
    "local w = {}\n"
    "local function parse6(s)\n"
    "  local dbl = find(s, \"::\", 1, true)\n"
    "  local n = 0\n"
    "  for x in gmatch(dbl and sub(s, 1, dbl - 1) or s, \"[^:]+\") do\n"
    "    n = n + 1; w[n] = tonumber(x, 16)\n"
    "  end\n"
    "  if dbl then\n"
    "    local right, m = sub(s, dbl + 2), 0\n"
    "    for _ in gmatch(right, \"[^:]+\") do m = m + 1 end\n"
    "    for i = n + 1, 8 - m do w[i] = 0 end\n"
    "    n = 8 - m\n"
    "    for x in gmatch(right, \"[^:]+\") do n = n + 1; w[n] = tonumber(x, 16) end\n"
    "  end\n"
    "  if n ~= 8 then return nil end\n"
    "  return (w[1] << 48) | (w[2] << 32) | (w[3] << 16) | w[4],\n"
    "         (w[5] << 48) | (w[6] << 32) | (w[7] << 16) | w[8]\n"
    "end\n"
    "\n"
    "-- CIDRs of a Clash ipcidr text list, by prefix length:\n"
    "--   v4[len][addr >> (32 - len)]\n"
    "--   v6[len][hi >> (64 - len)]            (len <= 64)\n"
    "--   v6[len][hi][lo >> (128 - len)]       (len > 64)\n"
    "local v4, v4lens, v6, v6lens = {}, {}, {}, {}\n"
    "fh = assert(io.open(\"cidr.txt\"))\n"
    "for line in fh:lines() do\n"
    "  local a, p = match(line, \"^([^/%s]+)/(%d+)\")\n"
    "  if a then\n"
    "    p = tonumber(p)\n"
    "    if find(a, \":\", 1, true) then\n"
    "      local hi, lo = parse6(a)\n"
    "      if not v6[p] then v6[p] = {}; v6lens[#v6lens + 1] = p end\n"
    "      if p <= 64 then\n"
    "        v6[p][hi >> (64 - p)] = true\n"
    "      else\n"
    "        local t = v6[p][hi]\n"
    "        if not t then t = {}; v6[p][hi] = t end\n"
    "        t[lo >> (128 - p)] = true\n"
    "      end\n"
    "    else\n"
    "      if not v4[p] then v4[p] = {}; v4lens[#v4lens + 1] = p end\n"
    "      v4[p][parse4(a) >> (32 - p)] = true\n"
    "    end\n"
    "  end\n"
    "end\n"
    "fh:close()\n"
    "table.sort(v4lens, function(a, b) return a > b end)\n"
    "table.sort(v6lens, function(a, b) return a > b end)\n"
    "\n"
    "function chute.route(flow)\n"
    "  local host = flow.host\n"
    "  if host then\n"
    "    host = lower(host)\n"
    "    if suffix[host] then return \"REJECT\" end\n"
    "    local i = 1\n"
    "    while true do\n"
    "      local d = find(host, \".\", i, true)\n"
    "      if not d then break end\n"
    "      if suffix[sub(host, d + 1)] then return \"REJECT\" end\n"
    "      i = d + 1\n"
    "    end\n"
    "    return \"DIRECT\"\n"
    "  end\n"
    "  local ip = flow.dst_ip\n"
    "  if ip then\n"
    "    if find(ip, \":\", 1, true) then\n"
    "      local hi, lo = parse6(ip)\n"
    "      if hi then\n"
    "        for k = 1, #v6lens do\n"
    "          local p = v6lens[k]\n"
    "          if p <= 64 then\n"
    "            if v6[p][hi >> (64 - p)] then return \"REJECT\" end\n"
    "          else\n"
    "            local t = v6[p][hi]\n"
    "            if t and t[lo >> (128 - p)] then return \"REJECT\" end\n"
    "          end\n"
    "        end\n"
    "      end\n"
    "    else\n"
    "      local n = parse4(ip)\n"
    "      if n then\n"
    "        for k = 1, #v4lens do\n"
    "          local p = v4lens[k]\n"
    "          if v4[p][n >> (32 - p)] then return \"REJECT\" end\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  return \"DIRECT\"\n"
    "end\n";

static size_t bytes_suffix, bytes_cidr;

static void
generate(const char *dir)
{
    char sub[4096], buf[300];
    /* The lists. */
    eoff = malloc(NSUFFIX * sizeof(*eoff));
    elen = malloc(NSUFFIX);
    cidrs = malloc(NCIDR * sizeof(*cidrs));
    size_t cap = (size_t)NSUFFIX * 48 + (size_t)NCIDR * 48, n = 0;
    char *list = malloc(cap), *clist = malloc((size_t)NCIDR * 64);
    ref_dom = rules_domains_new();
    ref_cidr = rules_cidrs_new();
    for (uint32_t i = 0; i < NSUFFIX; i++) {
        int k = random_domain(buf);
        eoff[i] = put(buf, (size_t)k);
        elen[i] = (uint8_t)k;
        n += (size_t)sprintf(list + n, "DOMAIN-SUFFIX,%s\n", buf);
        rules_domains_add(ref_dom, RULES_DOMAIN_SUFFIX, buf, (size_t)k, i + 1);
    }
    bytes_suffix = n;
    size_t cn = 0;
    for (uint32_t i = 0; i < NCIDR; i++) {
        random_cidr(&cidrs[i]);
        mask_cidr(&cidrs[i]);
        inet_ntop(cidrs[i].family, cidrs[i].addr, buf, sizeof(buf));
        cn += (size_t)sprintf(clist + cn, "%s/%u\n", buf, cidrs[i].prefix);
        rules_cidrs_add(ref_cidr, cidrs[i].family, cidrs[i].addr, cidrs[i].prefix, i + 1);
    }
    bytes_cidr = cn;
    if (rules_domains_build(ref_dom) != 0 || rules_cidrs_build(ref_cidr) != 0)
        exit(1);

    static const char *const bundles[] = {"c", "lua", "none"};
    static const char *const mains[] = {main_c, main_lua, main_none};
    for (int b = 0; b < 3; b++) {
        snprintf(sub, sizeof(sub), "%s/%s", dir, bundles[b]);
        if (mkdir(sub, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "rules_route: mkdir %s: %s\n", sub, strerror(errno));
            exit(1);
        }
        write_file(sub, "main.lua", mains[b], strlen(mains[b]));
        if (b < 2) {
            write_file(sub, "suffix.list", list, bytes_suffix);
            write_file(sub, "cidr.txt", clist, bytes_cidr);
        }
    }
    free(list);
    free(clist);

    /* The queries. */
    qs = calloc(nq, sizeof(*qs));
    for (size_t i = 0; i < nq; i++) {
        unsigned r = below(100);
        enum qkind kind = r < 30   ? Q_NAME_HIT
                          : r < 40 ? Q_IP_HIT
                          : r < 88 ? Q_NAME_MISS
                                   : Q_IP_MISS;
        int len;
        for (;;) {
            if (kind == Q_NAME_HIT) {
                size_t e = below(NSUFFIX);
                len = subdomain(buf, names + eoff[e], elen[e]);
            } else if (kind == Q_NAME_MISS) {
                char base[100];
                int bl = random_domain(base);
                len = subdomain(buf, base, bl);
            } else {
                struct cidr c;
                random_cidr(&c);
                if (kind == Q_IP_HIT) { /* an address inside an entry */
                    const struct cidr *e = &cidrs[below(NCIDR)];
                    c.family = e->family;
                    for (unsigned b = 0; b < e->prefix; b++) {
                        unsigned m = 0x80u >> (b % 8);
                        c.addr[b / 8] = (uint8_t)((c.addr[b / 8] & ~m) | (e->addr[b / 8] & m));
                    }
                }
                inet_ntop(c.family, c.addr, buf, sizeof(buf));
                len = (int)strlen(buf);
            }
            int hit = is_hit(buf, (size_t)len);
            if (hit == (kind == Q_NAME_HIT || kind == Q_IP_HIT))
                break;
            if (kind == Q_NAME_HIT || kind == Q_IP_HIT) {
                fprintf(stderr, "rules_route: query '%.*s' built to hit does not\n", len, buf);
                exit(1);
            }
        }
        qs[i].off = put(buf, (size_t)len);
        qs[i].len = (uint8_t)len;
        qs[i].kind = (uint8_t)kind;
    }
}

/* ---- measurements ---- */

struct result {
    int ok;
    char err[512];
    double load_ms;        /* median over nloads */
    double load_first_ms;
    long rss_kib;          /* RSS growth over the first load */
    long heap_kib;         /* malloc'd bytes in use (mallinfo2) growth over it */
    long trim_kib;         /* RSS growth once malloc_trim(0) gave back free pages */
    size_t lua_bytes;
    double med_ns, p10_ns, p99b_ns; /* per decision, from batches */
    double rate;           /* decisions/s */
    double s50, s99, s50hit, s50mis; /* timed alone */
    size_t decisions, rejects, wrong;
    uint64_t route_errors;
    /* C child only */
    double m_med_ns, m_rate; /* matchers alone */
    double dc_med[2], dc_s50[2];
    size_t dc_size[2];
    uint64_t dc_hits[2];
    double res_med_ns, res_lookup_ns; /* a name reaching an IP rule, its answer cached */
    size_t res_flows, res_lookups, res_wrong;
};

static void
fresh_flow(struct flow *f, const struct query *q)
{
    memset(f, 0, sizeof(*f));
    f->network = FLOW_TCP;
    f->inbound = FLOW_IN_SOCKS;
    f->rule = "";
    if (flow_addr_from_host(&f->dst, names + q->off, q->len, 443) != 0) {
        fprintf(stderr, "rules_route: bad query '%.*s'\n", q->len, names + q->off);
        exit(1);
    }
}

static int
want_reject(const struct query *q)
{
    return q->kind == Q_NAME_HIT || q->kind == Q_IP_HIT;
}

static double
pct_dbl(double *v, size_t n, size_t per_mille)
{
    qsort(v, n, sizeof(*v), cmp_dbl);
    return n ? v[n * per_mille / 1000 < n ? n * per_mille / 1000 : n - 1] : 0;
}

static double
pct_u32(uint32_t *v, size_t n, size_t per_mille)
{
    qsort(v, n, sizeof(*v), cmp_u32);
    return n ? v[n * per_mille / 1000 < n ? n * per_mille / 1000 : n - 1] * tick_ns : 0;
}

static struct flow *fl; /* BATCH flows */

static void
bench_dcache(struct script *s, struct result *r, int idx, size_t cap)
{
    struct flow_dcache *c = flow_dcache_new(cap);
    struct flow_addr *keys = malloc(cap * sizeof(*keys));
    size_t nk = 0;
    for (size_t i = 0; i < nq && nk < cap; i++) { /* the engine's path on a miss */
        struct flow *f = &fl[0];
        fresh_flow(f, &qs[i]);
        if (flow_dcache_get(c, f))
            continue;
        script_route(s, f);
        if (!(f->_reads & FLOW_READ_UNCACHEABLE) && strcmp(f->rule, "route") == 0) {
            flow_dcache_put(c, f);
            keys[nk++] = f->dst;
        }
    }
    struct flow_dcache_stats st0, st1;
    flow_dcache_stats(c, &st0);
    size_t nb = DC_GETS / BATCH;
    double *per = malloc(nb * sizeof(*per));
    uint32_t *lat = malloc(DC_GETS * sizeof(*lat));
    unsigned long sink = 0;
    for (size_t b = 0; b < nb; b++) {
        for (size_t j = 0; j < BATCH; j++) {
            memset(&fl[j], 0, sizeof(fl[j]));
            fl[j].dst = keys[below((unsigned)nk)];
        }
        uint64_t t0 = now_ns();
        for (size_t j = 0; j < BATCH; j++)
            sink += (unsigned long)flow_dcache_get(c, &fl[j]);
        per[b] = (double)(now_ns() - t0) / BATCH;
    }
    for (size_t i = 0; i < DC_GETS; i++) {
        struct flow *f = &fl[i % BATCH];
        memset(f, 0, sizeof(*f));
        f->dst = keys[below((unsigned)nk)];
        uint64_t a = tick();
        sink += (unsigned long)flow_dcache_get(c, f);
        uint64_t d = tick() - a;
        lat[i] = d > timer_cost ? (uint32_t)(d - timer_cost) : 0;
    }
    flow_dcache_stats(c, &st1);
    r->dc_med[idx] = pct_dbl(per, nb, 500);
    r->dc_s50[idx] = pct_u32(lat, DC_GETS, 500);
    r->dc_size[idx] = st1.size;
    r->dc_hits[idx] = st1.hits - st0.hits;
    if (sink == 42)
        putchar(' ');
    free(per);
    free(lat);
    free(keys);
    flow_dcache_free(c);
}

/* The matchers alone, as route() asks them: the domain set, then (misses
 * and addresses) the CIDR set. */
static void
bench_matchers(struct result *r)
{
    size_t nb = nq / BATCH;
    double *per = malloc(nb * sizeof(*per));
    double total = 0;
    unsigned long sink = 0;
    uint32_t tag;
    for (size_t b = 0; b < nb; b++) {
        for (size_t j = 0; j < BATCH; j++)
            fresh_flow(&fl[j], &qs[b * BATCH + j]);
        uint64_t t0 = now_ns();
        for (size_t j = 0; j < BATCH; j++) {
            const struct flow_addr *a = &fl[j].dst;
            int hit = a->kind == FLOW_ADDR_NAME &&
                      rules_domains_match(ref_dom, a->name, a->name_len, &tag);
            if (!hit && a->kind != FLOW_ADDR_NAME)
                hit = rules_cidrs_match(ref_cidr, a->kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6,
                                        a->ip, &tag);
            sink += (unsigned long)hit;
        }
        uint64_t dt = now_ns() - t0;
        total += (double)dt;
        per[b] = (double)dt / BATCH;
    }
    r->m_med_ns = pct_dbl(per, nb, 500);
    r->m_rate = (double)(nb * BATCH) / (total / 1e9);
    if (sink == 42)
        putchar(' ');
    free(per);
}

/* A named flow that misses the suffixes reaches the CIDRs (no no-resolve):
 * route() is a trial, the name is looked up once (an in-memory answer: the
 * resolver's hosts table, which it asks before its cache, the same cost
 * class as a cache hit), the addresses stored on the flow as the engine
 * does (engine/resolve_glue.c), and route() decides again. Per flow: the
 * whole sequence (res_med_ns) and the lookup alone (res_lookup_ns). */
struct res_wait {
    struct flow *f;
    int done;
};

static void
on_res(void *arg, const char *err, const struct sockaddr_storage *a, size_t n)
{
    struct res_wait *w = arg;
    struct flow_resolved *r = &w->f->resolved;
    w->done = 1;
    r->state = err != NULL ? FLOW_RESOLVE_FAILED : FLOW_RESOLVE_DONE;
    for (size_t i = 0; err == NULL && i < n && r->n < FLOW_RESOLVED_MAX; i++, r->n++) {
        if (a[i].ss_family == AF_INET6) {
            memcpy(r->ip[r->n], &((const struct sockaddr_in6 *)&a[i])->sin6_addr, 16);
            r->v6 |= (uint8_t)(1u << r->n);
        } else {
            memcpy(r->ip[r->n], &((const struct sockaddr_in *)&a[i])->sin_addr, 4);
        }
    }
}

static void
bench_resolve(struct script *s, struct result *r, const char *dir)
{
    enum { NRES = 20000 };
    char hosts[4200], err[256] = "";
    char first_cidr_ip[INET6_ADDRSTRLEN] = "";
    size_t *idx = malloc(NRES * sizeof(*idx)), n = 0;
    for (size_t i = 0; i < NCIDR && first_cidr_ip[0] == '\0'; i++)
        if (cidrs[i].family == AF_INET)
            inet_ntop(AF_INET, cidrs[i].addr, first_cidr_ip, sizeof(first_cidr_ip));
    snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
    FILE *h = fopen(hosts, "w");
    for (size_t i = 0; h != NULL && i < nq && n < NRES; i++) {
        if (qs[i].kind != Q_NAME_MISS)
            continue;
        idx[n++] = i; /* each resolves inside a listed CIDR: REJECT */
        fprintf(h, "%s %.*s\n", first_cidr_ip, qs[i].len, names + qs[i].off);
    }
    if (h != NULL)
        fclose(h);
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct dns_resolver_opts o;
    dns_resolver_opts_default(&o);
    o.hosts_file = hosts;
    struct dns_resolver *res = dns_resolver_new(loop, &o, err, sizeof(err));
    if (res == NULL || n == 0) {
        fprintf(stderr, "rules_route: resolver: %s\n", err);
        goto done;
    }
    double *all = malloc(n * sizeof(*all)), *look = malloc(n * sizeof(*look));
    for (size_t k = 0; k < n; k++) {
        struct flow *f = &fl[k % BATCH];
        fresh_flow(f, &qs[idx[k]]);
        f->_resolvable = 1;
        uint64_t a = tick();
        script_route(s, f);
        uint64_t b = tick();
        struct res_wait w = {f, 0};
        if ((f->_reads & FLOW_READ_RESOLVE) && dns_resolve(res, f->dst.name, on_res, &w) != NULL)
            while (!w.done)
                ev_run(loop, EVRUN_NOWAIT);
        uint64_t c = tick();
        f->_reads = 0;
        f->why[0] = '\0';
        script_route(s, f);
        uint64_t d = tick();
        all[k] = (double)(d - a) * tick_ns;
        look[k] = (double)(c - b) * tick_ns;
        r->res_wrong += f->policy != FLOW_POLICY_REJECT;
    }
    struct dns_resolver_stats st;
    dns_resolver_stats(res, &st);
    r->res_flows = n;
    r->res_lookups = (size_t)st.queries; /* one per flow, answered from memory, none sent */
    r->res_wrong += st.sent != 0 || st.hosts_hits + st.cache_hits != n;
    r->res_med_ns = pct_dbl(all, n, 500);
    r->res_lookup_ns = pct_dbl(look, n, 500);
    free(all);
    free(look);
done:
    dns_resolver_free(res);
    ev_loop_destroy(loop);
    unlink(hosts);
    free(idx);
}

static void
run(const char *dir, const char *mode, struct result *r)
{
    char bundle[4096];
    snprintf(bundle, sizeof(bundle), "%s/%s", dir, mode);
    memset(r, 0, sizeof(*r));
    fl = calloc(BATCH, sizeof(*fl));

    /* Load: the first one with RSS, then nloads-1 more for the time. */
    double *lt = malloc((size_t)nloads * sizeof(*lt));
    long rss0 = rss_kib();
    struct mallinfo2 mi0 = mallinfo2();
    uint64_t t0 = now_ns();
    struct script *s = script_load(bundle, NULL, r->err, sizeof(r->err));
    lt[0] = (double)(now_ns() - t0) / 1e6;
    if (s == NULL)
        return;
    r->rss_kib = rss_kib() - rss0;
    struct mallinfo2 mi1 = mallinfo2();
    r->heap_kib = (long)((mi1.uordblks + mi1.hblkhd) / 1024) -
                  (long)((mi0.uordblks + mi0.hblkhd) / 1024);
    malloc_trim(0);
    r->trim_kib = rss_kib() - rss0;
    struct script_stats ss;
    script_stats(s, &ss);
    r->lua_bytes = ss.lua_bytes;
    r->load_first_ms = lt[0];
    for (int i = 1; i < nloads; i++) {
        t0 = now_ns();
        struct script *x = script_load(bundle, NULL, r->err, sizeof(r->err));
        lt[i] = (double)(now_ns() - t0) / 1e6;
        if (x == NULL)
            return;
        script_free(x);
    }
    r->load_ms = pct_dbl(lt, (size_t)nloads, 500);
    free(lt);

    /* Warm-up, then the batches. */
    for (size_t i = 0; i < WARMUP && i < nq; i++) {
        fresh_flow(&fl[0], &qs[i]);
        script_route(s, &fl[0]);
    }
    size_t nb = nq / BATCH;
    double *per = malloc(nb * sizeof(*per));
    double total = 0;
    for (size_t b = 0; b < nb; b++) {
        const struct query *q = &qs[b * BATCH];
        for (size_t j = 0; j < BATCH; j++)
            fresh_flow(&fl[j], &q[j]);
        uint64_t a = now_ns();
        for (size_t j = 0; j < BATCH; j++)
            script_route(s, &fl[j]);
        uint64_t dt = now_ns() - a;
        total += (double)dt;
        per[b] = (double)dt / BATCH;
        for (size_t j = 0; j < BATCH; j++) {
            int rej = fl[j].policy == FLOW_POLICY_REJECT;
            r->rejects += (size_t)rej;
            if (strcmp(mode, "none") != 0 && rej != want_reject(&q[j]))
                r->wrong++;
        }
    }
    r->decisions = nb * BATCH;
    r->rate = (double)r->decisions / (total / 1e9);
    r->p99b_ns = pct_dbl(per, nb, 990);
    r->p10_ns = pct_dbl(per, nb, 100);
    r->med_ns = pct_dbl(per, nb, 500);
    free(per);

    /* One by one. */
    uint32_t *lat = malloc(nq * sizeof(*lat)), *lh = malloc(nq * sizeof(*lh)),
             *lm = malloc(nq * sizeof(*lm));
    size_t nh = 0, nm = 0;
    for (size_t i = 0; i < nq; i++) {
        struct flow *f = &fl[i % BATCH];
        fresh_flow(f, &qs[i]);
        uint64_t a = tick();
        script_route(s, f);
        uint64_t d = tick() - a;
        lat[i] = d > timer_cost ? (uint32_t)(d - timer_cost) : 0;
        if (want_reject(&qs[i]))
            lh[nh++] = lat[i];
        else
            lm[nm++] = lat[i];
    }
    r->s50 = pct_u32(lat, nq, 500);
    r->s99 = pct_u32(lat, nq, 990);
    r->s50hit = pct_u32(lh, nh, 500);
    r->s50mis = pct_u32(lm, nm, 500);
    free(lat);
    free(lh);
    free(lm);
    script_stats(s, &ss);
    r->route_errors = ss.route_errors;

    if (strcmp(mode, "c") == 0 && !decisions_only) {
        bench_matchers(r);
        bench_dcache(s, r, 0, 4096);
        bench_dcache(s, r, 1, 65536);
        bench_resolve(s, r, dir);
    }
    script_free(s);
    free(fl);
    r->ok = 1;
}

static void
print_row(const char *mode, const struct result *r)
{
    if (!r->ok) {
        printf("# %s: failed: %s\n", mode, r->err);
        return;
    }
    printf("row %-4s %9.2f %9.2f %8.3f %8.3f %8.3f %9.3f %9.1f %9.1f %9.1f %10.0f "
           "%8.1f %8.1f %8.1f %8.1f %7.2f %6zu %6llu\n",
           mode, r->load_ms, r->load_first_ms, r->rss_kib / 1024.0, r->heap_kib / 1024.0,
           r->trim_kib / 1024.0, r->lua_bytes / 1048576.0,
           r->med_ns, r->p10_ns, r->p99b_ns, r->rate, r->s50, r->s99, r->s50hit, r->s50mis,
           100.0 * (double)r->rejects / (double)(r->decisions ? r->decisions : 1), r->wrong,
           (unsigned long long)r->route_errors);
    if (strcmp(mode, "c") == 0 && !decisions_only) {
        printf("row mtch %9.1f %10.0f\n", r->m_med_ns, r->m_rate);
        for (int i = 0; i < 2; i++)
            printf("row dc%-2d %9.1f %9.1f %7zu %6.1f%%\n", i, r->dc_med[i], r->dc_s50[i],
                   r->dc_size[i], 100.0 * (double)r->dc_hits[i] / (2.0 * DC_GETS));
        printf("row res  %9.1f %9.1f %7zu %6zu %7zu\n", r->res_med_ns, r->res_lookup_ns,
               r->res_flows, r->res_wrong, r->res_lookups);
    }
}

static void
usage(void)
{
    fprintf(stderr,
            "usage: rules_route [--quick] [--seed N] [--only none|c|lua] [--decisions-only] DIR\n");
}

int
main(int argc, char **argv)
{
    const char *dir = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            nq = 100000;
            nloads = 3;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            rng ^= strtoull(argv[++i], NULL, 0) * 0xbf58476d1ce4e5b9ull;
        } else if (strcmp(argv[i], "--decisions-only") == 0) {
            decisions_only = 1;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (argv[i][0] != '-' && dir == NULL) {
            dir = argv[i];
        } else {
            usage();
            return 2;
        }
    }
    if (dir == NULL) {
        usage();
        return 2;
    }
    calibrate();
    uint64_t g0 = now_ns();
    generate(dir);
    size_t nk[4] = {0};
    for (size_t i = 0; i < nq; i++)
        nk[qs[i].kind]++;
    printf("# lists: %d DOMAIN-SUFFIX (%.1f MiB .list), %d CIDRs (%.2f MiB); reference sets "
           "held %.2f + %.2f MiB (rules_*_memory); generated in %.0f ms\n",
           NSUFFIX, bytes_suffix / 1048576.0, NCIDR, bytes_cidr / 1048576.0,
           rules_domains_memory(ref_dom) / 1048576.0, rules_cidrs_memory(ref_cidr) / 1048576.0,
           (double)(now_ns() - g0) / 1e6);
    printf("# queries: %zu: name hits %.1f%%, IP hits %.1f%%, name misses %.1f%%, IP misses "
           "%.1f%%\n", nq, 100.0 * nk[0] / nq, 100.0 * nk[1] / nq, 100.0 * nk[2] / nq,
           100.0 * nk[3] / nq);
    printf("# timers: clock_gettime resolution %.0f ns, a call %.1f ns (batches of %d: >= 20 us "
           "each); TSC %.3f ns/tick, empty timing %.1f ns subtracted from single timings\n",
           clock_res_ns, clock_call_ns, BATCH, tick_ns, timer_cost * tick_ns);
    printf("# row mode load_ms load1_ms rss_MiB heap_MiB trim_MiB lua_MiB med_ns p10_ns p99b_ns "
           "rate/s s50 s99 s50hit s50mis reject%% wrong errors\n");
    fflush(stdout);

    static const char *const modes[] = {"none", "c", "lua"};
    for (int m = 0; m < 3; m++) {
        struct result r;
        if (only != NULL) {
            if (strcmp(only, modes[m]) != 0)
                continue;
            run(dir, modes[m], &r);
            print_row(modes[m], &r);
            continue;
        }
        int pfd[2];
        if (pipe(pfd) != 0)
            return 1;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            close(pfd[0]);
            run(dir, modes[m], &r);
            ssize_t w = write(pfd[1], &r, sizeof(r));
            _exit(w == (ssize_t)sizeof(r) ? 0 : 1);
        }
        close(pfd[1]);
        size_t got = 0;
        char *p = (char *)&r;
        while (got < sizeof(r)) {
            ssize_t k = read(pfd[0], p + got, sizeof(r) - got);
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        close(pfd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (got != sizeof(r)) {
            memset(&r, 0, sizeof(r));
            snprintf(r.err, sizeof(r.err), "child died (status %d)", status);
        }
        print_row(modes[m], &r);
        fflush(stdout);
    }
    rules_domains_free(ref_dom);
    rules_cidrs_free(ref_cidr);
    free(qs);
    free(names);
    free(eoff);
    free(elen);
    free(cidrs);
    return 0;
}
