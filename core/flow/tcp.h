#ifndef CHUTE_FLOW_TCP_H
#define CHUTE_FLOW_TCP_H

/* TCP over the TUN: the flow of each connection netstack holds. A SYN for a
 * new 5-tuple becomes a flow, named (fake IP -> name) and decided once;
 * the upstream is opened before lwIP answers the SYN, so a refused or
 * unreachable destination (or REJECT) answers the client with a RST. A
 * flow whose route() asked for the host it lacks is accepted first and
 * decided again once its first bytes name the host (TLS SNI, HTTP Host) or
 * FLOW_SNIFF_WAIT passes. Then the client's stream and the upstream's go to
 * the one relay (flow/relay.h). */

struct flow_env;
struct netstack_handler;
struct flow_tcp_table;

/* Flows go through |env| (kept: it must outlive the table). */
struct flow_tcp_table *flow_tcp_new(const struct flow_env *env);
/* Closes every flow ("shutdown": the clients and upstreams are reset) and
 * frees the table. Before netstack_fini. */
void flow_tcp_free(struct flow_tcp_table *t);
/* What netstack_init takes: the table's SYN, established and gone. */
const struct netstack_handler *flow_tcp_handler(const struct flow_tcp_table *t);

#endif
