#ifndef CHUTE_FLOW_HASH_H
#define CHUTE_FLOW_HASH_H

/* The 5-tuple table of the TUN path: O(1) lookup of a packet's flow, no
 * allocation per packet (nodes are embedded in the flow's owner; the bucket
 * array grows by doubling when the load passes 1, which is per-flow work). */

#include <stddef.h>
#include <stdint.h>

/* 40 bytes, hashed and compared whole: every byte, padding too, must be
 * set (zero what you do not fill). */
struct flow_key {
    uint8_t proto;   /* IPPROTO_TCP / IPPROTO_UDP */
    uint8_t version; /* 4 or 6 */
    uint16_t sport, dport; /* host order */
    uint8_t src[16], dst[16]; /* v4: first 4 bytes, rest zero */
    uint16_t _zero;
};
_Static_assert(sizeof(struct flow_key) == 40, "flow_key is hashed as 5 words");

struct flow_node {
    struct flow_node *_next;
    uint32_t _hash;
    struct flow_key key;
};

struct flow_hash;

struct flow_hash *flow_hash_new(void);
void flow_hash_free(struct flow_hash *h);

uint32_t flow_hash_key(const struct flow_hash *h, const struct flow_key *k);
/* Finds the node with |k| (|hash| from flow_hash_key); NULL if none. */
struct flow_node *flow_hash_lookup(const struct flow_hash *h, const struct flow_key *k,
                                   uint32_t hash);
/* Links |n| (its key set, not already in a table). Returns -1 only if the
 * table had to grow and could not. */
int flow_hash_insert(struct flow_hash *h, struct flow_node *n, uint32_t hash);
void flow_hash_remove(struct flow_hash *h, struct flow_node *n);

#endif
