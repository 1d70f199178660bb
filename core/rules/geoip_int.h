#ifndef CHUTE_RULES_GEOIP_INT_H
#define CHUTE_RULES_GEOIP_INT_H

/* Private to core/rules: an mmdb search tree (geoip.c) and its flattened
 * index (geoip_index.c). */

#include <stddef.h>
#include <stdint.h>

/* The tree as libmaxminddb mapped it: |nodes| nodes of two |bits|-bit
 * records each (24, 28 or 32), checked to lie within the file. A record
 * below |nodes| is the next node, |nodes| itself "no data", anything above
 * it data at record - nodes - 16, which must be below |data_size|. */
struct geoip_tree {
    const uint8_t *tree;
    uint32_t nodes, bits;
    uint32_t data_size;
};

/* Record |right| of |node| (node < nodes). */
static inline uint32_t
geoip_record_at(const struct geoip_tree *t, uint32_t node, unsigned right)
{
    const uint8_t *p;
    switch (t->bits) {
    case 24:
        p = t->tree + (size_t)node * 6 + right * 3;
        return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    case 28:
        p = t->tree + (size_t)node * 7;
        if (right)
            return (uint32_t)(p[3] & 0x0f) << 24 | (uint32_t)p[4] << 16 | (uint32_t)p[5] << 8 | p[6];
        return (uint32_t)(p[3] & 0xf0) << 20 | (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    default:
        p = t->tree + (size_t)node * 8 + right * 4;
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
}

/* The data offset + 1 a record leads to, 0 for none (no data, or past the
 * data section: a corrupt file). |r| >= nodes. */
static inline uint32_t
geoip_leaf(const struct geoip_tree *t, uint32_t r)
{
    return r > t->nodes && r - t->nodes - 16 < t->data_size ? r - t->nodes - 16 + 1 : 0;
}

/* The tree flattened into address intervals, each with the data offset + 1
 * it leads to: one index probe and a search among the few intervals of the
 * address's /16 (IPv4) or /16 of its top 64 bits (IPv6), in place of one
 * dependent load per bit of the tree (each a cache and TLB miss on a
 * cache-cold lookup). NULL when it would take more than |max_bytes|, or
 * memory ran out: the caller walks the tree instead. |v4_start| is where
 * IPv4 begins (the ::/96 node of an IPv6 file, else the root); |v6| says
 * the file has IPv6. */
struct geoip_index;
struct geoip_index *geoip_index_build(const struct geoip_tree *t, uint32_t v4_start, int v6,
                                      size_t max_bytes);
void geoip_index_free(struct geoip_index *ix);
size_t geoip_index_bytes(const struct geoip_index *ix);

/* The value id of |addr| (4 bytes when !v6, else 16), below
 * geoip_index_ids: geoip_index_value gives its data offset + 1, or 0 for
 * none. Addresses under a subtree the index left to the tree (past /64 in
 * IPv6, or shared by several parents) are walked from there: then
 * GEOIP_NO_ID, with *off the data offset + 1 (0: none). */
#define GEOIP_NO_ID UINT32_MAX
uint32_t geoip_index_find(const struct geoip_index *ix, const struct geoip_tree *t, int v6,
                          const uint8_t *addr, uint32_t *off);
/* Starts loading what geoip_index_find reads first for |addr|. */
void geoip_index_prefetch(const struct geoip_index *ix, int v6, const uint8_t *addr);
uint32_t geoip_index_value(const struct geoip_index *ix, uint32_t id);
size_t geoip_index_ids(const struct geoip_index *ix);

/* From |node| at bit |i| of |addr| down to a record past the tree. */
uint32_t geoip_walk(const struct geoip_tree *t, uint32_t node, const uint8_t *addr, int i,
                    int nbits);

/* Test seam: when set (nonzero), every file opens as a big one would, with
 * this byte limit for its index: 1 makes it walk from the big start
 * tables, SIZE_MAX gives even a small file its index. */
extern size_t rules_geoip_index_limit;

#endif
