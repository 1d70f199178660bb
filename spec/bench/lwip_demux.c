/* lwIP pcb demultiplexing cost at thousands of concurrent flows.
 *
 *   lwip_demux [--quick] [N ...]        (default N: 1 100 1000 4000 8000)
 *
 * lwIP 2.1.3's tcp_input finds a segment's pcb by walking tcp_active_pcbs
 * and comparing the 4-tuple, then moves the hit to the front; a SYN walks
 * the active list, the TIME_WAIT list and then the listeners. This program
 * links chute_core (lwIP built with chute's lwipopts.h), feeds tcp_input the
 * way core/netstack/input.c does (pbuf_alloc + copy, ip_data globals,
 * pbuf_remove_header, tcp_input), establishes N IPv4 connections to one ANY
 * listener with injected SYN / ACK (the SYN-ACKs its own netif captures give
 * each pcb's ISS), and times, in ns per injected segment:
 *   front   a pure ACK for the pcb hit last (position 0 of the list)
 *   rr      pure ACKs round-robin over all N pcbs: with move-to-front, every
 *           segment's pcb is then at the tail (position N-1)
 *   random  pure ACKs for uniformly random pcbs (mean position ~N/2)
 *   syn     a SYN for a new connection (walks all N, then TIME_WAIT (empty),
 *           then the listener; includes building and emitting the SYN-ACK);
 *           the new pcb is abandoned without a RST after each, untimed
 * and the same lookups in chute's 5-tuple table (core/flow/hash.h): key from
 * the packet bytes + ip_tuple_hash + ip_tuple_lookup over N entries.
 *
 * Every ACK is the same duplicate of the handshake's ACK (same seq, ack and
 * window: lwIP has nothing to do), and the netif counts what lwIP emits:
 * zero segments during the ACK phases, one SYN-ACK per SYN, or the program
 * fails. Machine-readable lines start with "row"; scripts/bench/demux runs
 * this several times and prints medians. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lwip/init.h"
#include "lwip/ip.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/ip4.h"
#include "lwip/prot/tcp.h"
#include "lwip/stats.h"
#include "lwip/tcp.h"

#include "ip/tuple.h"

#define MAX_FLOWS 8100 /* MEMP_NUM_TCP_PCB is 8192: room for the SYN's pcb */
#define BASE_PORT 10000 /* flow i's client port is BASE_PORT + i */
#define SYN_PORT 9000   /* the new connection of the SYN phase */
#define SERVER_PORT 443
#define CLIENT_WND 0xffff

_Static_assert(MAX_FLOWS + 1 <= MEMP_NUM_TCP_PCB, "pcb pool too small");
_Static_assert(BASE_PORT + MAX_FLOWS <= 65535, "ports");

static struct netif nif;
static struct tcp_pcb *flow_pcb[MAX_FLOWS];
static uint32_t flow_iss[MAX_FLOWS];     /* lwIP's ISS, from its SYN-ACK */
static uint8_t ack_pkt[MAX_FLOWS][40];   /* each flow's no-op pure ACK */
static int nflows;
static int quick;

/* What lwIP emitted (the netif's output callback). */
static struct {
    unsigned long total, synack, rst, other;
} out;
static uint8_t out_buf[65536];

static void
die(const char *msg)
{
    fprintf(stderr, "lwip_demux: %s\n", msg);
    exit(1);
}

static inline uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- packets -------------------------------------------------------- */

static void
put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t
get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t
ip_sum(const uint8_t *h, int len)
{
    uint32_t s = 0;
    for (int i = 0; i < len; i += 2)
        s += (uint32_t)h[i] << 8 | h[i + 1];
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* Client 10.0.0.1:(BASE_PORT + i) -> 198.51.100.(1 + i % 250):443, as the
 * kernel would write it to the TUN (chute checks no checksum: TCP's is 0). */
static size_t
build(uint8_t *pkt, int port, int i, uint8_t flags, uint32_t seq, uint32_t ack)
{
    size_t optlen = (flags & TCP_SYN) ? 4 : 0;
    size_t len = 20 + 20 + optlen;
    memset(pkt, 0, len);
    pkt[0] = 0x45;
    put16(pkt + 2, (uint16_t)len);
    pkt[6] = 0x40; /* DF */
    pkt[8] = 64;
    pkt[9] = 6;
    pkt[12] = 10, pkt[13] = 0, pkt[14] = 0, pkt[15] = 1;
    pkt[16] = 198, pkt[17] = 51, pkt[18] = 100, pkt[19] = (uint8_t)(1 + i % 250);
    put16(pkt + 10, ip_sum(pkt, 20));
    uint8_t *t = pkt + 20;
    put16(t, (uint16_t)port);
    put16(t + 2, SERVER_PORT);
    put32(t + 4, seq);
    put32(t + 8, ack);
    t[12] = (uint8_t)((20 + optlen) / 4) << 4;
    t[13] = flags;
    put16(t + 14, CLIENT_WND);
    if (optlen) { /* MSS 1460 */
        t[20] = 2, t[21] = 4;
        put16(t + 22, 1460);
    }
    return len;
}

static uint32_t
client_isn(int port)
{
    return 0x10000000u + (uint32_t)port * 0x10001u;
}

/* ---- lwIP glue ------------------------------------------------------ */

/* core/netstack/input.c's recipe (IPv4). */
static inline void
inject(const uint8_t *pkt, size_t len)
{
    struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)len, PBUF_RAM);
    if (p == NULL)
        die("pbuf_alloc failed");
    memcpy(p->payload, pkt, len);
    const struct ip_hdr *h = p->payload;
    ip_data.current_netif = &nif;
    ip_data.current_input_netif = &nif;
    ip_data.current_ip4_header = h;
    ip_data.current_ip6_header = NULL;
    ip_addr_copy_from_ip4(ip_data.current_iphdr_src, h->src);
    ip_addr_copy_from_ip4(ip_data.current_iphdr_dest, h->dest);
    ip_data.current_ip_header_tot_len = 20;
    pbuf_remove_header(p, 20);
    tcp_input(p, &nif);
    ip_data.current_netif = NULL;
    ip_data.current_input_netif = NULL;
    ip_data.current_ip4_header = NULL;
    ip_data.current_ip6_header = NULL;
    ip_data.current_ip_header_tot_len = 0;
    ip_addr_set_zero(&ip_data.current_iphdr_src);
    ip_addr_set_zero(&ip_data.current_iphdr_dest);
}

/* Copies the segment out as chute's emit() does, and learns SYN-ACK ISSs. */
static err_t
out4(struct netif *n, struct pbuf *p, const ip4_addr_t *dst)
{
    (void)n, (void)dst;
    u16_t len = pbuf_copy_partial(p, out_buf, p->tot_len, 0);
    out.total++;
    if (len < 40 || (out_buf[0] >> 4) != 4 || out_buf[9] != 6) {
        out.other++;
        return ERR_OK;
    }
    const uint8_t *t = out_buf + (out_buf[0] & 0x0f) * 4;
    uint8_t fl = t[13];
    int port = t[2] << 8 | t[3]; /* the client's */
    if ((fl & (TCP_SYN | TCP_ACK)) == (TCP_SYN | TCP_ACK)) {
        out.synack++;
        if (port >= BASE_PORT && port < BASE_PORT + MAX_FLOWS)
            flow_iss[port - BASE_PORT] = get32(t + 4);
    } else if (fl & TCP_RST) {
        out.rst++;
    } else {
        out.other++;
    }
    return ERR_OK;
}

static err_t
out6(struct netif *n, struct pbuf *p, const ip6_addr_t *dst)
{
    (void)n, (void)p, (void)dst;
    out.total++;
    out.other++;
    return ERR_OK;
}

static err_t
nif_init(struct netif *n)
{
    n->name[0] = 'd';
    n->name[1] = 'x';
    n->output = out4;
    n->output_ip6 = out6;
    n->mtu = 1500;
    n->flags = 0;
    return ERR_OK;
}

static unsigned long errs;

static void
on_err(void *arg, err_t err)
{
    (void)arg, (void)err;
    errs++;
}

static err_t
on_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
    (void)arg;
    if (err != ERR_OK || pcb == NULL)
        die("accept error");
    int i = pcb->remote_port - BASE_PORT;
    if (i < 0 || i >= MAX_FLOWS || flow_pcb[i] != NULL)
        die("accept of an unexpected connection");
    flow_pcb[i] = pcb;
    tcp_err(pcb, on_err);
    return ERR_OK;
}

static void
lwip_setup(void)
{
    lwip_init();
    ip4_addr_t addr, mask, gw;
    IP4_ADDR(&addr, 10, 77, 0, 2);
    IP4_ADDR(&mask, 255, 255, 255, 255);
    ip4_addr_set_zero(&gw);
    if (netif_add(&nif, &addr, &mask, &gw, NULL, nif_init, ip_input) == NULL)
        die("netif_add");
    netif_set_default(&nif);
    netif_set_up(&nif);
    netif_set_link_up(&nif);
    struct tcp_pcb *pcb = tcp_new_ip_type(IPADDR_TYPE_ANY);
    if (pcb == NULL)
        die("tcp_new");
    ip_set_option(pcb, SOF_REUSEADDR);
    if (tcp_bind(pcb, IP_ANY_TYPE, SERVER_PORT) != ERR_OK)
        die("tcp_bind");
    struct tcp_pcb *l = tcp_listen_with_backlog(pcb, TCP_DEFAULT_LISTEN_BACKLOG);
    if (l == NULL)
        die("tcp_listen");
    tcp_accept(l, on_accept);
}

/* SYN, SYN-ACK (captured: ISS), ACK; then the flow's no-op ACK is that same
 * ACK again. */
static void
establish(int i)
{
    uint8_t pkt[64];
    int port = BASE_PORT + i;
    uint32_t isn = client_isn(port);
    unsigned long synacks = out.synack;
    inject(pkt, build(pkt, port, i, TCP_SYN, isn, 0));
    if (out.synack != synacks + 1)
        die("no SYN-ACK for a SYN");
    build(ack_pkt[i], port, i, TCP_ACK, isn + 1, flow_iss[i] + 1);
    inject(ack_pkt[i], 40);
    if (flow_pcb[i] == NULL || flow_pcb[i]->state != ESTABLISHED)
        die("handshake did not establish");
    if (out.total != out.synack)
        die("lwIP sent something besides SYN-ACKs during handshakes");
}

static int
count_active(void)
{
    int n = 0;
    for (struct tcp_pcb *p = tcp_active_pcbs; p != NULL; p = p->next)
        n++;
    return n;
}

/* ---- measurements --------------------------------------------------- */

/* The ACK phases time batches with the thread's CPU clock: the machine may
 * be shared, and time spent descheduled is not tcp_input's. Each phase is
 * BATCHES batches; the median batch is reported. */
#define BATCHES 5

static inline uint64_t
cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline uint32_t
rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(((rng >> 32) * (uint64_t)n) >> 32);
}

/* Orders in which flows get a segment. */
#define RAND_LEN 65536
static uint16_t ord_front[1], ord_seq[MAX_FLOWS], ord_perm[MAX_FLOWS], ord_rand[RAND_LEN];

static void
make_orders(int n)
{
    ord_front[0] = (uint16_t)(n - 1);
    for (int i = 0; i < n; i++)
        ord_seq[i] = ord_perm[i] = (uint16_t)i;
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)rnd((uint32_t)i + 1);
        uint16_t t = ord_perm[i];
        ord_perm[i] = ord_perm[j];
        ord_perm[j] = t;
    }
    for (int i = 0; i < RAND_LEN; i++)
        ord_rand[i] = (uint16_t)rnd((uint32_t)n);
}

/* Segments per phase: about the same time for every depth walked. */
static long
segs_for(double walk)
{
    double s = (quick ? 2e6 : 2e7) / (walk + 20);
    if (s < (quick ? 500 : 2000))
        s = quick ? 500 : 2000;
    if (s > (quick ? 2e5 : 2e6))
        s = quick ? 2e5 : 2e6;
    return (long)s;
}

/* lwIP's own count of segments it threw away or failed on. */
static unsigned long
tcp_trouble(void)
{
    return (unsigned long)lwip_stats.tcp.drop + lwip_stats.tcp.err + lwip_stats.tcp.proterr +
           lwip_stats.tcp.memerr + lwip_stats.tcp.lenerr + lwip_stats.tcp.rterr;
}

static unsigned long trouble0;

static void
check_quiet(unsigned long total0, const char *phase)
{
    if (tcp_trouble() != trouble0) {
        fprintf(stderr, "lwip_demux: lwIP counted dropped or failed segments during %s\n", phase);
        exit(1);
    }
    if (out.total != total0) {
        fprintf(stderr, "lwip_demux: lwIP sent %lu segment(s) during %s (synack %lu rst %lu other %lu)\n",
                out.total - total0, phase, out.synack, out.rst, out.other);
        exit(1);
    }
    if (errs != 0)
        die("a pcb got an error callback");
}

/* ns per pure ACK, the flows taking turns in |ord| (cycled). A warm-up
 * pass first brings the list into its steady order. */
static double
measure_acks(const uint16_t *ord, long len, double walk, const char *phase)
{
    long idx = 0, warm = len < 2L * nflows ? len : 2L * nflows;
    for (long r = 0; r < warm; r++)
        inject(ack_pkt[ord[r]], 40);
    long per = segs_for(walk) / BATCHES;
    if (per < 1)
        per = 1;
    double b[BATCHES];
    unsigned long t0out = out.total;
    for (int k = 0; k < BATCHES; k++) {
        uint64_t t0 = cpu_ns();
        for (long r = 0; r < per; r++) {
            inject(ack_pkt[ord[idx]], 40);
            if (++idx == len)
                idx = 0;
        }
        b[k] = (double)(cpu_ns() - t0) / (double)per;
    }
    check_quiet(t0out, phase);
    return median(b, BATCHES);
}

static double clock_overhead;

static void
measure_clock(void)
{
    enum { IT = 100001 };
    static double d[IT];
    for (long r = 0; r < IT; r++) {
        uint64_t a = now_ns();
        uint64_t b = now_ns();
        d[r] = (double)(b - a);
    }
    clock_overhead = median(d, IT);
}

/* A SYN for a new connection, timed one by one with the monotonic clock
 * (median, less the clock's own cost: one SYN is deterministic work, so the
 * median drops only preemptions); its pcb is abandoned without a RST
 * outside the timing, which leaves the list as it was. */
static double
measure_syn(int n)
{
    uint8_t syn[64], pkt[64];
    size_t len = build(syn, SYN_PORT, 0, TCP_SYN, client_isn(SYN_PORT), 0);
    long it = segs_for(n) / 4;
    if (it < 201)
        it = 201;
    double *d = malloc(sizeof(*d) * (size_t)it);
    if (d == NULL)
        die("out of memory");
    unsigned long synack0 = out.synack, total0 = out.total;
    for (long r = -10; r < it; r++) {
        memcpy(pkt, syn, len);
        uint64_t t0 = now_ns();
        inject(pkt, len);
        uint64_t t1 = now_ns();
        struct tcp_pcb *p = tcp_active_pcbs;
        if (p == NULL || p->remote_port != SYN_PORT || p->state != SYN_RCVD)
            die("the SYN made no new pcb at the front");
        tcp_abandon(p, 0);
        if (r >= 0)
            d[r] = (double)(t1 - t0);
    }
    if (out.synack - synack0 != (unsigned long)it + 10 || out.total - total0 != (unsigned long)it + 10)
        die("expected exactly one SYN-ACK per SYN");
    if (errs != 0)
        die("a pcb got an error callback");
    if (tcp_trouble() != trouble0)
        die("lwIP counted dropped or failed segments during the SYNs");
    if (count_active() != n)
        die("the active list does not hold N pcbs after the SYNs");
    double m = median(d, (int)it) - clock_overhead;
    free(d);
    return m;
}

/* chute's 5-tuple table: the key built from the packet bytes as
 * netstack_key_from_view does, hashed, looked up. */
struct hflow {
    struct ip_tuple_node node;
    uint8_t body[256]; /* stands for the rest of a flow's state */
};

static struct ip_tuple_table *ht;
static struct hflow *hflows[MAX_FLOWS];
static volatile uintptr_t sink;

static inline void
key_from_pkt(struct ip_tuple *k, const uint8_t *pkt)
{
    memset(k, 0, sizeof(*k));
    k->proto = 6;
    k->version = 4;
    k->sport = (uint16_t)(pkt[20] << 8 | pkt[21]);
    k->dport = (uint16_t)(pkt[22] << 8 | pkt[23]);
    memcpy(k->src, pkt + 12, 4);
    memcpy(k->dst, pkt + 16, 4);
}

static inline struct ip_tuple_node *
hash_find(const uint8_t *pkt)
{
    struct ip_tuple k;
    key_from_pkt(&k, pkt);
    return ip_tuple_lookup(ht, &k, ip_tuple_hash(ht, &k));
}

static void
hash_grow_to(int n)
{
    static int have;
    for (; have < n; have++) {
        struct hflow *f = calloc(1, sizeof(*f));
        if (f == NULL)
            die("out of memory");
        key_from_pkt(&f->node.key, ack_pkt[have]);
        if (ip_tuple_insert(ht, &f->node, ip_tuple_hash(ht, &f->node.key)) != 0)
            die("ip_tuple_insert");
        hflows[have] = f;
    }
}

static double
measure_hash(const uint16_t *ord, long len)
{
    long per = (quick ? 400000 : 4000000) / BATCHES, idx = 0;
    uintptr_t acc = 0;
    double b[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        uint64_t t0 = cpu_ns();
        for (long r = 0; r < per; r++) {
            acc += (uintptr_t)hash_find(ack_pkt[ord[idx]]);
            if (++idx == len)
                idx = 0;
        }
        b[k] = (double)(cpu_ns() - t0) / (double)per;
    }
    sink = acc;
    return median(b, BATCHES);
}

/* ---- main ----------------------------------------------------------- */

struct row {
    int n;
    double front, rr, rrseq, rnd, syn, hfront, hrr, hrnd;
};

static double
slope(const struct row *r, int nr, size_t off)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < nr; i++) {
        double x = r[i].n, y = *(const double *)((const char *)&r[i] + off);
        sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    double d = nr * sxx - sx * sx;
    return d == 0 ? 0 : (nr * sxy - sx * sy) / d;
}

int
main(int argc, char **argv)
{
    int ns[32], nn = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[a], "-h") == 0 || strcmp(argv[a], "--help") == 0) {
            printf("usage: lwip_demux [--quick] [N ...]  (N ascending, <= %d)\n", MAX_FLOWS);
            return 0;
        } else {
            int n = atoi(argv[a]);
            if (n < 1 || n > MAX_FLOWS || nn == 32 || (nn > 0 && n <= ns[nn - 1])) {
                fprintf(stderr, "lwip_demux: bad N '%s' (ascending, 1..%d)\n", argv[a], MAX_FLOWS);
                return 2;
            }
            ns[nn++] = n;
        }
    }
    if (nn == 0) {
        static const int def[] = {1, 100, 1000, 4000, 8000};
        for (nn = 0; nn < 5; nn++)
            ns[nn] = def[nn];
    }

    lwip_setup();
    ht = ip_tuple_table_new();
    if (ht == NULL)
        die("ip_tuple_table_new");
    measure_clock();
    trouble0 = tcp_trouble();
    printf("# lwIP %s, sizeof(struct tcp_pcb) %zu (remote_port at byte %zu, next at %zu, state at %zu), "
           "pcb pool %d; clock_gettime pair %.1f ns\n",
           LWIP_VERSION_STRING, sizeof(struct tcp_pcb), offsetof(struct tcp_pcb, remote_port),
           offsetof(struct tcp_pcb, next), offsetof(struct tcp_pcb, state), MEMP_NUM_TCP_PCB,
           clock_overhead);

    struct row rows[32];
    for (int r = 0; r < nn; r++) {
        int n = ns[r];
        while (nflows < n)
            establish(nflows++);
        if (count_active() != n)
            die("the active list does not hold N pcbs");
        hash_grow_to(n);
        make_orders(n);
        struct row *w = &rows[r];
        w->n = n;
        w->front = measure_acks(ord_front, 1, 0, "front ACKs");
        if (tcp_active_pcbs != flow_pcb[n - 1])
            die("the front pcb is not at the front");
        w->rrseq = measure_acks(ord_seq, n, n, "round-robin ACKs (pool order)");
        w->rnd = measure_acks(ord_rand, RAND_LEN, n / 2.0, "random ACKs");
        w->rr = measure_acks(ord_perm, n, n, "round-robin ACKs");
        w->syn = measure_syn(n); /* the list in the shuffled order */
        w->hfront = measure_hash(ord_front, 1);
        w->hrr = measure_hash(ord_perm, n);
        w->hrnd = measure_hash(ord_rand, RAND_LEN);
        for (int i = 0; i < n; i++)
            if (flow_pcb[i]->state != ESTABLISHED)
                die("a flow left ESTABLISHED");
        printf("row %d %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f\n", n, w->front, w->rr, w->rrseq,
               w->rnd, w->syn, w->hfront, w->hrr, w->hrnd);
        fflush(stdout);
    }

    printf("# verified: lwIP emitted %lu segments, all SYN-ACKs (%lu); none during the ACK phases\n",
           out.total, out.synack);
    printf("# ns per injected segment (pbuf_alloc + copy + tcp_input); ip_tuple: key + hash + lookup\n");
    printf("%6s | %8s | %8s | %8s | %8s | %8s || %s\n", "N", "front", "rr", "rr-pool", "random",
           "SYN", "ip_tuple front / rr / random");
    for (int r = 0; r < nn; r++)
        printf("%6d | %8.1f | %8.1f | %8.1f | %8.1f | %8.1f || %6.1f / %6.1f / %6.1f\n", rows[r].n,
               rows[r].front, rows[r].rr, rows[r].rrseq, rows[r].rnd, rows[r].syn, rows[r].hfront,
               rows[r].hrr, rows[r].hrnd);
    if (nn >= 2)
        printf("# slope, ns per pcb in the list (least squares over N): rr %.2f, rr-pool %.2f, "
               "random %.2f, SYN %.2f; ip_tuple rr %.4f\n",
               slope(rows, nn, offsetof(struct row, rr)), slope(rows, nn, offsetof(struct row, rrseq)),
               slope(rows, nn, offsetof(struct row, rnd)), slope(rows, nn, offsetof(struct row, syn)),
               slope(rows, nn, offsetof(struct row, hrr)));
    return 0;
}
