#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/stats.h"

#include "io/io.h"
#include "ip/ip.h"
#include "netstack/netstack_int.h"
#include "tun/tun.h"

/* One TUN TCP connection: the SYN held while the layer above decides and
 * connects upstream (so a refused destination answers with a RST and a
 * connection lwIP accepts always has its upstream), then lwIP's pcb as an
 * io_stream.
 *
 * Back-pressure: client bytes stay in lwIP's pbufs, unacknowledged, until
 * the owner consumes them (tcp_recved then reopens the window); writes take
 * only what lwIP's send buffer has room for, and on_drain follows from the
 * sent callback. Above the heap cap every connection holds back window
 * updates and takes no writes until the heap drains (netstack_poll resumes
 * them).
 *
 * The owner's callbacks never run inside an lwIP callback: they come from
 * the loop (io_soon), after the batch that caused them, so one wake-up per
 * connection per batch moves what the batch brought, and the owner may
 * close the stream (tcp_abort) from any of them. */

enum cstate { C_HELD, C_HANDSHAKE, C_OPEN };

#define SYN_MAX 128 /* IPv6 header + TCP header with every option */
#define WRITE_MAX 0xFFFF /* tcp_write takes a u16_t length */
#define ROOM_MIN 2048    /* heap room worth a write (below: wait as at the cap) */
#define BULK_MIN 16384   /* a write this large: the stream is a download (chunks) */
#define FIN_ACK_DELAY 0.04 /* s; Linux's delayed-ACK floor (TCP_DELACK_MIN) */

/* Segments this large (offload) are sent from chunks; a test lowers it. */
static unsigned seg_nocopy = NETSTACK_NOCOPY_MSS;

void
netstack_conn_nocopy_mss(unsigned mss)
{
    seg_nocopy = mss;
}

struct netstack_conn {
    struct ip_tuple_node node; /* first: the tuple table's node is the conn */
    struct io_stream s;
    enum cstate state;
    int err;               /* ECONNRESET once lwIP dropped the pcb */
    struct tcp_pcb *pcb;
    void *arg;             /* the owner's, for established() and gone() */
    ev_timer timer;        /* the handshake's deadline; open, the ACK of a FIN */
    struct io_soon rd_kick, wr_kick, up_kick; /* on_readable, on_drain, established */
    struct pbuf *rx;       /* client bytes not consumed yet */
    struct pbuf *rx_last;  /* rx's last pbuf, while rx is not NULL */
    uint32_t owed;         /* consumed bytes whose window update waits (heap cap) */
    unsigned client_eof : 1, shut : 1, reading : 1, want_drain : 1, paused_mem : 1;
    unsigned in_cb : 1, dead : 1, progress : 1; /* inside an owner's callback; closed there */
    unsigned ack_owed : 1; /* the ACK lwIP wanted to send now goes at the batch's end */
    unsigned unlinked : 1; /* closed by its owner, kept for tx->lpcb alone */
    unsigned bulk : 1;     /* has been a download: after a pause, chunks at once */
    unsigned resumed : 1;  /* the ledger was taken again after a pause, no commit yet */
    /* A download's chunks (txbuf.c), from a large write until all is
     * acknowledged; NULL otherwise. Here, not inline: 8 more bytes than
     * the struct had moved it to another malloc size class, and 16,000
     * of them (a SYN flood) then kept 7 MiB more RSS once freed. */
    struct netstack_tx *tx;
    struct netstack_conn *prev, *next;   /* every conn, for shutdown and memory resume */
    struct netstack_conn *oprev, *onext; /* on the output list: written this batch */
    uint16_t syn_len;
    uint8_t syn[SYN_MAX];
};

static struct netstack_conn all = {.prev = &all, .next = &all};
static struct netstack_conn outq = {.oprev = &outq, .onext = &outq};
/* Closed connections whose pcb still sends from their chunks (prev/next). */
static struct netstack_conn lingerq = {.prev = &lingerq, .next = &lingerq};

#define CONN(s) ((struct netstack_conn *)((char *)(s) - offsetof(struct netstack_conn, s)))

static struct ev_loop *
loop(void)
{
    return netstack.loop;
}

/* |pcb| no longer calls back into chute (its receive callback aside). */
static void
forget_pcb(struct tcp_pcb *pcb)
{
    tcp_arg(pcb, NULL);
    tcp_sent(pcb, NULL);
    tcp_err(pcb, NULL);
}

static void
detach_pcb(struct netstack_conn *c)
{
    if (c->pcb == NULL)
        return;
    tcp_recv(c->pcb, NULL);
    forget_pcb(c->pcb);
}

static void
out_unlink(struct netstack_conn *c)
{
    if (c->onext == NULL)
        return;
    c->oprev->onext = c->onext;
    c->onext->oprev = c->oprev;
    c->onext = c->oprev = NULL;
}

static int
lingers(const struct netstack_conn *c)
{
    return c->tx != NULL && c->tx->lpcb != NULL;
}

/* Frees |c|; its pcb must be detached, gone or lingering (then |c| stays,
 * out of every list, until lwIP is done with the chunks). */
static void
conn_free(struct netstack_conn *c)
{
    if (c->unlinked)
        return;
    ev_timer_stop(loop(), &c->timer);
    io_soon_cancel(loop(), &c->rd_kick);
    io_soon_cancel(loop(), &c->wr_kick);
    io_soon_cancel(loop(), &c->up_kick);
    if (c->rx != NULL)
        pbuf_free(c->rx);
    out_unlink(c);
    ip_tuple_remove(netstack.tuples, &c->node);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    netstack.st.conns_active--;
    if (lingers(c)) {
        c->unlinked = 1;
        c->next = lingerq.next;
        c->prev = &lingerq;
        lingerq.next->prev = c;
        lingerq.next = c;
        return;
    }
    netstack_tx_free(c->tx); /* its pcb is detached or gone: so are the segments */
    free(c);
}

/* Leaves |pcb| to lwIP; while its segments point into chunks, its sent
 * and err callbacks stay (|c| lingers) to let go of them. */
static void
let_go(struct netstack_conn *c, struct tcp_pcb *pcb)
{
    tcp_recv(pcb, NULL);
    if (c->tx != NULL) {
        netstack_tx_acked(c->tx, 0); /* an empty tail chunk needs no ACK */
        if (c->tx->head != NULL) {
            c->tx->lpcb = pcb;
            return;
        }
        netstack_tx_free(c->tx);
        c->tx = NULL;
    }
    forget_pcb(pcb);
}

/* The lingering pcb needs |c| no more (all acknowledged, or gone). */
static void
linger_end(struct netstack_conn *c, int gone)
{
    if (!gone)
        forget_pcb(c->tx->lpcb);
    netstack_tx_free(c->tx);
    c->tx = NULL;
    if (c->unlinked) {
        c->prev->next = c->next;
        c->next->prev = c->prev;
        free(c);
    }
}

static void
note_heap(void)
{
    if (!netstack.mem_high && netstack_heap_used() > NETSTACK_MEM_HIGH) {
        netstack.mem_high = 1;
        netstack.st.mem_pauses++;
    }
}

/* Tells lwIP the consumed bytes whose window update was held back. */
static void
give_window(struct netstack_conn *c)
{
    while (c->owed > 0 && c->pcb != NULL) {
        u16_t k = c->owed > 0xFFFF ? 0xFFFF : (u16_t)c->owed;
        tcp_recved(c->pcb, k);
        c->owed -= k;
    }
}

/* Reopens the client's window for bytes consumed, unless the heap is over
 * its cap: then the update waits, and so does the client. */
static void
ack_window(struct netstack_conn *c, size_t n)
{
    c->owed += (uint32_t)n;
    note_heap();
    if (netstack.mem_high) {
        c->paused_mem = 1;
        return;
    }
    give_window(c);
}

/* Both directions ended: chute's FIN is queued and the client's came. What
 * is left (the last ACKs, retransmissions, TIME_WAIT) is lwIP's alone, and
 * it ends the pcb without a word we could use: a TIME_WAIT pcb is freed
 * with no callback at all (2 MSL later, or reclaimed when the pool is
 * empty), so a stream still open would later touch a pcb lwIP has given to
 * another connection; a LAST_ACK one ends with ERR_CLSD, which is no reset.
 * So the stream lets go of the pcb now: reads still return the bytes held,
 * then 0; writes fail with EPIPE. */
static void
release_ended(struct netstack_conn *c)
{
    if (c->shut && c->client_eof && c->pcb != NULL) {
        let_go(c, c->pcb);
        c->pcb = NULL;
    }
}

/* Something to read (bytes, the end, an error) for an owner that reads. */
static int
readable(const struct netstack_conn *c)
{
    return c->rx != NULL || c->client_eof || c->err != 0;
}

static void
kick_readable(struct netstack_conn *c)
{
    if (c->reading && readable(c))
        io_soon_arm(loop(), &c->rd_kick);
}

static void want_output(struct netstack_conn *c);

static void
on_fin_ack(struct ev_loop *l, ev_timer *w, int revents)
{
    struct netstack_conn *c = w->data;
    if (c->pcb != NULL && (c->pcb->flags & TF_ACK_DELAY)) {
        c->ack_owed = 1;
        want_output(c);
    }
}

/* lwIP ACKs a FIN at once. The upstream's close, which the client's FIN
 * passes on, usually brings chute's own FIN within a round trip: the ACK
 * waits for it, as Linux's delayed ACK does, and rides on it. One TUN
 * packet, and one pass through the client's stack, less per connection
 * the client closes first. The ACK goes alone after FIN_ACK_DELAY (or
 * earlier, from lwIP's fast timer), well before a Linux client would send
 * its FIN again (200 ms at the earliest, TCP_RTO_MIN). */
static void
delay_fin_ack(struct netstack_conn *c, struct tcp_pcb *pcb)
{
    if (pcb->state != CLOSE_WAIT || !(pcb->flags & TF_ACK_NOW) || c->ack_owed)
        return; /* chute's FIN went first; or an ACK owed for data goes anyway */
    tcp_clear_flags(pcb, TF_ACK_NOW);
    tcp_set_flags(pcb, TF_ACK_DELAY);
    ev_timer_stop(loop(), &c->timer); /* idle since the accept */
    ev_set_cb(&c->timer, on_fin_ack);
    ev_timer_set(&c->timer, FIN_ACK_DELAY, 0);
    ev_timer_start(loop(), &c->timer);
}

/* ---- lwIP's callbacks --------------------------------------------------- */

static err_t
on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
    struct netstack_conn *c = arg;
    if (p == NULL) {
        c->client_eof = 1;
        delay_fin_ack(c, pcb);
        release_ended(c);
    } else {
        /* Appended at the last pbuf, not from the head: pbuf_cat walks the
         * chain it is given, and rx may hold a whole window (~700 pbufs)
         * while the upstream socket is full. The head's tot_len then stops
         * counting what comes after; nothing reads it (pbuf_free and
         * pbuf_free_header go by next and len). */
        if (c->rx == NULL)
            c->rx = p;
        else
            pbuf_cat(c->rx_last, p);
        struct pbuf *q = p;
        while (q->next != NULL)
            q = q->next;
        c->rx_last = q;
        /* lwIP ACKs every second segment from inside tcp_input (after this
         * callback): without offload one TUN write, and one pass through
         * the kernel's stack, per two packets of an upload. The ACK goes at
         * the end of the batch instead (netstack_conn_output), one per
         * connection per batch; what it acknowledges is the same. */
        if (pcb->flags & TF_ACK_NOW) {
            tcp_clear_flags(pcb, TF_ACK_NOW);
            tcp_set_flags(pcb, TF_ACK_DELAY);
            c->ack_owed = 1;
            want_output(c);
        }
    }
    kick_readable(c);
    return ERR_OK;
}

/* A ledger with no chunk and nothing in lwIP's queues goes: an idle
 * connection keeps neither. */
static void
tx_drop_idle(struct netstack_conn *c, const struct tcp_pcb *pcb)
{
    if (c->tx->head == NULL && pcb->unacked == NULL && pcb->unsent == NULL) {
        netstack_tx_free(c->tx);
        c->tx = NULL;
    }
}

static err_t
on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
    struct netstack_conn *c = arg;
    if (c->tx != NULL) {
        netstack_tx_acked(c->tx, len);
        if (lingers(c)) {
            if (c->tx->head == NULL)
                linger_end(c, 0);
            return ERR_OK;
        }
        tx_drop_idle(c, pcb); /* all acknowledged: the download paused, or ended */
    }
    if (c->want_drain && !c->paused_mem)
        io_soon_arm(loop(), &c->wr_kick);
    return ERR_OK;
}

static void
on_err(void *arg, err_t err)
{
    struct netstack_conn *c = arg;
    if (lingers(c)) { /* lwIP has freed it, and its segments */
        linger_end(c, 1);
        return;
    }
    netstack_tx_free(c->tx);
    c->tx = NULL;
    c->pcb = NULL; /* lwIP has freed it already */
    c->err = ECONNRESET;
    if (c->state != C_OPEN) { /* accepted by lwIP, not yet handed over */
        io_soon_arm(loop(), &c->up_kick);
        return;
    }
    /* The owner hears it from its next read or write. */
    if (c->reading)
        io_soon_arm(loop(), &c->rd_kick);
    if (c->want_drain)
        io_soon_arm(loop(), &c->wr_kick);
}

/* ---- the owner's callbacks, from the loop ------------------------------- */

/* Calls an owner's callback; a close from inside it frees |c| after.
 * Returns 1 when |c| is gone. */
static int
call_owner(struct netstack_conn *c, void (*fn)(void *), void *arg)
{
    c->in_cb = 1;
    fn(arg);
    c->in_cb = 0;
    if (!c->dead)
        return 0;
    conn_free(c);
    return 1;
}

static void
on_rd_kick(void *arg)
{
    struct netstack_conn *c = arg;
    if (!c->reading || c->s.on_readable == NULL)
        return;
    c->progress = 0;
    if (call_owner(c, c->s.on_readable, c->s.arg))
        return;
    /* An owner that consumed some and stopped early gets the rest next
     * iteration; one that only looked (a sniffer) waits for more bytes. */
    if (c->progress && c->reading && readable(c))
        io_soon_arm(loop(), &c->rd_kick);
}

static void
on_wr_kick(void *arg)
{
    struct netstack_conn *c = arg;
    c->want_drain = 0;
    if (c->s.on_drain != NULL)
        (void)call_owner(c, c->s.on_drain, c->s.arg);
}

/* The handshake's outcome: established, or gone. */
static void
on_up_kick(void *arg)
{
    struct netstack_conn *c = arg;
    if (c->err != 0 || c->pcb == NULL) {
        void *owner = c->arg;
        detach_pcb(c);
        conn_free(c);
        netstack.h->gone(owner, "reset by client");
        return;
    }
    c->state = C_OPEN;
    c->in_cb = 1;
    netstack.h->established(c->arg, &c->s);
    c->in_cb = 0;
    if (c->dead)
        conn_free(c);
}

static void
on_handshake_timeout(struct ev_loop *l, ev_timer *w, int revents)
{
    struct netstack_conn *c = w->data;
    void *owner = c->arg;
    if (c->pcb != NULL) {
        detach_pcb(c);
        tcp_abort(c->pcb);
    }
    conn_free(c);
    netstack.h->gone(owner, "handshake timeout");
}

/* ---- the stream --------------------------------------------------------- */

static int
st_peek(struct io_stream *s, struct iovec *iov, int max)
{
    struct netstack_conn *c = CONN(s);
    int n = 0;
    for (struct pbuf *q = c->rx; q != NULL && n < max; q = q->next) {
        if (q->len == 0)
            continue;
        iov[n].iov_base = q->payload;
        iov[n].iov_len = q->len;
        n++;
    }
    if (n > 0)
        return n;
    if (c->err != 0) {
        errno = c->err;
        return -1;
    }
    if (c->client_eof)
        return 0;
    errno = EAGAIN; /* all taken: on_recv kicks again */
    return -1;
}

static void
st_consume(struct io_stream *s, size_t n)
{
    struct netstack_conn *c = CONN(s);
    c->progress = 1;
    for (size_t left = n; left > 0 && c->rx != NULL;) {
        u16_t k = left > 0xFFFF ? 0xFFFF : (u16_t)left;
        c->rx = pbuf_free_header(c->rx, k);
        left -= k;
    }
    ack_window(c, n);
}

static ssize_t
st_read(struct io_stream *s, void *buf, size_t len)
{
    struct iovec iov;
    int n = st_peek(s, &iov, 1);
    if (n <= 0)
        return n;
    size_t k = iov.iov_len < len ? iov.iov_len : len;
    memcpy(buf, iov.iov_base, k);
    st_consume(s, k);
    return (ssize_t)k;
}

static size_t
st_write_room(struct io_stream *s)
{
    struct netstack_conn *c = CONN(s);
    if (c->pcb == NULL || c->shut)
        return (size_t)-1; /* the write says why */
    note_heap();
    if (netstack.mem_high) {
        c->paused_mem = 1;
        c->want_drain = 1;
        return 0;
    }
    size_t room = tcp_sndbuf(c->pcb);
    if (tcp_sndqueuelen(c->pcb) + 4 >= TCP_SND_QUEUELEN || room == 0) {
        c->want_drain = 1; /* the sent callback brings room */
        return 0;
    }
    /* No more than the heap takes below the cap: a write lwIP refuses
     * halfway would leave the relay holding the rest in a buffer of its
     * own, one per connection. The eighth is the segments' overhead. */
    size_t used = netstack_heap_used(), high = NETSTACK_MEM_HIGH;
    size_t fits = used < high ? (high - used) / 8 * 7 : 0;
    if (fits < ROOM_MIN) { /* as good as at the cap: wait with the others */
        netstack.mem_high = 1;
        netstack.st.mem_pauses++;
        c->paused_mem = 1;
        c->want_drain = 1;
        return 0;
    }
    return fits < room ? fits : room;
}

static void
want_output(struct netstack_conn *c)
{
    if (c->onext != NULL)
        return;
    c->onext = &outq;
    c->oprev = outq.oprev;
    outq.oprev->onext = c;
    outq.oprev = c;
}

static ssize_t
st_writev(struct io_stream *s, const struct iovec *iov, int iovcnt)
{
    struct netstack_conn *c = CONN(s);
    size_t total = 0, offered = 0;
    if (c->err != 0 || c->pcb == NULL) {
        errno = c->err ? c->err : EPIPE;
        return -1;
    }
    if (c->shut) {
        errno = EPIPE;
        return -1;
    }
    for (int i = 0; i < iovcnt; i++)
        offered += iov[i].iov_len;
    size_t room = st_write_room(s);
    for (int i = 0; i < iovcnt && room > 0; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left > 0 && room > 0) {
            size_t k = left < room ? left : room;
            if (k > WRITE_MAX)
                k = WRITE_MAX;
            /* The queue may be full rather than the buffer (lwip.md §6.2). */
            if (tcp_write(c->pcb, p, (u16_t)k, TCP_WRITE_FLAG_COPY) != ERR_OK) {
                room = 0;
                break;
            }
            if (c->tx != NULL)
                netstack_tx_queued(c->tx, k, 0);
            else if (k >= BULK_MIN && (unsigned)tcp_mss(c->pcb) >= seg_nocopy)
                c->bulk = (c->tx = netstack_tx_new(c->pcb)) != NULL; /* NULL: copies go on */
            p += k;
            left -= k;
            total += k;
            room -= k;
        }
    }
    if (total > 0)
        want_output(c);
    if (total < offered)
        c->want_drain = 1;
    if (total == 0 && offered > 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)total;
}

/* The next bytes go into a chunk lwIP's segments then point into: no copy.
 * Only for a download (a large write once, the ledger taken again at once
 * after each pause: a client slower than the origin empties the queue
 * hundreds of times a GiB, and copying the first write after each was 4%
 * of a download under load; a 64 KiB chunk for a few bytes of a stream
 * that never was one would weigh on the heap cap for an RTT)
 * in large segments (offload: with MTU-sized ones each segment takes a
 * second pbuf for its header and saves a 1460-byte copy; measured no
 * faster, 4,600-5,000 CPU-ms per GB either way), no more than writev
 * would take now, and no more than the queue has pbufs for (two per
 * segment: its header and the bytes). */
static void *
st_write_buf(struct io_stream *s, size_t *len)
{
    struct netstack_conn *c = CONN(s);
    if (c->err != 0 || c->pcb == NULL || c->shut || (c->tx == NULL && !c->bulk) ||
        (unsigned)tcp_mss(c->pcb) < seg_nocopy)
        return NULL;
    size_t room = st_write_room(s);
    if (room == (size_t)-1 || room == 0)
        return NULL;
    size_t q = TCP_SND_QUEUELEN - 4 - tcp_sndqueuelen(c->pcb);
    size_t segs = q / 2 > 0 ? q / 2 - 1 : 0, mss = tcp_mss(c->pcb) > 0 ? tcp_mss(c->pcb) : 536;
    if (room > segs * mss)
        room = segs * mss;
    if (room > WRITE_MAX)
        room = WRITE_MAX;
    if (*len > room)
        *len = room;
    if (*len == 0)
        return NULL;
    if (c->tx == NULL) {
        if ((c->tx = netstack_tx_new(c->pcb)) == NULL)
            return NULL;
        c->resumed = 1;
    }
    void *at = netstack_tx_space(c->tx, len, room);
    if (at == NULL)
        tx_drop_idle(c, c->pcb); /* the caller copies; the ledger it took goes */
    return at;
}

static ssize_t
st_write_commit(struct io_stream *s, size_t n)
{
    struct netstack_conn *c = CONN(s);
    if (c->err != 0 || c->pcb == NULL || c->shut || c->tx == NULL) {
        errno = c->err ? c->err : EPIPE;
        return -1;
    }
    if (n == 0) { /* the read found nothing: an idle connection keeps no chunk */
        netstack_tx_unused(c->tx);
        tx_drop_idle(c, c->pcb);
        return 0;
    }
    /* A download that resumes with a trickle (a peer that sends 1 KiB at
     * a time) is one no more: a ledger and a 64 KiB chunk taken and let go
     * for each few bytes cost more than their copy. A large write makes
     * it one again. */
    if (c->resumed && n < BULK_MIN / 2)
        c->bulk = 0;
    c->resumed = 0;
    size_t len = n;
    const uint8_t *at = netstack_tx_space(c->tx, &len, 0);
    if (at == NULL || len < n || tcp_write(c->pcb, at, (u16_t)n, 0) != ERR_OK) {
        c->want_drain = 1;
        errno = EAGAIN;
        return -1;
    }
    netstack_tx_queued(c->tx, n, 1);
    want_output(c);
    return (ssize_t)n;
}

static int
st_shutdown(struct io_stream *s)
{
    struct netstack_conn *c = CONN(s);
    if (c->shut && c->err == 0)
        return 0; /* already (the pcb may be lwIP's alone by now) */
    if (c->pcb == NULL) {
        errno = c->err ? c->err : EPIPE;
        return -1;
    }
    c->shut = 1;
    /* FIN after what is queued; tcp_shutdown sends it itself (or lwIP's
     * timer retries), so it leaves even when the pcb is released below. */
    tcp_shutdown(c->pcb, 0, 1);
    want_output(c);
    release_ended(c);
    return 0;
}

static void
st_read_start(struct io_stream *s)
{
    struct netstack_conn *c = CONN(s);
    c->reading = 1;
    kick_readable(c);
}

static void
st_read_stop(struct io_stream *s)
{
    struct netstack_conn *c = CONN(s);
    c->reading = 0;
    io_soon_cancel(loop(), &c->rd_kick);
}

/* tcp_close would free |pcb| itself (with a RST when the client's bytes
 * were not all taken, tcp_close_shutdown's test): then chute aborts it,
 * the same RST, and knows the segments are gone. */
static int
close_resets(const struct tcp_pcb *pcb)
{
    if (pcb->state == ESTABLISHED || pcb->state == CLOSE_WAIT)
        return pcb->refused_data != NULL || pcb->rcv_wnd != TCP_WND_MAX(pcb);
    return pcb->state == CLOSED || pcb->state == LISTEN || pcb->state == SYN_SENT;
}

/* With |reset| the client gets a RST; otherwise lwIP finishes sending what
 * is queued, then FIN, on its own. */
static void
st_close(struct io_stream *s, int reset)
{
    struct netstack_conn *c = CONN(s);
    if (c->pcb != NULL) {
        struct tcp_pcb *pcb = c->pcb;
        detach_pcb(c);
        tcp_poll(pcb, NULL, 0);
        /* tcp_close resets, dropping what is unsent, unless the application
         * took all it received: bytes consumed under the heap cap count. */
        if (!reset)
            give_window(c);
        c->pcb = NULL;
        if (reset || close_resets(pcb)) {
            tcp_abort(pcb);
        } else {
            tcp_arg(pcb, c); /* let_go keeps what the chunks need */
            tcp_sent(pcb, on_sent);
            tcp_err(pcb, on_err);
            let_go(c, pcb);
            if (tcp_close(pcb) != ERR_OK) {
                if (c->tx != NULL)
                    c->tx->lpcb = NULL; /* the abort frees the segments: no callback */
                tcp_err(pcb, NULL);
                tcp_abort(pcb);
            }
        }
    }
    c->reading = 0;
    c->s.on_readable = c->s.on_drain = NULL;
    if (c->in_cb)
        c->dead = 1; /* freed when the callback returns */
    else
        conn_free(c);
}

static const struct io_stream_ops lwip_ops = {
    .name = "lwip",
    .read = st_read,
    .writev = st_writev,
    .shutdown = st_shutdown,
    .read_start = st_read_start,
    .read_stop = st_read_stop,
    .close = st_close,
    .peek = st_peek,
    .consume = st_consume,
    .write_room = st_write_room,
    .write_buf = st_write_buf,
    .write_commit = st_write_commit,
};

/* ---- the batch ---------------------------------------------------------- */

void
netstack_conn_output(void)
{
    while (outq.onext != &outq) {
        struct netstack_conn *c = outq.onext;
        out_unlink(c);
        if (c->pcb != NULL && c->ack_owed)
            tcp_ack_now(c->pcb);
        c->ack_owed = 0;
        if (c->pcb != NULL)
            tcp_output(c->pcb);
    }
}

void
netstack_conn_resume_all(void)
{
    /* Each one resumed moves to the back: when the heap fills again before
     * the walk ends, the next resume starts with those still waiting, so
     * none starves behind the busier ones at the front (1,000 downloads
     * at 1 MiB windows left hundreds paused until their idle timeout). */
    uint64_t n = netstack.st.conns_active;
    for (struct netstack_conn *c = all.next, *next; c != &all && n-- > 0; c = next) {
        next = c->next;
        if (!c->paused_mem || c->state != C_OPEN)
            continue;
        c->prev->next = c->next;
        c->next->prev = c->prev;
        c->next = &all;
        c->prev = all.prev;
        all.prev->next = c;
        all.prev = c;
        c->paused_mem = 0;
        ack_window(c, 0);
        if (netstack.mem_high)
            return;
        if (c->want_drain)
            io_soon_arm(loop(), &c->wr_kick);
    }
}

/* Only the held and half-open ones: an established connection is its
 * owner's, who closes it first (netstack_fini runs after the flows went). */
void
netstack_conn_abort_all(void)
{
    while (all.next != &all) {
        struct netstack_conn *c = all.next;
        if (c->pcb != NULL) {
            detach_pcb(c);
            tcp_abort(c->pcb);
        }
        conn_free(c);
    }
    /* And the pcbs still sending from chunks: lwIP outlives the netstack,
     * and nothing of chute may stay behind in its pcbs. */
    while (lingerq.next != &lingerq) {
        struct netstack_conn *c = lingerq.next;
        struct tcp_pcb *pcb = c->tx->lpcb;
        linger_end(c, 0);
        tcp_abort(pcb);
    }
}

/* ---- the SYN ------------------------------------------------------------ */

/* With offload, lwIP may send 64 KiB segments: raise the SYN's MSS option
 * (when it is what the TUN's MTU gives: the client is local) so lwIP's
 * effective MSS becomes its netif's 65535 - headers. lwIP checks no input
 * checksum, so the option is changed in place. */
static void
raise_mss(struct netstack_conn *c, const struct ip_view *v)
{
    size_t thl = (size_t)(v->l4[12] >> 4) * 4;
    uint8_t *opt = c->syn + (v->l4 - c->syn) + 20, *end = c->syn + (v->l4 - c->syn) + thl;
    unsigned tun_mss = (unsigned)tun_mtu(netstack.tun) - (v->version == 4 ? 40 : 60);
    while (opt < end && *opt != 0) {
        if (*opt == 1) {
            opt++;
            continue;
        }
        if (opt + 1 >= end || opt[1] < 2 || opt + opt[1] > end)
            return;
        if (opt[0] == 2 && opt[1] == 4) {
            if ((unsigned)(opt[2] << 8 | opt[3]) >= tun_mss)
                opt[2] = opt[3] = 0xff;
            return;
        }
        opt += opt[1];
    }
}

void
netstack_conn_accept(struct netstack_conn *c, double timeout)
{
    struct ip_view v;
    if (ip_view_parse(&v, c->syn, c->syn_len) != IP_OK) {
        c->err = EPROTO;
        io_soon_arm(loop(), &c->up_kick); /* gone(), from the loop */
        return;
    }
    c->state = C_HANDSHAKE;
    ev_timer_set(&c->timer, timeout, 0);
    ev_timer_start(loop(), &c->timer);
    netstack_tw_drop(&v);
    if (tun_offload(netstack.tun))
        raise_mss(c, &v);
    netstack_inject(c->syn, c->syn_len, &v); /* SYN-ACK; accept follows the client's ACK */
}

void
netstack_conn_refuse(struct netstack_conn *c, int rst)
{
    struct ip_view v;
    if (c->pcb != NULL) { /* accepted, established() not delivered yet */
        detach_pcb(c);
        tcp_abort(c->pcb); /* its RST */
        c->pcb = NULL;
    } else if (rst && ip_view_parse(&v, c->syn, c->syn_len) == IP_OK) {
        netstack_send_rst(&v);
    }
    conn_free(c);
}

void
netstack_conn_set_arg(struct netstack_conn *c, void *arg)
{
    c->arg = arg;
}

void
netstack_count_sniffed(void)
{
    netstack.st.sniffed++;
}

void
netstack_conn_syn(const struct ip_view *v, const struct ip_tuple *k, uint32_t hash,
                  struct ip_tuple_node *existing)
{
    if (existing != NULL) {
        struct netstack_conn *old = (struct netstack_conn *)existing;
        if (old->state == C_HELD)
            netstack.st.syn_dups++; /* the client retries while we decide or connect */
        else
            netstack_inject(v->pkt, v->pkt_len, v);
        return;
    }
    if (v->pkt_len > SYN_MAX) {
        netstack.st.syn_dropped++; /* a SYN carrying data (TFO): the client retries without it */
        return;
    }
    struct netstack_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->node.key = *k;
    c->syn_len = v->pkt_len;
    memcpy(c->syn, v->pkt, v->pkt_len);
    c->s = (struct io_stream){.ops = &lwip_ops, .loop = loop()};
    ev_timer_init(&c->timer, on_handshake_timeout, 0, 0);
    c->timer.data = c;
    io_soon_init(&c->rd_kick, on_rd_kick, c);
    io_soon_init(&c->wr_kick, on_wr_kick, c);
    io_soon_init(&c->up_kick, on_up_kick, c);
    ip_tuple_insert(netstack.tuples, &c->node, hash);
    c->next = &all;
    c->prev = all.prev;
    all.prev->next = c;
    all.prev = c;
    netstack.st.conns_active++;
    netstack.st.conns_total++;
    netstack.h->syn(netstack.h->ud, c, v);
}

err_t
netstack_conn_accepted(void *arg, struct tcp_pcb *pcb, err_t err)
{
    if (err != ERR_OK || pcb == NULL)
        return ERR_VAL;
    struct ip_tuple k = {.proto = IPPROTO_TCP, .sport = pcb->remote_port, .dport = pcb->local_port};
    if (IP_IS_V6(&pcb->local_ip)) {
        k.version = 6;
        memcpy(k.src, ip_2_ip6(&pcb->remote_ip)->addr, 16);
        memcpy(k.dst, ip_2_ip6(&pcb->local_ip)->addr, 16);
    } else {
        k.version = 4;
        memcpy(k.src, &ip_2_ip4(&pcb->remote_ip)->addr, 4);
        memcpy(k.dst, &ip_2_ip4(&pcb->local_ip)->addr, 4);
    }
    struct netstack_conn *c = (struct netstack_conn *)ip_tuple_lookup(
        netstack.tuples, &k, ip_tuple_hash(netstack.tuples, &k));
    if (c == NULL || c->state != C_HANDSHAKE || c->pcb != NULL) {
        tcp_abort(pcb); /* no owner behind it: never leave a pcb without one */
        return ERR_ABRT;
    }
    c->pcb = pcb;
    tcp_setprio(pcb, TCP_PRIO_NORMAL); /* established: no longer the first to go (input.c) */
    ev_timer_stop(loop(), &c->timer);
    tcp_arg(pcb, c);
    tcp_recv(pcb, on_recv);
    tcp_sent(pcb, on_sent);
    tcp_err(pcb, on_err);
    tcp_nagle_disable(pcb); /* upstream bytes go out as they come */
    io_soon_arm(loop(), &c->up_kick); /* established(), from the loop */
    return ERR_OK;
}
