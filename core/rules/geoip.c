/* mmdb files opened, checked and decoded by libmaxminddb; the search tree
 * walked here, on the file libmaxminddb mapped (MaxMind DB format 2.0: a
 * node is two records of 24, 28 or 32 bits, a record below node_count is
 * the next node, node_count itself "no data", anything above it data at
 * record - node_count - 16 in the data section). MMDB_lookup_sockaddr
 * costs ~3x this loop (a generic record getter per bit, the result built),
 * and a GEOIP rule runs once per new flow. Each data record's codes are
 * decoded once (MMDB_aget_value walks a map by key names every call). */

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

#define SLOTS 8192   /* records remembered, by data offset (linear probing) */
#define PROBES 8     /* slots tried before one is reused: a City file has more
                      * records than SLOTS; a country file ~250 to a few thousand */
#define CODES 1024   /* distinct codes interned */
/* Bits of the address a lookup starts below: a table of 2^TOP4 records (4
 * MiB, built in ~10 ms) for the IPv4 part of a file of at least BIG_FILE
 * bytes, where most networks are /16-/24 (2^TOP_SMALL for a smaller file),
 * and 2^TOP6 (256 KiB) for IPv6. Each bit is a dependent load the walk does
 * not do, and those loads miss the CPU's caches: random IPv4 lookups in a
 * 10 MB file took 150-170 ns from a 16-bit table, 55-75 ns from this one. */
#define TOP4 20
#define TOP_SMALL 16
#define TOP6 16
#define BIG_FILE (1 << 20)

struct slot {
    uint32_t key;    /* data offset + 1; 0 empty */
    uint32_t asn;
    uint8_t n, has_asn;
    uint16_t idx[RULES_GEOIP_MAX_CODES];
};

struct rules_geoip {
    MMDB_s db;
    const uint8_t *tree;
    uint32_t nodes, bits;  /* node_count, record_size */
    uint32_t v4_start;     /* the node for ::/96 (an IPv6 file), else 0 */
    /* The records TOP4 bits down from the IPv4 start and TOP6 from the
     * root (an IPv6 file): a lookup starts there. */
    uint32_t *top4, *top6;
    int top4_bits;
    struct slot slots[SLOTS];
    char codes[CODES][RULES_GEOIP_CODE_MAX];
    size_t ncodes;
    char type[64];
};

/* Record |right| of |node|; node < nodes, so within the tree, which
 * libmaxminddb checked lies within the file. */
static inline uint32_t
record_at(const struct rules_geoip *g, uint32_t node, unsigned right)
{
    const uint8_t *p;
    switch (g->bits) {
    case 24:
        p = g->tree + (size_t)node * 6 + right * 3;
        return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    case 28:
        p = g->tree + (size_t)node * 7;
        if (right)
            return (uint32_t)(p[3] & 0x0f) << 24 | (uint32_t)p[4] << 16 | (uint32_t)p[5] << 8 | p[6];
        return (uint32_t)(p[3] & 0xf0) << 20 | (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    default:
        p = g->tree + (size_t)node * 8 + right * 4;
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
}

/* Where each |depth|-bit prefix below |start| leads: a node |depth|
 * levels down, or the record that ended the walk sooner (>= nodes). Built
 * level by level, each from the one above. */
static uint32_t *
top_table(const struct rules_geoip *g, uint32_t start, int depth)
{
    uint32_t *t = malloc(((size_t)1 << depth) * sizeof(*t));
    if (t == NULL)
        return NULL;
    t[0] = start;
    for (int d = 0; d < depth; d++) /* 2^d entries become 2^(d+1), in place from the end */
        for (uint32_t i = 1u << d; i-- > 0;) {
            uint32_t node = t[i];
            t[2 * i] = node < g->nodes ? record_at(g, node, 0) : node;
            t[2 * i + 1] = node < g->nodes ? record_at(g, node, 1) : node;
        }
    return t;
}

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
    g->tree = g->db.file_content;
    g->nodes = g->db.metadata.node_count;
    g->bits = g->db.metadata.record_size;
    if (g->bits != 24 && g->bits != 28 && g->bits != 32) { /* libmaxminddb refuses them too */
        snprintf(err, errlen, "%s: unsupported record size %u", path, g->bits);
        rules_geoip_free(g);
        return NULL;
    }
    /* The walk reads nodes with no bound check of its own: the whole tree
     * must lie within the file (libmaxminddb checks it too; this does not
     * depend on its version). */
    if ((uint64_t)g->nodes * g->bits / 4 + 16 > (uint64_t)g->db.file_size) {
        snprintf(err, errlen, "%s: a search tree of %u nodes does not fit in the file's %lld "
                 "bytes (cut short?)", path, g->nodes, (long long)g->db.file_size);
        rules_geoip_free(g);
        return NULL;
    }
    /* IPv4 addresses of an IPv6 file live under ::/96. */
    uint32_t node = 0;
    if (g->db.metadata.ip_version == 6)
        for (int depth = 0; depth < 96 && node < g->nodes; depth++)
            node = record_at(g, node, 0);
    g->v4_start = node;
    g->top4_bits = g->db.file_size >= BIG_FILE ? TOP4 : TOP_SMALL;
    g->top4 = top_table(g, node, g->top4_bits);
    g->top6 = g->db.metadata.ip_version == 6 ? top_table(g, 0, TOP6) : NULL;
    if (g->top4 == NULL || (g->db.metadata.ip_version == 6 && g->top6 == NULL)) {
        snprintf(err, errlen, "%s: out of memory", path);
        rules_geoip_free(g);
        return NULL;
    }
    return g;
}

void
rules_geoip_free(struct rules_geoip *g)
{
    if (g == NULL)
        return;
    MMDB_close(&g->db);
    free(g->top4);
    free(g->top6);
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

/* From |node| at bit |i| of |addr| down to a record past the tree; one
 * loop per record size, so the step is a load and a shift. */
static uint32_t
walk(const struct rules_geoip *g, uint32_t node, const uint8_t *addr, int i, int nbits)
{
    const uint8_t *t = g->tree, *p;
    const uint32_t n = g->nodes;
#define BIT(i) (addr[(i) >> 3] >> (7 - ((i) & 7)) & 1)
    switch (g->bits) {
    case 24:
        for (; i < nbits && node < n; i++) {
            p = t + (size_t)node * 6 + BIT(i) * 3;
            node = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
        }
        return node;
    case 28:
        for (; i < nbits && node < n; i++)
            node = record_at(g, node, BIT(i));
        return node;
    default:
        for (; i < nbits && node < n; i++) {
            p = t + (size_t)node * 8 + BIT(i) * 4;
            node = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        }
        return node;
    }
#undef BIT
}

static int
lookup(struct rules_geoip *g, int family, const uint8_t *addr, MMDB_entry_s *e)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint32_t node;
    int nbits;

    if (family == AF_INET6 && memcmp(addr, mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    int from;
    if (family == AF_INET) {
        node = g->top4[((uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8) >>
                       (32 - g->top4_bits)];
        nbits = 32;
        from = g->top4_bits;
    } else if (family == AF_INET6 && g->top6 != NULL) {
        node = g->top6[(uint32_t)addr[0] << 8 | addr[1]];
        nbits = 128;
        from = TOP6;
    } else {
        return 0; /* an IPv6 address in an IPv4-only file */
    }
    node = walk(g, node, addr, from, nbits);
    /* node_count: no data; below it: a tree deeper than the address
     * (a corrupt file); past the data section: corrupt too. */
    if (node <= g->nodes || node - g->nodes - 16 >= g->db.data_section_size)
        return 0;
    e->mmdb = &g->db;
    e->offset = node - g->nodes - 16;
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

/* A code past the CODES distinct ones is left out: country files have a
 * few hundred, category files (Meta-geoip0) a few dozen more. */
static void
add_code(struct rules_geoip *g, struct slot *s, const MMDB_entry_data_s *d)
{
    if (d->type != MMDB_DATA_TYPE_UTF8_STRING || d->data_size == 0 ||
        s->n == RULES_GEOIP_MAX_CODES)
        return;
    int i = intern(g, d->utf8_string, d->data_size);
    if (i >= 0)
        s->idx[s->n++] = (uint16_t)i;
}

/* Decodes record |e| into |s|, under whichever schema it has. */
static void
decode(struct rules_geoip *g, MMDB_entry_s *e, struct slot *s)
{
    static const char *const iso[] = {"country", "iso_code", NULL};
    static const char *const flat[] = {"country_code", NULL};
    static const char *const asn[] = {"autonomous_system_number", NULL};
    static const char *const self[] = {NULL};
    MMDB_entry_data_s d;

    s->n = s->has_asn = 0;
    if (!get(e, &d, self))
        return;
    if (d.type == MMDB_DATA_TYPE_UTF8_STRING) {
        add_code(g, s, &d);
    } else if (d.type == MMDB_DATA_TYPE_ARRAY) {
        for (unsigned i = 0; i < RULES_GEOIP_MAX_CODES && i < d.data_size; i++) {
            char num[4];
            const char *const path[] = {num, NULL};
            snprintf(num, sizeof(num), "%u", i);
            if (get(e, &d, path))
                add_code(g, s, &d);
        }
    } else if (d.type == MMDB_DATA_TYPE_MAP) {
        if (get(e, &d, iso) || get(e, &d, flat))
            add_code(g, s, &d);
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
}

static struct slot *
record(struct rules_geoip *g, int family, const uint8_t *addr)
{
    MMDB_entry_s e;

    if (!lookup(g, family, addr, &e))
        return NULL;
    uint32_t key = e.offset + 1, h = (key * 2654435761u) >> 19;
    for (unsigned i = 0; i < PROBES; i++) {
        struct slot *s = &g->slots[(h + i) & (SLOTS - 1)];
        if (s->key == key)
            return s;
        if (s->key == 0 || i == PROBES - 1) {
            if (s->key != 0) /* all taken: the last one tried is reused */
                s = &g->slots[h & (SLOTS - 1)];
            decode(g, &e, s);
            s->key = key;
            return s;
        }
    }
    return NULL; /* not reached */
}

int
rules_geoip_codes(struct rules_geoip *g, int family, const uint8_t *addr,
                  const char *codes[RULES_GEOIP_MAX_CODES])
{
    struct slot *s = record(g, family, addr);
    if (s == NULL)
        return 0;
    for (unsigned i = 0; i < s->n; i++)
        codes[i] = g->codes[s->idx[i]];
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
