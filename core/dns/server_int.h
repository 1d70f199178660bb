#ifndef CHUTE_DNS_SERVER_INT_H
#define CHUTE_DNS_SERVER_INT_H

/* Private to the DNS server's files: server.c answers, listen.c carries. */

#include "dns/dns.h"
#include "dns/msg.h"

#define DNS_HOOK_BUCKETS 1024

struct hook_entry;
struct pending;
struct dns_tcp_conn;

struct dns_server {
    struct ev_loop *loop;
    struct dns_resolver *r;
    enum dns_mode mode;
    uint32_t fake_ttl;
    struct dns_fakeip *fake;
    struct rules_domains *exclude;
    char *state_file;
    int dirty;                     /* mappings changed since the last save */
    ev_timer save_timer;
    dns_hook_fn hook;
    void *hook_arg;
    struct hook_entry *hooks[DNS_HOOK_BUCKETS];
    size_t nhooks;
    struct pending *pend, *pend_tail; /* queries at the upstreams, oldest first */
    size_t npend, max_pending;
    double pend_logged;            /* when the cap was last logged */
    struct dns_server_stats st;
    /* listen.c */
    int udp_fd, tcp_fd;
    ev_io udp_io, tcp_io;
    struct sockaddr_storage tcp_addr;
    struct dns_tcp_conn *tcp_conns;
    struct dns_msg msg;            /* scratch: one query parsed at a time */
    uint8_t out[DNS_MSG_MAX];      /* scratch: one answer built at a time */
};

/* listen.c: the UDP and TCP listener (|addr| NULL: TCP on 127.0.0.1 with an
 * ephemeral port only, for the TUN's TCP/53). */
int dns_server_listen(struct dns_server *s, const struct sockaddr_storage *addr, char *err,
                      size_t errlen);
void dns_server_unlisten(struct dns_server *s);

/* logq.c: logs the answer |msg| (|len| bytes) at debug level, saying
 * |how| it was made ("fake-ip", "forwarded", ...). */
void dns_server_log_answer(const uint8_t *msg, size_t len, const char *how);

#endif
