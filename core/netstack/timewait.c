/* lwIP's TIME_WAIT pcbs, kept few.
 *
 * When the server closes first, lwIP is the side that closes first toward
 * the client and keeps every such connection in TIME_WAIT for 2 * TCP_MSL.
 * lwIP walks that list for every segment that misses the active pcbs (each
 * SYN), again in tcp_alloc when pcbs run out and in tcp_pcb_remove: at
 * thousands of connections a second the walks were 60% of chute's CPU
 * (perf, server-closes connection rate). TIME_WAIT guards against old
 * duplicates and a lost last ACK on a real network; on the TUN there are
 * no old duplicates, and a client whose FIN is retransmitted after its pcb
 * went gets a RST, which ends its LAST_ACK the same way. So only the newest
 * NETSTACK_TW_MAX are kept. */
#include <string.h>

#include "lwip/priv/tcp_priv.h"

#include "ip/ip.h"
#include "netstack/netstack_int.h"

/* Enough for a port reused within a moment to meet its old pcb (tw_reused
 * counts those), few enough that a walk costs well under a microsecond. */
#define NETSTACK_TW_MAX 64

void
netstack_tw_trim(void)
{
    /* lwIP pushes each new TIME_WAIT pcb at the head: the tail is oldest. */
    struct tcp_pcb *p = tcp_tw_pcbs;
    for (int i = 1; p != NULL && i < NETSTACK_TW_MAX; i++)
        p = p->next;
    if (p == NULL || p->next == NULL)
        return;
    struct tcp_pcb *old = p->next;
    p->next = NULL;
    /* What tcp_abandon does for a TIME_WAIT pcb (no callbacks, no RST),
     * without tcp_pcb_remove's walk to find each one. */
    while (old != NULL) {
        struct tcp_pcb *next = old->next;
        tcp_pcb_purge(old);
        old->state = CLOSED;
        old->local_port = 0;
        tcp_free(old);
        netstack.st.tw_trimmed++;
        old = next;
    }
}

/* A client may reuse a 4-tuple whose earlier connection lwIP still holds in
 * TIME_WAIT (the server closed first, so the client kept no TIME_WAIT of
 * its own and Linux hands the port out again). lwIP matches TIME_WAIT pcbs
 * before listeners and never accepts such a SYN; a new SYN means the old
 * connection is over, so it goes, as Linux's own TIME_WAIT reuse does. */
void
netstack_tw_drop(const struct ip_view *v)
{
    for (struct tcp_pcb *p = tcp_tw_pcbs, *next; p != NULL; p = next) {
        next = p->next;
        if (p->local_port != v->dport || p->remote_port != v->sport ||
            IP_IS_V6(&p->local_ip) != (v->version == 6))
            continue;
        int same = v->version == 4
                       ? memcmp(&ip_2_ip4(&p->local_ip)->addr, v->dst, 4) == 0 &&
                             memcmp(&ip_2_ip4(&p->remote_ip)->addr, v->src, 4) == 0
                       : memcmp(ip_2_ip6(&p->local_ip)->addr, v->dst, 16) == 0 &&
                             memcmp(ip_2_ip6(&p->remote_ip)->addr, v->src, 16) == 0;
        if (same) {
            tcp_abort(p); /* a TIME_WAIT pcb is freed without a RST */
            netstack.st.tw_reused++;
        }
    }
}
