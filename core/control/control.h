#ifndef CHUTE_CONTROL_CONTROL_H
#define CHUTE_CONTROL_CONTROL_H

/* The control API: an HTTP/1.1 server on the engine's loop that speaks the
 * Clash REST API (so yacd, metacubexd and zashboard drive chute as they are),
 * streams traffic, memory and logs over chunked HTTP or WebSocket, serves
 * Prometheus text at /metrics and a built-in dashboard at /ui/.
 *
 * It sees the engine only through struct control_env, injected by
 * engine/: the flow table, the counters, the current policies, a reload.
 * Only the loop thread calls into it. Memory per client is bounded: a
 * request head and body up to CONTROL_IN_MAX, answers queued up to
 * CONTROL_OUT_MAX; a client whose queue is full is dropped. */

#include <ev.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log/counter.h"

#define CONTROL_IN_MAX 16384      /* request head + body: 431 / 413 beyond */
#define CONTROL_OUT_MAX 262144    /* answer bytes queued per client */
#define CONTROL_MAX_CLIENTS 1024  /* more are refused at accept */
/* Clients from one address that have not sent a whole request yet: a new
 * one past it closes that address's oldest, so one source cannot push
 * another's out through the global cap. */
#define CONTROL_HS_PER_SOURCE 256

struct flow_table;
struct outbound_set;
struct outbound_env;
struct control;

struct control_opts {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char text[80];     /* the address as written ("127.0.0.1:9090"), for logs */
    char secret[256];  /* "" none: only a loopback address may go without */
    char cors[256];    /* Access-Control-Allow-Origin; "" the dashboard's own origin */
};

/* GET /providers/proxies and /providers/rules: one of the bundle's remote
 * proxy providers or rule sets, as the engine sees it now. */
struct control_provider {
    char name[128];       /* the provider's name; a rule set's path or URL */
    int rules;            /* a rule set (else a provider of proxies) */
    char behavior[16];    /* a rule set's: "classical", "domain", "ipcidr" */
    double age;           /* seconds since its cache was written; -1: none yet */
    size_t count;         /* rules, or proxies, loaded */
};

/* A DNS response message for GET /dns/query, or NULL with |err| (the
 * resolver's error text). Valid during the call. */
typedef void (*control_dns_cb)(void *arg, const uint8_t *resp, size_t len, const char *err);

/* What a counter consumer is handed: |n| groups, valid during the call. */
typedef void (*control_counters_fn)(void *arg, const struct log_counter_group *g, size_t n);

struct control_env {
    struct ev_loop *loop;
    struct flow_table *flows;
    /* Upstreams for delay tests (the engine's: its set follows reloads). */
    const struct outbound_env *out;
    /* The current bundle's policies (a reload replaces them), or NULL. */
    struct outbound_set *(*set)(void *ud);
    /* Calls |emit| once with every module's counters at this moment. */
    void (*counters)(void *ud, control_counters_fn emit, void *arg);
    /* Reloads the bundle from where it came (the outcome goes to the log). */
    void (*reload)(void *ud);
    /* The routing mode: "rule" (the script decides), "direct", "global"
     * (every new flow to the group or proxy called GLOBAL). set_mode
     * returns 0, or -1 with |err|. */
    const char *(*mode)(void *ud);
    int (*set_mode)(void *ud, const char *mode, char *err, size_t errlen);
    /* The bundle's fallback policy name, for GET /rules. */
    const char *(*fallback)(void *ud);
    /* GET /configs' port, socks-port and mixed-port: the listeners' TCP
     * ports (0: none). NULL: all 0. */
    void (*ports)(void *ud, int *http, int *socks, int *mixed);
    /* GET /dns/query: relays the query message |q| through chute's
     * resolver; |cb| gets the answer later, never from inside the call.
     * Returns a handle for dns_cancel, or NULL (no resolver, no memory).
     * NULL functions: the endpoint answers 500, as Clash without DNS. */
    void *(*dns_query)(void *ud, const uint8_t *q, size_t len, control_dns_cb cb, void *arg);
    void (*dns_cancel)(void *ud, void *query);
    /* /providers/...: the bundle's remotes, up to |max| into |out|;
     * returns how many there are. provider_proxy gives the |k|-th proxy
     * name of provider |name| (NULL past the last). provider_refresh
     * fetches one now: 0 (or already fetching), -1 when there is none
     * such. NULL functions: no providers. */
    size_t (*providers)(void *ud, struct control_provider *out, size_t max);
    const char *(*provider_proxy)(void *ud, const char *name, size_t k);
    int (*provider_refresh)(void *ud, int rules, const char *name);
    void *ud;
};

/* Listens on |o|'s address. NULL with |err| ("control: listen on ...:
 * Address already in use"). With |o| NULL nothing listens: clients come
 * from control_client_feed (tests, the fuzzer). */
struct control *control_new(const struct control_env *env, const struct control_opts *o, char *err,
                            size_t errlen);
/* A reload's options. The secret and the CORS origin hold from the next
 * request on; when the secret changed, every client connected before
 * (streams too) is closed but the one whose request is being answered. A
 * new address listens before the old one closes; if it cannot, the old one
 * stays and -1 comes back with |err|. |o| NULL: stops listening and closes
 * every client (a bundle without control = {...}); options given later
 * listen again. */
int control_configure(struct control *c, const struct control_opts *o, char *err, size_t errlen);
/* Closes the listener and every client. NULL is fine. */
void control_free(struct control *c);

/* For the fuzzer and unit tests: a client without a socket. Feeds |len|
 * request bytes; the answers are discarded once |cb| (may be NULL) saw
 * them. Returns 0 while the connection stays open, -1 once closed. */
struct control_client;
struct control_client *control_client_fake(struct control *c,
                                           void (*cb)(void *arg, const char *p, size_t n),
                                           void *arg);
/* Sets the secret of a control made without options (tests). */
void control_test_secret(struct control *c, const char *secret);
int control_client_feed(struct control_client *cl, const void *buf, size_t len);
void control_client_close(struct control_client *cl);

/* ctl.c: `chute ctl ...`, a client of this API. argv[0] is "ctl". Returns
 * the process's exit status. */
int control_ctl_main(int argc, char **argv);

#endif
