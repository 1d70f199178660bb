#ifndef CHUTE_NETSTACK_NETSTACK_H
#define CHUTE_NETSTACK_NETSTACK_H

/* lwIP glue: TCP segments read from the TUN are injected straight into
 * lwIP's tcp_input (its IP layer never runs), lwIP's output goes to the
 * TUN's write queue, and each accepted lwIP connection is relayed to an
 * upstream socket with back-pressure both ways.
 *
 * lwIP keeps its state in globals: one engine per process may use the
 * netstack. Loop thread only. */

#include <stddef.h>
#include <stdint.h>

struct flow_env;
struct ip_view;
struct tun;

struct netstack_stats {
    uint64_t heap_used, heap_max, heap_size; /* lwIP's packet heap (MEM_SIZE) */
    uint64_t heap_errors;                    /* allocations the heap refused */
    uint64_t rx_drops;                       /* segments dropped: no pbuf */
    uint64_t listeners;                      /* ANY listeners (one per port) */
    uint64_t listener_fails;                 /* SYNs dropped: listener pool empty */
    uint64_t conns_active, conns_total;
    uint64_t syn_dups;                       /* SYNs repeated while connecting */
    uint64_t syn_dropped;                    /* SYNs too long to hold (carrying data) */
    uint64_t tw_reused;                      /* TIME_WAIT pcbs ended by a new SYN on their tuple */
    uint64_t sniffed;                        /* flows named from their first bytes (SNI, Host) */
    uint64_t rst_sent;                       /* refused, unreachable, rejected */
    uint64_t mem_pauses;                     /* times the global cap paused reads */
    uint64_t fast_path;                      /* segments of known flows: no Lua, no lookup */
};

/* Starts lwIP with a netif of |mtu| whose output goes to |tun|; new flows
 * go through |env| (kept: it must outlive the netstack). */
int netstack_init(const struct flow_env *env, struct tun *tun, int mtu, char *err, size_t errlen);
/* Aborts every connection and stops. */
void netstack_fini(void);

/* A TCP segment from the TUN: a SYN for a new 5-tuple opens a flow (routed
 * by the script, connected upstream before lwIP answers it); anything else
 * goes to lwIP. */
void netstack_tcp_input(const struct ip_view *v);

/* Sends the client bytes received during this batch upstream (one write
 * per connection). Call after each batch and before the loop sleeps. */
void netstack_flush(void);

/* Runs lwIP's due timers and resumes connections paused by the memory cap.
 * Returns the seconds until the next timer is due. */
double netstack_poll(void);

void netstack_stats(struct netstack_stats *out);

#endif
