#ifndef CHUTE_NETSTACK_NETSTACK_H
#define CHUTE_NETSTACK_NETSTACK_H

/* lwIP glue: TCP segments read from the TUN are injected straight into
 * lwIP's tcp_input (its IP layer never runs) and lwIP's output goes to the
 * TUN's write queue. A SYN for a new 5-tuple is held and handed to the
 * layer above (flow/tcp.c), which decides and connects upstream first;
 * then it accepts (lwIP answers the held SYN) or refuses (a RST), and an
 * accepted connection becomes an io_stream: client bytes are read in place
 * from lwIP's pbufs (peek/consume) and leave its window only as they are
 * consumed; writes go into lwIP's send buffer as far as it has room.
 *
 * lwIP keeps its state in globals: one engine per process may use the
 * netstack. Loop thread only. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "log/counter.h"

struct io_stream;
struct ip_view;
struct tun;
struct netstack_conn;

/* The layer above, injected. Every call comes from the loop, never from
 * inside an lwIP callback. */
struct netstack_handler {
    /* A SYN for a new 5-tuple (|v| valid during the call): answer, now or
     * later, with netstack_conn_accept or netstack_conn_refuse. */
    void (*syn)(void *ud, struct netstack_conn *c, const struct ip_view *v);
    /* The client completed the handshake: |s| is its connection, the
     * owner's from now on (io_close frees |c| with it). */
    void (*established)(void *arg, struct io_stream *s);
    /* An accepted connection ended before the handshake did (|why|:
     * "handshake timeout", "reset by client"): |c| is gone. */
    void (*gone)(void *arg, const char *why);
    void *ud;
};

/* The netstack's counters, one X(field, key) each (log/counter.h). */
#define NETSTACK_STATS(X)                                                                          \
    X(fast_path, fast_path)           /* segments of known flows: no Lua, no lookup */             \
    X(conns_active, tcp_active)       /* TCP connections from the TUN open now */                  \
    X(conns_total, tcp_total)         /* TCP connections from the TUN, in all */                   \
    X(syn_dups, syn_dups)             /* SYNs repeated while connecting */                         \
    X(syn_dropped, syn_dropped)       /* SYNs too long to hold (carrying data) */                  \
    X(tw_reused, tw_reused)           /* TIME_WAIT pcbs ended by a new SYN on their tuple */       \
    X(tw_trimmed, tw_trimmed)         /* TIME_WAIT pcbs ended early: over NETSTACK_TW_MAX */       \
    X(sniffed, sniffed)               /* flows named from their first bytes (SNI, Host) */         \
    X(rst_sent, rst_sent)             /* refused, unreachable, rejected */                         \
    X(heap_used, heap_used)           /* bytes of lwIP's packet heap in use */                      \
    X(heap_max, heap_max)             /* the most heap_used has been */                            \
    X(heap_size, heap_size)           /* the heap's cap: memory_limit's, else MEM_SIZE */           \
    X(heap_errors, heap_errors)       /* allocations the heap refused */                           \
    X(rx_drops, rx_drops)             /* segments dropped: no pbuf */                              \
    X(ooseq_freed, ooseq_freed)       /* pcbs whose out-of-order queue a full heap took back */    \
    X(tx_nocopy, tx_nocopy)           /* bytes read into chunks lwIP sends from (no copy) */       \
    X(rx_nocopy, rx_nocopy)           /* bytes lwIP took where the TUN read them (no copy) */      \
    X(mem_pauses, mem_pauses)         /* times the global cap paused reads */                      \
    X(listeners, listeners)           /* ANY listeners (one per port) */                           \
    X(listener_fails, listener_fails) /* SYNs dropped: listener pool empty */

struct netstack_stats {
#define X(field, key) uint64_t field;
    NETSTACK_STATS(X)
#undef X
};
/* NETSTACK_STATS as a table over struct netstack_stats. */
extern const struct log_counter netstack_counters[];

/* Caps below lwIP's build sizes (lwipopts.h), from the engine's
 * memory_limit; 0 keeps a build size. Bytes of the packet heap chute may
 * fill (past 3/4 of it connections pause, below 1/2 they go on), and
 * elements of the pools. */
struct netstack_limits {
    size_t heap;
    size_t pcbs, listeners, segs, pbufs;
};
#define NETSTACK_HEAP_MAX ((size_t)16 << 20)
#define NETSTACK_PCBS_MAX 8192
#define NETSTACK_LISTENERS_MAX 16384
#define NETSTACK_SEGS_MAX 65535
#define NETSTACK_PBUFS_MAX 65535
/* Takes effect at the next netstack_init (a pool in use keeps its size). */
void netstack_set_limits(const struct netstack_limits *l);

/* Starts lwIP with a netif of |mtu| whose output goes to |tun|; new
 * connections go to |h| (kept: it must outlive the netstack). */
int netstack_init(struct ev_loop *loop, const struct netstack_handler *h, struct tun *tun, int mtu,
                  char *err, size_t errlen);
/* Aborts every connection and stops. */
void netstack_fini(void);

/* The owner's argument for established() and gone(). */
void netstack_conn_set_arg(struct netstack_conn *c, void *arg);
/* Hands the held SYN to lwIP: it answers SYN-ACK, and established() or
 * gone() follows, within |timeout| seconds. */
void netstack_conn_accept(struct netstack_conn *c, double timeout);
/* Refuses a held SYN: a RST (|rst|) or nothing; frees |c|. After the
 * accept, before established() or gone(): the client gets a RST. */
void netstack_conn_refuse(struct netstack_conn *c, int rst);
/* A flow named from its first bytes, for the stats. */
void netstack_count_sniffed(void);

/* A TCP segment from the TUN: a SYN for a new 5-tuple is held and goes to
 * the handler's syn(); anything else goes to lwIP (the fast path). */
void netstack_tcp_input(const struct ip_view *v);

/* Sends what connections wrote during this batch (one tcp_output per
 * connection). Call after each batch and before the loop sleeps. */
void netstack_flush(void);

/* Runs lwIP's due timers and resumes connections paused by the memory cap.
 * Returns the seconds until the next timer is due. */
double netstack_poll(void);

void netstack_stats(struct netstack_stats *out);

#endif
