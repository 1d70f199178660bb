/* Cost of chute's rule matchers (core/rules/rules.h) at list sizes users
 * load: build time, memory and match latency.
 *
 *   rules_matchers [--quick] [--seed N]
 *
 * Sets, all generated from a fixed seed:
 *   suffix    100,000 DOMAIN-SUFFIX names: 1-2 labels of 4-12 letters under
 *             a common TLD (com, net, co.uk, com.cn, ...)
 *   +kw5      the same plus 5 keywords
 *   kw1000    1,000 keywords of 4-10 letters
 *   cidr      10,000 CIDRs: 70% IPv4 /11-/32 (mostly /16-/24), 30% IPv6
 *             /16-/64 and /128 in 2000::/7, nested and overlapping by chance
 *   ports20   20 ports and ranges, as in a hand-written rule file
 *   ports1k   1,000 random ports and ranges (up to 50 wide)
 * Queries: 1,000,000 per set (100,000 with --quick), 30% built to hit (a
 * host 1-2 labels below an entry, an address inside a prefix, a port in a
 * range), 70% built to miss (fresh random names of the same shape, random
 * addresses and ports; these may still hit), drawn at random one after
 * another. Each query is timed alone (the TSC on x86, else clock_gettime),
 * minus the median cost of an empty timing; "mean" is a tight loop
 * without timers, where one query's cache misses overlap the next's.
 * Memory is what the set says it holds (_memory) and the RSS growth from
 * before _new to after _build. Machine-readable lines start with "row". */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "rules/rules.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define NSUFFIX 100000
#define NCIDR 10000

static size_t nq = 1000000;


/* A query, whatever the set: a host, an address or a port. */
struct query {
    uint32_t off, len; /* host in names[] */
    int family;
    uint8_t addr[16];
    uint16_t port;
    int want_hit;
};

static char *names;
static size_t nnames, capnames;

static uint32_t
put(const char *s, size_t n)
{
    if (nnames + n > capnames) {
        capnames = capnames ? capnames * 2 : 1 << 20;
        names = realloc(names, capnames);
        if (names == NULL)
            exit(1);
    }
    memcpy(names + nnames, s, n);
    nnames += n;
    return (uint32_t)(nnames - n);
}

static int
label(char *out, unsigned lo, unsigned hi)
{
    int n = (int)(lo + below(hi - lo + 1));
    for (int i = 0; i < n; i++)
        out[i] = (char)('a' + below(26));
    return n;
}

static int
random_domain(char *out)
{
    static const char *tld[] = {"com", "com", "com", "com", "net", "net", "org", "io", "cn",
                                "de", "co.uk", "jp", "ru", "com.cn", "info", "xyz", "app"};
    int n = label(out, 4, 12);
    if (below(10) < 3) {
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
    memcpy(out + n, base, blen);
    return n + blen;
}

typedef int (*match_fn)(const void *set, const struct query *q, uint32_t *tag);

static int
m_domain(const void *set, const struct query *q, uint32_t *tag)
{
    return rules_domains_match(set, names + q->off, q->len, tag);
}

static int
m_cidr(const void *set, const struct query *q, uint32_t *tag)
{
    return rules_cidrs_match(set, q->family, q->addr, tag);
}

static int
m_port(const void *set, const struct query *q, uint32_t *tag)
{
    return rules_ports_match(set, q->port, tag);
}

static uint32_t *lat;
static double tick_ns = 1;  /* ns per tick() */
static uint64_t timer_cost; /* ticks of an empty timing */
static uint64_t build_t0;   /* when the set's _new was called */
static long build_rss0;

static void
build_start(void)
{
    build_rss0 = rss_kib();
    build_t0 = now_ns();
}

/* The TSC where there is one: clock_gettime's steps are too coarse for
 * one 50 ns match. */
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
}

static double
pct(const uint32_t *v, size_t n, size_t per_mille)
{
    return n ? v[n * per_mille / 1000] * tick_ns : 0;
}

/* Right after the set's _build: prints its row. */
static void
measure(const char *name, size_t count, size_t mem, const void *set, match_fn fn,
        const struct query *q)
{
    double build_ms = (double)(now_ns() - build_t0) / 1e6;
    long rss = rss_kib() - build_rss0;
    uint32_t tag = 0;
    size_t hits = 0, want = 0;
    unsigned long sink = 0;
    for (size_t i = 0; i < nq / 10; i++) /* warm-up */
        sink += (unsigned long)fn(set, &q[i], &tag);
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < nq; i++)
        sink += (unsigned long)fn(set, &q[i], &tag) + tag;
    double mean = (double)(now_ns() - t0) / (double)nq;
    size_t nh = 0, nm = 0;
    uint32_t *lh = lat, *lm = lat + nq;
    for (size_t i = 0; i < nq; i++) {
        uint64_t a = tick();
        int r = fn(set, &q[i], &tag);
        uint64_t b = tick() - a;
        uint32_t t = b > timer_cost ? (uint32_t)(b - timer_cost) : 0;
        hits += (size_t)r;
        want += (size_t)q[i].want_hit;
        if (r)
            lh[nh++] = t;
        else
            lm[nm++] = t;
    }
    qsort(lh, nh, sizeof(*lh), cmp_u32);
    qsort(lm, nm, sizeof(*lm), cmp_u32);
    double ph = pct(lh, nh, 500), pm = pct(lm, nm, 500);
    memmove(lh + nh, lm, nm * sizeof(*lm));
    qsort(lat, nq, sizeof(*lat), cmp_u32);
    printf("row %-8s %7zu %8.1f %8.2f %8.2f %6.1f %6.1f %6.1f %6.1f %6.1f %5.1f%% %5.1f%%%s\n",
           name, count, build_ms, mem / 1048576.0, rss / 1024.0, mean, pct(lat, nq, 500), ph, pm,
           pct(lat, nq, 990), 100.0 * want / nq, 100.0 * hits / nq, sink == 42 ? " " : "");
}

static struct query *
domain_queries(const uint32_t *eoff, const uint8_t *elen, size_t n)
{
    struct query *q = calloc(nq, sizeof(*q));
    char buf[300];
    for (size_t i = 0; i < nq; i++) {
        int len;
        q[i].want_hit = below(10) < 3;
        if (q[i].want_hit) {
            size_t e = below((unsigned)n);
            len = subdomain(buf, names + eoff[e], elen[e]);
        } else {
            char base[100];
            int bl = random_domain(base);
            len = subdomain(buf, base, bl);
        }
        q[i].off = put(buf, (size_t)len);
        q[i].len = (uint32_t)len;
    }
    return q;
}

static void
bench_domains(void)
{
    uint32_t *eoff = malloc(NSUFFIX * sizeof(*eoff));
    uint8_t *elen = malloc(NSUFFIX);
    char buf[100];
    for (size_t i = 0; i < NSUFFIX; i++) {
        int n = random_domain(buf);
        eoff[i] = put(buf, (size_t)n);
        elen[i] = (uint8_t)n;
    }
    struct query *q = domain_queries(eoff, elen, NSUFFIX);
    static const char *kw5[] = {"adservice", "tracker", "doubleclick", "analytics", "telemetry"};
    for (int variant = 0; variant < 2; variant++) {
        build_start();
        struct rules_domains *d = rules_domains_new();
        for (size_t i = 0; i < NSUFFIX; i++)
            if (rules_domains_add(d, RULES_DOMAIN_SUFFIX, names + eoff[i], elen[i],
                                  (uint32_t)i) < 0)
                exit(1);
        for (int k = 0; variant == 1 && k < 5; k++)
            rules_domains_add(d, RULES_DOMAIN_KEYWORD, kw5[k], strlen(kw5[k]), 1000000 + k);
        if (rules_domains_build(d) < 0)
            exit(1);
        measure(variant ? "+kw5" : "suffix", rules_domains_count(d), rules_domains_memory(d), d,
                m_domain, q);
        rules_domains_free(d);
    }
    /* 1,000 keywords against the same hosts. */
    build_start();
    struct rules_domains *d = rules_domains_new();
    for (uint32_t i = 0; i < 1000; i++) {
        int n = label(buf, 4, 10);
        rules_domains_add(d, RULES_DOMAIN_KEYWORD, buf, (size_t)n, i);
    }
    if (rules_domains_build(d) < 0)
        exit(1);
    measure("kw1000", rules_domains_count(d), rules_domains_memory(d), d, m_domain, q);
    rules_domains_free(d);
    free(q);
    free(eoff);
    free(elen);
}

static void
bench_cidrs(void)
{
    struct cidr *c = malloc(NCIDR * sizeof(*c));
    for (size_t i = 0; i < NCIDR; i++)
        random_cidr(&c[i]);
    struct query *q = calloc(nq, sizeof(*q));
    for (size_t i = 0; i < nq; i++) {
        q[i].want_hit = below(10) < 3;
        struct cidr r;
        random_cidr(&r);
        if (q[i].want_hit) { /* an address inside an entry */
            const struct cidr *e = &c[below(NCIDR)];
            r.family = e->family;
            for (unsigned b = 0; b < e->prefix; b++) {
                unsigned m = 0x80u >> (b % 8);
                r.addr[b / 8] = (uint8_t)((r.addr[b / 8] & ~m) | (e->addr[b / 8] & m));
            }
        }
        q[i].family = r.family;
        memcpy(q[i].addr, r.addr, 16);
    }
    build_start();
    struct rules_cidrs *s = rules_cidrs_new();
    for (size_t i = 0; i < NCIDR; i++)
        if (rules_cidrs_add(s, c[i].family, c[i].addr, c[i].prefix, (uint32_t)i) < 0)
            exit(1);
    if (rules_cidrs_build(s) < 0)
        exit(1);
    measure("cidr", rules_cidrs_count(s), rules_cidrs_memory(s), s, m_cidr, q);
    rules_cidrs_free(s);
    free(q);
    free(c);
}

static void
bench_ports(const char *name, unsigned n)
{
    static const uint16_t common[][2] = {{80, 80}, {443, 443}, {8080, 8090}, {22, 22}, {53, 53},
                                         {3478, 3481}, {5000, 5100}, {993, 995}};
    uint16_t (*r)[2] = malloc(n * sizeof(*r));
    for (unsigned i = 0; i < n; i++) {
        unsigned lo = i < 8 ? common[i][0] : below(65536 - 50);
        r[i][0] = (uint16_t)lo;
        r[i][1] = (uint16_t)(i < 8 ? common[i][1] : lo + (below(2) ? below(50) : 0));
    }
    struct query *q = calloc(nq, sizeof(*q));
    for (size_t i = 0; i < nq; i++) {
        q[i].want_hit = below(10) < 3;
        unsigned e = below(n);
        q[i].port = q[i].want_hit ? (uint16_t)(r[e][0] + below(r[e][1] - r[e][0] + 1u))
                                  : (uint16_t)below(65536);
    }
    build_start();
    struct rules_ports *p = rules_ports_new();
    for (unsigned i = 0; i < n; i++)
        if (rules_ports_add(p, r[i][0], r[i][1], i) < 0)
            exit(1);
    if (rules_ports_build(p) < 0)
        exit(1);
    measure(name, n, 0, p, m_port, q); /* ports have no _memory */
    rules_ports_free(p);
    free(q);
    free(r);
}

int
main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            nq = 100000;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            rng ^= strtoull(argv[++i], NULL, 0) * 0xbf58476d1ce4e5b9ull;
        } else {
            fprintf(stderr, "usage: rules_matchers [--quick] [--seed N]\n");
            return 2;
        }
    }
    lat = malloc(2 * nq * sizeof(*lat));
    calibrate();
    printf("# %zu queries per set; timer cost %.1f ns subtracted\n", nq, timer_cost * tick_ns);
    printf("#   set      entries build_ms  held_MiB   rss_MiB   mean    p50 p50hit p50mis    p99"
           "  want%%   hit%%\n");
    bench_domains();
    bench_cidrs();
    bench_ports("ports20", 20);
    bench_ports("ports1k", 1000);
    free(lat);
    free(names);
    return 0;
}
