#ifndef CHUTE_SPEC_BENCH_UTIL_H
#define CHUTE_SPEC_BENCH_UTIL_H

/* Helpers shared by the benchmark programs in spec/bench: a seeded
 * xorshift generator (runs are repeatable with --seed), a clock, RSS,
 * random CIDRs. */

#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t
rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

static inline unsigned
below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static inline uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline long
rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = 0;
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static inline int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* A random prefix as rule lists hold them: 70% IPv4 with common lengths,
 * 30% global-unicast IPv6. */
struct cidr {
    int family;
    uint8_t addr[16];
    unsigned prefix;
};

static inline void
random_cidr(struct cidr *c)
{
    for (int i = 0; i < 16; i++)
        c->addr[i] = (uint8_t)rnd();
    if (below(10) < 7) {
        static const unsigned len4[] = {11, 13, 14, 15, 16, 16, 17, 18, 19, 20, 21, 22,
                                        22, 23, 24, 24, 24, 24, 28, 32, 32};
        c->family = AF_INET;
        c->prefix = len4[below(sizeof(len4) / sizeof(len4[0]))];
    } else {
        static const unsigned len6[] = {16, 20, 29, 32, 32, 36, 40, 44, 48, 48, 56, 64, 128};
        c->family = AF_INET6;
        c->addr[0] = (uint8_t)(0x20 | below(2)); /* 2000::/7, global unicast */
        c->prefix = len6[below(sizeof(len6) / sizeof(len6[0]))];
    }
}

#endif
