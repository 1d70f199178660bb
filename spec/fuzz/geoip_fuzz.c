/* mmdb files on arbitrary bytes (remote GEO files come from the network):
 * libmaxminddb's checks at open, then chute's flattened index and its tree
 * walk over whatever tree passed them. The file is opened twice, indexed
 * (rules_geoip_index_limit) and walked (the default for a tree under 256
 * KiB: every input here), and both must give the same codes
 * and ASN for addresses drawn from the input, in bounded time and memory
 * (the index's pass visits each node once: a tree that loops or shares
 * subtrees cannot make it explode). */

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rules/geoip.h"
#include "rules/geoip_int.h"
#include "fuzz.h"

static void
same(struct rules_geoip *a, struct rules_geoip *b, int family, const uint8_t *addr)
{
    const char *ca[RULES_GEOIP_MAX_CODES], *cb[RULES_GEOIP_MAX_CODES];
    int na = rules_geoip_codes(a, family, addr, ca), nb = rules_geoip_codes(b, family, addr, cb);
    CHECK(na == nb && na >= 0 && na <= RULES_GEOIP_MAX_CODES);
    for (int i = 0; i < na; i++)
        CHECK(strcmp(ca[i], cb[i]) == 0);
    uint32_t x = 0, y = 0;
    CHECK(rules_geoip_asn(a, family, addr, &x) == rules_geoip_asn(b, family, addr, &y));
    CHECK(x == y);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("geoip_fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64], err[512];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rules_geoip_index_limit = SIZE_MAX;
    struct rules_geoip *ix = rules_geoip_open(path, err, sizeof(err));
    rules_geoip_index_limit = 0; /* a small tree (any input here) is walked */
    struct rules_geoip *walk = rules_geoip_open(path, err, sizeof(err));
    close(fd);
    CHECK((ix == NULL) == (walk == NULL)); /* an index that cannot be built falls back to the walk */
    if (ix != NULL && walk != NULL) {
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < size; i++)
            h = (h ^ data[i]) * 1099511628211ull;
        for (int i = 0; i < 64; i++) {
            uint8_t a[16];
            for (int k = 0; k < 16; k++) {
                h ^= h << 13, h ^= h >> 7, h ^= h << 17;
                a[k] = (uint8_t)h;
            }
            if (i % 8 == 0) /* the edges: all zeros, all ones, IPv4-mapped */
                memset(a, i % 16 ? 0xff : 0, 16);
            if (i % 8 == 1)
                memcpy(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
            same(ix, walk, AF_INET, a);
            same(ix, walk, AF_INET6, a);
            rules_geoip_prefetch(ix, AF_INET6, a);
        }
    }
    rules_geoip_free(ix);
    rules_geoip_free(walk);
    return 0;
}
