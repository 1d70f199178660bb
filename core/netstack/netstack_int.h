#ifndef CHUTE_NETSTACK_INT_H
#define CHUTE_NETSTACK_INT_H

/* Private to core/netstack. */

#include <ev.h>

#include "lwip/ip.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/prot/tcp.h"
#include "lwip/tcp.h"

#include "ip/tuple.h"
#include "netstack/netstack.h"

/* The engine-wide caps that keep lwIP's shared heap from filling (a full
 * heap slows every connection and drops new SYNs): above HIGH, connections
 * stop reading upstream and hold back window updates; below LOW they go on. */
#define NETSTACK_MEM_HIGH (netstack_heap_cap() / 4 * 3)
#define NETSTACK_MEM_LOW (netstack_heap_cap() / 2)
/* lwIP priority of a pcb whose handshake has not completed (input.c). */
#define NETSTACK_PRIO_HALF_OPEN (TCP_PRIO_NORMAL - 1)

struct netstack {
    struct ev_loop *loop;
    const struct netstack_handler *h; /* the layer above, injected */
    struct tun *tun;
    struct netif nif;
    struct tcp_pcb **listeners; /* [65536], by destination port */
    struct ip_tuple_table *tuples;   /* TCP flows by 5-tuple */
    int mem_high;               /* the cap is in force */
    int ooseq_walked;           /* this batch freed out-of-order queues once */
    struct netstack_stats st;
};

extern struct netstack netstack;

/* limits.c: the heap's size and use under netstack_set_limits' cap. */
size_t netstack_heap_cap(void);
size_t netstack_heap_used(void);  /* lwIP's blocks, txbuf.c's chunks, rxbuf.c's buffers */
size_t netstack_heap_max(void);   /* the most netstack_heap_used has been */
void netstack_heap_note_peak(void); /* after taking a chunk */
void netstack_limits_apply(void); /* after lwip_init, with nothing open */

/* input.c: injects a (copied) IP packet into tcp_input. */
void netstack_inject(const uint8_t *pkt, size_t len, const struct ip_view *v);
int netstack_listen(uint16_t port);

/* conn.c */
/* A SYN without ACK; |existing| is the connection already holding its 5-tuple. */
void netstack_conn_syn(const struct ip_view *v, const struct ip_tuple *k, uint32_t hash,
                       struct ip_tuple_node *existing);
err_t netstack_conn_accepted(void *arg, struct tcp_pcb *pcb, err_t err);
void netstack_conn_resume_all(void);
void netstack_conn_abort_all(void);
/* The smallest MSS whose downloads go out from chunks (no copy: with
 * MTU-sized segments it saved nothing measurable); a test on an MTU-sized
 * path lowers it. */
#define NETSTACK_NOCOPY_MSS 16384
void netstack_conn_nocopy_mss(unsigned mss);
/* Runs tcp_output for the connections written to since the last call. */
void netstack_conn_output(void);
/* Sends a RST answering |v| (a segment chute will not take). */
void netstack_send_rst(const struct ip_view *v);

/* txbuf.c: a download's chunks that lwIP's segments reference (no copy). */
struct netstack_tx_chunk;
struct netstack_tx {
    struct netstack_tx_chunk *head, *tail;
    uint64_t queued, acked; /* bytes given to tcp_write (copied or not); reported acked */
    /* The pcb lwIP finishes alone (closed, or both directions ended) while
     * its segments still point into the chunks: its sent and err callbacks
     * stay, to let go of them. */
    struct tcp_pcb *lpcb;
};
/* A ledger for |pcb| from now on: what its queues hold counts as queued
 * (lwIP's sent callback reports each of those segments whole). NULL when
 * out of memory. */
struct netstack_tx *netstack_tx_new(const struct tcp_pcb *pcb);
/* Lets go of every chunk (lwIP dropped the segments) and frees |tx|. */
void netstack_tx_free(struct netstack_tx *tx);
/* Where up to *len (lowered to the space) bytes for the next tcp_write may
 * be put, or NULL (then copy): a new chunk only for |budget| worth one. */
uint8_t *netstack_tx_space(struct netstack_tx *tx, size_t *len, size_t budget);
/* tcp_write took |n| bytes: from the space given (|in_tail|) or copied. */
void netstack_tx_queued(struct netstack_tx *tx, size_t n, int in_tail);
/* lwIP's sent callback: lets go of the chunks acknowledged. */
void netstack_tx_acked(struct netstack_tx *tx, size_t n);
/* Frees the tail chunk when nothing was put in it (the read found none). */
void netstack_tx_unused(struct netstack_tx *tx);
/* Frees the chunks let go once the TUN queue no longer points into them. */
void netstack_tx_reap(void);
/* Bytes of chunks taken (netstack_heap_used counts them). */
size_t netstack_tx_bytes(void);

/* rxbuf.c: a large TCP packet as a pbuf where the TUN read it (no copy),
 * or NULL (then copy): too small, a SYN, not from the last batch, or over
 * the heap cap. */
struct pbuf *netstack_rx_adopt(const uint8_t *pkt, size_t len, const struct ip_view *v);
/* Bytes of the TUN's buffers lwIP holds (netstack_heap_used counts them). */
size_t netstack_rx_bytes(void);

/* timewait.c: keeps the newest NETSTACK_TW_MAX TIME_WAIT pcbs (each pass). */
void netstack_tw_trim(void);
/* Ends a TIME_WAIT pcb on the 4-tuple of |v|, a new SYN's. */
void netstack_tw_drop(const struct ip_view *v);

/* The 5-tuple of |v| as a flow key (TCP). */
void netstack_key_from_view(struct ip_tuple *k, const struct ip_view *v);

#endif
