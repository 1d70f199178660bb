/* mmdb files opened, checked and decoded by libmaxminddb; the search tree
 * walked here, on the file libmaxminddb mapped (MaxMind DB format 2.0: a
 * node is two records of 24, 28 or 32 bits, a record below node_count is
 * the next node, node_count itself "no data", anything above it data at
 * record - node_count - 16 in the data section). A lookup goes through the
 * tree flattened into intervals at open (geoip_index.c), or, for a file
 * whose index would be too big, walks it from a start table: both ~3x
 * faster than MMDB_lookup_sockaddr (a generic record getter per bit, the
 * result built), and a GEOIP rule runs once per new flow. Each data
 * record's codes are decoded once (MMDB_aget_value walks a map by key
 * names every call). */

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
#include "rules/geoip_int.h"

#define SLOTS 8192   /* records remembered, by data offset (linear probing) */
#define PROBES 8     /* slots tried before one is reused: a City file has more
                      * records than SLOTS; a country file ~250 to a few thousand */
#define CODES 1024   /* distinct codes interned */
/* The index may take up to this much, or half the file's size if more. */
#define INDEX_MAX ((size_t)16 << 20)
/* A tree smaller than this stays in the CPU's caches: it is walked, from a
 * table of 2^TOP_SMALL records (16 KiB) for each family, not indexed (the
 * index's 4.5 MiB would be a cache miss of their own). */
#define SMALL_TREE (256u << 10)
#define TOP_SMALL 12
/* A big tree whose index would take too much (an ASN or City file) is
 * walked from a table of 2^TOP4 records (4 MiB, built in ~10 ms) for IPv4,
 * where most networks are /16-/24, and 2^TOP6 (256 KiB) for IPv6. Each bit
 * is a dependent load the walk does not do, and those loads miss the CPU's
 * caches: random IPv4 lookups in a 10 MB file took 150-170 ns from a 16-bit
 * table, 55-75 ns from this one. */
#define TOP4 20
#define TOP6 16

struct slot {
    uint32_t key;    /* data offset + 1; 0 empty */
    uint32_t asn;
    uint8_t n, has_asn;
    uint8_t known;   /* by id: decoded (key 0: no data) */
    uint16_t idx[RULES_GEOIP_MAX_CODES];
};

struct rules_geoip {
    MMDB_s db;
    struct geoip_tree t;
    uint32_t v4_start;     /* the node for ::/96 (an IPv6 file), else 0 */
    int v6;                /* the file has IPv6 */
    struct geoip_index *ix;
    struct slot *byid;     /* with the index: the records by value id, contiguous */
    /* Without the index: the records TOP4 bits down from the IPv4 start
     * and TOP6 from the root (an IPv6 file): a walk starts there. */
    uint32_t *top4, *top6;
    int top4_bits, top6_bits;
    struct slot slots[SLOTS];
    char codes[CODES][RULES_GEOIP_CODE_MAX];
    size_t ncodes;
    char type[64];
};

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
            t[2 * i] = node < g->t.nodes ? geoip_record_at(&g->t, node, 0) : node;
            t[2 * i + 1] = node < g->t.nodes ? geoip_record_at(&g->t, node, 1) : node;
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
    g->t.tree = g->db.file_content;
    g->t.nodes = g->db.metadata.node_count;
    g->t.bits = g->db.metadata.record_size;
    g->t.data_size = g->db.data_section_size;
    g->v6 = g->db.metadata.ip_version == 6;
    if (g->t.bits != 24 && g->t.bits != 28 && g->t.bits != 32) { /* libmaxminddb refuses them too */
        snprintf(err, errlen, "%s: unsupported record size %u", path, g->t.bits);
        rules_geoip_free(g);
        return NULL;
    }
    /* The walk reads nodes with no bound check of its own: the whole tree
     * must lie within the file (libmaxminddb checks it too; this does not
     * depend on its version). */
    if ((uint64_t)g->t.nodes * g->t.bits / 4 + 16 > (uint64_t)g->db.file_size) {
        snprintf(err, errlen, "%s: a search tree of %u nodes does not fit in the file's %lld "
                 "bytes (cut short?)", path, g->t.nodes, (long long)g->db.file_size);
        rules_geoip_free(g);
        return NULL;
    }
    /* IPv4 addresses of an IPv6 file live under ::/96. */
    uint32_t node = 0;
    if (g->v6)
        for (int depth = 0; depth < 96 && node < g->t.nodes; depth++)
            node = geoip_record_at(&g->t, node, 0);
    g->v4_start = node;
    int small = (uint64_t)g->t.nodes * g->t.bits / 4 < SMALL_TREE && !rules_geoip_index_limit;
    size_t max = (size_t)g->db.file_size / 2 > INDEX_MAX ? (size_t)g->db.file_size / 2 : INDEX_MAX;
    if (rules_geoip_index_limit)
        max = rules_geoip_index_limit;
    else if (small)
        max = 0;
    if (max > 0 && (g->ix = geoip_index_build(&g->t, node, g->v6, max)) != NULL) {
        g->byid = calloc(geoip_index_ids(g->ix), sizeof(*g->byid));
        if (g->byid != NULL)
            return g;
        geoip_index_free(g->ix);
        g->ix = NULL;
    }
    g->top4_bits = small ? TOP_SMALL : TOP4;
    g->top6_bits = small ? TOP_SMALL : TOP6;
    g->top4 = top_table(g, node, g->top4_bits);
    g->top6 = g->v6 ? top_table(g, 0, g->top6_bits) : NULL;
    if (g->top4 == NULL || (g->v6 && g->top6 == NULL)) {
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
    geoip_index_free(g->ix);
    free(g->byid);
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

/* The data offset + 1 of |addr|'s record by the tree, or 0. */
static uint32_t
lookup(struct rules_geoip *g, int family, const uint8_t *addr)
{
    uint32_t node;
    if (family == AF_INET) {
        node = g->top4[((uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8) >>
                       (32 - g->top4_bits)];
        node = geoip_walk(&g->t, node, addr, g->top4_bits, 32);
    } else {
        node = g->top6[((uint32_t)addr[0] << 16 | (uint32_t)addr[1] << 8 | addr[2]) >>
                       (24 - g->top6_bits)];
        node = geoip_walk(&g->t, node, addr, g->top6_bits, 128);
    }
    /* Below node_count: a tree deeper than the address (a corrupt file). */
    return node >= g->t.nodes ? geoip_leaf(&g->t, node) : 0;
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

/* |addr|'s record, decoded once: remembered by its value id (the index)
 * or, for the walk, by its data offset. NULL: no data. */
static struct slot *
record(struct rules_geoip *g, int family, const uint8_t *addr)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint32_t key;

    if (family == AF_INET6 && memcmp(addr, mapped, 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    if (family != AF_INET && (family != AF_INET6 || !g->v6))
        return NULL; /* an IPv6 address in an IPv4-only file */
    if (g->ix != NULL) {
        uint32_t id = geoip_index_find(g->ix, &g->t, family == AF_INET6, addr, &key);
        if (id != GEOIP_NO_ID) {
            struct slot *s = &g->byid[id];
            if (!s->known) {
                s->key = geoip_index_value(g->ix, id);
                s->known = 1;
                if (s->key != 0) {
                    MMDB_entry_s e = {.mmdb = &g->db, .offset = s->key - 1};
                    decode(g, &e, s);
                }
            }
            return s->key != 0 ? s : NULL;
        }
    } else {
        key = lookup(g, family, addr);
    }
    uint32_t h = (key * 2654435761u) >> 19;
    if (key == 0)
        return NULL;
    for (unsigned i = 0; i < PROBES; i++) {
        struct slot *s = &g->slots[(h + i) & (SLOTS - 1)];
        if (s->key == key)
            return s;
        if (s->key == 0 || i == PROBES - 1) {
            if (s->key != 0) /* all taken: the last one tried is reused */
                s = &g->slots[h & (SLOTS - 1)];
            MMDB_entry_s e = {.mmdb = &g->db, .offset = key - 1};
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

void
rules_geoip_prefetch(const struct rules_geoip *g, int family, const uint8_t *addr)
{
    if (family == AF_INET6 && memcmp(addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
        family = AF_INET;
        addr += 12;
    }
    if (family != AF_INET && (family != AF_INET6 || !g->v6))
        return;
    if (g->ix != NULL)
        geoip_index_prefetch(g->ix, family == AF_INET6, addr);
    else if (family == AF_INET)
        __builtin_prefetch(&g->top4[((uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 |
                                     (uint32_t)addr[2] << 8) >> (32 - g->top4_bits)]);
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
