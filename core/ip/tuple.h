#ifndef CHUTE_IP_TUPLE_H
#define CHUTE_IP_TUPLE_H

/* The 5-tuple table of the TUN path (netstack's TCP, flow's UDP NAT): O(1) lookup of a packet's flow, no
 * allocation per packet (nodes are embedded in the flow's owner; the bucket
 * array grows by doubling when the load passes 1, which is per-flow work). */

#include <stddef.h>
#include <stdint.h>

/* 40 bytes, hashed and compared whole: every byte, padding too, must be
 * set (zero what you do not fill). */
struct ip_tuple {
    uint8_t proto;   /* IPPROTO_TCP / IPPROTO_UDP */
    uint8_t version; /* 4 or 6 */
    uint16_t sport, dport; /* host order */
    uint8_t src[16], dst[16]; /* v4: first 4 bytes, rest zero */
    uint16_t _zero;
};
_Static_assert(sizeof(struct ip_tuple) == 40, "ip_tuple is hashed as 5 words");

struct ip_tuple_node {
    struct ip_tuple_node *_next;
    uint32_t _hash;
    struct ip_tuple key;
};

struct ip_tuple_table;

struct ip_tuple_table *ip_tuple_table_new(void);
void ip_tuple_table_free(struct ip_tuple_table *h);

uint32_t ip_tuple_hash(const struct ip_tuple_table *h, const struct ip_tuple *k);
/* Finds the node with |k| (|hash| from ip_tuple_hash); NULL if none. */
struct ip_tuple_node *ip_tuple_lookup(const struct ip_tuple_table *h, const struct ip_tuple *k,
                                   uint32_t hash);
/* Links |n| (its key set, not already in a table). Returns -1 only if the
 * table had to grow and could not. */
int ip_tuple_insert(struct ip_tuple_table *h, struct ip_tuple_node *n, uint32_t hash);
void ip_tuple_remove(struct ip_tuple_table *h, struct ip_tuple_node *n);

#endif
