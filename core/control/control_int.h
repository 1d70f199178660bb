#ifndef CHUTE_CONTROL_CONTROL_INT_H
#define CHUTE_CONTROL_CONTROL_INT_H

/* The control server's insides, shared by its files: server.c (sockets,
 * timers), client.c (requests, answers), req.c (targets, auth), api.c
 * (the Clash endpoints), stream.c (streams, WebSocket), metrics.c, ui.c. */

#include <wslay/wslay.h>

#include "control/control.h"
#include "http/http.h"
#include "flow/flow.h"
#include "log/log.h"

enum control_topic {
    TOPIC_NONE = 0,
    TOPIC_TRAFFIC,     /* {"up":..,"down":..} per second */
    TOPIC_MEMORY,      /* {"inuse":..,"oslimit":0} per second */
    TOPIC_LOGS,        /* {"type":"info","payload":".."} per line */
    TOPIC_CONNECTIONS, /* the GET /connections object per second (WebSocket) */
};

enum control_mode_kind { MODE_HTTP = 0, MODE_CHUNKED, MODE_WS };

struct control_client {
    struct control *c;
    int fd;                    /* -1: a fake client (control_client_fake) */
    ev_io rw, ww;
    char in[CONTROL_IN_MAX];
    size_t in_len;
    char *out;                 /* queued answer bytes: out[out_off .. out_len) */
    size_t out_off, out_len, out_cap;
    enum control_mode_kind mode;
    enum control_topic topic;
    int log_level;             /* TOPIC_LOGS: lines up to this level */
    int close_after;           /* close once the queue is sent */
    int dead;                  /* closed while inside a call: freed by its caller */
    int busy;                  /* inside client_process */
    struct flow_cursor cursor; /* GET /connections in progress: where it is, */
    int listing;               /* 1 while the list is being written (the cursor is open) */
    struct control_delay *delay; /* a delay test in progress */
    struct control_dnsq *dnsq;   /* a DNS query in progress */
    int list_first;
    wslay_event_context_ptr ws;
    double last_active;        /* io_mono_now(), as since */
    double since;              /* accepted at, io_mono_now() */
    int answered;              /* a whole request came: its handshake is done */
    uint8_t src[16];           /* the peer's address (flow_sockaddr_key) */
    void (*fake_cb)(void *arg, const char *p, size_t n);
    void *fake_arg;
    struct control_client *prev, *next;
};

struct control_stats {
    uint64_t requests, unauthorized, bad_requests, dropped, clients;
    uint64_t hs_timeouts; /* closed: no whole request within CONTROL_HS_DEADLINE */
    uint64_t source_drops; /* closed: CONTROL_HS_PER_SOURCE unfinished from its address */
};

struct control {
    struct control_env env;
    struct control_opts o;
    int fd;
    ev_io w;
    ev_timer tick;             /* 1 s: streams, rates, idle clients */
    ev_timer retry;            /* accept paused after EMFILE */
    int paused;                /* pauses since the last accept that worked (logged once) */
    int emfile_told;           /* ... and this episode's was logged */
    double emfile_logged;      /* when a pause was last logged */
    double hs_logged;          /* when the per-source cap was last logged */
    struct control_client head;
    size_t nclients;
    uint64_t last_up, last_down, rate_up, rate_down;
    int ticked;                /* last_up/last_down hold a tick's totals */
    struct control_stats st;
    char origin[128];          /* "http://127.0.0.1:9090": the default CORS origin */
    double dns_timeout;        /* GET /dns/query's deadline (5 s, as Clash's) */
};

/* req.c: the request target and the secret, sans-I/O. */
#define CONTROL_MAX_SEGS 4
struct control_target {
    char segs[CONTROL_MAX_SEGS][256]; /* percent-decoded path segments */
    size_t nsegs;
    struct mem_slice query;           /* raw, after '?' */
};
/* Splits "/a/b%20c?x=1" into segments; -1 for a target that is not an
 * origin-form path, has too many or too long segments, or a bad escape. */
int control_target_parse(struct mem_slice target, struct control_target *t);
/* The decoded value of |key| in |query|: 1 found, 0 absent, -1 malformed
 * or longer than |len| - 1. */
int control_query_get(struct mem_slice query, const char *key, char *out, size_t len);
/* 1 if |req| carries |secret| (Authorization: Bearer, or ?token=), compared
 * in constant time; always 1 for an empty secret. */
int control_auth_ok(const char *secret, const struct http_request *req, struct mem_slice query);

#define METHOD_IS(req, m) mem_slice_eq((req)->method, MEM_SLICE_LIT(m))

/* client.c: takes the bytes read into cl->in (the server, the fake
 * client): answers requests, feeds WebSocket frames. -1 if the client was
 * closed (and freed). */
int control_client_input(struct control_client *cl);
/* 1 when requests wait in cl->in and nothing holds them back. */
int control_client_ready(const struct control_client *cl);
/* client.c: answers. */
int control_out_append(struct control_client *cl, const void *p, size_t n);
void control_reply(struct control_client *cl, int status, const char *ctype, const char *body,
                   size_t len);
void control_reply_json(struct control_client *cl, int status, void *json /* json_t*, stolen */);
void control_reply_error(struct control_client *cl, int status, const char *message);

/* api.c: Clash's JSON of policy |policy| in |s| (NULL if none such). */
struct outbound_set;
void *control_proxy_json(struct outbound_set *s, int policy); /* json_t* */
/* providers.c: the /providers/... routes; 0 when |t| is none of them. */
struct control_target;
int control_providers(struct control_client *cl, const struct http_request *req,
                      const struct control_target *t);
/* An answer that came after the request returned (a delay test, a DNS
 * query): sent, then the requests that waited behind it are read. */
void control_reply_late(struct control_client *cl, int status, void *json /* stolen */);
/* 1 while the client waits for such an answer (it reads nothing more). */
#define CONTROL_WAITING(cl) ((cl)->delay != NULL || (cl)->dnsq != NULL)
/* Starts a chunked answer (200) or writes one chunk / WebSocket message. */
void control_stream_head(struct control_client *cl, const char *ctype);
int control_stream_send(struct control_client *cl, const char *p, size_t n);
void control_client_kill(struct control_client *cl);
/* Marks |cl| dead and stops its watchers; the tick frees it (for callers
 * that may have it up the stack: the log tap). */
void control_client_park(struct control_client *cl);
void control_client_flush(struct control_client *cl);
/* server.c: reading again after a wait (a delay test), and the requests
 * that came meanwhile. */
void control_client_resume(struct control_client *cl);

/* api.c: the Clash endpoints. 1 when the target was one of them. */
int control_api(struct control_client *cl, const struct http_request *req,
                const struct control_target *t, const char *body, size_t blen);

/* flows.c: GET /connections, streamed in slices (control_list_more from
 * the flush); the object as one bounded WebSocket message; the RSS. */
void control_list_start(struct control_client *cl);
void control_list_more(struct control_client *cl);
/* Closes the walk of a list in progress (a client that goes). */
void control_list_end(struct control_client *cl);
char *control_list_message(struct control *c, size_t cap, size_t *len);
uint64_t control_memory_inuse(void);

/* stream.c */
int control_ws_upgrade(struct control_client *cl, const struct http_request *req);
int control_ws_feed(struct control_client *cl);
void control_ws_free(struct control_client *cl);
void control_streams_tick(struct control *c);
void control_streams_tick_one(struct control_client *cl);
int control_ws_pump(struct control_client *cl);
void control_logs_tap(void *arg, enum log_level level, const char *msg, size_t len);

/* delay.c: GET /proxies/:name/delay (|group| 0) and /group/:name/delay
 * (1: every member), answered when the tests end. */
void control_delay(struct control_client *cl, const char *name, struct mem_slice query,
                   int group);
void control_delay_cancel(struct control_client *cl);

/* dnsq.c: GET /dns/query?name=&type=, answered when the resolver is. */
void control_dns(struct control_client *cl, struct mem_slice query);
void control_dns_cancel(struct control_client *cl);

/* metrics.c, ui.c */
void control_metrics(struct control_client *cl);
int control_ui(struct control_client *cl, const struct control_target *t);

#endif
