#ifndef CHUTE_FLOW_FLOW_H
#define CHUTE_FLOW_FLOW_H

/* The flow object and the flow table: one entry per connection the engine
 * relays, with its route decision and its stats. The table owns the list of
 * live flows and the totals of closed ones; the inbound that accepted a flow
 * owns its sockets. */

#include <ev.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log/counter.h"

#include "flow/addr.h"

enum flow_network { FLOW_TCP = 0, FLOW_UDP };
enum flow_inbound { FLOW_IN_SOCKS = 0, FLOW_IN_HTTP, FLOW_IN_TUN, FLOW_IN_REVERSE };

/* A named flow's addresses, resolved (at most once, lazily) because
 * route() reached an IP rule without no-resolve before any rule matched. */
#define FLOW_RESOLVED_MAX 4
enum flow_resolve_state { FLOW_RESOLVE_NONE = 0, FLOW_RESOLVE_DONE, FLOW_RESOLVE_FAILED };
struct flow_resolved {
    uint8_t state;   /* enum flow_resolve_state */
    uint8_t n;       /* addresses in ip[] */
    uint8_t v6;      /* bit i: ip[i] is IPv6 (else IPv4, first 4 bytes) */
    uint8_t ip[FLOW_RESOLVED_MAX][16];
};

struct flow {
    uint64_t id;
    enum flow_network network;
    enum flow_inbound inbound;
    uint8_t http_plain;       /* FLOW_IN_HTTP: a forwarded plain request (mihomo's IN-TYPE
                               * HTTP), not a CONNECT tunnel (its HTTPS) */
    struct sockaddr_storage src;
    struct sockaddr_storage local; /* what the client's socket is connected to: the
                                    * listener (proxies) or the destination (TUN) */
    struct flow_addr dst;     /* as the client asked: IP literal or name */
    int policy;               /* enum flow_policy (or a later proxy id) */
    const char *rule;         /* what decided: "route", "fallback: <reason>" (static) */
    const char *policy_name;  /* the policy's name (interned: lives forever), NULL: built-in */
    const char *via;          /* what a group picked: a proxy's name (interned), or NULL */
    uint8_t _reads;           /* FLOW_READ_*: what route() looked at (the decision cache) */
    uint8_t _sniffable;       /* the inbound can read a host from the first bytes: a route()
                               * that asks for the missing host is a trial, decided again */
    uint8_t _resolvable;      /* whoever opens the flow can resolve its name first: a route()
                               * that reaches an IP rule needing the address is a trial */
    struct flow_resolved resolved; /* a named flow's addresses, for IP rules (FLOW_READ_RESOLVE) */
    char why[128];            /* what matched: "rules/ads.list:12", "rule 3 DOMAIN,a.com" */
    char *sniffed;            /* the name read from the first bytes (TLS SNI, HTTP Host); owned */
    int8_t mitm;              /* route()'s say on the MITM: 0 the host list decides,
                               * 1 intercept, -1 never ({ mitm = false }) */
    uint64_t bytes_up;        /* client -> upstream */
    uint64_t bytes_down;      /* upstream -> client */
    double started;           /* io_mono_now() at accept */
    const struct flow_owner_ops *_owner; /* flow_set_owner: who holds its streams */
    void *_owner_arg;
    struct flow *_prev, *_next;
};

/* Whoever holds a flow's streams (flow/tcp.c, flow/udp.c, the listeners),
 * so the table can describe and close any flow (the control API). */
struct flow_owner_ops {
    /* What the flow is doing now, a static word: "connecting", "sniffing",
     * "relay", ... */
    const char *(*state)(const struct flow *f, void *arg);
    /* Ends the flow now, both sides reset; its close line says |reason|.
     * The flow is gone when this returns. */
    void (*close)(struct flow *f, void *arg, const char *reason);
};

/* route() read a field the decision cache's key does not hold. */
#define FLOW_READ_UNCACHEABLE 0x01
/* route() asked for the host of a flow that had none: worth sniffing. */
#define FLOW_READ_HOST 0x02
/* route() reached an IP rule without no-resolve, for a named flow whose
 * addresses are not known yet: resolve it, then decide again. */
#define FLOW_READ_RESOLVE 0x04

/* What the paths that accept flows (the TUN's TCP in netstack and its UDP
 * NAT in flow/udp.c, the SOCKS5 and HTTP listeners) need from the engine,
 * injected once by it: nothing below engine/ reaches up. */
struct flow_opts {
    double connect_timeout; /* seconds an upstream open may take */
    double idle_timeout;    /* TCP: seconds with no byte moved */
    double udp_timeout;     /* UDP: seconds a NAT entry lives unused */
    /* TUN flows at most (the engine's memory_limit), 0: no cap. A new TCP
     * flow past tcp_max gets a RST; a new UDP mapping past udp_max takes
     * the least recently used one's place. Both count as refused. */
    size_t tcp_max, udp_max;
};

struct outbound_env;
struct flow_relay;
struct flow_relay_args;

/* A handler above flow/ that takes some decided flows' two streams in
 * place of the byte relay: the MITM. The inbounds do not know it exists:
 * flow_relay_upstream asks it first. */
struct flow_intercept {
    /* 1 when |f| (decided, its upstream open) goes to the handler. */
    int (*wants)(void *ud, const struct flow *f);
    /* Takes |a|'s streams (and copies its byte arrays) as flow_relay_start
     * would; its state is returned (r->_icpt_state), and when the flow is
     * over the handler calls flow_relay_intercept_done(r, reason) from the
     * loop. NULL when out of memory: the streams are still the caller's. */
    void *(*start)(void *ud, struct flow_relay *r, const struct flow_relay_args *a,
                   struct flow *f);
    /* Ends the handler's flow now (a reset both ways when |reset|),
     * without the done call. */
    void (*stop)(void *state, int reset);
    void *ud;
};

struct flow_env {
    struct ev_loop *loop;
    struct flow_table *flows;
    const struct outbound_env *out;   /* upstreams */
    const struct outbound_env *local; /* chute's own listeners (its DNS server) */
    /* The engine's; rewritten in place by a reload, so a running flow takes
     * the new timeouts at its next check. */
    const struct flow_opts *opts;
    /* Names a new flow's destination: a fake IP becomes its name; 0, or -1
     * for a fake IP with no name behind it (refuse the flow). */
    int (*name)(void *ud, struct flow *f);
    /* Decides |f|'s policy (the decision cache, else the script's route())
     * and names the policy. */
    void (*decide)(void *ud, struct flow *f);
    /* Resolves |f|'s name into f->resolved (the real answer, even in
     * fake-IP mode; FLOW_RESOLVE_FAILED when there is none) and calls
     * |done| from the loop, never from inside; returns a handle for
     * resolve_cancel, or NULL when out of memory. NULL |resolve|: the
     * engine cannot resolve, and flow_open never waits. */
    void *(*resolve)(void *ud, struct flow *f, void (*done)(void *arg), void *arg);
    void (*resolve_cancel)(void *ud, void *handle);
    /* 1 when chute's DNS server takes this TCP flow (TCP/53): |f|'s
     * destination is then its listener, opened DIRECT through |local|. */
    int (*dns_tcp)(void *ud, struct flow *f);
    void *ud;
    /* NULL, or the MITM: set by the engine, may change at a reload (a
     * running flow keeps the handler it started with). */
    const struct flow_intercept *intercept;
};

/* The flow table's counters, one X(field, key) each (log/counter.h). */
#define FLOW_TABLE_STATS(X)                                                                        \
    X(active, flows_active)                                                                        \
    X(total, flows_total)                                                                          \
    X(bytes_up, bytes_up)     /* client -> upstream, all flows */                                  \
    X(bytes_down, bytes_down) /* upstream -> client */                                  \
    X(refused, flows_refused) /* new flows refused at flow_opts' caps */

struct flow_table_stats {
#define X(field, key) uint64_t field;
    FLOW_TABLE_STATS(X)
#undef X
};
/* FLOW_TABLE_STATS as a table over struct flow_table_stats. */
extern const struct log_counter flow_table_counters[];

struct flow_table *flow_table_new(void);
/* Frees the table; flows still in it must have been removed by their owners. */
void flow_table_free(struct flow_table *t);

/* Links |f| (caller-owned memory) into the table, giving it an id. */
void flow_table_add(struct flow_table *t, struct flow *f, double now);
/* Unlinks |f|, adds its bytes to the totals and logs its close line
 * ("reason" is a short static string: "done", "reset", "idle", ...). */
void flow_table_remove(struct flow_table *t, struct flow *f, double now, const char *reason);

void flow_table_stats(const struct flow_table *t, struct flow_table_stats *out);
/* A new |what| ("TCP", "UDP": a static string) flow refused at a cap of
 * |cap|: counted, and logged at most once per 10 s (and when |what|
 * changes) with the count since the last line. */
void flow_table_refused(struct flow_table *t, const char *what, size_t cap, double now);

/* Sets |f|'s owner (after flow_table_add). */
void flow_set_owner(struct flow *f, const struct flow_owner_ops *ops, void *arg);
/* The live flow with |id|, or NULL. A walk: the control API's scale. */
struct flow *flow_table_find(const struct flow_table *t, uint64_t id);
/* Closes the live flow |id| through its owner: 0, or -1 when there is no
 * such flow, -2 when it has no owner. */
int flow_table_close(struct flow_table *t, uint64_t id, const char *reason);
/* Calls |fn| for every live flow, oldest first; |fn| must not close one. */
void flow_table_each(const struct flow_table *t, void (*fn)(void *arg, const struct flow *f),
                     void *arg);
/* A walk over the live flows, oldest first, that survives flows closing
 * between its steps (GET /connections, written in slices as the client
 * reads): the table moves an open cursor off a flow it removes. The
 * cursor is the caller's memory; open ones are few (the table walks them
 * at every remove). */
struct flow_cursor {
    struct flow *_at;           /* the next flow to give; the table's head: the end */
    struct flow_cursor *_next;  /* the table's open cursors */
};
void flow_cursor_open(struct flow_table *t, struct flow_cursor *c);
/* The next live flow, or NULL at the end. */
const struct flow *flow_cursor_next(struct flow_table *t, struct flow_cursor *c);
/* Before |c|'s memory goes (at the end too). */
void flow_cursor_close(struct flow_table *t, struct flow_cursor *c);

/* |f| as one line, the fields of its close line with state=<owner's word>
 * in place of close=, at |now|. Returns the length (truncated to |len|-1). */
size_t flow_describe(const struct flow *f, double now, char *buf, size_t len);

/* Logs that |f|'s upstream could not be reached, and why. */
/* At debug level: how |f| was decided, once route() (or the decision
 * cache, rule "route (cached)") gave its policy. */
void flow_log_decided(const struct flow *f);
void flow_log_connect_failed(const struct flow *f, const char *why);

/* Formatting helpers for logs and the script: "1.2.3.4", "[::1]:80", "name:443". */
const char *flow_network_name(enum flow_network n);
const char *flow_inbound_name(enum flow_inbound i);

#endif
