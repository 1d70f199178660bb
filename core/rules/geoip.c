/* mmdb lookups through libmaxminddb, with each data record's codes
 * decoded once: libmaxminddb's MMDB_aget_value walks a record's map by
 * key names on every call, which would cost more than the tree walk. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <maxminddb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rules/geoip.h"

#define SLOTS 4096   /* records remembered, direct-mapped by data offset */
#define CODES 1024   /* distinct codes interned */

struct slot {
    uint32_t key;    /* data offset + 1; 0 empty */
    uint32_t asn;
    uint8_t n, has_asn;
    uint16_t idx[RULES_GEOIP_MAX_CODES];
};

struct rules_geoip {
    MMDB_s db;
    struct slot slots[SLOTS];
    char codes[CODES][RULES_GEOIP_CODE_MAX];
    size_t ncodes;
    char scratch[RULES_GEOIP_MAX_CODES][RULES_GEOIP_CODE_MAX]; /* codes past CODES */
    char type[64];
};

struct rules_geoip *
rules_geoip_open(const char *path, char *err, size_t errlen)
{
    struct rules_geoip *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    /* libmaxminddb says "Error opening the specified MaxMind DB file"
     * whatever went wrong: the system's reason is clearer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(g);
        return NULL;
    }
    close(fd);
    int rc = MMDB_open(path, MMDB_MODE_MMAP, &g->db);
    if (rc != MMDB_SUCCESS) {
        snprintf(err, errlen, "%s: %s", path, MMDB_strerror(rc));
        free(g);
        return NULL;
    }
    snprintf(g->type, sizeof(g->type), "%s",
             g->db.metadata.database_type ? g->db.metadata.database_type : "");
    return g;
}

void
rules_geoip_free(struct rules_geoip *g)
{
    if (g == NULL)
        return;
    MMDB_close(&g->db);
    free(g);
}

const char *
rules_geoip_type(const struct rules_geoip *g)
{
    return g->type;
}

uint64_t
rules_geoip_built(const struct rules_geoip *g)
{
    return g->db.metadata.build_epoch;
}

static int
lookup(struct rules_geoip *g, int family, const uint8_t *addr, MMDB_entry_s *e)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct sockaddr_storage ss;
    int mmerr = 0;

    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET6 && memcmp(addr, mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    if (family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        memcpy(&s4->sin_addr, addr, 4);
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        memcpy(&s6->sin6_addr, addr, 16);
    } else {
        return 0;
    }
    /* An IPv6 address in an IPv4-only file is an error here: no data. */
    MMDB_lookup_result_s res = MMDB_lookup_sockaddr(&g->db, (const struct sockaddr *)&ss, &mmerr);
    if (mmerr != MMDB_SUCCESS || !res.found_entry)
        return 0;
    *e = res.entry;
    return 1;
}

/* The interned index of |s| (|n| bytes), upper-cased; -1 when full. */
static int
intern(struct rules_geoip *g, const char *s, size_t n)
{
    char up[RULES_GEOIP_CODE_MAX];
    if (n >= sizeof(up))
        n = sizeof(up) - 1;
    for (size_t i = 0; i < n; i++)
        up[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    up[n] = '\0';
    for (size_t i = 0; i < g->ncodes; i++)
        if (strcmp(g->codes[i], up) == 0)
            return (int)i;
    if (g->ncodes == CODES)
        return -1;
    memcpy(g->codes[g->ncodes], up, n + 1);
    return (int)g->ncodes++;
}

static int
get(MMDB_entry_s *e, MMDB_entry_data_s *d, const char *const *path)
{
    return MMDB_aget_value(e, d, path) == MMDB_SUCCESS && d->has_data;
}

static void
add_code(struct rules_geoip *g, struct slot *s, const MMDB_entry_data_s *d, int *cacheable)
{
    if (d->type != MMDB_DATA_TYPE_UTF8_STRING || d->data_size == 0 ||
        s->n == RULES_GEOIP_MAX_CODES)
        return;
    int i = intern(g, d->utf8_string, d->data_size);
    if (i < 0) { /* a file with thousands of names: this record is not remembered */
        size_t n = d->data_size < RULES_GEOIP_CODE_MAX - 1 ? d->data_size : RULES_GEOIP_CODE_MAX - 1;
        memcpy(g->scratch[s->n], d->utf8_string, n);
        g->scratch[s->n][n] = '\0';
        *cacheable = 0;
    }
    unsigned k = s->n++;
    s->idx[k] = (uint16_t)(i < 0 ? CODES + 1 + k : (unsigned)i);
}

/* Decodes record |e| into |s|, under whichever schema it has. */
static int
decode(struct rules_geoip *g, MMDB_entry_s *e, struct slot *s)
{
    static const char *const iso[] = {"country", "iso_code", NULL};
    static const char *const flat[] = {"country_code", NULL};
    static const char *const asn[] = {"autonomous_system_number", NULL};
    static const char *const self[] = {NULL};
    MMDB_entry_data_s d;
    int cacheable = 1;

    s->n = s->has_asn = 0;
    if (!get(e, &d, self))
        return cacheable;
    if (d.type == MMDB_DATA_TYPE_UTF8_STRING) {
        add_code(g, s, &d, &cacheable);
    } else if (d.type == MMDB_DATA_TYPE_ARRAY) {
        for (unsigned i = 0; i < RULES_GEOIP_MAX_CODES && i < d.data_size; i++) {
            char num[4];
            const char *const path[] = {num, NULL};
            snprintf(num, sizeof(num), "%u", i);
            if (get(e, &d, path))
                add_code(g, s, &d, &cacheable);
        }
    } else if (d.type == MMDB_DATA_TYPE_MAP) {
        if (get(e, &d, iso) || get(e, &d, flat))
            add_code(g, s, &d, &cacheable);
        if (get(e, &d, asn)) {
            s->has_asn = 1;
            if (d.type == MMDB_DATA_TYPE_UINT32)
                s->asn = d.uint32;
            else if (d.type == MMDB_DATA_TYPE_UINT16)
                s->asn = d.uint16;
            else if (d.type == MMDB_DATA_TYPE_UINT64 && d.uint64 <= UINT32_MAX)
                s->asn = (uint32_t)d.uint64;
            else
                s->has_asn = 0;
        }
    }
    return cacheable;
}

static struct slot *
record(struct rules_geoip *g, int family, const uint8_t *addr)
{
    static struct slot uncached;
    MMDB_entry_s e;

    if (!lookup(g, family, addr, &e))
        return NULL;
    uint32_t key = e.offset + 1;
    struct slot *s = &g->slots[(key * 2654435761u) >> 20 & (SLOTS - 1)];
    if (s->key == key)
        return s;
    if (decode(g, &e, s)) {
        s->key = key;
        return s;
    }
    s->key = 0;
    uncached = *s;
    return &uncached;
}

int
rules_geoip_codes(struct rules_geoip *g, int family, const uint8_t *addr,
                  const char *codes[RULES_GEOIP_MAX_CODES])
{
    struct slot *s = record(g, family, addr);
    if (s == NULL)
        return 0;
    for (unsigned i = 0; i < s->n; i++)
        codes[i] = s->idx[i] < CODES ? g->codes[s->idx[i]] : g->scratch[s->idx[i] - CODES - 1];
    return s->n;
}

int
rules_geoip_asn(struct rules_geoip *g, int family, const uint8_t *addr, uint32_t *asn)
{
    struct slot *s = record(g, family, addr);
    if (s == NULL || !s->has_asn)
        return 0;
    *asn = s->asn;
    return 1;
}

int
rules_geoip_is_lan(int family, const uint8_t *a)
{
    static const uint8_t zero[16];
    if (family == AF_INET6 && memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
        family = AF_INET;
        a += 12;
    }
    if (family == AF_INET)
        return a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
               (a[0] == 192 && a[1] == 168) || a[0] == 127 || (a[0] == 169 && a[1] == 254) ||
               (a[0] & 0xf0) == 224 || memcmp(a, zero, 4) == 0;
    if (family != AF_INET6)
        return 0;
    return (a[0] & 0xfe) == 0xfc || a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) ||
           (memcmp(a, zero, 15) == 0 && (a[15] == 0 || a[15] == 1));
}
