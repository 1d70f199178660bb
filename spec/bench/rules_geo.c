/* Cost of a GEOIP rule for a new flow, beside a DOMAIN-SUFFIX rule, through
 * the script host as the engine calls it on a decision-cache miss
 * (script_route on a new, zeroed flow):
 *
 *   rules_geo [--quick] [--seed N] MMDB DIR
 *
 * MMDB is a country database (scripts/bench/rules makes one with
 * spec/fixtures/geo/mkmmdb.py --random: 300,000 networks, 85% IPv4, 250
 * codes). Writes four bundles under DIR (which must exist):
 *   geo      chute.rules { {"GEOIP", "AA", "REJECT"}, {"FINAL", "DIRECT"} }
 *            with geo.mmdb = MMDB; queries: random addresses (85% IPv4,
 *            else in 2000::/3), a new one every flow: no per-flow memo or
 *            decision cache helps, and the tree's nodes below its top
 *            levels are not in the CPU's caches (cache-cold)
 *   suffix   chute.rules { {"DOMAIN-SUFFIX", "example.com", "REJECT"},
 *            {"FINAL", "DIRECT"} }; queries: random names of 2-3 labels,
 *            10% under example.com
 *   none     chute.rules { {"FINAL", "DIRECT"} } on the same queries: the
 *            call's own cost
 * 1,000,000 decisions each (--quick: 200,000) in batches of 1,000 timed
 * with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID: not the time other
 * processes held the core); the flows of a batch are zeroed before it,
 * outside the timing. A rule's bundle and none run the same batch in turn
 * (the order alternating), so that both meet the same load on a shared
 * machine; the rule's cost is the median of the per-batch differences.
 * script_route starts loading the lookup's first cache line before the Lua
 * call (script_geo_prefetch), as the engine's calls do: that miss overlaps
 * the call's set-up, the rest of the lookup does not.
 * Also the lookup alone (rules_geoip_codes, no Lua) on the same addresses.
 * Every decision is checked (wrong: 0). Lines "row NAME COST WRONG RULE_NS
 * NONE_NS" (median ns per decision). */

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_util.h"
#include "flow/addr.h"
#include "flow/flow.h"
#include "rules/geoip.h"
#include "script/script.h"

#define BATCH 1000

/* This thread's CPU time: on a shared machine the wall clock also counts
 * the time other processes had the core. */
static uint64_t
cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t nq = 1000000;

struct query {
    struct flow_addr dst;
    int reject; /* the expected decision; -1 unknown (geo: asked of the lookup) */
};

static void
write_bundle(const char *dir, const char *name, const char *main_lua)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/main.lua", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(main_lua, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void
random_ip(struct flow_addr *a)
{
    memset(a, 0, sizeof(*a));
    a->port = 443;
    for (int i = 0; i < 16; i++)
        a->ip[i] = (uint8_t)rnd();
    if (below(100) < 85) {
        a->kind = FLOW_ADDR_IP4;
        memset(a->ip + 4, 0, 12);
    } else {
        a->kind = FLOW_ADDR_IP6;
        a->ip[0] = (uint8_t)(0x20 | (a->ip[0] & 0x1f));
    }
}

static void
random_name(struct query *q)
{
    static const char *const tlds[] = {"com", "net", "org", "co.uk", "io"};
    char host[128];
    size_t n = 0;
    int labels = 1 + (int)below(2);
    for (int l = 0; l < labels; l++) {
        int len = 4 + (int)below(9);
        for (int i = 0; i < len; i++)
            host[n++] = (char)('a' + below(26));
        host[n++] = '.';
    }
    q->reject = below(10) == 0;
    n += (size_t)snprintf(host + n, sizeof(host) - n, "%s",
                          q->reject ? "example.com" : tlds[below(5)]);
    flow_addr_from_host(&q->dst, host, n, 443);
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static struct flow *fl;
static uint64_t next_id = 1;

/* One batch of |qs| through |s|: CPU ns per decision; wrong ones counted. */
static double
batch(struct script *s, const struct query *qs, int check, size_t *wrong)
{
    for (size_t i = 0; i < BATCH; i++) {
        memset(&fl[i], 0, sizeof(fl[i]));
        fl[i].id = next_id++;
        fl[i].network = FLOW_TCP;
        fl[i].inbound = FLOW_IN_SOCKS;
        fl[i].dst = qs[i].dst;
    }
    uint64_t t0 = cpu_ns();
    for (size_t i = 0; i < BATCH; i++)
        script_route(s, &fl[i]);
    double t = (double)(cpu_ns() - t0) / BATCH;
    for (size_t i = 0; check && i < BATCH; i++) {
        if ((fl[i].policy == FLOW_POLICY_REJECT) != qs[i].reject && (*wrong)++ == 0) {
            char h[64];
            flow_addr_host(&fl[i].dst, h, sizeof(h));
            fprintf(stderr, "# rules_geo: the first wrong decision: %s, %s (%s)\n", h,
                    qs[i].reject ? "not rejected" : "rejected", fl[i].why);
        }
    }
    return t;
}

/* |rule| (deciding as qs[].reject says) and |base| (FINAL only) on the
 * same queries, batch after batch in turn, so both see the same machine:
 * a shared one changes speed from one second to the next. The medians of
 * each, and of the per-pair difference (the rule's own cost). */
static void
pair(const char *name, struct script *rule, struct script *base, const struct query *qs)
{
    size_t nb = nq / BATCH, wrong = 0, ignored = 0;
    double *a = malloc(nb * sizeof(*a)), *b = malloc(nb * sizeof(*b)), *d = malloc(nb * sizeof(*d));
    for (size_t w = 0; w < 20; w++) { /* warm-up */
        batch(rule, qs + ((w * 7) % nb) * BATCH, 0, &ignored);
        batch(base, qs + ((w * 7) % nb) * BATCH, 0, &ignored);
    }
    for (size_t i = 0; i < nb; i++) {
        int first = i & 1; /* which goes first alternates too */
        if (first)
            b[i] = batch(base, qs + i * BATCH, 0, &ignored);
        a[i] = batch(rule, qs + i * BATCH, 1, &wrong);
        if (!first)
            b[i] = batch(base, qs + i * BATCH, 0, &ignored);
        d[i] = a[i] - b[i];
    }
    qsort(a, nb, sizeof(*a), cmp);
    qsort(b, nb, sizeof(*b), cmp);
    qsort(d, nb, sizeof(*d), cmp);
    printf("row %s %.1f %zu %.1f %.1f\n", name, d[nb / 2], wrong, a[nb / 2], b[nb / 2]);
    free(a);
    free(b);
    free(d);
}

static struct script *
load(const char *dir, const char *name)
{
    char path[4096], err[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct script *s = script_load(path, NULL, err, sizeof(err));
    if (s == NULL) {
        fprintf(stderr, "rules_geo: %s\n", err);
        exit(1);
    }
    return s;
}

int
main(int argc, char **argv)
{
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "--quick") == 0)
            nq = 200000;
        else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc)
            rng = strtoull(argv[++a], NULL, 0) | 1;
        else
            break;
    }
    if (argc - a != 2) {
        fprintf(stderr, "usage: rules_geo [--quick] [--seed N] MMDB DIR\n");
        return 2;
    }
    const char *mmdb = argv[a], *dir = argv[a + 1];
    char abs[4096], lua[8192], err[512];
    if (realpath(mmdb, abs) == NULL) {
        perror(mmdb);
        return 1;
    }
    struct rules_geoip *g = rules_geoip_open(abs, err, sizeof(err));
    if (g == NULL) {
        fprintf(stderr, "rules_geo: %s\n", err);
        return 1;
    }
    snprintf(lua, sizeof(lua),
             "local chute = require \"chute\"\n"
             "chute.config { decision_cache = 0, geo = { mmdb = \"%s\" } }\n"
             "chute.route = chute.rules { {\"GEOIP\", \"AA\", \"REJECT\"}, {\"FINAL\", \"DIRECT\"} }\n",
             abs);
    write_bundle(dir, "geo", lua);
    write_bundle(dir, "suffix",
                 "local chute = require \"chute\"\n"
                 "chute.route = chute.rules { {\"DOMAIN-SUFFIX\", \"example.com\", \"REJECT\"}, "
                 "{\"FINAL\", \"DIRECT\"} }\n");
    write_bundle(dir, "none",
                 "local chute = require \"chute\"\n"
                 "chute.route = chute.rules { {\"FINAL\", \"DIRECT\"} }\n");

    struct query *ips = calloc(nq, sizeof(*ips)), *names = calloc(nq, sizeof(*names));
    fl = calloc(BATCH, sizeof(*fl));
    size_t aa = 0;
    for (size_t i = 0; i < nq; i++) {
        random_ip(&ips[i].dst);
        const char *codes[RULES_GEOIP_MAX_CODES];
        int n = rules_geoip_codes(g, ips[i].dst.kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6,
                                  ips[i].dst.ip, codes);
        ips[i].reject = n > 0 && strcmp(codes[0], "AA") == 0;
        aa += (size_t)ips[i].reject;
        random_name(&names[i]);
    }
    /* The lookup alone, on the same addresses, in the same batches. */
    size_t nb = nq / BATCH, found = 0;
    double *t = malloc(nb * sizeof(*t));
    for (size_t b = 0; b < nb; b++) {
        uint64_t t0 = cpu_ns();
        for (size_t i = 0; i < BATCH; i++) {
            const char *codes[RULES_GEOIP_MAX_CODES];
            const struct flow_addr *d = &ips[b * BATCH + i].dst;
            found += (size_t)rules_geoip_codes(g, d->kind == FLOW_ADDR_IP4 ? AF_INET : AF_INET6,
                                               d->ip, codes) > 0;
        }
        t[b] = (double)(cpu_ns() - t0) / BATCH;
    }
    qsort(t, nb, sizeof(*t), cmp);
    printf("# rules_geo: %zu decisions per row; %.1f%% of addresses in the file, %.2f%% AA\n", nq,
           100.0 * (double)found / (double)nq, 100.0 * (double)aa / (double)nq);
    printf("row lookup %.1f 0\n", t[nb / 2]);
    free(t);
    rules_geoip_free(g);

    struct script *geo = load(dir, "geo"), *suffix = load(dir, "suffix"), *none = load(dir, "none");
    pair("geo", geo, none, ips);
    pair("suffix", suffix, none, names);
    script_free(geo);
    script_free(suffix);
    script_free(none);
    free(ips);
    free(names);
    free(fl);
    return 0;
}
