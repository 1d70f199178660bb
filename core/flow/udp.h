#ifndef CHUTE_FLOW_UDP_H
#define CHUTE_FLOW_UDP_H

/* UDP over the TUN: UDP never enters lwIP. The first datagram of a 5-tuple
 * makes a NAT entry (routed once by the script); its datagrams go out on a
 * connected upstream socket, replies are built back into IP packets and
 * queued to the TUN, and an entry without traffic for the UDP timeout
 * expires. */

#include <stdint.h>

#include "log/counter.h"

struct flow_env;
struct tun;
struct ip_view;
struct flow_udp_table;

/* The UDP NAT's counters, one X(field, key) each (log/counter.h). */
#define FLOW_UDP_STATS(X)                                                                          \
    X(active, active)                                                                              \
    X(total, total)                                                                                \
    X(dropped, dropped)   /* datagrams not sent: socket full, reply too big */                     \
    X(rejected, rejected) /* answered with ICMP unreachable */

struct flow_udp_stats {
#define X(field, key) uint64_t field;
    FLOW_UDP_STATS(X)
#undef X
};
/* FLOW_UDP_STATS as a table over struct flow_udp_stats. */
extern const struct log_counter flow_udp_counters[];

/* Datagrams go through |env| (kept) and replies to |tun|'s write queue. */
struct flow_udp_table *flow_udp_new(const struct flow_env *env, struct tun *tun);
/* Closes every entry and frees the table. */
void flow_udp_free(struct flow_udp_table *t);

void flow_udp_input(struct flow_udp_table *t, const struct ip_view *v);
void flow_udp_stats(const struct flow_udp_table *t, struct flow_udp_stats *out);

#endif
